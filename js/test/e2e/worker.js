// End to end: the example worker (js/examples/worker.mjs, on runAgent) works its mission
// against a real `mwp serve`, once in Node and once in Deno 2, each with its journal file.
// Usage: node js/test/e2e/worker.js   (MWP_BIN: the mwp binary; MWP_TOOLS_DIR: where deno is)
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync, statSync } from "node:fs";
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
  console.log(`${ok ? "ok" : "FAIL"} - worker: ${name}${ok ? "" : `: ${detail}`}`);
  ok ? passed++ : failed++;
};

const work = mkdtempSync(join(tmpdir(), "mwp-worker-"));
let server;
try {
  server = await serveNative([]);
  const example = join(js, "examples", "worker.mjs");
  const done = /^worker: worker-[0-9a-f]{8} 3 of 3 succeeded, notifications build,fetch,ship$/m;

  const node = await run(process.execPath, [example, server.url, join(work, "node.journal")], { cwd: join(js, "examples") });
  check("Node: runAgent works the mission to the end, one notification per item", done.test(node.stdout), node.stdout + node.stderr);
  check("Node: the worker's journal is a file", statSync(join(work, "node.journal")).size > 0);

  // Deno resolves "mwp" through an import map to the package's Deno entry.
  const map = join(work, "import-map.json");
  writeFileSync(map, JSON.stringify({ imports: { mwp: pathToFileURL(join(js, "src", "deno.js")).href } }));
  const d = await run(deno, ["run", "--quiet", "--no-check", "--no-lock", "--import-map", map, "--allow-net", "--allow-read", "--allow-write", "--allow-env",
    example, server.url, join(work, "deno.journal")], { cwd: join(js, "examples") });
  check("Deno: runAgent works the mission to the end, one notification per item", done.test(d.stdout), d.stdout + d.stderr);
  check("Deno: the worker's journal is a file", statSync(join(work, "deno.journal")).size > 0);
} catch (e) {
  check("no exception", false, `${e.stack}\n${e.stdout ?? ""}${e.stderr ?? ""}`);
} finally {
  server?.stop();
  rmSync(work, { recursive: true, force: true });
}
console.log(`worker: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
