// End to end: the example planner (js/examples/planner.mjs, on runAgent) grows its mission's
// graph against a real `mwp serve`, crashing once between an outcome and its disposition, in
// Node and in Deno 2, each with its own journal file.
// Usage: node js/test/e2e/planner.js   (MWP_BIN: the mwp binary; MWP_TOOLS_DIR: where deno is)
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { serveNative } from "../serve-native.js";

const run = promisify(execFile);
const js = fileURLToPath(new URL("../..", import.meta.url));
const tools = process.env.MWP_TOOLS_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "mwp-wasm-tools");
const deno = process.env.DENO ?? join(tools, "node_modules/.bin/deno");
let passed = 0;
let failed = 0;
const check = (name, ok, detail = "") => {
  console.log(`${ok ? "ok" : "FAIL"} - planner e2e: ${name}${ok ? "" : `: ${detail}`}`);
  ok ? passed++ : failed++;
};
const work = mkdtempSync(join(tmpdir(), "mwp-planner-e2e-"));
let server;
try {
  server = await serveNative([]);
  const example = join(js, "examples", "planner.mjs");
  const all = /^planner: 6 passed, 0 failed$/m;
  const node = await run(process.execPath, [example, server.url], { cwd: join(js, "examples") }).catch((e) => e);
  check("Node: the planner's graph grows once, through a crash", all.test(node.stdout), node.stdout + node.stderr);
  const map = join(work, "import-map.json");
  writeFileSync(map, JSON.stringify({ imports: { mwp: pathToFileURL(join(js, "src", "deno.js")).href } }));
  const d = await run(deno, ["run", "--quiet", "--no-check", "--no-lock", "--import-map", map, "--allow-net", "--allow-read", "--allow-write", "--allow-env",
    example, server.url], { cwd: join(js, "examples") }).catch((e) => e);
  check("Deno: the planner's graph grows once, through a crash", all.test(d.stdout), d.stdout + d.stderr);
} catch (e) {
  check("no exception", false, `${e.stack}`);
} finally {
  server?.stop();
  rmSync(work, { recursive: true, force: true });
}
console.log(`planner e2e: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
