//! The `mwp` command-line tool (SPEC §11). Each subcommand lives in its own module; this one
//! holds the argument definitions, the exit codes and the dispatch.
//!
//! Exit codes, for scripts:
//! * 0 — done, and every check passed;
//! * 1 — done, but a check failed (a transcript step's `expect`, a snapshot that does not
//!   verify, damage found by `fsck`, a demo whose final snapshot does not verify);
//! * 2 — bad input: a usage error, an unreadable or undecodable file, an unknown group;
//! * 3 — the store or the server is unavailable (cannot open, cannot bind, storage failed).

pub mod audit;
pub mod bench;
pub mod client;
pub mod demo;
pub mod export;
pub mod export_dir;
pub mod input;
pub mod replay;
pub mod replica;
pub mod snapshot;
pub mod store;
pub mod transcript;
pub mod verify_proof;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use mwp_core::{Code, Error};

pub use store::StoreUrl;

/// Exit code: everything passed.
pub const EXIT_OK: u8 = 0;
/// Exit code: a check failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: bad input (usage, unreadable file, unknown group).
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit code: the store or server is unavailable.
pub const EXIT_UNAVAILABLE: u8 = 3;

/// Why a command stopped: an exit code and a message for stderr.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub exit: u8,
    /// What went wrong and what to do about it.
    pub message: String,
    /// The store's error it came from ([`Failure::from_error`]), for a command that reports
    /// some errors as findings (`mwp verify --data`: damage is a check that failed).
    pub error: Option<Error>,
}

impl Failure {
    /// A failure with an exit code.
    pub fn new(exit: u8, message: impl Into<String>) -> Self {
        Failure {
            exit,
            message: message.into(),
            error: None,
        }
    }

    /// A failure from a core error: bad input for `MALFORMED`, `NOT_FOUND`,
    /// `SNAPSHOT_INVALID`; unavailable for everything else.
    pub fn from_error(context: &str, e: &Error) -> Self {
        let exit = match e.code {
            Code::Malformed | Code::NotFound | Code::SnapshotInvalid | Code::WrongGroup => {
                EXIT_BAD_INPUT
            }
            _ => EXIT_UNAVAILABLE,
        };
        Failure {
            error: Some(e.clone()),
            ..Failure::new(exit, format!("{context}: {e}"))
        }
    }

    /// Whether it reports damage a store found in its own files (`LOG_CORRUPT`,
    /// `SNAPSHOT_INVALID`, `FORK`).
    pub fn is_damage(&self) -> bool {
        self.error.as_ref().is_some_and(|e| {
            matches!(
                e.code,
                Code::LogCorrupt | Code::SnapshotInvalid | Code::Fork
            )
        })
    }
}

/// What a subcommand returns: the exit code when it ran to the end.
pub type Outcome = Result<u8, Failure>;

const ABOUT: &str = "mwp keeps the authoritative, append-only history of a Group of agents \
working on a Mission, and lets every participant rebuild the same truth from it.";

const AFTER_HELP: &str = "Start here:
  mwp demo                          run a whole mission with several agents, then browse it
  mwp serve --addr 127.0.0.1:7878   run an authority over HTTP (docs/http.md)
  mwp transcript FILE               check a scenario written as JSON lines (SPEC §12)
  mwp keygen --out me.key           a member key; then mwp submit, tail, verify (docs/cli.md)

Exit codes: 0 ok · 1 a check failed · 2 bad input · 3 store or server unavailable.
Logs go to stderr; set MWP_LOG (e.g. MWP_LOG=debug) to change how much is logged.";

/// The `mwp` command line.
#[derive(Debug, Parser)]
#[command(name = "mwp", version, about = ABOUT, after_help = AFTER_HELP)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Where the authority keeps its data.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// Data directory of a file store (short for --store file:DIR).
    #[arg(long, env = "MWP_DATA", value_name = "DIR", conflicts_with = "store")]
    pub data: Option<PathBuf>,
    /// Store URL: memory:, file:DIR or postgres://…
    #[arg(long, value_name = "URL")]
    pub store: Option<StoreUrl>,
}

impl StoreArgs {
    /// The store named, or `default` when none is.
    pub fn url_or(&self, default: StoreUrl) -> StoreUrl {
        match (&self.data, &self.store) {
            (Some(dir), _) => StoreUrl::File(dir.clone()),
            (None, Some(url)) => url.clone(),
            (None, None) => default,
        }
    }

    /// The store named; one is required (`--data`, `--store`, or the `MWP_STORE`
    /// environment variable).
    pub fn required(&self) -> Result<StoreUrl, Failure> {
        match (&self.data, &self.store) {
            (None, None) => store::from_env()?.ok_or_else(|| {
                Failure::new(
                    EXIT_BAD_INPUT,
                    "name the data with --data DIR or --store URL (or set MWP_STORE)",
                )
            }),
            _ => Ok(self.url_or(StoreUrl::Memory)),
        }
    }

    /// The store named, else the one in `MWP_STORE`, else `default`.
    pub fn url_or_env(&self, default: StoreUrl) -> Result<StoreUrl, Failure> {
        match (&self.data, &self.store) {
            (None, None) => Ok(store::from_env()?.unwrap_or(default)),
            _ => Ok(self.url_or(default)),
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a transcript (JSON lines, SPEC §12) against a fresh authority; print one JSON line
    /// per step. Exit 1 if a step's `expect` failed, 2 if the file cannot be read.
    Transcript {
        /// The transcript file.
        file: PathBuf,
        /// Where the data is.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Run the authority over HTTP, with the dashboard at `/`. Stops cleanly on Ctrl-C.
    Serve(ServeArgs),
    /// Print a group's events as JSON lines, from seq `after + 1` on, from a server or a
    /// store.
    #[command(after_help = "Examples:
  mwp replay --server http://127.0.0.1:7878 --group g1
  mwp replay --data ./mwp-data --group g1 --after 100 > events.jsonl")]
    Replay {
        /// Where the history is.
        #[command(flatten)]
        source: client::source::SourceArgs,
        /// The group.
        #[arg(long)]
        group: String,
        /// Print events with seq greater than this.
        #[arg(long, default_value_t = 0)]
        after: u64,
    },
    /// Offer the events in FILE (JSON lines, any order, repeats allowed) to a fresh replica;
    /// print the answer to each, then the final cursor and state hash.
    Replica {
        /// Events as JSON lines (e.g. the output of `mwp replay`); signed heads
        /// (`"schema": "mwp.head.v1"`) may be mixed in.
        file: PathBuf,
        /// The authority's public key, 64 hex digits: check signed-head lines under it and
        /// report how far the replica is verified.
        #[arg(long, value_name = "HEX")]
        authority_key: Option<String>,
    },
    /// Write the latest signed snapshot of a group (canonical CBOR) to --out, or to stdout.
    Snapshot {
        /// Where the data is.
        #[command(flatten)]
        store: StoreArgs,
        /// The group.
        #[arg(long)]
        group: String,
        /// File to write; without it the CBOR goes to stdout.
        #[arg(long, short, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Check a snapshot file: schema, state hash, signature by KEY, org and group binding.
    /// Exit 0 if it verifies, 1 if it does not, 2 if the file cannot be read.
    VerifySnapshot {
        /// The snapshot file (canonical CBOR).
        file: PathBuf,
        /// The authority's public key, 64 hex digits (GET /v1/authority).
        #[arg(long)]
        key: String,
        /// The org it must belong to.
        #[arg(long)]
        org: String,
        /// The group it must belong to.
        #[arg(long)]
        group: String,
        /// Refuse snapshots older than this seq.
        #[arg(long, default_value_t = 0)]
        min_seq: u64,
    },
    /// Check every log, chain and snapshot of a data directory. Exit 1 on damage.
    Fsck {
        /// Where the data is.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Run a whole mission: an authority, several agents over HTTP, dependencies, retries,
    /// a checkpoint, a crash, a lease expiry and an unknown-outcome effect. Prints a summary
    /// and the dashboard URL, then serves until Ctrl-C.
    Demo(demo::DemoArgs),
    /// Measure accepted commands per second over HTTP with many concurrent clients.
    Bench(bench::BenchArgs),
    /// Create a member key: the secret key to --out FILE (mode 0600), the public key printed.
    #[command(after_help = "Examples:
  mwp keygen --out alice.key        prints {\"file\", \"public\"}; put the public key in open_group
  mwp keygen                        prints {\"secret\", \"public\"} (nothing written)")]
    Keygen(client::keygen::KeygenArgs),
    /// Sign a command with a member key, send it, print the receipt. Exit 1 if the server
    /// rejects it (the JSON error is printed), 2 on bad input, 3 if the server is unreachable.
    #[command(after_help = "Examples:
  echo '{\"type\": \"open_group\", \"mission\": \"m1\", \"title\": \"Ship\",
        \"members\": [{\"actor\": \"alice\", \"role\": \"owner\"}]}' |
    mwp submit --server http://127.0.0.1:7878 --key alice.key --org acme --group g1 --actor alice -
  mwp submit --key bob.key --org acme --group g1 --actor bob --expect 1 claim.json
  (a lease may be written \"w1#1\": work w1's lease at epoch 1; settings may come from
   MWP_SERVER, MWP_KEY, MWP_ORG, MWP_GROUP, MWP_ACTOR, MWP_TOKEN)")]
    Submit(client::submit::SubmitArgs),
    /// Follow a group's live tail, reconnecting with Last-Event-ID; a gap is an error (exit 1).
    #[command(after_help = "Examples:
  mwp tail --server http://127.0.0.1:7878 --group g1
  mwp tail --group g1 --after 40 --until 50 --json")]
    Tail(client::tail::TailArgs),
    /// List the groups and their head seqs, from a server or a store.
    #[command(after_help = "Examples:
  mwp groups --server http://127.0.0.1:7878 --token \"$READ_TOKEN\"
  mwp groups --data ./mwp-data")]
    Groups(client::groups::GroupsArgs),
    /// Download a group's history, check its chain with a replica and its latest signed
    /// snapshot, and print a report. Exit 1 on any mismatch.
    #[command(after_help = "Examples:
  mwp verify --server http://127.0.0.1:7878 --group g1
  mwp verify --data ./mwp-data --group g1 --authority-key 3b6a27bc…
  mwp verify --source https://cdn.example/g1 --group g1 --authority-key 3b6a27bc…")]
    Verify(client::verify::VerifyArgs),
    /// Write a group's history as a static export (content-addressed chunks, snapshots and
    /// index, and `head.json`) that any static file host or CDN can serve; run again, it
    /// adds only what is new. Exit 1 if the export in DIR is damaged.
    #[command(after_help = "Examples:
  mwp export --data ./mwp-data --group g1 --out ./site/g1
  mwp export --server http://127.0.0.1:7878 --group g1 --out ./site/g1
  mwp verify --source https://cdn.example/g1 --group g1 --authority-key 3b6a27bc…")]
    Export(export::ExportArgs),
    /// Check a fork proof file: exit 0 if it proves the authority signed two histories of
    /// one group, 1 if it does not, 2 if the file cannot be read.
    VerifyProof {
        /// The proof file (canonical CBOR, as `mwp verify` writes it).
        file: PathBuf,
        /// The authority's public key, 64 hex digits: the proof must be about this key.
        #[arg(long, value_name = "HEX")]
        authority_key: Option<String>,
        /// How to print.
        #[command(flatten)]
        output: client::OutputArgs,
    },
    /// Sealed audit logs of archived groups (SPEC §6a): open, verify, expire.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Print a shell completion script.
    #[command(after_help = "Examples:
  mwp completions bash > ~/.local/share/bash-completion/completions/mwp
  mwp completions zsh > \"${fpath[1]}/_mwp\"
  mwp completions fish > ~/.config/fish/completions/mwp.fish")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `mwp serve` arguments.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where the data is.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "MWP_ADDR", default_value = "127.0.0.1:7878")]
    pub addr: SocketAddr,
    /// Serve only the latest N events of each group online; older cursors get
    /// CURSOR_TOO_OLD with a signed snapshot to restore from.
    #[arg(long, value_name = "N")]
    pub online_events: Option<u64>,
    /// The Organization policy file (docs/format.md, "Organization policy"): groups of the
    /// orgs it names are sealed into an encrypted audit log when archived. Without it every
    /// archived group keeps its history in the clear.
    #[arg(long, env = "MWP_ORG_POLICY", value_name = "FILE")]
    pub org_policy: Option<PathBuf>,
    /// Serve the dashboard from this directory instead of the one built into mwp (for
    /// dashboard development: `js/dashboard` after scripts/build-wasm.sh).
    #[arg(long, value_name = "DIR")]
    pub dashboard: Option<PathBuf>,
    /// Allow browsers on ORIGIN (e.g. `https://ops.example`) to read answers (CORS);
    /// repeatable. Without it CORS is off.
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    pub cors_origins: Vec<String>,
    /// A name (with or without `:PORT`) the server is reached by besides its bound address,
    /// e.g. behind a reverse proxy; repeatable. Any other `Host` header is answered 421.
    #[arg(long = "public-host", value_name = "NAME")]
    pub public_hosts: Vec<String>,
    /// Seconds a connection has to send its request headers (and the longest a keep-alive
    /// connection may idle) before it is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_timeout: u64,
    /// Seconds a request has to send its whole body once its head has arrived; then it is
    /// answered 400 (MALFORMED) and its connection closed. At most 20: the whole request
    /// has 30 s.
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=20))]
    pub body_timeout: u64,
    /// Most connections open at once; more wait in the kernel's backlog.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// Most live tails (`…/events/stream`) on the server at once; more are answered 429.
    #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub max_tails: u64,
    /// Most live tails on one group at once; more are answered 429.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub max_tails_per_group: u64,
    /// Most groups the server holds; opening another is refused (NOT_PERMITTED). No limit
    /// unless given.
    #[arg(long, value_name = "N")]
    pub max_groups: Option<u64>,
    /// Operator tokens: a file of `read TOKEN` / `admin TOKEN` lines that only its owner may
    /// read (mode 0600). Reads then need a token or a member's signature.
    #[arg(long, env = "MWP_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Let anyone read and list every group without a credential (the default on a loopback
    /// address without --token-file).
    #[arg(long)]
    pub public_read: bool,
    /// Who may create groups: `any`, or `token` (an admin token). Default: `any` on a
    /// loopback address, `token` elsewhere.
    #[arg(long, value_enum, value_name = "WHO")]
    pub open_groups: Option<crate::server::auth::OpenGroups>,
    /// Serve a store whose authority key is a transcript key (one anyone can derive, as
    /// `mwp transcript --data DIR` writes): for tests only.
    #[arg(long)]
    pub allow_test_key: bool,
    /// PostgreSQL: the authority's secret key from FILE (64 hex digits, mode 0600); the
    /// database then holds only its public key.
    #[arg(long, value_name = "FILE")]
    pub authority_key_file: Option<PathBuf>,
    /// Log lines as `text` (for people) or `json` (one JSON object a line, for collectors).
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        env = "MWP_LOG_FORMAT",
        default_value = "text"
    )]
    pub log_format: LogFormat,
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object a line (`timestamp`, `level`, `fields`, `target`, …).
    Json,
}

impl LogFormat {
    /// `MWP_LOG_FORMAT` (`json` or `text`), text when unset or unknown.
    pub fn from_env() -> LogFormat {
        match std::env::var("MWP_LOG_FORMAT") {
            Ok(v) if v.eq_ignore_ascii_case("json") => LogFormat::Json,
            _ => LogFormat::Text,
        }
    }
}

/// Sets up logging to stderr: `MWP_LOG` if set (e.g. `debug`, `mwp_host=debug,info`), else
/// `default`.
pub fn init_logging(default: &str) {
    init_logging_as(default, LogFormat::from_env());
}

/// [`init_logging`] in the given format.
pub fn init_logging_as(default: &str, format: LogFormat) {
    use std::str::FromStr;
    let spec = std::env::var("MWP_LOG").unwrap_or_else(|_| default.to_owned());
    let filter = tracing_subscriber::filter::Targets::from_str(&spec).unwrap_or_else(|_| {
        tracing_subscriber::filter::Targets::new().with_default(tracing::Level::INFO)
    });
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let (text, json) = match format {
        LogFormat::Text => (
            Some(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
            ),
            None,
        ),
        LogFormat::Json => (
            None,
            Some(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::stderr),
            ),
        ),
    };
    let _ = tracing_subscriber::registry()
        .with(text)
        .with(json)
        .with(filter)
        .try_init();
}

/// A multi-threaded runtime for the server, the demo and the benchmark.
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            Failure::new(
                EXIT_UNAVAILABLE,
                format!("cannot start the async runtime: {e}"),
            )
        })
}

fn serve(args: ServeArgs) -> Outcome {
    use crate::server::auth::{Access, Tokens};
    init_logging_as("info", args.log_format);
    let url = args.store.url_or_env(StoreUrl::Memory)?;
    let authority_key = match &args.authority_key_file {
        None => None,
        Some(_) if matches!(url, StoreUrl::File(_)) => {
            return Err(Failure::new(
                EXIT_BAD_INPUT,
                "--authority-key-file is for PostgreSQL stores; a file store keeps its key in DIR/authority.key",
            ))
        }
        Some(path) => Some(
            crate::server::key::load_protected(path)
                .map_err(|e| Failure::new(EXIT_BAD_INPUT, e.message))?,
        ),
    };
    let org_policy = load_org_policy(args.org_policy.as_deref())?;
    let tokens = match &args.token_file {
        Some(path) => Tokens::load(path).map_err(|e| Failure::new(EXIT_BAD_INPUT, e))?,
        None => Tokens::default(),
    };
    let service = store::open(
        &url,
        &store::Options {
            online_events: args.online_events,
            create: true,
            authority_key,
            read_only: false,
            org_policy: org_policy.clone(),
        },
    )?;
    if !args.allow_test_key {
        if let Some(actor) = crate::server::key::transcript_actor(&service.authority_key()) {
            return Err(Failure::new(
                EXIT_BAD_INPUT,
                format!(
                    "the store {url} is signed by the transcript key of {actor}, which anyone can derive (SPEC §12); serve it only for tests, with --allow-test-key"
                ),
            ));
        }
    }
    for origin in &args.cors_origins {
        crate::server::check_origin(origin)
            .map_err(|e| Failure::new(EXIT_BAD_INPUT, format!("--cors-origin: {e}")))?;
    }
    for name in &args.public_hosts {
        crate::server::check_public_host(name)
            .map_err(|e| Failure::new(EXIT_BAD_INPUT, format!("--public-host: {e}")))?;
    }
    let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    let mut config = crate::server::ServerConfig {
        header_read_timeout: std::time::Duration::from_secs(args.header_timeout),
        body_read_timeout: std::time::Duration::from_secs(args.body_timeout),
        max_connections: size(args.max_connections),
        max_tails: size(args.max_tails),
        max_tails_per_group: size(args.max_tails_per_group),
        max_groups: args.max_groups,
        cors_origins: args.cors_origins,
        public_hosts: args.public_hosts,
        ..Default::default()
    };
    if let Some(dir) = args.dashboard {
        config.assets = crate::server::assets::Assets::Dir(dir);
    }
    config.access = Access::for_server(
        tokens,
        args.addr.ip().is_loopback(),
        args.public_read,
        args.open_groups,
    );
    let access = config.access.describe();
    let rt = runtime()?;
    rt.block_on(async move {
        let server = crate::server::Server::bind(service, args.addr, config)
            .await
            .map_err(|e| {
                Failure::new(
                    EXIT_UNAVAILABLE,
                    format!("cannot listen on {}: {e}", args.addr),
                )
            })?;
        // Listen for Ctrl-C before saying the server is up: whoever reads the line may stop
        // it at once.
        let signal = crate::server::ShutdownSignal::install().map_err(|e| {
            Failure::new(EXIT_UNAVAILABLE, format!("cannot listen for signals: {e}"))
        })?;
        eprintln!(
            "mwp: authority on http://{} (store {url}); {access}; Ctrl-C stops it",
            server.addr()
        );
        server.run_until(signal).await;
        Ok(EXIT_OK)
    })
}

/// Runs one parsed command line.
pub fn run(cli: Cli) -> Outcome {
    match cli.command {
        Command::Transcript { file, store } => {
            transcript::run(&file, &store.url_or(StoreUrl::Memory))
        }
        Command::Serve(args) => serve(args),
        Command::Replay {
            source,
            group,
            after,
        } => replay::run(&source, &group, after),
        Command::Replica {
            file,
            authority_key,
        } => replica::run(&file, authority_key.as_deref()),
        Command::Snapshot { store, group, out } => {
            snapshot::take(&store.required()?, &group, out.as_deref())
        }
        Command::VerifySnapshot {
            file,
            key,
            org,
            group,
            min_seq,
        } => snapshot::verify(&file, &key, &org, &group, min_seq),
        Command::Fsck { store } => store::fsck(&store.required()?),
        Command::Audit(cmd) => audit::run(cmd),
        Command::Demo(args) => demo::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Keygen(args) => client::keygen::run(&args),
        Command::Submit(args) => client::submit::run(&args),
        Command::Tail(args) => client::tail::run(&args),
        Command::Groups(args) => client::groups::run(&args),
        Command::Verify(args) => client::verify::run(&args),
        Command::Export(args) => export::run(&args),
        Command::VerifyProof {
            file,
            authority_key,
            output,
        } => verify_proof::run(&file, authority_key.as_deref(), &output),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "mwp", &mut std::io::stdout());
            Ok(EXIT_OK)
        }
    }
}

/// The `mwp` binary: parses the command line, runs it, and turns the outcome into an exit
/// code (messages go to stderr).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            // Control characters escaped: a message may quote what a server or a file said.
            eprintln!(
                "mwp: {}",
                crate::server::client::printable(&f.message, usize::MAX)
            );
            ExitCode::from(f.exit)
        }
    }
}

/// Reads `--org-policy FILE` and says at start what it means (SPEC §6a).
fn load_org_policy(
    path: Option<&std::path::Path>,
) -> Result<Option<std::sync::Arc<mwp_core::audit::OrgPolicies>>, Failure> {
    let Some(path) = path else {
        tracing::info!(
            "no --org-policy: archived groups keep their history in the clear (SPEC §6a)"
        );
        return Ok(None);
    };
    let cannot = |e: String| {
        Failure::new(
            EXIT_BAD_INPUT,
            format!("cannot read the org policy {}: {e}", path.display()),
        )
    };
    let bytes = input::read(path, input::MAX_POLICY_BYTES).map_err(|e| cannot(e.to_string()))?;
    let text = input::text(&bytes).map_err(cannot)?;
    let policy = mwp_audit::load_policy(text)
        .map_err(|e| Failure::new(EXIT_BAD_INPUT, format!("{}: {}", path.display(), e.message)))?;
    let orgs: Vec<String> = policy.orgs.keys().map(|o| o.to_string()).collect();
    tracing::info!(
        orgs = %orgs.join(","),
        "org policy {}: groups of these orgs are sealed when archived; groups of other orgs keep their history in the clear",
        path.display()
    );
    Ok(Some(std::sync::Arc::new(policy)))
}
