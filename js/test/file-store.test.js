// The Node/Deno file store in Node (the same cases run in Deno: deno/file_store_test.js).
// Cross-format cases need the native binary: $MWP_BIN or target/debug/mwp.
import { test } from "node:test";
import * as mwp from "../src/node.js";
import { cases } from "./file-store-cases.js";

for (const [name, fn] of cases(mwp)) test(name, fn);
