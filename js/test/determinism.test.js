// Cross-host determinism in Node: the wasm Authority and the Node file store replay the
// checked-in stream (tests/determinism/) to the memory host's bytes.
import test from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as mwp from "../src/node.js";
import { checkDeterminism, fileStoreHost, memoryHost } from "./determinism-check.js";

const stream = JSON.parse(await readFile(new URL("../../tests/determinism/stream.json", import.meta.url), "utf8"));

test("the wasm Authority makes the memory host's events and snapshots", async () => {
  const r = await checkDeterminism(mwp, stream, memoryHost(mwp, stream));
  assert.ok(r.ok, r.problem);
  assert.equal(r.snapshots, 3);
});

test("the Node file store makes the memory host's events and snapshot files", async () => {
  const dir = await mkdtemp(join(tmpdir(), "mwp-determinism-"));
  try {
    const host = await fileStoreHost(mwp, stream, dir, { readFile: (p) => readFile(p).then((b) => new Uint8Array(b)), listDir: readdir });
    try {
      const r = await checkDeterminism(mwp, stream, host);
      assert.ok(r.ok, r.problem);
      assert.equal(r.snapshots, 3);
    } finally {
      await host.store.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
