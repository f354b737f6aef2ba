// Snapshots: a replica that fell behind restores a signed snapshot and resumes after it.
// Run: node js/examples/snapshot.mjs
import { Authority, Replica, OfferError, runTranscript, transcriptSecretKey, publicKeyOf, signCommand } from "mwp";

// Transcripts (SPEC §12) run in memory exactly as `mwp transcript` runs them.
const transcript = [
  { at: 1000, org: "acme", group: "g1", actor: "alice", action: "open",
    body: { type: "open_group", mission: "m1", title: "t", members: [{ actor: "alice", role: "owner" }] } },
  { actor: "alice", action: "c1", body: { type: "create_work", work: "w1", after: [], spec: {},
    contract: { max_attempts: 1, backoff_base_ms: 1, backoff_max_ms: 1, cost_budget: 1, risk: "low" } },
    expect: { outcome: "accepted", state: "queued" } },
].map((s) => JSON.stringify(s)).join("\n");
const { lines, failed } = runTranscript(transcript);
console.log(lines.length, "steps, failed:", failed);

// The same group in an Authority, signed with the transcript runner's derived keys.
const key = (/** @type {string} */ actor) => transcriptSecretKey(actor);
const authority = new Authority();
for (const line of transcript.split("\n")) {
  const step = JSON.parse(line);
  const body = step.body.type === "open_group"
    ? { ...step.body, authority_key: publicKeyOf(key("@authority")), members: [{ actor: "alice", role: "owner", key: publicKeyOf(key("alice")) }] }
    : step.body;
  authority.submit(signCommand({ org: "acme", group: "g1", actor: step.actor, action: step.action, session: 1, body }, key(step.actor)), 1000);
}

const snapshot = authority.snapshot(key("@authority"));     // canonical CBOR, signed
const replica = new Replica("g1");
replica.restore(snapshot, { trustedKey: publicKeyOf(key("@authority")), org: "acme" });
console.log("restored at seq", replica.cursor, "same state:", replica.stateHash() === authority.stateHash());

try {
  new Replica("g1").restore(snapshot, { trustedKey: publicKeyOf(key("mallory")), org: "acme" });
} catch (e) {
  if (!(e instanceof OfferError)) throw e;
  console.log(true, e.code, "-", e.details.reason);
}
