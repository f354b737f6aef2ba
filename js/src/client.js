// A small HTTP client for `mwp serve` (SPEC §11): submit commands, replay events (restoring
// from a signed snapshot when the server answers CURSOR_TOO_OLD), and follow the live tail
// over Server-Sent Events. It uses only `fetch`, so it runs in browsers, Node ≥ 20 and Deno.

import * as w from "../pkg/mwp_wasm.js";
import { GapError, HttpError, MwpError, guard } from "./errors.js";
import { encodeEvent, signRead } from "./api.js";
import { readCapped } from "./body.js";

const JSON_TYPE = "application/json";

/** Largest answer read, in bytes (a page of 1,000 of the largest events fits). */
export const MAX_ANSWER_BYTES = 512 * 1024 * 1024;
/** Largest error answer read, in bytes: an mwp error is a short JSON object. */
const MAX_ERROR_BYTES = 64 * 1024;
/**
 * Largest live-tail message (its lines together), in characters: no event is larger than a
 * log record (16 MiB), plus room for the `data:` framing.
 */
export const MAX_MESSAGE_CHARS = 16 * 1024 * 1024 + 64 * 1024;
/** How long a live tail may receive nothing before it counts as dropped (the server sends a keep-alive every 15 s). */
export const TAIL_IDLE_MS = 60_000;
/**
 * How long a request other than the live tail may take, answer and body together, before it
 * fails with `TIMEOUT` (the native `mwp` client's bound).
 */
export const REQUEST_TIMEOUT_MS = 60_000;
/** The longest wait a timer takes (2^31 − 1 ms, about 24.8 days); a longer one never ends. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

/**
 * `value` checked as a number of milliseconds to wait, named `what`: a positive number (or
 * 0 for a delay, `zero`), or `Infinity` for no bound (as is anything past the longest timer).
 * Anything else is `MALFORMED`: a timer given `NaN` or a value past 2^31 − 1 ms fires at once.
 */
function waitMs(value, what, zero = false) {
  if (typeof value !== "number" || Number.isNaN(value) || value < 0 || (value === 0 && !zero)) {
    const got = typeof value === "number" ? String(value) : typeof value;
    throw new MwpError("MALFORMED", `\`${what}\` must be a ${zero ? "non-negative" : "positive"} number of milliseconds (Infinity: no bound), got ${got}`, { [what]: got });
  }
  return value > LONGEST_TIMER_MS ? Infinity : value;
}

/**
 * `value` checked as a seq to read after, named `what`: an integer from 0 to 2^53 − 1, or
 * (with `positive`) a count from 1, or `undefined` where `optional`. Anything else is
 * `MALFORMED` before any request: a fractional, negative or text `after` was sent as it was,
 * or blamed on the server when the tail checked its first event against it.
 */
function countArg(value, what, { positive = false, optional = false } = {}) {
  if (optional && value === undefined) return value;
  if (!Number.isSafeInteger(value) || value < (positive ? 1 : 0)) {
    const got = typeof value === "number" ? String(value) : typeof value;
    throw new MwpError("MALFORMED", `\`${what}\` must be an integer of at least ${positive ? 1 : 0} up to 2^53 - 1, got ${got}`, { [what]: got });
  }
  return value;
}

/** Calls `fn` after `ms` (never past the longest timer); returns what `clearTimeout` takes. */
function startTimer(ms, fn) {
  return ms > LONGEST_TIMER_MS ? undefined : setTimeout(fn, ms);
}

/** A `MALFORMED` HttpError for an answer that is not mwp's (`status` is the HTTP status it came with). */
function malformed(message, status, details = {}) {
  return new HttpError("MALFORMED", message, details, status);
}

/** The JSON answer of `response` (read as `readCapped` reads it); anything else is MALFORMED naming `what`. */
async function jsonOf(response, what) {
  const { bytes } = await readCapped(response, MAX_ANSWER_BYTES);
  if (bytes === undefined) throw malformed(`${what} answered more than ${MAX_ANSWER_BYTES} bytes: not an mwp answer`, response.status, { limit: MAX_ANSWER_BYTES });
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw malformed(`${what} answered something that is not JSON: ${e?.message ?? e}`, response.status);
  }
}

/** Whether `v` is a JSON object (not null, not an array). */
function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/**
 * The HttpError of a failed answer: the server's mwp error as the native client reads it (the
 * core's `Error::from_answer`: a code of the spec's, the message quoted printable and cut),
 * else `STORAGE` naming the status: never a code the server made up.
 */
async function errorOf(response) {
  let answer;
  try {
    const { bytes } = await readCapped(response, MAX_ERROR_BYTES);
    if (bytes !== undefined) answer = w.errorOfAnswer(bytes);
  } catch {
    // Not readable: report the status alone.
  }
  if (answer === undefined) return new HttpError("STORAGE", `HTTP ${response.status} ${response.statusText}`, {}, response.status);
  return new HttpError(answer.code, answer.message, answer.details ?? {}, response.status);
}

/** The error an `event: error` message of a live tail carries (as `errorOf` reads an answer). */
function tailError(text) {
  const answer = w.errorOfAnswer(new TextEncoder().encode(text));
  if (answer === undefined) return new HttpError("STORAGE", `the live tail ended with an error that is not mwp's: ${w.printable(text, 200)}`, {}, 200);
  return new HttpError(answer.code, answer.message, answer.details ?? {}, 200);
}

/** Whether a failed tail may be tried again: no answer, a dropped stream, or a gateway status. */
function retryable(e) {
  if (e instanceof HttpError) return e.status === 0 || e.status === 502 || e.status === 503 || e.status === 504;
  // A body that breaks off mid-stream surfaces as the platform's own TypeError.
  return e instanceof TypeError;
}

/**
 * How `event` fails to continue a tail in `group` after seq `seq` (whose event id is `id` when
 * known), as the core's chain check answers: `null` when it continues; a malformed event is
 * `MALFORMED` (status 200), as any message that is not an event is.
 */
function chainBreak(group, seq, id, event) {
  try {
    return guard(() => w.chainCheck(group, seq, id, event));
  } catch (e) {
    throw malformed(`the live tail of ${group} sent an event that is not one: ${e?.message ?? e}`, 200);
  }
}

/** Resolves after `ms`, or rejects with the signal's AbortError when it aborts first. */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason ?? new DOMException("aborted", "AbortError"));
    const done = () => {
      signal?.removeEventListener("abort", stop);
      resolve();
    };
    const timer = startTimer(ms, done);
    const stop = () => {
      clearTimeout(timer);
      reject(signal.reason ?? new DOMException("aborted", "AbortError"));
    };
    signal?.addEventListener("abort", stop, { once: true });
  });
}

/** Resolves with `reader.read()`, or rejects with a retryable HttpError after `idleMs` without an answer. */
function readWithin(reader, idleMs) {
  let timer;
  const idle = new Promise((_, reject) => {
    timer = startTimer(idleMs, () => reject(new HttpError("STORAGE", `the live tail sent nothing for ${idleMs} ms`, { idleMs }, 0)));
  });
  return Promise.race([reader.read(), idle]).finally(() => clearTimeout(timer));
}

/**
 * The events of a Server-Sent Events body, JSON-decoded; an `event: error` message throws;
 * an `event: head` message (a signed head) is awaited through `onHead`, in stream order.
 *
 * Bounded: a message (its lines together) longer than `MAX_MESSAGE_CHARS` throws MALFORMED
 * without reading it whole; a message that is not a JSON object (an event must carry an
 * integer `seq`) throws MALFORMED; nothing arriving for `idleMs` throws a retryable
 * HttpError (status 0), as a dropped connection does.
 */
async function* readSse(body, onHead, idleMs = TAIL_IDLE_MS) {
  const decoder = new TextDecoder();
  let buffer = "";
  let data = [];
  let dataChars = 0;
  let type = "message";
  const reader = body.getReader();
  const tooLong = () => malformed(`the live tail sent a message longer than ${MAX_MESSAGE_CHARS} characters: not an mwp event`, 200, { limit: MAX_MESSAGE_CHARS });
  try {
    for (;;) {
      const { value, done } = await readWithin(reader, idleMs);
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl).replace(/\r$/, "");
        buffer = buffer.slice(nl + 1);
        if (line === "") {
          if (data.length > 0) {
            // An error message is read by the one rule, JSON or not (anything that is not an
            // mwp error is STORAGE, as the native client reads it).
            if (type === "error") throw tailError(data.join("\n"));
            let payload;
            try {
              payload = JSON.parse(data.join("\n"));
            } catch (e) {
              throw malformed(`the live tail sent a message that is not JSON: ${e?.message ?? e}`, 200);
            }
            if (!isObject(payload)) throw malformed(`the live tail sent a message that is not a JSON object: ${data.join("\n").slice(0, 200)}`, 200);
            if (type === "message" || type === "event") {
              if (!Number.isSafeInteger(payload.seq) || payload.seq < 1) throw malformed(`the live tail sent an event without a valid seq: ${JSON.stringify(payload.seq)}`, 200);
              yield payload;
            } else if (type === "head") await onHead?.(payload);
          }
          data = [];
          dataChars = 0;
          type = "message";
        } else if (line.startsWith("data:")) {
          const value = line.slice(5).replace(/^ /, "");
          dataChars += value.length + 1;
          if (dataChars > MAX_MESSAGE_CHARS) throw tooLong();
          data.push(value);
        } else if (line.startsWith("event:")) {
          type = line.slice(6).trim();
        }
      }
      // A line still without its end: bounded as a message is.
      if (buffer.length + dataChars > MAX_MESSAGE_CHARS) throw tooLong();
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/**
 * Offers a signed head to `replica` under `trustedKey` when both can (a replica with
 * `offerHead`, a pinned key), then tells `onHead(head, result)`; without a key the head is
 * only told (`result` undefined).
 */
async function offerHeadTo(replica, head, trustedKey, onHead) {
  const result = trustedKey && typeof replica.offerHead === "function" ? await replica.offerHead(head, trustedKey) : undefined;
  onHead?.(head, result);
}

/** A client of one `mwp serve` instance. */
export class Client {
  #base;
  #fetch;
  #headers;
  #token;
  #signer;
  #timeoutMs;

  /**
   * Reads may need a credential (docs/http.md, "Access"): an operator's `token` (sent as
   * `Authorization: Bearer …` on every request), or a member's `signer` (`{actor, key}`, the
   * member's secret key in hex), which signs each read with the core's `signRead`.
   *
   * Every request but the live tail must be done, answer and body, within `timeoutMs`
   * (`REQUEST_TIMEOUT_MS`, 60 000; `Infinity`: no bound), or fails with HttpError `TIMEOUT`
   * (status 0); each call may pass its own `timeoutMs`.
   *
   * @param {string | URL} baseUrl e.g. "http://127.0.0.1:7878"
   * @param {{fetch?: typeof fetch, headers?: Record<string, string>, token?: string,
   *   signer?: {actor: string, key: string}, timeoutMs?: number}} [options]
   */
  constructor(baseUrl, { fetch = globalThis.fetch, headers = {}, token, signer, timeoutMs = REQUEST_TIMEOUT_MS } = {}) {
    this.#timeoutMs = waitMs(timeoutMs, "timeoutMs");
    this.#base = String(baseUrl).replace(/\/+$/, "");
    // Called as a plain function: `window.fetch` refuses any other `this`.
    this.#fetch = (input, init) => fetch(input, init);
    this.#headers = headers;
    this.#token = token;
    this.#signer = signer;
  }

  /** The `Authorization` header for a request, if this client has a credential. */
  #authorization(method, url) {
    if (this.#token !== undefined) return { authorization: `Bearer ${this.#token}` };
    if (this.#signer !== undefined && method === "GET") {
      // The target as fetch sends it: the normalised path and query.
      const { pathname, search } = new URL(url);
      const { actor, key } = this.#signer;
      return { authorization: signRead(method, `${pathname}${search}`, actor, Date.now(), key) };
    }
    return {};
  }

  #url(path, query = {}) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, String(v));
    const qs = params.toString();
    return `${this.#base}${path}${qs ? `?${qs}` : ""}`;
  }

  /**
   * Sends a request and hands its answer to `read` (which reads the body), all within
   * `timeoutMs` (this client's unless given): past it the request is aborted and fails with
   * HttpError `TIMEOUT`. A failed answer is thrown as its HttpError; `signal`'s abort is
   * rethrown as it is. The live tail passes `Infinity` and bounds itself.
   */
  async #request(path, { method = "GET", body, query, accept = JSON_TYPE, signal, headers = {}, timeoutMs }, read) {
    const limitMs = timeoutMs === undefined ? this.#timeoutMs : waitMs(timeoutMs, "timeoutMs");
    const url = this.#url(path, query);
    const answer = async (requestSignal) => {
      const response = await this.#fetched(url, method, body, accept, requestSignal, headers);
      if (!response.ok) throw await errorOf(response);
      return read(response);
    };
    // Without a bound the request runs on the caller's signal (the live tail's body is read on
    // it after this returns); with one, on its own, which the deadline aborts too.
    const request = limitMs === Infinity ? null : new AbortController();
    // Settles the call at once, whether or not `fetch` heeds its signal: the caller's abort
    // (its reason) or the deadline (`TIMEOUT`). A `fetch` that does not heed its signal is
    // outwaited, not awaited: its late failure is nobody's.
    let stop;
    const stopped = new Promise((_, reject) => {
      stop = (e) => {
        request?.abort(e);
        reject(e);
      };
    });
    stopped.catch(() => {});
    const forward = () => stop(signal.reason ?? new DOMException("This operation was aborted", "AbortError"));
    if (signal?.aborted) forward();
    else signal?.addEventListener("abort", forward, { once: true });
    const timer = startTimer(limitMs, () =>
      stop(new HttpError("TIMEOUT", `${method} ${path} had no whole answer from ${this.#base} within ${limitMs} ms`, { method, path, timeoutMs: limitMs }, 0)),
    );
    const work = answer(request?.signal ?? signal);
    work.catch(() => {});
    try {
      return await Promise.race([work, stopped]);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", forward);
    }
  }

  /** The answer's head to one request; no answer is HttpError `STORAGE` (status 0), an abort its reason. */
  async #fetched(url, method, body, accept, signal, headers) {
    try {
      return await this.#fetch(url, {
        method,
        signal,
        headers: {
          accept,
          ...(body === undefined ? {} : { "content-type": JSON_TYPE }),
          ...this.#authorization(method, url),
          ...headers,
          ...this.#headers,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      if (e?.name === "AbortError" || signal?.aborted) throw e;
      throw new HttpError("STORAGE", `no answer from ${this.#base}: ${e?.message ?? e}`, {}, 0);
    }
  }

  static #group(group) {
    return encodeURIComponent(group);
  }

  /** The server's authority public key (hex): `GET /v1/authority`. */
  async authorityKey({ signal, timeoutMs } = {}) {
    return this.#request("/v1/authority", { signal, timeoutMs }, async (r) => {
      const answer = await jsonOf(r, "/v1/authority");
      if (!isObject(answer) || typeof answer.key !== "string") throw malformed("/v1/authority answered no key", r.status);
      return answer.key;
    });
  }

  /** The groups the server holds: `{groups: [{group, head}]}` (`GET /v1/groups`). */
  async groups({ signal, timeoutMs } = {}) {
    return this.#request("/v1/groups", { signal, timeoutMs }, async (r) => {
      const answer = await jsonOf(r, "/v1/groups");
      if (!isObject(answer) || !Array.isArray(answer.groups)) throw malformed("/v1/groups answered no groups", r.status);
      return answer;
    });
  }

  /**
   * Submits a signed command to its group. Resolves to `{receipt, duplicate}`; a rejection
   * throws HttpError with the spec's code (409, 400 MALFORMED, 401 BAD_SIGNATURE).
   */
  async submit(command, { signal, timeoutMs } = {}) {
    if (!isObject(command)) throw new MwpError("MALFORMED", `submit needs a command in its JSON form (an object), got ${command === null ? "null" : typeof command}`);
    return this.#request(`/v1/groups/${Client.#group(command.group)}/commands`, { method: "POST", body: command, signal, timeoutMs }, async (r) => {
      const receipt = await jsonOf(r, "POST …/commands");
      if (!isObject(receipt)) throw malformed("POST …/commands answered no receipt", r.status);
      return { receipt, duplicate: r.headers.get("mwp-duplicate") === "true" };
    });
  }

  /**
   * Events after `after`, at most `limit`, in seq order (JSON form). Throws HttpError
   * `CURSOR_TOO_OLD` (status 410) whose `details.snapshot` is `{seq, hash, location}`.
   */
  async events(group, { after = 0, limit, signal, timeoutMs } = {}) {
    const { events, head } = await this.page(group, { after, limit, signal, timeoutMs });
    // The page's signed head rides along, out of the way of code that reads the array.
    Object.defineProperty(events, "head", { value: head, enumerable: false });
    return events;
  }

  /**
   * One page of events: `{events, head}`, where `head` is the server's signed head (SPEC §8a;
   * it may be behind the page's last event, and is `undefined` from a server that signs none).
   * Offer it to a replica (`offerHead`) with the authority key you pin.
   */
  async page(group, { after = 0, limit, signal, timeoutMs } = {}) {
    countArg(after, "after");
    countArg(limit, "limit", { positive: true, optional: true });
    return this.#request(`/v1/groups/${Client.#group(group)}/events`, { query: { after, limit }, signal, timeoutMs }, async (r) => {
      const answer = await jsonOf(r, `/v1/groups/${group}/events`);
      if (!isObject(answer) || !Array.isArray(answer.events) || !answer.events.every(isObject)) {
        throw malformed(`/v1/groups/${group}/events answered no page of events`, r.status);
      }
      const { events, head } = answer;
      return { events, head: head ?? undefined };
    });
  }

  /** The group's latest signed head (`GET /v1/groups/{group}/head`), JSON form. */
  async head(group, { signal, timeoutMs } = {}) {
    return this.#request(`/v1/groups/${Client.#group(group)}/head`, { signal, timeoutMs }, async (r) => {
      const head = await jsonOf(r, `/v1/groups/${group}/head`);
      if (!isObject(head)) throw malformed(`/v1/groups/${group}/head answered no signed head`, r.status);
      return head;
    });
  }

  /** The original receipt of (actor, action), or `undefined` if there is none. */
  async receipt(group, actor, action, { signal, timeoutMs } = {}) {
    try {
      return await this.#request(
        `/v1/groups/${Client.#group(group)}/receipts/${encodeURIComponent(actor)}/${encodeURIComponent(action)}`,
        { signal, timeoutMs },
        async (r) => {
          const receipt = await jsonOf(r, "GET …/receipts");
          if (!isObject(receipt)) throw malformed("GET …/receipts answered no receipt", r.status);
          return receipt;
        },
      );
    } catch (e) {
      if (e instanceof HttpError && (e.status === 404 || e.code === "NOT_FOUND")) return undefined;
      throw e;
    }
  }

  /** The latest signed snapshot's canonical CBOR, or the one at `location` (a URL path). */
  async snapshot(group, location, { signal, timeoutMs } = {}) {
    // A location a server named (CURSOR_TOO_OLD's `details.snapshot.location`) is input too.
    if (location !== undefined && location !== null && typeof location !== "string") {
      throw malformed(`the snapshot's location must be a URL path, got ${JSON.stringify(location) ?? typeof location}`, 0);
    }
    const path = location ?? `/v1/groups/${Client.#group(group)}/snapshots/latest`;
    return this.#request(path.startsWith("/") ? path : `/${path}`, { accept: "application/cbor", signal, timeoutMs }, async (r) => {
      const { bytes } = await readCapped(r, MAX_ANSWER_BYTES);
      if (bytes === undefined) throw malformed(`${path} answered more than ${MAX_ANSWER_BYTES} bytes: not an mwp snapshot`, r.status, { limit: MAX_ANSWER_BYTES });
      return bytes;
    });
  }

  /**
   * Brings `replica` (a Replica or IdbReplica) up to the server's head: pages of events
   * after its cursor; on CURSOR_TOO_OLD, fetches the signed snapshot it names, verifies it
   * against `trustedKey` and restores it, then resumes strictly after it. Resolves to
   * `{cursor, restored}`. With `trustedKey`, each page's signed head is offered to the
   * replica after the page's events (when it has `offerHead`); `onHead(head, result)` hears
   * each (`result` undefined without a key); a `FORK` or `HEAD_INVALID` is thrown. A page
   * the replica rejects, or one that does not advance its cursor (a repeat, or a gap after
   * it), throws `LOG_CORRUPT`: the replay never asks for the same page forever.
   */
  async replay(replica, { trustedKey, org, limit = 1000, signal, timeoutMs, onEvents, onHead } = {}) {
    let restored = false;
    for (;;) {
      let events, head;
      try {
        ({ events, head } = await this.page(replica.group, { after: replica.cursor, limit, signal, timeoutMs }));
      } catch (e) {
        if (!(e instanceof HttpError) || e.code !== "CURSOR_TOO_OLD" || restored) throw e;
        const bytes = await this.snapshot(replica.group, e.details?.snapshot?.location, { signal, timeoutMs });
        await replica.restore(bytes, { trustedKey, org, requestedCursor: replica.cursor });
        restored = true;
        continue;
      }
      if (events.length > 0) {
        const before = replica.cursor;
        const summary = await replica.offerBatch(events.map((e) => encodeEvent(e)));
        onEvents?.(events, summary);
        if (summary.rejected > 0) {
          throw new HttpError("LOG_CORRUPT", `the server sent events the replica rejects: ${JSON.stringify(summary.errors[0])}`, { errors: summary.errors }, 200);
        }
        // A page that repeats what the replica holds, or starts past its next seq, would be
        // asked for again and again.
        if (replica.cursor <= before) {
          const seqs = events.map((e) => e.seq);
          throw new HttpError(
            "LOG_CORRUPT",
            `the server answered the page after seq ${before} with seqs ${JSON.stringify(seqs.slice(0, 10))}${seqs.length > 10 ? "…" : ""}, none of them seq ${before + 1}`,
            { after: before, received: seqs.slice(0, 10) },
            200,
          );
        }
      }
      if (head) await offerHeadTo(replica, head, trustedKey, onHead);
      if (events.length === 0) return { cursor: replica.cursor, restored };
    }
  }

  /**
   * The live tail: an async iterator of events (JSON form) after `after`, read from
   * `GET /v1/groups/{group}/events/stream` (Server-Sent Events, one event per message).
   *
   * When the connection drops or the server closes the stream, the tail reconnects after a
   * backoff (`retry.initialMs`, doubled after each failed attempt up to `retry.maxMs`; no
   * jitter, so a test sees the same waits every run; a stream that delivered an event starts
   * the backoff over) and resumes with
   * `Last-Event-ID: <last seq>`. An event older than the last one (a replay overlap) is
   * skipped; an event past the next one throws a `GapError` (`TAIL_GAP`, with `expected` and
   * `received` seqs): the tail never silently skips events. An event at the next seq whose
   * `prev` is not the id of the last event delivered, or an event of another group, throws
   * `HttpError` `LOG_CORRUPT` (status 200) naming the seq and both ids (the core's chain check;
   * the first event after `after` is taken as it chains, its predecessor unread). After `retry.attempts` failed
   * attempts in a row (default: no limit) the last error is thrown; `retry: false` ends the
   * tail when the server closes it instead. An HTTP answer other than 502/503/504, and an
   * `event: error` message, are thrown at once.
   *
   * Ends only when `signal` aborts. `onOpen()` is called once, when the first connection is
   * open: from then on every event after `after` that the server accepts arrives through this
   * tail. `onReconnect({attempt, delayMs, after, error})` is called before each wait.
   * `onHead(head)` hears each signed head the stream carries (`event: head`, SPEC §8a), in
   * order with the events and awaited before the next one; an error it throws ends the tail.
   *
   * What a server sends is bounded: a stream that sends nothing (not even its keep-alive,
   * every 15 s) for `idleMs` (60 000) counts as dropped and is reconnected; a message longer
   * than an event can be, or one that is not an event, throws `HttpError` `MALFORMED`.
   */
  async *tail(group, { after = 0, signal, onOpen, onReconnect, onHead, retry = {}, idleMs = TAIL_IDLE_MS } = {}) {
    const { initialMs = 250, maxMs = 10_000, attempts = Infinity } = retry === false ? {} : retry;
    countArg(after, "after");
    if (attempts !== Infinity) countArg(attempts, "retry.attempts");
    idleMs = waitMs(idleMs, "idleMs");
    waitMs(initialMs, "retry.initialMs", true);
    waitMs(maxMs, "retry.maxMs", true);
    let last = after;
    // The id of event `last` once this tail delivered it (unknown for `after`'s own event).
    let lastId;
    let failures = 0;
    let opened = false;
    for (;;) {
      let error;
      // This connection's own signal: `signal`'s abort, or no answer within `idleMs`.
      const connection = new AbortController();
      const forward = () => connection.abort(signal.reason);
      if (signal?.aborted) forward();
      else signal?.addEventListener("abort", forward, { once: true });
      const unanswered = startTimer(
        idleMs,
        () => connection.abort(new HttpError("STORAGE", `the live tail of ${group} had no answer within ${idleMs} ms`, { group, idleMs }, 0)),
      );
      try {
        const r = await this.#request(
          `/v1/groups/${Client.#group(group)}/events/stream`,
          {
            query: { after: last },
            accept: "text/event-stream",
            signal: connection.signal,
            headers: opened ? { "last-event-id": String(last) } : {},
            timeoutMs: Infinity,
          },
          (response) => response,
        );
        clearTimeout(unanswered);
        if (!opened) {
          opened = true;
          onOpen?.();
        }
        for await (const event of readSse(r.body, onHead, idleMs)) {
          // A stream that delivers is a good connection: the next drop starts the backoff over.
          failures = 0;
          // Whether the event continues the tail is the core's rule (chain::Position::check).
          const broken = chainBreak(group, last, lastId, event);
          if (broken?.kind === "seq" && broken.received < broken.expected) continue; // a replay overlap
          if (broken?.kind === "seq") {
            throw new GapError("TAIL_GAP", `the live tail of ${group} skipped events: expected seq ${broken.expected}, received ${broken.received}`, {
              group,
              expected: broken.expected,
              received: broken.received,
            });
          }
          if (broken?.kind === "group") {
            throw new HttpError("LOG_CORRUPT", `the live tail of ${group} sent an event of group ${event.group} (seq ${event.seq})`, { group, seq: event.seq, received: event.group }, 200);
          }
          if (broken?.kind === "prev") {
            throw new HttpError(
              "LOG_CORRUPT",
              `the live tail of ${group} sent seq ${broken.seq} that does not chain: its prev is ${broken.received}, but seq ${last} was ${broken.expected}`,
              { group, seq: broken.seq, expected: broken.expected, received: broken.received },
              200,
            );
          }
          if (broken?.kind === "id") {
            throw new HttpError("LOG_CORRUPT", `the live tail of ${group} sent seq ${broken.seq} that does not verify: ${broken.reason}`, { group, seq: broken.seq }, 200);
          }
          last = event.seq;
          lastId = event.id;
          yield event;
        }
      } catch (e) {
        if (e?.name === "AbortError" || signal?.aborted || !retryable(e)) throw e;
        error = e;
      } finally {
        clearTimeout(unanswered);
        signal?.removeEventListener("abort", forward);
        connection.abort();
      }
      if (retry === false) {
        if (error) throw error;
        return;
      }
      failures += 1;
      if (failures > attempts) throw error ?? new HttpError("STORAGE", `the live tail of ${group} kept closing`, { group }, 0);
      const delayMs = Math.min(maxMs, initialMs * 2 ** (failures - 1));
      onReconnect?.({ attempt: failures, delayMs, after: last, error });
      await sleep(delayMs, signal);
    }
  }

  /**
   * Replays, then follows the tail, offering every event to `replica` as it arrives.
   * Resolves when `signal` aborts. The tail reconnects as `tail` does (`retry`,
   * `onReconnect`), and a gap throws its `GapError`. `onEvent(event, result)` sees each event offered from the
   * tail (not those the replay applied); `onLive()` is called once, when the replay is done
   * and the tail is open. With `trustedKey`, every signed head the pages and the tail carry
   * is offered to the replica (`offerHead`): `onHead(head, result)` hears each; a `FORK` or
   * `HEAD_INVALID` is thrown. Events past `replica.verifiedThrough` are provisional.
   */
  async follow(replica, { trustedKey, org, signal, timeoutMs, onEvent, onLive, onReconnect, onHead, retry, idleMs } = {}) {
    await this.replay(replica, { trustedKey, org, signal, timeoutMs, onHead });
    const offerHead = (head) => offerHeadTo(replica, head, trustedKey, onHead);
    try {
      for await (const event of this.tail(replica.group, { after: replica.cursor, signal, onOpen: onLive, onReconnect, onHead: offerHead, retry, idleMs })) {
        const result = await replica.offerBatch([encodeEvent(event)]);
        onEvent?.(event, result);
      }
    } catch (e) {
      if (e?.name !== "AbortError") throw e;
    }
  }
}
