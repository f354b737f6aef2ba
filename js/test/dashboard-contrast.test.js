// The dashboard's state colours meet WCAG 2 AA contrast (4.5:1 for text), computed from the
// CSS variables in js/dashboard/dashboard.css: white text on each state colour (pills, graph
// nodes) and each state colour as text on the card and the lanes (the history's lane states);
// the muted ink on the page and the card; and every actor colour (lease labels) on a lane.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { actorColour } from "../dashboard/views.js";

const css = readFileSync(new URL("../dashboard/dashboard.css", import.meta.url), "utf8");
const root = css.slice(css.indexOf(":root"), css.indexOf("}", css.indexOf(":root")));
const long = (hex) => (hex.length === 4 ? `#${[...hex.slice(1)].map((c) => c + c).join("")}` : hex);
const vars = Object.fromEntries([...root.matchAll(/--([\w-]+):\s*(#[0-9a-fA-F]{6}|#[0-9a-fA-F]{3})\b/g)].map((m) => [m[1], long(m[2])]));
const STATES = ["queued", "leased", "running", "blocked", "waiting", "succeeded", "failed", "cancelled", "abandoned",
  "intended", "settled", "unknown", "reconciled"];
const LANES = ["#ffffff", "#fafbfc"]; // the two lane backgrounds (views.js)

const rgbOfHex = (hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
function rgbOfHsl(h, s, l) {
  const a = s * Math.min(l, 1 - l);
  const f = (n) => {
    const k = (n + h / 30) % 12;
    return Math.round(255 * (l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1))));
  };
  return [f(0), f(8), f(4)];
}
const luminance = ([r, g, b]) => {
  const lin = (c) => (c / 255 <= 0.03928 ? c / 255 / 12.92 : ((c / 255 + 0.055) / 1.055) ** 2.4);
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
};
/** The WCAG 2 contrast ratio of two sRGB colours. */
export function contrast(a, b) {
  const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
  return (x + 0.05) / (y + 0.05);
}

test("contrast: the formula matches known ratios", () => {
  assert.equal(contrast([0, 0, 0], [255, 255, 255]).toFixed(2), "21.00");
  assert.equal(contrast(rgbOfHex("#777777"), [255, 255, 255]).toFixed(2), "4.48");
});

test("every state colour has a variable, and meets 4.5:1 under white text and as text on the card and lanes", () => {
  const report = [];
  for (const s of STATES) {
    assert.ok(vars[s], `--${s} is missing from :root`);
    for (const bg of ["#ffffff", vars.card, ...LANES]) {
      const r = contrast(rgbOfHex(vars[s]), rgbOfHex(bg));
      report.push(`${s} ${vars[s]} / ${bg}: ${r.toFixed(2)}`);
      assert.ok(r >= 4.5, `--${s} ${vars[s]} against ${bg}: ${r.toFixed(2)} < 4.5`);
    }
  }
  console.log(report.filter((_, i) => i % 4 === 0).join("\n"));
});

test("muted and ink text meet 4.5:1 on the page and on the card", () => {
  for (const ink of ["muted", "ink"]) {
    for (const bg of ["bg", "card"]) {
      const r = contrast(rgbOfHex(vars[ink]), rgbOfHex(vars[bg]));
      assert.ok(r >= 4.5, `--${ink} on --${bg}: ${r.toFixed(2)}`);
    }
  }
});

test("every actor colour meets 4.5:1 as text on either lane", () => {
  const hsl = /^hsl\((\d+) (\d+)% (\d+)%\)$/;
  for (let i = 0; i < 720; i++) {
    const colour = actorColour(`actor-${i}`);
    const [, h, s, l] = hsl.exec(colour).map(Number);
    for (const bg of LANES) {
      const r = contrast(rgbOfHsl(h, s / 100, l / 100), rgbOfHex(bg));
      assert.ok(r >= 4.5, `${colour} on ${bg}: ${r.toFixed(2)}`);
    }
  }
});
