//! Sealing and opening mwp audit logs (SPEC §6a): the one place mwp encrypts.
//!
//! The format, the manifest, the tombstone and every check live in the core
//! ([`mwp_core::audit`]); this crate adds what the core may not do, because it draws
//! randomness: encryption with [age](https://age-encryption.org/v1) to the Organization's
//! X25519 recipients, and decryption with its identities. Every host that archives (the file
//! store, PostgreSQL, the Node/Deno file store through the WebAssembly module) seals through
//! [`seal`], and `mwp audit open` opens through [`open`].

use std::io::{Read, Write};

/// An age X25519 identity (`AGE-SECRET-KEY-1…`) and recipient (`age1…`).
pub use age::x25519::{Identity, Recipient};

use age::x25519;
use mwp_core::audit::{
    self, manifest_trailer, split_artifact, AuditLog, LogWriter, Manifest, OrgPolicies, OrgPolicy,
    Sealed, ARTIFACT_MAGIC,
};
use mwp_core::snapshot::Snapshot;
use mwp_core::{Code, Error, Hash, PublicKey, Result, SecretKey};
use sha2::{Digest, Sha256};

fn invalid(check: &str, message: impl Into<String>) -> Error {
    Error::new(Code::AuditInvalid, message).with("check", check)
}

fn io_error(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::new(Code::Storage, format!("{what}: {e}"))
}

/// Parses an Organization policy file ([`OrgPolicies::from_json`]) and every recipient in it
/// as an age X25519 public key. `MALFORMED` naming the first one that is not.
pub fn load_policy(text: &str) -> Result<OrgPolicies> {
    let p = OrgPolicies::from_json(text)?;
    for (org, o) in &p.orgs {
        recipients(o).map_err(|e| {
            Error::malformed(format!("organization policy of {org}: {}", e.message))
        })?;
    }
    Ok(p)
}

/// The policy's recipients, parsed.
pub fn recipients(policy: &OrgPolicy) -> Result<Vec<x25519::Recipient>> {
    policy
        .recipients
        .iter()
        .map(|r| {
            r.parse::<x25519::Recipient>().map_err(|e| {
                Error::malformed(format!(
                    "recipient {r} is not an age X25519 public key: {e}"
                ))
            })
        })
        .collect()
}

/// Reads an age identity file: one `AGE-SECRET-KEY-1…` per line, `#` comments and blank lines
/// ignored (the format `age-keygen` writes). `MALFORMED` naming the line otherwise.
pub fn parse_identities(text: &str) -> Result<Vec<x25519::Identity>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let id = line.parse::<x25519::Identity>().map_err(|_| {
            Error::malformed(format!(
                "identity file line {}: not an age X25519 identity (AGE-SECRET-KEY-1…)",
                n + 1
            ))
        })?;
        out.push(id);
    }
    if out.is_empty() {
        return Err(Error::malformed(
            "identity file holds no AGE-SECRET-KEY-1… line",
        ));
    }
    Ok(out)
}

/// The recipient (`age1…`) of an identity: what a policy names to seal to it.
pub fn recipient_of(identity: &Identity) -> String {
    identity.to_public().to_string()
}

/// A new Organization key pair: the identity file's text (with its public key as a comment,
/// as `age-keygen` writes it) and the recipient (`age1…`).
pub fn generate_identity() -> (String, String) {
    use age::secrecy::ExposeSecret;
    let id = x25519::Identity::generate();
    let recipient = id.to_public().to_string();
    let secret = id.to_string();
    let text = format!(
        "# mwp audit identity\n# public key: {recipient}\n{}\n",
        secret.expose_secret()
    );
    (text, recipient)
}

/// A writer that hashes and counts what passes through it.
struct Hashing<W> {
    inner: W,
    hash: Sha256,
    len: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Seals the audit log of an archived Group as it is written: [`ARTIFACT_MAGIC`], the age
/// ciphertext of the plaintext log (every event in seq order from 1, then the final
/// snapshot), then the signed manifest. The log is encrypted as it is written, never held
/// whole; a host that reads its log in pieces feeds [`Sealer::event`] piece by piece.
pub struct Sealer<W: Write> {
    log: LogWriter<age::stream::StreamWriter<Hashing<W>>>,
    policy: OrgPolicy,
}

impl<W: Write> Sealer<W> {
    /// Starts an artifact on `out`, encrypted to the policy's recipients.
    pub fn new(mut out: W, policy: &OrgPolicy) -> Result<Self> {
        let recipients = recipients(policy)?;
        out.write_all(&ARTIFACT_MAGIC)
            .map_err(io_error("write the audit artifact"))?;
        let hashing = Hashing {
            inner: out,
            hash: Sha256::new(),
            len: 0,
        };
        let encryptor =
            age::Encryptor::with_recipients(recipients.iter().map(|r| r as &dyn age::Recipient))
                .map_err(|e| Error::malformed(format!("audit recipients: {e}")))?;
        let stream = encryptor
            .wrap_output(hashing)
            .map_err(io_error("write the audit artifact"))?;
        let log = LogWriter::new(stream).map_err(io_error("write the audit artifact"))?;
        Ok(Sealer {
            log,
            policy: policy.clone(),
        })
    }

    /// Appends the stored bytes of the next event (seq 1 first).
    pub fn event(&mut self, bytes: &[u8]) -> Result<()> {
        self.log
            .event(bytes)
            .map_err(io_error("write the audit artifact"))
    }

    /// How many events were appended.
    pub fn events(&self) -> u64 {
        self.log.events()
    }

    /// Closes the log with the final snapshot's stored bytes, which must verify under `key`
    /// and be at the seq of the last event appended, and appends the manifest signed with
    /// `key` at `sealed_at`. Returns `out` and the manifest. `SNAPSHOT_INVALID` for a
    /// snapshot that does not verify, `AUDIT_INVALID` (check `chain`) when the events
    /// appended are not as many as its seq, `STORAGE` if `out` fails.
    pub fn finish(
        self,
        snapshot_bytes: &[u8],
        sealed_at: u64,
        key: &SecretKey,
    ) -> Result<(W, Manifest)> {
        let group = Snapshot::from_cbor(snapshot_bytes)?.group;
        let snapshot = Snapshot::verify_stored(snapshot_bytes, &key.public(), &group)?;
        if self.log.events() != snapshot.seq {
            return Err(invalid(
                "chain",
                format!(
                    "sealing gave {} events, but the final snapshot is at seq {}",
                    self.log.events(),
                    snapshot.seq
                ),
            ));
        }
        let hashing = self
            .log
            .finish(snapshot_bytes)
            .and_then(|s| s.finish())
            .map_err(io_error("write the audit artifact"))?;
        let ciphertext = Hash(hashing.hash.finalize().into());
        let sealed = Sealed {
            snapshot: &snapshot,
            snapshot_hash: Hash::of(snapshot_bytes),
            policy: &self.policy,
            sealed_at,
        };
        let manifest = Manifest::sign(&sealed, ciphertext, hashing.len, key)?;
        let mut out = hashing.inner;
        out.write_all(&manifest_trailer(&manifest)?)
            .map_err(io_error("write the audit artifact"))?;
        Ok((out, manifest))
    }
}

/// [`Sealer`] in one call: `events` is called with a sink that takes each event's stored
/// bytes in seq order.
pub fn seal<W: Write>(
    out: W,
    policy: &OrgPolicy,
    snapshot_bytes: &[u8],
    sealed_at: u64,
    key: &SecretKey,
    events: impl FnOnce(&mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()>,
) -> Result<(W, Manifest)> {
    let mut sealer = Sealer::new(out, policy)?;
    events(&mut |bytes: &[u8]| sealer.event(bytes))?;
    sealer.finish(snapshot_bytes, sealed_at, key)
}

/// [`seal`] into memory, from events already in memory.
pub fn seal_to_vec<B: AsRef<[u8]>>(
    policy: &OrgPolicy,
    events: &[B],
    snapshot_bytes: &[u8],
    sealed_at: u64,
    key: &SecretKey,
) -> Result<(Vec<u8>, Manifest)> {
    seal(Vec::new(), policy, snapshot_bytes, sealed_at, key, |sink| {
        events.iter().try_for_each(|e| sink(e.as_ref()))
    })
}

/// Opens an artifact: checks its manifest and ciphertext hash ([`split_artifact`], under
/// `trusted` when given), decrypts with `identities`, and verifies the log against the
/// manifest ([`audit::read_log`]). `AUDIT_INVALID` naming the `check`: `identity` when no
/// identity given opens it, `decrypt` when the ciphertext does not decrypt, and the checks
/// of [`split_artifact`] and [`audit::read_log`].
pub fn open(
    artifact: &[u8],
    identities: &[x25519::Identity],
    trusted: Option<&PublicKey>,
) -> Result<AuditLog> {
    let (manifest, ciphertext) = split_artifact(artifact, trusted)?;
    let plain = decrypt(ciphertext, identities)?;
    audit::read_log(&plain, &manifest)
}

/// Decrypts an age ciphertext with any of `identities`.
pub fn decrypt(ciphertext: &[u8], identities: &[x25519::Identity]) -> Result<Vec<u8>> {
    let decryptor = age::Decryptor::new(ciphertext).map_err(|e| {
        invalid(
            "decrypt",
            format!("audit artifact rejected: its ciphertext is not an age file: {e}"),
        )
    })?;
    let mut reader = decryptor
        .decrypt(identities.iter().map(|i| i as &dyn age::Identity))
        .map_err(|e| match e {
            age::DecryptError::NoMatchingKeys => invalid(
                "identity",
                "audit artifact rejected: none of the identities given is a recipient of it",
            ),
            e => invalid(
                "decrypt",
                format!("audit artifact rejected: it does not decrypt: {e}"),
            ),
        })?;
    let mut plain = Vec::new();
    reader.read_to_end(&mut plain).map_err(|e| {
        invalid(
            "decrypt",
            format!("audit artifact rejected: its ciphertext does not decrypt: {e}"),
        )
    })?;
    Ok(plain)
}
