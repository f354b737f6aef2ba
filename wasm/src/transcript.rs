//! Transcripts (SPEC §12) and vectors, run in wasm exactly as natively.

use mwp_core::transcript::run_in_memory;
use wasm_bindgen::prelude::*;

use crate::codec::{num, to_js};
use crate::error::TranscriptError;

/// Runs a transcript (JSON Lines text) on a fresh in-memory authority. Returns
/// `{lines, failed}`: `lines` are the runner's output lines as JSON text (byte for byte what
/// `mwp transcript` prints), `failed` whether any step's `expect` failed.
#[wasm_bindgen(js_name = runTranscript)]
pub fn run_transcript(text: &str) -> Result<JsValue, TranscriptError> {
    let (outs, failed) = run_in_memory(text);
    let lines = outs
        .iter()
        .map(serde_json::to_string)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TranscriptError::malformed(format!("output line: {e}")))?;
    Ok(to_js(
        &serde_json::json!({"lines": lines, "failed": failed}),
    )?)
}

/// Runs a transcript and returns its vector lines (see [`crate::vectors`]).
#[wasm_bindgen(js_name = vectorLines)]
pub fn vector_lines(text: &str) -> Result<Vec<String>, TranscriptError> {
    Ok(crate::vectors::vector_lines(text)?)
}

/// Replays a frame batch of stored events (decode, verify, chain, apply). Returns
/// `{seq, stateHash}`.
#[wasm_bindgen(js_name = replayLog)]
pub fn replay_log(batch: &[u8]) -> Result<JsValue, TranscriptError> {
    let (seq, hash) = crate::vectors::replay_log(batch)?;
    let out = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&out, &"seq".into(), &num(seq).into());
    let _ = js_sys::Reflect::set(&out, &"stateHash".into(), &hash.to_hex().into());
    Ok(out.into())
}

/// The deterministic benchmark log of [`crate::vectors::bench_log`] (a frame batch).
#[wasm_bindgen(js_name = benchLog)]
pub fn bench_log(items: u32) -> Result<Vec<u8>, TranscriptError> {
    Ok(crate::vectors::bench_log(items)?)
}
