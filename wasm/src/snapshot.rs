//! Snapshot helpers (SPEC §8): build from a state, verify stored bytes.

use mwp_core::snapshot::Snapshot;
use mwp_core::Id;
use serde_json::json;
use wasm_bindgen::prelude::*;

use crate::codec::{parse_public_key, parse_secret_key, to_js, uint};
use crate::error::SnapshotError;
use crate::replica::state_from_cbor;

/// Builds and signs a snapshot of a canonical state (CBOR bytes, as `stateCbor()` gives it)
/// with the authority's secret key seed (hex). Returns the snapshot's canonical CBOR.
#[wasm_bindgen(js_name = buildSnapshot)]
pub fn build_snapshot(state_cbor: &[u8], secret_key_hex: &str) -> Result<Vec<u8>, SnapshotError> {
    let state = state_from_cbor(state_cbor)?;
    let key = parse_secret_key(secret_key_hex)?;
    Ok(Snapshot::build(&state, &key)?.to_cbor()?)
}

/// Validates snapshot bytes in the order of SPEC §8 (schema, state hash, signature against
/// `trustedKey`, org and group binding, `seq ≥ minSeq`). Returns its header
/// `{schema, org, group, mission, seq, chain_head, state_hash, signer}`; throws
/// `SNAPSHOT_INVALID` with the reason.
#[wasm_bindgen(js_name = verifySnapshot)]
pub fn verify_snapshot(
    bytes: &[u8],
    trusted_key: &str,
    org: &str,
    group: &str,
    min_seq: f64,
) -> Result<JsValue, SnapshotError> {
    let trusted = parse_public_key(trusted_key)?;
    let org = Id::new(org).map_err(|e| SnapshotError::malformed(format!("org: {e}")))?;
    let group = Id::new(group).map_err(|e| SnapshotError::malformed(format!("group: {e}")))?;
    let snap = Snapshot::verify_bytes(bytes, &trusted, &org, &group, uint(min_seq, "minSeq")?)?;
    Ok(to_js(&json!({
        "schema": snap.schema, "org": snap.org, "group": snap.group, "mission": snap.mission,
        "seq": snap.seq, "chain_head": snap.chain_head, "state_hash": snap.state_hash,
        "signer": snap.signer,
    }))?)
}
