//! The durable File store (SPEC §9): one directory per Group holding an append-only,
//! segmented, checksummed log, a redaction overlay and signed snapshots; the authority key in
//! a 0600 file. docs/format.md describes the bytes and the commit protocol.
//!
//! ```text
//! DATA/authority.key                      64 hex digits + "\n", mode 0600
//! DATA/groups/<group dir>/00000000000000000001.seg   log segment, named by its first seq
//! DATA/groups/<group dir>/00000000000000100000.snap  signed snapshot, named by its seq
//! DATA/groups/<group dir>/redactions.log             redacted forms of erased events
//! ```
//!
//! [`FileStore`] implements [`AuthorityService`]: a receipt is returned only after its event
//! is durable (`fdatasync`, and a directory `fsync` wherever a file is created or renamed);
//! concurrent commands share syncs (group commit), and so do the commits of different groups
//! (`shared_sync`: one `syncfs` for a round of many groups); a storage error is sticky.
//! Reopening streams the log from the latest snapshot, trims a torn tail, and stops with
//! `LOG_CORRUPT` naming file and offset on any other damage. [`fsck()`] checks a data
//! directory without changing it. [`agent_journal`] is the agent side's store, on the same
//! [`backend`] and with the same record framing.

pub mod agent_journal;
pub mod backend;
pub mod format;
pub mod fsck;
mod group;
pub mod lock;
mod parked;
mod shared_sync;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use mwp_core::authority::{self, Authority, Step};
use mwp_core::transcript::Host;
use mwp_core::{
    Code, Command, Decision, Error, GroupState, Hash, Id, Limits, PublicKey, Receipt, Result,
    SecretKey, WorkState,
};

use crate::service::AuthorityService;
use backend::{Backend, FsBackend};
use format::{group_dir_name, group_from_dir_name, open_file, storage, GROUPS_DIR, KEY_NAME};
use group::{lock, GroupLog};
use mwp_core::audit::OrgPolicies;

pub use fsck::{fsck, fsck_with, FsckReport, GroupSummary, SealSummary};

/// How a [`FileStore`] behaves.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Replay requests older than this many events answer `CURSOR_TOO_OLD` (see
    /// [`mwp_core::authority::Replay`]); `None` serves the whole log.
    pub online_events: Option<u64>,
    /// Take a signed snapshot every this many events (and always on archive).
    pub snapshot_every: Option<u64>,
    /// How many snapshot files to keep per group (at least 1).
    pub snapshots_kept: usize,
    /// A segment that reached this size is closed and a new one started.
    pub segment_bytes: u64,
    /// Zero bytes written ahead of the last record, in the same write as the batch that
    /// needs them, so that most appends overwrite space the file already has: an
    /// `fdatasync` that does not also have to record a new file size is faster (about a
    /// third on this project's reference disk; docs/bench-store.md). `0` appends at the end
    /// of the file every time. Capped by `segment_bytes`.
    pub reserve_bytes: u64,
    /// Command limits.
    pub limits: Limits,
    /// The authority key to use. `None`: the key in `DATA/authority.key`, generated on first
    /// open. If given and the directory already has another key, opening fails.
    pub authority_key: Option<SecretKey>,
    /// Write cadence snapshots on a background thread (archive snapshots are always written
    /// before the receipt is returned).
    pub background_snapshots: bool,
    /// Open for reading only (`mwp replay`, `snapshot`, `fsck`): no lock is taken and nothing
    /// is ever written, trimmed, renamed or removed; the log is read to its last complete
    /// record, which makes it safe beside a live writer. Commands are refused (`STORAGE`).
    pub read_only: bool,
    /// The Organizations' archival policies (SPEC §6a): a group of an org named here is
    /// sealed when archived (`None`: every history stays in the clear).
    pub org_policy: Option<Arc<OrgPolicies>>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            online_events: None,
            snapshot_every: Some(authority::DEFAULT_SNAPSHOT_EVERY),
            snapshots_kept: 2,
            segment_bytes: 64 << 20,
            reserve_bytes: 4 << 20,
            limits: Limits::default(),
            authority_key: None,
            background_snapshots: true,
            read_only: false,
            org_policy: None,
        }
    }
}

/// What opening a data directory found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Torn tails trimmed: (file, offset trimmed at, bytes removed).
    pub trimmed: Vec<(String, u64, u64)>,
    /// Snapshots that did not verify and were passed over: (file, reason).
    pub skipped_snapshots: Vec<(String, String)>,
    /// Work a crash had interrupted and the open finished (erasures, final snapshots).
    pub repaired: Vec<String>,
    /// Interrupted group creations (`groups/.new-*`, docs/format.md), removed.
    pub removed: Vec<String>,
}

/// What every group of a store shares.
pub(crate) struct Ctx {
    backend: Arc<dyn Backend>,
    /// The authority's key and policy (limits, snapshot cadence, online window): what the
    /// driver of every group decides with.
    authority: Arc<authority::Config>,
    snapshots_kept: usize,
    segment_bytes: u64,
    reserve_bytes: u64,
    background_snapshots: bool,
    read_only: bool,
    sticky: Mutex<Option<Error>>,
    /// The sync rounds every group's commit shares.
    shared_sync: shared_sync::SharedSync,
    /// The groups waiting for the store's committer.
    commit_queue: Mutex<group::CommitQueue>,
    /// Checks that the writer lock's owner record still names this process, before each
    /// write batch (or commit round) and group creation; `None` without a lock (another
    /// backend than the real file system, or read-only).
    owner: Option<lock::OwnerCheck>,
}

impl Ctx {
    /// `STORAGE` unless this writer still holds its directory ([`lock::OwnerCheck::check`]).
    fn check_owner(&self) -> Result<()> {
        self.owner.as_ref().map_or(Ok(()), lock::OwnerCheck::check)
    }

    /// [`Ctx::check_sticky`], then [`Ctx::check_owner`]: what a write outside a commit round
    /// asks first (a snapshot, a seal, the expiry of an audit log, the removal of a plain
    /// history), so that a writer that lost its directory writes none of them either.
    fn check_writer(&self) -> Result<()> {
        self.check_sticky()?;
        self.check_owner()
    }

    fn check_sticky(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::new(
                Code::Storage,
                "the store is open read-only; commands go to the server that holds it",
            ));
        }
        match &*lock(&self.sticky) {
            None => Ok(()),
            Some(e) => Err(Error::new(
                Code::Storage,
                format!(
                    "the store refuses writes after a storage failure ({}); restart it",
                    e.message
                ),
            )),
        }
    }

    fn set_sticky(&self, e: Error) {
        let mut s = lock(&self.sticky);
        if s.is_none() {
            *s = Some(e);
        }
    }
}

/// The durable file-backed authority.
pub struct FileStore {
    root: PathBuf,
    ctx: Arc<Ctx>,
    opts: StoreOptions,
    groups: RwLock<BTreeMap<Id, Arc<GroupLog>>>,
    /// Groups a read-only open could not open, with the reason: every read naming one of
    /// them fails with it, and the other groups are read as usual (a writer's open stops at
    /// the first such group instead). docs/decisions.md, "Damage in one group".
    damaged: BTreeMap<Id, Error>,
    creating: Mutex<()>,
    report: OpenReport,
    /// The writer lock, held for as long as the store is open (none when read-only or on a
    /// backend other than the real file system).
    dir_lock: Option<lock::DirLock>,
}

impl std::fmt::Debug for FileStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileStore")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

fn io_err(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> Error {
    move |e| storage(what, e)
}

/// The times of every `fdatasync` and directory `fsync` the file store has made on the real
/// file system in this process, in seconds: `mwp_fsync_seconds` of `GET /metrics`.
pub fn fsync_seconds() -> prometheus_client::metrics::histogram::Histogram {
    use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
    static FSYNC: std::sync::LazyLock<Histogram> =
        // 50 µs … ~6.5 s.
        std::sync::LazyLock::new(|| Histogram::new(exponential_buckets(0.00005, 2.0, 18)));
    FSYNC.clone()
}

/// `fsync` of a directory on the real file system.
pub(crate) fn sync_dir_path(dir: &Path) -> Result<()> {
    FsBackend
        .sync_dir(dir)
        .map_err(io_err(format!("sync {}", dir.display())))
}

/// The prefix of a group directory being created (docs/format.md, "Creating a group"): the
/// directory is renamed to its group's name once its first segment is durable.
pub const NEW_GROUP_PREFIX: &str = ".new-";

/// A fresh Ed25519 secret key from the operating system's randomness.
pub fn generate_key() -> Result<SecretKey> {
    let mut seed = [0u8; 32];
    getrandom::getrandom(&mut seed)
        .map_err(|e| Error::new(Code::Storage, format!("no randomness for a key: {e}")))?;
    Ok(SecretKey::from_bytes(&seed))
}

/// Reads (or creates) the authority key file of a data directory.
fn load_or_create_key(
    be: &dyn Backend,
    root: &Path,
    given: Option<&SecretKey>,
) -> Result<SecretKey> {
    let path = root.join(KEY_NAME);
    // Anything at the name is read as the key, and refused unless it is one: a FIFO, a
    // directory or a link to nothing there is never replaced by a new key (the groups name
    // the key they hold).
    if be.is_file(&path) || be.is_taken(&path) {
        let key = read_key_file(be, &path)?;
        if let Some(g) = given {
            if g.public() != key.public() {
                return Err(Error::new(
                    Code::Storage,
                    format!(
                        "{} holds the key {}, not the requested {}; use another data directory",
                        path.display(),
                        key.public(),
                        g.public()
                    ),
                ));
            }
        }
        return Ok(key);
    }
    let key = match given {
        Some(k) => k.clone(),
        None => generate_key()?,
    };
    let tmp = root.join(format!("{KEY_NAME}.tmp"));
    if be.is_file(&tmp) {
        be.remove(&tmp)
            .map_err(io_err(format!("remove {}", tmp.display())))?;
    }
    let f = be
        .create(&tmp, 0o600)
        .map_err(io_err(format!("create {}", tmp.display())))?;
    let text = format!("{}\n", hex::encode(key.to_bytes()));
    f.write_at(0, text.as_bytes())
        .map_err(io_err(format!("write {}", tmp.display())))?;
    f.sync_data()
        .map_err(io_err(format!("sync {}", tmp.display())))?;
    be.rename(&tmp, &path)
        .map_err(io_err(format!("rename {}", tmp.display())))?;
    be.sync_dir(root)
        .map_err(io_err(format!("sync {}", root.display())))?;
    Ok(key)
}

/// Reads a key file: 64 lowercase hex digits and a newline, mode 0600.
pub fn read_key_file(be: &dyn Backend, path: &Path) -> Result<SecretKey> {
    // Opened first: what is not a regular file is named by its type, not by its mode.
    let f = open_file(be, path)?;
    if let Some(mode) = be
        .mode(path)
        .map_err(io_err(format!("stat {}", path.display())))?
    {
        if mode & 0o077 != 0 {
            return Err(Error::new(
                Code::Storage,
                format!(
                    "{} has mode {mode:o}; a key file must be 0600 (chmod 600 it)",
                    path.display()
                ),
            ));
        }
    }
    let len = f
        .len()
        .map_err(io_err(format!("size of {}", path.display())))?;
    let bad = || {
        Error::new(
            Code::Storage,
            format!(
                "{} is not 64 lowercase hex digits and a newline",
                path.display()
            ),
        )
    };
    if len != 65 {
        return Err(bad());
    }
    let mut buf = [0u8; 65];
    f.read_at(0, &mut buf)
        .map_err(io_err(format!("read {}", path.display())))?;
    if buf[64] != b'\n' || buf[..64].iter().any(|b| b.is_ascii_uppercase()) {
        return Err(bad());
    }
    let mut seed = [0u8; 32];
    hex::decode_to_slice(&buf[..64], &mut seed).map_err(|_| bad())?;
    Ok(SecretKey::from_bytes(&seed))
}

impl FileStore {
    /// Opens (creating if needed) a data directory on the real file system, taking its
    /// writer lock (see [`lock`]) before anything is read; a directory another writer holds
    /// is refused at once with `STORAGE`. With [`StoreOptions::read_only`] no lock is taken
    /// and nothing is created.
    pub fn open(dir: impl AsRef<Path>, opts: StoreOptions) -> Result<FileStore> {
        let dir = dir.as_ref();
        if opts.read_only {
            return Self::open_read_only(Arc::new(FsBackend), dir, opts);
        }
        if !dir.is_dir() {
            create_dir(&FsBackend, dir)?;
        }
        let dir_lock = lock::DirLock::acquire(dir)?;
        Self::open_inner(Arc::new(FsBackend), dir, opts, Some(dir_lock))
    }

    /// Opens a data directory on any [`Backend`] (no writer lock: the lock is an OS lock on
    /// the real file system, taken by [`FileStore::open`]).
    pub fn open_with(
        backend: Arc<dyn Backend>,
        dir: &Path,
        opts: StoreOptions,
    ) -> Result<FileStore> {
        if opts.read_only {
            return Self::open_read_only(backend, dir, opts);
        }
        Self::open_inner(backend, dir, opts, None)
    }

    /// A read-only open beside a live writer: a record the writer changes while it is read
    /// (an erasure zeroing a record after the overlay was read) reads as damage once, so a
    /// `LOG_CORRUPT` open is tried again; damage that is really there stays.
    fn open_read_only(
        backend: Arc<dyn Backend>,
        dir: &Path,
        opts: StoreOptions,
    ) -> Result<FileStore> {
        let mut tries = 0;
        loop {
            match Self::open_inner(backend.clone(), dir, opts.clone(), None) {
                Err(e) if e.code == Code::LogCorrupt && tries < 3 => tries += 1,
                Ok(s) if tries < 3 && s.damaged.values().any(|e| e.code == Code::LogCorrupt) => {
                    tries += 1
                }
                other => return other,
            }
        }
    }

    fn open_inner(
        backend: Arc<dyn Backend>,
        dir: &Path,
        opts: StoreOptions,
        dir_lock: Option<lock::DirLock>,
    ) -> Result<FileStore> {
        let be = &*backend;
        let read_only = opts.read_only;
        if !be.is_dir(dir) {
            if read_only {
                return Err(Error::new(
                    Code::Storage,
                    format!("{} is not a data directory", dir.display()),
                ));
            }
            create_dir(be, dir)?;
        }
        let key = if read_only {
            read_key_file(be, &dir.join(KEY_NAME))?
        } else {
            load_or_create_key(be, dir, opts.authority_key.as_ref())?
        };
        let groups_dir = dir.join(GROUPS_DIR);
        if !be.is_dir(&groups_dir) && be.is_taken(&groups_dir) {
            // Something else at the name (a link to nothing included): not taken for a store
            // without groups.
            return Err(Error::new(
                Code::Storage,
                format!(
                    "{} is not a directory: the data directory is damaged",
                    groups_dir.display()
                ),
            ));
        }
        if !be.is_dir(&groups_dir) && !read_only {
            create_dir(be, &groups_dir)?;
        }
        // Opened before any group is opened or written, so that its syncs report every
        // later write-back failure of the file system.
        let filesystem = if read_only || !be.is_dir(&groups_dir) {
            None
        } else {
            be.filesystem_sync(&groups_dir)
                .map_err(io_err(format!("open {}", groups_dir.display())))?
        };
        let ctx = Arc::new(Ctx {
            backend: backend.clone(),
            authority: authority::Config::new(
                key,
                authority::Policy {
                    limits: opts.limits.clone(),
                    snapshot_every: opts.snapshot_every,
                    online_events: opts.online_events,
                    audit: opts.org_policy.clone(),
                },
            ),
            snapshots_kept: opts.snapshots_kept,
            segment_bytes: opts.segment_bytes,
            reserve_bytes: opts.reserve_bytes.min(opts.segment_bytes),
            background_snapshots: opts.background_snapshots,
            read_only,
            sticky: Mutex::new(None),
            shared_sync: shared_sync::SharedSync::new(filesystem),
            commit_queue: Mutex::new(group::CommitQueue::default()),
            owner: dir_lock.as_ref().map(|l| l.owner_check().clone()),
        });
        let mut report = OpenReport::default();
        let mut groups = BTreeMap::new();
        let mut damaged = BTreeMap::new();
        let names = if be.is_dir(&groups_dir) {
            be.list(&groups_dir)
                .map_err(io_err(format!("list {}", groups_dir.display())))?
        } else {
            Vec::new()
        };
        for name in names {
            let path = groups_dir.join(&name);
            if name.starts_with(NEW_GROUP_PREFIX) && be.is_dir(&path) {
                // A creation that never reached its rename: nothing in it was acknowledged.
                if !read_only {
                    remove_dir(be, &path)?;
                    be.sync_dir(&groups_dir)
                        .map_err(io_err(format!("sync {}", groups_dir.display())))?;
                    report.removed.push(path.display().to_string());
                }
                continue;
            }
            let Some(id) = group_from_dir_name(&name) else {
                continue;
            };
            if !be.is_dir(&path) {
                continue;
            }
            match GroupLog::open(ctx.clone(), path.clone(), id.clone(), &mut report) {
                Ok(g) => {
                    groups.insert(id, g);
                }
                // A reader keeps the other groups readable; each read of this one fails.
                Err(e) if read_only => {
                    damaged.insert(id, group::in_group_dir(&path, e));
                }
                Err(e) => return Err(group::in_group_dir(&path, e)),
            }
        }
        Ok(FileStore {
            root: dir.to_path_buf(),
            ctx,
            opts,
            groups: RwLock::new(groups),
            damaged,
            creating: Mutex::new(()),
            report,
            dir_lock,
        })
    }

    /// What the open found and repaired.
    pub fn report(&self) -> &OpenReport {
        &self.report
    }

    /// The data directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn group(&self, id: &Id) -> Option<Arc<GroupLog>> {
        self.groups
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    /// The error a read-only open found in group `id`, if it could not open it.
    fn check_damaged(&self, id: &Id) -> Result<()> {
        match self.damaged.get(id) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn known(&self, id: &Id) -> Result<Arc<GroupLog>> {
        self.check_damaged(id)?;
        self.group(id)
            .ok_or_else(|| Error::new(Code::NotFound, format!("group {id} does not exist")))
    }

    /// The durable state of a group (a copy).
    pub fn state(&self, group: &Id) -> Result<Option<GroupState>> {
        self.check_damaged(group)?;
        match self.group(group) {
            None => Ok(None),
            Some(g) => g.state().map(Some),
        }
    }

    /// Hash of a group's durable state.
    pub fn state_hash(&self, group: &Id) -> Result<Option<Hash>> {
        match self.state(group)? {
            None => Ok(None),
            Some(s) => s.hash().map(Some),
        }
    }

    /// Takes a signed snapshot of a group now (of its durable state) and returns its seq.
    pub fn snapshot_now(&self, group: &Id) -> Result<u64> {
        let g = self.known(group)?;
        let state = g.state()?;
        Ok(g.write_snapshot(&state)?.seq)
    }

    /// The sealed audit artifact of a group (`audit.mwpa`, SPEC §6a), if it has one.
    pub fn audit_artifact(&self, group: &Id) -> Result<Option<Vec<u8>>> {
        self.known(group)?.audit_artifact()
    }

    /// Deletes every sealed artifact whose retention has passed at `now_ms`, each leaving a
    /// tombstone signed by the authority (`audit.tombstone`); with `dry_run`, deletes nothing.
    /// Returns the manifests of the artifacts deleted (or that would be), by group.
    pub fn expire_audit(
        &self,
        now_ms: u64,
        dry_run: bool,
    ) -> Result<Vec<mwp_core::audit::Manifest>> {
        let groups: Vec<Arc<GroupLog>> = self
            .groups
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        let mut out = Vec::new();
        for g in groups {
            if let Some(m) = g.expire_audit(now_ms, dry_run)? {
                out.push(m);
            }
        }
        Ok(out)
    }

    /// Writes `events` (stored bytes, seq 1 first, already verified: a chain from genesis)
    /// as the log of a group this store does not hold yet, then reopens the store, which
    /// replays and checks it like any other (and, for an archived group, signs its final
    /// snapshot with this store's key). What `mwp audit open --out DIR` restores into.
    pub fn restore_group(self, events: &[Vec<u8>]) -> Result<FileStore> {
        let first = events
            .first()
            .ok_or_else(|| Error::malformed("nothing to restore: no event"))?;
        let genesis = mwp_core::Event::from_cbor_verified(first)?;
        if self.group(&genesis.group).is_some() {
            return Err(Error::new(
                Code::AlreadyExists,
                format!(
                    "group {} is already in {}; restore into another directory",
                    genesis.group,
                    self.root.display()
                ),
            ));
        }
        let be = self.ctx.backend.clone();
        let groups = self.root.join(GROUPS_DIR);
        let name = group_dir_name(&genesis.group);
        let building = groups.join(format!("{NEW_GROUP_PREFIX}{name}"));
        create_dir(&*be, &building)?;
        let mut data = mwp_core::log_format::FileHeader {
            magic: mwp_core::log_format::SEGMENT_MAGIC,
            first_seq: 1,
            prev: Hash::ZERO,
            group: genesis.group.clone(),
        }
        .encode()
        .to_vec();
        for (i, bytes) in events.iter().enumerate() {
            mwp_core::log_format::encode_record(&mut data, i as u64 + 1, i as u64 + 1, bytes);
        }
        group::write_new_file(&self.ctx, &building, &format::segment_name(1), &data)?;
        let dir = groups.join(&name);
        be.rename(&building, &dir)
            .map_err(io_err(format!("rename {}", building.display())))?;
        be.sync_dir(&groups)
            .map_err(io_err(format!("sync {}", groups.display())))?;
        self.reopen()
    }

    /// Closes the store and opens the directory again, as a restart would.
    pub fn reopen(mut self) -> Result<FileStore> {
        let backend = self.ctx.backend.clone();
        let root = self.root.clone();
        let mut opts = self.opts.clone();
        opts.authority_key = Some(self.ctx.authority.secret_key().clone());
        // The writer lock stays held across the restart.
        let dir_lock = self.dir_lock.take();
        drop(self);
        if opts.read_only {
            return FileStore::open_read_only(backend, &root, opts);
        }
        FileStore::open_inner(backend, &root, opts, dir_lock)
    }

    /// Creates a group from its `open_group` command.
    fn create(&self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        let _one_at_a_time = lock(&self.creating);
        if let Some(g) = self.group(&cmd.group) {
            return g.submit(cmd, now_ms);
        }
        self.ctx.check_sticky()?;
        let mut driver = Authority::new(self.ctx.authority.clone());
        // Only an open_group naming this authority's key is accepted before genesis.
        let commit = match driver.handle_command(cmd, now_ms)? {
            Step::Accepted(commit) => commit,
            other => return Ok(other.into_decision()),
        };
        let dir = self.root.join(GROUPS_DIR).join(group_dir_name(&cmd.group));
        // A writer that lost the directory to another creates nothing under it.
        let created = self
            .ctx
            .check_owner()
            .and_then(|()| GroupLog::create(self.ctx.clone(), dir, driver, &commit));
        let g = created.inspect_err(|e| {
            if e.code == Code::Storage {
                self.ctx.set_sticky(e.clone());
            }
        })?;
        self.groups
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(g.id().clone(), g);
        Ok(commit.into_decision())
    }
}

/// Creates a directory (0700) and makes its entry durable.
fn create_dir(be: &dyn Backend, dir: &Path) -> Result<()> {
    be.create_dir(dir)
        .map_err(io_err(format!("create {}", dir.display())))?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        be.sync_dir(parent)
            .map_err(io_err(format!("sync {}", parent.display())))?;
    }
    Ok(())
}

fn remove_dir(be: &dyn Backend, path: &Path) -> Result<()> {
    for n in be
        .list(path)
        .map_err(io_err(format!("list {}", path.display())))?
    {
        let p = path.join(&n);
        be.remove(&p)
            .map_err(io_err(format!("remove {}", p.display())))?;
    }
    be.remove(path)
        .map_err(io_err(format!("remove {}", path.display())))
}

impl AuthorityService for FileStore {
    fn audit_manifest(&self, group: &Id) -> Result<Option<mwp_core::audit::Manifest>> {
        self.check_damaged(group)?;
        match self.group(group) {
            Some(g) => g.audit_manifest(),
            None => Ok(None),
        }
    }

    fn submit(&self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        match self.group(&cmd.group) {
            Some(g) => g.submit(cmd, now_ms),
            None => self.create(cmd, now_ms),
        }
    }

    /// A command to an open group is decided on the calling thread (its signature checked
    /// there); the answer waits for a committer on the blocking pool that flushes whole
    /// batches. One whose event erases, snapshots or seals completes on a blocking thread.
    /// Opening a group is left to `submit`.
    fn submit_staged(&self, cmd: &Command, now_ms: u64) -> Option<crate::service::Staged> {
        let g = self.group(&cmd.group)?;
        let decided = match g.decide(cmd, now_ms) {
            Ok(d) => d,
            Err(e) => return Some(Box::pin(std::future::ready(Err(e)))),
        };
        if decided.writes_more() {
            // Runs to its end even if the answer is dropped: the erase, snapshot or seal is
            // not skipped. Outside a runtime it runs here, before the answer is returned.
            let finish = move || {
                g.wait_durable(decided.wait_for)?;
                g.complete(decided, now_ms)
            };
            let Ok(rt) = tokio::runtime::Handle::try_current() else {
                return Some(Box::pin(std::future::ready(finish())));
            };
            let done = rt.spawn_blocking(finish);
            return Some(Box::pin(async move {
                done.await.unwrap_or_else(|e| {
                    Err(Error::new(
                        Code::Storage,
                        format!("the store call did not finish: {e}"),
                    ))
                })
            }));
        }
        g.commit_in_background(decided.wait_for);
        Some(Box::pin(async move {
            g.durable_async(decided.wait_for).await?;
            decided.decision
        }))
    }

    fn events(&self, group: &Id, after: u64, limit: usize) -> Result<Vec<mwp_core::Event>> {
        self.known(group)?.events(after, limit)
    }

    fn receipt(&self, group: &Id, actor: &Id, action: &Id) -> Result<Option<Receipt>> {
        self.check_damaged(group)?;
        Ok(self.group(group).and_then(|g| g.receipt(actor, action)))
    }

    fn member(&self, group: &Id, actor: &Id) -> Result<Option<mwp_core::state::Member>> {
        self.check_damaged(group)?;
        Ok(self
            .group(group)
            .and_then(|g| g.with_state(|s| s.members.get(actor).cloned())))
    }

    fn latest_snapshot(&self, group: &Id) -> Result<Vec<u8>> {
        self.known(group)?.latest_snapshot()
    }

    fn stored_snapshot(&self, group: &Id) -> Result<Option<Vec<u8>>> {
        self.known(group)?.stored_snapshot()
    }

    /// Every group, those a read-only open could not open included (a read of one of
    /// them fails with what is wrong in it).
    fn groups(&self) -> Result<Vec<Id>> {
        let mut ids: Vec<Id> = self
            .groups
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .chain(self.damaged.keys())
            .cloned()
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    fn head_seq(&self, group: &Id) -> Result<u64> {
        self.check_damaged(group)?;
        Ok(self.group(group).map_or(0, |g| g.durable()))
    }

    fn next_deadline(&self) -> Result<Option<(Id, u64)>> {
        self.next_deadline_except(&[])
    }

    fn next_deadline_except(&self, skip: &[Id]) -> Result<Option<(Id, u64)>> {
        let groups: Vec<Arc<GroupLog>> = self
            .groups
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .filter(|g| !skip.contains(g.id()))
            .cloned()
            .collect();
        Ok(groups
            .iter()
            .filter_map(|g| Some((g.id().clone(), g.next_deadline()?)))
            .min_by_key(|(_, at)| *at))
    }

    fn authority_key(&self) -> PublicKey {
        self.ctx.authority.public_key()
    }

    fn tick(&self, group: &Id, now_ms: u64) -> Result<Option<Decision>> {
        Ok(self.known(group)?.tick(now_ms)?.map(|(_, d)| d))
    }

    fn sign_head(&self, group: &Id, now_ms: u64) -> Result<mwp_core::head::SignedHead> {
        let (org, seq, id) = self.known(group)?.durable_head()?;
        mwp_core::head::SignedHead::sign(
            &org,
            group,
            seq,
            id,
            now_ms,
            self.ctx.authority.secret_key(),
        )
    }
}

/// Lets the transcript runner (`mwp transcript --data DIR`) run on the file store;
/// `restart` closes and reopens the directory.
impl Host for FileStore {
    fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        AuthorityService::submit(self, cmd, now_ms)
    }

    fn restart(&mut self) -> Result<()> {
        let backend = self.ctx.backend.clone();
        let mut opts = self.opts.clone();
        opts.authority_key = Some(self.ctx.authority.secret_key().clone());
        // Drop every in-memory group before reading the directory again.
        self.groups
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        let dir_lock = self.dir_lock.take();
        *self = FileStore::open_inner(backend, &self.root.clone(), opts, dir_lock)?;
        Ok(())
    }

    fn state(&self, group: &Id) -> Option<GroupState> {
        FileStore::state(self, group).ok().flatten()
    }

    fn work_state(&self, group: &Id, work: &Id) -> Option<WorkState> {
        let g = self.group(group)?;
        g.with_state(|s| s.work.get(work).map(|w| w.state))
    }
    fn advance(&mut self, group: &Id, now_ms: u64) -> Result<Vec<Decision>> {
        crate::service::advance(self, group, now_ms)
    }
}
