//! What canonical CBOR is, as every decoder of this module reads it: each rule is decided here
//! once, and each refusal worded here once, so that the decoders cannot drift apart.
//!
//! * A head: [`Input::head`], and [`head_long`] past the one-byte form. The argument must take
//!   its shortest form; indefinite lengths and reserved additional information are refused.
//! * A length: [`Input::length`], checked against the input left (each element of an array or
//!   map takes at least a byte, so a longer claim cannot be whole).
//! * Text: [`utf8`].
//! * Simple values: [`simple`] (`false`, `true`, `null`; no floats, no other simple value).
//! * Map keys: [`key_order`], each strictly after the one before it in bytewise order of
//!   their encodings (no duplicates).
//! * Nesting: at most [`super::MAX_DEPTH`] arrays and maps deep (counted by the decoders as
//!   they enter one: `CanonDecoder::enter`, and the reader to a [`ciborium::Value`]).
//! * One data item, nothing after it: [`Input::end`].
//! * No tags (major type 6): the decoders refuse the head ([`Refusal::Tag`]).
//!
//! Every refusal's words are [`Refusal::reason`]. The decoders read through an
//! [`Input`]: [`Reader`] over bytes held whole (the slice decoder [`super::Decoder`], the
//! hand-written readers, and [`super::decode`] to a [`ciborium::Value`]), or
//! `stream::Source` over a window of an `io::Read` (the streaming decoder
//! [`super::StreamDecoder`]). Both decoders are one serde deserializer over either
//! ([`super::de::CanonDecoder`]).

use std::cmp::Ordering;

use super::de::CanonDecoder;
use super::{CanonError, Strictness};

/// Bytes read from an [`Input`]: borrowed from input held whole for `'de`, or transient, from
/// a window that later reads reuse (serde is handed them as borrowed or as transient).
pub(crate) enum Taken<'de, 's> {
    /// From input that outlives the decoder.
    Borrowed(&'de [u8]),
    /// From a window, valid until the next read.
    Transient(&'s [u8]),
}

impl Taken<'_, '_> {
    /// The bytes, borrowed or not.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Taken::Borrowed(b) => b,
            Taken::Transient(b) => b,
        }
    }
}

/// Where a decoder's bytes come from, and how it keeps a map's previous key to compare the
/// next with. The grammar is read through this trait's provided methods, the same for every
/// input.
pub(crate) trait Input<'de> {
    /// How the previous key of a map is kept: where it lies, when the input is held whole; a
    /// copy of it, when the window may move on.
    type PreviousKey: Default;

    /// Offset of the next byte to read.
    fn pos(&self) -> usize;

    /// Bytes of the input from the next one to read to its end.
    fn remaining(&self) -> usize;

    /// The next byte, if it is at hand without reading more (the one-byte head, inline).
    fn at_hand(&self) -> Option<u8>;

    /// The bytes from the next one on that are at hand, at least `n` of them (all that are
    /// left, if fewer), not consumed.
    fn ahead(&mut self, n: usize) -> Result<&[u8], CanonError>;

    /// Steps over `n` bytes already seen ([`Input::ahead`], [`Input::at_hand`]).
    fn advance(&mut self, n: usize);

    /// The next `n` bytes, consumed.
    fn read(&mut self, n: usize) -> Result<Taken<'de, '_>, CanonError>;

    /// Consumes `n` bytes, which need not be at hand all at once.
    fn discard(&mut self, n: usize) -> Result<(), CanonError> {
        self.read(n).map(drop)
    }

    /// Whether an argument must take its shortest form (not so only for a lenient [`Reader`]).
    fn shortest_only(&self) -> bool {
        true
    }

    /// Keeps the bytes from `at` on at hand while a key is read; answers what
    /// [`Input::release`] takes back.
    fn hold(&mut self, _at: usize) -> Option<usize> {
        None
    }

    /// Gives back what [`Input::hold`] answered.
    fn release(&mut self, _held: Option<usize>) {}

    /// Checks that the key read from `key_start` up to here sorts after `previous`
    /// ([`key_order`]), then keeps it as the previous key.
    fn next_key(
        &mut self,
        previous: &mut Self::PreviousKey,
        key_start: usize,
    ) -> Result<(), CanonError>;

    /// Steps over one data item of `de`, checking it as decoding it would: each input's
    /// impl calls [`CanonDecoder::skip_item`], so that the walk is built once, with the input,
    /// not again in every crate whose types are decoded through it.
    fn skip(de: &mut CanonDecoder<Self>) -> Result<(), CanonError>
    where
        Self: Sized;

    /// The bytes of the next data item, read past, if the input holds it whole and walking
    /// its heads finds it whole (see [`super::item_end`]); `None`, with nothing read, if not.
    fn whole_item(&mut self) -> Option<&'de [u8]> {
        None
    }

    /// The next byte, not consumed.
    fn peek(&mut self) -> Result<u8, CanonError> {
        let at = self.pos();
        match self.ahead(1)?.first() {
            Some(&b) => Ok(b),
            None => Err(Refusal::EndOfInput.at(at)),
        }
    }

    /// The next `N` bytes, consumed.
    fn array<const N: usize>(&mut self) -> Result<[u8; N], CanonError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.read(N)?.bytes());
        Ok(a)
    }

    /// An initial byte and its argument: (major type, argument). For major type 7 the
    /// "argument" is the additional information itself (20 false, 21 true, 22 null, …).
    ///
    /// Most heads are one byte (an argument below 24: short texts, keys, small integers,
    /// `false`, `true`, `null`), read here inline; the rest by [`head_long`].
    #[inline]
    fn head(&mut self) -> Result<(u8, u64), CanonError> {
        match self.at_hand() {
            Some(initial) if initial & 0x1f < 24 => {
                self.advance(1);
                Ok((initial >> 5, u64::from(initial & 0x1f)))
            }
            _ => head_long(self),
        }
    }

    /// A length read from the head at `start`, checked against the rest of the input: every
    /// element takes at least one byte.
    fn length(&mut self, arg: u64, start: usize) -> Result<usize, CanonError> {
        let n = usize::try_from(arg).map_err(|_| Refusal::LengthTooLarge.at(start))?;
        if n > self.remaining() {
            return Err(Refusal::PastTheEnd.at(start));
        }
        Ok(n)
    }

    /// Checks that nothing follows the data item read.
    fn end(&self) -> Result<(), CanonError> {
        if self.remaining() != 0 {
            return Err(Refusal::Trailing.at(self.pos()));
        }
        Ok(())
    }
}

/// [`Input::head`] for a head with a following argument, or not at hand: where "a head is
/// in shortest form" is decided.
#[inline(never)]
pub(crate) fn head_long<'de, I: Input<'de> + ?Sized>(
    input: &mut I,
) -> Result<(u8, u64), CanonError> {
    let start = input.pos();
    let [initial] = input.array::<1>()?;
    let major = initial >> 5;
    let info = initial & 0x1f;
    match info {
        31 => return Err(Refusal::Indefinite.at(start)),
        28.. => return Err(Refusal::Reserved.at(start)),
        _ => {}
    }
    let at = input.pos();
    let (arg, size) = argument(info, input.ahead(8)?).ok_or_else(|| Refusal::EndOfInput.at(at))?;
    input.advance(size);
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
    if !shortest && input.shortest_only() {
        return Err(Refusal::NotShortest.at(start));
    }
    Ok((major, arg))
}

/// The argument of a head whose additional information is `info`, from `after`, the bytes
/// that follow its initial byte: the argument and how many of those bytes it takes; `None`
/// where `after` holds too few, or `info` is 28 to 31 (reserved, indefinite). Every walk over
/// heads decodes an argument here, once: the decoders' heads ([`head_long`]) and the
/// error-free walk of [`super::item_end`].
#[inline(always)]
pub(crate) fn argument(info: u8, after: &[u8]) -> Option<(u64, usize)> {
    Some(match info {
        0..=23 => (u64::from(info), 0),
        24 => (u64::from(*after.first()?), 1),
        25 => (u64::from(u16::from_be_bytes(*after.first_chunk()?)), 2),
        26 => (u64::from(u32::from_be_bytes(*after.first_chunk()?)), 4),
        27 => (u64::from_be_bytes(*after.first_chunk()?), 8),
        _ => return None,
    })
}

/// Checks that `key`, read at `at`, sorts strictly after `previous` (both encoded, neither
/// empty): canonical order is bytewise order of the encodings.
#[inline]
pub(crate) fn key_order(previous: &[u8], key: &[u8], at: usize) -> Result<(), CanonError> {
    // The first bytes (type and, for short keys, length) decide most comparisons.
    let order = match previous[0].cmp(&key[0]) {
        Ordering::Equal => previous.cmp(key),
        first => first,
    };
    match order {
        Ordering::Less => Ok(()),
        Ordering::Equal => Err(Refusal::DuplicateKey.at(at)),
        Ordering::Greater => Err(Refusal::KeyOrder.at(at)),
    }
}

/// The simple value of a major type 7 head at `start`: only `false`, `true` and `null` (as
/// `None`) are allowed.
pub(crate) fn simple(arg: u64, start: usize) -> Result<Option<bool>, CanonError> {
    match arg {
        20 => Ok(Some(false)),
        21 => Ok(Some(true)),
        22 => Ok(None),
        25..=27 => Err(Refusal::Float.at(start)),
        _ => Err(Refusal::Simple.at(start)),
    }
}

/// The text of a text string whose head is at `start`.
pub(crate) fn utf8(raw: &[u8], start: usize) -> Result<&str, CanonError> {
    std::str::from_utf8(raw).map_err(|_| Refusal::NotUtf8.at(start))
}

/// A rule of the grammar broken: what every decoder says when it refuses, worded here once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The input ends before what is being read.
    EndOfInput,
    /// Additional information 31.
    Indefinite,
    /// Additional information 28 to 30.
    Reserved,
    /// An argument with a shorter form.
    NotShortest,
    /// A length beyond the platform's `usize`.
    LengthTooLarge,
    /// A length longer than the input left.
    PastTheEnd,
    /// A text string that is not UTF-8.
    NotUtf8,
    /// A float.
    Float,
    /// A simple value other than `false`, `true` and `null`.
    Simple,
    /// A tag.
    Tag,
    /// An array or map deeper than [`super::MAX_DEPTH`].
    TooDeep,
    /// A map key equal to the one before it.
    DuplicateKey,
    /// A map key that sorts before the one before it.
    KeyOrder,
    /// Bytes after the one data item.
    Trailing,
    /// Something else where text is expected.
    ExpectedText,
    /// Something else where a struct (always a map) is expected.
    ExpectedMap,
    /// Something else where an enum is expected.
    NotAnEnum,
}

impl Refusal {
    /// The words of the refusal.
    pub(crate) const fn reason(self) -> &'static str {
        match self {
            Refusal::EndOfInput => "unexpected end of input",
            Refusal::Indefinite => "indefinite lengths are not allowed",
            Refusal::Reserved => "reserved additional information",
            Refusal::NotShortest => "integer or length not in shortest form",
            Refusal::LengthTooLarge => "length too large",
            Refusal::PastTheEnd => "length runs past the end of input",
            Refusal::NotUtf8 => "text string is not valid UTF-8",
            Refusal::Float => "floats are not allowed",
            Refusal::Simple => "only false, true and null simple values are allowed",
            Refusal::Tag => "tags are not allowed",
            Refusal::TooDeep => "nested too deeply",
            Refusal::DuplicateKey => "duplicate map key",
            Refusal::KeyOrder => "map keys not in canonical order",
            Refusal::Trailing => "trailing bytes after the data item",
            Refusal::ExpectedText => "expected a text string",
            Refusal::ExpectedMap => "expected a map",
            Refusal::NotAnEnum => "an enum is a variant name or a map of one entry",
        }
    }

    /// The refusal, found at byte `at` of the input (out of line: refusals are rare).
    #[cold]
    #[inline(never)]
    pub(crate) fn at(self, at: usize) -> CanonError {
        CanonError::new(self.reason(), at)
    }
}

/// An input held whole: the bytes, the offset of the next byte, and the strictness of its
/// heads (canonical, but for [`super::decode`] of an incoming command).
pub(crate) struct Reader<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
    pub(super) strictness: Strictness,
}

impl<'a> Reader<'a> {
    /// A canonical reader of `bytes` from their start.
    pub(crate) fn new(bytes: &'a [u8], strictness: Strictness) -> Self {
        Reader {
            bytes,
            pos: 0,
            strictness,
        }
    }

    /// The next `n` bytes, consumed, where they lie.
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], CanonError> {
        let bytes = self.bytes;
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= bytes.len())
            .ok_or_else(|| Refusal::EndOfInput.at(self.pos))?;
        let slice = &bytes[self.pos..end];
        self.pos = end;
        Ok(slice)
    }
}

impl<'a> Input<'a> for Reader<'a> {
    /// Where the previous key lies in the bytes (`start`, `end`).
    type PreviousKey = Option<(usize, usize)>;

    #[inline]
    fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    #[inline]
    fn at_hand(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline]
    fn ahead(&mut self, _n: usize) -> Result<&[u8], CanonError> {
        Ok(&self.bytes[self.pos..])
    }

    #[inline]
    fn advance(&mut self, n: usize) {
        self.pos += n;
    }

    #[inline]
    fn read(&mut self, n: usize) -> Result<Taken<'a, '_>, CanonError> {
        self.take(n).map(Taken::Borrowed)
    }

    fn peek(&mut self) -> Result<u8, CanonError> {
        self.at_hand()
            .ok_or_else(|| Refusal::EndOfInput.at(self.pos))
    }

    #[inline]
    fn shortest_only(&self) -> bool {
        self.strictness == Strictness::Canonical
    }

    #[inline(never)]
    fn next_key(
        &mut self,
        previous: &mut Option<(usize, usize)>,
        key_start: usize,
    ) -> Result<(), CanonError> {
        if let Some((s, e)) = *previous {
            key_order(
                &self.bytes[s..e],
                &self.bytes[key_start..self.pos],
                key_start,
            )?;
        }
        *previous = Some((key_start, self.pos));
        Ok(())
    }

    fn skip(de: &mut CanonDecoder<Self>) -> Result<(), CanonError> {
        de.skip_item()
    }

    fn whole_item(&mut self) -> Option<&'a [u8]> {
        let start = self.pos;
        let end = super::item_end(self.bytes, start)?;
        self.pos = end;
        self.bytes.get(start..end)
    }
}
