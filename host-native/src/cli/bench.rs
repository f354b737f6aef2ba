//! `mwp bench`: accepted commands per second over HTTP with many concurrent clients.
//!
//! One group, one owner and `--clients` workers; each client thread posts its share of
//! pre-signed `create_work` commands one after another over a kept-alive connection. The
//! figure is accepted commands divided by wall time, with latency percentiles. Without
//! `--server` it starts an in-process server on a free loopback port.
//!
//! With `--tail` a live tail on the bench group stays open during the run, so the server signs
//! heads (SPEC §8a) as a reader asks for them; the figures then count the heads the server
//! signed (`mwp_heads_signed_total`) and the `event: head` messages the tail received. With
//! `--server-pid PID` (Linux) they also give the server's CPU time per accepted command, from
//! `/proc/PID/stat`, so runs with and without a tail compare the server's cost.

use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use clap::Args;
use mwp_core::command::{Contract, CreateWork, MemberSpec, OpenGroup, Risk, Role};
use mwp_core::{Body, Command, Id, SecretKey};
use serde_json::json;

use super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE};
use crate::memory_service::MemoryService;
use crate::server::client::Client;
use crate::server::{now_ms, Server, ServerConfig};

/// `mwp bench` arguments.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Concurrent clients.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Commands in all.
    #[arg(long, default_value_t = 20_000)]
    pub commands: usize,
    /// Send commands as CBOR instead of JSON.
    #[arg(long)]
    pub cbor: bool,
    /// Measure a running server (e.g. http://127.0.0.1:7878) instead of an in-process one.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// Keep a live tail of the bench group open during the run (the server signs heads for
    /// it) and count the heads signed and received.
    #[arg(long)]
    pub tail: bool,
    /// The process id of the `--server` (Linux): report its CPU time per accepted command.
    #[arg(long, value_name = "PID", requires = "server")]
    pub server_pid: Option<u32>,
}

fn id(s: &str) -> Result<Id, Failure> {
    Id::new(s).map_err(|e| Failure::new(EXIT_BAD_INPUT, e.to_string()))
}

fn key(name: &str) -> SecretKey {
    SecretKey::for_transcript(&format!("bench {name}"))
}

/// The measured figures.
#[derive(Debug, serde::Serialize)]
pub struct Figures {
    /// Concurrent clients.
    pub clients: usize,
    /// Commands accepted.
    pub accepted: usize,
    /// Commands rejected (should be 0).
    pub rejected: usize,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Accepted commands per second.
    pub accepts_per_sec: f64,
    /// Median latency, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile latency, milliseconds.
    pub p99_ms: f64,
    /// Encoding used.
    pub encoding: &'static str,
    /// Whether a live tail was open during the run.
    pub tail: bool,
    /// Heads the server signed during the run (`mwp_heads_signed_total`), when it says.
    pub heads_signed: Option<u64>,
    /// `event: head` messages the tail received by the end of the run.
    pub heads_received: Option<u64>,
    /// Events the tail received by the end of the run.
    pub events_received: Option<u64>,
    /// Server CPU time (user + system) per accepted command, microseconds (`--server-pid`).
    pub server_cpu_us_per_accept: Option<f64>,
}

/// `mwp_heads_signed_total` of the server, if its metrics say.
fn heads_signed(client: &Client) -> Option<u64> {
    let text = client.fetch("/metrics", "text/plain").ok()?;
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|l| l.strip_prefix("mwp_heads_signed_total "))
        .and_then(|n| n.trim().parse().ok())
}

/// CPU time (user + system) of process `pid` in seconds, from `/proc/PID/stat` (clock ticks of
/// 1/100 s); `None` off Linux or for a gone process.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let mut fields = rest.split(' ').skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some((user + system) as f64 / 100.0)
}

/// What a bench tail counted: events and heads received.
#[derive(Default)]
struct TailCounts {
    events: AtomicU64,
    heads: AtomicU64,
}

/// Follows the live tail of `group` on a thread, counting what arrives; the thread ends with
/// the stream (the process, or the in-process server's shutdown, ends it).
fn follow(client: &Client, group: &Id) -> Result<Arc<TailCounts>, Failure> {
    let body = client
        .stream(group, 0, None)
        .map_err(|e| Failure::new(EXIT_UNAVAILABLE, format!("opening the live tail: {e}")))?;
    let counts = Arc::new(TailCounts::default());
    let seen = Arc::clone(&counts);
    std::thread::spawn(move || {
        let mut head = false;
        for line in std::io::BufReader::new(body).lines() {
            let Ok(line) = line else { return };
            if line == "event: head" {
                head = true;
            } else if line.starts_with("data:") {
                let n = if head { &seen.heads } else { &seen.events };
                n.fetch_add(1, Ordering::Relaxed);
                head = false;
            }
        }
    });
    Ok(counts)
}

/// Opens a group, then posts `commands` pre-signed commands from `clients` threads.
pub fn measure(
    base: &str,
    clients: usize,
    commands: usize,
    cbor: bool,
    tail: bool,
    server_pid: Option<u32>,
) -> Result<Figures, Failure> {
    if clients == 0 || commands < clients {
        return Err(Failure::new(
            EXIT_BAD_INPUT,
            "need at least one client and one command per client",
        ));
    }
    let client = Client::new(base);
    let fail = |what: &str| {
        let what = what.to_owned();
        move |e: mwp_core::Error| Failure::new(EXIT_UNAVAILABLE, format!("{what}: {e}"))
    };
    let authority = client
        .authority_key()
        .map_err(fail("reading the authority key"))?;
    let (org, group) = (id("bench")?, id(&format!("bench-{}", now_ms()))?);
    let mut members = vec![MemberSpec {
        actor: id("owner")?,
        role: Role::Owner,
        key: key("owner").public(),
    }];
    for c in 0..clients {
        let name = format!("c{c}");
        members.push(MemberSpec {
            actor: id(&name)?,
            role: Role::Worker,
            key: key(&name).public(),
        });
    }
    let open = Body::OpenGroup(OpenGroup {
        mission: id("bench")?,
        title: json!("bench"),
        members,
        authority_key: authority,
    });
    let open = Command::signed(
        org.clone(),
        group.clone(),
        id("owner")?,
        id("open")?,
        1,
        None,
        open,
        &key("owner"),
    )
    .map_err(fail("signing"))?;
    client
        .submit(&open)
        .map_err(fail("opening the bench group"))?;

    // Pre-sign everything so the clock measures the server, not the signing.
    let per_client = commands / clients;
    let contract = Contract {
        max_attempts: 1,
        backoff_base_ms: 0,
        backoff_max_ms: 0,
        cost_budget: 0,
        deadline_at: None,
        risk: Risk::Low,
    };
    let mut batches = Vec::with_capacity(clients);
    for c in 0..clients {
        let name = format!("c{c}");
        let k = key(&name);
        let mut batch = Vec::with_capacity(per_client);
        for n in 0..per_client {
            let body = Body::CreateWork(CreateWork {
                work: id(&format!("w{c}-{n}"))?,
                contract: contract.clone(),
                after: vec![],
                spec: json!({"n": n}),
            });
            let cmd = Command::signed(
                org.clone(),
                group.clone(),
                id(&name)?,
                id(&format!("a{n}"))?,
                1,
                None,
                body,
                &k,
            )
            .map_err(fail("signing"))?;
            let bytes = if cbor {
                cmd.to_cbor().map_err(fail("encoding"))?
            } else {
                serde_json::to_vec(&cmd).map_err(|e| Failure::new(EXIT_FAILED, e.to_string()))?
            };
            batch.push(bytes);
        }
        batches.push(batch);
    }
    let content_type = if cbor {
        "application/cbor"
    } else {
        "application/json"
    };
    let barrier = Arc::new(Barrier::new(clients + 1));
    let threads: Vec<_> = batches
        .into_iter()
        .map(|batch| {
            let (client, barrier, group) = (Client::new(base), Arc::clone(&barrier), group.clone());
            std::thread::spawn(move || {
                let mut latencies = Vec::with_capacity(batch.len());
                let mut rejected = 0usize;
                barrier.wait();
                for bytes in batch {
                    let t = Instant::now();
                    if client.submit_bytes(&group, &bytes, content_type).is_err() {
                        rejected += 1;
                    }
                    latencies.push(t.elapsed());
                }
                (latencies, rejected)
            })
        })
        .collect();
    let counts = if tail {
        Some(follow(&client, &group)?)
    } else {
        None
    };
    let signed_before = heads_signed(&client);
    let cpu_before = server_pid.and_then(cpu_seconds);
    barrier.wait();
    let start = Instant::now();
    let mut latencies: Vec<Duration> = Vec::with_capacity(commands);
    let mut rejected = 0;
    for t in threads {
        let (l, r) = t
            .join()
            .map_err(|_| Failure::new(EXIT_FAILED, "a client thread panicked"))?;
        latencies.extend(l);
        rejected += r;
    }
    let seconds = start.elapsed().as_secs_f64();
    if tail {
        // The tail's last head comes once it is idle, within 100 ms.
        std::thread::sleep(Duration::from_millis(300));
    }
    let cpu_after = server_pid.and_then(cpu_seconds);
    let signed_after = heads_signed(&client);
    latencies.sort();
    let pct = |p: f64| {
        let i = ((latencies.len() as f64 - 1.0) * p).round() as usize;
        latencies.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    let accepted = latencies.len() - rejected;
    let server_cpu_us_per_accept = match (cpu_before, cpu_after) {
        (Some(a), Some(b)) if accepted > 0 => Some((b - a) * 1e6 / accepted as f64),
        _ => None,
    };
    Ok(Figures {
        clients,
        accepted,
        rejected,
        seconds,
        accepts_per_sec: accepted as f64 / seconds,
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
        encoding: if cbor { "cbor" } else { "json" },
        tail,
        heads_signed: signed_before
            .zip(signed_after)
            .map(|(a, b)| b.saturating_sub(a)),
        heads_received: counts.as_ref().map(|c| c.heads.load(Ordering::Relaxed)),
        events_received: counts.as_ref().map(|c| c.events.load(Ordering::Relaxed)),
        server_cpu_us_per_accept,
    })
}

/// Runs `mwp bench`.
pub fn run(args: BenchArgs) -> Outcome {
    let figures = match &args.server {
        Some(url) => measure(
            url,
            args.clients,
            args.commands,
            args.cbor,
            args.tail,
            args.server_pid,
        )?,
        None => {
            let rt = super::runtime()?;
            let service = Arc::new(
                MemoryService::generate()
                    .map_err(|e| Failure::from_error("cannot create a key", &e))?,
            );
            let addr = "127.0.0.1:0".parse().expect("a literal socket address");
            let server = rt
                .block_on(Server::bind(service, addr, ServerConfig::default()))
                .map_err(|e| Failure::new(EXIT_UNAVAILABLE, format!("cannot listen: {e}")))?;
            let base = format!("http://{}", server.addr());
            let figures = measure(
                &base,
                args.clients,
                args.commands,
                args.cbor,
                args.tail,
                None,
            );
            rt.block_on(server.shutdown());
            figures?
        }
    };
    println!("{}", serde_json::to_string(&figures).unwrap_or_default());
    Ok(if figures.rejected == 0 {
        EXIT_OK
    } else {
        EXIT_FAILED
    })
}
