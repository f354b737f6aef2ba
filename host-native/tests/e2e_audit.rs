//! Sealed audit logs end to end (SPEC §6a): `mwp audit open`, `verify`, `expire` and
//! `keygen` on a data directory whose archived group was sealed, `mwp serve --org-policy`,
//! and reads over HTTP of a group whose plain history was removed.

mod e2e_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use e2e_support::*;
use mwp_core::audit::{self, OrgPolicies, OrgPolicy, ARTIFACT_NAME, TOMBSTONE_NAME};
use mwp_core::{Body, Code};
use mwp_host::store::{FileStore, StoreOptions};
use serde_json::json;

fn mwp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mwp"))
}

fn transcript(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/transcripts")
        .join(name);
    std::fs::read_to_string(path).expect("the transcript reads")
}

/// An org identity made by `mwp audit keygen`: (identity file, recipient).
fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let file = dir.join(name);
    let out = mwp()
        .args(["audit", "keygen", "--out"])
        .arg(&file)
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file)
        .expect("written")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    (
        file,
        line["recipient"].as_str().expect("recipient").to_owned(),
    )
}

fn policy(recipient: &str, remove_plain: bool) -> OrgPolicies {
    let mut p = OrgPolicies {
        schema: audit::POLICY_SCHEMA.into(),
        ..OrgPolicies::default()
    };
    p.orgs.insert(
        id("acme"),
        OrgPolicy {
            recipients: vec![recipient.to_owned()],
            retain_days: 1,
            remove_plain,
        },
    );
    p
}

/// A data directory where the redaction-and-archive transcript ran under a policy.
fn sealed_dir(dir: &Path, recipient: &str, remove_plain: bool) -> PathBuf {
    let data = dir.join("data");
    let mut store = FileStore::open(
        &data,
        StoreOptions {
            authority_key: Some(key("@authority")),
            org_policy: Some(Arc::new(policy(recipient, remove_plain))),
            ..StoreOptions::default()
        },
    )
    .expect("opens");
    mwp_core::transcript::Runner::new(&mut store).run_all(&transcript("redaction_archive.jsonl"));
    data
}

fn artifact_of(data: &Path) -> PathBuf {
    data.join("groups/g1").join(ARTIFACT_NAME)
}

#[test]
fn audit_open_prints_the_events_byte_for_byte_and_restores_a_directory_fsck_and_replay_read() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (identity, recipient) = keygen(tmp.path(), "org.key");
    let data = sealed_dir(tmp.path(), &recipient, false);
    let artifact = artifact_of(&data);

    let opened = mwp()
        .args(["audit", "open"])
        .arg(&artifact)
        .arg("--identity")
        .arg(&identity)
        .output()
        .expect("runs");
    assert_eq!(
        opened.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&opened.stderr)
    );
    let replayed = mwp()
        .args(["replay", "--group", "g1", "--data"])
        .arg(&data)
        .output()
        .expect("runs");
    assert_eq!(replayed.status.code(), Some(0));
    assert!(!opened.stdout.is_empty());
    assert_eq!(
        opened.stdout, replayed.stdout,
        "the sealed events are the log's, byte for byte"
    );

    let restored = tmp.path().join("restored");
    let out = mwp()
        .args(["audit", "open"])
        .arg(&artifact)
        .arg("--identity")
        .arg(&identity)
        .arg("--out")
        .arg(&restored)
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let fsck = mwp()
        .args(["fsck", "--data"])
        .arg(&restored)
        .output()
        .expect("runs");
    assert_eq!(
        fsck.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&fsck.stdout)
    );
    let fsck_line: serde_json::Value =
        serde_json::from_slice(fsck.stdout.split(|b| *b == b'\n').next().expect("a line"))
            .expect("JSON");
    assert_eq!(fsck_line["state_hash"], line["state_hash"]);
    let again = mwp()
        .args(["replay", "--group", "g1", "--data"])
        .arg(&restored)
        .output()
        .expect("runs");
    assert_eq!(
        again.stdout, replayed.stdout,
        "the restored directory replays the same events"
    );
    // Restoring twice into one directory is refused, and changes nothing.
    let twice = mwp()
        .args(["audit", "open"])
        .arg(&artifact)
        .arg("--identity")
        .arg(&identity)
        .arg("--out")
        .arg(&restored)
        .output()
        .expect("runs");
    assert_ne!(twice.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&twice.stderr).contains("already"),
        "{}",
        String::from_utf8_lossy(&twice.stderr)
    );
}

#[test]
fn a_wrong_identity_a_flipped_byte_and_a_swapped_manifest_each_exit_1_with_a_clear_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (identity, recipient) = keygen(tmp.path(), "org.key");
    let (other, _) = keygen(tmp.path(), "other.key");
    let data = sealed_dir(tmp.path(), &recipient, false);
    let artifact = artifact_of(&data);
    let bytes = std::fs::read(&artifact).expect("reads");
    let open = |file: &Path, identity: &Path| {
        let out = mwp()
            .args(["audit", "open"])
            .arg(file)
            .arg("--identity")
            .arg(identity)
            .output()
            .expect("runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.stdout.len(),
        )
    };

    let (code, err, printed) = open(&artifact, &other);
    assert_eq!((code, printed), (Some(1), 0), "{err}");
    assert!(
        err.contains("AUDIT_INVALID") && err.contains("identities"),
        "{err}"
    );

    let flipped = tmp.path().join("flipped.mwpa");
    let mut bad = bytes.clone();
    bad[bytes.len() / 3] ^= 0x01;
    std::fs::write(&flipped, &bad).expect("writes");
    let (code, err, printed) = open(&flipped, &identity);
    assert_eq!((code, printed), (Some(1), 0), "{err}");
    assert!(err.contains("ciphertext"), "{err}");

    // Another artifact of the same group (a second seal elsewhere), its manifest swapped in.
    std::fs::create_dir(tmp.path().join("second")).expect("mkdir");
    let data2 = sealed_dir(&tmp.path().join("second"), &recipient, false);
    let second = std::fs::read(artifact_of(&data2)).expect("reads");
    let (m2, c2) = audit::split_artifact(&second, None).expect("splits");
    let (_, c1) = audit::split_artifact(&bytes, None).expect("splits");
    let mut swapped = audit::ARTIFACT_MAGIC.to_vec();
    swapped.extend_from_slice(c1);
    swapped.extend_from_slice(&audit::manifest_trailer(&m2).expect("encodes"));
    assert_ne!(c1, c2);
    let swapped_file = tmp.path().join("swapped.mwpa");
    std::fs::write(&swapped_file, &swapped).expect("writes");
    let (code, err, _) = open(&swapped_file, &identity);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("ciphertext"), "{err}");

    // `verify` needs no key; a pinned key that did not sign fails.
    let ok = mwp()
        .args(["audit", "verify"])
        .arg(&artifact)
        .arg("--authority-key")
        .arg(key("@authority").public().to_hex())
        .output()
        .expect("runs");
    assert_eq!(ok.status.code(), Some(0));
    let manifest: serde_json::Value = serde_json::from_slice(&ok.stdout).expect("JSON");
    assert_eq!(
        (manifest["group"].as_str(), manifest["schema"].as_str()),
        (Some("g1"), Some(audit::MANIFEST_SCHEMA))
    );
    let pinned = mwp()
        .args(["audit", "verify"])
        .arg(&artifact)
        .arg("--authority-key")
        .arg(key("mallory").public().to_hex())
        .output()
        .expect("runs");
    assert_eq!(pinned.status.code(), Some(1));
    let flipped_verify = mwp()
        .args(["audit", "verify"])
        .arg(&flipped)
        .output()
        .expect("runs");
    assert_eq!(flipped_verify.status.code(), Some(1));
    // Unreadable input is exit 2.
    let (code, _, _) = open(&tmp.path().join("missing.mwpa"), &identity);
    assert_eq!(code, Some(2));
    let (code, err, _) = open(&artifact, &artifact);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn audit_expire_dry_run_lists_and_deletes_nothing_and_expire_leaves_a_signed_tombstone() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (_, recipient) = keygen(tmp.path(), "org.key");
    let data = sealed_dir(tmp.path(), &recipient, true);
    let artifact = artifact_of(&data);
    let (manifest, _) =
        audit::split_artifact(&std::fs::read(&artifact).expect("reads"), None).expect("splits");
    let expire = |extra: &[&str], now: u64| {
        let out = mwp()
            .args(["audit", "expire", "--data"])
            .arg(&data)
            .args(extra)
            .arg("--now-ms")
            .arg(now.to_string())
            .output()
            .expect("runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(expire(&[], manifest.retain_until - 1), "", "still retained");
    let listed = expire(&["--dry-run"], manifest.retain_until);
    let line: serde_json::Value = serde_json::from_str(listed.trim()).expect("JSON");
    assert_eq!(
        line,
        json!({"group": "g1", "seq": manifest.seq, "retain_until": manifest.retain_until, "deleted": false})
    );
    assert!(artifact.exists(), "a dry run deletes nothing");
    let done = expire(&[], manifest.retain_until);
    assert!(done.contains("\"deleted\":true"), "{done}");
    assert!(!artifact.exists());
    let tombstone = audit::Tombstone::from_cbor(
        &std::fs::read(data.join("groups/g1").join(TOMBSTONE_NAME)).expect("a tombstone"),
    )
    .expect("decodes");
    tombstone
        .verify(Some(&key("@authority").public()))
        .expect("signed by the authority");
    let fsck = mwp()
        .args(["fsck", "--data"])
        .arg(&data)
        .output()
        .expect("runs");
    assert_eq!(
        fsck.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&fsck.stdout)
    );
    // fsck knows the sealed state: expired, the plain history removed.
    let line: serde_json::Value =
        serde_json::from_slice(fsck.stdout.split(|b| *b == b'\n').next().expect("a line"))
            .expect("JSON");
    assert_eq!(
        line["sealed"],
        json!({"seq": manifest.seq, "state": "expired", "plain_removed": true})
    );
    let stderr = mwp()
        .args(["audit", "expire", "--data"])
        .arg(tmp.path().join("nowhere"))
        .output()
        .expect("runs");
    assert_eq!(stderr.status.code(), Some(2));
}

#[test]
fn serve_refuses_a_bad_org_policy_by_name() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bad = tmp.path().join("policy.json");
    std::fs::write(&bad, r#"{"schema": "mwp.org-policy.v1", "orgs": {"acme": {"recipients": ["age1nope"], "retain_days": 1, "remove_plain": false}}}"#).expect("writes");
    for file in [bad.clone(), tmp.path().join("missing.json")] {
        let out = mwp()
            .args(["serve", "--addr", "127.0.0.1:0", "--data"])
            .arg(tmp.path().join("d"))
            .arg("--org-policy")
            .arg(&file)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&file.display().to_string()), "{err}");
    }
}

#[test]
fn over_http_a_group_whose_plain_history_was_removed_serves_its_final_snapshot_and_cursor_too_old()
{
    let tmp = tempfile::tempdir().expect("tempdir");
    let (identity, recipient) = mwp_audit::generate_identity();
    let store = FileStore::open(
        tmp.path().join("data"),
        StoreOptions {
            org_policy: Some(Arc::new(policy(&recipient, true))),
            ..StoreOptions::default()
        },
    )
    .expect("opens");
    let server = TestServer::with_dyn(Arc::new(store));
    let client = opened(&server, "g1", 1);
    client
        .submit(&cmd("g1", "alice", "c1", None, create_work("w1", &[])))
        .expect("accepted");
    let archive: Body =
        serde_json::from_value(json!({"type": "archive", "reason": "done"})).expect("a body");
    client
        .submit(&cmd("g1", "alice", "arch", None, archive))
        .expect("archived");
    let g = id("g1");
    let e = client
        .events(&g, 0, 10)
        .expect_err("the plain history is gone");
    assert_eq!(e.code, Code::CursorTooOld, "{e}");
    let r = mwp_core::snapshot::SnapshotRef::from_error(&e).expect("a snapshot reference");
    assert_eq!(r.seq, 3);
    assert!(client.events(&g, 3, 10).expect("served").is_empty());
    let url = format!("{}/v1/groups/g1/snapshots/latest", client.base());
    let (status, _, body) = request("GET", &url, &[], b"");
    assert_eq!(status, 200);
    let snap = mwp_core::snapshot::Snapshot::from_cbor(&body).expect("a snapshot");
    assert_eq!(snap.seq, 3);
    // The manifest is served; an unsealed or unknown group is 404, a hostile name 400.
    let (status, _, body) = request(
        "GET",
        &format!("{}/v1/groups/g1/audit", client.base()),
        &[],
        b"",
    );
    assert_eq!(status, 200);
    let manifest: audit::Manifest = serde_json::from_slice(&body).expect("a manifest");
    manifest
        .verify(Some(&client.authority_key().expect("key")))
        .expect("signed by the authority");
    assert_eq!((manifest.seq, manifest.remove_plain), (3, true));
    drop(opened(&server, "g2", 1));
    for (path, want) in [("g2", 404), ("nope", 404), ("%00bad", 400)] {
        let (status, _, body) = request(
            "GET",
            &format!("{}/v1/groups/{path}/audit", client.base()),
            &[],
            b"",
        );
        assert_eq!(status, want, "{path}: {}", String::from_utf8_lossy(&body));
    }
    let artifact =
        std::fs::read(tmp.path().join("data/groups/g1").join(ARTIFACT_NAME)).expect("sealed");
    let log = mwp_audit::open(
        &artifact,
        &mwp_audit::parse_identities(&identity).expect("parses"),
        None,
    )
    .expect("opens");
    assert_eq!(log.events.len(), 3);
}

#[test]
fn serve_says_at_start_which_orgs_are_sealed_and_that_the_others_keep_their_history() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (_, recipient) = keygen(tmp.path(), "org.key");
    let file = tmp.path().join("policy.json");
    std::fs::write(
        &file,
        serde_json::to_string(&policy(&recipient, false)).expect("JSON"),
    )
    .expect("writes");
    for with_policy in [true, false] {
        let mut cmd = mwp();
        cmd.args(["serve", "--addr", "127.0.0.1:0", "--data"])
            .arg(tmp.path().join("d"))
            .env("MWP_LOG", "info")
            .stderr(std::process::Stdio::piped());
        if with_policy {
            cmd.arg("--org-policy").arg(&file);
        }
        let mut child = cmd.spawn().expect("starts");
        let mut reader = std::io::BufReader::new(child.stderr.take().expect("stderr"));
        let (_, logged) = read_address(&mut reader);
        let _ = child.kill();
        let _ = child.wait();
        let said = logged.join("");
        if with_policy {
            assert!(
                said.contains("sealed when archived") && said.contains("acme"),
                "{said}"
            );
        } else {
            assert!(said.contains("keep their history in the clear"), "{said}");
        }
    }
}
