//! Groups spread over several PostgreSQL servers by group ID (rendezvous hashing). Two
//! schemas stand in for two servers here, named with `shard=`.
#![cfg(feature = "postgres")]

mod postgres_common;

use mwp_core::transcript::Runner;
use mwp_core::{Code, Decision, Id};
use mwp_host::postgres::{PostgresAuthority, PostgresRouter};
use mwp_host::service::AuthorityService;
use postgres_common::{create_work, open_group, Schema};

fn id(s: &str) -> Id {
    Id::new(s).expect("valid id")
}

fn count(schema: &Schema, group: &str) -> i64 {
    schema
        .client()
        .query_one(
            "SELECT count(*) FROM mwp_events WHERE group_id = $1",
            &[&group],
        )
        .expect("count")
        .get(0)
}

/// A router signing with the key the shared test commands name (the transcript key of
/// `@authority`): an `open_group` must name its authority's key.
fn connect_keyed(list: &str) -> mwp_core::Result<PostgresRouter> {
    PostgresRouter::connect_with(
        list,
        None,
        Some(mwp_core::SecretKey::for_transcript("@authority")),
        None,
    )
}

#[test]
fn each_group_lives_on_the_server_its_id_picks() {
    let server = require_server!();
    let (a, b) = (
        Schema::new(&server, "shard_a"),
        Schema::new(&server, "shard_b"),
    );
    let list = format!("{},{}", a.url("shard=a"), b.url("shard=b"));
    let router = connect_keyed(&list).expect("open both");
    assert_eq!(router.shards().len(), 2);
    // One authority key over both servers.
    assert_eq!(
        router.shards()[0].authority_key(),
        router.shards()[1].authority_key()
    );
    let groups: Vec<String> = (0..12).map(|i| format!("g{i}")).collect();
    for g in &groups {
        assert!(matches!(
            router.submit(&open_group(g, 1), 1000).expect("open"),
            Decision::Accepted(_)
        ));
        let d = router
            .submit(&create_work(g, "alice", "c1", "w1"), 1000)
            .expect("create");
        assert!(matches!(d, Decision::Accepted(_)));
    }
    let mut on = [0, 0];
    for g in &groups {
        let home = router.shard_for(&id(g)).label().to_owned();
        let (here, there) = if home == "a" { (&a, &b) } else { (&b, &a) };
        assert_eq!(count(here, g), 2, "{g} is on its home server");
        assert_eq!(count(there, g), 0, "{g} is nowhere else");
        on[usize::from(home == "b")] += 1;
        assert_eq!(router.events(&id(g), 0, 10).expect("replay").len(), 2);
    }
    assert!(on[0] > 0 && on[1] > 0, "both servers hold groups: {on:?}");
    let mut all = router.groups().expect("groups");
    all.sort();
    let mut want: Vec<Id> = groups.iter().map(|g| id(g)).collect();
    want.sort();
    assert_eq!(all, want);
    // Another process with the same list, in another order, routes the same way.
    let list2 = format!("{},{}", b.url("shard=b"), a.url("shard=a"));
    let again = connect_keyed(&list2).expect("reopen");
    for g in &groups {
        assert_eq!(
            again.shard_for(&id(g)).label(),
            router.shard_for(&id(g)).label()
        );
        assert_eq!(again.head_seq(&id(g)).expect("head"), 2);
    }
}

#[test]
fn a_changed_server_list_refuses_groups_it_would_fork() {
    let server = require_server!();
    let (a, b) = (
        Schema::new(&server, "move_a"),
        Schema::new(&server, "move_b"),
    );
    let one = connect_keyed(&a.url("shard=a")).expect("one server");
    for i in 0..8 {
        one.submit(&open_group(&format!("g{i}"), 1), 1000)
            .expect("open");
    }
    // Adding server b moves some groups there on paper; their data is still on a.
    let two = connect_keyed(&format!("{},{}", a.url("shard=a"), b.url("shard=b"))).expect("two");
    let moved: Vec<String> = (0..8)
        .map(|i| format!("g{i}"))
        .filter(|g| two.shard_for(&id(g)).label() == "b")
        .collect();
    assert!(!moved.is_empty(), "some group routes to the new server");
    for g in &moved {
        let e = two
            .submit(&create_work(g, "alice", "c1", "w1"), 2000)
            .expect_err("misrouted");
        assert_eq!(e.code, Code::Storage);
        assert!(e.message.contains("stored on a"), "{}", e.message);
        // Nothing was written anywhere.
        assert_eq!(count(&b, g), 0);
        assert_eq!(count(&a, g), 1);
    }
}

#[test]
fn servers_with_different_keys_are_refused() {
    let server = require_server!();
    let (a, b) = (Schema::new(&server, "key_a"), Schema::new(&server, "key_b"));
    // Each database gets its own generated key when opened alone.
    let ka = PostgresAuthority::connect(&a.url(""))
        .expect("a")
        .authority_key();
    let kb = PostgresAuthority::connect(&b.url(""))
        .expect("b")
        .authority_key();
    assert_ne!(ka, kb);
    let e = PostgresRouter::connect(&format!("{},{}", a.url("shard=a"), b.url("shard=b")))
        .expect_err("two keys");
    assert_eq!(e.code, Code::Storage);
    assert!(e.message.contains(&kb.to_hex()), "{}", e.message);
}

#[test]
fn duplicate_server_names_are_refused() {
    let server = require_server!();
    let (a, b) = (Schema::new(&server, "dup_a"), Schema::new(&server, "dup_b"));
    let e =
        PostgresRouter::connect(&format!("{},{}", a.url(""), b.url(""))).expect_err("same name");
    assert!(e.message.contains("shard=NAME"), "{}", e.message);
}

#[test]
fn transcripts_run_across_servers() {
    let server = require_server!();
    let (a, b) = (Schema::new(&server, "tr_a"), Schema::new(&server, "tr_b"));
    let mut config_a = a.config("shard=a");
    config_a.key = mwp_host::postgres::KeySource::Given(Box::new(
        mwp_core::SecretKey::for_transcript("@authority"),
    ));
    let mut router = PostgresRouter::open(vec![config_a, b.config("shard=b")]).expect("open");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/transcripts/lifecycle.jsonl"
    ))
    .expect("transcript");
    let mut runner = Runner::new(&mut router);
    let out = runner.run_all(&text);
    assert!(!runner.failed(), "{out:#?}");
}

#[test]
fn a_configured_key_stays_out_of_every_database_of_the_list() {
    let server = require_server!();
    let (a, b) = (Schema::new(&server, "kf_a"), Schema::new(&server, "kf_b"));
    let mut config_a = a.config("shard=a");
    let key = mwp_core::SecretKey::from_bytes(&[7; 32]);
    config_a.key = mwp_host::postgres::KeySource::Given(Box::new(key.clone()));
    let router = PostgresRouter::open(vec![config_a, b.config("shard=b")]).expect("open");
    assert_eq!(router.authority_key(), key.public());
    for schema in [&a, &b] {
        let row = schema
            .client()
            .query_one("SELECT public_key, secret_key FROM mwp_authority", &[])
            .expect("row");
        let public: String = row.get(0);
        let secret: Option<Vec<u8>> = row.get(1);
        assert_eq!(public, key.public().to_hex());
        assert_eq!(secret, None, "only the public key is stored");
    }
}
