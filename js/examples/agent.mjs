// An agent on the core's driver: it claims what the frontier offers, runs it, records an
// effect's intent before performing it, and restarts from the write sets it committed.
// Run: node js/examples/agent.mjs (against `mwp serve`, pass `client: new Client(url)`).
import { Agent, AgentImage, Authority, pump, signCommand, publicKeyOf, generateSecretKey } from "mwp";

const aliceKey = generateSecretKey(), bobKey = generateSecretKey(), authorityKey = generateSecretKey();
const base = { org: "acme", group: "g1", session: 1 };
/** @type {import("mwp").Contract} */
const contract = { max_attempts: 3, backoff_base_ms: 1000, backoff_max_ms: 60000, cost_budget: 100, risk: "low" };
const authority = new Authority();
authority.submit(signCommand({ ...base, actor: "alice", action: "open", body: {
  type: "open_group", mission: "m1", title: "Ship it", authority_key: publicKeyOf(authorityKey),
  members: [{ actor: "alice", role: "owner", key: publicKeyOf(aliceKey) },
            { actor: "bob", role: "worker", key: publicKeyOf(bobKey) }] } }, aliceKey));
authority.submit(signCommand({ ...base, actor: "alice", action: "create-w1", body: {
  type: "create_work", work: "w1", after: [], spec: { task: "build" }, contract } }, aliceKey));

// What `pump` needs of a transport: a `Client` of `mwp serve` has exactly these.
/** @type {import("mwp").AgentTransport} */
const client = {
  submit: async (command) => ({ receipt: authority.submit(command).receipt }),
  events: async (_group, { after }) => authority.events(after),
  receipt: async (_group, actor, action) => authority.receipt(actor, action),
  snapshot: async () => authority.snapshot(authorityKey),
};

const config = { org: "acme", group: "g1", actor: "bob", authorityKey: publicKeyOf(authorityKey) };
/** @type {Uint8Array[]} */
const committed = [];                                  // stands for a durable store
/** @type {Parameters<typeof pump>[1]} */
const host = {
  client,
  commit: (writeSet) => void committed.push(writeSet.cbor), // resolve only once durable
  dispatch: async (effect) => ({ outcome: { sent: true }, receipt: { id: `mail-${effect.key.slice(0, 8)}` } }),
  onNotice: (n) => console.log("notice", n.type, "work" in n ? n.work : ""),
};

let bob = new Agent(config, bobKey);
bob.handleConnectivity(true);
await pump(bob, host);                                 // claims w1, starts it: notice run w1

bob.intendEffect("w1", "email", { mode: "undeclared", target: { to: "ops@example.com" } });
await pump(bob, host);                                 // intent accepted, then dispatched once

// The process dies; the committed write sets bring it back where it was.
const image = new AgentImage();
for (const ws of committed) image.commit(ws);
bob = Agent.restore(config, bobKey, image);
bob.handleConnectivity(true);
await pump(bob, host);                                 // notice run w1 (resumed)
bob.submit("w1", { ok: true });
await pump(bob, host);

console.log("w1", authority.state()?.work.w1.state, "same state:", bob.stateHash() === authority.stateHash());
