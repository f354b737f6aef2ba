//! The agent side's store (SPEC §7, §9): a replica's projection of each Group, kept apart
//! from the authority's log.
//!
//! One apply cycle is one [`ProjectionTxn`]: the events it applied with their write sets
//! (opaque bytes the replica defines), the cursor it advanced to, and the effect receipts it
//! recorded. [`ProjectionStore::commit`] makes the whole transaction durable or none of it:
//! the cursor never moves without its write sets. [`ProjectionStore::compact`] replaces the
//! history with one image of the state at a cursor.
//!
//! On disk: `DATA/projections/<group dir>/journal.log`, a file header (magic `MWPPRJ\r\n`)
//! and one checksummed record per committed transaction (the record framing of
//! docs/format.md; `seq` counts commits from 1). A torn last record (a commit that never
//! returned) is trimmed on load; any other damage is `LOG_CORRUPT`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use mwp_core::{Code, Error, Hash, Id, Result};

use super::backend::{Backend, FsBackend, StorageFile};
use super::format::{
    self, corrupt_at, encode_record, group_dir_name, scan, storage, FileHeader, ScanSpec,
    FILE_HEADER_LEN,
};
use super::group::lock;

/// Magic of a projection journal.
pub const JOURNAL_MAGIC: [u8; 8] = *b"MWPPRJ\r\n";
const JOURNAL_NAME: &str = "journal.log";
const KIND_TXN: u8 = 1;
const KIND_IMAGE: u8 = 2;

/// One apply cycle of a replica, committed whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectionTxn {
    /// Events applied, by seq, with the write set each produced.
    pub applied: Vec<(u64, Vec<u8>)>,
    /// The cursor after this transaction.
    pub cursor: u64,
    /// Effect receipts recorded: (effect key, receipt bytes).
    pub effect_receipts: Vec<(Hash, Vec<u8>)>,
}

impl ProjectionTxn {
    /// An empty transaction starting at `cursor`.
    pub fn new(cursor: u64) -> Self {
        ProjectionTxn {
            cursor,
            ..Self::default()
        }
    }

    /// Boundary "apply event": records the write set of event `seq`.
    pub fn apply_event(&mut self, seq: u64, write_set: Vec<u8>) -> &mut Self {
        self.applied.push((seq, write_set));
        self
    }

    /// Boundary "advance cursor": the highest contiguous seq applied. A cursor never moves
    /// back; `commit` refuses one that does.
    pub fn advance_cursor(&mut self, cursor: u64) -> &mut Self {
        self.cursor = cursor;
        self
    }

    /// Boundary "record effect receipt": the external receipt of an effect, by its key.
    pub fn record_effect_receipt(&mut self, key: Hash, receipt: Vec<u8>) -> &mut Self {
        self.effect_receipts.push((key, receipt));
        self
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = vec![KIND_TXN];
        out.extend_from_slice(&self.cursor.to_le_bytes());
        out.extend_from_slice(&(self.applied.len() as u32).to_le_bytes());
        for (seq, ws) in &self.applied {
            out.extend_from_slice(&seq.to_le_bytes());
            out.extend_from_slice(&(ws.len() as u32).to_le_bytes());
            out.extend_from_slice(ws);
        }
        out.extend_from_slice(&(self.effect_receipts.len() as u32).to_le_bytes());
        for (key, r) in &self.effect_receipts {
            out.extend_from_slice(&key.0);
            out.extend_from_slice(&(r.len() as u32).to_le_bytes());
            out.extend_from_slice(r);
        }
        out
    }
}

/// What a committed record holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// A whole image of the projection at `cursor` (written by `compact`).
    Image {
        /// Cursor of the image.
        cursor: u64,
        /// The image bytes.
        image: Vec<u8>,
    },
    /// One transaction.
    Txn(ProjectionTxn),
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Some(u64::from_le_bytes(a))
    }
}

fn decode(b: &[u8]) -> Option<Committed> {
    let mut c = Cursor { b, at: 1 };
    let out = match *b.first()? {
        KIND_IMAGE => {
            let cursor = c.u64()?;
            let image = c.b.get(c.at..)?.to_vec();
            c.at = b.len();
            Committed::Image { cursor, image }
        }
        KIND_TXN => {
            let mut t = ProjectionTxn::new(c.u64()?);
            for _ in 0..c.u32()? {
                let seq = c.u64()?;
                let n = c.u32()? as usize;
                t.applied.push((seq, c.take(n)?.to_vec()));
            }
            for _ in 0..c.u32()? {
                let mut key = [0u8; 32];
                key.copy_from_slice(c.take(32)?);
                let n = c.u32()? as usize;
                t.effect_receipts.push((Hash(key), c.take(n)?.to_vec()));
            }
            Committed::Txn(t)
        }
        _ => return None,
    };
    (c.at == b.len()).then_some(out)
}

fn check_size(len: usize) -> Result<()> {
    if len > format::MAX_RECORD_LEN as usize {
        return Err(Error::malformed(format!(
            "transaction is {len} bytes; a projection record holds at most {} (compact instead)",
            format::MAX_RECORD_LEN
        )));
    }
    Ok(())
}

/// A durable store of replica projections.
pub trait ProjectionStore: Send + Sync {
    /// Streams what is committed for `group` to `visit`, oldest first (an image, if any,
    /// comes first); returns the committed cursor (0 for an unknown group).
    fn load(&self, group: &Id, visit: &mut dyn FnMut(Committed) -> Result<()>) -> Result<u64>;
    /// Commits one transaction durably (all of it or none). The cursor may not move back.
    fn commit(&self, group: &Id, txn: &ProjectionTxn) -> Result<()>;
    /// Replaces everything committed for `group` with one image at `cursor`, atomically.
    fn compact(&self, group: &Id, cursor: u64, image: &[u8]) -> Result<()>;
}

struct Journal {
    file: Arc<dyn StorageFile>,
    end: u64,
    commits: u64,
    cursor: u64,
}

/// The file-backed [`ProjectionStore`].
pub struct FileProjectionStore {
    backend: Arc<dyn Backend>,
    root: PathBuf,
    open: Mutex<std::collections::BTreeMap<Id, Journal>>,
    sticky: Mutex<Option<Error>>,
}

fn io_err(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> Error {
    move |e| storage(what, e)
}

impl FileProjectionStore {
    /// Opens (creating) `dir/projections` on the real file system.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(Arc::new(FsBackend), dir.as_ref())
    }

    /// Opens (creating) `dir/projections` on any backend.
    pub fn open_with(backend: Arc<dyn Backend>, dir: &Path) -> Result<Self> {
        let root = dir.join("projections");
        for d in [dir, root.as_path()] {
            if !backend.is_dir(d) {
                backend
                    .create_dir(d)
                    .map_err(io_err(format!("create {}", d.display())))?;
                if let Some(p) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
                    backend
                        .sync_dir(p)
                        .map_err(io_err(format!("sync {}", p.display())))?;
                }
            }
        }
        Ok(FileProjectionStore {
            backend,
            root,
            open: Mutex::new(Default::default()),
            sticky: Mutex::new(None),
        })
    }

    fn dir(&self, group: &Id) -> PathBuf {
        self.root.join(group_dir_name(group))
    }

    fn check_sticky(&self) -> Result<()> {
        match &*lock(&self.sticky) {
            None => Ok(()),
            Some(e) => Err(Error::new(
                Code::Storage,
                format!(
                    "the projection store refuses writes after a storage failure ({})",
                    e.message
                ),
            )),
        }
    }

    fn sticky<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if e.code == Code::Storage {
                lock(&self.sticky).get_or_insert_with(|| e.clone());
            }
        }
        r
    }

    /// Writes a new journal holding `first` (if any) durably in place of the old one.
    fn new_journal(&self, group: &Id, first: Option<&[u8]>) -> Result<Journal> {
        let dir = self.dir(group);
        let be = &self.backend;
        if !be.is_dir(&dir) {
            be.create_dir(&dir)
                .map_err(io_err(format!("create {}", dir.display())))?;
            be.sync_dir(&self.root)
                .map_err(io_err(format!("sync {}", self.root.display())))?;
        }
        let mut data = FileHeader {
            magic: JOURNAL_MAGIC,
            first_seq: 1,
            prev: Hash::ZERO,
            group: group.clone(),
        }
        .encode()
        .to_vec();
        if let Some(p) = first {
            encode_record(&mut data, 1, 1, p);
        }
        let tmp = dir.join(format!("{JOURNAL_NAME}.tmp"));
        if be.is_file(&tmp) {
            be.remove(&tmp)
                .map_err(io_err(format!("remove {}", tmp.display())))?;
        }
        let file = be
            .create(&tmp, 0o600)
            .map_err(io_err(format!("create {}", tmp.display())))?;
        file.write_at(0, &data)
            .map_err(io_err(format!("write {}", tmp.display())))?;
        file.sync_data()
            .map_err(io_err(format!("sync {}", tmp.display())))?;
        be.rename(&tmp, &dir.join(JOURNAL_NAME))
            .map_err(io_err(format!("rename {}", tmp.display())))?;
        be.sync_dir(&dir)
            .map_err(io_err(format!("sync {}", dir.display())))?;
        Ok(Journal {
            file,
            end: data.len() as u64,
            commits: u64::from(first.is_some()),
            cursor: 0,
        })
    }

    /// Scans a journal, trimming a torn last commit.
    fn scan_journal(
        &self,
        group: &Id,
        visit: &mut dyn FnMut(Committed) -> Result<()>,
    ) -> Result<Option<Journal>> {
        let path = self.dir(group).join(JOURNAL_NAME);
        if !self.backend.is_file(&path) {
            return Ok(None);
        }
        let file = self
            .backend
            .open(&path)
            .map_err(io_err(format!("open {}", path.display())))?;
        let mut hb = [0u8; FILE_HEADER_LEN];
        file.read_at(0, &mut hb)
            .map_err(|_| corrupt_at(JOURNAL_NAME, 0, "file is shorter than its header"))?;
        let h =
            FileHeader::decode(&hb, JOURNAL_MAGIC).map_err(|e| corrupt_at(JOURNAL_NAME, 0, e))?;
        if &h.group != group {
            return Err(corrupt_at(
                JOURNAL_NAME,
                52,
                format!("journal belongs to group {}", h.group),
            ));
        }
        let mut cursor = 0;
        let spec = ScanSpec {
            name: JOURNAL_NAME,
            first_seq: 1,
            contiguous: true,
            may_be_torn: true,
            reserve: false,
            erased: &|_| None,
        };
        let end = scan(&*file, &spec, &mut |r| {
            let c = decode(r.payload)
                .ok_or_else(|| corrupt_at(JOURNAL_NAME, r.offset, "record does not decode"))?;
            cursor = match &c {
                Committed::Image { cursor, .. } => *cursor,
                Committed::Txn(t) => t.cursor,
            };
            visit(c)
        })?;
        if end.torn.is_some() {
            file.set_len(end.end)
                .map_err(io_err(format!("trim {}", path.display())))?;
            file.sync_data()
                .map_err(io_err(format!("sync {}", path.display())))?;
        }
        Ok(Some(Journal {
            file,
            end: end.end,
            commits: end.last_seq,
            cursor,
        }))
    }
}

impl ProjectionStore for FileProjectionStore {
    fn load(&self, group: &Id, visit: &mut dyn FnMut(Committed) -> Result<()>) -> Result<u64> {
        let journal = self.sticky(self.scan_journal(group, visit))?;
        let cursor = journal.as_ref().map_or(0, |j| j.cursor);
        if let Some(j) = journal {
            lock(&self.open).insert(group.clone(), j);
        }
        Ok(cursor)
    }

    fn commit(&self, group: &Id, txn: &ProjectionTxn) -> Result<()> {
        self.check_sticky()?;
        let mut open = lock(&self.open);
        if !open.contains_key(group) {
            let j = match self.sticky(self.scan_journal(group, &mut |_| Ok(())))? {
                Some(j) => j,
                None => self.sticky(self.new_journal(group, None))?,
            };
            open.insert(group.clone(), j);
        }
        let j = open
            .get_mut(group)
            .ok_or_else(|| Error::new(Code::Storage, "journal vanished"))?;
        if txn.cursor < j.cursor {
            return Err(Error::malformed(format!(
                "cursor {} would move back from the committed {}; a cursor only advances",
                txn.cursor, j.cursor
            )));
        }
        let payload = txn.encode();
        check_size(payload.len())?;
        let mut rec = Vec::new();
        encode_record(&mut rec, j.commits + 1, j.commits + 1, &payload);
        let path = self.dir(group).join(JOURNAL_NAME);
        let r = j
            .file
            .write_at(j.end, &rec)
            .and_then(|()| j.file.sync_data())
            .map_err(io_err(format!("commit to {}", path.display())));
        self.sticky(r)?;
        j.end += rec.len() as u64;
        j.commits += 1;
        j.cursor = txn.cursor;
        Ok(())
    }

    fn compact(&self, group: &Id, cursor: u64, image: &[u8]) -> Result<()> {
        self.check_sticky()?;
        let mut open = lock(&self.open);
        let mut payload = vec![KIND_IMAGE];
        payload.extend_from_slice(&cursor.to_le_bytes());
        payload.extend_from_slice(image);
        check_size(payload.len())?;
        let mut j = self.sticky(self.new_journal(group, Some(&payload)))?;
        j.cursor = cursor;
        open.insert(group.clone(), j);
        Ok(())
    }
}
