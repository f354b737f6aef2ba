//! The directory `mwp export --out DIR` writes: every read and write goes through a handle
//! of the directory it was checked in, never through a path looked up again.
//!
//! DIR itself may be a link to a directory. Inside it, a file or directory is used only if
//! the object opened lies in DIR (a link that stays in DIR is followed; one that leads out of
//! it, or to nothing, is refused as a damaged export). The check is made on the opened
//! handle, and what follows goes through that handle: a `chunks` swapped for a link to
//! another directory after it was checked still has the chunks written into the directory
//! that was checked, not through the link (the check on a path and the write through the
//! same path, looked up twice, let a swap in between write outside DIR).
//!
//! New files go to a temporary name in their directory, are synced, then linked to their
//! name (never replacing a file); `head.json` replaces the old one by rename. A run that
//! fails removes what it created, through the same handles.

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags, CWD};
use rustix::io::Errno;

use super::{Failure, EXIT_FAILED, EXIT_UNAVAILABLE};

/// Mode of the export's directories and files: an export is public by design.
const DIR_MODE: u32 = 0o755;
const FILE_MODE: u32 = 0o644;

/// An open export directory.
pub struct ExportDir {
    /// DIR as given, for messages.
    path: PathBuf,
    /// Where DIR's directory really is (its handle's path): what every object used must lie in.
    root: PathBuf,
    fd: OwnedFd,
    /// The directories of DIR opened so far (`chunks`, `snapshots`, …), by name.
    dirs: Vec<Sub>,
    /// Files this run created, as (index in `dirs` or `None` for DIR, name), in order.
    created: Vec<(Option<usize>, String)>,
    /// Whether this run created DIR.
    created_root: bool,
}

/// A directory of the export opened for one read, or one kept.
enum DirFd<'a> {
    Borrowed(BorrowedFd<'a>),
    Owned(OwnedFd),
}

impl DirFd<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            DirFd::Borrowed(fd) => *fd,
            DirFd::Owned(fd) => fd.as_fd(),
        }
    }
}

/// A directory of the export, opened.
struct Sub {
    name: String,
    fd: OwnedFd,
    created: bool,
    /// Whether it gained an entry this run (it is synced before `head.json` is written).
    changed: bool,
}

/// `mwp export` could not do `what` to `path`: exit 3.
pub(super) fn io_fail(what: &str, path: &Path, e: impl Into<std::io::Error>) -> Failure {
    Failure::new(
        EXIT_UNAVAILABLE,
        format!("cannot {what} {}: {}", path.display(), e.into()),
    )
}

fn refused(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, what)
}

/// Whether this process can name what its handles hold (`/proc/self/fd`): without it (a
/// chroot or sandbox without `/proc`), paths are checked as they were opened, resolved.
#[cfg(target_os = "linux")]
fn handles_named() -> bool {
    Path::new("/proc/self/fd").is_dir()
}

/// Where the object behind `fd` really is; without `/proc`, the path it was opened by,
/// resolved (a check that a swap between it and the open can pass).
#[cfg(target_os = "linux")]
fn real_path(fd: BorrowedFd<'_>, shown: &Path) -> std::io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    if !handles_named() {
        return std::fs::canonicalize(shown);
    }
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Where the object behind `fd` really is: the path it was opened by, resolved (a check
/// that a swap between it and the open can pass).
#[cfg(not(target_os = "linux"))]
fn real_path(_fd: BorrowedFd<'_>, shown: &Path) -> std::io::Result<PathBuf> {
    std::fs::canonicalize(shown)
}

/// How a file of the export is first opened: on Linux as a path only (`O_PATH`), which
/// neither reads it nor opens a device or FIFO, so that nothing a link leads to outside DIR
/// is opened before it is refused; the file is opened for reading once it passed its checks
/// ([`reopen`]).
#[cfg(target_os = "linux")]
const LOOK: OFlags = OFlags::PATH;
#[cfg(not(target_os = "linux"))]
const LOOK: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK);

/// Opens for reading, without blocking, the very file `checked` holds as a path only (it
/// is `name` in `dir`): through `/proc/self/fd`, or, without `/proc`, by its name again,
/// refused unless it is the same file.
#[cfg(target_os = "linux")]
fn reopen(
    checked: std::fs::File,
    dir: BorrowedFd<'_>,
    name: &str,
) -> std::io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    if handles_named() {
        let fd = rustix::fs::openat(
            CWD,
            format!("/proc/self/fd/{}", checked.as_raw_fd()),
            flags,
            Mode::empty(),
        )?;
        return Ok(std::fs::File::from(fd));
    }
    let file = std::fs::File::from(rustix::fs::openat(dir, name, flags, Mode::empty())?);
    let (a, b) = (rustix::fs::fstat(&checked)?, rustix::fs::fstat(&file)?);
    if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino) {
        Ok(file)
    } else {
        Err(refused("it was replaced while it was opened".to_owned()))
    }
}

/// The file `checked`, already open for reading.
#[cfg(not(target_os = "linux"))]
fn reopen(
    checked: std::fs::File,
    _dir: BorrowedFd<'_>,
    _name: &str,
) -> std::io::Result<std::fs::File> {
    Ok(checked)
}

/// An error opening a name of the export: a link that loops is a damaged export
/// (`InvalidInput`), as a link out of it is.
fn open_error(e: Errno) -> std::io::Error {
    if e == Errno::LOOP {
        refused("it is a symbolic link that loops".to_owned())
    } else {
        e.into()
    }
}

/// Splits a path of the export (`head.json`, `chunks/<hex>.cbor`) into its directory and its
/// name; anything else (more levels, `.`, `..`, an empty part) is refused.
fn split(rel: &str) -> std::io::Result<(Option<&str>, &str)> {
    let (dir, name) = match rel.split_once('/') {
        Some((d, n)) => (Some(d), n),
        None => (None, rel),
    };
    let plain = |p: &str| !p.is_empty() && p != "." && p != ".." && !p.contains('/');
    if plain(name) && dir.is_none_or(plain) {
        Ok((dir, name))
    } else {
        Err(refused(format!("{rel} is not a path of an export")))
    }
}

impl ExportDir {
    /// Opens DIR if something is there (`None` when nothing is). `mwp export` checked `--out`
    /// to be a directory or nothing before.
    pub(crate) fn open(path: &Path) -> Result<Option<Self>, Failure> {
        Self::open_existing(path).map_err(|e| io_fail("open", path, e))
    }

    /// Opens the directory at `path` (a link to one is followed), `None` when nothing is
    /// there; something other than a directory is `NotADirectory`.
    pub(crate) fn open_existing(path: &Path) -> std::io::Result<Option<Self>> {
        match rustix::fs::openat(
            CWD,
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => Self::from_fd(path, fd, false).map(Some),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates DIR (and its missing parents, 0755), syncs its parent, and opens it.
    pub(super) fn create(path: &Path) -> Result<Self, Failure> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(path)
            .map_err(|e| io_fail("create", path, e))?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::File::open(parent)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_fail("sync", parent, e))?;
        }
        let fd = rustix::fs::openat(
            CWD,
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_fail("open", path, e))?;
        // Not narrowed by the umask.
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(DIR_MODE))
            .map_err(|e| io_fail("set the mode of", path, e))?;
        Self::from_fd(path, fd, true).map_err(|e| io_fail("open", path, e))
    }

    fn from_fd(path: &Path, fd: OwnedFd, created: bool) -> std::io::Result<Self> {
        let root = real_path(fd.as_fd(), path)?;
        Ok(Self {
            path: path.to_path_buf(),
            root,
            fd,
            dirs: Vec::new(),
            created: Vec::new(),
            created_root: created,
        })
    }

    /// DIR's path joined with `rel`, for messages.
    pub(super) fn shown(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    /// Refuses an opened object of the export that lies outside DIR.
    fn within(&self, fd: BorrowedFd<'_>, rel: &str) -> std::io::Result<()> {
        let real = real_path(fd, &self.shown(rel))?;
        if real.starts_with(&self.root) {
            Ok(())
        } else {
            Err(refused(format!(
                "a symbolic link takes it out of the export, to {}",
                real.display()
            )))
        }
    }

    /// `NotFound`, or the refusal of a link to nothing at `name` in `dir`.
    fn missing(dir: BorrowedFd<'_>, name: &str) -> std::io::Error {
        match rustix::fs::readlinkat(dir, name, Vec::new()) {
            Ok(target) => refused(format!(
                "it is a symbolic link to {}, which does not exist",
                target.to_string_lossy()
            )),
            Err(_) => std::io::ErrorKind::NotFound.into(),
        }
    }

    /// The directory `name` of DIR (DIR itself for `None`), as an index into `dirs`; created
    /// (0755, DIR synced) when missing and `create` says so, else `NotFound`.
    fn dir(&mut self, name: Option<&str>, create: bool) -> std::io::Result<Option<usize>> {
        let Some(name) = name else { return Ok(None) };
        if let Some(i) = self.dirs.iter().position(|d| d.name == name) {
            return Ok(Some(i));
        }
        let mut made = false;
        let mut tries = 0;
        let fd = loop {
            match self.open_dir(name) {
                Ok(fd) => break fd,
                // Made and removed again by someone else, over and over: give up.
                Err(e) if create && e.kind() == std::io::ErrorKind::NotFound && tries < 3 => {
                    tries += 1;
                    match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(DIR_MODE)) {
                        Ok(()) => made = true,
                        // Made meanwhile by another writer: open it.
                        Err(Errno::EXIST) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(e) => return Err(e),
            }
        };
        self.within(fd.as_fd(), name)?;
        if made {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(DIR_MODE))?;
            rustix::fs::fsync(&self.fd)?;
        }
        self.dirs.push(Sub {
            name: name.to_owned(),
            fd,
            created: made,
            changed: false,
        });
        Ok(Some(self.dirs.len() - 1))
    }

    fn dir_fd(&self, i: Option<usize>) -> BorrowedFd<'_> {
        match i {
            Some(i) => self.dirs[i].fd.as_fd(),
            None => self.fd.as_fd(),
        }
    }

    /// The directory `name` of DIR, opened and checked, for reading: one this run opened
    /// already, or opened now (not kept). `NotFound` when nothing is there.
    fn dir_for_reading(&self, name: Option<&str>) -> std::io::Result<DirFd<'_>> {
        let Some(name) = name else {
            return Ok(DirFd::Borrowed(self.fd.as_fd()));
        };
        if let Some(d) = self.dirs.iter().find(|d| d.name == name) {
            return Ok(DirFd::Borrowed(d.fd.as_fd()));
        }
        let fd = self.open_dir(name)?;
        self.within(fd.as_fd(), name)?;
        Ok(DirFd::Owned(fd))
    }

    /// Opens the directory `name` of DIR (unchecked): `NotFound`, or a link to nothing or
    /// something other than a directory refused (`InvalidInput`).
    fn open_dir(&self, name: &str) -> std::io::Result<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        match rustix::fs::openat(&self.fd, name, flags, Mode::empty()) {
            Ok(fd) => Ok(fd),
            Err(Errno::NOENT) => Err(Self::missing(self.fd.as_fd(), name)),
            Err(Errno::NOTDIR) => {
                let what = rustix::fs::statat(&self.fd, name, AtFlags::empty())
                    .map(|st| crate::regular_file::kind_of_mode(st.st_mode))
                    .unwrap_or("not a directory");
                Err(refused(format!("it is {what}, not a directory")))
            }
            Err(e) => Err(open_error(e)),
        }
    }

    /// Opens the file `rel` of the export for reading: one that lies in DIR, a regular file
    /// only (opened without blocking, and only once both are checked: `LOOK`). `NotFound`
    /// when nothing is there; a link to nothing is refused (`InvalidInput`).
    pub(super) fn open_file(&self, rel: &str) -> std::io::Result<std::fs::File> {
        let (dir, name) = split(rel)?;
        let dir = self.dir_for_reading(dir)?;
        let dirfd = dir.as_fd();
        let fd = match rustix::fs::openat(dirfd, name, LOOK | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Err(Self::missing(dirfd, name)),
            Err(e) => return Err(open_error(e)),
        };
        let file = crate::regular_file::checked(std::fs::File::from(fd))?;
        self.within(file.as_fd(), rel)?;
        reopen(file, dirfd, name)
    }

    /// The bytes of the file `rel` ([`Self::open_file`]), at most `max + 1`; one whose length
    /// is over `max` is refused unread (`FileTooLarge`).
    pub(crate) fn read(&self, rel: &str, max: u64) -> std::io::Result<Vec<u8>> {
        crate::regular_file::read_capped(self.open_file(rel)?, max)
    }

    /// Writes `bytes` to a temporary name in directory `i` (0644) and syncs it; answers the
    /// name. The caller links or renames it into place.
    fn write_temp(
        &self,
        i: Option<usize>,
        rel: &str,
        name: &str,
        bytes: &[u8],
    ) -> Result<String, Failure> {
        let dirfd = self.dir_fd(i);
        let tmp = format!(".{name}.tmp-{}", std::process::id());
        let shown = self.shown(rel).with_file_name(&tmp);
        let _ = rustix::fs::unlinkat(dirfd, tmp.as_str(), AtFlags::empty());
        let fd = rustix::fs::openat(
            dirfd,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
            Mode::from_raw_mode(FILE_MODE),
        )
        .map_err(|e| io_fail("create", &shown, e))?;
        let mut f = std::fs::File::from(fd);
        let done = f
            .write_all(bytes)
            .and_then(|()| {
                rustix::fs::fchmod(&f, Mode::from_raw_mode(FILE_MODE)).map_err(Into::into)
            })
            .and_then(|()| f.sync_all());
        if let Err(e) = done {
            let _ = rustix::fs::unlinkat(dirfd, tmp.as_str(), AtFlags::empty());
            return Err(io_fail("write", &shown, e));
        }
        Ok(tmp)
    }

    /// `Some(false)` when `rel` holds `bytes`, an error when it holds others, `None` when it
    /// is missing.
    fn same_or_other(&self, rel: &str, bytes: &[u8]) -> Result<Option<bool>, Failure> {
        let shown = self.shown(rel);
        let other = || {
            Failure::new(
                EXIT_FAILED,
                format!(
                    "{} exists with other bytes than the export plans for it; the export directory is damaged or not this group's (nothing was changed)",
                    shown.display()
                ),
            )
        };
        // A regular file only (a FIFO there must not block the export), and no more than one
        // byte past the planned length (a longer one is refused by its size, unread).
        match self.read(rel, bytes.len() as u64) {
            Ok(old) if old == bytes => Ok(Some(false)),
            Ok(_) => Err(other()),
            Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => Err(other()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => Err(Failure::new(
                EXIT_FAILED,
                format!(
                    "{}: {e}; the export directory is damaged (nothing was changed)",
                    shown.display()
                ),
            )),
            Err(e) => Err(io_fail("read", &shown, e)),
        }
    }

    /// Writes the immutable file `rel` crash-safely: nothing at its name until its whole
    /// bytes are durable, and an existing file is never replaced. Its directory is created
    /// if missing. Answers whether it was written (`false`: the same bytes were already
    /// there); other bytes already there fail (exit 1).
    pub(super) fn write_new(&mut self, rel: &str, bytes: &[u8]) -> Result<bool, Failure> {
        let damaged = |e: std::io::Error, at: &Path| {
            Failure::new(
                EXIT_FAILED,
                format!(
                    "{}: {e}; the export directory is damaged (nothing was changed)",
                    at.display()
                ),
            )
        };
        let (dir, name) = split(rel).map_err(|e| damaged(e, &self.shown(rel)))?;
        let i = self.dir(dir, true).map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidInput => damaged(e, &self.shown(dir.unwrap_or(""))),
            _ => io_fail("open", &self.shown(dir.unwrap_or("")), e),
        })?;
        if let Some(written) = self.same_or_other(rel, bytes)? {
            return Ok(written);
        }
        let tmp = self.write_temp(i, rel, name, bytes)?;
        let dirfd = self.dir_fd(i);
        let linked = rustix::fs::linkat(dirfd, tmp.as_str(), dirfd, name, AtFlags::empty());
        let _ = rustix::fs::unlinkat(dirfd, tmp.as_str(), AtFlags::empty());
        match linked {
            Ok(()) => {
                self.created.push((i, name.to_owned()));
                if let Some(i) = i {
                    self.dirs[i].changed = true;
                }
                Ok(true)
            }
            // Another writer put it there meanwhile: it must hold the same bytes.
            Err(Errno::EXIST) => self.same_or_other(rel, bytes)?.map_or(Ok(false), Ok),
            Err(e) => Err(io_fail("link", &self.shown(rel), e)),
        }
    }

    /// Makes the entries of the directories that gained files durable.
    pub(super) fn sync_changed(&self) -> Result<(), Failure> {
        for d in self.dirs.iter().filter(|d| d.changed) {
            rustix::fs::fsync(&d.fd).map_err(|e| io_fail("sync", &self.shown(&d.name), e))?;
        }
        Ok(())
    }

    /// Replaces the file `name` of DIR itself crash-safely: the temporary file is synced,
    /// renamed over it, and DIR synced.
    pub(super) fn replace(&mut self, name: &str, bytes: &[u8]) -> Result<(), Failure> {
        let tmp = self.write_temp(None, name, name, bytes)?;
        if let Err(e) = rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, name) {
            let _ = rustix::fs::unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
            return Err(io_fail("rename", &self.shown(&tmp), e));
        }
        // The new head names the files this run wrote: from here on none of them is removed,
        // whatever fails next.
        self.created.clear();
        self.dirs.iter_mut().for_each(|d| d.created = false);
        self.created_root = false;
        rustix::fs::fsync(&self.fd).map_err(|e| io_fail("sync", &self.path, e))
    }

    /// Removes the files and then the (empty) directories this run created, newest first
    /// (best effort: nothing names them), DIR itself last if this run created it.
    pub(super) fn remove_created(&self) {
        for (i, name) in self.created.iter().rev() {
            let _ = rustix::fs::unlinkat(self.dir_fd(*i), name.as_str(), AtFlags::empty());
        }
        for d in self.dirs.iter().rev().filter(|d| d.created) {
            let _ = rustix::fs::unlinkat(&self.fd, d.name.as_str(), AtFlags::REMOVEDIR);
        }
        if self.created_root {
            let _ = std::fs::remove_dir(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_swapped_for_a_link_after_its_check_is_not_written_through() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = tmp.path().join("site");
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).expect("mkdir");
        let mut dir = ExportDir::create(&out).expect("create");
        assert!(dir.write_new("chunks/a.cbor", b"a").expect("written"));
        // `chunks` was checked and opened; now it is moved away and a link to another
        // directory takes its name.
        std::fs::rename(out.join("chunks"), out.join("moved")).expect("rename");
        std::os::unix::fs::symlink(&elsewhere, out.join("chunks")).expect("link");
        assert!(dir.write_new("chunks/b.cbor", b"b").expect("written"));
        dir.sync_changed().expect("sync");
        assert_eq!(std::fs::read_dir(&elsewhere).expect("list").count(), 0);
        assert_eq!(std::fs::read(out.join("moved/b.cbor")).expect("read"), b"b");
        // A run that fails removes what it created through the same handles.
        dir.remove_created();
        assert_eq!(std::fs::read_dir(&elsewhere).expect("list").count(), 0);
        assert!(!out.join("moved/a.cbor").exists() && !out.join("moved/b.cbor").exists());
    }

    /// Nothing a link leads to outside the export is opened before it is refused: a FIFO or
    /// a device may act on being opened (a serial line, a tape, a watchdog).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_link_out_of_the_export_is_refused_before_what_it_leads_to_is_opened() {
        use rustix::fs::inotify;
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = tmp.path().join("site");
        let mut dir = ExportDir::create(&out).expect("create");
        assert!(dir.write_new("chunks/a.cbor", b"a").expect("written"));
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).expect("mkdir");
        rustix::fs::mkfifoat(CWD, outside.join("fifo"), Mode::from_raw_mode(0o600))
            .expect("mkfifo");
        std::fs::write(outside.join("file"), b"f").expect("write");
        std::os::unix::fs::symlink(outside.join("fifo"), out.join("chunks/f.cbor")).expect("link");
        std::os::unix::fs::symlink(outside.join("file"), out.join("chunks/r.cbor")).expect("link");
        let watch = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC)
            .expect("inotify");
        inotify::add_watch(&watch, &outside, inotify::WatchFlags::OPEN).expect("watch");
        for (rel, what) in [
            ("chunks/f.cbor", "not a regular file"),
            ("chunks/r.cbor", "out of the export"),
        ] {
            let e = dir.read(rel, 10).expect_err(rel);
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{rel}: {e}");
            assert!(e.to_string().contains(what), "{rel}: {e}");
        }
        let mut buf = [std::mem::MaybeUninit::uninit(); 1024];
        let mut events = inotify::Reader::new(&watch, &mut buf);
        match events.next() {
            Err(Errno::AGAIN) => {}
            Ok(event) => panic!("{:?} was opened", event.file_name()),
            Err(e) => panic!("inotify: {e}"),
        }
        // What lies in the export is read as before.
        assert_eq!(dir.read("chunks/a.cbor", 10).expect("read"), b"a");
    }

    #[test]
    fn links_that_stay_in_the_export_are_followed_and_others_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = tmp.path().join("site");
        let mut dir = ExportDir::create(&out).expect("create");
        assert!(dir.write_new("chunks/a.cbor", b"a").expect("written"));
        std::os::unix::fs::symlink("chunks", out.join("inner")).expect("link");
        std::os::unix::fs::symlink(tmp.path(), out.join("outer")).expect("link");
        std::os::unix::fs::symlink("nowhere", out.join("hollow")).expect("link");
        std::os::unix::fs::symlink("loop", out.join("loop")).expect("link");
        std::os::unix::fs::symlink("l.cbor", out.join("chunks/l.cbor")).expect("link");
        std::fs::write(tmp.path().join("secret"), b"s").expect("write");
        std::os::unix::fs::symlink(tmp.path().join("secret"), out.join("chunks/s.cbor"))
            .expect("link");
        let dir = ExportDir::open(&out).expect("open").expect("there");
        assert_eq!(dir.read("inner/a.cbor", 10).expect("read"), b"a");
        for (rel, what) in [
            ("outer/secret", "out of the export"),
            ("chunks/s.cbor", "out of the export"),
            ("hollow/x", "which does not exist"),
            ("loop/x", "loops"),
            ("chunks/l.cbor", "loops"),
            ("../secret", "not a path of an export"),
        ] {
            let e = dir.read(rel, 10).expect_err(rel);
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{rel}: {e}");
            assert!(e.to_string().contains(what), "{rel}: {e}");
        }
        assert_eq!(
            dir.read("chunks/none.cbor", 10)
                .expect_err("missing")
                .kind(),
            std::io::ErrorKind::NotFound
        );
    }
}
