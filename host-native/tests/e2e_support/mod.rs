//! Shared pieces of the end-to-end tests: a server on a random loopback port, members with
//! keys, and signed commands.
#![allow(dead_code)]

use std::sync::Arc;

use mwp_core::command::{Contract, CreateWork, MemberSpec, OpenGroup, Risk, Role};
use mwp_core::{Body, Command, Id, PublicKey, SecretKey};
use mwp_host::memory_service::MemoryService;
use mwp_host::server::client::Client;
use mwp_host::server::{Server, ServerConfig};
use mwp_host::service::AuthorityService;
use serde_json::json;

/// Reads the stderr of a starting `mwp serve` up to the line that announces its address:
/// returns the base URL (`http://127.0.0.1:PORT`) and the lines logged before it.
pub fn read_address(reader: &mut impl std::io::BufRead) -> (String, Vec<String>) {
    let mut logged = Vec::new();
    loop {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).expect("reads") > 0,
            "serve printed its address"
        );
        if let Some(rest) = line.split("authority on ").nth(1) {
            let base = rest.split_whitespace().next().expect("url").to_owned();
            return (base, logged);
        }
        logged.push(line);
    }
}

/// Spawns `mwp serve` as `command` describes (stdout discarded, stderr read), waits for the
/// line that announces its address and returns the child and its base URL. The rest of its
/// log is drained on a thread, so the server never blocks on a full pipe.
pub fn spawn_serve(command: &mut std::process::Command) -> (std::process::Child, String) {
    use std::process::Stdio;
    let mut child = command
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("starts");
    let mut reader = std::io::BufReader::new(child.stderr.take().expect("piped"));
    let (base, _) = read_address(&mut reader);
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    (child, base)
}

/// A server on 127.0.0.1 with a random port, shut down when dropped.
pub struct TestServer {
    rt: tokio::runtime::Runtime,
    server: Option<Server>,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
}

impl TestServer {
    /// A memory-backed server serving every event online.
    pub fn start() -> Self {
        TestServer::with_service(MemoryService::generate().expect("random key"))
    }

    /// A server over the given service.
    pub fn with_service(service: MemoryService) -> Self {
        TestServer::with_dyn(Arc::new(service))
    }

    /// A server over any authority service.
    pub fn with_dyn(service: Arc<dyn AuthorityService>) -> Self {
        TestServer::with_config(service, ServerConfig::default())
    }

    /// A server over any authority service, configured.
    pub fn with_config(service: Arc<dyn AuthorityService>, config: ServerConfig) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let addr = "127.0.0.1:0".parse().expect("addr");
        let server = rt
            .block_on(Server::bind(service, addr, config))
            .expect("binds");
        let base = format!("http://{}", server.addr());
        TestServer {
            rt,
            server: Some(server),
            base,
        }
    }

    /// The running server.
    pub fn server(&self) -> &Server {
        self.server.as_ref().expect("the server is running")
    }

    /// A client of it.
    pub fn client(&self) -> Client {
        Client::new(self.base.clone())
    }

    /// Shuts it down gracefully and waits.
    pub fn shutdown(&mut self) {
        if let Some(s) = self.server.take() {
            self.rt.block_on(s.shutdown());
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

pub fn id(s: &str) -> Id {
    Id::new(s).expect("valid id")
}

/// A member's key.
pub fn key(actor: &str) -> SecretKey {
    SecretKey::for_transcript(actor)
}

/// A signed command from `actor` in group `group` of org `acme`.
pub fn cmd(group: &str, actor: &str, action: &str, expect: Option<u64>, body: Body) -> Command {
    Command::signed(
        id("acme"),
        id(group),
        id(actor),
        id(action),
        1,
        expect,
        body,
        &key(actor),
    )
    .expect("signs")
}

/// `open_group` by owner `alice` with the given workers.
pub fn open_group(group: &str, authority: PublicKey, workers: &[String]) -> Command {
    let mut members = vec![MemberSpec {
        actor: id("alice"),
        role: Role::Owner,
        key: key("alice").public(),
    }];
    members.extend(workers.iter().map(|w| MemberSpec {
        actor: id(w),
        role: Role::Worker,
        key: key(w).public(),
    }));
    let body = Body::OpenGroup(OpenGroup {
        mission: id("m1"),
        title: json!("e2e").into(),
        members,
        authority_key: authority,
    });
    cmd(group, "alice", "open", None, body)
}

/// A `create_work` body.
pub fn create_work(work: &str, after: &[&str]) -> Body {
    Body::CreateWork(CreateWork {
        work: id(work),
        contract: Contract {
            max_attempts: 3,
            backoff_base_ms: 10,
            backoff_max_ms: 100,
            cost_budget: 10,
            deadline_at: None,
            risk: Risk::Low,
        },
        after: after.iter().map(|a| id(a)).collect(),
        spec: json!({"do": work}).into(),
    })
}

/// Opens `group` on the server with workers `w0..wN`.
pub fn opened(server: &TestServer, group: &str, workers: usize) -> Client {
    let client = server.client();
    let authority = client.authority_key().expect("authority key");
    let names: Vec<String> = (0..workers).map(|i| format!("w{i}")).collect();
    client
        .submit(&open_group(group, authority, &names))
        .expect("opens");
    client
}

/// A raw request: (status, headers, body).
pub fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, ureq::http::HeaderMap, Vec<u8>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut resp = match method {
        "GET" => {
            let mut r = agent.get(url);
            for (k, v) in headers {
                r = r.header(*k, *v);
            }
            r.call()
        }
        _ => {
            let mut r = agent.post(url);
            for (k, v) in headers {
                r = r.header(*k, *v);
            }
            r.send(body)
        }
    }
    .expect("the server answers");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.body_mut().read_to_vec().expect("body");
    (status, headers, body)
}
