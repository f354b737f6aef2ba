//! Opaque values written into canonical CBOR as they are read: from JSON text, a JavaScript
//! value or any other self-describing serde data ([`opaque_from`]), from a
//! `serde_json::Value` ([`opaque_from_json`]) and from canonical CBOR ([`opaque_from_cbor`]).
//!
//! Nothing is built in between: each scalar is written where it is read, and each map's
//! entries are put in canonical key order by the encoder when the map ends.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Serialize, Serializer};

use super::{CanonError, Decode, Decoder, Encoder, Entry, MAX_DEPTH};
use crate::opaque::Opaque;

/// The newtype name under which a serializer is handed the bytes of an item already in
/// canonical form: the canonical encoder writes them as they are.
pub(crate) const CANONICAL_ITEM: &str = "$mwp::canonical_item";

/// Reads an opaque value from any self-describing serde data into its canonical CBOR. A float
/// is written as a CBOR double and flagged (see [`Opaque`]); an object whose key repeats is
/// refused (``duplicate map key `b` ``), as every other reader of canonical CBOR refuses it.
pub(crate) fn opaque_from<'de, D: Deserializer<'de>>(d: D) -> Result<Opaque, D::Error> {
    let mut encoder = Encoder::for_json();
    Transcode(&mut encoder, 0).deserialize(d)?;
    Ok(Opaque::from_parts(encoder.out, encoder.float))
}

/// Writes any self-describing serde data (JSON text, a JavaScript value) into canonical CBOR
/// as it is read, for a canonical reader to take: how the JSON form of a type whose JSON and
/// CBOR forms hold the same data (an event) is read by that type's one reader. Each map's
/// entries are put in canonical key order; a float is refused (canonical CBOR holds none), and
/// so are a repeated key and nesting deeper than the readers take ([`MAX_DEPTH`]).
pub(crate) fn canonical_from<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let mut encoder = Encoder::new(Vec::with_capacity(512));
    Transcode(&mut encoder, 0).deserialize(d)?;
    Ok(encoder.out)
}

/// Reads JSON text into `T` by `T`'s canonical reader: the text is written into canonical CBOR
/// as it is parsed ([`canonical_from`]) and that is read by [`super::read_whole`], as an
/// event's JSON form is read. It takes what `T`'s derive takes through serde_json, except a
/// struct given as an array, which it refuses (a struct is a map, in every mode), and gives
/// the same value. A refusal is the parser's error or the reader's reason.
pub(crate) fn read_json<T: for<'de> Decode<'de>>(text: &[u8]) -> Result<T, String> {
    let mut json = serde_json::Deserializer::from_slice(text);
    let bytes = canonical_from(&mut json)
        .and_then(|bytes| json.end().map(|()| bytes))
        .map_err(|e| text_refusal(text, &e))?;
    super::read_whole(&bytes).map_err(|e| e.reason)
}

/// Why a parse of JSON `text` refused it, worded by the parse (`e`), except an integer beyond
/// -2^63 ..= 2^64 − 1: the parse hands it over as a float, so its reader can name it only by
/// the float (`-9223372036854775809` is handed over as -2^63, which is in range), and it is
/// named here as written and placed in the text (`text_fault`), as `Command::from_json`
/// names one. Every reader of JSON text that reads it through `Transcode` (an event's JSON
/// form, a signed head, an export's files) words its refusal by this.
pub fn text_refusal(text: &[u8], e: &serde_json::Error) -> String {
    let words = e.to_string();
    if !words.starts_with(OUT_OF_RANGE) {
        return words;
    }
    // The integer found is the one the parse refused only where the parse stopped: just
    // after its last digit. Any other (a float refused as beyond the range, `2e19`, while an
    // integer beyond it stands later in the text) is left to the parse's words.
    text_fault(text, |f| matches!(f, TextFault::IntegerOutOfRange(_)))
        .filter(|found| {
            let TextFault::IntegerOutOfRange(n) = &found.fault else {
                return false;
            };
            found.line == e.line() && found.column + n.len() - 1 == e.column()
        })
        .map_or(words, |found| found.to_string())
}

/// The canonical CBOR of a `serde_json::Value`, read as [`opaque_from`] reads JSON.
pub(crate) fn opaque_from_json(value: &serde_json::Value) -> Opaque {
    let mut encoder = Encoder::for_json();
    // A JSON value's maps have no repeated keys and its numbers are integers or finite
    // floats, all of which this encoder writes: it cannot fail.
    match value.serialize(&mut encoder) {
        Ok(()) => Opaque::from_parts(encoder.out, encoder.float),
        Err(_) => Opaque::null(),
    }
}

/// Reads one opaque value from canonical CBOR spanning `bytes`, checked as a stored one.
pub(crate) fn opaque_from_cbor(bytes: &[u8]) -> Result<Opaque, CanonError> {
    let mut de = Decoder::nested(bytes, 0);
    let value = Opaque::decode(&mut de)?;
    if de.pos() != bytes.len() {
        return Err(CanonError::new(
            "trailing bytes after the data item",
            de.pos(),
        ));
    }
    Ok(value)
}

/// Writes the data a deserializer hands it into the encoder, through the encoder's own
/// serializer for scalars; the `usize` is how many arrays and maps it sits in.
struct Transcode<'a>(&'a mut Encoder, usize);

impl Transcode<'_> {
    /// Enters an array or map: nested deeper than any reader of canonical CBOR takes
    /// ([`MAX_DEPTH`]) is refused, whoever hands the value in (a JavaScript value has no
    /// depth limit of its own).
    fn inner<E: de::Error>(&mut self) -> Result<Transcode<'_>, E> {
        if self.1 >= MAX_DEPTH {
            return Err(E::custom(format!(
                "a value is nested deeper than {MAX_DEPTH} levels"
            )));
        }
        Ok(Transcode(&mut *self.0, self.1 + 1))
    }
}

impl<'de> DeserializeSeed<'de> for Transcode<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Transcode<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.0.serialize_bool(v).map_err(encoder_refused)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.0.serialize_i64(v).map_err(encoder_refused)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.0.serialize_u64(v).map_err(encoder_refused)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.0.serialize_f64(v).map_err(|e| {
            // A JSON parse hands an integer beyond u64 or i64 over as a float: it is named as
            // the readers of JSON text name it ([`TextFault::IntegerOutOfRange`]).
            match integer_out_of_range(v) {
                Some(n) => E::custom(TextFault::IntegerOutOfRange(n).to_string()),
                None => encoder_refused(e),
            }
        })
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.0.serialize_str(v).map_err(encoder_refused)
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.serialize_unit().map_err(encoder_refused)
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let inner = self.inner()?;
        let open = inner.0.open(4, seq.size_hint());
        let mut count = 0;
        while seq
            .next_element_seed(Transcode(&mut *inner.0, inner.1))?
            .is_some()
        {
            count += 1;
        }
        inner.0.fix_head(&open, count);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let inner = self.inner()?;
        let open = inner.0.open(5, map.size_hint());
        let base = inner.0.entries.len();
        while map.next_key_seed(Key(&mut *inner.0))?.is_some() {
            map.next_value_seed(Transcode(&mut *inner.0, inner.1))?;
        }
        inner.0.close_map(&open, base).map_err(encoder_refused)
    }
}

/// The encoder's reason for refusing what it was handed (its offset is that of its own output).
fn encoder_refused<E: de::Error>(e: CanonError) -> E {
    E::custom(e.reason)
}

/// Writes a map key (a string) and notes where its entry starts.
struct Key<'a>(&'a mut Encoder);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        let key = self.0.out.len();
        self.0.text(v);
        let value = self.0.out.len();
        self.0.entries.push(Entry { key, value });
        Ok(())
    }
}

/// The words of the encoder's refusal of a key given twice in one map, before the key.
pub(crate) const DUPLICATE_KEY: &str = "duplicate map key";

/// The words of [`TextFault::IntegerOutOfRange`], before the integer.
const OUT_OF_RANGE: &str = "integer out of range";

/// What reading JSON text refuses where serde_json's parse cannot say where: a key given twice
/// in one object (the parse hands the object over whole before it is refused, and a command's
/// body is buffered first), and an integer beyond `u64` or `i64`, which the parse hands over
/// as a float.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TextFault {
    /// A key given twice in one object, decoded; found at its second occurrence.
    DuplicateKey(String),
    /// A number written without fraction or exponent outside -2^63 ..= 2^64 − 1, as written.
    IntegerOutOfRange(String),
}

impl fmt::Display for TextFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TextFault::DuplicateKey(key) => write!(f, "{DUPLICATE_KEY} `{key}`"),
            TextFault::IntegerOutOfRange(n) => {
                write!(f, "{OUT_OF_RANGE}: {n} is not from -2^63 to 2^64 − 1")
            }
        }
    }
}

/// The integer a float handed over by a parse stands for, written out in full, when it is a
/// whole number a parse gives only for an integer outside -2^63 ..= 2^64 − 1 (at least 2^64,
/// or at most -2^63, which an integer in range is handed over as an `i64`); `None` for any
/// other float, which is refused as a float. The number named is the float handed over: the
/// integer written when the parse holds it exactly (2^64, -2^64), else the nearest it made.
fn integer_out_of_range(v: f64) -> Option<String> {
    // 2^64 and -2^63 are exact in f64.
    let whole = v.is_finite() && v.fract() == 0.0;
    (whole && (v >= 18_446_744_073_709_551_616.0 || v <= -9_223_372_036_854_775_808.0))
        .then(|| format!("{v:.0}"))
}

/// A [`TextFault`] and where it starts in the text: line and column (of bytes) from 1, as
/// serde_json places its own errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    fault: TextFault,
    line: usize,
    column: usize,
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at line {} column {}",
            self.fault, self.line, self.column
        )
    }
}

/// The first fault of the kind `wanted` accepts in JSON text, in text order, if the text up to
/// it is JSON. Called only once a reader has refused the text or flagged a float: it parses
/// the text again, without building anything but the keys of the objects still open.
pub(crate) fn text_fault(text: &[u8], wanted: fn(&TextFault) -> bool) -> Option<Found> {
    let mut scan = Scan {
        text,
        pos: 0,
        wanted,
    };
    match scan.value(0) {
        Err(Stop::Found(fault, at)) => {
            let before = &text[..at];
            let line_start = before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
            Some(Found {
                fault,
                line: before.iter().filter(|&&b| b == b'\n').count() + 1,
                column: at - line_start + 1,
            })
        }
        Ok(()) | Err(Stop::NotJson) => None,
    }
}

/// Why [`Scan`] stopped early.
enum Stop {
    /// A fault wanted, and the offset of its first byte.
    Found(TextFault, usize),
    /// The text is not JSON here (or nests deeper than any reader takes).
    NotJson,
}

/// A second parse of JSON text that looks only for [`TextFault`]s.
struct Scan<'a> {
    text: &'a [u8],
    pos: usize,
    wanted: fn(&TextFault) -> bool,
}

impl Scan<'_> {
    fn peek(&mut self) -> Option<u8> {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.pos) {
            self.pos += 1;
        }
        self.text.get(self.pos).copied()
    }

    fn eat(&mut self, byte: u8) -> Result<(), Stop> {
        if self.peek() != Some(byte) {
            return Err(Stop::NotJson);
        }
        self.pos += 1;
        Ok(())
    }

    fn found(&self, fault: TextFault, at: usize) -> Result<(), Stop> {
        if (self.wanted)(&fault) {
            return Err(Stop::Found(fault, at));
        }
        Ok(())
    }

    fn value(&mut self, depth: usize) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            return Err(Stop::NotJson);
        }
        match self.peek().ok_or(Stop::NotJson)? {
            b'{' => self.object(depth),
            b'[' => self.list(b']', |scan| scan.value(depth + 1)),
            b'"' => self.string().map(drop),
            b'-' | b'0'..=b'9' => self.number(),
            _ => {
                let rest = &self.text[self.pos..];
                let word = [&b"true"[..], b"false", b"null"]
                    .into_iter()
                    .find(|w| rest.starts_with(w))
                    .ok_or(Stop::NotJson)?;
                self.pos += word.len();
                Ok(())
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<(), Stop> {
        let mut keys = std::collections::HashSet::new();
        self.list(b'}', |scan| {
            if scan.peek() != Some(b'"') {
                return Err(Stop::NotJson);
            }
            let at = scan.pos;
            let key = scan.string()?;
            if !keys.insert(key.clone()) {
                scan.found(TextFault::DuplicateKey(key), at)?;
            }
            scan.eat(b':')?;
            scan.value(depth + 1)
        })
    }

    /// An array or object from its opening bracket to `close`: its elements (or members), each
    /// read by `element`, separated by commas.
    fn list(
        &mut self,
        close: u8,
        mut element: impl FnMut(&mut Self) -> Result<(), Stop>,
    ) -> Result<(), Stop> {
        self.pos += 1;
        if self.peek() == Some(close) {
            self.pos += 1;
            return Ok(());
        }
        loop {
            element(self)?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b) if b == close => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(Stop::NotJson),
            }
        }
    }

    /// Reads a string at the position, decoding its escapes when it has any.
    fn string(&mut self) -> Result<String, Stop> {
        let start = self.pos;
        self.pos += 1;
        let mut escaped = false;
        loop {
            match self.text.get(self.pos).ok_or(Stop::NotJson)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    self.pos += 2;
                }
                _ => self.pos += 1,
            }
        }
        self.pos += 1;
        let raw = self.text.get(start..self.pos).ok_or(Stop::NotJson)?;
        if escaped {
            serde_json::from_slice(raw).map_err(|_| Stop::NotJson)
        } else {
            std::str::from_utf8(&raw[1..raw.len() - 1])
                .map(str::to_owned)
                .map_err(|_| Stop::NotJson)
        }
    }

    fn number(&mut self) -> Result<(), Stop> {
        let start = self.pos;
        while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = self.text.get(self.pos) {
            self.pos += 1;
        }
        let literal = &self.text[start..self.pos];
        if literal.iter().any(|b| matches!(b, b'.' | b'e' | b'E')) {
            return Ok(());
        }
        let literal = std::str::from_utf8(literal).map_err(|_| Stop::NotJson)?;
        let digits = literal.strip_prefix('-').unwrap_or(literal);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Stop::NotJson);
        }
        // JSON writes no leading zeros: 39 digits are beyond any i128.
        let in_range = digits.len() < 39
            && literal
                .parse::<i128>()
                .is_ok_and(|n| (i128::from(i64::MIN)..=i128::from(u64::MAX)).contains(&n));
        if !in_range {
            self.found(TextFault::IntegerOutOfRange(literal.to_owned()), start)?;
        }
        Ok(())
    }
}
