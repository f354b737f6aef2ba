// An accessibility check of a page in headless Chromium with axe-core (installed into
// $MWP_TOOLS_DIR by scripts/test-wasm.sh): injects axe.min.js, runs every rule, and returns
// the violations counted by impact with a line per serious or critical one.
import { join } from "node:path";

/** Runs axe-core over `page`; resolves to `{ counts, serious, total }`. */
export async function axeCheck(page, toolsDir) {
  await page.addScriptTag({ path: join(toolsDir, "node_modules/axe-core/axe.min.js") });
  const violations = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help, target: v.nodes[0]?.target?.join(" ") }));
  });
  const counts = { critical: 0, serious: 0, moderate: 0, minor: 0 };
  for (const v of violations) counts[v.impact ?? "minor"] += v.nodes;
  const serious = violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.impact} ${v.id} (${v.nodes} node(s), e.g. ${v.target}): ${v.help}`);
  return { counts, serious, total: violations.length, all: violations };
}
