//! `js/index.d.ts` is held to the core's protocol types: its `Body` and `EventKind` unions have
//! one member per variant of the core's `Body` and `EventKind`, with the same `type` tag and the
//! same field names, marked optional (`?`) exactly where the core may leave a field out.
//!
//! A new variant breaks the exhaustive `match`es below until it gets an index, and an index
//! without a sample fails the test: every variant is checked from a serialised sample.

use std::collections::{BTreeMap, BTreeSet};

use mwp_core::{Body, Event, EventKind};
use serde_json::{json, Value};

/// Fields of each union member: `type` tag → (field → optional).
type Members = BTreeMap<String, BTreeMap<String, bool>>;

const BODIES: usize = 26;
const KINDS: usize = 27;

fn body_index(b: &Body) -> usize {
    match b {
        Body::OpenGroup(_) => 0,
        Body::AddMember(_) => 1,
        Body::RemoveMember(_) => 2,
        Body::ChangeRole(_) => 3,
        Body::ReplaceSession(_) => 4,
        Body::CreateWork(_) => 5,
        Body::ClaimWork(_) => 6,
        Body::StartWork(_) => 7,
        Body::RenewLease(_) => 8,
        Body::Checkpoint(_) => 9,
        Body::Block(_) => 10,
        Body::ResolveBlock(_) => 11,
        Body::Submit(_) => 12,
        Body::Fail(_) => 13,
        Body::Cancel(_) => 14,
        Body::Reassign(_) => 15,
        Body::IntendEffect(_) => 16,
        Body::SettleEffect(_) => 17,
        Body::ReconcileEffect(_) => 18,
        Body::Charge(_) => 19,
        Body::RequestApproval(_) => 20,
        Body::DecideApproval(_) => 21,
        Body::Expand(_) => 22,
        Body::Redact(_) => 23,
        Body::Archive(_) => 24,
        Body::Tick(_) => 25,
    }
}

fn kind_index(k: &EventKind) -> usize {
    match k {
        EventKind::GroupOpened(_) => 0,
        EventKind::MemberAdded(_) => 1,
        EventKind::MemberRemoved(_) => 2,
        EventKind::RoleChanged(_) => 3,
        EventKind::SessionReplaced(_) => 4,
        EventKind::WorkCreated(_) => 5,
        EventKind::WorkClaimed(_) => 6,
        EventKind::WorkStarted(_) => 7,
        EventKind::LeaseRenewed(_) => 8,
        EventKind::WorkCheckpointed(_) => 9,
        EventKind::WorkBlocked(_) => 10,
        EventKind::BlockResolved(_) => 11,
        EventKind::WorkSucceeded(_) => 12,
        EventKind::WorkFailed(_) => 13,
        EventKind::WorkCancelled(_) => 14,
        EventKind::WorkReassigned(_) => 15,
        EventKind::EffectIntended(_) => 16,
        EventKind::EffectSettled(_) => 17,
        EventKind::EffectReconciled(_) => 18,
        EventKind::WorkCharged(_) => 19,
        EventKind::ApprovalRequested(_) => 20,
        EventKind::ApprovalDecided(_) => 21,
        EventKind::WorkExpanded(_) => 22,
        EventKind::EventRedacted(_) => 23,
        EventKind::GroupArchived(_) => 24,
        EventKind::LeasesExpired(_) => 25,
        EventKind::EvidenceRecorded(_) => 26,
    }
}

const KEY: &str = "5a24f247d46acf2a8dbe1231604e244eb9811f4f627425503abdca2675c9921e";
const HASH: &str = "eae7c0ab499f112a7ded5ac6779cdeead8fc0f466981ad9d3d2020bf268c6c12";
const LEASE: &str = "7473954e14deac8f4b478becf27beec0";

fn contract() -> Value {
    json!({"max_attempts": 3, "backoff_base_ms": 100, "backoff_max_ms": 1000, "cost_budget": 10, "deadline_at": 9, "risk": "low"})
}

fn revocation() -> Value {
    json!({"work": "w1", "lease": LEASE, "to": "queued"})
}

/// One sample per `Body` variant, every optional field present.
fn body_samples() -> Vec<Value> {
    let members = json!([{"actor": "alice", "role": "owner", "key": KEY}]);
    vec![
        json!({"type": "open_group", "mission": "m", "title": "t", "members": members, "authority_key": KEY}),
        json!({"type": "add_member", "actor": "bob", "role": "worker", "key": KEY}),
        json!({"type": "remove_member", "actor": "bob"}),
        json!({"type": "change_role", "actor": "bob", "role": "reviewer"}),
        json!({"type": "replace_session"}),
        json!({"type": "create_work", "work": "w1", "contract": contract(), "after": [], "spec": {}}),
        json!({"type": "claim_work", "work": "w1", "lease_ms": 1, "start_within_ms": 1}),
        json!({"type": "start_work", "work": "w1", "lease": LEASE}),
        json!({"type": "renew_lease", "work": "w1", "lease": LEASE, "lease_ms": 1}),
        json!({"type": "checkpoint", "work": "w1", "lease": LEASE, "data": 1}),
        json!({"type": "block", "work": "w1", "lease": LEASE, "data": 1, "needs": {"key": "k", "kind": "input"}}),
        json!({"type": "resolve_block", "work": "w1", "key": "k", "resolution": 1}),
        json!({"type": "submit", "work": "w1", "lease": LEASE, "result": 1}),
        json!({"type": "fail", "work": "w1", "lease": LEASE, "error": 1, "retryable": true}),
        json!({"type": "cancel", "work": "w1", "reason": 1}),
        json!({"type": "reassign", "work": "w1", "reason": 1}),
        json!({"type": "intend_effect", "work": "w1", "lease": LEASE, "op": "o", "mode": "keyed", "irreversible": false, "target": 1}),
        json!({"type": "settle_effect", "work": "w1", "lease": LEASE, "op": "o", "outcome": 1, "receipt": 1}),
        json!({"type": "reconcile_effect", "work": "w1", "key": HASH, "happened": true, "receipt": 1}),
        json!({"type": "charge", "work": "w1", "lease": LEASE, "cost": 1, "data": 1}),
        json!({"type": "request_approval", "approval": "a", "work": "w1", "reason": 1}),
        json!({"type": "decide_approval", "approval": "a", "grant": true}),
        json!({"type": "expand", "trigger": 3, "work": [{"type": "create_work", "work": "w2", "contract": contract(), "after": [], "spec": {}}]}),
        json!({"type": "redact", "seq": 3, "reason": 1}),
        json!({"type": "archive", "reason": 1}),
        json!({"type": "tick"}),
    ]
}

/// One sample per `EventKind` variant, every optional field present.
fn kind_samples() -> Vec<Value> {
    let members = json!([{"actor": "alice", "role": "owner", "key": KEY}]);
    let lease = json!({"id": LEASE, "work": "w1", "holder": "bob", "session": 1, "epoch": 1, "granted_at": 1, "start_by": 2, "expires_at": 3});
    vec![
        json!({"type": "group_opened", "org": "o", "mission": "m", "title": "t", "members": members, "authority_key": KEY}),
        json!({"type": "member_added", "actor": "bob", "role": "worker", "key": KEY}),
        json!({"type": "member_removed", "actor": "bob", "revoked": [revocation()]}),
        json!({"type": "role_changed", "actor": "bob", "role": "observer"}),
        json!({"type": "session_replaced", "session": 2, "revoked": [revocation()]}),
        json!({"type": "work_created", "work": "w1", "contract": contract(), "after": [], "spec": {}}),
        json!({"type": "work_claimed", "work": "w1", "lease_ms": 1, "start_within_ms": 1, "lease": lease, "checkpoint": 4}),
        json!({"type": "work_started", "work": "w1", "lease": LEASE}),
        json!({"type": "lease_renewed", "work": "w1", "lease": LEASE, "lease_ms": 1, "expires_at": 5}),
        json!({"type": "work_checkpointed", "work": "w1", "lease": LEASE, "data": 1}),
        json!({"type": "work_blocked", "work": "w1", "lease": LEASE, "data": 1, "needs": {"key": "k", "kind": "input"}}),
        json!({"type": "block_resolved", "work": "w1", "key": "k", "resolution": 1}),
        json!({"type": "work_succeeded", "work": "w1", "lease": LEASE, "result": 1}),
        json!({"type": "work_failed", "work": "w1", "lease": LEASE, "error": 1, "retryable": true, "attempt": 1, "to": "queued", "not_before": 9}),
        json!({"type": "work_cancelled", "work": "w1", "reason": 1, "revoked": LEASE}),
        json!({"type": "work_reassigned", "work": "w1", "reason": 1, "revoked": revocation()}),
        json!({"type": "effect_intended", "work": "w1", "lease": LEASE, "op": "o", "mode": "undeclared", "irreversible": true, "target": 1, "key": HASH}),
        json!({"type": "effect_settled", "work": "w1", "lease": LEASE, "op": "o", "outcome": 1, "receipt": 1, "key": HASH}),
        json!({"type": "effect_reconciled", "work": "w1", "key": HASH, "happened": false, "receipt": 1, "to": "queued"}),
        json!({"type": "work_charged", "work": "w1", "lease": LEASE, "cost": 1, "data": 1, "spent": 1}),
        json!({"type": "approval_requested", "approval": "a", "work": "w1", "reason": 1}),
        json!({"type": "approval_decided", "approval": "a", "grant": false}),
        json!({"type": "work_expanded", "trigger": 3, "work": [{"work": "w2", "contract": contract(), "after": [], "spec": {}}]}),
        json!({"type": "event_redacted", "seq": 3, "reason": 1}),
        json!({"type": "group_archived", "reason": 1}),
        json!({"type": "leases_expired", "expired": [revocation()]}),
        json!({"type": "evidence_recorded", "of": "fail", "work": "w1", "lease": LEASE, "result": 1, "error": 1, "retryable": true}),
    ]
}

/// Parses a sample as the core's type: its variant's index and its serialised form, or `None`.
type Parse = fn(Value) -> Option<(usize, Value)>;

fn parse_body(v: Value) -> Option<(usize, Value)> {
    let b: Body = serde_json::from_value(v).ok()?;
    Some((body_index(&b), serde_json::to_value(&b).ok()?))
}

/// A kind is read as an event reads it (`Event`'s reader, the one the JSON form has): inside
/// an event whose other fields are well formed.
fn parse_kind(v: Value) -> Option<(usize, Value)> {
    let event = json!({
        "id": HASH, "group": "g", "seq": 1, "at": 0, "actor": "a", "action": "x",
        "content_hash": HASH, "aggregate": "w1", "revision": 1, "prev": HASH,
        "payload_hash": HASH, "kind": v,
    });
    let k: EventKind = serde_json::from_value::<Event>(event).ok()?.kind;
    Some((kind_index(&k), serde_json::to_value(&k).ok()?))
}

/// The members the core gives: each sample parsed (checked against its variant's index), its
/// fields, and which of them it still parses without (optional).
fn core_members(samples: Vec<Value>, parse: Parse, count: usize) -> Members {
    let mut seen = BTreeSet::new();
    let mut out = Members::new();
    for sample in samples {
        let (index, back) =
            parse(sample.clone()).unwrap_or_else(|| panic!("sample {sample} does not parse"));
        assert!(seen.insert(index), "two samples of one variant: {sample}");
        assert_eq!(
            back, sample,
            "the sample round-trips with every field present"
        );
        let map = back.as_object().expect("a tagged variant is a map");
        let tag = map["type"].as_str().expect("type is text").to_string();
        let mut fields = BTreeMap::new();
        for name in map.keys().filter(|k| *k != "type") {
            let mut without = map.clone();
            without.remove(name);
            fields.insert(name.clone(), parse(Value::Object(without)).is_some());
        }
        out.insert(tag, fields);
    }
    assert_eq!(
        seen,
        (0..count).collect::<BTreeSet<_>>(),
        "every variant needs a sample"
    );
    out
}

/// The members of `export type NAME = | { type: "…"; field: T; opt?: T } | …;` in the d.ts.
fn ts_members(dts: &str, name: &str) -> Members {
    let head = format!("export type {name} =");
    let start = dts
        .find(&head)
        .unwrap_or_else(|| panic!("js/index.d.ts has no `{head}`"));
    let mut out = Members::new();
    for line in dts[start + head.len()..].lines().skip(1) {
        let line = line.trim();
        let Some(inner) = line
            .strip_prefix("| {")
            .and_then(|l| l.trim_end_matches(';').strip_suffix('}'))
        else {
            break;
        };
        let mut tag = None;
        let mut fields = BTreeMap::new();
        for part in inner.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, ty) = part
                .split_once(':')
                .unwrap_or_else(|| panic!("`{part}` in {name} is not `field: type`"));
            if field == "type" {
                tag = Some(ty.trim().trim_matches('"').to_string());
            } else {
                let optional = field.ends_with('?');
                fields.insert(field.trim_end_matches('?').to_string(), optional);
            }
        }
        let tag = tag.unwrap_or_else(|| panic!("a member of {name} has no type: {line}"));
        assert!(
            out.insert(tag.clone(), fields).is_none(),
            "{name} lists {tag} twice"
        );
    }
    out
}

fn dts() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../js/index.d.ts");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn assert_same(name: &str, core: &Members, ts: &Members) {
    for (tag, fields) in core {
        let theirs = ts
            .get(tag)
            .unwrap_or_else(|| panic!("js/index.d.ts: {name} has no member {{ type: \"{tag}\" }}"));
        assert_eq!(
            theirs, fields,
            "js/index.d.ts: {name} member \"{tag}\": fields (name → optional) differ from the core's"
        );
    }
    let extra: Vec<_> = ts.keys().filter(|t| !core.contains_key(*t)).collect();
    assert!(
        extra.is_empty(),
        "js/index.d.ts: {name} has members the core lacks: {extra:?}"
    );
}

#[test]
fn the_typescript_body_union_matches_the_core() {
    let core = core_members(body_samples(), parse_body, BODIES);
    assert_same("Body", &core, &ts_members(&dts(), "Body"));
}

#[test]
fn the_typescript_event_kind_union_matches_the_core() {
    let core = core_members(kind_samples(), parse_kind, KINDS);
    assert_same("EventKind", &core, &ts_members(&dts(), "EventKind"));
}

#[test]
fn the_check_sees_a_missing_member_and_a_wrong_field() {
    let core = core_members(body_samples(), parse_body, BODIES);
    let dts = dts();
    let without_tick = dts.replace("  | { type: \"tick\" };", ";");
    let ts = ts_members(&without_tick, "Body");
    assert!(!ts.contains_key("tick"));
    assert!(std::panic::catch_unwind(|| assert_same("Body", &core, &ts)).is_err());
    let renamed = dts.replace(
        "lease_ms: number; start_within_ms",
        "lease_ms: number; start_ms",
    );
    let ts = ts_members(&renamed, "Body");
    assert!(std::panic::catch_unwind(|| assert_same("Body", &core, &ts)).is_err());
}
