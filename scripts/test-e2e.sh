#!/usr/bin/env bash
# The end-to-end and browser steps, once: what `scripts/test --repeat-e2e N` runs N times in a
# row, and what scripts/test-wasm.sh runs as its last part. Expects what scripts/test-wasm.sh
# sets up first: the tools in $MWP_TOOLS_DIR, js/pkg built, and the mwp binary at $MWP_BIN.
#   1. HTTP end to end in Rust (host-native/tests/e2e_*.rs: the HTTP API, its boundary and
#      access rules, strict signatures, restarts, the CLI; store_lock.rs: two servers on one
#      directory, read-only tools beside a loaded server), unless
#      MWP_E2E_RUST=0 (the workspace's `cargo test` has run them already);
#   2. wasm-bindgen-test in headless Chromium with IndexedDB (wasm/tests/browser.rs);
#   3. the npm package, the dashboard (stand-in server, a static export on a plain file host,
#      `mwp serve`, the embedded dashboard
#      over `mwp demo --exit`'s data and over a 100,000-item Group, each checked by axe-core)
#      and the packaging test, in headless Chromium.
# Every wait in these steps waits for a state and is bounded generously (js/test/static-server.js,
# WAIT_MS), so a loaded machine is slower, never red.
# Usage: scripts/test-e2e.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
export MWP_TOOLS_DIR=${MWP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mwp-wasm-tools}
export MWP_BIN=${MWP_BIN:-$root/${CARGO_TARGET_DIR:-target}/debug/mwp}
case "${CARGO_TARGET_DIR:-}" in /*) MWP_BIN="$CARGO_TARGET_DIR/debug/mwp" ;; esac
# wasm-bindgen-test-runner gives a browser test 20 s by default: far too little for a debug
# build on a loaded 2-core machine.
export WASM_BINDGEN_TEST_TIMEOUT=${WASM_BINDGEN_TEST_TIMEOUT:-600}
# The Rust end-to-end test targets (scripts/test-wasm.sh builds the same list before repeating).
E2E_RUST_TESTS=${E2E_RUST_TESTS:-$(cd host-native/tests && for f in e2e_*.rs store_lock.rs; do printf -- '--test %s ' "${f%.rs}"; done)}
export E2E_RUST_TESTS
start=$(date +%s)
step() { printf '\n==> [%ss] %s\n' "$(( $(date +%s) - start ))" "$*"; }

if [ "${MWP_E2E_RUST:-1}" != 0 ]; then
  step "HTTP end to end: mwp serve over real HTTP, restarts, the CLI (host-native/tests/e2e_*.rs, store_lock.rs)"
  # shellcheck disable=SC2086
  cargo test --workspace --all-features $E2E_RUST_TESTS
fi

# The page served from js/dashboard loads the module the embedded dashboard ships (the
# committed one, which scripts/build-dashboard.sh --check holds to the sources), not the full
# module scripts/build-wasm.sh put there.
mkdir -p js/dashboard/lib/pkg
cp host-native/dashboard/pkg/mwp_wasm.js host-native/dashboard/pkg/mwp_wasm_bg.wasm js/dashboard/lib/pkg/

step "wasm-bindgen-test in headless Chromium with IndexedDB (wasm/tests/browser.rs)"
CHROMEDRIVER=/usr/bin/chromedriver \
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test -p mwp-wasm --target wasm32-unknown-unknown --test browser

step "npm package in headless Chromium (vectors + IndexedDB through the JS API, runAgent restarting from IndexedDB)"
node js/test/browser/run.js

step "dashboard in headless Chromium (replay, verify, graph, live tail, cached reload)"
node js/test/browser/dashboard.js

step "dashboard over a static export from a plain file host (no /v1/), its error phase, and signed heads live"
node js/test/browser/dashboard-static.js

step "end to end against mwp serve: HTTP client and the dashboard it serves"
node js/test/e2e/serve.js

step "end to end: the example worker (runAgent) works a mission against mwp serve, in Node and in Deno"
node js/test/e2e/worker.js

step "end to end: the example planner (runAgent, config.planner) grows a graph against mwp serve through a crash, in Node and in Deno"
node js/test/e2e/planner.js

step "end to end: the dashboard against mwp serve --token-file (no credential, a read token, a member's signed reads)"
node js/test/e2e/access.js

step "end to end: mwp demo --exit, then mwp serve with the embedded dashboard, in headless Chromium"
node js/test/e2e/dashboard.js

step "end to end: the embedded dashboard over a Group of 100,000 work items (mwp bench), its render time and a bounded DOM"
node js/test/e2e/dashboard-100k.js

step "packaging: npm pack → install → Node ESM, Deno, plain HTML page"
node js/packaging/run.js

echo
echo "end-to-end steps passed in $(( $(date +%s) - start ))s"
