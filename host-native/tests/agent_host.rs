//! The native host of the agent driver ([`HttpAgent`]) against `mwp serve` over real HTTP:
//! a crash right after a committed write set, and the restart from the journal.

mod e2e_support;

use e2e_support::*;
use mwp_core::agent::{Config, Notice};
use mwp_core::WorkState;
use mwp_host::agent_host::HttpAgent;
use mwp_host::server::now_ms;
use serde_json::json;

/// Pumps until `done` holds of the agent's notices and replica (a bounded number of turns).
fn pump_until(agent: &mut HttpAgent, mut done: impl FnMut(&HttpAgent, &[Notice]) -> bool) {
    for _ in 0..2_000 {
        let notices = agent
            .pump(now_ms(), &mut |_| None)
            .expect("the journal takes it");
        if done(agent, &notices) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("the agent never got there");
}

fn work_state(agent: &HttpAgent, work: &str) -> Option<WorkState> {
    Some(agent.agent().replica().state()?.work.get(work)?.state)
}

#[test]
fn an_agent_restarted_after_a_committed_write_set_has_its_cursor_and_outbox_and_sends_it() {
    let server = TestServer::start();
    let client = opened(&server, "g1", 1);
    client
        .submit(&cmd("g1", "alice", "c1", None, create_work("a", &[])))
        .expect("creates a");
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("w0.journal");
    let authority = client.authority_key().expect("the authority key");
    let mut config = Config::new(id("acme"), id("g1"), id("w0"), authority);
    config.resend_ms = 50;
    config.sync_ms = 50;
    let open = || {
        HttpAgent::open(config.clone(), key("w0"), &server.base, &path).expect("opens its journal")
    };

    let mut agent = open();
    pump_until(&mut agent, |_, n| {
        n.iter()
            .any(|n| matches!(n, Notice::Run { work, .. } if work.as_str() == "a"))
    });
    agent
        .agent_mut()
        .submit(now_ms(), &id("a"), json!({"done": true}))
        .expect("a submit of running work");
    // The submit is durable in the outbox, and the agent crashes before sending it.
    agent.commit(now_ms()).expect("commits");
    let cursor = agent.agent().replica().cursor();
    let outbox = agent.agent().outbox().clone();
    assert_eq!(outbox.len(), 1);
    drop(agent);
    assert_eq!(
        client.events(&id("g1"), cursor, 10).expect("events"),
        vec![],
        "nothing was sent"
    );

    let mut agent = open();
    assert_eq!(agent.agent().replica().cursor(), cursor);
    assert_eq!(agent.agent().outbox(), &outbox);
    // Online again, the driver looks the submit up, finds it did not land, and sends it.
    pump_until(&mut agent, |a, _| {
        work_state(a, "a") == Some(WorkState::Succeeded) && a.agent().outbox().is_empty()
    });
    let cursor = agent.agent().replica().cursor();
    // The journal has one writer: the agent's is released when it is dropped.
    drop(agent);
    let (_, image) = mwp_host::agent_host::Journal::open(&path).expect("reopens");
    assert!(image.outbox.is_empty());
    assert_eq!(image.replica.cursor, cursor);
}
