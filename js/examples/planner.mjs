// A planner on `runAgent`: "pia" grows a mission's graph on a running `mwp serve`. fetch's
// result says how many shards it found, and each shard becomes an item (an `expand` recorded
// against fetch's outcome); every other outcome gets the empty disposition. pia stops (as if
// killed) when first asked about fetch, before answering; restarted from her journal file she
// is asked again, first, and the expansion lands once. "bob" works every item.
// Run: mwp serve, then node js/examples/planner.mjs http://127.0.0.1:7878
//      (Deno: deno run --allow-net --allow-read --allow-write --allow-env planner.mjs URL)
import { Client, runAgent, openAgentJournal, signCommand, publicKeyOf, generateSecretKey } from "mwp";
import process from "node:process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [url = "http://127.0.0.1:7878"] = process.argv.slice(2);
let passed = 0;
let failed = 0;
/** @param {string} name @param {boolean} ok @param {string} [detail] */
const check = (name, ok, detail = "") => {
  console.log(`${ok ? "ok" : "FAIL"} - planner: ${name}${ok ? "" : `: ${detail}`}`);
  ok ? passed++ : failed++;
};
/** @template T @param {number} ms @param {string} what @param {Promise<T>} p @returns {Promise<T>} */
const within = (ms, what, p) =>
  Promise.race([p, new Promise((_, reject) => setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms))]);

const dir = mkdtempSync(join(tmpdir(), "mwp-planner-"));
try {
  const client = new Client(url);
  const keys = { alice: generateSecretKey(), bob: generateSecretKey(), pia: generateSecretKey() };
  const group = `plan-${keys.alice.slice(0, 8)}`;
  const base = { org: "acme", group, session: 1 };
  /** @type {import("mwp").Contract} */
  const contract = { max_attempts: 3, backoff_base_ms: 50, backoff_max_ms: 500, cost_budget: 10, risk: "low" };
  /** @param {string} action @param {import("mwp").Body} body */
  const alice = (action, body) => client.submit(signCommand({ ...base, actor: "alice", action, body }, keys.alice));
  await alice("open", {
    type: "open_group", mission: "m", title: "Plan", authority_key: await client.authorityKey(),
    members: [
      { actor: "alice", role: "owner", key: publicKeyOf(keys.alice) },
      { actor: "bob", role: "worker", key: publicKeyOf(keys.bob) },
      { actor: "pia", role: "worker", key: publicKeyOf(keys.pia) },
    ],
  });
  await alice("c-fetch", { type: "create_work", work: "fetch", after: [], contract, spec: {} });

  const all = async () => {
    /** @type {import("mwp").Event[]} */
    const out = [];
    for (;;) {
      const page = await client.events(group, { after: out.length, limit: 500 });
      if (page.length === 0) return out;
      out.push(...page);
    }
  };
  /** @param {{trigger: number, work: string}} q @returns {Promise<import("mwp").NewWork[]>} */
  const rule = async ({ trigger, work }) => {
    if (work !== "fetch") return [];
    const [event] = await client.events(group, { after: trigger - 1, limit: 1 });
    const result = event.kind.type === "work_succeeded" ? /** @type {{shards?: number}} */ (event.kind.result) : {};
    const shards = result?.shards ?? 0;
    return Array.from({ length: shards }, (_, i) => ({ work: `shard-${i + 1}`, contract, after: [], spec: { shard: i + 1 } }));
  };

  // bob works everything there is; he stops when told.
  const bobStop = new AbortController();
  const bob = runAgent({
    client, key: keys.bob, config: { org: "acme", group, actor: "bob", syncMs: 50 }, signal: bobStop.signal,
    handlers: { run: (ctx) => /** @type {import("mwp").Opaque} */ (ctx.work === "fetch" ? { rows: 10, shards: 3 } : { done: ctx.work }) },
  });

  // pia, first run: asked about fetch, she crashes before answering.
  const path = join(dir, "pia.journal");
  const first = new AbortController();
  /** @type {{trigger: number, work: string}} */
  let askedFirst = { trigger: 0, work: "" };
  const journal1 = await openAgentJournal(path);
  await within(20_000, "pia's first question", runAgent({
    client, key: keys.pia, journal: journal1, signal: first.signal,
    config: { org: "acme", group, actor: "pia", capacity: 0, planner: true, syncMs: 50 },
    handlers: {
      plan: (q) => {
        if (askedFirst.trigger === 0) askedFirst = q;
        first.abort();
        return new Promise(() => {}); // never answers: the process is gone
      },
    },
  }));
  await journal1.close();
  check("the planner is asked about fetch's outcome once it is durable", askedFirst.work === "fetch", JSON.stringify(askedFirst));

  // pia, restarted from her journal: asked again, she answers; the graph grows once.
  const second = new AbortController();
  /** @type {number[]} */
  const asked = [];
  const journal2 = await openAgentJournal(path);
  const pia = runAgent({
    client, key: keys.pia, journal: journal2, signal: second.signal,
    config: { org: "acme", group, actor: "pia", capacity: 0, planner: true, syncMs: 50 },
    handlers: {
      plan: (q) => {
        asked.push(q.trigger);
        return rule(q);
      },
      settled: ({ state: s }) => {
        const state = /** @type {any} */ (s);
        const works = Object.values(state?.work ?? {});
        const terminal = Object.keys(state?.terminal ?? {});
        if (works.length === 4 && works.every((w) => w.state === "succeeded") && terminal.every((t) => state.expansions?.[t])) {
          second.abort();
        }
      },
    },
  });
  await within(30_000, "the mission with its shards", pia);
  await journal2.close();
  bobStop.abort();
  await bob;

  const events = /** @type {any[]} */ (await all());
  const expansions = events.filter((e) => e.kind.type === "work_expanded");
  const terminal = events.filter((e) => ["work_succeeded", "work_failed", "work_cancelled"].includes(e.kind.type));
  const per = new Map();
  for (const x of expansions) per.set(x.kind.trigger, (per.get(x.kind.trigger) ?? 0) + 1);
  check("after the restart the planner is asked about fetch again, first", asked[0] === askedFirst.trigger, JSON.stringify(asked));
  const fetchX = expansions.find((x) => x.kind.trigger === askedFirst.trigger);
  check("fetch's outcome expands into three shards, once", per.get(askedFirst.trigger) === 1 && fetchX?.kind.work.map((/** @type {any} */ w) => w.work).join() === "shard-1,shard-2,shard-3",
    JSON.stringify(fetchX?.kind));
  check("the expansion's action ID is expand-<trigger>", fetchX?.action === `expand-${askedFirst.trigger}`, fetchX?.action);
  check("every terminal event has exactly one disposition (the shards' are empty)",
    terminal.length === 4 && terminal.every((t) => per.get(t.seq) === 1), JSON.stringify([...per]));
  check("no expansion without an earlier terminal trigger", expansions.every((x) => terminal.some((t) => t.seq === x.kind.trigger && t.seq < x.seq)));
} catch (e) {
  check("no exception", false, String(/** @type {any} */ (e)?.stack ?? e));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(`planner: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
