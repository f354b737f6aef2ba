// The agent driver (SPEC §7) for JavaScript agents: the same rules as every other host, from
// the wasm core. `Agent` is sans-IO — it never reads a clock, touches the network or runs an
// effect; `pump` is the loop that connects it to a `Client` of `mwp serve` (or anything with
// the same four methods), a durable `commit`, and the application's effects and notices.

import * as w from "../pkg/mwp_wasm.js";
import { guard, guardAsync, HttpError } from "./errors.js";
import { asBatch } from "./frames.js";
import { encodeEvent } from "./api.js";

const now = (nowMs) => (nowMs === undefined ? Date.now() : nowMs);
const errorJson = (e) => (typeof e?.toJSON === "function" ? e.toJSON() : { code: e?.code, message: e?.message, ...(e?.details ?? {}) });

/** What an agent's host keeps: every committed write set folded in (restart with it). */
export class AgentImage {
  #inner;

  /** An empty image, or one read back from `toCbor()` bytes. */
  constructor(cbor) {
    if (cbor instanceof w.AgentImage) this.#inner = cbor;
    else this.#inner = cbor === undefined ? new w.AgentImage() : guard(() => w.AgentImage.fromCbor(cbor));
  }

  /** Folds in a committed write set (`{serial, cbor}` from `pollWriteSet`, or its bytes). */
  commit(writeSet) {
    const bytes = writeSet instanceof Uint8Array ? writeSet : writeSet?.cbor;
    guard(() => this.#inner.commit(bytes));
  }

  /** Canonical CBOR of the whole image (to compact a log of write sets into one record). */
  toCbor() {
    return guard(() => this.#inner.toCbor());
  }

  /** Serial of the last committed write set. */
  get serial() {
    return this.#inner.serial;
  }

  /** The durable cursor the image holds. */
  get cursor() {
    return this.#inner.cursor;
  }

  /** @internal the wasm object */
  get raw() {
    return this.#inner;
  }
}

/**
 * One agent (actor, Group): replica, work queue, leases, outbox, effect journal. Feed it with
 * `handle*`, drain it with `poll*` (or let `pump` do both), and commit every write set before
 * acting on anything it says.
 */
export class Agent {
  #inner;

  /**
   * @param {object} config `{org, group, actor, authorityKey}` and optionally `capacity`
   *   (leases held at once; 0 never claims), `leaseMs`, `startWithinMs`, `renewMarginMs`,
   *   `graceMs`, `resendMs`, `syncMs`, `effectTimeoutMs`
   * @param {string} secretKey the actor's key seed (hex)
   */
  constructor(config, secretKey, inner) {
    this.config = config;
    this.#inner = inner ?? guard(() => new w.Agent(config, secretKey));
  }

  /** Reopens an agent from its committed image: the ordinary restart path. */
  static restore(config, secretKey, image) {
    return new Agent(config, secretKey, guard(() => w.Agent.restore(config, secretKey, image.raw)));
  }

  /** The next write set to make durable, `{serial, cbor}`, or `undefined`. */
  pollWriteSet() {
    return guard(() => this.#inner.pollWriteSet());
  }

  /** The next request for the authority (`{type: "command" | "fetch_events" | "lookup_receipt" | "fetch_snapshot" | "ack", …}`). */
  pollTransmit() {
    return guard(() => this.#inner.pollTransmit());
  }

  /** The next effect to perform now, `{key, work, op, mode, irreversible, target, attempt}`. */
  pollDispatch() {
    return guard(() => this.#inner.pollDispatch());
  }

  /** The next notice for the application (`{type: "run" | "released" | "lease_lost" | …}`). */
  pollNotice() {
    return guard(() => this.#inner.pollNotice());
  }

  /** The latest time (ms) to call `handleTimeout`, or `undefined`. */
  pollTimeout() {
    return this.#inner.pollTimeout();
  }

  /** Delivers events: a frame batch, or an array of events (CBOR bytes or JSON form). */
  handleEvents(events, nowMs) {
    const batch = Array.isArray(events) ? asBatch(events.map((e) => (e instanceof Uint8Array ? e : encodeEvent(e)))) : events;
    guard(() => this.#inner.handleEvents(now(nowMs), batch));
  }

  /** The authority's receipt for a command this agent sent. */
  handleReceipt(action, receipt, nowMs) {
    guard(() => this.#inner.handleReceipt(now(nowMs), action, receipt));
  }

  /** The authority's rejection (an MwpError or `{code, message, …}`) of a command this agent sent. */
  handleRejection(action, error, nowMs) {
    guard(() => this.#inner.handleRejection(now(nowMs), action, errorJson(error)));
  }

  /** The answer to a `lookup_receipt`: the receipt or `undefined`/`null`. */
  handleLookup(action, receipt, nowMs) {
    guard(() => this.#inner.handleLookup(now(nowMs), action, receipt ?? null));
  }

  /** A failed `fetch_events`; `CURSOR_TOO_OLD` leads to a `fetch_snapshot`. */
  handleFetchError(error, nowMs) {
    guard(() => this.#inner.handleFetchError(now(nowMs), errorJson(error)));
  }

  /** The bytes of the snapshot a `fetch_snapshot` asked for. */
  handleSnapshot(bytes, nowMs) {
    guard(() => this.#inner.handleSnapshot(now(nowMs), bytes));
  }

  /** The link to the authority went up (`true`) or down. */
  handleConnectivity(up, nowMs) {
    guard(() => this.#inner.handleConnectivity(now(nowMs), up));
  }

  /** Time passed. */
  handleTimeout(nowMs) {
    guard(() => this.#inner.handleTimeout(now(nowMs)));
  }

  /** A dispatched effect happened: its outcome and the target's receipt. */
  handleEffectOutcome(key, outcome, receipt, nowMs) {
    guard(() => this.#inner.handleEffectOutcome(now(nowMs), key, outcome, receipt));
  }

  /** Write set `serial` (and every one before it) is durable. */
  handleCommitted(serial, nowMs) {
    guard(() => this.#inner.handleCommitted(now(nowMs), serial));
  }

  /** Submits held work's result; returns the command's action ID. */
  submit(work, result, nowMs) {
    return guard(() => this.#inner.submit(now(nowMs), work, result));
  }

  /** Reports a failure of held work; returns the action ID. */
  fail(work, error, { retryable = true } = {}, nowMs) {
    return guard(() => this.#inner.fail(now(nowMs), work, error, retryable));
  }

  /** Checkpoints running work (its lease is released); returns the action ID. */
  checkpoint(work, data, nowMs) {
    return guard(() => this.#inner.checkpoint(now(nowMs), work, data));
  }

  /** Charges cost to running work; returns the action ID. */
  charge(work, cost, data, nowMs) {
    return guard(() => this.#inner.charge(now(nowMs), work, cost, data));
  }

  /**
   * Records the intent of an effect; it is dispatched (`pollDispatch`) once the intent is
   * accepted and committed. Returns the effect's key (hex), its idempotency key.
   */
  intendEffect(work, op, { mode = "keyed", irreversible = false, target = null } = {}, nowMs) {
    return guard(() => this.#inner.intendEffect(now(nowMs), work, op, mode, irreversible, target));
  }

  /** Settles an uncertain effect once the application found out whether it happened. */
  resolveEffect(key, happened, receipt, nowMs) {
    guard(() => this.#inner.resolveEffect(now(nowMs), key, happened, receipt));
  }

  /**
   * A planner's answer for a pending trigger (a `plan` notice): the `create_work` bodies of the
   * items to create, or `[]` (the empty disposition). Returns the action ID, `expand-<trigger>`.
   */
  dispose(trigger, work, nowMs) {
    return guard(() => this.#inner.dispose(now(nowMs), trigger, work ?? []));
  }

  /** Triggers (terminal event seqs) still lacking this planner's disposition. */
  pendingDispositions() {
    return Array.from(this.#inner.pendingDispositions());
  }

  /** Starts a new session (the old one's leases are revoked); returns the action ID. */
  replaceSession(nowMs) {
    return guard(() => this.#inner.replaceSession(now(nowMs)));
  }

  /** Session number. */
  get session() {
    return this.#inner.session;
  }

  /** Whether the link is up. */
  get online() {
    return this.#inner.online;
  }

  /** Highest contiguous seq applied. */
  get cursor() {
    return this.#inner.cursor;
  }

  /** Highest cursor whose write set is durable. */
  get durableCursor() {
    return this.#inner.durableCursor;
  }

  /** Leases held, by work item. */
  leases() {
    return guard(() => this.#inner.leases());
  }

  /** Commands waiting for their receipt, by base action ID. */
  outbox() {
    return guard(() => this.#inner.outbox());
  }

  /** The effect journal, by key. */
  effects() {
    return guard(() => this.#inner.effects());
  }

  /** The replica's state as a plain object. */
  state() {
    return guard(() => this.#inner.state());
  }

  /** Hash (hex) of the replica's canonical state. */
  stateHash() {
    return guard(() => this.#inner.stateHash());
  }

  /** IDs of the work items a worker may claim now. */
  frontier(nowMs) {
    return guard(() => this.#inner.frontier(now(nowMs)));
  }

  /** Frees the wasm memory now. */
  free() {
    this.#inner.free();
  }
}

/** Whether an error means the authority could not be reached (no HTTP answer). */
const unreachable = (e) => e instanceof HttpError && e.status === 0;

async function fetchEvents(agent, client, group, after, now) {
  let events;
  try {
    events = await client.events(group, { after });
  } catch (e) {
    if (unreachable(e) || typeof e?.code !== "string") throw e;
    agent.handleFetchError(e, now());
    return;
  }
  agent.handleEvents(events, now());
}

/**
 * Carries one transmit to the authority through `client` (a `Client`, or anything with
 * `submit(command)`, `events(group, {after})`, `receipt(group, actor, action)` and
 * `snapshot(group, location)`) and hands the answer back to `agent`.
 */
export async function carry(agent, client, transmit, now = Date.now) {
  const { group, actor } = agent.config;
  try {
    switch (transmit.type) {
      case "command": {
        let answer;
        try {
          answer = await client.submit(transmit.command);
        } catch (e) {
          if (unreachable(e) || typeof e?.code !== "string") throw e;
          agent.handleRejection(transmit.action, e, now());
          break;
        }
        agent.handleReceipt(transmit.action, answer.receipt, now());
        // The driver learns what its command did from the log, as a live tail would bring
        // it: fetch the events up to the receipt now rather than at the next sync.
        if (answer.receipt.seq > agent.cursor) await fetchEvents(agent, client, group, agent.cursor, now);
        break;
      }
      case "fetch_events":
        await fetchEvents(agent, client, group, transmit.after, now);
        break;
      case "lookup_receipt":
        agent.handleLookup(transmit.action, await client.receipt(group, actor, transmit.action), now());
        break;
      case "fetch_snapshot":
        agent.handleSnapshot(await client.snapshot(group, transmit.snapshot.location), now());
        break;
      default:
        // `ack`: the server keeps no per-agent cursor; nothing to carry.
        break;
    }
    if (!agent.online) agent.handleConnectivity(true, now());
  } catch (e) {
    if (!unreachable(e)) throw e;
    // Unreachable: the driver's grace rules take over; it resends or looks up later.
    if (agent.online) agent.handleConnectivity(false, now());
  }
}

/**
 * Runs the agent until nothing is left to do right now, in the order the driver requires:
 * commit each write set (`await commit(writeSet)` must return only once it is durable), then
 * carry transmits, perform effects (`await dispatch(d)` → `{outcome, receipt}`, or
 * `undefined` if unknown: the driver then treats it as uncertain after its timeout), and
 * report notices (`onNotice(n)`). Resolves to `pollTimeout()`: when to call it again at the
 * latest.
 */
export async function pump(agent, { client, commit, dispatch, onNotice, now = Date.now, maxSteps = 100_000 } = {}) {
  return guardAsync(async () => {
    let ticked = false;
    for (let i = 0; i < maxSteps; i++) {
      const ws = agent.pollWriteSet();
      if (ws) {
        await commit(ws);
        agent.handleCommitted(ws.serial, now());
        continue;
      }
      const t = agent.pollTransmit();
      if (t) {
        if (client) await carry(agent, client, t, now);
        continue;
      }
      const d = agent.pollDispatch();
      if (d) {
        const done = dispatch ? await dispatch(d) : undefined;
        if (done) agent.handleEffectOutcome(d.key, done.outcome ?? null, done.receipt ?? null, now());
        continue;
      }
      const n = agent.pollNotice();
      if (n) {
        if (onNotice) await onNotice(n);
        continue;
      }
      // Settled. A timer already due is handled once, then its consequences drained.
      const due = agent.pollTimeout();
      if (due !== undefined && due <= now() && !ticked) {
        ticked = true;
        agent.handleTimeout(now());
        continue;
      }
      return due;
    }
    throw new RangeError(`pump: the agent did not settle within ${maxSteps} steps`);
  });
}
