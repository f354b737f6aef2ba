//! Store URLs (`memory:`, `file:DIR`, `postgres://…`) and opening the authority they name.
//! [`open`] is the one place that maps a URL to an [`AuthorityService`].

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use super::{Failure, Outcome, EXIT_UNAVAILABLE};
use crate::memory_service::MemoryService;
use crate::service::AuthorityService;

/// The store URL in the `MWP_STORE` environment variable, if set and not empty (so a
/// password need not be on the command line, where `ps` shows it).
pub fn from_env() -> Result<Option<StoreUrl>, Failure> {
    match std::env::var("MWP_STORE") {
        Ok(s) if !s.is_empty() => s
            .parse()
            .map(Some)
            .map_err(|e: String| Failure::new(super::EXIT_BAD_INPUT, format!("MWP_STORE: {e}"))),
        // Set, but not to text: refused, not taken for unset.
        Err(std::env::VarError::NotUnicode(s)) => Err(Failure::new(
            super::EXIT_BAD_INPUT,
            format!("MWP_STORE: {} is not UTF-8 text", s.to_string_lossy()),
        )),
        _ => Ok(None),
    }
}

/// Which store an authority runs on. Neither its `Display` nor its `Debug` form shows a
/// password.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// `memory:` — in memory, gone when the process ends.
    Memory,
    /// `file:DIR` — the file store in DIR (`--data DIR`).
    File(PathBuf),
    /// `postgres://…` — PostgreSQL (SPEC §10).
    Postgres(String),
}

impl FromStr for StoreUrl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "memory:" || s == "memory" {
            return Ok(StoreUrl::Memory);
        }
        if let Some(dir) = s.strip_prefix("file:") {
            let dir = dir.strip_prefix("//").unwrap_or(dir);
            if dir.is_empty() {
                return Err("file: needs a directory, e.g. file:./mwp-data".into());
            }
            return Ok(StoreUrl::File(PathBuf::from(dir)));
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(StoreUrl::Postgres(s.to_owned()));
        }
        Err(format!(
            "{s:?} is not a store URL; use memory:, file:DIR or postgres://USER@HOST/DB"
        ))
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Memory => f.write_str("memory:"),
            StoreUrl::File(dir) => write!(f, "file:{}", dir.display()),
            // Never print a password that may be in the URL.
            StoreUrl::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Memory => f.write_str("Memory"),
            StoreUrl::File(dir) => f.debug_tuple("File").field(dir).finish(),
            StoreUrl::Postgres(url) => f.debug_tuple("Postgres").field(&redact(url)).finish(),
        }
    }
}

/// A PostgreSQL URL (or a comma-separated list of them) without its secrets: the user
/// information of each is replaced by `…`, and the value of every `password` parameter by
/// `…`.
pub fn redact(url: &str) -> String {
    crate::redact::url(url)
}

/// How to open a store.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Serve only the latest N events of each group online (see `mwp serve --online-events`).
    pub online_events: Option<u64>,
    /// The authority key to use (transcripts use the transcript key of `@authority`);
    /// `None`: memory generates one, a file store uses the key in its directory.
    pub authority_key: Option<mwp_core::SecretKey>,
    /// Create the data directory (and its parents, 0700) when it is missing.
    pub create: bool,
    /// Open a file store read-only: no writer lock, nothing written (`mwp replay`,
    /// `mwp snapshot`); safe beside a running server.
    pub read_only: bool,
    /// The Organizations' archival policies (`mwp serve --org-policy`).
    pub org_policy: Option<std::sync::Arc<mwp_core::audit::OrgPolicies>>,
}

fn not_built(url: &StoreUrl) -> Failure {
    Failure::new(
        EXIT_UNAVAILABLE,
        format!(
            "the store {url} is not in this build of mwp: it was built without the `postgres` feature (a default build has it); use file:DIR or memory:"
        ),
    )
}

/// Creates a data directory and its missing parents, mode 0700.
pub fn create_data_dir(dir: &std::path::Path) -> Result<(), Failure> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            Failure::new(
                EXIT_UNAVAILABLE,
                format!("cannot create {}: {e}", dir.display()),
            )
        })
}

/// Says in the log what opening a data directory repaired, each a warning naming its file:
/// an operator learns of a crash's traces from the server that found them, not only from
/// `mwp fsck`.
fn log_repairs(report: &crate::store::OpenReport) {
    for (file, offset, bytes) in &report.trimmed {
        tracing::warn!(
            file = %file,
            offset,
            bytes,
            "a torn tail was trimmed: {bytes} bytes after the last whole record at offset {offset}, never acknowledged"
        );
    }
    for (file, reason) in &report.skipped_snapshots {
        tracing::warn!(
            file = %file,
            "a snapshot that does not verify was passed over: {reason}"
        );
    }
    for what in &report.repaired {
        tracing::warn!("work a crash had interrupted was finished: {what}");
    }
    for dir in &report.removed {
        tracing::warn!(
            dir = %dir,
            "an interrupted group creation was removed: nothing in it was acknowledged"
        );
    }
}

/// Opens the authority a URL names, with a generated authority key for memory.
pub fn open(url: &StoreUrl, options: &Options) -> Result<Arc<dyn AuthorityService>, Failure> {
    match url {
        StoreUrl::Memory => {
            let key = match &options.authority_key {
                Some(k) => k.clone(),
                None => crate::memory_service::random_key()
                    .map_err(|e| Failure::from_error("cannot create the authority key", &e))?,
            };
            let service = MemoryService::new(key).with_online_events(options.online_events);
            Ok(Arc::new(service))
        }
        StoreUrl::File(dir) => {
            if !dir.is_dir() {
                if !options.create || options.read_only {
                    return Err(Failure::new(
                        super::EXIT_BAD_INPUT,
                        format!(
                            "{} is not a data directory; `mwp serve --data {}` creates one",
                            dir.display(),
                            dir.display()
                        ),
                    ));
                }
                create_data_dir(dir)?;
            }
            let store_options = crate::store::StoreOptions {
                online_events: options.online_events,
                authority_key: options.authority_key.clone(),
                read_only: options.read_only,
                org_policy: options.org_policy.clone(),
                ..crate::store::StoreOptions::default()
            };
            let store = crate::store::FileStore::open(dir, store_options)
                .map_err(|e| Failure::from_error(&format!("cannot open {url}"), &e))?;
            log_repairs(store.report());
            Ok(Arc::new(store))
        }
        #[cfg(feature = "postgres")]
        StoreUrl::Postgres(list) => {
            let service = crate::postgres::PostgresRouter::connect_with(
                list,
                options.online_events,
                options.authority_key.clone(),
                options.org_policy.clone(),
            )
            .map_err(|e| Failure::from_error("cannot open the PostgreSQL store", &e))?;
            Ok(Arc::new(service))
        }
        #[cfg(not(feature = "postgres"))]
        StoreUrl::Postgres(_) => Err(not_built(url)),
    }
}

/// `mwp fsck`: checks every log, chain and snapshot of a store.
pub fn fsck(url: &StoreUrl) -> Outcome {
    match url {
        StoreUrl::Memory => Err(Failure::new(
            super::EXIT_BAD_INPUT,
            "a memory: store has nothing on disk to check; name one with --data DIR",
        )),
        StoreUrl::File(dir) if !dir.is_dir() => Err(Failure::new(
            super::EXIT_BAD_INPUT,
            format!("{} is not a data directory", dir.display()),
        )),
        StoreUrl::File(dir) => {
            // fsck takes no lock and writes nothing, so a live server may change the
            // directory while it reads: a snapshot pruned, a record erased in place. Such a
            // finding does not come back on a second pass; damage does.
            let mut tries = 0;
            let report = loop {
                let report = crate::store::fsck(dir)
                    .map_err(|e| Failure::from_error(&format!("cannot check {url}"), &e))?;
                if report.is_clean() || tries == 2 {
                    break report;
                }
                tries += 1;
            };
            for g in &report.groups {
                println!(
                    "{}",
                    match &g.sealed {
                        None => serde_json::json!({"group": g.group, "events": g.events,
                            "state_hash": g.state_hash, "snapshots_ok": g.snapshots_ok}),
                        Some(s) => serde_json::json!({"group": g.group, "events": g.events,
                            "state_hash": g.state_hash, "snapshots_ok": g.snapshots_ok,
                            "sealed": {"seq": s.seq, "state": s.state,
                                "plain_removed": s.plain_removed}}),
                    }
                );
            }
            for f in &report.findings {
                println!(
                    "{}",
                    serde_json::json!({"damage": f.damage, "code": f.code, "group": f.group,
                        "file": f.file, "offset": f.offset, "message": f.message})
                );
            }
            Ok(if report.is_clean() {
                super::EXIT_OK
            } else {
                super::EXIT_FAILED
            })
        }
        StoreUrl::Postgres(_) => Err(not_built(url)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_kind_and_refuses_the_rest() {
        assert_eq!("memory:".parse(), Ok(StoreUrl::Memory));
        assert_eq!("file:/tmp/x".parse(), Ok(StoreUrl::File("/tmp/x".into())));
        assert_eq!(
            "file://rel/dir".parse(),
            Ok(StoreUrl::File("rel/dir".into()))
        );
        assert!(matches!(
            "postgres://u:p@h/db".parse(),
            Ok(StoreUrl::Postgres(_))
        ));
        assert!("file:".parse::<StoreUrl>().is_err());
        assert!("redis://x".parse::<StoreUrl>().is_err());
    }

    #[test]
    fn display_hides_postgres_credentials() {
        let url: StoreUrl = "postgres://u:secret@h/db".parse().expect("url");
        assert!(!url.to_string().contains("secret"));
    }

    #[test]
    #[cfg(not(feature = "postgres"))]
    fn stores_not_built_yet_answer_clearly() {
        let err = open(
            &StoreUrl::Postgres("postgres://h/db".into()),
            &Options::default(),
        )
        .err()
        .expect("refused");
        assert_eq!(err.exit, EXIT_UNAVAILABLE);
        assert!(err.message.contains("not built yet"));
    }

    #[test]
    fn a_file_store_is_created_only_when_asked() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("data");
        let err = open(&StoreUrl::File(dir.clone()), &Options::default())
            .err()
            .expect("refused");
        assert_eq!(err.exit, super::super::EXIT_BAD_INPUT);
        assert!(!dir.exists());
        let options = Options {
            create: true,
            ..Options::default()
        };
        let service = open(&StoreUrl::File(dir.clone()), &options).expect("created");
        assert!(dir.join("authority.key").is_file());
        drop(service);
        assert!(open(&StoreUrl::File(dir), &Options::default()).is_ok());
    }
}
