//! Opening a group from its directory: scanning segments and the overlay, trimming a torn
//! tail, redoing interrupted erasures and snapshots, and rebuilding the state.

use super::*;

impl GroupLog {
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
}

pub(super) fn trim(file: &dyn StorageFile, path: &Path, end: u64) -> Result<()> {
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

pub(super) fn check_header(
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

/// Turns scanned records into events, reading redacted ones from the overlay.
pub(super) struct Replay<'a> {
    overlay: &'a Overlay,
    dir: &'a Path,
}

impl<'a> Replay<'a> {
    pub(super) fn new(overlay: &'a Overlay, dir: &'a Path) -> Self {
        Replay { overlay, dir }
    }

    pub(super) fn decode(&mut self, r: &format::Record<'_>, name: &str) -> Result<Event> {
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
pub(super) struct Scanned {
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
pub(super) struct Batch {
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
pub(super) enum Item {
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
    pub(super) fn new(n: usize) -> Batch {
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
pub(super) fn decode_record(payload: &[u8], seq: u64, name: &str, offset: u64) -> Result<Event> {
    let event =
        Event::from_cbor_verified(payload).map_err(|e| corrupt_at(name, offset, e.message))?;
    holds_seq(event, seq, name, offset)
}

/// The event of the record at `offset`, whose header says `seq`.
pub(super) fn holds_seq(event: Event, seq: u64, name: &str, offset: u64) -> Result<Event> {
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
pub(super) fn scan_segments(
    be: &Arc<dyn crate::store::backend::Backend>,
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
