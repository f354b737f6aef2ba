// Entry point for Deno 2: loads the WebAssembly module from the package's files.
import { initSync } from "../pkg/mwp_wasm.js";

initSync({ module: Deno.readFileSync(new URL("../pkg/mwp_wasm_bg.wasm", import.meta.url)) });

export * from "./api.js";
export { Client } from "./client.js";
export { openFileStore, FileStore, FileGroup, crc32c, groupDirName, groupFromDirName, generateAuditIdentity, openAudit, auditManifest } from "./file-store.js";
export { openAgentJournal, FileAgentJournal } from "./agent-journal.js";
export const runtime = "deno";
