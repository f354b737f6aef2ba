//! Reading a group's files without changing them: the listing, the redaction overlay and the
//! log replay onto a verified snapshot or from genesis. Opening a group ([`super::recover`])
//! runs this and then repairs what it found; `mwp fsck` runs it as is, from genesis.

use super::*;

/// A group directory's files, by kind.
pub(crate) struct GroupFiles {
    /// First seqs of the log segments, in order.
    pub(crate) segments: Vec<u64>,
    /// Seqs of the snapshot files, in order.
    pub(crate) snapshots: Vec<u64>,
    /// `.tmp` files: never renamed into place, so holding nothing acknowledged.
    pub(crate) temporary: Vec<String>,
    /// Whether the redaction overlay exists.
    pub(crate) overlay: bool,
}

impl GroupFiles {
    /// Lists a group's directory.
    pub(crate) fn list(be: &dyn Backend, dir: &Path) -> Result<GroupFiles> {
        let names = be
            .list(dir)
            .map_err(io_err(format!("list {}", dir.display())))?;
        let numbered = |ext: &str| -> Vec<u64> {
            let mut v: Vec<u64> = names
                .iter()
                .filter_map(|n| parse_numbered(n, ext))
                .collect();
            v.sort_unstable();
            v
        };
        Ok(GroupFiles {
            segments: numbered("seg"),
            snapshots: numbered("snap"),
            temporary: names
                .iter()
                .filter(|n| n.ends_with(".tmp"))
                .cloned()
                .collect(),
            overlay: names.iter().any(|n| n == OVERLAY_NAME),
        })
    }

    /// A directory without a segment is `LOG_CORRUPT`: a group directory is only ever renamed
    /// into place holding its first segment, so its acknowledged events are missing.
    pub(crate) fn require_segments(&self, dir: &Path, id: &Id) -> Result<()> {
        if !self.segments.is_empty() {
            return Ok(());
        }
        let what = if !self.snapshots.is_empty() || self.overlay {
            "holds snapshots or redactions but no log segment"
        } else {
            "holds no log segment"
        };
        Err(Error::corrupt(format!(
            "{}: group {id} {what}: its acknowledged events are missing",
            dir.display()
        ))
        .with("file", dir.display().to_string()))
    }
}

/// `path` of `file` when `file` is a bare name (a file of the group directory `dir`), else
/// `file` as it is.
fn path_in(dir: &Path, file: &str) -> String {
    if file.contains('/') {
        file.to_owned()
    } else {
        dir.join(file).display().to_string()
    }
}

/// A message about `file` (a file of the group directory `dir`) naming it by its path
/// instead: the path and the message, or `None` when `file` is a path already. The message
/// starts with the path (in place of the bare name, or before it).
pub(crate) fn named_by_path(dir: &Path, file: &str, message: &str) -> Option<(String, String)> {
    let path = path_in(dir, file);
    if path == file {
        return None;
    }
    let message = match message.strip_prefix(file) {
        Some(rest) => format!("{path}{rest}"),
        // An I/O error names the path already (`open PATH: …`): not twice.
        None if message.contains(&path) => message.to_owned(),
        None => format!("{path}: {message}"),
    };
    Some((path, message))
}

/// `e`, an error found in the group directory `dir`, naming its file by path. The checks of a
/// group's files name a file by its bare name (`00000000000000000001.seg`), which does not
/// say which group is damaged; this names it by its path in the data directory (as given),
/// in `details.file` and at the start of the message. A damage error that names no file names
/// the directory.
pub(crate) fn in_group_dir(dir: &Path, mut e: Error) -> Error {
    match e
        .details
        .get("file")
        .and_then(|f| f.as_str())
        .map(str::to_owned)
    {
        Some(file) => {
            if let Some((path, message)) = named_by_path(dir, &file, &e.message) {
                e.message = message;
                e.details.insert("file".into(), path.into());
            }
        }
        None if e.code != Code::Storage => {
            let path = dir.display().to_string();
            if !e.message.contains(&path) {
                e.message = format!("{path}: {}", e.message);
            }
            e.details.insert("file".into(), path.into());
        }
        None => {}
    }
    e
}

/// A snapshot at `snapshot` beyond the log's last event `log_end`: the events between were
/// acknowledged (a snapshot is only written of durable events) and are missing.
pub(crate) fn snapshot_ahead(id: &Id, log_end: u64, snapshot: u64) -> Error {
    let file = snapshot_name(snapshot);
    Error::corrupt(format!(
        "{file}: group {id}: the log ends at seq {log_end} but a snapshot holds seq {snapshot}: acknowledged events are missing"
    ))
    .with("file", file)
}

/// A torn tail found by a scan: bytes after the last whole record that the tail rule takes
/// for an unacknowledged write (damage to the newest records leaves the same bytes: see
/// docs/format.md, "What is assumed of the disk"). A writer trims it; a read-only open
/// leaves it and reports it.
pub(crate) struct Torn {
    /// The file.
    pub(crate) path: String,
    /// Where the whole records end.
    pub(crate) end: u64,
    /// Bytes after them.
    pub(crate) bytes: u64,
}

/// Reads the redaction overlay, if `files` has one, without changing it.
pub(crate) fn read_overlay(
    be: &dyn Backend,
    dir: &Path,
    id: &Id,
    files: &GroupFiles,
) -> Result<(Overlay, Option<Torn>)> {
    if !files.overlay {
        return Ok((Overlay::default(), None));
    }
    let path = dir.join(OVERLAY_NAME);
    let file = open_file(be, &path)?;
    check_header(&*file, OVERLAY_NAME, OVERLAY_MAGIC, id, None)?;
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
    let torn = end.torn.map(|bytes| Torn {
        path: path.display().to_string(),
        end: end.end,
        bytes,
    });
    let overlay = Overlay {
        file: Some(file),
        end: end.end,
        entries,
    };
    Ok((overlay, torn))
}

/// Where a replay starts. Built once per read of the log: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Base<'a> {
    /// On this verified snapshot, or from genesis.
    Loaded(Option<Snapshot>),
    /// On the snapshot `load` gives, expected at `seq` (the newest snapshot file's): `load`
    /// runs on this thread while the worker already reads and checks the log, which it does
    /// from its first segment whatever the base. Should `load` give another base (that file
    /// does not verify, and an older one or genesis is the base), the log is read again from
    /// that base.
    Load {
        seq: u64,
        load: &'a mut dyn FnMut() -> Option<Snapshot>,
    },
}

/// Replays a group's log onto its base (a verified snapshot) or, without one, from genesis:
/// every segment's header, framing, CRCs and seq continuity, every event's payload hash, id,
/// group and chain, redacted events read from the overlay, each applied in order with
/// [`GroupState::apply_stored_to`]. `on_event` sees every event from the base's seq on with
/// the state after it. Torn tails are trimmed only when `trim` is set; either way they are
/// returned.
#[allow(clippy::too_many_arguments)]
pub(crate) fn replay(
    be: &Arc<dyn Backend>,
    dir: &Path,
    id: &Id,
    segments: &[u64],
    overlay: &Overlay,
    mut base: Base<'_>,
    plain_from: u64,
    mut trim: bool,
    on_event: &mut dyn FnMut(&Event, &GroupState) -> Result<()>,
) -> Result<(Option<GroupState>, Scanned)> {
    let mut expected = match &base {
        Base::Loaded(base) => base.as_ref().map_or(0, |s| s.seq),
        Base::Load { seq, .. } => *seq,
    };
    // Torn tails the first read trimmed, when the log is read a second time.
    let mut trimmed = None;
    loop {
        match replay_from(
            be, dir, id, segments, overlay, expected, base, plain_from, trim, on_event,
        )? {
            Replayed::Done(state, mut scanned) => {
                if let Some(torn) = trimmed {
                    scanned.torn = torn;
                }
                return Ok((state, scanned));
            }
            Replayed::Again {
                base: loaded,
                first,
            } => {
                // The first read ran to its end: what it trimmed is reported, and the second
                // finds nothing left to trim. Had it failed, the second reads as it would.
                if let Ok(first) = first {
                    trimmed = Some(first.torn);
                    trim = false;
                }
                expected = loaded.as_ref().map_or(0, |s| s.seq);
                base = Base::Loaded(loaded);
            }
        }
    }
}

/// What one read of the log came to. Returned once per read: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Replayed {
    Done(Option<GroupState>, Scanned),
    /// The base loaded is not at the seq expected: the read sent only the records after
    /// that seq, so the log is read again from `base`. `first` is what the read found.
    Again {
        base: Option<Snapshot>,
        first: Result<Scanned>,
    },
}

/// One read of the log, sending the records after `expected` to be applied onto `base`
/// ([`replay`]).
///
/// Two stages on two threads: a scoped worker reads and checks the log and decodes most
/// records (the expensive part); this thread loads the base meanwhile, then decodes the rest
/// and applies, in order. The split keeps both cores busy (see `Batch`). Applied batches go
/// back to the worker to be freed there: memory allocated and freed by the same thread keeps
/// the allocator out of cross-thread consolidation.
#[allow(clippy::too_many_arguments)]
fn replay_from(
    be: &Arc<dyn Backend>,
    dir: &Path,
    id: &Id,
    segments: &[u64],
    overlay: &Overlay,
    expected: u64,
    base: Base<'_>,
    plain_from: u64,
    trim: bool,
    on_event: &mut dyn FnMut(&Event, &GroupState) -> Result<()>,
) -> Result<Replayed> {
    let base_seq = expected;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(8);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Batch>();
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            scan_segments(
                be, dir, id, segments, overlay, base_seq, plain_from, trim, tx, done_rx,
            )
        });
        let base = match base {
            Base::Loaded(base) => base,
            Base::Load { load, .. } => load(),
        };
        if base.as_ref().map_or(0, |s| s.seq) != base_seq {
            // Let the worker finish (its trimming included), dropping what it sends.
            rx.iter().for_each(drop);
            let first = worker.join().unwrap_or_else(|_| {
                Err(Error::new(Code::Storage, "the log reader thread panicked"))
            });
            return Ok(Replayed::Again { base, first });
        }
        // Where the log is read from: the snapshot's seq and chain head (the start, before
        // seq 1, without one).
        let at = base.as_ref().map_or(
            mwp_core::chain::Position::START,
            mwp_core::chain::Position::from_snapshot,
        );
        let mut state: Option<GroupState> = base.map(|s| s.state);
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
                    at.check_last(&event.id)
                        .map_err(|e| corrupt_at(name, offset, e.to_string()))
                } else {
                    GroupState::apply_stored_to(&mut state, id, event)
                        .map_err(|e| corrupt_at(name, offset, e.message))
                };
                let r = r.and_then(|()| match &state {
                    Some(s) => on_event(event, s),
                    None => Ok(()),
                });
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
        let scanned = worker
            .join()
            .unwrap_or_else(|_| Err(Error::new(Code::Storage, "the log reader thread panicked")));
        applied
            .and(scanned)
            .map(|scanned| Replayed::Done(state, scanned))
    })
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
/// the next seq, and the torn tails.
pub(crate) struct Scanned {
    pub(super) index: Vec<SegmentIndex>,
    /// Zero bytes reserved after the last segment's last record.
    pub(super) reserved: u64,
    /// Redacted records whose payload is not yet zeroed (an interrupted erasure).
    pub(crate) pending_zero: Vec<u64>,
    pub(super) next_seq: u64,
    /// Torn tails found (trimmed if the scan was asked to).
    pub(crate) torn: Vec<Torn>,
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
///
/// A payload of zeros is a record whose erasure ran but whose overlay entry is gone.
pub(super) fn decode_record(payload: &[u8], seq: u64, name: &str, offset: u64) -> Result<Event> {
    if payload.iter().all(|&b| b == 0) {
        return Err(erased_without_entry(name, offset, seq));
    }
    let event =
        Event::from_cbor_verified(payload).map_err(|e| corrupt_at(name, offset, e.message))?;
    holds_seq(event, seq, name, offset)
}

/// The record of `seq` at `offset` is zeroed but the overlay holds no redacted form of it.
pub(super) fn erased_without_entry(name: &str, offset: u64, seq: u64) -> Error {
    corrupt_at(
        name,
        offset,
        format!("record seq {seq} was erased but {OVERLAY_NAME} has no entry for it"),
    )
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
    be: &Arc<dyn Backend>,
    dir: &Path,
    id: &Id,
    seg_seqs: &[u64],
    overlay: &Overlay,
    from_seq: u64,
    plain_from: u64,
    trim_torn: bool,
    tx: std::sync::mpsc::SyncSender<Batch>,
    done: std::sync::mpsc::Receiver<Batch>,
) -> Result<Scanned> {
    let mut index: Vec<SegmentIndex> = Vec::new();
    let mut pending_zero: Vec<u64> = Vec::new();
    let mut torn = Vec::new();
    let mut reserved = 0;
    // 1, or the seq after the final snapshot of a sealed group whose plain history was removed.
    let mut next_seq = plain_from;
    let erased = |seq: u64| overlay.entries.get(&seq).map(|e| e.orig);
    let mut replay = Replay::new(overlay, dir);
    let mut batch = Batch::new(0);
    let mut batches = 0usize;
    let stopped = || Error::new(Code::Storage, "log replay stopped");
    for (i, first_seq) in seg_seqs.iter().enumerate() {
        let name = segment_name(*first_seq);
        let shared: Arc<str> = Arc::from(name.as_str());
        let path = dir.join(&name);
        let file = open_file(&**be, &path)?;
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
        if let Some(bytes) = end.torn {
            if trim_torn {
                trim(&*file, &path, end.end)?;
            }
            torn.push(Torn {
                path: path.display().to_string(),
                end: end.end,
                bytes,
            });
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
        torn,
    })
}
