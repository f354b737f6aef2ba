//! Leases: who may execute a work item, under which session and ownership epoch, until when.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::canonical;
use crate::id::Id;

/// A lease ID: the first 32 hex digits of `sha256(canonical CBOR [group, work, epoch])`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaseId(pub [u8; 16]);

impl LeaseId {
    /// Derives the ID of `work`'s lease at ownership `epoch`.
    pub fn derive(group: &Id, work: &Id, epoch: u64) -> LeaseId {
        let digest = canonical::hash(&(group, work, epoch))
            .expect("a tuple of two IDs and an integer always encodes");
        let mut id = [0u8; 16];
        id.copy_from_slice(&digest[..16]);
        LeaseId(id)
    }

    /// Parses 32 lowercase hex digits.
    pub fn from_hex(s: &str) -> Result<Self, String> {
        if s.len() != 32 || s.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(format!("a lease ID is 32 lowercase hex digits, got {s:?}"));
        }
        let mut id = [0u8; 16];
        if const_hex::decode_to_slice(s, &mut id).is_err() {
            // The slow decoder words the error (which character, where).
            let e = hex::decode_to_slice(s, &mut id).err();
            return Err(format!(
                "lease ID {s:?}: {}",
                e.map_or_else(|| "invalid character".to_owned(), |e| e.to_string())
            ));
        }
        Ok(LeaseId(id))
    }

    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        const_hex::encode(self.0)
    }
}

impl Serialize for LeaseId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 32];
        const_hex::encode_to_slice(self.0, &mut buf).expect("buffer is exactly twice the length");
        s.serialize_str(std::str::from_utf8(&buf).expect("hex is ASCII"))
    }
}

impl crate::crypto::FromHex for LeaseId {
    fn parse(s: &str) -> Result<Self, String> {
        LeaseId::from_hex(s)
    }

    /// 32 lowercase hex digits, checked as bytes; anything else goes to [`LeaseId::from_hex`]
    /// for its error.
    fn parse_bytes(s: &[u8]) -> Result<Self, String> {
        let mut id = [0u8; 16];
        if s.len() == 32
            && !s.iter().fold(false, |up, b| up | b.is_ascii_uppercase())
            && const_hex::decode_to_slice(s, &mut id).is_ok()
        {
            return Ok(LeaseId(id));
        }
        Self::parse(std::str::from_utf8(s).map_err(|_| "hex text is not valid UTF-8".to_owned())?)
    }
}

impl<'de> Deserialize<'de> for LeaseId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(crate::crypto::HexVisitor::<LeaseId>(
            std::marker::PhantomData,
        ))
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LeaseId({})", self.to_hex())
    }
}

/// An execution lease.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Lease {
    /// Stable ID.
    pub id: LeaseId,
    /// Work item.
    pub work: Id,
    /// Holder.
    pub holder: Id,
    /// Holder's session epoch when granted.
    pub session: u64,
    /// Ownership epoch of the work item.
    pub epoch: u64,
    /// When granted.
    pub granted_at: u64,
    /// `start_work` must come before this.
    pub start_by: u64,
    /// The lease ends at this time unless renewed.
    pub expires_at: u64,
}

// Handed to the canonical encoder in canonical key order; JSON gets the declared order.
canonical::encode_struct! {
    Lease { id, work, holder, session, epoch, granted_at, start_by, expires_at }
    PastLease { id, holder, epoch, end }
}

// `Lease` and `PastLease` take unknown fields (their derives do not deny them): their
// readers check and skip them too.
canonical::decode_struct! {
    Lease [ignore_unknown] { id, work, holder, session, epoch, granted_at, start_by, expires_at }
    PastLease [ignore_unknown] { id, holder, epoch, end }
}

/// How a lease that is no longer current ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseEnd {
    /// Given up by checkpoint, block, submit or fail.
    Released,
    /// Taken away by cancel, reassign, replace_session or remove_member.
    Revoked,
    /// Timed out (tick).
    Expired,
}

/// A lease that is no longer current, kept so late results can be recognised as evidence.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PastLease {
    /// Its ID.
    pub id: LeaseId,
    /// Who held it.
    pub holder: Id,
    /// Ownership epoch.
    pub epoch: u64,
    /// How it ended.
    pub end: LeaseEnd,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_id_is_stable_and_distinct_per_epoch() {
        let g = Id::new("g1").expect("valid");
        let w = Id::new("w1").expect("valid");
        let a = LeaseId::derive(&g, &w, 1);
        assert_eq!(a, LeaseId::derive(&g, &w, 1));
        assert_ne!(a, LeaseId::derive(&g, &w, 2));
        assert_eq!(LeaseId::from_hex(&a.to_hex()), Ok(a));
        assert_eq!(a.to_hex().len(), 32);
    }
}
