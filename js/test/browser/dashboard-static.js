// The dashboard over a static export (SPEC §8b) in headless Chromium: one plain static file
// server serves the dashboard's files and an export; `index.html?source=…&authority=…` reads
// the Group with `Replica.fromStatic`, verified through the export's signed head under the
// key in the address, without a single `/v1/` request, and shows the history, the work graph
// and the tables with the line "verified through seq N, signed at T". The same export with
// one chunk byte flipped, or a forged history under the honest head, shows the error phase.
// Then against a stand-in server: the heads of the pages and of the tail verify the live
// view, and a second head for a verified seq with another id stops it with a FORK whose proof
// the page offers for download (checked with `verifyForkProof`). axe-core finds no serious
// or critical violation. Screenshot of the demo's export: docs/dashboard-static.png with
// MWP_UPDATE_SCREENSHOT=1, else $MWP_STATIC_SCREENSHOT (default $TMPDIR/mwp-dashboard-static.png).
// First the real thing: `mwp demo --exit` runs the mission into a folder, `mwp export` writes
// its static export, and the dashboard reads it from the plain host (this is the screenshot);
// the same export with one chunk byte flipped is refused, by the dashboard and by
// `mwp verify --source`. The binary is $MWP_BIN (default target/debug/mwp). The other
// exports are planned by the core through the package (`planExport`, test/static-export.js).
// Prints `N passed, N failed`.
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { homedir, tmpdir } from "node:os";
import { cp, mkdir, mkdtemp, readdir, rm, symlink } from "node:fs/promises";
import { execFileSync } from "node:child_process";
import * as mwp from "../../src/node.js";
import { makeCommands } from "../helpers.js";
import { startMockServer } from "../mock-server.js";
import { axeCheck } from "../axe.js";
import { launchChromium, newPage, serveStatic } from "../static-server.js";
import { flipByte, replaceHead, writeExport } from "../static-export.js";

const tools = process.env.MWP_TOOLS_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "mwp-wasm-tools");
const dashboard = fileURLToPath(new URL("../../dashboard/", import.meta.url));
const docs = fileURLToPath(new URL("../../../docs/", import.meta.url));
let passed = 0;
let failed = 0;
const check = (name, ok, detail = "") => {
  console.log(`${ok ? "ok" : "FAIL"} - dashboard (static): ${name}${ok ? "" : `: ${detail}`}`);
  ok ? passed++ : failed++;
};

// One folder, one plain static server: the dashboard's files and three exports.
const root = await mkdtemp(join(tmpdir(), "mwp-dashboard-static-"));
await symlink(dashboard, join(root, "dashboard"));
const x = await writeExport(mwp, join(root, "export"), { claim: true });
await cp(join(root, "export"), join(root, "flipped"), { recursive: true });
const chunk = x.index.chunks[1].file;
await flipByte(join(root, "flipped"), chunk);
await mkdir(join(root, "forged"));
await writeExport(mwp, join(root, "forged"), { tag: "forged", claim: true });
await replaceHead(join(root, "forged"), x.head);
// The demo's mission, exported by `mwp export` from its file store.
const bin = process.env.MWP_BIN ?? fileURLToPath(new URL("../../../target/debug/mwp", import.meta.url));
const run = (args) => JSON.parse(execFileSync(bin, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim().split("\n").pop());
const summary = run(["demo", "--exit", "--json", "--addr", "127.0.0.1:0", "--data", join(root, "demo-data")]);
const exported = run(["export", "--data", join(root, "demo-data"), "--group", summary.group, "--out", join(root, "demo"), "--json"]);
const demoChunks = (await readdir(join(root, "demo", "chunks"))).filter((f) => f.endsWith(".cbor"));
await cp(join(root, "demo"), join(root, "demo-flipped"), { recursive: true });
await flipByte(join(root, "demo-flipped"), `chunks/${demoChunks[0]}`);
const verify = (dir) => {
  try {
    return { code: 0, out: run(["verify", "--source", join(root, dir), "--group", summary.group, "--authority-key", exported.authority_key, "--from", "genesis", "--json"]) };
  } catch (e) {
    return { code: e.status, out: String(e.stdout ?? "") };
  }
};
const files = await serveStatic(root);
const c = makeCommands(mwp);
const server = await startMockServer(mwp, { authorityKey: c.key("@authority"), staticDir: dashboard });

const browser = await launchChromium(tools);
try {
  const page = await newPage(browser, { viewport: { width: 1280, height: 1000 } });
  const errors = [];
  const requests = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  page.on("request", (r) => requests.push(new URL(r.url()).pathname));
  const open = (dir, extra = "") => page.goto(`${files.url}/dashboard/index.html?source=../${dir}/&authority=${x.authorityKey}${extra}`);

  // mwp demo --exit → mwp export → a plain static host → the dashboard.
  check("mwp export wrote the demo's whole log", exported.seq === summary.events && demoChunks.length >= 1, JSON.stringify(exported));
  const verified = verify("demo");
  check("mwp verify --source checks the demo's export from genesis", verified.code === 0 && verified.out.verified_through === summary.events, JSON.stringify(verified));
  await page.goto(`${files.url}/dashboard/index.html?source=../demo/&authority=${exported.authority_key}`);
  await page.waitForSelector(`body[data-phase='static'][data-cursor='${summary.events}']`);
  const demoNodes = Object.fromEntries(await page.$$eval("#graph svg .node", (ns) => ns.map((n) => [n.dataset.work, n.dataset.state])));
  const wanted = Object.entries(summary.work);
  check("demo: the work graph shows each item of the mission in its final state", wanted.length > 0 && wanted.every(([w, st]) => demoNodes[w] === st), `${JSON.stringify(demoNodes)} vs ${JSON.stringify(summary.work)}`);
  const demoLine = await page.textContent("#head-line");
  check("demo: from its snapshot, verified through the export's head", demoLine.startsWith(`verified through seq ${summary.events}, signed at `) && (await page.$$("#timeline tr.provisional")).length === 0, demoLine);
  // From genesis: the whole mission's history, the screenshot.
  await page.goto(`${files.url}/dashboard/index.html?source=../demo/&authority=${exported.authority_key}&start=genesis`);
  await page.waitForSelector(`body[data-phase='static'][data-cursor='${summary.events}']`);
  const demoRows = await page.$$eval("#timeline tbody tr", (r) => r.length);
  check("demo: from genesis, the timeline lists every event of the mission", demoRows === summary.events, demoRows);
  const genesisNodes = Object.fromEntries(await page.$$eval("#graph svg .node", (ns) => ns.map((n) => [n.dataset.work, n.dataset.state])));
  check("demo: from genesis, the same final states", wanted.every(([w, st]) => genesisNodes[w] === st), JSON.stringify(genesisNodes));
  const marked = await page.$$eval("#graph svg .node.expanded", (ns) => ns.map((n) => n.dataset.work).sort());
  check("demo: the shards the planner added are marked as an expansion", marked.join() === "shard-1,shard-2,shard-3", marked.join());
  const demoLanes = await page.$$eval("#history .lane", (ls) => ls.length);
  check("demo: the history draws the agents' lanes", demoLanes > 1, demoLanes);
  const genesisLine = await page.textContent("#head-line");
  check("demo: from genesis, verified through the export's head, nothing provisional", genesisLine.startsWith(`verified through seq ${summary.events}, signed at `) && (await page.$$("#timeline tr.provisional")).length === 0, genesisLine);
  const shot = process.env.MWP_UPDATE_SCREENSHOT === "1" ? join(docs, "dashboard-static.png") : (process.env.MWP_STATIC_SCREENSHOT ?? join(tmpdir(), "mwp-dashboard-static.png"));
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`# screenshot: ${shot}`);
  await page.goto(`${files.url}/dashboard/index.html?source=../demo-flipped/&authority=${exported.authority_key}&start=genesis`);
  await page.waitForSelector("body[data-phase='error']");
  const demoAlert = await page.textContent("#alert");
  check("demo: the export with one chunk byte flipped is refused, naming the chunk", demoAlert.includes(demoChunks[0]), demoAlert);
  const refused = verify("demo-flipped");
  check("demo: mwp verify --source refuses the flipped export", refused.code !== 0, JSON.stringify(refused));

  await open("export");
  await page.waitForSelector(`body[data-phase='static'][data-cursor='${x.head.seq}']`);
  check("reads and verifies the export, from its snapshot", true);
  const nodes = await page.$$eval("#graph svg .node", (ns) => ns.map((n) => `${n.dataset.work}:${n.dataset.state}`));
  check("work graph shows every item with its state", nodes.length === 12 && nodes.includes("w0:leased"), nodes.join());
  check("work graph draws the dependency edges", (await page.$$("#graph svg .edge")).length === 11);
  const lanes = await page.$$eval("#history .lane", (ls) => ls.length);
  check("history draws lanes", lanes > 1, lanes);
  const line = await page.textContent("#head-line");
  const at = new Date(x.head.at).toISOString().replace("T", " ").replace("Z", "");
  check("the head line reads the head's seq and time", line.startsWith(`verified through seq ${x.head.seq}, signed at ${at} UTC`), line);
  check("no event is marked provisional", (await page.$$("#timeline tr.provisional")).length === 0);
  check("leases table names the holder", (await page.textContent("#leases")).includes("bob"));
  const v1 = requests.filter((p) => p.includes("/v1/"));
  check("no /v1/ request at all", v1.length === 0, v1.join(" "));
  check("the export's files were read from the plain host", requests.some((p) => p === "/export/head.json") && requests.some((p) => p.startsWith("/export/chunks/")), requests.join(" "));
  const axe = await axeCheck(page, tools);
  console.log(`# axe-core (static): ${JSON.stringify(axe.counts)} in ${axe.total} rule(s)${axe.all.map((v) => `\n#   ${v.impact} ${v.id}: ${v.help}`).join("")}`);
  check("axe-core: no serious or critical violation", axe.serious.length === 0, axe.serious.join("; "));

  // From genesis: every event is read and shown.
  await open("export", "&group=g1&start=genesis");
  await page.waitForSelector(`body[data-phase='static'][data-cursor='${x.head.seq}']`);
  const rows = await page.$$eval("#timeline tbody tr", (r) => r.length);
  check("from genesis, the timeline lists every event", rows === x.head.seq, rows);

  // One flipped byte in one chunk: the error phase, naming the chunk.
  await open("flipped", "&start=genesis");
  await page.waitForSelector("body[data-phase='error']");
  const status = await page.textContent("#status");
  const alert = await page.textContent("#alert");
  check("a flipped chunk byte shows the error phase naming the file", /LOG_CORRUPT/.test(status) && alert.includes(chunk) && (await page.isVisible("#alert")), `${status} | ${alert}`);

  // A forged history under the honest head: FORK.
  await open("forged", "&start=genesis");
  await page.waitForSelector("body[data-phase='error']");
  const forged = await page.textContent("#status");
  check("a forged history under the honest head shows FORK", forged.startsWith("FORK"), forged);
  const axeError = await axeCheck(page, tools);
  check("axe-core in the error phase: no serious or critical violation", axeError.serious.length === 0, axeError.serious.join("; "));

  // Live mode: the heads of pages and tail verify the view; a conflicting head is a FORK.
  const client = new mwp.Client(server.url);
  for (const cmd of [c.open(), c.create("fetch"), c.create("build", "c-build", ["fetch"])]) await client.submit(cmd);
  await page.goto(`${server.url}/?group=g1`);
  await page.waitForSelector("body[data-phase='live'][data-cursor='3'][data-verified-through='3']");
  check("live: the pages' head verifies the replay", (await page.textContent("#head-line")).startsWith("verified through seq 3, signed at"));
  await page.waitForSelector("body[data-connection='connected']");
  await client.submit(c.create("test", "c-test", ["build"]));
  await page.waitForSelector("body[data-phase='live'][data-cursor='4'][data-verified-through='4']");
  check("live: the tail's head verifies a new event", true);
  // The authority's key signs another id at seq 4: the next stream carries it.
  server.state.signHead = (h) => mwp.signHead(h.org, h.group, h.seq, "ab".repeat(32), h.at, c.key("@authority"));
  server.dropStreams();
  await page.waitForSelector("body[data-phase='error'][data-error='FORK']");
  const proof = await page.$eval("#fork-proof", (a) => fetch(a.href).then((r) => r.arrayBuffer()).then((b) => Array.from(new Uint8Array(b))));
  const fork = mwp.verifyForkProof(Uint8Array.from(proof), c.pub("@authority"));
  check("live: two heads for one seq stop the view with FORK and a proof to download", fork.kind === "heads" && fork.seq === 4, JSON.stringify(fork));
  const dropped = /^Failed to load resource: (net::ERR_(INCOMPLETE_CHUNKED_ENCODING|CONNECTION_REFUSED)|the server responded with a status of 404 \(Not Found\))$/;
  const unexpected = errors.filter((e) => !dropped.test(e));
  check("no page errors", unexpected.length === 0, unexpected.join("; "));
} catch (e) {
  const status = await browser.contexts()[0]?.pages()[0]?.textContent("#status").catch(() => "?");
  check("no exception", false, `${e.stack}\nstatus: ${status}`);
} finally {
  await browser.close();
  await files.close();
  await server.close();
  await rm(root, { recursive: true, force: true });
}
console.log(`dashboard (static): ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
