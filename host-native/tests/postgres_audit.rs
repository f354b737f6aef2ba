//! Sealed audit logs on PostgreSQL (SPEC §6a, docs/postgres.md "Sealed audit logs"): an
//! archive under the Organization's policy stores the artifact in `mwp_audit`, it opens to
//! the stored log byte for byte, the plain history is removed when the policy says so (and the
//! Group still loads from its final snapshot), a crash before the artifact or during the
//! removal is finished on the next load, expiry leaves a signed tombstone, and a damaged
//! artifact is detected.
//!
//! Needs `MWP_TEST_POSTGRES` (scripts/setup-postgres.sh); each test uses a schema of its own.
#![cfg(feature = "postgres")]

mod postgres_common;

use std::sync::Arc;

use mwp_core::audit::{self, Tombstone};
use mwp_core::{Code, Decision, Error, Hash, Id};
use mwp_host::postgres::PostgresAuthority;
use mwp_host::service::AuthorityService;
use postgres_common::{command, create_work, open_group, Schema};
use serde_json::json;

const DAY: u64 = 86_400_000;
const ARCHIVED_AT: u64 = 5_000;

fn id(s: &str) -> Id {
    Id::new(s).expect("valid id")
}

fn check_of(e: &Error) -> String {
    assert_eq!(e.code, Code::AuditInvalid, "{e}");
    e.details["check"].as_str().unwrap_or_default().to_owned()
}

/// An Organization key pair and a store on `schema` whose org `acme` is sealed to it.
struct Sealed {
    identity: String,
    pg: PostgresAuthority,
}

fn policy_json(recipient: &str, remove_plain: bool) -> String {
    json!({
        "schema": audit::POLICY_SCHEMA,
        "orgs": {"acme": {"recipients": [recipient], "retain_days": 30, "remove_plain": remove_plain}}
    })
    .to_string()
}

fn open_with_policy(schema: &Schema, recipient: &str, remove_plain: bool) -> PostgresAuthority {
    let mut config = schema.config("snapshot_every=0");
    config.org_policy = Some(Arc::new(
        mwp_audit::load_policy(&policy_json(recipient, remove_plain)).expect("policy"),
    ));
    PostgresAuthority::open(config).expect("open the store")
}

fn sealed(schema: &Schema, remove_plain: bool) -> Sealed {
    let (identity, recipient) = mwp_audit::generate_identity();
    Sealed {
        pg: open_with_policy(schema, &recipient, remove_plain),
        identity,
    }
}

fn accepted(pg: &PostgresAuthority, cmd: &mwp_core::Command, now: u64) -> mwp_core::Event {
    match pg.submit(cmd, now).expect("submit") {
        Decision::Accepted(e) => *e,
        other => panic!("not accepted: {other:?}"),
    }
}

/// Opens `g1`, creates three work items, redacts the second (so the log holds a redacted
/// event as stored), and returns the stored bytes of every event so far.
fn history(pg: &PostgresAuthority, schema: &Schema) -> Vec<Vec<u8>> {
    accepted(pg, &open_group("g1", 1), 1000);
    for i in 0..3 {
        let cmd = create_work("g1", "alice", &format!("c{i}"), &format!("w{i}"));
        accepted(pg, &cmd, 1001 + i);
    }
    let redact = postgres_common::redact_g1(3);
    accepted(pg, &redact, 2000);
    event_rows(schema)
}

fn archive(pg: &PostgresAuthority) -> mwp_core::Event {
    let cmd = command(
        "g1",
        "alice",
        "arch",
        None,
        json!({"type": "archive", "reason": "done"}),
    );
    accepted(pg, &cmd, ARCHIVED_AT)
}

fn event_rows(schema: &Schema) -> Vec<Vec<u8>> {
    schema
        .client()
        .query(
            "SELECT bytes FROM mwp_events WHERE group_id = 'g1' ORDER BY seq",
            &[],
        )
        .expect("events")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

fn count(schema: &Schema, sql: &str) -> i64 {
    schema.client().query_one(sql, &[]).expect("count").get(0)
}

fn state_hash(pg: &PostgresAuthority) -> Hash {
    pg.state(&id("g1"))
        .expect("state")
        .expect("exists")
        .hash()
        .expect("hash")
}

#[test]
fn an_archive_under_a_policy_stores_an_artifact_that_opens_to_the_stored_log() {
    let server = require_server!();
    let schema = Schema::new(&server, "audit_seal");
    let s = sealed(&schema, false);
    let g = id("g1");
    history(&s.pg, &schema);
    let archived = archive(&s.pg);
    let rows = event_rows(&schema);
    assert_eq!(rows.len() as u64, archived.seq, "the plain history stays");

    let artifact = s.pg.audit_artifact(&g).expect("read").expect("sealed");
    assert_eq!(artifact[..8], audit::ARTIFACT_MAGIC);
    let ids = mwp_audit::parse_identities(&s.identity).expect("identity");
    let opened = mwp_audit::open(&artifact, &ids, Some(&s.pg.authority_key())).expect("it opens");
    assert_eq!(
        opened.events, rows,
        "byte-identical events, the redacted one as stored"
    );
    assert_eq!(
        opened.snapshot_bytes,
        s.pg.latest_snapshot(&g).expect("final snapshot")
    );
    assert_eq!(opened.state_hash, state_hash(&s.pg));
    assert_eq!(opened.snapshot.seq, archived.seq);
    let m = &opened.manifest;
    assert_eq!((m.seq, m.sealed_at), (archived.seq, ARCHIVED_AT));
    assert_eq!(m.retain_until, ARCHIVED_AT + 30 * DAY);
    assert!(!m.remove_plain);

    let status = s.pg.audit_status(&g).expect("status").expect("sealed");
    assert_eq!(&status.manifest, m);
    assert!(!status.plain_removed && status.tombstone.is_none());
    let mut c = schema.client();
    let row = c
        .query_one(
            "SELECT seq, sealed_at, plain_removed, tombstone IS NULL FROM mwp_audit
             WHERE group_id = 'g1'",
            &[],
        )
        .expect("row");
    assert_eq!(row.get::<_, i64>(0) as u64, archived.seq);
    assert_eq!(row.get::<_, i64>(1) as u64, ARCHIVED_AT);
    assert!(!row.get::<_, bool>(2) && row.get::<_, bool>(3));
    // Replay still serves the whole log.
    assert_eq!(
        s.pg.events(&g, 0, 100).expect("replay").len() as u64,
        archived.seq
    );
    // Sealing again keeps the stored artifact as is.
    assert_eq!(s.pg.seal_audit(&g, 9_999).expect("again").as_ref(), Some(m));
    assert_eq!(s.pg.audit_artifact(&g).expect("read"), Some(artifact));
}

#[test]
fn the_wrong_identity_does_not_open_it() {
    let server = require_server!();
    let schema = Schema::new(&server, "audit_identity");
    let s = sealed(&schema, false);
    history(&s.pg, &schema);
    archive(&s.pg);
    let artifact =
        s.pg.audit_artifact(&id("g1"))
            .expect("read")
            .expect("sealed");
    let (other, _) = mwp_audit::generate_identity();
    let ids = mwp_audit::parse_identities(&other).expect("identity");
    let e = mwp_audit::open(&artifact, &ids, None).expect_err("another org's key");
    assert_eq!(check_of(&e), "identity", "{e}");
}

#[test]
fn removing_the_plain_history_keeps_the_final_snapshot_and_old_cursors_get_cursor_too_old() {
    let server = require_server!();
    let schema = Schema::new(&server, "audit_remove");
    let s = sealed(&schema, true);
    let g = id("g1");
    let mut before = history(&s.pg, &schema);
    let archived = archive(&s.pg);
    before.push(archived.to_cbor().expect("cbor"));
    let hash = state_hash(&s.pg);
    let receipt =
        s.pg.receipt(&g, &id("alice"), &id("c1"))
            .expect("receipt")
            .expect("stored");

    assert_eq!(
        count(
            &schema,
            "SELECT count(*) FROM mwp_events WHERE group_id = 'g1'"
        ),
        0
    );
    assert_eq!(
        count(
            &schema,
            "SELECT count(*) FROM mwp_snapshots WHERE group_id = 'g1'"
        ),
        1,
        "the final snapshot stays"
    );
    let status = s.pg.audit_status(&g).expect("status").expect("sealed");
    assert!(status.manifest.remove_plain && status.plain_removed);
    let artifact = s.pg.audit_artifact(&g).expect("read").expect("sealed");
    let ids = mwp_audit::parse_identities(&s.identity).expect("identity");
    let opened = mwp_audit::open(&artifact, &ids, Some(&s.pg.authority_key())).expect("opens");
    assert_eq!(opened.events, before, "the removed history, byte for byte");

    // Another process on the same schema: the group loads from the final snapshot alone.
    let fresh = schema.open("snapshot_every=0");
    assert_eq!(state_hash(&fresh), hash);
    let e = fresh.events(&g, 0, 100).expect_err("the history is gone");
    assert_eq!(e.code, Code::CursorTooOld, "{e}");
    assert_eq!(e.details["snapshot"]["seq"], json!(archived.seq));
    assert_eq!(e.details["snapshot"]["hash"], json!(hash.to_hex()));
    assert_eq!(
        fresh
            .events(&g, archived.seq - 1, 100)
            .expect_err("older than the final snapshot")
            .code,
        Code::CursorTooOld
    );
    assert!(fresh
        .events(&g, archived.seq, 100)
        .expect("after")
        .is_empty());
    assert_eq!(fresh.head_seq(&g).expect("head"), archived.seq);
    assert_eq!(
        fresh.latest_snapshot(&g).expect("final"),
        opened.snapshot_bytes
    );
    assert_eq!(
        fresh.receipt(&g, &id("alice"), &id("c1")).expect("receipt"),
        Some(receipt),
        "receipts stay"
    );
    // A retried command gets its receipt; a new one is refused as ever on an archived group.
    let retry = create_work("g1", "alice", "c1", "w1");
    assert!(matches!(
        fresh.submit(&retry, 9_000).expect("retry"),
        Decision::Duplicate(_)
    ));
    let late = create_work("g1", "alice", "c9", "w9");
    assert!(matches!(
        fresh.submit(&late, 9_000).expect("late"),
        Decision::Rejected(_)
    ));
    assert_eq!(
        fresh.take_snapshot(&g).expect("snapshot"),
        opened.snapshot_bytes
    );
    // With no event row left at the head, the head is checked against the signed manifest:
    // a head row another process rewrote is not answered.
    schema
        .client()
        .execute(
            "UPDATE mwp_groups SET head = $1 WHERE group_id = 'g1'",
            &[&"ab".repeat(32)],
        )
        .expect("rewrite the head row");
    let e = fresh.head_seq(&g).expect_err("not answered");
    assert_eq!(e.code, Code::LogCorrupt, "{e}");
    assert!(
        e.message.contains(&format!(
            "group g1 in PostgreSQL: its head row says event {} at seq {}",
            "ab".repeat(32),
            archived.seq
        )),
        "{e}"
    );
}

#[test]
fn without_a_policy_nothing_is_sealed_and_the_history_stays() {
    let server = require_server!();
    let schema = Schema::new(&server, "audit_none");
    let pg = schema.open("snapshot_every=0");
    let g = id("g1");
    history(&pg, &schema);
    let archived = archive(&pg);
    assert_eq!(pg.audit_artifact(&g).expect("read"), None);
    assert_eq!(pg.audit_status(&g).expect("status"), None);
    assert_eq!(pg.seal_audit(&g, 9_000).expect("nothing due"), None);
    assert_eq!(event_rows(&schema).len() as u64, archived.seq);
    assert_eq!(
        pg.events(&g, 0, 100).expect("replay").len() as u64,
        archived.seq
    );

    // A policy for another organization seals nothing either.
    let schema = Schema::new(&server, "audit_other_org");
    let (_, recipient) = mwp_audit::generate_identity();
    let mut config = schema.config("snapshot_every=0");
    let text = policy_json(&recipient, true).replace("\"acme\"", "\"umbrella\"");
    config.org_policy = Some(Arc::new(mwp_audit::load_policy(&text).expect("policy")));
    let pg = PostgresAuthority::open(config).expect("open");
    history(&pg, &schema);
    let archived = archive(&pg);
    assert_eq!(pg.audit_artifact(&g).expect("read"), None);
    assert_eq!(event_rows(&schema).len() as u64, archived.seq);
}

#[test]
fn expiry_leaves_a_signed_tombstone_and_a_dry_run_changes_nothing() {
    let server = require_server!();
    let schema = Schema::new(&server, "audit_expire");
    let s = sealed(&schema, false);
    let g = id("g1");
    history(&s.pg, &schema);
    let archived = archive(&s.pg);
    let artifact = s.pg.audit_artifact(&g).expect("read").expect("sealed");
    let retain_until = ARCHIVED_AT + 30 * DAY;

    assert!(s
        .pg
        .expire_audit(retain_until - 1, false)
        .expect("early")
        .is_empty());
    let dry = s.pg.expire_audit(retain_until, true).expect("dry run");
    assert_eq!(dry.len(), 1);
    assert_eq!(
        (
            &dry[0].group,
            dry[0].seq,
            dry[0].retain_until,
            dry[0].deleted
        ),
        (&g, archived.seq, retain_until, false)
    );
    assert_eq!(
        s.pg.audit_artifact(&g).expect("read").as_ref(),
        Some(&artifact),
        "a dry run changes nothing"
    );
    assert_eq!(s.pg.audit_tombstone(&g).expect("read"), None);

    let now = retain_until + 7;
    let done = s.pg.expire_audit(now, false).expect("expire");
    assert_eq!(done.len(), 1);
    assert!(done[0].deleted);
    assert_eq!(s.pg.audit_artifact(&g).expect("read"), None);
    let bytes = s.pg.audit_tombstone(&g).expect("read").expect("tombstone");
    let t = Tombstone::from_cbor(&bytes).expect("decodes");
    t.verify(Some(&s.pg.authority_key())).expect("verifies");
    let status = s.pg.audit_status(&g).expect("status").expect("row");
    assert_eq!(status.tombstone.as_ref(), Some(&t));
    assert_eq!(t.deleted_at, now);
    assert_eq!(t.seq, archived.seq);
    assert_eq!(
        t.manifest,
        Hash::of(&status.manifest.to_cbor().expect("cbor"))
    );
    assert!(s
        .pg
        .expire_audit(now + DAY, false)
        .expect("again")
        .is_empty());
    // An expired artifact is kept as expired: sealing again does not bring it back.
    assert!(s.pg.seal_audit(&g, now).expect("kept").is_some());
    assert_eq!(s.pg.audit_artifact(&g).expect("read"), None);
}

#[test]
fn a_damaged_artifact_is_detected_and_sealed_again_while_the_history_is_there() {
    let server = require_server!();
    let schema = Schema::new(&server, "audit_hostile");
    let s = sealed(&schema, false);
    let g = id("g1");
    history(&s.pg, &schema);
    archive(&s.pg);
    let good = s.pg.audit_artifact(&g).expect("read").expect("sealed");
    let mut c = schema.client();
    let at = (good.len() / 2) as i32;
    c.execute(
        "UPDATE mwp_audit SET artifact = set_byte(artifact, $1, get_byte(artifact, $1) # 1)
         WHERE group_id = 'g1'",
        &[&at],
    )
    .expect("flip a byte");
    let bad = s.pg.audit_artifact(&g).expect("read").expect("stored");
    assert_ne!(bad, good);
    let ids = mwp_audit::parse_identities(&s.identity).expect("identity");
    let e = mwp_audit::open(&bad, &ids, None).expect_err("damaged");
    assert_eq!(check_of(&e), "ciphertext", "{e}");
    let e = audit::split_artifact(&bad, None).expect_err("damaged");
    assert_eq!(check_of(&e), "ciphertext", "{e}");

    // The idempotency check reads the whole artifact: it is sealed again from the history.
    let manifest =
        s.pg.seal_audit(&g, 8_000)
            .expect("sealed again")
            .expect("due");
    assert_eq!(manifest.sealed_at, 8_000);
    let resealed = s.pg.audit_artifact(&g).expect("read").expect("stored");
    let opened = mwp_audit::open(&resealed, &ids, Some(&s.pg.authority_key())).expect("opens");
    assert_eq!(opened.events, event_rows(&schema));
}

#[test]
fn a_damaged_artifact_whose_history_is_removed_is_reported() {
    let server = require_server!();
    let schema = Schema::new(&server, "audit_hostile_removed");
    let s = sealed(&schema, true);
    let g = id("g1");
    history(&s.pg, &schema);
    archive(&s.pg);
    let mut c = schema.client();
    c.execute(
        "UPDATE mwp_audit SET artifact = set_byte(artifact, 20, get_byte(artifact, 20) # 1)
         WHERE group_id = 'g1'",
        &[],
    )
    .expect("flip a byte");
    let e =
        s.pg.seal_audit(&g, 8_000)
            .expect_err("cannot be sealed again");
    assert_eq!(check_of(&e), "ciphertext", "{e}");
    assert!(e.message.contains("cannot be sealed again"), "{e}");
}

#[test]
fn a_crash_before_the_artifact_is_finished_when_the_group_is_loaded() {
    let server = require_server!();
    let schema = Schema::new(&server, "audit_crash_seal");
    let s = sealed(&schema, true);
    let g = id("g1");
    let mut before = history(&s.pg, &schema);
    // As if the process died after committing the archive and its final snapshot: the
    // archive is committed by a store without the policy.
    let plain = schema.open("snapshot_every=0");
    before.push(archive(&plain).to_cbor().expect("cbor"));
    assert_eq!(plain.audit_artifact(&g).expect("read"), None);
    assert_eq!(event_rows(&schema), before);

    // A process with the policy loads the group: the seal is finished, then the removal.
    let reopened = open_with_policy(&schema, &recipient_of(&s.identity), true);
    let hash = state_hash(&reopened);
    let artifact = reopened
        .audit_artifact(&g)
        .expect("read")
        .expect("sealed on load");
    let ids = mwp_audit::parse_identities(&s.identity).expect("identity");
    let opened = mwp_audit::open(&artifact, &ids, Some(&reopened.authority_key())).expect("opens");
    assert_eq!(opened.events, before);
    assert_eq!(opened.state_hash, hash);
    assert!(
        event_rows(&schema).is_empty(),
        "then the plain history is removed"
    );
    assert!(
        reopened
            .audit_status(&g)
            .expect("status")
            .expect("row")
            .plain_removed
    );
}

/// The recipient of an identity file written by `generate_identity`.
fn recipient_of(identity: &str) -> String {
    identity
        .lines()
        .find_map(|l| l.strip_prefix("# public key: "))
        .expect("public key comment")
        .to_owned()
}

#[test]
fn an_interrupted_removal_is_finished_when_the_group_is_loaded() {
    let server = require_server!();
    let schema = Schema::new(&server, "audit_crash_remove");
    let s = sealed(&schema, true);
    let g = id("g1");
    history(&s.pg, &schema);
    archive(&s.pg);
    assert!(event_rows(&schema).is_empty());
    // Put the removed rows back (from the artifact), as a crash between the artifact's commit
    // and the removal's would leave them.
    let mut c = schema.client();
    let artifact = s.pg.audit_artifact(&g).expect("read").expect("sealed");
    let ids = mwp_audit::parse_identities(&s.identity).expect("identity");
    let opened = mwp_audit::open(&artifact, &ids, None).expect("opens");
    for (i, bytes) in opened.events.iter().enumerate() {
        let e = mwp_core::Event::from_cbor(bytes).expect("event");
        c.execute(
            "INSERT INTO mwp_events (group_id, seq, id, kind, bytes) VALUES ('g1', $1, $2, 'x', $3)",
            &[&(i as i64 + 1), &e.id.to_hex(), bytes],
        )
        .expect("put back");
    }
    c.execute(
        "UPDATE mwp_audit SET plain_removed = false WHERE group_id = 'g1'",
        &[],
    )
    .expect("unmark");
    assert_eq!(event_rows(&schema), opened.events);

    let reopened = open_with_policy(&schema, &recipient_of(&s.identity), true);
    reopened.state(&g).expect("state").expect("exists");
    assert!(event_rows(&schema).is_empty(), "the removal is finished");
    let status = reopened.audit_status(&g).expect("status").expect("row");
    assert!(status.plain_removed);
    assert_eq!(
        reopened.audit_artifact(&g).expect("read"),
        Some(artifact),
        "the artifact is kept"
    );
}

#[test]
fn an_artifact_larger_than_the_cap_is_refused_and_nothing_is_removed() {
    let server = require_server!();
    let schema = Schema::new(&server, "audit_cap");
    let (_, recipient) = mwp_audit::generate_identity();
    let pg = open_with_policy(&schema, &recipient, true).with_artifact_cap_for_tests(512);
    let g = id("g1");
    history(&pg, &schema);
    let archived = archive(&pg);
    assert_eq!(pg.audit_artifact(&g).expect("read"), None);
    assert_eq!(event_rows(&schema).len() as u64, archived.seq);
    let e = pg.seal_audit(&g, 9_000).expect_err("too large");
    assert_eq!(e.code, Code::Storage, "{e}");
    assert!(e.message.contains("larger than 512 bytes"), "{e}");
    assert!(e.message.contains("1 GiB"), "{e}");
    assert_eq!(event_rows(&schema).len() as u64, archived.seq);
    assert_eq!(
        pg.events(&g, 0, 100).expect("still served").len() as u64,
        archived.seq
    );
}

#[test]
fn concurrent_seals_of_one_group_store_one_artifact() {
    let server = require_server!();
    let schema = Schema::new(&server, "audit_race");
    let (identity, recipient) = mwp_audit::generate_identity();
    let g = id("g1");
    let plain = schema.open("snapshot_every=0");
    let mut before = history(&plain, &schema);
    before.push(archive(&plain).to_cbor().expect("cbor"));
    // Two processes (two pools) finish the seal at once.
    let stores: Vec<PostgresAuthority> = (0..2)
        .map(|_| open_with_policy(&schema, &recipient, true))
        .collect();
    let manifests: Vec<_> = std::thread::scope(|scope| {
        let runs: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(i, pg)| scope.spawn(move || pg.seal_audit(&id("g1"), 7_000 + i as u64)))
            .collect();
        runs.into_iter()
            .map(|r| r.join().expect("thread").expect("seal").expect("due"))
            .collect()
    });
    assert_eq!(
        manifests[0], manifests[1],
        "the second keeps the first's artifact"
    );
    assert_eq!(
        count(&schema, "SELECT count(*) FROM mwp_audit"),
        1,
        "one row"
    );
    assert!(event_rows(&schema).is_empty());
    let artifact = stores[0].audit_artifact(&g).expect("read").expect("sealed");
    let ids = mwp_audit::parse_identities(&identity).expect("identity");
    let opened = mwp_audit::open(&artifact, &ids, Some(&plain.authority_key())).expect("opens");
    assert_eq!(opened.events, before);
    assert_eq!(opened.manifest, manifests[0]);
}

/// A sealed Group whose plain history was removed refers an old cursor to its final
/// snapshot only once that row is checked: a row another process changed is
/// `SNAPSHOT_INVALID` naming the group and its seq, never a reference to bytes that do not
/// verify.
#[test]
fn a_sealed_groups_final_snapshot_is_checked_before_it_is_referred_to() {
    let server = require_server!();
    let schema = Schema::new(&server, "audit_final_row");
    let s = sealed(&schema, true);
    let g = id("g1");
    history(&s.pg, &schema);
    let archived = archive(&s.pg);
    let e = s.pg.events(&g, 0, 100).expect_err("the history is gone");
    assert_eq!(e.code, Code::CursorTooOld, "{e}");
    schema
        .client()
        .execute(
            "UPDATE mwp_snapshots SET bytes = bytes || '\\x00'::bytea WHERE group_id = 'g1'",
            &[],
        )
        .expect("change the final snapshot row");
    let e = s.pg.events(&g, 0, 100).expect_err("not referred to");
    assert_eq!(e.code, Code::SnapshotInvalid, "{e}");
    assert!(
        e.message.contains(&format!(
            "group g1 in PostgreSQL: the snapshot row at seq {} does not verify",
            archived.seq
        )),
        "{e}"
    );
    assert!(s
        .pg
        .events(&g, archived.seq, 100)
        .expect("after it")
        .is_empty());
}

/// Only a signed manifest that says so makes a Group's plain history count as removed: an
/// audit row another process marked `plain_removed` while its manifest keeps the history is
/// `AUDIT_INVALID` naming the group, never a `CURSOR_TOO_OLD` for a history that is there.
#[test]
fn an_audit_row_marked_removed_against_its_manifest_is_audit_invalid() {
    let server = require_server!();
    let schema = Schema::new(&server, "audit_marked");
    let s = sealed(&schema, false);
    let g = id("g1");
    let before = history(&s.pg, &schema);
    archive(&s.pg);
    assert_eq!(
        s.pg.events(&g, 0, 100).expect("the history").len(),
        before.len() + 1
    );
    schema
        .client()
        .execute(
            "UPDATE mwp_audit SET remove_plain = true, plain_removed = true WHERE group_id = 'g1'",
            &[],
        )
        .expect("mark the plain history removed");
    let e = s.pg.events(&g, 0, 100).expect_err("refused");
    assert_eq!(e.code, Code::AuditInvalid, "{e}");
    assert_eq!(check_of(&e), "seq", "{e}");
    assert!(
        e.message
            .contains("group g1 in PostgreSQL: its audit row marks the plain history removed"),
        "{e}"
    );
    assert_eq!(
        event_rows(&schema).len(),
        before.len() + 1,
        "nothing removed"
    );
}
