//! `mwp demo`: the whole job on an embedded default.
//!
//! It starts an authority (`mwp serve` in-process, on the file store in its data folder, so
//! `mwp serve --data DIR` serves the result again) and runs five agents against it over
//! HTTP, through a mission with dependencies:
//!
//! ```text
//! fetch ──▶ clean ──┬──▶ train ──┬──▶ notify
//!                   └──▶ report ─┘
//! ```
//!
//! * `fetch`: ada checkpoints half-way (the lease is released), claims again and finishes;
//!   the answer to her submit is lost, her driver sends it again, and it lands once.
//! * `clean`: ben's first attempt fails (retryable); the retry waits out its backoff.
//! * `train`: cy crashes mid-run; restarted from its journal, it replaces its session
//!   (revoking the old lease), claims again and resumes from its last checkpoint.
//! * `report`: ada stalls past her lease; the authority's tick expires it, ben takes over
//!   and finishes, and ada's late result is recorded as evidence, not as the outcome.
//! * `notify`: ben records the intent of an undeclared effect (an email), sends it, and
//!   crashes before recording the outcome; when the lease expires the work waits on the
//!   unknown effect until rex reconciles it (it did happen), and cy finishes without sending
//!   it again.
//!
//! Then olivia archives the group, and the final signed snapshot is checked against the
//! authority's key and against a fresh replica rebuilt from the log over HTTP.
//!
//! ada, ben and cy are agents of the core's driver ([`mwp_core::agent::Agent`]) hosted by
//! [`HttpAgent`]: the driver claims, starts, renews, resends, looks receipts up, dispatches
//! effects and keeps its replica; each write set it produces is committed to the agent's
//! journal in `DATA/agents/<group>/<name>.journal` before anything follows from it, and a
//! restart reopens the agent from that journal. The story decides only what an application
//! would: when an agent takes work (its capacity), and its submits, failures, checkpoints,
//! charges and effects. olivia (the owner) and rex (the reviewer) act by hand ([`Admin`]):
//! opening the group, creating work, reconciling an effect and archiving are not an agent's
//! job.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use mwp_core::agent::{Agent, Config, Dispatch, Notice};
use mwp_core::command::{
    Archive, Contract, CreateWork, EffectMode, MemberSpec, NewWork, OpenGroup, ReconcileEffect,
    Risk, Role,
};
use mwp_core::replica::{Offer, Replica};
use mwp_core::snapshot::Snapshot;
use mwp_core::work::{EffectStatus, WorkItem};
use mwp_core::{
    Body, Command, Disposition, EventKind, GroupState, Hash, Id, PublicKey, SecretKey, WorkState,
};
use serde::Serialize;
use serde_json::{json, Value};

use crate::agent_host::{HttpAgent, Observed};
use crate::cli::{Failure, Outcome, EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE};
use crate::memory_service::random_key;
use crate::server::client::{Client, Submitted};
use crate::server::{now_ms, Server, ServerConfig};
use crate::service::AuthorityService;
use crate::store::{FileStore, StoreOptions};

mod cast;
mod mission;

pub use cast::{Admin, Story};
pub use mission::mission;
use mission::STEPS;

/// `mwp demo` arguments.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Stop when the mission is done instead of serving until Ctrl-C.
    #[arg(long)]
    pub exit: bool,
    /// Address to serve on; when it is taken, a free port is used instead.
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub addr: SocketAddr,
    /// Data folder of the demo (created if missing).
    #[arg(long, value_name = "DIR", default_value = "mwp-demo-data")]
    pub data: PathBuf,
    /// Print the summary as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A demo step that went wrong.
type Step<T> = Result<T, String>;

fn err(context: &str) -> impl Fn(mwp_core::Error) -> String + '_ {
    move |e| format!("{context}: {e}")
}

fn id(s: &str) -> Id {
    Id::new(s).expect("demo identifiers are literals from the allowed alphabet")
}

/// Longest wait for something the authority does on its own (a tick).
const WAIT_LIMIT: Duration = Duration::from_secs(30);
/// Lease of ordinary work.
const LEASE_MS: u64 = 30_000;
/// Lease of the work whose lease is meant to expire.
const SHORT_LEASE_MS: u64 = 1_000;

/// What the demo reports at the end.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The group the mission ran in.
    pub group: Id,
    /// Events in its log.
    pub events: u64,
    /// Receipts the authority holds (one per accepted command).
    pub receipts: usize,
    /// Commands sent again that were answered with their original receipt.
    pub duplicates: usize,
    /// Ownership epochs per work item (one per claim).
    pub epochs: BTreeMap<String, u64>,
    /// Late results recorded as evidence.
    pub evidence: usize,
    /// Effects recorded, as `work/op: status`.
    pub effects: Vec<String>,
    /// Final work states.
    pub work: BTreeMap<String, String>,
    /// The final signed snapshot.
    pub snapshot: SnapshotCheck,
    /// Where the dashboard is.
    pub dashboard: String,
    /// What the planner did.
    pub planner: PlannerCheck,
    /// The sealed audit log of the archived group (SPEC §6a).
    pub audit: Option<AuditCheck>,
}

/// The archived group's sealed audit log, opened again with the demo org's identity.
#[derive(Debug, Clone, Serialize)]
pub struct AuditCheck {
    /// The artifact.
    pub artifact: PathBuf,
    /// The demo org's identity file (mode 0600), beside the data.
    pub identity: PathBuf,
    /// Whether it opened with that identity, verified, and replayed to the group's state.
    pub opened: bool,
    /// The command that opens it.
    pub command: String,
}

/// The planner's part: the graph grown from outcomes.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PlannerCheck {
    /// Each expansion that created items, with its trigger.
    pub expansions: Vec<String>,
    /// Outcomes disposed of with the empty disposition.
    pub empty: usize,
    /// `expand` events for fetch's outcome: one, though the planner crashed before answering.
    pub fetch_expands: usize,
    /// Times the planner was restarted between an outcome and its disposition.
    pub restarts: usize,
}

/// The check of the final snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotCheck {
    /// Its seq.
    pub seq: u64,
    /// Its state hash.
    pub state_hash: Hash,
    /// The key that signed it.
    pub signer: PublicKey,
    /// Whether it verified under the authority's key (schema, hash, signature, binding).
    pub verified: bool,
    /// Whether a fresh replica rebuilt from the log reached the same state hash.
    pub replica_agrees: bool,
}

impl Summary {
    /// Whether the run proved what it set out to.
    pub fn ok(&self) -> bool {
        self.snapshot.verified
            && self.snapshot.replica_agrees
            && self.planner.fetch_expands == 1
            && self.audit.as_ref().is_some_and(|a| a.opened)
    }

    fn render(&self) -> String {
        let epochs = self
            .epochs
            .iter()
            .map(|(w, e)| format!("{w} {e}"))
            .collect::<Vec<_>>()
            .join(" · ");
        let work = self
            .work
            .iter()
            .map(|(w, s)| format!("{w} {s}"))
            .collect::<Vec<_>>()
            .join(" · ");
        let verdict = if self.ok() {
            "verified"
        } else {
            "NOT VERIFIED"
        };
        format!(
            "mission finished in group {group}\n\
             \x20 events     {events} (hash-chained, seq 1..{events})\n\
             \x20 receipts   {receipts} ({dups} retried command(s) answered with their original receipt)\n\
             \x20 work       {work}\n\
             \x20 epochs     {epochs}\n\
             \x20 evidence   {evidence} late result(s) recorded without changing the outcome\n\
             \x20 effects    {effects}\n\
             \x20 planner    {expansions}; {empty} empty disposition(s); fetch's outcome disposed of {fetch} time(s) after {restarts} planner crash(es)\n\
             \x20 snapshot   seq {seq}, state {hash}, signed by {signer}: {verdict}{agree}\n\
             \x20 audit log  {audit}\n\
             dashboard: {dashboard}",
            group = self.group,
            events = self.events,
            receipts = self.receipts,
            dups = self.duplicates,
            evidence = self.evidence,
            effects = self.effects.join("; "),
            expansions = self.planner.expansions.join("; "),
            empty = self.planner.empty,
            fetch = self.planner.fetch_expands,
            restarts = self.planner.restarts,
            seq = self.snapshot.seq,
            hash = self.snapshot.state_hash,
            signer = self.snapshot.signer,
            agree = if self.snapshot.replica_agrees {
                "; a fresh replica of the log agrees"
            } else {
                "; a fresh replica of the log DISAGREES"
            },
            dashboard = self.dashboard,
            audit = match &self.audit {
                Some(a) if a.opened => format!(
                    "sealed for the demo org and opened again: {}",
                    a.command
                ),
                Some(a) => format!("sealed, but it did NOT open: {}", a.command),
                None => "NOT sealed".to_owned(),
            },
        )
    }
}

/// Creates a directory and its missing parents, mode 0700 (the demo's data is a file store).
fn private_dirs(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The demo org's identity file: `DATA/demo-org.key` (mode 0600), made on the first run.
const DEMO_IDENTITY: &str = "demo-org.key";

/// Reads or makes the demo org's identity and the policy that seals `acme`'s archived
/// groups to it (the plain history kept, the artifact retained a year).
fn demo_org_policy(data: &Path) -> Result<(PathBuf, mwp_core::audit::OrgPolicies), Failure> {
    let path = data.join(DEMO_IDENTITY);
    let unavailable = |e: std::io::Error| {
        Failure::new(
            EXIT_UNAVAILABLE,
            format!("cannot write the demo org key {}: {e}", path.display()),
        )
    };
    if !path.exists() {
        use std::os::unix::fs::OpenOptionsExt;
        let (text, _) = mwp_audit::generate_identity();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(unavailable)?;
        std::io::Write::write_all(&mut f, text.as_bytes()).map_err(unavailable)?;
        f.sync_all().map_err(unavailable)?;
    }
    let bad = |m: String| Failure::new(crate::cli::EXIT_BAD_INPUT, m);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        bad(format!(
            "cannot read the demo org key {}: {e}",
            path.display()
        ))
    })?;
    let ids = mwp_audit::parse_identities(&text)
        .map_err(|e| bad(format!("{}: {}", path.display(), e.message)))?;
    let mut policy = mwp_core::audit::OrgPolicies {
        schema: mwp_core::audit::POLICY_SCHEMA.to_owned(),
        ..Default::default()
    };
    policy.orgs.insert(
        id("acme"),
        mwp_core::audit::OrgPolicy {
            recipients: ids.iter().map(mwp_audit::recipient_of).collect(),
            retain_days: 365,
            remove_plain: false,
        },
    );
    Ok((path, policy))
}

/// Opens the archived group's sealed audit log again with the demo org's identity: it must
/// verify and replay to the state the mission ended in.
fn check_audit(
    store: &FileStore,
    data: &Path,
    identity: &Path,
    summary: &Summary,
) -> Option<AuditCheck> {
    let artifact = store.audit_artifact(&summary.group).ok()??;
    let path = data
        .join(crate::store::format::GROUPS_DIR)
        .join(mwp_core::log_format::group_dir_name(&summary.group))
        .join(mwp_core::audit::ARTIFACT_NAME);
    let opened = std::fs::read_to_string(identity)
        .ok()
        .and_then(|t| mwp_audit::parse_identities(&t).ok())
        .and_then(|ids| mwp_audit::open(&artifact, &ids, Some(&summary.snapshot.signer)).ok())
        .is_some_and(|log| log.state_hash == summary.snapshot.state_hash);
    Some(AuditCheck {
        command: format!(
            "mwp audit open {} --identity {}",
            path.display(),
            identity.display()
        ),
        artifact: path,
        identity: identity.to_path_buf(),
        opened,
    })
}

/// Runs `mwp demo`.
pub fn run(args: DemoArgs) -> Outcome {
    crate::cli::init_logging("warn");
    private_dirs(&args.data).map_err(|e| {
        Failure::new(
            EXIT_UNAVAILABLE,
            format!("cannot create the demo folder {}: {e}", args.data.display()),
        )
    })?;
    // The demo org's audit identity, beside the data: archived groups of `acme` are sealed
    // to it (SPEC §6a).
    let (identity, org_policy) = demo_org_policy(&args.data)?;
    // The durable file store in the demo's folder (its key in DATA/authority.key): `mwp serve
    // --data DIR` serves the demo's groups afterwards, and each run adds a group.
    let store = Arc::new(
        FileStore::open(
            &args.data,
            StoreOptions {
                org_policy: Some(Arc::new(org_policy)),
                ..StoreOptions::default()
            },
        )
        .map_err(|e| {
            Failure::from_error(
                &format!("cannot open the demo's data folder {}", args.data.display()),
                &e,
            )
        })?,
    );
    let service: Arc<dyn AuthorityService> = store.clone();
    let rt = crate::cli::runtime()?;
    let server = rt.block_on(async {
        match Server::bind(service.clone(), args.addr, ServerConfig::default()).await {
            Ok(s) => Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                let any = SocketAddr::new(args.addr.ip(), 0);
                eprintln!("mwp: {} is taken; using a free port", args.addr);
                Server::bind(service, any, ServerConfig::default()).await
            }
            Err(e) => Err(e),
        }
    });
    let server = server.map_err(|e| {
        Failure::new(
            EXIT_UNAVAILABLE,
            format!("cannot listen on {}: {e}", args.addr),
        )
    })?;
    let base = format!("http://{}", server.addr());
    eprintln!(
        "mwp demo: authority on {base}, data in {}",
        args.data.display()
    );
    let story = Story::new(STEPS);
    let result = mission(&base, &args.data, &story).map(|mut summary| {
        summary.audit = check_audit(&store, &args.data, &identity, &summary);
        summary
    });
    story.finish();
    let code = match result {
        Ok(summary) => {
            if args.json {
                println!("{}", serde_json::to_string(&summary).unwrap_or_default());
            } else {
                println!("{}", summary.render());
            }
            if summary.ok() {
                EXIT_OK
            } else {
                EXIT_FAILED
            }
        }
        Err(e) => {
            eprintln!("mwp demo: the mission stopped: {e}");
            EXIT_FAILED
        }
    };
    if args.exit {
        rt.block_on(server.shutdown());
        eprintln!(
            "mwp demo: stopped; `mwp serve --data {}` serves its groups and the dashboard again",
            args.data.display()
        );
    } else {
        let signal = rt.block_on(async { crate::server::ShutdownSignal::install() });
        eprintln!("mwp demo: serving the dashboard at {base}/ until Ctrl-C");
        match signal {
            Ok(signal) => rt.block_on(server.run_until(signal)),
            Err(_) => rt.block_on(server.run_until_signal()),
        }
    }
    Ok(code)
}
