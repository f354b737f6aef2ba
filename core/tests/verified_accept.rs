//! A command the core verified (`Command::verify_once`) is decided exactly as `accept`
//! decides it (`accept_verified`, which takes the content bytes as they were verified instead
//! of encoding them again): checked on every command of every transcript, and with a limit
//! the verified content exceeds.

use mwp_core::accept::accept_verified;
use mwp_core::memory::MemoryAuthority;
use mwp_core::transcript::{Host, Runner};
use mwp_core::{accept, Code, Command, Decision, GroupState, Id, Limits, Result, WorkState};

/// A transcript host that decides every command twice before the in-memory authority takes
/// it: by `accept`, and by `accept_verified` when the sender's key verifies it.
#[derive(Default)]
struct Twice {
    inner: MemoryAuthority,
    compared: usize,
}

/// The key `cmd`'s sender signs with in `state`, decoded.
fn signer(state: Option<&GroupState>, cmd: &Command) -> Option<mwp_core::PreparedKey> {
    let state = state?;
    let key = if cmd.actor.is_authority() {
        state.authority_key
    } else {
        state.members.get(&cmd.actor)?.key
    };
    key.prepare()
}

impl Host for Twice {
    fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        let state = self
            .inner
            .group(&cmd.group)
            .and_then(|g| g.state().cloned());
        let limits = Limits::default();
        let plain = accept(state.as_ref(), cmd, now_ms, &limits);
        if let Some(key) = signer(state.as_ref(), cmd) {
            match cmd.verify_once(&key).expect("encodes") {
                Some(verified) => {
                    assert_eq!(verified.key(), &key.public());
                    assert!(std::ptr::eq(verified.command(), cmd));
                    let decided = accept_verified(state.as_ref(), &verified, now_ms, &limits);
                    assert_eq!(decided, plain, "{cmd:?}");
                    self.compared += 1;
                }
                None => assert!(!cmd.verify_prepared(&key).expect("encodes")),
            }
        }
        self.inner.submit(cmd, now_ms)
    }
    fn restart(&mut self) -> Result<()> {
        self.inner.restart()
    }
    fn state(&self, group: &Id) -> Option<GroupState> {
        Host::state(&self.inner, group)
    }
    fn work_state(&self, group: &Id, work: &Id) -> Option<WorkState> {
        self.inner.work_state(group, work)
    }
}

#[test]
fn a_verified_command_is_decided_as_accept_decides_it() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/transcripts");
    let mut compared = 0;
    for entry in std::fs::read_dir(dir).expect("transcripts") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("text");
        let mut host = Twice::default();
        Runner::new(&mut host).run_all(&text);
        compared += host.compared;
    }
    assert!(compared > 100, "only {compared} commands compared");
}

#[test]
fn a_tampered_command_does_not_verify_and_the_limit_still_holds() {
    // The first commands of a transcript: the group opened, then one member's command.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/transcripts");
    let text = std::fs::read_to_string(dir.join("lifecycle.jsonl")).expect("text");
    let mut host = Twice::default();
    let mut seen: Vec<Command> = Vec::new();
    struct Keep<'a>(&'a mut Twice, &'a mut Vec<Command>);
    impl Host for Keep<'_> {
        fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
            self.1.push(cmd.clone());
            self.0.submit(cmd, now_ms)
        }
        fn restart(&mut self) -> Result<()> {
            self.0.restart()
        }
        fn state(&self, group: &Id) -> Option<GroupState> {
            self.0.state(group)
        }
        fn work_state(&self, group: &Id, work: &Id) -> Option<WorkState> {
            self.0.work_state(group, work)
        }
    }
    Runner::new(&mut Keep(&mut host, &mut seen)).run_all(&text);
    let (cmd, state) = seen
        .iter()
        .find_map(|c| {
            let g = host.inner.group(&c.group)?;
            let state = g.state()?.clone();
            (!c.actor.is_authority() && state.members.contains_key(&c.actor))
                .then(|| (c.clone(), state))
        })
        .expect("a member's command");
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
