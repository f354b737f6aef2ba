//! The storage the file store runs on: a tiny file-system trait with a written contract per
//! method, so that a fault-injecting implementation is small.
//!
//! [`FsBackend`] is the real file system. [`MemBackend`] keeps, for every file and every
//! directory entry, a *live* copy (what reads see) and a *durable* copy (what survives a power
//! cut): only [`StorageFile::sync_data`], or a [`FileSystemSync`] for every file at once,
//! advances a file's durable bytes, and only [`Backend::sync_dir`] makes the entries of a
//! directory (creations, renames, removals) durable. It can fail the n-th mutating operation
//! once or forever, and produce the image a power cut would leave
//! ([`MemBackend::crash_image`]), with unsynced writes dropped, kept, reordered or torn.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// One open file. Methods take `&self`: positional reads may run while another thread writes.
pub trait StorageFile: Send + Sync {
    /// Current length in bytes, as reads see it (including unsynced writes).
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Fills `buf` with the bytes at `offset`; an error if the range passes the end.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes `data` at `offset`, extending the file (with zeros before `offset` if it lies
    /// past the end). Visible to reads at once; durable only after [`StorageFile::sync_data`].
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Truncates or extends (with zeros) to `len`. Durable only after `sync_data`.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes every earlier `write_at` and `set_len` of this file durable (`fdatasync`). It
    /// does not make the file's directory entry durable: see [`Backend::sync_dir`].
    fn sync_data(&self) -> io::Result<()>;
    /// The file system that holds the file, as [`FileSystemSync::filesystem`] names it;
    /// `None` where the backend has no [`Backend::filesystem_sync`].
    fn filesystem(&self) -> Option<u64> {
        None
    }
}

/// One sync for every file of a file system: what lets many files written at once cost one
/// durability point instead of one `fdatasync` each (docs/decisions.md, "One sync for many
/// groups").
pub trait FileSystemSync: Send + Sync {
    /// The file system it syncs: files whose [`StorageFile::filesystem`] is this value.
    fn filesystem(&self) -> u64;
    /// Makes every `write_at` and `set_len` made before the call, to every file of the file
    /// system, durable, as `sync_data` on each of them would; fails if writing back any of
    /// them failed since this handle was opened. It does not make directory entries durable.
    fn sync(&self) -> io::Result<()>;
}

/// A file system rooted somewhere; paths are absolute or relative to the process as usual.
pub trait Backend: Send + Sync {
    /// Opens an existing file for reading and writing.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>>;
    /// Creates a new, empty file (an error if it exists) with permission bits `mode`
    /// (`0o600` for keys). Its entry is durable after `sync_dir` of its directory.
    fn create(&self, path: &Path, mode: u32) -> io::Result<Arc<dyn StorageFile>>;
    /// Creates a directory, mode 0700 (its parent must exist; an error if it exists).
    /// Durable after `sync_dir` of its parent.
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    /// Whether a directory exists at `path`.
    fn is_dir(&self, path: &Path) -> bool;
    /// Whether a file exists at `path`.
    fn is_file(&self, path: &Path) -> bool;
    /// Names of the entries of a directory, sorted.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Atomically renames a file or a directory `from` to `to`, replacing a file `to`.
    /// Durable after `sync_dir` of the directory (both must be in the same directory); a
    /// directory's entries move with it.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file or an empty directory. Durable after `sync_dir` of its parent.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the entries of directory `dir` durable (`fsync` of the directory).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Permission bits of a file (`0o600` for keys); `None` where the platform has none.
    fn mode(&self, path: &Path) -> io::Result<Option<u32>>;
    /// Whether anything is at `path` itself: a file, a directory, a FIFO, or a symbolic link,
    /// even one to nothing (not followed).
    fn is_taken(&self, path: &Path) -> bool {
        self.mode(path).is_ok()
    }
    /// A handle that syncs the whole file system holding directory `dir` at once, opened now
    /// (write-back failures from then on are reported by its `sync`); `None` where the
    /// platform cannot promise that (see [`FsBackend`]).
    fn filesystem_sync(&self, dir: &Path) -> io::Result<Option<Arc<dyn FileSystemSync>>> {
        let _ = dir;
        Ok(None)
    }
}

/// The real file system.
///
/// Its [`Backend::filesystem_sync`] is Linux's `syncfs(2)`, offered only on kernels from
/// 5.8 on: older ones do not report write-back errors from `syncfs`.
#[derive(Debug, Default, Clone, Copy)]
pub struct FsBackend;

/// An open file and the device number of its file system.
struct FsFile(std::fs::File, u64);

#[cfg(unix)]
fn fs_file(f: std::fs::File) -> io::Result<FsFile> {
    use std::os::unix::fs::MetadataExt;
    let dev = f.metadata()?.dev();
    Ok(FsFile(f, dev))
}

/// `syncfs(2)` on a directory of the file system.
#[cfg(target_os = "linux")]
struct SyncFs {
    dir: std::fs::File,
    dev: u64,
}

#[cfg(target_os = "linux")]
impl FileSystemSync for SyncFs {
    fn filesystem(&self) -> u64 {
        self.dev
    }
    fn sync(&self) -> io::Result<()> {
        let start = std::time::Instant::now();
        let synced = rustix::fs::syncfs(&self.dir).map_err(io::Error::from);
        super::fsync_seconds().observe(start.elapsed().as_secs_f64());
        synced
    }
}

/// Whether the running kernel's `syncfs` reports write-back errors (Linux 5.8 and later).
#[cfg(target_os = "linux")]
fn syncfs_reports_errors() -> bool {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let mut parts = release.trim().split(['.', '-']);
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor) >= (5, 8)
}

#[cfg(unix)]
impl StorageFile for FsFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&self.0, buf, offset)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&self.0, data, offset)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        let start = std::time::Instant::now();
        let synced = self.0.sync_data();
        super::fsync_seconds().observe(start.elapsed().as_secs_f64());
        synced
    }
    fn filesystem(&self) -> Option<u64> {
        Some(self.1)
    }
}

#[cfg(unix)]
impl Backend for FsBackend {
    /// A regular file only: a FIFO, socket or device put in a data directory in place of a
    /// store file is refused by its type (`InvalidInput`, "it is a FIFO, not a regular
    /// file"), not read as a file that is empty or never ends. Opened without blocking, so
    /// that nothing waits on a FIFO's other end; the flag changes nothing for a regular file.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(path)
            .map_err(|e| {
                // Opened for writing, a directory fails before its type is asked: named by
                // its type as any other, not in the system's words.
                if e.kind() == io::ErrorKind::IsADirectory {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "it is a directory, not a regular file",
                    )
                } else {
                    e
                }
            })?;
        let t = f.metadata()?.file_type();
        if !t.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("it is {}, not a regular file", crate::regular_file::kind(t)),
            ));
        }
        Ok(Arc::new(fs_file(f)?))
    }
    fn create(&self, path: &Path, mode: u32) -> io::Result<Arc<dyn StorageFile>> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)?;
        Ok(Arc::new(fs_file(f)?))
    }
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().mode(0o700).create(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }
    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let name = entry?.file_name();
            // Names this store writes are ASCII; anything else is listed lossily and then
            // ignored by the callers, which only look at names they recognise.
            names.push(name.to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        if path.is_dir() {
            std::fs::remove_dir(path)
        } else {
            std::fs::remove_file(path)
        }
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let file = std::fs::File::open(dir)?;
        let start = std::time::Instant::now();
        let synced = file.sync_all();
        super::fsync_seconds().observe(start.elapsed().as_secs_f64());
        synced
    }
    fn mode(&self, path: &Path) -> io::Result<Option<u32>> {
        use std::os::unix::fs::PermissionsExt;
        Ok(Some(std::fs::metadata(path)?.permissions().mode() & 0o777))
    }
    fn is_taken(&self, path: &Path) -> bool {
        std::fs::symlink_metadata(path).is_ok()
    }
    #[cfg(target_os = "linux")]
    fn filesystem_sync(&self, dir: &Path) -> io::Result<Option<Arc<dyn FileSystemSync>>> {
        use std::os::unix::fs::MetadataExt;
        if !syncfs_reports_errors() {
            return Ok(None);
        }
        let dir = std::fs::File::open(dir)?;
        let dev = dir.metadata()?.dev();
        Ok(Some(Arc::new(SyncFs { dir, dev })))
    }
}

/// Whether an injected fault hits one operation or every one from then on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Operation n fails; later ones succeed.
    Once,
    /// Operation n and every later one fail.
    Forever,
}

/// What a power cut keeps of the writes made since a file's last `sync_data`, and of the
/// directory changes made since a directory's last `sync_dir`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerLoss {
    /// Nothing unsynced survives.
    DropAll,
    /// Everything survives, as if the disk had caught up.
    KeepAll,
    /// A pseudo-random subset of the unsynced writes survives, in any order, the last ones
    /// possibly torn to a prefix; directory changes survive or not per directory.
    Scramble(u64),
}

#[derive(Debug, Clone)]
enum PendingOp {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Debug, Clone, Default)]
struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<PendingOp>,
    mode: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Entry {
    File(usize),
    Dir,
}

#[derive(Debug, Default)]
struct MemFs {
    sync_delay: std::time::Duration,
    inodes: Vec<Inode>,
    live: BTreeMap<PathBuf, Entry>,
    durable: BTreeMap<PathBuf, Entry>,
    ops: u64,
    fault: Option<(u64, Fault)>,
    log: Vec<String>,
}

/// An in-memory file system with a live and a durable copy of everything, and fault
/// injection. Cloning gives another handle to the same file system.
#[derive(Debug, Clone, Default)]
pub struct MemBackend {
    fs: Arc<Mutex<MemFs>>,
}

struct MemFile {
    fs: Arc<Mutex<MemFs>>,
    inode: usize,
    path: PathBuf,
}

fn lock(fs: &Mutex<MemFs>) -> MutexGuard<'_, MemFs> {
    // A panic while holding the lock (only possible in a failing test) leaves the data
    // usable: every mutation is completed before the guard drops.
    fs.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The root of the memory file system ("/" or ""), which always exists.
fn is_root(path: &Path) -> bool {
    path.parent().is_none()
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} does not exist", path.display()),
    )
}

fn injected(n: u64, what: &str) -> io::Error {
    io::Error::other(format!("injected fault at operation {n} ({what})"))
}

impl MemFs {
    /// Counts a mutating operation and fails it if a fault is due.
    fn tick(&mut self, what: String) -> io::Result<()> {
        let n = self.ops;
        self.ops += 1;
        self.log.push(what.clone());
        match self.fault {
            Some((at, Fault::Once)) if at == n => Err(injected(n, &what)),
            Some((at, Fault::Forever)) if n >= at => Err(injected(n, &what)),
            _ => Ok(()),
        }
    }

    fn parent_is_dir(&self, path: &Path) -> bool {
        match path.parent() {
            None => true,
            Some(p) if p.as_os_str().is_empty() || is_root(p) => true,
            Some(p) => self.live.get(p) == Some(&Entry::Dir),
        }
    }
}

fn apply(data: &mut Vec<u8>, op: &PendingOp) {
    match op {
        PendingOp::Write(offset, bytes) => {
            let start = usize::try_from(*offset).unwrap_or(usize::MAX);
            let end = start.saturating_add(bytes.len());
            if data.len() < end {
                data.resize(end, 0);
            }
            data[start..end].copy_from_slice(bytes);
        }
        PendingOp::SetLen(len) => data.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
    }
}

/// A small deterministic generator for crash images (xorshift64*).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (any value).
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

impl MemBackend {
    /// An empty file system with no faults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of mutating operations so far (writes, truncations, syncs, creations, renames,
    /// removals, directory syncs): the crash points a workload passes.
    pub fn ops(&self) -> u64 {
        lock(&self.fs).ops
    }

    /// A description of every mutating operation so far, in order.
    pub fn op_log(&self) -> Vec<String> {
        lock(&self.fs).log.clone()
    }

    /// Makes mutating operation number `n` (counting from 0, as [`MemBackend::ops`] counts)
    /// fail, once or from then on.
    pub fn fail_at(&self, n: u64, fault: Fault) {
        lock(&self.fs).fault = Some((n, fault));
    }

    /// Makes every `sync_data` take `delay` (outside the lock), as a real disk does, so that
    /// concurrent writers pile up behind a sync and group commit batches them.
    pub fn set_sync_delay(&self, delay: std::time::Duration) {
        lock(&self.fs).sync_delay = delay;
    }

    /// Removes any injected fault.
    pub fn clear_fault(&self) {
        lock(&self.fs).fault = None;
    }

    /// What a power cut now would leave: a new, fault-free file system whose live and durable
    /// copies are both that image.
    pub fn crash_image(&self, loss: PowerLoss) -> MemBackend {
        let fs = lock(&self.fs);
        let mut rng = Rng::new(match loss {
            PowerLoss::Scramble(seed) => seed,
            _ => 0,
        });
        // Directory entries: per directory, the durable set or (for KeepAll, or a coin flip
        // under Scramble) the live one.
        let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
        for p in fs.live.keys().chain(fs.durable.keys()) {
            dirs.insert(p.parent().map(Path::to_path_buf).unwrap_or_default());
        }
        let mut entries = BTreeMap::new();
        for dir in dirs {
            let keep_live = match loss {
                PowerLoss::DropAll => false,
                PowerLoss::KeepAll => true,
                PowerLoss::Scramble(_) => rng.below(2) == 1,
            };
            let source = if keep_live { &fs.live } else { &fs.durable };
            for (p, e) in source {
                if p.parent().map(Path::to_path_buf).unwrap_or_default() == dir {
                    entries.insert(p.clone(), *e);
                }
            }
        }
        // Drop entries whose directory did not survive.
        let dir_set: BTreeSet<PathBuf> = entries
            .iter()
            .filter(|(_, e)| **e == Entry::Dir)
            .map(|(p, _)| p.clone())
            .collect();
        entries.retain(|p, _| {
            p.ancestors()
                .skip(1)
                .filter(|a| !a.as_os_str().is_empty())
                .all(|a| dir_set.contains(a) || a.parent().is_none())
        });
        let mut inodes = Vec::with_capacity(fs.inodes.len());
        for inode in &fs.inodes {
            let mut data = inode.durable.clone();
            match loss {
                PowerLoss::DropAll => {}
                PowerLoss::KeepAll => data = inode.live.clone(),
                PowerLoss::Scramble(_) => {
                    for op in &inode.pending {
                        match rng.below(4) {
                            0 => {}
                            1 => match op {
                                // Torn: a prefix of the write, cut at a random byte.
                                PendingOp::Write(off, bytes) => {
                                    let cut = rng.below(bytes.len() as u64 + 1) as usize;
                                    apply(
                                        &mut data,
                                        &PendingOp::Write(*off, bytes[..cut].to_vec()),
                                    );
                                }
                                PendingOp::SetLen(_) => apply(&mut data, op),
                            },
                            2 => match op {
                                // Torn by sectors: random 512-byte pieces of the write land.
                                PendingOp::Write(off, bytes) => {
                                    for (i, chunk) in bytes.chunks(512).enumerate() {
                                        if rng.below(2) == 1 {
                                            let at = off + (i * 512) as u64;
                                            apply(&mut data, &PendingOp::Write(at, chunk.to_vec()));
                                        }
                                    }
                                }
                                PendingOp::SetLen(_) => {}
                            },
                            _ => apply(&mut data, op),
                        }
                    }
                }
            }
            inodes.push(Inode {
                live: data.clone(),
                durable: data,
                pending: Vec::new(),
                mode: inode.mode,
            });
        }
        MemBackend {
            fs: Arc::new(Mutex::new(MemFs {
                sync_delay: std::time::Duration::ZERO,
                inodes,
                live: entries.clone(),
                durable: entries,
                ops: 0,
                fault: None,
                log: Vec::new(),
            })),
        }
    }

    /// The live bytes of a file (for tests that damage files on purpose).
    pub fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        let fs = lock(&self.fs);
        match fs.live.get(path) {
            Some(Entry::File(i)) => Ok(fs.inodes[*i].live.clone()),
            _ => Err(not_found(path)),
        }
    }

    /// Replaces the bytes of a file, live and durable (for tests that damage files).
    pub fn write_file(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let mut fs = lock(&self.fs);
        match fs.live.get(path).copied() {
            Some(Entry::File(i)) => {
                fs.inodes[i].live = data.to_vec();
                fs.inodes[i].durable = data.to_vec();
                fs.inodes[i].pending.clear();
                Ok(())
            }
            _ => Err(not_found(path)),
        }
    }
}

impl StorageFile for MemFile {
    fn len(&self) -> io::Result<u64> {
        Ok(lock(&self.fs).inodes[self.inode].live.len() as u64)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let fs = lock(&self.fs);
        let data = &fs.inodes[self.inode].live;
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.saturating_add(buf.len());
        if end > data.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end",
            ));
        }
        buf.copy_from_slice(&data[start..end]);
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut fs = lock(&self.fs);
        fs.tick(format!(
            "write {} @{offset} +{}",
            self.path.display(),
            data.len()
        ))?;
        let op = PendingOp::Write(offset, data.to_vec());
        let inode = &mut fs.inodes[self.inode];
        apply(&mut inode.live, &op);
        inode.pending.push(op);
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut fs = lock(&self.fs);
        fs.tick(format!("set_len {} {len}", self.path.display()))?;
        let op = PendingOp::SetLen(len);
        let inode = &mut fs.inodes[self.inode];
        apply(&mut inode.live, &op);
        inode.pending.push(op);
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        let delay = {
            let mut fs = lock(&self.fs);
            fs.tick(format!("sync {}", self.path.display()))?;
            let inode = &mut fs.inodes[self.inode];
            inode.durable = inode.live.clone();
            inode.pending.clear();
            fs.sync_delay
        };
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        Ok(())
    }
    fn filesystem(&self) -> Option<u64> {
        Some(MEM_FILESYSTEM)
    }
}

/// The one file system of a [`MemBackend`].
const MEM_FILESYSTEM: u64 = 0;

/// [`FileSystemSync`] of a [`MemBackend`]: every file's writes become durable in one
/// operation (counted and faulted as one).
struct MemSync {
    fs: Arc<Mutex<MemFs>>,
}

impl FileSystemSync for MemSync {
    fn filesystem(&self) -> u64 {
        MEM_FILESYSTEM
    }
    fn sync(&self) -> io::Result<()> {
        let delay = {
            let mut fs = lock(&self.fs);
            fs.tick("syncfs".to_string())?;
            for inode in &mut fs.inodes {
                inode.durable = inode.live.clone();
                inode.pending.clear();
            }
            fs.sync_delay
        };
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        Ok(())
    }
}

impl Backend for MemBackend {
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let fs = lock(&self.fs);
        match fs.live.get(path) {
            Some(Entry::File(i)) => Ok(Arc::new(MemFile {
                fs: self.fs.clone(),
                inode: *i,
                path: path.to_path_buf(),
            })),
            _ => Err(not_found(path)),
        }
    }
    fn create(&self, path: &Path, mode: u32) -> io::Result<Arc<dyn StorageFile>> {
        let mut fs = lock(&self.fs);
        fs.tick(format!("create {}", path.display()))?;
        if fs.live.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", path.display()),
            ));
        }
        if !fs.parent_is_dir(path) {
            return Err(not_found(path.parent().unwrap_or(path)));
        }
        let inode = fs.inodes.len();
        fs.inodes.push(Inode {
            mode,
            ..Inode::default()
        });
        fs.live.insert(path.to_path_buf(), Entry::File(inode));
        Ok(Arc::new(MemFile {
            fs: self.fs.clone(),
            inode,
            path: path.to_path_buf(),
        }))
    }
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        let mut fs = lock(&self.fs);
        fs.tick(format!("mkdir {}", path.display()))?;
        if fs.live.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", path.display()),
            ));
        }
        if !fs.parent_is_dir(path) {
            return Err(not_found(path.parent().unwrap_or(path)));
        }
        fs.live.insert(path.to_path_buf(), Entry::Dir);
        Ok(())
    }
    fn is_dir(&self, path: &Path) -> bool {
        is_root(path) || lock(&self.fs).live.get(path) == Some(&Entry::Dir)
    }
    fn is_file(&self, path: &Path) -> bool {
        matches!(lock(&self.fs).live.get(path), Some(Entry::File(_)))
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let fs = lock(&self.fs);
        if !is_root(dir) && fs.live.get(dir) != Some(&Entry::Dir) {
            return Err(not_found(dir));
        }
        Ok(fs
            .live
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut fs = lock(&self.fs);
        fs.tick(format!("rename {} -> {}", from.display(), to.display()))?;
        let Some(e) = fs.live.remove(from) else {
            return Err(not_found(from));
        };
        fs.live.insert(to.to_path_buf(), e);
        if e == Entry::Dir {
            // The entries of a directory belong to it, live and durable alike: they move.
            let under = |m: &BTreeMap<PathBuf, Entry>| -> Vec<PathBuf> {
                m.keys()
                    .filter(|p| p.starts_with(from) && p.as_path() != from)
                    .cloned()
                    .collect()
            };
            let fs = &mut *fs;
            for map in [&mut fs.live, &mut fs.durable] {
                for p in under(map) {
                    if let (Some(e), Ok(rest)) = (map.remove(&p), p.strip_prefix(from)) {
                        map.insert(to.join(rest), e);
                    }
                }
            }
        }
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut fs = lock(&self.fs);
        fs.tick(format!("remove {}", path.display()))?;
        if fs.live.keys().any(|p| p.parent() == Some(path)) {
            return Err(io::Error::other(format!("{} is not empty", path.display())));
        }
        fs.live
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut fs = lock(&self.fs);
        fs.tick(format!("sync_dir {}", dir.display()))?;
        if !is_root(dir) && fs.live.get(dir) != Some(&Entry::Dir) {
            return Err(not_found(dir));
        }
        let in_dir = |p: &Path| p.parent() == Some(dir);
        let live: Vec<(PathBuf, Entry)> = fs
            .live
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, e)| (p.clone(), *e))
            .collect();
        fs.durable.retain(|p, _| !in_dir(p));
        fs.durable.extend(live);
        Ok(())
    }
    fn mode(&self, path: &Path) -> io::Result<Option<u32>> {
        let fs = lock(&self.fs);
        match fs.live.get(path) {
            Some(Entry::File(i)) => Ok(Some(fs.inodes[*i].mode)),
            Some(Entry::Dir) => Ok(Some(0o700)),
            None => Err(not_found(path)),
        }
    }
    fn filesystem_sync(&self, dir: &Path) -> io::Result<Option<Arc<dyn FileSystemSync>>> {
        if !self.is_dir(dir) {
            return Err(not_found(dir));
        }
        Ok(Some(Arc::new(MemSync {
            fs: self.fs.clone(),
        })))
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_store_file_that_is_a_directory_or_a_fifo_is_named_by_its_type() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        crate::regular_file::mkfifo(&fifo);
        for (path, kind) in [(dir.path().to_path_buf(), "a directory"), (fifo, "a FIFO")] {
            let Err(e) = FsBackend.open(&path) else {
                panic!("{kind} is refused");
            };
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{kind}: {e}");
            assert_eq!(e.to_string(), format!("it is {kind}, not a regular file"));
        }
    }
}
