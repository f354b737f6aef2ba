//! Helpers shared by the wasm test suites: signed commands as JS values.
#![allow(dead_code)]

use mwp_wasm::codec::{public_key_of, sign_command, to_js, transcript_secret_key};
use serde_json::{json, Value};
use wasm_bindgen::{JsCast, JsValue};

/// The transcript key (hex seed) of `actor`.
pub fn key(actor: &str) -> String {
    transcript_secret_key(actor)
}

/// The public key (hex) of `actor`'s transcript key.
pub fn public(actor: &str) -> String {
    public_key_of(&key(actor))
        .map_err(|e| e.0)
        .expect("a derived key is valid")
}

/// A command signed by `actor`'s transcript key, as a JS object.
pub fn command(
    group: &str,
    actor: &str,
    action: &str,
    expect: Option<u64>,
    body: Value,
) -> JsValue {
    let mut cmd = json!({"org": "acme", "group": group, "actor": actor, "action": action,
        "session": 1, "body": body});
    if let Some(e) = expect {
        cmd["expect"] = json!(e);
    }
    let js = to_js(&cmd).expect("plain JSON converts");
    sign_command(js, &key(actor))
        .map_err(|e| e.0)
        .expect("the command is well formed")
}

/// `open_group` by alice with bob as worker.
pub fn open(group: &str) -> JsValue {
    command(
        group,
        "alice",
        "open",
        None,
        json!({"type": "open_group", "mission": "m1",
        "title": "Ship it", "authority_key": public("@authority"),
        "members": [{"actor": "alice", "role": "owner", "key": public("alice")},
                    {"actor": "bob", "role": "worker", "key": public("bob")}]}),
    )
}

/// `create_work` of `work` by alice.
pub fn create(group: &str, work: &str, action: &str) -> JsValue {
    command(
        group,
        "alice",
        action,
        None,
        json!({"type": "create_work", "work": work,
        "contract": {"max_attempts": 3, "backoff_base_ms": 100, "backoff_max_ms": 1000,
                     "cost_budget": 10, "risk": "low"}, "after": [], "spec": {"do": work}}),
    )
}

/// A property of a JS object.
pub fn prop(obj: &JsValue, key: &str) -> JsValue {
    js_sys::Reflect::get(obj, &key.into()).expect("objects have properties")
}

/// A string property.
pub fn prop_str(obj: &JsValue, key: &str) -> String {
    prop(obj, key).as_string().unwrap_or_default()
}

/// The `code` of a thrown JS error.
pub fn code_of(err: &JsValue) -> String {
    prop_str(err, "code")
}

/// The `name` of a thrown JS error.
pub fn name_of(err: &JsValue) -> String {
    err.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.name()))
        .unwrap_or_default()
}

/// The canonical CBOR of an accepted decision's event.
pub fn event_cbor(decision: &JsValue) -> Vec<u8> {
    prop(decision, "eventCbor")
        .dyn_into::<js_sys::Uint8Array>()
        .expect("accepted decisions carry eventCbor")
        .to_vec()
}
