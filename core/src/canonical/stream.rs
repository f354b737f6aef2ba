//! The streaming decoder: canonical CBOR read from an [`std::io::Read`] through a small
//! window, so that a large value (a snapshot's state) is decoded without its encoded bytes ever
//! being held whole beside it.
//!
//! It is the slice decoder's deserializer ([`super::de::CanonDecoder`]) over a window
//! ([`Source`]) instead of a slice, so it checks exactly what the slice decoder checks, by the
//! same code ([`super::grammar`]), and words its errors the same way, at the same offsets. It
//! hands serde transient strings and bytes instead of borrowed ones, and reads a receipt index
//! (the `ITEM_BYTES` newtype) through the ordinary path, which accepts and builds the same
//! values as the hand-written reader the slice decoder uses.
//!
//! Large maps of one shape (a snapshot's work items and receipts) are read entry by entry
//! ([`MapEntries`]): an entry whole in the window is read by a hand-written reader or by the
//! slice decoder, any other by the ordinary path, which also words every error.
//!
//! The bytes read can be fed to SHA-256 digests ("taps") while they pass, which is how a
//! streamed snapshot is hashed without a second pass. The core does no IO: the reader is the
//! host's.

use std::io::Read;

use serde::de;
use sha2::{Digest, Sha256};

use super::de::{locate, CanonDecoder, Map};
use super::grammar::{key_order, Input, Refusal, Taken};
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

    /// The next `n` bytes, consumed.
    fn take(&mut self, n: usize) -> Result<&[u8], CanonError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.len)
            .ok_or_else(|| Refusal::EndOfInput.at(self.pos))?;
        self.fill(n)?;
        let at = self.pos - self.base;
        self.pos = end;
        Ok(&self.buf[at..at + n])
    }

    /// Consumes `n` bytes without needing them in the window at once.
    fn discard(&mut self, mut n: usize) -> Result<(), CanonError> {
        if self.pos.checked_add(n).is_none_or(|end| end > self.len) {
            return Err(Refusal::EndOfInput.at(self.pos));
        }
        while n > 0 {
            let k = n.min(PIECE);
            self.take(k)?;
            n -= k;
        }
        Ok(())
    }

    /// The bytes from `from` (still in the window: see `mark`) to `pos`.
    fn since(&self, from: usize) -> &[u8] {
        &self.buf[from - self.base..self.pos - self.base]
    }
}

impl<'de, R: Read> Input<'de> for Source<R> {
    /// A copy of the previous key: the window may have moved past it.
    type PreviousKey = PreviousKey;

    #[inline]
    fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    fn remaining(&self) -> usize {
        self.len - self.pos
    }

    #[inline]
    fn at_hand(&self) -> Option<u8> {
        if self.available() > 0 {
            Some(self.buf[self.pos - self.base])
        } else {
            None
        }
    }

    fn ahead(&mut self, n: usize) -> Result<&[u8], CanonError> {
        self.peek_upto(n)
    }

    #[inline]
    fn advance(&mut self, n: usize) {
        self.pos += n;
    }

    fn read(&mut self, n: usize) -> Result<Taken<'de, '_>, CanonError> {
        self.take(n).map(Taken::Transient)
    }

    fn discard(&mut self, n: usize) -> Result<(), CanonError> {
        Source::discard(self, n)
    }

    fn hold(&mut self, at: usize) -> Option<usize> {
        let saved = self.mark;
        self.mark = Some(saved.map_or(at, |m| m.min(at)));
        saved
    }

    fn release(&mut self, held: Option<usize>) {
        self.mark = held;
    }

    fn skip(de: &mut StreamDecoder<R>) -> Result<(), CanonError> {
        de.skip_item()
    }

    fn next_key(&mut self, previous: &mut PreviousKey, key_start: usize) -> Result<(), CanonError> {
        let key = self.since(key_start);
        if previous.some {
            key_order(&previous.bytes, key, key_start)?;
        }
        previous.set(key);
        Ok(())
    }
}

/// The streaming decoder: the canonical deserializer over a [`Source`].
pub(crate) type StreamDecoder<R> = CanonDecoder<Source<R>>;

/// The previous key of a map, kept to check the order of the next.
#[derive(Default)]
pub(crate) struct PreviousKey {
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
        CanonDecoder {
            input: Source::new(inner, len),
            depth: 0,
        }
    }

    /// Checks and reads past the key `name` (one head byte, then its letters) of a map whose
    /// previous key is `previous`.
    pub(crate) fn key(&mut self, name: &str, previous: &mut Vec<u8>) -> Result<(), CanonError> {
        let start = self.named_key(name)?;
        // The key is still in the window: nothing was read since.
        let mut prev = PreviousKey {
            some: !previous.is_empty(),
            bytes: std::mem::take(previous),
        };
        let r = self.input.next_key(&mut prev, start);
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
        let at = self.input.pos;
        T::deserialize(&mut *self).map_err(|e| locate(e, at))
    }

    /// Leaves a map entered by [`CanonDecoder::map_of`], once its entries have been read.
    pub(crate) fn leave(&mut self) {
        self.depth -= 1;
    }

    /// The entries of the map at the reader, for a hand-written reader of a hot shape: the
    /// map's head is read and entered exactly as the ordinary path reads it (the same checks,
    /// the same errors). `None`, with nothing read, if the next item is not a map: the
    /// ordinary path then reads it and words what is wrong.
    pub(crate) fn map_entries<'de>(
        &mut self,
    ) -> Result<Option<MapEntries<'_, 'de, R>>, CanonError> {
        if self.input.peek()? >> 5 != 5 {
            return Ok(None);
        }
        let start = self.input.pos;
        let (_, arg) = self.input.head()?;
        let n = self.input.length(arg, start)?;
        self.enter(start)?;
        Ok(Some(MapEntries {
            map: Map {
                de: self,
                left: n,
                previous: PreviousKey::default(),
                skip: None,
                fields: &[],
            },
        }))
    }
}

/// A map read entry by entry ([`StreamDecoder::map_entries`]). Each entry is read either by
/// hand from the window ([`MapEntries::by_hand`]) or, wherever the hand-written reader
/// declines, by the ordinary path ([`MapEntries::key`], [`MapEntries::value`]), which checks
/// and words everything as decoding the whole map would. Key order is checked across both.
pub(crate) struct MapEntries<'a, 'de, R: Read> {
    map: Map<'a, 'de, Source<R>>,
}

impl<'de, R: Read> MapEntries<'_, 'de, R> {
    /// Entries not read yet.
    pub(crate) fn left(&self) -> usize {
        self.map.left
    }

    /// Bytes of the input after the reader.
    pub(crate) fn remaining(&self) -> usize {
        self.map.de.input.len - self.map.de.input.pos
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
        let Ok(window) = self.map.de.input.peek_upto(want) else {
            return Ok(None);
        };
        let Some((entry, key_len, used)) =
            read(window, previous.some.then_some(&previous.bytes[..]))
        else {
            return Ok(None);
        };
        debug_assert!(key_len <= used && used <= window.len());
        previous.set(&window[..key_len]);
        self.map.de.input.pos += used;
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
        let Ok(window) = self.map.de.input.peek_upto(want) else {
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
        self.map.de.input.pos += end;
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
            .ok_or_else(|| CanonError::new("no entry left", self.map.de.input.pos))
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
