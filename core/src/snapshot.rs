//! Signed snapshots (SPEC §8): the canonical Group state at a seq, receipts included, signed
//! by the authority, so a replica that fell behind can restore and resume strictly after it.
//!
//! Validation runs the checks of SPEC §8 in order and stops at the first failure, answering
//! `SNAPSHOT_INVALID` with `check` naming it: `decode` (stored bytes are not canonical CBOR
//! of a snapshot), `schema`, `state_hash` (the state does not hash to `state_hash`, or does
//! not match the header's seq, chain head, mission, org or group), `signature` (not signed by
//! the trusted key), `org`, `group`, `seq` (older than the requested cursor). Nothing is
//! changed by a failed validation.
//!
//! Stored bytes are verified without re-encoding the state: because they must be canonical,
//! the state's hash is the SHA-256 of its encoded bytes as stored, and the signed digest is the
//! SHA-256 of the snapshot map with its `sig` entry left out.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::canonical;
use crate::crypto::{Hash, PublicKey, SecretKey, Signature};
use crate::error::{Code, Error, Result};
use crate::id::Id;
use crate::state::GroupState;

/// The schema name every snapshot carries.
pub const SCHEMA: &str = "mwp.snapshot.v1";

/// A signed snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Organization.
    pub org: Id,
    /// Group.
    pub group: Id,
    /// Mission.
    pub mission: Id,
    /// Seq of the last event folded in.
    pub seq: u64,
    /// Id of event `seq`.
    pub chain_head: Hash,
    /// Hash of `state`.
    pub state_hash: Hash,
    /// Canonical state at `seq`, receipts included.
    pub state: GroupState,
    /// Public key of the signer.
    pub signer: PublicKey,
    /// Ed25519 signature over the SHA-256 of the canonical CBOR of every other field.
    pub sig: Signature,
}

/// Where a signed snapshot can be fetched: the body of a `CURSOR_TOO_OLD` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRef {
    /// Its seq.
    pub seq: u64,
    /// Its state hash.
    pub hash: Hash,
    /// Where to fetch it (a URL path for `mwp serve`, a file path on disk).
    pub location: String,
}

impl SnapshotRef {
    /// The `CURSOR_TOO_OLD` error pointing at this snapshot: the answer of a replay source
    /// that no longer holds events after `requested` (it serves events after `oldest`).
    pub fn cursor_too_old(&self, requested: u64, oldest: u64) -> Error {
        Error::new(
            Code::CursorTooOld,
            format!(
                "events after {requested} are no longer served (oldest available is after {oldest}); restore the snapshot at seq {} and resume after it",
                self.seq
            ),
        )
        .with(
            "snapshot",
            serde_json::to_value(self).expect("a snapshot reference always encodes"),
        )
    }

    /// The snapshot reference a `CURSOR_TOO_OLD` error carries, if `error` is one.
    pub fn from_error(error: &Error) -> Option<SnapshotRef> {
        if error.code != Code::CursorTooOld {
            return None;
        }
        serde_json::from_value(error.details.get("snapshot")?.clone()).ok()
    }
}

/// The validation step that failed (the `check` detail of `SNAPSHOT_INVALID`).
fn invalid(check: &str, reason: impl Into<String>) -> Error {
    let reason = reason.into();
    Error::new(
        Code::SnapshotInvalid,
        format!("snapshot rejected ({check}): {reason}"),
    )
    .with("check", check)
    .with("reason", reason)
}

/// The two digests validation compares: the state's hash and the signed digest.
struct Digests {
    state_hash: Hash,
    signed: [u8; 32],
}

/// Canonical CBOR of a map given as (key, encoded value) pairs: keys sorted by their
/// encoded bytes, as [`canonical`] would write them.
fn assemble(entries: &[(&str, &[u8])]) -> Result<Vec<u8>> {
    let mut encoded: Vec<(Vec<u8>, &[u8])> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        encoded.push((canonical::to_vec(*k)?, v));
    }
    encoded.sort();
    let len: usize = encoded.iter().map(|(k, v)| k.len() + v.len()).sum();
    let mut out = Vec::with_capacity(len + 9);
    write_map_head(&mut out, encoded.len());
    for (k, v) in encoded {
        out.extend_from_slice(&k);
        out.extend_from_slice(v);
    }
    Ok(out)
}

fn write_map_head(out: &mut Vec<u8>, n: usize) {
    // Snapshots have ten entries at most: the head is always one byte.
    debug_assert!(n < 24, "a snapshot map has fewer than 24 entries");
    out.push(0xa0 | (n as u8 & 0x1f));
}

/// The encoded fields of a snapshot other than `state` and `sig`.
struct Parts {
    schema: Vec<u8>,
    org: Vec<u8>,
    group: Vec<u8>,
    mission: Vec<u8>,
    seq: Vec<u8>,
    chain_head: Vec<u8>,
    state_hash: Vec<u8>,
    signer: Vec<u8>,
}

impl Parts {
    fn entries<'a>(&'a self, state: &'a [u8]) -> Vec<(&'static str, &'a [u8])> {
        vec![
            ("schema", &self.schema),
            ("org", &self.org),
            ("group", &self.group),
            ("mission", &self.mission),
            ("seq", &self.seq),
            ("chain_head", &self.chain_head),
            ("state_hash", &self.state_hash),
            ("state", state),
            ("signer", &self.signer),
        ]
    }
}

impl Snapshot {
    /// Builds and signs a snapshot of `state` with the authority key (the state is encoded
    /// once).
    pub fn build(state: &GroupState, key: &SecretKey) -> Result<Snapshot> {
        let state_bytes = state.to_cbor()?;
        let (state_hash, signer, sig, _) = Self::sign_parts(state, &state_bytes, key, false)?;
        Ok(Snapshot {
            schema: SCHEMA.to_owned(),
            org: state.org.clone(),
            group: state.group.clone(),
            mission: state.mission.clone(),
            seq: state.seq,
            chain_head: state.head,
            state_hash,
            state: state.clone(),
            signer,
            sig,
        })
    }

    /// Builds, signs and encodes a snapshot of `state` in one pass: the stored and served
    /// bytes, without an intermediate copy of the state.
    pub fn build_cbor(state: &GroupState, key: &SecretKey) -> Result<Vec<u8>> {
        Self::build_stored(state, key).map(|(bytes, _)| bytes)
    }

    /// [`Snapshot::build_cbor`], also giving the state hash it signed (what a store indexes).
    pub fn build_stored(state: &GroupState, key: &SecretKey) -> Result<(Vec<u8>, Hash)> {
        let state_bytes = state.to_cbor()?;
        let (state_hash, _, _, bytes) = Self::sign_parts(state, &state_bytes, key, true)?;
        Ok((bytes.expect("sign_parts encodes when asked to"), state_hash))
    }

    fn sign_parts(
        state: &GroupState,
        state_bytes: &[u8],
        key: &SecretKey,
        encode: bool,
    ) -> Result<(Hash, PublicKey, Signature, Option<Vec<u8>>)> {
        let state_hash = Hash::of(state_bytes);
        let signer = key.public();
        let parts = Parts {
            schema: canonical::to_vec(SCHEMA)?,
            org: canonical::to_vec(&state.org)?,
            group: canonical::to_vec(&state.group)?,
            mission: canonical::to_vec(&state.mission)?,
            seq: canonical::to_vec(&state.seq)?,
            chain_head: canonical::to_vec(&state.head)?,
            state_hash: canonical::to_vec(&state_hash)?,
            signer: canonical::to_vec(&signer)?,
        };
        let signed = assemble(&parts.entries(state_bytes))?;
        let sig = key.sign(&canonical::sha256(&signed));
        let bytes = if encode {
            let sig_bytes = canonical::to_vec(&sig)?;
            let mut entries = parts.entries(state_bytes);
            entries.push(("sig", &sig_bytes));
            Some(assemble(&entries)?)
        } else {
            None
        };
        Ok((state_hash, signer, sig, bytes))
    }

    /// The digests, by encoding the fields.
    fn digests(&self) -> Result<Digests> {
        let state_bytes = self.state.to_cbor()?;
        let parts = Parts {
            schema: canonical::to_vec(&self.schema)?,
            org: canonical::to_vec(&self.org)?,
            group: canonical::to_vec(&self.group)?,
            mission: canonical::to_vec(&self.mission)?,
            seq: canonical::to_vec(&self.seq)?,
            chain_head: canonical::to_vec(&self.chain_head)?,
            state_hash: canonical::to_vec(&self.state_hash)?,
            signer: canonical::to_vec(&self.signer)?,
        };
        Ok(Digests {
            state_hash: Hash::of(&state_bytes),
            signed: canonical::sha256(&assemble(&parts.entries(&state_bytes))?),
        })
    }

    /// Canonical CBOR: the stored and served form.
    pub fn to_cbor(&self) -> Result<Vec<u8>> {
        Ok(canonical::to_vec(self)?)
    }

    /// Decodes a stored snapshot; anything but canonical CBOR of a snapshot is
    /// `SNAPSHOT_INVALID` (check `decode`).
    pub fn from_cbor(bytes: &[u8]) -> Result<Snapshot> {
        decode_snapshot(bytes).map(|(snap, _)| snap)
    }

    /// Validates, in the order of SPEC §8: schema, state hash, signature against `trusted`,
    /// org and group binding, and `seq ≥ min_seq`. Returns the state to restore.
    pub fn verify(
        &self,
        trusted: &PublicKey,
        org: &Id,
        group: &Id,
        min_seq: u64,
    ) -> Result<&GroupState> {
        if self.schema != SCHEMA {
            return Err(self.schema_error());
        }
        let digests = self.digests()?;
        self.check(&digests, trusted, org, group, min_seq)?;
        Ok(&self.state)
    }

    /// Decodes and validates stored bytes in one step, hashing the state from the bytes
    /// instead of re-encoding it.
    pub fn verify_bytes(
        bytes: &[u8],
        trusted: &PublicKey,
        org: &Id,
        group: &Id,
        min_seq: u64,
    ) -> Result<Snapshot> {
        let (snap, digests) = decode_with_digests(bytes)?;
        if snap.schema != SCHEMA {
            return Err(snap.schema_error());
        }
        snap.check(&digests, trusted, org, group, min_seq)?;
        Ok(snap)
    }

    /// [`Snapshot::verify_bytes`] for a store's own snapshot of `group`, whose org is the one
    /// it names: the trusted key and the group bind it. Nothing is encoded again.
    pub fn verify_stored(bytes: &[u8], trusted: &PublicKey, group: &Id) -> Result<Snapshot> {
        let (snap, digests) = decode_with_digests(bytes)?;
        if snap.schema != SCHEMA {
            return Err(snap.schema_error());
        }
        snap.check(&digests, trusted, &snap.org, group, 0)?;
        Ok(snap)
    }

    /// [`Snapshot::verify_stored`] for the `len` stored bytes that `reader` gives, read in
    /// pieces: the state is decoded as the bytes pass and both digests are computed on the
    /// way, so the bytes are never held whole (a store opening from a large snapshot). The
    /// checks, their order and their errors are those of [`Snapshot::verify_stored`]; a reader
    /// that fails or ends early fails the `decode` check (the caller can tell an IO error from
    /// its reader). Without `trusted`, the signature is checked against the snapshot's own
    /// signer, as [`Snapshot::verify`] would be given it, which still shows it is whole.
    ///
    /// Nothing decoded is handed back before every check has passed.
    pub fn verify_stored_from(
        reader: impl std::io::Read,
        len: u64,
        trusted: Option<&PublicKey>,
        group: &Id,
    ) -> Result<Snapshot> {
        let (snap, digests) = decode_streamed(reader, len)?;
        if snap.schema != SCHEMA {
            return Err(snap.schema_error());
        }
        let trusted = trusted.copied().unwrap_or(snap.signer);
        snap.check(&digests, &trusted, &snap.org, group, 0)?;
        Ok(snap)
    }

    fn schema_error(&self) -> Error {
        invalid(
            "schema",
            format!("schema is {:?}, expected {SCHEMA:?}", self.schema),
        )
    }

    fn check(
        &self,
        d: &Digests,
        trusted: &PublicKey,
        org: &Id,
        group: &Id,
        min_seq: u64,
    ) -> Result<()> {
        let s = &self.state;
        if d.state_hash != self.state_hash {
            return Err(invalid(
                "state_hash",
                format!(
                    "state hashes to {}, but the snapshot says {}",
                    d.state_hash, self.state_hash
                ),
            ));
        }
        if s.seq != self.seq
            || s.head != self.chain_head
            || s.mission != self.mission
            || s.org != self.org
            || s.group != self.group
        {
            return Err(invalid(
                "state_hash",
                "seq, chain_head, mission, org or group disagree with the state",
            ));
        }
        if &self.signer != trusted {
            return Err(invalid(
                "signature",
                format!(
                    "signed by {}, which is not the trusted key {trusted}",
                    self.signer
                ),
            ));
        }
        if !trusted.verify(&d.signed, &self.sig) {
            return Err(invalid(
                "signature",
                "signature does not verify under the trusted key",
            ));
        }
        if &self.org != org {
            return Err(invalid(
                "org",
                format!("bound to org {}, expected {org}", self.org),
            ));
        }
        if &self.group != group {
            return Err(invalid(
                "group",
                format!("bound to group {}, expected {group}", self.group),
            ));
        }
        if self.seq < min_seq {
            return Err(invalid(
                "seq",
                format!(
                    "seq {} is older than the requested cursor {min_seq}",
                    self.seq
                ),
            ));
        }
        Ok(())
    }

    /// The reference a `CURSOR_TOO_OLD` answer carries for this snapshot.
    pub fn reference(&self, location: impl Into<String>) -> SnapshotRef {
        SnapshotRef {
            seq: self.seq,
            hash: self.state_hash,
            location: location.into(),
        }
    }
}

/// Where the signature and the state lie in a snapshot's bytes.
#[derive(Debug, PartialEq)]
struct Spans {
    /// The `sig` entry, key included.
    sig: std::ops::Range<usize>,
    /// The value of `state`.
    state: std::ops::Range<usize>,
}

impl Spans {
    /// The state hash and the signed digest, computed over the bytes as they are: the state
    /// value, and the map without its `sig` entry (one entry fewer in its one-byte head).
    fn digests(&self, bytes: &[u8]) -> Digests {
        let mut signed = Sha256::new();
        signed.update([0xa0 | 9]);
        signed.update(&bytes[1..self.sig.start]);
        signed.update(&bytes[self.sig.end..]);
        Digests {
            state_hash: Hash::of(&bytes[self.state.clone()]),
            signed: signed.finalize().into(),
        }
    }
}

/// Snapshots at least this large are hashed on a second thread while they decode.
#[cfg(all(feature = "parallel", not(target_family = "wasm")))]
const PARALLEL_DIGESTS_FROM: usize = 1 << 20;

/// Decodes stored snapshot bytes and computes their two digests.
///
/// With the `parallel` feature (off by default; never on WebAssembly), a snapshot of a MiB or
/// more is hashed on a second thread while this one decodes it: the two SHA-256 passes over
/// the state cost about half as much as decoding it. The hashing thread finds `sig` and
/// `state` by walking heads only; its digests are used only if the decode, which checks
/// everything, found the same spans, so the outcome is the one-thread outcome in every case.
fn decode_with_digests(bytes: &[u8]) -> Result<(Snapshot, Digests)> {
    #[cfg(all(feature = "parallel", not(target_family = "wasm")))]
    if bytes.len() >= PARALLEL_DIGESTS_FROM {
        let (decoded, hashed) = std::thread::scope(|scope| {
            let hashing = std::thread::Builder::new()
                .name("mwp-snapshot-digests".to_owned())
                .spawn_scoped(scope, || {
                    locate(bytes).map(|spans| {
                        let digests = spans.digests(bytes);
                        (spans, digests)
                    })
                });
            let decoded = decode_snapshot(bytes);
            // A thread that could not be started or did not finish leaves the hashing to
            // this one.
            let hashed = hashing.ok().and_then(|h| h.join().ok()).flatten();
            (decoded, hashed)
        });
        let (snap, spans) = decoded?;
        let digests = match hashed {
            Some((located, digests)) if located == spans => digests,
            _ => spans.digests(bytes),
        };
        return Ok((snap, digests));
    }
    let (snap, spans) = decode_snapshot(bytes)?;
    let digests = spans.digests(bytes);
    Ok((snap, digests))
}

/// Finds the `sig` entry and the `state` value of stored snapshot bytes by walking heads,
/// checking nothing else; `None` if the bytes are not a ten-entry map holding both.
#[cfg(all(feature = "parallel", not(target_family = "wasm")))]
fn locate(bytes: &[u8]) -> Option<Spans> {
    if *bytes.first()? != 0xa0 | 10 {
        return None;
    }
    let mut pos = 1;
    let (mut sig, mut state) = (None, None);
    for _ in 0..10 {
        let key_end = canonical::item_end(bytes, pos)?;
        let value_end = canonical::item_end(bytes, key_end)?;
        match bytes.get(pos..key_end)? {
            b"\x63sig" => sig = Some(pos..value_end),
            b"\x65state" => state = Some(key_end..value_end),
            _ => {}
        }
        pos = value_end;
    }
    Some(Spans {
        sig: sig?,
        state: state?,
    })
}

/// Reads a stored snapshot: its ten fields in canonical order (shorter keys first, then
/// bytewise), straight from the bytes, noting where `sig` and `state` lie.
fn decode_snapshot(bytes: &[u8]) -> Result<(Snapshot, Spans)> {
    let read = || -> std::result::Result<(Snapshot, Spans), canonical::CanonError> {
        let mut f = canonical::Fields::new(bytes, 10)?;
        let org = f.field("org")?;
        let seq = f.field("seq")?;
        let sig_start = f.pos();
        let sig = f.field("sig")?;
        let sig_end = f.pos();
        let group = f.field("group")?;
        // The key "state" is six bytes: a text head and five letters.
        let state_start = f.pos() + 6;
        let state = f.field("state")?;
        let state_end = f.pos();
        let schema = f.field("schema")?;
        let signer = f.field("signer")?;
        let mission = f.field("mission")?;
        let chain_head = f.field("chain_head")?;
        let state_hash = f.field("state_hash")?;
        f.finish()?;
        let snap = Snapshot {
            schema,
            org,
            group,
            mission,
            seq,
            chain_head,
            state_hash,
            state,
            signer,
            sig,
        };
        Ok((
            snap,
            Spans {
                sig: sig_start..sig_end,
                state: state_start..state_end,
            },
        ))
    };
    read().map_err(|e| invalid("decode", format!("does not decode: {e}")))
}

/// The digest fed every byte of the map but its `sig` entry.
const SIGNED_TAP: usize = 0;
/// The digest fed the bytes of the `state` value.
const STATE_TAP: usize = 1;

/// [`decode_snapshot`] and [`Spans::digests`] in one pass over `len` bytes from `reader`.
fn decode_streamed(reader: impl std::io::Read, len: u64) -> Result<(Snapshot, Digests)> {
    let len = usize::try_from(len).map_err(|_| invalid("decode", "too large to read"))?;
    let mut de = canonical::StreamDecoder::new(reader, len);
    read_streamed(&mut de).map_err(|e| invalid("decode", format!("does not decode: {e}")))
}

/// Reads one field of the snapshot map: its key `name`, then its value.
fn streamed_field<T: serde::de::DeserializeOwned, R: std::io::Read>(
    de: &mut canonical::StreamDecoder<R>,
    previous: &mut Vec<u8>,
    name: &str,
) -> std::result::Result<T, canonical::CanonError> {
    de.key(name, previous)?;
    let at = de.src.pos();
    T::deserialize(&mut *de).map_err(|mut e| {
        if e.offset == 0 {
            e.offset = at;
        }
        e
    })
}

fn read_streamed<R: std::io::Read>(
    de: &mut canonical::StreamDecoder<R>,
) -> std::result::Result<(Snapshot, Digests), canonical::CanonError> {
    de.map_of(10)?;
    // The signed map has one entry fewer: its one-byte head says nine.
    de.src.tap_extra(SIGNED_TAP, &[0xa0 | 9]);
    de.src.tap(SIGNED_TAP, true);
    let p = &mut Vec::new();
    let org = streamed_field(de, p, "org")?;
    let seq = streamed_field(de, p, "seq")?;
    de.src.tap(SIGNED_TAP, false);
    let sig = streamed_field(de, p, "sig")?;
    de.src.tap(SIGNED_TAP, true);
    let group = streamed_field(de, p, "group")?;
    de.key("state", p)?;
    de.src.tap(STATE_TAP, true);
    let at = de.src.pos();
    let state = GroupState::deserialize(&mut *de).map_err(|mut e| {
        if e.offset == 0 {
            e.offset = at;
        }
        e
    })?;
    de.src.tap(STATE_TAP, false);
    let schema = streamed_field(de, p, "schema")?;
    let signer = streamed_field(de, p, "signer")?;
    let mission = streamed_field(de, p, "mission")?;
    let chain_head = streamed_field(de, p, "chain_head")?;
    let state_hash = streamed_field(de, p, "state_hash")?;
    de.finish()?;
    let digests = Digests {
        state_hash: Hash(de.src.digest(STATE_TAP)),
        signed: de.src.digest(SIGNED_TAP),
    };
    let snap = Snapshot {
        schema,
        org,
        group,
        mission,
        seq,
        chain_head,
        state_hash,
        state,
        signer,
        sig,
    };
    Ok((snap, digests))
}

#[cfg(all(test, feature = "parallel", not(target_family = "wasm")))]
mod tests {
    use super::*;
    use serde_json::json;

    /// The head walk finds `sig` and `state` where the decoder does; anything but a
    /// ten-entry map holding both is `None`.
    #[test]
    fn locate_finds_the_signature_and_the_state() {
        let state = json!({"receipts": {"a": {"x": [1, 2, "three"]}}, "seq": 7});
        let sig = json!("ab".repeat(64));
        let mut fields = serde_json::Map::new();
        for k in [
            "org",
            "seq",
            "group",
            "schema",
            "signer",
            "mission",
            "chain_head",
            "state_hash",
        ] {
            fields.insert(k.to_owned(), json!(k));
        }
        fields.insert("sig".to_owned(), sig.clone());
        fields.insert("state".to_owned(), state.clone());
        let bytes = canonical::to_vec(&fields).expect("encodes");
        let sig_entry = [
            canonical::to_vec("sig").expect("encodes"),
            canonical::to_vec(&sig).expect("encodes"),
        ]
        .concat();
        let state_value = canonical::to_vec(&state).expect("encodes");
        let find = |needle: &[u8]| {
            bytes
                .windows(needle.len())
                .position(|w| w == needle)
                .expect("present")
        };
        let sig_at = find(&sig_entry);
        let state_at = find(&state_value);
        assert_eq!(
            locate(&bytes),
            Some(Spans {
                sig: sig_at..sig_at + sig_entry.len(),
                state: state_at..state_at + state_value.len(),
            })
        );
        assert_eq!(locate(&bytes[..bytes.len() - 1]), None);
        fields.remove("sig");
        fields.insert("sag".to_owned(), sig);
        assert_eq!(locate(&canonical::to_vec(&fields).expect("encodes")), None);
    }
}
