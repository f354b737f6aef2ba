//! Tests of the canonical CBOR encoder and decoder (`mwp_core::canonical`).
//!
//! * RFC 8949 Appendix A examples inside the subset, both ways.
//! * Rejections in canonical and lenient mode.
//! * Property tests: round trips, lenient normalisation, no panics on arbitrary bytes, and
//!   byte-identity of the direct serde serializer with the `ciborium::Value` path.

use std::collections::{BTreeMap, HashMap};

use ciborium::value::{Integer, Value};
use mwp_core::canonical::{
    decode, encode_value, from_slice, hash, sha256, to_vec, CanonError, Strictness, MAX_DEPTH,
};
use proptest::collection::{btree_map, hash_map, vec};
use proptest::prelude::*;
use serde::{Deserialize, Serialize, Serializer};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn h(s: &str) -> Vec<u8> {
    hex::decode(s).expect("test hex is valid")
}

fn int(n: i128) -> Value {
    Value::Integer(Integer::try_from(n).expect("test integer in CBOR range"))
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn map(entries: Vec<(Value, Value)>) -> Value {
    Value::Map(entries)
}

/// The old encoding path: build a `ciborium::Value`, then write it.
fn via_value<T: Serialize + ?Sized>(x: &T) -> Result<Vec<u8>, CanonError> {
    let value = Value::serialized(x).map_err(|e| CanonError {
        reason: e.to_string(),
        offset: 0,
    })?;
    encode_value(&value)
}

fn strict(bytes: &[u8]) -> Result<Value, CanonError> {
    decode(bytes, Strictness::Canonical)
}

fn lenient(bytes: &[u8]) -> Result<Value, CanonError> {
    decode(bytes, Strictness::Lenient)
}

// ---------------------------------------------------------------------------------------------
// (a) RFC 8949 Appendix A
// ---------------------------------------------------------------------------------------------

fn appendix_a() -> Vec<(Value, &'static str)> {
    let mut v = vec![
        (int(0), "00"),
        (int(1), "01"),
        (int(10), "0a"),
        (int(23), "17"),
        (int(24), "1818"),
        (int(25), "1819"),
        (int(100), "1864"),
        (int(1000), "1903e8"),
        (int(1_000_000), "1a000f4240"),
        (int(1_000_000_000_000), "1b000000e8d4a51000"),
        (int(18_446_744_073_709_551_615), "1bffffffffffffffff"),
        (int(-18_446_744_073_709_551_616), "3bffffffffffffffff"),
        (int(-1), "20"),
        (int(-10), "29"),
        (int(-100), "3863"),
        (int(-1000), "3903e7"),
        (Value::Bool(false), "f4"),
        (Value::Bool(true), "f5"),
        (Value::Null, "f6"),
        (Value::Bytes(vec![]), "40"),
        (Value::Bytes(vec![1, 2, 3, 4]), "4401020304"),
        (text(""), "60"),
        (text("a"), "6161"),
        (text("IETF"), "6449455446"),
        (text("\"\\"), "62225c"),
        (text("\u{00fc}"), "62c3bc"),
        (text("\u{6c34}"), "63e6b0b4"),
        (text("\u{10151}"), "64f0908591"),
        (Value::Array(vec![]), "80"),
        (Value::Array(vec![int(1), int(2), int(3)]), "83010203"),
        (
            Value::Array(vec![
                int(1),
                Value::Array(vec![int(2), int(3)]),
                Value::Array(vec![int(4), int(5)]),
            ]),
            "8301820203820405",
        ),
        (
            Value::Array((1..=25).map(int).collect()),
            "98190102030405060708090a0b0c0d0e0f101112131415161718181819",
        ),
        (map(vec![]), "a0"),
        (map(vec![(int(1), int(2)), (int(3), int(4))]), "a201020304"),
        (
            map(vec![
                (text("a"), int(1)),
                (text("b"), Value::Array(vec![int(2), int(3)])),
            ]),
            "a26161016162820203",
        ),
        (
            Value::Array(vec![text("a"), map(vec![(text("b"), text("c"))])]),
            "826161a161626163",
        ),
    ];
    let letters = ["a", "b", "c", "d", "e"];
    v.push((
        map(letters
            .iter()
            .map(|l| (text(l), text(&l.to_uppercase())))
            .collect()),
        "a56161614161626142616361436164614461656145",
    ));
    v
}

#[test]
fn rfc8949_appendix_a_encodes_exactly() {
    for (value, hex) in appendix_a() {
        assert_eq!(
            hex::encode(encode_value(&value).expect("encodes")),
            hex,
            "{value:?}"
        );
        // The direct serializer agrees on `Value` itself.
        assert_eq!(
            hex::encode(to_vec(&value).expect("encodes")),
            hex,
            "{value:?}"
        );
    }
}

#[test]
fn rfc8949_appendix_a_decodes_exactly() {
    for (value, hex) in appendix_a() {
        let bytes = h(hex);
        assert_eq!(strict(&bytes).as_ref(), Ok(&value), "{hex}");
        assert_eq!(lenient(&bytes).as_ref(), Ok(&value), "{hex}");
    }
}

#[test]
fn rust_types_encode_like_appendix_a() {
    assert_eq!(hex::encode(to_vec(&0u8).unwrap()), "00");
    assert_eq!(hex::encode(to_vec(&24u16).unwrap()), "1818");
    assert_eq!(hex::encode(to_vec(&1000i32).unwrap()), "1903e8");
    assert_eq!(
        hex::encode(to_vec(&u64::MAX).unwrap()),
        "1bffffffffffffffff"
    );
    assert_eq!(
        hex::encode(to_vec(&i64::MIN).unwrap()),
        "3b7fffffffffffffff"
    );
    assert_eq!(
        hex::encode(to_vec(&-18_446_744_073_709_551_616i128).unwrap()),
        "3bffffffffffffffff"
    );
    assert_eq!(hex::encode(to_vec(&-1000i64).unwrap()), "3903e7");
    assert_eq!(hex::encode(to_vec("IETF").unwrap()), "6449455446");
    assert_eq!(hex::encode(to_vec(&'\u{6c34}').unwrap()), "63e6b0b4");
    assert_eq!(hex::encode(to_vec(&[1u8, 2, 3]).unwrap()), "83010203");
    assert_eq!(
        hex::encode(to_vec(&(1, [2, 3], vec![4, 5])).unwrap()),
        "8301820203820405"
    );
    assert_eq!(hex::encode(to_vec(&()).unwrap()), "f6");
    assert_eq!(hex::encode(to_vec(&None::<u8>).unwrap()), "f6");
    assert_eq!(hex::encode(to_vec(&Some(true)).unwrap()), "f5");
    let m: BTreeMap<&str, &str> = [("e", "E"), ("d", "D"), ("c", "C"), ("b", "B"), ("a", "A")]
        .into_iter()
        .collect();
    assert_eq!(
        hex::encode(to_vec(&m).unwrap()),
        "a56161614161626142616361436164614461656145"
    );
}

// ---------------------------------------------------------------------------------------------
// (b) Rejections
// ---------------------------------------------------------------------------------------------

/// Inputs refused in both modes, with a word expected in the reason.
const ALWAYS_REFUSED: &[(&str, &str)] = &[
    // Floats.
    ("f90000", "float"),
    ("f93c00", "float"),
    ("f97c00", "float"),
    ("fa47c35000", "float"),
    ("fb3ff199999999999a", "float"),
    ("81f93c00", "float"),
    ("a16161fa47c35000", "float"),
    // Tags.
    ("c074323031332d30332d32315432303a30343a30305a", "tag"),
    ("c11a514b67b0", "tag"),
    ("c249010000000000000000", "tag"),
    ("c349010000000000000000", "tag"),
    ("d74401020304", "tag"),
    ("d818456449455446", "tag"),
    ("d82076687474703a2f2f7777772e6578616d706c652e636f6d", "tag"),
    ("8201c100", "tag"),
    // Indefinite lengths and a lone break.
    ("5f42010243030405ff", "indefinite"),
    ("7f657374726561646d696e67ff", "indefinite"),
    ("9fff", "indefinite"),
    ("9f018202039f0405ffff", "indefinite"),
    ("83018202039f0405ff", "indefinite"),
    ("bf61610161629f0203ffff", "indefinite"),
    ("bf6346756ef563416d7421ff", "indefinite"),
    ("ff", "indefinite"),
    // Duplicate keys.
    ("a201020103", "duplicate"),
    ("a2616101616102", "duplicate"),
    ("a2a1010200a1010201", "duplicate"),
    // undefined and other simple values.
    ("f7", "simple"),
    ("e0", "simple"),
    ("f0", "simple"),
    ("f3", "simple"),
    ("f820", "simple"),
    ("f8ff", "simple"),
    ("f814", "simple"),
    ("f815", "simple"),
    ("f816", "simple"),
    // Reserved additional information.
    ("1c", "reserved"),
    ("1d", "reserved"),
    ("1e", "reserved"),
    ("3c", "reserved"),
    ("5d", "reserved"),
    ("7e", "reserved"),
    ("9c", "reserved"),
    ("bd", "reserved"),
    ("dc", "reserved"),
    ("fc", "reserved"),
    // Invalid UTF-8.
    ("61ff", "UTF-8"),
    ("6180", "UTF-8"),
    ("62c328", "UTF-8"),
    ("62c0af", "UTF-8"),
    ("63eda080", "UTF-8"),
    ("64f4908080", "UTF-8"),
    ("a161ff00", "UTF-8"),
    // Trailing bytes.
    ("0000", "trailing"),
    ("8000", "trailing"),
    ("f6f6", "trailing"),
    ("a0a0", "trailing"),
    ("6161616161", "trailing"),
    // Truncated input.
    ("", "end"),
    ("18", "end"),
    ("1901", "end"),
    ("1a000102", "end"),
    ("1b00000000000000", "end"),
    ("41", "end"),
    ("6361 61", "end"),
    ("8201", "end"),
    ("a101", "end"),
    ("a1", "end"),
    ("f9", "end"),
    ("fa000000", "end"),
    // Lengths that run past the input.
    ("5a0001000000", "past the end"),
    ("7b7fffffffffffffff", "length"),
    ("9bffffffffffffffff00", "length"),
    ("bbffffffffffffffff00", "length"),
];

/// Inputs refused in canonical mode but accepted (and normalised) in lenient mode:
/// (input, canonical re-encoding).
const LENIENT_ONLY: &[(&str, &str)] = &[
    // Unsorted keys.
    ("a203040102", "a201020304"),
    ("a2616201616101", "a2616101616201"),
    // Shorter keys sort first: "b" (6162) before "aa" (626161).
    ("a262616102616201", "a2616201626161 02"),
    // Integers sort before text, major type by major type.
    ("a2 6161 01 01 02", "a2 01 02 6161 01"),
    ("a3 f4 00 6161 01 00 02", "a3 00 02 6161 01 f4 00"),
    // Non-shortest integers.
    ("1817", "17"),
    ("190017", "17"),
    ("1900ff", "18ff"),
    ("1a0000ffff", "19ffff"),
    ("1a00000017", "17"),
    ("1b0000000000000017", "17"),
    ("1b00000000ffffffff", "1affffffff"),
    ("3817", "37"),
    ("3b0000000000000000", "20"),
    // Non-shortest lengths.
    ("5801ff", "41ff"),
    ("780161", "6161"),
    ("79000161", "6161"),
    ("980101", "8101"),
    ("9a0000000101", "8101"),
    ("b8010102", "a10102"),
    ("b9000101 02", "a10102"),
    // Both, nested.
    ("a2 61 62 98 01 18 01 61 61 b8 00", "a26161a06162 8101"),
];

fn compact(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

#[test]
fn canonical_mode_refuses() {
    for (hex, why) in ALWAYS_REFUSED {
        let err = strict(&h(&compact(hex))).expect_err(hex);
        assert!(
            err.reason.contains(why),
            "{hex}: expected {why:?}, got {err}"
        );
    }
    for (hex, _) in LENIENT_ONLY {
        let hex = compact(hex);
        assert!(
            strict(&h(&hex)).is_err(),
            "{hex} accepted in canonical mode"
        );
    }
}

/// The direct typed path refuses what canonical decoding refuses, wherever the bad item sits:
/// read into JSON, read as a struct field, or inside a field the struct ignores.
#[test]
fn typed_canonical_decoding_refuses() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Known {
        a: serde_json::Value,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Ignoring {}
    let bad = ALWAYS_REFUSED
        .iter()
        .chain(LENIENT_ONLY)
        .map(|(hex, _)| compact(hex))
        .chain(["a202000100".to_owned(), "a161610001".to_owned()]);
    for hex in bad {
        let item = h(&hex);
        assert!(
            from_slice::<serde_json::Value>(&item, Strictness::Canonical).is_err(),
            "{hex} read as JSON"
        );
        // {"a": item}
        let mut field = h("a16161");
        field.extend_from_slice(&item);
        assert!(
            from_slice::<Known>(&field, Strictness::Canonical).is_err(),
            "{hex} read as a field"
        );
        assert!(
            from_slice::<Ignoring>(&field, Strictness::Canonical).is_err(),
            "{hex} skipped as an ignored field"
        );
    }
    // Keys out of order or repeated, in a struct's own map.
    for hex in ["a2616201616101", "a2616101616102"] {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Ab {
            a: Option<u8>,
            b: Option<u8>,
        }
        assert!(
            from_slice::<Ab>(&h(hex), Strictness::Canonical).is_err(),
            "{hex} accepted"
        );
    }
}

#[test]
fn canonical_mode_error_reasons() {
    assert!(strict(&h("1817")).unwrap_err().reason.contains("shortest"));
    assert!(strict(&h("5801ff"))
        .unwrap_err()
        .reason
        .contains("shortest"));
    assert!(strict(&h("a203040102"))
        .unwrap_err()
        .reason
        .contains("order"));
    let err = strict(&h("a201020103")).unwrap_err();
    assert_eq!(err.offset, 3, "the second key is at byte 3: {err}");
    let err = strict(&h("820161ff")).unwrap_err();
    assert_eq!(err.offset, 2);
    let err = strict(&h("0102")).unwrap_err();
    assert_eq!(err.offset, 1);
}

#[test]
fn lenient_mode_refuses() {
    for (hex, why) in ALWAYS_REFUSED {
        let err = lenient(&h(&compact(hex))).expect_err(hex);
        assert!(
            err.reason.contains(why),
            "{hex}: expected {why:?}, got {err}"
        );
    }
}

#[test]
fn lenient_mode_refuses_duplicates_in_any_width() {
    for hex in [
        // 1 and 1 written in one byte.
        "a201021801 03",
        "a2180102 1b0000000000000001 03",
        // -1 in two widths.
        "a220003800 01",
        // "a" with a long-form length.
        "a2616101780161 02",
        // b"a" in two widths.
        "a2416101580161 02",
        // Equal maps as keys, written in different orders.
        "a2 a201020304 00 a203040102 01",
        // Equal arrays as keys, with different widths inside.
        "a2 820102 00 9802 1801 02 01",
    ] {
        let bytes = h(&compact(hex));
        let err = lenient(&bytes).expect_err(hex);
        assert!(
            err.reason.contains("duplicate"),
            "{hex}: expected a duplicate key, got {err}"
        );
    }
}

#[test]
fn lenient_mode_accepts_and_normalises() {
    for (hex, canon) in LENIENT_ONLY {
        let (hex, canon) = (compact(hex), compact(canon));
        let value = lenient(&h(&hex)).unwrap_or_else(|e| panic!("{hex}: {e}"));
        assert_eq!(hex::encode(encode_value(&value).unwrap()), canon, "{hex}");
        assert_eq!(hex::encode(to_vec(&value).unwrap()), canon, "{hex}");
        assert!(strict(&h(&canon)).is_ok(), "{canon}");
    }
}

fn nested_arrays(levels: usize) -> Vec<u8> {
    let mut bytes = vec![0x81; levels];
    bytes.push(0x00);
    bytes
}

fn nested_maps(levels: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..levels {
        bytes.extend_from_slice(&[0xa1, 0x00]);
    }
    bytes.push(0x00);
    bytes
}

#[test]
fn depth_limit() {
    for mode in [Strictness::Canonical, Strictness::Lenient] {
        // An item inside MAX_DEPTH containers is fine; one more is not.
        assert!(decode(&nested_arrays(MAX_DEPTH), mode).is_ok());
        assert!(decode(&nested_maps(MAX_DEPTH), mode).is_ok());
        let err = decode(&nested_arrays(MAX_DEPTH + 1), mode).unwrap_err();
        assert!(err.reason.contains("deep"), "{err}");
        // The head of the array one level too deep.
        assert_eq!(err.offset, MAX_DEPTH);
        // An empty array or map counts as a level too, for every reader alike.
        for empty in [0x80u8, 0xa0] {
            let mut fits = vec![0x81; MAX_DEPTH - 1];
            fits.push(empty);
            let mut deeper = vec![0x81; MAX_DEPTH];
            deeper.push(empty);
            assert!(decode(&fits, mode).is_ok());
            assert!(from_slice::<serde_json::Value>(&fits, mode).is_ok());
            assert_eq!(decode(&deeper, mode).unwrap_err().offset, MAX_DEPTH);
            let typed = from_slice::<serde_json::Value>(&deeper, mode).unwrap_err();
            assert!(typed.reason.contains("deep"), "{typed}");
        }
        assert!(decode(&nested_maps(MAX_DEPTH + 1), mode).is_err());
        // Keys count as nested too.
        let mut key_nest = vec![0xa1; MAX_DEPTH + 1];
        key_nest.push(0x00);
        key_nest.extend(std::iter::repeat_n(0x00, MAX_DEPTH + 1));
        assert!(decode(&key_nest, mode).is_err());
        // Very deep input does not overflow the stack.
        assert!(decode(&nested_arrays(1_000_000), mode).is_err());
        assert!(decode(&vec![0x9f; 1_000_000], mode).is_err());
    }
}

#[test]
fn huge_claimed_lengths_do_not_allocate() {
    // 128 nested arrays that each claim nearly the whole input.
    let mut bytes = Vec::new();
    for _ in 0..MAX_DEPTH {
        bytes.extend_from_slice(&[0x99, 0xff, 0xff]);
    }
    bytes.resize(70_000, 0);
    assert!(strict(&bytes).is_err());
}

#[test]
fn encoder_refuses_what_is_outside_the_subset() {
    assert!(encode_value(&Value::Float(1.5)).is_err());
    assert!(encode_value(&Value::Tag(1, Box::new(int(0)))).is_err());
    assert!(encode_value(&map(vec![(int(1), int(2)), (int(1), int(3))])).is_err());
    assert!(to_vec(&1.5f64).is_err());
    assert!(to_vec(&1.5f32).is_err());
    assert!(to_vec(&vec![Value::Float(0.0)]).is_err());
    assert!(to_vec(&(u128::from(u64::MAX) + 1)).is_err());
    assert!(to_vec(&(-18_446_744_073_709_551_617i128)).is_err());
    assert!(to_vec(&ciborium::tag::Required::<u8, 2>(1)).is_err());
    assert!(to_vec(&ciborium::tag::Captured(Some(7), 1u8)).is_err());
    assert_eq!(
        to_vec(&ciborium::tag::Captured(None, 1u8)).unwrap(),
        vec![1]
    );
    // Duplicate keys reached through serde.
    let dup: Vec<(u8, u8)> = vec![(1, 2), (1, 3)];
    assert!(to_vec(&MapOf(dup)).is_err());
}

/// Serializes a list of pairs as a map, duplicates and all.
#[derive(Debug)]
struct MapOf<K, V>(Vec<(K, V)>);

impl<K: Serialize, V: Serialize> Serialize for MapOf<K, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

// ---------------------------------------------------------------------------------------------
// (c) Round trips
// ---------------------------------------------------------------------------------------------

fn arb_u64() -> BoxedStrategy<u64> {
    prop_oneof![
        0u64..30,
        220u64..300,
        65_500u64..65_600,
        (0u32..64, any::<u64>()).prop_map(|(shift, x)| x >> shift),
        Just(u64::MAX),
        Just(u64::from(u32::MAX)),
        Just(u64::from(u32::MAX) + 1),
    ]
    .boxed()
}

fn arb_leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        arb_u64().prop_map(|n| Value::Integer(n.into())),
        arb_u64().prop_map(|n| int(-1 - i128::from(n))),
        vec(any::<u8>(), 0..40).prop_map(Value::Bytes),
        vec(any::<u8>(), 250..260).prop_map(Value::Bytes),
        any::<String>().prop_map(Value::Text),
        "[a-c]{0,3}".prop_map(Value::Text),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ]
    .boxed()
}

/// Removes entries whose key encodes like an earlier one.
fn dedup_keys(entries: Vec<(Value, Value)>) -> Value {
    let mut seen = std::collections::HashSet::new();
    Value::Map(
        entries
            .into_iter()
            .filter(|(k, _)| seen.insert(encode_value(k).expect("arb values encode")))
            .collect(),
    )
}

fn arb_value() -> BoxedStrategy<Value> {
    arb_leaf()
        .prop_recursive(5, 96, 10, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..10).prop_map(Value::Array),
                vec((inner.clone(), inner.clone()), 0..10).prop_map(dedup_keys),
                // Many small keys, to get maps past 23 entries.
                vec((arb_leaf(), inner), 20..40).prop_map(dedup_keys),
            ]
        })
        .boxed()
}

/// A tiny deterministic generator for choices inside a test case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Writes a head in a random width that can hold `arg` (not necessarily the shortest).
fn loose_head(out: &mut Vec<u8>, rng: &mut Rng, major: u8, arg: u64) {
    let m = major << 5;
    let mut widths = Vec::new();
    if arg < 24 {
        widths.push(0);
    }
    if arg <= 0xff {
        widths.push(1);
    }
    if arg <= 0xffff {
        widths.push(2);
    }
    if arg <= 0xffff_ffff {
        widths.push(4);
    }
    widths.push(8);
    match widths[rng.below(widths.len())] {
        0 => out.push(m | arg as u8),
        1 => out.extend_from_slice(&[m | 24, arg as u8]),
        2 => {
            out.push(m | 25);
            out.extend_from_slice(&(arg as u16).to_be_bytes());
        }
        4 => {
            out.push(m | 26);
            out.extend_from_slice(&(arg as u32).to_be_bytes());
        }
        _ => {
            out.push(m | 27);
            out.extend_from_slice(&arg.to_be_bytes());
        }
    }
}

/// Encodes a value with random widths and shuffled map entries.
fn loose(out: &mut Vec<u8>, rng: &mut Rng, value: &Value) {
    match value {
        Value::Integer(i) => {
            let n = i128::from(*i);
            if n >= 0 {
                loose_head(out, rng, 0, n as u64);
            } else {
                loose_head(out, rng, 1, (-1 - n) as u64);
            }
        }
        Value::Bytes(b) => {
            loose_head(out, rng, 2, b.len() as u64);
            out.extend_from_slice(b);
        }
        Value::Text(s) => {
            loose_head(out, rng, 3, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Array(items) => {
            loose_head(out, rng, 4, items.len() as u64);
            for item in items {
                loose(out, rng, item);
            }
        }
        Value::Map(entries) => {
            loose_head(out, rng, 5, entries.len() as u64);
            let mut order: Vec<usize> = (0..entries.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
            for i in order {
                loose(out, rng, &entries[i].0);
                loose(out, rng, &entries[i].1);
            }
        }
        Value::Bool(b) => out.push(if *b { 0xf5 } else { 0xf4 }),
        Value::Null => out.push(0xf6),
        other => panic!("not in the subset: {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn prop_round_trip(value in arb_value()) {
        let bytes = encode_value(&value).expect("subset values encode");
        prop_assert_eq!(&to_vec(&value).expect("subset values encode"), &bytes);
        let decoded = strict(&bytes).expect("canonical bytes decode strictly");
        prop_assert_eq!(&encode_value(&decoded).expect("decoded values encode"), &bytes);
        prop_assert_eq!(lenient(&bytes), Ok(decoded.clone()));
        // Decoding gives the entries in canonical order, so a second trip is exact.
        prop_assert_eq!(strict(&encode_value(&decoded).unwrap()), Ok(decoded));
    }

    #[test]
    fn prop_lenient_normalises(value in arb_value(), seed in 1u64..) {
        let canon = encode_value(&value).expect("subset values encode");
        let mut rng = Rng(seed);
        let mut bytes = Vec::new();
        loose(&mut bytes, &mut rng, &value);
        let decoded = lenient(&bytes).expect("loose encodings decode leniently");
        prop_assert_eq!(&encode_value(&decoded).expect("decoded values encode"), &canon);
        prop_assert_eq!(&to_vec(&decoded).expect("decoded values encode"), &canon);
        if bytes != canon {
            prop_assert!(strict(&bytes).is_err(), "non-canonical bytes accepted strictly");
        } else {
            prop_assert!(strict(&bytes).is_ok());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (d) No panics on arbitrary input
// ---------------------------------------------------------------------------------------------

/// What strict and lenient decoding must agree on for any input.
fn check_any_bytes(bytes: &[u8]) -> Result<(), TestCaseError> {
    let s = strict(bytes);
    let l = lenient(bytes);
    if let Ok(value) = &s {
        // Canonical decoding is exact: only the canonical encoding of a value is accepted.
        prop_assert_eq!(&encode_value(value).expect("decoded values encode"), bytes);
        prop_assert_eq!(l.as_ref(), Ok(value));
    }
    if let Ok(value) = &l {
        let canon = encode_value(value).expect("decoded values encode");
        prop_assert!(strict(&canon).is_ok());
    }
    // Typed decoding must not panic either, and the direct canonical path decides exactly as
    // decoding to a `Value` and deserializing that would.
    same_typed_decoding::<Probe>(bytes)?;
    same_typed_decoding::<serde_json::Value>(bytes)?;
    same_typed_decoding::<Envelope>(bytes)?;
    let _ = from_slice::<Probe>(bytes, Strictness::Canonical);
    let _ = from_slice::<Probe>(bytes, Strictness::Lenient);
    let _ = from_slice::<serde_json::Value>(bytes, Strictness::Lenient);
    Ok(())
}

/// The direct canonical deserializer (`from_slice` with `Strictness::Canonical`) against the
/// reference path: strict decoding to a `Value`, then serde. What the direct path accepts the
/// reference accepts with the same value; what only the reference accepts is not the
/// canonical encoding of the value it decodes to.
fn same_typed_decoding<T: serde::de::DeserializeOwned + Serialize + std::fmt::Debug>(
    bytes: &[u8],
) -> Result<(), TestCaseError> {
    let direct = from_slice::<T>(bytes, Strictness::Canonical);
    let reference = strict(bytes).and_then(|v| {
        v.deserialized::<T>().map_err(|e| CanonError {
            reason: e.to_string(),
            offset: 0,
        })
    });
    match (&direct, &reference) {
        (Ok(a), Ok(b)) => prop_assert_eq!(to_vec(a).ok(), to_vec(b).ok()),
        (Err(_), Err(_)) => {}
        // The direct path reads text where text is expected; serde's `Value` path also takes
        // a byte string there, which is then not the encoding of what it decodes to.
        (Err(_), Ok(b)) if to_vec(b).ok().as_deref() != Some(bytes) => {}
        _ => prop_assert!(
            false,
            "direct and reference decoding disagree: {:?} vs {:?} on {}",
            direct,
            reference,
            hex::encode(bytes)
        ),
    }
    Ok(())
}

#[derive(Debug, Serialize, Deserialize)]
#[allow(dead_code)]
struct Probe {
    a: Option<u64>,
    b: Vec<String>,
    c: BTreeMap<String, i64>,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn prop_no_panic_on_random_bytes(bytes in vec(any::<u8>(), 0..256)) {
        check_any_bytes(&bytes)?;
    }

    #[test]
    fn prop_no_panic_on_mutated_values(
        value in arb_value(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
    ) {
        let mut bytes = encode_value(&value).expect("subset values encode");
        for (at, byte, kind) in edits {
            let i = at.index(bytes.len() + 1);
            match kind {
                0 if i < bytes.len() => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ if i < bytes.len() => {
                    bytes.remove(i);
                }
                _ => bytes.push(byte),
            }
        }
        check_any_bytes(&bytes)?;
    }
}

// ---------------------------------------------------------------------------------------------
// The direct serializer against the `ciborium::Value` path
// ---------------------------------------------------------------------------------------------

/// Bytes serialized as a CBOR byte string (major type 2).
#[derive(Debug, Clone)]
struct Blob(Vec<u8>);

impl Serialize for Blob {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Blob;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Blob, E> {
                Ok(Blob(v.to_vec()))
            }
        }
        d.deserialize_bytes(V)
    }
}

/// Decodes as a plain sequence (what it announced is not part of the data).
impl<'de> Deserialize<'de> for Liar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Liar {
            items: Vec::deserialize(d)?,
            announce: None,
        })
    }
}

/// A sequence that announces a wrong length (or none) to its serializer.
#[derive(Debug, Clone)]
struct Liar {
    items: Vec<u16>,
    announce: Option<usize>,
}

impl Serialize for Liar {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(self.announce)?;
        for i in &self.items {
            seq.serialize_element(i)?;
        }
        seq.end()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Role {
    Owner,
    Worker,
    Observer,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Member {
    id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    since_ms: Option<u64>,
    weight: i32,
    roles: Vec<Role>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    deps: Vec<String>,
    key: Blob,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Command {
    Create {
        id: String,
        spec: serde_json::Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent: Option<String>,
    },
    Tick {
        now_ms: u64,
    },
    Join(Member),
    Close,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum External {
    Unit,
    Newtype(i64),
    Tuple(u8, String, Option<bool>),
    Struct {
        a: Vec<u16>,
        b: BTreeMap<String, i8>,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", content = "c")]
enum Adjacent {
    A(String),
    B { x: u32 },
    C,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum Untagged {
    Num(i64),
    Pair(String, bool),
    Json(serde_json::Value),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Flat {
    id: u32,
    #[serde(flatten)]
    extra: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Wrapper(u16);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Marker;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Envelope {
    seq: u64,
    actor: String,
    cmd: Command,
    ext: Vec<External>,
    adj: Adjacent,
    untagged: Untagged,
    by_id: BTreeMap<String, Member>,
    numbers: HashMap<i64, String>,
    tuple: (i8, char, u128),
    big: i128,
    flat: Flat,
    unit: (),
    marker: Marker,
    wrapper: Wrapper,
    nested: Vec<Vec<Option<i32>>>,
    liar: Liar,
    #[serde(skip_serializing_if = "Option::is_none")]
    maybe: Option<Box<Envelope>>,
}

/// JSON payloads; floats (which both paths must refuse) appear with the given weight.
fn arb_json_with(float_weight: u32) -> BoxedStrategy<serde_json::Value> {
    use serde_json::Value as J;
    let leaf = prop_oneof![
        4 => Just(J::Null),
        4 => any::<bool>().prop_map(J::Bool),
        4 => any::<i64>().prop_map(J::from),
        4 => arb_u64().prop_map(J::from),
        4 => "[a-z$]{0,6}".prop_map(J::String),
        4 => any::<String>().prop_map(J::String),
        float_weight => any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(J::Null, J::Number)),
    ];
    leaf.prop_recursive(4, 48, 8, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..8).prop_map(J::Array),
            btree_map("[a-z]{0,4}", inner, 0..8).prop_map(|m| J::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

fn arb_json() -> BoxedStrategy<serde_json::Value> {
    arb_json_with(1).boxed()
}

/// JSON payloads that rarely contain a float.
fn arb_json_mostly_ints() -> BoxedStrategy<serde_json::Value> {
    prop_oneof![10 => arb_json_with(0), 1 => arb_json_with(1)].boxed()
}

fn arb_id() -> BoxedStrategy<String> {
    "[A-Za-z0-9._:@~-]{1,20}".boxed()
}

fn arb_member() -> BoxedStrategy<Member> {
    (
        arb_id(),
        proptest::option::of(".{0,10}"),
        proptest::option::of(arb_u64()),
        any::<i32>(),
        vec(
            prop_oneof![Just(Role::Owner), Just(Role::Worker), Just(Role::Observer)],
            0..4,
        ),
        vec(arb_id(), 0..3),
        vec(any::<u8>(), 0..40),
    )
        .prop_map(|(id, note, since_ms, weight, roles, deps, key)| Member {
            id,
            note,
            since_ms,
            weight,
            roles,
            deps,
            key: Blob(key),
        })
        .boxed()
}

fn arb_command() -> BoxedStrategy<Command> {
    prop_oneof![
        (
            arb_id(),
            arb_json_mostly_ints(),
            proptest::option::of(arb_id())
        )
            .prop_map(|(id, spec, parent)| Command::Create { id, spec, parent }),
        arb_u64().prop_map(|now_ms| Command::Tick { now_ms }),
        arb_member().prop_map(Command::Join),
        Just(Command::Close),
    ]
    .boxed()
}

fn arb_external() -> BoxedStrategy<External> {
    prop_oneof![
        Just(External::Unit),
        any::<i64>().prop_map(External::Newtype),
        (any::<u8>(), ".{0,5}", proptest::option::of(any::<bool>()))
            .prop_map(|(a, b, c)| External::Tuple(a, b, c)),
        (
            vec(any::<u16>(), 0..30),
            btree_map(".{0,3}", any::<i8>(), 0..5)
        )
            .prop_map(|(a, b)| External::Struct { a, b }),
    ]
    .boxed()
}

fn arb_adjacent() -> BoxedStrategy<Adjacent> {
    prop_oneof![
        ".{0,5}".prop_map(Adjacent::A),
        any::<u32>().prop_map(|x| Adjacent::B { x }),
        Just(Adjacent::C),
    ]
    .boxed()
}

fn arb_untagged() -> BoxedStrategy<Untagged> {
    prop_oneof![
        any::<i64>().prop_map(Untagged::Num),
        (".{0,5}", any::<bool>()).prop_map(|(s, b)| Untagged::Pair(s, b)),
        arb_json_mostly_ints().prop_map(Untagged::Json),
    ]
    .boxed()
}

fn arb_u128() -> BoxedStrategy<u128> {
    prop_oneof![
        20 => arb_u64().prop_map(u128::from),
        1 => any::<u128>(),
    ]
    .boxed()
}

fn arb_i128() -> BoxedStrategy<i128> {
    prop_oneof![
        10 => arb_u64().prop_map(i128::from),
        10 => arb_u64().prop_map(|n| -1 - i128::from(n)),
        1 => any::<i128>(),
    ]
    .boxed()
}

fn arb_flat() -> BoxedStrategy<Flat> {
    // Keys may collide with the struct's own field "id": both paths must refuse that.
    (
        any::<u32>(),
        btree_map(
            prop_oneof![200 => "[a-z]{1,3}", 1 => Just("id".to_owned())],
            arb_json_with(0),
            0..30,
        ),
    )
        .prop_map(|(id, extra)| Flat { id, extra })
        .boxed()
}

fn arb_liar() -> BoxedStrategy<Liar> {
    vec(any::<u16>(), 0..40)
        .prop_flat_map(|items| {
            let n = items.len();
            (
                Just(items),
                prop_oneof![Just(None), Just(Some(n)), (0usize..300).prop_map(Some)],
            )
                .prop_map(|(items, announce)| Liar { items, announce })
        })
        .boxed()
}

fn arb_envelope_leaf() -> BoxedStrategy<Envelope> {
    let a = (
        arb_u64(),
        arb_id(),
        arb_command(),
        vec(arb_external(), 0..4),
        arb_adjacent(),
        arb_untagged(),
        btree_map(arb_id(), arb_member(), 0..4),
        hash_map(any::<i64>(), ".{0,4}", 0..30),
    );
    let b = (
        (any::<i8>(), any::<char>(), arb_u128()),
        arb_i128(),
        arb_flat(),
        any::<u16>(),
        vec(vec(proptest::option::of(any::<i32>()), 0..4), 0..4),
        arb_liar(),
    );
    (a, b)
        .prop_map(
            |(
                (seq, actor, cmd, ext, adj, untagged, by_id, numbers),
                (tuple, big, flat, wrapper, nested, liar),
            )| Envelope {
                seq,
                actor,
                cmd,
                ext,
                adj,
                untagged,
                by_id,
                numbers,
                tuple,
                big,
                flat,
                unit: (),
                marker: Marker,
                wrapper: Wrapper(wrapper),
                nested,
                liar,
                maybe: None,
            },
        )
        .boxed()
}

fn arb_envelope() -> BoxedStrategy<Envelope> {
    (
        arb_envelope_leaf(),
        proptest::option::of(arb_envelope_leaf()),
    )
        .prop_map(|(mut outer, inner)| {
            outer.maybe = inner.map(Box::new);
            outer
        })
        .boxed()
}

fn same_as_value_path<T: Serialize + std::fmt::Debug>(x: &T) -> Result<(), TestCaseError> {
    let fast = to_vec(x);
    let slow = via_value(x);
    match (&fast, &slow) {
        (Ok(a), Ok(b)) => prop_assert_eq!(hex::encode(a), hex::encode(b)),
        (Err(_), Err(_)) => {}
        _ => prop_assert!(
            false,
            "paths disagree: {:?} vs {:?} for {:?}",
            fast,
            slow,
            x
        ),
    }
    if let Ok(bytes) = &fast {
        prop_assert_eq!(hash(x).expect("encodes"), sha256(bytes));
        prop_assert!(strict(bytes).is_ok(), "to_vec output is not canonical");
    } else {
        prop_assert!(hash(x).is_err());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn prop_serializer_matches_value_path(envelope in arb_envelope()) {
        same_as_value_path(&envelope)?;
        if let Ok(bytes) = to_vec(&envelope) {
            same_typed_decoding::<Envelope>(&bytes)?;
            same_typed_decoding::<serde_json::Value>(&bytes)?;
        }
        // Parts on their own, so that one refused part does not hide the others.
        same_as_value_path(&envelope.cmd)?;
        same_as_value_path(&envelope.ext)?;
        same_as_value_path(&envelope.adj)?;
        same_as_value_path(&envelope.untagged)?;
        same_as_value_path(&envelope.by_id)?;
        same_as_value_path(&envelope.numbers)?;
        same_as_value_path(&envelope.tuple)?;
        same_as_value_path(&envelope.big)?;
        same_as_value_path(&envelope.flat)?;
        same_as_value_path(&envelope.liar)?;
    }

    /// Typed lenient decoding reads any valid encoding of a value as its canonical bytes
    /// read canonically: lenient only widens which bytes are taken, never what they mean.
    #[test]
    fn prop_lenient_typed_reads_loose_encodings(envelope in arb_envelope(), seed in 1u64..) {
        if let Ok(canon) = to_vec(&envelope) {
            let value = strict(&canon).expect("to_vec output is canonical");
            let mut bytes = Vec::new();
            loose(&mut bytes, &mut Rng(seed), &value);
            let read = from_slice::<Envelope>(&bytes, Strictness::Lenient);
            let direct = from_slice::<Envelope>(&canon, Strictness::Canonical);
            prop_assert_eq!(
                read.map(|e| to_vec(&e).ok()).map_err(|e| e.reason),
                direct.map(|e| to_vec(&e).ok()).map_err(|e| e.reason)
            );
        }
    }

    #[test]
    fn prop_serializer_matches_value_path_on_json(json in arb_json()) {
        same_as_value_path(&json)?;
        if let Ok(bytes) = to_vec(&json) {
            same_typed_decoding::<serde_json::Value>(&bytes)?;
        }
        same_as_value_path(&vec![json.clone(), json])?;
    }

    #[test]
    fn prop_serializer_matches_value_path_on_values(value in arb_value()) {
        same_as_value_path(&value)?;
        // A map whose keys are the generated values (maps and arrays as keys).
        let entries: Vec<(Value, u8)> = match &value {
            Value::Array(items) => items.iter().cloned().zip(0u8..).collect(),
            other => vec![(other.clone(), 0)],
        };
        same_as_value_path(&MapOf(entries))?;
    }
}

#[test]
fn serializer_fixes_heads_across_widths() {
    // Announced lengths that are wrong in every direction, across head widths.
    for (n, announce) in [
        (0usize, Some(1usize)),
        (1, Some(0)),
        (24, Some(23)),
        (23, Some(24)),
        (300, Some(2)),
        (2, Some(300)),
        (70_000, None),
        (70_000, Some(70_000)),
    ] {
        let liar = Liar {
            items: (0..n).map(|i| i as u16).collect(),
            announce,
        };
        assert_eq!(
            to_vec(&liar).unwrap(),
            via_value(&liar).unwrap(),
            "{n} {announce:?}"
        );
    }
    // Flattened maps arrive with no announced length; nest one inside another's value.
    let inner = Flat {
        id: 1,
        extra: (0..300)
            .map(|i| (format!("k{i}"), serde_json::json!(i)))
            .collect(),
    };
    let outer: BTreeMap<String, Flat> = [("z".to_owned(), inner.clone()), ("a".to_owned(), inner)]
        .into_iter()
        .collect();
    assert_eq!(to_vec(&outer).unwrap(), via_value(&outer).unwrap());
}

#[test]
fn serializer_sorts_by_encoded_key() {
    #[derive(Serialize)]
    struct S {
        zz: u8,
        b: u8,
        aaa: u8,
        a: u8,
    }
    // Length first, then bytes: "a", "b", "zz", "aaa".
    assert_eq!(
        hex::encode(
            to_vec(&S {
                zz: 3,
                b: 2,
                aaa: 4,
                a: 1
            })
            .unwrap()
        ),
        "a4616101616202627a7a0363616161 04".replace(' ', "")
    );
    let m: HashMap<i64, u8> = [(-1, 0), (0, 1), (-25, 2), (24, 3), (1000, 4), (-1000, 5)]
        .into_iter()
        .collect();
    // 0, 24, 1000, -1, -25, -1000.
    assert_eq!(
        hex::encode(to_vec(&m).unwrap()),
        "a6000118180319 03e8042000 381802 3903e705".replace(' ', "")
    );
}

#[test]
fn serializer_sorts_keys_sharing_long_prefixes() {
    let texts: Vec<(String, u8)> = [
        "common_prefix_10",
        "common_prefix_2",
        "common_prefix_1",
        "common_prefix_",
        "common_prefiy",
        "common_prefix_11",
    ]
    .iter()
    .zip(0u8..)
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let ints: Vec<(u64, u8)> = (0..20u64)
        .rev()
        .map(|i| (0x0102_0304_0506_0700 + i * 7 % 20, 0))
        .collect();
    let blobs: Vec<(Blob, u8)> = (0..10u8)
        .rev()
        .map(|i| (Blob([vec![9; 12], vec![i]].concat()), i))
        .collect();
    for bytes in [
        to_vec(&MapOf(texts.clone())).unwrap(),
        to_vec(&MapOf(ints.clone())).unwrap(),
        to_vec(&MapOf(blobs.clone())).unwrap(),
    ] {
        let value = strict(&bytes).expect("sorted");
        assert_eq!(encode_value(&value).unwrap(), bytes);
    }
    assert_eq!(
        to_vec(&MapOf(texts.clone())).unwrap(),
        via_value(&MapOf(texts.clone())).unwrap()
    );
    assert_eq!(
        to_vec(&MapOf(ints.clone())).unwrap(),
        via_value(&MapOf(ints.clone())).unwrap()
    );
    // Duplicates whose first 8 bytes are equal, far apart in the input.
    let mut dup = texts;
    dup.push(("common_prefix_2".to_owned(), 9));
    assert!(to_vec(&MapOf(dup)).is_err());
    let mut dup = ints;
    dup.insert(0, (0x0102_0304_0506_0705, 1));
    assert!(to_vec(&MapOf(dup)).is_err());
}

#[test]
fn internally_tagged_and_skipped_fields() {
    let tick = Command::Tick { now_ms: 5 };
    assert_eq!(
        hex::encode(to_vec(&tick).unwrap()),
        // {"type": "tick", "now_ms": 5}: "type" (4 bytes) sorts before "now_ms" (6 bytes).
        "a2647479706564746963 6b666e6f775f6d7305".replace(' ', "")
    );
    let close = Command::Close;
    assert_eq!(
        hex::encode(to_vec(&close).unwrap()),
        "a1647479706565636c6f7365"
    );
    let create = Command::Create {
        id: "w".into(),
        spec: serde_json::json!(null),
        parent: None,
    };
    let decoded = strict(&to_vec(&create).unwrap()).unwrap();
    let keys: Vec<_> = decoded
        .as_map()
        .unwrap()
        .iter()
        .map(|(k, _)| k.as_text().unwrap().to_owned())
        .collect();
    assert_eq!(keys, ["id", "spec", "type"]);
}

#[test]
fn from_slice_round_trips_typed_values() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    enum Msg {
        Put {
            key: String,
            #[serde(skip_serializing_if = "Option::is_none", default)]
            note: Option<String>,
            data: serde_json::Value,
            n: i64,
        },
        Del {
            key: String,
        },
    }
    for msg in [
        Msg::Put {
            key: "k".into(),
            note: None,
            data: serde_json::json!({"b": [1, -2, "x", null, true], "a": {}}),
            n: -7,
        },
        Msg::Put {
            key: "k".into(),
            note: Some("hi".into()),
            data: serde_json::json!([]),
            n: i64::MIN,
        },
        Msg::Del { key: "z".into() },
    ] {
        let bytes = to_vec(&msg).unwrap();
        let back: Msg = from_slice(&bytes, Strictness::Canonical).unwrap();
        assert_eq!(back, msg);
        assert_eq!(hash(&msg).unwrap(), sha256(&bytes));
    }
}
