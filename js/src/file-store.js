// The Node/Deno file store: the authority's durable log in a data directory, byte for byte
// the format of the native File host (docs/format.md), so either side opens what the other
// wrote. Only `node:fs/promises` and `node:path` are used; Deno 2 provides both.
//
// Every accepted event is written and `datasync`ed before its receipt is returned; commands
// submitted together, or while a sync is running, share one write and one sync (group
// commit). Opening a group streams its segments record by record through the wasm core
// (memory: the state plus one read chunk, never the log), trims a torn tail by the rule of
// docs/format.md and refuses any other damage with `LOG_CORRUPT` naming file and offset.
//
// The bytes themselves — CRC32C, headers, records, snapshot files, names and the scan with
// its tail rule — are the core's (core/src/log_format, through the wasm module): this file
// only reads, writes, syncs and locks.

import { constants as fsc } from "node:fs";
import * as fsp from "node:fs/promises";
import { join } from "node:path";
import * as w from "../pkg/mwp_wasm.js";
import { AcceptError, StoreError, guard, toMwpError } from "./errors.js";
import { frameBatch } from "./frames.js";
import { acquireDirLock } from "./dir-lock.js";
import { Queue } from "./queue.js";
import { openRegular } from "./regular-file.js";

/**
 * CRC32C of `bytes`, continuing from `crc` (the CRC of the bytes before them; 0 to start):
 * `crc32c(b, crc32c(a))` is the CRC of `a` followed by `b`.
 */
export const crc32c = (bytes, crc = 0) => guardStore(() => w.crc32c(bytes, crc));
/** Directory name of a group: the ID itself when lowercase `[a-z0-9][a-z0-9._-]*`, else `~` and base32 (`G1` → `~i4yq`). */
export const groupDirName = (group) => guardStore(() => w.groupDirName(group));
/** The group ID a directory name stands for, or `null` if `groupDirName` would not make it. */
export const groupFromDirName = (name) => guardStore(() => w.groupFromDirName(name)) ?? null;
/** A new Organization key pair for an `orgPolicy`: `{identity, recipient}` (the identity file's text, and the `age1…` recipient). */
export const generateAuditIdentity = () => guardStore(() => w.generateAuditIdentity());
/**
 * Opens a sealed artifact (`audit.mwpa`) with an identity file's text (`mwp_audit::open`),
 * checking its manifest under `trustedKey` (hex) when given, the ciphertext, the chain and the
 * final snapshot: `{manifest, events: Uint8Array[] (stored bytes, seq 1 first), snapshot, stateHash}`.
 * `AUDIT_INVALID` naming the `check` otherwise (`identity`: no identity given opens it).
 */
export const openAudit = (artifact, identity, trustedKey) => guardStore(() => w.openAudit(artifact, identity, trustedKey));
/** The checked manifest of a sealed artifact (`AUDIT_INVALID` naming the `check` otherwise); no key needed. */
export const auditManifest = (artifact, trustedKey) => guardStore(() => w.auditManifest(artifact, trustedKey));

// Sizes and names of the layout (docs/format.md; core/src/log_format defines them).
const FILE_HEADER_LEN = 192;
const RECORD_HEADER_LEN = 24;
const MAX_RECORD_LEN = 16 << 20;
const OVERLAY_NAME = "redactions.log";
const KEY_NAME = "authority.key";
const GROUPS_DIR = "groups";
const ZERO_ID = "0".repeat(64);
const ERASURE = ["none", "pending", "done"];

const DEFAULTS = { segmentBytes: 64 << 20, reserveBytes: 4 << 20, snapshotEvery: 100_000, snapshotsKept: 2, readOnly: false, orgPolicy: null };
/** A group's sealed audit log and the tombstone its expiry leaves (docs/format.md, "Sealed audit log"). */
const ARTIFACT_NAME = "audit.mwpa";
/** The most an artifact's manifest trailer takes: a 64 KiB manifest, its length and the magic. */
const TRAILER_MAX = (64 << 10) + 12;
const TOMBSTONE_NAME = "audit.tombstone";
/** Prefix of a group directory being created (docs/format.md, "Creating a group"). */
const NEW_GROUP_PREFIX = ".new-";

const now = (nowMs) => (nowMs === undefined ? Date.now() : nowMs);

/** A `LOG_CORRUPT` error naming a file and an offset (the native store's wording). */
function corruptAt(file, offset, what) {
  return new StoreError("LOG_CORRUPT", `${file} at offset ${offset}: ${what}`, { file, offset });
}

/** A `STORAGE` error from a failed file operation. */
function storage(what, e) {
  return new StoreError("STORAGE", `${what}: ${e?.message ?? e}`);
}

/** @internal Runs a file-system call; its failure becomes `STORAGE` naming `what`. */
export async function io(what, fn) {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof StoreError) throw e;
    throw storage(what, e);
  }
}

/** An open file with positional reads and writes. */
class File {
  constructor(path, handle) {
    this.path = path;
    this.handle = handle;
  }

  /**
   * Opens the store file at `path` for reading and writing, without blocking, and refuses it
   * unless it is a regular file (`STORAGE`: `open PATH: it is a FIFO, not a regular file`).
   */
  static async open(path) {
    return new File(path, await io(`open ${path}`, () => openRegular(path, fsc.O_RDWR)));
  }

  /** Creates (or truncates) a file with permission bits `mode` (0600 by default). */
  static async create(path, mode = 0o600) {
    return new File(path, await io(`create ${path}`, () => fsp.open(path, "w+", mode)));
  }

  async size() {
    return (await io(`size of ${this.path}`, () => this.handle.stat())).size;
  }

  /** Exactly `n` bytes at `at` (an error if the file is shorter). */
  async readAt(at, n) {
    const buf = new Uint8Array(n);
    let got = 0;
    while (got < n) {
      const { bytesRead } = await io(`read ${this.path} at ${at + got}`, () => this.handle.read(buf, got, n - got, at + got));
      if (bytesRead === 0) throw new StoreError("STORAGE", `read ${this.path} at ${at}: the file ends early`);
      got += bytesRead;
    }
    return buf;
  }

  async writeAt(at, data) {
    let done = 0;
    while (done < data.length) {
      const { bytesWritten } = await io(`write ${this.path} at ${at + done}`, () =>
        this.handle.write(data, done, data.length - done, at + done));
      done += bytesWritten;
    }
  }

  async truncate(len) {
    await io(`trim ${this.path}`, () => this.handle.truncate(len));
  }

  /** fdatasync: the file's data and size are durable when this resolves. */
  async datasync() {
    await io(`sync ${this.path}`, () => this.handle.datasync());
  }

  async close() {
    try {
      await this.handle.close();
    } catch {
      // Closing twice, or after the descriptor failed, changes nothing worth reporting.
    }
  }
}

/** @internal fsync of a directory: its creations, renames and removals are durable. */
export async function syncDir(dir) {
  await io(`sync ${dir}`, async () => {
    const h = await fsp.open(dir, "r");
    try {
      await h.sync();
    } finally {
      await h.close();
    }
  });
}

/**
 * The last `n` bytes of a file (all of it when shorter), or `null` when it does not exist:
 * an open reads an artifact's manifest from its end, never its ciphertext.
 */
async function readTailIfExists(path, n) {
  if (n === Infinity) return readIfExists(path);
  const fh = await openIfExists(path);
  if (fh === null) return null;
  try {
    const { size } = await fh.stat();
    const len = Math.min(size, n);
    const buf = new Uint8Array(len);
    await fh.read(buf, 0, len, size - len);
    return buf;
  } catch (e) {
    throw storage(`read ${path}`, e);
  } finally {
    await fh.close();
  }
}

/**
 * A snapshot file's bytes, read whole only once its size (fstat) is within the largest snapshot
 * file (`maxSnapshotFileBytes`, the core's `export::MAX_SNAPSHOT_FILE`): a larger one is
 * `LOG_CORRUPT` naming it, and nothing of it is read.
 */
async function readSnapshotFile(path) {
  const fh = await io(`open ${path}`, () => openRegular(path));
  try {
    const { size } = await io(`stat ${path}`, () => fh.stat());
    const max = w.maxSnapshotFileBytes();
    if (size > max) {
      throw new StoreError("LOG_CORRUPT", `${path} is ${size} bytes, more than the largest snapshot file (${max} bytes); it was not read`, { file: path, size, limit: max });
    }
    return new Uint8Array(await io(`read ${path}`, () => fh.readFile()));
  } finally {
    await fh.close().catch(() => {});
  }
}

/**
 * The store file at `path` opened for reading (`openRegular`: without blocking, refused with
 * `STORAGE` unless it is a regular file), or `null` when nothing is there.
 */
async function openIfExists(path) {
  try {
    return await openRegular(path);
  } catch (e) {
    if (e?.code === "ENOENT") return null;
    throw storage(`open ${path}`, e);
  }
}

/** A whole file's bytes (a regular file's: `openIfExists`), or `null` if it does not exist. */
async function readIfExists(path) {
  const fh = await openIfExists(path);
  if (fh === null) return null;
  try {
    return new Uint8Array(await io(`read ${path}`, () => fh.readFile()));
  } finally {
    await fh.close().catch(() => {});
  }
}

async function exists(path) {
  try {
    await fsp.stat(path);
    return true;
  } catch (e) {
    if (e?.code === "ENOENT") return false;
    throw storage(`stat ${path}`, e);
  }
}

/** Whether anything is at `path`, a symbolic link to nothing included (`lstat`). */
async function taken(path) {
  try {
    await fsp.lstat(path);
    return true;
  } catch (e) {
    if (e?.code === "ENOENT") return false;
    throw storage(`stat ${path}`, e);
  }
}

/**
 * Whether the data directory's `groups` (at `path`) exists: `false` when nothing is at the
 * name, `STORAGE` when what is there is not a directory (a file, a link to nothing): not a
 * store without groups, whose every group would read as missing (as natively).
 */
async function groupsDirExists(path) {
  const st = await fsp.stat(path).catch((e) => (e?.code === "ENOENT" ? null : Promise.reject(storage(`stat ${path}`, e))));
  if (st?.isDirectory()) return true;
  if (st === null && !(await taken(path))) return false;
  throw new StoreError("STORAGE", `${path} is not a directory: the data directory is damaged`);
}

/** Writes a whole new file durably: `NAME.tmp`, datasync, rename, fsync of the directory. */
async function writeNewFile(dir, name, data, mode = 0o600) {
  const tmp = join(dir, `${name}.tmp`);
  const file = await File.create(tmp, mode);
  try {
    await file.writeAt(0, data);
    await file.datasync();
    await io(`rename ${tmp}`, () => fsp.rename(tmp, join(dir, name)));
    await syncDir(dir);
  } catch (e) {
    await file.close();
    throw e;
  }
  file.path = join(dir, name);
  return file;
}

/**
 * Walks the records of `file` (`len` bytes) after its header with the core's scanner
 * (`w.LogScanner`), reading what it asks for, and awaits `visit(record)` for each good one in
 * order (`{offset, header: {len, seq, batch, crc}, payload, erasure}`). Returns `{end,
 * lastSeq, torn, reserved}`; damage the tail rule cannot explain throws `LOG_CORRUPT` naming
 * file and offset. `spec`: `{name, firstSeq, contiguous, mayBeTorn, reserve, erased}`, with
 * `erased` the `[seq, origLen, origCrc]` of each redacted record.
 */
async function scan(file, len, spec, visit) {
  const sc = guardStore(() => new w.LogScanner({ ...spec, fileLen: len }));
  try {
    let buf = new Uint8Array(0);
    let bufStart = 0;
    for (;;) {
      const recs = guardStore(() => sc.feed(buf, bufStart));
      for (let i = 0; i < recs.length; i += 6) {
        const offset = recs[i];
        const n = recs[i + 3];
        const at = offset - bufStart + RECORD_HEADER_LEN;
        await visit({
          offset,
          header: { len: n, seq: recs[i + 1], batch: recs[i + 2], crc: recs[i + 4] },
          payload: buf.subarray(at, at + n),
          erasure: ERASURE[recs[i + 5]],
        });
      }
      const end = sc.end();
      if (end !== undefined) return end;
      const at = sc.needAt;
      if (at >= 0) {
        // Read afresh: a re-read after damage must see what the file holds now.
        buf = await file.readAt(at, sc.needLen);
        bufStart = at;
      }
    }
  } finally {
    sc.free();
  }
}

/** Throws `MALFORMED` naming `what` unless `value` is a count: an integer from 0 to 2^53 − 1. */
function countArg(value, what) {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new StoreError("MALFORMED", `\`${what}\` must be a non-negative integer up to 2^53 - 1, got ${typeof value === "number" ? value : typeof value}`);
  }
}

/** Runs a wasm call, turning its errors into MwpErrors. */
function guardStore(fn) {
  return guard(fn);
}

/** Reads and checks a file header (`kind`: "segment" or "overlay"): `{firstSeq, prev (hex), group}`. */
async function checkHeader(file, name, kind, id, firstSeq) {
  const size = await file.size();
  const b = await file.readAt(0, Math.min(size, FILE_HEADER_LEN));
  return guardStore(() => w.checkFileHeader(b, name, kind, id, firstSeq ?? undefined));
}

/** Lowercase hex of bytes. */
function hex(bytes) {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}

/** One Group of a file store: its log on disk and its state in the wasm core. */
export class FileGroup {
  #store;
  #sg;
  #segments;
  #overlay;
  #pending = [];
  #durable;
  /** Id (hex) of the last durable event: what a new segment's header names as `prev`. */
  #durableId;
  #flushing = null;
  #snap;
  #erasing = new Queue();
  #snapshots = new Queue();
  /**
   * `{seq, stateHash}` of the final snapshot once the plain history is removed (SPEC §6a):
   * reads before it are `CURSOR_TOO_OLD`; `null` while the log is whole.
   */
  #removed = null;

  /** @internal use `FileStore.openGroup`. */
  constructor(store, id, dir, sg, segments, overlay, snap, removed = null) {
    this.#store = store;
    /** The group's ID. */
    this.id = id;
    /** The group's directory. */
    this.dir = dir;
    this.#sg = sg;
    this.#segments = segments;
    this.#overlay = overlay;
    this.#durable = sg.seq;
    this.#durableId = sg.head;
    this.#snap = snap;
    this.#removed = removed;
  }

  /** Seq of the last durable event. */
  get seq() {
    return this.#durable;
  }

  /** Id (hex) of the last accepted event. */
  get head() {
    return this.#sg.head;
  }

  /** Hash (hex) of the state (after every accepted event; all are durable once their submit resolves). */
  stateHash() {
    return this.#call(() => this.#sg.stateHash());
  }

  /** The state as a plain object. */
  state() {
    return this.#call(() => this.#sg.state());
  }

  /** Canonical CBOR of the state. */
  stateCbor() {
    return this.#call(() => this.#sg.stateCbor());
  }

  /** The original receipt of (actor, action) if its event is durable, else `undefined`. */
  receipt(actor, action) {
    const r = this.#call(() => this.#sg.receipt(actor, action));
    return r !== undefined && r.seq <= this.#durable ? r : undefined;
  }

  /** IDs of the work items a worker may claim now. */
  frontier(nowMs) {
    return this.#call(() => this.#sg.frontier(now(nowMs)));
  }

  /** The earliest time a `tick` would expire a lease, or `undefined`. */
  nextDeadline() {
    return this.#sg.nextDeadline();
  }

  #call(fn) {
    return guard(fn);
  }

  /**
   * Decides commands in order, each seeing the ones before, and makes the accepted events
   * durable with one write and one `datasync`. Resolves to one result per command:
   * `{outcome: "accepted"|"duplicate", receipt, …}` or `{outcome: "rejected", error}`.
   */
  async submit(commands, nowMs) {
    const list = Array.isArray(commands) ? commands : [commands];
    const at = now(nowMs);
    this.#store._checkSticky();
    const results = [];
    const after = [];
    let snapshot = null;
    let seal = null;
    for (const command of list) {
      // The core's authority driver decides, and says what to persist after the event.
      let step;
      try {
        step = this.#sg.submit(command, at);
      } catch (e) {
        results.push({ outcome: "rejected", error: errorBody(e) });
        continue;
      }
      const d = step.decision;
      if (d.outcome === "accepted") {
        // Events are bounded far below the record limit by the command limits.
        this.#pending.push({ seq: d.event.seq, id: d.event.id, bytes: d.eventCbor });
        if (step.erase !== undefined) after.push(step.erase);
        if (step.snapshot !== undefined) snapshot = step.snapshot;
        if (step.seal !== undefined) seal = step.seal;
      }
      results.push(d);
    }
    await this.#waitDurable(this.#sg.seq);
    for (const seq of after) await this.#sticky(() => this.#erase(seq));
    if (snapshot) await this.#sticky(() => this.#writeSnapshot(snapshot));
    // Archived under an org policy: seal once the event and the final snapshot are durable.
    if (seal) await this.#sticky(() => this.#seal(seal, at));
    return results;
  }

  /**
   * Sends the `tick` that expires due leases, as the core's authority driver names and signs
   * it (`StoreGroup.pollTick`). Resolves to the accepted decision, or to `undefined` when no
   * lease is due or the group is archived.
   */
  async tick(nowMs) {
    const at = now(nowMs);
    const cmd = this.#call(() => this.#sg.pollTick(at));
    if (cmd === undefined) return undefined;
    const [r] = await this.submit([cmd], at);
    if (r.outcome !== "rejected") return r;
    if (r.error.code === "NOT_YET" || r.error.code === "GROUP_ARCHIVED") return undefined;
    const { code, message, ...details } = r.error;
    throw new AcceptError(code, message, details);
  }

  async #sticky(fn) {
    try {
      return await fn();
    } catch (e) {
      if (e?.code === "STORAGE") this.#store._setSticky(e);
      throw e;
    }
  }

  /** Waits until every event up to `seq` is durable, flushing as the leader if nobody is. */
  async #waitDurable(seq) {
    while (this.#durable < seq) {
      this.#store._checkSticky();
      if (this.#flushing === null) {
        this.#flushing = this.#flush().then(
          (d) => {
            this.#durable = Math.max(this.#durable, d);
            this.#flushing = null;
          },
          (e) => {
            this.#store._setSticky(e);
            this.#flushing = null;
          },
        );
      }
      await this.#flushing;
    }
  }

  /** Test hook: the next batch write fails as a full disk would (`STORAGE`). */
  _failNextWrite() {
    this.#failNext = true;
  }

  #failNext = false;

  /** Writes every staged event as one batch at the end of the last segment and syncs it. */
  async #flush() {
    const pending = this.#pending;
    this.#pending = [];
    if (pending.length === 0) return this.#durable;
    if (this.#failNext) {
      this.#failNext = false;
      throw new StoreError("STORAGE", `append to ${this.dir}: injected fault`);
    }
    // A writer that lost the directory to another must not append under it.
    await this.#store._checkLock();
    let seg = this.#segments[this.#segments.length - 1];
    const firstSeq = pending[0].seq;
    if (seg.end >= this.#store.options.segmentBytes && seg.end > FILE_HEADER_LEN) seg = await this.#roll(firstSeq);
    const offsets = [];
    let size = 0;
    for (const p of pending) {
      offsets.push(seg.end + size);
      size += RECORD_HEADER_LEN + p.bytes.length;
    }
    const buf = guardStore(() => w.encodeBatch(firstSeq, frameBatch(pending.map((p) => p.bytes))));
    // Past the reserved space: reserve more zeros in the same write and the same sync, by
    // the core's rule (docs/format.md, "Reserved space").
    const past = seg.end + size > seg.alloc && this.#store.options.reserveBytes > 0;
    const reserve = past ? guardStore(() => w.reserveLen(seg.alloc, this.#store.options.reserveBytes)) : 0;
    const out = reserve > 0 ? new Uint8Array(size + reserve) : buf;
    if (out !== buf) out.set(buf);
    await seg.file.writeAt(seg.end, out);
    await seg.file.datasync();
    seg.alloc = Math.max(seg.alloc, seg.end + out.length);
    seg.end += size;
    for (const o of offsets) seg.offsets.push(o);
    this.#durableId = pending[pending.length - 1].id;
    return pending[pending.length - 1].seq;
  }

  /**
   * Starts a new segment whose first record will be `firstSeq`. The segment being closed is
   * first cut to its last record and synced: only the last segment may end in reserved zeros.
   */
  async #roll(firstSeq) {
    const last = this.#segments[this.#segments.length - 1];
    if (last.alloc > last.end) {
      await last.file.truncate(last.end);
      await last.file.datasync();
      last.alloc = last.end;
    }
    const name = w.segmentName(firstSeq);
    const header = guardStore(() => w.encodeFileHeader("segment", firstSeq, this.#durableId, this.id));
    const file = await writeNewFile(this.dir, name, header);
    const seg = { firstSeq, name, file, offsets: [], end: FILE_HEADER_LEN, alloc: FILE_HEADER_LEN };
    this.#segments.push(seg);
    return seg;
  }


  /** Stored events after `after` (JSON form), at most `limit` and 8 MiB of records per call. */
  async events(after = 0, limit) {
    const frames = await this.eventFrames(after, limit);
    const out = [];
    let at = 0;
    const view = new DataView(frames.buffer, frames.byteOffset, frames.byteLength);
    while (at < frames.length) {
      const len = view.getUint32(at, true);
      out.push(this.#call(() => w.decodeEvent(frames.subarray(at + 4, at + 4 + len))));
      at += 4 + len;
    }
    return out;
  }

  /**
   * Stored events after `after` as a frame batch of canonical CBOR (redacted events in their
   * redacted form), durable ones only, at most `limit` and about 8 MiB per call (the core's
   * page rule, as every store's): call again from the last seq returned to read on.
   */
  async eventFrames(after = 0, limit = Number.MAX_SAFE_INTEGER) {
    // A fractional `after` named no record and was read forever; a negative one a record
    // "not in the log".
    countArg(after, "after");
    countArg(limit, "limit");
    if (this.#removed !== null) {
      // The plain history is sealed and removed: the core decides what is still served.
      const { seq, stateHash } = this.#removed;
      guardStore(() => w.auditReplay(after, seq, stateHash, this.id));
    }
    const last = Math.min(this.#durable, after + limit);
    const items = [];
    let seq = after + 1;
    // The bytes of the events the page has taken (as served: their canonical CBOR): it takes
    // the next while the core's rule of every store's page says so (`pageTakes`, as natively).
    let taken = 0;
    while (seq <= last && w.pageTakes(taken)) {
      const seg = this.#segmentOf(seq);
      if (seg === undefined) throw new StoreError("LOG_CORRUPT", `seq ${seq} of group ${this.id} is not in the log`);
      const i0 = seq - seg.firstSeq;
      const start = seg.offsets[i0];
      const upto = Math.min(last - seg.firstSeq + 1, seg.offsets.length);
      // Records i0..i1 of this segment: its first (the loop's condition takes it), then each
      // while the payloads before it (records are contiguous) leave room. Their stored
      // lengths only bound the read: a redacted event counts as served (its redacted form),
      // so the loop below decides which the page takes.
      let i1 = i0 + 1;
      while (i1 < upto && w.pageTakes(taken + Math.max(0, seg.offsets[i1] - start - (i1 - i0) * RECORD_HEADER_LEN))) i1++;
      const end = i1 < seg.offsets.length ? seg.offsets[i1] : seg.end;
      const buf = await seg.file.readAt(start, end - start);
      let at = 0;
      while (at + RECORD_HEADER_LEN <= buf.length && seq <= last && w.pageTakes(taken)) {
        const h = w.recordAt(buf, at);
        if (h === undefined || h.seq !== seq) throw corruptAt(join(this.dir, seg.name), start + at, `expected record seq ${seq}`);
        const total = RECORD_HEADER_LEN + h.len;
        const entry = this.#overlay.entries.get(seq);
        // Counted as served (a redacted event's redacted form, as a PostgreSQL row holds it).
        if (entry !== undefined) {
          items.push(await this.#overlay.file.readAt(entry.offset, entry.len));
          taken += entry.len;
        } else {
          if (!h.crcOk) throw corruptAt(join(this.dir, seg.name), start + at, "record checksum mismatch");
          const stored = buf.subarray(at + RECORD_HEADER_LEN, at + total);
          if (this.#sg.servesRedacted(seq)) {
            // Its erasure has begun and is not done (a writer between the durable
            // `event_redacted` and the overlay entry, or where one stopped, read by a
            // read-only open): served redacted, never its values (the core's rule).
            let red;
            try {
              red = w.redactEvent(stored);
            } catch (e) {
              throw corruptAt(join(this.dir, seg.name), start + at, toMwpError(e).message);
            }
            items.push(red);
            taken += red.length;
          } else {
            items.push(stored);
            taken += h.len;
          }
        }
        at += total;
        seq += 1;
      }
    }
    return frameBatch(items);
  }

  #segmentOf(seq) {
    const segs = this.#segments;
    let lo = 0;
    let hi = segs.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (segs[mid].firstSeq <= seq) lo = mid + 1;
      else hi = mid;
    }
    const seg = segs[lo - 1];
    return seg !== undefined && seq - seg.firstSeq < seg.offsets.length ? seg : undefined;
  }

  /** The durable record of `seq`: `{seg, offset, header, headerBytes, payload}`. */
  async #readRecord(seq) {
    const seg = this.#segmentOf(seq);
    if (seg === undefined) throw new StoreError("LOG_CORRUPT", `seq ${seq} of group ${this.id} is not in the log`);
    const offset = seg.offsets[seq - seg.firstSeq];
    const headerBytes = await seg.file.readAt(offset, RECORD_HEADER_LEN);
    const h = guardStore(() => w.parseRecordHeader(headerBytes, 0));
    if (h.seq !== seq || h.len > MAX_RECORD_LEN) {
      throw corruptAt(join(this.dir, seg.name), offset, `expected record seq ${seq}`);
    }
    const payload = await seg.file.readAt(offset + RECORD_HEADER_LEN, h.len);
    return { seg, offset, header: h, headerBytes, payload };
  }

  async _needsZeroing(seq) {
    const { headerBytes, payload } = await this.#readRecord(seq);
    return !w.recordIsErased(headerBytes, payload);
  }

  /**
   * Erases the stored opaque values of event `seq` (SPEC §6): the redacted form goes to the
   * overlay (synced), then the record's payload is zeroed in place with its CRC fixed
   * (synced).
   */
  async #erase(seq) {
    return this.#erasing.run(async () => {
      const { seg, offset, header: h, headerBytes, payload } = await this.#readRecord(seq);
      const path = join(this.dir, seg.name);
      if (!this.#overlay.entries.has(seq)) {
        if (!w.recordMatches(headerBytes, payload)) throw corruptAt(path, offset, `record seq ${seq} checksum mismatch`);
        if (payload.every((b) => b === 0)) {
          throw corruptAt(path, offset, `record seq ${seq} was erased but ${OVERLAY_NAME} has no entry for it`);
        }
        let red;
        try {
          red = w.redactEvent(payload);
        } catch (e) {
          throw corruptAt(path, offset, toMwpError(e).message);
        }
        const ov = await this.#overlayFile();
        const rec = guardStore(() => w.encodeOverlayRecord(seq, h.len, h.crc, red));
        await ov.file.writeAt(ov.end, rec);
        await ov.file.datasync();
        this.#overlay.entries.set(seq, { offset: ov.end + RECORD_HEADER_LEN + 8, len: red.length, orig: { len: h.len, crc: h.crc } });
        ov.end += rec.length;
      }
      await seg.file.writeAt(offset + 20, guardStore(() => w.erasePatch(headerBytes)));
      await seg.file.datasync();
    });
  }

  async _erase(seq) {
    return this.#erase(seq);
  }

  /** The overlay, created durably if missing. */
  async #overlayFile() {
    if (this.#overlay.file === null) {
      const header = guardStore(() => w.encodeFileHeader("overlay", 0, ZERO_ID, this.id));
      this.#overlay.file = await writeNewFile(this.dir, OVERLAY_NAME, header);
      this.#overlay.end = FILE_HEADER_LEN;
    }
    return this.#overlay;
  }

  /** Takes a signed snapshot of the durable state now; resolves to its seq. */
  async snapshotNow() {
    await this.#waitDurable(this.#sg.seq);
    const snap = this.#call(() => this.#sg.snapshot());
    await this.#sticky(() => this.#writeSnapshot(snap));
    return snap.seq;
  }

  /** Writes a snapshot file (`{bytes, seq}`) unless a newer one exists, and prunes old ones. */
  async #writeSnapshot(snap) {
    return this.#snapshots.run(async () => {
      if (this.#snap !== null && this.#snap.seq >= snap.seq) return;
      await this.#store._checkLock();
      const file = await writeNewFile(this.dir, w.snapshotName(snap.seq), guardStore(() => w.encodeSnapshotFile(snap.seq, snap.bytes)));
      await file.close();
      this.#snap = { seq: snap.seq };
      const names = (await io(`list ${this.dir}`, () => fsp.readdir(this.dir))).filter((n) => w.parseNumbered(n, "snap") !== undefined).sort();
      const keep = Math.max(1, this.#store.options.snapshotsKept);
      if (names.length <= keep) return;
      for (const n of names.slice(0, names.length - keep)) await io(`remove ${join(this.dir, n)}`, () => fsp.unlink(join(this.dir, n)));
      await syncDir(this.dir);
    });
  }

  async _writeSnapshotIfMissing(report) {
    if (this.#sg.archived && this.#snap?.seq !== this.#sg.seq) {
      await this.#writeSnapshot(this.#call(() => this.#sg.snapshot()));
      report.repaired.push(`wrote the final snapshot of ${this.id} at seq ${this.#sg.seq}`);
    }
  }

  /**
   * The manifest (JSON form) of the group's sealed audit log, checked under the store's key
   * (`w.auditManifest`), or `undefined` when there is none.
   */
  async auditManifest() {
    const bytes = await readIfExists(join(this.dir, ARTIFACT_NAME));
    return bytes === null ? undefined : guardStore(() => w.auditManifest(bytes, this.#store.authorityKey));
  }

  /** Whether the plain history was removed after sealing (only the final snapshot and the artifact remain). */
  get historyRemoved() {
    return this.#removed !== null;
  }

  /**
   * Seals the audit log of the archived group under `policy` (SPEC §6a) at `sealedAt`: every
   * stored event in seq order (redacted ones as stored) and the final snapshot, through the
   * wasm module's `AuditSealer` (mwp-audit), into `audit.mwpa` by the new-file protocol.
   * An artifact already there whose manifest verifies under the store key at the final seq
   * is kept as is. Then, if its manifest says `remove_plain`, removes the plain history.
   */
  async #seal(policy, sealedAt) {
    return this.#snapshots.run(async () => {
      await this.#store._checkLock();
      const finalSeq = this.#durable;
      let manifest = await this.#validArtifact(finalSeq);
      if (manifest === undefined) {
        if (this.#removed !== null) throw new StoreError("LOG_CORRUPT", `group ${this.id}: its plain history is removed and ${ARTIFACT_NAME} does not verify`);
        manifest = await this.#writeArtifact(policy, finalSeq, sealedAt);
      }
      if (manifest.remove_plain) await this.#removePlain(manifest);
    });
  }

  /** The manifest of `audit.mwpa` if it verifies under the store key at `seq` for this group, else `undefined`. */
  async #validArtifact(seq) {
    const bytes = await readIfExists(join(this.dir, ARTIFACT_NAME));
    if (bytes === null) return undefined;
    try {
      const m = w.auditManifest(bytes, this.#store.authorityKey);
      return m.group === this.id && m.seq === seq ? m : undefined;
    } catch {
      return undefined;
    }
  }

  /** Streams the artifact into `audit.mwpa.tmp`, syncs it and renames it into place; resolves to its manifest. */
  async #writeArtifact(policy, finalSeq, sealedAt) {
    const snapPath = join(this.dir, w.snapshotName(finalSeq));
    const stored = await readSnapshotFile(snapPath);
    const { payload } = guardStore(() => w.decodeSnapshotFile(stored));
    const tmp = join(this.dir, `${ARTIFACT_NAME}.tmp`);
    const sealer = guardStore(() => new w.AuditSealer(policy));
    const file = await File.create(tmp);
    try {
      let at = 0;
      const append = async (chunk) => {
        if (chunk.length === 0) return;
        await file.writeAt(at, chunk);
        at += chunk.length;
      };
      await append(sealer.take());
      // Every stored event, seq 1 first, a page (at most 8 MiB) at a time.
      for (let after = 0; after < finalSeq;) {
        const frames = await this.eventFrames(after, finalSeq - after);
        const view = new DataView(frames.buffer, frames.byteOffset, frames.byteLength);
        let i = 0;
        while (i < frames.length) {
          const len = view.getUint32(i, true);
          await append(guardStore(() => sealer.event(frames.subarray(i + 4, i + 4 + len))));
          i += 4 + len;
          after += 1;
        }
      }
      const { bytes, manifest } = guardStore(() => sealer.finish(payload, sealedAt, this.#store._secretKey));
      await append(bytes);
      await file.datasync();
      await file.close();
      await io(`rename ${tmp}`, () => fsp.rename(tmp, join(this.dir, ARTIFACT_NAME)));
      await syncDir(this.dir);
      return manifest;
    } catch (e) {
      await file.close();
      throw e;
    } finally {
      sealer.free();
    }
  }

  /**
   * Removes the plain history once the artifact of `manifest` (final seq N) is durable: a new,
   * empty segment for seq N+1 (header only, prev = the head id) by the new-file protocol —
   * the durable record that removal began — then every older segment, the redaction
   * overlay and every snapshot but the final one; fsync of the directory. Idempotent: an
   * open finishes an interrupted removal with it. Resolves to whether anything was done.
   */
  async #removePlain(manifest) {
    await this.#store._checkLock();
    const seq = manifest.seq;
    const next = seq + 1;
    let did = false;
    let last = this.#segments[this.#segments.length - 1];
    if (last === undefined || last.firstSeq !== next) {
      const name = w.segmentName(next);
      const header = guardStore(() => w.encodeFileHeader("segment", next, manifest.id, this.id));
      const file = await writeNewFile(this.dir, name, header);
      last = { firstSeq: next, name, file, offsets: [], end: FILE_HEADER_LEN, alloc: FILE_HEADER_LEN };
      did = true;
    }
    for (const s of this.#segments) if (s !== last) await s.file.close();
    this.#segments = [last];
    if (this.#overlay.file !== null) await this.#overlay.file.close();
    this.#overlay = { file: null, end: 0, entries: new Map() };
    const names = await io(`list ${this.dir}`, () => fsp.readdir(this.dir));
    const stale = names.filter((n) => {
      const segSeq = w.parseNumbered(n, "seg");
      if (segSeq !== undefined) return segSeq < next;
      const snapSeq = w.parseNumbered(n, "snap");
      if (snapSeq !== undefined) return snapSeq !== seq;
      return n === OVERLAY_NAME;
    });
    for (const n of stale.sort()) await io(`remove ${join(this.dir, n)}`, () => fsp.unlink(join(this.dir, n)));
    if (stale.length > 0 || did) await syncDir(this.dir);
    this.#removed = { seq, stateHash: this.#sg.stateHash() };
    this.#snap = { seq };
    return did || stale.length > 0;
  }

  /** @internal On open (the writer's): finishes an interrupted removal of the plain history. */
  async _removePlain(manifest) {
    return this.#snapshots.run(() => this.#removePlain(manifest));
  }

  /**
   * @internal On open (the writer's), for an archived group: finishes what a crash
   * interrupted after the archive: seals when a seal is due (`StoreGroup.sealDue`) and
   * neither a valid artifact nor a tombstone (an expired artifact) exists at the final seq,
   * and removes the plain history when the artifact's manifest asks for it. `manifest`,
   * `tombstone`: what the open found (checked under the store key), or `null`.
   */
  async _sealIfDue(report, manifest, tombstone) {
    if (!this.#sg.archived) return;
    const finalSeq = this.#durable;
    const policy = this.#sg.sealDue;
    await this.#snapshots.run(async () => {
      let m = manifest?.seq === finalSeq ? manifest : undefined;
      if (m === undefined) {
        if (policy === undefined || tombstone?.seq === finalSeq) return;
        m = await this.#writeArtifact(policy, finalSeq, Date.now());
        report.repaired.push(`sealed the audit log of ${this.id} at seq ${finalSeq}`);
      }
      if (m.remove_plain && (await this.#removePlain(m))) {
        report.repaired.push(`removed the plain history of ${this.id} up to seq ${finalSeq}`);
      }
    });
  }

  /** Waits for pending writes, then closes the group's files. */
  async close() {
    if (this.#flushing !== null) await this.#flushing;
    await this.#erasing.run(() => {});
    await this.#snapshots.run(() => {});
    for (const s of this.#segments) await s.file.close();
    if (this.#overlay.file !== null) await this.#overlay.file.close();
    this.#sg.free();
  }
}

/** A data directory of groups: the Node/Deno counterpart of the native `FileStore`. */
export class FileStore {
  #groups = new Map();
  #opening = new Map();
  #creating = new Queue();
  #sticky = null;
  #secret;
  #closed = false;

  #lock;

  /** @internal use `openFileStore`. */
  constructor(root, secret, options, lock = null) {
    this.#lock = lock;
    /** The data directory. */
    this.root = root;
    this.#secret = secret;
    /** Options in effect: `{segmentBytes, reserveBytes, snapshotEvery, snapshotsKept, readOnly, orgPolicy}` (`orgPolicy`: the policy file's JSON text, or `null`). */
    this.options = options;
    /** What opening found and did: `{trimmed, skippedSnapshots, repaired, removed}`. */
    this.report = { trimmed: [], skippedSnapshots: [], repaired: [], removed: [] };
    /** The authority's public key (hex): an `open_group` must name it as `authority_key`. */
    this.authorityKey = w.publicKeyOf(secret);
  }

  /** @internal */
  get _secretKey() {
    return this.#secret;
  }

  /** @internal A group not open yet, under the core's authority driver with this store's key and cadence; with `group`, a log replayed into it must be that group's. */
  _newStoreGroup(group) {
    return new w.StoreGroup(this.#secret, this.options.snapshotEvery ?? undefined, group, this.options.orgPolicy ?? undefined);
  }

  /** @internal */
  _checkSticky() {
    if (this.#closed) throw new StoreError("STORAGE", "the store is closed");
    if (this.options.readOnly) throw new StoreError("STORAGE", `${this.root} is open read-only; commands go to the writer that holds it`);
    if (this.#sticky !== null) {
      throw new StoreError("STORAGE", `the store refuses writes after a storage failure (${this.#sticky.message}); reopen it`);
    }
  }

  /** @internal Throws `STORAGE` unless this writer still holds the directory (before each write). */
  async _checkLock() {
    if (this.#lock !== null) await this.#lock.check();
  }

  /** @internal */
  _setSticky(e) {
    if (this.#sticky === null) this.#sticky = e;
  }

  /** IDs of the groups in the directory, sorted (opening one without a segment is `LOG_CORRUPT`). */
  async groups() {
    const dir = join(this.root, GROUPS_DIR);
    const out = [];
    let names = [];
    try {
      names = await fsp.readdir(dir);
    } catch (e) {
      if (!(this.options.readOnly && e?.code === "ENOENT")) throw storage(`list ${dir}`, e);
    }
    for (const name of names) {
      const id = groupFromDirName(name);
      if (id === null) continue;
      if (this.#groups.has(id)) {
        out.push(id);
        continue;
      }
      const st = await fsp.stat(join(dir, name)).catch(() => null);
      if (st?.isDirectory()) out.push(id);
    }
    return out.sort();
  }

  /**
   * Opens a group (replaying its log once; later calls return the same object), or resolves
   * to `undefined` if the directory holds no such group.
   */
  async openGroup(id) {
    const open = this.#groups.get(id);
    if (open !== undefined) return open;
    let p = this.#opening.get(id);
    if (p === undefined) {
      p = openGroupDir(this, id, join(this.root, GROUPS_DIR, groupDirName(id)), this.report).then((g) => {
        if (g !== undefined) this.#groups.set(id, g);
        return g;
      });
      this.#opening.set(id, p);
      p.finally(() => this.#opening.delete(id)).catch(() => {});
    }
    return p;
  }

  async #known(id) {
    const g = await this.openGroup(id);
    if (g === undefined) throw new StoreError("NOT_FOUND", `group ${id} does not exist`);
    return g;
  }

  /**
   * Decides commands in order and resolves, once the accepted events are durable, to one
   * result per command (rejections as values). Commands of one group in a row share one
   * write and one sync; an `open_group` for a new group creates its directory.
   */
  async submit(commands, nowMs) {
    const list = Array.isArray(commands) ? commands : [commands];
    const at = now(nowMs);
    this._checkSticky();
    const results = [];
    let i = 0;
    while (i < list.length) {
      let group;
      try {
        group = groupOf(list[i]);
      } catch (e) {
        results.push({ outcome: "rejected", error: errorBody(e) });
        i += 1;
        continue;
      }
      let j = i + 1;
      while (j < list.length && safeGroupOf(list[j]) === group) j++;
      let run = list.slice(i, j);
      let g = await this.openGroup(group);
      if (g === undefined) {
        const [first, ...rest] = run;
        const created = await this.#create(group, first, at);
        results.push(created.result);
        g = created.group;
        run = rest;
      }
      if (run.length > 0) {
        if (g === undefined) {
          // The group still does not exist: each command is decided against no state.
          for (const c of run) results.push((await this.#create(group, c, at)).result);
        } else {
          results.push(...(await g.submit(run, at)));
        }
      }
      i = j;
    }
    return results;
  }

  /** Creates a group from its `open_group` command, one creation at a time. */
  #create(id, command, at) {
    return this.#creating.run(async () => {
      const existing = await this.openGroup(id);
      if (existing !== undefined) return { result: (await existing.submit([command], at))[0], group: existing };
      this._checkSticky();
      const sg = this._newStoreGroup();
      let d;
      try {
        // The core's driver accepts only an open_group naming this authority's key here.
        d = sg.submit(command, at).decision;
      } catch (e) {
        sg.free();
        return { result: { outcome: "rejected", error: errorBody(e) }, group: undefined };
      }
      try {
        await this._checkLock();
        const g = await createGroupDir(this, id, sg, d);
        this.#groups.set(id, g);
        return { result: d, group: g };
      } catch (e) {
        sg.free();
        if (e?.code === "STORAGE") this._setSticky(e);
        throw e;
      }
    });
  }

  /** Stored events of a group after `after` (JSON form; a page of at most 8 MiB). */
  async events(group, after = 0, limit) {
    return (await this.#known(group)).events(after, limit);
  }

  /** Stored events of a group after `after`, as a frame batch. */
  async eventFrames(group, after = 0, limit) {
    return (await this.#known(group)).eventFrames(after, limit);
  }

  /** The original receipt of (actor, action) in a group, or `undefined`. */
  async receipt(group, actor, action) {
    const g = await this.openGroup(group);
    return g?.receipt(actor, action);
  }

  /** The manifest (JSON form) of a group's sealed audit log, checked under the store key, or `undefined`. */
  async auditManifest(group) {
    return (await this.#known(group)).auditManifest();
  }

  /** Hash (hex) of a group's durable state. */
  async stateHash(group) {
    return (await this.#known(group)).stateHash();
  }

  /** A group's state as a plain object. */
  async state(group) {
    return (await this.#known(group)).state();
  }

  /** Sends a group's `tick` (see `FileGroup.tick`): the decision, or `undefined` if nothing is due. */
  async tick(group, nowMs) {
    return (await this.#known(group)).tick(nowMs);
  }

  /** Waits for pending writes and closes every file; the store refuses calls afterwards. */
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    await this.#creating.run(() => {});
    for (const p of this.#opening.values()) await p.catch(() => {});
    for (const g of this.#groups.values()) await g.close();
    this.#groups.clear();
    if (this.#lock !== null) await this.#lock.release();
  }
}

/** The JSON form of an error, for a rejection given as a value. */
function errorBody(e) {
  const m = toMwpError(e);
  return typeof m?.toJSON === "function" ? m.toJSON() : { code: "MALFORMED", message: String(m?.message ?? m) };
}

function groupOf(command) {
  if (command instanceof Uint8Array) return w.parseCommand(command).group;
  if (command !== null && typeof command === "object" && typeof command.group === "string") return command.group;
  return w.parseCommand(command).group;
}

function safeGroupOf(command) {
  try {
    return groupOf(command);
  } catch {
    return undefined;
  }
}

/**
 * Creates a new group's directory and first segment (holding the genesis event), durably.
 * The directory is built as `groups/.new-<name>` and renamed to its group's name once the
 * segment is durable (docs/format.md, "Creating a group"): a group directory always holds a
 * segment, and only a `.new-` directory is an interrupted creation.
 */
async function createGroupDir(store, id, sg, decision) {
  const groups = join(store.root, GROUPS_DIR);
  const dir = join(groups, groupDirName(id));
  const building = join(groups, `${NEW_GROUP_PREFIX}${groupDirName(id)}`);
  await removeDir(building);
  await io(`create ${building}`, () => fsp.mkdir(building, { mode: 0o700 }));
  const header = guardStore(() => w.encodeFileHeader("segment", 1, ZERO_ID, id));
  const rec = guardStore(() => w.encodeRecord(1, 1, decision.eventCbor));
  const data = new Uint8Array(header.length + rec.length);
  data.set(header, 0);
  data.set(rec, header.length);
  const file = await writeNewFile(building, w.segmentName(1), data);
  try {
    await io(`rename ${building}`, () => fsp.rename(building, dir));
    await syncDir(groups);
  } catch (e) {
    await file.close();
    throw e;
  }
  file.path = join(dir, w.segmentName(1));
  const seg = { firstSeq: 1, name: w.segmentName(1), file, offsets: [FILE_HEADER_LEN], end: data.length, alloc: data.length };
  return new FileGroup(store, id, dir, sg, [seg], { file: null, end: 0, entries: new Map() }, null);
}

/** Removes a directory of files (an interrupted creation), if it exists. */
async function removeDir(dir) {
  let names;
  try {
    names = await fsp.readdir(dir);
  } catch (e) {
    if (e?.code === "ENOENT") return false;
    throw storage(`list ${dir}`, e);
  }
  for (const n of names) await io(`remove ${join(dir, n)}`, () => fsp.unlink(join(dir, n)));
  await io(`remove ${dir}`, () => fsp.rmdir(dir));
  return true;
}

/**
 * Opens a group directory (the native `GroupLog::open`; a reader changes nothing): deletes `*.tmp`, reads the overlay
 * (trimming its torn tail), takes the newest snapshot that verifies as the base, streams every
 * segment in order applying the events after the base, trims a torn tail of the last segment,
 * refuses a group that is not archived and names another `authority_key` than the store's key
 * (`STORAGE` naming `authority.key`), then finishes interrupted erasures and a missing final
 * snapshot. `undefined`: no such group.
 */
async function openGroupDir(store, id, dir, report) {
  let names;
  try {
    names = await fsp.readdir(dir);
  } catch (e) {
    if (e?.code === "ENOENT") return undefined;
    throw storage(`list ${dir}`, e);
  }
  const readOnly = store.options.readOnly;
  const tmps = names.filter((n) => n.endsWith(".tmp"));
  if (!readOnly) {
    // A `.tmp` file was never renamed into place: it holds nothing acknowledged.
    for (const n of tmps) await io(`remove ${n}`, () => fsp.unlink(join(dir, n)));
    if (tmps.length > 0) await syncDir(dir);
  }
  names = names.filter((n) => !n.endsWith(".tmp"));
  const numbered = (ext) => names.map((n) => w.parseNumbered(n, ext)).filter((s) => s !== undefined).sort((a, b) => a - b);
  let segSeqs = numbered("seg");
  if (segSeqs.length === 0) {
    // A group directory is renamed into place holding its first segment: events are missing.
    const what = numbered("snap").length > 0 || names.includes(OVERLAY_NAME)
      ? "holds snapshots or redactions but no log segment"
      : "holds no log segment";
    throw new StoreError("LOG_CORRUPT", `${dir}: group ${id} ${what}: its acknowledged events are missing`, { file: dir });
  }
  let snapSeqs = numbered("snap");
  // A sealed group (SPEC §6a): the manifest of its artifact (or the tombstone an expired one
  // left), checked under the store key. When the log holds the empty segment N+1 written
  // once the artifact of final seq N was durable, the plain history is removed (or being
  // removed): the final snapshot N is the base, older segments and the overlay are ignored
  // (and removed by the writer).
  const manifest = names.includes(ARTIFACT_NAME) ? await sealedRecord(store, id, join(dir, ARTIFACT_NAME), w.auditTrailer, TRAILER_MAX) : null;
  // A tombstone is far smaller than this; a larger file's tail does not decode.
  const tombstone = names.includes(TOMBSTONE_NAME) ? await sealedRecord(store, id, join(dir, TOMBSTONE_NAME), w.auditTombstone, TRAILER_MAX) : null;
  // The record in force (the artifact's manifest, else the tombstone), and where the plain
  // log starts by it: the core's rule.
  const record = manifest ?? tombstone;
  const removes = manifest !== null ? manifest.remove_plain : tombstone !== null;
  const start = guardStore(() => w.auditPlainLogStart(record?.seq, removes, segSeqs));
  let sealed = null;
  if (start > 1) sealed = manifest !== null ? { seq: manifest.seq, id: manifest.id, snapshot: manifest.snapshot, remove_plain: true } : { seq: tombstone.seq, remove_plain: true };
  if (sealed !== null) {
    segSeqs = segSeqs.filter((s) => s > sealed.seq);
    snapSeqs = snapSeqs.filter((s) => s === sealed.seq);
  }
  const opened = [];
  try {
    // The overlay first: the segment scan needs to know which records are erased.
    const overlay = { file: null, end: 0, entries: new Map() };
    if (sealed === null && names.includes(OVERLAY_NAME)) {
      const path = join(dir, OVERLAY_NAME);
      const file = await File.open(path);
      opened.push(file);
      await checkHeader(file, path, "overlay", id, null);
      const len = await file.size();
      const end = await scan(file, len, { name: path, firstSeq: 1, contiguous: false, mayBeTorn: true }, (r) => {
        const orig = w.decodeOverlayEntry(r.payload);
        if (orig === undefined) throw corruptAt(path, r.offset, "entry shorter than 8 bytes");
        overlay.entries.set(r.header.seq, { offset: r.offset + RECORD_HEADER_LEN + 8, len: r.payload.length - 8, orig });
      });
      if (end.torn !== null && !readOnly) {
        await file.truncate(end.end);
        await file.datasync();
        report.trimmed.push({ file: path, offset: end.end, bytes: end.torn });
      }
      overlay.file = file;
      overlay.end = end.end;
    }

    // The newest snapshot that verifies is the base; older ones are fallbacks.
    let sg = null;
    let snap = null;
    for (const seq of [...snapSeqs].reverse()) {
      const path = join(dir, w.snapshotName(seq));
      try {
        const bytes = await readSnapshotFile(path);
        const { seq: frameSeq, payload } = w.decodeSnapshotFile(bytes);
        if (sealed?.snapshot !== undefined && w.sha256(payload) !== sealed.snapshot) {
          throw new Error(`is not the final snapshot the manifest of ${ARTIFACT_NAME} names`);
        }
        const candidate = w.StoreGroup.fromSnapshot(payload, store._secretKey, id, store.options.snapshotEvery ?? undefined, store.options.orgPolicy ?? undefined);
        if (frameSeq !== seq || candidate.seq !== seq) {
          candidate.free();
          throw new Error(`holds seq ${candidate.seq}, its name says ${seq}`);
        }
        sg = candidate;
        snap = { seq };
        break;
      } catch (e) {
        report.skippedSnapshots.push({ file: path, reason: e?.message ?? String(e) });
      }
    }
    if (sealed !== null && snap === null) {
      throw new StoreError(
        "LOG_CORRUPT",
        `group ${id}: its plain history was removed after sealing at seq ${sealed.seq}, but its final snapshot ${w.snapshotName(sealed.seq)} does not verify`,
        { file: join(dir, w.snapshotName(sealed.seq)) },
      );
    }
    const baseSeq = snap?.seq ?? 0;
    const chainHead = sg?.head;
    if (sg === null) sg = store._newStoreGroup(id);

    const segments = [];
    const pendingZero = [];
    let lastId = sealed === null ? ZERO_ID : chainHead;
    let nextSeq = sealed === null ? 1 : sealed.seq + 1;
    for (let i = 0; i < segSeqs.length; i++) {
      const firstSeq = segSeqs[i];
      const name = w.segmentName(firstSeq);
      const path = join(dir, name);
      if (firstSeq !== nextSeq) throw corruptAt(path, 0, `segment starts at seq ${firstSeq}, expected ${nextSeq}`);
      const file = await File.open(path);
      opened.push(file);
      const header = await checkHeader(file, path, "segment", id, firstSeq);
      if (firstSeq > baseSeq && header.prev !== lastId) {
        throw corruptAt(path, 20, "segment header's prev is not the id of the event before it");
      }
      const offsets = [];
      // Events cross into wasm in frame batches: one call per ~256 events.
      let batch = [];
      let batchFirst = 0;
      const applyBatch = () => {
        if (batch.length === 0) return;
        const frames = frameBatch(batch.map((b) => b.bytes));
        try {
          lastId = sg.applyStoredBatch(frames, batchFirst);
        } catch (e) {
          const err = toMwpError(e);
          const seq = err.details?.seq ?? batchFirst;
          const at = batch.find((b) => b.seq === seq) ?? batch[0];
          throw corruptAt(at.name, at.offset, err.message);
        }
        batch = [];
      };
      const len = await file.size();
      const end = await scan(
        file,
        len,
        {
          name: path,
          firstSeq,
          contiguous: true,
          mayBeTorn: i + 1 === segSeqs.length,
          reserve: i + 1 === segSeqs.length,
          erased: [...overlay.entries].map(([seq, e]) => [seq, e.orig.len, e.orig.crc]),
        },
        async (r) => {
          offsets.push(r.offset);
          const seq = r.header.seq;
          if (r.erasure === "pending") pendingZero.push(seq);
          if (seq < baseSeq) return;
          let bytes = r.payload;
          // As natively (replay.rs `Replay::decode`): a redacted form that does not decode
          // or verify is the overlay entry's damage; anything found after that (its seq, the
          // chain, the snapshot's chain head) is the record's, named by segment and offset.
          const where = { name: path, offset: r.offset };
          if (r.erasure !== "none") {
            const e = overlay.entries.get(seq);
            if (e === undefined || overlay.file === null) throw corruptAt(path, r.offset, "redacted record has no overlay entry");
            bytes = await overlay.file.readAt(e.offset, e.len);
            try {
              w.verifyEvent(bytes);
            } catch (x) {
              throw corruptAt(join(dir, OVERLAY_NAME), e.offset, toMwpError(x).message);
            }
          }
          if (seq === baseSeq) {
            // Verified (payload hash, id) as every other stored event, and its id checked
            // against the snapshot's chain head by the core, not applied.
            try {
              lastId = sg.applyStored(bytes, seq);
            } catch (e) {
              throw corruptAt(where.name, where.offset, toMwpError(e).message);
            }
            return;
          }
          if (batch.length === 0) batchFirst = seq;
          batch.push({ seq, bytes: bytes.slice(), ...where });
          if (batch.length >= 256) applyBatch();
        },
      );
      applyBatch();
      if (end.torn !== null && !readOnly) {
        await file.truncate(end.end);
        await file.datasync();
        report.trimmed.push({ file: path, offset: end.end, bytes: end.torn });
      }
      nextSeq = end.lastSeq + 1;
      segments.push({ firstSeq, name, file, offsets, end: end.end, alloc: end.end + end.reserved });
    }
    const head = nextSeq - 1;
    if (head < baseSeq) {
      throw new StoreError(
        "LOG_CORRUPT",
        `group ${id}: the log ends at seq ${head} but a snapshot holds seq ${baseSeq}: acknowledged events are missing`,
      );
    }
    if (sg.seq === 0) throw new StoreError("LOG_CORRUPT", `group ${id}: the log holds no event`);
    // Before anything is signed for the group (a repair below, a tick, a snapshot): the key
    // file must be the one it names, unless it is archived (the core's rule).
    guardStore(() => sg.checkStoreKey(join(store.root, KEY_NAME)));
    const removed = sealed === null ? null : { seq: sealed.seq, stateHash: sg.stateHash() };
    const g = new FileGroup(store, id, dir, sg, segments, overlay, snap, removed);
    // Repairs are the writer's: a read-only open changes nothing.
    if (readOnly) return g;
    if (sealed !== null) {
      // Finish an interrupted removal of the plain history (older segments, overlay, snapshots).
      if (await g._removePlain({ seq: sealed.seq, id: chainHead, remove_plain: true })) {
        report.repaired.push(`removed the plain history of ${id} up to seq ${sealed.seq}`);
      }
      return g;
    }
    // Finish what a crash interrupted: erasures, the final snapshot of an archive, then its
    // seal and the removal of the plain history its manifest asks for.
    for (const seq of new Set([...sg.redacted, ...pendingZero])) {
      if (!overlay.entries.has(seq) || (await g._needsZeroing(seq))) {
        await g._erase(seq);
        report.repaired.push(`erased the values of seq ${seq} in ${id}`);
      }
    }
    await g._writeSnapshotIfMissing(report);
    await g._sealIfDue(report, manifest, tombstone);
    return g;
  } catch (e) {
    for (const f of opened) await f.close();
    throw toMwpError(e);
  }
}

/**
 * The manifest of a group's artifact (`check`: `w.auditManifest`) or its tombstone
 * (`w.auditTombstone`) if it verifies under the store key and names group `id`, else `null`
 * (an artifact that does not verify is sealed again by the writer while the log is whole).
 */
async function sealedRecord(store, id, path, check, tail = Infinity) {
  const bytes = await readTailIfExists(path, tail);
  if (bytes === null) return null;
  try {
    const m = check(bytes, store.authorityKey);
    return m.group === id ? m : null;
  } catch {
    return null;
  }
}

/**
 * Reads a key file: 64 lowercase hex digits and a newline, mode 0600. Opened first, without
 * blocking: what is not a regular file is named by its type, not by its mode (as natively).
 */
async function readKeyFile(path) {
  const fh = await io(`open ${path}`, () => openRegular(path));
  try {
    const st = await io(`stat ${path}`, () => fh.stat());
    const mode = st.mode & 0o777;
    if ((mode & 0o077) !== 0) {
      throw new StoreError("STORAGE", `${path} has mode ${mode.toString(8)}; a key file must be 0600 (chmod 600 it)`);
    }
    const bad = () => new StoreError("STORAGE", `${path} is not 64 lowercase hex digits and a newline`);
    // Any other length is no key file, and is not read.
    if (st.size !== 65) throw bad();
    const b = new Uint8Array(65);
    const { bytesRead } = await io(`read ${path}`, () => fh.read(b, 0, 65, 0));
    const text = new TextDecoder().decode(b.subarray(0, 64));
    if (bytesRead !== 65 || b[64] !== 0x0a || !/^[0-9a-f]{64}$/.test(text)) throw bad();
    return text;
  } finally {
    await fh.close().catch(() => {});
  }
}

/** Reads (or creates, from the platform's CSPRNG) the authority key file. */
async function loadOrCreateKey(root, given) {
  const path = join(root, KEY_NAME);
  // Anything at the name is read as the key, and refused unless it is one: a FIFO, a
  // directory or a link to nothing there is never replaced by a new key (the groups name
  // the key they hold).
  if (await taken(path)) {
    const key = await readKeyFile(path);
    if (given !== undefined && w.publicKeyOf(given) !== w.publicKeyOf(key)) {
      throw new StoreError(
        "STORAGE",
        `${path} holds the key ${w.publicKeyOf(key)}, not the requested ${w.publicKeyOf(given)}; use another data directory`,
      );
    }
    return key;
  }
  let key = given;
  if (key === undefined) {
    const seed = new Uint8Array(32);
    globalThis.crypto.getRandomValues(seed);
    key = hex(seed);
  }
  const tmp = join(root, `${KEY_NAME}.tmp`);
  await fsp.rm(tmp, { force: true }).catch((e) => {
    throw storage(`remove ${tmp}`, e);
  });
  const file = await writeNewFile(root, KEY_NAME, new TextEncoder().encode(`${key}\n`), 0o600);
  await file.close();
  return key;
}

/**
 * Opens (creating if needed) a data directory in the native file store's format.
 * Options: `segmentBytes` (default 64 MiB), `reserveBytes` (zeros written ahead of the last
 * record so most appends need not grow the file; default 4 MiB, at most `segmentBytes`, `0`:
 * none), `snapshotEvery` (default 100,000; `null`: only
 * on archive), `snapshotsKept` (default 2), `authorityKey` (secret key seed, hex; default:
 * the one in `authority.key`, generated on first open), `readOnly` (default false: take the
 * directory's writer lock, refusing with `STORAGE` one another writer holds; true: no lock,
 * nothing written, the log read to its last complete record; commands refused), `orgPolicy`
 * (the Organization policy file, `mwp.org-policy.v1`, as its JSON text or parsed object;
 * default none: nothing is sealed): a group of an org it names is sealed when archived —
 * `audit.mwpa` in its directory, encrypted to the org's recipients — and, if the policy says
 * `remove_plain`, its plain history is then removed (the final snapshot stays; reads before
 * it are `CURSOR_TOO_OLD`).
 */
export async function openFileStore(dir, options = {}) {
  const opts = { ...DEFAULTS };
  for (const k of Object.keys(DEFAULTS)) if (options[k] !== undefined) opts[k] = options[k];
  if (typeof dir !== "string" || dir === "") throw new StoreError("MALFORMED", "openFileStore: `dir` must be a non-empty path");
  const count = (name, least, nullable = false) => {
    const v = opts[name];
    if ((nullable && v === null) || (Number.isSafeInteger(v) && v >= least)) return;
    throw new StoreError("MALFORMED", `openFileStore: \`${name}\` must be an integer of at least ${least}${nullable ? " or null" : ""}, not ${JSON.stringify(v) ?? String(v)}`);
  };
  count("segmentBytes", 1);
  count("reserveBytes", 0);
  count("snapshotEvery", 1, true);
  count("snapshotsKept", 1);
  opts.reserveBytes = Math.min(opts.reserveBytes, opts.segmentBytes);
  if (typeof opts.readOnly !== "boolean") throw new StoreError("MALFORMED", "openFileStore: `readOnly` must be a boolean");
  if (opts.orgPolicy !== null) {
    if (typeof opts.orgPolicy === "object") opts.orgPolicy = JSON.stringify(opts.orgPolicy);
    if (typeof opts.orgPolicy !== "string") {
      throw new StoreError("MALFORMED", "openFileStore: `orgPolicy` must be the policy file's JSON text or its parsed object");
    }
    // mwp_audit::load_policy, through the wasm module: a policy that does not parse refuses the open.
    const text = opts.orgPolicy;
    guardStore(() => w.parseOrgPolicy(text));
  }
  if (opts.readOnly) {
    // No lock, nothing created, trimmed, renamed or removed: safe beside a live writer.
    try {
      if (!(await exists(dir))) throw new StoreError("STORAGE", `${dir} is not a data directory`);
      const key = await readKeyFile(join(dir, KEY_NAME));
      await groupsDirExists(join(dir, GROUPS_DIR));
      return new FileStore(dir, key, opts);
    } catch (e) {
      throw toMwpError(e);
    }
  }
  let lock = null;
  try {
    if (!(await exists(dir))) {
      await io(`create ${dir}`, () => fsp.mkdir(dir, { mode: 0o700 }));
      await syncDir(join(dir, ".."));
    }
    // The writer lock before anything is read.
    lock = await acquireDirLock(dir);
    const key = await loadOrCreateKey(dir, options.authorityKey);
    const groups = join(dir, GROUPS_DIR);
    if (!(await groupsDirExists(groups))) {
      await io(`create ${groups}`, () => fsp.mkdir(groups, { mode: 0o700 }));
      await syncDir(dir);
    }
    // Creations that never reached their rename: nothing in them was acknowledged.
    const report = [];
    for (const n of await io(`list ${groups}`, () => fsp.readdir(groups))) {
      if (n.startsWith(NEW_GROUP_PREFIX) && (await removeDir(join(groups, n)))) report.push(join(groups, n));
    }
    if (report.length > 0) await syncDir(groups);
    const store = new FileStore(dir, key, opts, lock);
    store.report.removed.push(...report);
    return store;
  } catch (e) {
    if (lock !== null) await lock.release();
    throw toMwpError(e);
  }
}
