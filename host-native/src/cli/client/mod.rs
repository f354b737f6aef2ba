//! The client commands of `mwp`: `keygen`, `submit`, `tail`, `groups`, `verify`, and the
//! `--server` form of `replay`. They speak to a running `mwp serve` through
//! [`crate::server::client::Client`] (docs/http.md), or read a store directly where a
//! command says so.
//!
//! Output: one JSON line per record on stdout when stdout is not a terminal or `--json` is
//! given, readable lines otherwise. Messages for people go to stderr. Exit codes as in
//! [`super`]: 0 ok, 1 a check failed or the server rejected the command, 2 bad input (an
//! unreadable file, a key file that holds no key, a server that is not mwp), 3 the server
//! cannot be reached.

pub mod groups;
pub mod keygen;
pub mod source;
pub mod submit;
pub mod tail;
pub mod verify;
pub mod verify_source;

use std::io::{IsTerminal, Write};

use clap::Args;
use mwp_core::{Code, Error, Id};
use serde_json::Value;

use super::{Failure, EXIT_BAD_INPUT, EXIT_UNAVAILABLE};
use crate::server::client::{printable, Client};

/// The server a client command talks to.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// Base URL of `mwp serve`, e.g. http://127.0.0.1:7878.
    #[arg(long, env = "MWP_SERVER", value_name = "URL")]
    pub server: String,
    /// Operator token sent as `Authorization: Bearer` (needed when reads are not public,
    /// or to create a group under `--open-groups token`).
    #[arg(long, env = "MWP_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

impl ServerArgs {
    /// A client of the server, after checking the URL's form.
    pub fn client(&self) -> Result<Client, Failure> {
        client(&self.server, self.token.as_deref())
    }
}

/// A client of `server` (checked to be an `http://` or `https://` URL), with `token`.
pub fn client(server: &str, token: Option<&str>) -> Result<Client, Failure> {
    let rest = server
        .strip_prefix("http://")
        .or_else(|| server.strip_prefix("https://"));
    if rest.is_none_or(|r| r.trim_matches('/').is_empty()) {
        return Err(Failure::new(
            EXIT_BAD_INPUT,
            format!("--server: {server:?} is not a server URL; use e.g. http://127.0.0.1:7878"),
        ));
    }
    let client = Client::new(server);
    Ok(match token {
        Some(t) => client.with_token(t),
        None => client,
    })
}

/// How to print records.
#[derive(Debug, Clone, Copy, Args)]
pub struct OutputArgs {
    /// Print JSON lines even on a terminal (they are the default when stdout is not one).
    #[arg(long)]
    pub json: bool,
}

impl OutputArgs {
    /// Whether to print JSON lines.
    pub fn json(&self) -> bool {
        self.json || !std::io::stdout().is_terminal()
    }
}

/// Prints one record: `value` as a JSON line, or `human` on a terminal (its control
/// characters other than newline and tab escaped: it may quote what a server said).
pub fn print(json: bool, value: &Value, human: impl FnOnce() -> String) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    let line = if json {
        value.to_string()
    } else {
        printable(&human(), usize::MAX)
    };
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| Failure::new(EXIT_UNAVAILABLE, format!("cannot write the output: {e}")))
}

/// An ID given on the command line.
pub fn id(value: &str, flag: &str) -> Result<Id, Failure> {
    Id::new(value).map_err(|e| Failure::new(EXIT_BAD_INPUT, format!("{flag}: {e}")))
}

/// A failure from an error a server answered (or a failure to reach it): unreachable and
/// failed servers exit 3; an answer that is not mwp's, an unknown group and every other
/// refusal exit 2.
pub fn server_failure(context: &str, e: &Error) -> Failure {
    let exit = match e.code {
        // An answer with an HTTP status that was not an mwp error: not an mwp server (or a
        // proxy in front of one that failed).
        Code::Storage if e.details.contains_key("status") => {
            let status = e.details["status"].as_u64().unwrap_or(0);
            if status >= 500 {
                EXIT_UNAVAILABLE
            } else {
                return Failure::new(
                    EXIT_BAD_INPUT,
                    format!(
                        "{context}: the server is not an mwp server (or not at its base URL): {e}"
                    ),
                );
            }
        }
        Code::Storage => EXIT_UNAVAILABLE,
        _ => EXIT_BAD_INPUT,
    };
    Failure::new(exit, format!("{context}: {e}"))
}
