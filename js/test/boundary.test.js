// Values a caller passes in from JavaScript: whatever they are, the package answers with its
// own error (`MALFORMED` naming what was wrong), never a trap, a raw TypeError or an exception
// thrown through the module, and the object it was given to keeps working.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as mwp from "../src/node.js";
import { makeCommands } from "./helpers.js";

const c = makeCommands(mwp);

const isMalformed = (e) => e instanceof mwp.MwpError && e.code === "MALFORMED";

/** `depth` arrays, one inside the other. */
function nested(depth) {
  let v = 1;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

/** Data no JSON text can carry, each with what it is. */
function hostileData() {
  const sparse = [];
  sparse.length = 2 ** 32 - 1;
  return {
    "a getter that throws": { get org() { throw new Error("getter"); } },
    "a proxy whose trap throws": new Proxy({}, { ownKeys() { throw new Error("trap"); } }),
    "a revoked proxy": (() => { const p = Proxy.revocable([], {}); p.revoke(); return p.proxy; })(),
    "NaN": { n: NaN },
    "an infinity": [Infinity],
    "nesting 100,000 deep": nested(100_000),
    "a lone surrogate": { text: "a\uD800" },
    "a lone surrogate in a key": { ["k\uDC00"]: 1 },
    "a Map": new Map([["a", 1]]),
    "bytes inside an object": { b: new Uint8Array(2) },
    "a function": { f() {} },
    "a symbol": [Symbol("s")],
    "a BigInt past 64 bits": { n: 2n ** 70n },
    "an array of length 2^32 - 1": sparse,
  };
}

test("data JSON has no form for is MALFORMED at every export that reads an object, and nothing breaks", { timeout: 60_000 }, () => {
  const authority = new mwp.Authority();
  const replica = new mwp.Replica("g1");
  for (const [what, value] of Object.entries(hostileData())) {
    for (const [name, call] of Object.entries({
      "canonical.encode": () => mwp.canonical.encode(value),
      "canonical.hash": () => mwp.canonical.hash({ value }),
      parseCommand: () => mwp.parseCommand({ ...c.open(), body: { type: "open_group", spec: value } }),
      signCommand: () => mwp.signCommand(value, c.key("alice")),
      encodeEvent: () => mwp.encodeEvent(value),
      "Authority.submit": () => authority.submit(value, 1),
      "Authority.decide": () => authority.decide(value, 1),
      "Replica.offerHead": () => replica.offerHead(value, c.pub("@authority")),
    })) {
      assert.throws(call, (e) => isMalformed(e) || (e instanceof mwp.MwpError && e.code === "HEAD_INVALID"), `${name}(${what})`);
    }
    const offered = replica.offer(value);
    assert.equal(offered.result, "rejected", `Replica.offer(${what})`);
    assert.equal(offered.error.code, "MALFORMED", `Replica.offer(${what})`);
  }
  // Nothing was left half-done: the same objects take good input.
  assert.equal(authority.submit(c.open(), 1000).outcome, "accepted");
  assert.equal(replica.offer(authority.eventFrames(0).subarray(4)).result, "applied");
  assert.equal(mwp.canonical.hash([1]), mwp.canonical.hash([1]));
});

test("a number JSON cannot hold exactly is refused, not taken as null", () => {
  for (const n of [NaN, Infinity, -Infinity]) {
    assert.throws(() => mwp.canonical.encode(n), isMalformed, String(n));
    assert.throws(() => mwp.canonical.encode({ n }), isMalformed, String(n));
  }
  // Two different strings never encode (or hash) the same.
  assert.throws(() => mwp.canonical.hash("a\uD800"), isMalformed);
  assert.equal(mwp.canonical.decode(mwp.canonical.encode("a\uFFFD")), "a\uFFFD");
});

test("a `__proto__` key is data: decoded as an own key, never as the object's prototype", () => {
  const value = JSON.parse('{"__proto__": {"approved": true}, "a": 1}');
  const back = mwp.canonical.decode(mwp.canonical.encode(value));
  assert.equal(Object.getPrototypeOf(back), Object.prototype);
  assert.equal(back.approved, undefined, "no inherited `approved`");
  assert.deepEqual(Object.keys(back).sort(), ["__proto__", "a"]);
  assert.deepEqual(Object.getOwnPropertyDescriptor(back, "__proto__").value, { approved: true });
  // Through the authority: a payload with the key decodes as it was signed.
  const authority = new mwp.Authority();
  authority.submit(c.open(), 1000);
  const spec = JSON.parse('{"__proto__": {"approved": true}}');
  const d = authority.submit(c.cmd("alice", "create-w1", { type: "create_work", work: "w1", contract: { max_attempts: 3, backoff_base_ms: 100, backoff_max_ms: 1000, cost_budget: 10, risk: "low" }, after: [], spec }), 1001);
  const event = mwp.decodeEvent(d.eventCbor);
  assert.equal(event.kind.spec.approved, undefined);
  assert.ok(Object.hasOwn(event.kind.spec, "__proto__"));
  mwp.verifyEvent(event); // re-encoded from the decoded object: the same bytes
});

test("an argument of the wrong type is MALFORMED before it enters the module, which keeps working", () => {
  const sparse = [];
  sparse.length = 2 ** 32 - 1;
  const calls = {
    "new Replica(5)": () => new mwp.Replica(5),
    "new Replica()": () => new mwp.Replica(),
    "new Replica({length: 1e9})": () => new mwp.Replica({ length: 1e9 }),
    "publicKeyOf(lone surrogate)": () => mwp.publicKeyOf("\uD800"),
    "sha256(string)": () => mwp.sha256("abc"),
    "sha256(number)": () => mwp.sha256(5),
    "sha256(undefined)": () => mwp.sha256(undefined),
    "decodeEvent(array)": () => mwp.decodeEvent([1, 2, 3]),
    "transcriptSecretKey(object)": () => mwp.transcriptSecretKey({}),
    "submitBatch(sparse)": () => new mwp.Authority().submitBatch(sparse, 1),
    "submitBatch(object)": () => new mwp.Authority().submitBatch({ length: 3 }, 1),
    "planExport(chunkEvents -1)": () => mwp.planExport([], { head: {}, authorityKey: c.pub("@authority"), chunkEvents: -1 }),
  };
  // A number the glue cannot convert, a proxy where bytes belong.
  const sparseNumber = [];
  sparseNumber.length = 2 ** 32 - 1;
  const authority = new mwp.Authority();
  Object.assign(calls, {
    "submit(nowMs BigInt)": () => authority.submit(c.open(), 5n),
    "frontier(nowMs symbol)": () => authority.frontier(Symbol("t")),
    "frontier(nowMs of a long array)": () => authority.frontier(sparseNumber),
    "sha256(proxy)": () => mwp.sha256(new Proxy({}, { get() { throw new Error("trap"); } })),
    "AgentImage.commit(undefined)": () => new mwp.AgentImage().commit(undefined),
  });
  for (const [name, call] of Object.entries(calls)) assert.throws(call, isMalformed, name);
  assert.equal(authority.submit(c.open(), 1000).outcome, "accepted", "the authority still takes good input");
  // The module took no damage: strings and bytes still cross.
  assert.equal(new mwp.Replica("g1").group, "g1");
  assert.equal(mwp.sha256(new Uint8Array(0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
});

test("an integer a JS number cannot hold exactly is MALFORMED on the way out; digits inside a string are text", () => {
  const u64 = (major, n) => {
    const b = new Uint8Array(9);
    b[0] = (major << 5) | 27;
    new DataView(b.buffer).setBigUint64(1, n);
    return b;
  };
  assert.equal(mwp.canonical.decode(u64(0, 2n ** 53n - 1n), { strict: false }), 2 ** 53 - 1);
  assert.equal(mwp.canonical.decode(u64(1, 2n ** 53n - 2n), { strict: false }), -(2 ** 53 - 1));
  assert.throws(() => mwp.canonical.decode(u64(0, 2n ** 53n), { strict: false }), isMalformed);
  assert.throws(() => mwp.canonical.decode(u64(1, 2n ** 53n)), isMalformed);
  const text = { s: "12345678901234567890", t: "\"\\\" 99999999999999999999" };
  assert.deepEqual(mwp.canonical.decode(mwp.canonical.encode(text)), text);
});

test("lone surrogates are refused on an engine without String.prototype.isWellFormed too", (t) => {
  const isWellFormed = Object.getOwnPropertyDescriptor(String.prototype, "isWellFormed");
  delete String.prototype.isWellFormed;
  t.after(() => isWellFormed && Object.defineProperty(String.prototype, "isWellFormed", isWellFormed));
  const authority = new mwp.Authority();
  assert.throws(() => mwp.publicKeyOf("\uD800"), isMalformed);
  assert.throws(() => mwp.canonical.encode({ a: "x\uDC00" }), isMalformed);
  assert.throws(() => mwp.canonical.encode({ ["k\uD800"]: 1 }), isMalformed);
  assert.throws(() => authority.submit({ ...c.open(), action: "a\uD800" }, 1), isMalformed);
  // U+FFFD itself, and a surrogate pair, are text.
  const text = { ["k\uFFFD"]: "a\u{1F600}\uFFFD" };
  assert.deepEqual(mwp.canonical.decode(mwp.canonical.encode(text)), text);
  assert.equal(authority.submit(c.open(), 1000).outcome, "accepted", "the authority still takes good input");
});
