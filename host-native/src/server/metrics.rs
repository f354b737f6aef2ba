//! `GET /metrics`: the server's numbers as Prometheus (OpenMetrics) text.
//!
//! Each server has its own registry, so two servers in one process count apart. The names
//! and their meaning are in docs/http.md, "Operations":
//!
//! * `mwp_commands_total{outcome, code}`: commands answered on `POST …/commands`, by outcome
//!   (`accepted`, `duplicate`, `rejected`: a rule or a check said no, `failed`: the store
//!   failed) and code (`OK` for accepted and duplicate, else the error code);
//! * `mwp_accept_seconds`: time from a command's arrival to its accepted answer (durable);
//! * `mwp_fsync_seconds`: time of each `fdatasync`/directory `fsync` of the file store in
//!   this process ([`crate::store::fsync_seconds`]);
//! * `mwp_groups`: groups the store holds, read at scrape time;
//! * `mwp_live_tails`: live tails open, read at scrape time;
//! * `mwp_tick_lag_seconds`: how late the tick loop's last tick ran after the lease deadline
//!   it served;
//! * `mwp_store_errors_total`: store calls that failed (`STORAGE` or `LOG_CORRUPT`);
//! * `mwp_heads_signed_total`: signed heads the server signed (SPEC §8a; at most ten a
//!   second per group, on reads only).

use std::time::Duration;

use mwp_core::{Code, Error};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// The media type of the answer.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels of `mwp_commands_total`.
type CommandLabels = [(&'static str, &'static str); 2];

/// How a command was answered, for `mwp_commands_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Accepted: a new event.
    Accepted,
    /// Answered with the original receipt.
    Duplicate,
    /// Refused by a rule or a check (decoding, signature, access, limits).
    Rejected,
    /// The store failed.
    Failed,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Duplicate => "duplicate",
            Outcome::Rejected => "rejected",
            Outcome::Failed => "failed",
        }
    }
}

/// Whether `err` is the store failing rather than a request being refused.
pub(crate) fn is_store_error(err: &Error) -> bool {
    matches!(err.code, Code::Storage | Code::LogCorrupt)
}

/// The numbers of one server.
pub(crate) struct Metrics {
    registry: Registry,
    commands: Family<CommandLabels, Counter>,
    accept: Histogram,
    groups: Gauge,
    live_tails: Gauge,
    tick_lag: Gauge<f64, std::sync::atomic::AtomicU64>,
    store_errors: Counter,
    heads_signed: Counter,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A registry with every metric at zero.
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::default();
        let commands = Family::<CommandLabels, Counter>::default();
        registry.register(
            "mwp_commands",
            "Commands answered, by outcome and code",
            commands.clone(),
        );
        // 100 µs … ~13 s.
        let accept = Histogram::new(exponential_buckets(0.0001, 2.0, 18));
        registry.register(
            "mwp_accept_seconds",
            "Time from a command's arrival to its accepted, durable answer",
            accept.clone(),
        );
        registry.register(
            "mwp_fsync_seconds",
            "Time of each fsync of the file store in this process",
            crate::store::fsync_seconds(),
        );
        let groups = Gauge::default();
        registry.register("mwp_groups", "Groups the store holds", groups.clone());
        let live_tails = Gauge::default();
        registry.register(
            "mwp_live_tails",
            "Live tails (GET .../events/stream) open",
            live_tails.clone(),
        );
        let tick_lag = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            "mwp_tick_lag_seconds",
            "How late the last tick ran after the lease deadline it served",
            tick_lag.clone(),
        );
        let store_errors = Counter::default();
        registry.register(
            "mwp_store_errors",
            "Store calls that failed (STORAGE or LOG_CORRUPT)",
            store_errors.clone(),
        );
        let heads_signed = Counter::default();
        registry.register(
            "mwp_heads_signed",
            "Signed heads signed (on reads; at most one per 100 ms per group)",
            heads_signed.clone(),
        );
        Metrics {
            registry,
            heads_signed,
            commands,
            accept,
            groups,
            live_tails,
            tick_lag,
            store_errors,
        }
    }

    /// The counter of signed heads, for [`super::heads::Heads`].
    pub(crate) fn heads_signed(&self) -> Counter {
        self.heads_signed.clone()
    }

    /// Counts one answered command.
    pub(crate) fn command(&self, outcome: Outcome, code: Option<Code>) {
        let code = code.map_or("OK", Code::as_str);
        self.commands
            .get_or_create(&[("outcome", outcome.as_str()), ("code", code)])
            .inc();
    }

    /// Records the time an accepted command took.
    pub(crate) fn accepted_in(&self, took: Duration) {
        self.accept.observe(took.as_secs_f64());
    }

    /// Counts `err` when it is the store failing.
    pub(crate) fn store_result<T>(&self, result: &Result<T, Error>) {
        if let Err(e) = result {
            if is_store_error(e) {
                self.store_errors.inc();
            }
        }
    }

    /// Records how late a tick ran.
    pub(crate) fn tick_lag(&self, lag: Duration) {
        self.tick_lag.set(lag.as_secs_f64());
    }

    /// The text answer, with the gauges read at scrape time set first.
    pub(crate) fn render(&self, groups: Option<usize>, live_tails: usize) -> String {
        if let Some(n) = groups {
            self.groups.set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        self.live_tails
            .set(i64::try_from(live_tails).unwrap_or(i64::MAX));
        let mut out = String::new();
        if let Err(e) = encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "the metrics could not be encoded");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_outcome_and_code() {
        let m = Metrics::new();
        m.command(Outcome::Accepted, None);
        m.command(Outcome::Accepted, None);
        m.command(Outcome::Rejected, Some(Code::RevisionMismatch));
        m.store_result::<()>(&Err(Error::new(Code::Storage, "disk")));
        m.store_result::<()>(&Err(Error::malformed("not the store")));
        let text = m.render(Some(3), 1);
        assert!(text.contains(r#"mwp_commands_total{outcome="accepted",code="OK"} 2"#));
        assert!(
            text.contains(r#"mwp_commands_total{outcome="rejected",code="REVISION_MISMATCH"} 1"#)
        );
        assert!(text.contains("mwp_store_errors_total 1"));
        assert!(text.contains("mwp_groups 3"));
        assert!(text.contains("mwp_live_tails 1"));
        m.heads_signed().inc();
        assert!(m.render(None, 0).contains("mwp_heads_signed_total 1"));
    }
}
