//! A canonical CBOR deserializer that reads from an [`std::io::Read`] through a small window,
//! so that a large value (a snapshot's state) is decoded without its encoded bytes ever being
//! held whole beside it.
//!
//! It checks exactly what the slice decoder of [`super::de`] checks (shortest heads, sorted and
//! unique map keys, definite lengths, no floats or tags, bounded depth, lengths within the
//! declared input) and words its errors the same way, at the same offsets. It hands serde
//! transient strings and bytes instead of borrowed ones, and reads a receipt index (the
//! `ITEM_BYTES` newtype) through the ordinary path, which accepts and builds the same values as
//! the hand-written reader the slice decoder uses.
//!
//! Large maps of one shape (a snapshot's work items and receipts) are read entry by entry
//! ([`MapEntries`]): an entry whole in the window is read by a hand-written reader or by the
//! slice decoder, any other by the ordinary path, which also words every error.
//!
//! The bytes read can be fed to SHA-256 digests ("taps") while they pass, which is how a
//! streamed snapshot is hashed without a second pass. The core does no IO: the reader is the
//! host's.

use std::cmp::Ordering;
use std::io::Read;

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use sha2::{Digest, Sha256};

use super::{CanonError, MAX_DEPTH};

/// Bytes asked of the reader at a time.
const PIECE: usize = 1 << 20;

/// The input: a window over what the reader gave, the offset of the next byte, the declared
/// length, and the digests the passing bytes feed.
pub(crate) struct Source<R: Read> {
    inner: R,
    /// Bytes read and not yet dropped; `buf[..filled]` is valid.
    buf: Vec<u8>,
    filled: usize,
    /// Offset (in the input) of `buf[0]`.
    base: usize,
    /// Offset of the next byte to read.
    pos: usize,
    /// Length of the whole input.
    len: usize,
    /// Offset up to which the taps have been fed.
    fed: usize,
    /// The earliest offset that must stay in the window (the start of a key being read).
    mark: Option<usize>,
    /// Digests fed every byte that passes while they are on.
    taps: [(Sha256, bool); 2],
}

impl<R: Read> Source<R> {
    /// A source of `len` bytes from `inner`.
    pub(crate) fn new(inner: R, len: usize) -> Self {
        Source {
            inner,
            buf: Vec::new(),
            filled: 0,
            base: 0,
            pos: 0,
            len,
            fed: 0,
            mark: None,
            taps: [(Sha256::new(), false), (Sha256::new(), false)],
        }
    }

    /// Offset of the next byte to read.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Feeds the bytes read since the last call to the taps that are on.
    fn feed(&mut self) {
        if self.fed < self.pos {
            let bytes = &self.buf[self.fed - self.base..self.pos - self.base];
            for (digest, on) in &mut self.taps {
                if *on {
                    digest.update(bytes);
                }
            }
            self.fed = self.pos;
        }
    }

    /// Turns tap `i` on or off from the current offset on.
    pub(crate) fn tap(&mut self, i: usize, on: bool) {
        self.feed();
        self.taps[i].1 = on;
    }

    /// Feeds `bytes` to tap `i` as if they had been read.
    pub(crate) fn tap_extra(&mut self, i: usize, bytes: &[u8]) {
        self.taps[i].0.update(bytes);
    }

    /// The digest of tap `i` (after every byte read has been fed).
    pub(crate) fn digest(&mut self, i: usize) -> [u8; 32] {
        self.feed();
        std::mem::take(&mut self.taps[i].0).finalize().into()
    }

    /// Bytes available in the window from `pos`.
    fn available(&self) -> usize {
        self.base + self.filled - self.pos
    }

    /// Makes `n` bytes from `pos` available; `n` must not pass the end of the input.
    fn fill(&mut self, n: usize) -> Result<(), CanonError> {
        if self.available() >= n {
            return Ok(());
        }
        self.feed();
        // Drop what no one needs any more: read, fed, and not part of a key being read.
        let keep = self.mark.map_or(self.pos, |m| m.min(self.pos));
        let done = keep - self.base;
        if done > 0 {
            self.buf.copy_within(done..self.filled, 0);
            self.filled -= done;
            self.base = keep;
        }
        let want = (self.pos - self.base) + n;
        let wanted_len = want.max(PIECE).min(self.len - self.base);
        if self.buf.len() < wanted_len {
            self.buf.resize(wanted_len, 0);
        }
        while self.filled < want {
            let room = self.buf.len().min(self.len - self.base);
            match self.inner.read(&mut self.buf[self.filled..room]) {
                Ok(0) => return Err(CanonError::new("the input ended early", self.pos)),
                Ok(k) => self.filled += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    return Err(CanonError::new("the input could not be read", self.pos));
                }
            }
        }
        Ok(())
    }

    /// Up to `n` bytes from `pos`, fewer only at the end of the input; not consumed.
    fn peek_upto(&mut self, n: usize) -> Result<&[u8], CanonError> {
        let n = n.min(self.len - self.pos);
        self.fill(n)?;
        let at = self.pos - self.base;
        Ok(&self.buf[at..at + n])
    }

    /// The next byte, not consumed.
    fn peek(&mut self) -> Result<u8, CanonError> {
        if self.pos >= self.len {
            return Err(CanonError::new("unexpected end of input", self.pos));
        }
        self.fill(1)?;
        Ok(self.buf[self.pos - self.base])
    }

    /// The next `n` bytes, consumed.
    fn take(&mut self, n: usize) -> Result<&[u8], CanonError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.len)
            .ok_or_else(|| CanonError::new("unexpected end of input", self.pos))?;
        self.fill(n)?;
        let at = self.pos - self.base;
        self.pos = end;
        Ok(&self.buf[at..at + n])
    }

    /// Consumes `n` bytes without needing them in the window at once.
    fn discard(&mut self, mut n: usize) -> Result<(), CanonError> {
        if self.pos.checked_add(n).is_none_or(|end| end > self.len) {
            return Err(CanonError::new("unexpected end of input", self.pos));
        }
        while n > 0 {
            let k = n.min(PIECE);
            self.take(k)?;
            n -= k;
        }
        Ok(())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], CanonError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// An initial byte and its argument, as [`super::Reader`] reads them (canonical only):
    /// a one-byte head already in the window inline, the rest by [`Source::head_long`].
    #[inline]
    fn head(&mut self) -> Result<(u8, u64), CanonError> {
        if self.available() > 0 {
            let initial = self.buf[self.pos - self.base];
            if initial & 0x1f < 24 {
                self.pos += 1;
                return Ok((initial >> 5, u64::from(initial & 0x1f)));
            }
        }
        self.head_long()
    }

    /// [`Source::head`] for a head with a following argument, or not in the window yet.
    #[inline(never)]
    fn head_long(&mut self) -> Result<(u8, u64), CanonError> {
        let start = self.pos;
        let [initial] = self.array::<1>()?;
        let major = initial >> 5;
        let info = initial & 0x1f;
        let arg = match info {
            0..=23 => u64::from(info),
            24 => u64::from(self.array::<1>()?[0]),
            25 => u64::from(u16::from_be_bytes(self.array()?)),
            26 => u64::from(u32::from_be_bytes(self.array()?)),
            27 => u64::from_be_bytes(self.array()?),
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
        if !shortest {
            return Err(CanonError::new(
                "integer or length not in shortest form",
                start,
            ));
        }
        Ok((major, arg))
    }

    /// Checks a length against the rest of the input: every element takes at least one byte.
    fn len(&mut self, arg: u64, start: usize) -> Result<usize, CanonError> {
        let n = usize::try_from(arg).map_err(|_| CanonError::new("length too large", start))?;
        if n > self.len - self.pos {
            return Err(CanonError::new("length runs past the end of input", start));
        }
        Ok(n)
    }

    /// The bytes from `from` (still in the window: see `mark`) to `pos`.
    fn since(&self, from: usize) -> &[u8] {
        &self.buf[from - self.base..self.pos - self.base]
    }
}

/// The streaming deserializer: a [`Source`] and the current nesting depth.
pub(crate) struct StreamDecoder<R: Read> {
    pub(crate) src: Source<R>,
    depth: usize,
}

/// The simple values: only `false`, `true` and `null` are allowed.
fn simple(arg: u64, start: usize) -> Result<Option<bool>, CanonError> {
    match arg {
        20 => Ok(Some(false)),
        21 => Ok(Some(true)),
        22 => Ok(None),
        25..=27 => Err(CanonError::new("floats are not allowed", start)),
        _ => Err(CanonError::new(
            "only false, true and null simple values are allowed",
            start,
        )),
    }
}

/// The previous key of a map, kept to check the order of the next.
#[derive(Default)]
struct PreviousKey {
    bytes: Vec<u8>,
    some: bool,
}

impl PreviousKey {
    /// Remembers `key` (its encoding) as the previous key.
    fn set(&mut self, key: &[u8]) {
        self.bytes.clear();
        self.bytes.extend_from_slice(key);
        self.some = true;
    }
}

impl<R: Read> StreamDecoder<R> {
    /// A decoder of `len` bytes from `inner`.
    pub(crate) fn new(inner: R, len: usize) -> Self {
        StreamDecoder {
            src: Source::new(inner, len),
            depth: 0,
        }
    }

    /// Enters an array or map; its elements sit one level deeper.
    pub(crate) fn enter(&mut self, at: usize) -> Result<(), CanonError> {
        if self.depth >= MAX_DEPTH {
            return Err(CanonError::new("nested too deeply", at));
        }
        self.depth += 1;
        Ok(())
    }

    /// Reads a map head of exactly `len` entries and enters it (a snapshot's outer map).
    pub(crate) fn map_of(&mut self, len: u64) -> Result<(), CanonError> {
        let (major, arg) = self.src.head()?;
        if major != 5 || arg != len {
            return Err(CanonError::new(
                format!("expected a map of {len} entries"),
                0,
            ));
        }
        self.enter(0)
    }

    fn text_then<T>(
        &mut self,
        arg: u64,
        start: usize,
        f: impl FnOnce(&str) -> T,
    ) -> Result<T, CanonError> {
        let n = self.src.len(arg, start)?;
        let raw = self.src.take(n)?;
        let s = std::str::from_utf8(raw)
            .map_err(|_| CanonError::new("text string is not valid UTF-8", start))?;
        Ok(f(s))
    }

    /// Keeps the window from `key_start` on while a key is read; returns the earlier mark.
    fn mark(&mut self, key_start: usize) -> Option<usize> {
        let saved = self.src.mark;
        self.src.mark = Some(saved.map_or(key_start, |m| m.min(key_start)));
        saved
    }

    /// Checks that the key read from `key_start` sorts after `previous`, then remembers it.
    fn check_key_order(
        &mut self,
        previous: &mut PreviousKey,
        key_start: usize,
    ) -> Result<(), CanonError> {
        let key = self.src.since(key_start);
        if previous.some {
            let p = &previous.bytes;
            let order = match p[0].cmp(&key[0]) {
                Ordering::Equal => p[..].cmp(key),
                first => first,
            };
            match order {
                Ordering::Less => {}
                Ordering::Equal => return Err(CanonError::new("duplicate map key", key_start)),
                Ordering::Greater => {
                    return Err(CanonError::new(
                        "map keys not in canonical order",
                        key_start,
                    ))
                }
            }
        }
        previous.set(key);
        Ok(())
    }

    /// Checks and reads past the key `name` (one head byte, then its letters) of a map whose
    /// previous key is `previous`.
    pub(crate) fn key(&mut self, name: &str, previous: &mut Vec<u8>) -> Result<(), CanonError> {
        let start = self.src.pos;
        let n = name.len();
        let rest = self.src.peek_upto(n + 1)?;
        if n >= 24
            || rest.first() != Some(&(0x60 | n as u8))
            || rest.get(1..=n) != Some(name.as_bytes())
        {
            return Err(CanonError::new(format!("expected the key {name:?}"), start));
        }
        let saved = self.mark(start);
        self.src.take(n + 1)?;
        let mut prev = PreviousKey {
            some: !previous.is_empty(),
            bytes: std::mem::take(previous),
        };
        let r = self.check_key_order(&mut prev, start);
        self.src.mark = saved;
        *previous = prev.bytes;
        r
    }

    /// Reads the entry `name` of a map whose previous key is `previous`: its key, then its
    /// value as a `T`. An error the value's type raises without an offset is placed where the
    /// value starts.
    pub(crate) fn field<T: de::DeserializeOwned>(
        &mut self,
        name: &str,
        previous: &mut Vec<u8>,
    ) -> Result<T, CanonError> {
        self.key(name, previous)?;
        let at = self.src.pos;
        T::deserialize(&mut *self).map_err(|mut e| {
            if e.offset == 0 {
                e.offset = at;
            }
            e
        })
    }

    /// Leaves a map entered by [`StreamDecoder::map_of`], once its entries have been read.
    pub(crate) fn leave(&mut self) {
        self.depth -= 1;
    }

    /// The entries of the map at the reader, for a hand-written reader of a hot shape: the
    /// map's head is read and entered exactly as the ordinary path reads it (the same checks,
    /// the same errors). `None`, with nothing read, if the next item is not a map: the
    /// ordinary path then reads it and words what is wrong.
    pub(crate) fn map_entries(&mut self) -> Result<Option<MapEntries<'_, R>>, CanonError> {
        if self.src.peek()? >> 5 != 5 {
            return Ok(None);
        }
        let start = self.src.pos;
        let (_, arg) = self.src.head()?;
        let n = self.src.len(arg, start)?;
        self.enter(start)?;
        Ok(Some(MapEntries {
            map: Map {
                de: self,
                left: n,
                previous: PreviousKey::default(),
                fields: &[],
            },
        }))
    }

    /// Checks that the whole input was read.
    pub(crate) fn finish(&self) -> Result<(), CanonError> {
        if self.src.pos != self.src.len {
            return Err(CanonError::new(
                "trailing bytes after the data item",
                self.src.pos,
            ));
        }
        Ok(())
    }

    fn visit_map<'de, V: Visitor<'de>>(
        &mut self,
        n: u64,
        start: usize,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, CanonError> {
        let n = self.src.len(n, start)?;
        self.enter(start)?;
        let mut access = Map {
            de: self,
            left: n,
            previous: PreviousKey::default(),
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

    /// Skips one data item, checking it exactly as decoding it would.
    fn skip(&mut self) -> Result<(), CanonError> {
        let start = self.src.pos;
        let (major, arg) = self.src.head()?;
        match major {
            0 | 1 => Ok(()),
            2 => {
                let n = self.src.len(arg, start)?;
                self.src.discard(n)
            }
            3 => self.text_then(arg, start, |_| ()),
            4 => {
                let n = self.src.len(arg, start)?;
                self.enter(start)?;
                for _ in 0..n {
                    self.skip()?;
                }
                self.depth -= 1;
                Ok(())
            }
            5 => {
                let n = self.src.len(arg, start)?;
                self.enter(start)?;
                let mut previous = PreviousKey::default();
                for _ in 0..n {
                    let key_start = self.src.pos;
                    let saved = self.mark(key_start);
                    let r = self
                        .skip()
                        .and_then(|()| self.check_key_order(&mut previous, key_start));
                    self.src.mark = saved;
                    r?;
                    self.skip()?;
                }
                self.depth -= 1;
                Ok(())
            }
            6 => Err(CanonError::new("tags are not allowed", start)),
            _ => simple(arg, start).map(drop),
        }
    }
}

impl<'de, R: Read> de::Deserializer<'de> for &mut StreamDecoder<R> {
    type Error = CanonError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CanonError> {
        let start = self.src.pos;
        let (major, arg) = self.src.head()?;
        match major {
            0 => visitor.visit_u64(arg),
            1 => match i64::try_from(arg) {
                Ok(n) => visitor.visit_i64(-1 - n),
                Err(_) => visitor.visit_i128(-1 - i128::from(arg)),
            },
            2 => {
                let n = self.src.len(arg, start)?;
                visitor.visit_bytes(self.src.take(n)?)
            }
            3 => {
                let n = self.src.len(arg, start)?;
                let raw = self.src.take(n)?;
                let s = std::str::from_utf8(raw)
                    .map_err(|_| CanonError::new("text string is not valid UTF-8", start))?;
                visitor.visit_str(s)
            }
            4 => {
                let n = self.src.len(arg, start)?;
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
            5 => self.visit_map(arg, start, &[], visitor),
            6 => Err(CanonError::new("tags are not allowed", start)),
            _ => match simple(arg, start)? {
                Some(b) => visitor.visit_bool(b),
                None => visitor.visit_unit(),
            },
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, CanonError> {
        let start = self.src.pos;
        if self.src.peek()? >> 5 != 5 {
            return Err(CanonError::new("expected a map", start));
        }
        let (_, arg) = self.src.head()?;
        self.visit_map(arg, start, fields, visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CanonError> {
        if self.src.peek()? == 0xf6 {
            self.src.take(1)?;
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    /// A receipt index (`ITEM_BYTES`) is read through the ordinary path; a hex type is handed
    /// its text's bytes unchecked, as the slice decoder does.
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, CanonError> {
        if name != crate::crypto::HEX_TEXT {
            return visitor.visit_newtype_struct(self);
        }
        let start = self.src.pos;
        let (major, arg) = self.src.head()?;
        if major != 3 {
            return Err(CanonError::new("expected a text string", start));
        }
        let n = self.src.len(arg, start)?;
        visitor.visit_bytes(self.src.take(n)?)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, CanonError> {
        let start = self.src.pos;
        let (major, arg) = self.src.head()?;
        match major {
            3 => {
                let n = self.src.len(arg, start)?;
                let raw = self.src.take(n)?;
                let name = std::str::from_utf8(raw)
                    .map_err(|_| CanonError::new("text string is not valid UTF-8", start))?;
                visitor.visit_enum(name.into_deserializer())
            }
            5 if arg == 1 => {
                self.enter(start)?;
                let value = visitor.visit_enum(Variant { de: self })?;
                self.depth -= 1;
                Ok(value)
            }
            _ => Err(CanonError::new(
                "an enum is a variant name or a map of one entry",
                start,
            )),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CanonError> {
        self.skip()?;
        visitor.visit_unit()
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CanonError> {
        let start = self.src.pos;
        let (major, arg) = self.src.head()?;
        if major != 3 {
            return Err(CanonError::new("expected a text string", start));
        }
        let n = self.src.len(arg, start)?;
        let raw = self.src.take(n)?;
        let s = std::str::from_utf8(raw)
            .map_err(|_| CanonError::new("text string is not valid UTF-8", start))?;
        visitor.visit_str(s)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CanonError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, CanonError> {
        self.deserialize_str(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf
        unit unit_struct seq tuple tuple_struct map
    }
}

/// The elements of an array.
struct Seq<'a, R: Read> {
    de: &'a mut StreamDecoder<R>,
    left: usize,
}

impl<'de, R: Read> de::SeqAccess<'de> for Seq<'_, R> {
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
struct Map<'a, R: Read> {
    de: &'a mut StreamDecoder<R>,
    left: usize,
    previous: PreviousKey,
    fields: &'static [&'static str],
}

impl<R: Read> Map<'_, R> {
    /// The field name the key at the reader spells, read past it; `None` (nothing read) if
    /// the key is not one of the struct's field names in a one-byte text head.
    fn field_name(&mut self) -> Result<Option<&'static str>, CanonError> {
        if self.fields.is_empty() {
            return Ok(None);
        }
        let src = &mut self.de.src;
        let peeked = src.peek_upto(24)?;
        let Some(&head) = peeked.first() else {
            return Ok(None);
        };
        if head >> 5 != 3 || head & 0x1f >= 24 {
            return Ok(None);
        }
        let Some(raw) = peeked.get(1..1 + usize::from(head & 0x1f)) else {
            return Ok(None);
        };
        let Some(name) = self.fields.iter().find(|f| f.as_bytes() == raw) else {
            return Ok(None);
        };
        src.take(1 + name.len())?;
        Ok(Some(name))
    }
}

impl<'de, R: Read> de::MapAccess<'de> for Map<'_, R> {
    type Error = CanonError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, CanonError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let key_start = self.de.src.pos;
        let saved = self.de.mark(key_start);
        let key = match self.field_name() {
            Ok(Some(name)) => seed.deserialize(de::value::BorrowedStrDeserializer::new(name)),
            Ok(None) => seed.deserialize(&mut *self.de),
            Err(e) => Err(e),
        };
        let r = key.and_then(|key| {
            self.de
                .check_key_order(&mut self.previous, key_start)
                .map(|()| key)
        });
        self.de.src.mark = saved;
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

/// A map read entry by entry ([`StreamDecoder::map_entries`]). Each entry is read either by
/// hand from the window ([`MapEntries::by_hand`]) or, wherever the hand-written reader
/// declines, by the ordinary path ([`MapEntries::key`], [`MapEntries::value`]), which checks
/// and words everything as decoding the whole map would. Key order is checked across both.
pub(crate) struct MapEntries<'a, R: Read> {
    map: Map<'a, R>,
}

impl<'de, R: Read> MapEntries<'_, R> {
    /// Entries not read yet.
    pub(crate) fn left(&self) -> usize {
        self.map.left
    }

    /// Bytes of the input after the reader.
    pub(crate) fn remaining(&self) -> usize {
        self.map.de.src.len - self.map.de.src.pos
    }

    /// Reads the next entry by hand, or declines with nothing read. `read` is given up to
    /// `want` bytes from the entry's first byte (fewer only at the end of the input) and the
    /// encoding of the previous key, and answers the entry, the length of its key's encoding
    /// and the bytes it used; it must check those bytes exactly as the ordinary path would and
    /// decline wherever that path would refuse them, or the key does not sort after the
    /// previous one. An entry's value may hold one map, no deeper nesting: near the depth
    /// limit every entry is left to the ordinary path.
    pub(crate) fn by_hand<T>(
        &mut self,
        want: usize,
        read: impl FnOnce(&[u8], Option<&[u8]>) -> Option<(T, usize, usize)>,
    ) -> Result<Option<T>, CanonError> {
        if self.map.left == 0 || self.map.de.depth >= MAX_DEPTH {
            return Ok(None);
        }
        let previous = &mut self.map.previous;
        // A reader that fails here fails the ordinary path too, where it needs the bytes.
        let Ok(window) = self.map.de.src.peek_upto(want) else {
            return Ok(None);
        };
        let Some((entry, key_len, used)) =
            read(window, previous.some.then_some(&previous.bytes[..]))
        else {
            return Ok(None);
        };
        debug_assert!(key_len <= used && used <= window.len());
        previous.set(&window[..key_len]);
        self.map.de.src.pos += used;
        self.map.left -= 1;
        Ok(Some(entry))
    }

    /// Reads the next entry with the slice decoder ([`super::Decoder`]), which is quicker,
    /// when the whole entry lies in the first `want` bytes of the window; or declines, with
    /// nothing read (an entry longer than that is refused by the slice decoder at the
    /// window's end). It declines as well wherever the slice decoder refuses the entry, or
    /// its key does not sort after the previous one: the ordinary path then reads it and
    /// words the error. The slice decoder accepts and decodes what this one does (the
    /// readers' property tests), and starts as deep as this one is. The key and the value are
    /// each read by their hand-written reader ([`super::Decode`]) first, and by their
    /// `Deserialize` on the slice decoder where that refuses.
    pub(crate) fn by_slice<K, V>(&mut self, want: usize) -> Result<Option<(K, V)>, CanonError>
    where
        K: de::DeserializeOwned + for<'w> super::Decode<'w>,
        V: de::DeserializeOwned + for<'w> super::Decode<'w>,
    {
        if self.map.left == 0 {
            return Ok(None);
        }
        let depth = self.map.de.depth;
        let previous = &mut self.map.previous;
        // A reader that fails here fails the ordinary path too, where it needs the bytes.
        let Ok(window) = self.map.de.src.peek_upto(want) else {
            return Ok(None);
        };
        // The slice decoder reads one item from the window, as this one would read it from
        // the stream; an item that runs past the window is refused, and read by the ordinary
        // path.
        let Some((key, key_end)) = read_slice::<K>(window, depth) else {
            return Ok(None);
        };
        let key_bytes = &window[..key_end];
        if previous.some && previous.bytes[..] >= *key_bytes {
            return Ok(None);
        }
        let Some((value, value_len)) = read_slice::<V>(&window[key_end..], depth) else {
            return Ok(None);
        };
        let end = key_end + value_len;
        previous.set(key_bytes);
        self.map.de.src.pos += end;
        self.map.left -= 1;
        #[cfg(test)]
        BY_SLICE.set(BY_SLICE.get() + 1);
        Ok(Some((key, value)))
    }

    /// The next entry's key, read by the ordinary path.
    pub(crate) fn key<K: de::Deserialize<'de>>(&mut self) -> Result<K, CanonError> {
        use de::MapAccess;
        self.map
            .next_key()?
            .ok_or_else(|| CanonError::new("no entry left", self.map.de.src.pos))
    }

    /// The value after a key read by [`MapEntries::key`], read by `read` (the ordinary path,
    /// or a reader of its own that checks as much).
    pub(crate) fn value<T>(
        &mut self,
        read: impl FnOnce(&mut StreamDecoder<R>) -> Result<T, CanonError>,
    ) -> Result<T, CanonError> {
        read(&mut *self.map.de)
    }

    /// Leaves the map once every entry has been read.
    pub(crate) fn finish(self) {
        debug_assert_eq!(self.map.left, 0);
        self.map.de.depth -= 1;
    }
}

/// One item at the start of `bytes`, `depth` deep, and its length: by its hand-written reader
/// ([`super::Decode`]), else by its `Deserialize` on the slice decoder; `None` if both refuse.
fn read_slice<T>(bytes: &[u8], depth: usize) -> Option<(T, usize)>
where
    T: de::DeserializeOwned + for<'w> super::Decode<'w>,
{
    let mut slice = super::Decoder::nested(bytes, depth);
    if let Ok(value) = T::decode(&mut slice) {
        return Some((value, slice.pos()));
    }
    let mut slice = super::Decoder::nested(bytes, depth);
    T::deserialize(&mut slice)
        .ok()
        .map(|value| (value, slice.pos()))
}

/// An enum variant written as `{name: content}`.
struct Variant<'a, R: Read> {
    de: &'a mut StreamDecoder<R>,
}

impl<'de, R: Read> de::EnumAccess<'de> for Variant<'_, R> {
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

impl<'de, R: Read> de::VariantAccess<'de> for Variant<'_, R> {
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

#[cfg(test)]
std::thread_local! {
    /// Entries [`MapEntries::by_slice`] read on this thread.
    pub(crate) static BY_SLICE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A reader that gives at most `piece` bytes per call, for tests that move the window's
/// edges through what they read.
#[cfg(test)]
pub(crate) struct Pieces<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) piece: usize,
}

#[cfg(test)]
impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.piece).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// Flips every bit of `bytes` in turn and reads the result in pieces of each size in
/// `pieces`, by a reader of a hot shape (`read(bytes, piece, true)`) and by the ordinary path
/// (`read(bytes, piece, false)`): the two must give the same value or the same error. Answers
/// how many flips were refused.
#[cfg(test)]
pub(crate) fn every_flip_reads_alike<T: PartialEq + std::fmt::Debug>(
    bytes: &[u8],
    pieces: &[usize],
    read: impl Fn(&[u8], usize, bool) -> Result<T, CanonError>,
) -> usize {
    let mut refused = 0;
    for &piece in pieces {
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut damaged = bytes.to_vec();
                damaged[i] ^= 1 << bit;
                let by_hand = read(&damaged, piece, true);
                assert_eq!(
                    by_hand,
                    read(&damaged, piece, false),
                    "byte {i} bit {bit} piece {piece}"
                );
                refused += usize::from(by_hand.is_err());
            }
        }
    }
    refused
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    /// An entry longer than the window `by_slice` is given is declined with nothing read,
    /// and the ordinary path reads it; key order is checked across both.
    #[test]
    fn by_slice_leaves_an_entry_longer_than_its_window_to_the_ordinary_path() {
        let map: BTreeMap<String, Vec<u64>> = [
            ("a".to_owned(), vec![1]),
            ("b".to_owned(), vec![7; 40]),
            ("c".to_owned(), vec![2]),
        ]
        .into_iter()
        .collect();
        let bytes = super::super::to_vec(&map).expect("encodes");
        let mut de = StreamDecoder::new(&bytes[..], bytes.len());
        let mut entries = de.map_entries().expect("a map").expect("a map");
        let entry = entries.by_slice::<String, Vec<u64>>(16).expect("reads");
        assert_eq!(entry, Some(("a".to_owned(), vec![1])));
        assert_eq!(entries.by_slice::<String, Vec<u64>>(16), Ok(None));
        let key: String = entries.key().expect("key");
        let value = entries.value(|de| Vec::<u64>::deserialize(de));
        assert_eq!((key.as_str(), value), ("b", Ok(vec![7; 40])));
        let entry = entries.by_slice::<String, Vec<u64>>(16).expect("reads");
        assert_eq!(entry, Some(("c".to_owned(), vec![2])));
        assert_eq!(entries.left(), 0);
        entries.finish();
        de.finish().expect("whole");
    }

    /// A struct is a map here as in the slice decoder: the same fields as an array are
    /// refused (`expected a map`), although serde's derive would take them.
    #[test]
    fn a_struct_is_a_map() {
        #[derive(Debug, Deserialize, PartialEq)]
        struct S {
            a: u8,
            b: u8,
        }
        let read = |bytes: &[u8]| {
            let mut de = StreamDecoder::new(bytes, bytes.len());
            let s = S::deserialize(&mut de)?;
            de.finish().map(|()| s)
        };
        let map = [0xa2, 0x61, b'a', 1, 0x61, b'b', 2];
        assert_eq!(read(&map), Ok(S { a: 1, b: 2 }));
        let array = [0x82, 1, 2];
        let e = read(&array).expect_err("an array is not a struct");
        assert_eq!(e, CanonError::new("expected a map", 0));
        assert_eq!(
            Err(e),
            super::super::from_slice::<S>(&array, super::super::Strictness::Canonical)
        );
    }
}
