//! Access over real HTTP on 127.0.0.1: operator tokens, member-signed reads, `--public-read`,
//! `--open-groups`, and the `mwp serve` settings that keep secrets (docs/http.md, "Access").

mod e2e_support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;

use e2e_support::*;
use mwp_core::signed_read::SignedRead;
use mwp_core::SecretKey;
use mwp_host::memory_service::MemoryService;
use mwp_host::server::auth::{Access, OpenGroups, Tokens};
use mwp_host::server::{now_ms, ServerConfig};
use serde_json::Value;

const READ: &str = "read-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";

fn tokens() -> Tokens {
    Tokens::parse(&format!("read {READ}\nadmin {ADMIN}\n")).expect("tokens")
}

fn server(public_read: bool, open_groups: OpenGroups) -> TestServer {
    let config = ServerConfig {
        access: Access {
            tokens: tokens(),
            public_read,
            open_groups,
            ..Access::default()
        },
        ..ServerConfig::default()
    };
    let service = Arc::new(MemoryService::generate().expect("key"));
    TestServer::with_config(service, config)
}

fn get(
    server: &TestServer,
    target: &str,
    auth: Option<&str>,
) -> (u16, ureq::http::HeaderMap, Value) {
    let headers: Vec<(&str, &str)> = auth.map(|a| ("authorization", a)).into_iter().collect();
    let (status, h, body) = request("GET", &format!("{}{target}", server.base), &headers, b"");
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (status, h, body)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// The `Authorization` value of `actor` signing `GET target` at `at_ms` with `key`.
fn signed(target: &str, actor: &str, at_ms: u64, key: &SecretKey) -> String {
    SignedRead::sign("GET", target, id(actor), at_ms, key)
        .expect("signs")
        .header_value()
}

/// Asserts the JSON error shape and the code.
fn refused(answer: &(u16, ureq::http::HeaderMap, Value), status: u16, code: &str) {
    let (s, _, body) = answer;
    assert_eq!(*s, status, "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

#[test]
fn without_a_credential_reads_are_401_with_the_json_error_shape() {
    let server = server(false, OpenGroups::Any);
    opened(&server, "g1", 1);
    let answer = get(&server, "/v1/groups/g1/events", None);
    refused(&answer, 401, "UNAUTHORIZED");
    assert_eq!(answer.1["www-authenticate"], "Bearer, Mwp-Signature");
    for target in [
        "/v1/groups",
        "/v1/groups/g1/receipts/alice/open",
        "/v1/groups/g1/snapshots/latest",
        "/v1/groups/g1/events/stream",
        "/v1/groups/nope/events",
    ] {
        refused(&get(&server, target, None), 401, "UNAUTHORIZED");
    }
    // An unknown token, an unknown scheme and a malformed signature are refused alike.
    refused(
        &get(
            &server,
            "/v1/groups/g1/events",
            Some(&bearer("not-a-token-0123456789")),
        ),
        401,
        "UNAUTHORIZED",
    );
    refused(
        &get(&server, "/v1/groups/g1/events", Some("Basic YTpi")),
        401,
        "UNAUTHORIZED",
    );
    refused(
        &get(
            &server,
            "/v1/groups/g1/events",
            Some("Mwp-Signature actor=w0"),
        ),
        401,
        "UNAUTHORIZED",
    );
    // The authority's public key and the dashboard's files stay public.
    assert_eq!(get(&server, "/v1/authority", None).0, 200);
    let (status, _, _) = request("GET", &format!("{}/", server.base), &[], b"");
    assert_eq!(status, 200);
}

#[test]
fn tokens_of_either_scope_read_and_list() {
    let server = server(false, OpenGroups::Any);
    opened(&server, "g1", 1);
    for token in [READ, ADMIN] {
        let (status, _, body) = get(&server, "/v1/groups/g1/events", Some(&bearer(token)));
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["events"].as_array().expect("events").len(), 1);
        let (status, _, body) = get(&server, "/v1/groups", Some(&bearer(token)));
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["groups"][0]["group"], "g1");
    }
}

/// Two `Authorization` headers are refused whichever holds a good token; no refusal repeats
/// a credential, not even one sent without its scheme or after a tab.
#[test]
fn two_credentials_are_refused_and_no_refusal_repeats_one() {
    let server = server(false, OpenGroups::Token);
    let (admin, read) = (bearer(ADMIN), bearer(READ));
    assert_eq!(post_open(&server, "g1", Some(&admin)).0, 200);
    let groups = || get(&server, "/v1/groups", Some(&read)).2["groups"].clone();
    let url = format!("{}/v1/groups", server.base);
    for pair in [
        [read.clone(), bearer("wrong-0123456789")],
        [bearer("wrong-0123456789"), read.clone()],
    ] {
        let headers = [
            ("authorization", pair[0].as_str()),
            ("authorization", pair[1].as_str()),
        ];
        let (status, h, body) = request("GET", &url, &headers, b"");
        let body: Value = serde_json::from_slice(&body).expect("json");
        assert!(
            body["message"]
                .as_str()
                .expect("message")
                .contains("2 Authorization headers"),
            "{body}"
        );
        refused(&(status, h, body), 401, "UNAUTHORIZED");
    }
    // Opening a group under `--open-groups token` reads the same header.
    let open = serde_json::to_vec(&open_group(
        "g2",
        server.client().authority_key().expect("key"),
        &[],
    ))
    .expect("json");
    let (status, _, body) = request(
        "POST",
        &format!("{}/v1/groups/g2/commands", server.base),
        &[
            ("content-type", "application/json"),
            ("authorization", admin.as_str()),
            ("authorization", read.as_str()),
        ],
        &open,
    );
    let body: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(
        (status, body["code"].as_str()),
        (401, Some("UNAUTHORIZED")),
        "{body}"
    );
    assert_eq!(
        groups().as_array().map(Vec::len),
        Some(1),
        "nothing changed"
    );
    // A tab after the scheme is read as the space; a lone word is not named.
    assert_eq!(
        get(&server, "/v1/groups", Some(&format!("Bearer\t{READ}"))).0,
        200
    );
    for sent in [READ.to_owned(), format!("Token\t{READ}x")] {
        let answer = get(&server, "/v1/groups", Some(&sent));
        refused(&answer, 401, "UNAUTHORIZED");
        assert!(!answer.2.to_string().contains(READ), "{}", answer.2);
    }
}

#[test]
fn a_member_reads_its_own_group_by_signature_and_no_other() {
    let server = server(false, OpenGroups::Any);
    opened(&server, "g1", 1); // alice, w0
    let client = server.client();
    let authority = client.authority_key().expect("key");
    client
        .submit(&open_group("g2", authority, &["w1".to_owned()]))
        .expect("opens g2");
    let now = now_ms();
    let target = "/v1/groups/g1/events?after=0";
    let (status, _, body) = get(
        &server,
        target,
        Some(&signed(target, "w0", now, &key("w0"))),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["events"].as_array().expect("events").len(), 1);
    let receipt = "/v1/groups/g1/receipts/alice/open";
    let (status, _, _) = get(
        &server,
        receipt,
        Some(&signed(receipt, "w0", now, &key("w0"))),
    );
    assert_eq!(status, 200);
    // The group as the route reads it, percent-escapes decoded: `g%31` is `g1`, and a member
    // of g2 does not read g1 so.
    let escaped = "/v1/groups/g%31/events?after=0";
    let (status, _, body) = get(
        &server,
        escaped,
        Some(&signed(escaped, "w0", now, &key("w0"))),
    );
    assert_eq!(status, 200, "{body}");
    let answer = get(
        &server,
        escaped,
        Some(&signed(escaped, "w1", now, &key("w1"))),
    );
    refused(&answer, 403, "FORBIDDEN");

    // A member of another group: 403.
    let other = "/v1/groups/g2/events";
    let answer = get(&server, other, Some(&signed(other, "w0", now, &key("w0"))));
    refused(&answer, 403, "FORBIDDEN");
    // Listing groups needs a token.
    let list = "/v1/groups";
    refused(
        &get(&server, list, Some(&signed(list, "w0", now, &key("w0")))),
        403,
        "FORBIDDEN",
    );
    // Signed for another target, or with another key: 401.
    let answer = get(
        &server,
        "/v1/groups/g1/events?after=1",
        Some(&signed(target, "w0", now, &key("w0"))),
    );
    refused(&answer, 403, "FORBIDDEN");
    let answer = get(
        &server,
        target,
        Some(&signed(target, "w0", now, &key("w1"))),
    );
    refused(&answer, 403, "FORBIDDEN");
}

/// A signed read that does not pass tells nothing of the group: an actor that is not a member,
/// a group that does not exist, and a signature that does not verify under the member's key
/// get the same answer, byte for byte but for the group the request named.
#[test]
fn a_refused_signed_read_tells_nothing_of_the_group() {
    let server = server(false, OpenGroups::Any);
    opened(&server, "g1", 1); // alice, w0
    let now = now_ms();
    let zeros = "0".repeat(128);
    let forged = |actor: &str| format!("Mwp-Signature actor={actor},at={now},sig={zeros}");
    let head = "/v1/groups/g1/head";
    let missing = "/v1/groups/g9/head";
    let answers = [
        ("not a member", get(&server, head, Some(&forged("mallory")))),
        (
            "no such group",
            get(&server, missing, Some(&forged("alice"))),
        ),
        ("zero signature", get(&server, head, Some(&forged("alice")))),
        (
            "another key",
            get(&server, head, Some(&signed(head, "w0", now, &key("w1")))),
        ),
        (
            "another target",
            get(&server, head, Some(&signed(missing, "w0", now, &key("w0")))),
        ),
        (
            "a member's signature, no such group",
            get(
                &server,
                missing,
                Some(&signed(missing, "w0", now, &key("w0"))),
            ),
        ),
    ];
    // What may differ: the date, and nothing else (the groups named have one length).
    let shape = |(status, headers, body): &(u16, ureq::http::HeaderMap, Value)| {
        let mut names: Vec<(String, String)> = headers
            .iter()
            .filter(|(n, _)| n.as_str() != "date")
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("?").to_owned()))
            .collect();
        names.sort();
        let body = serde_json::to_string(body)
            .expect("JSON")
            .replace("g9", "g1");
        (*status, names, body)
    };
    let (_, first) = &answers[0];
    refused(first, 403, "FORBIDDEN");
    let message = first.2["message"].as_str().expect("message");
    assert!(
        message.contains("group g1") && !message.contains("mallory"),
        "{message}"
    );
    for (case, answer) in &answers[1..] {
        assert_eq!(shape(answer), shape(first), "{case}");
    }
}

#[test]
fn a_signed_read_outside_the_clock_skew_is_401() {
    let server = server(false, OpenGroups::Any);
    opened(&server, "g1", 1);
    let target = "/v1/groups/g1/events";
    let skew = Access::default().max_skew_ms;
    for at in [now_ms() - skew - 60_000, now_ms() + skew + 60_000] {
        let answer = get(&server, target, Some(&signed(target, "w0", at, &key("w0"))));
        refused(&answer, 401, "UNAUTHORIZED");
        assert!(answer.2["server_time"].is_u64(), "{}", answer.2);
    }
    // Within the skew it reads.
    let at = now_ms() - skew / 2;
    let (status, _, _) = get(&server, target, Some(&signed(target, "w0", at, &key("w0"))));
    assert_eq!(status, 200);
}

#[test]
fn public_read_lets_anyone_read_and_list() {
    let server = server(true, OpenGroups::Any);
    opened(&server, "g1", 1);
    assert_eq!(get(&server, "/v1/groups/g1/events", None).0, 200);
    assert_eq!(get(&server, "/v1/groups", None).0, 200);
}

fn post_open(server: &TestServer, group: &str, auth: Option<&str>) -> (u16, Value) {
    let authority = server.client().authority_key().expect("key");
    let body = serde_json::to_vec(&open_group(group, authority, &[])).expect("json");
    let mut headers = vec![("content-type", "application/json")];
    if let Some(a) = auth {
        headers.push(("authorization", a));
    }
    let url = format!("{}/v1/groups/{group}/commands", server.base);
    let (status, _, body) = request("POST", &url, &headers, &body);
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

#[test]
fn open_groups_token_needs_an_admin_token_to_create_a_group() {
    let server = server(true, OpenGroups::Token);
    let (status, body) = post_open(&server, "g1", None);
    assert_eq!((status, body["code"].as_str()), (401, Some("UNAUTHORIZED")));
    let (status, body) = post_open(&server, "g1", Some(&bearer(READ)));
    assert_eq!((status, body["code"].as_str()), (403, Some("FORBIDDEN")));
    let signature = signed("/v1/groups/g1/commands", "alice", now_ms(), &key("alice"));
    let (status, body) = post_open(&server, "g1", Some(&signature));
    assert_eq!((status, body["code"].as_str()), (403, Some("FORBIDDEN")));
    assert_eq!(
        get(&server, "/v1/groups", None).2["groups"],
        serde_json::json!([])
    );
    let (status, body) = post_open(&server, "g1", Some(&bearer(ADMIN)));
    assert_eq!(status, 200, "{body}");
    // A retry of the same open_group finds the group and answers its Duplicate.
    let (status, body) = post_open(&server, "g1", None);
    assert_eq!(status, 200, "{body}");
    // Other commands need no token: they carry their own signature.
    let client = server.client();
    client
        .submit(&cmd("g1", "alice", "w1", None, create_work("w1", &[])))
        .expect("accepted without a token");
}

#[test]
fn open_groups_any_lets_anyone_create() {
    let server = server(false, OpenGroups::Any);
    let (status, body) = post_open(&server, "g1", None);
    assert_eq!(status, 200, "{body}");
}

fn post(server: &TestServer, command: &mwp_core::Command, auth: Option<&str>) -> (u16, Value) {
    let body = serde_json::to_vec(command).expect("json");
    let mut headers = vec![("content-type", "application/json")];
    if let Some(a) = auth {
        headers.push(("authorization", a));
    }
    let url = format!("{}/v1/groups/{}/commands", server.base, command.group);
    let (status, _, body) = request("POST", &url, &headers, &body);
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// On a server whose reads need a credential, a command refused before its sender is
/// authenticated tells nothing of the group (docs/security.md, "What a refusal tells"): not
/// whether it exists, nor its org, its members or their keys. A sender who signs as a member
/// is told everything, and so is a request with an operator token.
#[test]
fn a_refusal_tells_an_unauthenticated_sender_nothing_of_the_group() {
    let public = server(true, OpenGroups::Any);
    let server = server(false, OpenGroups::Token);
    assert_eq!(post_open(&server, "g1", Some(&bearer(ADMIN))).0, 200);
    let mallory = SecretKey::for_transcript("mallory");
    let as_mallory = |group: &str, org: &str, actor: &str| {
        mwp_core::Command::signed(
            id(org),
            id(group),
            id(actor),
            id("probe"),
            1,
            None,
            create_work("w9", &[]),
            &mallory,
        )
        .expect("signs")
    };
    let probes = [
        as_mallory("nowhere", "acme", "alice"), // not opened: NOT_FOUND
        as_mallory("g1", "other", "alice"),     // another org: WRONG_GROUP, naming acme
        as_mallory("g1", "acme", "bob"),        // not a member: UNKNOWN_ACTOR
        as_mallory("g1", "acme", "alice"),      // a member's name: BAD_SIGNATURE, naming her key
    ];
    let answers: Vec<(u16, Value)> = probes.iter().map(|c| post(&server, c, None)).collect();
    let alice_key = key("alice").public().to_string();
    for ((status, body), probe) in answers.iter().zip(&probes) {
        assert_eq!(
            (*status, body["code"].as_str()),
            (401, Some("BAD_SIGNATURE")),
            "{body}"
        );
        let message = body["message"].as_str().expect("a message");
        assert!(
            !message.contains("acme") && !message.contains(&alice_key),
            "{body}"
        );
        assert_eq!(
            message,
            answers[0].1["message"]
                .as_str()
                .expect("a message")
                .replace("nowhere", probe.group.as_str()),
            "every probe gets the same answer"
        );
    }
    // An open_group for an existing group without an admin token is answered as for a new one.
    let new = post_open(&server, "g2", None);
    let mut stranger = open_group("g1", server.client().authority_key().expect("key"), &[]);
    stranger.sig = mallory.sign(&stranger.content_bytes().expect("content"));
    let existing = post(&server, &stranger, None);
    assert_eq!((new.0, existing.0), (401, 401));
    assert_eq!(new.1["message"], existing.1["message"]);
    // With an operator token the refusal says why.
    let (_, body) = post(&server, &probes[3], Some(&bearer(READ)));
    assert!(
        body["message"]
            .as_str()
            .expect("a message")
            .contains(&alice_key),
        "{body}"
    );
    let (_, body) = post(&server, &probes[0], Some(&bearer(READ)));
    assert_eq!(body["code"], "NOT_FOUND");
    // A member is told everything after her signature verifies.
    let (status, body) = post(
        &server,
        &cmd("g1", "alice", "s1", None, create_work("w1", &["zz"])),
        None,
    );
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("NOT_FOUND")),
        "{body}"
    );
    // On a server whose reads are public, every refusal says why, as before.
    let (status, body) = post(&public, &probes[0], None);
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("NOT_FOUND")),
        "{body}"
    );
}

// ---- `mwp serve`

fn mwp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mwp"))
}

/// Starts `mwp serve` with `args`; returns the child (the caller kills and waits for it) and
/// its startup line.
#[allow(clippy::zombie_processes)]
fn serve(args: &[&str]) -> (std::process::Child, String) {
    let mut child = mwp()
        .arg("serve")
        .args(args)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("starts");
    let mut reader = BufReader::new(child.stderr.take().expect("piped"));
    loop {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).expect("reads") > 0,
            "serve printed its address"
        );
        if line.contains("authority on ") {
            return (child, line);
        }
    }
}

fn base_of(line: &str) -> String {
    let rest = line.split("authority on ").nth(1).expect("address");
    rest.split_whitespace().next().expect("url").to_owned()
}

fn write_private(path: &std::path::Path, text: &str, mode: u32) {
    std::fs::write(path, text).expect("write");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
}

#[test]
fn serve_says_which_mode_it_is_in_and_tokens_close_loopback_reads() {
    let (mut child, line) = serve(&["--addr", "127.0.0.1:0"]);
    assert!(line.contains("reads are public"), "{line}");
    assert!(line.contains("anyone may create groups"), "{line}");
    child.kill().expect("kill");
    let _ = child.wait();

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tokens");
    write_private(&file, &format!("read {READ}\n"), 0o600);
    let file_arg = file.to_str().expect("utf-8");
    let (mut child, line) = serve(&["--addr", "127.0.0.1:0", "--token-file", file_arg]);
    assert!(line.contains("reads need a token"), "{line}");
    assert!(!line.contains(READ), "{line}");
    let base = base_of(&line);
    let (status, _, _) = request("GET", &format!("{base}/v1/groups"), &[], b"");
    assert_eq!(status, 401);
    let auth = bearer(READ);
    let (status, _, _) = request(
        "GET",
        &format!("{base}/v1/groups"),
        &[("authorization", &auth)],
        b"",
    );
    assert_eq!(status, 200);
    child.kill().expect("kill");
    let _ = child.wait();

    let (mut child, line) = serve(&[
        "--addr",
        "127.0.0.1:0",
        "--token-file",
        file_arg,
        "--public-read",
        "--open-groups",
        "token",
    ]);
    assert!(line.contains("reads are public"), "{line}");
    assert!(line.contains("needs an admin token"), "{line}");
    let base = base_of(&line);
    let (status, _, _) = request("GET", &format!("{base}/v1/groups"), &[], b"");
    assert_eq!(status, 200);
    child.kill().expect("kill");
    let _ = child.wait();
}

#[cfg(unix)]
#[test]
fn serve_refuses_a_token_file_or_key_file_others_may_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens");
    write_private(&tokens, &format!("read {READ}\n"), 0o644);
    let out = mwp()
        .args(["serve", "--addr", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mode 0644"), "{err}");
    assert!(!err.contains(READ), "{err}");

    let key = dir.path().join("authority.key");
    write_private(&key, &format!("{}\n", "11".repeat(32)), 0o644);
    let out = mwp()
        .args(["serve", "--addr", "127.0.0.1:0", "--authority-key-file"])
        .arg(&key)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("it must be 0600"), "{err}");
    // At 0600 it is taken (a memory store signs with it).
    write_private(&key, &format!("{}\n", "11".repeat(32)), 0o600);
    let key_arg = key.to_str().expect("utf-8");
    let (mut child, line) = serve(&["--addr", "127.0.0.1:0", "--authority-key-file", key_arg]);
    let base = base_of(&line);
    let client = mwp_host::server::client::Client::new(base);
    let expected = SecretKey::from_bytes(&[0x11; 32]).public();
    assert_eq!(client.authority_key().expect("key"), expected);
    child.kill().expect("kill");
    let _ = child.wait();
}

/// `mwp serve --token-file FILE` with `FILE` as given: its exit code and stderr, or `None`
/// if it had not exited within 20 s (it is then killed: a read that blocks, or a server that
/// took the file and started).
fn serve_exit(file: &std::path::Path) -> Option<(Option<i32>, String)> {
    let mut child = mwp()
        .args(["serve", "--addr", "127.0.0.1:0", "--token-file"])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawns");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().expect("waits") {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
                .expect("reads stderr");
            return Some((status.code(), err));
        }
        if std::time::Instant::now() > deadline {
            child.kill().expect("kill");
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The token file is read only if it is a regular file of at most
/// `auth::MAX_TOKEN_FILE` bytes: a FIFO would block the start forever, and a file of
/// gigabytes would be held whole.
#[cfg(unix)]
#[test]
fn serve_refuses_a_token_file_that_is_a_fifo_or_too_long() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("tokens.fifo");
    let made = Command::new("mkfifo")
        .arg("-m")
        .arg("600")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let (code, err) = serve_exit(&fifo).expect("a FIFO is refused at once, not read");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&fifo.display().to_string()) && err.contains("a FIFO"),
        "{err}"
    );

    // Good tokens, then comments past the cap: refused, not read whole.
    let long = dir.path().join("tokens.long");
    let cap = mwp_host::server::auth::MAX_TOKEN_FILE;
    let mut text = format!("read {READ}\n");
    while text.len() as u64 <= cap {
        text.push_str("# a comment line that pads the file past its cap\n");
    }
    write_private(&long, &text, 0o600);
    let (code, err) = serve_exit(&long).expect("an oversized file is refused at once");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&long.display().to_string()) && err.contains(&format!("{cap} bytes")),
        "{err}"
    );
    assert!(!err.contains(READ), "{err}");

    // At the cap it is taken.
    text.truncate(cap as usize);
    let cut = text.rfind('\n').expect("a line") + 1;
    text.truncate(cut);
    write_private(&long, &text, 0o600);
    let file_arg = long.to_str().expect("utf-8");
    let (mut child, line) = serve(&["--addr", "127.0.0.1:0", "--token-file", file_arg]);
    assert!(line.contains("reads need a token"), "{line}");
    child.kill().expect("kill");
    let _ = child.wait();
}

#[test]
fn serve_refuses_a_store_signed_by_a_transcript_key_unless_allowed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let transcript = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/transcripts/lifecycle.jsonl");
    let out = mwp()
        .arg("transcript")
        .arg(&transcript)
        .arg("--data")
        .arg(&data)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    let out = mwp()
        .args(["serve", "--addr", "127.0.0.1:0", "--data"])
        .arg(&data)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("transcript key of @authority"), "{err}");
    assert!(err.contains("--allow-test-key"), "{err}");
    let data_arg = data.to_str().expect("utf-8");
    let (mut child, _) = serve(&[
        "--addr",
        "127.0.0.1:0",
        "--data",
        data_arg,
        "--allow-test-key",
    ]);
    child.kill().expect("kill");
    let _ = child.wait();
}

#[test]
fn a_store_password_is_never_printed() {
    let secret = "s3cr3t-pw";
    let url =
        format!("postgres://mwp:{secret}@127.0.0.1:1/mwp?password={secret}&connect_timeout=1");
    // From MWP_STORE and from --store: the error names the store without the password.
    let from_env = mwp()
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env("MWP_STORE", &url)
        .output()
        .expect("runs");
    let from_flag = mwp()
        .args(["serve", "--addr", "127.0.0.1:0", "--store", &url])
        .output()
        .expect("runs");
    for out in [from_env, from_flag] {
        assert_ne!(out.status.code(), Some(0));
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        #[cfg(not(feature = "postgres"))]
        assert!(all.contains("127.0.0.1:1"), "the store is named: {all}");
        assert!(!all.contains(secret), "{all}");
    }
    // Nor by the Debug form of the parsed command line.
    use clap::Parser;
    let cli =
        mwp_host::cli::Cli::try_parse_from(["mwp", "serve", "--store", &url]).expect("parses");
    let shown = format!("{cli:?}");
    assert!(shown.contains("127.0.0.1:1"), "{shown}");
    assert!(!shown.contains(secret), "{shown}");
}
