// Builds of the WebAssembly module side by side in Node, each a `wasm-bindgen --target web`
// folder (mwp_wasm.js + mwp_wasm_bg.wasm): bytes, `WebAssembly.compile` of the bytes, and
// `Replica.offerBatch` of the same bench log, alternated in one process after all are loaded
// (medians; the first load in a process pays a one-time cost, so it is not what is timed).
// Run: node js/bench/modules.mjs DIR... [--items N] [--log-from DIR]
// e.g. the dashboard's module against the full one:
//   node js/bench/modules.mjs js/pkg host-native/dashboard/pkg
// or two viewer builds, the log made by the full module, which is not timed:
//   node js/bench/modules.mjs /tmp/before /tmp/after --log-from js/pkg
// The log comes from `benchLog` of the `--log-from` build, else of the first build that has
// it (the full module does).
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const option = (name) => {
  const at = args.indexOf(name);
  return at < 0 ? undefined : args.splice(at, 2)[1];
};
const items = Number(option("--items") ?? 2500);
const logFrom = option("--log-from");
if (args.length < 1 || args.some((a) => a.startsWith("--"))) {
  console.error("usage: node js/bench/modules.mjs DIR... [--items N] [--log-from DIR]");
  process.exit(2);
}
const load = async (dir) => {
  const glue = await import(pathToFileURL(resolve(dir, "mwp_wasm.js")).href);
  const bytes = readFileSync(resolve(dir, "mwp_wasm_bg.wasm"));
  await glue.default({ module_or_path: bytes });
  return { dir, glue, bytes, compiles: [], runs: [] };
};
const builds = [];
for (const dir of args) builds.push(await load(dir));
const maker = logFrom ? await load(logFrom) : builds.find((m) => typeof m.glue.benchLog === "function");
if (!maker || typeof maker.glue.benchLog !== "function") {
  throw new Error("no build has benchLog: give the full module as one of them, or as --log-from");
}
const log = maker.glue.benchLog(items);
const rounds = 7;
for (let r = 0; r < rounds; r++) {
  for (const m of r % 2 ? [...builds].reverse() : builds) {
    const c0 = performance.now();
    await WebAssembly.compile(m.bytes);
    m.compiles.push(performance.now() - c0);
    const replica = new m.glue.Replica("bench");
    const t0 = performance.now();
    const out = replica.offerBatch(log);
    const ms = performance.now() - t0;
    replica.free();
    if (out.rejected !== 0 || out.applied === 0) throw new Error(`${m.dir}: ${JSON.stringify(out)}`);
    if (r > 0) m.runs.push(ms); // the first round warms up
  }
}
const median = (v) => [...v].sort((x, y) => x - y)[Math.floor(v.length / 2)];
for (const m of builds) {
  console.log(JSON.stringify({
    bench: "modules",
    dir: m.dir,
    module_bytes: m.bytes.length,
    compile_ms: Number(median(m.compiles).toFixed(1)),
    offer_batch_ms: Number(median(m.runs).toFixed(1)),
    events: Number(maker.glue.splitBatch ? maker.glue.splitBatch(log).length : NaN),
  }));
}
