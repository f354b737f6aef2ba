//! The serde deserializer that reads canonical CBOR straight into typed values, over bytes
//! held whole (the slice decoder, [`Decoder`]) or over a window of a reader (the streaming
//! decoder, [`super::StreamDecoder`]): one deserializer, [`CanonDecoder`], over either
//! [`Input`]. The grammar it checks is [`super::grammar`]'s.
//!
//! Stored events and snapshots are read far more often than anything else is decoded, so they
//! do not go through a [`ciborium::Value`] tree: this deserializer walks the bytes once,
//! checks every canonical rule as it goes (shortest heads, sorted and unique map keys,
//! definite lengths, no floats or tags, bounded depth) and hands serde borrowed strings where
//! the input is held whole (transient ones from a window). It accepts exactly the inputs that
//! `decode(bytes, Strictness::Canonical)` accepts, and gives the value that deserializing that
//! decoded tree gives (a test in `tests/canonical.rs` holds the two paths equal); enums use
//! ciborium's representation (a unit variant is its name, any other variant a one-entry map
//! from its name to its content).

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

use super::grammar::{simple, utf8, Input, Reader, Refusal, Taken};
use super::{CanonError, Strictness, MAX_DEPTH};
use crate::opaque::Opaque;

impl de::Error for CanonError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Self::new(msg.to_string(), 0)
    }
}

/// Reads canonical CBOR bytes into `T`, refusing anything that is not canonical. Errors raised
/// by `T`'s own checks carry the offset of the data item being read when they were raised.
pub(super) fn from_canonical<'de, T: de::Deserialize<'de>>(
    bytes: &'de [u8],
) -> Result<T, CanonError> {
    let mut de = Decoder::nested(bytes, 0);
    let value = T::deserialize(&mut de).map_err(|e| locate(e, de.input.pos))?;
    de.input.end()?;
    Ok(value)
}

/// The canonical deserializer: an [`Input`] and the current nesting depth.
pub(crate) struct CanonDecoder<I> {
    pub(crate) input: I,
    pub(super) depth: usize,
}

/// The slice decoder: a [`CanonDecoder`] over bytes held whole, which hands serde borrowed
/// strings and bytes; the hand-written readers ([`Decode`]) read from it too.
pub(crate) type Decoder<'de> = CanonDecoder<Reader<'de>>;

impl<'de> Decoder<'de> {
    /// A canonical decoder of `bytes` that starts `depth` arrays and maps deep: what it
    /// accepts and refuses is what it would inside that many.
    pub(crate) fn nested(bytes: &'de [u8], depth: usize) -> Self {
        CanonDecoder {
            input: Reader::new(bytes, Strictness::Canonical),
            depth,
        }
    }

    /// The bytes of the next data item, found by walking heads (as the decoder hands them to
    /// a visitor under [`ITEM_BYTES`]), read past; `None`, with nothing read, if they are not a
    /// whole item.
    pub(crate) fn item_bytes(&mut self) -> Option<&'de [u8]> {
        self.input.whole_item()
    }

    fn text(&mut self, arg: u64, start: usize) -> Result<&'de str, CanonError> {
        let n = self.input.length(arg, start)?;
        utf8(self.input.take(n)?, start)
    }
}

impl<'de, I: Input<'de>> CanonDecoder<I> {
    /// Offset of the next byte to read.
    pub(crate) fn pos(&self) -> usize {
        self.input.pos()
    }

    /// Enters an array or map; its elements sit one level deeper.
    pub(crate) fn enter(&mut self, at: usize) -> Result<(), CanonError> {
        if self.depth >= MAX_DEPTH {
            return Err(Refusal::TooDeep.at(at));
        }
        self.depth += 1;
        Ok(())
    }

    /// Reads a map head of exactly `len` entries and enters it (a map whose keys the caller
    /// names, [`Fields`]); an error names offset 0, for the caller to place.
    pub(crate) fn map_of(&mut self, len: u64) -> Result<(), CanonError> {
        let (major, arg) = self.input.head()?;
        if major != 5 || arg != len {
            return Err(CanonError::new(
                format!("expected a map of {len} entries"),
                0,
            ));
        }
        self.enter(0)
    }

    /// Reads past the key `name` (shorter than 24 bytes: one head byte, then its letters), or
    /// refuses whatever else is there; answers where the key starts. Inlined where it is
    /// called, so that the key is compared with a constant name.
    #[inline(always)]
    pub(crate) fn named_key(&mut self, name: &str) -> Result<usize, CanonError> {
        let start = self.input.pos();
        let n = name.len();
        let rest = self.input.ahead(n + 1)?;
        if n >= 24
            || rest.first() != Some(&(0x60 | n as u8))
            || rest.get(1..=n) != Some(name.as_bytes())
        {
            return Err(expected_key(name, start));
        }
        self.input.advance(1 + n);
        Ok(start)
    }

    /// Checks that the whole input was read.
    pub(crate) fn finish(&self) -> Result<(), CanonError> {
        self.input.end()
    }

    /// Hands the `n` entries of the map whose head started at `start` to `visitor`, leaving
    /// out the entry keyed `skip` (its encoded key), and checks that it took them all.
    /// `fields` are the names of the struct being read (empty for any other map).
    fn visit_map<V: Visitor<'de>>(
        &mut self,
        n: u64,
        start: usize,
        skip: Option<&[u8]>,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, CanonError> {
        let n = self.input.length(n, start)?;
        self.enter(start)?;
        let mut access = Map {
            de: self,
            left: n,
            previous: I::PreviousKey::default(),
            skip,
            fields,
        };
        let value = visitor.visit_map(&mut access)?;
        if access.left != 0 {
            return Err(CanonError::new(
                format!("map has {} more entries than expected", access.left),
                start,
            ));
        }
        self.depth -= 1;
        Ok(value)
    }

    /// Skips one data item, checking it exactly as decoding it would (the input's
    /// [`Input::skip`], which calls [`CanonDecoder::skip_item`]).
    #[inline]
    pub(crate) fn skip(&mut self) -> Result<(), CanonError> {
        I::skip(self)
    }

    /// [`CanonDecoder::skip`]'s walk over the item.
    pub(crate) fn skip_item(&mut self) -> Result<(), CanonError> {
        let start = self.input.pos();
        let (major, arg) = self.input.head()?;
        match major {
            0 | 1 => Ok(()),
            2 => {
                let n = self.input.length(arg, start)?;
                self.input.discard(n)
            }
            3 => {
                let n = self.input.length(arg, start)?;
                utf8(self.input.read(n)?.bytes(), start).map(drop)
            }
            4 => {
                let n = self.input.length(arg, start)?;
                self.enter(start)?;
                for _ in 0..n {
                    self.skip()?;
                }
                self.depth -= 1;
                Ok(())
            }
            5 => {
                let n = self.input.length(arg, start)?;
                self.enter(start)?;
                let mut previous = I::PreviousKey::default();
                for _ in 0..n {
                    let key_start = self.input.pos();
                    let held = self.input.hold(key_start);
                    let r = self
                        .skip()
                        .and_then(|()| self.input.next_key(&mut previous, key_start));
                    self.input.release(held);
                    r?;
                    self.skip()?;
                }
                self.depth -= 1;
                Ok(())
            }
            6 => Err(Refusal::Tag.at(start)),
            _ => simple(arg, start).map(drop),
        }
    }
}

/// A text string's bytes to `visitor`, checked to be UTF-8: borrowed where they are.
#[inline]
fn visit_text<'de, V: Visitor<'de>>(
    taken: Taken<'de, '_>,
    start: usize,
    visitor: V,
) -> Result<V::Value, CanonError> {
    match taken {
        Taken::Borrowed(raw) => visitor.visit_borrowed_str(utf8(raw, start)?),
        Taken::Transient(raw) => visitor.visit_str(utf8(raw, start)?),
    }
}

/// Bytes to `visitor`: borrowed where they are.
#[inline]
fn visit_bytes<'de, V: Visitor<'de>>(
    taken: Taken<'de, '_>,
    visitor: V,
) -> Result<V::Value, CanonError> {
    match taken {
        Taken::Borrowed(raw) => visitor.visit_borrowed_bytes(raw),
        Taken::Transient(raw) => visitor.visit_bytes(raw),
    }
}

impl<'de, I: Input<'de>> de::Deserializer<'de> for &mut CanonDecoder<I> {
    type Error = CanonError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CanonError> {
        let start = self.input.pos();
        let (major, arg) = self.input.head()?;
        match major {
            0 => visitor.visit_u64(arg),
            1 => match i64::try_from(arg) {
                // -1 - arg, which fits an i64 whenever arg does.
                Ok(n) => visitor.visit_i64(-1 - n),
                Err(_) => visitor.visit_i128(-1 - i128::from(arg)),
            },
            2 => {
                let n = self.input.length(arg, start)?;
                visit_bytes(self.input.read(n)?, visitor)
            }
            3 => {
                let n = self.input.length(arg, start)?;
                visit_text(self.input.read(n)?, start, visitor)
            }
            4 => {
                let n = self.input.length(arg, start)?;
                self.enter(start)?;
                let mut access = Seq { de: self, left: n };
                let value = visitor.visit_seq(&mut access)?;
                if access.left != 0 {
                    return Err(CanonError::new(
                        format!("array has {} more elements than expected", access.left),
                        start,
                    ));
                }
                self.depth -= 1;
                Ok(value)
            }
            5 => self.visit_map(arg, start, None, &[], visitor),
            6 => Err(Refusal::Tag.at(start)),
            _ => match simple(arg, start)? {
                Some(b) => visitor.visit_bool(b),
                None => visitor.visit_unit(),
            },
        }
    }

    /// A struct is a map (never an array, although serde's derive would take one): its keys
    /// are matched against its field names as bytes, so a key equal to a name is valid UTF-8
    /// without checking, and the name is handed on as the key.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, CanonError> {
        let start = self.input.pos();
        if self.input.peek()? >> 5 != 5 {
            return Err(Refusal::ExpectedMap.at(start));
        }
        let (_, arg) = self.input.head()?;
        self.visit_map(arg, start, None, fields, visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CanonError> {
        if self.input.peek()? == 0xf6 {
            self.input.advance(1);
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    /// Two newtype names are read differently; every other newtype is its content.
    /// * `ITEM_BYTES`: where the input is held whole, the visitor is handed the bytes of the
    ///   next data item, found by walking heads, and reads them itself (an error it raises
    ///   names where the item starts); elsewhere, or where they are not a whole item, it is
    ///   read as its content (the ordinary path, which words what is wrong).
    /// * `crypto::HEX_TEXT`: a hex type is handed its text's bytes unchecked; it
    ///   accepts lowercase hex digits only, which are valid UTF-8.
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, CanonError> {
        if name == ITEM_BYTES {
            let start = self.input.pos();
            let Some(item) = self.input.whole_item() else {
                return visitor.visit_newtype_struct(self);
            };
            return visitor
                .visit_borrowed_bytes(item)
                .map_err(|e: CanonError| locate(e, start));
        }
        if name != crate::crypto::HEX_TEXT {
            return visitor.visit_newtype_struct(self);
        }
        let start = self.input.pos();
        let (major, arg) = self.input.head()?;
        if major != 3 {
            return Err(Refusal::ExpectedText.at(start));
        }
        let n = self.input.length(arg, start)?;
        visit_bytes(self.input.read(n)?, visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, CanonError> {
        let start = self.input.pos();
        let (major, arg) = self.input.head()?;
        match major {
            3 => {
                let n = self.input.length(arg, start)?;
                let taken = self.input.read(n)?;
                let name = utf8(taken.bytes(), start)?;
                visitor.visit_enum(name.into_deserializer())
            }
            5 if arg == 1 => {
                self.enter(start)?;
                let value = visitor.visit_enum(Variant { de: self })?;
                self.depth -= 1;
                Ok(value)
            }
            _ => Err(Refusal::NotAnEnum.at(start)),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CanonError> {
        self.skip()?;
        visitor.visit_unit()
    }

    /// Text only: a byte string spelling the same characters is a different encoding.
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CanonError> {
        let start = self.input.pos();
        let (major, arg) = self.input.head()?;
        if major != 3 {
            return Err(Refusal::ExpectedText.at(start));
        }
        let n = self.input.length(arg, start)?;
        visit_text(self.input.read(n)?, start, visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CanonError> {
        self.deserialize_str(visitor)
    }

    /// Field and variant names are text, never byte strings.
    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CanonError> {
        self.deserialize_str(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf
        unit unit_struct seq tuple tuple_struct map
    }
}

/// The elements of an array.
struct Seq<'a, I> {
    de: &'a mut CanonDecoder<I>,
    left: usize,
}

impl<'de, I: Input<'de>> de::SeqAccess<'de> for Seq<'_, I> {
    type Error = CanonError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, CanonError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.de).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left.min(super::PREALLOC_LIMIT))
    }
}

/// The entries of a map; each key must sort after the one before it.
pub(super) struct Map<'a, 'de, I: Input<'de>> {
    pub(super) de: &'a mut CanonDecoder<I>,
    pub(super) left: usize,
    pub(super) previous: I::PreviousKey,
    /// The encoded key of an entry to check but not show (an enum's tag, already read).
    pub(super) skip: Option<&'a [u8]>,
    /// The field names, when the map is a struct.
    pub(super) fields: &'static [&'static str],
}

impl<'de, I: Input<'de>> Map<'_, 'de, I> {
    /// The field name the key at the reader spells, read past it; `None` (nothing read) if
    /// the key is not one of the struct's field names in a one-byte text head.
    fn field_name(&mut self) -> Result<Option<&'static str>, CanonError> {
        if self.fields.is_empty() {
            return Ok(None);
        }
        let rest = self.de.input.ahead(24)?;
        let Some(&head) = rest.first() else {
            return Ok(None);
        };
        if head >> 5 != 3 || head & 0x1f >= 24 {
            return Ok(None);
        }
        let Some(raw) = rest.get(1..1 + usize::from(head & 0x1f)) else {
            return Ok(None);
        };
        // Field names are short: a byte loop, not a call per name.
        let Some(name) = self
            .fields
            .iter()
            .find(|f| f.len() == raw.len() && f.bytes().zip(raw).all(|(a, b)| a == *b))
        else {
            return Ok(None);
        };
        self.de.input.advance(1 + name.len());
        Ok(Some(name))
    }
}

impl<'de, I: Input<'de>> de::MapAccess<'de> for Map<'_, 'de, I> {
    type Error = CanonError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, CanonError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        if let Some(skip) = self.skip {
            if self.de.input.ahead(skip.len())?.starts_with(skip) {
                let key_start = self.de.input.pos();
                let held = self.de.input.hold(key_start);
                let r = self
                    .de
                    .skip()
                    .and_then(|()| self.de.input.next_key(&mut self.previous, key_start));
                self.de.input.release(held);
                r?;
                self.de.skip()?;
                if self.left == 0 {
                    return Ok(None);
                }
                self.left -= 1;
            }
        }
        let key_start = self.de.input.pos();
        let held = self.de.input.hold(key_start);
        let key = match self.field_name() {
            Ok(Some(name)) => seed.deserialize(de::value::BorrowedStrDeserializer::new(name)),
            Ok(None) => seed.deserialize(&mut *self.de),
            Err(e) => Err(e),
        };
        let r = key.and_then(|key| {
            self.de
                .input
                .next_key(&mut self.previous, key_start)
                .map(|()| key)
        });
        self.de.input.release(held);
        r.map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, CanonError> {
        seed.deserialize(&mut *self.de)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left.min(super::PREALLOC_LIMIT))
    }
}

/// An enum variant written as `{name: content}`.
struct Variant<'a, I> {
    de: &'a mut CanonDecoder<I>,
}

impl<'de, I: Input<'de>> de::EnumAccess<'de> for Variant<'_, I> {
    type Error = CanonError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self), CanonError> {
        let name = seed.deserialize(&mut *self.de)?;
        Ok((name, self))
    }
}

impl<'de, I: Input<'de>> de::VariantAccess<'de> for Variant<'_, I> {
    type Error = CanonError;

    fn unit_variant(self) -> Result<(), CanonError> {
        de::Deserialize::deserialize(&mut *self.de)
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, CanonError> {
        seed.deserialize(&mut *self.de)
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, CanonError> {
        de::Deserializer::deserialize_any(&mut *self.de, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, CanonError> {
        de::Deserializer::deserialize_any(&mut *self.de, visitor)
    }
}

/// The newtype name under which a type asks this decoder for the bytes of its next data item,
/// to read them itself (with [`Items`]). The bytes are only walked, not checked: the type must
/// check them as fully as decoding them would. Other deserializers see an ordinary newtype.
pub(crate) const ITEM_BYTES: &str = "$mwp::item_bytes";

/// A canonical reader for hand-written decoders of hot shapes. Every read checks what the
/// decoder checks (shortest heads, lengths within the input) and answers `None` on anything
/// unexpected, so the caller can fall back to the decoder, which words the error.
pub(crate) struct Items<'de> {
    input: Reader<'de>,
}

impl<'de> Items<'de> {
    /// Starts at the beginning of `bytes`.
    pub(crate) fn new(bytes: &'de [u8]) -> Self {
        Items {
            input: Reader::new(bytes, Strictness::Canonical),
        }
    }

    /// Whether every byte has been read.
    pub(crate) fn done(&self) -> bool {
        self.input.pos == self.input.bytes.len()
    }

    /// Offset of the next byte to read.
    pub(crate) fn pos(&self) -> usize {
        self.input.pos
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> usize {
        self.input.bytes.len() - self.input.pos
    }

    /// The entry count of a map head.
    pub(crate) fn map(&mut self) -> Option<usize> {
        let start = self.input.pos;
        match self.input.head().ok()? {
            (5, n) => self.input.length(n, start).ok(),
            _ => None,
        }
    }

    /// An unsigned integer.
    pub(crate) fn uint(&mut self) -> Option<u64> {
        match self.input.head().ok()? {
            (0, n) => Some(n),
            _ => None,
        }
    }

    /// A text string's bytes, not checked to be UTF-8; with the encoded item (head included).
    pub(crate) fn text_bytes(&mut self) -> Option<(&'de [u8], &'de [u8])> {
        let start = self.input.pos;
        let (major, arg) = self.input.head().ok()?;
        if major != 3 {
            return None;
        }
        let n = self.input.length(arg, start).ok()?;
        let text = self.input.take(n).ok()?;
        Some((text, &self.input.bytes[start..self.input.pos]))
    }

    /// The bytes of the next data item, found by walking heads only (see [`super::item_end`]):
    /// the caller reads them in full.
    pub(crate) fn item(&mut self) -> Option<&'de [u8]> {
        let start = self.input.pos;
        let end = super::item_end(self.input.bytes, start)?;
        self.input.pos = end;
        Some(&self.input.bytes[start..end])
    }

    /// A text string.
    pub(crate) fn text(&mut self) -> Option<&'de str> {
        std::str::from_utf8(self.text_bytes()?.0).ok()
    }

    /// Reads `encoded` if the input continues with exactly these bytes (a fixed-size array, so
    /// the comparison is a few instructions, not a call).
    pub(crate) fn eat<const N: usize>(&mut self, encoded: &[u8; N]) -> bool {
        let rest = &self.input.bytes[self.input.pos..];
        if rest.first_chunk::<N>() == Some(encoded) {
            self.input.pos += N;
            true
        } else {
            false
        }
    }
}

/// Reads a canonical map field by field, for types whose shape is fixed and read on hot paths
/// (a stored [`crate::Event`]), and internally tagged enums without buffering their content.
pub(crate) struct Fields<'de> {
    de: Decoder<'de>,
    /// The last key read, to check that callers name keys in canonical order.
    #[cfg(debug_assertions)]
    previous: Option<(usize, usize)>,
}

impl<'de> Fields<'de> {
    /// Starts reading `bytes`, which must hold one map of exactly `len` entries.
    pub(crate) fn new(bytes: &'de [u8], len: u64) -> Result<Self, CanonError> {
        Self::nested(bytes, len, 0)
    }

    /// As [`Fields::new`], for a map that sits `depth` arrays and maps deep in a larger item:
    /// what it accepts and refuses is what it would inside that many.
    pub(crate) fn nested(bytes: &'de [u8], len: u64, depth: usize) -> Result<Self, CanonError> {
        let mut de = Decoder::nested(bytes, depth);
        de.map_of(len)?;
        Ok(Fields {
            de,
            #[cfg(debug_assertions)]
            previous: None,
        })
    }

    /// Offset of the next byte to read.
    pub(crate) fn pos(&self) -> usize {
        self.de.input.pos
    }

    /// Reads the next key, which must be `name` (keys come in canonical order).
    #[inline(always)]
    fn key(&mut self, name: &str) -> Result<(), CanonError> {
        let _start = self.de.named_key(name)?;
        // Callers name the keys in canonical order, so keys equal to those names are in
        // canonical order and unique: the comparison with the previous key is only a check
        // of the callers.
        #[cfg(debug_assertions)]
        {
            self.de
                .input
                .next_key(&mut self.previous, _start)
                .expect("keys named in canonical order");
        }
        Ok(())
    }

    /// Reads the entry `name` as a `T`.
    /// Inlined where it is called, so that the key is compared with a constant name.
    #[inline(always)]
    pub(crate) fn field<T: de::Deserialize<'de>>(&mut self, name: &str) -> Result<T, CanonError> {
        self.key(name)?;
        let at = self.de.input.pos;
        T::deserialize(&mut self.de).map_err(|e| locate(e, at))
    }

    /// Reads the entry `name` with its hand-written reader ([`Decode`]).
    #[inline(always)]
    pub(crate) fn read<T: Decode<'de>>(&mut self, name: &str) -> Result<T, CanonError> {
        self.key(name)?;
        T::decode(&mut self.de)
    }

    /// Reads the entry `name`, an array, each element with `item`, which is handed the
    /// element's bytes and the depth it sits at, and must read them all. An element that is
    /// not one whole data item is handed on with the rest of the input, for `item` to refuse
    /// where it goes wrong. An error `item` raises names the element (`name[i]`) and its
    /// offset in the whole input.
    pub(crate) fn items<T>(
        &mut self,
        name: &str,
        mut item: impl FnMut(&'de [u8], usize) -> Result<T, CanonError>,
    ) -> Result<Vec<T>, CanonError> {
        self.key(name)?;
        let start = self.de.input.pos;
        let (major, arg) = self.de.input.head()?;
        if major != 4 {
            return Err(CanonError::new(format!("`{name}` must be an array"), start));
        }
        let n = self.de.input.length(arg, start)?;
        self.de.enter(start)?;
        let bytes = self.de.input.bytes;
        let mut items = Vec::with_capacity(n.min(super::PREALLOC_LIMIT));
        for i in 0..n {
            let at = self.de.input.pos;
            let end = super::item_end(bytes, at).unwrap_or(bytes.len());
            let value = item(&bytes[at..end], self.de.depth).map_err(|e| {
                CanonError::new(format!("{name}[{i}]: {}", e.reason), at + e.offset)
            })?;
            items.push(value);
            self.de.input.pos = end;
        }
        self.de.depth -= 1;
        Ok(items)
    }

    /// Reads the entry `name`, a map carrying an internally tagged enum: finds the text under
    /// `tag`, then lets `variant` read the map, with the tag entry checked but left out. A
    /// hand-written reader of the variant ([`Tagged::entries`]) notes in `spans` where the
    /// values of its keys lie.
    pub(crate) fn tagged<T>(
        &mut self,
        name: &str,
        tag: &'static str,
        spans: Option<&mut KeySpans>,
        variant: impl FnOnce(&'de str, Tagged<'_, 'de>) -> Result<T, CanonError>,
    ) -> Result<T, CanonError> {
        self.key(name)?;
        self.de
            .tagged(&format_args!("`{name}`"), tag, spans, variant)
    }

    /// Checks that nothing follows the map.
    pub(crate) fn finish(self) -> Result<(), CanonError> {
        self.de.finish()
    }
}

impl<'de> Decoder<'de> {
    /// Reads the map of an internally tagged enum's variant (`what` names it in errors): finds
    /// the `tag` entry, then hands its text and the map, that entry left out, to `variant`.
    /// Where the values of the keys `spans` asks for lie is noted as the variant reads them.
    pub(crate) fn tagged<T>(
        &mut self,
        what: &dyn std::fmt::Display,
        tag: &'static str,
        spans: Option<&mut KeySpans>,
        variant: impl FnOnce(&'de str, Tagged<'_, 'de>) -> Result<T, CanonError>,
    ) -> Result<T, CanonError> {
        let start = self.input.pos;
        let (major, n) = self.input.head()?;
        if major != 5 {
            return Err(CanonError::new(format!("{what} must be a map"), start));
        }
        // The tag's encoded key, on the stack: one head byte, then its letters (< 24 bytes).
        let tag_len = tag.len();
        if tag_len >= 24 {
            return Err(CanonError::new(
                "a tag name is shorter than 24 bytes",
                start,
            ));
        }
        let mut key = [0u8; 24];
        key[0] = 0x60 | tag_len as u8;
        key[1..=tag_len].copy_from_slice(tag.as_bytes());
        let encoded = &key[..=tag_len];
        let mut found = None;
        for _ in 0..n {
            let key_start = self.input.pos;
            // The tag's key is found by its bytes, which are a whole, valid text item: what
            // stepping over it and comparing would conclude, without the steps.
            if self.input.bytes[key_start..].starts_with(encoded) {
                self.input.pos += encoded.len();
            } else {
                self.skip()?;
            }
            if self.input.bytes[key_start..self.input.pos] == *encoded {
                let at = self.input.pos;
                let (major, arg) = self.input.head()?;
                if major != 3 {
                    return Err(CanonError::new(format!("`{tag}` must be text"), at));
                }
                found = Some(self.text(arg, at)?);
                // The entries after it are read (and checked) with the variant below.
                break;
            } else {
                self.skip()?;
            }
        }
        let Some(tag_value) = found else {
            return Err(CanonError::new(format!("{what} has no `{tag}`"), start));
        };
        self.input.pos = start;
        let value = variant(
            tag_value,
            Tagged {
                de: self,
                skip: encoded,
                spans,
            },
        )
        .map_err(|e| locate(e, start))?;
        Ok(value)
    }
}

/// The error for a key that is not the one expected: out of line, off the hot path.
#[cold]
fn expected_key(name: &str, at: usize) -> CanonError {
    CanonError::new(format!("expected the key {name:?}"), at)
}

/// Gives an error raised by a type's own checks the offset of the item it was reading.
pub(super) fn locate(mut e: CanonError, at: usize) -> CanonError {
    if e.offset == 0 {
        e.offset = at;
    }
    e
}

/// A deserializer for the map of an internally tagged enum's variant, tag entry left out.
pub(crate) struct Tagged<'a, 'de> {
    de: &'a mut Decoder<'de>,
    skip: &'a [u8],
    /// Where the values of some keys lie, noted by [`Tagged::entries`].
    spans: Option<&'a mut KeySpans>,
}

impl<'a, 'de> Tagged<'a, 'de> {
    /// The variant's entries, the tag's left out, for a hand-written reader. Where the values
    /// of the keys `spans` asks for lie is noted as they are read.
    pub(crate) fn entries(self) -> Result<Entries<'a, 'de>, CanonError> {
        let mut entries = Entries::open(self.de, Some(self.skip))?;
        entries.spans = self.spans;
        Ok(entries)
    }
}

/// Where the values of the entries with some keys lie in the input, noted by a hand-written
/// reader as it reads the entries of one map (in their stored order, so in increasing order
/// of offset): the payload hash swaps them for their own hashes without walking the map
/// again.
#[derive(Debug, Clone)]
pub(crate) struct KeySpans {
    /// Whether the value of the entry with this key (its text) is noted.
    wants: fn(&[u8]) -> bool,
    /// The spans noted, `(start, end)`: the first `len`.
    found: [(usize, usize); KeySpans::MAX],
    len: usize,
    /// Set once every entry of the map was read (the spans are all there).
    complete: bool,
}

impl KeySpans {
    /// Most spans noted; a map with more such keys is refused by the reader (keys of a map are
    /// unique, so a set of fewer names never is).
    pub(crate) const MAX: usize = 10;

    /// Notes the values of the entries whose keys `wants` (fewer than [`KeySpans::MAX`]
    /// names).
    pub(crate) fn new(wants: fn(&[u8]) -> bool) -> Self {
        KeySpans {
            wants,
            found: [(0, 0); Self::MAX],
            len: 0,
            complete: false,
        }
    }

    /// The spans, `start..end` in the input, if the reader read the whole map.
    pub(crate) fn spans(&self) -> Option<impl Iterator<Item = std::ops::Range<usize>> + '_> {
        self.complete
            .then(|| self.found[..self.len].iter().map(|&(s, e)| s..e))
    }
}

impl<'de> de::Deserializer<'de> for Tagged<'_, 'de> {
    type Error = CanonError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CanonError> {
        let start = self.de.input.pos;
        let (major, n) = self.de.input.head()?;
        if major != 5 {
            return Err(CanonError::new("a tagged variant must be a map", start));
        }
        self.de.visit_map(n, start, Some(self.skip), &[], visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

/// A type read from canonical CBOR without serde's derived visitors: the hot shapes of a
/// stored event (each kind's fields, and the structs inside them).
///
/// A reader accepts exactly what the type's derived `Deserialize` accepts through the canonical
/// decoder and gives the same value for it: the canonical encoding of the type's own fields,
/// as maps (with unknown entries where the derive ignores them). A leaf's reader that refuses
/// hands the item to the leaf's derive, which words why ([`or_derive`]); a struct's reader
/// words its own refusals (`unknown field`, `missing field`, `expected a map`). Stored events
/// are read by the readers alone; a work item's refusal is still read again by its derive,
/// which words it. Nesting depth is counted as the decoder counts it.
pub(crate) trait Decode<'de>: Sized {
    /// Reads one data item.
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError>;

    /// The value of a field whose key is left out of its map, if it may be left out (as
    /// serde's derive does, an `Option` field may be: it is `None`).
    fn absent() -> Option<Self> {
        None
    }

    /// The value of an `Option` field that is present: `null` is `None`, as serde reads an
    /// option, unless the type holds `null` itself (an opaque value does: SPEC §1, an opaque
    /// payload is arbitrary JSON), when a field present is always `Some`.
    fn decode_present(de: &mut Decoder<'de>) -> Result<Option<Self>, CanonError> {
        if de.input.peek()? == 0xf6 {
            de.input.pos += 1;
            Ok(None)
        } else {
            Self::decode(de).map(Some)
        }
    }
}

/// Reads through serde an `Option` field the encoder writes only when it is `Some`
/// (`#[serde(default, skip_serializing_if = "Option::is_none", deserialize_with =
/// "crate::canonical::some")]`): a present key is `Some`, so `null` there is what the field's
/// type makes of it, as [`decode_struct!`]'s `if is_some` reads it: refused, unless the type
/// holds `null` itself (an opaque value, SPEC §1: then it is `Some(null)`, as
/// [`Decode::decode_present`] reads it). serde's `Option` reads `null` as `None`, which would
/// take bytes that are not the canonical encoding of what they decode to, and would read an
/// opaque `null` back as left out (a command's signature, an event's payload hash, an agent's
/// recorded outcome changed; docs/decisions.md, "Reading stored bytes").
pub(crate) fn some<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// A struct read from the entries of its map by a reader [`decode_struct!`] generates (the
/// map of an internally tagged variant is its entries with the tag's left out).
pub(crate) trait DecodeFields<'de>: Sized {
    /// Reads the struct's fields from the map's entries, and every entry.
    fn decode_fields(entries: Entries<'_, 'de>) -> Result<Self, CanonError>;
}

/// Text, as serde reads a `String` from this decoder: a text string, valid UTF-8.
impl<'de> Decode<'de> for String {
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        let start = de.input.pos;
        let (major, arg) = de.input.head()?;
        if major != 3 {
            return Err(Refusal::ExpectedText.at(start));
        }
        de.text(arg, start).map(str::to_owned)
    }
}

/// Reads a unit variant of an enum whose variants are named `names`, as serde's derive reads
/// one through this decoder's `deserialize_enum`: its name as text, or a map of one entry from
/// its name to `null` (what the derive's `unit_variant` takes; the encoder never writes it).
/// Answers the index of the name in `names`; a name that is none of them is refused with
/// serde's wording (`unknown variant `x`, expected one of …`).
pub(crate) fn unit_variant(
    de: &mut Decoder<'_>,
    names: &'static [&'static str],
) -> Result<usize, CanonError> {
    let start = de.input.pos;
    let (major, arg) = de.input.head()?;
    let in_map = match major {
        3 => false,
        5 if arg == 1 => {
            de.enter(start)?;
            true
        }
        _ => return Err(Refusal::NotAnEnum.at(start)),
    };
    let (name_start, arg) = if in_map {
        let name_start = de.input.pos;
        let (major, arg) = de.input.head()?;
        if major != 3 {
            return Err(Refusal::ExpectedText.at(name_start));
        }
        (name_start, arg)
    } else {
        (start, arg)
    };
    let n = de.input.length(arg, name_start)?;
    let raw = de.input.take(n)?;
    // A name is ASCII: text equal to one is valid UTF-8 without checking.
    let Some(index) = names.iter().position(|n| n.as_bytes() == raw) else {
        let name = utf8(raw, name_start)?;
        return Err(locate(unknown_variant(name, names), de.input.pos));
    };
    if in_map {
        let at = de.input.pos;
        if de.input.peek()? != 0xf6 {
            return Err(CanonError::new("a unit variant's content is null", at));
        }
        de.input.pos += 1;
        de.depth -= 1;
    }
    Ok(index)
}

/// Generates [`Decode`] for enums of unit variants from their variants and the names serde's
/// derive gives them (`rename_all = "snake_case"`), read by [`unit_variant`]: what the derive
/// accepts, and the same value. Every variant must be listed (a match over them checks it
/// at compile time); the names are held to the derive's by a test over every variant.
macro_rules! decode_unit_enum {
    ($( $ty:ty { $($name:literal => $variant:ident),* $(,)? } )*) => {
        $(
            impl<'de> Decode<'de> for $ty {
                #[inline]
                fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
                    // A variant the list leaves out does not compile: the reader can never
                    // refuse a name the derive takes.
                    #[allow(dead_code)]
                    fn every_variant_listed(v: $ty) {
                        match v {
                            $(<$ty>::$variant => {})*
                        }
                    }
                    const NAMES: &[&str] = &[$($name),*];
                    const VARIANTS: &[$ty] = &[$(<$ty>::$variant),*];
                    let start = de.input.pos;
                    let index = unit_variant(de, NAMES)?;
                    VARIANTS
                        .get(index)
                        .copied()
                        .ok_or_else(|| refused("a variant without a name", start))
                }
            }
        )*
    };
}

decode_unit_enum! {
    crate::work::WorkState {
        "queued" => Queued,
        "leased" => Leased,
        "running" => Running,
        "blocked" => Blocked,
        "waiting" => Waiting,
        "succeeded" => Succeeded,
        "failed" => Failed,
        "cancelled" => Cancelled,
    }
    crate::command::Role {
        "owner" => Owner,
        "worker" => Worker,
        "reviewer" => Reviewer,
        "observer" => Observer,
    }
    crate::command::Risk { "low" => Low, "high" => High }
    crate::command::EffectMode {
        "read_only" => ReadOnly,
        "keyed" => Keyed,
        "undeclared" => Undeclared,
    }
    crate::event::EvidenceOf { "submit" => Submit, "fail" => Fail }
    crate::work::EffectStatus {
        "intended" => Intended,
        "settled" => Settled,
        "abandoned" => Abandoned,
        "unknown" => Unknown,
        "reconciled" => Reconciled,
    }
    crate::lease::LeaseEnd {
        "released" => Released,
        "revoked" => Revoked,
        "expired" => Expired,
    }
    crate::state::ApprovalState {
        "pending" => Pending,
        "granted" => Granted,
        "denied" => Denied,
    }
    crate::receipt::Disposition { "applied" => Applied, "evidence" => Evidence }
    crate::agent::JournalStatus {
        "requested" => Requested,
        "intended" => Intended,
        "dispatched" => Dispatched,
        "uncertain" => Uncertain,
        "observed" => Observed,
        "closed" => Closed,
    }
}

/// An opaque value: the item is checked as [`Decoder::skip`] checks it, less what JSON cannot
/// hold (byte strings, negative integers below `i64::MIN`), and its bytes are copied as they
/// are. Anything refused is read again through [`Opaque`]'s `Deserialize`, which words why.
impl<'de> Decode<'de> for Opaque {
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        or_derive(de, |de| {
            let start = de.input.pos;
            skip_json(de)?;
            Ok(Opaque::from_canonical(&de.input.bytes[start..de.input.pos]))
        })
    }

    /// A present opaque field is `Some`, `null` included: `null` is an opaque value.
    fn decode_present(de: &mut Decoder<'de>) -> Result<Option<Self>, CanonError> {
        Opaque::decode(de).map(Some)
    }
}

/// Steps over one item of JSON's types, checking it as reading it would.
fn skip_json(de: &mut Decoder<'_>) -> Result<(), CanonError> {
    let start = de.input.pos;
    let (major, arg) = de.input.head()?;
    match major {
        0 => {}
        1 if i64::try_from(arg).is_ok() => {}
        3 => {
            de.text(arg, start)?;
        }
        4 => {
            let n = de.input.length(arg, start)?;
            de.enter(start)?;
            for _ in 0..n {
                skip_json(de)?;
            }
            de.depth -= 1;
        }
        5 => {
            let n = de.input.length(arg, start)?;
            de.enter(start)?;
            let mut previous = None;
            for _ in 0..n {
                let key_start = de.input.pos;
                let (major, arg) = de.input.head()?;
                if major != 3 {
                    return Err(refused("", key_start));
                }
                de.text(arg, key_start)?;
                de.input.next_key(&mut previous, key_start)?;
                skip_json(de)?;
            }
            de.depth -= 1;
        }
        7 => {
            simple(arg, start)?;
        }
        _ => return Err(refused("", start)),
    }
    Ok(())
}

/// Reads an item with `read`; where it refuses, the item is read again from its start through
/// `T`'s derived `Deserialize`, which decides and words why (leaves only: their derives are
/// small, and built for the states read whole anyway).
#[inline(always)]
fn or_derive<'de, T: de::Deserialize<'de>>(
    de: &mut Decoder<'de>,
    read: impl FnOnce(&mut Decoder<'de>) -> Result<T, CanonError>,
) -> Result<T, CanonError> {
    let (pos, depth) = (de.input.pos, de.depth);
    match read(de) {
        Ok(value) => Ok(value),
        Err(_) => {
            de.input.pos = pos;
            de.depth = depth;
            by_derive(de)
        }
    }
}

/// [`or_derive`]'s way back: an error `T` raises itself names where the item starts.
#[cold]
#[inline(never)]
fn by_derive<'de, T: de::Deserialize<'de>>(de: &mut Decoder<'de>) -> Result<T, CanonError> {
    let at = de.input.pos;
    T::deserialize(de).map_err(|e| locate(e, at))
}

impl<'de> Decode<'de> for u64 {
    #[inline]
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        or_derive(de, |de| {
            let start = de.input.pos;
            match de.input.head()? {
                (0, n) => Ok(n),
                _ => Err(refused("", start)),
            }
        })
    }
}

impl<'de> Decode<'de> for u32 {
    #[inline]
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        or_derive(de, |de| {
            let start = de.input.pos;
            match de.input.head()? {
                (0, n) => u32::try_from(n).map_err(|_| refused("", start)),
                _ => Err(refused("", start)),
            }
        })
    }
}

impl<'de> Decode<'de> for bool {
    #[inline]
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        or_derive(de, |de| {
            let b = match de.input.peek()? {
                0xf4 => false,
                0xf5 => true,
                _ => return Err(refused("", de.input.pos)),
            };
            de.input.pos += 1;
            Ok(b)
        })
    }
}

/// A text string's bytes where they lie, unchecked, with the offset of its head (for the
/// readers that check the bytes themselves).
fn text_bytes<'de>(de: &mut Decoder<'de>) -> Result<(usize, &'de [u8]), CanonError> {
    let start = de.input.pos;
    let (major, arg) = de.input.head()?;
    if major != 3 {
        return Err(Refusal::ExpectedText.at(start));
    }
    let n = de.input.length(arg, start)?;
    Ok((start, de.input.take(n)?))
}

/// 32 bytes as 64 lowercase hex digits, decoded where they lie, the text's head read as two
/// fixed bytes (`0x78 0x40`, its only canonical form): the derive's checks, without its
/// visitors.
macro_rules! decode_hex32 {
    ($($ty:ty),*) => {
        $(
            impl<'de> Decode<'de> for $ty {
                #[inline]
                fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
                    or_derive(de, |de| {
                        let start = de.input.pos;
                        let item = de.input.bytes[start..]
                            .first_chunk::<66>()
                            .filter(|item| item[..2] == [0x78, 64])
                            .ok_or_else(|| refused("", start))?;
                        let bytes = crate::crypto::hex_digits::<32>(&item[2..])
                            .ok_or_else(|| refused("", start))?;
                        de.input.pos += 66;
                        Ok(Self(bytes))
                    })
                }
            }
        )*
    };
}

decode_hex32!(crate::crypto::Hash, crate::crypto::PublicKey);

/// Text checked to be UTF-8, as the derive reads it.
impl<'de> Decode<'de> for compact_str::CompactString {
    #[inline]
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        or_derive(de, |de| {
            let (start, text) = text_bytes(de)?;
            std::str::from_utf8(text)
                .map(compact_str::CompactString::new)
                .map_err(|_| refused("", start))
        })
    }
}

/// Its text checked against the alphabet where it lies (the derive checks UTF-8 first).
impl<'de> Decode<'de> for crate::id::Id {
    #[inline]
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        or_derive(de, |de| {
            let (start, text) = text_bytes(de)?;
            crate::id::Id::from_bytes_checked(text).ok_or_else(|| refused("", start))
        })
    }
}

/// Its text's bytes, decoded as hex where they lie (the derive reads a `&str` first).
impl<'de> Decode<'de> for crate::lease::LeaseId {
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        or_derive(de, |de| {
            let (start, text) = text_bytes(de)?;
            <Self as crate::crypto::FromHex>::parse_bytes(text).map_err(|_| refused("", start))
        })
    }
}

/// 128 lowercase hex digits, decoded where they lie (the derive reads the text's bytes where
/// they lie too).
impl<'de> Decode<'de> for crate::crypto::Signature {
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        or_derive(de, |de| {
            let (start, text) = text_bytes(de)?;
            crate::crypto::hex_digits::<64>(text)
                .map(Self)
                .ok_or_else(|| refused("", start))
        })
    }
}

/// An array of exactly two, as serde reads `[T; 2]` from this decoder.
impl<'de, T: Decode<'de>> Decode<'de> for [T; 2] {
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        let start = de.input.pos;
        let (major, arg) = de.input.head()?;
        if major != 4 {
            return Err(refused("expected an array", start));
        }
        if arg != 2 {
            return Err(refused(
                &format!("expected an array of 2 items, not {arg}"),
                start,
            ));
        }
        de.enter(start)?;
        let value = [T::decode(de)?, T::decode(de)?];
        de.depth -= 1;
        Ok(value)
    }
}

impl<'de, T: Decode<'de>> Decode<'de> for Option<T> {
    /// As `T` reads a field that is present ([`Decode::decode_present`]).
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        T::decode_present(de)
    }

    fn absent() -> Option<Self> {
        Some(None)
    }
}

impl<'de, T: Decode<'de>> Decode<'de> for Box<[T]> {
    /// An array, as serde reads a boxed slice: as a `Vec`, then boxed.
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        Vec::decode(de).map(Vec::into_boxed_slice)
    }
}

#[cfg(test)]
impl<'de, A: Decode<'de>, B: Decode<'de>, C: Decode<'de>, D: Decode<'de>> Decode<'de>
    for (A, B, C, D)
{
    /// An array of four, for tests.
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        let start = de.input.pos;
        if de.input.head()? != (4, 4) {
            return Err(refused("expected an array of four", start));
        }
        de.enter(start)?;
        let value = (
            A::decode(de)?,
            B::decode(de)?,
            C::decode(de)?,
            D::decode(de)?,
        );
        de.depth -= 1;
        Ok(value)
    }
}

impl<'de, T: Decode<'de>> Decode<'de> for Vec<T> {
    /// An array, as serde reads a sequence from this decoder.
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        let start = de.input.pos;
        let (major, arg) = de.input.head()?;
        if major != 4 {
            return Err(refused("expected an array", start));
        }
        array_items(de, arg, start)
    }
}

impl<'de, K: Decode<'de> + Ord, V: Decode<'de>> Decode<'de> for std::collections::BTreeMap<K, V> {
    /// A map, its keys in canonical order, as serde reads a map from this decoder.
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        let mut map = std::collections::BTreeMap::new();
        map_entries(de, |key, value| map.insert(key, value).is_some())?;
        Ok(map)
    }
}

impl<'de, V: Decode<'de>> Decode<'de> for crate::id_map::IdMap<V> {
    /// A map keyed by identifiers, its keys in canonical order, as its `Deserialize` reads one
    /// from this decoder (two keys are never one identifier: canonical order has no repeats).
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        let mut map = crate::id_map::IdMap::new();
        map_entries(de, |key, value| map.insert(key, value))?;
        Ok(map)
    }
}

impl<'de, T: Decode<'de> + Ord> Decode<'de> for std::collections::BTreeSet<T> {
    /// An array, as serde reads a set: an item given twice is kept once.
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        Vec::decode(de).map(|items| items.into_iter().collect())
    }
}

impl<'de, T: Decode<'de>> Decode<'de> for std::collections::VecDeque<T> {
    /// An array, as serde reads a sequence.
    fn decode(de: &mut Decoder<'de>) -> Result<Self, CanonError> {
        Vec::decode(de).map(Into::into)
    }
}

/// Reads a map, its keys in canonical order, handing each entry to `insert`, which says
/// whether its key was there already (refused: `duplicate map key`).
pub(crate) fn map_entries<'de, K: Decode<'de>, V: Decode<'de>>(
    de: &mut Decoder<'de>,
    mut insert: impl FnMut(K, V) -> bool,
) -> Result<(), CanonError> {
    let n = map_head(de)?;
    let mut previous = None;
    for _ in 0..n {
        let key_start = de.input.pos;
        let key = K::decode(de)?;
        de.input.next_key(&mut previous, key_start)?;
        // Keys in canonical order are distinct encodings; a type with two encodings of one
        // key is left to the derive.
        if insert(key, V::decode(de)?) {
            return Err(refused("duplicate map key", key_start));
        }
    }
    de.depth -= 1;
    Ok(())
}

/// Reads a map's head for a hand-written reader: the number of its entries, which sit one
/// level deeper.
#[inline]
fn map_head(de: &mut Decoder<'_>) -> Result<usize, CanonError> {
    let start = de.input.pos;
    let (major, arg) = de.input.head()?;
    if major != 5 {
        return Err(Refusal::ExpectedMap.at(start));
    }
    let n = de.input.length(arg, start)?;
    de.enter(start)?;
    Ok(n)
}

/// The items of an array whose head, at `start` with argument `arg`, was just read; they sit
/// one level deeper.
fn array_items<'de, T: Decode<'de>>(
    de: &mut Decoder<'de>,
    arg: u64,
    start: usize,
) -> Result<Vec<T>, CanonError> {
    let n = de.input.length(arg, start)?;
    de.enter(start)?;
    let mut items = Vec::with_capacity(n.min(super::PREALLOC_LIMIT));
    for _ in 0..n {
        items.push(T::decode(de)?);
    }
    de.depth -= 1;
    Ok(items)
}

/// Why a reader refused, at `at`. A leaf's reader refuses unworded (`""`): the leaf's derive
/// reads the item again and words it ([`or_derive`]).
#[cold]
pub(crate) fn refused(why: &str, at: usize) -> CanonError {
    CanonError::new(why, at)
}

/// A key that is none of a struct's fields (its text, at the offset after it).
#[cold]
pub(crate) fn unknown_field(key: &[u8], after: usize) -> CanonError {
    CanonError::new(
        format!("unknown field `{}`", String::from_utf8_lossy(key)),
        after - key.len(),
    )
}

/// A variant name that is none of `names`, worded as serde's derive words it.
#[cold]
pub(crate) fn unknown_variant(name: &str, names: &'static [&'static str]) -> CanonError {
    <CanonError as de::Error>::unknown_variant(name, names)
}

/// A field whose key the map, which ends at `end`, does not have.
#[cold]
pub(crate) fn missing_field(name: &str, end: usize) -> CanonError {
    CanonError::new(format!("missing field `{name}`"), end)
}

/// Reads one data item spanning the whole of `bytes` with its hand-written reader, as
/// `from_slice(bytes, Strictness::Canonical)` reads it with its `Deserialize`: an error raised
/// by a type's own checks carries the offset where reading stopped.
pub(crate) fn read_whole<'de, T: Decode<'de>>(bytes: &'de [u8]) -> Result<T, CanonError> {
    let mut de = Decoder::nested(bytes, 0);
    let value = T::decode(&mut de).map_err(|e| locate(e, de.input.pos))?;
    de.finish()?;
    Ok(value)
}

/// Reads `bytes`, each of its bytes replaced by every other value in turn and cut at every
/// length, by `T`'s reader ([`read_whole`]) and by its derive through this decoder: both take
/// or both refuse each input, and what they take they read alike. Where `tagged` (`T` is or
/// holds an internally tagged enum, whose entries serde's derive buffers), the derive may also
/// take an input the reader refuses, but never the canonical encoding of what it read: a byte
/// string as a key, which canonical reading refuses. Answers how many inputs both took and
/// how many both refused.
#[cfg(test)]
pub(crate) fn every_byte_reads_as_the_derive<T>(bytes: &[u8], tagged: bool) -> (usize, usize)
where
    T: for<'de> Decode<'de> + de::DeserializeOwned + serde::Serialize + PartialEq,
    T: std::fmt::Debug,
{
    let (mut accepted, mut refused) = (0, 0);
    let mut compare = |input: &[u8], what: &dyn std::fmt::Display| match (
        read_whole::<T>(input).ok(),
        from_canonical::<T>(input).ok(),
    ) {
        (Some(r), d) => {
            assert_eq!(Some(r), d, "{what}: {input:02x?}");
            accepted += 1;
        }
        (None, None) => refused += 1,
        (None, Some(d)) => {
            assert!(tagged, "{what}: only the derive takes {input:02x?}");
            let again = super::to_vec(&d).expect("encodes");
            assert_ne!(again, input, "{what}: canonical, refused");
        }
    };
    compare(bytes, &"as encoded");
    for i in 0..bytes.len() {
        for value in 0..=255u8 {
            let mut changed = bytes.to_vec();
            changed[i] = value;
            compare(&changed, &format_args!("byte {i} = {value:#04x}"));
        }
    }
    for cut in 0..bytes.len() {
        compare(&bytes[..cut], &format_args!("cut at {cut}"));
    }
    (accepted, refused)
}

/// The canonical encoding of the map `bytes` encode with one more entry, `"zz": [1, null]`,
/// a key that is none of the fields of any struct read here.
#[cfg(test)]
pub(crate) fn with_unknown_key(bytes: &[u8]) -> Vec<u8> {
    use ciborium::Value;
    let value = super::decode(bytes, Strictness::Canonical).expect("decodes");
    let Value::Map(mut map) = value else {
        panic!("a map")
    };
    map.push((
        Value::Text("zz".into()),
        Value::Array(vec![Value::from(1), Value::Null]),
    ));
    super::encode_value(&Value::Map(map)).expect("encodes")
}

/// The entries of a map, read key by key in their stored order (for [`DecodeFields`]).
pub(crate) struct Entries<'a, 'de> {
    de: &'a mut Decoder<'de>,
    left: usize,
    previous: Option<(usize, usize)>,
    /// The encoded key of an entry to check but not show: an enum's tag, whose text value
    /// [`Fields::tagged`] already read and checked.
    skip: Option<&'a [u8]>,
    /// Where to note the values of some keys, and where the value of the entry whose key was
    /// just read starts if it is one of them.
    spans: Option<&'a mut KeySpans>,
    noting: Option<usize>,
}

impl<'a, 'de> Entries<'a, 'de> {
    /// Reads a map head; the entries sit one level deeper.
    pub(crate) fn open(
        de: &'a mut Decoder<'de>,
        skip: Option<&'a [u8]>,
    ) -> Result<Self, CanonError> {
        let left = map_head(de)?;
        Ok(Entries {
            de,
            left,
            previous: None,
            skip,
            spans: None,
            noting: None,
        })
    }

    /// The next key's text, not checked to be UTF-8 (callers match it against their field
    /// names and refuse anything else), after checking that it sorts after the key before
    /// it; `None` once every entry is read.
    #[inline]
    pub(crate) fn key(&mut self) -> Result<Option<&'de [u8]>, CanonError> {
        loop {
            if self.left == 0 {
                return Ok(None);
            }
            self.left -= 1;
            let reader = &mut self.de.input;
            let start = reader.pos;
            let (major, arg) = reader.head()?;
            if major != 3 {
                return Err(Refusal::ExpectedText.at(start));
            }
            let n = reader.length(arg, start)?;
            let text = reader.take(n)?;
            self.de.input.next_key(&mut self.previous, start)?;
            if self.skip == Some(&self.de.input.bytes[start..self.de.input.pos]) {
                // The tag's value, which [`Fields::tagged`] read as text and checked before
                // the variant's entries were opened (keys are unique, so this is that entry):
                // stepped over without checking its UTF-8 again.
                text_bytes(self.de)?;
                continue;
            }
            if let Some(spans) = &self.spans {
                if (spans.wants)(text) {
                    if spans.len == KeySpans::MAX {
                        return Err(refused("too many opaque values", start));
                    }
                    self.noting = Some(self.de.input.pos);
                }
            }
            return Ok(Some(text));
        }
    }

    /// The value of the entry whose key was just read.
    #[inline]
    pub(crate) fn value<T: Decode<'de>>(&mut self) -> Result<T, CanonError> {
        self.value_with(T::decode)
    }

    /// The value of the entry whose key was just read, read by `read`.
    #[inline]
    pub(crate) fn value_with<T>(
        &mut self,
        read: impl FnOnce(&mut Decoder<'de>) -> Result<T, CanonError>,
    ) -> Result<T, CanonError> {
        let value = read(self.de)?;
        if let (Some(start), Some(spans)) = (self.noting.take(), self.spans.as_deref_mut()) {
            spans.found[spans.len] = (start, self.de.input.pos);
            spans.len += 1;
        }
        Ok(value)
    }

    /// The value of the entry whose key was just read, for an `Option` field the encoder
    /// writes only when it is `Some`: read as `Some` ([`decode_struct!`]'s `if is_some`).
    #[inline]
    pub(crate) fn value_some<T: Decode<'de>>(&mut self) -> Result<Option<T>, CanonError> {
        self.value_with(|de| T::decode(de).map(Some))
    }

    /// Offset of the next byte to read.
    pub(crate) fn pos(&self) -> usize {
        self.de.input.pos
    }

    /// Steps over the value of the entry whose key, `key`, was just read and is none of the
    /// struct's fields, checking both as serde's derive does for a struct that ignores
    /// unknown fields: the key must be valid UTF-8, the value any valid item.
    pub(crate) fn skip_value(&mut self, key: &[u8]) -> Result<(), CanonError> {
        if std::str::from_utf8(key).is_err() {
            return Err(refused(
                "text string is not valid UTF-8",
                self.de.input.pos - key.len(),
            ));
        }
        self.noting = None;
        self.de.skip()
    }

    /// Leaves the map, whose entries have all been read.
    pub(crate) fn finish(self) {
        self.de.depth -= 1;
        if let Some(spans) = self.spans {
            spans.complete = true;
        }
    }
}

/// Generates [`Decode`] and [`DecodeFields`] for structs from their field names (a field
/// whose key differs from its name is written `name = "key"`). The struct is built with every
/// field named, so a field left out of the list does not compile; a field without its key
/// (unless it is an `Option`) is refused (`missing field`), and so is a key that is not one of
/// the names (`unknown field`), unless the struct is marked `[ignore_unknown]`, as a struct
/// whose derive does not deny unknown fields must be: such entries are checked and skipped.
/// A field written `name with reader` is read by `reader` (a `fn(&mut Decoder) -> Result<T,
/// CanonError>`) and may not be left out; an `Option` field written `name if is_some` (the
/// encoder leaves it out when it is `None`) is `Some` when present, so `null` there is what
/// its type makes of it (refused, unless the type holds `null`, as an opaque value does), never
/// `None`, whose canonical encoding leaves the key out; fields after `; skip` are not read and
/// take their `Default` (as serde's `#[serde(skip)]`).
macro_rules! decode_struct {
    ($(
        $ty:ident $([$ignore:ident])? {
            $($field:ident $(= $key:literal)? $(if $present:ident)? $(with $read:path)?),* $(,)?
            $(; skip $($skipped:ident),* $(,)?)?
        }
    )*) => {
        $(
            impl<'de> $crate::canonical::Decode<'de> for $ty {
                fn decode(
                    de: &mut $crate::canonical::Decoder<'de>,
                ) -> ::std::result::Result<Self, $crate::canonical::CanonError> {
                    let entries = $crate::canonical::Entries::open(de, None)?;
                    $crate::canonical::DecodeFields::decode_fields(entries)
                }
            }

            impl<'de> $crate::canonical::DecodeFields<'de> for $ty {
                // A struct without fields reads no key and leaves these unused.
                #[allow(unused_mut, unused_variables)]
                fn decode_fields(
                    mut entries: $crate::canonical::Entries<'_, 'de>,
                ) -> ::std::result::Result<Self, $crate::canonical::CanonError> {
                    $( let mut $field = None; )*
                    while let Some(key) = entries.key()? {
                        $(
                            if key == $crate::canonical::decode_struct!(@key $field $($key)?).as_bytes() {
                                $field = Some($crate::canonical::decode_struct!(
                                    @value entries $(if $present)? $($read)?
                                ));
                                continue;
                            }
                        )*
                        $(
                            $crate::canonical::decode_struct!(@ignore $ignore);
                            entries.skip_value(key)?;
                            continue;
                        )?
                        #[allow(unreachable_code)]
                        return Err($crate::canonical::unknown_field(key, entries.pos()));
                    }
                    let at = entries.pos();
                    entries.finish();
                    Ok($ty {
                        $(
                            $field: match $field {
                                Some(value) => value,
                                None => $crate::canonical::decode_struct!(@absent $($read)?).ok_or_else(|| {
                                    $crate::canonical::missing_field(
                                        $crate::canonical::decode_struct!(@key $field $($key)?),
                                        at,
                                    )
                                })?,
                            },
                        )*
                        $($( $skipped: ::std::default::Default::default(), )*)?
                    })
                }
            }
        )*
    };
    (@value $entries:ident) => { $entries.value()? };
    // An `Option` field written only when it is `Some`: present, it is `Some`.
    (@value $entries:ident if $present:ident) => { $entries.value_some()? };
    (@value $entries:ident $read:path) => { $entries.value_with($read)? };
    // A field read `with` a reader of its own may not be left out.
    (@absent) => { $crate::canonical::Decode::absent() };
    (@absent $read:path) => { None };
    (@key $field:ident) => { stringify!($field) };
    (@key $field:ident $key:literal) => { $key };
    (@ignore ignore_unknown) => {};
}
pub(crate) use decode_struct;

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// The tag is found wherever canonical order puts it, here after five shorter keys, and
    /// the variant reads every other entry.
    #[test]
    fn tagged_finds_the_tag_after_any_number_of_entries() {
        #[derive(Debug, Deserialize, PartialEq)]
        #[serde(deny_unknown_fields)]
        struct V {
            a: u8,
            b: u8,
            c: u8,
            d: u8,
            e: u8,
            zzzzz: u8,
        }
        // {"k": {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "type": "x", "zzzzz": 6}}
        let mut bytes = vec![0xa1, 0x61, b'k', 0xa7];
        for (k, v) in [(b'a', 1u8), (b'b', 2), (b'c', 3), (b'd', 4), (b'e', 5)] {
            bytes.extend_from_slice(&[0x61, k, v]);
        }
        bytes.extend_from_slice(&[0x64, b't', b'y', b'p', b'e', 0x61, b'x']);
        bytes.extend_from_slice(&[0x65, b'z', b'z', b'z', b'z', b'z', 6]);
        let mut f = Fields::new(&bytes, 1).expect("a map of one entry");
        let (name, v) = f
            .tagged("k", "type", None, |name, de| {
                Ok((name, V::deserialize(de)?))
            })
            .expect("decodes");
        f.finish().expect("nothing follows");
        assert_eq!(name, "x");
        assert_eq!(
            v,
            V {
                a: 1,
                b: 2,
                c: 3,
                d: 4,
                e: 5,
                zzzzz: 6
            }
        );
    }

    /// Keys read by name are not compared with the previous key: a key repeated, out of
    /// canonical order or unknown is still refused, because it is not the name expected next.
    #[test]
    fn fields_refuse_keys_other_than_the_next_name() {
        let read = |entries: &[[u8; 3]]| {
            let mut bytes = vec![0xa0 | entries.len() as u8];
            for e in entries {
                bytes.extend_from_slice(e);
            }
            let mut f = Fields::new(&bytes, 2)?;
            let a: u8 = f.field("a")?;
            let b: u8 = f.field("b")?;
            f.finish()?;
            Ok::<_, CanonError>((a, b))
        };
        let (a, b, c) = ([0x61, b'a', 1], [0x61, b'b', 2], [0x61, b'c', 3]);
        assert_eq!(read(&[a, b]), Ok((1, 2)));
        for entries in [[a, a], [b, a], [b, b], [a, c], [c, b]] {
            let e = read(&entries).expect_err("not the next name");
            assert!(e.reason.contains("expected the key"), "{e}");
        }
    }

    /// The search for the tag stops at it; what follows is still checked, by the variant's
    /// own pass: a second tag is a duplicate key, and a malformed entry is refused.
    #[test]
    fn tagged_checks_the_entries_after_the_tag() {
        #[derive(Debug, Deserialize)]
        struct V {
            #[allow(dead_code)]
            zzzzz: u8,
        }
        let decode = |entries: &[&[u8]]| {
            let mut bytes = vec![0xa1, 0x61, b'k', 0xa0 | entries.len() as u8];
            for e in entries {
                bytes.extend_from_slice(e);
            }
            let mut f = Fields::new(&bytes, 1).expect("a map of one entry");
            f.tagged("k", "type", None, |_, de| V::deserialize(de))
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let tag: &[u8] = &[0x64, b't', b'y', b'p', b'e', 0x61, b'x'];
        let z: &[u8] = &[0x65, b'z', b'z', b'z', b'z', b'z', 6];
        assert_eq!(decode(&[tag, z]), Ok(()));
        let twice = decode(&[tag, tag, z]).expect_err("a second tag");
        assert!(twice.contains("duplicate map key"), "{twice}");
        let bad: &[u8] = &[0x65, b'z', b'z', b'z', b'z', b'z', 0xf9, 0, 0];
        assert!(decode(&[tag, bad]).is_err(), "a float after the tag");
    }

    /// Struct keys spelled like a field name are matched as bytes; the decoder's checks still
    /// hold for them: canonical order, no duplicates, unknown names refused where the type
    /// refuses them, and names of 24 bytes or more read the ordinary way.
    #[test]
    fn struct_keys_matched_as_bytes_are_still_checked() {
        #[derive(Debug, Deserialize, PartialEq)]
        #[serde(deny_unknown_fields)]
        struct S {
            ab: u8,
            z: u8,
            a_field_name_of_24_bytes: u8,
        }
        let long = b"a_field_name_of_24_bytes";
        let entry = |k: &[u8], v: u8| {
            let mut e = if k.len() < 24 {
                vec![0x60 | k.len() as u8]
            } else {
                vec![0x78, k.len() as u8]
            };
            e.extend_from_slice(k);
            e.push(v);
            e
        };
        let map = |entries: &[Vec<u8>]| {
            let mut bytes = vec![0xa0 | entries.len() as u8];
            for e in entries {
                bytes.extend_from_slice(e);
            }
            from_canonical::<S>(&bytes)
        };
        assert_eq!(
            map(&[entry(b"z", 1), entry(b"ab", 2), entry(long, 3)]),
            Ok(S {
                ab: 2,
                z: 1,
                a_field_name_of_24_bytes: 3
            })
        );
        // Out of order, twice the same, unknown, and (no field name then) not UTF-8.
        for (first, second, why) in [
            (entry(b"ab", 2), entry(b"z", 1), "canonical order"),
            (entry(b"z", 1), entry(b"z", 1), "duplicate map key"),
            (entry(b"y", 1), entry(b"ab", 2), "unknown field"),
            (entry(b"\xff", 1), entry(b"ab", 2), "UTF-8"),
        ] {
            let e = map(&[first, second, entry(long, 3)]).expect_err(why);
            assert!(e.reason.contains(why), "{e} should say {why:?}");
        }
    }

    /// A hash reads its text's bytes unchecked and decodes them as lowercase hex, which
    /// refuses everything that is not, UTF-8 or not.
    #[test]
    fn a_hash_refuses_whatever_is_not_lowercase_hex() {
        let text = |body: &[u8]| {
            let mut bytes = vec![0x78, body.len() as u8];
            bytes.extend_from_slice(body);
            from_canonical::<crate::Hash>(&bytes)
        };
        let good = crate::Hash::of(b"x");
        assert_eq!(text(good.to_hex().as_bytes()), Ok(good));
        let mut bad = good.to_hex().into_bytes();
        bad[7] = 0xff;
        assert!(text(&bad).expect_err("not UTF-8").reason.contains("UTF-8"));
        bad[7] = b'A';
        assert!(text(&bad)
            .expect_err("uppercase")
            .reason
            .contains("lowercase"));
        bad[7] = b'g';
        assert!(text(&bad).expect_err("not hex").reason.contains("not hex"));
        assert!(text(&bad[..63]).is_err());
        // Bytes spelling the same digits are a different encoding.
        let mut as_bytes = vec![0x58, 64];
        as_bytes.extend_from_slice(good.to_hex().as_bytes());
        assert!(from_canonical::<crate::Hash>(&as_bytes).is_err());
    }

    /// Reads `bytes` with a hand-written reader, which must take them all.
    fn by_reader<'de, T: Decode<'de>>(bytes: &'de [u8]) -> Option<T> {
        let mut de = Decoder::nested(bytes, 0);
        let value = T::decode(&mut de).ok()?;
        (de.input.pos == bytes.len()).then_some(value)
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<u64>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (0u64..30).prop_map(Value::from),
            "[a-z$é]{0,30}".prop_map(Value::String),
        ];
        leaf.prop_recursive(6, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec(("[a-z]{0,6}", inner), 0..6)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    /// The same bytes read by the hand-written reader and by serde's: the reader accepts
    /// exactly what serde accepts, and gives the same value.
    fn reader_agrees<T>(bytes: &[u8]) -> Result<(), proptest::test_runner::TestCaseError>
    where
        T: for<'de> Decode<'de> + for<'de> de::Deserialize<'de> + PartialEq + std::fmt::Debug,
    {
        proptest::prop_assert_eq!(by_reader::<T>(bytes), from_canonical::<T>(bytes).ok());
        Ok(())
    }

    proptest::proptest! {
        /// An opaque value reads as its bytes, and its bytes changed or cut are read by the
        /// reader only where serde's path through [`Opaque`] and `serde_json::Value` read
        /// them, to the same value.
        #[test]
        fn value_reader_agrees_with_serde_json(
            value in arb_json(),
            edits in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()), 0..3),
            cut in proptest::option::of(proptest::prelude::any::<proptest::sample::Index>()),
        ) {
            let bytes = super::super::to_vec(&value).expect("no floats");
            proptest::prop_assert_eq!(by_reader::<Opaque>(&bytes), Some(Opaque::from(&value)));
            let mut bad = bytes.clone();
            for (at, b) in &edits {
                let i = at.index(bad.len());
                bad[i] = *b;
            }
            if let Some(cut) = cut {
                bad.truncate(cut.index(bad.len()));
            }
            reader_agrees::<Opaque>(&bad)?;
            // What a stored opaque value was read as before it was kept as bytes.
            proptest::prop_assert_eq!(
                by_reader::<Opaque>(&bad),
                from_canonical::<serde_json::Value>(&bad).ok().map(Opaque::from)
            );
            reader_agrees::<Option<Vec<crate::lease::LeaseId>>>(&bad)?;
            reader_agrees::<Vec<u32>>(&bad)?;
            reader_agrees::<Vec<u64>>(&bad)?;
            reader_agrees::<Vec<bool>>(&bad)?;
            reader_agrees::<Vec<crate::id::Id>>(&bad)?;
        }

        /// Identifiers, integers and booleans read as their derives read them.
        #[test]
        fn leaf_readers_agree_with_serde(
            text in "[a-zA-Z0-9._:@~ é#-]{0,130}",
            n in proptest::prop_oneof![0u64..30, proptest::prelude::any::<u64>()],
            flag in proptest::prelude::any::<bool>(),
            edits in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()), 0..3),
        ) {
            let bytes = super::super::to_vec(&(text.as_str(), n, u32::try_from(n).ok(), flag)).expect("encodes");
            let read = by_reader::<(crate::id::Id, u64, Option<u32>, bool)>(&bytes);
            let serde = from_canonical::<(crate::id::Id, u64, Option<u32>, bool)>(&bytes).ok();
            proptest::prop_assert_eq!(read, serde);
            let mut bad = bytes.clone();
            for (at, b) in &edits {
                let i = at.index(bad.len());
                bad[i] = *b;
            }
            if let Some(read) = by_reader::<(crate::id::Id, u64, Option<u32>, bool)>(&bad) {
                proptest::prop_assert_eq!(Ok(read), from_canonical(&bad));
            }
            reader_agrees::<crate::id::Id>(&super::super::to_vec(&text).expect("text"))?;
        }

        /// Hashes and keys: exactly 64 lowercase hex digits in a text (a byte string, a head
        /// not in shortest form, or any other length refused); aggregates: any UTF-8 text.
        #[test]
        fn hex32_and_text_readers_agree_with_serde(
            text in "[0-9a-fA-Gx]{62,66}",
            edits in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()), 0..3),
        ) {
            let mut bytes = super::super::to_vec(&text).expect("text");
            for (at, b) in &edits {
                let i = at.index(bytes.len());
                bytes[i] = *b;
            }
            reader_agrees::<crate::crypto::Hash>(&bytes)?;
            reader_agrees::<crate::crypto::PublicKey>(&bytes)?;
            reader_agrees::<compact_str::CompactString>(&bytes)?;
            let hash = crate::crypto::Hash([0xa5; 32]);
            let bytes = super::super::to_vec(&hash).expect("text");
            proptest::prop_assert_eq!(by_reader(&bytes), Some(hash));
            // The same digits under a two-byte length head, which is not its shortest form.
            let mut long = vec![0x79, 0, 64];
            long.extend_from_slice(&bytes[2..]);
            proptest::prop_assert!(by_reader::<crate::crypto::Hash>(&long).is_none());
            proptest::prop_assert!(from_canonical::<crate::crypto::Hash>(&long).is_err());
        }

        /// Lease ids: exactly 32 lowercase hex digits.
        #[test]
        fn lease_id_reader_agrees_with_serde(text in "[0-9a-fA-Gx]{30,33}") {
            let bytes = super::super::to_vec(&text).expect("text");
            reader_agrees::<crate::lease::LeaseId>(&bytes)?;
            let id = crate::lease::LeaseId([0x5a; 16]);
            let bytes = super::super::to_vec(&id).expect("text");
            proptest::prop_assert_eq!(by_reader(&bytes), Some(id));
        }
    }

    /// Nesting is counted as the decoder counts it: at the limit the reader refuses what
    /// serde refuses.
    #[test]
    fn value_reader_counts_depth() {
        for levels in [
            super::super::MAX_DEPTH - 1,
            super::super::MAX_DEPTH,
            super::super::MAX_DEPTH + 1,
            super::super::MAX_DEPTH + 2,
        ] {
            let mut bytes = vec![0x81; levels];
            bytes.push(0x00);
            let serde = from_canonical::<Opaque>(&bytes).ok();
            assert_eq!(by_reader::<Opaque>(&bytes), serde, "{levels} levels");
            let json = from_canonical::<serde_json::Value>(&bytes).ok();
            assert_eq!(serde, json.map(Opaque::from), "{levels} levels");
        }
    }

    /// Walking heads finds where an item ends, and gives up on anything that is not whole.
    #[test]
    fn item_end_walks_whole_items_only() {
        let value = serde_json::json!({"a": [1, -2, "x", null, true, {"b": [[], {}]}], "c": "dd"});
        let mut bytes = super::super::to_vec(&value).expect("encodes");
        let end = bytes.len();
        bytes.extend_from_slice(&[0x01, 0x02]);
        assert_eq!(super::super::item_end(&bytes, 0), Some(end));
        assert_eq!(super::super::item_end(&bytes, end), Some(end + 1));
        assert_eq!(super::super::item_end(&bytes[..end - 1], 0), None);
        // A tag, a float, and a map claiming more entries than bytes remain.
        assert_eq!(super::super::item_end(&[0xc1, 0x00], 0), None);
        assert_eq!(super::super::item_end(&[0xf9, 0x00, 0x00], 0), None);
        assert_eq!(
            super::super::item_end(&[0xbb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], 0),
            None
        );
    }

    /// The walk as the reader's heads would take it: what [`super::super::item_end`] must
    /// agree with on every input.
    fn item_end_by_reader(bytes: &[u8], start: usize) -> Option<usize> {
        let mut r = Reader::new(bytes, Strictness::Lenient);
        r.pos = start;
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            let (major, arg) = r.head().ok()?;
            match major {
                0 | 1 => {}
                2 | 3 => {
                    let n = r.length(arg, r.pos).ok()?;
                    r.take(n).ok()?;
                }
                4 => pending = pending.checked_add(arg)?,
                5 => pending = pending.checked_add(arg.checked_mul(2)?)?,
                7 if matches!(arg, 20..=22) => {}
                _ => return None,
            }
            if pending > (bytes.len() - r.pos) as u64 {
                return None;
            }
        }
        Some(r.pos)
    }

    /// Reads each of `variants` as its name and as a map from its name to `null`, each byte of
    /// both changed to every value and every cut, by its reader and by its derive: they take
    /// the same inputs and give the same values, and refuse the same inputs with the same
    /// error, except a map whose content is not `null`, which each words its own way. Answers
    /// how many inputs were taken.
    fn unit_enum_reads_as_its_derive<T>(variants: &[T]) -> usize
    where
        T: for<'de> Decode<'de> + serde::de::DeserializeOwned + serde::Serialize + PartialEq,
        T: std::fmt::Debug,
    {
        let mut taken = 0;
        for v in variants {
            let name = super::super::to_vec(v).expect("encodes");
            assert_eq!(read_whole::<T>(&name).as_ref(), Ok(v));
            let mut map = vec![0xa1];
            map.extend_from_slice(&name);
            map.push(0xf6);
            assert_eq!(read_whole::<T>(&map).as_ref(), Ok(v), "{map:02x?}");
            for bytes in [&name, &map] {
                taken += every_byte_reads_as_the_derive::<T>(bytes, false).0;
                for i in 0..bytes.len() {
                    for value in 0..=255u8 {
                        let mut changed = bytes.to_vec();
                        changed[i] = value;
                        let content_not_null = changed[0] == 0xa1 && i == changed.len() - 1;
                        if let (Err(r), Err(d)) =
                            (read_whole::<T>(&changed), from_canonical::<T>(&changed))
                        {
                            if !(content_not_null && value != 0xf6) {
                                assert_eq!(r, d, "byte {i} = {value:#04x}: {changed:02x?}");
                            }
                        }
                    }
                }
            }
        }
        taken
    }

    /// Every unit enum a stored value holds is read as its derive reads it: its variants'
    /// names are the derive's (`rename_all = "snake_case"`), a map of one entry from a name to
    /// `null` is taken as the derive's `unit_variant` takes it, and an unknown name is refused
    /// in serde's words.
    #[test]
    fn unit_enums_are_read_as_their_derives_read_them() {
        use crate::agent::JournalStatus;
        use crate::command::{EffectMode, Risk, Role};
        use crate::event::EvidenceOf;
        use crate::lease::LeaseEnd;
        use crate::receipt::Disposition;
        use crate::state::ApprovalState;
        use crate::work::{EffectStatus, WorkState};
        let taken = unit_enum_reads_as_its_derive(&[
            WorkState::Queued,
            WorkState::Leased,
            WorkState::Running,
            WorkState::Blocked,
            WorkState::Waiting,
            WorkState::Succeeded,
            WorkState::Failed,
            WorkState::Cancelled,
        ]) + unit_enum_reads_as_its_derive(&[
            Role::Owner,
            Role::Worker,
            Role::Reviewer,
            Role::Observer,
        ]) + unit_enum_reads_as_its_derive(&[Risk::Low, Risk::High])
            + unit_enum_reads_as_its_derive(&[
                EffectMode::ReadOnly,
                EffectMode::Keyed,
                EffectMode::Undeclared,
            ])
            + unit_enum_reads_as_its_derive(&[EvidenceOf::Submit, EvidenceOf::Fail])
            + unit_enum_reads_as_its_derive(&[
                EffectStatus::Intended,
                EffectStatus::Settled,
                EffectStatus::Abandoned,
                EffectStatus::Unknown,
                EffectStatus::Reconciled,
            ])
            + unit_enum_reads_as_its_derive(&[
                LeaseEnd::Released,
                LeaseEnd::Revoked,
                LeaseEnd::Expired,
            ])
            + unit_enum_reads_as_its_derive(&[
                ApprovalState::Pending,
                ApprovalState::Granted,
                ApprovalState::Denied,
            ])
            + unit_enum_reads_as_its_derive(&[Disposition::Applied, Disposition::Evidence])
            + unit_enum_reads_as_its_derive(&[
                JournalStatus::Requested,
                JournalStatus::Intended,
                JournalStatus::Dispatched,
                JournalStatus::Uncertain,
                JournalStatus::Observed,
                JournalStatus::Closed,
            ]);
        // Each variant's two forms, and the inputs that spell a variant by another change.
        assert!(taken >= 2 * 41, "{taken}");
        let unknown = super::super::to_vec(&"paused").expect("encodes");
        let e = read_whole::<WorkState>(&unknown).expect_err("no such variant");
        assert_eq!(
            e.reason,
            "unknown variant `paused`, expected one of `queued`, `leased`, `running`, \
             `blocked`, `waiting`, `succeeded`, `failed`, `cancelled`"
        );
        let e = read_whole::<Risk>(&unknown).expect_err("no such variant");
        assert_eq!(
            e.reason,
            "unknown variant `paused`, expected `low` or `high`"
        );
    }

    /// `String` is text, valid UTF-8, as the derive reads it.
    #[test]
    fn text_is_read_as_its_derive_reads_it() {
        for text in ["", "a", "héllo", &"x".repeat(30)] {
            let bytes = super::super::to_vec(&text).expect("encodes");
            assert_eq!(read_whole::<String>(&bytes).as_deref(), Ok(text));
            let (accepted, refused) = every_byte_reads_as_the_derive::<String>(&bytes, false);
            assert!(accepted > 0 && refused > 0, "{accepted} {refused}");
        }
    }

    proptest::proptest! {
        /// Walking heads without the reader ends where the reader's walk ends, and gives up
        /// where it gives up: on arbitrary bytes, on encoded values, and on their prefixes.
        #[test]
        fn item_end_agrees_with_the_reader(
            noise in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            value in arb_json(),
            cut in 0usize..4096,
            start in 0usize..8,
        ) {
            proptest::prop_assert_eq!(
                super::super::item_end(&noise, start),
                item_end_by_reader(&noise, start)
            );
            let bytes = super::super::to_vec(&value).expect("encodes");
            proptest::prop_assert_eq!(super::super::item_end(&bytes, 0), Some(bytes.len()));
            let prefix = &bytes[..cut.min(bytes.len())];
            proptest::prop_assert_eq!(
                super::super::item_end(prefix, 0),
                item_end_by_reader(prefix, 0)
            );
        }
    }
}
