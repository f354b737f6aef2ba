// End to end against the real `mwp serve` (host-native), on 127.0.0.1: the HTTP client
// (submit, duplicates, typed errors, replay through CURSOR_TOO_OLD → signed snapshot → resume,
// live tail) and the dashboard served by it (`--dashboard js/dashboard`).
// Usage: node js/test/e2e/serve.js   (MWP_BIN: the mwp binary, default target/debug/mwp)
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { homedir } from "node:os";
import * as mwp from "../../src/node.js";
import { WAIT_MS, dashboardAt, launchChromium, newPage } from "../static-server.js";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const bin = process.env.MWP_BIN ?? join(process.env.CARGO_TARGET_DIR ?? join(root, "target"), "debug/mwp");
const tools = process.env.MWP_TOOLS_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "mwp-wasm-tools");
let passed = 0;
let failed = 0;
const check = (name, ok, detail = "") => {
  console.log(`${ok ? "ok" : "FAIL"} - serve: ${name}${ok ? "" : `: ${detail}`}`);
  ok ? passed++ : failed++;
};
if (!existsSync(bin)) {
  console.log(`FAIL - serve: the mwp binary is missing at ${bin} (cargo build -p mwp-host)`);
  console.log("serve: 0 passed, 1 failed");
  process.exit(1);
}

const server = spawn(bin, ["serve", "--addr", "127.0.0.1:0", "--online-events", "3", "--dashboard", join(root, "js/dashboard")], {
  stdio: ["ignore", "ignore", "pipe"],
});
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

/** `promise`, or a failure naming `what` if it has not settled within WAIT_MS. */
async function within(promise, what) {
  let timer;
  const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`no ${what} within ${WAIT_MS} ms`)), WAIT_MS); });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

const key = (actor) => mwp.transcriptSecretKey(actor);
const pub = (actor) => mwp.publicKeyOf(key(actor));
const cmd = (actor, action, body, expect) =>
  mwp.signCommand({ org: "acme", group: "g1", actor, action, session: 1, ...(expect === undefined ? {} : { expect }), body }, key(actor));
const contract = { max_attempts: 3, backoff_base_ms: 100, backoff_max_ms: 1000, cost_budget: 10, risk: "low" };
const create = (work, after = []) => cmd("alice", `c-${work}`, { type: "create_work", work, contract, after, spec: { do: work } });

const client = new mwp.Client(url);
let browser;
try {
  const trustedKey = await client.authorityKey();
  check("GET /v1/authority gives a key", /^[0-9a-f]{64}$/.test(trustedKey), trustedKey);
  const open = cmd("alice", "open", {
    type: "open_group", mission: "m1", title: "e2e", authority_key: trustedKey,
    members: [{ actor: "alice", role: "owner", key: pub("alice") }, { actor: "bob", role: "worker", key: pub("bob") }],
  });
  const first = await client.submit(open);
  check("submit: receipt", first.receipt.seq === 1 && first.duplicate === false, JSON.stringify(first));
  const again = await client.submit(open);
  check("submit: a retry is a Duplicate with the same receipt", again.duplicate && JSON.stringify(again.receipt) === JSON.stringify(first.receipt));
  let err;
  try { await client.submit(cmd("bob", "b1", { type: "claim_work", work: "w1", lease_ms: 30000, start_within_ms: 5000 })); } catch (e) { err = e; }
  check("submit: a refusal is an HttpError with the spec's code", err instanceof mwp.HttpError && err.status === 409 && err.code === "CAS_REQUIRED", err);
  for (const w of ["fetch", "build", "test", "docs"]) await client.submit(create(w, w === "fetch" ? [] : ["fetch"]));
  await client.submit(cmd("bob", "b2", { type: "claim_work", work: "fetch", lease_ms: 600000, start_within_ms: 600000 }, 1));

  const replica = new mwp.Replica("g1");
  const r = await client.replay(replica, { trustedKey, org: "acme" });
  check("replay: CURSOR_TOO_OLD → verified snapshot → resume", r.restored && r.cursor === 6, JSON.stringify(r));
  const heads = await client.groups();
  check("replay reaches the server's head", heads.groups.find((g) => g.group === "g1")?.head === replica.cursor, JSON.stringify(heads));
  const untrusting = new mwp.Replica("g1");
  try { await client.replay(untrusting, { trustedKey: pub("bob"), org: "acme" }); err = null; } catch (e) { err = e; }
  check("replay refuses a snapshot not signed by the trusted key", err?.code === "SNAPSHOT_INVALID" && untrusting.cursor === 0, err);

  const controller = new AbortController();
  const seen = [];
  let live;
  const opened = new Promise((res) => (live = res));
  const following = client.follow(replica, { trustedKey, org: "acme", signal: controller.signal, onLive: live, onEvent: (e) => {
    seen.push(e.seq);
    if (e.seq === 7) controller.abort();
  } });
  // Submit only once the tail is open, so the new event can only arrive through it.
  await within(Promise.race([opened, following.then(() => "ended")]), "the tail to open");
  await client.submit(create("ship", ["test", "docs"]));
  await within(following, "the new event over the tail");
  check("tail: a new event arrives over SSE and applies", seen.includes(7) && replica.cursor === 7, seen.join());

  browser = await launchChromium(tools);
  const page = await newPage(browser, { viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`${url}/?group=g1`);
  await dashboardAt(page, 7);
  const nodes = await page.$$eval("#graph svg .node", (ns) => ns.length);
  check("dashboard served by mwp serve replays (from a snapshot) and draws the graph", nodes === 5, nodes);
  await client.submit(cmd("bob", "b3", { type: "start_work", work: "fetch", lease: replica.state().work.fetch.lease.id }));
  await dashboardAt(page, 8);
  const running = await page.$eval("#graph svg .node[data-work='fetch']", (n) => n.dataset.state);
  check("dashboard follows the live tail", running === "running", running);
  check("dashboard: no page errors", errors.length === 0, errors.join("; "));
} catch (e) {
  check("no exception", false, e.stack);
} finally {
  await browser?.close();
  server.kill("SIGINT");
}
console.log(`serve: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
