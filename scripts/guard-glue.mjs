// Makes wasm-bindgen's JS glue refuse an argument of the wrong type before anything enters the
// module. The glue copies arguments into wasm memory unchecked in a release build: a number
// where a string belongs reallocates a dangling pointer (a trap that leaves the module's
// allocator broken for every later call), a string where bytes belong is copied as zeros, a
// lone surrogate becomes U+FFFD, and an array-like with a huge `length` is allocated whole.
// Each is now an Error with `code: "MALFORMED"` (the package turns it into an MwpError) thrown
// while the module is untouched.
//
// Usage: node scripts/guard-glue.mjs path/to/mwp_wasm.js   (fails if the glue has changed shape)
import { readFileSync, writeFileSync } from "node:fs";

const path = process.argv[2];
let glue = readFileSync(path, "utf8");

/** The most items an array argument (commands, stored items) may have. */
const MAX_ARRAY_ITEMS = 1 << 20;

const helper = `
/** A wrong argument, refused before it enters the module (scripts/guard-glue.mjs). */
function mwpBadArgument(expected, arg) {
    let got = typeof arg;
    try {
        if (arg === null) got = "null";
        else if (Array.isArray(arg)) got = "an array";
        else if (typeof arg === "object") got = arg.constructor?.name ?? "an object";
    } catch {
        // A proxy whose traps throw: an object, and nothing more is asked of it.
    }
    const e = new Error(\`an argument must be \${expected}, got \${got}\`);
    e.name = "MwpError";
    e.code = "MALFORMED";
    e.details = { expected, got };
    return e;
}
`;

const checks = {
  "function passStringToWasm0(arg, malloc, realloc) {":
    `if (typeof arg !== "string") throw mwpBadArgument("a string", arg);
    if (!arg.isWellFormed()) throw mwpBadArgument("Unicode text (a string without lone surrogates)", arg);`,
  "function passArray8ToWasm0(arg, malloc) {": `if (!(arg instanceof Uint8Array)) throw mwpBadArgument("a Uint8Array", arg);`,
  "function passArrayF64ToWasm0(arg, malloc) {":
    `if (!(arg instanceof Float64Array) && !(Array.isArray(arg) && arg.length <= ${MAX_ARRAY_ITEMS} && arg.every((x) => typeof x === "number"))) throw mwpBadArgument("an array of numbers", arg);`,
  "function passArrayJsValueToWasm0(array, malloc) {":
    `if (!Array.isArray(array) || array.length > ${MAX_ARRAY_ITEMS}) throw mwpBadArgument("an array of at most ${MAX_ARRAY_ITEMS} items", array);`,
};

for (const [head, check] of Object.entries(checks)) {
  const at = glue.indexOf(head);
  // A glue without this converter has no export taking that type: nothing to check.
  if (at < 0) continue;
  if (glue.indexOf(head, at + 1) >= 0) throw new Error(`${path}: ${head} appears twice`);
  glue = `${glue.slice(0, at + head.length)}\n    ${check}${glue.slice(at + head.length)}`;
}
if (!glue.includes("function passStringToWasm0(arg, malloc, realloc) {")) throw new Error(`${path}: no string converter found; has the glue changed shape?`);
glue += helper;
writeFileSync(path, glue);
