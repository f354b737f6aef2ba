// The file store's tests, shared by Node (file-store.test.js) and Deno
// (deno/file_store_test.js): both runtimes run every case through `node:` modules.
//
// Cross-format cases run the native `mwp` binary: $MWP_BIN, else target/debug/mwp of this
// checkout (build it with `cargo build -p mwp-host --bin mwp`).

import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { decodeOwner, isAlive } from "../src/dir-lock.js";
import { makeCommands } from "./helpers.js";

const repo = fileURLToPath(new URL("../../", import.meta.url));
const transcripts = join(repo, "tests", "transcripts");

function check(cond, message) {
  if (!cond) throw new Error(message);
}

function eq(a, b, what) {
  const x = JSON.stringify(a);
  const y = JSON.stringify(b);
  if (x !== y) throw new Error(`${what}: ${x} !== ${y}`);
}

/** Deep equality that ignores key order. */
function sameJson(a, b, what) {
  const norm = (v) =>
    Array.isArray(v)
      ? v.map(norm)
      : v !== null && typeof v === "object"
        ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, norm(v[k])]))
        : v;
  eq(norm(a), norm(b), what);
}

function mwpBin() {
  const bin = process.env.MWP_BIN ?? join(repo, process.env.CARGO_TARGET_DIR ?? "target", "debug", "mwp");
  const path = bin.startsWith("/") ? bin : join(repo, bin);
  check(fs.existsSync(path), `the native binary ${path} is missing: run \`cargo build -p mwp-host --bin mwp\` or set MWP_BIN`);
  return path;
}

/** Runs the native CLI; returns {code, stdout}. */
function native(args) {
  try {
    return { code: 0, stdout: execFileSync(mwpBin(), args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }) };
  } catch (e) {
    return { code: e.status ?? -1, stdout: String(e.stdout ?? ""), stderr: String(e.stderr ?? "") };
  }
}

const jsonLines = (text) => text.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l));

function tempDir(name) {
  return fs.mkdtempSync(join(os.tmpdir(), `mwp-fs-${name}-`));
}

/** Every file under a data directory's groups, with its bytes. */
function groupFiles(dir) {
  const out = {};
  const groups = join(dir, "groups");
  for (const g of fs.readdirSync(groups).sort()) {
    for (const f of fs.readdirSync(join(groups, g)).sort()) out[`${g}/${f}`] = fs.readFileSync(join(groups, g, f));
  }
  return out;
}

/** `mwp fsck --data DIR`: {code, groups: {group: {events, state_hash}}, findings}. */
function fsck(dir) {
  const r = native(["fsck", "--data", dir]);
  const groups = {};
  const findings = [];
  for (const l of jsonLines(r.stdout)) {
    if (l.group !== undefined && l.state_hash !== undefined) groups[l.group] = l;
    else findings.push(l);
  }
  return { code: r.code, groups, findings, stderr: r.stderr };
}

/**
 * Runs a transcript (SPEC §12) against a file store, as `mwp transcript --data DIR` does:
 * same keys (the derived transcript keys), same lease references, `restart` = close and
 * reopen. Returns one line per step: `{outcome, receipt?, event?, error?}` or `{op, seq,
 * state_hash}`.
 */
export async function runTranscriptOnStore(mwp, text, dir) {
  const open = () => mwp.openFileStore(dir, { authorityKey: mwp.transcriptSecretKey("@authority") });
  let store = await open();
  const out = [];
  let at = 0;
  let org;
  let group;
  const sessions = new Map();
  const derived = (actor) => mwp.publicKeyOf(mwp.transcriptSecretKey(actor));
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    let m;
    try {
      m = JSON.parse(line);
    } catch {
      out.push({ outcome: "rejected", error: { code: "MALFORMED" } });
      continue;
    }
    if (typeof m.at === "number") at = m.at;
    if (typeof m.group === "string") group = m.group;
    if (typeof m.org === "string") org = m.org;
    if (m.op === "restart") {
      await store.close();
      store = await open();
      const g = await store.openGroup(group);
      out.push({ op: "restart", seq: g?.seq ?? 0, state_hash: g?.stateHash() });
      continue;
    }
    if (m.op === "advance") {
      // What the authority does by itself at `at`: its ticks, as the core's driver names them.
      const done = [];
      for (let r; (r = await store.tick(group, at)) !== undefined;) {
        done.push({ ...r, op: "advance", source: "authority" });
        if (r.outcome !== "accepted") break;
      }
      out.push(...(done.length ? done : [{ op: "advance", source: "authority", at, outcome: "idle" }]));
      continue;
    }
    if (m.op === "snapshot") {
      const g = await store.openGroup(group);
      out.push({ op: "snapshot", seq: g?.seq ?? 0, state_hash: g?.stateHash() });
      continue;
    }
    const body = structuredClone(m.body);
    if (body !== null && typeof body === "object") {
      if (typeof body.lease === "string" && body.lease.includes("#")) {
        const [work, epoch] = body.lease.split("#");
        if (/^\d+$/.test(epoch)) body.lease = mwp.canonical.hash([group, work, Number(epoch)]).slice(0, 32);
      }
      if (body.type === "open_group") {
        body.authority_key ??= derived("@authority");
        for (const mem of Array.isArray(body.members) ? body.members : []) if (mem && mem.key === undefined) mem.key = derived(mem.actor);
      }
      if (body.type === "add_member" && body.key === undefined) body.key = derived(body.actor);
    }
    // An integer beyond 2^53 (a u64 limit test) cannot be a JS number: the command differs
    // from the native one, so only its outcome is compared.
    const unsafeInteger = [...line.matchAll(/\d{16,}/g)].some(([n]) => !Number.isSafeInteger(Number(n)));
    const actor = m.actor;
    const command = {
      org, group, actor, action: m.action ?? `step-${out.length + 1}`,
      session: m.session ?? sessions.get(`${group}/${actor}`) ?? 1, body,
    };
    if (m.expect_rev !== undefined) command.expect = m.expect_rev;
    let signed;
    try {
      signed = mwp.signCommand(command, mwp.transcriptSecretKey(actor));
      if (typeof m.sig === "string") signed.sig = m.sig;
      if (m.tamper === true) signed.sig = (parseInt(signed.sig.slice(0, 2), 16) ^ 1).toString(16).padStart(2, "0") + signed.sig.slice(2);
    } catch (e) {
      out.push({ outcome: "rejected", error: { code: e.code ?? "MALFORMED" }, unsafeInteger });
      continue;
    }
    const [r] = await store.submit(signed, at);
    if (unsafeInteger) r.unsafeInteger = true;
    if (r.outcome === "accepted" && r.event.kind.type === "session_replaced") sessions.set(`${group}/${actor}`, r.event.kind.session);
    out.push(r);
  }
  await store.close();
  return out;
}

/** Compares the Node store's transcript lines with `mwp transcript` output lines. */
function compareLines(ours, theirs, name) {
  eq(ours.length, theirs.length, `${name}: number of steps`);
  for (let i = 0; i < ours.length; i++) {
    const a = ours[i];
    const b = theirs[i];
    const what = `${name} step ${i + 1}`;
    if (b.op === "advance") eq([a.op, a.source], [b.op, b.source], what);
    if (b.op !== undefined && b.outcome === undefined) {
      eq([a.op, a.seq, a.state_hash], [b.op, b.seq, b.state_hash], what);
      continue;
    }
    eq(a.outcome, b.outcome, `${what} outcome`);
    if (a.outcome === "idle") continue;
    if (a.outcome === "rejected" && !a.unsafeInteger) eq(a.error.code, b.error.code, `${what} code`);
    else sameJson(a.receipt, b.receipt, `${what} receipt`);
    if (a.outcome === "accepted") sameJson(a.event, b.event, `${what} event`);
  }
}

function flip(path, offset) {
  const b = fs.readFileSync(path);
  b[offset] ^= 0x40;
  fs.writeFileSync(path, b);
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

/** A store with g1 holding `n` work items, written in `batches` submit calls. */
async function populated(mwp, dir, { n = 6, batches = 3, ...opts } = {}) {
  const store = await mwp.openFileStore(dir, { authorityKey: mwp.transcriptSecretKey("@authority"), ...opts });
  const c = makeCommands(mwp);
  await store.submit(c.open(), 1000);
  const per = Math.ceil(n / batches);
  for (let b = 0; b < batches; b++) {
    const cmds = [];
    for (let i = b * per; i < Math.min(n, (b + 1) * per); i++) cmds.push(c.create(`w${i}`));
    const rs = await store.submit(cmds, 1000 + b);
    for (const r of rs) check(r.outcome === "accepted", JSON.stringify(r));
  }
  return { store, c };
}

const segPath = (dir) => join(dir, "groups", "g1", "00000000000000000001.seg");

/**
 * Where the records of a segment's bytes end: the end of the file, or where the zeros
 * reserved after the last record start.
 */
function recordsEnd(b) {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let at = 192;
  while (at + 24 <= b.length && b.subarray(at, at + 24).some((x) => x !== 0)) at += 24 + v.getUint32(at, true);
  return at;
}

/** Offset of the record of `seq` in a segment file, by walking its record headers. */
function recordOffset(path, seq) {
  const b = fs.readFileSync(path);
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let at = 192;
  while (at < recordsEnd(b)) {
    if (v.getUint32(at + 4, true) === seq) return at;
    at += 24 + v.getUint32(at, true);
  }
  throw new Error(`seq ${seq} not found`);
}

/** `[seq, batch]` of every record of a segment file. */
function recordBatches(path) {
  const b = fs.readFileSync(path);
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const out = [];
  for (let at = 192; at < recordsEnd(b); at += 24 + v.getUint32(at, true)) out.push([v.getUint32(at + 4, true), v.getUint32(at + 12, true)]);
  return out;
}

/** The cases: `[name, async fn]`. */
export function cases(mwp) {
  return [
    ["crc32c and group directory names follow docs/format.md", async () => {
      eq(mwp.crc32c(new TextEncoder().encode("123456789")), 0xe3069283, "crc32c check value");
      eq(mwp.crc32c(new Uint8Array(0)), 0, "crc32c of nothing");
      const all = new Uint8Array(1000).map((_, i) => (i * 7) & 0xff);
      eq(mwp.crc32c(all.subarray(300), mwp.crc32c(all.subarray(0, 300))), mwp.crc32c(all), "crc32c continues");
      eq(mwp.groupDirName("g1"), "g1", "plain name");
      eq(mwp.groupDirName("G1"), "~i4yq", "base32 name");
      for (const id of ["G1", "a.b_c-d", "x:y@z~w", "..", ".hidden", "-x", "Ab".repeat(64)]) {
        eq(mwp.groupFromDirName(mwp.groupDirName(id)), id, `round trip ${id}`);
      }
      for (const name of ["G1", "..", ".", "~I4YQ", "~i4yq=", "", "~"]) eq(mwp.groupFromDirName(name), null, `refused ${name}`);
    }],

    ["accepts durably, answers a duplicate with the original receipt after reopen, same state hash", async () => {
      const dir = tempDir("dup");
      const { store, c } = await populated(mwp, dir);
      const g = await store.openGroup("g1");
      const hash = g.stateHash();
      const [first] = await store.submit(c.create("w0"), 5000);
      eq(first.outcome, "duplicate", "duplicate before reopen");
      const events = await store.events("g1");
      await store.close();
      const again = await mwp.openFileStore(dir);
      eq(await again.stateHash("g1"), hash, "state hash after reopen");
      const [dup] = await again.submit(c.create("w0"), 9000);
      eq(dup.outcome, "duplicate", "outcome after reopen");
      sameJson(dup.receipt, first.receipt, "receipt after reopen");
      sameJson(await again.events("g1"), events, "events after reopen");
      eq(await again.groups(), ["g1"], "groups");
      const [bad] = await again.submit(c.claim("w1", "x"), 9000);
      eq([bad.outcome, bad.error.code], ["rejected", "CAS_REQUIRED"], "rejection as a value");
      await again.close();
    }],

    ["the authority key file: 65 bytes, mode 0600, a readable one refused", async () => {
      const dir = tempDir("key");
      const store = await mwp.openFileStore(dir);
      await store.close();
      const path = join(dir, "authority.key");
      const text = fs.readFileSync(path, "utf8");
      check(/^[0-9a-f]{64}\n$/.test(text), `key file holds ${JSON.stringify(text)}`);
      eq(fs.statSync(path).mode & 0o777, 0o600, "mode");
      eq(store.authorityKey, mwp.publicKeyOf(text.trim()), "public key");
      fs.chmodSync(path, 0o640);
      await rejects(mwp.openFileStore(dir), "STORAGE");
      fs.chmodSync(path, 0o600);
      await rejects(mwp.openFileStore(dir, { authorityKey: mwp.generateSecretKey() }), "STORAGE");
      const c = makeCommands(mwp);
      const reopened = await mwp.openFileStore(dir);
      const [r] = await reopened.submit(c.open(), 1000);
      eq([r.outcome, r.error?.code], ["rejected", "NOT_PERMITTED"], "open_group naming another authority key");
      eq(await reopened.groups(), [], "no group created");
      await reopened.close();
    }],

    ["a key file that is not the group's authority is STORAGE naming it and both keys; nothing is written", async () => {
      const dir = tempDir("plantedkey");
      const { store } = await populated(mwp, dir, { snapshotEvery: 2 });
      const genuine = store.authorityKey;
      // g2, archived: exempt (it takes no command; `mwp audit open --out` re-signs one).
      const c2 = makeCommands(mwp, { group: "g2" });
      await store.submit(c2.open(), 1000);
      const [a] = await store.submit(c2.cmd("alice", "archive", { type: "archive", reason: { done: true } }), 2000);
      eq(a.outcome, "accepted", "g2 archived");
      const g1Events = await store.events("g1");
      await store.close();
      const keyPath = join(dir, "authority.key");
      const planted = mwp.generateSecretKey();
      fs.writeFileSync(keyPath, `${planted}\n`, { mode: 0o600 });
      const plantedKey = mwp.publicKeyOf(planted);
      const before = groupFiles(dir);
      const listing = () => JSON.stringify(fs.readdirSync(dir, { recursive: true }).sort());
      const names = listing();
      const refused = (e, what) => {
        eq(e.details, { authority_key: genuine, file: keyPath, group: "g1", key: plantedKey }, `${what}: details`);
        for (const part of [keyPath, "group g1", genuine, plantedKey]) check(e.message.includes(part), `${what}: ${part} in ${e.message}`);
        return e;
      };
      // A reader signs nothing for g1 with the planted key either; g2 is read as usual.
      const ro = await mwp.openFileStore(dir, { readOnly: true });
      refused(await rejects(ro.openGroup("g1"), "STORAGE"), "read-only openGroup");
      refused(await rejects(ro.events("g1"), "STORAGE"), "read-only events");
      eq((await ro.events("g2")).length, 2, "read-only: the archived g2");
      await ro.close();
      eq(listing(), names, "read-only: no file created or removed");
      // A writer refuses g1 for every call, before anything is written or signed.
      const rw = await mwp.openFileStore(dir);
      const e = refused(await rejects(rw.openGroup("g1"), "STORAGE"), "openGroup");
      refused(await rejects(rw.events("g1"), "STORAGE"), "events");
      refused(await rejects(rw.tick("g1", 1_000_000), "STORAGE"), "tick");
      refused(await rejects(rw.submit(makeCommands(mwp).create("w-late"), 5000), "STORAGE"), "submit");
      await rw.close();
      const after = groupFiles(dir);
      for (const [name, bytes] of Object.entries(before)) {
        if (name.startsWith("g1/")) check(after[name]?.equals(bytes), `${name} unchanged`);
      }
      eq(Object.keys(after).filter((n) => n.startsWith("g1/")), Object.keys(before).filter((n) => n.startsWith("g1/")), "no g1 file created or removed");
      // The native store says the same of this directory, word for word.
      const report = fsck(dir);
      check(report.code !== 0, "native fsck reports it");
      check(
        report.findings.some((f) => f.damage && f.code === "STORAGE" && f.group === "g1" && f.file === keyPath && f.message === e.message),
        `native fsck's finding: ${JSON.stringify(report.findings)}`,
      );
      // The group's own key back in place: all is well again.
      fs.writeFileSync(keyPath, `${mwp.transcriptSecretKey("@authority")}\n`, { mode: 0o600 });
      const back = await mwp.openFileStore(dir);
      sameJson(await back.events("g1"), g1Events, "g1's events");
      const [r] = await back.submit(makeCommands(mwp).create("w-late"), 5000);
      eq(r.outcome, "accepted", "g1 takes commands again");
      await back.close();
      eq(fsck(dir).code, 0, "native fsck is clean");
    }],

    ["a torn tail is trimmed and reported; unfinished .tmp files are deleted", async () => {
      const dir = tempDir("torn");
      const { store } = await populated(mwp, dir);
      const hash = (await store.openGroup("g1")).stateHash();
      await store.close();
      const path = segPath(dir);
      const written = fs.readFileSync(path);
      const end = recordsEnd(written);
      check(written.length > end && written.subarray(end).every((x) => x === 0), "zeros reserved after the records");
      const good = written.subarray(0, end);
      // A torn last write: the first 30 bytes of a record of a new batch, landed in the
      // reserved space.
      const torn = Buffer.from(written);
      torn.set(written.subarray(192, 222), end);
      fs.writeFileSync(path, torn);
      fs.writeFileSync(join(dir, "groups", "g1", "00000000000000000009.snap.tmp"), "x");
      const again = await mwp.openFileStore(dir);
      eq(await again.stateHash("g1"), hash, "state hash");
      eq(again.report.trimmed, [{ file: path, offset: end, bytes: written.length - end }], "report");
      check(fs.readFileSync(path).equals(good), "file trimmed to the last good record");
      check(!fs.existsSync(join(dir, "groups", "g1", "00000000000000000009.snap.tmp")), ".tmp deleted");
      // The next batch appends where the good records end.
      const c = makeCommands(mwp);
      eq((await again.submit(c.create("w9"), 2000))[0].receipt.seq, 8, "seq after the trim");
      await again.close();
      eq(fsck(dir).code, 0, "native fsck after the trim");
    }],

    ["damage before a later batch is LOG_CORRUPT naming file and offset, and changes nothing", async () => {
      const dir = tempDir("corrupt");
      const { store } = await populated(mwp, dir);
      await store.close();
      const path = segPath(dir);
      const off = recordOffset(path, 3);
      flip(path, off + 40);
      const before = fs.readFileSync(path);
      const listing = fs.readdirSync(join(dir, "groups", "g1"));
      const s = await mwp.openFileStore(dir);
      const e = await rejects(s.openGroup("g1"), "LOG_CORRUPT");
      check(e instanceof mwp.StoreError, "a StoreError");
      eq([e.details.file, e.details.offset], [path, off], "file and offset");
      check(e.message.includes(path) && e.message.includes(String(off)), e.message);
      check(fs.readFileSync(path).equals(before), "the file is unchanged");
      eq(fs.readdirSync(join(dir, "groups", "g1")), listing, "no file added or removed");
      await rejects(s.stateHash("g1"), "LOG_CORRUPT");
      await s.close();
      check(fsck(dir).code !== 0, "native fsck also finds the damage");
    }],

    ["damage in the last batch with nothing after it is a torn tail (trimmed, reported)", async () => {
      const dir = tempDir("lastbatch");
      const { store } = await populated(mwp, dir, { n: 6, batches: 3 });
      const events = await store.eventFrames("g1", 0, 5);
      await store.close();
      const path = segPath(dir);
      const off = recordOffset(path, 6);
      flip(path, off + 30);
      const again = await mwp.openFileStore(dir);
      const g = await again.openGroup("g1");
      eq(g.seq, 5, "the last batch (seqs 6 and 7) is gone");
      eq(again.report.trimmed[0].offset, off, "trimmed at the damaged record");
      eq(Buffer.from(await g.eventFrames(0)).equals(Buffer.from(events)), true, "the rest is intact");
      await again.close();
    }],

    ["a checksummed record with the wrong seq is LOG_CORRUPT", async () => {
      const dir = tempDir("seq");
      const { store } = await populated(mwp, dir);
      await store.close();
      const path = segPath(dir);
      const b = fs.readFileSync(path);
      const off = recordOffset(path, 7);
      const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
      v.setUint32(off + 4, 9, true);
      const hdr = new Uint8Array(b.buffer, b.byteOffset + off, 20);
      const len = v.getUint32(off, true);
      v.setUint32(off + 20, mwp.crc32c(new Uint8Array(b.buffer, b.byteOffset + off + 24, len), mwp.crc32c(hdr)), true);
      fs.writeFileSync(path, b);
      const s = await mwp.openFileStore(dir);
      const e = await rejects(s.openGroup("g1"), "LOG_CORRUPT");
      eq(e.details.offset, off, "offset");
      await s.close();
      // A record whose header says seq 3 but whose (checksummed) payload is event 4.
      const dir2 = tempDir("seq2");
      await (await populated(mwp, dir2)).store.close();
      const p2 = segPath(dir2);
      const orig = fs.readFileSync(p2);
      const o3 = recordOffset(p2, 3);
      const o4 = recordOffset(p2, 4);
      const o5 = recordOffset(p2, 5);
      const header = Buffer.from(orig.subarray(o3, o3 + 24));
      header.writeUInt32LE(o5 - o4 - 24, 0);
      const payload = orig.subarray(o4 + 24, o5);
      header.writeUInt32LE(mwp.crc32c(payload, mwp.crc32c(header.subarray(0, 20))), 20);
      fs.writeFileSync(p2, Buffer.concat([orig.subarray(0, o3), header, payload, orig.subarray(o4)]));
      const s2 = await mwp.openFileStore(dir2);
      const e2 = await rejects(s2.openGroup("g1"), "LOG_CORRUPT");
      eq(e2.details.offset, o3, "offset of the record");
      check(e2.message.includes("holds event seq 4"), e2.message);
      await s2.close();
    }],

    ["one submit of many commands is one write batch", async () => {
      const dir = tempDir("batch");
      const { store } = await populated(mwp, dir, { n: 6, batches: 3 });
      await store.close();
      eq(recordBatches(segPath(dir)), [[1, 1], [2, 2], [3, 2], [4, 4], [5, 4], [6, 6], [7, 6]], "[seq, batch] of each record");
    }],

    ["several groups, `~base32` directories, an interrupted creation removed, a missing parent refused", async () => {
      const dir = tempDir("groups");
      const store = await mwp.openFileStore(dir, { authorityKey: mwp.transcriptSecretKey("@authority") });
      for (const group of ["g1", "Team.A"]) {
        const c = makeCommands(mwp, { group });
        const rs = await store.submit([c.open(), c.create("w1")], 1000);
        eq(rs.map((r) => r.outcome), ["accepted", "accepted"], group);
      }
      const hashes = { g1: await store.stateHash("g1"), "Team.A": await store.stateHash("Team.A") };
      await store.close();
      eq(fs.readdirSync(join(dir, "groups")).sort(), ["g1", mwp.groupDirName("Team.A")].sort(), "directories");
      check(mwp.groupDirName("Team.A").startsWith("~"), "base32 form");
      // An interrupted creation (docs/format.md, "Creating a group"): `.new-<name>`.
      fs.mkdirSync(join(dir, "groups", ".new-g9"));
      fs.writeFileSync(join(dir, "groups", ".new-g9", "00000000000000000001.seg.tmp"), "partial");
      fs.mkdirSync(join(dir, "groups", "Upper"));
      const again = await mwp.openFileStore(dir);
      eq(await again.groups(), ["Team.A", "g1"], "groups (the unfinished and the foreign directory are not groups)");
      eq(await again.openGroup("g9"), undefined, "no group g9");
      eq(again.report.removed, [join(dir, "groups", ".new-g9")], "interrupted creation removed");
      check(!fs.existsSync(join(dir, "groups", ".new-g9")), ".new-g9 directory gone");
      for (const g of ["g1", "Team.A"]) eq(await again.stateHash(g), hashes[g], `${g} after reopen`);
      await again.close();
      fs.rmSync(join(dir, "groups", "Upper"), { recursive: true });
      const f = fsck(dir);
      eq([f.code, f.groups["Team.A"]?.state_hash, f.groups.g1?.state_hash], [0, hashes["Team.A"], hashes.g1], "native fsck");
      await rejects(mwp.openFileStore(join(dir, "missing", "data")), "STORAGE");
    }],

    ["snapshots: used as the base, a damaged one skipped and reported, one newer than the log is LOG_CORRUPT", async () => {
      const dir = tempDir("snap");
      const { store } = await populated(mwp, dir);
      const g = await store.openGroup("g1");
      const hash = g.stateHash();
      eq(await g.snapshotNow(), 7, "snapshot seq");
      await store.close();
      const snap = join(dir, "groups", "g1", "00000000000000000007.snap");
      const good = fs.readFileSync(snap);
      const f = fsck(dir);
      eq([f.code, f.groups.g1.snapshots_ok], [0, 1], "native fsck verifies the Node snapshot");
      let s = await mwp.openFileStore(dir);
      eq(await s.stateHash("g1"), hash, "state from the snapshot");
      eq(s.report.skippedSnapshots, [], "nothing skipped");
      await s.close();
      flip(snap, good.length - 10);
      s = await mwp.openFileStore(dir);
      eq(await s.stateHash("g1"), hash, "state from the log");
      eq(s.report.skippedSnapshots.map((x) => x.file), [snap], "damaged snapshot reported");
      await s.close();
      fs.writeFileSync(snap, good);
      // The log loses its last batch (cut at a record boundary): the snapshot proves it was acknowledged.
      const path = segPath(dir);
      fs.truncateSync(path, recordOffset(path, 6));
      const before = fs.readFileSync(path);
      s = await mwp.openFileStore(dir);
      const e = await rejects(s.openGroup("g1"), "LOG_CORRUPT");
      check(e.message.includes("snapshot holds seq 7"), e.message);
      check(fs.readFileSync(path).equals(before), "nothing truncated");
      await s.close();
    }],

    ["snapshots: one signed by the store's key whose chain head is not the id of the log's event at its seq is LOG_CORRUPT, as natively", async () => {
      const w = await import("../pkg/mwp_wasm.js");
      const dir = tempDir("snaphead");
      const { store } = await populated(mwp, dir);
      const g = await store.openGroup("g1");
      eq(await g.snapshotNow(), 7, "snapshot seq");
      const id = Buffer.from(g.head); // a state holds ids as hex text
      const state = Buffer.from(g.stateCbor());
      await store.close();
      // The state's head (and any receipt naming that event) becomes another id; the
      // snapshot of it is signed with the store's own key, so only the chain rule can tell.
      let at = state.indexOf(id);
      check(at >= 0, "the head is in the state");
      for (; at >= 0; at = state.indexOf(id, at + 64)) state.fill("7", at, at + 64);
      const forged = mwp.buildSnapshot(state, mwp.transcriptSecretKey("@authority"));
      fs.writeFileSync(join(dir, "groups", "g1", "00000000000000000007.snap"), w.encodeSnapshotFile(7, forged));
      const s = await mwp.openFileStore(dir);
      const e = await rejects(s.openGroup("g1"), "LOG_CORRUPT");
      check(e.message.includes("event 7 is not the snapshot's chain head"), e.message);
      await s.close();
    }],

    ["a redacted record at the snapshot's seq that is not its chain head is LOG_CORRUPT naming the record, as natively", async () => {
      const w = await import("../pkg/mwp_wasm.js");
      const dir = tempDir("snaphead-redacted");
      const { store, c } = await populated(mwp, dir);
      const g = await store.openGroup("g1");
      eq(await g.snapshotNow(), 7, "snapshot seq");
      const id = Buffer.from(g.head);
      const state = Buffer.from(g.stateCbor());
      const [r] = await store.submit(c.cmd("alice", "r7", { type: "redact", seq: 7, reason: "gdpr" }), 2000);
      eq(r.outcome, "accepted", "redact accepted");
      await store.close();
      let at = state.indexOf(id);
      for (; at >= 0; at = state.indexOf(id, at + 64)) state.fill("7", at, at + 64);
      fs.writeFileSync(join(dir, "groups", "g1", "00000000000000000007.snap"), w.encodeSnapshotFile(7, mwp.buildSnapshot(state, mwp.transcriptSecretKey("@authority"))));
      const s = await mwp.openFileStore(dir);
      const e = await rejects(s.openGroup("g1"), "LOG_CORRUPT");
      await s.close();
      const path = segPath(dir);
      const off = recordOffset(path, 7);
      eq([e.message, e.details], [`${path} at offset ${off}: event 7 is not the snapshot's chain head`, { file: path, offset: off }], "the record, not its overlay entry");
      // The native store's open says the same, word for word.
      const theirs = native(["replay", "--data", dir, "--group", "g1"]);
      check(theirs.code !== 0 && theirs.stderr.includes(`LOG_CORRUPT: ${e.message}\n`), `native: ${theirs.stderr}`);
      // A redacted form that does not verify is the overlay entry's damage, as natively.
      const overlay = join(dir, "groups", "g1", "redactions.log");
      fs.unlinkSync(join(dir, "groups", "g1", "00000000000000000007.snap"));
      const ob = fs.readFileSync(overlay);
      const entry = 192 + 24 + 8;
      ob[entry + 20] ^= 0x01;
      const v = new DataView(ob.buffer, ob.byteOffset, ob.byteLength);
      const len = v.getUint32(192, true);
      v.setUint32(192 + 20, mwp.crc32c(new Uint8Array(ob.buffer, ob.byteOffset + 192 + 24, len), mwp.crc32c(new Uint8Array(ob.buffer, ob.byteOffset + 192, 20))), true);
      fs.writeFileSync(overlay, ob);
      const s2 = await mwp.openFileStore(dir);
      const e2 = await rejects(s2.openGroup("g1"), "LOG_CORRUPT");
      await s2.close();
      eq([e2.details.file, e2.details.offset], [overlay, entry], `the overlay entry: ${e2.message}`);
    }],

    ["a snapshot file past the largest snapshot is refused by its size, unread, naming the file", async () => {
      const dir = tempDir("snap-huge");
      const { store } = await populated(mwp, dir);
      const g = await store.openGroup("g1");
      const hash = g.stateHash();
      eq(await g.snapshotNow(), 7, "snapshot seq");
      await store.close();
      const snap = join(dir, "groups", "g1", "00000000000000000007.snap");
      // One byte past the core's limit (export::MAX_SNAPSHOT_FILE), taking no disk (sparse).
      const limit = mwp.StaticReader.maxFileBytes("snapshots/any");
      fs.truncateSync(snap, limit + 1);
      const before = process.memoryUsage().rss;
      const s = await mwp.openFileStore(dir);
      eq(await s.stateHash("g1"), hash, "state from the log");
      const grew = process.memoryUsage().rss - before;
      check(grew < 64 << 20, `opening grew the process by ${Math.round(grew / 2 ** 20)} MiB`);
      eq(s.report.skippedSnapshots.map((x) => x.file), [snap], "the snapshot is skipped and reported");
      const reason = s.report.skippedSnapshots[0].reason;
      check(reason.includes(snap) && reason.includes(`more than the largest snapshot file (${limit} bytes)`), reason);
      await s.close();
    }],

    ["tick: the authority's signed tick expires a due lease, as natively", async () => {
      const dir = tempDir("tick");
      const store = await mwp.openFileStore(dir, { authorityKey: mwp.transcriptSecretKey("@authority") });
      const c = makeCommands(mwp);
      await store.submit([c.open(), c.create("w1")], 1000);
      const [claim] = await store.submit(c.claim("w1", "b1", 1), 1000);
      eq(claim.outcome, "accepted", "claim");
      const g = await store.openGroup("g1");
      const due = g.nextDeadline();
      eq(due, 6000, "deadline: start_within_ms after the claim");
      eq(await store.tick("g1", due - 1), undefined, "nothing due yet");
      const t = await store.tick("g1", due);
      eq([t.outcome, t.event.action, t.event.actor, t.event.kind.type], ["accepted", "tick.4", "@authority", "leases_expired"], "tick");
      eq(g.state().work.w1.state, "queued", "work back in the queue");
      await store.close();
      const f = fsck(dir);
      eq([f.code, f.groups.g1.events], [0, 4], "native fsck");
    }],

    ["a failed write is sticky: STORAGE for every later command until reopened, nothing of it kept", async () => {
      const dir = tempDir("sticky");
      const { store, c } = await populated(mwp, dir);
      const g = await store.openGroup("g1");
      const hash = g.stateHash();
      g._failNextWrite();
      await rejects(store.submit(c.create("x1"), 2000), "STORAGE");
      await rejects(store.submit(c.create("x2"), 2000), "STORAGE");
      await rejects(store.submit(c.create("w0"), 2000), "STORAGE");
      eq(g.seq, 7, "nothing more is durable");
      eq(g.receipt("alice", "create-x1"), undefined, "no receipt for the failed command");
      await store.close();
      const again = await mwp.openFileStore(dir);
      eq(await again.stateHash("g1"), hash, "reopened at the last durable state");
      eq((await again.submit(c.create("x1"), 3000))[0].receipt.seq, 8, "accepting again after reopen");
      await again.close();
    }],

    ["a writer whose owner record was removed or taken over writes nothing more (STORAGE, sticky)", async () => {
      for (const [what, tamper] of [
        ["removed", (owner) => fs.unlinkSync(owner)],
        ["taken over", (owner) => fs.writeFileSync(owner, "mwp-lock 1\npid 1\n")],
      ]) {
        const dir = tempDir("lost-lock");
        const { store, c } = await populated(mwp, dir);
        const seg = segPath(dir);
        const size = fs.statSync(seg).size;
        const snaps = () => fs.readdirSync(join(dir, "groups", "g1")).filter((n) => n.endsWith(".snap")).length;
        const snapsBefore = snaps();
        tamper(join(dir, "LOCK.pid"));
        // A snapshot is a write too: none is taken for a directory this writer lost.
        const s = await rejects((await store.openGroup("g1")).snapshotNow(), "STORAGE");
        check(s.message.includes("LOCK.pid"), `${what}: the snapshot names the owner record: ${s.message}`);
        eq(snaps(), snapsBefore, `${what}: no snapshot written`);
        const e = await rejects(store.submit(c.create("x1"), 2000), "STORAGE");
        check(e.message.includes("LOCK.pid"), `${what}: names the owner record: ${e.message}`);
        await rejects(store.submit(mwp.signCommand({ ...c.open(), group: "g2" }, c.key("alice")), 2000), "STORAGE");
        await rejects(store.submit(c.create("x2"), 2000), "STORAGE");
        eq(fs.statSync(seg).size, size, `${what}: nothing appended`);
        check(!fs.existsSync(join(dir, "groups", "g2")), `${what}: no group created`);
        await store.close();
      }
    }],

    ["options that are not counts are refused by name, and nothing is created", async () => {
      const dir = join(tempDir("options"), "data");
      for (const [options, name] of [
        [{ segmentBytes: 0 }, "segmentBytes"],
        [{ reserveBytes: -1 }, "reserveBytes"],
        [{ reserveBytes: 1.5 }, "reserveBytes"],
        [{ reserveBytes: "4MiB" }, "reserveBytes"],
        [{ snapshotEvery: 0 }, "snapshotEvery"],
        [{ snapshotsKept: null }, "snapshotsKept"],
      ]) {
        const e = await rejects(mwp.openFileStore(dir, options), "MALFORMED");
        check(e.message.includes(`\`${name}\``), `${JSON.stringify(options)}: ${e.message}`);
      }
      check(!fs.existsSync(dir), "no directory was created");
      const store = await mwp.openFileStore(dir, { reserveBytes: 0, snapshotEvery: null });
      eq([store.options.reserveBytes, store.options.snapshotEvery], [0, null], "0 and null are counts here");
      await store.close();
    }],

    ["reserved space doubles from 64 KiB up to reserveBytes, by the core's rule", async () => {
      const dir = tempDir("reserve");
      const { store } = await populated(mwp, dir, { reserveBytes: 4 << 20 });
      await store.close();
      const len = fs.statSync(segPath(dir)).size;
      check(len >= 64 << 10 && len < 128 << 10, `one reservation of 64 KiB after the first records, not 4 MiB: ${len} bytes`);
    }],

    ["segments roll over at segmentBytes; batches never span segments; native fsck agrees", async () => {
      const dir = tempDir("roll");
      const { store } = await populated(mwp, dir, { n: 12, batches: 6, segmentBytes: 1500 });
      const g = await store.openGroup("g1");
      const hash = g.stateHash();
      const events = await g.events();
      await store.close();
      const segs = fs.readdirSync(join(dir, "groups", "g1")).filter((n) => n.endsWith(".seg")).sort();
      check(segs.length >= 3, `segments: ${segs}`);
      // Only the last segment keeps zeros reserved after its records; a roll cuts them.
      for (const [i, name] of segs.entries()) {
        const b = fs.readFileSync(join(dir, "groups", "g1", name));
        const reserved = b.length - recordsEnd(b);
        check(i + 1 === segs.length ? reserved > 0 : reserved === 0, `${name}: ${reserved} bytes reserved`);
      }
      const again = await mwp.openFileStore(dir);
      eq(await again.stateHash("g1"), hash, "hash after reopen");
      sameJson(await again.events("g1"), events, "events across segments");
      await again.close();
      const f = fsck(dir);
      eq([f.code, f.groups.g1?.events, f.groups.g1?.state_hash], [0, 13, hash], "native fsck");
      sameJson(jsonLines(native(["replay", "--data", dir, "--group", "g1"]).stdout), events, "native replay");
    }],

    ["concurrent submits share syncs and all are durable", async () => {
      const dir = tempDir("concurrent");
      const store = await mwp.openFileStore(dir, { authorityKey: mwp.transcriptSecretKey("@authority") });
      const c = makeCommands(mwp);
      await store.submit(c.open(), 1000);
      const rs = await Promise.all(Array.from({ length: 20 }, (_, i) => store.submit(c.create(`w${i}`), 1000)));
      eq(rs.map(([r]) => r.outcome).filter((o) => o === "accepted").length, 20, "all accepted");
      const hash = await store.stateHash("g1");
      await store.close();
      // The first submit's sync runs alone; the 19 staged meanwhile share the next one.
      const batches = recordBatches(segPath(dir)).map(([, b]) => b);
      eq([...new Set(batches)], [1, 2, 3], "write batches");
      const again = await mwp.openFileStore(dir);
      eq(await again.stateHash("g1"), hash, "hash after reopen");
      await again.close();
      eq(fsck(dir).groups.g1.state_hash, hash, "native fsck");
    }],

    ["native → Node: every transcript written by `mwp transcript --data` opens with the native state hash and events", async () => {
      for (const name of fs.readdirSync(transcripts).filter((n) => n.endsWith(".jsonl")).sort()) {
        const dir = join(tempDir("native"), "data");
        native(["transcript", join(transcripts, name), "--data", dir]);
        const f = fsck(dir);
        eq(f.code, 0, `${name}: native fsck`);
        for (const variant of ["with snapshots", "without snapshots"]) {
          if (variant === "without snapshots") {
            for (const [file] of Object.entries(groupFiles(dir))) if (file.endsWith(".snap")) fs.unlinkSync(join(dir, "groups", file));
          }
          const store = await mwp.openFileStore(dir);
          const groups = await store.groups();
          eq(groups, Object.keys(f.groups).sort(), `${name}: groups`);
          for (const group of groups) {
            const g = await store.openGroup(group);
            eq([g.seq, g.stateHash()], [f.groups[group].events, f.groups[group].state_hash], `${name} ${variant}: ${group}`);
            const theirs = jsonLines(native(["replay", "--data", dir, "--group", group]).stdout);
            sameJson(await g.events(), theirs, `${name} ${variant}: ${group} events`);
          }
          eq(store.report.trimmed, [], `${name}: nothing trimmed`);
          await store.close();
        }
      }
    }],

    ["Node appends to a log the native store wrote (batch, redaction), and native fsck/replay agree", async () => {
      const root = tempDir("append");
      const dir = join(root, "data");
      const contract = { max_attempts: 3, backoff_base_ms: 100, backoff_max_ms: 1000, cost_budget: 10, risk: "low" };
      const steps = [
        { at: 1000, org: "acme", group: "g1", actor: "alice", action: "open", body: { type: "open_group", mission: "m1", title: "Ship it",
          members: [{ actor: "alice", role: "owner" }, { actor: "bob", role: "worker" }] } },
        { actor: "alice", action: "create-w1", body: { type: "create_work", work: "w1", contract, after: [], spec: { secret: "s3cr3t" } } },
      ];
      fs.writeFileSync(join(root, "t.jsonl"), steps.map((x) => JSON.stringify(x)).join("\n"));
      eq(native(["transcript", join(root, "t.jsonl"), "--data", dir]).code, 0, "native transcript");
      const store = await mwp.openFileStore(dir);
      eq(store.authorityKey, mwp.publicKeyOf(mwp.transcriptSecretKey("@authority")), "the native store's key");
      const c = makeCommands(mwp);
      const rs = await store.submit([c.create("w2"), c.create("w3"), c.cmd("alice", "r1", { type: "redact", seq: 2, reason: "gdpr" })], 2000);
      eq(rs.map((r) => r.receipt.seq), [3, 4, 5], "appended");
      const events = await store.events("g1");
      const hash = await store.stateHash("g1");
      await store.close();
      eq(recordBatches(segPath(dir)).map(([, b]) => b), [1, 2, 3, 3, 3], "one batch after the native ones");
      const f = fsck(dir);
      eq([f.code, f.groups.g1.events, f.groups.g1.state_hash], [0, 5, hash], "native fsck");
      sameJson(jsonLines(native(["replay", "--data", dir, "--group", "g1"]).stdout), events, "native replay");
      check(!fs.readFileSync(segPath(dir)).includes("s3cr3t"), "the redacted value is erased from the segment");
    }],

    ["Node → native: every transcript run on the Node store gives the native outputs and byte-identical files", async () => {
      for (const name of fs.readdirSync(transcripts).filter((n) => n.endsWith(".jsonl")).sort()) {
        const text = fs.readFileSync(join(transcripts, name), "utf8");
        const ours = join(tempDir("node"), "data");
        const theirs = join(tempDir("native"), "data");
        const lines = await runTranscriptOnStore(mwp, text, ours);
        const nat = jsonLines(native(["transcript", join(transcripts, name), "--data", theirs]).stdout);
        compareLines(lines, nat, name);
        const f = fsck(ours);
        eq([f.code, f.findings], [0, []], `${name}: native fsck of the Node store`);
        const a = groupFiles(ours);
        const b = groupFiles(theirs);
        eq(Object.keys(a), Object.keys(b), `${name}: files`);
        for (const file of Object.keys(a)) check(a[file].equals(b[file]), `${name}: ${file} differs from the native store's`);
        for (const group of Object.keys(f.groups)) {
          const store = await mwp.openFileStore(ours);
          sameJson(await store.events(group), jsonLines(native(["replay", "--data", ours, "--group", group]).stdout), `${name}: replay ${group}`);
          await store.close();
        }
      }
    }],

    ["redaction: overlay + zeroed record; an interrupted erasure is finished on open", async () => {
      const dir = tempDir("erase");
      const { store, c } = await populated(mwp, dir);
      const path = segPath(dir);
      const original = fs.readFileSync(path);
      const [r] = await store.submit(c.cmd("alice", "r1", { type: "redact", seq: 2, reason: "gdpr" }), 2000);
      eq(r.outcome, "accepted", "redact accepted");
      const events = await store.events("g1");
      const hash = await store.stateHash("g1");
      await store.close();
      check(JSON.stringify(events[1].kind).includes("$redacted"), "seq 2 is served redacted");
      const off = recordOffset(path, 2);
      const len = original.readUInt32LE(off);
      check(fs.readFileSync(path).subarray(off + 24, off + 24 + len).every((x) => x === 0), "erased payload is zeros");
      const overlay = join(dir, "groups", "g1", "redactions.log");
      check(fs.existsSync(overlay), "overlay written");
      eq(fsck(dir).code, 0, "native fsck");
      // A torn overlay append (an entry whose sync never returned) is trimmed.
      const overlayBytes = fs.readFileSync(overlay);
      fs.appendFileSync(overlay, overlayBytes.subarray(192, 210));
      const t = await mwp.openFileStore(dir);
      sameJson(await t.events("g1"), events, "events with a torn overlay tail");
      eq(t.report.trimmed, [{ file: overlay, offset: overlayBytes.length, bytes: 18 }], "overlay trim reported");
      await t.close();
      check(fs.readFileSync(overlay).equals(overlayBytes), "overlay trimmed");
      for (const crash of ["after the overlay sync", "before the overlay was written"]) {
        // The original record back, as a crash before the in-place erasure leaves it.
        const b = fs.readFileSync(path);
        original.copy(b, off + 20, off + 20, off + 24 + len);
        fs.writeFileSync(path, b);
        if (crash === "before the overlay was written") fs.unlinkSync(join(dir, "groups", "g1", "redactions.log"));
        const s = await mwp.openFileStore(dir);
        const g = await s.openGroup("g1");
        eq(s.report.repaired, ["erased the values of seq 2 in g1"], `${crash}: repaired`);
        eq(g.stateHash(), hash, `${crash}: state hash`);
        sameJson(await g.events(), events, `${crash}: events`);
        await s.close();
        check(fs.readFileSync(path).subarray(off + 24, off + 24 + len).every((x) => x === 0), `${crash}: zeroed again`);
        eq(fsck(dir).code, 0, `${crash}: native fsck`);
      }
    }],
    ["one writer per directory: a second open is refused naming the holder's pid, until the first closes", async () => {
      const dir = tempDir("lock");
      const first = await mwp.openFileStore(dir);
      const e = await rejects(mwp.openFileStore(dir), "STORAGE");
      check(e.message.includes(dir) && e.message.includes(`process ${process.pid}`), e.message);
      eq(e.details?.pid, process.pid, "details.pid");
      // A read-only open takes no lock, and refuses commands.
      const ro = await mwp.openFileStore(dir, { readOnly: true });
      const c = makeCommands(mwp);
      await rejects(ro.submit(c.open(), 1000), "STORAGE");
      await ro.close();
      await first.close();
      check(!fs.existsSync(join(dir, "LOCK.pid")), "close removes the owner record");
      const again = await mwp.openFileStore(dir);
      await again.close();
    }],

    ["a Node store and `mwp serve` on one directory refuse each other", async () => {
      const dir = tempDir("lock-native");
      const store = await mwp.openFileStore(dir);
      // Bounded: a server that started anyway is killed after two minutes (and fails here).
      let r;
      try {
        execFileSync(mwpBin(), ["serve", "--addr", "127.0.0.1:0", "--data", dir], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 120_000 });
        r = { code: 0, stderr: "" };
      } catch (e) {
        r = { code: e.status ?? -1, stderr: String(e.stderr ?? "") };
      }
      eq(r.code, 3, `mwp serve beside a Node store: ${r.stderr}`);
      check(r.stderr.includes(dir) && r.stderr.includes(`process ${process.pid}`), r.stderr);
      await store.close();
      const { spawn } = await import("node:child_process");
      const child = spawn(mwpBin(), ["serve", "--addr", "127.0.0.1:0", "--data", dir], { stdio: ["ignore", "ignore", "pipe"] });
      try {
        // Wait until the server says it is serving (it holds the lock by then).
        await new Promise((resolve, reject) => {
          let text = "";
          child.stderr.on("data", (d) => {
            text += d;
            if (text.includes("authority on")) resolve();
          });
          child.on("exit", (code) => reject(new Error(`mwp serve exited ${code}: ${text}`)));
        });
        const e = await rejects(mwp.openFileStore(dir), "STORAGE");
        check(e.message.includes(`process ${child.pid}`), e.message);
      } finally {
        child.kill("SIGKILL");
        await new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.on("exit", resolve)));
        // Deno reports the exit as soon as the signal is sent: wait until the process is gone
        // (signal 0 fails) or a zombie (where /proc may be read; Deno needs --allow-all for it).
        const gone = () => {
          try {
            process.kill(child.pid, 0);
          } catch {
            return true;
          }
          try {
            return "ZX".includes(fs.readFileSync(`/proc/${child.pid}/stat`, "utf8").split(")").pop().trim()[0]);
          } catch {
            return false;
          }
        };
        for (let i = 0; i < 1000 && !gone(); i++) await new Promise((r) => setTimeout(r, 10));
      }
      // kill -9 of the holder leaves the directory openable.
      const after = await mwp.openFileStore(dir);
      await after.close();
    }],

    ["an owner record far longer than one is not read whole: not a record, taken over once old", async () => {
      const dir = tempDir("owner-long");
      const { store } = await populated(mwp, dir);
      await store.close();
      // 256 MiB that take no disk (a sparse file), left by no live writer.
      const owner = join(dir, "LOCK.pid");
      fs.writeFileSync(owner, "mwp-lock 1\npid ");
      fs.truncateSync(owner, 256 << 20);
      fs.utimesSync(owner, new Date(0), new Date(0));
      const before = process.memoryUsage().rss;
      const back = await mwp.openFileStore(dir);
      const grew = process.memoryUsage().rss - before;
      check(grew < 64 << 20, `opening grew the process by ${Math.round(grew / 2 ** 20)} MiB`);
      eq((await back.events("g1", 0, 1)).length, 1, "the store opened");
      await back.close();
      check(!fs.existsSync(owner), "the long record was taken over and the new one removed on close");
    }],

    ["an owner record naming a zombie (exited, not yet reaped) does not hold the directory", async () => {
      if (typeof globalThis.Deno !== "undefined") return; // Deno reaps the orphan before it can be seen as a zombie
      const dir = tempDir("lock-zombie");
      const { spawn } = await import("node:child_process");
      // `sleep 0.05` is left a zombie: its parent becomes `sleep 3`, which never reaps it.
      const parent = spawn("sh", ["-c", "sleep 0.05 & echo $!; exec sleep 3"], { stdio: ["ignore", "pipe", "ignore"] });
      try {
        const pid = Number(await new Promise((resolve) => parent.stdout.once("data", (d) => resolve(String(d).trim()))));
        const state = () => { try { return fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(")").pop().trim()[0]; } catch { return ""; } };
        for (let i = 0; i < 200 && state() !== "Z"; i++) await new Promise((r) => setTimeout(r, 10));
        eq(state(), "Z", "the child is a zombie");
        fs.writeFileSync(join(dir, "LOCK.pid"), `mwp-lock 1\npid ${pid}\n`, { mode: 0o600 });
        const store = await mwp.openFileStore(dir);
        await store.close();
      } finally {
        parent.kill("SIGKILL");
      }
    }],

    ["every host reaches the same verdict on the same owner records (tests/lock/owner-records.json)", async () => {
      const table = JSON.parse(fs.readFileSync(join(repo, "tests/lock/owner-records.json"), "utf8"));
      const { spawn } = await import("node:child_process");
      const field = (pid, n) => {
        try {
          return fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(")").pop().trim().split(/\s+/)[n - 3] ?? null;
        } catch {
          return null;
        }
      };
      const live = spawn("sleep", ["600"], { stdio: "ignore" });
      // `sleep 0.05` is left a zombie: its parent becomes `sleep 5`, which never reaps it.
      // Deno reaps the orphan before it can be seen as a zombie: that record is left out there.
      const parent = spawn("sh", ["-c", "sleep 0.05 & echo $!; exec sleep 5"], { stdio: ["ignore", "pipe", "ignore"] });
      const gone = spawn("true", [], { stdio: "ignore" });
      try {
        const zombie = Number(await new Promise((resolve) => parent.stdout.once("data", (d) => resolve(String(d).trim()))));
        let isZombie = false;
        for (let i = 0; i < 200 && !(isZombie = field(zombie, 3) === "Z"); i++) await new Promise((r) => setTimeout(r, 10));
        await new Promise((resolve) => (gone.exitCode !== null ? resolve() : gone.on("exit", resolve)));
        const initStart = field(1, 22);
        const fill = [
          ["{live}", String(live.pid)],
          ["{live_start}", field(live.pid, 22)],
          ["{zombie}", typeof globalThis.Deno === "undefined" && isZombie ? String(zombie) : null],
          ["{dead}", String(gone.pid)],
          ["{init_start+1}", initStart === null ? null : String(BigInt(initStart) + 1n)],
          ["{init_start}", initStart],
        ];
        let judged = 0;
        for (const [text, want, why] of table.cases) {
          let record = text;
          let filled = true;
          for (const [name, value] of fill) {
            if (!record.includes(name)) continue;
            if (value === null) filled = false;
            else record = record.replaceAll(name, value);
          }
          if (!filled) continue;
          const o = decodeOwner(record);
          const got = o === null ? "not a record" : (await isAlive(o)) ? "held" : "stale";
          eq(got, want, `${JSON.stringify(record)}: ${why}`);
          judged += 1;
        }
        check(judged >= 12, `${judged} records judged`);
      } finally {
        live.kill("SIGKILL");
        parent.kill("SIGKILL");
      }
    }],

    ["kill -9 of a Node holder leaves the directory openable", async () => {
      if (typeof globalThis.Deno !== "undefined") return; // spawns a Node process
      const dir = tempDir("lock-kill");
      const { spawn } = await import("node:child_process");
      const entry = new URL("../src/node.js", import.meta.url).href;
      const script = `const m = await import(${JSON.stringify(entry)}); await m.openFileStore(${JSON.stringify(dir)}); console.log("ready"); setInterval(() => {}, 1 << 30);`;
      const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
      await new Promise((resolve, reject) => {
        child.stdout.on("data", (d) => String(d).includes("ready") && resolve());
        child.on("exit", (code) => reject(new Error(`the holder exited ${code}`)));
      });
      await rejects(mwp.openFileStore(dir), "STORAGE");
      child.kill("SIGKILL");
      await new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.on("exit", resolve)));
      check(fs.existsSync(join(dir, "LOCK.pid")), "the dead holder's record stays");
      const after = await mwp.openFileStore(dir);
      await after.close();
    }],

    ["an agent journal has one writer: a second open is refused naming the file and the holder, until the first closes", async () => {
      const dir = tempDir("journal-lock");
      const path = join(dir, "bob.journal");
      const first = await mwp.openAgentJournal(path);
      const e = await rejects(mwp.openAgentJournal(path), "STORAGE");
      check(e.message.includes(`${path} is in use by another writer (process ${process.pid}); stop it first`), e.message);
      eq([e.details?.file, e.details?.pid], [path, process.pid], "details");
      // The owner record is a data directory's, beside the journal.
      check(/^mwp-lock 1\npid \d+\n(start \d+\n)?$/.test(fs.readFileSync(`${path}.LOCK.pid`, "utf8")), "the owner record");
      // Another journal in the same directory has its own lock.
      const other = await mwp.openAgentJournal(join(dir, "ada.journal"));
      await other.close();
      await first.close();
      check(!fs.existsSync(`${path}.LOCK.pid`), "close removes the owner record");
      const again = await mwp.openAgentJournal(path);
      await again.close();
    }],

    ["an agent journal whose owner record was removed appends nothing more, until reopened", async () => {
      const dir = tempDir("journal-lost");
      const path = join(dir, "bob.journal");
      const journal = await mwp.openAgentJournal(path);
      fs.unlinkSync(`${path}.LOCK.pid`);
      const e = await rejects(journal.commit(new Uint8Array([0xa0])), "STORAGE");
      eq(e.message, `${path} is no longer this writer's: bob.journal.LOCK.pid holds no owner record; reopen the journal`, "message");
      eq(e.details?.file, path, "details");
      const again = await rejects(journal.commit(new Uint8Array([0xa0])), "STORAGE");
      check(again.message.includes("reopen the journal"), again.message);
      check(!fs.existsSync(path), "nothing written");
      await journal.close();
    }],

    ["an agent journal another process holds is refused; kill -9 of the holder leaves it openable", async () => {
      const dir = tempDir("journal-holder");
      const path = join(dir, "bob.journal");
      const { spawn } = await import("node:child_process");
      // A Node holder (from Deno too: the two runtimes exclude each other).
      const node = typeof globalThis.Deno !== "undefined" ? "node" : process.execPath;
      const entry = new URL("../src/node.js", import.meta.url).href;
      const script = `const m = await import(${JSON.stringify(entry)}); await m.openAgentJournal(${JSON.stringify(path)}); console.log("ready"); setInterval(() => {}, 1 << 30);`;
      const child = spawn(node, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
      try {
        await new Promise((resolve, reject) => {
          child.stdout.on("data", (d) => String(d).includes("ready") && resolve());
          child.on("exit", (code) => reject(new Error(`the holder exited ${code}`)));
        });
        const e = await rejects(mwp.openAgentJournal(path), "STORAGE");
        check(e.message.includes(`process ${child.pid}`), e.message);
      } finally {
        child.kill("SIGKILL");
        await new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.on("exit", resolve)));
      }
      for (let i = 0; i < 1000; i++) {
        try {
          process.kill(child.pid, 0);
        } catch {
          break;
        }
        await new Promise((r) => setTimeout(r, 10));
      }
      const after = await mwp.openAgentJournal(path);
      await after.close();
    }],

    ["an agent journal named like another journal's lock or temporary file is MALFORMED, as natively, and touches nothing", async () => {
      const dir = tempDir("journal-names");
      const a = join(dir, "a");
      const journal = await mwp.openAgentJournal(a);
      const before = fs.readdirSync(dir).sort();
      for (const [name, why] of [
        ["a.LOCK", "a.LOCK is the writer lock file of journal a"],
        ["a.LOCK.pid", "a.LOCK.pid is the owner record of journal a"],
        ["a.tmp", "a.tmp is the file that creates journal a"],
        ["a.LOCK.pid.stale-7", "a.LOCK.pid.stale-7 is where the writer lock of journal a moves a stale owner record"],
        ["LOCK", "LOCK is a data directory's writer lock file"],
      ]) {
        const path = join(dir, name);
        const e = await rejects(mwp.openAgentJournal(path), "MALFORMED");
        eq([e.message, e.details?.file], [`agent journal ${path}: ${why}; choose another name`, path], name);
      }
      for (const path of [undefined, null, 7, new URL("file:///tmp/x")]) {
        const e = await rejects(mwp.openAgentJournal(path), "MALFORMED");
        check(e.message.includes("`path` must be a path"), e.message);
      }
      eq(fs.readdirSync(dir).sort(), before, "nothing created or removed");
      check(!fs.existsSync("undefined.LOCK.pid"), "no lock file for an undefined path");
      // Journal a keeps its writer lock.
      await rejects(mwp.openAgentJournal(a), "STORAGE");
      await journal.close();
    }],

    ["a flock another process holds refuses the open at once under Deno, before its owner record is looked at, as natively (never waits)", async () => {
      // Node takes no flock: it sees a writer through its owner record only (docs/format.md).
      if (typeof globalThis.Deno === "undefined") return;
      const { spawn } = await import("node:child_process");
      const dir = tempDir("flock-held");
      const data = join(dir, "data");
      fs.mkdirSync(data, { mode: 0o700 });
      const journal = join(dir, "bob.journal");
      for (const [name, key, lockFile, owner, open] of [
        [journal, "file", `${journal}.LOCK`, `${journal}.LOCK.pid`, () => mwp.openAgentJournal(journal)],
        [data, "dir", join(data, "LOCK"), join(data, "LOCK.pid"), () => mwp.openFileStore(data)],
      ]) {
        // flock(1) holds the lock (`-o`: not passed to its command) while `sleep` runs.
        const holder = spawn("flock", ["-o", "-x", lockFile, "sh", "-c", "echo ready; exec sleep 60"], { stdio: ["ignore", "pipe", "inherit"], detached: true });
        try {
          await new Promise((resolve, reject) => {
            holder.stdout.on("data", (d) => String(d).includes("ready") && resolve());
            holder.on("exit", (code) => reject(new Error(`flock exited ${code}`)));
          });
          let timer;
          const waited = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`the open of ${name} waited for the flock`)), 10_000)));
          const e = await Promise.race([rejects(open(), "STORAGE"), waited]).finally(() => clearTimeout(timer));
          check(e.message.startsWith(`${name} is in use by another writer (another process); stop it first`), e.message);
          eq(e.details, { [key]: name }, "details");
          check(!fs.existsSync(owner), "the refused open leaves no owner record");
          // The flock is taken before the owner record is looked at, as natively: what is at
          // the record's path is not read, and the holder is what refuses the open.
          fs.mkdirSync(owner);
          const first = await rejects(open(), "STORAGE");
          check(first.message.startsWith(`${name} is in use by another writer (another process); stop it first`), first.message);
          fs.rmdirSync(owner);
        } finally {
          process.kill(-holder.pid, "SIGKILL");
          await new Promise((resolve) => (holder.exitCode !== null || holder.signalCode !== null ? resolve() : holder.on("exit", resolve)));
        }
      }
      const again = await mwp.openAgentJournal(journal);
      await again.close();
    }],

    ["an owner record that is a directory or a FIFO is refused naming it, never waited on, moved or removed, as natively", async () => {
      for (const kind of ["directory", "FIFO"]) {
        const dir = tempDir("owner-not-file");
        const data = join(dir, "data");
        fs.mkdirSync(data, { mode: 0o700 });
        const journal = join(dir, "bob.journal");
        for (const [name, key, owner, open] of [
          [data, "dir", join(data, "LOCK.pid"), () => mwp.openFileStore(data)],
          [journal, "file", `${journal}.LOCK.pid`, () => mwp.openAgentJournal(journal)],
        ]) {
          if (kind === "directory") fs.mkdirSync(owner);
          else execFileSync("mkfifo", [owner]);
          // The OS lock's file, which native and Deno writers take before the owner record
          // and never remove, as an earlier writer left it.
          fs.writeFileSync(owner.slice(0, -".pid".length), "", { mode: 0o600 });
          const old = new Date(Date.now() - 60_000);
          fs.utimesSync(owner, old, old);
          const before = fs.readdirSync(dirname(owner)).sort();
          const e = await rejects(open(), "STORAGE");
          eq([e.message, e.details], [`${owner} is not an owner record: it is a ${kind}, not a regular file; remove it`, { [key]: name }], `${kind} at ${owner}`);
          check(!fs.lstatSync(owner).isFile(), "left in place");
          eq(fs.readdirSync(dirname(owner)).sort(), before, "nothing moved aside or created");
        }
      }
    }],

    ["an agent journal path that holds a directory or a FIFO is STORAGE at open, never waited on, and leaves no lock file, as natively", async () => {
      for (const kind of ["directory", "FIFO"]) {
        const dir = tempDir("journal-not-file");
        const path = join(dir, "bob.journal");
        if (kind === "directory") fs.mkdirSync(path);
        else execFileSync("mkfifo", [path]);
        const e = await rejects(mwp.openAgentJournal(path), "STORAGE");
        eq([e.message, e.details], [`agent journal ${path}: it is a ${kind}, not a regular file`, { file: path }], kind);
        eq(fs.readdirSync(dir), ["bob.journal"], `${kind}: refused before its lock is taken, nothing created beside it`);
        check(!fs.lstatSync(path).isFile(), "left in place");
      }
    }],

    ["a store file that is not a regular file is STORAGE naming its path and what it is, never waited on, as natively", async () => {
      const base = tempDir("not-regular");
      const { store, c } = await populated(mwp, join(base, "data"), { snapshotEvery: 2 });
      const [r] = await store.submit(c.cmd("alice", "r1", { type: "redact", seq: 2, reason: "gdpr" }), 2000);
      eq(r.outcome, "accepted", "redact accepted");
      const events = await store.events("g1");
      await store.close();
      const g1 = (dir) => join(dir, "groups", "g1");
      const snaps = fs.readdirSync(g1(join(base, "data"))).filter((n) => n.endsWith(".snap")).sort();
      check(snaps.length > 0 && fs.existsSync(join(g1(join(base, "data")), "redactions.log")), "snapshots and an overlay to replace");
      const newest = snaps[snaps.length - 1];
      let n = 0;
      for (const [name, kind, at] of [
        ["authority.key", "FIFO", (dir) => join(dir, "authority.key")],
        ["a log segment", "FIFO", (dir) => join(g1(dir), "00000000000000000001.seg")],
        ["a log segment", "directory", (dir) => join(g1(dir), "00000000000000000001.seg")],
        ["redactions.log", "FIFO", (dir) => join(g1(dir), "redactions.log")],
        ["audit.mwpa", "FIFO", (dir) => join(g1(dir), "audit.mwpa")],
        ["audit.tombstone", "FIFO", (dir) => join(g1(dir), "audit.tombstone")],
        ["a snapshot", "FIFO", (dir) => join(g1(dir), newest)],
      ]) {
        const dir = join(base, `copy-${n++}`);
        fs.cpSync(join(base, "data"), dir, { recursive: true });
        const path = at(dir);
        fs.rmSync(path, { force: true });
        // Mode 0600: a key file's mode is right, and only its type is wrong.
        if (kind === "FIFO") execFileSync("mkfifo", ["-m", "600", path]);
        else fs.mkdirSync(path, { mode: 0o700 });
        // Deno's writer leaves the OS lock's file `LOCK`, as the native one does.
        const listed = () => JSON.stringify(fs.readdirSync(dir, { recursive: true }).filter((x) => x !== "LOCK").sort());
        const listing = listed();
        const what = `${kind} at ${name}`;
        const message = `open ${path}: it is a ${kind}, not a regular file`;
        for (const readOnly of [false, true]) {
          const how = `${what}, ${readOnly ? "read-only" : "writer"}`;
          // A failure here must not hang the run: a FIFO waited on is opened for writing
          // once the time is up, which ends the wait.
          const bounded = async (p) => {
            let timer;
            const late = new Promise((_, reject) => (timer = setTimeout(() => {
              if (kind === "FIFO") fs.closeSync(fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK));
              reject(new Error(`${how}: waited on`));
            }, 10_000)));
            return Promise.race([p, late]).finally(() => clearTimeout(timer));
          };
          if (name === "authority.key") {
            const e = await bounded(rejects(mwp.openFileStore(dir, { readOnly }), "STORAGE"));
            eq(e.message, message, how);
          } else if (name === "a snapshot") {
            // As an unreadable snapshot: skipped, named, and the log read from an older one.
            const s = await bounded(mwp.openFileStore(dir, { readOnly }));
            sameJson(await bounded(s.events("g1")), events, `${how}: events`);
            check(s.report.skippedSnapshots.some((x) => x.file === path && x.reason === message), `${how}: ${JSON.stringify(s.report.skippedSnapshots)}`);
            await s.close();
          } else {
            const s = await bounded(mwp.openFileStore(dir, { readOnly }));
            const e = await bounded(rejects(s.openGroup("g1"), "STORAGE"));
            eq(e.message, message, how);
            await s.close();
          }
          check(kind === "FIFO" ? fs.lstatSync(path).isFIFO() : fs.lstatSync(path).isDirectory(), `${how}: left in place`);
          eq(listed(), listing, `${how}: nothing created or removed`);
        }
      }
    }],

    ["a link to nothing at authority.key is refused, not replaced by a new key; a groups that is no directory is STORAGE, as natively", async () => {
      const base = tempDir("dangling");
      const { store } = await populated(mwp, join(base, "data"));
      await store.close();
      const nowhere = join(base, "unmounted", "authority.key");
      const key = join(base, "key");
      fs.cpSync(join(base, "data"), key, { recursive: true });
      fs.rmSync(join(key, "authority.key"));
      fs.symlinkSync(nowhere, join(key, "authority.key"));
      for (const readOnly of [false, true]) {
        const e = await rejects(mwp.openFileStore(key, { readOnly }), "STORAGE");
        check(e.message.startsWith(`open ${join(key, "authority.key")}: `), `${readOnly ? "read-only" : "writer"}: ${e.message}`);
        eq(fs.readlinkSync(join(key, "authority.key")), nowhere, "the link is left where it was");
        check(!fs.existsSync(nowhere) && !fs.existsSync(join(key, "authority.key.tmp")), "no key written");
      }
      for (const what of ["a file", "a link to nothing"]) {
        const dir = join(base, `groups-${what.replaceAll(" ", "-")}`);
        fs.cpSync(join(base, "data"), dir, { recursive: true });
        const groups = join(dir, "groups");
        fs.rmSync(groups, { recursive: true });
        if (what === "a file") fs.writeFileSync(groups, "junk");
        else fs.symlinkSync(join(base, "unmounted", "groups"), groups);
        for (const readOnly of [false, true]) {
          const e = await rejects(mwp.openFileStore(dir, { readOnly }), "STORAGE");
          eq(e.message, `${groups} is not a directory: the data directory is damaged`, `${what}, ${readOnly ? "read-only" : "writer"}`);
          check(what === "a file" ? fs.lstatSync(groups).isFile() : fs.lstatSync(groups).isSymbolicLink(), `${what}: left in place`);
        }
      }
    }],

    ["a read-only open serves an event whose erasure a writer began redacted, never its values, as natively", async () => {
      const dir = tempDir("ro-erasure");
      const { store, c } = await populated(mwp, dir, { snapshotEvery: null });
      const path = segPath(dir);
      const original = fs.readFileSync(path);
      const plain = await store.events("g1");
      const [r] = await store.submit(c.cmd("alice", "r1", { type: "redact", seq: 2, reason: "gdpr" }), 2000);
      eq(r.outcome, "accepted", "redact accepted");
      const events = await store.events("g1");
      const frames = await store.eventFrames("g1");
      await store.close();
      check(JSON.stringify(events[1].kind).includes("$redacted"), "seq 2 is served redacted");
      const value = JSON.stringify(plain[1].kind.spec);
      check(JSON.stringify(plain[1]).includes(value) && !JSON.stringify(events[1]).includes(value), "seq 2's value, and its redacted form");
      const off = recordOffset(path, 2);
      const len = original.readUInt32LE(off);
      const overlay = join(dir, "groups", "g1", "redactions.log");
      const overlayBytes = fs.readFileSync(overlay);
      // Where a writer stops between the durable `event_redacted` and the end of its erasure:
      // the record still holds the values, and the overlay has no entry for it.
      for (const crash of ["before the overlay was written", "in the overlay's append"]) {
        const b = fs.readFileSync(path);
        original.copy(b, off + 20, off + 20, off + 24 + len);
        fs.writeFileSync(path, b);
        if (crash === "before the overlay was written") fs.rmSync(overlay);
        else fs.writeFileSync(overlay, overlayBytes.subarray(0, overlayBytes.length - 5));
        const before = groupFiles(dir);
        const ro = await mwp.openFileStore(dir, { readOnly: true });
        sameJson(await ro.events("g1"), events, `${crash}: events`);
        check(Buffer.from(await ro.eventFrames("g1")).equals(Buffer.from(frames)), `${crash}: frames`);
        eq((await ro.events("g1", 1, 1))[0].kind, events[1].kind, `${crash}: a page from seq 2`);
        await ro.close();
        // The native reader serves the same.
        const theirs = native(["replay", "--data", dir, "--group", "g1"]);
        eq(theirs.code, 0, `${crash}: native replay: ${theirs.stderr}`);
        sameJson(jsonLines(theirs.stdout), events, `${crash}: native replay`);
        eq(Object.keys(groupFiles(dir)), Object.keys(before), `${crash}: nothing created or removed`);
        for (const [f, bytes] of Object.entries(groupFiles(dir))) check(bytes.equals(before[f]), `${crash}: ${f} unchanged`);
        // The writer finishes the erasure.
        const s = await mwp.openFileStore(dir);
        const g = await s.openGroup("g1");
        eq(s.report.repaired, ["erased the values of seq 2 in g1"], `${crash}: repaired`);
        sameJson(await g.events(), events, `${crash}: events after the repair`);
        await s.close();
      }
    }],

    ["a page of events is bounded by bytes by the core's rule, across segments too, redacted events counted as served, as natively", async () => {
      const dir = tempDir("page-bytes");
      // Segments of 1 MiB: a page of about 8 MiB spans several of them.
      const store = await mwp.openFileStore(dir, { authorityKey: mwp.transcriptSecretKey("@authority"), segmentBytes: 1 << 20, reserveBytes: 0 });
      const c = makeCommands(mwp);
      await store.submit(c.open(), 1000);
      const text = "x".repeat(30_000);
      for (let b = 0; b < 6; b++) {
        const cmds = [];
        for (let i = b * 50; i < (b + 1) * 50; i++) cmds.push(c.cmd("alice", `big-${i}`, { type: "create_work", work: `w${i}`, after: [], spec: { text }, contract: { max_attempts: 3, backoff_base_ms: 100, backoff_max_ms: 1000, cost_budget: 10, risk: "low" } }));
        for (const r of await store.submit(cmds, 2000 + b)) check(r.outcome === "accepted", JSON.stringify(r));
      }
      // Ten of the first page's events redacted: each counts as served (a few bytes), not as
      // the 30 KB its record held, as PostgreSQL counts its redacted row.
      const redactions = [];
      for (let seq = 2; seq < 12; seq++) redactions.push(c.cmd("alice", `redact-${seq}`, { type: "redact", seq, reason: "gdpr" }));
      for (const r of await store.submit(redactions, 3000)) check(r.outcome === "accepted", JSON.stringify(r));
      const head = 311;
      const MAX_PAGE_BYTES = 8 << 20;
      const lengths = (frames) => {
        const v = new DataView(frames.buffer, frames.byteOffset, frames.byteLength);
        const out = [];
        for (let at = 0; at < frames.length; at += 4 + v.getUint32(at, true)) out.push(v.getUint32(at, true));
        return out;
      };
      let after = 0;
      let pages = 0;
      while (after < head) {
        const page = lengths(await store.eventFrames("g1", after));
        check(page.length > 0, `a page after ${after}`);
        // Each event was taken while the ones before it held fewer than 8 MiB; a page that
        // stops short of the head stops because they held 8 MiB.
        let taken = 0;
        for (const len of page) {
          check(taken < MAX_PAGE_BYTES, `the page after ${after} takes an event after ${taken} bytes`);
          taken += len;
        }
        if (after + page.length < head) check(taken >= MAX_PAGE_BYTES, `the page after ${after} stops with ${taken} bytes`);
        after += page.length;
        pages += 1;
      }
      eq(pages, 2, "two pages of about 8 MiB");
      await store.close();
    }],

    ["a read-only open changes nothing and stops at the last complete record", async () => {
      const dir = tempDir("readonly");
      const { store } = await populated(mwp, dir, { snapshotEvery: null });
      const events = await store.events("g1");
      await store.close();
      const path = segPath(dir);
      const written = fs.readFileSync(path);
      const torn = Buffer.from(written);
      torn.set(written.subarray(192, 222), recordsEnd(written));
      fs.writeFileSync(path, torn);
      fs.writeFileSync(join(dir, "groups", "g1", "00000000000000000009.snap.tmp"), "x");
      fs.mkdirSync(join(dir, "groups", ".new-g9"));
      const before = JSON.stringify(fs.readdirSync(dir, { recursive: true }).sort());
      const ro = await mwp.openFileStore(dir, { readOnly: true });
      sameJson(await ro.events("g1"), events, "events up to the last complete record");
      eq(ro.report.trimmed, [], "nothing trimmed");
      await ro.close();
      check(fs.readFileSync(path).equals(torn), "the torn tail is still there");
      eq(JSON.stringify(fs.readdirSync(dir, { recursive: true }).sort()), before, "no file created or removed");
      await rejects(mwp.openFileStore(join(dir, "missing"), { readOnly: true }), "STORAGE");
      check(!fs.existsSync(join(dir, "missing")), "a read-only open creates nothing");
    }],

    ["an `after` or `limit` that is not a count is MALFORMED at once (a fractional one was read forever)", async () => {
      const dir = tempDir("counts");
      const { store } = await populated(mwp, dir);
      const within = (p, what) =>
        Promise.race([p, new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer within 5 s`)), 5000).unref?.())]);
      for (const [after, limit] of [[1.5, undefined], [-1, undefined], ["1", undefined], [NaN, undefined], [0, 2.5], [0, -1], [0, "5"]]) {
        const what = `after ${String(after)}, limit ${String(limit)}`;
        await rejects(within(store.eventFrames("g1", after, limit), what), "MALFORMED");
        await rejects(within(store.events("g1", after, limit), what), "MALFORMED");
      }
      eq((await store.events("g1", 1, 2)).map((e) => e.seq), [2, 3], "counts still read");
      await store.close();
    }],

    ["a group directory without a segment is LOG_CORRUPT naming it, and kept", async () => {
      for (const keep of ["snapshots", "nothing"]) {
        const dir = tempDir(`noseg-${keep}`);
        const { store } = await populated(mwp, dir, { snapshotEvery: 2 });
        await store.close();
        const gdir = join(dir, "groups", "g1");
        for (const n of fs.readdirSync(gdir)) if (n.endsWith(".seg") || keep === "nothing") fs.unlinkSync(join(gdir, n));
        const left = fs.readdirSync(gdir).sort();
        check(keep === "nothing" || left.some((n) => n.endsWith(".snap")), `${keep}: snapshots kept`);
        const again = await mwp.openFileStore(dir);
        eq(await again.groups(), ["g1"], `${keep}: still listed`);
        const e = await rejects(again.openGroup("g1"), "LOG_CORRUPT");
        check(e.message.includes(gdir), e.message);
        await again.close();
        eq(fs.readdirSync(gdir).sort(), left, `${keep}: nothing removed`);
        check(fsck(dir).code !== 0, `${keep}: native fsck reports it`);
      }
    }],

    ["a record edited with a recomputed CRC is LOG_CORRUPT naming file and offset", async () => {
      const dir = tempDir("recrc");
      const { store } = await populated(mwp, dir, { snapshotEvery: null });
      await store.close();
      const path = segPath(dir);
      const b = fs.readFileSync(path);
      const off = recordOffset(path, 3);
      const len = new DataView(b.buffer, b.byteOffset).getUint32(off, true);
      // `"do": "w1"` becomes `"do": "w2"`: still canonical CBOR, another payload.
      const at = b.indexOf("w1", off + 24);
      check(at > 0 && at < off + 24 + len, "the work name in record 3");
      b[at + 1] = "9".charCodeAt(0);
      const crc = mwp.crc32c(b.subarray(off + 24, off + 24 + len), mwp.crc32c(b.subarray(off, off + 20)));
      new DataView(b.buffer, b.byteOffset).setUint32(off + 20, crc, true);
      fs.writeFileSync(path, b);
      const again = await mwp.openFileStore(dir);
      const e = await rejects(again.openGroup("g1"), "LOG_CORRUPT");
      eq([e.details?.file, e.details?.offset], [path, off], `named: ${e.message}`);
      await again.close();
    }],

    ["a log filed under another group's directory is LOG_CORRUPT, as natively", async () => {
      const dir = tempDir("misfiled");
      const { store } = await populated(mwp, dir, { snapshotEvery: null });
      await store.close();
      // g1's segment moved to g2's directory, its header rewritten to name g2 (CRC matching).
      const to = join(dir, "groups", "g2");
      fs.mkdirSync(to, { mode: 0o700 });
      const b = fs.readFileSync(segPath(dir));
      eq(b.subarray(53, 55).toString(), "g1", "the header names g1");
      b.write("g2", 53);
      new DataView(b.buffer, b.byteOffset).setUint32(188, mwp.crc32c(b.subarray(0, 188)), true);
      fs.writeFileSync(join(to, "00000000000000000001.seg"), b, { mode: 0o600 });
      fs.rmSync(join(dir, "groups", "g1"), { recursive: true });
      const again = await mwp.openFileStore(dir);
      const e = await rejects(again.openGroup("g2"), "LOG_CORRUPT");
      check(e.message.includes("belongs to group g1"), e.message);
      await again.close();
      check(fsck(dir).code !== 0, "native fsck reports it");
    }],

    ["data files are 0600 and directories 0700", async () => {
      const root = tempDir("modes");
      const dir = join(root, "data");
      const { store } = await populated(mwp, dir, { snapshotEvery: 2 });
      await store.close();
      let files = 0;
      const walk = (d) => {
        eq(fs.statSync(d).mode & 0o777, 0o700, d);
        for (const n of fs.readdirSync(d)) {
          const p = join(d, n);
          if (fs.statSync(p).isDirectory()) walk(p);
          else {
            eq(fs.statSync(p).mode & 0o777, 0o600, p);
            files += 1;
          }
        }
      };
      walk(dir);
      check(files >= 3, "key, segment and snapshot checked");
    }],
  ];
}
