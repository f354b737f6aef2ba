//! Signed snapshot files: writing the one the driver makes due, reading and verifying the
//! latest, and pruning old ones.

use super::*;

use mwp_core::log_format::{crc32c_append, SnapshotHeader, SNAPSHOT_HEADER_LEN};

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
        self.snapshot_payload(info.seq)
    }

    /// The payload of the snapshot file at `seq`, its frame checked (its header, checksum,
    /// and the seq its name gives): `SNAPSHOT_INVALID` naming the file by its path otherwise.
    /// Its signature and state are the caller's to check.
    ///
    /// The header is checked before the payload is read, and a payload over
    /// `export::MAX_SNAPSHOT_FILE` (the most any reader of snapshots takes) is refused unread:
    /// a file whose size was made up (a sparse file of many GiB) is never held in memory.
    fn snapshot_payload(&self, seq: u64) -> Result<Vec<u8>> {
        let path = self.path(&snapshot_name(seq));
        let invalid =
            |m: String| Error::new(Code::SnapshotInvalid, format!("{}: {m}", path.display()));
        let be = &*self.ctx.backend;
        open_checked(be, &path)?;
        let bytes = read_snapshot_file(be, &path)?;
        let (header_seq, payload) = format::decode_snapshot_file(&bytes).map_err(invalid)?;
        if header_seq != seq {
            return Err(invalid(format!(
                "its header says seq {header_seq}, its name seq {seq}"
            )));
        }
        Ok(payload.to_vec())
    }

    /// The payload of the newest snapshot file on disk, as it is there (`None` when the group
    /// has none): nothing is signed in memory and no older file stands in for a damaged one
    /// ([`GroupLog::snapshot_payload`] checks its frame). A file
    /// that a writer pruned between the listing and the read is looked up again (twice). A
    /// file past the last event this open holds is one a live writer wrote since (the events
    /// it covers cannot be read here), so the newest at or below that event is taken.
    pub(crate) fn stored_snapshot(&self) -> Result<Option<Vec<u8>>> {
        let be = &*self.ctx.backend;
        let head = self.durable();
        let mut tries = 0;
        loop {
            let files = GroupFiles::list(be, &self.dir)?;
            let Some(seq) = files.snapshots.iter().copied().rev().find(|s| *s <= head) else {
                return Ok(None);
            };
            match self.snapshot_payload(seq) {
                Err(_) if tries < 2 && !be.is_file(&self.path(&snapshot_name(seq))) => {
                    tries += 1;
                }
                read => return read.map(Some),
            }
        }
    }

    /// Writes a signed snapshot of `state` (whose events must be durable) and prunes old ones.
    pub(crate) fn write_snapshot(&self, state: &GroupState) -> Result<SnapInfo> {
        let mut latest = lock(&self.snaps);
        if let Some(l) = latest.as_ref().filter(|l| l.seq >= state.seq) {
            return Ok(l.clone());
        }
        self.ctx.check_writer()?;
        let (payload, state_hash) = Snapshot::build_stored(state, self.ctx.authority.secret_key())?;
        let header = format::snapshot_file_header(state.seq, &payload);
        write_new_file_parts(
            &self.ctx,
            &self.dir,
            &snapshot_name(state.seq),
            &[&header, &payload],
        )?;
        drop(payload);
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

/// A snapshot file opened, its header read and checked against the file's size.
struct OpenedSnapshot {
    file: Arc<dyn crate::store::backend::StorageFile>,
    file_len: u64,
    head: [u8; SNAPSHOT_HEADER_LEN],
    header: SnapshotHeader,
}

/// Opens the snapshot file at `path` and checks its header before any of its payload is read:
/// `SNAPSHOT_INVALID` naming the file for a header that does not hold or a payload over
/// `export::MAX_SNAPSHOT_FILE` (the most any reader of snapshots takes), so that a file whose
/// size was made up (a sparse file of many GiB) is never read through or held in memory.
fn open_checked(be: &dyn Backend, path: &Path) -> Result<OpenedSnapshot> {
    let invalid = |m: String| Error::new(Code::SnapshotInvalid, format!("{}: {m}", path.display()));
    let file = open_file(be, path)?;
    let file_len = file
        .len()
        .map_err(io_err(format!("size of {}", path.display())))?;
    let mut head = [0u8; SNAPSHOT_HEADER_LEN];
    let head_len = head
        .len()
        .min(usize::try_from(file_len).unwrap_or(usize::MAX));
    file.read_at(0, &mut head[..head_len])
        .map_err(io_err(format!("read {}", path.display())))?;
    let header = SnapshotHeader::check(&head[..head_len], file_len).map_err(invalid)?;
    let max = mwp_core::export::MAX_SNAPSHOT_FILE;
    if header.len > max {
        return Err(invalid(format!(
            "its payload is {} bytes, more than the {max} a snapshot may hold",
            header.len
        )));
    }
    Ok(OpenedSnapshot {
        file,
        file_len,
        head,
        header,
    })
}

/// Reads and verifies the snapshot file at `path`: its frame, its name's seq, and its
/// signature under `key` (the authority's), bound to `group`. Without a key (its file is
/// damaged, which `mwp fsck` reports) the signature is checked against the snapshot's own
/// signer, which still shows the file is whole.
///
/// The file is read in pieces ([`Snapshot::verify_stored_from`]): the state is decoded and
/// hashed as the bytes pass, and the frame's checksum is computed on the way, so the file is
/// never held whole beside the state it decodes to. The outcome is the one of checking the
/// frame first and then the snapshot: a checksum mismatch is the error whenever there is one,
/// even if the payload failed to decode before the end (the rest is then read for the
/// checksum), and nothing decoded is returned before the checksum has matched.
pub(crate) fn load_snapshot(
    be: &dyn Backend,
    path: &Path,
    seq: u64,
    group: &Id,
    key: Option<&PublicKey>,
) -> Result<Snapshot> {
    let invalid = |m: String| Error::new(Code::SnapshotInvalid, format!("{}: {m}", path.display()));
    // Nor is a payload over what any reader takes read through (for its checksum).
    let OpenedSnapshot {
        file,
        file_len,
        head,
        header,
    } = open_checked(be, path)?;
    let mut reader = FileReader {
        file: &*file,
        offset: SNAPSHOT_HEADER_LEN as u64,
        end: file_len,
        crc: SnapshotHeader::crc_start(&head),
        failed: None,
    };
    let verified = Snapshot::verify_stored_from(&mut reader, header.len, key, group);
    if let Some(e) = reader.failed.take() {
        return Err(io_err(format!("read {}", path.display()))(e));
    }
    if verified.is_err() {
        // The checksum comes first: read what the decode left.
        let mut rest = vec![0u8; 1 << 20];
        while std::io::Read::read(&mut reader, &mut rest)
            .map_err(io_err(format!("read {}", path.display())))?
            > 0
        {}
    }
    if reader.crc != header.crc {
        return Err(invalid("checksum mismatch".into()));
    }
    let snap = verified?;
    if header.seq != seq || snap.seq != seq {
        return Err(invalid(format!(
            "holds seq {}, its name says {seq}",
            snap.seq
        )));
    }
    Ok(snap)
}

/// A snapshot file's payload as a reader: `read_at` in pieces from `offset` to `end`, folding
/// every byte into the frame's checksum, and keeping an IO error for the caller to report as
/// one (the decoder only sees that reading stopped).
struct FileReader<'a> {
    file: &'a dyn StorageFile,
    offset: u64,
    end: u64,
    crc: u32,
    failed: Option<std::io::Error>,
}

impl std::io::Read for FileReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min((self.end - self.offset) as usize);
        if n == 0 {
            return Ok(0);
        }
        if let Err(e) = self.file.read_at(self.offset, &mut buf[..n]) {
            let kind = e.kind();
            self.failed = Some(e);
            return Err(kind.into());
        }
        self.crc = crc32c_append(self.crc, &buf[..n]);
        self.offset += n as u64;
        Ok(n)
    }
}
