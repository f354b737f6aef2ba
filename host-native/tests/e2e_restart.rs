//! Crash tests of `mwp serve --data DIR`: the server is killed with SIGKILL under load and
//! restarted on the same data; every receipt handed out before the kill must still be there,
//! and the log must replay into a verified chain.

mod e2e_support;

use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use e2e_support::*;
use mwp_core::replica::{Offer, Replica};
use mwp_core::Receipt;
use mwp_host::server::client::Client;

/// Starts `mwp serve --data DIR` on a random port; returns the child and its base URL.
fn serve(data: &Path) -> (Child, String) {
    spawn_serve(
        Command::new(env!("CARGO_BIN_EXE_mwp"))
            .args(["serve", "--addr", "127.0.0.1:0", "--data"])
            .arg(data),
    )
}

fn sigkill(child: &mut Child) {
    let pid = child.id().to_string();
    let status = Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let _ = child.wait();
}

fn replay(client: &Client, group: &str) -> Replica {
    let mut replica = Replica::new(id(group));
    loop {
        let events = client
            .events(&id(group), replica.cursor(), 500)
            .expect("events");
        if events.is_empty() {
            return replica;
        }
        for e in events {
            assert!(
                matches!(replica.offer(e), Offer::Applied { .. }),
                "the log verifies and chains"
            );
        }
    }
}

#[test]
fn sigkill_under_load_loses_no_acknowledged_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut child, base) = serve(dir.path());
    let client = Client::new(base.clone());
    let authority = client.authority_key().expect("key");
    let workers = 8;
    let names: Vec<String> = (0..workers).map(|i| format!("w{i}")).collect();
    client
        .submit(&open_group("g1", authority, &names))
        .expect("opens");

    let acknowledged: Arc<Mutex<Vec<Receipt>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..workers)
        .map(|w| {
            let (client, acked, stop) = (
                Client::new(base.clone()),
                Arc::clone(&acknowledged),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                // Bounded: at most 2,000 commands per worker.
                for n in 0..2_000 {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let c = cmd(
                        "g1",
                        &format!("w{w}"),
                        &format!("a{n}"),
                        None,
                        create_work(&format!("w{w}-{n}"), &[]),
                    );
                    match client.submit(&c) {
                        Ok(s) => acked.lock().expect("lock").push(s.receipt),
                        Err(_) => return, // the server is gone
                    }
                }
            })
        })
        .collect();
    // Kill once a good number of commands were acknowledged.
    while acknowledged.lock().expect("lock").len() < 500 {
        std::thread::yield_now();
    }
    sigkill(&mut child);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("thread");
    }

    let (mut child, base) = serve(dir.path());
    let client = Client::new(base);
    assert_eq!(
        client.authority_key().expect("key"),
        authority,
        "the key file survives"
    );
    let replica = replay(&client, "g1");
    for r in acknowledged.lock().expect("lock").iter() {
        let stored = client
            .receipt(&id("g1"), &r.actor, &r.action)
            .expect("an acknowledged receipt survives");
        assert_eq!(&stored, r);
        assert!(r.seq <= replica.cursor());
    }
    // Retrying every acknowledged command is a Duplicate, never a second event.
    let head = replica.cursor();
    let again = cmd("g1", "w0", "a0", None, create_work("w0-0", &[]));
    assert!(client.submit(&again).expect("duplicate").duplicate);
    assert_eq!(replay(&client, "g1").cursor(), head);
    sigkill(&mut child);
}

#[test]
fn restart_keeps_groups_and_resumes_the_tick_loop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut child, base) = serve(dir.path());
    let client = Client::new(base);
    let authority = client.authority_key().expect("key");
    client
        .submit(&open_group("g1", authority, &["w0".to_owned()]))
        .expect("opens");
    client
        .submit(&cmd("g1", "w0", "c", None, create_work("x", &[])))
        .expect("created");
    let claim = mwp_core::Body::ClaimWork(mwp_core::command::ClaimWork {
        work: id("x"),
        lease_ms: 100,
        start_within_ms: 100,
    });
    client
        .submit(&cmd("g1", "w0", "k", Some(1), claim))
        .expect("claimed");
    sigkill(&mut child);
    let (mut child, base) = serve(dir.path());
    let client = Client::new(base);
    // The restarted server's tick loop expires the lease granted before the kill (bounded wait).
    let mut expired = false;
    for _ in 0..600 {
        let events = client.events(&id("g1"), 3, 10).expect("events");
        if events.iter().any(|e| e.actor.is_authority()) {
            expired = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(expired, "the lease expired after the restart");
    sigkill(&mut child);
}
