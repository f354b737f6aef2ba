// Sealed audit logs in the Node/Deno file store, in Node, with the native `mwp` binary
// reading what Node wrote ($MWP_BIN, else target/debug/mwp). The same cases run in Deno
// without the native checks (deno/file_store_audit_test.js).
import { test } from "node:test";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import * as mwp from "../src/node.js";
import { auditCases } from "./file-store-audit-cases.js";

const repo = join(import.meta.dirname, "..", "..");
const bin = process.env.MWP_BIN ?? join(repo, process.env.CARGO_TARGET_DIR ?? "target", "debug", "mwp");
const native = (args) => execFileSync(bin, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

for (const [name, fn] of auditCases(mwp, native)) test(name, fn);
