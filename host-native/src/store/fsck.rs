//! `mwp fsck`: checks every log, chain and snapshot of a data directory without changing
//! anything, and reports what it found.
//!
//! For each group it streams every segment (headers, record framing, CRCs, seq continuity),
//! decodes and fully verifies every event (payload hash, id, `prev` chain, group), replays
//! them through `GroupState::apply`, checks each redacted event against the overlay, and
//! checks each snapshot's frame, signature, binding and state hash against the replayed state
//! at its seq. A torn tail is reported as a warning (the next open trims it); everything else
//! is damage.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use mwp_core::snapshot::Snapshot;
use mwp_core::{Code, Error, Event, GroupState, Hash, Id, PublicKey, Result};

use super::backend::{Backend, FsBackend, StorageFile};
use super::format::{
    self, corrupt_at, group_from_dir_name, parse_numbered, scan, segment_name, storage, Erased,
    Erasure, FileHeader, ScanSpec, FILE_HEADER_LEN, GROUPS_DIR, KEY_NAME, OVERLAY_MAGIC,
    OVERLAY_NAME, SEGMENT_MAGIC,
};

/// One thing fsck found.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The group, when the finding belongs to one.
    pub group: Option<Id>,
    /// The file.
    pub file: String,
    /// Byte offset in the file, when known.
    pub offset: Option<u64>,
    /// `LOG_CORRUPT`, `SNAPSHOT_INVALID` or `STORAGE`.
    pub code: Code,
    /// What is wrong.
    pub message: String,
    /// Damage (`true`) or a warning about something the next open repairs (`false`).
    pub damage: bool,
}

/// A group that was checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSummary {
    /// Group.
    pub group: Id,
    /// Events verified (the head seq when the log is intact).
    pub events: u64,
    /// Hash of the state replayed from the log.
    pub state_hash: Option<Hash>,
    /// Snapshots that verified.
    pub snapshots_ok: usize,
}

/// What fsck found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FsckReport {
    /// Groups checked.
    pub groups: Vec<GroupSummary>,
    /// Damage and warnings.
    pub findings: Vec<Finding>,
}

impl FsckReport {
    /// Whether nothing is damaged (warnings allowed).
    pub fn is_clean(&self) -> bool {
        self.findings.iter().all(|f| !f.damage)
    }
}

/// Checks a data directory on the real file system.
pub fn fsck(dir: impl AsRef<Path>) -> Result<FsckReport> {
    fsck_with(Arc::new(FsBackend), dir.as_ref())
}

fn finding(group: Option<&Id>, e: &Error, file_default: &str, damage: bool) -> Finding {
    Finding {
        group: group.cloned(),
        file: e
            .details
            .get("file")
            .and_then(|v| v.as_str())
            .unwrap_or(file_default)
            .to_owned(),
        offset: e.details.get("offset").and_then(serde_json::Value::as_u64),
        code: e.code,
        message: e.message.clone(),
        damage,
    }
}

/// Checks a data directory on any backend. `Err` only when the directory cannot be read.
pub fn fsck_with(be: Arc<dyn Backend>, dir: &Path) -> Result<FsckReport> {
    let mut report = FsckReport::default();
    let key_path = dir.join(KEY_NAME);
    let key: Option<PublicKey> = match super::read_key_file(&*be, &key_path) {
        Ok(k) => Some(k.public()),
        Err(e) => {
            report
                .findings
                .push(finding(None, &e, &key_path.display().to_string(), true));
            None
        }
    };
    let groups_dir = dir.join(GROUPS_DIR);
    let names = be
        .list(&groups_dir)
        .map_err(|e| storage(format!("list {}", groups_dir.display()), e))?;
    for name in names {
        let path = groups_dir.join(&name);
        if name.starts_with(super::NEW_GROUP_PREFIX) {
            report.findings.push(Finding {
                group: None,
                file: path.display().to_string(),
                offset: None,
                code: Code::LogCorrupt,
                message: "an interrupted group creation (nothing in it was acknowledged); the next open removes it".into(),
                damage: false,
            });
            continue;
        }
        let Some(id) = group_from_dir_name(&name) else {
            report.findings.push(Finding {
                group: None,
                file: path.display().to_string(),
                offset: None,
                code: Code::LogCorrupt,
                message: "not the directory name of any group id".into(),
                damage: true,
            });
            continue;
        };
        check_group(&*be, &path, &id, key.as_ref(), &mut report);
    }
    Ok(report)
}

fn check_group(
    be: &dyn Backend,
    dir: &Path,
    id: &Id,
    key: Option<&PublicKey>,
    report: &mut FsckReport,
) {
    let mut summary = GroupSummary {
        group: id.clone(),
        events: 0,
        state_hash: None,
        snapshots_ok: 0,
    };
    let mut findings = Vec::new();
    if let Err(e) = check_group_inner(be, dir, id, key, &mut summary, &mut findings) {
        findings.push(finding(Some(id), &e, &dir.display().to_string(), true));
    }
    report.groups.push(summary);
    report.findings.extend(findings);
}

fn open_file(be: &dyn Backend, path: &Path) -> Result<Arc<dyn StorageFile>> {
    be.open(path)
        .map_err(|e| storage(format!("open {}", path.display()), e))
}

fn header(file: &dyn StorageFile, name: &str, magic: [u8; 8], id: &Id) -> Result<FileHeader> {
    let mut b = [0u8; FILE_HEADER_LEN];
    // A file shorter than its header reads short: the core's check reports it.
    let got = if file.read_at(0, &mut b).is_ok() {
        &b[..]
    } else {
        &[][..]
    };
    FileHeader::check(got, magic, id, None).map_err(|d| d.into_error(name))
}

fn torn_warning(id: &Id, file: &str, end: &format::ScanEnd) -> Option<Finding> {
    end.torn.map(|bytes| Finding {
        group: Some(id.clone()),
        file: file.to_owned(),
        offset: Some(end.end),
        code: Code::LogCorrupt,
        message: format!(
            "torn tail of {bytes} bytes (an unacknowledged write); the next open trims it"
        ),
        damage: false,
    })
}

fn check_group_inner(
    be: &dyn Backend,
    dir: &Path,
    id: &Id,
    key: Option<&PublicKey>,
    summary: &mut GroupSummary,
    findings: &mut Vec<Finding>,
) -> Result<()> {
    let names = be
        .list(dir)
        .map_err(|e| storage(format!("list {}", dir.display()), e))?;
    // The overlay: redacted forms of erased events, by seq.
    let mut overlay: BTreeMap<u64, (Erased, Vec<u8>)> = BTreeMap::new();
    if names.iter().any(|n| n == OVERLAY_NAME) {
        let file = open_file(be, &dir.join(OVERLAY_NAME))?;
        header(&*file, OVERLAY_NAME, OVERLAY_MAGIC, id)?;
        let spec = ScanSpec {
            name: OVERLAY_NAME,
            first_seq: 1,
            contiguous: false,
            may_be_torn: true,
            reserve: false,
            erased: &|_| None,
        };
        let end = scan(&*file, &spec, &mut |r| {
            if r.payload.len() < 8 {
                return Err(corrupt_at(
                    OVERLAY_NAME,
                    r.offset,
                    "entry shorter than 8 bytes",
                ));
            }
            let mut a = [0u8; 4];
            a.copy_from_slice(&r.payload[0..4]);
            let len = u32::from_le_bytes(a);
            a.copy_from_slice(&r.payload[4..8]);
            let crc = u32::from_le_bytes(a);
            overlay.insert(r.header.seq, (Erased { len, crc }, r.payload[8..].to_vec()));
            Ok(())
        })?;
        findings.extend(torn_warning(id, OVERLAY_NAME, &end));
    }

    // Snapshots to compare against the replay, by seq.
    let snap_seqs: Vec<u64> = names
        .iter()
        .filter_map(|n| parse_numbered(n, "snap"))
        .collect();
    let mut want_hash: BTreeMap<u64, Hash> = BTreeMap::new();
    for seq in &snap_seqs {
        let name = format::snapshot_name(*seq);
        match check_snapshot(be, &dir.join(&name), *seq, id, key) {
            Ok(h) => {
                want_hash.insert(*seq, h);
            }
            Err(e) => findings.push(finding(Some(id), &e, &name, true)),
        }
    }

    let seg_seqs: Vec<u64> = names
        .iter()
        .filter_map(|n| parse_numbered(n, "seg"))
        .collect();
    if seg_seqs.is_empty() {
        return Err(Error::corrupt(format!("group {id} has no log segment")));
    }
    let erased = |seq: u64| overlay.get(&seq).map(|(e, _)| *e);
    let mut state: Option<GroupState> = None;
    let mut prev_id = Hash::ZERO;
    let mut next = 1u64;
    let mut pending_erasures = 0usize;
    for (i, first) in seg_seqs.iter().enumerate() {
        let name = segment_name(*first);
        let file = open_file(be, &dir.join(&name))?;
        let h = header(&*file, &name, SEGMENT_MAGIC, id)?;
        if h.first_seq != *first || *first != next {
            return Err(corrupt_at(
                &name,
                12,
                format!("segment starts at seq {}, expected {next}", h.first_seq),
            ));
        }
        if h.prev != prev_id {
            return Err(corrupt_at(
                &name,
                20,
                "segment header's prev is not the id of the event before it",
            ));
        }
        let spec = ScanSpec {
            name: &name,
            first_seq: *first,
            contiguous: true,
            may_be_torn: i + 1 == seg_seqs.len(),
            reserve: i + 1 == seg_seqs.len(),
            erased: &erased,
        };
        let end = scan(&*file, &spec, &mut |r| {
            let bytes: &[u8] = match r.erasure {
                Erasure::None => r.payload,
                Erasure::Pending | Erasure::Done => {
                    if r.erasure == Erasure::Pending {
                        pending_erasures += 1;
                    }
                    overlay
                        .get(&r.header.seq)
                        .map(|(_, b)| b.as_slice())
                        .ok_or_else(|| {
                            corrupt_at(&name, r.offset, "redacted record has no overlay entry")
                        })?
                }
            };
            let at = |m: String| corrupt_at(&name, r.offset, m);
            let event = Event::from_cbor(bytes).map_err(|e| at(e.message))?;
            if event.seq != r.header.seq || &event.group != id {
                return Err(at(format!(
                    "record seq {} holds event seq {} of group {}",
                    r.header.seq, event.seq, event.group
                )));
            }
            event.verify().map_err(|e| at(e.message))?;
            if event.prev != prev_id {
                return Err(at(format!(
                    "event {} does not chain to the event before it",
                    event.seq
                )));
            }
            GroupState::apply_to(&mut state, &event).map_err(|e| at(e.message))?;
            prev_id = event.id;
            if let (Some(want), Some(s)) = (want_hash.get(&event.seq), state.as_ref()) {
                if s.hash()? != *want {
                    findings.push(Finding {
                        group: Some(id.clone()),
                        file: format::snapshot_name(event.seq),
                        offset: None,
                        code: Code::SnapshotInvalid,
                        message: format!(
                            "state hash differs from the log's state at seq {}",
                            event.seq
                        ),
                        damage: true,
                    });
                } else {
                    summary.snapshots_ok += 1;
                }
            }
            summary.events = event.seq;
            Ok(())
        })?;
        findings.extend(torn_warning(id, &name, &end));
        next = end.last_seq + 1;
    }
    let Some(state) = state else {
        return Err(Error::corrupt(format!(
            "group {id}: the log holds no event"
        )));
    };
    for seq in want_hash.keys().filter(|s| **s > state.seq) {
        findings.push(Finding {
            group: Some(id.clone()),
            file: format::snapshot_name(*seq),
            offset: None,
            code: Code::LogCorrupt,
            message: format!(
                "snapshot at seq {seq} is ahead of the log, which ends at {}",
                state.seq
            ),
            damage: true,
        });
    }
    let unerased = state
        .redacted
        .iter()
        .filter(|s| !overlay.contains_key(s))
        .count()
        + pending_erasures;
    if unerased > 0 {
        findings.push(Finding {
            group: Some(id.clone()),
            file: OVERLAY_NAME.into(),
            offset: None,
            code: Code::LogCorrupt,
            message: format!(
                "{unerased} redacted event(s) not yet erased; the next open erases them"
            ),
            damage: false,
        });
    }
    summary.state_hash = Some(state.hash()?);
    Ok(())
}

fn check_snapshot(
    be: &dyn Backend,
    path: &Path,
    seq: u64,
    id: &Id,
    key: Option<&PublicKey>,
) -> Result<Hash> {
    let file = open_file(be, path)?;
    let len = file
        .len()
        .map_err(|e| storage(format!("size of {}", path.display()), e))?;
    let mut buf = vec![0u8; len as usize];
    file.read_at(0, &mut buf)
        .map_err(|e| storage(format!("read {}", path.display()), e))?;
    let invalid = |m: String| Error::new(Code::SnapshotInvalid, format!("{}: {m}", path.display()));
    let (frame_seq, payload) = format::decode_snapshot_file(&buf).map_err(invalid)?;
    let snap = Snapshot::from_cbor(payload)?;
    let trusted = key.copied().unwrap_or(snap.signer);
    snap.verify(&trusted, &snap.org, id, 0)?;
    if frame_seq != seq || snap.seq != seq {
        return Err(invalid(format!(
            "holds seq {}, its name says {seq}",
            snap.seq
        )));
    }
    Ok(snap.state_hash)
}
