// The HTTP client against a stand-in for `mwp serve` on 127.0.0.1.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as mwp from "../src/node.js";
import { makeCommands } from "./helpers.js";
import { startMockServer } from "./mock-server.js";

const c = makeCommands(mwp);
const authorityKey = c.key("@authority");

test("submit returns receipts, marks duplicates and throws typed HTTP errors", async (t) => {
  const server = await startMockServer(mwp, { authorityKey });
  t.after(() => server.close());
  const client = new mwp.Client(server.url);
  assert.equal(await client.authorityKey(), c.pub("@authority"));
  const { receipt, duplicate } = await client.submit(c.open());
  assert.equal(receipt.seq, 1);
  assert.equal(duplicate, false);
  assert.equal((await client.submit(c.open())).duplicate, true);
  await assert.rejects(client.submit(c.claim("w9", "b1")), (e) => e instanceof mwp.HttpError && e.status === 409 && e.code === "CAS_REQUIRED");
  await assert.rejects(client.submit({ ...c.create("w1"), action: "tampered" }), (e) => e.status === 401 && e.code === "BAD_SIGNATURE");
  assert.deepEqual(await client.receipt("g1", "alice", "open"), receipt);
  assert.equal(await client.receipt("g1", "alice", "nope"), undefined);
});

test("replay pages through events, and restores a verified snapshot on CURSOR_TOO_OLD", async (t) => {
  const server = await startMockServer(mwp, { authorityKey });
  t.after(() => server.close());
  const client = new mwp.Client(server.url);
  for (const cmd of [c.open(), c.create("w1"), c.create("w2"), c.create("w3")]) await client.submit(cmd);
  const replica = new mwp.Replica("g1");
  const pages = [];
  const r1 = await client.replay(replica, { limit: 3, onEvents: (events) => pages.push(events.length) });
  assert.deepEqual(r1, { cursor: 4, restored: false });
  assert.deepEqual(pages, [3, 1]);

  server.state.oldest = 2;
  const behind = new mwp.Replica("g1");
  const r2 = await client.replay(behind, { trustedKey: c.pub("@authority"), org: "acme" });
  assert.deepEqual(r2, { cursor: 4, restored: true });
  assert.equal(behind.stateHash(), replica.stateHash());

  const untrusting = new mwp.Replica("g1");
  await assert.rejects(client.replay(untrusting, { trustedKey: c.pub("bob"), org: "acme" }), (e) => e.code === "SNAPSHOT_INVALID");
  assert.equal(untrusting.cursor, 0);
});

test("follow replays, then applies the live tail as events are accepted", async (t) => {
  const server = await startMockServer(mwp, { authorityKey });
  t.after(() => server.close());
  const client = new mwp.Client(server.url);
  await client.submit(c.open());
  await client.submit(c.create("w1"));
  const replica = new mwp.Replica("g1");
  const controller = new AbortController();
  const seen = [];
  let live;
  const opened = new Promise((resolve) => (live = resolve));
  const done = client.follow(replica, {
    signal: controller.signal,
    onLive: live,
    onEvent: (event) => {
      seen.push(event.seq);
      if (event.seq === 4) controller.abort();
    },
  });
  // Submit once the tail is open: the events can only arrive over the stream.
  await opened;
  assert.equal(replica.cursor, 2, "the replay reached the head before the tail opened");
  await client.submit(c.create("w2"));
  await client.submit(c.create("w3"));
  await done;
  assert.deepEqual(seen, [3, 4]);
  assert.equal(replica.cursor, 4);
});
