//! docs/openapi.json against the server: every route served is documented and every
//! documented route is served; every command body and event kind has a schema; the commands,
//! events, receipts and errors of tests/vectors validate; and every `$ curl` example of
//! docs/http.md, run against a real server, sends and gets what the schemas allow.

mod e2e_support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::Arc;

use e2e_support::*;
use mwp_core::memory::MemoryAuthority;
use mwp_core::state::GroupState;
use mwp_core::transcript::{Host, Runner};
use mwp_core::{Body, Command, Decision, EventKind, Id, SecretKey, WorkState};
use mwp_host::memory_service::MemoryService;
use mwp_host::server::Route;
use serde_json::{json, Value};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn document() -> Value {
    serde_json::from_str(mwp_host::server::openapi::DOCUMENT).expect("docs/openapi.json is JSON")
}

/// A validator of `instance`s against `#/components/schemas/{name}` of the document.
fn validator(doc: &Value, name: &str) -> jsonschema::Validator {
    assert!(
        doc["components"]["schemas"].get(name).is_some(),
        "docs/openapi.json has no schema {name}"
    );
    validator_of(doc, json!({"$ref": format!("#/components/schemas/{name}")}))
}

fn validator_of(doc: &Value, schema: Value) -> jsonschema::Validator {
    let mut root = schema;
    root["components"] = doc["components"].clone();
    jsonschema::draft202012::new(&root).expect("the schema compiles")
}

fn check(v: &jsonschema::Validator, instance: &Value, what: &str) {
    let errors: Vec<String> = v.iter_errors(instance).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{what} does not match its schema: {errors:?}\n{instance}"
    );
}

#[test]
fn every_route_served_is_documented_and_every_documented_route_is_served() {
    let doc = document();
    let served: BTreeSet<(String, String)> = Route::ALL
        .iter()
        .map(|r| {
            let (method, path) = r.method_and_path();
            (method.as_str().to_ascii_lowercase(), path.to_owned())
        })
        .collect();
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object()
                .expect("operations")
                .keys()
                .filter(|k| ["get", "post", "put", "delete", "patch", "head"].contains(&k.as_str()))
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect();
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(
        undocumented.is_empty(),
        "served but not in docs/openapi.json: {undocumented:?}"
    );
    assert!(
        unserved.is_empty(),
        "in docs/openapi.json but not served: {unserved:?}"
    );

    // And the router really serves each one: no route of the table answers the fallback's
    // "nothing is served at" 404.
    let server = TestServer::start();
    for route in Route::ALL {
        let (method, path) = route.method_and_path();
        let url = format!(
            "{}{}",
            server.base,
            path.replace("{group}", "g1")
                .replace("{actor}", "alice")
                .replace("{action}", "a1")
        );
        if route == Route::Stream {
            continue; // Answered 404 NOT_FOUND for an unknown group before it streams.
        }
        let (_, _, body) = request(method.as_str(), &url, &[], b"{}");
        let text = String::from_utf8_lossy(&body);
        assert!(
            !text.contains("nothing is served at"),
            "{method} {path}: {text}"
        );
    }
}

#[test]
fn docs_openapi_json_is_what_scripts_openapi_py_writes_from_the_rust_types() {
    let out = std::process::Command::new("python3")
        .arg(repo().join("scripts/openapi.py"))
        .arg("--check")
        .output()
        .expect("python3 runs (the machine has CPython 3)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The variant names (`type` tags) serde knows for a tagged enum, read from the error it
/// gives for an unknown tag: derived from the Rust type, so a new variant shows up here.
fn serde_tags<T: serde::de::DeserializeOwned>() -> Vec<String> {
    let err = match serde_json::from_value::<T>(json!({"type": "\u{1}"})) {
        Ok(_) => panic!("an unknown tag decodes"),
        Err(e) => e.to_string(),
    };
    let list = err
        .split("expected one of")
        .nth(1)
        .expect("serde lists the variants");
    list.split(',')
        .map(|s| s.trim().trim_matches('`').to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The schema whose `type` property is the constant `tag`.
fn schema_for_tag<'a>(doc: &'a Value, union: &str, tag: &str) -> Option<&'a str> {
    let schemas = &doc["components"]["schemas"];
    schemas[union]["oneOf"].as_array()?.iter().find_map(|r| {
        let name = r["$ref"].as_str()?.rsplit('/').next()?;
        (schemas[name]["properties"]["type"]["const"] == tag).then_some(name)
    })
}

#[test]
fn every_command_body_and_event_kind_has_a_schema() {
    let doc = document();
    let bodies = serde_tags::<Body>();
    let kinds: Vec<String> = EventKind::TYPES.iter().map(|t| t.to_string()).collect();
    assert!(
        bodies.len() >= 20 && kinds.len() >= 20,
        "{bodies:?} {kinds:?}"
    );
    for tag in &bodies {
        assert!(
            schema_for_tag(&doc, "Body", tag).is_some(),
            "no schema for body {tag}"
        );
    }
    for tag in &kinds {
        assert!(
            schema_for_tag(&doc, "EventKind", tag).is_some(),
            "no schema for kind {tag}"
        );
    }
    let one_of = |union: &str| {
        doc["components"]["schemas"][union]["oneOf"]
            .as_array()
            .map_or(0, Vec::len)
    };
    assert_eq!(
        one_of("Body"),
        bodies.len(),
        "Body lists exactly the Rust variants"
    );
    assert_eq!(
        one_of("EventKind"),
        kinds.len(),
        "EventKind lists exactly the Rust variants"
    );
    for name in ["Receipt", "Error", "Command", "Event"] {
        assert!(doc["components"]["schemas"].get(name).is_some(), "{name}");
    }
}

/// A memory authority that keeps every command the transcript runner builds.
struct Recording {
    inner: MemoryAuthority,
    commands: Vec<Command>,
}

impl Host for Recording {
    fn submit(&mut self, cmd: &Command, now_ms: u64) -> mwp_core::Result<Decision> {
        self.commands.push(cmd.clone());
        self.inner.submit(cmd, now_ms)
    }
    fn restart(&mut self) -> mwp_core::Result<()> {
        self.inner.restart()
    }
    fn state(&self, group: &Id) -> Option<GroupState> {
        Host::state(&self.inner, group)
    }
    fn work_state(&self, group: &Id, work: &Id) -> Option<WorkState> {
        Host::work_state(&self.inner, group, work)
    }
    fn advance(&mut self, group: &Id, now_ms: u64) -> mwp_core::Result<Vec<Decision>> {
        Host::advance(&mut self.inner, group, now_ms)
    }
}

#[test]
fn the_vectors_commands_events_receipts_and_errors_match_the_schemas() {
    let doc = document();
    let (command, event, receipt, error) = (
        validator(&doc, "Command"),
        validator(&doc, "Event"),
        validator(&doc, "Receipt"),
        validator(&doc, "Error"),
    );
    let mut kinds_seen = BTreeSet::new();
    let mut bodies_seen = BTreeSet::new();
    let dir = repo().join("tests/vectors");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/vectors")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl") && !n.ends_with(".out.jsonl"))
        .collect();
    names.sort();
    for name in names {
        let text = std::fs::read_to_string(dir.join(&name)).expect("reads");
        let mut host = Recording {
            inner: MemoryAuthority::new(),
            commands: Vec::new(),
        };
        let out = Runner::new(&mut host).run_all(&text);
        for cmd in &host.commands {
            let value = serde_json::to_value(cmd).expect("encodes");
            bodies_seen.insert(value["body"]["type"].as_str().unwrap_or("").to_owned());
            check(&command, &value, &format!("a command of {name}"));
        }
        for line in &out {
            if let Some(e) = line.get("event") {
                kinds_seen.insert(e["kind"]["type"].as_str().unwrap_or("").to_owned());
                check(&event, e, &format!("an event of {name}"));
            }
            if let Some(r) = line.get("receipt") {
                check(&receipt, r, &format!("a receipt of {name}"));
            }
            if let Some(e) = line.get("error") {
                check(&error, e, &format!("an error of {name}"));
            }
        }
    }
    assert!(
        kinds_seen.len() >= 20,
        "the vectors hold most kinds: {kinds_seen:?}"
    );
    assert!(
        bodies_seen.len() >= 20,
        "the vectors hold most bodies: {bodies_seen:?}"
    );
}

/// One `$ curl` example of docs/http.md.
#[derive(Debug)]
struct Example {
    line: usize,
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Option<String>,
    /// What the document shows as the answer.
    answer: String,
}

/// Splits a shell command line the way `sh` does for the quoting the examples use.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (_, c) => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

fn examples() -> Vec<Example> {
    let text = std::fs::read_to_string(repo().join("docs/http.md")).expect("docs/http.md");
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(cmd) = lines[i].strip_prefix("$ curl ") else {
            i += 1;
            continue;
        };
        let line = i + 1;
        let words = shell_words(cmd);
        let mut ex = Example {
            line,
            method: "GET".into(),
            url: String::new(),
            headers: Vec::new(),
            body: None,
            answer: String::new(),
        };
        let mut w = words.iter();
        while let Some(word) = w.next() {
            match word.as_str() {
                "-s" | "-N" => {}
                "--max-time" => {
                    w.next();
                }
                "-X" => ex.method = w.next().expect("a method").clone(),
                "-H" => {
                    let h = w.next().expect("a header");
                    let (k, v) = h.split_once(':').expect("name: value");
                    ex.headers.push((k.trim().to_owned(), v.trim().to_owned()));
                }
                "-d" => {
                    ex.body = Some(w.next().expect("a body").clone());
                    ex.method = "POST".into();
                }
                url if url.starts_with("http://") => ex.url = url.to_owned(),
                other => panic!("docs/http.md:{line}: curl option {other} is not understood"),
            }
        }
        assert!(!ex.url.is_empty(), "docs/http.md:{line}: no URL");
        i += 1;
        let mut answer = Vec::new();
        while i < lines.len() && !lines[i].starts_with("```") && !lines[i].starts_with("$ ") {
            answer.push(lines[i]);
            i += 1;
        }
        ex.answer = answer.join("\n");
        out.push(ex);
    }
    out
}

/// The operation of the document that `method url` reaches, and its path parameters' names.
fn operation<'a>(doc: &'a Value, method: &str, path: &str) -> &'a Value {
    let segments: Vec<&str> = path.split('/').collect();
    for (template, ops) in doc["paths"].as_object().expect("paths") {
        let t: Vec<&str> = template.split('/').collect();
        let fits = t.len() == segments.len()
            && t.iter()
                .zip(&segments)
                .all(|(a, b)| a.starts_with('{') || a == b);
        if fits {
            if let Some(op) = ops.get(method.to_ascii_lowercase()) {
                return op;
            }
        }
    }
    panic!("docs/openapi.json has no operation for {method} {path}");
}

/// The schema of the JSON answer with `status`, if the document gives one.
fn answer_schema(op: &Value, status: u16) -> Option<Value> {
    op["responses"][status.to_string()]["content"]["application/json"]
        .get("schema")
        .cloned()
}

/// The server the examples run against: a fixed authority key, so the example commands
/// (signed with the transcript keys of tests/vectors) are real.
fn example_server() -> TestServer {
    let key = SecretKey::from_bytes(&[7u8; 32]);
    TestServer::with_dyn(Arc::new(MemoryService::new(key)))
}

#[test]
fn every_curl_example_in_http_md_runs_and_matches_the_schemas() {
    let doc = document();
    let examples = examples();
    let server = example_server();
    let mut routes_shown = BTreeSet::new();
    for ex in &examples {
        let where_ = format!("docs/http.md:{}", ex.line);
        let target = ex
            .url
            .strip_prefix("http://127.0.0.1:7878")
            .unwrap_or_else(|| panic!("{where_}: examples use http://127.0.0.1:7878"));
        let path = target.split('?').next().unwrap_or(target);
        let op = operation(&doc, &ex.method, path);
        routes_shown.insert(op["operationId"].as_str().unwrap_or("").to_owned());
        let url = format!("{}{target}", server.base);
        let headers: Vec<(&str, &str)> = ex
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if let Some(body) = &ex.body {
            let value: Value = serde_json::from_str(body)
                .unwrap_or_else(|e| panic!("{where_}: the request body is not JSON: {e}"));
            let schema = op["requestBody"]["content"]["application/json"]["schema"].clone();
            check(
                &validator_of(&doc, schema),
                &value,
                &format!("{where_}: the request"),
            );
        }
        if path.ends_with("/events/stream") {
            stream_example(&doc, ex, &url, &where_);
            continue;
        }
        let (status, _, body) = request(
            &ex.method,
            &url,
            &headers,
            ex.body.as_deref().unwrap_or("").as_bytes(),
        );
        let body = String::from_utf8(body).expect("text answer");
        if let Some(prefix) = ex.answer.strip_suffix('…') {
            assert_eq!(status, 200, "{where_}: {body}");
            assert!(
                body.starts_with(prefix),
                "{where_}: the answer starts otherwise: {body}"
            );
            continue;
        }
        if path == "/metrics" {
            assert_eq!(status, 200, "{where_}");
            // Counts of what the examples above did are exact; times are not, nor is the
            // live tail count (the tail above ends when the server notices its client left).
            let exact = [
                "mwp_commands_total",
                "mwp_accept_seconds_count",
                "mwp_groups",
                "mwp_store_errors_total",
            ];
            for line in ex.answer.lines().filter(|l| !l.starts_with('#')) {
                let name = line.split([' ', '{']).next().unwrap_or("");
                if exact.contains(&name) {
                    assert!(
                        body.lines().any(|l| l == line),
                        "{where_}: the answer has no line {line:?}:\n{body}"
                    );
                } else {
                    assert!(
                        body.contains(name),
                        "{where_}: {name} is not in the answer:\n{body}"
                    );
                }
            }
            continue;
        }
        let shown: Value = serde_json::from_str(&ex.answer)
            .unwrap_or_else(|e| panic!("{where_}: the answer shown is not JSON: {e}"));
        let real: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{where_}: the server's answer is not JSON: {e}: {body}"));
        let schema = answer_schema(op, status)
            .unwrap_or_else(|| panic!("{where_}: no schema for status {status}: {body}"));
        let v = validator_of(&doc, schema);
        check(&v, &real, &format!("{where_}: the server's answer"));
        check(&v, &shown, &format!("{where_}: the answer shown"));
        if let Some(code) = shown.get("code") {
            assert_eq!(real.get("code"), Some(code), "{where_}: {body}");
        } else {
            assert!((200..300).contains(&status), "{where_}: {status} {body}");
            assert_eq!(
                keys(&shown),
                keys(&real),
                "{where_}: the answer shown has the fields of the real one: {body}"
            );
        }
    }
    let every: BTreeSet<String> = doc["paths"]
        .as_object()
        .expect("paths")
        .values()
        .flat_map(|ops| ops.as_object().expect("ops").values())
        .filter_map(|op| op["operationId"].as_str().map(str::to_owned))
        .collect();
    let missing: Vec<_> = every.difference(&routes_shown).collect();
    assert!(
        missing.is_empty(),
        "docs/http.md has no curl example for {missing:?}"
    );
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

/// A live tail: the events shown as `data:` lines arrive the same way, each a valid Event;
/// the `event: head` messages shown are signed heads, and so are the ones that arrive.
fn stream_example(doc: &Value, ex: &Example, url: &str, where_: &str) {
    let event = validator(doc, "Event");
    let head = validator(doc, "SignedHead");
    // (kind, data) of each message shown.
    let mut shown: Vec<(bool, &str)> = Vec::new();
    let mut is_head = false;
    for l in ex.answer.lines() {
        if l == "event: head" {
            is_head = true;
        } else if let Some(data) = l.strip_prefix("data: ") {
            shown.push((is_head, data));
            is_head = false;
        }
    }
    let shown_events: Vec<&str> = shown.iter().filter(|(h, _)| !h).map(|(_, d)| *d).collect();
    assert!(
        !shown_events.is_empty(),
        "{where_}: the example shows at least one event"
    );
    for (_, data) in shown.iter().filter(|(h, _)| *h) {
        let value: Value = serde_json::from_str(data).expect("shown head");
        check(&head, &value, &format!("{where_}: the head shown"));
    }
    let heads_shown = shown.len() - shown_events.len();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let resp = agent.get(url).call().expect("the server answers");
    assert_eq!(resp.status().as_u16(), 200, "{where_}");
    let mut reader = BufReader::new(resp.into_body().into_reader());
    let (mut got, mut heads) = (0, 0);
    let mut kind = String::new();
    while got < shown_events.len() || heads < heads_shown {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).expect("reads") > 0,
            "{where_}: the stream ended"
        );
        let line = line.trim_end();
        if let Some(k) = line.strip_prefix("event: ") {
            k.clone_into(&mut kind);
        } else if let Some(data) = line.strip_prefix("data: ") {
            let real: Value = serde_json::from_str(data).expect("JSON data");
            if kind == "head" {
                check(&head, &real, &format!("{where_}: a streamed head"));
                heads += 1;
            } else {
                let expected: Value = serde_json::from_str(shown_events[got]).expect("shown event");
                check(&event, &real, &format!("{where_}: a streamed event"));
                check(&event, &expected, &format!("{where_}: the event shown"));
                assert_eq!(real["seq"], expected["seq"], "{where_}");
                assert_eq!(real["kind"]["type"], expected["kind"]["type"], "{where_}");
                got += 1;
            }
            kind.clear();
        }
    }
}

/// Prints the example requests' bodies (run with `--ignored --nocapture` after changing the
/// examples, and paste).
#[test]
#[ignore]
fn print_example_commands() {
    let key = SecretKey::from_bytes(&[7u8; 32]);
    let authority = key.public();
    let open = open_group("g1", authority, &["w0".into()]);
    let create = cmd("g1", "alice", "c1", None, create_work("w1", &[]));
    let stale = cmd(
        "g1",
        "w0",
        "claim1",
        Some(7),
        Body::ClaimWork(mwp_core::command::ClaimWork {
            work: id("w1"),
            lease_ms: 30000,
            start_within_ms: 5000,
        }),
    );
    for c in [open, create, stale] {
        println!("{}", serde_json::to_string(&c).expect("encodes"));
    }
}
