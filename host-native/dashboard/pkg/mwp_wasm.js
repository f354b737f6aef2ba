/* @ts-self-types="./mwp_wasm.d.ts" */

/**
 * One agent (actor, Group): its replica, work queue, leases, outbox and effect journal.
 */
export class Agent {
    static __wrap(ptr) {
        const obj = Object.create(Agent.prototype);
        obj.__wbg_ptr = ptr;
        AgentFinalization.register(obj, obj.__wbg_ptr, obj);
        return obj;
    }
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        AgentFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_agent_free(ptr, 0);
    }
    /**
     * Charges cost to running work; returns the action ID.
     * @param {number} now_ms
     * @param {string} work
     * @param {number} cost
     * @param {any} data
     * @returns {string}
     */
    charge(now_ms, work, cost, data) {
        let deferred5_0;
        let deferred5_1;
        try {
            const val2 = +now_ms;
            const val3 = +cost;
            const ptr0 = passStringToWasm0(work, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            const len0 = WASM_VECTOR_LEN;
            const ret = wasm.agent_charge(this.__wbg_ptr, val2, ptr0, len0, val3, data);
            var ptr4 = ret[0];
            var len4 = ret[1];
            if (ret[3]) {
                ptr4 = 0; len4 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred5_0 = ptr4;
            deferred5_1 = len4;
            return getStringFromWasm0(ptr4, len4);
        } finally {
            wasm.__wbindgen_free(deferred5_0, deferred5_1, 1);
        }
    }
    /**
     * Checkpoints running work (the lease is released); returns the action ID.
     * @param {number} now_ms
     * @param {string} work
     * @param {any} data
     * @returns {string}
     */
    checkpoint(now_ms, work, data) {
        let deferred4_0;
        let deferred4_1;
        try {
            const val2 = +now_ms;
            const ptr0 = passStringToWasm0(work, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            const len0 = WASM_VECTOR_LEN;
            const ret = wasm.agent_checkpoint(this.__wbg_ptr, val2, ptr0, len0, data);
            var ptr3 = ret[0];
            var len3 = ret[1];
            if (ret[3]) {
                ptr3 = 0; len3 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred4_0 = ptr3;
            deferred4_1 = len3;
            return getStringFromWasm0(ptr3, len3);
        } finally {
            wasm.__wbindgen_free(deferred4_0, deferred4_1, 1);
        }
    }
    /**
     * The replica's cursor (highest contiguous seq applied).
     * @returns {number}
     */
    get cursor() {
        const ret = wasm.agent_cursor(this.__wbg_ptr);
        return ret;
    }
    /**
     * The rule's answer for a pending trigger (a `plan` notice): the `create_work` bodies
     * of the items to create, or `[]` for the empty disposition. Returns the action ID
     * (`expand-<trigger>`).
     * @param {number} now_ms
     * @param {number} trigger
     * @param {any} work
     * @returns {string}
     */
    dispose(now_ms, trigger, work) {
        let deferred2_0;
        let deferred2_1;
        try {
            const ret = wasm.agent_dispose(this.__wbg_ptr, now_ms, trigger, work);
            var ptr1 = ret[0];
            var len1 = ret[1];
            if (ret[3]) {
                ptr1 = 0; len1 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred2_0 = ptr1;
            deferred2_1 = len1;
            return getStringFromWasm0(ptr1, len1);
        } finally {
            wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
        }
    }
    /**
     * The highest cursor whose write set is committed (what an ACK carries).
     * @returns {number}
     */
    get durableCursor() {
        const ret = wasm.agent_durableCursor(this.__wbg_ptr);
        return ret;
    }
    /**
     * The effect journal, by key.
     * @returns {any}
     */
    effects() {
        const ret = wasm.agent_effects(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Reports a failure of held work; returns the action ID.
     * @param {number} now_ms
     * @param {string} work
     * @param {any} error
     * @param {boolean} retryable
     * @returns {string}
     */
    fail(now_ms, work, error, retryable) {
        let deferred5_0;
        let deferred5_1;
        try {
            const val2 = +now_ms;
            const val3 = +retryable;
            const ptr0 = passStringToWasm0(work, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            const len0 = WASM_VECTOR_LEN;
            const ret = wasm.agent_fail(this.__wbg_ptr, val2, ptr0, len0, error, val3);
            var ptr4 = ret[0];
            var len4 = ret[1];
            if (ret[3]) {
                ptr4 = 0; len4 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred5_0 = ptr4;
            deferred5_1 = len4;
            return getStringFromWasm0(ptr4, len4);
        } finally {
            wasm.__wbindgen_free(deferred5_0, deferred5_1, 1);
        }
    }
    /**
     * IDs of the work items a worker may claim at `nowMs`.
     * @param {number} now_ms
     * @returns {string[]}
     */
    frontier(now_ms) {
        const ret = wasm.agent_frontier(this.__wbg_ptr, now_ms);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        var v1 = getArrayJsValueFromWasm0(ret[0], ret[1]);
        wasm.__wbindgen_free(ret[0], ret[1] * 4, 4);
        return v1;
    }
    /**
     * The write set `serial` (and every one before it) is durable.
     * @param {number} now_ms
     * @param {number} serial
     */
    handleCommitted(now_ms, serial) {
        const ret = wasm.agent_handleCommitted(this.__wbg_ptr, now_ms, serial);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * The link to the authority went up or down.
     * @param {number} now_ms
     * @param {boolean} up
     */
    handleConnectivity(now_ms, up) {
        const ret = wasm.agent_handleConnectivity(this.__wbg_ptr, now_ms, up);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * A dispatched effect happened: its outcome and the target's receipt (opaque JSON).
     * @param {number} now_ms
     * @param {string} key
     * @param {any} outcome
     * @param {any} receipt
     */
    handleEffectOutcome(now_ms, key, outcome, receipt) {
        const val2 = +now_ms;
        const ptr0 = passStringToWasm0(key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.agent_handleEffectOutcome(this.__wbg_ptr, val2, ptr0, len0, outcome, receipt);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * Delivers events: a frame batch of canonical CBOR events (as `mwp serve` and
     * `frameBatch` give them). Events that do not verify become `corrupt` notices.
     * @param {number} now_ms
     * @param {Uint8Array | number[]} batch
     */
    handleEvents(now_ms, batch) {
        const val2 = +now_ms;
        const ptr0 = passArray8ToWasm0(batch, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.agent_handleEvents(this.__wbg_ptr, val2, ptr0, len0);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * A failed `fetch_events` (a `CURSOR_TOO_OLD` answer leads to a `fetch_snapshot`).
     * @param {number} now_ms
     * @param {any} error
     */
    handleFetchError(now_ms, error) {
        const ret = wasm.agent_handleFetchError(this.__wbg_ptr, now_ms, error);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * The answer to a `lookup_receipt`: the receipt, or `null` when there is none.
     * @param {number} now_ms
     * @param {string} action
     * @param {any} receipt
     */
    handleLookup(now_ms, action, receipt) {
        const val2 = +now_ms;
        const ptr0 = passStringToWasm0(action, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.agent_handleLookup(this.__wbg_ptr, val2, ptr0, len0, receipt);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * The authority's receipt for a command this agent sent.
     * @param {number} now_ms
     * @param {string} action
     * @param {any} receipt
     */
    handleReceipt(now_ms, action, receipt) {
        const val2 = +now_ms;
        const ptr0 = passStringToWasm0(action, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.agent_handleReceipt(this.__wbg_ptr, val2, ptr0, len0, receipt);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * The authority's rejection of a command this agent sent (`{code, message, …}`).
     * @param {number} now_ms
     * @param {string} action
     * @param {any} error
     */
    handleRejection(now_ms, action, error) {
        const val2 = +now_ms;
        const ptr0 = passStringToWasm0(action, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.agent_handleRejection(this.__wbg_ptr, val2, ptr0, len0, error);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * The bytes of a fetched snapshot; it is verified against the authority key.
     * @param {number} now_ms
     * @param {Uint8Array | number[]} bytes
     */
    handleSnapshot(now_ms, bytes) {
        const val2 = +now_ms;
        const ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.agent_handleSnapshot(this.__wbg_ptr, val2, ptr0, len0);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * Time passed (call at `pollTimeout()` or later).
     * @param {number} now_ms
     */
    handleTimeout(now_ms) {
        const ret = wasm.agent_handleTimeout(this.__wbg_ptr, now_ms);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * Records the intent of an effect (`mode`: `read_only`, `idempotent` or `undeclared`);
     * it is dispatched once the intent is accepted. Returns the effect's key (hex).
     * @param {number} now_ms
     * @param {string} work
     * @param {string} op
     * @param {string} mode
     * @param {boolean} irreversible
     * @param {any} target
     * @returns {string}
     */
    intendEffect(now_ms, work, op, mode, irreversible, target) {
        let deferred7_0;
        let deferred7_1;
        try {
            const val4 = +now_ms;
            const val5 = +irreversible;
            let ptr0, len0, ptr1, len1, ptr2, len2;
            try {
                ptr0 = passStringToWasm0(work, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                len0 = WASM_VECTOR_LEN;
                ptr1 = passStringToWasm0(op, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                len1 = WASM_VECTOR_LEN;
                ptr2 = passStringToWasm0(mode, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                len2 = WASM_VECTOR_LEN;
            } catch (e) {
                if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
                if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
                if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
                throw e;
            }
            const ret = wasm.agent_intendEffect(this.__wbg_ptr, val4, ptr0, len0, ptr1, len1, ptr2, len2, val5, target);
            var ptr6 = ret[0];
            var len6 = ret[1];
            if (ret[3]) {
                ptr6 = 0; len6 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred7_0 = ptr6;
            deferred7_1 = len6;
            return getStringFromWasm0(ptr6, len6);
        } finally {
            wasm.__wbindgen_free(deferred7_0, deferred7_1, 1);
        }
    }
    /**
     * Leases held, by work item: `{work: {id, epoch, expires_at, …}}`.
     * @returns {any}
     */
    leases() {
        const ret = wasm.agent_leases(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * A new agent. `config`: `{org, group, actor, authorityKey}` plus optional `capacity`,
     * `leaseMs`, `startWithinMs`, `renewMarginMs`, `graceMs`, `resendMs`, `syncMs`,
     * `effectTimeoutMs`. `secretKey`: the actor's key seed (64 hex digits).
     * @param {any} config
     * @param {string} secret_key
     */
    constructor(config, secret_key) {
        const ptr0 = passStringToWasm0(secret_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.agent_new(config, ptr0, len0);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        this.__wbg_ptr = ret[0];
        AgentFinalization.register(this, this.__wbg_ptr, this);
        return this;
    }
    /**
     * Whether the link is up.
     * @returns {boolean}
     */
    get online() {
        const ret = wasm.agent_online(this.__wbg_ptr);
        return ret !== 0;
    }
    /**
     * Commands waiting for their receipt, by base action ID.
     * @returns {any}
     */
    outbox() {
        const ret = wasm.agent_outbox(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Triggers still lacking this planner's disposition.
     * @returns {Float64Array}
     */
    pendingDispositions() {
        const ret = wasm.agent_pendingDispositions(this.__wbg_ptr);
        var v1 = getArrayF64FromWasm0(ret[0], ret[1]).slice();
        wasm.__wbindgen_free(ret[0], ret[1] * 8, 8);
        return v1;
    }
    /**
     * The next effect to perform, `{key, work, op, mode, irreversible, target, attempt}`, or
     * `undefined`. Pass `key` to the target as its idempotency key.
     * @returns {any}
     */
    pollDispatch() {
        const ret = wasm.agent_pollDispatch(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * The next notice, `{type, …}`, or `undefined`. Types: `run`, `released`, `lease_lost`,
     * `suspended`, `uncertain`, `evidence`, `rejected`, `dropped`, `corrupt`.
     * @returns {any}
     */
    pollNotice() {
        const ret = wasm.agent_pollNotice(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * The latest time to call `handleTimeout`, or `undefined`.
     * @returns {number | undefined}
     */
    pollTimeout() {
        const ret = wasm.agent_pollTimeout(this.__wbg_ptr);
        return ret[0] === 0 ? undefined : ret[1];
    }
    /**
     * The next request for the authority, or `undefined`: `{type: "command", action,
     * command, cbor}` (the signed command in its JSON form and as canonical CBOR),
     * `{type: "fetch_events", after}`, `{type: "lookup_receipt", action}`,
     * `{type: "fetch_snapshot", snapshot: {seq, hash, location}}` or `{type: "ack", cursor}`.
     * @returns {any}
     */
    pollTransmit() {
        const ret = wasm.agent_pollTransmit(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * The next write set to commit, `{serial, cbor}`, or `undefined`.
     * @returns {any}
     */
    pollWriteSet() {
        const ret = wasm.agent_pollWriteSet(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Starts a new session (revoking the old one's leases); returns the action ID.
     * @param {number} now_ms
     * @returns {string}
     */
    replaceSession(now_ms) {
        let deferred2_0;
        let deferred2_1;
        try {
            const ret = wasm.agent_replaceSession(this.__wbg_ptr, now_ms);
            var ptr1 = ret[0];
            var len1 = ret[1];
            if (ret[3]) {
                ptr1 = 0; len1 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred2_0 = ptr1;
            deferred2_1 = len1;
            return getStringFromWasm0(ptr1, len1);
        } finally {
            wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
        }
    }
    /**
     * Settles an uncertain effect after finding out whether it happened.
     * @param {number} now_ms
     * @param {string} key
     * @param {boolean} happened
     * @param {any} receipt
     */
    resolveEffect(now_ms, key, happened, receipt) {
        const val2 = +now_ms;
        const val3 = +happened;
        const ptr0 = passStringToWasm0(key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.agent_resolveEffect(this.__wbg_ptr, val2, ptr0, len0, val3, receipt);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * Reopens an agent from what its host committed.
     * @param {any} config
     * @param {string} secret_key
     * @param {AgentImage} image
     * @returns {Agent}
     */
    static restore(config, secret_key, image) {
        _assertClass(image, AgentImage);
        const ptr0 = passStringToWasm0(secret_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.agent_restore(config, ptr0, len0, image.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return Agent.__wrap(ret[0]);
    }
    /**
     * The session number.
     * @returns {number}
     */
    get session() {
        const ret = wasm.agent_session(this.__wbg_ptr);
        return ret;
    }
    /**
     * Hash (hex) of the replica's canonical state.
     * @returns {string}
     */
    stateHash() {
        let deferred2_0;
        let deferred2_1;
        try {
            const ret = wasm.agent_stateHash(this.__wbg_ptr);
            var ptr1 = ret[0];
            var len1 = ret[1];
            if (ret[3]) {
                ptr1 = 0; len1 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred2_0 = ptr1;
            deferred2_1 = len1;
            return getStringFromWasm0(ptr1, len1);
        } finally {
            wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
        }
    }
    /**
     * The replica's state as a JS object (`null` before genesis).
     * @returns {any}
     */
    state() {
        const ret = wasm.agent_state(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Submits the result of held work; returns the command's action ID.
     * @param {number} now_ms
     * @param {string} work
     * @param {any} result
     * @returns {string}
     */
    submit(now_ms, work, result) {
        let deferred4_0;
        let deferred4_1;
        try {
            const val2 = +now_ms;
            const ptr0 = passStringToWasm0(work, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            const len0 = WASM_VECTOR_LEN;
            const ret = wasm.agent_submit(this.__wbg_ptr, val2, ptr0, len0, result);
            var ptr3 = ret[0];
            var len3 = ret[1];
            if (ret[3]) {
                ptr3 = 0; len3 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred4_0 = ptr3;
            deferred4_1 = len3;
            return getStringFromWasm0(ptr3, len3);
        } finally {
            wasm.__wbindgen_free(deferred4_0, deferred4_1, 1);
        }
    }
}
if (Symbol.dispose) Agent.prototype[Symbol.dispose] = Agent.prototype.free;

/**
 * What an agent host keeps: every committed write set folded in. Restarting from it is the
 * ordinary path (`Agent.restore`).
 */
export class AgentImage {
    static __wrap(ptr) {
        const obj = Object.create(AgentImage.prototype);
        obj.__wbg_ptr = ptr;
        AgentImageFinalization.register(obj, obj.__wbg_ptr, obj);
        return obj;
    }
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        AgentImageFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_agentimage_free(ptr, 0);
    }
    /**
     * Folds in one write set (its canonical CBOR, as `pollWriteSet` gave it). Serials must
     * follow each other: `STORAGE` otherwise, and nothing changes.
     * @param {Uint8Array | number[]} write_set
     */
    commit(write_set) {
        const ptr0 = passArray8ToWasm0(write_set, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.agentimage_commit(this.__wbg_ptr, ptr0, len0);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * The durable cursor the image holds.
     * @returns {number}
     */
    get cursor() {
        const ret = wasm.agentimage_cursor(this.__wbg_ptr);
        return ret;
    }
    /**
     * An image saved with `toCbor()`.
     * @param {Uint8Array | number[]} bytes
     * @returns {AgentImage}
     */
    static fromCbor(bytes) {
        const ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.agentimage_fromCbor(ptr0, len0);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return AgentImage.__wrap(ret[0]);
    }
    /**
     * An empty image (a new agent).
     */
    constructor() {
        const ret = wasm.agentimage_new();
        this.__wbg_ptr = ret;
        AgentImageFinalization.register(this, this.__wbg_ptr, this);
        return this;
    }
    /**
     * Serial of the last committed write set (0 for a new agent).
     * @returns {number}
     */
    get serial() {
        const ret = wasm.agentimage_serial(this.__wbg_ptr);
        return ret;
    }
    /**
     * Canonical CBOR of the image (to store it whole, e.g. to compact a write-set log).
     * @returns {Uint8Array}
     */
    toCbor() {
        const ret = wasm.agentimage_toCbor(this.__wbg_ptr);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        var v1 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
        wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        return v1;
    }
}
if (Symbol.dispose) AgentImage.prototype[Symbol.dispose] = AgentImage.prototype.free;

/**
 * Streams the sealed artifact of an archived Group (`mwp_audit::Sealer`): `MWPAUDT1`, the
 * age ciphertext of every stored event in seq order and the final snapshot, then the signed
 * manifest. Memory holds only what was produced since the last call.
 */
export class AuditSealer {
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        AuditSealerFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_auditsealer_free(ptr, 0);
    }
    /**
     * Appends the stored bytes of the next event (seq 1 first; a redacted event as stored)
     * and returns the artifact bytes produced since the last call (often none: the
     * encryption works in 64 KiB chunks).
     * @param {Uint8Array | number[]} bytes
     * @returns {Uint8Array}
     */
    event(bytes) {
        const ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.auditsealer_event(this.__wbg_ptr, ptr0, len0);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * How many events were appended.
     * @returns {number}
     */
    get events() {
        const ret = wasm.auditsealer_events(this.__wbg_ptr);
        return ret;
    }
    /**
     * Closes the log with the final snapshot's stored bytes (its canonical CBOR, which must
     * verify under the authority key `secretKey` (hex seed) and be at the seq of the last
     * event appended) and signs the manifest at `sealedAtMs`. Returns `{bytes, manifest}`:
     * the rest of the artifact (the manifest trailer included) and the manifest (JSON form).
     * `SNAPSHOT_INVALID`, or `AUDIT_INVALID` (check `chain`) when the events appended are
     * not as many as the snapshot's seq. The sealer is finished afterwards, whatever the
     * outcome.
     * @param {Uint8Array | number[]} snapshot_bytes
     * @param {number} sealed_at_ms
     * @param {string} secret_key
     * @returns {any}
     */
    finish(snapshot_bytes, sealed_at_ms, secret_key) {
        const val3 = +sealed_at_ms;
        let ptr0, len0, ptr1, len1;
        try {
            ptr0 = passArray8ToWasm0(snapshot_bytes, wasm.__wbindgen_malloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0(secret_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
        } catch (e) {
            if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
            if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
            throw e;
        }
        const ret = wasm.auditsealer_finish(this.__wbg_ptr, ptr0, len0, val3, ptr1, len1);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Starts an artifact encrypted to the recipients of `orgPolicy` (one Organization's
     * policy: `{recipients, retain_days, remove_plain}`, as JSON text or an object, e.g. the
     * `seal` of a `StoreGroup.submit` step). `MALFORMED` for a policy or recipient that does
     * not parse.
     * @param {any} org_policy
     */
    constructor(org_policy) {
        const ret = wasm.auditsealer_new(org_policy);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        this.__wbg_ptr = ret[0];
        AuditSealerFinalization.register(this, this.__wbg_ptr, this);
        return this;
    }
    /**
     * The artifact bytes produced so far and not yet returned (the first call's start with
     * `MWPAUDT1`); the host appends them to the artifact file in order.
     * @returns {Uint8Array}
     */
    take() {
        const ret = wasm.auditsealer_take(this.__wbg_ptr);
        return ret;
    }
}
if (Symbol.dispose) AuditSealer.prototype[Symbol.dispose] = AuditSealer.prototype.free;

/**
 * One Group's authority, in memory.
 */
export class Authority {
    static __wrap(ptr) {
        const obj = Object.create(Authority.prototype);
        obj.__wbg_ptr = ptr;
        AuthorityFinalization.register(obj, obj.__wbg_ptr, obj);
        return obj;
    }
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        AuthorityFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_authority_free(ptr, 0);
    }
    /**
     * Appends and applies an accepted event (CBOR bytes or JSON form). Throws
     * `LOG_CORRUPT` if it does not verify or does not follow the last event.
     * @param {any} event
     */
    append(event) {
        const ret = wasm.authority_append(this.__wbg_ptr, event);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * Decides a command without appending anything: for hosts that make the event durable
     * first and then call `append`.
     * @param {any} command
     * @param {number} now_ms
     * @returns {any}
     */
    decide(command, now_ms) {
        const ret = wasm.authority_decide(this.__wbg_ptr, command, now_ms);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Stored events after seq `after`, at most `limit`, as a frame batch.
     * @param {number} after
     * @param {number | null} [limit]
     * @returns {Uint8Array}
     */
    events(after, limit) {
        const ret = wasm.authority_events(this.__wbg_ptr, after, !isLikeNone(limit), isLikeNone(limit) ? 0 : limit);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        var v1 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
        wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        return v1;
    }
    /**
     * Rebuilds an authority from a frame batch of stored events (seq 1 first), verifying
     * every event and the chain. `secretKey` as for the constructor.
     * @param {Uint8Array | number[]} frames_batch
     * @param {string | null} [secret_key]
     * @returns {Authority}
     */
    static fromLog(frames_batch, secret_key) {
        let ptr0, len0, ptr1, len1;
        try {
            ptr0 = passArray8ToWasm0(frames_batch, wasm.__wbindgen_malloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = isLikeNone(secret_key) ? 0 : passStringToWasm0(secret_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
        } catch (e) {
            if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
            if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
            throw e;
        }
        const ret = wasm.authority_fromLog(ptr0, len0, ptr1, len1);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return Authority.__wrap(ret[0]);
    }
    /**
     * IDs of the work items a worker may claim at `nowMs`.
     * @param {number} now_ms
     * @returns {string[]}
     */
    frontier(now_ms) {
        const ret = wasm.authority_frontier(this.__wbg_ptr, now_ms);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        var v1 = getArrayJsValueFromWasm0(ret[0], ret[1]);
        wasm.__wbindgen_free(ret[0], ret[1] * 4, 4);
        return v1;
    }
    /**
     * Id (hex) of the last event (all zeros before genesis).
     * @returns {string}
     */
    get head() {
        let deferred1_0;
        let deferred1_1;
        try {
            const ret = wasm.authority_head(this.__wbg_ptr);
            deferred1_0 = ret[0];
            deferred1_1 = ret[1];
            return getStringFromWasm0(ret[0], ret[1]);
        } finally {
            wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
        }
    }
    /**
     * The latest signed snapshot this authority kept at the core's cadence (after every
     * 100,000 events and after `group_archived`; only with a key), or `undefined`.
     * @returns {Uint8Array | undefined}
     */
    latestSnapshot() {
        const ret = wasm.authority_latestSnapshot(this.__wbg_ptr);
        let v1;
        if (ret[0] !== 0) {
            v1 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
            wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        }
        return v1;
    }
    /**
     * An authority with no group yet: the first accepted command must be `open_group`.
     * With `secretKey` (a hex seed) it signs its own ticks (`tick`) and snapshots, keeps a
     * signed snapshot at the core's cadence, and accepts only an `open_group` naming that
     * key's public half; without one it holds no key: it accepts an `open_group` naming any
     * `authority_key`, sends no ticks, and signs snapshots with the key `snapshot` is given.
     * `snapshotEvery` is the cadence of the kept snapshot (default 100,000 events).
     * @param {string | null} [secret_key]
     * @param {number | null} [snapshot_every]
     */
    constructor(secret_key, snapshot_every) {
        const val2 = +(isLikeNone(snapshot_every) ? 0 : snapshot_every);
        var ptr0 = isLikeNone(secret_key) ? 0 : passStringToWasm0(secret_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        var len0 = WASM_VECTOR_LEN;
        const ret = wasm.authority_new(ptr0, len0, !isLikeNone(snapshot_every), val2);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        this.__wbg_ptr = ret[0];
        AuthorityFinalization.register(this, this.__wbg_ptr, this);
        return this;
    }
    /**
     * The earliest time a `tick` would expire a lease, or `undefined` (also once archived):
     * the driver's next wake.
     * @returns {number | undefined}
     */
    nextDeadline() {
        const ret = wasm.authority_nextDeadline(this.__wbg_ptr);
        return ret[0] === 0 ? undefined : ret[1];
    }
    /**
     * The original receipt of (actor, action), or `undefined`.
     * @param {string} actor
     * @param {string} action
     * @returns {any}
     */
    receipt(actor, action) {
        let ptr0, len0, ptr1, len1;
        try {
            ptr0 = passStringToWasm0(actor, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0(action, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
        } catch (e) {
            if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
            if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
            throw e;
        }
        const ret = wasm.authority_receipt(this.__wbg_ptr, ptr0, len0, ptr1, len1);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Seq of the last event (0 before genesis).
     * @returns {number}
     */
    get seq() {
        const ret = wasm.authority_seq(this.__wbg_ptr);
        return ret;
    }
    /**
     * A signed snapshot of the current state (canonical CBOR), signed with `secretKey` (a
     * hex seed) or, without it, with this authority's own key.
     * @param {string | null} [secret_key]
     * @returns {Uint8Array}
     */
    snapshot(secret_key) {
        var ptr0 = isLikeNone(secret_key) ? 0 : passStringToWasm0(secret_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        var len0 = WASM_VECTOR_LEN;
        const ret = wasm.authority_snapshot(this.__wbg_ptr, ptr0, len0);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        var v2 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
        wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        return v2;
    }
    /**
     * Canonical CBOR of the state (`undefined` before genesis).
     * @returns {Uint8Array | undefined}
     */
    stateCbor() {
        const ret = wasm.authority_stateCbor(this.__wbg_ptr);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        let v1;
        if (ret[0] !== 0) {
            v1 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
            wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        }
        return v1;
    }
    /**
     * Hash (hex) of the canonical state.
     * @returns {string}
     */
    stateHash() {
        let deferred2_0;
        let deferred2_1;
        try {
            const ret = wasm.authority_stateHash(this.__wbg_ptr);
            var ptr1 = ret[0];
            var len1 = ret[1];
            if (ret[3]) {
                ptr1 = 0; len1 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred2_0 = ptr1;
            deferred2_1 = len1;
            return getStringFromWasm0(ptr1, len1);
        } finally {
            wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
        }
    }
    /**
     * The state as a JS object (`null` before genesis).
     * @returns {any}
     */
    state() {
        const ret = wasm.authority_state(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Decides many commands in order, each seeing the ones before. Rejections are values:
     * returns `{results, events}` where `results[i]` is the decision object of command `i`
     * or `{outcome: "rejected", error}`, and `events` is a frame batch of the new events.
     * @param {any[]} commands
     * @param {number} now_ms
     * @returns {any}
     */
    submitBatch(commands, now_ms) {
        const val2 = +now_ms;
        const ptr0 = passArrayJsValueToWasm0(commands, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.authority_submitBatch(this.__wbg_ptr, ptr0, len0, val2);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Decides a command (JSON-form object or CBOR bytes) at `nowMs` and, if accepted,
     * appends and applies its event. Returns `{outcome: "accepted"|"duplicate", receipt,
     * event?, eventCbor?}`; a rejection throws an `AcceptError` with the spec's code.
     * @param {any} command
     * @param {number} now_ms
     * @returns {any}
     */
    submit(command, now_ms) {
        const ret = wasm.authority_submit(this.__wbg_ptr, command, now_ms);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Sends the authority's own `tick` if a lease deadline has passed at `nowMs` (the core
     * names and signs it): its decision object, or `undefined` when none is due or this
     * authority holds no key.
     * @param {number} now_ms
     * @returns {any}
     */
    tick(now_ms) {
        const ret = wasm.authority_tick(this.__wbg_ptr, now_ms);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
}
if (Symbol.dispose) Authority.prototype[Symbol.dispose] = Authority.prototype.free;

/**
 * An agent's committed write sets in IndexedDB.
 */
export class IdbAgentStore {
    static __wrap(ptr) {
        const obj = Object.create(IdbAgentStore.prototype);
        obj.__wbg_ptr = ptr;
        IdbAgentStoreFinalization.register(obj, obj.__wbg_ptr, obj);
        return obj;
    }
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        IdbAgentStoreFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_idbagentstore_free(ptr, 0);
    }
    /**
     * Closes the connection (after pending transactions finish).
     */
    close() {
        wasm.idbagentstore_close(this.__wbg_ptr);
    }
    /**
     * Test hook: like `commit`, but aborts the transaction after issuing the write.
     * @param {number} serial
     * @param {Uint8Array | number[]} write_set
     * @returns {Promise<void>}
     */
    commitThenAbort(serial, write_set) {
        const val2 = +serial;
        const ptr0 = passArray8ToWasm0(write_set, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.idbagentstore_commitThenAbort(this.__wbg_ptr, val2, ptr0, len0);
        return ret;
    }
    /**
     * Commits one write set (`serial` and its canonical CBOR, as `pollWriteSet` gives
     * them) in one `readwrite` transaction with `durability: "strict"`; resolves once it
     * is durable.
     * @param {number} serial
     * @param {Uint8Array | number[]} write_set
     * @returns {Promise<void>}
     */
    commit(serial, write_set) {
        const val2 = +serial;
        const ptr0 = passArray8ToWasm0(write_set, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.idbagentstore_commit(this.__wbg_ptr, val2, ptr0, len0);
        return ret;
    }
    /**
     * Replaces every write set up to `image.serial` by the image, in one transaction.
     * @param {AgentImage} image
     * @returns {Promise<void>}
     */
    compact(image) {
        _assertClass(image, AgentImage);
        const ret = wasm.idbagentstore_compact(this.__wbg_ptr, image.__wbg_ptr);
        return ret;
    }
    /**
     * Everything committed, folded: the image to `Agent.restore` from.
     * @returns {Promise<AgentImage>}
     */
    load() {
        const ret = wasm.idbagentstore_load(this.__wbg_ptr);
        return ret;
    }
    /**
     * Opens (creating if needed) the database `name`.
     * @param {string} name
     * @returns {Promise<IdbAgentStore>}
     */
    static open(name) {
        const ptr0 = passStringToWasm0(name, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.idbagentstore_open(ptr0, len0);
        return ret;
    }
}
if (Symbol.dispose) IdbAgentStore.prototype[Symbol.dispose] = IdbAgentStore.prototype.free;

/**
 * An authority whose log lives in IndexedDB, over the core's authority driver. Each
 * `submit` call is one transition: one `readwrite` transaction for the whole batch. The
 * driver's snapshot cadence decides when the state is checkpointed. With a key, the driver
 * also signs each due snapshot once its batch is durable, and the latest is kept in memory
 * (`latestSnapshot`): IndexedDB persists the unsigned checkpoint, from which it is signed
 * again on request.
 */
export class IdbAuthority {
    static __wrap(ptr) {
        const obj = Object.create(IdbAuthority.prototype);
        obj.__wbg_ptr = ptr;
        IdbAuthorityFinalization.register(obj, obj.__wbg_ptr, obj);
        return obj;
    }
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        IdbAuthorityFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_idbauthority_free(ptr, 0);
    }
    /**
     * Closes the connection (after pending transactions finish).
     */
    close() {
        wasm.idbauthority_close(this.__wbg_ptr);
    }
    /**
     * Stored events after `after`, at most `limit`, as a frame batch.
     * @param {number} after
     * @param {number | null} [limit]
     * @returns {Promise<Uint8Array>}
     */
    events(after, limit) {
        const ret = wasm.idbauthority_events(this.__wbg_ptr, after, isLikeNone(limit) ? Number.MAX_SAFE_INTEGER : (limit) >>> 0);
        return ret;
    }
    /**
     * IDs of the work items a worker may claim at `nowMs`.
     * @param {number} now_ms
     * @returns {string[]}
     */
    frontier(now_ms) {
        const ret = wasm.idbauthority_frontier(this.__wbg_ptr, now_ms);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        var v1 = getArrayJsValueFromWasm0(ret[0], ret[1]);
        wasm.__wbindgen_free(ret[0], ret[1] * 4, 4);
        return v1;
    }
    /**
     * Id (hex) of the last event.
     * @returns {string}
     */
    get head() {
        let deferred1_0;
        let deferred1_1;
        try {
            const ret = wasm.idbauthority_head(this.__wbg_ptr);
            deferred1_0 = ret[0];
            deferred1_1 = ret[1];
            return getStringFromWasm0(ret[0], ret[1]);
        } finally {
            wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
        }
    }
    /**
     * The canonical CBOR of the latest signed snapshot the driver's cadence made due since
     * this store was opened (only with `secretKey`), or `undefined`.
     * @returns {Uint8Array | undefined}
     */
    latestSnapshot() {
        const ret = wasm.idbauthority_latestSnapshot(this.__wbg_ptr);
        let v1;
        if (ret[0] !== 0) {
            v1 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
            wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        }
        return v1;
    }
    /**
     * The earliest time a `tick` would expire a lease, or `undefined`.
     * @returns {number | undefined}
     */
    nextDeadline() {
        const ret = wasm.idbauthority_nextDeadline(this.__wbg_ptr);
        return ret[0] === 0 ? undefined : ret[1];
    }
    /**
     * Opens (creating if needed) the store `name` for `group` and rebuilds the state from
     * its last checkpoint and the events after it. `checkpointEvery` (default 1000) is the
     * driver's snapshot cadence: the state is checkpointed in the transaction of every
     * batch holding a seq that is a multiple of it, and of a `group_archived`. With
     * `secretKey` (hex seed) the authority signs its own ticks (`tick`) and accepts only an
     * `open_group` naming that key; without one it holds no key (any `authority_key`, no
     * ticks).
     * @param {string} name
     * @param {string} group
     * @param {number | null} [checkpoint_every]
     * @param {string | null} [secret_key]
     * @returns {Promise<IdbAuthority>}
     */
    static open(name, group, checkpoint_every, secret_key) {
        const val4 = +(isLikeNone(checkpoint_every) ? 0 : checkpoint_every);
        let ptr0, len0, ptr1, len1, ptr2, len2;
        try {
            ptr0 = passStringToWasm0(name, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
            ptr2 = isLikeNone(secret_key) ? 0 : passStringToWasm0(secret_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len2 = WASM_VECTOR_LEN;
        } catch (e) {
            if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
            if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
            if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
            throw e;
        }
        const ret = wasm.idbauthority_open(ptr0, len0, ptr1, len1, !isLikeNone(checkpoint_every), val4, ptr2, len2);
        return ret;
    }
    /**
     * The original receipt of (actor, action), or `undefined`.
     * @param {string} actor
     * @param {string} action
     * @returns {any}
     */
    receipt(actor, action) {
        let ptr0, len0, ptr1, len1;
        try {
            ptr0 = passStringToWasm0(actor, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0(action, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
        } catch (e) {
            if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
            if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
            throw e;
        }
        const ret = wasm.idbauthority_receipt(this.__wbg_ptr, ptr0, len0, ptr1, len1);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Seq of the last event (0 before genesis).
     * @returns {number}
     */
    get seq() {
        const ret = wasm.idbauthority_seq(this.__wbg_ptr);
        return ret;
    }
    /**
     * Canonical CBOR of the state (`undefined` before genesis).
     * @returns {Uint8Array | undefined}
     */
    stateCbor() {
        const ret = wasm.idbauthority_stateCbor(this.__wbg_ptr);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        let v1;
        if (ret[0] !== 0) {
            v1 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
            wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        }
        return v1;
    }
    /**
     * Hash (hex) of the canonical state.
     * @returns {string}
     */
    stateHash() {
        let deferred2_0;
        let deferred2_1;
        try {
            const ret = wasm.idbauthority_stateHash(this.__wbg_ptr);
            var ptr1 = ret[0];
            var len1 = ret[1];
            if (ret[3]) {
                ptr1 = 0; len1 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred2_0 = ptr1;
            deferred2_1 = len1;
            return getStringFromWasm0(ptr1, len1);
        } finally {
            wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
        }
    }
    /**
     * The state as a JS object (`null` before genesis).
     * @returns {any}
     */
    state() {
        const ret = wasm.idbauthority_state(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Test hook: like `submit`, but aborts the transaction after issuing every write.
     * @param {any[]} commands
     * @param {number} now_ms
     * @returns {Promise<any>}
     */
    submitThenAbort(commands, now_ms) {
        const val2 = +now_ms;
        const ptr0 = passArrayJsValueToWasm0(commands, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.idbauthority_submitThenAbort(this.__wbg_ptr, ptr0, len0, val2);
        return ret;
    }
    /**
     * Decides commands in order (each sees the ones before) and writes every accepted event
     * with its receipt in one transaction. Resolves, once that is durable, to one result per
     * command: `{outcome: "accepted"|"duplicate", receipt, event?, eventCbor?}` or
     * `{outcome: "rejected", error}`. A storage failure rejects the promise with `STORAGE`
     * and poisons the store.
     * @param {any[]} commands
     * @param {number} now_ms
     * @returns {Promise<any>}
     */
    submit(commands, now_ms) {
        const val2 = +now_ms;
        const ptr0 = passArrayJsValueToWasm0(commands, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.idbauthority_submit(this.__wbg_ptr, ptr0, len0, val2);
        return ret;
    }
    /**
     * Sends the authority's own `tick` if a lease deadline has passed at `nowMs` (the core
     * names and signs it) and writes it as `submit` does: its result, or `undefined` when
     * none is due or this authority holds no key.
     * @param {number} now_ms
     * @returns {Promise<any>}
     */
    tick(now_ms) {
        const ret = wasm.idbauthority_tick(this.__wbg_ptr, now_ms);
        return ret;
    }
}
if (Symbol.dispose) IdbAuthority.prototype[Symbol.dispose] = IdbAuthority.prototype.free;

/**
 * A replica whose projection lives in IndexedDB: applied events (a local copy of the log,
 * for reading back), the cursor, and state checkpoints. Early events wait in memory only;
 * they are delivered again after a reload.
 */
export class IdbReplica {
    static __wrap(ptr) {
        const obj = Object.create(IdbReplica.prototype);
        obj.__wbg_ptr = ptr;
        IdbReplicaFinalization.register(obj, obj.__wbg_ptr, obj);
        return obj;
    }
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        IdbReplicaFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_idbreplica_free(ptr, 0);
    }
    /**
     * Closes the connection (after pending transactions finish).
     */
    close() {
        wasm.idbreplica_close(this.__wbg_ptr);
    }
    /**
     * Highest contiguous seq applied and durable.
     * @returns {number}
     */
    get cursor() {
        const ret = wasm.idbreplica_cursor(this.__wbg_ptr);
        return ret;
    }
    /**
     * Locally stored events after `after`, at most `limit`, as a frame batch.
     * @param {number} after
     * @param {number | null} [limit]
     * @returns {Promise<Uint8Array>}
     */
    events(after, limit) {
        const ret = wasm.idbreplica_events(this.__wbg_ptr, after, isLikeNone(limit) ? Number.MAX_SAFE_INTEGER : (limit) >>> 0);
        return ret;
    }
    /**
     * IDs of the work items a worker may claim at `nowMs`.
     * @param {number} now_ms
     * @returns {string[]}
     */
    frontier(now_ms) {
        const ret = wasm.idbreplica_frontier(this.__wbg_ptr, now_ms);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        var v1 = getArrayJsValueFromWasm0(ret[0], ret[1]);
        wasm.__wbindgen_free(ret[0], ret[1] * 4, 4);
        return v1;
    }
    /**
     * The group.
     * @returns {string}
     */
    get group() {
        let deferred1_0;
        let deferred1_1;
        try {
            const ret = wasm.idbreplica_group(this.__wbg_ptr);
            deferred1_0 = ret[0];
            deferred1_1 = ret[1];
            return getStringFromWasm0(ret[0], ret[1]);
        } finally {
            wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
        }
    }
    /**
     * Id (hex) of the event at the cursor.
     * @returns {string}
     */
    get head() {
        let deferred1_0;
        let deferred1_1;
        try {
            const ret = wasm.idbreplica_head(this.__wbg_ptr);
            deferred1_0 = ret[0];
            deferred1_1 = ret[1];
            return getStringFromWasm0(ret[0], ret[1]);
        } finally {
            wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
        }
    }
    /**
     * Whether event `seq` is past the last verified head.
     * @param {number} seq
     * @returns {boolean}
     */
    isProvisional(seq) {
        const ret = wasm.idbreplica_isProvisional(this.__wbg_ptr, seq);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return ret[0] !== 0;
    }
    /**
     * Test hook: like `offerBatch`, but aborts the transaction after issuing every write.
     * @param {Uint8Array | number[]} batch
     * @returns {Promise<any>}
     */
    offerBatchThenAbort(batch) {
        const ptr0 = passArray8ToWasm0(batch, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.idbreplica_offerBatchThenAbort(this.__wbg_ptr, ptr0, len0);
        return ret;
    }
    /**
     * Offers a frame batch of delivered events; everything they apply is written in one
     * transaction (events, cursor, checkpoint when due). Resolves once durable to
     * `{applied, duplicate, buffered, rejected, cursor, errors}`.
     * @param {Uint8Array | number[]} batch
     * @returns {Promise<any>}
     */
    offerBatch(batch) {
        const ptr0 = passArray8ToWasm0(batch, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.idbreplica_offerBatch(this.__wbg_ptr, ptr0, len0);
        return ret;
    }
    /**
     * Offers a signed head under the pinned authority key (hex), as `Replica.offerHead`:
     * `{result, verifiedThrough}`, or `HEAD_INVALID` / `FORK`. What a head verifies is
     * kept in memory (a reopened store starts at 0 until a head verifies again).
     * @param {any} head
     * @param {string} authority_key
     * @returns {any}
     */
    offerHead(head, authority_key) {
        const ptr0 = passStringToWasm0(authority_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.idbreplica_offerHead(this.__wbg_ptr, head, ptr0, len0);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Opens (creating if needed) the store `name` for `group` and rebuilds the projection
     * from its last checkpoint and the events after it.
     * @param {string} name
     * @param {string} group
     * @param {number | null} [checkpoint_every]
     * @returns {Promise<IdbReplica>}
     */
    static open(name, group, checkpoint_every) {
        const val3 = +(isLikeNone(checkpoint_every) ? 0 : checkpoint_every);
        let ptr0, len0, ptr1, len1;
        try {
            ptr0 = passStringToWasm0(name, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
        } catch (e) {
            if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
            if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
            throw e;
        }
        const ret = wasm.idbreplica_open(ptr0, len0, ptr1, len1, !isLikeNone(checkpoint_every), val3);
        return ret;
    }
    /**
     * Restores from a signed snapshot after validating it (SPEC §8) and writes the restored
     * state as the store's checkpoint and cursor, in one transaction. On a validation error
     * nothing changes.
     * @param {Uint8Array | number[]} snapshot
     * @param {string} trusted_key
     * @param {string} org
     * @param {number} requested_cursor
     * @returns {Promise<void>}
     */
    restore(snapshot, trusted_key, org, requested_cursor) {
        const val4 = +requested_cursor;
        let ptr0, len0, ptr1, len1, ptr2, len2;
        try {
            ptr0 = passArray8ToWasm0(snapshot, wasm.__wbindgen_malloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0(trusted_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
            ptr2 = passStringToWasm0(org, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len2 = WASM_VECTOR_LEN;
        } catch (e) {
            if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
            if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
            if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
            throw e;
        }
        const ret = wasm.idbreplica_restore(this.__wbg_ptr, ptr0, len0, ptr1, len1, ptr2, len2, val4);
        return ret;
    }
    /**
     * Hash (hex) of the canonical state.
     * @returns {string}
     */
    stateHash() {
        let deferred2_0;
        let deferred2_1;
        try {
            const ret = wasm.idbreplica_stateHash(this.__wbg_ptr);
            var ptr1 = ret[0];
            var len1 = ret[1];
            if (ret[3]) {
                ptr1 = 0; len1 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred2_0 = ptr1;
            deferred2_1 = len1;
            return getStringFromWasm0(ptr1, len1);
        } finally {
            wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
        }
    }
    /**
     * The state as a JS object (`null` before genesis).
     * @returns {any}
     */
    state() {
        const ret = wasm.idbreplica_state(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * The latest signed head that verified against the chain (JSON form), or `null`.
     * @returns {any}
     */
    get verifiedHead() {
        const ret = wasm.idbreplica_verifiedHead(this.__wbg_ptr);
        return ret;
    }
    /**
     * The highest seq a signed head vouched for since the store was opened.
     * @returns {number}
     */
    get verifiedThrough() {
        const ret = wasm.idbreplica_verifiedThrough(this.__wbg_ptr);
        return ret;
    }
}
if (Symbol.dispose) IdbReplica.prototype[Symbol.dispose] = IdbReplica.prototype.free;

/**
 * The records of one log file, checked, and where the good ones end (the core's
 * `Scanner`): the host reads the bytes it asks for and feeds them in.
 *
 * ```js
 * const sc = new LogScanner({ name, fileLen, firstSeq, contiguous, mayBeTorn, reserve, erased });
 * let buf = new Uint8Array(0), bufStart = 0;
 * for (;;) {
 *   const recs = sc.feed(buf, bufStart); // 6 numbers per good record
 *   // … visit them (payloads are subarrays of buf) …
 *   const end = sc.end();
 *   if (end !== undefined) break;
 *   if (sc.needAt >= 0) { bufStart = sc.needAt; buf = await read(bufStart, sc.needLen); }
 * }
 * ```
 */
export class LogScanner {
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        LogScannerFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_logscanner_free(ptr, 0);
    }
    /**
     * How the scan ended, `{end, lastSeq, torn (bytes or null), reserved}`, or `undefined`
     * while it goes on.
     * @returns {any}
     */
    end() {
        const ret = wasm.logscanner_end(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Scans on with `buf`, the file's bytes from offset `bufStart` (what the last `needAt`,
     * `needLen` asked for, read afresh from the file). Returns the good records found, six
     * numbers each: offset, seq, batch, payload length, CRC, erasure (0 none, 1 pending, 2
     * done); the payload of one is `buf.subarray(offset - bufStart + 24)`, its length long.
     * Then `end()` says how the scan ended, or `needAt` which bytes to read next (−1: call
     * `feed` again). Damage the tail rule does not explain throws `LOG_CORRUPT` naming the
     * file and offset, once the records before it were handed out.
     * @param {Uint8Array | number[]} buf
     * @param {number} buf_start
     * @returns {Float64Array}
     */
    feed(buf, buf_start) {
        const val2 = +buf_start;
        const ptr0 = passArray8ToWasm0(buf, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.logscanner_feed(this.__wbg_ptr, ptr0, len0, val2);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        var v3 = getArrayF64FromWasm0(ret[0], ret[1]).slice();
        wasm.__wbindgen_free(ret[0], ret[1] * 8, 8);
        return v3;
    }
    /**
     * Offset of the bytes to read before the next `feed`, or −1 when none are needed.
     * @returns {number}
     */
    get needAt() {
        const ret = wasm.logscanner_needAt(this.__wbg_ptr);
        return ret;
    }
    /**
     * Number of bytes to read at `needAt` (0 when none are needed).
     * @returns {number}
     */
    get needLen() {
        const ret = wasm.logscanner_needLen(this.__wbg_ptr);
        return ret;
    }
    /**
     * A scan of file `name` (for errors) of `fileLen` bytes after its header: records from
     * seq `firstSeq`, following each other (`contiguous`: segments) or not (the overlay);
     * `mayBeTorn`: damage at the end may be a torn tail; `reserve`: the file may end in
     * zeros reserved for appends; `erased`: `[seq, origLen, origCrc]` of each redacted
     * record (from the overlay); `chunk`: the least number of bytes to ask for (1 MiB).
     * @param {any} spec
     */
    constructor(spec) {
        const ret = wasm.logscanner_new(spec);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        this.__wbg_ptr = ret[0];
        LogScannerFinalization.register(this, this.__wbg_ptr, this);
        return this;
    }
}
if (Symbol.dispose) LogScanner.prototype[Symbol.dispose] = LogScanner.prototype.free;

/**
 * One Group's replica, in memory.
 */
export class Replica {
    static __wrap(ptr) {
        const obj = Object.create(Replica.prototype);
        obj.__wbg_ptr = ptr;
        ReplicaFinalization.register(obj, obj.__wbg_ptr, obj);
        return obj;
    }
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        ReplicaFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_replica_free(ptr, 0);
    }
    /**
     * Number of early events waiting for a gap to fill.
     * @returns {number}
     */
    get buffered() {
        const ret = wasm.replica_buffered(this.__wbg_ptr);
        return ret;
    }
    /**
     * Highest contiguous seq applied: what an ACK carries.
     * @returns {number}
     */
    get cursor() {
        const ret = wasm.replica_cursor(this.__wbg_ptr);
        return ret;
    }
    /**
     * A replica resumed from a local projection: canonical CBOR of a state, as `stateCbor()`
     * gives it.
     * @param {Uint8Array | number[]} bytes
     * @returns {Replica}
     */
    static fromStateCbor(bytes) {
        const ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.replica_fromStateCbor(ptr0, len0);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return Replica.__wrap(ret[0]);
    }
    /**
     * IDs of the work items a worker may claim at `nowMs`.
     * @param {number} now_ms
     * @returns {string[]}
     */
    frontier(now_ms) {
        const ret = wasm.replica_frontier(this.__wbg_ptr, now_ms);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        var v1 = getArrayJsValueFromWasm0(ret[0], ret[1]);
        wasm.__wbindgen_free(ret[0], ret[1] * 4, 4);
        return v1;
    }
    /**
     * The group.
     * @returns {string}
     */
    get group() {
        let deferred1_0;
        let deferred1_1;
        try {
            const ret = wasm.replica_group(this.__wbg_ptr);
            deferred1_0 = ret[0];
            deferred1_1 = ret[1];
            return getStringFromWasm0(ret[0], ret[1]);
        } finally {
            wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
        }
    }
    /**
     * Id (hex) of the event at the cursor.
     * @returns {string}
     */
    get head() {
        let deferred1_0;
        let deferred1_1;
        try {
            const ret = wasm.replica_head(this.__wbg_ptr);
            deferred1_0 = ret[0];
            deferred1_1 = ret[1];
            return getStringFromWasm0(ret[0], ret[1]);
        } finally {
            wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
        }
    }
    /**
     * Whether event `seq` is past the last verified head.
     * @param {number} seq
     * @returns {boolean}
     */
    isProvisional(seq) {
        const ret = wasm.replica_isProvisional(this.__wbg_ptr, seq);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return ret[0] !== 0;
    }
    /**
     * An empty replica of `group`.
     * @param {string} group
     */
    constructor(group) {
        const ptr0 = passStringToWasm0(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.replica_new(ptr0, len0);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        this.__wbg_ptr = ret[0];
        ReplicaFinalization.register(this, this.__wbg_ptr, this);
        return this;
    }
    /**
     * The earliest time a `tick` would expire a lease, or `undefined`.
     * @returns {number | undefined}
     */
    nextDeadline() {
        const ret = wasm.replica_nextDeadline(this.__wbg_ptr);
        return ret[0] === 0 ? undefined : ret[1];
    }
    /**
     * Offers every event of a frame batch. Returns `{applied, duplicate, buffered,
     * rejected, cursor, errors}`.
     * @param {Uint8Array | number[]} batch
     * @returns {any}
     */
    offerBatch(batch) {
        const ptr0 = passArray8ToWasm0(batch, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.replica_offerBatch(this.__wbg_ptr, ptr0, len0);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Offers a signed head (an object or JSON string in its JSON form) under the authority
     * key the caller pins (hex): `{result: "verified"|"ahead"|"stale", verifiedThrough}`.
     * Throws `HEAD_INVALID` (`details.check`) for a head that does not verify, and `FORK`
     * (`details.heads`, and `details.proof` in hex when two heads conflict) for one the
     * chain contradicts. On error nothing changes.
     * @param {any} head
     * @param {string} authority_key
     * @returns {any}
     */
    offerHead(head, authority_key) {
        const ptr0 = passStringToWasm0(authority_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.replica_offerHead(this.__wbg_ptr, head, ptr0, len0);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Offers one delivered event (CBOR bytes or JSON form). Returns
     * `{result: "applied"|"duplicate"|"buffered"|"rejected", seq, cursor, error?}`:
     * rejections are values, not exceptions.
     * @param {any} event
     * @returns {any}
     */
    offer(event) {
        const ret = wasm.replica_offer(this.__wbg_ptr, event);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Restores from a signed snapshot (CBOR bytes) after validating schema, state hash,
     * signature against `trustedKey` (hex), org and group, and `seq ≥ requestedCursor`.
     * Throws `SNAPSHOT_INVALID` with the reason; on error nothing changes.
     * @param {Uint8Array | number[]} snapshot
     * @param {string} trusted_key
     * @param {string} org
     * @param {number} requested_cursor
     */
    restore(snapshot, trusted_key, org, requested_cursor) {
        const val4 = +requested_cursor;
        let ptr0, len0, ptr1, len1, ptr2, len2;
        try {
            ptr0 = passArray8ToWasm0(snapshot, wasm.__wbindgen_malloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0(trusted_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
            ptr2 = passStringToWasm0(org, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len2 = WASM_VECTOR_LEN;
        } catch (e) {
            if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
            if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
            if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
            throw e;
        }
        const ret = wasm.replica_restore(this.__wbg_ptr, ptr0, len0, ptr1, len1, ptr2, len2, val4);
        if (ret[1]) {
            throw takeFromExternrefTable0(ret[0]);
        }
    }
    /**
     * Canonical CBOR of the state (`undefined` before genesis).
     * @returns {Uint8Array | undefined}
     */
    stateCbor() {
        const ret = wasm.replica_stateCbor(this.__wbg_ptr);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        let v1;
        if (ret[0] !== 0) {
            v1 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
            wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        }
        return v1;
    }
    /**
     * Hash (hex) of the canonical state.
     * @returns {string}
     */
    stateHash() {
        let deferred2_0;
        let deferred2_1;
        try {
            const ret = wasm.replica_stateHash(this.__wbg_ptr);
            var ptr1 = ret[0];
            var len1 = ret[1];
            if (ret[3]) {
                ptr1 = 0; len1 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred2_0 = ptr1;
            deferred2_1 = len1;
            return getStringFromWasm0(ptr1, len1);
        } finally {
            wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
        }
    }
    /**
     * The state as a JS object (`null` before genesis).
     * @returns {any}
     */
    state() {
        const ret = wasm.replica_state(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * The latest signed head that verified against the chain (JSON form), or `null`.
     * @returns {any}
     */
    get verifiedHead() {
        const ret = wasm.replica_verifiedHead(this.__wbg_ptr);
        return ret;
    }
    /**
     * The highest seq a signed head vouched for (0 before any): events past it are
     * provisional.
     * @returns {number}
     */
    get verifiedThrough() {
        const ret = wasm.replica_verifiedThrough(this.__wbg_ptr);
        return ret;
    }
}
if (Symbol.dispose) Replica.prototype[Symbol.dispose] = Replica.prototype.free;

/**
 * The sans-IO reader of a static export (SPEC §8b): ask `pollFetch()` for the next path,
 * fetch it relative to the export's base, hand the bytes to `handleFetched(path, bytes)`,
 * until `pollFetch()` answers `undefined`; then `intoReplica()` is verified through the
 * export's signed head under the pinned key and nothing else.
 */
export class StaticReader {
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        StaticReaderFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_staticreader_free(ptr, 0);
    }
    /**
     * Handles the bytes of the file `pollFetch()` named. Returns the progress
     * `{cursor, verifiedThrough, headSeq, events, bytes, done}`; throws the core's error
     * naming the file (`details.file`): `HEAD_INVALID`, `SNAPSHOT_INVALID`, `LOG_CORRUPT`,
     * `FORK`, `MALFORMED`. A file refused before any of its events applied leaves the reader
     * where it was; one that failed part-way leaves it failed for good.
     *
     * With `withEvents`, a chunk's progress also carries `applied`: the events (JSON form)
     * it applied, each now verified by the replica, for a host that shows them.
     * @param {string} path
     * @param {Uint8Array | number[]} bytes
     * @param {boolean | null} [with_events]
     * @returns {any}
     */
    handleFetched(path, bytes, with_events) {
        let ptr0, len0, ptr1, len1;
        try {
            ptr0 = passStringToWasm0(path, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
            len1 = WASM_VECTOR_LEN;
        } catch (e) {
            if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
            if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
            throw e;
        }
        const ret = wasm.staticreader_handleFetched(this.__wbg_ptr, ptr0, len0, ptr1, len1, isLikeNone(with_events) ? 0xFFFFFF : with_events ? 1 : 0);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * The signed head read from `head.json` (JSON form), or `null` before.
     * @returns {any}
     */
    head() {
        const ret = wasm.staticreader_head(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * The replica, once the export is read whole (`MALFORMED` before): verified through
     * the head. The reader is empty afterwards.
     * @returns {Replica}
     */
    intoReplica() {
        const ret = wasm.staticreader_intoReplica(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return Replica.__wrap(ret[0]);
    }
    /**
     * The most bytes the reader accepts for the file at `path` (`export::max_file_bytes`): a
     * host stops downloading a file past it, so a hostile mirror cannot make it buffer
     * without end.
     * @param {string} path
     * @returns {number}
     */
    static maxFileBytes(path) {
        const ptr0 = passStringToWasm0(path, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.staticreader_maxFileBytes(ptr0, len0);
        return ret;
    }
    /**
     * A reader of `group`'s export trusting only `authorityKey` (hex); `start` is
     * `"snapshot"` (the default: the latest signed snapshot, then the chunks after it) or
     * `"genesis"` (every event from seq 1).
     * @param {string} group
     * @param {string} authority_key
     * @param {string | null} [start]
     */
    constructor(group, authority_key, start) {
        let ptr0, len0, ptr1, len1, ptr2, len2;
        try {
            ptr0 = passStringToWasm0(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0(authority_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
            ptr2 = isLikeNone(start) ? 0 : passStringToWasm0(start, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len2 = WASM_VECTOR_LEN;
        } catch (e) {
            if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
            if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
            if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
            throw e;
        }
        const ret = wasm.staticreader_new(ptr0, len0, ptr1, len1, ptr2, len2);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        this.__wbg_ptr = ret[0];
        StaticReaderFinalization.register(this, this.__wbg_ptr, this);
        return this;
    }
    /**
     * The next file to fetch, relative to the export's base; `undefined` once done.
     * @returns {string | undefined}
     */
    pollFetch() {
        const ret = wasm.staticreader_pollFetch(this.__wbg_ptr);
        let v1;
        if (ret[0] !== 0) {
            v1 = getStringFromWasm0(ret[0], ret[1]);
            wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        }
        return v1;
    }
    /**
     * How far the reader got: `{cursor, verifiedThrough, headSeq, events, bytes, done}`.
     * @returns {any}
     */
    progress() {
        const ret = wasm.staticreader_progress(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
}
if (Symbol.dispose) StaticReader.prototype[Symbol.dispose] = StaticReader.prototype.free;

/**
 * One Group's authority driver, for a host that stores the log itself.
 */
export class StoreGroup {
    static __wrap(ptr) {
        const obj = Object.create(StoreGroup.prototype);
        obj.__wbg_ptr = ptr;
        StoreGroupFinalization.register(obj, obj.__wbg_ptr, obj);
        return obj;
    }
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        this.__wbg_ptr = 0;
        StoreGroupFinalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_storegroup_free(ptr, 0);
    }
    /**
     * Applies a frame batch of stored events, seq `firstSeq` first (as `applyStored`, one
     * boundary crossing for many events). Returns the id (hex) of the last one; on error,
     * the events before the failing one stay applied and the error's `details.seq` names it.
     * @param {Uint8Array | number[]} batch
     * @param {number} first_seq
     * @returns {string}
     */
    applyStoredBatch(batch, first_seq) {
        let deferred4_0;
        let deferred4_1;
        try {
            const val2 = +first_seq;
            const ptr0 = passArray8ToWasm0(batch, wasm.__wbindgen_malloc);
            const len0 = WASM_VECTOR_LEN;
            const ret = wasm.storegroup_applyStoredBatch(this.__wbg_ptr, ptr0, len0, val2);
            var ptr3 = ret[0];
            var len3 = ret[1];
            if (ret[3]) {
                ptr3 = 0; len3 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred4_0 = ptr3;
            deferred4_1 = len3;
            return getStringFromWasm0(ptr3, len3);
        } finally {
            wasm.__wbindgen_free(deferred4_0, deferred4_1, 1);
        }
    }
    /**
     * Applies one stored event (canonical CBOR), which must carry seq `expectSeq`: decodes
     * it (non-canonical bytes are `LOG_CORRUPT`), verifies its payload hash and id, and
     * applies it (chain, group and seq checked). Returns the event's id (hex). On error the
     * state is unchanged.
     * @param {Uint8Array | number[]} bytes
     * @param {number} expect_seq
     * @returns {string}
     */
    applyStored(bytes, expect_seq) {
        let deferred4_0;
        let deferred4_1;
        try {
            const val2 = +expect_seq;
            const ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
            const len0 = WASM_VECTOR_LEN;
            const ret = wasm.storegroup_applyStored(this.__wbg_ptr, ptr0, len0, val2);
            var ptr3 = ret[0];
            var len3 = ret[1];
            if (ret[3]) {
                ptr3 = 0; len3 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred4_0 = ptr3;
            deferred4_1 = len3;
            return getStringFromWasm0(ptr3, len3);
        } finally {
            wasm.__wbindgen_free(deferred4_0, deferred4_1, 1);
        }
    }
    /**
     * Whether the group is archived.
     * @returns {boolean}
     */
    get archived() {
        const ret = wasm.storegroup_archived(this.__wbg_ptr);
        return ret !== 0;
    }
    /**
     * A group resumed from a signed snapshot (canonical CBOR) that verifies under the
     * public half of `secretKey` and belongs to `group`; `snapshotEvery` and `orgPolicy` as
     * for the constructor. Throws `SNAPSHOT_INVALID` with the reason.
     * @param {Uint8Array | number[]} bytes
     * @param {string} secret_key
     * @param {string} group
     * @param {number | null} [snapshot_every]
     * @param {string | null} [org_policy]
     * @returns {StoreGroup}
     */
    static fromSnapshot(bytes, secret_key, group, snapshot_every, org_policy) {
        const val5 = +(isLikeNone(snapshot_every) ? 0 : snapshot_every);
        let ptr0, len0, ptr1, len1, ptr2, len2, ptr3, len3;
        try {
            ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0(secret_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
            ptr2 = passStringToWasm0(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len2 = WASM_VECTOR_LEN;
            ptr3 = isLikeNone(org_policy) ? 0 : passStringToWasm0(org_policy, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len3 = WASM_VECTOR_LEN;
        } catch (e) {
            if (ptr3) { wasm.__wbindgen_free(ptr3, len3 * 1, 1); }
            if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
            if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
            if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
            throw e;
        }
        const ret = wasm.storegroup_fromSnapshot(ptr0, len0, ptr1, len1, ptr2, len2, !isLikeNone(snapshot_every), val5, ptr3, len3);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return StoreGroup.__wrap(ret[0]);
    }
    /**
     * IDs of the work items a worker may claim at `nowMs`.
     * @param {number} now_ms
     * @returns {string[]}
     */
    frontier(now_ms) {
        const ret = wasm.storegroup_frontier(this.__wbg_ptr, now_ms);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        var v1 = getArrayJsValueFromWasm0(ret[0], ret[1]);
        wasm.__wbindgen_free(ret[0], ret[1] * 4, 4);
        return v1;
    }
    /**
     * The group's ID (`undefined` before genesis).
     * @returns {string | undefined}
     */
    get group() {
        const ret = wasm.storegroup_group(this.__wbg_ptr);
        let v1;
        if (ret[0] !== 0) {
            v1 = getStringFromWasm0(ret[0], ret[1]);
            wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        }
        return v1;
    }
    /**
     * Id (hex) of the last event (all zeros before genesis).
     * @returns {string}
     */
    get head() {
        let deferred1_0;
        let deferred1_1;
        try {
            const ret = wasm.storegroup_head(this.__wbg_ptr);
            deferred1_0 = ret[0];
            deferred1_1 = ret[1];
            return getStringFromWasm0(ret[0], ret[1]);
        } finally {
            wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
        }
    }
    /**
     * A group with no events yet, under the authority signing with `secretKey` (hex seed)
     * and snapshotting every `snapshotEvery` events (`null`: only on archive). The first
     * accepted command must be an `open_group` naming that key. With `group`, the log
     * replayed into it with `applyStored` must be that group's (its first event belongs to
     * `group`): a log stored under another group's name is `LOG_CORRUPT`. `orgPolicy`: the
     * text of the operator's Organization policy file (`mwp.org-policy.v1`), under which an
     * archived group of a named org is sealed (`MALFORMED` if it does not parse).
     * @param {string} secret_key
     * @param {number | null} [snapshot_every]
     * @param {string | null} [group]
     * @param {string | null} [org_policy]
     */
    constructor(secret_key, snapshot_every, group, org_policy) {
        const val4 = +(isLikeNone(snapshot_every) ? 0 : snapshot_every);
        let ptr0, len0, ptr1, len1, ptr2, len2;
        try {
            ptr0 = passStringToWasm0(secret_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = isLikeNone(group) ? 0 : passStringToWasm0(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
            ptr2 = isLikeNone(org_policy) ? 0 : passStringToWasm0(org_policy, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len2 = WASM_VECTOR_LEN;
        } catch (e) {
            if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
            if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
            if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
            throw e;
        }
        const ret = wasm.storegroup_new(ptr0, len0, !isLikeNone(snapshot_every), val4, ptr1, len1, ptr2, len2);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        this.__wbg_ptr = ret[0];
        StoreGroupFinalization.register(this, this.__wbg_ptr, this);
        return this;
    }
    /**
     * The earliest time a `tick` would expire a lease, or `undefined` (also once archived):
     * the driver's next wake.
     * @returns {number | undefined}
     */
    nextDeadline() {
        const ret = wasm.storegroup_nextDeadline(this.__wbg_ptr);
        return ret[0] === 0 ? undefined : ret[1];
    }
    /**
     * The group's org (`undefined` before genesis).
     * @returns {string | undefined}
     */
    get org() {
        const ret = wasm.storegroup_org(this.__wbg_ptr);
        let v1;
        if (ret[0] !== 0) {
            v1 = getStringFromWasm0(ret[0], ret[1]);
            wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        }
        return v1;
    }
    /**
     * The `tick` the authority sends at `nowMs`, as the core's authority driver names and
     * signs it (`tick.<the seq it will have>`); `undefined` when no lease deadline has
     * passed, the group is archived or not open yet. Submit it like any command.
     * @param {number} now_ms
     * @returns {any}
     */
    pollTick(now_ms) {
        const ret = wasm.storegroup_pollTick(this.__wbg_ptr, now_ms);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * The original receipt of (actor, action), or `undefined`.
     * @param {string} actor
     * @param {string} action
     * @returns {any}
     */
    receipt(actor, action) {
        let ptr0, len0, ptr1, len1;
        try {
            ptr0 = passStringToWasm0(actor, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0(action, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
        } catch (e) {
            if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
            if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
            throw e;
        }
        const ret = wasm.storegroup_receipt(this.__wbg_ptr, ptr0, len0, ptr1, len1);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Seqs of the redacted events, ascending.
     * @returns {Float64Array}
     */
    get redacted() {
        const ret = wasm.storegroup_redacted(this.__wbg_ptr);
        var v1 = getArrayF64FromWasm0(ret[0], ret[1]).slice();
        wasm.__wbindgen_free(ret[0], ret[1] * 8, 8);
        return v1;
    }
    /**
     * The Organization's policy (`{recipients, retain_days, remove_plain}`) the group must
     * be sealed under, when it is archived and its org has one (`Authority::seal_due`):
     * what a host checks on open, to finish a seal a crash interrupted. `undefined`
     * otherwise.
     * @returns {any}
     */
    get sealDue() {
        const ret = wasm.storegroup_sealDue(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Seq of the last event (0 before genesis).
     * @returns {number}
     */
    get seq() {
        const ret = wasm.storegroup_seq(this.__wbg_ptr);
        return ret;
    }
    /**
     * A signed snapshot (canonical CBOR) of the current state with the authority's key, and
     * its header fields: `{bytes, seq, state_hash}`.
     * @returns {any}
     */
    snapshot() {
        const ret = wasm.storegroup_snapshot(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Canonical CBOR of the state (`undefined` before genesis).
     * @returns {Uint8Array | undefined}
     */
    stateCbor() {
        const ret = wasm.storegroup_stateCbor(this.__wbg_ptr);
        if (ret[3]) {
            throw takeFromExternrefTable0(ret[2]);
        }
        let v1;
        if (ret[0] !== 0) {
            v1 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
            wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
        }
        return v1;
    }
    /**
     * Hash (hex) of the canonical state.
     * @returns {string}
     */
    stateHash() {
        let deferred2_0;
        let deferred2_1;
        try {
            const ret = wasm.storegroup_stateHash(this.__wbg_ptr);
            var ptr1 = ret[0];
            var len1 = ret[1];
            if (ret[3]) {
                ptr1 = 0; len1 = 0;
                throw takeFromExternrefTable0(ret[2]);
            }
            deferred2_0 = ptr1;
            deferred2_1 = len1;
            return getStringFromWasm0(ptr1, len1);
        } finally {
            wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
        }
    }
    /**
     * The state as a JS object (`null` before genesis).
     * @returns {any}
     */
    state() {
        const ret = wasm.storegroup_state(this.__wbg_ptr);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
    /**
     * Decides a command (JSON-form object or CBOR bytes) at `nowMs` with the core's
     * authority driver; an accepted event is applied to the state at once (the host must
     * make it durable before answering). Returns `{decision, erase?, snapshot?}`: the
     * decision `{outcome: "accepted"|"duplicate", receipt, event?, eventCbor?}`, the seq
     * whose stored values a redaction erases once the event is durable, and the signed
     * snapshot that is due after it (`{bytes, seq, state_hash}`, to store once the event is
     * durable), and `seal`: the Organization's policy (`{recipients, retain_days,
     * remove_plain}`) when the event archives a group whose org has one: the host seals
     * the audit log (`AuditSealer`) once the event and the final snapshot are durable. A
     * rejection throws a `StoreError` with the spec's code and changes nothing.
     * @param {any} command
     * @param {number} now_ms
     * @returns {any}
     */
    submit(command, now_ms) {
        const ret = wasm.storegroup_submit(this.__wbg_ptr, command, now_ms);
        if (ret[2]) {
            throw takeFromExternrefTable0(ret[1]);
        }
        return takeFromExternrefTable0(ret[0]);
    }
}
if (Symbol.dispose) StoreGroup.prototype[Symbol.dispose] = StoreGroup.prototype.free;

/**
 * The manifest (JSON form) of a sealed artifact, after the core's checks
 * (`mwp_core::audit::split_artifact`): the layout, the manifest's schema and signature
 * under `trustedKey` (hex public key; without it, under the key it names, which shows only
 * that it is whole) and that the ciphertext is the one it names. No key is needed.
 * `AUDIT_INVALID` naming the `check` otherwise.
 * @param {Uint8Array | number[]} artifact
 * @param {string | null} [trusted_key_hex]
 * @returns {any}
 */
export function auditManifest(artifact, trusted_key_hex) {
    let ptr0, len0, ptr1, len1;
    try {
        ptr0 = passArray8ToWasm0(artifact, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = isLikeNone(trusted_key_hex) ? 0 : passStringToWasm0(trusted_key_hex, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.auditManifest(ptr0, len0, ptr1, len1);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * Where a sealed group's plain log starts (the core's `audit::plain_log_start`): `sealedSeq`
 * is the final seq its checked seal record names (`undefined`: none), `removes` whether that
 * record says the plain history goes (a manifest's `remove_plain`, or a tombstone), and
 * `segments` the first seqs of the segment files. `sealedSeq + 1` or 1.
 * @param {number | null | undefined} sealed_seq
 * @param {boolean} removes
 * @param {Float64Array | number[]} segments
 * @returns {number}
 */
export function auditPlainLogStart(sealed_seq, removes, segments) {
    const val2 = +(isLikeNone(sealed_seq) ? 0 : sealed_seq);
    const val3 = +removes;
    const ptr0 = passArrayF64ToWasm0(segments, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.auditPlainLogStart(!isLikeNone(sealed_seq), val2, val3, ptr0, len0);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return ret[0];
}

/**
 * The replay answer for the events of `group` after `after` once its plain history was
 * removed, the final snapshot being at `finalSeq` with state hash `stateHash` (hex): returns
 * nothing when they are served (`after >= finalSeq`), else throws `CURSOR_TOO_OLD` with the
 * final snapshot's reference (the core's `Policy::check_replay_sealed`).
 * @param {number} after
 * @param {number} final_seq
 * @param {string} state_hash
 * @param {string} group
 */
export function auditReplay(after, final_seq, state_hash, group) {
    const val3 = +after;
    const val4 = +final_seq;
    let ptr0, len0, ptr1, len1;
    try {
        ptr0 = passStringToWasm0(state_hash, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passStringToWasm0(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.auditReplay(val3, val4, ptr0, len0, ptr1, len1);
    if (ret[1]) {
        throw takeFromExternrefTable0(ret[0]);
    }
}

/**
 * The tombstone (JSON form) an expired artifact left (`audit.tombstone`: its canonical
 * CBOR), after the core's checks: it decodes and its signature verifies under `trustedKey`
 * (hex public key) or, without one, under the key it names. `AUDIT_INVALID` naming the
 * `check` (`decode`, `schema`, `signature`) otherwise.
 * @param {Uint8Array | number[]} bytes
 * @param {string | null} [trusted_key_hex]
 * @returns {any}
 */
export function auditTombstone(bytes, trusted_key_hex) {
    let ptr0, len0, ptr1, len1;
    try {
        ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = isLikeNone(trusted_key_hex) ? 0 : passStringToWasm0(trusted_key_hex, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.auditTombstone(ptr0, len0, ptr1, len1);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * The manifest from the end of an artifact (`tail`: its last bytes, at least the manifest
 * and 12 more; 65,548 always suffice), checked under `trustedKeyHex` (or its own key) without
 * reading the ciphertext (the core's `read_trailer`): what a store's open reads.
 * @param {Uint8Array | number[]} tail
 * @param {string | null} [trusted_key_hex]
 * @returns {any}
 */
export function auditTrailer(tail, trusted_key_hex) {
    let ptr0, len0, ptr1, len1;
    try {
        ptr0 = passArray8ToWasm0(tail, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = isLikeNone(trusted_key_hex) ? 0 : passStringToWasm0(trusted_key_hex, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.auditTrailer(ptr0, len0, ptr1, len1);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * The deterministic benchmark log of [`crate::vectors::bench_log`] (a frame batch).
 * @param {number} items
 * @returns {Uint8Array}
 */
export function benchLog(items) {
    const ret = wasm.benchLog(items);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v1 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
    wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
    return v1;
}

/**
 * Builds and signs a snapshot of a canonical state (CBOR bytes, as `stateCbor()` gives it)
 * with the authority's secret key seed (hex). Returns the snapshot's canonical CBOR.
 * @param {Uint8Array | number[]} state_cbor
 * @param {string} secret_key_hex
 * @returns {Uint8Array}
 */
export function buildSnapshot(state_cbor, secret_key_hex) {
    let ptr0, len0, ptr1, len1;
    try {
        ptr0 = passArray8ToWasm0(state_cbor, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passStringToWasm0(secret_key_hex, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.buildSnapshot(ptr0, len0, ptr1, len1);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v3 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
    wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
    return v3;
}

/**
 * Decodes canonical CBOR into a JS value; `strict = false` also accepts valid but
 * non-canonical encodings.
 * @param {Uint8Array | number[]} bytes
 * @param {boolean | null} [strict]
 * @returns {any}
 */
export function canonicalDecode(bytes, strict) {
    const ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.canonicalDecode(ptr0, len0, isLikeNone(strict) ? 0xFFFFFF : strict ? 1 : 0);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * Canonical CBOR (RFC 8949 §4.2.1) of a JSON-like JS value. Floats are refused.
 * @param {any} value
 * @returns {Uint8Array}
 */
export function canonicalEncode(value) {
    const ret = wasm.canonicalEncode(value);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v1 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
    wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
    return v1;
}

/**
 * SHA-256 (hex) of the canonical CBOR of a JSON-like JS value.
 * @param {any} value
 * @returns {string}
 */
export function canonicalHash(value) {
    let deferred2_0;
    let deferred2_1;
    try {
        const ret = wasm.canonicalHash(value);
        var ptr1 = ret[0];
        var len1 = ret[1];
        if (ret[3]) {
            ptr1 = 0; len1 = 0;
            throw takeFromExternrefTable0(ret[2]);
        }
        deferred2_0 = ptr1;
        deferred2_1 = len1;
        return getStringFromWasm0(ptr1, len1);
    } finally {
        wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
    }
}

/**
 * Checks the first bytes of the file `name` (all of them if it is shorter than a header) as
 * the header of a `kind` (`"segment"` or `"overlay"`) file of `group` and, unless `null`,
 * first seq `firstSeq`. Returns `{firstSeq, prev (hex), group}`; throws `LOG_CORRUPT`
 * naming the file and the offset of the bad field.
 * @param {Uint8Array | number[]} bytes
 * @param {string} name
 * @param {string} kind
 * @param {string} group
 * @param {number | null} [first_seq]
 * @returns {any}
 */
export function checkFileHeader(bytes, name, kind, group, first_seq) {
    const val5 = +(isLikeNone(first_seq) ? 0 : first_seq);
    let ptr0, len0, ptr1, len1, ptr2, len2, ptr3, len3;
    try {
        ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passStringToWasm0(name, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
        ptr2 = passStringToWasm0(kind, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len2 = WASM_VECTOR_LEN;
        ptr3 = passStringToWasm0(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len3 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr3) { wasm.__wbindgen_free(ptr3, len3 * 1, 1); }
        if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.checkFileHeader(ptr0, len0, ptr1, len1, ptr2, len2, ptr3, len3, !isLikeNone(first_seq), val5);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * Content hash (hex) of a command: SHA-256 of the canonical CBOR of every field but `sig`.
 * @param {any} command
 * @returns {string}
 */
export function commandContentHash(command) {
    let deferred2_0;
    let deferred2_1;
    try {
        const ret = wasm.commandContentHash(command);
        var ptr1 = ret[0];
        var len1 = ret[1];
        if (ret[3]) {
            ptr1 = 0; len1 = 0;
            throw takeFromExternrefTable0(ret[2]);
        }
        deferred2_0 = ptr1;
        deferred2_1 = len1;
        return getStringFromWasm0(ptr1, len1);
    } finally {
        wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
    }
}

/**
 * CRC32C of `bytes`, continuing from `crc` (the CRC of the bytes before them; 0 to start):
 * `crc32c(b, crc32c(a))` is the CRC of `a` followed by `b`.
 * @param {Uint8Array | number[]} bytes
 * @param {number | null} [crc]
 * @returns {number}
 */
export function crc32c(bytes, crc) {
    const val2 = +(isLikeNone(crc) ? Number.MAX_SAFE_INTEGER : (crc) >>> 0);
    const ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.crc32c(ptr0, len0, val2);
    return ret >>> 0;
}

/**
 * Decodes a stored event (canonical CBOR) into its JSON form. Does not verify it.
 * @param {Uint8Array | number[]} bytes
 * @returns {any}
 */
export function decodeEvent(bytes) {
    const ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.decodeEvent(ptr0, len0);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * The original length and CRC (`{len, crc}`) an overlay entry's payload starts with, or
 * `undefined` if it is shorter than 8 bytes. The redacted event follows them.
 * @param {Uint8Array | number[]} payload
 * @returns {any}
 */
export function decodeOverlayEntry(payload) {
    const ptr0 = passArray8ToWasm0(payload, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.decodeOverlayEntry(ptr0, len0);
    return ret;
}

/**
 * Checks a snapshot file's frame: `{seq, payload}`; throws `LOG_CORRUPT` whose message
 * says what is wrong.
 * @param {Uint8Array | number[]} bytes
 * @returns {any}
 */
export function decodeSnapshotFile(bytes) {
    const ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.decodeSnapshotFile(ptr0, len0);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * Deletes a store's database (all its data). Fails if a connection is still open.
 * @param {string} name
 * @returns {Promise<void>}
 */
export function deleteIdbStore(name) {
    const ptr0 = passStringToWasm0(name, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.deleteIdbStore(ptr0, len0);
    return ret;
}

/**
 * The bytes that append one write set (its canonical CBOR, as `pollWriteSet` gave it) to a
 * journal whose next record is `nextSeq`: `{bytes, nextSeq, group}`. `journalGroup` is the
 * group of the existing journal; without it the bytes start a new journal (its header first,
 * `nextSeq` 1). A write set without a group, or of another group, is `MALFORMED`.
 * @param {Uint8Array | number[]} write_set
 * @param {number} next_seq
 * @param {string | null} [journal_group]
 * @returns {any}
 */
export function encodeAgentJournalAppend(write_set, next_seq, journal_group) {
    const val3 = +next_seq;
    let ptr0, len0, ptr1, len1;
    try {
        ptr0 = passArray8ToWasm0(write_set, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = isLikeNone(journal_group) ? 0 : passStringToWasm0(journal_group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.encodeAgentJournalAppend(ptr0, len0, val3, ptr1, len1);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * One write batch: the payloads of a frame batch as records with seqs `firstSeq`,
 * `firstSeq + 1`, …, each naming `firstSeq` as its batch, one after the other.
 * @param {number} first_seq
 * @param {Uint8Array | number[]} frames
 * @returns {Uint8Array}
 */
export function encodeBatch(first_seq, frames) {
    const val2 = +first_seq;
    const ptr0 = passArray8ToWasm0(frames, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.encodeBatch(val2, ptr0, len0);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v3 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
    wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
    return v3;
}

/**
 * Canonical CBOR of a command, `sig` included.
 * @param {any} command
 * @returns {Uint8Array}
 */
export function encodeCommand(command) {
    const ret = wasm.encodeCommand(command);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v1 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
    wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
    return v1;
}

/**
 * Encodes an event given in its JSON form (or as bytes) into canonical CBOR.
 * @param {any} event
 * @returns {Uint8Array}
 */
export function encodeEvent(event) {
    const ret = wasm.encodeEvent(event);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v1 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
    wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
    return v1;
}

/**
 * The 192 header bytes of a segment (`kind` `"segment"`, whose first record is `firstSeq`
 * and whose `prev` is the id, hex, of the event before it) or of the redaction overlay
 * (`"overlay"`: `firstSeq` 0, `prev` all zeros) of `group`.
 * @param {string} kind
 * @param {number} first_seq
 * @param {string} prev
 * @param {string} group
 * @returns {Uint8Array}
 */
export function encodeFileHeader(kind, first_seq, prev, group) {
    const val4 = +first_seq;
    let ptr0, len0, ptr1, len1, ptr2, len2;
    try {
        ptr0 = passStringToWasm0(kind, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passStringToWasm0(prev, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
        ptr2 = passStringToWasm0(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len2 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.encodeFileHeader(ptr0, len0, val4, ptr1, len1, ptr2, len2);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v5 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
    wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
    return v5;
}

/**
 * The overlay record of redacted event `seq`: its entry holds the erased record's original
 * length and CRC (`origLen`, `origCrc`) and the redacted event's canonical CBOR.
 * @param {number} seq
 * @param {number} orig_len
 * @param {number} orig_crc
 * @param {Uint8Array | number[]} redacted
 * @returns {Uint8Array}
 */
export function encodeOverlayRecord(seq, orig_len, orig_crc, redacted) {
    const val2 = +seq;
    const val3 = +orig_len;
    const val4 = +orig_crc;
    const ptr0 = passArray8ToWasm0(redacted, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.encodeOverlayRecord(val2, val3, val4, ptr0, len0);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v5 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
    wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
    return v5;
}

/**
 * One record: the 24-byte header (`len`, `seq`, `batch`, CRC32C) and the payload.
 * @param {number} seq
 * @param {number} batch
 * @param {Uint8Array | number[]} payload
 * @returns {Uint8Array}
 */
export function encodeRecord(seq, batch, payload) {
    const val2 = +seq;
    const val3 = +batch;
    const ptr0 = passArray8ToWasm0(payload, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.encodeRecord(val2, val3, ptr0, len0);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v4 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
    wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
    return v4;
}

/**
 * A snapshot file: the 32-byte header and the snapshot's canonical CBOR.
 * @param {number} seq
 * @param {Uint8Array | number[]} payload
 * @returns {Uint8Array}
 */
export function encodeSnapshotFile(seq, payload) {
    const val2 = +seq;
    const ptr0 = passArray8ToWasm0(payload, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.encodeSnapshotFile(val2, ptr0, len0);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v3 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
    wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
    return v3;
}

/**
 * The bytes that erase the record whose 24 header bytes are `header`, to write at record
 * offset 20: the CRC over the header and zeros, then `len` zeros.
 * @param {Uint8Array | number[]} header
 * @returns {Uint8Array}
 */
export function erasePatch(header) {
    const ptr0 = passArray8ToWasm0(header, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.erasePatch(ptr0, len0);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v2 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
    wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
    return v2;
}

/**
 * Joins byte arrays into one frame batch.
 * @param {Uint8Array[]} items
 * @returns {Uint8Array}
 */
export function frameBatch(items) {
    const ptr0 = passArrayJsValueToWasm0(items, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.frameBatch(ptr0, len0);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v2 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
    wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
    return v2;
}

/**
 * A new Organization key pair (`mwp_audit::generate_identity`): `{identity, recipient}`,
 * the identity file's text (`AGE-SECRET-KEY-1…`, as `age-keygen` writes it) and the
 * recipient (`age1…`) a policy names. Draws randomness (`crypto.getRandomValues`).
 * @returns {any}
 */
export function generateAuditIdentity() {
    const ret = wasm.generateAuditIdentity();
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * Directory name of a group: the ID itself when it is lowercase `[a-z0-9][a-z0-9._-]*`,
 * otherwise `~` and the lowercase base32 of its bytes (`G1` → `~i4yq`).
 * @param {string} group
 * @returns {string}
 */
export function groupDirName(group) {
    let deferred2_0;
    let deferred2_1;
    try {
        const ptr0 = passStringToWasm0(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.groupDirName(ptr0, len0);
        deferred2_0 = ret[0];
        deferred2_1 = ret[1];
        return getStringFromWasm0(ret[0], ret[1]);
    } finally {
        wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
    }
}

/**
 * The group ID a directory name stands for, or `null` if `groupDirName` would not make it.
 * @param {string} name
 * @returns {string | undefined}
 */
export function groupFromDirName(name) {
    const ptr0 = passStringToWasm0(name, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.groupFromDirName(ptr0, len0);
    let v2;
    if (ret[0] !== 0) {
        v2 = getStringFromWasm0(ret[0], ret[1]);
        wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
    }
    return v2;
}

/**
 * Opens a sealed artifact with an identity file's text (`mwp_audit::open`): checks the
 * manifest (under `trustedKey`, hex, when given) and the ciphertext, decrypts, and verifies
 * the log against the manifest (chain, final snapshot, state hash). Returns `{manifest,
 * events, snapshot, stateHash}`: the manifest (JSON form), every event's stored bytes (an
 * array of `Uint8Array`, seq 1 first), the final snapshot's stored bytes and the state hash
 * (hex) the events reach. `AUDIT_INVALID` naming the `check` (`identity` when no identity
 * given is a recipient), `MALFORMED` for an identity file that does not parse.
 * @param {Uint8Array | number[]} artifact
 * @param {string} identity
 * @param {string | null} [trusted_key_hex]
 * @returns {any}
 */
export function openAudit(artifact, identity, trusted_key_hex) {
    let ptr0, len0, ptr1, len1, ptr2, len2;
    try {
        ptr0 = passArray8ToWasm0(artifact, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passStringToWasm0(identity, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
        ptr2 = isLikeNone(trusted_key_hex) ? 0 : passStringToWasm0(trusted_key_hex, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len2 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.openAudit(ptr0, len0, ptr1, len1, ptr2, len2);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * Parses a command (JSON-form object or CBOR bytes) and gives back its JSON form:
 * checks the limits and field rules without deciding anything.
 * @param {any} command
 * @returns {any}
 */
export function parseCommand(command) {
    const ret = wasm.parseCommand(command);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * The number of a `<20 digits>.<ext>` name; `null` for any other name (or a number past
 * 2^53 − 1).
 * @param {string} name
 * @param {string} ext
 * @returns {number | undefined}
 */
export function parseNumbered(name, ext) {
    let ptr0, len0, ptr1, len1;
    try {
        ptr0 = passStringToWasm0(name, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passStringToWasm0(ext, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.parseNumbered(ptr0, len0, ptr1, len1);
    return ret[0] === 0 ? undefined : ret[1];
}

/**
 * Parses the operator's Organization policy file (`mwp_audit::load_policy`: the schema,
 * every recipient an age X25519 public key, the retention) and returns it (JSON form).
 * `MALFORMED` naming the first thing wrong.
 * @param {string} text
 * @returns {any}
 */
export function parseOrgPolicy(text) {
    const ptr0 = passStringToWasm0(text, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.parseOrgPolicy(ptr0, len0);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * The record header at `at` in `bytes`: `{len, seq, batch, crc}`; throws `MALFORMED` if
 * fewer than 24 bytes are there.
 * @param {Uint8Array | number[]} bytes
 * @param {number | null} [at]
 * @returns {any}
 */
export function parseRecordHeader(bytes, at) {
    const val2 = +(isLikeNone(at) ? 0 : at);
    const ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.parseRecordHeader(ptr0, len0, !isLikeNone(at), val2);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * Plans a static export (`export::plan`; the full module only: the viewer reads exports, it
 * does not plan them): the events (a frame batch of stored CBOR, in seq
 * order, after the previous export's index if given as JSON text), the latest signed
 * snapshot if any, the signed head they end at, the authority key (hex) and the chunk size.
 * Returns `{files: [{path, bytes}], headFile: bytes, index}`; the caller writes the files,
 * then `head.json`.
 * @param {string | null | undefined} previous
 * @param {Uint8Array | number[]} events
 * @param {Uint8Array | number[] | null | undefined} snapshot
 * @param {any} head
 * @param {string} trusted_key
 * @param {number | null} [chunk_events]
 * @returns {any}
 */
export function planExport(previous, events, snapshot, head, trusted_key, chunk_events) {
    const val5 = +(isLikeNone(chunk_events) ? Number.MAX_SAFE_INTEGER : (chunk_events) >>> 0);
    let ptr0, len0, ptr1, len1, ptr2, len2, ptr3, len3;
    try {
        ptr0 = isLikeNone(previous) ? 0 : passStringToWasm0(previous, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passArray8ToWasm0(events, wasm.__wbindgen_malloc);
        len1 = WASM_VECTOR_LEN;
        ptr2 = isLikeNone(snapshot) ? 0 : passArray8ToWasm0(snapshot, wasm.__wbindgen_malloc);
        len2 = WASM_VECTOR_LEN;
        ptr3 = passStringToWasm0(trusted_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len3 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr3) { wasm.__wbindgen_free(ptr3, len3 * 1, 1); }
        if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.planExport(ptr0, len0, ptr1, len1, ptr2, len2, head, ptr3, len3, val5);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * The public key (hex) of a secret key seed (hex).
 * @param {string} secret_key_hex
 * @returns {string}
 */
export function publicKeyOf(secret_key_hex) {
    let deferred3_0;
    let deferred3_1;
    try {
        const ptr0 = passStringToWasm0(secret_key_hex, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.publicKeyOf(ptr0, len0);
        var ptr2 = ret[0];
        var len2 = ret[1];
        if (ret[3]) {
            ptr2 = 0; len2 = 0;
            throw takeFromExternrefTable0(ret[2]);
        }
        deferred3_0 = ptr2;
        deferred3_1 = len2;
        return getStringFromWasm0(ptr2, len2);
    } finally {
        wasm.__wbindgen_free(deferred3_0, deferred3_1, 1);
    }
}

/**
 * Reads a whole agent journal (`bytes`, the file from offset 0; `name` names it in errors):
 * `{group, image, keep, nextSeq}`: the group in its header, every committed write set folded
 * into an `AgentImage`, the length to cut the file to (a torn last write set was never
 * committed), and the seq of the next record. Damage before the last write set is
 * `LOG_CORRUPT`.
 * @param {Uint8Array | number[]} bytes
 * @param {string} name
 * @returns {any}
 */
export function readAgentJournal(bytes, name) {
    let ptr0, len0, ptr1, len1;
    try {
        ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passStringToWasm0(name, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.readAgentJournal(ptr0, len0, ptr1, len1);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * The receipt an event gives its sender, as a JS object.
 * @param {any} event
 * @returns {any}
 */
export function receiptOf(event) {
    const ret = wasm.receiptOf(event);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * The whole record at `at` in `bytes`: `{len, seq, batch, crc, crcOk}` (`crcOk`: the CRC
 * matches the header and payload), or `undefined` when the header or the payload does not
 * fit in `bytes` or the length is past the largest record.
 * @param {Uint8Array | number[]} bytes
 * @param {number} at
 * @returns {any}
 */
export function recordAt(bytes, at) {
    const val2 = +at;
    const ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.recordAt(ptr0, len0, val2);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * Whether the record (24 header bytes, payload) is erased: zeros with a matching CRC.
 * @param {Uint8Array | number[]} header
 * @param {Uint8Array | number[]} payload
 * @returns {boolean}
 */
export function recordIsErased(header, payload) {
    let ptr0, len0, ptr1, len1;
    try {
        ptr0 = passArray8ToWasm0(header, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passArray8ToWasm0(payload, wasm.__wbindgen_malloc);
        len1 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.recordIsErased(ptr0, len0, ptr1, len1);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return ret[0] !== 0;
}

/**
 * Whether `payload` belongs to the record whose 24 header bytes are `header`: its length
 * and CRC match.
 * @param {Uint8Array | number[]} header
 * @param {Uint8Array | number[]} payload
 * @returns {boolean}
 */
export function recordMatches(header, payload) {
    let ptr0, len0, ptr1, len1;
    try {
        ptr0 = passArray8ToWasm0(header, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passArray8ToWasm0(payload, wasm.__wbindgen_malloc);
        len1 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.recordMatches(ptr0, len0, ptr1, len1);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return ret[0] !== 0;
}

/**
 * The redacted form (SPEC §6) of a stored event (canonical CBOR in, canonical CBOR out):
 * every opaque value replaced by `{"$redacted": "<its hash>"}`; id, payload hash and chain
 * unchanged. What a file store writes to its redaction overlay.
 * @param {Uint8Array | number[]} bytes
 * @returns {Uint8Array}
 */
export function redactEvent(bytes) {
    const ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.redactEvent(ptr0, len0);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v2 = getArrayU8FromWasm0(ret[0], ret[1]).slice();
    wasm.__wbindgen_free(ret[0], ret[1] * 1, 1);
    return v2;
}

/**
 * Replays a frame batch of stored events (decode, verify, chain, apply). Returns
 * `{seq, stateHash}`.
 * @param {Uint8Array | number[]} batch
 * @returns {any}
 */
export function replayLog(batch) {
    const ptr0 = passArray8ToWasm0(batch, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.replayLog(ptr0, len0);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * How many zeros a batch that reaches past a segment's reserved space appends in the same
 * write, for a segment of `alloc` bytes and the store's `reserveBytes` (the native store's
 * rule, [`lf::reserve_len`]).
 * @param {number} alloc
 * @param {number} reserve_bytes
 * @returns {number}
 */
export function reserveLen(alloc, reserve_bytes) {
    const ret = wasm.reserveLen(alloc, reserve_bytes);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return ret[0];
}

/**
 * Runs a transcript (JSON Lines text) on a fresh in-memory authority. Returns
 * `{lines, failed}`: `lines` are the runner's output lines as JSON text (byte for byte what
 * `mwp transcript` prints), `failed` whether any step's `expect` failed.
 * @param {string} text
 * @returns {any}
 */
export function runTranscript(text) {
    const ptr0 = passStringToWasm0(text, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.runTranscript(ptr0, len0);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * File name of the segment whose first record is `firstSeq`: 20 digits and `.seg`.
 * @param {number} first_seq
 * @returns {string}
 */
export function segmentName(first_seq) {
    let deferred2_0;
    let deferred2_1;
    try {
        const ret = wasm.segmentName(first_seq);
        var ptr1 = ret[0];
        var len1 = ret[1];
        if (ret[3]) {
            ptr1 = 0; len1 = 0;
            throw takeFromExternrefTable0(ret[2]);
        }
        deferred2_0 = ptr1;
        deferred2_1 = len1;
        return getStringFromWasm0(ptr1, len1);
    } finally {
        wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
    }
}

/**
 * SHA-256 (hex) of bytes.
 * @param {Uint8Array | number[]} bytes
 * @returns {string}
 */
export function sha256(bytes) {
    let deferred2_0;
    let deferred2_1;
    try {
        const ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.sha256(ptr0, len0);
        deferred2_0 = ret[0];
        deferred2_1 = ret[1];
        return getStringFromWasm0(ret[0], ret[1]);
    } finally {
        wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
    }
}

/**
 * Signs a command given in its JSON form (its `sig`, if any, is replaced) with a secret key
 * seed (64 hex digits); returns the signed command in its JSON form.
 * @param {any} command
 * @param {string} secret_key_hex
 * @returns {any}
 */
export function signCommand(command, secret_key_hex) {
    const ptr0 = passStringToWasm0(secret_key_hex, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.signCommand(command, ptr0, len0);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * Signs a head: "event `seq` of `org`/`group` has id `id` (hex)", at `atMs`, with the
 * authority's secret key seed (hex). Returns its JSON form.
 * @param {string} org
 * @param {string} group
 * @param {number} seq
 * @param {string} id
 * @param {number} at_ms
 * @param {string} secret_key_hex
 * @returns {any}
 */
export function signHead(org, group, seq, id, at_ms, secret_key_hex) {
    const val5 = +seq;
    const val6 = +at_ms;
    let ptr0, len0, ptr1, len1, ptr2, len2, ptr3, len3;
    try {
        ptr0 = passStringToWasm0(org, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passStringToWasm0(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
        ptr2 = passStringToWasm0(id, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len2 = WASM_VECTOR_LEN;
        ptr3 = passStringToWasm0(secret_key_hex, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len3 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr3) { wasm.__wbindgen_free(ptr3, len3 * 1, 1); }
        if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.signHead(ptr0, len0, ptr1, len1, val5, ptr2, len2, val6, ptr3, len3);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * The `Authorization` header value of a member-signed read (docs/http.md): `actor` signs
 * `method` and `target` (the path with its query, exactly as sent) at `at_ms` (milliseconds
 * since the epoch) with its secret key seed (hex). The bytes are built and signed by the core.
 * @param {string} method
 * @param {string} target
 * @param {string} actor
 * @param {number} at_ms
 * @param {string} secret_key_hex
 * @returns {string}
 */
export function signRead(method, target, actor, at_ms, secret_key_hex) {
    let deferred7_0;
    let deferred7_1;
    try {
        const val5 = +at_ms;
        let ptr0, len0, ptr1, len1, ptr2, len2, ptr3, len3;
        try {
            ptr0 = passStringToWasm0(method, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0(target, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
            ptr2 = passStringToWasm0(actor, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len2 = WASM_VECTOR_LEN;
            ptr3 = passStringToWasm0(secret_key_hex, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len3 = WASM_VECTOR_LEN;
        } catch (e) {
            if (ptr3) { wasm.__wbindgen_free(ptr3, len3 * 1, 1); }
            if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
            if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
            if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
            throw e;
        }
        const ret = wasm.signRead(ptr0, len0, ptr1, len1, ptr2, len2, val5, ptr3, len3);
        var ptr6 = ret[0];
        var len6 = ret[1];
        if (ret[3]) {
            ptr6 = 0; len6 = 0;
            throw takeFromExternrefTable0(ret[2]);
        }
        deferred7_0 = ptr6;
        deferred7_1 = len6;
        return getStringFromWasm0(ptr6, len6);
    } finally {
        wasm.__wbindgen_free(deferred7_0, deferred7_1, 1);
    }
}

/**
 * File name of the snapshot at `seq`: 20 digits and `.snap`.
 * @param {number} seq
 * @returns {string}
 */
export function snapshotName(seq) {
    let deferred2_0;
    let deferred2_1;
    try {
        const ret = wasm.snapshotName(seq);
        var ptr1 = ret[0];
        var len1 = ret[1];
        if (ret[3]) {
            ptr1 = 0; len1 = 0;
            throw takeFromExternrefTable0(ret[2]);
        }
        deferred2_0 = ptr1;
        deferred2_1 = len1;
        return getStringFromWasm0(ptr1, len1);
    } finally {
        wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
    }
}

/**
 * Splits a frame batch into its byte arrays.
 * @param {Uint8Array | number[]} batch
 * @returns {Uint8Array[]}
 */
export function splitBatch(batch) {
    const ptr0 = passArray8ToWasm0(batch, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.splitBatch(ptr0, len0);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v2 = getArrayJsValueFromWasm0(ret[0], ret[1]);
    wasm.__wbindgen_free(ret[0], ret[1] * 4, 4);
    return v2;
}

/**
 * The secret key seed (hex) the transcript runner derives for an actor:
 * `sha256("mwp transcript key " + actor)`. For tests and demos only.
 * @param {string} actor
 * @returns {string}
 */
export function transcriptSecretKey(actor) {
    let deferred2_0;
    let deferred2_1;
    try {
        const ptr0 = passStringToWasm0(actor, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.transcriptSecretKey(ptr0, len0);
        deferred2_0 = ret[0];
        deferred2_1 = ret[1];
        return getStringFromWasm0(ret[0], ret[1]);
    } finally {
        wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
    }
}

/**
 * Runs a transcript and returns its vector lines (see [`crate::vectors`]).
 * @param {string} text
 * @returns {string[]}
 */
export function vectorLines(text) {
    const ptr0 = passStringToWasm0(text, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.vectorLines(ptr0, len0);
    if (ret[3]) {
        throw takeFromExternrefTable0(ret[2]);
    }
    var v2 = getArrayJsValueFromWasm0(ret[0], ret[1]);
    wasm.__wbindgen_free(ret[0], ret[1] * 4, 4);
    return v2;
}

/**
 * Whether a command's signature verifies under a public key.
 * @param {any} command
 * @param {string} public_key_hex
 * @returns {boolean}
 */
export function verifyCommand(command, public_key_hex) {
    const ptr0 = passStringToWasm0(public_key_hex, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.verifyCommand(command, ptr0, len0);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return ret[0] !== 0;
}

/**
 * Checks an event's payload hash and id; throws `LOG_CORRUPT` naming the first that fails.
 * @param {any} event
 */
export function verifyEvent(event) {
    const ret = wasm.verifyEvent(event);
    if (ret[1]) {
        throw takeFromExternrefTable0(ret[0]);
    }
}

/**
 * Checks a fork proof (canonical CBOR, as a `FORK` error's `details.proof` carries it in
 * hex) with nothing but its contents, and the authority key the caller pins if given.
 * Returns `{org, group, seq, ids, kind}`; `MALFORMED` naming what fails otherwise.
 * @param {Uint8Array | number[]} bytes
 * @param {string | null} [pinned_key]
 * @returns {any}
 */
export function verifyForkProof(bytes, pinned_key) {
    let ptr0, len0, ptr1, len1;
    try {
        ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = isLikeNone(pinned_key) ? 0 : passStringToWasm0(pinned_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.verifyForkProof(ptr0, len0, ptr1, len1);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * Validates snapshot bytes in the order of SPEC §8 (schema, state hash, signature against
 * `trustedKey`, org and group binding, `seq ≥ minSeq`). Returns its header
 * `{schema, org, group, mission, seq, chain_head, state_hash, signer}`; throws
 * `SNAPSHOT_INVALID` with the reason.
 * @param {Uint8Array | number[]} bytes
 * @param {string} trusted_key
 * @param {string} org
 * @param {string} group
 * @param {number} min_seq
 * @returns {any}
 */
export function verifySnapshot(bytes, trusted_key, org, group, min_seq) {
    const val5 = +min_seq;
    let ptr0, len0, ptr1, len1, ptr2, len2, ptr3, len3;
    try {
        ptr0 = passArray8ToWasm0(bytes, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passStringToWasm0(trusted_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
        ptr2 = passStringToWasm0(org, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len2 = WASM_VECTOR_LEN;
        ptr3 = passStringToWasm0(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len3 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr3) { wasm.__wbindgen_free(ptr3, len3 * 1, 1); }
        if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.verifySnapshot(ptr0, len0, ptr1, len1, ptr2, len2, ptr3, len3, val5);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}
function __wbg_get_imports() {
    const import0 = {
        __proto__: null,
        __wbg_Error_208446807d0d1e30: function(arg0, arg1) {
            const ret = Error(getStringFromWasm0(arg0, arg1));
            return ret;
        },
        __wbg_String_8564e559799eccda: function(arg0, arg1) {
            const ret = String(arg1);
            const ptr1 = passStringToWasm0(ret, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            const len1 = WASM_VECTOR_LEN;
            getDataViewMemory0().setInt32((arg0 >>> 0) + 4 * 1, len1, true);
            getDataViewMemory0().setInt32((arg0 >>> 0) + 4 * 0, ptr1, true);
        },
        __wbg___wbindgen_bigint_get_as_i64_11da4b52cd0aedef: function(arg0, arg1) {
            const v = arg1;
            const ret = typeof(v) === 'bigint' ? v : undefined;
            getDataViewMemory0().setBigInt64((arg0 >>> 0) + 8 * 1, isLikeNone(ret) ? BigInt(0) : ret, true);
            getDataViewMemory0().setInt32((arg0 >>> 0) + 4 * 0, !isLikeNone(ret), true);
        },
        __wbg___wbindgen_boolean_get_4f1baf9a00be3c74: function(arg0) {
            const v = arg0;
            const ret = typeof(v) === 'boolean' ? v : undefined;
            return isLikeNone(ret) ? 0xFFFFFF : ret ? 1 : 0;
        },
        __wbg___wbindgen_debug_string_f249a2a76caa9a55: function(arg0, arg1) {
            const ret = debugString(arg1);
            const ptr1 = passStringToWasm0(ret, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            const len1 = WASM_VECTOR_LEN;
            getDataViewMemory0().setInt32((arg0 >>> 0) + 4 * 1, len1, true);
            getDataViewMemory0().setInt32((arg0 >>> 0) + 4 * 0, ptr1, true);
        },
        __wbg___wbindgen_in_3f58a9d3b3a7eed2: function(arg0, arg1) {
            const ret = arg0 in arg1;
            return ret;
        },
        __wbg___wbindgen_is_bigint_5fa10641e039d3ef: function(arg0) {
            const ret = typeof(arg0) === 'bigint';
            return ret;
        },
        __wbg___wbindgen_is_function_741ff2bb612836f5: function(arg0) {
            const ret = typeof(arg0) === 'function';
            return ret;
        },
        __wbg___wbindgen_is_null_c22311b1cc228e3a: function(arg0) {
            const ret = arg0 === null;
            return ret;
        },
        __wbg___wbindgen_is_object_8b968c3ab8e96595: function(arg0) {
            const val = arg0;
            const ret = typeof(val) === 'object' && val !== null;
            return ret;
        },
        __wbg___wbindgen_is_string_fc456fee5d3317de: function(arg0) {
            const ret = typeof(arg0) === 'string';
            return ret;
        },
        __wbg___wbindgen_is_undefined_be5b34249ff1fc15: function(arg0) {
            const ret = arg0 === undefined;
            return ret;
        },
        __wbg___wbindgen_jsval_eq_38d7bfbe4cc84039: function(arg0, arg1) {
            const ret = arg0 === arg1;
            return ret;
        },
        __wbg___wbindgen_jsval_loose_eq_b2f214e2e4b30e36: function(arg0, arg1) {
            const ret = arg0 == arg1;
            return ret;
        },
        __wbg___wbindgen_number_get_934b640d0889af78: function(arg0, arg1) {
            const obj = arg1;
            const ret = typeof(obj) === 'number' ? obj : undefined;
            getDataViewMemory0().setFloat64((arg0 >>> 0) + 8 * 1, isLikeNone(ret) ? 0 : ret, true);
            getDataViewMemory0().setInt32((arg0 >>> 0) + 4 * 0, !isLikeNone(ret), true);
        },
        __wbg___wbindgen_string_get_7ce8eee7fd327545: function(arg0, arg1) {
            const obj = arg1;
            const ret = typeof(obj) === 'string' ? obj : undefined;
            var ptr1 = isLikeNone(ret) ? 0 : passStringToWasm0(ret, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            var len1 = WASM_VECTOR_LEN;
            getDataViewMemory0().setInt32((arg0 >>> 0) + 4 * 1, len1, true);
            getDataViewMemory0().setInt32((arg0 >>> 0) + 4 * 0, ptr1, true);
        },
        __wbg___wbindgen_throw_4c88d8bf264fd984: function(arg0, arg1) {
            throw new Error(getStringFromWasm0(arg0, arg1));
        },
        __wbg__wbg_cb_unref_09736879a3f67559: function(arg0) {
            arg0._wbg_cb_unref();
        },
        __wbg_abort_75a93bc755ef5425: function() { return handleError(function (arg0) {
            arg0.abort();
        }, arguments); },
        __wbg_add_c133d31369f0ece2: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = arg0.add(arg1, arg2);
            return ret;
        }, arguments); },
        __wbg_add_e2c14b2b43ba1e8b: function() { return handleError(function (arg0, arg1) {
            const ret = arg0.add(arg1);
            return ret;
        }, arguments); },
        __wbg_agentimage_new: function(arg0) {
            const ret = AgentImage.__wrap(arg0);
            return ret;
        },
        __wbg_call_40b008ba32f73991: function() { return handleError(function (arg0, arg1) {
            const ret = arg0.call(arg1);
            return ret;
        }, arguments); },
        __wbg_call_a410eb4b59ed5965: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = arg0.call(arg1, arg2);
            return ret;
        }, arguments); },
        __wbg_clear_507b74bbfa06114d: function() { return handleError(function (arg0) {
            const ret = arg0.clear();
            return ret;
        }, arguments); },
        __wbg_close_70d38255291ae4c8: function(arg0) {
            arg0.close();
        },
        __wbg_count_e2319028fdda4bd5: function() { return handleError(function (arg0) {
            const ret = arg0.count();
            return ret;
        }, arguments); },
        __wbg_count_f985983ff17ebffb: function() { return handleError(function (arg0, arg1) {
            const ret = arg0.count(arg1);
            return ret;
        }, arguments); },
        __wbg_createIndex_40dc5bd2e5a23975: function() { return handleError(function (arg0, arg1, arg2, arg3, arg4) {
            const ret = arg0.createIndex(getStringFromWasm0(arg1, arg2), arg3, arg4);
            return ret;
        }, arguments); },
        __wbg_createIndex_b013acc42b756c6b: function() { return handleError(function (arg0, arg1, arg2, arg3) {
            const ret = arg0.createIndex(getStringFromWasm0(arg1, arg2), arg3);
            return ret;
        }, arguments); },
        __wbg_createObjectStore_01d46ccc50cef85f: function() { return handleError(function (arg0, arg1, arg2, arg3) {
            const ret = arg0.createObjectStore(getStringFromWasm0(arg1, arg2), arg3);
            return ret;
        }, arguments); },
        __wbg_crypto_23f565a907d30078: function(arg0) {
            const ret = arg0.crypto;
            return ret;
        },
        __wbg_deleteDatabase_57379a14a755bec7: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = arg0.deleteDatabase(getStringFromWasm0(arg1, arg2));
            return ret;
        }, arguments); },
        __wbg_deleteIndex_36d0499a076a41c7: function() { return handleError(function (arg0, arg1, arg2) {
            arg0.deleteIndex(getStringFromWasm0(arg1, arg2));
        }, arguments); },
        __wbg_deleteObjectStore_e6e047655c2a2021: function() { return handleError(function (arg0, arg1, arg2) {
            arg0.deleteObjectStore(getStringFromWasm0(arg1, arg2));
        }, arguments); },
        __wbg_delete_a1677b105dc0626e: function() { return handleError(function (arg0, arg1) {
            const ret = arg0.delete(arg1);
            return ret;
        }, arguments); },
        __wbg_done_57e08d0be6e30c02: function(arg0) {
            const ret = arg0.done;
            return ret;
        },
        __wbg_entries_7bb1459bd9b5c2b9: function(arg0) {
            const ret = Object.entries(arg0);
            return ret;
        },
        __wbg_error_029b9735617abe23: function() { return handleError(function (arg0) {
            const ret = arg0.error;
            return isLikeNone(ret) ? 0 : addToExternrefTable0(ret);
        }, arguments); },
        __wbg_from_eac91875c8a5ffa4: function(arg0) {
            const ret = Array.from(arg0);
            return ret;
        },
        __wbg_getAllKeys_08212b8e3f30bcdf: function() { return handleError(function (arg0, arg1) {
            const ret = arg0.getAllKeys(arg1);
            return ret;
        }, arguments); },
        __wbg_getAllKeys_cc55957bda37fb47: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = arg0.getAllKeys(arg1, arg2 >>> 0);
            return ret;
        }, arguments); },
        __wbg_getAllKeys_f22cbedeec86b411: function() { return handleError(function (arg0) {
            const ret = arg0.getAllKeys();
            return ret;
        }, arguments); },
        __wbg_getAll_0926d7a1f4b74bd5: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = arg0.getAll(arg1, arg2 >>> 0);
            return ret;
        }, arguments); },
        __wbg_getAll_7c588d26e2a82148: function() { return handleError(function (arg0, arg1) {
            const ret = arg0.getAll(arg1);
            return ret;
        }, arguments); },
        __wbg_getAll_fd2f81391609135a: function() { return handleError(function (arg0) {
            const ret = arg0.getAll();
            return ret;
        }, arguments); },
        __wbg_getRandomValues_d2908e0b99612b91: function() { return handleError(function (arg0, arg1) {
            arg0.getRandomValues(arg1);
        }, arguments); },
        __wbg_get_2080c49015e35254: function() { return handleError(function (arg0, arg1) {
            const ret = Reflect.get(arg0, arg1);
            return ret;
        }, arguments); },
        __wbg_get_3e7d0feae205d645: function() { return handleError(function (arg0, arg1) {
            const ret = arg0.get(arg1);
            return ret;
        }, arguments); },
        __wbg_get_635eea311fa1a291: function() { return handleError(function (arg0, arg1) {
            const ret = Reflect.get(arg0, arg1);
            return ret;
        }, arguments); },
        __wbg_get_785a6515723e5145: function(arg0, arg1, arg2) {
            const ret = arg1[arg2 >>> 0];
            var ptr1 = isLikeNone(ret) ? 0 : passStringToWasm0(ret, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            var len1 = WASM_VECTOR_LEN;
            getDataViewMemory0().setInt32((arg0 >>> 0) + 4 * 1, len1, true);
            getDataViewMemory0().setInt32((arg0 >>> 0) + 4 * 0, ptr1, true);
        },
        __wbg_get_d7176cfb76d71114: function(arg0, arg1) {
            const ret = arg0[arg1 >>> 0];
            return ret;
        },
        __wbg_get_unchecked_e6325ad374eff861: function(arg0, arg1) {
            const ret = arg0[arg1 >>> 0];
            return ret;
        },
        __wbg_idbagentstore_new: function(arg0) {
            const ret = IdbAgentStore.__wrap(arg0);
            return ret;
        },
        __wbg_idbauthority_new: function(arg0) {
            const ret = IdbAuthority.__wrap(arg0);
            return ret;
        },
        __wbg_idbreplica_new: function(arg0) {
            const ret = IdbReplica.__wrap(arg0);
            return ret;
        },
        __wbg_indexNames_3552c2afd86f0bd1: function(arg0) {
            const ret = arg0.indexNames;
            return ret;
        },
        __wbg_index_2e86e1bb441793d5: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = arg0.index(getStringFromWasm0(arg1, arg2));
            return ret;
        }, arguments); },
        __wbg_instanceof_ArrayBuffer_12cdaa4161423e6b: function(arg0) {
            let result;
            try {
                result = arg0 instanceof ArrayBuffer;
            } catch (_) {
                result = false;
            }
            const ret = result;
            return ret;
        },
        __wbg_instanceof_IdbCursor_3ce1d10ae0ff0d98: function(arg0) {
            let result;
            try {
                result = arg0 instanceof IDBCursor;
            } catch (_) {
                result = false;
            }
            const ret = result;
            return ret;
        },
        __wbg_instanceof_IdbDatabase_3fd78b576d374c8e: function(arg0) {
            let result;
            try {
                result = arg0 instanceof IDBDatabase;
            } catch (_) {
                result = false;
            }
            const ret = result;
            return ret;
        },
        __wbg_instanceof_IdbFactory_c959b1be1ad153de: function(arg0) {
            let result;
            try {
                result = arg0 instanceof IDBFactory;
            } catch (_) {
                result = false;
            }
            const ret = result;
            return ret;
        },
        __wbg_instanceof_IdbOpenDbRequest_302eb3a40ed4cc32: function(arg0) {
            let result;
            try {
                result = arg0 instanceof IDBOpenDBRequest;
            } catch (_) {
                result = false;
            }
            const ret = result;
            return ret;
        },
        __wbg_instanceof_IdbRequest_b569d50ff3c32e39: function(arg0) {
            let result;
            try {
                result = arg0 instanceof IDBRequest;
            } catch (_) {
                result = false;
            }
            const ret = result;
            return ret;
        },
        __wbg_instanceof_Map_0b4fc8b62e73f163: function(arg0) {
            let result;
            try {
                result = arg0 instanceof Map;
            } catch (_) {
                result = false;
            }
            const ret = result;
            return ret;
        },
        __wbg_instanceof_Uint8Array_d7aeb0dcb3108fea: function(arg0) {
            let result;
            try {
                result = arg0 instanceof Uint8Array;
            } catch (_) {
                result = false;
            }
            const ret = result;
            return ret;
        },
        __wbg_isArray_bcf1376d0d732d08: function(arg0) {
            const ret = Array.isArray(arg0);
            return ret;
        },
        __wbg_isSafeInteger_1a35ba4d31e71d38: function(arg0) {
            const ret = Number.isSafeInteger(arg0);
            return ret;
        },
        __wbg_iterator_e4c5e8f68ada7b58: function() {
            const ret = Symbol.iterator;
            return ret;
        },
        __wbg_keyPath_01b7f7605862dac7: function() { return handleError(function (arg0) {
            const ret = arg0.keyPath;
            return ret;
        }, arguments); },
        __wbg_key_6e6cd11010a229d7: function() { return handleError(function (arg0) {
            const ret = arg0.key;
            return ret;
        }, arguments); },
        __wbg_length_186163212ffe79c3: function(arg0) {
            const ret = arg0.length;
            return ret;
        },
        __wbg_length_672dbac592292d8a: function(arg0) {
            const ret = arg0.length;
            return ret;
        },
        __wbg_length_b03a0fabb109b1e9: function(arg0) {
            const ret = arg0.length;
            return ret;
        },
        __wbg_lowerBound_1d3efa163ac6dcce: function() { return handleError(function (arg0, arg1) {
            const ret = IDBKeyRange.lowerBound(arg0, arg1 !== 0);
            return ret;
        }, arguments); },
        __wbg_msCrypto_d5f06fad6bf1409b: function(arg0) {
            const ret = arg0.msCrypto;
            return ret;
        },
        __wbg_multiEntry_4ad8511e0c6886e0: function(arg0) {
            const ret = arg0.multiEntry;
            return ret;
        },
        __wbg_new_13de428334042d26: function(arg0) {
            const ret = new Uint8Array(arg0);
            return ret;
        },
        __wbg_new_37eb45aaf5eeb820: function() {
            const ret = new Array();
            return ret;
        },
        __wbg_new_7075786089b89c5e: function() {
            const ret = new Map();
            return ret;
        },
        __wbg_new_787b9fb330d55d78: function(arg0, arg1) {
            const ret = new Error(getStringFromWasm0(arg0, arg1));
            return ret;
        },
        __wbg_new_ba40181b3f24ac80: function(arg0, arg1) {
            try {
                var state0 = {a: arg0, b: arg1};
                var cb0 = (arg0, arg1) => {
                    const a = state0.a;
                    state0.a = 0;
                    try {
                        return wasm_bindgen__convert__closures_____invoke__h34355d76c64beb93(a, state0.b, arg0, arg1);
                    } finally {
                        state0.a = a;
                    }
                };
                const ret = new Promise(cb0);
                return ret;
            } finally {
                state0.a = 0;
            }
        },
        __wbg_new_cd4348290afae586: function() {
            const ret = new Object();
            return ret;
        },
        __wbg_new_from_slice_b8daf545a41c6aa0: function(arg0, arg1) {
            const ret = new Uint8Array(getArrayU8FromWasm0(arg0, arg1));
            return ret;
        },
        __wbg_new_typed_e09da9dae6ee5935: function(arg0, arg1) {
            try {
                var state0 = {a: arg0, b: arg1};
                var cb0 = (arg0, arg1) => {
                    const a = state0.a;
                    state0.a = 0;
                    try {
                        return wasm_bindgen__convert__closures_____invoke__h34355d76c64beb93(a, state0.b, arg0, arg1);
                    } finally {
                        state0.a = a;
                    }
                };
                const ret = new Promise(cb0);
                return ret;
            } finally {
                state0.a = 0;
            }
        },
        __wbg_new_with_length_01b143a7e5dd5a3e: function(arg0) {
            const ret = new Uint8Array(arg0 >>> 0);
            return ret;
        },
        __wbg_next_178c1651c11432b3: function(arg0) {
            const ret = arg0.next;
            return ret;
        },
        __wbg_next_af5ac6a08bb0a717: function() { return handleError(function (arg0) {
            const ret = arg0.next();
            return ret;
        }, arguments); },
        __wbg_node_86166ff8ce1f2002: function(arg0) {
            const ret = arg0.node;
            return ret;
        },
        __wbg_objectStoreNames_2b913d9b7111553d: function(arg0) {
            const ret = arg0.objectStoreNames;
            return ret;
        },
        __wbg_objectStore_a2b5ae038954c7ba: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = arg0.objectStore(getStringFromWasm0(arg1, arg2));
            return ret;
        }, arguments); },
        __wbg_of_e7ea0fcd535c1444: function(arg0, arg1) {
            const ret = Array.of(arg0, arg1);
            return ret;
        },
        __wbg_openKeyCursor_0fd569e75e8de6fe: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = arg0.openKeyCursor(arg1, __wbindgen_enum_IdbCursorDirection[arg2]);
            return ret;
        }, arguments); },
        __wbg_openKeyCursor_a1207ba7909a249f: function() { return handleError(function (arg0, arg1) {
            const ret = arg0.openKeyCursor(arg1);
            return ret;
        }, arguments); },
        __wbg_openKeyCursor_e49a5aed69e3505f: function() { return handleError(function (arg0) {
            const ret = arg0.openKeyCursor();
            return ret;
        }, arguments); },
        __wbg_open_0b7832f51fde5a5f: function() { return handleError(function (arg0, arg1, arg2, arg3) {
            const ret = arg0.open(getStringFromWasm0(arg1, arg2), arg3 >>> 0);
            return ret;
        }, arguments); },
        __wbg_open_76c6f562f13bdcfd: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = arg0.open(getStringFromWasm0(arg1, arg2));
            return ret;
        }, arguments); },
        __wbg_process_91f425a63f58e399: function(arg0) {
            const ret = arg0.process;
            return ret;
        },
        __wbg_prototypesetcall_13162965d1fe7aa3: function(arg0, arg1, arg2) {
            Uint8Array.prototype.set.call(getArrayU8FromWasm0(arg0, arg1), arg2);
        },
        __wbg_push_c9f4893fc209f768: function(arg0, arg1) {
            const ret = arg0.push(arg1);
            return ret;
        },
        __wbg_put_45e63ad2e48de8d7: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = arg0.put(arg1, arg2);
            return ret;
        }, arguments); },
        __wbg_put_480de49f0929525d: function() { return handleError(function (arg0, arg1) {
            const ret = arg0.put(arg1);
            return ret;
        }, arguments); },
        __wbg_queueMicrotask_1e8503a8a690f0a3: function(arg0) {
            const ret = arg0.queueMicrotask;
            return ret;
        },
        __wbg_queueMicrotask_4a1a4d8dd332373b: function(arg0) {
            queueMicrotask(arg0);
        },
        __wbg_randomFillSync_34b023059e3363de: function() { return handleError(function (arg0, arg1) {
            arg0.randomFillSync(arg1);
        }, arguments); },
        __wbg_require_9a7d8cc2e1d275c0: function() { return handleError(function () {
            const ret = module.require;
            return ret;
        }, arguments); },
        __wbg_resolve_dbf78ab4942478b0: function(arg0) {
            const ret = Promise.resolve(arg0);
            return ret;
        },
        __wbg_result_11a492b710594c52: function() { return handleError(function (arg0) {
            const ret = arg0.result;
            return ret;
        }, arguments); },
        __wbg_set_2793479888329cb6: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = Reflect.set(arg0, arg1, arg2);
            return ret;
        }, arguments); },
        __wbg_set_8282f7e0d2d01336: function(arg0, arg1, arg2) {
            const ret = arg0.set(arg1, arg2);
            return ret;
        },
        __wbg_set_auto_increment_f2339f2dac851902: function(arg0, arg1) {
            arg0.autoIncrement = arg1 !== 0;
        },
        __wbg_set_d2d33b52458e984a: function(arg0, arg1, arg2) {
            arg0[arg1 >>> 0] = arg2;
        },
        __wbg_set_e4b9a833d288759a: function(arg0, arg1, arg2) {
            arg0[arg1] = arg2;
        },
        __wbg_set_key_path_f98b7058a579d8c7: function(arg0, arg1) {
            arg0.keyPath = arg1;
        },
        __wbg_set_multi_entry_8abfe18dd5ef49b2: function(arg0, arg1) {
            arg0.multiEntry = arg1 !== 0;
        },
        __wbg_set_name_822e3903f3184979: function(arg0, arg1, arg2) {
            arg0.name = getStringFromWasm0(arg1, arg2);
        },
        __wbg_set_name_9fbe93711e32d4f0: function(arg0, arg1, arg2) {
            arg0.name = getStringFromWasm0(arg1, arg2);
        },
        __wbg_set_onabort_7ebb01d240653002: function(arg0, arg1) {
            arg0.onabort = arg1;
        },
        __wbg_set_oncomplete_0d4e18f44844f3be: function(arg0, arg1) {
            arg0.oncomplete = arg1;
        },
        __wbg_set_onerror_01c46f9c43941951: function(arg0, arg1) {
            arg0.onerror = arg1;
        },
        __wbg_set_onsuccess_8fa3ed2b93e36cae: function(arg0, arg1) {
            arg0.onsuccess = arg1;
        },
        __wbg_set_onupgradeneeded_e977e06888863122: function(arg0, arg1) {
            arg0.onupgradeneeded = arg1;
        },
        __wbg_set_onversionchange_c2fa20847e387f80: function(arg0, arg1) {
            arg0.onversionchange = arg1;
        },
        __wbg_set_unique_159bd0de51da86c3: function(arg0, arg1) {
            arg0.unique = arg1 !== 0;
        },
        __wbg_static_accessor_GLOBAL_THIS_003ee833af9699fc: function() {
            const ret = typeof globalThis === 'undefined' ? undefined : globalThis;
            return isLikeNone(ret) ? 0 : addToExternrefTable0(ret);
        },
        __wbg_static_accessor_GLOBAL_e4293fb22cbe77da: function() {
            const ret = typeof global === 'undefined' ? undefined : global;
            return isLikeNone(ret) ? 0 : addToExternrefTable0(ret);
        },
        __wbg_static_accessor_SELF_53bb20457401453d: function() {
            const ret = typeof self === 'undefined' ? undefined : self;
            return isLikeNone(ret) ? 0 : addToExternrefTable0(ret);
        },
        __wbg_static_accessor_WINDOW_b5e0810bfecb7feb: function() {
            const ret = typeof window === 'undefined' ? undefined : window;
            return isLikeNone(ret) ? 0 : addToExternrefTable0(ret);
        },
        __wbg_subarray_58f388a9247ac0bb: function(arg0, arg1, arg2) {
            const ret = arg0.subarray(arg1 >>> 0, arg2 >>> 0);
            return ret;
        },
        __wbg_target_e5cd9c7aa87dd8df: function(arg0) {
            const ret = arg0.target;
            return isLikeNone(ret) ? 0 : addToExternrefTable0(ret);
        },
        __wbg_then_656f253a5dd7d8ea: function(arg0, arg1, arg2) {
            const ret = arg0.then(arg1, arg2);
            return ret;
        },
        __wbg_then_e3f7f2d365708be8: function(arg0, arg1) {
            const ret = arg0.then(arg1);
            return ret;
        },
        __wbg_toString_55ffdf586349746b: function(arg0) {
            const ret = arg0.toString();
            return ret;
        },
        __wbg_transaction_a26f26d9d5badcda: function(arg0) {
            const ret = arg0.transaction;
            return isLikeNone(ret) ? 0 : addToExternrefTable0(ret);
        },
        __wbg_transaction_a33b157a857a5e54: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = arg0.transaction(arg1, __wbindgen_enum_IdbTransactionMode[arg2]);
            return ret;
        }, arguments); },
        __wbg_transaction_e0d84869bb0bca54: function() { return handleError(function (arg0, arg1, arg2, arg3, arg4) {
            const ret = arg0.transaction(arg1, getStringFromWasm0(arg2, arg3), arg4);
            return ret;
        }, arguments); },
        __wbg_unique_4709689490557d45: function(arg0) {
            const ret = arg0.unique;
            return ret;
        },
        __wbg_upperBound_6d2c4c5ea226343c: function() { return handleError(function (arg0, arg1) {
            const ret = IDBKeyRange.upperBound(arg0, arg1 !== 0);
            return ret;
        }, arguments); },
        __wbg_value_e0f328965e184931: function(arg0) {
            const ret = arg0.value;
            return ret;
        },
        __wbg_versions_6e128a981b0df859: function(arg0) {
            const ret = arg0.versions;
            return ret;
        },
        __wbindgen_generic_0000000000000001: function(arg0, arg1) {
            // Cast intrinsic for `Closure(Closure { owned: true, function: Function { arguments: [Externref], shim_idx: 499, ret: Result(Unit), inner_ret: Some(Result(Unit)) }, mutable: true }) -> Externref`.
            const ret = makeMutClosure(arg0, arg1, wasm_bindgen__convert__closures_____invoke__hfa36945eb8a05c18);
            return ret;
        },
        __wbindgen_generic_0000000000000002: function(arg0, arg1) {
            // Cast intrinsic for `Closure(Closure { owned: true, function: Function { arguments: [NamedExternref("Event")], shim_idx: 180, ret: Unit, inner_ret: Some(Unit) }, mutable: true }) -> Externref`.
            const ret = makeMutClosure(arg0, arg1, wasm_bindgen__convert__closures_____invoke__h0e02f36e4c60e55b);
            return ret;
        },
        __wbindgen_generic_0000000000000003: function(arg0, arg1) {
            // Cast intrinsic for `Closure(Closure { owned: true, function: Function { arguments: [NamedExternref("IDBVersionChangeEvent")], shim_idx: 3, ret: Unit, inner_ret: Some(Unit) }, mutable: true }) -> Externref`.
            const ret = makeMutClosure(arg0, arg1, wasm_bindgen__convert__closures_____invoke__h53a378718fc3aac2);
            return ret;
        },
        __wbindgen_generic_0000000000000004: function(arg0) {
            // Cast intrinsic for `F64 -> Externref`.
            const ret = arg0;
            return ret;
        },
        __wbindgen_generic_0000000000000005: function(arg0, arg1) {
            // Cast intrinsic for `I128 -> Externref`.
            const ret = (BigInt.asUintN(64, arg0) | (arg1 << BigInt(64)));
            return ret;
        },
        __wbindgen_generic_0000000000000006: function(arg0) {
            // Cast intrinsic for `I64 -> Externref`.
            const ret = arg0;
            return ret;
        },
        __wbindgen_generic_0000000000000007: function(arg0, arg1) {
            // Cast intrinsic for `Ref(Slice(U8)) -> NamedExternref("Uint8Array")`.
            const ret = getArrayU8FromWasm0(arg0, arg1);
            return ret;
        },
        __wbindgen_generic_0000000000000008: function(arg0, arg1) {
            // Cast intrinsic for `Ref(String) -> Externref`.
            const ret = getStringFromWasm0(arg0, arg1);
            return ret;
        },
        __wbindgen_generic_0000000000000009: function(arg0) {
            // Cast intrinsic for `U64 -> Externref`.
            const ret = BigInt.asUintN(64, arg0);
            return ret;
        },
        __wbindgen_generic_000000000000000a: function(arg0, arg1) {
            var v0 = getArrayU8FromWasm0(arg0, arg1).slice();
            wasm.__wbindgen_free(arg0, arg1 * 1, 1);
            // Cast intrinsic for `Vector(U8) -> Externref`.
            const ret = v0;
            return ret;
        },
        __wbindgen_init_externref_table: function() {
            const table = wasm.__wbindgen_externrefs;
            table.set(0, undefined);
            table.set(1024, undefined);
            table.set(1025, null);
            table.set(1026, true);
            table.set(1027, false);
        },
    };
    return {
        __proto__: null,
        "./mwp_wasm_bg.js": import0,
    };
}

function wasm_bindgen__convert__closures_____invoke__h0e02f36e4c60e55b(arg0, arg1, arg2) {
    wasm.wasm_bindgen__convert__closures_____invoke__h0e02f36e4c60e55b(arg0, arg1, arg2);
}

function wasm_bindgen__convert__closures_____invoke__h53a378718fc3aac2(arg0, arg1, arg2) {
    wasm.wasm_bindgen__convert__closures_____invoke__h53a378718fc3aac2(arg0, arg1, arg2);
}

function wasm_bindgen__convert__closures_____invoke__hfa36945eb8a05c18(arg0, arg1, arg2) {
    const ret = wasm.wasm_bindgen__convert__closures_____invoke__hfa36945eb8a05c18(arg0, arg1, arg2);
    if (ret[1]) {
        throw takeFromExternrefTable0(ret[0]);
    }
}

function wasm_bindgen__convert__closures_____invoke__h34355d76c64beb93(arg0, arg1, arg2, arg3) {
    wasm.wasm_bindgen__convert__closures_____invoke__h34355d76c64beb93(arg0, arg1, arg2, arg3);
}


const __wbindgen_enum_IdbCursorDirection = ["next", "nextunique", "prev", "prevunique"];


const __wbindgen_enum_IdbTransactionMode = ["readonly", "readwrite", "versionchange", "readwriteflush", "cleanup"];
const AgentFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_agent_free(ptr, 1));
const AgentImageFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_agentimage_free(ptr, 1));
const AuditSealerFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_auditsealer_free(ptr, 1));
const AuthorityFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_authority_free(ptr, 1));
const IdbAgentStoreFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_idbagentstore_free(ptr, 1));
const IdbAuthorityFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_idbauthority_free(ptr, 1));
const IdbReplicaFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_idbreplica_free(ptr, 1));
const LogScannerFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_logscanner_free(ptr, 1));
const ReplicaFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_replica_free(ptr, 1));
const StaticReaderFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_staticreader_free(ptr, 1));
const StoreGroupFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_storegroup_free(ptr, 1));

function addToExternrefTable0(obj) {
    const idx = wasm.__externref_table_alloc();
    wasm.__wbindgen_externrefs.set(idx, obj);
    return idx;
}

function _assertClass(instance, klass) {
    if (!(instance instanceof klass)) {
        throw new Error(`expected instance of ${klass.name}`);
    }
}

const CLOSURE_DTORS = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(state => wasm.__wbindgen_destroy_closure(state.a, state.b));

function debugString(val) {
    switch (typeof val) {
        // primitive types
        case 'number':
        case 'boolean':
        case 'undefined':
        return `${val}`;
        case 'string':
        return JSON.stringify(val);
        case 'bigint':
        return `${val}n`;
        case 'symbol':
        return val.description !== undefined
            ? `Symbol(${val.description})`
            : 'Symbol';
        case 'function':
        return typeof val.name === 'string' && val.name !== ''
            ? `Function(${val.name})`
            : 'Function';
        case 'object': {
            if (val === null) {
                return 'null';
            }
            // objects
            if (Array.isArray(val)) {
                return '[' + Array.from(val, debugString).join(', ') + ']';
            }
            // errors
            if (val instanceof Error) {
                return `${val.name}: ${val.message}\n${val.stack}`;
            }

            const toStringOutput = toString.call(val);
            // Test for built-in
            const className = /\[object ([^\]]+)\]/.exec(toStringOutput)?.[1];

            // Failed to match the standard '[object ClassName]'
            if (className === undefined) {
                return toStringOutput;
            }
            if (className === 'Object') {
                // we're a user defined class or Object
                // JSON.stringify avoids problems with cycles, and is generally much
                // easier than looping through ownProperties of `val`.
                try {
                    return 'Object(' + JSON.stringify(val) + ')';
                } catch (_) {
                    return 'Object';
                }
            }
            // TODO we could test for more things here, like `Set`s and `Map`s.
            return className;
        }
        // Per MDN: 'This list of values is exhaustive.'
        // https://developer.mozilla.org/en-US/docs/Web/JavaScript/Reference/Operators/typeof#description
    }
}

function getArrayF64FromWasm0(ptr, len) {
    ptr = ptr >>> 0;
    return getFloat64ArrayMemory0().subarray(ptr / 8, ptr / 8 + len);
}

function getArrayJsValueFromWasm0(ptr, len) {
    ptr = ptr >>> 0;
    const mem = getDataViewMemory0();
    const result = [];
    for (let i = ptr; i < ptr + 4 * len; i += 4) {
        result.push(wasm.__wbindgen_externrefs.get(mem.getUint32(i, true)));
    }
    wasm.__externref_drop_slice(ptr, len);
    return result;
}

function getArrayU8FromWasm0(ptr, len) {
    ptr = ptr >>> 0;
    return getUint8ArrayMemory0().subarray(ptr / 1, ptr / 1 + len);
}

let cachedDataViewMemory0 = null;
function getDataViewMemory0() {
    if (cachedDataViewMemory0 === null || cachedDataViewMemory0.buffer.detached === true || (cachedDataViewMemory0.buffer.detached === undefined && cachedDataViewMemory0.buffer !== wasm.memory.buffer)) {
        cachedDataViewMemory0 = new DataView(wasm.memory.buffer);
    }
    return cachedDataViewMemory0;
}

let cachedFloat64ArrayMemory0 = null;
function getFloat64ArrayMemory0() {
    if (cachedFloat64ArrayMemory0 === null || cachedFloat64ArrayMemory0.byteLength === 0) {
        cachedFloat64ArrayMemory0 = new Float64Array(wasm.memory.buffer);
    }
    return cachedFloat64ArrayMemory0;
}

function getStringFromWasm0(ptr, len) {
    ptr = ptr >>> 0;
    return decodeText(getUint8ArrayMemory0().subarray(ptr, ptr + len));
}

let cachedUint8ArrayMemory0 = null;
function getUint8ArrayMemory0() {
    if (cachedUint8ArrayMemory0 === null || cachedUint8ArrayMemory0.byteLength === 0) {
        cachedUint8ArrayMemory0 = new Uint8Array(wasm.memory.buffer);
    }
    return cachedUint8ArrayMemory0;
}

function handleError(f, args) {
    try {
        return f.apply(this, args);
    } catch (e) {
        const idx = addToExternrefTable0(e);
        wasm.__wbindgen_exn_store(idx);
    }
}

function isLikeNone(x) {
    return x === undefined || x === null;
}

function makeMutClosure(arg0, arg1, f) {
    const state = { a: arg0, b: arg1, cnt: 1 };
    const real = (...args) => {

        // First up with a closure we increment the internal reference
        // count. This ensures that the Rust closure environment won't
        // be deallocated while we're invoking it.
        state.cnt++;
        const a = state.a;
        state.a = 0;
        try {
            return f(a, state.b, ...args);
        } finally {
            state.a = a;
            real._wbg_cb_unref();
        }
    };
    real._wbg_cb_unref = () => {
        if (--state.cnt === 0) {
            wasm.__wbindgen_destroy_closure(state.a, state.b);
            state.a = 0;
            CLOSURE_DTORS.unregister(state);
        }
    };
    CLOSURE_DTORS.register(real, state, state);
    return real;
}

function passArray8ToWasm0(arg, malloc) {
    const ptr = malloc(arg.length * 1, 1) >>> 0;
    getUint8ArrayMemory0().set(arg, ptr / 1);
    WASM_VECTOR_LEN = arg.length;
    return ptr;
}

function passArrayF64ToWasm0(arg, malloc) {
    const ptr = malloc(arg.length * 8, 8) >>> 0;
    getFloat64ArrayMemory0().set(arg, ptr / 8);
    WASM_VECTOR_LEN = arg.length;
    return ptr;
}

function passArrayJsValueToWasm0(array, malloc) {
    const ptr = malloc(array.length * 4, 4) >>> 0;
    for (let i = 0; i < array.length; i++) {
        const add = addToExternrefTable0(array[i]);
        getDataViewMemory0().setUint32(ptr + 4 * i, add, true);
    }
    WASM_VECTOR_LEN = array.length;
    return ptr;
}

function passStringToWasm0(arg, malloc, realloc) {
    if (realloc === undefined) {
        const buf = cachedTextEncoder.encode(arg);
        const ptr = malloc(buf.length, 1) >>> 0;
        getUint8ArrayMemory0().subarray(ptr, ptr + buf.length).set(buf);
        WASM_VECTOR_LEN = buf.length;
        return ptr;
    }

    let len = arg.length;
    let ptr = malloc(len, 1) >>> 0;

    const mem = getUint8ArrayMemory0();

    let offset = 0;

    for (; offset < len; offset++) {
        const code = arg.charCodeAt(offset);
        if (code > 0x7F) break;
        mem[ptr + offset] = code;
    }
    if (offset !== len) {
        if (offset !== 0) {
            arg = arg.slice(offset);
        }
        ptr = realloc(ptr, len, len = offset + arg.length * 3, 1) >>> 0;
        const view = getUint8ArrayMemory0().subarray(ptr + offset, ptr + len);
        const ret = cachedTextEncoder.encodeInto(arg, view);

        offset += ret.written;
        ptr = realloc(ptr, len, offset, 1) >>> 0;
    }

    WASM_VECTOR_LEN = offset;
    return ptr;
}

function takeFromExternrefTable0(idx) {
    const value = wasm.__wbindgen_externrefs.get(idx);
    wasm.__externref_table_dealloc(idx);
    return value;
}

let cachedTextDecoder = new TextDecoder('utf-8', { ignoreBOM: true });
cachedTextDecoder.decode();
const MAX_SAFARI_DECODE_BYTES = 2146435072;
let numBytesDecoded = 0;
function decodeText(bytes) {
    numBytesDecoded += bytes.length;
    if (numBytesDecoded >= MAX_SAFARI_DECODE_BYTES) {
        cachedTextDecoder = new TextDecoder('utf-8', { ignoreBOM: true });
        cachedTextDecoder.decode();
        numBytesDecoded = bytes.length;
    }
    return cachedTextDecoder.decode(bytes);
}

const cachedTextEncoder = new TextEncoder();

if (!('encodeInto' in cachedTextEncoder)) {
    cachedTextEncoder.encodeInto = function (arg, view) {
        const buf = cachedTextEncoder.encode(arg);
        view.set(buf);
        return {
            read: arg.length,
            written: buf.length
        };
    };
}

let WASM_VECTOR_LEN = 0;

let wasmModule, wasmInstance, wasm;
function __wbg_finalize_init(instance, module) {
    wasmInstance = instance;
    wasm = instance.exports;
    wasmModule = module;
    cachedDataViewMemory0 = null;
    cachedFloat64ArrayMemory0 = null;
    cachedUint8ArrayMemory0 = null;
    wasm.__wbindgen_start();
    return wasm;
}

async function __wbg_load(module, imports) {
    if (typeof Response === 'function' && module instanceof Response) {
        if (!module.ok) {
            throw new Error(`failed to fetch Wasm: ${module.status} ${module.statusText} fetching '${module.url}'`);
        }

        if (typeof WebAssembly.instantiateStreaming === 'function') {
            try {
                return await WebAssembly.instantiateStreaming(module, imports);
            } catch (e) {
                const validResponse = expectedResponseType(module.type);

                if (validResponse && module.headers.get('Content-Type') !== 'application/wasm') {
                    console.warn("`WebAssembly.instantiateStreaming` failed because your server does not serve Wasm with `application/wasm` MIME type. Falling back to `WebAssembly.instantiate` which is slower. Original error:\n", e);

                } else { throw e; }
            }
        }

        const bytes = await module.arrayBuffer();
        return await WebAssembly.instantiate(bytes, imports);
    } else {
        const instance = await WebAssembly.instantiate(module, imports);

        if (instance instanceof WebAssembly.Instance) {
            return { instance, module };
        } else {
            return instance;
        }
    }

    function expectedResponseType(type) {
        switch (type) {
            case 'basic': case 'cors': case 'default': return true;
        }
        return false;
    }
}

function initSync(module) {
    if (wasm !== undefined) return wasm;


    if (module !== undefined) {
        if (Object.getPrototypeOf(module) === Object.prototype) {
            ({module} = module)
        } else {
            console.warn('using deprecated parameters for `initSync()`; pass a single object instead')
        }
    }

    const imports = __wbg_get_imports();
    if (!(module instanceof WebAssembly.Module)) {
        module = new WebAssembly.Module(module);
    }
    const instance = new WebAssembly.Instance(module, imports);
    return __wbg_finalize_init(instance, module);
}

let __wbg_init_promise;
async function __wbg_init(module_or_path) {
    if (wasm !== undefined) return wasm;
    if (__wbg_init_promise === undefined) {
        __wbg_init_promise = __wbg_init_once(module_or_path);
        __wbg_init_promise.catch(() => { __wbg_init_promise = undefined; });
    }
    return __wbg_init_promise;
}

async function __wbg_init_once(module_or_path) {

    if (module_or_path !== undefined) {
        if (Object.getPrototypeOf(module_or_path) === Object.prototype) {
            ({module_or_path} = module_or_path)
        } else {
            console.warn('using deprecated parameters for the initialization function; pass a single object instead')
        }
    }

    if (module_or_path === undefined) {
        module_or_path = new URL('mwp_wasm_bg.wasm', import.meta.url);
    }
    const imports = __wbg_get_imports();

    if (typeof module_or_path === 'string' || (typeof Request === 'function' && module_or_path instanceof Request) || (typeof URL === 'function' && module_or_path instanceof URL)) {
        module_or_path = fetch(module_or_path);
    }

    const { instance, module } = await __wbg_load(await module_or_path, imports);

    return __wbg_finalize_init(instance, module);
}

export { initSync, __wbg_init as default };
