//! Workload shared by the benches: a group and a realistic mix of signed commands.

use mwp_core::command::{
    Checkpoint, ClaimWork, Contract, CreateWork, MemberSpec, OpenGroup, Risk, Role, StartWork,
    Submit,
};
use mwp_core::lease::LeaseId;
use mwp_core::{accept, Body, Command, Decision, GroupState, Id, Limits, SecretKey};

/// Time of every command: leases are long enough never to expire.
pub const NOW_MS: u64 = 1_000;

fn id(s: &str) -> Id {
    Id::new(s).expect("bench IDs are valid")
}

/// The group's actors: one owner, three workers.
pub const ACTORS: [&str; 4] = ["alice", "bob", "carol", "dave"];

/// Signs a command from `actor`.
pub fn signed(actor: usize, action: String, expect: Option<u64>, body: Body) -> Command {
    Command::signed(
        id("acme"),
        id("g1"),
        id(ACTORS[actor]),
        id(&action),
        1,
        expect,
        body,
        &SecretKey::for_transcript(ACTORS[actor]),
    )
    .expect("bench commands sign")
}

/// The genesis command.
pub fn open() -> Command {
    let members = ACTORS
        .iter()
        .enumerate()
        .map(|(i, a)| MemberSpec {
            actor: id(a),
            role: if i == 0 { Role::Owner } else { Role::Worker },
            key: SecretKey::for_transcript(a).public(),
        })
        .collect();
    signed(
        0,
        "open".into(),
        None,
        Body::OpenGroup(OpenGroup {
            mission: id("m1"),
            title: serde_json::json!("bench").into(),
            members,
            authority_key: SecretKey::for_transcript("@authority").public(),
        }),
    )
}

/// The state after the genesis command and the workload over `items` work items, every
/// command accepted with its signature checked.
pub fn state(items: usize) -> GroupState {
    let limits = Limits::default();
    let mut state = None;
    let mut cmds = vec![open()];
    cmds.extend(workload(items));
    for cmd in &cmds {
        match accept(state.as_ref(), cmd, NOW_MS, &limits) {
            Ok(Decision::Accepted(event)) => {
                GroupState::apply_to(&mut state, &event).expect("applies");
            }
            other => panic!("the workload is valid: {other:?}"),
        }
    }
    state.expect("open")
}

/// For each of `items` work items: create, claim, start, checkpoint, claim, start, submit
/// (7 commands), interleaved over items so that the state holds many items at once.
pub fn workload(items: usize) -> Vec<Command> {
    let mut cmds = Vec::with_capacity(items * 7);
    let g = id("g1");
    let contract = Contract {
        max_attempts: 3,
        backoff_base_ms: 100,
        backoff_max_ms: 1_000,
        cost_budget: 100,
        deadline_at: None,
        risk: Risk::Low,
    };
    // Work in waves of 100 items, each wave going through every stage.
    for wave in (0..items).collect::<Vec<_>>().chunks(100) {
        for stage in 0..7 {
            for &i in wave {
                let work = id(&format!("w{i}"));
                let worker = 1 + i % 3;
                let lease = |epoch| LeaseId::derive(&g, &work, epoch);
                let action = format!("{stage}-{i}");
                let cmd = match stage {
                    0 => signed(
                        0,
                        action,
                        None,
                        Body::CreateWork(CreateWork {
                            work: work.clone(),
                            contract: contract.clone(),
                            after: vec![],
                            spec: serde_json::json!({"task": "compile", "n": i}).into(),
                        }),
                    ),
                    1 | 4 => signed(
                        worker,
                        action,
                        Some(if stage == 1 { 1 } else { 4 }),
                        Body::ClaimWork(ClaimWork {
                            work: work.clone(),
                            lease_ms: 60_000,
                            start_within_ms: 10_000,
                        }),
                    ),
                    2 | 5 => signed(
                        worker,
                        action,
                        None,
                        Body::StartWork(StartWork {
                            work: work.clone(),
                            lease: lease(if stage == 2 { 1 } else { 2 }),
                        }),
                    ),
                    3 => signed(
                        worker,
                        action,
                        None,
                        Body::Checkpoint(Checkpoint {
                            work: work.clone(),
                            lease: lease(1),
                            data: serde_json::json!({"progress": 50, "files": ["a.rs", "b.rs"]})
                                .into(),
                        }),
                    ),
                    _ => signed(
                        worker,
                        action,
                        None,
                        Body::Submit(Submit {
                            work: work.clone(),
                            lease: lease(2),
                            result: serde_json::json!({"ok": true, "artifact": "sha:abc"}).into(),
                        }),
                    ),
                };
                cmds.push(cmd);
            }
        }
    }
    cmds
}

/// The process's peak RSS in KiB (Linux `VmHWM`), or 0 where unknown.
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
