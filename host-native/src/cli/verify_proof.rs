//! `mwp verify-proof FILE [--authority-key HEX]`: checks a fork proof (SPEC §8a, docs/format.md
//! "Fork proof") with nothing but its contents: both heads verify under the authority key
//! and either name one seq with two ids, or the events chain from the lower head to the
//! higher one past the lower seq with another id. With `--authority-key` the proof must be
//! about that key.
//!
//! Prints `{"ok": true, "fork": {org, group, seq, ids, kind}, "authority_key"}` and exits 0
//! when it proves a fork; `{"ok": false, "error": …}` and exit 1 when it does not; exit 2 when
//! the file cannot be read.

use std::path::Path;

use mwp_core::head::ForkProof;
use serde_json::json;

use super::client::{print, OutputArgs};
use super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};

/// Runs `mwp verify-proof`.
pub fn run(file: &Path, authority_key: Option<&str>, output: &OutputArgs) -> Outcome {
    let pinned = match authority_key {
        Some(hex) => Some(super::export::parse_key(hex, "--authority-key")?),
        None => None,
    };
    let bytes = super::input::read(file, super::input::MAX_PROOF_BYTES).map_err(|e| {
        Failure::new(
            EXIT_BAD_INPUT,
            format!("cannot read the fork proof {}: {e}", file.display()),
        )
    })?;
    let checked =
        ForkProof::from_cbor(&bytes).and_then(|p| p.verify(pinned.as_ref()).map(|f| (p, f)));
    let json = output.json();
    match checked {
        Ok((proof, fork)) => {
            let value = json!({"ok": true, "fork": fork, "authority_key": proof.authority});
            print(json, &value, || {
                format!(
                    "ok: the authority {} signed two histories of {}/{}: at seq {} it vouched for {} and {} ({})",
                    proof.authority, fork.org, fork.group, fork.seq, fork.ids[0], fork.ids[1], fork.kind
                )
            })?;
            Ok(EXIT_OK)
        }
        Err(e) => {
            let value = json!({"ok": false, "error": e});
            print(json, &value, || format!("NOT A PROOF: {e}"))?;
            Ok(EXIT_FAILED)
        }
    }
}
