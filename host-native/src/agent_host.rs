//! A native host of the core's agent driver ([`mwp_core::agent::Agent`]) over HTTP.
//!
//! An [`HttpAgent`] is an [`Agent`] plus what the driver leaves to its host:
//!
//! * **durable storage**: every write set the driver hands out is appended whole to the
//!   agent's journal file ([`Journal`]: length-prefixed canonical CBOR, fsynced) before
//!   [`Agent::handle_committed`] is called. The driver sends nothing and dispatches nothing
//!   while a write set is uncommitted, so whatever left the agent is in the file first;
//! * **the network**: each [`Transmit`] is carried out with the blocking
//!   [`Client`] of `mwp serve` and its answer fed back (`handle_answer`, `handle_events`,
//!   `handle_fetch_error`, `handle_lookup`, `handle_snapshot`);
//! * **effects**: each [`Dispatch`] is handed to a function of the caller, which performs it
//!   and says what happened (or that nobody knows yet);
//! * **the clock**: the caller passes `now_ms` (the authority's clock,
//!   [`crate::server::now_ms`]) and calls [`HttpAgent::pump`] again by
//!   [`Agent::poll_timeout`].
//!
//! A crash is dropping the `HttpAgent`; a restart is [`HttpAgent::open`] on the same file,
//! which replays the committed write sets into an [`AgentImage`] and calls
//! [`Agent::restore`]. Nothing else survives, which is the point.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use mwp_core::agent::{Agent, AgentImage, Config, Dispatch, Notice, Transmit};
use mwp_core::canonical::{self, Strictness};
use mwp_core::opaque::Opaque;
use mwp_core::replica::WriteSet;
use mwp_core::{Code, Error, Receipt, Result, SecretKey};

use crate::server::client::Client;

/// Events asked for per replay request.
const PAGE: usize = 500;

/// An append-only file of an agent's committed write sets: each record is an 8-byte
/// little-endian length, the CRC32C of the body (4 bytes, little-endian) and the body, the
/// write set's canonical CBOR; it is fsynced before it counts as committed. The last record
/// may be torn (a crash mid-append: too short, or its checksum does not match): it was never
/// committed and is cut off when the file is opened. Damage anywhere before it is
/// `LOG_CORRUPT` naming the file and offset, never a silent truncation. A failed append is
/// sticky: the journal refuses further appends (reopen it).
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    failed: bool,
}

/// Bytes before a record's body: length, checksum.
const RECORD_HEAD: usize = 12;

impl Journal {
    /// Opens (or creates) the journal at `path` and replays it into an image.
    pub fn open(path: impl AsRef<Path>) -> Result<(Journal, AgentImage)> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = path.as_ref().to_path_buf();
        let storage = |e: std::io::Error| {
            Error::new(
                Code::Storage,
                format!("agent journal {}: {e}", path.display()),
            )
        };
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(storage)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(storage)?;
        let corrupt = |at: usize, what: &str| {
            Error::corrupt(format!(
                "agent journal {} at offset {at}: {what}",
                path.display()
            ))
            .with("offset", at)
        };
        let mut image = AgentImage::default();
        let mut at = 0usize;
        while at < bytes.len() {
            let Some(head) = bytes.get(at..at + RECORD_HEAD) else {
                break; // a torn length or checksum
            };
            let (len, crc) = head.split_at(8);
            let len = <[u8; 8]>::try_from(len)
                .map(u64::from_le_bytes)
                .ok()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(usize::MAX);
            let crc = <[u8; 4]>::try_from(crc).map_or(0, u32::from_le_bytes);
            let end = at
                .checked_add(RECORD_HEAD)
                .and_then(|b| b.checked_add(len))
                .filter(|end| *end <= bytes.len());
            let body = end.and_then(|end| bytes.get(at + RECORD_HEAD..end));
            let whole = body.filter(|b| crc32c::crc32c(b) == crc);
            let (Some(body), Some(end)) = (whole, end) else {
                // Only the last record may be torn: anything after it means damage.
                let last = end.is_none_or(|e| e == bytes.len());
                if last {
                    break;
                }
                return Err(corrupt(at, "a record's checksum does not match"));
            };
            let ws: WriteSet = canonical::from_slice(body, Strictness::Canonical)
                .map_err(|e| corrupt(at, &format!("a record does not decode: {e}")))?;
            image.commit(&ws).map_err(|e| corrupt(at, &e.message))?;
            at = end;
        }
        if at < bytes.len() {
            // The torn tail of an append that never completed.
            file.set_len(at as u64).map_err(storage)?;
            file.sync_all().map_err(storage)?;
        }
        Ok((
            Journal {
                path,
                file,
                failed: false,
            },
            image,
        ))
    }

    /// Appends a write set and makes it durable.
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
        let body = canonical::to_vec(ws).map_err(|e| Error::malformed(e.to_string()))?;
        let mut record = Vec::with_capacity(body.len() + RECORD_HEAD);
        record.extend_from_slice(&(body.len() as u64).to_le_bytes());
        record.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        record.extend_from_slice(&body);
        let written = self
            .file
            .write_all(&record)
            .and_then(|()| self.file.sync_data());
        written.map_err(|e| {
            self.failed = true;
            Error::new(
                Code::Storage,
                format!("agent journal {}: {e}", self.path.display()),
            )
        })
    }
}

/// What the caller's effect function says about a dispatched effect: its outcome and the
/// target's receipt, or `None` when the outcome is not known (yet).
pub type Observed = Option<(Opaque, Opaque)>;

/// An agent driven by [`Agent`], talking to `mwp serve` over HTTP, committing to a
/// [`Journal`]. See the module doc.
#[derive(Debug)]
pub struct HttpAgent {
    agent: Agent,
    client: Client,
    journal: Journal,
    duplicates: Vec<Receipt>,
    lose_answers: usize,
    lost: Vec<Receipt>,
}

impl HttpAgent {
    /// Opens the agent whose journal is at `path` (a fresh one if the file is missing or
    /// empty) against the server at `base`. It goes online at the first [`HttpAgent::pump`],
    /// so what the application does first (say [`Agent::replace_session`] after a crash)
    /// comes before anything the restored agent would send.
    pub fn open(
        config: Config,
        key: SecretKey,
        base: &str,
        path: impl AsRef<Path>,
    ) -> Result<HttpAgent> {
        let (journal, image) = Journal::open(path)?;
        let agent = Agent::restore(config, key, &image)?;
        Ok(HttpAgent {
            agent,
            client: Client::new(base),
            journal,
            duplicates: Vec::new(),
            lose_answers: 0,
            lost: Vec::new(),
        })
    }

    /// The driver, to read its replica, leases and journal.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// The driver, for application commands (`submit`, `checkpoint`, …) and settings.
    pub fn agent_mut(&mut self) -> &mut Agent {
        &mut self.agent
    }

    /// Receipts of the commands answered as a Duplicate (sent again after a lost answer),
    /// oldest first.
    pub fn duplicates(&self) -> &[Receipt] {
        &self.duplicates
    }

    /// Drops the answers to the next `n` commands after the server has acted on them, as a
    /// network that loses answers would; the driver sends them again after `resend_ms`.
    pub fn lose_answers(&mut self, n: usize) {
        self.lose_answers += n;
    }

    /// Receipts of answers dropped by [`HttpAgent::lose_answers`], oldest first.
    pub fn lost(&self) -> &[Receipt] {
        &self.lost
    }

    /// Commits every write set the driver has staged, and nothing else: what comes first in
    /// every turn of [`HttpAgent::pump`] (and all a host gets done if it crashes right after).
    pub fn commit(&mut self, now_ms: u64) -> Result<()> {
        while let Some(ws) = self.agent.poll_write_set() {
            self.journal.append(&ws)?;
            self.agent.handle_committed(now_ms, ws.serial);
        }
        Ok(())
    }

    /// Feeds the clock to the driver, then drains its outputs: commits every write set,
    /// carries out every transmit (feeding the answers back), hands every dispatch to
    /// `effect` and reports what it observed. Returns the notices for the application.
    /// A journal that cannot be written is an error: the agent must stop (a crash).
    pub fn pump(
        &mut self,
        now_ms: u64,
        effect: &mut dyn FnMut(&Dispatch) -> Observed,
    ) -> Result<Vec<Notice>> {
        if self.agent.online() {
            self.agent.handle_timeout(now_ms);
        } else {
            self.agent.handle_connectivity(now_ms, true);
        }
        let mut notices = Vec::new();
        loop {
            if self.agent.uncommitted() {
                self.commit(now_ms)?;
            } else if let Some(t) = self.agent.poll_transmit() {
                self.transmit(now_ms, t);
            } else if let Some(d) = self.agent.poll_dispatch() {
                if let Some((outcome, receipt)) = effect(&d) {
                    self.agent
                        .handle_effect_outcome(now_ms, &d.key, outcome, receipt);
                }
            } else if let Some(n) = self.agent.poll_notice() {
                notices.push(n);
            } else {
                return Ok(notices);
            }
        }
    }

    /// Delivers the events up to `seq` (as far as the server has them), so an answer is
    /// never ahead of the replica: the driver decides on an accepted command's consequences
    /// (a started lease, a renewed one) from events, and with a synchronous transport the
    /// answer would otherwise always come first.
    fn catch_up(&mut self, now_ms: u64, seq: u64) {
        let group = self.agent.config().group.clone();
        while self.agent.replica().cursor() < seq {
            match self
                .client
                .events(&group, self.agent.replica().cursor(), PAGE)
            {
                Ok(events) if !events.is_empty() => self.agent.handle_events(now_ms, events),
                _ => return,
            }
        }
    }

    /// Carries out one transmit. An unreachable server is no answer: the driver asks again
    /// after `resend_ms` / `sync_ms`.
    fn transmit(&mut self, now_ms: u64, t: Transmit) {
        let group = self.agent.config().group.clone();
        match t {
            Transmit::Command(cmd) => {
                let answer = self.client.submit(&cmd);
                if answer.as_ref().is_err_and(|e| e.code == Code::Storage) {
                    return;
                }
                if self.lose_answers > 0 {
                    if let Ok(s) = &answer {
                        self.lose_answers -= 1;
                        self.lost.push(s.receipt.clone());
                        return;
                    }
                }
                match &answer {
                    Ok(s) if s.duplicate => self.duplicates.push(s.receipt.clone()),
                    _ => {}
                }
                if let Ok(s) = &answer {
                    self.catch_up(now_ms, s.receipt.seq);
                }
                self.agent
                    .handle_answer(now_ms, &cmd.action, answer.map(|s| s.receipt));
            }
            Transmit::FetchEvents { after } => match self.client.events(&group, after, PAGE) {
                Ok(events) => self.agent.handle_events(now_ms, events),
                Err(e) if e.code == Code::Storage => {}
                Err(e) => self.agent.handle_fetch_error(now_ms, &e),
            },
            Transmit::LookupReceipt { action } => {
                let actor = self.agent.config().actor.clone();
                match self.client.receipt(&group, &actor, &action) {
                    Ok(r) => self.agent.handle_lookup(now_ms, &action, Some(r)),
                    Err(e) if e.code == Code::NotFound => {
                        self.agent.handle_lookup(now_ms, &action, None)
                    }
                    Err(_) => {}
                }
            }
            Transmit::FetchSnapshot(r) => {
                if let Ok(bytes) = self.client.fetch(&r.location, "application/cbor") {
                    self.agent.handle_snapshot(now_ms, &bytes);
                }
            }
            // The server keeps no per-agent acknowledgements.
            Transmit::Ack { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mwp_core::agent::{AgentMeta, OutboxChange, OutboxEntry};
    use mwp_core::command::{Body, ReplaceSession};
    use mwp_core::{Command, Id};

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

    #[test]
    fn a_reopened_journal_has_every_committed_write_set_and_drops_a_torn_tail() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("ada.journal");
        let key = crate::memory_service::random_key().expect("a key");
        let (mut journal, image) = Journal::open(&path).expect("a new journal");
        assert_eq!(image, AgentImage::default());
        let mut expected = AgentImage::default();
        for (serial, action) in [(1, "a-1"), (2, "a-2")] {
            let ws = write_set(serial, action, &key);
            journal.append(&ws).expect("an append");
            expected.commit(&ws).expect("consecutive serials");
        }
        // A crash mid-append: half a record.
        drop(journal);
        let torn = canonical::to_vec(&write_set(3, "a-3", &key)).expect("encodes");
        let mut f = OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("the journal");
        f.write_all(&(torn.len() as u64).to_le_bytes())
            .and_then(|()| f.write_all(&crc32c::crc32c(&torn).to_le_bytes()))
            .and_then(|()| f.write_all(&torn[..torn.len() / 2]))
            .expect("a torn write");
        drop(f);
        let (mut journal, image) = Journal::open(&path).expect("reopens");
        assert_eq!(image, expected);
        assert_eq!(image.serial, 2);
        assert_eq!(image.outbox.len(), 2);
        // The next append follows the last committed one.
        journal
            .append(&write_set(3, "a-3", &key))
            .expect("an append");
        let (_, image) = Journal::open(&path).expect("reopens");
        assert_eq!(image.serial, 3);

        // A full-length last record whose bytes did not all reach the disk: torn, trimmed.
        let len = std::fs::metadata(&path).expect("metadata").len();
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&path, &bytes).expect("write");
        let (_, image) = Journal::open(&path).expect("reopens");
        assert_eq!(image.serial, 2);
        assert!(std::fs::metadata(&path).expect("metadata").len() < len);

        // Damage before the last record is refused, naming the offset; nothing is cut.
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[RECORD_HEAD + 2] ^= 0x01;
        std::fs::write(&path, &bytes).expect("write");
        let err = Journal::open(&path).expect_err("damage mid-file");
        assert_eq!(err.code, Code::LogCorrupt);
        assert_eq!(err.details.get("offset"), Some(&serde_json::json!(0)));
        assert_eq!(std::fs::read(&path).expect("read"), bytes);
    }
}
