//! The non-generic canonical readers of the types a host stores (`GroupState`, `WriteSet`,
//! `AgentImage`) read exactly what `canonical::from_slice` reads at `Strictness::Canonical`,
//! and refuse what only the lenient reader takes.

use mwp_core::agent::AgentImage;
use mwp_core::canonical::{self, Strictness};
use mwp_core::replica::WriteSet;
use mwp_core::{GroupState, Limits};

#[path = "../benches/common/mod.rs"]
#[allow(dead_code)]
mod common;

fn state() -> GroupState {
    common::state(5)
}

/// The canonical bytes with the shortest encoding of `serial` (a small unsigned integer
/// right after the text key "serial") written in two bytes instead: valid CBOR, not canonical.
fn with_long_serial(canonical: &[u8]) -> Vec<u8> {
    let key = b"\x66serial";
    let at = canonical
        .windows(key.len())
        .position(|w| w == key)
        .expect("a serial field")
        + key.len();
    assert!(canonical[at] < 24, "a small serial");
    let mut out = canonical[..at].to_vec();
    out.extend_from_slice(&[0x18, canonical[at]]);
    out.extend_from_slice(&canonical[at + 1..]);
    out
}

#[test]
fn group_state_reads_its_canonical_bytes() {
    let state = state();
    let bytes = canonical::to_vec(&state).expect("encodes");
    let read = GroupState::from_canonical(&bytes).expect("decodes");
    assert_eq!(read, state);
    let generic: GroupState =
        canonical::from_slice(&bytes, Strictness::Canonical).expect("decodes");
    assert_eq!(read, generic);
    assert!(GroupState::from_canonical(&bytes[..bytes.len() - 1]).is_err());
}

#[test]
fn write_set_reads_canonical_bytes_only() {
    let ws = WriteSet {
        serial: 7,
        cursor: 3,
        ..WriteSet::default()
    };
    let bytes = canonical::to_vec(&ws).expect("encodes");
    assert_eq!(WriteSet::from_canonical(&bytes).expect("decodes"), ws);
    let long = with_long_serial(&bytes);
    let lenient: WriteSet = canonical::from_slice(&long, Strictness::Lenient).expect("lenient");
    assert_eq!(lenient, ws);
    let refused = WriteSet::from_canonical(&long).expect_err("not canonical");
    let generic =
        canonical::from_slice::<WriteSet>(&long, Strictness::Canonical).expect_err("not canonical");
    assert_eq!(refused.to_string(), generic.to_string());
}

#[test]
fn agent_image_reads_canonical_bytes_only() {
    let image = AgentImage {
        serial: 9,
        ..AgentImage::default()
    };
    let bytes = canonical::to_vec(&image).expect("encodes");
    assert_eq!(AgentImage::from_canonical(&bytes).expect("decodes"), image);
    let long = with_long_serial(&bytes);
    let lenient: AgentImage = canonical::from_slice(&long, Strictness::Lenient).expect("lenient");
    assert_eq!(lenient, image);
    assert!(AgentImage::from_canonical(&long).is_err());
}

/// The value with every map's entries in reverse order, recursively: the same data, and for
/// any map of two or more entries not its canonical encoding.
fn reversed(value: ciborium::Value) -> ciborium::Value {
    use ciborium::Value;
    match value {
        Value::Map(entries) => Value::Map(
            entries
                .into_iter()
                .rev()
                .map(|(k, v)| (reversed(k), reversed(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(reversed).collect()),
        other => other,
    }
}

fn loose_bytes(value: ciborium::Value) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(&reversed(value), &mut out).expect("writes");
    out
}

/// A command sent in any valid CBOR encoding decodes to the command its canonical bytes
/// hold; the lenient reader rewrites it canonically and reads it with the one typed reader.
#[test]
fn command_reads_any_valid_encoding() {
    use mwp_core::Command;
    let limits = Limits::default();
    let mut cmds = vec![common::open()];
    cmds.extend(common::workload(3));
    for cmd in &cmds {
        let canon = cmd.to_cbor().expect("encodes");
        let value = canonical::decode(&canon, Strictness::Canonical).expect("canonical");
        let loose = loose_bytes(value);
        assert_ne!(loose, canon, "the loose bytes differ");
        assert!(canonical::decode(&loose, Strictness::Canonical).is_err());
        let read = Command::from_cbor(&loose, &limits).expect("lenient");
        assert_eq!(read.to_cbor().expect("encodes"), canon);
        assert_eq!(&read, cmd);
    }
}

/// The entries of the genesis command's map, as its canonical bytes hold them.
fn genesis_entries() -> Vec<(ciborium::Value, ciborium::Value)> {
    let canon = common::open().to_cbor().expect("encodes");
    match canonical::decode(&canon, Strictness::Canonical) {
        Ok(ciborium::Value::Map(entries)) => entries,
        other => panic!("a command is a map: {other:?}"),
    }
}

/// A loose encoding that lacks a field is refused with the field's name.
#[test]
fn command_missing_field_is_named() {
    use mwp_core::Command;
    let entries = genesis_entries();
    let without: Vec<_> = entries
        .into_iter()
        .filter(|(k, _)| k.as_text() != Some("actor"))
        .collect();
    let err = Command::from_cbor(
        &loose_bytes(ciborium::Value::Map(without)),
        &Limits::default(),
    )
    .expect_err("no actor");
    assert!(err.to_string().contains("actor"), "{err}");
}

/// A byte string where text is expected is refused leniently, as it is canonically.
#[test]
fn command_with_bytes_for_text_is_refused() {
    use mwp_core::Command;
    let entries = genesis_entries();
    let as_bytes: Vec<_> = entries
        .into_iter()
        .map(|(k, v)| match (k.as_text(), v) {
            (Some("actor"), ciborium::Value::Text(t)) => (k, ciborium::Value::Bytes(t.into())),
            (_, v) => (k, v),
        })
        .collect();
    let value = ciborium::Value::Map(as_bytes);
    let err = Command::from_cbor(&loose_bytes(value.clone()), &Limits::default())
        .expect_err("bytes for the actor");
    assert!(err.to_string().contains("byte"), "{err}");
    let canon_bytes = canonical::encode_value(&value).expect("encodes");
    assert!(Command::from_cbor(&canon_bytes, &Limits::default()).is_err());
}

/// A command is a map: the same fields as an array are refused, leniently too.
#[test]
fn command_as_an_array_is_refused() {
    use mwp_core::Command;
    let values: Vec<_> = genesis_entries().into_iter().map(|(_, v)| v).collect();
    let array = ciborium::Value::Array(values);
    let canon = canonical::encode_value(&array).expect("encodes");
    let err = Command::from_cbor(&canon, &Limits::default()).expect_err("an array");
    assert!(err.to_string().contains("expected a map"), "{err}");
    assert!(Command::from_cbor(&loose_bytes(array), &Limits::default()).is_err());
}

/// Canonical bytes that are not a command are refused with the offset where they fail.
#[test]
fn canonical_input_keeps_its_error_offset() {
    use mwp_core::Command;
    let entries: Vec<_> = genesis_entries()
        .into_iter()
        .map(|(k, v)| match k.as_text() {
            Some("session") => (k, ciborium::Value::Text("one".into())),
            _ => (k, v),
        })
        .collect();
    let canon = canonical::encode_value(&ciborium::Value::Map(entries)).expect("encodes");
    let err = canonical::from_slice::<Command>(&canon, Strictness::Lenient).expect_err("text");
    let direct = canonical::from_slice::<Command>(&canon, Strictness::Canonical).expect_err("text");
    assert_eq!(err, direct);
    assert!(err.offset > 0, "{err}");
}
