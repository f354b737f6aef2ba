//! Static exports (SPEC §8b, docs/format.md "Static export"): a Group's history as plain files
//! any static file host or CDN can serve, and the sans-IO reader that rebuilds a verified
//! replica from them with nothing but the authority key the caller pins.
//!
//! An export directory holds:
//!
//! * `chunks/<sha256>.cbor`: immutable, content-addressed chunks of events, each the canonical
//!   CBOR array of a run of consecutive events (at most [`CHUNK_EVENTS`] events, closed once
//!   it reaches [`CHUNK_BYTES`]);
//! * `snapshots/<sha256>.cbor`: signed snapshots, as stored;
//! * `index/<sha256>.json`: the immutable index of one export run ([`ExportIndex`]);
//! * `head.json`: the only mutable file, `{"head": <signed head>, "index": "index/<sha256>.json"}`.
//!
//! `<sha256>` is the lowercase hex SHA-256 of the file's bytes, so every file but `head.json`
//! can be cached forever. Exporting again ([`plan`]) adds chunks for the new events only, a new
//! index and a new head; no existing file changes.
//!
//! Nothing a mirror serves is trusted: [`StaticReader`] checks each file's bytes against its
//! name, the head's signature against the pinned key, every snapshot's signature, and every
//! event through the replica, ending verified through the head's seq or with an error naming
//! the file that failed.

use serde::{Deserialize, Serialize};

use crate::canonical;
use crate::chain;
use crate::crypto::{Hash, PublicKey};
use crate::error::{Code, Error, Result};
use crate::event::Event;
use crate::head::SignedHead;
use crate::id::Id;
use crate::replica::{Offer, Replica};
use crate::snapshot::Snapshot;

/// The schema name of an export index.
pub const INDEX_SCHEMA: &str = "mwp.export.v1";

/// The mutable file naming the signed head and the current index.
pub const HEAD_FILE: &str = "head.json";

/// At most this many events per chunk.
pub const CHUNK_EVENTS: usize = 4096;

/// A chunk is closed once its bytes reach this size (1 MiB): sized for HTTP caching.
pub const CHUNK_BYTES: usize = 1 << 20;

/// The most bytes a reader accepts for `head.json`.
pub const MAX_HEAD_FILE: u64 = 64 << 10;

/// The most bytes a reader accepts for an index (about 200 million events in 4,096-event
/// chunks).
pub const MAX_INDEX_FILE: u64 = 64 << 20;

/// The most bytes a reader accepts for a snapshot file.
pub const MAX_SNAPSHOT_FILE: u64 = 4 << 30;

/// The most bytes a reader accepts for a file at `path` (a name it asked for): what a host
/// reads at most before it gives up on a hostile or broken source, so a mirror cannot make a
/// reader buffer without end. A chunk holds at most [`CHUNK_BYTES`] plus one event of at most
/// one log record.
pub fn max_file_bytes(path: &str) -> u64 {
    if path == HEAD_FILE {
        MAX_HEAD_FILE
    } else if path.starts_with("index/") {
        MAX_INDEX_FILE
    } else if path.starts_with("snapshots/") {
        MAX_SNAPSHOT_FILE
    } else {
        CHUNK_BYTES as u64 + u64::from(crate::log_format::MAX_RECORD_LEN) + 16
    }
}

/// The index of one export run: what the export holds, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportIndex {
    /// Always [`INDEX_SCHEMA`].
    pub schema: String,
    /// Organization.
    pub org: Id,
    /// Group.
    pub group: Id,
    /// The authority key the source named (for information: a reader pins its own).
    pub authority: PublicKey,
    /// Seq of the last exported event.
    pub seq: u64,
    /// Id of event `seq` (what the next export chains on).
    pub id: Hash,
    /// The chunks, consecutive from seq 1.
    pub chunks: Vec<ChunkRef>,
    /// The signed snapshots, by seq.
    pub snapshots: Vec<SnapshotRef>,
}

/// One chunk file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkRef {
    /// Seq of its first event.
    pub first: u64,
    /// Seq of its last event.
    pub last: u64,
    /// Its path: `chunks/<sha256>.cbor`.
    pub file: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// One snapshot file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRef {
    /// Its seq.
    pub seq: u64,
    /// Its state hash.
    pub state_hash: Hash,
    /// Its path: `snapshots/<sha256>.cbor`.
    pub file: String,
}

/// `head.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeadFile {
    /// The signed head of the exported log.
    pub head: SignedHead,
    /// The index of this export: `index/<sha256>.json`.
    pub index: String,
}

// The index and `head.json` are read by readers of their own, from their JSON text
// (`canonical::read_json`): what their derives take, refusing an unknown field as they do.
canonical::decode_struct! {
    ExportIndex { schema, org, group, authority, seq, id, chunks, snapshots }
    ChunkRef { first, last, file, bytes }
    SnapshotRef { seq, state_hash, file }
    HeadFile { head, index }
}

/// A file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportFile {
    /// Path relative to the export directory.
    pub path: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// What one export run writes: new immutable files first (any order, each durable before the
/// head is replaced), then [`HEAD_FILE`].
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// New chunk, snapshot and index files.
    pub files: Vec<ExportFile>,
    /// The new `head.json`.
    pub head_file: Vec<u8>,
    /// The new index.
    pub index: ExportIndex,
}

fn corrupt(file: &str, message: impl std::fmt::Display) -> Error {
    Error::corrupt(format!("{file}: {message}")).with("file", file)
}

/// The content address of `bytes` under `dir` with extension `ext`.
fn address(dir: &str, bytes: &[u8], ext: &str) -> String {
    format!("{dir}/{}.{ext}", Hash::of(bytes).to_hex())
}

/// Checks that `path` is a content-addressed name under `dir` (`dir/<64 hex>.ext`) and that
/// `bytes` hash to it: the one check that lets any mirror or cache serve the file.
/// `MALFORMED` for a name of another shape (nothing else is ever fetched), `LOG_CORRUPT`
/// naming the file when the bytes do not match.
pub fn check_file(path: &str, dir: &str, ext: &str, bytes: &[u8]) -> Result<()> {
    check_name(path, dir, ext)?;
    let want = &path[dir.len() + 1..dir.len() + 65];
    if Hash::of(bytes).to_hex() != want {
        return Err(corrupt(path, "its bytes do not hash to its name"));
    }
    Ok(())
}

/// Checks the shape `dir/<64 lowercase hex>.ext` (so a hostile index cannot name `..` or an
/// absolute path).
pub fn check_name(path: &str, dir: &str, ext: &str) -> Result<()> {
    let ok = path
        .strip_prefix(dir)
        .and_then(|r| r.strip_prefix('/'))
        .and_then(|r| r.strip_suffix(ext))
        .and_then(|r| r.strip_suffix('.'))
        .is_some_and(|h| {
            h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        });
    if ok {
        Ok(())
    } else {
        Err(Error::malformed(format!(
            "export file name {path:?} is not {dir}/<64 hex digits>.{ext}"
        ))
        .with("file", path))
    }
}

/// Encodes a chunk: the canonical CBOR array of the events' stored bytes.
pub fn encode_chunk<B: AsRef<[u8]>>(events: &[B]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + events.iter().map(|e| e.as_ref().len()).sum::<usize>());
    let n = events.len() as u64;
    // Array head in shortest form (major type 4).
    if n < 24 {
        out.push(0x80 | n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[0x98, n as u8]);
    } else if n <= 0xffff {
        out.push(0x99);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0x9a);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
    for e in events {
        out.extend_from_slice(e.as_ref());
    }
    out
}

/// Splits a chunk into its events' bytes (each checked in full when offered). `LOG_CORRUPT`
/// naming `file` when the bytes are not an array of whole items.
pub fn split_chunk<'a>(file: &str, bytes: &'a [u8]) -> Result<Vec<&'a [u8]>> {
    let bad = || corrupt(file, "not a CBOR array of events");
    let (&first, rest) = bytes.split_first().ok_or_else(bad)?;
    if first >> 5 != 4 {
        return Err(bad());
    }
    let (n, mut pos) = match first & 0x1f {
        n @ 0..=23 => (u64::from(n), 1),
        24 => (u64::from(*rest.first().ok_or_else(bad)?), 2),
        25 => (
            u64::from(u16::from_be_bytes(
                rest.get(..2)
                    .ok_or_else(bad)?
                    .try_into()
                    .map_err(|_| bad())?,
            )),
            3,
        ),
        26 => (
            u64::from(u32::from_be_bytes(
                rest.get(..4)
                    .ok_or_else(bad)?
                    .try_into()
                    .map_err(|_| bad())?,
            )),
            5,
        ),
        _ => return Err(bad()),
    };
    if n > (bytes.len() - pos) as u64 {
        return Err(bad());
    }
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let end = canonical::item_end(bytes, pos).ok_or_else(bad)?;
        out.push(&bytes[pos..end]);
        pos = end;
    }
    if pos != bytes.len() {
        return Err(corrupt(file, "trailing bytes after the last event"));
    }
    Ok(out)
}

/// Plans one export run of `head.group`: the events after the previous export (`previous`, or
/// from seq 1) up to `head.seq`, given as stored bytes in seq order, and the source's latest
/// signed snapshot if any. Everything is checked before anything is planned: the head under
/// `trusted`, every event (id, payload hash, chain from the previous export), the head's id at
/// its seq, and the snapshot's signature. Old files are never planned again; chunks are cut
/// the same way every time (at most `chunk_events` events, [`CHUNK_EVENTS`] for hosts), so
/// the same log gives the same files. [`Planner`] does the same one event at a time.
pub fn plan<B: AsRef<[u8]>>(
    previous: Option<&ExportIndex>,
    events: &[B],
    snapshot: Option<&[u8]>,
    head: &SignedHead,
    trusted: &PublicKey,
    chunk_events: usize,
) -> Result<Export> {
    let mut planner = Planner::new(previous, head, trusted, chunk_events)?;
    let mut chunks = Vec::new();
    for bytes in events {
        chunks.extend(planner.handle_event(bytes.as_ref().to_vec())?);
    }
    let mut export = planner.finish(snapshot)?;
    chunks.append(&mut export.files);
    export.files = chunks;
    Ok(export)
}

/// [`plan`] one event at a time, for a host that writes each chunk as soon as it is cut
/// instead of holding the whole run: [`Planner::handle_event`] checks an event and answers the
/// chunk file it closes, if any; [`Planner::finish`] checks that the events ended at the head
/// and answers the last chunk, the snapshot, the index and the head file. The chunks it
/// answers before `finish` are not yet known to belong to an export that will succeed: a host
/// that fails later removes those it created (nothing names them; [`plan`] answers nothing
/// until everything is checked).
#[derive(Debug)]
pub struct Planner {
    head: SignedHead,
    trusted: PublicKey,
    chunk_events: usize,
    index: ExportIndex,
    /// The last event checked (the previous export's end before the first).
    seq: u64,
    id: Hash,
    /// The events of the chunk being filled (the last of them is `seq`), and their bytes.
    run: Vec<Vec<u8>>,
    run_bytes: usize,
}

impl Planner {
    /// Starts planning the events after `previous` (or from seq 1) up to `head.seq`: checks
    /// the head under `trusted` and that `previous` is an export of the same group that the
    /// head does not fall behind.
    pub fn new(
        previous: Option<&ExportIndex>,
        head: &SignedHead,
        trusted: &PublicKey,
        chunk_events: usize,
    ) -> Result<Planner> {
        head.verify(trusted, &head.group)?;
        let (seq, id) = previous.map_or((0, Hash::ZERO), |p| (p.seq, p.id));
        if let Some(p) = previous {
            if p.group != head.group || p.org != head.org {
                return Err(Error::malformed(format!(
                    "the export in place is of {}/{}, not {}/{}",
                    p.org, p.group, head.org, head.group
                )));
            }
        }
        if head.seq < seq {
            return Err(Error::malformed(format!(
                "the head is at seq {} but the export in place already reaches seq {seq}",
                head.seq
            )));
        }
        let index = previous.cloned().unwrap_or(ExportIndex {
            schema: INDEX_SCHEMA.to_owned(),
            org: head.org.clone(),
            group: head.group.clone(),
            authority: *trusted,
            seq: 0,
            id: Hash::ZERO,
            chunks: Vec::new(),
            snapshots: Vec::new(),
        });
        Ok(Planner {
            head: head.clone(),
            trusted: *trusted,
            chunk_events: chunk_events.max(1),
            index,
            seq,
            id,
            run: Vec::new(),
            run_bytes: 0,
        })
    }

    /// The seq of the last event checked (the previous export's, before the first).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Checks the next event (its stored bytes: id, payload hash, and that it continues the
    /// chain) and adds it to the chunk being filled; answers that chunk's file once it is
    /// closed (at `chunk_events` events, or once its bytes reach [`CHUNK_BYTES`]).
    pub fn handle_event(&mut self, bytes: Vec<u8>) -> Result<Option<ExportFile>> {
        let e = Event::from_cbor_verified(&bytes)?;
        let seq = self.seq;
        if chain::Position::at(seq, self.id)
            .check(&self.head.group, &e)
            .is_err()
        {
            return Err(Error::corrupt(format!(
                "event seq {} of group {} does not continue the export at seq {seq}",
                e.seq, e.group
            ))
            .with("seq", e.seq));
        }
        self.seq = e.seq;
        self.id = e.id;
        self.run_bytes += bytes.len();
        self.run.push(bytes);
        if self.run.len() >= self.chunk_events || self.run_bytes >= CHUNK_BYTES {
            return Ok(Some(self.close_chunk()));
        }
        Ok(None)
    }

    /// Closes the chunk being filled: its file, recorded in the index.
    fn close_chunk(&mut self) -> ExportFile {
        let bytes = encode_chunk(&self.run);
        let file = address("chunks", &bytes, "cbor");
        let last = self.seq;
        let first = last + 1 - self.run.len() as u64;
        self.index.chunks.push(ChunkRef {
            first,
            last,
            file: file.clone(),
            bytes: bytes.len() as u64,
        });
        self.run.clear();
        self.run_bytes = 0;
        ExportFile { path: file, bytes }
    }

    /// Checks that the events ended at the head (its seq and id) and answers the rest of the
    /// run: the last chunk if any, the snapshot if it is new (its signature checked), the new
    /// index, and the head file naming it.
    pub fn finish(mut self, snapshot: Option<&[u8]>) -> Result<Export> {
        if (self.seq, self.id) != (self.head.seq, self.head.id) {
            return Err(Error::new(
                Code::Fork,
                format!(
                    "the events end at seq {} id {}, but the signed head names seq {} id {}",
                    self.seq, self.id, self.head.seq, self.head.id
                ),
            ));
        }
        let mut files = Vec::new();
        if !self.run.is_empty() {
            files.push(self.close_chunk());
        }
        let (head, trusted, mut index) = (self.head, self.trusted, self.index);
        if let Some(bytes) = snapshot {
            let snap = Snapshot::verify_stored(bytes, &trusted, &head.group)?;
            if snap.seq <= head.seq && !index.snapshots.iter().any(|s| s.seq == snap.seq) {
                let file = address("snapshots", bytes, "cbor");
                index.snapshots.push(SnapshotRef {
                    seq: snap.seq,
                    state_hash: snap.state_hash,
                    file: file.clone(),
                });
                index.snapshots.sort_by_key(|s| s.seq);
                files.push(ExportFile {
                    path: file,
                    bytes: bytes.to_vec(),
                });
            }
        }
        index.seq = self.seq;
        index.id = self.id;
        let index_bytes = serde_json::to_vec_pretty(&index)
            .map_err(|e| Error::malformed(format!("the index does not encode: {e}")))?;
        let index_file = address("index", &index_bytes, "json");
        let head_file = serde_json::to_vec_pretty(&HeadFile {
            head,
            index: index_file.clone(),
        })
        .map_err(|e| Error::malformed(format!("the head file does not encode: {e}")))?;
        files.push(ExportFile {
            path: index_file,
            bytes: index_bytes,
        });
        Ok(Export {
            files,
            head_file,
            index,
        })
    }
}

/// Reads an export's index file `path` (checking its name and bytes, then
/// [`index_from_json`]); what [`plan`] continues from.
pub fn read_index(path: &str, bytes: &[u8]) -> Result<ExportIndex> {
    check_file(path, "index", "json", bytes)?;
    index_from_json(path, bytes)
}

/// Reads an index's JSON text and checks what it lists, as every reader of an index does
/// (a host continuing an export, `planExport` given the previous index): the schema; chunks
/// consecutive from seq 1 to the index's seq, each named `chunks/<64 hex>.cbor` and listed at
/// 1 ..= the chunk size cap; snapshots named `snapshots/<64 hex>.cbor`, listed once each by
/// increasing seq, from 1 to the index's seq. `LOG_CORRUPT` naming `path` (where the text
/// came from) otherwise, or `MALFORMED` naming a listed file of another shape. An integer
/// out of range is named as written ([`canonical::text_refusal`]). The text is not checked
/// against a name: [`read_index`] does that for a file.
pub fn index_from_json(path: &str, bytes: &[u8]) -> Result<ExportIndex> {
    let index: ExportIndex = canonical::read_json(bytes)
        .map_err(|e| corrupt(path, format!("not an export index: {e}")))?;
    if index.schema != INDEX_SCHEMA {
        return Err(corrupt(
            path,
            format!("schema is {:?}, expected {INDEX_SCHEMA:?}", index.schema),
        ));
    }
    // The last seq the chunks so far cover; checked, never wrapped past 2^64 − 1.
    let mut end: u64 = 0;
    for c in &index.chunks {
        check_name(&c.file, "chunks", "cbor")?;
        if end.checked_add(1) != Some(c.first) || c.last < c.first {
            return Err(corrupt(
                path,
                format!(
                    "chunk {} covers seqs {}..={}, expected to start at {}",
                    c.file,
                    c.first,
                    c.last,
                    u128::from(end) + 1
                ),
            ));
        }
        end = c.last;
    }
    if end != index.seq {
        return Err(corrupt(
            path,
            format!("the chunks end at seq {end}, the index says {}", index.seq),
        ));
    }
    let chunk_max = max_file_bytes("chunks/");
    for c in &index.chunks {
        if c.bytes == 0 || c.bytes > chunk_max {
            return Err(corrupt(
                path,
                format!(
                    "chunk {} is listed at {} bytes, outside 1..={chunk_max}",
                    c.file, c.bytes
                ),
            ));
        }
    }
    let mut last = 0;
    let mut seen = std::collections::BTreeSet::new();
    for s in &index.snapshots {
        check_name(&s.file, "snapshots", "cbor")?;
        if s.seq <= last || s.seq > index.seq {
            return Err(corrupt(
                path,
                format!(
                    "snapshot {} is listed at seq {}: snapshots are listed once each, by \
                     increasing seq, from 1 to the index's seq {}",
                    s.file, s.seq, index.seq
                ),
            ));
        }
        if !seen.insert(s.file.as_str()) {
            return Err(corrupt(
                path,
                format!("snapshot {} is listed twice", s.file),
            ));
        }
        last = s.seq;
    }
    Ok(index)
}

/// Checks a chunk file's size against its index entry (`index_path` names the index):
/// `LOG_CORRUPT` naming the index when they differ.
pub fn check_chunk_size(index_path: &str, entry: &ChunkRef, len: u64) -> Result<()> {
    if len != entry.bytes {
        return Err(corrupt(
            index_path,
            format!(
                "it lists chunk {} at {} bytes, the file has {len}",
                entry.file, entry.bytes
            ),
        ));
    }
    Ok(())
}

/// Checks a snapshot file against its index entry (`index_path` names the index): its bytes
/// against its name (`LOG_CORRUPT` naming the file), its signature under `trusted` and its org
/// and group (`SNAPSHOT_INVALID` naming the file), and that its seq and state hash are the
/// entry's (`LOG_CORRUPT` naming the index). Answers the snapshot.
pub fn check_snapshot_file(
    index_path: &str,
    entry: &SnapshotRef,
    bytes: &[u8],
    trusted: &PublicKey,
    org: &Id,
    group: &Id,
) -> Result<Snapshot> {
    check_file(&entry.file, "snapshots", "cbor", bytes)?;
    let snap = Snapshot::verify_bytes(bytes, trusted, org, group, 0)
        .map_err(|e| e.with("file", entry.file.as_str()))?;
    check_snapshot_entry(index_path, entry, snap.seq, snap.state_hash)?;
    Ok(snap)
}

/// The seq and state hash an index lists for a snapshot must be the file's.
fn check_snapshot_entry(
    index_path: &str,
    entry: &SnapshotRef,
    seq: u64,
    state_hash: Hash,
) -> Result<()> {
    if (entry.seq, entry.state_hash) != (seq, state_hash) {
        return Err(corrupt(
            index_path,
            format!(
                "it lists snapshot {} at seq {} with state hash {}, the file holds seq {seq} \
                 with state hash {state_hash}",
                entry.file, entry.seq, entry.state_hash
            ),
        ));
    }
    Ok(())
}

/// Reads `head.json` (shape only; the signature is checked by whoever pins the key).
pub fn read_head_file(bytes: &[u8]) -> Result<HeadFile> {
    let hf: HeadFile = canonical::read_json(bytes).map_err(|e| {
        Error::new(
            Code::HeadInvalid,
            format!("{HEAD_FILE}: not a head file: {e}"),
        )
        .with("check", "decode")
        .with("file", HEAD_FILE)
    })?;
    check_name(&hf.index, "index", "json")?;
    Ok(hf)
}

/// Where a [`StaticReader`] starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// From the latest signed snapshot at or below the head, then the chunks after it.
    Snapshot,
    /// From seq 1: every event is replayed and verified.
    Genesis,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Head,
    Index,
    /// The snapshot replay starts from (its place in the index).
    Snapshot(usize),
    /// Another snapshot, checked but not restored (its place in the index).
    CheckSnapshot(usize),
    Chunk(usize),
    Done,
    /// A file failed its checks: the reader stops for good, with that error.
    Failed(Box<Error>),
}

/// The sans-IO reader of a static export: ask [`StaticReader::poll_fetch`] for the next path,
/// fetch it relative to the export's base however the host can (HTTP, a directory), hand the
/// bytes to [`StaticReader::handle_fetched`], until `poll_fetch` answers `None`. The replica
/// then holds the group's state verified through the signed head, under the key given to
/// [`StaticReader::new`] and nothing else.
#[derive(Debug)]
pub struct StaticReader {
    trusted: PublicKey,
    start: Start,
    /// Whether every snapshot the index lists is fetched and checked, not only the one
    /// replay starts from ([`StaticReader::check_every_snapshot`]).
    every_snapshot: bool,
    /// The snapshots still to check, by their place in the index.
    pending: Vec<usize>,
    /// Snapshots checked whose seq replay has yet to reach: seq → (state hash, chain head,
    /// file), compared with the replica's when it gets there.
    expect: std::collections::BTreeMap<u64, (Hash, Hash, String)>,
    replica: Replica,
    step: Step,
    head: Option<SignedHead>,
    index_path: Option<String>,
    index: Option<ExportIndex>,
    events: u64,
    bytes: u64,
}

/// How far a [`StaticReader`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// The replica's cursor.
    pub cursor: u64,
    /// The replica's verified seq.
    pub verified_through: u64,
    /// The signed head's seq (0 before `head.json` is read).
    pub head_seq: u64,
    /// Events offered from chunks so far.
    pub events: u64,
    /// Bytes handled so far.
    pub bytes: u64,
    /// Whether the export is read whole and verified.
    pub done: bool,
}

impl StaticReader {
    /// A reader of `group`'s export, trusting only `trusted` as the authority key.
    pub fn new(group: Id, trusted: PublicKey, start: Start) -> StaticReader {
        StaticReader {
            trusted,
            start,
            every_snapshot: false,
            pending: Vec::new(),
            expect: std::collections::BTreeMap::new(),
            replica: Replica::new(group),
            step: Step::Head,
            head: None,
            index_path: None,
            index: None,
            events: 0,
            bytes: 0,
        }
    }

    /// Also fetches and checks every snapshot the index lists, not only the one replay starts
    /// from (what an audit of a whole export wants, `mwp verify --source`): each one's bytes
    /// against its name, its signature under the pinned key, its org and group, its seq and
    /// state hash against its index entry, and, for one at a seq replay passes through, its
    /// state hash and chain head against the replica's at that seq (`SNAPSHOT_INVALID` naming
    /// the snapshot otherwise). They are fetched after the index (and the snapshot replay
    /// starts from), before the chunks.
    pub fn check_every_snapshot(mut self) -> StaticReader {
        self.every_snapshot = true;
        self
    }

    /// The next file to fetch, relative to the export's base; `None` once done.
    pub fn poll_fetch(&self) -> Option<String> {
        match &self.step {
            Step::Head => Some(HEAD_FILE.to_owned()),
            Step::Index => self.index_path.clone(),
            Step::Snapshot(i) | Step::CheckSnapshot(i) => {
                self.index.as_ref().map(|x| x.snapshots[*i].file.clone())
            }
            Step::Chunk(i) => self.index.as_ref().map(|x| x.chunks[*i].file.clone()),
            Step::Done | Step::Failed(_) => None,
        }
    }

    /// Handles the bytes of the file [`StaticReader::poll_fetch`] asked for. Any failure is
    /// an error naming the file (`HEAD_INVALID`, `SNAPSHOT_INVALID`, `LOG_CORRUPT`, `FORK`,
    /// `MALFORMED`) and stops the reader for good: a source that served one bad file is not
    /// read further ([`StaticReader::failure`]; `poll_fetch` answers `None`). A fetch of a path
    /// other than the one asked for is refused and changes nothing.
    pub fn handle_fetched(&mut self, path: &str, bytes: &[u8]) -> Result<Progress> {
        if let Step::Failed(e) = &self.step {
            return Err((**e).clone());
        }
        if bytes.len() as u64 > max_file_bytes(path) {
            let e = Error::malformed(format!(
                "{path} is {} bytes, over the {} a reader accepts for it",
                bytes.len(),
                max_file_bytes(path)
            ))
            .with("file", path);
            self.step = Step::Failed(Box::new(e.clone()));
            return Err(e);
        }
        let want = self.poll_fetch();
        if want.as_deref() != Some(path) {
            return Err(Error::malformed(format!(
                "fetched {path:?}, but the reader asked for {want:?}"
            )));
        }
        let result = match self.step.clone() {
            Step::Head => self.on_head(bytes),
            Step::Index => self.on_index(path, bytes),
            Step::Snapshot(i) => self.on_snapshot(i, path, bytes),
            Step::CheckSnapshot(i) => self.on_check_snapshot(i, path, bytes),
            Step::Chunk(i) => self.on_chunk(i, path, bytes),
            Step::Done | Step::Failed(_) => Ok(()),
        };
        if let Err(e) = result {
            self.step = Step::Failed(Box::new(e.clone()));
            return Err(e);
        }
        self.bytes += bytes.len() as u64;
        Ok(self.progress())
    }

    /// The error that stopped the reader, if a file failed its checks.
    pub fn failure(&self) -> Option<&Error> {
        match &self.step {
            Step::Failed(e) => Some(e),
            _ => None,
        }
    }

    fn on_head(&mut self, bytes: &[u8]) -> Result<()> {
        let hf = read_head_file(bytes)?;
        self.replica
            .offer_head(&hf.head, &self.trusted)
            .map_err(|e| e.with("file", HEAD_FILE))?;
        self.index_path = Some(hf.index);
        self.head = Some(hf.head);
        self.step = Step::Index;
        Ok(())
    }

    fn on_index(&mut self, path: &str, bytes: &[u8]) -> Result<()> {
        let index = read_index(path, bytes)?;
        let head = self.head.as_ref().expect("the head is read first");
        if index.group != head.group || index.org != head.org {
            return Err(corrupt(
                path,
                format!(
                    "it indexes {}/{}, the head is of {}/{}",
                    index.org, index.group, head.org, head.group
                ),
            ));
        }
        if index.seq < head.seq {
            return Err(corrupt(
                path,
                format!(
                    "it reaches seq {}, short of the head's {}",
                    index.seq, head.seq
                ),
            ));
        }
        let snapshot = match self.start {
            Start::Genesis => None,
            Start::Snapshot => index.snapshots.iter().rposition(|s| s.seq <= head.seq),
        };
        if self.every_snapshot {
            self.pending = (0..index.snapshots.len())
                .filter(|&i| Some(i) != snapshot)
                .collect();
        }
        self.index = Some(index);
        self.step = match snapshot {
            Some(i) => Step::Snapshot(i),
            None => self.after_snapshots()?,
        };
        Ok(())
    }

    /// The next snapshot to check, else the first chunk to read.
    fn after_snapshots(&self) -> Result<Step> {
        match self.pending.first() {
            Some(&i) => Ok(Step::CheckSnapshot(i)),
            None => self.next_chunk(0),
        }
    }

    fn on_snapshot(&mut self, i: usize, path: &str, bytes: &[u8]) -> Result<()> {
        check_file(path, "snapshots", "cbor", bytes)?;
        let head = self.head.as_ref().expect("the head is read first");
        let org = head.org.clone();
        self.replica
            .restore_bytes(bytes, &self.trusted, &org, 0)
            .map_err(|e| e.with("file", path))?;
        let index_path = self.index_path.clone().unwrap_or_default();
        let entry = &self
            .index
            .as_ref()
            .expect("the index is read first")
            .snapshots[i];
        check_snapshot_entry(
            &index_path,
            entry,
            self.replica.cursor(),
            self.replica.state_hash()?,
        )?;
        self.step = self.after_snapshots()?;
        Ok(())
    }

    fn on_check_snapshot(&mut self, i: usize, path: &str, bytes: &[u8]) -> Result<()> {
        let index_path = self.index_path.clone().unwrap_or_default();
        let head = self.head.as_ref().expect("the head is read first");
        let entry = &self
            .index
            .as_ref()
            .expect("the index is read first")
            .snapshots[i];
        let snap = check_snapshot_file(
            &index_path,
            entry,
            bytes,
            &self.trusted,
            &head.org,
            &head.group,
        )?;
        if snap.seq > self.replica.cursor() && snap.seq <= head.seq {
            self.expect.insert(
                snap.seq,
                (snap.state_hash, snap.chain_head, path.to_owned()),
            );
        }
        self.pending.retain(|&k| k != i);
        self.step = self.after_snapshots()?;
        Ok(())
    }

    /// Compares the replica, just past `seq`, with a snapshot checked at that seq.
    fn check_expected(&self, seq: u64) -> Result<()> {
        let Some((state_hash, chain_head, file)) = self.expect.get(&seq) else {
            return Ok(());
        };
        let (head, hash) = (self.replica.head(), self.replica.state_hash()?);
        if (*state_hash, *chain_head) != (hash, head) {
            return Err(Error::new(
                Code::SnapshotInvalid,
                format!(
                    "{file}: the snapshot at seq {seq} has chain head {chain_head} and state \
                     hash {state_hash}, but the chain's are {head} and {hash}"
                ),
            )
            .with("check", "state_hash")
            .with("file", file.as_str())
            .with("seq", seq));
        }
        Ok(())
    }

    fn on_chunk(&mut self, i: usize, path: &str, bytes: &[u8]) -> Result<()> {
        check_file(path, "chunks", "cbor", bytes)?;
        let chunk = self.index.as_ref().expect("the index is read first").chunks[i].clone();
        check_chunk_size(
            self.index_path.as_deref().unwrap_or_default(),
            &chunk,
            bytes.len() as u64,
        )?;
        let events = split_chunk(path, bytes)?;
        if events.len() as u64 != chunk.last - chunk.first + 1 {
            return Err(corrupt(
                path,
                format!(
                    "it holds {} events, the index says {}..={}",
                    events.len(),
                    chunk.first,
                    chunk.last
                ),
            ));
        }
        let head_seq = self.head.as_ref().map_or(0, |h| h.seq);
        for (k, ev) in events.iter().enumerate() {
            let seq = chunk.first + k as u64;
            if seq > head_seq {
                break;
            }
            match self.replica.offer_bytes(ev) {
                Offer::Applied { cursor, .. } if cursor == seq => self.check_expected(seq)?,
                Offer::Duplicate if seq <= self.replica.cursor() => {}
                Offer::Rejected(e) => return Err(e.with("file", path).with("seq", seq)),
                other => {
                    return Err(corrupt(
                        path,
                        format!(
                            "event {k} is not seq {seq} of the chain: {}",
                            match other {
                                Offer::Buffered => "it is ahead of it",
                                _ => "it repeats another",
                            }
                        ),
                    ));
                }
            }
        }
        self.events += events.len() as u64;
        self.step = self.next_chunk(i + 1).map_err(|e| e.with("file", path))?;
        Ok(())
    }

    /// The first chunk from `i` that holds events past the cursor, or the end, where the
    /// replica must be verified through the head.
    fn next_chunk(&self, i: usize) -> Result<Step> {
        let cursor = self.replica.cursor();
        let head_seq = self.head.as_ref().map_or(0, |h| h.seq);
        let chunks = &self.index.as_ref().expect("the index is read first").chunks;
        if let Some(k) =
            (i..chunks.len()).find(|&k| chunks[k].last > cursor && chunks[k].first <= head_seq)
        {
            return Ok(Step::Chunk(k));
        }
        if self.replica.verified_through() < head_seq {
            return Err(Error::new(
                Code::Fork,
                format!(
                    "the export's events end at seq {cursor} without reaching the signed head \
                     (seq {head_seq}); verified through seq {}",
                    self.replica.verified_through()
                ),
            )
            .with("seq", head_seq));
        }
        Ok(Step::Done)
    }

    /// How far the reader got. Once done, the replica is verified through the head's seq
    /// (anything short of it is an error from [`StaticReader::handle_fetched`]).
    pub fn progress(&self) -> Progress {
        Progress {
            cursor: self.replica.cursor(),
            verified_through: self.replica.verified_through(),
            head_seq: self.head.as_ref().map_or(0, |h| h.seq),
            events: self.events,
            bytes: self.bytes,
            done: self.step == Step::Done,
        }
    }

    /// The signed head read from `head.json`.
    pub fn head(&self) -> Option<&SignedHead> {
        self.head.as_ref()
    }

    /// The index read.
    pub fn index(&self) -> Option<&ExportIndex> {
        self.index.as_ref()
    }

    /// The replica built so far.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// The replica, once read.
    pub fn into_replica(self) -> Replica {
        self.replica
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SecretKey;

    fn id(s: &str) -> Id {
        Id::new(s).expect("an identifier")
    }

    /// `text`, each character changed to every printable one and every cut, is taken by
    /// [`canonical::read_json`] exactly where serde_json's derive takes it, as the same value.
    fn json_reads_as_the_derive<T>(value: &T)
    where
        T: for<'de> canonical::Decode<'de> + serde::de::DeserializeOwned + Serialize,
        T: PartialEq + std::fmt::Debug,
    {
        let text = serde_json::to_string(value).expect("JSON");
        let (mut accepted, mut refused) = (0, 0);
        let mut compare = |text: &[u8]| {
            let read = canonical::read_json::<T>(text).ok();
            assert_eq!(
                read,
                serde_json::from_slice::<T>(text).ok(),
                "{}",
                String::from_utf8_lossy(text)
            );
            if read.is_some() {
                accepted += 1;
            } else {
                refused += 1;
            }
        };
        compare(text.as_bytes());
        for i in 0..text.len() {
            for c in b' '..=b'~' {
                let mut changed = text.clone().into_bytes();
                changed[i] = c;
                compare(&changed);
            }
            compare(&text.as_bytes()[..i]);
        }
        assert!(accepted > 10 && refused > 1000, "{accepted} {refused}");
    }

    fn index() -> ExportIndex {
        ExportIndex {
            schema: INDEX_SCHEMA.to_owned(),
            org: id("acme"),
            group: id("g1"),
            authority: PublicKey([5; 32]),
            seq: 12,
            id: Hash([6; 32]),
            chunks: vec![
                ChunkRef {
                    first: 1,
                    last: 7,
                    file: format!("chunks/{}.cbor", Hash([1; 32])),
                    bytes: 900,
                },
                ChunkRef {
                    first: 8,
                    last: 12,
                    file: format!("chunks/{}.cbor", Hash([2; 32])),
                    bytes: 640,
                },
            ],
            snapshots: vec![SnapshotRef {
                seq: 7,
                state_hash: Hash([8; 32]),
                file: format!("snapshots/{}.cbor", Hash([3; 32])),
            }],
        }
    }

    /// An export's index and its head file are read from their JSON text by their own
    /// readers as serde_json's derives read them, and their fields given as an array are
    /// refused: a struct is a map.
    #[test]
    fn the_index_and_the_head_file_are_read_as_their_derives_read_them() {
        json_reads_as_the_derive(&index());
        let key = SecretKey::for_transcript("@authority");
        let head =
            SignedHead::sign(&id("acme"), &id("g1"), 12, Hash([6; 32]), 9, &key).expect("signs");
        let hf = HeadFile {
            head,
            index: format!("index/{}.json", Hash([4; 32])),
        };
        json_reads_as_the_derive(&hf);
        let as_array = serde_json::json!([hf.head, hf.index]).to_string();
        assert!(serde_json::from_str::<HeadFile>(&as_array).is_ok());
        let e = read_head_file(as_array.as_bytes()).expect_err("an array");
        assert!(e.message.contains("expected a map"), "{e}");
        let mut value = serde_json::to_value(index()).expect("JSON");
        value["chunks"][1] = serde_json::json!([8, 12, "chunks/x.cbor", 640]);
        let e = canonical::read_json::<ExportIndex>(value.to_string().as_bytes())
            .expect_err("an array");
        assert!(e.contains("expected a map"), "{e}");
        value["chunks"][1] =
            serde_json::json!({"first": 8, "last": 12, "file": "f", "bytes": 1, "x": 0});
        let e = canonical::read_json::<ExportIndex>(value.to_string().as_bytes())
            .expect_err("an unknown field");
        assert!(e.contains("unknown field `x`"), "{e}");
    }

    /// Seqs near 2^64 − 1 in an index are checked as any other, never wrapped: a chunk that
    /// ends at the last seq there is may end an index at it, but no chunk may follow it (as
    /// seq 0, wrapped around, a chunk list of any length would chain on).
    #[test]
    fn an_index_whose_chunks_reach_the_last_seq_is_checked_without_wrapping() {
        let chunk = |first, last, n| ChunkRef {
            first,
            last,
            file: format!("chunks/{}.cbor", Hash([n; 32])),
            bytes: 900,
        };
        let mut to_the_end = index();
        to_the_end.chunks = vec![chunk(1, u64::MAX, 1)];
        to_the_end.seq = u64::MAX;
        let text = serde_json::to_vec(&to_the_end).expect("JSON");
        assert_eq!(
            index_from_json("previous index", &text).expect("reads"),
            to_the_end
        );

        let mut wrapped = index();
        wrapped.chunks = vec![chunk(1, u64::MAX, 1), chunk(0, 12, 2)];
        let text = serde_json::to_vec(&wrapped).expect("JSON");
        let e = index_from_json("previous index", &text).expect_err("seq 0 after the last");
        assert_eq!(e.code, Code::LogCorrupt);
        assert_eq!(
            e.message,
            format!(
                "previous index: chunk chunks/{}.cbor covers seqs 0..=12, expected to start at \
                 18446744073709551616",
                Hash([2; 32])
            )
        );
    }

    /// An index's JSON text is checked by one reader, named or not: what it lists must hold
    /// together, and an integer out of range is named as written. A file's reader checks its
    /// name and bytes first.
    #[test]
    fn an_index_is_checked_by_one_reader_with_or_without_its_name() {
        let text = serde_json::to_vec(&index()).expect("JSON");
        assert_eq!(
            index_from_json("previous index", &text).expect("reads"),
            index()
        );
        let path = address("index", &text, "json");
        assert_eq!(read_index(&path, &text).expect("reads"), index());
        let wrong_name = format!("index/{}.json", Hash([9; 32]));
        let e = read_index(&wrong_name, &text).expect_err("another name");
        assert!(e.message.contains("do not hash to its name"), "{e}");

        let mut gap = index();
        gap.chunks.remove(0);
        let gap = serde_json::to_vec(&gap).expect("JSON");
        let e = index_from_json("previous index", &gap).expect_err("chunks from seq 8");
        assert_eq!(e.code, Code::LogCorrupt);
        assert_eq!(
            e.message,
            format!(
                "previous index: chunk chunks/{}.cbor covers seqs 8..=12, expected to start at 1",
                Hash([2; 32])
            )
        );
        let mut twice = index();
        twice.snapshots.push(twice.snapshots[0].clone());
        let twice = serde_json::to_vec(&twice).expect("JSON");
        assert!(index_from_json("previous index", &twice).is_err());
        let mut schema = index();
        schema.schema = "mwp-export-index/0".into();
        let schema = serde_json::to_vec(&schema).expect("JSON");
        let e = index_from_json("previous index", &schema).expect_err("another schema");
        assert!(e.message.contains("schema is"), "{e}");

        let text = String::from_utf8(text).expect("UTF-8");
        let out_of_range = text.replacen("\"seq\":12", "\"seq\":-9223372036854775809", 1);
        assert_ne!(out_of_range, text);
        let e =
            index_from_json("previous index", out_of_range.as_bytes()).expect_err("out of range");
        assert!(
            e.message
                .contains("integer out of range: -9223372036854775809 is not from"),
            "{e}"
        );
    }
}
