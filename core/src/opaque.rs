//! Opaque payloads (`title`, `spec`, `result`, `data`, `error`, `reason`, `resolution`,
//! `receipt`, `target`): arbitrary JSON, committed to the log through their own hashes so that
//! redaction can erase the value and keep every id and the chain verifiable (SPEC §3, §6).
//!
//! An [`Opaque`] keeps its value as canonical CBOR, the bytes it is hashed, signed and stored
//! as: reading a stored event copies them, hashing one is SHA-256 over them, writing one copies
//! them back. Its JSON form is made from those bytes when asked for, with each object's keys
//! in canonical order (docs/decisions.md, "Opaque values are kept as their canonical bytes").

use std::fmt;

use serde::de::{Deserialize, Deserializer};
use serde::ser::{self, Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

use crate::canonical::{self, CanonError};
use crate::crypto::Hash;
use crate::error::{Error, Result};

/// An opaque payload value: arbitrary JSON, held as its canonical CBOR.
///
/// A value read from JSON (a command's payload, a value an agent hands in) may hold what no
/// command may carry: floats, keys beginning with `$`, nesting deeper than [`MAX_DEPTH`].
/// [`validate`] refuses those with the payload's name; a float also keeps the value from being
/// hashed or written canonically. Everything read from canonical CBOR is canonical.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Opaque {
    /// Canonical CBOR of the value; a float is written as a CBOR double and flagged.
    bytes: Box<[u8]>,
    /// Whether `bytes` holds a float, which no canonical form may.
    float: bool,
}

/// The key of the marker that stands for an erased value: `{"$redacted": "<hash>"}`.
pub const REDACTED_KEY: &str = "$redacted";

/// Deepest nesting accepted in an opaque payload.
pub const MAX_DEPTH: usize = 64;

/// The canonical CBOR of a redaction marker up to its hash's text: a map of one entry, the key
/// `$redacted`.
const MARKER_KEY: &[u8] = b"\xa1\x69$redacted";

/// The head of the marker's hash text: a text of 64 bytes.
const HASH_TEXT_HEAD: [u8; 2] = [0x78, 0x40];

impl Opaque {
    /// JSON `null`.
    pub fn null() -> Self {
        Self::from_canonical(&[0xf6])
    }

    /// A JSON string.
    pub fn text(s: &str) -> Self {
        let mut bytes = Vec::with_capacity(s.len() + 9);
        canonical::write_text(&mut bytes, s);
        Self::from_parts(bytes, false)
    }

    /// Bytes a reader has already checked as one canonical data item of JSON's types.
    pub(crate) fn from_canonical(bytes: &[u8]) -> Self {
        Self {
            bytes: bytes.into(),
            float: false,
        }
    }

    /// Reads one opaque value from canonical CBOR that must span `bytes`, checked as a stored
    /// value is (canonical form, JSON's types only).
    pub fn from_cbor(bytes: &[u8]) -> std::result::Result<Self, CanonError> {
        canonical::opaque_from_cbor(bytes)
    }

    /// The value's canonical CBOR (with a float, as a CBOR double: see [`Opaque`]).
    pub fn as_cbor(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether the value holds a float, which no command may carry.
    pub fn has_float(&self) -> bool {
        self.float
    }

    /// The value as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The value built from serde data by [`canonical::opaque_from`]: `float` says whether a
    /// float was written.
    pub(crate) fn from_parts(bytes: Vec<u8>, float: bool) -> Self {
        Self {
            bytes: bytes.into_boxed_slice(),
            float,
        }
    }
}

impl From<&Value> for Opaque {
    fn from(value: &Value) -> Self {
        canonical::opaque_from_json(value)
    }
}

impl From<Value> for Opaque {
    fn from(value: Value) -> Self {
        Self::from(&value)
    }
}

/// A JSON string.
impl From<&str> for Opaque {
    fn from(s: &str) -> Self {
        Self::text(s)
    }
}

/// A JSON string.
impl From<String> for Opaque {
    fn from(s: String) -> Self {
        Self::text(&s)
    }
}

impl PartialEq<Value> for Opaque {
    fn eq(&self, other: &Value) -> bool {
        let other = Opaque::from(other);
        self.bytes == other.bytes && self.float == other.float
    }
}

impl fmt::Debug for Opaque {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(self) {
            Ok(json) => f.write_str(&json),
            Err(_) => write!(f, "Opaque({:02x?})", &self.bytes[..]),
        }
    }
}

/// The hash that commits to an opaque value: SHA-256 of its canonical CBOR, or the hash
/// carried by a redaction marker.
pub fn hash(value: &Opaque) -> Result<Hash> {
    if let Some(h) = redacted_hash(value) {
        return Ok(h);
    }
    if value.float {
        return Err(CanonError::new("floats are not allowed", 0).into());
    }
    Ok(Hash(canonical::sha256(&value.bytes)))
}

/// The hash inside a redaction marker, if `value` is one.
pub fn redacted_hash(value: &Opaque) -> Option<Hash> {
    let text = marker_hash_text(&value.bytes)?;
    crate::crypto::hex_digits::<32>(&text[HASH_TEXT_HEAD.len()..]).map(Hash)
}

/// The canonical CBOR of the hash text a redaction marker carries (a text of 64 lowercase hex
/// digits), if `encoded` is a marker's: what the payload hash takes for the value (SPEC §6).
pub(crate) fn marker_hash_text(encoded: &[u8]) -> Option<&[u8]> {
    let text = encoded.strip_prefix(MARKER_KEY)?;
    let digits = text.strip_prefix(&HASH_TEXT_HEAD)?;
    let lowercase_hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    (digits.len() == 64 && digits.iter().all(lowercase_hex)).then_some(text)
}

/// The marker that replaces an erased value.
pub fn redaction_marker(hash: Hash) -> Opaque {
    let mut bytes = Vec::with_capacity(MARKER_KEY.len() + HASH_TEXT_HEAD.len() + 64);
    bytes.extend_from_slice(MARKER_KEY);
    bytes.extend_from_slice(&HASH_TEXT_HEAD);
    bytes.extend_from_slice(hash.to_hex().as_bytes());
    Opaque::from_parts(bytes, false)
}

/// Checks a payload sent in a Command: no floats, no `$`-keys, bounded depth and size.
/// `field` names the payload in the error. Maps are looked at in canonical key order, and a
/// map's keys before its values.
pub fn validate(value: &Opaque, field: &str, max_bytes: usize) -> Result<()> {
    let mut item = Item::new(&value.bytes);
    walk(&mut item, field, 0)?;
    let len = value.bytes.len();
    if len > max_bytes {
        return Err(Error::malformed(format!(
            "`{field}` is {len} bytes encoded; the payload limit is {max_bytes}"
        ))
        .with("limit", max_bytes));
    }
    Ok(())
}

fn walk(item: &mut Item<'_>, field: &str, depth: usize) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(Error::malformed(format!(
            "`{field}` is nested deeper than {MAX_DEPTH} levels"
        )));
    }
    match item.next().map_err(Error::from)? {
        Token::Float(f) => {
            let n =
                serde_json::Number::from_f64(f).map_or_else(|| f.to_string(), |n| n.to_string());
            Err(Error::malformed(format!(
                "`{field}` holds the number {n}; floats are not allowed, use an integer or a string"
            )))
        }
        Token::Array(n) => (0..n).try_for_each(|_| walk(item, field, depth + 1)),
        Token::Map(n) => {
            let mut keys = item.clone();
            for _ in 0..n {
                let k = keys.key().map_err(Error::from)?;
                if k.starts_with('$') {
                    return Err(Error::malformed(format!(
                        "`{field}` holds the key {k:?}; keys beginning with `$` are reserved"
                    )));
                }
                keys.skip().map_err(Error::from)?;
            }
            for _ in 0..n {
                item.key().map_err(Error::from)?;
                walk(item, field, depth + 1)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// One data item of an opaque value's bytes, as the JSON form and [`validate`] walk them.
enum Token<'a> {
    Unsigned(u64),
    Negative(u64),
    Text(&'a str),
    Array(u64),
    Map(u64),
    Bool(bool),
    Null,
    Float(f64),
}

/// A cursor over an opaque value's bytes. They were written by the canonical encoder or
/// checked by a reader, so nothing here should fail; if it does, it says so rather than panic.
#[derive(Clone)]
struct Item<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Item<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    fn broken(&self) -> CanonError {
        CanonError::new("opaque value is not one data item", self.pos)
    }

    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], CanonError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| self.broken())?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn next(&mut self) -> std::result::Result<Token<'a>, CanonError> {
        let initial = self.take(1)?[0];
        let (major, info) = (initial >> 5, initial & 0x1f);
        if major == 7 {
            return match info {
                20 => Ok(Token::Bool(false)),
                21 => Ok(Token::Bool(true)),
                22 => Ok(Token::Null),
                27 => {
                    let raw = self.take(8)?;
                    Ok(Token::Float(f64::from_be_bytes(
                        raw.try_into().map_err(|_| self.broken())?,
                    )))
                }
                _ => Err(self.broken()),
            };
        }
        let arg = match info {
            0..=23 => u64::from(info),
            24 => u64::from(self.take(1)?[0]),
            25 => u64::from(u16::from_be_bytes(
                self.take(2)?.try_into().map_err(|_| self.broken())?,
            )),
            26 => u64::from(u32::from_be_bytes(
                self.take(4)?.try_into().map_err(|_| self.broken())?,
            )),
            27 => u64::from_be_bytes(self.take(8)?.try_into().map_err(|_| self.broken())?),
            _ => return Err(self.broken()),
        };
        match major {
            0 => Ok(Token::Unsigned(arg)),
            1 => Ok(Token::Negative(arg)),
            3 => {
                let n = usize::try_from(arg).map_err(|_| self.broken())?;
                let raw = self.take(n)?;
                std::str::from_utf8(raw)
                    .map(Token::Text)
                    .map_err(|_| self.broken())
            }
            4 => Ok(Token::Array(arg)),
            5 => Ok(Token::Map(arg)),
            _ => Err(self.broken()),
        }
    }

    fn key(&mut self) -> std::result::Result<&'a str, CanonError> {
        match self.next()? {
            Token::Text(k) => Ok(k),
            _ => Err(self.broken()),
        }
    }

    /// Steps over one whole data item.
    fn skip(&mut self) -> std::result::Result<(), CanonError> {
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            match self.next()? {
                Token::Array(n) => pending = pending.checked_add(n).ok_or_else(|| self.broken())?,
                Token::Map(n) => {
                    let n = n.checked_mul(2).ok_or_else(|| self.broken())?;
                    pending = pending.checked_add(n).ok_or_else(|| self.broken())?;
                }
                _ => {}
            }
            if pending > (self.bytes.len() - self.pos) as u64 {
                return Err(self.broken());
            }
        }
        Ok(())
    }
}

/// The JSON form of the item that starts at an [`Item`]'s position.
struct Json<'a>(Item<'a>);

impl Serialize for Json<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut item = self.0.clone();
        match item.next().map_err(ser::Error::custom)? {
            Token::Unsigned(n) => s.serialize_u64(n),
            Token::Negative(n) => match i64::try_from(n) {
                Ok(n) => s.serialize_i64(-1 - n),
                Err(_) => s.serialize_i128(-1 - i128::from(n)),
            },
            Token::Text(t) => s.serialize_str(t),
            Token::Bool(b) => s.serialize_bool(b),
            Token::Null => s.serialize_unit(),
            Token::Float(f) => s.serialize_f64(f),
            Token::Array(n) => {
                let len = usize::try_from(n).map_err(ser::Error::custom)?;
                let mut seq = s.serialize_seq(Some(len.min(item.bytes.len())))?;
                for _ in 0..n {
                    seq.serialize_element(&Json(item.clone()))?;
                    item.skip().map_err(ser::Error::custom)?;
                }
                seq.end()
            }
            Token::Map(n) => {
                let len = usize::try_from(n).map_err(ser::Error::custom)?;
                let mut map = s.serialize_map(Some(len.min(item.bytes.len())))?;
                for _ in 0..n {
                    let key = item.key().map_err(ser::Error::custom)?;
                    map.serialize_entry(key, &Json(item.clone()))?;
                    item.skip().map_err(ser::Error::custom)?;
                }
                map.end()
            }
        }
    }
}

/// The canonical encoder takes the bytes as they are; any other serializer gets the JSON form.
impl Serialize for Opaque {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            return Json(Item::new(&self.bytes)).serialize(s);
        }
        if self.float {
            return Err(ser::Error::custom("floats are not allowed"));
        }
        s.serialize_newtype_struct(canonical::CANONICAL_ITEM, &Raw(&self.bytes))
    }
}

/// Bytes the canonical encoder writes as they are, under [`canonical::CANONICAL_ITEM`].
struct Raw<'a>(&'a [u8]);

impl Serialize for Raw<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// Any self-describing serde data (JSON, a JavaScript value, a decoder) is written into
/// canonical CBOR as it is read; an object whose key repeats is refused, naming the key
/// (I-JSON, RFC 7493 §2.3: names MUST be unique).
impl<'de> Deserialize<'de> for Opaque {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        canonical::opaque_from(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn o(v: Value) -> Opaque {
        Opaque::from(v)
    }

    #[test]
    fn marker_round_trips_its_hash() {
        let v = o(json!({"a": [1, "x", null, true]}));
        let h = hash(&v).expect("no floats");
        assert_eq!(hash(&redaction_marker(h)).expect("marker"), h);
        assert_eq!(
            redaction_marker(h).to_json(),
            json!({ REDACTED_KEY: h.to_hex() })
        );
        assert_eq!(o(json!({ REDACTED_KEY: h.to_hex() })), redaction_marker(h));
    }

    #[test]
    fn refuses_floats_dollar_keys_and_oversize() {
        assert!(validate(&o(json!({"a": 1.5})), "spec", 1000).is_err());
        assert!(validate(&o(json!({"$redacted": "x"})), "spec", 1000).is_err());
        assert!(validate(&o(json!([{"b": {"$x": 1}}])), "spec", 1000).is_err());
        assert!(validate(&o(json!("x".repeat(100))), "spec", 50).is_err());
        assert!(validate(&o(json!({"a": [1, -2, "ok"]})), "spec", 1000).is_ok());
        let float = validate(&o(json!({"b": [1.5]})), "spec", 1000).expect_err("a float");
        assert!(float.message.contains("holds the number 1.5"), "{float:?}");
        assert!(hash(&o(json!([2.0]))).is_err());
        assert!(canonical::to_vec(&o(json!([2.0]))).is_err());
    }

    #[test]
    fn depth_is_counted_as_the_json_walk_did() {
        let mut deep = json!(1);
        for _ in 0..MAX_DEPTH {
            deep = json!([deep]);
        }
        assert!(validate(&o(deep.clone()), "spec", 1 << 20).is_ok());
        assert!(validate(&o(json!([deep])), "spec", 1 << 20).is_err());
    }

    #[test]
    fn the_bytes_are_the_canonical_encoding_and_json_comes_back() {
        let v = json!({"zz": {"b": 2, "a": [-1, u64::MAX, i64::MIN]}, "a": "t", "é": null});
        let opaque = o(v.clone());
        assert_eq!(opaque.as_cbor(), canonical::to_vec(&v).expect("encodes"));
        assert_eq!(opaque.to_json(), v);
        let text = serde_json::to_string(&opaque).expect("JSON");
        assert_eq!(
            text,
            r#"{"a":"t","zz":{"a":[-1,18446744073709551615,-9223372036854775808],"b":2},"é":null}"#
        );
        let back: Opaque = serde_json::from_str(&text).expect("reads");
        assert_eq!(back, opaque);
        assert_eq!(Opaque::from_cbor(opaque.as_cbor()), Ok(opaque.clone()));
        assert_eq!(
            canonical::to_vec(&opaque).expect("writes"),
            opaque.as_cbor().to_vec()
        );
    }

    /// A value is read from serde data only as deep as a reader of canonical CBOR reads it
    /// back: whoever hands it in (a `serde_json::Value` or a JavaScript value has no depth
    /// limit of its own), nothing deeper is built.
    #[test]
    fn a_value_nested_deeper_than_the_readers_take_is_refused() {
        for levels in [canonical::MAX_DEPTH, canonical::MAX_DEPTH + 1, 1000] {
            let mut deep = json!([]);
            for _ in 1..levels {
                deep = json!([deep]);
            }
            let read = Opaque::deserialize(&deep);
            if levels <= canonical::MAX_DEPTH {
                let read = read.expect("reads");
                assert_eq!(Opaque::from_cbor(read.as_cbor()), Ok(read));
            } else {
                let refused = read.expect_err("too deep").to_string();
                assert!(refused.contains("nested deeper"), "{refused}");
                assert!(Opaque::from_cbor(Opaque::from(&deep).as_cbor()).is_err());
            }
        }
    }

    /// An object whose key repeats is refused, the key named, whatever the repeated entries
    /// hold and however deep the object sits; keys that differ only by escapes are the same.
    #[test]
    fn a_repeated_key_is_refused_naming_it() {
        for text in [
            r#"{"b": 1, "a": 2, "b": 3}"#,
            r#"{"b": 1.5, "b": 1}"#,
            r#"[{"x": {"b": [], "b": {}}}]"#,
            r#"{"\u0062": 1, "b": 1}"#,
        ] {
            let refused = serde_json::from_str::<Opaque>(text).expect_err(text);
            assert!(
                refused
                    .to_string()
                    .starts_with("duplicate map key `b` at line 1 column "),
                "{text}: {refused}"
            );
        }
        let read: Opaque = serde_json::from_str(r#"{"b": 1, "a": {"b": 2}}"#).expect("reads");
        assert_eq!(read, o(json!({"a": {"b": 2}, "b": 1})));
    }
}
