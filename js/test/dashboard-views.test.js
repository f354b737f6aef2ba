// The dashboard's pictures (js/dashboard/views.js) as pure functions of events and state.
import { test } from "node:test";
import assert from "node:assert/strict";
import { LANE, effectsSvg, historyLanesSvg, historyLayout, historySvg, worksOf } from "../dashboard/views.js";

const ev = (seq, actor, kind) => ({ seq, at: 1000 + seq, actor, kind });
const claim = (seq, work, id, holder, epoch) => ev(seq, holder, { type: "work_claimed", work, lease: { id, holder, epoch } });
const all = (svg, re) => [...svg.matchAll(re)].map((m) => m[1]);

test("history: a lease bar per epoch, ended by each way a lease can end", () => {
  const events = [
    ev(1, "alice", { type: "group_opened", org: "acme" }),
    ev(2, "alice", { type: "work_created", work: "a" }),
    ev(3, "alice", { type: "work_created", work: "b" }),
    claim(4, "a", "La1", "bob", 1),
    claim(5, "b", "Lb1", "cy", 1),
    ev(6, "cy", { type: "session_replaced", session: 2, revoked: [{ work: "b", lease: "Lb1", to: "queued" }] }),
    ev(7, "@authority", { type: "leases_expired", expired: [{ work: "a", lease: "La1", to: "queued" }] }),
    ev(8, "bob", { type: "evidence_recorded", of: "submit", work: "a", lease: "La1", result: {} }),
    claim(9, "a", "La2", "cy", 2),
    claim(10, "b", "Lb2", "cy", 2),
    ev(11, "cy", { type: "work_succeeded", work: "a", lease: "La2", result: {} }),
    ev(12, "alice", { type: "work_cancelled", work: "b", reason: "no", revoked: "Lb2" }),
  ];
  const state = { work: { a: { state: "succeeded", epoch: 2 }, b: { state: "cancelled", epoch: 2 } } };
  const svg = historySvg(events, state);
  assert.deepEqual(all(svg, /<g class="lease" data-work="(\w+)" data-epoch="(?:\d)"/g), ["a", "b", "a", "b"]);
  const titles = all(svg, /<title>(epoch [^<]*)<\/title>/g);
  assert.deepEqual(titles, [
    "epoch 1: lease of bob, seq 4–7 · expired → queued",
    "epoch 1: lease of cy, seq 5–6 · revoked → queued",
    "epoch 2: lease of cy, seq 9–11 · succeeded",
    "epoch 2: lease of cy, seq 10–12 · revoked (cancelled)",
  ]);
  assert.equal(all(svg, /data-type="(evidence_recorded)"/g).length, 1);
  // Every event has a mark: group events on the group lane, expiries on each item's lane.
  assert.deepEqual(all(svg, /data-seq="(\d+)"/g).map(Number), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
});

test("history: a lease still held runs to the right edge", () => {
  const svg = historySvg([ev(1, "alice", { type: "work_created", work: "a" }), claim(2, "a", "L", "bob", 1)], { work: { a: { state: "leased", epoch: 1 } } });
  assert.match(svg, /seq 2–now · held/);
});

test("worksOf names every item an event concerns", () => {
  assert.deepEqual(worksOf({ type: "work_expanded", work: [{ work: "x" }, { work: "y" }] }), ["x", "y"]);
  assert.deepEqual(worksOf({ type: "work_reassigned", work: "z", revoked: { work: "z", lease: "L", to: "queued" } }), ["z"]);
  assert.deepEqual(worksOf({ type: "member_added", actor: "d" }), []);
});

test("effects: each status draws its settlement path", () => {
  const effect = (status, extra = {}) => ({ op: `op-${status}`, epoch: 1, mode: "undeclared", irreversible: false, status, ...extra });
  const state = { work: { w: { effects: {
    k1: effect("settled"), k2: effect("unknown"), k3: effect("reconciled", { happened: false }), k4: effect("intended"),
  } } } };
  const svg = effectsSvg(state);
  const groups = svg.split('<g class="effect"').slice(1);
  const steps = groups.map((g) => all(g, /<circle [^>]*class="pill-dot (\w+)"/g).join(">"));
  assert.deepEqual(steps, ["intended>settled", "intended>unknown", "intended>unknown>reconciled", "intended"]);
  assert.match(groups[2], /it did not happen/);
  assert.match(effectsSvg({ work: {} }), /no effects recorded/);
});

test("history: a window of lanes draws only those lanes, their bars and marks, and one tab stop", () => {
  const n = 100_000;
  const work = {};
  for (let i = 0; i < n; i++) work[`w${i}`] = { state: "queued", epoch: 0 };
  work.w50.state = "leased";
  const events = [
    ev(1, "alice", { type: "group_opened", org: "acme" }),
    ev(2, "alice", { type: "work_created", work: "w3" }),
    ev(3, "alice", { type: "work_created", work: "w50" }),
    claim(4, "w50", "L", "bob", 1),
    ev(5, "alice", { type: "work_created", work: "w99999" }),
  ];
  const layout = historyLayout(events, { work });
  assert.equal(layout.lanes.length, n + 1);
  const svg = historyLanesSvg(layout, 40, 60, 51);
  assert.deepEqual(all(svg, /<g class="lane" data-lane="(\d+)"/g).map(Number), Array.from({ length: 20 }, (_, i) => 40 + i));
  assert.deepEqual(all(svg, /data-seq="(\d+)"/g).map(Number), [3, 4]);
  assert.equal(all(svg, /<g class="lease" data-work="(\w+)"/g).join(), "w50");
  assert.deepEqual(all(svg, /data-lane="(\d+)"[^>]*tabindex="0"/g), ["51"]);
  // The window's own top is lane 40: lane 51 is drawn 11 lanes down.
  assert.match(svg, new RegExp(`<rect x="0" y="${11 * LANE}" [^>]*></rect>\\s*<text x="8" y="${11 * LANE + 31}" class="lane-name">w50<`));
  assert.match(historyLanesSvg(layout, n - 1, n + 5), /data-seq="5"/);
});
