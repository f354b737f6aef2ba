//! One writer per data directory (docs/format.md, "The writer lock").
//!
//! Two files, both in the data directory and both 0600:
//!
//! * `LOCK`: the file an OS lock (`flock`, exclusive, non-blocking) is taken on. The kernel
//!   drops the lock when its process dies, so `kill -9` leaves nothing stale. It is never
//!   removed: every native (and Deno) writer locks the same inode.
//! * `LOCK.pid`: the owner record, created exclusively (`O_EXCL`) by every writer, native,
//!   Deno or Node (which has no `flock`), holding `mwp-lock 1`, `pid N` and `start T` lines.
//!   It counts as stale only when no process with that pid and start time runs. A clean close
//!   removes it.
//!
//! A native writer takes the `flock` first, then the owner record; under the `flock` only a
//! Node writer can race it, and a Node writer sees a live native writer through its record.
//!
//! An agent journal `NAME` is locked the same way, on `NAME.LOCK` and `NAME.LOCK.pid` beside
//! it ([`DirLock::acquire_file`]).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use mwp_core::{Code, Error, Result};

/// The file the OS lock is taken on.
pub const LOCK_NAME: &str = "LOCK";
/// The owner record.
pub const OWNER_NAME: &str = "LOCK.pid";

/// Who holds (or held) a data directory, as its owner record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Process id.
    pub pid: u32,
    /// Start time of the process (field 22 of `/proc/PID/stat`, clock ticks since boot),
    /// when the platform tells it; it tells a reused pid from the owner.
    pub start: Option<u64>,
}

impl Owner {
    /// This process.
    pub fn me() -> Owner {
        let pid = std::process::id();
        Owner {
            pid,
            start: start_time(pid),
        }
    }

    /// The record's text.
    pub fn encode(&self) -> String {
        match self.start {
            Some(t) => format!("mwp-lock 1\npid {}\nstart {t}\n", self.pid),
            None => format!("mwp-lock 1\npid {}\n", self.pid),
        }
    }

    /// Reads a record; `None` if it is not one (an empty or half-written file, or anything
    /// but exactly what [`Owner::encode`] writes: nothing before, between or after its lines,
    /// numbers in their shortest form), as the Node/Deno store reads it.
    pub fn decode(text: &str) -> Option<Owner> {
        let mut lines = text.lines();
        if lines.next()? != "mwp-lock 1" {
            return None;
        }
        let pid = lines.next()?.strip_prefix("pid ")?.parse().ok()?;
        let start = match lines.next() {
            Some(l) => Some(l.strip_prefix("start ")?.parse().ok()?),
            None => None,
        };
        let owner = Owner { pid, start };
        (owner.encode() == text).then_some(owner)
    }

    /// Whether the process the record names still runs: no process has pid 0 or one past
    /// 2^31 − 1; a pid that answers signal 0, or refuses it (`EPERM`: another user's), runs
    /// unless it is a zombie (exited, not yet reaped: it holds and writes nothing); it is the
    /// record's owner unless both start times are known and differ. The Node/Deno store
    /// decides the same (`js/src/dir-lock.js` `isAlive`).
    pub fn is_alive(&self) -> bool {
        let Some(pid) = i32::try_from(self.pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        else {
            return false;
        };
        match rustix::process::test_kill_process(pid) {
            Ok(()) => {}
            // The process exists but belongs to someone else.
            Err(e) if e == rustix::io::Errno::PERM => {}
            Err(_) => return false,
        }
        let (state, now) = proc_stat(self.pid).unwrap_or((None, None));
        if matches!(state, Some('Z' | 'X')) {
            return false;
        }
        match (self.start, now) {
            (Some(want), Some(now)) => want == now,
            _ => true,
        }
    }
}

/// Field 22 of `/proc/PID/stat`, where there is one.
fn start_time(pid: u32) -> Option<u64> {
    proc_stat(pid)?.1
}

/// The state letter (field 3) and start time (field 22) of `/proc/PID/stat`, each where it
/// reads; `None` where there is no such file.
fn proc_stat(pid: u32) -> Option<(Option<char>, Option<u64>)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next().and_then(|f| f.chars().next());
    let start = fields.nth(18).and_then(|t| t.parse().ok());
    Some((state, start))
}

/// The writer lock of one data directory (or one agent journal), held until dropped.
#[derive(Debug)]
pub struct DirLock {
    /// What it guards, its owner record and this process as the record names it.
    owner: OwnerCheck,
    /// Holds the `flock`; closing it releases the lock.
    _file: File,
}

/// Checks that a writer's owner record still names it ([`DirLock::owner_check`]): what a
/// writer asks before each write batch, so that one whose record was removed or taken over
/// (by a writer that judged it stale) writes nothing more.
#[derive(Debug, Clone)]
pub(crate) struct OwnerCheck {
    /// What the lock guards (a data directory or a journal file).
    name: PathBuf,
    /// The owner record's path.
    owner: PathBuf,
    /// This process, as its record names it.
    me: Owner,
    /// The detail naming `name` (`dir` or `file`) and what a writer that lost the lock
    /// reopens (`the store` or `the journal`).
    key: &'static str,
    reopen: &'static str,
}

impl OwnerCheck {
    /// `Ok` while the owner record names this process (its pid and start time), else
    /// `STORAGE` naming the record and what it holds, as the Node/Deno writer words it. One
    /// read of at most [`MAX_OWNER_BYTES`].
    pub(crate) fn check(&self) -> Result<()> {
        let found = read_record(&self.owner).and_then(|t| Owner::decode(&t));
        if found.as_ref() == Some(&self.me) {
            return Ok(());
        }
        let now = match &found {
            None => "holds no owner record".to_owned(),
            Some(o) => format!("names process {}", o.pid),
        };
        let record = self.owner.file_name().unwrap_or_default().to_string_lossy();
        let mut e = Error::new(
            Code::Storage,
            format!(
                "{} is no longer this writer's: {record} {now}; reopen {}",
                self.name.display(),
                self.reopen
            ),
        )
        .with(self.key, self.name.display().to_string());
        if let Some(o) = found {
            e = e.with("pid", o.pid);
        }
        Err(e)
    }
}

/// What a writer lock guards: `name` (a data directory or a journal file) for messages, the
/// paths of its OS lock and owner record, the detail naming it, and what a refusal suggests
/// besides stopping the holder.
struct Target<'a> {
    name: &'a Path,
    os_lock: PathBuf,
    owner: PathBuf,
    key: &'static str,
    hint: &'static str,
    reopen: &'static str,
}

impl<'a> Target<'a> {
    fn dir(dir: &'a Path) -> Target<'a> {
        Target {
            name: dir,
            os_lock: dir.join(LOCK_NAME),
            owner: dir.join(OWNER_NAME),
            key: "dir",
            hint: ", or read it with mwp replay, snapshot or fsck, which take no lock",
            reopen: "the store",
        }
    }

    fn file(path: &'a Path) -> Target<'a> {
        let beside = |name: &str| {
            let mut p = path.as_os_str().to_os_string();
            p.push(".");
            p.push(name);
            PathBuf::from(p)
        };
        Target {
            name: path,
            os_lock: beside(LOCK_NAME),
            owner: beside(OWNER_NAME),
            key: "file",
            hint: "",
            reopen: "the journal",
        }
    }

    fn in_use(&self, holder: Option<&Owner>) -> Error {
        let who = match holder {
            Some(o) => format!("process {}", o.pid),
            None => "another process".to_owned(),
        };
        let mut e = Error::new(
            Code::Storage,
            format!(
                "{} is in use by another writer ({who}); stop it first{}",
                self.name.display(),
                self.hint
            ),
        )
        .with(self.key, self.name.display().to_string());
        if let Some(o) = holder {
            e = e.with("pid", o.pid);
        }
        e
    }
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |e| super::format::storage(what, e)
}

/// The most of an owner record read: far more than its three lines. A longer file is not a
/// record (another process may leave one of any size in the directory) and is never held
/// whole.
const MAX_OWNER_BYTES: u64 = 4096;

/// The text of the owner record at `path`, read no further than [`MAX_OWNER_BYTES`]: empty
/// (not a record) when it is not UTF-8 or grew past that bound while being read; `None` when
/// it cannot be opened, is not a regular file (opened without blocking: a FIFO put there
/// never stalls the reader) or is longer than that bound. Every caller takes both for "not a
/// record".
fn read_record(path: &Path) -> Option<String> {
    let bytes = crate::regular_file::read(path, MAX_OWNER_BYTES).ok()?;
    if bytes.len() as u64 > MAX_OWNER_BYTES {
        return Some(String::new());
    }
    Some(String::from_utf8(bytes).unwrap_or_default())
}

/// `STORAGE` when what is at the owner record's path is not a regular file (a directory, a
/// FIFO, …): never a record, never moved aside nor removed by a writer, which refuses the
/// lock until someone removes it.
fn not_a_record(target: &Target<'_>) -> Option<Error> {
    let why = match crate::regular_file::open(&target.owner) {
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => e.to_string(),
        _ => return None,
    };
    Some(
        Error::new(
            Code::Storage,
            format!(
                "{} is not an owner record: {why}; remove it",
                target.owner.display()
            ),
        )
        .with(target.key, target.name.display().to_string()),
    )
}

/// Reads an owner record; `None` when missing or not a record.
pub fn read_owner(dir: &Path) -> Option<Owner> {
    Owner::decode(&read_record(&dir.join(OWNER_NAME))?)
}

impl DirLock {
    /// Takes the writer lock of `dir` (which must exist), or fails at once with `STORAGE`
    /// naming the directory and, where known, the holder's pid.
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        Self::take(&Target::dir(dir))
    }

    /// Takes the writer lock of the file at `path` (an agent journal), as a data directory's
    /// is taken, on `NAME.LOCK` (the OS lock) and `NAME.LOCK.pid` (the owner record) beside
    /// it; its directory must exist. A holder is refused with the same `STORAGE` error,
    /// naming the file (`details.file`).
    pub fn acquire_file(path: &Path) -> Result<DirLock> {
        Self::take(&Target::file(path))
    }

    fn take(target: &Target<'_>) -> Result<DirLock> {
        let path = &target.os_lock;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(io(format!("open {}", path.display())))?;
        if let Err(e) =
            rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        {
            if e == rustix::io::Errno::WOULDBLOCK || e == rustix::io::Errno::AGAIN {
                let holder = read_record(&target.owner).and_then(|t| Owner::decode(&t));
                return Err(target.in_use(holder.as_ref()));
            }
            return Err(io(format!("lock {}", path.display()))(e.into()));
        }
        let me = claim_owner(target)?;
        Ok(DirLock {
            owner: OwnerCheck {
                name: target.name.to_path_buf(),
                owner: target.owner.clone(),
                me,
                key: target.key,
                reopen: target.reopen,
            },
            _file: file,
        })
    }

    /// What checks that the owner record still names this writer ([`OwnerCheck::check`]).
    pub(crate) fn owner_check(&self) -> &OwnerCheck {
        &self.owner
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // Only this process's own record is removed; the flock goes with the file.
        let mine = read_record(&self.owner.owner)
            .and_then(|t| Owner::decode(&t))
            .is_some_and(|o| o.pid == std::process::id());
        if mine {
            let _ = std::fs::remove_file(&self.owner.owner);
        }
    }
}

/// The directory holding `path`: its parent, or `.` for a bare name (whose parent is the
/// empty path, which names no directory).
pub(super) fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Creates the owner record exclusively, taking over a stale one; returns the record. A
/// record this call created and could not make durable is removed again: no record is left
/// naming a writer that holds no lock.
fn claim_owner(target: &Target<'_>) -> Result<Owner> {
    let path = &target.owner;
    let dir = dir_of(path);
    let me = Owner::me();
    // Two rounds: the second follows the removal of a stale record.
    for _ in 0..2 {
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(mut f) => {
                let written = f
                    .write_all(me.encode().as_bytes())
                    .and_then(|()| f.sync_data())
                    .map_err(io(format!("write {}", path.display())))
                    .and_then(|()| super::sync_dir_path(&dir));
                if written.is_err() {
                    let _ = std::fs::remove_file(path);
                }
                return written.map(|()| me);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if let Some(e) = not_a_record(target) {
                    return Err(e);
                }
                let text = read_record(path).unwrap_or_default();
                match Owner::decode(&text) {
                    Some(o) if o.pid == me.pid && o.start == me.start => {
                        // This process's own record (a reopen in the same process).
                        return Ok(me);
                    }
                    Some(o) if o.is_alive() => return Err(target.in_use(Some(&o))),
                    // A record that is not one is a writer caught between creating and
                    // writing it: refused unless its file is old (a crash at that point).
                    None if !is_old(path) => return Err(target.in_use(None)),
                    _ => take_over(target, &text)?,
                }
            }
            Err(e) => return Err(io(format!("create {}", path.display()))(e)),
        }
    }
    let holder = read_record(path).and_then(|t| Owner::decode(&t));
    Err(target.in_use(holder.as_ref()))
}

/// Whether a half-written record is older than any writer takes to fill it in.
fn is_old(path: &Path) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|d| d.as_secs() >= 10)
}

/// Moves a stale record aside, restoring it if what was moved is not the stale record read
/// (another writer took over first).
fn take_over(target: &Target<'_>, stale: &str) -> Result<()> {
    let path = &target.owner;
    let aside = path.with_extension(format!("pid.stale-{}", std::process::id()));
    match std::fs::rename(path, &aside) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(format!("rename {}", path.display()))(e)),
    }
    let moved = read_record(&aside).unwrap_or_default();
    if moved != stale {
        // Put the newer record back (unless yet another one appeared) and refuse.
        let _ = std::fs::hard_link(&aside, path);
        let _ = std::fs::remove_file(&aside);
        return Err(target.in_use(Owner::decode(&moved).as_ref()));
    }
    std::fs::remove_file(&aside).map_err(io(format!("remove {}", aside.display())))
}
