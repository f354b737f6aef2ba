//! Signed heads (SPEC §8a): the one place the server decides when to sign one.
//!
//! For each group it keeps the last head it signed and asks the core's
//! [`mwp_core::head::head_due`] whether a read gets a fresh head or that one: a head is
//! signed at most once per [`HEAD_INTERVAL_MS`] per group, and only when the log moved since.
//! Heads are signed on reads only (an events page, `GET …/head`, a live tail), never on the
//! accept path, so accepts with no readers cost nothing; readers cost at most ten signatures
//! a second per group, however many there are (docs/decisions.md).
//!
//! The service calls run on the caller's thread: call [`Heads::current`] from the blocking
//! pool, as every store call is.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use mwp_core::head::{head_due, SignedHead, HEAD_INTERVAL_MS};
use mwp_core::memory::not_found;
use mwp_core::{Id, Result};
use prometheus_client::metrics::counter::Counter;

use crate::service::AuthorityService;

/// One group's last signed head, behind the lock its decisions are made under.
type Slot = Arc<Mutex<Option<Arc<SignedHead>>>>;

/// The last head signed for each group, and the count of signatures.
#[derive(Debug)]
pub(crate) struct Heads {
    groups: Mutex<HashMap<Id, Slot>>,
    signed: Counter,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Heads {
    /// No head signed yet; each signature increments `signed` (`mwp_heads_signed_total`).
    pub(crate) fn new(signed: Counter) -> Heads {
        Heads {
            groups: Mutex::default(),
            signed,
        }
    }

    /// The head a read of `group` at `now_ms` gets: a fresh one signed by `service` when
    /// one is due, else the last one signed. It may be behind the log by the commits of the
    /// last [`HEAD_INTERVAL_MS`]. `NOT_FOUND` for a group with no event.
    ///
    /// One group's decision and signature are made under its own lock, so concurrent reads
    /// sign once between them; other groups are not held up.
    pub(crate) fn current(
        &self,
        service: &dyn AuthorityService,
        group: &Id,
        now_ms: u64,
    ) -> Result<Arc<SignedHead>> {
        let known = lock(&self.groups).get(group).cloned();
        let slot = match known {
            Some(slot) => slot,
            None => {
                // Only a group that exists gets a place (an unknown name costs nothing).
                if service.head_seq(group)? == 0 {
                    return Err(not_found(group));
                }
                Arc::clone(lock(&self.groups).entry(group.clone()).or_default())
            }
        };
        let mut last = lock(&slot);
        let seq = service.head_seq(group)?;
        let signed = last.as_ref().map(|h| (h.seq, h.at));
        match last.as_ref() {
            Some(head) if !head_due(signed, seq, now_ms) => Ok(Arc::clone(head)),
            _ if seq == 0 => Err(not_found(group)),
            _ => {
                let head = Arc::new(service.sign_head(group, now_ms)?);
                self.signed.inc();
                *last = Some(Arc::clone(&head));
                Ok(head)
            }
        }
    }

    /// When (ms) a fresh head of `group` may next be signed: [`HEAD_INTERVAL_MS`] after the
    /// last one; 0 when none was signed.
    pub(crate) fn next_due(&self, group: &Id) -> u64 {
        let slot = lock(&self.groups).get(group).cloned();
        slot.and_then(|s| {
            lock(&s)
                .as_ref()
                .map(|h| h.at.saturating_add(HEAD_INTERVAL_MS))
        })
        .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_service::MemoryService;
    use mwp_core::command::{Body, MemberSpec, OpenGroup, ReplaceSession, Role};
    use mwp_core::{Code, Command, SecretKey};
    use serde_json::json;

    fn id(s: &str) -> Id {
        Id::new(s).expect("valid id")
    }

    fn alice() -> SecretKey {
        SecretKey::for_transcript("alice")
    }

    fn open(service: &MemoryService, group: &str) {
        let body = Body::OpenGroup(OpenGroup {
            mission: id("m"),
            title: json!("t").into(),
            members: vec![MemberSpec {
                actor: id("alice"),
                role: Role::Owner,
                key: alice().public(),
            }],
            authority_key: service.authority_key(),
        });
        let cmd = Command::signed(
            id("acme"),
            id(group),
            id("alice"),
            id("open"),
            1,
            None,
            body,
            &alice(),
        )
        .expect("signs");
        service.submit(&cmd, 1).expect("opens");
    }

    fn commit(service: &MemoryService, group: &str, n: u64) {
        let body = Body::ReplaceSession(ReplaceSession {});
        let cmd = Command::signed(
            id("acme"),
            id(group),
            id("alice"),
            id(&format!("s{n}")),
            n,
            None,
            body,
            &alice(),
        )
        .expect("signs");
        service.submit(&cmd, 1).expect("accepted");
    }

    fn setup() -> (MemoryService, Heads, Counter) {
        let service = MemoryService::generate().expect("key");
        open(&service, "g");
        let counter = Counter::default();
        (service, Heads::new(counter.clone()), counter)
    }

    #[test]
    fn the_first_read_signs_and_a_quiet_log_is_never_signed_again() {
        let (service, heads, signed) = setup();
        let first = heads.current(&service, &id("g"), 1000).expect("signs");
        assert_eq!((first.seq, first.at), (1, 1000));
        first
            .verify(&service.authority_key(), &id("g"))
            .expect("verifies");
        // Long after, with nothing committed: the same head, no signature.
        let later = heads.current(&service, &id("g"), 60_000).expect("cached");
        assert_eq!(later, first);
        assert_eq!(signed.get(), 1);
    }

    #[test]
    fn at_most_one_signature_per_interval_and_only_when_the_log_moved() {
        let (service, heads, signed) = setup();
        heads.current(&service, &id("g"), 1000).expect("signs");
        commit(&service, "g", 2);
        // Within 100 ms of the last signature: the cached head, behind the log.
        for now in [1000, 1050, 1099] {
            let h = heads.current(&service, &id("g"), now).expect("cached");
            assert_eq!((h.seq, h.at), (1, 1000), "at {now}");
        }
        assert_eq!(heads.next_due(&id("g")), 1000 + HEAD_INTERVAL_MS);
        // Due at 1100: a fresh head covering the commit.
        let h = heads.current(&service, &id("g"), 1100).expect("signs");
        assert_eq!((h.seq, h.at), (2, 1100));
        assert_eq!(signed.get(), 2);
        // Hammered with every millisecond of a second while committing: at most 10 more.
        let mut n = 3;
        for now in 1101..2101 {
            if now % 7 == 0 {
                commit(&service, "g", n);
                n += 1;
            }
            heads.current(&service, &id("g"), now).expect("head");
        }
        assert!(signed.get() <= 2 + 10, "{} signatures", signed.get());
        assert!(signed.get() >= 2 + 9, "{} signatures", signed.get());
    }

    #[test]
    fn a_clock_that_goes_back_signs_nothing_new() {
        let (service, heads, signed) = setup();
        heads.current(&service, &id("g"), 5000).expect("signs");
        commit(&service, "g", 2);
        let h = heads.current(&service, &id("g"), 10).expect("cached");
        assert_eq!(h.seq, 1);
        assert_eq!(signed.get(), 1);
    }

    #[test]
    fn groups_are_signed_apart_and_an_unknown_group_is_not_found() {
        let (service, heads, signed) = setup();
        open(&service, "h");
        let g = heads.current(&service, &id("g"), 1000).expect("g");
        let h = heads.current(&service, &id("h"), 1000).expect("h");
        assert_eq!((g.group.as_str(), h.group.as_str()), ("g", "h"));
        assert_eq!(signed.get(), 2);
        let err = heads
            .current(&service, &id("nope"), 1000)
            .expect_err("unknown");
        assert_eq!(err.code, Code::NotFound);
        assert_eq!(heads.next_due(&id("nope")), 0);
        assert_eq!(
            lock(&heads.groups).len(),
            2,
            "an unknown group takes no place"
        );
    }

    /// A service that cannot sign: its error is the read's, and nothing is cached.
    #[test]
    fn a_service_that_cannot_sign_answers_its_error() {
        struct NoSign(MemoryService);
        impl AuthorityService for NoSign {
            fn submit(&self, cmd: &Command, now_ms: u64) -> Result<mwp_core::Decision> {
                self.0.submit(cmd, now_ms)
            }
            fn events(&self, group: &Id, after: u64, limit: usize) -> Result<Vec<mwp_core::Event>> {
                self.0.events(group, after, limit)
            }
            fn receipt(
                &self,
                group: &Id,
                actor: &Id,
                action: &Id,
            ) -> Result<Option<mwp_core::Receipt>> {
                self.0.receipt(group, actor, action)
            }
            fn latest_snapshot(&self, group: &Id) -> Result<Vec<u8>> {
                self.0.latest_snapshot(group)
            }
            fn groups(&self) -> Result<Vec<Id>> {
                self.0.groups()
            }
            fn head_seq(&self, group: &Id) -> Result<u64> {
                self.0.head_seq(group)
            }
            fn next_deadline(&self) -> Result<Option<(Id, u64)>> {
                self.0.next_deadline()
            }
            fn authority_key(&self) -> mwp_core::PublicKey {
                self.0.authority_key()
            }
        }
        let (service, heads, signed) = setup();
        let service = NoSign(service);
        let err = heads
            .current(&service, &id("g"), 1000)
            .expect_err("cannot sign");
        assert_eq!(err.code, Code::NotPermitted);
        assert_eq!(signed.get(), 0);
        assert_eq!(heads.next_due(&id("g")), 0);
    }
}
