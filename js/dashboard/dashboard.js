// The mwp dashboard: replays a Group's history in the browser through the wasm core. Every
// event's id and chain is verified client-side by the replica, and a snapshot is restored
// only if its signature verifies under the server's authority key (remembered per server on
// first use); the latest signed snapshot is verified too and compared with the replay. The
// projection is cached in IndexedDB, so a reload fetches only new events. Then it follows
// the live tail. Pictures (views.js): the work graph, the history of leases and epochs,
// the effects' settlement. `mwp serve` embeds this folder (host-native/build.rs).
import { Client, IdbReplica, canonical, encodeEvent, verifySnapshot } from "mwp";
import { effectsSvg, historySvg, legendHtml } from "./views.js";

const params = new URLSearchParams(location.search);
const server = params.get("server") ?? location.origin;
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
let session = null;

/**
 * Shows what the dashboard is doing. `phase` is the stage it names, set on `<body>` as
 * `data-phase` in the same step as the text, so whoever reads it (a person or a test) sees
 * the two agree: `cache` (showing the local cache), `fetching`, `live` (replayed and
 * verified, following the tail) or `error`.
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
const table = (head, rows) =>
  rows.length === 0
    ? `<p class="empty">none</p>`
    : `<table><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join("")}</tr></thead><tbody>${rows
        .map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`)
        .join("")}</tbody></table>`;

/** The work graph as SVG: columns by dependency depth, edges from each `after` item. */
export function graphSvg(state, frontier) {
  const work = state?.work ?? {};
  const ids = Object.keys(work);
  if (ids.length === 0) return `<p class="empty">no work items yet</p>`;
  const depth = new Map();
  const depthOf = (id, seen = new Set()) => {
    if (depth.has(id)) return depth.get(id);
    if (seen.has(id) || !work[id]) return 0;
    seen.add(id);
    const d = Math.max(-1, ...work[id].after.map((a) => depthOf(a, seen))) + 1;
    depth.set(id, d);
    return d;
  };
  const columns = [];
  for (const id of ids) (columns[depthOf(id)] ??= []).push(id);
  const W = 170, H = 42, GX = 70, GY = 18, PAD = 12;
  const pos = new Map();
  columns.forEach((col, x) => col.forEach((id, y) => pos.set(id, { x: PAD + x * (W + GX), y: PAD + y * (H + GY) })));
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
  const nodes = ids.map((id) => {
    const { x, y } = pos.get(id);
    const w = work[id];
    const holder = w.lease ? ` · ${w.lease.holder}` : "";
    return `<g class="node${front.has(id) ? " frontier" : ""}" data-work="${esc(id)}" data-state="${esc(w.state)}">
      <rect x="${x}" y="${y}" width="${W}" height="${H}" fill="var(--${esc(w.state)})"></rect>
      <text x="${x + 8}" y="${y + 17}" fill="#fff" font-weight="600">${esc(id)}</text>
      <text x="${x + 8}" y="${y + 33}" fill="#fff">${esc(w.state)} · epoch ${w.epoch}${esc(holder)}</text>
      <title>${esc(id)}: ${esc(w.state)}, attempts ${w.attempts}/${w.contract.max_attempts}, spent ${w.spent}/${w.contract.cost_budget}</title>
    </g>`;
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="work graph">
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

async function render() {
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
  const count = (s) => work.filter(([, w]) => w.state === s).length;
  $("summary").innerHTML = `<div class="summary">
    <div><b>${esc(state.group)}</b>group · org ${esc(state.org)} · mission ${esc(state.mission)}</div>
    <div><b>${state.seq}</b>events</div>
    <div><b>${work.length}</b>work items</div>
    <div><b>${count("running") + count("leased")}</b>leased or running</div>
    <div><b>${count("succeeded")}</b>succeeded</div>
    <div><b>${frontier.length}</b>on the frontier</div>
    <div><b class="mono">${short(replica.stateHash())}</b>state hash</div>
    <div><b>${state.archived ? "archived" : "open"}</b>status</div></div>`;
  $("graph").innerHTML = graphSvg(state, frontier);
  $("legend").innerHTML = legendHtml();
  $("leases").innerHTML = table(
    ["work", "state", "epoch", "holder", "session", "expires", "attempts", "spent"],
    work.map(([id, w]) => [
      esc(id), pill(w.state), w.epoch, esc(w.lease?.holder ?? ""), w.lease?.session ?? "",
      w.lease ? esc(time(w.lease.expires_at)) : "", `${w.attempts}/${w.contract.max_attempts}`, `${w.spent}/${w.contract.cost_budget}`,
    ]),
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
    ["actor", "role", "session", ""],
    Object.entries(state.members).map(([a, m]) => [esc(a), esc(m.role), m.session, m.removed ? "removed" : ""]),
  );
  const events = await replica.events(Math.max(0, replica.cursor - HISTORY_EVENTS));
  $("history").innerHTML = historySvg(events, state);
  $("evidence").innerHTML = table(["seq", "work", "actor", "what"], (state.evidence ?? []).map((n) => [n.seq, esc(n.work), esc(n.actor), evidenceText(n, events)]));
  $("effects-picture").innerHTML = effectsSvg(state);
  await renderVerification();
  $("timeline").innerHTML = table(
    ["seq", "at", "actor", "event", "aggregate", "detail"],
    events.slice(-TIMELINE_EVENTS).reverse().map((e) => [e.seq, esc(time(e.at)), esc(e.actor), pill(e.kind.type), `${esc(e.aggregate)}@${e.revision}`, kindSummary(e.kind)]),
  );
  // Everything above shows the state at this cursor. Whoever waits for a final view waits for
  // `data-phase="live"` as well: the status line is written after the last render.
  document.body.dataset.cursor = String(replica.cursor);
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

/** What this browser verified: the chain (by the wasm replica) and the latest signed snapshot. */
async function renderVerification() {
  const { replica, verified: v } = session;
  const base = ((await replica.events(0, 1))[0]?.seq ?? replica.cursor + 1) - 1;
  const checks = [{
    what: "chain", result: "ok",
    text: `${replica.cursor - base} event(s) applied by the wasm core: each event's id is the hash of its bytes and names the previous event's id${base > 0 ? `; seq 1..${base} come from a signed snapshot` : ""}`,
  }];
  if (v.snapshot) {
    const s = v.snapshot;
    const atHead = s.seq === replica.cursor;
    const same = s.state_hash === replica.stateHash();
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

let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    render().catch((e) => setStatus(`render failed: ${e.message}`, "error"));
  });
}

async function open(group, trustedKey) {
  setStatus(`opening group ${group}…`, "", "fetching");
  delete document.body.dataset.cursor;
  if (session) {
    session.abort.abort();
    await session.replica.close();
  }
  const replica = await IdbReplica.open(`mwp-dashboard ${server} ${group}`, group);
  const abort = new AbortController();
  session = { group, replica, abort, verified: {} };
  const cached = replica.cursor;
  const org = params.get("org") ?? replica.state()?.org;
  // A snapshot names its org: when none is known yet, read it from the snapshot itself; the
  // signature check against the trusted key is what makes it trustworthy.
  const target = {
    get group() { return replica.group; },
    get cursor() { return replica.cursor; },
    offerBatch: (events) => replica.offerBatch(events),
    restore: (bytes, o) => replica.restore(bytes, { ...o, org: o.org ?? canonical.decode(bytes).org }),
  };
  setStatus(`${cached} events from the local cache; fetching new ones…`, "", cached > 0 ? "cache" : "fetching");
  if (cached > 0) await render();
  const { restored } = await client.replay(target, { trustedKey, org, signal: abort.signal });
  const fetched = replica.cursor - cached;
  await verifyLatestSnapshot(trustedKey);
  await render();
  setStatus(`seq ${replica.cursor} · ${cached} cached, ${fetched} fetched${restored ? " (restored a signed snapshot)" : ""} · key ${short(trustedKey)} · live`, "live");
  (async () => {
    for await (const event of client.tail(group, { after: replica.cursor, signal: abort.signal })) {
      const summary = await replica.offerBatch([encodeEvent(event)]);
      if (summary.rejected > 0) throw new Error(`event ${event.seq} rejected: ${summary.errors[0].error.message}`);
      setStatus(`seq ${replica.cursor} · live · key ${short(trustedKey)}`, "live");
      scheduleRender();
    }
  })().catch((e) => {
    if (e?.name !== "AbortError") setStatus(`live tail ended: ${e.message}`, "error");
  });
}

async function main() {
  const trustedKey = await client.authorityKey();
  // Trust on first use: the key is remembered per server; a different key later is refused.
  const remembered = localStorage.getItem(`mwp:authority-key:${server}`);
  if (remembered && remembered !== trustedKey) {
    setStatus(`the server's authority key changed (${short(remembered)} → ${short(trustedKey)}); not replaying`, "error");
    return;
  }
  localStorage.setItem(`mwp:authority-key:${server}`, trustedKey);
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
  const hint = e.code === "UNAUTHORIZED" || e.code === "FORBIDDEN"
    ? " (enter an operator token, or open ?group=G&member=ACTOR&key=HEX as a member of G)" : "";
  setStatus(`${e.code ?? e.name}: ${e.message}${hint}`, "error");
});
