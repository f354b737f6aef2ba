// The live tail's reconnects: a stand-in server that drops streams, and a real `mwp serve`
// restarted on the same data directory. No test waits on a clock: the backoff is counted.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import { join } from "node:path";
import * as mwp from "../src/node.js";
import { makeCommands } from "./helpers.js";
import { startMockServer } from "./mock-server.js";
import { serveNative } from "./serve-native.js";

const c = makeCommands(mwp);
const authorityKey = c.key("@authority");

/** Reads `client.tail(...)` until `until(seqs)` holds; resolves to the seqs read. */
async function collect(client, options, until) {
  const controller = new AbortController();
  const seqs = [];
  try {
    for await (const e of client.tail("g1", { ...options, signal: controller.signal })) {
      seqs.push(e.seq);
      if (until(seqs)) controller.abort();
    }
  } catch (e) {
    if (e?.name !== "AbortError") throw e;
  }
  return seqs;
}

test("a dropped tail reconnects with Last-Event-ID after a doubling, capped backoff", async (t) => {
  const server = await startMockServer(mwp, { authorityKey });
  t.after(() => server.close());
  const client = new mwp.Client(server.url);
  for (const cmd of [c.open(), c.create("w1")]) await client.submit(cmd);
  server.state.dropStreams = 3;
  const waits = [];
  const seqs = await collect(
    client,
    {
      retry: { initialMs: 1, maxMs: 3 },
      onReconnect: (r) => {
        waits.push([r.attempt, r.delayMs, r.after]);
        // Once the third drop is behind it, a new event arrives only over the live stream.
        if (r.attempt === 3) setImmediate(() => client.submit(c.create("w2")));
      },
    },
    (s) => s.at(-1) === 3,
  );
  assert.deepEqual(seqs, [1, 2, 3], "every event once, in order");
  assert.deepEqual(waits, [[1, 1, 2], [2, 2, 2], [3, 3, 2]], "1 ms, doubled, capped at 3 ms; resuming after seq 2");
  assert.deepEqual(server.state.streams.map((s) => s.lastEventId), [undefined, "2", "2", "2"]);
});

test("a tail that resumes past the next seq throws a GapError naming both seqs", async (t) => {
  const server = await startMockServer(mwp, { authorityKey });
  t.after(() => server.close());
  const client = new mwp.Client(server.url);
  for (const cmd of [c.open(), c.create("w1"), c.create("w2"), c.create("w3")]) await client.submit(cmd);
  server.state.skip.add(3);
  const seen = [];
  await assert.rejects(
    collect(client, { after: 1, retry: { initialMs: 1 } }, (s) => (seen.push(s.at(-1)), false)),
    (e) => e instanceof mwp.GapError && e instanceof mwp.MwpError && e.code === "TAIL_GAP" && e.details.expected === 3 && e.details.received === 4 && /expected seq 3, received 4/.test(e.message),
  );
  assert.deepEqual(seen, [2]);
});

test("a tail event whose prev does not chain throws LOG_CORRUPT naming the seq and both ids", async (t) => {
  const server = await startMockServer(mwp, { authorityKey });
  t.after(() => server.close());
  const client = new mwp.Client(server.url);
  for (const cmd of [c.open(), c.create("w1"), c.create("w2")]) await client.submit(cmd);
  const events = await client.events("g1");
  const forged = "ab".repeat(32);
  // Seq 3 at the right seq, chained to something other than seq 2.
  server.state.tailEvent = (e) => (e.seq === 3 ? { ...e, prev: forged } : e);
  const seen = [];
  await assert.rejects(
    collect(client, { retry: { initialMs: 1 } }, (s) => (seen.push(s.at(-1)), s.at(-1) === 3)),
    (e) =>
      e instanceof mwp.HttpError && e.code === "LOG_CORRUPT" && e.status === 200 &&
      e.details.seq === 3 && e.details.expected === events[1].id && e.details.received === forged &&
      e.message.includes(`seq 3 that does not chain: its prev is ${forged}, but seq 2 was ${events[1].id}`),
  );
  assert.deepEqual(seen, [1, 2], "nothing past the break is delivered");
  // The first event after `after` is taken as it chains (its predecessor was not read), but
  // only as it hashes: one whose prev was changed no longer has its own id.
  server.state.tailEvent = (e) => (e.seq === 2 ? { ...e, prev: forged } : e);
  await assert.rejects(
    collect(client, { after: 1, retry: { initialMs: 1 } }, (s) => s.at(-1) === 3),
    (e) => e instanceof mwp.HttpError && e.code === "LOG_CORRUPT" && e.details.seq === 2 && /seq 2 that does not verify/.test(e.message),
  );
  server.state.tailEvent = (e) => e;
  assert.deepEqual(await collect(client, { after: 1 }, (s) => s.at(-1) === 3), [2, 3]);
});

test("a tail goes on from the id an event hashes to, not the one a server claims: a forged id and a prev chained to it throw LOG_CORRUPT", async (t) => {
  const server = await startMockServer(mwp, { authorityKey });
  t.after(() => server.close());
  const client = new mwp.Client(server.url);
  for (const cmd of [c.open(), c.create("w1"), c.create("w2")]) await client.submit(cmd);
  const forged = "cd".repeat(32);
  // Seq 2 under another id, and seq 3 chained to that id: consistent, but not what seq 2 holds.
  server.state.tailEvent = (e) => (e.seq === 2 ? { ...e, id: forged } : e.seq === 3 ? { ...e, prev: forged } : e);
  const seen = [];
  await assert.rejects(
    collect(client, { retry: { initialMs: 1 } }, (s) => (seen.push(s.at(-1)), s.at(-1) === 3)),
    (e) => e instanceof mwp.HttpError && e.code === "LOG_CORRUPT" && e.status === 200 && e.details.seq === 2 && /seq 2 that does not verify/.test(e.message),
  );
  assert.deepEqual(seen, [1], "nothing from the forged event on is delivered");
});

test("a tail gives up after retry.attempts failures in a row; with retry: false a drop is thrown at once", async (t) => {
  const server = await startMockServer(mwp, { authorityKey });
  const client = new mwp.Client(server.url);
  await client.submit(c.open());
  await server.close();
  const attempts = [];
  await assert.rejects(
    collect(client, { retry: { initialMs: 1, attempts: 2 }, onReconnect: (r) => attempts.push(r.attempt) }, () => false),
    (e) => e instanceof mwp.HttpError && e.status === 0,
  );
  assert.deepEqual(attempts, [1, 2]);

  const again = await startMockServer(mwp, { authorityKey });
  t.after(() => again.close());
  const other = new mwp.Client(again.url);
  await other.submit(c.open());
  again.state.dropStreams = 1;
  const seen = [];
  await assert.rejects(collect(other, { retry: false }, (s) => (seen.push(...s.slice(-1)), false)), TypeError);
  assert.deepEqual(seen, [1]);
  assert.equal(again.state.streams.length, 1, "no second connection");
});

test("follow rides a real mwp serve through a restart on the same data directory", async (t) => {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "mwp-tail-restart-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(join(dir, "data"));
  fs.writeFileSync(join(dir, "data", "authority.key"), `${authorityKey}\n`, { mode: 0o600 });
  const args = ["--data", join(dir, "data"), "--allow-test-key"];
  let server = await serveNative(args);
  t.after(() => server.stop());
  const { port } = new URL(server.url);
  const client = new mwp.Client(server.url);
  for (const cmd of [c.open(), c.create("w1")]) await client.submit(cmd);

  const replica = new mwp.Replica("g1");
  const controller = new AbortController();
  const seen = [];
  const reconnects = [];
  let restarted;
  const following = client.follow(replica, {
    signal: controller.signal,
    retry: { initialMs: 20, maxMs: 200 },
    onEvent: (e) => {
      seen.push(e.seq);
      if (e.seq === 3) controller.abort();
    },
    onReconnect: (r) => {
      reconnects.push(r.after);
      // The first reconnect: the server is gone; bring it back on the same port and data.
      if (reconnects.length === 1) {
        restarted = (async () => {
          await server.exited;
          server = await serveNative(args, port);
          await client.submit(c.create("w2"));
        })();
      }
    },
    onLive: () => server.stop(),
  });
  await following;
  await restarted;
  assert.deepEqual(seen, [3], "the event accepted after the restart arrives over the resumed tail");
  assert.equal(replica.cursor, 3);
  assert.ok(reconnects.length >= 1 && reconnects.every((after) => after === 2), reconnects.join());
});
