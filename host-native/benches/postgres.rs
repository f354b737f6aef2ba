//! Durable accepts per second on PostgreSQL: 1 client, 64 clients on 64 groups, and 64
//! clients on one group (their commands decided in batches under the group lock), beside a
//! bare INSERT + COMMIT per transaction on the same server (the fsync-bound ceiling). Each
//! accept is committed (`synchronous_commit = on`) before it is counted. Then the read of a
//! group's stored snapshot (`latest_snapshot`, checked on every read) beside a bare SELECT
//! of the same row's bytes (what the read cost before it was checked).
//!
//! Needs `MWP_TEST_POSTGRES` (source scripts/setup-postgres.sh); docs/bench-postgres.md has
//! the command and the figures.
// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mwp_core::{Command, Decision, Limits, SecretKey};
use mwp_host::postgres::{KeySource, PostgresAuthority, PostgresConfig};
use mwp_host::service::AuthorityService;
use serde_json::json;

const CLIENTS: usize = 64;

fn key_of(actor: &str) -> String {
    SecretKey::for_transcript(actor).public().to_hex()
}

fn command(group: &str, actor: &str, action: &str, body: serde_json::Value) -> Command {
    let envelope = json!({"org": "acme", "group": group, "actor": actor, "action": action,
                          "session": 1, "body": body, "sig": "00".repeat(64)});
    let bytes = serde_json::to_vec(&envelope).expect("json");
    let mut cmd = Command::from_json(&bytes, &Limits::default()).expect("valid command");
    cmd.sign(&SecretKey::for_transcript(actor)).expect("sign");
    cmd
}

fn open(group: &str) -> Command {
    command(
        group,
        "alice",
        "open",
        json!({"type": "open_group", "mission": "m", "title": "bench",
        "members": [{"actor": "alice", "role": "owner", "key": key_of("alice")}],
        "authority_key": key_of("@authority")}),
    )
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A fresh `create_work` for `group`: one accepted event each.
fn create(group: &str) -> Command {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    command(
        group,
        "alice",
        &format!("a{n}"),
        json!({"type": "create_work", "work": format!("w{n}"),
        "after": [], "spec": {"n": n}, "contract": {"max_attempts": 1, "backoff_base_ms": 1,
        "backoff_max_ms": 1, "cost_budget": 1, "risk": "low"}}),
    )
}

fn store(server: &str, schema: &str) -> PostgresAuthority {
    let mut admin = postgres::Client::connect(server, postgres::NoTls).expect("connect");
    admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .expect("drop schema");
    let sep = if server.contains('?') { '&' } else { '?' };
    let url = format!("{server}{sep}schema={schema}&pool_size={CLIENTS}&snapshot_every=0");
    let mut config = PostgresConfig::from_url(&url).expect("config");
    config.key = KeySource::Given(Box::new(SecretKey::for_transcript("@authority")));
    PostgresAuthority::open(config).expect("open the store")
}

fn accepted(store: &PostgresAuthority, cmd: &Command) {
    match store.submit(cmd, 1000).expect("submit") {
        Decision::Accepted(_) => {}
        Decision::Duplicate(_) => panic!("a fresh command was a duplicate"),
        Decision::Rejected(r) => panic!("rejected: {r}"),
    }
}

/// `clients` threads, each sending `per_client` commands to its group (all the same group
/// when `groups` has one entry); returns the wall time.
fn run(store: &PostgresAuthority, groups: &[String], clients: usize, per_client: u64) -> Duration {
    let batches: Vec<Vec<Command>> = (0..clients)
        .map(|c| {
            (0..per_client)
                .map(|_| create(&groups[c % groups.len()]))
                .collect()
        })
        .collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        for batch in &batches {
            s.spawn(move || batch.iter().for_each(|cmd| accepted(store, cmd)));
        }
    });
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let Ok(server) = std::env::var("MWP_TEST_POSTGRES") else {
        eprintln!("MWP_TEST_POSTGRES is not set: source scripts/setup-postgres.sh first; no PostgreSQL benchmark ran");
        return;
    };
    let store = store(&server, "mwp_bench");
    let solo = vec!["solo".to_owned()];
    let own: Vec<String> = (0..CLIENTS).map(|i| format!("g{i}")).collect();
    let shared = vec!["shared".to_owned()];
    for g in solo.iter().chain(&own).chain(&shared) {
        accepted(&store, &open(g));
    }

    let mut group = c.benchmark_group("postgres_accept");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8))
        .warm_up_time(Duration::from_secs(2));
    group.throughput(Throughput::Elements(1));
    group.bench_function("1_client", |b| {
        b.iter_custom(|iters| run(&store, &solo, 1, iters));
    });
    // The baseline a user would otherwise pick: one bare INSERT + COMMIT per accept on the
    // same server, i.e. the fsync-bound ceiling with none of mwp's work.
    let mut raw = postgres::Client::connect(&server, postgres::NoTls).expect("connect");
    raw.batch_execute("CREATE TABLE IF NOT EXISTS mwp_bench.raw_commit (n bigint, bytes bytea)")
        .expect("baseline table");
    let row = vec![0u8; 600];
    group.bench_function("baseline_bare_insert_commit_1_client", |b| {
        b.iter(|| {
            let mut tx = raw.transaction().expect("begin");
            tx.execute("INSERT INTO mwp_bench.raw_commit VALUES (1, $1)", &[&row])
                .expect("insert");
            tx.commit().expect("commit");
        });
    });
    group.throughput(Throughput::Elements(CLIENTS as u64));
    group.bench_function("64_clients_64_groups", |b| {
        b.iter_custom(|iters| run(&store, &own, CLIENTS, iters));
    });
    group.bench_function("64_clients_1_group", |b| {
        b.iter_custom(|iters| run(&store, &shared, CLIENTS, iters));
    });
    group.finish();

    // A group of SNAPSHOT_EVENTS events and its snapshot at the head.
    let snap = vec!["snap".to_owned()];
    accepted(&store, &open(&snap[0]));
    run(&store, &snap, CLIENTS, SNAPSHOT_EVENTS / CLIENTS as u64);
    let g = mwp_core::Id::new("snap").expect("id");
    let bytes = store.take_snapshot(&g).expect("a snapshot");
    let mut group = c.benchmark_group("postgres_snapshot_read");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8))
        .warm_up_time(Duration::from_secs(2));
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("checked_latest_snapshot", |b| {
        b.iter(|| store.latest_snapshot(&g).expect("served"));
    });
    group.bench_function("baseline_bare_select", |b| {
        b.iter(|| {
            let row = raw
                .query_one(
                    "SELECT bytes FROM mwp_bench.mwp_snapshots WHERE group_id = 'snap'
                     ORDER BY seq DESC LIMIT 1",
                    &[],
                )
                .expect("the row");
            row.get::<_, Vec<u8>>(0)
        });
    });
    group.finish();
}

/// Events of the group whose stored snapshot is read.
const SNAPSHOT_EVENTS: u64 = 20_000;

criterion_group!(benches, bench);
criterion_main!(benches);
