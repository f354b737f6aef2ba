//! Sealed audit logs on PostgreSQL (SPEC §6a, docs/postgres.md "Sealed audit logs").
//!
//! When a Group whose Organization has an archival policy is archived, its audit log (every
//! event's stored bytes from seq 1, then the final signed snapshot) is sealed with
//! [`mwp_audit::Sealer`] into one artifact, byte for byte what a file host writes as
//! `audit.mwpa`, and stored in table `mwp_audit` by its own committed transaction. If the
//! signed manifest says `remove_plain`, a following transaction deletes the Group's event rows
//! (its final snapshot, head and receipt rows stay) and marks the plain history removed.
//! Nothing is removed before the artifact row is committed and checked.

use std::io::Write;

use postgres::{GenericClient, Transaction};

use mwp_core::audit::{split_artifact, Manifest, OrgPolicy, Tombstone};
use mwp_core::snapshot::Snapshot;
use mwp_core::{Code, Error, Event, GroupState, Hash, Id, Result};

use super::authority::{
    column, column_of, corrupt, event_bytes, head_row_seq, page_rows, to_i64, to_u64,
    PostgresAuthority,
};
use super::storage;

/// The largest artifact stored: a PostgreSQL `bytea` value holds at most 1 GiB, and a little
/// room is left for the value's header. A larger one is refused with `STORAGE`, and the
/// Group's plain history stays.
pub const MAX_ARTIFACT_BYTES: usize = (1 << 30) - (1 << 20);

/// Event rows read at most per round trip while sealing (fewer when they hold more than a
/// page's bytes: `authority::page_rows`).
const SEAL_BATCH: i64 = 1000;

/// A Group's sealed audit log as `mwp_audit` holds it, without the artifact's bytes
/// ([`PostgresAuthority::audit_artifact`] reads those).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditStatus {
    /// The signed manifest, verified under the authority key.
    pub manifest: Manifest,
    /// Whether the Group's plain history (its event rows) was removed.
    pub plain_removed: bool,
    /// The signed tombstone, once the artifact expired and was deleted.
    pub tombstone: Option<Tombstone>,
}

/// An artifact [`PostgresAuthority::expire_audit`] found past its retention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredAudit {
    /// The Group.
    pub group: Id,
    /// The final seq the artifact holds.
    pub seq: u64,
    /// Until when it was to be retained (ms).
    pub retain_until: u64,
    /// Whether it was deleted (a tombstone left in its place); `false` in a dry run.
    pub deleted: bool,
}

/// The artifact being written, in memory, refused past `cap` bytes.
struct Capped {
    buf: Vec<u8>,
    cap: usize,
    group: Id,
}

impl Write for Capped {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.buf.len().saturating_add(bytes.len()) > self.cap {
            return Err(std::io::Error::other(format!(
                "the sealed audit log of group {} would be larger than {} bytes, the most this \
                 store keeps in one PostgreSQL bytea value (1 GiB); it is not sealed and its \
                 plain history stays",
                self.group, self.cap
            )));
        }
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn sql_error(context: &'static str) -> impl Fn(postgres::Error) -> Error {
    move |e| storage(context, &e)
}

fn audit_invalid(check: &str, message: impl Into<String>) -> Error {
    Error::new(Code::AuditInvalid, message).with("check", check)
}

/// The check an `AUDIT_INVALID` error names, `otherwise` for an error that names none.
fn failed_check(e: &Error, otherwise: &str) -> String {
    e.details
        .get("check")
        .and_then(|c| c.as_str())
        .unwrap_or(otherwise)
        .to_owned()
}

/// The (seq, state hash) of the final snapshot of a Group whose plain history was removed.
pub(super) type FinalSnapshot = (u64, Hash);

/// The row of `mwp_audit` the seal reads (`artifact` only when asked).
struct Row {
    seq: u64,
    manifest: Vec<u8>,
    artifact: Option<Vec<u8>>,
    expired: bool,
    plain_removed: bool,
}

/// The head row of a Group.
struct HeadRow {
    seq: u64,
    head: Hash,
    org: Id,
    archived: bool,
}

impl PostgresAuthority {
    /// The head row of `group` (seq, head; `None` if it does not exist) and, when its plain
    /// history was removed once sealed, the final snapshot's (seq, state hash): what a replay
    /// answers from ([`mwp_core::authority::Policy::check_replay_sealed`]). Event rows past
    /// the head row (or without one) are `LOG_CORRUPT` naming the group, as for every head
    /// read. One round trip.
    pub(super) fn head_sealed(
        &self,
        group: &Id,
    ) -> Result<Option<(u64, Hash, Option<FinalSnapshot>)>> {
        let mut conn = self.pool.get()?;
        let (client, sql) = conn.parts();
        let row = client
            .query_one(&sql.head_sealed, &[&group.as_str()])
            .map_err(sql_error("reading the group head"))?;
        let Some(head) = head_row_seq(&row, group, 5)? else {
            return Ok(None);
        };
        let head_id = Hash::from_hex(column::<&str>(&row, 4, group, "mwp_groups.head")?)
            .map_err(|e| corrupt(group, format!("head is not a hash: {e}")))?;
        let sealed = match column::<Option<i64>>(&row, 1, group, "mwp_audit.seq")? {
            None => None,
            Some(seq) => {
                // Only the signed manifest says the plain history may go: a row that marks it
                // removed without one is never taken for a seal.
                let manifest: &[u8] = column(&row, 3, group, "mwp_audit.manifest")?;
                self.check_removal(group, to_u64(seq, group, "seq")?, manifest)?;
                let hash: Option<&str> = column(&row, 2, group, "mwp_snapshots.state_hash")?;
                let hash = hash.ok_or_else(|| {
                    corrupt(
                        group,
                        format!("its plain history was removed, but its final snapshot at seq {seq} is missing"),
                    )
                })?;
                let hash = Hash::from_hex(hash)
                    .map_err(|e| corrupt(group, format!("snapshot hash: {e}")))?;
                Some((to_u64(seq, group, "seq")?, hash))
            }
        };
        Ok(Some((head, head_id, sealed)))
    }

    /// That `manifest` (the bytes of the audit row of `group` marked `plain_removed`, at
    /// `seq`) verifies under the authority key and says this Group's plain history through
    /// `seq` is removed: `AUDIT_INVALID` naming the group and the failed check otherwise.
    /// The manifest, once it holds.
    pub(super) fn check_removal(&self, group: &Id, seq: u64, manifest: &[u8]) -> Result<Manifest> {
        let checked = Manifest::from_cbor(manifest).and_then(|m| {
            m.verify(Some(&self.public))?;
            check_group(group, &m.group)?;
            if m.seq != seq || !m.remove_plain {
                return Err(audit_invalid(
                    "seq",
                    format!(
                        "it seals seq {} (remove_plain {}), the row seq {seq}",
                        m.seq, m.remove_plain
                    ),
                ));
            }
            Ok(m)
        });
        checked.map_err(|e| {
            audit_invalid(
                &failed_check(&e, "manifest"),
                format!(
                    "group {group} in PostgreSQL: its audit row marks the plain history removed, but its manifest does not say so: {}",
                    e.message
                ),
            )
        })
    }

    /// What a reload of an archived Group (or an archive just committed) runs: the seal is
    /// checked only when it is missing or its removal of the plain history is unfinished
    /// (one small query otherwise), and then finished by [`Self::seal_audit`].
    pub(super) fn finish_audit(&self, group: &Id, now_ms: u64) -> Result<()> {
        let pending = {
            let mut conn = self.pool.get()?;
            let (client, sql) = conn.parts();
            client
                .query_opt(&sql.audit_pending, &[&group.as_str()])
                .map_err(sql_error("reading the audit row"))?
                .map(|r| column::<bool>(&r, 0, group, "mwp_audit.remove_plain"))
                .transpose()?
                .unwrap_or(true)
        };
        if pending {
            self.seal_audit(group, now_ms)?;
        }
        Ok(())
    }

    /// Seals the audit log of `group` if it is due (archived, its Organization has a policy)
    /// and no artifact that verifies is stored yet, then removes the plain history if the
    /// manifest says so and it is not removed yet. Returns the manifest in force, or `None`
    /// when no seal is due and none exists.
    ///
    /// Idempotent: a stored artifact whose manifest verifies under the authority key, names
    /// this Group at its final seq and whose ciphertext is the one it names is kept as is. A
    /// stored artifact that does not verify is sealed again from the plain history (replacing
    /// the row), and, when the plain history is already removed, reported as `AUDIT_INVALID`
    /// naming the failed check. An expired artifact (its tombstone stored) is kept.
    ///
    /// `now_ms` is the sealing time the manifest records. `STORAGE` for an artifact larger
    /// than [`MAX_ARTIFACT_BYTES`] (nothing is stored or removed) and for database failures,
    /// `LOG_CORRUPT` when the stored events do not replay to the final snapshot, `NOT_FOUND`
    /// for an unknown Group.
    pub fn seal_audit(&self, group: &Id, now_ms: u64) -> Result<Option<Manifest>> {
        let mut conn = self.pool.get()?;
        let (client, sql) = conn.parts();
        let key = self.lock_key(group);

        let mut tx = client
            .transaction()
            .map_err(sql_error("starting a transaction"))?;
        tx.execute(&sql.lock, &[&key])
            .map_err(sql_error("locking the group"))?;
        let head = read_head(&mut tx, group)?;
        let row = read_row(&mut tx, group, true)?;
        let kept = match &row {
            Some(row) => self.check_row(group, &head, row)?,
            None => None,
        };
        let (manifest, plain_removed) = match kept {
            Some(m) => (m, row.as_ref().is_some_and(|r| r.plain_removed)),
            None => {
                let policy = match self.authority.policy().seal_policy(&head.org) {
                    Some(p) if head.archived => p.clone(),
                    _ if row.is_none() => return Ok(None),
                    _ => {
                        return Err(audit_invalid(
                            "policy",
                            format!(
                                "the stored audit artifact of group {group} does not verify, and no archival policy of organization {} is configured to seal it again",
                                head.org
                            ),
                        ))
                    }
                };
                let (artifact, manifest) =
                    self.seal_rows(&mut tx, group, &head, &policy, now_ms)?;
                tx.execute(
                    "INSERT INTO mwp_audit
                       (group_id, seq, sealed_at, retain_until, remove_plain, manifest, artifact)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)
                     ON CONFLICT (group_id) DO UPDATE SET seq = EXCLUDED.seq,
                       sealed_at = EXCLUDED.sealed_at, retain_until = EXCLUDED.retain_until,
                       remove_plain = EXCLUDED.remove_plain, plain_removed = false,
                       manifest = EXCLUDED.manifest, artifact = EXCLUDED.artifact,
                       tombstone = NULL",
                    &[
                        &group.as_str(),
                        &to_i64(manifest.seq, "seq")?,
                        &to_i64(manifest.sealed_at, "sealed_at")?,
                        &to_i64(manifest.retain_until, "retain_until")?,
                        &manifest.remove_plain,
                        &manifest.to_cbor()?,
                        &artifact,
                    ],
                )
                .map_err(sql_error("storing the sealed audit artifact"))?;
                (manifest, false)
            }
        };
        tx.commit()
            .map_err(sql_error("committing the sealed audit artifact"))?;

        if manifest.remove_plain && !plain_removed {
            // The artifact row is committed: the plain history may go.
            let mut tx = client
                .transaction()
                .map_err(sql_error("starting a transaction"))?;
            tx.execute(&sql.lock, &[&key])
                .map_err(sql_error("locking the group"))?;
            let seq = to_i64(manifest.seq, "seq")?;
            // Still the row just committed or checked, and its removal still to do.
            let due = tx
                .query_opt(
                    "SELECT remove_plain AND NOT plain_removed FROM mwp_audit
                     WHERE group_id = $1 AND seq = $2 AND manifest = $3 FOR UPDATE",
                    &[&group.as_str(), &seq, &manifest.to_cbor()?],
                )
                .map_err(sql_error("reading the audit row"))?
                .map(|r| column::<bool>(&r, 0, group, "mwp_audit.remove_plain"))
                .transpose()?
                .unwrap_or(false);
            if !due {
                return Ok(Some(manifest));
            }
            tx.execute(
                "DELETE FROM mwp_events WHERE group_id = $1 AND seq <= $2",
                &[&group.as_str(), &seq],
            )
            .map_err(sql_error("removing the sealed plain history"))?;
            tx.execute(
                "UPDATE mwp_audit SET plain_removed = true WHERE group_id = $1 AND seq = $2",
                &[&group.as_str(), &seq],
            )
            .map_err(sql_error("marking the plain history removed"))?;
            tx.commit()
                .map_err(sql_error("committing the removal of the plain history"))?;
        }
        Ok(Some(manifest))
    }

    /// The manifest of a stored row if it is to be kept: it verifies under the authority key,
    /// names this Group at the head, and so does the artifact (when not expired). `None` when
    /// it is to be sealed again; `AUDIT_INVALID` when it does not verify and cannot be (the
    /// plain history is removed).
    fn check_row(&self, group: &Id, head: &HeadRow, row: &Row) -> Result<Option<Manifest>> {
        let checked = (|| {
            let manifest = Manifest::from_cbor(&row.manifest)?;
            manifest.verify(Some(&self.public))?;
            if let Some(bytes) = &row.artifact {
                let (inner, _) = split_artifact(bytes, Some(&self.public))?;
                if inner != manifest {
                    return Err(audit_invalid(
                        "manifest",
                        "the artifact's manifest is not the one stored beside it",
                    ));
                }
            }
            if manifest.group != *group || manifest.seq != head.seq || row.seq != head.seq {
                return Err(audit_invalid(
                    "seq",
                    format!(
                        "it names group {} at seq {}, the group is at seq {}",
                        manifest.group, manifest.seq, head.seq
                    ),
                ));
            }
            Ok(manifest)
        })();
        match checked {
            Ok(m) => Ok(Some(m)),
            Err(e) if row.plain_removed || row.expired => {
                Err(audit_invalid(
                    &failed_check(&e, "artifact"),
                    format!(
                        "the stored audit record of group {group} does not verify ({}), and its plain history is removed or its artifact expired, so it cannot be sealed again; restore table mwp_audit from a backup",
                        e.message
                    ),
                ))
            }
            Err(e) => {
                tracing::warn!(group = %group, error = %e, "the stored audit artifact does not verify; sealing the group again");
                Ok(None)
            }
        }
    }

    /// Seals the Group's stored events (read in batches, in seq order from 1, each checked
    /// and replayed) and its final snapshot at the head. Returns the artifact and manifest.
    fn seal_rows(
        &self,
        tx: &mut Transaction<'_>,
        group: &Id,
        head: &HeadRow,
        policy: &OrgPolicy,
        now_ms: u64,
    ) -> Result<(Vec<u8>, Manifest)> {
        let final_seq = to_i64(head.seq, "seq")?;
        let snapshot_bytes: Vec<u8> = tx
            .query_opt(
                "SELECT bytes FROM mwp_snapshots WHERE group_id = $1 AND seq = $2",
                &[&group.as_str(), &final_seq],
            )
            .map_err(sql_error("reading the final snapshot"))?
            .ok_or_else(|| {
                corrupt(
                    group,
                    format!(
                        "archived at seq {}, but its final snapshot is missing",
                        head.seq
                    ),
                )
            })
            .and_then(|r| column(&r, 0, group, "mwp_snapshots.bytes"))?;
        let snapshot = Snapshot::verify_stored(&snapshot_bytes, &self.public, group)?;
        let out = Capped {
            buf: Vec::new(),
            cap: self.artifact_cap,
            group: group.clone(),
        };
        let mut sealer = mwp_audit::Sealer::new(out, policy)?;
        let mut state: Option<GroupState> = None;
        let mut from = 0i64;
        while from < final_seq {
            let rows = tx
                .query(
                    &super::sql::events_page(),
                    &[&group.as_str(), &from, &final_seq, &SEAL_BATCH, &from],
                )
                .map_err(sql_error("reading events to seal"))?;
            if rows.is_empty() {
                return Err(corrupt(
                    group,
                    format!("events after seq {from} are missing"),
                ));
            }
            let taken = page_rows(&rows, group, to_u64(from, group, "seq")?)?;
            for row in &rows[..taken] {
                let seq: i64 = column(row, 0, group, "mwp_events.seq")?;
                let bytes =
                    event_bytes(row, 1, group, to_u64(seq, group, "seq")?)?.ok_or_else(|| {
                        corrupt(
                            group,
                            format!("the event row at seq {seq}, column mwp_events.bytes: is NULL"),
                        )
                    })?;
                let event = Event::from_cbor_verified(bytes)?;
                if seq != from + 1
                    || event.group != *group
                    || event.seq != to_u64(seq, group, "seq")?
                {
                    return Err(corrupt(
                        group,
                        format!("row seq {seq} is not event {} of the group", from + 1),
                    ));
                }
                GroupState::apply_to(&mut state, &event)?;
                sealer.event(bytes)?;
                from = seq;
            }
        }
        let replayed = match &state {
            Some(s) if s.seq == head.seq && s.head == head.head => s.hash()?,
            _ => {
                return Err(corrupt(
                    group,
                    format!("its events do not end at the head row (seq {})", head.seq),
                ))
            }
        };
        if replayed != snapshot.state_hash {
            return Err(corrupt(
                group,
                format!(
                    "its events replay to state {replayed}, its final snapshot holds {}",
                    snapshot.state_hash
                ),
            ));
        }
        let (out, manifest) =
            sealer.finish(&snapshot_bytes, now_ms, self.authority.secret_key())?;
        Ok((out.buf, manifest))
    }

    /// The sealed audit log of `group` as stored: its verified manifest, whether the plain
    /// history was removed, and its tombstone once expired. `None` when it was not sealed.
    /// `AUDIT_INVALID` when the stored manifest or tombstone does not verify.
    pub fn audit_status(&self, group: &Id) -> Result<Option<AuditStatus>> {
        let mut conn = self.pool.get()?;
        let (client, _) = conn.parts();
        let Some(row) = client
            .query_opt(
                "SELECT manifest, plain_removed, tombstone FROM mwp_audit WHERE group_id = $1",
                &[&group.as_str()],
            )
            .map_err(sql_error("reading the audit row"))?
        else {
            return Ok(None);
        };
        let manifest = Manifest::from_cbor(column(&row, 0, group, "mwp_audit.manifest")?)?;
        manifest.verify(Some(&self.public))?;
        check_group(group, &manifest.group)?;
        let tombstone = column::<Option<&[u8]>>(&row, 2, group, "mwp_audit.tombstone")?
            .map(|t| {
                let t = Tombstone::from_cbor(t)?;
                t.verify(Some(&self.public))?;
                check_group(group, &t.group)?;
                Ok::<_, Error>(t)
            })
            .transpose()?;
        Ok(Some(AuditStatus {
            manifest,
            plain_removed: column(&row, 1, group, "mwp_audit.plain_removed")?,
            tombstone,
        }))
    }

    /// The stored artifact of `group`, byte for byte (`MWPAUDT1` | ciphertext | manifest
    /// trailer, what a file host keeps as `audit.mwpa`): `None` when it was not sealed or its
    /// artifact expired. Not checked here: [`mwp_audit::open`] and
    /// [`mwp_core::audit::split_artifact`] check it.
    pub fn audit_artifact(&self, group: &Id) -> Result<Option<Vec<u8>>> {
        let mut conn = self.pool.get()?;
        let (client, _) = conn.parts();
        Ok(client
            .query_opt(
                "SELECT artifact FROM mwp_audit WHERE group_id = $1",
                &[&group.as_str()],
            )
            .map_err(sql_error("reading the audit artifact"))?
            .map(|r| column::<Option<Vec<u8>>>(&r, 0, group, "mwp_audit.artifact"))
            .transpose()?
            .flatten())
    }

    /// The stored tombstone of `group` (canonical CBOR of the signed
    /// [`Tombstone`]), once its artifact expired.
    pub fn audit_tombstone(&self, group: &Id) -> Result<Option<Vec<u8>>> {
        let mut conn = self.pool.get()?;
        let (client, _) = conn.parts();
        Ok(client
            .query_opt(
                "SELECT tombstone FROM mwp_audit WHERE group_id = $1",
                &[&group.as_str()],
            )
            .map_err(sql_error("reading the audit tombstone"))?
            .map(|r| column::<Option<Vec<u8>>>(&r, 0, group, "mwp_audit.tombstone"))
            .transpose()?
            .flatten())
    }

    /// Deletes every artifact whose retention has passed at `now_ms` (its manifest's
    /// `retain_until <= now_ms`), in group order: for each, in one transaction, the tombstone
    /// column is set to the canonical CBOR of [`Tombstone::sign`] (signed with the authority
    /// key at `now_ms`) and the artifact bytes are nulled. With `dry_run` nothing changes;
    /// the list says what would be deleted. Nothing expires on its own: this is the operator's
    /// `mwp audit expire`.
    ///
    /// `AUDIT_INVALID` for a stored manifest that does not verify (nothing of that Group is
    /// deleted, and the groups before it stay expired); `STORAGE` for database failures.
    pub fn expire_audit(&self, now_ms: u64, dry_run: bool) -> Result<Vec<ExpiredAudit>> {
        let now = to_i64(now_ms, "now")?;
        let groups: Vec<String> = {
            let mut conn = self.pool.get()?;
            let (client, _) = conn.parts();
            client
                .query(
                    "SELECT group_id FROM mwp_audit
                     WHERE artifact IS NOT NULL AND retain_until <= $1 ORDER BY group_id",
                    &[&now],
                )
                .map_err(sql_error("listing expired audit artifacts"))?
                .iter()
                .map(|r| column_of(r, 0, "mwp_audit.group_id"))
                .collect::<Result<_>>()?
        };
        let mut out = Vec::new();
        for g in groups {
            let group =
                Id::new(&g).map_err(|e| Error::corrupt(format!("stored group id {g:?}: {e}")))?;
            if let Some(item) = self.expire_one(&group, now_ms, dry_run)? {
                out.push(item);
            }
        }
        Ok(out)
    }

    fn expire_one(&self, group: &Id, now_ms: u64, dry_run: bool) -> Result<Option<ExpiredAudit>> {
        let mut conn = self.pool.get()?;
        let (client, sql) = conn.parts();
        let mut tx = client
            .transaction()
            .map_err(sql_error("starting a transaction"))?;
        tx.execute(&sql.lock, &[&self.lock_key(group)])
            .map_err(sql_error("locking the group"))?;
        let Some(row) = read_row(&mut tx, group, false)? else {
            return Ok(None);
        };
        if row.expired {
            return Ok(None);
        }
        let manifest = Manifest::from_cbor(&row.manifest)?;
        manifest.verify(Some(&self.public))?;
        check_group(group, &manifest.group)?;
        if !manifest.expired(now_ms) {
            return Ok(None);
        }
        let item = ExpiredAudit {
            group: group.clone(),
            seq: manifest.seq,
            retain_until: manifest.retain_until,
            deleted: !dry_run,
        };
        if dry_run {
            return Ok(Some(item));
        }
        let tombstone = Tombstone::sign(&manifest, now_ms, self.authority.secret_key())?;
        tx.execute(
            "UPDATE mwp_audit SET tombstone = $2, artifact = NULL
             WHERE group_id = $1 AND artifact IS NOT NULL",
            &[&group.as_str(), &tombstone.to_cbor()?],
        )
        .map_err(sql_error(
            "replacing the expired artifact with its tombstone",
        ))?;
        tx.commit()
            .map_err(sql_error("committing the expiry of an audit artifact"))?;
        Ok(Some(item))
    }
}

/// `AUDIT_INVALID` (check `group`) when a stored manifest or tombstone names another Group.
fn check_group(group: &Id, named: &Id) -> Result<()> {
    if named == group {
        return Ok(());
    }
    Err(audit_invalid(
        "group",
        format!("the stored audit record of group {group} names group {named}"),
    ))
}

fn read_head(c: &mut impl GenericClient, group: &Id) -> Result<HeadRow> {
    let row = c
        .query_opt(
            "SELECT seq, head, org, archived FROM mwp_groups WHERE group_id = $1",
            &[&group.as_str()],
        )
        .map_err(sql_error("reading the group head"))?
        .ok_or_else(|| Error::new(Code::NotFound, format!("group {group} does not exist")))?;
    let org: &str = column(&row, 2, group, "mwp_groups.org")?;
    Ok(HeadRow {
        seq: to_u64(column(&row, 0, group, "mwp_groups.seq")?, group, "seq")?,
        head: Hash::from_hex(column::<&str>(&row, 1, group, "mwp_groups.head")?)
            .map_err(|e| corrupt(group, format!("head is not a hash: {e}")))?,
        org: Id::new(org).map_err(|e| corrupt(group, format!("org {org:?}: {e}")))?,
        archived: column(&row, 3, group, "mwp_groups.archived")?,
    })
}

/// The audit row of `group`, locked for update; its artifact's bytes only `with_artifact`.
fn read_row(c: &mut impl GenericClient, group: &Id, with_artifact: bool) -> Result<Option<Row>> {
    let query = if with_artifact {
        "SELECT seq, manifest, tombstone IS NOT NULL, plain_removed, artifact
         FROM mwp_audit WHERE group_id = $1 FOR UPDATE"
    } else {
        "SELECT seq, manifest, tombstone IS NOT NULL, plain_removed, NULL::bytea
         FROM mwp_audit WHERE group_id = $1 FOR UPDATE"
    };
    let Some(row) = c
        .query_opt(query, &[&group.as_str()])
        .map_err(sql_error("reading the audit row"))?
    else {
        return Ok(None);
    };
    Ok(Some(Row {
        seq: to_u64(column(&row, 0, group, "mwp_audit.seq")?, group, "seq")?,
        manifest: column(&row, 1, group, "mwp_audit.manifest")?,
        expired: column(&row, 2, group, "mwp_audit.tombstone")?,
        plain_removed: column(&row, 3, group, "mwp_audit.plain_removed")?,
        artifact: column(&row, 4, group, "mwp_audit.artifact")?,
    }))
}
