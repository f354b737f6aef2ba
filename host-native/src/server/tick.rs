//! The tick loop: when the service's next lease deadline passes, ask the service to submit a
//! `tick` signed by the authority key (actor `@authority`, session 1, action
//! `tick.<seq it will have>`), which expires the leases that are due.
//!
//! A group whose tick fails is backed off (250 ms after the first failure, doubling up to
//! 30 s) and the loop goes on with the other groups' deadlines meanwhile, so one failing
//! group does not stall lease expiry everywhere. A successful tick clears the backoff.

use std::collections::BTreeMap;
use std::time::Duration;

use mwp_core::{Code, Decision, Error, EventKind, Id};

use super::{now_ms, App};

/// Pause after a tick that found nothing due (a renewal raced the deadline).
const RETRY_AFTER: Duration = Duration::from_millis(250);
/// Backoff after a group's first failed tick; it doubles with each further failure.
const BACKOFF_FIRST: Duration = Duration::from_millis(250);
/// The longest backoff.
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Groups whose last tick failed: failures in a row, and when to try again (ms).
#[derive(Debug, Default)]
struct Backoff {
    groups: BTreeMap<Id, (u32, u64)>,
}

impl Backoff {
    fn failed(&mut self, group: &Id, now: u64) -> Duration {
        let entry = self.groups.entry(group.clone()).or_insert((0, now));
        let wait = BACKOFF_FIRST
            .saturating_mul(1u32 << entry.0.min(16))
            .min(BACKOFF_MAX);
        entry.0 = entry.0.saturating_add(1);
        entry.1 = now.saturating_add(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX));
        wait
    }

    fn succeeded(&mut self, group: &Id) {
        self.groups.remove(group);
    }

    /// Groups not to tick before their time: what the deadline query skips.
    fn waiting(&self, now: u64) -> Vec<Id> {
        self.groups
            .iter()
            .filter(|(_, (_, until))| *until > now)
            .map(|(g, _)| g.clone())
            .collect()
    }

    /// The earliest time a backed-off group may be tried again.
    fn next_retry(&self, now: u64) -> Option<u64> {
        self.groups
            .values()
            .map(|(_, until)| *until)
            .filter(|u| *u > now)
            .min()
    }
}

pub(crate) async fn run(app: App) {
    let mut closing = app.closing.clone();
    let mut backoff = Backoff::default();
    loop {
        if *closing.borrow() {
            return;
        }
        let service = app.service.clone();
        let now = now_ms();
        let skip = backoff.waiting(now);
        let next = tokio::task::spawn_blocking(move || service.next_deadline_except(&skip))
            .await
            .unwrap_or_else(|e| Err(Error::new(Code::Storage, e.to_string())));
        app.metrics.store_result(&next);
        let now = now_ms();
        let wait = match next {
            Ok(Some((group, at))) if at <= now => {
                let service = app.service.clone();
                let g = group.clone();
                app.metrics
                    .tick_lag(Duration::from_millis(now.saturating_sub(at)));
                let ticked = tokio::task::spawn_blocking(move || service.tick(&g, now))
                    .await
                    .unwrap_or_else(|e| Err(Error::new(Code::Storage, e.to_string())));
                app.metrics.store_result(&ticked);
                app.ready.wrote(&ticked);
                match ticked {
                    Ok(Some(Decision::Accepted(event))) => {
                        backoff.succeeded(&group);
                        app.tails.committed(&event.group);
                        if let EventKind::LeasesExpired(e) = &event.kind {
                            tracing::info!(%group, seq = event.seq, expired = e.expired.len(), "leases expired");
                        }
                        continue;
                    }
                    // Nothing was due after all (a renewal raced the deadline): look again.
                    Ok(_) => {
                        backoff.succeeded(&group);
                        RETRY_AFTER.min(app.config.tick_poll)
                    }
                    Err(e) => {
                        let wait = backoff.failed(&group, now);
                        tracing::warn!(%group, code = %e.code, message = %e.message, retry_in_ms = wait.as_millis() as u64, "tick failed; the group is backed off");
                        // Go straight on with the other groups.
                        continue;
                    }
                }
            }
            Ok(Some((_, at))) => {
                Duration::from_millis(at.saturating_sub(now)).min(app.config.tick_poll)
            }
            Ok(None) => app.config.tick_poll,
            Err(e) => {
                tracing::warn!(code = %e.code, message = %e.message, "next deadline unknown");
                app.config.tick_poll
            }
        };
        let wait = match backoff.next_retry(now) {
            Some(at) => wait.min(Duration::from_millis(at.saturating_sub(now).max(1))),
            None => wait,
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = app.tick.notified() => {}
            _ = closing.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_clears() {
        let mut b = Backoff::default();
        let g = Id::new("g").unwrap();
        assert_eq!(b.failed(&g, 1000), Duration::from_millis(250));
        assert_eq!(b.failed(&g, 1000), Duration::from_millis(500));
        assert_eq!(b.waiting(1000), vec![g.clone()]);
        assert_eq!(b.next_retry(1000), Some(1500));
        for _ in 0..40 {
            b.failed(&g, 1000);
        }
        assert_eq!(b.failed(&g, 1000), BACKOFF_MAX);
        assert!(b.waiting(1000 + 30_001).is_empty());
        b.succeeded(&g);
        assert_eq!(b.next_retry(0), None);
    }
}
