//! The agent side's store: an append-only journal of the write sets an agent driver
//! ([`mwp_core::agent::Agent`]) hands out, replayed into an [`AgentImage`] on open.
//!
//! It runs on the file store's [`Backend`] (so the crash harness reaches it through
//! [`MemBackend`](super::backend::MemBackend)). The format, framed as the authority's log, is
//! the core's [`mwp_core::log_format::journal`], shared with the Node/Deno journal:
//! [`encode_write_set`] writes a write set's records, [`JournalReader`] folds them back into
//! an image and says where the committed ones end. docs/format.md, "Agent journal", is the
//! normative description. This module reads, writes and syncs the bytes.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mwp_core::agent::AgentImage;
use mwp_core::canonical;
use mwp_core::log_format::journal::{
    check_journal_header, check_journal_name, encode_write_set, JournalRead, JournalReader,
    MAX_PIECE,
};
pub use mwp_core::log_format::journal::{JOURNAL_MAGIC, PIECE_LAST, PIECE_MORE};
use mwp_core::replica::WriteSet;
use mwp_core::{Code, Error, Id, Result};

use super::backend::{Backend, FsBackend, StorageFile};
use super::format::{scan, storage, ScanSpec, FILE_HEADER_LEN};
use super::lock::dir_of;
use super::lock::DirLock;

/// An append-only file of an agent's committed write sets (see the module doc).
///
/// * **Creation.** The file does not exist until the first write set is appended: the
///   header and that write set are written as `NAME.tmp` (mode 0600), synced, renamed to
///   `NAME` and the directory is synced, as the file store creates its files. So `NAME`,
///   when it exists, starts with a whole header.
/// * **Appends.** Each later write set is one positional write after the last record, then
///   `fdatasync`; [`Journal::append`] returns only then, and only then does the write set
///   count as committed.
/// * **Open.** A torn last write set (a crash mid-append: a damaged last record, or a batch
///   whose last piece never arrived) was never committed and is cut off. Damage anywhere
///   before it is `LOG_CORRUPT` naming the file and offset, never a silent truncation.
/// * **Failures are sticky.** After a failed write, sync, create or rename the journal
///   refuses further appends (`STORAGE`) until it is reopened.
pub struct Journal {
    backend: Arc<dyn Backend>,
    path: PathBuf,
    /// `None` until the file exists.
    file: Option<Arc<dyn StorageFile>>,
    /// The group named in the header.
    group: Option<Id>,
    /// Offset just past the last committed record.
    end: u64,
    /// Seq of the next record.
    next_seq: u64,
    /// Largest piece of a write set per record.
    piece: usize,
    failed: bool,
    /// The journal's writer lock ([`DirLock::acquire_file`]), held until dropped; `None` on
    /// a backend other than the real file system.
    lock: Option<DirLock>,
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.path)
            .field("group", &self.group)
            .field("end", &self.end)
            .field("next_seq", &self.next_seq)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

fn io_err(what: impl fmt::Display) -> impl FnOnce(std::io::Error) -> Error {
    move |e| storage(what, e)
}

/// `NAME.tmp` beside `NAME`.
fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// `STORAGE` naming `path` when it holds something other than a regular file (a directory,
/// a FIFO: opened without blocking); `Ok` for a regular file or nothing.
fn not_a_journal_file(path: &Path) -> Result<()> {
    match crate::regular_file::open(path) {
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => Err(Error::new(
            Code::Storage,
            format!("agent journal {}: {e}", path.display()),
        )
        .with("file", path.display().to_string())),
        _ => Ok(()),
    }
}

impl Journal {
    /// Opens the journal at `path` on the real file system (see [`Journal::open_with`]),
    /// first taking its writer lock (`NAME.LOCK.pid` beside it, as a data directory's, see
    /// [`DirLock::acquire_file`]): a journal another process (native, Node or Deno) or
    /// another open journal holds is refused with `STORAGE` naming the file and the holder's
    /// pid. The lock is held until the journal is dropped. A file name that is another
    /// journal's lock or temporary file, or a data directory's lock file (`a.LOCK`,
    /// `a.LOCK.pid`, `a.tmp`, `LOCK`: [`check_journal_name`]), is `MALFORMED` before anything
    /// is touched. A path that holds something other than a regular file (a directory, a
    /// FIFO) is `STORAGE` naming it, before the lock is taken: nothing is created beside it.
    pub fn open(path: impl AsRef<Path>) -> Result<(Journal, AgentImage)> {
        let path = path.as_ref();
        check_journal_name(&path.display().to_string(), &last_name(path))?;
        // What is at the path must be a journal file or nothing: a directory or a FIFO put
        // there is refused (opened without blocking), never read, replaced or written past,
        // and before the lock is taken, so that the refusal creates nothing beside it. Asked
        // again under the lock, which another process may have taken meanwhile.
        not_a_journal_file(path)?;
        let lock = DirLock::acquire_file(path)?;
        not_a_journal_file(path)?;
        let (mut journal, image) = Self::open_with(Arc::new(FsBackend), path)?;
        journal.lock = Some(lock);
        Ok((journal, image))
    }

    /// Opens the journal at `path` on any backend (no writer lock: the lock is on the real
    /// file system, taken by [`Journal::open`]) and replays it into an image: the default
    /// image if there is no file yet. A `NAME.tmp` left by a creation that never completed
    /// (nothing in it was committed) is removed, a torn last write set is cut off.
    pub fn open_with(backend: Arc<dyn Backend>, path: &Path) -> Result<(Journal, AgentImage)> {
        let mut journal = Journal {
            backend,
            path: path.to_path_buf(),
            file: None,
            group: None,
            end: 0,
            next_seq: 1,
            piece: MAX_PIECE,
            failed: false,
            lock: None,
        };
        let be = &*journal.backend;
        let tmp = tmp_path(path);
        if be.is_file(&tmp) {
            be.remove(&tmp)
                .map_err(io_err(format!("remove {}", tmp.display())))?;
        }
        if !be.is_file(path) {
            return Ok((journal, AgentImage::default()));
        }
        let name = format!("agent journal {}", path.display());
        let file = be
            .open(path)
            .map_err(io_err(format!("open {}", path.display())))?;
        let len = file
            .len()
            .map_err(io_err(format!("size of {}", path.display())))?;
        let mut hb = vec![0u8; FILE_HEADER_LEN.min(len as usize)];
        file.read_at(0, &mut hb)
            .map_err(io_err(format!("read {}", path.display())))?;
        let group = check_journal_header(&hb).map_err(|d| d.into_error(&name))?;
        let mut reader = JournalReader::new(group);
        let spec = ScanSpec {
            name: &name,
            first_seq: 1,
            contiguous: true,
            may_be_torn: true,
            reserve: false,
            erased: &|_| None,
        };
        let end = scan(&*file, &spec, &mut |r| {
            reader.handle_record(&r).map_err(|d| d.into_error(&name))
        })?;
        let JournalRead {
            group,
            image,
            keep,
            next_seq,
        } = reader.finish(&end);
        if keep < len {
            file.set_len(keep)
                .map_err(io_err(format!("trim {}", path.display())))?;
            file.sync_data()
                .map_err(io_err(format!("sync {}", path.display())))?;
        }
        journal.file = Some(file);
        journal.group = Some(group);
        journal.end = keep;
        journal.next_seq = next_seq;
        Ok((journal, image))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a write set and makes it durable; it is committed once this returns `Ok`.
    /// A write set without a group, or of another group than the journal's, is refused
    /// (`MALFORMED`, nothing written); a storage failure is `STORAGE` and sticky.
    pub fn append(&mut self, ws: &WriteSet) -> Result<()> {
        if self.failed {
            return Err(Error::new(
                Code::Storage,
                format!(
                    "agent journal {}: an earlier append failed; reopen the journal",
                    self.path.display()
                ),
            ));
        }
        let Some(group) = ws.group.as_ref() else {
            return Err(Error::malformed(format!(
                "agent journal {}: a write set without a group",
                self.path.display()
            )));
        };
        if let Some(mine) = self.group.as_ref().filter(|g| *g != group) {
            return Err(Error::malformed(format!(
                "agent journal {} belongs to group {mine}, the write set to {group}",
                self.path.display()
            )));
        }
        // A journal whose owner record was removed or taken over appends nothing more.
        if let Some(lock) = &self.lock {
            if let Err(e) = lock.owner_check().check() {
                self.failed = true;
                return Err(e);
            }
        }
        let body = canonical::to_vec(ws).map_err(|e| Error::malformed(e.to_string()))?;
        let mut bytes = Vec::with_capacity(FILE_HEADER_LEN + body.len() + 32);
        let seq = encode_write_set(
            &mut bytes,
            group,
            self.file.is_none(),
            self.next_seq,
            &body,
            self.piece,
        );
        let written = match &self.file {
            Some(file) => file
                .write_at(self.end, &bytes)
                .and_then(|()| file.sync_data())
                .map(|()| file.clone())
                .map_err(io_err(format!("append to {}", self.path.display()))),
            None => self.create(&bytes),
        };
        let file = written.inspect_err(|_| self.failed = true)?;
        self.file = Some(file);
        self.group = Some(group.clone());
        self.end += bytes.len() as u64;
        self.next_seq = seq;
        Ok(())
    }

    /// Writes a new journal holding `bytes` (header and first write set) durably in place.
    fn create(&self, bytes: &[u8]) -> Result<Arc<dyn StorageFile>> {
        let be = &*self.backend;
        let tmp = tmp_path(&self.path);
        if be.is_file(&tmp) {
            be.remove(&tmp)
                .map_err(io_err(format!("remove {}", tmp.display())))?;
        }
        let file = be
            .create(&tmp, 0o600)
            .map_err(io_err(format!("create {}", tmp.display())))?;
        file.write_at(0, bytes)
            .map_err(io_err(format!("write {}", tmp.display())))?;
        file.sync_data()
            .map_err(io_err(format!("sync {}", tmp.display())))?;
        be.rename(&tmp, &self.path)
            .map_err(io_err(format!("rename {}", tmp.display())))?;
        let dir = dir_of(&self.path);
        be.sync_dir(&dir)
            .map_err(io_err(format!("sync {}", dir.display())))?;
        Ok(file)
    }
}

/// The last name in `path` as written, as Node's `basename` reads it (trailing `/` dropped):
/// not `Path::file_name`, which reads `d/x/.` as `x` where the path names no file.
fn last_name(path: &Path) -> String {
    let text = path.to_string_lossy();
    let text = text.trim_end_matches('/');
    text.rsplit('/').next().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::backend::{Fault, MemBackend, PowerLoss};
    use crate::store::format::{encode_record, RECORD_HEADER_LEN};
    use mwp_core::agent::{AgentMeta, OutboxChange, OutboxEntry};
    use mwp_core::command::{Body, ReplaceSession};
    use mwp_core::{Command, SecretKey};

    fn id(s: &str) -> Id {
        Id::new(s).expect("a literal identifier")
    }

    fn write_set(serial: u64, action: &str, key: &SecretKey) -> WriteSet {
        let command = Command::signed(
            id("acme"),
            id("g"),
            id("ada"),
            id(action),
            1,
            None,
            Body::ReplaceSession(ReplaceSession {}),
            key,
        )
        .expect("a well-formed command");
        WriteSet {
            group: Some(id("g")),
            serial,
            outbox: vec![OutboxChange::Put(OutboxEntry {
                base: id(action),
                rebases: 0,
                command,
                binding: Default::default(),
                made_at: serial,
                offline: false,
            })],
            meta: Some(AgentMeta {
                session: 1,
                next_action: serial + 1,
            }),
            ..WriteSet::default()
        }
    }

    fn key() -> SecretKey {
        SecretKey::for_transcript("ada")
    }

    const PATH: &str = "/ada.journal";

    fn open(be: &MemBackend) -> Result<(Journal, AgentImage)> {
        Journal::open_with(Arc::new(be.clone()), Path::new(PATH))
    }

    #[test]
    fn a_reopened_journal_has_every_committed_write_set_and_drops_a_torn_tail() {
        let be = MemBackend::new();
        let path = Path::new(PATH);
        let (mut journal, image) = open(&be).expect("a new journal");
        assert_eq!(image, AgentImage::default());
        assert!(
            !be.is_file(path),
            "nothing is created before the first append"
        );
        let mut expected = AgentImage::default();
        for (serial, action) in [(1, "a-1"), (2, "a-2")] {
            let ws = write_set(serial, action, &key());
            journal.append(&ws).expect("an append");
            expected.commit(&ws).expect("consecutive serials");
        }
        assert_eq!(be.mode(path).expect("mode"), Some(0o600));
        drop(journal);
        let committed = be.read_file(path).expect("the journal");

        // The bytes are the core's journal format, which the npm package's journal writes and
        // reads through the wasm module (`encodeAgentJournalAppend`, `readAgentJournal`).
        let mut by_core = Vec::new();
        let mut seq = 1;
        for (serial, action) in [(1, "a-1"), (2, "a-2")] {
            let body = canonical::to_vec(&write_set(serial, action, &key())).expect("encodes");
            seq = encode_write_set(&mut by_core, &id("g"), seq == 1, seq, &body, MAX_PIECE);
        }
        assert_eq!(
            committed, by_core,
            "the native journal is the core's format"
        );
        let read = mwp_core::log_format::journal::read_journal(&committed).expect("reads");
        assert_eq!(
            (read.image, read.keep),
            (expected.clone(), committed.len() as u64)
        );

        // A crash mid-append: half a record.
        let body = canonical::to_vec(&write_set(3, "a-3", &key())).expect("encodes");
        let mut torn = committed.clone();
        let mut payload = vec![PIECE_LAST];
        payload.extend_from_slice(&body);
        encode_record(&mut torn, 3, 3, &payload);
        torn.truncate(committed.len() + payload.len() / 2);
        be.write_file(path, &torn).expect("a torn write");
        let (mut journal, image) = open(&be).expect("reopens");
        assert_eq!(image, expected);
        assert_eq!(image.serial, 2);
        assert_eq!(be.read_file(path).expect("the journal"), committed);
        // The next append follows the last committed one.
        journal
            .append(&write_set(3, "a-3", &key()))
            .expect("an append");
        let (_, image) = open(&be).expect("reopens");
        assert_eq!(image.serial, 3);

        // A full-length last record whose bytes did not all reach the disk: torn, trimmed.
        let mut bytes = be.read_file(path).expect("the journal");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        be.write_file(path, &bytes).expect("damage");
        let (_, image) = open(&be).expect("reopens");
        assert_eq!(image, expected);
        assert_eq!(be.read_file(path).expect("the journal"), committed);

        // Damage before the last record is refused, naming the file and offset; nothing is cut.
        let mut bytes = committed.clone();
        bytes[FILE_HEADER_LEN + RECORD_HEADER_LEN + 2] ^= 0x01;
        be.write_file(path, &bytes).expect("damage");
        let err = open(&be).expect_err("damage mid-file");
        assert_eq!(err.code, Code::LogCorrupt);
        assert_eq!(
            err.details.get("offset"),
            Some(&serde_json::json!(FILE_HEADER_LEN))
        );
        assert!(err.message.contains(PATH), "{}", err.message);
        assert_eq!(be.read_file(path).expect("the journal"), bytes);

        // A file that is not a journal is refused, not trimmed.
        be.write_file(path, b"not a journal").expect("write");
        let err = open(&be).expect_err("no header");
        assert_eq!(err.code, Code::LogCorrupt);
        assert_eq!(be.read_file(path).expect("the file"), b"not a journal");
    }

    #[test]
    fn a_write_set_larger_than_a_record_spans_a_batch_and_a_cut_batch_is_torn() {
        let be = MemBackend::new();
        let path = Path::new(PATH);
        let (mut journal, _) = open(&be).expect("a new journal");
        journal.piece = 40;
        let mut expected = AgentImage::default();
        for serial in 1..=2 {
            let ws = write_set(serial, &format!("a-{serial}"), &key());
            journal.append(&ws).expect("an append");
            expected.commit(&ws).expect("consecutive serials");
        }
        let committed = be.read_file(path).expect("the journal");
        journal
            .append(&write_set(3, "a-3", &key()))
            .expect("an append");
        let whole = be.read_file(path).expect("the journal");
        let (_, image) = open(&be).expect("reopens");
        assert_eq!(image.serial, 3);
        // Cut the last batch at each of its record boundaries: the write set is not there.
        let mut at = committed.len();
        let mut cuts = 0;
        while at < whole.len() {
            let len = u32::from_le_bytes(whole[at..at + 4].try_into().expect("4 bytes"));
            at += RECORD_HEADER_LEN + len as usize;
            if at < whole.len() {
                be.write_file(path, &whole[..at]).expect("a cut");
                let (mut journal, image) = open(&be).expect("reopens");
                assert_eq!(image, expected, "cut at {at}");
                assert_eq!(be.read_file(path).expect("the journal"), committed);
                journal.piece = 40;
                journal
                    .append(&write_set(3, "a-3", &key()))
                    .expect("an append");
                assert_eq!(be.read_file(path).expect("the journal"), whole);
                cuts += 1;
            }
        }
        assert!(cuts > 2, "the write set spans several records");
    }

    #[test]
    fn a_failed_append_is_sticky_and_a_foreign_write_set_is_refused() {
        let be = MemBackend::new();
        let (mut journal, _) = open(&be).expect("a new journal");
        journal
            .append(&write_set(1, "a-1", &key()))
            .expect("an append");
        let mut other = write_set(2, "a-2", &key());
        other.group = Some(id("h"));
        let e = journal.append(&other).expect_err("another group");
        assert_eq!(e.code, Code::Malformed);
        be.fail_at(be.ops() + 1, Fault::Once);
        let e = journal
            .append(&write_set(2, "a-2", &key()))
            .expect_err("the sync fails");
        assert_eq!(e.code, Code::Storage);
        let e = journal
            .append(&write_set(2, "a-2", &key()))
            .expect_err("sticky");
        assert_eq!(e.code, Code::Storage);
        // The write set whose sync failed was never acknowledged; a power cut drops it.
        let (_, image) = open(&be.crash_image(PowerLoss::DropAll)).expect("reopens");
        assert_eq!(image.serial, 1);
    }

    #[test]
    fn a_journal_has_one_writer_until_it_is_dropped() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("ada.journal");
        let (first, _) = Journal::open(&path).expect("a new journal");
        let e = Journal::open(&path).expect_err("held");
        assert_eq!(e.code, Code::Storage);
        let me = std::process::id();
        assert!(
            e.message.contains(&format!(
                "{} is in use by another writer (process {me}); stop it first",
                path.display()
            )),
            "{e}"
        );
        assert_eq!(e.details.get("pid"), Some(&serde_json::json!(me)));
        assert_eq!(
            e.details.get("file"),
            Some(&serde_json::json!(path.display().to_string()))
        );
        // The owner record is a data directory's, beside the journal.
        let owner = dir.path().join("ada.journal.LOCK.pid");
        let text = std::fs::read_to_string(&owner).expect("the owner record");
        assert_eq!(
            crate::store::lock::Owner::decode(&text).map(|o| o.pid),
            Some(me)
        );
        // Another journal in the same directory has its own lock.
        drop(Journal::open(dir.path().join("bob.journal")).expect("another journal"));
        drop(first);
        assert!(!owner.exists(), "a clean close removes the owner record");
        Journal::open(&path).expect("open again once the first is dropped");
    }

    /// A journal named like the lock or temporary file of another journal is refused before
    /// anything is created, locked or removed; the other journal keeps its writer.
    #[test]
    fn a_journal_named_like_another_journals_lock_file_is_refused() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("a");
        let (mut journal, _) = Journal::open(&path).expect("journal a");
        journal
            .append(&write_set(1, "a-1", &key()))
            .expect("an append");
        let files = |d: &Path| {
            let mut names: Vec<_> = std::fs::read_dir(d)
                .expect("the folder")
                .map(|e| e.expect("an entry").file_name())
                .collect();
            names.sort();
            names
        };
        let before = files(dir.path());
        for (name, why) in [
            ("a.LOCK", "a.LOCK is the writer lock file of journal a"),
            ("a.LOCK.pid", "a.LOCK.pid is the owner record of journal a"),
            ("a.tmp", "a.tmp is the file that creates journal a"),
        ] {
            let other = dir.path().join(name);
            let e = Journal::open(&other).expect_err(name);
            assert_eq!(e.code, Code::Malformed, "{name}");
            assert_eq!(
                e.message,
                format!(
                    "agent journal {}: {why}; choose another name",
                    other.display()
                )
            );
            assert_eq!(
                e.details.get("file"),
                Some(&serde_json::json!(other.display().to_string()))
            );
        }
        assert_eq!(files(dir.path()), before, "nothing created or removed");
        journal
            .append(&write_set(2, "a-2", &key()))
            .expect("journal a still holds its lock");
    }

    /// A path that ends in `.` or `..` names no file: refused before anything is created
    /// (read as `Path::file_name` reads it, `d/x/.` was the journal `x`, its lock files made
    /// inside `x`), as Node and Deno refuse it.
    #[test]
    fn a_journal_path_that_names_no_file_is_refused_before_anything_is_created() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let sub = dir.path().join("x");
        std::fs::create_dir(&sub).expect("mkdir");
        for path in [sub.join("."), sub.join(".."), sub.join("./")] {
            let e = Journal::open(&path).expect_err("refused");
            assert_eq!(e.code, Code::Malformed, "{e}");
            assert_eq!(
                e.message,
                format!(
                    "agent journal {}: the path names no file; choose another name",
                    path.display()
                )
            );
        }
        assert_eq!(
            std::fs::read_dir(&sub).expect("x").count(),
            0,
            "nothing created in x"
        );
        assert_eq!(last_name(Path::new("/d/a.journal/")), "a.journal");
        assert_eq!(last_name(Path::new("a.LOCK")), "a.LOCK");
        assert_eq!(last_name(Path::new("/")), "");
    }

    /// A directory or a FIFO where the journal belongs is refused at open, never waited on
    /// nor replaced by the first append, and before its lock is taken: neither `NAME.LOCK`
    /// nor `NAME.LOCK.pid` is left beside it.
    #[test]
    fn a_journal_path_that_is_not_a_regular_file_is_refused() {
        for kind in ["directory", "FIFO"] {
            let dir = tempfile::tempdir().expect("a temporary folder");
            let path = dir.path().join("ada.journal");
            if kind == "directory" {
                std::fs::create_dir(&path).expect("mkdir");
            } else {
                crate::regular_file::mkfifo(&path);
            }
            let e = Journal::open(&path).expect_err(kind);
            assert_eq!(e.code, Code::Storage);
            assert_eq!(
                e.message,
                format!(
                    "agent journal {}: it is a {kind}, not a regular file",
                    path.display()
                )
            );
            let names: Vec<_> = std::fs::read_dir(dir.path())
                .expect("the folder")
                .map(|e| e.expect("an entry").file_name())
                .collect();
            assert_eq!(names, ["ada.journal"], "{kind}: nothing created beside it");
            assert!(!std::fs::symlink_metadata(&path).expect("kept").is_file());
        }
    }

    /// A journal whose owner record was removed (or taken over by a writer that judged it
    /// stale) appends nothing more, and says so until it is reopened.
    #[test]
    fn a_journal_that_lost_its_owner_record_appends_nothing() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("ada.journal");
        let (mut journal, _) = Journal::open(&path).expect("a new journal");
        journal
            .append(&write_set(1, "a-1", &key()))
            .expect("an append");
        let before = std::fs::read(&path).expect("the journal");
        let owner = dir.path().join("ada.journal.LOCK.pid");
        std::fs::remove_file(&owner).expect("remove the owner record");
        let e = journal
            .append(&write_set(2, "a-2", &key()))
            .expect_err("no longer this writer's");
        assert_eq!(e.code, Code::Storage);
        assert_eq!(
            e.message,
            format!(
                "{} is no longer this writer's: ada.journal.LOCK.pid holds no owner record; reopen the journal",
                path.display()
            )
        );
        assert_eq!(
            e.details.get("file"),
            Some(&serde_json::json!(path.display().to_string()))
        );
        let again = journal
            .append(&write_set(2, "a-2", &key()))
            .expect_err("sticky");
        assert!(again.message.contains("reopen the journal"), "{again}");
        assert_eq!(std::fs::read(&path).expect("the journal"), before);
    }

    #[test]
    fn a_journal_whose_owner_record_names_a_live_process_is_refused() {
        // What a Node writer leaves: an owner record and no flock.
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("ada.journal");
        let mut holder = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        let record = crate::store::lock::Owner {
            pid: holder.id(),
            start: None,
        }
        .encode();
        let owner = dir.path().join("ada.journal.LOCK.pid");
        std::fs::write(&owner, &record).expect("write the record");
        let e = Journal::open(&path).expect_err("a live holder");
        assert_eq!(e.code, Code::Storage);
        assert!(
            e.message.contains(&format!("process {}", holder.id())),
            "{e}"
        );
        let _ = holder.kill();
        let _ = holder.wait();
        drop(Journal::open(&path).expect("a dead holder's record is taken over"));
        assert!(!owner.exists());
    }

    #[cfg(unix)]
    #[test]
    fn the_journal_file_is_private() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("ada.journal");
        let (mut journal, _) = Journal::open(&path).expect("a new journal");
        journal
            .append(&write_set(1, "a-1", &key()))
            .expect("an append");
        assert_eq!(FsBackend.mode(&path).expect("mode"), Some(0o600));
        assert!(!tmp_path(&path).exists());
        drop(journal);
        let (_, image) = Journal::open(&path).expect("reopens");
        assert_eq!(image.serial, 1);
    }
}
