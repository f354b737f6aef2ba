#!/usr/bin/env bash
# The one generated part of the dashboard that `mwp serve` embeds: the optimised wasm module
# and its glue in host-native/dashboard/pkg/ (committed, so that a machine without wasm tools
# gets the real dashboard). host-native/build.rs embeds it together with the page
# (js/dashboard/) and the npm package's browser modules (js/src/), read where they are.
#
# The module is mwp-wasm's `dashboard` build (--no-default-features --features dashboard: the
# replica-only viewer and IdbReplica, what the page uses), not the npm package's full one
# (docs/decisions.md, "The dashboard's module"). It builds in its own target folder
# ($CARGO_TARGET_DIR/dashboard, or target/dashboard), so that the full module
# scripts/build-wasm.sh builds stays as it is.
#
#   scripts/build-dashboard.sh          rebuilds host-native/dashboard/pkg/: the wasm module
#                                       (wasm-release, wasm-bindgen --target web, wasm-opt -Oz)
#                                       and its glue; commit it afterwards. Also builds js/pkg
#                                       and js/dashboard/lib (scripts/build-wasm.sh, without
#                                       wasm-opt) for `mwp serve --dashboard js/dashboard`.
#   scripts/build-dashboard.sh --check  builds the same two files afresh from the current
#                                       sources into a temp folder, and fails if the committed
#                                       ones differ (scripts/test-wasm.sh runs it).
# The build mode also puts the module into js/dashboard/lib/pkg/ (gitignored;
# scripts/build-wasm.sh puts the full one there), as scripts/test-e2e.sh does before the
# browser steps, so that the page served from js/dashboard runs the module that ships.
#
# The .wasm is compared byte for byte: the build is reproducible on a given toolchain and
# Cargo.lock (see docs/js.md, "The embedded dashboard"); the registry's sources are named
# /cargo/... in it, whatever $CARGO_HOME is. MWP_DASHBOARD_WASM=exports compares only the
# module's export names instead (for a toolchain whose bytes differ).
# MWP_DASHBOARD_TARGET_DIR sets the target folder.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target_dir=${MWP_DASHBOARD_TARGET_DIR:-${CARGO_TARGET_DIR:-$root/target}/dashboard}
bundle=host-native/dashboard/pkg
raw="$target_dir/wasm32-unknown-unknown/wasm-release/mwp_wasm.wasm"
mode=${1:-build}

# The dashboard build of the module (cargo's profile wasm-release). Panic messages name source
# files: the registry's are written /cargo/... (the rustflags are added to .cargo/config.toml's),
# so that the bytes do not depend on where $CARGO_HOME is.
build_module() {
  local cargo_home=${CARGO_HOME:-$HOME/.cargo}
  CARGO_TARGET_DIR=$target_dir cargo build -p mwp-wasm --target wasm32-unknown-unknown \
    --profile wasm-release --no-default-features --features dashboard \
    --config "target.wasm32-unknown-unknown.rustflags=[\"--remap-path-prefix=$cargo_home=/cargo\"]"
}

# assemble DIR: the module and its glue into DIR (which must not exist) from the raw wasm.
assemble() {
  local out=$1 pkg
  pkg=$(mktemp -d)
  wasm-bindgen --target web --out-dir "$pkg" "$raw"
  node scripts/guard-glue.mjs "$pkg/mwp_wasm.js"
  mkdir -p "$out"
  scripts/wasm-opt.sh "$pkg/mwp_wasm_bg.wasm" "$out/mwp_wasm_bg.wasm"
  cp "$pkg/mwp_wasm.js" "$out/"
  rm -rf "$pkg"
  # Like the full module, it may import only from its own glue, never "env".
  node --input-type=module -e '
    import { readFileSync } from "node:fs";
    const mod = new WebAssembly.Module(readFileSync(process.argv[1]));
    const bad = WebAssembly.Module.imports(mod).filter((i) => i.module !== "wbg" && !i.module.includes("mwp_wasm"));
    if (bad.length) { console.error("unexpected wasm imports:", bad); process.exit(1); }
  ' "$out/mwp_wasm_bg.wasm"
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
    # js/pkg and js/dashboard/lib for development (with the import check), then the module.
    MWP_WASM_OPT=0 scripts/build-wasm.sh
    build_module
    # Assembled aside, so that a failing step leaves the committed bundle as it was.
    next=$(mktemp -d)
    trap 'rm -rf "$next"' EXIT
    assemble "$next/b"
    rm -rf "$bundle"
    mv "$next/b" "$bundle"
    mkdir -p js/dashboard/lib/pkg
    cp "$bundle"/* js/dashboard/lib/pkg/
    size=$(stat -c %s "$bundle/mwp_wasm_bg.wasm")
    echo "$bundle: $(find "$bundle" -type f | wc -l) files; mwp_wasm_bg.wasm $size bytes ($(( size / 1024 )) KiB)"
    echo "commit $bundle/ and rebuild mwp (cargo build -p mwp-host) to embed it"
    ;;
  --check)
    build_module
    fresh=$(mktemp -d)
    trap 'rm -rf "$fresh"' EXIT
    assemble "$fresh/b"
    stale=0
    if ! diff -r -q -x '*.wasm' "$fresh/b" "$bundle"; then
      stale=1
    fi
    committed="$bundle/mwp_wasm_bg.wasm"
    if [ ! -f "$committed" ]; then
      echo "missing: $committed"
      stale=1
    elif [ "${MWP_DASHBOARD_WASM:-bytes}" = exports ]; then
      # Read first: a failure to read either fails here instead of comparing two empty lists.
      fresh_exports=$(exports_of "$fresh/b/mwp_wasm_bg.wasm")
      committed_exports=$(exports_of "$committed")
      if [ "$fresh_exports" != "$committed_exports" ]; then
        diff <(echo "$fresh_exports") <(echo "$committed_exports") || true
        echo "the committed wasm's exports differ from a fresh build's"
        stale=1
      fi
    elif ! cmp -s "$fresh/b/mwp_wasm_bg.wasm" "$committed"; then
      echo "the committed wasm differs from a fresh build of the current sources"
      stale=1
    fi
    if [ "$stale" != 0 ]; then
      echo "host-native/dashboard/pkg/ is stale: run scripts/build-dashboard.sh and commit it" >&2
      exit 1
    fi
    echo "host-native/dashboard/pkg/ matches the sources ($(find "$bundle" -type f | wc -l) files)"
    ;;
  *)
    echo "usage: scripts/build-dashboard.sh [--check]" >&2
    exit 2
    ;;
esac
