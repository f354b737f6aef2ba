// Static exports for the tests (SPEC §8b), made with the package's own Authority and the
// core's planner (`planExport`) and written to a folder a plain static server can serve, and
// the cases that read them back through `Replica.fromStatic`: run by Node (static.test.js)
// and Deno (deno/static_test.js).
import { mkdir, readFile, writeFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { makeCommands } from "./helpers.js";
import { serveStatic } from "./static-server.js";

/**
 * Writes an export of a group to `dir`: `open`, then `items` work items (each after the
 * previous one's, so the graph has edges), a signed snapshot after `snapshotAt` events, in
 * chunks of `chunkEvents`; with `claim`, bob then claims the first item. Returns `{authority, authorityKey, head, index, group, org}`.
 * `group` and `tag` make another history of the same group (a forged one).
 */
export async function writeExport(mwp, dir, { items = 12, snapshotAt = 5, chunkEvents = 4, tag = "w", at = 1_700_000_000_000, claim = false } = {}) {
  const c = makeCommands(mwp);
  const secretKey = c.key("@authority");
  const authority = new mwp.Authority({ secretKey });
  let snapshot;
  authority.submit(c.open(), at);
  for (let i = 0; i < items; i++) {
    authority.submit(c.create(`${tag}${i}`, `create-${tag}${i}`, i === 0 ? [] : [`${tag}${i - 1}`]), at + i + 1);
    if (authority.seq === snapshotAt) snapshot = authority.snapshot();
  }
  if (claim) authority.submit(c.claim(`${tag}0`, "claim-0", 1), at + items + 1);
  const { org, group } = authority.state();
  const head = mwp.signHead(org, group, authority.seq, authority.head, at + 10_000, secretKey);
  const x = mwp.planExport(authority.eventFrames(0), { head, authorityKey: c.pub("@authority"), snapshot, chunkEvents });
  for (const f of x.files) {
    await mkdir(join(dir, dirname(f.path)), { recursive: true });
    await writeFile(join(dir, f.path), f.bytes);
  }
  await writeFile(join(dir, "head.json"), x.headFile);
  return { authority, authorityKey: c.pub("@authority"), secretKey, head, index: x.index, org, group };
}

/** Rewrites `head.json` in `dir` with another signed head. */
export async function replaceHead(dir, head) {
  const file = JSON.parse(await readFile(join(dir, "head.json"), "utf8"));
  await writeFile(join(dir, "head.json"), JSON.stringify({ ...file, head }));
}

/** Flips one bit of byte `at` (default: the middle) of `dir/path`. */
export async function flipByte(dir, path, at) {
  const bytes = await readFile(join(dir, path));
  bytes[at ?? bytes.length >> 1] ^= 0x01;
  await writeFile(join(dir, path), bytes);
}

/** A fresh temp folder served by a plain static server: `{dir, url, close}`. */
async function served() {
  const dir = await mkdtemp(join(tmpdir(), "mwp-static-"));
  const server = await serveStatic(dir);
  return { dir, url: `${server.url}/`, close: async () => { await server.close(); await rm(dir, { recursive: true, force: true }); } };
}

const assert = (ok, message) => {
  if (!ok) throw new Error(message);
};
/** Runs `fn`, expecting it to reject; returns the error. */
async function rejects(fn) {
  try {
    await fn();
  } catch (e) {
    return e;
  }
  throw new Error("expected an error, none was thrown");
}

/** The `fromStatic` and `offerHead` cases as `[name, async fn]`, for Node's and Deno's runners. */
export function staticCases(mwp) {
  const cases = [];
  const test = (name, fn) => cases.push([name, fn]);

  test("fromStatic reads an export over HTTP, verified through its head under the pinned key", async () => {
    const s = await served();
    try {
      const x = await writeExport(mwp, s.dir);
      for (const start of ["genesis", "snapshot"]) {
        const files = [];
        const seqs = [];
        const r = await mwp.Replica.fromStatic(s.url, {
          authorityKey: x.authorityKey, group: "g1", start,
          onProgress: (p, f) => files.push([f, p.verifiedThrough]),
          onEvents: (events) => seqs.push(...events.map((e) => e.seq)),
        });
        const from = start === "genesis" ? 1 : 6;
        assert(seqs.join() === Array.from({ length: x.head.seq - from + 1 }, (_, i) => from + i).join(), `${start}: events ${seqs.join()}`);
        assert(r.cursor === x.head.seq && r.verifiedThrough === x.head.seq, `${start}: cursor ${r.cursor}, verified through ${r.verifiedThrough}`);
        assert(r.stateHash() === x.authority.stateHash(), `${start}: state differs`);
        assert(r.verifiedHead?.seq === x.head.seq && r.verifiedHead.at === x.head.at, `${start}: verified head ${JSON.stringify(r.verifiedHead)}`);
        assert(!r.isProvisional(x.head.seq) && r.isProvisional(x.head.seq + 1), `${start}: provisional marks`);
        assert(files[0][0] === "head.json" && files.at(-1)[1] === x.head.seq, `${start}: progress ${JSON.stringify(files)}`);
        const snapshots = files.filter(([f]) => f.startsWith("snapshots/")).length;
        assert(snapshots === (start === "snapshot" ? 1 : 0), `${start}: ${snapshots} snapshot(s) read`);
      }
    } finally {
      await s.close();
    }
  });

  test("planExport again adds only new chunks; the earlier files stay byte-identical and read back", async () => {
    const c = makeCommands(mwp);
    const secretKey = c.key("@authority");
    const authority = new mwp.Authority({ secretKey });
    const at = 1_700_000_000_000;
    authority.submit(c.open(), at);
    for (let i = 0; i < 6; i++) authority.submit(c.create(`w${i}`, `create-w${i}`), at + i + 1);
    const { org, group } = authority.state();
    const plan = (previous, after) => mwp.planExport(authority.eventFrames(after), {
      head: mwp.signHead(org, group, authority.seq, authority.head, at + 100, secretKey),
      authorityKey: c.pub("@authority"), previous, chunkEvents: 4,
    });
    const first = plan(undefined, 0);
    assert(first.files.map((f) => f.path).join() === plan(undefined, 0).files.map((f) => f.path).join(), "the same log plans the same files");
    const firstSeq = authority.seq;
    for (let i = 6; i < 11; i++) authority.submit(c.create(`w${i}`, `create-w${i}`), at + i + 1);
    const second = plan(first.index, firstSeq);
    const old = new Set(first.files.map((f) => f.path));
    const added = second.files.map((f) => f.path);
    assert(added.every((f) => !old.has(f)), `re-planned an old file: ${added.join()}`);
    assert(added.filter((f) => f.startsWith("chunks/")).length === 2 && added.filter((f) => f.startsWith("index/")).length === 1, added.join());
    const oldChunks = JSON.stringify(first.index.chunks);
    assert(JSON.stringify(second.index.chunks.slice(0, first.index.chunks.length)) === oldChunks, "the new index lists the old chunks unchanged");
    assert(second.index.chunks[first.index.chunks.length].first === firstSeq + 1, "the new chunks start after the old export");
    // Both runs' files together, under the second head.json: read back whole.
    const files = new Map([...first.files, ...second.files].map((f) => [f.path, f.bytes]));
    files.set("head.json", second.headFile);
    const r = await mwp.Replica.fromStatic("https://mirror.invalid/g1/", {
      authorityKey: c.pub("@authority"), group: "g1", start: "genesis",
      fetch: async (url) => {
        const bytes = files.get(new URL(url).pathname.replace("/g1/", ""));
        return bytes ? new Response(bytes) : new Response("", { status: 404 });
      },
    });
    assert(r.cursor === authority.seq && r.verifiedThrough === authority.seq && r.stateHash() === authority.stateHash(), `cursor ${r.cursor}`);
  });

  test("planExport reads the previous index as every host reads one: what it lists must hold together", async () => {
    const c = makeCommands(mwp);
    const secretKey = c.key("@authority");
    const authority = new mwp.Authority({ secretKey });
    const at = 1_700_000_000_000;
    authority.submit(c.open(), at);
    for (let i = 0; i < 6; i++) authority.submit(c.create(`w${i}`, `create-w${i}`), at + i + 1);
    const { org, group } = authority.state();
    const plan = (previous, after) => mwp.planExport(authority.eventFrames(after), {
      head: mwp.signHead(org, group, authority.seq, authority.head, at + 100, secretKey),
      authorityKey: c.pub("@authority"), previous, chunkEvents: 4,
    });
    const first = plan(undefined, 0);
    const firstSeq = authority.seq;
    authority.submit(c.create("w6", "create-w6"), at + 7);
    const refused = (previous) => {
      try {
        plan(previous, firstSeq);
      } catch (e) {
        return e;
      }
      throw new Error("expected an error, none was thrown");
    };
    // Chunks that do not start at seq 1: an index of a history with a hole.
    const gap = refused({ ...first.index, chunks: first.index.chunks.slice(1) });
    assert(gap instanceof mwp.ExportError && gap.code === "MALFORMED" && gap.message.startsWith("previous index: chunk chunks/") && gap.message.endsWith("expected to start at 1"), `${gap.code} ${gap.message}`);
    const text = JSON.stringify(first.index);
    assert(text.includes(`"seq":${firstSeq}`), text);
    const range = refused(text.replace(`"seq":${firstSeq}`, '"seq":-9223372036854775809'));
    assert(range.code === "MALFORMED" && range.message.includes("integer out of range: -9223372036854775809 is not from"), `${range.code} ${range.message}`);
    assert(plan(first.index, firstSeq).index.seq === authority.seq, "the index as planned is taken");
  });

  test("fromStatic needs the pinned key and never reads one from the export", async () => {
    const e = await rejects(() => mwp.Replica.fromStatic("http://127.0.0.1:9/", { group: "g1" }));
    assert(e instanceof mwp.ExportError && e.code === "MALFORMED" && /authorityKey/.test(e.message), String(e));
  });

  test("fromStatic refuses a head signed by another key (HEAD_INVALID)", async () => {
    const s = await served();
    try {
      const x = await writeExport(mwp, s.dir);
      const mallory = mwp.transcriptSecretKey("mallory");
      await replaceHead(s.dir, mwp.signHead(x.org, x.group, x.head.seq, x.head.id, x.head.at, mallory));
      const e = await rejects(() => mwp.Replica.fromStatic(s.url, { authorityKey: x.authorityKey, group: "g1" }));
      assert(e instanceof mwp.ExportError && e.code === "HEAD_INVALID" && e.details.check === "signature" && e.details.file === "head.json", `${e.code} ${JSON.stringify(e.details)}`);
      // And the export's own key is not trusted: pinning mallory's key fails the same way.
      const e2 = await rejects(() => mwp.Replica.fromStatic(s.url, { authorityKey: x.authorityKey.replace(/^./, (c) => (c === "0" ? "1" : "0")), group: "g1" }));
      assert(e2.code === "HEAD_INVALID" || e2.code === "MALFORMED", String(e2));
    } finally {
      await s.close();
    }
  });

  test("fromStatic refuses a chunk with one flipped byte, naming the file", async () => {
    const s = await served();
    try {
      const x = await writeExport(mwp, s.dir);
      const chunk = x.index.chunks[1].file;
      await flipByte(s.dir, chunk);
      const e = await rejects(() => mwp.Replica.fromStatic(s.url, { authorityKey: x.authorityKey, group: "g1", start: "genesis" }));
      assert(e instanceof mwp.ExportError && e.code === "LOG_CORRUPT" && e.details.file === chunk && e.message.includes(chunk), `${e.code} ${e.message}`);
    } finally {
      await s.close();
    }
  });

  test("fromStatic names a file the host does not have (NOT_FOUND)", async () => {
    const s = await served();
    try {
      const x = await writeExport(mwp, s.dir);
      await rm(join(s.dir, x.index.chunks[0].file));
      const e = await rejects(() => mwp.Replica.fromStatic(s.url, { authorityKey: x.authorityKey, group: "g1", start: "genesis" }));
      assert(e.code === "NOT_FOUND" && e.details.file === x.index.chunks[0].file && e.details.status === 404, `${e.code} ${JSON.stringify(e.details)}`);
    } finally {
      await s.close();
    }
  });

  test("fromStatic stops reading a file past the size the reader accepts (an endless head.json)", async () => {
    let sent = 0;
    const endless = () => new Response(new ReadableStream({
      pull(c) {
        sent += 65536;
        c.enqueue(new Uint8Array(65536).fill(32));
      },
    }));
    const e = await rejects(() => mwp.Replica.fromStatic("https://mirror.invalid/x/", { authorityKey: "ab".repeat(32), group: "g1", fetch: endless }));
    assert(e.code === "MALFORMED" && e.details.file === "head.json" && /over the 65536 bytes/.test(e.message), `${e.code} ${e.message}`);
    // The stream may pull a chunk or two ahead of the reader; what matters is that it stops.
    assert(sent <= 4 * 65536, `read ${sent} bytes of an endless file`);
    assert(mwp.StaticReader.maxFileBytes("chunks/x.cbor") > 1 << 20, "a chunk may hold 1 MiB and one event");
    const declared = () => new Response("{}", { headers: { "content-length": String(1 << 30) } });
    const d = await rejects(() => mwp.Replica.fromStatic("https://mirror.invalid/x/", { authorityKey: "ab".repeat(32), group: "g1", fetch: declared }));
    assert(d.code === "MALFORMED" && d.details.file === "head.json", `${d.code} ${d.message}`);
  });

  test("fromStatic refuses a forged history served under the honest head (FORK)", async () => {
    const honest = await mkdtemp(join(tmpdir(), "mwp-honest-"));
    const s = await served();
    try {
      const h = await writeExport(mwp, honest);
      await writeExport(mwp, s.dir, { tag: "forged" });
      await replaceHead(s.dir, h.head);
      const e = await rejects(() => mwp.Replica.fromStatic(s.url, { authorityKey: h.authorityKey, group: "g1", start: "genesis" }));
      assert(e instanceof mwp.ExportError && e.code === "FORK", `${e.code} ${e.message}`);
    } finally {
      await s.close();
      await rm(honest, { recursive: true, force: true });
    }
  });

  test("fromStatic stops when its signal aborts", async () => {
    const s = await served();
    try {
      const x = await writeExport(mwp, s.dir);
      const ac = new AbortController();
      const e = await rejects(() => mwp.Replica.fromStatic(s.url, { authorityKey: x.authorityKey, group: "g1", signal: ac.signal, onProgress: () => ac.abort() }));
      assert(e?.name === "AbortError", String(e));
    } finally {
      await s.close();
    }
  });

  test("offerHead: events stay provisional until a head verifies them; a conflicting head is a FORK with a proof", async () => {
    const dir = await mkdtemp(join(tmpdir(), "mwp-heads-"));
    try {
      const x = await writeExport(mwp, dir, { items: 6 });
      const r = new mwp.Replica("g1");
      r.offerBatch(x.authority.eventFrames(0, 4));
      assert(r.verifiedThrough === 0 && r.isProvisional(1) && r.verifiedHead === null, "nothing verified before a head");
      const at4 = mwp.signHead(x.org, x.group, 4, r.head, 5, x.secretKey);
      const v = r.offerHead(at4, x.authorityKey);
      assert(v.result === "verified" && v.verifiedThrough === 4 && !r.isProvisional(4), JSON.stringify(v));
      // A head ahead of the cursor is checked when its seq is applied.
      const a = r.offerHead(JSON.stringify(x.head), x.authorityKey);
      assert(a.result === "ahead" && a.verifiedThrough === 4, JSON.stringify(a));
      r.offerBatch(x.authority.eventFrames(4));
      assert(r.cursor === x.head.seq && r.isProvisional(x.head.seq) === (r.verifiedThrough < x.head.seq), "consistent marks");
      r.offerHead(x.head, x.authorityKey);
      assert(r.verifiedThrough === x.head.seq && !r.isProvisional(x.head.seq), `verified through ${r.verifiedThrough}`);
      // Another key: HEAD_INVALID, nothing changes.
      const bad = mwp.signHead(x.org, x.group, 4, at4.id, 5, mwp.transcriptSecretKey("mallory"));
      const e1 = (() => { try { r.offerHead(bad, x.authorityKey); } catch (e) { return e; } })();
      assert(e1 instanceof mwp.OfferError && e1.code === "HEAD_INVALID" && e1.details.check === "signature", String(e1));
      // The authority signing another id at a verified seq: FORK, with a proof anyone can check.
      const other = mwp.signHead(x.org, x.group, x.head.seq, "ab".repeat(32), 6, x.secretKey);
      const e2 = (() => { try { r.offerHead(other, x.authorityKey); } catch (e) { return e; } })();
      assert(e2 instanceof mwp.OfferError && e2.code === "FORK" && Array.isArray(e2.details.heads) && typeof e2.details.proof === "string", `${e2?.code} ${JSON.stringify(e2?.details)}`);
      const fork = mwp.verifyForkProof(e2.details.proof, x.authorityKey);
      assert(fork.kind === "heads" && fork.seq === x.head.seq && fork.group === "g1", JSON.stringify(fork));
      const e3 = (() => { try { mwp.verifyForkProof(e2.details.proof, mwp.publicKeyOf(mwp.transcriptSecretKey("mallory"))); } catch (e) { return e; } })();
      assert(e3?.code === "MALFORMED", String(e3));
      assert(r.verifiedThrough === x.head.seq, "nothing changed");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  return cases;
}
