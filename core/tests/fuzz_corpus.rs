//! Replays the saved fuzz corpus (`core/fuzz/corpus/<target>/`) and every saved crash
//! (`core/fuzz/regressions/<target>/`) through the fuzz targets' own code, so `cargo test`
//! keeps what the fuzzer found fixed without nightly or libFuzzer.

use std::path::{Path, PathBuf};

mod common;
#[path = "../fuzz/src/targets.rs"]
mod targets;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn inputs(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = fuzz_dir().join(kind).join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).expect("readable input");
            (p, bytes)
        })
        .collect()
}

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let mut n = 0;
    for kind in ["corpus", "regressions"] {
        for (path, bytes) in inputs(kind, target) {
            let outcome = std::panic::catch_unwind(|| run(&bytes));
            assert!(outcome.is_ok(), "{} panics", path.display());
            n += 1;
        }
    }
    n
}

#[test]
fn command_decode_corpus_replays() {
    let n = replay("command_decode", targets::command_decode);
    assert!(n >= 20, "the command_decode corpus holds seeds ({n} found)");
}

#[test]
fn accept_corpus_replays() {
    let n = replay("accept", targets::accept_bytes);
    assert!(n >= 20, "the accept corpus holds seeds ({n} found)");
}

/// The seeds reach past decoding and the signature: some are accepted, some rejected by
/// domain rules. A corpus of undecodable bytes would make the fuzzer start from nothing.
#[test]
fn accept_seeds_reach_the_domain_rules() {
    use mwp_core::{accept, Command, Decision, Limits, SecretKey};
    let state = targets::fixed_state();
    let (mut accepted, mut domain) = (0, 0);
    for (_, bytes) in inputs("corpus", "accept") {
        let Some((header, body)) = bytes.split_at_checked(targets::ACCEPT_HEADER) else {
            continue;
        };
        let limits = Limits::default();
        let cmd = if header[0] & targets::FLAG_CBOR != 0 {
            Command::from_cbor(body, &limits)
        } else {
            Command::from_json(body, &limits)
        };
        let Ok(mut cmd) = cmd else { continue };
        if header[0] & targets::FLAG_RESIGN != 0 {
            cmd.sign(&SecretKey::for_transcript(cmd.actor.as_str()))
                .expect("signs");
        }
        match accept(Some(state), &cmd, targets::BASE_MS, &limits) {
            Ok(Decision::Accepted(_)) => accepted += 1,
            Ok(Decision::Rejected(r)) if r.code > mwp_core::Code::WrongSession => domain += 1,
            _ => {}
        }
    }
    assert!(
        accepted >= 5 && domain >= 5,
        "accepted {accepted}, domain rejections {domain}"
    );
}

/// Regenerates the seed corpus from the transcripts' commands:
/// `cargo test -p mwp-core --test fuzz_corpus -- --ignored write_seed_corpus`.
#[test]
#[ignore = "writes files; run by hand to refresh the seeds"]
fn write_seed_corpus() {
    use std::collections::BTreeMap;

    use mwp_core::Command;

    let mut commands = Vec::new();
    for (_, text) in common::transcripts() {
        let mut host = common::Recorder::default();
        common::run(&mut host, &text);
        commands.extend(host.commands);
    }
    // A few of each type, small ones only.
    let mut per_type: BTreeMap<&'static str, Vec<Command>> = BTreeMap::new();
    for cmd in commands {
        let picked = per_type.entry(cmd.body.type_name()).or_default();
        let size = cmd.to_cbor().map_or(usize::MAX, |b| b.len());
        if picked.len() < 2 && size < 4096 && !picked.contains(&cmd) {
            picked.push(cmd);
        }
    }
    let write = |target: &str, name: String, bytes: Vec<u8>| {
        let d = fuzz_dir().join("corpus").join(target);
        std::fs::create_dir_all(&d).expect("corpus dir");
        std::fs::write(d.join(name), bytes).expect("writes");
    };
    for (ty, cmds) in &per_type {
        for (i, cmd) in cmds.iter().enumerate() {
            let json = serde_json::to_vec(cmd).expect("json");
            let cbor = cmd.to_cbor().expect("cbor");
            write("command_decode", format!("{ty}-{i}.json"), json.clone());
            if i == 0 {
                write("command_decode", format!("{ty}-{i}.cbor"), cbor.clone());
            }
            let (flags, body, ext) = if i == 0 {
                (targets::FLAG_RESIGN, json, "json")
            } else {
                (targets::FLAG_RESIGN | targets::FLAG_CBOR, cbor, "cbor")
            };
            let mut input = vec![flags];
            input.extend_from_slice(&(i as u64 * 7_000).to_le_bytes());
            input.extend_from_slice(&body);
            write("accept", format!("{ty}-{i}.{ext}"), input);
        }
    }
}
