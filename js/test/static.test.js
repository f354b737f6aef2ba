// Static exports through the npm package in Node: `Replica.fromStatic` against a plain static
// file server, `offerHead` and provisional events (the cases are in static-export.js; Deno
// runs the same ones), and the signed heads the HTTP client hands over.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as mwp from "../src/node.js";
import { staticCases } from "./static-export.js";
import { makeCommands } from "./helpers.js";
import { startMockServer } from "./mock-server.js";

for (const [name, fn] of staticCases(mwp)) test(name, fn);

const c = makeCommands(mwp);
const authorityKey = c.key("@authority");

test("the client exposes the pages' signed heads, and follow offers the heads of pages and tail", async (t) => {
  const server = await startMockServer(mwp, { authorityKey });
  t.after(() => server.close());
  const client = new mwp.Client(server.url);
  for (const cmd of [c.open(), c.create("w1"), c.create("w2")]) await client.submit(cmd);
  const events = await client.events("g1", { after: 0, limit: 2 });
  assert.equal(events.length, 2);
  assert.equal(events.head.seq, 3, "the page's head rides along");
  assert.deepEqual(Object.keys(events), ["0", "1"], "and stays out of the array's enumerable keys");
  const { head } = await client.page("g1", { after: 3 });
  assert.equal(head.seq, 3);
  assert.equal((await client.head("g1")).seq, 3);

  const replica = new mwp.Replica("g1");
  const pub = c.pub("@authority");
  const seen = [];
  const controller = new AbortController();
  const following = client.follow(replica, {
    trustedKey: pub,
    signal: controller.signal,
    onHead: (h, r) => {
      seen.push([h.seq, r?.result, replica.verifiedThrough]);
      if (h.seq === 4) controller.abort();
    },
    onLive: () => client.submit(c.create("w3")),
  });
  await following;
  assert.equal(replica.cursor, 4);
  assert.equal(replica.verifiedThrough, 4, "the head after the live event verified it");
  assert.deepEqual(seen.at(-1), [4, "verified", 4]);
  assert.ok(seen.some(([seq, result]) => seq === 3 && result === "verified"), JSON.stringify(seen));

  // A head under another key ends the follow with HEAD_INVALID.
  server.state.signHead = (h) => mwp.signHead(h.org, h.group, h.seq, h.id, h.at, mwp.transcriptSecretKey("mallory"));
  await assert.rejects(client.replay(new mwp.Replica("g1"), { trustedKey: pub }), (e) => e.code === "HEAD_INVALID");
  // Without a pinned key, heads are told and not offered.
  const told = [];
  await client.replay(new mwp.Replica("g1"), { onHead: (h, r) => told.push(r) });
  assert.ok(told.length > 0 && told.every((r) => r === undefined), JSON.stringify(told));
});
