// The embedded dashboard runs the npm package's `Client` over the dashboard's module (wasm
// feature `dashboard`, not `full`: docs/decisions.md, "The dashboard's module"). A wasm function
// the client calls that is not in that module is `undefined` there: every server error would be
// misread, and a live tail's error would throw a TypeError.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import test from "node:test";

const root = new URL("../../", import.meta.url);

test("every wasm function the Client calls is in the dashboard's module", () => {
  const client = readFileSync(new URL("js/src/client.js", root), "utf8");
  const glue = readFileSync(new URL("host-native/dashboard/pkg/mwp_wasm.js", root), "utf8");
  const exported = new Set([...glue.matchAll(/^export (?:function|class) (\w+)/gm)].map((m) => m[1]));
  const called = [...new Set([...client.matchAll(/\bw\.(\w+)\(/g)].map((m) => m[1]))].sort();
  assert.ok(called.includes("errorOfAnswer"), `the client's wasm calls: ${called}`);
  assert.deepEqual(called.filter((name) => !exported.has(name)), [], "missing from host-native/dashboard/pkg/mwp_wasm.js");
});
