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
/// is written as a CBOR double and flagged (see [`Opaque`]); an object whose key repeats keeps
/// the last value, as `serde_json::Value` does.
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
        .map_err(|e| e.to_string())?;
    super::read_whole(&bytes).map_err(|e| e.reason)
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
        self.0.serialize_f64(v).map_err(encoder_refused)
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
