// Cross-host determinism in Deno 2: the wasm Authority and the Deno file store replay the
// checked-in stream (tests/determinism/) to the memory host's bytes.
import * as mwp from "../../src/deno.js";
import { checkDeterminism, fileStoreHost, memoryHost } from "../determinism-check.js";

const stream = JSON.parse(await Deno.readTextFile(new URL("../../../tests/determinism/stream.json", import.meta.url)));

Deno.test("the wasm Authority makes the memory host's events and snapshots", async () => {
  const r = await checkDeterminism(mwp, stream, memoryHost(mwp, stream));
  if (!r.ok || r.snapshots !== 3) throw new Error(r.problem ?? `${r.snapshots} snapshots`);
});

Deno.test("the Deno file store makes the memory host's events and snapshot files", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mwp-determinism-" });
  try {
    const listDir = async (p) => {
      const names = [];
      for await (const e of Deno.readDir(p)) names.push(e.name);
      return names;
    };
    const host = await fileStoreHost(mwp, stream, dir, { readFile: (p) => Deno.readFile(p), listDir });
    try {
      const r = await checkDeterminism(mwp, stream, host);
      if (!r.ok || r.snapshots !== 3) throw new Error(r.problem ?? `${r.snapshots} snapshots`);
    } finally {
      await host.store.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
