// Starts a real `mwp serve` ($MWP_BIN, else target/debug/mwp of this repo) for a test.
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The mwp binary the tests run. */
export const mwpBin = () => {
  const bin = process.env.MWP_BIN ?? join(repo, process.env.CARGO_TARGET_DIR ?? "target", "debug", "mwp");
  return bin.startsWith("/") ? bin : join(repo, bin);
};

/**
 * Starts `mwp serve` on 127.0.0.1 (`port`, default any free one) with `args`; resolves to
 * `{url, stop, exited}` once it listens (`exited` resolves when the process has ended).
 */
export async function serveNative(args, port = 0) {
  const child = spawn(mwpBin(), ["serve", "--addr", `127.0.0.1:${port}`, ...args], { stdio: ["ignore", "ignore", "pipe"] });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const url = await new Promise((resolve, reject) => {
    let text = "";
    child.stderr.on("data", (chunk) => {
      text += chunk;
      const m = /authority on (http:\/\/[0-9.]+:[0-9]+)\s/.exec(text);
      if (m) resolve(m[1]);
    });
    child.on("exit", (code) => reject(new Error(`mwp serve exited with ${code}: ${text}`)));
  });
  return { url, exited, stop: () => child.kill("SIGINT") };
}
