// Verified replay from a static export (SPEC §8b) in Node: `Replica.fromStatic` over a folder
// (read with node:fs through the `fetch` option) or a URL (global fetch), verified through the
// export's signed head under the key given. Prints events/s, wall time, CPU time and peak RSS
// (`process.resourceUsage().maxRSS`) as one JSON line.
// Usage: node js/bench/static-replay.mjs DIR_OR_URL --authority HEX --group G [--start genesis]
//        node js/bench/static-replay.mjs make DIR [EVENTS=100000] [CHUNK_EVENTS=4096]
//          writes an export of EVENTS events (open_group, then create_work commands, a signed
//          snapshot halfway) planned by the core (`planExport`), and prints its key and group.
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import * as mwp from "../src/node.js";

const args = process.argv.slice(2);

if (args[0] === "make") {
  const [dir, events = "100000", chunkEvents = "4096"] = args.slice(1);
  const n = Number(events);
  const key = (a) => mwp.transcriptSecretKey(a);
  const pub = (a) => mwp.publicKeyOf(key(a));
  const cmd = (action, body) => mwp.signCommand({ org: "acme", group: "g1", actor: "alice", action, session: 1, body }, key("alice"));
  const contract = { max_attempts: 3, backoff_base_ms: 100, backoff_max_ms: 1000, cost_budget: 10, risk: "low" };
  const authority = new mwp.Authority({ secretKey: key("@authority"), snapshotEvery: 1e12 });
  const at = 1_700_000_000_000;
  authority.submit(cmd("open", { type: "open_group", mission: "m1", title: "bench", authority_key: pub("@authority"), members: [{ actor: "alice", role: "owner", key: pub("alice") }] }), at);
  let snapshot;
  for (let i = 1; i < n; i += 1000) {
    const batch = [];
    for (let k = i; k < Math.min(n, i + 1000); k++) batch.push(cmd(`c${k}`, { type: "create_work", work: `w${k}`, contract, after: [], spec: {} }));
    authority.submitBatch(batch, at + i);
    if (!snapshot && authority.seq >= n / 2) snapshot = authority.snapshot();
  }
  const head = mwp.signHead("acme", "g1", authority.seq, authority.head, at + n, key("@authority"));
  const x = mwp.planExport(authority.eventFrames(0), { head, authorityKey: pub("@authority"), snapshot, chunkEvents: Number(chunkEvents) });
  for (const f of x.files) {
    await mkdir(join(dir, dirname(f.path)), { recursive: true });
    await writeFile(join(dir, f.path), f.bytes);
  }
  await writeFile(join(dir, "head.json"), x.headFile);
  const bytes = x.files.reduce((s, f) => s + f.bytes.length, 0);
  console.log(JSON.stringify({ dir, events: authority.seq, chunks: x.index.chunks.length, bytes, authority: pub("@authority"), group: "g1" }));
  process.exit(0);
}

const option = (name) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const target = args[0];
const authorityKey = option("authority");
const group = option("group");
const start = option("start") ?? "snapshot";
if (!target || !authorityKey || !group) {
  console.error("usage: node js/bench/static-replay.mjs DIR_OR_URL --authority HEX --group G [--start genesis]");
  process.exit(2);
}
const isUrl = /^https?:\/\//.test(target);
const base = isUrl ? target : pathToFileURL(target.endsWith("/") ? target : `${target}/`);
// A folder is read with node:fs: the same loop, no HTTP in the way.
const fetchFile = isUrl ? globalThis.fetch : async (url) => {
  try {
    return new Response(await readFile(fileURLToPath(url)));
  } catch {
    return new Response(null, { status: 404 });
  }
};
const cpu0 = process.cpuUsage();
const t0 = performance.now();
let files = 0;
let last;
const replica = await mwp.Replica.fromStatic(base, { authorityKey, group, start, fetch: fetchFile, onProgress: (p) => { files += 1; last = p; } });
const ms = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
console.log(JSON.stringify({
  source: String(target), start, files, events_offered: last.events, bytes: last.bytes,
  cursor: replica.cursor, verified_through: replica.verifiedThrough,
  wall_ms: Math.round(ms), events_per_s: Math.round((last.events / ms) * 1000),
  cpu_ms: Math.round((cpu.user + cpu.system) / 1000), peak_rss_mb: Math.round(process.resourceUsage().maxRSS / 1024),
  state_hash: replica.stateHash(), node: process.version,
}));
