// One writer per data directory (docs/format.md, "The writer lock"), as the native store
// takes it (host-native/src/store/lock.rs):
//
// * `LOCK.pid`, the owner record, is created exclusively (O_EXCL) by every writer, native,
//   Deno or Node, and holds `mwp-lock 1`, `pid N` and `start T` lines. It is stale only when
//   no process with that pid and start time runs; a stale record is moved aside and the
//   creation tried again. A clean close removes it.
// * `LOCK` is what an OS lock (`flock`) is taken on: by the native store and by Deno
//   (`FsFile.tryLock`, never waiting), both before the owner record. Node has no `flock`: it
//   sees a live native or Deno writer through that writer's owner record.
//
// An agent journal (agent-journal.js) is locked the same way, on `NAME.LOCK.pid` and
// `NAME.LOCK` beside its file `NAME` (docs/format.md, "Agent journal").

import * as fsp from "node:fs/promises";
import process from "node:process";
import { basename, join } from "node:path";
import { StoreError } from "./errors.js";
import { openRegular } from "./regular-file.js";

export const LOCK_NAME = "LOCK";
export const OWNER_NAME = "LOCK.pid";
/** The most of an owner record read: far more than `mwp-lock 1`, a pid and a start time. */
const MAX_OWNER_BYTES = 4096;

/** `/proc/<pid>/stat`'s state letter and start time (field 22), or null where there is none. */
async function procStat(pid) {
  try {
    const stat = await fsp.readFile(`/proc/${pid}/stat`, "utf8");
    const rest = stat.slice(stat.lastIndexOf(")") + 1).trim().split(/\s+/);
    const t = rest[19];
    return { state: rest[0] ?? "", start: /^\d+$/.test(t ?? "") ? t : null };
  } catch {
    return null;
  }
}

/** Start time of a process, where the platform tells it. */
async function startTime(pid) {
  return (await procStat(pid))?.start ?? null;
}

function encodeOwner(o) {
  return o.start === null ? `mwp-lock 1\npid ${o.pid}\n` : `mwp-lock 1\npid ${o.pid}\nstart ${o.start}\n`;
}

/** The largest pid a record holds (a u32, as natively) and the largest start time (a u64). */
const MAX_PID = 2n ** 32n - 1n;
const MAX_START = 2n ** 64n - 1n;
/** The largest pid a process may have (`kill` takes a positive i32). */
const MAX_LIVE_PID = 2 ** 31 - 1;

/**
 * Reads an owner record; `null` if the text is not one: exactly what `encodeOwner` writes,
 * numbers in their shortest form, a pid that fits 32 bits and a start time 64 bits, as the
 * native store reads it (lock.rs `Owner::decode`).
 */
export function decodeOwner(text) {
  const m = /^mwp-lock 1\npid (0|[1-9]\d*)\n(?:start (0|[1-9]\d*)\n)?$/.exec(text);
  if (m === null || BigInt(m[1]) > MAX_PID || (m[2] !== undefined && BigInt(m[2]) > MAX_START)) return null;
  return { pid: Number(m[1]), start: m[2] ?? null };
}

/**
 * Whether the process an owner record names still runs, decided as the native store decides
 * it (lock.rs `Owner::is_alive`): no process has pid 0 or one past 2^31 − 1; a pid that
 * answers signal 0, or refuses it (`EPERM`: another user's), runs unless it is a zombie; it
 * is the record's owner unless both start times are known and differ.
 */
export async function isAlive(o) {
  if (!(o.pid > 0 && o.pid <= MAX_LIVE_PID)) return false;
  try {
    process.kill(o.pid, 0);
  } catch (e) {
    if (e?.code !== "EPERM") return false;
  }
  const now = await procStat(o.pid);
  // A zombie has exited: it holds nothing and writes nothing, though its parent has not
  // reaped it yet.
  if (now !== null && (now.state === "Z" || now.state === "X")) return false;
  if (o.start === null) return true;
  return now?.start == null || now.start === o.start;
}

/**
 * What a writer lock guards: `name` (a data directory, or a journal file) for messages, the
 * owner record's and the OS lock's paths, the `details` key naming it, what a refusal
 * suggests besides stopping the holder ("" for nothing), and what a writer that lost it reopens.
 */
function dirTarget(dir) {
  return { name: dir, owner: join(dir, OWNER_NAME), osLock: join(dir, LOCK_NAME), key: "dir", hint: ", or open it with { readOnly: true }", reopen: "the store" };
}

function inUse(target, owner) {
  const who = owner ? `process ${owner.pid}` : "another process";
  const { name, key, hint } = target;
  return new StoreError(
    "STORAGE",
    `${name} is in use by another writer (${who}); stop it first${hint}`,
    owner ? { [key]: name, pid: owner.pid } : { [key]: name },
  );
}

/**
 * `STORAGE` when what is at the owner record's path is not a regular file (a directory, a
 * FIFO, …): never a record, never moved aside nor removed, the lock refused until someone
 * removes it (as natively: lock.rs `not_a_record`).
 */
async function notARecord(target) {
  try {
    const h = await openRegular(target.owner);
    await h.close().catch(() => {});
    return null;
  } catch (e) {
    if (!e?.notFile) return null;
    return new StoreError("STORAGE", `${target.owner} is not an owner record: ${e.message}; remove it`, { [target.key]: target.name });
  }
}

async function readText(path) {
  let h;
  try {
    h = await openRegular(path);
    // An owner record is a few dozen bytes; a longer file is not one and is not read whole.
    const buf = new Uint8Array(MAX_OWNER_BYTES);
    const { bytesRead } = await h.read(buf, 0, buf.length, 0);
    return new TextDecoder().decode(buf.subarray(0, bytesRead));
  } catch {
    return "";
  } finally {
    await h?.close().catch(() => {});
  }
}

/** Moves a stale record aside; puts it back and refuses if another writer took over first. */
async function takeOver(target, path, stale) {
  const aside = `${path}.stale-${process.pid}`;
  try {
    await fsp.rename(path, aside);
  } catch (e) {
    if (e?.code === "ENOENT") return;
    throw new StoreError("STORAGE", `rename ${path}: ${e.message}`);
  }
  const moved = await readText(aside);
  if (moved !== stale) {
    await fsp.link(aside, path).catch(() => {});
    await fsp.unlink(aside).catch(() => {});
    throw inUse(target, decodeOwner(moved));
  }
  await fsp.unlink(aside).catch((e) => {
    throw new StoreError("STORAGE", `remove ${aside}: ${e.message}`);
  });
}

async function claimOwner(target) {
  const path = target.owner;
  const me = { pid: process.pid, start: await startTime(process.pid) };
  for (let round = 0; round < 2; round++) {
    let h;
    try {
      h = await fsp.open(path, "wx", 0o600);
    } catch (e) {
      if (e?.code !== "EEXIST") throw new StoreError("STORAGE", `create ${path}: ${e.message}`);
      const notRecord = await notARecord(target);
      if (notRecord !== null) throw notRecord;
      const text = await readText(path);
      const o = decodeOwner(text);
      if (o !== null && (await isAlive(o))) throw inUse(target, o);
      if (o === null) {
        // Half-written: a writer between creating and filling it, unless it is old (a crash).
        const st = await fsp.stat(path).catch(() => null);
        if (st !== null && Date.now() - st.mtimeMs < 10_000) throw inUse(target, null);
      }
      await takeOver(target, path, text);
      continue;
    }
    try {
      await h.writeFile(encodeOwner(me));
      await h.datasync();
    } finally {
      await h.close();
    }
    return;
  }
  throw inUse(target, decodeOwner(await readText(path)));
}

/**
 * Takes the writer lock of `dir` (which must exist), or throws `STORAGE` at once naming the
 * directory and, where known, the holder's pid. Resolves to `{check, release}`.
 */
export function acquireDirLock(dir) {
  return acquireLock(dirTarget(dir));
}

/**
 * Takes the writer lock of the file at `path` (an agent journal), as a data directory's is
 * taken, on `NAME.LOCK.pid` (the owner record) and `NAME.LOCK` (the OS lock) beside it; its
 * directory must exist. A holder is refused with the same `STORAGE` error, naming the file
 * (`details.file`). Resolves to `{check, release}`.
 */
export function acquireFileLock(path) {
  return acquireLock({ name: path, owner: `${path}.${OWNER_NAME}`, osLock: `${path}.${LOCK_NAME}`, key: "file", hint: "", reopen: "the journal" });
}

async function acquireLock(target) {
  const { name, owner: ownerPath, osLock: osLockPath, key } = target;
  let osLock = null;
  if (typeof globalThis.Deno?.open === "function") {
    // Deno: first the OS lock native writers take, without waiting for it (as natively: a
    // non-blocking `flock`), then the owner record, in the native order: a holder of the
    // flock is refused at once, named by its owner record where there is one, and nothing of
    // this writer's is ever written while another holds it. (Owner record first, a Deno and
    // a native writer racing could each see the other's half and both refuse.)
    let held;
    try {
      osLock = await globalThis.Deno.open(osLockPath, { read: true, write: true, create: true, mode: 0o600 });
      // `tryLock` is Deno 2.7's; an older Deno has only the blocking `lock`.
      held = typeof osLock.tryLock === "function" ? await osLock.tryLock(true) : (await osLock.lock(true), true);
    } catch (e) {
      osLock?.close();
      throw new StoreError("STORAGE", `lock ${osLockPath}: ${e.message}`);
    }
    if (!held) {
      osLock.close();
      throw inUse(target, decodeOwner(await readText(ownerPath)));
    }
  }
  try {
    await claimOwner(target);
  } catch (e) {
    osLock?.close();
    throw e;
  }
  let released = false;
  const me = { pid: process.pid, start: await startTime(process.pid) };
  return {
    /**
     * Throws `STORAGE` unless the owner record still names this process: a writer whose record
     * was removed or replaced (another process took the directory over) writes nothing more.
     */
    async check() {
      const o = decodeOwner(await readText(ownerPath));
      if (o === null || o.pid !== me.pid || o.start !== me.start) {
        const now = o === null ? "holds no owner record" : `names process ${o.pid}`;
        throw new StoreError("STORAGE", `${name} is no longer this writer's: ${basename(ownerPath)} ${now}; reopen ${target.reopen}`, o === null ? { [key]: name } : { [key]: name, pid: o.pid });
      }
    },
    async release() {
      if (released) return;
      released = true;
      const o = decodeOwner(await readText(ownerPath));
      if (o !== null && o.pid === process.pid) await fsp.unlink(ownerPath).catch(() => {});
      if (osLock !== null) osLock.close();
    },
  };
}
