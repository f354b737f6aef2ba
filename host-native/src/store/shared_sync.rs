//! The store-wide sync: the durability point the group commits of all groups share.
//!
//! A group's commit leader writes its batch into its segment and then asks here for that file
//! to be made durable, instead of `fdatasync`ing it alone. One requester at a time leads a
//! *round*: it takes every file queued so far and makes them durable together — with one
//! [`FileSystemSync`] (`syncfs`) when at least [`FILESYSTEM_SYNC_MIN_FILES`] of them are
//! queued, else with the file's own `sync_data` — and then wakes the requesters of that
//! round. A request always waits for a round that starts after it was queued, so a round
//! never answers for a write it may not cover. A failed round fails its requesters and every
//! later one (the caller makes the failure sticky).
//!
//! Without a [`FileSystemSync`] (other systems, Linux before 5.8), and for a file on another
//! file system, there are no rounds: each requester `fdatasync`s its own file at once, so
//! the groups' syncs still run side by side rather than one after another in a round.
//!
//! With one busy group every round holds one file and costs what the group's own
//! `fdatasync` did; with many, one round makes a batch of each of them durable for about the
//! price of one sync (docs/decisions.md, "One sync for many groups").

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use mwp_core::{Error, Result};

use super::backend::{FileSystemSync, StorageFile};
use super::format::storage;
use super::group::lock;
use super::parked::Parked;

/// Smallest number of files of the store's file system that a round syncs with one
/// [`FileSystemSync`] rather than one `sync_data` each. Measured on ext4 (BENCHMARKS.md,
/// "Many groups at once: one sync for many groups"): one `syncfs` costs about one
/// `fdatasync` from two dirty files on, and a fifth of 16 `fdatasync`s at 16 files.
pub(crate) const FILESYSTEM_SYNC_MIN_FILES: usize = 2;

/// The store's sync rounds.
pub(crate) struct SharedSync {
    /// Syncs the file system of the store's groups directory; `None` where the backend has
    /// no such sync (every round then syncs file by file).
    filesystem: Option<Arc<dyn FileSystemSync>>,
    rounds: Mutex<Rounds>,
}

struct Rounds {
    /// Files queued for round `next`, each once (by address), with its path for messages.
    queued: Vec<(Arc<dyn StorageFile>, PathBuf)>,
    /// The round that will take the queued files.
    next: u64,
    /// The last round that finished (0: none yet; rounds count from 1).
    done: u64,
    /// Whether a round is being synced.
    running: bool,
    /// The first round that failed, and why.
    failed: Option<(u64, Error)>,
    /// Requesters parked until their round finishes: woken by the round that makes their
    /// write durable (all of them if it failed), or to lead the next round. Waking only
    /// these keeps dozens of requesters from all waking after every round.
    waiters: Parked,
}

impl SharedSync {
    /// Sync rounds that use `filesystem` for rounds of many files.
    pub(crate) fn new(filesystem: Option<Arc<dyn FileSystemSync>>) -> Self {
        SharedSync {
            filesystem,
            rounds: Mutex::new(Rounds {
                queued: Vec::new(),
                next: 1,
                done: 0,
                running: false,
                failed: None,
                waiters: Parked::default(),
            }),
        }
    }

    /// Whether there are rounds at all: without a [`FileSystemSync`] every file is synced
    /// on its own.
    pub(crate) fn rounds(&self) -> bool {
        self.filesystem.is_some()
    }

    /// Makes every `write_at` and `set_len` of `file` made before this call durable, in a
    /// round shared with the concurrent requests for other files; `path` names it in errors.
    pub(crate) fn sync(&self, file: &Arc<dyn StorageFile>, path: PathBuf) -> Result<()> {
        self.sync_all(vec![(file.clone(), path)])
    }

    /// Makes every `write_at` and `set_len` of each of `files` made before this call durable,
    /// all of them in one round (shared with concurrent requests), as [`SharedSync::sync`]
    /// does for one file. Files on another file system are synced one by one first.
    pub(crate) fn sync_all(&self, files: Vec<(Arc<dyn StorageFile>, PathBuf)>) -> Result<()> {
        let mut shared = Vec::with_capacity(files.len());
        for (file, path) in files {
            let on_shared = match &self.filesystem {
                Some(fs) => file.filesystem() == Some(fs.filesystem()),
                None => false,
            };
            if on_shared {
                shared.push((file, path));
            } else {
                file.sync_data()
                    .map_err(|e| storage(format!("sync {}", path.display()), e))?;
            }
        }
        if shared.is_empty() {
            return Ok(());
        }
        let mut r = lock(&self.rounds);
        for (file, path) in shared {
            if !r.queued.iter().any(|(f, _)| Arc::ptr_eq(f, &file)) {
                r.queued.push((file, path));
            }
        }
        let mine = r.next;
        loop {
            if let Some((at, e)) = &r.failed {
                if *at <= mine {
                    return Err(e.clone());
                }
            }
            if r.done >= mine {
                return Ok(());
            }
            if !r.running {
                r.running = true;
                let round = r.next;
                r.next += 1;
                let files = std::mem::take(&mut r.queued);
                drop(r);
                let synced = self.sync_round(&files);
                r = lock(&self.rounds);
                r.running = false;
                r.done = round;
                let failed = synced.is_err();
                if let Err(e) = synced {
                    r.failed.get_or_insert((round, e));
                }
                let woken = r.waiters.wake(round, failed, true);
                drop(r);
                woken.unpark();
                r = lock(&self.rounds);
                continue;
            }
            r.waiters.push(mine);
            drop(r);
            // A wake-up that came before this park is not lost (the thread's token).
            std::thread::park();
            r = lock(&self.rounds);
            r.waiters.forget_current();
        }
    }

    /// Makes one round's files (all on the shared file system) durable.
    fn sync_round(&self, files: &[(Arc<dyn StorageFile>, PathBuf)]) -> Result<()> {
        match &self.filesystem {
            Some(fs) if files.len() >= FILESYSTEM_SYNC_MIN_FILES => fs
                .sync()
                .map_err(|e| storage(format!("sync the file system of {} files", files.len()), e)),
            _ => {
                for (file, path) in files {
                    file.sync_data()
                        .map_err(|e| storage(format!("sync {}", path.display()), e))?;
                }
                Ok(())
            }
        }
    }
}
