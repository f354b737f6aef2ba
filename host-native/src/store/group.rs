//! One Group on disk: its segmented log, redaction overlay and snapshots, the state rebuilt
//! from them, and the group commit that makes accepted events durable.
//!
//! The authority's transaction boundaries, as this file spells them:
//!
//! 1. **accept transition** ([`GroupLog::submit`]): under the group lock, `accept` decides,
//!    the event is applied to the in-memory state and *staged* (appended to `pending`);
//! 2. **commit** ([`GroupLog::wait_durable`]): a leader takes every staged event, writes
//!    them as one batch and `fdatasync`s; only then do their receipts leave. Every answer,
//!    rejections and duplicates included, waits until the state it was decided on is durable;
//! 3. **after commit**: redaction erases the target's stored values, and due snapshots are
//!    written. A crash between 2 and 3 is repaired by the next open, which redoes 3.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use mwp_core::authority::{self, Authority, Commit, Step};
use mwp_core::snapshot::Snapshot;
use mwp_core::{
    Code, Command, Decision, Error, Event, EventKind, GroupState, Hash, Id, PreparedKey, PublicKey,
    Receipt, Result,
};

use super::backend::StorageFile;
use super::format::{
    self, corrupt_at, decode_overlay_entry, encode_overlay_entry, encode_record, parse_numbered,
    record_crc, scan, segment_name, snapshot_name, storage, Erased, Erasure, FileHeader,
    RecordHeader, ScanSpec, FILE_HEADER_LEN, MAX_RECORD_LEN, OVERLAY_MAGIC, OVERLAY_NAME,
    RECORD_HEADER_LEN, SEGMENT_MAGIC,
};
use super::{Ctx, OpenReport};

/// Largest number of record bytes one `events` call reads.
const MAX_READ_BYTES: u64 = 8 << 20;

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
    durable: u64,
    flushing: bool,
    /// Submitters parked until their seq is durable: woken by the flush that makes it so,
    /// or to lead the next flush. Waking only these (not every waiter after every sync)
    /// keeps dozens of submitters from all waking for each `fdatasync`.
    waiters: Vec<(u64, std::thread::Thread)>,
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

#[derive(Default)]
struct Overlay {
    file: Option<Arc<dyn StorageFile>>,
    end: u64,
    entries: BTreeMap<u64, OverlayEntry>,
}

impl Overlay {
    /// Reads the redacted event an entry points at; `dir` is the group's directory.
    fn read(&self, dir: &Path, e: &OverlayEntry) -> Result<Event> {
        let file = self
            .file
            .as_ref()
            .ok_or_else(|| Error::corrupt("redaction overlay is missing"))?;
        let mut buf = vec![0u8; e.len as usize];
        file.read_at(e.offset, &mut buf)
            .map_err(io_err(format!("read {}", dir.join(OVERLAY_NAME).display())))?;
        let event =
            Event::from_cbor(&buf).map_err(|x| corrupt_at(OVERLAY_NAME, e.offset, x.message))?;
        // A redacted event keeps its payload hash and id (SPEC §6): both still verify.
        event
            .verify()
            .map_err(|x| corrupt_at(OVERLAY_NAME, e.offset, x.message))?;
        Ok(event)
    }
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
    sync: Mutex<SyncState>,
    io: Mutex<Writer>,
    index: RwLock<Vec<SegmentIndex>>,
    overlay: RwLock<Overlay>,
    erasing: Mutex<()>,
    snaps: Mutex<Option<SnapInfo>>,
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
            sync: Mutex::new(SyncState {
                durable: 1,
                flushing: false,
                waiters: Vec::new(),
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
        lock(&self.sync).durable
    }

    /// A copy of the state as of the last durable event (the in-memory state may be ahead by
    /// staged events; this waits until they are durable, or fails if storage failed).
    pub(crate) fn state(&self) -> Result<GroupState> {
        let state = lock(&self.core).state().clone();
        self.wait_durable(state.seq)?;
        Ok(state)
    }

    /// Runs `f` on the state (possibly ahead of durability by staged events).
    pub(crate) fn with_state<T>(&self, f: impl FnOnce(&GroupState) -> T) -> T {
        f(lock(&self.core).state())
    }

    /// Decides a command; an accepted event is durable when this returns.
    pub(crate) fn submit(self: &Arc<Self>, cmd: &Command, now_ms: u64) -> Result<Decision> {
        self.ctx.check_sticky()?;
        // Step 2 of accept, the signature check, runs here outside the lock so that
        // concurrent submitters verify in parallel; accept re-checks if the key changed.
        // A member's key is decoded once, in the state; the authority's only signs ticks.
        let signer: Option<(PublicKey, Option<PreparedKey>)> = self.with_state(|s| {
            if cmd.actor.is_authority() {
                Some((s.authority_key, None))
            } else {
                let m = s.members.get(&cmd.actor)?;
                Some((m.key, m.prepared_key().cloned()))
            }
        });
        let verified = signer.and_then(|(key, prepared)| {
            let prepared = prepared.or_else(|| key.prepare())?;
            cmd.verify_prepared(&prepared)
                .unwrap_or(false)
                .then_some(key)
        });
        let (decision, wait_for, snapshot) = {
            let mut core = lock(&self.core);
            self.ctx.check_sticky()?;
            let decided = match &verified {
                Some(k) => core.driver.handle_command_preverified(cmd, now_ms, k),
                None => core.driver.handle_command(cmd, now_ms),
            };
            match decided {
                Err(e) => (Err(e), core.state().seq, None),
                Ok(Step::Rejected(r)) => (Ok(Decision::Rejected(r)), core.state().seq, None),
                Ok(Step::Duplicate(r)) => {
                    let seq = r.seq;
                    (Ok(Decision::Duplicate(r)), seq, None)
                }
                Ok(Step::Accepted(commit)) => {
                    // The driver applied the event; it must reach the log or the store
                    // refuses writes (a failed flush is sticky), so the state never
                    // outlives what is durable.
                    if commit.bytes.len() > MAX_RECORD_LEN as usize {
                        let e = Error::new(
                            Code::Storage,
                            format!(
                                "event is {} bytes; the store's record limit is {MAX_RECORD_LEN}",
                                commit.bytes.len()
                            ),
                        );
                        self.ctx.set_sticky(e.clone());
                        return Err(e);
                    }
                    let Commit {
                        event,
                        bytes,
                        snapshot,
                        ..
                    } = commit;
                    core.pending.push(Staged {
                        seq: event.seq,
                        id: event.id,
                        bytes,
                    });
                    let seq = event.seq;
                    (Ok(Decision::Accepted(event)), seq, snapshot)
                }
            }
        };
        self.wait_durable(wait_for)?;
        if let Ok(Decision::Accepted(event)) = &decision {
            if let EventKind::EventRedacted(r) = &event.kind {
                self.fail_sticky(self.erase(r.seq))?;
            }
            if let Some(due) = snapshot {
                let archived = matches!(event.kind, EventKind::GroupArchived(_));
                if self.ctx.background_snapshots && !archived {
                    let me = Arc::clone(self);
                    std::thread::spawn(move || {
                        // A failure is recorded as the sticky storage error.
                        let _ = me.fail_sticky(me.write_snapshot(due.state()));
                    });
                } else {
                    self.fail_sticky(self.write_snapshot(due.state()))?;
                }
            }
        }
        decision
    }

    /// Makes a storage failure sticky.
    fn fail_sticky<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if e.code == Code::Storage {
                self.ctx.set_sticky(e.clone());
            }
        }
        r
    }

    /// Waits until every event up to `seq` is durable, flushing as the leader if nobody is.
    ///
    /// A submitter that finds a flush running parks. The leader, when its sync is done,
    /// unparks the submitters whose events it made durable (all of them if it failed) and
    /// one more, still waiting, to lead the next flush of what was staged meanwhile.
    pub(crate) fn wait_durable(&self, seq: u64) -> Result<()> {
        let me = std::thread::current();
        let mut s = lock(&self.sync);
        loop {
            if s.durable >= seq {
                return Ok(());
            }
            if let Err(e) = self.ctx.check_sticky() {
                // Nothing will be flushed any more: nobody may stay parked.
                for (_, t) in s.waiters.drain(..) {
                    t.unpark();
                }
                return Err(e);
            }
            if !s.flushing {
                s.flushing = true;
                drop(s);
                let flushed = self.flush();
                s = lock(&self.sync);
                s.flushing = false;
                let failed = match flushed {
                    Ok(d) => {
                        s.durable = s.durable.max(d);
                        false
                    }
                    Err(e) => {
                        self.ctx.set_sticky(e);
                        true
                    }
                };
                let durable = s.durable;
                let mut leader = false;
                s.waiters.retain(|(w, t)| {
                    if failed || *w <= durable {
                        t.unpark();
                        false
                    } else {
                        if !leader {
                            leader = true;
                            t.unpark();
                        }
                        true
                    }
                });
                continue;
            }
            s.waiters.push((seq, me.clone()));
            drop(s);
            // A wake-up that came before this park is not lost (the thread's token).
            std::thread::park();
            s = lock(&self.sync);
            s.waiters.retain(|(_, t)| t.id() != me.id());
        }
    }

    /// Writes every staged event as one batch and syncs it. Returns the last durable seq.
    fn flush(&self) -> Result<u64> {
        let mut w = lock(&self.io);
        let pending = std::mem::take(&mut lock(&self.core).pending);
        let (Some(first), Some(last)) = (pending.first(), pending.last()) else {
            return Ok(w.last_seq);
        };
        let (first_seq, last_seq, last_id) = (first.seq, last.seq, last.id);
        if w.end >= self.ctx.segment_bytes && w.end > FILE_HEADER_LEN as u64 {
            self.roll(&mut w, first_seq)?;
        }
        let size: usize = pending
            .iter()
            .map(|p| RECORD_HEADER_LEN + p.bytes.len())
            .sum();
        let mut buf = Vec::with_capacity(size);
        let mut offsets = Vec::with_capacity(pending.len());
        for p in &pending {
            offsets.push(w.end + buf.len() as u64);
            encode_record(&mut buf, p.seq, first_seq, &p.bytes);
        }
        let records = buf.len() as u64;
        if w.end + records > w.alloc && self.ctx.reserve_bytes > 0 {
            // Past the reserved space: reserve more in the same write and the same sync.
            // A crash leaves zeros after the last record, which the open takes as the end.
            let zeros = usize::try_from(self.ctx.reserve_bytes).unwrap_or(usize::MAX);
            buf.resize(buf.len().saturating_add(zeros), 0);
        }
        w.file.write_at(w.end, &buf).map_err(io_err(format!(
            "append to {}",
            self.path(&w.name).display()
        )))?;
        w.file
            .sync_data()
            .map_err(io_err(format!("sync {}", self.path(&w.name).display())))?;
        w.alloc = w.alloc.max(w.end + buf.len() as u64);
        w.end += records;
        w.last_seq = last_seq;
        w.last_id = last_id;
        let mut index = write(&self.index);
        if let Some(seg) = index.last_mut() {
            seg.offsets.extend(offsets);
            seg.end = w.end;
        }
        Ok(last_seq)
    }

    /// Starts a new segment whose first record will be `first_seq`.
    ///
    /// The segment being closed is first cut to its last record and synced: only the last
    /// segment may end in reserved zeros.
    fn roll(&self, w: &mut Writer, first_seq: u64) -> Result<()> {
        if w.alloc > w.end {
            let path = self.path(&w.name);
            w.file
                .set_len(w.end)
                .map_err(io_err(format!("cut {} to its last record", path.display())))?;
            w.file
                .sync_data()
                .map_err(io_err(format!("sync {}", path.display())))?;
            w.alloc = w.end;
        }
        let name = segment_name(first_seq);
        let header = FileHeader {
            magic: SEGMENT_MAGIC,
            first_seq,
            prev: w.last_id,
            group: self.id.clone(),
        }
        .encode();
        let file = write_new_file(&self.ctx, &self.dir, &name, &header)?;
        w.file = file.clone();
        w.name = name.clone();
        w.end = FILE_HEADER_LEN as u64;
        w.alloc = w.end;
        write(&self.index).push(SegmentIndex {
            first_seq,
            name,
            file,
            offsets: Vec::new(),
            end: FILE_HEADER_LEN as u64,
        });
        Ok(())
    }

    /// The receipt of (actor, action), if its event is durable.
    pub(crate) fn receipt(&self, actor: &Id, action: &Id) -> Option<Receipt> {
        let r = self.with_state(|s| s.receipt(actor.as_str(), action.as_str()))?;
        (r.seq <= self.durable()).then_some(r)
    }

    /// When the group's authority next acts by itself ([`Authority::next_wake`]).
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        lock(&self.core).driver.next_wake()
    }

    /// Submits the `tick` the driver sends at `now_ms` ([`Authority::poll_tick`]); `None`
    /// when nothing is due.
    pub(crate) fn tick(self: &Arc<Self>, now_ms: u64) -> Result<Option<(Command, Decision)>> {
        let Some(cmd) = lock(&self.core).driver.poll_tick(now_ms)? else {
            return Ok(None);
        };
        let decision = self.submit(&cmd, now_ms)?;
        Ok(Some((cmd, decision)))
    }

    /// Events with seq > `after`, at most `limit`, durable ones only.
    pub(crate) fn events(&self, after: u64, limit: usize) -> Result<Vec<Event>> {
        let head = self.durable();
        let policy = self.ctx.authority.policy();
        let mut latest = lock(&self.snaps).clone();
        loop {
            let known = latest.as_ref().map(|i| (i.seq, i.state_hash));
            match policy.check_replay(&self.id, after, head, known) {
                authority::Replay::Serve => break,
                authority::Replay::NeedSnapshot => latest = Some(self.latest_snapshot_info()?),
                authority::Replay::TooOld(e) => return Err(e),
            }
        }
        if after >= head || limit == 0 {
            // Nothing after the head; `after + 1` below must not wrap at u64::MAX.
            return Ok(Vec::new());
        }
        let last = head.min(after.saturating_add(limit as u64));
        let mut out = Vec::new();
        let index = read(&self.index);
        let overlay = read(&self.overlay);
        let mut seq = after + 1;
        let mut bytes_read = 0u64;
        while seq <= last && bytes_read < MAX_READ_BYTES {
            let seg_i = index
                .partition_point(|s| s.first_seq <= seq)
                .saturating_sub(1);
            let seg = index
                .get(seg_i)
                .filter(|s| seq >= s.first_seq && seq - s.first_seq < s.offsets.len() as u64)
                .ok_or_else(|| {
                    Error::corrupt(format!("seq {seq} of group {} is not in the log", self.id))
                })?;
            let i0 = (seq - seg.first_seq) as usize;
            let start = seg.offsets[i0];
            let cap = start.saturating_add(MAX_READ_BYTES);
            let within = seg.offsets.partition_point(|&o| o <= cap);
            let i1 = ((last - seg.first_seq + 1) as usize)
                .min(seg.offsets.len())
                .min(within.max(i0 + 1));
            let end = seg.offsets.get(i1).copied().unwrap_or(seg.end);
            let mut buf = vec![0u8; (end - start) as usize];
            seg.file
                .read_at(start, &mut buf)
                .map_err(io_err(format!("read {}", self.path(&seg.name).display())))?;
            bytes_read += buf.len() as u64;
            let mut at = 0usize;
            while at + RECORD_HEADER_LEN <= buf.len() && seq <= last {
                let Some(h) = RecordHeader::parse(&buf[at..]) else {
                    break;
                };
                let total = RECORD_HEADER_LEN + h.len as usize;
                if h.seq != seq || at + total > buf.len() {
                    break;
                }
                let event = match overlay.entries.get(&seq) {
                    Some(e) => overlay.read(&self.dir, e)?,
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
                        if self.ctx.read_only && self.with_state(|s| s.redacted.contains(&seq)) {
                            // Redacted, and the writer has not erased it yet.
                            event.redact()?;
                        }
                        event
                    }
                };
                out.push(event);
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

    /// Reads the durable record of `seq` from its segment: (segment file, record offset,
    /// header, payload).
    fn read_record(&self, seq: u64) -> Result<StoredRecord> {
        let index = read(&self.index);
        let seg_i = index
            .partition_point(|s| s.first_seq <= seq)
            .saturating_sub(1);
        let seg = index
            .get(seg_i)
            .filter(|s| seq >= s.first_seq && seq - s.first_seq < s.offsets.len() as u64)
            .ok_or_else(|| {
                Error::corrupt(format!("seq {seq} of group {} is not in the log", self.id))
            })?;
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

    /// Erases the stored opaque values of event `seq` (SPEC §6): the redacted form goes to the
    /// overlay (synced), then the record's payload is zeroed in place (synced).
    pub(crate) fn erase(&self, seq: u64) -> Result<()> {
        let _one_at_a_time = lock(&self.erasing);
        let (file, name, off, h, payload) = self.read_record(seq)?;
        let known = read(&self.overlay).entries.get(&seq).copied();
        if known.is_none() {
            if !h.matches(&payload) {
                return Err(corrupt_at(
                    &name,
                    off,
                    format!("record seq {seq} checksum mismatch"),
                ));
            }
            if payload.iter().all(|&b| b == 0) {
                return Err(corrupt_at(
                    &name,
                    off,
                    format!("record seq {seq} was erased but {OVERLAY_NAME} has no entry for it"),
                ));
            }
            let mut event =
                Event::from_cbor(&payload).map_err(|e| corrupt_at(&name, off, e.message))?;
            event.redact()?;
            let red = event.to_cbor()?;
            let entry = encode_overlay_entry(
                Erased {
                    len: h.len,
                    crc: h.crc,
                },
                &red,
            );
            let (ofile, oend) = self.overlay_file()?;
            let mut rec = Vec::new();
            encode_record(&mut rec, seq, seq, &entry);
            let oname = self.path(OVERLAY_NAME).display().to_string();
            ofile
                .write_at(oend, &rec)
                .map_err(io_err(format!("append to {oname}")))?;
            ofile.sync_data().map_err(io_err(format!("sync {oname}")))?;
            let mut ov = write(&self.overlay);
            ov.end = oend + rec.len() as u64;
            ov.entries.insert(
                seq,
                OverlayEntry {
                    offset: oend + (RECORD_HEADER_LEN + 8) as u64,
                    len: red.len() as u32,
                    orig: Erased {
                        len: h.len,
                        crc: h.crc,
                    },
                },
            );
        }
        zero_record(&file, &self.path(&name), off, &h)
    }

    /// The overlay file and its end, creating it (durably) if needed.
    fn overlay_file(&self) -> Result<(Arc<dyn StorageFile>, u64)> {
        {
            let ov = read(&self.overlay);
            if let Some(f) = &ov.file {
                return Ok((f.clone(), ov.end));
            }
        }
        let header = FileHeader {
            magic: OVERLAY_MAGIC,
            first_seq: 0,
            prev: Hash::ZERO,
            group: self.id.clone(),
        }
        .encode();
        let file = write_new_file(&self.ctx, &self.dir, OVERLAY_NAME, &header)?;
        let mut ov = write(&self.overlay);
        ov.file = Some(file.clone());
        ov.end = FILE_HEADER_LEN as u64;
        Ok((file, ov.end))
    }

    fn latest_snapshot_info(&self) -> Result<SnapInfo> {
        if let Some(info) = lock(&self.snaps).clone() {
            return Ok(info);
        }
        let state = self.state()?;
        if self.ctx.read_only {
            let (_, state_hash) = Snapshot::build_stored(&state, self.ctx.authority.secret_key())?;
            return Ok(SnapInfo {
                seq: state.seq,
                state_hash,
            });
        }
        self.write_snapshot(&state)
    }

    /// Canonical CBOR of the latest snapshot, taking one if there is none (read-only: signed
    /// in memory, not written).
    pub(crate) fn latest_snapshot(&self) -> Result<Vec<u8>> {
        if self.ctx.read_only && lock(&self.snaps).is_none() {
            let state = self.state()?;
            return Ok(Snapshot::build_stored(&state, self.ctx.authority.secret_key())?.0);
        }
        let info = self.latest_snapshot_info()?;
        let bytes = read_snapshot_file(&self.ctx, &self.path(&snapshot_name(info.seq)))?;
        let (_, payload) = format::decode_snapshot_file(&bytes).map_err(|e| {
            Error::new(
                Code::SnapshotInvalid,
                format!("{}: {e}", snapshot_name(info.seq)),
            )
        })?;
        Ok(payload.to_vec())
    }

    /// Writes a signed snapshot of `state` (whose events must be durable) and prunes old ones.
    pub(crate) fn write_snapshot(&self, state: &GroupState) -> Result<SnapInfo> {
        let mut latest = lock(&self.snaps);
        if let Some(l) = latest.as_ref().filter(|l| l.seq >= state.seq) {
            return Ok(l.clone());
        }
        self.ctx.check_sticky()?;
        let (payload, state_hash) = Snapshot::build_stored(state, self.ctx.authority.secret_key())?;
        let data = format::encode_snapshot_file(state.seq, &payload);
        drop(payload);
        write_new_file(&self.ctx, &self.dir, &snapshot_name(state.seq), &data)?;
        let info = SnapInfo {
            seq: state.seq,
            state_hash,
        };
        *latest = Some(info.clone());
        self.prune_snapshots()?;
        Ok(info)
    }

    fn prune_snapshots(&self) -> Result<()> {
        let be = &self.ctx.backend;
        let names = be
            .list(&self.dir)
            .map_err(io_err(format!("list {}", self.dir.display())))?;
        let snaps: Vec<&String> = names
            .iter()
            .filter(|n| parse_numbered(n, "snap").is_some())
            .collect();
        let keep = self.ctx.snapshots_kept.max(1);
        if snaps.len() <= keep {
            return Ok(());
        }
        for name in &snaps[..snaps.len() - keep] {
            let p = self.path(name);
            be.remove(&p)
                .map_err(io_err(format!("remove {}", p.display())))?;
        }
        be.sync_dir(&self.dir)
            .map_err(io_err(format!("sync {}", self.dir.display())))
    }

    /// Reopens a group from its directory. A directory without a segment is `LOG_CORRUPT`:
    /// a group directory is only ever renamed into place holding its first segment, so its
    /// acknowledged events are missing.
    pub(crate) fn open(
        ctx: Arc<Ctx>,
        dir: PathBuf,
        id: Id,
        report: &mut OpenReport,
    ) -> Result<Arc<GroupLog>> {
        let be = ctx.backend.clone();
        let names = be
            .list(&dir)
            .map_err(io_err(format!("list {}", dir.display())))?;
        let mut removed = false;
        // A `.tmp` file was never renamed into place: it holds nothing acknowledged.
        for n in names.iter().filter(|n| n.ends_with(".tmp")) {
            if ctx.read_only {
                continue;
            }
            be.remove(&dir.join(n))
                .map_err(io_err(format!("remove {n}")))?;
            removed = true;
        }
        if removed {
            be.sync_dir(&dir)
                .map_err(io_err(format!("sync {}", dir.display())))?;
        }
        let seg_seqs: Vec<u64> = names
            .iter()
            .filter_map(|n| parse_numbered(n, "seg"))
            .collect();
        if seg_seqs.is_empty() {
            let has = |ext: &str| names.iter().any(|n| parse_numbered(n, ext).is_some());
            let what = if has("snap") || names.iter().any(|n| n == OVERLAY_NAME) {
                "holds snapshots or redactions but no log segment"
            } else {
                "holds no log segment"
            };
            return Err(Error::corrupt(format!(
                "{}: group {id} {what}: its acknowledged events are missing",
                dir.display()
            ))
            .with("file", dir.display().to_string()));
        }
        let mut snap_seqs: Vec<u64> = names
            .iter()
            .filter_map(|n| parse_numbered(n, "snap"))
            .collect();
        snap_seqs.sort_unstable();

        // The overlay first: the segment scan needs to know which records are erased.
        let mut overlay = Overlay::default();
        if names.iter().any(|n| n == OVERLAY_NAME) {
            let path = dir.join(OVERLAY_NAME);
            let file = be
                .open(&path)
                .map_err(io_err(format!("open {}", path.display())))?;
            check_header(&*file, OVERLAY_NAME, OVERLAY_MAGIC, &id, None)?;
            let mut entries = BTreeMap::new();
            let spec = ScanSpec {
                name: OVERLAY_NAME,
                first_seq: 1,
                contiguous: false,
                may_be_torn: true,
                reserve: false,
                erased: &|_| None,
            };
            let end = scan(&*file, &spec, &mut |r| {
                let Some((orig, redacted)) = decode_overlay_entry(r.payload) else {
                    return Err(corrupt_at(
                        OVERLAY_NAME,
                        r.offset,
                        "entry shorter than 8 bytes",
                    ));
                };
                entries.insert(
                    r.header.seq,
                    OverlayEntry {
                        offset: r.offset + (RECORD_HEADER_LEN + 8) as u64,
                        len: redacted.len() as u32,
                        orig,
                    },
                );
                Ok(())
            })?;
            if let Some(torn) = end.torn.filter(|_| !ctx.read_only) {
                trim(&*file, &path, end.end)?;
                report
                    .trimmed
                    .push((path.display().to_string(), end.end, torn));
            }
            overlay = Overlay {
                file: Some(file),
                end: end.end,
                entries,
            };
        }

        // The newest snapshot that verifies is the base; older ones are fallbacks.
        let mut base: Option<Snapshot> = None;
        for seq in snap_seqs.iter().rev() {
            let path = dir.join(snapshot_name(*seq));
            match load_snapshot(&ctx, &path, *seq, &id) {
                Ok(s) => {
                    base = Some(s);
                    break;
                }
                Err(e) => report
                    .skipped_snapshots
                    .push((path.display().to_string(), e.message)),
            }
        }
        let base_seq = base.as_ref().map_or(0, |s| s.seq);
        let chain_head = base.as_ref().map(|s| s.chain_head);
        let snap_info = base.as_ref().map(|s| SnapInfo {
            seq: s.seq,
            state_hash: s.state_hash,
        });
        let mut state: Option<GroupState> = base.map(|s| s.state);

        // Two stages on two threads: a scoped worker reads and checks the log and decodes most
        // records (the expensive part); this thread decodes the rest and applies, in order.
        // The split keeps both cores busy (see `Batch`). Applied batches go back to the worker
        // to be freed there: memory allocated and freed by the same thread keeps the allocator
        // out of cross-thread consolidation.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(8);
        let (done_tx, done_rx) = std::sync::mpsc::channel::<Batch>();
        let scanned: Result<Scanned> = std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                let read_only = ctx.read_only;
                scan_segments(
                    &be, &dir, &id, &seg_seqs, &overlay, base_seq, read_only, tx, done_rx,
                )
            });
            let mut applied: Result<()> = Ok(());
            for batch in rx.iter() {
                for (name, offset, item) in &batch.items {
                    let (name, offset) = (&**name, *offset);
                    let decoded;
                    let event = match item {
                        Item::Event(event) => event,
                        Item::Raw { seq, bytes } => {
                            match decode_record(&batch.bytes[bytes.clone()], *seq, name, offset) {
                                Ok(e) => {
                                    decoded = e;
                                    &decoded
                                }
                                Err(e) => {
                                    applied = Err(e);
                                    break;
                                }
                            }
                        }
                        Item::SegmentStart { prev } => {
                            let head = state.as_ref().map_or(Hash::ZERO, |s| s.head);
                            if *prev != head {
                                applied = Err(corrupt_at(
                                    name,
                                    20,
                                    "segment header's prev is not the id of the event before it",
                                ));
                                break;
                            }
                            continue;
                        }
                    };
                    let r = if event.seq == base_seq {
                        if Some(event.id) == chain_head {
                            Ok(())
                        } else {
                            Err(corrupt_at(
                                name,
                                offset,
                                format!("event {} is not the snapshot's chain head", event.seq),
                            ))
                        }
                    } else {
                        GroupState::apply_to(&mut state, event)
                            .map_err(|e| corrupt_at(name, offset, e.message))
                    };
                    if let Err(e) = r {
                        applied = Err(e);
                        break;
                    }
                }
                // The worker may have finished; then the batch is freed here.
                let _ = done_tx.send(batch);
                if applied.is_err() {
                    break;
                }
            }
            // Dropping the receiver stops the worker at its next send.
            drop(rx);
            let scanned = worker.join().unwrap_or_else(|_| {
                Err(Error::new(Code::Storage, "the log reader thread panicked"))
            });
            applied.and(scanned)
        });
        let Scanned {
            index,
            reserved,
            pending_zero,
            next_seq,
            trimmed,
        } = scanned?;
        report.trimmed.extend(trimmed);
        let head = next_seq - 1;
        if head < base_seq {
            return Err(Error::corrupt(format!(
                "group {id}: the log ends at seq {head} but a snapshot holds seq {base_seq}: acknowledged events are missing"
            )));
        }
        let Some(state) = state else {
            return Err(Error::corrupt(format!(
                "group {id}: the log holds no event"
            )));
        };
        let last = index.last().ok_or_else(|| Error::corrupt("no segment"))?;
        let writer = Writer {
            file: last.file.clone(),
            name: last.name.clone(),
            end: last.end,
            alloc: last.end + reserved,
            last_seq: head,
            last_id: state.head,
        };
        let archived = state.archived;
        let redacted: Vec<u64> = state.redacted.iter().copied().collect();
        let driver = Authority::restore(ctx.authority.clone(), Some(state));
        let group = Arc::new(GroupLog {
            id,
            dir,
            ctx,
            core: Mutex::new(Core {
                driver,
                pending: Vec::new(),
            }),
            sync: Mutex::new(SyncState {
                durable: head,
                flushing: false,
                waiters: Vec::new(),
            }),
            io: Mutex::new(writer),
            index: RwLock::new(index),
            overlay: RwLock::new(overlay),
            erasing: Mutex::new(()),
            snaps: Mutex::new(snap_info),
        });
        if group.ctx.read_only {
            // Repairs are the writer's: a read-only open changes nothing.
            return Ok(group);
        }
        // Finish what a crash interrupted: erasures, then the final snapshot of an archive.
        for seq in redacted.into_iter().chain(pending_zero) {
            let known = read(&group.overlay).entries.contains_key(&seq);
            if !known || group.needs_zeroing(seq)? {
                group.erase(seq)?;
                report
                    .repaired
                    .push(format!("erased the values of seq {seq}"));
            }
        }
        if archived && lock(&group.snaps).as_ref().map(|s| s.seq) != Some(head) {
            let state = lock(&group.core).state().clone();
            group.write_snapshot(&state)?;
            report
                .repaired
                .push(format!("wrote the final snapshot at seq {head}"));
        }
        Ok(group)
    }

    fn needs_zeroing(&self, seq: u64) -> Result<bool> {
        let (_, _, _, h, payload) = self.read_record(seq)?;
        Ok(!h.is_erased(&payload))
    }
}

/// A record read back from a segment: (file, segment name, offset, header, payload).
type StoredRecord = (Arc<dyn StorageFile>, String, u64, RecordHeader, Vec<u8>);

/// Header bytes 0..20 of a parsed record header (what the CRC covers before the payload).
/// Zeroes a record's payload and rewrites its CRC to match, in one write, then syncs.
fn zero_record(file: &Arc<dyn StorageFile>, path: &Path, off: u64, h: &RecordHeader) -> Result<()> {
    file.write_at(off + 20, &h.erase_patch())
        .map_err(io_err(format!("erase in {}", path.display())))?;
    file.sync_data()
        .map_err(io_err(format!("sync {}", path.display())))
}

fn trim(file: &dyn StorageFile, path: &Path, end: u64) -> Result<()> {
    file.set_len(end)
        .map_err(io_err(format!("trim {}", path.display())))?;
    file.sync_data()
        .map_err(io_err(format!("sync {}", path.display())))
}

/// Writes a whole new file durably: `<name>.tmp`, sync, rename to `name`, sync the directory.
pub(crate) fn write_new_file(
    ctx: &Ctx,
    dir: &Path,
    name: &str,
    data: &[u8],
) -> Result<Arc<dyn StorageFile>> {
    let be = &ctx.backend;
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let file = be
        .create(&tmp, 0o600)
        .map_err(io_err(format!("create {}", tmp.display())))?;
    file.write_at(0, data)
        .map_err(io_err(format!("write {}", tmp.display())))?;
    file.sync_data()
        .map_err(io_err(format!("sync {}", tmp.display())))?;
    be.rename(&tmp, &path)
        .map_err(io_err(format!("rename {}", tmp.display())))?;
    be.sync_dir(dir)
        .map_err(io_err(format!("sync {}", dir.display())))?;
    Ok(file)
}

fn check_header(
    file: &dyn StorageFile,
    name: &str,
    magic: [u8; 8],
    id: &Id,
    first_seq: Option<u64>,
) -> Result<FileHeader> {
    let mut b = [0u8; FILE_HEADER_LEN];
    // A file shorter than its header reads short: the core's check reports it.
    let got = if file.read_at(0, &mut b).is_ok() {
        &b[..]
    } else {
        &[][..]
    };
    FileHeader::check(got, magic, id, first_seq).map_err(|d| d.into_error(name))
}

pub(crate) fn read_snapshot_file(ctx: &Ctx, path: &Path) -> Result<Vec<u8>> {
    let file = ctx
        .backend
        .open(path)
        .map_err(io_err(format!("open {}", path.display())))?;
    let len = file
        .len()
        .map_err(io_err(format!("size of {}", path.display())))?;
    let mut buf = vec![0u8; len as usize];
    file.read_at(0, &mut buf)
        .map_err(io_err(format!("read {}", path.display())))?;
    Ok(buf)
}

fn load_snapshot(ctx: &Ctx, path: &Path, seq: u64, group: &Id) -> Result<Snapshot> {
    let bytes = read_snapshot_file(ctx, path)?;
    let invalid = |m: String| Error::new(Code::SnapshotInvalid, format!("{}: {m}", path.display()));
    let (frame_seq, payload) = format::decode_snapshot_file(&bytes).map_err(invalid)?;
    let snap = Snapshot::verify_stored(payload, &ctx.authority.public_key(), group)?;
    drop(bytes);
    if frame_seq != seq || snap.seq != seq {
        return Err(invalid(format!(
            "holds seq {}, its name says {seq}",
            snap.seq
        )));
    }
    Ok(snap)
}

/// Turns scanned records into events, reading redacted ones from the overlay.
struct Replay<'a> {
    overlay: &'a Overlay,
    dir: &'a Path,
}

impl<'a> Replay<'a> {
    fn new(overlay: &'a Overlay, dir: &'a Path) -> Self {
        Replay { overlay, dir }
    }

    fn decode(&mut self, r: &format::Record<'_>, name: &str) -> Result<Event> {
        if r.erasure == Erasure::None {
            return decode_record(r.payload, r.header.seq, name, r.offset);
        }
        let e =
            self.overlay.entries.get(&r.header.seq).ok_or_else(|| {
                corrupt_at(name, r.offset, "redacted record has no overlay entry")
            })?;
        let event = self.overlay.read(self.dir, e)?;
        holds_seq(event, r.header.seq, name, r.offset)
    }
}

/// What the log reader found: the segment index, records whose erasure must be redone,
/// the next seq, and the tails it trimmed.
struct Scanned {
    index: Vec<SegmentIndex>,
    /// Zero bytes reserved after the last segment's last record.
    reserved: u64,
    pending_zero: Vec<u64>,
    next_seq: u64,
    trimmed: Vec<(String, u64, u64)>,
}

/// Records handed from the log reader to the applier, in log order.
///
/// Decoding is most of the work of opening a log and applying is most of the rest. The
/// reader decodes the records of three batches in five and leaves the other two raw for the
/// applier, which brings the two threads' work close to even on two cores.
struct Batch {
    /// Whether plain records are left raw in this batch.
    raw: bool,
    /// Payloads of the raw records, back to back.
    bytes: Vec<u8>,
    /// Each record's segment name, offset and content.
    items: Vec<(Arc<str>, u64, Item)>,
}

/// One record in a [`Batch`].
// Most items are events: boxing them would cost an allocation per event for nothing.
#[allow(clippy::large_enum_variant)]
enum Item {
    /// Decoded by the reader.
    Event(Event),
    /// To be decoded by the applier: the record's seq and where its payload is in `bytes`.
    Raw {
        seq: u64,
        bytes: std::ops::Range<usize>,
    },
    /// A segment begins; its header names the id of the event before it.
    SegmentStart { prev: Hash },
}

impl Batch {
    /// Records per batch.
    const LEN: usize = 256;

    /// The `n`th batch of a scan.
    fn new(n: usize) -> Batch {
        let raw = n % 5 >= 3;
        Batch {
            raw,
            bytes: Vec::with_capacity(if raw { Batch::LEN * 512 } else { 0 }),
            items: Vec::with_capacity(Batch::LEN + 1),
        }
    }
}

/// Decodes a plain (not redacted) record's payload, which must hold the record's seq.
///
/// The payload hash and the id are checked against the stored bytes
/// ([`Event::from_cbor_verified`]): a record edited with a recomputed CRC is `LOG_CORRUPT`.
fn decode_record(payload: &[u8], seq: u64, name: &str, offset: u64) -> Result<Event> {
    let event =
        Event::from_cbor_verified(payload).map_err(|e| corrupt_at(name, offset, e.message))?;
    holds_seq(event, seq, name, offset)
}

/// The event of the record at `offset`, whose header says `seq`.
fn holds_seq(event: Event, seq: u64, name: &str, offset: u64) -> Result<Event> {
    if event.seq != seq {
        return Err(corrupt_at(
            name,
            offset,
            format!("record seq {seq} holds event seq {}", event.seq),
        ));
    }
    Ok(event)
}

/// Reads every segment in order, checking framing, CRCs and seqs, trimming a torn tail, and
/// sends the records from `from_seq` on to `tx` in batches, decoded or raw (freeing the
/// batches that come back on `done`).
#[allow(clippy::too_many_arguments)]
fn scan_segments(
    be: &Arc<dyn super::backend::Backend>,
    dir: &Path,
    id: &Id,
    seg_seqs: &[u64],
    overlay: &Overlay,
    from_seq: u64,
    read_only: bool,
    tx: std::sync::mpsc::SyncSender<Batch>,
    done: std::sync::mpsc::Receiver<Batch>,
) -> Result<Scanned> {
    let mut index: Vec<SegmentIndex> = Vec::new();
    let mut pending_zero: Vec<u64> = Vec::new();
    let mut trimmed = Vec::new();
    let mut reserved = 0;
    let mut next_seq = 1u64;
    let erased = |seq: u64| overlay.entries.get(&seq).map(|e| e.orig);
    let mut replay = Replay::new(overlay, dir);
    let mut batch = Batch::new(0);
    let mut batches = 0usize;
    let stopped = || Error::new(Code::Storage, "log replay stopped");
    for (i, first_seq) in seg_seqs.iter().enumerate() {
        let name = segment_name(*first_seq);
        let shared: Arc<str> = Arc::from(name.as_str());
        let path = dir.join(&name);
        let file = be
            .open(&path)
            .map_err(io_err(format!("open {}", path.display())))?;
        if *first_seq != next_seq {
            return Err(corrupt_at(
                &name,
                0,
                format!("segment starts at seq {first_seq}, expected {next_seq}"),
            ));
        }
        let header = check_header(&*file, &name, SEGMENT_MAGIC, id, Some(*first_seq))?;
        if *first_seq > from_seq {
            // Checked by the applier against the state before the segment's first event.
            batch
                .items
                .push((shared.clone(), 0, Item::SegmentStart { prev: header.prev }));
        }
        let mut offsets = Vec::new();
        let spec = ScanSpec {
            name: &name,
            first_seq: *first_seq,
            contiguous: true,
            may_be_torn: i + 1 == seg_seqs.len(),
            reserve: i + 1 == seg_seqs.len(),
            erased: &erased,
        };
        let end = scan(&*file, &spec, &mut |r| {
            offsets.push(r.offset);
            if r.erasure == Erasure::Pending {
                pending_zero.push(r.header.seq);
            }
            if r.header.seq < from_seq {
                return Ok(());
            }
            let item = if batch.raw && r.erasure == Erasure::None {
                let start = batch.bytes.len();
                batch.bytes.extend_from_slice(r.payload);
                Item::Raw {
                    seq: r.header.seq,
                    bytes: start..batch.bytes.len(),
                }
            } else {
                Item::Event(replay.decode(&r, &name)?)
            };
            batch.items.push((shared.clone(), r.offset, item));
            if batch.items.len() >= Batch::LEN {
                batches += 1;
                tx.send(std::mem::replace(&mut batch, Batch::new(batches)))
                    .map_err(|_| stopped())?;
                done.try_iter().for_each(drop);
            }
            Ok(())
        })?;
        if let Some(torn) = end.torn.filter(|_| !read_only) {
            trim(&*file, &path, end.end)?;
            trimmed.push((path.display().to_string(), end.end, torn));
        }
        reserved = end.reserved;
        next_seq = end.last_seq + 1;
        index.push(SegmentIndex {
            first_seq: *first_seq,
            name,
            file,
            offsets,
            end: end.end,
        });
    }
    if !batch.items.is_empty() {
        tx.send(batch).map_err(|_| stopped())?;
    }
    Ok(Scanned {
        index,
        reserved,
        pending_zero,
        next_seq,
        trimmed,
    })
}
