//! Sealed audit logs (SPEC §6a): the core's format and checks with the `mwp-audit` crate's
//! encryption, on a log that holds every event kind and a redaction.

use mwp_core::audit::{self, OrgPolicies, OrgPolicy, Tombstone};
use mwp_core::authority::{Authority, Config, Policy, Step};
use mwp_core::Body;
use mwp_core::{Code, Error, SecretKey};
use mwp_tests::fixtures::{archive, rich, Scenario};
use std::sync::Arc;

fn policy(recipient: &str) -> OrgPolicy {
    OrgPolicy {
        recipients: vec![recipient.to_owned()],
        retain_days: 30,
        remove_plain: true,
    }
}

fn authority_key() -> SecretKey {
    SecretKey::for_transcript("@authority")
}

/// An archived rich group: its stored events and its final snapshot's stored bytes.
fn archived() -> (Scenario, Vec<Vec<u8>>, Vec<u8>) {
    let mut s = rich();
    archive(&mut s);
    let g = s.auth.group(&s.group).expect("the group exists");
    let log = g.log().to_vec();
    let snap = g
        .latest_snapshot()
        .expect("the final snapshot")
        .bytes
        .clone();
    (s, log, snap)
}

fn check_of(e: &Error) -> String {
    assert_eq!(e.code, Code::AuditInvalid, "{e}");
    e.details["check"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_sealed_log_opens_with_the_org_identity_byte_identical_with_the_same_state_hash() {
    let (s, log, snap) = archived();
    let (identity, recipient) = mwp_audit::generate_identity();
    let (artifact, manifest) =
        mwp_audit::seal_to_vec(&policy(&recipient), &log, &snap, 5_000, &authority_key()).unwrap();
    assert_eq!(manifest.seq, log.len() as u64);
    assert_eq!(manifest.retain_until, 5_000 + 30 * 86_400_000);
    // The plaintext appears nowhere in the artifact: a value of the log is not readable.
    let needle = b"Ship it";
    assert!(log[0].windows(needle.len()).any(|w| w == needle));
    assert!(!artifact.windows(needle.len()).any(|w| w == needle));

    let ids = mwp_audit::parse_identities(&identity).unwrap();
    let opened = mwp_audit::open(&artifact, &ids, Some(&authority_key().public())).unwrap();
    assert_eq!(opened.events, log, "byte-identical events");
    assert_eq!(opened.snapshot_bytes, snap);
    assert_eq!(opened.state_hash, s.state().hash().unwrap());
    assert_eq!(opened.manifest, manifest);
    // Anyone can check the manifest and the ciphertext without the key.
    let (m, _) = audit::split_artifact(&artifact, None).unwrap();
    assert_eq!(m, manifest);
}

#[test]
fn the_wrong_identity_fails() {
    let (_, log, snap) = archived();
    let (_, recipient) = mwp_audit::generate_identity();
    let (other, _) = mwp_audit::generate_identity();
    let (artifact, _) =
        mwp_audit::seal_to_vec(&policy(&recipient), &log, &snap, 1, &authority_key()).unwrap();
    let ids = mwp_audit::parse_identities(&other).unwrap();
    let e = mwp_audit::open(&artifact, &ids, None).unwrap_err();
    assert_eq!(check_of(&e), "identity", "{e}");
}

#[test]
fn tampering_with_the_ciphertext_or_the_manifest_is_detected() {
    let (_, log, snap) = archived();
    let (identity, recipient) = mwp_audit::generate_identity();
    let ids = mwp_audit::parse_identities(&identity).unwrap();
    let key = authority_key();
    let (artifact, manifest) =
        mwp_audit::seal_to_vec(&policy(&recipient), &log, &snap, 1, &key).unwrap();
    let trailer = audit::manifest_trailer(&manifest).unwrap().len();
    let cipher_end = artifact.len() - trailer;

    // A flipped byte anywhere in the ciphertext.
    for at in [8, 40, cipher_end / 2, cipher_end - 1] {
        let mut bad = artifact.clone();
        bad[at] ^= 1;
        let e = mwp_audit::open(&bad, &ids, None).unwrap_err();
        assert_eq!(check_of(&e), "ciphertext", "byte {at}: {e}");
    }
    // A flipped byte anywhere in the manifest.
    for at in cipher_end..artifact.len() - 12 {
        let mut bad = artifact.clone();
        bad[at] ^= 0x20;
        let e = mwp_audit::open(&bad, &ids, None).unwrap_err();
        assert!(
            [
                "decode",
                "signature",
                "schema",
                "seq",
                "ciphertext",
                "layout"
            ]
            .contains(&check_of(&e).as_str()),
            "byte {at}: {e}"
        );
    }
    // A manifest swapped for another artifact's (another seal of the same log).
    let (other, other_manifest) =
        mwp_audit::seal_to_vec(&policy(&recipient), &log, &snap, 2, &key).unwrap();
    let mut swapped = artifact[..cipher_end].to_vec();
    swapped.extend_from_slice(
        &other[other.len() - audit::manifest_trailer(&other_manifest).unwrap().len()..],
    );
    let e = mwp_audit::open(&swapped, &ids, None).unwrap_err();
    assert_eq!(check_of(&e), "ciphertext", "{e}");
    // Truncations and garbage are layout errors.
    for bad in [
        &artifact[..10],
        &artifact[..artifact.len() - 1],
        b"MWPAUDT1junk".as_slice(),
    ] {
        let e = mwp_audit::open(bad, &ids, None).unwrap_err();
        assert_eq!(check_of(&e), "layout", "{e}");
    }
}

#[test]
fn a_manifest_under_another_key_fails_against_the_pinned_authority() {
    let (_, log, snap) = archived();
    let (identity, recipient) = mwp_audit::generate_identity();
    let ids = mwp_audit::parse_identities(&identity).unwrap();
    let (artifact, _) =
        mwp_audit::seal_to_vec(&policy(&recipient), &log, &snap, 1, &authority_key()).unwrap();
    let other = SecretKey::for_transcript("mallory").public();
    let e = mwp_audit::open(&artifact, &ids, Some(&other)).unwrap_err();
    assert_eq!(check_of(&e), "authority", "{e}");
    // The snapshot must verify under the sealing key.
    let e = mwp_audit::seal_to_vec(
        &policy(&recipient),
        &log,
        &snap,
        1,
        &SecretKey::for_transcript("mallory"),
    )
    .unwrap_err();
    assert_eq!(e.code, Code::SnapshotInvalid, "{e}");
}

#[test]
fn a_log_that_is_not_the_snapshots_chain_is_refused_at_sealing_and_at_opening() {
    let (_, log, snap) = archived();
    let (identity, recipient) = mwp_audit::generate_identity();
    let ids = mwp_audit::parse_identities(&identity).unwrap();
    let key = authority_key();
    // One event short.
    let e = mwp_audit::seal_to_vec(&policy(&recipient), &log[..log.len() - 1], &snap, 1, &key)
        .unwrap_err();
    assert_eq!(check_of(&e), "chain", "{e}");
    // Two events swapped: sealed (the count matches), refused when opened.
    let mut swapped = log.clone();
    swapped.swap(3, 4);
    let (artifact, _) =
        mwp_audit::seal_to_vec(&policy(&recipient), &swapped, &snap, 1, &key).unwrap();
    let e = mwp_audit::open(&artifact, &ids, None).unwrap_err();
    assert_eq!(check_of(&e), "chain", "{e}");
}

#[test]
fn policy_files_are_checked_and_name_what_is_wrong() {
    let (_, r) = mwp_audit::generate_identity();
    let ok = format!(
        r#"{{"schema": "mwp.org-policy.v1", "orgs": {{"acme": {{"recipients": ["{r}"], "retain_days": 365, "remove_plain": false}}}}}}"#
    );
    let p = mwp_audit::load_policy(&ok).unwrap();
    assert_eq!(p.orgs.len(), 1);
    let cases = [
        (ok.replace("mwp.org-policy.v1", "v0"), "schema"),
        (ok.replace(&r, "age1nope"), "not an age X25519 public key"),
        (
            ok.replace(&format!("\"{r}\""), &format!("\"{r}\", \"{r}\"")),
            "named twice",
        ),
        (ok.replace(&format!("\"{r}\""), ""), "recipients is empty"),
        // The whole entry: the random recipient may hold "365" too.
        (
            ok.replace("\"retain_days\": 365", "\"retain_days\": 99999"),
            "retain_days",
        ),
        (
            ok.replace("\"remove_plain\"", "\"remove\""),
            "unknown field",
        ),
        ("[]".to_owned(), "organization policy"),
    ];
    for (text, want) in cases {
        let e = mwp_audit::load_policy(&text).unwrap_err();
        assert_eq!(e.code, Code::Malformed);
        assert!(e.message.contains(want), "{want}: {e}");
    }
    // A bech32 string of the right shape whose checksum fails is refused by the full parse.
    let mut bad = r.clone().into_bytes();
    let last = bad.len() - 1;
    bad[last] = if bad[last] == b'q' { b'p' } else { b'q' };
    let bad = String::from_utf8(bad).unwrap();
    assert!(OrgPolicies::from_json(&ok.replace(&r, &bad)).is_ok());
    assert!(mwp_audit::load_policy(&ok.replace(&r, &bad)).is_err());
}

#[test]
fn the_driver_says_a_seal_is_due_when_a_group_of_an_org_with_a_policy_is_archived() {
    let (_, r) = mwp_audit::generate_identity();
    let mut policies = OrgPolicies {
        schema: audit::POLICY_SCHEMA.into(),
        ..OrgPolicies::default()
    };
    policies
        .orgs
        .insert(mwp_tests::fixtures::id("acme"), policy(&r));
    let run = |audit: Option<Arc<OrgPolicies>>, org: &str| {
        let config = Config::new(
            authority_key(),
            Policy {
                audit,
                ..Policy::default()
            },
        );
        let mut s = Scenario::open_in(org, "g1");
        let log = s
            .auth
            .group(&s.group)
            .unwrap()
            .logged(0, usize::MAX)
            .unwrap();
        let mut d = Authority::new(config);
        for e in &log {
            d.handle_logged(e).unwrap();
        }
        assert_eq!(d.seal_due(), None, "not archived yet");
        let cmd = s.command(
            "alice",
            None,
            serde_json::json!({"type": "archive", "reason": {}}),
        );
        assert!(matches!(cmd.body, Body::Archive(_)));
        let Step::Accepted(commit) = d.handle_command(&cmd, s.now).unwrap() else {
            panic!("the archive is accepted");
        };
        assert!(commit.snapshot.is_some(), "the final snapshot is due");
        assert_eq!(commit.seal.as_ref(), d.seal_due());
        d.seal_due().cloned()
    };
    let shared = Arc::new(policies);
    assert_eq!(run(Some(shared.clone()), "acme"), Some(policy(&r)));
    assert_eq!(run(Some(shared), "other"), None);
    assert_eq!(run(None, "acme"), None);
}

#[test]
fn a_tombstone_is_signed_and_names_what_was_deleted() {
    let (_, log, snap) = archived();
    let (_, recipient) = mwp_audit::generate_identity();
    let key = authority_key();
    let (artifact, manifest) =
        mwp_audit::seal_to_vec(&policy(&recipient), &log, &snap, 1, &key).unwrap();
    assert!(!manifest.expired(manifest.retain_until - 1));
    assert!(manifest.expired(manifest.retain_until));
    let t = Tombstone::sign(&manifest, manifest.retain_until + 5, &key).unwrap();
    t.verify(Some(&key.public())).unwrap();
    let back = Tombstone::from_cbor(&t.to_cbor().unwrap()).unwrap();
    assert_eq!(back, t);
    assert_eq!(
        back.ciphertext,
        audit::split_artifact(&artifact, None).unwrap().0.ciphertext
    );
    let mut forged = t.clone();
    forged.deleted_at += 1;
    assert_eq!(check_of(&forged.verify(None).unwrap_err()), "signature");
    let e = t
        .verify(Some(&SecretKey::for_transcript("mallory").public()))
        .unwrap_err();
    assert_eq!(check_of(&e), "signature");
}

#[test]
fn the_policy_example_in_the_format_document_parses() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/format.md")).unwrap();
    let at = doc.find("## Organization policy").unwrap();
    let start = at + doc[at..].find("```json\n").unwrap() + 8;
    let end = start + doc[start..].find("```").unwrap();
    let p = mwp_audit::load_policy(&doc[start..end]).unwrap();
    assert_eq!(p.orgs.len(), 1);
}

#[test]
fn the_plain_log_starts_after_the_final_snapshot_only_when_the_seal_says_so_and_the_empty_segment_is_there(
) {
    use mwp_core::audit::plain_log_start;
    let segs = [1, 40, 58];
    assert_eq!(plain_log_start(Some((57, true)), &segs), 58);
    assert_eq!(plain_log_start(Some((57, false)), &segs), 1, "kept history");
    assert_eq!(
        plain_log_start(Some((56, true)), &segs),
        1,
        "no empty segment after 56"
    );
    assert_eq!(plain_log_start(None, &segs), 1);
    assert_eq!(plain_log_start(Some((57, true)), &[58]), 58);
}
