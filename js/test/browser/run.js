// Runs the browser page tests in headless Chromium (playwright-core) against the repository
// checkout, served on 127.0.0.1. Prints one line per check and `N passed, N failed`.
// Usage: node js/test/browser/run.js   (MWP_TOOLS_DIR: where playwright-core is installed)
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { homedir } from "node:os";
import { serveStatic, launchChromium, runPage } from "../static-server.js";
import { startMockServer } from "../mock-server.js";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const tools = process.env.MWP_TOOLS_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "mwp-wasm-tools");
const server = await serveStatic(root);
const browser = await launchChromium(tools);
let passed = 0;
let failed = 0;
try {
  const { result, errors } = await runPage(browser, `${server.url}/js/test/browser/vectors.html`);
  for (const c of result) {
    console.log(`${c.ok ? "ok" : "FAIL"} - chromium: ${c.name}${c.ok ? "" : `: ${c.detail}`}`);
    c.ok ? passed++ : failed++;
  }
  for (const e of errors) {
    console.log(`FAIL - chromium page error: ${e}`);
    failed++;
  }
  // runAgent with its journal in IndexedDB, against a stand-in for `mwp serve` that also
  // serves the checkout (one origin: no CORS).
  const mwp = await import("../../src/node.js");
  const mock = await startMockServer(mwp, { authorityKey: mwp.transcriptSecretKey("@authority"), staticDir: root });
  try {
    const page = await runPage(browser, `${mock.url}/js/test/browser/agent.html`);
    for (const c of page.result) {
      console.log(`${c.ok ? "ok" : "FAIL"} - chromium: ${c.name}${c.ok ? "" : `: ${c.detail}`}`);
      c.ok ? passed++ : failed++;
    }
    for (const e of page.errors) {
      console.log(`FAIL - chromium page error: ${e}`);
      failed++;
    }
  } finally {
    await mock.close();
  }
} finally {
  await browser.close();
  await server.close();
}
console.log(`chromium: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
