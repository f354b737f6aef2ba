// Makes wasm-bindgen's JS glue refuse an export's argument of the wrong type before anything
// enters the module. The glue copies arguments into wasm memory unchecked in a release build:
// a number where a string belongs reallocates a dangling pointer (a trap that leaves the
// module's allocator broken for every later call), a string where bytes belong is copied as
// zeros, a lone surrogate becomes U+FFFD, and an array-like with a huge `length` is allocated
// whole. Each is now an Error with `code: "MALFORMED"` (the package turns it into an MwpError)
// thrown while the module is untouched.
//
// Only the exports' wrappers (the glue before `__wbg_get_imports`) call the checked
// converters: the imports, through which the module asks JavaScript for a string, keep the
// unchecked ones, so that nothing is ever thrown through the module's frames.
//
// Usage: node scripts/guard-glue.mjs path/to/mwp_wasm.js   (fails if the glue has changed shape)
import { readFileSync, writeFileSync } from "node:fs";

const path = process.argv[2];
const glue = readFileSync(path, "utf8");
const fail = (what) => {
  throw new Error(`${path}: ${what}; has wasm-bindgen's glue changed shape?`);
};

/** The most items an array argument (commands, stored items) may have. */
const MAX_ARRAY_ITEMS = 1 << 20;

/** Each converter of the glue, and the check its exports' arguments pass first. */
const checks = {
  passStringToWasm0: `if (typeof arg !== "string") throw mwpBadArgument("a string", arg);
    if (typeof arg.isWellFormed === "function" ? !arg.isWellFormed() : /\\p{Cs}/u.test(arg)) throw mwpBadArgument("Unicode text (a string without lone surrogates)", arg);`,
  passArray8ToWasm0: `if (!(arg instanceof Uint8Array)) throw mwpBadArgument("a Uint8Array", arg);`,
  passArrayF64ToWasm0: `if (!(arg instanceof Float64Array) && !(Array.isArray(arg) && arg.length <= ${MAX_ARRAY_ITEMS} && arg.every((x) => typeof x === "number"))) throw mwpBadArgument("an array of numbers", arg);`,
  passArrayJsValueToWasm0: `if (!Array.isArray(arg) || arg.length > ${MAX_ARRAY_ITEMS}) throw mwpBadArgument("an array of at most ${MAX_ARRAY_ITEMS} items", arg);`,
};

const split = glue.indexOf("function __wbg_get_imports(");
if (split < 0) fail("no __wbg_get_imports");
let exports = glue.slice(0, split);
const rest = glue.slice(split);
if (!exports.includes("passStringToWasm0(")) fail("no export takes a string");

let added = "";
for (const [name, check] of Object.entries(checks)) {
  // A glue without this converter has no export taking that type: nothing to check.
  if (!glue.includes(`function ${name}(`)) continue;
  if (exports.includes(`function ${name}(`)) fail(`${name} is defined among the exports`);
  const checked = `${name}Checked`;
  exports = exports.split(`${name}(`).join(`${checked}(`);
  added += `
/** ${name}, for an export's argument: refused unless of the right type (scripts/guard-glue.mjs). */
function ${checked}(arg, ...rest) {
    ${check}
    return ${name}(arg, ...rest);
}
`;
}

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

writeFileSync(path, exports + rest + added + helper);
