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
    Archive, Contract, CreateWork, EffectMode, MemberSpec, OpenGroup, ReconcileEffect, Risk, Role,
};
use mwp_core::replica::{Offer, Replica};
use mwp_core::snapshot::Snapshot;
use mwp_core::work::{EffectStatus, WorkItem};
use mwp_core::{Body, Command, Disposition, GroupState, Hash, Id, PublicKey, SecretKey, WorkState};
use serde::Serialize;
use serde_json::{json, Value};

use crate::agent_host::{HttpAgent, Observed};
use crate::cli::{Failure, Outcome, EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE};
use crate::memory_service::random_key;
use crate::server::client::{Client, Submitted};
use crate::server::{now_ms, Server, ServerConfig};
use crate::service::AuthorityService;
use crate::store::{FileStore, StoreOptions};

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

/// Narrates the demo: a progress bar on a terminal, plain lines otherwise (stderr).
#[derive(Clone)]
pub struct Story {
    bar: ProgressBar,
}

impl Story {
    fn new(steps: u64) -> Self {
        let bar = ProgressBar::new(steps);
        let style = ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(120));
        Story { bar }
    }

    /// Records one step: who did what.
    fn step(&self, who: &str, what: &str) {
        let line = format!("{who:>6}  {what}");
        self.bar.suspend(|| eprintln!("{line}"));
        self.bar.set_message(line);
        self.bar.inc(1);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// A member acting by hand (olivia the owner, rex the reviewer): commands it signs and sends
/// directly, and a replica of the group it keeps up to date from the event log. The workers
/// are agents of the core's driver instead ([`HttpAgent`]).
pub struct Admin {
    name: Id,
    key: SecretKey,
    org: Id,
    group: Id,
    client: Client,
    replica: Replica,
    sent: u64,
}

impl Admin {
    /// A member with its key, at session 1, with an empty replica.
    pub fn new(name: &str, key: SecretKey, org: &Id, group: &Id, base: &str) -> Self {
        Admin {
            name: id(name),
            key,
            org: org.clone(),
            group: group.clone(),
            client: Client::new(base),
            replica: Replica::new(group.clone()),
            sent: 0,
        }
    }

    /// Signs a command with a fresh action ID and sends it; a rejection is an error naming
    /// the command.
    pub fn send(&mut self, body: Body) -> Step<Submitted> {
        let kind = body.type_name();
        self.sent += 1;
        let action = Id::new(format!("{}-{}", self.name, self.sent)).map_err(|e| e.to_string())?;
        let cmd = Command::signed(
            self.org.clone(),
            self.group.clone(),
            self.name.clone(),
            action,
            1,
            None,
            body,
            &self.key,
        )
        .map_err(|e| e.to_string())?;
        self.client
            .submit(&cmd)
            .map_err(|e| format!("{} {kind}: {e}", self.name))
    }

    /// Brings the replica up to the authority's head.
    pub fn sync(&mut self) -> Step<()> {
        loop {
            let events = self
                .client
                .events(&self.group, self.replica.cursor(), 500)
                .map_err(err("reading events"))?;
            if events.is_empty() {
                return Ok(());
            }
            for e in events {
                if let Offer::Rejected(e) = self.replica.offer(e) {
                    return Err(format!("{}'s replica rejected an event: {e}", self.name));
                }
            }
        }
    }

    fn state(&mut self) -> Step<&GroupState> {
        self.sync()?;
        self.replica
            .state()
            .ok_or_else(|| "the group is not open".to_owned())
    }

    fn item(&mut self, work: &str) -> Step<WorkItem> {
        self.state()?
            .work
            .get(work)
            .cloned()
            .ok_or_else(|| format!("work {work} does not exist"))
    }

    /// Waits (bounded) until `done` holds of the group's state.
    fn wait_for(&mut self, what: &str, done: impl Fn(&GroupState) -> bool) -> Step<()> {
        let until = Instant::now() + WAIT_LIMIT;
        loop {
            if done(self.state()?) {
                return Ok(());
            }
            if Instant::now() > until {
                return Err(format!("{} waited {WAIT_LIMIT:?} for {what}", self.name));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A worker's effects: none (only ben sends an email, with his own function).
fn no_effects(_: &Dispatch) -> Observed {
    None
}

/// A worker: its host, and the notices it has not looked at yet.
struct Worker {
    name: &'static str,
    host: HttpAgent,
    inbox: Vec<Notice>,
}

impl Worker {
    fn agent_mut(&mut self) -> &mut Agent {
        self.host.agent_mut()
    }

    /// Pumps the agent — performing its effects with `effect` — until `done`, given the
    /// agent and the notices not taken yet, returns something (taking the notices it used);
    /// bounded by [`WAIT_LIMIT`]. A command the authority rejects (other than a claim that
    /// lost a race) or a corrupt delivery stops the demo.
    fn until<T>(
        &mut self,
        what: &str,
        effect: &mut dyn FnMut(&Dispatch) -> Observed,
        mut done: impl FnMut(&HttpAgent, &mut Vec<Notice>) -> Option<T>,
    ) -> Step<T> {
        let name = self.name;
        let limit = Instant::now() + WAIT_LIMIT;
        loop {
            let now = now_ms();
            let notices = self
                .host
                .pump(now, effect)
                .map_err(|e| format!("{name}'s host stopped: {e}"))?;
            for n in &notices {
                match n {
                    Notice::Rejected { command, .. } if *command == "claim_work" => {}
                    Notice::Rejected { command, error, .. } => {
                        return Err(format!("{name}'s {command} was rejected: {error}"))
                    }
                    Notice::Corrupt(e) => {
                        return Err(format!("{name} got a corrupt delivery: {e}"))
                    }
                    _ => {}
                }
            }
            self.inbox.extend(notices);
            if let Some(t) = done(&self.host, &mut self.inbox) {
                return Ok(t);
            }
            if Instant::now() > limit {
                return Err(format!("{name} waited {WAIT_LIMIT:?} for {what}"));
            }
            // Sleep until the driver's next deadline, but look again soon: the authority
            // acts on its own too (ticks, other agents).
            let wake = self.host.agent().poll_timeout().unwrap_or(u64::MAX);
            let nap = wake.saturating_sub(now_ms()).clamp(5, 50);
            std::thread::sleep(Duration::from_millis(nap));
        }
    }
}

/// Takes the `Run` notice for `work` from `inbox`, if there is one.
fn run_of(inbox: &mut Vec<Notice>, work: &str) -> Option<Run> {
    let at = inbox
        .iter()
        .position(|n| matches!(n, Notice::Run { work: w, .. } if w.as_str() == work))?;
    match inbox.remove(at) {
        Notice::Run {
            epoch, checkpoint, ..
        } => Some(Run {
            epoch,
            resumed_from: checkpoint.map(|c| c.data),
        }),
        _ => None,
    }
}

/// What a `Run` notice says.
struct Run {
    epoch: u64,
    resumed_from: Option<Value>,
}

impl Run {
    fn from(&self) -> String {
        self.resumed_from
            .as_ref()
            .map_or_else(|| "the start".to_owned(), Value::to_string)
    }
}

/// Takes the `Released` notice for `work` from `inbox`, if there is one.
fn released(inbox: &mut Vec<Notice>, work: &str) -> bool {
    let at = inbox
        .iter()
        .position(|n| matches!(n, Notice::Released { work: w, .. } if w.as_str() == work));
    at.map(|i| inbox.remove(i)).is_some()
}

/// `work` as the agent's replica has it.
fn item_of(agent: &HttpAgent, work: &str) -> Option<WorkItem> {
    agent.agent().replica().state()?.work.get(work).cloned()
}

fn contract(max_attempts: u32) -> Contract {
    Contract {
        max_attempts,
        backoff_base_ms: 300,
        backoff_max_ms: 2_000,
        cost_budget: 100,
        deadline_at: None,
        risk: Risk::Low,
    }
}

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
        self.snapshot.verified && self.snapshot.replica_agrees
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
             \x20 snapshot   seq {seq}, state {hash}, signed by {signer}: {verdict}{agree}\n\
             dashboard: {dashboard}",
            group = self.group,
            events = self.events,
            receipts = self.receipts,
            dups = self.duplicates,
            evidence = self.evidence,
            effects = self.effects.join("; "),
            seq = self.snapshot.seq,
            hash = self.snapshot.state_hash,
            signer = self.snapshot.signer,
            agree = if self.snapshot.replica_agrees {
                "; a fresh replica of the log agrees"
            } else {
                "; a fresh replica of the log DISAGREES"
            },
            dashboard = self.dashboard,
        )
    }
}

/// The roster: name, role, key.
struct Roster {
    keys: BTreeMap<&'static str, SecretKey>,
}

const MEMBERS: [(&str, Role); 5] = [
    ("olivia", Role::Owner),
    ("ada", Role::Worker),
    ("ben", Role::Worker),
    ("cy", Role::Worker),
    ("rex", Role::Reviewer),
];

impl Roster {
    fn new() -> Step<Roster> {
        let keys = MEMBERS
            .iter()
            .map(|(n, _)| random_key().map(|k| (*n, k)))
            .collect::<mwp_core::Result<_>>()
            .map_err(|e| e.to_string())?;
        Ok(Roster { keys })
    }

    fn key(&self, name: &str) -> SecretKey {
        self.keys
            .get(name)
            .cloned()
            .expect("every member is in MEMBERS")
    }
}

/// Where the mission runs, and how its agents are opened.
struct Crew<'a> {
    base: &'a str,
    org: Id,
    group: Id,
    authority: PublicKey,
    roster: Roster,
    /// Folder of the agents' journals (`DATA/agents/<group>`).
    journals: PathBuf,
}

impl Crew<'_> {
    fn admin(&self, name: &str) -> Admin {
        Admin::new(
            name,
            self.roster.key(name),
            &self.org,
            &self.group,
            self.base,
        )
    }

    /// Opens (or, after a crash, reopens from its journal) the worker `name`. It claims
    /// nothing until its capacity is raised: the story says who takes which work.
    fn worker(&self, name: &'static str) -> Step<Worker> {
        let mut config = Config::new(
            self.org.clone(),
            self.group.clone(),
            id(name),
            self.authority,
        );
        config.capacity = 0;
        config.lease_ms = LEASE_MS;
        // Fits a short lease too; the driver starts what it claims at once anyway.
        config.start_within_ms = SHORT_LEASE_MS;
        // Renew late enough that a short lease is not renewed the moment it starts.
        config.renew_margin_ms = 300;
        // The whole mission takes seconds: look for news and resend quickly.
        config.resend_ms = 250;
        config.sync_ms = 250;
        let path = self.journals.join(format!("{name}.journal"));
        let host = HttpAgent::open(config, self.roster.key(name), self.base, &path)
            .map_err(|e| format!("cannot open {name}'s journal {}: {e}", path.display()))?;
        Ok(Worker {
            name,
            host,
            inbox: Vec::new(),
        })
    }
}

/// Steps the story counts (for the progress bar).
const STEPS: u64 = 33;

/// Runs the mission against the server at `base`, keeping the agents' journals under
/// `data`; returns the summary.
pub fn mission(base: &str, data: &Path, story: &Story) -> Step<Summary> {
    let client = Client::new(base);
    let authority = client
        .authority_key()
        .map_err(err("reading the authority key"))?;
    let n = client.groups().map_err(err("listing groups"))?.len() + 1;
    let org = id("acme");
    let group = Id::new(format!("launch-{n}")).map_err(|e| e.to_string())?;
    let journals = data.join("agents").join(group.as_str());
    // A journal left by an earlier demo whose group never opened is not this agent's.
    let _ = std::fs::remove_dir_all(&journals);
    private_dirs(&journals).map_err(|e| format!("cannot create {}: {e}", journals.display()))?;
    let crew = Crew {
        base,
        org: org.clone(),
        group: group.clone(),
        authority,
        roster: Roster::new()?,
        journals,
    };
    let mut olivia = crew.admin("olivia");
    let mut rex = crew.admin("rex");
    let mut ada = crew.worker("ada")?;
    let mut ben = crew.worker("ben")?;
    let mut cy = crew.worker("cy")?;
    let mut fx = no_effects;
    // Duplicates counted by agents that crashed.
    let mut duplicates = 0;

    // Genesis and the work graph.
    let members = MEMBERS
        .iter()
        .map(|(name, role)| MemberSpec {
            actor: id(name),
            role: *role,
            key: crew.roster.key(name).public(),
        })
        .collect();
    olivia.send(Body::OpenGroup(OpenGroup {
        mission: id("launch"),
        title: json!("Launch the new pricing page"),
        members,
        authority_key: authority,
    }))?;
    story.step(
        "olivia",
        &format!("opens group {group} with ada, ben, cy (workers) and rex (reviewer)"),
    );
    let graph: [(&str, &[&str], &str); 5] = [
        ("fetch", &[], "fetch last quarter's sales"),
        ("clean", &["fetch"], "clean the data"),
        ("train", &["clean"], "fit the price model"),
        ("report", &["clean"], "write the report"),
        ("notify", &["train", "report"], "email the customers"),
    ];
    for (work, after, spec) in graph {
        olivia.send(Body::CreateWork(CreateWork {
            work: id(work),
            contract: contract(3),
            after: after.iter().map(|a| id(a)).collect(),
            spec: json!({ "task": spec }),
        }))?;
        story.step("olivia", &format!("creates {work} (after {after:?})"));
    }

    // fetch: a checkpoint, then a submit whose answer is lost, sent again, landing once.
    ada.agent_mut().set_capacity(1);
    ada.until("fetch to run", &mut fx, |_, n| run_of(n, "fetch"))?;
    story.step("ada", "claims and starts fetch");
    ada.agent_mut()
        .checkpoint(
            now_ms(),
            &id("fetch"),
            json!({"rows_fetched": 50_000, "next_page": 51}),
        )
        .map_err(err("ada checkpoint fetch"))?;
    ada.until("her checkpoint", &mut fx, |_, n| {
        released(n, "fetch").then_some(())
    })?;
    story.step(
        "ada",
        "checkpoints fetch at 50,000 rows (the lease is released)",
    );
    let run = ada.until("fetch to run again", &mut fx, |_, n| run_of(n, "fetch"))?;
    ada.agent_mut().set_capacity(0);
    story.step(
        "ada",
        &format!(
            "claims fetch again (epoch {}) and resumes from {}",
            run.epoch,
            run.from()
        ),
    );
    ada.host.lose_answers(1);
    ada.agent_mut()
        .submit(now_ms(), &id("fetch"), json!({"rows": 100_000}))
        .map_err(err("ada submit fetch"))?;
    let first = ada.until("her submit to be sent", &mut fx, |a, _| {
        a.lost().first().cloned()
    })?;
    story.step(
        "ada",
        &format!("submits fetch (seq {}), but the answer is lost", first.seq),
    );
    let again = ada.until("her submit to be answered", &mut fx, |a, _| {
        a.duplicates().first().cloned()
    })?;
    if again != first {
        return Err("a resent submit was not answered with its original receipt".into());
    }
    story.step(
        "ada",
        &format!(
            "her driver sends it again: Duplicate, same receipt (seq {}), nothing appended",
            again.seq
        ),
    );

    // clean: a retryable failure and a retry after the backoff.
    ben.agent_mut().set_capacity(1);
    ben.until("clean to run", &mut fx, |_, n| run_of(n, "clean"))?;
    story.step("ben", "claims and starts clean");
    ben.agent_mut()
        .fail(
            now_ms(),
            &id("clean"),
            json!({"error": "database timeout"}),
            true,
        )
        .map_err(err("ben fail clean"))?;
    let item = ben.until("his failure to land", &mut fx, |a, n| {
        released(n, "clean").then(|| item_of(a, "clean")).flatten()
    })?;
    story.step(
        "ben",
        &format!(
            "fails clean (retryable): attempt {} of {}, back in the queue after its backoff",
            item.attempts, item.contract.max_attempts
        ),
    );
    let run = ben.until("clean to run again", &mut fx, |_, n| run_of(n, "clean"))?;
    ben.agent_mut().set_capacity(0);
    ben.agent_mut()
        .submit(now_ms(), &id("clean"), json!({"rows": 98_412}))
        .map_err(err("ben submit clean"))?;
    ben.until("his submit to land", &mut fx, |_, n| {
        released(n, "clean").then_some(())
    })?;
    story.step(
        "ben",
        &format!(
            "retries clean after the backoff (epoch {}) and succeeds",
            run.epoch
        ),
    );

    // train and report run side by side: cy on train, ada on report. Both are ready; a
    // driver takes ready work in an order of its own (a hash of actor and work), which puts
    // train first for cy, so cy claims first and ada takes what is left.
    cy.agent_mut().set_capacity(1);
    cy.until("train to run", &mut fx, |_, n| run_of(n, "train"))?;
    story.step("cy", "claims and starts train");
    cy.agent_mut()
        .charge(
            now_ms(),
            &id("train"),
            30,
            Some(json!({"epochs_done": 6, "loss": "0.031"})),
        )
        .map_err(err("cy charge train"))?;
    cy.until("his charge to land", &mut fx, |a, _| {
        a.agent().outbox().is_empty().then_some(())
    })?;
    story.step(
        "cy",
        "charges 30 (GPU minutes) with a checkpoint after 6 epochs",
    );
    ada.agent_mut().set_lease_ms(SHORT_LEASE_MS);
    ada.agent_mut().set_capacity(1);
    ada.until("report to run", &mut fx, |_, n| run_of(n, "report"))?;
    ada.agent_mut().set_capacity(0);
    story.step(
        "ada",
        &format!("claims report with a {SHORT_LEASE_MS} ms lease and starts it"),
    );
    // From here on ada's host does not run at all until she wakes up.
    story.step("ada", "stalls (a long pause) and stops renewing her lease");
    duplicates += cy.host.duplicates().len();
    drop(cy);
    story.step("cy", "crashes (process killed)");
    // The restarted process: its image is what its journal holds.
    let mut cy = crew.worker("cy")?;
    cy.agent_mut()
        .replace_session(now_ms())
        .map_err(err("cy replace_session"))?;
    cy.until("his new session", &mut fx, |a, _| {
        let me = a.agent().replica().state()?.members.get("cy")?;
        (me.session == 2 && a.agent().outbox().is_empty()).then_some(())
    })?;
    story.step(
        "cy",
        "restarts from his journal with session 2: the old lease is revoked, train goes back to the queue",
    );
    cy.agent_mut().set_capacity(1);
    let run = cy.until("train to run again", &mut fx, |_, n| run_of(n, "train"))?;
    cy.agent_mut().set_capacity(0);
    story.step(
        "cy",
        &format!(
            "claims train (epoch {}) and resumes from {}",
            run.epoch,
            run.from()
        ),
    );
    cy.agent_mut()
        .submit(
            now_ms(),
            &id("train"),
            json!({"model": "price-v2", "epochs": 10}),
        )
        .map_err(err("cy submit train"))?;
    cy.until("his submit to land", &mut fx, |_, n| {
        released(n, "train").then_some(())
    })?;
    story.step("cy", "submits train");
    ben.until("report's lease to expire", &mut fx, |a, _| {
        item_of(a, "report")
            .is_some_and(|w| w.state == WorkState::Queued && w.epoch == 1)
            .then_some(())
    })?;
    story.step(
        "mwp",
        "tick: ada's lease on report expired; report is back in the queue",
    );
    ben.agent_mut().set_capacity(1);
    let run = ben.until("report to run", &mut fx, |_, n| run_of(n, "report"))?;
    ben.agent_mut().set_capacity(0);
    ben.agent_mut()
        .submit(now_ms(), &id("report"), json!({"pages": 12}))
        .map_err(err("ben submit report"))?;
    ben.until("his submit to land", &mut fx, |_, n| {
        released(n, "report").then_some(())
    })?;
    story.step(
        "ben",
        &format!("claims report (epoch {}) and submits it", run.epoch),
    );
    // ada wakes up with the work done, her view as it was when she stalled.
    ada.agent_mut()
        .submit(now_ms(), &id("report"), json!({"pages": 9, "draft": true}))
        .map_err(err("ada submit report"))?;
    let late = ada.until("her late submit to land", &mut fx, |_, n| {
        n.iter().find_map(|n| match n {
            Notice::Evidence { receipt, .. } => Some(receipt.clone()),
            _ => None,
        })
    })?;
    if late.disposition != Disposition::Evidence {
        return Err("ada's late submit was not recorded as evidence".into());
    }
    story.step(
        "ada",
        &format!(
            "wakes up and submits: recorded as evidence (seq {}), ben's result stands",
            late.seq
        ),
    );

    // notify: an undeclared effect whose outcome is lost, then reconciled.
    ben.agent_mut().set_lease_ms(SHORT_LEASE_MS);
    ben.agent_mut().set_capacity(1);
    ben.until("notify to run", &mut fx, |_, n| run_of(n, "notify"))?;
    ben.agent_mut().set_capacity(0);
    story.step(
        "ben",
        &format!("claims notify with a {SHORT_LEASE_MS} ms lease and starts it"),
    );
    ben.agent_mut()
        .intend_effect(
            now_ms(),
            &id("notify"),
            &id("email-customers"),
            EffectMode::Undeclared,
            false,
            json!({"to": "customers@example.com", "template": "new-prices"}),
        )
        .map_err(err("ben intend_effect"))?;
    let sent = Cell::new(None);
    let mut send_email = |d: &Dispatch| -> Observed {
        // The mailer is called here; ben crashes before its answer is recorded.
        sent.set(Some(d.key));
        None
    };
    let sent = ben.until("the email to go out", &mut send_email, |_, _| sent.get())?;
    story.step(
        "ben",
        &format!(
            "records the intent to email the customers (effect {}), sends the email…",
            &sent.to_hex()[..12]
        ),
    );
    duplicates += ben.host.duplicates().len();
    drop(ben);
    story.step("ben", "…and crashes before recording the outcome");
    rex.wait_for("notify to wait on its unknown effect", |s| {
        s.work
            .get("notify")
            .is_some_and(|w| w.state == WorkState::Waiting)
    })?;
    story.step(
        "mwp",
        "the lease expires: the email may or may not have gone out, so notify waits",
    );
    let item = rex.item("notify")?;
    let (key, _) = item
        .unknown()
        .next()
        .ok_or("notify waits on no unknown effect")?;
    rex.send(Body::ReconcileEffect(ReconcileEffect {
        work: id("notify"),
        key: *key,
        happened: true,
        receipt: json!({"provider": "mailer", "message_id": "msg-8841", "status": "delivered"}),
    }))?;
    story.step(
        "rex",
        "checks the mail provider: it was delivered; reconciles the effect (happened)",
    );
    cy.agent_mut().set_capacity(1);
    cy.until("notify to run", &mut fx, |_, n| run_of(n, "notify"))?;
    cy.agent_mut().set_capacity(0);
    let already = item_of(&cy.host, "notify").is_some_and(|w| {
        w.effects
            .values()
            .any(|e| e.op.as_str() == "email-customers" && e.happened == Some(true))
    });
    if !already {
        return Err("the reconciled effect is not visible to the next owner".into());
    }
    cy.agent_mut()
        .submit(
            now_ms(),
            &id("notify"),
            json!({"emails": "sent once (reconciled)"}),
        )
        .map_err(err("cy submit notify"))?;
    cy.until("his submit to land", &mut fx, |_, n| {
        released(n, "notify").then_some(())
    })?;
    story.step(
        "cy",
        "claims notify, sees the email already went out, and completes without resending",
    );

    // Archive, then check the final snapshot.
    olivia.send(Body::Archive(Archive {
        reason: json!("mission complete"),
    }))?;
    story.step(
        "olivia",
        "archives the group: the authority signs a final snapshot",
    );
    duplicates += ada.host.duplicates().len() + cy.host.duplicates().len();
    let summary = verify(&client, &group, &org, authority, duplicates)?;
    story.step(
        "check",
        "the final snapshot verifies, and a fresh replica of the log agrees",
    );
    Ok(summary)
}

/// Checks the final snapshot and summarises the group.
fn verify(
    client: &Client,
    group: &Id,
    org: &Id,
    authority: PublicKey,
    duplicates: usize,
) -> Step<Summary> {
    let bytes = client
        .snapshot(group)
        .map_err(err("fetching the final snapshot"))?;
    let snap = Snapshot::from_cbor(&bytes).map_err(err("decoding the final snapshot"))?;
    let verified = Snapshot::verify_bytes(&bytes, &authority, org, group, 0).is_ok();
    // A fresh replica, rebuilt from the whole log over HTTP.
    let mut fresh = Replica::new(group.clone());
    loop {
        let events = client
            .events(group, fresh.cursor(), 500)
            .map_err(err("replaying"))?;
        if events.is_empty() {
            break;
        }
        for e in events {
            if let Offer::Rejected(e) = fresh.offer(e) {
                return Err(format!("the log does not replay: {e}"));
            }
        }
    }
    let replica_agrees =
        fresh.cursor() == snap.seq && fresh.state_hash().ok() == Some(snap.state_hash);
    let state = &snap.state;
    Ok(Summary {
        group: group.clone(),
        events: state.seq,
        receipts: state
            .receipts
            .values()
            .map(|by_action| by_action.len())
            .sum(),
        duplicates,
        epochs: state
            .work
            .iter()
            .map(|(w, i)| (w.to_string(), i.epoch))
            .collect(),
        evidence: state.evidence.len(),
        effects: state
            .work
            .iter()
            .flat_map(|(w, i)| {
                i.effects.values().map(move |e| {
                    let status = match (e.status, e.happened) {
                        (EffectStatus::Reconciled, Some(true)) => {
                            "unknown, then reconciled: it happened".to_owned()
                        }
                        (EffectStatus::Reconciled, _) => {
                            "unknown, then reconciled: it did not happen".to_owned()
                        }
                        (s, _) => format!("{s:?}").to_lowercase(),
                    };
                    format!(
                        "{w}/{} ({}): {status}",
                        e.op,
                        format!("{:?}", e.mode).to_lowercase()
                    )
                })
            })
            .collect(),
        work: state
            .work
            .iter()
            .map(|(w, i)| (w.to_string(), i.state.as_str().to_owned()))
            .collect(),
        snapshot: SnapshotCheck {
            seq: snap.seq,
            state_hash: snap.state_hash,
            signer: snap.signer,
            verified,
            replica_agrees,
        },
        dashboard: format!("{}/?group={group}", client.base()),
    })
}

/// Creates a directory and its missing parents, mode 0700 (the demo's data is a file store).
fn private_dirs(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
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
    // The durable file store in the demo's folder (its key in DATA/authority.key): `mwp serve
    // --data DIR` serves the demo's groups afterwards, and each run adds a group.
    let service: Arc<dyn AuthorityService> = Arc::new(
        FileStore::open(&args.data, StoreOptions::default()).map_err(|e| {
            Failure::from_error(
                &format!("cannot open the demo's data folder {}", args.data.display()),
                &e,
            )
        })?,
    );
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
    let result = mission(&base, &args.data, &story);
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
