// Cross-host determinism in Node: the wasm core reproduces the native vectors byte for byte.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile, readdir } from "node:fs/promises";
import * as mwp from "../src/node.js";
import { checkVectors, VECTOR_NAMES } from "./vectors-check.js";

const dir = new URL("../../tests/vectors/", import.meta.url);

test("the vector list names every transcript in tests/vectors", async () => {
  const names = (await readdir(dir)).filter((n) => n.endsWith(".jsonl") && !n.endsWith(".out.jsonl")).map((n) => n.slice(0, -6)).sort();
  assert.deepEqual(names, VECTOR_NAMES);
});

test("vectors match the native results byte for byte", async () => {
  const results = await checkVectors(mwp, (f) => readFile(new URL(f, dir), "utf8"), VECTOR_NAMES);
  for (const r of results) assert.ok(r.ok, `${r.name}: ${r.problem}`);
});

test("transcripts run as `mwp transcript` runs them", async () => {
  const text = await readFile(new URL("lifecycle.jsonl", dir), "utf8");
  const { lines, failed } = mwp.runTranscript(text);
  assert.equal(failed, false);
  assert.equal(JSON.parse(lines[0]).outcome, "accepted");
});
