//! Cross-host determinism: the vectors in `tests/vectors/` are the native results of their
//! transcripts, byte for byte. The same vectors are checked in Node, Deno and Chromium
//! (scripts/test-wasm.sh). `MWP_UPDATE_VECTORS=1 cargo test -p mwp-tests --test vectors`
//! rewrites them after an intended change.

use std::path::{Path, PathBuf};

fn vector_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors")
}

fn inputs() -> Vec<PathBuf> {
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(vector_dir())
        .expect("tests/vectors exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(".jsonl") && !name.ends_with(".out.jsonl")
        })
        .collect();
    inputs.sort();
    inputs
}

#[test]
fn native_results_equal_the_checked_in_vectors() {
    let update = std::env::var_os("MWP_UPDATE_VECTORS").is_some();
    let inputs = inputs();
    assert!(
        inputs.len() >= 3,
        "expected at least three vector transcripts"
    );
    for input in inputs {
        let text = std::fs::read_to_string(&input).expect("readable transcript");
        let lines = mwp_wasm::vectors::vector_lines(&text).expect("the transcript runs");
        for line in &lines {
            assert!(
                !line.contains("\"mismatch\"") && !line.contains("\"outcome\":\"invalid\""),
                "{}: a step failed its expectation: {line}",
                input.display()
            );
        }
        let mut got = lines.join("\n");
        got.push('\n');
        let out = input.with_extension("out.jsonl");
        if update {
            std::fs::write(&out, &got).expect("writable vectors");
            continue;
        }
        let want = std::fs::read_to_string(&out).unwrap_or_else(|_| {
            panic!(
                "{} is missing; run with MWP_UPDATE_VECTORS=1",
                out.display()
            )
        });
        for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
            assert_eq!(g, w, "{}: line {} differs", out.display(), i + 1);
        }
        assert_eq!(
            got.lines().count(),
            want.lines().count(),
            "{}: line count",
            out.display()
        );
    }
}

#[test]
fn replay_and_a_scrambled_replica_reach_the_authority_state() {
    for input in inputs() {
        let text = std::fs::read_to_string(&input).expect("readable transcript");
        let lines = mwp_wasm::vectors::vector_lines(&text).expect("the transcript runs");
        let last: serde_json::Value =
            serde_json::from_str(lines.last().expect("a replay line")).expect("JSON");
        let before: serde_json::Value =
            serde_json::from_str(&lines[lines.len() - 2]).expect("JSON");
        let r = &last["replay"];
        assert_eq!(r["state_hash"], before["state_hash"], "{}", input.display());
        assert_eq!(
            r["replica_state_hash"],
            r["state_hash"],
            "{}",
            input.display()
        );
        assert_eq!(r["replica_cursor"], r["seq"], "{}", input.display());
    }
}
