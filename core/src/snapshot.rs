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

/// The canonical CBOR of a signed snapshot of `state`, its state hash and its signature.
///
/// The state is encoded once, straight into the snapshot's bytes, and both digests are taken
/// over those bytes where they lie: the state hash over the `state` value, and the signed
/// digest as a stored snapshot's reader takes it ([`Spans::signed_digest`]), over the map of
/// every entry but `sig`, which is written as a placeholder of the signature's fixed length
/// and filled in last. The entries are written in canonical key order; a test holds the bytes
/// equal to `canonical::to_vec` of [`Snapshot::build`].
fn encode_signed(state: &GroupState, key: &SecretKey) -> Result<(Vec<u8>, Hash, Signature)> {
    fn entry<T: Serialize + ?Sized>(out: Vec<u8>, key: &str, value: &T) -> Result<Vec<u8>> {
        Ok(canonical::append(canonical::append(out, key)?, value)?)
    }
    let mut out = Vec::with_capacity(4096);
    write_map_head(&mut out, 10);
    out = entry(out, "org", &state.org)?;
    out = entry(out, "seq", &state.seq)?;
    let sig_entry = out.len();
    out = canonical::append(out, "sig")?;
    let sig_value = out.len();
    out = canonical::append(out, &Signature([0; 64]))?;
    let sig_end = out.len();
    out = entry(out, "group", &state.group)?;
    out = canonical::append(out, "state")?;
    let state_start = out.len();
    out = canonical::append(out, state)?;
    let state_end = out.len();
    let state_hash = Hash::of(&out[state_start..state_end]);
    let signer = key.public();
    out = entry(out, "schema", SCHEMA)?;
    out = entry(out, "signer", &signer)?;
    out = entry(out, "mission", &state.mission)?;
    out = entry(out, "chain_head", &state.head)?;
    out = entry(out, "state_hash", &state_hash)?;
    let spans = Spans {
        sig: sig_entry..sig_end,
        state: state_start..state_end,
    };
    let sig = key.sign(&spans.signed_digest(&out));
    let sig_bytes = canonical::to_vec(&sig)?;
    // A signature's text is always 128 hex digits: the placeholder has its length.
    out[sig_value..sig_end].copy_from_slice(&sig_bytes);
    Ok((out, state_hash, sig))
}

impl Snapshot {
    /// Builds and signs a snapshot of `state` with the authority key (the state is encoded
    /// once).
    pub fn build(state: &GroupState, key: &SecretKey) -> Result<Snapshot> {
        let (_, state_hash, sig) = encode_signed(state, key)?;
        Ok(Snapshot {
            schema: SCHEMA.to_owned(),
            org: state.org.clone(),
            group: state.group.clone(),
            mission: state.mission.clone(),
            seq: state.seq,
            chain_head: state.head,
            state_hash,
            state: state.clone(),
            signer: key.public(),
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
        let (bytes, state_hash, _) = encode_signed(state, key)?;
        Ok((bytes, state_hash))
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
        // Only a snapshot whose schema is not SCHEMA can leave them unknown (see
        // `decode_streamed`); this is never reached.
        let digests =
            digests.ok_or_else(|| invalid("decode", "its digests could not be computed"))?;
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
        Digests {
            state_hash: Hash::of(&bytes[self.state.clone()]),
            signed: self.signed_digest(bytes),
        }
    }

    /// The digest the signature covers: SHA-256 of the map without its `sig` entry.
    fn signed_digest(&self, bytes: &[u8]) -> [u8; 32] {
        let mut signed = Sha256::new();
        signed.update([0xa0 | 9]);
        signed.update(&bytes[1..self.sig.start]);
        signed.update(&bytes[self.sig.end..]);
        signed.finalize().into()
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
        let state = f.read("state")?;
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
///
/// With the `parallel` feature (never on WebAssembly), a snapshot of a MiB or more is hashed
/// on a second thread while this one decodes it (`aside::decode_hashing_aside`, built with that feature): the two
/// SHA-256 passes cost about a third of decoding. `None` for the digests only where a snapshot
/// cannot be whole: its schema is not [`SCHEMA`] (see `aside::HOLD`).
fn decode_streamed(reader: impl std::io::Read, len: u64) -> Result<(Snapshot, Option<Digests>)> {
    let len = usize::try_from(len).map_err(|_| invalid("decode", "too large to read"))?;
    #[cfg(all(feature = "parallel", not(target_family = "wasm")))]
    let reader = if len >= PARALLEL_DIGESTS_FROM {
        match aside::decode_hashing_aside(reader, len) {
            Ok(decoded) => return decoded,
            // No second thread: the reader is handed back untouched.
            Err(reader) => reader,
        }
    } else {
        reader
    };
    let mut de = canonical::StreamDecoder::new(reader, len);
    read_streamed(&mut de, true, &mut |_| {})
        .map_err(|e| invalid("decode", format!("does not decode: {e}")))
}

/// Offsets in a snapshot's bytes that the digests need, told as the decoder passes them.
#[cfg_attr(
    not(all(feature = "parallel", not(target_family = "wasm"))),
    allow(dead_code)
)]
enum Mark {
    /// The `sig` entry (key included) lies at `sig`; the `state` value starts at `state`.
    Prefix {
        sig: std::ops::Range<usize>,
        state: usize,
    },
    /// The `state` value ends here.
    StateEnd(usize),
}

/// Decodes a snapshot from `de`, telling `mark` where `sig` and `state` lie. With `taps`,
/// the decoder's own taps compute the digests (`Some`); without, the caller computes them
/// from the marks (`None`).
fn read_streamed<R: std::io::Read>(
    de: &mut canonical::StreamDecoder<R>,
    taps: bool,
    mark: &mut dyn FnMut(Mark),
) -> std::result::Result<(Snapshot, Option<Digests>), canonical::CanonError> {
    de.map_of(10)?;
    if taps {
        // The signed map has one entry fewer: its one-byte head says nine.
        de.input.tap_extra(SIGNED_TAP, &[0xa0 | 9]);
        de.input.tap(SIGNED_TAP, true);
    }
    let p = &mut Vec::new();
    let org = de.field("org", p)?;
    let seq = de.field("seq", p)?;
    let sig_start = de.pos();
    if taps {
        de.input.tap(SIGNED_TAP, false);
    }
    let sig = de.field("sig", p)?;
    let sig_end = de.pos();
    if taps {
        de.input.tap(SIGNED_TAP, true);
    }
    let group = de.field("group", p)?;
    de.key("state", p)?;
    let at = de.pos();
    mark(Mark::Prefix {
        sig: sig_start..sig_end,
        state: at,
    });
    if taps {
        de.input.tap(STATE_TAP, true);
    }
    let state = GroupState::read_streamed(de).map_err(|mut e| {
        if e.offset == 0 {
            e.offset = at;
        }
        e
    })?;
    mark(Mark::StateEnd(de.pos()));
    if taps {
        de.input.tap(STATE_TAP, false);
    }
    let schema = de.field("schema", p)?;
    let signer = de.field("signer", p)?;
    let mission = de.field("mission", p)?;
    let chain_head = de.field("chain_head", p)?;
    let state_hash = de.field("state_hash", p)?;
    de.finish()?;
    let digests = taps.then(|| Digests {
        state_hash: Hash(de.input.digest(STATE_TAP)),
        signed: de.input.digest(SIGNED_TAP),
    });
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

/// Hashing a streamed snapshot on a second thread while this one decodes it.
#[cfg(all(feature = "parallel", not(target_family = "wasm")))]
mod aside {
    use std::io::Read;
    use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};

    use sha2::{Digest, Sha256};

    use super::{canonical, invalid, read_streamed, Digests, Mark, Snapshot};
    use crate::crypto::Hash;
    use crate::error::Result;

    /// Bytes at the end of the stream that the state's digest is fed only once the decoder
    /// has said where the state ends. What follows the state (`schema`, `signer`, `mission`,
    /// `chain_head`, `state_hash`, keys included) is a few hundred bytes when the schema is
    /// [`super::SCHEMA`]; a longer tail can only be a longer schema, refused before any
    /// digest is compared, so its state digest is not needed.
    pub(super) const HOLD: usize = 64 << 10;

    /// Pieces in flight from the decoder to the hashing thread (about a MiB each).
    const IN_FLIGHT: usize = 8;

    enum Piece {
        /// The next bytes of the stream, as the decoder read them.
        Bytes(Vec<u8>),
        Mark(Mark),
    }

    /// A reader that hands a copy of every byte it reads to the hashing thread.
    struct Tee<'a, R> {
        inner: R,
        to: &'a SyncSender<Piece>,
        /// Pieces the hashing thread is done with, to be filled again.
        spare: Receiver<Vec<u8>>,
    }

    impl<R: Read> Read for Tee<'_, R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            if n > 0 {
                let mut piece = self.spare.try_recv().unwrap_or_default();
                piece.clear();
                piece.extend_from_slice(&buf[..n]);
                self.to
                    .send(Piece::Bytes(piece))
                    .map_err(|_| std::io::Error::other("the snapshot hashing thread stopped"))?;
            }
            Ok(n)
        }
    }

    /// Decodes `len` bytes from `reader` while a second thread computes the two digests from
    /// a copy of them; the outcome is [`super::read_streamed`]'s with its taps. `Err` hands
    /// the reader back, untouched, when no thread could be started.
    #[allow(clippy::type_complexity)]
    pub(super) fn decode_hashing_aside<R: Read>(
        reader: R,
        len: usize,
    ) -> std::result::Result<Result<(Snapshot, Option<Digests>)>, R> {
        let (to, from) = sync_channel::<Piece>(IN_FLIGHT);
        let (back, spare) = channel::<Vec<u8>>();
        std::thread::scope(|scope| {
            let hashing = std::thread::Builder::new()
                .name("mwp-snapshot-digests".to_owned())
                .spawn_scoped(scope, move || hash_pieces(from, back, len));
            let Ok(hashing) = hashing else {
                return Err(reader);
            };
            let tee = Tee {
                inner: reader,
                to: &to,
                spare,
            };
            let mut de = canonical::StreamDecoder::new(tee, len);
            let decoded = read_streamed(&mut de, false, &mut |m| {
                // A stopped hashing thread shows in its result below.
                let _ = to.send(Piece::Mark(m));
            });
            drop(de);
            drop(to);
            let digests = hashing.join().ok().flatten();
            Ok(decoded
                .map(|(snap, _)| (snap, digests))
                .map_err(|e| invalid("decode", format!("does not decode: {e}"))))
        })
    }

    /// The hashing thread: the signed digest over every byte but the `sig` entry (the map's
    /// head counted as nine entries), the state's over the `state` value. `None` if the
    /// stream ended before the marks came, or the state's end came too early to be honoured
    /// (see [`HOLD`]).
    fn hash_pieces(from: Receiver<Piece>, back: Sender<Vec<u8>>, len: usize) -> Option<Digests> {
        let mut waiting: Vec<Vec<u8>> = Vec::new();
        let mut h: Option<Hasher> = None;
        for piece in from {
            match piece {
                Piece::Bytes(bytes) => match &mut h {
                    Some(h) => {
                        h.feed(&bytes);
                        let _ = back.send(bytes);
                    }
                    None => waiting.push(bytes),
                },
                Piece::Mark(Mark::Prefix { sig, state }) => {
                    let mut hasher = Hasher::new(sig, state, len);
                    for bytes in waiting.drain(..) {
                        hasher.feed(&bytes);
                    }
                    h = Some(hasher);
                }
                Piece::Mark(Mark::StateEnd(end)) => {
                    if let Some(h) = &mut h {
                        h.end_state(end);
                    }
                }
            }
        }
        let h = h?;
        Some(Digests {
            state_hash: Hash(h.state_digest?),
            signed: h.signed.finalize().into(),
        })
    }

    /// The two digests being computed, fed the stream in order.
    struct Hasher {
        /// Offset of the next byte.
        at: usize,
        sig: std::ops::Range<usize>,
        signed: Sha256,
        state: Sha256,
        /// The state's digest is fed from `state_start` up to `state_fed`, at most up to
        /// `held_from`; the bytes from `held_from` on wait in `held` for the state's end.
        state_fed: usize,
        held_from: usize,
        held: Vec<u8>,
        state_digest: Option<[u8; 32]>,
    }

    impl Hasher {
        fn new(sig: std::ops::Range<usize>, state_start: usize, len: usize) -> Hasher {
            let mut signed = Sha256::new();
            signed.update([0xa0 | 9]);
            Hasher {
                at: 0,
                sig,
                signed,
                state: Sha256::new(),
                state_fed: state_start,
                held_from: len.saturating_sub(HOLD).max(state_start),
                held: Vec::new(),
                state_digest: None,
            }
        }

        /// The part of `bytes` (which start at `self.at`) within `range`, as a slice.
        fn part(
            &self,
            bytes: &[u8],
            range: std::ops::Range<usize>,
        ) -> Option<std::ops::Range<usize>> {
            let start = range.start.max(self.at);
            let end = range.end.min(self.at + bytes.len());
            (start < end).then(|| start - self.at..end - self.at)
        }

        fn feed(&mut self, bytes: &[u8]) {
            for range in [1..self.sig.start, self.sig.end..usize::MAX] {
                if let Some(r) = self.part(bytes, range) {
                    self.signed.update(&bytes[r]);
                }
            }
            if self.state_digest.is_none() {
                if let Some(r) = self.part(bytes, self.state_fed..self.held_from) {
                    self.state.update(&bytes[r]);
                    self.state_fed = self
                        .state_fed
                        .max(self.at + bytes.len())
                        .min(self.held_from);
                }
                if let Some(r) = self.part(bytes, self.held_from..usize::MAX) {
                    self.held.extend_from_slice(&bytes[r]);
                }
            }
            self.at += bytes.len();
        }

        /// The state ends at `end` (every byte before it has been fed).
        fn end_state(&mut self, end: usize) {
            if end < self.state_fed || end > self.at {
                return;
            }
            if end > self.held_from {
                self.state.update(&self.held[..end - self.held_from]);
            }
            self.state_digest = Some(std::mem::take(&mut self.state).finalize().into());
            self.held = Vec::new();
        }
    }
}

/// Test data for the tests of both decoders.
#[cfg(test)]
mod fixtures {
    use super::*;
    use serde_json::json;

    /// A state of more than a MiB: `items` work items.
    pub(crate) fn big_state(items: usize) -> GroupState {
        let id = |s: &str| Id::new(s).expect("valid id");
        let alice = SecretKey::for_transcript("alice");
        let mut g = crate::memory::MemoryGroup::default();
        let mut send = |n: usize, body: serde_json::Value| {
            let body: crate::command::Body = serde_json::from_value(body).expect("body");
            let cmd = crate::command::Command::signed(
                id("acme"),
                id("g"),
                id("alice"),
                id(&format!("x{n}")),
                1,
                None,
                body,
                &alice,
            )
            .expect("signs");
            g.submit(&cmd, 1_000 + n as u64).expect("accepted");
        };
        send(
            0,
            json!({"type": "open_group", "mission": "m", "title": "big", "members": [
                {"actor": "alice", "role": "owner", "key": alice.public()}],
                "authority_key": SecretKey::for_transcript("@authority").public()}),
        );
        let contract = json!({"max_attempts": 3, "backoff_base_ms": 10, "backoff_max_ms": 100, "cost_budget": 100, "risk": "low"});
        for i in 1..=items {
            send(
                i,
                json!({"type": "create_work", "work": format!("w{i}"), "contract": contract,
                    "after": [], "spec": {"n": i}}),
            );
        }
        g.state().expect("opened").clone()
    }
}

#[cfg(test)]
mod streamed_tests {
    use super::fixtures::big_state;
    use super::*;
    use crate::canonical::Pieces;

    /// The snapshot written in place is byte for byte what the generic encoder writes for the
    /// snapshot `build` gives, and it decodes and verifies.
    #[test]
    fn the_stored_bytes_are_the_canonical_snapshot() {
        let key = SecretKey::for_transcript("@authority");
        for items in [0, 1, 40] {
            let state = big_state(items);
            let (bytes, state_hash) = Snapshot::build_stored(&state, &key).expect("builds");
            let snap = Snapshot::build(&state, &key).expect("builds");
            assert_eq!(bytes, canonical::to_vec(&snap).expect("encodes"));
            assert_eq!(state_hash, snap.state_hash);
            assert_eq!(state_hash, Hash::of(&state.to_cbor().expect("encodes")));
            let decoded = Snapshot::from_cbor(&bytes).expect("decodes");
            decoded
                .verify(&key.public(), &state.org, &state.group, 0)
                .expect("verifies");
            assert_eq!(decoded, snap);
        }
    }

    /// Work items read from a streamed snapshot, each by the slice decoder where it lies
    /// whole in the window, are what the streamed decoder's ordinary path reads, value or
    /// error (wording and offset), for every single-bit flip, read in pieces of two sizes.
    #[test]
    fn streamed_work_items_are_read_as_the_ordinary_path_reads_them() {
        use crate::work::WorkItems;
        let work = big_state(3).work;
        let bytes = canonical::to_vec(&work).expect("encodes");
        let read = |bytes: &[u8], piece: usize, by_slice: bool| {
            let mut de = canonical::StreamDecoder::new(Pieces { bytes, piece }, bytes.len());
            let read = if by_slice {
                WorkItems::read_streamed(&mut de)
            } else {
                WorkItems::deserialize(&mut de)
            };
            read.and_then(|w| de.finish().map(|()| w))
        };
        canonical::BY_SLICE.set(0);
        assert_eq!(read(&bytes, usize::MAX, true), Ok(work.clone()));
        assert_eq!(canonical::BY_SLICE.get(), 3);
        let refused = canonical::every_flip_reads_alike(&bytes, &[usize::MAX, 50], read);
        assert!(refused > 0);
    }
}

#[cfg(all(test, feature = "parallel", not(target_family = "wasm")))]
mod tests {
    use super::fixtures::big_state;
    use super::*;
    use crate::canonical::Pieces;
    use serde_json::json;

    /// A snapshot of a MiB or more, read in pieces and hashed on a second thread, is accepted
    /// or refused exactly as its bytes held whole are: damage in the signed fields, in the
    /// state (at its start, middle and last bytes) and in the fields after it, whatever the
    /// size of the pieces the reader gives.
    #[test]
    fn a_large_snapshot_hashed_aside_is_checked_as_the_bytes_held_whole() {
        let key = SecretKey::for_transcript("@authority");
        let state = big_state(2400);
        let bytes = Snapshot::build_cbor(&state, &key).expect("builds");
        assert!(bytes.len() >= PARALLEL_DIGESTS_FROM, "{}", bytes.len());
        let group = Id::new("g").expect("valid id");
        let spans = locate(&bytes).expect("spans");
        let outcome = |b: &[u8], piece: usize| {
            Snapshot::verify_stored_from(
                Pieces { bytes: b, piece },
                b.len() as u64,
                Some(&key.public()),
                &group,
            )
            .map(|s| s.state_hash)
            .map_err(|e| (e.details.get("check").cloned(), e.message))
        };
        let whole = |b: &[u8]| {
            Snapshot::verify_stored(b, &key.public(), &group)
                .map(|s| s.state_hash)
                .map_err(|e| (e.details.get("check").cloned(), e.message))
        };
        let n = bytes.len();
        let mut at = vec![
            spans.sig.start + 8,
            spans.state.start,
            spans.state.start + 1,
            (spans.state.start + spans.state.end) / 2,
            spans.state.end - 1,
            spans.state.end + 3,
            n - 1,
        ];
        at.push(n - 40);
        for piece in [usize::MAX, 1 << 20, 65_537, 777] {
            assert_eq!(outcome(&bytes, piece), whole(&bytes), "piece {piece}");
            assert!(outcome(&bytes, piece).is_ok());
            for &i in &at {
                let mut damaged = bytes.clone();
                damaged[i] ^= 0x01;
                let (got, want) = (outcome(&damaged, piece), whole(&damaged));
                match (&got, &want) {
                    // A decode error's wording may differ between the two decoders.
                    (Err((gc, _)), Err((wc, _)))
                        if wc.as_ref().and_then(|c| c.as_str()) == Some("decode") =>
                    {
                        assert_eq!(gc, wc, "flip at {i}, piece {piece}")
                    }
                    _ => assert_eq!(got, want, "flip at {i}, piece {piece}"),
                }
                assert!(got.is_err(), "flip at {i}, piece {piece} went unnoticed");
            }
        }
    }

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
