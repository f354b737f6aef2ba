// Runs js/bench/idb.html in headless Chromium and prints the IndexedDB append rates.
// Run: node js/bench/idb.mjs [items=2500] [batch=1000] [checkpointEvery]
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { homedir } from "node:os";
import { serveStatic, launchChromium, runPage } from "../test/static-server.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const tools = process.env.MWP_TOOLS_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "mwp-wasm-tools");
const [items = 2500, batch = 1000, checkpoint] = process.argv.slice(2).map(Number);
const server = await serveStatic(root);
const browser = await launchChromium(tools);
try {
  const { result, errors } = await runPage(browser, `${server.url}/js/bench/idb.html?items=${items}&batch=${batch}${checkpoint ? `&checkpoint=${checkpoint}` : ""}`, { timeoutMs: 300_000 });
  if (result.error || errors.length) throw new Error(result.error ?? errors.join("; "));
  console.log(`chromium ${browser.version()}: ${result.events} events`);
  console.log(`  batched (${result.batchSize}/transaction, checkpoint every ${result.checkpointEvery}): ${result.batchedMs.toFixed(0)} ms = ${result.batchedPerSec} events/s`);
  console.log(`  one transaction per event (${result.singles} events): ${result.singleMs.toFixed(0)} ms = ${result.singlePerSec} events/s`);
  console.log(`  reopen (checkpoint + replay of the tail): ${result.reopenMs.toFixed(0)} ms`);
} finally {
  await browser.close();
  await server.close();
}
