//! The tick loop: when the service's next lease deadline passes, submit a `tick` signed by
//! the authority key (actor `@authority`, session 1, action `tick-<seq>-<now>`).

use std::collections::BTreeMap;
use std::time::Duration;

use mwp_core::command::Tick;
use mwp_core::{Body, Code, Command, Decision, Error, EventKind, Id, Result, Signature};

use super::{now_ms, App};
use crate::service::AuthorityService;

/// Pause after a failed tick, so a persistent failure does not spin.
const RETRY_AFTER: Duration = Duration::from_millis(250);

pub(crate) async fn run(app: App) {
    let mut closing = app.closing.clone();
    let mut orgs: BTreeMap<Id, Id> = BTreeMap::new();
    loop {
        if *closing.borrow() {
            return;
        }
        let service = app.service.clone();
        let next = tokio::task::spawn_blocking(move || service.next_deadline())
            .await
            .unwrap_or_else(|e| Err(Error::new(Code::Storage, e.to_string())));
        let now = now_ms();
        let wait = match next {
            Ok(Some((group, at))) if at <= now => {
                let service = app.service.clone();
                let known = orgs.get(&group).cloned();
                let g = group.clone();
                let ticked =
                    tokio::task::spawn_blocking(move || tick(service.as_ref(), &g, known, now))
                        .await
                        .unwrap_or_else(|e| Err(Error::new(Code::Storage, e.to_string())));
                match ticked {
                    Ok((org, expired)) => {
                        orgs.insert(group.clone(), org);
                        if expired > 0 {
                            app.commits.send_modify(|n| *n += 1);
                            tracing::info!(%group, expired, "leases expired");
                        }
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(%group, code = %e.code, message = %e.message, "tick failed");
                        RETRY_AFTER
                    }
                }
            }
            Ok(Some((_, at))) => Duration::from_millis(at - now).min(app.config.tick_poll),
            Ok(None) => app.config.tick_poll,
            Err(e) => {
                tracing::warn!(code = %e.code, message = %e.message, "next deadline unknown");
                app.config.tick_poll
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = app.tick.notified() => {}
            _ = closing.changed() => return,
        }
    }
}

/// The org a group belongs to: from its genesis event, or its latest snapshot when the
/// genesis event is no longer served.
fn org_of(service: &dyn AuthorityService, group: &Id) -> Result<Id> {
    match service.events(group, 0, 1) {
        Ok(events) => match events.first().map(|e| &e.kind) {
            Some(EventKind::GroupOpened(g)) => return Ok(g.org.clone()),
            _ => {
                return Err(Error::corrupt(format!(
                    "the first event of {group} is not group_opened"
                )))
            }
        },
        Err(e) if e.code == Code::CursorTooOld => {}
        Err(e) => return Err(e),
    }
    let snap = mwp_core::snapshot::Snapshot::from_cbor(&service.latest_snapshot(group)?)?;
    Ok(snap.org)
}

/// Submits one tick for `group`; returns the group's org and how many leases expired.
fn tick(
    service: &dyn AuthorityService,
    group: &Id,
    org: Option<Id>,
    now: u64,
) -> Result<(Id, usize)> {
    let org = match org {
        Some(o) => o,
        None => org_of(service, group)?,
    };
    let seq = service.head_seq(group)?;
    let action =
        Id::new(format!("tick-{seq}-{now}")).map_err(|e| Error::malformed(e.to_string()))?;
    let mut cmd = Command {
        org: org.clone(),
        group: group.clone(),
        actor: Id::authority(),
        action,
        session: 1,
        expect: None,
        body: Body::Tick(Tick {}),
        sig: Signature([0; 64]),
    };
    service.sign_as_authority(&mut cmd)?;
    let expired = match service.submit(&cmd, now)? {
        Decision::Accepted(event) => match &event.kind {
            EventKind::LeasesExpired(e) => e.expired.len(),
            _ => 0,
        },
        Decision::Duplicate(_) => 0,
    };
    Ok((org, expired))
}
