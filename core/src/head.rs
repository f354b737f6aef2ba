//! Signed heads and fork proofs (SPEC §8a): the authority vouches for the end of a Group's log,
//! so any copy of the history (a proxy, a mirror, a static export on a CDN) can be checked
//! against the authority's key alone.
//!
//! A [`SignedHead`] is `{schema: "mwp.head.v1", org, group, seq, id, at}` plus `sig`, the
//! Ed25519 signature of the authority key over the SHA-256 of the canonical CBOR of the six
//! other fields. Because events chain by hash, a head whose `id` is the id of the replica's
//! event `seq` vouches for every event up to `seq`; events past the last verified head are
//! *provisional* ([`crate::replica::Replica::offer_head`]).
//!
//! Two heads the authority signed that cannot both be true are a fork, and a [`ForkProof`]
//! carries them: either two heads at one seq with different ids, or two heads at different
//! seqs with the events between them, whose chain reaches the higher head but passes the
//! lower head's seq with another id. [`ForkProof::verify`] checks one with nothing else.
//!
//! How often a host signs is [`head_due`]: at most once per [`HEAD_INTERVAL_MS`] per Group,
//! and only when the log moved.

use serde::{Deserialize, Serialize};

use crate::canonical;
use crate::crypto::{Hash, PublicKey, SecretKey, Signature};
use crate::error::{Code, Error, Result};
use crate::event::Event;
use crate::id::Id;

/// The schema name every signed head carries.
pub const SCHEMA: &str = "mwp.head.v1";

/// The schema name of a fork proof.
pub const PROOF_SCHEMA: &str = "mwp.fork-proof.v1";

/// A host signs a Group's head at most this often (and only when the log moved since).
pub const HEAD_INTERVAL_MS: u64 = 100;

/// The authority's statement "event `seq` of `group` has id `id`", made at `at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedHead {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Organization.
    pub org: Id,
    /// Group.
    pub group: Id,
    /// Seq of the last event of the log when signed (at least 1).
    pub seq: u64,
    /// Id of event `seq`.
    pub id: Hash,
    /// Authority time of signing (ms).
    pub at: u64,
    /// Ed25519 signature over the SHA-256 of the canonical CBOR of every other field.
    pub sig: Signature,
}

// A head is read by a reader of its own, from its canonical CBOR and (through
// `canonical::canonical_from`) from its JSON form: what its derive takes, refusing an unknown
// field as the derive does.
canonical::decode_struct! {
    SignedHead { schema, org, group, seq, id, at, sig }
}

/// The signed fields (the canonical map without `sig`).
#[derive(Serialize)]
struct Body<'a> {
    schema: &'a str,
    org: &'a Id,
    group: &'a Id,
    seq: u64,
    id: &'a Hash,
    at: u64,
}

fn head_invalid(check: &str, message: String) -> Error {
    Error::new(Code::HeadInvalid, message).with("check", check)
}

impl SignedHead {
    /// Signs "event `seq` of `group` is `id`" at `at` with the authority key.
    pub fn sign(
        org: &Id,
        group: &Id,
        seq: u64,
        id: Hash,
        at: u64,
        key: &SecretKey,
    ) -> Result<SignedHead> {
        let mut head = SignedHead {
            schema: SCHEMA.to_owned(),
            org: org.clone(),
            group: group.clone(),
            seq,
            id,
            at,
            sig: Signature([0; 64]),
        };
        head.sig = key.sign(&head.digest()?);
        Ok(head)
    }

    /// The SHA-256 the signature covers.
    fn digest(&self) -> Result<[u8; 32]> {
        Ok(canonical::hash(&Body {
            schema: &self.schema,
            org: &self.org,
            group: &self.group,
            seq: self.seq,
            id: &self.id,
            at: self.at,
        })?)
    }

    /// Checks, in order: schema, seq ≥ 1, the group, and the signature under `trusted` (a key
    /// the caller pins, never one the head's source supplied). `HEAD_INVALID` naming the
    /// `check` otherwise.
    pub fn verify(&self, trusted: &PublicKey, group: &Id) -> Result<()> {
        if self.schema != SCHEMA {
            return Err(head_invalid(
                "schema",
                format!(
                    "head rejected: schema is {:?}, expected {SCHEMA:?}",
                    self.schema
                ),
            ));
        }
        if self.seq == 0 {
            return Err(head_invalid(
                "seq",
                "head rejected: seq 0 names no event; a head is signed after the first".into(),
            ));
        }
        if &self.group != group {
            return Err(head_invalid(
                "group",
                format!("head rejected: it is of group {}, not {group}", self.group),
            ));
        }
        if !trusted.verify(&self.digest()?, &self.sig) {
            return Err(head_invalid(
                "signature",
                format!(
                    "head rejected: its signature does not verify under the authority key {trusted}"
                ),
            ));
        }
        Ok(())
    }

    /// Canonical CBOR: the stored and served binary form.
    pub fn to_cbor(&self) -> Result<Vec<u8>> {
        Ok(canonical::to_vec(self)?)
    }

    /// Decodes canonical CBOR of a head, by the head's own reader; anything else is
    /// `HEAD_INVALID` (check `decode`).
    pub fn from_cbor(bytes: &[u8]) -> Result<SignedHead> {
        canonical::read_whole(bytes)
            .map_err(|e| head_invalid("decode", format!("head rejected: {e}")))
    }

    /// Decodes the JSON form (hex for `id` and `sig`): the text is written into canonical
    /// CBOR as it is parsed, then read by the head's own reader (`canonical::read_json`), as
    /// an event's JSON form is read. It takes what serde's derive takes from the same text (a
    /// test holds the two together), except the head's fields given as an array: a struct is
    /// a map. `HEAD_INVALID` (check `decode`) otherwise, naming what was wrong: the JSON
    /// parser's error, or the reader's reason.
    pub fn from_json(text: &str) -> Result<SignedHead> {
        canonical::read_json(text.as_bytes())
            .map_err(|e| head_invalid("decode", format!("head rejected: {e}")))
    }
}

/// Whether a host should sign a new head of a Group whose log ends at `seq`, given the last
/// head it signed (`(seq, at)`) and the time: when the log moved past it and at least
/// [`HEAD_INTERVAL_MS`] passed (or none was signed yet). A log with no event has no head.
pub fn head_due(last: Option<(u64, u64)>, seq: u64, now_ms: u64) -> bool {
    match last {
        _ if seq == 0 => false,
        None => true,
        Some((signed_seq, signed_at)) => {
            signed_seq != seq && now_ms.saturating_sub(signed_at) >= HEAD_INTERVAL_MS
        }
    }
}

/// Portable evidence that the authority signed two histories of one Group (SPEC §8a).
///
/// Stored as canonical CBOR: `{schema: "mwp.fork-proof.v1", authority, heads: [a, b],
/// events: [event…]}`, where `events` are the events from the lower head's seq to the higher
/// head's seq (empty when both heads name one seq).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkProof {
    /// Always [`PROOF_SCHEMA`].
    pub schema: String,
    /// The authority key both heads are signed under.
    pub authority: PublicKey,
    /// The two conflicting heads.
    pub heads: [SignedHead; 2],
    /// Events `lower.seq ..= higher.seq` (empty for heads at one seq).
    pub events: Vec<Event>,
}

/// What a verified [`ForkProof`] shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fork {
    /// Organization.
    pub org: Id,
    /// Group.
    pub group: Id,
    /// The seq at which the two histories differ as far as the proof shows.
    pub seq: u64,
    /// The two ids the authority vouched for at `seq`.
    pub ids: [Hash; 2],
    /// `"heads"` (two heads at one seq) or `"chain"` (a chain reaching one head contradicts
    /// the other).
    pub kind: &'static str,
}

fn proof_invalid(message: String) -> Error {
    Error::malformed(format!("fork proof rejected: {message}"))
}

impl ForkProof {
    /// A proof from two heads at one seq with different ids.
    pub fn of_heads(authority: PublicKey, a: SignedHead, b: SignedHead) -> ForkProof {
        ForkProof {
            schema: PROOF_SCHEMA.to_owned(),
            authority,
            heads: [a, b],
            events: Vec::new(),
        }
    }

    /// A proof from two heads at different seqs and the events from the lower head's seq to
    /// the higher's.
    pub fn of_chain(
        authority: PublicKey,
        a: SignedHead,
        b: SignedHead,
        events: Vec<Event>,
    ) -> ForkProof {
        ForkProof {
            schema: PROOF_SCHEMA.to_owned(),
            authority,
            heads: [a, b],
            events,
        }
    }

    /// Canonical CBOR: the proof file.
    pub fn to_cbor(&self) -> Result<Vec<u8>> {
        Ok(canonical::to_vec(self)?)
    }

    /// Decodes a proof file (canonical CBOR only); `MALFORMED` otherwise.
    ///
    /// The four entries are read in their canonical order, and each event as a stored event
    /// is ([`Event::from_cbor`]'s readers, at the depth it sits at): the derived decoding of
    /// an event, and serde's buffering of its kind, are not built for this alone. It accepts
    /// and gives what `canonical::from_slice::<ForkProof>` does (a test holds the two equal
    /// on every flipped bit of a proof); an error names the entry, and the event, it is in.
    pub fn from_cbor(bytes: &[u8]) -> Result<ForkProof> {
        Self::read(bytes).map_err(|e| proof_invalid(format!("not a fork proof: {e}")))
    }

    fn read(bytes: &[u8]) -> std::result::Result<ForkProof, canonical::CanonError> {
        // Keys in canonical order: shorter first, then bytewise.
        let mut f = canonical::Fields::new(bytes, 4)?;
        let heads = f.read("heads")?;
        let events = f.items("events", crate::event::decode_nested_event)?;
        let schema = f.read("schema")?;
        let authority = f.read("authority")?;
        f.finish()?;
        Ok(ForkProof {
            schema,
            authority,
            heads,
            events,
        })
    }

    /// Checks the proof with nothing but its contents (and, if given, a key the caller pins
    /// as the authority's): both heads verify under the authority key and name one org and
    /// group, and either they name one seq with different ids, or the events form a chain
    /// from the lower head's seq to the higher head's id that passes the lower seq with
    /// another id. `MALFORMED` (naming what fails) when it proves nothing.
    pub fn verify(&self, pinned: Option<&PublicKey>) -> Result<Fork> {
        if self.schema != PROOF_SCHEMA {
            return Err(proof_invalid(format!(
                "schema is {:?}, expected {PROOF_SCHEMA:?}",
                self.schema
            )));
        }
        if let Some(pinned) = pinned {
            if pinned != &self.authority {
                return Err(proof_invalid(format!(
                    "it is about authority key {}, not the pinned {pinned}",
                    self.authority
                )));
            }
        }
        let [a, b] = &self.heads;
        for (i, h) in [a, b].into_iter().enumerate() {
            h.verify(&self.authority, &a.group)
                .map_err(|e| proof_invalid(format!("head {i}: {}", e.message)))?;
        }
        if a.org != b.org {
            return Err(proof_invalid(format!(
                "the heads name two orgs, {} and {}",
                a.org, b.org
            )));
        }
        let fork = |seq, ids, kind| Fork {
            org: a.org.clone(),
            group: a.group.clone(),
            seq,
            ids,
            kind,
        };
        if a.seq == b.seq {
            if !self.events.is_empty() {
                return Err(proof_invalid(
                    "heads at one seq need no events, and events were given".into(),
                ));
            }
            if a.id == b.id {
                return Err(proof_invalid(format!(
                    "both heads name id {} at seq {}: they agree",
                    a.id, a.seq
                )));
            }
            return Ok(fork(a.seq, [a.id, b.id], "heads"));
        }
        let (lo, hi) = if a.seq < b.seq { (a, b) } else { (b, a) };
        let want = hi.seq - lo.seq + 1;
        if self.events.len() as u64 != want {
            return Err(proof_invalid(format!(
                "heads at seqs {} and {} need the {want} events between them, inclusive; {} given",
                lo.seq,
                hi.seq,
                self.events.len()
            )));
        }
        // The chain from the lower head's seq (≥ 1, verified above); the event before it is
        // not in the proof, so the first event's `prev` is taken as it is.
        use crate::chain::{Break, Position};
        let mut at = Position::after(lo.seq.saturating_sub(1));
        let mut prev: Option<&Event> = None;
        for (i, e) in self.events.iter().enumerate() {
            e.verify()
                .map_err(|err| proof_invalid(format!("event {i}: {}", err.message)))?;
            match at.take(&lo.group, e) {
                Ok(()) => {}
                Err(Break::Group | Break::Seq { .. }) => {
                    return Err(proof_invalid(format!(
                        "event {i} is seq {} of group {}, expected seq {} of {}",
                        e.seq,
                        e.group,
                        at.next_seq(),
                        lo.group
                    )));
                }
                Err(Break::Prev { seq, .. }) => {
                    return Err(proof_invalid(format!(
                        "event seq {seq} does not chain to seq {}",
                        at.seq
                    )));
                }
            }
            prev = Some(e);
        }
        let last = prev.expect("at least two events");
        if last.id != hi.id {
            return Err(proof_invalid(format!(
                "the events end at id {}, not the higher head's {}",
                last.id, hi.id
            )));
        }
        let first = &self.events[0];
        if first.id == lo.id {
            return Err(proof_invalid(format!(
                "the chain passes seq {} with the lower head's id: the heads agree",
                lo.seq
            )));
        }
        Ok(fork(lo.seq, [lo.id, first.id], "chain"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: &str) -> SecretKey {
        SecretKey::for_transcript(n)
    }

    fn id(s: &str) -> Id {
        Id::new(s).unwrap()
    }

    #[test]
    fn a_head_verifies_under_its_key_only() {
        let k = key("@authority");
        let h = SignedHead::sign(&id("o"), &id("g"), 3, Hash([7; 32]), 10, &k).expect("signs");
        h.verify(&k.public(), &id("g")).unwrap();
        let e = h.verify(&key("mallory").public(), &id("g")).unwrap_err();
        assert_eq!(
            (e.code, e.details["check"].as_str()),
            (Code::HeadInvalid, Some("signature"))
        );
        let e = h.verify(&k.public(), &id("g2")).unwrap_err();
        assert_eq!(e.details["check"], "group");
        let mut t = h.clone();
        t.at += 1;
        assert_eq!(
            t.verify(&k.public(), &id("g")).unwrap_err().details["check"],
            "signature"
        );
        let bytes = h.to_cbor().expect("encodes");
        assert_eq!(SignedHead::from_cbor(&bytes).unwrap(), h);
        let json = serde_json::to_string(&h).expect("JSON");
        assert_eq!(SignedHead::from_json(&json).unwrap(), h);
    }

    /// A head's canonical CBOR, each byte changed to every value and every cut, is read by
    /// its reader as by its derive; an unknown key is refused by both.
    #[test]
    fn the_heads_reader_reads_what_the_derive_reads() {
        let k = key("@authority");
        let h = SignedHead::sign(&id("o"), &id("g"), 3, Hash([7; 32]), 10, &k).expect("signs");
        let bytes = h.to_cbor().expect("encodes");
        let (accepted, refused) =
            canonical::every_byte_reads_as_the_derive::<SignedHead>(&bytes, false);
        assert!(accepted > 0 && refused > 0, "{accepted} {refused}");
        let extended = canonical::with_unknown_key(&bytes);
        let e = SignedHead::from_cbor(&extended).unwrap_err();
        assert!(e.message.contains("unknown field `zz`"), "{e}");
        assert!(
            canonical::from_slice::<SignedHead>(&extended, canonical::Strictness::Canonical)
                .is_err()
        );
    }

    /// The JSON form is read as serde's derive reads it with serde_json: the text of a head,
    /// each character changed to every printable one and every cut, is taken by both or
    /// refused by both, and what is taken is the same head. A refusal names what was wrong;
    /// the fields given as an array are refused (a struct is a map).
    #[test]
    fn the_json_form_is_read_as_the_derive_reads_it() {
        let k = key("@authority");
        let h = SignedHead::sign(&id("o"), &id("g"), 3, Hash([7; 32]), 10, &k).expect("signs");
        let json = serde_json::to_string(&h).expect("JSON");
        let by_derive = |text: &str| serde_json::from_str::<SignedHead>(text).ok();
        let (mut accepted, mut refused) = (0, 0);
        let mut compare = |text: &str| {
            let read = SignedHead::from_json(text).ok();
            assert_eq!(read, by_derive(text), "{text}");
            if read.is_some() {
                accepted += 1;
            } else {
                refused += 1;
            }
        };
        compare(&json);
        for i in 0..json.len() {
            for c in b' '..=b'~' {
                let mut changed = json.clone().into_bytes();
                changed[i] = c;
                compare(std::str::from_utf8(&changed).expect("printable ASCII stays UTF-8"));
            }
            compare(&json[..i]);
        }
        for extra in ["", " ", "\n", "{}", "1"] {
            compare(&format!("{json}{extra}"));
        }
        assert!(accepted > 10 && refused > 1000, "{accepted} {refused}");
        let mut value = serde_json::to_value(&h).expect("JSON");
        value["extra"] = serde_json::json!(1);
        let e = SignedHead::from_json(&value.to_string()).unwrap_err();
        assert!(e.message.contains("unknown field `extra`"), "{e}");
        value.as_object_mut().expect("an object").remove("extra");
        value.as_object_mut().expect("an object").remove("at");
        let e = SignedHead::from_json(&value.to_string()).unwrap_err();
        assert!(e.message.contains("missing field `at`"), "{e}");
        value["at"] = serde_json::json!(-1);
        let e = SignedHead::from_json(&value.to_string()).unwrap_err();
        assert_eq!(e.details["check"], "decode");
        let e = SignedHead::from_json("{\"seq\": 1").unwrap_err();
        assert!(e.message.contains("EOF"), "{e}");
        // The fields as an array, which serde's derive takes: a struct is a map.
        let fields = serde_json::json!([h.schema, h.org, h.group, h.seq, h.id, h.at, h.sig]);
        assert_eq!(
            serde_json::from_value::<SignedHead>(fields.clone()).ok(),
            Some(h)
        );
        let e = SignedHead::from_json(&fields.to_string()).unwrap_err();
        assert!(e.message.contains("expected a map"), "{e}");
    }

    #[test]
    fn heads_are_due_once_per_interval_and_only_when_the_log_moved() {
        assert!(!head_due(None, 0, 5));
        assert!(head_due(None, 1, 5));
        assert!(!head_due(Some((1, 5)), 1, 1000));
        assert!(!head_due(Some((1, 5)), 2, 104));
        assert!(head_due(Some((1, 5)), 2, 105));
    }

    #[test]
    fn two_heads_at_one_seq_with_different_ids_prove_a_fork() {
        let k = key("@authority");
        let a = SignedHead::sign(&id("o"), &id("g"), 3, Hash([1; 32]), 10, &k).unwrap();
        let b = SignedHead::sign(&id("o"), &id("g"), 3, Hash([2; 32]), 11, &k).unwrap();
        let p = ForkProof::of_heads(k.public(), a.clone(), b);
        let bytes = p.to_cbor().unwrap();
        let f = ForkProof::from_cbor(&bytes)
            .unwrap()
            .verify(Some(&k.public()))
            .unwrap();
        assert_eq!((f.seq, f.kind), (3, "heads"));
        // The same head twice proves nothing; another pinned key refuses it.
        assert!(ForkProof::of_heads(k.public(), a.clone(), a)
            .verify(None)
            .is_err());
        assert!(p.verify(Some(&key("x").public())).is_err());
    }
}
