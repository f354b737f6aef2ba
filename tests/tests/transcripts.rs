//! Runs every transcript in `tests/transcripts/` on the memory host and fails on any mismatch.
//!
//! The host is wrapped in [`Checked`], which holds every command to the rules that must hold
//! whatever a transcript expects:
//!
//! * a rejection changes nothing (state hash and log length unchanged);
//! * a duplicate changes nothing and returns the stored receipt, byte for byte;
//! * an accepted event verifies, takes the next seq, links to the previous head, lands in
//!   the log as encoded, and its receipt is what the state then stores;
//! * evidence leaves its work item byte-identical;
//! * a retry's `not_before` is `at + min(base · 2^(attempt−1), max)`;
//! * a `tick` expires exactly the due leases, sending work with an unsettled undeclared effect
//!   to `waiting` and everything else to `queued`; a `tick` with nothing due is `NOT_YET`;
//! * an item leaves `waiting` only by `reconcile_effect` (or `cancel`).
//!
//! At the end of each file the log is replayed (`MemoryGroup::rebuild`) and must give the live
//! state hash.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use mwp_core::canonical;
use mwp_core::command::{Body, EffectMode};
use mwp_core::event::EventKind;
use mwp_core::memory::MemoryAuthority;
use mwp_core::receipt::Disposition;
use mwp_core::state::GroupState;
use mwp_core::transcript::{Host, Runner};
use mwp_core::work::{EffectStatus, WorkItem};
use mwp_core::{Code, Command, Decision, Error, Id, Receipt, Result, WorkState};
use serde_json::Value;

fn transcript_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("transcripts")
}

fn transcript_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(transcript_dir())
        .expect("tests/transcripts exists")
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no transcripts found");
    files
}

fn receipt_bytes(r: &Receipt) -> Vec<u8> {
    canonical::to_vec(r).expect("a receipt encodes")
}

/// Whether `tick` at `now` must expire this item's lease.
fn lease_due(w: &WorkItem, now: u64) -> bool {
    w.lease
        .as_ref()
        .is_some_and(|l| l.expires_at <= now || (w.state == WorkState::Leased && l.start_by <= now))
}

/// Where an item must go when it loses its lease (SPEC §5, effects).
fn state_after_loss(w: &WorkItem) -> WorkState {
    let unknown = w.effects.values().any(|e| {
        e.epoch == w.epoch && e.status == EffectStatus::Intended && e.mode == EffectMode::Undeclared
    });
    if unknown {
        WorkState::Waiting
    } else {
        WorkState::Queued
    }
}

/// `min(base · 2^(attempt−1), max)`, computed without the core's helper.
fn expected_backoff(base: u64, max: u64, attempt: u32) -> u64 {
    let factor = 2u128.checked_pow(attempt - 1).unwrap_or(u128::MAX);
    let raw = u128::from(base).saturating_mul(factor);
    u64::try_from(raw.min(u128::from(max))).expect("at most max, a u64")
}

/// The memory host, checked after every command.
#[derive(Default)]
struct Checked {
    inner: MemoryAuthority,
    problems: Vec<String>,
    commands: usize,
    duplicates_with_other_action: usize,
    evidence: usize,
    waiting_entered: usize,
}

impl Checked {
    fn problem(&mut self, what: String) {
        self.problems
            .push(format!("command #{}: {what}", self.commands));
    }

    fn snapshot(&self, group: &Id) -> (Option<GroupState>, usize) {
        match self.inner.group(group) {
            Some(g) => (g.state().cloned(), g.log().len()),
            None => (None, 0),
        }
    }

    fn check_rejected(&mut self, cmd: &Command, now: u64, e: &Error, before: &Option<GroupState>) {
        if e.code == Code::NotYet && matches!(cmd.body, Body::Tick(_)) {
            if let Some(s) = before {
                if let Some((id, _)) = s.work.iter().find(|(_, w)| lease_due(w, now)) {
                    self.problem(format!("tick at {now} was NOT_YET but {id}'s lease is due"));
                }
            }
        }
    }

    fn check_duplicate(&mut self, cmd: &Command, r: &Receipt, before: &Option<GroupState>) {
        let Some(s) = before else {
            return self.problem("duplicate before the group exists".into());
        };
        match s.receipt(r.actor.as_str(), r.action.as_str()) {
            Some(stored) if receipt_bytes(&stored) == receipt_bytes(r) => {}
            _ => self.problem(format!("duplicate receipt {r:?} is not the stored one")),
        }
        if r.actor != cmd.actor || r.action != cmd.action {
            if !matches!(cmd.body, Body::Expand(_)) {
                self.problem("only expand may answer with another command's receipt".into());
            }
            self.duplicates_with_other_action += 1;
        }
    }

    fn check_accepted(
        &mut self,
        event: &mwp_core::Event,
        before: &Option<GroupState>,
        after: &GroupState,
        log: &[Vec<u8>],
    ) {
        if let Err(e) = event.verify() {
            self.problem(format!("accepted event does not verify: {e}"));
        }
        let (want_seq, want_prev) = before
            .as_ref()
            .map_or((1, mwp_core::crypto::Hash::ZERO), |s| (s.seq + 1, s.head));
        if event.seq != want_seq || event.prev != want_prev {
            self.problem(format!(
                "event seq {} prev {} should be seq {want_seq} prev {want_prev}",
                event.seq, event.prev
            ));
        }
        if after.seq != event.seq || after.head != event.id {
            self.problem("state head is not the accepted event".into());
        }
        match log.last().map(|b| mwp_core::Event::from_cbor(b)) {
            Some(Ok(stored)) if stored == *event => {}
            _ => self.problem("the log's last record is not the accepted event".into()),
        }
        let stored = after.receipt(event.actor.as_str(), event.action.as_str());
        if stored.as_ref().map(receipt_bytes) != Some(receipt_bytes(&event.receipt())) {
            self.problem("state does not store the event's receipt".into());
        }
        let Some(before) = before else { return };
        let work_before = |id: &Id| before.work.get(id);
        match &event.kind {
            EventKind::EvidenceRecorded(e) => {
                self.evidence += 1;
                if event.receipt().disposition != Disposition::Evidence {
                    self.problem("evidence receipt is not disposition evidence".into());
                }
                if work_before(&e.work) != after.work.get(&e.work) {
                    self.problem(format!("evidence changed work item {}", e.work));
                }
            }
            EventKind::WorkFailed(f) => {
                let Some(w) = work_before(&f.work) else {
                    return self.problem("failed item did not exist".into());
                };
                let c = &w.contract;
                let backoff = expected_backoff(c.backoff_base_ms, c.backoff_max_ms, f.attempt);
                let retry_at = event.at.saturating_add(backoff);
                let retry = f.retryable
                    && f.attempt < c.max_attempts
                    && w.spent < c.cost_budget
                    && c.deadline_at.is_none_or(|d| retry_at < d);
                let want = if retry {
                    (WorkState::Queued, Some(retry_at))
                } else {
                    (WorkState::Failed, None)
                };
                if (f.to, f.not_before) != want || f.attempt != w.attempts + 1 {
                    self.problem(format!(
                        "fail of {} (attempt {}) gave {:?}/{:?}, rule says {want:?}",
                        f.work, f.attempt, f.to, f.not_before
                    ));
                }
            }
            EventKind::LeasesExpired(x) => {
                let due: BTreeSet<&Id> = before
                    .work
                    .iter()
                    .filter(|(_, w)| lease_due(w, event.at))
                    .map(|(id, _)| id)
                    .collect();
                let listed: BTreeSet<&Id> = x.expired.iter().map(|r| &r.work).collect();
                if due != listed {
                    self.problem(format!("tick expired {listed:?}, due were {due:?}"));
                }
                for r in &x.expired {
                    let want = before.work.get(&r.work).map(state_after_loss);
                    let got = after.work.get(&r.work).map(|w| w.state);
                    if want != Some(r.to) || got != Some(r.to) {
                        self.problem(format!(
                            "expired {} went to {:?} (state {got:?}), rule says {want:?}",
                            r.work, r.to
                        ));
                    }
                }
            }
            _ => {}
        }
        for (id, w) in &after.work {
            let was = before.work.get(id).map(|w| w.state);
            if w.state == WorkState::Waiting {
                if was != Some(WorkState::Waiting) {
                    self.waiting_entered += 1;
                }
                if !w
                    .effects
                    .values()
                    .any(|e| e.status == EffectStatus::Unknown)
                {
                    self.problem(format!("{id} is waiting without an unknown effect"));
                }
            }
            let left_waiting = was == Some(WorkState::Waiting) && w.state != WorkState::Waiting;
            let by_reconcile = matches!(
                event.kind,
                EventKind::EffectReconciled(_) | EventKind::WorkCancelled(_)
            );
            if left_waiting && !by_reconcile {
                self.problem(format!("{id} left waiting by {:?}", event.kind));
            }
        }
    }
}

impl Host for Checked {
    fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        self.commands += 1;
        let (before, log_before) = self.snapshot(&cmd.group);
        let hash_before = before.as_ref().map(|s| s.hash().expect("state hashes"));
        // A rejection is checked as the error every surface shows for it.
        let result = self
            .inner
            .submit(cmd, now_ms)
            .and_then(Decision::into_result);
        let (after, log_after) = self.snapshot(&cmd.group);
        let hash_after = after.as_ref().map(|s| s.hash().expect("state hashes"));
        let unchanged = hash_before == hash_after && log_before == log_after;
        match &result {
            Err(e) => {
                if !unchanged {
                    self.problem(format!("rejection {} changed the group", e.code));
                }
                self.check_rejected(cmd, now_ms, e, &before);
            }
            Ok(Decision::Rejected(_)) => unreachable!("turned into an error above"),
            Ok(Decision::Duplicate(r)) => {
                if !unchanged {
                    self.problem("a duplicate changed the group".into());
                }
                self.check_duplicate(cmd, r, &before);
            }
            Ok(Decision::Accepted(event)) => match &after {
                Some(after) => {
                    let log = self.inner.group(&cmd.group).expect("group exists").log();
                    let log = log.to_vec();
                    self.check_accepted(event, &before, after, &log);
                }
                None => self.problem("accepted but the group has no state".into()),
            },
        }
        result
    }

    fn restart(&mut self) -> Result<()> {
        self.inner.restart()
    }

    fn advance(&mut self, group: &Id, now_ms: u64) -> Result<Vec<Decision>> {
        self.inner.advance(group, now_ms)
    }

    fn state(&self, group: &Id) -> Option<GroupState> {
        Host::state(&self.inner, group)
    }

    fn work_state(&self, group: &Id, work: &Id) -> Option<WorkState> {
        self.inner.work_state(group, work)
    }
}

struct Run {
    lines: Vec<Value>,
    failed: bool,
    host: Checked,
}

fn run(path: &Path) -> Run {
    let text = std::fs::read_to_string(path).expect("readable transcript");
    let mut host = Checked::default();
    let (lines, failed) = {
        let mut runner = Runner::new(&mut host);
        let lines = runner.run_all(&text);
        (lines, runner.failed())
    };
    Run {
        lines,
        failed,
        host,
    }
}

/// Checks that hold over a whole file's output.
fn check_output(name: &str, run: &Run, problems: &mut Vec<String>) {
    let mut accepted: BTreeMap<u64, &Value> = BTreeMap::new();
    for line in &run.lines {
        if line["outcome"] == "accepted" {
            if let Some(seq) = line.pointer("/receipt/seq").and_then(Value::as_u64) {
                accepted.insert(seq, &line["receipt"]);
            }
        }
    }
    for line in &run.lines {
        if line["outcome"] == "duplicate" {
            let seq = line.pointer("/receipt/seq").and_then(Value::as_u64);
            let original = seq.and_then(|s| accepted.get(&s));
            if original.copied() != Some(&line["receipt"]) {
                problems.push(format!(
                    "{name} step {}: duplicate receipt differs from the original's",
                    line["step"]
                ));
            }
        }
    }
}

#[test]
fn every_transcript_passes_on_the_memory_host() {
    let mut problems = Vec::new();
    for path in transcript_files() {
        let name = path
            .file_name()
            .expect("file name")
            .to_string_lossy()
            .to_string();
        let run = run(&path);
        if run.failed {
            for line in run
                .lines
                .iter()
                .filter(|l| l.get("mismatch").is_some() || l["outcome"] == "invalid")
            {
                problems.push(format!("{name}: {line}"));
            }
            if problems.is_empty() {
                problems.push(format!("{name}: failed"));
            }
        }
        for p in &run.host.problems {
            problems.push(format!("{name}: {p}"));
        }
        check_output(&name, &run, &mut problems);
        // Replay from the log gives the live state.
        for line in &run.lines {
            if line.get("op").is_some() && line.get("error").is_some() {
                problems.push(format!("{name}: op failed: {line}"));
            }
        }
        let groups: BTreeSet<String> = run
            .lines
            .iter()
            .filter_map(|l| l.pointer("/receipt/group").and_then(Value::as_str))
            .map(str::to_owned)
            .collect();
        for g in groups {
            let id = Id::new(g).expect("receipt group is an id");
            let group = run.host.inner.group(&id).expect("group exists");
            let mut replayed = group.clone();
            replayed.rebuild().expect("the log replays");
            let live = group.state().map(|s| s.hash().expect("hash"));
            let again = replayed.state().map(|s| s.hash().expect("hash"));
            if live != again {
                problems.push(format!(
                    "{name}: replayed state differs from the live state"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The runner reports a wrong expectation: a transcript test that cannot fail proves nothing.
#[test]
fn a_wrong_expectation_fails_the_run() {
    let good = std::fs::read_to_string(transcript_dir().join("lifecycle.jsonl")).expect("read");
    let first = good.lines().next().expect("a first line");
    let bad = first.replace("\"seq\": 1", "\"seq\": 2");
    assert_ne!(first, bad);
    let (_, failed) = mwp_core::transcript::run_in_memory(&bad);
    assert!(failed);
    let (_, failed) = mwp_core::transcript::run_in_memory(first);
    assert!(!failed);
}

fn file(name: &str) -> PathBuf {
    transcript_dir().join(name)
}

#[test]
fn expand_duplicates_answer_with_the_first_receipt() {
    let run = run(&file("expand.jsonl"));
    assert!(!run.failed);
    assert!(
        run.host.duplicates_with_other_action >= 2,
        "expand.jsonl re-sends a disposition under other action IDs"
    );
}

/// docs/decisions.md, "The same `work` list": an expansion entry's optional `type` is part of
/// the list as recorded, so the same entry written without it is another list.
#[test]
fn an_expansion_entrys_type_is_part_of_its_work_list() {
    let head: Vec<&str> = include_str!("../transcripts/expand.jsonl")
        .lines()
        .take(5)
        .collect();
    let entry = r#""work": "w2", "contract": {"max_attempts": 3, "backoff_base_ms": 100, "backoff_max_ms": 1000, "cost_budget": 10, "risk": "low"}, "after": [], "spec": {"do": "w2"}"#;
    let tag = r#""type": "create_work", "#;
    let expand = |action: &str, tag: &str, outcome: &str| {
        format!(
            r#"{{"actor": "alice", "action": "{action}", "body": {{"type": "expand", "trigger": 5, "work": [{{{tag}{entry}}}]}}, "expect": {{"outcome": {outcome}}}}}"#
        )
    };
    let conflict = r#""rejected", "code": "DISPOSITION_CONFLICT""#;
    let text = [
        head.join("\n"),
        expand("x1", tag, r#""accepted", "seq": 6"#),
        expand("x2", tag, r#""duplicate""#),
        expand("x3", "", conflict),
    ]
    .join("\n");
    let (lines, failed) = mwp_core::transcript::run_in_memory(&text);
    assert!(!failed, "{lines:#?}");
}

#[test]
fn late_results_and_unknown_effects_are_exercised() {
    let fencing = run(&file("leases_and_fencing.jsonl"));
    assert!(
        fencing.host.evidence >= 5,
        "late submits and fails are recorded as evidence"
    );
    let effects = run(&file("effects.jsonl"));
    assert!(
        effects.host.waiting_entered >= 2,
        "lease loss with an undeclared effect waits"
    );
    assert!(fencing.host.problems.is_empty() && effects.host.problems.is_empty());
}

#[test]
fn redaction_erases_values_and_keeps_the_chain() {
    let run = run(&file("redaction_archive.jsonl"));
    assert!(!run.failed);
    let g = Id::new("g1").expect("id");
    let events = run
        .host
        .inner
        .group(&g)
        .expect("the group exists")
        .logged(0, usize::MAX)
        .expect("events");
    let redacted: Vec<u64> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::EventRedacted(r) => Some(r.seq),
            _ => None,
        })
        .collect();
    assert_eq!(redacted, vec![2, 5, 1]);
    let mut prev = mwp_core::crypto::Hash::ZERO;
    for e in &events {
        e.verify().expect("every stored event verifies");
        assert_eq!(e.prev, prev);
        prev = e.id;
        let json = serde_json::to_value(&e.kind).expect("kind encodes");
        let text = json.to_string();
        if redacted.contains(&e.seq) {
            assert!(
                !text.contains("s3cr3t") && !text.contains("notes"),
                "{text}"
            );
            assert!(text.contains("$redacted"), "{text}");
        } else {
            assert!(
                !text.contains("$redacted"),
                "seq {} was not redacted",
                e.seq
            );
        }
    }
    let spec = match &events[1].kind {
        EventKind::WorkCreated(c) => c.spec.clone(),
        other => panic!("seq 2 is work_created, got {other:?}"),
    };
    let original = serde_json::json!({"secret": "s3cr3t", "n": [1, 2, 3]});
    let hash = mwp_core::opaque::hash(&original.into()).expect("hash");
    assert_eq!(spec, mwp_core::opaque::redaction_marker(hash));
}

const COMMAND_TYPES: [&str; 26] = [
    "open_group",
    "add_member",
    "remove_member",
    "change_role",
    "replace_session",
    "create_work",
    "claim_work",
    "start_work",
    "renew_lease",
    "checkpoint",
    "block",
    "resolve_block",
    "submit",
    "fail",
    "cancel",
    "reassign",
    "intend_effect",
    "settle_effect",
    "reconcile_effect",
    "charge",
    "request_approval",
    "decide_approval",
    "expand",
    "redact",
    "archive",
    "tick",
];

const ACCEPT_CODES: [Code; 23] = [
    Code::Malformed,
    Code::WrongGroup,
    Code::UnknownActor,
    Code::BadSignature,
    Code::ActionIdCollision,
    Code::GroupArchived,
    Code::NotPermitted,
    Code::WrongSession,
    Code::RevisionMismatch,
    Code::CasRequired,
    Code::Fenced,
    Code::LeaseExpired,
    Code::NotFound,
    Code::AlreadyExists,
    Code::InvalidState,
    Code::DependenciesPending,
    Code::NotYet,
    Code::DeadlinePassed,
    Code::AttemptsExhausted,
    Code::ApprovalRequired,
    Code::EffectUnsettled,
    Code::DispositionConflict,
    Code::BudgetExceeded,
];

/// Every command type of SPEC §2 is accepted somewhere, every error code of §3 is expected
/// somewhere, and every step states what it expects.
#[test]
fn transcripts_cover_every_command_type_and_error_code() {
    let mut accepted_types = BTreeSet::new();
    let mut codes = BTreeSet::new();
    let mut missing_expect = Vec::new();
    for path in transcript_files() {
        let text = std::fs::read_to_string(&path).expect("readable");
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let step: Value = serde_json::from_str(line).expect("a step is JSON");
            let Some(expect) = step.get("expect") else {
                missing_expect.push(format!("{}:{}", path.display(), i + 1));
                continue;
            };
            if let Some(c) = expect.get("code").and_then(Value::as_str) {
                codes.insert(c.to_owned());
            }
            if expect.get("outcome").and_then(Value::as_str) == Some("accepted") {
                if let Some(t) = step.pointer("/body/type").and_then(Value::as_str) {
                    accepted_types.insert(t.to_owned());
                }
            }
        }
    }
    assert!(
        missing_expect.is_empty(),
        "steps without expect: {missing_expect:?}"
    );
    let missing_types: Vec<_> = COMMAND_TYPES
        .iter()
        .filter(|t| !accepted_types.contains(**t))
        .collect();
    assert!(
        missing_types.is_empty(),
        "never accepted: {missing_types:?}"
    );
    let missing_codes: Vec<_> = ACCEPT_CODES
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !codes.contains(*c))
        .collect();
    assert!(
        missing_codes.is_empty(),
        "never expected: {missing_codes:?}"
    );
}

/// A step field the runner reads itself (`group`, `org`, `actor`, `tamper`) of another type
/// is an invalid step naming the field, never passed over: a `group` that is not a string
/// would run the step in the previous step's group, a `tamper` that is not a boolean would
/// send the command untampered.
#[test]
fn a_step_field_of_the_wrong_type_is_named() {
    let good = std::fs::read_to_string(transcript_dir().join("lifecycle.jsonl")).expect("read");
    let mut lines = good.lines();
    let first = lines.next().expect("a first line");
    let second: serde_json::Value =
        serde_json::from_str(lines.next().expect("a second line")).expect("JSON");
    for (field, value, words) in [
        ("group", serde_json::json!(5), "`group` must be a string"),
        (
            "group",
            serde_json::json!(["g1"]),
            "`group` must be a string",
        ),
        ("org", serde_json::json!(null), "`org` must be a string"),
        ("actor", serde_json::json!(7), "`actor` must be a string"),
        (
            "tamper",
            serde_json::json!("yes"),
            "`tamper` must be true or false",
        ),
    ] {
        let mut step = second.clone();
        step[field] = value;
        step.as_object_mut().expect("a step").remove("expect");
        let (out, failed) = mwp_core::transcript::run_in_memory(&format!("{first}\n{step}"));
        assert!(failed, "{field}: {out:?}");
        assert_eq!(out[1]["outcome"], "invalid", "{field}: {}", out[1]);
        assert_eq!(out[1]["problem"], words, "{field}: {}", out[1]);
    }
}
