//! The byte layout of the file store: docs/format.md is the normative description, this
//! module its one implementation. The native file host (`mwp-host`) and the Node/Deno file
//! store (through `mwp-wasm`) both frame, check and scan their files here; they only read and
//! write the bytes. Every integer is little-endian, whatever the platform. No IO.
//!
//! * A **file header** ([`FileHeader`], 192 bytes) opens every log segment and the redaction
//!   overlay.
//! * A **record** is a 24-byte header ([`RecordHeader`]: payload length, seq, first seq of
//!   its write batch, CRC32C) followed by the payload (the canonical CBOR of an event).
//! * A **snapshot file** is a 32-byte header followed by a signed snapshot's canonical CBOR
//!   ([`encode_snapshot_file`], [`decode_snapshot_file`]).
//! * Names: [`segment_name`], [`snapshot_name`], [`parse_numbered`], [`group_dir_name`],
//!   [`group_from_dir_name`].
//!
//! [`Scanner`] walks the records of one file and applies the tail rule: damage in the last
//! segment that only the last, unsynced write batch can explain is a torn tail; any other
//! damage is `LOG_CORRUPT` naming the file and the offset. It does no IO: it tells its host
//! which bytes it needs next.
//!
//! [`journal`] frames an agent's journal the same way.

pub mod journal;
mod scan;

pub use scan::{
    scan_slice, Damage, Erased, Erasure, Need, Record, ScanEnd, ScanSpec, Scanner, Step,
    DEFAULT_CHUNK, MAX_REREADS,
};

use crate::{Code, Error, Hash, Id};

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
pub const MAX_ID_LEN: usize = 128;
/// Length of the prefix of an overlay entry's payload: the erased record's length and CRC.
pub const OVERLAY_ENTRY_PREFIX_LEN: usize = 8;
/// File name of the redaction overlay.
pub const OVERLAY_NAME: &str = "redactions.log";
/// File name of the authority key.
pub const KEY_NAME: &str = "authority.key";
/// Directory holding one directory per group.
pub const GROUPS_DIR: &str = "groups";

/// CRC32C (Castagnoli) of `bytes`: `crc32c(b"123456789") == 0xE306_9283`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// CRC32C of `bytes` continuing from `crc`, the CRC of the bytes before them (0 to start).
pub fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, bytes)
}

/// The little-endian u32 at `at`; 0 where `b` is too short (callers check lengths first).
fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at.saturating_add(4))
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map_or(0, u32::from_le_bytes)
}

/// The little-endian u64 at `at`; 0 where `b` is too short (callers check lengths first).
fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at.saturating_add(8))
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .map_or(0, u64::from_le_bytes)
}

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
        let crc = crc32c(&b[..188]);
        b[188..192].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and checks a header; the error says what is wrong.
    pub fn decode(b: &[u8], magic: [u8; 8]) -> Result<FileHeader, String> {
        if b.len() < FILE_HEADER_LEN {
            return Err(format!(
                "header is {} bytes, expected {FILE_HEADER_LEN}",
                b.len()
            ));
        }
        if b[0..8] != magic {
            return Err("wrong magic".into());
        }
        if crc32c(&b[..188]) != u32_at(b, 188) {
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

    /// Checks the first bytes of a file (at least [`FILE_HEADER_LEN`] of them, else the file
    /// is shorter than its header) as the header of a file of `group` with `magic` and, when
    /// given, the `first_seq` its name says. The damage names the offset of the bad field.
    pub fn check(
        b: &[u8],
        magic: [u8; 8],
        group: &Id,
        first_seq: Option<u64>,
    ) -> Result<FileHeader, Damage> {
        if b.len() < FILE_HEADER_LEN {
            return Err(Damage::new(0, "file is shorter than its header"));
        }
        let h = FileHeader::decode(b, magic).map_err(|e| Damage::new(0, e))?;
        if &h.group != group {
            return Err(Damage::new(
                52,
                format!(
                    "file belongs to group {}, not {group}, the group of its directory",
                    h.group
                ),
            ));
        }
        if let Some(seq) = first_seq {
            if h.first_seq != seq {
                return Err(Damage::new(
                    12,
                    format!("header says first seq {}, the name says {seq}", h.first_seq),
                ));
            }
        }
        Ok(h)
    }
}

/// The CRC32C of a record: over header bytes 0..20 (all of `header` if it is shorter), then
/// the payload.
pub fn record_crc(header: &[u8], payload: &[u8]) -> u32 {
    let head = header.get(..20).unwrap_or(header);
    crc32c_append(crc32c(head), payload)
}

/// Appends one record (header and payload) to `out`. The payload must be at most
/// [`MAX_RECORD_LEN`] bytes (the writer checks before calling; a longer one would be read
/// back as damage).
pub fn encode_record(out: &mut Vec<u8>, seq: u64, batch: u64, payload: &[u8]) {
    let h = RecordHeader {
        len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
        seq,
        batch,
        crc: 0,
    };
    let prefix = h.prefix();
    out.extend_from_slice(&prefix);
    out.extend_from_slice(&record_crc(&prefix, payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// One write batch: the records of `payloads` with seqs `first_seq`, `first_seq + 1`, …, each
/// naming `first_seq` as its batch, one after the other.
pub fn encode_batch<'p>(first_seq: u64, payloads: impl IntoIterator<Item = &'p [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut seq = first_seq;
    for p in payloads {
        encode_record(&mut out, seq, first_seq, p);
        seq = seq.saturating_add(1);
    }
    out
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
    /// Parses the first 24 bytes of `b`; `None` if there are fewer.
    pub fn parse(b: &[u8]) -> Option<RecordHeader> {
        if b.len() < RECORD_HEADER_LEN {
            return None;
        }
        Some(RecordHeader {
            len: u32_at(b, 0),
            seq: u64_at(b, 4),
            batch: u64_at(b, 12),
            crc: u32_at(b, 20),
        })
    }

    /// Header bytes 0..20: everything but the CRC.
    pub fn prefix(&self) -> [u8; 20] {
        let mut b = [0u8; 20];
        b[0..4].copy_from_slice(&self.len.to_le_bytes());
        b[4..12].copy_from_slice(&self.seq.to_le_bytes());
        b[12..20].copy_from_slice(&self.batch.to_le_bytes());
        b
    }

    /// Whether `payload` is this record's: its length and CRC match.
    pub fn matches(&self, payload: &[u8]) -> bool {
        payload.len() == self.len as usize && record_crc(&self.prefix(), payload) == self.crc
    }

    /// Whether `payload` is this record erased: all zeros, with the CRC recomputed.
    pub fn is_erased(&self, payload: &[u8]) -> bool {
        payload.iter().all(|&b| b == 0) && self.matches(payload)
    }

    /// The bytes that erase this record in place, written at record offset 20: the CRC of
    /// the header over zeros, then `len` zero bytes.
    pub fn erase_patch(&self) -> Vec<u8> {
        let mut patch = vec![0u8; 4 + self.len as usize];
        let crc = record_crc(&self.prefix(), &patch[4..]);
        patch[0..4].copy_from_slice(&crc.to_le_bytes());
        patch
    }
}

/// The payload of an overlay entry: the erased record's original length and CRC, then the
/// canonical CBOR of the redacted event.
pub fn encode_overlay_entry(orig: Erased, redacted: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(OVERLAY_ENTRY_PREFIX_LEN + redacted.len());
    out.extend_from_slice(&orig.len.to_le_bytes());
    out.extend_from_slice(&orig.crc.to_le_bytes());
    out.extend_from_slice(redacted);
    out
}

/// Splits an overlay entry's payload into the original length and CRC and the redacted
/// event; `None` when it is shorter than 8 bytes.
pub fn decode_overlay_entry(payload: &[u8]) -> Option<(Erased, &[u8])> {
    let rest = payload.get(OVERLAY_ENTRY_PREFIX_LEN..)?;
    let orig = Erased {
        len: u32_at(payload, 0),
        crc: u32_at(payload, 4),
    };
    Some((orig, rest))
}

/// The first reservation of zeros after a segment's records (docs/format.md, "Reserved
/// space").
pub const MIN_RESERVE_BYTES: u64 = 64 << 10;

/// How many zeros a batch that reaches past a segment's reserved space appends in the same
/// write (docs/format.md, "Reserved space"): as many as the file already holds (`alloc`
/// bytes), at least [`MIN_RESERVE_BYTES`], at most `reserve_bytes` (`0` turns reserving
/// off). A segment's reservations so double until they reach `reserve_bytes`, and a store of
/// many small groups does not write `reserve_bytes` of zeros for each. Every file store
/// (native, Node/Deno) reserves by this rule; readers do not depend on it.
pub fn reserve_len(alloc: u64, reserve_bytes: u64) -> u64 {
    reserve_bytes.min(alloc.max(MIN_RESERVE_BYTES))
}

/// The snapshot file header and payload.
pub fn encode_snapshot_file(seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SNAPSHOT_HEADER_LEN + payload.len());
    out.extend_from_slice(&snapshot_file_header(seq, payload));
    out.extend_from_slice(payload);
    out
}

/// The header of the snapshot file that holds `payload`: what [`encode_snapshot_file`] puts
/// before it, for a writer that writes the payload from where it lies.
pub fn snapshot_file_header(seq: u64, payload: &[u8]) -> [u8; SNAPSHOT_HEADER_LEN] {
    let mut head = [0u8; SNAPSHOT_HEADER_LEN];
    head[..8].copy_from_slice(&SNAPSHOT_MAGIC);
    head[8..12].copy_from_slice(&VERSION.to_le_bytes());
    head[12..20].copy_from_slice(&seq.to_le_bytes());
    head[20..28].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    let crc = crc32c_append(crc32c(&head[..28]), payload);
    head[28..].copy_from_slice(&crc.to_le_bytes());
    head
}

/// A snapshot file's header, checked against the file's length: what [`decode_snapshot_file`]
/// checks before the checksum, for a reader that streams the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotHeader {
    /// The seq the file says it holds.
    pub seq: u64,
    /// Length of the payload after the header.
    pub len: u64,
    /// CRC32C of the header's first 28 bytes and the payload.
    pub crc: u32,
}

impl SnapshotHeader {
    /// Checks the header bytes (the first [`SNAPSHOT_HEADER_LEN`] of a file of `file_len`
    /// bytes, or all of a shorter file): magic, version and a length field that matches the
    /// file. The error says what is wrong, in [`decode_snapshot_file`]'s words.
    pub fn check(b: &[u8], file_len: u64) -> Result<SnapshotHeader, String> {
        if b.len() < SNAPSHOT_HEADER_LEN || file_len < SNAPSHOT_HEADER_LEN as u64 {
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
        let held = file_len - SNAPSHOT_HEADER_LEN as u64;
        if len != held {
            return Err(format!(
                "length field says {len} bytes, the file holds {held}"
            ));
        }
        Ok(SnapshotHeader {
            seq,
            len,
            crc: u32_at(b, 28),
        })
    }

    /// The checksum's starting value: the CRC32C of the header's first 28 bytes, to which the
    /// payload is appended with [`crc32c_append`].
    pub fn crc_start(b: &[u8]) -> u32 {
        crc32c(&b[..28])
    }
}

/// Checks a snapshot file's frame and returns (seq, payload); the error says what is wrong.
pub fn decode_snapshot_file(b: &[u8]) -> Result<(u64, &[u8]), String> {
    let header = SnapshotHeader::check(b, b.len() as u64)?;
    let payload = &b[SNAPSHOT_HEADER_LEN..];
    if crc32c_append(SnapshotHeader::crc_start(b), payload) != header.crc {
        return Err("checksum mismatch".into());
    }
    Ok((header.seq, payload))
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

const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// Directory name of a group: the ID itself when it is lowercase `[a-z0-9][a-z0-9._-]*`,
/// otherwise `~` followed by the lowercase RFC 4648 base32 (no padding) of its bytes, so that
/// names never collide on case-insensitive file systems and `.`/`..` never occur.
pub fn group_dir_name(group: &Id) -> String {
    dir_name_of(group.as_str())
}

/// [`group_dir_name`] of any text, a valid ID or not (a host asked for a group by a name that
/// is no ID finds no directory under it).
pub fn dir_name_of(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes().enumerate().all(|(i, b)| {
            b.is_ascii_lowercase()
                || b.is_ascii_digit()
                || (i > 0 && matches!(b, b'.' | b'_' | b'-'))
        });
    if plain {
        return s.to_owned();
    }
    let mut out = String::from("~");
    let mut acc: u32 = 0;
    let mut bits = 0;
    for &b in s.as_bytes() {
        acc = ((acc << 8) | u32::from(b)) & 0xffff;
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
                acc = ((acc << 5) | v) & 0xffff;
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

#[cfg(test)]
mod tests;
