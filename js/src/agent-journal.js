// An agent's journal in one file (Node and Deno): the write sets its driver commits, each
// durable before `commit` resolves, folded back into an AgentImage on open. The browser's
// counterpart is IdbAgentStore (IndexedDB); both have the methods `runAgent` needs of a
// journal. Only `node:fs/promises` is used; Deno 2 provides it.
//
// The format is the native journal's (docs/format.md, "Agent journal"), encoded and read by the
// wasm core (`encodeAgentJournalAppend`, `readAgentJournal`): this module only reads, writes
// and syncs the bytes. As natively, the file does not exist until the first write set: that
// one is written with the header to `NAME.tmp`, synced, renamed and the directory synced; each
// later one is appended at the end and synced. A torn last write set was never committed and is
// cut off on open; damage before it is `LOG_CORRUPT` naming the file and offset. One process
// writes a journal at a time: its writer lock is taken on open and released on close.

import { constants as fsc } from "node:fs";
import * as fsp from "node:fs/promises";
import { basename, dirname } from "node:path";
import * as w from "../pkg/mwp_wasm.js";
import { AgentImage } from "./agent.js";
import { acquireFileLock } from "./dir-lock.js";
import { StoreError, guard } from "./errors.js";
import { io, syncDir } from "./file-store.js";
import { Queue } from "./queue.js";
import { fileKind, openRegular } from "./regular-file.js";

/** `STORAGE` for a journal path that holds `kind` (a directory, a FIFO), as natively. */
function notRegular(path, kind) {
  return new StoreError("STORAGE", `agent journal ${path}: it is ${kind}, not a regular file`, { file: path });
}

/** An agent's committed write sets in a file (Node and Deno); see the module comment. */
export class FileAgentJournal {
  #path;
  /** The open file, or null until the first write set. */
  #handle;
  #end;
  #nextSeq;
  /** The group in the header, or undefined until the first write set. */
  #group;
  #image;
  #queue = new Queue();
  #failed = false;
  /** The journal's writer lock (`acquireFileLock`), held until `close`. */
  #lock;

  constructor(path, lock, handle, { end, nextSeq, group, image }) {
    this.#path = path;
    this.#lock = lock;
    this.#handle = handle;
    this.#end = end;
    this.#nextSeq = nextSeq;
    this.#group = group;
    this.#image = image;
  }

  /**
   * Opens the journal at `path` and reads it back (an empty journal if there is no file yet),
   * first taking its writer lock (`NAME.LOCK.pid` beside it, as a data directory's): a journal
   * another process (native, Node or Deno) holds is refused with `STORAGE` naming the file and
   * the holder's pid. A file name that is another journal's lock or temporary file, or a
   * data directory's lock file (`a.LOCK`, `a.LOCK.pid`, `a.tmp`, `LOCK`), is `MALFORMED`.
   */
  static async open(path) {
    if (typeof path !== "string") throw new StoreError("MALFORMED", "openAgentJournal: `path` must be a path (a string)");
    // A name that is another journal's lock or temporary file is refused before anything is
    // touched, by the core's rule (the native journal's).
    guard(() => w.checkAgentJournalName(path, basename(path)));
    // A directory or a FIFO at the path is refused before the lock is taken, so that the
    // refusal creates nothing beside it (as natively); asked again under the lock.
    const st = await io(`stat ${path}`, () => fsp.stat(path).catch((e) => (e?.code === "ENOENT" ? null : Promise.reject(e))));
    if (st !== null && !st.isFile()) throw notRegular(path, fileKind(st));
    const lock = await acquireFileLock(path);
    try {
      return await FileAgentJournal.#read(path, lock);
    } catch (e) {
      await lock.release().catch(() => {});
      throw e;
    }
  }

  static async #read(path, lock) {
    // Opened without blocking (a FIFO put there opens at once) and refused unless a regular
    // file, as natively: a directory or a FIFO is never read, replaced or written past.
    const handle = await io(`open ${path}`, () =>
      openRegular(path, fsc.O_RDWR).catch((e) => {
        if (e?.code === "ENOENT") return null;
        throw e?.notFile ? notRegular(path, e.kind) : e;
      }),
    );
    // A `.tmp` left by a creation that never completed holds nothing committed.
    await io(`remove ${path}.tmp`, () => fsp.rm(`${path}.tmp`, { force: true })).catch(async (e) => {
      await handle?.close().catch(() => {});
      throw e;
    });
    if (handle === null) return new FileAgentJournal(path, lock, null, { end: 0, nextSeq: 1, group: undefined, image: new AgentImage() });
    try {
      const bytes = new Uint8Array(await io(`read ${path}`, () => handle.readFile()));
      const read = guard(() => w.readAgentJournal(bytes, `agent journal ${path}`));
      if (read.keep < bytes.length) {
        await io(`trim ${path}`, () => handle.truncate(read.keep));
        await io(`sync ${path}`, () => handle.datasync());
      }
      const image = new AgentImage(read.image.toCbor());
      read.image.free();
      return new FileAgentJournal(path, lock, handle, { end: read.keep, nextSeq: read.nextSeq, group: read.group, image });
    } catch (e) {
      await handle.close().catch(() => {});
      throw e;
    }
  }

  /** Everything committed, as an AgentImage (for `Agent.restore`). */
  async load() {
    return new AgentImage(this.#image.toCbor());
  }

  /** Appends a write set and resolves once it is durable (`fdatasync`). */
  commit(writeSet) {
    return this.#queue.run(async () => {
      if (this.#failed) throw new StoreError("STORAGE", `${this.#path}: an earlier write failed; reopen the journal`);
      // A journal whose owner record was removed or taken over appends nothing more.
      try {
        await this.#lock.check();
      } catch (e) {
        this.#failed = true;
        throw e;
      }
      const bytes = writeSet instanceof Uint8Array ? writeSet : writeSet?.cbor;
      const rec = guard(() => w.encodeAgentJournalAppend(bytes, this.#nextSeq, this.#group));
      try {
        if (this.#handle === null) {
          this.#handle = await this.#create(rec.bytes);
        } else {
          await io(`write ${this.#path}`, () => this.#handle.write(rec.bytes, 0, rec.bytes.length, this.#end));
          await io(`sync ${this.#path}`, () => this.#handle.datasync());
        }
      } catch (e) {
        this.#failed = true;
        throw e;
      }
      this.#end += rec.bytes.length;
      this.#nextSeq = rec.nextSeq;
      this.#group = rec.group;
      this.#image.commit(bytes);
    });
  }

  /** Writes the first write set with the header: `NAME.tmp`, sync, rename, sync the directory. */
  async #create(data) {
    const tmp = `${this.#path}.tmp`;
    const h = await io(`create ${tmp}`, () => fsp.open(tmp, "w+", 0o600));
    try {
      await io(`write ${tmp}`, () => h.write(data, 0, data.length, 0));
      await io(`sync ${tmp}`, () => h.datasync());
    } finally {
      await h.close().catch(() => {});
    }
    await io(`rename ${tmp}`, () => fsp.rename(tmp, this.#path));
    await syncDir(dirname(this.#path));
    return io(`open ${this.#path}`, () => fsp.open(this.#path, "r+"));
  }

  /** Closes the file and releases its writer lock. */
  close() {
    return this.#queue.run(async () => {
      if (this.#handle !== null) await this.#handle.close().catch(() => {});
      await this.#lock.release();
    });
  }
}

/** Opens an agent journal file (Node and Deno); the file is created by the first write set. */
export const openAgentJournal = (path) => FileAgentJournal.open(path);
