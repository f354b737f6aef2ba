// A static file server on 127.0.0.1 for the browser tests (correct MIME types for ES modules
// and WebAssembly), rooted at `root`.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize } from "node:path";

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".wasm": "application/wasm",
  ".json": "application/json",
  ".jsonl": "text/plain; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
};

export async function serveStatic(root, { routes = {} } = {}) {
  const server = createServer(async (req, res) => {
    // No connection is kept open between requests: `close` must not wait for a client's
    // idle keep-alive connection (Deno's fetch keeps one, and its server then never closed).
    res.setHeader("connection", "close");
    const path = decodeURIComponent(new URL(req.url, "http://127.0.0.1").pathname);
    if (routes[path]) return routes[path](req, res);
    if (path === "/favicon.ico") return res.writeHead(204).end();
    const file = normalize(join(root, path.endsWith("/") ? `${path}index.html` : path));
    if (!file.startsWith(normalize(root))) {
      res.writeHead(403).end();
      return;
    }
    try {
      const body = await readFile(file);
      res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream", "cache-control": "no-store" });
      res.end(body);
    } catch {
      res.writeHead(404).end("not found");
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const close = () =>
    new Promise((r) => {
      server.close(() => r());
      server.closeAllConnections?.();
    });
  return { url: `http://127.0.0.1:${server.address().port}`, close };
}

/** Launches headless Chromium through playwright-core (from the tools folder). */
export async function launchChromium(toolsDir) {
  const { pathToFileURL } = await import("node:url");
  const pw = await import(pathToFileURL(join(toolsDir, "node_modules/playwright-core/index.mjs")).href);
  return pw.chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run",
    ],
  });
}

/**
 * How long a browser test waits for a state before it fails: generous, since a loaded
 * 2-core machine compiles a 3 MB wasm module and replays in a debug build. A wait ends as
 * soon as the state is there; this only bounds a wait for a state that never comes.
 */
export const WAIT_MS = 180_000;

/** A new page whose every wait (selectors, navigation, functions) is bounded by `WAIT_MS`. */
export async function newPage(browser, options = {}) {
  const page = await browser.newPage(options);
  page.setDefaultTimeout(WAIT_MS);
  page.setDefaultNavigationTimeout(WAIT_MS);
  return page;
}

/**
 * Waits until the dashboard on `page` shows its final view at `cursor`: every picture drawn
 * at that cursor (`data-cursor`) and the status line written (`data-phase="live"`).
 */
export async function dashboardAt(page, cursor) {
  await page.waitForSelector(`body[data-phase='live'][data-cursor='${cursor}']`, { timeout: WAIT_MS });
}

/** Opens `url`, waits for `window.__done`, returns `window.__result`; page errors fail it. */
export async function runPage(browser, url, { timeoutMs = WAIT_MS } = {}) {
  const page = await newPage(browser);
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  await page.goto(url);
  await page.waitForFunction(() => window.__done === true, null, { timeout: timeoutMs });
  const result = await page.evaluate(() => window.__result);
  await page.close();
  return { result, errors };
}
