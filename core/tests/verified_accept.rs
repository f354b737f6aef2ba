//! A command the core verified (`Command::verify_once`) is decided exactly as `accept`
//! decides it (`accept_verified`, which takes the content bytes as they were verified instead
//! of encoding them again): checked on every command of every transcript, and with a limit
//! the verified content exceeds.

use mwp_core::accept::accept_verified;
use mwp_core::{accept, Code, Command, Decision, GroupState, Id, Limits, PreparedKey};

mod common;

/// The key `cmd`'s sender signs with in `state`, decoded.
fn signer(state: Option<&GroupState>, cmd: &Command) -> Option<PreparedKey> {
    let state = state?;
    let key = if cmd.actor.is_authority() {
        state.authority_key
    } else {
        state.members.get(&cmd.actor)?.key
    };
    key.prepare()
}

#[test]
fn a_verified_command_is_decided_as_accept_decides_it() {
    let mut compared = 0;
    for (_, text) in common::transcripts() {
        let mut host = common::Recorder::checking(|state, cmd, now_ms| {
            let Some(key) = signer(state, cmd) else {
                return;
            };
            let limits = Limits::default();
            match cmd.verify_once(&key).expect("encodes") {
                Some(verified) => {
                    assert_eq!(verified.key(), &key.public());
                    assert!(std::ptr::eq(verified.command(), cmd));
                    assert_eq!(
                        accept_verified(state, &verified, now_ms, &limits),
                        accept(state, cmd, now_ms, &limits),
                        "{cmd:?}"
                    );
                    compared += 1;
                }
                None => assert!(!cmd.verify_prepared(&key).expect("encodes")),
            }
        });
        common::run(&mut host, &text);
    }
    assert!(compared > 100, "only {compared} commands compared");
}

#[test]
fn a_tampered_command_does_not_verify_and_the_limit_still_holds() {
    let (_, text) = common::transcripts()
        .into_iter()
        .find(|(name, _)| name == "lifecycle.jsonl")
        .expect("the lifecycle transcript");
    let mut member_command = None;
    let mut host = common::Recorder::checking(|state, cmd, _| {
        if member_command.is_none() && !cmd.actor.is_authority() {
            if let Some(state) = state.filter(|s| s.members.contains_key(&cmd.actor)) {
                member_command = Some((cmd.clone(), state.clone()));
            }
        }
    });
    common::run(&mut host, &text);
    let (cmd, state) = member_command.expect("a member's command");
    let key = signer(Some(&state), &cmd).expect("a member's key");
    assert!(cmd.verify_once(&key).expect("encodes").is_some());

    // Another action ID under the same signature: not verified, so nothing to decide by.
    let mut tampered = cmd.clone();
    tampered.action = Id::new("another-action").expect("an identifier");
    assert!(tampered.verify_once(&key).expect("encodes").is_none());

    // A limit below the content's size refuses the verified command as `accept` does.
    let verified = cmd.verify_once(&key).expect("encodes").expect("verifies");
    let small = Limits {
        max_command_bytes: 16,
        ..Limits::default()
    };
    let decided = accept_verified(Some(&state), &verified, 0, &small).expect("a decision");
    assert_eq!(
        decided,
        accept(Some(&state), &cmd, 0, &small).expect("a decision")
    );
    let Decision::Rejected(r) = decided else {
        panic!("refused: {decided:?}")
    };
    assert_eq!(r.code, Code::Malformed);
}
