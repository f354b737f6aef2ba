//! Damage to the log: bit flips and truncations at random offsets are all detected (the open
//! fails with LOG_CORRUPT naming file and offset, or reports the tail it trimmed), a torn
//! tail is trimmed and writing resumes, mid-log damage is refused.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use mwp_core::Code;
use mwp_host::service::AuthorityService;
use mwp_host::store::backend::{Backend, MemBackend, Rng};
use mwp_host::store::format::{FILE_HEADER_LEN, RECORD_HEADER_LEN};
use mwp_host::store::{fsck_with, FileStore};

/// A store after the workload, and the log files (segments and overlay) it wrote.
fn written() -> (MemBackend, Vec<PathBuf>) {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, opts());
    run(&mut rec, &workload());
    drop(rec);
    let dir = Path::new("/d/groups/g1");
    let files = be
        .list(dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".seg") || n.ends_with(".log"))
        .map(|n| dir.join(n))
        .collect();
    (be, files)
}

fn open(be: &MemBackend) -> mwp_core::Result<FileStore> {
    FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), opts())
}

/// Damage is detected when the open refuses with LOG_CORRUPT naming the file and an offset,
/// or reports what it trimmed or repaired; and fsck, run before the open, reports it.
fn assert_detected(be: &MemBackend, file: &Path, context: &str) {
    let fsck = fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(!fsck.findings.is_empty(), "{context}: fsck saw nothing");
    match open(be) {
        Err(e) => {
            assert_eq!(e.code, Code::LogCorrupt, "{context}: {e}");
            // fsck runs the open's own read-only replay: it reports the very same damage.
            assert!(
                fsck.findings
                    .iter()
                    .any(|f| f.damage && f.code == e.code && f.message == e.message),
                "{context}: the open says {e:?}, fsck says {:?}",
                fsck.findings
            );
            // Named: the damaged file, or the segment whose erased record lost its overlay entry.
            let named = e.details.get("file").and_then(|f| f.as_str()).unwrap_or("");
            let _ = file;
            assert!(
                (named.ends_with(".seg") || named.ends_with(".log"))
                    && e.details.contains_key("offset")
                    || e.message.contains("snapshot"),
                "{context}: {e:?}"
            );
        }
        Ok(s) => {
            let r = s.report();
            assert!(
                !r.trimmed.is_empty() || !r.repaired.is_empty(),
                "{context}: damage went unnoticed"
            );
        }
    }
}

#[test]
fn bit_flips_at_random_offsets_are_all_detected() {
    let (be, files) = written();
    let mut rng = Rng::new(7);
    let mut trials = 0;
    for file in &files {
        let bytes = be.read_file(file).unwrap();
        // The records; the zeros reserved after them hold nothing to damage (see
        // `damage_in_the_reserved_space_loses_nothing`).
        let end = records_end(&bytes);
        for _ in 0..60 {
            let image = be.crash_image(mwp_host::store::backend::PowerLoss::DropAll);
            let mut damaged = bytes.clone();
            let at = rng.below(end as u64) as usize;
            damaged[at] ^= 1 << rng.below(8);
            image.write_file(file, &damaged).unwrap();
            assert_detected(
                &image,
                file,
                &format!("bit flip at {}:{at}", file.display()),
            );
            trials += 1;
        }
    }
    eprintln!("bit flips detected: {trials}/{trials}");
}

#[test]
fn truncations_at_random_offsets_are_all_detected() {
    let (be, files) = written();
    let mut rng = Rng::new(11);
    for file in &files {
        let bytes = be.read_file(file).unwrap();
        let end = records_end(&bytes);
        for _ in 0..30 {
            let image = be.crash_image(mwp_host::store::backend::PowerLoss::DropAll);
            let at = rng.below(end as u64) as usize;
            image.write_file(file, &bytes[..at]).unwrap();
            assert_detected(
                &image,
                file,
                &format!("truncation of {} at {at}", file.display()),
            );
        }
    }
}

fn big_segments() -> mwp_host::store::StoreOptions {
    mwp_host::store::StoreOptions {
        segment_bytes: 1 << 20,
        ..opts()
    }
}

fn last_segment(be: &MemBackend) -> PathBuf {
    let dir = Path::new("/d/groups/g1");
    let last = be
        .list(dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".seg"))
        .max()
        .unwrap();
    dir.join(last)
}

#[test]
fn a_torn_tail_is_trimmed_and_writing_resumes() {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, opts());
    let text = workload();
    let first: String = text.lines().take(12).collect::<Vec<_>>().join("\n");
    run(&mut rec, &first);
    let head = rec.store.as_ref().unwrap().head_seq(&id("g1")).unwrap();
    drop(rec);
    let seg = last_segment(&be);
    let mut bytes = be.read_file(&seg).unwrap();
    let good = records_end(&bytes);
    // Half of a record header, as a write cut short by a power loss leaves it, at the end
    // of the file or in the space reserved after the last record.
    for reserved in [false, true] {
        bytes.truncate(good);
        if reserved {
            bytes.resize(good + 100, 0);
        }
        bytes[good..].fill(0);
        let torn = [0x2a, 0, 0, 0, (head + 1) as u8, 0, 0, 0, 0, 0];
        if reserved {
            bytes[good..good + 10].copy_from_slice(&torn);
        } else {
            bytes.extend_from_slice(&torn);
        }
        let image = be.crash_image(mwp_host::store::backend::PowerLoss::DropAll);
        image.write_file(&seg, &bytes).unwrap();
        let store = open(&image).unwrap();
        assert_eq!(
            store.report().trimmed,
            vec![(
                seg.display().to_string(),
                good as u64,
                bytes.len() as u64 - good as u64
            )]
        );
        assert_eq!(image.read_file(&seg).unwrap().len(), good);
    }
    be.write_file(&seg, &bytes).unwrap();
    let store = open(&be).unwrap();
    assert_eq!(store.head_seq(&id("g1")).unwrap(), head);
    drop(store);
    // Everything continues: the rest of the workload commits and reopens cleanly.
    let mut rec = Recorder::open(&be, opts());
    run(&mut rec, &text);
    let store = rec.store.take().unwrap().reopen().unwrap();
    assert!(store.report().trimmed.is_empty());
    assert!(fsck_with(Arc::new(be.clone()), Path::new("/d"))
        .unwrap()
        .is_clean());
}

#[test]
fn a_torn_batch_whose_later_pages_landed_is_still_a_torn_tail() {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, big_segments());
    let text = workload();
    let first: String = text.lines().take(4).collect::<Vec<_>>().join("\n");
    run(&mut rec, &first);
    drop(rec);
    // Records 2..4 rewritten as one batch (batch field 2) whose middle did not land.
    let seg = last_segment(&be);
    let bytes = be.read_file(&seg).unwrap();
    let first_rec = FILE_HEADER_LEN;
    let len1 = u32::from_le_bytes(bytes[first_rec..first_rec + 4].try_into().unwrap()) as usize;
    let second = first_rec + RECORD_HEADER_LEN + len1;
    let mut recs = Vec::new();
    let mut at = second;
    while at < records_end(&bytes) {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let seq = u64::from_le_bytes(bytes[at + 4..at + 12].try_into().unwrap());
        let payload = bytes[at + RECORD_HEADER_LEN..at + RECORD_HEADER_LEN + len].to_vec();
        recs.push((seq, payload));
        at += RECORD_HEADER_LEN + len;
    }
    assert_eq!(recs.len(), 3);
    let mut out = bytes[..second].to_vec();
    let mut batch = Vec::new();
    for (seq, p) in &recs {
        mwp_host::store::format::encode_record(&mut batch, *seq, 2, p);
    }
    let hole_start = RECORD_HEADER_LEN + recs[0].1.len() + 5;
    batch[hole_start..hole_start + 40].fill(0);
    out.extend_from_slice(&batch);
    be.write_file(&seg, &out).unwrap();
    let store = open(&be).unwrap();
    assert_eq!(
        store.head_seq(&id("g1")).unwrap(),
        2,
        "the batch is trimmed from its first damaged record"
    );
    assert_eq!(store.report().trimmed.len(), 1);
}

#[test]
fn mid_log_damage_is_refused_naming_file_and_offset() {
    let (be, _) = written();
    let dir = Path::new("/d/groups/g1");
    let first = dir.join("00000000000000000001.seg");
    let mut bytes = be.read_file(&first).unwrap();
    let at = FILE_HEADER_LEN + RECORD_HEADER_LEN + 3;
    bytes[at] ^= 0x40;
    be.write_file(&first, &bytes).unwrap();
    let e = open(&be).unwrap_err();
    assert_eq!(e.code, Code::LogCorrupt);
    // Named by its path, which says which group is damaged.
    assert_eq!(e.details["file"], "/d/groups/g1/00000000000000000001.seg");
    assert!(e
        .message
        .starts_with("/d/groups/g1/00000000000000000001.seg at offset"));
    assert_eq!(e.details["offset"], FILE_HEADER_LEN as u64);
    // Nothing was truncated: the file is as the damage left it.
    assert_eq!(be.read_file(&first).unwrap(), bytes);
    let report = fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(!report.is_clean());
}

#[test]
fn damage_in_the_last_segment_before_a_later_batch_is_refused() {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, big_segments());
    let text = workload();
    let first: String = text.lines().take(4).collect::<Vec<_>>().join("\n");
    run(&mut rec, &first);
    drop(rec);
    let seg = last_segment(&be);
    let mut bytes = be.read_file(&seg).unwrap();
    let at = FILE_HEADER_LEN + 2;
    bytes[at] ^= 1;
    be.write_file(&seg, &bytes).unwrap();
    let e = open(&be).unwrap_err();
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert!(e.message.contains("later write batch"), "{e}");
}

/// The path of group g1's newest snapshot file.
fn newest_snapshot(be: &MemBackend) -> PathBuf {
    let dir = Path::new("/d/groups/g1");
    let snap = be
        .list(dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".snap"))
        .max()
        .unwrap();
    dir.join(&snap)
}

/// Flips a bit in the middle of group g1's newest snapshot file.
fn damage_newest_snapshot(be: &MemBackend) {
    let path = newest_snapshot(be);
    let mut bytes = be.read_file(&path).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 4;
    be.write_file(&path, &bytes).unwrap();
}

#[test]
fn a_damaged_snapshot_is_passed_over_and_reported() {
    let (be, _) = written();
    damage_newest_snapshot(&be);
    let report = fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(!report.is_clean());
    let store = open(&be).unwrap();
    assert_eq!(store.report().skipped_snapshots.len(), 1);
    let want = {
        let (clean, _) = written();
        open(&clean).unwrap().state_hash(&id("g1")).unwrap()
    };
    assert_eq!(store.state_hash(&id("g1")).unwrap(), want);
}

/// The open loads the newest snapshot while it reads the log from the segment after it; when
/// that snapshot is refused, it reads the log again from the base it falls back to. A torn
/// tail the first read trimmed is reported once, and the state is the clean one.
#[test]
fn a_damaged_snapshot_and_a_torn_tail_are_both_reported() {
    let (be, _) = written();
    let want = open(&be).unwrap().state_hash(&id("g1")).unwrap();
    let head = open(&be).unwrap().head_seq(&id("g1")).unwrap();
    damage_newest_snapshot(&be);
    let seg = last_segment(&be);
    let mut log = be.read_file(&seg).unwrap();
    let good = records_end(&log);
    log.truncate(good);
    log.extend_from_slice(&[0x2a, 0, 0, 0, (head + 1) as u8, 0, 0, 0, 0, 0]);
    be.write_file(&seg, &log).unwrap();
    let store = open(&be).unwrap();
    assert_eq!(store.report().skipped_snapshots.len(), 1);
    assert_eq!(
        store.report().trimmed,
        vec![(seg.display().to_string(), good as u64, 10)]
    );
    assert_eq!(be.read_file(&seg).unwrap().len(), good);
    assert_eq!(store.head_seq(&id("g1")).unwrap(), head);
    assert_eq!(store.state_hash(&id("g1")).unwrap(), want);
}

/// A snapshot that holds a seq past the log's end means acknowledged events are missing: the
/// open refuses with LOG_CORRUPT instead of starting from it (the log is read while that
/// snapshot decodes, and the check comes once both are done).
#[test]
fn a_snapshot_ahead_of_the_log_stops_the_open() {
    let (full, _) = written();
    let path = newest_snapshot(&full);
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, opts());
    let first: String = workload().lines().take(3).collect::<Vec<_>>().join("\n");
    run(&mut rec, &first);
    drop(rec);
    let head = open(&be).unwrap().head_seq(&id("g1")).unwrap();
    be.create(&path, 0o644).unwrap();
    be.write_file(&path, &full.read_file(&path).unwrap())
        .unwrap();
    let e = open(&be).unwrap_err();
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert!(
        e.message.contains(&format!("the log ends at seq {head}"))
            && e.message.contains("acknowledged events are missing"),
        "{e}"
    );
}

/// The open reads a snapshot file in pieces. What it refuses, and why, is what checking the
/// whole file in memory refuses: a flipped payload byte under the old checksum is a checksum
/// mismatch; with the checksum made to match, the snapshot check that fails on the bytes held
/// whole fails, with the same message (the wording of a decode error may differ). Either way
/// the open falls back to the log and restores the same state.
#[test]
fn a_snapshot_read_in_pieces_is_refused_as_the_whole_file_is() {
    use mwp_core::snapshot::Snapshot;
    use mwp_host::store::format::{decode_snapshot_file, encode_snapshot_file};

    let (be, _) = written();
    let want = open(&be).unwrap().state_hash(&id("g1")).unwrap();
    let dir = Path::new("/d/groups/g1");
    let name = be
        .list(dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".snap"))
        .max()
        .unwrap();
    let path = dir.join(&name);
    let clean = be.read_file(&path).unwrap();
    let (seq, payload) = decode_snapshot_file(&clean).unwrap();
    let key = opts().authority_key.unwrap().public();
    let group = id("g1");
    let whole = Snapshot::verify_stored(payload, &key, &group).unwrap();
    let streamed =
        Snapshot::verify_stored_from(payload, payload.len() as u64, Some(&key), &group).unwrap();
    assert_eq!(whole, streamed);
    assert_eq!(whole.state.hash().unwrap(), streamed.state.hash().unwrap());

    let n = payload.len();
    let mut checked = 0;
    for at in (0..n).step_by(1.max(n / 97)).chain([1, 2, n - 2, n - 1]) {
        for bit in [0x01u8, 0x20, 0x80] {
            let mut p = payload.to_vec();
            p[at] ^= bit;
            let whole = Snapshot::verify_stored(&p, &key, &group);
            let streamed = Snapshot::verify_stored_from(&p[..], n as u64, Some(&key), &group);
            let context = format!("byte {at} of {n}, bit {bit:#x}");
            let whole_error = match (whole, streamed) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a, b, "{context}");
                    None
                }
                (Err(a), Err(b)) => {
                    assert_eq!(a.code, b.code, "{context}");
                    assert_eq!(a.details.get("check"), b.details.get("check"), "{context}");
                    if a.details.get("check").and_then(|c| c.as_str()) != Some("decode") {
                        assert_eq!(a.message, b.message, "{context}");
                    }
                    Some(a)
                }
                (a, b) => panic!("{context}: whole {a:?}, streamed {b:?}"),
            };
            if bit != 0x20 || checked >= 24 {
                continue;
            }
            checked += 1;
            // Through the open: the old checksum, then a matching one.
            let mut damaged = clean.clone();
            let header = damaged.len() - n;
            damaged[header + at] ^= bit;
            be.write_file(&path, &damaged).unwrap();
            let store = open(&be).unwrap();
            let skipped = &store.report().skipped_snapshots;
            assert_eq!(skipped.len(), 1, "{context}");
            assert!(
                skipped[0].1.ends_with("checksum mismatch"),
                "{context}: {skipped:?}"
            );
            assert_eq!(store.state_hash(&group).unwrap(), want, "{context}");
            drop(store);
            be.write_file(&path, &encode_snapshot_file(seq, &p))
                .unwrap();
            let store = open(&be).unwrap();
            let skipped = &store.report().skipped_snapshots;
            match &whole_error {
                Some(e) => {
                    assert_eq!(skipped.len(), 1, "{context}");
                    if e.details.get("check").and_then(|c| c.as_str()) == Some("decode") {
                        assert!(skipped[0].1.contains("(decode)"), "{context}: {skipped:?}");
                    } else {
                        assert_eq!(skipped[0].1, e.message, "{context}");
                    }
                }
                None => assert!(skipped.is_empty(), "{context}: {skipped:?}"),
            }
            assert_eq!(store.state_hash(&group).unwrap(), want, "{context}");
            drop(store);
            be.write_file(&path, &clean).unwrap();
        }
    }
    assert!(checked > 10);
}

/// A log long enough that the open decodes records on both of its threads (the reader leaves
/// some batches raw for the applier), over many segments, and with no snapshot to start from.
fn long_log(events: usize) -> MemBackend {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, no_snapshot_opts());
    let contract = r#"{"max_attempts": 3, "backoff_base_ms": 100, "backoff_max_ms": 1000, "cost_budget": 10, "risk": "low"}"#;
    let mut lines = vec![workload().lines().next().unwrap().to_owned()];
    for i in 1..events {
        lines.push(format!(
            r#"{{"actor": "alice", "action": "c{i}", "body": {{"type": "create_work", "work": "w{i}", "contract": {contract}, "after": [], "spec": {{"n": {i}}}}}}}"#
        ));
    }
    run(&mut rec, &lines.join("\n"));
    assert!(rec.errors.is_empty(), "{:?}", rec.errors);
    drop(rec);
    be
}

/// The group's segment files, in log order.
fn segment_names(be: &MemBackend) -> Vec<String> {
    let mut names: Vec<String> = be
        .list(Path::new("/d/groups/g1"))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".seg"))
        .collect();
    names.sort();
    names
}

/// Every record of a segment: (offset, payload range). The records end where the file
/// does, or where the zeros reserved after them start.
fn records(bytes: &[u8]) -> Vec<(usize, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut at = FILE_HEADER_LEN;
    while at + RECORD_HEADER_LEN <= bytes.len()
        && bytes[at..at + RECORD_HEADER_LEN].iter().any(|&b| b != 0)
    {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let start = at + RECORD_HEADER_LEN;
        out.push((at, start..start + len));
        at = start + len;
    }
    out
}

fn no_snapshot_opts() -> mwp_host::store::StoreOptions {
    mwp_host::store::StoreOptions {
        snapshot_every: None,
        segment_bytes: 64 << 10,
        ..opts()
    }
}

#[test]
fn a_long_log_opens_to_the_state_it_was_closed_in() {
    let be = long_log(3_000);
    let segments = segment_names(&be).len();
    assert!(segments >= 5, "the log spans many segments: {segments}");
    let store = FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), no_snapshot_opts())
        .expect("opens");
    assert_eq!(store.head_seq(&id("g1")).unwrap(), 3_000);
    // The same state as replaying the log's events one by one in memory.
    let mut state = None;
    let mut after = 0;
    while after < 3_000 {
        for e in AuthorityService::events(&store, &id("g1"), after, 500).unwrap() {
            assert_eq!(e.seq, after + 1);
            mwp_core::GroupState::apply_to(&mut state, &e).unwrap();
            after = e.seq;
        }
    }
    let state = state.unwrap();
    assert_eq!(state.work.len(), 2_999);
    assert_eq!(
        store.state_hash(&id("g1")).unwrap(),
        Some(state.hash().unwrap())
    );
}

#[test]
fn a_record_deep_in_a_long_log_that_holds_another_event_is_named() {
    // Every record from the first to the last of the log, swapped in turn with the record
    // after it (same length, checksum made good), is refused with its file and offset,
    // whichever thread decodes it.
    let be = long_log(1_500);
    let dir = Path::new("/d/groups/g1");
    let names = segment_names(&be);
    let mut tried = 0;
    for name in &names {
        let path = dir.join(name);
        let bytes = be.read_file(&path).unwrap();
        let recs = records(&bytes);
        for pair in recs.windows(2).step_by(97) {
            let ((at, a), (_, b)) = (&pair[0], &pair[1]);
            if a.len() != b.len() {
                continue;
            }
            let mut damaged = bytes.clone();
            damaged.copy_within(b.clone(), a.start);
            let crc =
                crc32c::crc32c_append(crc32c::crc32c(&damaged[*at..at + 20]), &damaged[a.clone()]);
            damaged[at + 20..at + 24].copy_from_slice(&crc.to_le_bytes());
            let image = be.crash_image(mwp_host::store::backend::PowerLoss::DropAll);
            image.write_file(&path, &damaged).unwrap();
            let e = FileStore::open_with(Arc::new(image), Path::new("/d"), no_snapshot_opts())
                .err()
                .unwrap_or_else(|| panic!("{name}@{at}: a misplaced record opened"));
            assert_eq!(e.code, Code::LogCorrupt, "{e}");
            assert!(e.message.contains("holds event seq"), "{e}");
            assert_eq!(
                e.details
                    .get("file")
                    .and_then(|f| f.as_str())
                    .map(|f| f.ends_with(name.as_str())),
                Some(true),
                "{e:?}"
            );
            assert_eq!(
                e.details.get("offset").and_then(|o| o.as_u64()),
                Some(*at as u64),
                "{e:?}"
            );
            tried += 1;
        }
    }
    assert!(tried >= 10, "tried {tried}");
}

#[test]
fn a_segment_whose_header_names_another_prev_is_refused() {
    let be = long_log(1_500);
    let dir = Path::new("/d/groups/g1");
    let names = segment_names(&be);
    // The first, a middle and the last segment.
    for name in [&names[0], &names[names.len() / 2], &names[names.len() - 1]] {
        let path = dir.join(name);
        let mut bytes = be.read_file(&path).unwrap();
        bytes[20] ^= 1;
        let crc = crc32c::crc32c(&bytes[..188]);
        bytes[188..192].copy_from_slice(&crc.to_le_bytes());
        let image = be.crash_image(mwp_host::store::backend::PowerLoss::DropAll);
        image.write_file(&path, &bytes).unwrap();
        let e = FileStore::open_with(Arc::new(image), Path::new("/d"), no_snapshot_opts())
            .err()
            .unwrap_or_else(|| panic!("{name}: a relinked segment opened"));
        assert_eq!(e.code, Code::LogCorrupt, "{e}");
        assert!(e.message.contains("segment header's prev"), "{e}");
        assert!(
            e.message.starts_with(&format!("/d/groups/g1/{name}")),
            "{e}"
        );
    }
}

/// Where the records of a segment end (the file's end, or where its reserved zeros start).
fn records_end(bytes: &[u8]) -> usize {
    records(bytes)
        .last()
        .map_or(FILE_HEADER_LEN, |(_, payload)| payload.end)
}

#[test]
fn only_the_last_segment_keeps_zeros_reserved_after_its_records() {
    let (be, _) = written();
    let dir = Path::new("/d/groups/g1");
    let names = segment_names(&be);
    assert!(names.len() >= 3, "the workload rolls segments: {names:?}");
    for (i, name) in names.iter().enumerate() {
        let bytes = be.read_file(&dir.join(name)).unwrap();
        let end = records_end(&bytes);
        if i + 1 == names.len() {
            assert!(bytes.len() > end, "{name}: nothing reserved");
            assert!(bytes[end..].iter().all(|&b| b == 0), "{name}");
        } else {
            assert_eq!(bytes.len(), end, "{name} was not cut to its records");
        }
    }
    let store = open(&be).unwrap();
    assert_eq!(
        store.report(),
        &Default::default(),
        "a reserve is not a torn tail"
    );
    assert!(fsck_with(Arc::new(be.clone()), Path::new("/d"))
        .unwrap()
        .is_clean());
}

#[test]
fn without_a_reserve_segments_end_at_their_last_record() {
    let be = MemBackend::new();
    let no_reserve = || mwp_host::store::StoreOptions {
        reserve_bytes: 0,
        ..opts()
    };
    let mut rec = Recorder::open(&be, no_reserve());
    run(&mut rec, &workload());
    let want = rec.store.as_ref().unwrap().state_hash(&id("g1")).unwrap();
    drop(rec);
    let dir = Path::new("/d/groups/g1");
    for name in segment_names(&be) {
        let bytes = be.read_file(&dir.join(&name)).unwrap();
        assert_eq!(bytes.len(), records_end(&bytes), "{name}");
    }
    // Either way the log is the same log: a store with a reserve opens it and appends.
    let store = open(&be).unwrap();
    assert_eq!(store.state_hash(&id("g1")).unwrap(), want);
}

#[test]
fn damage_in_the_reserved_space_loses_nothing() {
    let (be, _) = written();
    let seg = last_segment(&be);
    let bytes = be.read_file(&seg).unwrap();
    let end = records_end(&bytes);
    let want = open(&be).unwrap().state_hash(&id("g1")).unwrap();
    let mut rng = Rng::new(5);
    for _ in 0..20 {
        let at = end + rng.below((bytes.len() - end) as u64) as usize;
        // A flipped bit: garbage after the records is a torn tail, cut and reported.
        let image = be.crash_image(mwp_host::store::backend::PowerLoss::DropAll);
        let mut flipped = bytes.clone();
        flipped[at] ^= 1 << rng.below(8);
        image.write_file(&seg, &flipped).unwrap();
        let store = open(&image).unwrap();
        assert_eq!(store.state_hash(&id("g1")).unwrap(), want, "flip at {at}");
        assert_eq!(store.report().trimmed.len(), 1, "flip at {at}");
        // Cut short: fewer zeros, the same log, nothing to report.
        let image = be.crash_image(mwp_host::store::backend::PowerLoss::DropAll);
        image.write_file(&seg, &bytes[..at]).unwrap();
        let store = open(&image).unwrap();
        assert_eq!(store.state_hash(&id("g1")).unwrap(), want, "cut at {at}");
        assert!(store.report().trimmed.is_empty(), "cut at {at}");
    }
}

#[test]
fn zeros_after_the_records_of_an_earlier_segment_are_damage() {
    let (be, _) = written();
    let dir = Path::new("/d/groups/g1");
    let first = segment_names(&be)[0].clone();
    let path = dir.join(&first);
    let mut bytes = be.read_file(&path).unwrap();
    let end = bytes.len();
    bytes.resize(end + 64, 0);
    be.write_file(&path, &bytes).unwrap();
    let e = open(&be).unwrap_err();
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert_eq!(e.details["file"], path.to_str().unwrap());
    assert_eq!(e.details["offset"], end as u64);
    assert!(!fsck_with(Arc::new(be.clone()), Path::new("/d"))
        .unwrap()
        .is_clean());
}

/// Removes every file of `dir` whose name passes `gone`.
fn remove_files(be: &MemBackend, dir: &Path, gone: impl Fn(&str) -> bool) {
    for n in be.list(dir).unwrap() {
        if gone(&n) {
            be.remove(&dir.join(n)).unwrap();
        }
    }
    be.sync_dir(dir).unwrap();
}

/// A group directory the open refuses: `LOG_CORRUPT` naming it, and nothing removed.
fn assert_refused_and_kept(be: &MemBackend, what: &str) {
    let dir = Path::new("/d/groups/g1");
    let before = be.list(dir).unwrap();
    let e = open(be).unwrap_err();
    assert_eq!(e.code, Code::LogCorrupt, "{what}: {e}");
    assert!(e.message.contains("/d/groups/g1"), "{what}: {e}");
    assert_eq!(
        be.list(dir).unwrap(),
        before,
        "{what}: the open removed nothing"
    );
    // Refused again, and fsck says so too.
    assert_eq!(open(be).unwrap_err().code, Code::LogCorrupt, "{what}");
    assert!(
        !fsck_with(Arc::new(be.clone()), Path::new("/d"))
            .unwrap()
            .is_clean(),
        "{what}"
    );
}

#[test]
fn a_group_whose_segments_are_missing_is_refused_not_removed() {
    let (be, _) = written();
    remove_files(&be, Path::new("/d/groups/g1"), |n| n.ends_with(".seg"));
    assert_refused_and_kept(&be, "segments removed, snapshots and overlay kept");
    remove_files(&be, Path::new("/d/groups/g1"), |_| true);
    assert_refused_and_kept(&be, "an empty group directory");
}

#[test]
fn a_group_with_snapshots_or_redactions_but_no_segment_is_refused() {
    let (be, _) = written();
    let dir = Path::new("/d/groups/g1");
    remove_files(&be, dir, |n| n.ends_with(".seg") || n.ends_with(".snap"));
    assert!(be.list(dir).unwrap().iter().any(|n| n.ends_with(".log")));
    assert_refused_and_kept(&be, "only the redaction overlay");
    let (be, _) = written();
    remove_files(&be, dir, |n| !n.ends_with(".snap"));
    assert_refused_and_kept(&be, "only snapshots");
}

#[test]
fn only_an_interrupted_creation_is_cleaned_up() {
    let (be, _) = written();
    // A creation that never reached its rename: `.new-<name>` with or without its segment.
    let building = Path::new("/d/groups/.new-g2");
    be.create_dir(building).unwrap();
    be.create(&building.join("00000000000000000001.seg"), 0o600)
        .unwrap();
    be.sync_dir(Path::new("/d/groups")).unwrap();
    let fsck = fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(
        fsck.is_clean(),
        "a warning, not damage: {:?}",
        fsck.findings
    );
    assert!(fsck.findings.iter().any(|f| f.file.ends_with(".new-g2")));
    let store = open(&be).unwrap();
    assert_eq!(store.report().removed, vec!["/d/groups/.new-g2".to_owned()]);
    assert!(!be.is_dir(building));
    assert!(store.groups().unwrap() == vec![id("g1")]);
}

/// The first record from seq `min_seq` on whose payload can be changed in one ASCII letter
/// and still decode: (segment path, record offset, payload range, position of the letter).
fn editable_record(
    be: &MemBackend,
    min_seq: u64,
) -> (PathBuf, usize, std::ops::Range<usize>, usize) {
    let dir = Path::new("/d/groups/g1");
    for name in segment_names(be) {
        let path = dir.join(&name);
        let bytes = be.read_file(&path).unwrap();
        for (at, payload) in records(&bytes) {
            let original = mwp_core::Event::from_cbor(&bytes[payload.clone()]);
            if original.as_ref().map_or(true, |e| e.seq < min_seq) {
                continue; // an erased record, or one before `min_seq`
            }
            for i in payload.clone() {
                if !bytes[i].is_ascii_lowercase() {
                    continue;
                }
                let mut p = bytes[payload.clone()].to_vec();
                p[i - payload.start] = if bytes[i] == b'z' { b'y' } else { bytes[i] + 1 };
                if mwp_core::Event::from_cbor(&p)
                    .is_ok_and(|e| e.seq == original.as_ref().unwrap().seq)
                {
                    return (path, at, payload, i);
                }
            }
        }
    }
    panic!("no record with an editable letter");
}

#[test]
fn a_record_edited_with_a_recomputed_crc_is_refused() {
    // No snapshot: the open reads every record. Seq 900 is in a batch the applier decodes
    // (see `Batch`), seq 1 in one the reader decodes.
    let written = long_log(1000);
    for min_seq in [1, 900] {
        let be = written.crash_image(mwp_host::store::backend::PowerLoss::KeepAll);
        let (path, at, payload, i) = editable_record(&be, min_seq);
        let mut bytes = be.read_file(&path).unwrap();
        bytes[i] = if bytes[i] == b'z' { b'y' } else { bytes[i] + 1 };
        let crc = mwp_host::store::format::record_crc(&bytes[at..at + 20], &bytes[payload.clone()]);
        bytes[at + 20..at + 24].copy_from_slice(&crc.to_le_bytes());
        be.write_file(&path, &bytes).unwrap();
        // The edit decodes and its CRC is right: only the payload hash and id give it away.
        assert!(mwp_core::Event::from_cbor(&bytes[payload.clone()]).is_ok());
        assert!(mwp_core::Event::from_cbor_verified(&bytes[payload]).is_err());
        let e = FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), no_snapshot_opts())
            .unwrap_err();
        assert_eq!(e.code, Code::LogCorrupt, "seq {min_seq}: {e}");
        assert_eq!(
            e.details["file"],
            path.to_str().unwrap(),
            "seq {min_seq}: {e}"
        );
        assert_eq!(e.details["offset"], at as u64, "seq {min_seq}: {e}");
        assert!(!fsck_with(Arc::new(be.clone()), Path::new("/d"))
            .unwrap()
            .is_clean());
    }
}

#[test]
fn a_log_filed_under_another_groups_name_is_refused() {
    // g1's segments moved to g2's directory, their headers rewritten to name g2 (with a
    // matching CRC): the events inside still belong to g1, and nothing may serve them as g2.
    let be = long_log(300);
    let (from, to) = (Path::new("/d/groups/g1"), Path::new("/d/groups/g2"));
    be.create_dir(to).unwrap();
    for name in segment_names(&be) {
        let mut bytes = be.read_file(&from.join(&name)).unwrap();
        assert_eq!(&bytes[53..55], b"g1");
        bytes[53..55].copy_from_slice(b"g2");
        let crc = crc32c::crc32c(&bytes[..188]);
        bytes[188..192].copy_from_slice(&crc.to_le_bytes());
        be.create(&to.join(&name), 0o600)
            .unwrap()
            .write_at(0, &bytes)
            .unwrap();
    }
    remove_files(&be, from, |_| true);
    be.remove(from).unwrap();
    let e = FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), no_snapshot_opts())
        .unwrap_err();
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert!(e.message.contains("belongs to group g1"), "{e}");
    assert_eq!(
        e.details["file"],
        to.join(mwp_host::store::format::segment_name(1))
            .to_str()
            .unwrap(),
        "{e}"
    );
    fsck_reports_damage(&be, &e, "");
}

/// `mwp fsck` of the store in `be` reports `e` as damage, with the same message.
fn fsck_reports_damage(be: &MemBackend, e: &mwp_core::Error, context: &str) {
    let report = fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.damage && f.message == e.message),
        "{context}: {report:?}"
    );
}

/// Rewrites the `batch` field of the record at `at` of `path`, its CRC recomputed.
fn rewrite_batch(be: &MemBackend, path: &Path, at: usize, batch: u64) {
    let mut bytes = be.read_file(path).unwrap();
    let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    bytes[at + 12..at + 20].copy_from_slice(&batch.to_le_bytes());
    let payload = at + RECORD_HEADER_LEN..at + RECORD_HEADER_LEN + len;
    let crc = mwp_host::store::format::record_crc(&bytes[at..at + 20], &bytes[payload]);
    bytes[at + 20..at + 24].copy_from_slice(&crc.to_le_bytes());
    be.write_file(path, &bytes).unwrap();
}

#[test]
fn a_record_naming_a_batch_it_cannot_belong_to_is_refused() {
    // Every event of `long_log` is a batch of its own. A record rewritten to name batch 1
    // (CRC recomputed, event untouched) belongs to no batch a writer wrote: in an earlier
    // segment, in the middle of the last one (where the tail rule reads `batch`) and as the
    // very last record.
    let written = long_log(300);
    let names = segment_names(&written);
    let last = names.len() - 1;
    for (segment, pick) in [(0, 9), (last, 2), (last, usize::MAX)] {
        let be = written.crash_image(mwp_host::store::backend::PowerLoss::KeepAll);
        let path = Path::new("/d/groups/g1").join(&names[segment]);
        let recs = records(&be.read_file(&path).unwrap());
        let (at, _) = recs[pick.min(recs.len() - 1)];
        rewrite_batch(&be, &path, at, 1);
        let context = format!("{} at {at}", names[segment]);
        let e = FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), no_snapshot_opts())
            .unwrap_err();
        assert_eq!(e.code, Code::LogCorrupt, "{context}: {e}");
        assert_eq!(e.details["file"], path.to_str().unwrap(), "{context}: {e}");
        assert_eq!(e.details["offset"], at as u64, "{context}: {e}");
        assert!(e.message.contains("names batch 1"), "{context}: {e}");
        fsck_reports_damage(&be, &e, &context);
    }
}

/// Copies the directory `from` to `to`, file by file.
fn copy_dir(be: &MemBackend, from: &Path, to: &Path) {
    be.create_dir(to).unwrap();
    for name in be.list(from).unwrap() {
        let bytes = be.read_file(&from.join(&name)).unwrap();
        be.create(&to.join(&name), 0o600)
            .unwrap()
            .write_at(0, &bytes)
            .unwrap();
    }
    be.sync_dir(to.parent().unwrap()).unwrap();
}

fn read_only() -> mwp_host::store::StoreOptions {
    mwp_host::store::StoreOptions {
        read_only: true,
        ..no_snapshot_opts()
    }
}

#[test]
fn damage_in_one_group_is_named_by_its_directory_and_leaves_the_others_readable() {
    // g1's directory copied as g2's: every file in it says it belongs to g1.
    let be = long_log(50);
    copy_dir(&be, Path::new("/d/groups/g1"), Path::new("/d/groups/g2"));
    let damaged = "/d/groups/g2/00000000000000000001.seg";
    // A writer's open stops, naming the damaged group's file by its path.
    let e = FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), no_snapshot_opts())
        .unwrap_err();
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert_eq!(e.details["file"], damaged, "{e}");
    assert!(
        e.message.starts_with(&format!("{damaged} at offset 52:")),
        "{e}"
    );
    assert!(
        e.message.contains("not g2, the group of its directory"),
        "{e}"
    );
    // A reader reads g1 as before; every read of g2 fails with the same error.
    let want = long_log(50);
    let want = FileStore::open_with(Arc::new(want), Path::new("/d"), read_only()).unwrap();
    let store = FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), read_only()).unwrap();
    assert_eq!(store.groups().unwrap(), vec![id("g1"), id("g2")]);
    assert_eq!(
        store.state_hash(&id("g1")).unwrap(),
        want.state_hash(&id("g1")).unwrap()
    );
    assert_eq!(store.events(&id("g1"), 0, 100).unwrap().len(), 50);
    for err in [
        store.events(&id("g2"), 0, 100).unwrap_err(),
        store.state(&id("g2")).unwrap_err(),
        store.latest_snapshot(&id("g2")).unwrap_err(),
        store.head_seq(&id("g2")).unwrap_err(),
    ] {
        assert_eq!(err, e);
    }
    // fsck names the same file the same way, and every file it names by its path.
    let report = fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.damage && f.file == damaged && f.message == e.message),
        "{report:?}"
    );
    assert!(
        report.findings.iter().all(|f| f.file.starts_with("/d/")),
        "{report:?}"
    );
}

#[test]
fn every_fsck_finding_names_its_file_by_its_path() {
    // A damaged snapshot, a torn tail and an unerased redaction of the workload's store.
    let (be, _) = written();
    damage_newest_snapshot(&be);
    let last = last_segment(&be);
    let mut bytes = be.read_file(&last).unwrap();
    let end = records(&bytes).last().unwrap().0;
    bytes.truncate(end + 10);
    be.write_file(&last, &bytes).unwrap();
    let report = fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(report.findings.len() >= 2, "{report:?}");
    for f in &report.findings {
        assert!(f.file.starts_with("/d/groups/g1"), "{f:?}");
        // A message that names the file names it the same way.
        assert!(
            !f.message.starts_with("0000") && !f.message.starts_with("redactions"),
            "{f:?}"
        );
    }
    // The torn tail is not said to be an unacknowledged write: it may be lost acknowledged
    // records (docs/format.md, "What is assumed of the disk").
    let torn = report
        .findings
        .iter()
        .find(|f| f.message.starts_with("torn tail"))
        .expect("the torn tail is reported");
    assert!(!torn.damage);
    assert!(
        torn.message.contains("or acknowledged records lost"),
        "{torn:?}"
    );
}

/// Replaces the data directory's key file by the key of `seed`.
fn plant_key(be: &MemBackend, seed: u8) -> mwp_core::PublicKey {
    let key = mwp_core::SecretKey::from_bytes(&[seed; 32]);
    let path = Path::new("/d/authority.key");
    be.remove(path).unwrap();
    be.create(path, 0o600)
        .unwrap()
        .write_at(0, format!("{}\n", hex::encode(key.to_bytes())).as_bytes())
        .unwrap();
    key.public()
}

#[test]
fn a_key_file_that_is_not_the_groups_authority_is_refused() {
    let be = long_log(50);
    let genuine = mwp_core::SecretKey::for_transcript("@authority").public();
    let planted = plant_key(&be, 7);
    let before = all_files(&be, Path::new("/d"));
    let key_opts = |read_only| mwp_host::store::StoreOptions {
        authority_key: None,
        read_only,
        ..no_snapshot_opts()
    };
    // A writer's open signs nothing for g1 with the planted key: it stops.
    let e =
        FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), key_opts(false)).unwrap_err();
    assert_eq!(e.code, Code::Storage, "{e}");
    for part in [
        "/d/authority.key",
        "group g1",
        &genuine.to_hex(),
        &planted.to_hex(),
    ] {
        assert!(e.message.contains(part), "{part}: {e}");
    }
    assert_eq!(e.details["authority_key"], genuine.to_hex().as_str());
    assert_eq!(e.details["key"], planted.to_hex().as_str());
    assert_eq!(
        all_files(&be, Path::new("/d")),
        before,
        "nothing was written"
    );
    // A reader signs no snapshot or head of g1 either.
    let store =
        FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), key_opts(true)).unwrap();
    assert_eq!(
        store.latest_snapshot(&id("g1")).unwrap_err().code,
        Code::Storage
    );
    assert_eq!(
        store.sign_head(&id("g1"), 1).unwrap_err().code,
        Code::Storage
    );
    // fsck reports it as damage.
    let report = fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(!report.is_clean());
    assert!(
        report.findings.iter().any(|f| f.damage
            && f.code == Code::Storage
            && f.group == Some(id("g1"))
            && f.file == "/d/authority.key"
            && f.message == e.message),
        "{report:?}"
    );
    // The group's own key back in place: all is well again.
    let path = Path::new("/d/authority.key");
    be.remove(path).unwrap();
    be.create(path, 0o600)
        .unwrap()
        .write_at(
            0,
            format!(
                "{}\n",
                hex::encode(mwp_core::SecretKey::for_transcript("@authority").to_bytes())
            )
            .as_bytes(),
        )
        .unwrap();
    FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), key_opts(false)).unwrap();
    assert!(fsck_with(Arc::new(be), Path::new("/d")).unwrap().is_clean());
}

#[test]
fn names_under_groups_that_are_no_group_directory_are_ignored() {
    // docs/format.md: unknown names are ignored, and so are directory names that do not
    // decode to the ID they were made from (`~m4yq` decodes to g1, whose directory is `g1`).
    let be = long_log(50);
    let groups = Path::new("/d/groups");
    for name in [".hidden", "G1", "~m4yq", "g1.bak~"] {
        copy_dir(&be, &groups.join("g1"), &groups.join(name));
    }
    be.create(&groups.join("g3"), 0o600).unwrap();
    be.sync_dir(groups).unwrap();
    for read_only in [true, false] {
        let o = mwp_host::store::StoreOptions {
            read_only,
            ..no_snapshot_opts()
        };
        let store = FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), o).unwrap();
        assert_eq!(
            store.groups().unwrap(),
            vec![id("g1")],
            "read-only {read_only}"
        );
    }
    // fsck agrees: no damage, and each ignored name is listed as a warning.
    let report = fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.groups.len(), 1, "{report:?}");
    for name in [".hidden", "G1", "~m4yq", "g1.bak~", "g3"] {
        let file = groups.join(name).display().to_string();
        assert!(
            report
                .findings
                .iter()
                .any(|f| !f.damage && f.file == file && f.message.contains("ignores it")),
            "{name}: {report:?}"
        );
    }
}

/// A snapshot signed by the store's key whose chain head is not the id of the event the log
/// holds at its seq (the core's rule, `chain::Position::check_last`) is never taken for the
/// log's state: the open names it, "event N is not the snapshot's chain head".
#[test]
fn a_snapshot_whose_chain_head_is_not_the_logs_is_refused() {
    use mwp_core::snapshot::Snapshot;
    use mwp_host::store::format::{decode_snapshot_file, encode_snapshot_file};

    let (be, _) = written();
    let path = newest_snapshot(&be);
    let clean = be.read_file(&path).expect("the snapshot file");
    let (seq, payload) = decode_snapshot_file(&clean).expect("decodes");
    let key = opts().authority_key.expect("the store's key");
    let snap = Snapshot::verify_stored(payload, &key.public(), &id("g1")).expect("verifies");
    let mut state = snap.state.clone();
    state.head = mwp_core::Hash([7; 32]);
    let forged = Snapshot::build_cbor(&state, &key).expect("builds");
    be.write_file(&path, &encode_snapshot_file(seq, &forged))
        .expect("write");
    let wording = format!("event {seq} is not the snapshot's chain head");
    let Err(e) = open(&be) else {
        panic!("opened from a snapshot that is not the log's")
    };
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert!(e.message.contains(&wording), "{e}");
}
