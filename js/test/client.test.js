// The HTTP client against a stand-in for `mwp serve` on 127.0.0.1.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as mwp from "../src/node.js";
import { makeCommands } from "./helpers.js";
import { startMockServer } from "./mock-server.js";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

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

// ---- access against a real `mwp serve` ($MWP_BIN, else target/debug/mwp of this repo)


const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Starts `mwp serve` on a loopback port with `args`; resolves to {url, stop}. */
async function serveNative(args) {
  const bin = process.env.MWP_BIN ?? join(repo, process.env.CARGO_TARGET_DIR ?? "target", "debug", "mwp");
  const child = spawn(bin.startsWith("/") ? bin : join(repo, bin), ["serve", "--addr", "127.0.0.1:0", ...args], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  const url = await new Promise((resolve, reject) => {
    let text = "";
    child.stderr.on("data", (chunk) => {
      text += chunk;
      const m = /authority on (http:\/\/[0-9.]+:[0-9]+)\s/.exec(text);
      if (m) resolve(m[1]);
    });
    child.on("exit", (code) => reject(new Error(`mwp serve exited with ${code}: ${text}`)));
  });
  return { url, stop: () => child.kill("SIGINT") };
}

test("a Client reads with an operator token or a member's signature, and without either is refused", async (t) => {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "mwp-client-auth-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const tokens = join(dir, "tokens");
  fs.writeFileSync(tokens, "read read-token-0123456789\nadmin admin-token-0123456789\n", { mode: 0o600 });
  const keyFile = join(dir, "authority.key");
  fs.writeFileSync(keyFile, `${c.key("@authority")}\n`, { mode: 0o600 });
  const server = await serveNative(["--token-file", tokens, "--authority-key-file", keyFile, "--allow-test-key"]);
  t.after(() => server.stop());

  const anonymous = new mwp.Client(server.url);
  await anonymous.submit(c.open()); // commands carry their own signatures
  await anonymous.submit(c.create("w1"));
  await assert.rejects(anonymous.events("g1"), (e) => e instanceof mwp.HttpError && e.status === 401 && e.code === "UNAUTHORIZED");
  await assert.rejects(anonymous.groups(), (e) => e.status === 401 && e.code === "UNAUTHORIZED");

  const operator = new mwp.Client(server.url, { token: "read-token-0123456789" });
  assert.deepEqual((await operator.groups()).groups, [{ group: "g1", head: 2 }]);
  assert.equal((await operator.events("g1")).length, 2);

  const bob = new mwp.Client(server.url, { signer: { actor: "bob", key: c.key("bob") } });
  assert.equal((await bob.events("g1", { after: 1 })).length, 1);
  assert.equal((await bob.receipt("g1", "alice", "open")).seq, 1);
  const replica = new mwp.Replica("g1");
  assert.deepEqual(await bob.replay(replica), { cursor: 2, restored: false });
  await assert.rejects(bob.groups(), (e) => e.status === 403 && e.code === "FORBIDDEN");

  const stranger = new mwp.Client(server.url, { signer: { actor: "carol", key: c.key("carol") } });
  await assert.rejects(stranger.events("g1"), (e) => e.status === 403 && e.code === "FORBIDDEN");
  const impostor = new mwp.Client(server.url, { signer: { actor: "bob", key: c.key("carol") } });
  await assert.rejects(impostor.events("g1"), (e) => e.status === 403 && e.code === "FORBIDDEN");
});
