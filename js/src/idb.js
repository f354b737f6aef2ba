// IndexedDB stores (browsers): the authority's log and a replica's projection, each
// transition in one readwrite transaction with durability "strict". Calls on one store run
// one after another, in call order.

import * as w from "../pkg/mwp_wasm.js";
import { guardAsync, guard } from "./errors.js";
import { asBatch, splitBatch } from "./frames.js";
import { AgentImage } from "./agent.js";
import { Queue } from "./queue.js";

const now = (nowMs) => (nowMs === undefined ? Date.now() : nowMs);

/** An authority whose log lives in IndexedDB. */
export class IdbAuthority {
  #inner;
  #queue = new Queue();

  constructor(inner) {
    this.#inner = inner;
  }

  /**
   * Opens (creating if needed) the database `name` holding `group`, rebuilding the state
   * from its last checkpoint and the events after it.
   */
  static async open(name, group, { checkpointEvery, secretKey } = {}) {
    return new IdbAuthority(await guardAsync(() => w.IdbAuthority.open(name, group, checkpointEvery, secretKey)));
  }

  /**
   * Decides commands in order and writes all accepted events and receipts in one
   * transaction. Resolves once durable to one result per command (rejections as values).
   */
  submit(commands, nowMs) {
    const list = Array.isArray(commands) ? commands : [commands];
    return this.#queue.run(() => guardAsync(() => this.#inner.submit(list, now(nowMs))));
  }

  /**
   * Sends the authority's own `tick` if a lease deadline has passed (the core names and
   * signs it; only with `secretKey`). Resolves to its result, or `undefined`.
   */
  tick(nowMs) {
    return this.#queue.run(() => guardAsync(() => this.#inner.tick(now(nowMs))));
  }

  /** Test hook: as `submit`, then aborts the transaction. */
  _submitThenAbort(commands, nowMs) {
    return this.#queue.run(() => guardAsync(() => this.#inner.submitThenAbort(commands, now(nowMs))));
  }

  /** Stored events after `after` (JSON form). */
  async events(after = 0, limit) {
    return splitBatch(await this.eventFrames(after, limit)).map((b) => w.decodeEvent(b));
  }

  /** Stored events after `after`, as a frame batch. */
  eventFrames(after = 0, limit) {
    return this.#queue.run(() => guardAsync(() => this.#inner.events(after, limit)));
  }

  get seq() { return this.#inner.seq; }
  get head() { return this.#inner.head; }
  stateHash() { return guard(() => this.#inner.stateHash()); }
  state() { return guard(() => this.#inner.state()); }
  stateCbor() { return guard(() => this.#inner.stateCbor()); }
  receipt(actor, action) { return guard(() => this.#inner.receipt(actor, action)); }
  frontier(nowMs) { return guard(() => this.#inner.frontier(now(nowMs))); }
  nextDeadline() { return this.#inner.nextDeadline(); }
  /**
   * The latest signed snapshot (canonical CBOR) the cadence made due since the store was
   * opened, or `undefined` (only with `secretKey`).
   */
  latestSnapshot() { return this.#inner.latestSnapshot(); }

  /** Closes the database connection once pending writes finish. */
  close() {
    return this.#queue.run(() => this.#inner.close());
  }
}

/** A replica whose projection (events, cursor, checkpoints) lives in IndexedDB. */
export class IdbReplica {
  #inner;
  #queue = new Queue();

  constructor(inner) {
    this.#inner = inner;
  }

  /** Opens (creating if needed) the database `name` holding a replica of `group`. */
  static async open(name, group, { checkpointEvery } = {}) {
    return new IdbReplica(await guardAsync(() => w.IdbReplica.open(name, group, checkpointEvery)));
  }

  /** Offers delivered events; what they apply is written in one transaction. */
  offerBatch(events) {
    const batch = asBatch(events);
    return this.#queue.run(() => guardAsync(() => this.#inner.offerBatch(batch)));
  }

  /** Test hook: as `offerBatch`, then aborts the transaction. */
  _offerBatchThenAbort(events) {
    const batch = asBatch(events);
    return this.#queue.run(() => guardAsync(() => this.#inner.offerBatchThenAbort(batch)));
  }

  /** Restores from a signed snapshot and makes it the store's checkpoint. */
  restore(snapshot, { trustedKey, org, requestedCursor = 0 }) {
    return this.#queue.run(() => guardAsync(() => this.#inner.restore(snapshot, trustedKey, org, requestedCursor)));
  }

  /** Locally stored events after `after` (JSON form). */
  async events(after = 0, limit) {
    return splitBatch(await this.eventFrames(after, limit)).map((b) => w.decodeEvent(b));
  }

  /** Locally stored events after `after`, as a frame batch. */
  eventFrames(after = 0, limit) {
    return this.#queue.run(() => guardAsync(() => this.#inner.events(after, limit)));
  }

  /**
   * Offers a signed head under the authority key you pin (hex), after the writes queued
   * before it: resolves to `{result, verifiedThrough}`; rejects with `HEAD_INVALID` or
   * `FORK` (see `Replica#offerHead`). What heads verify is kept in memory: a reopened
   * store is provisional until a head verifies again.
   */
  offerHead(head, authorityKey) {
    return this.#queue.run(() => guardAsync(async () => this.#inner.offerHead(head, authorityKey)));
  }

  get group() { return this.#inner.group; }
  get cursor() { return this.#inner.cursor; }
  get head() { return this.#inner.head; }
  /** The highest seq a signed head vouched for since the store was opened (0 before). */
  get verifiedThrough() { return this.#inner.verifiedThrough; }
  /** The latest signed head that verified against the chain, or `null`. */
  get verifiedHead() { return this.#inner.verifiedHead; }
  /** Whether event `seq` is past the last verified head. */
  isProvisional(seq) { return guard(() => this.#inner.isProvisional(seq)); }
  stateHash() { return guard(() => this.#inner.stateHash()); }
  state() { return guard(() => this.#inner.state()); }
  frontier(nowMs) { return guard(() => this.#inner.frontier(now(nowMs))); }

  /** Closes the database connection once pending writes finish. */
  close() {
    return this.#queue.run(() => this.#inner.close());
  }
}

/**
 * An agent's committed write sets in IndexedDB: `commit` is the durable commit `pump` needs
 * (one strict readwrite transaction per write set), `load` folds them into the image an agent
 * restarts from, `compact` replaces them by one image.
 */
export class IdbAgentStore {
  #inner;
  #queue = new Queue();

  constructor(inner) {
    this.#inner = inner;
  }

  /** Opens (creating if needed) the database `name`. */
  static async open(name) {
    return new IdbAgentStore(await guardAsync(() => w.IdbAgentStore.open(name)));
  }

  /** Everything committed, as an AgentImage (for `Agent.restore`). */
  load() {
    return this.#queue.run(() => guardAsync(async () => new AgentImage(await this.#inner.load())));
  }

  /** Commits a write set (`{serial, cbor}` from `pollWriteSet`); resolves once durable. */
  commit(writeSet) {
    return this.#queue.run(() => guardAsync(() => this.#inner.commit(writeSet.serial, writeSet.cbor)));
  }

  /** Test hook: as `commit`, then aborts the transaction. */
  _commitThenAbort(writeSet) {
    return this.#queue.run(() => guardAsync(() => this.#inner.commitThenAbort(writeSet.serial, writeSet.cbor)));
  }

  /** Replaces every write set up to `image.serial` by the image, in one transaction. */
  compact(image) {
    return this.#queue.run(() => guardAsync(() => this.#inner.compact(image.raw)));
  }

  /** Closes the database connection once pending writes finish. */
  close() {
    return this.#queue.run(() => this.#inner.close());
  }
}

/** Deletes a store's database and everything in it. */
export const deleteIdbStore = (name) => guardAsync(() => w.deleteIdbStore(name));
