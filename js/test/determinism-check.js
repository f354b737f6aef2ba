// Cross-host determinism, runtime-neutral: replays tests/determinism/stream.json (one command
// stream on one virtual clock, with lease expiries the authority ticks on by itself, past the
// snapshot cadence) on a JS-hosted authority and compares what it made with the memory host's
// run, checked in beside the stream: every seq's event id (ticks included), the snapshot seqs
// and the SHA-256 of their bytes, and the state hash. See tests/determinism/README.md.

const toHex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

async function sha256(bytes) {
  return toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)));
}

/**
 * Replays `stream` on `host` and returns `{ok, problem}`.
 *
 * `host` is `{submit(command, at) -> decision, tick(at) -> decision | undefined,
 * events() -> Event[], latestSnapshot() -> Uint8Array | undefined, seq, stateHash()}`;
 * without `latestSnapshot` snapshots are not compared.
 */
export async function checkDeterminism(mwp, stream, host) {
  const snapshots = [];
  const observe = async () => {
    if (!host.latestSnapshot || (await host.seq()) < stream.snapshot_every) return;
    const bytes = await host.latestSnapshot();
    if (bytes === undefined) return;
    // The snapshot's seq, from a replica that verifies it under the authority key.
    const r = new mwp.Replica("g1");
    r.restore(bytes, { trustedKey: mwp.publicKeyOf(stream.authority_secret_key), org: "acme" });
    const entry = { seq: r.cursor, sha256: await sha256(bytes) };
    r.free?.();
    const last = snapshots[snapshots.length - 1];
    if (last === undefined || last.seq !== entry.seq || last.sha256 !== entry.sha256) snapshots.push(entry);
  };
  for (const step of stream.steps) {
    if (step.command !== undefined) {
      await host.submit(step.command, step.at);
    } else {
      // What the authority does by itself at `at`: every tick its driver sends.
      while ((await host.tick(step.at))?.outcome === "accepted");
    }
    await observe();
  }
  const events = (await host.events()).map((e) => [e.seq, e.id]);
  const want = JSON.stringify(stream.events);
  if (JSON.stringify(events) !== want) return { ok: false, problem: `event ids differ: ${JSON.stringify(events)} vs ${want}` };
  if (host.latestSnapshot && JSON.stringify(snapshots) !== JSON.stringify(stream.snapshots)) {
    return { ok: false, problem: `snapshots differ: ${JSON.stringify(snapshots)} vs ${JSON.stringify(stream.snapshots)}` };
  }
  const hash = await host.stateHash();
  if (hash !== stream.state_hash) return { ok: false, problem: `state hash ${hash}, not ${stream.state_hash}` };
  return { ok: true, events: events.length, snapshots: snapshots.length };
}

/** The in-memory wasm `Authority`, signing with the stream's authority key. */
export function memoryHost(mwp, stream) {
  const a = new mwp.Authority({ secretKey: stream.authority_secret_key, snapshotEvery: stream.snapshot_every });
  return {
    submit: async (command, at) => a.submit(command, at),
    tick: async (at) => a.tick(at),
    events: async () => a.events(),
    latestSnapshot: async () => a.latestSnapshot(),
    seq: async () => a.seq,
    stateHash: async () => a.stateHash(),
  };
}

/**
 * The Node/Deno file store in `dir`, under the stream's key and cadence. `readFile(path)`
 * reads a file's bytes; `listDir(path)` its names.
 */
export async function fileStoreHost(mwp, stream, dir, { readFile, listDir }) {
  const store = await mwp.openFileStore(dir, {
    authorityKey: stream.authority_secret_key,
    snapshotEvery: stream.snapshot_every,
    snapshotsKept: 100,
  });
  const groupDir = `${dir}/groups/${mwp.groupDirName("g1")}`;
  return {
    store,
    submit: async (command, at) => (await store.submit([command], at))[0],
    tick: async (at) => store.tick("g1", at),
    events: async () => store.events("g1"),
    // The newest snapshot file, its 32-byte header (docs/format.md) cut off.
    latestSnapshot: async () => {
      const snaps = (await listDir(groupDir)).filter((n) => n.endsWith(".snap")).sort();
      if (snaps.length === 0) return undefined;
      return (await readFile(`${groupDir}/${snaps[snaps.length - 1]}`)).subarray(32);
    },
    seq: async () => (await store.openGroup("g1"))?.seq ?? 0,
    stateHash: async () => store.stateHash("g1"),
  };
}

/**
 * The IndexedDB authority (browsers) in database `name`, under the stream's key and cadence:
 * it keeps the latest signed snapshot its driver made due.
 */
export async function idbHost(mwp, stream, name) {
  const store = await mwp.IdbAuthority.open(name, "g1", {
    checkpointEvery: stream.snapshot_every,
    secretKey: stream.authority_secret_key,
  });
  return {
    store,
    submit: async (command, at) => (await store.submit([command], at))[0],
    tick: async (at) => store.tick(at),
    events: async () => store.events(),
    latestSnapshot: async () => store.latestSnapshot(),
    seq: async () => store.seq,
    stateHash: async () => store.stateHash(),
  };
}
