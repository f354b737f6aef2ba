// The idiomatic API over the wasm core: camelCase methods, promises for storage, typed
// errors, and a default clock (`Date.now()`) where the core takes the time as an argument.
// Protocol data — commands, events, receipts, states — keeps the spec's JSON field names, so
// it round-trips to `mwp serve`, transcripts and files unchanged.

import * as w from "../pkg/mwp_wasm.js";
import { CodecError, ExportError, guard } from "./errors.js";
import { readCapped } from "./body.js";
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

  /**
   * A replica rebuilt from a static export (SPEC §8b) at `baseUrl` (any static file host, or
   * whatever `fetch` serves), verified through the export's signed head under `authorityKey`,
   * the key the caller pins (never read from the export). The core names each file to fetch
   * and checks every byte; this only fetches.
   *
   * @param {string | URL} baseUrl the export's folder (the one holding `head.json`)
   * @param {{authorityKey: string, group: string, start?: "snapshot" | "genesis",
   *   fetch?: typeof fetch, signal?: AbortSignal,
   *   onProgress?: (progress: StaticProgress, file: string) => void,
   *   onEvents?: (events: object[], progress: StaticProgress) => void}} options
   *   `start`: from the latest signed snapshot (default) or every event from seq 1;
   *   `onProgress` hears the progress after each file; `onEvents` the events (JSON form)
   *   each chunk applied, verified, in seq order (for a host that shows them).
   * @returns {Promise<Replica>} throws the core's error naming the file (ExportError
   *   `HEAD_INVALID`, `LOG_CORRUPT`, `FORK`, `SNAPSHOT_INVALID`, `MALFORMED`; `NOT_FOUND` or
   *   `STORAGE` when a file does not come), or the signal's AbortError.
   */
  static async fromStatic(baseUrl, { authorityKey, group, start = "snapshot", fetch = globalThis.fetch, signal, onProgress, onEvents } = {}) {
    if (typeof authorityKey !== "string" || authorityKey === "") {
      throw new ExportError("MALFORMED", "Replica.fromStatic needs `authorityKey`, the authority key (hex) you pin: it is never read from the export");
    }
    if (typeof group !== "string" || group === "") throw new ExportError("MALFORMED", "Replica.fromStatic needs `group`, the group the export is of");
    const base = new URL(String(baseUrl).replace(/\/*$/, "/"), globalThis.location?.href);
    const reader = new StaticReader(group, authorityKey, start);
    try {
      for (let file = reader.pollFetch(); file !== undefined; file = reader.pollFetch()) {
        signal?.throwIfAborted();
        const bytes = await fetchFile(fetch, new URL(file, base), file, signal, StaticReader.maxFileBytes(file));
        const { applied, ...progress } = reader.handleFetched(file, bytes, onEvents !== undefined);
        if (applied?.length) onEvents(applied, progress);
        onProgress?.(progress, file);
      }
      return reader.intoReplica();
    } finally {
      reader.free();
    }
  }

  /**
   * Offers a signed head (SPEC §8a; its JSON form, an object or a JSON string) under the
   * authority key the caller pins (hex). Resolves to `{result: "verified"|"ahead"|"stale",
   * verifiedThrough}`: a head at an applied seq is checked now, one ahead when its seq is
   * applied. Throws OfferError `HEAD_INVALID` (`details.check`) or `FORK` (`details.heads`,
   * `details.proof` in hex when two heads conflict); on error nothing changes.
   */
  offerHead(head, authorityKey) {
    return guard(() => this.#inner.offerHead(head, authorityKey));
  }

  /** The highest seq a signed head vouched for (0 before any): later events are provisional. */
  get verifiedThrough() {
    return this.#inner.verifiedThrough;
  }

  /** The latest signed head that verified against the chain (JSON form), or `null`. */
  get verifiedHead() {
    return this.#inner.verifiedHead;
  }

  /** Whether event `seq` is provisional: past the last signed head that verified. */
  isProvisional(seq) {
    return guard(() => this.#inner.isProvisional(seq));
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

/**
 * Fetches one export file's bytes, at most `max` of them; a failure is an ExportError naming
 * the file (`NOT_FOUND` for a 404 or 410, `STORAGE` otherwise, `MALFORMED` for a file longer
 * than the reader accepts, stopped there). An abort is rethrown as it is.
 */
async function fetchFile(fetch, url, file, signal, max) {
  let response;
  try {
    response = await fetch(url, { signal });
  } catch (e) {
    if (e?.name === "AbortError" || signal?.aborted) throw e;
    throw new ExportError("STORAGE", `${file}: no answer from ${url}: ${e?.message ?? e}`, { file, url: String(url) });
  }
  if (!response.ok) {
    const code = response.status === 404 || response.status === 410 ? "NOT_FOUND" : "STORAGE";
    throw new ExportError(code, `${file}: HTTP ${response.status} from ${url}`, { file, url: String(url), status: response.status });
  }
  const tooBig = (n) => new ExportError("MALFORMED", `${file} is over the ${max} bytes a reader accepts for it (${n} from ${url})`, { file, url: String(url) });
  const { bytes, over } = await readCapped(response, max);
  if (bytes === undefined) throw tooBig(over);
  return bytes;
}

/**
 * The sans-IO reader of a static export (the core's): `pollFetch()` names the next file
 * (relative to the export's folder) or `undefined` once done, `handleFetched(file, bytes)`
 * checks it and answers the progress, `intoReplica()` gives the verified replica.
 * `Replica.fromStatic` is the loop over it; use this to fetch some other way.
 */
export class StaticReader {
  #inner;

  /** A reader of `group`'s export trusting only `authorityKey` (hex); `start`: "snapshot" (default) or "genesis". */
  constructor(group, authorityKey, start = "snapshot") {
    this.#inner = guard(() => new w.StaticReader(group, authorityKey, start));
  }

  /** The most bytes a reader accepts for the export file `file` (a host stops fetching past it). */
  static maxFileBytes(file) {
    return guard(() => w.StaticReader.maxFileBytes(file));
  }

  /** The next file to fetch, or `undefined` once the export is read whole. */
  pollFetch() {
    return this.#inner.pollFetch();
  }

  /**
   * Checks the bytes of the file `pollFetch()` named: the progress, or ExportError naming the
   * file. With `withEvents`, a chunk's progress carries `applied`, the events it applied.
   */
  handleFetched(file, bytes, withEvents = false) {
    return guard(() => this.#inner.handleFetched(file, bytes, withEvents));
  }

  /** `{cursor, verifiedThrough, headSeq, events, bytes, done}`. */
  progress() {
    return guard(() => this.#inner.progress());
  }

  /** The signed head read from `head.json`, or `null` before. */
  head() {
    return guard(() => this.#inner.head());
  }

  /** The replica, verified through the head, once done (the reader is empty afterwards). */
  intoReplica() {
    return new Replica(guard(() => this.#inner.intoReplica()));
  }

  /** Frees the wasm memory now. */
  free() {
    this.#inner.free();
  }
}

/** Signs a head (SPEC §8a): event `seq` of `org`/`group` has id `id` (hex), at `atMs`. Its JSON form. */
export const signHead = (org, group, seq, id, atMs, secretKey) => guard(() => w.signHead(org, group, seq, id, atMs, secretKey));
/**
 * Checks a fork proof (bytes, or the hex a `FORK` error's `details.proof` carries) with
 * nothing but its contents and the key you pin, if given: `{org, group, seq, ids, kind}`;
 * CodecError `MALFORMED` when it proves nothing.
 */
export const verifyForkProof = (proof, pinnedKey) =>
  guard(() => w.verifyForkProof(typeof proof === "string" ? hexBytes(proof) : proof, pinnedKey));
/**
 * Plans a static export (SPEC §8b) of events (stored CBOR, in seq order) ending at the signed
 * `head`: `{files: [{path, bytes}], headFile, index}`; write the files, then `head.json`.
 * `previous`: the index JSON of the export in place (only new files are planned), checked
 * as every host reads an index (ExportError `MALFORMED` naming the `previous index` when what
 * it lists does not hold together);
 * `snapshot`: the latest signed snapshot's bytes; `chunkEvents`: events per chunk (4096).
 */
export const planExport = (events, { head, authorityKey, snapshot, previous, chunkEvents } = {}) =>
  guard(() => w.planExport(previous === undefined ? undefined : typeof previous === "string" ? previous : JSON.stringify(previous), asBatch(events), snapshot, head, authorityKey, chunkEvents));

function hexBytes(hex) {
  if (!/^(?:[0-9a-f]{2})*$/i.test(hex)) throw new CodecError("MALFORMED", "fork proof: not hex");
  return Uint8Array.from(hex.match(/../g) ?? [], (b) => parseInt(b, 16));
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
export const transcriptSecretKey = (actor) => guard(() => w.transcriptSecretKey(actor));
/** A fresh random secret key seed (hex), from the platform's CSPRNG. */
export function generateSecretKey() {
  const seed = new Uint8Array(32);
  globalThis.crypto.getRandomValues(seed);
  return Array.from(seed, (b) => b.toString(16).padStart(2, "0")).join("");
}
/** SHA-256 (hex) of bytes. */
export const sha256 = (bytes) => guard(() => w.sha256(bytes));

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
