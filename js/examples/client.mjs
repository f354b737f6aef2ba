// The HTTP client: follow a group on `mwp serve`. Run (with a server on 127.0.0.1:7878):
//   cargo run -p mwp-host -- serve &  node js/examples/client.mjs
import { Client, Replica } from "mwp";

const client = new Client(process.env.MWP_URL ?? "http://127.0.0.1:7878");
const group = process.env.MWP_GROUP ?? "g1";
const trustedKey = await client.authorityKey();
const replica = new Replica(group);

// Replay (restoring a verified snapshot if the server says CURSOR_TOO_OLD) …
const { cursor, restored } = await client.replay(replica, { trustedKey, org: process.env.MWP_ORG ?? "acme" });
console.log(`caught up to seq ${cursor}${restored ? " (from a snapshot)" : ""}; state ${replica.stateHash()}`);

// … then the live tail, for five seconds.
const signal = AbortSignal.timeout(5000);
await client.follow(replica, { trustedKey, signal, onEvent: (e) => console.log(e.seq, e.kind.type) });
