#!/usr/bin/env bash
# Builds the WebAssembly module and its JS glue into js/pkg/ (what the npm package ships):
#   cargo build -p mwp-wasm (profile wasm-release) → wasm-bindgen --target web → the glue's
#   argument checks (scripts/guard-glue.mjs) → wasm-opt -Oz
# and fails if the module imports anything but its wasm-bindgen glue.
# Usage: scripts/build-wasm.sh            (MWP_WASM_OPT=0 skips wasm-opt)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target_dir=${CARGO_TARGET_DIR:-$root/target}

cargo build -p mwp-wasm --target wasm32-unknown-unknown --profile wasm-release
raw="$target_dir/wasm32-unknown-unknown/wasm-release/mwp_wasm.wasm"
rm -rf js/pkg
wasm-bindgen --target web --out-dir js/pkg "$raw"
node scripts/guard-glue.mjs js/pkg/mwp_wasm.js

if [ "${MWP_WASM_OPT:-1}" != 0 ]; then
  scripts/wasm-opt.sh js/pkg/mwp_wasm_bg.wasm js/pkg/mwp_wasm_bg.wasm
fi

# The module may import only from its own glue ("./mwp_wasm_bg.js" / "wbg"), never "env".
node --input-type=module -e '
  import { readFileSync } from "node:fs";
  const mod = new WebAssembly.Module(readFileSync("js/pkg/mwp_wasm_bg.wasm"));
  const bad = WebAssembly.Module.imports(mod).filter((i) => i.module !== "wbg" && !i.module.includes("mwp_wasm"));
  if (bad.length) { console.error("unexpected wasm imports:", bad); process.exit(1); }
'
# The dashboard (static files for `mwp serve`) carries its own copy of the package.
rm -rf js/dashboard/lib
mkdir -p js/dashboard/lib/src js/dashboard/lib/pkg
cp js/src/*.js js/dashboard/lib/src/
cp js/pkg/mwp_wasm.js js/pkg/mwp_wasm_bg.wasm js/dashboard/lib/pkg/

size=$(stat -c %s js/pkg/mwp_wasm_bg.wasm)
echo "js/pkg/mwp_wasm_bg.wasm: $size bytes ($(( size / 1024 )) KiB)"
