//! Fuzzes `accept` (and `apply`) with commands decoded from arbitrary bytes.
#![no_main]

#[path = "../src/targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::accept_bytes(data));
