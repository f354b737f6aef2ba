//! The byte layout of the file store (docs/format.md is the normative description; this
//! module is its implementation). Every integer is little-endian, whatever the platform.
//!
//! * A **file header** (192 bytes) opens every log segment and the redaction overlay.
//! * A **record** is a 24-byte header — payload length, seq, first seq of its write batch,
//!   CRC32C — followed by the payload (the canonical CBOR of an event).
//! * A **snapshot file** is a 32-byte header followed by a signed snapshot's canonical CBOR.
//!
//! [`scan`] walks the records of one file and applies the tail rule: damage in the last
//! segment that only the last, unsynced write batch can explain is a torn tail; any other
//! damage is `LOG_CORRUPT` naming the file and the offset.

use mwp_core::{Code, Error, Hash, Id, Result};

use super::backend::StorageFile;

/// Magic of a log segment.
pub const SEGMENT_MAGIC: [u8; 8] = *b"MWPLOG\r\n";
/// Magic of the redaction overlay.
pub const OVERLAY_MAGIC: [u8; 8] = *b"MWPRDX\r\n";
/// Magic of a snapshot file.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"MWPSNP\r\n";
/// Format version written in every header.
pub const VERSION: u32 = 1;
/// Length of a segment or overlay header.
pub const FILE_HEADER_LEN: usize = 192;
/// Length of a record header.
pub const RECORD_HEADER_LEN: usize = 24;
/// Length of a snapshot file header.
pub const SNAPSHOT_HEADER_LEN: usize = 32;
/// Largest record payload accepted (16 MiB); a longer length field is damage.
pub const MAX_RECORD_LEN: u32 = 16 << 20;
/// Longest group ID (SPEC §1).
const MAX_ID_LEN: usize = 128;

/// The header of a segment or of the redaction overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    /// [`SEGMENT_MAGIC`] or [`OVERLAY_MAGIC`].
    pub magic: [u8; 8],
    /// Seq of the first record (segments); 0 for the overlay.
    pub first_seq: u64,
    /// Id of event `first_seq - 1` (zeros for seq 1 and for the overlay).
    pub prev: Hash,
    /// The group the file belongs to.
    pub group: Id,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl FileHeader {
    /// The 192 header bytes.
    pub fn encode(&self) -> [u8; FILE_HEADER_LEN] {
        let mut b = [0u8; FILE_HEADER_LEN];
        b[0..8].copy_from_slice(&self.magic);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..20].copy_from_slice(&self.first_seq.to_le_bytes());
        b[20..52].copy_from_slice(&self.prev.0);
        let id = self.group.as_str().as_bytes();
        // Ids are 1..=128 bytes (checked when the Id was made).
        let n = id.len().min(MAX_ID_LEN);
        b[52] = n as u8;
        b[53..53 + n].copy_from_slice(&id[..n]);
        let crc = crc32c::crc32c(&b[..188]);
        b[188..192].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and checks a header; the error says what is wrong.
    pub fn decode(b: &[u8], magic: [u8; 8]) -> std::result::Result<FileHeader, String> {
        if b.len() < FILE_HEADER_LEN {
            return Err(format!(
                "header is {} bytes, expected {FILE_HEADER_LEN}",
                b.len()
            ));
        }
        if b[0..8] != magic {
            return Err("wrong magic".into());
        }
        if crc32c::crc32c(&b[..188]) != u32_at(b, 188) {
            return Err("header checksum mismatch".into());
        }
        let version = u32_at(b, 8);
        if version != VERSION {
            return Err(format!(
                "format version {version} is not supported (expected {VERSION})"
            ));
        }
        let n = usize::from(b[52]);
        if n == 0 || n > MAX_ID_LEN || b[53 + n..188].iter().any(|&x| x != 0) {
            return Err("bad group id field".into());
        }
        let group = std::str::from_utf8(&b[53..53 + n])
            .ok()
            .and_then(|s| Id::new(s).ok())
            .ok_or("group id field is not a valid id")?;
        let mut prev = [0u8; 32];
        prev.copy_from_slice(&b[20..52]);
        Ok(FileHeader {
            magic,
            first_seq: u64_at(b, 12),
            prev: Hash(prev),
            group,
        })
    }
}

/// The CRC32C of a record: over header bytes 0..20, then the payload.
pub fn record_crc(header20: &[u8], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&header20[..20]), payload)
}

/// Appends one record (header and payload) to `out`.
pub fn encode_record(out: &mut Vec<u8>, seq: u64, batch: u64, payload: &[u8]) {
    let start = out.len();
    // Payloads are events bounded far below 4 GiB by the command limits; the writer checks
    // MAX_RECORD_LEN before calling.
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&batch.to_le_bytes());
    let crc = record_crc(&out[start..start + 20], payload);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(payload);
}

/// A parsed record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Payload length.
    pub len: u32,
    /// Seq (the event's; for the overlay, the redacted event's).
    pub seq: u64,
    /// Seq of the first record of the write batch this record was written in.
    pub batch: u64,
    /// CRC32C over header bytes 0..20 and the payload.
    pub crc: u32,
}

impl RecordHeader {
    /// Parses 24 header bytes.
    pub fn parse(b: &[u8]) -> RecordHeader {
        RecordHeader {
            len: u32_at(b, 0),
            seq: u64_at(b, 4),
            batch: u64_at(b, 12),
            crc: u32_at(b, 20),
        }
    }
}

/// The snapshot file header and payload.
pub fn encode_snapshot_file(seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SNAPSHOT_HEADER_LEN + payload.len());
    out.extend_from_slice(&SNAPSHOT_MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[..28]), payload);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Checks a snapshot file's frame and returns (seq, payload).
pub fn decode_snapshot_file(b: &[u8]) -> std::result::Result<(u64, &[u8]), String> {
    if b.len() < SNAPSHOT_HEADER_LEN {
        return Err("shorter than its header".into());
    }
    if b[0..8] != SNAPSHOT_MAGIC {
        return Err("wrong magic".into());
    }
    let version = u32_at(b, 8);
    if version != VERSION {
        return Err(format!("format version {version} is not supported"));
    }
    let seq = u64_at(b, 12);
    let len = u64_at(b, 20);
    if len != (b.len() - SNAPSHOT_HEADER_LEN) as u64 {
        return Err(format!(
            "length field says {len} bytes, the file holds {}",
            b.len() - SNAPSHOT_HEADER_LEN
        ));
    }
    let payload = &b[SNAPSHOT_HEADER_LEN..];
    if crc32c::crc32c_append(crc32c::crc32c(&b[..28]), payload) != u32_at(b, 28) {
        return Err("checksum mismatch".into());
    }
    Ok((seq, payload))
}

/// File name of the segment whose first record is `first_seq`.
pub fn segment_name(first_seq: u64) -> String {
    format!("{first_seq:020}.seg")
}

/// File name of the snapshot at `seq`.
pub fn snapshot_name(seq: u64) -> String {
    format!("{seq:020}.snap")
}

/// Parses `<20 digits>.<ext>`.
pub fn parse_numbered(name: &str, ext: &str) -> Option<u64> {
    let stem = name.strip_suffix(ext)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// File name of the redaction overlay.
pub const OVERLAY_NAME: &str = "redactions.log";
/// File name of the authority key.
pub const KEY_NAME: &str = "authority.key";
/// Directory holding one directory per group.
pub const GROUPS_DIR: &str = "groups";

const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// Directory name of a group: the ID itself when it is lowercase `[a-z0-9][a-z0-9._-]*`,
/// otherwise `~` followed by the lowercase RFC 4648 base32 (no padding) of its bytes, so that
/// names never collide on case-insensitive file systems and `.`/`..` never occur.
pub fn group_dir_name(group: &Id) -> String {
    let s = group.as_str();
    let plain = s.bytes().enumerate().all(|(i, b)| {
        b.is_ascii_lowercase() || b.is_ascii_digit() || (i > 0 && matches!(b, b'.' | b'_' | b'-'))
    });
    if plain {
        return s.to_owned();
    }
    let mut out = String::from("~");
    let mut acc: u32 = 0;
    let mut bits = 0;
    for &b in s.as_bytes() {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(BASE32[((acc >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(BASE32[((acc << (5 - bits)) & 31) as usize]));
    }
    out
}

/// The group ID a directory name stands for, if it is one [`group_dir_name`] makes.
pub fn group_from_dir_name(name: &str) -> Option<Id> {
    let id = match name.strip_prefix('~') {
        None => name.to_owned(),
        Some(enc) => {
            let mut bytes = Vec::new();
            let mut acc: u32 = 0;
            let mut bits = 0;
            for c in enc.bytes() {
                let v = BASE32.iter().position(|&x| x == c)? as u32;
                acc = (acc << 5) | v;
                bits += 5;
                if bits >= 8 {
                    bits -= 8;
                    bytes.push((acc >> bits) as u8);
                }
            }
            String::from_utf8(bytes).ok()?
        }
    };
    let id = Id::new(id).ok()?;
    (group_dir_name(&id) == name).then_some(id)
}

/// A `LOG_CORRUPT` error naming a file and an offset.
pub fn corrupt_at(file: &str, offset: u64, what: impl std::fmt::Display) -> Error {
    Error::new(
        Code::LogCorrupt,
        format!("{file} at offset {offset}: {what}"),
    )
    .with("file", file)
    .with("offset", offset)
}

/// A `STORAGE` error from an IO failure.
pub fn storage(what: impl std::fmt::Display, e: std::io::Error) -> Error {
    Error::new(Code::Storage, format!("{what}: {e}"))
}

/// What the overlay says about a redacted record: its original length and CRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Erased {
    /// Payload length of the record before erasure.
    pub len: u32,
    /// CRC of the record before erasure.
    pub crc: u32,
}

/// Where a record stands with respect to redaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Erasure {
    /// Not redacted: the payload is the event.
    None,
    /// Redacted but not yet erased (or interrupted): the overlay holds the event; the
    /// payload must be zeroed.
    Pending,
    /// Redacted and zeroed: the overlay holds the event.
    Done,
}

/// One record as [`scan`] hands it out.
#[derive(Debug)]
pub struct Record<'a> {
    /// Offset of the record header in the file.
    pub offset: u64,
    /// Parsed header.
    pub header: RecordHeader,
    /// The payload bytes as stored.
    pub payload: &'a [u8],
    /// Redaction status.
    pub erasure: Erasure,
}

/// How a scan of one file ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanEnd {
    /// Offset just past the last good record.
    pub end: u64,
    /// Seq of the last good record (`first_seq - 1` when there is none).
    pub last_seq: u64,
    /// A torn tail found after `end`: its length in bytes.
    pub torn: Option<u64>,
    /// Zero bytes after `end`, up to the end of the file: space reserved for later appends
    /// (only where [`ScanSpec::reserve`] allows it).
    pub reserved: u64,
}

/// Options of one [`scan`].
pub struct ScanSpec<'a> {
    /// File name, for errors.
    pub name: &'a str,
    /// Seq the first record must carry.
    pub first_seq: u64,
    /// Whether seqs must follow each other (segments) or merely be present (overlay).
    pub contiguous: bool,
    /// Whether damage at the end may be a torn tail (the last segment, the overlay).
    pub may_be_torn: bool,
    /// Whether the file may end in zero bytes reserved for later appends (the last segment).
    pub reserve: bool,
    /// The overlay's knowledge of redacted seqs.
    pub erased: &'a dyn Fn(u64) -> Option<Erased>,
}

const CHUNK: usize = 1 << 20;

/// Walks every record of `file` after its header, checking framing, CRCs and seqs, calling
/// `visit` for each good one in order. Returns where the good records end; damage that the
/// tail rule cannot explain is `LOG_CORRUPT` naming the file and offset.
pub fn scan(
    file: &dyn StorageFile,
    spec: &ScanSpec<'_>,
    visit: &mut dyn FnMut(Record<'_>) -> Result<()>,
) -> Result<ScanEnd> {
    let len = file
        .len()
        .map_err(|e| storage(format!("size of {}", spec.name), e))?;
    let mut pos = FILE_HEADER_LEN as u64;
    let mut buf: Vec<u8> = Vec::new();
    let mut buf_start = pos;
    let mut expected = spec.first_seq;
    let mut last_seq = spec.first_seq.saturating_sub(1);
    // Ensures buf holds [at, at + n) if the file has it; returns false if it does not.
    let fill = |buf: &mut Vec<u8>, buf_start: &mut u64, at: u64, n: usize| -> Result<bool> {
        if at + n as u64 > len {
            return Ok(false);
        }
        if at >= *buf_start && at + n as u64 <= *buf_start + buf.len() as u64 {
            return Ok(true);
        }
        let want = (n.max(CHUNK) as u64).min(len - at) as usize;
        buf.resize(want, 0);
        file.read_at(at, buf)
            .map_err(|e| storage(format!("read {} at {at}", spec.name), e))?;
        *buf_start = at;
        Ok(true)
    };
    // A reader beside a live writer (a read-only open) may hold bytes read before the writer
    // finished them while the bytes after were written later: damage followed by a later
    // batch is read again from the file before it is called damage. A writer completes each
    // batch before it starts the next, so a fresh read shows the earlier batch whole; on a
    // file nobody writes, the same bytes come back and the damage stands.
    let mut rereads = 0;
    'scan: loop {
        let damage: (u64, String) = loop {
            if pos == len {
                return Ok(ScanEnd {
                    end: pos,
                    last_seq,
                    torn: None,
                    reserved: 0,
                });
            }
            if !fill(&mut buf, &mut buf_start, pos, RECORD_HEADER_LEN)? {
                break (pos, "incomplete record header".into());
            }
            let hb = (pos - buf_start) as usize;
            let h = RecordHeader::parse(&buf[hb..hb + RECORD_HEADER_LEN]);
            if h.len > MAX_RECORD_LEN {
                break (
                    pos,
                    format!("record length {} exceeds {MAX_RECORD_LEN}", h.len),
                );
            }
            let total = RECORD_HEADER_LEN + h.len as usize;
            if !fill(&mut buf, &mut buf_start, pos, total)? {
                break (pos, "record extends past the end of the file".into());
            }
            let rb = (pos - buf_start) as usize;
            let rec = &buf[rb..rb + total];
            let payload = &rec[RECORD_HEADER_LEN..];
            let crc_ok = record_crc(rec, payload) == h.crc;
            let seq_ok = if spec.contiguous {
                h.seq == expected
            } else {
                h.seq >= 1
            };
            let erased = if seq_ok { (spec.erased)(h.seq) } else { None };
            let erasure = match erased {
                None => Erasure::None,
                Some(e) if e.len != h.len => {
                    break (
                        pos,
                        format!(
                            "redacted record seq {} has length {}, the overlay says {}",
                            h.seq, h.len, e.len
                        ),
                    );
                }
                Some(_) if crc_ok && payload.iter().all(|&b| b == 0) => Erasure::Done,
                // The original bytes, or an erasure a crash interrupted: the overlay holds the
                // record (checked against its length above), so redo the erasure.
                Some(_) => Erasure::Pending,
            };
            if erasure == Erasure::None && !crc_ok {
                break (
                    pos,
                    format!("record checksum mismatch (seq field {})", h.seq),
                );
            }
            if !seq_ok {
                if crc_ok {
                    // A whole, checksummed record with the wrong seq is not a torn write.
                    return Err(corrupt_at(
                        spec.name,
                        pos,
                        format!("record has seq {}, expected {expected}", h.seq),
                    ));
                }
                break (
                    pos,
                    format!("record has seq {}, expected {expected}", h.seq),
                );
            }
            if crc_ok && h.batch > h.seq {
                return Err(corrupt_at(
                    spec.name,
                    pos,
                    format!("record seq {} names batch {} after it", h.seq, h.batch),
                ));
            }
            visit(Record {
                offset: pos,
                header: h,
                payload,
                erasure,
            })?;
            last_seq = h.seq;
            expected = h.seq + 1;
            pos += total as u64;
        };
        let (at, reason) = damage;
        if spec.reserve && all_zero(file, spec.name, at, len)? {
            return Ok(ScanEnd {
                end: at,
                last_seq,
                torn: None,
                reserved: len - at,
            });
        }
        if !spec.may_be_torn {
            return Err(corrupt_at(spec.name, at, reason));
        }
        if let Some(later) = later_batch(file, len, at, expected, spec.contiguous)? {
            if rereads < MAX_REREADS {
                rereads += 1;
                buf.clear();
                buf_start = at;
                pos = at;
                continue 'scan;
            }
            return Err(corrupt_at(
            spec.name,
            at,
            format!("{reason}, but a later write batch starts at offset {later}: acknowledged data is damaged"),
        ));
        }
        return Ok(ScanEnd {
            end: at,
            last_seq,
            torn: Some(len - at),
            reserved: 0,
        });
    }
}

/// How often [`scan`] reads damage followed by a later batch again before it reports it.
const MAX_REREADS: u32 = 3;

/// Whether every byte of `file` in `[from, len)` is zero, read a chunk at a time.
fn all_zero(file: &dyn StorageFile, name: &str, from: u64, len: u64) -> Result<bool> {
    let mut buf = vec![0u8; CHUNK];
    let mut at = from;
    while at < len {
        // At most CHUNK, so it fits in usize.
        let n = (len - at).min(CHUNK as u64) as usize;
        file.read_at(at, &mut buf[..n])
            .map_err(|e| storage(format!("read {name} at {at}"), e))?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}

/// Looks for a checksummed record after `from` that belongs to a write batch later than the
/// one that should hold seq `expected`: proof that the damage is not a torn last write.
fn later_batch(
    file: &dyn StorageFile,
    len: u64,
    from: u64,
    expected: u64,
    contiguous: bool,
) -> Result<Option<u64>> {
    let n = usize::try_from(len - from).map_err(|_| Error::new(Code::Storage, "file too large"))?;
    let mut rest = vec![0u8; n];
    file.read_at(from, &mut rest)
        .map_err(|e| storage(format!("read at {from}"), e))?;
    for i in 1..n.saturating_sub(RECORD_HEADER_LEN - 1) {
        let h = RecordHeader::parse(&rest[i..i + RECORD_HEADER_LEN]);
        if h.len > MAX_RECORD_LEN || i + RECORD_HEADER_LEN + h.len as usize > n || h.batch > h.seq {
            continue;
        }
        // Segments: a batch that starts after the seq the damaged record should hold.
        // The overlay: any entry, since each is synced before the next is written.
        let later = if contiguous {
            h.batch > expected
        } else {
            h.seq >= 1
        };
        if !later {
            continue;
        }
        let rec = &rest[i..i + RECORD_HEADER_LEN + h.len as usize];
        if record_crc(rec, &rec[RECORD_HEADER_LEN..]) == h.crc {
            return Ok(Some(from + i as u64));
        }
    }
    Ok(None)
}
