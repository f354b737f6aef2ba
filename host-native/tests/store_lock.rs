//! One writer per data directory, and read-only tools beside it: a second `mwp serve` on a
//! directory exits 3 naming it and the holder's pid; `kill -9` of the holder leaves the
//! directory openable; an owner record of a live process (what a Node writer leaves) is
//! honoured and a dead one taken over; `mwp replay`, `snapshot` and `fsck` take no lock,
//! change nothing and read consistently beside a server taking 64 concurrent clients; data
//! files are 0600 and directories 0700.

mod e2e_support;

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use e2e_support::*;
use mwp_core::{Code, Receipt};
use mwp_host::server::client::Client;
use mwp_host::store::format::{FILE_HEADER_LEN, RECORD_HEADER_LEN};
use mwp_host::store::lock::{Owner, OWNER_NAME};
use mwp_host::store::{FileStore, StoreOptions};

fn mwp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mwp"))
}

/// Starts `mwp serve --data DIR` on a random port; returns the child and its base URL.
fn serve(data: &Path) -> (Child, String) {
    spawn_serve(
        mwp()
            .args(["serve", "--addr", "127.0.0.1:0", "--data"])
            .arg(data),
    )
}

fn sigkill(child: &mut Child) {
    let status = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let _ = child.wait();
}

/// Runs a command to its end, failing the test if it has not ended after a generous bound.
fn run_bounded(mut cmd: Command) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let out = std::thread::spawn(move || child.wait_with_output().expect("runs"));
    let start = Instant::now();
    while !out.is_finished() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the command did not end"
        );
        std::thread::park_timeout(Duration::from_millis(20));
    }
    out.join().expect("joins")
}

#[test]
fn a_second_serve_on_one_directory_exits_3_naming_it_and_the_holder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut first, base) = serve(dir.path());
    let mut second = mwp();
    second
        .args(["serve", "--addr", "127.0.0.1:0", "--data"])
        .arg(dir.path());
    let out = run_bounded(second);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&dir.path().display().to_string()),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("process {}", first.id())),
        "{stderr}"
    );
    // The first server still answers.
    Client::new(base).authority_key().expect("still serving");
    sigkill(&mut first);
}

/// Opens `dir` for writing once no one holds its lock, waiting a bounded time. The tests of
/// this file run in threads of one process, and some spawn processes: a child forked while
/// this process holds (or has just tried) the lock shares that file description, and so the
/// `flock`, until it execs (every descriptor is close-on-exec). A reopen right after a close
/// may meet such a child for a moment; only that is waited out.
fn open_writer(dir: &Path) -> mwp_core::Result<FileStore> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match FileStore::open(dir, StoreOptions::default()) {
            Err(e)
                if e.code == Code::Storage
                    && e.message.contains("another process")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

#[test]
fn kill_9_of_the_holder_leaves_the_directory_openable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut first, base) = serve(dir.path());
    let client = Client::new(base);
    let authority = client.authority_key().expect("key");
    client
        .submit(&open_group("g1", authority, &["w0".into()]))
        .expect("opens");
    sigkill(&mut first);
    // The owner record of the dead process is still there: it is stale, not a holder.
    assert!(dir.path().join(OWNER_NAME).exists());
    let (mut again, base) = serve(dir.path());
    let client = Client::new(base);
    assert_eq!(client.events(&id("g1"), 0, 10).expect("events").len(), 1);
    sigkill(&mut again);
    // And in this process too.
    let store = open_writer(dir.path()).expect("opens");
    drop(store);
    assert!(
        !dir.path().join(OWNER_NAME).exists(),
        "a clean close removes the owner record"
    );
}

#[test]
fn a_second_open_in_one_process_is_refused_until_the_first_closes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = FileStore::open(dir.path(), StoreOptions::default()).expect("opens");
    let e = FileStore::open(dir.path(), StoreOptions::default()).expect_err("refused");
    assert_eq!(e.code, Code::Storage);
    assert!(e.message.contains(&dir.path().display().to_string()), "{e}");
    // Read-only opens take no lock.
    let ro = StoreOptions {
        read_only: true,
        ..StoreOptions::default()
    };
    FileStore::open(dir.path(), ro).expect("a read-only open beside the writer");
    drop(first);
    open_writer(dir.path()).expect("opens once the first closed");
}

/// What a Node writer leaves: an owner record and no flock. A live owner is honoured; once it
/// is gone the record is stale and taken over.
#[test]
fn an_owner_record_of_a_live_process_is_honoured_and_a_dead_one_taken_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut holder = Command::new("sleep").arg("600").spawn().expect("sleep");
    let owner = Owner {
        pid: holder.id(),
        start: None,
    };
    std::fs::write(dir.path().join(OWNER_NAME), owner.encode()).expect("writes");
    let e = FileStore::open(dir.path(), StoreOptions::default()).expect_err("refused");
    assert_eq!(e.code, Code::Storage, "{e}");
    assert!(
        e.message.contains(&format!("process {}", holder.id())),
        "{e}"
    );
    assert_eq!(
        e.details.get("pid").and_then(|p| p.as_u64()),
        Some(u64::from(holder.id()))
    );
    holder.kill().expect("kills");
    holder.wait().expect("reaped");
    let store = open_writer(dir.path()).expect("stale: taken over");
    let record = std::fs::read_to_string(dir.path().join(OWNER_NAME)).expect("record");
    assert_eq!(Owner::decode(&record), Some(Owner::me()));
    drop(store);
}

/// A writer whose owner record was removed, or replaced by another writer's (one that judged
/// it stale), writes nothing more: the next batch fails with `STORAGE` naming `LOCK.pid`,
/// nothing is appended, no group is created, and every later command is refused (sticky), as
/// the Node/Deno writer does.
#[test]
fn a_writer_whose_owner_record_was_removed_or_taken_over_writes_nothing_more() {
    use mwp_host::service::AuthorityService;
    let authority = key("@authority");
    // `None`: the record is removed; else it is replaced by this text (another writer's).
    for (what, replaced) in [
        ("removed", None),
        ("taken over", Some("mwp-lock 1\npid 1\n")),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = StoreOptions {
            authority_key: Some(authority.clone()),
            ..StoreOptions::default()
        };
        let store = FileStore::open(dir.path(), opts).expect("opens");
        let w: Vec<String> = vec!["w0".into()];
        store
            .submit(&open_group("g1", authority.public(), &w), 1)
            .expect("opens g1");
        let seg = dir.path().join("groups/g1/00000000000000000001.seg");
        let before = std::fs::read(&seg).expect("segment");
        let owner = dir.path().join(OWNER_NAME);
        match replaced {
            None => std::fs::remove_file(&owner).expect("removes"),
            Some(text) => std::fs::write(&owner, text).expect("writes"),
        }
        // A snapshot is a write too: none is taken for a directory this writer lost.
        let g1 = mwp_core::Id::new("g1").expect("an id");
        let e = store.snapshot_now(&g1).expect_err("no snapshot written");
        assert!(
            e.message.contains("is no longer this writer's: LOCK.pid"),
            "{what}: {e}"
        );
        assert!(
            !dir.path()
                .join("groups/g1/00000000000000000001.snap")
                .exists(),
            "{what}: no snapshot file"
        );
        let create = |n: &str| cmd("g1", "alice", n, None, create_work(n, &[]));
        let e = store.submit(&create("x1"), 2).expect_err(what);
        assert_eq!(e.code, Code::Storage, "{what}: {e}");
        assert!(
            e.message.contains("is no longer this writer's: LOCK.pid"),
            "{what}: {e}"
        );
        let e = store.submit(&create("x2"), 3).expect_err("sticky");
        assert_eq!(e.code, Code::Storage, "{what}: {e}");
        let e = store
            .submit(&open_group("g2", authority.public(), &w), 4)
            .expect_err("no group created");
        assert_eq!(e.code, Code::Storage, "{what}: {e}");
        assert_eq!(
            std::fs::read(&seg).expect("segment"),
            before,
            "{what}: nothing appended"
        );
        assert!(
            !dir.path().join("groups/g2").exists(),
            "{what}: no group created"
        );
        drop(store);
    }
}

/// Field `n` (1-based, as proc(5) counts) of `/proc/PID/stat`, where it reads.
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n - 3).map(str::to_owned)
}

/// The records of `tests/lock/owner-records.json`, each judged as the Node/Deno store judges
/// it (js/test/file-store-cases.js reads the same file): the same verdict on both hosts.
#[test]
fn every_host_reaches_the_same_verdict_on_the_same_owner_records() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/lock/owner-records.json");
    let table: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("the table")).expect("JSON");
    let mut live = Command::new("sleep").arg("600").spawn().expect("sleep");
    // `sleep 0.05` is left a zombie: its parent becomes `sleep 5`, which never reaps it.
    let mut parent = Command::new("sh")
        .args(["-c", "sleep 0.05 & echo $!; exec sleep 5"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("sh");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(parent.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("the zombie's pid");
    let zombie: u32 = line.trim().parse().expect("a pid");
    let deadline = Instant::now() + Duration::from_secs(5);
    while stat_field(zombie, 3).as_deref() != Some("Z") {
        assert!(Instant::now() < deadline, "the child never became a zombie");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut gone = Command::new("true").spawn().expect("true");
    let dead = gone.id();
    gone.wait().expect("reaped");
    let init_start = stat_field(1, 22).and_then(|t| t.parse::<u64>().ok());
    let mut fill: Vec<(&str, Option<String>)> = vec![
        ("{live}", Some(live.id().to_string())),
        ("{live_start}", stat_field(live.id(), 22)),
        ("{zombie}", Some(zombie.to_string())),
        ("{dead}", Some(dead.to_string())),
        ("{init_start+1}", init_start.map(|t| (t + 1).to_string())),
    ];
    fill.push(("{init_start}", init_start.map(|t| t.to_string())));
    let mut judged = 0;
    for case in table["cases"].as_array().expect("cases") {
        let [text, want, why] = [0, 1, 2].map(|i| case[i].as_str().expect("a string"));
        let mut record = text.to_owned();
        let mut filled = true;
        for (name, value) in &fill {
            if record.contains(name) {
                match value {
                    Some(v) => record = record.replace(name, v),
                    None => filled = false,
                }
            }
        }
        if !filled {
            continue;
        }
        let got = match Owner::decode(&record) {
            None => "not a record",
            Some(o) if o.is_alive() => "held",
            Some(_) => "stale",
        };
        assert_eq!(got, want, "{record:?}: {why}");
        judged += 1;
    }
    assert!(judged >= 12, "{judged} records judged");
    let _ = live.kill();
    let _ = live.wait();
    let _ = parent.kill();
    let _ = parent.wait();
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("stat").permissions().mode() & 0o777
}

#[test]
fn data_files_are_0600_and_directories_0700() {
    let parent = tempfile::tempdir().expect("tempdir");
    let data = parent.path().join("data");
    let (mut server, base) = serve(&data);
    let client = Client::new(base);
    let authority = client.authority_key().expect("key");
    client
        .submit(&open_group("g1", authority, &["w0".into()]))
        .expect("opens");
    client
        .submit(&cmd("g1", "w0", "a1", None, create_work("x", &[])))
        .expect("accepted");
    sigkill(&mut server);
    let store = open_writer(&data).expect("opens");
    store.snapshot_now(&id("g1")).expect("snapshot");
    drop(store);
    let mut seen = 0;
    let mut stack = vec![data.clone()];
    while let Some(d) = stack.pop() {
        assert_eq!(mode(&d), 0o700, "{}", d.display());
        for entry in std::fs::read_dir(&d).expect("lists") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                assert_eq!(mode(&p), 0o600, "{}", p.display());
                seen += 1;
            }
        }
    }
    assert!(seen >= 4, "key, lock, segment and snapshot were checked");
}

/// Every file of a directory with its bytes and modification time.
fn listing(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("lists") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                stack.push(p.clone());
                out.insert(p, (Vec::new(), SystemTime::UNIX_EPOCH));
            } else {
                let m = std::fs::metadata(&p)
                    .expect("stat")
                    .modified()
                    .expect("mtime");
                out.insert(p.clone(), (std::fs::read(&p).expect("reads"), m));
            }
        }
    }
    out
}

fn replay_seqs(data: &Path) -> Vec<u64> {
    let mut c = mwp();
    c.args(["replay", "--group", "g1", "--data"]).arg(data);
    let out = run_bounded(c);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("an event line");
            v["seq"].as_u64().expect("seq")
        })
        .collect()
}

fn fsck_code(data: &Path) -> (Option<i32>, String) {
    let mut c = mwp();
    c.args(["fsck", "--data"]).arg(data);
    let out = run_bounded(c);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn read_only_tools_change_nothing_and_stop_at_the_last_complete_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut server, base) = serve(dir.path());
    let client = Client::new(base);
    let authority = client.authority_key().expect("key");
    client
        .submit(&open_group("g1", authority, &["w0".into()]))
        .expect("opens");
    for n in 0..5 {
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
    sigkill(&mut server);
    // A torn last write: half a record after the last one.
    let seg = dir.path().join("groups/g1/00000000000000000001.seg");
    let mut bytes = std::fs::read(&seg).expect("segment");
    let mut end = FILE_HEADER_LEN;
    while end + RECORD_HEADER_LEN <= bytes.len() {
        let len = u32::from_le_bytes(bytes[end..end + 4].try_into().expect("4 bytes")) as usize;
        if len == 0 {
            break;
        }
        end += RECORD_HEADER_LEN + len;
    }
    // A header of seq 7 whose record never got its bytes (nor its CRC).
    bytes[end..end + 12].copy_from_slice(&[100, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0]);
    std::fs::write(&seg, &bytes).expect("writes");
    let before = listing(dir.path());
    assert_eq!(replay_seqs(dir.path()), (1..=6).collect::<Vec<_>>());
    let mut snap = mwp();
    snap.args(["snapshot", "--group", "g1", "--data"])
        .arg(dir.path());
    let out = run_bounded(snap);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.stdout.is_empty(), "a snapshot signed in memory");
    let (code, report) = fsck_code(dir.path());
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(
        listing(dir.path()),
        before,
        "nothing was written, trimmed or removed"
    );
}

#[test]
fn replay_and_fsck_beside_a_server_taking_64_clients_lose_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut server, base) = serve(dir.path());
    let client = Client::new(base.clone());
    let authority = client.authority_key().expect("key");
    let clients = 64;
    let names: Vec<String> = (0..clients).map(|i| format!("w{i}")).collect();
    client
        .submit(&open_group("g1", authority, &names))
        .expect("opens");
    let acked: Arc<Mutex<Vec<Receipt>>> = Arc::default();
    let threads: Vec<_> = (0..clients)
        .map(|w| {
            let (client, acked) = (Client::new(base.clone()), Arc::clone(&acked));
            std::thread::spawn(move || {
                for n in 0..25 {
                    let c = cmd(
                        "g1",
                        &format!("w{w}"),
                        &format!("a{n}"),
                        None,
                        create_work(&format!("w{w}-{n}"), &[]),
                    );
                    let s = client.submit(&c).expect("accepted");
                    acked.lock().expect("lock").push(s.receipt);
                }
            })
        })
        .collect();
    // Bounded: at most 40 rounds, and at least 3, of a replay and an fsck while the load runs.
    let mut rounds = 0;
    while rounds < 40 && (rounds < 3 || threads.iter().any(|t| !t.is_finished())) {
        let before = acked.lock().expect("lock").iter().map(|r| r.seq).max();
        let seqs = replay_seqs(dir.path());
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "a replay is a prefix of the log"
        );
        if let Some(b) = before {
            assert!(
                seqs.len() as u64 >= b,
                "events acknowledged before the replay started are in it"
            );
        }
        let (code, report) = fsck_code(dir.path());
        assert_eq!(code, Some(0), "fsck beside the server: {report}");
        rounds += 1;
    }
    for t in threads {
        t.join().expect("client");
    }
    let acked = acked.lock().expect("lock").clone();
    assert_eq!(acked.len(), clients * 25);
    for r in &acked {
        let stored = client
            .receipt(&id("g1"), &r.actor, &r.action)
            .expect("an acknowledged receipt is there");
        assert_eq!(&stored, r);
    }
    sigkill(&mut server);
    assert_eq!(replay_seqs(dir.path()).len(), 1 + clients * 25);
    let (code, report) = fsck_code(dir.path());
    assert_eq!(code, Some(0), "{report}");
}

/// An owner record is exactly what a writer writes, read no further than 4 KiB, as the
/// Node/Deno store reads it: a live process's record with anything after it, or a file past
/// 4 KiB, is not a record, so it is refused as half-written while young and taken over once
/// old, never honoured as a holder nor read whole.
#[test]
fn an_owner_record_with_more_after_it_or_past_4_kib_is_not_a_record() {
    let mut holder = Command::new("sleep").arg("600").spawn().expect("sleep");
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", holder.id())).expect("stat");
    let start = stat[stat.rfind(')').expect("comm ends") + 1..]
        .split_whitespace()
        .nth(19)
        .and_then(|t| t.parse().ok());
    let record = Owner {
        pid: holder.id(),
        start,
    }
    .encode();
    assert_eq!(
        Owner::decode(&record).map(|o| o.pid),
        Some(holder.id()),
        "the record alone is one"
    );
    let long = format!("{record}{}", " ".repeat(8 << 20));
    for text in [format!("{record}more\n"), long] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(OWNER_NAME);
        std::fs::write(&path, &text).expect("writes");
        let e = FileStore::open(dir.path(), StoreOptions::default()).expect_err("young: refused");
        assert_eq!(e.code, Code::Storage, "{e}");
        assert!(!e.details.contains_key("pid"), "no holder named: {e}");
        let old = SystemTime::now() - Duration::from_secs(60);
        File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(old))
            .expect("ages the record");
        let store = open_writer(dir.path()).expect("old and not a record: taken over");
        let now = std::fs::read_to_string(&path).expect("record");
        assert_eq!(Owner::decode(&now), Some(Owner::me()));
        drop(store);
    }
    holder.kill().expect("kills");
    holder.wait().expect("reaped");
}

/// What sits where an owner record belongs but is not a regular file (a directory, a FIFO)
/// is never a record: opened without blocking (a FIFO never stalls the opener), never moved
/// aside nor removed however old, and the lock refused with `STORAGE` naming it, as the
/// Node/Deno store refuses it.
#[test]
fn an_owner_record_that_is_not_a_regular_file_is_refused_and_left_alone() {
    for kind in ["directory", "FIFO"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(OWNER_NAME);
        if kind == "directory" {
            std::fs::create_dir(&path).expect("mkdir");
        } else {
            let made = Command::new("mkfifo").arg(&path).status().expect("mkfifo");
            assert!(made.success());
        }
        let old = filetime_old(&path);
        let e = FileStore::open(dir.path(), StoreOptions::default()).expect_err("refused");
        assert_eq!(e.code, Code::Storage, "{e}");
        assert_eq!(
            e.message,
            format!(
                "{} is not an owner record: it is a {kind}, not a regular file; remove it",
                path.display()
            )
        );
        assert_eq!(
            e.details.get("dir"),
            Some(&serde_json::json!(dir.path().display().to_string()))
        );
        assert!(old, "{kind} aged");
        let meta = std::fs::symlink_metadata(&path).expect("still there");
        assert!(!meta.is_file(), "{kind} left in place");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("stale"))
            .collect();
        assert!(names.is_empty(), "nothing moved aside: {names:?}");
    }
}

/// Sets the mtime of `path` a minute back (past any writer's grace); whether it did.
fn filetime_old(path: &Path) -> bool {
    let old = SystemTime::now() - Duration::from_secs(60);
    Command::new("touch")
        .arg("-d")
        .arg(format!(
            "@{}",
            old.duration_since(SystemTime::UNIX_EPOCH)
                .expect("after the epoch")
                .as_secs()
        ))
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}
