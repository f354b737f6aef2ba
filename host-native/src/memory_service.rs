//! An [`AuthorityService`] kept in memory: [`MemoryAuthority`] behind a mutex, with the
//! authority's secret key, an optional online window and signed snapshots.
//!
//! It is what `mwp serve --store memory:` and `mwp transcript` run on. Nothing survives the
//! process; "durable" here means "applied before the receipt is returned".

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use mwp_core::command::Tick;
use mwp_core::memory::MemoryAuthority;
use mwp_core::snapshot::{Snapshot, SnapshotRef};
use mwp_core::{
    Body, Code, Command, Decision, Error, Event, EventKind, GroupState, Hash, Id, Limits,
    PublicKey, Receipt, Result, SecretKey,
};

use crate::service::AuthorityService;

/// A fresh random authority key (32 bytes from the operating system).
pub fn random_key() -> Result<SecretKey> {
    let mut seed = [0u8; 32];
    getrandom::getrandom(&mut seed).map_err(|e| {
        Error::new(
            Code::Storage,
            format!("the operating system gave no random bytes for a key: {e}"),
        )
    })?;
    Ok(SecretKey::from_bytes(&seed))
}

/// A snapshot kept for a group: its reference data and its canonical CBOR.
#[derive(Debug, Clone)]
struct StoredSnapshot {
    seq: u64,
    state_hash: Hash,
    bytes: Vec<u8>,
}

#[derive(Debug, Default)]
struct Inner {
    authority: MemoryAuthority,
    groups: BTreeSet<Id>,
    snapshots: BTreeMap<Id, StoredSnapshot>,
}

/// The in-memory authority service.
#[derive(Debug)]
pub struct MemoryService {
    inner: Mutex<Inner>,
    key: SecretKey,
    online_events: Option<u64>,
}

impl MemoryService {
    /// A service signing with `key`, serving every event online.
    pub fn new(key: SecretKey) -> Self {
        MemoryService::with_limits(key, Limits::default())
    }

    /// A service with the given limits.
    pub fn with_limits(key: SecretKey, limits: Limits) -> Self {
        MemoryService {
            inner: Mutex::new(Inner {
                authority: MemoryAuthority::with_limits(limits),
                ..Inner::default()
            }),
            key,
            online_events: None,
        }
    }

    /// A service with a freshly generated authority key.
    pub fn generate() -> Result<Self> {
        Ok(MemoryService::new(random_key()?))
    }

    /// The service transcripts run on: its key is the transcript key of `@authority`
    /// (SPEC §12), the key a transcript's `open_group` names when it names none.
    pub fn for_transcripts() -> Self {
        MemoryService::new(SecretKey::for_transcript(mwp_core::id::AUTHORITY_ACTOR))
    }

    /// Serves only the latest `n` events of each group; older cursors get `CURSOR_TOO_OLD`
    /// with a reference to a signed snapshot. `None` serves everything.
    pub fn with_online_events(mut self, n: Option<u64>) -> Self {
        self.online_events = n;
        self
    }

    fn lock(&self) -> Result<MutexGuard<'_, Inner>> {
        self.inner.lock().map_err(|_| {
            Error::new(
                Code::Storage,
                "the in-memory authority was left inconsistent by a panic; restart the server",
            )
        })
    }

    /// Drops every group's state and rebuilds it from its log (the memory host's restart).
    pub fn restart(&self) -> Result<()> {
        let mut inner = self.lock()?;
        inner.snapshots.clear();
        inner.authority.restart()
    }

    /// A copy of a group's state.
    pub fn state(&self, group: &Id) -> Result<Option<GroupState>> {
        Ok(self
            .lock()?
            .authority
            .group(group)
            .and_then(|g| g.state())
            .cloned())
    }

    /// The snapshot of `group` at its head, built and signed if the kept one is older.
    fn snapshot_at_head(&self, inner: &mut Inner, group: &Id) -> Result<StoredSnapshot> {
        let state = inner
            .authority
            .group(group)
            .and_then(|g| g.state())
            .ok_or_else(|| not_found(group))?;
        if let Some(s) = inner.snapshots.get(group).filter(|s| s.seq == state.seq) {
            return Ok(s.clone());
        }
        let snap = Snapshot::build(state, &self.key)?;
        let stored = StoredSnapshot {
            seq: snap.seq,
            state_hash: snap.state_hash,
            bytes: snap.to_cbor()?,
        };
        inner.snapshots.insert(group.clone(), stored.clone());
        Ok(stored)
    }
}

fn not_found(group: &Id) -> Error {
    Error::new(
        Code::NotFound,
        format!("group {group} does not exist here; open it with an open_group command first"),
    )
}

impl AuthorityService for MemoryService {
    fn submit(&self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        let mut inner = self.lock()?;
        let decision = inner.authority.submit(cmd, now_ms)?;
        if let Decision::Accepted(event) = &decision {
            if matches!(event.kind, EventKind::GroupOpened(_)) {
                inner.groups.insert(event.group.clone());
            }
            if matches!(event.kind, EventKind::GroupArchived(_)) {
                // The signed final snapshot (SPEC §5, archive).
                self.snapshot_at_head(&mut inner, &event.group)?;
            }
        }
        Ok(decision)
    }

    fn events(&self, group: &Id, after: u64, limit: usize) -> Result<Vec<Event>> {
        let mut inner = self.lock()?;
        let head = inner
            .authority
            .group(group)
            .and_then(|g| g.state())
            .map(|s| s.seq)
            .ok_or_else(|| not_found(group))?;
        if let Some(window) = self.online_events {
            let oldest = head.saturating_sub(window);
            if after < oldest {
                let snap = self.snapshot_at_head(&mut inner, group)?;
                let reference = SnapshotRef {
                    seq: snap.seq,
                    hash: snap.state_hash,
                    location: format!("memory:{group}/snapshots/latest"),
                };
                return Err(reference.cursor_too_old(after, oldest));
            }
        }
        inner.authority.events(group, after, limit)
    }

    fn receipt(&self, group: &Id, actor: &Id, action: &Id) -> Result<Option<Receipt>> {
        let inner = self.lock()?;
        let state = inner
            .authority
            .group(group)
            .and_then(|g| g.state())
            .ok_or_else(|| not_found(group))?;
        Ok(state.receipt(actor.as_str(), action.as_str()))
    }

    fn member(&self, group: &Id, actor: &Id) -> Result<Option<mwp_core::state::Member>> {
        let inner = self.lock()?;
        Ok(inner
            .authority
            .group(group)
            .and_then(|g| g.state())
            .and_then(|s| s.members.get(actor).cloned()))
    }

    fn latest_snapshot(&self, group: &Id) -> Result<Vec<u8>> {
        let mut inner = self.lock()?;
        Ok(self.snapshot_at_head(&mut inner, group)?.bytes)
    }

    fn groups(&self) -> Result<Vec<Id>> {
        Ok(self.lock()?.groups.iter().cloned().collect())
    }

    fn head_seq(&self, group: &Id) -> Result<u64> {
        let inner = self.lock()?;
        Ok(inner
            .authority
            .group(group)
            .and_then(|g| g.state())
            .map_or(0, |s| s.seq))
    }

    fn next_deadline(&self) -> Result<Option<(Id, u64)>> {
        self.next_deadline_except(&[])
    }

    fn next_deadline_except(&self, skip: &[Id]) -> Result<Option<(Id, u64)>> {
        let inner = self.lock()?;
        Ok(inner
            .groups
            .iter()
            .filter(|g| !skip.contains(g))
            .filter_map(|g| {
                let state = inner.authority.group(g)?.state()?;
                if state.archived {
                    return None;
                }
                Some((g.clone(), state.next_deadline()?))
            })
            .min_by_key(|(_, at)| *at))
    }

    fn authority_key(&self) -> PublicKey {
        self.key.public()
    }

    fn tick(&self, group: &Id, now_ms: u64) -> Result<Option<Decision>> {
        let mut inner = self.lock()?;
        let Some(state) = inner.authority.group(group).and_then(|g| g.state()) else {
            return Err(not_found(group));
        };
        if state.archived {
            return Ok(None);
        }
        let action = Id::new(format!("tick-{}-{now_ms}", state.seq))
            .map_err(|e| Error::malformed(format!("tick action: {e}")))?;
        let cmd = Command::signed(
            state.org.clone(),
            group.clone(),
            Id::authority(),
            action,
            1,
            None,
            Body::Tick(Tick {}),
            &self.key,
        )?;
        match inner.authority.submit(&cmd, now_ms) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.code == Code::NotYet => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mwp_core::command::{Body, MemberSpec, OpenGroup, Role};
    use mwp_core::replica::Replica;
    use serde_json::json;

    fn id(s: &str) -> Id {
        Id::new(s).expect("valid id")
    }

    fn open(service: &MemoryService) -> Command {
        let alice = SecretKey::for_transcript("alice");
        let body = Body::OpenGroup(OpenGroup {
            mission: id("m"),
            title: json!("t"),
            members: vec![MemberSpec {
                actor: id("alice"),
                role: Role::Owner,
                key: alice.public(),
            }],
            authority_key: service.authority_key(),
        });
        Command::signed(
            id("acme"),
            id("g"),
            id("alice"),
            id("open"),
            1,
            None,
            body,
            &alice,
        )
        .expect("signs")
    }

    fn replace_session(n: u64) -> Command {
        let alice = SecretKey::for_transcript("alice");
        let body = Body::ReplaceSession(mwp_core::command::ReplaceSession {});
        Command::signed(
            id("acme"),
            id("g"),
            id("alice"),
            id(&format!("s{n}")),
            n,
            None,
            body,
            &alice,
        )
        .expect("signs")
    }

    #[test]
    fn window_answers_cursor_too_old_with_a_snapshot_that_restores() {
        let service = MemoryService::generate()
            .expect("random key")
            .with_online_events(Some(2));
        service.submit(&open(&service), 1).expect("opens");
        for n in 2..=5 {
            service.submit(&replace_session(n), 2).expect("accepted");
        }
        assert_eq!(service.head_seq(&id("g")).expect("head"), 5);
        // Events after 3 are online; after 2 is not.
        assert_eq!(service.events(&id("g"), 3, 10).expect("online").len(), 2);
        let err = service.events(&id("g"), 2, 10).expect_err("too old");
        assert_eq!(err.code, Code::CursorTooOld);
        assert_eq!(err.details["snapshot"]["seq"], 5);
        let bytes = service.latest_snapshot(&id("g")).expect("snapshot");
        let snap = Snapshot::from_cbor(&bytes).expect("decodes");
        let mut replica = Replica::new(id("g"));
        replica
            .restore(&snap, &service.authority_key(), &id("acme"), 2)
            .expect("restores");
        assert_eq!(replica.cursor(), 5);
    }

    #[test]
    fn unknown_group_is_not_found_and_groups_are_listed() {
        let service = MemoryService::generate().expect("random key");
        let err = service.events(&id("nope"), 0, 10).expect_err("unknown");
        assert_eq!(err.code, Code::NotFound);
        service.submit(&open(&service), 1).expect("opens");
        assert_eq!(service.groups().expect("groups"), vec![id("g")]);
        let receipt = service
            .receipt(&id("g"), &id("alice"), &id("open"))
            .expect("ok");
        assert_eq!(receipt.map(|r| r.seq), Some(1));
    }

    #[test]
    fn restart_keeps_the_log_and_the_state() {
        let service = MemoryService::for_transcripts();
        service.submit(&open(&service), 1).expect("opens");
        let before = service
            .state(&id("g"))
            .expect("ok")
            .expect("open")
            .hash()
            .expect("hash");
        service.restart().expect("restarts");
        let after = service
            .state(&id("g"))
            .expect("ok")
            .expect("open")
            .hash()
            .expect("hash");
        assert_eq!(before, after);
    }

    #[test]
    fn tick_is_signed_by_the_authority_and_quiet_when_nothing_is_due() {
        let service = MemoryService::generate().expect("random key");
        assert_eq!(
            service.tick(&id("g"), 5).expect_err("unknown").code,
            Code::NotFound
        );
        service.submit(&open(&service), 1).expect("opens");
        assert_eq!(
            service.tick(&id("g"), 5).expect("ok"),
            None,
            "nothing is due"
        );
        assert_eq!(
            service.head_seq(&id("g")).expect("head"),
            1,
            "a quiet tick appends nothing"
        );
    }

    #[test]
    fn random_keys_differ() {
        let a = random_key().expect("key").public();
        let b = random_key().expect("key").public();
        assert_ne!(a, b);
    }
}
