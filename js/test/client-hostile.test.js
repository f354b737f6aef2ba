// The HTTP client against a hostile server: every answer is bounded in size and time, and
// an answer that is not mwp's is a clear MALFORMED, never a TypeError or an endless retry.
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import * as mwp from "../src/node.js";
import { makeCommands } from "./helpers.js";
import { startMockServer } from "./mock-server.js";

const c = makeCommands(mwp);

/**
 * A raw stand-in server: each connection's request head goes to `answer(socket, n, head)`,
 * which writes what it likes. Resolves to `{url, connections, close}`.
 */
async function standIn(answer) {
  const state = { connections: 0 };
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    let head = "";
    const onData = (chunk) => {
      head += chunk.toString("latin1");
      if (!head.includes("\r\n\r\n")) return;
      socket.off("data", onData);
      answer(socket, state.connections++, head);
    };
    socket.on("data", onData);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    state,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

const SSE_HEAD = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

function json(socket, status, body, extra = "") {
  const bytes = Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
  socket.end(`HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${bytes.length}\r\nconnection: close\r\n${extra}\r\n${bytes}`);
}

/** Reads `client.tail("g1", options)` to its end; resolves to the seqs read. */
async function drain(client, options) {
  const seqs = [];
  for await (const e of client.tail("g1", options)) seqs.push(e.seq);
  return seqs;
}

const isMalformed = (e) => e instanceof mwp.HttpError && e.code === "MALFORMED";

test("a tail message longer than any event is MALFORMED, read no further than the bound", { timeout: 30_000 }, async (t) => {
  let sent = 0;
  const server = await standIn((socket) => {
    socket.write(SSE_HEAD + "data: ");
    const chunk = Buffer.alloc(1 << 20, "x");
    const more = () => {
      while (sent < (64 << 20) && !socket.destroyed) {
        sent += chunk.length;
        if (!socket.write(chunk)) return socket.once("drain", more);
      }
      socket.end();
    };
    more();
  });
  t.after(() => server.close());
  await assert.rejects(drain(new mwp.Client(server.url), { retry: false }), isMalformed);
  assert.ok(sent < 40 << 20, `stopped reading early (${sent} bytes sent)`);
});

test("a tail message that is not an event is MALFORMED and is not retried", { timeout: 30_000 }, async (t) => {
  for (const message of ["data: null\n\n", "data: {not json\n\n", 'data: {"seq": "1"}\n\n', "data: [1]\n\n"]) {
    const server = await standIn((socket) => socket.end(SSE_HEAD + message));
    await assert.rejects(drain(new mwp.Client(server.url), { retry: { initialMs: 1, attempts: 3 } }), isMalformed, message);
    assert.equal(server.state.connections, 1, `${message}: not retried`);
    await server.close();
  }
});

test("a tail that goes silent, or is never answered, is dropped after idleMs and reconnected", { timeout: 30_000 }, async (t) => {
  const silent = await standIn((socket) => socket.write(SSE_HEAD)); // then nothing
  const mute = await standIn(() => {}); // not even a head
  t.after(() => Promise.all([silent.close(), mute.close()]));
  for (const server of [silent, mute]) {
    const reconnects = [];
    await assert.rejects(
      drain(new mwp.Client(server.url), { idleMs: 200, retry: { initialMs: 1, attempts: 1 }, onReconnect: (r) => reconnects.push(r) }),
      (e) => e instanceof mwp.HttpError && e.status === 0 && e.code === "STORAGE",
    );
    assert.equal(server.state.connections, 2, "reconnected once, then gave up");
    assert.equal(reconnects.length, 1);
  }
});

test("answers of the wrong shape are MALFORMED; oversized answers are not read", { timeout: 30_000 }, async (t) => {
  const answers = {
    "/v1/groups/null/events": (s) => json(s, "200 OK", "null"),
    "/v1/groups/number/events": (s) => json(s, "200 OK", { events: 5 }),
    "/v1/groups/text/events": (s) => json(s, "200 OK", "<html>"),
    "/v1/groups/huge/events": (s) => s.write("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4294967296\r\n\r\n{"),
    "/v1/groups": (s) => json(s, "200 OK", { groups: "all" }),
    "/v1/authority": (s) => json(s, "200 OK", { key: 5 }),
  };
  const server = await standIn((socket, _, head) => {
    const target = head.split(" ")[1].split("?")[0];
    if (answers[target]) return answers[target](socket);
    // An error answer far longer than any mwp error.
    socket.write("HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 4294967296\r\n\r\n{");
  });
  t.after(() => server.close());
  const client = new mwp.Client(server.url);
  for (const group of ["null", "number", "text", "huge"]) await assert.rejects(client.page(group), isMalformed, group);
  await assert.rejects(client.groups(), isMalformed);
  await assert.rejects(client.authorityKey(), isMalformed);
  await assert.rejects(client.head("g1"), (e) => e instanceof mwp.HttpError && e.status === 404 && e.code === "STORAGE");
});

test("replay stops at a page that repeats or skips instead of asking for it forever", { timeout: 30_000 }, async (t) => {
  const real = await startMockServer(mwp, { authorityKey: c.key("@authority") });
  const upstream = new mwp.Client(real.url);
  for (const cmd of [c.open(), c.create("w1"), c.create("w2")]) await upstream.submit(cmd);
  const { events } = await upstream.page("g1");
  await real.close();
  const cases = {
    repeats: () => [events[0]],
    skips: (after) => (after === 0 ? [events[0]] : [events[2]]),
  };
  for (const [name, pageAfter] of Object.entries(cases)) {
    const server = await standIn((socket, _, head) => {
      const after = Number(new URL(head.split(" ")[1], "http://x").searchParams.get("after"));
      json(socket, "200 OK", { events: pageAfter(after) });
    });
    const replica = new mwp.Replica("g1");
    await assert.rejects(new mwp.Client(server.url).replay(replica), (e) => e instanceof mwp.HttpError && e.code === "LOG_CORRUPT", name);
    assert.equal(replica.cursor, 1, name);
    assert.ok(server.state.connections <= 2, `${name}: ${server.state.connections} requests`);
    await server.close();
  }
});

const isTimeout = (e) => e instanceof mwp.HttpError && e.code === "TIMEOUT" && e.status === 0;

test("a request a server never answers, or never finishes, fails with TIMEOUT", { timeout: 30_000 }, async (t) => {
  const mute = await standIn(() => {}); // accepts, reads the request, answers nothing
  // Answers the head, then never sends the rest of the body.
  const stalled = await standIn((socket) => socket.write("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"));
  t.after(() => Promise.all([mute.close(), stalled.close()]));
  for (const server of [mute, stalled]) {
    const client = new mwp.Client(server.url, { timeoutMs: 150 });
    const calls = {
      authorityKey: () => client.authorityKey(),
      groups: () => client.groups(),
      submit: () => client.submit(c.open()),
      page: () => client.page("g1"),
      events: () => client.events("g1"),
      head: () => client.head("g1"),
      receipt: () => client.receipt("g1", "alice", "a1"),
      snapshot: () => client.snapshot("g1"),
      replay: () => client.replay(new mwp.Replica("g1")),
      follow: () => client.follow(new mwp.Replica("g1")),
    };
    for (const [name, call] of Object.entries(calls)) {
      const started = Date.now();
      await assert.rejects(call(), isTimeout, name);
      assert.ok(Date.now() - started < 5_000, `${name}: ended after its timeout`);
    }
    // Per call: a client without a bound, a call with one.
    await assert.rejects(new mwp.Client(server.url, { timeoutMs: Infinity }).page("g1", { timeoutMs: 100 }), isTimeout);
  }
  // The caller's own abort is still its own, not a timeout.
  await assert.rejects(new mwp.Client(mute.url).page("g1", { signal: AbortSignal.timeout(100) }), (e) => e.name === "TimeoutError" && !(e instanceof mwp.HttpError));
});

test("a request's default timeout is 60 s, also over a fetch that ignores its signal", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const never = () => new Promise(() => {}); // a fetch that never settles, whatever its signal
  const client = new mwp.Client("http://127.0.0.1:9", { fetch: never });
  let outcome;
  client.groups().then(
    () => (outcome = "answered"),
    (e) => (outcome = e),
  );
  const settle = () => new Promise((resolve) => setImmediate(resolve));
  t.mock.timers.tick(60_000 - 1);
  await settle();
  assert.equal(outcome, undefined, "still waiting just before 60 s");
  t.mock.timers.tick(1);
  await settle();
  assert.ok(isTimeout(outcome), `TIMEOUT after 60 s: ${outcome}`);
  assert.equal(outcome.details.timeoutMs, 60_000);
});

test("a caller's abort settles a request at once, also over a fetch that ignores its signal", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const never = () => new Promise(() => {}); // a fetch that never settles, whatever its signal
  const settle = () => new Promise((resolve) => setImmediate(resolve));
  for (const timeoutMs of [60_000, Infinity]) {
    const client = new mwp.Client("http://127.0.0.1:9", { fetch: never, timeoutMs });
    const controller = new AbortController();
    let outcome;
    client.groups({ signal: controller.signal }).then(
      () => (outcome = "answered"),
      (e) => (outcome = e),
    );
    await settle();
    assert.equal(outcome, undefined, "waiting for the answer");
    const reason = new DOMException("stopped by the caller", "AbortError");
    controller.abort(reason);
    await settle();
    assert.equal(outcome, reason, `timeoutMs ${timeoutMs}: the abort's own reason, with no time passed`);
  }
});

test("a timeout or delay that is not a positive number of milliseconds is MALFORMED, never a timer that fires at once", { timeout: 30_000 }, async (t) => {
  const isBad = (e) => e instanceof mwp.MwpError && e.code === "MALFORMED";
  for (const bad of [0, -1, NaN, "100", null, {}]) {
    assert.throws(() => new mwp.Client("http://127.0.0.1:9", { timeoutMs: bad }), isBad, String(bad));
    await assert.rejects(new mwp.Client("http://127.0.0.1:9").groups({ timeoutMs: bad }), isBad, String(bad));
    await assert.rejects(drain(new mwp.Client("http://127.0.0.1:9"), { idleMs: bad }), isBad, String(bad));
  }
  await assert.rejects(drain(new mwp.Client("http://127.0.0.1:9"), { retry: { initialMs: -1 } }), isBad);
  // No bound, and a bound past the longest timer, wait: a timer given Infinity or 2^31 ms
  // would fire after 1 ms, dropping a quiet tail at once and reconnecting without end.
  const silent = await standIn((socket) => socket.write(SSE_HEAD));
  t.after(() => silent.close());
  for (const idleMs of [Infinity, 2 ** 31]) {
    const before = silent.state.connections;
    await assert.rejects(drain(new mwp.Client(silent.url), { idleMs, signal: AbortSignal.timeout(300), retry: { initialMs: 1 } }), (e) => e.name === "TimeoutError");
    assert.equal(silent.state.connections - before, 1, `idleMs ${idleMs}: one connection, kept`);
  }
});

test("a command that is not an object is MALFORMED before any request, not a TypeError", async () => {
  let requests = 0;
  const client = new mwp.Client("http://127.0.0.1:9", { fetch: async () => (requests++, new Response("{}")) });
  for (const command of [undefined, null, "cmd", 5, [c.open()]]) {
    await assert.rejects(client.submit(command), (e) => e instanceof mwp.MwpError && e.code === "MALFORMED", String(command));
  }
  assert.equal(requests, 0);
});

test("a CURSOR_TOO_OLD whose snapshot location is not a path is MALFORMED, not a TypeError", { timeout: 30_000 }, async (t) => {
  const server = await standIn((socket) =>
    json(socket, "410 Gone", { code: "CURSOR_TOO_OLD", message: "too old", snapshot: { seq: 5, hash: "00", location: 5 } }));
  t.after(() => server.close());
  await assert.rejects(new mwp.Client(server.url).replay(new mwp.Replica("g1")), isMalformed);
  assert.equal(server.state.connections, 1, "nothing fetched from it");
});

test("an error answer is read as the native client reads it: a code of the spec's or STORAGE, words quoted printable", { timeout: 30_000 }, async (t) => {
  const long = "x".repeat(5000);
  const answers = {
    "/v1/groups/made-up/head": (s) => json(s, "400 Bad Request", { code: "PWNED", message: "run this" }),
    "/v1/groups/no-message/head": (s) => json(s, "409 Conflict", { code: "FENCED" }),
    "/v1/groups/escape/head": (s) => json(s, "409 Conflict", { code: "FENCED", message: "a\u001b]0;owned\u0007b", current: 3 }),
    "/v1/groups/long/head": (s) => json(s, "409 Conflict", { code: "FENCED", message: long }),
    "/v1/groups/tail-made-up/events/stream": (s) => s.end(SSE_HEAD + 'event: error\ndata: {"code":"PWNED","message":"x"}\n\n'),
    "/v1/groups/tail-real/events/stream": (s) => s.end(SSE_HEAD + 'event: error\ndata: {"code":"CURSOR_TOO_OLD","message":"a\\u001bb","oldest":4}\n\n'),
    "/v1/groups/tail-not-json/events/stream": (s) => s.end(SSE_HEAD + "event: error\ndata: gone \u001b[31m\u009b0m\n\n"),
    "/v1/groups/tail-not-object/events/stream": (s) => s.end(SSE_HEAD + 'event: error\ndata: "PWNED"\n\n'),
    "/v1/groups/tail-null/events/stream": (s) => s.end(SSE_HEAD + "event: error\ndata: null\n\n"),
  };
  const server = await standIn((socket, _, head) => {
    const target = head.split(" ")[1].split("?")[0];
    (answers[target] ?? ((s) => json(s, "404 Not Found", { code: "NOT_FOUND", message: target })))(socket);
  });
  t.after(() => server.close());
  const client = new mwp.Client(server.url);
  const fails = async (p, code, status, check = () => true) => {
    const e = await p.then(() => assert.fail("succeeded"), (e) => e);
    assert.ok(e instanceof mwp.HttpError, String(e));
    assert.deepEqual([e.code, e.status], [code, status], e.message);
    assert.ok(check(e), `${e.message} ${JSON.stringify(e.details)}`);
  };
  await fails(client.head("made-up"), "STORAGE", 400, (e) => !e.message.includes("run this"));
  await fails(client.head("no-message"), "STORAGE", 409);
  await fails(client.head("escape"), "FENCED", 409, (e) => e.message === "a\\u{1b}]0;owned\\u{7}b" && e.details.current === 3);
  await fails(client.head("long"), "FENCED", 409, (e) => e.message === `${"x".repeat(1000)}…`);
  const tail = (group) => (async () => {
    for await (const _ of client.tail(group, { retry: false }));
  })();
  await fails(tail("tail-made-up"), "STORAGE", 200, (e) => e.message.includes("not mwp's"));
  await fails(tail("tail-real"), "CURSOR_TOO_OLD", 200, (e) => e.message === "a\\u{1b}b" && e.details.oldest === 4);
  // Not JSON, or not an object: STORAGE as any other answer that is not mwp's (natively too),
  // its words quoted printable.
  await fails(tail("tail-not-json"), "STORAGE", 200, (e) => e.message.endsWith("not mwp's: gone \\u{1b}[31m\\u{9b}0m"));
  await fails(tail("tail-not-object"), "STORAGE", 200, (e) => e.message.endsWith('not mwp\'s: "PWNED"'));
  await fails(tail("tail-null"), "STORAGE", 200, (e) => e.message.endsWith("not mwp's: null"));
});

test("a seq, page size or retry count that is not a count is MALFORMED before any request", async () => {
  let requests = 0;
  const client = new mwp.Client("http://127.0.0.1:9", { fetch: async () => (requests++, new Response("{}")) });
  const isBad = (e) => e instanceof mwp.MwpError && !(e instanceof mwp.HttpError) && e.code === "MALFORMED";
  for (const bad of [-1, 1.5, NaN, "5", 5n, null, 2 ** 53]) {
    await assert.rejects(client.events("g1", { after: bad }), isBad, `after ${String(bad)}`);
    await assert.rejects(client.page("g1", { limit: bad }), isBad, `limit ${String(bad)}`);
    await assert.rejects(drain(client, { after: bad }), isBad, `tail after ${String(bad)}`);
    await assert.rejects(drain(client, { retry: { attempts: bad } }), isBad, `attempts ${String(bad)}`);
  }
  await assert.rejects(client.page("g1", { limit: 0 }), isBad, "limit 0");
  assert.equal(requests, 0);
});
