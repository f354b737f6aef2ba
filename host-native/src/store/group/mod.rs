//! One Group on disk: its segmented log, redaction overlay and snapshots, the state rebuilt
//! from them, and the group commit that makes accepted events durable.
//!
//! The authority's transaction boundaries, as this module spells them:
//!
//! 1. **accept transition** ([`GroupLog::submit`]): under the group lock, `accept` decides,
//!    the event is applied to the in-memory state and *staged* (appended to `pending`);
//! 2. **commit** ([`GroupLog::wait_durable`]): a leader takes every staged event, writes
//!    them as one batch and makes it durable in the store's next sync round, which other
//!    groups' batches may share (`super::shared_sync`); only then do their receipts leave. Every answer,
//!    rejections and duplicates included, waits until the state it was decided on is durable;
//! 3. **after commit**: redaction erases the target's stored values, and due snapshots are
//!    written. A crash between 2 and 3 is repaired by the next open, which redoes 3.
//!
//! By concern: [`commit`] (1 and 2, and rolling segments), [`overlay`] (erasure, 3),
//! [`snapshots`] (snapshot files, 3), [`replay`] (reading a group's files and rebuilding its
//! state, changing nothing: what `mwp fsck` runs as is), [`recover`] (opening a group:
//! replay, then trim torn tails and redo 3); this file holds the group's data and its reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use mwp_core::authority::{self, Authority, Commit, Step};
use mwp_core::snapshot::Snapshot;
use mwp_core::{
    Code, Command, Decision, Error, Event, EventKind, GroupState, Hash, Id, PreparedKey, PublicKey,
    Receipt, Result,
};

use super::backend::{Backend, StorageFile};
use super::format::{
    self, corrupt_at, decode_overlay_entry, encode_overlay_entry, encode_record, open_file,
    parse_numbered, record_crc, scan, segment_name, snapshot_name, storage, Erased, Erasure,
    FileHeader, RecordHeader, ScanSpec, FILE_HEADER_LEN, KEY_NAME, MAX_RECORD_LEN, OVERLAY_MAGIC,
    OVERLAY_NAME, RECORD_HEADER_LEN, SEGMENT_MAGIC,
};
use super::{Ctx, OpenReport};

mod commit;
mod overlay;
mod recover;
mod replay;
mod seal;
mod snapshots;

pub(crate) use commit::CommitQueue;
use recover::*;
pub(crate) use recover::{
    check_group_key, read_snapshot_file, write_new_file, write_new_file_parts,
};
use replay::*;
pub(crate) use replay::{
    in_group_dir, named_by_path, read_overlay, replay, snapshot_ahead, Base, GroupFiles, Torn,
};
pub(crate) use seal::{plain_from, read_seal_record, verify_artifact_file, SealRecord};
pub(crate) use snapshots::load_snapshot;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves its data consistent before anything can panic in it,
    // so a poisoned lock still guards good data.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn read<T>(m: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(m: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Staged {
    seq: u64,
    id: Hash,
    bytes: Vec<u8>,
}

struct Core {
    /// The group's authority driver; its state may be ahead of durability by `pending`.
    driver: Authority,
    pending: Vec<Staged>,
}

impl Core {
    /// The state: a created or opened group always has one (genesis is applied first).
    fn state(&self) -> &GroupState {
        self.driver
            .state()
            .expect("a group on disk holds at least its genesis event")
    }
}

struct SyncState {
    flushing: bool,
    /// Submitters parked until their seq is durable: woken by the flush that makes it so,
    /// or to lead the next flush. Waking only these (not every waiter after every sync)
    /// keeps dozens of submitters from all waking for each `fdatasync`.
    waiters: crate::store::parked::Parked,
    /// Submitters waiting without a thread until their seq is durable
    /// ([`GroupLog::durable_async`]): woken by the flush that makes it so (all of them if it
    /// failed), or to start the next flush when nobody leads one.
    tasks: crate::store::parked::Tasks,
}

struct Writer {
    file: Arc<dyn StorageFile>,
    name: String,
    /// End of the last record.
    end: u64,
    /// End of the file: `end` plus the zero bytes reserved after it.
    alloc: u64,
    last_seq: u64,
    last_id: Hash,
}

struct SegmentIndex {
    first_seq: u64,
    name: String,
    file: Arc<dyn StorageFile>,
    /// Offsets of the durable records, by seq − first_seq.
    offsets: Vec<u64>,
    /// End of the durable records.
    end: u64,
}

#[derive(Clone, Copy)]
struct OverlayEntry {
    /// Offset of the redacted event's bytes in the overlay file.
    offset: u64,
    len: u32,
    orig: Erased,
}

/// The redaction overlay of a group: where each erased event's redacted form is.
#[derive(Default)]
pub(crate) struct Overlay {
    file: Option<Arc<dyn StorageFile>>,
    end: u64,
    entries: BTreeMap<u64, OverlayEntry>,
}

/// The latest snapshot on disk.
#[derive(Clone)]
pub(crate) struct SnapInfo {
    pub(crate) seq: u64,
    state_hash: Hash,
}

/// One Group's storage and state.
pub(crate) struct GroupLog {
    id: Id,
    dir: PathBuf,
    ctx: Arc<Ctx>,
    core: Mutex<Core>,
    /// The members' decoded keys, for the signature check that runs before `core` is taken:
    /// read without waiting for a decision in progress. Refreshed from the state under
    /// `core` whenever a member's key there differs; a stale key only costs the decision a
    /// second check ([`mwp_core::accept::accept_verified`] verifies again under any other
    /// key than the state's).
    signers: RwLock<std::collections::HashMap<Id, PreparedKey>>,
    /// The last durable seq: written only under `sync`, and read without it, so that a
    /// submitter its flush woke returns without taking the lock again.
    durable: AtomicU64,
    sync: Mutex<SyncState>,
    io: Mutex<Writer>,
    index: RwLock<Vec<SegmentIndex>>,
    overlay: RwLock<Overlay>,
    erasing: Mutex<()>,
    snaps: Mutex<Option<SnapInfo>>,
    /// The archival, once sealed (SPEC §6a).
    sealed: Mutex<Option<seal::Sealed>>,
}

fn io_err(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> Error {
    move |e| storage(what, e)
}

impl GroupLog {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Creates the group's directory and first segment, holding the genesis event, durably.
    ///
    /// The directory is built under a temporary name (`groups/.new-<name>`) and renamed to its
    /// group's name only once the segment is durable (docs/format.md, "Creating a group"): a
    /// group directory therefore always holds a segment, and only a `.new-` directory is an
    /// interrupted creation.
    pub(crate) fn create(
        ctx: Arc<Ctx>,
        dir: PathBuf,
        driver: Authority,
        genesis: &Commit,
    ) -> Result<Arc<GroupLog>> {
        let bytes = &genesis.bytes;
        let genesis_snapshot = &genesis.snapshot;
        let genesis = &*genesis.event;
        let be = &ctx.backend;
        let parent = dir.parent().unwrap_or(Path::new("")).to_path_buf();
        let dir_name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let building = parent.join(format!("{}{dir_name}", super::NEW_GROUP_PREFIX));
        if be.is_dir(&building) {
            // Left by a creation this process failed part way (the open removes the others).
            for n in be
                .list(&building)
                .map_err(io_err(format!("list {}", building.display())))?
            {
                let p = building.join(n);
                be.remove(&p)
                    .map_err(io_err(format!("remove {}", p.display())))?;
            }
        } else {
            be.create_dir(&building)
                .map_err(io_err(format!("create {}", building.display())))?;
        }
        let mut data = FileHeader {
            magic: SEGMENT_MAGIC,
            first_seq: 1,
            prev: Hash::ZERO,
            group: genesis.group.clone(),
        }
        .encode()
        .to_vec();
        encode_record(&mut data, 1, 1, bytes);
        let name = segment_name(1);
        let file = write_new_file(&ctx, &building, &name, &data)?;
        be.rename(&building, &dir)
            .map_err(io_err(format!("rename {}", building.display())))?;
        be.sync_dir(&parent)
            .map_err(io_err(format!("sync {}", parent.display())))?;
        let head = genesis.id;
        let group = GroupLog {
            id: genesis.group.clone(),
            dir,
            ctx,
            core: Mutex::new(Core {
                driver,
                pending: Vec::new(),
            }),
            signers: Default::default(),
            durable: AtomicU64::new(1),
            sync: Mutex::new(SyncState {
                flushing: false,
                waiters: Default::default(),
                tasks: Default::default(),
            }),
            io: Mutex::new(Writer {
                file: file.clone(),
                name: name.clone(),
                end: data.len() as u64,
                alloc: data.len() as u64,
                last_seq: 1,
                last_id: head,
            }),
            index: RwLock::new(vec![SegmentIndex {
                first_seq: 1,
                name,
                file,
                offsets: vec![FILE_HEADER_LEN as u64],
                end: data.len() as u64,
            }]),
            overlay: RwLock::new(Overlay::default()),
            erasing: Mutex::new(()),
            snaps: Mutex::new(None),
            sealed: Mutex::new(None),
        };
        let group = Arc::new(group);
        if let Some(due) = &genesis_snapshot {
            group.write_snapshot(due.state())?;
        }
        Ok(group)
    }

    /// The group's ID.
    pub(crate) fn id(&self) -> &Id {
        &self.id
    }

    /// Seq of the last durable event.
    pub(crate) fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// A copy of the state as of the last durable event (the in-memory state may be ahead by
    /// staged events; this waits until they are durable, or fails if storage failed).
    pub(crate) fn state(&self) -> Result<GroupState> {
        let state = lock(&self.core).state().clone();
        self.wait_durable(state.seq)?;
        Ok(state)
    }

    /// The org, seq and id of the last event, once it is durable (a staged event is waited
    /// for, as [`GroupLog::state`] does, without copying the state).
    pub(crate) fn durable_head(&self) -> Result<(Id, u64, Hash)> {
        let (org, seq, head) = self.with_state(|s| (s.org.clone(), s.seq, s.head));
        self.wait_durable(seq)?;
        Ok((org, seq, head))
    }

    /// Runs `f` on the state (possibly ahead of durability by staged events).
    pub(crate) fn with_state<T>(&self, f: impl FnOnce(&GroupState) -> T) -> T {
        f(lock(&self.core).state())
    }
}

impl GroupLog {
    /// The receipt of (actor, action), if its event is durable.
    pub(crate) fn receipt(&self, actor: &Id, action: &Id) -> Option<Receipt> {
        let r = self.with_state(|s| s.receipt(actor.as_str(), action.as_str()))?;
        (r.seq <= self.durable()).then_some(r)
    }

    /// When the group's authority next acts by itself ([`Authority::next_wake`]).
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        lock(&self.core).driver.next_wake()
    }

    /// Events with seq > `after`, at most `limit`, durable ones only; `CURSOR_TOO_OLD` for a
    /// cursor before the online window, or before the final snapshot of a group whose plain
    /// history was removed when sealed.
    pub(crate) fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>> {
        let head = self.durable();
        let policy = self.ctx.authority.policy();
        let mut latest = lock(&self.snaps).clone();
        if let Some(sealed) = *lock(&self.sealed) {
            if sealed.plain_removed {
                let hash = latest
                    .as_ref()
                    .filter(|l| l.seq == sealed.seq)
                    .map(|l| l.state_hash)
                    .ok_or_else(|| {
                        Error::corrupt(format!(
                            "group {}: its plain history was removed but its final snapshot {} is not known",
                            self.id, sealed.seq
                        ))
                    })?;
                return match authority::Policy::check_replay_sealed(
                    &self.id, after, sealed.seq, hash,
                ) {
                    authority::Replay::TooOld(e) => Err(e),
                    _ => self.read_events(after, limit),
                };
            }
        }
        loop {
            let known = latest.as_ref().map(|i| (i.seq, i.state_hash));
            match policy.check_replay(&self.id, after, head, known) {
                authority::Replay::Serve => break,
                authority::Replay::NeedSnapshot => latest = Some(self.latest_snapshot_info()?),
                authority::Replay::TooOld(e) => return Err(e),
            }
        }
        self.read_events(after, limit)
    }

    /// Events with seq > `after`, at most `limit`, durable ones only, from the log whatever
    /// the online window.
    pub(crate) fn read_events(&self, after: u64, limit: usize) -> Result<Vec<Event>> {
        let head = self.durable();
        if after >= head || limit == 0 {
            // Nothing after the head; `after + 1` below must not wrap at u64::MAX.
            return Ok(Vec::new());
        }
        let last = head.min(after.saturating_add(limit as u64));
        let mut out = Vec::new();
        let index = read(&self.index);
        let overlay = read(&self.overlay);
        let mut seq = after + 1;
        // The bytes of the events the page has taken: it takes the next while
        // `authority::page_takes` says so (the one rule of every store's page).
        let mut taken = 0u64;
        while seq <= last && authority::page_takes(taken) {
            let seg = self.segment_of(&index, seq)?;
            let i0 = (seq - seg.first_seq) as usize;
            let start = seg.offsets[i0];
            let upto = ((last - seg.first_seq + 1) as usize).min(seg.offsets.len());
            // Records i0..i1 of this segment: its first (the loop's condition takes it), then
            // each while the payloads before it (records are contiguous) leave room. Their
            // stored lengths only bound the read: a redacted event counts as served (its
            // redacted form), so the loop below decides which the page takes.
            let payloads = |i: usize| {
                (seg.offsets[i] - start).saturating_sub(((i - i0) * RECORD_HEADER_LEN) as u64)
            };
            let mut i1 = i0 + 1;
            while i1 < upto && authority::page_takes(taken + payloads(i1)) {
                i1 += 1;
            }
            let end = seg.offsets.get(i1).copied().unwrap_or(seg.end);
            let mut buf = vec![0u8; (end - start) as usize];
            seg.file
                .read_at(start, &mut buf)
                .map_err(io_err(format!("read {}", self.path(&seg.name).display())))?;
            let mut at = 0usize;
            while at + RECORD_HEADER_LEN <= buf.len() && seq <= last && authority::page_takes(taken)
            {
                let Some(h) = RecordHeader::parse(&buf[at..]) else {
                    break;
                };
                let total = RECORD_HEADER_LEN + h.len as usize;
                if h.seq != seq || at + total > buf.len() {
                    break;
                }
                // The event as the page serves it, and its bytes (its canonical CBOR: a
                // redacted event's redacted form, as a PostgreSQL row holds it).
                let (event, len) = match overlay.entries.get(&seq) {
                    Some(e) => (overlay.read(&self.dir, e)?, u64::from(e.len)),
                    None => {
                        let rec = &buf[at..at + total];
                        if record_crc(rec, &rec[RECORD_HEADER_LEN..]) != h.crc {
                            return Err(corrupt_at(
                                &seg.name,
                                start + at as u64,
                                "record checksum mismatch",
                            ));
                        }
                        let mut event = Event::from_cbor_verified(&rec[RECORD_HEADER_LEN..])
                            .map_err(|e| corrupt_at(&seg.name, start + at as u64, e.message))?;
                        if self.ctx.read_only
                            && self.with_state(|s| authority::serves_redacted(s, seq))
                        {
                            // Redacted, and the writer has not erased it yet.
                            event.redact()?;
                            let len = event.to_cbor()?.len() as u64;
                            (event, len)
                        } else {
                            (event, u64::from(h.len))
                        }
                    }
                };
                out.push(event);
                taken = taken.saturating_add(len);
                at += total;
                seq += 1;
            }
            if at == 0 {
                return Err(corrupt_at(
                    &seg.name,
                    start,
                    format!("record seq {seq} does not parse"),
                ));
            }
        }
        Ok(out)
    }

    /// The durable segment that holds `seq`; `LOG_CORRUPT` when none does.
    fn segment_of<'i>(&self, index: &'i [SegmentIndex], seq: u64) -> Result<&'i SegmentIndex> {
        let seg_i = index
            .partition_point(|s| s.first_seq <= seq)
            .saturating_sub(1);
        index
            .get(seg_i)
            .filter(|s| seq >= s.first_seq && seq - s.first_seq < s.offsets.len() as u64)
            .ok_or_else(|| {
                Error::corrupt(format!("seq {seq} of group {} is not in the log", self.id))
            })
    }

    /// Reads the durable record of `seq` from its segment: (segment file, record offset,
    /// header, payload).
    fn read_record(&self, seq: u64) -> Result<StoredRecord> {
        let index = read(&self.index);
        let seg = self.segment_of(&index, seq)?;
        let off = seg.offsets[(seq - seg.first_seq) as usize];
        let mut hb = [0u8; RECORD_HEADER_LEN];
        let name = self.path(&seg.name).display().to_string();
        seg.file
            .read_at(off, &mut hb)
            .map_err(io_err(format!("read {name}")))?;
        let Some(h) = RecordHeader::parse(&hb).filter(|h| h.seq == seq && h.len <= MAX_RECORD_LEN)
        else {
            return Err(corrupt_at(
                &seg.name,
                off,
                format!("expected record seq {seq}"),
            ));
        };
        let mut payload = vec![0u8; h.len as usize];
        seg.file
            .read_at(off + RECORD_HEADER_LEN as u64, &mut payload)
            .map_err(io_err(format!("read {name}")))?;
        Ok((seg.file.clone(), seg.name.clone(), off, h, payload))
    }
}

/// A record read back from a segment: (file, segment name, offset, header, payload).
type StoredRecord = (Arc<dyn StorageFile>, String, u64, RecordHeader, Vec<u8>);
