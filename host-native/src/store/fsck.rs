//! `mwp fsck`: checks every log, chain and snapshot of a data directory without changing
//! anything, and reports what it found.
//!
//! fsck is the read-only half of opening a group (`store/group/recover.rs`), run as is: the
//! same listing, overlay read, snapshot checks and log replay, with nothing trimmed or
//! repaired. For each group it replays the whole log from genesis (headers, record framing,
//! CRCs, seq continuity, every event's payload hash, id, group and `prev` chain, redacted
//! events from the overlay, each applied with `GroupState::apply`) and checks each snapshot's
//! frame, signature, binding and state hash against the replayed state at its seq. A torn
//! tail is reported as a warning (the next open trims it); everything else is damage.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use mwp_core::{Code, Error, Hash, Id, PublicKey, Result};

use super::backend::{Backend, FsBackend};
use super::format::{
    group_from_dir_name, snapshot_name, storage, GROUPS_DIR, KEY_NAME, OVERLAY_NAME,
};
use super::group::{
    check_group_key, in_group_dir, load_snapshot, named_by_path, plain_from, read_overlay,
    read_seal_record, replay, snapshot_ahead, verify_artifact_file, Base, GroupFiles, SealRecord,
    Torn,
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
    /// The archival of a sealed group (SPEC §6a).
    pub sealed: Option<SealSummary>,
}

/// What fsck found of a sealed group's archival.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealSummary {
    /// The final seq sealed.
    pub seq: u64,
    /// `sealed` (`audit.mwpa` verified whole, ciphertext hash included) or `expired`
    /// (`audit.tombstone`: the artifact was deleted past its retention).
    pub state: &'static str,
    /// Whether the plain history below the final snapshot was removed.
    pub plain_removed: bool,
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
        // What every open ignores (docs/format.md, "Directory layout") is no damage; it is
        // listed so that a group directory renamed by hand does not go unseen.
        let ignored = match group_from_dir_name(&name) {
            None => Some("not the directory name of any group id"),
            Some(_) if !be.is_dir(&path) => Some("not a directory"),
            Some(_) => None,
        };
        if let Some(why) = ignored {
            report.findings.push(Finding {
                group: None,
                file: path.display().to_string(),
                offset: None,
                code: Code::LogCorrupt,
                message: format!("{why}: no group; every open ignores it"),
                damage: false,
            });
            continue;
        }
        let Some(id) = group_from_dir_name(&name) else {
            continue;
        };
        check_group(&be, &path, &id, key.as_ref(), &key_path, &mut report);
    }
    Ok(report)
}

fn check_group(
    be: &Arc<dyn Backend>,
    dir: &Path,
    id: &Id,
    key: Option<&PublicKey>,
    key_path: &Path,
    report: &mut FsckReport,
) {
    let mut summary = GroupSummary {
        group: id.clone(),
        events: 0,
        state_hash: None,
        snapshots_ok: 0,
        sealed: None,
    };
    let mut findings = Vec::new();
    if let Err(e) = check_group_inner(be, dir, id, key, key_path, &mut summary, &mut findings) {
        let e = in_group_dir(dir, e);
        findings.push(finding(Some(id), &e, &dir.display().to_string(), true));
    }
    // Every finding names its file by its path, as the open's errors do.
    for f in &mut findings {
        if let Some((path, message)) = named_by_path(dir, &f.file, &f.message) {
            (f.file, f.message) = (path, message);
        }
    }
    report.groups.push(summary);
    report.findings.extend(findings);
}

fn check_group_inner(
    be: &Arc<dyn Backend>,
    dir: &Path,
    id: &Id,
    key: Option<&PublicKey>,
    key_path: &Path,
    summary: &mut GroupSummary,
    findings: &mut Vec<Finding>,
) -> Result<()> {
    // What an open reads, read the same way, repairing nothing.
    let files = GroupFiles::list(&**be, dir)?;
    files.require_segments(dir, id)?;
    // A sealed group whose plain history was removed is checked from its final snapshot.
    let mut skipped = Vec::new();
    let record = read_seal_record(&**be, dir, id, key, &mut skipped)?;
    for (file, message) in skipped {
        findings.push(Finding {
            group: Some(id.clone()),
            file,
            offset: None,
            code: Code::AuditInvalid,
            message,
            damage: true,
        });
    }
    let from = plain_from(record.as_ref(), &files.segments);
    let segments: Vec<u64> = files
        .segments
        .iter()
        .copied()
        .filter(|s| *s >= from)
        .collect();
    if let Some(r) = &record {
        let state = match r {
            SealRecord::Sealed(_) => {
                let path = dir.join(mwp_core::audit::ARTIFACT_NAME);
                if let Err(e) = verify_artifact_file(&**be, &path, key) {
                    findings.push(finding(Some(id), &e, mwp_core::audit::ARTIFACT_NAME, true));
                }
                "sealed"
            }
            SealRecord::Expired(_) => "expired",
        };
        summary.sealed = Some(SealSummary {
            seq: r.seq(),
            state,
            plain_removed: from > 1,
        });
    }
    let base = if from > 1 {
        let name = snapshot_name(from - 1);
        Some(load_snapshot(&**be, &dir.join(&name), from - 1, id, key)?)
    } else {
        None
    };
    let (overlay, torn) = if from > 1 {
        (Default::default(), None)
    } else {
        read_overlay(&**be, dir, id, &files)?
    };
    findings.extend(torn.map(|t| torn_warning(id, t)));

    // Every snapshot, to compare against the state replayed from genesis at its seq.
    let mut want_hash: BTreeMap<u64, Hash> = BTreeMap::new();
    for seq in &files.snapshots {
        let name = snapshot_name(*seq);
        match load_snapshot(&**be, &dir.join(&name), *seq, id, key) {
            Ok(s) => {
                want_hash.insert(*seq, s.state_hash);
            }
            Err(e) => findings.push(finding(Some(id), &e, &name, true)),
        }
    }

    let mut snapshot_findings = Vec::new();
    let replayed = replay(
        be,
        dir,
        id,
        &segments,
        &overlay,
        Base::Loaded(base),
        from,
        false,
        &mut |event, state| {
            summary.events = event.seq;
            let Some(want) = want_hash.get(&event.seq) else {
                return Ok(());
            };
            if state.hash()? == *want {
                summary.snapshots_ok += 1;
            } else {
                snapshot_findings.push(Finding {
                    group: Some(id.clone()),
                    file: snapshot_name(event.seq),
                    offset: None,
                    code: Code::SnapshotInvalid,
                    message: format!(
                        "state hash differs from the log's state at seq {}",
                        event.seq
                    ),
                    damage: true,
                });
            }
            Ok(())
        },
    );
    // What the replay found before any damage stands, whether or not it got to the end.
    findings.append(&mut snapshot_findings);
    let (state, scanned) = replayed?;
    findings.extend(scanned.torn.into_iter().map(|t| torn_warning(id, t)));
    let Some(state) = state else {
        return Err(Error::corrupt(format!(
            "group {id}: the log holds no event"
        )));
    };
    if let Some(Err(e)) = key.map(|k| check_group_key(key_path, &state, k)) {
        findings.push(finding(Some(id), &e, &key_path.display().to_string(), true));
    }
    for seq in want_hash.keys().filter(|s| **s > state.seq) {
        let e = snapshot_ahead(id, state.seq, *seq);
        findings.push(finding(Some(id), &e, &snapshot_name(*seq), true));
    }
    let unerased = state
        .redacted
        .iter()
        .filter(|s| !overlay.holds(**s))
        .count()
        + scanned.pending_zero.len();
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
    // From a sealed group's final snapshot, no event is replayed: the head is its seq.
    summary.events = summary.events.max(state.seq);
    summary.state_hash = Some(state.hash()?);
    Ok(())
}

fn torn_warning(id: &Id, torn: Torn) -> Finding {
    Finding {
        group: Some(id.clone()),
        file: torn.path,
        offset: Some(torn.end),
        code: Code::LogCorrupt,
        message: format!(
            "torn tail of {} bytes after the last whole record: an interrupted write that \
             was never acknowledged, or acknowledged records lost from the end of the log \
             (both leave these bytes); the next open trims it",
            torn.bytes
        ),
        damage: false,
    }
}
