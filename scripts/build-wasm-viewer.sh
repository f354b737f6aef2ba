#!/usr/bin/env bash
# Builds the replica-only "viewer" WebAssembly module (mwp-wasm with --no-default-features
# --features viewer: Replica, signed heads, the static export reader, snapshots, codec and
# frame helpers) into js/pkg-viewer/ (gitignored; nothing ships it yet), and prints its sizes:
#   cargo build (profile wasm-release) → wasm-bindgen --target web → wasm-opt -Oz → gzip -9
# It builds in its own target folder ($CARGO_TARGET_DIR/viewer, or target/viewer), so that the
# full module scripts/build-wasm.sh builds stays as it is.
# Usage: scripts/build-wasm-viewer.sh      (MWP_WASM_OPT=0 skips wasm-opt)
#   MWP_VIEWER_SIZE=1 also builds mwp-core, sha2, curve25519-dalek and ed25519-dalek at
#   opt-level "z" (the profile builds them at 3 for replay speed): a smaller module that
#   replays more slowly (docs/wasm.md, "Size and speed").
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target_dir=${MWP_VIEWER_TARGET_DIR:-${CARGO_TARGET_DIR:-$root/target}/viewer}
out=js/pkg-viewer

size_opt=()
if [ "${MWP_VIEWER_SIZE:-0}" != 0 ]; then
  for p in mwp-core sha2 curve25519-dalek ed25519-dalek; do
    size_opt+=(--config "profile.wasm-release.package.$p.opt-level=\"z\"")
  done
fi
CARGO_TARGET_DIR=$target_dir cargo build -p mwp-wasm --target wasm32-unknown-unknown \
  --profile wasm-release --no-default-features --features viewer "${size_opt[@]}"
raw="$target_dir/wasm32-unknown-unknown/wasm-release/mwp_wasm.wasm"
rm -rf "$out"
wasm-bindgen --target web --out-dir "$out" "$raw"
node scripts/guard-glue.mjs "$out/mwp_wasm.js"
bindgen_size=$(stat -c %s "$out/mwp_wasm_bg.wasm")

if [ "${MWP_WASM_OPT:-1}" != 0 ]; then
  scripts/wasm-opt.sh "$out/mwp_wasm_bg.wasm" "$out/mwp_wasm_bg.wasm"
fi

# Like the full module, it may import only from its own glue, never "env".
node --input-type=module -e '
  import { readFileSync } from "node:fs";
  const mod = new WebAssembly.Module(readFileSync(process.argv[1]));
  const bad = WebAssembly.Module.imports(mod).filter((i) => i.module !== "wbg" && !i.module.includes("mwp_wasm"));
  if (bad.length) { console.error("unexpected wasm imports:", bad); process.exit(1); }
' "$out/mwp_wasm_bg.wasm"

kib() { echo "$1 bytes ($(( $1 / 1024 )) KiB)"; }
echo "viewer module sizes$([ "${MWP_VIEWER_SIZE:-0}" != 0 ] && echo " (MWP_VIEWER_SIZE=1)"):"
echo "  raw (cargo, wasm-release):  $(kib "$(stat -c %s "$raw")")"
echo "  after wasm-bindgen:         $(kib "$bindgen_size")"
if [ "${MWP_WASM_OPT:-1}" != 0 ]; then
  echo "  after wasm-opt -Oz:         $(kib "$(stat -c %s "$out/mwp_wasm_bg.wasm")")"
fi
echo "  gzip -9 of $out/mwp_wasm_bg.wasm: $(kib "$(gzip -9 -c "$out/mwp_wasm_bg.wasm" | wc -c)")"
