//! `mwp bench`: accepted commands per second over HTTP with many concurrent clients.
//!
//! `--groups` groups (one by default) with the same owner and `--clients` workers; each client
//! thread posts its share of pre-signed `create_work` commands one after another over a
//! kept-alive connection, client `i` to group `i mod N` (or, with more groups than clients,
//! round-robin over groups `i`, `i + clients`, …). The figure is accepted commands divided by
//! wall time, with latency percentiles. Without `--server` it starts an in-process server on
//! a free loopback port, on the memory store or, with `--data DIR`, on the file store in DIR.
//!
//! The same run measures its signature floor: the time of one strict Ed25519 verification of
//! a bench command by the core's own path ([`Command::verify_prepared`], what the file store
//! calls per command), and the CPU time per accepted command against it.
//!
//! With `--tail` a live tail on the bench group stays open during the run, so the server signs
//! heads (SPEC §8a) as a reader asks for them; the figures then count the heads the server
//! signed (`mwp_heads_signed_total`) and the `event: head` messages the tail received. With
//! `--server-pid PID` (Linux) they also give the server's CPU time per accepted command, from
//! `/proc/PID/stat`, so runs with and without a tail compare the server's cost.

use std::io::BufRead;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use clap::Args;
use mwp_core::command::{Contract, CreateWork, MemberSpec, OpenGroup, Risk, Role};
use mwp_core::{Body, Command, Id, SecretKey};
use serde_json::json;

use super::store::{self, StoreUrl};
use super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE};
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
    /// Groups to open and spread the commands over (client `i` posts to group `i mod N`; with
    /// more groups than clients each client cycles over its share, so every group gets
    /// commands).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub groups: u64,
    /// Send commands as CBOR instead of JSON.
    #[arg(long)]
    pub cbor: bool,
    /// Measure a running server (e.g. http://127.0.0.1:7878) instead of an in-process one.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// Run the in-process server on the file store in DIR (created if missing) instead of
    /// the memory store: every receipt then follows a durable write.
    #[arg(long, value_name = "DIR", conflicts_with = "server")]
    pub data: Option<PathBuf>,
    /// Keep a live tail of the (first) bench group open during the run (the server signs
    /// heads for it) and count the heads signed and received.
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
    /// Groups the commands were spread over.
    pub groups: usize,
    /// The in-process server's store, `memory` or `file`; `None` with `--server`.
    pub store: Option<&'static str>,
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
    /// One strict Ed25519 verification of a bench command by the core's path, each of another
    /// command ([`VerifyFloor::distinct_us`]), microseconds of this thread's CPU time in this
    /// process ([`verify_floor`]).
    pub verify_us: f64,
    /// The same, one command verified again and again ([`VerifyFloor::repeated_us`]).
    pub verify_repeated_us: f64,
    /// CPU time (user + system) of this process over the timed part per accepted command,
    /// microseconds. With the in-process server it counts the server and the client threads
    /// together; with `--server` only the clients. `None` where `/proc/self/stat` is missing.
    pub process_cpu_us_per_accept: Option<f64>,
    /// Server CPU per accepted command over [`Figures::verify_us`]: from
    /// `server_cpu_us_per_accept` with `--server-pid`, from `process_cpu_us_per_accept` with
    /// the in-process server (so clients included); `None` without a server CPU figure.
    pub cpu_per_verify: Option<f64>,
    /// The system (kernel) part of the CPU per accepted command that [`Figures::cpu_per_verify`]
    /// is taken from, microseconds: the server's with `--server-pid`, this process's with the
    /// in-process server; `None` without a server CPU figure. The kernel's work per request
    /// (sockets, scheduling, syncs) is a floor no change to mwp's own code moves.
    pub system_us_per_accept: Option<f64>,
    /// Peak resident set, KiB (`VmHWM`): of the server with `--server-pid`, else of this
    /// process (with the in-process server: server and clients).
    pub peak_rss_kib: Option<u64>,
}

/// Rounds of verifications timed for [`Figures::verify_us`].
pub const VERIFY_ROUNDS: usize = 5;
/// Verifications in each round of [`Figures::verify_us`].
pub const VERIFY_PER_ROUND: usize = 400;

/// What a bench run sends.
#[derive(Debug, Clone)]
pub struct Load {
    /// Concurrent clients.
    pub clients: usize,
    /// Commands in all (a whole number per client; the rest is dropped).
    pub commands: usize,
    /// Groups to spread the commands over.
    pub groups: usize,
    /// Send CBOR instead of JSON.
    pub cbor: bool,
    /// Keep a live tail of the first group open during the run.
    pub tail: bool,
}

impl Load {
    /// The groups client `c` posts to, in turn: `c mod groups` with no more groups than
    /// clients, else `c`, `c + clients`, … below `groups`.
    fn share(&self, c: usize) -> std::iter::StepBy<std::ops::Range<usize>> {
        (c % self.groups..self.groups).step_by(self.clients)
    }

    /// Refuses a load that leaves a client without commands or a group without any.
    fn check(&self) -> Result<(), Failure> {
        if self.clients == 0 || self.commands < self.clients {
            return Err(Failure::new(
                EXIT_BAD_INPUT,
                "need at least one client and one command per client",
            ));
        }
        if self.groups == 0 {
            return Err(Failure::new(EXIT_BAD_INPUT, "--groups must be at least 1"));
        }
        let widest = self.groups.div_ceil(self.clients);
        if self.commands / self.clients < widest {
            return Err(Failure::new(
                EXIT_BAD_INPUT,
                format!(
                    "--groups {} over --clients {} needs at least {} commands (--commands), so that every group gets one",
                    self.groups,
                    self.clients,
                    widest * self.clients
                ),
            ));
        }
        Ok(())
    }
}

/// `mwp_heads_signed_total` of the server, if its metrics say.
fn heads_signed(client: &Client) -> Option<u64> {
    let text = client.fetch("/metrics", "text/plain").ok()?;
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|l| l.strip_prefix("mwp_heads_signed_total "))
        .and_then(|n| n.trim().parse().ok())
}

/// CPU time (user + system) of `/proc/ENTRY` (a pid or `self`) in seconds, from its `stat`
/// (clock ticks of 1/100 s): every thread's, live or ended; `None` off Linux or for a gone
/// process. The store bench (`benches/store.rs`) reads its own CPU time with it too.
pub fn proc_cpu_seconds(entry: &str) -> Option<f64> {
    proc_cpu_split(entry).map(|(user, system)| user + system)
}

/// The user and system CPU time of `/proc/ENTRY` (a pid or `self`) in seconds, every
/// thread's; `None` off Linux or for a gone process.
pub fn proc_cpu_split(entry: &str) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{entry}/stat")).ok()?;
    parse_cpu_split(&stat)
}

/// The `utime` and `stime` fields (clock ticks of 1/100 s) of a `/proc/PID/stat` line, in
/// seconds.
fn parse_cpu_split(stat: &str) -> Option<(f64, f64)> {
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let mut fields = rest.split(' ').skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some((user as f64 / 100.0, system as f64 / 100.0))
}

/// Peak resident set of `/proc/ENTRY` (a pid or `self`) in KiB, its `VmHWM`; `None` off
/// Linux or for a gone process. The store bench reads its own with it too.
pub fn peak_rss_kib(entry: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{entry}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
}

/// One strict verification ([`Command::verify_prepared`]: the canonical content encoded, the
/// signature checked under a key decoded once), microseconds of this thread's CPU time, timed
/// two ways by [`verify_floor`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VerifyFloor {
    /// Each verification of another command, as a server meets them: every round checks
    /// [`VERIFY_PER_ROUND`] signatures cycling over the distinct samples. The yardstick of the
    /// CPU-per-verification ratios.
    pub distinct_us: f64,
    /// One command checked again and again, the measure of the runs before 2026-12-06 13:30
    /// UTC, reported beside it: its variable-time path and data stay warm, and it comes out
    /// a few per cent lower (33.0 against 34.1 µs, 33.6 against 34.5 µs in the first runs).
    pub repeated_us: f64,
}

/// Times one strict verification over `samples` (distinct commands, each with its signer's
/// key; [`VERIFY_PER_ROUND`] of them or more make every round's signatures distinct): the
/// median of [`VERIFY_ROUNDS`] rounds of [`VERIFY_PER_ROUND`] verifications, each round timed
/// in this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`; on a loaded machine the wall clock
/// also counts the time the thread waited for a core). The store bench
/// (`benches/store.rs`) times its verification with this function too.
pub fn verify_floor(samples: &[(Command, mwp_core::PublicKey)]) -> Result<VerifyFloor, Failure> {
    let prepared = samples
        .iter()
        .map(|(cmd, key)| Some((cmd, key.prepare()?)))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| Failure::new(EXIT_FAILED, "a bench key is not a usable Ed25519 key"))?;
    if prepared.is_empty() {
        return Err(Failure::new(
            EXIT_FAILED,
            "no bench command to time a verification of",
        ));
    }
    let time = |pick: &dyn Fn(usize) -> usize| -> Result<f64, Failure> {
        let mut rounds = Vec::with_capacity(VERIFY_ROUNDS);
        for _ in 0..VERIFY_ROUNDS {
            let start = thread_cpu_seconds();
            for i in 0..VERIFY_PER_ROUND {
                let (cmd, key) = &prepared[pick(i)];
                let ok = std::hint::black_box(*cmd)
                    .verify_prepared(std::hint::black_box(key))
                    .unwrap_or(false);
                if !ok {
                    return Err(Failure::new(
                        EXIT_FAILED,
                        "a bench command's signature does not verify",
                    ));
                }
            }
            rounds.push((thread_cpu_seconds() - start) * 1e6 / VERIFY_PER_ROUND as f64);
        }
        rounds.sort_by(f64::total_cmp);
        Ok(rounds[VERIFY_ROUNDS / 2])
    };
    Ok(VerifyFloor {
        distinct_us: time(&|i| i % prepared.len())?,
        repeated_us: time(&|_| 0)?,
    })
}

/// CPU time (user + system) of the calling thread, seconds.
fn thread_cpu_seconds() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
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

/// Threads that open the bench groups before the clock starts.
const OPENERS: usize = 8;

/// Opens `load.groups` groups, then posts `load.commands` pre-signed commands from
/// `load.clients` threads. `store` names the in-process server's store for the figures.
pub fn measure(
    base: &str,
    load: &Load,
    store: Option<&'static str>,
    server_pid: Option<u32>,
) -> Result<Figures, Failure> {
    load.check()?;
    let Load {
        clients,
        commands,
        groups,
        cbor,
        tail,
    } = *load;
    let client = Client::new(base);
    let fail = |what: &str| {
        let what = what.to_owned();
        move |e: mwp_core::Error| Failure::new(EXIT_UNAVAILABLE, format!("{what}: {e}"))
    };
    let authority = client
        .authority_key()
        .map_err(fail("reading the authority key"))?;
    let org = id("bench")?;
    let stem = format!("bench-{}", now_ms());
    let group_ids = (0..groups)
        .map(|g| {
            if groups == 1 {
                id(&stem)
            } else {
                id(&format!("{stem}-{g}"))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
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
        title: json!("bench").into(),
        members,
        authority_key: authority,
    });
    let opens = group_ids
        .iter()
        .map(|group| {
            Command::signed(
                org.clone(),
                group.clone(),
                id("owner")?,
                id("open")?,
                1,
                None,
                open.clone(),
                &key("owner"),
            )
            .map_err(fail("signing"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Open the groups from a few threads: a file store syncs each open.
    let openers = OPENERS.min(groups);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..openers)
            .map(|t| {
                let (opens, fail) = (&opens, &fail);
                scope.spawn(move || {
                    let client = Client::new(base);
                    for open in opens.iter().skip(t).step_by(openers) {
                        client
                            .submit(open)
                            .map_err(fail(&format!("opening the bench group {}", open.group)))?;
                    }
                    Ok::<(), Failure>(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .map_err(|_| Failure::new(EXIT_FAILED, "an opening thread panicked"))?
        })
    })?;

    // Pre-sign everything so the clock measures the server, not the signing. Client `c`
    // sends its commands to the groups of its share in turn; `create_work` commands with
    // distinct work and action ids and no `expect` are accepted in any order, so each
    // group's commands are valid in the order a client sends them.
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
    let mut samples = Vec::with_capacity(VERIFY_PER_ROUND);
    for c in 0..clients {
        let name = format!("c{c}");
        let k = key(&name);
        let share: Vec<&Id> = load.share(c).map(|g| &group_ids[g]).collect();
        let mut batch = Vec::with_capacity(per_client);
        for n in 0..per_client {
            let group = share[n % share.len()];
            let body = Body::CreateWork(CreateWork {
                work: id(&format!("w{c}-{n}"))?,
                contract: contract.clone(),
                after: vec![],
                spec: json!({"n": n}).into(),
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
            batch.push((group.clone(), bytes));
            if samples.len() < VERIFY_PER_ROUND {
                samples.push((cmd, k.public()));
            }
        }
        batches.push(batch);
    }
    // The signature floor, in this process, before the clock starts.
    let floor = verify_floor(&samples)?;
    let verify_us = floor.distinct_us;
    let content_type = if cbor {
        "application/cbor"
    } else {
        "application/json"
    };
    let barrier = Arc::new(Barrier::new(clients + 1));
    let threads: Vec<_> = batches
        .into_iter()
        .map(|batch| {
            let (client, barrier) = (Client::new(base), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let mut latencies = Vec::with_capacity(batch.len());
                let mut rejected = 0usize;
                barrier.wait();
                for (group, bytes) in batch {
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
        Some(follow(&client, &group_ids[0])?)
    } else {
        None
    };
    let signed_before = heads_signed(&client);
    // User and system CPU of the server (with `--server-pid`) and of this process.
    let server_stat = server_pid.map(|pid| pid.to_string());
    let server_cpu_before = server_stat.as_deref().and_then(proc_cpu_split);
    let own_cpu_before = proc_cpu_split("self");
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
    let own_cpu_after = proc_cpu_split("self");
    if tail {
        // The tail's last head comes once it is idle, within 100 ms.
        std::thread::sleep(Duration::from_millis(300));
    }
    let server_cpu_after = server_stat.as_deref().and_then(proc_cpu_split);
    let signed_after = heads_signed(&client);
    latencies.sort();
    let pct = |p: f64| {
        let i = ((latencies.len() as f64 - 1.0) * p).round() as usize;
        latencies.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    let accepted = latencies.len() - rejected;
    let per_accept = |before: Option<f64>, after: Option<f64>| match (before, after) {
        (Some(a), Some(b)) if accepted > 0 => Some((b - a) * 1e6 / accepted as f64),
        _ => None,
    };
    let total = |cpu: Option<(f64, f64)>| cpu.map(|(user, system)| user + system);
    let system = |cpu: Option<(f64, f64)>| cpu.map(|(_, system)| system);
    let server_cpu_us_per_accept = per_accept(total(server_cpu_before), total(server_cpu_after));
    let process_cpu_us_per_accept = per_accept(total(own_cpu_before), total(own_cpu_after));
    // The process the CPU figure is taken from: the server, or this one running it.
    let (server_cpu, measured) = match server_pid {
        Some(_) => (
            server_cpu_us_per_accept,
            (server_cpu_before, server_cpu_after),
        ),
        None if store.is_some() => (process_cpu_us_per_accept, (own_cpu_before, own_cpu_after)),
        None => (None, (None, None)),
    };
    let peak_rss_kib = match server_pid {
        Some(pid) => peak_rss_kib(&pid.to_string()),
        None => peak_rss_kib("self"),
    };
    Ok(Figures {
        clients,
        groups,
        store,
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
        verify_us,
        verify_repeated_us: floor.repeated_us,
        process_cpu_us_per_accept,
        cpu_per_verify: server_cpu
            .filter(|_| verify_us > 0.0)
            .map(|c| c / verify_us),
        system_us_per_accept: per_accept(system(measured.0), system(measured.1)),
        peak_rss_kib,
    })
}

/// Runs `mwp bench`.
pub fn run(args: BenchArgs) -> Outcome {
    let load = Load {
        clients: args.clients,
        commands: args.commands,
        groups: usize::try_from(args.groups).unwrap_or(usize::MAX),
        cbor: args.cbor,
        tail: args.tail,
    };
    // Refuse a bad load before creating a data directory for it.
    load.check()?;
    let figures = match &args.server {
        Some(url) => measure(url, &load, None, args.server_pid)?,
        None => {
            let (url, name) = match &args.data {
                Some(dir) => (StoreUrl::File(dir.clone()), "file"),
                None => (StoreUrl::Memory, "memory"),
            };
            let service = store::open(
                &url,
                &store::Options {
                    create: true,
                    ..store::Options::default()
                },
            )?;
            let rt = super::runtime()?;
            let addr = "127.0.0.1:0".parse().expect("a literal socket address");
            let server = rt
                .block_on(Server::bind(service, addr, ServerConfig::default()))
                .map_err(|e| Failure::new(EXIT_UNAVAILABLE, format!("cannot listen: {e}")))?;
            let base = format!("http://{}", server.addr());
            let figures = measure(&base, &load, Some(name), None);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `utime` and `stime` are the 14th and 15th fields, counted after a command name that may
    /// hold spaces and parentheses.
    #[test]
    fn the_cpu_split_is_read_after_the_command_name() {
        let stat =
            "4242 (mwp (serve) x) S 1 4242 4242 0 -1 4194560 1520 0 0 0 731 254 0 0 20 0 5 0";
        assert_eq!(parse_cpu_split(stat), Some((7.31, 2.54)));
        assert_eq!(parse_cpu_split("4242 (mwp) S 1"), None);
        assert_eq!(parse_cpu_split("no parenthesis"), None);
    }
}
