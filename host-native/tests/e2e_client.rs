//! End-to-end tests of the client commands of the `mwp` binary against a real `mwp serve`:
//! `keygen`, `submit`, `tail`, `groups`, `replay --server`, `verify`, and their answers to
//! hostile input (docs/cli.md).

mod e2e_support;

use e2e_support::spawn_serve;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// The environment variables the client commands read: cleared so the host's own settings
/// cannot change a test.
const ENV: &[&str] = &[
    "MWP_SERVER",
    "MWP_KEY",
    "MWP_STORE",
    "MWP_ADDR",
    "MWP_DATA",
    "MWP_TOKEN",
    "MWP_TOKEN_FILE",
    "MWP_ORG",
    "MWP_GROUP",
    "MWP_ACTOR",
];

fn mwp() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mwp"));
    for var in ENV {
        cmd.env_remove(var);
    }
    cmd
}

fn lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `mwp serve --data DIR --addr ADDR` as a child process, stopped with SIGINT when dropped.
struct Serve {
    child: Child,
    base: String,
}

impl Serve {
    fn start(data: &Path, addr: &str) -> Serve {
        let (child, base) = spawn_serve(mwp().args(["serve", "--addr", addr, "--data"]).arg(data));
        Serve { child, base }
    }

    fn port(&self) -> &str {
        self.base.rsplit(':').next().expect("port")
    }

    fn stop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let status = self.child.wait().expect("exits");
        assert_eq!(status.code(), Some(0), "a graceful shutdown exits 0");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

/// Runs `mwp submit` as `actor` with `key`, the body on stdin.
fn submit(base: &str, key: &Path, actor: &str, extra: &[&str], body: &Value) -> Output {
    let mut child = mwp()
        .args(["submit", "--server", base, "--org", "acme", "--group", "g1"])
        .args(["--actor", actor, "--key"])
        .arg(key)
        .args(extra)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(body.to_string().as_bytes())
        .expect("writes the body");
    child.wait_with_output().expect("runs")
}

/// Submits and expects it accepted at `seq`.
fn accepted(base: &str, key: &Path, actor: &str, extra: &[&str], body: &Value, seq: u64) {
    let out = submit(base, key, actor, extra, body);
    assert_eq!(out.status.code(), Some(0), "{body}: {}", stderr(&out));
    let line = &lines(&out.stdout)[0];
    assert_eq!(line["outcome"], "accepted", "{line}");
    assert_eq!(line["receipt"]["seq"], seq, "{line}");
}

fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let path = dir.join(name);
    let out = mwp()
        .args(["keygen", "--out"])
        .arg(&path)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = &lines(&out.stdout)[0];
    let public = line["public"].as_str().expect("public key").to_owned();
    assert_eq!(public.len(), 64);
    (path, public)
}

fn create_work(work: &str) -> Value {
    json!({"type": "create_work", "work": work, "contract": {"max_attempts": 3,
        "backoff_base_ms": 100, "backoff_max_ms": 1000, "cost_budget": 10, "risk": "low"},
        "after": [], "spec": {"do": work}})
}

/// A stand-in HTTP server: each connection gets `answer(n, request head)` (a whole HTTP
/// response) and is closed. Returns its base URL.
fn stand_in(answer: impl Fn(usize, &str) -> Vec<u8> + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for (n, conn) in listener.incoming().enumerate() {
            let Ok(mut conn) = conn else { return };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|r| r == 1) {
                head.push(byte[0]);
            }
            let response = answer(n, &String::from_utf8_lossy(&head));
            let _ = conn.write_all(&response);
        }
    });
    base
}

fn http(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// The request target of a request head.
fn target(head: &str) -> String {
    head.split_whitespace().nth(1).unwrap_or("/").to_owned()
}

#[test]
fn keygen_submit_tail_verify_against_a_real_server_and_a_tampered_copy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut serve = Serve::start(&data, "127.0.0.1:0");
    let base = serve.base.clone();

    // keygen: 0600 files, public keys printed; an existing file is never overwritten.
    let (alice, _) = keygen(dir.path(), "alice.key");
    let (bob, bob_public) = keygen(dir.path(), "bob.key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&alice)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let again = mwp()
        .args(["keygen", "--out"])
        .arg(&alice)
        .output()
        .expect("runs");
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));

    // submit: open the group, create, claim, start and submit work.
    let open = json!({"type": "open_group", "mission": "m1", "title": "cli",
        "members": [{"actor": "alice", "role": "owner"},
                    {"actor": "bob", "role": "worker", "key": bob_public}]});
    accepted(&base, &alice, "alice", &[], &open, 1);
    accepted(&base, &alice, "alice", &[], &create_work("w1"), 2);
    let claim = json!({"type": "claim_work", "work": "w1", "lease_ms": 600000,
        "start_within_ms": 600000});
    let no_expect = submit(&base, &bob, "bob", &[], &claim);
    assert_eq!(no_expect.status.code(), Some(1), "a rejection exits 1");
    assert_eq!(lines(&no_expect.stdout)[0]["error"]["code"], "CAS_REQUIRED");
    accepted(&base, &bob, "bob", &["--expect", "1"], &claim, 3);
    let start = json!({"type": "start_work", "work": "w1", "lease": "w1#1"});
    accepted(&base, &bob, "bob", &["--action", "start-1"], &start, 4);
    let retried = submit(&base, &bob, "bob", &["--action", "start-1"], &start);
    assert_eq!(retried.status.code(), Some(0));
    assert_eq!(lines(&retried.stdout)[0]["outcome"], "duplicate");
    // The key from MWP_KEY.
    let done = json!({"type": "submit", "work": "w1", "lease": "w1#1", "result": {"ok": true}});
    let mut child = mwp()
        .args([
            "submit", "--server", &base, "--org", "acme", "--group", "g1",
        ])
        .args(["--actor", "bob", "-"])
        .env("MWP_KEY", &bob)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let mut stdin = child.stdin.take().expect("piped");
    stdin
        .write_all(done.to_string().as_bytes())
        .expect("writes");
    drop(stdin);
    let out = child.wait_with_output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(lines(&out.stdout)[0]["receipt"]["seq"], 5);

    // tail sees every event, in order.
    let tail = mwp()
        .args(["tail", "--server", &base, "--group", "g1", "--until", "5"])
        .output()
        .expect("runs");
    assert_eq!(tail.status.code(), Some(0), "{}", stderr(&tail));
    let kinds: Vec<(u64, String)> = lines(&tail.stdout)
        .iter()
        .map(|e| {
            let kind = e["kind"]["type"].as_str().expect("kind").to_owned();
            (e["seq"].as_u64().expect("seq"), kind)
        })
        .collect();
    let expected = [
        "group_opened",
        "work_created",
        "work_claimed",
        "work_started",
        "work_succeeded",
    ];
    assert_eq!(
        kinds,
        expected
            .iter()
            .enumerate()
            .map(|(i, k)| (i as u64 + 1, (*k).to_owned()))
            .collect::<Vec<_>>()
    );

    // A tail that outlives a server restart reconnects with Last-Event-ID and misses nothing.
    let mut follower = mwp()
        .args(["tail", "--server", &base, "--group", "g1", "--after", "3"])
        .args(["--until", "6"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let mut out = BufReader::new(follower.stdout.take().expect("piped"));
    let mut seen = Vec::new();
    for _ in 0..2 {
        let mut line = String::new();
        out.read_line(&mut line).expect("reads");
        seen.push(serde_json::from_str::<Value>(&line).expect("json")["seq"].clone());
    }
    let port = serve.port().to_owned();
    serve.stop();
    let serve = Serve::start(&data, &format!("127.0.0.1:{port}"));
    assert_eq!(serve.base, base, "the same address again");
    accepted(&base, &alice, "alice", &[], &create_work("w2"), 6);
    let mut rest = String::new();
    out.read_to_string(&mut rest).expect("reads");
    seen.extend(
        rest.lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("json")["seq"].clone()),
    );
    let followed = follower.wait_with_output().expect("exits");
    assert_eq!(followed.status.code(), Some(0), "{}", stderr(&followed));
    assert_eq!(seen, vec![json!(4), json!(5), json!(6)]);
    assert!(stderr(&followed).contains("reconnecting after seq 5"));

    // groups (its server from MWP_SERVER) and replay --server.
    let groups = mwp()
        .arg("groups")
        .env("MWP_SERVER", &base)
        .output()
        .expect("runs");
    assert_eq!(
        lines(&groups.stdout),
        vec![json!({"group": "g1", "head": 6})]
    );
    let replay = mwp()
        .args(["replay", "--server", &base, "--group", "g1", "--after", "4"])
        .output()
        .expect("runs");
    assert_eq!(replay.status.code(), Some(0), "{}", stderr(&replay));
    assert_eq!(lines(&replay.stdout).len(), 2);

    // verify passes on the server, and on its data directory read beside it.
    let verify = |source: &[&str], extra: &[&str]| {
        mwp()
            .args(["verify", "--group", "g1"])
            .args(source)
            .args(extra)
            .output()
            .expect("runs")
    };
    let good = verify(&["--server", &base], &[]);
    assert_eq!(good.status.code(), Some(0), "{}", stderr(&good));
    let report = &lines(&good.stdout)[0];
    assert_eq!(report["ok"], true);
    assert_eq!(report["seqs_checked"], 6);
    assert_eq!(report["authority_key_from"], "server");
    assert!(report["snapshot_seq"].as_u64().is_some_and(|s| s >= 1));
    // The server's signed head verified (it may be behind by 100 ms of commits).
    assert!(
        report["verified_through"]
            .as_u64()
            .is_some_and(|s| (1..=6).contains(&s)),
        "{report}"
    );
    let on_disk = verify(&["--data", data.to_str().expect("utf-8")], &[]);
    assert_eq!(on_disk.status.code(), Some(0), "{}", stderr(&on_disk));
    assert_eq!(lines(&on_disk.stdout)[0]["head_id"], report["head_id"]);

    // A pinned key that is not the authority's fails the snapshot check.
    let other = "ab".repeat(32);
    let pinned = verify(&["--server", &base], &["--authority-key", &other]);
    assert_eq!(pinned.status.code(), Some(1));
    assert_eq!(lines(&pinned.stdout)[0]["ok"], false);

    // An unknown group is bad input, read from the server's CBOR error on the snapshot route.
    let unknown = mwp()
        .args(["verify", "--server", &base, "--group", "nope"])
        .output()
        .expect("runs");
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("NOT_FOUND"),
        "{}",
        stderr(&unknown)
    );

    // A tampered copy: a proxy that changes one field of seq 3 on its way.
    let proxy = mirror(&base, |path, _, body| {
        if path.contains("/events?") {
            let mut page: Value = serde_json::from_slice(body).expect("a page");
            for event in page["events"].as_array_mut().expect("events") {
                if event["seq"] == 3 {
                    event["at"] = json!(event["at"].as_u64().expect("at") + 1);
                }
            }
            *body = page.to_string().into_bytes();
        }
    });
    let tampered = verify(&["--server", &proxy], &[]);
    assert_eq!(tampered.status.code(), Some(1), "{}", stderr(&tampered));
    let report = &lines(&tampered.stdout)[0];
    assert_eq!(report["ok"], false);
    assert_eq!(report["seq"], 3);
    assert!(
        report["error"]
            .as_str()
            .is_some_and(|e| e.contains("seq 3")),
        "{report}"
    );

    // A mirror serving a snapshot signed with the authority's own key (read here from the
    // data directory) whose chain head is not the id the history has at its seq: the core's
    // rule (`chain::Position::check_last`) refuses it, naming the seq and both ids.
    let seed = std::fs::read_to_string(data.join("authority.key")).expect("the key file");
    let seed = mwp_core::Hash::from_hex(seed.trim()).expect("64 hex digits");
    let key = mwp_core::SecretKey::from_bytes(&seed.0);
    let forged_head = mwp_core::Hash([7; 32]);
    let proxy = mirror(&base, move |path, status, body| {
        if path.contains("/snapshots/") && status == 200 {
            let snap = mwp_core::snapshot::Snapshot::from_cbor(body).expect("a snapshot");
            let mut state = snap.state;
            state.head = forged_head;
            *body = mwp_core::snapshot::Snapshot::build_cbor(&state, &key).expect("signs");
        }
    });
    let forged = verify(&["--server", &proxy], &[]);
    assert_eq!(forged.status.code(), Some(1), "{}", stderr(&forged));
    let report = &lines(&forged.stdout)[0];
    assert_eq!(report["ok"], false, "{report}");
    let error = report["error"].as_str().expect("an error");
    assert!(
        error.contains("the snapshot's chain head at seq")
            && error.contains(&format!("is {forged_head}, but the history's is")),
        "{report}"
    );
    drop(serve);
}

/// A mirror of the server at `upstream` that hands each answer's body to `edit` (with the
/// request's path and the answer's status) on its way: snapshots asked for as CBOR, the rest
/// as JSON.
fn mirror(upstream: &str, edit: impl Fn(&str, u16, &mut Vec<u8>) + Send + 'static) -> String {
    let upstream = upstream.to_owned();
    stand_in(move |_, head| {
        let path = target(head);
        let accept = if path.contains("/snapshots/") {
            "application/cbor"
        } else {
            "application/json"
        };
        let (status, _, mut body) = request(&format!("{upstream}{path}"), accept);
        edit(&path, status, &mut body);
        http(&format!("{status} X"), accept, &body)
    })
}

fn request(url: &str, accept: &str) -> (u16, ureq::http::HeaderMap, Vec<u8>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut resp = agent
        .get(url)
        .header("accept", accept)
        .call()
        .expect("the server answers");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.body_mut().read_to_vec().expect("body");
    (status, headers, body)
}

/// The events of the lifecycle transcript, as the server would send them.
fn transcript_events() -> Vec<Value> {
    let text = include_str!("../../tests/transcripts/lifecycle.jsonl");
    let (lines, _) = mwp_core::transcript::run_in_memory(text);
    lines
        .iter()
        .filter_map(|l| l.get("event"))
        .cloned()
        .collect()
}

fn sse(events: &[&Value]) -> Vec<u8> {
    let body: String = events
        .iter()
        .map(|e| format!("id: {}\ndata: {e}\n\n", e["seq"]))
        .collect();
    format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}")
        .into_bytes()
}

#[test]
fn tail_resumes_with_last_event_id_and_reports_a_gap_instead_of_skipping_it() {
    let events = transcript_events();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    // First connection: seq 1 and 2, then the stream ends. Second: seq 4, a gap.
    let base = stand_in(move |n, head| {
        seen.lock().expect("lock").push(head.to_lowercase());
        match n {
            0 => sse(&[&events[0], &events[1]]),
            _ => sse(&[&events[3]]),
        }
    });
    let out = mwp()
        .args(["tail", "--server", &base, "--group", "g1"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("expected seq 3, received seq 4"),
        "{}",
        stderr(&out)
    );
    let printed: Vec<Value> = lines(&out.stdout)
        .iter()
        .map(|e| e["seq"].clone())
        .collect();
    assert_eq!(printed, vec![json!(1), json!(2)], "nothing after the gap");
    let heads = heads.lock().expect("lock");
    assert!(!heads[0].contains("last-event-id"), "{}", heads[0]);
    assert!(heads[1].contains("last-event-id: 2"), "{}", heads[1]);
}

#[test]
fn hostile_inputs_are_clear_errors_with_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (key, _) = keygen(dir.path(), "k.key");
    let body = dir.path().join("body.json");
    std::fs::write(&body, create_work("w1").to_string()).expect("write");
    // A server that is not mwp: an HTML page on every path.
    let not_mwp = stand_in(|_, _| http("200 OK", "text/html", b"<html>hello</html>"));
    let not_found = stand_in(|_, _| http("404 Not Found", "text/html", b"<html>no</html>"));
    let run = |key: &Path, body: &Path, server: &str| {
        mwp()
            .args([
                "submit", "--server", server, "--org", "acme", "--group", "g1",
            ])
            .args(["--actor", "alice", "--key"])
            .arg(key)
            .arg(body)
            .output()
            .expect("runs")
    };
    let check = |out: Output, needle: &str| {
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{needle}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
    };
    check(
        run(&dir.path().join("missing.key"), &body, &not_mwp),
        "cannot be read",
    );
    let not_a_key = dir.path().join("not.key");
    std::fs::write(&not_a_key, "hello\n").expect("write");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&not_a_key, std::fs::Permissions::from_mode(0o600))
            .expect("chmod");
    }
    check(run(&not_a_key, &body, &not_mwp), "does not hold a key");
    let not_json = dir.path().join("bad.json");
    std::fs::write(&not_json, "{ not json").expect("write");
    check(run(&key, &not_json, &not_mwp), "is not JSON");
    check(run(&key, &body, &not_mwp), "/v1/authority");
    check(run(&key, &body, &not_found), "not an mwp server");
    let key = key.to_str().expect("utf-8");
    for args in [
        vec!["groups", "--server", &not_mwp],
        vec!["verify", "--server", &not_mwp, "--group", "g1"],
        vec!["tail", "--server", &not_found, "--group", "g1"],
        vec!["submit", "--server", "ftp://x", "--key", key, "b.json"],
    ] {
        let out = mwp().args(&args).output().expect("runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}

/// A stand-in HTTP server that hands each connection, with its number and request head, to
/// `serve` on a thread of its own: it may write part of an answer and hold the connection
/// open. Returns its base URL.
fn stand_in_open(serve: impl Fn(usize, &str, TcpStream) + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let serve = Arc::new(serve);
    std::thread::spawn(move || {
        for (n, conn) in listener.incoming().enumerate() {
            let Ok(mut conn) = conn else { return };
            let serve = Arc::clone(&serve);
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|r| r == 1) {
                    head.push(byte[0]);
                }
                serve(n, &String::from_utf8_lossy(&head), conn);
            });
        }
    });
    base
}

/// The `after` query value of a request head.
fn after_of(head: &str) -> u64 {
    let target = target(head);
    target
        .split(['?', '&'])
        .find_map(|kv| kv.strip_prefix("after="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A page answer (`GET …/events`) holding `events`.
fn page(events: &[&Value]) -> Vec<u8> {
    http(
        "200 OK",
        "application/json",
        json!({ "events": events }).to_string().as_bytes(),
    )
}

#[test]
fn replay_from_a_server_stops_at_a_page_that_repeats_skips_or_is_not_the_group() {
    let events = transcript_events();
    let mut tampered = events[1].clone();
    tampered["at"] = json!(tampered["at"].as_u64().expect("at") + 1);
    // Each server answers its pages from `answer(after)`, and no group list.
    type Pages = fn(&[Value], &Value, u64) -> Vec<Value>;
    let cases: [(&str, Pages, &str, &str); 4] = [
        // Seq 1, whatever the cursor: the loop that never ended.
        (
            "repeats",
            |ev, _, _| vec![ev[0].clone()],
            "g1",
            "expected seq 2, received seq 1",
        ),
        (
            "skips",
            |ev, _, after| match after {
                0 => vec![ev[0].clone(), ev[2].clone()],
                _ => vec![],
            },
            "g1",
            "expected seq 2, received seq 3",
        ),
        (
            "tampered",
            |ev, t, after| match after {
                0 => vec![ev[0].clone(), t.clone()],
                _ => vec![],
            },
            "g1",
            "seq 2 does not verify",
        ),
        (
            "another group",
            |ev, _, after| match after {
                0 => vec![ev[0].clone()],
                _ => vec![],
            },
            "g2",
            "an event of group g1",
        ),
    ];
    for (name, pages, group, needle) in cases {
        let (ev, t) = (events.clone(), tampered.clone());
        let base = stand_in(move |_, head| {
            if !target(head).contains("/events?") {
                return http("404 Not Found", "application/json", b"{}");
            }
            let answer = pages(&ev, &t, after_of(head));
            page(&answer.iter().collect::<Vec<_>>())
        });
        let mut child = mwp()
            .args(["replay", "--server", &base, "--group", group])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts");
        // Bounded: a replay that loops is killed, and fails the test below.
        let started = std::time::Instant::now();
        while child.try_wait().expect("waits").is_none() {
            if started.elapsed() > std::time::Duration::from_secs(20) {
                let _ = child.kill();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = child.wait_with_output().expect("runs");
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{name}: {}", stderr(&out));
        let printed: Vec<Value> = lines(&out.stdout)
            .iter()
            .map(|e| e["seq"].clone())
            .collect();
        let expected = if group == "g1" {
            vec![json!(1)]
        } else {
            vec![]
        };
        assert_eq!(
            printed, expected,
            "{name}: the events before the bad one, once"
        );
    }
}

#[test]
fn tail_reconnects_a_stream_gone_silent_and_gives_up_on_a_server_that_never_answers() {
    let events = transcript_events();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    // First connection: seq 1 and 2, then silence with the connection held open (no
    // keep-alive). Second: seq 3.
    let base = stand_in_open(move |n, head, mut conn| {
        seen.lock().expect("lock").push(head.to_lowercase());
        match n {
            0 => {
                let _ = conn.write_all(&sse(&[&events[0], &events[1]])[..]);
                std::thread::sleep(std::time::Duration::from_secs(60));
            }
            _ => {
                let _ = conn.write_all(&sse(&[&events[2]]));
            }
        }
    });
    let started = std::time::Instant::now();
    let out = mwp()
        .args(["tail", "--server", &base, "--group", "g1", "--until", "3"])
        .args(["--idle-timeout", "1"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    let printed: Vec<Value> = lines(&out.stdout)
        .iter()
        .map(|e| e["seq"].clone())
        .collect();
    assert_eq!(printed, vec![json!(1), json!(2), json!(3)]);
    assert!(
        stderr(&out).contains("reconnecting after seq 2"),
        "{}",
        stderr(&out)
    );
    assert!(heads.lock().expect("lock")[1].contains("last-event-id: 2"));

    // A server that accepts and never answers: exit 3, as one that cannot be reached.
    let mute = stand_in_open(|_, _, _conn| std::thread::sleep(std::time::Duration::from_secs(60)));
    let started = std::time::Instant::now();
    let out = mwp()
        .args([
            "tail",
            "--server",
            &mute,
            "--group",
            "g1",
            "--idle-timeout",
            "1",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn error_answers_are_read_bounded_and_quoted_without_control_characters() {
    // A 404 far longer than any mwp error, full of terminal escapes.
    let huge = stand_in(|_, _| http("404 Not Found", "text/html", &b"\x1b[31mx".repeat(2 << 20)));
    // An mwp error whose message would retitle and clear the terminal.
    let escapes = stand_in(|_, _| {
        let body =
            json!({"code": "NOT_FOUND", "message": "group \u{1b}]0;pwned\u{7}\u{1b}[2J gone"});
        http(
            "404 Not Found",
            "application/json",
            body.to_string().as_bytes(),
        )
    });
    for (base, needle) in [(&huge, "not an mwp error"), (&escapes, "\\u{1b}]0;pwned")] {
        let out = mwp()
            .args(["groups", "--server", base])
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            !out.stderr.contains(&0x1b),
            "raw escapes: {:?}",
            stderr(&out)
        );
        assert!(
            out.stderr.len() < 4096,
            "{} bytes of stderr",
            out.stderr.len()
        );
        assert!(stderr(&out).contains(needle), "{}", stderr(&out));
    }
}

#[test]
fn verify_source_over_http_reads_no_more_of_a_file_than_a_reader_accepts() {
    // head.json said to be 64 MiB: 1 MiB of it sent, then the connection held open.
    let base = stand_in_open(|_, _, mut conn| {
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 67108864\r\n\r\n";
        let _ = conn.write_all(head.as_bytes());
        let _ = conn.write_all(&vec![b' '; 1 << 20]);
        std::thread::sleep(std::time::Duration::from_secs(90));
    });
    let started = std::time::Instant::now();
    let out = mwp()
        .args([
            "verify",
            "--source",
            &base,
            "--group",
            "g1",
            "--authority-key",
        ])
        .arg("a".repeat(64))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = &lines(&out.stdout)[0];
    assert_eq!(report["error"]["code"], "MALFORMED", "{report}");
    assert_eq!(report["error"]["file"], "head.json", "{report}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "it waited for the rest"
    );
}

#[test]
fn submit_refuses_a_success_that_is_not_this_commands_receipt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (key, _) = keygen(dir.path(), "k.key");
    let events = transcript_events();
    let event: mwp_core::Event = serde_json::from_value(events[1].clone()).expect("an event");
    let other = serde_json::to_vec(&mwp_core::Receipt::of(&event)).expect("json");
    // Each answers GET /v1/authority as mwp does, then a 200 to the command.
    let answering = |answer: Vec<u8>| {
        stand_in(move |_, head| {
            if target(head) == "/v1/authority" {
                let key = json!({"key": "ab".repeat(32)}).to_string();
                return http("200 OK", "application/json", key.as_bytes());
            }
            http("200 OK", "application/json", &answer)
        })
    };
    for (answer, needle) in [
        (other, "a receipt of another command"),
        (b"{\"hello\": 1}".to_vec(), "not a receipt"),
    ] {
        let base = answering(answer);
        let out = submit(&base, &key, "alice", &[], &create_work("w1"));
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{needle}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "nothing printed as a decision");
    }
}

#[test]
fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = mwp().args(["completions", shell]).output().expect("runs");
        assert_eq!(out.status.code(), Some(0));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("keygen"),
            "{shell}"
        );
    }
}
