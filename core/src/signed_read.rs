//! Signed reads: a member proves who asks for a read by signing the request line and a time
//! with its registered key (docs/http.md, "Member-signed reads").
//!
//! The signed bytes are the canonical CBOR (§1) of
//! `{"purpose": "mwp signed read v1", "method": M, "target": T, "actor": A, "at": MS}`, where
//! `M` is the HTTP method in upper case, `T` the request target exactly as sent (path and
//! query, e.g. `/v1/groups/g1/events?after=3`), `A` the member's actor ID and `MS` the signing
//! time in milliseconds since the Unix epoch. The `purpose` field keeps these bytes apart from
//! every other signed structure (a command's content has no such field).
//!
//! It travels as `Authorization: Mwp-Signature actor=A,at=MS,sig=HEX`. This module builds,
//! formats, parses and verifies it; the host reads the clock and looks the key up.

use serde::Serialize;

use crate::canonical;
use crate::crypto::{PublicKey, SecretKey, Signature};
use crate::error::{Error, Result};
use crate::id::Id;

/// The authentication scheme's name in the `Authorization` header.
pub const SCHEME: &str = "Mwp-Signature";

/// The value of the signed map's `purpose` field.
pub const PURPOSE: &str = "mwp signed read v1";

/// A member's signature over one read request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedRead {
    /// The member who signed.
    pub actor: Id,
    /// When it was signed, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Ed25519 signature over [`signing_bytes`].
    pub sig: Signature,
}

#[derive(Serialize)]
struct Signed<'a> {
    purpose: &'static str,
    method: &'a str,
    target: &'a str,
    actor: &'a Id,
    at: u64,
}

/// The bytes a member signs for a read of `target` with `method` at `at_ms`.
pub fn signing_bytes(method: &str, target: &str, actor: &Id, at_ms: u64) -> Result<Vec<u8>> {
    Ok(canonical::to_vec(&Signed {
        purpose: PURPOSE,
        method,
        target,
        actor,
        at: at_ms,
    })?)
}

impl SignedRead {
    /// Signs a read of `target` with `method` by `actor` at `at_ms` with `key`.
    pub fn sign(
        method: &str,
        target: &str,
        actor: Id,
        at_ms: u64,
        key: &SecretKey,
    ) -> Result<SignedRead> {
        let sig = key.sign(&signing_bytes(method, target, &actor, at_ms)?);
        Ok(SignedRead { actor, at_ms, sig })
    }

    /// Whether the signature verifies under `key` for this `method` and `target` (through
    /// [`PublicKey::verify`], the one signature rule of every host).
    pub fn verify(&self, method: &str, target: &str, key: &PublicKey) -> Result<bool> {
        let bytes = signing_bytes(method, target, &self.actor, self.at_ms)?;
        Ok(key.verify(&bytes, &self.sig))
    }

    /// The `Authorization` header value: `Mwp-Signature actor=A,at=MS,sig=HEX`.
    pub fn header_value(&self) -> String {
        format!(
            "{SCHEME} actor={},at={},sig={}",
            self.actor,
            self.at_ms,
            self.sig.to_hex()
        )
    }

    /// Parses the parameters after `Mwp-Signature ` (`actor=A,at=MS,sig=HEX`, each exactly
    /// once, in any order, no others). Anything else is `MALFORMED`, naming what was wrong.
    pub fn parse_params(params: &str) -> Result<SignedRead> {
        let (mut actor, mut at, mut sig) = (None, None, None);
        for part in params.split(',') {
            let (name, value) = part.trim().split_once('=').ok_or_else(|| {
                bad(format!(
                    "{part:?} is not name=value; send actor=A,at=MS,sig=HEX"
                ))
            })?;
            let slot = match name {
                "actor" => &mut actor,
                "at" => &mut at,
                "sig" => &mut sig,
                other => {
                    return Err(bad(format!(
                        "unknown parameter {other:?}; the parameters are actor, at and sig"
                    )))
                }
            };
            if slot.replace(value).is_some() {
                return Err(bad(format!("parameter {name} is given twice")));
            }
        }
        let actor = actor.ok_or_else(|| bad("parameter actor is missing"))?;
        let actor = Id::new(actor).map_err(|e| bad(format!("actor: {e}")))?;
        let at = at.ok_or_else(|| bad("parameter at is missing"))?;
        let at_ms = at
            .parse::<u64>()
            .ok()
            .filter(|_| !at.starts_with('+'))
            .ok_or_else(|| bad(format!("at={at:?} is not milliseconds since the epoch")))?;
        let sig = sig.ok_or_else(|| bad("parameter sig is missing"))?;
        let sig = Signature::from_hex(sig).map_err(|e| bad(format!("sig: {e}")))?;
        Ok(SignedRead { actor, at_ms, sig })
    }
}

fn bad(message: impl Into<String>) -> Error {
    Error::malformed(format!("{SCHEME} authorization: {}", message.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Code;

    fn alice() -> SecretKey {
        SecretKey::for_transcript("alice")
    }

    #[test]
    fn signs_formats_parses_and_verifies() {
        let id = Id::new("alice").expect("id");
        let read = SignedRead::sign("GET", "/v1/groups/g1/events?after=3", id, 1_000, &alice())
            .expect("signs");
        let header = read.header_value();
        let params = header.strip_prefix("Mwp-Signature ").expect("scheme");
        let parsed = SignedRead::parse_params(params).expect("parses");
        assert_eq!(parsed, read);
        let key = alice().public();
        assert!(parsed
            .verify("GET", "/v1/groups/g1/events?after=3", &key)
            .expect("verifies"));
        // Another target, method or key does not verify.
        assert!(!parsed
            .verify("GET", "/v1/groups/g1/events?after=4", &key)
            .expect("checks"));
        assert!(!parsed
            .verify("POST", "/v1/groups/g1/events?after=3", &key)
            .expect("checks"));
        let other = SecretKey::for_transcript("bob").public();
        assert!(!parsed
            .verify("GET", "/v1/groups/g1/events?after=3", &other)
            .expect("checks"));
    }

    #[test]
    fn the_signed_bytes_are_fixed() {
        let bytes =
            signing_bytes("GET", "/v1/groups", &Id::new("a").expect("id"), 1).expect("cbor");
        // Canonical CBOR, keys by length then bytes: a map of 5; "at" 1; "actor" "a";
        // "method" "GET"; "target" "/v1/groups"; "purpose" "mwp signed read v1".
        let expected = concat!(
            "a5",
            "626174",
            "01",
            "656163746f72",
            "6161",
            "666d6574686f64",
            "63474554",
            "66746172676574",
            "6a2f76312f67726f757073",
            "67707572706f7365",
            "726d7770207369676e65642072656164207631",
        );
        assert_eq!(hex::encode(&bytes), expected);
    }

    #[test]
    fn malformed_headers_name_what_is_wrong() {
        for (params, what) in [
            ("actor=a,at=1", "sig is missing"),
            ("actor=a,sig=00", "at is missing"),
            ("at=1,sig=00", "actor is missing"),
            ("actor=a,actor=b,at=1,sig=00", "given twice"),
            ("actor=a,at=x,sig=00", "not milliseconds"),
            ("actor=a,at=1,sig=zz", "sig:"),
            ("actor=a,at=1,sig=00,extra=1", "unknown parameter"),
            ("garbage", "not name=value"),
        ] {
            let err = SignedRead::parse_params(params).expect_err(params);
            assert_eq!(err.code, Code::Malformed);
            assert!(err.message.contains(what), "{params}: {}", err.message);
        }
    }
}
