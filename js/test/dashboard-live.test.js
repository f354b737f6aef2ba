// The dashboard's live tail (js/dashboard/live.js) against a stand-in stream: it reconnects
// after a drop with a capped, growing delay, resumes strictly after the last seq applied,
// stops on a gap (never skips), and stops on a client error or a rejected event.
import { test } from "node:test";
import assert from "node:assert/strict";
import { GapError, RETRY_MAX_MS, followTail, retryDelay } from "../dashboard/live.js";

const ev = (seq) => ({ seq });

/**
 * Runs followTail over scripted connections: each is `{events, end}` where `end` is
 * "close" (the stream ends), an Error (thrown after the events) or "hang" (stays open until
 * the test aborts). Returns what happened.
 */
async function run(connections, { start = 0 } = {}) {
  let cursor = start;
  const opens = [];
  const states = [];
  const sleeps = [];
  const abort = new AbortController();
  const tail = async function* (after, onOpen) {
    const c = connections[opens.length];
    opens.push(after);
    if (!c) {
      abort.abort();
      return;
    }
    if (c.refuse) throw c.refuse;
    onOpen();
    for (const e of c.events ?? []) yield e;
    if (c.end instanceof Error) throw c.end;
    if (c.end === "hang") abort.abort();
  };
  await followTail({
    tail,
    cursor: () => cursor,
    offer: async (e) => {
      if (e.reject) throw Object.assign(new Error(`event ${e.seq} rejected`), { code: "REJECTED" });
      cursor = e.seq;
    },
    onState: (s) => states.push(s),
    signal: abort.signal,
    sleep: async (ms) => sleeps.push(ms),
  });
  return { cursor, opens, states: states.map((s) => s.state), sleeps, last: states.at(-1) };
}

test("retry delays double from the first and are capped", () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 50].map(retryDelay), [500, 1000, 2000, 4000, 8000, 10000, 10000, RETRY_MAX_MS]);
});

test("a dropped stream is reopened after the last seq applied, and the delay resets once open", async () => {
  const r = await run([
    { events: [ev(6), ev(7)], end: new TypeError("network error") },
    { refuse: new TypeError("Failed to fetch") },
    { refuse: Object.assign(new Error("unavailable"), { status: 503 }) },
    { events: [ev(8)], end: "close" },
    { events: [ev(9)], end: "hang" },
  ], { start: 5 });
  assert.deepEqual(r.opens, [5, 7, 7, 7, 8]);
  assert.equal(r.cursor, 9);
  assert.deepEqual(r.sleeps, [500, 1000, 2000, 500]);
  assert.deepEqual(r.states, ["connected", "reconnecting", "reconnecting", "reconnecting", "connected", "reconnecting", "connected"]);
});

test("an event already applied is passed over; one past the next seq is a gap, and the tail stops", async () => {
  const r = await run([
    { events: [ev(3), ev(4)], end: "close" },
    { events: [ev(4), ev(7), ev(8)], end: "hang" },
  ], { start: 3 });
  assert.equal(r.cursor, 4);
  assert.equal(r.last.state, "gap");
  assert.ok(r.last.error instanceof GapError);
  assert.deepEqual([r.last.error.after, r.last.error.seq], [4, 7]);
  assert.match(r.last.error.message, /missing 5\.\.6/);
  assert.deepEqual(r.opens, [3, 4]);
});

test("a client error or a rejected event stops the tail without retrying", async () => {
  const denied = await run([{ refuse: Object.assign(new Error("no access"), { status: 403, code: "FORBIDDEN" }) }]);
  assert.deepEqual(denied.states, ["ended"]);
  assert.equal(denied.opens.length, 1);
  const rejected = await run([{ events: [ev(1), { seq: 2, reject: true }], end: "hang" }]);
  assert.deepEqual(rejected.states, ["connected", "ended"]);
  assert.equal(rejected.cursor, 1);
});
