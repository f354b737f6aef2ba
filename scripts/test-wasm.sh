#!/usr/bin/env bash
# The WebAssembly / JavaScript suites, installing what is missing first:
#   wasm32 target, wasm-bindgen-cli 0.2.130 (only if `wasm-bindgen --version` differs),
#   Chromium + chromedriver (apt), and deno / binaryen (wasm-opt) / playwright-core / axe-core /
#   typescript with @types/node (npm, into a cache folder: $MWP_TOOLS_DIR, default
#   ~/.cache/mwp-wasm-tools).
# Then: builds js/pkg (scripts/build-wasm.sh), runs the wasm-bindgen-test suites in Node and
# in headless Chromium (IndexedDB included), the native vector test, the JS tests in Node,
# the Deno tests (the JS tests include the Node/Deno file store against the native `mwp`
# binary), the browser page, the dashboard (against a stand-in server, against `mwp serve`,
# and the dashboard embedded in `mwp` over `mwp demo --exit`'s data, with a screenshot to
# $CARGO_TARGET_DIR/dashboard.png) and the packaging test; and checks that the embedded
# dashboard (host-native/dashboard/) matches its sources. Each suite prints its counts.
# The end-to-end and browser steps are scripts/test-e2e.sh, run last.
# Usage: scripts/test-wasm.sh
#        scripts/test-wasm.sh --repeat-e2e N   sets up and builds, then runs only the
#                                               end-to-end and browser steps N times in a row
#        MWP_UPDATE_SCREENSHOT=1 scripts/test-wasm.sh   also rewrites docs/dashboard.png and
#                                                       docs/dashboard-static.png
set -euo pipefail
repeat=""
case "${1:-}" in
  --repeat-e2e)
    repeat=${2:-}
    [[ "$repeat" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 --repeat-e2e N (N ≥ 1)" >&2; exit 2; } ;;
  "") ;;
  *) echo "usage: $0 [--repeat-e2e N]" >&2; exit 2 ;;
esac
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
   || [ ! -f "$MWP_TOOLS_DIR/node_modules/playwright-core/index.mjs" ] \
   || [ ! -f "$MWP_TOOLS_DIR/node_modules/axe-core/axe.min.js" ]; then
  (cd "$MWP_TOOLS_DIR" && npm install --silent --no-audit --no-fund deno@2.9.6 binaryen@132.0.0 playwright-core@1.65.1 axe-core@4.14.1)
fi
if [ ! -x "$MWP_TOOLS_DIR/node_modules/.bin/tsc" ] || [ ! -f "$MWP_TOOLS_DIR/node_modules/@types/node/package.json" ]; then
  (cd "$MWP_TOOLS_DIR" && npm install --silent --no-audit --no-fund typescript@5.9.3 @types/node@20.19.9)
fi
deno="$MWP_TOOLS_DIR/node_modules/.bin/deno"
echo "node $(node --version), $("$deno" --version | head -1), $(wasm-bindgen --version), chromium $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}')"

step "build js/pkg (wasm-release + wasm-bindgen; wasm-opt if MWP_WASM_OPT=1)"
scripts/build-wasm.sh

if [ -n "$repeat" ]; then
  step "build what the end-to-end steps run: the mwp binary and the Rust e2e tests"
  E2E_RUST_TESTS=$(cd host-native/tests && for f in e2e_*.rs store_lock.rs; do printf -- '--test %s ' "${f%.rs}"; done)
  export E2E_RUST_TESTS
  # These also build the mwp binary the JS steps run (an e2e test needs it).
  # shellcheck disable=SC2086
  cargo test --workspace --all-features $E2E_RUST_TESTS --no-run
  cargo test -p mwp-wasm --target wasm32-unknown-unknown --test browser --no-run
  export MWP_BIN="$root/${CARGO_TARGET_DIR:-target}/debug/mwp"
  case "${CARGO_TARGET_DIR:-}" in /*) MWP_BIN="$CARGO_TARGET_DIR/debug/mwp" ;; esac
  logs=$(mktemp -d "${TMPDIR:-/tmp}/mwp-e2e-repeat.XXXXXX")
  passed=0 failed=0
  for i in $(seq 1 "$repeat"); do
    t=$(date +%s)
    if scripts/test-e2e.sh >"$logs/run-$i.log" 2>&1; then
      passed=$((passed + 1)); rm -f "$logs/run-$i.log"
      echo "e2e run $i/$repeat: passed in $(( $(date +%s) - t ))s"
    else
      failed=$((failed + 1))
      echo "e2e run $i/$repeat: FAILED in $(( $(date +%s) - t ))s (log: $logs/run-$i.log)"
      grep -E '^(FAIL|not ok|test .* FAILED|---- )' "$logs/run-$i.log" | head -20 || true
    fi
  done
  echo
  echo "e2e repeat: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
fi

step "cargo clippy of the viewer and dashboard builds (wasm32; the workspace step lints the full one)"
for features in viewer dashboard; do
  cargo clippy -p mwp-wasm --target wasm32-unknown-unknown --no-default-features \
    --features "$features" -- -D warnings
done

step "the dashboard embedded in mwp (host-native/dashboard/) matches its sources"
# The glue and the module byte for byte. The dashboard's build does not carry the `age` crate,
# whose localisation macro orders a few strings by a randomly seeded hash map (docs/decisions.md,
# "The dashboard's module").
scripts/build-dashboard.sh --check

step "wasm-bindgen-test: Node (tests/node.rs)"
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test -p mwp-wasm --target wasm32-unknown-unknown --test node

step "vectors, natively (tests/tests/vectors.rs)"
cargo test --workspace --all-features --test vectors

step "native mwp binary (the file store tests compare against it)"
# Built as `cargo test` builds it (the test profile, features resolved with the dev
# dependencies), so that after the workspace's tests this builds nothing again: a plain
# `cargo build --bin mwp` resolves other features and rebuilt most dependencies.
cargo test --workspace --all-features --no-run --test e2e_cli
export MWP_BIN="$root/${CARGO_TARGET_DIR:-target}/debug/mwp"
case "${CARGO_TARGET_DIR:-}" in /*) MWP_BIN="$CARGO_TARGET_DIR/debug/mwp" ;; esac

step "npm package in Node (node --test; the file store against the native one)"
(cd js && node --test test/*.test.js)

step "npm package in Deno (the same file store cases)"
(cd js && "$deno" test --quiet --no-check --allow-read --allow-write --allow-run --allow-env --allow-net=127.0.0.1 --no-lock test/deno/)

step "TypeScript: tsc --strict over the examples (.mjs with checkJs, and types.ts) against index.d.ts"
(cd js/examples && "$MWP_TOOLS_DIR/node_modules/.bin/tsc" -p tsconfig.json --typeRoots "$MWP_TOOLS_DIR/node_modules/@types")

step "end-to-end and browser steps (scripts/test-e2e.sh)"
MWP_E2E_RUST=0 scripts/test-e2e.sh

echo
echo "wasm/js suites passed in $(( $(date +%s) - start ))s"
