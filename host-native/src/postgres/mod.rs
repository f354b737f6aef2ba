//! The authority store on PostgreSQL (SPEC §10), behind the cargo feature `postgres`.
//!
//! * [`PostgresAuthority`] — one database: one transaction per accept (event row, receipt
//!   row, group head row), `(group, seq)` and `(group, actor, action)` unique, accepts of one
//!   group serialised across every process by a transaction-scoped advisory lock.
//! * [`PostgresRouter`] — several databases: each group lives on the server that rendezvous
//!   hashing of its ID picks (`--store postgres://a/db,postgres://b/db`).
//!
//! Both implement [`AuthorityService`](crate::service::AuthorityService) and are **blocking**:
//! the driver is the synchronous `postgres` crate, which runs a small runtime of its own per
//! connection. Call them from plain threads or `tokio::task::spawn_blocking`, never directly on
//! an async runtime thread (the driver would panic there).
//!
//! Sealed audit logs (SPEC §6a): with [`PostgresConfig::org_policy`], an archived Group of a
//! named Organization is sealed into table `mwp_audit` ([`PostgresAuthority::seal_audit`],
//! [`PostgresAuthority::expire_audit`], [`PostgresAuthority::audit_artifact`]).
//!
//! docs/postgres.md explains the schema, the locking and the failure handling;
//! docs/deploy.md how to run it.

mod audit;
mod authority;
mod batch;
pub mod config;
pub mod migrate;
mod pool;
mod router;
mod snapshot;
mod sql;

pub use audit::{AuditStatus, ExpiredAudit, MAX_ARTIFACT_BYTES};
pub use authority::PostgresAuthority;
pub use config::{KeySource, PostgresConfig};
pub use router::PostgresRouter;

use mwp_core::{Code, Error};

/// A `STORAGE` error for a driver failure, with the SQLSTATE when the server sent one.
pub(crate) fn storage(context: &str, e: &postgres::Error) -> Error {
    let message = match e.as_db_error() {
        Some(db) => format!(
            "PostgreSQL failed while {context}: {} ({})",
            db.message(),
            db.code().code()
        ),
        None => format!("PostgreSQL failed while {context}: {e}"),
    };
    let err = Error::new(Code::Storage, message);
    match e.code() {
        Some(code) => err.with("sqlstate", code.code()),
        None => err,
    }
}
