//! Canonical CBOR: the one encoding that everything hashed or signed goes through.
//!
//! mwp uses the *core deterministic encoding* of RFC 8949 §4.2.1, restricted to the subset the
//! protocol needs: unsigned and negative integers, byte strings, text strings, arrays, maps,
//! `false`, `true` and `null`. Lengths are definite, integers and lengths take their shortest
//! form, and map keys are sorted by their encoded bytes with no duplicates. Floats, tags,
//! `undefined`, other simple values and indefinite lengths are refused.
//!
//! Serde types are written by a serializer of this module straight into bytes, so ciborium never
//! decides the byte layout. Its output is byte-for-byte what [`encode_value`] gives for the
//! [`ciborium::Value`] that `Value::serialized` makes of the same input (the test suite checks
//! this), so [`to_vec`] and [`encode_value`] agree on every value but one: an
//! [`crate::opaque::Opaque`] holds its canonical bytes, which this encoder writes as they are
//! (the newtype `CANONICAL_ITEM`), where ciborium would see a byte string. Decoding has two
//! strictness levels:
//!
//! * [`Strictness::Canonical`] — stored logs and snapshots: any deviation from canonical form is
//!   an error (a stored record that is not canonical is corrupt).
//! * [`Strictness::Lenient`] — Commands arriving from outside: map order and integer widths may
//!   differ (the content is re-encoded canonically before it is hashed), but floats, tags,
//!   indefinite lengths and duplicate keys are still refused.
//!
//! Every decoder here (the slice decoder and hand-written readers of `de.rs`, the streaming
//! decoder of `stream.rs`, and [`decode`] to a [`Value`]) reads the one grammar of `grammar.rs`:
//! the head and its shortest form, lengths, UTF-8, simple values, key order, and the words of
//! every refusal are decided there.

use std::cmp::Ordering;
use std::fmt::Display;

mod de;
mod grammar;

use grammar::{Input, Reader};
mod json;
mod order;
mod stream;

pub(crate) use de::{
    decode_struct, map_entries, missing_field, read_whole, refused, some, unknown_field,
    unknown_variant, Decode, DecodeFields, Decoder, Entries, Fields, Items, KeySpans, Tagged,
    ITEM_BYTES,
};
#[cfg(test)]
pub(crate) use de::{every_byte_reads_as_the_derive, with_unknown_key};
pub use json::text_refusal;
pub(crate) use json::{
    canonical_from, opaque_from, opaque_from_cbor, opaque_from_json, read_json, text_fault, Found,
    TextFault, CANONICAL_ITEM, DUPLICATE_KEY,
};
pub(crate) use order::{
    codec_struct, declared_order, encode_struct, in_key_order, key_order, tag_first_order, ById,
    BySeq, EncodeFields,
};
pub(crate) use stream::StreamDecoder;
#[cfg(test)]
pub(crate) use stream::{every_flip_reads_alike, Pieces, BY_SLICE};

use ciborium::value::{Integer, Value};
use serde::de::DeserializeOwned;
use serde::ser::{self, Serialize};
use sha2::{Digest, Sha256};

/// Deepest nesting of arrays and maps accepted by the decoder.
///
/// Arrays and maps nest at most this deep: a data item may sit inside at most this many of
/// them, and an array or map inside this many is refused even when it is empty (the top-level
/// item is at depth 0). Every reader (to a [`Value`], typed, streamed) draws the line at the
/// same place. The encoder does not check depth, so a value nested deeper than this encodes
/// but does not decode.
pub const MAX_DEPTH: usize = 128;

/// Most elements the decoder reserves room for up front, whatever length an array or map
/// claims: a short hostile input cannot make it allocate much more than its own size.
const PREALLOC_LIMIT: usize = 256;

/// Why a value could not be encoded or decoded canonically.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("canonical CBOR: {reason} (at byte {offset})")]
pub struct CanonError {
    /// What was wrong.
    pub reason: String,
    /// Byte offset in the input where it was found (0 when encoding).
    pub offset: usize,
}

impl CanonError {
    pub(crate) fn new(reason: impl Into<String>, offset: usize) -> Self {
        Self {
            reason: reason.into(),
            offset,
        }
    }
}

/// Lets [`to_vec`]'s serializer report errors raised by `Serialize` implementations.
impl ser::Error for CanonError {
    fn custom<T: Display>(msg: T) -> Self {
        Self::new(msg.to_string(), 0)
    }
}

/// How strictly [`decode`] checks its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    /// Only canonical bytes are accepted.
    Canonical,
    /// Unsorted map keys and over-long integer forms are accepted; everything else is refused.
    Lenient,
}

/// Encodes a serde value as canonical CBOR.
///
/// The bytes are identical to `encode_value(&Value::serialized(value)?)` (opaque values aside:
/// they are written as the canonical bytes they hold), but are written directly, without
/// building a [`ciborium::Value`] tree first. Floats, tags (including
/// integers beyond the 64-bit CBOR range, which ciborium would turn into bignum tags) and
/// duplicate map keys are refused.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CanonError> {
    append(Vec::with_capacity(256), value)
}

/// Appends the canonical CBOR of a serde value to `out` (what [`to_vec`] gives, after the
/// bytes `out` already holds), for an encoder that writes the rest of a value by hand.
pub fn append<T: Serialize + ?Sized>(out: Vec<u8>, value: &T) -> Result<Vec<u8>, CanonError> {
    let mut encoder = Encoder::new(out);
    value.serialize(&mut encoder)?;
    Ok(encoder.out)
}

/// How many maps of `value` the encoder had to put in order: none, for the types that hand
/// it their entries in canonical order ([`encode_struct!`], [`ById`]).
#[cfg(test)]
pub(crate) fn reorders<T: Serialize + ?Sized>(value: &T) -> Result<usize, CanonError> {
    let mut encoder = Encoder::new(Vec::new());
    value.serialize(&mut encoder)?;
    Ok(encoder.reordered)
}

/// SHA-256 of the canonical CBOR of a serde value.
pub fn hash<T: Serialize + ?Sized>(value: &T) -> Result<[u8; 32], CanonError> {
    Ok(sha256(&to_vec(value)?))
}

/// SHA-256 of some bytes.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Encodes a [`ciborium::Value`] as canonical CBOR.
pub fn encode_value(value: &Value) -> Result<Vec<u8>, CanonError> {
    let mut out = Vec::with_capacity(128);
    write_value(&mut out, value)?;
    Ok(out)
}

/// Decodes bytes into a serde value, checking them at the given strictness.
///
/// Canonical input is read straight into `T` in one pass (the path every stored event and
/// snapshot takes). Lenient input that is canonical takes the same pass; other lenient input
/// is decoded and checked into a [`Value`] first, written again in canonical form and read by
/// the same one-pass reader: one reader of `T` for both strictnesses, not a second one over
/// the value tree (173 KB of the WebAssembly module). A refusal of the rewritten bytes names
/// no offset (`at byte 0`): its offsets are in bytes the sender did not send.
pub fn from_slice<T: DeserializeOwned>(
    bytes: &[u8],
    strictness: Strictness,
) -> Result<T, CanonError> {
    let direct = de::from_canonical(bytes);
    if strictness == Strictness::Canonical || direct.is_ok() {
        return direct;
    }
    let value = decode(bytes, strictness)?;
    let rewritten = encode_value(&value)?;
    if rewritten == bytes {
        // Canonical input the type refused: the direct reader's error names the right offset.
        return direct;
    }
    de::from_canonical(&rewritten).map_err(|e| CanonError::new(e.reason, 0))
}

/// Decodes one CBOR data item that must span the whole input.
pub fn decode(bytes: &[u8], strictness: Strictness) -> Result<Value, CanonError> {
    let mut reader = Reader::new(bytes, strictness);
    let value = reader.item(0)?;
    reader.end()?;
    Ok(value)
}

/// Writes a text string.
pub(crate) fn write_text(out: &mut Vec<u8>, s: &str) {
    write_head(out, 3, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Where the data item starting at `start` ends, found by reading heads only: nothing is
/// checked beyond what walking needs (no key order, UTF-8 or shortest forms), so this only
/// locates items in bytes that are decoded and checked in full anyway. `None` when the bytes
/// do not hold a whole item or hold a tag or float.
pub(crate) fn item_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut pos = start;
    // Items still to be read; each takes at least one byte, so more than the bytes left
    // cannot be whole.
    let mut pending: u64 = 1;
    while pending > 0 {
        pending -= 1;
        let (major, arg, next) = walk_head(bytes, pos)?;
        pos = next;
        match major {
            0 | 1 => {}
            2 | 3 => {
                let n = usize::try_from(arg).ok()?;
                if n > bytes.len() - pos {
                    return None;
                }
                pos += n;
            }
            4 => pending = pending.checked_add(arg)?,
            5 => pending = pending.checked_add(arg.checked_mul(2)?)?,
            7 if matches!(arg, 20..=22) => {}
            _ => return None,
        }
        if pending > (bytes.len() - pos) as u64 {
            return None;
        }
    }
    Some(pos)
}

/// The head at `pos` as [`item_end`] reads it, leniently: its major type, its argument (for
/// major type 7, the additional information) and where it ends; `None` where the reader's
/// head would be an error (input ending early, reserved or indefinite additional
/// information). It builds no error, so walking millions of heads costs only the reading;
/// the argument is decoded where the decoders' heads decode theirs ([`grammar::argument`]).
#[inline]
fn walk_head(bytes: &[u8], pos: usize) -> Option<(u8, u64, usize)> {
    let initial = *bytes.get(pos)?;
    let major = initial >> 5;
    let info = initial & 0x1f;
    let (arg, size) = grammar::argument(info, bytes.get(pos + 1..)?)?;
    let arg = if major == 7 { u64::from(info) } else { arg };
    Some((major, arg, pos + 1 + size))
}

/// Writes a major type and argument in shortest form.
fn write_head(out: &mut Vec<u8>, major: u8, arg: u64) {
    let m = major << 5;
    if arg < 24 {
        out.push(m | arg as u8);
    } else if arg <= u64::from(u8::MAX) {
        out.push(m | 24);
        out.push(arg as u8);
    } else if arg <= u64::from(u16::MAX) {
        out.push(m | 25);
        out.extend_from_slice(&(arg as u16).to_be_bytes());
    } else if arg <= u64::from(u32::MAX) {
        out.push(m | 26);
        out.extend_from_slice(&(arg as u32).to_be_bytes());
    } else {
        out.push(m | 27);
        out.extend_from_slice(&arg.to_be_bytes());
    }
}

fn write_value(out: &mut Vec<u8>, value: &Value) -> Result<(), CanonError> {
    match value {
        Value::Integer(i) => write_i128(out, i128::from(*i)),
        Value::Bytes(b) => {
            write_head(out, 2, b.len() as u64);
            out.extend_from_slice(b);
            Ok(())
        }
        Value::Text(s) => {
            write_head(out, 3, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
            Ok(())
        }
        Value::Array(items) => {
            write_head(out, 4, items.len() as u64);
            items.iter().try_for_each(|item| write_value(out, item))
        }
        Value::Map(entries) => write_map(out, entries),
        Value::Bool(false) => {
            out.push(0xf4);
            Ok(())
        }
        Value::Bool(true) => {
            out.push(0xf5);
            Ok(())
        }
        Value::Null => {
            out.push(0xf6);
            Ok(())
        }
        Value::Float(_) => Err(CanonError::new("floats are not allowed", 0)),
        Value::Tag(..) => Err(CanonError::new("tags are not allowed", 0)),
        _ => Err(CanonError::new("unsupported CBOR value", 0)),
    }
}

/// Writes an integer of the CBOR range -2^64 ..= 2^64-1 as major type 0 or 1.
fn write_i128(out: &mut Vec<u8>, n: i128) -> Result<(), CanonError> {
    if n >= 0 {
        let arg = u64::try_from(n).map_err(|_| CanonError::new("integer out of range", 0))?;
        write_head(out, 0, arg);
    } else {
        let arg = u64::try_from(-1 - n).map_err(|_| CanonError::new("integer out of range", 0))?;
        write_head(out, 1, arg);
    }
    Ok(())
}

/// The encoder's refusal of a key given twice in one map, `key` its canonical encoding: named
/// when it is text (what every map the core writes is keyed by), since the encoder has no
/// offset in anything the caller sent.
fn duplicate_key(key: &[u8]) -> CanonError {
    let mut r = Reader::new(key, Strictness::Canonical);
    let text = match r.head() {
        Ok((3, len)) => usize::try_from(len)
            .ok()
            .and_then(|len| r.take(len).ok())
            .and_then(|text| std::str::from_utf8(text).ok()),
        _ => None,
    };
    match text {
        Some(text) => CanonError::new(format!("{DUPLICATE_KEY} `{text}`"), 0),
        None => CanonError::new(DUPLICATE_KEY, 0),
    }
}

fn write_map(out: &mut Vec<u8>, entries: &[(Value, Value)]) -> Result<(), CanonError> {
    let mut encoded: Vec<(Vec<u8>, &Value)> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        let mut key = Vec::with_capacity(16);
        write_value(&mut key, k)?;
        encoded.push((key, v));
    }
    encoded.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(w) = encoded.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(duplicate_key(&w[0].0));
    }
    write_head(out, 5, encoded.len() as u64);
    for (key, v) in encoded {
        out.extend_from_slice(&key);
        write_value(out, v)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Direct serde serializer
// ---------------------------------------------------------------------------------------------

/// Serde serializer that writes canonical CBOR into one buffer.
///
/// Arrays and maps write their head for the length serde announces and correct it at the end
/// if the number of elements differs (or was not announced). Map entries are written in the
/// order serde gives them; each entry's key and value positions are kept on a stack shared by
/// all open maps, and at the end of a map its entries are sorted by their encoded key bytes in
/// place, which is nearly free when they already are (as struct fields often are). Positions
/// recorded by an outer map always lie before the inner construct being finished, so rewriting
/// inside the inner one never invalidates them.
struct Encoder {
    out: Vec<u8>,
    /// Entries of every map still open, innermost last.
    entries: Vec<Entry>,
    /// Reused buffers for reordering map entries: a [`Span`] for each entry, and the entries'
    /// bytes in their new order.
    spans: Vec<Span>,
    scratch: Vec<u8>,
    /// Maps whose entries came out of order and were moved into place.
    reordered: usize,
    /// Set by [`CANONICAL_ITEM`]: the next byte string is an item already canonical, written
    /// as it is.
    raw: bool,
    /// An opaque value read from JSON (see [`opaque_from`]): a float is written as a CBOR
    /// double and noted in `float`.
    json: bool,
    float: bool,
}

/// Where one map entry starts in the output and where its value starts.
#[derive(Clone, Copy)]
struct Entry {
    key: usize,
    value: usize,
}

impl Encoder {
    /// An encoder that writes after the bytes `out` holds.
    fn new(out: Vec<u8>) -> Self {
        Self {
            out,
            entries: Vec::with_capacity(32),
            spans: Vec::new(),
            scratch: Vec::new(),
            reordered: 0,
            raw: false,
            json: false,
            float: false,
        }
    }

    /// An encoder for an opaque value read from JSON (see [`Encoder::json`]).
    fn for_json() -> Self {
        let mut encoder = Self::new(Vec::with_capacity(64));
        encoder.entries = Vec::new();
        encoder.json = true;
        encoder
    }

    /// Writes a float of an opaque value read from JSON, or refuses it.
    fn float(&mut self, v: f64) -> Result<(), CanonError> {
        if !self.json {
            return Err(CanonError::new("floats are not allowed", 0));
        }
        if !v.is_finite() {
            // As `serde_json::Value` holds it.
            self.out.push(0xf6);
            return Ok(());
        }
        self.float = true;
        self.out.push(0xfb);
        self.out.extend_from_slice(&v.to_be_bytes());
        Ok(())
    }

    fn text(&mut self, s: &str) {
        write_text(&mut self.out, s);
    }

    /// Writes a head for an announced length and returns what [`Encoder::fix_head`] needs.
    fn open(&mut self, major: u8, announced: Option<usize>) -> Open {
        let pos = self.out.len();
        let announced = announced.unwrap_or(0) as u64;
        write_head(&mut self.out, major, announced);
        Open {
            major,
            pos,
            len: self.out.len() - pos,
            announced,
        }
    }

    /// Rewrites the head written by [`Encoder::open`] if the real count differs.
    fn fix_head(&mut self, open: &Open, count: u64) {
        if count != open.announced {
            let mut head = Vec::with_capacity(9);
            write_head(&mut head, open.major, count);
            self.out.splice(open.pos..open.pos + open.len, head);
        }
    }

    /// Starts the single-entry map `{variant: …}` that ciborium makes of enum variants.
    fn variant_key(&mut self, variant: &str) {
        self.out.push(0xa1);
        self.text(variant);
    }

    /// Sorts the entries of the map opened at `open`, whose entries start at `base` on the entry
    /// stack, checks there are no duplicate keys, and fixes the head.
    fn close_map(&mut self, open: &Open, base: usize) -> Result<(), CanonError> {
        let end = self.out.len();
        let body = open.pos + open.len;
        let entries = &self.entries[base..];
        let key_of = |e: &Entry| &self.out[e.key..e.value];
        let mut sorted = true;
        for w in entries.windows(2) {
            match key_of(&w[0]).cmp(key_of(&w[1])) {
                Ordering::Less => {}
                Ordering::Equal => return Err(duplicate_key(key_of(&w[0]))),
                Ordering::Greater => {
                    sorted = false;
                    break;
                }
            }
        }
        let count = entries.len() as u64;
        if !sorted {
            self.reordered += 1;
            let mut spans = std::mem::take(&mut self.spans);
            spans.clear();
            let out = &self.out;
            spans.extend(entries.iter().enumerate().map(|(i, e)| {
                let next = entries.get(i + 1).map_or(end, |n| n.key);
                Span::new(out, e.key, e.value, next)
            }));
            let key = |s: &Span| &out[s.key..s.value];
            spans.sort_unstable_by(|a, b| a.prefix.cmp(&b.prefix).then_with(|| key(a).cmp(key(b))));
            if let Some(w) = spans
                .windows(2)
                .find(|w| w[0].prefix == w[1].prefix && key(&w[0]) == key(&w[1]))
            {
                return Err(duplicate_key(key(&w[0])));
            }
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.clear();
            // One allocation for the whole body, not a doubling per entry.
            scratch.reserve(end - body);
            for span in &spans {
                scratch.extend_from_slice(&self.out[span.key..span.end]);
            }
            self.out[body..end].copy_from_slice(&scratch);
            self.scratch = scratch;
            self.spans = spans;
        }
        self.entries.truncate(base);
        self.fix_head(open, count);
        Ok(())
    }

    fn map(&mut self, announced: Option<usize>) -> MapEncoder<'_> {
        let open = self.open(5, announced);
        let base = self.entries.len();
        MapEncoder {
            enc: self,
            open,
            base,
            key_pending: false,
        }
    }

    fn seq(&mut self, announced: Option<usize>) -> SeqEncoder<'_> {
        let open = self.open(4, announced);
        SeqEncoder {
            enc: self,
            open,
            count: 0,
        }
    }
}

/// One map entry being sorted.
struct Span {
    /// The first 8 bytes of the encoded key, zero-padded, big-endian: if two prefixes differ,
    /// they order the keys as their full bytes would, so most comparisons are one integer
    /// comparison.
    prefix: u64,
    key: usize,
    value: usize,
    end: usize,
}

impl Span {
    fn new(out: &[u8], key: usize, value: usize, end: usize) -> Self {
        let mut first = [0u8; 8];
        let n = (value - key).min(8);
        first[..n].copy_from_slice(&out[key..key + n]);
        Self {
            prefix: u64::from_be_bytes(first),
            key,
            value,
            end,
        }
    }
}

/// A head written for an announced length.
struct Open {
    major: u8,
    pos: usize,
    len: usize,
    announced: u64,
}

/// Array being written (sequences, tuples, tuple structs and tuple variants).
struct SeqEncoder<'a> {
    enc: &'a mut Encoder,
    open: Open,
    count: u64,
}

impl SeqEncoder<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CanonError> {
        self.count += 1;
        value.serialize(&mut *self.enc)
    }

    fn finish(self) -> Result<(), CanonError> {
        self.enc.fix_head(&self.open, self.count);
        Ok(())
    }
}

/// Map being written (maps, structs and struct variants).
struct MapEncoder<'a> {
    enc: &'a mut Encoder,
    open: Open,
    base: usize,
    key_pending: bool,
}

impl MapEncoder<'_> {
    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), CanonError> {
        let start = self.enc.out.len();
        self.enc.text(key);
        self.enc.entries.push(Entry {
            key: start,
            value: self.enc.out.len(),
        });
        value.serialize(&mut *self.enc)
    }

    fn finish(self) -> Result<(), CanonError> {
        if self.key_pending {
            return Err(CanonError::new("map key without a value", 0));
        }
        self.enc.close_map(&self.open, self.base)
    }
}

type Res = Result<(), CanonError>;

impl<'a> ser::Serializer for &'a mut Encoder {
    type Ok = ();
    type Error = CanonError;
    type SerializeSeq = SeqEncoder<'a>;
    type SerializeTuple = SeqEncoder<'a>;
    type SerializeTupleStruct = SeqEncoder<'a>;
    type SerializeTupleVariant = SeqEncoder<'a>;
    type SerializeMap = MapEncoder<'a>;
    type SerializeStruct = MapEncoder<'a>;
    type SerializeStructVariant = MapEncoder<'a>;

    fn serialize_bool(self, v: bool) -> Res {
        self.out.push(if v { 0xf5 } else { 0xf4 });
        Ok(())
    }

    fn serialize_i8(self, v: i8) -> Res {
        self.serialize_i64(i64::from(v))
    }

    fn serialize_i16(self, v: i16) -> Res {
        self.serialize_i64(i64::from(v))
    }

    fn serialize_i32(self, v: i32) -> Res {
        self.serialize_i64(i64::from(v))
    }

    fn serialize_i64(self, v: i64) -> Res {
        if v >= 0 {
            write_head(&mut self.out, 0, v.unsigned_abs());
        } else {
            // -1 - v == !v for two's complement, and is non-negative here.
            write_head(&mut self.out, 1, (!v).unsigned_abs());
        }
        Ok(())
    }

    fn serialize_i128(self, v: i128) -> Res {
        // ciborium turns integers beyond -2^64 ..= 2^64-1 into bignum tags.
        write_i128(&mut self.out, v)
            .map_err(|_| CanonError::new("tags are not allowed (integer beyond 64 bits)", 0))
    }

    fn serialize_u8(self, v: u8) -> Res {
        self.serialize_u64(u64::from(v))
    }

    fn serialize_u16(self, v: u16) -> Res {
        self.serialize_u64(u64::from(v))
    }

    fn serialize_u32(self, v: u32) -> Res {
        self.serialize_u64(u64::from(v))
    }

    fn serialize_u64(self, v: u64) -> Res {
        write_head(&mut self.out, 0, v);
        Ok(())
    }

    fn serialize_u128(self, v: u128) -> Res {
        let v = u64::try_from(v)
            .map_err(|_| CanonError::new("tags are not allowed (integer beyond 64 bits)", 0))?;
        self.serialize_u64(v)
    }

    fn serialize_f32(self, v: f32) -> Res {
        self.float(f64::from(v))
    }

    fn serialize_f64(self, v: f64) -> Res {
        self.float(v)
    }

    fn serialize_char(self, v: char) -> Res {
        let mut buf = [0u8; 4];
        self.text(v.encode_utf8(&mut buf));
        Ok(())
    }

    fn serialize_str(self, v: &str) -> Res {
        self.text(v);
        Ok(())
    }

    fn serialize_bytes(self, v: &[u8]) -> Res {
        if std::mem::take(&mut self.raw) {
            self.out.extend_from_slice(v);
            return Ok(());
        }
        write_head(&mut self.out, 2, v.len() as u64);
        self.out.extend_from_slice(v);
        Ok(())
    }

    fn serialize_none(self) -> Res {
        self.out.push(0xf6);
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Res {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Res {
        self.out.push(0xf6);
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Res {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Res {
        self.text(variant);
        Ok(())
    }

    /// A newtype named `CANONICAL_ITEM` holds the bytes of an item already canonical.
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, name: &'static str, value: &T) -> Res {
        self.raw = name == CANONICAL_ITEM;
        value.serialize(&mut *self)?;
        if std::mem::take(&mut self.raw) {
            return Err(CanonError::new("a canonical item must be bytes", 0));
        }
        Ok(())
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Res {
        // `ciborium::tag::Captured(None, v)` is how ciborium spells an untagged value.
        if (name, variant) != ("@@TAG@@", "@@UNTAGGED@@") {
            self.variant_key(variant);
        }
        value.serialize(self)
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<SeqEncoder<'a>, CanonError> {
        Ok(self.seq(len))
    }

    fn serialize_tuple(self, len: usize) -> Result<SeqEncoder<'a>, CanonError> {
        Ok(self.seq(Some(len)))
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<SeqEncoder<'a>, CanonError> {
        Ok(self.seq(Some(len)))
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<SeqEncoder<'a>, CanonError> {
        // ciborium's tag types (`Required`, `Accepted`, `Captured(Some(_), _)`) arrive here.
        if (name, variant) == ("@@TAG@@", "@@TAGGED@@") {
            return Err(CanonError::new("tags are not allowed", 0));
        }
        self.variant_key(variant);
        Ok(self.seq(Some(len)))
    }

    fn serialize_map(self, len: Option<usize>) -> Result<MapEncoder<'a>, CanonError> {
        Ok(self.map(len))
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<MapEncoder<'a>, CanonError> {
        Ok(self.map(Some(len)))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<MapEncoder<'a>, CanonError> {
        self.variant_key(variant);
        Ok(self.map(Some(len)))
    }

    fn collect_str<T: Display + ?Sized>(self, value: &T) -> Res {
        self.text(&value.to_string());
        Ok(())
    }

    fn is_human_readable(&self) -> bool {
        // As ciborium's `Value` serializer: types with a compact form use it.
        false
    }
}

/// The serde traits of an array being written: each element is written in turn, and the
/// head fixed at the end.
macro_rules! seq_encoder {
    ($($serialize:ident :: $element:ident),*) => {
        $(
            impl ser::$serialize for SeqEncoder<'_> {
                type Ok = ();
                type Error = CanonError;

                fn $element<T: Serialize + ?Sized>(&mut self, value: &T) -> Res {
                    self.element(value)
                }

                fn end(self) -> Res {
                    self.finish()
                }
            }
        )*
    };
}

seq_encoder!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for MapEncoder<'_> {
    type Ok = ();
    type Error = CanonError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Res {
        if self.key_pending {
            return Err(CanonError::new("map key without a value", 0));
        }
        let start = self.enc.out.len();
        key.serialize(&mut *self.enc)?;
        self.enc.entries.push(Entry {
            key: start,
            value: self.enc.out.len(),
        });
        self.key_pending = true;
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Res {
        if !self.key_pending {
            return Err(CanonError::new("map value without a key", 0));
        }
        self.key_pending = false;
        value.serialize(&mut *self.enc)
    }

    fn end(self) -> Res {
        self.finish()
    }
}

/// The serde traits of a struct being written: a map of its fields, put in order at the end.
macro_rules! struct_encoder {
    ($($serialize:ident),*) => {
        $(
            impl ser::$serialize for MapEncoder<'_> {
                type Ok = ();
                type Error = CanonError;

                fn serialize_field<T: Serialize + ?Sized>(
                    &mut self,
                    key: &'static str,
                    value: &T,
                ) -> Res {
                    self.field(key, value)
                }

                fn end(self) -> Res {
                    self.finish()
                }
            }
        )*
    };
}

struct_encoder!(SerializeStruct, SerializeStructVariant);

// ---------------------------------------------------------------------------------------------
// Decoding to a ciborium Value (the rules are grammar.rs's)
// ---------------------------------------------------------------------------------------------

impl Reader<'_> {
    /// Reads one data item into a [`Value`], `depth` arrays and maps deep.
    fn item(&mut self, depth: usize) -> Result<Value, CanonError> {
        if depth > MAX_DEPTH {
            return Err(grammar::Refusal::TooDeep.at(self.pos));
        }
        let start = self.pos;
        let (major, arg) = self.head()?;
        match major {
            0 => Ok(Value::Integer(arg.into())),
            1 => Ok(Value::Integer(
                Integer::try_from(-1 - i128::from(arg))
                    .map_err(|_| CanonError::new("negative integer out of range", start))?,
            )),
            2 => {
                let n = self.length(arg, start)?;
                Ok(Value::Bytes(self.take(n)?.to_vec()))
            }
            3 => {
                let n = self.length(arg, start)?;
                let text = grammar::utf8(self.take(n)?, start)?;
                Ok(Value::Text(text.to_owned()))
            }
            4 | 5 if depth >= MAX_DEPTH => Err(grammar::Refusal::TooDeep.at(start)),
            4 => {
                let n = self.length(arg, start)?;
                let mut items = Vec::with_capacity(n.min(PREALLOC_LIMIT));
                for _ in 0..n {
                    items.push(self.item(depth + 1)?);
                }
                Ok(Value::Array(items))
            }
            5 => {
                let n = self.length(arg, start)?;
                match self.strictness {
                    Strictness::Canonical => self.map_canonical(n, depth),
                    Strictness::Lenient => self.map_lenient(n, depth),
                }
            }
            6 => Err(grammar::Refusal::Tag.at(start)),
            _ => Ok(match grammar::simple(arg, start)? {
                Some(b) => Value::Bool(b),
                None => Value::Null,
            }),
        }
    }

    /// Reads `n` map entries whose keys must be strictly increasing in their (already
    /// canonical) encoded bytes: each key is compared with the previous one as it is read.
    fn map_canonical(&mut self, n: usize, depth: usize) -> Result<Value, CanonError> {
        let bytes = self.bytes;
        let mut entries = Vec::with_capacity(n.min(PREALLOC_LIMIT));
        let mut previous: Option<&[u8]> = None;
        for _ in 0..n {
            let key_start = self.pos;
            let key = self.item(depth + 1)?;
            let raw = &bytes[key_start..self.pos];
            if let Some(prev) = previous {
                grammar::key_order(prev, raw, key_start)?;
            }
            previous = Some(raw);
            let value = self.item(depth + 1)?;
            entries.push((key, value));
        }
        Ok(Value::Map(entries))
    }

    /// Reads `n` map entries in any order; keys are compared by their canonical re-encoding,
    /// so `1` written in two widths still counts as a duplicate.
    fn map_lenient(&mut self, n: usize, depth: usize) -> Result<Value, CanonError> {
        let mut entries = Vec::with_capacity(n.min(PREALLOC_LIMIT));
        let mut canon: Vec<(Vec<u8>, usize)> = Vec::with_capacity(n.min(PREALLOC_LIMIT));
        for _ in 0..n {
            let key_start = self.pos;
            let key = self.item(depth + 1)?;
            let encoded = encode_value(&key).map_err(|e| CanonError::new(e.reason, key_start))?;
            canon.push((encoded, key_start));
            let value = self.item(depth + 1)?;
            entries.push((key, value));
        }
        canon.sort_unstable();
        if let Some(w) = canon.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(CanonError::new("duplicate map key", w[1].1));
        }
        Ok(Value::Map(entries))
    }
}
