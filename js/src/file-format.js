// The bytes of the file store (docs/format.md), shared with the native File host: CRC32C,
// file headers, records, snapshot files, file names and group directory names. Pure
// functions over Uint8Arrays; no IO here (file-store.js does the IO).

/** Magic of a log segment: `MWPLOG\r\n`. */
export const SEGMENT_MAGIC = ascii("MWPLOG\r\n");
/** Magic of the redaction overlay: `MWPRDX\r\n`. */
export const OVERLAY_MAGIC = ascii("MWPRDX\r\n");
/** Magic of a snapshot file: `MWPSNP\r\n`. */
export const SNAPSHOT_MAGIC = ascii("MWPSNP\r\n");
/** Format version written in every header. */
export const VERSION = 1;
/** Length of a segment or overlay header. */
export const FILE_HEADER_LEN = 192;
/** Length of a record header. */
export const RECORD_HEADER_LEN = 24;
/** Length of a snapshot file header. */
export const SNAPSHOT_HEADER_LEN = 32;
/** Largest record payload (16 MiB); a longer length field is damage. */
export const MAX_RECORD_LEN = 16 << 20;
/** Longest group ID (SPEC §1). */
export const MAX_ID_LEN = 128;
/** File name of the redaction overlay. */
export const OVERLAY_NAME = "redactions.log";
/** File name of the authority key. */
export const KEY_NAME = "authority.key";
/** Directory holding one directory per group. */
export const GROUPS_DIR = "groups";

function ascii(s) {
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), slicing by 8: eight tables of 256.
const TABLES = (() => {
  const t = new Uint32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n];
    for (let k = 1; k < 8; k++) {
      c = t[c & 0xff] ^ (c >>> 8);
      t[k * 256 + n] = c >>> 0;
    }
  }
  return t;
})();

/**
 * CRC32C of `bytes`, continuing from `crc` (the CRC of the bytes before them; 0 to start):
 * `crc32c(b, crc32c(a))` equals the CRC of `a` followed by `b`.
 * `crc32c(new TextEncoder().encode("123456789")) === 0xe3069283`.
 */
export function crc32c(bytes, crc = 0) {
  const t = TABLES;
  let c = ~crc >>> 0;
  let i = 0;
  const n = bytes.length;
  for (; i + 8 <= n; i += 8) {
    const lo = (c ^ (bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24))) >>> 0;
    c =
      t[7 * 256 + (lo & 0xff)] ^
      t[6 * 256 + ((lo >>> 8) & 0xff)] ^
      t[5 * 256 + ((lo >>> 16) & 0xff)] ^
      t[4 * 256 + (lo >>> 24)] ^
      t[3 * 256 + bytes[i + 4]] ^
      t[2 * 256 + bytes[i + 5]] ^
      t[256 + bytes[i + 6]] ^
      t[bytes[i + 7]];
  }
  for (; i < n; i++) c = t[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

/** The CRC of a record: over header bytes 0..20, then the payload. */
export function recordCrc(header20, payload) {
  return crc32c(payload, crc32c(header20.subarray(0, 20)));
}

function u64At(view, at) {
  return view.getUint32(at, true) + view.getUint32(at + 4, true) * 2 ** 32;
}

function setU64(view, at, n) {
  view.setUint32(at, n % 2 ** 32, true);
  view.setUint32(at + 4, Math.floor(n / 2 ** 32), true);
}

/** The 192 header bytes of a segment or the overlay: `{magic, firstSeq, prev (32 bytes), group}`. */
export function encodeFileHeader({ magic, firstSeq, prev, group }) {
  const b = new Uint8Array(FILE_HEADER_LEN);
  const v = new DataView(b.buffer);
  b.set(magic, 0);
  v.setUint32(8, VERSION, true);
  setU64(v, 12, firstSeq);
  b.set(prev, 20);
  const id = new TextEncoder().encode(group);
  if (id.length < 1 || id.length > MAX_ID_LEN) throw new RangeError(`group id is ${id.length} bytes; 1 to ${MAX_ID_LEN} allowed`);
  b[52] = id.length;
  b.set(id, 53);
  v.setUint32(188, crc32c(b.subarray(0, 188)), true);
  return b;
}

/** Parses and checks a file header; throws an Error saying what is wrong. */
export function decodeFileHeader(b, magic) {
  if (b.length < FILE_HEADER_LEN) throw new Error(`header is ${b.length} bytes, expected ${FILE_HEADER_LEN}`);
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  if (!magic.every((x, i) => b[i] === x)) throw new Error("wrong magic");
  if (crc32c(b.subarray(0, 188)) !== v.getUint32(188, true)) throw new Error("header checksum mismatch");
  const version = v.getUint32(8, true);
  if (version !== VERSION) throw new Error(`format version ${version} is not supported (expected ${VERSION})`);
  const n = b[52];
  if (n === 0 || n > MAX_ID_LEN || b.subarray(53 + n, 188).some((x) => x !== 0)) throw new Error("bad group id field");
  let group;
  try {
    group = new TextDecoder("utf-8", { fatal: true }).decode(b.subarray(53, 53 + n));
  } catch {
    throw new Error("group id field is not a valid id");
  }
  if (!/^[A-Za-z0-9._:@~-]+$/.test(group)) throw new Error("group id field is not a valid id");
  return { magic, firstSeq: u64At(v, 12), prev: b.slice(20, 52), group };
}

/** One record: 24-byte header (`len`, `seq`, `batch`, CRC32C) and the payload. */
export function encodeRecord(seq, batch, payload) {
  const out = new Uint8Array(RECORD_HEADER_LEN + payload.length);
  const v = new DataView(out.buffer);
  v.setUint32(0, payload.length, true);
  setU64(v, 4, seq);
  setU64(v, 12, batch);
  out.set(payload, RECORD_HEADER_LEN);
  v.setUint32(20, recordCrc(out, payload), true);
  return out;
}

/** Parses the 24 record header bytes at `at`: `{len, seq, batch, crc}`. */
export function parseRecordHeader(b, at) {
  const v = new DataView(b.buffer, b.byteOffset + at, RECORD_HEADER_LEN);
  return { len: v.getUint32(0, true), seq: u64At(v, 4), batch: u64At(v, 12), crc: v.getUint32(20, true) };
}

/** A snapshot file: 32-byte header and the snapshot's canonical CBOR. */
export function encodeSnapshotFile(seq, payload) {
  const out = new Uint8Array(SNAPSHOT_HEADER_LEN + payload.length);
  const v = new DataView(out.buffer);
  out.set(SNAPSHOT_MAGIC, 0);
  v.setUint32(8, VERSION, true);
  setU64(v, 12, seq);
  setU64(v, 20, payload.length);
  v.setUint32(28, crc32c(payload, crc32c(out.subarray(0, 28))), true);
  out.set(payload, SNAPSHOT_HEADER_LEN);
  return out;
}

/** Checks a snapshot file's frame: `{seq, payload}`; throws an Error saying what is wrong. */
export function decodeSnapshotFile(b) {
  if (b.length < SNAPSHOT_HEADER_LEN) throw new Error("shorter than its header");
  if (!SNAPSHOT_MAGIC.every((x, i) => b[i] === x)) throw new Error("wrong magic");
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const version = v.getUint32(8, true);
  if (version !== VERSION) throw new Error(`format version ${version} is not supported`);
  const seq = u64At(v, 12);
  const len = u64At(v, 20);
  if (len !== b.length - SNAPSHOT_HEADER_LEN) {
    throw new Error(`length field says ${len} bytes, the file holds ${b.length - SNAPSHOT_HEADER_LEN}`);
  }
  const payload = b.subarray(SNAPSHOT_HEADER_LEN);
  if (crc32c(payload, crc32c(b.subarray(0, 28))) !== v.getUint32(28, true)) throw new Error("checksum mismatch");
  return { seq, payload };
}

/** File name of the segment whose first record is `firstSeq`: 20 digits + `.seg`. */
export const segmentName = (firstSeq) => `${String(firstSeq).padStart(20, "0")}.seg`;
/** File name of the snapshot at `seq`: 20 digits + `.snap`. */
export const snapshotName = (seq) => `${String(seq).padStart(20, "0")}.snap`;

/** Parses `<20 digits>.<ext>`; `null` for any other name. */
export function parseNumbered(name, ext) {
  const m = /^(\d{20})\.([a-z]+)$/.exec(name);
  if (m === null || m[2] !== ext) return null;
  const n = Number(m[1]);
  return Number.isSafeInteger(n) ? n : null;
}

const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";

/**
 * Directory name of a group: the ID itself when it is lowercase `[a-z0-9][a-z0-9._-]*`,
 * otherwise `~` and the lowercase RFC 4648 base32 (no padding) of its UTF-8 bytes
 * (`G1` → `~i4yq`).
 */
export function groupDirName(group) {
  if (/^[a-z0-9][a-z0-9._-]*$/.test(group)) return group;
  let out = "~";
  let acc = 0;
  let bits = 0;
  for (const b of new TextEncoder().encode(group)) {
    acc = ((acc << 8) | b) & 0xffff;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += BASE32[(acc >> bits) & 31];
    }
  }
  if (bits > 0) out += BASE32[(acc << (5 - bits)) & 31];
  return out;
}

/** The group ID a directory name stands for, or `null` if `groupDirName` would not make it. */
export function groupFromDirName(name) {
  let id = name;
  if (name.startsWith("~")) {
    const bytes = [];
    let acc = 0;
    let bits = 0;
    for (const c of name.slice(1)) {
      const v = BASE32.indexOf(c);
      if (v < 0) return null;
      acc = ((acc << 5) | v) & 0xffff;
      bits += 5;
      if (bits >= 8) {
        bits -= 8;
        bytes.push((acc >> bits) & 0xff);
      }
    }
    try {
      id = new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(bytes));
    } catch {
      return null;
    }
  }
  const len = new TextEncoder().encode(id).length;
  if (len < 1 || len > MAX_ID_LEN || !/^[A-Za-z0-9._:@~-]+$/.test(id)) return null;
  return groupDirName(id) === name ? id : null;
}

/** Lowercase hex of bytes. */
export function hex(bytes) {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}

/** Bytes of lowercase hex. */
export function unhex(s) {
  const out = new Uint8Array(s.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}
