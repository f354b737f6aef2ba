//! `mwp snapshot` and `mwp verify-snapshot`.

use std::io::Write;
use std::path::Path;

use mwp_core::snapshot::Snapshot;
use mwp_core::{Id, PublicKey};
use serde_json::json;

use super::store::{self, StoreUrl};
use super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE};

fn id(value: &str, flag: &str) -> Result<Id, Failure> {
    Id::new(value).map_err(|e| Failure::new(EXIT_BAD_INPUT, format!("{flag}: {e}")))
}

/// `mwp snapshot`: writes the latest signed snapshot of `group` to `out` (or stdout); with
/// `out`, prints a JSON line describing it.
pub fn take(url: &StoreUrl, group: &str, out: Option<&Path>) -> Outcome {
    let group = id(group, "--group")?;
    let read_only = store::Options {
        read_only: true,
        ..store::Options::default()
    };
    let service = store::open(url, &read_only)?;
    let bytes = service
        .latest_snapshot(&group)
        .map_err(|e| Failure::from_error(&format!("cannot take a snapshot of {group}"), &e))?;
    let snap =
        Snapshot::from_cbor(&bytes).map_err(|e| Failure::from_error("the store's snapshot", &e))?;
    let write_err = |e: std::io::Error| {
        Failure::new(EXIT_UNAVAILABLE, format!("cannot write the snapshot: {e}"))
    };
    match out {
        Some(path) => {
            std::fs::write(path, &bytes).map_err(write_err)?;
            println!(
                "{}",
                json!({"file": path.display().to_string(), "org": snap.org, "group": snap.group,
                       "seq": snap.seq, "state_hash": snap.state_hash, "signer": snap.signer})
            );
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(&bytes)
                .and_then(|()| stdout.flush())
                .map_err(write_err)?;
        }
    }
    Ok(EXIT_OK)
}

/// `mwp verify-snapshot`: prints `{"ok": true, …}` and exits 0 when the snapshot verifies;
/// prints `{"ok": false, "error": …}` and exits 1 when it does not.
pub fn verify(file: &Path, key: &str, org: &str, group: &str, min_seq: u64) -> Outcome {
    let key = PublicKey::from_hex(key)
        .map_err(|e| Failure::new(EXIT_BAD_INPUT, format!("--key: {e}")))?;
    let (org, group) = (id(org, "--org")?, id(group, "--group")?);
    let max = mwp_core::export::MAX_SNAPSHOT_FILE;
    let bytes = super::input::read(file, max).map_err(|e| {
        Failure::new(
            EXIT_BAD_INPUT,
            format!("cannot read snapshot {}: {e}", file.display()),
        )
    })?;
    match Snapshot::verify_bytes(&bytes, &key, &org, &group, min_seq) {
        Ok(snap) => {
            println!(
                "{}",
                json!({"ok": true, "org": snap.org, "group": snap.group, "mission": snap.mission,
                       "seq": snap.seq, "chain_head": snap.chain_head, "state_hash": snap.state_hash})
            );
            Ok(EXIT_OK)
        }
        Err(e) => {
            println!("{}", json!({"ok": false, "error": e}));
            Ok(EXIT_FAILED)
        }
    }
}
