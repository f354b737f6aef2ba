// The mwp dashboard: replays a Group's history in the browser through the wasm core. Every
// event's id and chain is verified client-side by the replica, and a snapshot is restored
// only if its signature verifies under the server's authority key (remembered per server on
// first use); the latest signed snapshot is verified too and compared with the replay. The
// projection is cached in IndexedDB, so a reload fetches only new events. Then it follows
// the live tail. Pictures (views.js): the work graph, the history of leases and epochs,
// the effects' settlement. `mwp serve` embeds this folder (host-native/build.rs).
// The live tail reconnects (live.js); the history draws only the lanes in view, so a Group
// of 100,000 items stays usable; the graph and the history are used from the keyboard.
// Signed heads (SPEC §8a): the heads of pages and of the tail are offered to the replica
// under the trusted key; the view says how far they verify the history ("verified through
// seq N") and marks the events past it as provisional; a FORK or HEAD_INVALID stops
// everything with a loud error (and the fork proof to download when there is one).
// Static mode, `?source=URL&authority=HEX[&group=G][&start=genesis]`: the Group is read from
// a static export (SPEC §8b) on any file host with `Replica.fromStatic`, verified through its
// signed head under the key given here; no mwp server is asked anything, and there is no tail.
import { Client, IdbReplica, Replica, canonical, encodeEvent, verifySnapshot } from "mwp";
import { followTail } from "./live.js";
import { LANE, effectsSvg, historyAxisSvg, historyLanesSvg, historyLayout, legendHtml, worksOf } from "./views.js";

const params = new URLSearchParams(location.search);
const server = params.get("server") ?? location.origin;
/** Static mode: the export's folder, or null. */
const source = params.get("source");
// An operator token (docs/http.md, "Access"): `?token=…` is moved at once into this tab's
// sessionStorage and out of the address bar (and so out of history and bookmarks); the
// token field sets or clears it.
const tokenKey = `mwp.token ${server}`;
if (params.has("token")) {
  sessionStorage.setItem(tokenKey, params.get("token"));
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", `${location.pathname}${rest ? `?${rest}` : ""}${location.hash}`);
}
const token = sessionStorage.getItem(tokenKey) || undefined;
// Or a member's own key: the dashboard then signs each read as that member (docs/http.md,
// "Access"), which reads that member's group only. `?member=ACTOR&key=HEX` is moved into
// sessionStorage the same way; the key never leaves this tab.
const signerKey = `mwp.signer ${server}`;
if (params.has("member") && params.has("key")) {
  sessionStorage.setItem(signerKey, JSON.stringify({ actor: params.get("member"), key: params.get("key") }));
  params.delete("member");
  params.delete("key");
  const rest = params.toString();
  history.replaceState(null, "", `${location.pathname}${rest ? `?${rest}` : ""}${location.hash}`);
}
const signer = token ? undefined : JSON.parse(sessionStorage.getItem(signerKey) ?? "null") ?? undefined;
const client = new Client(server, { token, signer });
const $ = (id) => document.getElementById(id);
const TIMELINE_EVENTS = 200;
const HISTORY_EVENTS = 400;
// A Group may hold 100,000 items: the graph draws the first GRAPH_ITEMS, the tables the first
// TABLE_ROWS (each says so), and the history only the lanes in view plus HISTORY_MARGIN.
const GRAPH_ITEMS = 300;
const TABLE_ROWS = 500;
const HISTORY_MARGIN = 10;
// The IndexedDB cache writes the whole state as a checkpoint every CHECKPOINT_EVERY events: at
// the default 1,000, replaying 100,000 items would write 100 ever larger states.
const CHECKPOINT_EVERY = 20_000;
const authorityKeyName = `mwp:authority-key:${server}`;
let session = null;

/**
 * Shows what the dashboard is doing. `phase` is the stage it names, set on `<body>` as
 * `data-phase` in the same step as the text, so whoever reads it (a person or a test) sees
 * the two agree: `cache` (showing the local cache), `fetching`, `live` (replayed and
 * verified, following the tail), `static` (read from a static export, final) or `error`.
 */
function setStatus(text, kind = "", phase = kind || "fetching") {
  const el = $("status");
  el.textContent = text;
  el.className = `status ${kind}`;
  document.body.dataset.phase = phase;
}

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const short = (hex) => (hex ? `${hex.slice(0, 8)}…` : "");
const pill = (s) => `<span class="pill ${esc(s)}">${esc(s)}</span>`;
const time = (ms) => (ms ? new Date(ms).toISOString().replace("T", " ").replace("Z", "") : "");
/**
 * A table of the first TABLE_ROWS of `all`, each made a row of cells by `toRow`; `rowClass`
 * may name a class for a row.
 */
const table = (head, all, toRow = (r) => r, rowClass = () => "") => {
  const first = all.length > TABLE_ROWS ? all.slice(0, TABLE_ROWS) : all;
  const classes = first.map(rowClass);
  const rows = first.map(toRow);
  const note = rows.length < all.length ? `<p class="note">showing the first ${rows.length} of ${all.length} rows</p>` : "";
  return rows.length === 0
    ? `<p class="empty">none</p>`
    : `${note}<table><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join("")}</tr></thead><tbody>${rows
        .map((r, i) => `<tr${classes[i] ? ` class="${classes[i]}"` : ""}>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`)
        .join("")}</tbody></table>`;
};

/**
 * Where each item an expansion created came from: work → `{seq, trigger, from}` (the
 * `work_expanded` event's seq, the terminal event that triggered it, and that event's work
 * item). Each expansion's event is found through its receipt; at most GRAPH_ITEMS of them.
 */
async function expansionOrigins(replica, state) {
  const origins = new Map();
  const cache = (session.expansionEvents ??= new Map());
  for (const [trigger, x] of Object.entries(state.expansions ?? {}).slice(0, GRAPH_ITEMS)) {
    const seq = state.receipts?.[x.actor]?.[x.action]?.seq;
    if (!seq) continue;
    if (!cache.has(seq)) cache.set(seq, (await replica.events(seq - 1, 1))[0] ?? null);
    const e = cache.get(seq);
    if (e?.kind.type !== "work_expanded") continue;
    for (const w of e.kind.work) origins.set(w.work, { seq, trigger: Number(trigger), from: state.terminal?.[trigger] ?? "?" });
  }
  return origins;
}

/** The work graph as SVG: columns by dependency depth, edges from each `after` item; an item
 * an expansion created is marked with the event that triggered it (`origins`). */
export function graphSvg(state, frontier, focus, origins = new Map()) {
  const work = state?.work ?? {};
  const all = Object.keys(work);
  if (all.length === 0) return `<p class="empty">no work items yet</p>`;
  const ids = all.length > GRAPH_ITEMS ? all.slice(0, GRAPH_ITEMS) : all;
  const shown = new Set(ids);
  const depth = new Map();
  const depthOf = (id, seen = new Set()) => {
    if (depth.has(id)) return depth.get(id);
    if (seen.has(id) || !work[id]) return 0;
    seen.add(id);
    const d = Math.max(-1, ...work[id].after.filter((a) => shown.has(a)).map((a) => depthOf(a, seen))) + 1;
    depth.set(id, d);
    return d;
  };
  const columns = [];
  for (const id of ids) (columns[depthOf(id)] ??= []).push(id);
  const W = 170, H = 42, GX = 70, GY = 18, PAD = 12;
  const pos = new Map();
  columns.forEach((col, x) => col.forEach((id, y) => pos.set(id, { x: PAD + x * (W + GX), y: PAD + y * (H + GY), col: x, row: y })));
  const width = PAD * 2 + columns.length * (W + GX) - GX;
  const height = PAD * 2 + Math.max(...columns.map((c) => c.length)) * (H + GY) - GY;
  const edges = [];
  for (const id of ids) {
    for (const dep of work[id].after) {
      const a = pos.get(dep), b = pos.get(id);
      if (!a || !b) continue;
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x - 4, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
      edges.push(`<path class="edge" d="M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}"><title>${esc(dep)} → ${esc(id)}</title></path>`);
    }
  }
  const front = new Set(frontier);
  const tabbable = shown.has(focus) ? focus : columns[0][0];
  const nodes = ids.map((id) => {
    const { x, y, col, row } = pos.get(id);
    const w = work[id];
    const holder = w.lease ? ` · ${w.lease.holder}` : "";
    const o = origins.get(id);
    const made = o ? `created by the expansion at seq ${o.seq}, triggered by seq ${o.trigger} (${o.from})` : "";
    const label = `${id}${o ? ` ⋔ seq ${o.trigger}` : ""} ${w.state} · epoch ${w.epoch}${holder}${front.has(id) ? " (on the frontier)" : ""}${o ? `; ${made}` : ""}`;
    return `<g class="node${front.has(id) ? " frontier" : ""}${o ? " expanded" : ""}" data-work="${esc(id)}" data-state="${esc(w.state)}" data-col="${col}" data-row="${row}"${o ? ` data-trigger="${o.trigger}"` : ""} role="button" tabindex="${id === tabbable ? 0 : -1}" aria-label="${esc(label)}">
      <rect x="${x}" y="${y}" width="${W}" height="${H}" fill="var(--${esc(w.state)})"></rect>
      <text x="${x + 8}" y="${y + 17}" fill="#fff" font-weight="600">${esc(id)}</text>${o ? `
      <text class="trigger" x="${x + W - 8}" y="${y + 17}" fill="#fff" text-anchor="end">⋔ seq ${o.trigger}</text>` : ""}
      <text x="${x + 8}" y="${y + 33}" fill="#fff">${esc(w.state)} · epoch ${w.epoch}${esc(holder)}</text>
      <title>${esc(id)}: ${esc(w.state)}, attempts ${w.attempts}/${w.contract.max_attempts}, spent ${w.spent}/${w.contract.cost_budget}${o ? `; ${esc(made)}` : ""}</title>
    </g>`;
  });
  const note = ids.length < all.length ? `<p class="note">showing the first ${ids.length} of ${all.length} items; the history lists every one</p>` : "";
  return `${note}<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="group" aria-label="work graph">
    <defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#7d8597"/></marker></defs>
    ${edges.join("")}${nodes.join("")}</svg>`;
}

function kindSummary(kind) {
  const skip = new Set(["type", "members", "work"]);
  const parts = [];
  if (typeof kind.work === "string") parts.push(`work ${kind.work}`);
  if (Array.isArray(kind.work)) parts.push(`${kind.work.length} items`);
  if (kind.lease?.holder) parts.push(`lease → ${kind.lease.holder} (epoch ${kind.lease.epoch})`);
  if (Array.isArray(kind.expired)) parts.push(kind.expired.map((e) => `${e.work} → ${e.to}`).join(", "));
  for (const [k, v] of Object.entries(kind)) {
    if (skip.has(k) || typeof v === "object" || parts.length > 3) continue;
    parts.push(`${k} ${v}`);
  }
  return esc(parts.join(" · "));
}

/**
 * Draws every picture at the replica's cursor. Each render is measured as the User Timing
 * entry `mwp:render` (and the replay as `mwp:replay`), for whoever profiles a large Group.
 */
async function render() {
  const started = performance.now();
  const { replica, group } = session;
  const state = replica.state();
  const now = Date.now();
  const frontier = state ? replica.frontier(now) : [];
  if (!state) {
    $("summary").innerHTML = `<p class="empty">group ${esc(group)} has no events yet</p>`;
    document.body.dataset.cursor = String(replica.cursor);
    return;
  }
  const work = Object.entries(state.work);
  const stateHash = replica.stateHash();
  const count = (s) => work.filter(([, w]) => w.state === s).length;
  $("summary").innerHTML = `<div class="summary">
    <div><b>${esc(state.group)}</b>group · org ${esc(state.org)} · mission ${esc(state.mission)}</div>
    <div><b>${state.seq}</b>events</div>
    <div><b>${Math.max(0, replica.cursor - replica.verifiedThrough)}</b>provisional</div>
    <div><b>${work.length}</b>work items</div>
    <div><b>${count("running") + count("leased")}</b>leased or running</div>
    <div><b>${count("succeeded")}</b>succeeded</div>
    <div><b>${frontier.length}</b>on the frontier</div>
    <div><b class="mono">${short(stateHash)}</b>state hash</div>
    <div><b>${state.archived ? "archived" : "open"}</b>status</div></div>`;
  const graphHadFocus = $("graph").contains(document.activeElement);
  $("graph").innerHTML = graphSvg(state, frontier, session.graphFocus, await expansionOrigins(replica, state));
  if (graphHadFocus) $("graph").querySelector(".node[tabindex='0']")?.focus();
  $("legend").innerHTML = legendHtml();
  $("leases").innerHTML = table(
    ["work", "state", "epoch", "holder", "session", "expires", "attempts", "spent"],
    work,
    ([id, w]) => [
      esc(id), pill(w.state), w.epoch, esc(w.lease?.holder ?? ""), w.lease?.session ?? "",
      w.lease ? esc(time(w.lease.expires_at)) : "", `${w.attempts}/${w.contract.max_attempts}`, `${w.spent}/${w.contract.cost_budget}`,
    ],
  );
  $("effects").innerHTML = table(
    ["work", "op", "epoch", "mode", "status", "happened", "key"],
    work.flatMap(([id, w]) =>
      Object.entries(w.effects).map(([key, e]) => [
        esc(id), esc(e.op), e.epoch, esc(e.mode) + (e.irreversible ? " · irreversible" : ""), pill(e.status),
        e.happened === undefined ? "" : String(e.happened), `<code title="${esc(key)}">${short(key)}</code>`,
      ]),
    ),
  );
  $("members").innerHTML = table(
    ["actor", "role", "session", "status"],
    Object.entries(state.members).map(([a, m]) => [esc(a), esc(m.role), m.session, m.removed ? "removed" : ""]),
  );
  const events = await replica.events(Math.max(0, replica.cursor - HISTORY_EVENTS));
  session.events = events;
  drawHistory(historyLayout(events, state));
  if (session.selected !== undefined) showDetails(session.selected, state);
  $("evidence").innerHTML = table(["seq", "work", "actor", "what"], (state.evidence ?? []).map((n) => [n.seq, esc(n.work), esc(n.actor), evidenceText(n, events)]));
  $("effects-picture").innerHTML = effectsSvg(state);
  await renderVerification(stateHash);
  // Events past the last verified head are provisional: marked by a class and in words.
  const verifiedThrough = replica.verifiedThrough;
  const provisional = (e) => e.seq > verifiedThrough;
  $("timeline").innerHTML = table(
    ["seq", "at", "actor", "event", "aggregate", "detail"],
    events.slice(-TIMELINE_EVENTS).reverse(),
    (e) => [
      `${e.seq}${provisional(e) ? `<span class="provisional-mark">provisional</span>` : ""}`,
      esc(time(e.at)), esc(e.actor), pill(e.kind.type), `${esc(e.aggregate)}@${e.revision}`, kindSummary(e.kind),
    ],
    (e) => (provisional(e) ? "provisional" : ""),
  );
  // Everything above shows the state at this cursor. Whoever waits for a final view waits for
  // `data-phase="live"` as well: the status line is written after the last render.
  document.body.dataset.cursor = String(replica.cursor);
  performance.measure("mwp:render", { start: started });
}

/**
 * Draws the history: a spacer as tall as every lane keeps the scroll height, and one SVG
 * holds only the lanes in view plus HISTORY_MARGIN above and below (redrawn on scroll).
 */
function drawHistory(layout) {
  const spacer = $("history-spacer");
  if (layout.empty) {
    session.history = null;
    spacer.style.height = "";
    spacer.innerHTML = `<p class="empty">no events yet</p>`;
    $("history-axis").innerHTML = "";
    return;
  }
  const focus = Math.min(session.history?.focus ?? 0, layout.lanes.length - 1);
  session.history = { layout, focus, from: -1, to: -1 };
  spacer.style.height = `${layout.lanes.length * LANE}px`;
  spacer.style.width = `${layout.width}px`;
  $("history-axis").innerHTML = historyAxisSvg(layout);
  drawHistoryWindow(true);
}

function drawHistoryWindow(force = false) {
  const h = session?.history;
  if (!h) return;
  const box = $("history");
  const n = h.layout.lanes.length;
  const from = Math.max(0, Math.floor(box.scrollTop / LANE) - HISTORY_MARGIN);
  const to = Math.min(n, Math.ceil((box.scrollTop + (box.clientHeight || 440)) / LANE) + HISTORY_MARGIN);
  if (!force && from === h.from && to === h.to) return;
  const hadFocus = box.contains(document.activeElement);
  Object.assign(h, { from, to });
  const spacer = $("history-spacer");
  spacer.innerHTML = historyLanesSvg(h.layout, from, to, h.focus >= from && h.focus < to ? h.focus : from);
  spacer.firstElementChild.style.top = `${from * LANE}px`;
  if (hadFocus) spacer.querySelector(`[data-lane="${h.focus}"]`)?.focus();
}

/** Moves the history's keyboard focus to lane `i`, scrolling it into view. */
function focusLane(i) {
  const h = session.history;
  h.focus = Math.max(0, Math.min(h.layout.lanes.length - 1, i));
  const box = $("history");
  const top = h.focus * LANE;
  const view = box.clientHeight - $("history-axis").offsetHeight;
  if (top < box.scrollTop) box.scrollTop = top;
  else if (top + LANE > box.scrollTop + view) box.scrollTop = top + LANE - view;
  drawHistoryWindow(true);
  $("history-spacer").querySelector(`[data-lane="${h.focus}"]`)?.focus();
}

function onHistoryKey(e) {
  const h = session?.history;
  const lane = e.target.closest?.(".lane");
  if (!h || !lane) return;
  const i = Number(lane.dataset.lane);
  const page = Math.max(1, Math.floor($("history").clientHeight / LANE) - 1);
  const to = { ArrowDown: i + 1, ArrowUp: i - 1, PageDown: i + page, PageUp: i - page, Home: 0, End: h.layout.lanes.length - 1 }[e.key];
  if (to !== undefined) {
    e.preventDefault();
    focusLane(to);
  } else if (e.key === "Enter" || e.key === " ") {
    e.preventDefault();
    showDetails(lane.dataset.work);
  }
}

function onGraphKey(e) {
  const node = e.target.closest?.(".node");
  if (!node) return;
  const col = Number(node.dataset.col), row = Number(node.dataset.row);
  const at = (c, r) => $("graph").querySelector(`.node[data-col="${c}"][data-row="${r}"]`);
  const column = (c) => $("graph").querySelectorAll(`.node[data-col="${c}"]`).length;
  let next = null;
  if (e.key === "ArrowDown") next = at(col, row + 1);
  else if (e.key === "ArrowUp") next = at(col, row - 1);
  else if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
    const c = col + (e.key === "ArrowRight" ? 1 : -1);
    if (column(c) > 0) next = at(c, Math.min(row, column(c) - 1));
  } else if (e.key === "Enter" || e.key === " ") {
    e.preventDefault();
    showDetails(node.dataset.work);
    return;
  } else return;
  e.preventDefault();
  if (!next) return;
  node.setAttribute("tabindex", "-1");
  next.setAttribute("tabindex", "0");
  next.focus();
  session.graphFocus = next.dataset.work;
}

/** Opens a work item (or the group) in the details card. */
function showDetails(id, state = session?.replica.state()) {
  if (!session) return;
  session.selected = id;
  const w = state?.work?.[id];
  const events = (session.events ?? []).filter((e) => (id === "(group)" ? worksOf(e.kind).length === 0 : worksOf(e.kind).includes(id)));
  for (const el of document.querySelectorAll(".node.selected, .lane.selected")) el.classList.remove("selected");
  for (const el of document.querySelectorAll(`.node[data-work="${CSS.escape(id)}"], .lane[data-work="${CSS.escape(id)}"]`)) el.classList.add("selected");
  const rows = w
    ? [
        ["work item", esc(id)], ["state", pill(w.state)], ["epoch", w.epoch], ["attempts", `${w.attempts}/${w.contract.max_attempts}`],
        ["spent", `${w.spent}/${w.contract.cost_budget}`], ["after", esc(w.after.join(", ") || "nothing")],
        ["lease", w.lease ? `${esc(w.lease.holder)} · session ${w.lease.session} · expires ${esc(time(w.lease.expires_at))}` : "none"],
        ["effects", Object.keys(w.effects).length],
      ]
    : [["group", esc(state?.group ?? id)], ["members", Object.keys(state?.members ?? {}).length]];
  rows.push(["events in view", events.length ? events.slice(-20).map((e) => `${e.seq} ${esc(e.kind.type)}`).join(", ") : "none"]);
  $("details").dataset.work = id;
  $("details").innerHTML = `<dl>${rows.map(([k, v]) => `<dt>${k}</dt><dd>${v}</dd>`).join("")}</dl>`;
}

/** An evidence record told from its event: which late command, under which stale lease. */
function evidenceText(record, events) {
  const kind = events.find((e) => e.seq === record.seq)?.kind;
  if (kind?.type !== "evidence_recorded") return esc(JSON.stringify(record));
  const claim = events.find((e) => e.kind.type === "work_claimed" && e.kind.lease?.id === kind.lease)?.kind.lease;
  const lease = claim ? `the epoch-${claim.epoch} lease of ${claim.holder}` : `lease ${short(kind.lease)}`;
  const value = kind.of === "submit" ? kind.result : kind.error;
  return `<span class="wrap">late ${esc(kind.of)} under ${esc(lease)}: ${esc(JSON.stringify(value ?? null))}; the outcome stands</span>`;
}

/**
 * The line that says how far signed heads verify the history: "verified through seq N,
 * signed at T" (T: the verified head's `at`), and how many events after it are provisional.
 */
function renderHeadLine() {
  const { replica } = session;
  const head = replica.verifiedHead;
  const through = replica.verifiedThrough;
  const after = Math.max(0, replica.cursor - through);
  const line = $("head-line");
  line.className = `head-line${head ? "" : " none"}`;
  line.textContent = head
    ? `verified through seq ${through}, signed at ${time(head.at)} UTC by the authority key ${short(session.trustedKey)}${after > 0 ? `; ${after} later event(s) provisional` : ""}`
    : `no signed head verified yet: all ${replica.cursor} event(s) provisional`;
  document.body.dataset.verifiedThrough = String(through);
}

/**
 * A failure of the history itself (a FORK, a head or file that does not verify): the
 * dashboard stops in the error phase, says so loudly, and offers the fork proof (canonical
 * CBOR, checkable by anyone with `verifyForkProof`) when the error carries one.
 */
function showFatal(e) {
  if (session) session.abort.abort();
  const code = e?.code ?? e?.name ?? "ERROR";
  const alert = $("alert");
  const file = e?.details?.file ? ` (file ${esc(e.details.file)})` : "";
  let html = `<b>${esc(code)}</b>${esc(e?.message ?? e)}${file}`;
  const proof = e?.details?.proof;
  if (typeof proof === "string" && /^(?:[0-9a-f]{2})+$/.test(proof)) {
    const bytes = Uint8Array.from(proof.match(/../g), (b) => parseInt(b, 16));
    const url = URL.createObjectURL(new Blob([bytes], { type: "application/cbor" }));
    html += `<a id="fork-proof" href="${url}" download="mwp-fork-proof.cbor">download the fork proof</a>`;
  }
  alert.innerHTML = html;
  alert.hidden = false;
  document.body.dataset.verified = "false";
  document.body.dataset.error = code;
  setStatus(`${code}: ${e?.message ?? e}${file ? ` ${file}` : ""}; not showing this history as verified`, "error");
}

/** What this browser verified: the chain (by the wasm replica) and the latest signed snapshot. */
async function renderVerification(stateHash) {
  renderHeadLine();
  const { replica, verified: v } = session;
  // The first seq held locally changes only with a restore (open() forgets it then): read once.
  session.base ??= ((await replica.events(0, 1))[0]?.seq ?? replica.cursor + 1) - 1;
  const base = session.base;
  const checks = [{
    what: "chain", result: "ok",
    text: `${replica.cursor - base} event(s) applied by the wasm core: each event's id is the hash of its bytes and names the previous event's id${base > 0 ? `; seq 1..${base} come from a signed snapshot` : ""}`,
  }];
  const head = replica.verifiedHead;
  checks.push(head
    ? { what: "head", result: "ok", text: `verified through seq ${replica.verifiedThrough}: the head signed at ${esc(time(head.at))} UTC under the trusted key names the id of event ${head.seq}` }
    : { what: "head", result: "none", text: "no signed head verified yet" });
  if (v.source) {
    checks.push({ what: "source", result: "ok", text: `read from the static export ${esc(v.source)}: every file's bytes hash to its name; no mwp server was asked` });
  }
  if (v.snapshot) {
    const s = v.snapshot;
    const atHead = s.seq === replica.cursor;
    const same = s.state_hash === stateHash;
    checks.push({
      what: "snapshot", result: atHead && !same ? "failed" : "ok",
      text: `seq ${s.seq}, signed by ${short(s.signer)} (the server's authority key): signature verified${atHead ? (same ? "; its state hash equals the replay's" : "; its state hash DIFFERS from the replay's") : `; the replay is ${replica.cursor - s.seq} event(s) past it`}`,
    });
  } else if (v.snapshotError) {
    checks.push({ what: "snapshot", result: v.snapshotError.code === "NOT_FOUND" ? "none" : "failed", text: esc(v.snapshotError.message) });
  }
  document.body.dataset.verified = String(checks.every((c) => c.result !== "failed"));
  const mark = { ok: "✓", none: "–", failed: "✗" };
  $("verification").innerHTML = checks
    .map((c) => `<div class="check ${c.result}" data-check="${c.what}" data-result="${c.result}"><b>${mark[c.result]} ${c.what}</b> ${c.text}</div>`)
    .join("");
}

/** Fetches the latest signed snapshot and checks it against the trusted key, in the browser. */
async function verifyLatestSnapshot(trustedKey) {
  const { replica, group } = session;
  const org = replica.state()?.org;
  if (!org) return;
  try {
    const bytes = await client.snapshot(group);
    session.verified.snapshot = verifySnapshot(bytes, { trustedKey, org, group });
  } catch (e) {
    session.verified.snapshotError = { code: e.code ?? e.name, message: e.message };
  }
}

// Live events ask for a render; at most one runs at a time, and those asked for meanwhile
// become one more render after it (a render of a 100,000-item Group takes seconds).
let renderQueued = false;
let rendering = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  if (!rendering) requestAnimationFrame(runRender);
}

async function runRender() {
  renderQueued = false;
  rendering = true;
  try {
    await render();
  } catch (e) {
    setStatus(`render failed: ${e.message}`, "error");
  } finally {
    rendering = false;
    if (renderQueued) requestAnimationFrame(runRender);
  }
}

async function open(group, trustedKey) {
  setStatus(`opening group ${group}…`, "", "fetching");
  delete document.body.dataset.cursor;
  if (session) {
    session.abort.abort();
    await session.replica.close();
  }
  const replica = await IdbReplica.open(`mwp-dashboard ${server} ${group}`, group, { checkpointEvery: CHECKPOINT_EVERY });
  const abort = new AbortController();
  session = { group, replica, abort, verified: {}, trustedKey };
  const cached = replica.cursor;
  const org = params.get("org") ?? replica.state()?.org;
  // A snapshot names its org: when none is known yet, read it from the snapshot itself; the
  // signature check against the trusted key is what makes it trustworthy.
  const target = {
    get group() { return replica.group; },
    get cursor() { return replica.cursor; },
    offerBatch: (events) => replica.offerBatch(events),
    offerHead: (head, key) => replica.offerHead(head, key),
    restore: (bytes, o) => replica.restore(bytes, { ...o, org: o.org ?? canonical.decode(bytes).org }),
  };
  setStatus(`${cached} events from the local cache; fetching new ones…`, "", cached > 0 ? "cache" : "fetching");
  if (cached > 0) await render();
  const replayStarted = performance.now();
  // A large Group takes a while: the status line counts what is replayed and verified so far.
  const progress = () => setStatus(`${replica.cursor} events replayed and verified (${cached} from the local cache); fetching more…`, "", cached > 0 ? "cache" : "fetching");
  const { restored } = await client.replay(target, { trustedKey, org, signal: abort.signal, onEvents: progress });
  performance.measure("mwp:replay", { start: replayStarted });
  if (restored) delete session.base;
  const fetched = replica.cursor - cached;
  await verifyLatestSnapshot(trustedKey);
  await render();
  setStatus(`seq ${replica.cursor} · ${cached} cached, ${fetched} fetched${restored ? " (restored a signed snapshot)" : ""} · key ${short(trustedKey)} · live`, "live");
  followTail({
    // The dashboard reconnects itself (live.js), showing each state: the client's own retry off.
    // Each signed head of the stream is offered after the events before it (FORK and
    // HEAD_INVALID end the tail: live.js).
    tail: (after, onOpen) => client.tail(group, {
      after, signal: abort.signal, onOpen, retry: false,
      onHead: async (head) => {
        await replica.offerHead(head, trustedKey);
        scheduleRender();
      },
    }),
    cursor: () => replica.cursor,
    offer: async (event) => {
      const summary = await replica.offerBatch([encodeEvent(event)]);
      if (summary.rejected > 0) {
        const error = summary.errors[0].error;
        // An event that contradicts a signed head is a fork, not a bad delivery.
        throw Object.assign(new Error(`event ${event.seq} rejected: ${error.message}`), { code: error.code === "FORK" ? "FORK" : "REJECTED", details: error });
      }
      setStatus(`seq ${replica.cursor} · live · key ${short(trustedKey)}`, "live");
      scheduleRender();
    },
    onState: (s) => session?.abort === abort && showConnection(s),
    signal: abort.signal,
  }).catch((e) => setStatus(`live tail ended: ${e.message}`, "error"));
}

/**
 * Shows the live tail's state in its own live region, and on `<body>` as `data-connection`
 * (`connected`, `reconnecting`, `gap`, `ended`) for whoever waits for it. A gap or an end is
 * an error of the whole view: the status line says so too.
 */
function showConnection(s) {
  const el = $("connection");
  el.className = `connection ${s.state}`;
  document.body.dataset.connection = s.state;
  if (s.state === "connected") el.textContent = `live tail connected after seq ${s.after}`;
  else if (s.state === "reconnecting") {
    el.textContent = `live tail lost (${s.reason}); reconnecting in ${(s.delay / 1000).toFixed(1)} s (attempt ${s.attempt}), after seq ${s.after}`;
  } else {
    el.textContent = `live tail stopped: ${s.error.message}`;
    if (s.error?.code === "FORK" || s.error?.code === "HEAD_INVALID") return showFatal(s.error);
    setStatus(`${s.state === "gap" ? "gap in the live tail" : "live tail ended"}: ${s.error.message}; reload to replay`, "error");
  }
}

/**
 * Forgets the remembered authority key of this server, and the events cached under it (they
 * were verified against that key), then starts again: the next load trusts the key the
 * server names then.
 */
async function forgetKey() {
  localStorage.removeItem(authorityKeyName);
  if (session) {
    session.abort.abort();
    await session.replica.close();
    session = null;
  }
  const prefix = `mwp-dashboard ${server} `;
  for (const db of (await indexedDB.databases?.()) ?? []) {
    if (!db.name?.startsWith(prefix)) continue;
    await new Promise((resolve) => {
      const req = indexedDB.deleteDatabase(db.name);
      req.onsuccess = req.onerror = req.onblocked = resolve;
    });
  }
  setStatus("the remembered authority key is forgotten; starting again…", "", "fetching");
  location.reload();
}

/**
 * Static mode: reads the Group from the export at `source` (a plain file host) with
 * `Replica.fromStatic`, verified through its signed head under `?authority=`, and shows it.
 * Nothing is cached and nothing else is fetched: no `/v1/` call, no live tail.
 */
async function openStatic() {
  const trustedKey = params.get("authority");
  if (!trustedKey) {
    setStatus("?source= needs &authority=HEX: the authority key you trust (it is never read from the export)", "error");
    return;
  }
  const base = new URL(source.replace(/\/*$/, "/"), location.href);
  let group = params.get("group");
  if (!group) {
    // Only to learn which group the export holds; the reader then checks the signed head
    // names that group, under the trusted key.
    const response = await fetch(new URL("head.json", base));
    group = response.ok ? (await response.json())?.head?.group : undefined;
    if (typeof group !== "string") throw Object.assign(new Error(`no head.json at ${base} (or it names no group)`), { code: "NOT_FOUND" });
  }
  $("group").innerHTML = `<option value="${esc(group)}">${esc(group)} (static)</option>`;
  setStatus(`reading the static export at ${base}…`, "", "fetching");
  // The history and timeline show the last events: those the chunks applied, verified.
  const kept = [];
  const started = performance.now();
  const replica = await Replica.fromStatic(base, {
    authorityKey: trustedKey,
    group,
    start: params.get("start") === "genesis" ? "genesis" : "snapshot",
    onEvents: (events) => {
      kept.push(...events);
      if (kept.length > 2 * HISTORY_EVENTS) kept.splice(0, kept.length - HISTORY_EVENTS);
    },
    onProgress: (p, file) => setStatus(`${p.verifiedThrough} of ${p.headSeq} events verified (read ${file})…`, "", "fetching"),
  });
  performance.measure("mwp:replay", { start: started });
  const view = {
    group,
    get cursor() { return replica.cursor; },
    get verifiedThrough() { return replica.verifiedThrough; },
    get verifiedHead() { return replica.verifiedHead; },
    state: () => replica.state(),
    stateHash: () => replica.stateHash(),
    frontier: (nowMs) => replica.frontier(nowMs),
    events: async (after = 0, limit = Infinity) => kept.filter((e) => e.seq > after).slice(0, limit),
    close: async () => replica.free(),
  };
  session = { group, replica: view, abort: new AbortController(), verified: { source: String(base) }, trustedKey };
  await render();
  setStatus(`seq ${replica.cursor} · static export ${base} · key ${short(trustedKey)} · no live tail`, "", "static");
}

async function main() {
  if (source !== null) return openStatic();
  const trustedKey = await client.authorityKey();
  // Trust on first use: the key is remembered per server; a different key later is refused.
  const remembered = localStorage.getItem(authorityKeyName);
  if (remembered && remembered !== trustedKey) {
    setStatus(`the server's authority key changed (${short(remembered)} → ${short(trustedKey)}); not replaying (forget the key to trust the new one)`, "error");
    return;
  }
  localStorage.setItem(authorityKeyName, trustedKey);
  // A member may read only its own group, and may not list groups: it names the group.
  const { groups } = signer && params.get("group")
    ? { groups: [{ group: params.get("group"), head: "member " + signer.actor }] }
    : await client.groups();
  const select = $("group");
  select.innerHTML = groups.map((g) => `<option value="${esc(g.group)}">${esc(g.group)} (${g.head})</option>`).join("");
  const group = params.get("group") ?? groups[0]?.group;
  if (!group) {
    setStatus("no groups on this server yet", "", "empty");
    return;
  }
  select.value = group;
  select.onchange = () => open(select.value, trustedKey).catch((e) => setStatus(e.message, "error"));
  await open(group, trustedKey);
}

$("forget-key").onclick = () => forgetKey().catch((e) => setStatus(`forgetting the key failed: ${e.message}`, "error"));
$("history").addEventListener("scroll", () => drawHistoryWindow());
$("history").addEventListener("keydown", onHistoryKey);
$("history").addEventListener("click", (e) => {
  const lane = e.target.closest?.(".lane");
  if (lane && session?.history) {
    session.history.focus = Number(lane.dataset.lane);
    showDetails(lane.dataset.work);
  }
});
$("graph").addEventListener("keydown", onGraphKey);
$("graph").addEventListener("click", (e) => {
  const node = e.target.closest?.(".node");
  if (node && session) {
    session.graphFocus = node.dataset.work;
    showDetails(node.dataset.work);
  }
});

const tokenField = $("token");
if (tokenField) {
  tokenField.value = token ?? "";
  tokenField.onchange = () => {
    if (tokenField.value) sessionStorage.setItem(tokenKey, tokenField.value);
    else {
      sessionStorage.removeItem(tokenKey);
      sessionStorage.removeItem(signerKey);
    }
    location.reload();
  };
}

main().catch((e) => {
  if (source !== null || e?.code === "FORK" || e?.code === "HEAD_INVALID") return showFatal(e);
  const hint = e.code === "UNAUTHORIZED" || e.code === "FORBIDDEN"
    ? " (enter an operator token, or open ?group=G&member=ACTOR&key=HEX as a member of G)" : "";
  setStatus(`${e.code ?? e.name}: ${e.message}${hint}`, "error");
});
