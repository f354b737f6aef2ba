// What the module costs a page that hands it objects or reads them back: `encodeEvent` of
// events in their JSON form (what a client does with the events a server sends as JSON),
// `decodeEvent` of their stored bytes and `state()` of the group they build (what a page
// shows), and `Replica.fromStateCbor` of that state, on the log of `js/bench/replay.mjs`.
// Medians of nine runs after two warm-ups; the last line is JSON.
// Run: node js/bench/objects.mjs [items=2500]
import * as mwp from "../src/node.js";
import { benchLog } from "../pkg/mwp_wasm.js";

const items = Number(process.argv[2] ?? 2500);
const log = benchLog(items);
const objects = mwp.splitBatch(log).map((bytes) => mwp.decodeEvent(bytes));
const replica = new mwp.Replica(objects[0].group);
replica.offerBatch(log);
const state = replica.stateCbor();
const median = (run) => {
  const times = [];
  for (let i = 0; i < 11; i++) {
    const t0 = performance.now();
    run();
    if (i >= 2) times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return Math.round(times[Math.floor(times.length / 2)] * 10) / 10;
};
const encodeMs = median(() => {
  for (const event of objects) mwp.encodeEvent(event);
});
const frames = mwp.splitBatch(log);
const decodeMs = median(() => {
  for (const bytes of frames) mwp.decodeEvent(bytes);
});
const stateMs = median(() => replica.state());
const fromStateMs = median(() => mwp.Replica.fromStateCbor(state));
console.log(JSON.stringify({
  bench: "objects",
  events: objects.length,
  state_bytes: state.length,
  encode_event_objects_ms: encodeMs,
  decode_event_objects_ms: decodeMs,
  state_object_ms: stateMs,
  from_state_cbor_ms: fromStateMs,
  node: process.version,
}));
