//! Opaque payloads (`title`, `spec`, `result`, `data`, `error`, `reason`, `resolution`,
//! `receipt`, `target`): arbitrary JSON, committed to the log through their own hashes so that
//! redaction can erase the value and keep every id and the chain verifiable (SPEC §3, §6).

use serde_json::Value;

use crate::canonical;
use crate::crypto::Hash;
use crate::error::{Error, Result};

/// An opaque payload value.
pub type Opaque = Value;

/// The key of the marker that stands for an erased value: `{"$redacted": "<hash>"}`.
pub const REDACTED_KEY: &str = "$redacted";

/// Deepest nesting accepted in an opaque payload.
pub const MAX_DEPTH: usize = 64;

/// The hash that commits to an opaque value: SHA-256 of its canonical CBOR, or the hash
/// carried by a redaction marker.
pub fn hash(value: &Opaque) -> Result<Hash> {
    if let Some(h) = redacted_hash(value) {
        return Ok(h);
    }
    Ok(Hash(canonical::hash(value)?))
}

/// The hash inside a redaction marker, if `value` is one.
pub fn redacted_hash(value: &Opaque) -> Option<Hash> {
    let map = value.as_object()?;
    if map.len() != 1 {
        return None;
    }
    Hash::from_hex(map.get(REDACTED_KEY)?.as_str()?).ok()
}

/// The marker that replaces an erased value.
pub fn redaction_marker(hash: Hash) -> Opaque {
    let mut map = serde_json::Map::new();
    map.insert(REDACTED_KEY.to_owned(), Value::String(hash.to_hex()));
    Value::Object(map)
}

/// Checks a payload sent in a Command: no floats, no `$`-keys, bounded depth and size.
/// `field` names the payload in the error.
pub fn validate(value: &Opaque, field: &str, max_bytes: usize) -> Result<()> {
    walk(value, field, 0)?;
    let len = canonical::to_vec(value)?.len();
    if len > max_bytes {
        return Err(Error::malformed(format!(
            "`{field}` is {len} bytes encoded; the payload limit is {max_bytes}"
        ))
        .with("limit", max_bytes));
    }
    Ok(())
}

fn walk(value: &Opaque, field: &str, depth: usize) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(Error::malformed(format!(
            "`{field}` is nested deeper than {MAX_DEPTH} levels"
        )));
    }
    match value {
        Value::Number(n) if !(n.is_i64() || n.is_u64()) => Err(Error::malformed(format!(
            "`{field}` holds the number {n}; floats are not allowed, use an integer or a string"
        ))),
        Value::Array(items) => items.iter().try_for_each(|v| walk(v, field, depth + 1)),
        Value::Object(map) => {
            if let Some(k) = map.keys().find(|k| k.starts_with('$')) {
                return Err(Error::malformed(format!(
                    "`{field}` holds the key {k:?}; keys beginning with `$` are reserved"
                )));
            }
            map.values().try_for_each(|v| walk(v, field, depth + 1))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn marker_round_trips_its_hash() {
        let v = json!({"a": [1, "x", null, true]});
        let h = hash(&v).expect("no floats");
        assert_eq!(hash(&redaction_marker(h)).expect("marker"), h);
    }

    #[test]
    fn refuses_floats_dollar_keys_and_oversize() {
        assert!(validate(&json!({"a": 1.5}), "spec", 1000).is_err());
        assert!(validate(&json!({"$redacted": "x"}), "spec", 1000).is_err());
        assert!(validate(&json!([{"b": {"$x": 1}}]), "spec", 1000).is_err());
        assert!(validate(&json!("x".repeat(100)), "spec", 50).is_err());
        assert!(validate(&json!({"a": [1, -2, "ok"]}), "spec", 1000).is_ok());
    }
}
