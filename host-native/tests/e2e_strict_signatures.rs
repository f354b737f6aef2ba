//! The strict signature rule (SPEC §2) through `mwp serve --data DIR` over real HTTP: the
//! forgery of a member registered with the identity key, and the hand-made signatures of
//! the shared vectors (tests/vectors/weak_keys.jsonl), are refused; nothing reaches the log.

mod e2e_support;

use std::path::Path;
use std::process::{Child, Command as Process};

use e2e_support::*;
use mwp_core::command::{AddMember, MemberSpec, OpenGroup, Role};
use mwp_core::{Body, Command, PublicKey, Signature};
use mwp_host::server::client::Client;
use serde_json::{json, Value};

/// The identity point: a small-order key under which `01 00…` verifies leniently.
const IDENTITY: &str = "0100000000000000000000000000000000000000000000000000000000000000";

/// Starts `mwp serve --data DIR` on a random port; returns the child and its base URL.
fn serve(data: &Path) -> (Child, String) {
    spawn_serve(
        Process::new(env!("CARGO_BIN_EXE_mwp"))
            .args(["serve", "--addr", "127.0.0.1:0", "--data"])
            .arg(data),
    )
}

/// Kills the server when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// POSTs a JSON command to group g1: (status, JSON answer).
fn post(base: &str, command: &Value) -> (u16, Value) {
    let (status, _, body) = request(
        "POST",
        &format!("{base}/v1/groups/g1/commands"),
        &[("content-type", "application/json")],
        &serde_json::to_vec(command).expect("JSON"),
    );
    (
        status,
        serde_json::from_slice(&body).expect("a JSON answer"),
    )
}

fn open_group(authority: PublicKey, bob: PublicKey) -> Command {
    let members = vec![
        MemberSpec {
            actor: id("alice"),
            role: Role::Owner,
            key: key("alice").public(),
        },
        MemberSpec {
            actor: id("bob"),
            role: Role::Worker,
            key: bob,
        },
    ];
    let body = Body::OpenGroup(OpenGroup {
        mission: id("m1"),
        title: json!("weak keys").into(),
        members,
        authority_key: authority,
    });
    cmd("g1", "alice", "open", None, body)
}

fn to_json(cmd: &Command) -> Value {
    serde_json::to_value(cmd).expect("JSON")
}

#[test]
fn weak_keys_and_forged_signatures_are_refused_over_http() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (child, base) = serve(&dir.path().join("data"));
    let _server = Running(child);
    let client = Client::new(base.clone());
    let authority = client.authority_key().expect("the server's key");
    let identity = PublicKey::from_hex(IDENTITY).expect("hex");

    // A member registered with the identity key: refused where it enters, naming the field.
    let (status, err) = post(&base, &to_json(&open_group(authority, identity)));
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["code"], "MALFORMED");
    let message = err["message"].as_str().expect("a message");
    assert!(
        message.starts_with("`members[1].key` (of bob) is a small-order"),
        "{message}"
    );

    let (status, opened) = post(&base, &to_json(&open_group(authority, key("bob").public())));
    assert_eq!(status, 200, "{opened}");

    let add = cmd(
        "g1",
        "alice",
        "add-mallory",
        Some(1),
        Body::AddMember(AddMember {
            actor: id("mallory"),
            role: Role::Worker,
            key: identity,
        }),
    );
    let (status, err) = post(&base, &to_json(&add));
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["code"], "MALFORMED");
    assert!(
        err["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("`key` (of mallory) is a small-order")),
        "{err}"
    );

    // The forgery: `01` and 63 zero bytes on a create_work, as mallory (never
    // registered) and as bob (whose key is real).
    let mut forged_sig = [0u8; 64];
    forged_sig[0] = 1;
    for actor in ["mallory", "bob"] {
        let mut forged = cmd("g1", actor, "forged", None, create_work("w1", &[]));
        forged.sig = Signature(forged_sig);
        let (status, err) = post(&base, &to_json(&forged));
        assert!(status == 401 || status == 409, "{actor}: {status} {err}");
        let want = if actor == "bob" {
            "BAD_SIGNATURE"
        } else {
            "UNKNOWN_ACTOR"
        };
        assert_eq!(err["code"], want, "{actor}: {err}");
    }

    // The shared vectors' hand-made signatures (small-order R, S + ℓ), over the same
    // commands, are refused by the server as by every host.
    let vectors = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/vectors/weak_keys.jsonl"
    ))
    .expect("the weak-key vectors");
    let mut sent = 0;
    for line in vectors.lines().filter(|l| !l.trim().is_empty()) {
        let step: Value = serde_json::from_str(line).expect("JSON");
        let Some(sig) = step.get("sig") else {
            continue;
        };
        let command = json!({
            "org": "acme", "group": "g1", "actor": step["actor"], "action": step["action"],
            "session": 1, "body": step["body"], "sig": sig,
        });
        let (status, err) = post(&base, &command);
        assert_eq!(status, 401, "{line}: {err}");
        assert_eq!(err["code"], "BAD_SIGNATURE", "{line}");
        sent += 1;
    }
    assert_eq!(sent, 3);

    // Nothing of it reached the log: the next accepted command is seq 2.
    let events = client.events(&id("g1"), 0, 100).expect("events");
    assert_eq!(events.len(), 1, "only the genesis");
    let good = client
        .submit(&cmd("g1", "bob", "w1", None, create_work("w1", &[])))
        .expect("a real signature is accepted");
    assert_eq!(good.receipt.seq, 2);
}
