// The package's own guards: `mwp/slim` instantiates nothing until `init`, and `npm pack`
// refuses to pack without the built WebAssembly module.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const js = fileURLToPath(new URL("..", import.meta.url));

test("mwp/slim instantiates nothing on import and works after an explicit init", () => {
  // A fresh process: this one has instantiated the module through the Node entry already.
  const script = `
    import { readFileSync } from "node:fs";
    import * as mwp from "mwp/slim";
    let before;
    try { mwp.publicKeyOf(mwp.transcriptSecretKey("alice")); before = "ran"; } catch (e) { before = "refused"; }
    const first = await mwp.init(readFileSync(new URL(import.meta.resolve("mwp/package.json").replace("package.json", "pkg/mwp_wasm_bg.wasm"))));
    const second = await mwp.init();
    const key = mwp.publicKeyOf(mwp.transcriptSecretKey("alice"));
    console.log(JSON.stringify({ before, same: first === second, key: /^[0-9a-f]{64}$/.test(key), runtime: mwp.runtime, runAgent: typeof mwp.runAgent }));
  `;
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { cwd: js, encoding: "utf8" }).trim();
  assert.deepEqual(JSON.parse(out), { before: "refused", same: true, key: true, runtime: "slim", runAgent: "function" });
});

test("npm pack without the built module refuses, naming scripts/build-wasm.sh", (t) => {
  const copy = mkdtempSync(join(tmpdir(), "mwp-prepack-"));
  t.after(() => rmSync(copy, { recursive: true, force: true }));
  for (const f of ["package.json", "index.d.ts", "slim.d.ts", "README.md", "src", "packaging"]) cpSync(join(js, f), join(copy, f), { recursive: true });
  const r = spawnSync("npm", ["pack", "--pack-destination", copy], { cwd: copy, encoding: "utf8" });
  assert.notEqual(r.status, 0, "npm pack must fail");
  assert.match(r.stderr, /pkg\/mwp_wasm\.js and pkg\/mwp_wasm_bg\.wasm are missing.*scripts\/build-wasm\.sh/);
  assert.deepEqual(execFileSync("ls", [copy], { encoding: "utf8" }).split("\n").filter((f) => f.endsWith(".tgz")), [], "no tarball");
});
