//! Signed snapshots (SPEC §8): the canonical Group state at a seq, receipts included, signed
//! by the authority, so a replica that fell behind can restore and resume strictly after it.

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Strictness};
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
    /// Signature over the SHA-256 of the canonical CBOR of every other field.
    pub sig: Signature,
}

#[derive(Serialize)]
struct Signed<'a> {
    schema: &'a str,
    org: &'a Id,
    group: &'a Id,
    mission: &'a Id,
    seq: u64,
    chain_head: &'a Hash,
    state_hash: &'a Hash,
    state: &'a GroupState,
    signer: &'a PublicKey,
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
    /// The `CURSOR_TOO_OLD` error pointing at this snapshot.
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
}

fn invalid(reason: impl Into<String>) -> Error {
    let reason = reason.into();
    Error::new(
        Code::SnapshotInvalid,
        format!("snapshot rejected: {reason}"),
    )
    .with("reason", reason)
}

impl Snapshot {
    /// Builds and signs a snapshot of `state` with the authority key.
    pub fn build(state: &GroupState, key: &SecretKey) -> Result<Snapshot> {
        let mut snap = Snapshot {
            schema: SCHEMA.to_owned(),
            org: state.org.clone(),
            group: state.group.clone(),
            mission: state.mission.clone(),
            seq: state.seq,
            chain_head: state.head,
            state_hash: state.hash()?,
            state: state.clone(),
            signer: key.public(),
            sig: Signature([0; 64]),
        };
        snap.sig = key.sign(&snap.signed_digest()?);
        Ok(snap)
    }

    fn signed_digest(&self) -> Result<[u8; 32]> {
        Ok(canonical::hash(&Signed {
            schema: &self.schema,
            org: &self.org,
            group: &self.group,
            mission: &self.mission,
            seq: self.seq,
            chain_head: &self.chain_head,
            state_hash: &self.state_hash,
            state: &self.state,
            signer: &self.signer,
        })?)
    }

    /// Canonical CBOR: the stored and served form.
    pub fn to_cbor(&self) -> Result<Vec<u8>> {
        Ok(canonical::to_vec(self)?)
    }

    /// Decodes a stored snapshot; anything but canonical CBOR is `SNAPSHOT_INVALID`.
    pub fn from_cbor(bytes: &[u8]) -> Result<Snapshot> {
        canonical::from_slice(bytes, Strictness::Canonical)
            .map_err(|e| invalid(format!("does not decode: {e}")))
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
            return Err(invalid(format!(
                "schema is {:?}, expected {SCHEMA:?}",
                self.schema
            )));
        }
        let s = &self.state;
        if s.hash()? != self.state_hash {
            return Err(invalid("state does not hash to state_hash"));
        }
        if s.seq != self.seq || s.head != self.chain_head || s.mission != self.mission {
            return Err(invalid(
                "seq, chain_head or mission disagree with the state",
            ));
        }
        if &self.signer != trusted {
            return Err(invalid(format!(
                "signed by {}, which is not the trusted key {trusted}",
                self.signer
            )));
        }
        if !trusted.verify(&self.signed_digest()?, &self.sig) {
            return Err(invalid("signature does not verify under the trusted key"));
        }
        if &self.org != org || &s.org != org {
            return Err(invalid(format!(
                "bound to org {}, expected {org}",
                self.org
            )));
        }
        if &self.group != group || &s.group != group {
            return Err(invalid(format!(
                "bound to group {}, expected {group}",
                self.group
            )));
        }
        if self.seq < min_seq {
            return Err(invalid(format!(
                "seq {} is older than the requested cursor {min_seq}",
                self.seq
            )));
        }
        Ok(s)
    }

    /// Decodes and validates stored bytes in one step.
    pub fn verify_bytes(
        bytes: &[u8],
        trusted: &PublicKey,
        org: &Id,
        group: &Id,
        min_seq: u64,
    ) -> Result<Snapshot> {
        let snap = Snapshot::from_cbor(bytes)?;
        snap.verify(trusted, org, group, min_seq)?;
        Ok(snap)
    }
}
