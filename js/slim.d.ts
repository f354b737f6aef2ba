// Types of `mwp/slim`: the whole API of `mwp`, and `init`, which must be awaited once before
// anything else is called (nothing is instantiated on import).
export * from "./index.js";

/**
 * Instantiates the WebAssembly module once; later calls resolve to the same instance. With no
 * argument it fetches `mwp_wasm_bg.wasm` next to the glue (what a bundler serves); or pass the
 * module's bytes, a compiled module, a `Response` or a URL.
 */
export function init(moduleOrPath?: BufferSource | WebAssembly.Module | Response | URL | string): Promise<unknown>;
