//! The file store's byte layout ([`mwp_core::log_format`]) for the Node/Deno file store of
//! `js/src/file-store.js`, which keeps only the file-system calls: CRC32C, file and record
//! headers, write batches, overlay entries, snapshot files, file and directory names, and
//! [`LogScanner`], the core's scanner with its tail rule, fed the bytes it asks for.
//!
//! Damage is a `StoreError` with code `LOG_CORRUPT` naming the file and the offset
//! (`details.file`, `details.offset`), as the native store reports it.

use std::collections::BTreeMap;

use mwp_core::log_format::{
    self as lf, Erased, Erasure, FileHeader, RecordHeader, ScanEnd, Scanner, Step,
};
use mwp_core::{Error, Hash, Id};
use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;

use crate::codec::{from_js, num, to_js, uint};
use crate::error::StoreError;
use crate::frames;

fn set(obj: &js_sys::Object, key: &str, value: JsValue) {
    // Setting a property on a fresh plain object cannot fail.
    let _ = js_sys::Reflect::set(obj, &key.into(), &value);
}

fn group_id(group: &str) -> Result<Id, StoreError> {
    Id::new(group).map_err(|e| StoreError::malformed(format!("group: {e}")))
}

fn magic_of(kind: &str) -> Result<[u8; 8], StoreError> {
    match kind {
        "segment" => Ok(lf::SEGMENT_MAGIC),
        "overlay" => Ok(lf::OVERLAY_MAGIC),
        other => Err(StoreError::malformed(format!(
            "file kind must be \"segment\" or \"overlay\", not {other:?}"
        ))),
    }
}

fn payload_len(payload: &[u8]) -> Result<(), StoreError> {
    if payload.len() > lf::MAX_RECORD_LEN as usize {
        return Err(StoreError::malformed(format!(
            "record payload is {} bytes; at most {} fit a record",
            payload.len(),
            lf::MAX_RECORD_LEN
        )));
    }
    Ok(())
}

fn header_to_js(h: &RecordHeader) -> js_sys::Object {
    let obj = js_sys::Object::new();
    set(&obj, "len", f64::from(h.len).into());
    set(&obj, "seq", num(h.seq).into());
    set(&obj, "batch", num(h.batch).into());
    set(&obj, "crc", f64::from(h.crc).into());
    obj
}

/// CRC32C of `bytes`, continuing from `crc` (the CRC of the bytes before them; 0 to start):
/// `crc32c(b, crc32c(a))` is the CRC of `a` followed by `b`.
#[wasm_bindgen]
pub fn crc32c(bytes: &[u8], crc: Option<u32>) -> u32 {
    lf::crc32c_append(crc.unwrap_or(0), bytes)
}

/// Whether a page of events whose events so far hold `taken` bytes (as served: a record's
/// payload, a redacted event's redacted form) takes the next one: the rule of every store's
/// page of events ([`mwp_core::authority::page_takes`], at most about 8 MiB a page).
#[wasm_bindgen(js_name = pageTakes)]
pub fn page_takes(taken: f64) -> Result<bool, StoreError> {
    Ok(mwp_core::authority::page_takes(uint(taken, "taken")?))
}

/// Directory name of a group: the ID itself when it is lowercase `[a-z0-9][a-z0-9._-]*`,
/// otherwise `~` and the lowercase base32 of its bytes (`G1` → `~i4yq`).
#[wasm_bindgen(js_name = groupDirName)]
pub fn group_dir_name(group: &str) -> String {
    lf::dir_name_of(group)
}

/// The group ID a directory name stands for, or `null` if `groupDirName` would not make it.
#[wasm_bindgen(js_name = groupFromDirName)]
pub fn group_from_dir_name(name: &str) -> Option<String> {
    lf::group_from_dir_name(name).map(|id| id.as_str().to_owned())
}

/// File name of the segment whose first record is `firstSeq`: 20 digits and `.seg`.
#[wasm_bindgen(js_name = segmentName)]
pub fn segment_name(first_seq: f64) -> Result<String, StoreError> {
    Ok(lf::segment_name(uint(first_seq, "firstSeq")?))
}

/// File name of the snapshot at `seq`: 20 digits and `.snap`.
#[wasm_bindgen(js_name = snapshotName)]
pub fn snapshot_name(seq: f64) -> Result<String, StoreError> {
    Ok(lf::snapshot_name(uint(seq, "seq")?))
}

/// The number of a `<20 digits>.<ext>` name; `null` for any other name (or a number past
/// 2^53 − 1).
#[wasm_bindgen(js_name = parseNumbered)]
pub fn parse_numbered(name: &str, ext: &str) -> Option<f64> {
    lf::parse_numbered(name, ext)
        .filter(|&n| n <= 9_007_199_254_740_991)
        .map(num)
}

/// The 192 header bytes of a segment (`kind` `"segment"`, whose first record is `firstSeq`
/// and whose `prev` is the id, hex, of the event before it) or of the redaction overlay
/// (`"overlay"`: `firstSeq` 0, `prev` all zeros) of `group`.
#[wasm_bindgen(js_name = encodeFileHeader)]
pub fn encode_file_header(
    kind: &str,
    first_seq: f64,
    prev: &str,
    group: &str,
) -> Result<Vec<u8>, StoreError> {
    let prev = Hash::from_hex(prev).map_err(|e| StoreError::malformed(format!("prev: {e}")))?;
    Ok(FileHeader {
        magic: magic_of(kind)?,
        first_seq: uint(first_seq, "firstSeq")?,
        prev,
        group: group_id(group)?,
    }
    .encode()
    .to_vec())
}

/// Checks the first bytes of the file `name` (all of them if it is shorter than a header) as
/// the header of a `kind` (`"segment"` or `"overlay"`) file of `group` and, unless `null`,
/// first seq `firstSeq`. Returns `{firstSeq, prev (hex), group}`; throws `LOG_CORRUPT`
/// naming the file and the offset of the bad field.
#[wasm_bindgen(js_name = checkFileHeader)]
pub fn check_file_header(
    bytes: &[u8],
    name: &str,
    kind: &str,
    group: &str,
    first_seq: Option<f64>,
) -> Result<JsValue, StoreError> {
    let first_seq = match first_seq {
        Some(n) => Some(uint(n, "firstSeq")?),
        None => None,
    };
    let h = FileHeader::check(bytes, magic_of(kind)?, &group_id(group)?, first_seq)
        .map_err(|d| StoreError(d.into_error(name)))?;
    let obj = js_sys::Object::new();
    set(&obj, "firstSeq", num(h.first_seq).into());
    set(&obj, "prev", h.prev.to_hex().into());
    set(&obj, "group", h.group.as_str().into());
    Ok(obj.into())
}

/// One record: the 24-byte header (`len`, `seq`, `batch`, CRC32C) and the payload.
#[wasm_bindgen(js_name = encodeRecord)]
pub fn encode_record(seq: f64, batch: f64, payload: &[u8]) -> Result<Vec<u8>, StoreError> {
    payload_len(payload)?;
    let mut out = Vec::with_capacity(lf::RECORD_HEADER_LEN + payload.len());
    lf::encode_record(&mut out, uint(seq, "seq")?, uint(batch, "batch")?, payload);
    Ok(out)
}

/// How many zeros a batch that reaches past a segment's reserved space appends in the same
/// write, for a segment of `alloc` bytes and the store's `reserveBytes` (the native store's
/// rule, [`lf::reserve_len`]).
#[wasm_bindgen(js_name = reserveLen)]
pub fn reserve_len(alloc: f64, reserve_bytes: f64) -> Result<f64, StoreError> {
    Ok(lf::reserve_len(uint(alloc, "alloc")?, uint(reserve_bytes, "reserveBytes")?) as f64)
}

/// One write batch: the payloads of a frame batch as records with seqs `firstSeq`,
/// `firstSeq + 1`, …, each naming `firstSeq` as its batch, one after the other.
#[wasm_bindgen(js_name = encodeBatch)]
pub fn encode_batch(first_seq: f64, frames: &[u8]) -> Result<Vec<u8>, StoreError> {
    let first = uint(first_seq, "firstSeq")?;
    let payloads = frames::split(frames)?;
    for p in &payloads {
        payload_len(p)?;
    }
    Ok(lf::encode_batch(first, payloads))
}

/// The overlay record of redacted event `seq`: its entry holds the erased record's original
/// length and CRC (`origLen`, `origCrc`) and the redacted event's canonical CBOR.
#[wasm_bindgen(js_name = encodeOverlayRecord)]
pub fn encode_overlay_record(
    seq: f64,
    orig_len: u32,
    orig_crc: u32,
    redacted: &[u8],
) -> Result<Vec<u8>, StoreError> {
    let seq = uint(seq, "seq")?;
    let entry = lf::encode_overlay_entry(
        Erased {
            len: orig_len,
            crc: orig_crc,
        },
        redacted,
    );
    payload_len(&entry)?;
    let mut out = Vec::with_capacity(lf::RECORD_HEADER_LEN + entry.len());
    lf::encode_record(&mut out, seq, seq, &entry);
    Ok(out)
}

/// The original length and CRC (`{len, crc}`) an overlay entry's payload starts with, or
/// `undefined` if it is shorter than 8 bytes. The redacted event follows them.
#[wasm_bindgen(js_name = decodeOverlayEntry)]
pub fn decode_overlay_entry(payload: &[u8]) -> JsValue {
    match lf::decode_overlay_entry(payload) {
        Some((orig, _)) => {
            let obj = js_sys::Object::new();
            set(&obj, "len", f64::from(orig.len).into());
            set(&obj, "crc", f64::from(orig.crc).into());
            obj.into()
        }
        None => JsValue::UNDEFINED,
    }
}

/// The record header at `at` in `bytes`: `{len, seq, batch, crc}`; throws `MALFORMED` if
/// fewer than 24 bytes are there.
#[wasm_bindgen(js_name = parseRecordHeader)]
pub fn parse_record_header(bytes: &[u8], at: Option<f64>) -> Result<JsValue, StoreError> {
    let at = usize::try_from(uint(at.unwrap_or(0.0), "at")?).unwrap_or(usize::MAX);
    let h = bytes
        .get(at..)
        .and_then(RecordHeader::parse)
        .ok_or_else(|| StoreError::malformed("fewer than 24 bytes of record header"))?;
    Ok(header_to_js(&h).into())
}

/// The whole record at `at` in `bytes`: `{len, seq, batch, crc, crcOk}` (`crcOk`: the CRC
/// matches the header and payload), or `undefined` when the header or the payload does not
/// fit in `bytes` or the length is past the largest record.
#[wasm_bindgen(js_name = recordAt)]
pub fn record_at(bytes: &[u8], at: f64) -> Result<JsValue, StoreError> {
    let at = usize::try_from(uint(at, "at")?).unwrap_or(usize::MAX);
    let Some(h) = bytes.get(at..).and_then(RecordHeader::parse) else {
        return Ok(JsValue::UNDEFINED);
    };
    if h.len > lf::MAX_RECORD_LEN {
        return Ok(JsValue::UNDEFINED);
    }
    let start = at + lf::RECORD_HEADER_LEN;
    let Some(payload) = bytes.get(start..start + h.len as usize) else {
        return Ok(JsValue::UNDEFINED);
    };
    let obj = header_to_js(&h);
    set(&obj, "crcOk", h.matches(payload).into());
    Ok(obj.into())
}

fn parsed_header(header: &[u8]) -> Result<RecordHeader, StoreError> {
    RecordHeader::parse(header)
        .ok_or_else(|| StoreError::malformed("fewer than 24 bytes of record header"))
}

/// Whether `payload` belongs to the record whose 24 header bytes are `header`: its length
/// and CRC match.
#[wasm_bindgen(js_name = recordMatches)]
pub fn record_matches(header: &[u8], payload: &[u8]) -> Result<bool, StoreError> {
    Ok(parsed_header(header)?.matches(payload))
}

/// Whether the record (24 header bytes, payload) is erased: zeros with a matching CRC.
#[wasm_bindgen(js_name = recordIsErased)]
pub fn record_is_erased(header: &[u8], payload: &[u8]) -> Result<bool, StoreError> {
    Ok(parsed_header(header)?.is_erased(payload))
}

/// The bytes that erase the record whose 24 header bytes are `header`, to write at record
/// offset 20: the CRC over the header and zeros, then `len` zeros.
#[wasm_bindgen(js_name = erasePatch)]
pub fn erase_patch(header: &[u8]) -> Result<Vec<u8>, StoreError> {
    let h = parsed_header(header)?;
    if h.len > lf::MAX_RECORD_LEN {
        return Err(StoreError::malformed(
            "record length past the largest record",
        ));
    }
    Ok(h.erase_patch())
}

/// A snapshot file: the 32-byte header and the snapshot's canonical CBOR.
#[wasm_bindgen(js_name = encodeSnapshotFile)]
pub fn encode_snapshot_file(seq: f64, payload: &[u8]) -> Result<Vec<u8>, StoreError> {
    Ok(lf::encode_snapshot_file(uint(seq, "seq")?, payload))
}

/// The most bytes a snapshot file may have (`export::MAX_SNAPSHOT_FILE`): a store reads no
/// larger one, and refuses it as damaged before reading it.
#[wasm_bindgen(js_name = maxSnapshotFileBytes)]
pub fn max_snapshot_file_bytes() -> f64 {
    num(mwp_core::export::MAX_SNAPSHOT_FILE)
}

/// Checks a snapshot file's frame: `{seq, payload}`; throws `LOG_CORRUPT` whose message
/// says what is wrong.
#[wasm_bindgen(js_name = decodeSnapshotFile)]
pub fn decode_snapshot_file(bytes: &[u8]) -> Result<JsValue, StoreError> {
    let (seq, payload) = lf::decode_snapshot_file(bytes).map_err(Error::corrupt)?;
    let obj = js_sys::Object::new();
    set(&obj, "seq", num(seq).into());
    set(&obj, "payload", js_sys::Uint8Array::from(payload).into());
    Ok(obj.into())
}

/// What `new LogScanner(spec)` takes.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SpecJs {
    name: String,
    file_len: u64,
    first_seq: u64,
    contiguous: bool,
    may_be_torn: bool,
    #[serde(default)]
    reserve: bool,
    #[serde(default)]
    erased: Vec<(u64, u32, u32)>,
    #[serde(default)]
    chunk: Option<usize>,
}

/// How a scan ended, as JavaScript sees it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EndJs {
    end: u64,
    last_seq: u64,
    torn: Option<u64>,
    reserved: u64,
}

/// The records of one log file, checked, and where the good ones end (the core's
/// `Scanner`): the host reads the bytes it asks for and feeds them in.
///
/// ```js
/// const sc = new LogScanner({ name, fileLen, firstSeq, contiguous, mayBeTorn, reserve, erased });
/// let buf = new Uint8Array(0), bufStart = 0;
/// for (;;) {
///   const recs = sc.feed(buf, bufStart); // 6 numbers per good record
///   // … visit them (payloads are subarrays of buf) …
///   const end = sc.end();
///   if (end !== undefined) break;
///   if (sc.needAt >= 0) { bufStart = sc.needAt; buf = await read(bufStart, sc.needLen); }
/// }
/// ```
#[wasm_bindgen]
pub struct LogScanner {
    name: String,
    scanner: Scanner,
    erased: BTreeMap<u64, Erased>,
    need: Option<lf::Need>,
    end: Option<ScanEnd>,
}

#[wasm_bindgen]
impl LogScanner {
    /// A scan of file `name` (for errors) of `fileLen` bytes after its header: records from
    /// seq `firstSeq`, following each other (`contiguous`: segments) or not (the overlay);
    /// `mayBeTorn`: damage at the end may be a torn tail; `reserve`: the file may end in
    /// zeros reserved for appends; `erased`: `[seq, origLen, origCrc]` of each redacted
    /// record (from the overlay); `chunk`: the least number of bytes to ask for (1 MiB).
    #[wasm_bindgen(constructor)]
    pub fn new(spec: JsValue) -> Result<LogScanner, StoreError> {
        let s: SpecJs = from_js(spec, "scan spec")?;
        let mut scanner = Scanner::new(lf::ScanSpec {
            file_len: s.file_len,
            first_seq: s.first_seq,
            contiguous: s.contiguous,
            may_be_torn: s.may_be_torn,
            reserve: s.reserve,
        });
        if let Some(chunk) = s.chunk {
            scanner = scanner.with_chunk(chunk);
        }
        let erased = s
            .erased
            .into_iter()
            .map(|(seq, len, crc)| (seq, Erased { len, crc }))
            .collect();
        Ok(LogScanner {
            name: s.name,
            need: Some(scanner.first_need()),
            scanner,
            erased,
            end: None,
        })
    }

    /// Scans on with `buf`, the file's bytes from offset `bufStart` (what the last `needAt`,
    /// `needLen` asked for, read afresh from the file). Returns the good records found, six
    /// numbers each: offset, seq, batch, payload length, CRC, erasure (0 none, 1 pending, 2
    /// done); the payload of one is `buf.subarray(offset - bufStart + 24)`, its length long.
    /// Then `end()` says how the scan ended, or `needAt` which bytes to read next (−1: call
    /// `feed` again). Damage the tail rule does not explain throws `LOG_CORRUPT` naming the
    /// file and offset, once the records before it were handed out.
    pub fn feed(&mut self, buf: &[u8], buf_start: f64) -> Result<Vec<f64>, StoreError> {
        let start = uint(buf_start, "bufStart")?;
        self.need = None;
        let erased = &self.erased;
        let lookup = |seq: u64| erased.get(&seq).copied();
        let mut out = Vec::new();
        loop {
            match self.scanner.step(buf, start, &lookup) {
                Step::Record(r) => out.extend([
                    num(r.offset),
                    num(r.header.seq),
                    num(r.header.batch),
                    f64::from(r.header.len),
                    f64::from(r.header.crc),
                    match r.erasure {
                        Erasure::None => 0.0,
                        Erasure::Pending => 1.0,
                        Erasure::Done => 2.0,
                    },
                ]),
                Step::Need(n) => {
                    self.need = Some(n);
                    return Ok(out);
                }
                Step::End(end) => {
                    self.end = Some(end);
                    return Ok(out);
                }
                // The records before the damage first: the next call throws.
                Step::Corrupt(_) if !out.is_empty() => return Ok(out),
                Step::Corrupt(d) => return Err(StoreError(d.into_error(&self.name))),
            }
        }
    }

    /// Offset of the bytes to read before the next `feed`, or −1 when none are needed.
    #[wasm_bindgen(getter, js_name = needAt)]
    pub fn need_at(&self) -> f64 {
        self.need.map_or(-1.0, |n| num(n.at))
    }

    /// Number of bytes to read at `needAt` (0 when none are needed).
    #[wasm_bindgen(getter, js_name = needLen)]
    pub fn need_len(&self) -> f64 {
        self.need.map_or(0.0, |n| n.len as f64)
    }

    /// How the scan ended, `{end, lastSeq, torn (bytes or null), reserved}`, or `undefined`
    /// while it goes on.
    pub fn end(&self) -> Result<JsValue, StoreError> {
        match &self.end {
            None => Ok(JsValue::UNDEFINED),
            Some(e) => Ok(to_js(&EndJs {
                end: e.end,
                last_seq: e.last_seq,
                torn: e.torn,
                reserved: e.reserved,
            })?),
        }
    }
}
