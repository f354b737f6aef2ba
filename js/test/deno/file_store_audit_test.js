// Sealed audit logs in the Node/Deno file store, in Deno 2: the cases of
// ../file-store-audit-cases.js, through `node:fs`.
import * as mwp from "../../src/deno.js";
import { auditCases } from "../file-store-audit-cases.js";

for (const [name, fn] of auditCases(mwp)) Deno.test(name, fn);
