// The dashboard in headless Chromium against a stand-in for `mwp serve`: it replays and
// verifies a group, draws the work graph, follows the live tail, and after a reload fetches
// only new events (the rest comes from IndexedDB). Saves a screenshot to
// $MWP_SCREENSHOT (default: $TMPDIR/mwp-dashboard.png). Prints `N passed, N failed`.
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { homedir, tmpdir } from "node:os";
import * as mwp from "../../src/node.js";
import { makeCommands } from "../helpers.js";
import { startMockServer } from "../mock-server.js";
import { dashboardAt, launchChromium, newPage } from "../static-server.js";

const tools = process.env.MWP_TOOLS_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "mwp-wasm-tools");
const dashboard = fileURLToPath(new URL("../../dashboard/", import.meta.url));
const c = makeCommands(mwp);
const server = await startMockServer(mwp, { authorityKey: c.key("@authority"), staticDir: dashboard });
const client = new mwp.Client(server.url);
let passed = 0;
let failed = 0;
const check = (name, ok, detail = "") => {
  console.log(`${ok ? "ok" : "FAIL"} - dashboard: ${name}${ok ? "" : `: ${detail}`}`);
  ok ? passed++ : failed++;
};

const browser = await launchChromium(tools);
try {
  await client.submit(c.open());
  await client.submit(c.create("fetch"));
  await client.submit(c.create("build", "c-build", ["fetch"]));
  await client.submit(c.create("test", "c-test", ["build"]));
  await client.submit(c.create("docs", "c-docs", ["fetch"]));
  await client.submit(c.claim("fetch", "b1", 1));

  const page = await newPage(browser, { viewport: { width: 1280, height: 1000 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  await page.goto(`${server.url}/?group=g1`);
  await dashboardAt(page, 6);
  check("replays and verifies the group", true);
  const nodes = await page.$$eval("#graph svg .node", (ns) => ns.map((n) => `${n.dataset.work}:${n.dataset.state}`).sort());
  check("work graph shows every item with its state", nodes.join() === "build:queued,docs:queued,fetch:leased,test:queued", nodes.join());
  check("work graph draws the dependency edges", (await page.$$("#graph svg .edge")).length === 3);
  const timeline = await page.$$eval("#timeline tbody tr", (rows) => rows.length);
  check("timeline lists every event", timeline === 6, timeline);
  check("leases table names the holder", (await page.textContent("#leases")).includes("bob"));

  // Live: new events arrive over the tail without a reload.
  await client.submit(c.create("ship", "c-ship", ["test", "docs"]));
  await dashboardAt(page, 7);
  check("live tail applies new events", (await page.$$("#graph svg .node")).length === 5);

  // Reload: the cache answers for seq 1..7; only events after 7 are requested.
  await client.submit(c.create("announce", "c-announce", ["ship"]));
  server.state.requests.length = 0;
  await page.reload();
  await dashboardAt(page, 8);
  const eventReads = server.state.requests.filter((r) => r.startsWith("GET /v1/groups/g1/events?"));
  check("a reload fetches only new events", eventReads.length > 0 && eventReads.every((r) => /after=(7|8)\b/.test(r)), eventReads.join(" "));
  const shot = process.env.MWP_SCREENSHOT ?? join(tmpdir(), "mwp-dashboard.png");
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`# screenshot: ${shot}`);
  check("no page errors", errors.length === 0, errors.join("; "));
} catch (e) {
  const status = await browser.contexts()[0]?.pages()[0]?.textContent("#status").catch(() => "?");
  check("no exception", false, `${e.stack}\nstatus: ${status}`);
} finally {
  await browser.close();
  await server.close();
}
console.log(`dashboard: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
