// Replay rate of the wasm build in Node, on the same log as the native criterion bench
// (`cargo bench -p mwp-wasm --bench replay`; same bytes: compare the sha256 printed by both).
// Run: node js/bench/replay.mjs [items=2500]
import * as mwp from "../src/node.js";
import { benchLog } from "../pkg/mwp_wasm.js";

const items = Number(process.argv[2] ?? 2500);
const log = benchLog(items);
const events = mwp.splitBatch(log).length;
console.log(`bench log: ${events} events, ${log.length} bytes, sha256 ${mwp.sha256(log)}`);
const runs = [];
for (let i = 0; i < 12; i++) {
  const t0 = performance.now();
  const { seq } = mwp.replayLog(log);
  const ms = performance.now() - t0;
  if (seq !== events) throw new Error(`replayed to ${seq}, expected ${events}`);
  if (i >= 2) runs.push(ms); // two warm-up runs
}
runs.sort((a, b) => a - b);
const median = runs[Math.floor(runs.length / 2)];
console.log(`wasm in Node ${process.version}: replay ${events} events in ${median.toFixed(1)} ms (median of ${runs.length}) = ${Math.round(events / (median / 1000))} events/s`);
