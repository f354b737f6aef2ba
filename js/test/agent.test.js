// The agent driver from JavaScript: claims from the frontier, runs, submits, records an
// effect's intent before dispatching it, and restarts from its committed write sets.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as mwp from "../src/node.js";
import { makeCommands } from "./helpers.js";

const c = makeCommands(mwp);

/** An in-memory authority behind the four calls `pump` makes of a `Client`. */
function rig() {
  let clock = 1_000;
  const a = new mwp.Authority();
  for (const cmd of [c.open(), c.create("w1"), c.create("w2", "create-w2", ["w1"])]) a.submit(cmd, clock);
  const calls = [];
  const client = {
    async submit(command) {
      calls.push(command.body.type);
      return { receipt: a.submit(command, clock).receipt };
    },
    async events(_group, { after }) {
      return a.events(after);
    },
    async receipt(_group, actor, action) {
      return a.receipt(actor, action);
    },
    async snapshot() {
      return a.snapshot(mwp.transcriptSecretKey("@authority"));
    },
  };
  const config = { org: "acme", group: "g1", actor: "bob", authorityKey: c.pub("@authority"), leaseMs: 30_000 };
  const log = [];
  const notices = [];
  const dispatched = [];
  const host = {
    client,
    now: () => clock,
    commit: (ws) => log.push(ws.cbor),
    onNotice: (n) => notices.push(n),
    dispatch: (d) => {
      dispatched.push(d);
      return { outcome: { sent: true }, receipt: { id: `mail-${dispatched.length}` } };
    },
  };
  return { a, config, log, notices, dispatched, calls, host, tick: (ms) => (clock += ms) };
}

test("an agent claims from the frontier, runs, submits, and follows the dependency", async () => {
  const r = rig();
  const bob = new mwp.Agent(r.config, c.key("bob"));
  bob.handleConnectivity(true, 1_000);
  await mwp.pump(bob, r.host);
  const run = r.notices.find((n) => n.type === "run");
  assert.equal(run?.work, "w1", "the agent runs the only claimable item");
  assert.deepEqual(r.calls, ["claim_work", "start_work"]);
  assert.equal(r.a.state().work.w1.state, "running");
  assert.equal(Object.keys(bob.leases()).length, 1);

  bob.submit("w1", { ok: true }, 1_100);
  r.tick(100);
  await mwp.pump(bob, r.host);
  assert.equal(r.a.state().work.w1.state, "succeeded");
  assert.equal(r.a.state().work.w2.state, "running", "w2 became claimable and was taken");
  assert.equal(bob.cursor, r.a.seq);
  assert.equal(bob.stateHash(), r.a.stateHash());
  assert.equal(bob.durableCursor, r.a.seq, "every write set was committed");
});

test("an effect is dispatched only after its intent is accepted and committed, once", async () => {
  const r = rig();
  const bob = new mwp.Agent(r.config, c.key("bob"));
  bob.handleConnectivity(true, 1_000);
  await mwp.pump(bob, r.host);
  const key = bob.intendEffect("w1", "email", { mode: "undeclared", target: { to: "ops@example.com" } }, 1_000);
  assert.match(key, /^[0-9a-f]{64}$/);
  assert.equal(bob.pollDispatch(), undefined, "nothing is dispatched before the intent lands");
  await mwp.pump(bob, r.host);
  assert.equal(r.dispatched.length, 1);
  assert.equal(r.dispatched[0].key, key);
  assert.equal(r.dispatched[0].mode, "undeclared");
  assert.ok(r.calls.indexOf("intend_effect") >= 0);
  const effect = r.a.state().work.w1.effects[key];
  assert.equal(effect.status, "settled", "the observed outcome was recorded with the authority");
  bob.submit("w1", { ok: true }, 1_000);
  await mwp.pump(bob, r.host);
  assert.equal(r.dispatched.length, 1, "never dispatched again");
  assert.equal(r.a.state().work.w1.state, "succeeded");
});

test("a restart from the committed write sets resumes the held lease", async () => {
  const r = rig();
  let bob = new mwp.Agent(r.config, c.key("bob"));
  bob.handleConnectivity(true, 1_000);
  await mwp.pump(bob, r.host);
  const before = { cursor: bob.cursor, leases: bob.leases(), hash: bob.stateHash() };
  bob.free(); // the process dies

  const image = new mwp.AgentImage();
  for (const ws of r.log) image.commit(ws);
  assert.equal(image.serial, r.log.length);
  const copy = new mwp.AgentImage(image.toCbor());
  assert.equal(copy.serial, image.serial);
  assert.equal(copy.cursor, before.cursor);

  r.notices.length = 0;
  bob = mwp.Agent.restore(r.config, c.key("bob"), copy);
  assert.equal(bob.cursor, before.cursor);
  assert.equal(bob.stateHash(), before.hash);
  bob.handleConnectivity(true, 2_000);
  assert.deepEqual(bob.leases(), before.leases, "the lease is held again");
  r.tick(1_000);
  await mwp.pump(bob, r.host);
  const run = r.notices.find((n) => n.type === "run");
  assert.equal(run?.work, "w1");
  assert.equal(run.resumed, true, "the work was started by the earlier run");
  bob.submit("w1", { ok: true }, 2_000);
  await mwp.pump(bob, r.host);
  assert.equal(r.a.state().work.w1.state, "succeeded");
  assert.equal(bob.stateHash(), r.a.stateHash());
});

test("a write set out of order, bad input and refused actions throw AgentError and change nothing", async () => {
  const r = rig();
  const bob = new mwp.Agent(r.config, c.key("bob"));
  bob.handleConnectivity(true, 1_000);
  await mwp.pump(bob, r.host);
  const image = new mwp.AgentImage();
  assert.throws(() => image.commit(r.log[1]), (e) => e instanceof mwp.AgentError && e.code === "STORAGE");
  assert.equal(image.serial, 0);
  assert.throws(() => image.commit(new Uint8Array([1, 2, 3])), (e) => e instanceof mwp.AgentError && e.code === "LOG_CORRUPT");

  const cursor = bob.cursor;
  assert.throws(() => bob.handleEvents(new Uint8Array([9, 0, 0, 0, 1]), 1_000), (e) => e instanceof mwp.AgentError && e.code === "MALFORMED");
  assert.equal(bob.cursor, cursor);
  assert.throws(() => bob.submit("w2", {}, 1_000), (e) => e instanceof mwp.AgentError && e.code === "FENCED");
  assert.throws(() => bob.submit("no such id!", {}, 1_000), (e) => e instanceof mwp.AgentError && e.code === "MALFORMED");
  assert.throws(() => new mwp.Agent({ ...r.config, extra: 1 }, c.key("bob")), (e) => e instanceof mwp.AgentError && /extra/.test(e.message));
  assert.throws(() => new mwp.Agent(r.config, "00"), (e) => e instanceof mwp.AgentError && e.code === "MALFORMED");
  assert.throws(() => bob.intendEffect("w1", "x", { mode: "sometimes" }, 1_000), (e) => e.code === "MALFORMED" && /mode/.test(e.message));
});
