// `npm pack` / `npm publish` run this first (the `prepack` script): the package is nothing
// without its WebAssembly module, which is built, not committed. Refuses, naming the build
// command, when pkg/ lacks the module or its glue, so a tarball is never packed without them.
import { existsSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";

const pkg = new URL("../pkg/", import.meta.url);
const missing = ["mwp_wasm.js", "mwp_wasm_bg.wasm"].filter((f) => {
  const path = fileURLToPath(new URL(f, pkg));
  return !existsSync(path) || statSync(path).size === 0;
});
if (missing.length > 0) {
  console.error(
    `mwp: cannot pack: ${missing.map((f) => `pkg/${f}`).join(" and ")} ${missing.length > 1 ? "are" : "is"} missing. ` +
      "Build the WebAssembly module first: scripts/build-wasm.sh (from the repository root).",
  );
  process.exit(1);
}
