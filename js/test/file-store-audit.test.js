// Sealed audit logs in the Node/Deno file store, in Node (the same cases run in Deno:
// deno/file_store_audit_test.js).
import { test } from "node:test";
import * as mwp from "../src/node.js";
import { auditManifest, generateAuditIdentity, openAudit } from "../src/file-store.js";
import { auditCases } from "./file-store-audit-cases.js";

const api = { ...mwp, auditManifest, generateAuditIdentity, openAudit };
for (const [name, fn] of auditCases(api)) test(name, fn);
