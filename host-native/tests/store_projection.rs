//! The agent side's projection store: a transaction (applied events' write sets, the cursor,
//! effect receipts) is committed whole or not at all, at every crash point.

use std::path::Path;
use std::sync::Arc;

use mwp_core::{Code, Hash, Id};
use mwp_host::store::backend::{Fault, MemBackend, PowerLoss};
use mwp_host::store::format::{group_dir_name, group_from_dir_name};
use mwp_host::store::projection::{Committed, FileProjectionStore, ProjectionStore, ProjectionTxn};

fn id(s: &str) -> Id {
    Id::new(s).unwrap()
}

fn txn(i: u64) -> ProjectionTxn {
    let mut t = ProjectionTxn::new(0);
    t.apply_event(2 * i + 1, vec![i as u8; 10])
        .apply_event(2 * i + 2, vec![i as u8 + 1; 20])
        .advance_cursor(2 * i + 2)
        .record_effect_receipt(Hash([i as u8; 32]), b"receipt".to_vec());
    t
}

fn load(be: &MemBackend) -> mwp_core::Result<(u64, Vec<Committed>)> {
    let store = FileProjectionStore::open_with(Arc::new(be.clone()), Path::new("/a"))?;
    let mut seen = Vec::new();
    let cursor = store.load(&id("g1"), &mut |c| {
        seen.push(c);
        Ok(())
    })?;
    Ok((cursor, seen))
}

#[test]
fn commits_load_back_in_order_and_compaction_replaces_them() {
    let be = MemBackend::new();
    let store = FileProjectionStore::open_with(Arc::new(be.clone()), Path::new("/a")).unwrap();
    for i in 0..5 {
        store.commit(&id("g1"), &txn(i)).unwrap();
    }
    let (cursor, seen) = load(&be).unwrap();
    assert_eq!(cursor, 10);
    assert_eq!(
        seen,
        (0..5).map(|i| Committed::Txn(txn(i))).collect::<Vec<_>>()
    );
    let e = store.commit(&id("g1"), &ProjectionTxn::new(3)).unwrap_err();
    assert_eq!(e.code, Code::Malformed, "a cursor never moves back");
    store.compact(&id("g1"), 10, b"image").unwrap();
    store.commit(&id("g1"), &txn(5)).unwrap();
    let (cursor, seen) = load(&be).unwrap();
    assert_eq!(cursor, 12);
    assert_eq!(
        seen,
        vec![
            Committed::Image {
                cursor: 10,
                image: b"image".to_vec()
            },
            Committed::Txn(txn(5))
        ]
    );
    assert_eq!(
        load(&MemBackend::new()).unwrap().0,
        0,
        "unknown group: cursor 0"
    );
}

#[test]
fn every_crash_point_leaves_whole_transactions_only() {
    let run = |be: &MemBackend| -> Vec<u64> {
        let mut acked = Vec::new();
        let Ok(store) = FileProjectionStore::open_with(Arc::new(be.clone()), Path::new("/a"))
        else {
            return acked;
        };
        for i in 0..6 {
            if i == 3 && store.compact(&id("g1"), 6, b"img").is_err() {
                return acked;
            }
            if store.commit(&id("g1"), &txn(i)).is_err() {
                return acked;
            }
            acked.push(2 * i + 2);
        }
        acked
    };
    let clean = MemBackend::new();
    run(&clean);
    let mut points = 0;
    for n in 0..clean.ops() {
        for fault in [Fault::Once, Fault::Forever] {
            let be = MemBackend::new();
            be.fail_at(n, fault);
            let acked = run(&be);
            for loss in [
                PowerLoss::DropAll,
                PowerLoss::KeepAll,
                PowerLoss::Scramble(n),
            ] {
                let (cursor, seen) =
                    load(&be.crash_image(loss)).unwrap_or_else(|e| panic!("op {n}: {e}"));
                let last_acked = acked.last().copied().unwrap_or(0);
                assert!(
                    cursor >= last_acked,
                    "op {n} {loss:?}: cursor {cursor} < acknowledged {last_acked}"
                );
                for c in &seen {
                    if let Committed::Txn(t) = c {
                        let i = (t.cursor - 2) / 2;
                        assert_eq!(t, &txn(i), "op {n}: a transaction came back partial");
                    }
                }
                points += 1;
            }
        }
    }
    eprintln!("projection crash images checked: {points}");
}

#[test]
fn group_directory_names_round_trip_and_never_collide_by_case() {
    for s in [
        "g1", "G1", "g.1", ".", "..", "a:b@c~d", "x-1", "~", "Abc", "abc",
    ] {
        let g = id(s);
        let name = group_dir_name(&g);
        assert_eq!(group_from_dir_name(&name), Some(g), "{s} -> {name}");
        assert!(name != "." && name != ".." && name.len() <= 255);
    }
    assert_ne!(
        group_dir_name(&id("G1")).to_lowercase(),
        group_dir_name(&id("g1"))
    );
    assert_eq!(group_dir_name(&id("G1")), "~i4yq");
    assert_eq!(group_dir_name(&id(&"Z".repeat(128))).len(), 1 + 205);
    assert_eq!(group_from_dir_name("~I4YQ"), None);
}
