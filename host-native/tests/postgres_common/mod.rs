//! Shared helpers of the PostgreSQL suites: where the test server is, a fresh schema per
//! test, and signed commands.
//!
//! The server comes from `MWP_TEST_POSTGRES` (scripts/setup-postgres.sh sets it). Unset, the
//! tests fail under CI (`CI=true`) and skip with a loud message elsewhere.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

use mwp_core::{Command, Limits, SecretKey};
use mwp_host::postgres::{KeySource, PostgresAuthority, PostgresConfig};
use serde_json::{json, Value};

/// The test server's URL, or `None` (after a loud message) when the tests must skip.
pub fn server() -> Option<String> {
    match std::env::var("MWP_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!(
                    "MWP_TEST_POSTGRES is not set under CI: source scripts/setup-postgres.sh first"
                );
            }
            // Straight to the process's stderr: the test harness hides `eprintln!` output of
            // passing tests, and a skip must be seen.
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| {
                use std::io::Write;
                let _ = std::io::stderr().write_all(
                    b"\n*** SKIPPED: MWP_TEST_POSTGRES is not set, so the PostgreSQL tests of this file did not run.\n\
                      *** Run `source scripts/setup-postgres.sh` first (it starts a private server).\n\n",
                );
            });
            None
        }
    }
}

/// Skips the test (returns) when there is no server outside CI.
#[macro_export]
macro_rules! require_server {
    () => {
        match postgres_common::server() {
            Some(url) => url,
            None => return,
        }
    };
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A schema of its own for one test, dropped at the end.
pub struct Schema {
    /// The server URL.
    pub server: String,
    /// The schema name.
    pub name: String,
}

impl Schema {
    /// A fresh, empty schema named after `tag`.
    pub fn new(server: &str, tag: &str) -> Schema {
        let name = format!(
            "t_{tag}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut client = postgres::Client::connect(server, postgres::NoTls).expect("connect");
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
            .expect("drop schema");
        Schema {
            server: server.to_owned(),
            name,
        }
    }

    /// The store URL of this schema, with extra mwp parameters (`"online_window=3"`).
    pub fn url(&self, extra: &str) -> String {
        let sep = if self.server.contains('?') { '&' } else { '?' };
        let mut url = format!("{}{sep}schema={}", self.server, self.name);
        if !extra.is_empty() {
            url.push('&');
            url.push_str(extra);
        }
        url
    }

    /// The configuration of a store on this schema, signing with the transcript authority key.
    pub fn config(&self, extra: &str) -> PostgresConfig {
        let mut config = PostgresConfig::from_url(&self.url(extra)).expect("config");
        config.key = KeySource::Given(Box::new(SecretKey::for_transcript("@authority")));
        config.limits = Limits::default();
        config
    }

    /// A store on this schema.
    pub fn open(&self, extra: &str) -> PostgresAuthority {
        PostgresAuthority::open(self.config(extra)).expect("open the store")
    }

    /// A plain client with the search path on this schema.
    pub fn client(&self) -> postgres::Client {
        let mut client = postgres::Client::connect(&self.server, postgres::NoTls).expect("connect");
        client
            .batch_execute(&format!("SET search_path TO \"{}\"", self.name))
            .expect("search path");
        client
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if std::env::var("MWP_TEST_KEEP_SCHEMAS").is_ok() {
            return;
        }
        if let Ok(mut c) = postgres::Client::connect(&self.server, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name));
        }
    }
}

/// The hash of `group`'s state as `store` reads it from the database.
pub fn state_hash(store: &PostgresAuthority, group: &mwp_core::Id) -> mwp_core::Hash {
    store
        .state(group)
        .expect("state")
        .expect("the group exists")
        .hash()
        .expect("hash")
}

/// The derived public key of a transcript actor, as hex.
pub fn key_of(actor: &str) -> String {
    SecretKey::for_transcript(actor).public().to_hex()
}

/// A command signed with `actor`'s transcript key. `body` is the JSON body.
pub fn command(
    group: &str,
    actor: &str,
    action: &str,
    expect: Option<u64>,
    body: Value,
) -> Command {
    let mut envelope = json!({
        "org": "acme", "group": group, "actor": actor, "action": action, "session": 1,
        "body": body, "sig": "00".repeat(64),
    });
    if let Some(e) = expect {
        envelope["expect"] = json!(e);
    }
    let bytes = serde_json::to_vec(&envelope).expect("json");
    let mut cmd = Command::from_json(&bytes, &Limits::default()).expect("valid command");
    cmd.sign(&SecretKey::for_transcript(actor)).expect("sign");
    cmd
}

/// `open_group` of `group` with owner alice, workers w0..w{workers}, reviewer rita.
pub fn open_group(group: &str, workers: usize) -> Command {
    let mut members = vec![
        json!({"actor": "alice", "role": "owner", "key": key_of("alice")}),
        json!({"actor": "rita", "role": "reviewer", "key": key_of("rita")}),
    ];
    for i in 0..workers {
        let w = format!("w{i}");
        members.push(json!({"actor": w, "role": "worker", "key": key_of(&w)}));
    }
    command(
        group,
        "alice",
        "open",
        None,
        json!({"type": "open_group", "mission": "m1", "title": "t", "members": members,
               "authority_key": key_of("@authority")}),
    )
}

/// `create_work` of `work`, no dependencies.
pub fn create_work(group: &str, actor: &str, action: &str, work: &str) -> Command {
    command(
        group,
        actor,
        action,
        None,
        json!({"type": "create_work", "work": work, "after": [], "spec": {"n": action},
               "contract": {"max_attempts": 3, "backoff_base_ms": 10, "backoff_max_ms": 100,
                            "cost_budget": 100, "risk": "low"}}),
    )
}

/// `claim_work` of work item `w0` by worker `w0` (action `k`, at revision 1): a lease of 5 s
/// that must start within `start_within_ms`.
pub fn claim_w0(group: &str, start_within_ms: u64) -> Command {
    command(
        group,
        "w0",
        "k",
        Some(1),
        json!({"type": "claim_work", "work": "w0",
        "lease_ms": 5000, "start_within_ms": start_within_ms}),
    )
}

/// The first column of the rows `sql` selects.
pub fn first_column<T: postgres::types::FromSqlOwned>(
    c: &mut postgres::Client,
    sql: &str,
) -> Vec<T> {
    c.query(sql, &[])
        .expect("rows")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// alice's `redact` (action `r1`) of the event at `seq` of `g1`.
pub fn redact_g1(seq: u64) -> Command {
    command(
        "g1",
        "alice",
        "r1",
        None,
        json!({"type": "redact", "seq": seq, "reason": "gdpr"}),
    )
}
