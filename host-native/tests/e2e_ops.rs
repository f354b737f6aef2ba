//! `mwp serve` for operators: `/healthz`, `/readyz`, `/metrics` after a known workload, and
//! JSON logs (docs/http.md, "Operations").

mod e2e_support;

use std::io::{BufRead, BufReader};
use std::process::{Command as Process, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use e2e_support::*;
use mwp_core::state::Member;
use mwp_core::{Code, Command, Decision, Error, Event, Id, PublicKey, Receipt};
use mwp_host::memory_service::MemoryService;
use mwp_host::service::AuthorityService;
use mwp_host::store::{FileStore, StoreOptions};
use serde_json::Value;

/// The value of the sample `name` (labels included, as written) in Prometheus text.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn scrape(base: &str) -> String {
    let (status, headers, body) = request("GET", &format!("{base}/metrics"), &[], b"");
    assert_eq!(status, 200);
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    String::from_utf8(body).expect("utf-8")
}

fn json_post(base: &str, cmd: &Command) -> (u16, Value) {
    let (status, _, body) = request(
        "POST",
        &format!("{base}/v1/groups/{}/commands", cmd.group),
        &[("content-type", "application/json")],
        &serde_json::to_vec(cmd).expect("encodes"),
    );
    (status, serde_json::from_slice(&body).expect("JSON answer"))
}

#[test]
fn metrics_count_a_known_workload_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FileStore::open(dir.path(), StoreOptions::default()).expect("opens");
    let server = TestServer::with_dyn(Arc::new(store));
    let base = server.base.clone();
    let authority = server.client().authority_key().expect("key");

    // N accepted: the genesis and N - 1 work items.
    let n = 6;
    assert_eq!(
        json_post(&base, &open_group("g1", authority, &["w0".into()])).0,
        200
    );
    let creates: Vec<Command> = (1..n)
        .map(|i| {
            let work = format!("w{i}");
            cmd(
                "g1",
                "alice",
                &format!("c{i}"),
                None,
                create_work(&work, &[]),
            )
        })
        .collect();
    for c in &creates {
        assert_eq!(json_post(&base, c).0, 200);
    }
    // M duplicates: the same commands again.
    let m = 3;
    for c in creates.iter().take(m) {
        assert_eq!(json_post(&base, c).0, 200);
    }
    // K rejections with one code: a work item that already exists, under new action IDs.
    let k = 4;
    for i in 0..k {
        let c = cmd(
            "g1",
            "alice",
            &format!("again{i}"),
            None,
            create_work("w1", &[]),
        );
        let (status, body) = json_post(&base, &c);
        assert_eq!(status, 409);
        assert_eq!(body["code"], "ALREADY_EXISTS");
    }
    // One malformed body: refused before any decision, counted with its code.
    let (status, _, _) = request(
        "POST",
        &format!("{base}/v1/groups/g1/commands"),
        &[("content-type", "application/json")],
        b"{",
    );
    assert_eq!(status, 400);

    let text = scrape(&base);
    let count = |labels: &str| sample(&text, &format!("mwp_commands_total{{{labels}}}"));
    assert_eq!(count(r#"outcome="accepted",code="OK""#), Some(n as f64));
    assert_eq!(count(r#"outcome="duplicate",code="OK""#), Some(m as f64));
    assert_eq!(
        count(r#"outcome="rejected",code="ALREADY_EXISTS""#),
        Some(k as f64)
    );
    assert_eq!(count(r#"outcome="rejected",code="MALFORMED""#), Some(1.0));
    let commands: usize = text
        .lines()
        .filter(|l| l.starts_with("mwp_commands_total{"))
        .count();
    assert_eq!(commands, 4, "no other outcome was counted:\n{text}");
    assert_eq!(sample(&text, "mwp_accept_seconds_count"), Some(n as f64));
    // Every accepted command synced at least once, in this process's file store.
    let fsyncs = sample(&text, "mwp_fsync_seconds_count").expect("fsync histogram");
    assert!(fsyncs >= n as f64, "{fsyncs} fsyncs for {n} commands");
    assert_eq!(sample(&text, "mwp_groups"), Some(1.0));
    assert_eq!(sample(&text, "mwp_live_tails"), Some(0.0));
    assert_eq!(sample(&text, "mwp_store_errors_total"), Some(0.0));
    assert!(sample(&text, "mwp_tick_lag_seconds").is_some());
}

/// A memory service whose store can be made to fail, as a full disk would.
struct Failing {
    inner: MemoryService,
    broken: AtomicBool,
}

impl Failing {
    fn check(&self) -> mwp_core::Result<()> {
        if self.broken.load(Ordering::SeqCst) {
            return Err(Error::new(
                Code::Storage,
                "append to g1: no space left on device",
            ));
        }
        Ok(())
    }
}

impl AuthorityService for Failing {
    fn submit(&self, cmd: &Command, now_ms: u64) -> mwp_core::Result<Decision> {
        self.check()?;
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
    fn member(&self, group: &Id, actor: &Id) -> mwp_core::Result<Option<Member>> {
        self.inner.member(group, actor)
    }
    fn authority_key(&self) -> PublicKey {
        self.inner.authority_key()
    }
}

#[test]
fn healthz_is_alive_and_readyz_follows_the_latest_write() {
    let service = Arc::new(Failing {
        inner: MemoryService::generate().expect("key"),
        broken: AtomicBool::new(false),
    });
    let server = TestServer::with_dyn(service.clone());
    let base = server.base.clone();
    let get = |path: &str| {
        let (status, _, body) = request("GET", &format!("{base}{path}"), &[], b"");
        (
            status,
            serde_json::from_slice::<Value>(&body).expect("JSON"),
        )
    };
    assert_eq!(
        get("/healthz"),
        (200, serde_json::json!({"status": "alive"}))
    );
    assert_eq!(
        get("/readyz"),
        (200, serde_json::json!({"status": "ready"}))
    );
    let authority = service.authority_key();
    assert_eq!(json_post(&base, &open_group("g1", authority, &[])).0, 200);

    service.broken.store(true, Ordering::SeqCst);
    let work = cmd("g1", "alice", "c1", None, create_work("w1", &[]));
    let (status, body) = json_post(&base, &work);
    assert_eq!((status, body["code"].as_str()), (503, Some("STORAGE")));
    let (status, body) = get("/readyz");
    assert_eq!(status, 503);
    assert_eq!(body["code"], "STORAGE");
    assert_eq!(body["reason"]["code"], "STORAGE");
    assert!(body["reason"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("no space left")));
    // In CBOR when asked for, as every error.
    let (status, headers, _) = request(
        "GET",
        &format!("{base}/readyz"),
        &[("accept", "application/cbor")],
        b"",
    );
    assert_eq!(status, 503);
    assert_eq!(headers["content-type"], "application/cbor");
    assert_eq!(get("/healthz").0, 200, "the process is still alive");
    let text = scrape(&base);
    assert_eq!(sample(&text, "mwp_store_errors_total"), Some(1.0));
    assert_eq!(
        sample(
            &text,
            r#"mwp_commands_total{outcome="failed",code="STORAGE"}"#
        ),
        Some(1.0)
    );

    // A write that succeeds makes it ready again.
    service.broken.store(false, Ordering::SeqCst);
    assert_eq!(json_post(&base, &work).0, 200);
    assert_eq!(
        get("/readyz"),
        (200, serde_json::json!({"status": "ready"}))
    );
}

/// `mwp serve` logging JSON lines under the filter `mwp_log` (the default without one), its
/// stderr, the lines it wrote before its address, once it has accepted `open_group` for `g1`.
fn serve_with_json_logs(
    mwp_log: Option<&str>,
) -> (
    std::process::Child,
    BufReader<std::process::ChildStderr>,
    Vec<String>,
) {
    let mut serve = Process::new(env!("CARGO_BIN_EXE_mwp"));
    serve
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env("MWP_LOG_FORMAT", "json")
        .stderr(Stdio::piped())
        .stdout(Stdio::null());
    match mwp_log {
        Some(filter) => serve.env("MWP_LOG", filter),
        None => serve.env_remove("MWP_LOG"),
    };
    let mut child = serve.spawn().expect("starts");
    let mut reader = BufReader::new(child.stderr.take().expect("piped"));
    let (base, logged) = read_address(&mut reader);
    let client = mwp_host::server::client::Client::new(base);
    let authority = client.authority_key().expect("answers");
    client
        .submit(&open_group("g1", authority, &[]))
        .expect("opens");
    (child, reader, logged)
}

#[test]
fn serve_logs_json_lines_with_mwp_log_format() {
    let (mut child, mut reader, logged) = serve_with_json_logs(Some("info,mwp_host=debug"));
    let accepted = loop {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).expect("reads") > 0,
            "logged the command"
        );
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("a log line is not JSON ({e}): {line}"));
        if value["fields"]["message"] == "accepted" {
            break value;
        }
    };
    assert_eq!(accepted["level"], "DEBUG");
    assert_eq!(accepted["fields"]["group"], "g1");
    assert_eq!(accepted["fields"]["kind"], "open_group");
    for line in &logged {
        let value: Value = serde_json::from_str(line).expect("every line before is JSON too");
        assert!(value["timestamp"].is_string());
    }
    child.kill().expect("stops");
    let _ = child.wait();
}

/// Under the default filter (`info`) an accepted command writes no log line: one line per
/// command is `debug` (docs/decisions.md, "Operating `mwp serve`").
#[test]
fn serve_logs_no_line_per_accepted_command_at_info() {
    let (mut child, mut reader, _) = serve_with_json_logs(None);
    // The line would have been written before the answer left; whatever was written is in
    // the pipe once the process is gone.
    child.kill().expect("stops");
    let _ = child.wait();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).expect("reads");
    for line in rest.lines() {
        let value: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a log line is not JSON ({e}): {line}"));
        assert_ne!(value["fields"]["message"], "accepted", "{line}");
    }
}

#[test]
fn readyz_is_503_once_the_file_store_fails_to_write() {
    use mwp_host::store::backend::{Fault, MemBackend};
    let be = MemBackend::new();
    let store = FileStore::open_with(
        Arc::new(be.clone()),
        std::path::Path::new("/d"),
        StoreOptions::default(),
    )
    .expect("opens");
    let server = TestServer::with_dyn(Arc::new(store));
    let base = server.base.clone();
    let authority = server.client().authority_key().expect("key");
    assert_eq!(json_post(&base, &open_group("g1", authority, &[])).0, 200);
    let (status, _, _) = request("GET", &format!("{base}/readyz"), &[], b"");
    assert_eq!(status, 200);

    // The disk fails from now on: the next write fails, and the store keeps the error.
    be.fail_at(be.ops(), Fault::Forever);
    let work = cmd("g1", "alice", "c1", None, create_work("w1", &[]));
    assert_eq!(json_post(&base, &work).0, 503);
    be.clear_fault();
    assert_eq!(json_post(&base, &work).0, 503, "a storage error is sticky");
    let (status, _, body) = request("GET", &format!("{base}/readyz"), &[], b"");
    assert_eq!(status, 503);
    let body: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(body["code"], "STORAGE");
    assert_eq!(body["reason"]["code"], "STORAGE");
    let text = scrape(&base);
    assert_eq!(
        sample(
            &text,
            r#"mwp_commands_total{outcome="failed",code="STORAGE"}"#
        ),
        Some(2.0)
    );
    assert_eq!(sample(&text, "mwp_store_errors_total"), Some(2.0));
}

#[test]
fn answers_are_gzipped_on_request_but_live_tails_never_are() {
    let server = TestServer::start();
    let base = server.base.clone();
    let _client = opened(&server, "g1", 1);
    let gzip = [("accept-encoding", "gzip")];
    let encoding = |headers: &ureq::http::HeaderMap| {
        headers
            .get("content-encoding")
            .map(|v| v.to_str().unwrap_or("").to_owned())
    };
    let (status, headers, body) = request("GET", &format!("{base}/v1/openapi.json"), &gzip, b"");
    assert_eq!(status, 200);
    assert_eq!(encoding(&headers).as_deref(), Some("gzip"));
    assert_eq!(&body[..2], &[0x1f, 0x8b], "a gzip stream");
    let (_, headers, _) = request("GET", &format!("{base}/v1/openapi.json"), &[], b"");
    assert_eq!(encoding(&headers), None, "not asked for: not compressed");

    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let resp = agent
        .get(&format!("{base}/v1/groups/g1/events/stream"))
        .header("accept-encoding", "gzip")
        .call()
        .expect("answers");
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        encoding(resp.headers()),
        None,
        "a live tail is not compressed"
    );
    let mut reader = BufReader::new(resp.into_body().into_reader());
    let mut line = String::new();
    reader.read_line(&mut line).expect("reads");
    assert!(line.starts_with("id: 1"), "plain SSE text: {line:?}");
    assert_eq!(
        sample(&scrape(&base), "mwp_live_tails"),
        Some(1.0),
        "the open tail is counted"
    );
}

/// A service with a lease deadline long past (1 s after the epoch) that it never expires.
struct Overdue(MemoryService);

impl AuthorityService for Overdue {
    fn submit(&self, cmd: &Command, now_ms: u64) -> mwp_core::Result<Decision> {
        self.0.submit(cmd, now_ms)
    }
    fn events(&self, group: &Id, after: u64, limit: usize) -> mwp_core::Result<Vec<Event>> {
        self.0.events(group, after, limit)
    }
    fn receipt(&self, group: &Id, actor: &Id, action: &Id) -> mwp_core::Result<Option<Receipt>> {
        self.0.receipt(group, actor, action)
    }
    fn latest_snapshot(&self, group: &Id) -> mwp_core::Result<Vec<u8>> {
        self.0.latest_snapshot(group)
    }
    fn groups(&self) -> mwp_core::Result<Vec<Id>> {
        self.0.groups()
    }
    fn head_seq(&self, group: &Id) -> mwp_core::Result<u64> {
        self.0.head_seq(group)
    }
    fn next_deadline(&self) -> mwp_core::Result<Option<(Id, u64)>> {
        Ok(Some((id("g1"), 1000)))
    }
    fn authority_key(&self) -> PublicKey {
        self.0.authority_key()
    }
    fn tick(&self, _group: &Id, _now_ms: u64) -> mwp_core::Result<Option<Decision>> {
        Ok(None)
    }
}

#[test]
fn tick_lag_is_how_late_the_tick_loop_served_a_deadline() {
    let server = TestServer::with_dyn(Arc::new(Overdue(MemoryService::generate().expect("key"))));
    let base = server.base.clone();
    // The tick loop serves the overdue deadline as soon as it starts; wait for that state.
    let lag = (0..200)
        .find_map(|_| {
            let lag = sample(&scrape(&base), "mwp_tick_lag_seconds").filter(|l| *l > 0.0);
            if lag.is_none() {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            lag
        })
        .expect("the tick loop ran");
    // The deadline was 1 s after the epoch: the lag is the time since then.
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    assert!(lag > since_epoch - 3600.0 && lag <= since_epoch, "{lag}");
}

#[test]
fn a_request_slower_than_the_timeout_is_503_storage_in_the_format_asked_for() {
    use mwp_host::store::backend::MemBackend;
    let be = MemBackend::new();
    let store = FileStore::open_with(
        Arc::new(be.clone()),
        std::path::Path::new("/d"),
        StoreOptions::default(),
    )
    .expect("opens");
    let config = mwp_host::server::ServerConfig {
        request_timeout: std::time::Duration::from_millis(200),
        ..Default::default()
    };
    let server = TestServer::with_config(Arc::new(store), config);
    let base = server.base.clone();
    let authority = server.client().authority_key().expect("key");
    assert_eq!(json_post(&base, &open_group("g1", authority, &[])).0, 200);

    // Every sync now takes two seconds: a command outlasts the 200 ms limit.
    be.set_sync_delay(std::time::Duration::from_secs(2));
    let (status, body) = json_post(
        &base,
        &cmd("g1", "alice", "c1", None, create_work("w1", &[])),
    );
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "STORAGE", "{body}");
    let message = body["message"].as_str().expect("a message");
    assert!(message.contains("took longer than 200 ms"), "{message}");
    let slow = cmd("g1", "alice", "c2", None, create_work("w2", &[]));
    let (status, headers, _) = request(
        "POST",
        &format!("{base}/v1/groups/g1/commands"),
        &[
            ("content-type", "application/json"),
            ("accept", "application/cbor"),
        ],
        &serde_json::to_vec(&slow).expect("encodes"),
    );
    assert_eq!(status, 503);
    assert_eq!(headers["content-type"], "application/cbor");
    be.set_sync_delay(std::time::Duration::ZERO);
}
