//! `GET /healthz` and `GET /readyz`: whether the process answers, and whether its store
//! accepts writes.
//!
//! The server remembers the outcome of its latest write to the store (a command's decision
//! or a tick): after a write that failed with `STORAGE` or `LOG_CORRUPT`, and until a write
//! succeeds, `/readyz` answers 503 with that error as its reason. The file store keeps a
//! storage error (it is sticky), so a store that failed stays not ready until it is
//! reopened.

use std::sync::{Mutex, PoisonError};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use mwp_core::{Code, Error};
use serde::Serialize;

use super::metrics::is_store_error;
use super::wire::{self, Format};
use super::App;

/// The latest write's failure, if it failed.
#[derive(Debug, Default)]
pub(crate) struct Readiness {
    failed: Mutex<Option<Error>>,
}

impl Readiness {
    /// Records a write's outcome: a store error makes the server not ready, a success ready
    /// again; a refused command says nothing about the store.
    pub(crate) fn wrote<T>(&self, result: &Result<T, Error>) {
        let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
        match result {
            Ok(_) => *failed = None,
            Err(e) if is_store_error(e) => *failed = Some(e.clone()),
            Err(_) => {}
        }
    }

    fn failure(&self) -> Option<Error> {
        self.failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[derive(Serialize)]
struct Status {
    status: &'static str,
}

/// `GET /healthz`: 200 `{"status": "alive"}` while the process serves requests.
pub(crate) async fn healthz() -> Response {
    wire::encode(StatusCode::OK, Format::Json, &Status { status: "alive" })
}

/// `GET /readyz`: 200 `{"status": "ready"}`, or 503 with a `STORAGE` error whose `reason` is
/// the failed write's error, in CBOR when the client asks for it (as every error).
pub(crate) async fn readyz(State(app): State<App>, headers: HeaderMap) -> Response {
    match app.ready.failure() {
        None => wire::encode(StatusCode::OK, Format::Json, &Status { status: "ready" }),
        Some(e) => wire::error_with(
            StatusCode::SERVICE_UNAVAILABLE,
            Format::accepted(&headers, Format::Json),
            &Error::new(
                Code::Storage,
                format!(
                    "the store does not accept writes: the latest write failed ({}: {})",
                    e.code, e.message
                ),
            )
            .with("reason", serde_json::to_value(&e).unwrap_or_default()),
        ),
    }
}
