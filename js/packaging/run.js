// Packaging test: imports the package the way a user would. `npm pack`, install the tarball
// into an empty temp project, then import it from Node ESM, from Deno 2 (resolving "mwp"
// through the project's node_modules) and from a plain HTML page in headless Chromium
// (an import map, no bundler), and "mwp/slim" with an explicit init() from Node. Prints one
// line per check and `N passed, N failed`.
// Usage: node js/packaging/run.js   (MWP_TOOLS_DIR: where deno and playwright-core live)
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync, readdirSync } from "node:fs";
import { tmpdir, homedir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { serveStatic, launchChromium, runPage } from "../test/static-server.js";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));
const tools = process.env.MWP_TOOLS_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "mwp-wasm-tools");
const deno = process.env.DENO ?? join(tools, "node_modules/.bin/deno");
const work = mkdtempSync(join(tmpdir(), "mwp-pack-"));
let passed = 0;
let failed = 0;
const report = (name, ok, detail = "") => {
  console.log(`${ok ? "ok" : "FAIL"} - packaging: ${name}${ok ? "" : `: ${detail}`}`);
  ok ? passed++ : failed++;
};
const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

// What every runtime checks after importing: the entry point, a decision, a typed error,
// and that the packed wasm replays a log to the same state hash as a replica.
const smoke = `
const c = (actor, action, body) => mwp.signCommand({ org: "acme", group: "g1", actor, action, session: 1, body }, mwp.transcriptSecretKey(actor));
const pub = (a) => mwp.publicKeyOf(mwp.transcriptSecretKey(a));
const a = new mwp.Authority();
a.submit(c("alice", "open", { type: "open_group", mission: "m", title: "t", authority_key: pub("@authority"),
  members: [{ actor: "alice", role: "owner", key: pub("alice") }] }), 1000);
let code = "none";
try { a.submit(c("alice", "open2", { type: "archive", reason: {} }), 1000); a.submit(c("alice", "x", { type: "archive", reason: {} }), 1000); }
catch (e) { code = e instanceof mwp.MwpError ? e.code : "untyped " + e; }
const r = new mwp.Replica("g1");
r.offerBatch(a.eventFrames());
const result = { runtime: mwp.runtime, seq: a.seq, code, same: r.stateHash() === a.stateHash() };
`;
const expected = (runtime) => JSON.stringify({ runtime, seq: 2, code: "GROUP_ARCHIVED", same: true });

// Node and Deno: the file store from the installed package writes a data directory and
// reopens it to the same state hash.
const storeSmoke = `import * as mwp from "mwp";
import process from "node:process";
const dir = process.argv[process.argv.length - 1];
const key = (a) => mwp.transcriptSecretKey(a);
const pub = (a) => mwp.publicKeyOf(key(a));
let store = await mwp.openFileStore(dir, { authorityKey: key("@authority") });
const [r] = await store.submit(mwp.signCommand({ org: "acme", group: "g1", actor: "alice", action: "open", session: 1,
  body: { type: "open_group", mission: "m", title: "t", authority_key: pub("@authority"), members: [{ actor: "alice", role: "owner", key: pub("alice") }] } },
  key("alice")), 1000);
const hash = await store.stateHash("g1");
await store.close();
store = await mwp.openFileStore(dir);
console.log(JSON.stringify({ outcome: r.outcome, groups: await store.groups(), same: (await store.stateHash("g1")) === hash }));
await store.close();
`;
const storeExpected = JSON.stringify({ outcome: "accepted", groups: ["g1"], same: true });

try {
  const packed = run("npm", ["pack", "--silent", "--pack-destination", work], pkgDir).trim().split("\n").pop();
  const tarball = join(work, packed);
  const files = run("tar", ["-tzf", tarball], work).split("\n").filter(Boolean);
  report("tarball holds the wasm module, the glue, the entry points and the types",
    ["package/pkg/mwp_wasm_bg.wasm", "package/pkg/mwp_wasm.js", "package/src/node.js", "package/src/deno.js", "package/src/browser.js", "package/src/file-store.js", "package/src/slim.js", "package/src/run-agent.js", "package/index.d.ts", "package/slim.d.ts", "package/README.md"].every((f) => files.includes(f)),
    files.join(" "));
  report("tarball ships no tests and no Rust sources", !files.some((f) => f.includes("/test/") || f.endsWith(".rs")), files.join(" "));

  const proj = join(work, "project");
  run("mkdir", ["-p", proj]);
  writeFileSync(join(proj, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  run("npm", ["install", "--silent", "--no-audit", "--no-fund", tarball], proj);
  report("npm installs the tarball into an empty project", readdirSync(join(proj, "node_modules/mwp")).includes("package.json"));

  writeFileSync(join(proj, "node-test.mjs"), `import * as mwp from "mwp";\n${smoke}\nconsole.log(JSON.stringify(result));\n`);
  const nodeOut = run("node", ["node-test.mjs"], proj).trim();
  report("Node ESM: import \"mwp\"", nodeOut === expected("node"), nodeOut);

  writeFileSync(join(proj, "slim-test.mjs"), `import * as mwp from "mwp/slim";
import { readFileSync } from "node:fs";
await mwp.init(readFileSync(new URL("./node_modules/mwp/pkg/mwp_wasm_bg.wasm", import.meta.url)));
${smoke}
console.log(JSON.stringify(result));
`);
  const slimOut = run("node", ["slim-test.mjs"], proj).trim();
  report("Node ESM: import \"mwp/slim\", then an explicit init()", slimOut === expected("slim"), slimOut);

  writeFileSync(join(proj, "deno-test.mjs"), `import * as mwp from "mwp";\n${smoke}\nconsole.log(JSON.stringify(result));\n`);
  const denoOut = run(deno, ["run", "--quiet", "--allow-read", "--no-lock", "deno-test.mjs"], proj).trim();
  report("Deno 2: import \"mwp\" through node_modules", denoOut === expected("deno"), denoOut);

  writeFileSync(join(proj, "store-test.mjs"), storeSmoke);
  const nodeStore = run("node", ["store-test.mjs", join(work, "node-data")], proj).trim();
  report("Node: openFileStore writes, reopens, same state hash", nodeStore === storeExpected, nodeStore);
  const denoStore = run(deno, ["run", "--quiet", "--no-check", "--allow-read", "--allow-write", "--allow-env", "--no-lock", "store-test.mjs", join(work, "deno-data")], proj).trim();
  report("Deno 2: openFileStore writes, reopens, same state hash", denoStore === storeExpected, denoStore);

  writeFileSync(join(proj, "index.html"), `<!doctype html><meta charset="utf-8"><title>consumer</title>
<script type="importmap">{"imports": {"mwp": "./node_modules/mwp/src/browser.js"}}</script>
<script type="module">
import * as mwp from "mwp";
${smoke}
window.__result = result; window.__done = true;
</script>`);
  const server = await serveStatic(proj);
  const browser = await launchChromium(tools);
  try {
    const { result, errors } = await runPage(browser, `${server.url}/index.html`);
    const got = JSON.stringify(result);
    report("Chromium: plain HTML page, import map, no bundler", got === expected("browser") && errors.length === 0, `${got} ${errors.join("; ")}`);
  } finally {
    await browser.close();
    await server.close();
  }
} catch (e) {
  report("no exception", false, `${e.message}\n${e.stderr ?? ""}`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
console.log(`packaging: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
