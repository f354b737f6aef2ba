//! `mwp audit`: sealed audit logs of archived groups (SPEC §6a). `open` decrypts one with
//! the Organization's identity and verifies it whole; `verify` checks its manifest and
//! ciphertext with no key; `expire` deletes artifacts past their retention, leaving signed
//! tombstones.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use mwp_core::{Code, Error, PublicKey};

use super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE};

/// `mwp audit` subcommands.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Decrypt a sealed audit log with the Organization's identity, verify its chain, ids,
    /// tombstones, final snapshot and manifest, and print its events (JSON lines) or restore
    /// them to a data directory. Exit 1 if it does not open or verify.
    #[command(after_help = "Examples:
  mwp audit open ./mwp-data/groups/g1/audit.mwpa --identity org.key > events.jsonl
  mwp audit open audit.mwpa --identity org.key --out ./restored && mwp fsck --data ./restored")]
    Open(OpenArgs),
    /// Check a sealed audit log's manifest (signature, schema) and that its ciphertext is
    /// the one the manifest names; needs no key. Prints the manifest. Exit 1 if it fails.
    Verify {
        /// The artifact (`audit.mwpa`).
        artifact: PathBuf,
        /// The authority's public key, 64 hex digits: the manifest must be signed by it.
        #[arg(long, value_name = "HEX")]
        authority_key: Option<String>,
    },
    /// Create an Organization audit identity: the age identity to --out FILE (mode 0600),
    /// and print its recipient, the `age1…` key an org policy names.
    Keygen {
        /// The identity file to write (it must not exist).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Delete the sealed audit logs of a data directory whose retention has passed, each
    /// leaving a tombstone signed by the authority. Prints one JSON line per artifact.
    #[command(after_help = "Examples:
  mwp audit expire --data ./mwp-data --dry-run     lists, deletes nothing
  mwp audit expire --data ./mwp-data")]
    Expire(ExpireArgs),
}

/// `mwp audit open` arguments.
#[derive(Debug, Args)]
pub struct OpenArgs {
    /// The artifact (`audit.mwpa`).
    pub artifact: PathBuf,
    /// The Organization's age identity file (`AGE-SECRET-KEY-1…` lines).
    #[arg(long, value_name = "FILE")]
    pub identity: PathBuf,
    /// Restore the events to this data directory (created if missing, a key of its own)
    /// instead of printing them.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The authority's public key, 64 hex digits: the manifest must be signed by it.
    #[arg(long, value_name = "HEX")]
    pub authority_key: Option<String>,
}

/// `mwp audit expire` arguments.
#[derive(Debug, Args)]
pub struct ExpireArgs {
    /// Where the sealed logs are: a data directory (`--data DIR`) or a PostgreSQL store
    /// (`--store postgres://…`).
    #[command(flatten)]
    pub store: super::StoreArgs,
    /// List what would be deleted; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The time to judge retention at (ms since the epoch); now by default.
    #[arg(long, value_name = "MS")]
    pub now_ms: Option<u64>,
}

/// Runs an `mwp audit` subcommand.
pub fn run(cmd: AuditCommand) -> Outcome {
    match cmd {
        AuditCommand::Open(args) => open(&args),
        AuditCommand::Verify {
            artifact,
            authority_key,
        } => verify(&artifact, authority_key.as_deref()),
        AuditCommand::Expire(args) => expire(&args),
        AuditCommand::Keygen { out } => keygen(&out),
    }
}

/// The file at `path`, whole: an artifact holds a whole history, so no cap but the file's
/// end; a directory or a device is refused by its type ([`super::input::open`]).
fn read(path: &Path, what: &str) -> Result<Vec<u8>, Failure> {
    super::input::read(path, u64::MAX).map_err(|e| {
        Failure::new(
            EXIT_BAD_INPUT,
            format!("cannot read the {what} {}: {e}", path.display()),
        )
    })
}

fn trusted(hex: Option<&str>) -> Result<Option<PublicKey>, Failure> {
    hex.map(|h| {
        PublicKey::from_hex(h)
            .map_err(|e| Failure::new(EXIT_BAD_INPUT, format!("--authority-key: {e}")))
    })
    .transpose()
}

/// An `AUDIT_INVALID` (or a snapshot or chain failure inside it) is a failed check, exit 1;
/// bad input is exit 2.
fn failed(context: &str, e: &Error) -> Failure {
    match e.code {
        Code::AuditInvalid | Code::SnapshotInvalid | Code::LogCorrupt => {
            Failure::new(EXIT_FAILED, format!("{context}: {e}"))
        }
        _ => Failure::from_error(context, e),
    }
}

fn open(args: &OpenArgs) -> Outcome {
    let artifact = read(&args.artifact, "audit artifact")?;
    let identity = read(&args.identity, "identity file")?;
    let identity = String::from_utf8(identity).map_err(|_| {
        Failure::new(
            EXIT_BAD_INPUT,
            format!("{} is not a text identity file", args.identity.display()),
        )
    })?;
    let ids = mwp_audit::parse_identities(&identity).map_err(|e| {
        Failure::new(
            EXIT_BAD_INPUT,
            format!("{}: {}", args.identity.display(), e.message),
        )
    })?;
    let trusted = trusted(args.authority_key.as_deref())?;
    let name = args.artifact.display().to_string();
    let log = mwp_audit::open(&artifact, &ids, trusted.as_ref()).map_err(|e| failed(&name, &e))?;
    let m = &log.manifest;
    match &args.out {
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for bytes in &log.events {
                let event =
                    mwp_core::Event::from_cbor_verified(bytes).map_err(|e| failed(&name, &e))?;
                let written = serde_json::to_writer(&mut out, &event)
                    .map_err(std::io::Error::from)
                    .and_then(|()| out.write_all(b"\n"));
                if let Err(e) = written {
                    return Err(Failure::new(EXIT_UNAVAILABLE, format!("stdout: {e}")));
                }
            }
            out.flush()
                .map_err(|e| Failure::new(EXIT_UNAVAILABLE, format!("stdout: {e}")))?;
            eprintln!(
                "{}",
                serde_json::json!({"opened": name, "org": m.org, "group": m.group,
                    "events": log.events.len(), "state_hash": log.state_hash,
                    "sealed_at": m.sealed_at, "authority": m.authority})
            );
        }
        Some(dir) => {
            super::store::create_data_dir(dir)?;
            let store = crate::store::FileStore::open(dir, crate::store::StoreOptions::default())
                .map_err(|e| {
                Failure::from_error(&format!("cannot open {}", dir.display()), &e)
            })?;
            let store = store.restore_group(&log.events).map_err(|e| {
                Failure::from_error(&format!("cannot restore into {}", dir.display()), &e)
            })?;
            let hash = store
                .state_hash(&m.group)
                .map_err(|e| Failure::from_error("restored", &e))?;
            if hash != Some(log.state_hash) {
                return Err(Failure::new(
                    EXIT_FAILED,
                    format!(
                        "the restored group {} replays to {hash:?}, the audit log to {}",
                        m.group, log.state_hash
                    ),
                ));
            }
            println!(
                "{}",
                serde_json::json!({"restored": dir, "org": m.org, "group": m.group,
                    "events": log.events.len(), "state_hash": log.state_hash})
            );
        }
    }
    Ok(EXIT_OK)
}

fn verify(path: &Path, authority_key: Option<&str>) -> Outcome {
    let artifact = read(path, "audit artifact")?;
    let trusted = trusted(authority_key)?;
    let name = path.display().to_string();
    let (manifest, _) = mwp_core::audit::split_artifact(&artifact, trusted.as_ref())
        .map_err(|e| failed(&name, &e))?;
    println!(
        "{}",
        serde_json::to_string(&manifest)
            .map_err(|e| Failure::new(EXIT_UNAVAILABLE, e.to_string()))?
    );
    Ok(EXIT_OK)
}

fn expire(args: &ExpireArgs) -> Outcome {
    let url = args.store.required()?;
    let now = args.now_ms.unwrap_or_else(crate::server::now_ms);
    // (group, seq, retain_until) of each artifact past its retention.
    let done: Vec<(mwp_core::Id, u64, u64)> = match &url {
        super::StoreUrl::File(dir) => {
            if !dir.is_dir() {
                return Err(Failure::new(
                    EXIT_BAD_INPUT,
                    format!("{} is not a data directory", dir.display()),
                ));
            }
            let store = crate::store::FileStore::open(dir, crate::store::StoreOptions::default())
                .map_err(|e| Failure::from_error(&format!("cannot open {url}"), &e))?;
            store
                .expire_audit(now, args.dry_run)
                .map_err(|e| Failure::from_error("cannot expire", &e))?
                .into_iter()
                .map(|m| (m.group, m.seq, m.retain_until))
                .collect()
        }
        #[cfg(feature = "postgres")]
        super::StoreUrl::Postgres(list) => {
            let router = crate::postgres::PostgresRouter::connect_with(list, None, None, None)
                .map_err(|e| Failure::from_error("cannot open the PostgreSQL store", &e))?;
            router
                .expire_audit(now, args.dry_run)
                .map_err(|e| Failure::from_error("cannot expire", &e))?
                .into_iter()
                .map(|x| (x.group, x.seq, x.retain_until))
                .collect()
        }
        _ => {
            return Err(Failure::new(
                EXIT_BAD_INPUT,
                format!("{url} keeps no sealed audit log; name --data DIR or a postgres:// store"),
            ))
        }
    };
    for (group, seq, retain_until) in &done {
        println!(
            "{}",
            serde_json::json!({"group": group, "seq": seq, "retain_until": retain_until,
                "deleted": !args.dry_run})
        );
    }
    if done.is_empty() {
        eprintln!("no sealed audit log is past its retention at {now}");
    }
    Ok(EXIT_OK)
}

fn keygen(out: &Path) -> Outcome {
    use std::os::unix::fs::OpenOptionsExt;
    let (text, recipient) = mwp_audit::generate_identity();
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(out)
        .and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            f.sync_all()
        });
    written.map_err(|e| {
        let exit = if e.kind() == std::io::ErrorKind::AlreadyExists {
            EXIT_BAD_INPUT
        } else {
            EXIT_UNAVAILABLE
        };
        Failure::new(exit, format!("cannot write {}: {e}", out.display()))
    })?;
    println!(
        "{}",
        serde_json::json!({"file": out, "recipient": recipient})
    );
    Ok(EXIT_OK)
}
