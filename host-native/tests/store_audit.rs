//! Archival under the Organization's policy on the file store (SPEC §6a): an archived group
//! is sealed into `audit.mwpa`, opens with the org's identity to the same bytes and state,
//! survives a crash at every write and sync of sealing, serves only its final snapshot once
//! the plain history is removed, and expires only by an explicit call that leaves a signed
//! tombstone.

mod common;

use std::path::Path;
use std::sync::{Arc, OnceLock};

use common::*;
use mwp_core::audit::{self, OrgPolicies, OrgPolicy, Tombstone, ARTIFACT_NAME, TOMBSTONE_NAME};
use mwp_core::{Code, SecretKey};
use mwp_host::service::AuthorityService;
use mwp_host::store::backend::{Backend, Fault, MemBackend, PowerLoss};
use mwp_host::store::{FileStore, StoreOptions};

const GROUP_DIR: &str = "/d/groups/g1";

/// One org key pair for the whole file: (identity file text, recipient).
fn org_key() -> &'static (String, String) {
    static KEY: OnceLock<(String, String)> = OnceLock::new();
    KEY.get_or_init(mwp_audit::generate_identity)
}

fn policy_opts(remove_plain: bool) -> StoreOptions {
    let mut orgs = OrgPolicies {
        schema: audit::POLICY_SCHEMA.into(),
        ..OrgPolicies::default()
    };
    orgs.orgs.insert(
        id("acme"),
        OrgPolicy {
            recipients: vec![org_key().1.clone()],
            retain_days: 10,
            remove_plain,
        },
    );
    StoreOptions {
        org_policy: Some(Arc::new(orgs)),
        ..opts()
    }
}

fn identities() -> Vec<mwp_audit::Identity> {
    mwp_audit::parse_identities(&org_key().0).unwrap()
}

fn files_of(be: &MemBackend) -> Vec<String> {
    let mut names = be.list(Path::new(GROUP_DIR)).unwrap_or_default();
    names.sort();
    names
}

#[test]
fn an_archived_group_is_sealed_and_opens_byte_identical_with_the_same_state_hash() {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, policy_opts(false));
    run(&mut rec, &workload());
    let store = rec.store.take().unwrap();
    let g = id("g1");
    let stored: Vec<Vec<u8>> = store
        .events(&g, 0, usize::MAX)
        .unwrap()
        .iter()
        .map(|e| e.to_cbor().unwrap())
        .collect();
    let artifact = store.audit_artifact(&g).unwrap().expect("sealed");
    let log = mwp_audit::open(
        &artifact,
        &mwp_audit::parse_identities(&org_key().0).unwrap(),
        Some(&SecretKey::for_transcript("@authority").public()),
    )
    .unwrap();
    assert_eq!(log.events, stored, "byte-identical events");
    assert_eq!(Some(log.state_hash), store.state_hash(&g).unwrap());
    assert_eq!(log.manifest.seq, stored.len() as u64);
    // The redacted value is nowhere in the artifact, nor readable in the log it holds.
    assert!(!artifact.windows(SECRET.len()).any(|w| w == SECRET));
    assert!(log
        .events
        .iter()
        .all(|e| !e.windows(SECRET.len()).any(|w| w == SECRET)));
    // Kept: the plain history stays, and a reopen seals nothing again.
    assert!(files_of(&be).contains(&"00000000000000000001.seg".to_string()));
    let store = store.reopen().unwrap();
    assert_eq!(store.audit_artifact(&g).unwrap().unwrap(), artifact);
    assert_eq!(store.events(&g, 0, usize::MAX).unwrap().len(), stored.len());
    let report = mwp_host::store::fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(report.is_clean(), "{:?}", report.findings);
    let sealed = report.groups[0].sealed.clone().unwrap();
    assert_eq!((sealed.state, sealed.plain_removed), ("sealed", false));
}

#[test]
fn the_wrong_identity_and_a_tampered_artifact_fail_and_fsck_finds_the_tampering() {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, policy_opts(false));
    run(&mut rec, &workload());
    let store = rec.store.take().unwrap();
    let artifact = store.audit_artifact(&id("g1")).unwrap().unwrap();
    let (other, _) = mwp_audit::generate_identity();
    let e = mwp_audit::open(
        &artifact,
        &mwp_audit::parse_identities(&other).unwrap(),
        None,
    )
    .unwrap_err();
    assert_eq!(e.code, Code::AuditInvalid);
    assert_eq!(e.details["check"], "identity");
    drop(store);
    let path = Path::new(GROUP_DIR).join(ARTIFACT_NAME);
    let mut bad = artifact.clone();
    bad[100] ^= 1;
    be.write_file(&path, &bad).unwrap();
    let report = mwp_host::store::fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(!report.is_clean());
    assert!(report
        .findings
        .iter()
        .any(|f| f.code == Code::AuditInvalid && Path::new(&f.file) == path));
}

#[test]
fn without_a_policy_for_the_org_nothing_is_sealed() {
    let be = MemBackend::new();
    let mut opts = policy_opts(true);
    let mut orgs = (*opts.org_policy.take().unwrap()).clone();
    let p = orgs.orgs.remove(&id("acme")).unwrap();
    orgs.orgs.insert(id("other-org"), p);
    opts.org_policy = Some(Arc::new(orgs));
    let mut rec = Recorder::open(&be, opts);
    run(&mut rec, &workload());
    let store = rec.store.take().unwrap();
    assert!(store.state(&id("g1")).unwrap().unwrap().archived);
    assert_eq!(store.audit_artifact(&id("g1")).unwrap(), None);
    assert!(!files_of(&be).iter().any(|n| n.starts_with("audit")));
}

#[test]
fn removing_the_plain_history_serves_the_final_snapshot_and_cursor_too_old_after_a_restart() {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, policy_opts(true));
    run(&mut rec, &workload());
    let store = rec.store.take().unwrap();
    let g = id("g1");
    let state = store.state(&g).unwrap().unwrap();
    let head = state.seq;
    let final_snap = format!("{head:020}.snap");
    let empty_seg = format!("{:020}.seg", head + 1);
    let mut want = vec![
        final_snap.clone(),
        empty_seg.clone(),
        ARTIFACT_NAME.to_string(),
    ];
    want.sort();
    assert_eq!(files_of(&be), want);
    // A restart with no policy at all: the signed manifest is what the open relies on.
    drop(store);
    let store = FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), opts()).unwrap();
    assert_eq!(store.state(&g).unwrap().unwrap(), state);
    let e = store.events(&g, 0, 10).unwrap_err();
    assert_eq!(e.code, Code::CursorTooOld, "{e}");
    let r = mwp_core::snapshot::SnapshotRef::from_error(&e).unwrap();
    assert_eq!(r.seq, head);
    assert_eq!(r.hash, state.hash().unwrap());
    assert_eq!(
        store.events(&g, head - 1, 10).unwrap_err().code,
        Code::CursorTooOld
    );
    assert!(store.events(&g, head, 10).unwrap().is_empty());
    let snap = store.latest_snapshot(&g).unwrap();
    let s = mwp_core::snapshot::Snapshot::verify_stored(
        &snap,
        &SecretKey::for_transcript("@authority").public(),
        &g,
    )
    .unwrap();
    assert_eq!(s.seq, head);
    // Receipts outlive the plain history: a duplicate is still answered from the state.
    for r in &rec.acked {
        assert_eq!(
            store
                .receipt(&r.group, &r.actor, &r.action)
                .unwrap()
                .as_ref(),
            Some(r)
        );
    }
    let report = mwp_host::store::fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(report.is_clean(), "{:?}", report.findings);
    let sealed = report.groups[0].sealed.clone().unwrap();
    assert_eq!(
        (sealed.seq, sealed.state, sealed.plain_removed),
        (head, "sealed", true)
    );
    // The artifact still opens to the whole history.
    let log = mwp_audit::open(
        &store.audit_artifact(&g).unwrap().unwrap(),
        &mwp_audit::parse_identities(&org_key().0).unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(log.events.len() as u64, head);
    assert_eq!(log.state_hash, state.hash().unwrap());
}

#[test]
fn expiry_is_explicit_a_dry_run_deletes_nothing_and_expiry_leaves_a_signed_tombstone() {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, policy_opts(true));
    run(&mut rec, &workload());
    let store = rec.store.take().unwrap();
    let g = id("g1");
    let artifact = store.audit_artifact(&g).unwrap().unwrap();
    let (manifest, _) = audit::split_artifact(&artifact, None).unwrap();
    // Before the retention: nothing, dry run or not.
    assert!(store
        .expire_audit(manifest.retain_until - 1, false)
        .unwrap()
        .is_empty());
    let before = files_of(&be);
    let listed = store.expire_audit(manifest.retain_until, true).unwrap();
    assert_eq!(listed, vec![manifest.clone()]);
    assert_eq!(files_of(&be), before, "a dry run changes nothing");
    // A reopen does not expire anything by itself.
    let store = store.reopen().unwrap();
    assert!(store.audit_artifact(&g).unwrap().is_some());
    let deleted = store
        .expire_audit(manifest.retain_until + 7, false)
        .unwrap();
    assert_eq!(deleted, vec![manifest.clone()]);
    assert!(store.audit_artifact(&g).unwrap().is_none());
    let t = Tombstone::from_cbor(
        &be.read_file(&Path::new(GROUP_DIR).join(TOMBSTONE_NAME))
            .unwrap(),
    )
    .unwrap();
    t.verify(Some(&SecretKey::for_transcript("@authority").public()))
        .unwrap();
    assert_eq!(
        (t.seq, t.deleted_at, t.ciphertext),
        (manifest.seq, manifest.retain_until + 7, manifest.ciphertext)
    );
    // The group still opens from its final snapshot; fsck knows it expired.
    let state = store.state(&g).unwrap();
    let store = store.reopen().unwrap();
    assert_eq!(store.state(&g).unwrap(), state);
    assert_eq!(store.events(&g, 0, 1).unwrap_err().code, Code::CursorTooOld);
    let report = mwp_host::store::fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(report.is_clean(), "{:?}", report.findings);
    assert_eq!(report.groups[0].sealed.as_ref().unwrap().state, "expired");
    assert!(store.expire_audit(u64::MAX, false).unwrap().is_empty());
}

/// After a crash anywhere in the archive and its sealing, the image holds the whole plain
/// history or a durable artifact (never neither), and the next open finishes the job.
fn check_sealing_image(
    image: &MemBackend,
    acked_archive: bool,
    final_hash: mwp_core::Hash,
    context: &str,
) {
    let names = files_of(image);
    let has_plain = names.contains(&"00000000000000000001.seg".to_string());
    let artifact = image
        .read_file(&Path::new(GROUP_DIR).join(ARTIFACT_NAME))
        .ok();
    let sealed = artifact
        .as_ref()
        .is_some_and(|a| audit::split_artifact(a, None).is_ok());
    assert!(
        has_plain || sealed,
        "{context}: neither the plain history nor an artifact: {names:?}"
    );
    let report = mwp_host::store::fsck_with(Arc::new(image.clone()), Path::new("/d")).unwrap();
    assert!(report.is_clean(), "{context}: fsck: {:?}", report.findings);

    let store = FileStore::open_with(Arc::new(image.clone()), Path::new("/d"), policy_opts(true))
        .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
    let g = id("g1");
    let state = store.state(&g).unwrap().unwrap();
    if acked_archive {
        assert!(
            state.archived,
            "{context}: an acknowledged archive was lost"
        );
    }
    if state.archived {
        assert_eq!(state.hash().unwrap(), final_hash, "{context}");
        let artifact = store
            .audit_artifact(&g)
            .unwrap()
            .unwrap_or_else(|| panic!("{context}: the open did not seal"));
        let log = mwp_audit::open(&artifact, &identities(), None)
            .unwrap_or_else(|e| panic!("{context}: {e}"));
        assert_eq!(log.state_hash, final_hash, "{context}");
        assert_eq!(
            store.events(&g, 0, 1).unwrap_err().code,
            Code::CursorTooOld,
            "{context}"
        );
        assert_eq!(files_of(image).len(), 3, "{context}: {:?}", files_of(image));
    } else {
        assert!(store.audit_artifact(&g).unwrap().is_none(), "{context}");
        assert!(!store.events(&g, 0, usize::MAX).unwrap().is_empty());
    }
}

#[test]
fn a_crash_at_every_write_and_sync_of_sealing_leaves_the_plain_history_or_a_durable_artifact() {
    // Without a policy, the run ends with the archive event and its final snapshot; with
    // one, sealing follows. The crash points: from a dozen operations before the end of
    // the first (the archive event's write and sync, the final snapshot's) to the end.
    let plain = MemBackend::new();
    let mut rec = Recorder::open(&plain, opts());
    run(&mut rec, &workload());
    let start = plain.ops() - 12;
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, policy_opts(true));
    run(&mut rec, &workload());
    let end = be.ops();
    let final_hash = rec
        .store
        .as_ref()
        .unwrap()
        .state_hash(&id("g1"))
        .unwrap()
        .unwrap();
    assert!(end > start + 20, "sealing writes and syncs: {start}..{end}");
    let mut covered = 0;
    for n in start..end {
        for (fault, losses) in [
            (Fault::Once, vec![PowerLoss::DropAll]),
            (
                Fault::Forever,
                vec![
                    PowerLoss::DropAll,
                    PowerLoss::KeepAll,
                    PowerLoss::Scramble(n),
                ],
            ),
        ] {
            let be = MemBackend::new();
            be.fail_at(n, fault);
            let mut rec = Recorder::open(&be, policy_opts(true));
            run(&mut rec, &workload());
            let acked = rec.acked.iter().any(|r| r.action == id("arch"));
            drop(rec.store.take());
            for loss in losses {
                let context = format!(
                    "{fault:?} at op {n} ({:?}), {loss:?}",
                    be.op_log().get(n as usize)
                );
                check_sealing_image(&be.crash_image(loss), acked, final_hash, &context);
                covered += 1;
            }
        }
    }
    eprintln!(
        "sealing crash images covered: {covered} ({} boundaries)",
        end - start
    );
}

#[test]
fn a_policy_file_with_a_bad_recipient_is_refused_by_name() {
    let text = r#"{"schema": "mwp.org-policy.v1", "orgs": {"acme": {"recipients": ["age1zzz"], "retain_days": 1, "remove_plain": true}}}"#;
    let e = mwp_audit::load_policy(text).unwrap_err();
    assert_eq!(e.code, Code::Malformed);
    assert!(e.message.contains("acme"), "{e}");
}

#[test]
fn another_groups_artifact_copied_into_a_group_is_refused_and_removes_nothing() {
    let be = MemBackend::new();
    let mut rec = Recorder::open(&be, policy_opts(true));
    run(&mut rec, &workload());
    // g2: the same workload, left open (no archive).
    let text = workload().replace("\"group\": \"g1\"", "\"group\": \"g2\"");
    let lines: Vec<&str> = text.lines().collect();
    run(&mut rec, &lines[..lines.len() - 2].join("\n"));
    let store = rec.store.take().unwrap();
    let g2 = id("g2");
    let state = store.state(&g2).unwrap().unwrap();
    assert!(!state.archived);
    drop(store);
    let g2_dir = Path::new("/d/groups/g2");
    let before = {
        let mut n = be.list(g2_dir).unwrap();
        n.sort();
        n
    };
    let artifact = be
        .read_file(&Path::new(GROUP_DIR).join(ARTIFACT_NAME))
        .unwrap();
    let f = be.create(&g2_dir.join(ARTIFACT_NAME), 0o600).unwrap();
    f.write_at(0, &artifact).unwrap();
    let store =
        FileStore::open_with(Arc::new(be.clone()), Path::new("/d"), policy_opts(true)).unwrap();
    assert_eq!(store.state(&g2).unwrap().unwrap(), state);
    assert!(store
        .report()
        .skipped_snapshots
        .iter()
        .any(|(f, why)| f.contains("g2") && why.contains("seals group g1")));
    let mut after = be.list(g2_dir).unwrap();
    after.sort();
    let mut want = before.clone();
    want.push(ARTIFACT_NAME.to_string());
    want.sort();
    assert_eq!(after, want, "nothing of g2 removed");
    assert_eq!(
        store.events(&g2, 0, usize::MAX).unwrap().len() as u64,
        state.seq
    );
    let report = mwp_host::store::fsck_with(Arc::new(be.clone()), Path::new("/d")).unwrap();
    assert!(report
        .findings
        .iter()
        .any(|f| f.code == Code::AuditInvalid && f.damage));
}

#[test]
fn a_damaged_artifact_is_sealed_again_before_anything_is_removed() {
    // A crash right after the artifact was made durable, before the removal began; then a
    // ciphertext byte flips on disk.
    let base = MemBackend::new();
    let mut rec = Recorder::open(&base, policy_opts(true));
    run(&mut rec, &workload());
    let head = rec
        .store
        .as_ref()
        .unwrap()
        .state(&id("g1"))
        .unwrap()
        .unwrap()
        .seq;
    let empty = format!("{:020}.seg.tmp", head + 1);
    let n = base
        .op_log()
        .iter()
        .position(|op| op.contains(&empty))
        .expect("the removal writes the empty segment") as u64;
    let crashed = || {
        let be = MemBackend::new();
        be.fail_at(n, Fault::Forever);
        let mut rec = Recorder::open(&be, policy_opts(true));
        run(&mut rec, &workload());
        drop(rec.store.take());
        let image = be.crash_image(PowerLoss::KeepAll);
        let path = Path::new(GROUP_DIR).join(ARTIFACT_NAME);
        let mut bad = image.read_file(&path).unwrap();
        assert!(audit::split_artifact(&bad, None).unwrap().0.remove_plain);
        bad[200] ^= 1;
        image.write_file(&path, &bad).unwrap();
        assert!(files_of(&image).contains(&"00000000000000000001.seg".to_string()));
        image
    };

    // Without a policy any more, the damaged artifact is reported and nothing is removed.
    let image = crashed();
    let store = FileStore::open_with(Arc::new(image.clone()), Path::new("/d"), opts()).unwrap();
    assert!(store
        .report()
        .skipped_snapshots
        .iter()
        .any(|(f, why)| f.ends_with(ARTIFACT_NAME) && why.contains("ciphertext")));
    assert!(files_of(&image).contains(&"00000000000000000001.seg".to_string()));
    assert_eq!(
        store.events(&id("g1"), 0, usize::MAX).unwrap().len() as u64,
        head
    );
    drop(store);

    // With the policy, it is sealed again from the whole history, then the history removed.
    let image = crashed();
    let store =
        FileStore::open_with(Arc::new(image.clone()), Path::new("/d"), policy_opts(true)).unwrap();
    let artifact = store.audit_artifact(&id("g1")).unwrap().unwrap();
    let log = mwp_audit::open(&artifact, &identities(), None).unwrap();
    assert_eq!(log.events.len() as u64, head);
    assert_eq!(files_of(&image).len(), 3, "{:?}", files_of(&image));
    assert!(store
        .report()
        .repaired
        .iter()
        .any(|r| r.contains("sealed the audit log")));
}
