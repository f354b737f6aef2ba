//! Signed heads over real HTTP (SPEC §8a, docs/http.md "Signed heads"): the head of an events
//! page and of `GET …/head` verifies under `GET /v1/authority`'s key and vouches for the
//! page's events in a replica; the head route keeps the access rules; a live tail sends
//! `event: head` messages, one of them after an idle period covering the last event; and
//! however hard the head is read, a group's head is signed at most once per 100 ms (counted
//! by `mwp_heads_signed_total`), and never when nobody reads.

mod e2e_support;

use std::io::{BufRead, BufReader};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use e2e_support::*;
use mwp_core::head::SignedHead;
use mwp_core::replica::{HeadOffer, Offer, Replica};
use mwp_core::signed_read::SignedRead;
use mwp_core::{canonical, Event, PublicKey};
use mwp_host::memory_service::MemoryService;
use mwp_host::server::auth::{Access, OpenGroups, Tokens};
use mwp_host::server::{now_ms, ServerConfig};
use serde::Deserialize;
use serde_json::Value;

const READ: &str = "read-token-0123456789";

fn mwp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mwp"))
}

/// `mwp_heads_signed_total` of the server at `base`.
fn heads_signed(base: &str) -> u64 {
    let (status, _, body) = request("GET", &format!("{base}/metrics"), &[], b"");
    assert_eq!(status, 200);
    let text = String::from_utf8(body).expect("text");
    text.lines()
        .find_map(|l| l.strip_prefix("mwp_heads_signed_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no mwp_heads_signed_total in\n{text}"))
}

/// Commands `c{from}..c{to}` from `alice`, each creating a work item.
fn commit(base: &str, group: &str, from: usize, to: usize) {
    let client = mwp_host::server::client::Client::new(base);
    for n in from..to {
        let w = format!("w{n}");
        client
            .submit(&cmd(
                group,
                "alice",
                &format!("c{n}"),
                None,
                create_work(&w, &[]),
            ))
            .expect("accepted");
    }
}

#[derive(Deserialize)]
struct CborPage {
    events: Vec<Event>,
    head: SignedHead,
}

/// Starts `mwp serve` on a free port (a memory store), as an operator would.
fn serve() -> (std::process::Child, String) {
    spawn_serve(mwp().args(["serve", "--store", "memory:", "--addr", "127.0.0.1:0"]))
}

#[test]
fn a_page_carries_a_head_that_verifies_and_vouches_for_its_events() {
    let (mut child, base) = serve();
    let client = mwp_host::server::client::Client::new(base.clone());
    let authority = client.authority_key().expect("GET /v1/authority");
    client
        .submit(&open_group("g1", authority, &["w0".into()]))
        .expect("opens");
    assert_eq!(heads_signed(&base), 0, "accepts sign no head");
    commit(&base, "g1", 1, 6);
    assert_eq!(heads_signed(&base), 0, "accepts sign no head");

    // The page's head is the first one signed: it covers the whole log.
    let page = client.page(&id("g1"), 0, 1000).expect("a page");
    let head = page.head.expect("every page carries a head");
    assert_eq!(page.events.len(), 6);
    assert_eq!((head.seq, head.id), (6, page.events[5].id));
    head.verify(&authority, &id("g1"))
        .expect("verifies under the authority key");
    let mut replica = Replica::new(id("g1"));
    for e in page.events.clone() {
        assert!(matches!(replica.offer(e), Offer::Applied { .. }));
    }
    assert!(replica.is_provisional(6));
    assert!(matches!(
        replica.offer_head(&head, &authority),
        Ok(HeadOffer::Verified { through: 6 })
    ));
    assert_eq!(replica.verified_through(), 6);
    // Under another key, the same head is HEAD_INVALID.
    let mallory = key("mallory").public();
    let err = Replica::new(id("g1"))
        .offer_head(&head, &mallory)
        .expect_err("another key");
    assert_eq!(err.code.as_str(), "HEAD_INVALID");

    // The same map in CBOR, and GET …/head: the same head (nothing moved, nothing signed).
    let (status, _, body) = request(
        "GET",
        &format!("{base}/v1/groups/g1/events?after=4"),
        &[("accept", "application/cbor")],
        b"",
    );
    assert_eq!(status, 200);
    let cbor: CborPage =
        canonical::from_slice(&body, canonical::Strictness::Canonical).expect("a CBOR page");
    assert_eq!(cbor.events, page.events[4..]);
    assert_eq!(cbor.head, head);
    assert_eq!(client.head(&id("g1")).expect("GET /head"), head);
    let (status, _, body) = request(
        "GET",
        &format!("{base}/v1/groups/g1/head"),
        &[("accept", "application/cbor")],
        b"",
    );
    assert_eq!(status, 200);
    assert_eq!(SignedHead::from_cbor(&body).expect("a CBOR head"), head);
    assert_eq!(heads_signed(&base), 1);

    // mwp verify --server checks the head under the server's key and a pinned one.
    let verify = |extra: &[&str]| {
        mwp()
            .args(["verify", "--server", &base, "--group", "g1", "--json"])
            .args(extra)
            .output()
            .expect("runs")
    };
    let good = verify(&[]);
    assert_eq!(good.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&good.stdout).expect("JSON");
    assert_eq!(report["verified_through"], 6, "{report}");
    let pinned = verify(&["--authority-key", &authority.to_hex()]);
    assert_eq!(pinned.status.code(), Some(0));
    let wrong = verify(&["--authority-key", &mallory.to_hex()]);
    assert_eq!(wrong.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&wrong.stdout).expect("JSON");
    assert!(
        report["error"]
            .as_str()
            .is_some_and(|e| e.contains("signed head does not verify")),
        "{report}"
    );

    // An unknown group: 404 NOT_FOUND on both routes; a bad group id: 400.
    for target in ["/v1/groups/nope/head", "/v1/groups/nope/events"] {
        let (status, _, body) = request("GET", &format!("{base}{target}"), &[], b"");
        assert_eq!(status, 404, "{target}");
        let err: Value = serde_json::from_slice(&body).expect("JSON error");
        assert_eq!(err["code"], "NOT_FOUND");
    }
    let (status, _, _) = request("GET", &format!("{base}/v1/groups/no%20pe/head"), &[], b"");
    assert_eq!(status, 400);
    let (status, _, _) = request(
        "GET",
        &format!("{base}/v1/groups/g1/head?after=1"),
        &[],
        b"",
    );
    assert_eq!(status, 400, "the head route takes no query");
    assert_eq!(heads_signed(&base), 1, "refused reads sign nothing");

    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    assert_eq!(child.wait().expect("exits").code(), Some(0));
}

#[test]
fn the_head_route_has_the_access_rules_of_the_events_route() {
    let config = ServerConfig {
        access: Access {
            tokens: Tokens::parse(&format!("read {READ}\n")).expect("tokens"),
            public_read: false,
            open_groups: OpenGroups::Any,
            ..Access::default()
        },
        ..ServerConfig::default()
    };
    let server = TestServer::with_config(Arc::new(MemoryService::generate().expect("key")), config);
    opened(&server, "g1", 1);
    opened(&server, "g2", 1);
    let url = |g: &str| format!("{}/v1/groups/{g}/head", server.base);
    let (status, _, body) = request("GET", &url("g1"), &[], b"");
    assert_eq!(status, 401, "{}", String::from_utf8_lossy(&body));
    let err: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(err["code"], "UNAUTHORIZED");
    let bearer = format!("Bearer {READ}");
    let (status, _, _) = request("GET", &url("g1"), &[("authorization", &bearer)], b"");
    assert_eq!(status, 200);
    let (status, _, _) = request("GET", &url("nope"), &[("authorization", &bearer)], b"");
    assert_eq!(status, 404);
    // A member-signed read reads its own group's head, not another's.
    let sign = |target: &str| {
        SignedRead::sign("GET", target, id("w0"), now_ms(), &key("w0"))
            .expect("signs")
            .header_value()
    };
    let own = sign("/v1/groups/g1/head");
    let (status, _, _) = request("GET", &url("g1"), &[("authorization", &own)], b"");
    assert_eq!(status, 200);
    let other = sign("/v1/groups/g2/head");
    let (status, _, _) = request("GET", &url("g2"), &[("authorization", &other)], b"");
    assert_eq!(status, 200, "w0 is a member of g2 as well");
    let bad = "Bearer not-a-token-0123456789";
    let (status, _, _) = request("GET", &url("g1"), &[("authorization", bad)], b"");
    assert_eq!(status, 401);
}

/// One message of a live tail.
#[derive(Debug)]
enum Message {
    Event(Box<Event>),
    Head(SignedHead),
}

/// Follows the live tail of `group` from `after` on a thread, sending each message.
fn follow(base: &str, group: &str, after: u64) -> mpsc::Receiver<Message> {
    let client = mwp_host::server::client::Client::new(base);
    let body = client.stream(&id(group), after, None).expect("a stream");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let reader = BufReader::new(body);
        let mut kind = String::new();
        for line in reader.lines() {
            let Ok(line) = line else { return };
            if let Some(k) = line.strip_prefix("event: ") {
                k.clone_into(&mut kind);
            } else if let Some(data) = line.strip_prefix("data: ") {
                let message = if kind == "head" {
                    Message::Head(SignedHead::from_json(data).expect("a signed head"))
                } else {
                    Message::Event(Box::new(serde_json::from_str(data).expect("an event")))
                };
                if tx.send(message).is_err() {
                    return;
                }
                kind.clear();
            }
        }
    });
    rx
}

/// Receives messages into `replica` (every head offered under `authority`) until the heads
/// received vouch for `seq` (a head ahead of the events is checked when they arrive);
/// returns the heads seen.
fn until_head(
    rx: &mpsc::Receiver<Message>,
    replica: &mut Replica,
    authority: &PublicKey,
    seq: u64,
) -> Vec<SignedHead> {
    let mut heads = Vec::new();
    loop {
        let message = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("no head at seq {seq} came ({e}); heads: {heads:?}"));
        match message {
            Message::Event(e) => {
                let at = e.seq;
                assert!(
                    matches!(replica.offer(*e), Offer::Applied { .. }),
                    "seq {at} applies"
                );
            }
            Message::Head(h) => {
                h.verify(authority, &id("g1")).expect("verifies");
                assert!(
                    heads.last().is_none_or(|p: &SignedHead| p.seq < h.seq),
                    "each head covers more than the last one sent"
                );
                replica
                    .offer_head(&h, authority)
                    .expect("matches the chain");
                heads.push(h);
            }
        }
        if replica.verified_through() >= seq {
            return heads;
        }
    }
}

#[test]
fn the_live_tail_sends_heads_that_verify_and_one_after_an_idle_period() {
    let server = TestServer::start();
    let client = opened(&server, "g1", 1);
    let authority = client.authority_key().expect("key");
    commit(&server.base, "g1", 1, 3);
    let rx = follow(&server.base, "g1", 0);
    let mut replica = Replica::new(id("g1"));
    let heads = until_head(&rx, &mut replica, &authority, 3);
    assert_eq!(replica.verified_through(), 3);
    assert_eq!(heads.last().map(|h| h.seq), Some(3));

    // A burst after a quiet spell: the tail signs a fresh head after the burst's first batch
    // (one is due), and the batches after it within 100 ms get that head, behind. Only the
    // idle rule sends one covering seq 8.
    std::thread::sleep(Duration::from_millis(150));
    commit(&server.base, "g1", 3, 8);
    until_head(&rx, &mut replica, &authority, 8);
    assert_eq!(
        replica.verified_through(),
        8,
        "the idle head covers the last event"
    );
    assert!(!replica.is_provisional(8));

    // While events flow the tail sends heads too, each covering more.
    let more = std::thread::spawn({
        let base = server.base.clone();
        move || commit(&base, "g1", 8, 60)
    });
    let heads = until_head(&rx, &mut replica, &authority, 60);
    more.join().expect("committed");
    assert_eq!(replica.verified_through(), 60);
    assert!(!heads.is_empty());
}

#[test]
fn heads_are_signed_at_most_once_per_100_ms_however_hard_they_are_read() {
    let server = TestServer::start();
    let client = opened(&server, "g1", 1);
    let authority = client.authority_key().expect("key");
    // Accepts with nobody reading sign nothing.
    commit(&server.base, "g1", 1, 20);
    assert_eq!(heads_signed(&server.base), 0);

    let stop = Arc::new(AtomicBool::new(false));
    let committer = std::thread::spawn({
        let (base, stop) = (server.base.clone(), Arc::clone(&stop));
        move || {
            let mut n = 20;
            while !stop.load(Ordering::SeqCst) {
                commit(&base, "g1", n, n + 1);
                n += 1;
            }
            n
        }
    });
    let started = Instant::now();
    let mut last_seq = 0;
    for _ in 0..200 {
        let head = client.head(&id("g1")).expect("GET /head");
        head.verify(&authority, &id("g1")).expect("verifies");
        assert!(head.seq >= last_seq, "heads never go back");
        last_seq = head.seq;
        // Pages carry heads from the same rule.
        client.page(&id("g1"), head.seq, 1).expect("a page");
    }
    stop.store(true, Ordering::SeqCst);
    let committed = committer.join().expect("committer");
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).expect("ms");
    let signed = heads_signed(&server.base);
    assert!(committed > 21, "commands were accepted meanwhile");
    assert!(signed >= 1);
    assert!(
        signed <= elapsed_ms / 100 + 2,
        "{signed} signatures in {elapsed_ms} ms of 400 reads"
    );
}
