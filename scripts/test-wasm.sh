#!/usr/bin/env bash
# The WebAssembly / JavaScript suites, installing what is missing first:
#   wasm32 target, wasm-bindgen-cli 0.2.130 (only if `wasm-bindgen --version` differs),
#   Chromium + chromedriver (apt), and deno / binaryen (wasm-opt) / playwright-core (npm,
#   into a cache folder: $MWP_TOOLS_DIR, default ~/.cache/mwp-wasm-tools).
# Then: builds js/pkg (scripts/build-wasm.sh), runs the wasm-bindgen-test suites in Node and
# in headless Chromium (IndexedDB included), the native vector test, the JS tests in Node,
# the Deno tests (the JS tests include the Node/Deno file store against the native `mwp`
# binary), the browser page, the dashboard (against a stand-in server, against `mwp serve`,
# and the dashboard embedded in `mwp` over `mwp demo --exit`'s data, with a screenshot to
# $CARGO_TARGET_DIR/dashboard.png) and the packaging test; and checks that the embedded
# dashboard (host-native/dashboard/) matches its sources. Each suite prints its counts.
# Usage: scripts/test-wasm.sh
#        MWP_UPDATE_SCREENSHOT=1 scripts/test-wasm.sh   also rewrites docs/dashboard.png
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
export MWP_WASM_OPT=${MWP_WASM_OPT:-0}  # wasm-opt (slow) only for release builds and benchmarks
export MWP_TOOLS_DIR=${MWP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mwp-wasm-tools}
WASM_BINDGEN_VERSION=0.2.130
step() { printf '\n==> [%ss] %s\n' "$(( $(date +%s) - start ))" "$*"; }
start=$(date +%s)

step "tools"
rustup target list --installed | grep -q '^wasm32-unknown-unknown$' || rustup target add wasm32-unknown-unknown
if [ "$(wasm-bindgen --version 2>/dev/null || true)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  apt-get update -qq && apt-get install -y -qq nodejs npm
fi
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  apt-get update -qq && apt-get install -y -qq chromium chromium-driver
fi
mkdir -p "$MWP_TOOLS_DIR"
if [ ! -x "$MWP_TOOLS_DIR/node_modules/.bin/deno" ] || [ ! -x "$MWP_TOOLS_DIR/node_modules/.bin/wasm-opt" ] \
   || [ ! -f "$MWP_TOOLS_DIR/node_modules/playwright-core/index.mjs" ]; then
  (cd "$MWP_TOOLS_DIR" && npm install --silent --no-audit --no-fund deno@2.9.6 binaryen@132.0.0 playwright-core@1.65.1)
fi
deno="$MWP_TOOLS_DIR/node_modules/.bin/deno"
echo "node $(node --version), $("$deno" --version | head -1), $(wasm-bindgen --version), chromium $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}')"

step "build js/pkg (wasm-release + wasm-bindgen; wasm-opt if MWP_WASM_OPT=1)"
scripts/build-wasm.sh

step "the dashboard embedded in mwp (host-native/dashboard/) matches its sources"
scripts/build-dashboard.sh --check

step "wasm-bindgen-test: Node (tests/node.rs) and headless Chromium with IndexedDB (tests/browser.rs)"
CHROMEDRIVER=/usr/bin/chromedriver \
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test -p mwp-wasm --target wasm32-unknown-unknown

step "vectors, natively (tests/tests/vectors.rs)"
cargo test -p mwp-tests --test vectors

step "native mwp binary (the file store tests compare against it)"
cargo build -p mwp-host --bin mwp
export MWP_BIN="$root/${CARGO_TARGET_DIR:-target}/debug/mwp"
case "${CARGO_TARGET_DIR:-}" in /*) MWP_BIN="$CARGO_TARGET_DIR/debug/mwp" ;; esac

step "npm package in Node (node --test; the file store against the native one)"
(cd js && node --test test/*.test.js)

step "npm package in Deno (the same file store cases)"
(cd js && "$deno" test --quiet --no-check --allow-read --allow-write --allow-run --allow-env --no-lock test/deno/)

step "npm package in headless Chromium (vectors + IndexedDB through the JS API)"
node js/test/browser/run.js

step "dashboard in headless Chromium (replay, verify, graph, live tail, cached reload)"
node js/test/browser/dashboard.js

step "end to end against mwp serve: HTTP client and the dashboard it serves"
node js/test/e2e/serve.js

step "end to end: mwp demo --exit, then mwp serve with the embedded dashboard, in headless Chromium"
MWP_BIN="${CARGO_TARGET_DIR:-target}/debug/mwp" node js/test/e2e/dashboard.js

step "packaging: npm pack → install → Node ESM, Deno, plain HTML page"
node js/packaging/run.js

echo
echo "wasm/js suites passed in $(( $(date +%s) - start ))s"
