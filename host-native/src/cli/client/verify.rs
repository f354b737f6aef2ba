//! `mwp verify --server URL --group G` (or `--data DIR`): downloads a group's whole history
//! and checks it locally with the core's replica, then checks the latest signed snapshot
//! against it.
//!
//! Checked: every seq from 1 to the head arrives once, in order; every event verifies (its
//! ID and payload hash) and chains to the one before (the replica's checks, SPEC §7); the
//! snapshot verifies under the authority key (SPEC §8: schema, state hash, signature, org and
//! group), and its chain head and state hash equal the replica's at the snapshot's seq. The
//! authority key is `--authority-key HEX` when given (a pin), else the one the server (or the
//! store) names. From a server, its signed head (SPEC §8a, `GET …/head`, read before the
//! history) must verify under that key and name the id the history has at its seq; the
//! answer reports `verified_through`, the seq it vouches for. Any mismatch prints
//! `{"ok": false, "seq": S, "error": …}` and exits 1.
//!
//! From a store, the snapshot checked is the newest one the store holds, as it holds it (a
//! file store's newest `.snap` file, its frame and checksum included): a store opened
//! read-only signs nothing, so no snapshot signed on the spot stands in for a missing or
//! damaged one. A store that holds none reports `"snapshot_seq": null`. Damage the store
//! finds in its own files while it is opened or read (`LOG_CORRUPT`, `SNAPSHOT_INVALID`,
//! `FORK`) is a check that failed too: `{"ok": false, …}`, exit 1.

use clap::Args;
use mwp_core::head::SignedHead;
use mwp_core::replica::{Offer, Replica};
use mwp_core::snapshot::Snapshot;
use mwp_core::{Hash, PublicKey};
use serde_json::{json, Value};

use super::super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use super::source::{Source, SourceArgs};
use super::{id, OutputArgs};

/// Events asked for per page.
const PAGE: usize = 1000;

/// `mwp verify` arguments.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Where the history is.
    #[command(flatten)]
    pub source: SourceArgs,
    /// The group.
    #[arg(long, env = "MWP_GROUP")]
    pub group: String,
    /// The authority's public key, 64 hex digits: trust this key instead of the one the
    /// server names.
    #[arg(long, value_name = "HEX")]
    pub authority_key: Option<String>,
    /// A static export to check instead (what `mwp export` writes): an http(s) base URL or
    /// a directory. Checked offline; see `verify_source`.
    #[arg(long = "source", id = "export_source", value_name = "URL|DIR", conflicts_with_all = ["data", "store"])]
    pub export_source: Option<String>,
    /// With --source: replay from the first event (`genesis`, every event checked) or from
    /// the latest signed snapshot in the export (`snapshot`).
    #[arg(
        long,
        value_enum,
        default_value = "genesis",
        requires = "export_source"
    )]
    pub from: From,
    /// With --source: where to write a fork proof when one is found (default
    /// `mwp-fork-<group>-<seq>.proof`).
    #[arg(long, value_name = "FILE", requires = "export_source")]
    pub proof_out: Option<std::path::PathBuf>,
    /// How to print.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Where `mwp verify --source` starts replaying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum From {
    /// From seq 1: every event is checked.
    Genesis,
    /// From the export's latest signed snapshot at or below the head.
    Snapshot,
}

/// A check that failed: the seq it concerns (if one) and what was wrong.
struct Mismatch {
    seq: Option<u64>,
    message: String,
}

fn mismatch(seq: impl Into<Option<u64>>, message: impl Into<String>) -> Mismatch {
    Mismatch {
        seq: seq.into(),
        message: message.into(),
    }
}

/// Runs `mwp verify`.
pub fn run(args: &VerifyArgs) -> Outcome {
    if let Some(source) = &args.export_source {
        return super::verify_source::run(args, source);
    }
    let group = id(&args.group, "--group")?;
    let json = args.output.json();
    match verify(args, &group) {
        Err(f) if f.is_damage() => {
            let e = f.error.as_ref().expect("damage carries its error");
            let seq = e.details.get("seq").and_then(Value::as_u64);
            report_mismatch(json, &group, &mismatch(seq, f.message.clone()))
        }
        other => other,
    }
}

/// Prints a failed check and answers exit 1.
fn report_mismatch(json: bool, group: &mwp_core::Id, m: &Mismatch) -> Outcome {
    let value = json!({"ok": false, "group": group, "seq": m.seq, "error": m.message});
    super::print(json, &value, || match m.seq {
        Some(seq) => format!("MISMATCH at seq {seq}: {}", m.message),
        None => format!("MISMATCH: {}", m.message),
    })?;
    Ok(EXIT_FAILED)
}

/// `mwp verify --server`/`--data`; a store's damage comes back as a [`Failure`] that
/// [`Failure::is_damage`].
fn verify(args: &VerifyArgs, group: &mwp_core::Id) -> Outcome {
    let group = group.clone();
    let source = args.source.open()?;
    let (key, key_from) = match &args.authority_key {
        Some(hex) => (
            PublicKey::from_hex(hex)
                .map_err(|e| Failure::new(EXIT_BAD_INPUT, format!("--authority-key: {e}")))?,
            "pinned",
        ),
        None => (
            source.authority_key()?,
            match source {
                Source::Server(_) => "server",
                Source::Store(_) => "store",
            },
        ),
    };
    // The snapshot first: the history read after it reaches at least its seq.
    let snapshot = source.stored_snapshot(&group)?;
    // The signed head next, for the same reason.
    let head = source.signed_head(&group)?;
    let json = args.output.json();
    match check(&source, &group, &key, snapshot.as_deref(), head.as_ref())? {
        Ok(report) => {
            let mut value = report;
            value["authority_key"] = json!(key);
            value["authority_key_from"] = json!(key_from);
            super::print(json, &value, || {
                let signed = match value["verified_through"].as_u64() {
                    Some(seq) if head.is_some() => {
                        format!("; the signed head vouches through seq {seq}")
                    }
                    _ => String::new(),
                };
                let snapshot = match value["snapshot_seq"].as_u64() {
                    Some(seq) => format!("snapshot at seq {seq} verifies under {key} ({key_from})"),
                    None => format!("no snapshot stored; key {key} ({key_from})"),
                };
                format!(
                    "ok: {} seqs of {group} checked (1..={}), head {}; {snapshot}{signed}",
                    value["seqs_checked"],
                    value["head_seq"],
                    value["head_id"].as_str().unwrap_or(""),
                )
            })?;
            Ok(EXIT_OK)
        }
        Err(m) => report_mismatch(json, &group, &m),
    }
}

/// Replays the history into a replica and checks the snapshot, if any (and the signed head,
/// when given) against it. The outer error is a failure to read; the inner one a check that
/// failed.
fn check(
    source: &Source,
    group: &mwp_core::Id,
    key: &PublicKey,
    snapshot: Option<&[u8]>,
    signed: Option<&SignedHead>,
) -> Result<Result<Value, Mismatch>, Failure> {
    let snap = match snapshot.map(Snapshot::from_cbor).transpose() {
        Ok(s) => s,
        Err(e) => {
            return Ok(Err(mismatch(
                None,
                format!("the latest snapshot does not decode: {e}"),
            )))
        }
    };
    let mut replica = Replica::new(group.clone());
    if let Some(head) = signed {
        // Kept by the replica until the history reaches its seq, where an event with another
        // id is refused as a fork.
        if let Err(e) = replica.offer_head(head, key) {
            return Ok(Err(mismatch(
                head.seq,
                format!("the server's signed head does not verify: {e}"),
            )));
        }
    }
    let mut at_snapshot: Option<(Hash, Hash)> = None;
    loop {
        let events = source.events(group, replica.cursor(), PAGE)?;
        if events.is_empty() {
            break;
        }
        for event in events {
            let (expected, seq) = (replica.cursor() + 1, event.seq);
            if seq != expected {
                return Ok(Err(mismatch(
                    expected,
                    format!(
                        "the history skips or repeats: expected seq {expected}, received seq {seq}"
                    ),
                )));
            }
            match replica.offer(event) {
                Offer::Applied { .. } if replica.cursor() == seq => {}
                Offer::Rejected(e) => {
                    return Ok(Err(mismatch(
                        seq,
                        format!("seq {seq} does not verify: {e}"),
                    )))
                }
                other => {
                    return Ok(Err(mismatch(
                        seq,
                        format!("seq {seq} was not applied in order ({})", other.name()),
                    )))
                }
            }
            if snap.as_ref().is_some_and(|s| s.seq == seq) {
                let hash = replica
                    .state_hash()
                    .map_err(|e| Failure::from_error("cannot hash the replica's state", &e))?;
                at_snapshot = Some((replica.head(), hash));
            }
        }
    }
    let head = replica.cursor();
    let Some(state) = replica.state() else {
        return Ok(Err(mismatch(
            None,
            format!("the group {group} has no events"),
        )));
    };
    if let (Some(bytes), Some(snap)) = (snapshot, &snap) {
        if let Err(m) = check_snapshot(bytes, snap, at_snapshot, key, state, group, head) {
            return Ok(Err(m));
        }
    }
    if let Some(signed) = signed {
        if signed.org != state.org {
            return Ok(Err(mismatch(
                signed.seq,
                format!(
                    "the server's signed head is of org {}, the history's is {}",
                    signed.org, state.org
                ),
            )));
        }
        if replica.verified_through() < signed.seq {
            return Ok(Err(mismatch(
                signed.seq,
                format!(
                    "the server's signed head is at seq {}, beyond the history's head {head}",
                    signed.seq
                ),
            )));
        }
    }
    let final_hash = replica
        .state_hash()
        .map_err(|e| Failure::from_error("cannot hash the replica's state", &e))?;
    Ok(Ok(json!({
        "ok": true,
        "group": group,
        "seqs_checked": head,
        "head_seq": head,
        "head_id": replica.head(),
        "state_hash": final_hash,
        "snapshot_seq": snap.as_ref().map(|s| s.seq),
        "snapshot_state_hash": snap.as_ref().map(|s| s.state_hash),
        "verified_through": replica.verified_through(),
    })))
}

/// Checks the snapshot (`bytes`, decoded as `snap`) under `key` and against the replica's
/// chain head and state hash at its seq (`at_snapshot`; `None` when the history, which ends
/// at `head`, never reached it).
fn check_snapshot(
    bytes: &[u8],
    snap: &Snapshot,
    at_snapshot: Option<(Hash, Hash)>,
    key: &PublicKey,
    state: &mwp_core::state::GroupState,
    group: &mwp_core::Id,
    head: u64,
) -> Result<(), Mismatch> {
    let Some((chain_head, state_hash)) = at_snapshot else {
        return Err(mismatch(
            snap.seq,
            format!(
                "the snapshot is at seq {}, beyond the history's head {head}",
                snap.seq
            ),
        ));
    };
    if let Err(e) = Snapshot::verify_bytes(bytes, key, &state.org, group, 0) {
        return Err(mismatch(
            snap.seq,
            format!("the snapshot at seq {} does not verify: {e}", snap.seq),
        ));
    }
    if let Err(e) = mwp_core::chain::Position::from_snapshot(snap).check_last(&chain_head) {
        return Err(mismatch(
            e.seq,
            format!(
                "the snapshot's chain head at seq {} is {}, but the history's is {}",
                e.seq, e.expected, e.received
            ),
        ));
    }
    if snap.state_hash != state_hash {
        return Err(mismatch(
            snap.seq,
            format!(
                "the snapshot's state hash at seq {} is {}, but the history's is {state_hash}",
                snap.seq, snap.state_hash
            ),
        ));
    }
    Ok(())
}
