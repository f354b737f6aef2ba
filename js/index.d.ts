// Types of the npm package `mwp` (hand-written: the generated ones say `any` for every
// protocol object). Protocol data keeps the spec's snake_case field names (SPEC §1–§3).

/** Lowercase hex text: hashes (64 digits), keys (64), signatures (128). */
export type Hex = string;
/** An identifier: 1–128 bytes of `[A-Za-z0-9._:@~-]`. */
export type Id = string;
/** Arbitrary JSON without floats. */
export type Opaque = null | boolean | number | string | Opaque[] | { [key: string]: Opaque };

/** The spec's stable error codes. */
export type ErrorCode =
  | "MALFORMED" | "WRONG_GROUP" | "UNKNOWN_ACTOR" | "BAD_SIGNATURE" | "ACTION_ID_COLLISION"
  | "GROUP_ARCHIVED" | "NOT_PERMITTED" | "WRONG_SESSION" | "REVISION_MISMATCH" | "CAS_REQUIRED"
  | "FENCED" | "LEASE_EXPIRED" | "NOT_FOUND" | "ALREADY_EXISTS" | "INVALID_STATE"
  | "DEPENDENCIES_PENDING" | "NOT_YET" | "DEADLINE_PASSED" | "ATTEMPTS_EXHAUSTED"
  | "APPROVAL_REQUIRED" | "EFFECT_UNSETTLED" | "DISPOSITION_CONFLICT" | "BUDGET_EXCEEDED"
  | "CURSOR_TOO_OLD" | "SNAPSHOT_INVALID" | "LOG_CORRUPT" | "STORAGE" | "UNAUTHORIZED" | "FORBIDDEN"
  | "HEAD_INVALID" | "FORK"
  /** Client side only: a live tail skipped events (GapError). */
  | "TAIL_GAP";

/** An error in its JSON form: `{code, message, ...details}`. */
export interface ErrorBody {
  code: ErrorCode;
  message: string;
  [detail: string]: unknown;
}

/** Base class of every error mwp raises. */
export class MwpError extends Error {
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>);
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;
  toJSON(): ErrorBody;
}
/** An authority rejected a command, or an event did not apply. */
export class AcceptError extends MwpError {}
/** A replica could not take an event or snapshot. */
export class OfferError extends MwpError {}
/** A snapshot failed to build or verify. */
export class SnapshotError extends MwpError {}
/** Encoding, decoding, hashing or signing failed. */
export class CodecError extends MwpError {}
/** A store failed. */
export class StoreError extends MwpError {}
/** A transcript could not be run. */
export class AgentError extends MwpError {}
export class TranscriptError extends MwpError {}
/** A static export could not be read or planned; `details.file` names the file. */
export class ExportError extends MwpError {}
/** An HTTP request failed; `status` 0 means no answer. */
export class HttpError extends MwpError {
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, status?: number);
  readonly status: number;
}
/**
 * A live tail received an event past the next one it expected (`code` "TAIL_GAP",
 * `details` `{group, expected, received}`).
 */
export class GapError extends MwpError {
  readonly details: { group: Id; expected: number; received: number };
}
/** Turns a wasm error (or any `{code, message}`) into an MwpError. */
export function toMwpError(e: unknown): unknown;

/** A member's role. */
export type Role = "owner" | "worker" | "reviewer" | "observer";
/** A member as `open_group` lists it. */
export interface MemberSpec { actor: Id; role: Role; key: Hex }
/** A work item's contract (SPEC §5). */
export interface Contract {
  max_attempts: number;
  backoff_base_ms: number;
  backoff_max_ms: number;
  cost_budget: number;
  deadline_at?: number;
  risk: "low" | "high";
}
/** How an effect may be repeated. */
export type EffectMode = "read_only" | "keyed" | "undeclared";
/** What a blocked item needs to continue. */
export interface Needs { key: Id; kind: string }
/** A work item to create (`create_work`, and each entry of `expand`). */
export interface NewWork { type?: "create_work"; work: Id; contract: Contract; after: Id[]; spec: Opaque }
/** A work item's state. */
export type WorkState = "queued" | "leased" | "running" | "blocked" | "waiting" | "succeeded" | "failed" | "cancelled";
/** A lease as `work_claimed` grants it. */
export interface Lease { id: Hex; work: Id; holder: Id; session: number; epoch: number; granted_at: number; start_by: number; expires_at: number }
/** A lease taken away, and where its work item went. */
export interface Revocation { work: Id; lease: Hex; to: WorkState }

/**
 * A command body (SPEC §2), discriminated by `type`; the fields are exactly those of the
 * core's `Body` (tests/tests/ts_types.rs holds this file to it).
 */
export type Body =
  | { type: "open_group"; mission: Id; title: Opaque; members: MemberSpec[]; authority_key: Hex }
  | { type: "add_member"; actor: Id; role: Role; key: Hex }
  | { type: "remove_member"; actor: Id }
  | { type: "change_role"; actor: Id; role: Role }
  | { type: "replace_session" }
  | { type: "create_work"; work: Id; contract: Contract; after: Id[]; spec: Opaque }
  | { type: "claim_work"; work: Id; lease_ms: number; start_within_ms: number }
  | { type: "start_work"; work: Id; lease: Hex }
  | { type: "renew_lease"; work: Id; lease: Hex; lease_ms: number }
  | { type: "checkpoint"; work: Id; lease: Hex; data: Opaque }
  | { type: "block"; work: Id; lease: Hex; data: Opaque; needs: Needs }
  | { type: "resolve_block"; work: Id; key: Id; resolution: Opaque }
  | { type: "submit"; work: Id; lease: Hex; result: Opaque }
  | { type: "fail"; work: Id; lease: Hex; error: Opaque; retryable: boolean }
  | { type: "cancel"; work: Id; reason: Opaque }
  | { type: "reassign"; work: Id; reason: Opaque }
  | { type: "intend_effect"; work: Id; lease: Hex; op: Id; mode: EffectMode; irreversible: boolean; target: Opaque }
  | { type: "settle_effect"; work: Id; lease: Hex; op: Id; outcome: Opaque; receipt: Opaque }
  | { type: "reconcile_effect"; work: Id; key: Hex; happened: boolean; receipt: Opaque }
  | { type: "charge"; work: Id; lease: Hex; cost: number; data?: Opaque }
  | { type: "request_approval"; approval: Id; work: Id; reason: Opaque }
  | { type: "decide_approval"; approval: Id; grant: boolean }
  | { type: "expand"; trigger: number; work: NewWork[] }
  | { type: "redact"; seq: number; reason: Opaque }
  | { type: "archive"; reason: Opaque }
  | { type: "tick" };

/** What an event records (SPEC §3), discriminated by `type`: the core's `EventKind`. */
export type EventKind =
  | { type: "group_opened"; org: Id; mission: Id; title: Opaque; members: MemberSpec[]; authority_key: Hex }
  | { type: "member_added"; actor: Id; role: Role; key: Hex }
  | { type: "member_removed"; actor: Id; revoked: Revocation[] }
  | { type: "role_changed"; actor: Id; role: Role }
  | { type: "session_replaced"; session: number; revoked: Revocation[] }
  | { type: "work_created"; work: Id; contract: Contract; after: Id[]; spec: Opaque }
  | { type: "work_claimed"; work: Id; lease_ms: number; start_within_ms: number; lease: Lease; checkpoint?: number }
  | { type: "work_started"; work: Id; lease: Hex }
  | { type: "lease_renewed"; work: Id; lease: Hex; lease_ms: number; expires_at: number }
  | { type: "work_checkpointed"; work: Id; lease: Hex; data: Opaque }
  | { type: "work_blocked"; work: Id; lease: Hex; data: Opaque; needs: Needs }
  | { type: "block_resolved"; work: Id; key: Id; resolution: Opaque }
  | { type: "work_succeeded"; work: Id; lease: Hex; result: Opaque }
  | { type: "work_failed"; work: Id; lease: Hex; error: Opaque; retryable: boolean; attempt: number; to: WorkState; not_before?: number }
  | { type: "work_cancelled"; work: Id; reason: Opaque; revoked?: Hex }
  | { type: "work_reassigned"; work: Id; reason: Opaque; revoked: Revocation }
  | { type: "effect_intended"; work: Id; lease: Hex; op: Id; mode: EffectMode; irreversible: boolean; target: Opaque; key: Hex }
  | { type: "effect_settled"; work: Id; lease: Hex; op: Id; outcome: Opaque; receipt: Opaque; key: Hex }
  | { type: "effect_reconciled"; work: Id; key: Hex; happened: boolean; receipt: Opaque; to?: WorkState }
  | { type: "work_charged"; work: Id; lease: Hex; cost: number; data?: Opaque; spent: number }
  | { type: "approval_requested"; approval: Id; work: Id; reason: Opaque }
  | { type: "approval_decided"; approval: Id; grant: boolean }
  | { type: "work_expanded"; trigger: number; work: NewWork[] }
  | { type: "event_redacted"; seq: number; reason: Opaque }
  | { type: "group_archived"; reason: Opaque }
  | { type: "leases_expired"; expired: Revocation[] }
  | { type: "evidence_recorded"; of: "submit" | "fail"; work: Id; lease: Hex; result?: Opaque; error?: Opaque; retryable?: boolean };

/** A command envelope in its JSON form. */
export interface Command {
  org: Id;
  group: Id;
  actor: Id;
  action: Id;
  session: number;
  expect?: number;
  body: Body;
  sig: Hex;
}
/** A command before signing. */
export type UnsignedCommand = Omit<Command, "sig"> & { sig?: Hex };

/** An event in its JSON form (SPEC §3). */
export interface Event {
  id: Hex;
  group: Id;
  seq: number;
  at: number;
  actor: Id;
  action: Id;
  content_hash: Hex;
  aggregate: string;
  revision: number;
  prev: Hex;
  payload_hash: Hex;
  kind: EventKind;
}

/** A receipt (SPEC §3). */
export interface Receipt {
  group: Id;
  seq: number;
  event_id: Hex;
  actor: Id;
  action: Id;
  content_hash: Hex;
  aggregate: string;
  revision: number;
  disposition: "applied" | "evidence";
  at: number;
}

/** A decision of an authority. */
export type Decision =
  | { outcome: "accepted"; receipt: Receipt; event: Event; eventCbor: Uint8Array }
  | { outcome: "duplicate"; receipt: Receipt };
/** A decision, or a rejection as a value (batches). */
export type BatchResult = Decision | { outcome: "rejected"; error: ErrorBody };

/** The Group state (SPEC §3): members, work items, approvals, receipts, … */
export interface GroupState {
  org: Id;
  group: Id;
  mission: Id;
  seq: number;
  head: Hex;
  archived: boolean;
  members: Record<Id, { role: string; key: Hex; session: number; removed: boolean }>;
  work: Record<Id, { state: WorkState; after: Id[]; attempts: number; [field: string]: unknown }>;
  [field: string]: unknown;
}

/** The answer to one offer. */
export interface OfferResult {
  result: "applied" | "duplicate" | "buffered" | "rejected";
  seq: number;
  cursor: number;
  error?: ErrorBody;
}
/** The answer to a batch of offers. */
export interface OfferSummary {
  applied: number;
  duplicate: number;
  buffered: number;
  rejected: number;
  cursor: number;
  errors: { seq: number | null; error: ErrorBody }[];
}

/** Stored events: a frame batch or an array of canonical CBOR events. */
export type Events = Uint8Array | Uint8Array[];

/** One Group's authority, in memory. */
export class Authority {
  /** With `secretKey` it signs its own ticks and snapshots; without, it holds no key. */
  constructor(options?: { secretKey?: Hex; snapshotEvery?: number });
  static fromLog(events: Events, options?: { secretKey?: Hex }): Authority;
  submit(command: Command | Uint8Array, nowMs?: number): Decision;
  submitBatch(commands: (Command | Uint8Array)[], nowMs?: number): { results: BatchResult[]; events: Uint8Array };
  decide(command: Command | Uint8Array, nowMs?: number): Decision;
  append(event: Event | Uint8Array): void;
  readonly seq: number;
  readonly head: Hex;
  stateHash(): Hex;
  state(): GroupState | null;
  stateCbor(): Uint8Array | undefined;
  events(after?: number, limit?: number): Event[];
  eventFrames(after?: number, limit?: number): Uint8Array;
  receipt(actor: Id, action: Id): Receipt | undefined;
  frontier(nowMs?: number): Id[];
  nextDeadline(): number | undefined;
  snapshot(secretKey?: Hex): Uint8Array;
  /** The authority's own tick when a lease deadline has passed (only with a key). */
  tick(nowMs?: number): Decision | undefined;
  latestSnapshot(): Uint8Array | undefined;
  free(): void;
}

/** Options of a snapshot restore. */
export interface RestoreOptions {
  trustedKey: Hex;
  org: Id;
  requestedCursor?: number;
}

/** One Group rebuilt from events delivered at least once, in any order. */
/** The authority's signed statement "event `seq` of `group` has id `id`" (SPEC §8a), JSON form. */
export interface SignedHead {
  schema: "mwp.head.v1";
  org: Id;
  group: Id;
  seq: number;
  id: Hex;
  /** Authority time of signing (ms). */
  at: number;
  sig: Hex;
}
/** What offering a signed head did. */
export interface HeadOfferResult {
  /** `verified`: it named an applied event; `ahead`: checked when its seq is applied; `stale`: too old to check. */
  result: "verified" | "ahead" | "stale";
  /** The replica's verified seq after the offer. */
  verifiedThrough: number;
}
/** How far a static export read got. */
export interface StaticProgress {
  cursor: number;
  verifiedThrough: number;
  headSeq: number;
  events: number;
  bytes: number;
  done: boolean;
}
/** Options of `Replica.fromStatic`. */
export interface FromStaticOptions {
  /** The authority key (hex) you pin: never read from the export. */
  authorityKey: Hex;
  group: Id;
  /** From the latest signed snapshot (default) or every event from seq 1. */
  start?: "snapshot" | "genesis";
  fetch?: (input: URL, init?: { signal?: AbortSignal }) => Promise<Response>;
  signal?: AbortSignal;
  onProgress?: (progress: StaticProgress, file: string) => void;
  /** The events each chunk applied (verified), in seq order. */
  onEvents?: (events: Event[], progress: StaticProgress) => void;
}
/** What a verified fork proof shows. */
export interface ForkInfo {
  org: Id;
  group: Id;
  seq: number;
  ids: [Hex, Hex];
  kind: "heads" | "chain";
}
/** One file of a planned export. */
export interface ExportFile {
  path: string;
  bytes: Uint8Array;
}
/** The sans-IO reader of a static export (SPEC §8b). */
export class StaticReader {
  constructor(group: Id, authorityKey: Hex, start?: "snapshot" | "genesis");
  /** The most bytes a reader accepts for the export file `file`; a host stops fetching past it. */
  static maxFileBytes(file: string): number;
  pollFetch(): string | undefined;
  /** With `withEvents`, a chunk's progress carries `applied`: the events it applied. */
  handleFetched(file: string, bytes: Uint8Array, withEvents?: boolean): StaticProgress & { applied?: Event[] };
  progress(): StaticProgress;
  head(): SignedHead | null;
  intoReplica(): Replica;
  free(): void;
}
export function signHead(org: Id, group: Id, seq: number, id: Hex, atMs: number, secretKey: Hex): SignedHead;
export function verifyForkProof(proof: Uint8Array | Hex, pinnedKey?: Hex): ForkInfo;
export function planExport(
  events: Events,
  options: { head: SignedHead | string; authorityKey: Hex; snapshot?: Uint8Array; previous?: unknown; chunkEvents?: number },
): { files: ExportFile[]; headFile: Uint8Array; index: Record<string, unknown> };

export class Replica {
  constructor(group: Id);
  static fromStateCbor(bytes: Uint8Array): Replica;
  /** Rebuilds a replica from a static export, verified through its signed head under the pinned key. */
  static fromStatic(baseUrl: string | URL, options: FromStaticOptions): Promise<Replica>;
  /** Offers a signed head under the pinned key; throws `HEAD_INVALID` or `FORK`. */
  offerHead(head: SignedHead | string, authorityKey: Hex): HeadOfferResult;
  /** The highest seq a signed head vouched for: later events are provisional. */
  readonly verifiedThrough: number;
  readonly verifiedHead: SignedHead | null;
  isProvisional(seq: number): boolean;
  offer(event: Event | Uint8Array): OfferResult;
  offerBatch(events: Events): OfferSummary;
  restore(snapshot: Uint8Array, options: RestoreOptions): void;
  readonly group: Id;
  readonly cursor: number;
  readonly head: Hex;
  readonly buffered: number;
  stateHash(): Hex;
  state(): GroupState | null;
  stateCbor(): Uint8Array | undefined;
  frontier(nowMs?: number): Id[];
  nextDeadline(): number | undefined;
  free(): void;
}

/** An agent's configuration: identities, and optional time budgets (ms). */
export interface AgentConfig {
  org: Id;
  group: Id;
  actor: Id;
  /** The authority key (hex) trusted for snapshots. */
  authorityKey: Hex;
  /** Leases held at once (default 1; 0 never claims). */
  capacity?: number;
  leaseMs?: number;
  startWithinMs?: number;
  renewMarginMs?: number;
  graceMs?: number;
  resendMs?: number;
  syncMs?: number;
  effectTimeoutMs?: number;
  /** Dispose of every terminal outcome of the group (`plan` notices, `dispose`); claims wait for it. */
  planner?: boolean;
}

/** A write set to make durable before calling `handleCommitted(serial)`. */
export interface AgentWriteSet {
  serial: number;
  cbor: Uint8Array;
}

/** A request for the authority. */
export type AgentTransmit =
  | { type: "command"; action: Id; command: Command; cbor: Uint8Array }
  | { type: "fetch_events"; after: number }
  | { type: "lookup_receipt"; action: Id }
  | { type: "fetch_snapshot"; snapshot: { seq: number; hash: Hex; location: string } }
  | { type: "ack"; cursor: number };

/** An effect to perform now; `key` is its idempotency key. */
export interface AgentDispatch {
  key: Hex;
  work: Id;
  op: Id;
  mode: EffectMode;
  irreversible: boolean;
  target: Opaque;
  attempt: number;
}

/** News for the application. */
export type AgentNotice =
  | { type: "run"; work: Id; lease: Hex; epoch: number; checkpoint: { work: Id; seq: number; data: Opaque } | null; resumed: boolean }
  | { type: "released"; work: Id; lease: Hex; state: string }
  | { type: "lease_lost"; work: Id; lease: Hex; reason: "revoked" | "expired" | "expired_locally" | "session_replaced" }
  | { type: "suspended"; work: Id }
  | { type: "uncertain"; key: Hex; work: Id; op: Id }
  | { type: "evidence"; action: Id; receipt: Receipt }
  | { type: "rejected"; action: Id; command: string; error: { code: string; message: string; [k: string]: unknown } }
  | { type: "dropped"; action: Id; reason: string }
  | { type: "corrupt"; error: { code: string; message: string; [k: string]: unknown } }
  | { type: "plan"; trigger: number; work: Id };

/** Every committed write set folded in: what an agent restarts from. */
export class AgentImage {
  constructor(cbor?: Uint8Array);
  commit(writeSet: AgentWriteSet | Uint8Array): void;
  toCbor(): Uint8Array;
  readonly serial: number;
  readonly cursor: number;
}

/** The agent driver (SPEC §7), sans-IO: feed it with `handle*`, drain it with `poll*`. */
export class Agent {
  constructor(config: AgentConfig, secretKey: Hex);
  static restore(config: AgentConfig, secretKey: Hex, image: AgentImage): Agent;
  readonly config: AgentConfig;
  pollWriteSet(): AgentWriteSet | undefined;
  pollTransmit(): AgentTransmit | undefined;
  pollDispatch(): AgentDispatch | undefined;
  pollNotice(): AgentNotice | undefined;
  pollTimeout(): number | undefined;
  handleEvents(events: Uint8Array | (Event | Uint8Array)[], nowMs?: number): void;
  handleReceipt(action: Id, receipt: Receipt, nowMs?: number): void;
  handleRejection(action: Id, error: MwpError | { code: string; message: string }, nowMs?: number): void;
  handleLookup(action: Id, receipt: Receipt | undefined | null, nowMs?: number): void;
  handleFetchError(error: MwpError | { code: string; message: string }, nowMs?: number): void;
  handleSnapshot(bytes: Uint8Array, nowMs?: number): void;
  handleConnectivity(up: boolean, nowMs?: number): void;
  handleTimeout(nowMs?: number): void;
  handleEffectOutcome(key: Hex, outcome: Opaque, receipt: Opaque, nowMs?: number): void;
  handleCommitted(serial: number, nowMs?: number): void;
  submit(work: Id, result: Opaque, nowMs?: number): Id;
  fail(work: Id, error: Opaque, options?: { retryable?: boolean }, nowMs?: number): Id;
  checkpoint(work: Id, data: Opaque, nowMs?: number): Id;
  charge(work: Id, cost: number, data?: Opaque, nowMs?: number): Id;
  intendEffect(work: Id, op: Id, options?: { mode?: EffectMode; irreversible?: boolean; target?: Opaque }, nowMs?: number): Hex;
  resolveEffect(key: Hex, happened: boolean, receipt: Opaque, nowMs?: number): void;
  replaceSession(nowMs?: number): Id;
  /** A planner's answer for a pending trigger: the items to create, or `[]`; returns `expand-<trigger>`. */
  dispose(trigger: number, work: NewWork[], nowMs?: number): Id;
  /** Triggers still lacking this planner's disposition. */
  pendingDispositions(): number[];
  readonly session: number;
  readonly online: boolean;
  readonly cursor: number;
  readonly durableCursor: number;
  leases(): Record<Id, { id: Hex; work: Id; epoch: number; [k: string]: unknown }>;
  outbox(): Record<Id, unknown>;
  effects(): Record<Hex, unknown>;
  state(): GroupState | null;
  stateHash(): Hex;
  frontier(nowMs?: number): Id[];
  free(): void;
}

/** What `pump` and `carry` need of a client (a `Client` has it). */
export interface AgentTransport {
  submit(command: Command): Promise<{ receipt: Receipt; duplicate?: boolean }>;
  events(group: Id, options: { after: number }): Promise<(Event | Uint8Array)[]>;
  receipt(group: Id, actor: Id, action: Id): Promise<Receipt | undefined>;
  snapshot(group: Id, location?: string): Promise<Uint8Array>;
}

/** Carries one transmit through `client` and hands the answer to `agent`. */
export function carry(agent: Agent, client: AgentTransport, transmit: AgentTransmit, now?: () => number): Promise<void>;

/**
 * Runs the agent until it settles: commits write sets (`commit` resolves once durable),
 * carries transmits, performs effects, reports notices. Resolves to when to run it again.
 */
export function pump(
  agent: Agent,
  options: {
    client?: AgentTransport;
    commit: (writeSet: AgentWriteSet) => void | Promise<void>;
    dispatch?: (effect: AgentDispatch) => Promise<{ outcome?: Opaque; receipt?: Opaque } | undefined> | { outcome?: Opaque; receipt?: Opaque } | undefined;
    onNotice?: (notice: AgentNotice) => void | Promise<void>;
    now?: () => number;
    maxSteps?: number;
  },
): Promise<number | undefined>;

/** Canonical CBOR (RFC 8949 §4.2.1). */
export const canonical: {
  encode(value: Opaque): Uint8Array;
  decode(bytes: Uint8Array, options?: { strict?: boolean }): Opaque;
  hash(value: Opaque): Hex;
};

export function decodeEvent(bytes: Uint8Array): Event;
export function encodeEvent(event: Event | Uint8Array): Uint8Array;
export function verifyEvent(event: Event | Uint8Array): void;
export function receiptOf(event: Event | Uint8Array): Receipt;
export function signCommand(command: UnsignedCommand, secretKey: Hex): Command;
export function verifyCommand(command: Command | Uint8Array, publicKey: Hex): boolean;
export function commandContentHash(command: UnsignedCommand | Uint8Array): Hex;
export function encodeCommand(command: Command): Uint8Array;
export function parseCommand(command: Command | Uint8Array): Command;
export function publicKeyOf(secretKey: Hex): Hex;
/**
 * The `Authorization` value of a member-signed read: `actor` signs `method` and `target`
 * (path and query, exactly as sent) at `atMs` (ms since the epoch) with `secretKey`.
 */
export function signRead(method: string, target: string, actor: Id, atMs: number, secretKey: Hex): string;
export function transcriptSecretKey(actor: Id): Hex;
export function generateSecretKey(): Hex;
export function sha256(bytes: Uint8Array): Hex;
export function buildSnapshot(stateCbor: Uint8Array, secretKey: Hex): Uint8Array;
/** A verified snapshot's header. */
export interface SnapshotHeader {
  schema: "mwp.snapshot.v1";
  org: Id;
  group: Id;
  mission: Id;
  seq: number;
  chain_head: Hex;
  state_hash: Hex;
  signer: Hex;
}
export function verifySnapshot(bytes: Uint8Array, options: { trustedKey: Hex; org: Id; group: Id; minSeq?: number }): SnapshotHeader;
export function runTranscript(text: string): { lines: string[]; failed: boolean };
export function vectorLines(text: string): string[];
export function replayLog(events: Events): { seq: number; stateHash: Hex };
export function frameBatch(items: Uint8Array[]): Uint8Array;
export function splitBatch(batch: Uint8Array): Uint8Array[];
export function asBatch(events: Events): Uint8Array;

/** Which entry point was loaded. */
export const runtime: "node" | "deno" | "browser" | "slim";

/** Anything a client can bring up to date: Replica or IdbReplica. */
export interface ReplicaLike {
  readonly group: Id;
  readonly cursor: number;
  /** When present (Replica, IdbReplica), the client offers the signed heads it receives. */
  offerHead?(head: SignedHead, authorityKey: Hex): HeadOfferResult | Promise<HeadOfferResult>;
  offerBatch(events: Events): OfferSummary | Promise<OfferSummary>;
  restore(snapshot: Uint8Array, options: RestoreOptions): void | Promise<void>;
}

/** A client of `mwp serve` (SPEC §11). */
/** A member's credential for signed reads: its actor ID and secret key seed (hex). */
export interface ReadSigner {
  actor: Id;
  key: Hex;
}

/**
 * How long a request may take, per call: `signal` aborts it (rejecting with the signal's
 * reason); `timeoutMs` overrides the client's (milliseconds; `Infinity`: no bound; anything
 * but a positive number is MwpError `MALFORMED`).
 */
export interface RequestOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

export class Client {
  /**
   * `token`: an operator token, sent as `Authorization: Bearer …`; `signer`: a member who
   * signs every read (`Authorization: Mwp-Signature …`, docs/http.md). A token wins if both.
   * `timeoutMs` (60 000; `Infinity`: no bound): every request but the live tail must be done,
   * answer and body, within it, or fails with HttpError `TIMEOUT` (status 0).
   */
  constructor(
    baseUrl: string | URL,
    options?: { fetch?: typeof fetch; headers?: Record<string, string>; token?: string; signer?: ReadSigner; timeoutMs?: number },
  );
  authorityKey(options?: RequestOptions): Promise<Hex>;
  groups(options?: RequestOptions): Promise<{ groups: { group: Id; head: number }[] }>;
  submit(command: Command, options?: RequestOptions): Promise<{ receipt: Receipt; duplicate: boolean }>;
  /** The events of one page; the page's signed head rides along as the array's `head`. */
  events(group: Id, options?: { after?: number; limit?: number } & RequestOptions): Promise<Event[] & { head?: SignedHead }>;
  /** One page: its events and the server's signed head (undefined from a server that signs none). */
  page(group: Id, options?: { after?: number; limit?: number } & RequestOptions): Promise<{ events: Event[]; head?: SignedHead }>;
  /** The group's latest signed head. */
  head(group: Id, options?: RequestOptions): Promise<SignedHead>;
  receipt(group: Id, actor: Id, action: Id, options?: RequestOptions): Promise<Receipt | undefined>;
  snapshot(group: Id, location?: string, options?: RequestOptions): Promise<Uint8Array>;
  /** Each request (a page, a snapshot) is bounded by `timeoutMs` on its own. */
  replay(
    replica: ReplicaLike,
    options?: {
      trustedKey?: Hex;
      org?: Id;
      limit?: number;
      signal?: AbortSignal;
      timeoutMs?: number;
      onEvents?: (events: Event[], summary: OfferSummary) => void;
      /** Each page's signed head, after it was offered to the replica (with `trustedKey`). */
      onHead?: (head: SignedHead, result: HeadOfferResult | undefined) => void;
    },
  ): Promise<{ cursor: number; restored: boolean }>;
  /**
   * The live tail. `onOpen` is called once the first stream is open: every later event arrives
   * through it. A dropped stream is resumed after a backoff with `Last-Event-ID`; a skipped
   * seq throws GapError; an event whose `prev` is not the last event's id (or of another
   * group, or that does not hash to its payload hash and id) throws HttpError `LOG_CORRUPT`.
   */
  tail(
    group: Id,
    options?: {
      after?: number;
      signal?: AbortSignal;
      onOpen?: () => void;
      onReconnect?: (r: TailReconnect) => void;
      /** Each signed head the stream carries, in order with the events; awaited. */
      onHead?: (head: SignedHead) => void | Promise<void>;
      retry?: TailRetry | false;
      /** Milliseconds without a byte (or an answer) after which the stream counts as dropped and is reconnected (60 000). */
      idleMs?: number;
    },
  ): AsyncGenerator<Event, void, undefined>;
  /** `onEvent` sees each event from the tail; `onLive` is called once the replay is done and the tail is open. */
  follow(
    replica: ReplicaLike,
    options?: {
      trustedKey?: Hex;
      org?: Id;
      signal?: AbortSignal;
      /** Each request of the replay (the tail is bounded by `idleMs`). */
      timeoutMs?: number;
      onEvent?: (event: Event, summary: OfferSummary) => void;
      onLive?: () => void;
      onReconnect?: (r: TailReconnect) => void;
      onHead?: (head: SignedHead, result: HeadOfferResult | undefined) => void;
      retry?: TailRetry | false;
      /** As `tail`'s `idleMs`. */
      idleMs?: number;
    },
  ): Promise<void>;
}

/** How a live tail reconnects: the first wait, its cap (it doubles), and how many tries in a row. */
export interface TailRetry {
  /** Default 250. */
  initialMs?: number;
  /** Default 10,000. */
  maxMs?: number;
  /** Failed attempts in a row before the last error is thrown (default: no limit). */
  attempts?: number;
}
/** What a live tail reports before waiting to reconnect. */
export interface TailReconnect {
  attempt: number;
  delayMs: number;
  /** The seq it resumes after (sent as `Last-Event-ID`). */
  after: number;
  error?: unknown;
}

/** What `runAgent` needs of a journal: an AgentJournal (Node, Deno) or an IdbAgentStore. */
export interface AgentJournalLike {
  load(): Promise<AgentImage>;
  commit(writeSet: AgentWriteSet): Promise<void>;
}

/** What a handler's `run` gets for one granted lease. */
export interface RunContext {
  readonly work: Id;
  readonly lease: Hex;
  readonly epoch: number;
  /** Whether this run continues a lease held before a restart. */
  readonly resumed: boolean;
  /** The data of the work's last checkpoint, or null. */
  readonly saved: Opaque;
  /** The work item as the replica holds it. */
  readonly item: GroupState["work"][string] | null;
  /** Aborts when the lease ends (released, lost) or the worker stops. */
  readonly signal: AbortSignal;
  /** Records `data` and yields the lease (the work returns to `queued`); ends this run. */
  checkpoint(data: Opaque): Promise<void>;
  /** Charges `cost`, with optional checkpoint data, keeping the lease. */
  charge(cost: number, data?: Opaque): Promise<void>;
  /**
   * Performs an effect once per lease epoch: the intent is recorded first, then `fn` runs; its
   * value is the outcome. An outcome already recorded (a restart) is returned without running.
   */
  effect<T extends Opaque>(
    op: Id,
    fn: (effect: { key: Hex; attempt: number; target: Opaque }) => T | Promise<T>,
    options?: { mode?: EffectMode; irreversible?: boolean; target?: Opaque },
  ): Promise<T>;
  submit(result: Opaque): Promise<void>;
  fail(error: Opaque, options?: { retryable?: boolean }): Promise<void>;
}

/** What a worker does: `run` per granted lease (its value is submitted; a throw fails, retryable). */
export interface AgentHandlers {
  run?(ctx: RunContext): Opaque | void | Promise<Opaque | void>;
  notice?(notice: AgentNotice): void | Promise<void>;
  settled?(view: { state: GroupState | null; leases: ReturnType<Agent["leases"]>; agent: Agent }): void | Promise<void>;
  error?(error: unknown): void;
  /** A planner's rule: the items a terminal outcome calls for (`[]`: none). */
  plan?(question: { trigger: number; work: Id; item: GroupState["work"][string] | null; state: GroupState | null }): NewWork[] | Promise<NewWork[]>;
}

/**
 * A long-running worker on the agent driver: claims, renews, records effect intents before
 * dispatching, checkpoints and submits, and restarts from `journal`. Resolves once stopped by
 * `signal`; rejects if the journal fails.
 */
export function runAgent(options: {
  client: AgentTransport & { authorityKey(): Promise<Hex> };
  key: Hex;
  config: Omit<AgentConfig, "authorityKey"> & { authorityKey?: Hex };
  handlers?: AgentHandlers;
  signal?: AbortSignal;
  journal?: AgentJournalLike;
  now?: () => number;
  idleMs?: number;
}): Promise<void>;

/** Node and Deno only: an agent's committed write sets in one file. */
export class FileAgentJournal implements AgentJournalLike {
  load(): Promise<AgentImage>;
  commit(writeSet: AgentWriteSet | Uint8Array): Promise<void>;
  close(): Promise<void>;
}
/**
 * Node and Deno only: opens an agent journal file (the native journal's format); the file is
 * created by the first write set. One process writes a journal at a time: its writer lock
 * (`NAME.LOCK.pid` beside it) is held until `close`, and a journal another writer holds is
 * refused with StoreError `STORAGE` naming the file and the holder's pid. A file name that
 * is another journal's lock or temporary file, or a data directory's lock file (`a.LOCK`,
 * `a.LOCK.pid`, `a.tmp`, `LOCK`), is StoreError `MALFORMED`; a directory or a FIFO at `path`
 * is `STORAGE`.
 */
export function openAgentJournal(path: string): Promise<FileAgentJournal>;

/** Browsers only: an authority whose log lives in IndexedDB. */
export class IdbAuthority {
  static open(name: string, group: Id, options?: { checkpointEvery?: number; secretKey?: Hex }): Promise<IdbAuthority>;
  submit(commands: Command | (Command | Uint8Array)[], nowMs?: number): Promise<BatchResult[]>;
  tick(nowMs?: number): Promise<BatchResult | undefined>;
  events(after?: number, limit?: number): Promise<Event[]>;
  eventFrames(after?: number, limit?: number): Promise<Uint8Array>;
  readonly seq: number;
  readonly head: Hex;
  stateHash(): Hex;
  state(): GroupState | null;
  stateCbor(): Uint8Array | undefined;
  receipt(actor: Id, action: Id): Receipt | undefined;
  frontier(nowMs?: number): Id[];
  nextDeadline(): number | undefined;
  /** The latest signed snapshot the cadence made due since the store was opened (with `secretKey`). */
  latestSnapshot(): Uint8Array | undefined;
  close(): Promise<void>;
}

/** An agent's committed write sets in IndexedDB (browsers only). */
export class IdbAgentStore {
  static open(name: string): Promise<IdbAgentStore>;
  load(): Promise<AgentImage>;
  commit(writeSet: AgentWriteSet): Promise<void>;
  compact(image: AgentImage): Promise<void>;
  close(): Promise<void>;
}

/** Browsers only: a replica whose projection lives in IndexedDB. */
export class IdbReplica implements ReplicaLike {
  static open(name: string, group: Id, options?: { checkpointEvery?: number }): Promise<IdbReplica>;
  offerBatch(events: Events): Promise<OfferSummary>;
  restore(snapshot: Uint8Array, options: RestoreOptions): Promise<void>;
  events(after?: number, limit?: number): Promise<Event[]>;
  eventFrames(after?: number, limit?: number): Promise<Uint8Array>;
  readonly group: Id;
  readonly cursor: number;
  readonly head: Hex;
  /** Offers a signed head after the queued writes; rejects with `HEAD_INVALID` or `FORK`. */
  offerHead(head: SignedHead | string, authorityKey: Hex): Promise<HeadOfferResult>;
  /** The highest seq a signed head vouched for since the store was opened. */
  readonly verifiedThrough: number;
  readonly verifiedHead: SignedHead | null;
  isProvisional(seq: number): boolean;
  stateHash(): Hex;
  state(): GroupState | null;
  frontier(nowMs?: number): Id[];
  close(): Promise<void>;
}

/** Browsers only: deletes a store's database. */
export function deleteIdbStore(name: string): Promise<void>;

/** Node and Deno only: options of `openFileStore`. */
export interface FileStoreOptions {
  /** A segment that reached this size is closed and a new one started (default 64 MiB). */
  segmentBytes?: number;
  /**
   * Zeros written ahead of the last record, in the same write as the batch that needs them,
   * so most appends overwrite space the file already has and each sync need not record a
   * new file size (default 4 MiB, at most `segmentBytes`; `0`: none).
   */
  reserveBytes?: number;
  /** Take a signed snapshot every this many events (default 100,000; `null`: only on archive). */
  snapshotEvery?: number | null;
  /** Snapshot files kept per group (default 2). */
  snapshotsKept?: number;
  /** The authority's secret key seed (hex). Default: `authority.key`, generated on first open. */
  authorityKey?: Hex;
  /**
   * Default `false`: take the directory's writer lock (the owner record `LOCK.pid`, and under
   * Deno the `flock` on `LOCK`; docs/format.md), refusing with `STORAGE` a directory another
   * writer holds. `true`: no lock, nothing written, trimmed, renamed or removed; logs are read
   * to their last complete record; commands are refused with `STORAGE`.
   */
  readOnly?: boolean;
  /**
   * The operator's Organization policy file (`mwp.org-policy.v1`), as its JSON text or parsed
   * object (default none: nothing is sealed). A group of an org it names is sealed when
   * archived (SPEC §6a): `audit.mwpa` in its directory, the stored events and the final
   * snapshot encrypted to the org's recipients, with a manifest signed by the authority; if the
   * policy says `remove_plain`, the plain history is then removed (the final snapshot stays,
   * and reads of events before it are `CURSOR_TOO_OLD`). Errors: `MALFORMED` at open.
   */
  orgPolicy?: string | OrgPolicies | null;
}

/** One Organization's archival policy (SPEC §6a). */
export interface OrgPolicy {
  /** The Organization's age X25519 public keys (`age1…`). */
  recipients: string[];
  /** Days a sealed artifact is kept before `mwp audit expire` may delete it. */
  retain_days: number;
  /** Whether the plain history is removed once the sealed artifact is durable. */
  remove_plain: boolean;
}

/** The Organization policy file (`--org-policy`). */
export interface OrgPolicies {
  schema: "mwp.org-policy.v1";
  orgs: Record<Id, OrgPolicy>;
}

/** The manifest of a sealed audit log, signed by the authority (in the clear in `audit.mwpa`). */
export interface AuditManifest {
  schema: "mwp.audit-manifest.v1";
  org: Id;
  group: Id;
  /** The final seq: the sealed log holds events `1..=seq`. */
  seq: number;
  /** Id of event `seq`. */
  id: Hex;
  /** SHA-256 of the final snapshot's stored bytes. */
  snapshot: Hex;
  state_hash: Hex;
  /** SHA-256 and length of the ciphertext. */
  ciphertext: Hex;
  ciphertext_len: number;
  recipients: string[];
  sealed_at: number;
  retain_until: number;
  remove_plain: boolean;
  /** The authority key that signed it. */
  authority: Hex;
  sig: Hex;
}

/** A sealed audit log, opened and verified (`openAudit`). */
export interface AuditLog {
  manifest: AuditManifest;
  /** Every event's stored bytes (canonical CBOR; redacted events as stored), seq 1 first. */
  events: Uint8Array[];
  /** The final snapshot's stored bytes. */
  snapshot: Uint8Array;
  /** The state hash the events reach (the final snapshot's). */
  stateHash: Hex;
}

/** What opening a data directory (and its groups) found and did. */
export interface FileStoreReport {
  /** Torn tails trimmed. */
  trimmed: { file: string; offset: number; bytes: number }[];
  /** Snapshots that did not verify and were passed over. */
  skippedSnapshots: { file: string; reason: string }[];
  /** Work a crash had interrupted and the open finished (erasures, final snapshots, seals, removals of sealed history). */
  repaired: string[];
  /** Group directories that held no complete group (an interrupted creation), removed. */
  removed: string[];
}

/** Node and Deno only: one group of a file store. */
export class FileGroup {
  readonly id: Id;
  readonly dir: string;
  /** Seq of the last durable event. */
  readonly seq: number;
  readonly head: Hex;
  /** Decides commands in order; one write and one `datasync` for all accepted events. */
  submit(commands: Command | Uint8Array | (Command | Uint8Array)[], nowMs?: number): Promise<BatchResult[]>;
  /** Durable events after `after` (a page of at most `limit` events and about 8 MiB). */
  events(after?: number, limit?: number): Promise<Event[]>;
  eventFrames(after?: number, limit?: number): Promise<Uint8Array>;
  stateHash(): Hex;
  state(): GroupState | null;
  stateCbor(): Uint8Array | undefined;
  /** The original receipt of (actor, action) once its event is durable. */
  receipt(actor: Id, action: Id): Receipt | undefined;
  frontier(nowMs?: number): Id[];
  nextDeadline(): number | undefined;
  /** Writes a signed snapshot of the durable state now; resolves to its seq. */
  snapshotNow(): Promise<number>;
  /** Sends the authority's `tick` (expires due leases); `undefined` if none is due or archived. */
  tick(nowMs?: number): Promise<Decision | undefined>;
  /** The checked manifest of the group's sealed audit log (`audit.mwpa`), or `undefined`. */
  auditManifest(): Promise<AuditManifest | undefined>;
  /** Whether the plain history was removed after sealing (events before the final snapshot are `CURSOR_TOO_OLD`). */
  readonly historyRemoved: boolean;
}

/** Node and Deno only: a data directory in the native file store's format (docs/format.md). */
export class FileStore {
  readonly root: string;
  /** The authority's public key: an `open_group` must name it as `authority_key`. */
  readonly authorityKey: Hex;
  readonly options: Required<Omit<FileStoreOptions, "authorityKey">>;
  readonly report: FileStoreReport;
  /** IDs of the groups in the directory, sorted. */
  groups(): Promise<Id[]>;
  /** Opens (replays) a group; `undefined` if there is none. Throws `LOG_CORRUPT` on damage. */
  openGroup(group: Id): Promise<FileGroup | undefined>;
  /** Decides commands (of any groups) in order; resolves once the accepted events are durable. */
  submit(commands: Command | Uint8Array | (Command | Uint8Array)[], nowMs?: number): Promise<BatchResult[]>;
  events(group: Id, after?: number, limit?: number): Promise<Event[]>;
  eventFrames(group: Id, after?: number, limit?: number): Promise<Uint8Array>;
  receipt(group: Id, actor: Id, action: Id): Promise<Receipt | undefined>;
  stateHash(group: Id): Promise<Hex>;
  state(group: Id): Promise<GroupState | null>;
  tick(group: Id, nowMs?: number): Promise<Decision | undefined>;
  /** The checked manifest of a group's sealed audit log, or `undefined`. */
  auditManifest(group: Id): Promise<AuditManifest | undefined>;
  /** Waits for pending writes and closes every file. */
  close(): Promise<void>;
}

/** Node and Deno only: opens (creating if needed) a data directory. Errors: `StoreError`. */
export function openFileStore(dir: string, options?: FileStoreOptions): Promise<FileStore>;
/** CRC32C (Castagnoli) of bytes, continuing from `crc` (default 0). */
export function crc32c(bytes: Uint8Array, crc?: number): number;
/** The directory name of a group (docs/format.md): the ID, or `~` + base32. */
export function groupDirName(group: Id): string;
/** The group a directory name stands for, or `null`. */
export function groupFromDirName(name: string): Id | null;
/**
 * Node and Deno only (`src/file-store.js`): a new Organization key pair for an `orgPolicy`:
 * the identity file's text (`AGE-SECRET-KEY-1…`) and its recipient (`age1…`).
 */
export function generateAuditIdentity(): { identity: string; recipient: string };
/**
 * Node and Deno only (`src/file-store.js`): opens a sealed artifact with an identity file's
 * text, checking the manifest (under `trustedKey` when given), the ciphertext, the chain and
 * the final snapshot. Errors: `StoreError` `AUDIT_INVALID` with `details.check`
 * (`identity` when no identity given opens it, `layout`, `signature`, `ciphertext`, …).
 */
export function openAudit(artifact: Uint8Array, identity: string, trustedKey?: Hex): AuditLog;
/** Node and Deno only (`src/file-store.js`): the checked manifest of a sealed artifact; no key needed. */
export function auditManifest(artifact: Uint8Array, trustedKey?: Hex): AuditManifest;
