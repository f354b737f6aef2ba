//! Writing struct fields and map entries in canonical key order.
//!
//! The encoder sorts every map's entries by their encoded keys, so any order is correct; but
//! entries that arrive out of order are copied twice to be put in place, and for the Group
//! state that is the whole state (its `receipts` and `work` entries), every snapshot. The
//! types a snapshot holds therefore hand the canonical encoder their fields and entries already
//! in canonical order, and every other serializer (JSON) the order serde's derive would give.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};

use crate::id::Id;

/// The canonical order of a struct's field names, as their encoded keys sort: shorter first,
/// then bytewise. `key_order(names)[i]` is the index in `names` of the i-th key in that order.
/// Computed at compile time by [`encode_struct!`].
pub(crate) const fn key_order<const N: usize>(names: [&str; N]) -> [usize; N] {
    let mut order = declared_order::<N>();
    // Insertion sort: a struct has a few dozen fields at most.
    let mut i = 1;
    while i < N {
        let mut j = i;
        while j > 0 && key_before(names[order[j]], names[order[j - 1]]) {
            let moved = order[j];
            order[j] = order[j - 1];
            order[j - 1] = moved;
            j -= 1;
        }
        i += 1;
    }
    order
}

/// The declared order of a struct's `N` fields: `[0, 1, …, N − 1]`.
pub(crate) const fn declared_order<const N: usize>() -> [usize; N] {
    let mut order = [0usize; N];
    let mut i = 0;
    while i < N {
        order[i] = i;
        i += 1;
    }
    order
}

/// Whether text key `a` comes before `b` in canonical order: the encoded key is a head that
/// grows with the length, then the bytes.
const fn key_before(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return a.len() < b.len();
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
        i += 1;
    }
    false
}

/// The entries of a map keyed by identifiers, in canonical key order (shorter first, then
/// bytewise).
pub(crate) fn in_key_order<'a, V>(
    entries: impl Iterator<Item = (&'a Id, &'a V)>,
) -> Vec<(&'a Id, &'a V)> {
    let entries: Vec<(&Id, &V)> = entries.collect();
    // The sort is not generic over the values: one instance for every map.
    let order = key_order_of(entries.iter().map(|(id, _)| *id).collect());
    order.into_iter().map(|i| entries[i]).collect()
}

/// The positions of `keys` in canonical key order.
///
/// Each key is sorted by its length and first 15 bytes packed into two integers (an
/// identifier is at most 128 bytes, so its length fits the first byte), so that most
/// comparisons compare integers; keys equal in those compare the rest of their bytes.
fn key_order_of(keys: Vec<&Id>) -> Vec<usize> {
    const PREFIX: usize = 15;
    let packed = |key: &[u8]| {
        let mut b = [0u8; PREFIX + 1];
        b[0] = key.len() as u8;
        let n = key.len().min(PREFIX);
        b[1..=n].copy_from_slice(&key[..n]);
        let (hi, lo) = b.split_at(8);
        (
            u64::from_be_bytes(hi.try_into().expect("8 bytes")),
            u64::from_be_bytes(lo.try_into().expect("8 bytes")),
        )
    };
    let mut order: Vec<((u64, u64), usize)> = keys
        .iter()
        .enumerate()
        .map(|(i, key)| (packed(key.as_str().as_bytes()), i))
        .collect();
    order.sort_unstable_by(|(a, i), (b, j)| {
        a.cmp(b).then_with(|| {
            // The same length and the same first bytes: the rest decides.
            let (x, y) = (keys[*i].as_str().as_bytes(), keys[*j].as_str().as_bytes());
            x[x.len().min(PREFIX)..].cmp(&y[y.len().min(PREFIX)..])
        })
    });
    order.into_iter().map(|(_, i)| i).collect()
}

/// A map keyed by identifiers, written as the map itself is, its entries in canonical key
/// order for the canonical encoder (which is not human-readable).
pub(crate) struct ById<'a, V>(pub(crate) &'a BTreeMap<Id, V>);

impl<V: Serialize> Serialize for ById<'_, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            serializer.collect_map(self.0)
        } else {
            serializer.collect_map(in_key_order(self.0.iter()))
        }
    }
}

/// A map keyed by seqs, written with integer keys for the canonical encoder and with their
/// decimal text for any other serializer: JSON writes integer keys as text anyway, and a
/// JavaScript object takes text keys only.
pub(crate) struct BySeq<'a, V>(pub(crate) &'a BTreeMap<u64, V>);

impl<V: Serialize> Serialize for BySeq<'_, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            serializer.collect_map(self.0.iter().map(|(k, v)| (SeqText(*k), v)))
        } else {
            serializer.collect_map(self.0)
        }
    }
}

/// A seq written as its decimal text.
struct SeqText(u64);

impl Serialize for SeqText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

/// The fields of a struct, written as a map for a serializer, optionally with a `type` entry
/// naming the variant of an internally tagged enum that holds it (what serde's derive gives
/// for `#[serde(tag = "type")]`), the entry placed in canonical key order like the fields.
/// Implemented by [`encode_struct!`].
pub(crate) trait EncodeFields {
    /// Writes the fields (and `type: tag`, when given) to `serializer` as a map: in canonical
    /// key order for the canonical encoder, in declared order after the tag for any other.
    fn encode_fields<S: Serializer>(
        &self,
        tag: Option<&'static str>,
        serializer: S,
    ) -> Result<S::Ok, S::Error>;
}

/// The declared order of a struct's `N − 1` fields behind a tag at index `N − 1`: the tag
/// first, as serde's derive writes an internally tagged variant.
pub(crate) const fn tag_first_order<const N: usize>() -> [usize; N] {
    let mut order = [0usize; N];
    if N == 0 {
        return order;
    }
    order[0] = N - 1;
    let mut i = 1;
    while i < N {
        order[i] = i - 1;
        i += 1;
    }
    order
}

/// Generates `Serialize` for structs from their field names in declaration order: what serde's
/// derive gives for a human-readable serializer (JSON), and the fields in canonical key order
/// ([`key_order`], computed at compile time) for the canonical encoder, so it never reorders
/// them. A field written `name if is_some` (an `Option`) is left out when that is false (serde's
/// `skip_serializing_if`); one written `name with Wrapper` is written as `Wrapper(&name)`;
/// one written `name as "key"` is written under `key` (serde's `rename`); fields serde skips are
/// listed after `; skip`. Every field is named (the struct is
/// destructured without `..`), so a field added to the struct and not here does not compile.
/// A struct may take one lifetime (`Name<'a> { … }`).
///
/// It also implements [`EncodeFields`], through which an internally tagged enum writes the
/// struct a variant holds with its `type` entry, also in canonical order.
macro_rules! encode_struct {
    ($(
        $ty:ident $(<$lt:lifetime>)? {
            $($field:ident $(as $key:literal)? $(if $present:ident)? $(with $wrap:path)?),* $(,)?
            $(; skip $($skipped:ident),* $(,)?)?
        }
    )*) => {$(
        impl $(<$lt>)? ::serde::Serialize for $ty $(<$lt>)? {
            fn serialize<S: ::serde::Serializer>(
                &self,
                serializer: S,
            ) -> ::std::result::Result<S::Ok, S::Error> {
                $crate::canonical::EncodeFields::encode_fields(self, None, serializer)
            }
        }

        impl $(<$lt>)? $crate::canonical::EncodeFields for $ty $(<$lt>)? {
            fn encode_fields<S: ::serde::Serializer>(
                &self,
                tag: ::std::option::Option<&'static str>,
                serializer: S,
            ) -> ::std::result::Result<S::Ok, S::Error> {
                use ::serde::ser::SerializeStruct;
                let $ty { $($field,)* $($($skipped: _,)*)? } = self;
                // The field names, then `type` (index N, written only with a tag).
                const N: usize = 0 $(+ $crate::canonical::encode_struct!(@one_of $field))*;
                const NAMES: [&str; N + 1] =
                    [$($crate::canonical::encode_struct!(@key $field $(as $key)?),)* "type"];
                const FIELDS: [&str; N] = {
                    let mut names = [""; N];
                    let mut i = 0;
                    while i < N {
                        names[i] = NAMES[i];
                        i += 1;
                    }
                    names
                };
                const ORDER: [usize; N] = $crate::canonical::key_order(FIELDS);
                const DECLARED: [usize; N] = $crate::canonical::declared_order();
                const TAGGED: [usize; N + 1] = $crate::canonical::key_order(NAMES);
                const TAG_FIRST: [usize; N + 1] = $crate::canonical::tag_first_order();
                let canonical = !serializer.is_human_readable();
                let len = usize::from(tag.is_some())
                    $(+ $crate::canonical::encode_struct!(@count $field $(if $present)?))*;
                let mut s = serializer.serialize_struct(stringify!($ty), len)?;
                // (A struct without fields writes none: its closure reads neither.)
                #[allow(unused_variables)]
                let field = |i: usize, s: &mut S::SerializeStruct| {
                    $crate::canonical::encode_struct!(
                        @arms i s 0usize; $($field $(as $key)? $(if $present)? $(with $wrap)?,)*
                    )
                };
                // One loop over any of the orders: each field's writing is built once per
                // serializer.
                let order: &[usize] = match (tag.is_some(), canonical) {
                    (false, true) => &ORDER,
                    (false, false) => &DECLARED,
                    (true, true) => &TAGGED,
                    (true, false) => &TAG_FIRST,
                };
                for &i in order {
                    match tag {
                        Some(tag) if i == N => s.serialize_field("type", tag)?,
                        _ => field(i, &mut s)?,
                    }
                }
                s.end()
            }
        }
    )*};
    (@one_of $field:ident) => { 1 };
    (@key $field:ident) => { stringify!($field) };
    (@key $field:ident as $key:literal) => { $key };
    (@count $field:ident) => { 1 };
    (@count $field:ident if $present:ident) => { usize::from(Option::$present($field)) };
    (@arms $i:ident $s:ident $n:expr;) => { Ok(()) };
    (@arms $i:ident $s:ident $n:expr;
        $field:ident $(as $key:literal)? $(if $present:ident)? $(with $wrap:path)?,
        $($rest:tt)*) => {
        if $i == $n {
            $crate::canonical::encode_struct!(
                @one $s ($crate::canonical::encode_struct!(@key $field $(as $key)?))
                $field $(if $present)? $(with $wrap)?
            )
        } else {
            $crate::canonical::encode_struct!(@arms $i $s $n + 1; $($rest)*)
        }
    };
    (@one $s:ident $key:tt $field:ident) => { $s.serialize_field($key, $field) };
    (@one $s:ident $key:tt $field:ident with $wrap:path) => {
        $s.serialize_field($key, &$wrap($field))
    };
    (@one $s:ident $key:tt $field:ident if $present:ident) => {
        if Option::$present($field) {
            $s.serialize_field($key, $field)
        } else {
            $s.skip_field($key)
        }
    };
}
pub(crate) use encode_struct;

/// [`encode_struct!`] and [`decode_struct!`](crate::canonical::decode_struct) from one field
/// list, for the structs written and read with nothing but their fields: `name as "key"`
/// names a renamed field both ways, and `name if is_some` is left out when absent (reading
/// it, a key left out is `None` and a key present is `Some`: `null` is not `None`'s encoding).
macro_rules! codec_struct {
    ($(
        $ty:ident { $($field:ident $(as $key:literal)? $(if $present:ident)?),* $(,)? }
    )*) => {
        $crate::canonical::encode_struct! {
            $( $ty { $($field $(as $key)? $(if $present)?),* } )*
        }
        $crate::canonical::decode_struct! {
            $( $ty { $($field $(= $key)? $(if $present)?),* } )*
        }
    };
}
pub(crate) use codec_struct;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_common;
    use crate::GroupState;

    /// Every state every transcript passes through.
    fn transcript_states() -> Vec<GroupState> {
        test_common::transcript_states(1)
    }

    #[test]
    fn a_state_reaches_the_encoder_in_canonical_order() {
        let states = transcript_states();
        assert!(states.len() > 100, "{} states", states.len());
        for state in &states {
            assert_eq!(
                super::super::reorders(state),
                Ok(0),
                "state at seq {}",
                state.seq
            );
        }
        // The JSON form keeps the fields in the order they are declared, as the derive wrote
        // them; a work item with every optional field set shows each.
        let json = serde_json::to_value(states.last().expect("a state")).expect("JSON");
        let keys: Vec<&str> = json
            .as_object()
            .expect("a map")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "org",
                "group",
                "mission",
                "title",
                "authority_key",
                "seq",
                "head",
                "revision",
                "members_revision",
                "archived",
                "members",
                "work",
                "approvals",
                "receipts",
                "terminal",
                "expansions",
                "redacted",
                "evidence",
            ]
        );
    }

    /// Without the order, the encoder still writes the same bytes, moving the entries.
    #[test]
    fn entries_out_of_order_are_moved_into_place() {
        let map: BTreeMap<Id, u8> = ["b", "aa", "c"]
            .iter()
            .map(|s| (Id::new(*s).expect("an id"), 0))
            .collect();
        assert_eq!(super::super::reorders(&map), Ok(1));
        assert_eq!(super::super::reorders(&ById(&map)), Ok(0));
        assert_eq!(
            super::super::to_vec(&map).expect("encodes"),
            super::super::to_vec(&ById(&map)).expect("encodes")
        );
    }

    #[test]
    fn key_order_is_the_order_of_the_encoded_keys() {
        let names = ["zz", "b", "a", "ab", "ba", "abc", "c", "aa", "z"];
        let order = key_order(names);
        let mut by_encoding: Vec<usize> = (0..names.len()).collect();
        by_encoding.sort_by_key(|&i| super::super::to_vec(names[i]).expect("encodes"));
        assert_eq!(order.to_vec(), by_encoding);
    }

    proptest::proptest! {
        /// Any identifiers, many sharing long prefixes, come out of `in_key_order` as their
        /// encodings sort.
        #[test]
        fn any_identifiers_sort_as_their_encodings(
            names in proptest::collection::btree_set("(w-0123456789ab){0,2}[a-c~]{1,4}", 0..64),
        ) {
            let map: BTreeMap<Id, u8> = names
                .iter()
                .map(|s| (Id::new(s.as_str()).expect("an id"), 0))
                .collect();
            let mut canonical: Vec<Vec<u8>> = map
                .keys()
                .map(|id| super::super::to_vec(id).expect("encodes"))
                .collect();
            canonical.sort();
            let keys: Vec<Vec<u8>> = in_key_order(map.iter())
                .into_iter()
                .map(|(id, _)| super::super::to_vec(id).expect("encodes"))
                .collect();
            proptest::prop_assert_eq!(keys, canonical);
        }
    }

    #[test]
    fn identifier_keys_sort_as_their_encodings() {
        let long = "w-0123456789abcdef";
        let mut names: Vec<String> = ["b", "aa", "a", "ab", "ba", "c", "abc"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // Keys that differ only past the packed prefix, at every length around it, and the
        // longest.
        for n in 13..=18 {
            for last in ["0", "9", "a", "~"] {
                names.push(format!("{}{last}", &long[..n]));
            }
        }
        names.push("z".repeat(128));
        names.push(format!("{}y", "z".repeat(127)));
        let ids: Vec<Id> = names
            .iter()
            .map(|s| Id::new(s.as_str()).expect("an id"))
            .collect();
        let map: BTreeMap<Id, u8> = ids.iter().cloned().map(|id| (id, 0)).collect();
        let canonical: Vec<Vec<u8>> = {
            let mut keys: Vec<Vec<u8>> = ids
                .iter()
                .map(|id| super::super::to_vec(id).expect("encodes"))
                .collect();
            keys.sort();
            keys
        };
        let keys: Vec<Vec<u8>> = in_key_order(map.iter())
            .into_iter()
            .map(|(id, _)| super::super::to_vec(id).expect("encodes"))
            .collect();
        assert_eq!(keys, canonical);
    }
}
