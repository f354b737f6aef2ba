//! In headless Chromium: the IndexedDB stores. One transaction per batch, reopen after a
//! "reload" gives the same state hash, and a transaction aborted midway leaves nothing.
#![cfg(target_arch = "wasm32")]

mod common;

use common::*;
use mwp_wasm::frames;
use mwp_wasm::idb_authority::IdbAuthority;
use mwp_wasm::idb_store::{delete_idb_store, IdbReplica};
use mwp_wasm::Authority;
use serde_json::json;
use wasm_bindgen::JsValue;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

async fn fresh(name: &str) {
    delete_idb_store(name.to_owned())
        .await
        .map_err(JsValue::from)
        .expect("delete");
}

fn outcomes(results: &JsValue) -> Vec<String> {
    js_sys::Array::from(results)
        .iter()
        .map(|r| prop_str(&r, "outcome"))
        .collect()
}

#[wasm_bindgen_test]
async fn authority_batches_survive_a_reopen_with_the_same_state_hash() {
    let name = "t-authority-reopen";
    fresh(name).await;
    let mut a = IdbAuthority::open(name.into(), "g1".into(), Some(2.0), None)
        .await
        .map_err(JsValue::from)
        .expect("open");
    let r = a
        .submit(vec![open("g1"), create("g1", "w1", "c1")], 1000.0)
        .await
        .map_err(JsValue::from)
        .expect("batch 1");
    assert_eq!(outcomes(&r), ["accepted", "accepted"]);
    let r = a
        .submit(
            vec![
                create("g1", "w2", "c2"),
                create("g1", "w1", "c1"),
                create("g1", "w1", "c9"),
            ],
            1000.0,
        )
        .await
        .map_err(JsValue::from)
        .expect("batch 2");
    assert_eq!(outcomes(&r), ["accepted", "duplicate", "rejected"]);
    let hash = a.state_hash().map_err(JsValue::from).expect("hash");
    assert_eq!(a.seq(), 3.0);
    a.close();
    // A reload: a new connection rebuilds from the checkpoint and the events after it.
    let b = IdbAuthority::open(name.into(), "g1".into(), Some(2.0), None)
        .await
        .map_err(JsValue::from)
        .expect("reopen");
    assert_eq!(b.seq(), 3.0);
    assert_eq!(b.state_hash().map_err(JsValue::from).expect("hash"), hash);
    let batch = b
        .events(0.0, None)
        .await
        .map_err(JsValue::from)
        .expect("events");
    let rebuilt = Authority::from_log(&batch, None)
        .map_err(JsValue::from)
        .expect("log verifies");
    assert_eq!(
        rebuilt.state_hash().map_err(JsValue::from).expect("hash"),
        hash
    );
    assert!(b
        .receipt("alice", "c2")
        .map_err(JsValue::from)
        .expect("receipt")
        .is_object());
    b.close();
}

#[wasm_bindgen_test]
async fn an_aborted_transaction_leaves_nothing_and_poisons_the_handle() {
    let name = "t-authority-abort";
    fresh(name).await;
    let mut a = IdbAuthority::open(name.into(), "g1".into(), None, None)
        .await
        .map_err(JsValue::from)
        .expect("open");
    a.submit(vec![open("g1"), create("g1", "w1", "c1")], 1000.0)
        .await
        .map_err(JsValue::from)
        .expect("batch");
    let hash = a.state_hash().map_err(JsValue::from).expect("hash");
    let err = JsValue::from(
        a.submit_then_abort(
            vec![create("g1", "w2", "c2"), create("g1", "w3", "c3")],
            1000.0,
        )
        .await
        .expect_err("aborted"),
    );
    assert_eq!(
        (name_of(&err), code_of(&err)),
        ("StoreError".into(), "STORAGE".into())
    );
    // Memory had moved ahead: the handle refuses everything until reopened.
    let err = JsValue::from(
        a.submit(vec![create("g1", "w4", "c4")], 1000.0)
            .await
            .expect_err("poisoned"),
    );
    assert_eq!(code_of(&err), "STORAGE");
    a.close();
    let mut b = IdbAuthority::open(name.into(), "g1".into(), None, None)
        .await
        .map_err(JsValue::from)
        .expect("reopen");
    assert_eq!(b.seq(), 2.0, "nothing of the aborted batch is visible");
    assert_eq!(b.state_hash().map_err(JsValue::from).expect("hash"), hash);
    let batch = b
        .events(0.0, None)
        .await
        .map_err(JsValue::from)
        .expect("events");
    assert_eq!(frames::split(&batch).expect("frames").len(), 2);
    assert!(b
        .receipt("alice", "c2")
        .map_err(JsValue::from)
        .expect("receipt")
        .is_undefined());
    // And the same commands go through now.
    let r = b
        .submit(vec![create("g1", "w2", "c2")], 1000.0)
        .await
        .map_err(JsValue::from)
        .expect("retry");
    assert_eq!(outcomes(&r), ["accepted"]);
    b.close();
}

#[wasm_bindgen_test]
async fn a_store_refuses_commands_for_another_group() {
    let name = "t-authority-group";
    fresh(name).await;
    let mut a = IdbAuthority::open(name.into(), "g1".into(), None, None)
        .await
        .map_err(JsValue::from)
        .expect("open");
    let r = a
        .submit(vec![open("g2")], 1000.0)
        .await
        .map_err(JsValue::from)
        .expect("batch");
    assert_eq!(outcomes(&r), ["rejected"]);
    let first = js_sys::Array::from(&r).get(0);
    assert_eq!(prop_str(&prop(&first, "error"), "code"), "WRONG_GROUP");
    assert_eq!(a.seq(), 0.0);
    a.close();
}

fn log_of(a: &Authority) -> Vec<u8> {
    a.events(0.0, None).map_err(JsValue::from).expect("events")
}

#[wasm_bindgen_test]
async fn replica_store_applies_batches_reopens_and_ignores_aborted_ones() {
    let mut auth = Authority::default();
    for cmd in [
        open("g1"),
        create("g1", "w1", "c1"),
        create("g1", "w2", "c2"),
        create("g1", "w3", "c3"),
    ] {
        auth.submit(cmd, 1000.0)
            .map_err(JsValue::from)
            .expect("accepted");
    }
    let log = log_of(&auth);
    let items = frames::split(&log).expect("frames");
    let batch = |idx: &[usize]| {
        let mut b = Vec::new();
        for &i in idx {
            frames::push(&mut b, items[i]).expect("frame");
        }
        b
    };
    let name = "t-replica";
    fresh(name).await;
    let mut r = IdbReplica::open(name.into(), "g1".into(), Some(2.0))
        .await
        .map_err(JsValue::from)
        .expect("open");
    // Out of order with a repeat: seq 1 and 3 now, then 2 (which drains 3).
    let s = r
        .offer_batch(batch(&[0, 2, 0]))
        .await
        .map_err(JsValue::from)
        .expect("offer");
    assert_eq!(prop(&s, "cursor").as_f64(), Some(1.0));
    assert_eq!(prop(&s, "buffered").as_f64(), Some(1.0));
    assert_eq!(prop(&s, "duplicate").as_f64(), Some(1.0));
    let s = r
        .offer_batch(batch(&[1]))
        .await
        .map_err(JsValue::from)
        .expect("offer");
    assert_eq!(prop(&s, "cursor").as_f64(), Some(3.0));
    // An aborted batch: nothing of seq 4 is durable.
    let err = JsValue::from(
        r.offer_batch_then_abort(batch(&[3]))
            .await
            .expect_err("aborted"),
    );
    assert_eq!(code_of(&err), "STORAGE");
    r.close();
    let mut r = IdbReplica::open(name.into(), "g1".into(), Some(2.0))
        .await
        .map_err(JsValue::from)
        .expect("reopen");
    assert_eq!(r.cursor(), 3.0);
    let s = r
        .offer_batch(batch(&[3]))
        .await
        .map_err(JsValue::from)
        .expect("offer");
    assert_eq!(prop(&s, "cursor").as_f64(), Some(4.0));
    assert_eq!(r.state_hash().ok(), auth.state_hash().ok());
    r.close();
    let r = IdbReplica::open(name.into(), "g1".into(), Some(2.0))
        .await
        .map_err(JsValue::from)
        .expect("reopen");
    assert_eq!(
        r.state_hash().ok(),
        auth.state_hash().ok(),
        "a reload gives the same state hash"
    );
    assert_eq!(
        r.events(0.0, None)
            .await
            .map_err(JsValue::from)
            .expect("events"),
        log
    );
    r.close();
}

#[wasm_bindgen_test]
async fn replica_store_restores_a_snapshot_durably_and_refuses_a_bad_one() {
    let mut auth = Authority::default();
    for cmd in [
        open("g1"),
        create("g1", "w1", "c1"),
        create("g1", "w2", "c2"),
    ] {
        auth.submit(cmd, 1000.0)
            .map_err(JsValue::from)
            .expect("accepted");
    }
    let snap = auth
        .snapshot(Some(key("@authority")))
        .map_err(JsValue::from)
        .expect("snapshot");
    let name = "t-replica-restore";
    fresh(name).await;
    let mut r = IdbReplica::open(name.into(), "g1".into(), None)
        .await
        .map_err(JsValue::from)
        .expect("open");
    let err = JsValue::from(
        r.restore(snap.clone(), public("bob"), "acme".into(), 0.0)
            .await
            .expect_err("untrusted"),
    );
    assert_eq!(code_of(&err), "SNAPSHOT_INVALID");
    assert_eq!(r.cursor(), 0.0);
    r.restore(snap, public("@authority"), "acme".into(), 0.0)
        .await
        .map_err(JsValue::from)
        .expect("restores");
    auth.submit(create("g1", "w3", "c3"), 1000.0)
        .map_err(JsValue::from)
        .expect("accepted");
    let tail = auth
        .events(3.0, None)
        .map_err(JsValue::from)
        .expect("events");
    r.offer_batch(tail)
        .await
        .map_err(JsValue::from)
        .expect("offer");
    r.close();
    let r = IdbReplica::open(name.into(), "g1".into(), None)
        .await
        .map_err(JsValue::from)
        .expect("reopen");
    assert_eq!(r.cursor(), 4.0);
    assert_eq!(r.state_hash().ok(), auth.state_hash().ok());
    r.close();
}

#[wasm_bindgen_test]
async fn redaction_erases_the_stored_values_in_the_same_transaction() {
    let name = "t-authority-redact";
    fresh(name).await;
    let mut a = IdbAuthority::open(name.into(), "g1".into(), None, None)
        .await
        .map_err(JsValue::from)
        .expect("open");
    let redact = command(
        "g1",
        "alice",
        "x1",
        None,
        json!({"type": "redact", "seq": 2, "reason": {"why": "pii"}}),
    );
    a.submit(vec![open("g1"), create("g1", "w1", "c1")], 1000.0)
        .await
        .map_err(JsValue::from)
        .expect("batch");
    a.submit(vec![redact], 1000.0)
        .await
        .map_err(JsValue::from)
        .expect("redact");
    let hash = a.state_hash().map_err(JsValue::from).expect("hash");
    a.close();
    let b = IdbAuthority::open(name.into(), "g1".into(), None, None)
        .await
        .map_err(JsValue::from)
        .expect("reopen");
    assert_eq!(b.state_hash().map_err(JsValue::from).expect("hash"), hash);
    let batch = b
        .events(1.0, Some(1.0))
        .await
        .map_err(JsValue::from)
        .expect("event 2");
    let ev = mwp_wasm::codec::decode_event(frames::split(&batch).expect("frames")[0])
        .map_err(JsValue::from)
        .expect("decodes");
    let spec = prop(&prop(&ev, "kind"), "spec");
    assert!(
        prop(&spec, "$redacted").is_string(),
        "the spec value is erased"
    );
    mwp_wasm::codec::verify_event(ev)
        .map_err(JsValue::from)
        .expect("and the event still verifies");
    b.close();
}

#[wasm_bindgen_test]
async fn a_second_connection_cannot_overwrite_what_the_first_appended() {
    let name = "t-authority-two-tabs";
    fresh(name).await;
    let mut a = IdbAuthority::open(name.into(), "g1".into(), None, None)
        .await
        .map_err(JsValue::from)
        .expect("open a");
    a.submit(vec![open("g1")], 1000.0)
        .await
        .map_err(JsValue::from)
        .expect("genesis");
    let mut b = IdbAuthority::open(name.into(), "g1".into(), None, None)
        .await
        .map_err(JsValue::from)
        .expect("open b");
    a.submit(vec![create("g1", "w1", "c1")], 1000.0)
        .await
        .map_err(JsValue::from)
        .expect("a appends seq 2");
    // b has not seen seq 2 and decides its own seq 2: the append is refused, b is poisoned.
    let err = JsValue::from(
        b.submit(vec![create("g1", "w2", "c2")], 1000.0)
            .await
            .expect_err("seq 2 exists"),
    );
    assert_eq!(code_of(&err), "STORAGE");
    a.close();
    b.close();
    let c = IdbAuthority::open(name.into(), "g1".into(), None, None)
        .await
        .map_err(JsValue::from)
        .expect("reopen");
    assert_eq!(c.seq(), 2.0);
    assert!(c
        .receipt("alice", "c1")
        .map_err(JsValue::from)
        .expect("receipt")
        .is_object());
    assert!(c
        .receipt("alice", "c2")
        .map_err(JsValue::from)
        .expect("receipt")
        .is_undefined());
    c.close();
}

/// The frames of `batch` from index `from` to `to` (exclusive), as a frame batch.
fn frames_of(batch: &[u8], from: usize, to: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for item in &frames::split(batch).expect("frames")[from..to] {
        frames::push(&mut out, item).expect("frame");
    }
    out
}

#[wasm_bindgen_test]
async fn events_read_back_across_batch_records_and_a_redaction_inside_its_own_batch() {
    let name = "t-authority-records";
    fresh(name).await;
    let mut a = IdbAuthority::open(name.into(), "g1".into(), None, None)
        .await
        .map_err(JsValue::from)
        .expect("open");
    let mut mem = Authority::default();
    let redact = command(
        "g1",
        "alice",
        "x1",
        None,
        json!({"type": "redact", "seq": 7, "reason": {"why": "pii"}}),
    );
    let batches = [
        vec![open("g1"), create("g1", "w1", "c1")],
        vec![
            create("g1", "w2", "c2"),
            create("g1", "w3", "c3"),
            create("g1", "w4", "c4"),
        ],
        vec![create("g1", "w5", "c5")],
        // The redaction's target (seq 7) is written in the same transaction.
        vec![create("g1", "w6", "c6"), redact],
    ];
    for batch in batches {
        for cmd in &batch {
            mem.submit(cmd.clone(), 1000.0)
                .map_err(JsValue::from)
                .expect("accepted in memory");
        }
        let r = a
            .submit(batch, 1000.0)
            .await
            .map_err(JsValue::from)
            .expect("batch");
        assert!(outcomes(&r).iter().all(|o| o == "accepted"));
    }
    assert_eq!(a.seq(), 8.0);
    a.close();
    let a = IdbAuthority::open(name.into(), "g1".into(), None, None)
        .await
        .map_err(JsValue::from)
        .expect("reopen");
    assert_eq!(a.state_hash().ok(), mem.state_hash().ok());
    let log = log_of(&mem);
    let read = |after: f64, limit: Option<u32>| a.events(after, limit.map(f64::from));
    // Every window, across the four records: the same bytes as the in-memory log (whose
    // seq 7 is redacted too).
    for after in 0..=8usize {
        for limit in [None, Some(1), Some(2), Some(3), Some(100)] {
            let got = read(after as f64, limit)
                .await
                .map_err(JsValue::from)
                .expect("events");
            let to = limit.map_or(8, |l| (after + l as usize).min(8));
            assert_eq!(
                got,
                frames_of(&log, after, to),
                "after {after}, limit {limit:?}"
            );
        }
    }
    let seven = frames_of(&log, 6, 7);
    let ev = mwp_wasm::codec::decode_event(frames::split(&seven).expect("frames")[0])
        .map_err(JsValue::from)
        .expect("decodes");
    assert!(prop(&prop(&prop(&ev, "kind"), "spec"), "$redacted").is_string());
    // A limit that is not a count is refused, never wrapped to 32 bits (-1 read everything,
    // 0.5 and NaN nothing).
    for limit in [-1.0, 0.5, f64::NAN] {
        let e = a
            .events(0.0, Some(limit))
            .await
            .expect_err("a limit that is not a count");
        assert_eq!(e.code(), mwp_core::Code::Malformed, "limit {limit}");
    }
    a.close();
}

#[wasm_bindgen_test]
async fn a_version_1_store_is_regrouped_into_batch_records_on_open() {
    let name = "t-authority-v1";
    fresh(name).await;
    let mut mem = Authority::default();
    for cmd in [
        open("g1"),
        create("g1", "w1", "c1"),
        create("g1", "w2", "c2"),
    ] {
        mem.submit(cmd, 1000.0)
            .map_err(JsValue::from)
            .expect("accepted");
    }
    let log = log_of(&mem);
    // Version 1's layout: one `events` record per event, keyed by seq, and the head.
    {
        let db = idb::Database::builder(name)
            .version(1)
            .add_object_store(idb::builder::ObjectStoreBuilder::new("events"))
            .add_object_store(idb::builder::ObjectStoreBuilder::new("receipts"))
            .add_object_store(idb::builder::ObjectStoreBuilder::new("meta"))
            .build()
            .await
            .expect("version 1 database");
        let tx = db
            .transaction(&["events", "meta"], idb::TransactionMode::ReadWrite)
            .expect("transaction");
        let events = tx.object_store("events").expect("events");
        for (i, item) in frames::split(&log).expect("frames").iter().enumerate() {
            events
                .add(
                    &js_sys::Uint8Array::from(*item).into(),
                    Some(&JsValue::from(i as f64 + 1.0)),
                )
                .expect("add");
        }
        let head = js_sys::Object::new();
        js_sys::Reflect::set(&head, &"group".into(), &"g1".into()).expect("set");
        js_sys::Reflect::set(&head, &"seq".into(), &3.0.into()).expect("set");
        js_sys::Reflect::set(&head, &"head".into(), &mem.head().into()).expect("set");
        tx.object_store("meta")
            .expect("meta")
            .put(&head.into(), Some(&"head".into()))
            .expect("put head");
        tx.commit().expect("commit").await.expect("committed");
        db.close();
    }
    let mut a = IdbAuthority::open(name.into(), "g1".into(), None, None)
        .await
        .map_err(JsValue::from)
        .expect("open regroups");
    assert_eq!(a.seq(), 3.0);
    assert_eq!(a.state_hash().ok(), mem.state_hash().ok());
    assert_eq!(
        a.events(0.0, None)
            .await
            .map_err(JsValue::from)
            .expect("events"),
        log
    );
    // The version 1 records are gone, and appending goes on after them.
    let left = a
        .submit(vec![create("g1", "w3", "c3")], 1000.0)
        .await
        .map_err(JsValue::from)
        .expect("append");
    assert_eq!(outcomes(&left), ["accepted"]);
    a.close();
    let db = idb::Database::builder(name)
        .version(2)
        .add_object_store(idb::builder::ObjectStoreBuilder::new("events"))
        .add_object_store(idb::builder::ObjectStoreBuilder::new("batches"))
        .add_object_store(idb::builder::ObjectStoreBuilder::new("receipts"))
        .add_object_store(idb::builder::ObjectStoreBuilder::new("meta"))
        .build()
        .await
        .expect("open");
    let tx = db
        .transaction(&["events", "batches"], idb::TransactionMode::ReadOnly)
        .expect("transaction");
    let count = |store: &str| {
        tx.object_store(store)
            .expect("store")
            .count(None)
            .expect("count")
    };
    assert_eq!(count("events").await.expect("count"), 0);
    assert_eq!(
        count("batches").await.expect("count"),
        2,
        "one regrouped, one appended"
    );
    db.close();
    let a = IdbAuthority::open(name.into(), "g1".into(), None, None)
        .await
        .map_err(JsValue::from)
        .expect("reopen");
    assert_eq!(a.seq(), 4.0);
    a.close();
}

mod agent_store {
    //! `IdbAgentStore`: an agent's write sets, one strict transaction each, folded on open.
    use super::fresh;
    use mwp_core::agent::{Agent, AgentImage as CoreImage, Config, Transmit};
    use mwp_core::memory::MemoryGroup;
    use mwp_core::replica::WriteSet;
    use mwp_core::{canonical, Body, Command, Decision, Id, SecretKey};
    use mwp_wasm::idb_agent::IdbAgentStore;
    use mwp_wasm::AgentImage;
    use serde_json::json;
    use wasm_bindgen::JsValue;
    use wasm_bindgen_test::wasm_bindgen_test;

    const NOW: u64 = 1_000;

    fn id(s: &str) -> Id {
        Id::new(s).expect("a valid id")
    }

    fn cmd(actor: &str, action: &str, body: serde_json::Value) -> Command {
        let body: Body = serde_json::from_value(body).expect("a valid body");
        let key = SecretKey::for_transcript(actor);
        Command::signed(
            id("acme"),
            id("g1"),
            id(actor),
            id(action),
            1,
            None,
            body,
            &key,
        )
        .expect("signs")
    }

    fn create(work: &str) -> Command {
        cmd(
            "alice",
            &format!("create-{work}"),
            json!({"type": "create_work", "work": work, "after": [], "spec": {},
                "contract": {"max_attempts": 3, "backoff_base_ms": 10, "backoff_max_ms": 100,
                             "cost_budget": 10, "risk": "low"}}),
        )
    }

    fn group() -> MemoryGroup {
        let key = |a: &str| SecretKey::for_transcript(a).public();
        let mut g = MemoryGroup::default();
        let open = cmd(
            "alice",
            "open",
            json!({"type": "open_group", "mission": "m1", "title": "t",
                "authority_key": key("@authority"),
                "members": [{"actor": "alice", "role": "owner", "key": key("alice")},
                            {"actor": "bob", "role": "worker", "key": key("bob")}]}),
        );
        for c in [open, create("w1")] {
            g.submit(&c, NOW).expect("accepted");
        }
        g
    }

    fn agent() -> Agent {
        let config = Config::new(
            id("acme"),
            id("g1"),
            id("bob"),
            SecretKey::for_transcript("@authority").public(),
        );
        Agent::new(config, SecretKey::for_transcript("bob")).expect("an agent")
    }

    fn bytes(ws: &WriteSet) -> Vec<u8> {
        canonical::to_vec(ws).expect("a write set encodes")
    }

    /// Runs the agent against the group, committing every write set to `store` (and to the
    /// in-memory reference) before acting on it.
    async fn drive(
        agent: &mut Agent,
        g: &mut MemoryGroup,
        store: &mut IdbAgentStore,
        reference: &mut CoreImage,
    ) {
        for _ in 0..500 {
            if let Some(ws) = agent.poll_write_set() {
                store
                    .commit(ws.serial as f64, bytes(&ws))
                    .await
                    .map_err(JsValue::from)
                    .expect("commit");
                reference.commit(&ws).expect("serials follow");
                agent.handle_committed(NOW, ws.serial);
                continue;
            }
            if let Some(t) = agent.poll_transmit() {
                match t {
                    Transmit::Command(c) => {
                        let answer = match g.submit(&c, NOW) {
                            Ok(Decision::Accepted(e)) => Ok(e.receipt()),
                            Ok(Decision::Duplicate(r)) => Ok(r),
                            Ok(Decision::Rejected(r)) => Err(r.into_error()),
                            Err(e) => Err(e),
                        };
                        let events = g.events(agent.replica().cursor(), usize::MAX);
                        agent.handle_events(NOW, events.expect("events"));
                        agent.handle_answer(NOW, &c.action, answer);
                    }
                    Transmit::FetchEvents { after } => {
                        agent.handle_events(NOW, g.events(after, usize::MAX).expect("events"));
                    }
                    _ => {}
                }
                continue;
            }
            if agent.poll_notice().is_some() || agent.poll_dispatch().is_some() {
                continue;
            }
            return;
        }
        panic!("the agent does not settle");
    }

    async fn reopen(name: &str) -> IdbAgentStore {
        IdbAgentStore::open(name.into())
            .await
            .map_err(JsValue::from)
            .expect("open")
    }

    async fn load(store: &IdbAgentStore) -> CoreImage {
        store
            .load()
            .await
            .map_err(JsValue::from)
            .expect("load")
            .core()
            .clone()
    }

    #[wasm_bindgen_test]
    async fn write_sets_survive_a_reopen_aborts_leave_nothing_and_compaction_keeps_the_image() {
        let name = "t-agent-store";
        fresh(name).await;
        let mut store = reopen(name).await;
        let (mut g, mut bob, mut reference) = (group(), agent(), CoreImage::default());
        bob.handle_connectivity(NOW, true);
        drive(&mut bob, &mut g, &mut store, &mut reference).await;
        assert!(
            reference.serial >= 3,
            "claim, start and their events were committed"
        );
        assert_eq!(reference.replica.cursor, g.state().expect("open").seq);
        store.close();

        // A reload folds the write sets back into the same image; the agent restarts on it.
        let mut store = reopen(name).await;
        assert_eq!(load(&store).await, reference);
        let config = bob.config().clone();
        let restarted =
            Agent::restore(config, SecretKey::for_transcript("bob"), &reference).expect("restores");
        assert_eq!(restarted.replica().cursor(), reference.replica.cursor);

        // An aborted commit: nothing of it is visible, and the handle refuses further writes.
        g.submit(&create("w2"), NOW).expect("accepted");
        bob.handle_events(NOW, g.events(bob.replica().cursor(), 10).expect("events"));
        let next = bob
            .poll_write_set()
            .expect("the new event makes a write set");
        let err = store
            .commit_then_abort(next.serial as f64, bytes(&next))
            .await
            .expect_err("aborted");
        assert_eq!(err.code(), mwp_core::Code::Storage);
        let err = store
            .commit(next.serial as f64, bytes(&next))
            .await
            .expect_err("poisoned");
        assert!(
            err.0.message.contains("must be reopened"),
            "{}",
            err.0.message
        );
        store.close();
        let mut store = reopen(name).await;
        assert_eq!(
            load(&store).await,
            reference,
            "the aborted write set left nothing"
        );

        // A serial that exists already is refused (add, never overwrite).
        let err = store
            .commit(1.0, bytes(&next))
            .await
            .expect_err("serial 1 exists");
        assert_eq!(err.code(), mwp_core::Code::Storage);
        store.close();

        // Compaction: the image replaces the write sets; later ones fold on top of it.
        let mut store = reopen(name).await;
        store
            .compact(&AgentImage::from_core(reference.clone()))
            .await
            .map_err(JsValue::from)
            .expect("compact");
        assert_eq!(load(&store).await, reference);
        store
            .commit(next.serial as f64, bytes(&next))
            .await
            .map_err(JsValue::from)
            .expect("commit after compaction");
        reference.commit(&next).expect("follows");
        store.close();
        let store = reopen(name).await;
        assert_eq!(load(&store).await, reference);

        // A gap in the stored serials is LOG_CORRUPT, not a silent skip.
        let mut gap = next.clone();
        gap.serial += 2;
        let mut store = store;
        store
            .commit(gap.serial as f64, bytes(&gap))
            .await
            .map_err(JsValue::from)
            .expect("stored");
        let err = store.load().await.map(|_| ()).expect_err("a gap");
        assert_eq!(err.code(), mwp_core::Code::LogCorrupt);
        store.close();
    }
}
