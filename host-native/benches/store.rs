//! File store benchmarks (docs/bench-store.md has the figures and how to read them).
//!
//! * `durable_accepts/{file,file_async,sqlite}/{1,8,64}`: commands accepted durably per second
//!   with 1, 8 and 64 concurrent submitters, through the file store (`file`: a thread per
//!   submitter; `file_async`: a task per submitter on two runtime workers, awaiting
//!   `submit_staged` as `mwp serve` does) and through a SQLite baseline (rusqlite, WAL,
//!   `synchronous=FULL`, one transaction per command holding an event row and a receipt row)
//!   deciding the same pre-signed commands with the same core.
//! * `cold_open_1m/{snapshot_and_tail,full_log}`: opening a 1,000,000-event Group in a fresh
//!   process, from the latest snapshot plus a 1,000-event tail and from the full log; each
//!   child process reports its own open time and peak RSS (VmHWM), printed to stderr. Run as
//!   a child by hand (`MWP_BENCH_COLD_OPEN=<dir>`, `MWP_BENCH_NO_SNAPSHOT=1` for the full log,
//!   `MWP_BENCH_STATE_HASH=1` to print the restored state's hash last) it prints open time in
//!   ns, head, VmHWM in KiB, CPU ms and the hash. After the Criterion samples, pairs of opens
//!   (snapshot, then full log; `MWP_BENCH_COLD_OPEN_PAIRS`, default 5) give one JSON line:
//!   median wall and CPU seconds of each, the median of the pairs' snapshot/full-log ratios
//!   (the goal is at most 0.30) and the peak RSS of each (the goal is at most 400 MiB).
//!
//! Run: `cargo bench -p mwp-host --bench store`. The 1M-event data set is built once under
//! `target/mwp-bench-1m` (about a minute). `MWP_BENCH_QUICK=1` skips the cold opens.
//! `MWP_BENCH_GROUPS=N` spreads `durable_accepts` over N groups (default 1): submitter `s`
//! sends its `i`-th command to group `(s + i × submitters) mod N`, so that with more groups
//! than submitters every group gets commands.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use mwp_core::accept::accept_preverified;
use mwp_core::command::{
    Body, ClaimWork, Contract, CreateWork, MemberSpec, OpenGroup, Risk, Role, StartWork, Submit,
};
use mwp_core::lease::LeaseId;
use mwp_core::snapshot::Snapshot;
use mwp_core::{accept, Command, Decision, GroupState, Id, Limits, SecretKey};
use mwp_host::service::AuthorityService;
use mwp_host::store::format::{self, encode_record, segment_name, FileHeader, SEGMENT_MAGIC};
use mwp_host::store::{FileStore, StoreOptions};

fn id(s: &str) -> Id {
    Id::new(s).expect("bench ids are valid")
}

fn authority() -> SecretKey {
    SecretKey::for_transcript("@authority")
}

fn contract() -> Contract {
    Contract {
        max_attempts: 3,
        backoff_base_ms: 100,
        backoff_max_ms: 1000,
        cost_budget: 10,
        deadline_at: None,
        risk: Risk::Low,
    }
}

const MEMBERS: usize = 64;

fn actor(i: usize) -> String {
    format!("a{i}")
}

/// Groups `durable_accepts` spreads its commands over (`MWP_BENCH_GROUPS`, default 1).
fn bench_groups() -> usize {
    std::env::var("MWP_BENCH_GROUPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

/// Name of bench group `g` (counting from 0): `g1` is the one the single-group runs use.
fn group_id(g: usize) -> Id {
    id(&format!("g{}", g + 1))
}

fn open_cmd() -> Command {
    open_group_cmd(0)
}

/// The open_group command of bench group `g`.
fn open_group_cmd(g: usize) -> Command {
    let mut members: Vec<MemberSpec> = (0..MEMBERS)
        .map(|i| MemberSpec {
            actor: id(&actor(i)),
            role: Role::Owner,
            key: SecretKey::for_transcript(&actor(i)).public(),
        })
        .collect();
    members.push(MemberSpec {
        actor: id("bob"),
        role: Role::Worker,
        key: SecretKey::for_transcript("bob").public(),
    });
    Command::signed(
        id("acme"),
        group_id(g),
        id(&actor(0)),
        id("open"),
        1,
        None,
        Body::OpenGroup(OpenGroup {
            mission: id("m1"),
            title: serde_json::json!("bench").into(),
            members,
            authority_key: authority().public(),
        }),
        &SecretKey::for_transcript(&actor(0)),
    )
    .expect("signs")
}

/// `n` pre-signed create_work commands, from submitter `who` of `submitters`, unique per
/// `round`, spread over `groups` groups.
fn commands(
    who: usize,
    submitters: usize,
    groups: usize,
    round: u64,
    n: usize,
    keys: &[SecretKey],
) -> Vec<Command> {
    (0..n)
        .map(|i| {
            let name = format!("r{round}-s{who}-{i}");
            Command::signed(
                id("acme"),
                group_id((who + i * submitters) % groups),
                id(&actor(who)),
                id(&name),
                1,
                None,
                Body::CreateWork(CreateWork {
                    work: id(&name),
                    contract: contract(),
                    after: vec![],
                    spec: serde_json::json!({"task": "build", "n": i}).into(),
                }),
                &keys[who],
            )
            .expect("signs")
        })
        .collect()
}

/// The SQLite baseline: the same core decides; each accepted command is one transaction
/// with an event row and a receipt row, committed with `synchronous=FULL` in WAL mode.
struct Sqlite {
    inner: Mutex<(BTreeMap<Id, GroupState>, rusqlite::Connection)>,
}

impl Sqlite {
    fn open(path: &Path) -> Sqlite {
        let conn = rusqlite::Connection::open(path).expect("sqlite opens");
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
             CREATE TABLE events (grp TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL, PRIMARY KEY (grp, seq));
             CREATE TABLE receipts (grp TEXT NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL, PRIMARY KEY (grp, actor, action));",
        )
        .expect("schema");
        Sqlite {
            inner: Mutex::new((BTreeMap::new(), conn)),
        }
    }

    fn submit(&self, cmd: &Command, now_ms: u64) -> mwp_core::Result<Decision> {
        // Same parallel signature check as the file store.
        let key = {
            let g = self.inner.lock().expect("no panics");
            g.0.get(&cmd.group)
                .and_then(|s| s.members.get(&cmd.actor).map(|m| m.key))
        };
        let verified = key.filter(|k| cmd.verify(k).unwrap_or(false));
        let mut g = self.inner.lock().expect("no panics");
        let (states, conn) = &mut *g;
        let state = states.get(&cmd.group);
        let d = match &verified {
            Some(k) => accept_preverified(state, cmd, now_ms, &Limits::default(), k)?,
            None => accept(state, cmd, now_ms, &Limits::default())?,
        };
        if let Decision::Accepted(e) = &d {
            let bytes = e.to_cbor()?;
            let receipt = serde_json::to_vec(&e.receipt()).expect("receipts encode");
            let tx = conn.transaction().expect("begin");
            tx.execute(
                "INSERT INTO events (grp, seq, body) VALUES (?1, ?2, ?3)",
                rusqlite::params![e.group.as_str(), e.seq as i64, bytes],
            )
            .expect("insert event");
            tx.execute(
                "INSERT INTO receipts (grp, actor, action, seq, body) VALUES (?1, ?2, ?3, ?4, ?5)",
                rusqlite::params![
                    e.group.as_str(),
                    e.actor.as_str(),
                    e.action.as_str(),
                    e.seq as i64,
                    receipt
                ],
            )
            .expect("insert receipt");
            tx.commit().expect("commit");
            let mut state = states.remove(&cmd.group);
            GroupState::apply_to(&mut state, e)?;
            if let Some(s) = state {
                states.insert(cmd.group.clone(), s);
            }
        }
        Ok(d)
    }
}

fn bench_dir(name: &str) -> PathBuf {
    // Cargo runs benches in the package's directory; a relative CARGO_TARGET_DIR means the
    // workspace's, where `cargo bench` is run from.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let base = match std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        Some(dir) => root.join(dir),
        None => root.join("target"),
    };
    let dir = base.join(name);
    std::fs::create_dir_all(&dir).expect("bench directory can be created");
    dir
}

fn durable_accepts(c: &mut Criterion) {
    let keys: Vec<SecretKey> = (0..MEMBERS)
        .map(|i| SecretKey::for_transcript(&actor(i)))
        .collect();
    let groups = bench_groups();
    let name = if groups == 1 {
        "durable_accepts".to_string()
    } else {
        format!("durable_accepts_{groups}_groups")
    };
    let mut group = c.benchmark_group(name);
    // Per configuration: its name, process CPU µs per accept, accepts/s.
    let mut cpu_us: Vec<(String, f64, f64)> = Vec::new();
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(1));
    // The tasks of `file_async` run on a runtime of two workers, as `mwp serve`'s.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("a runtime");
    for submitters in [1usize, 8, 64] {
        for kind in ["file", "file_async", "sqlite"] {
            let tmp = tempfile::tempdir_in(bench_dir("")).expect("tempdir");
            let file = (kind != "sqlite").then(|| {
                let opts = StoreOptions {
                    authority_key: Some(authority()),
                    ..StoreOptions::default()
                };
                let s = FileStore::open(tmp.path(), opts).expect("opens");
                for g in 0..groups {
                    s.submit(&open_group_cmd(g), 1000).expect("opens group");
                }
                std::sync::Arc::new(s)
            });
            let sqlite = (kind == "sqlite").then(|| {
                let s = Sqlite::open(&tmp.path().join("bench.db"));
                for g in 0..groups {
                    s.submit(&open_group_cmd(g), 1000).expect("opens group");
                }
                s
            });
            let mut round = 0u64;
            let (mut cpu_spent, mut wall_spent, mut commands_done) = (0.0f64, 0.0f64, 0usize);
            group.bench_function(BenchmarkId::new(kind, submitters), |b| {
                b.iter_custom(|iters| {
                    round += 1;
                    let per = (iters as usize).div_ceil(submitters);
                    // Pre-signed outside the timed section.
                    let lists: Vec<Vec<Command>> = (0..submitters)
                        .map(|s| commands(s, submitters, groups, round, per, &keys))
                        .collect();
                    if kind == "file_async" {
                        let store = file.clone().expect("the file store is set");
                        let start = Instant::now();
                        let cpu = process_cpu_seconds();
                        rt.block_on(async {
                            let tasks: Vec<_> = lists
                                .into_iter()
                                .map(|list| {
                                    let store = std::sync::Arc::clone(&store);
                                    tokio::spawn(async move {
                                        for cmd in &list {
                                            let d = match store.submit_staged(cmd, 2000) {
                                                Some(staged) => staged.await,
                                                None => store.submit(cmd, 2000),
                                            };
                                            assert!(
                                                matches!(d, Ok(Decision::Accepted(_))),
                                                "{d:?}"
                                            );
                                        }
                                    })
                                })
                                .collect();
                            for t in tasks {
                                t.await.expect("a submitter task does not panic");
                            }
                        });
                        let elapsed = start.elapsed();
                        cpu_spent += process_cpu_seconds() - cpu;
                        wall_spent += elapsed.as_secs_f64();
                        commands_done += submitters * per;
                        return elapsed.mul_f64(iters as f64 / (submitters * per) as f64);
                    }
                    let barrier = Barrier::new(submitters + 1);
                    let elapsed = std::thread::scope(|scope| {
                        for list in &lists {
                            let (barrier, file, sqlite) = (&barrier, &file, &sqlite);
                            scope.spawn(move || {
                                barrier.wait();
                                for cmd in list {
                                    let d = match (file, sqlite) {
                                        (Some(f), _) => f.submit(cmd, 2000),
                                        (_, Some(s)) => s.submit(cmd, 2000),
                                        _ => unreachable!("one store is set"),
                                    };
                                    assert!(matches!(d, Ok(Decision::Accepted(_))), "{d:?}");
                                }
                                barrier.wait();
                            });
                        }
                        barrier.wait();
                        let start = Instant::now();
                        let cpu = process_cpu_seconds();
                        barrier.wait();
                        let elapsed = start.elapsed();
                        cpu_spent += process_cpu_seconds() - cpu;
                        wall_spent += elapsed.as_secs_f64();
                        commands_done += submitters * per;
                        elapsed
                    });
                    // Report per command: the closure ran submitters × per commands.
                    elapsed.mul_f64(iters as f64 / (submitters * per) as f64)
                })
            });
            // A configuration a filter left out has no figures (and no ratio).
            if commands_done > 0 {
                cpu_us.push((
                    format!("{kind}_{submitters}"),
                    cpu_spent * 1e6 / commands_done as f64,
                    commands_done as f64 / wall_spent.max(f64::MIN_POSITIVE),
                ));
            }
        }
    }
    group.finish();
    // Process CPU (user + system, every thread) per accepted command over the timed parts,
    // beside one strict verification timed in this run (`mwp bench`'s `verify_us`).
    // Accepts/s over the timed parts, and the file store's against SQLite's (the baseline)
    // at each submitter count; the peak RSS of the whole run.
    let floor = signature_floor(&keys[0]);
    let verify_us = floor.distinct_us;
    // Built as a JSON object, so that a run a filter left without figures still prints a
    // valid line.
    let round = |x: f64, digits: i32| {
        let scale = 10f64.powi(digits);
        serde_json::json!((x * scale).round() / scale)
    };
    let mut line = serde_json::Map::new();
    line.insert("groups".into(), groups.into());
    line.insert("verify_us".into(), round(verify_us, 2));
    line.insert("verify_repeated_us".into(), round(floor.repeated_us, 2));
    for (name, us, rate) in &cpu_us {
        line.insert(format!("{name}_per_s"), round(*rate, 0));
        line.insert(format!("{name}_cpu_us_per_accept"), round(*us, 1));
        line.insert(format!("{name}_cpu_per_verify"), round(us / verify_us, 2));
    }
    for submitters in [1usize, 8, 64] {
        let rate = |kind: &str| {
            cpu_us
                .iter()
                .find(|(name, _, _)| *name == format!("{kind}_{submitters}"))
                .map(|(_, _, rate)| *rate)
        };
        if let (Some(file), Some(sqlite)) = (rate("file"), rate("sqlite")) {
            line.insert(
                format!("file_over_sqlite_{submitters}"),
                round(file / sqlite, 2),
            );
        }
    }
    line.insert("peak_rss_kib".into(), peak_rss_kib().into());
    println!("{}", serde_json::Value::Object(line));
}

/// This process's peak RSS in KiB (`VmHWM`), or 0 where unknown.
fn peak_rss_kib() -> u64 {
    mwp_host::cli::bench::peak_rss_kib("self").unwrap_or(0)
}

/// CPU time (user + system) of this process, every thread, seconds; 0 without `/proc`.
fn process_cpu_seconds() -> f64 {
    mwp_host::cli::bench::proc_cpu_seconds("self").unwrap_or(0.0)
}

/// One strict verification of a bench command under a key decoded once, microseconds of
/// thread CPU time, each of another command and one command again and again: `mwp bench`'s
/// measure ([`mwp_host::cli::bench::verify_floor`]).
fn signature_floor(key: &SecretKey) -> mwp_host::cli::bench::VerifyFloor {
    let samples: Vec<_> = commands(
        0,
        1,
        1,
        u64::MAX,
        mwp_host::cli::bench::VERIFY_PER_ROUND,
        std::slice::from_ref(key),
    )
    .into_iter()
    .map(|cmd| (cmd, key.public()))
    .collect();
    mwp_host::cli::bench::verify_floor(&samples).expect("a bench command verifies")
}

/// Builds (once) a data directory holding one group of `events` events — work items going
/// through create, claim, start and submit — with a snapshot 1,000 events before the end.
fn build_large(dir: &Path, events: u64) {
    let done = dir.join("complete");
    if done.exists() {
        return;
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("groups/g1")).expect("mkdir");
    let key = authority();
    std::fs::write(
        dir.join("authority.key"),
        format!("{}\n", hex_of(&key.to_bytes())),
    )
    .expect("key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir.join("authority.key"),
            std::fs::Permissions::from_mode(0o600),
        )
        .expect("chmod");
    }
    let limits = Limits::default();
    let mut state: Option<GroupState> = None;
    let bob = SecretKey::for_transcript("bob").public();
    let alice = SecretKey::for_transcript(&actor(0)).public();
    let gdir = dir.join("groups/g1");
    let mut seg_first = 1u64;
    let mut seg = FileHeader {
        magic: SEGMENT_MAGIC,
        first_seq: 1,
        prev: mwp_core::Hash::ZERO,
        group: id("g1"),
    }
    .encode()
    .to_vec();
    let flush = |first: u64, bytes: &[u8]| {
        std::fs::write(gdir.join(segment_name(first)), bytes).expect("segment")
    };
    let snapshot_at = events - 1000;
    let mut i = 0u64;
    let mut step = 0u64;
    while state.as_ref().map_or(0, |s| s.seq) < events {
        let seq = state.as_ref().map_or(0, |s| s.seq);
        let now = 10_000 + seq;
        let w = format!("w{i}");
        let (cmd, signer) = if seq == 0 {
            (open_cmd(), alice)
        } else {
            let (who, body, expect) = match step {
                0 => (
                    actor(0),
                    Body::CreateWork(CreateWork {
                        work: id(&w),
                        contract: contract(),
                        after: vec![],
                        spec: serde_json::json!({"task": "build", "n": i}).into(),
                    }),
                    None,
                ),
                1 => (
                    "bob".to_owned(),
                    Body::ClaimWork(ClaimWork {
                        work: id(&w),
                        lease_ms: 60_000,
                        start_within_ms: 60_000,
                    }),
                    Some(1),
                ),
                2 => (
                    "bob".to_owned(),
                    Body::StartWork(StartWork {
                        work: id(&w),
                        lease: LeaseId::derive(&id("g1"), &id(&w), 1),
                    }),
                    None,
                ),
                _ => (
                    "bob".to_owned(),
                    Body::Submit(Submit {
                        work: id(&w),
                        lease: LeaseId::derive(&id("g1"), &id(&w), 1),
                        result: serde_json::json!({"ok": true, "n": i}).into(),
                    }),
                    None,
                ),
            };
            step = (step + 1) % 4;
            if step == 0 {
                i += 1;
            }
            let cmd = Command {
                org: id("acme"),
                group: id("g1"),
                actor: id(&who),
                action: id(&format!("x{seq}")),
                session: 1,
                expect,
                body,
                sig: mwp_core::Signature([0; 64]),
            };
            (cmd, if who == "bob" { bob } else { alice })
        };
        // The data set is built without signing: accept is told the signature was checked.
        let d = accept_preverified(state.as_ref(), &cmd, now, &limits, &signer).expect("accepted");
        let Decision::Accepted(e) = d else {
            panic!("expected an event")
        };
        let bytes = e.to_cbor().expect("encodes");
        if seg.len() as u64 >= 64 << 20 {
            flush(seg_first, &seg);
            seg_first = e.seq;
            seg = FileHeader {
                magic: SEGMENT_MAGIC,
                first_seq: e.seq,
                prev: state.as_ref().expect("state").head,
                group: id("g1"),
            }
            .encode()
            .to_vec();
        }
        encode_record(&mut seg, e.seq, e.seq, &bytes);
        GroupState::apply_to(&mut state, &e).expect("applies");
        if e.seq == snapshot_at {
            let s = state.as_ref().expect("state");
            let payload = Snapshot::build(s, &key)
                .expect("snapshot")
                .to_cbor()
                .expect("encodes");
            std::fs::write(
                gdir.join(format::snapshot_name(e.seq)),
                format::encode_snapshot_file(e.seq, &payload),
            )
            .expect("snap");
        }
    }
    flush(seg_first, &seg);
    std::fs::write(done, b"").expect("marker");
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The child side of a cold open: open, report time and peak RSS, exit.
fn cold_open_child(dir: &str, without_snapshot: bool) {
    let path = PathBuf::from(dir);
    let mut opts = StoreOptions {
        authority_key: Some(authority()),
        ..StoreOptions::default()
    };
    opts.snapshot_every = None;
    let data = if without_snapshot {
        // A copy of the directory without its snapshot file (hard links: no data copied).
        let tmp = path.with_extension("nosnap");
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(tmp.join("groups/g1")).expect("mkdir");
        std::fs::copy(path.join("authority.key"), tmp.join("authority.key")).expect("key");
        for e in std::fs::read_dir(path.join("groups/g1")).expect("list") {
            let e = e.expect("entry");
            let name = e.file_name();
            if name.to_string_lossy().ends_with(".seg") {
                std::fs::hard_link(e.path(), tmp.join("groups/g1").join(&name)).expect("link");
            }
        }
        tmp
    } else {
        path
    };
    let start = Instant::now();
    let store = FileStore::open(&data, opts).expect("cold open");
    let elapsed = start.elapsed();
    let head = store.head_seq(&id("g1")).expect("head");
    let rss_kib = peak_rss_kib();
    // CPU time of the whole process (both replay threads), in ms (clock ticks of 10 ms).
    let cpu_ms = (process_cpu_seconds() * 1000.0).round() as u64;
    // With MWP_BENCH_STATE_HASH=1, the state hash last (after the peak RSS is read): the two
    // opens must restore the same state.
    let state_hash = if std::env::var("MWP_BENCH_STATE_HASH").is_ok_and(|v| v == "1") {
        store
            .state_hash(&id("g1"))
            .expect("state hash")
            .map(|h| h.to_hex())
            .unwrap_or_default()
    } else {
        String::new()
    };
    println!(
        "{} {} {} {} {}",
        elapsed.as_nanos(),
        head,
        rss_kib,
        cpu_ms,
        state_hash
    );
}

/// One cold open in a fresh child process: (open time in ns, process CPU in ms, peak RSS in
/// KiB), after checking that it reached the head.
fn cold_open_once(dir: &Path, without_snapshot: bool) -> (u64, u64, u64) {
    let out = std::process::Command::new(std::env::current_exe().expect("exe"))
        .env("MWP_BENCH_COLD_OPEN", dir)
        .env(
            "MWP_BENCH_NO_SNAPSHOT",
            if without_snapshot { "1" } else { "" },
        )
        .output()
        .expect("child runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut f = text.split_whitespace();
    let ns: u64 = f
        .next()
        .and_then(|x| x.parse().ok())
        .expect("child reports time");
    let head: u64 = f
        .next()
        .and_then(|x| x.parse().ok())
        .expect("child reports head");
    assert_eq!(head, 1_000_000);
    let rss_kib = f.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    let cpu_ms = f.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    (ns, cpu_ms, rss_kib)
}

/// The median of `v` (0 when empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn cold_open(c: &mut Criterion) {
    if std::env::var_os("MWP_BENCH_QUICK").is_some() {
        return;
    }
    let dir = bench_dir("mwp-bench-1m");
    let t = Instant::now();
    build_large(&dir, 1_000_000);
    eprintln!(
        "1M-event data set ready in {:?} at {}",
        t.elapsed(),
        dir.display()
    );
    let mut group = c.benchmark_group("cold_open_1m");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(30));
    for (name, without) in [("snapshot_and_tail", false), ("full_log", true)] {
        let mut peak_kib = 0u64;
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (ns, cpu_ms, rss_kib) = cold_open_once(&dir, without);
                    peak_kib = peak_kib.max(rss_kib);
                    eprintln!(
                        "cold_open_1m/{name}: open {:.2} s wall, {:.2} s CPU",
                        ns as f64 / 1e9,
                        cpu_ms as f64 / 1e3
                    );
                    total += Duration::from_nanos(ns);
                }
                total
            })
        });
        eprintln!("cold_open_1m/{name}: peak RSS {} MiB", peak_kib / 1024);
    }
    group.finish();
    // The figure and its baseline in the same minutes: pairs of opens, the snapshot's and
    // the full log's one after the other (MWP_BENCH_COLD_OPEN_PAIRS, default 5). The ratio
    // is the median of the pairs' ratios, so that load changing between pairs cancels out.
    let pairs: usize = std::env::var("MWP_BENCH_COLD_OPEN_PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let (mut snap, mut full) = (Vec::new(), Vec::new());
    for _ in 0..pairs {
        snap.push(cold_open_once(&dir, false));
        full.push(cold_open_once(&dir, true));
    }
    let secs = |v: &[(u64, u64, u64)]| median(v.iter().map(|r| r.0 as f64 / 1e9).collect());
    let cpu = |v: &[(u64, u64, u64)]| median(v.iter().map(|r| r.1 as f64 / 1e3).collect());
    let rss = |v: &[(u64, u64, u64)]| v.iter().map(|r| r.2).max().unwrap_or(0);
    let ratio = |i: usize| -> Vec<f64> {
        snap.iter()
            .zip(&full)
            .map(|(s, f)| {
                let (s, f) = if i == 0 { (s.0, f.0) } else { (s.1, f.1) };
                s as f64 / (f as f64).max(1.0)
            })
            .collect()
    };
    println!(
        "{{\"cold_open_1m\":{{\"pairs\":{pairs},\"snapshot_and_tail_s\":{:.3},\"full_log_s\":{:.3},\"snapshot_over_full_log\":{:.3},\"snapshot_and_tail_cpu_s\":{:.2},\"full_log_cpu_s\":{:.2},\"snapshot_over_full_log_cpu\":{:.3},\"snapshot_and_tail_peak_rss_kib\":{},\"full_log_peak_rss_kib\":{}}}}}",
        secs(&snap),
        secs(&full),
        median(ratio(0)),
        cpu(&snap),
        cpu(&full),
        median(ratio(1)),
        rss(&snap),
        rss(&full),
    );
}

fn main() {
    if let Some(dir) = std::env::var_os("MWP_BENCH_COLD_OPEN") {
        let without = std::env::var("MWP_BENCH_NO_SNAPSHOT").is_ok_and(|v| v == "1");
        cold_open_child(&dir.to_string_lossy(), without);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    durable_accepts(&mut c);
    cold_open(&mut c);
    c.final_summary();
}
