// Cross-host determinism in Deno 2: the wasm core reproduces the native vectors byte for byte.
// Run: deno test --allow-read js/test/deno/
import * as mwp from "../../src/deno.js";
import { checkVectors, VECTOR_NAMES } from "../vectors-check.js";
import { makeCommands } from "../helpers.js";

const dir = new URL("../../../tests/vectors/", import.meta.url);

Deno.test("the deno entry point is the one loaded", () => {
  if (mwp.runtime !== "deno") throw new Error(`runtime is ${mwp.runtime}`);
});

Deno.test("vectors match the native results byte for byte", async () => {
  const results = await checkVectors(mwp, (f) => Deno.readTextFile(new URL(f, dir)), VECTOR_NAMES);
  for (const r of results) if (!r.ok) throw new Error(`${r.name}: ${r.problem}`);
});

Deno.test("decisions, typed errors and replicas", () => {
  const c = makeCommands(mwp);
  const a = new mwp.Authority();
  a.submit(c.open(), 1000);
  a.submit(c.create("w1"), 1000);
  let caught;
  try {
    a.submit(c.claim("w1", "b1"), 1000);
  } catch (e) {
    caught = e;
  }
  if (!(caught instanceof mwp.AcceptError) || caught.code !== "CAS_REQUIRED") throw new Error(`unexpected ${caught}`);
  const r = new mwp.Replica("g1");
  const s = r.offerBatch(a.eventFrames());
  if (s.cursor !== 2 || r.stateHash() !== a.stateHash()) throw new Error("replica diverged");
});
