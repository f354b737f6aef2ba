// Sealed audit logs in the Node/Deno file store (SPEC §6a, /docs/format.md "Sealed audit
// log"), shared by Node (file-store-audit.test.js) and Deno (deno/file_store_audit_test.js).
// `mwp` is the package's entry point plus the audit helpers of src/file-store.js
// (`generateAuditIdentity`, `openAudit`, `auditManifest`).

import * as fs from "node:fs";
import * as os from "node:os";
import { join } from "node:path";
import { makeCommands } from "./helpers.js";

function check(cond, message) {
  if (!cond) throw new Error(message);
}

function eq(a, b, what) {
  const x = JSON.stringify(a);
  const y = JSON.stringify(b);
  if (x !== y) throw new Error(`${what}: ${x} !== ${y}`);
}

async function rejects(p, code) {
  try {
    await p;
  } catch (e) {
    check(e.code === code, `expected ${code}, got ${e.code}: ${e.message}`);
    return e;
  }
  throw new Error(`expected ${code}, but it succeeded`);
}

function throws(fn, code) {
  try {
    fn();
  } catch (e) {
    check(e.code === code, `expected ${code}, got ${e.code}: ${e.message}`);
    return e;
  }
  throw new Error(`expected ${code}, but it succeeded`);
}

const tempDir = (name) => fs.mkdtempSync(join(os.tmpdir(), `mwp-audit-${name}-`));
const groupDir = (dir) => join(dir, "groups", "g1");
const listing = (dir) => fs.readdirSync(groupDir(dir)).sort();
const sameBytes = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

/** The frames of a frame batch (u32 LE length, bytes), as copies. */
function splitFrames(frames) {
  const out = [];
  const view = new DataView(frames.buffer, frames.byteOffset, frames.byteLength);
  for (let at = 0; at < frames.length;) {
    const len = view.getUint32(at, true);
    out.push(frames.slice(at + 4, at + 4 + len));
    at += 4 + len;
  }
  return out;
}

function policy(recipient, { org = "acme", removePlain = false } = {}) {
  return { schema: "mwp.org-policy.v1", orgs: { [org]: { recipients: [recipient], retain_days: 30, remove_plain: removePlain } } };
}

/**
 * A store holding g1 (org acme) with work items, a redaction and, with `archive`, archived at
 * 9000: `{store, c, events (stored bytes before the archive), final}`.
 */
async function archivedGroup(mwp, dir, options, { archive = true } = {}) {
  const store = await mwp.openFileStore(dir, { authorityKey: mwp.transcriptSecretKey("@authority"), ...options });
  const c = makeCommands(mwp);
  await store.submit(c.open(), 1000);
  const rs = await store.submit([c.create("w1"), c.create("w2"), c.create("w3")], 2000);
  for (const r of rs) check(r.outcome === "accepted", JSON.stringify(r));
  const [red] = await store.submit(c.cmd("alice", "r1", { type: "redact", seq: 2, reason: "gdpr" }), 3000);
  check(red.outcome === "accepted", JSON.stringify(red));
  if (archive) {
    const [a] = await store.submit(c.cmd("alice", "archive", { type: "archive", reason: { done: true } }), 9000);
    check(a.outcome === "accepted", JSON.stringify(a));
  }
  const g = await store.openGroup("g1");
  return { store, c, g, final: g.seq };
}

/**
 * The cases: `[name, async fn]`. `native(args)`, when given, runs the native `mwp` binary and
 * returns its stdout (it throws on a non-zero exit): the cross-format checks.
 */
export function auditCases(mwp, native) {
  return [
    ["an archive under an org policy seals audit.mwpa; the org identity opens it byte-identical, with the final state hash", async () => {
      const dir = tempDir("seal");
      const { identity, recipient } = mwp.generateAuditIdentity();
      check(identity.includes("AGE-SECRET-KEY-1") && recipient.startsWith("age1"), "a key pair");
      const { store, g, final } = await archivedGroup(mwp, dir, { orgPolicy: JSON.stringify(policy(recipient)) });
      const stored = splitFrames(await g.eventFrames(0));
      eq(stored.length, final, "every event is still stored");
      const hash = g.stateHash();
      const path = join(groupDir(dir), "audit.mwpa");
      check(fs.existsSync(path), "audit.mwpa written");
      const artifact = new Uint8Array(fs.readFileSync(path));
      eq(new TextDecoder().decode(artifact.subarray(0, 8)), "MWPAUDT1", "artifact magic");
      eq(new TextDecoder().decode(artifact.subarray(artifact.length - 8)), "MWPAUDM1", "manifest magic");
      // Nothing of the plaintext is readable in the artifact.
      check(!Buffer.from(artifact).includes(Buffer.from("Ship it")), "the title is not in the clear");

      const opened = mwp.openAudit(artifact, identity, store.authorityKey);
      eq(opened.events.length, final, "as many events as the final seq");
      for (let i = 0; i < final; i++) check(sameBytes(opened.events[i], stored[i]), `event ${i + 1} byte-identical (redacted one as stored)`);
      eq(opened.stateHash, hash, "the final state hash");
      const m = opened.manifest;
      eq([m.schema, m.org, m.group, m.seq, m.state_hash, m.remove_plain, m.recipients, m.authority, m.sealed_at, m.retain_until],
        ["mwp.audit-manifest.v1", "acme", "g1", final, hash, false, [recipient], store.authorityKey, 9000, 9000 + 30 * 86_400_000], "manifest");
      eq(mwp.auditManifest(artifact, store.authorityKey), m, "the manifest, checked without the identity");
      eq(await store.auditManifest("g1"), m, "the store's manifest");
      const snap = listing(dir).filter((n) => n.endsWith(".snap")).pop();
      eq(snap, `${String(final).padStart(20, "0")}.snap`, "the final snapshot is kept");

      // The wrong identity, another authority key, a flipped ciphertext byte.
      const other = mwp.generateAuditIdentity();
      eq(throws(() => mwp.openAudit(artifact, other.identity), "AUDIT_INVALID").details.check, "identity", "wrong identity");
      const stranger = mwp.publicKeyOf(mwp.generateSecretKey());
      eq(throws(() => mwp.auditManifest(artifact, stranger), "AUDIT_INVALID").details.check, "authority", "another authority");
      const bad = artifact.slice();
      bad[100] ^= 1;
      eq(throws(() => mwp.auditManifest(bad), "AUDIT_INVALID").details.check, "ciphertext", "tampered ciphertext");

      // Without remove_plain the history stays and reads as before; a reopen keeps the artifact.
      await store.close();
      const again = await mwp.openFileStore(dir, { orgPolicy: policy(recipient) });
      eq(await again.stateHash("g1"), hash, "state after reopen");
      eq((await again.events("g1", 0)).length, final, "events(0) after reopen");
      check(sameBytes(new Uint8Array(fs.readFileSync(path)), artifact), "the artifact is kept as is");
      eq(again.report.repaired, [], "nothing repaired");
      await again.close();

      // An open reads only the manifest at the artifact's end (the ciphertext's hash is checked
      // by `mwp fsck` and `mwp audit open`, as the native store does): one whose manifest does
      // not verify is sealed again while the history is whole.
      const badManifest = artifact.slice();
      badManifest[badManifest.length - 20] ^= 1;
      fs.writeFileSync(path, badManifest);
      const third = await mwp.openFileStore(dir, { orgPolicy: policy(recipient) });
      await third.openGroup("g1");
      eq(third.report.repaired, [`sealed the audit log of g1 at seq ${final}`], "sealed again");
      const resealed = new Uint8Array(fs.readFileSync(path));
      eq(mwp.openAudit(resealed, identity, third.authorityKey).stateHash, hash, "the new artifact opens");
      await third.close();
    }],

    ["remove_plain: after sealing only audit.mwpa, the final snapshot and an empty segment remain; reads before it are CURSOR_TOO_OLD", async () => {
      const dir = tempDir("remove");
      const { identity, recipient } = mwp.generateAuditIdentity();
      const orgPolicy = policy(recipient, { removePlain: true });
      // Small segments: the history spans several segment files.
      const { store, c, g, final } = await archivedGroup(mwp, dir, { orgPolicy, segmentBytes: 256, snapshotEvery: 2 });
      const hash = g.stateHash();
      const state = g.state();
      const snapName = `${String(final).padStart(20, "0")}.snap`;
      const segName = `${String(final + 1).padStart(20, "0")}.seg`;
      eq(listing(dir), ["audit.mwpa", snapName, segName].sort(), "the directory after removal");
      const seg = fs.readFileSync(join(groupDir(dir), segName));
      eq(seg.length, 192, "the empty segment is its header only");
      check(g.historyRemoved, "historyRemoved");
      const e = await rejects(g.events(0), "CURSOR_TOO_OLD");
      check(JSON.stringify(e.toJSON()).includes(String(final)), `names the final snapshot: ${JSON.stringify(e.toJSON())}`);
      await rejects(store.events("g1", final - 1), "CURSOR_TOO_OLD");
      eq(await store.events("g1", final), [], "nothing after the final seq");
      eq(g.state(), state, "state");
      const [dup] = await store.submit(c.create("w1"), 9500);
      eq(dup.outcome, "duplicate", "receipts still answer from the state");
      await store.close();

      const again = await mwp.openFileStore(dir);
      const g2 = await again.openGroup("g1");
      eq([g2.seq, g2.stateHash()], [final, hash], "same state after reopen, without the policy");
      await rejects(again.events("g1", 0), "CURSOR_TOO_OLD");
      eq(await again.events("g1", final), [], "events after the final seq");
      const [late] = await again.submit(c.create("w9"), 10_000);
      eq([late.outcome, late.error?.code], ["rejected", "GROUP_ARCHIVED"], "archived");
      eq(listing(dir), ["audit.mwpa", snapName, segName].sort(), "nothing changed on reopen");
      const opened = mwp.openAudit(new Uint8Array(fs.readFileSync(join(groupDir(dir), "audit.mwpa"))), identity, again.authorityKey);
      eq([opened.events.length, opened.stateHash, opened.manifest.remove_plain], [final, hash, true], "the sealed log");
      await again.close();

      const ro = await mwp.openFileStore(dir, { readOnly: true });
      eq(await ro.stateHash("g1"), hash, "a reader opens it too");
      await rejects(ro.events("g1", 0), "CURSOR_TOO_OLD");
      await ro.close();

      // The native store reads the same directory the same way: fsck knows the sealed state,
      // and `mwp audit open` opens the artifact with the org identity.
      if (native) {
        const f = JSON.parse(native(["fsck", "--data", dir]).split("\n")[0]);
        eq([f.events, f.state_hash], [final, hash], "native fsck of the sealed directory");
        const idFile = join(dir, "org.key");
        fs.writeFileSync(idFile, identity, { mode: 0o600 });
        const lines = native(["audit", "open", join(groupDir(dir), "audit.mwpa"), "--identity", idFile]).trim().split("\n");
        eq(lines.length, final, "native audit open prints every event");
        fs.rmSync(idFile);
      }

      // Without a manifest that verifies, a log starting after seq 1 is missing its events.
      const artifact = join(groupDir(dir), "audit.mwpa");
      const b = fs.readFileSync(artifact);
      b[b.length - 20] ^= 1;
      fs.writeFileSync(artifact, b);
      const broken = await mwp.openFileStore(dir);
      await rejects(broken.openGroup("g1"), "LOG_CORRUPT");
      await broken.close();
      eq(listing(dir), ["audit.mwpa", snapName, segName].sort(), "nothing removed or written");
    }],

    ["a seal due at open is written, and an interrupted removal is finished (the manifest decides, not the config)", async () => {
      const { recipient } = mwp.generateAuditIdentity();
      const orgPolicy = policy(recipient, { removePlain: true });
      // Archived without a policy: nothing sealed.
      const dir = tempDir("late");
      const { store, final } = await archivedGroup(mwp, dir, { segmentBytes: 256 });
      const hash = (await store.openGroup("g1")).stateHash();
      await store.close();
      check(!fs.existsSync(join(groupDir(dir), "audit.mwpa")), "no artifact without a policy");
      const whole = tempDir("whole");
      fs.cpSync(dir, whole, { recursive: true });
      fs.rmSync(join(whole, "LOCK"), { force: true });
      const before = listing(dir);

      // Opened with a policy: the open seals (the crash between final snapshot and artifact)
      // and removes the plain history.
      const s1 = await mwp.openFileStore(dir, { orgPolicy });
      eq(await s1.stateHash("g1"), hash, "state");
      check(s1.report.repaired.some((r) => r.startsWith("sealed the audit log of g1")), JSON.stringify(s1.report));
      check(s1.report.repaired.some((r) => r.startsWith("removed the plain history of g1")), JSON.stringify(s1.report));
      await s1.close();
      const after = listing(dir);
      eq(after.length, 3, `three files: ${after}`);

      // A removal interrupted after the empty segment: the old files are back.
      for (const n of before) if (!after.includes(n)) fs.copyFileSync(join(groupDir(whole), n), join(groupDir(dir), n));
      check(listing(dir).length > 3, "old files restored");
      const s2 = await mwp.openFileStore(dir);
      eq(await s2.stateHash("g1"), hash, "state with old files beside the empty segment");
      check(s2.report.repaired.some((r) => r.startsWith("removed the plain history of g1")), JSON.stringify(s2.report));
      await s2.close();
      eq(listing(dir), after, "removal finished");

      // A removal interrupted before the empty segment: the whole history and the artifact,
      // opened without any policy.
      fs.copyFileSync(join(groupDir(dir), "audit.mwpa"), join(groupDir(whole), "audit.mwpa"));
      const s3 = await mwp.openFileStore(whole);
      eq(await s3.stateHash("g1"), hash, "state");
      await rejects(s3.events("g1", 0), "CURSOR_TOO_OLD");
      await s3.close();
      eq(listing(whole), after, "the empty segment written, the rest removed");
      eq(final + 1, Number(after.find((n) => n.endsWith(".seg")).slice(0, 20)), "segment named for final+1");
    }],

    ["no policy for the group's org: archive as before, nothing sealed; a bad policy refuses the open", async () => {
      const { recipient } = mwp.generateAuditIdentity();
      for (const options of [{}, { orgPolicy: policy(recipient, { org: "other", removePlain: true }) }]) {
        const dir = tempDir("plain");
        const { store, final } = await archivedGroup(mwp, dir, options);
        check(!fs.existsSync(join(groupDir(dir), "audit.mwpa")), "no artifact");
        eq((await store.events("g1", 0)).length, final, "events(0)");
        eq(await store.auditManifest("g1"), undefined, "no manifest");
        await store.close();
        const again = await mwp.openFileStore(dir, options);
        eq((await again.events("g1", 0)).length, final, "events(0) after reopen");
        eq(again.report.repaired, [], "nothing repaired");
        await again.close();
      }
      const dir = tempDir("badpolicy");
      await rejects(mwp.openFileStore(dir, { orgPolicy: "{" }), "MALFORMED");
      await rejects(mwp.openFileStore(dir, { orgPolicy: policy("age1notakey") }), "MALFORMED");
      await rejects(mwp.openFileStore(dir, { orgPolicy: { schema: "x", orgs: {} } }), "MALFORMED");
    }],
  ];
}
