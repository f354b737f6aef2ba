// Frame batches: many encoded items in one Uint8Array — a 4-byte little-endian length, then
// that many bytes, repeated. The form events cross the wasm boundary in when volume matters.

/** Joins byte arrays into one frame batch. */
export function frameBatch(items) {
  let total = 0;
  for (const item of items) total += 4 + item.length;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let at = 0;
  for (const item of items) {
    view.setUint32(at, item.length, true);
    out.set(item, at + 4);
    at += 4 + item.length;
  }
  return out;
}

/** Splits a frame batch into its byte arrays (views into `batch`, not copies). */
export function splitBatch(batch) {
  const view = new DataView(batch.buffer, batch.byteOffset, batch.byteLength);
  const items = [];
  let at = 0;
  while (at < batch.length) {
    if (at + 4 > batch.length) throw new RangeError(`frame batch: ${batch.length - at} trailing bytes are too few for a length`);
    const len = view.getUint32(at, true);
    if (at + 4 + len > batch.length) throw new RangeError(`frame batch: frame ${items.length + 1} claims ${len} bytes but only ${batch.length - at - 4} remain`);
    items.push(batch.subarray(at + 4, at + 4 + len));
    at += 4 + len;
  }
  return items;
}

/** A frame batch from either a frame batch or an array of byte arrays. */
export function asBatch(events) {
  return events instanceof Uint8Array ? events : frameBatch(events);
}
