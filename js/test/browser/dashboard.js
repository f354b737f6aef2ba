// The dashboard in headless Chromium against a stand-in for `mwp serve`: it replays and
// verifies a group, draws the work graph, follows the live tail, and after a reload fetches
// only new events (the rest comes from IndexedDB); its live tail reconnects after a drop and
// reports a gap; the graph and the lanes work from the keyboard; the remembered authority key
// can be forgotten; axe-core finds no serious or critical violation. Saves a screenshot to
// $MWP_SCREENSHOT (default: $TMPDIR/mwp-dashboard.png). Prints `N passed, N failed`.
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { homedir, tmpdir } from "node:os";
import * as mwp from "../../src/node.js";
import { makeCommands } from "../helpers.js";
import { startMockServer } from "../mock-server.js";
import { axeCheck } from "../axe.js";
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

  // Accessibility: axe-core over the loaded dashboard; the status line is a live region.
  const axe = await axeCheck(page, tools);
  console.log(`# axe-core (stand-in server): ${JSON.stringify(axe.counts)} in ${axe.total} rule(s)${axe.all.map((v) => `\n#   ${v.impact} ${v.id}: ${v.help}`).join("")}`);
  check("axe-core: no serious or critical violation", axe.serious.length === 0, axe.serious.join("; "));
  const live = await page.$$eval("[aria-live='polite']", (els) => els.map((e) => e.id));
  check("status and connection are announced (aria-live polite)", ["status", "connection", "details"].every((id) => live.includes(id)), live.join());

  // Keyboard: Tab reaches one graph node; arrows move along the graph; Enter opens details.
  const tabStops = await page.$$eval("#graph .node[tabindex='0']", (ns) => ns.map((n) => n.dataset.work));
  check("the graph has exactly one tab stop", tabStops.length === 1, tabStops.join());
  await page.focus("#graph .node[tabindex='0']");
  const focused = () => page.evaluate(() => document.activeElement?.dataset?.work ?? document.activeElement?.id);
  const start = await focused();
  await page.keyboard.press("ArrowRight");
  const right = await focused();
  await page.keyboard.press("ArrowDown");
  const down = await focused();
  await page.keyboard.press("Enter");
  const detail = await page.$eval("#details", (d) => d.dataset.work);
  check("arrow keys move along the graph, Enter opens the item", start === "fetch" && right === "build" && down === "docs" && detail === "docs", `${start} → ${right} → ${down}, details ${detail}`);
  await page.focus("#history .lane[tabindex='0']");
  const lane0 = await focused();
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("ArrowDown");
  const lane2 = await focused();
  await page.keyboard.press("Enter");
  const laneDetail = await page.$eval("#details", (d) => d.dataset.work);
  check("arrow keys move along the history lanes, Enter opens the item", lane0 === "(group)" && lane2 === laneDetail && laneDetail !== "(group)", `${lane0} → ${lane2}, details ${laneDetail}`);

  // The live tail reconnects: a dropped stream is reopened after the last seq, and what was
  // accepted meanwhile arrives; while the server refuses, the connection says "reconnecting".
  const connection = (state) => page.waitForSelector(`body[data-connection='${state}']`);
  await connection("connected");
  await page.route("**/events/stream*", (route) => route.abort("connectionrefused"));
  server.state.requests.length = 0;
  server.dropStreams();
  await connection("reconnecting");
  const text = await page.textContent("#connection");
  check("a dropped tail shows that it is reconnecting", /reconnecting in [\d.]+ s/.test(text), text);
  await client.submit(c.create("deploy", "c-deploy", ["ship"]));
  await page.waitForFunction(() => /attempt [2-9]/.test(document.getElementById("connection").textContent));
  await page.unroute("**/events/stream*");
  await connection("connected");
  await dashboardAt(page, 9);
  const reopened = server.state.requests.filter((r) => r.startsWith("GET /v1/groups/g1/events/stream"));
  check("the tail resumes after the last seq and catches up", reopened.length > 0 && reopened.every((r) => /after=8\b/.test(r)) && (await page.$$("#graph svg .node")).length === 7, reopened.join(" "));

  // A gap (the first event after a reconnect is past the next seq) is an error, not skipped.
  const ahead = { ...(await client.events("g1", { after: 8 }))[0], seq: 12 };
  await page.route("**/events/stream*", (route) => route.fulfill({ status: 200, contentType: "text/event-stream", body: `data: ${JSON.stringify(ahead)}\n\n` }));
  server.dropStreams();
  await connection("gap");
  const gapStatus = await page.textContent("#status");
  const cursorAfterGap = await page.$eval("body", (b) => b.dataset.cursor);
  check("a gap is shown as an error and nothing is skipped", /gap in the live tail.*missing 10\.\.11/.test(gapStatus) && cursorAfterGap === "9", `${gapStatus} (cursor ${cursorAfterGap})`);
  await page.unroute("**/events/stream*");

  // Forget key: a remembered key that is not the server's blocks the replay; the control
  // removes it (and the events cached under it), and the next load trusts the server's key.
  const keyName = `mwp:authority-key:${server.url}`;
  await page.evaluate((k) => localStorage.setItem(k, "00".repeat(32)), keyName);
  await page.reload();
  await page.waitForSelector("body[data-phase='error']");
  const refused = await page.textContent("#status");
  check("a different remembered key is refused", refused.includes("authority key changed"), refused);
  server.state.requests.length = 0;
  await page.click("#forget-key");
  await dashboardAt(page, 9);
  const remembered = await page.evaluate((k) => localStorage.getItem(k), keyName);
  const refetched = server.state.requests.filter((r) => r.startsWith("GET /v1/groups/g1/events?"));
  check("forget key removes the remembered key and the cache, and starts again",
    remembered === mwp.publicKeyOf(c.key("@authority")) && refetched.some((r) => /after=0\b/.test(r)), `${remembered} ${refetched.join(" ")}`);
  // The drops above are the test's own doing: the browser logs them as failed loads.
  const dropped = /^Failed to load resource: net::ERR_(INCOMPLETE_CHUNKED_ENCODING|CONNECTION_REFUSED)$/;
  const unexpected = errors.filter((e) => !dropped.test(e));
  check("no page errors", unexpected.length === 0, unexpected.join("; "));
} catch (e) {
  const status = await browser.contexts()[0]?.pages()[0]?.textContent("#status").catch(() => "?");
  check("no exception", false, `${e.stack}\nstatus: ${status}`);
} finally {
  await browser.close();
  await server.close();
}
console.log(`dashboard: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
