//! Opening a group from its directory: the read-only replay ([`super::replay`]), then the
//! repairs a writer makes: trimming torn tails, removing `.tmp` files, redoing interrupted
//! erasures and the final snapshot of an archive.

use super::*;

impl GroupLog {
    /// Reopens a group from its directory: the read-only half ([`GroupFiles::list`],
    /// [`read_overlay`], the newest snapshot that verifies, [`replay`]) and then, unless the
    /// store is read-only, the repairs (trimming torn tails, redoing interrupted erasures and
    /// the final snapshot of an archive). `mwp fsck` runs the same read-only half.
    pub(crate) fn open(
        ctx: Arc<Ctx>,
        dir: PathBuf,
        id: Id,
        report: &mut OpenReport,
    ) -> Result<Arc<GroupLog>> {
        let be = ctx.backend.clone();
        let files = GroupFiles::list(&*be, &dir)?;
        // A `.tmp` file was never renamed into place: it holds nothing acknowledged.
        if !ctx.read_only && !files.temporary.is_empty() {
            for n in &files.temporary {
                be.remove(&dir.join(n))
                    .map_err(io_err(format!("remove {n}")))?;
            }
            be.sync_dir(&dir)
                .map_err(io_err(format!("sync {}", dir.display())))?;
        }
        files.require_segments(&dir, &id)?;
        let key = ctx.authority.public_key();

        // A sealed group whose plain history was removed starts at its final snapshot
        // (SPEC §6a): segments before the empty one after it are leftovers of an interrupted
        // removal, which a writer finishes below.
        let record = read_seal_record(&*be, &dir, &id, Some(&key), &mut report.skipped_snapshots)?;
        let plain_from = plain_from(record.as_ref(), &files.segments);
        let segments: Vec<u64> = files
            .segments
            .iter()
            .copied()
            .filter(|s| *s >= plain_from)
            .collect();

        // The overlay first: the segment scan needs to know which records are erased.
        let (overlay, torn) = read_overlay(&*be, &dir, &id, &files)?;
        if let (Some(torn), Some(file), false) = (torn, &overlay.file, ctx.read_only) {
            trim(&**file, Path::new(&torn.path), torn.end)?;
            report.trimmed.push((torn.path, torn.end, torn.bytes));
        }

        // The newest snapshot that verifies is the base; older ones are fallbacks. It is
        // loaded while the log is read (`Base::Load`).
        let mut snap_info = None;
        let mut load = || {
            for seq in files.snapshots.iter().rev() {
                let path = dir.join(snapshot_name(*seq));
                match load_snapshot(&*be, &path, *seq, &id, Some(&key)) {
                    Ok(s) => {
                        snap_info = Some(SnapInfo {
                            seq: s.seq,
                            state_hash: s.state_hash,
                        });
                        return Some(s);
                    }
                    Err(e) => report
                        .skipped_snapshots
                        .push((path.display().to_string(), e.message)),
                }
            }
            None
        };
        let base = match files.snapshots.last() {
            Some(&seq) => Base::Load {
                seq,
                load: &mut load,
            },
            None => Base::Loaded(None),
        };
        let (state, scanned) = replay(
            &be,
            &dir,
            &id,
            &segments,
            &overlay,
            base,
            plain_from,
            !ctx.read_only,
            &mut |_, _| Ok(()),
        )?;
        let base_seq = snap_info.as_ref().map_or(0, |s| s.seq);
        let Scanned {
            index,
            reserved,
            pending_zero,
            next_seq,
            torn,
        } = scanned;
        if !ctx.read_only {
            report
                .trimmed
                .extend(torn.into_iter().map(|t| (t.path, t.end, t.bytes)));
        }
        let head = next_seq - 1;
        if head < base_seq {
            return Err(snapshot_ahead(&id, head, base_seq));
        }
        let Some(state) = state else {
            return Err(Error::corrupt(format!(
                "group {id}: the log holds no event"
            )));
        };
        if plain_from > 1 && !(state.archived && state.seq + 1 == plain_from) {
            // The seal record says the history before its final snapshot was removed; the
            // log must then be that archived group's and end there.
            return Err(Error::corrupt(format!(
                "group {id}: its seal names seq {}, but the log is {} at seq {}",
                plain_from - 1,
                if state.archived { "archived" } else { "open" },
                state.seq
            )));
        }
        // Before anything is signed for the group (a repair below, a tick, a snapshot, a head).
        let key_path = dir
            .parent()
            .and_then(Path::parent)
            .map_or_else(|| PathBuf::from(KEY_NAME), |root| root.join(KEY_NAME));
        check_group_key(&key_path, &state, &key)?;
        let last = index.last().ok_or_else(|| Error::corrupt("no segment"))?;
        let writer = Writer {
            file: last.file.clone(),
            name: last.name.clone(),
            end: last.end,
            alloc: last.end + reserved,
            last_seq: head,
            last_id: state.head,
        };
        let archived = state.archived;
        let redacted: Vec<u64> = state.redacted.iter().copied().collect();
        let driver = Authority::restore(ctx.authority.clone(), Some(state));
        let group = Arc::new(GroupLog {
            id,
            dir,
            ctx,
            core: Mutex::new(Core {
                driver,
                pending: Vec::new(),
            }),
            signers: Default::default(),
            durable: AtomicU64::new(head),
            sync: Mutex::new(SyncState {
                flushing: false,
                waiters: Default::default(),
                tasks: Default::default(),
            }),
            io: Mutex::new(writer),
            index: RwLock::new(index),
            overlay: RwLock::new(overlay),
            erasing: Mutex::new(()),
            snaps: Mutex::new(snap_info),
            sealed: Mutex::new(record.as_ref().map(|r| seal::Sealed {
                seq: r.seq(),
                plain_removed: plain_from > 1,
            })),
        });
        if group.ctx.read_only {
            // Repairs are the writer's: a read-only open changes nothing.
            return Ok(group);
        }
        // Finish what a crash interrupted: erasures, then the final snapshot of an archive,
        // then its seal and the removal of its plain history.
        let redacted = if plain_from > 1 { Vec::new() } else { redacted };
        for seq in redacted.into_iter().chain(pending_zero) {
            let known = read(&group.overlay).entries.contains_key(&seq);
            if !known || group.needs_zeroing(seq)? {
                group.erase(seq)?;
                report
                    .repaired
                    .push(format!("erased the values of seq {seq}"));
            }
        }
        if archived && lock(&group.snaps).as_ref().map(|s| s.seq) != Some(head) {
            let state = lock(&group.core).state().clone();
            group.write_snapshot(&state)?;
            report
                .repaired
                .push(format!("wrote the final snapshot at seq {head}"));
        }
        let due = lock(&group.core).driver.seal_due().cloned();
        // A removal the manifest asked for that has not begun (the history is whole): it
        // begins only once the artifact verifies whole, ciphertext included.
        let pending = plain_from == 1
            && matches!(&record, Some(SealRecord::Sealed(m)) if m.remove_plain && m.seq == head);
        let leftovers = plain_from > 1
            && (files.segments.iter().any(|s| *s < plain_from)
                || files.overlay
                || files.snapshots.iter().any(|s| *s < head));
        if record.is_none() || pending {
            match (due, &record) {
                // Seals, or keeps an artifact that verifies whole (sealing again a damaged
                // one), then removes the plain history if its manifest says so.
                (Some(policy), _) => {
                    if let Some(did) = group.seal(&policy, now_ms())? {
                        report.repaired.push(did);
                    }
                    let removed = lock(&group.sealed).is_some_and(|s| s.plain_removed);
                    if pending && removed {
                        report.repaired.push(format!(
                            "removed the plain history below the sealed seq {head}"
                        ));
                    }
                }
                // No policy any more: the signed manifest still asks for the removal.
                (None, Some(SealRecord::Sealed(m))) => {
                    let path = group.dir.join(mwp_core::audit::ARTIFACT_NAME);
                    match verify_artifact_file(&*be, &path, Some(&key)) {
                        Ok(v) if v == **m => {
                            group.remove_plain(head)?;
                            report.repaired.push(format!(
                                "removed the plain history below the sealed seq {head}"
                            ));
                        }
                        Ok(_) => {}
                        Err(e) => report
                            .skipped_snapshots
                            .push((path.display().to_string(), e.message)),
                    }
                }
                _ => {}
            }
        } else if leftovers {
            // The removal began (the empty segment after the final snapshot is there).
            group.remove_plain(head)?;
            report.repaired.push(format!(
                "removed the plain history below the sealed seq {head}"
            ));
        }
        Ok(group)
    }
}

/// The store's key (`key`, read from `key_path`) must be the one the group of `state` names
/// as its `authority_key`, unless the group is archived: the core's rule,
/// [`authority::check_store_key`], naming the key file by its path. Asked of a state
/// replayed from the group's own directory (its genesis event, or its snapshot, checked to
/// belong to the group).
pub(crate) fn check_group_key(key_path: &Path, state: &GroupState, key: &PublicKey) -> Result<()> {
    authority::check_store_key(state, key, &key_path.display().to_string())
}

pub(super) fn trim(file: &dyn StorageFile, path: &Path, end: u64) -> Result<()> {
    file.set_len(end)
        .map_err(io_err(format!("trim {}", path.display())))?;
    file.sync_data()
        .map_err(io_err(format!("sync {}", path.display())))
}

/// Writes a whole new file durably: `<name>.tmp`, sync, rename to `name`, sync the directory.
pub(crate) fn write_new_file(
    ctx: &Ctx,
    dir: &Path,
    name: &str,
    data: &[u8],
) -> Result<Arc<dyn StorageFile>> {
    write_new_file_parts(ctx, dir, name, &[data])
}

/// [`write_new_file`] of the bytes of `parts` one after the other, each written from where
/// it lies (a snapshot's header, then its payload, without copying the payload behind it).
pub(crate) fn write_new_file_parts(
    ctx: &Ctx,
    dir: &Path,
    name: &str,
    parts: &[&[u8]],
) -> Result<Arc<dyn StorageFile>> {
    let be = &ctx.backend;
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let file = be
        .create(&tmp, 0o600)
        .map_err(io_err(format!("create {}", tmp.display())))?;
    let mut at = 0u64;
    for part in parts {
        file.write_at(at, part)
            .map_err(io_err(format!("write {}", tmp.display())))?;
        at += part.len() as u64;
    }
    file.sync_data()
        .map_err(io_err(format!("sync {}", tmp.display())))?;
    be.rename(&tmp, &path)
        .map_err(io_err(format!("rename {}", tmp.display())))?;
    be.sync_dir(dir)
        .map_err(io_err(format!("sync {}", dir.display())))?;
    Ok(file)
}

pub(super) fn check_header(
    file: &dyn StorageFile,
    name: &str,
    magic: [u8; 8],
    id: &Id,
    first_seq: Option<u64>,
) -> Result<FileHeader> {
    let mut b = [0u8; FILE_HEADER_LEN];
    // A file shorter than its header reads short: the core's check reports it.
    let got = if file.read_at(0, &mut b).is_ok() {
        &b[..]
    } else {
        &[][..]
    };
    FileHeader::check(got, magic, id, first_seq).map_err(|d| d.into_error(name))
}

pub(crate) fn read_snapshot_file(be: &dyn Backend, path: &Path) -> Result<Vec<u8>> {
    let file = open_file(be, path)?;
    let len = file
        .len()
        .map_err(io_err(format!("size of {}", path.display())))?;
    // A size this process cannot hold is an error, not an abort.
    let len = usize::try_from(len).map_err(|_| {
        Error::new(
            Code::Storage,
            format!(
                "{} is {len} bytes, more than this process can hold",
                path.display()
            ),
        )
    })?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(len).map_err(|e| {
        Error::new(
            Code::Storage,
            format!(
                "{} is {len} bytes, more than this process can hold: {e}",
                path.display()
            ),
        )
    })?;
    buf.resize(len, 0);
    file.read_at(0, &mut buf)
        .map_err(io_err(format!("read {}", path.display())))?;
    Ok(buf)
}

/// The time a seal that an open finishes is made at.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
