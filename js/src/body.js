// Reading an answer's body no further than a limit: what a server or a mirror sends is input,
// and a body longer than the reader takes is not read whole to be refused.

/**
 * The body of `response`, at most `max` bytes: `{ bytes }`, or `{ over }` when it is longer,
 * `over` saying how long it was found to be (its `Content-Length`, or `"more than max"` when
 * it grew past `max` as it arrived). The rest of a longer body is not read: the body is
 * cancelled.
 */
export async function readCapped(response, max) {
  const declared = Number(response.headers?.get?.("content-length") ?? NaN);
  if (declared > max) {
    await response.body?.cancel?.().catch(() => {});
    return { over: declared };
  }
  if (!response.body?.getReader) {
    const bytes = new Uint8Array(await response.arrayBuffer());
    return bytes.length > max ? { over: bytes.length } : { bytes };
  }
  const parts = [];
  let length = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    length += value.length;
    if (length > max) {
      await reader.cancel().catch(() => {});
      return { over: `more than ${max}` };
    }
    parts.push(value);
  }
  const bytes = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    bytes.set(p, at);
    at += p.length;
  }
  return { bytes };
}
