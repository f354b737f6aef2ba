//! Archival under the Organization's policy (SPEC §6a): the sealed audit log of an archived
//! Group, its signed manifest, and the signed tombstone its deletion leaves.
//!
//! Everything here is format and decision, no IO and no randomness: the encryption itself
//! (age, X25519 recipients) draws randomness and lives in the `mwp-audit` crate, which every
//! host that archives calls.
//!
//! * [`OrgPolicies`]: per Organization, the audit recipients, the retention and whether the
//!   plain history is removed once sealed (the operator's `--org-policy` file).
//! * The audit log is the plaintext that is sealed ([`LogWriter`], [`read_log`]): every
//!   event's stored bytes in seq order, redaction tombstones included, then the final signed
//!   snapshot.
//! * The artifact ([`split_artifact`], [`assemble_artifact`]) is `MWPAUDT1`, the age
//!   ciphertext, then the [`Manifest`] in the clear: canonical CBOR, its length as a 4-byte
//!   big-endian integer, and `MWPAUDM1`. The manifest is signed by the authority and names
//!   the Group, the final seq, the head id, the final snapshot's hash and the ciphertext's
//!   hash, so anyone can check what was sealed and that it was not altered, without the key.
//! * [`Tombstone`]: what `mwp audit expire` leaves when it deletes an artifact past its
//!   retention, signed by the authority.
//!
//! Whether a seal is due is decided by the authority driver
//! ([`crate::authority::Commit::seal`], [`crate::authority::Authority::seal_due`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Strictness};
use crate::crypto::{Hash, PublicKey, SecretKey, Signature};
use crate::error::{Code, Error, Result};
use crate::event::Event;
use crate::id::Id;
use crate::snapshot::Snapshot;
use crate::state::GroupState;

/// The schema name of an Organization policy file.
pub const POLICY_SCHEMA: &str = "mwp.org-policy.v1";
/// The schema name every manifest carries.
pub const MANIFEST_SCHEMA: &str = "mwp.audit-manifest.v1";
/// The schema name every tombstone carries.
pub const TOMBSTONE_SCHEMA: &str = "mwp.audit-tombstone.v1";
/// First bytes of a sealed artifact.
pub const ARTIFACT_MAGIC: [u8; 8] = *b"MWPAUDT1";
/// Last bytes of a sealed artifact (after the manifest and its length).
pub const MANIFEST_MAGIC: [u8; 8] = *b"MWPAUDM1";
/// First bytes of the plaintext audit log.
pub const LOG_MAGIC: [u8; 8] = *b"MWPAUDL1";
/// Largest manifest an artifact may carry.
pub const MAX_MANIFEST_LEN: u32 = 64 << 10;
/// Largest record (event or snapshot) the plaintext audit log may carry: an event is at most
/// 16 MiB in a store, a snapshot at most 4 GiB ([`crate::export::max_file_bytes`]).
pub const MAX_LOG_RECORD: u64 = 4 << 30;
/// Longest retention a policy may name (100 years).
pub const MAX_RETAIN_DAYS: u64 = 36_500;
/// Most recipients one Organization may name.
pub const MAX_RECIPIENTS: usize = 64;
/// File name of a group's sealed artifact in a file store's group directory.
pub const ARTIFACT_NAME: &str = "audit.mwpa";
/// File name of the tombstone an expired artifact leaves in its group directory.
pub const TOMBSTONE_NAME: &str = "audit.tombstone";
const MS_PER_DAY: u64 = 86_400_000;

fn invalid(check: &str, message: impl Into<String>) -> Error {
    Error::new(Code::AuditInvalid, message).with("check", check)
}

/// What one Organization's policy says about its archived Groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrgPolicy {
    /// The Organization's age X25519 public keys (`age1…`): the sealed log opens with any one
    /// of the matching identities, and with nothing else.
    pub recipients: Vec<String>,
    /// Days a sealed artifact is kept; past that, `mwp audit expire` may delete it.
    pub retain_days: u64,
    /// Whether the plain history (the log's segments) is removed once the artifact is
    /// durable; the final snapshot and the manifest stay.
    pub remove_plain: bool,
}

/// The operator's Organization policy file (docs/format.md, "Organization policy").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct OrgPolicies {
    /// Always [`POLICY_SCHEMA`].
    pub schema: String,
    /// The policy of each Organization that has one; others keep their history in the clear.
    pub orgs: BTreeMap<Id, OrgPolicy>,
}

impl OrgPolicies {
    /// Parses and checks a policy file: the schema, at least one and at most
    /// [`MAX_RECIPIENTS`] distinct recipients per Organization, each `age1` followed by
    /// lowercase bech32 (the `mwp-audit` crate parses each fully), and a retention of at
    /// most [`MAX_RETAIN_DAYS`]. `MALFORMED` naming the first thing wrong.
    pub fn from_json(text: &str) -> Result<OrgPolicies> {
        let p: OrgPolicies = serde_json::from_str(text)
            .map_err(|e| Error::malformed(format!("organization policy: {e}")))?;
        if p.schema != POLICY_SCHEMA {
            return Err(Error::malformed(format!(
                "organization policy: schema is {:?}, expected {POLICY_SCHEMA:?}",
                p.schema
            )));
        }
        for (org, o) in &p.orgs {
            let at =
                |what: String| Error::malformed(format!("organization policy of {org}: {what}"));
            if o.recipients.is_empty() {
                return Err(at("recipients is empty; name at least one age1… key".into()));
            }
            if o.recipients.len() > MAX_RECIPIENTS {
                return Err(at(format!(
                    "{} recipients, more than the {MAX_RECIPIENTS} allowed",
                    o.recipients.len()
                )));
            }
            let mut seen = BTreeSet::new();
            for r in &o.recipients {
                check_recipient_syntax(r).map_err(&at)?;
                if !seen.insert(r) {
                    return Err(at(format!("recipient {r} is named twice")));
                }
            }
            if o.retain_days > MAX_RETAIN_DAYS {
                return Err(at(format!(
                    "retain_days is {}, more than {MAX_RETAIN_DAYS}",
                    o.retain_days
                )));
            }
        }
        Ok(p)
    }

    /// The policy of `org`, if it has one.
    pub fn get(&self, org: &Id) -> Option<&OrgPolicy> {
        self.orgs.get(org)
    }
}

/// `age1` followed by 58 characters of lowercase bech32: the shape of an age X25519
/// recipient. The checksum and the point are the `mwp-audit` crate's to check.
fn check_recipient_syntax(r: &str) -> std::result::Result<(), String> {
    const CHARSET: &str = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
    let ok = r.len() == 62 && r.starts_with("age1") && r[4..].chars().all(|c| CHARSET.contains(c));
    if ok {
        Ok(())
    } else {
        let shown: String = r.chars().take(80).collect();
        Err(format!(
            "recipient {shown:?} is not an age X25519 public key (age1 and 58 lowercase bech32 characters)"
        ))
    }
}

/// What the authority signs about a sealed artifact, in the clear beside the ciphertext.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always [`MANIFEST_SCHEMA`].
    pub schema: String,
    /// Organization.
    pub org: Id,
    /// Group.
    pub group: Id,
    /// The final seq: the audit log holds events `1..=seq`.
    pub seq: u64,
    /// Id of event `seq` (the head).
    pub id: Hash,
    /// SHA-256 of the final signed snapshot's stored bytes.
    pub snapshot: Hash,
    /// The final snapshot's state hash.
    pub state_hash: Hash,
    /// SHA-256 of the ciphertext.
    pub ciphertext: Hash,
    /// Length of the ciphertext in bytes.
    pub ciphertext_len: u64,
    /// The recipients it is encrypted to, as the policy named them.
    pub recipients: Vec<String>,
    /// Authority time of sealing (ms).
    pub sealed_at: u64,
    /// Until when it is retained (ms): `sealed_at` plus the policy's retention.
    pub retain_until: u64,
    /// Whether the policy removes the plain history once this is durable.
    pub remove_plain: bool,
    /// The authority key that signs it (and signed the final snapshot).
    pub authority: PublicKey,
    /// Ed25519 signature over the SHA-256 of the canonical CBOR of every other field.
    pub sig: Signature,
}

/// The signed fields of a manifest.
#[derive(Serialize)]
struct ManifestBody<'a> {
    schema: &'a str,
    org: &'a Id,
    group: &'a Id,
    seq: u64,
    id: &'a Hash,
    snapshot: &'a Hash,
    state_hash: &'a Hash,
    ciphertext: &'a Hash,
    ciphertext_len: u64,
    recipients: &'a [String],
    sealed_at: u64,
    retain_until: u64,
    remove_plain: bool,
    authority: &'a PublicKey,
}

/// What is sealed, before the ciphertext is known: the input of [`Manifest::sign`].
#[derive(Debug, Clone)]
pub struct Sealed<'a> {
    /// The final signed snapshot (verified by the caller, or just written).
    pub snapshot: &'a Snapshot,
    /// Its stored bytes' SHA-256.
    pub snapshot_hash: Hash,
    /// The policy it is sealed under.
    pub policy: &'a OrgPolicy,
    /// Authority time of sealing (ms).
    pub sealed_at: u64,
}

impl Manifest {
    /// Signs the manifest of an artifact whose ciphertext has `ciphertext` as SHA-256 and is
    /// `ciphertext_len` bytes long.
    pub fn sign(
        sealed: &Sealed<'_>,
        ciphertext: Hash,
        ciphertext_len: u64,
        key: &SecretKey,
    ) -> Result<Manifest> {
        let s = sealed.snapshot;
        let retain_until = sealed
            .sealed_at
            .saturating_add(sealed.policy.retain_days.saturating_mul(MS_PER_DAY));
        let mut m = Manifest {
            schema: MANIFEST_SCHEMA.to_owned(),
            org: s.org.clone(),
            group: s.group.clone(),
            seq: s.seq,
            id: s.chain_head,
            snapshot: sealed.snapshot_hash,
            state_hash: s.state_hash,
            ciphertext,
            ciphertext_len,
            recipients: sealed.policy.recipients.clone(),
            sealed_at: sealed.sealed_at,
            retain_until,
            remove_plain: sealed.policy.remove_plain,
            authority: key.public(),
            sig: Signature([0; 64]),
        };
        m.sig = key.sign(&m.digest()?);
        Ok(m)
    }

    fn digest(&self) -> Result<[u8; 32]> {
        Ok(canonical::hash(&ManifestBody {
            schema: &self.schema,
            org: &self.org,
            group: &self.group,
            seq: self.seq,
            id: &self.id,
            snapshot: &self.snapshot,
            state_hash: &self.state_hash,
            ciphertext: &self.ciphertext,
            ciphertext_len: self.ciphertext_len,
            recipients: &self.recipients,
            sealed_at: self.sealed_at,
            retain_until: self.retain_until,
            remove_plain: self.remove_plain,
            authority: &self.authority,
        })?)
    }

    /// Checks the schema, that seq is at least 1, and the signature under `trusted` (a key
    /// the caller pins) or, without one, under the manifest's own `authority` (which shows
    /// only that it is whole). `AUDIT_INVALID` naming the `check` otherwise.
    pub fn verify(&self, trusted: Option<&PublicKey>) -> Result<()> {
        if self.schema != MANIFEST_SCHEMA {
            return Err(invalid(
                "schema",
                format!(
                    "audit manifest rejected: schema is {:?}, expected {MANIFEST_SCHEMA:?}",
                    self.schema
                ),
            ));
        }
        if self.seq == 0 {
            return Err(invalid(
                "seq",
                "audit manifest rejected: seq 0 names no event",
            ));
        }
        if let Some(t) = trusted {
            if *t != self.authority {
                return Err(invalid(
                    "authority",
                    format!(
                        "audit manifest rejected: it names authority {}, not the trusted key {t}",
                        self.authority
                    ),
                ));
            }
        }
        if !self.authority.verify(&self.digest()?, &self.sig) {
            return Err(invalid(
                "signature",
                format!(
                    "audit manifest rejected: its signature does not verify under the authority key {}",
                    self.authority
                ),
            ));
        }
        Ok(())
    }

    /// Canonical CBOR: the form an artifact carries.
    pub fn to_cbor(&self) -> Result<Vec<u8>> {
        Ok(canonical::to_vec(self)?)
    }

    /// Decodes the canonical CBOR of a manifest; `AUDIT_INVALID` (check `decode`) otherwise.
    pub fn from_cbor(bytes: &[u8]) -> Result<Manifest> {
        canonical::from_slice(bytes, Strictness::Canonical)
            .map_err(|e| invalid("decode", format!("audit manifest rejected: {e}")))
    }

    /// Checks that a ciphertext of `len` bytes with SHA-256 `hash` is the one this manifest
    /// names; `AUDIT_INVALID` (check `ciphertext`) otherwise. For a reader that hashes the
    /// ciphertext as it reads it ([`split_artifact`] holds it whole).
    pub fn check_ciphertext(&self, len: u64, hash: Hash) -> Result<()> {
        if len == self.ciphertext_len && hash == self.ciphertext {
            return Ok(());
        }
        Err(invalid(
            "ciphertext",
            format!(
                "audit artifact rejected: its ciphertext ({len} bytes) is not the one the manifest names ({} bytes, sha256 {})",
                self.ciphertext_len, self.ciphertext
            ),
        ))
    }

    /// Whether the artifact may be deleted at `now_ms` (its retention has passed).
    pub fn expired(&self, now_ms: u64) -> bool {
        now_ms >= self.retain_until
    }
}

/// Where a sealed group's plain log starts (docs/format.md, "Sealed audit log", Opening):
/// `sealed` is the final seq its seal record names and whether that record says the plain
/// history goes (an artifact whose manifest says `remove_plain`, or a tombstone); when it does
/// and a segment named for the next seq exists (the empty segment a removal writes first), the
/// log starts there, on the final snapshot, and every older segment is a leftover. Otherwise it
/// starts at seq 1. The caller has checked the record under the authority key and that it is
/// of this group.
pub fn plain_log_start(sealed: Option<(u64, bool)>, segments: &[u64]) -> u64 {
    match sealed {
        Some((seq, true)) if segments.contains(&(seq + 1)) => seq + 1,
        _ => 1,
    }
}

/// Builds an artifact from its ciphertext and signed manifest.
pub fn assemble_artifact(ciphertext: &[u8], manifest: &Manifest) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(ciphertext.len() + 1024);
    out.extend_from_slice(&ARTIFACT_MAGIC);
    out.extend_from_slice(ciphertext);
    out.extend_from_slice(&manifest_trailer(manifest)?);
    Ok(out)
}

/// What follows the ciphertext: the manifest's canonical CBOR, its length (4 bytes,
/// big-endian) and [`MANIFEST_MAGIC`].
pub fn manifest_trailer(manifest: &Manifest) -> Result<Vec<u8>> {
    let m = manifest.to_cbor()?;
    let len = u32::try_from(m.len())
        .ok()
        .filter(|l| *l <= MAX_MANIFEST_LEN)
        .ok_or_else(|| invalid("manifest", "the manifest is larger than 64 KiB"))?;
    let mut out = m;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&MANIFEST_MAGIC);
    Ok(out)
}

/// Reads the manifest from the end of an artifact (`tail`: at least its last
/// `12 + manifest length` bytes, or the whole file), checks it (schema, seq, and the signature
/// under `trusted` or its own key) and gives it with the offset, from the end, at which the
/// ciphertext ends. The ciphertext itself is not read: [`split_artifact`] checks it.
pub fn read_trailer(tail: &[u8], trusted: Option<&PublicKey>) -> Result<(Manifest, usize)> {
    let layout = |what: &str| invalid("layout", format!("audit artifact rejected: {what}"));
    let end = tail.len();
    if end < 12 || tail[end - 8..] != MANIFEST_MAGIC {
        return Err(layout("it does not end with MWPAUDM1"));
    }
    let mut l = [0u8; 4];
    l.copy_from_slice(&tail[end - 12..end - 8]);
    let mlen = u32::from_be_bytes(l);
    if mlen > MAX_MANIFEST_LEN || (mlen as usize) > end - 12 {
        return Err(layout(&format!(
            "its manifest length {mlen} does not fit the file"
        )));
    }
    let mstart = end - 12 - mlen as usize;
    let manifest = Manifest::from_cbor(&tail[mstart..end - 12])?;
    manifest.verify(trusted)?;
    Ok((manifest, 12 + mlen as usize))
}

/// Splits an artifact into its manifest and ciphertext and checks the manifest (schema,
/// signature under `trusted` or its own key) and that the ciphertext is the one it names
/// (length and SHA-256). This needs no key: anyone can run it. `AUDIT_INVALID` naming the
/// `check` (`layout`, `decode`, `schema`, `seq`, `authority`, `signature`, `ciphertext`).
pub fn split_artifact<'a>(
    bytes: &'a [u8],
    trusted: Option<&PublicKey>,
) -> Result<(Manifest, &'a [u8])> {
    if bytes.len() < 8 + 12 || bytes[..8] != ARTIFACT_MAGIC {
        return Err(invalid(
            "layout",
            "audit artifact rejected: it does not start with MWPAUDT1",
        ));
    }
    let (manifest, trailer) = read_trailer(&bytes[8..], trusted)?;
    let ciphertext = &bytes[8..bytes.len() - trailer];
    manifest.check_ciphertext(ciphertext.len() as u64, Hash::of(ciphertext))?;
    Ok((manifest, ciphertext))
}

/// Writes the plaintext audit log: [`LOG_MAGIC`], then each event as `1`, its length (4
/// bytes, big-endian) and its stored bytes, in seq order from 1, then the final snapshot as
/// `2`, its length (8 bytes, big-endian) and its stored bytes, then `0`.
pub struct LogWriter<W: Write> {
    out: W,
    events: u64,
}

impl<W: Write> LogWriter<W> {
    /// Starts a log on `out`.
    pub fn new(mut out: W) -> std::io::Result<Self> {
        out.write_all(&LOG_MAGIC)?;
        Ok(LogWriter { out, events: 0 })
    }

    /// Appends the stored bytes of the next event.
    pub fn event(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let len = u32::try_from(bytes.len())
            .map_err(|_| std::io::Error::other("an event larger than 4 GiB"))?;
        self.out.write_all(&[1])?;
        self.out.write_all(&len.to_be_bytes())?;
        self.out.write_all(bytes)?;
        self.events += 1;
        Ok(())
    }

    /// How many events were appended.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Appends the final snapshot's stored bytes and the end mark; gives the writer back.
    pub fn finish(mut self, snapshot: &[u8]) -> std::io::Result<W> {
        self.out.write_all(&[2])?;
        self.out.write_all(&(snapshot.len() as u64).to_be_bytes())?;
        self.out.write_all(snapshot)?;
        self.out.write_all(&[0])?;
        Ok(self.out)
    }
}

/// An opened and verified audit log.
#[derive(Debug)]
pub struct AuditLog {
    /// The manifest it was sealed under.
    pub manifest: Manifest,
    /// Every event's stored bytes, seq 1 first.
    pub events: Vec<Vec<u8>>,
    /// The final snapshot's stored bytes.
    pub snapshot_bytes: Vec<u8>,
    /// The final snapshot, verified.
    pub snapshot: Snapshot,
    /// The state hash the replayed events reach (equal to the snapshot's).
    pub state_hash: Hash,
}

/// Reads a decrypted audit log and verifies it against its (already checked) manifest: the
/// events decode, their ids and chain hold from seq 1 (redaction tombstones included), the
/// last is the manifest's seq and id, the final snapshot is the one the manifest names,
/// verifies under the manifest's authority and is at that seq and id, and replaying the
/// events reaches its state hash. `AUDIT_INVALID` naming the `check` (`log`, `chain`,
/// `snapshot`, `state`) otherwise.
pub fn read_log(plain: &[u8], manifest: &Manifest) -> Result<AuditLog> {
    let log = |what: String| invalid("log", format!("audit log rejected: {what}"));
    if plain.len() < 8 || plain[..8] != LOG_MAGIC {
        return Err(log("it does not start with MWPAUDL1".into()));
    }
    let mut at = 8usize;
    let take = |at: &mut usize, n: usize| -> Result<&[u8]> {
        let end = at
            .checked_add(n)
            .filter(|e| *e <= plain.len())
            .ok_or_else(|| {
                invalid(
                    "log",
                    format!("audit log rejected: it ends inside a record at offset {at}"),
                )
            })?;
        let s = &plain[*at..end];
        *at = end;
        Ok(s)
    };
    // Replayed as a store opens its own log: each event's payload hash and id checked where
    // its bytes lie, then applied, which checks its group, seq and chain.
    let mut state: Option<GroupState> = None;
    let mut events = Vec::new();
    let snapshot_bytes = loop {
        let tag = take(&mut at, 1)?[0];
        match tag {
            1 => {
                let mut l = [0u8; 4];
                l.copy_from_slice(take(&mut at, 4)?);
                let bytes = take(&mut at, u32::from_be_bytes(l) as usize)?;
                let seq = events.len() as u64 + 1;
                let chain = |e: Error| {
                    invalid(
                        "chain",
                        format!("audit log rejected: event {seq}: {}", e.message),
                    )
                };
                let event = Event::from_cbor_verified(bytes).map_err(chain)?;
                GroupState::apply_stored_to(&mut state, &manifest.group, &event).map_err(chain)?;
                events.push(bytes.to_vec());
            }
            2 => {
                let mut l = [0u8; 8];
                l.copy_from_slice(take(&mut at, 8)?);
                let n = u64::from_be_bytes(l);
                if n > MAX_LOG_RECORD {
                    return Err(log(format!("a snapshot of {n} bytes")));
                }
                let bytes = take(&mut at, n as usize)?;
                if take(&mut at, 1)? != [0] || at != plain.len() {
                    return Err(log("bytes follow the final snapshot".into()));
                }
                break bytes.to_vec();
            }
            t => return Err(log(format!("unknown record tag {t} at offset {}", at - 1))),
        }
    };
    let (seq, head) = state.as_ref().map_or((0, Hash::ZERO), |s| (s.seq, s.head));
    if seq != manifest.seq || head != manifest.id {
        return Err(invalid(
            "chain",
            format!(
                "audit log rejected: it ends at seq {seq} id {head}, the manifest names seq {} id {}",
                manifest.seq, manifest.id
            ),
        ));
    }
    if Hash::of(&snapshot_bytes) != manifest.snapshot {
        return Err(invalid(
            "snapshot",
            "audit log rejected: its final snapshot is not the one the manifest names",
        ));
    }
    let snapshot =
        Snapshot::verify_stored(&snapshot_bytes, &manifest.authority, &manifest.group)
            .map_err(|e| invalid("snapshot", format!("audit log rejected: {}", e.message)))?;
    if snapshot.seq != manifest.seq || snapshot.chain_head != manifest.id {
        return Err(invalid(
            "snapshot",
            format!(
                "audit log rejected: the final snapshot is at seq {}, the manifest names {}",
                snapshot.seq, manifest.seq
            ),
        ));
    }
    let state_hash = match &state {
        Some(s) => s.hash()?,
        None => Hash::ZERO,
    };
    if state_hash != snapshot.state_hash || state_hash != manifest.state_hash {
        return Err(invalid(
            "state",
            format!(
                "audit log rejected: replaying it reaches state {state_hash}, the final snapshot holds {}",
                snapshot.state_hash
            ),
        ));
    }
    Ok(AuditLog {
        manifest: manifest.clone(),
        events,
        snapshot_bytes,
        snapshot,
        state_hash,
    })
}

/// What deleting an expired artifact leaves: the authority's signed statement of what was
/// deleted and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tombstone {
    /// Always [`TOMBSTONE_SCHEMA`].
    pub schema: String,
    /// Organization.
    pub org: Id,
    /// Group.
    pub group: Id,
    /// The final seq the deleted artifact held.
    pub seq: u64,
    /// SHA-256 of the deleted artifact's manifest (canonical CBOR).
    pub manifest: Hash,
    /// SHA-256 of its ciphertext.
    pub ciphertext: Hash,
    /// Until when it was to be retained (ms).
    pub retain_until: u64,
    /// Authority time of deletion (ms).
    pub deleted_at: u64,
    /// The authority key that signs it.
    pub authority: PublicKey,
    /// Ed25519 signature over the SHA-256 of the canonical CBOR of every other field.
    pub sig: Signature,
}

#[derive(Serialize)]
struct TombstoneBody<'a> {
    schema: &'a str,
    org: &'a Id,
    group: &'a Id,
    seq: u64,
    manifest: &'a Hash,
    ciphertext: &'a Hash,
    retain_until: u64,
    deleted_at: u64,
    authority: &'a PublicKey,
}

impl Tombstone {
    /// Signs the tombstone of `manifest`'s artifact, deleted at `deleted_at`.
    pub fn sign(manifest: &Manifest, deleted_at: u64, key: &SecretKey) -> Result<Tombstone> {
        let mut t = Tombstone {
            schema: TOMBSTONE_SCHEMA.to_owned(),
            org: manifest.org.clone(),
            group: manifest.group.clone(),
            seq: manifest.seq,
            manifest: Hash::of(&manifest.to_cbor()?),
            ciphertext: manifest.ciphertext,
            retain_until: manifest.retain_until,
            deleted_at,
            authority: key.public(),
            sig: Signature([0; 64]),
        };
        t.sig = key.sign(&t.digest()?);
        Ok(t)
    }

    fn digest(&self) -> Result<[u8; 32]> {
        Ok(canonical::hash(&TombstoneBody {
            schema: &self.schema,
            org: &self.org,
            group: &self.group,
            seq: self.seq,
            manifest: &self.manifest,
            ciphertext: &self.ciphertext,
            retain_until: self.retain_until,
            deleted_at: self.deleted_at,
            authority: &self.authority,
        })?)
    }

    /// Checks the schema and the signature under `trusted` (or its own key).
    pub fn verify(&self, trusted: Option<&PublicKey>) -> Result<()> {
        if self.schema != TOMBSTONE_SCHEMA {
            return Err(invalid(
                "schema",
                format!("audit tombstone rejected: schema is {:?}", self.schema),
            ));
        }
        let key = trusted.unwrap_or(&self.authority);
        if *key != self.authority || !key.verify(&self.digest()?, &self.sig) {
            return Err(invalid(
                "signature",
                format!("audit tombstone rejected: its signature does not verify under {key}"),
            ));
        }
        Ok(())
    }

    /// Canonical CBOR: the stored form.
    pub fn to_cbor(&self) -> Result<Vec<u8>> {
        Ok(canonical::to_vec(self)?)
    }

    /// Decodes a stored tombstone; `AUDIT_INVALID` (check `decode`) otherwise.
    pub fn from_cbor(bytes: &[u8]) -> Result<Tombstone> {
        canonical::from_slice(bytes, Strictness::Canonical)
            .map_err(|e| invalid("decode", format!("audit tombstone rejected: {e}")))
    }
}
