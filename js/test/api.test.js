// The package's API in Node: decisions, typed errors, replicas, snapshots, codecs.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as mwp from "../src/node.js";
import { makeCommands } from "./helpers.js";

const c = makeCommands(mwp);

function authority() {
  const a = new mwp.Authority();
  for (const cmd of [c.open(), c.create("w1"), c.create("w2", "create-w2", ["w1"])]) a.submit(cmd, 1000);
  return a;
}

test("submit accepts, a retry is a duplicate with the original receipt", () => {
  const a = authority();
  assert.equal(a.seq, 3);
  const first = a.receipt("alice", "create-w1");
  const again = a.submit(c.create("w1"), 9000);
  assert.equal(again.outcome, "duplicate");
  assert.deepEqual(again.receipt, first);
  assert.equal(a.seq, 3);
  assert.deepEqual(a.frontier(1000), ["w1"]);
});

test("a rejection throws an AcceptError carrying the spec's code and details", () => {
  const a = authority();
  assert.throws(() => a.submit(c.claim("w1", "b1"), 2000), (e) => e instanceof mwp.AcceptError && e instanceof mwp.MwpError && e.code === "CAS_REQUIRED");
  assert.throws(
    () => a.submit(c.claim("w1", "b2", 7), 2000),
    (e) => e.code === "REVISION_MISMATCH" && e.details.current === 1 && e.toJSON().code === "REVISION_MISMATCH",
  );
  const d = a.submit(c.claim("w1", "b3", 1), 2000);
  assert.equal(d.outcome, "accepted");
  assert.equal(d.event.kind.type, "work_claimed");
  assert.ok(d.eventCbor instanceof Uint8Array);
});

test("state() converts a state whose maps have integer keys (a finished item's `terminal`)", () => {
  const a = authority();
  const lease = a.submit(c.claim("w1", "b1", 1), 2000).event.kind.lease.id;
  a.submit(c.cmd("bob", "b2", { type: "start_work", work: "w1", lease }), 2100);
  a.submit(c.cmd("bob", "b3", { type: "submit", work: "w1", lease, result: { ok: true } }), 2200);
  const r = new mwp.Replica("g1");
  r.offerBatch(a.eventFrames());
  for (const state of [a.state(), r.state()]) {
    assert.equal(state.work.w1.state, "succeeded");
    assert.deepEqual(Object.values(state.terminal), ["w1"]);
    assert.deepEqual(Object.keys(state.terminal), ["6"]);
  }
});

test("batches return rejections as values and the events as one frame batch", () => {
  const a = new mwp.Authority();
  const { results, events } = a.submitBatch([c.open(), c.create("w1"), c.create("w1", "again")], 1000);
  assert.deepEqual(results.map((r) => r.outcome), ["accepted", "accepted", "rejected"]);
  assert.equal(results[2].error.code, "ALREADY_EXISTS");
  assert.equal(mwp.splitBatch(events).length, 2);
  assert.equal(mwp.Authority.fromLog(events).stateHash(), a.stateHash());
});

test("a replica converges whatever the delivery order and rejects tampering as a value", () => {
  const a = authority();
  const log = mwp.splitBatch(a.eventFrames());
  const r = new mwp.Replica("g1");
  assert.equal(r.offer(log[2]).result, "buffered");
  assert.equal(r.offer(log[0]).result, "applied");
  const summary = r.offerBatch([log[1], log[0], log[2]]);
  assert.equal(summary.cursor, 3);
  assert.equal(r.stateHash(), a.stateHash());
  const bad = { ...mwp.decodeEvent(log[0]), at: 1 };
  const fresh = new mwp.Replica("g1");
  const o = fresh.offer(bad);
  assert.equal(o.result, "rejected");
  assert.equal(o.error.code, "LOG_CORRUPT");
  assert.throws(() => mwp.verifyEvent(bad), (e) => e instanceof mwp.CodecError && e.code === "LOG_CORRUPT");
});

test("a frame batch names the seq of a frame that does not verify, and null for one that does not decode", () => {
  const a = authority();
  const log = mwp.splitBatch(a.eventFrames());
  const tampered = mwp.encodeEvent({ ...mwp.decodeEvent(log[1]), at: 1 });
  const r = new mwp.Replica("g1");
  const summary = r.offerBatch([log[0], tampered, new Uint8Array([0xa1, 0x61]), log[2], log[1]]);
  assert.deepEqual(
    { applied: summary.applied, buffered: summary.buffered, rejected: summary.rejected, cursor: summary.cursor },
    { applied: 3, buffered: 1, rejected: 2, cursor: 3 },
  );
  assert.deepEqual(summary.errors.map((e) => [e.seq, e.error.code]), [[2, "LOG_CORRUPT"], [null, "LOG_CORRUPT"]]);
  assert.equal(r.stateHash(), a.stateHash());
});

test("snapshots verify against the trusted key only and restore a replica", () => {
  const a = authority();
  const snap = a.snapshot(c.key("@authority"));
  const header = mwp.verifySnapshot(snap, { trustedKey: c.pub("@authority"), org: "acme", group: "g1", minSeq: 3 });
  assert.equal(header.seq, 3);
  assert.equal(header.state_hash, a.stateHash());
  assert.throws(() => mwp.verifySnapshot(snap, { trustedKey: c.pub("bob"), org: "acme", group: "g1" }), (e) => e instanceof mwp.SnapshotError && e.code === "SNAPSHOT_INVALID");
  const r = new mwp.Replica("g1");
  r.restore(snap, { trustedKey: c.pub("@authority"), org: "acme" });
  assert.equal(r.cursor, 3);
  assert.equal(r.stateHash(), a.stateHash());
  assert.deepEqual(mwp.buildSnapshot(a.stateCbor(), c.key("@authority")), snap);
});

test("canonical CBOR, command helpers and keys", () => {
  const bytes = mwp.canonical.encode({ b: 1, a: [true, null, "x"] });
  assert.deepEqual(mwp.canonical.decode(bytes), { a: [true, null, "x"], b: 1 });
  assert.throws(() => mwp.canonical.encode({ x: 0.5 }), (e) => e.code === "MALFORMED");
  const cmd = c.create("w1");
  assert.equal(mwp.verifyCommand(cmd, c.pub("alice")), true);
  assert.equal(mwp.verifyCommand({ ...cmd, action: "other" }, c.pub("alice")), false);
  assert.equal(mwp.commandContentHash(cmd), mwp.commandContentHash({ ...cmd, sig: undefined }));
  assert.throws(() => mwp.parseCommand({ ...cmd, extra: 1 }), (e) => e.code === "MALFORMED");
  const k = mwp.generateSecretKey();
  assert.match(k, /^[0-9a-f]{64}$/);
  assert.match(mwp.publicKeyOf(k), /^[0-9a-f]{64}$/);
});

test("the README's examples run", async () => {
  const { execFileSync } = await import("node:child_process");
  const { fileURLToPath } = await import("node:url");
  // Resolve "mwp" to this package, as an installed copy would.
  const dir = fileURLToPath(new URL("../examples/", import.meta.url));
  for (const [file, expect] of [["quickstart.mjs", /same state: true/], ["snapshot.mjs", /true SNAPSHOT_INVALID/], ["file-store.mjs", /duplicate 2 same state: true/], ["agent.mjs", /w1 succeeded same state: true/]]) {
    const out = execFileSync(process.execPath, [file], { cwd: dir, encoding: "utf8" });
    assert.match(out, expect, `${file}:\n${out}`);
  }
});
