//! Embedding mwp-core: open a group, create and claim work, and check that replay gives the
//! same state. Run with `cargo run -p mwp-core --example embed`.
use mwp_core::command::{Body, ClaimWork, Contract, CreateWork, MemberSpec, OpenGroup, Risk, Role};
use mwp_core::memory::MemoryGroup;
use mwp_core::{Command, Decision, Id, SecretKey};

fn id(s: &str) -> Id {
    Id::new(s).expect("a valid identifier")
}

fn main() -> mwp_core::Result<()> {
    let alice = SecretKey::for_transcript("alice");
    let authority = SecretKey::for_transcript("@authority");
    let mut group = MemoryGroup::default();
    let send = |group: &mut MemoryGroup, action: &str, expect, body, now| {
        let cmd = Command::signed(
            id("acme"),
            id("g1"),
            id("alice"),
            id(action),
            1,
            expect,
            body,
            &alice,
        )?;
        group.submit(&cmd, now)
    };

    send(
        &mut group,
        "a1",
        None,
        Body::OpenGroup(OpenGroup {
            mission: id("m1"),
            title: "Launch".into(),
            members: vec![MemberSpec {
                actor: id("alice"),
                role: Role::Owner,
                key: alice.public(),
            }],
            authority_key: authority.public(),
        }),
        1_000,
    )?;
    send(
        &mut group,
        "a2",
        None,
        Body::CreateWork(CreateWork {
            work: id("w1"),
            contract: Contract {
                max_attempts: 3,
                backoff_base_ms: 1_000,
                backoff_max_ms: 60_000,
                cost_budget: 100,
                deadline_at: None,
                risk: Risk::Low,
            },
            after: vec![],
            spec: serde_json::json!({"task": "write the release notes"}).into(),
        }),
        1_000,
    )?;
    let claim = Body::ClaimWork(ClaimWork {
        work: id("w1"),
        lease_ms: 30_000,
        start_within_ms: 5_000,
    });
    if let Decision::Accepted(event) = send(&mut group, "a3", Some(1), claim.clone(), 2_000)? {
        println!("claimed: seq {} lease {:?}", event.seq, event.kind);
    }
    // A retry of the same command returns the original receipt, byte for byte.
    if let Decision::Duplicate(receipt) = send(&mut group, "a3", Some(1), claim, 2_500)? {
        println!(
            "retry answered with the original receipt for seq {}",
            receipt.seq
        );
    }

    let live = group.state().expect("open").hash()?;
    group.rebuild()?; // drop the state and replay the log
    assert_eq!(live, group.state().expect("open").hash()?);
    println!("state hash {live} (live = replayed)");
    Ok(())
}
