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
//!   her submit is sent twice, as after a lost answer, and lands once.
//! * `clean`: ben's first attempt fails (retryable); the retry waits out its backoff.
//! * `train`: cy crashes mid-run; restarted, it replaces its session (revoking the old lease),
//!   claims again and resumes from its last checkpoint.
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
//! The agents are scripted HTTP clients ([`DemoAgent`]): each holds its key, its session and
//! a replica of the group that it keeps up to date from the event log. Everything an agent
//! does goes through [`DemoAgent::send`] and [`DemoAgent::sync`], the two seams an agent
//! driver replaces.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use mwp_core::command::{
    Archive, Charge, Checkpoint, ClaimWork, Contract, CreateWork, EffectMode, Fail, IntendEffect,
    MemberSpec, OpenGroup, ReconcileEffect, ReplaceSession, Risk, Role, StartWork, Submit,
};
use mwp_core::lease::LeaseId;
use mwp_core::replica::{Offer, Replica};
use mwp_core::snapshot::Snapshot;
use mwp_core::work::{EffectStatus, WorkItem};
use mwp_core::{Body, Command, Disposition, GroupState, Hash, Id, PublicKey, SecretKey, WorkState};
use serde::Serialize;
use serde_json::{json, Value};

use crate::cli::{Failure, Outcome, EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE};
use crate::memory_service::random_key;
use crate::server::client::{Client, Submitted};
use crate::server::{Server, ServerConfig};
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

/// One scripted agent talking to the authority over HTTP.
pub struct DemoAgent {
    name: Id,
    key: SecretKey,
    session: u64,
    org: Id,
    group: Id,
    client: Client,
    replica: Replica,
    sent: u64,
    duplicates: usize,
}

impl DemoAgent {
    /// An agent with its key, starting at `session` with an empty replica.
    pub fn new(name: &str, key: SecretKey, session: u64, org: &Id, group: &Id, base: &str) -> Self {
        DemoAgent {
            name: id(name),
            key,
            session,
            org: org.clone(),
            group: group.clone(),
            client: Client::new(base),
            replica: Replica::new(group.clone()),
            sent: 0,
            duplicates: 0,
        }
    }

    /// The agent's actor ID.
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// Signs a command with a fresh action ID.
    fn command(&mut self, body: Body, expect: Option<u64>) -> Step<Command> {
        self.sent += 1;
        let action = Id::new(format!("{}-s{}-{}", self.name, self.session, self.sent))
            .map_err(|e| e.to_string())?;
        Command::signed(
            self.org.clone(),
            self.group.clone(),
            self.name.clone(),
            action,
            self.session,
            expect,
            body,
            &self.key,
        )
        .map_err(|e| e.to_string())
    }

    /// Sends a command; a rejection is an error naming the command.
    pub fn send(&mut self, body: Body, expect: Option<u64>) -> Step<Submitted> {
        let kind = body.type_name();
        let cmd = self.command(body, expect)?;
        self.send_signed(&cmd)
            .map_err(|e| format!("{} {kind}: {e}", self.name))
    }

    /// Sends an already signed command (again, to show a retry landing once).
    fn send_signed(&mut self, cmd: &Command) -> mwp_core::Result<Submitted> {
        let answer = self.client.submit(cmd)?;
        if answer.duplicate {
            self.duplicates += 1;
        }
        Ok(answer)
    }

    /// Brings the agent's replica up to the authority's head.
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

    /// Claims `work` (compare-and-set on its revision); retries while its backoff runs.
    fn claim(&mut self, work: &str, lease_ms: u64) -> Step<LeaseId> {
        let until = Instant::now() + WAIT_LIMIT;
        loop {
            let revision = self.item(work)?.revision;
            let body = Body::ClaimWork(ClaimWork {
                work: id(work),
                lease_ms,
                start_within_ms: lease_ms.min(10_000),
            });
            let cmd = self.command(body, Some(revision))?;
            match self.send_signed(&cmd) {
                Ok(_) => break,
                Err(e) if e.code == mwp_core::Code::NotYet && Instant::now() < until => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(format!("{} claim_work {work}: {e}", self.name)),
            }
        }
        self.item(work)?
            .lease
            .map(|l| l.id)
            .ok_or_else(|| format!("{work} has no lease after {}'s claim", self.name))
    }

    fn start(&mut self, work: &str, lease: LeaseId) -> Step<Submitted> {
        self.send(
            Body::StartWork(StartWork {
                work: id(work),
                lease,
            }),
            None,
        )
    }

    fn submit(&mut self, work: &str, lease: LeaseId, result: Value) -> Step<Submitted> {
        self.send(
            Body::Submit(Submit {
                work: id(work),
                lease,
                result,
            }),
            None,
        )
    }

    /// Reads the data of the checkpoint `item` points at, from the log.
    fn checkpoint_data(&mut self, item: &WorkItem) -> Step<Option<Value>> {
        let Some(cp) = item.checkpoint else {
            return Ok(None);
        };
        let events = self
            .client
            .events(&self.group, cp.seq - 1, 1)
            .map_err(err("reading the checkpoint"))?;
        let kind = events
            .first()
            .map(|e| serde_json::to_value(&e.kind))
            .transpose()
            .map_err(|e| e.to_string())?;
        Ok(kind.and_then(|k| k.get("data").cloned()))
    }
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

    fn agent(&self, name: &str, session: u64, org: &Id, group: &Id, base: &str) -> DemoAgent {
        let key = self
            .keys
            .get(name)
            .cloned()
            .expect("every agent is in MEMBERS");
        DemoAgent::new(name, key, session, org, group, base)
    }
}

/// Steps the story counts (for the progress bar).
const STEPS: u64 = 33;

/// Runs the mission against the server at `base`; returns the summary.
pub fn mission(base: &str, story: &Story) -> Step<Summary> {
    let client = Client::new(base);
    let authority = client
        .authority_key()
        .map_err(err("reading the authority key"))?;
    let n = client.groups().map_err(err("listing groups"))?.len() + 1;
    let org = id("acme");
    let group = Id::new(format!("launch-{n}")).map_err(|e| e.to_string())?;
    let roster = Roster::new()?;
    let agent = |name: &str, session: u64| roster.agent(name, session, &org, &group, base);
    let mut olivia = agent("olivia", 1);
    let mut ada = agent("ada", 1);
    let mut ben = agent("ben", 1);
    let mut cy = agent("cy", 1);
    let mut rex = agent("rex", 1);

    // Genesis and the work graph.
    let members = MEMBERS
        .iter()
        .map(|(name, role)| MemberSpec {
            actor: id(name),
            role: *role,
            key: roster.keys[name].public(),
        })
        .collect();
    olivia.send(
        Body::OpenGroup(OpenGroup {
            mission: id("launch"),
            title: json!("Launch the new pricing page"),
            members,
            authority_key: authority,
        }),
        None,
    )?;
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
        olivia.send(
            Body::CreateWork(CreateWork {
                work: id(work),
                contract: contract(3),
                after: after.iter().map(|a| id(a)).collect(),
                spec: json!({ "task": spec }),
            }),
            None,
        )?;
        story.step("olivia", &format!("creates {work} (after {after:?})"));
    }

    // fetch: a checkpoint, then a retried submit that lands once.
    let lease = ada.claim("fetch", LEASE_MS)?;
    ada.start("fetch", lease)?;
    story.step("ada", "claims and starts fetch");
    ada.send(
        Body::Checkpoint(Checkpoint {
            work: id("fetch"),
            lease,
            data: json!({"rows_fetched": 50_000, "next_page": 51}),
        }),
        None,
    )?;
    story.step(
        "ada",
        "checkpoints fetch at 50,000 rows (the lease is released)",
    );
    let lease = ada.claim("fetch", LEASE_MS)?;
    let item = ada.item("fetch")?;
    let resumed = ada.checkpoint_data(&item)?;
    ada.start("fetch", lease)?;
    story.step(
        "ada",
        &format!(
            "claims fetch again (epoch {}) and resumes from {}",
            item.epoch,
            resumed.unwrap_or(Value::Null)
        ),
    );
    let submit = ada.command(
        Body::Submit(Submit {
            work: id("fetch"),
            lease,
            result: json!({"rows": 100_000}),
        }),
        None,
    )?;
    let first = ada.send_signed(&submit).map_err(err("ada submit fetch"))?;
    story.step(
        "ada",
        &format!(
            "submits fetch (seq {}), but the answer is lost",
            first.receipt.seq
        ),
    );
    let again = ada
        .send_signed(&submit)
        .map_err(err("ada submit fetch again"))?;
    if !again.duplicate || again.receipt != first.receipt {
        return Err("a resent submit was not answered with its original receipt".into());
    }
    story.step(
        "ada",
        &format!(
            "sends it again: Duplicate, same receipt (seq {}), nothing appended",
            again.receipt.seq
        ),
    );

    // clean: a retryable failure and a retry after the backoff.
    let lease = ben.claim("clean", LEASE_MS)?;
    ben.start("clean", lease)?;
    story.step("ben", "claims and starts clean");
    ben.send(
        Body::Fail(Fail {
            work: id("clean"),
            lease,
            error: json!({"error": "database timeout"}),
            retryable: true,
        }),
        None,
    )?;
    let item = ben.item("clean")?;
    story.step(
        "ben",
        &format!(
            "fails clean (retryable): attempt {} of {}, back in the queue after its backoff",
            item.attempts, item.contract.max_attempts
        ),
    );
    let lease = ben.claim("clean", LEASE_MS)?;
    ben.start("clean", lease)?;
    ben.submit("clean", lease, json!({"rows": 98_412}))?;
    story.step("ben", "retries clean after the backoff and succeeds");

    // train and report run at the same time.
    let (train, report) = std::thread::scope(|s| {
        let train = s.spawn(|| run_train(&mut cy, &roster, base, story));
        let report = s.spawn(|| run_report(&mut ada, &mut ben, story));
        (train.join(), report.join())
    });
    let mut cy = train.map_err(|_| "the train agent panicked".to_owned())??;
    report.map_err(|_| "the report agents panicked".to_owned())??;

    // notify: an undeclared effect whose outcome is lost, then reconciled.
    let lease = ben.claim("notify", SHORT_LEASE_MS)?;
    ben.start("notify", lease)?;
    story.step(
        "ben",
        &format!("claims notify with a {SHORT_LEASE_MS} ms lease and starts it"),
    );
    let intent = ben.send(
        Body::IntendEffect(IntendEffect {
            work: id("notify"),
            lease,
            op: id("email-customers"),
            mode: EffectMode::Undeclared,
            irreversible: false,
            target: json!({"to": "customers@example.com", "template": "new-prices"}),
        }),
        None,
    )?;
    story.step(
        "ben",
        &format!(
            "records the intent to email the customers (seq {}), sends the email…",
            intent.receipt.seq
        ),
    );
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
    rex.send(
        Body::ReconcileEffect(ReconcileEffect {
            work: id("notify"),
            key: *key,
            happened: true,
            receipt: json!({"provider": "mailer", "message_id": "msg-8841", "status": "delivered"}),
        }),
        None,
    )?;
    story.step(
        "rex",
        "checks the mail provider: it was delivered; reconciles the effect (happened)",
    );
    let lease = cy.claim("notify", LEASE_MS)?;
    cy.start("notify", lease)?;
    let item = cy.item("notify")?;
    let already = item
        .effects
        .values()
        .any(|e| e.op.as_str() == "email-customers" && e.happened == Some(true));
    if !already {
        return Err("the reconciled effect is not visible to the next owner".into());
    }
    cy.submit("notify", lease, json!({"emails": "sent once (reconciled)"}))?;
    story.step(
        "cy",
        "claims notify, sees the email already went out, and completes without resending",
    );

    // Archive, then check the final snapshot.
    olivia.send(
        Body::Archive(Archive {
            reason: json!("mission complete"),
        }),
        None,
    )?;
    story.step(
        "olivia",
        "archives the group: the authority signs a final snapshot",
    );
    let summary = verify(
        &client,
        &group,
        &org,
        authority,
        &[&olivia, &ada, &cy, &rex],
    )?;
    story.step(
        "check",
        "the final snapshot verifies, and a fresh replica of the log agrees",
    );
    Ok(summary)
}

/// `train`: cy crashes mid-run and restarts with a new session.
fn run_train(cy: &mut DemoAgent, roster: &Roster, base: &str, story: &Story) -> Step<DemoAgent> {
    let lease = cy.claim("train", LEASE_MS)?;
    cy.start("train", lease)?;
    story.step("cy", "claims and starts train");
    cy.send(
        Body::Charge(Charge {
            work: id("train"),
            lease,
            cost: 30,
            data: Some(json!({"epochs_done": 6, "loss": "0.031"})),
        }),
        None,
    )?;
    story.step(
        "cy",
        "charges 30 (GPU minutes) with a checkpoint after 6 epochs",
    );
    story.step("cy", "crashes (process killed)");
    // The restarted process: same key, a new session, an empty replica rebuilt from the log.
    let (org, group) = (cy.org.clone(), cy.group.clone());
    let mut cy2 = roster.agent("cy", cy.session + 1, &org, &group, base);
    cy2.sent = cy.sent;
    cy2.send(Body::ReplaceSession(ReplaceSession {}), None)?;
    story.step(
        "cy",
        "restarts with session 2: the old lease is revoked, train goes back to the queue",
    );
    let lease = cy2.claim("train", LEASE_MS)?;
    let item = cy2.item("train")?;
    let resumed = cy2.checkpoint_data(&item)?;
    cy2.start("train", lease)?;
    story.step(
        "cy",
        &format!(
            "claims train (epoch {}) and resumes from {}",
            item.epoch,
            resumed.unwrap_or(Value::Null)
        ),
    );
    cy2.submit("train", lease, json!({"model": "price-v2", "epochs": 10}))?;
    story.step("cy", "submits train");
    cy2.duplicates += cy.duplicates;
    Ok(cy2)
}

/// `report`: ada stalls, her lease expires, ben finishes, ada's late result is evidence.
fn run_report(ada: &mut DemoAgent, ben: &mut DemoAgent, story: &Story) -> Step<()> {
    let stale = ada.claim("report", SHORT_LEASE_MS)?;
    ada.start("report", stale)?;
    story.step(
        "ada",
        &format!("claims report with a {SHORT_LEASE_MS} ms lease and starts it"),
    );
    story.step("ada", "stalls (a long pause) and stops renewing her lease");
    ben.wait_for("report's lease to expire", |s| {
        s.work
            .get("report")
            .is_some_and(|w| w.state == WorkState::Queued && w.epoch == 1)
    })?;
    story.step(
        "mwp",
        "tick: ada's lease on report expired; report is back in the queue",
    );
    let lease = ben.claim("report", LEASE_MS)?;
    ben.start("report", lease)?;
    ben.submit("report", lease, json!({"pages": 12}))?;
    story.step("ben", "claims report (epoch 2) and submits it");
    let late = ada.submit("report", stale, json!({"pages": 9, "draft": true}))?;
    if late.receipt.disposition != Disposition::Evidence {
        return Err("ada's late submit was not recorded as evidence".into());
    }
    story.step(
        "ada",
        &format!(
            "wakes up and submits: recorded as evidence (seq {}), ben's result stands",
            late.receipt.seq
        ),
    );
    Ok(())
}

/// Checks the final snapshot and summarises the group.
fn verify(
    client: &Client,
    group: &Id,
    org: &Id,
    authority: PublicKey,
    agents: &[&DemoAgent],
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
        receipts: state.receipts.values().map(BTreeMap::len).sum(),
        duplicates: agents.iter().map(|a| a.duplicates).sum(),
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

/// Runs `mwp demo`.
pub fn run(args: DemoArgs) -> Outcome {
    crate::cli::init_logging("warn");
    std::fs::create_dir_all(&args.data).map_err(|e| {
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
    let result = mission(&base, &story);
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
        eprintln!("mwp demo: serving the dashboard at {base}/ until Ctrl-C");
        rt.block_on(server.run_until_signal());
    }
    Ok(code)
}
