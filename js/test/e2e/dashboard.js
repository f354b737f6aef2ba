// End to end, as a newcomer sees it: `mwp demo --exit` writes its mission to a data folder,
// `mwp serve --data DIR` serves it with the dashboard EMBEDDED in the binary (no --dashboard),
// and headless Chromium opens it: the dashboard loads, replays and verifies the group through
// the wasm core, and draws the graph, the history, the effects; axe-core finds no serious or
// critical accessibility violation in it. Saves a screenshot to
// $MWP_SCREENSHOT (default: $CARGO_TARGET_DIR or target/, file dashboard.png); with
// MWP_UPDATE_SCREENSHOT=1 it rewrites docs/dashboard.png instead (commit that file).
// Usage: node js/test/e2e/dashboard.js   (MWP_BIN: the mwp binary, default target/debug/mwp)
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { homedir, tmpdir } from "node:os";
import { WAIT_MS, dashboardAt, launchChromium, newPage } from "../static-server.js";
import { axeCheck } from "../axe.js";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const target = process.env.CARGO_TARGET_DIR ?? join(root, "target");
const bin = process.env.MWP_BIN ?? join(target, "debug/mwp");
const tools = process.env.MWP_TOOLS_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "mwp-wasm-tools");
const shot = process.env.MWP_UPDATE_SCREENSHOT === "1" ? join(root, "docs/dashboard.png") : (process.env.MWP_SCREENSHOT ?? join(target, "dashboard.png"));
let passed = 0;
let failed = 0;
const check = (name, ok, detail = "") => {
  console.log(`${ok ? "ok" : "FAIL"} - demo dashboard: ${name}${ok ? "" : `: ${detail}`}`);
  ok ? passed++ : failed++;
};
if (!existsSync(bin)) {
  console.log(`FAIL - demo dashboard: the mwp binary is missing at ${bin} (cargo build -p mwp-host)`);
  process.exit(1);
}

const data = mkdtempSync(join(tmpdir(), "mwp-demo-"));
const demo = spawnSync(bin, ["demo", "--exit", "--json", "--addr", "127.0.0.1:0", "--data", data], { encoding: "utf8" });
const summary = demo.status === 0 ? JSON.parse(demo.stdout.trim().split("\n")[0]) : null;
check("mwp demo --exit finishes and its snapshot verifies", summary?.snapshot?.verified === true, `${demo.status}: ${demo.stderr}`);
if (!summary) process.exit(1);

const server = spawn(bin, ["serve", "--data", data, "--addr", "127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
const url = await new Promise((resolve, reject) => {
  let err = "";
  const timer = setTimeout(() => reject(new Error(`mwp serve did not start: ${err}`)), WAIT_MS);
  server.stderr.on("data", (chunk) => {
    err += chunk;
    const m = /authority on (http:\/\/[0-9.]+:[0-9]+)\s/.exec(err);
    if (m) {
      clearTimeout(timer);
      resolve(m[1]);
    }
  });
  server.on("exit", (code) => reject(new Error(`mwp serve exited with ${code}: ${err}`)));
});

let browser;
try {
  const wasm = await fetch(`${url}/lib/pkg/mwp_wasm_bg.wasm`);
  const bytes = new Uint8Array(await wasm.arrayBuffer());
  check("the embedded wasm module is served as application/wasm",
    wasm.headers.get("content-type") === "application/wasm" && String.fromCharCode(...bytes.slice(1, 4)) === "asm" && bytes[0] === 0,
    wasm.headers.get("content-type"));

  browser = await launchChromium(tools);
  const page = await newPage(browser, { viewport: { width: 1400, height: 1240 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  await page.goto(`${url}/?group=${summary.group}`);
  await dashboardAt(page, summary.events);
  check("replays the whole group in the browser", true);
  const verified = await page.$eval("body", (b) => b.dataset.verified);
  const checks = await page.$$eval("#verification .check", (cs) => cs.map((c) => `${c.dataset.check}:${c.dataset.result}`));
  // The head check is `ok` once `mwp serve` signs heads (SPEC §8a), `none` from a server
  // that signs none; never `failed`.
  check("verifies the chain and the signed snapshot client-side", verified === "true" && /^chain:ok,head:(ok|none),snapshot:ok$/.test(checks.join()), checks.join());
  const snapshotText = await page.textContent("#verification [data-check='snapshot']");
  check("the final snapshot's state hash equals the replay's", snapshotText.includes("equals the replay"), snapshotText);
  const nodes = await page.$$eval("#graph svg .node", (ns) => ns.map((n) => `${n.dataset.work}:${n.dataset.state}`).sort());
  check("the work graph shows every item, all succeeded", nodes.join() === "clean:succeeded,fetch:succeeded,notify:succeeded,report:succeeded,shard-1:succeeded,shard-2:succeeded,shard-3:succeeded,train:succeeded", nodes.join());
  // The planner grew the graph from fetch's outcome: each shard is marked with that trigger.
  const trigger = /expands seq (\d+) into/.exec(summary.planner?.expansions?.[0] ?? "")?.[1];
  const marked = await page.$$eval("#graph svg .node.expanded", (ns) => ns.map((n) => `${n.dataset.work}@${n.dataset.trigger}`).sort());
  check("the graph marks each expanded item with the event that triggered it", trigger && marked.join() === ["shard-1", "shard-2", "shard-3"].map((w) => `${w}@${trigger}`).join(), `${trigger}: ${marked.join()}`);
  const edges = await page.$$eval("#graph svg .edge title", (ts) => ts.map((t) => t.textContent).sort());
  check("the work graph draws the dependency edges", edges.join() === "clean → report,clean → train,fetch → clean,notify → shard-1,notify → shard-2,notify → shard-3,report → notify,train → notify", edges.join());
  const leases = await page.$$eval("#history svg .lease", (ls) => ls.map((l) => `${l.dataset.work}#${l.dataset.epoch}`).sort());
  check("the history draws both epochs' leases of every item", leases.length === 13 && ["fetch", "clean", "train", "report", "notify"].every((w) => leases.includes(`${w}#1`) && leases.includes(`${w}#2`)), leases.join());
  const expired = await page.$$eval("#history svg .lease title", (ts) => ts.filter((t) => t.textContent.includes("expired")).length);
  check("the history shows the lease expiries", expired >= 2, expired);
  const evidence = await page.$$eval("#history svg .mark[data-type='evidence_recorded']", (ms) => ms.length);
  check("the history marks the late result kept as evidence", evidence === summary.evidence, evidence);
  const effects = await page.$$eval("#effects-picture .effect", (es) => es.map((e) => `${e.dataset.work}:${e.dataset.status}`));
  check("the effect is drawn as unknown, then reconciled", effects.join() === "notify:reconciled", effects.join());
  const timeline = await page.$$eval("#timeline tbody tr", (rows) => rows.length);
  check("the timeline lists every event", timeline === summary.events, timeline);
  const axe = await axeCheck(page, tools);
  console.log(`# axe-core (embedded dashboard, demo data): ${JSON.stringify(axe.counts)} in ${axe.total} rule(s)${axe.all.map((v) => `\n#   ${v.impact} ${v.id}: ${v.help}`).join("")}`);
  check("axe-core: no serious or critical accessibility violation", axe.serious.length === 0, axe.serious.join("; "));
  await page.evaluate(() => window.scrollTo(0, 0));
  mkdirSync(dirname(shot), { recursive: true });
  await page.screenshot({ path: shot }); // the pictures; the timeline's table continues below
  console.log(`# screenshot: ${shot}`);

  // A reload replays from the IndexedDB cache: nothing is fetched again.
  await page.reload();
  await dashboardAt(page, summary.events);
  const status = await page.textContent("#status");
  check("a reload takes every event from the IndexedDB cache", status.includes(`${summary.events} cached, 0 fetched`), status);
  check("no page errors", errors.length === 0, errors.join("; "));
} catch (e) {
  const status = await browser?.contexts()[0]?.pages()[0]?.textContent("#status").catch(() => "?");
  check("no exception", false, `${e.stack}\nstatus: ${status}`);
} finally {
  await browser?.close();
  server.kill("SIGINT");
  rmSync(data, { recursive: true, force: true });
}
console.log(`demo dashboard: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
