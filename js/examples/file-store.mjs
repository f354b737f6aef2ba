// The Node/Deno file store: a durable authority in a data directory that the native `mwp`
// tools read and write too (`mwp fsck --data DIR`, `mwp replay --data DIR --group g1`).
// Run: node js/examples/file-store.mjs [DIR]
import { openFileStore, signCommand, publicKeyOf, generateSecretKey, StoreError } from "mwp";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = process.argv[2] ?? join(mkdtempSync(join(tmpdir(), "mwp-example-")), "data");
const store = await openFileStore(dir);              // creates DIR, groups/ and authority.key (0600)

const alice = generateSecretKey();
const base = { org: "acme", group: "g1", session: 1, actor: "alice" };
/** @type {import("mwp").Contract} */
const contract = { max_attempts: 3, backoff_base_ms: 1000, backoff_max_ms: 60000, cost_budget: 100, risk: "low" };
const open = signCommand({ ...base, action: "open", body: { type: "open_group", mission: "m1", title: "Ship it",
  authority_key: store.authorityKey,                 // this store signs the group's ticks and snapshots
  members: [{ actor: "alice", role: "owner", key: publicKeyOf(alice) }] } }, alice);
const creates = ["w1", "w2", "w3"].map((work) => signCommand({ ...base, action: `create-${work}`,
  body: { type: "create_work", work, after: [], spec: { task: work }, contract } }, alice));

await store.submit(open);                            // resolves after fdatasync
const results = await store.submit(creates);         // three events, one write, one sync
console.log(results.map((r) => (r.outcome === "rejected" ? r.error.code : `${r.outcome} seq ${r.receipt.seq}`)).join(", "));
const hash = await store.stateHash("g1");
await store.close();

const again = await openFileStore(dir);              // replays the log, segment by segment
const [dup] = await again.submit(creates[0]);        // the original receipt, after a restart too
console.log(dup.outcome, dup.outcome === "rejected" ? dup.error.code : dup.receipt.seq, "same state:", (await again.stateHash("g1")) === hash);
try {
  await again.openGroup("g2") ?? console.log("no group g2");
} catch (e) {
  if (e instanceof StoreError) console.log(e.code, e.details.file, e.details.offset);  // LOG_CORRUPT: file and offset
}
await again.close();
console.log(`data directory: ${dir}`);
