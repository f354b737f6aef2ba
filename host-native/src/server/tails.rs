//! Live tails: who waits for which group's commits, and how many may wait.
//!
//! Each group with a live tail has its own commit signal, so a commit wakes only the tails of
//! its own group: 1,000 idle tails on other groups cost a commit nothing. The number of live
//! tails is capped per server and per group; a tail over a cap is refused before it starts
//! (429, docs/http.md "Limits").

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use mwp_core::{Code, Error, Id};
use tokio::sync::watch;

/// The live tails of a server.
#[derive(Debug)]
pub(crate) struct Tails {
    max_total: usize,
    max_per_group: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    total: usize,
    groups: HashMap<Id, Waiting>,
}

#[derive(Debug)]
struct Waiting {
    live: usize,
    commits: watch::Sender<u64>,
}

/// One admitted tail: its group's commit signal, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    tails: Arc<Tails>,
    group: Id,
    /// Changes after every commit to the group.
    pub(crate) commits: watch::Receiver<u64>,
}

impl Tails {
    /// No tails yet; at most `max_total` at once, `max_per_group` on one group.
    pub(crate) fn new(max_total: usize, max_per_group: usize) -> Arc<Tails> {
        Arc::new(Tails {
            max_total,
            max_per_group,
            inner: Mutex::new(Inner::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a tail on `group`, or says which cap it would break.
    pub(crate) fn admit(self: &Arc<Self>, group: &Id) -> Result<Slot, Error> {
        let mut inner = self.lock();
        let live = inner.groups.get(group).map_or(0, |w| w.live);
        let refuse = |scope: &str, limit: usize, what: String| {
            Error::new(
                Code::NotYet,
                format!("{what}; close one or retry later (docs/http.md, Limits)"),
            )
            .with("scope", scope)
            .with("limit", limit)
        };
        if inner.total >= self.max_total {
            return Err(refuse(
                "server",
                self.max_total,
                format!(
                    "this server already serves {} live tails, its limit",
                    self.max_total
                ),
            ));
        }
        if live >= self.max_per_group {
            return Err(refuse(
                "group",
                self.max_per_group,
                format!(
                    "group {group} already has {} live tails, the limit per group",
                    self.max_per_group
                ),
            ));
        }
        inner.total += 1;
        let waiting = inner
            .groups
            .entry(group.clone())
            .or_insert_with(|| Waiting {
                live: 0,
                commits: watch::Sender::new(0),
            });
        waiting.live += 1;
        let commits = waiting.commits.subscribe();
        Ok(Slot {
            tails: Arc::clone(self),
            group: group.clone(),
            commits,
        })
    }

    /// Wakes the tails of `group` (and no other): a command was accepted there.
    pub(crate) fn committed(&self, group: &Id) {
        if let Some(w) = self.lock().groups.get(group) {
            w.commits.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Live tails on the whole server.
    pub(crate) fn live(&self) -> usize {
        self.lock().total
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut inner = self.tails.lock();
        inner.total = inner.total.saturating_sub(1);
        if let Some(w) = inner.groups.get_mut(&self.group) {
            w.live = w.live.saturating_sub(1);
            if w.live == 0 {
                inner.groups.remove(&self.group);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Id {
        Id::new(s).unwrap()
    }

    #[test]
    fn caps_and_per_group_wakeups() {
        let tails = Tails::new(3, 2);
        let mut a1 = tails.admit(&id("a")).unwrap();
        let _a2 = tails.admit(&id("a")).unwrap();
        let e = tails.admit(&id("a")).unwrap_err();
        assert_eq!(e.details["scope"], "group");
        let mut b1 = tails.admit(&id("b")).unwrap();
        let e = tails.admit(&id("c")).unwrap_err();
        assert_eq!(e.details["scope"], "server");
        a1.commits.borrow_and_update();
        b1.commits.borrow_and_update();
        tails.committed(&id("b"));
        assert!(!a1.commits.has_changed().unwrap());
        assert!(b1.commits.has_changed().unwrap());
        drop(b1);
        assert_eq!(tails.live(), 2);
        let _c = tails.admit(&id("c")).unwrap();
    }
}
