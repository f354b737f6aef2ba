#!/usr/bin/env bash
# The dashboard that `mwp serve` embeds: host-native/dashboard/ (committed, compiled into the
# binary by host-native/build.rs), so a machine without wasm tools gets the real dashboard.
#
#   scripts/build-dashboard.sh          rebuilds the bundle: the wasm module (wasm-release,
#                                       wasm-bindgen --target web, wasm-opt -Oz), its glue, the
#                                       package's browser modules (js/src) and js/dashboard's
#                                       files; commit host-native/dashboard/ afterwards.
#   scripts/build-dashboard.sh --check  assembles the same bundle into a temp folder from the
#                                       current sources and the wasm already built by
#                                       scripts/build-wasm.sh, and fails if the committed bundle
#                                       differs (scripts/test-wasm.sh runs it).
#
# The .wasm is compared byte for byte: the build is reproducible on a given toolchain and
# Cargo.lock (see docs/js.md, "The embedded dashboard"). MWP_DASHBOARD_WASM=exports compares
# only the module's export names instead (for a toolchain whose bytes differ).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target_dir=${CARGO_TARGET_DIR:-$root/target}
tools=${MWP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mwp-wasm-tools}
bundle=host-native/dashboard
raw="$target_dir/wasm32-unknown-unknown/wasm-release/mwp_wasm.wasm"
mode=${1:-build}

# The browser closure of the npm package: everything in js/src but the Node and Deno entries
# and the Node/Deno file store (with its writer lock).
browser_modules() { ls js/src/*.js | grep -v -e '/node\.js$' -e '/deno\.js$' -e '/file-store\.js$' -e '/dir-lock\.js$'; }

wasm_opt() {
  if [ ! -x "$tools/node_modules/.bin/wasm-opt" ]; then
    mkdir -p "$tools"
    (cd "$tools" && npm install --silent --no-audit --no-fund binaryen@132 >/dev/null)
  fi
  "$tools/node_modules/.bin/wasm-opt" -Oz \
    --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-reference-types --enable-multivalue "$1" -o "$2"
}

# assemble DIR: the whole bundle into DIR (which must not exist) from the raw wasm artifact.
assemble() {
  local out=$1 pkg
  pkg=$(mktemp -d)
  wasm-bindgen --target web --out-dir "$pkg" "$raw"
  mkdir -p "$out/lib/src" "$out/lib/pkg"
  wasm_opt "$pkg/mwp_wasm_bg.wasm" "$out/lib/pkg/mwp_wasm_bg.wasm"
  cp "$pkg/mwp_wasm.js" "$out/lib/pkg/"
  rm -rf "$pkg"
  cp $(browser_modules) "$out/lib/src/"
  local f
  for f in js/dashboard/*; do
    case "$f" in *.html | *.js | *.css | *.svg) cp "$f" "$out/" ;; esac
  done
}

exports_of() {
  node --input-type=module -e '
    import { readFileSync } from "node:fs";
    const m = new WebAssembly.Module(readFileSync(process.argv[1]));
    console.log(WebAssembly.Module.exports(m).map((e) => `${e.kind} ${e.name}`).sort().join("\n"));
  ' "$1"
}

case "$mode" in
  build)
    # cargo build + import check (and js/pkg, js/dashboard/lib for development).
    MWP_WASM_OPT=0 scripts/build-wasm.sh
    rm -rf "$bundle"
    assemble "$bundle"
    size=$(stat -c %s "$bundle/lib/pkg/mwp_wasm_bg.wasm")
    echo "$bundle: $(find "$bundle" -type f | wc -l) files; mwp_wasm_bg.wasm $size bytes ($(( size / 1024 )) KiB)"
    echo "commit $bundle/ and rebuild mwp (cargo build -p mwp-host) to embed it"
    ;;
  --check)
    if [ ! -f "$raw" ]; then
      echo "no wasm build at $raw: run scripts/build-wasm.sh first" >&2
      exit 2
    fi
    fresh=$(mktemp -d)
    trap 'rm -rf "$fresh"' EXIT
    assemble "$fresh/b"
    stale=0
    if ! diff -r -q -x '*.wasm' "$fresh/b" "$bundle"; then
      stale=1
    fi
    committed="$bundle/lib/pkg/mwp_wasm_bg.wasm"
    if [ ! -f "$committed" ]; then
      echo "missing: $committed"
      stale=1
    elif [ "${MWP_DASHBOARD_WASM:-bytes}" = exports ]; then
      if ! diff <(exports_of "$fresh/b/lib/pkg/mwp_wasm_bg.wasm") <(exports_of "$committed"); then
        echo "the committed wasm's exports differ from a fresh build's"
        stale=1
      fi
    elif ! cmp -s "$fresh/b/lib/pkg/mwp_wasm_bg.wasm" "$committed"; then
      echo "the committed wasm differs from a fresh build of the current sources"
      stale=1
    fi
    if [ "$stale" != 0 ]; then
      echo "host-native/dashboard/ is stale: run scripts/build-dashboard.sh and commit it" >&2
      exit 1
    fi
    echo "host-native/dashboard/ matches the sources ($(find "$bundle" -type f | wc -l) files)"
    ;;
  *)
    echo "usage: scripts/build-dashboard.sh [--check]" >&2
    exit 2
    ;;
esac
