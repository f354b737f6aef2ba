//! The agent journal (docs/format.md, "Agent journal"): an agent's committed write sets,
//! framed as the authority's log, replayed into an [`AgentImage`]. The native host
//! (`mwp-host`'s `store::agent_journal`) and the Node/Deno journal (through `mwp-wasm`) both
//! encode and read it here; they only read, write and sync the bytes.
//!
//! A journal is a [`FileHeader`] (magic [`JOURNAL_MAGIC`], `first_seq` 1, the agent's group)
//! and records. One write set is one *batch* of records: its canonical CBOR, cut into pieces
//! of at most [`MAX_RECORD_LEN`] − 1 bytes, each piece preceded by a flag byte
//! ([`PIECE_MORE`] or [`PIECE_LAST`]). This is where the journal's records differ from a
//! segment's, whose payload is one whole event: an event is bounded by the command limits, a
//! write set is not (a snapshot restore carries every projection row of the group), so a write
//! set may need more than one record, and the flag says where it ends even when a crash cut
//! the batch at a record boundary.
//!
//! The tail rule is the log's ([`Scanner`](super::Scanner)), plus one: a write set whose last
//! piece is missing was cut at a record boundary, so it is torn too and is cut off
//! ([`JournalRead::keep`]).

use super::{
    encode_record, scan_slice, Damage, FileHeader, Record, ScanEnd, ScanSpec, FILE_HEADER_LEN,
    MAX_RECORD_LEN,
};
use crate::agent::AgentImage;
use crate::replica::WriteSet;
use crate::{Error, Hash, Id};

/// Magic of an agent journal.
pub const JOURNAL_MAGIC: [u8; 8] = *b"MWPAGJ\r\n";
/// Flag byte of a record whose piece is not the last of its write set.
pub const PIECE_MORE: u8 = 1;
/// Flag byte of the record holding the last (often the only) piece of a write set.
pub const PIECE_LAST: u8 = 0;
/// Largest piece of a write set in one record.
pub const MAX_PIECE: usize = MAX_RECORD_LEN as usize - 1;

/// Appends to `out` the records of one write set (`body`, its canonical CBOR) as the batch
/// starting at `seq`, cut into pieces of at most `piece` bytes (at least 1; the journal uses
/// [`MAX_PIECE`]). With `new_file`, the file header of `group`'s journal comes first. Returns
/// the seq after the batch.
pub fn encode_write_set(
    out: &mut Vec<u8>,
    group: &Id,
    new_file: bool,
    seq: u64,
    body: &[u8],
    piece: usize,
) -> u64 {
    if new_file {
        let header = FileHeader {
            magic: JOURNAL_MAGIC,
            first_seq: 1,
            prev: Hash::ZERO,
            group: group.clone(),
        };
        out.extend_from_slice(&header.encode());
    }
    let piece = piece.clamp(1, MAX_PIECE);
    let batch = seq;
    let mut seq = seq;
    let mut rest = body;
    let mut payload = Vec::with_capacity(body.len().min(piece) + 1);
    loop {
        let (this, after) = rest.split_at(rest.len().min(piece));
        rest = after;
        payload.clear();
        payload.push(if rest.is_empty() {
            PIECE_LAST
        } else {
            PIECE_MORE
        });
        payload.extend_from_slice(this);
        encode_record(out, seq, batch, &payload);
        seq += 1;
        if rest.is_empty() {
            return seq;
        }
    }
}

/// What the file name `name` of an agent journal (the last component of its path) would
/// collide with, or `None` when it collides with nothing. Beside a journal `NAME` are the
/// files of its writer lock, `NAME.LOCK` and `NAME.LOCK.pid` (with `NAME.LOCK.pid.stale-<pid>`
/// while a stale record is moved aside), and the file it is created through, `NAME.tmp`;
/// beside a data directory's files are `LOCK` and `LOCK.pid`. A journal named like one of them
/// would be that file: opening it would take, trim or remove another writer's file.
pub fn journal_name_conflict(name: &str) -> Option<String> {
    if name.is_empty() || name == "." || name == ".." {
        return Some("the path names no file".to_owned());
    }
    if name == "LOCK" || name == "LOCK.pid" || name.starts_with("LOCK.pid.stale-") {
        return Some(format!("{name} is a data directory's writer lock file"));
    }
    if let Some(at) = name.rfind(".LOCK.pid.stale-") {
        let journal = &name[..at];
        return Some(format!(
            "{name} is where the writer lock of journal {journal} moves a stale owner record"
        ));
    }
    let beside = [
        (".LOCK.pid", "the owner record of journal"),
        (".LOCK", "the writer lock file of journal"),
        (".tmp", "the file that creates journal"),
    ];
    beside.iter().find_map(|(suffix, what)| {
        let journal = name.strip_suffix(suffix)?;
        Some(format!("{name} is {what} {journal}"))
    })
}

/// Checks the file name `name` of the agent journal at `path` (as the host displays it)
/// before anything is opened, locked or removed: a name that collides with a lock or
/// temporary file of another journal or of a data directory
/// ([`journal_name_conflict`]) is `MALFORMED` naming the path (`details.file`).
pub fn check_journal_name(path: &str, name: &str) -> Result<(), Error> {
    match journal_name_conflict(name) {
        None => Ok(()),
        Some(why) => Err(Error::malformed(format!(
            "agent journal {path}: {why}; choose another name"
        ))
        .with("file", path)),
    }
}

/// The checks a journal's header must pass: its magic, and `first_seq` 1. Returns the group.
pub fn check_journal_header(b: &[u8]) -> Result<Id, Damage> {
    if b.len() < FILE_HEADER_LEN {
        return Err(Damage::new(0, "the file is shorter than its header"));
    }
    let header =
        FileHeader::decode(&b[..FILE_HEADER_LEN], JOURNAL_MAGIC).map_err(|e| Damage::new(0, e))?;
    if header.first_seq != 1 {
        return Err(Damage::new(
            12,
            format!("first_seq is {}, expected 1", header.first_seq),
        ));
    }
    Ok(header.group)
}

/// The [`ScanSpec`] of a journal of `file_len` bytes.
pub fn journal_scan_spec(file_len: u64) -> ScanSpec {
    ScanSpec {
        file_len,
        first_seq: 1,
        contiguous: true,
        may_be_torn: true,
        reserve: false,
    }
}

/// Folds a journal's records, in file order, into an [`AgentImage`]: it joins the pieces of
/// each write set, checks its group and commits it.
#[derive(Debug)]
pub struct JournalReader {
    group: Id,
    image: AgentImage,
    /// The write set being read: its batch (first seq) and offset.
    open: Option<(u64, u64)>,
    pieces: Vec<u8>,
}

/// What reading a journal found.
#[derive(Debug)]
pub struct JournalRead {
    /// The group in the header.
    pub group: Id,
    /// Every committed write set folded in.
    pub image: AgentImage,
    /// Where the committed write sets end: the host cuts the file to this length (a torn
    /// append, or a write set whose last piece never arrived, was never committed).
    pub keep: u64,
    /// Seq of the next record.
    pub next_seq: u64,
}

impl JournalReader {
    /// A reader for the journal of `group` (from [`check_journal_header`]).
    pub fn new(group: Id) -> JournalReader {
        JournalReader {
            group,
            image: AgentImage::default(),
            open: None,
            pieces: Vec::new(),
        }
    }

    /// Takes the next good record from the scan.
    pub fn handle_record(&mut self, r: &Record<'_>) -> Result<(), Damage> {
        let h = r.header;
        let bad = |what: String| Damage::new(r.offset, what);
        match self.open {
            None if h.batch == h.seq => self.open = Some((h.batch, r.offset)),
            Some((batch, _)) if h.batch == batch => {}
            None => {
                return Err(bad(format!(
                    "record seq {} continues write set batch {}, which is not being read",
                    h.seq, h.batch
                )))
            }
            Some((batch, _)) => {
                return Err(bad(format!(
                    "record seq {} starts a write set before the one of batch {batch} ended",
                    h.seq
                )))
            }
        }
        let Some((&flag, piece)) = r.payload.split_first() else {
            return Err(bad("a record without its piece flag".into()));
        };
        self.pieces.extend_from_slice(piece);
        match flag {
            PIECE_MORE => return Ok(()),
            PIECE_LAST => {}
            other => return Err(bad(format!("piece flag {other} is neither 0 nor 1"))),
        }
        let Some((_, at)) = self.open.take() else {
            return Err(bad("no write set is being read".into()));
        };
        let bad = |what: String| Damage::new(at, what);
        let ws = WriteSet::from_canonical(&self.pieces)
            .map_err(|e| bad(format!("a write set does not decode: {e}")))?;
        self.pieces.clear();
        if ws.group.as_ref() != Some(&self.group) {
            return Err(bad(format!(
                "a write set of group {:?} in the journal of group {}",
                ws.group.as_ref().map(Id::as_str),
                self.group
            )));
        }
        self.image.commit(&ws).map_err(|e| bad(e.message))
    }

    /// Ends the read where the scan ended.
    pub fn finish(self, end: &ScanEnd) -> JournalRead {
        // A write set whose last piece is missing was cut at a record boundary: torn too.
        let (keep, next_seq) = match self.open {
            Some((batch, at)) => (at, batch),
            None => (end.end, end.last_seq + 1),
        };
        JournalRead {
            group: self.group,
            image: self.image,
            keep,
            next_seq,
        }
    }
}

/// Reads a whole journal held in memory (the file's bytes from offset 0).
pub fn read_journal(file: &[u8]) -> Result<JournalRead, Damage> {
    let group = check_journal_header(file)?;
    let (records, end) = scan_slice(file, journal_scan_spec(file.len() as u64), &|_| None)?;
    let mut reader = JournalReader::new(group);
    for r in &records {
        reader.handle_record(r)?;
    }
    Ok(reader.finish(&end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_name_that_is_another_journals_file_is_refused() {
        for ok in [
            "ada.journal",
            "a",
            "LOCKED",
            "a.LOCKS",
            "a.lock",
            "a.tmpx",
            "a.LOCK.journal",
        ] {
            assert_eq!(journal_name_conflict(ok), None, "{ok}");
        }
        for (bad, why) in [
            ("a.LOCK", "a.LOCK is the writer lock file of journal a"),
            ("a.LOCK.pid", "a.LOCK.pid is the owner record of journal a"),
            ("a.tmp", "a.tmp is the file that creates journal a"),
            (
                "a.LOCK.pid.stale-42",
                "a.LOCK.pid.stale-42 is where the writer lock of journal a moves a stale owner record",
            ),
            ("LOCK", "LOCK is a data directory's writer lock file"),
            ("LOCK.pid", "LOCK.pid is a data directory's writer lock file"),
            ("", "the path names no file"),
            ("..", "the path names no file"),
        ] {
            assert_eq!(journal_name_conflict(bad).as_deref(), Some(why), "{bad}");
        }
        let e = check_journal_name("/d/a.LOCK", "a.LOCK").unwrap_err();
        assert_eq!(e.code, crate::Code::Malformed);
        assert_eq!(
            e.message,
            "agent journal /d/a.LOCK: a.LOCK is the writer lock file of journal a; choose another name"
        );
        assert_eq!(
            e.details.get("file"),
            Some(&serde_json::Value::from("/d/a.LOCK"))
        );
    }
}
