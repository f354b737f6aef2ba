// End to end: the dashboard against `mwp serve --token-file`, in headless Chromium. Without a
// credential it says why and shows nothing; with `?token=` (a read token) it replays the
// group and takes the token out of the address bar; with `?member=…&key=…` it signs its reads
// as a member of the group and replays it too. Prints `N passed, N failed`.
// Usage: node js/test/e2e/access.js   (MWP_BIN: the mwp binary, default target/debug/mwp)
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { homedir, tmpdir } from "node:os";
import * as mwp from "../../src/node.js";
import { WAIT_MS, dashboardAt, launchChromium, newPage } from "../static-server.js";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const bin = process.env.MWP_BIN ?? join(process.env.CARGO_TARGET_DIR ?? join(root, "target"), "debug/mwp");
const tools = process.env.MWP_TOOLS_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "mwp-wasm-tools");
let passed = 0;
let failed = 0;
const check = (name, ok, detail = "") => {
  console.log(`${ok ? "ok" : "FAIL"} - access: ${name}${ok ? "" : `: ${detail}`}`);
  ok ? passed++ : failed++;
};
if (!existsSync(bin)) {
  console.log(`FAIL - access: the mwp binary is missing at ${bin} (cargo build -p mwp-host)`);
  console.log("access: 0 passed, 1 failed");
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), "mwp-access-"));
const readToken = "read-token-0123456789abcdef";
const adminToken = "admin-token-0123456789abcdef";
const tokens = join(dir, "tokens");
writeFileSync(tokens, `read ${readToken}\nadmin ${adminToken}\n`, { mode: 0o600 });
chmodSync(tokens, 0o600);
const server = spawn(bin, ["serve", "--addr", "127.0.0.1:0", "--token-file", tokens], { stdio: ["ignore", "ignore", "pipe"] });
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

const key = (actor) => mwp.transcriptSecretKey(actor);
const pub = (actor) => mwp.publicKeyOf(key(actor));
const cmd = (actor, action, body) => mwp.signCommand({ org: "acme", group: "g1", actor, action, session: 1, body }, key(actor));
const contract = { max_attempts: 3, backoff_base_ms: 100, backoff_max_ms: 1000, cost_budget: 10, risk: "low" };

let browser;
try {
  const admin = new mwp.Client(url, { token: adminToken });
  const authority = await admin.authorityKey();
  await admin.submit(cmd("alice", "open", {
    type: "open_group", mission: "m1", title: "access", authority_key: authority,
    members: [{ actor: "alice", role: "owner", key: pub("alice") }],
  }));
  await admin.submit(cmd("alice", "c-fetch", { type: "create_work", work: "fetch", contract, after: [], spec: {} }));

  browser = await launchChromium(tools);
  const anonymous = await newPage(browser);
  await anonymous.goto(`${url}/?group=g1`);
  await anonymous.waitForSelector("body[data-phase='error']");
  const refused = await anonymous.textContent("#status");
  check("without a credential the dashboard says it needs one", refused.includes("UNAUTHORIZED"), refused);
  check("without a credential nothing is drawn", await anonymous.$eval("body", (b) => b.dataset.cursor === undefined));
  await anonymous.close();

  const operator = await newPage(await browser.newContext());
  await operator.goto(`${url}/?group=g1&token=${readToken}`);
  await dashboardAt(operator, 2);
  check("with a read token the dashboard replays the group", true);
  check("the token leaves the address bar", !operator.url().includes(readToken), operator.url());
  await operator.close();

  const member = await newPage(await browser.newContext());
  await member.goto(`${url}/?group=g1&member=alice&key=${key("alice")}`);
  await dashboardAt(member, 2);
  check("a member's signed reads replay its group", true);
  check("the member's key leaves the address bar", !member.url().includes(key("alice")), member.url());
  await member.close();
} catch (e) {
  check("no exception", false, e.stack);
} finally {
  await browser?.close();
  server.kill("SIGINT");
  rmSync(dir, { recursive: true, force: true });
}
console.log(`access: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
