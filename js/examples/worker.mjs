// A worker on `runAgent`: it opens a small mission on a running `mwp serve` (three work items,
// the last after the other two), then works it as "bob" until every item has succeeded. Each
// item's first run checkpoints (which yields the lease, SPEC §5); the next run sends one
// notification, an effect whose intent is recorded before it is performed, and submits.
// Run: mwp serve, then node js/examples/worker.mjs http://127.0.0.1:7878 [journal file]
//      (Deno: deno run --allow-net --allow-read --allow-write --allow-env worker.mjs URL)
import { Client, runAgent, openAgentJournal, signCommand, publicKeyOf, generateSecretKey } from "mwp";
import process from "node:process";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [url = "http://127.0.0.1:7878", journalPath] = process.argv.slice(2);
const client = new Client(url);
const aliceKey = generateSecretKey(), bobKey = generateSecretKey();
const group = `worker-${aliceKey.slice(0, 8)}`;
const base = { org: "acme", group, session: 1 };
/** @type {import("mwp").Contract} */
const contract = { max_attempts: 3, backoff_base_ms: 100, backoff_max_ms: 1000, cost_budget: 10, risk: "low" };
/** @param {string} action @param {import("mwp").Body} body */
const alice = (action, body) => client.submit(signCommand({ ...base, actor: "alice", action, body }, aliceKey));

await alice("open", { type: "open_group", mission: "launch", title: "Launch", authority_key: await client.authorityKey(),
  members: [{ actor: "alice", role: "owner", key: publicKeyOf(aliceKey) }, { actor: "bob", role: "worker", key: publicKeyOf(bobKey) }] });
for (const [work, after] of /** @type {const} */ ([["fetch", []], ["build", []], ["ship", ["fetch", "build"]]])) {
  await alice(`create-${work}`, { type: "create_work", work, after: [...after], contract, spec: { do: work } });
}

const journal = await openAgentJournal(journalPath ?? join(tmpdir(), `${group}-bob.journal`));
const stop = new AbortController();
/** @type {string[]} */
const sent = [];
await runAgent({
  client,
  key: bobKey,
  config: { org: "acme", group, actor: "bob", syncMs: 100 },
  journal,
  signal: stop.signal,
  handlers: {
    async run(ctx) {
      if (ctx.saved === null) return ctx.checkpoint({ prepared: ctx.work });
      const receipt = await ctx.effect("notify", ({ key }) => {
        sent.push(ctx.work);
        return { message: `${ctx.work} done`, id: key.slice(0, 8) };
      }, { mode: "keyed", target: { channel: "ops" } });
      return { work: ctx.work, notified: receipt.id };
    },
    settled: ({ state }) => {
      const work = Object.values(state?.work ?? {});
      if (work.length === 3 && work.every((w) => w.state === "succeeded")) stop.abort();
    },
  },
});
await journal.close();
console.log(`worker: ${group} 3 of 3 succeeded, notifications ${sent.toSorted().join(",")}`);
