//! The cast of `mwp demo`: the narrator ([`Story`]), the people who act by hand ([`Admin`]),
//! the agents (`Worker`, hosted by [`HttpAgent`]) and the roster of members and keys.

use super::*;

/// Narrates the demo: a progress bar on a terminal, plain lines otherwise (stderr).
#[derive(Clone)]
pub struct Story {
    pub(super) bar: ProgressBar,
}

impl Story {
    pub(super) fn new(steps: u64) -> Self {
        let bar = ProgressBar::new(steps);
        let style = ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(120));
        Story { bar }
    }

    /// Records one step: who did what.
    pub(super) fn step(&self, who: &str, what: &str) {
        let line = format!("{who:>6}  {what}");
        self.bar.suspend(|| eprintln!("{line}"));
        self.bar.set_message(line);
        self.bar.inc(1);
    }

    pub(super) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// A member acting by hand (olivia the owner, rex the reviewer): commands it signs and sends
/// directly, and a replica of the group it keeps up to date from the event log. The workers
/// are agents of the core's driver instead ([`HttpAgent`]).
pub struct Admin {
    pub(super) name: Id,
    pub(super) key: SecretKey,
    pub(super) org: Id,
    pub(super) group: Id,
    pub(super) client: Client,
    pub(super) replica: Replica,
    pub(super) sent: u64,
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

    pub(super) fn state(&mut self) -> Step<&GroupState> {
        self.sync()?;
        self.replica
            .state()
            .ok_or_else(|| "the group is not open".to_owned())
    }

    pub(super) fn item(&mut self, work: &str) -> Step<WorkItem> {
        self.state()?
            .work
            .get(work)
            .cloned()
            .ok_or_else(|| format!("work {work} does not exist"))
    }

    /// Waits (bounded) until `done` holds of the group's state.
    pub(super) fn wait_for(&mut self, what: &str, done: impl Fn(&GroupState) -> bool) -> Step<()> {
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
pub(super) fn no_effects(_: &Dispatch) -> Observed {
    None
}

/// A worker: its host, and the notices it has not looked at yet.
pub(super) struct Worker {
    pub(super) name: &'static str,
    pub(super) host: HttpAgent,
    pub(super) inbox: Vec<Notice>,
}

impl Worker {
    pub(super) fn agent_mut(&mut self) -> &mut Agent {
        self.host.agent_mut()
    }

    /// Pumps the agent — performing its effects with `effect` — until `done`, given the
    /// agent and the notices not taken yet, returns something (taking the notices it used);
    /// bounded by [`WAIT_LIMIT`]. A command the authority rejects (other than a claim that
    /// lost a race) or a corrupt delivery stops the demo.
    pub(super) fn until<T>(
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

/// A disposition a planner made: trigger seq, its work item, the items created.
pub(super) type Disposed = (u64, Id, Vec<Id>);

/// A planner's rule: (trigger seq, its work item, the state) → the items to create.
pub(super) type Rule = dyn Fn(u64, &Id, &GroupState) -> Step<Vec<NewWork>>;

impl Worker {
    /// Takes the next `Plan` notice, if the driver surfaced one (a planner only).
    pub(super) fn next_plan(&mut self) -> Step<Option<(u64, Id)>> {
        let mut fx = no_effects;
        self.until("its next question", &mut fx, |_, inbox| {
            let plan = inbox.iter().position(|n| matches!(n, Notice::Plan { .. }));
            Some(plan.and_then(|i| match inbox.remove(i) {
                Notice::Plan { trigger, work } => Some((trigger, work)),
                _ => None,
            }))
        })
    }

    /// Pumps a planner until every terminal event up to `through` has its disposition in
    /// the log, answering each `Plan` notice with `rule` (trigger seq, work, state → the
    /// items to create; none is the empty disposition). Returns what it disposed of.
    pub(super) fn settle_plans(&mut self, through: u64, rule: &Rule) -> Step<Vec<Disposed>> {
        let mut done = Vec::new();
        let mut fx = no_effects;
        loop {
            let next = self.until("the dispositions", &mut fx, |a, inbox| {
                if let Some(i) = inbox.iter().position(|n| matches!(n, Notice::Plan { .. })) {
                    if let Notice::Plan { trigger, work } = inbox.remove(i) {
                        return Some(Some((trigger, work)));
                    }
                }
                let driver = a.agent();
                let s = driver.replica().state()?;
                let settled = driver.durable_cursor() >= through
                    && driver.outbox().is_empty()
                    && s.terminal
                        .range(..=through)
                        .all(|(t, _)| s.expansions.contains_key(t));
                settled.then_some(None)
            })?;
            let Some((trigger, work)) = next else {
                return Ok(done);
            };
            let state = self
                .host
                .agent()
                .replica()
                .state()
                .cloned()
                .ok_or("the planner has no state")?;
            let items = rule(trigger, &work, &state)?;
            let names = items.iter().map(|w| w.work.clone()).collect();
            self.agent_mut()
                .dispose(now_ms(), trigger, items)
                .map_err(err("the planner's disposition"))?;
            done.push((trigger, work, names));
        }
    }
}

/// Takes the `Run` notice for `work` from `inbox`, if there is one.
pub(super) fn run_of(inbox: &mut Vec<Notice>, work: &str) -> Option<Run> {
    let at = inbox
        .iter()
        .position(|n| matches!(n, Notice::Run { work: w, .. } if w.as_str() == work))?;
    match inbox.remove(at) {
        Notice::Run {
            epoch, checkpoint, ..
        } => Some(Run {
            epoch,
            resumed_from: checkpoint.map(|c| c.data.to_json()),
        }),
        _ => None,
    }
}

/// What a `Run` notice says.
pub(super) struct Run {
    pub(super) epoch: u64,
    pub(super) resumed_from: Option<Value>,
}

impl Run {
    pub(super) fn from(&self) -> String {
        self.resumed_from
            .as_ref()
            .map_or_else(|| "the start".to_owned(), Value::to_string)
    }
}

/// Takes the `Released` notice for `work` from `inbox`, if there is one.
pub(super) fn released(inbox: &mut Vec<Notice>, work: &str) -> bool {
    let at = inbox
        .iter()
        .position(|n| matches!(n, Notice::Released { work: w, .. } if w.as_str() == work));
    at.map(|i| inbox.remove(i)).is_some()
}

/// `work` as the agent's replica has it.
pub(super) fn item_of(agent: &HttpAgent, work: &str) -> Option<WorkItem> {
    agent.agent().replica().state()?.work.get(work).cloned()
}

pub(super) fn contract(max_attempts: u32) -> Contract {
    Contract {
        max_attempts,
        backoff_base_ms: 300,
        backoff_max_ms: 2_000,
        cost_budget: 100,
        deadline_at: None,
        risk: Risk::Low,
    }
}

/// The roster: name, role, key.
pub(super) struct Roster {
    pub(super) keys: BTreeMap<&'static str, SecretKey>,
}

pub(super) const MEMBERS: [(&str, Role); 6] = [
    ("olivia", Role::Owner),
    ("ada", Role::Worker),
    ("ben", Role::Worker),
    ("cy", Role::Worker),
    ("pia", Role::Worker),
    ("rex", Role::Reviewer),
];

impl Roster {
    pub(super) fn new() -> Step<Roster> {
        let keys = MEMBERS
            .iter()
            .map(|(n, _)| random_key().map(|k| (*n, k)))
            .collect::<mwp_core::Result<_>>()
            .map_err(|e| e.to_string())?;
        Ok(Roster { keys })
    }

    pub(super) fn key(&self, name: &str) -> SecretKey {
        self.keys
            .get(name)
            .cloned()
            .expect("every member is in MEMBERS")
    }
}

/// Where the mission runs, and how its agents are opened.
pub(super) struct Crew<'a> {
    pub(super) base: &'a str,
    pub(super) org: Id,
    pub(super) group: Id,
    pub(super) authority: PublicKey,
    pub(super) roster: Roster,
    /// Folder of the agents' journals (`DATA/agents/<group>`).
    pub(super) journals: PathBuf,
}

impl Crew<'_> {
    pub(super) fn admin(&self, name: &str) -> Admin {
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
    pub(super) fn worker(&self, name: &'static str) -> Step<Worker> {
        self.agent(name, false)
    }

    /// Opens (or reopens) the Group's planner `name`: it disposes of every terminal event
    /// ([`Worker::settle_plans`]) and claims nothing.
    pub(super) fn planner(&self, name: &'static str) -> Step<Worker> {
        self.agent(name, true)
    }

    fn agent(&self, name: &'static str, planner: bool) -> Step<Worker> {
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
        config.planner = planner;
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
