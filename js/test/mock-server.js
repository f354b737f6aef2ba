// A stand-in for `mwp serve` (SPEC §11) on 127.0.0.1, built on the package's own Authority,
// for testing the HTTP client without the native server. `oldest` makes it answer
// CURSOR_TOO_OLD for cursors before it, pointing at a signed snapshot. `state.dropStreams`
// closes that many live tails right after their backlog; `state.skip` leaves seqs out of them,
// and `state.tailEvent(event)` may replace an event they send (a forged one).
// Pages, `GET …/head` and the live tail carry heads signed by the authority key (SPEC §8a), as
// `mwp serve` does; `state.signHead(head)` may replace the head served (a forged one).
import { createServer } from "node:http";

export async function startMockServer(mwp, { authorityKey, oldest = 0, staticDir } = {}) {
  const groups = new Map();
  const streams = new Set();
  const state = { oldest, snapshot: null, requests: [], streams: [], dropStreams: 0, skip: new Set(), signHead: (h) => h, tailEvent: (e) => e };
  /** The signed head of group `a` (undefined before its first event). */
  const headOf = (a) => (a.seq > 0 ? state.signHead(mwp.signHead(a.state().org, a.state().group, a.seq, a.head, Date.now(), authorityKey)) : undefined);
  const sseHead = (a) => (a.seq > 0 ? `event: head\ndata: ${JSON.stringify(headOf(a))}\n\n` : "");
  const { readFile } = await import("node:fs/promises");
  const { join, extname } = await import("node:path");
  const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".wasm": "application/wasm" };
  const send = (res, status, body, headers = {}) => {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  };
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    const parts = url.pathname.split("/").filter(Boolean).map(decodeURIComponent);
    state.requests.push(`${req.method} ${url.pathname}${url.search}`);
    if (staticDir && url.pathname === "/favicon.ico") return res.writeHead(204).end();
    if (staticDir && parts[0] !== "v1") {
      const file = join(staticDir, ...(parts.length ? parts : ["index.html"]));
      if (!file.startsWith(staticDir)) return send(res, 403, {});
      try {
        const body = await readFile(file);
        res.writeHead(200, { "content-type": types[extname(file)] ?? "application/octet-stream" });
        return res.end(body);
      } catch {
        return send(res, 404, { code: "NOT_FOUND", message: "no such file" });
      }
    }
    if (url.pathname === "/v1/groups") return send(res, 200, { groups: [...groups].map(([group, a]) => ({ group, head: a.seq })) });
    if (url.pathname === "/v1/authority") return send(res, 200, { key: mwp.publicKeyOf(authorityKey) });
    if (parts[0] !== "v1" || parts[1] !== "groups") return send(res, 404, { code: "NOT_FOUND", message: "no such route" });
    const g = parts[2];
    const a = groups.get(g);
    if (req.method === "POST" && parts[3] === "commands") {
      let body = "";
      for await (const chunk of req) body += chunk;
      const auth = a ?? new mwp.Authority();
      try {
        const d = auth.submit(JSON.parse(body), Date.now());
        groups.set(g, auth);
        if (d.outcome === "accepted") for (const s of streams) if (s.group === g && !state.skip.has(d.event.seq)) s.res.write(`id: ${d.event.seq}\ndata: ${JSON.stringify(state.tailEvent(d.event))}\n\n${sseHead(auth)}`);
        return send(res, 200, d.receipt, d.outcome === "duplicate" ? { "mwp-duplicate": "true" } : {});
      } catch (e) {
        const status = e.code === "MALFORMED" ? 400 : e.code === "BAD_SIGNATURE" ? 401 : 409;
        return send(res, status, e.toJSON ? e.toJSON() : { code: "MALFORMED", message: String(e) });
      }
    }
    if (!a) return send(res, 404, { code: "NOT_FOUND", message: `group ${g} does not exist` });
    if (parts[3] === "events" && parts[4] === "stream") {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store" });
      // As `mwp serve` does: the stream is open once its headers arrive, before any event.
      res.flushHeaders();
      // `Last-Event-ID` wins over `after`, as in `mwp serve`.
      const lastId = req.headers["last-event-id"];
      state.streams.push({ after: url.searchParams.get("after"), lastEventId: lastId });
      const after = Number(lastId ?? url.searchParams.get("after") ?? 0);
      // `dropStreams`: close this many streams after their backlog (a dropped connection).
      const drop = state.dropStreams > 0;
      if (drop) state.dropStreams -= 1;
      for (const e of a.events(after)) if (!state.skip.has(e.seq)) res.write(`id: ${e.seq}\ndata: ${JSON.stringify(state.tailEvent(e))}\n\n`);
      res.write(sseHead(a));
      if (drop) return res.socket.end();
      const s = { group: g, res };
      streams.add(s);
      req.on("close", () => streams.delete(s));
      return;
    }
    if (parts[3] === "events") {
      const after = Number(url.searchParams.get("after") ?? 0);
      const limit = url.searchParams.has("limit") ? Number(url.searchParams.get("limit")) : undefined;
      if (after < state.oldest) {
        state.snapshot = a.snapshot(authorityKey);
        const seq = a.seq;
        return send(res, 410, {
          code: "CURSOR_TOO_OLD",
          message: `events after ${after} are no longer served`,
          snapshot: { seq, hash: a.stateHash(), location: `/v1/groups/${g}/snapshots/latest` },
        });
      }
      return send(res, 200, { events: a.events(after, limit), head: headOf(a) });
    }
    if (parts[3] === "head") return send(res, 200, headOf(a));
    if (parts[3] === "snapshots" && parts[4] === "latest") {
      res.writeHead(200, { "content-type": "application/cbor" });
      return res.end(state.snapshot ?? a.snapshot(authorityKey));
    }
    if (parts[3] === "receipts") {
      const r = a.receipt(parts[4], parts[5]);
      return r ? send(res, 200, r) : send(res, 404, { code: "NOT_FOUND", message: "no receipt" });
    }
    return send(res, 404, { code: "NOT_FOUND", message: "no such route" });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    state,
    /** Drops every open event stream at once, as a network failure would. */
    dropStreams: () => {
      for (const s of streams) s.res.destroy();
      streams.clear();
    },
    close: () => {
      for (const s of streams) s.res.end();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}
