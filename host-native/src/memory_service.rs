//! An [`AuthorityService`] kept in memory: the core's [`MemoryAuthority`] (which keeps each
//! group's log and latest signed snapshot, and whose driver decides ticks, the snapshot
//! cadence and the online window) behind a mutex.
//!
//! It is what `mwp serve --store memory:` and `mwp transcript` run on. Nothing survives the
//! process; "durable" here means "applied before the receipt is returned".

use std::sync::{Mutex, MutexGuard};

use mwp_core::authority::{Config, Policy};
use mwp_core::head::SignedHead;
use mwp_core::memory::{not_found, MemoryAuthority};
use mwp_core::{
    Code, Command, Decision, Error, Event, GroupState, Id, Limits, PublicKey, Receipt, Result,
    SecretKey,
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

/// The in-memory authority service: the core's [`MemoryAuthority`] behind a mutex.
#[derive(Debug)]
pub struct MemoryService {
    inner: Mutex<MemoryAuthority>,
    key: PublicKey,
}

impl MemoryService {
    /// A service signing with `key`, serving every event online.
    pub fn new(key: SecretKey) -> Self {
        MemoryService::with_policy(key, Policy::default())
    }

    /// A service with the given limits.
    pub fn with_limits(key: SecretKey, limits: Limits) -> Self {
        MemoryService::with_policy(
            key,
            Policy {
                limits,
                ..Policy::default()
            },
        )
    }

    /// A service deciding under `policy`.
    pub fn with_policy(key: SecretKey, policy: Policy) -> Self {
        let public = key.public();
        MemoryService {
            inner: Mutex::new(MemoryAuthority::with_config(Config::new(key, policy))),
            key: public,
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
    /// with a reference to a signed snapshot. `None` serves everything. Set before use: the
    /// groups held so far are dropped.
    pub fn with_online_events(self, n: Option<u64>) -> Self {
        let inner = self.inner.into_inner().unwrap_or_else(|p| p.into_inner());
        let config = inner.config();
        let policy = Policy {
            online_events: n,
            ..config.policy().clone()
        };
        MemoryService::with_policy(config.secret_key().clone(), policy)
    }

    fn lock(&self) -> Result<MutexGuard<'_, MemoryAuthority>> {
        self.inner.lock().map_err(|_| {
            Error::new(
                Code::Storage,
                "the in-memory authority was left inconsistent by a panic; restart the server",
            )
        })
    }

    /// Drops every group's state and rebuilds it from its log (the memory host's restart).
    pub fn restart(&self) -> Result<()> {
        self.lock()?.restart()
    }

    /// A copy of a group's state.
    pub fn state(&self, group: &Id) -> Result<Option<GroupState>> {
        Ok(self.lock()?.group(group).and_then(|g| g.state()).cloned())
    }
}

impl AuthorityService for MemoryService {
    fn submit(&self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        self.lock()?.submit(cmd, now_ms)
    }

    fn events(&self, group: &Id, after: u64, limit: usize) -> Result<Vec<Event>> {
        self.lock()?.events(group, after, limit)
    }

    fn receipt(&self, group: &Id, actor: &Id, action: &Id) -> Result<Option<Receipt>> {
        let inner = self.lock()?;
        let state = inner
            .group(group)
            .and_then(|g| g.state())
            .ok_or_else(|| not_found(group))?;
        Ok(state.receipt(actor.as_str(), action.as_str()))
    }

    fn member(&self, group: &Id, actor: &Id) -> Result<Option<mwp_core::state::Member>> {
        let inner = self.lock()?;
        Ok(inner
            .group(group)
            .and_then(|g| g.state())
            .and_then(|s| s.members.get(actor).cloned()))
    }

    fn latest_snapshot(&self, group: &Id) -> Result<Vec<u8>> {
        let mut inner = self.lock()?;
        let g = inner.group_mut(group)?;
        match g.latest_snapshot() {
            Some(s) => Ok(s.bytes.clone()),
            None => Ok(g.take_snapshot()?.bytes.clone()),
        }
    }

    fn groups(&self) -> Result<Vec<Id>> {
        Ok(self.lock()?.groups().map(|(g, _)| g.clone()).collect())
    }

    fn head_seq(&self, group: &Id) -> Result<u64> {
        Ok(self.lock()?.group(group).map_or(0, |g| g.driver().head()))
    }

    fn next_deadline(&self) -> Result<Option<(Id, u64)>> {
        self.next_deadline_except(&[])
    }

    fn next_deadline_except(&self, skip: &[Id]) -> Result<Option<(Id, u64)>> {
        Ok(self.lock()?.next_wake(skip))
    }

    fn authority_key(&self) -> PublicKey {
        self.key
    }

    fn tick(&self, group: &Id, now_ms: u64) -> Result<Option<Decision>> {
        let mut inner = self.lock()?;
        Ok(inner.group_mut(group)?.tick(now_ms)?.map(|(_, d)| d))
    }

    fn sign_head(&self, group: &Id, now_ms: u64) -> Result<SignedHead> {
        let inner = self.lock()?;
        let state = inner
            .group(group)
            .and_then(|g| g.state())
            .ok_or_else(|| not_found(group))?;
        SignedHead::sign(
            &state.org,
            group,
            state.seq,
            state.head,
            now_ms,
            inner.config().secret_key(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mwp_core::command::{Body, MemberSpec, OpenGroup, Role};
    use mwp_core::replica::Replica;
    use mwp_core::snapshot::Snapshot;
    use serde_json::json;

    fn id(s: &str) -> Id {
        Id::new(s).expect("valid id")
    }

    fn open(service: &MemoryService) -> Command {
        let alice = SecretKey::for_transcript("alice");
        let body = Body::OpenGroup(OpenGroup {
            mission: id("m"),
            title: json!("t").into(),
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
    fn sign_head_names_the_last_event_under_the_authority_key() {
        let service = MemoryService::generate().expect("random key");
        let err = service.sign_head(&id("g"), 5).expect_err("unknown");
        assert_eq!(err.code, Code::NotFound);
        service.submit(&open(&service), 1).expect("opens");
        service.submit(&replace_session(2), 2).expect("accepted");
        let head = service.sign_head(&id("g"), 7).expect("signs");
        let last = service.events(&id("g"), 1, 10).expect("events");
        assert_eq!((head.seq, head.id, head.at), (2, last[0].id, 7));
        assert_eq!(head.org, id("acme"));
        head.verify(&service.authority_key(), &id("g"))
            .expect("verifies under the authority key");
    }

    #[test]
    fn random_keys_differ() {
        let a = random_key().expect("key").public();
        let b = random_key().expect("key").public();
        assert_ne!(a, b);
    }
}
