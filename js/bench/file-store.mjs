// The Node/Deno file store: write N events in batches, then reopen and replay them.
// Prints the write rate (one datasync per batch), the replay rate of a cold open, and the
// data directory (check it natively: `mwp fsck --data DIR`). Peak memory: run it under
// `/usr/bin/time -v` — replay streams the log, so memory stays flat as N grows.
// Usage: node js/bench/file-store.mjs [EVENTS=100000] [BATCH=1000] [DIR]
//        node js/bench/file-store.mjs replay DIR      (only the cold open and replay of DIR)
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as mwp from "../src/node.js";

const rate = (events, ms) => Math.round((events / ms) * 1000);
if (process.argv[2] === "replay") {
  const t0 = performance.now();
  const store = await mwp.openFileStore(process.argv[3]);
  const g = await store.openGroup("g1");
  const ms = performance.now() - t0;
  console.log(JSON.stringify({ events: g.seq, replay_ms: Math.round(ms), replay_events_per_s: rate(g.seq, ms), state_hash: g.stateHash() }));
  await store.close();
  process.exit(0);
}
const n = Number(process.argv[2] ?? 100_000);
const batch = Number(process.argv[3] ?? 1000);
const dir = process.argv[4] ?? join(mkdtempSync(join(tmpdir(), "mwp-bench-")), "data");
const key = (a) => mwp.transcriptSecretKey(a);
const pub = (a) => mwp.publicKeyOf(key(a));
const cmd = (action, body) => mwp.signCommand({ org: "acme", group: "g1", actor: "alice", action, session: 1, body }, key("alice"));
const contract = { max_attempts: 3, backoff_base_ms: 100, backoff_max_ms: 1000, cost_budget: 10, risk: "low" };

let store = await mwp.openFileStore(dir, { authorityKey: key("@authority") });
await store.submit(cmd("open", { type: "open_group", mission: "m", title: "bench", authority_key: pub("@authority"),
  members: [{ actor: "alice", role: "owner", key: pub("alice") }] }), 1000);
let signMs = 0;
let writeMs = 0;
for (let i = 1; i < n; i += batch) {
  let t = performance.now();
  const cmds = [];
  for (let j = i; j < Math.min(n, i + batch); j++) cmds.push(cmd(`c${j}`, { type: "create_work", work: `w${j}`, after: [], spec: { i: j }, contract }));
  signMs += performance.now() - t;
  t = performance.now();
  await store.submit(cmds, 1000);
  writeMs += performance.now() - t;
}
const hash = await store.stateHash("g1");
await store.close();

const t0 = performance.now();
store = await mwp.openFileStore(dir);
const g = await store.openGroup("g1");
const replayMs = performance.now() - t0;
const same = g.stateHash() === hash;
await store.close();
console.log(JSON.stringify({ events: n, batch, write_ms: Math.round(writeMs), write_events_per_s: rate(n - 1, writeMs),
  sign_ms: Math.round(signMs), replay_ms: Math.round(replayMs), replay_events_per_s: rate(n, replayMs), same_state_hash: same, dir }));
