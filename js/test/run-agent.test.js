// runAgent against a real `mwp serve`: a small mission worked to the end, and a worker killed
// mid-work that a second one resumes from the journal file, finishing each effect once.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import { join } from "node:path";
import * as mwp from "../src/node.js";
import { makeCommands } from "./helpers.js";
import { serveNative } from "./serve-native.js";

const c = makeCommands(mwp);
const config = { org: "acme", group: "g1", actor: "bob", capacity: 1, syncMs: 50 };

async function start(t) {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "mwp-run-agent-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(join(dir, "data"));
  fs.writeFileSync(join(dir, "data", "authority.key"), `${c.key("@authority")}\n`, { mode: 0o600 });
  const server = await serveNative(["--data", join(dir, "data"), "--allow-test-key"]);
  t.after(() => server.stop());
  return { dir, client: new mwp.Client(server.url) };
}

/** Resolves when every work item of the state is in one of `states`. */
const all = (view, states) => {
  const work = Object.values(view.state?.work ?? {});
  return work.length > 0 && work.every((w) => states.includes(w.state));
};

test("runAgent claims, checkpoints, performs each effect once and submits a whole mission", async (t) => {
  const { dir, client } = await start(t);
  for (const cmd of [c.open(), c.create("fetch"), c.create("build"), c.create("ship", "create-ship", ["fetch", "build"])]) await client.submit(cmd);
  const journal = await mwp.openAgentJournal(join(dir, "bob.journal"));
  t.after(() => journal.close());
  const controller = new AbortController();
  const performed = [];
  const notices = [];
  await mwp.runAgent({
    client,
    key: c.key("bob"),
    config,
    journal,
    signal: controller.signal,
    handlers: {
      async run(ctx) {
        // The first run of each item checkpoints (which yields the lease); the next one finishes.
        if (ctx.saved === null) return ctx.checkpoint({ half: ctx.work });
        assert.deepEqual(ctx.saved, { half: ctx.work });
        const sent = await ctx.effect("notify", ({ key }) => {
          performed.push(ctx.work);
          return { sent: key.slice(0, 8) };
        }, { mode: "keyed", target: { to: "ops" } });
        return { done: ctx.work, sent };
      },
      notice: (n) => notices.push(n.type),
      settled: (view) => {
        if (all(view, ["succeeded"])) controller.abort();
      },
    },
  });
  assert.deepEqual(performed.toSorted(), ["build", "fetch", "ship"], "each effect performed once");
  const events = await client.events("g1");
  const replica = new mwp.Replica("g1");
  replica.offerBatch(events.map((e) => mwp.encodeEvent(e)));
  const work = replica.state().work;
  assert.deepEqual(Object.keys(work).map((w) => [w, work[w].state]).sort(), [["build", "succeeded"], ["fetch", "succeeded"], ["ship", "succeeded"]]);
  const shipped = events.find((e) => e.kind.type === "work_succeeded" && e.kind.work === "ship");
  assert.equal(shipped.kind.result.done, "ship");
  assert.equal(events.filter((e) => e.kind.type === "work_checkpointed").length, 3, "one checkpoint per item");
  assert.equal(notices.filter((n) => n === "run").length, 6, "two runs per item");
});

test("a worker stopped mid-work restarts from its journal and finishes exactly once", async (t) => {
  const { dir, client } = await start(t);
  for (const cmd of [c.open(), c.create("w1")]) await client.submit(cmd);
  const path = join(dir, "bob.journal");
  const counts = {};
  const step = (name) => () => {
    counts[name] = (counts[name] ?? 0) + 1;
    return { step: name };
  };

  // The first worker: step 1 performed and recorded, then it is stopped mid-work.
  let journal = await mwp.openAgentJournal(path);
  const first = new AbortController();
  let reached;
  const midWork = new Promise((resolve) => (reached = resolve));
  const running = mwp.runAgent({
    client, key: c.key("bob"), config, journal, signal: first.signal,
    handlers: {
      async run(ctx) {
        await ctx.effect("step-1", step("step-1"), { mode: "keyed" });
        reached();
        await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
      },
    },
  });
  await midWork;
  first.abort();
  await running;
  await journal.close();

  // The second worker, on the same journal: resumed, step 1 not redone, the work finished.
  journal = await mwp.openAgentJournal(path);
  t.after(() => journal.close());
  const second = new AbortController();
  const runs = [];
  await mwp.runAgent({
    client, key: c.key("bob"), config, journal, signal: second.signal,
    handlers: {
      async run(ctx) {
        runs.push({ resumed: ctx.resumed, saved: ctx.saved });
        const one = await ctx.effect("step-1", step("step-1"), { mode: "keyed" });
        const two = await ctx.effect("step-2", step("step-2"), { mode: "keyed" });
        return { one, two };
      },
      settled: (view) => {
        if (all(view, ["succeeded", "failed"])) second.abort();
      },
    },
  });
  assert.deepEqual(runs, [{ resumed: true, saved: null }], "the same lease, resumed");
  assert.deepEqual(counts, { "step-1": 1, "step-2": 1 }, "each effect performed once across the restart");
  const events = await client.events("g1");
  const replica = new mwp.Replica("g1");
  replica.offerBatch(events.map((e) => mwp.encodeEvent(e)));
  const w1 = replica.state().work.w1;
  assert.equal(w1.state, "succeeded");
  const result = events.find((e) => e.kind.type === "work_succeeded").kind.result;
  assert.deepEqual(result, { one: { step: "step-1" }, two: { step: "step-2" } }, "step 1's outcome read back from the journal");
  assert.equal(events.filter((e) => e.kind.type === "work_claimed").length, 1, "claimed once");
});

test("a run longer than its lease keeps it: the worker renews on the driver's wake times", async (t) => {
  const { dir, client } = await start(t);
  for (const cmd of [c.open(), c.create("w1")]) await client.submit(cmd);
  const journal = await mwp.openAgentJournal(join(dir, "bob.journal"));
  t.after(() => journal.close());
  const stop = new AbortController();
  let firstExpiry;
  let renewed;
  const twice = new Promise((resolve) => (renewed = resolve));
  await mwp.runAgent({
    client, key: c.key("bob"), journal, signal: stop.signal,
    config: { ...config, leaseMs: 3000, renewMarginMs: 2500 },
    handlers: {
      async run(ctx) {
        await twice; // outlives the first lease term: only renewals keep it
        return { renewed: true };
      },
      settled: ({ state }) => {
        const lease = state?.work?.w1?.lease;
        if (lease) {
          firstExpiry ??= lease.expires_at;
          // The first term is over and the lease is still held, with a later expiry.
          if (lease.expires_at > firstExpiry && Date.now() > firstExpiry) renewed();
        }
        if (state?.work?.w1?.state === "succeeded") stop.abort();
      },
    },
  });
  const events = await client.events("g1");
  const kinds = events.map((e) => e.kind.type);
  assert.ok(kinds.includes("lease_renewed"), kinds.join());
  assert.equal(kinds.at(-1), "work_succeeded");
  assert.equal(kinds.filter((k) => k === "work_claimed").length, 1, "the same lease throughout");
});

test("an agent journal file cuts a torn last record and refuses damage before it", async (t) => {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "mwp-agent-journal-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, "a.journal");
  const agent = new mwp.Agent({ ...config, authorityKey: c.pub("@authority") }, c.key("bob"));
  agent.handleConnectivity(true, 1);
  const authority = new mwp.Authority();
  const sets = [];
  for (const [i, cmd] of [c.open(), c.create("w1"), c.create("w2")].entries()) {
    agent.handleEvents([mwp.decodeEvent(authority.submit(cmd, 1 + i).eventCbor)], 2 + i);
    for (let ws = agent.pollWriteSet(); ws; ws = agent.pollWriteSet()) sets.push(ws);
  }
  assert.ok(sets.length >= 2, `${sets.length} write sets`);
  let journal = await mwp.openAgentJournal(path);
  for (const ws of sets) await journal.commit(ws);
  await journal.close();
  const whole = fs.readFileSync(path);
  assert.equal((fs.statSync(path).mode & 0o777).toString(8), "600");

  fs.writeFileSync(path, whole.subarray(0, whole.length - 3));
  journal = await mwp.openAgentJournal(path);
  assert.equal((await journal.load()).serial, sets.at(-1).serial - 1, "the torn write set is not committed");
  await journal.close();
  assert.equal(fs.statSync(path).size < whole.length - 3, true, "and it was cut off");

  // The format is the native journal's (docs/format.md): a 192-byte header, then records.
  assert.equal(whole.subarray(0, 8).toString("latin1"), "MWPAGJ\r\n");
  const damaged = Buffer.from(whole);
  damaged[192 + 24 + 2] ^= 0xff; // a byte of the first record's payload, with records after it
  fs.writeFileSync(path, damaged);
  await assert.rejects(mwp.openAgentJournal(path), (e) => e instanceof mwp.StoreError && e.code === "LOG_CORRUPT" && e.details.offset === 192);

  fs.writeFileSync(path, whole.subarray(0, whole.length - 3));
  journal = await mwp.openAgentJournal(path);
  await journal.commit(sets.at(-1));
  await journal.close();
  assert.deepEqual(fs.readFileSync(path), whole, "the cut write set, appended again, gives the same bytes");
  journal = await mwp.openAgentJournal(path);
  const image = await journal.load();
  assert.equal(image.serial, sets.at(-1).serial, "every write set reads back");
  await journal.close();
});
