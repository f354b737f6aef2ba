// Pictures of a Group for the dashboard, as SVG strings: the history of every work item
// (its leases and epochs, what happened to it, evidence and effects), the settlement path of
// every effect, and the verified hash chain. Pure functions of events (JSON form, as the
// replica stores them) and of the state the wasm core computed; no dependencies.

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const time = (ms) => (ms ? new Date(ms).toISOString().replace("T", " ").replace("Z", "") : "");

/** A stable colour per actor, dark enough for text on a light lane (WCAG AA, 4.5:1). */
export function actorColour(actor) {
  let h = 0;
  for (const c of String(actor)) h = (h * 31 + c.codePointAt(0)) % 360;
  return `hsl(${(h * 7) % 360} 55% 30%)`;
}

/** Work items an event concerns (none: a group-level event). */
export function worksOf(kind) {
  const out = new Set();
  if (typeof kind.work === "string") out.add(kind.work);
  if (Array.isArray(kind.work)) for (const w of kind.work) if (typeof w?.work === "string") out.add(w.work);
  for (const r of [...(kind.expired ?? []), ...(Array.isArray(kind.revoked) ? kind.revoked : [])]) if (r?.work) out.add(r.work);
  if (kind.revoked?.work) out.add(kind.revoked.work);
  return [...out];
}

/** How an event ends a lease: `[lease id, reason]` pairs. */
function leaseEnds(kind) {
  const ends = [];
  const reason = {
    work_succeeded: "succeeded", work_failed: "failed", work_checkpointed: "released (checkpoint)",
    work_blocked: "released (blocked)",
  }[kind.type];
  if (reason && typeof kind.lease === "string") ends.push([kind.lease, reason]);
  for (const r of kind.expired ?? []) ends.push([r.lease, `expired → ${r.to}`]);
  if (Array.isArray(kind.revoked)) for (const r of kind.revoked) ends.push([r.lease, `revoked → ${r.to}`]);
  else if (typeof kind.revoked === "string") ends.push([kind.revoked, "revoked (cancelled)"]);
  else if (kind.revoked?.lease) ends.push([kind.revoked.lease, `revoked → ${kind.revoked.to}`]);
  return ends;
}

const END_MARK = { succeeded: "✓", failed: "✗", expired: "◷", revoked: "⊘", released: "↺" };
const MARKS = {
  work_created: ["○", "var(--queued)"], work_claimed: ["▶", "var(--leased)"], work_started: ["●", "var(--running)"],
  work_succeeded: ["✓", "var(--succeeded)"], work_failed: ["✗", "var(--failed)"], work_checkpointed: ["↺", "var(--running)"],
  work_blocked: ["‖", "var(--blocked)"], block_resolved: ["▷", "var(--queued)"], work_cancelled: ["⊘", "var(--cancelled)"],
  work_reassigned: ["⊘", "var(--waiting)"], leases_expired: ["◷", "var(--waiting)"], evidence_recorded: ["◆", "var(--blocked)"],
  effect_intended: ["□", "var(--leased)"], effect_settled: ["■", "var(--succeeded)"], effect_reconciled: ["■", "var(--waiting)"],
  work_charged: ["¤", "var(--muted)"], lease_renewed: ["+", "var(--leased)"], approval_requested: ["?", "var(--blocked)"],
  approval_decided: ["!", "var(--blocked)"], work_expanded: ["⋔", "var(--queued)"],
  group_opened: ["◉", "var(--ink)"], group_archived: ["▣", "var(--ink)"], session_replaced: ["↻", "var(--waiting)"],
  member_added: ["+", "var(--ink)"], member_removed: ["−", "var(--failed)"], role_changed: ["~", "var(--ink)"],
};

/** Height of one history lane, in pixels. */
export const LANE = 42;
const LEFT = 110, RIGHT = 110, AXIS = 26;

/**
 * The history of a Group as swimlanes, laid out once per render: one lane per work item (and
 * one for the group), x = seq. Lease bars show each epoch and its holder from claim to end
 * (✓ succeeded, ✗ failed, ↺ released, ◷ expired, ⊘ revoked); marks show every event (◆
 * evidence, □/■ effects). Drawing is separate (`historyLanesSvg`), so that a Group with
 * 100,000 items draws only the lanes in view.
 */
export function historyLayout(events, state) {
  const lanes = ["(group)", ...Object.keys(state?.work ?? {})];
  if (events.length === 0) return { lanes, empty: true, bars: [], marks: [], state };
  const first = events[0].seq;
  const last = events[events.length - 1].seq;
  const index = new Map(lanes.map((w, i) => [w, i]));
  const STEP = Math.max(9, Math.min(26, 1100 / (last - first + 1)));
  const width = LEFT + (last - first + 1) * STEP + RIGHT;
  const open = new Map();
  const bars = [];
  const marks = [];
  for (const e of events) {
    const kind = e.kind;
    for (const [lease, reason] of leaseEnds(kind)) {
      const bar = open.get(lease);
      if (!bar) continue;
      open.delete(lease);
      Object.assign(bar, { to: e.seq, reason });
    }
    if (kind.type === "work_claimed" && kind.lease && index.has(kind.work)) {
      const bar = { lane: index.get(kind.work), work: kind.work, from: e.seq, to: null, holder: kind.lease.holder, epoch: kind.lease.epoch, reason: "" };
      open.set(kind.lease.id, bar);
      bars.push(bar);
    }
    const works = worksOf(kind).filter((w) => index.has(w));
    for (const w of works.length ? works : ["(group)"]) marks.push({ lane: index.get(w), event: e });
  }
  return { lanes, empty: false, first, last, STEP, width, bars, marks, state };
}

/**
 * The lanes `from` (inclusive) to `to` (exclusive) of a history layout as one SVG whose top
 * is lane `from`; `focus` is the lane that takes the keyboard focus (roving tabindex).
 */
export function historyLanesSvg(layout, from = 0, to = layout.lanes.length, focus = from) {
  const { lanes, first, STEP, width, state } = layout;
  to = Math.min(to, lanes.length);
  const x = (seq) => LEFT + (seq - first + 0.5) * STEP;
  const y = (lane) => (lane - from) * LANE;
  const inView = (lane) => lane >= from && lane < to;
  const barSvg = layout.bars.filter((b) => inView(b.lane)).map((b) => {
    const x1 = x(b.from) - STEP / 2, x2 = b.to === null ? width - RIGHT : x(b.to) + STEP / 2;
    const end = b.to === null ? "" : END_MARK[b.reason.split(" ")[0]] ?? "";
    const label = `e${b.epoch} ${b.holder}`;
    return `<g class="lease" data-work="${esc(b.work)}" data-epoch="${b.epoch}" data-holder="${esc(b.holder)}">
      <rect x="${x1}" y="${y(b.lane) + 15}" width="${Math.max(4, x2 - x1)}" height="24" rx="5" fill="${actorColour(b.holder)}" opacity=".22" stroke="${actorColour(b.holder)}"></rect>
      <text x="${x1 + 2}" y="${y(b.lane) + 12}" class="lease-label" fill="${actorColour(b.holder)}">${esc(label)} ${end}</text>
      <title>epoch ${b.epoch}: lease of ${esc(b.holder)}, seq ${b.from}–${b.to ?? "now"}${b.reason ? ` · ${esc(b.reason)}` : " · held"}</title></g>`;
  });
  const counts = new Map();
  const markSvg = layout.marks.filter((m) => inView(m.lane)).map(({ lane, event: e }) => {
    counts.set(lane, (counts.get(lane) ?? 0) + 1);
    const [glyph, colour] = MARKS[e.kind.type] ?? ["·", "var(--muted)"];
    return `<text class="mark" x="${x(e.seq)}" y="${y(lane) + 33}" text-anchor="middle" fill="${colour}" data-seq="${e.seq}" data-type="${esc(e.kind.type)}">${glyph}<title>seq ${e.seq} · ${esc(e.kind.type)} · ${esc(e.actor)} · ${esc(time(e.at))}</title></text>`;
  });
  const laneSvg = [];
  for (let i = from; i < to; i++) {
    const w = lanes[i];
    const item = state?.work?.[w];
    const stateText = item ? `<text x="${width - RIGHT + 8}" y="${y(i) + 31}" class="lane-state" fill="var(--${esc(item.state)})">${esc(item.state)} · e${item.epoch}</text>` : "";
    const label = `${w}${item ? ` ${item.state} · e${item.epoch}` : ""} (${counts.get(i) ?? 0} event(s) in view)`;
    laneSvg.push(`<g class="lane" data-lane="${i}" data-work="${esc(w)}" role="button" tabindex="${i === focus ? 0 : -1}" aria-label="${esc(label)}"><rect x="0" y="${y(i)}" width="${width}" height="${LANE}" fill="${i % 2 ? "#fafbfc" : "#fff"}"></rect>
      <text x="8" y="${y(i) + 31}" class="lane-name">${esc(w)}</text> ${stateText}</g>`);
  }
  const height = (to - from) * LANE;
  return `<svg xmlns="http://www.w3.org/2000/svg" class="history" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="group" aria-label="history lanes ${from + 1} to ${to} of ${lanes.length}">
    ${laneSvg.join("")}${barSvg.join("")}${markSvg.join("")}</svg>`;
}

/** The seq axis under the history's lanes. */
export function historyAxisSvg(layout) {
  const { first, last, STEP, width } = layout;
  const x = (seq) => LEFT + (seq - first + 0.5) * STEP;
  const ticks = [];
  const every = Math.max(1, Math.ceil(50 / STEP / 5) * 5);
  for (let s = first; s <= last; s++) {
    if (s % every === 0 || s === first || s === last) ticks.push(`<text x="${x(s)}" y="${AXIS - 8}" text-anchor="middle" class="tick">${s}</text>`);
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" class="axis" width="${width}" height="${AXIS}" viewBox="0 0 ${width} ${AXIS}" aria-hidden="true">
    <text x="8" y="${AXIS - 8}" class="tick">seq</text>${ticks.join("")}</svg>`;
}

/** The whole history (every lane, then the axis): for a small Group, and for tests. */
export function historySvg(events, state) {
  if (events.length === 0) return `<p class="empty">no events yet</p>`;
  const layout = historyLayout(events, state);
  return historyLanesSvg(layout) + historyAxisSvg(layout);
}

/** Each effect's path: intended → settled, or intended → unknown → reconciled (happened or not). */
export function effectsSvg(state) {
  const rows = Object.entries(state?.work ?? {}).flatMap(([work, w]) => Object.entries(w.effects ?? {}).map(([key, e]) => ({ work, key, ...e })));
  if (rows.length === 0) return `<p class="empty">no effects recorded</p>`;
  const paths = {
    intended: ["intended"], settled: ["intended", "settled"], abandoned: ["intended", "abandoned"],
    unknown: ["intended", "unknown"], reconciled: ["intended", "unknown", "reconciled"],
  };
  const ROW = 62, LEFT = 185, STEP = 95, width = LEFT + 2 * STEP + 60;
  const out = rows.map((e, i) => {
    const cy = 22 + i * ROW;
    const steps = paths[e.status] ?? [e.status];
    const nodes = steps.map((s, j) => {
      const cx = LEFT + j * STEP;
      const current = j === steps.length - 1;
      const note = s === "reconciled" ? (e.happened ? "it happened" : "it did not happen") : "";
      return `${j > 0 ? `<line x1="${cx - STEP + 9}" y1="${cy}" x2="${cx - 9}" y2="${cy}" class="effect-edge"></line>` : ""}
        <circle cx="${cx}" cy="${cy}" r="${current ? 8 : 6}" class="pill-dot ${esc(s)}"></circle>
        <text x="${cx}" y="${cy + 22}" text-anchor="middle" class="effect-step${current ? " current" : ""}">${esc(s)}</text>
        ${note ? `<text x="${cx}" y="${cy + 35}" text-anchor="middle" class="effect-step current">${esc(note)}</text>` : ""}`;
    });
    return `<g class="effect" data-status="${esc(e.status)}" data-work="${esc(e.work)}">
      <text x="0" y="${cy - 2}" class="lane-name">${esc(e.work)} / ${esc(e.op)}</text>
      <text x="0" y="${cy + 13}" class="tick">${esc(e.mode)}${e.irreversible ? " · irreversible" : ""} · epoch ${e.epoch}</text>
      ${nodes.join("")}<title>effect ${esc(e.key)}</title></g>`;
  });
  const height = rows.length * ROW + 10;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="effects and their settlement">${out.join("")}</svg>`;
}

/** The state colours, as a legend for the graph and the history. */
export function legendHtml() {
  const states = ["queued", "leased", "running", "blocked", "waiting", "succeeded", "failed", "cancelled"];
  return (
    states.map((s) => `<span class="legend-item"><i style="background: var(--${s})"></i>${s}</span>`).join("") +
    `<span class="legend-item">⋔ seq N: created by an expansion of the outcome at seq N</span>`
  );
}
