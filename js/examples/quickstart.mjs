// Quickstart: an authority and a replica in one process. Run: node js/examples/quickstart.mjs
import { Authority, Replica, AcceptError, signCommand, publicKeyOf, generateSecretKey } from "mwp";

// Keys: in real use each actor keeps its own secret key.
const aliceKey = generateSecretKey();
const bobKey = generateSecretKey();
const authorityKey = generateSecretKey();
const alice = publicKeyOf(aliceKey);

const base = { org: "acme", group: "g1", session: 1 };
const open = signCommand({
  ...base, actor: "alice", action: "open",
  body: {
    type: "open_group", mission: "m1", title: "Ship it", authority_key: publicKeyOf(authorityKey),
    members: [{ actor: "alice", role: "owner", key: alice }, { actor: "bob", role: "worker", key: publicKeyOf(bobKey) }],
  },
}, aliceKey);
const create = signCommand({
  ...base, actor: "alice", action: "create-w1",
  body: {
    type: "create_work", work: "w1", after: [], spec: { task: "build" },
    contract: { max_attempts: 3, backoff_base_ms: 1000, backoff_max_ms: 60000, cost_budget: 100, risk: "low" },
  },
}, aliceKey);

const authority = new Authority();
authority.submit(open);                       // nowMs defaults to Date.now()
const { receipt } = authority.submit(create);
console.log("accepted at seq", receipt.seq, "frontier", authority.frontier());

// A retry gets the original receipt back, byte for byte.
console.log("retry:", authority.submit(create).outcome);

// Rejections are typed errors carrying the spec's code.
const claim = signCommand({ ...base, actor: "bob", action: "claim-1",
  body: { type: "claim_work", work: "w1", lease_ms: 30000, start_within_ms: 5000 } }, bobKey);
try {
  authority.submit(claim);
} catch (e) {
  if (e instanceof AcceptError) console.log("rejected:", e.code); // CAS_REQUIRED: claim needs `expect`
}
const claimed = authority.submit(signCommand({ ...claim, action: "claim-2", expect: 1 }, bobKey));
// Decision and EventKind are discriminated unions: narrowing on them types the fields.
if (claimed.outcome === "accepted" && claimed.event.kind.type === "work_claimed") console.log("claimed lease", claimed.event.kind.lease.id);

// A replica rebuilds the same state from the log, in any delivery order.
const replica = new Replica("g1");
replica.offerBatch(authority.eventFrames());
console.log("replica cursor", replica.cursor, "same state:", replica.stateHash() === authority.stateHash());
