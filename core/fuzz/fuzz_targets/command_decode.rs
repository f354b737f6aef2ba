//! Fuzzes command decoding (JSON and CBOR) on arbitrary bytes.
#![no_main]

#[path = "../src/targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::command_decode(data));
