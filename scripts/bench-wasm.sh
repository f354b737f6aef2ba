#!/usr/bin/env bash
# The WebAssembly benchmarks of docs/bench-wasm.md: replay rate natively (criterion) and in
# Node (wasm) on the same log, IndexedDB append rates in headless Chromium, the module size.
# Needs js/pkg (scripts/build-wasm.sh) and the tools of scripts/test-wasm.sh.
# Usage: scripts/bench-wasm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export MWP_TOOLS_DIR=${MWP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mwp-wasm-tools}
MWP_WASM_OPT=1 scripts/build-wasm.sh | tail -1
echo "== native replay (criterion)"
/usr/bin/time -v cargo bench -p mwp-wasm --bench replay 2>&1 | grep -E "bench log|time:|thrpt:|Maximum resident"
echo "== native replay, SHA-256 without the CPU's SHA extensions (sha2 force-soft): the baseline of the wasm goal"
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}/bench-soft /usr/bin/time -v cargo bench --manifest-path wasm/bench-soft/Cargo.toml 2>&1 | grep -E "bench log|time:|thrpt:|Maximum resident"
echo "== wasm replay in Node"
/usr/bin/time -v node js/bench/replay.mjs 2>&1 | grep -E "bench log|events/s|Maximum resident"
echo "== IndexedDB append rate in headless Chromium"
node js/bench/idb.mjs
echo "== module size"
raw=$(stat -c %s js/pkg/mwp_wasm_bg.wasm)
gz=$(gzip -9 -c js/pkg/mwp_wasm_bg.wasm | wc -c)
echo "js/pkg/mwp_wasm_bg.wasm: $raw bytes ($(( raw / 1024 )) KiB), gzip -9: $gz bytes ($(( gz / 1024 )) KiB)"
