// Entry point for browsers (no bundler needed): fetches the WebAssembly module next to this
// file, and adds the IndexedDB stores.
import init from "../pkg/mwp_wasm.js";

await init({ module_or_path: new URL("../pkg/mwp_wasm_bg.wasm", import.meta.url) });

export * from "./api.js";
export { Client } from "./client.js";
export { IdbAgentStore, IdbAuthority, IdbReplica, deleteIdbStore } from "./idb.js";
export const runtime = "browser";
