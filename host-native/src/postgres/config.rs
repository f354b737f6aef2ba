//! Settings of a PostgreSQL store, read from a `postgres://` URL.
//!
//! The URL is a libpq connection URL (user, password, hosts, database, `sslmode`,
//! `connect_timeout`, `keepalives_idle`, `application_name`, `options`, …); the parameters
//! below are mwp's own and are taken out before the rest goes to the driver:
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `pool_size` | 16 | connections this process keeps to the server, at most |
//! | `schema` | (search path) | PostgreSQL schema holding mwp's tables; created if missing |
//! | `snapshot_every` | 100000 | take a signed snapshot every N events of a group (0: never) |
//! | `online_window` | (all) | replay serves only the last N events; older cursors get `CURSOR_TOO_OLD` |
//! | `cache_groups` | 10000 | group states kept in memory |
//! | `shard` | host:port/db | the name rendezvous hashing gives this server (see `router`) |

use std::sync::Arc;

use mwp_core::audit::OrgPolicies;
use mwp_core::{Code, Error, Limits, Result, SecretKey};

/// Where the authority key comes from.
#[derive(Clone, Debug, Default)]
pub enum KeySource {
    /// Read from table `mwp_authority`; generated and stored there on first use.
    #[default]
    Database,
    /// Given by configuration; the database stores only its public half, and refuses a
    /// different key later.
    Given(Box<SecretKey>),
}

/// Everything a [`super::PostgresAuthority`] needs to open. Its `Debug` form hides the
/// password in `conninfo`.
#[derive(Clone)]
pub struct PostgresConfig {
    /// Connection string for the driver, mwp's own parameters removed.
    pub conninfo: String,
    /// Schema holding mwp's tables (`None`: the connection's search path).
    pub schema: Option<String>,
    /// Most connections this process opens.
    pub pool_size: usize,
    /// A snapshot every this many events of a group (0: only on demand and at archive).
    pub snapshot_every: u64,
    /// Replay serves only the last this many events (`None`: all of them).
    pub online_window: Option<u64>,
    /// Most group states cached in memory.
    pub cache_groups: usize,
    /// The name of this server for routing (`None`: `host:port/dbname`).
    pub shard: Option<String>,
    /// Where the authority key comes from.
    pub key: KeySource,
    /// Limits the authority enforces.
    pub limits: Limits,
    /// The Organizations' archival policies (SPEC §6a, the operator's `--org-policy` file,
    /// read with `mwp_audit::load_policy`): a Group of an Organization named here is sealed
    /// into an encrypted audit artifact (table `mwp_audit`) when it is archived, and its plain
    /// history is removed if the policy says so. `None` (the default): every history stays
    /// in the clear. Not a URL parameter.
    pub org_policy: Option<Arc<OrgPolicies>>,
}

impl std::fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("conninfo", &crate::redact::url(&self.conninfo))
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .field("snapshot_every", &self.snapshot_every)
            .field("online_window", &self.online_window)
            .field("cache_groups", &self.cache_groups)
            .field("shard", &self.shard)
            .field("key", &self.key)
            .field("limits", &self.limits)
            .field("org_policy", &self.org_policy)
            .finish()
    }
}

impl Default for PostgresConfig {
    fn default() -> Self {
        PostgresConfig {
            conninfo: String::new(),
            schema: None,
            pool_size: 16,
            snapshot_every: 100_000,
            online_window: None,
            cache_groups: 10_000,
            shard: None,
            key: KeySource::Database,
            limits: Limits::default(),
            org_policy: None,
        }
    }
}

fn bad(message: impl Into<String>) -> Error {
    Error::new(Code::Storage, message)
}

fn number(key: &str, value: &str) -> Result<u64> {
    value.parse::<u64>().map_err(|_| {
        bad(format!(
            "store URL parameter {key}={value:?} is not a non-negative integer"
        ))
    })
}

/// Whether `name` can be a schema name here: a lowercase SQL identifier of 1–63 bytes.
pub fn valid_schema(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z' | '_'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        && name.len() <= 63
}

impl PostgresConfig {
    /// Reads a `postgres://` or `postgresql://` URL, or a libpq `key=value` string (which
    /// takes no mwp parameters). Bad parameters are a `STORAGE` error naming them.
    pub fn from_url(url: &str) -> Result<PostgresConfig> {
        let mut config = PostgresConfig::default();
        let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
        let Some((base, query)) = url.split_once('?').filter(|_| is_url) else {
            config.conninfo = url.to_owned();
            return Ok(config);
        };
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "pool_size" => {
                    let n = number(key, value)?;
                    if n == 0 || n > 1000 {
                        return Err(bad(format!(
                            "pool_size={n} is out of range; it must be 1 to 1000"
                        )));
                    }
                    config.pool_size = n as usize;
                }
                "schema" => {
                    if !valid_schema(value) {
                        return Err(bad(format!(
                            "schema={value:?} is not a lowercase identifier ([a-z_][a-z0-9_]*, at most 63 bytes)"
                        )));
                    }
                    config.schema = Some(value.to_owned());
                }
                "snapshot_every" => config.snapshot_every = number(key, value)?,
                "online_window" => {
                    let n = number(key, value)?;
                    if n == 0 {
                        return Err(bad(
                            "online_window=0 would serve nothing; it must be at least 1",
                        ));
                    }
                    config.online_window = Some(n);
                }
                "cache_groups" => {
                    config.cache_groups =
                        usize::try_from(number(key, value)?.max(1)).unwrap_or(usize::MAX);
                }
                "shard" => {
                    if value.is_empty() || value.contains('%') {
                        return Err(bad(format!(
                            "shard={value:?} must be a non-empty plain name"
                        )));
                    }
                    config.shard = Some(value.to_owned());
                }
                _ => rest.push(pair),
            }
        }
        config.conninfo = if rest.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", rest.join("&"))
        };
        Ok(config)
    }
}

/// Splits a store list `postgres://a/db,postgres://b/db` into its URLs. A comma starts a new
/// URL only where `postgres://` or `postgresql://` follows it, so libpq's multi-host form
/// (`postgres://h1,h2/db`) stays one URL.
pub fn split_store_list(list: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, _) in list.match_indices(',') {
        let next = &list[i + 1..];
        if next.starts_with("postgres://") || next.starts_with("postgresql://") {
            out.push(&list[start..i]);
            start = i + 1;
        }
    }
    out.push(&list[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_password() {
        let c = PostgresConfig::from_url(
            "postgres://u:s3cret@h:5/db?password=s3cret&pool_size=2&sslmode=disable",
        )
        .expect("parses");
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("h:5/db"), "{shown}");
    }

    #[test]
    fn mwp_parameters_are_taken_out() {
        let c = PostgresConfig::from_url(
            "postgres://u@h:5/db?pool_size=4&sslmode=disable&schema=s1&online_window=10&shard=a",
        )
        .expect("valid");
        assert_eq!(c.conninfo, "postgres://u@h:5/db?sslmode=disable");
        assert_eq!(c.pool_size, 4);
        assert_eq!(c.schema.as_deref(), Some("s1"));
        assert_eq!(c.online_window, Some(10));
        assert_eq!(c.shard.as_deref(), Some("a"));
    }

    #[test]
    fn bad_parameters_are_named() {
        for (url, word) in [
            ("postgres://h/db?pool_size=0", "pool_size"),
            ("postgres://h/db?pool_size=x", "pool_size"),
            ("postgres://h/db?schema=Bad-Name", "schema"),
            ("postgres://h/db?online_window=0", "online_window"),
        ] {
            let e = PostgresConfig::from_url(url).expect_err(url);
            assert_eq!(e.code, Code::Storage);
            assert!(e.message.contains(word), "{url}: {}", e.message);
        }
    }

    #[test]
    fn store_lists_split_only_before_a_scheme() {
        assert_eq!(
            split_store_list("postgres://a,b/db,postgresql://c/db?x=1,postgres://d"),
            vec!["postgres://a,b/db", "postgresql://c/db?x=1", "postgres://d"]
        );
        assert_eq!(split_store_list("postgres://a/db"), vec!["postgres://a/db"]);
    }
}
