//! End-to-end tests of `mwp serve` over real HTTP on 127.0.0.1 (random ports).

mod e2e_support;

use std::collections::BTreeSet;
use std::io::BufRead;
use std::sync::{Arc, Barrier};

use e2e_support::*;
use mwp_core::command::{ClaimWork, StartWork};
use mwp_core::replica::{Offer, Replica};
use mwp_core::snapshot::Snapshot;
use mwp_core::{canonical, Body, Code, Event, Receipt};
use mwp_host::memory_service::MemoryService;
use serde_json::Value;

fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body).expect("a JSON body")
}

/// Replays a group's whole log over HTTP into a fresh replica.
fn replay(server: &TestServer, group: &str) -> Replica {
    let client = server.client();
    let mut replica = Replica::new(id(group));
    loop {
        let events = client
            .events(&id(group), replica.cursor(), 100)
            .expect("events");
        if events.is_empty() {
            return replica;
        }
        for e in events {
            assert!(
                matches!(replica.offer(e), Offer::Applied { .. }),
                "the log applies in order"
            );
        }
    }
}

#[test]
fn open_group_must_name_the_servers_own_key() {
    let server = TestServer::start();
    let client = server.client();
    let wrong = key("someone").public();
    let err = client
        .submit(&open_group("g1", wrong, &[]))
        .expect_err("refused");
    assert_eq!(err.code, Code::NotPermitted);
    assert_eq!(
        err.details["authority_key"],
        client.authority_key().expect("key").to_hex()
    );
    let (status, _, _) = request(
        "POST",
        &format!("{}/v1/groups/g1/commands", server.base),
        &[("content-type", "application/json")],
        &serde_json::to_vec(&open_group("g1", wrong, &[])).expect("json"),
    );
    assert_eq!(status, 409);
    // A bad signature is answered as such, before the key is looked at.
    let mut tampered = open_group("g1", wrong, &[]);
    tampered.sig.0[0] ^= 1;
    assert_eq!(
        client.submit(&tampered).expect_err("refused").code,
        Code::BadSignature
    );
    let right = client.authority_key().expect("key");
    let opened = client.submit(&open_group("g1", right, &[])).expect("opens");
    assert_eq!(opened.receipt.seq, 1);
}

#[test]
fn concurrent_agents_land_in_one_gapless_verified_log() {
    let server = TestServer::start();
    let workers = 12;
    let per_worker = 10;
    opened(&server, "g1", workers);
    let barrier = Arc::new(Barrier::new(workers));
    let threads: Vec<_> = (0..workers)
        .map(|w| {
            let (client, barrier) = (server.client(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                (0..per_worker)
                    .map(|n| {
                        let c = cmd(
                            "g1",
                            &format!("w{w}"),
                            &format!("a{n}"),
                            None,
                            create_work(&format!("w{w}-{n}"), &[]),
                        );
                        client.submit(&c).expect("accepted").receipt
                    })
                    .collect::<Vec<Receipt>>()
            })
        })
        .collect();
    let receipts: Vec<Receipt> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("thread"))
        .collect();
    let seqs: BTreeSet<u64> = receipts.iter().map(|r| r.seq).collect();
    assert_eq!(
        seqs.len(),
        workers * per_worker,
        "every command has its own seq"
    );
    let total = 1 + (workers * per_worker) as u64;
    assert_eq!(seqs, (2..=total).collect(), "seqs have no gaps");
    let replica = replay(&server, "g1");
    assert_eq!(replica.cursor(), total);
    assert_eq!(
        replica.state().expect("open").work.len(),
        workers * per_worker
    );
    for r in &receipts {
        let stored = server
            .client()
            .receipt(&id("g1"), &r.actor, &r.action)
            .expect("receipt");
        assert_eq!(&stored, r);
    }
}

#[test]
fn retried_commands_land_exactly_once() {
    let server = TestServer::start();
    let client = opened(&server, "g1", 1);
    let c = cmd("g1", "w0", "a1", None, create_work("x", &[]));
    // Eight copies race.
    let barrier = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (client, barrier, c) = (server.client(), Arc::clone(&barrier), c.clone());
            std::thread::spawn(move || {
                barrier.wait();
                client.submit(&c).expect("accepted or duplicate")
            })
        })
        .collect();
    let answers: Vec<_> = threads
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .collect();
    assert_eq!(
        answers.iter().filter(|a| !a.duplicate).count(),
        1,
        "exactly one lands"
    );
    assert!(
        answers.iter().all(|a| a.receipt == answers[0].receipt),
        "all get the same receipt"
    );
    // A retry later, over raw HTTP: the header says Duplicate, the bytes are the same.
    let body = serde_json::to_vec(&c).expect("json");
    let url = format!("{}/v1/groups/g1/commands", server.base);
    let (status, headers, bytes) =
        request("POST", &url, &[("content-type", "application/json")], &body);
    assert_eq!(status, 200);
    assert_eq!(
        headers.get("mwp-duplicate").map(|v| v.as_bytes()),
        Some(&b"true"[..])
    );
    let receipt: Receipt = serde_json::from_slice(&bytes).expect("receipt");
    assert_eq!(receipt, answers[0].receipt);
    assert_eq!(
        client.events(&id("g1"), 0, 100).expect("events").len(),
        2,
        "one event appended"
    );
    // A first submission carries no duplicate header.
    let fresh =
        serde_json::to_vec(&cmd("g1", "w0", "a2", None, create_work("y", &[]))).expect("json");
    let (_, headers, _) = request(
        "POST",
        &url,
        &[("content-type", "application/json")],
        &fresh,
    );
    assert!(headers.get("mwp-duplicate").is_none());
}

#[test]
fn cursor_too_old_then_snapshot_then_resume() {
    let server = TestServer::with_service(
        MemoryService::generate()
            .expect("key")
            .with_online_events(Some(5)),
    );
    let client = opened(&server, "g1", 1);
    let authority = client.authority_key().expect("key");
    for n in 0..20 {
        client
            .submit(&cmd(
                "g1",
                "w0",
                &format!("a{n}"),
                None,
                create_work(&format!("x{n}"), &[]),
            ))
            .expect("accepted");
    }
    let url = format!("{}/v1/groups/g1/events?after=0", server.base);
    let (status, _, body) = request("GET", &url, &[], b"");
    assert_eq!(status, 410);
    let err = json(&body);
    assert_eq!(err["code"], "CURSOR_TOO_OLD");
    let location = err["snapshot"]["location"]
        .as_str()
        .expect("location")
        .to_owned();
    assert_eq!(location, "/v1/groups/g1/snapshots/latest");
    let snap_seq = err["snapshot"]["seq"].as_u64().expect("seq");
    // More events land before the client comes back.
    for n in 20..23 {
        client
            .submit(&cmd(
                "g1",
                "w0",
                &format!("a{n}"),
                None,
                create_work(&format!("x{n}"), &[]),
            ))
            .expect("accepted");
    }
    let bytes = client
        .fetch(&location, "application/cbor")
        .expect("snapshot");
    let snap = Snapshot::from_cbor(&bytes).expect("decodes");
    assert!(snap.seq >= snap_seq);
    let mut replica = Replica::new(id("g1"));
    replica
        .restore(&snap, &authority, &id("acme"), 0)
        .expect("restores");
    // Resume strictly after the snapshot's seq.
    let rest = client
        .events(&id("g1"), replica.cursor(), 100)
        .expect("online");
    for e in rest {
        assert!(matches!(replica.offer(e), Offer::Applied { .. }));
    }
    assert_eq!(replica.cursor(), 24);
    // The latest snapshot is the one taken for the answer (snapshots are taken by the
    // cadence, on an old cursor or on request, not on every read).
    let latest =
        Snapshot::from_cbor(&client.snapshot(&id("g1")).expect("latest")).expect("decodes");
    assert_eq!(latest.seq, snap.seq);
    assert_eq!(latest.state_hash, snap.state_hash);
    // Receipts survive the restore: a replayed command is recognised.
    assert!(replica.state().expect("open").receipt("w0", "a3").is_some());
}

#[test]
fn errors_have_codes_and_statuses() {
    let server = TestServer::start();
    let client = opened(&server, "g1", 1);
    let url = format!("{}/v1/groups/g1/commands", server.base);
    let post = |body: &[u8], ct: &str| request("POST", &url, &[("content-type", ct)], body);

    let (status, _, body) = post(b"{not json", "application/json");
    assert_eq!(
        (status, json(&body)["code"].clone()),
        (400, "MALFORMED".into())
    );

    let (status, _, body) = post(b"hello", "text/plain");
    assert_eq!(
        (status, json(&body)["code"].clone()),
        (400, "MALFORMED".into())
    );

    let mut tampered = cmd("g1", "w0", "t1", None, create_work("t", &[]));
    tampered.sig.0[0] ^= 1;
    let (status, _, body) = post(
        &serde_json::to_vec(&tampered).expect("json"),
        "application/json",
    );
    assert_eq!(
        (status, json(&body)["code"].clone()),
        (401, "BAD_SIGNATURE".into())
    );

    let other = cmd("g2", "w0", "t2", None, create_work("t", &[]));
    let (status, _, body) = post(
        &serde_json::to_vec(&other).expect("json"),
        "application/json",
    );
    assert_eq!(
        (status, json(&body)["code"].clone()),
        (409, "WRONG_GROUP".into())
    );

    client
        .submit(&cmd("g1", "w0", "c1", None, create_work("w", &[])))
        .expect("created");
    let claim = Body::ClaimWork(ClaimWork {
        work: id("w"),
        lease_ms: 1000,
        start_within_ms: 1000,
    });
    let stale = cmd("g1", "w0", "c2", Some(7), claim);
    let (status, _, body) = post(
        &serde_json::to_vec(&stale).expect("json"),
        "application/json",
    );
    let err = json(&body);
    assert_eq!(
        (status, err["code"].clone(), err["current"].clone()),
        (409, "REVISION_MISMATCH".into(), 1.into())
    );
    assert!(err["message"].as_str().is_some_and(|m| !m.is_empty()));

    let (status, _, body) = request(
        "GET",
        &format!("{}/v1/groups/nope/events", server.base),
        &[],
        b"",
    );
    assert_eq!(
        (status, json(&body)["code"].clone()),
        (404, "NOT_FOUND".into())
    );
    let (status, _, _) = request(
        "GET",
        &format!("{}/v1/groups/g1/receipts/w0/never", server.base),
        &[],
        b"",
    );
    assert_eq!(status, 404);
    let (status, _, body) = request(
        "GET",
        &format!("{}/v1/groups/g1/events?after=x", server.base),
        &[],
        b"",
    );
    assert_eq!(
        (status, json(&body)["code"].clone()),
        (400, "MALFORMED".into())
    );

    let huge = vec![b'x'; 300 * 1024];
    let (status, _, body) = post(&huge, "application/json");
    assert_eq!(
        (status, json(&body)["code"].clone()),
        (400, "MALFORMED".into())
    );
    // None of that changed the log.
    assert_eq!(client.events(&id("g1"), 0, 100).expect("events").len(), 2);
}

/// An opaque value in a command's JSON is read exactly over HTTP: an object whose key
/// repeats and an integer beyond u64 are `MALFORMED`, named for what they are and placed in
/// the text, and the log is unchanged.
#[test]
fn an_opaque_value_is_read_exactly_over_http() {
    let server = TestServer::start();
    let _client = opened(&server, "g1", 1);
    let url = format!("{}/v1/groups/g1/commands", server.base);
    let text =
        serde_json::to_string(&cmd("g1", "w0", "x1", None, create_work("x1", &[]))).expect("json");
    let at = text.find(r#"{"do":"x1"}"#).expect("the spec") + 1;
    for (spec, said) in [
        (
            r#"{"do": 1, "do": "x1"}"#,
            format!("duplicate map key `do` at line 1 column {}", at + 10),
        ),
        (
            r#"{"do": 18446744073709551616}"#,
            format!(
                "integer out of range: 18446744073709551616 is not from -2^63 to 2^64 − 1 \
                 at line 1 column {}",
                at + 7
            ),
        ),
    ] {
        let body = text.replacen(r#"{"do":"x1"}"#, spec, 1);
        let (status, _, answer) = request(
            "POST",
            &url,
            &[("content-type", "application/json")],
            body.as_bytes(),
        );
        let answer = json(&answer);
        assert_eq!(
            (status, answer["code"].as_str()),
            (400, Some("MALFORMED")),
            "{answer}"
        );
        assert_eq!(
            answer["message"].as_str(),
            Some(format!("command JSON: {said}").as_str()),
            "{answer}"
        );
    }
    assert_eq!(replay(&server, "g1").cursor(), 1, "nothing was accepted");
}

#[test]
fn cbor_in_and_out() {
    let server = TestServer::start();
    let client = opened(&server, "g1", 1);
    let c = cmd("g1", "w0", "a1", None, create_work("x", &[]));
    let url = format!("{}/v1/groups/g1/commands", server.base);
    let headers = [
        ("content-type", "application/cbor"),
        ("accept", "application/cbor"),
    ];
    let (status, h, body) = request("POST", &url, &headers, &c.to_cbor().expect("cbor"));
    assert_eq!(status, 200);
    assert_eq!(
        h.get("content-type").map(|v| v.as_bytes()),
        Some(&b"application/cbor"[..])
    );
    let receipt: Receipt =
        canonical::from_slice(&body, canonical::Strictness::Canonical).expect("canonical receipt");
    assert_eq!(receipt.seq, 2);
    // The same command in JSON is the same content: a Duplicate.
    assert!(client.submit(&c).expect("duplicate").duplicate);
    let (_, _, body) = request(
        "GET",
        &format!("{}/v1/groups/g1/events", server.base),
        &[("accept", "application/cbor")],
        b"",
    );
    #[derive(serde::Deserialize)]
    struct Page {
        events: Vec<Event>,
    }
    let page: Page =
        canonical::from_slice(&body, canonical::Strictness::Canonical).expect("canonical");
    assert_eq!(page.events.len(), 2);
    let (status, _, body) = request(
        "GET",
        &format!("{}/v1/groups/g1/snapshots/latest", server.base),
        &[("accept", "application/json")],
        b"",
    );
    assert_eq!(status, 200);
    assert_eq!(json(&body)["schema"], "mwp.snapshot.v1");
    let (_, _, body) = request("GET", &format!("{}/v1/authority", server.base), &[], b"");
    assert_eq!(
        json(&body)["key"],
        client.authority_key().expect("key").to_hex()
    );
}

/// Reads `data:` lines of an SSE stream on a thread; sends each parsed event (the messages of
/// another type, such as `event: head`, are passed over as an SSE client does).
fn tail(base: &str, group: &str, after: u64) -> std::sync::mpsc::Receiver<Option<Event>> {
    let url = format!("{base}/v1/groups/{group}/events/stream?after={after}");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let resp = agent.get(&url).call().expect("stream opens");
        let reader = std::io::BufReader::new(resp.into_body().into_reader());
        let mut typed = false;
        for line in reader.lines() {
            let Ok(line) = line else { break };
            if line.starts_with("event:") {
                typed = true;
            } else if line.is_empty() {
                typed = false;
            } else if let Some(data) = line.strip_prefix("data:").filter(|_| !typed) {
                let event: Event = serde_json::from_str(data.trim()).expect("an event");
                if tx.send(Some(event)).is_err() {
                    return;
                }
            }
        }
        let _ = tx.send(None);
    });
    rx
}

fn next(rx: &std::sync::mpsc::Receiver<Option<Event>>) -> Option<Event> {
    rx.recv_timeout(std::time::Duration::from_secs(120))
        .expect("the stream answers")
}

#[test]
fn live_tail_resumes_after_n_and_follows_new_events_then_ends_on_shutdown() {
    let mut server = TestServer::start();
    let client = opened(&server, "g1", 1);
    client
        .submit(&cmd("g1", "w0", "a1", None, create_work("x", &[])))
        .expect("accepted");
    let rx = tail(&server.base, "g1", 1);
    assert_eq!(
        next(&rx).map(|e| e.seq),
        Some(2),
        "resumes strictly after 1"
    );
    client
        .submit(&cmd("g1", "w0", "a2", None, create_work("y", &[])))
        .expect("accepted");
    assert_eq!(
        next(&rx).map(|e| e.seq),
        Some(3),
        "a new event arrives live"
    );
    server.shutdown();
    assert_eq!(
        next(&rx),
        None,
        "the stream ends when the server shuts down"
    );
}

#[test]
fn the_tick_loop_expires_a_lease_signed_by_the_authority() {
    // The loop would look again only after a minute: the claim itself must wake it.
    let config = mwp_host::server::ServerConfig {
        tick_poll: std::time::Duration::from_secs(60),
        ..Default::default()
    };
    let service = MemoryService::generate().expect("key");
    let server = TestServer::with_config(Arc::new(service), config);
    let client = opened(&server, "g1", 1);
    client
        .submit(&cmd("g1", "w0", "c", None, create_work("x", &[])))
        .expect("created");
    let claim = Body::ClaimWork(ClaimWork {
        work: id("x"),
        lease_ms: 50,
        start_within_ms: 50,
    });
    client
        .submit(&cmd("g1", "w0", "k", Some(1), claim))
        .expect("claimed");
    let rx = tail(&server.base, "g1", 3);
    let expired = rx
        .recv_timeout(std::time::Duration::from_secs(45))
        .expect("expired well before the next poll, a minute away")
        .expect("an event");
    assert_eq!(expired.actor.as_str(), "@authority");
    let kind = serde_json::to_value(&expired.kind).expect("json");
    assert_eq!(kind["type"], "leases_expired");
    assert_eq!(kind["expired"][0]["work"], "x");
    // The item is claimable again; its lease is gone.
    let lease = mwp_core::lease::LeaseId::derive(&id("g1"), &id("x"), 1);
    let late = client.submit(&cmd(
        "g1",
        "w0",
        "s",
        None,
        Body::StartWork(StartWork {
            work: id("x"),
            lease,
        }),
    ));
    assert!(late.is_err());
}

/// A service whose `submit` reports that it started, then waits to be released: a command
/// held in flight (when `entered` is set). It counts the tick loop's deadline look-ups.
struct Held {
    inner: MemoryService,
    entered: std::sync::Mutex<Option<std::sync::mpsc::Sender<()>>>,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    deadline_lookups: std::sync::atomic::AtomicUsize,
}

impl mwp_host::service::AuthorityService for Held {
    fn submit(&self, cmd: &mwp_core::Command, now_ms: u64) -> mwp_core::Result<mwp_core::Decision> {
        if !matches!(cmd.body, Body::OpenGroup(_)) {
            if let Some(tx) = self.entered.lock().expect("lock").take() {
                let _ = tx.send(());
                let _ = self.release.lock().expect("lock").recv();
            }
        }
        self.inner.submit(cmd, now_ms)
    }
    fn events(&self, g: &mwp_core::Id, after: u64, limit: usize) -> mwp_core::Result<Vec<Event>> {
        self.inner.events(g, after, limit)
    }
    fn receipt(
        &self,
        g: &mwp_core::Id,
        a: &mwp_core::Id,
        b: &mwp_core::Id,
    ) -> mwp_core::Result<Option<Receipt>> {
        self.inner.receipt(g, a, b)
    }
    fn latest_snapshot(&self, g: &mwp_core::Id) -> mwp_core::Result<Vec<u8>> {
        self.inner.latest_snapshot(g)
    }
    fn groups(&self) -> mwp_core::Result<Vec<mwp_core::Id>> {
        self.inner.groups()
    }
    fn head_seq(&self, g: &mwp_core::Id) -> mwp_core::Result<u64> {
        self.inner.head_seq(g)
    }
    fn next_deadline(&self) -> mwp_core::Result<Option<(mwp_core::Id, u64)>> {
        self.deadline_lookups
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.next_deadline()
    }
    fn authority_key(&self) -> mwp_core::PublicKey {
        self.inner.authority_key()
    }
}

#[test]
fn commands_that_claim_nothing_leave_the_tick_loop_asleep() {
    let (_, release_rx) = std::sync::mpsc::channel();
    let service = Arc::new(Held {
        inner: MemoryService::generate().expect("key"),
        entered: std::sync::Mutex::new(None),
        release: std::sync::Mutex::new(release_rx),
        deadline_lookups: Default::default(),
    });
    let server = TestServer::with_dyn(service.clone());
    let client = opened(&server, "g1", 1);
    let lookups = || {
        service
            .deadline_lookups
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    let (before, start) = (lookups(), std::time::Instant::now());
    for i in 0..50 {
        client
            .submit(&cmd(
                "g1",
                "w0",
                &format!("c{i}"),
                None,
                create_work(&format!("x{i}"), &[]),
            ))
            .expect("created");
    }
    // Only the loop's own polls, one every `tick_poll` (500 ms), may have looked.
    let polls = usize::try_from(start.elapsed().as_millis() / 500).expect("small") + 2;
    let looked = lookups() - before;
    assert!(
        looked <= polls,
        "{looked} deadline look-ups for 50 created items ({polls} polls)"
    );
}

#[test]
fn shutdown_finishes_a_command_in_flight() {
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel();
    let held = Held {
        inner: MemoryService::generate().expect("key"),
        entered: std::sync::Mutex::new(Some(entered_tx)),
        release: std::sync::Mutex::new(release_rx),
        deadline_lookups: Default::default(),
    };
    let mut server = TestServer::with_dyn(Arc::new(held));
    let client = opened(&server, "g1", 1);
    let in_flight = std::thread::spawn(move || {
        client.submit(&cmd("g1", "w0", "a1", None, create_work("x", &[])))
    });
    entered_rx.recv().expect("the command reached the store");
    // Shut down while the command is being decided; release it from another thread once the
    // server has stopped accepting connections, so the release comes after shutdown began.
    let addr = server.base.trim_start_matches("http://").to_owned();
    let releaser = std::thread::spawn(move || {
        let refused = (0..600).any(|_| {
            let gone = std::net::TcpStream::connect(&addr).is_err();
            if !gone {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            gone
        });
        release_tx.send(()).expect("release");
        refused
    });
    server.shutdown();
    assert!(
        releaser.join().expect("releaser"),
        "the server stopped accepting connections while a command was in flight"
    );
    let answer = in_flight
        .join()
        .expect("thread")
        .expect("the command in flight was answered");
    assert_eq!(answer.receipt.seq, 2);
}

#[test]
fn the_dashboard_is_embedded_in_the_binary() {
    // A server without `--dashboard`: what a fresh machine gets.
    let server = TestServer::start();
    let (status, headers, body) = request("GET", &format!("{}/", server.base), &[], b"");
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    let html = String::from_utf8(body).expect("utf-8");
    assert!(html.contains("<title>mwp dashboard</title>"), "{html}");
    assert!(html.contains("dashboard.js") && html.contains("lib/src/browser.js"));

    let wasm_url = format!("{}/lib/pkg/mwp_wasm_bg.wasm", server.base);
    let (status, headers, body) = request("GET", &wasm_url, &[], b"");
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/wasm");
    assert!(body.starts_with(b"\0asm"), "a WebAssembly module");
    assert!(
        body.len() > 100_000,
        "the whole module, {} bytes",
        body.len()
    );

    // The glue and the package's modules load as JavaScript modules.
    for path in [
        "/dashboard.js",
        "/views.js",
        "/lib/src/browser.js",
        "/lib/pkg/mwp_wasm.js",
    ] {
        let (status, headers, _) = request("GET", &format!("{}{path}", server.base), &[], b"");
        assert_eq!(status, 200, "{path}");
        assert_eq!(
            headers["content-type"], "text/javascript; charset=utf-8",
            "{path}"
        );
    }

    // Revalidation: the ETag answers 304 with no body; `no-cache` makes browsers ask.
    let etag = headers["etag"].to_str().expect("ascii").to_owned();
    assert_eq!(headers["cache-control"], "no-cache");
    let (status, _, body) = request("GET", &wasm_url, &[("if-none-match", &etag)], b"");
    assert_eq!((status, body.len()), (304, 0));
    let (status, _, _) = request("GET", &wasm_url, &[("if-none-match", "\"other\"")], b"");
    assert_eq!(status, 200);

    // Unknown paths are 404s with a JSON error, API paths are never static files.
    let (status, _, body) = request("GET", &format!("{}/nope.js", server.base), &[], b"");
    assert_eq!(status, 404);
    assert_eq!(json(&body)["code"], "NOT_FOUND");
}

/// `mwp serve --dashboard DIR` serves only regular files that lie in DIR, read off the
/// server's request threads and under a size cap: a FIFO, a device, a link out of DIR or to
/// nothing and a file over the cap are 404 `NOT_FOUND` (the answer does not say which), each
/// with a line in the server's log, and the server keeps answering after them.
#[test]
fn a_dashboard_directory_serves_only_its_own_regular_files() {
    use std::io::Read;
    use std::sync::Mutex;

    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("dashboard");
    std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
    std::fs::write(dir.join("index.html"), "<title>dev</title>").expect("write");
    std::fs::write(dir.join("app.js"), "export {}").expect("write");
    let secret = tmp.path().join("secret.txt");
    std::fs::write(&secret, "not the dashboard's").expect("write");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        dir.join("fifo.js"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.js")).expect("symlink");
    std::os::unix::fs::symlink(&secret, dir.join("link.txt")).expect("symlink");
    std::os::unix::fs::symlink(tmp.path().join("gone"), dir.join("dangling.js")).expect("symlink");
    // A link that stays in DIR is followed.
    std::os::unix::fs::symlink("../app.js", dir.join("sub/app.js")).expect("symlink");
    // Over the cap, sparse: refused by its size, unread.
    std::fs::File::create(dir.join("big.wasm"))
        .and_then(|f| f.set_len(mwp_host::server::assets::MAX_DIR_FILE_BYTES + 1))
        .expect("sparse");

    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mwp"))
        .args([
            "serve",
            "--store",
            "memory:",
            "--addr",
            "127.0.0.1:0",
            "--dashboard",
        ])
        .arg(&dir)
        .env("MWP_LOG", "info")
        .env("MWP_LOG_FORMAT", "text")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut reader = std::io::BufReader::new(child.stderr.take().expect("piped"));
    let child = Kill(child);
    let (base, _) = read_address(&mut reader);
    let log = Arc::new(Mutex::new(String::new()));
    let log_w = Arc::clone(&log);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            log_w
                .lock()
                .expect("log")
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });

    // Every request is bounded: a server stuck on a file fails the test, it does not hang it.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(10)))
        .build()
        .into();
    let get = |path: &str| -> (u16, Vec<u8>) {
        let mut resp = agent
            .get(&format!("{base}{path}"))
            .call()
            .unwrap_or_else(|e| panic!("GET {path} is answered in time: {e}"));
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .with_config()
            .limit(1 << 20)
            .read_to_vec()
            .unwrap_or_else(|e| panic!("GET {path}: the body is read: {e}"));
        (status, body)
    };

    assert_eq!(get("/"), (200, b"<title>dev</title>".to_vec()));
    assert_eq!(get("/sub/app.js"), (200, b"export {}".to_vec()));
    for path in [
        "/fifo.js",
        "/zero.js",
        "/link.txt",
        "/dangling.js",
        "/big.wasm",
        "/sub",
        "/nope.js",
    ] {
        let (status, body) = get(path);
        assert_eq!(status, 404, "{path}");
        let body: serde_json::Value = serde_json::from_slice(&body).expect("a JSON error");
        assert_eq!(body["code"], "NOT_FOUND", "{path}");
        assert_eq!(
            body["message"],
            format!("nothing is served at {path}; see docs/http.md for the routes"),
            "{path}: the answer does not tell the filesystem"
        );
    }
    // The server still answers, and SIGTERM still stops it.
    let (status, _) = get("/healthz");
    assert_eq!(status, 200);

    // The operator reads why in the log; an absent file is not worth a line.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let want = [
        "fifo.js: it is a FIFO, not a regular file",
        "zero.js: it is a character device, not a regular file",
        "link.txt: it leads out of the directory",
        "dangling.js: it is a link that leads to nothing",
        "big.wasm: it is 33554433 bytes, over the 33554432 bytes it may hold",
    ];
    loop {
        let text = log.lock().expect("log").clone();
        if want.iter().all(|w| text.contains(w)) {
            assert!(!text.contains("nope.js"), "{text}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the log names each refused file: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = rustix::process::Pid::from_child(&child.0);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let mut child = child;
    let status = {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Some(status) = child.0.try_wait().expect("wait") {
                break status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "SIGTERM stops the server"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    assert!(status.success(), "{status}");
}
