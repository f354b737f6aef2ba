// Sealed audit logs in the Node/Deno file store, in Deno 2: the cases of
// ../file-store-audit-cases.js, through `node:fs`.
import * as mwp from "../../src/deno.js";
import { auditManifest, generateAuditIdentity, openAudit } from "../../src/file-store.js";
import { auditCases } from "../file-store-audit-cases.js";

const api = { ...mwp, auditManifest, generateAuditIdentity, openAudit };
for (const [name, fn] of auditCases(api)) Deno.test(name, fn);
