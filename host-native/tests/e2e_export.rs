//! End-to-end tests of static exports through the `mwp` binary: `mwp export` from a store,
//! `mwp verify --source` on the export (and on damaged or hostile copies of it),
//! `mwp verify-proof`, and `mwp replica --authority-key` with signed heads; and `mwp verify
//! --data` on a store whose snapshot or log is damaged.

mod e2e_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use e2e_support::spawn_serve;
use mwp_core::export::{self, HeadFile, HEAD_FILE};
use mwp_core::head::{ForkProof, SignedHead};
use mwp_core::{Hash, Id, SecretKey};
use serde_json::Value;

fn mwp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mwp"))
}

fn transcript_lines() -> Vec<String> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/transcripts/lifecycle.jsonl");
    std::fs::read_to_string(path)
        .expect("read")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// The transcript authority key (SPEC §12): what `mwp transcript --data` signs with.
fn authority() -> SecretKey {
    SecretKey::for_transcript("@authority")
}

fn hex_key(k: &SecretKey) -> String {
    k.public().to_hex()
}

/// A data directory made by `mwp transcript --data` from the first `n` lifecycle lines.
fn store(dir: &Path, name: &str, n: usize) -> PathBuf {
    let lines = transcript_lines();
    let file = dir.join(format!("{name}.jsonl"));
    std::fs::write(&file, lines[..n].join("\n")).expect("write");
    transcript_into(&file, dir.join(name))
}

/// Runs `mwp transcript FILE --data DATA`, which must pass; answers DATA.
fn transcript_into(file: &Path, data: PathBuf) -> PathBuf {
    let out = mwp()
        .arg("transcript")
        .arg(file)
        .arg("--data")
        .arg(&data)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    data
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_line(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_else(|| {
        panic!("no output; stderr: {}", stderr(out));
    });
    serde_json::from_str(line).expect("one JSON line")
}

fn export(data: &Path, out: &Path) -> Output {
    mwp()
        .args(["export", "--group", "g1", "--data"])
        .arg(data)
        .arg("--out")
        .arg(out)
        .output()
        .expect("runs")
}

fn verify(source: &Path, extra: &[&str]) -> Output {
    mwp()
        .args(["verify", "--group", "g1", "--source"])
        .arg(source)
        .args(extra)
        .output()
        .expect("runs")
}

/// Every file of an export and its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for sub in ["chunks", "snapshots", "index"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for e in entries {
            let e = e.expect("entry");
            let name = format!("{sub}/{}", e.file_name().to_string_lossy());
            out.insert(name, std::fs::read(e.path()).expect("read"));
        }
    }
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("list") {
        let e = e.expect("entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

fn head_file(dir: &Path) -> HeadFile {
    export::read_head_file(&std::fs::read(dir.join(HEAD_FILE)).expect("read")).expect("head")
}

/// Writes `index` into `dir` under its content address and a `head.json` naming it with
/// `head`; answers the index's path.
fn put_index(dir: &Path, index_bytes: &[u8], head: SignedHead) -> String {
    let path = format!("index/{}.json", Hash::of(index_bytes).to_hex());
    std::fs::write(dir.join(&path), index_bytes).expect("write index");
    let hf = HeadFile {
        head,
        index: path.clone(),
    };
    std::fs::write(
        dir.join(HEAD_FILE),
        serde_json::to_vec_pretty(&hf).expect("encode"),
    )
    .expect("write head");
    path
}

#[test]
fn export_verifies_grows_by_new_chunks_only_and_refuses_damage() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let all = transcript_lines().len();
    let early = store(tmp.path(), "early", all / 2);
    let late = store(tmp.path(), "late", all);
    let out = tmp.path().join("site");
    let key = hex_key(&authority());

    // First export: the store is read-only to it (no writer lock is taken, nothing changes).
    let first = export(&early, &out);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let report = json_line(&first);
    assert_eq!(report["group"], "g1");
    assert_eq!(report["authority_key"], key.as_str());
    assert!(report["chunks_added"].as_u64().expect("n") >= 1);
    let early_seq = report["seq"].as_u64().expect("seq");
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&out), 0o755, "export directories are public");
    assert_eq!(mode(&out.join("chunks")), 0o755);
    assert_eq!(mode(&out.join(HEAD_FILE)), 0o644, "export files are public");
    let before = files(&out);
    assert!(before.keys().all(|k| mode(&out.join(k)) == 0o644));

    let ok = verify(&out, &["--authority-key", &key]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let v = json_line(&ok);
    assert_eq!(v["ok"], true);
    assert_eq!(v["seq"], early_seq);
    assert_eq!(v["verified_through"], early_seq);
    assert_eq!(v["events"], early_seq);
    assert_eq!(v["key_source"], "pinned");

    // Without a pinned key the export's own is used, and said so.
    let unpinned = verify(&out, &["--from", "snapshot"]);
    assert_eq!(unpinned.status.code(), Some(0), "{}", stderr(&unpinned));
    assert_eq!(json_line(&unpinned)["key_source"], "export");
    assert!(stderr(&unpinned).contains("no --authority-key"));

    // Re-export from a store that went further: only new files; every old one unchanged.
    let second = export(&late, &out);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    let report = json_line(&second);
    let late_seq = report["seq"].as_u64().expect("seq");
    assert!(late_seq > early_seq);
    assert!(report["chunks_added"].as_u64().expect("n") >= 1);
    let after = files(&out);
    for (name, bytes) in &before {
        assert_eq!(after.get(name), Some(bytes), "{name} was rewritten");
    }
    assert!(after.len() > before.len());
    let ok = verify(&out, &["--authority-key", &key]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert_eq!(json_line(&ok)["verified_through"], late_seq);

    // Nothing new: no chunk, only head.json.
    let again = json_line(&export(&late, &out));
    assert_eq!(again["chunks_added"], 0);
    assert_eq!(again["files_written"], 1);
    assert_eq!(files(&out), after);

    // Another authority's key pinned: refused.
    let other = hex_key(&SecretKey::for_transcript("mallory"));
    let wrong = verify(&out, &["--authority-key", &other]);
    assert_eq!(wrong.status.code(), Some(1));
    let v = json_line(&wrong);
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["code"], "HEAD_INVALID");

    // One flipped byte in a chunk: refused, naming the chunk.
    let flipped = tmp.path().join("flipped");
    copy_dir(&out, &flipped);
    let chunk = after
        .keys()
        .find(|k| k.starts_with("chunks/"))
        .expect("a chunk")
        .clone();
    let mut bytes = std::fs::read(flipped.join(&chunk)).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(flipped.join(&chunk), bytes).expect("write");
    let bad = verify(&flipped, &["--authority-key", &key]);
    assert_eq!(bad.status.code(), Some(1));
    let v = json_line(&bad);
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["file"], chunk.as_str());

    // head.json signed by another key: HEAD_INVALID, pinned or not.
    let forged = tmp.path().join("forged");
    copy_dir(&out, &forged);
    let hf = head_file(&forged);
    let mallory = SecretKey::for_transcript("mallory");
    let h = &hf.head;
    let resigned = SignedHead::sign(&h.org, &h.group, h.seq, h.id, h.at, &mallory).expect("sign");
    let index_bytes = std::fs::read(forged.join(&hf.index)).expect("index");
    put_index(&forged, &index_bytes, resigned);
    for extra in [&["--authority-key", key.as_str()][..], &[][..]] {
        let bad = verify(&forged, extra);
        assert_eq!(bad.status.code(), Some(1), "{extra:?}");
        assert_eq!(json_line(&bad)["error"]["code"], "HEAD_INVALID");
    }

    // An index that names a file outside the export: refused before anything is read.
    let hostile = tmp.path().join("hostile");
    copy_dir(&out, &hostile);
    std::fs::write(tmp.path().join("x"), b"outside").expect("write");
    let hf = head_file(&hostile);
    let mut index: Value =
        serde_json::from_slice(&std::fs::read(hostile.join(&hf.index)).expect("read"))
            .expect("json");
    index["chunks"][0]["file"] = Value::from("../x");
    put_index(
        &hostile,
        &serde_json::to_vec_pretty(&index).expect("encode"),
        hf.head.clone(),
    );
    let bad = verify(&hostile, &["--authority-key", &key]);
    assert_eq!(bad.status.code(), Some(1));
    let v = json_line(&bad);
    assert_eq!(v["error"]["code"], "MALFORMED");
    assert!(v["error"]["message"]
        .as_str()
        .expect("message")
        .contains("../x"));
    // head.json naming an index outside the export: refused too.
    let mut text: Value =
        serde_json::from_slice(&std::fs::read(hostile.join(HEAD_FILE)).expect("read"))
            .expect("json");
    text["index"] = Value::from("../../x");
    std::fs::write(hostile.join(HEAD_FILE), text.to_string()).expect("write");
    let bad = verify(&hostile, &["--authority-key", &key]);
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(json_line(&bad)["error"]["code"], "MALFORMED");
}

#[test]
fn a_head_that_contradicts_the_chain_is_a_fork() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = store(tmp.path(), "d", transcript_lines().len());
    let out = tmp.path().join("site");
    assert_eq!(export(&data, &out).status.code(), Some(0));
    let hf = head_file(&out);
    let h = &hf.head;
    // The authority's own key vouches for another id at the head's seq.
    let lie = SignedHead::sign(
        &h.org,
        &h.group,
        h.seq,
        Hash::of(b"other"),
        h.at,
        &authority(),
    )
    .expect("sign");
    let index_bytes = std::fs::read(out.join(&hf.index)).expect("index");
    put_index(&out, &index_bytes, lie);
    let key = hex_key(&authority());
    let proof_out = tmp.path().join("fork.proof");
    let bad = verify(
        &out,
        &[
            "--authority-key",
            &key,
            "--proof-out",
            proof_out.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(bad.status.code(), Some(1));
    let v = json_line(&bad);
    assert_eq!(v["error"]["code"], "FORK");
    // One head and unsigned events prove nothing to a third party: no proof is written.
    assert!(v.get("proof").is_none());
    assert!(!proof_out.exists());
}

#[test]
fn export_refuses_a_planned_file_that_holds_other_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = store(tmp.path(), "d", 12);
    let out = tmp.path().join("site");
    assert_eq!(export(&data, &out).status.code(), Some(0));
    let chunk = files(&out)
        .into_keys()
        .find(|k| k.starts_with("chunks/"))
        .expect("chunk");
    // Start over from nothing, with a damaged file already at the chunk's name.
    std::fs::remove_file(out.join(HEAD_FILE)).expect("rm");
    std::fs::write(out.join(&chunk), b"not the chunk").expect("write");
    let bad = export(&data, &out);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("other bytes"), "{}", stderr(&bad));
    assert_eq!(
        std::fs::read(out.join(&chunk)).expect("read"),
        b"not the chunk",
        "an existing file is never rewritten"
    );
    assert!(!out.join(HEAD_FILE).exists(), "no head for a failed export");

    // A damaged head.json is not continued either.
    std::fs::write(out.join(HEAD_FILE), b"{}").expect("write");
    let bad = export(&data, &out);
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(std::fs::read(out.join(HEAD_FILE)).expect("read"), b"{}");
}

/// An export that fails after it wrote chunks (here: another file is already at the name its
/// index would take) removes what it created: the directory holds what it held before.
#[test]
fn a_failed_export_removes_the_chunks_it_wrote() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = store(tmp.path(), "d", 12);
    let good = tmp.path().join("good");
    assert_eq!(export(&data, &good).status.code(), Some(0));
    let index = head_file(&good).index;
    assert!(files(&good).keys().any(|k| k.starts_with("chunks/")));
    let out = tmp.path().join("site");
    std::fs::create_dir_all(out.join("index")).expect("mkdir");
    std::fs::write(out.join(&index), b"not the index").expect("write");
    let before = files(&out);
    let bad = export(&data, &out);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("other bytes"), "{}", stderr(&bad));
    assert_eq!(files(&out), before, "nothing the failed run wrote is left");
    assert!(!out.join("chunks").exists(), "nor the directory it created");
    // With the obstacle gone, the same export succeeds and gives the same files.
    std::fs::remove_dir_all(&out).expect("rm");
    assert_eq!(export(&data, &out).status.code(), Some(0));
    assert_eq!(files(&out), files(&good));
}

fn two_heads() -> (SignedHead, SignedHead) {
    let org = Id::new("acme").expect("id");
    let group = Id::new("g1").expect("id");
    let a = SignedHead::sign(&org, &group, 5, Hash::of(b"a"), 1000, &authority()).expect("a");
    let b = SignedHead::sign(&org, &group, 5, Hash::of(b"b"), 2000, &authority()).expect("b");
    (a, b)
}

fn verify_proof(file: &Path, extra: &[&str]) -> Output {
    mwp()
        .arg("verify-proof")
        .arg(file)
        .args(extra)
        .output()
        .expect("runs")
}

#[test]
fn verify_proof_accepts_two_conflicting_heads_and_refuses_a_tampered_proof() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (a, b) = two_heads();
    let proof = ForkProof::of_heads(authority().public(), a, b);
    let bytes = proof.to_cbor().expect("cbor");
    let file = tmp.path().join("fork.proof");
    std::fs::write(&file, &bytes).expect("write");
    let key = hex_key(&authority());

    let ok = verify_proof(&file, &["--authority-key", &key]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let v = json_line(&ok);
    assert_eq!(v["ok"], true);
    assert_eq!(v["fork"]["seq"], 5);
    assert_eq!(v["fork"]["kind"], "heads");
    assert_eq!(v["fork"]["group"], "g1");
    assert_eq!(v["authority_key"], key.as_str());

    // Pinned to another key: not a proof about it.
    let other = hex_key(&SecretKey::for_transcript("mallory"));
    assert_eq!(
        verify_proof(&file, &["--authority-key", &other])
            .status
            .code(),
        Some(1)
    );

    // The second head's time changed after signing: its signature no longer covers it.
    let mut altered = proof.clone();
    altered.heads[1].at += 1;
    let tampered = altered.to_cbor().expect("cbor");
    let bad_file = tmp.path().join("tampered.proof");
    std::fs::write(&bad_file, tampered).expect("write");
    let bad = verify_proof(&bad_file, &[]);
    assert_eq!(bad.status.code(), Some(1));
    let v = json_line(&bad);
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["code"], "MALFORMED");

    // Not CBOR at all: exit 1 (it proves nothing); a missing file: exit 2.
    let junk = tmp.path().join("junk.proof");
    std::fs::write(&junk, b"junk").expect("write");
    assert_eq!(verify_proof(&junk, &[]).status.code(), Some(1));
    assert_eq!(
        verify_proof(&tmp.path().join("missing"), &[]).status.code(),
        Some(2)
    );
}

#[test]
fn replica_checks_signed_head_lines_under_the_given_key() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let text = transcript_lines().join("\n");
    let (lines, _) = mwp_core::transcript::run_in_memory(&text);
    let events: Vec<Value> = lines
        .iter()
        .filter_map(|l| l.get("event"))
        .cloned()
        .collect();
    let at = |i: usize| {
        let e = &events[i];
        (
            e["seq"].as_u64().expect("seq"),
            Hash::from_hex(e["id"].as_str().expect("id")).expect("hex"),
        )
    };
    let org = Id::new("acme").expect("id");
    let group = Id::new("g1").expect("id");
    let head = |(seq, id): (u64, Hash)| {
        serde_json::to_string(
            &SignedHead::sign(&org, &group, seq, id, 1, &authority()).expect("sign"),
        )
        .expect("json")
    };
    let mut input: Vec<String> = events[..3].iter().map(Value::to_string).collect();
    input.push(head(at(2))); // verified: matches seq 3
    input.push(head(at(5))); // ahead: seq 6 is not applied yet
    input.extend(events[3..6].iter().map(Value::to_string));
    let file = tmp.path().join("in.jsonl");
    std::fs::write(&file, input.join("\n")).expect("write");
    let key = hex_key(&authority());
    let run = mwp()
        .arg("replica")
        .arg(&file)
        .args(["--authority-key", &key])
        .output()
        .expect("runs");
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let out: Vec<Value> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(out[3]["result"], "verified");
    assert_eq!(out[3]["head"], 3);
    assert_eq!(out[3]["verified_through"], 3);
    assert_eq!(out[4]["result"], "ahead");
    assert_eq!(out[4]["verified_through"], 3);
    let last = out.last().expect("summary");
    assert_eq!(last["cursor"], 6);
    assert_eq!(
        last["verified_through"], 6,
        "the pending head verifies when reached"
    );

    // Without the key a head line is an error line, and the summary says how far verified.
    let run = mwp().arg("replica").arg(&file).output().expect("runs");
    let out: Vec<Value> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(out[3]["result"], "rejected");
    assert_eq!(out[3]["error"]["code"], "HEAD_INVALID");
    assert_eq!(out.last().expect("summary")["verified_through"], 0);

    // Another key: rejected.
    let other = hex_key(&SecretKey::for_transcript("mallory"));
    let run = mwp()
        .arg("replica")
        .arg(&file)
        .args(["--authority-key", &other])
        .output()
        .expect("runs");
    let out: Vec<Value> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(out[3]["result"], "rejected");
}

/// `mwp export --server`: the signed head from `GET /v1/groups/{g}/head`, the events up to
/// it.
#[test]
fn export_from_a_server_verifies_like_one_from_the_store() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = store(tmp.path(), "d", transcript_lines().len());
    let (mut child, base) = spawn_serve(
        mwp()
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--allow-test-key",
                "--data",
            ])
            .arg(&data),
    );
    let out = tmp.path().join("site");
    let run = mwp()
        .args(["export", "--group", "g1", "--server", &base, "--out"])
        .arg(&out)
        .output()
        .expect("runs");
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let _ = child.wait();
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let ok = verify(&out, &["--authority-key", &hex_key(&authority())]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert_eq!(json_line(&ok)["ok"], true);
}

/// A static file server over `dir` (GET only, 404 for anything missing or not plain
/// names), recording every path asked for. Returns its base URL.
fn static_host(dir: PathBuf, asked: std::sync::Arc<std::sync::Mutex<Vec<String>>>) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let base = format!("http://{}/site", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|r| r == 1) {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let target = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
            asked.lock().expect("lock").push(target.clone());
            let body = target
                .strip_prefix("/site/")
                .filter(|p| !p.split('/').any(|c| c == ".." || c.is_empty()))
                .and_then(|p| std::fs::read(dir.join(p)).ok());
            let (status, body) = match body {
                Some(b) => ("200 OK", b),
                None => ("404 Not Found", b"not found".to_vec()),
            };
            let mut out = format!(
                "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            )
            .into_bytes();
            out.extend_from_slice(&body);
            let _ = conn.write_all(&out);
        }
    });
    base
}

#[test]
fn an_export_served_over_http_verifies_and_a_missing_file_is_named() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = store(tmp.path(), "d", transcript_lines().len());
    let out = tmp.path().join("site");
    assert_eq!(export(&data, &out).status.code(), Some(0));
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let base = static_host(out.clone(), asked.clone());
    let key = hex_key(&authority());
    let run = mwp()
        .args([
            "verify",
            "--group",
            "g1",
            "--source",
            &base,
            "--authority-key",
            &key,
        ])
        .output()
        .expect("runs");
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    assert_eq!(json_line(&run)["ok"], true);
    let paths = asked.lock().expect("lock").clone();
    assert_eq!(paths[0], "/site/head.json");
    assert!(paths[1].starts_with("/site/index/"));
    assert!(paths.iter().all(|p| p.starts_with("/site/")), "{paths:?}");

    // A chunk the host lost: exit 1, naming it.
    let chunk = files(&out)
        .into_keys()
        .find(|k| k.starts_with("chunks/"))
        .expect("chunk");
    std::fs::remove_file(out.join(&chunk)).expect("rm");
    let run = mwp()
        .args([
            "verify",
            "--group",
            "g1",
            "--source",
            &base,
            "--authority-key",
            &key,
        ])
        .output()
        .expect("runs");
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(json_line(&run)["error"]["file"], chunk.as_str());
}

#[test]
fn a_directory_export_does_not_follow_a_link_out_of_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = store(tmp.path(), "d", 12);
    let out = tmp.path().join("site");
    assert_eq!(export(&data, &out).status.code(), Some(0));
    let chunk = files(&out)
        .into_keys()
        .find(|k| k.starts_with("chunks/"))
        .expect("chunk");
    // The same bytes, but outside the export, reached through a link.
    let outside = tmp.path().join("outside.cbor");
    std::fs::rename(out.join(&chunk), &outside).expect("move");
    std::os::unix::fs::symlink(&outside, out.join(&chunk)).expect("link");
    let bad = verify(&out, &["--authority-key", &hex_key(&authority())]);
    assert_eq!(bad.status.code(), Some(1));
    let v = json_line(&bad);
    assert_eq!(v["error"]["code"], "MALFORMED");
    assert_eq!(v["error"]["file"], chunk.as_str());
}

#[test]
fn a_file_over_its_size_cap_is_refused_without_being_read_whole() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = store(tmp.path(), "d", 12);
    let out = tmp.path().join("site");
    assert_eq!(export(&data, &out).status.code(), Some(0));
    // A head.json padded past 64 KiB (still valid JSON): refused by its size alone.
    let mut bytes = std::fs::read(out.join("head.json")).expect("read");
    bytes.extend(std::iter::repeat_n(b' ', 70 << 10));
    std::fs::write(out.join("head.json"), bytes).expect("write");
    let bad = verify(&out, &["--authority-key", &hex_key(&authority())]);
    assert_eq!(bad.status.code(), Some(1));
    let v = json_line(&bad);
    assert_eq!(v["error"]["code"], "MALFORMED");
    assert_eq!(v["error"]["file"], "head.json");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("over the 65536")),
        "{v}"
    );
}

/// Runs `cmd` and waits at most 30 s for it: a command that blocks (on a FIFO) fails the test
/// instead of hanging it.
fn run_bounded(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawns");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{cmd:?} still runs after 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
}

/// A change to an export's index (as JSON).
type IndexEdit = fn(&mut Value);

/// The export's index rewritten by `edit` (as JSON), under its new content address, named by
/// a `head.json` with the same signed head.
fn edit_index(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let hf = head_file(dir);
    let mut index: Value =
        serde_json::from_slice(&std::fs::read(dir.join(&hf.index)).expect("read")).expect("json");
    edit(&mut index);
    put_index(
        dir,
        &serde_json::to_vec_pretty(&index).expect("encode"),
        hf.head,
    );
}

/// An export's snapshot file (the export of a file store without one on disk carries the
/// one the read-only store signs at the head).
fn snapshot_file(dir: &Path) -> String {
    files(dir)
        .into_keys()
        .find(|k| k.starts_with("snapshots/"))
        .expect("the export has a snapshot")
}

#[test]
fn verify_source_checks_every_snapshot_from_genesis_too() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = store(tmp.path(), "d", transcript_lines().len());
    let out = tmp.path().join("site");
    assert_eq!(export(&data, &out).status.code(), Some(0));
    let snap = snapshot_file(&out);
    let key = hex_key(&authority());

    let flipped = tmp.path().join("flipped");
    copy_dir(&out, &flipped);
    let mut bytes = std::fs::read(flipped.join(&snap)).expect("read");
    bytes[100] ^= 0xff;
    std::fs::write(flipped.join(&snap), bytes).expect("write");
    let missing = tmp.path().join("missing");
    copy_dir(&out, &missing);
    std::fs::remove_file(missing.join(&snap)).expect("rm");
    for (dir, code) in [(&flipped, "LOG_CORRUPT"), (&missing, "NOT_FOUND")] {
        for from in ["genesis", "snapshot"] {
            let bad = verify(dir, &["--authority-key", &key, "--from", from]);
            assert_eq!(bad.status.code(), Some(1), "{from}: {}", stderr(&bad));
            let v = json_line(&bad);
            assert_eq!(
                (v["ok"].clone(), v["group"].clone()),
                (false.into(), "g1".into())
            );
            assert_eq!(v["error"]["code"], code, "{from}: {v}");
            assert_eq!(v["error"]["file"], snap.as_str(), "{from}: {v}");
        }
    }
}

#[test]
fn verify_source_checks_the_index_fields_against_the_files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = store(tmp.path(), "d", transcript_lines().len());
    let out = tmp.path().join("site");
    assert_eq!(export(&data, &out).status.code(), Some(0));
    let key = hex_key(&authority());
    let ok = verify(&out, &["--authority-key", &key]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let v = json_line(&ok);
    assert_eq!(
        v["authority_key"],
        key.as_str(),
        "documented in docs/cli.md"
    );

    // The export's one snapshot is at its head: from it, no chunk is read, so a chunk's entry
    // is checked from genesis only.
    let both = &["genesis", "snapshot"][..];
    let edits: [(&str, IndexEdit, &[&str]); 4] = [
        (
            "snapshot seq",
            |x| x["snapshots"][0]["seq"] = 13.into(),
            both,
        ),
        (
            "snapshot state hash",
            |x| x["snapshots"][0]["state_hash"] = "00".repeat(32).into(),
            both,
        ),
        (
            "chunk bytes",
            |x| x["chunks"][0]["bytes"] = 5.into(),
            &["genesis"],
        ),
        (
            "duplicated snapshot",
            |x| {
                let s = x["snapshots"][0].clone();
                x["snapshots"].as_array_mut().expect("array").push(s);
            },
            both,
        ),
    ];
    for (what, edit, froms) in edits {
        let dir = tmp.path().join(what.replace(' ', "-"));
        copy_dir(&out, &dir);
        edit_index(&dir, edit);
        let index = head_file(&dir).index;
        for &from in froms {
            let bad = verify(&dir, &["--authority-key", &key, "--from", from]);
            assert_eq!(
                bad.status.code(),
                Some(1),
                "{what} ({from}): {}",
                stderr(&bad)
            );
            let v = json_line(&bad);
            assert_eq!(v["error"]["code"], "LOG_CORRUPT", "{what} ({from}): {v}");
            assert_eq!(v["error"]["file"], index.as_str(), "{what} ({from}): {v}");
        }
    }
}

#[test]
fn export_does_not_continue_an_export_whose_index_disagrees_with_its_files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let all = transcript_lines().len();
    let early = store(tmp.path(), "early", all / 2);
    let late = store(tmp.path(), "late", all);
    let out = tmp.path().join("site");
    assert_eq!(export(&early, &out).status.code(), Some(0));
    let edits: [(&str, IndexEdit); 3] = [
        ("snapshot seq", |x| x["snapshots"][0]["seq"] = 2.into()),
        ("snapshot state hash", |x| {
            x["snapshots"][0]["state_hash"] = "00".repeat(32).into();
        }),
        ("chunk bytes", |x| x["chunks"][0]["bytes"] = 5.into()),
    ];
    for (what, edit) in edits {
        let dir = tmp.path().join(what.replace(' ', "-"));
        copy_dir(&out, &dir);
        edit_index(&dir, edit);
        let (before, head_before) = (
            files(&dir),
            std::fs::read(dir.join(HEAD_FILE)).expect("read"),
        );
        let bad = export(&late, &dir);
        assert_eq!(bad.status.code(), Some(1), "{what}: {}", stderr(&bad));
        assert!(stderr(&bad).contains("damaged"), "{what}: {}", stderr(&bad));
        assert_eq!(files(&dir), before, "{what}: nothing written");
        assert_eq!(
            std::fs::read(dir.join(HEAD_FILE)).expect("read"),
            head_before,
            "{what}: head.json unchanged"
        );
    }
    // A snapshot file that is not the one listed (another whole, signed snapshot put at its
    // name is caught by its content address).
    let dir = tmp.path().join("snapshot-swapped");
    copy_dir(&out, &dir);
    let snap = snapshot_file(&dir);
    std::fs::write(dir.join(&snap), b"other bytes").expect("write");
    let before = files(&dir);
    let bad = export(&late, &dir);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    assert_eq!(files(&dir), before);
    // The undamaged export continues.
    assert_eq!(export(&late, &out).status.code(), Some(0));
}

#[test]
fn a_fifo_in_an_export_is_refused_without_blocking() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = store(tmp.path(), "d", 12);
    let out = tmp.path().join("site");
    assert_eq!(export(&data, &out).status.code(), Some(0));
    let key = hex_key(&authority());
    let chunk = files(&out)
        .into_keys()
        .find(|k| k.starts_with("chunks/"))
        .expect("chunk");
    for name in [HEAD_FILE, head_file(&out).index.as_str(), chunk.as_str()] {
        let dir = tmp.path().join(format!("fifo-{}", name.replace('/', "-")));
        copy_dir(&out, &dir);
        mkfifo(&dir.join(name));
        let bad = run_bounded(
            mwp()
                .args([
                    "verify",
                    "--group",
                    "g1",
                    "--authority-key",
                    &key,
                    "--source",
                ])
                .arg(&dir),
        );
        assert_eq!(bad.status.code(), Some(1), "{name}: {}", stderr(&bad));
        let v = json_line(&bad);
        assert_eq!(v["error"]["code"], "MALFORMED", "{name}: {v}");
        assert_eq!(v["error"]["file"], name, "{name}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("FIFO")),
            "{name}: {v}"
        );
        // mwp export onto it: a damaged export, refused at once.
        let bad = run_bounded(
            mwp()
                .args(["export", "--group", "g1", "--data"])
                .arg(&data)
                .arg("--out")
                .arg(&dir),
        );
        assert_eq!(bad.status.code(), Some(1), "{name}: {}", stderr(&bad));
        assert!(stderr(&bad).contains("FIFO"), "{name}: {}", stderr(&bad));
    }
}

#[test]
fn verify_source_of_a_directory_that_is_not_there_is_bad_input() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bad = verify(&tmp.path().join("nope"), &[]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("nope"), "{}", stderr(&bad));
}

/// A data directory made by `mwp transcript --data` from a shared transcript.
fn store_of(dir: &Path, transcript: &str) -> PathBuf {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../tests/transcripts/{transcript}.jsonl"));
    transcript_into(&file, dir.join(transcript))
}

fn verify_data(data: &Path) -> Output {
    mwp()
        .args(["verify", "--group", "g1", "--json", "--data"])
        .arg(data)
        .output()
        .expect("runs")
}

/// The group's files in a data directory with extension `ext`.
fn group_files(data: &Path, ext: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for g in std::fs::read_dir(data.join("groups")).expect("groups") {
        for f in std::fs::read_dir(g.expect("entry").path()).expect("group") {
            let p = f.expect("entry").path();
            if p.extension().is_some_and(|e| e == ext) {
                found.push(p);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn verify_data_checks_the_snapshot_file_the_store_holds() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // redaction_archive leaves a snapshot file on disk (its archive's final snapshot).
    let data = store_of(tmp.path(), "redaction_archive");
    let snaps = group_files(&data, "snap");
    let snap = snaps.last().expect("a snapshot file");
    let good = verify_data(&data);
    assert_eq!(good.status.code(), Some(0), "{}", stderr(&good));
    let v = json_line(&good);
    assert_eq!(v["ok"], true);
    let seq = v["snapshot_seq"].as_u64().expect("a snapshot was checked");
    assert!(snap.ends_with(format!("{seq:020}.snap")), "{v}");
    assert!(v["snapshot_state_hash"].is_string(), "{v}");
    assert_eq!(v["group"], "g1");

    // One flipped byte in the file: a check that failed, naming the file.
    let mut bytes = std::fs::read(snap).expect("read");
    bytes[200] ^= 0xff;
    std::fs::write(snap, bytes).expect("write");
    let bad = verify_data(&data);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    let v = json_line(&bad);
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["group"], "g1");
    assert!(v.as_object().expect("object").contains_key("seq"), "{v}");
    let message = v["error"].as_str().expect("error");
    assert!(message.contains(&format!("{seq:020}.snap")), "{v}");

    // A store that holds no snapshot says so; nothing is signed in its place.
    let plain = store(tmp.path(), "plain", transcript_lines().len());
    assert!(
        group_files(&plain, "snap").is_empty(),
        "no snapshot on disk"
    );
    let none = verify_data(&plain);
    assert_eq!(none.status.code(), Some(0), "{}", stderr(&none));
    let v = json_line(&none);
    assert_eq!(v["ok"], true);
    assert_eq!(v["snapshot_seq"], Value::Null, "{v}");
    assert_eq!(v["snapshot_state_hash"], Value::Null, "{v}");
    assert!(
        group_files(&plain, "snap").is_empty(),
        "verify writes nothing"
    );
}

#[test]
fn verify_data_reports_a_damaged_log_as_a_failed_check() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = store(tmp.path(), "d", transcript_lines().len());
    let seg = group_files(&data, "seg");
    let seg = seg.first().expect("a segment");
    // A byte in the middle of the first records (past the file header).
    let mut bytes = std::fs::read(seg).expect("read");
    bytes[300] ^= 0x01;
    std::fs::write(seg, bytes).expect("write");
    let bad = verify_data(&data);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    let v = json_line(&bad);
    assert_eq!(v["ok"], false, "{v}");
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|m| m.contains("LOG_CORRUPT")),
        "{v}"
    );
}

/// `mwp` run under a 2 GiB address-space limit (`ulimit -v`), waited on at most 30 s: a
/// command that reads a file whole, or blocks, fails the test instead of the machine.
fn run_in_2_gib(args: &[&std::ffi::OsStr]) -> Output {
    run_bounded(
        Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 2097152; exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_mwp"))
            .args(args),
    )
}

#[test]
fn export_refuses_an_out_that_is_no_directory_or_leads_out_of_itself() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = store(tmp.path(), "d", 12);
    // --out that is no directory: bad input, named with what it is, left as it was.
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"mine").expect("write");
    let fifo = tmp.path().join("a-fifo");
    mkfifo(&fifo);
    let dangling = tmp.path().join("a-link");
    std::os::unix::fs::symlink(tmp.path().join("nowhere/at-all"), &dangling).expect("link");
    for (out, what) in [
        (&file, "a regular file"),
        (&fifo, "a FIFO"),
        (&dangling, "which does not exist"),
    ] {
        let bad = run_bounded(
            mwp()
                .args(["export", "--group", "g1", "--data"])
                .arg(&data)
                .arg("--out")
                .arg(out),
        );
        assert_eq!(bad.status.code(), Some(2), "{what}: {}", stderr(&bad));
        assert!(
            stderr(&bad).contains(what) && stderr(&bad).contains(&*out.to_string_lossy()),
            "{what}: {}",
            stderr(&bad)
        );
    }
    assert_eq!(std::fs::read(&file).expect("read"), b"mine");
    assert!(!tmp.path().join("nowhere").exists());

    // A directory of the export that a link takes elsewhere: nothing is written there.
    let reference = tmp.path().join("reference");
    assert_eq!(export(&data, &reference).status.code(), Some(0));
    let chunk = files(&reference)
        .into_keys()
        .find(|k| k.starts_with("chunks/"))
        .expect("chunk");
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    let linked = tmp.path().join("linked");
    std::fs::create_dir(&linked).expect("mkdir");
    std::os::unix::fs::symlink(&elsewhere, linked.join("chunks")).expect("link");
    let bad = export(&data, &linked);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("out of the export"),
        "{}",
        stderr(&bad)
    );
    assert_eq!(
        std::fs::read_dir(&elsewhere).expect("list").count(),
        0,
        "nothing outside --out"
    );
    assert!(!linked.join(HEAD_FILE).exists());
    // A planned chunk's name held by a link to nothing: the export is not presented as whole
    // (it was, with the chunk missing).
    let hollow = tmp.path().join("hollow");
    std::fs::create_dir_all(hollow.join("chunks")).expect("mkdir");
    std::os::unix::fs::symlink(tmp.path().join("gone.cbor"), hollow.join(&chunk)).expect("link");
    let bad = export(&data, &hollow);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("does not exist"), "{}", stderr(&bad));
    assert!(!hollow.join(HEAD_FILE).exists(), "no head.json names it");
}

#[test]
fn a_sparse_snapshot_file_in_an_export_is_refused_unread() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let all = transcript_lines().len();
    let early = store(tmp.path(), "early", all / 2);
    let late = store(tmp.path(), "late", all);
    let out = tmp.path().join("site");
    assert_eq!(export(&early, &out).status.code(), Some(0));
    let snap = snapshot_file(&out);
    // 50 GiB of nothing: over the 4 GiB a snapshot may hold, and more than the 2 GiB the
    // commands below may map.
    std::fs::File::options()
        .write(true)
        .open(out.join(&snap))
        .and_then(|f| f.set_len(50 << 30))
        .expect("sparse");
    let os = std::ffi::OsStr::new;
    let bad = run_in_2_gib(&[
        os("verify"),
        os("--group"),
        os("g1"),
        os("--source"),
        out.as_os_str(),
    ]);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    let v = json_line(&bad);
    assert_eq!(v["error"]["code"], "MALFORMED", "{v}");
    assert_eq!(v["error"]["file"], snap.as_str(), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("over the 4294967296 bytes")),
        "{v}"
    );
    let head_before = std::fs::read(out.join(HEAD_FILE)).expect("read");
    let bad = run_in_2_gib(&[
        os("export"),
        os("--group"),
        os("g1"),
        os("--data"),
        late.as_os_str(),
        os("--out"),
        out.as_os_str(),
    ]);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("damaged") && stderr(&bad).contains("53687091200 bytes"),
        "{}",
        stderr(&bad)
    );
    assert_eq!(
        std::fs::read(out.join(HEAD_FILE)).expect("read"),
        head_before
    );
}
