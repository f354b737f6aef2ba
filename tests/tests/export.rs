//! Static exports (SPEC §8b): planned files read back into a replica verified through the
//! signed head under the pinned key; re-exports add only new files; a flipped byte, a forged
//! history or a head under another key is refused, naming the file.

use std::collections::BTreeMap;

use mwp_core::export::{self, Export, ExportIndex, Start, StaticReader, HEAD_FILE};
use mwp_core::head::SignedHead;
use mwp_core::snapshot::Snapshot;
use mwp_core::{Code, Error, Event, SecretKey};
use mwp_tests::fixtures::{contract, id, rich, Scenario};
use serde_json::json;

type Files = BTreeMap<String, Vec<u8>>;

fn key() -> SecretKey {
    SecretKey::for_transcript("@authority")
}

fn head(events: &[Event]) -> SignedHead {
    let last = events.last().unwrap();
    SignedHead::sign(&id("acme"), &last.group, last.seq, last.id, 9_000, &key()).unwrap()
}

fn bytes(events: &[Event]) -> Vec<Vec<u8>> {
    events.iter().map(|e| e.to_cbor().unwrap()).collect()
}

fn write(files: &mut Files, x: &Export) {
    for f in &x.files {
        assert!(
            files.get(&f.path).is_none_or(|old| old == &f.bytes),
            "{} would change",
            f.path
        );
        files.insert(f.path.clone(), f.bytes.clone());
    }
    files.insert(HEAD_FILE.into(), x.head_file.clone());
}

fn read(files: &Files, start: Start) -> Result<StaticReader, Error> {
    read_logged(files, start, &mut Vec::new())
}

/// Reads the export, noting each path fetched; a missing file is `NOT_FOUND`.
fn read_logged(files: &Files, start: Start, log: &mut Vec<String>) -> Result<StaticReader, Error> {
    let mut r = StaticReader::new(id("g1"), key().public(), start);
    while let Some(path) = r.poll_fetch() {
        log.push(path.clone());
        let b = files
            .get(&path)
            .ok_or_else(|| Error::new(Code::NotFound, format!("{path} is not there")))?;
        r.handle_fetched(&path, b)?;
    }
    Ok(r)
}

fn more(s: &mut Scenario, n: usize, tag: &str) {
    for i in 0..n {
        s.ok("alice", None, json!({"type": "create_work", "work": format!("{tag}{i}"), "contract": contract(2, "low"), "after": [], "spec": {}}));
    }
}

#[test]
fn an_export_reads_back_verified_through_its_head_from_genesis_or_a_snapshot() {
    let mut s = rich();
    let snap = Snapshot::build_cbor(s.state(), &key()).unwrap();
    more(&mut s, 5, "x");
    let events = s.events();
    let x = export::plan(
        None,
        &bytes(&events),
        Some(&snap),
        &head(&events),
        &key().public(),
        7,
    )
    .unwrap();
    assert!(x.index.chunks.len() > 2, "small chunks for the test");
    let mut files = Files::new();
    write(&mut files, &x);
    for start in [Start::Genesis, Start::Snapshot] {
        let r = read(&files, start).unwrap();
        let p = r.progress();
        assert!(p.done);
        assert_eq!(
            (p.cursor, p.verified_through),
            (events.len() as u64, events.len() as u64)
        );
        assert_eq!(r.replica().state().unwrap(), s.state(), "{start:?}");
    }
    // From the snapshot, only the chunks after it are read.
    assert!(read(&files, Start::Snapshot).unwrap().progress().events < events.len() as u64);
}

#[test]
fn exporting_again_adds_only_new_chunks_and_old_files_stay_byte_identical() {
    let mut s = rich();
    let first = s.events();
    let x1 = export::plan(
        None,
        &bytes(&first),
        None,
        &head(&first),
        &key().public(),
        7,
    )
    .unwrap();
    let mut files = Files::new();
    write(&mut files, &x1);
    let before = files.clone();
    more(&mut s, 9, "y");
    let all = s.events();
    let prev: ExportIndex = x1.index.clone();
    let x2 = export::plan(
        Some(&prev),
        &bytes(&all[first.len()..]),
        None,
        &head(&all),
        &key().public(),
        7,
    )
    .unwrap();
    write(&mut files, &x2);
    for (path, b) in &before {
        if path != HEAD_FILE {
            assert_eq!(files.get(path), Some(b), "{path}");
        }
    }
    let new_chunks = x2
        .files
        .iter()
        .filter(|f| f.path.starts_with("chunks/"))
        .count();
    assert_eq!(new_chunks, 2, "9 new events in chunks of 7");
    assert_eq!(
        x2.index.chunks[..x1.index.chunks.len()],
        x1.index.chunks[..]
    );
    let r = read(&files, Start::Genesis).unwrap();
    assert_eq!(r.progress().verified_through, all.len() as u64);
    // The same log planned from scratch gives the same chunks as the first run's.
    let again = export::plan(
        None,
        &bytes(&first),
        None,
        &head(&first),
        &key().public(),
        7,
    )
    .unwrap();
    assert_eq!(again.index.chunks, x1.index.chunks);
    // A re-export that does not continue the export in place is refused.
    assert!(export::plan(
        Some(&prev),
        &bytes(&all[first.len() + 1..]),
        None,
        &head(&all),
        &key().public(),
        7
    )
    .is_err());
}

#[test]
fn a_flipped_byte_in_any_file_is_refused_naming_the_file() {
    let mut s = rich();
    let snap = Snapshot::build_cbor(s.state(), &key()).unwrap();
    more(&mut s, 3, "z");
    let events = s.events();
    let x = export::plan(
        None,
        &bytes(&events),
        Some(&snap),
        &head(&events),
        &key().public(),
        7,
    )
    .unwrap();
    let mut files = Files::new();
    write(&mut files, &x);
    for start in [Start::Genesis, Start::Snapshot] {
        let mut needed = Vec::new();
        read_logged(&files, start, &mut needed).unwrap();
        for path in &needed {
            // Every byte of small files; about 200 spread over larger ones, the last included.
            let n = files[path].len();
            for at in (0..n).step_by(n / 200 + 1).chain([n - 1]) {
                let mut bad = files.clone();
                bad.get_mut(path).unwrap()[at] ^= 0x01;
                let e = read(&bad, start)
                    .err()
                    .unwrap_or_else(|| panic!("{path} at {at}: accepted"));
                assert!(
                    matches!(
                        e.code,
                        Code::LogCorrupt
                            | Code::HeadInvalid
                            | Code::Malformed
                            | Code::Fork
                            | Code::NotFound
                    ),
                    "{path}: {e}"
                );
            }
        }
    }
}

#[test]
fn a_forged_history_served_under_an_honest_head_is_refused() {
    // The mirror serves its own valid chain and index, but the head it must serve is the
    // authority's.
    let mut honest = Scenario::open("g1");
    let mut forged = Scenario::open("g1");
    more(&mut honest, 4, "h");
    more(&mut forged, 4, "f");
    let (h, f) = (honest.events(), forged.events());
    let x = export::plan(None, &bytes(&f), None, &head(&f), &key().public(), 2).unwrap();
    let mut files = Files::new();
    write(&mut files, &x);
    let mut hf: serde_json::Value = serde_json::from_slice(&files[HEAD_FILE]).unwrap();
    hf["head"] = serde_json::to_value(head(&h)).unwrap();
    files.insert(HEAD_FILE.into(), serde_json::to_vec(&hf).unwrap());
    let e = read(&files, Start::Genesis).expect_err("refused");
    assert_eq!(e.code, Code::Fork, "{e}");
    // And one the mirror signed itself does not verify under the pinned key.
    let mallory = SecretKey::for_transcript("mallory");
    let last = f.last().unwrap();
    hf["head"] = serde_json::to_value(
        SignedHead::sign(&id("acme"), &id("g1"), last.seq, last.id, 1, &mallory).unwrap(),
    )
    .unwrap();
    files.insert(HEAD_FILE.into(), serde_json::to_vec(&hf).unwrap());
    let e = read(&files, Start::Genesis).expect_err("refused");
    assert_eq!(
        (e.code, e.details["check"].as_str()),
        (Code::HeadInvalid, Some("signature"))
    );
}

#[test]
fn a_hostile_index_cannot_name_files_outside_the_export() {
    for bad in [
        "../../etc/passwd",
        "chunks/../head.json",
        "/chunks/aa.cbor",
        "chunks/AB.cbor",
    ] {
        assert_eq!(
            export::check_name(bad, "chunks", "cbor").unwrap_err().code,
            Code::Malformed,
            "{bad}"
        );
    }
}

#[test]
fn a_reader_that_met_a_bad_file_stops_for_good() {
    let s = rich();
    let events = s.events();
    let x = export::plan(
        None,
        &bytes(&events),
        None,
        &head(&events),
        &key().public(),
        7,
    )
    .unwrap();
    let mut files = Files::new();
    write(&mut files, &x);
    let mut r = StaticReader::new(id("g1"), key().public(), Start::Genesis);
    // Asked for head.json, handed another path: refused, nothing changes.
    assert_eq!(
        r.handle_fetched("index/x.json", b"{}").unwrap_err().code,
        Code::Malformed
    );
    assert_eq!(r.poll_fetch().as_deref(), Some(HEAD_FILE));
    r.handle_fetched(HEAD_FILE, &files[HEAD_FILE]).unwrap();
    let index = r.poll_fetch().unwrap();
    r.handle_fetched(&index, &files[&index]).unwrap();
    let chunk = r.poll_fetch().unwrap();
    let mut bad = files[&chunk].clone();
    bad[3] ^= 1;
    let e = r.handle_fetched(&chunk, &bad).unwrap_err();
    assert_eq!(e.details["file"], chunk.as_str());
    assert_eq!(r.poll_fetch(), None);
    assert_eq!(r.failure(), Some(&e));
    // Even the right bytes now: the source is not read further.
    assert_eq!(r.handle_fetched(&chunk, &files[&chunk]).unwrap_err(), e);
    assert!(!r.progress().done);
}

#[test]
fn a_file_over_its_size_cap_is_refused_before_it_is_parsed() {
    let mut r = StaticReader::new(id("g1"), key().public(), Start::Genesis);
    let huge = vec![b' '; export::MAX_HEAD_FILE as usize + 1];
    let e = r.handle_fetched(HEAD_FILE, &huge).unwrap_err();
    assert_eq!(e.code, Code::Malformed);
    assert_eq!(e.details["file"], HEAD_FILE);
    assert!(e.message.contains("over the"), "{}", e.message);
    assert_eq!(r.failure(), Some(&e));
    assert_eq!(
        export::max_file_bytes("index/a.json"),
        export::MAX_INDEX_FILE
    );
    assert!(export::max_file_bytes("chunks/a.cbor") > export::CHUNK_BYTES as u64);
}

/// The planner answers each chunk as soon as it is cut (a host writes it and forgets it), and
/// in the end the same files as `plan`; a run whose events do not reach the head fails at the
/// end, after chunks were answered.
#[test]
fn the_planner_answers_each_chunk_as_it_is_cut() {
    let mut s = rich();
    more(&mut s, 5, "x");
    let events = s.events();
    let trusted = key().public();
    let mut planner = export::Planner::new(None, &head(&events), &trusted, 3).unwrap();
    let mut files = Vec::new();
    for (i, b) in bytes(&events).into_iter().enumerate() {
        let chunk = planner.handle_event(b).unwrap();
        // A chunk closes on every third event, and only then.
        assert_eq!(chunk.is_some(), (i + 1) % 3 == 0, "event {i}");
        files.extend(chunk);
    }
    assert_eq!(planner.seq(), events.len() as u64);
    let mut rest = planner.finish(None).unwrap();
    files.append(&mut rest.files);
    let planned = export::plan(None, &bytes(&events), None, &head(&events), &trusted, 3).unwrap();
    assert_eq!(files, planned.files);
    assert_eq!(
        (rest.head_file, rest.index),
        (planned.head_file, planned.index)
    );

    // Events that stop short of the head: chunks were answered, the end is refused.
    let mut short = export::Planner::new(None, &head(&events), &trusted, 3).unwrap();
    let mut answered = 0;
    for b in bytes(&events[..events.len() - 1]) {
        answered += usize::from(short.handle_event(b).unwrap().is_some());
    }
    assert!(answered > 0);
    assert_eq!(short.finish(None).unwrap_err().code, Code::Fork);
}

/// An event that does not continue the export (another group's, a seq that skips or
/// repeats, a `prev` that does not chain) is `LOG_CORRUPT` naming its seq.
#[test]
fn the_planner_refuses_an_event_that_does_not_continue_the_export() {
    let mut s = Scenario::open("g1");
    more(&mut s, 3, "a");
    let events = s.events();
    let mut forked = Scenario::open("g1");
    more(&mut forked, 3, "b");
    let forked = forked.events();
    let mut other = Scenario::open("g2");
    more(&mut other, 2, "a");
    let other = other.events();
    let trusted = key().public();
    let refused = |next: &Event| {
        let mut planner = export::Planner::new(None, &head(&events), &trusted, 3).unwrap();
        for b in bytes(&events[..2]) {
            planner.handle_event(b).unwrap();
        }
        let e = planner.handle_event(next.to_cbor().unwrap()).unwrap_err();
        assert_eq!(e.code, Code::LogCorrupt);
        assert_eq!(e.details["seq"], next.seq);
        e.message
    };
    assert_eq!(
        refused(&other[2]),
        "event seq 3 of group g2 does not continue the export at seq 2"
    );
    assert_eq!(
        refused(&events[3]),
        "event seq 4 of group g1 does not continue the export at seq 2"
    );
    assert_eq!(
        refused(&events[1]),
        "event seq 2 of group g1 does not continue the export at seq 2"
    );
    assert_ne!(
        forked[2].prev, events[1].id,
        "seq 3 of the fork chains to its own seq 2"
    );
    assert_eq!(
        refused(&forked[3]),
        "event seq 4 of group g1 does not continue the export at seq 2"
    );
    assert_eq!(
        refused(&forked[2]),
        "event seq 3 of group g1 does not continue the export at seq 2"
    );
}

/// Reads the export as `mwp verify --source` does: every snapshot checked, not only the one
/// replay starts from.
fn read_every(files: &Files, start: Start) -> Result<StaticReader, Error> {
    let mut r = StaticReader::new(id("g1"), key().public(), start).check_every_snapshot();
    while let Some(path) = r.poll_fetch() {
        let b = files
            .get(&path)
            .ok_or_else(|| Error::new(Code::NotFound, format!("{path} is not there")))?;
        r.handle_fetched(&path, b)?;
    }
    Ok(r)
}

/// A change to an export's index (as JSON).
type IndexEdit = Box<dyn Fn(&mut serde_json::Value)>;

/// The export's index rewritten by `edit` (as JSON), stored under its new content address
/// and named by `head.json`.
fn with_index(files: &Files, edit: impl FnOnce(&mut serde_json::Value)) -> Files {
    let mut files = files.clone();
    let mut hf: serde_json::Value = serde_json::from_slice(&files[HEAD_FILE]).unwrap();
    let old = hf["index"].as_str().unwrap().to_owned();
    let mut index: serde_json::Value = serde_json::from_slice(&files[&old]).unwrap();
    edit(&mut index);
    let b = serde_json::to_vec(&index).unwrap();
    let path = format!("index/{}.json", mwp_core::Hash::of(&b).to_hex());
    files.insert(path.clone(), b);
    hf["index"] = path.into();
    files.insert(HEAD_FILE.into(), serde_json::to_vec(&hf).unwrap());
    files
}

/// An export of `rich()` and 6 more events with two snapshots (after `rich()` and 3 events
/// later), in chunks of 4.
fn two_snapshots() -> Files {
    let mut s = rich();
    let snap1 = Snapshot::build_cbor(s.state(), &key()).unwrap();
    more(&mut s, 3, "a");
    let snap2 = Snapshot::build_cbor(s.state(), &key()).unwrap();
    let mid = s.events();
    let trusted = key().public();
    let x1 = export::plan(None, &bytes(&mid), Some(&snap1), &head(&mid), &trusted, 4).unwrap();
    let mut files = Files::new();
    write(&mut files, &x1);
    more(&mut s, 3, "b");
    let all = s.events();
    let rest = bytes(&all[mid.len()..]);
    let x2 = export::plan(
        Some(&x1.index),
        &rest,
        Some(&snap2),
        &head(&all),
        &trusted,
        4,
    )
    .unwrap();
    write(&mut files, &x2);
    assert_eq!(x2.index.snapshots.len(), 2);
    files
}

#[test]
fn an_index_whose_fields_disagree_with_its_files_is_refused() {
    let files = two_snapshots();
    read_every(&files, Start::Genesis).unwrap();
    read_every(&files, Start::Snapshot).unwrap();
    let zero = "00".repeat(32);
    let edits: Vec<(&str, IndexEdit)> = vec![
        (
            "a snapshot's seq",
            Box::new(|x| {
                x["snapshots"][1]["seq"] = (x["snapshots"][1]["seq"].as_u64().unwrap() - 1).into()
            }),
        ),
        (
            "an older snapshot's seq",
            Box::new(|x| x["snapshots"][0]["seq"] = 2.into()),
        ),
        (
            "a snapshot's state hash",
            Box::new(move |x| x["snapshots"][1]["state_hash"] = zero.clone().into()),
        ),
        (
            "an older snapshot's state hash",
            Box::new(|x| x["snapshots"][0]["state_hash"] = x["snapshots"][1]["state_hash"].clone()),
        ),
        (
            "the last chunk's bytes",
            Box::new(|x| {
                let last = x["chunks"].as_array().unwrap().len() - 1;
                x["chunks"][last]["bytes"] = 5.into();
            }),
        ),
        (
            "a duplicated snapshot",
            Box::new(|x| {
                let s = x["snapshots"][1].clone();
                x["snapshots"].as_array_mut().unwrap().push(s);
            }),
        ),
        (
            "a snapshot listed twice at two seqs",
            Box::new(|x| {
                let mut s = x["snapshots"][1].clone();
                s["seq"] = (s["seq"].as_u64().unwrap() + 1).into();
                x["snapshots"].as_array_mut().unwrap().push(s);
            }),
        ),
        (
            "snapshots out of order",
            Box::new(|x| x["snapshots"].as_array_mut().unwrap().reverse()),
        ),
    ];
    for (what, edit) in &edits {
        let bad = with_index(&files, edit);
        for start in [Start::Genesis, Start::Snapshot] {
            let e = read_every(&bad, start)
                .err()
                .unwrap_or_else(|| panic!("{what} ({start:?}): accepted"));
            assert_eq!(e.code, Code::LogCorrupt, "{what} ({start:?}): {e}");
            assert!(
                e.details["file"].as_str().unwrap().starts_with("index/"),
                "{what} ({start:?}): {e}"
            );
        }
    }
    // A reader that starts from the latest snapshot checks that one's entry too, without
    // being asked to check every snapshot.
    let bad = with_index(&files, &edits[2].1);
    assert_eq!(
        read(&bad, Start::Snapshot).unwrap_err().code,
        Code::LogCorrupt
    );
    let bad = with_index(&files, &edits[4].1);
    assert_eq!(
        read(&bad, Start::Genesis).unwrap_err().code,
        Code::LogCorrupt
    );
}

#[test]
fn checking_every_snapshot_refuses_a_damaged_or_missing_one_from_genesis() {
    let files = two_snapshots();
    let snaps: Vec<String> = files
        .keys()
        .filter(|k| k.starts_with("snapshots/"))
        .cloned()
        .collect();
    let mut log = Vec::new();
    read_logged(&files, Start::Genesis, &mut log).unwrap();
    assert!(
        log.iter().all(|p| !p.starts_with("snapshots/")),
        "a plain genesis read fetches no snapshot"
    );
    for path in &snaps {
        let mut flipped = files.clone();
        let at = flipped[path].len() / 2;
        flipped.get_mut(path).unwrap()[at] ^= 0x01;
        let mut missing = files.clone();
        missing.remove(path);
        for (bad, code) in [(flipped, Code::LogCorrupt), (missing, Code::NotFound)] {
            for start in [Start::Genesis, Start::Snapshot] {
                let e = read_every(&bad, start).unwrap_err();
                assert_eq!(e.code, code, "{path} ({start:?}): {e}");
            }
        }
    }
}

#[test]
fn a_signed_snapshot_that_disagrees_with_the_chain_is_refused() {
    // The authority signed a snapshot of another history at a seq the export's chain passes.
    let mut s = rich();
    let mut other = rich();
    more(&mut other, 1, "other");
    let lie = Snapshot::build_cbor(other.state(), &key()).unwrap();
    more(&mut s, 3, "z");
    let events = s.events();
    let x = export::plan(
        None,
        &bytes(&events),
        Some(&lie),
        &head(&events),
        &key().public(),
        4,
    )
    .unwrap();
    let mut files = Files::new();
    write(&mut files, &x);
    let file = &x.index.snapshots[0].file;
    let e = read_every(&files, Start::Genesis).unwrap_err();
    assert_eq!(
        (
            e.code,
            e.details["check"].as_str(),
            e.details["file"].as_str()
        ),
        (
            Code::SnapshotInvalid,
            Some("state_hash"),
            Some(file.as_str())
        ),
        "{e}"
    );
}
