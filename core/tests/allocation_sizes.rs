//! The size of what a million-entry state allocates once per entry (docs/decisions.md, "Group
//! state lookups"): a stored receipt, shared behind the `IdMap`'s pointer, is one 128-byte
//! allocation, a size class of its own in mimalloc (the `mwp` binary's allocator). With the
//! standard library's `Arc` (a 16-byte header) it was 136 bytes, rounded up to 160. A work
//! item is one 448-byte allocation (its dependencies a boxed slice, not a `Vec`). The sizes
//! are those of a 64-bit target.
#![cfg(target_pointer_width = "64")]

use mwp_core::id_map::Arc;
use mwp_core::state::StoredReceipt;
use mwp_core::{Disposition, Hash};

fn receipt() -> StoredReceipt {
    StoredReceipt {
        seq: 7,
        event_id: Hash([1; 32]),
        content_hash: Hash([2; 32]),
        aggregate: "work-000001".into(),
        revision: 3,
        disposition: Disposition::Applied,
        at: 1_700_000_000_000,
    }
}

/// The bytes before the value in a shared allocation of `value`: the allocation holds the
/// count, then the value, so its size is this plus the value's size.
fn header<T>(value: T) -> usize {
    let shared = Arc::new(value);
    Arc::as_ptr(&shared) as usize - Arc::heap_ptr(&shared) as usize
}

#[test]
fn a_stored_receipt_is_one_128_byte_allocation() {
    let header = header(receipt());
    assert_eq!(header, 8, "a strong count only");
    assert_eq!(std::mem::size_of::<StoredReceipt>(), 120);
    assert_eq!(header + std::mem::size_of::<StoredReceipt>(), 128);
}

#[test]
fn a_work_item_is_one_448_byte_allocation() {
    // 440 bytes and the count: a 448-byte allocation in mimalloc. With its dependencies in a
    // `Vec` (a capacity word more) the item was 448 bytes, a 512-byte allocation.
    let header = header(0u64);
    assert_eq!(
        std::mem::size_of::<mwp_core::work::WorkItem>() + header,
        448
    );
}
