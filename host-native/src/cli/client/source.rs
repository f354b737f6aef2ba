//! Where a reading command gets a group's history: a running server (`--server URL`) or a
//! store opened read-only (`--data DIR`, `--store URL`). Both answer the same four
//! questions, so `replay`, `groups` and `verify` read either the same way.

use std::sync::Arc;

use clap::Args;
use mwp_core::head::SignedHead;
use mwp_core::{Error, Event, Id, PublicKey};

use super::super::store::{self, StoreUrl};
use super::super::{Failure, EXIT_BAD_INPUT};
use crate::server::client::Client;
use crate::service::AuthorityService;

/// `--server URL` or `--data DIR` / `--store URL`. A store named on the command line wins
/// over a server named only in `MWP_SERVER`.
#[derive(Debug, Clone, Args)]
pub struct SourceArgs {
    /// Base URL of `mwp serve` to read from, e.g. http://127.0.0.1:7878.
    #[arg(long, env = "MWP_SERVER", value_name = "URL")]
    pub server: Option<String>,
    /// Operator token for `--server` (`Authorization: Bearer`).
    #[arg(long, env = "MWP_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Data directory of a file store to read (short for --store file:DIR); read-only, so
    /// it runs beside a live server.
    #[arg(long, value_name = "DIR", conflicts_with = "store")]
    pub data: Option<std::path::PathBuf>,
    /// Store URL to read: file:DIR or postgres://…
    #[arg(long, value_name = "URL")]
    pub store: Option<StoreUrl>,
}

/// An open source of history.
pub enum Source {
    /// A running server.
    Server(Client),
    /// A store, opened read-only.
    Store(Arc<dyn AuthorityService>),
}

impl SourceArgs {
    /// Opens what the arguments name: `--data` or `--store`, else `--server` (or
    /// `MWP_SERVER`), else the store in `MWP_STORE`; one is required.
    pub fn open(&self) -> Result<Source, Failure> {
        let url = match (&self.data, &self.store, &self.server) {
            (Some(dir), _, _) => StoreUrl::File(dir.clone()),
            (None, Some(url), _) => url.clone(),
            (None, None, Some(server)) => {
                return super::client(server, self.token.as_deref()).map(Source::Server)
            }
            (None, None, None) => store::from_env()?.ok_or_else(|| {
                Failure::new(
                    EXIT_BAD_INPUT,
                    "name the history with --server URL, --data DIR or --store URL (or set MWP_SERVER, MWP_DATA or MWP_STORE)",
                )
            })?,
        };
        let read_only = store::Options {
            read_only: true,
            ..store::Options::default()
        };
        store::open(&url, &read_only).map(Source::Store)
    }
}

impl Source {
    /// Turns an error into a failure with the exit code it deserves from this source.
    pub fn failure(&self, context: &str, e: &Error) -> Failure {
        match self {
            Source::Server(_) => super::server_failure(context, e),
            Source::Store(_) => Failure::from_error(context, e),
        }
    }

    /// The authority's public key.
    pub fn authority_key(&self) -> Result<PublicKey, Failure> {
        match self {
            Source::Server(c) => c
                .authority_key()
                .map_err(|e| self.failure("cannot read the authority key", &e)),
            Source::Store(s) => Ok(s.authority_key()),
        }
    }

    /// Every group and the seq of its last event.
    pub fn groups(&self) -> Result<Vec<(Id, u64)>, Failure> {
        let fail = |e: &Error| self.failure("cannot list the groups", e);
        match self {
            Source::Server(c) => Ok(c
                .groups()
                .map_err(|e| fail(&e))?
                .into_iter()
                .map(|g| (g.group, g.head))
                .collect()),
            Source::Store(s) => s
                .groups()
                .map_err(|e| fail(&e))?
                .into_iter()
                .map(|g| {
                    let head = s.head_seq(&g).map_err(|e| fail(&e))?;
                    Ok((g, head))
                })
                .collect(),
        }
    }

    /// At most `limit` events of `group` with seq > `after`, in seq order.
    pub fn events(&self, group: &Id, after: u64, limit: usize) -> Result<Vec<Event>, Failure> {
        let context = format!("cannot read the events of {group} after seq {after}");
        match self {
            Source::Server(c) => c.events(group, after, limit),
            Source::Store(s) => s.events(group, after, limit),
        }
        .map_err(|e| self.failure(&context, &e))
    }

    /// The server's latest signed head of `group` (SPEC §8a), unverified; `None` from a
    /// store (a store read-only signs nothing).
    pub fn signed_head(&self, group: &Id) -> Result<Option<SignedHead>, Failure> {
        match self {
            Source::Server(c) => c
                .head(group)
                .map(Some)
                .map_err(|e| self.failure(&format!("cannot read the signed head of {group}"), &e)),
            Source::Store(_) => Ok(None),
        }
    }

    /// The latest signed snapshot of `group`, canonical CBOR: the server's answer, or the
    /// one a store holds (`None` when it holds none; a store opened read-only signs nothing).
    pub fn stored_snapshot(&self, group: &Id) -> Result<Option<Vec<u8>>, Failure> {
        match self {
            Source::Server(c) => c.snapshot(group).map(Some),
            Source::Store(s) => s.stored_snapshot(group),
        }
        .map_err(|e| self.failure(&format!("cannot read the latest snapshot of {group}"), &e))
    }
}
