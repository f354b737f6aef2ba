// The package's types at work (type-checked by `tsc --strict`, see scripts/test-wasm.sh; not
// run): Body and EventKind are discriminated unions, so narrowing on `type` gives each
// variant's fields, and a misspelt field or an unknown command does not compile.
import { Client, runAgent, type Body, type Event, type EventKind } from "mwp";
import * as mwp from "mwp";

/** One line per event, with the fields its kind has. */
export function describe(kind: EventKind): string {
  switch (kind.type) {
    case "work_claimed":
      return `${kind.work} leased to ${kind.lease.holder} until ${kind.lease.expires_at}`;
    case "work_failed":
      return `${kind.work} failed (attempt ${kind.attempt}), now ${kind.to}`;
    case "effect_intended":
      return `${kind.work} intends ${kind.op} (${kind.mode}${kind.irreversible ? ", irreversible" : ""})`;
    default:
      return kind.type;
  }
}

export const claim: Body = { type: "claim_work", work: "w1", lease_ms: 30_000, start_within_ms: 5_000 };
// @ts-expect-error: a claim asks for `lease_ms`; `lease` is for commands under a lease
export const misspelt: Body = { type: "claim_work", work: "w1", lease: "x", start_within_ms: 5_000 };
// @ts-expect-error: there is no such command
export const unknown: Body = { type: "claim_everything" };

/** Follows a group's tail, printing each event. */
export async function watch(client: Client, group: string, signal: AbortSignal): Promise<void> {
  for await (const event of client.tail(group, { signal, retry: { initialMs: 500, maxMs: 30_000 } })) {
    const e: Event = event;
    console.log(e.seq, describe(e.kind));
  }
}

/** A worker whose effect's outcome keeps its type. */
export function work(client: Client, key: string, signal: AbortSignal): Promise<void> {
  return runAgent({
    client,
    key,
    signal,
    config: { org: "acme", group: "g1", actor: "bob" },
    handlers: {
      async run(ctx) {
        const sent = await ctx.effect("notify", ({ key }) => ({ id: key.slice(0, 8) }), { mode: "keyed" });
        return { notified: sent.id };
      },
    },
  });
}

// Static exports and signed heads: a replica verified through an export's head under the
// pinned key; the heads of pages and the tail offered to a replica.
export async function staticReplica(baseUrl: string, authorityKey: string): Promise<number> {
  const r: mwp.Replica = await mwp.Replica.fromStatic(baseUrl, {
    authorityKey,
    group: "g1",
    start: "genesis",
    onProgress: (p: mwp.StaticProgress, file: string) => void `${file} ${p.verifiedThrough}`,
  });
  const head: mwp.SignedHead | null = r.verifiedHead;
  const offered: mwp.HeadOfferResult | undefined = head ? r.offerHead(head, authorityKey) : undefined;
  const client = new mwp.Client("http://127.0.0.1:7878");
  const page: { events: mwp.Event[]; head?: mwp.SignedHead } = await client.page("g1", { after: r.cursor });
  if (page.head) r.offerHead(page.head, authorityKey);
  const fork: mwp.ForkInfo = mwp.verifyForkProof("00", authorityKey);
  return (offered?.verifiedThrough ?? r.verifiedThrough) + (r.isProvisional(r.cursor) ? 1 : 0) + fork.seq;
}
