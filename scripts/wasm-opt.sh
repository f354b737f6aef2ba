#!/usr/bin/env bash
# The one wasm-opt step of every shipped module (scripts/build-wasm.sh for the npm package,
# scripts/build-dashboard.sh for the dashboard embedded in mwp, scripts/build-wasm-viewer.sh
# for the viewer): binaryen 132 from the tools folder (installed there when missing), -Oz,
# and the features the module may use.
# Usage: scripts/wasm-opt.sh IN.wasm OUT.wasm   (IN and OUT may be the same file)
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 IN.wasm OUT.wasm" >&2; exit 2; }
tools=${MWP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mwp-wasm-tools}
if [ ! -x "$tools/node_modules/.bin/wasm-opt" ]; then
  mkdir -p "$tools"
  (cd "$tools" && npm install --silent --no-audit --no-fund binaryen@132 >/dev/null)
fi
"$tools/node_modules/.bin/wasm-opt" -Oz \
  --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
  --enable-mutable-globals --enable-reference-types --enable-multivalue --enable-simd \
  "$1" -o "$2.opt"
mv "$2.opt" "$2"
