//! The Group state looks work items and receipts up by hash, yet encodes and iterates exactly
//! as ordered maps would: the state hash and every order-dependent decision stay the same.

use std::collections::BTreeMap;

use mwp_core::canonical::{self, Strictness};
use mwp_core::state::StoredReceipt;
use mwp_core::work::{WorkItem, WorkItems};
use mwp_core::{GroupState, Id};

#[path = "../benches/common/mod.rs"]
#[allow(dead_code)]
mod common;

/// A state whose 30 work items were created as w0, w1, …, w29: not their ID order.
fn state() -> GroupState {
    common::state(30)
}

#[test]
fn work_items_iterate_and_encode_in_id_order() {
    let s = state();
    let keys: Vec<&Id> = s.work.keys().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "iteration is in ID order, not creation order");
    assert_eq!(keys[2].as_str(), "w10", "ID order, not creation order (w2)");
    assert_eq!(s.work.iter().count(), 30);

    let tree: BTreeMap<Id, WorkItem> = s
        .work
        .iter()
        .map(|(id, item)| (id.clone(), item.clone()))
        .collect();
    let bytes = canonical::to_vec(&s.work).expect("encodes");
    assert_eq!(bytes, canonical::to_vec(&tree).expect("encodes"));
    let back: WorkItems = canonical::from_slice(&bytes, Strictness::Canonical).expect("decodes");
    assert_eq!(back, s.work);
    assert_eq!(back.keys().collect::<Vec<_>>(), keys);
}

#[test]
fn receipts_encode_as_an_ordered_map() {
    let s = state();
    let tree: BTreeMap<&Id, BTreeMap<&Id, &StoredReceipt>> = s
        .receipts
        .iter()
        .map(|(actor, by_action)| (actor, by_action.iter().collect()))
        .collect();
    assert_eq!(tree.values().map(BTreeMap::len).sum::<usize>(), 211);
    assert_eq!(
        canonical::to_vec(&s.receipts).expect("encodes"),
        canonical::to_vec(&tree).expect("encodes")
    );
    let bytes = s.to_cbor().expect("encodes");
    let back: GroupState = canonical::from_slice(&bytes, Strictness::Canonical).expect("decodes");
    assert_eq!(back, s);
    assert_eq!(back.hash().expect("hash"), s.hash().expect("hash"));
}
