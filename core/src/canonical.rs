//! Canonical CBOR: the one encoding that everything hashed or signed goes through.
//!
//! mwp uses the *core deterministic encoding* of RFC 8949 §4.2.1, restricted to the subset the
//! protocol needs: unsigned and negative integers, byte strings, text strings, arrays, maps,
//! `false`, `true` and `null`. Lengths are definite, integers and lengths take their shortest
//! form, and map keys are sorted by their encoded bytes with no duplicates. Floats, tags,
//! `undefined`, other simple values and indefinite lengths are refused.
//!
//! Serde types are turned into [`ciborium::Value`] and written here, so ciborium never decides
//! the byte layout. Decoding has two strictness levels:
//!
//! * [`Strictness::Canonical`] — stored logs and snapshots: any deviation from canonical form is
//!   an error (a stored record that is not canonical is corrupt).
//! * [`Strictness::Lenient`] — Commands arriving from outside: map order and integer widths may
//!   differ (the content is re-encoded canonically before it is hashed), but floats, tags,
//!   indefinite lengths and duplicate keys are still refused.

use ciborium::value::{Integer, Value};
use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Deepest nesting of arrays and maps accepted by the decoder.
pub const MAX_DEPTH: usize = 128;

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
    fn new(reason: impl Into<String>, offset: usize) -> Self {
        Self {
            reason: reason.into(),
            offset,
        }
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
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CanonError> {
    let value = Value::serialized(value).map_err(|e| CanonError::new(e.to_string(), 0))?;
    encode_value(&value)
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

/// Decodes bytes into a serde value, checking them at the given strictness first.
pub fn from_slice<T: DeserializeOwned>(
    bytes: &[u8],
    strictness: Strictness,
) -> Result<T, CanonError> {
    let value = decode(bytes, strictness)?;
    value
        .deserialized()
        .map_err(|e| CanonError::new(e.to_string(), 0))
}

/// Decodes one CBOR data item that must span the whole input.
pub fn decode(bytes: &[u8], strictness: Strictness) -> Result<Value, CanonError> {
    let mut reader = Reader {
        bytes,
        pos: 0,
        strictness,
    };
    let value = reader.item(0)?;
    if reader.pos != bytes.len() {
        return Err(CanonError::new(
            "trailing bytes after the data item",
            reader.pos,
        ));
    }
    Ok(value)
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
        Value::Integer(i) => write_integer(out, *i),
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

fn write_integer(out: &mut Vec<u8>, i: Integer) -> Result<(), CanonError> {
    let n = i128::from(i);
    if n >= 0 {
        let arg = u64::try_from(n).map_err(|_| CanonError::new("integer out of range", 0))?;
        write_head(out, 0, arg);
    } else {
        let arg = u64::try_from(-1 - n).map_err(|_| CanonError::new("integer out of range", 0))?;
        write_head(out, 1, arg);
    }
    Ok(())
}

fn write_map(out: &mut Vec<u8>, entries: &[(Value, Value)]) -> Result<(), CanonError> {
    let mut encoded: Vec<(Vec<u8>, &Value)> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        let mut key = Vec::with_capacity(16);
        write_value(&mut key, k)?;
        encoded.push((key, v));
    }
    encoded.sort_by(|a, b| a.0.cmp(&b.0));
    if encoded.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(CanonError::new("duplicate map key", 0));
    }
    write_head(out, 5, encoded.len() as u64);
    for (key, v) in encoded {
        out.extend_from_slice(&key);
        write_value(out, v)?;
    }
    Ok(())
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    strictness: Strictness,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], CanonError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| CanonError::new("unexpected end of input", self.pos))?;
        let slice = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(slice)
    }

    /// Reads an initial byte's argument; returns (major, argument).
    fn head(&mut self) -> Result<(u8, u64), CanonError> {
        let start = self.pos;
        let initial = self.take(1)?[0];
        let major = initial >> 5;
        let info = initial & 0x1f;
        let arg = match info {
            0..=23 => u64::from(info),
            24 => u64::from(self.take(1)?[0]),
            25 => u64::from(u16::from_be_bytes([self.take(1)?[0], self.take(1)?[0]])),
            26 => {
                let b = self.take(4)?;
                u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            }
            27 => {
                let b = self.take(8)?;
                u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
            }
            31 => return Err(CanonError::new("indefinite lengths are not allowed", start)),
            _ => return Err(CanonError::new("reserved additional information", start)),
        };
        if major == 7 {
            return Ok((major, u64::from(info)));
        }
        let shortest = match info {
            24 => arg >= 24,
            25 => arg > u64::from(u8::MAX),
            26 => arg > u64::from(u16::MAX),
            27 => arg > u64::from(u32::MAX),
            _ => true,
        };
        if !shortest && self.strictness == Strictness::Canonical {
            return Err(CanonError::new(
                "integer or length not in shortest form",
                start,
            ));
        }
        Ok((major, arg))
    }

    fn len(&mut self, arg: u64, start: usize) -> Result<usize, CanonError> {
        let n = usize::try_from(arg).map_err(|_| CanonError::new("length too large", start))?;
        if n > self.bytes.len() - self.pos {
            return Err(CanonError::new("length runs past the end of input", start));
        }
        Ok(n)
    }

    fn item(&mut self, depth: usize) -> Result<Value, CanonError> {
        if depth > MAX_DEPTH {
            return Err(CanonError::new("nested too deeply", self.pos));
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
                let n = self.len(arg, start)?;
                Ok(Value::Bytes(self.take(n)?.to_vec()))
            }
            3 => {
                let n = self.len(arg, start)?;
                let raw = self.take(n)?;
                let text = std::str::from_utf8(raw)
                    .map_err(|_| CanonError::new("text string is not valid UTF-8", start))?;
                Ok(Value::Text(text.to_owned()))
            }
            4 => {
                // Each item takes at least one byte: a length beyond the input is malformed.
                let n = self.len(arg, start)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.item(depth + 1)?);
                }
                Ok(Value::Array(items))
            }
            5 => {
                let n = self.len(arg, start)?;
                let mut entries = Vec::with_capacity(n);
                let mut keys: Vec<&[u8]> = Vec::with_capacity(n);
                let mut key_spans = Vec::with_capacity(n);
                for _ in 0..n {
                    let key_start = self.pos;
                    let key = self.item(depth + 1)?;
                    key_spans.push((key_start, self.pos));
                    let value = self.item(depth + 1)?;
                    entries.push((key, value));
                }
                for &(a, b) in &key_spans {
                    keys.push(&self.bytes[a..b]);
                }
                self.check_keys(&keys, &key_spans)?;
                Ok(Value::Map(entries))
            }
            6 => Err(CanonError::new("tags are not allowed", start)),
            _ => match arg {
                20 => Ok(Value::Bool(false)),
                21 => Ok(Value::Bool(true)),
                22 => Ok(Value::Null),
                25..=27 => Err(CanonError::new("floats are not allowed", start)),
                _ => Err(CanonError::new(
                    "only false, true and null simple values are allowed",
                    start,
                )),
            },
        }
    }

    fn check_keys(&self, keys: &[&[u8]], spans: &[(usize, usize)]) -> Result<(), CanonError> {
        match self.strictness {
            Strictness::Canonical => {
                for (i, w) in keys.windows(2).enumerate() {
                    if w[0] == w[1] {
                        return Err(CanonError::new("duplicate map key", spans[i + 1].0));
                    }
                    if w[0] > w[1] {
                        return Err(CanonError::new(
                            "map keys not in canonical order",
                            spans[i + 1].0,
                        ));
                    }
                }
            }
            Strictness::Lenient => {
                // Keys are compared by their canonical re-encoding, so `1` written in two
                // widths still counts as a duplicate.
                let mut canon: Vec<(Vec<u8>, usize)> = Vec::with_capacity(keys.len());
                for (i, raw) in keys.iter().enumerate() {
                    let v = decode(raw, Strictness::Lenient)?;
                    canon.push((encode_value(&v)?, spans[i].0));
                }
                canon.sort();
                if let Some(w) = canon.windows(2).find(|w| w[0].0 == w[1].0) {
                    return Err(CanonError::new("duplicate map key", w[1].1));
                }
            }
        }
        Ok(())
    }
}
