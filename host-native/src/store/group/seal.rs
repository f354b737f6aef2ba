//! Archival under the Organization's policy (SPEC §6a, docs/format.md "Sealed audit log"):
//! sealing an archived group's audit log into `audit.mwpa`, removing the plain history when
//! the manifest says so, and what an open reads back of both.
//!
//! Order, each step durable before the next: the archive event, the final snapshot, the
//! artifact (`audit.mwpa.tmp`, write, sync, rename, directory sync), then — only with
//! `remove_plain` — an empty segment for seq `final + 1` (the record that removal began) and
//! the removal of every older segment, the overlay and every older snapshot. A crash leaves
//! the plain history, or a durable artifact, or both; an open finishes what remains.

use std::io::Write;

use mwp_core::audit::{
    read_trailer, Manifest, OrgPolicy, Tombstone, ARTIFACT_NAME, MAX_MANIFEST_LEN, TOMBSTONE_NAME,
};

use super::*;

/// What a group directory holds of its archival: the artifact's manifest, or the tombstone
/// an expired artifact left.
#[derive(Debug, Clone)]
pub(crate) enum SealRecord {
    /// `audit.mwpa`, whose manifest verifies under the store's key.
    Sealed(Box<Manifest>),
    /// `audit.tombstone`: the artifact was deleted past its retention.
    Expired(Box<Tombstone>),
}

impl SealRecord {
    /// The final seq the seal covers.
    pub(crate) fn seq(&self) -> u64 {
        match self {
            SealRecord::Sealed(m) => m.seq,
            SealRecord::Expired(t) => t.seq,
        }
    }
}

/// A [`Write`] over a storage file, from offset 0.
struct FileWriter {
    file: Arc<dyn StorageFile>,
    at: u64,
}

impl Write for FileWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write_at(self.at, buf)?;
        self.at += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Opens a stored file and gives its length.
fn open_sized(be: &dyn Backend, path: &Path) -> Result<(Arc<dyn StorageFile>, u64)> {
    let file = open_file(be, path)?;
    let len = file
        .len()
        .map_err(io_err(format!("size of {}", path.display())))?;
    Ok((file, len))
}

/// Reads the seal record of a group directory: the artifact's manifest (its trailer only;
/// `mwp fsck` and `mwp audit open` check the ciphertext), else the tombstone. One that does
/// not verify under `key` is reported in `skipped` and not used.
pub(crate) fn read_seal_record(
    be: &dyn Backend,
    dir: &Path,
    group: &Id,
    key: Option<&PublicKey>,
    skipped: &mut Vec<(String, String)>,
) -> Result<Option<SealRecord>> {
    // A record of another group (a file copied or moved here) is not this group's seal.
    let of_group = |g: &Id| {
        (g == group)
            .then_some(())
            .ok_or_else(|| format!("it seals group {g}, not {group}"))
    };
    let artifact = dir.join(ARTIFACT_NAME);
    if be.is_taken(&artifact) {
        let (file, len) = open_sized(be, &artifact)?;
        match read_manifest(&*file, len, &artifact, key)? {
            Ok((m, _)) => match of_group(&m.group) {
                Ok(()) => return Ok(Some(SealRecord::Sealed(Box::new(m)))),
                Err(why) => skipped.push((artifact.display().to_string(), why)),
            },
            Err(e) => skipped.push((artifact.display().to_string(), e.message)),
        }
    }
    let tombstone = dir.join(TOMBSTONE_NAME);
    if be.is_taken(&tombstone) {
        let (file, len) = open_sized(be, &tombstone)?;
        if len > u64::from(MAX_MANIFEST_LEN) {
            skipped.push((
                tombstone.display().to_string(),
                format!("{len} bytes, more than a tombstone holds"),
            ));
            return Ok(None);
        }
        let mut bytes = vec![0u8; len as usize];
        file.read_at(0, &mut bytes)
            .map_err(io_err(format!("read {}", tombstone.display())))?;
        match Tombstone::from_cbor(&bytes).and_then(|t| t.verify(key).map(|()| t)) {
            Ok(t) => match of_group(&t.group) {
                Ok(()) => return Ok(Some(SealRecord::Expired(Box::new(t)))),
                Err(why) => skipped.push((tombstone.display().to_string(), why)),
            },
            Err(e) => skipped.push((tombstone.display().to_string(), e.message)),
        }
    }
    Ok(None)
}

/// The manifest at the end of a stored artifact (its trailer only, [`read_trailer`]) and the
/// trailer's length; `room`: how many of the file's last bytes may hold the trailer (its
/// length, or less by the leading magic). The outer `Err` is a read that failed, the inner
/// one a manifest that does not check out.
fn read_manifest(
    file: &dyn StorageFile,
    room: u64,
    path: &Path,
    key: Option<&PublicKey>,
) -> Result<Result<(Manifest, usize)>> {
    let tail_len = room.min(u64::from(MAX_MANIFEST_LEN) + 12);
    let mut tail = vec![0u8; tail_len as usize];
    let start = file
        .len()
        .map_err(io_err(format!("size of {}", path.display())))?
        .saturating_sub(tail_len);
    file.read_at(start, &mut tail)
        .map_err(io_err(format!("read {}", path.display())))?;
    Ok(read_trailer(&tail, key))
}

/// Checks a stored artifact whole, reading it in pieces (never held whole): the magic, the
/// manifest ([`read_trailer`]) under `key`, and the ciphertext's length and SHA-256 against
/// the manifest. What `mwp fsck` runs; `AUDIT_INVALID` naming the check otherwise.
pub(crate) fn verify_artifact_file(
    be: &dyn Backend,
    path: &Path,
    key: Option<&PublicKey>,
) -> Result<Manifest> {
    use sha2::Digest;
    let (file, len) = open_sized(be, path)?;
    let mut magic = [0u8; 8];
    if len < 20 || file.read_at(0, &mut magic).is_err() || magic != mwp_core::audit::ARTIFACT_MAGIC
    {
        return Err(Error::new(
            Code::AuditInvalid,
            "audit artifact rejected: it does not start with MWPAUDT1",
        )
        .with("check", "layout"));
    }
    let (manifest, trailer) = read_manifest(&*file, len - 8, path, key)??;
    let cipher_len = len - 8 - trailer as u64;
    let mut hash = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 8u64;
    while at < 8 + cipher_len {
        let n = (8 + cipher_len - at).min(buf.len() as u64) as usize;
        file.read_at(at, &mut buf[..n])
            .map_err(io_err(format!("read {}", path.display())))?;
        hash.update(&buf[..n]);
        at += n as u64;
    }
    manifest.check_ciphertext(cipher_len, Hash(hash.finalize().into()))?;
    Ok(manifest)
}

/// The first seq the plain log must start at ([`mwp_core::audit::plain_log_start`]).
pub(crate) fn plain_from(record: Option<&SealRecord>, segments: &[u64]) -> u64 {
    let sealed = record.map(|r| match r {
        SealRecord::Sealed(m) => (m.seq, m.remove_plain),
        SealRecord::Expired(t) => (t.seq, true),
    });
    mwp_core::audit::plain_log_start(sealed, segments)
}

impl GroupLog {
    /// This group's seal record ([`read_seal_record`] under `key`).
    fn seal_record(
        &self,
        key: &PublicKey,
        skipped: &mut Vec<(String, String)>,
    ) -> Result<Option<SealRecord>> {
        read_seal_record(&*self.ctx.backend, &self.dir, &self.id, Some(key), skipped)
    }

    /// Seals the audit log under `policy` at `now_ms` unless a sealed artifact of this final
    /// seq is already there (idempotent), then removes the plain history if the manifest
    /// says so. The archive event and the final snapshot must be durable.
    pub(crate) fn seal(&self, policy: &OrgPolicy, now_ms: u64) -> Result<Option<String>> {
        let head = self.durable();
        let mut skipped = Vec::new();
        let key = self.ctx.authority.public_key();
        let record = self.seal_record(&key, &mut skipped)?;
        // An artifact is kept only if it verifies whole (its ciphertext's hash included);
        // a damaged one is sealed again while the plain history is whole.
        let whole = |m: &Manifest| {
            m.seq == head
                && verify_artifact_file(&*self.ctx.backend, &self.path(ARTIFACT_NAME), Some(&key))
                    .is_ok_and(|v| v == *m)
        };
        let (manifest, did) = match record {
            Some(SealRecord::Sealed(m)) if whole(&m) => (*m, None),
            // Expired already: nothing is sealed again.
            Some(SealRecord::Expired(t)) if t.seq == head => return Ok(None),
            _ => {
                let m = self.write_artifact(policy, head, now_ms)?;
                (m, Some(format!("sealed the audit log at seq {head}")))
            }
        };
        if manifest.remove_plain {
            self.remove_plain(head)?;
        }
        Ok(did)
    }

    /// Writes `audit.mwpa` durably: the events `1..=head` as stored and the final snapshot,
    /// sealed to the policy's recipients.
    fn write_artifact(&self, policy: &OrgPolicy, head: u64, now_ms: u64) -> Result<Manifest> {
        self.ctx.check_writer()?;
        let be = &self.ctx.backend;
        let snapshot = self.latest_snapshot()?;
        let tmp = self.path(&format!("{ARTIFACT_NAME}.tmp"));
        let path = self.path(ARTIFACT_NAME);
        let file = be
            .create(&tmp, 0o600)
            .map_err(io_err(format!("create {}", tmp.display())))?;
        let out = std::io::BufWriter::with_capacity(
            1 << 16,
            FileWriter {
                file: file.clone(),
                at: 0,
            },
        );
        let mut sealer = mwp_audit::Sealer::new(out, policy)?;
        let mut after = 0;
        while after < head {
            let events = self.read_events(after, 4096)?;
            let Some(last) = events.last() else {
                return Err(Error::corrupt(format!(
                    "group {}: seq {} is not in the log",
                    self.id,
                    after + 1
                )));
            };
            after = last.seq;
            for e in &events {
                sealer.event(&e.to_cbor()?)?;
            }
        }
        let (out, manifest) = sealer.finish(&snapshot, now_ms, self.ctx.authority.secret_key())?;
        out.into_inner()
            .map_err(|e| storage(format!("write {}", tmp.display()), e.into_error()))?;
        file.sync_data()
            .map_err(io_err(format!("sync {}", tmp.display())))?;
        be.rename(&tmp, &path)
            .map_err(io_err(format!("rename {}", tmp.display())))?;
        be.sync_dir(&self.dir)
            .map_err(io_err(format!("sync {}", self.dir.display())))?;
        Ok(manifest)
    }

    /// Removes the plain history below the final seq `head` (the artifact is durable): an
    /// empty segment `head + 1` first, then every older segment, the overlay and every
    /// snapshot but the final one. Idempotent: an open finishes an interrupted one.
    pub(crate) fn remove_plain(&self, head: u64) -> Result<()> {
        self.ctx.check_writer()?;
        let be = self.ctx.backend.clone();
        {
            let mut w = lock(&self.io);
            if w.last_seq != head {
                return Err(Error::corrupt(format!(
                    "group {}: the log ends at seq {}, the seal at {head}",
                    self.id, w.last_seq
                )));
            }
            let has_empty = read(&self.index).iter().any(|s| s.first_seq == head + 1);
            if !has_empty {
                self.roll(&mut w, head + 1)?;
            }
        }
        write(&self.index).retain(|s| s.first_seq > head);
        *write(&self.overlay) = Overlay::default();
        let names = be
            .list(&self.dir)
            .map_err(io_err(format!("list {}", self.dir.display())))?;
        let mut removed = false;
        for n in names {
            let old_segment = parse_numbered(&n, "seg").is_some_and(|s| s <= head);
            let old_snapshot = parse_numbered(&n, "snap").is_some_and(|s| s < head);
            if old_segment || old_snapshot || n == OVERLAY_NAME {
                let p = self.path(&n);
                self.fail_sticky(
                    be.remove(&p)
                        .map_err(io_err(format!("remove {}", p.display()))),
                )?;
                removed = true;
            }
        }
        if removed {
            self.fail_sticky(
                be.sync_dir(&self.dir)
                    .map_err(io_err(format!("sync {}", self.dir.display()))),
            )?;
        }
        *lock(&self.sealed) = Some(Sealed {
            seq: head,
            plain_removed: true,
        });
        Ok(())
    }

    /// Deletes the artifact past its retention at `now_ms`, leaving a signed tombstone
    /// (`dry_run`: only says whether it would). `None` when there is no artifact or it is
    /// still retained.
    pub(crate) fn expire_audit(&self, now_ms: u64, dry_run: bool) -> Result<Option<Manifest>> {
        let key = self.ctx.authority.public_key();
        let mut skipped = Vec::new();
        let Some(SealRecord::Sealed(m)) = self.seal_record(&key, &mut skipped)? else {
            return Ok(None);
        };
        if !m.expired(now_ms) {
            return Ok(None);
        }
        if !dry_run {
            self.ctx.check_writer()?;
            let t = Tombstone::sign(&m, now_ms, self.ctx.authority.secret_key())?;
            write_new_file(&self.ctx, &self.dir, TOMBSTONE_NAME, &t.to_cbor()?)?;
            let p = self.path(ARTIFACT_NAME);
            let be = &self.ctx.backend;
            be.remove(&p)
                .map_err(io_err(format!("remove {}", p.display())))?;
            be.sync_dir(&self.dir)
                .map_err(io_err(format!("sync {}", self.dir.display())))?;
        }
        Ok(Some(*m))
    }

    /// The manifest of the group's sealed audit log, if it has one that verifies (the
    /// artifact's trailer only).
    pub(crate) fn audit_manifest(&self) -> Result<Option<Manifest>> {
        let key = self.ctx.authority.public_key();
        let mut skipped = Vec::new();
        let record = self.seal_record(&key, &mut skipped)?;
        if let Some((file, message)) = skipped.into_iter().next() {
            return Err(Error::new(Code::AuditInvalid, format!("{file}: {message}")));
        }
        Ok(match record {
            Some(SealRecord::Sealed(m)) => Some(*m),
            _ => None,
        })
    }

    /// The artifact's stored bytes, if the group has one.
    pub(crate) fn audit_artifact(&self) -> Result<Option<Vec<u8>>> {
        let p = self.path(ARTIFACT_NAME);
        if !self.ctx.backend.is_taken(&p) {
            return Ok(None);
        }
        read_snapshot_file(&*self.ctx.backend, &p).map(Some)
    }
}

/// A group's archival as its reads need it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sealed {
    /// The final seq.
    pub(crate) seq: u64,
    /// Whether the plain history below it is gone.
    pub(crate) plain_removed: bool,
}
