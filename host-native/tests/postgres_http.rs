//! End to end over HTTP: two authority servers (each its own runtime and its own store with
//! its own pool) on one PostgreSQL database, concurrent clients sending to both. The same
//! server code as `mwp serve --store postgres://…`; the store is called through
//! `spawn_blocking` and dropped on the runtime at shutdown.
#![cfg(feature = "postgres")]

mod postgres_common;

use std::collections::BTreeSet;
use std::sync::Arc;

use mwp_core::Id;
use mwp_host::server::client::Client;
use mwp_host::server::{Server, ServerConfig};
use mwp_host::service::AuthorityService;
use postgres_common::{create_work, open_group, Schema};

struct Running {
    rt: tokio::runtime::Runtime,
    server: Option<Server>,
    base: String,
}

impl Running {
    fn start(service: Arc<dyn AuthorityService>) -> Running {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let addr = "127.0.0.1:0".parse().expect("addr");
        let server = rt
            .block_on(Server::bind(service, addr, ServerConfig::default()))
            .expect("binds");
        let base = format!("http://{}", server.addr());
        Running {
            rt,
            server: Some(server),
            base,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            self.rt.block_on(s.shutdown());
        }
    }
}

#[test]
fn two_http_servers_on_one_database_serve_one_unforked_group() {
    let server = require_server!();
    let schema = Schema::new(&server, "http");
    let servers = [
        Running::start(Arc::new(schema.open("pool_size=4"))),
        Running::start(Arc::new(schema.open("pool_size=4"))),
    ];
    let clients = [
        Client::new(servers[0].base.clone()),
        Client::new(servers[1].base.clone()),
    ];
    assert_eq!(
        clients[0].authority_key().expect("key"),
        clients[1].authority_key().expect("key"),
        "both servers sign with the database's key"
    );
    let open = clients[0].submit(&open_group("g1", 4)).expect("open");
    assert!(!open.duplicate);
    let again = clients[1].submit(&open_group("g1", 4)).expect("open again");
    assert!(again.duplicate);
    assert_eq!(again.receipt, open.receipt);

    const PER: usize = 8;
    let receipts: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|c| {
                let clients = &clients;
                s.spawn(move || {
                    let actor = format!("w{c}");
                    (0..PER)
                        .map(|i| {
                            let cmd =
                                create_work("g1", &actor, &format!("a{i}"), &format!("c{c}-{i}"));
                            let first = clients[(c + i) % 2].submit(&cmd).expect("accepted");
                            assert!(!first.duplicate);
                            // The retry goes to the other server: a Duplicate, same receipt.
                            let retry = clients[(c + i + 1) % 2].submit(&cmd).expect("retry");
                            assert!(retry.duplicate);
                            assert_eq!(retry.receipt, first.receipt);
                            first.receipt
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("client"))
            .collect()
    });
    let g = Id::new("g1").expect("id");
    let log = clients[1].events(&g, 0, 1000).expect("events");
    assert_eq!(log.len(), 1 + 4 * PER);
    let mut seen = BTreeSet::new();
    for (i, e) in log.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1);
        if i > 0 {
            assert_eq!(e.prev, log[i - 1].id);
        }
        assert!(seen.insert((e.actor.clone(), e.action.clone())));
    }
    for r in &receipts {
        assert_eq!(&log[(r.seq - 1) as usize].receipt(), r);
    }
    drop(servers); // shuts both down; the stores are dropped on their runtimes
}

/// `GET …/snapshots/latest` checks the stored row it would send: a row another process
/// changed is answered `SNAPSHOT_INVALID` naming the group and the row's seq, and its bytes
/// are not sent.
#[test]
fn a_snapshot_row_that_does_not_verify_is_not_served() {
    let server = require_server!();
    let schema = Schema::new(&server, "http_snapshot");
    let store = schema.open("snapshot_every=0");
    store.submit(&open_group("g1", 1), 1000).expect("open");
    let g = Id::new("g1").expect("id");
    let good = store.take_snapshot(&g).expect("a snapshot at seq 1");
    let running = Running::start(Arc::new(store));
    let client = Client::new(running.base.clone());
    assert_eq!(client.snapshot(&g).expect("served"), good);
    let mut flipped = good.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x40;
    schema
        .client()
        .execute(
            "UPDATE mwp_snapshots SET bytes = $1 WHERE group_id = 'g1'",
            &[&flipped],
        )
        .expect("change the row");
    let e = client.snapshot(&g).expect_err("not served");
    assert_eq!(e.code, mwp_core::Code::SnapshotInvalid, "{e}");
    assert!(
        e.message
            .contains("group g1 in PostgreSQL: the snapshot row at seq 1 does not verify"),
        "{e}"
    );
    assert_eq!(e.details.get("seq"), Some(&serde_json::json!(1)), "{e}");
    drop(running);
}

/// `GET /v1/groups` lists each group with its head checked against its log: a head row
/// another process rewrote is answered `LOG_CORRUPT` naming the group, never listed as true.
#[test]
fn the_group_list_answers_no_head_row_it_cannot_check() {
    let server = require_server!();
    let schema = Schema::new(&server, "http_heads");
    let store = schema.open("snapshot_every=0");
    store.submit(&open_group("g1", 1), 1000).expect("open");
    store
        .submit(&create_work("g1", "alice", "c1", "w1"), 1001)
        .expect("create");
    let running = Running::start(Arc::new(store));
    let client = Client::new(running.base.clone());
    let listed = client.groups().expect("listed");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].head, 2);
    schema
        .client()
        .execute("UPDATE mwp_groups SET seq = 1 WHERE group_id = 'g1'", &[])
        .expect("move the head row back");
    let e = client.groups().expect_err("not listed");
    assert_eq!(e.code, mwp_core::Code::LogCorrupt, "{e}");
    assert!(
        e.message.contains("group g1 in PostgreSQL: its head row"),
        "{e}"
    );
    drop(running);
}
