//! `IdbAgentStore`: an agent's write sets in IndexedDB (SPEC §9, agent projections), the
//! browser's durable `commit` for [`crate::agent::Agent`].
//!
//! One database per agent, named by the caller:
//!
//! | object store | key | value |
//! |---|---|---|
//! | `write_sets` | serial (number) | the write set's canonical CBOR (`Uint8Array`) |
//! | `meta` | `"image"` | `{serial, image}`: a compacted [`AgentImage`] (canonical CBOR) |
//!
//! **Transactions.** Each write set is committed in **one** `readwrite` transaction with
//! `durability: "strict"`, and `commit` resolves only after it completes — so the agent's
//! `handleCommitted` follows durability, as the driver requires. Write sets are *added*, never
//! overwritten: a serial that exists already aborts the transaction. An aborted commit leaves
//! nothing behind and poisons the handle (`STORAGE` on every later call): the agent in memory
//! had moved ahead, so the way on is to reopen and restore from what was committed.
//! `compact` replaces the write sets up to an image's serial by the image, in one transaction.
//!
//! **Opening** is folding: the image (if any), then every write set after it in serial order.
//! A gap or a write set that does not follow is `LOG_CORRUPT`; nothing is repaired silently.

use idb::{Database, KeyRange, Query, TransactionMode};
use mwp_core::agent::AgentImage as CoreImage;
use mwp_core::replica::WriteSet;
use mwp_core::{canonical, Error};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::agent::AgentImage;
use crate::codec::{num, uint};
use crate::error::{storage, StoreError};
use crate::idb_store::{bytes_after, readwrite, unpoisoned};

const WRITE_SETS: &str = "write_sets";
const META: &str = "meta";
const VERSION: u32 = 1;

fn idb_err(what: &str) -> impl Fn(idb::Error) -> Error + '_ {
    move |e| storage(format!("{what}: {e}"))
}

/// An agent's committed write sets in IndexedDB.
#[wasm_bindgen]
pub struct IdbAgentStore {
    db: web_sys::IdbDatabase,
    poisoned: Option<Error>,
}

impl IdbAgentStore {
    fn database(&self) -> Database {
        Database::from(self.db.clone())
    }

    fn check(&self) -> Result<(), Error> {
        unpoisoned(&self.poisoned)
    }

    async fn load_inner(&self) -> Result<CoreImage, Error> {
        self.check()?;
        let tx = self
            .database()
            .transaction(&[WRITE_SETS, META], TransactionMode::ReadOnly)
            .map_err(idb_err("read transaction"))?;
        let stored = tx
            .object_store(META)
            .map_err(idb_err("meta"))?
            .get(Query::from(JsValue::from("image")))
            .map_err(idb_err("read image"))?
            .await
            .map_err(idb_err("read image"))?;
        let mut image = match stored {
            Some(row) => {
                let bytes = js_sys::Reflect::get(&row, &"image".into())
                    .ok()
                    .and_then(|v| v.dyn_into::<js_sys::Uint8Array>().ok())
                    .ok_or_else(|| Error::corrupt("the stored image is not a Uint8Array"))?
                    .to_vec();
                CoreImage::from_canonical(&bytes)
                    .map_err(|e| Error::corrupt(format!("the stored image: {e}")))?
            }
            None => CoreImage::default(),
        };
        for bytes in bytes_after(&tx, WRITE_SETS, image.serial, None, "write set").await? {
            let ws = WriteSet::from_canonical(&bytes).map_err(|e| {
                Error::corrupt(format!("write set after serial {}: {e}", image.serial))
            })?;
            image.commit(&ws).map_err(|e| {
                Error::corrupt(format!(
                    "stored write sets do not follow each other: {}",
                    e.message
                ))
            })?;
        }
        Ok(image)
    }

    async fn commit_inner(&mut self, serial: u64, bytes: &[u8], abort: bool) -> Result<(), Error> {
        self.check()?;
        let (raw, done) = readwrite(&self.db, &[WRITE_SETS])?;
        let tx = idb::Transaction::from(raw.clone());
        let store = tx.object_store(WRITE_SETS).map_err(idb_err("write sets"))?;
        store
            .add(
                &js_sys::Uint8Array::from(bytes).into(),
                Some(&JsValue::from(num(serial))),
            )
            .map_err(idb_err("add write set"))?;
        if abort {
            raw.abort().map_err(|e| storage(format!("abort: {e:?}")))?;
        }
        drop(tx);
        wasm_bindgen_futures::JsFuture::from(done)
            .await
            .map(|_| ())
            .map_err(|_| {
                storage(format!(
                    "write set {serial} was not committed (the transaction aborted; a write set with this serial may exist already)"
                ))
            })
    }
}

#[wasm_bindgen]
impl IdbAgentStore {
    /// Opens (creating if needed) the database `name`.
    pub async fn open(name: String) -> Result<IdbAgentStore, StoreError> {
        let db = Database::builder(&name)
            .version(VERSION)
            .add_object_store(idb::builder::ObjectStoreBuilder::new(WRITE_SETS))
            .add_object_store(idb::builder::ObjectStoreBuilder::new(META))
            .build()
            .await
            .map_err(idb_err("open"))?;
        Ok(IdbAgentStore {
            db: db.into(),
            poisoned: None,
        })
    }

    /// Everything committed, folded: the image to `Agent.restore` from.
    pub async fn load(&self) -> Result<AgentImage, StoreError> {
        Ok(AgentImage::from_core(self.load_inner().await?))
    }

    /// Commits one write set (`serial` and its canonical CBOR, as `pollWriteSet` gives
    /// them) in one `readwrite` transaction with `durability: "strict"`; resolves once it
    /// is durable.
    pub async fn commit(&mut self, serial: f64, write_set: Vec<u8>) -> Result<(), StoreError> {
        let serial = uint(serial, "serial")?;
        if let Err(e) = self.commit_inner(serial, &write_set, false).await {
            self.poisoned = Some(e.clone());
            return Err(e.into());
        }
        Ok(())
    }

    /// Test hook: like `commit`, but aborts the transaction after issuing the write.
    #[doc(hidden)]
    #[wasm_bindgen(js_name = commitThenAbort)]
    pub async fn commit_then_abort(
        &mut self,
        serial: f64,
        write_set: Vec<u8>,
    ) -> Result<(), StoreError> {
        let serial = uint(serial, "serial")?;
        let result = self.commit_inner(serial, &write_set, true).await;
        if let Err(e) = result {
            self.poisoned = Some(e.clone());
            return Err(e.into());
        }
        Ok(())
    }

    /// Replaces every write set up to `image.serial` by the image, in one transaction.
    pub async fn compact(&mut self, image: &AgentImage) -> Result<(), StoreError> {
        self.check()?;
        let serial = image.core().serial;
        let bytes = canonical::to_vec(image.core()).map_err(Error::from)?;
        let result = async {
            let (raw, done) = readwrite(&self.db, &[WRITE_SETS, META])?;
            let tx = idb::Transaction::from(raw);
            let row = js_sys::Object::new();
            let set = |k: &str, v: &JsValue| js_sys::Reflect::set(&row, &k.into(), v);
            set("serial", &num(serial).into())
                .and_then(|_| set("image", &js_sys::Uint8Array::from(bytes.as_slice()).into()))
                .map_err(|_| Error::malformed("image does not convert to JavaScript"))?;
            tx.object_store(META)
                .map_err(idb_err("meta"))?
                .put(&row.into(), Some(&"image".into()))
                .map_err(idb_err("put image"))?;
            let range = KeyRange::upper_bound(&JsValue::from(num(serial)), Some(false))
                .map_err(idb_err("key range"))?;
            tx.object_store(WRITE_SETS)
                .map_err(idb_err("write sets"))?
                .delete(Query::from(range))
                .map_err(idb_err("delete write sets"))?;
            drop(tx);
            wasm_bindgen_futures::JsFuture::from(done)
                .await
                .map(|_| ())
                .map_err(|_| storage("compaction aborted; nothing of it was written"))
        }
        .await;
        if let Err(e) = result {
            self.poisoned = Some(e.clone());
            return Err(e.into());
        }
        Ok(())
    }

    /// Closes the connection (after pending transactions finish).
    pub fn close(&self) {
        self.db.close();
    }
}
