//! Signed snapshot files: writing the one the driver makes due, reading and verifying the
//! latest, and pruning old ones.

use super::*;

impl GroupLog {
    pub(super) fn latest_snapshot_info(&self) -> Result<SnapInfo> {
        if let Some(info) = lock(&self.snaps).clone() {
            return Ok(info);
        }
        let state = self.state()?;
        if self.ctx.read_only {
            let (_, state_hash) = Snapshot::build_stored(&state, self.ctx.authority.secret_key())?;
            return Ok(SnapInfo {
                seq: state.seq,
                state_hash,
            });
        }
        self.write_snapshot(&state)
    }

    /// Canonical CBOR of the latest snapshot, taking one if there is none (read-only: signed
    /// in memory, not written).
    pub(crate) fn latest_snapshot(&self) -> Result<Vec<u8>> {
        if self.ctx.read_only && lock(&self.snaps).is_none() {
            let state = self.state()?;
            return Ok(Snapshot::build_stored(&state, self.ctx.authority.secret_key())?.0);
        }
        let info = self.latest_snapshot_info()?;
        let bytes = read_snapshot_file(&*self.ctx.backend, &self.path(&snapshot_name(info.seq)))?;
        let (_, payload) = format::decode_snapshot_file(&bytes).map_err(|e| {
            Error::new(
                Code::SnapshotInvalid,
                format!("{}: {e}", snapshot_name(info.seq)),
            )
        })?;
        Ok(payload.to_vec())
    }

    /// Writes a signed snapshot of `state` (whose events must be durable) and prunes old ones.
    pub(crate) fn write_snapshot(&self, state: &GroupState) -> Result<SnapInfo> {
        let mut latest = lock(&self.snaps);
        if let Some(l) = latest.as_ref().filter(|l| l.seq >= state.seq) {
            return Ok(l.clone());
        }
        self.ctx.check_sticky()?;
        let (payload, state_hash) = Snapshot::build_stored(state, self.ctx.authority.secret_key())?;
        let data = format::encode_snapshot_file(state.seq, &payload);
        drop(payload);
        write_new_file(&self.ctx, &self.dir, &snapshot_name(state.seq), &data)?;
        let info = SnapInfo {
            seq: state.seq,
            state_hash,
        };
        *latest = Some(info.clone());
        self.prune_snapshots()?;
        Ok(info)
    }

    pub(super) fn prune_snapshots(&self) -> Result<()> {
        let be = &self.ctx.backend;
        let names = be
            .list(&self.dir)
            .map_err(io_err(format!("list {}", self.dir.display())))?;
        let snaps: Vec<&String> = names
            .iter()
            .filter(|n| parse_numbered(n, "snap").is_some())
            .collect();
        let keep = self.ctx.snapshots_kept.max(1);
        if snaps.len() <= keep {
            return Ok(());
        }
        for name in &snaps[..snaps.len() - keep] {
            let p = self.path(name);
            be.remove(&p)
                .map_err(io_err(format!("remove {}", p.display())))?;
        }
        be.sync_dir(&self.dir)
            .map_err(io_err(format!("sync {}", self.dir.display())))
    }
}

/// Reads and verifies the snapshot file at `path`: its frame, its name's seq, and its
/// signature under `key` (the authority's), bound to `group`. Without a key (its file is
/// damaged, which `mwp fsck` reports) the signature is checked against the snapshot's own
/// signer, which still shows the file is whole.
pub(crate) fn load_snapshot(
    be: &dyn Backend,
    path: &Path,
    seq: u64,
    group: &Id,
    key: Option<&PublicKey>,
) -> Result<Snapshot> {
    let bytes = read_snapshot_file(be, path)?;
    let invalid = |m: String| Error::new(Code::SnapshotInvalid, format!("{}: {m}", path.display()));
    let (frame_seq, payload) = format::decode_snapshot_file(&bytes).map_err(invalid)?;
    let snap = match key {
        Some(key) => Snapshot::verify_stored(payload, key, group)?,
        None => {
            let snap = Snapshot::from_cbor(payload)?;
            snap.verify(&snap.signer, &snap.org, group, 0)?;
            snap
        }
    };
    drop(bytes);
    if frame_seq != seq || snap.seq != seq {
        return Err(invalid(format!(
            "holds seq {}, its name says {seq}",
            snap.seq
        )));
    }
    Ok(snap)
}
