//! The HTTP boundary of `mwp serve` (docs/http.md, "Limits" and "Browser safety"), over
//! real HTTP on 127.0.0.1: strict query values, the Host check, CORS, stalled connections,
//! the connection cap, the live-tail caps, the tick loop's backoff and `max_groups`. That a
//! commit wakes only its own group's tails is tested on the signal itself
//! (`server::tails::tests`) and measured in `examples/tail_fanout.rs`.

mod e2e_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use e2e_support::*;
use mwp_core::command::ClaimWork;
use mwp_core::{Body, Code, Command, Decision, Event, Id, PublicKey, Receipt};
use mwp_host::cli::store::{open as open_store, Options};
use mwp_host::cli::StoreUrl;
use mwp_host::memory_service::MemoryService;
use mwp_host::server::ServerConfig;
use mwp_host::service::AuthorityService;
use proptest::prelude::*;
use serde_json::Value;

/// A generous bound for anything the tests wait for; never a timing claim.
const PATIENCE: Duration = Duration::from_secs(30);

/// Waits (bounded) until `done` holds.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < until, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One raw HTTP/1.1 exchange on a fresh connection: (status, head, body).
fn raw(addr: SocketAddr, request: &str) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(PATIENCE)).expect("timeout");
    s.write_all(request.as_bytes()).expect("writes");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("reads the answer");
    parse(&out)
}

fn parse(out: &[u8]) -> (u16, String, Vec<u8>) {
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete head");
    let head = String::from_utf8_lossy(&out[..split]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    (status, head, out[split + 4..].to_vec())
}

fn get(addr: SocketAddr, path: &str, extra: &str) -> (u16, String, Vec<u8>) {
    raw(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n"),
    )
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body).expect("a JSON body")
}

fn addr(server: &TestServer) -> SocketAddr {
    server.server().addr()
}

fn file_server(dir: &std::path::Path) -> TestServer {
    let options = Options {
        create: true,
        ..Default::default()
    };
    let service = open_store(&StoreUrl::File(dir.to_path_buf()), &options).expect("opens");
    TestServer::with_dyn(service)
}

#[test]
fn a_cursor_at_the_top_of_u64_is_an_empty_page_on_every_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    for server in [TestServer::start(), file_server(dir.path())] {
        opened(&server, "g1", 1);
        let a = addr(&server);
        for q in [
            "after=18446744073709551615",
            "after=18446744073709551614",
            "after=18446744073709551615&limit=18446744073709551615",
            "after=1&limit=18446744073709551615",
            "after=0&limit=0",
        ] {
            let (status, _, body) = get(a, &format!("/v1/groups/g1/events?{q}"), "");
            assert_eq!(status, 200, "{q}: {}", String::from_utf8_lossy(&body));
            let events = json(&body)["events"].as_array().expect("events").len();
            assert!(events <= 1, "{q}");
        }
        // A live tail from there starts (and would follow new events).
        assert_eq!(
            status_of(
                a,
                "GET",
                "/v1/groups/g1/events/stream?after=18446744073709551615"
            ),
            Some(200)
        );
        let (status, _, _) = get(a, "/v1/authority", "");
        assert_eq!(status, 200);
    }
}

/// A receipt read of a group the store does not hold says the group does not exist, on
/// every store (the file store answered "no command with action … was accepted").
#[test]
fn a_receipt_of_an_unknown_group_names_the_group_on_every_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    for server in [TestServer::start(), file_server(dir.path())] {
        opened(&server, "g1", 1);
        let a = addr(&server);
        let (status, _, body) = get(a, "/v1/groups/nope/receipts/alice/open", "");
        let err = json(&body);
        assert_eq!(
            (status, err["code"].as_str()),
            (404, Some("NOT_FOUND")),
            "{err}"
        );
        let message = err["message"].as_str().expect("message");
        assert!(message.contains("group nope does not exist"), "{err}");
        // A group it holds, an action never sent: that action is named.
        let (status, _, body) = get(a, "/v1/groups/g1/receipts/alice/never", "");
        let err = json(&body);
        assert_eq!(status, 404, "{err}");
        assert!(
            err["message"].as_str().expect("message").contains("never"),
            "{err}"
        );
    }
}

#[test]
fn malformed_query_values_are_400_naming_the_parameter() {
    let server = TestServer::start();
    opened(&server, "g1", 1);
    let a = addr(&server);
    let cases = [
        ("/v1/groups/g1/events?after=-1", "after"),
        ("/v1/groups/g1/events?after=abc", "after"),
        ("/v1/groups/g1/events?after=", "after"),
        ("/v1/groups/g1/events?after=18446744073709551616", "after"),
        ("/v1/groups/g1/events?after=1&after=2", "after"),
        ("/v1/groups/g1/events?limit=-5", "limit"),
        ("/v1/groups/g1/events?limit=1.5", "limit"),
        ("/v1/groups/g1/events?cursor=3", "cursor"),
        ("/v1/groups/g1/events/stream?limit=3", "limit"),
        ("/v1/groups/g1/events/stream?after=x", "after"),
        ("/v1/groups?x=1", "x"),
        ("/v1/authority?debug", "debug"),
        ("/v1/groups/g1/snapshots/latest?seq=1", "seq"),
    ];
    for (path, param) in cases {
        let (status, _, body) = get(a, path, "Accept: application/json\r\n");
        assert_eq!(status, 400, "{path}");
        let err = json(&body);
        assert_eq!(err["code"], "MALFORMED", "{path}");
        assert_eq!(err["parameter"], param, "{path}: {err}");
        assert!(
            err["message"].as_str().expect("message").contains(param),
            "{path}: {err}"
        );
    }
    let (status, _, body) = get(a, "/v1/groups/g1/events/stream", "Last-Event-ID: -1\r\n");
    assert_eq!(status, 400);
    assert_eq!(json(&body)["header"], "last-event-id");
    // The dashboard's pages keep their query strings.
    let (status, _, _) = get(a, "/?group=g1", "");
    assert_eq!(status, 200);
}

/// A query value the property test tries.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("18446744073709551615".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("9223372036854775807".to_owned()),
        Just("9223372036854775808".to_owned()),
        Just("0".to_owned()),
        Just(String::new()),
        Just("-1".to_owned()),
        Just("%00".to_owned()),
        Just("1e309".to_owned()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        "[0-9]{20,40}",
        "[a-zA-Z0-9%+._~-]{0,12}",
    ]
}

/// A path segment the property test tries: real names, edges, and random text.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("g1".to_owned()),
        Just("alice".to_owned()),
        Just("open".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("%FF".to_owned()),
        Just("..".to_owned()),
        Just("%2e%2e".to_owned()),
        Just(String::new()),
        "[a-zA-Z0-9._~%-]{1,70}",
    ]
}

/// A request line's target over every route shape, with a random query.
fn target() -> impl Strategy<Value = (String, String)> {
    let route = (0usize..8, segment(), segment(), segment()).prop_map(|(r, a, b, c)| match r {
        0 => "/v1/authority".to_owned(),
        1 => "/v1/groups".to_owned(),
        2 => format!("/v1/groups/{a}/events"),
        3 => format!("/v1/groups/{a}/events/stream"),
        4 => format!("/v1/groups/{a}/receipts/{b}/{c}"),
        5 => format!("/v1/groups/{a}/snapshots/latest"),
        6 => format!("/v1/groups/{a}/commands"),
        _ => format!("/{a}/{b}"),
    });
    let key = prop_oneof![
        Just("after".to_owned()),
        Just("limit".to_owned()),
        "[a-z]{1,6}"
    ];
    let query = proptest::collection::vec((key, value()), 0..4).prop_map(|kv| {
        kv.into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&")
    });
    let method = prop_oneof![Just("GET".to_owned()), Just("POST".to_owned())];
    (route, query, method).prop_map(|(route, query, method)| {
        let target = if query.is_empty() {
            route
        } else {
            format!("{route}?{query}")
        };
        (method, target)
    })
}

/// Sends one request and reads only the status line (a live tail's body never ends).
fn status_of(addr: SocketAddr, method: &str, target: &str) -> Option<u16> {
    let mut s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(PATIENCE)).expect("timeout");
    let body = if method == "POST" { "{}" } else { "" };
    let req = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("writes");
    let mut first = [0u8; 12];
    s.read_exact(&mut first).ok()?;
    let line = String::from_utf8_lossy(&first).into_owned();
    line.get(9..12)?.parse().ok()
}

#[test]
fn no_input_reaches_a_5xx_and_the_server_keeps_answering() {
    let dir = tempfile::tempdir().expect("tempdir");
    let servers = [TestServer::start(), file_server(dir.path())];
    for server in &servers {
        let client = opened(server, "g1", 1);
        client
            .submit(&cmd("g1", "w0", "a1", None, create_work("x", &[])))
            .expect("created");
    }
    let addrs: Vec<SocketAddr> = servers.iter().map(addr).collect();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 160,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&target(), |(method, target)| {
            for a in &addrs {
                // A target hyper refuses to parse is answered 400 by hyper itself.
                let status = status_of(*a, &method, &target);
                if let Some(status) = status {
                    prop_assert!(
                        (200..500).contains(&status),
                        "{method} {target} answered {status}"
                    );
                }
            }
            Ok(())
        })
        .expect("only 2xx and 4xx answers");
    for a in addrs {
        let (status, _, _) = get(a, "/v1/authority", "");
        assert_eq!(status, 200, "still answering");
    }
}

#[test]
fn only_the_servers_own_names_are_answered() {
    let server = TestServer::start();
    let a = addr(&server);
    let port = a.port();
    let ask = |host: Option<&str>| {
        let host = host.map_or(String::new(), |h| format!("Host: {h}\r\n"));
        raw(
            a,
            &format!("GET /v1/authority HTTP/1.1\r\n{host}Connection: close\r\n\r\n"),
        )
    };
    assert_eq!(ask(Some(&format!("127.0.0.1:{port}"))).0, 200);
    assert_eq!(ask(Some(&format!("localhost:{port}"))).0, 200);
    for bad in [
        format!("evil.example:{port}"),
        "evil.example".to_owned(),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        format!("127.0.0.2:{port}"),
    ] {
        let (status, _, body) = ask(Some(&bad));
        assert_eq!(status, 421, "{bad}");
        let err = json(&body);
        assert_eq!(err["code"], "MALFORMED");
        assert_eq!(err["header"], "host");
        assert!(err["message"].as_str().expect("message").contains(&bad));
    }
    // Static files too: a rebound page cannot read the dashboard either.
    let (status, _, _) = raw(
        a,
        "GET / HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 421);
    // HTTP/1.0 without Host.
    let (status, _, _) = raw(a, "GET /v1/authority HTTP/1.0\r\n\r\n");
    assert_eq!(status, 421);
    // An absolute-form target names the server, not `Host` (RFC 9112, section 3.2.2).
    for (target, host, want) in [
        (
            format!("http://127.0.0.1:{port}/v1/authority"),
            "evil.example",
            200,
        ),
        (
            "http://evil.example/v1/authority".to_owned(),
            &*format!("127.0.0.1:{port}"),
            421,
        ),
        (
            "http://evil.example/v1/authority".to_owned(),
            "evil.example",
            421,
        ),
    ] {
        let (status, _, _) = raw(
            a,
            &format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        );
        assert_eq!(status, want, "{target} with Host {host}");
    }

    let config = ServerConfig {
        public_hosts: vec!["mwp.example".into(), "ops.example:8443".into()],
        ..Default::default()
    };
    let server = TestServer::with_config(Arc::new(MemoryService::generate().expect("key")), config);
    let a = addr(&server);
    for (host, want) in [
        ("mwp.example", 200),
        ("MWP.example:443", 200),
        ("ops.example:8443", 200),
        ("ops.example", 421),
        ("other.example", 421),
    ] {
        let (status, _, _) = raw(
            a,
            &format!("GET /v1/authority HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        );
        assert_eq!(status, want, "{host}");
    }
}

fn preflight(a: SocketAddr, origin: &str) -> (u16, String, Vec<u8>) {
    raw(
        a,
        &format!(
            "OPTIONS /v1/groups/g1/commands HTTP/1.1\r\nHost: {a}\r\nOrigin: {origin}\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type\r\nConnection: close\r\n\r\n"
        ),
    )
}

#[test]
fn cors_is_off_by_default_and_names_only_the_allowed_origins() {
    let server = TestServer::start();
    let a = addr(&server);
    let (_, head, _) = preflight(a, "https://ops.example");
    assert_eq!(header(&head, "access-control-allow-origin"), None);
    let (status, head, _) = get(a, "/v1/authority", "Origin: https://ops.example\r\n");
    assert_eq!(status, 200);
    assert_eq!(header(&head, "access-control-allow-origin"), None);

    let config = ServerConfig {
        cors_origins: vec!["https://ops.example".into()],
        ..Default::default()
    };
    let server = TestServer::with_config(Arc::new(MemoryService::generate().expect("key")), config);
    let a = addr(&server);
    let (status, head, _) = preflight(a, "https://ops.example");
    assert!((200..300).contains(&status), "{head}");
    assert_eq!(
        header(&head, "access-control-allow-origin"),
        Some("https://ops.example")
    );
    let methods = header(&head, "access-control-allow-methods").expect("methods");
    assert!(methods.contains("POST"), "{methods}");
    let (_, head, _) = get(a, "/v1/authority", "Origin: https://ops.example\r\n");
    assert_eq!(
        header(&head, "access-control-allow-origin"),
        Some("https://ops.example")
    );
    let (_, head, _) = get(a, "/v1/authority", "Origin: https://evil.example\r\n");
    assert_eq!(header(&head, "access-control-allow-origin"), None);
    let (_, head, _) = preflight(a, "https://evil.example");
    assert_eq!(header(&head, "access-control-allow-origin"), None);
}

#[test]
fn three_hundred_stalled_connections_do_not_stop_a_normal_client() {
    let server = TestServer::start();
    let a = addr(&server);
    let mut stalled = Vec::new();
    for i in 0..300 {
        let mut s = TcpStream::connect(a).expect("connects");
        if i % 2 == 1 {
            // Half a request head, never finished.
            s.write_all(format!("GET /v1/authority HTTP/1.1\r\nHost: {a}\r\nX-Slow:").as_bytes())
                .expect("writes");
        }
        stalled.push(s);
    }
    wait_until("the server holds the 300 connections", || {
        server.server().open_connections() >= 300
    });
    // Answered within a generous bound (the read timeout), while all 300 stay open.
    let (status, _, body) = get(a, "/v1/authority", "");
    assert_eq!(status, 200);
    assert!(json(&body)["key"].is_string());
    assert!(server.server().open_connections() >= 300);
    drop(stalled);
}

#[test]
fn a_connection_that_never_finishes_its_headers_is_closed() {
    let config = ServerConfig {
        header_read_timeout: Duration::from_millis(200),
        ..Default::default()
    };
    let server = TestServer::with_config(Arc::new(MemoryService::generate().expect("key")), config);
    let a = addr(&server);
    for partial in ["", "GET /v1/authority HTTP/1.1\r\nHost: x"] {
        let mut s = TcpStream::connect(a).expect("connects");
        s.set_read_timeout(Some(PATIENCE)).expect("timeout");
        s.write_all(partial.as_bytes()).expect("writes");
        let mut out = Vec::new();
        // The server closes it (possibly after a 408); a read timeout here fails the test.
        s.read_to_end(&mut out).expect("closed by the server");
        if !out.is_empty() {
            assert_eq!(parse(&out).0, 408);
        }
    }
    wait_until("the closed connections are forgotten", || {
        server.server().open_connections() == 0
    });
}

#[test]
fn a_client_that_never_reads_its_answers_is_closed() {
    // Not the header timeout: the requests all arrive at once, and the connection is never
    // idle; only the answers wait for the client.
    let config = ServerConfig {
        header_read_timeout: Duration::from_secs(600),
        send_timeout: Duration::from_millis(500),
        ..Default::default()
    };
    let server = TestServer::with_config(Arc::new(MemoryService::generate().expect("key")), config);
    let a = addr(&server);
    let mut s = TcpStream::connect(a).expect("connects");
    // Pipelined requests whose answers (the OpenAPI document, tens of KiB each) are far more
    // than the kernel buffers between the two ends; none of them is read.
    let request = format!("GET /v1/openapi.json HTTP/1.1\r\nHost: {a}\r\n\r\n");
    s.write_all(request.repeat(600).as_bytes()).expect("writes");
    wait_until("the server writes into a full socket", || {
        server.server().open_connections() == 1
    });
    wait_until(
        "the connection whose client reads nothing is closed",
        || server.server().open_connections() == 0,
    );
    // A client that reads, however many answers it asks for, is served.
    let (status, _, body) = get(a, "/v1/authority", "");
    assert_eq!(status, 200);
    assert!(json(&body)["key"].is_string());
    drop(s);
}

#[test]
fn connections_beyond_the_cap_wait_until_one_closes() {
    let config = ServerConfig {
        max_connections: 4,
        header_read_timeout: Duration::from_secs(600),
        ..Default::default()
    };
    let server = TestServer::with_config(Arc::new(MemoryService::generate().expect("key")), config);
    let a = addr(&server);
    let mut held: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(a).expect("connects"))
        .collect();
    wait_until("four connections open", || {
        server.server().open_connections() == 4
    });
    let mut fifth = TcpStream::connect(a).expect("the kernel queues it");
    fifth
        .write_all(
            format!("GET /v1/authority HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .expect("writes");
    // Not served while four are held (a short look: an answer here is the failure).
    fifth
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    let early = fifth.read(&mut byte);
    assert!(
        matches!(&early, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        "the fifth connection was served beyond the cap: {early:?}"
    );
    assert_eq!(server.server().open_connections(), 4);
    held.pop();
    fifth.set_read_timeout(Some(PATIENCE)).expect("timeout");
    let mut out = Vec::new();
    fifth.read_to_end(&mut out).expect("served once one closed");
    assert_eq!(parse(&out).0, 200);
}

/// Opens a live tail and reads its status line: (status, the open stream, the first bytes).
fn open_tail(a: SocketAddr, group: &str) -> (u16, TcpStream, Vec<u8>) {
    let mut s = TcpStream::connect(a).expect("connects");
    s.set_read_timeout(Some(PATIENCE)).expect("timeout");
    s.write_all(
        format!("GET /v1/groups/{group}/events/stream HTTP/1.1\r\nHost: {a}\r\nAccept: text/event-stream\r\n\r\n")
            .as_bytes(),
    )
    .expect("writes");
    let mut buf = vec![0u8; 4096];
    let n = s.read(&mut buf).expect("answers");
    buf.truncate(n);
    let status = String::from_utf8_lossy(&buf[9..12])
        .parse()
        .expect("status");
    (status, s, buf)
}

#[test]
fn live_tails_over_the_caps_are_refused_with_429() {
    let config = ServerConfig {
        max_tails: 3,
        max_tails_per_group: 2,
        ..Default::default()
    };
    let server = TestServer::with_config(Arc::new(MemoryService::generate().expect("key")), config);
    let client = opened(&server, "g1", 0);
    let authority = client.authority_key().expect("key");
    client
        .submit(&open_group("g2", authority, &[]))
        .expect("opens");
    let a = addr(&server);
    let t1 = open_tail(a, "g1");
    let _t2 = open_tail(a, "g1");
    assert_eq!((t1.0, _t2.0), (200, 200));
    let (status, _, head) = open_tail(a, "g1");
    assert_eq!(status, 429);
    let (_, _, body) = parse_with_body(&head);
    let err = json(&body);
    assert_eq!(err["code"], "NOT_YET");
    assert_eq!(err["scope"], "group");
    assert_eq!(err["limit"], 2);
    let t3 = open_tail(a, "g2");
    assert_eq!(t3.0, 200);
    let (status, _, head) = open_tail(a, "g2");
    assert_eq!(status, 429);
    assert_eq!(json(&parse_with_body(&head).2)["scope"], "server");
    assert_eq!(server.server().live_tails(), 3);
    drop(t1);
    wait_until("a closed tail gives its place back", || {
        server.server().live_tails() == 2
    });
    assert_eq!(open_tail(a, "g1").0, 200);
}

/// (status, head, body) of a complete non-streaming answer read in one piece.
fn parse_with_body(bytes: &[u8]) -> (u16, String, Vec<u8>) {
    parse(bytes)
}

/// A memory service whose ticks fail for group `bad`.
struct FailingTicks {
    inner: MemoryService,
}

impl AuthorityService for FailingTicks {
    fn submit(&self, cmd: &Command, now_ms: u64) -> mwp_core::Result<Decision> {
        self.inner.submit(cmd, now_ms)
    }
    fn events(&self, group: &Id, after: u64, limit: usize) -> mwp_core::Result<Vec<Event>> {
        self.inner.events(group, after, limit)
    }
    fn receipt(&self, group: &Id, actor: &Id, action: &Id) -> mwp_core::Result<Option<Receipt>> {
        self.inner.receipt(group, actor, action)
    }
    fn latest_snapshot(&self, group: &Id) -> mwp_core::Result<Vec<u8>> {
        self.inner.latest_snapshot(group)
    }
    fn groups(&self) -> mwp_core::Result<Vec<Id>> {
        self.inner.groups()
    }
    fn head_seq(&self, group: &Id) -> mwp_core::Result<u64> {
        self.inner.head_seq(group)
    }
    fn next_deadline(&self) -> mwp_core::Result<Option<(Id, u64)>> {
        self.inner.next_deadline()
    }
    fn next_deadline_except(&self, skip: &[Id]) -> mwp_core::Result<Option<(Id, u64)>> {
        self.inner.next_deadline_except(skip)
    }
    fn authority_key(&self) -> PublicKey {
        self.inner.authority_key()
    }
    fn tick(&self, group: &Id, now_ms: u64) -> mwp_core::Result<Option<Decision>> {
        if group.as_str() == "bad" {
            return Err(mwp_core::Error::new(Code::Storage, "the disk is on fire"));
        }
        self.inner.tick(group, now_ms)
    }
}

#[test]
fn a_group_whose_tick_fails_does_not_stop_another_groups_lease_expiry() {
    let service = Arc::new(FailingTicks {
        inner: MemoryService::generate().expect("key"),
    });
    let server = TestServer::with_dyn(service);
    let client = server.client();
    let authority = client.authority_key().expect("key");
    let claim = || {
        Body::ClaimWork(ClaimWork {
            work: id("x"),
            lease_ms: 50,
            start_within_ms: 50,
        })
    };
    // `bad`'s lease is due first, so it is what the loop looks at first.
    for g in ["bad", "good"] {
        client
            .submit(&open_group(g, authority, &["w0".to_owned()]))
            .expect("opens");
        client
            .submit(&cmd(g, "w0", "c", None, create_work("x", &[])))
            .expect("created");
        client
            .submit(&cmd(g, "w0", "k", Some(1), claim()))
            .expect("claimed");
    }
    wait_until("good's lease expires", || {
        client
            .events(&id("good"), 3, 10)
            .expect("events")
            .iter()
            .any(|e| e.actor.as_str() == "@authority")
    });
}

#[test]
fn max_groups_refuses_a_new_group_beyond_it() {
    let config = ServerConfig {
        max_groups: Some(2),
        ..Default::default()
    };
    let server = TestServer::with_config(Arc::new(MemoryService::generate().expect("key")), config);
    let client = server.client();
    let authority = client.authority_key().expect("key");
    client
        .submit(&open_group("g1", authority, &[]))
        .expect("opens");
    client
        .submit(&open_group("g2", authority, &[]))
        .expect("opens");
    let err = client
        .submit(&open_group("g3", authority, &[]))
        .expect_err("refused");
    assert_eq!(err.code, Code::NotPermitted);
    assert!(err.message.contains("--max-groups 2"), "{}", err.message);
    assert_eq!(err.details["limit"], 2);
    assert_eq!(client.groups().expect("groups").len(), 2);
    // A retried open of a group it holds is answered as before.
    let again = client
        .submit(&open_group("g1", authority, &[]))
        .expect("a duplicate");
    assert_eq!(again.receipt.seq, 1);
    // Concurrent opens cannot pass it together.
    let config = ServerConfig {
        max_groups: Some(3),
        ..Default::default()
    };
    let server = TestServer::with_config(Arc::new(MemoryService::generate().expect("key")), config);
    let authority = server.client().authority_key().expect("key");
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let client = server.client();
            std::thread::spawn(move || {
                client
                    .submit(&open_group(&format!("c{i}"), authority, &[]))
                    .is_ok()
            })
        })
        .collect();
    let opened = threads
        .into_iter()
        .map(|t| t.join().expect("joins"))
        .filter(|ok| *ok)
        .count();
    assert_eq!(opened, 3);
    assert_eq!(server.client().groups().expect("groups").len(), 3);
}

/// The head of a command whose body is `length` bytes long, then `sent` (a part of it).
fn command_head(a: SocketAddr, length: &str, extra: &str) -> String {
    format!(
        "POST /v1/groups/g1/commands HTTP/1.1\r\nHost: {a}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n{extra}\r\n"
    )
}

/// Reads a whole answer (the server closes the connection after it).
fn answer(s: &mut TcpStream) -> (u16, String, Vec<u8>) {
    s.set_read_timeout(Some(PATIENCE)).expect("timeout");
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .expect("an answer, then the connection closed");
    parse(&out)
}

#[test]
fn a_content_length_over_the_body_limit_is_refused_before_the_body() {
    let config = ServerConfig {
        body_read_timeout: Duration::from_secs(600),
        ..Default::default()
    };
    let limit = config.max_body_bytes;
    let server = TestServer::with_config(Arc::new(MemoryService::generate().expect("key")), config);
    let a = addr(&server);
    for length in ["99999999999".to_owned(), (limit + 1).to_string()] {
        let mut s = TcpStream::connect(a).expect("connects");
        s.write_all(format!("{}{{\"or", command_head(a, &length, "")).as_bytes())
            .expect("writes");
        // The rest of the body never comes: the answer does not wait for it.
        let (status, _, body) = answer(&mut s);
        assert_eq!(status, 400, "Content-Length {length}");
        let err = json(&body);
        assert_eq!(err["code"], "MALFORMED");
        assert_eq!(err["limit"], limit, "{err}");
        assert!(
            err["message"]
                .as_str()
                .expect("message")
                .contains(&limit.to_string()),
            "{err}"
        );
    }
}

/// What the head says of the body (its type, its encoding) is checked before the body is
/// read: a refused one is answered at once, whether or not the body ever comes.
#[test]
fn the_body_type_and_encoding_are_refused_before_the_body() {
    let config = ServerConfig {
        body_read_timeout: Duration::from_secs(20),
        ..Default::default()
    };
    let server = TestServer::with_config(Arc::new(MemoryService::generate().expect("key")), config);
    let a = addr(&server);
    for (header, line) in [
        (
            "content-type",
            "Content-Type: text/plain\r\nContent-Length: 400\r\n",
        ),
        (
            "content-encoding",
            "Content-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 400\r\n",
        ),
        // hyper takes the chunks off; the gzip coding under them would reach the reader.
        (
            "transfer-encoding",
            "Content-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n",
        ),
        (
            "transfer-encoding",
            "Content-Type: application/json\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
        ),
    ] {
        let mut s = TcpStream::connect(a).expect("connects");
        let head = format!(
            "POST /v1/groups/g1/commands HTTP/1.1\r\nHost: {a}\r\n{line}\r\n{{\"or"
        );
        s.write_all(head.as_bytes()).expect("writes");
        // The rest of the body never comes; the answer names the header, not the body's time.
        let (status, _, body) = answer(&mut s);
        let err = json(&body);
        assert_eq!(
            (status, err["code"].as_str()),
            (400, Some("MALFORMED")),
            "{err}"
        );
        assert_eq!(err["header"], header, "{err}");
    }
}

/// Headers that two readers could read two ways (two `Content-Type`s, `chunked` twice) are
/// refused whatever the body holds, and a body whose chunks are broken is refused naming
/// what was broken: a valid command sent so is not accepted.
#[test]
fn ambiguous_body_headers_are_refused_and_change_nothing() {
    let server = TestServer::start();
    let client = opened(&server, "g1", 0);
    let a = addr(&server);
    let command = serde_json::to_string(&cmd("g1", "alice", "c1", None, create_work("w1", &[])))
        .expect("json");
    let chunks = |body: &str| format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
    let sized = |body: &str| format!("Content-Length: {}\r\n\r\n{body}", body.len());
    for (header, what, line) in [
        (
            "content-type",
            "given 2 times",
            format!("Content-Type: application/json\r\nContent-Type: application/cbor\r\n{}", sized(&command)),
        ),
        (
            "transfer-encoding",
            "chunked 2 times",
            format!("Content-Type: application/json\r\nTransfer-Encoding: chunked, chunked\r\n\r\n{}", chunks(&command)),
        ),
        (
            "transfer-encoding",
            "chunked 2 times",
            format!("Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n{}", chunks(&command)),
        ),
    ] {
        let (status, _, body) = raw(
            a,
            &format!("POST /v1/groups/g1/commands HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\n{line}"),
        );
        let err = json(&body);
        assert_eq!((status, err["code"].as_str()), (400, Some("MALFORMED")), "{err}");
        assert_eq!(err["header"], header, "{err}");
        assert!(err["message"].as_str().expect("message").contains(what), "{err}");
    }
    let (status, _, body) = raw(
        a,
        &format!("POST /v1/groups/g1/commands HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{command}\r\n0\r\n\r\n"),
    );
    let err = json(&body);
    assert_eq!(
        (status, err["code"].as_str()),
        (400, Some("MALFORMED")),
        "{err}"
    );
    let message = err["message"].as_str().expect("message").to_lowercase();
    assert!(message.contains("chunk size"), "{err}");
    assert!(err.get("limit").is_none(), "no limit was exceeded: {err}");
    assert_eq!(
        client.groups().expect("groups")[0].head,
        1,
        "nothing changed"
    );
}

#[test]
fn a_body_that_does_not_arrive_is_cut_and_does_not_hold_the_server() {
    let config = ServerConfig {
        max_connections: 2,
        header_read_timeout: Duration::from_secs(600),
        body_read_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let server = TestServer::with_config(Arc::new(MemoryService::generate().expect("key")), config);
    let a = addr(&server);
    // Both places taken by commands whose heads are complete and whose bodies stall.
    let mut stalled: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(a).expect("connects");
            s.write_all(format!("{}{{\"org\":\"acme\",", command_head(a, "400", "")).as_bytes())
                .expect("writes");
            s
        })
        .collect();
    wait_until("both places taken", || {
        server.server().open_connections() == 2
    });
    // A third client is served once the stalled bodies are cut (before, they held their
    // places until the request timeout, 30 s, and were answered 503 `STORAGE`).
    let (status, _, _) = get(a, "/healthz", "");
    assert_eq!(status, 200);
    for s in &mut stalled {
        let (status, _, body) = answer(s);
        assert_eq!(status, 400);
        let err = json(&body);
        assert_eq!(err["code"], "MALFORMED", "{err}");
        assert!(
            err["message"]
                .as_str()
                .expect("message")
                .contains("did not arrive within 300 ms"),
            "{err}"
        );
    }
    // Counted as refused commands, like any malformed one.
    let (_, _, metrics) = get(a, "/metrics", "");
    let metrics = String::from_utf8(metrics).expect("text");
    assert!(
        metrics.contains("mwp_commands_total{outcome=\"rejected\",code=\"MALFORMED\"} 2"),
        "{metrics}"
    );
    assert!(!metrics.contains("code=\"STORAGE\""), "{metrics}");
}

#[test]
fn errors_outside_the_handlers_are_in_the_error_shape() {
    let server = TestServer::start();
    opened(&server, "g1", 1);
    let a = addr(&server);
    // A percent-escape that is not UTF-8, in each kind of segment.
    for (method, target, segment) in [
        ("GET", "/v1/groups/%FF/events", "group"),
        ("GET", "/v1/groups/g1/receipts/alice/%E2%82", "action"),
        ("GET", "/v1/groups/g1/receipts/%C0/a1", "actor"),
        ("POST", "/v1/groups/%FF/commands", "group"),
        ("GET", "/v1/groups/%FF/snapshots/latest", "group"),
    ] {
        let (status, head, body) = raw(
            a,
            &format!("{method} {target} HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{{}}"),
        );
        assert_eq!(status, 400, "{target}");
        assert_eq!(
            header(&head, "content-type"),
            Some("application/json"),
            "{target}"
        );
        let err = json(&body);
        assert_eq!(err["code"], "MALFORMED", "{target}");
        let message = err["message"].as_str().expect("message");
        assert!(
            message.starts_with(&format!("{segment} in the URL")),
            "{target}: {message}"
        );
    }
    // A method a route does not take: 405 with `Allow`, in the error shape.
    for (method, target, allow) in [
        ("DELETE", "/v1/groups/g1/commands", "POST"),
        ("GET", "/v1/groups/g1/commands", "POST"),
        ("PUT", "/v1/authority", "GET, HEAD"),
        ("POST", "/v1/groups/g1/events", "GET, HEAD"),
        ("OPTIONS", "/v1/groups/g1/events/stream", "GET, HEAD"),
        ("POST", "/", "GET, HEAD"),
        ("DELETE", "/index.html", "GET, HEAD"),
    ] {
        let (status, head, body) = raw(
            a,
            &format!("{method} {target} HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"),
        );
        assert_eq!(status, 405, "{method} {target}");
        assert_eq!(header(&head, "allow"), Some(allow), "{method} {target}");
        let err = json(&body);
        assert_eq!(err["code"], "NOT_FOUND", "{method} {target}");
        assert_eq!(err["allow"], allow, "{method} {target}");
        let message = err["message"].as_str().expect("message");
        assert!(message.contains(method), "{message}");
    }
    // CONNECT is not a tunnel here, nor the dashboard's page.
    let (status, head, body) = raw(
        a,
        &format!("CONNECT {a} HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\n\r\n"),
    );
    assert_eq!(status, 405, "{head}");
    let err = json(&body);
    assert_eq!(err["code"], "NOT_FOUND");
    assert!(
        err["message"]
            .as_str()
            .expect("message")
            .contains(&format!("CONNECT at {a}")),
        "{err}"
    );
}

#[test]
fn snapshot_errors_are_json_unless_cbor_is_asked_for() {
    let server = TestServer::start();
    opened(&server, "g1", 1);
    let a = addr(&server);
    for target in [
        "/v1/groups/nope/snapshots/latest",
        "/v1/groups/a%20b/snapshots/latest",
    ] {
        let (status, head, body) = get(a, target, "");
        assert!(status == 404 || status == 400, "{target}: {status}");
        assert_eq!(
            header(&head, "content-type"),
            Some("application/json"),
            "{target}"
        );
        assert!(json(&body)["code"].is_string());
        let (_, head, _) = get(a, target, "Accept: application/cbor\r\n");
        assert_eq!(
            header(&head, "content-type"),
            Some("application/cbor"),
            "{target}"
        );
    }
    // The snapshot itself is still CBOR by default.
    let (status, head, _) = get(a, "/v1/groups/g1/snapshots/latest", "");
    assert_eq!(status, 200);
    assert_eq!(header(&head, "content-type"), Some("application/cbor"));
}

#[test]
fn two_host_headers_or_a_port_spelled_otherwise_are_refused() {
    let server = TestServer::start();
    let a = addr(&server);
    let port = a.port();
    for hosts in [
        format!("Host: 127.0.0.1:{port}\r\nHost: evil.example\r\n"),
        format!("Host: evil.example\r\nHost: 127.0.0.1:{port}\r\n"),
        format!("Host: 127.0.0.1:{port}\r\nHost: 127.0.0.1:{port}\r\n"),
    ] {
        let (status, _, body) = raw(
            a,
            &format!("GET /v1/authority HTTP/1.1\r\n{hosts}Connection: close\r\n\r\n"),
        );
        assert_eq!(status, 400, "{hosts}");
        let err = json(&body);
        assert_eq!(err["code"], "MALFORMED");
        assert_eq!(err["header"], "host");
    }
    for host in [
        format!("127.0.0.1:+{port}"),
        format!("127.0.0.1:0{port}"),
        format!("localhost:00{port}"),
    ] {
        let (status, _, body) = raw(
            a,
            &format!("GET /v1/authority HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        );
        assert_eq!(status, 421, "{host}");
        assert_eq!(json(&body)["header"], "host");
    }
}

#[test]
fn accept_content_type_and_content_encoding_are_read_strictly() {
    let server = TestServer::start();
    let a = addr(&server);
    for (accept, want) in [
        ("application/cbor-seq", "application/json"),
        ("application/json;q=0, application/cbor", "application/cbor"),
        (
            "application/cbor;q=0.4, application/json;q=0.8",
            "application/json",
        ),
        ("application/cbor", "application/cbor"),
    ] {
        let (status, head, _) = get(a, "/v1/authority", &format!("Accept: {accept}\r\n"));
        assert_eq!(status, 200);
        assert_eq!(header(&head, "content-type"), Some(want), "{accept}");
    }
    let post = |extra: &str| {
        raw(
            a,
            &format!("POST /v1/groups/g1/commands HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\nContent-Length: 2\r\n{extra}\r\n{{}}"),
        )
    };
    let (status, _, body) = post("Content-Type: application/json; charset=utf-16\r\n");
    assert_eq!(status, 400);
    let err = json(&body);
    assert_eq!(err["code"], "MALFORMED");
    assert_eq!(err["header"], "content-type", "{err}");
    assert!(
        err["message"].as_str().expect("message").contains("utf-16"),
        "{err}"
    );
    for coding in ["gzip", "identity, gzip", "br"] {
        let (status, _, body) = post(&format!(
            "Content-Type: application/json\r\nContent-Encoding: {coding}\r\n"
        ));
        assert_eq!(status, 400, "{coding}");
        let err = json(&body);
        assert_eq!(err["code"], "MALFORMED");
        assert_eq!(err["header"], "content-encoding", "{err}");
        assert!(
            err["message"].as_str().expect("message").contains(coding),
            "{err}"
        );
    }
    // Identity is no encoding: the body is read (and refused for what it says).
    let (status, _, body) =
        post("Content-Type: application/json\r\nContent-Encoding: identity\r\n");
    assert_eq!(status, 400);
    assert!(json(&body).get("header").is_none());
}

#[test]
fn query_keys_and_last_event_id_are_named_in_their_errors() {
    let server = TestServer::start();
    opened(&server, "g1", 1);
    let a = addr(&server);
    let (status, _, body) = get(a, "/v1/groups/g1/events?%FF=1", "");
    assert_eq!(status, 400);
    assert_eq!(json(&body)["parameter"], "%FF");
    for ids in [
        "Last-Event-ID: -5\r\n",
        "Last-Event-ID: 1\r\nLast-Event-ID: zz\r\n",
    ] {
        let (status, _, body) = get(a, "/v1/groups/g1/events/stream", ids);
        assert_eq!(status, 400, "{ids}");
        let err = json(&body);
        assert_eq!(err["code"], "MALFORMED");
        assert_eq!(err["header"], "last-event-id");
        assert!(err.get("parameter").is_none(), "{err}");
        let message = err["message"].as_str().expect("message");
        assert!(message.starts_with("header Last-Event-ID"), "{message}");
    }
}

#[test]
fn a_disallowed_origin_gets_no_cors_headers_at_all() {
    let config = ServerConfig {
        cors_origins: vec!["https://ops.example".into()],
        ..Default::default()
    };
    let server = TestServer::with_config(Arc::new(MemoryService::generate().expect("key")), config);
    let a = addr(&server);
    let cors_headers = |head: &str| -> Vec<String> {
        head.lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("access-control-"))
            .map(str::to_owned)
            .collect()
    };
    for origin in [Some("https://evil.example"), None] {
        let extra = origin.map_or(String::new(), |o| format!("Origin: {o}\r\n"));
        let (status, head, _) = get(a, "/v1/groups", &extra);
        assert_eq!(status, 200);
        assert!(cors_headers(&head).is_empty(), "{origin:?}: {head}");
        assert!(
            header(&head, "vary").is_some_and(|v| v.contains("origin")),
            "{head}"
        );
    }
    let (status, head, body) = preflight(a, "https://evil.example");
    assert_eq!(status, 405, "{head}");
    assert!(cors_headers(&head).is_empty(), "{head}");
    assert_eq!(json(&body)["code"], "NOT_FOUND");
    // The allowed origin is served as before.
    let (status, head, _) = preflight(a, "https://ops.example");
    assert!((200..300).contains(&status), "{head}");
    assert!(!cors_headers(&head).is_empty(), "{head}");
}

/// A percent escape is `%` and two hex digits, nothing else: `%+1` (which
/// `u8::from_str_radix` reads as byte 1) is not an escape, in a query key, a query value or
/// a path segment, and is refused naming what it is in, as it was sent.
#[test]
fn a_percent_escape_is_two_hex_digits() {
    let server = TestServer::start();
    opened(&server, "g1", 1);
    let a = addr(&server);
    for (path, param, sent) in [
        ("/v1/groups/g1/events?after=%+1", "after", "%+1"),
        ("/v1/groups/g1/events?limit=%-1", "limit", "%-1"),
        ("/v1/groups/g1/events?after=%3", "after", "%3"),
        ("/v1/groups/g1/events?%+1=1", "%+1", "%+1"),
        ("/v1/groups/g1/events?af%+4ter=1", "af%+4ter", "af%+4ter"),
    ] {
        let (status, _, body) = get(a, path, "");
        let err = json(&body);
        assert_eq!(
            (status, err["code"].as_str()),
            (400, Some("MALFORMED")),
            "{path}: {err}"
        );
        assert_eq!(err["parameter"], param, "{path}: {err}");
        let message = err["message"].as_str().expect("message");
        assert!(message.contains(sent), "{path}: {err}");
        assert!(message.contains("percent-encoding"), "{path}: {err}");
    }
    // A path segment: the access check reads the group as the route does.
    for path in ["/v1/groups/g%+31/events", "/v1/groups/%+1/head"] {
        let (status, _, body) = get(a, path, "");
        let err = json(&body);
        assert_eq!(
            (status, err["code"].as_str()),
            (400, Some("MALFORMED")),
            "{path}: {err}"
        );
        assert!(
            err["message"].as_str().expect("message").contains("group"),
            "{path}: {err}"
        );
    }
    // Two hex digits, either case, still decode.
    let (status, _, body) = get(a, "/v1/groups/g%31/events?%61fter=%30&%6Cimit=%31", "");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
}

/// An `Expect` other than one `100-continue` is answered 417 in the error shape naming the
/// header, before the route runs (RFC 9110, section 10.1.1): a valid command sent so is not
/// accepted. `Expect: 100-continue` is met.
#[test]
fn an_expectation_other_than_100_continue_is_417_and_changes_nothing() {
    let server = TestServer::start();
    let client = opened(&server, "g1", 0);
    let a = addr(&server);
    let command = serde_json::to_string(&cmd("g1", "alice", "c1", None, create_work("w1", &[])))
        .expect("json");
    let post = |expect: &str| {
        raw(
            a,
            &format!(
                "POST /v1/groups/g1/commands HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{expect}\r\n{command}",
                command.len()
            ),
        )
    };
    for expect in [
        "Expect: 200-ok\r\n",
        "Expect: 100-continue, 200-ok\r\n",
        "Expect: 100-continue\r\nExpect: 100-continue\r\n",
        "Expect: \r\n",
    ] {
        let (status, _, body) = post(expect);
        let err = json(&body);
        assert_eq!(
            (status, err["code"].as_str()),
            (417, Some("MALFORMED")),
            "{expect:?}: {err}"
        );
        assert_eq!(err["header"], "expect", "{err}");
        assert!(
            err["message"].as_str().expect("message").contains("Expect"),
            "{err}"
        );
        assert_eq!(
            client.groups().expect("groups")[0].head,
            1,
            "{expect:?}: nothing changed"
        );
    }
    let (status, _, body) = get(a, "/v1/groups/g1/events", "Expect: x\r\n");
    assert_eq!(
        (status, json(&body)["header"].as_str()),
        (417, Some("expect"))
    );
    // Met: hyper answers 100 Continue, then the command's answer.
    let (status, head, body) = post("Expect: 100-Continue\r\n");
    let (status, body) = if status == 100 {
        let (status, _, body) = parse(&body);
        (status, body)
    } else {
        (status, body)
    };
    assert_eq!(status, 200, "{head}: {}", String::from_utf8_lossy(&body));
    assert_eq!(client.groups().expect("groups")[0].head, 2, "accepted");
}
