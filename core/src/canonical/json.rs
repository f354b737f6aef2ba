//! Opaque values written into canonical CBOR as they are read: from JSON text, a JavaScript
//! value or any other self-describing serde data ([`opaque_from`]), from a
//! `serde_json::Value` ([`opaque_from_json`]) and from canonical CBOR ([`opaque_from_cbor`]).
//!
//! Nothing is built in between: each scalar is written where it is read, and each map's
//! entries are put in canonical key order by the encoder when the map ends.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Serialize;

use super::{write_head, CanonError, Decode, Decoder, Encoder, Entry};
use crate::opaque::Opaque;

/// The newtype name under which a serializer is handed the bytes of an item already in
/// canonical form: the canonical encoder writes them as they are.
pub(crate) const CANONICAL_ITEM: &str = "$mwp::canonical_item";

/// Reads an opaque value from any self-describing serde data into its canonical CBOR. A float
/// is written as a CBOR double and flagged (see [`Opaque`]); an object whose key repeats keeps
/// the last value, as `serde_json::Value` does.
pub(crate) fn opaque_from<'de, D: Deserializer<'de>>(d: D) -> Result<Opaque, D::Error> {
    let mut encoder = Encoder::for_json();
    Transcode(&mut encoder).deserialize(d)?;
    Ok(Opaque::from_parts(encoder.out, encoder.float))
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

/// Writes the data a deserializer hands it into the encoder.
struct Transcode<'a>(&'a mut Encoder);

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
        self.0.out.push(if v { 0xf5 } else { 0xf4 });
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        if v >= 0 {
            write_head(&mut self.0.out, 0, v.unsigned_abs());
        } else {
            write_head(&mut self.0.out, 1, (!v).unsigned_abs());
        }
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        write_head(&mut self.0.out, 0, v);
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.0.float(v).map_err(E::custom)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.0.text(v);
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.out.push(0xf6);
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let open = self.0.open(4, seq.size_hint());
        let mut count = 0;
        while seq.next_element_seed(Transcode(&mut *self.0))?.is_some() {
            count += 1;
        }
        self.0.fix_head(&open, count);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let open = self.0.open(5, map.size_hint());
        let base = self.0.entries.len();
        while map.next_key_seed(Key(&mut *self.0))?.is_some() {
            map.next_value_seed(Transcode(&mut *self.0))?;
        }
        self.0.close_map(&open, base).map_err(de::Error::custom)
    }
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
