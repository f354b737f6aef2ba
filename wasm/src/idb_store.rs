//! IndexedDB stores (SPEC §9) for the authority and for replicas, on the `idb` crate: the
//! store both share and [`IdbReplica`]; the authority is in `idb_authority` (the `full`
//! build only).
//!
//! One database per store, named by the caller (version 2), with these object stores:
//!
//! | object store | key | value |
//! |---|---|---|
//! | `batches` | seq of the record's first event (number) | a frame batch ([`crate::frames`]): the canonical CBOR of consecutive events, one frame each |
//! | `receipts` | `[actor, action]` | the receipt's canonical CBOR (authority only) |
//! | `meta` | `"head"` | `{group, seq, head}`: the last event written (for a replica, its cursor) |
//! | `meta` | `"checkpoint"` | `{seq, state_hash, state}`: the canonical state at `seq` |
//! | `events` | seq (number) | version 1's layout, one event per record: emptied into `batches` on open |
//!
//! **One record per batch.** The events of one accept or apply batch are one `batches`
//! record, so a batch of a thousand events costs one IndexedDB write, not a thousand. Records
//! tile the log: each starts right after the one before (a restored replica's records resume
//! after the snapshot's seq), so the event at seq `s` is frame `s - key` of the record with
//! the greatest key `≤ s`.
//!
//! **Transactions.** Everything one transition writes — the events of an accept or apply
//! batch, their receipts, the head, a state checkpoint when due, and the erasure of redacted
//! values — goes into **one** `readwrite` transaction opened with `durability: "strict"`, and
//! the results are handed out only after it completes. Records are *added*, never
//! overwritten: a handle appends at its own seq + 1, so if another connection (another tab)
//! appended after that seq first, a record with that key exists and the transaction aborts.
//! If it aborts, nothing of it is
//! visible, and the store is **poisoned** (every later call fails with `STORAGE`): memory had
//! already moved ahead, so the only way on is to reopen, which rebuilds from what was
//! committed. There is no separate recovery routine: opening is replay from the last
//! checkpoint.

use idb::{CursorDirection, Database, KeyRange, ObjectStore, Query, TransactionMode};
use mwp_core::replica::Replica as CoreReplica;
use mwp_core::{Code, Error, Event, EventKind, GroupState, Hash, Id};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::codec::{count, num, to_js, uint};
use crate::error::{storage, StoreError};
use crate::frames;
use crate::replica::{
    frontier_of, offer_frames, restore_snapshot, state_from_cbor, state_hash_of, Pending,
};

/// Version 1's one-record-per-event log: kept only to be emptied into [`BATCHES`] on open.
const EVENTS: &str = "events";
const BATCHES: &str = "batches";
const RECEIPTS: &str = "receipts";
const META: &str = "meta";
const VERSION: u32 = 2;

/// Events per `batches` record when version 1's events are regrouped.
const MIGRATION_RECORD: usize = 1000;

/// Events between two state checkpoints, unless the caller says otherwise.
pub const DEFAULT_CHECKPOINT_EVERY: u64 = 1000;

#[wasm_bindgen]
extern "C" {
    /// `IDBDatabase`, seen through the one method bound here.
    #[wasm_bindgen(js_name = IDBDatabase)]
    type RawDatabase;

    /// `IDBDatabase.transaction(stores, mode, options)`: web-sys keeps the options form
    /// behind its unstable-API flag, so it is bound here.
    #[wasm_bindgen(method, catch, js_name = transaction)]
    fn transaction_with_options(
        this: &RawDatabase,
        stores: &js_sys::Array,
        mode: &str,
        options: &js_sys::Object,
    ) -> Result<web_sys::IdbTransaction, JsValue>;
}

fn idb_err(what: &str) -> impl Fn(idb::Error) -> Error + '_ {
    move |e| storage(format!("{what}: {e}"))
}

fn put_prop(obj: &js_sys::Object, key: &str, value: &JsValue) {
    // Setting a property on a fresh plain object cannot fail.
    let _ = js_sys::Reflect::set(obj, &key.into(), value);
}

fn get(obj: &JsValue, key: &str) -> JsValue {
    js_sys::Reflect::get(obj, &key.into()).unwrap_or(JsValue::UNDEFINED)
}

fn bytes_field(obj: &JsValue, key: &str) -> Result<Vec<u8>, Error> {
    get(obj, key)
        .dyn_into::<js_sys::Uint8Array>()
        .map(|a| a.to_vec())
        .map_err(|_| Error::corrupt(format!("stored `{key}` is not a Uint8Array")))
}

fn seq_field(obj: &JsValue, key: &str) -> Result<u64, Error> {
    let n = get(obj, key)
        .as_f64()
        .ok_or_else(|| Error::corrupt(format!("stored `{key}` is not a number")))?;
    uint(n, key).map_err(|e| Error::corrupt(e.message))
}

/// What one transition writes.
#[derive(Default)]
struct WriteSet {
    /// Events with their canonical bytes (consecutive seqs): one `batches` record.
    events: Vec<(Event, Vec<u8>)>,
    /// Whether the events' receipts are written (an authority's store).
    receipts: bool,
    checkpoint: Option<Checkpoint>,
    /// Stored `batches` records rewritten with redacted values: (key, frame batch).
    rewritten: Vec<(u64, Vec<u8>)>,
    /// Test hook: abort the transaction after issuing every write.
    abort: bool,
}

/// A state checkpoint, encoded once from the live state (no copy of the state is made).
pub(crate) struct Checkpoint {
    seq: u64,
    head: Hash,
    /// The canonical state; its SHA-256 is the state hash.
    state: Vec<u8>,
}

impl Checkpoint {
    pub(crate) fn of(state: &GroupState) -> Result<Checkpoint, Error> {
        Ok(Checkpoint {
            seq: state.seq,
            head: state.head,
            state: state.to_cbor()?,
        })
    }
}

/// A connection to one store's database.
pub(crate) struct Store {
    pub(crate) db: web_sys::IdbDatabase,
    pub(crate) group: Id,
}

impl Store {
    pub(crate) async fn open(name: &str, group: Id) -> Result<Store, Error> {
        let db = Database::builder(name)
            .version(VERSION)
            .add_object_store(idb::builder::ObjectStoreBuilder::new(EVENTS))
            .add_object_store(idb::builder::ObjectStoreBuilder::new(BATCHES))
            .add_object_store(idb::builder::ObjectStoreBuilder::new(RECEIPTS))
            .add_object_store(idb::builder::ObjectStoreBuilder::new(META))
            .build()
            .await
            .map_err(idb_err("open"))?;
        let store = Store {
            db: db.into(),
            group,
        };
        store.migrate_v1().await?;
        Ok(store)
    }

    /// Moves version 1's events (one record each) into `batches` records of up to
    /// [`MIGRATION_RECORD`] consecutive events, in one transaction. A no-op once done.
    async fn migrate_v1(&self) -> Result<(), Error> {
        let tx = self
            .database()
            .transaction(&[EVENTS], TransactionMode::ReadOnly)
            .map_err(idb_err("read transaction"))?;
        let count = tx
            .object_store(EVENTS)
            .map_err(idb_err("events"))?
            .count(None)
            .map_err(idb_err("count version 1 events"))?
            .await
            .map_err(idb_err("count version 1 events"))?;
        drop(tx);
        if count == 0 {
            return Ok(());
        }
        let (raw, done) = readwrite(&self.db, &[EVENTS, BATCHES])?;
        let tx = idb::Transaction::from(raw.clone());
        let events = tx.object_store(EVENTS).map_err(idb_err("events"))?;
        let batches = tx.object_store(BATCHES).map_err(idb_err("batches"))?;
        let keys = events
            .get_all_keys(None, None)
            .map_err(idb_err("read version 1 events"))?
            .await
            .map_err(idb_err("read version 1 events"))?;
        let values = events
            .get_all(None, None)
            .map_err(idb_err("read version 1 events"))?
            .await
            .map_err(idb_err("read version 1 events"))?;
        let mut record: Option<(u64, Vec<u8>, usize)> = None;
        for (key, value) in keys.iter().zip(values) {
            let seq = key_seq(key)?;
            let bytes = value
                .dyn_into::<js_sys::Uint8Array>()
                .map_err(|_| Error::corrupt(format!("stored event {seq} is not a Uint8Array")))?
                .to_vec();
            if let Some((first, frames, n)) = &record {
                if seq != first + *n as u64 || *n == MIGRATION_RECORD {
                    add_record(&batches, *first, frames)?;
                    record = None;
                }
            }
            let (_, frames, n) = record.get_or_insert_with(|| (seq, Vec::new(), 0));
            frames::push(frames, &bytes)?;
            *n += 1;
        }
        if let Some((first, frames, _)) = &record {
            add_record(&batches, *first, frames)?;
        }
        events.clear().map_err(idb_err("clear version 1 events"))?;
        drop(tx);
        wasm_bindgen_futures::JsFuture::from(done)
            .await
            .map(|_| ())
            .map_err(|_| storage("moving version 1 events into batch records was aborted"))
    }

    fn database(&self) -> Database {
        Database::from(self.db.clone())
    }

    /// Reads the checkpoint and replays every event after it. Returns the state and the seq
    /// of the checkpoint.
    pub(crate) async fn load(&self) -> Result<(Option<GroupState>, u64), Error> {
        let tx = self
            .database()
            .transaction(&[BATCHES, META], TransactionMode::ReadOnly)
            .map_err(idb_err("read transaction"))?;
        let meta = tx.object_store(META).map_err(idb_err("meta"))?;
        let head = meta
            .get(Query::from(JsValue::from("head")))
            .map_err(idb_err("read head"))?
            .await
            .map_err(idb_err("read head"))?;
        let checkpoint = meta
            .get(Query::from(JsValue::from("checkpoint")))
            .map_err(idb_err("read checkpoint"))?
            .await
            .map_err(idb_err("read checkpoint"))?;
        let (mut state, from) = match checkpoint {
            Some(cp) => {
                let state = state_from_cbor(&bytes_field(&cp, "state")?)?;
                let hash = get(&cp, "state_hash").as_string().unwrap_or_default();
                if state.hash()?.to_hex() != hash || seq_field(&cp, "seq")? != state.seq {
                    return Err(Error::corrupt(
                        "the stored checkpoint does not match its hash or seq",
                    ));
                }
                (Some(state), seq_field(&cp, "seq")?)
            }
            None => (None, 0),
        };
        for record in records_after(&tx, from, None).await? {
            for (seq, bytes) in record.events()? {
                if seq <= from {
                    continue;
                }
                let event = Event::from_cbor_verified(bytes)?;
                if event.seq != seq {
                    return Err(Error::corrupt(format!(
                        "the batch record at seq {} holds seq {} where seq {seq} belongs",
                        record.first, event.seq
                    )));
                }
                GroupState::apply_to(&mut state, &event)?;
            }
        }
        let seq = state.as_ref().map_or(0, |s| s.seq);
        if let Some(head) = head {
            let head_seq = seq_field(&head, "seq")?;
            if head_seq != seq {
                return Err(Error::corrupt(format!(
                    "the store's head says seq {head_seq} but its events end at {seq}"
                )));
            }
        }
        if let Some(s) = &state {
            if s.group != self.group {
                return Err(Error::new(
                    Code::WrongGroup,
                    format!("the store holds group {}, not {}", s.group, self.group),
                ));
            }
        }
        Ok((state, from))
    }

    /// The stored record holding event `seq`, as its key and owned frames, if present.
    async fn record_at(&self, seq: u64) -> Result<Option<(u64, Vec<Vec<u8>>)>, Error> {
        let tx = self
            .database()
            .transaction(&[BATCHES], TransactionMode::ReadOnly)
            .map_err(idb_err("read transaction"))?;
        let batches = tx.object_store(BATCHES).map_err(idb_err("batches"))?;
        let Some(first) = record_key_at(&batches, seq).await? else {
            return Ok(None);
        };
        let value = batches
            .get(Query::from(JsValue::from(num(first))))
            .map_err(idb_err("read batch record"))?
            .await
            .map_err(idb_err("read batch record"))?;
        let Some(value) = value else {
            return Ok(None);
        };
        let record = Record::from_stored(first, value)?;
        let frames: Vec<Vec<u8>> = record.events()?.map(|(_, f)| f.to_vec()).collect();
        // A record before a restored snapshot may end before `seq`: not held here.
        Ok((seq - first < frames.len() as u64).then_some((first, frames)))
    }

    /// Stored events after `after`, at most `limit`, as a frame batch.
    pub(crate) async fn events(&self, after: u64, limit: Option<u32>) -> Result<Vec<u8>, Error> {
        let tx = self
            .database()
            .transaction(&[BATCHES], TransactionMode::ReadOnly)
            .map_err(idb_err("read transaction"))?;
        let mut out = Vec::new();
        let mut left = limit.map_or(u64::MAX, u64::from);
        'records: for record in records_after(&tx, after, limit).await? {
            for (seq, bytes) in record.events()? {
                if seq <= after {
                    continue;
                }
                if left == 0 {
                    break 'records;
                }
                frames::push(&mut out, bytes)?;
                left -= 1;
            }
        }
        Ok(out)
    }

    /// Erases the values of every event that `events` redacts: a target in `events` itself
    /// gets its redacted bytes in place; a stored target's record is read and returned
    /// rewritten, as (key, frame batch), to be put in the same transaction as `events`.
    async fn erasures(
        &self,
        events: &mut [(Event, Vec<u8>)],
    ) -> Result<Vec<(u64, Vec<u8>)>, Error> {
        let mut records: Vec<(u64, Vec<Vec<u8>>)> = Vec::new();
        for i in 0..events.len() {
            let EventKind::EventRedacted(r) = &events[i].0.kind else {
                continue;
            };
            let target = r.seq;
            if let Some((event, bytes)) = events.iter_mut().find(|(e, _)| e.seq == target) {
                let mut redacted = event.clone();
                redacted.redact()?;
                *bytes = redacted.to_cbor()?;
                continue;
            }
            let held = |(first, frames): &(u64, Vec<Vec<u8>>)| {
                target >= *first && target - first < frames.len() as u64
            };
            let at = match records.iter().position(held) {
                Some(at) => at,
                None => match self.record_at(target).await? {
                    Some(record) => {
                        records.push(record);
                        records.len() - 1
                    }
                    // Not held here (a replica restored past it): nothing to erase.
                    None => continue,
                },
            };
            let (first, frames) = &mut records[at];
            let frame = &mut frames[(target - *first) as usize];
            let mut redacted = Event::from_cbor(frame)?;
            redacted.redact()?;
            *frame = redacted.to_cbor()?;
        }
        records
            .into_iter()
            .map(|(first, frames)| Ok((first, frames::join(&frames)?)))
            .collect()
    }

    /// Writes one transition: `events` with their receipts when `receipts` (an authority's
    /// store), the checkpoint, and the stored records the events' redactions rewrite
    /// ([`Store::erasures`]), in one transaction ([`Store::write`]). `abort` is the tests'
    /// hook.
    pub(crate) async fn write_transition(
        &self,
        mut events: Vec<(Event, Vec<u8>)>,
        receipts: bool,
        checkpoint: Option<Checkpoint>,
        abort: bool,
    ) -> Result<(), Error> {
        let rewritten = self.erasures(&mut events).await?;
        self.write(WriteSet {
            events,
            receipts,
            checkpoint,
            rewritten,
            abort,
        })
        .await
    }

    /// Writes one transition in one `readwrite` transaction with `durability: "strict"` and
    /// waits until it completes.
    async fn write(&self, set: WriteSet) -> Result<(), Error> {
        let Some(last) = set
            .events
            .last()
            .map(|(e, _)| (e.seq, e.id))
            .or_else(|| set.checkpoint.as_ref().map(|c| (c.seq, c.head)))
        else {
            return Ok(());
        };
        let (raw, done) = readwrite(&self.db, &[BATCHES, RECEIPTS, META])?;
        let tx = idb::Transaction::from(raw.clone());
        let batches = tx.object_store(BATCHES).map_err(idb_err("batches"))?;
        let receipts = tx.object_store(RECEIPTS).map_err(idb_err("receipts"))?;
        let meta = tx.object_store(META).map_err(idb_err("meta"))?;
        // Requests are issued without waiting for each: a failing one aborts the whole
        // transaction, which `tx.await` reports.
        if let Some((first, _)) = set.events.first() {
            let mut record = Vec::new();
            for (i, (event, bytes)) in set.events.iter().enumerate() {
                if event.seq != first.seq + i as u64 {
                    return Err(storage(format!(
                        "the events of one write must have consecutive seqs: {} follows {}",
                        event.seq,
                        first.seq + i as u64 - 1
                    )));
                }
                frames::push(&mut record, bytes)?;
            }
            // `add`, not `put`: the log is append-only, so a record that exists already at
            // this seq means another connection (another tab) appended first — the
            // transaction aborts rather than overwrite it.
            add_record(&batches, first.seq, &record)?;
        }
        for (event, _) in &set.events {
            if set.receipts {
                let receipt = mwp_core::canonical::to_vec(&event.receipt()).map_err(Error::from)?;
                let key =
                    js_sys::Array::of2(&event.actor.as_str().into(), &event.action.as_str().into());
                receipts
                    .put(
                        &js_sys::Uint8Array::from(receipt.as_slice()).into(),
                        Some(&key.into()),
                    )
                    .map_err(idb_err("put receipt"))?;
            }
        }
        for (first, record) in &set.rewritten {
            batches
                .put(
                    &js_sys::Uint8Array::from(record.as_slice()).into(),
                    Some(&JsValue::from(num(*first))),
                )
                .map_err(idb_err("erase redacted values"))?;
        }
        if let Some(c) = &set.checkpoint {
            let cp = js_sys::Object::new();
            put_prop(&cp, "seq", &num(c.seq).into());
            put_prop(&cp, "state_hash", &Hash::of(&c.state).to_hex().into());
            put_prop(
                &cp,
                "state",
                &js_sys::Uint8Array::from(c.state.as_slice()).into(),
            );
            meta.put(&cp.into(), Some(&"checkpoint".into()))
                .map_err(idb_err("put checkpoint"))?;
        }
        let head = js_sys::Object::new();
        put_prop(&head, "group", &self.group.as_str().into());
        put_prop(&head, "seq", &num(last.0).into());
        put_prop(&head, "head", &last.1.to_hex().into());
        meta.put(&head.into(), Some(&"head".into()))
            .map_err(idb_err("put head"))?;
        if set.abort {
            raw.abort().map_err(|e| storage(format!("abort: {e:?}")))?;
        }
        drop(tx);
        match wasm_bindgen_futures::JsFuture::from(done).await {
            Ok(_) => Ok(()),
            Err(_) => Err(storage(
                "the transaction was aborted; nothing of it was written",
            )),
        }
    }
}

/// `STORAGE` if a store handle failed earlier (`poisoned`): memory may be ahead of what was
/// committed, so the only way on is to reopen.
pub(crate) fn unpoisoned(poisoned: &Option<Error>) -> Result<(), Error> {
    match poisoned {
        Some(e) => Err(Error::new(
            Code::Storage,
            format!(
                "the store failed earlier and must be reopened: {}",
                e.message
            ),
        )),
        None => Ok(()),
    }
}

/// One stored `batches` record: the seq of its first event and its frame batch.
struct Record {
    first: u64,
    bytes: Vec<u8>,
}

impl Record {
    fn from_stored(first: u64, value: JsValue) -> Result<Record, Error> {
        let bytes = value
            .dyn_into::<js_sys::Uint8Array>()
            .map_err(|_| {
                Error::corrupt(format!(
                    "the batch record at seq {first} is not a Uint8Array"
                ))
            })?
            .to_vec();
        Ok(Record { first, bytes })
    }

    /// The record's events, each with its seq.
    fn events(&self) -> Result<impl Iterator<Item = (u64, &[u8])>, Error> {
        let frames = frames::split(&self.bytes).map_err(|e| {
            Error::corrupt(format!(
                "the batch record at seq {}: {}",
                self.first, e.message
            ))
        })?;
        Ok((self.first..).zip(frames))
    }
}

/// Adds one `batches` record (fails the transaction if its key exists).
fn add_record(batches: &ObjectStore, first: u64, record: &[u8]) -> Result<(), Error> {
    batches
        .add(
            &js_sys::Uint8Array::from(record).into(),
            Some(&JsValue::from(num(first))),
        )
        .map(|_| ())
        .map_err(idb_err("add batch record"))
}

/// A stored numeric key as a seq.
fn key_seq(key: &JsValue) -> Result<u64, Error> {
    let n = key
        .as_f64()
        .ok_or_else(|| Error::corrupt("a stored key is not a number"))?;
    uint(n, "key").map_err(|e| Error::corrupt(e.message))
}

/// The key of the `batches` record that holds seq `seq` if any holds it: the greatest key
/// `≤ seq`.
async fn record_key_at(batches: &ObjectStore, seq: u64) -> Result<Option<u64>, Error> {
    let range = KeyRange::upper_bound(&JsValue::from(num(seq)), Some(false))
        .map_err(idb_err("key range"))?;
    let cursor = batches
        .open_key_cursor(Some(Query::from(range)), Some(CursorDirection::Prev))
        .map_err(idb_err("read batches"))?
        .await
        .map_err(idb_err("read batches"))?;
    match cursor {
        Some(cursor) => key_seq(&cursor.key().map_err(idb_err("read batches"))?).map(Some),
        None => Ok(None),
    }
}

/// The `batches` records that hold the events after `after`, in seq order. The first may
/// begin at or before `after`; with a `limit`, reading stops once the records hold that
/// many events after `after` (the last may hold more).
async fn records_after(
    tx: &idb::Transaction,
    after: u64,
    limit: Option<u32>,
) -> Result<Vec<Record>, Error> {
    /// Records read per request when a limit applies.
    const PAGE: u32 = 16;
    let batches = tx.object_store(BATCHES).map_err(idb_err("batches"))?;
    let next = after.saturating_add(1);
    let mut from = record_key_at(&batches, next).await?.unwrap_or(next);
    let page = limit.map(|_| PAGE);
    let mut held = 0u64;
    let mut out = Vec::new();
    loop {
        let range = || {
            KeyRange::lower_bound(&JsValue::from(num(from)), Some(false))
                .map(Query::from)
                .map_err(idb_err("key range"))
        };
        let keys = batches
            .get_all_keys(Some(range()?), page)
            .map_err(idb_err("read batches"))?
            .await
            .map_err(idb_err("read batches"))?;
        let values = batches
            .get_all(Some(range()?), page)
            .map_err(idb_err("read batches"))?
            .await
            .map_err(idb_err("read batches"))?;
        let read = keys.len();
        for (key, value) in keys.iter().zip(values) {
            let record = Record::from_stored(key_seq(key)?, value)?;
            held += record.events()?.filter(|(seq, _)| *seq > after).count() as u64;
            from = record.first + 1;
            out.push(record);
        }
        match (limit, page) {
            (Some(limit), Some(page)) if read == page as usize && held < u64::from(limit) => {}
            _ => return Ok(out),
        }
    }
}

/// The values (byte arrays) stored in `store` under numeric keys greater than `after`, at
/// most `limit`, in key order. `what` names one value in errors ("event", "write set").
/// The agent store's reader (the `full` build).
#[cfg(feature = "full")]
pub(crate) async fn bytes_after(
    tx: &idb::Transaction,
    store: &str,
    after: u64,
    limit: Option<u32>,
    what: &str,
) -> Result<Vec<Vec<u8>>, Error> {
    let range = KeyRange::lower_bound(&JsValue::from(num(after)), Some(true))
        .map_err(idb_err("key range"))?;
    let rows = tx
        .object_store(store)
        .map_err(idb_err(store))?
        .get_all(Some(Query::from(range)), limit)
        .map_err(|e| storage(format!("read {store}: {e}")))?
        .await
        .map_err(|e| storage(format!("read {store}: {e}")))?;
    rows.into_iter()
        .map(|row| {
            row.dyn_into::<js_sys::Uint8Array>()
                .map(|a| a.to_vec())
                .map_err(|_| Error::corrupt(format!("a stored {what} is not a Uint8Array")))
        })
        .collect()
}

/// Opens a `readwrite` transaction over `stores` with `durability: "strict"`, and the promise
/// of its completion (rejected if it aborts).
pub(crate) fn readwrite(
    db: &web_sys::IdbDatabase,
    stores: &[&str],
) -> Result<(web_sys::IdbTransaction, js_sys::Promise), Error> {
    let names: js_sys::Array = stores.iter().map(|s| JsValue::from(*s)).collect();
    let options = js_sys::Object::new();
    put_prop(&options, "durability", &"strict".into());
    let raw = db
        .unchecked_ref::<RawDatabase>()
        .transaction_with_options(&names, "readwrite", &options)
        .map_err(|e| storage(format!("readwrite transaction: {e:?}")))?;
    // Completion is awaited through a JS promise whose resolve/reject are the transaction's
    // own handlers: no Rust closure can outlive its owner when a failing request's error
    // event and the abort event both arrive.
    let done = js_sys::Promise::new(&mut |resolve, reject| {
        raw.set_oncomplete(Some(&resolve));
        raw.set_onabort(Some(&reject));
    });
    Ok((raw, done))
}

pub(crate) fn group_id(group: &str) -> Result<Id, Error> {
    Id::new(group).map_err(|e| Error::malformed(format!("group: {e}")))
}

/// Deletes a store's database (all its data). Fails if a connection is still open.
#[wasm_bindgen(js_name = deleteIdbStore)]
pub async fn delete_idb_store(name: String) -> Result<(), StoreError> {
    let factory = idb::Factory::new().map_err(idb_err("indexedDB"))?;
    factory
        .delete(&name)
        .map_err(idb_err("delete"))?
        .await
        .map_err(idb_err("delete"))?;
    Ok(())
}

/// A replica whose projection lives in IndexedDB: applied events (a local copy of the log,
/// for reading back), the cursor, and state checkpoints. Early events wait in memory only;
/// they are delivered again after a reload.
#[wasm_bindgen]
pub struct IdbReplica {
    store: Store,
    inner: CoreReplica,
    pending: Pending,
    checkpoint_every: u64,
    last_checkpoint: u64,
    poisoned: Option<Error>,
}

impl IdbReplica {
    fn check(&self) -> Result<(), Error> {
        unpoisoned(&self.poisoned)
    }

    async fn offer_inner(&mut self, batch: &[u8], abort: bool) -> Result<JsValue, Error> {
        self.check()?;
        let (summary, applied) = offer_frames(&mut self.inner, &mut self.pending, batch)?;
        let seq = self.inner.cursor();
        let checkpoint = match self.inner.state() {
            Some(s)
                if seq >= self.last_checkpoint + self.checkpoint_every && !applied.is_empty() =>
            {
                Some(Checkpoint::of(s)?)
            }
            _ => None,
        };
        let checkpointed = checkpoint.is_some();
        let write = self
            .store
            .write_transition(applied, false, checkpoint, abort);
        if let Err(e) = write.await {
            self.poisoned = Some(e.clone());
            return Err(e);
        }
        if checkpointed {
            self.last_checkpoint = seq;
        }
        to_js(&summary)
    }
}

#[wasm_bindgen]
impl IdbReplica {
    /// Opens (creating if needed) the store `name` for `group` and rebuilds the projection
    /// from its last checkpoint and the events after it.
    pub async fn open(
        name: String,
        group: String,
        checkpoint_every: Option<f64>,
    ) -> Result<IdbReplica, StoreError> {
        let group = group_id(&group)?;
        let checkpoint_every = match checkpoint_every {
            Some(n) => uint(n, "checkpointEvery")?.max(1),
            None => DEFAULT_CHECKPOINT_EVERY,
        };
        let store = Store::open(&name, group.clone()).await?;
        let (state, last_checkpoint) = store.load().await?;
        let inner = match state {
            Some(s) => CoreReplica::from_state(s),
            None => CoreReplica::new(group),
        };
        Ok(IdbReplica {
            store,
            inner,
            pending: Pending::new(),
            checkpoint_every,
            last_checkpoint,
            poisoned: None,
        })
    }

    /// Offers a frame batch of delivered events; everything they apply is written in one
    /// transaction (events, cursor, checkpoint when due). Resolves once durable to
    /// `{applied, duplicate, buffered, rejected, cursor, errors}`.
    #[wasm_bindgen(js_name = offerBatch)]
    pub async fn offer_batch(&mut self, batch: Vec<u8>) -> Result<JsValue, StoreError> {
        Ok(self.offer_inner(&batch, false).await?)
    }

    /// Test hook: like `offerBatch`, but aborts the transaction after issuing every write.
    #[doc(hidden)]
    #[wasm_bindgen(js_name = offerBatchThenAbort)]
    pub async fn offer_batch_then_abort(&mut self, batch: Vec<u8>) -> Result<JsValue, StoreError> {
        Ok(self.offer_inner(&batch, true).await?)
    }

    /// Restores from a signed snapshot after validating it (SPEC §8) and writes the restored
    /// state as the store's checkpoint and cursor, in one transaction. On a validation error
    /// nothing changes.
    pub async fn restore(
        &mut self,
        snapshot: Vec<u8>,
        trusted_key: String,
        org: String,
        requested_cursor: f64,
    ) -> Result<(), StoreError> {
        self.check()?;
        let cursor = uint(requested_cursor, "requestedCursor")?;
        let mut next = self.inner.clone();
        restore_snapshot(&mut next, &snapshot, &trusted_key, &org, cursor)?;
        let state = next.state().map(Checkpoint::of).transpose()?;
        if let Err(e) = self
            .store
            .write(WriteSet {
                checkpoint: state,
                ..WriteSet::default()
            })
            .await
        {
            self.poisoned = Some(e.clone());
            return Err(e.into());
        }
        self.last_checkpoint = next.cursor();
        self.inner = next;
        let cursor = self.inner.cursor();
        self.pending.retain(|seq, _| *seq > cursor);
        Ok(())
    }

    /// Locally stored events after `after`, at most `limit`, as a frame batch.
    pub async fn events(&self, after: f64, limit: Option<f64>) -> Result<Vec<u8>, StoreError> {
        self.check()?;
        Ok(self
            .store
            .events(uint(after, "after")?, count(limit, "limit")?)
            .await?)
    }

    /// The group.
    #[wasm_bindgen(getter)]
    pub fn group(&self) -> String {
        self.store.group.to_string()
    }

    /// Highest contiguous seq applied and durable.
    #[wasm_bindgen(getter)]
    pub fn cursor(&self) -> f64 {
        num(self.inner.cursor())
    }

    /// Id (hex) of the event at the cursor.
    #[wasm_bindgen(getter)]
    pub fn head(&self) -> String {
        self.inner.head().to_hex()
    }

    /// Offers a signed head under the pinned authority key (hex), as `Replica.offerHead`:
    /// `{result, verifiedThrough}`, or `HEAD_INVALID` / `FORK`. What a head verifies is
    /// kept in memory (a reopened store starts at 0 until a head verifies again).
    #[wasm_bindgen(js_name = offerHead)]
    pub fn offer_head(
        &mut self,
        head: JsValue,
        authority_key: &str,
    ) -> Result<JsValue, StoreError> {
        self.check()?;
        Ok(crate::head::offer_head(
            &mut self.inner,
            head,
            authority_key,
        )?)
    }

    /// The highest seq a signed head vouched for since the store was opened.
    #[wasm_bindgen(getter, js_name = verifiedThrough)]
    pub fn verified_through(&self) -> f64 {
        num(self.inner.verified_through())
    }

    /// Whether event `seq` is past the last verified head.
    #[wasm_bindgen(js_name = isProvisional)]
    pub fn is_provisional(&self, seq: f64) -> Result<bool, StoreError> {
        Ok(self.inner.is_provisional(uint(seq, "seq")?))
    }

    /// The latest signed head that verified against the chain (JSON form), or `null`.
    #[wasm_bindgen(getter, js_name = verifiedHead)]
    pub fn verified_head(&self) -> JsValue {
        crate::head::verified_head(&self.inner)
    }

    /// Hash (hex) of the canonical state.
    #[wasm_bindgen(js_name = stateHash)]
    pub fn state_hash(&self) -> Result<String, StoreError> {
        Ok(state_hash_of(self.inner.state())?)
    }

    /// The state as a JS object (`null` before genesis).
    pub fn state(&self) -> Result<JsValue, StoreError> {
        Ok(to_js(&self.inner.state())?)
    }

    /// IDs of the work items a worker may claim at `nowMs`.
    pub fn frontier(&self, now_ms: f64) -> Result<Vec<String>, StoreError> {
        Ok(frontier_of(self.inner.state(), uint(now_ms, "nowMs")?))
    }

    /// Closes the connection (after pending transactions finish).
    pub fn close(&self) {
        self.store.db.close();
    }
}
