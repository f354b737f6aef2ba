//! The tick loop: when the service's next lease deadline passes, ask the service to submit a
//! `tick` signed by the authority key (actor `@authority`, session 1, action
//! `tick-<seq>-<now>`), which expires the leases that are due.

use std::time::Duration;

use mwp_core::{Code, Decision, Error, EventKind};

use super::{now_ms, App};

/// Pause after a failed tick, so a persistent failure does not spin.
const RETRY_AFTER: Duration = Duration::from_millis(250);

pub(crate) async fn run(app: App) {
    let mut closing = app.closing.clone();
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
                let g = group.clone();
                let ticked = tokio::task::spawn_blocking(move || service.tick(&g, now))
                    .await
                    .unwrap_or_else(|e| Err(Error::new(Code::Storage, e.to_string())));
                match ticked {
                    Ok(Some(Decision::Accepted(event))) => {
                        app.commits.send_modify(|n| *n += 1);
                        if let EventKind::LeasesExpired(e) = &event.kind {
                            tracing::info!(%group, seq = event.seq, expired = e.expired.len(), "leases expired");
                        }
                        continue;
                    }
                    // Nothing was due after all (a renewal raced the deadline): look again.
                    Ok(_) => RETRY_AFTER.min(app.config.tick_poll),
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
