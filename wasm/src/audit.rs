//! Sealed audit logs (SPEC §6a) for hosts that keep their files themselves (the Node/Deno file
//! store of `js/src/file-store.js`): the `mwp-audit` crate's sealing and opening, and the
//! core's artifact checks and replay decision, compiled into the module so that nothing of
//! the format, the encryption or the decisions is written in JavaScript.
//!
//! * [`AuditSealer`]: the streaming sealer. The host feeds every stored event in seq order
//!   and writes each chunk of artifact bytes it gets back, then finishes with the final
//!   snapshot's stored bytes and writes the rest (the manifest trailer included).
//! * [`audit_manifest`]: the manifest of an artifact, checked (layout, signature, ciphertext).
//! * [`audit_replay`]: the replay answer of a group whose plain history was removed.
//! * [`generate_audit_identity`], [`open_audit`]: an Organization key pair, and opening an
//!   artifact with its identity (what `mwp audit open` does).
//!
//! Errors are `StoreError`s with the spec's code; a rejected artifact is `AUDIT_INVALID` with
//! `details.check` naming the check that failed.

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;

use mwp_audit::Sealer;
use mwp_core::audit::{read_trailer, split_artifact, OrgPolicy};
use mwp_core::authority::{Policy, Replay};
use mwp_core::{Error, Hash, Id};
use wasm_bindgen::prelude::*;

use crate::codec::{from_js, num, parse_public_key, parse_secret_key, to_js, uint};
use crate::error::StoreError;

/// A writer appending to a buffer the sealer's owner drains between calls.
#[derive(Clone, Default)]
struct Shared(Rc<RefCell<Vec<u8>>>);

impl Shared {
    /// The bytes written since the last drain, as a `Uint8Array`.
    fn drain(&self) -> js_sys::Uint8Array {
        let mut buf = self.0.borrow_mut();
        let out = js_sys::Uint8Array::from(buf.as_slice());
        buf.clear();
        out
    }
}

impl Write for Shared {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Reads one Organization's policy given as its JSON text or as a plain object.
pub fn org_policy_from_js(value: JsValue) -> Result<OrgPolicy, Error> {
    match value.as_string() {
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| Error::malformed(format!("organization policy: {e}"))),
        None => from_js(value, "organization policy"),
    }
}

/// Streams the sealed artifact of an archived Group (`mwp_audit::Sealer`): `MWPAUDT1`, the
/// age ciphertext of every stored event in seq order and the final snapshot, then the signed
/// manifest. Memory holds only what was produced since the last call.
#[wasm_bindgen]
pub struct AuditSealer {
    sealer: Option<Sealer<Shared>>,
    out: Shared,
}

#[wasm_bindgen]
impl AuditSealer {
    /// Starts an artifact encrypted to the recipients of `orgPolicy` (one Organization's
    /// policy: `{recipients, retain_days, remove_plain}`, as JSON text or an object, e.g. the
    /// `seal` of a `StoreGroup.submit` step). `MALFORMED` for a policy or recipient that does
    /// not parse.
    #[wasm_bindgen(constructor)]
    pub fn new(org_policy: JsValue) -> Result<AuditSealer, StoreError> {
        let policy = org_policy_from_js(org_policy)?;
        let out = Shared::default();
        let sealer = Sealer::new(out.clone(), &policy)?;
        Ok(AuditSealer {
            sealer: Some(sealer),
            out,
        })
    }

    fn sealer(&mut self) -> Result<&mut Sealer<Shared>, Error> {
        self.sealer
            .as_mut()
            .ok_or_else(|| Error::malformed("this AuditSealer is finished"))
    }

    /// The artifact bytes produced so far and not yet returned (the first call's start with
    /// `MWPAUDT1`); the host appends them to the artifact file in order.
    pub fn take(&self) -> js_sys::Uint8Array {
        self.out.drain()
    }

    /// Appends the stored bytes of the next event (seq 1 first; a redacted event as stored)
    /// and returns the artifact bytes produced since the last call (often none: the
    /// encryption works in 64 KiB chunks).
    pub fn event(&mut self, bytes: &[u8]) -> Result<js_sys::Uint8Array, StoreError> {
        self.sealer()?.event(bytes)?;
        Ok(self.out.drain())
    }

    /// How many events were appended.
    #[wasm_bindgen(getter)]
    pub fn events(&self) -> f64 {
        num(self.sealer.as_ref().map_or(0, Sealer::events))
    }

    /// Closes the log with the final snapshot's stored bytes (its canonical CBOR, which must
    /// verify under the authority key `secretKey` (hex seed) and be at the seq of the last
    /// event appended) and signs the manifest at `sealedAtMs`. Returns `{bytes, manifest}`:
    /// the rest of the artifact (the manifest trailer included) and the manifest (JSON form).
    /// `SNAPSHOT_INVALID`, or `AUDIT_INVALID` (check `chain`) when the events appended are
    /// not as many as the snapshot's seq. The sealer is finished afterwards, whatever the
    /// outcome.
    pub fn finish(
        &mut self,
        snapshot_bytes: &[u8],
        sealed_at_ms: f64,
        secret_key: &str,
    ) -> Result<JsValue, StoreError> {
        let sealed_at = uint(sealed_at_ms, "sealedAtMs")?;
        let key = parse_secret_key(secret_key)?;
        let sealer = self
            .sealer
            .take()
            .ok_or_else(|| Error::malformed("this AuditSealer is finished"))?;
        let (_, manifest) = sealer.finish(snapshot_bytes, sealed_at, &key)?;
        let out = js_sys::Object::new();
        // Setting a property on a fresh plain object cannot fail.
        let _ = js_sys::Reflect::set(&out, &"bytes".into(), &self.out.drain());
        let _ = js_sys::Reflect::set(&out, &"manifest".into(), &to_js(&manifest)?);
        Ok(out.into())
    }
}

fn trusted_key(hex: Option<String>) -> Result<Option<mwp_core::PublicKey>, Error> {
    hex.as_deref().map(parse_public_key).transpose()
}

/// The manifest (JSON form) of a sealed artifact, after the core's checks
/// (`mwp_core::audit::split_artifact`): the layout, the manifest's schema and signature
/// under `trustedKey` (hex public key; without it, under the key it names, which shows only
/// that it is whole) and that the ciphertext is the one it names. No key is needed.
/// `AUDIT_INVALID` naming the `check` otherwise.
#[wasm_bindgen(js_name = auditManifest)]
pub fn audit_manifest(
    artifact: &[u8],
    trusted_key_hex: Option<String>,
) -> Result<JsValue, StoreError> {
    let trusted = trusted_key(trusted_key_hex)?;
    let (manifest, _) = split_artifact(artifact, trusted.as_ref())?;
    Ok(to_js(&manifest)?)
}

/// The manifest from the end of an artifact (`tail`: its last bytes, at least the manifest
/// and 12 more; 65,548 always suffice), checked under `trustedKeyHex` (or its own key) without
/// reading the ciphertext (the core's `read_trailer`): what a store's open reads.
#[wasm_bindgen(js_name = auditTrailer)]
pub fn audit_trailer(tail: &[u8], trusted_key_hex: Option<String>) -> Result<JsValue, StoreError> {
    let trusted = trusted_key(trusted_key_hex)?;
    let (manifest, _) = read_trailer(tail, trusted.as_ref())?;
    Ok(to_js(&manifest)?)
}

/// Where a sealed group's plain log starts (the core's `audit::plain_log_start`): `sealedSeq`
/// is the final seq its checked seal record names (`undefined`: none), `removes` whether that
/// record says the plain history goes (a manifest's `remove_plain`, or a tombstone), and
/// `segments` the first seqs of the segment files. `sealedSeq + 1` or 1.
#[wasm_bindgen(js_name = auditPlainLogStart)]
pub fn audit_plain_log_start(
    sealed_seq: Option<f64>,
    removes: bool,
    segments: Vec<f64>,
) -> Result<f64, StoreError> {
    let sealed = match sealed_seq {
        Some(s) => Some((uint(s, "sealedSeq")?, removes)),
        None => None,
    };
    let segments = segments
        .into_iter()
        .map(|s| uint(s, "segments"))
        .collect::<Result<Vec<u64>, Error>>()?;
    Ok(mwp_core::audit::plain_log_start(sealed, &segments) as f64)
}

/// The replay answer for the events of `group` after `after` once its plain history was
/// removed, the final snapshot being at `finalSeq` with state hash `stateHash` (hex): returns
/// nothing when they are served (`after >= finalSeq`), else throws `CURSOR_TOO_OLD` with the
/// final snapshot's reference (the core's `Policy::check_replay_sealed`).
#[wasm_bindgen(js_name = auditReplay)]
pub fn audit_replay(
    after: f64,
    final_seq: f64,
    state_hash: &str,
    group: &str,
) -> Result<(), StoreError> {
    let group = Id::new(group).map_err(|e| StoreError::malformed(format!("group: {e}")))?;
    let hash =
        Hash::from_hex(state_hash).map_err(|e| StoreError::malformed(format!("stateHash: {e}")))?;
    match Policy::check_replay_sealed(
        &group,
        uint(after, "after")?,
        uint(final_seq, "finalSeq")?,
        hash,
    ) {
        Replay::TooOld(e) => Err(e.into()),
        Replay::Serve | Replay::NeedSnapshot => Ok(()),
    }
}

/// A new Organization key pair (`mwp_audit::generate_identity`): `{identity, recipient}`,
/// the identity file's text (`AGE-SECRET-KEY-1…`, as `age-keygen` writes it) and the
/// recipient (`age1…`) a policy names. Draws randomness (`crypto.getRandomValues`).
#[wasm_bindgen(js_name = generateAuditIdentity)]
pub fn generate_audit_identity() -> Result<JsValue, StoreError> {
    let (identity, recipient) = mwp_audit::generate_identity();
    Ok(to_js(&serde_json::json!({
        "identity": identity,
        "recipient": recipient,
    }))?)
}

/// Opens a sealed artifact with an identity file's text (`mwp_audit::open`): checks the
/// manifest (under `trustedKey`, hex, when given) and the ciphertext, decrypts, and verifies
/// the log against the manifest (chain, final snapshot, state hash). Returns `{manifest,
/// events, snapshot, stateHash}`: the manifest (JSON form), every event's stored bytes (an
/// array of `Uint8Array`, seq 1 first), the final snapshot's stored bytes and the state hash
/// (hex) the events reach. `AUDIT_INVALID` naming the `check` (`identity` when no identity
/// given is a recipient), `MALFORMED` for an identity file that does not parse.
#[wasm_bindgen(js_name = openAudit)]
pub fn open_audit(
    artifact: &[u8],
    identity: &str,
    trusted_key_hex: Option<String>,
) -> Result<JsValue, StoreError> {
    let trusted = trusted_key(trusted_key_hex)?;
    let identities = mwp_audit::parse_identities(identity)?;
    let log = mwp_audit::open(artifact, &identities, trusted.as_ref())?;
    let events = js_sys::Array::new();
    for e in &log.events {
        events.push(&js_sys::Uint8Array::from(e.as_slice()));
    }
    let out = js_sys::Object::new();
    // Setting a property on a fresh plain object cannot fail.
    let _ = js_sys::Reflect::set(&out, &"manifest".into(), &to_js(&log.manifest)?);
    let _ = js_sys::Reflect::set(&out, &"events".into(), &events);
    let _ = js_sys::Reflect::set(
        &out,
        &"snapshot".into(),
        &js_sys::Uint8Array::from(log.snapshot_bytes.as_slice()),
    );
    let _ = js_sys::Reflect::set(&out, &"stateHash".into(), &log.state_hash.to_hex().into());
    Ok(out.into())
}

/// The tombstone (JSON form) an expired artifact left (`audit.tombstone`: its canonical
/// CBOR), after the core's checks: it decodes and its signature verifies under `trustedKey`
/// (hex public key) or, without one, under the key it names. `AUDIT_INVALID` naming the
/// `check` (`decode`, `schema`, `signature`) otherwise.
#[wasm_bindgen(js_name = auditTombstone)]
pub fn audit_tombstone(
    bytes: &[u8],
    trusted_key_hex: Option<String>,
) -> Result<JsValue, StoreError> {
    let trusted = trusted_key(trusted_key_hex)?;
    let tombstone = mwp_core::audit::Tombstone::from_cbor(bytes)?;
    tombstone.verify(trusted.as_ref())?;
    Ok(to_js(&tombstone)?)
}

/// Parses the operator's Organization policy file (`mwp_audit::load_policy`: the schema,
/// every recipient an age X25519 public key, the retention) and returns it (JSON form).
/// `MALFORMED` naming the first thing wrong.
#[wasm_bindgen(js_name = parseOrgPolicy)]
pub fn parse_org_policy(text: &str) -> Result<JsValue, StoreError> {
    Ok(to_js(&mwp_audit::load_policy(text)?)?)
}
