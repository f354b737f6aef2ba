//! End-to-end tests of the `mwp` binary: exit codes, outputs, `mwp serve` and `mwp demo`.

mod e2e_support;

use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use e2e_support::*;
use serde_json::Value;

fn mwp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mwp"))
}

fn transcripts() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/transcripts")
}

fn lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

#[test]
fn transcript_exit_codes_pass_fail_unreadable() {
    let pass = mwp()
        .arg("transcript")
        .arg(transcripts().join("lifecycle.jsonl"))
        .output()
        .expect("runs");
    assert_eq!(pass.status.code(), Some(0));
    let out = lines(&pass.stdout);
    assert_eq!(out[0]["step"], 1);
    assert_eq!(out[0]["outcome"], "accepted");
    let (reference, _) = mwp_core::transcript::run_in_memory(
        &std::fs::read_to_string(transcripts().join("lifecycle.jsonl")).expect("read"),
    );
    assert_eq!(
        out, reference,
        "the CLI prints what the reference runner prints"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let failing = dir.path().join("fail.jsonl");
    let text = std::fs::read_to_string(transcripts().join("lifecycle.jsonl")).expect("read");
    std::fs::write(&failing, text.replacen("\"seq\": 1,", "\"seq\": 99,", 1)).expect("write");
    let fail = mwp()
        .arg("transcript")
        .arg(&failing)
        .output()
        .expect("runs");
    assert_eq!(fail.status.code(), Some(1));
    assert!(lines(&fail.stdout)[0]["mismatch"].is_array());

    let missing = mwp()
        .arg("transcript")
        .arg(dir.path().join("missing.jsonl"))
        .output()
        .expect("runs");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read transcript"));
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let help = mwp().arg("--help").output().expect("runs");
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Exit codes"));
    let bad = mwp().arg("replay").output().expect("runs");
    assert_eq!(bad.status.code(), Some(2));
    let store = mwp()
        .args(["transcript", "x.jsonl", "--store", "redis://x"])
        .output()
        .expect("runs");
    assert_eq!(store.status.code(), Some(2));
}

#[test]
fn serve_refuses_bad_limits_and_origins_with_exit_2() {
    for args in [
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--cors-origin",
            "ops.example",
        ][..],
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--cors-origin",
            "https://ops.example/app",
        ],
        &["serve", "--addr", "127.0.0.1:0", "--max-connections", "0"],
        &["serve", "--addr", "127.0.0.1:0", "--header-timeout", "0"],
        &["serve", "--addr", "127.0.0.1:0", "--max-groups", "x"],
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--public-host",
            "ops.example:08443",
        ],
        &[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--public-host",
            "ops.example/app",
        ],
    ] {
        let out = mwp().args(args).output().expect("runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(args[3]), "{args:?}: {err}");
    }
}

#[test]
fn replica_reaches_the_authoritys_state_hash_from_shuffled_repeated_events() {
    let text = std::fs::read_to_string(transcripts().join("lifecycle.jsonl")).expect("read");
    let (out, failed) = mwp_core::transcript::run_in_memory(&text);
    assert!(!failed);
    let events: Vec<String> = out
        .iter()
        .filter_map(|l| l.get("event"))
        .map(Value::to_string)
        .collect();
    let authority_hash = out
        .iter()
        .rev()
        .find_map(|l| l.get("state_hash"))
        .expect("snapshot op")
        .clone();
    let mut shuffled = events.clone();
    shuffled.reverse();
    shuffled.extend(events.iter().take(3).cloned());
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("events.jsonl");
    std::fs::write(&file, shuffled.join("\n")).expect("write");
    let run = mwp().arg("replica").arg(&file).output().expect("runs");
    assert_eq!(run.status.code(), Some(0));
    let out = lines(&run.stdout);
    assert_eq!(out[0]["offer"], 1);
    assert_eq!(out[0]["result"], "buffered");
    assert_eq!(out[events.len() - 1]["result"], "applied");
    assert_eq!(out[events.len()]["result"], "duplicate");
    let last = out.last().expect("final line");
    assert_eq!(last["cursor"], events.len() as u64);
    assert_eq!(last["state_hash"], authority_hash);
}

#[test]
fn verify_snapshot_exit_codes() {
    let server = TestServer::start();
    let client = opened(&server, "g1", 1);
    let authority = client.authority_key().expect("key");
    let bytes = client.snapshot(&id("g1")).expect("snapshot");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("g1.snapshot");
    std::fs::write(&file, &bytes).expect("write");
    let verify = |key: &str, group: &str| {
        mwp()
            .arg("verify-snapshot")
            .arg(&file)
            .args(["--key", key, "--org", "acme", "--group", group])
            .output()
            .expect("runs")
    };
    let ok = verify(&authority.to_hex(), "g1");
    assert_eq!(ok.status.code(), Some(0));
    assert_eq!(lines(&ok.stdout)[0]["ok"], true);
    let wrong_key = verify(&key("mallory").public().to_hex(), "g1");
    assert_eq!(wrong_key.status.code(), Some(1));
    assert_eq!(
        lines(&wrong_key.stdout)[0]["error"]["code"],
        "SNAPSHOT_INVALID"
    );
    let wrong_group = verify(&authority.to_hex(), "g2");
    assert_eq!(wrong_group.status.code(), Some(1));
    std::fs::remove_file(&file).expect("rm");
    assert_eq!(verify(&authority.to_hex(), "g1").status.code(), Some(2));
}

#[test]
fn serve_answers_over_http_and_stops_on_sigint() {
    let mut child = mwp()
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("starts");
    let stderr = child.stderr.take().expect("piped");
    let mut reader = BufReader::new(stderr);
    let (base, _) = read_address(&mut reader);
    let client = mwp_host::server::client::Client::new(base.clone());
    let authority = client.authority_key().expect("answers");
    client
        .submit(&open_group("g1", authority, &[]))
        .expect("opens");
    let (status, _, page) = request("GET", &format!("{base}/"), &[], b"");
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&page).contains("<html"));
    let pid = child.id().to_string();
    let killed = Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let status = child.wait().expect("exits");
    assert_eq!(status.code(), Some(0), "a graceful shutdown exits 0");
}

#[test]
fn demo_runs_to_completion_and_its_summary_verifies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("demo-data");
    let out = mwp()
        .args([
            "demo",
            "--exit",
            "--json",
            "--addr",
            "127.0.0.1:0",
            "--data",
        ])
        .arg(&data)
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = &lines(&out.stdout)[0];
    assert_eq!(summary["snapshot"]["verified"], true);
    assert_eq!(summary["snapshot"]["replica_agrees"], true);
    assert_eq!(summary["evidence"], 1);
    assert!(summary["duplicates"].as_u64().is_some_and(|d| d >= 1));
    for work in ["fetch", "clean", "train", "report", "notify"] {
        assert_eq!(summary["work"][work], "succeeded");
        assert_eq!(summary["epochs"][work], 2, "{work} was claimed twice");
    }
    assert!(summary["effects"][0]
        .as_str()
        .is_some_and(|e| e.contains("reconciled: it happened")));
    assert_eq!(summary["events"], summary["snapshot"]["seq"]);
    // The graph grew from fetch's outcome: three shards, disposed of once though the planner
    // crashed between the outcome and its disposition; every other outcome got the empty one.
    let planner = &summary["planner"];
    assert_eq!(planner["fetch_expands"], 1);
    assert_eq!(planner["restarts"], 1);
    assert!(planner["expansions"][0]
        .as_str()
        .is_some_and(|x| x.ends_with("into shard-1, shard-2, shard-3")));
    for shard in ["shard-1", "shard-2", "shard-3"] {
        assert_eq!(summary["work"][shard], "succeeded");
    }
    assert_eq!(planner["empty"], 7, "one per other terminal event");
    assert!(
        data.join("authority.key").exists(),
        "the demo keeps its key in its folder"
    );
    // The mission is in the folder's file store: `mwp serve --data DIR` serves it again.
    let fsck = mwp()
        .arg("fsck")
        .arg("--data")
        .arg(&data)
        .output()
        .expect("runs");
    assert_eq!(fsck.status.code(), Some(0));
    let groups = lines(&fsck.stdout);
    assert_eq!(groups.len(), 1, "one group per run");
    assert_eq!(groups[0]["group"], summary["group"]);
    assert_eq!(groups[0]["events"], summary["events"]);
}

#[test]
fn every_shared_transcript_prints_what_the_reference_runner_prints() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(transcripts())
        .expect("transcripts")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        let (reference, failed) = mwp_core::transcript::run_in_memory(&text);
        let run = mwp().arg("transcript").arg(&file).output().expect("runs");
        assert_eq!(
            run.status.code(),
            Some(i32::from(failed)),
            "{}",
            file.display()
        );
        assert_eq!(lines(&run.stdout), reference, "{}", file.display());
    }
}

/// What the open of a data directory repaired is said in the server's log, naming the file,
/// before the server says it is up.
#[test]
fn serve_logs_what_opening_its_data_directory_repaired() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    // A group creation a crash cut short before its rename (docs/format.md).
    let interrupted = data.join("groups").join(".new-g1-1");
    std::fs::create_dir_all(&interrupted).expect("mkdir");
    let mut child = mwp()
        .args(["serve", "--addr", "127.0.0.1:0", "--data"])
        .arg(&data)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("starts");
    let mut reader = BufReader::new(child.stderr.take().expect("piped"));
    let (_, logged) = read_address(&mut reader);
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    assert_eq!(child.wait().expect("exits").code(), Some(0));
    assert!(!interrupted.exists(), "the open removed it");
    let logged = logged.concat();
    assert!(
        logged.contains("WARN")
            && logged.contains("interrupted group creation was removed")
            && logged.contains(&interrupted.display().to_string()),
        "{logged}"
    );
}

#[test]
fn serve_exits_0_on_sigint_sent_the_moment_it_says_it_is_up() {
    // The line announcing the address is the signal to start using the server, and to stop
    // it: Ctrl-C is listened for before the line is printed.
    for _ in 0..5 {
        let mut child = mwp()
            .args(["serve", "--addr", "127.0.0.1:0"])
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("starts");
        let mut reader = BufReader::new(child.stderr.take().expect("piped"));
        read_address(&mut reader);
        let killed = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        let status = child.wait().expect("exits");
        assert_eq!(status.code(), Some(0), "a graceful shutdown exits 0");
    }
}

/// The `advance` transcript (the authority acting on its own, SPEC §12) prints the same bytes
/// from `mwp transcript` on memory, on the file store (`--data`) and, when a test server is
/// set up, on PostgreSQL (`--store postgres://…`).
#[test]
fn the_advance_transcript_prints_the_same_bytes_on_every_store() {
    let file = transcripts().join("advance.jsonl");
    let run = |extra: &[&str]| {
        let out = mwp()
            .arg("transcript")
            .arg(&file)
            .args(extra)
            .output()
            .expect("runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let memory = run(&[]);
    assert!(
        lines(&memory)
            .iter()
            .any(|l| l["source"] == "authority" && l["outcome"] == "accepted"),
        "the authority acts on its own"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    assert_eq!(
        run(&["--data", data.to_str().expect("utf-8")]),
        memory,
        "--data"
    );
    let Ok(server) = std::env::var("MWP_TEST_POSTGRES") else {
        eprintln!("*** SKIPPED (PostgreSQL part): MWP_TEST_POSTGRES is not set");
        return;
    };
    let schema = format!("t_cli_advance_{}", std::process::id());
    let sep = if server.contains('?') { '&' } else { '?' };
    let url = format!("{server}{sep}schema={schema}");
    assert_eq!(run(&["--store", &url]), memory, "--store postgres");
}

#[test]
fn bench_spreads_durable_accepts_over_groups_of_a_file_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let out = mwp()
        .arg("bench")
        .arg("--data")
        .arg(&data)
        .args(["--groups", "3", "--clients", "4", "--commands", "60"])
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let figures = &lines(&out.stdout)[0];
    assert_eq!(figures["accepted"], 60, "{figures}");
    assert_eq!(figures["rejected"], 0, "{figures}");
    assert_eq!(figures["groups"], 3, "{figures}");
    assert_eq!(figures["store"], "file", "{figures}");
    for field in ["verify_us", "verify_repeated_us"] {
        assert!(
            figures[field].as_f64().is_some_and(|v| v > 0.0),
            "{field}: {figures}"
        );
    }
    for field in [
        "process_cpu_us_per_accept",
        "cpu_per_verify",
        "system_us_per_accept",
        "peak_rss_kib",
    ] {
        assert!(figures[field].is_number(), "{field}: {figures}");
    }

    // The store holds the three groups and nothing else: clients 0 and 3 posted 15 commands
    // each to the first group, clients 1 and 2 15 each to the second and third.
    let fsck = mwp()
        .arg("fsck")
        .arg("--data")
        .arg(&data)
        .output()
        .expect("runs");
    assert_eq!(
        fsck.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&fsck.stdout)
    );
    let mut groups = lines(&fsck.stdout);
    assert_eq!(groups.len(), 3, "{groups:?}");
    groups.sort_by_key(|g| g["group"].as_str().unwrap_or_default().to_owned());
    let events: Vec<u64> = groups
        .iter()
        .map(|g| {
            let name = g["group"].as_str().expect("a group");
            assert!(name.starts_with("bench-"), "{name}");
            g["events"].as_u64().expect("events")
        })
        .collect();
    let opened = events[1] - 15;
    assert!(opened > 0, "{events:?}");
    assert_eq!(
        events,
        [opened + 30, opened + 15, opened + 15],
        "{groups:?}"
    );
}

#[test]
fn bench_refuses_zero_groups_and_a_group_without_commands() {
    let zero = mwp()
        .args([
            "bench",
            "--groups",
            "0",
            "--clients",
            "2",
            "--commands",
            "4",
        ])
        .output()
        .expect("runs");
    assert_eq!(zero.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&zero.stderr).contains("--groups"),
        "{}",
        String::from_utf8_lossy(&zero.stderr)
    );
    let sparse = mwp()
        .args([
            "bench",
            "--groups",
            "5",
            "--clients",
            "2",
            "--commands",
            "4",
        ])
        .output()
        .expect("runs");
    assert_eq!(sparse.status.code(), Some(2));
    let message = String::from_utf8_lossy(&sparse.stderr);
    assert!(
        message.contains("--groups 5") && message.contains("6 commands"),
        "{message}"
    );
}

/// The dashboard's module is in the `mwp` binary once: the embedded files are a `static`.
/// Spelled as a `const`, every code unit that used them got a copy of their bytes (four in a
/// release build; a debug build happens to keep one: `cargo test --release` shows it).
#[test]
fn the_binary_holds_the_dashboards_module_once() {
    let module = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("dashboard/pkg/mwp_wasm_bg.wasm"),
    )
    .expect("the committed dashboard module");
    let binary = std::fs::read(env!("CARGO_BIN_EXE_mwp")).expect("the mwp binary");
    // A run of its bytes that occurs once in the module, from its middle on.
    let count =
        |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).filter(|w| *w == needle).count();
    let window = (module.len() / 2..module.len() - 64)
        .step_by(4096)
        .map(|at| &module[at..at + 64])
        .find(|w| count(&module, w) == 1)
        .expect("a run of 64 bytes the module holds once");
    assert_eq!(
        count(&binary, window),
        1,
        "copies of the dashboard module in the binary"
    );
}

/// `mwp` run under a 2 GiB address-space limit, as a shell would run it: an input read
/// without a bound runs out of memory (and aborts) instead of being refused.
fn mwp_bounded(args: &[&std::ffi::OsStr]) -> std::process::Output {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        // A bound in time too: a command that waited on a FIFO would hang the test, not fail it.
        .arg("ulimit -v 2097152; exec timeout 120 \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_mwp"))
        .args(args);
    cmd.output().expect("runs")
}

/// The files `mwp replica`, `mwp transcript`, `mwp verify-snapshot` and `mwp verify-proof`
/// read are input: a device, a directory, a line longer than any event or text that is not
/// UTF-8 is refused (exit 2) naming the file and, for text, the line, with bounded memory
/// and nothing written; a line of `mwp replica` that is not UTF-8 is answered `rejected` as
/// any line that is not an event.
#[test]
fn input_files_are_read_bounded_and_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let os = |s: &str| std::ffi::OsString::from(s);
    let zero = os("/dev/zero");
    for args in [
        vec![os("replica"), zero.clone()],
        vec![os("transcript"), zero.clone()],
        vec![os("verify-proof"), zero.clone()],
        vec![
            os("verify-snapshot"),
            zero.clone(),
            os("--key"),
            os(&"11".repeat(32)),
            os("--org"),
            os("acme"),
            os("--group"),
            os("g1"),
        ],
        vec![os("replica"), dir.path().as_os_str().to_owned()],
    ] {
        let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let out = mwp_bounded(&refs);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("a character device") || err.contains("a directory"),
            "{args:?}: {err}"
        );
    }

    // A line longer than any event stops `mwp replica`, naming the file and the line.
    let events = dir.path().join("events.jsonl");
    let mut text = b"{}\n".to_vec();
    text.extend(std::iter::repeat_n(b'a', 17 << 20));
    std::fs::write(&events, &text).expect("write");
    let out = mwp_bounded(&[std::ffi::OsStr::new("replica"), events.as_os_str()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{} line 2", events.display())) && err.contains("longer than"),
        "{err}"
    );

    // A line that is not UTF-8 is a line that is not an event.
    std::fs::write(&events, b"\xff\xfe\n").expect("write");
    let out = mwp().arg("replica").arg(&events).output().expect("runs");
    assert_eq!(out.status.code(), Some(0));
    let answers = lines(&out.stdout);
    assert_eq!(answers[0]["result"], "rejected");
    assert_eq!(answers[0]["seq"], Value::Null);
    let message = answers[0]["error"]["message"].as_str().expect("a message");
    assert!(message.contains("not UTF-8"), "{message}");

    // A transcript that is not UTF-8 names the line, and its data directory is not made.
    let transcript = dir.path().join("t.jsonl");
    let lifecycle = std::fs::read(transcripts().join("lifecycle.jsonl")).expect("read");
    let mut bad = lifecycle.clone();
    bad.extend(b"\n{\"at\": 1, \"body\": \"\xc3\"}\n");
    std::fs::write(&transcript, &bad).expect("write");
    let data = dir.path().join("data");
    let out = mwp()
        .arg("transcript")
        .arg(&transcript)
        .arg("--data")
        .arg(&data)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let line = lifecycle.iter().filter(|&&b| b == b'\n').count() + 2;
    assert!(
        err.contains(&format!("not UTF-8 text: line {line} column")),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    assert!(
        !data.exists(),
        "nothing is written for a transcript refused"
    );
}

/// A snapshot file in a data directory whose size was made up (a sparse file of 50 GiB, with
/// a header that does not read, or one whose length field matches the size) is damage named
/// by its path: `mwp verify --data` reports it (exit 1) without trying to hold the file.
#[test]
fn a_snapshot_file_of_a_made_up_size_is_refused_unread() {
    use mwp_core::log_format::{SNAPSHOT_HEADER_LEN, SNAPSHOT_MAGIC, VERSION};
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let run = mwp()
        .arg("transcript")
        .arg(transcripts().join("lifecycle.jsonl"))
        .arg("--data")
        .arg(&data)
        .output()
        .expect("runs");
    assert_eq!(run.status.code(), Some(0));
    let snap = data.join("groups/g1/00000000000000000024.snap");
    let size: u64 = 50 << 30;
    for header in [false, true] {
        let file = std::fs::File::create(&snap).expect("create");
        if header {
            let mut h = Vec::new();
            h.extend(SNAPSHOT_MAGIC);
            h.extend(VERSION.to_le_bytes());
            h.extend(24u64.to_le_bytes());
            h.extend((size - SNAPSHOT_HEADER_LEN as u64).to_le_bytes());
            h.extend(0u32.to_le_bytes());
            assert_eq!(h.len(), SNAPSHOT_HEADER_LEN);
            std::io::Write::write_all(&mut &file, &h).expect("write");
        }
        file.set_len(size).expect("a sparse file");
        drop(file);
        let out = mwp_bounded(&[
            std::ffi::OsStr::new("verify"),
            std::ffi::OsStr::new("--data"),
            data.as_os_str(),
            std::ffi::OsStr::new("--group"),
            std::ffi::OsStr::new("g1"),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "header {header}: {err}");
        let report = lines(&out.stdout);
        assert_eq!(report[0]["ok"], false, "{}", report[0]);
        let message = report[0]["error"].as_str().expect("a message");
        assert!(
            message.contains("SNAPSHOT_INVALID") && message.contains("00000000000000000024.snap"),
            "{message}"
        );
    }
}

/// Makes a FIFO at `path` (after removing what is there).
fn mkfifo(path: &std::path::Path) {
    let _ = std::fs::remove_file(path);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
}

/// A copy of the data directory `from` at `to`.
fn copy_data(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("list") {
        let e = e.expect("entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_data(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

/// Files of a data directory replaced by what is not a regular file are named by what they
/// are, by every command that reads the directory, without waiting on a FIFO: a FIFO for a
/// log segment is not "a file shorter than its header"; a FIFO for `authority.key` is not
/// replaced by a new key when `mwp serve` opens the directory; a `groups` that is a file is
/// not a store without groups; and `mwp fsck` names a snapshot that is a directory by its
/// path once.
#[test]
fn store_files_that_are_not_regular_files_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    // redaction_archive leaves a snapshot file on disk, and a redaction overlay.
    let base = dir.path().join("base");
    let run = mwp()
        .arg("transcript")
        .arg(transcripts().join("redaction_archive.jsonl"))
        .arg("--data")
        .arg(&base)
        .output()
        .expect("runs");
    assert_eq!(run.status.code(), Some(0));
    let os = std::ffi::OsStr::new;
    let reads = |data: &std::path::Path| {
        [
            mwp_bounded(&[os("groups"), os("--data"), data.as_os_str()]),
            mwp_bounded(&[
                os("verify"),
                os("--json"),
                os("--data"),
                data.as_os_str(),
                os("--group"),
                os("g1"),
            ]),
            mwp_bounded(&[os("fsck"), os("--data"), data.as_os_str()]),
        ]
    };

    let seg = dir.path().join("seg");
    copy_data(&base, &seg);
    mkfifo(&seg.join("groups/g1/00000000000000000001.seg"));
    for out in reads(&seg) {
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_ne!(out.status.code(), Some(0), "{all}");
        assert!(
            all.contains("00000000000000000001.seg") && all.contains("it is a FIFO"),
            "{all}"
        );
    }

    // A seal record (`audit.mwpa`, `audit.tombstone`) that is not a regular file is refused
    // by its type, not read as a group without a seal.
    for name in ["audit.mwpa", "audit.tombstone"] {
        let sealed = dir.path().join(format!("sealed-{name}"));
        copy_data(&base, &sealed);
        mkfifo(&sealed.join("groups/g1").join(name));
        for out in reads(&sealed) {
            let all = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_ne!(out.status.code(), Some(0), "{name}: {all}");
            assert!(
                all.contains(name) && all.contains("it is a FIFO"),
                "{name}: {all}"
            );
        }
    }

    let key = dir.path().join("key");
    copy_data(&base, &key);
    mkfifo(&key.join("authority.key"));
    let serve = mwp_bounded(&[
        os("serve"),
        os("--allow-test-key"),
        os("--addr"),
        os("127.0.0.1:0"),
        os("--data"),
        key.as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&serve.stderr);
    assert_eq!(serve.status.code(), Some(3), "{err}");
    assert!(
        err.contains("authority.key") && err.contains("it is a FIFO"),
        "{err}"
    );
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(key.join("authority.key"))
            .expect("stat")
            .file_type()
            .is_fifo(),
        "the FIFO is left where it was, not replaced by a new key"
    );

    let groups = dir.path().join("groups-file");
    copy_data(&base, &groups);
    std::fs::remove_dir_all(groups.join("groups")).expect("rm");
    std::fs::write(groups.join("groups"), b"junk").expect("write");
    for out in reads(&groups) {
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(3), "{all}");
        assert!(all.contains("groups"), "{all}");
    }

    let snap = dir.path().join("snap");
    copy_data(&base, &snap);
    let snap_file = snap.join("groups/g1/00000000000000000013.snap");
    std::fs::remove_file(&snap_file).expect("rm");
    std::fs::create_dir(&snap_file).expect("mkdir");
    let out = mwp_bounded(&[os("fsck"), os("--data"), snap.as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    let finding = lines(&out.stdout)
        .into_iter()
        .find(|l| l["damage"] == true)
        .expect("a finding");
    let path = snap_file.display().to_string();
    assert_eq!(finding["file"], path.as_str(), "{finding}");
    let message = finding["message"].as_str().expect("a message");
    assert_eq!(message.matches(&path).count(), 1, "{message}");
}

/// A store file that cannot be read as one (a FIFO in place of a log segment, or a
/// directory there) is `STORAGE` naming its path, in the same words in `mwp verify --data`
/// and `mwp fsck` (`open PATH: it is a FIFO, not a regular file`). `verify` checks nothing
/// it cannot read and prints no report: exit 3 and the message on stderr, as for any store
/// that cannot be read. `fsck` lists it as a finding of that file, not of its group
/// directory, and exits 1.
#[test]
fn a_store_file_that_cannot_be_read_is_named_alike_by_verify_and_fsck() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().join("base");
    let run = mwp()
        .arg("transcript")
        .arg(transcripts().join("redaction_archive.jsonl"))
        .arg("--data")
        .arg(&base)
        .output()
        .expect("runs");
    assert_eq!(run.status.code(), Some(0));
    let os = std::ffi::OsStr::new;
    let fifo: fn(&std::path::Path) = |p| mkfifo(p);
    let directory: fn(&std::path::Path) = |p| {
        std::fs::remove_file(p).expect("rm");
        std::fs::create_dir(p).expect("mkdir");
    };
    for (name, make, why) in [
        ("fifo", fifo, Some("it is a FIFO, not a regular file")),
        ("dir", directory, None),
    ] {
        let data = dir.path().join(name);
        copy_data(&base, &data);
        let seg = data.join("groups/g1/00000000000000000001.seg");
        make(&seg);
        let path = seg.display().to_string();
        let words = match why {
            Some(why) => format!("open {path}: {why}"),
            None => format!("open {path}: "),
        };

        let verify = mwp_bounded(&[
            os("verify"),
            os("--json"),
            os("--data"),
            data.as_os_str(),
            os("--group"),
            os("g1"),
        ]);
        let err = String::from_utf8_lossy(&verify.stderr);
        assert_eq!(verify.status.code(), Some(3), "{name}: {err}");
        assert!(
            verify.stdout.is_empty(),
            "{name}: no report: {:?}",
            verify.stdout
        );
        assert!(err.contains(&words), "{name}: {err}");
        assert_eq!(err.matches(&path).count(), 1, "{name}: {err}");

        let fsck = mwp_bounded(&[os("fsck"), os("--data"), data.as_os_str()]);
        assert_eq!(fsck.status.code(), Some(1), "{name}");
        let found = lines(&fsck.stdout);
        let finding = found
            .iter()
            .find(|l| l["damage"] == true)
            .unwrap_or_else(|| panic!("{name}: a finding in {found:?}"));
        assert_eq!(finding["code"], "STORAGE", "{name}: {finding}");
        assert_eq!(finding["file"], path.as_str(), "{name}: {finding}");
        let message = finding["message"].as_str().expect("a message");
        assert!(message.starts_with(&words), "{name}: {message}");
        assert_eq!(message.matches(&path).count(), 1, "{name}: {message}");
    }
}

/// `--authority-key-file` (PostgreSQL) is read as a regular file, opened without blocking and
/// up to a cap: a FIFO there is named by what it is, whatever its mode (`mwp serve` and `mwp
/// export` do not wait on it), and a sparse file of 50 GiB is refused unread; both exit 2
/// before any database is reached.
#[test]
fn an_authority_key_file_that_is_not_a_regular_file_is_named() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("authority.key");
    mkfifo(&fifo);
    let huge = dir.path().join("huge.key");
    std::fs::write(&huge, format!("{}\n", "11".repeat(32))).expect("write");
    std::fs::File::options()
        .write(true)
        .open(&huge)
        .and_then(|f| f.set_len(50 << 30))
        .expect("sparse");
    std::fs::set_permissions(&huge, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let os = std::ffi::OsStr::new;
    // Nothing listens on port 1: a database is never reached.
    let store = os("postgres://mwp@127.0.0.1:1/mwp");
    let out = dir.path().join("export");
    let runs = |key: &std::path::Path| {
        [
            mwp_bounded(&[
                os("serve"),
                os("--addr"),
                os("127.0.0.1:0"),
                os("--store"),
                store,
                os("--authority-key-file"),
                key.as_os_str(),
            ]),
            mwp_bounded(&[
                os("export"),
                os("--group"),
                os("g1"),
                os("--out"),
                out.as_os_str(),
                os("--store"),
                store,
                os("--authority-key-file"),
                key.as_os_str(),
            ]),
        ]
    };
    for mode in [0o600, 0o644] {
        std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(mode)).expect("chmod");
        for run in runs(&fifo) {
            let err = String::from_utf8_lossy(&run.stderr);
            assert_eq!(run.status.code(), Some(2), "{mode:o}: {err}");
            let words = format!(
                "authority key file {}: cannot be read: it is a FIFO, not a regular file",
                fifo.display()
            );
            assert!(err.contains(&words), "{mode:o}: {err}");
        }
    }
    for run in runs(&huge) {
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("authority key file {}", huge.display()))
                && err.contains("over the 4096 bytes it may hold"),
            "{err}"
        );
    }
    assert!(!out.exists(), "nothing was written");
}

/// A symbolic link to nothing at `authority.key` (a key on a volume not mounted) is
/// something at the name: `mwp serve` refuses the directory and leaves the link, not
/// replacing it by a new key; a link to nothing at `groups` is not a store without groups.
#[test]
fn a_link_to_nothing_in_a_data_directory_is_not_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().join("base");
    let run = mwp()
        .arg("transcript")
        .arg(transcripts().join("lifecycle.jsonl"))
        .arg("--data")
        .arg(&base)
        .output()
        .expect("runs");
    assert_eq!(run.status.code(), Some(0));
    let nowhere = dir.path().join("unmounted/authority.key");

    let key = dir.path().join("key");
    copy_data(&base, &key);
    std::fs::remove_file(key.join("authority.key")).expect("rm");
    std::os::unix::fs::symlink(&nowhere, key.join("authority.key")).expect("link");
    // Bounded in time too: a serve that started would never end.
    let serve = Command::new("timeout")
        .arg("30")
        .arg(env!("CARGO_BIN_EXE_mwp"))
        .args([
            "serve",
            "--allow-test-key",
            "--addr",
            "127.0.0.1:0",
            "--data",
        ])
        .arg(&key)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&serve.stderr);
    assert_eq!(serve.status.code(), Some(3), "{err}");
    assert!(err.contains("authority.key"), "{err}");
    assert_eq!(
        std::fs::read_link(key.join("authority.key")).expect("still a link"),
        nowhere
    );
    assert!(!nowhere.exists());

    let groups = dir.path().join("groups-link");
    copy_data(&base, &groups);
    std::fs::remove_dir_all(groups.join("groups")).expect("rm");
    std::os::unix::fs::symlink(dir.path().join("unmounted/groups"), groups.join("groups"))
        .expect("link");
    let out = mwp()
        .arg("groups")
        .arg("--data")
        .arg(&groups)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("groups is not a directory"), "{err}");
}
