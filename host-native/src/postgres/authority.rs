//! [`PostgresAuthority`]: the authority store on one PostgreSQL database.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use postgres::error::SqlState;
use postgres::{GenericClient, Transaction};

use mwp_core::authority::{self, Authority, Commit, Step};
use mwp_core::canonical;
use mwp_core::chain;
use mwp_core::log_format::MAX_RECORD_LEN;
use mwp_core::snapshot::Snapshot;
use mwp_core::transcript::Host;
use mwp_core::{
    Code, Command, Decision, Error, Event, GroupState, Hash, Id, PublicKey, Receipt, Result,
    SecretKey, WorkState,
};

use super::batch;
use super::config::{KeySource, PostgresConfig};
use super::migrate::migrate;
use super::pool::Pool;
use super::snapshot;
use super::sql::Statements;
use super::storage;
use crate::service::AuthorityService;

/// Attempts per call before a transient failure (a race lost, a connection dropped) is
/// reported as `STORAGE`.
const ATTEMPTS: usize = 5;

/// Event rows read at most per round trip when a cached state catches up with the database
/// (fewer when they hold more than a page's bytes: [`page_rows`]).
const CATCH_UP_BATCH: i64 = 1000;

/// A storage failure inside one attempt, and whether a fresh attempt may succeed.
struct Failure {
    error: Error,
    retry: bool,
}

impl Failure {
    fn fatal(error: Error) -> Failure {
        Failure {
            error,
            retry: false,
        }
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        Failure::fatal(error)
    }
}

/// Maps a driver error; races (unique violation, serialization failure, deadlock) and lost
/// connections are worth another attempt after reloading from the database.
fn db(context: &'static str) -> impl Fn(postgres::Error) -> Failure {
    move |e| {
        let retry = e.is_closed()
            || e.as_db_error().is_none()
            || [
                SqlState::UNIQUE_VIOLATION,
                SqlState::T_R_SERIALIZATION_FAILURE,
                SqlState::T_R_DEADLOCK_DETECTED,
            ]
            .iter()
            .any(|c| e.code() == Some(c));
        Failure {
            error: storage(context, &e),
            retry,
        }
    }
}

pub(super) fn corrupt(group: &Id, what: impl std::fmt::Display) -> Error {
    Error::corrupt(format!("group {group} in PostgreSQL: {what}"))
}

/// Column `i` of a row of `group`, as `T`: NULL, or a value of another type than the
/// schema's (a column another process altered), is `LOG_CORRUPT` naming the group and the
/// column, where `Row::get` would panic.
pub(super) fn column<'a, T: postgres::types::FromSql<'a>>(
    row: &'a postgres::Row,
    i: usize,
    group: &Id,
    what: &str,
) -> Result<T> {
    row.try_get(i)
        .map_err(|e| corrupt(group, format!("column {what}: {e}")))
}

/// As [`column`], for a row of no one group: `STORAGE` naming the column.
pub(super) fn column_of<'a, T: postgres::types::FromSql<'a>>(
    row: &'a postgres::Row,
    i: usize,
    what: &str,
) -> Result<T> {
    row.try_get(i).map_err(|e| {
        Error::new(
            Code::Storage,
            format!("PostgreSQL column {what} is not as the schema says: {e}"),
        )
    })
}

pub(super) fn to_i64(v: u64, what: &str) -> Result<i64> {
    i64::try_from(v).map_err(|_| {
        Error::new(
            Code::Storage,
            format!("{what} {v} does not fit PostgreSQL's bigint"),
        )
    })
}

pub(super) fn to_u64(v: i64, group: &Id, what: &str) -> Result<u64> {
    u64::try_from(v).map_err(|_| corrupt(group, format!("negative {what} {v}")))
}

/// One group's cached state. `fresh` says it matched the database at the end of the last
/// transaction of this process; it is re-checked against the head row before every decision.
#[derive(Default)]
struct Slot {
    state: Option<GroupState>,
    fresh: bool,
    /// Set when a reload found the Group archived under an Organization with an archival
    /// policy: its seal is checked (and finished) once the reload's connection is released.
    audit_pending: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a slot may leave its state half-updated: the `fresh` flag is
    // cleared before every change, so a poisoned slot is reloaded, never trusted.
    m.lock().unwrap_or_else(|p| {
        let guard = p.into_inner();
        m.clear_poison();
        guard
    })
}

/// The authority store on PostgreSQL: the commands of a group are decided and committed in
/// transactions serialised per group across every process using the database, one command
/// each, or several that arrived while the group's previous transaction was written
/// (docs/postgres.md).
///
/// Blocking: call it from plain threads or `tokio::task::spawn_blocking`, never directly on
/// an async runtime thread (the sync driver runs its own small runtime per connection).
pub struct PostgresAuthority {
    pub(super) pool: Arc<Pool>,
    /// The key and the policy (limits, snapshot cadence, online window, archival policies)
    /// every group's driver decides with.
    pub(super) authority: Arc<authority::Config>,
    pub(super) public: PublicKey,
    /// The largest sealed artifact stored ([`super::audit::MAX_ARTIFACT_BYTES`] but in
    /// tests).
    pub(super) artifact_cap: usize,
    cache_groups: usize,
    lock_salt: String,
    label: String,
    cache: Mutex<HashMap<Id, Arc<Group>>>,
    /// Transactions committed for batches of commands ([`PostgresAuthority::batches`]).
    batches: std::sync::atomic::AtomicU64,
    /// The threads storing snapshots made due by accepts already committed
    /// ([`PostgresAuthority::wait_for_snapshots`]).
    snapshots: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// The groups whose periodic snapshot a thread is storing, each with the newest one due
    /// meanwhile: one thread and at most one waiting state per group, however short the
    /// cadence.
    snapshotting: Arc<Mutex<HashMap<Id, Option<authority::SnapshotDue>>>>,
    /// Threads started for periodic snapshots ([`PostgresAuthority::snapshot_threads`]).
    snapshot_threads: std::sync::atomic::AtomicU64,
    /// The verdicts on the snapshot rows verified, per version of the row.
    verdicts: snapshot::Verdicts,
    /// Run after an attempt failed and before the next
    /// ([`PostgresAuthority::with_between_attempts_for_tests`]).
    #[cfg(feature = "fault-injection")]
    between_attempts: Option<BetweenAttempts>,
}

/// What a test runs between two attempts of one transaction: given the group and the failure
/// of the attempt that did not commit.
#[cfg(feature = "fault-injection")]
type BetweenAttempts = Box<dyn Fn(&Id, &Error) + Send + Sync>;

/// What this process keeps of one group: its cached state, and the commands waiting to be
/// decided together ([`batch::Queue`]).
#[derive(Default)]
struct Group {
    slot: Mutex<Slot>,
    queue: batch::Queue,
}

impl std::fmt::Debug for PostgresAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresAuthority")
            .field("label", &self.label)
            .field("authority_key", &self.public)
            .finish_non_exhaustive()
    }
}

/// What an accepted command leaves for after its transaction committed.
#[derive(Default)]
struct AfterCommit {
    /// A periodic snapshot that is due (an archive's final one is stored in its transaction).
    snapshot: Option<authority::SnapshotDue>,
    /// The archival policy the Group is sealed under, when the command archived it.
    seal: Option<mwp_core::audit::OrgPolicy>,
}

/// Stores a snapshot of `group` at `seq` unless one at `seq` or later is stored, and removes
/// the group's older ones (docs/postgres.md, "Snapshots").
fn insert_snapshot(
    tx: &mut Transaction<'_>,
    sql: &Statements,
    group: &Id,
    seq: i64,
    hash: &Hash,
    bytes: &[u8],
) -> std::result::Result<u64, postgres::Error> {
    tx.execute(
        &sql.insert_snapshot,
        &[&group.as_str(), &seq, &hash.to_hex(), &bytes],
    )
}

/// Stores a periodic snapshot taken after a commit: in a transaction of its own under the
/// group's snapshot lock (`key`), so that it is ordered with the group's other snapshot
/// writes and never replaces a later snapshot stored meanwhile, while the group's accepts go
/// on.
fn store_due_snapshot(
    pool: &Pool,
    key: i64,
    group: &Id,
    seq: u64,
    hash: &Hash,
    bytes: &[u8],
) -> Result<()> {
    let seq = to_i64(seq, "seq")?;
    let mut conn = pool.get()?;
    let (client, sql) = conn.parts();
    let mut tx = client
        .transaction()
        .map_err(|e| storage("starting a transaction", &e))?;
    tx.execute(&sql.lock, &[&key])
        .map_err(|e| storage("locking the group's snapshots", &e))?;
    insert_snapshot(&mut tx, sql, group, seq, hash, bytes)
        .map_err(|e| storage("storing a periodic snapshot", &e))?;
    tx.commit()
        .map_err(|e| storage("committing a snapshot", &e))
}

impl PostgresAuthority {
    /// Connects to a `postgres://` URL (mwp parameters in `config`), migrating the schema.
    pub fn connect(url: &str) -> Result<PostgresAuthority> {
        PostgresAuthority::open(PostgresConfig::from_url(url)?)
    }

    /// Opens with explicit settings: migrates the schema, loads (or creates) the authority
    /// key, and checks one pooled connection.
    pub fn open(config: PostgresConfig) -> Result<PostgresAuthority> {
        Self::open_with(config, false)
    }

    /// As [`open`](Self::open); with `store_given`, a given key's secret is stored too (the
    /// router shares one key over every server this way).
    pub(crate) fn open_with(
        config: PostgresConfig,
        store_given: bool,
    ) -> Result<PostgresAuthority> {
        let pg: postgres::Config = config.conninfo.parse().map_err(|e| {
            Error::new(
                Code::Storage,
                format!("the PostgreSQL connection string does not parse: {e}"),
            )
        })?;
        let label = config.shard.clone().unwrap_or_else(|| default_label(&pg));
        let pool = Arc::new(Pool::new(pg, config.schema.clone(), config.pool_size));
        let mut client = pool.connect()?;
        migrate(&mut client, config.schema.as_deref())?;
        let key = load_key(&mut client, &config.key, store_given)?;
        drop(client);
        let authority = PostgresAuthority {
            pool,
            public: key.public(),
            authority: authority::Config::new(
                key,
                authority::Policy {
                    limits: config.limits,
                    snapshot_every: Some(config.snapshot_every).filter(|n| *n > 0),
                    online_events: config.online_window,
                    audit: config.org_policy.clone(),
                },
            ),
            artifact_cap: super::audit::MAX_ARTIFACT_BYTES,
            cache_groups: config.cache_groups.max(1),
            lock_salt: config.schema.unwrap_or_default(),
            label,
            cache: Mutex::new(HashMap::new()),
            batches: std::sync::atomic::AtomicU64::new(0),
            snapshots: Mutex::new(Vec::new()),
            snapshotting: Arc::default(),
            snapshot_threads: std::sync::atomic::AtomicU64::new(0),
            verdicts: snapshot::Verdicts::default(),
            #[cfg(feature = "fault-injection")]
            between_attempts: None,
        };
        drop(authority.pool.get()?);
        Ok(authority)
    }

    /// Takes group locks in another namespace than every other store on the database: a
    /// writer that does not serialise with the others, for tests of the guards that keep the
    /// log unforked without the lock. Never use it in production.
    #[doc(hidden)]
    pub fn with_unshared_locks_for_tests(mut self, namespace: &str) -> Self {
        self.lock_salt = format!("{}\0{namespace}", self.lock_salt);
        self
    }

    /// Runs `f` after an attempt of a transaction failed with a failure worth another
    /// attempt, before that attempt: for tests that make another writer act between the two
    /// (feature `fault-injection`, never in a build that is run).
    #[doc(hidden)]
    #[cfg(feature = "fault-injection")]
    pub fn with_between_attempts_for_tests(
        mut self,
        f: impl Fn(&Id, &Error) + Send + Sync + 'static,
    ) -> Self {
        self.between_attempts = Some(Box::new(f));
        self
    }

    /// Stores sealed artifacts of at most `cap` bytes instead of
    /// [`super::MAX_ARTIFACT_BYTES`]: for tests of the refusal of an artifact too large.
    /// Never use it in production.
    #[doc(hidden)]
    pub fn with_artifact_cap_for_tests(mut self, cap: usize) -> Self {
        self.artifact_cap = cap;
        self
    }

    /// The authority's secret key (the router hands it to the other servers).
    pub(crate) fn secret_key(&self) -> &SecretKey {
        self.authority.secret_key()
    }

    /// The name routing gives this server (`shard=` or `host:port/dbname`).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Forgets every cached state and closes idle connections: the next call reloads from
    /// the database, as a restarted process would.
    pub fn restart(&self) {
        lock(&self.cache).clear();
        self.pool.clear();
    }

    /// How many transactions this store committed for submitted commands since it opened:
    /// commands of one group that arrive while one of its transactions is written are
    /// decided and committed together, so under contention this is fewer than the commands.
    pub fn batches(&self) -> u64 {
        self.batches.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many threads this store started to store periodic snapshots since it opened: at
    /// most one per group at a time, so a short cadence cannot pile up threads and states.
    pub fn snapshot_threads(&self) -> u64 {
        self.snapshot_threads
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many times this store verified a snapshot row's bytes (decoded them, hashed the
    /// state, checked the signature) since it opened. A version of a row verified once is not
    /// verified again to be served or referred to while its verdict is kept (at most 4,096
    /// groups'); a row another process rewrote is a new version, verified again.
    pub fn snapshot_verifications(&self) -> u64 {
        self.verdicts
            .verified
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The state of `group` as the database holds it now (`None` if it does not exist).
    pub fn state(&self, group: &Id) -> Result<Option<GroupState>> {
        self.read_state(group, |s| s.cloned())
    }

    fn read_state<T>(&self, group: &Id, f: impl FnOnce(Option<&GroupState>) -> T) -> Result<T> {
        let entry = self.entry(group);
        let mut slot = lock(&entry.slot);
        let synced = {
            let mut conn = self.pool.get()?;
            let (client, sql) = conn.parts();
            self.sync(client, sql, &mut slot, group)
        };
        match synced {
            Ok(()) => {
                self.audit_after_load(group, &mut slot);
                Ok(f(slot.state.as_ref()))
            }
            Err(fail) => {
                slot.fresh = false;
                Err(fail.error)
            }
        }
    }

    /// Once a reload found the Group archived and due to be sealed (its connection released):
    /// finishes a seal or a removal of the plain history that a crash interrupted. A failure
    /// is logged and tried again at the next reload; the Group is served meanwhile from its
    /// plain history, which stays until a verified artifact is stored.
    fn audit_after_load(&self, group: &Id, slot: &mut Slot) {
        if !std::mem::take(&mut slot.audit_pending) {
            return;
        }
        if let Err(e) = self.finish_audit(group, crate::server::now_ms()) {
            tracing::error!(group = %group, error = %e, "sealing the audit log of an archived group failed; it is tried again when the group is next loaded");
        }
    }

    /// [`Self::audit_after_load`] for a slot that is not held (after a decision).
    fn seal_after_commit(&self, group: &Id, policy: Option<mwp_core::audit::OrgPolicy>, now: u64) {
        if policy.is_none() {
            return;
        }
        if let Err(e) = self.finish_audit(group, now) {
            tracing::error!(group = %group, error = %e, "sealing the audit log of a group just archived failed; it is tried again when the group is next loaded");
            lock(&self.entry(group).slot).audit_pending = true;
        }
    }

    fn entry(&self, group: &Id) -> Arc<Group> {
        let mut cache = lock(&self.cache);
        if let Some(s) = cache.get(group) {
            return s.clone();
        }
        if cache.len() >= self.cache_groups {
            // Evict idle groups (no caller holds them) down to three quarters.
            let excess = cache.len() + 1 - self.cache_groups * 3 / 4;
            let idle: Vec<Id> = cache
                .iter()
                .filter(|(_, s)| Arc::strong_count(s) == 1)
                .map(|(g, _)| g.clone())
                .take(excess)
                .collect();
            for g in idle {
                cache.remove(&g);
            }
        }
        let entry = Arc::new(Group::default());
        cache.insert(group.clone(), entry.clone());
        entry
    }

    /// The advisory lock key of a group: 64 bits of SHA-256 over the schema and the group.
    /// A collision only makes two groups wait for each other.
    pub(super) fn lock_key(&self, group: &Id) -> i64 {
        self.advisory_key("mwp group lock", group)
    }

    /// The advisory lock every write of `group`'s snapshots takes (docs/postgres.md,
    /// "Snapshots"): a periodic snapshot stored after its commit takes only this one, so the
    /// group's accepts do not wait for its bytes; an accept that stores one (an archive's
    /// final snapshot) takes it after the group's lock.
    fn snapshot_lock_key(&self, group: &Id) -> i64 {
        self.advisory_key("mwp snapshot lock", group)
    }

    /// The first 64 bits of `sha256(purpose + "\0" + schema + "\0" + group)`.
    fn advisory_key(&self, purpose: &str, group: &Id) -> i64 {
        let digest =
            canonical::sha256(format!("{purpose}\0{}\0{}", self.lock_salt, group).as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        i64::from_be_bytes(first)
    }

    /// Brings the cached state of `group` to the database's head: nothing if it is there,
    /// the missing events if it is behind, a reload (snapshot + log) otherwise or if the
    /// cached history turns out to differ from the database's.
    fn sync(
        &self,
        c: &mut impl GenericClient,
        sql: &Statements,
        slot: &mut Slot,
        group: &Id,
    ) -> Result<(), Failure> {
        let row = c
            .query_one(&sql.head, &[&group.as_str()])
            .map_err(db("reading the group head"))?;
        let Some(seq) = head_row_seq(&row, group, 2)? else {
            slot.state = None;
            slot.fresh = true;
            return Ok(());
        };
        let head = Hash::from_hex(column::<&str>(&row, 1, group, "mwp_groups.head")?)
            .map_err(|e| corrupt(group, format!("head is not a hash: {e}")))?;
        let cached = slot.fresh && slot.state.as_ref().is_some_and(|s| s.seq <= seq);
        if cached {
            let mut state = slot.state.take();
            slot.fresh = false;
            match self.catch_up(c, sql, group, &mut state, seq, head) {
                Ok(()) => {
                    slot.state = state;
                    slot.fresh = true;
                    return Ok(());
                }
                Err(f) if f.retry => return Err(f),
                // The cached history is not the database's (restored, failed over): reload.
                Err(_) => {}
            }
        }
        slot.fresh = false;
        let mut state = self.load_base(c, sql, group, seq, head)?;
        self.catch_up(c, sql, group, &mut state, seq, head)?;
        let driver = Authority::restore(self.authority.clone(), state);
        slot.audit_pending = driver.seal_due().is_some();
        slot.state = driver.into_state();
        slot.fresh = true;
        Ok(())
    }

    /// The state of the latest snapshot at or below `seq`, or `None` (replay from the
    /// start): a snapshot row that is not shown to be the group's own at its seq
    /// ([`snapshot::checked`], against the head row `sync` read: `seq`, `head`) is skipped,
    /// as the file store skips a damaged snapshot file: the log is the truth. A sealed Group
    /// whose plain history was removed loads from its final snapshot alone.
    fn load_base(
        &self,
        c: &mut impl GenericClient,
        sql: &Statements,
        group: &Id,
        seq: u64,
        head: Hash,
    ) -> Result<Option<GroupState>, Failure> {
        let row = c
            .query_opt(&sql.snapshot, &[&group.as_str()])
            .map_err(db("reading the latest snapshot"))?;
        let Some(row) = row else { return Ok(None) };
        let checked = snapshot::Head::read(&row, group).and_then(|read| {
            let Some(stored) = snapshot::row_of(&row, group)? else {
                return Ok(None);
            };
            let at = snapshot::Head {
                seq,
                hash: head,
                org: read.org,
            };
            snapshot::checked(group, &self.public, &at, &stored, &self.verdicts).map(Some)
        });
        match checked {
            Ok(snap) => Ok(snap.map(|s| s.state)),
            Err(e) => {
                tracing::warn!(group = %group, code = %e.code, error = %e.message, "the stored snapshot is skipped; the group is read from its log");
                Ok(None)
            }
        }
    }

    /// Applies the events after `state` up to `seq`, verifying each, then checks the head.
    fn catch_up(
        &self,
        c: &mut impl GenericClient,
        sql: &Statements,
        group: &Id,
        state: &mut Option<GroupState>,
        seq: u64,
        head: Hash,
    ) -> Result<(), Failure> {
        loop {
            let from = state.as_ref().map_or(0, |s| s.seq);
            if from >= seq {
                break;
            }
            let from_i64 = to_i64(from, "seq")?;
            let rows = c
                .query(
                    &sql.events_page,
                    &[
                        &group.as_str(),
                        &from_i64,
                        &to_i64(seq, "seq")?,
                        &CATCH_UP_BATCH,
                        &from_i64,
                    ],
                )
                .map_err(db("reading events"))?;
            if rows.is_empty() {
                return Err(corrupt(group, format!("events after seq {from} are missing")).into());
            }
            for row in &rows[..page_rows(&rows, group, from)?] {
                GroupState::apply_to(state, &event_row(row, group)?)?;
            }
        }
        match state {
            Some(s) if s.seq == seq && s.head == head => Ok(()),
            _ => Err(corrupt(
                group,
                format!("the log does not end at the head row (seq {seq}, {head})"),
            )
            .into()),
        }
    }

    /// Runs `f` in a transaction holding the group's lock with the cached state at the
    /// database's head; commits when `f` answers `Ok(Ok(_))`, rolls back otherwise. Transient
    /// failures reload and retry, at most [`ATTEMPTS`] times.
    fn locked<T>(
        &self,
        group: &Id,
        mut f: impl FnMut(
            &Self,
            &mut Transaction<'_>,
            &Statements,
            &mut Slot,
        ) -> Result<Result<T>, Failure>,
    ) -> Result<T> {
        let entry = self.entry(group);
        let mut slot = lock(&entry.slot);
        let mut last = None;
        for _ in 0..ATTEMPTS {
            match self.attempt(group, &mut slot, &mut f) {
                Ok(out) => {
                    self.audit_after_load(group, &mut slot);
                    return out;
                }
                Err(fail) => {
                    slot.fresh = false;
                    if !fail.retry {
                        return Err(fail.error);
                    }
                    #[cfg(feature = "fault-injection")]
                    if let Some(f) = &self.between_attempts {
                        f(group, &fail.error);
                    }
                    last = Some(fail.error);
                }
            }
        }
        let last = last.map_or_else(String::new, |e| e.message);
        Err(Error::new(
            Code::Storage,
            format!("group {group}: gave up after {ATTEMPTS} attempts; the last failure: {last}"),
        ))
    }

    fn attempt<T>(
        &self,
        group: &Id,
        slot: &mut Slot,
        f: &mut impl FnMut(
            &Self,
            &mut Transaction<'_>,
            &Statements,
            &mut Slot,
        ) -> Result<Result<T>, Failure>,
    ) -> Result<Result<T>, Failure> {
        let mut conn = self
            .pool
            .get()
            .map_err(|error| Failure { error, retry: true })?;
        let (client, sql) = conn.parts();
        let mut tx = client.transaction().map_err(db("starting a transaction"))?;
        tx.execute(&sql.lock, &[&self.lock_key(group)])
            .map_err(db("locking the group"))?;
        self.sync(&mut tx, sql, slot, group)?;
        slot.fresh = false;
        let out = f(self, &mut tx, sql, slot)?;
        if out.is_ok() {
            tx.commit().map_err(db("committing"))?;
        }
        // Committed, or rolled back with the state untouched (decisions that write nothing).
        slot.fresh = true;
        Ok(out)
    }

    /// Decides `batch` (commands of `group`, in arrival order, each with its time) one after
    /// the other over the slot's state in one transaction, as many single transactions would
    /// in that order, and commits them together: every answer, in order, once committed.
    /// A transaction that fails answers every command with the failure: none of them was
    /// written.
    fn decide_batch(&self, group: &Id, batch: &[(Command, u64)]) -> Vec<Result<Decision>> {
        let mut after: Vec<AfterCommit> = Vec::with_capacity(batch.len());
        let decided = self.locked(group, |this, tx, sql, slot| {
            // A transaction tried again decides the batch again from the database.
            after.clear();
            let mut answers = Vec::with_capacity(batch.len());
            for (cmd, now_ms) in batch {
                let mut then = AfterCommit::default();
                answers.push(this.decide(tx, sql, slot, cmd, *now_ms, &mut then)?);
                after.push(then);
            }
            Ok(Ok(answers))
        });
        match decided {
            Ok(answers) => {
                self.batches
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                for ((_, now_ms), then) in batch.iter().zip(after) {
                    self.after_commit(group, then, *now_ms);
                }
                answers
            }
            Err(e) => batch.iter().map(|_| Err(e.clone())).collect(),
        }
    }

    /// Decides `cmd` with the group's driver over the slot's state (at the database's head,
    /// group locked) and writes what an accepted command commits in the open transaction.
    /// What is left for after the commit (a periodic snapshot, the seal of a Group archived
    /// under a policy) goes in `after`.
    fn decide(
        &self,
        tx: &mut Transaction<'_>,
        sql: &Statements,
        slot: &mut Slot,
        cmd: &Command,
        now_ms: u64,
        after: &mut AfterCommit,
    ) -> Result<Result<Decision>, Failure> {
        // The driver applies an accepted event to the state it is given; if the write below
        // fails, `locked` marks the slot stale and it is reloaded from the database.
        let mut driver = Authority::restore(self.authority.clone(), slot.state.take());
        let step = driver.handle_command(cmd, now_ms);
        slot.state = driver.into_state();
        let mut commit = match step {
            Ok(Step::Accepted(commit)) => commit,
            Ok(other) => return Ok(Ok(other.into_decision())),
            Err(e) => return Ok(Err(e)),
        };
        let state = slot
            .state
            .as_ref()
            .expect("a state exists once an event applied");
        self.write(tx, sql, &commit, state)?;
        match commit.snapshot.take() {
            // An archive's final snapshot commits with it: the seal, and the removal of the
            // plain history, start from it (SPEC §6a).
            Some(due) if state.archived => {
                self.store_snapshot(tx, sql, due.state())?;
            }
            due => after.snapshot = due,
        }
        after.seal = commit.seal.take();
        Ok(Ok(commit.into_decision()))
    }

    /// What follows a committed accept: its periodic snapshot is stored on a thread of its
    /// own (the group's commands do not wait for it), then a Group archived under a policy
    /// is sealed.
    fn after_commit(&self, group: &Id, after: AfterCommit, now_ms: u64) {
        if let Some(due) = after.snapshot {
            self.store_in_background(group, due);
        }
        self.seal_after_commit(group, after.seal, now_ms);
    }

    /// Signs, encodes and stores `due` on a thread of the group's own: a new one, or, when
    /// one is storing an earlier snapshot of the group, that one once it is done (the newest
    /// due meanwhile replacing any other waiting). A failure is logged and changes nothing
    /// else: the group is read from its previous snapshot and the log, as before.
    fn store_in_background(&self, group: &Id, due: authority::SnapshotDue) {
        {
            let mut groups = lock(&self.snapshotting);
            if let Some(next) = groups.get_mut(group) {
                // The group's thread takes it when it is done: a later state replaces an
                // earlier one still waiting, which no read would use once it is stored.
                *next = Some(due);
                return;
            }
            groups.insert(group.clone(), None);
        }
        let pool = Arc::clone(&self.pool);
        let key = self.snapshot_lock_key(group);
        let group = group.clone();
        let groups = Arc::clone(&self.snapshotting);
        let spawned = std::thread::Builder::new()
            .name("mwp-pg-snapshot".into())
            .spawn({
                let group = group.clone();
                let groups = Arc::clone(&groups);
                move || {
                    let mut due = due;
                    loop {
                        let stored = due.sign_stored().and_then(|(bytes, hash)| {
                            store_due_snapshot(&pool, key, &group, due.seq(), &hash, &bytes)
                        });
                        if let Err(e) = stored {
                            tracing::warn!(group = %group, seq = due.seq(), error = %e, "storing a periodic snapshot failed; the group is read from its previous snapshot and the log");
                        }
                        let mut waiting = lock(&groups);
                        match waiting.get_mut(&group).and_then(Option::take) {
                            Some(next) => due = next,
                            None => {
                                waiting.remove(&group);
                                return;
                            }
                        }
                    }
                }
            });
        match spawned {
            Ok(handle) => {
                self.snapshot_threads
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let mut running = lock(&self.snapshots);
                running.retain(|h| !h.is_finished());
                running.push(handle);
            }
            Err(e) => {
                lock(&groups).remove(&group);
                tracing::warn!(error = %e, "no thread to store a periodic snapshot; it is skipped");
            }
        }
    }

    /// Waits until every periodic snapshot made due by a committed accept of this process
    /// is stored (or failed): for tests, and for a caller that wants them before it stops.
    pub fn wait_for_snapshots(&self) {
        let running = std::mem::take(&mut *lock(&self.snapshots));
        for handle in running {
            // A panicking snapshot thread stored nothing; the log is the truth.
            let _ = handle.join();
        }
    }

    /// Writes what an accepted command commits (its event applied to `state` already) in
    /// the open transaction: the event and the redaction's erasure.
    fn write(
        &self,
        tx: &mut Transaction<'_>,
        sql: &Statements,
        commit: &Commit,
        state: &GroupState,
    ) -> Result<(), Failure> {
        let event = &*commit.event;
        // As the file store's record limit: no event row is written that a read would refuse
        // as longer than any event.
        if commit.bytes.len() > MAX_RECORD_LEN as usize {
            return Err(Failure::fatal(Error::new(
                Code::Storage,
                format!(
                    "event is {} bytes; the store's record limit is {MAX_RECORD_LEN}",
                    commit.bytes.len()
                ),
            )));
        }
        let group = event.group.as_str();
        let seq = to_i64(event.seq, "seq")?;
        let deadline = deadline_of(state);
        let kind = event.kind.type_name();
        let receipt = canonical::to_vec(&event.receipt()).map_err(Error::from)?;
        let written: i64 = tx
            .query_one(
                &sql.append,
                &[
                    &group,
                    &state.org.as_str(),
                    &seq,
                    &event.id.to_hex(),
                    &deadline,
                    &state.archived,
                    &kind,
                    &commit.bytes,
                    &event.actor.as_str(),
                    &event.action.as_str(),
                    &receipt,
                ],
            )
            .map_err(db("appending the event"))
            .and_then(|r| Ok(column(&r, 0, &event.group, "the count of rows appended")?))?;
        if written != 1 {
            // Another writer moved the head: re-decide from the database.
            return Err(Failure {
                error: Error::new(
                    Code::Storage,
                    format!("group {group}: the head moved past seq {}", event.seq - 1),
                ),
                retry: true,
            });
        }
        if let Some(target) = commit.erase {
            let row = tx
                .query_opt(&sql.event_for_update, &[&group, &to_i64(target, "seq")?])
                .map_err(db("reading the event to redact"))?
                .ok_or_else(|| {
                    corrupt(
                        &event.group,
                        format!("event seq {target} to redact is not in the log"),
                    )
                })?;
            // Checked as every read of a row is: the redacted form of another row's bytes
            // is never written in the target's place.
            let bytes = event_bytes(&row, 0, &event.group, target)?.ok_or_else(|| {
                corrupt(
                    &event.group,
                    format!("the event row at seq {target}, column mwp_events.bytes: is NULL"),
                )
                .with("seq", target)
            })?;
            let mut old = verified_event(&event.group, target, bytes)?;
            old.redact()?;
            tx.execute(
                &sql.rewrite_event,
                &[&group, &to_i64(target, "seq")?, &old.to_cbor()?],
            )
            .map_err(db("erasing the redacted values"))?;
        }
        Ok(())
    }

    fn store_snapshot(
        &self,
        tx: &mut Transaction<'_>,
        sql: &Statements,
        state: &GroupState,
    ) -> Result<(u64, Hash, Vec<u8>), Failure> {
        let (bytes, hash) = Snapshot::build_stored(state, self.authority.secret_key())?;
        tx.execute(&sql.lock, &[&self.snapshot_lock_key(&state.group)])
            .map_err(db("locking the group's snapshots"))?;
        insert_snapshot(
            tx,
            sql,
            &state.group,
            to_i64(state.seq, "seq")?,
            &hash,
            &bytes,
        )
        .map_err(db("storing a snapshot"))?;
        Ok((state.seq, hash, bytes))
    }

    /// Takes a signed snapshot of `group` at its head now and stores it.
    pub fn take_snapshot(&self, group: &Id) -> Result<Vec<u8>> {
        self.snapshot_now(group).map(|(_, _, bytes)| bytes)
    }

    fn snapshot_now(&self, group: &Id) -> Result<(u64, Hash, Vec<u8>)> {
        self.locked(group, |this, tx, sql, slot| {
            let Some(state) = slot.state.as_ref() else {
                return Ok(Err(not_found(group)));
            };
            Ok(Ok(this.store_snapshot(tx, sql, state)?))
        })
    }

    /// The online window ([`authority::Policy::check_replay`]): `CURSOR_TOO_OLD` naming
    /// the latest snapshot when `after` is older than the window, taking one if there is
    /// none.
    fn check_replay(&self, group: &Id, after: u64, head: u64) -> Result<()> {
        let policy = self.authority.policy();
        // The latest snapshot is read only for a cursor older than the window.
        let latest = match policy.check_replay(group, after, head, None) {
            authority::Replay::Serve => return Ok(()),
            authority::Replay::TooOld(e) => return Err(e),
            authority::Replay::NeedSnapshot => self.latest_snapshot_ref(group)?,
        };
        match policy.check_replay(group, after, head, Some(latest)) {
            authority::Replay::TooOld(e) => Err(e),
            // With a snapshot known, the answer is to serve or to refuse.
            authority::Replay::Serve | authority::Replay::NeedSnapshot => Ok(()),
        }
    }

    /// The (seq, state hash) of the latest stored snapshot, checked, taking one if there is
    /// none.
    fn latest_snapshot_ref(&self, group: &Id) -> Result<(u64, Hash)> {
        match self.checked_snapshot(group)? {
            Some((verdict, _)) => Ok((verdict.seq, verdict.state_hash)),
            None => {
                let (seq, hash, _) = self.snapshot_now(group)?;
                Ok((seq, hash))
            }
        }
    }

    /// The latest stored snapshot of `group` at or below its head row (what its verified bytes
    /// hold) and its bytes, checked on this read ([`snapshot::checked_ref`]: the verdict on
    /// that version of the row kept, the rest checked again): `SNAPSHOT_INVALID` naming the
    /// group and the row's seq when it is not the group's own. `None` when there is none;
    /// `NOT_FOUND` for an unknown group.
    fn checked_snapshot(&self, group: &Id) -> Result<Option<(snapshot::Verdict, Vec<u8>)>> {
        let row = {
            let mut conn = self.pool.get()?;
            let (client, sql) = conn.parts();
            client
                .query_opt(&sql.snapshot, &[&group.as_str()])
                .map_err(|e| storage("reading the latest snapshot", &e))?
                .ok_or_else(|| not_found(group))?
        };
        let head = snapshot::Head::read(&row, group)?;
        let Some(stored) = snapshot::row_of(&row, group)? else {
            return Ok(None);
        };
        let verdict = snapshot::checked_ref(group, &self.public, &head, &stored, &self.verdicts)?;
        Ok(Some((verdict, stored.bytes.to_vec())))
    }

    /// Whether `group` has a head row here: what the router asks before every command of a
    /// group, to find which server holds it. Its head is not answered, so it is not checked
    /// against the log (the command's own reload does that); event rows without a head row, or
    /// past it, are `LOG_CORRUPT` as for every head read.
    pub(super) fn holds(&self, group: &Id) -> Result<bool> {
        let mut conn = self.pool.get()?;
        let (client, sql) = conn.parts();
        let row = client
            .query_one(&sql.head, &[&group.as_str()])
            .map_err(|e| storage("reading the group head", &e))?;
        Ok(head_row_seq(&row, group, 2)?.is_some())
    }

    /// The head seq of `group` (`None` when it does not exist), checked before it is
    /// answered as the rows it stands for are on every other read: the head row's id is
    /// that of the event row at its seq (decoded and verified), or, once the Group's plain
    /// history was removed, the head its signed manifest names; and no event row lies past
    /// it. Anything else is `LOG_CORRUPT` naming the group, never a head no verified row
    /// holds.
    fn checked_head(&self, group: &Id) -> Result<Option<u64>> {
        let mut conn = self.pool.get()?;
        let (client, sql) = conn.parts();
        let row = client
            .query_one(&sql.head_checked, &[&group.as_str()])
            .map_err(|e| storage("reading the group head", &e))?;
        let Some(seq) = head_row_seq(&row, group, 6)? else {
            return Ok(None);
        };
        let head = Hash::from_hex(column::<&str>(&row, 1, group, "mwp_groups.head")?)
            .map_err(|e| corrupt(group, format!("head is not a hash: {e}")))?;
        let (at, id) = match event_bytes(&row, 2, group, seq)? {
            Some(bytes) => (seq, verified_event(group, seq, bytes)?.id),
            None => match column::<Option<i64>>(&row, 4, group, "mwp_audit.seq")? {
                Some(removed) => {
                    let removed = to_u64(removed, group, "seq")?;
                    let manifest = column(&row, 5, group, "mwp_audit.manifest")?;
                    let manifest = self.check_removal(group, removed, manifest)?;
                    (manifest.seq, manifest.id)
                }
                None => {
                    return Err(corrupt(
                        group,
                        format!(
                            "its head row is at seq {seq}, but there is no event row at that seq"
                        ),
                    )
                    .with("seq", seq))
                }
            },
        };
        if (at, id) != (seq, head) {
            return Err(corrupt(
                group,
                format!(
                    "its head row says event {head} at seq {seq}, its log event {id} at seq {at}"
                ),
            )
            .with("seq", seq));
        }
        Ok(Some(seq))
    }
}

/// The `next_deadline` column of a group in `state`: its earliest lease deadline, none once
/// archived.
fn deadline_of(state: &GroupState) -> Option<i64> {
    match state.archived {
        true => None,
        false => state
            .next_deadline()
            .map(|d| i64::try_from(d).unwrap_or(i64::MAX)),
    }
}

/// The event a row of `mwp_events` (seq, bytes) holds, checked as a row another process may
/// have changed must be: its columns read as the schema says, its bytes decode and hash to
/// the event's id, and it is of `group` at the row's seq. Anything else is `LOG_CORRUPT`
/// naming the group and the seq.
fn event_row(row: &postgres::Row, group: &Id) -> Result<Event> {
    let seq = to_u64(column(row, 0, group, "mwp_events.seq")?, group, "seq")?;
    let bytes = event_bytes(row, 1, group, seq)?.ok_or_else(|| {
        corrupt(
            group,
            format!("the event row at seq {seq}, column mwp_events.bytes: is NULL"),
        )
        .with("seq", seq)
    })?;
    verified_event(group, seq, bytes)
}

/// The bytes of the event row of `group` at `seq`, as columns `i` (their length) and `i + 1`
/// (the bytes, NULL when longer than [`MAX_RECORD_LEN`]) read them (`sql::event_bytes`):
/// `None` when there is no such row (both NULL). A row longer than the largest event any
/// store holds is `LOG_CORRUPT` naming the group and the seq, its bytes never fetched nor
/// decoded; a column of another type is `LOG_CORRUPT` naming it.
pub(super) fn event_bytes<'a>(
    row: &'a postgres::Row,
    i: usize,
    group: &Id,
    seq: u64,
) -> Result<Option<&'a [u8]>> {
    let at = |e: &dyn std::fmt::Display| {
        corrupt(
            group,
            format!("the event row at seq {seq}, column mwp_events.bytes: {e}"),
        )
        .with("seq", seq)
    };
    let len: Option<i32> = row.try_get(i).map_err(|e| at(&e))?;
    if let Some(len) = len.filter(|n| i64::from(*n) > i64::from(MAX_RECORD_LEN)) {
        return Err(corrupt(
            group,
            format!(
                "the event row at seq {seq} is {len} bytes, longer than the largest event ({MAX_RECORD_LEN} bytes)"
            ),
        )
        .with("seq", seq));
    }
    row.try_get(i + 1).map_err(|e| at(&e))
}

/// The seq of `group`'s head row as a head statement reads it (column 0, NULL when there is
/// no head row), once [`no_rows_past`] holds for the highest seq of its event rows (column
/// `last`).
pub(super) fn head_row_seq(row: &postgres::Row, group: &Id, last: usize) -> Result<Option<u64>> {
    let last = column::<Option<i64>>(row, last, group, "the highest event seq")?;
    let seq = column::<Option<i64>>(row, 0, group, "mwp_groups.seq")?
        .map(|seq| to_u64(seq, group, "seq"))
        .transpose()?;
    no_rows_past(group, seq, last)?;
    Ok(seq)
}

/// That no event row of `group` lies past its head row (at `head`, `None` when there is no
/// head row) as `last`, the highest seq of its event rows, says: a head row moved behind its
/// events is damage, `LOG_CORRUPT` naming the group and both seqs, not a race worth another
/// attempt (appending at the next seq could only collide with the row already there).
fn no_rows_past(group: &Id, head: Option<u64>, last: Option<i64>) -> Result<()> {
    let Some(last) = last else { return Ok(()) };
    let last = to_u64(last, group, "seq")?;
    match head {
        Some(head) if last <= head => Ok(()),
        Some(head) => Err(corrupt(
            group,
            format!("its head row is at seq {head}, but its event rows go on to seq {last}"),
        )
        .with("seq", head.saturating_add(1))),
        None => Err(corrupt(
            group,
            format!("it has no head row, but its event rows go on to seq {last}"),
        )
        .with("seq", 1)),
    }
}

/// The event the `bytes` of the event row of `group` at `seq` hold, checked as [`event_row`]
/// checks it.
pub(super) fn verified_event(group: &Id, seq: u64, bytes: &[u8]) -> Result<Event> {
    let event = Event::from_cbor_verified(bytes).map_err(|e| {
        corrupt(
            group,
            format!("the event row at seq {seq} does not verify: {e}"),
        )
        .with("seq", seq)
    })?;
    if event.group != *group || event.seq != seq {
        return Err(corrupt(
            group,
            format!(
                "the event row at seq {seq} holds seq {} of group {}",
                event.seq, event.group
            ),
        )
        .with("seq", seq));
    }
    Ok(event)
}

/// How many of `rows` (read by [`sql::events_page`](super::sql::events_page), the rows
/// with seq > `after` counting toward its bytes) a page takes, by the core's rule
/// ([`authority::page_takes`]): the first counted row always, then each while the counted
/// rows before it hold fewer than [`authority::MAX_PAGE_BYTES`]. The rows past them came
/// without their bytes and are not read: the next page starts there.
pub(super) fn page_rows(rows: &[postgres::Row], group: &Id, after: u64) -> Result<usize> {
    let mut taken = 0u64;
    for (i, row) in rows.iter().enumerate() {
        let seq = to_u64(column(row, 0, group, "mwp_events.seq")?, group, "seq")?;
        if seq <= after {
            continue;
        }
        if !authority::page_takes(taken) {
            return Ok(i);
        }
        // A NULL length is a NULL column: reading the row says so.
        let len: Option<i32> = column(row, 1, group, "mwp_events.bytes")?;
        taken = taken.saturating_add(len.map_or(0, |n| u64::try_from(n).unwrap_or(0)));
    }
    Ok(rows.len())
}

/// The events of `rows` (seq, bytes) read for a page of at most `limit` events after
/// `after` (the row at `after` first, when there is one, for its id), each checked as the
/// rows of another process's writing must be: its bytes decode and hash to the event's id,
/// it is of `group` at its row's seq, the seqs run on from `after` without a gap, and each
/// chains to the one before. A short page that ends below `head` is a gap too, unless it
/// was `cut` where its bytes filled it ([`page_rows`]: a row follows it). Any of these is
/// `LOG_CORRUPT` naming the group and the seq, never a page served with a hole in it.
fn checked_page(
    group: &Id,
    after: u64,
    head: u64,
    limit: usize,
    rows: &[postgres::Row],
    cut: bool,
) -> Result<Vec<Event>> {
    let mut at = chain::Position::after(after);
    let mut page = Vec::with_capacity(rows.len().min(limit));
    for row in rows {
        if page.len() == limit {
            break;
        }
        let event = event_row(row, group)?;
        let seq = event.seq;
        if seq == after {
            at = chain::Position::at(after, event.id);
            continue;
        }
        match at.check(group, &event) {
            Ok(()) => {}
            // The event is of `group` at its row's seq (checked above): the rows skip.
            Err(chain::Break::Group | chain::Break::Seq { .. }) => {
                return Err(corrupt(
                    group,
                    format!("the event rows skip from seq {} to seq {seq}", at.seq),
                )
                .with("seq", at.next_seq()));
            }
            Err(chain::Break::Prev { seq, .. }) => {
                return Err(corrupt(
                    group,
                    format!(
                        "the event at seq {seq} does not chain to the one at seq {}",
                        at.seq
                    ),
                )
                .with("seq", seq));
            }
        }
        at.advance(&event);
        page.push(event);
    }
    if !cut && page.len() < limit && at.next_seq() <= head {
        return Err(corrupt(
            group,
            format!(
                "the event rows end at seq {}, but its head row is at seq {head}",
                at.seq
            ),
        )
        .with("seq", at.next_seq()));
    }
    Ok(page)
}

/// The group a `mwp_groups.group_id` names; `None` (logged) for one that is no ID: no store
/// wrote it, and, as a name under a file store's `groups/` that is no group directory, it is
/// no group (docs/decisions.md, "Damage in one group").
fn group_id(stored: &str) -> Option<Id> {
    match Id::new(stored) {
        Ok(group) => Some(group),
        Err(e) => {
            tracing::warn!(group_id = ?stored, error = %e, "a row of mwp_groups names no group; it is passed over");
            None
        }
    }
}

fn not_found(group: &Id) -> Error {
    Error::new(Code::NotFound, format!("group {group} does not exist"))
}

/// `host:port/dbname` of the first host: the default routing name of a server.
fn default_label(pg: &postgres::Config) -> String {
    let host = match pg.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        Some(postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = pg.get_ports().first().copied().unwrap_or(5432);
    let db = pg.get_dbname().or(pg.get_user()).unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

/// Reads the authority key row, creating it on first use; a given key must match it.
fn load_key(
    client: &mut postgres::Client,
    source: &KeySource,
    store_given: bool,
) -> Result<SecretKey> {
    let (candidate, store_secret) = match source {
        KeySource::Given(k) => ((**k).clone(), store_given),
        KeySource::Database => {
            let mut seed = [0u8; 32];
            getrandom::getrandom(&mut seed).map_err(|e| {
                Error::new(
                    Code::Storage,
                    format!("no randomness for a new authority key: {e}"),
                )
            })?;
            (SecretKey::from_bytes(&seed), true)
        }
    };
    let secret: Option<Vec<u8>> = store_secret.then(|| candidate.to_bytes().to_vec());
    client
        .execute(
            "INSERT INTO mwp_authority (id, public_key, secret_key) VALUES (1, $1, $2)
             ON CONFLICT (id) DO NOTHING",
            &[&candidate.public().to_hex(), &secret],
        )
        .map_err(|e| storage("storing the authority key", &e))?;
    let row = client
        .query_one(
            "SELECT public_key, secret_key FROM mwp_authority WHERE id = 1",
            &[],
        )
        .map_err(|e| storage("reading the authority key", &e))?;
    let public: String = column_of(&row, 0, "mwp_authority.public_key")?;
    let stored: Option<Vec<u8>> = column_of(&row, 1, "mwp_authority.secret_key")?;
    match source {
        KeySource::Given(k) if k.public().to_hex() != public => Err(Error::new(
            Code::Storage,
            format!(
                "this database's groups are signed by authority key {public}, not the configured {}; configure that key",
                k.public()
            ),
        )),
        KeySource::Given(k) => Ok((**k).clone()),
        KeySource::Database => {
            let seed: [u8; 32] = stored
                .as_deref()
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| {
                    Error::new(
                        Code::Storage,
                        format!(
                            "this database keeps only the public authority key {public}; give the secret key by configuration"
                        ),
                    )
                })?;
            let key = SecretKey::from_bytes(&seed);
            if key.public().to_hex() != public {
                return Err(Error::new(
                    Code::Storage,
                    "the stored authority secret key does not match its public key",
                ));
            }
            Ok(key)
        }
    }
}

impl AuthorityService for PostgresAuthority {
    /// Decides `cmd` in one transaction with the commands of its group that arrive while
    /// another transaction of the group is written (the `batch` module).
    fn submit(&self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        let group = &cmd.group;
        self.entry(group)
            .queue
            .submit(cmd, now_ms, |batch| self.decide_batch(group, batch))
    }

    fn events(&self, group: &Id, after: u64, limit: usize) -> Result<Vec<Event>> {
        let (head, head_id, sealed) = self.head_sealed(group)?.ok_or_else(|| not_found(group))?;
        match sealed {
            // The plain history was removed once sealed: only what follows the final
            // snapshot is served (nothing: the Group is archived).
            Some((seq, hash)) => {
                if let authority::Replay::TooOld(_) =
                    authority::Policy::check_replay_sealed(group, after, seq, hash)
                {
                    // Referred to as checked on this read, not as its state_hash column says.
                    let (at, hash) = self.latest_snapshot_ref(group)?;
                    if at != seq {
                        return Err(corrupt(
                            group,
                            format!("its plain history was removed at seq {seq}, but its latest snapshot is at seq {at}"),
                        ));
                    }
                    if let authority::Replay::TooOld(e) =
                        authority::Policy::check_replay_sealed(group, after, at, hash)
                    {
                        return Err(e);
                    }
                }
            }
            None => self.check_replay(group, after, head)?,
        }
        if limit == 0 || after >= head {
            return Ok(Vec::new());
        }
        let mut conn = self.pool.get()?;
        let (client, sql) = conn.parts();
        // From the row at `after` itself, when there is one: the first event served must
        // chain to its id. Never past the head row.
        let from = after.saturating_sub(1);
        let want = i64::try_from(limit.saturating_add(usize::from(after > 0))).unwrap_or(i64::MAX);
        let rows = client
            .query(
                &sql.events_page,
                &[
                    &group.as_str(),
                    &to_i64(from, "after")?,
                    &to_i64(head, "seq")?,
                    &want,
                    &to_i64(after, "after")?,
                ],
            )
            .map_err(|e| storage("reading events", &e))?;
        let taken = page_rows(&rows, group, after)?;
        let page = checked_page(
            group,
            after,
            head,
            limit,
            &rows[..taken],
            taken < rows.len(),
        )?;
        // A page that reaches the head row ends at the event it names.
        match page.last() {
            Some(last) if last.seq == head && last.id != head_id => Err(corrupt(
                group,
                format!(
                    "its head row says event {head_id} at seq {head}, its log event {} at seq {head}",
                    last.id
                ),
            )
            .with("seq", head)),
            _ => Ok(page),
        }
    }

    /// The receipt as the group's state holds it, brought up to the database's head (as
    /// [`AuthorityService::member`]): from verified events and snapshots, as the file store
    /// answers it, never from a `mwp_receipts` row that nothing checks.
    fn receipt(&self, group: &Id, actor: &Id, action: &Id) -> Result<Option<Receipt>> {
        self.read_state(group, |s| {
            s.and_then(|s| s.receipt(actor.as_str(), action.as_str()))
        })
    }

    fn member(&self, group: &Id, actor: &Id) -> Result<Option<mwp_core::state::Member>> {
        self.read_state(group, |s| s.and_then(|s| s.members.get(actor).cloned()))
    }

    fn latest_snapshot(&self, group: &Id) -> Result<Vec<u8>> {
        match self.checked_snapshot(group)? {
            Some((_, bytes)) => Ok(bytes),
            None => self.take_snapshot(group),
        }
    }

    fn stored_snapshot(&self, group: &Id) -> Result<Option<Vec<u8>>> {
        match self.checked_snapshot(group) {
            Ok(stored) => Ok(stored.map(|(_, bytes)| bytes)),
            Err(e) if e.code == Code::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn groups(&self) -> Result<Vec<Id>> {
        let mut conn = self.pool.get()?;
        let (client, sql) = conn.parts();
        let rows = client
            .query(&sql.groups, &[])
            .map_err(|e| storage("listing groups", &e))?;
        let mut groups = Vec::with_capacity(rows.len());
        for row in &rows {
            let g: &str = column_of(row, 0, "mwp_groups.group_id")?;
            if let Some(group) = group_id(g) {
                groups.push(group);
            }
        }
        Ok(groups)
    }

    /// Checked as every read of a row is (`checked_head`: against the event row at its seq
    /// or the signed manifest, and no event row past it): the group list (`GET /v1/groups`),
    /// the signed head's cadence and the checks that ask whether a group exists answer no
    /// head that is not its log's.
    fn head_seq(&self, group: &Id) -> Result<u64> {
        Ok(self.checked_head(group)?.unwrap_or(0))
    }

    fn next_deadline(&self) -> Result<Option<(Id, u64)>> {
        self.next_deadline_except(&[])
    }

    fn next_deadline_except(&self, skip: &[Id]) -> Result<Option<(Id, u64)>> {
        let mut conn = self.pool.get()?;
        let (client, sql) = conn.parts();
        // A row whose group_id is no ID is passed over (and looked past: one more query per
        // such row), so that it cannot stop the ticks of every other group.
        let mut skip: Vec<String> = skip.iter().map(|g| g.as_str().to_owned()).collect();
        loop {
            let row = if skip.is_empty() {
                client.query_opt(&sql.next_deadline, &[])
            } else {
                client.query_opt(&sql.next_deadline_except, &[&skip])
            }
            .map_err(|e| storage("reading the next deadline", &e))?;
            let Some(row) = row else { return Ok(None) };
            let g: &str = column_of(&row, 0, "mwp_groups.group_id")?;
            let Some(group) = group_id(g) else {
                skip.push(g.to_owned());
                continue;
            };
            let at: i64 = column(&row, 1, &group, "mwp_groups.next_deadline")?;
            let at = u64::try_from(at).unwrap_or(0);
            return Ok(Some((group, at)));
        }
    }

    fn authority_key(&self) -> PublicKey {
        self.public
    }

    fn tick(&self, group: &Id, now_ms: u64) -> Result<Option<Decision>> {
        let mut after = AfterCommit::default();
        let decision = self.locked(group, |this, tx, sql, slot| {
            // A transaction tried again decides the tick again: what an attempt that did not
            // commit left for after its commit is not done.
            after = AfterCommit::default();
            if slot.state.is_none() {
                return Ok(Err(not_found(group)));
            }
            // The driver names the tick after the head it is decided at (under the group's
            // lock): a tick another server sent first moved the head already.
            let driver = Authority::restore(this.authority.clone(), slot.state.take());
            let tick = driver.poll_tick(now_ms);
            slot.state = driver.into_state();
            let cmd = match tick {
                Ok(Some(cmd)) => cmd,
                Ok(None) => {
                    // Nothing is due at the head. A deadline row that says otherwise was not
                    // written by an accept (each writes the state's): it is put back to the
                    // state's, or the tick loop would come back for this group before any
                    // other, for ever.
                    if let Some(state) = &slot.state {
                        tx.execute(&sql.put_deadline, &[&group.as_str(), &deadline_of(state)])
                            .map_err(db("putting the next deadline back"))?;
                    }
                    return Ok(Ok(None));
                }
                Err(e) => return Ok(Err(e)),
            };
            Ok(this
                .decide(tx, sql, slot, &cmd, now_ms, &mut after)?
                .map(Some))
        })?;
        self.after_commit(group, after, now_ms);
        Ok(decision)
    }

    fn sign_head(&self, group: &Id, now_ms: u64) -> Result<mwp_core::head::SignedHead> {
        // The cached state, brought up to what the database committed, under the group's
        // slot (a command being decided by this process finishes first).
        let (org, seq, id) = self
            .read_state(group, |s| s.map(|s| (s.org.clone(), s.seq, s.head)))?
            .ok_or_else(|| not_found(group))?;
        mwp_core::head::SignedHead::sign(&org, group, seq, id, now_ms, self.authority.secret_key())
    }
}

/// Runs transcripts against PostgreSQL: `restart` forgets the caches and the connections.
impl Host for PostgresAuthority {
    fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        AuthorityService::submit(self, cmd, now_ms)
    }
    fn restart(&mut self) -> Result<()> {
        PostgresAuthority::restart(self);
        Ok(())
    }
    fn state(&self, group: &Id) -> Option<GroupState> {
        PostgresAuthority::state(self, group).ok().flatten()
    }
    fn work_state(&self, group: &Id, work: &Id) -> Option<WorkState> {
        self.read_state(group, |s| Some(s?.work.get(work)?.state))
            .ok()
            .flatten()
    }
    fn advance(&mut self, group: &Id, now_ms: u64) -> Result<Vec<Decision>> {
        crate::service::advance(self, group, now_ms)
    }
}
