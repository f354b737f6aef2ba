// An agent's journal in one file (Node and Deno): the write sets its driver commits, each
// durable before `commit` resolves, folded back into an AgentImage on open. The browser's
// counterpart is IdbAgentStore (IndexedDB); both have the same four methods, which is what
// `runAgent` needs of a journal. Only `node:fs/promises` is used; Deno 2 provides it.
//
// Format: the 8-byte magic `MWPJSAJ\n`, then records `[kind u8][len u32 LE][crc32c u32 LE]
// [bytes]`, where the CRC32C covers kind, len and bytes; kind 0 is a write set's canonical
// CBOR, kind 1 a whole image (`AgentImage.toCbor()`, written by `compact`). A torn last record
// (a crash mid-append) was never committed and is cut off on open; damage before the last
// record is `LOG_CORRUPT` naming the file and offset.

import * as fsp from "node:fs/promises";
import { dirname, basename, join } from "node:path";
import * as w from "../pkg/mwp_wasm.js";
import { AgentImage } from "./agent.js";
import { StoreError } from "./errors.js";
import { Queue } from "./queue.js";

const MAGIC = new TextEncoder().encode("MWPJSAJ\n");
const HEADER = 9;
const WRITE_SET = 0;
const IMAGE = 1;
/** A record longer than this is damage, not data (the core's own record limit). */
const MAX_LEN = 16 << 20;

async function io(what, fn) {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof StoreError) throw e;
    throw new StoreError("STORAGE", `${what}: ${e?.message ?? e}`);
  }
}

function record(kind, bytes) {
  const out = new Uint8Array(HEADER + bytes.length);
  const view = new DataView(out.buffer);
  out[0] = kind;
  view.setUint32(1, bytes.length, true);
  out.set(bytes, HEADER);
  const crc = w.crc32c(out.subarray(HEADER), w.crc32c(out.subarray(0, 5), 0));
  view.setUint32(5, crc, true);
  return out;
}

async function syncDir(dir) {
  await io(`sync ${dir}`, async () => {
    const h = await fsp.open(dir, "r");
    try {
      await h.sync();
    } finally {
      await h.close();
    }
  });
}

/** An agent's committed write sets in a file (Node and Deno); see the module comment. */
export class FileAgentJournal {
  #path;
  #handle;
  #end;
  #image;
  #queue = new Queue();
  #failed = false;

  constructor(path, handle, end, image) {
    this.#path = path;
    this.#handle = handle;
    this.#end = end;
    this.#image = image;
  }

  /** Opens (creating if missing) the journal at `path` and reads it back. */
  static async open(path) {
    const handle = await io(`open ${path}`, () =>
      fsp.open(path, "r+").catch((e) => (e?.code === "ENOENT" ? fsp.open(path, "wx+", 0o600) : Promise.reject(e))));
    try {
      const bytes = new Uint8Array(await io(`read ${path}`, () => handle.readFile()));
      const { end, image } = FileAgentJournal.#read(path, bytes);
      if (bytes.length === 0) {
        await io(`write ${path}`, () => handle.write(MAGIC, 0, MAGIC.length, 0));
        await io(`sync ${path}`, () => handle.datasync());
        await syncDir(dirname(path));
      } else if (end < bytes.length) {
        await io(`trim ${path}`, () => handle.truncate(end));
        await io(`sync ${path}`, () => handle.datasync());
      }
      return new FileAgentJournal(path, handle, Math.max(end, MAGIC.length), image);
    } catch (e) {
      await handle.close().catch(() => {});
      throw e;
    }
  }

  /** Folds the records of `bytes` into an image: `{end, image}`, `end` past the last whole one. */
  static #read(path, bytes) {
    let image = new AgentImage();
    if (bytes.length === 0) return { end: 0, image };
    const corrupt = (offset, what) => new StoreError("LOG_CORRUPT", `${path} at offset ${offset}: ${what}`, { file: path, offset });
    if (bytes.length < MAGIC.length || !MAGIC.every((b, i) => bytes[i] === b)) {
      // A file shorter than the magic was cut while being created: nothing was committed.
      if (bytes.length < MAGIC.length && MAGIC.subarray(0, bytes.length).every((b, i) => bytes[i] === b)) return { end: 0, image };
      throw corrupt(0, "not an agent journal (bad magic)");
    }
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let at = MAGIC.length;
    while (at < bytes.length) {
      // Damage in the last record is a torn append, cut off; before it, corruption.
      if (bytes.length - at < HEADER) return { end: at, image };
      const kind = bytes[at];
      const len = view.getUint32(at + 1, true);
      const next = at + HEADER + len;
      if (len > MAX_LEN || next > bytes.length) return { end: at, image };
      const body = bytes.subarray(at + HEADER, next);
      if (w.crc32c(body, w.crc32c(bytes.subarray(at, at + 5), 0)) !== view.getUint32(at + 5, true)) {
        if (next === bytes.length) return { end: at, image };
        throw corrupt(at, "the checksum does not match, and records follow");
      }
      try {
        if (kind === WRITE_SET) image.commit(body);
        else if (kind === IMAGE && at === MAGIC.length) image = new AgentImage(body);
        else throw new Error(kind === IMAGE ? "an image record must be the first record" : `unknown record kind ${kind}`);
      } catch (e) {
        throw corrupt(at, `the record does not apply: ${e?.message ?? e}`);
      }
      at = next;
    }
    return { end: at, image };
  }

  /** Everything committed, as an AgentImage (for `Agent.restore`). */
  async load() {
    return new AgentImage(this.#image.toCbor());
  }

  /** Appends a write set and resolves once it is durable (`fdatasync`). */
  commit(writeSet) {
    return this.#queue.run(async () => {
      if (this.#failed) throw new StoreError("STORAGE", `${this.#path}: an earlier write failed; reopen the journal`);
      const bytes = writeSet instanceof Uint8Array ? writeSet : writeSet.cbor;
      const rec = record(WRITE_SET, bytes);
      try {
        await io(`write ${this.#path}`, () => this.#handle.write(rec, 0, rec.length, this.#end));
        await io(`sync ${this.#path}`, () => this.#handle.datasync());
      } catch (e) {
        this.#failed = true;
        throw e;
      }
      this.#end += rec.length;
      this.#image.commit(bytes);
    });
  }

  /** Replaces the file with one record holding `image` (written beside it, then renamed). */
  compact(image = this.#image) {
    return this.#queue.run(async () => {
      const rec = record(IMAGE, image.toCbor());
      const data = new Uint8Array(MAGIC.length + rec.length);
      data.set(MAGIC);
      data.set(rec, MAGIC.length);
      const dir = dirname(this.#path);
      const tmp = join(dir, `${basename(this.#path)}.tmp`);
      const h = await io(`create ${tmp}`, () => fsp.open(tmp, "w+", 0o600));
      try {
        await io(`write ${tmp}`, () => h.write(data, 0, data.length, 0));
        await io(`sync ${tmp}`, () => h.datasync());
      } finally {
        await h.close().catch(() => {});
      }
      await io(`rename ${tmp}`, () => fsp.rename(tmp, this.#path));
      await syncDir(dir);
      await this.#handle.close().catch(() => {});
      this.#handle = await io(`open ${this.#path}`, () => fsp.open(this.#path, "r+"));
      this.#end = data.length;
    });
  }

  /** Closes the file. */
  close() {
    return this.#queue.run(() => this.#handle.close().catch(() => {}));
  }
}

/** Opens (creating if missing) an agent journal file: Node and Deno. */
export const openAgentJournal = (path) => FileAgentJournal.open(path);
