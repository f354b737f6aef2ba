// The idiomatic API over the wasm core: camelCase methods, promises for storage, typed
// errors, and a default clock (`Date.now()`) where the core takes the time as an argument.
// Protocol data — commands, events, receipts, states — keeps the spec's JSON field names, so
// it round-trips to `mwp serve`, transcripts and files unchanged.

import * as w from "../pkg/mwp_wasm.js";
import { guard } from "./errors.js";
import { asBatch, frameBatch, splitBatch } from "./frames.js";

export * from "./errors.js";
export { frameBatch, splitBatch } from "./frames.js";
export { Agent, AgentImage, carry, pump } from "./agent.js";
export { runAgent } from "./run-agent.js";

const now = (nowMs) => (nowMs === undefined ? Date.now() : nowMs);

/** One Group's authority, in memory: decides commands and keeps the log. */
export class Authority {
  #inner;

  /**
   * An authority with no group yet; the first accepted command must be `open_group`. With
   * `{secretKey}` (hex seed) it signs its own ticks (`tick`) and snapshots and accepts only an
   * `open_group` naming that key; without one it holds no key: any `authority_key`, no ticks,
   * and `snapshot` takes the key to sign with. `snapshotEvery`: the cadence of the snapshot it
   * keeps (`latestSnapshot`; default 100,000 events).
   */
  constructor(options) {
    this.#inner = options instanceof w.Authority ? options : guard(() => new w.Authority(options?.secretKey, options?.snapshotEvery));
  }

  /** Rebuilds an authority from stored events (a frame batch or an array of CBOR events). */
  static fromLog(events, { secretKey } = {}) {
    return new Authority(guard(() => w.Authority.fromLog(asBatch(events), secretKey)));
  }

  /**
   * Decides a command (JSON-form object or CBOR bytes) and, if accepted, appends its event.
   * Resolves to `{outcome: "accepted"|"duplicate", receipt, event?, eventCbor?}`; throws an
   * AcceptError carrying the spec's code when the command is rejected.
   */
  submit(command, nowMs) {
    return guard(() => this.#inner.submit(command, now(nowMs)));
  }

  /**
   * Decides commands in order. Rejections are values: `{results, events}`, where each result
   * is a decision or `{outcome: "rejected", error}` and `events` is a frame batch of the new
   * events.
   */
  submitBatch(commands, nowMs) {
    return guard(() => this.#inner.submitBatch(commands, now(nowMs)));
  }

  /** Decides without appending: for hosts that store the event first, then `append` it. */
  decide(command, nowMs) {
    return guard(() => this.#inner.decide(command, now(nowMs)));
  }

  /** Appends an accepted event (CBOR bytes or JSON form). */
  append(event) {
    guard(() => this.#inner.append(event));
  }

  /** Seq of the last event (0 before genesis). */
  get seq() {
    return this.#inner.seq;
  }

  /** Id of the last event. */
  get head() {
    return this.#inner.head;
  }

  /** Hash of the canonical state (hex). */
  stateHash() {
    return guard(() => this.#inner.stateHash());
  }

  /** The state as a plain object (`null` before genesis). */
  state() {
    return guard(() => this.#inner.state());
  }

  /** Canonical CBOR of the state. */
  stateCbor() {
    return guard(() => this.#inner.stateCbor());
  }

  /** Stored events after `after` (JSON form). */
  events(after = 0, limit) {
    return splitBatch(this.eventFrames(after, limit)).map((b) => decodeEvent(b));
  }

  /** Stored events after `after`, as a frame batch of canonical CBOR. */
  eventFrames(after = 0, limit) {
    return guard(() => this.#inner.events(after, limit));
  }

  /** The original receipt of (actor, action), or `undefined`. */
  receipt(actor, action) {
    return guard(() => this.#inner.receipt(actor, action));
  }

  /** IDs of the work items a worker may claim now. */
  frontier(nowMs) {
    return guard(() => this.#inner.frontier(now(nowMs)));
  }

  /** The earliest time a `tick` would expire a lease, or `undefined`. */
  nextDeadline() {
    return this.#inner.nextDeadline();
  }

  /** A signed snapshot (canonical CBOR) of the current state, signed with `secretKey` or the authority's own key. */
  snapshot(secretKey) {
    return guard(() => this.#inner.snapshot(secretKey));
  }

  /**
   * Sends the authority's own `tick` if a lease deadline has passed (the core names and signs
   * it; only with a key). Returns its decision, or `undefined`.
   */
  tick(nowMs) {
    return guard(() => this.#inner.tick(now(nowMs)));
  }

  /** The latest signed snapshot kept at the core's cadence (only with a key), or `undefined`. */
  latestSnapshot() {
    return this.#inner.latestSnapshot();
  }

  /** Frees the wasm memory now rather than at garbage collection. */
  free() {
    this.#inner.free();
  }
}

/** One Group rebuilt from events delivered at least once, in any order (SPEC §7). */
export class Replica {
  #inner;

  /** An empty replica of `group`. */
  constructor(group) {
    this.#inner = group instanceof w.Replica ? group : guard(() => new w.Replica(group));
  }

  /** A replica resumed from a local projection (`stateCbor()` bytes). */
  static fromStateCbor(bytes) {
    return new Replica(guard(() => w.Replica.fromStateCbor(bytes)));
  }

  /** Offers one event: `{result: "applied"|"duplicate"|"buffered"|"rejected", seq, cursor, error?}`. */
  offer(event) {
    return guard(() => this.#inner.offer(event));
  }

  /** Offers many events at once: `{applied, duplicate, buffered, rejected, cursor, errors}`. */
  offerBatch(events) {
    return guard(() => this.#inner.offerBatch(asBatch(events)));
  }

  /** Restores from a signed snapshot; throws OfferError `SNAPSHOT_INVALID` with the reason. */
  restore(snapshot, { trustedKey, org, requestedCursor = 0 }) {
    guard(() => this.#inner.restore(snapshot, trustedKey, org, requestedCursor));
  }

  /** The group. */
  get group() {
    return this.#inner.group;
  }

  /** Highest contiguous seq applied. */
  get cursor() {
    return this.#inner.cursor;
  }

  /** Id of the event at the cursor. */
  get head() {
    return this.#inner.head;
  }

  /** Early events waiting for a gap to fill. */
  get buffered() {
    return this.#inner.buffered;
  }

  /** Hash of the canonical state (hex). */
  stateHash() {
    return guard(() => this.#inner.stateHash());
  }

  /** The state as a plain object. */
  state() {
    return guard(() => this.#inner.state());
  }

  /** Canonical CBOR of the state. */
  stateCbor() {
    return guard(() => this.#inner.stateCbor());
  }

  /** IDs of the work items a worker may claim now. */
  frontier(nowMs) {
    return guard(() => this.#inner.frontier(now(nowMs)));
  }

  /** The earliest time a `tick` would expire a lease, or `undefined`. */
  nextDeadline() {
    return this.#inner.nextDeadline();
  }

  /** Frees the wasm memory now. */
  free() {
    this.#inner.free();
  }
}

/** Canonical CBOR (RFC 8949 §4.2.1) of JSON-like data; floats are refused. */
export const canonical = {
  encode: (value) => guard(() => w.canonicalEncode(value)),
  decode: (bytes, { strict = true } = {}) => guard(() => w.canonicalDecode(bytes, strict)),
  hash: (value) => guard(() => w.canonicalHash(value)),
};

/** Decodes a stored event (canonical CBOR) into its JSON form. */
export const decodeEvent = (bytes) => guard(() => w.decodeEvent(bytes));
/** Canonical CBOR of an event given in its JSON form. */
export const encodeEvent = (event) => guard(() => w.encodeEvent(event));
/** Checks an event's payload hash and id; throws CodecError `LOG_CORRUPT`. */
export const verifyEvent = (event) => guard(() => w.verifyEvent(event));
/** The receipt an event gives its sender. */
export const receiptOf = (event) => guard(() => w.receiptOf(event));

/** Signs a command (JSON form; `sig` optional) with a secret key seed (hex). */
export const signCommand = (command, secretKey) => guard(() => w.signCommand(command, secretKey));
/** Whether a command's signature verifies under a public key (hex). */
export const verifyCommand = (command, publicKey) => guard(() => w.verifyCommand(command, publicKey));
/** The content hash of a command (hex). */
export const commandContentHash = (command) => guard(() => w.commandContentHash(command));
/** Canonical CBOR of a command, `sig` included. */
export const encodeCommand = (command) => guard(() => w.encodeCommand(command));
/** Checks a command against the limits and field rules; returns its JSON form. */
export const parseCommand = (command) => guard(() => w.parseCommand(command));

/** The public key (hex) of a secret key seed (hex). */
export const publicKeyOf = (secretKey) => guard(() => w.publicKeyOf(secretKey));
/**
 * The `Authorization` value of a member-signed read: `actor` signs `method` and `target`
 * (path and query, exactly as sent) at `atMs` with its secret key (hex). Signed by the core.
 */
export const signRead = (method, target, actor, atMs, secretKey) =>
  guard(() => w.signRead(method, target, actor, atMs, secretKey));
/** The secret key the transcript runner derives for `actor` (tests and demos only). */
export const transcriptSecretKey = (actor) => w.transcriptSecretKey(actor);
/** A fresh random secret key seed (hex), from the platform's CSPRNG. */
export function generateSecretKey() {
  const seed = new Uint8Array(32);
  globalThis.crypto.getRandomValues(seed);
  return Array.from(seed, (b) => b.toString(16).padStart(2, "0")).join("");
}
/** SHA-256 (hex) of bytes. */
export const sha256 = (bytes) => w.sha256(bytes);

/** Builds and signs a snapshot of a canonical state (`stateCbor()` bytes). */
export const buildSnapshot = (stateCbor, secretKey) => guard(() => w.buildSnapshot(stateCbor, secretKey));
/**
 * Verifies snapshot bytes (schema, state hash, signature, org/group binding, seq) and returns
 * its header; throws SnapshotError `SNAPSHOT_INVALID` with the reason.
 */
export const verifySnapshot = (bytes, { trustedKey, org, group, minSeq = 0 }) =>
  guard(() => w.verifySnapshot(bytes, trustedKey, org, group, minSeq));

/** Runs a transcript (JSON Lines): `{lines, failed}`, lines as `mwp transcript` prints them. */
export const runTranscript = (text) => guard(() => w.runTranscript(text));
/** The cross-host vector lines of a transcript (see tests/vectors/README.md). */
export const vectorLines = (text) => guard(() => w.vectorLines(text));
/** Replays stored events (decode, verify, chain, apply): `{seq, stateHash}`. */
export const replayLog = (events) => guard(() => w.replayLog(asBatch(events)));

export { asBatch };
