#!/usr/bin/env bash
# The WebAssembly benchmarks of docs/bench-wasm.md: replay rate natively (criterion) and in
# Node (wasm) on the same log, IndexedDB append rates in headless Chromium, the sizes of the
# shipped module and of the replica-only viewer module. Its last line is one JSON object: the
# wasm replay against native built without SHA extensions in the same run (the goal's
# baseline) and against native as built, the module sizes, and each step's peak RSS.
# Needs the tools of scripts/test-wasm.sh.
# Usage: scripts/bench-wasm.sh      (MWP_BENCH_WASM_IDB=0 skips the IndexedDB step)
set -euo pipefail
cd "$(dirname "$0")/.."
export MWP_TOOLS_DIR=${MWP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mwp-wasm-tools}
target=${CARGO_TARGET_DIR:-$PWD/target}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

MWP_WASM_OPT=1 scripts/build-wasm.sh | tail -1
scripts/build-wasm-viewer.sh | tail -3

# Runs a step under /usr/bin/time -v into $log/NAME, shows its lines matching PATTERN.
step() {
  local name=$1 pattern=$2
  shift 2
  /usr/bin/time -v "$@" >"$log/$name" 2>&1 || { cat "$log/$name"; exit 1; }
  grep -E "$pattern" "$log/$name" || true
}
# Peak RSS in KiB of a step run by `step`.
rss() { sed -n 's/.*Maximum resident set size (kbytes): //p' "$log/$1"; }
# A criterion benchmark's median in milliseconds, from its estimates.json.
median_ms() {
  node -e 'const e = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
           console.log((e.median.point_estimate / 1e6).toFixed(2))' "$1/new/estimates.json"
}

echo "== native replay (criterion)"
step native "bench log|time:|thrpt:|Maximum resident" cargo bench -p mwp-wasm --bench replay
echo "== native replay, SHA-256 without the CPU's SHA extensions (sha2 force-soft): the baseline of the wasm goal"
step soft "bench log|time:|thrpt:|Maximum resident" \
  env CARGO_TARGET_DIR="$target/bench-soft" cargo bench --manifest-path wasm/bench-soft/Cargo.toml
echo "== wasm replay in Node"
step node "bench log|events/s|Maximum resident" node js/bench/replay.mjs
if [ "${MWP_BENCH_WASM_IDB:-1}" != 0 ]; then
  echo "== IndexedDB append rate in headless Chromium"
  node js/bench/idb.mjs
fi
echo "== module sizes"
# The dashboard's module is the committed one (scripts/build-dashboard.sh; the test run checks
# that it matches the sources).
full=js/pkg/mwp_wasm_bg.wasm viewer=js/pkg-viewer/mwp_wasm_bg.wasm dashboard=host-native/dashboard/pkg/mwp_wasm_bg.wasm
for m in "$full" "$viewer" "$dashboard"; do
  raw=$(stat -c %s "$m") gz=$(gzip -9 -c "$m" | wc -c)
  echo "$m: $raw bytes ($(( raw / 1024 )) KiB), gzip -9: $gz bytes ($(( gz / 1024 )) KiB)"
done

bench="replay/native replay_log (decode, verify, apply)"
native_ms=$(median_ms "$target/criterion/$bench")
soft_ms=$(median_ms "$target/bench-soft/criterion/$bench")
wasm_ms=$(sed -n 's/.* in \([0-9.]*\) ms (median.*/\1/p' "$log/node")
events=$(sed -n 's/^bench log: \([0-9]*\) events.*/\1/p' "$log/node")
node -e '
  const [events, wasm, soft, native, full, fullGz, viewer, viewerGz, dashboard, dashboardGz, rssWasm, rssSoft, rssNative] =
    process.argv.slice(1).map(Number);
  const r = (x) => Math.round(x * 1000) / 1000;
  console.log(JSON.stringify({
    bench: "wasm", events,
    wasm_replay_ms: wasm, native_soft_replay_ms: soft, native_replay_ms: native,
    wasm_over_native_soft: r(wasm / soft), wasm_over_native: r(wasm / native),
    full_module_bytes: full, full_module_gzip_bytes: fullGz,
    viewer_module_bytes: viewer, viewer_module_gzip_bytes: viewerGz,
    dashboard_module_bytes: dashboard, dashboard_module_gzip_bytes: dashboardGz,
    peak_rss_kib: { wasm_replay: rssWasm, native_soft_bench: rssSoft, native_bench: rssNative },
  }));' "$events" "$wasm_ms" "$soft_ms" "$native_ms" \
  "$(stat -c %s "$full")" "$(gzip -9 -c "$full" | wc -c)" \
  "$(stat -c %s "$viewer")" "$(gzip -9 -c "$viewer" | wc -c)" \
  "$(stat -c %s "$dashboard")" "$(gzip -9 -c "$dashboard" | wc -c)" \
  "$(rss node)" "$(rss soft)" "$(rss native)"
