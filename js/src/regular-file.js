// Opening a file that must be a regular file (Node and Deno), as the native store opens one
// (host-native/src/regular_file.rs): without blocking, and refused by its type unless it is
// one. A FIFO, socket or device put where a store file, an owner record or a journal is
// expected would otherwise block the open or the read forever, or read as a short file.

import { constants as fsc } from "node:fs";
import * as fsp from "node:fs/promises";

/** What a file of this type is called in a message (the native `regular_file`'s words). */
export function fileKind(st) {
  if (st.isFIFO()) return "a FIFO";
  if (st.isSocket()) return "a socket";
  if (st.isCharacterDevice()) return "a character device";
  if (st.isBlockDevice()) return "a block device";
  if (st.isDirectory()) return "a directory";
  return "not a regular file";
}

/** The error for a file that is `kind`: its `notFile` says it is not a regular file. */
function notFile(kind) {
  return Object.assign(new Error(`it is ${kind}, not a regular file`), { notFile: true, kind });
}

/**
 * Opens `path` with `flags` (`O_RDONLY` by default) and `O_NONBLOCK` (a FIFO with no writer
 * opens at once; the flag changes nothing for a regular file), and refuses it unless `fstat`
 * says it is a regular file, with an error whose `message` is `it is a FIFO, not a regular
 * file` (`kind`: what it is) and whose `notFile` is true. Other failures (`ENOENT`, …) are the
 * file system's errors, as thrown.
 */
export async function openRegular(path, flags = fsc.O_RDONLY) {
  let h;
  try {
    h = await fsp.open(path, flags | fsc.O_NONBLOCK);
  } catch (e) {
    // Opened for writing, a directory fails before its type is asked.
    throw e?.code === "EISDIR" ? notFile("a directory") : e;
  }
  let st;
  try {
    st = await h.stat();
  } catch (e) {
    await h.close().catch(() => {});
    throw e;
  }
  if (!st.isFile()) {
    await h.close().catch(() => {});
    throw notFile(fileKind(st));
  }
  return h;
}
