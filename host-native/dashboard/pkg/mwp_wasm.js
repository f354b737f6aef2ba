/* @ts-self-types="./mwp_wasm.d.ts" */

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
        const ret = wasm.idbreplica_events(this.__wbg_ptr, after, !isLikeNone(limit), isLikeNone(limit) ? 0 : limit);
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
        const ptr0 = passArray8ToWasm0Checked(batch, wasm.__wbindgen_malloc);
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
        const ptr0 = passArray8ToWasm0Checked(batch, wasm.__wbindgen_malloc);
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
        const ptr0 = passStringToWasm0Checked(authority_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
            ptr0 = passStringToWasm0Checked(name, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0Checked(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
            ptr0 = passArray8ToWasm0Checked(snapshot, wasm.__wbindgen_malloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0Checked(trusted_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
            ptr2 = passStringToWasm0Checked(org, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
        const ptr0 = passArray8ToWasm0Checked(bytes, wasm.__wbindgen_malloc);
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
        const ptr0 = passStringToWasm0Checked(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
        const ptr0 = passArray8ToWasm0Checked(batch, wasm.__wbindgen_malloc);
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
        const ptr0 = passStringToWasm0Checked(authority_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
            ptr0 = passArray8ToWasm0Checked(snapshot, wasm.__wbindgen_malloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0Checked(trusted_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
            ptr2 = passStringToWasm0Checked(org, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
            ptr0 = passStringToWasm0Checked(path, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passArray8ToWasm0Checked(bytes, wasm.__wbindgen_malloc);
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
        const ptr0 = passStringToWasm0Checked(path, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
            ptr0 = passStringToWasm0Checked(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0Checked(authority_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
            ptr2 = isLikeNone(start) ? 0 : passStringToWasm0Checked(start, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
 * Builds and signs a snapshot of a canonical state (CBOR bytes, as `stateCbor()` gives it)
 * with the authority's secret key seed (hex). Returns the snapshot's canonical CBOR.
 * @param {Uint8Array | number[]} state_cbor
 * @param {string} secret_key_hex
 * @returns {Uint8Array}
 */
export function buildSnapshot(state_cbor, secret_key_hex) {
    let ptr0, len0, ptr1, len1;
    try {
        ptr0 = passArray8ToWasm0Checked(state_cbor, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passStringToWasm0Checked(secret_key_hex, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
    const ptr0 = passArray8ToWasm0Checked(bytes, wasm.__wbindgen_malloc);
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
 * Whether `event` (JSON form, or canonical CBOR bytes) continues a reader's place in
 * `group`'s log: after seq `seq`, whose event id (hex) is `id` when the reader knows it
 * (`undefined` when it started after `seq` without reading that event; before seq 1 it is
 * all zeros and need not be given). Returns `null` when the event continues it, else the
 * first break, in the core's order: `{kind: "group"}` (another group),
 * `{kind: "seq", expected, received}` (not the next seq: a gap when `received` is past
 * `expected`, a step back below it), `{kind: "prev", seq, expected, received}` (its `prev`,
 * `received`, is not the id of the event before, `expected`; ids in hex), and, for an event
 * that continues it, `{kind: "id", seq, reason}` when it does not hash to its payload hash
 * and id ([`mwp_core::Event::verify`]): the id a tail goes on from is then one the event
 * holds, not one a server claims. Throws `MALFORMED` for a group, seq, id or event that is
 * not one.
 * @param {string} group
 * @param {number} seq
 * @param {string | null | undefined} id
 * @param {any} event
 * @returns {any}
 */
export function chainCheck(group, seq, id, event) {
    const val3 = +seq;
    let ptr0, len0, ptr1, len1;
    try {
        ptr0 = passStringToWasm0Checked(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = isLikeNone(id) ? 0 : passStringToWasm0Checked(id, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
    } catch (e) {
        if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
        if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
        throw e;
    }
    const ret = wasm.chainCheck(ptr0, len0, val3, ptr1, len1, event);
    if (ret[2]) {
        throw takeFromExternrefTable0(ret[1]);
    }
    return takeFromExternrefTable0(ret[0]);
}

/**
 * Decodes a stored event (canonical CBOR) into its JSON form. Does not verify it.
 * @param {Uint8Array | number[]} bytes
 * @returns {any}
 */
export function decodeEvent(bytes) {
    const ptr0 = passArray8ToWasm0Checked(bytes, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.decodeEvent(ptr0, len0);
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
    const ptr0 = passStringToWasm0Checked(name, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.deleteIdbStore(ptr0, len0);
    return ret;
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
 * The error a server answered with (`body`: its JSON form, or canonical CBOR), as the
 * native client reads it (the core's `Error::from_answer`): `{code, message, details}`, the
 * message quoted printable and cut at 1,000 characters; `undefined` unless it is an mwp
 * error with a code of the spec's. In every build: the dashboard's module (the `dashboard`
 * feature, without `full`) runs the npm package's `Client`, which reads every answer with it.
 * @param {Uint8Array | number[]} body
 * @returns {any}
 */
export function errorOfAnswer(body) {
    const ptr0 = passArray8ToWasm0Checked(body, wasm.__wbindgen_malloc);
    const len0 = WASM_VECTOR_LEN;
    const ret = wasm.errorOfAnswer(ptr0, len0);
    return ret;
}

/**
 * Joins byte arrays into one frame batch.
 * @param {Uint8Array[]} items
 * @returns {Uint8Array}
 */
export function frameBatch(items) {
    const ptr0 = passArrayJsValueToWasm0Checked(items, wasm.__wbindgen_malloc);
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
 * `text` fit for a terminal, as the native client quotes a server's words (the core's
 * `printable`): control characters other than newline and tab escaped (`\u{1b}`), cut after
 * `max` characters with `…`. For a server's text that is not an mwp error.
 * @param {string} text
 * @param {number} max
 * @returns {string}
 */
export function printable(text, max) {
    let deferred3_0;
    let deferred3_1;
    try {
        const val2 = +max;
        const ptr0 = passStringToWasm0Checked(text, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        const len0 = WASM_VECTOR_LEN;
        const ret = wasm.printable(ptr0, len0, val2);
        deferred3_0 = ret[0];
        deferred3_1 = ret[1];
        return getStringFromWasm0(ret[0], ret[1]);
    } finally {
        wasm.__wbindgen_free(deferred3_0, deferred3_1, 1);
    }
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
        const ptr0 = passStringToWasm0Checked(secret_key_hex, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
 * The redacted form (SPEC §6) of a stored event (canonical CBOR in, canonical CBOR out):
 * every opaque value replaced by `{"$redacted": "<its hash>"}`; id, payload hash and chain
 * unchanged. What a file store writes to its redaction overlay.
 * @param {Uint8Array | number[]} bytes
 * @returns {Uint8Array}
 */
export function redactEvent(bytes) {
    const ptr0 = passArray8ToWasm0Checked(bytes, wasm.__wbindgen_malloc);
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
 * SHA-256 (hex) of bytes.
 * @param {Uint8Array | number[]} bytes
 * @returns {string}
 */
export function sha256(bytes) {
    let deferred2_0;
    let deferred2_1;
    try {
        const ptr0 = passArray8ToWasm0Checked(bytes, wasm.__wbindgen_malloc);
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
        ptr0 = passStringToWasm0Checked(org, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passStringToWasm0Checked(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
        ptr2 = passStringToWasm0Checked(id, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len2 = WASM_VECTOR_LEN;
        ptr3 = passStringToWasm0Checked(secret_key_hex, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
            ptr0 = passStringToWasm0Checked(method, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len0 = WASM_VECTOR_LEN;
            ptr1 = passStringToWasm0Checked(target, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len1 = WASM_VECTOR_LEN;
            ptr2 = passStringToWasm0Checked(actor, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            len2 = WASM_VECTOR_LEN;
            ptr3 = passStringToWasm0Checked(secret_key_hex, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
 * Splits a frame batch into its byte arrays.
 * @param {Uint8Array | number[]} batch
 * @returns {Uint8Array[]}
 */
export function splitBatch(batch) {
    const ptr0 = passArray8ToWasm0Checked(batch, wasm.__wbindgen_malloc);
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
        const ptr0 = passStringToWasm0Checked(actor, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
        ptr0 = passArray8ToWasm0Checked(bytes, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = isLikeNone(pinned_key) ? 0 : passStringToWasm0Checked(pinned_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
        ptr0 = passArray8ToWasm0Checked(bytes, wasm.__wbindgen_malloc);
        len0 = WASM_VECTOR_LEN;
        ptr1 = passStringToWasm0Checked(trusted_key, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len1 = WASM_VECTOR_LEN;
        ptr2 = passStringToWasm0Checked(org, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
        len2 = WASM_VECTOR_LEN;
        ptr3 = passStringToWasm0Checked(group, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
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
        __wbg_call_a410eb4b59ed5965: function() { return handleError(function (arg0, arg1, arg2) {
            const ret = arg0.call(arg1, arg2);
            return ret;
        }, arguments); },
        __wbg_charCodeAt_851946d8f1279e11: function(arg0, arg1) {
            const ret = arg0.charCodeAt(arg1 >>> 0);
            return ret;
        },
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
        __wbg_entries_78230b4c7535c915: function() { return handleError(function (arg0) {
            const ret = Object.entries(arg0);
            return ret;
        }, arguments); },
        __wbg_error_029b9735617abe23: function() { return handleError(function (arg0) {
            const ret = arg0.error;
            return isLikeNone(ret) ? 0 : addToExternrefTable0(ret);
        }, arguments); },
        __wbg_from_ea4ec5c0a46afcf5: function() { return handleError(function (arg0) {
            const ret = Array.from(arg0);
            return ret;
        }, arguments); },
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
        __wbg_get_2080c49015e35254: function() { return handleError(function (arg0, arg1) {
            const ret = Reflect.get(arg0, arg1);
            return ret;
        }, arguments); },
        __wbg_get_3e7d0feae205d645: function() { return handleError(function (arg0, arg1) {
            const ret = arg0.get(arg1);
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
        __wbg_instanceof_Error_74e3cca0c4a69161: function(arg0) {
            let result;
            try {
                result = arg0 instanceof Error;
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
        __wbg_instanceof_Set_7768a118d44ac511: function(arg0) {
            let result;
            try {
                result = arg0 instanceof Set;
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
        __wbg_isArray_9ba94a64b9338d07: function() { return handleError(function (arg0) {
            const ret = Array.isArray(arg0);
            return ret;
        }, arguments); },
        __wbg_isArray_bcf1376d0d732d08: function(arg0) {
            const ret = Array.isArray(arg0);
            return ret;
        },
        __wbg_isView_7c4f5a7c257b3a84: function(arg0) {
            const ret = ArrayBuffer.isView(arg0);
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
        __wbg_length_e83e819f48c774e4: function(arg0) {
            const ret = arg0.length;
            return ret;
        },
        __wbg_lowerBound_1d3efa163ac6dcce: function() { return handleError(function (arg0, arg1) {
            const ret = IDBKeyRange.lowerBound(arg0, arg1 !== 0);
            return ret;
        }, arguments); },
        __wbg_message_43d8c8f1d543a349: function(arg0) {
            const ret = arg0.message;
            return ret;
        },
        __wbg_multiEntry_4ad8511e0c6886e0: function(arg0) {
            const ret = arg0.multiEntry;
            return ret;
        },
        __wbg_new_37eb45aaf5eeb820: function() {
            const ret = new Array();
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
                        return wasm_bindgen__convert__closures_____invoke__hb98d63cc49481475(a, state0.b, arg0, arg1);
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
                        return wasm_bindgen__convert__closures_____invoke__hb98d63cc49481475(a, state0.b, arg0, arg1);
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
        __wbg_parse_c3f72b5a24f83c01: function() { return handleError(function (arg0, arg1) {
            const ret = JSON.parse(getStringFromWasm0(arg0, arg1));
            return ret;
        }, arguments); },
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
        __wbg_set_auto_increment_f2339f2dac851902: function(arg0, arg1) {
            arg0.autoIncrement = arg1 !== 0;
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
        __wbg_toString_ac62c4a5cb3e62c7: function() { return handleError(function (arg0, arg1) {
            const ret = arg0.toString(arg1);
            return ret;
        }, arguments); },
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
        __wbindgen_generic_0000000000000001: function(arg0, arg1) {
            // Cast intrinsic for `Closure(Closure { owned: true, function: Function { arguments: [Externref], shim_idx: 139, ret: Result(Unit), inner_ret: Some(Result(Unit)) }, mutable: true }) -> Externref`.
            const ret = makeMutClosure(arg0, arg1, wasm_bindgen__convert__closures_____invoke__h60702a48838d1764);
            return ret;
        },
        __wbindgen_generic_0000000000000002: function(arg0, arg1) {
            // Cast intrinsic for `Closure(Closure { owned: true, function: Function { arguments: [NamedExternref("Event")], shim_idx: 100, ret: Unit, inner_ret: Some(Unit) }, mutable: true }) -> Externref`.
            const ret = makeMutClosure(arg0, arg1, wasm_bindgen__convert__closures_____invoke__h0646f7141cb91c20);
            return ret;
        },
        __wbindgen_generic_0000000000000003: function(arg0, arg1) {
            // Cast intrinsic for `Closure(Closure { owned: true, function: Function { arguments: [NamedExternref("IDBVersionChangeEvent")], shim_idx: 6, ret: Unit, inner_ret: Some(Unit) }, mutable: true }) -> Externref`.
            const ret = makeMutClosure(arg0, arg1, wasm_bindgen__convert__closures_____invoke__hd543b1dacafd2ffb);
            return ret;
        },
        __wbindgen_generic_0000000000000004: function(arg0) {
            // Cast intrinsic for `F64 -> Externref`.
            const ret = arg0;
            return ret;
        },
        __wbindgen_generic_0000000000000005: function(arg0, arg1) {
            // Cast intrinsic for `Ref(String) -> Externref`.
            const ret = getStringFromWasm0(arg0, arg1);
            return ret;
        },
        __wbindgen_generic_0000000000000006: function(arg0, arg1) {
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

function wasm_bindgen__convert__closures_____invoke__h0646f7141cb91c20(arg0, arg1, arg2) {
    wasm.wasm_bindgen__convert__closures_____invoke__h0646f7141cb91c20(arg0, arg1, arg2);
}

function wasm_bindgen__convert__closures_____invoke__hd543b1dacafd2ffb(arg0, arg1, arg2) {
    wasm.wasm_bindgen__convert__closures_____invoke__hd543b1dacafd2ffb(arg0, arg1, arg2);
}

function wasm_bindgen__convert__closures_____invoke__h60702a48838d1764(arg0, arg1, arg2) {
    const ret = wasm.wasm_bindgen__convert__closures_____invoke__h60702a48838d1764(arg0, arg1, arg2);
    if (ret[1]) {
        throw takeFromExternrefTable0(ret[0]);
    }
}

function wasm_bindgen__convert__closures_____invoke__hb98d63cc49481475(arg0, arg1, arg2, arg3) {
    wasm.wasm_bindgen__convert__closures_____invoke__hb98d63cc49481475(arg0, arg1, arg2, arg3);
}


const __wbindgen_enum_IdbCursorDirection = ["next", "nextunique", "prev", "prevunique"];


const __wbindgen_enum_IdbTransactionMode = ["readonly", "readwrite", "versionchange", "readwriteflush", "cleanup"];
const IdbReplicaFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_idbreplica_free(ptr, 1));
const ReplicaFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_replica_free(ptr, 1));
const StaticReaderFinalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(ptr => wasm.__wbg_staticreader_free(ptr, 1));

function addToExternrefTable0(obj) {
    const idx = wasm.__externref_table_alloc();
    wasm.__wbindgen_externrefs.set(idx, obj);
    return idx;
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

/** passStringToWasm0, for an export's argument: refused unless of the right type (scripts/guard-glue.mjs). */
function passStringToWasm0Checked(arg, ...rest) {
    if (typeof arg !== "string") throw mwpBadArgument("a string", arg);
    if (typeof arg.isWellFormed === "function" ? !arg.isWellFormed() : /\p{Cs}/u.test(arg)) throw mwpBadArgument("Unicode text (a string without lone surrogates)", arg);
    return passStringToWasm0(arg, ...rest);
}

/** passArray8ToWasm0, for an export's argument: refused unless of the right type (scripts/guard-glue.mjs). */
function passArray8ToWasm0Checked(arg, ...rest) {
    if (!(arg instanceof Uint8Array)) throw mwpBadArgument("a Uint8Array", arg);
    return passArray8ToWasm0(arg, ...rest);
}

/** passArrayJsValueToWasm0, for an export's argument: refused unless of the right type (scripts/guard-glue.mjs). */
function passArrayJsValueToWasm0Checked(arg, ...rest) {
    if (!Array.isArray(arg) || arg.length > 1048576) throw mwpBadArgument("an array of at most 1048576 items", arg);
    return passArrayJsValueToWasm0(arg, ...rest);
}

/** A wrong argument, refused before it enters the module (scripts/guard-glue.mjs). */
function mwpBadArgument(expected, arg) {
    let got = typeof arg;
    try {
        if (arg === null) got = "null";
        else if (Array.isArray(arg)) got = "an array";
        else if (typeof arg === "object") got = arg.constructor?.name ?? "an object";
    } catch {
        // A proxy whose traps throw: an object, and nothing more is asked of it.
    }
    const e = new Error(`an argument must be ${expected}, got ${got}`);
    e.name = "MwpError";
    e.code = "MALFORMED";
    e.details = { expected, got };
    return e;
}
