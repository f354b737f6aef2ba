// The dashboard's live tail, kept alive. When the stream drops (a network error, the server
// closing it, a 5xx), it is opened again after a capped, growing delay, strictly after the
// last seq the replica holds (`after=`), so nothing is fetched twice and nothing is missed.
// An event that does not follow the last one (first seq after a reconnect > last + 1) is a
// gap: it is reported and the tail stops; it is never skipped. A client error (4xx: no
// access, no such group) or an event the replica rejects also stops it. No dependencies, so
// that it is tested in Node with a stand-in for the stream (js/test/dashboard-live.test.js).

/** The first retry's delay, in milliseconds. */
export const RETRY_FIRST_MS = 500;
/** No retry waits longer than this, in milliseconds. */
export const RETRY_MAX_MS = 10_000;

/** The delay before retry number `attempt` (0-based): doubling from RETRY_FIRST_MS, capped. */
export function retryDelay(attempt) {
  return Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** Math.min(Math.max(0, attempt), 16));
}

/** The stream skipped events: after seq `after`, the next one to arrive was `seq`. */
export class GapError extends Error {
  constructor(after, seq) {
    super(`the live tail skipped events: after seq ${after} the next event was seq ${seq} (missing ${after + 1}..${seq - 1})`);
    this.name = "GapError";
    this.code = "GAP";
    this.after = after;
    this.seq = seq;
  }
}

/** Whether an error ends the tail for good rather than being retried. */
function permanent(e) {
  // A signed head that does not verify, or a history it contradicts, is not a network fault.
  if (e?.code === "FORK" || e?.code === "HEAD_INVALID") return true;
  return e instanceof GapError || e?.code === "REJECTED" || e instanceof SyntaxError || (e?.status >= 400 && e?.status < 500);
}

const pause = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });

/**
 * Follows the tail until `signal` aborts or a permanent error. `tail(after, onOpen)` opens
 * the stream of events after `after` (an async iterable; `onOpen` is called once the server
 * has answered); `cursor()` is the last seq applied; `offer(event)` applies one event (and
 * throws an error with code `REJECTED` if the replica refuses it). `onState` hears every
 * change: `{state: "connected", after}`, `{state: "reconnecting", attempt, delay, reason,
 * after}`, `{state: "gap", error}` or `{state: "ended", error}`. Resolves when it stops.
 */
export async function followTail({ tail, cursor, offer, onState, signal, sleep = pause }) {
  let attempt = 0;
  for (;;) {
    let reason = "the server closed the stream";
    try {
      const after = cursor();
      const opened = () => {
        attempt = 0;
        onState({ state: "connected", after });
      };
      for await (const event of tail(after, opened)) {
        const next = cursor() + 1;
        if (event.seq < next) continue; // applied already: a stream may resend, never skip
        if (event.seq > next) throw new GapError(next - 1, event.seq);
        await offer(event);
      }
    } catch (err) {
      if (signal?.aborted || err?.name === "AbortError") return;
      // The client checks the order too: its TAIL_GAP is the same gap.
      const e = err?.code === "TAIL_GAP" ? new GapError(err.details.expected - 1, err.details.received) : err;
      if (permanent(e)) {
        onState({ state: e instanceof GapError ? "gap" : "ended", error: e });
        return;
      }
      reason = e?.message ?? String(e);
    }
    if (signal?.aborted) return;
    const delay = retryDelay(attempt);
    attempt += 1;
    onState({ state: "reconnecting", attempt, delay, reason, after: cursor() });
    await sleep(delay, signal);
    if (signal?.aborted) return;
  }
}
