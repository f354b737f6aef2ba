// Typed errors. Every error mwp raises carries the spec's `code` ("REVISION_MISMATCH", …)
// and its `details`; the class says which part of the API raised it.

/** Base class of every mwp error. */
export class MwpError extends Error {
  /**
   * @param {string} code the spec's SCREAMING_SNAKE code
   * @param {string} message what was wrong and what would be right
   * @param {Record<string, unknown>} [details] extra fields (e.g. `current` for REVISION_MISMATCH)
   */
  constructor(code, message, details = {}) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.details = details ?? {};
  }

  /** The spec's JSON form: `{code, message, ...details}`. */
  toJSON() {
    return { code: this.code, message: this.message, ...this.details };
  }
}

/** An authority rejected a command, or an event did not apply. */
export class AcceptError extends MwpError {}
/** A replica could not take an event or snapshot. */
export class OfferError extends MwpError {}
/** A snapshot failed to build or verify (`SNAPSHOT_INVALID`, …). */
export class SnapshotError extends MwpError {}
/** Encoding, decoding, hashing or signing failed (`MALFORMED`, `LOG_CORRUPT`, …). */
export class CodecError extends MwpError {}
/** A store (IndexedDB, files) failed (`STORAGE`, `LOG_CORRUPT`, …). */
export class StoreError extends MwpError {}
/** An agent refused an action or could not take its input (`NOT_FOUND`, `MALFORMED`, …). */
export class AgentError extends MwpError {}
/** A transcript could not be run. */
export class TranscriptError extends MwpError {}
/**
 * A static export could not be read or planned (`HEAD_INVALID`, `LOG_CORRUPT`, `FORK`,
 * `SNAPSHOT_INVALID`, `MALFORMED`, or `NOT_FOUND`/`STORAGE` for a file that did not come);
 * `details.file` names the file.
 */
export class ExportError extends MwpError {}
/** An HTTP request to `mwp serve` failed; `status` is the HTTP status (0: no answer). */
export class HttpError extends MwpError {
  constructor(code, message, details = {}, status = 0) {
    super(code, message, details);
    this.status = status;
  }
}

/**
 * A live tail received an event past the next one it expected (`TAIL_GAP`; `details`:
 * `{group, expected, received}`): events in between would have been skipped.
 */
export class GapError extends MwpError {}

const byName = { AcceptError, AgentError, OfferError, SnapshotError, CodecError, StoreError, TranscriptError, ExportError };

/** Turns an error from the wasm core (or any `{code, message}` object) into an MwpError. */
export function toMwpError(e) {
  if (e instanceof MwpError) return e;
  if (e !== null && typeof e === "object" && typeof e.code === "string") {
    const Class = byName[e.name] ?? MwpError;
    const { code, message, details, ...rest } = e;
    return new Class(code, String(message ?? e.message ?? code), details ?? rest);
  }
  return e;
}

/**
 * An error of the glue around a wasm call, an argument it could not convert (a `BigInt` or a
 * symbol where a number belongs, an array too long to turn into one, an object of another
 * class), as `MALFORMED`; anything else as `toMwpError` gives it.
 */
function fromWasmCall(e) {
  if (e instanceof TypeError || e instanceof RangeError || (e instanceof Error && e.message.startsWith("expected instance of "))) {
    return new MwpError("MALFORMED", `an argument could not be read: ${e.message}`);
  }
  return toMwpError(e);
}

/** Runs `fn`, a wasm call, turning its errors into MwpErrors (`fromWasmCall`). */
export function guard(fn) {
  try {
    return fn();
  } catch (e) {
    throw fromWasmCall(e);
  }
}

/** Awaits `fn()`, a wasm call, turning its errors into MwpErrors (`fromWasmCall`). */
export async function guardAsync(fn) {
  try {
    return await fn();
  } catch (e) {
    throw fromWasmCall(e);
  }
}
