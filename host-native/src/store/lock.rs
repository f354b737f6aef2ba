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

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
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

    /// Whether the process the record names still runs.
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
        match (self.start, start_time(self.pid)) {
            (Some(want), Some(now)) => want == now,
            _ => true,
        }
    }
}

/// Field 22 of `/proc/PID/stat`, where there is one.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The writer lock of one data directory, held until dropped.
#[derive(Debug)]
pub struct DirLock {
    dir: PathBuf,
    /// Holds the `flock`; closing it releases the lock.
    _file: File,
}

fn in_use(dir: &Path, holder: Option<&Owner>) -> Error {
    let who = match holder {
        Some(o) => format!("process {}", o.pid),
        None => "another process".to_owned(),
    };
    let mut e = Error::new(
        Code::Storage,
        format!(
            "{} is in use by another writer ({who}); stop it first, or read it with mwp replay, snapshot or fsck, which take no lock",
            dir.display()
        ),
    )
    .with("dir", dir.display().to_string());
    if let Some(o) = holder {
        e = e.with("pid", o.pid);
    }
    e
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |e| super::format::storage(what, e)
}

/// The most of an owner record read: far more than its three lines. A longer file is not a
/// record (another process may leave one of any size in the directory) and is never held
/// whole.
const MAX_OWNER_BYTES: u64 = 4096;

/// The text of the owner record at `path`, read no further than [`MAX_OWNER_BYTES`]: empty
/// (not a record) when it is longer or not UTF-8; `None` when it cannot be opened.
fn read_record(path: &Path) -> Option<String> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|f| f.take(MAX_OWNER_BYTES + 1).read_to_end(&mut bytes))
        .ok()?;
    if bytes.len() as u64 > MAX_OWNER_BYTES {
        return Some(String::new());
    }
    Some(String::from_utf8(bytes).unwrap_or_default())
}

/// Reads an owner record; `None` when missing or not a record.
pub fn read_owner(dir: &Path) -> Option<Owner> {
    Owner::decode(&read_record(&dir.join(OWNER_NAME))?)
}

impl DirLock {
    /// Takes the writer lock of `dir` (which must exist), or fails at once with `STORAGE`
    /// naming the directory and, where known, the holder's pid.
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join(LOCK_NAME);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io(format!("open {}", path.display())))?;
        if let Err(e) =
            rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        {
            if e == rustix::io::Errno::WOULDBLOCK || e == rustix::io::Errno::AGAIN {
                return Err(in_use(dir, read_owner(dir).as_ref()));
            }
            return Err(io(format!("lock {}", path.display()))(e.into()));
        }
        claim_owner(dir)?;
        Ok(DirLock {
            dir: dir.to_path_buf(),
            _file: file,
        })
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // Only this process's own record is removed; the flock goes with the file.
        if read_owner(&self.dir).is_some_and(|o| o.pid == std::process::id()) {
            let _ = std::fs::remove_file(self.dir.join(OWNER_NAME));
        }
    }
}

/// Creates the owner record exclusively, taking over a stale one.
fn claim_owner(dir: &Path) -> Result<()> {
    let path = dir.join(OWNER_NAME);
    let me = Owner::me();
    // Two rounds: the second follows the removal of a stale record.
    for _ in 0..2 {
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(mut f) => {
                f.write_all(me.encode().as_bytes())
                    .and_then(|()| f.sync_data())
                    .map_err(io(format!("write {}", path.display())))?;
                super::sync_dir_path(dir)?;
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let text = read_record(&path).unwrap_or_default();
                match Owner::decode(&text) {
                    Some(o) if o.pid == me.pid && o.start == me.start => {
                        // This process's own record (a reopen in the same process).
                        return Ok(());
                    }
                    Some(o) if o.is_alive() => return Err(in_use(dir, Some(&o))),
                    // A record that is not one is a writer caught between creating and
                    // writing it: refused unless its file is old (a crash at that point).
                    None if !is_old(&path) => return Err(in_use(dir, None)),
                    _ => take_over(&path, &text)?,
                }
            }
            Err(e) => return Err(io(format!("create {}", path.display()))(e)),
        }
    }
    Err(in_use(dir, read_owner(dir).as_ref()))
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
fn take_over(path: &Path, stale: &str) -> Result<()> {
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
        let dir = path.parent().unwrap_or(Path::new("."));
        return Err(in_use(dir, Owner::decode(&moved).as_ref()));
    }
    std::fs::remove_file(&aside).map_err(io(format!("remove {}", aside.display())))
}
