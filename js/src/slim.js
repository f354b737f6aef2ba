// Entry point for bundlers and custom loaders: the same API as the others, but nothing is
// instantiated on import. Call `await init()` once before anything else: with no argument it
// fetches `mwp_wasm_bg.wasm` next to the glue (what a bundler's asset handling serves); or
// pass the module's bytes, a `WebAssembly.Module`, a `Response` or a URL.
import wasmInit from "../pkg/mwp_wasm.js";

let ready;

/**
 * Instantiates the WebAssembly module, once: later calls resolve to the same instance.
 * @param {BufferSource | WebAssembly.Module | Response | URL | string} [moduleOrPath]
 */
export function init(moduleOrPath) {
  ready ??= wasmInit(moduleOrPath === undefined ? undefined : { module_or_path: moduleOrPath }).catch((e) => {
    ready = undefined;
    throw e;
  });
  return ready;
}

export * from "./api.js";
export { Client } from "./client.js";
export const runtime = "slim";
