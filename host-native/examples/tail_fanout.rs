//! Measures the CPU cost of a commit with no live tails and with many idle live tails on
//! *other* groups, in one run (docs/bench-http.md).
//!
//! ```text
//! cargo run --release -p mwp-host --example tail_fanout [COMMITS] [TAILS]
//! ```
//!
//! A memory-backed `mwp serve` runs in this process; one client submits `COMMITS`
//! (default 2,000) `create_work` commands to a fresh group, three times: with no tails,
//! with `TAILS` (default 1,000) SSE tails open on 20 other groups, and with no tails again
//! after they closed. The process CPU time
//! (user + system, from `/proc/self/stat`) per commit is printed for both rounds. Commits
//! wake only their own group's tails, so the two figures should match within noise.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mwp_core::command::{Contract, CreateWork, MemberSpec, OpenGroup, Risk, Role};
use mwp_core::{Body, Command, Id, PublicKey, SecretKey};
use mwp_host::memory_service::MemoryService;
use mwp_host::server::client::Client;
use mwp_host::server::{Server, ServerConfig};
use serde_json::json;

/// Groups the idle tails are spread over.
const TAIL_GROUPS: usize = 20;

fn id(s: &str) -> Id {
    Id::new(s).expect("id")
}

fn signed(group: &str, action: &str, body: Body) -> Command {
    Command::signed(
        id("acme"),
        id(group),
        id("alice"),
        id(action),
        1,
        None,
        body,
        &SecretKey::for_transcript("alice"),
    )
    .expect("signs")
}

fn open(group: &str, authority: PublicKey) -> Command {
    let body = Body::OpenGroup(OpenGroup {
        mission: id("m1"),
        title: json!("tail fan-out").into(),
        members: vec![MemberSpec {
            actor: id("alice"),
            role: Role::Owner,
            key: SecretKey::for_transcript("alice").public(),
        }],
        authority_key: authority,
    });
    signed(group, "open", body)
}

fn create(group: &str, n: usize) -> Command {
    let body = Body::CreateWork(CreateWork {
        work: id(&format!("w{n}")),
        contract: Contract {
            max_attempts: 3,
            backoff_base_ms: 10,
            backoff_max_ms: 100,
            cost_budget: 10,
            deadline_at: None,
            risk: Risk::Low,
        },
        after: vec![],
        spec: json!({ "n": n }).into(),
    });
    signed(group, &format!("create-{n}"), body)
}

/// Process CPU time (user + system), from `/proc/self/stat` in clock ticks of 1/100 s.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat (Linux)");
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<u64> = rest
        .split(' ')
        .skip(11)
        .take(2)
        .map(|f| f.parse().expect("a number"))
        .collect();
    Duration::from_millis((fields[0] + fields[1]) * 10)
}

/// Opens `group` and submits `count` commits to it; returns (CPU per commit, wall time).
/// Each round has a fresh group, so no round pays for a larger group than another.
fn round(client: &Client, group: &str, count: usize) -> (Duration, Duration) {
    let authority = client.authority_key().expect("key");
    client.submit(&open(group, authority)).expect("opens");
    let (cpu0, wall0) = (cpu(), Instant::now());
    for n in 0..count {
        client.submit(&create(group, n)).expect("accepted");
    }
    let per = (cpu() - cpu0) / u32::try_from(count).expect("count");
    (per, wall0.elapsed())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let commits: usize = args.next().map_or(2000, |a| a.parse().expect("COMMITS"));
    let tails: usize = args.next().map_or(1000, |a| a.parse().expect("TAILS"));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let service = Arc::new(MemoryService::generate().expect("key"));
    let config = ServerConfig {
        max_tails: tails + 1,
        max_tails_per_group: tails.div_ceil(TAIL_GROUPS) + 1,
        max_connections: tails + 64,
        ..Default::default()
    };
    let server = rt
        .block_on(Server::bind(
            service,
            "127.0.0.1:0".parse().expect("addr"),
            config,
        ))
        .expect("binds");
    let addr = server.addr();
    let client = Client::new(format!("http://{addr}"));
    let authority = client.authority_key().expect("key");
    for g in 0..TAIL_GROUPS {
        client
            .submit(&open(&format!("idle{g}"), authority))
            .expect("opens");
    }
    // Warm up, then measure with no tails.
    round(&client, "warm", commits / 10 + 1);
    let (quiet, quiet_wall) = round(&client, "quiet", commits);
    // Open the idle tails on the other groups and wait until the server holds them all.
    let mut streams = Vec::with_capacity(tails);
    for t in 0..tails {
        let mut s = TcpStream::connect(addr).expect("connects");
        let req = format!(
            "GET /v1/groups/idle{}/events/stream HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n",
            t % TAIL_GROUPS
        );
        s.write_all(req.as_bytes()).expect("writes");
        let mut first = [0u8; 12];
        s.read_exact(&mut first).expect("answers");
        assert_eq!(&first, b"HTTP/1.1 200", "tail {t} is admitted");
        streams.push(s);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.live_tails() < tails {
        assert!(Instant::now() < deadline, "the tails did not all start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (busy, busy_wall) = round(&client, "busy", commits);
    // Close the tails, wait until the server has let them go (it notices at the next
    // keep-alive write, within 15 s), and measure with no tails again.
    drop(streams);
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.live_tails() > 0 {
        assert!(Instant::now() < deadline, "the tails did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (after, after_wall) = round(&client, "after", commits);
    println!("commits per round: {commits}; idle tails on other groups: {tails}");
    let line = |what: &str, cpu: Duration, wall: Duration| {
        println!(
            "{what:<24} {:>7.1} µs CPU per commit ({:.2} s wall)",
            cpu.as_secs_f64() * 1e6,
            wall.as_secs_f64()
        );
    };
    line("0 tails", quiet, quiet_wall);
    line(&format!("{tails} idle tails"), busy, busy_wall);
    line("0 tails (tails closed)", after, after_wall);
    rt.block_on(server.shutdown());
}
