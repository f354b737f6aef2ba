// The Node/Deno file store in Deno 2: the cases of ../file-store-cases.js, through `node:fs`.
// Run: deno test --allow-read --allow-write --allow-run --allow-env js/test/deno/
import * as mwp from "../../src/deno.js";
import { cases } from "../file-store-cases.js";

for (const [name, fn] of cases(mwp)) Deno.test(name, fn);
