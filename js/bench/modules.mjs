// Two builds of the WebAssembly module side by side in Node, each a `wasm-bindgen --target web`
// folder (mwp_wasm.js + mwp_wasm_bg.wasm): bytes, `WebAssembly.compile` of the bytes, and
// `Replica.offerBatch` of the same bench log, alternated in one process after both are loaded
// (medians; the first load in a process pays a one-time cost, so it is not what is timed).
// Run: node js/bench/modules.mjs DIR_A DIR_B [items=2500]
// e.g. the dashboard's module against the full one:
//   node js/bench/modules.mjs js/pkg host-native/dashboard/pkg
// The log comes from `benchLog` of the first build that has it (the full module does).
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [a, b] = process.argv.slice(2, 4);
if (!a || !b) {
  console.error("usage: node js/bench/modules.mjs DIR_A DIR_B [items]");
  process.exit(2);
}
const items = Number(process.argv[4] ?? 2500);
const builds = [];
for (const dir of [a, b]) {
  const glue = await import(pathToFileURL(resolve(dir, "mwp_wasm.js")).href);
  const bytes = readFileSync(resolve(dir, "mwp_wasm_bg.wasm"));
  await glue.default({ module_or_path: bytes });
  builds.push({ dir, glue, bytes, compiles: [], runs: [] });
}
const maker = builds.find((m) => typeof m.glue.benchLog === "function");
if (!maker) throw new Error("neither build has benchLog: give the full module as one of them");
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
