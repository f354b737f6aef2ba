// Static exports in Deno 2: `Replica.fromStatic` through Deno's fetch against a plain static
// server, and `offerHead` (the cases of ../static-export.js).
// Run: deno test --allow-read --allow-write --allow-net --allow-env js/test/deno/
import * as mwp from "../../src/deno.js";
import { staticCases } from "../static-export.js";

for (const [name, fn] of staticCases(mwp)) Deno.test(name, fn);
