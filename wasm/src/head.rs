//! Signed heads, fork proofs and static exports (SPEC §8a, §8b), over [`mwp_core::head`] and
//! [`mwp_core::export`]: a head crosses as its JSON form (an object or a JSON string), export
//! files as bytes, and every check stays in the core.

use mwp_core::export::{self, Progress, Start, StaticReader as CoreReader};
use mwp_core::head::{ForkProof, SignedHead};
use mwp_core::replica::{HeadOffer, Replica as CoreReplica};
use mwp_core::{Error, Event, Hash, Id};
use serde_json::json;
use wasm_bindgen::prelude::*;

use crate::codec::{json_from_js, parse_public_key, parse_secret_key, to_js, uint};
use crate::error::{CodecError, ExportError};
use crate::replica::Replica;

/// A signed head given as its JSON form: an object or a JSON string. `HEAD_INVALID` (check
/// `decode`) when it is not one.
pub fn head_from_js(value: JsValue) -> Result<SignedHead, Error> {
    let text = match value.as_string() {
        Some(text) => text,
        None => serde_json::to_string(&json_from_js(value)?)
            .map_err(|e| Error::malformed(format!("signed head: {e}")))?,
    };
    SignedHead::from_json(&text)
}

/// Offers a head to a core replica under the pinned key (hex): `{result: "verified"|"ahead"|
/// "stale", verifiedThrough}`; the core's `HEAD_INVALID` / `FORK` errors otherwise.
pub fn offer_head(
    replica: &mut CoreReplica,
    head: JsValue,
    trusted_key: &str,
) -> Result<JsValue, Error> {
    let head = head_from_js(head)?;
    let trusted = parse_public_key(trusted_key)?;
    let offer = replica.offer_head(&head, &trusted)?;
    let result = match offer {
        HeadOffer::Verified { .. } => "verified",
        HeadOffer::Ahead { .. } => "ahead",
        HeadOffer::Stale { .. } => "stale",
    };
    to_js(&json!({"result": result, "verifiedThrough": offer.through()}))
}

/// The replica's latest verified head (JSON form), or `null`.
pub fn verified_head(replica: &CoreReplica) -> JsValue {
    replica
        .verified_head()
        .and_then(|h| to_js(h).ok())
        .unwrap_or(JsValue::NULL)
}

/// Signs a head: "event `seq` of `org`/`group` has id `id` (hex)", at `atMs`, with the
/// authority's secret key seed (hex). Returns its JSON form.
#[wasm_bindgen(js_name = signHead)]
pub fn sign_head(
    org: &str,
    group: &str,
    seq: f64,
    id: &str,
    at_ms: f64,
    secret_key_hex: &str,
) -> Result<JsValue, CodecError> {
    let id_of =
        |s: &str, what: &str| Id::new(s).map_err(|e| Error::malformed(format!("{what}: {e}")));
    let hash = Hash::from_hex(id).map_err(|e| Error::malformed(format!("id: {e}")))?;
    let head = SignedHead::sign(
        &id_of(org, "org")?,
        &id_of(group, "group")?,
        uint(seq, "seq")?,
        hash,
        uint(at_ms, "atMs")?,
        &parse_secret_key(secret_key_hex)?,
    )?;
    Ok(to_js(&head)?)
}

/// Checks a fork proof (canonical CBOR, as a `FORK` error's `details.proof` carries it in
/// hex) with nothing but its contents, and the authority key the caller pins if given.
/// Returns `{org, group, seq, ids, kind}`; `MALFORMED` naming what fails otherwise.
#[wasm_bindgen(js_name = verifyForkProof)]
pub fn verify_fork_proof(bytes: &[u8], pinned_key: Option<String>) -> Result<JsValue, CodecError> {
    let pinned = pinned_key.as_deref().map(parse_public_key).transpose()?;
    let fork = ForkProof::from_cbor(bytes)?.verify(pinned.as_ref())?;
    Ok(to_js(&fork)?)
}

/// Plans a static export (`export::plan`; the full module only: the viewer reads exports, it
/// does not plan them): the events (a frame batch of stored CBOR, in seq
/// order, after the previous export's index if given as JSON text, read and checked by
/// `export::index_from_json` as every host reads an index: `MALFORMED` naming the
/// `previous index` when it is refused), the latest signed
/// snapshot if any, the signed head they end at, the authority key (hex) and the chunk size.
/// Returns `{files: [{path, bytes}], headFile: bytes, index}`; the caller writes the files,
/// then `head.json`.
#[cfg(feature = "full")]
#[wasm_bindgen(js_name = planExport)]
pub fn plan_export(
    previous: Option<String>,
    events: &[u8],
    snapshot: Option<Vec<u8>>,
    head: JsValue,
    trusted_key: &str,
    chunk_events: Option<f64>,
) -> Result<JsValue, ExportError> {
    use crate::frames;
    use mwp_core::export::ExportIndex;
    // Read and checked as every host reads an index; given as an argument, a refusal is
    // bad input (`MALFORMED`) naming it.
    const PREVIOUS: &str = "previous index";
    let previous: Option<ExportIndex> = previous
        .map(|text| {
            export::index_from_json(PREVIOUS, text.as_bytes()).map_err(|e| {
                Error::malformed(if e.message.starts_with(PREVIOUS) {
                    e.message
                } else {
                    format!("{PREVIOUS}: {}", e.message)
                })
            })
        })
        .transpose()?;
    // A count from JavaScript: checked, never wrapped (-1 is not 2^32 − 1, 0.5 not 0).
    let chunk_events = match chunk_events {
        Some(n) => usize::try_from(uint(n, "chunkEvents")?).unwrap_or(usize::MAX),
        None => export::CHUNK_EVENTS,
    };
    let events = frames::split(events)?;
    let x = export::plan(
        previous.as_ref(),
        &events,
        snapshot.as_deref(),
        &head_from_js(head)?,
        &parse_public_key(trusted_key)?,
        chunk_events,
    )?;
    let files = js_sys::Array::new();
    for f in &x.files {
        let o = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&o, &"path".into(), &f.path.as_str().into());
        let _ = js_sys::Reflect::set(&o, &"bytes".into(), &js_sys::Uint8Array::from(&f.bytes[..]));
        files.push(&o);
    }
    let out = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&out, &"files".into(), &files);
    let _ = js_sys::Reflect::set(
        &out,
        &"headFile".into(),
        &js_sys::Uint8Array::from(&x.head_file[..]),
    );
    let _ = js_sys::Reflect::set(&out, &"index".into(), &to_js(&x.index)?);
    Ok(out.into())
}

fn progress_to_js(p: &Progress) -> Result<JsValue, Error> {
    to_js(&json!({
        "cursor": p.cursor, "verifiedThrough": p.verified_through, "headSeq": p.head_seq,
        "events": p.events, "bytes": p.bytes, "done": p.done,
    }))
}

/// The sans-IO reader of a static export (SPEC §8b): ask `pollFetch()` for the next path,
/// fetch it relative to the export's base, hand the bytes to `handleFetched(path, bytes)`,
/// until `pollFetch()` answers `undefined`; then `intoReplica()` is verified through the
/// export's signed head under the pinned key and nothing else.
#[wasm_bindgen]
pub struct StaticReader {
    inner: Option<CoreReader>,
}

impl StaticReader {
    fn reader(&self) -> Result<&CoreReader, Error> {
        self.inner
            .as_ref()
            .ok_or_else(|| Error::malformed("the reader was turned into its replica already"))
    }
}

#[wasm_bindgen]
impl StaticReader {
    /// A reader of `group`'s export trusting only `authorityKey` (hex); `start` is
    /// `"snapshot"` (the default: the latest signed snapshot, then the chunks after it) or
    /// `"genesis"` (every event from seq 1).
    #[wasm_bindgen(constructor)]
    pub fn new(
        group: &str,
        authority_key: &str,
        start: Option<String>,
    ) -> Result<StaticReader, ExportError> {
        let group = Id::new(group).map_err(|e| ExportError::malformed(format!("group: {e}")))?;
        let start = match start.as_deref() {
            None | Some("snapshot") => Start::Snapshot,
            Some("genesis") => Start::Genesis,
            Some(other) => {
                return Err(ExportError::malformed(format!(
                    "start is {other:?}: expected \"snapshot\" or \"genesis\""
                )))
            }
        };
        Ok(StaticReader {
            inner: Some(CoreReader::new(
                group,
                parse_public_key(authority_key)?,
                start,
            )),
        })
    }

    /// The next file to fetch, relative to the export's base; `undefined` once done.
    #[wasm_bindgen(js_name = pollFetch)]
    pub fn poll_fetch(&self) -> Option<String> {
        self.inner.as_ref()?.poll_fetch()
    }

    /// The most bytes the reader accepts for the file at `path` (`export::max_file_bytes`): a
    /// host stops downloading a file past it, so a hostile mirror cannot make it buffer
    /// without end.
    #[wasm_bindgen(js_name = maxFileBytes)]
    pub fn max_file_bytes(path: &str) -> f64 {
        mwp_core::export::max_file_bytes(path) as f64
    }

    /// Handles the bytes of the file `pollFetch()` named. Returns the progress
    /// `{cursor, verifiedThrough, headSeq, events, bytes, done}`; throws the core's error
    /// naming the file (`details.file`): `HEAD_INVALID`, `SNAPSHOT_INVALID`, `LOG_CORRUPT`,
    /// `FORK`, `MALFORMED`. A file refused before any of its events applied leaves the reader
    /// where it was; one that failed part-way leaves it failed for good.
    ///
    /// With `withEvents`, a chunk's progress also carries `applied`: the events (JSON form)
    /// it applied, each now verified by the replica, for a host that shows them.
    #[wasm_bindgen(js_name = handleFetched)]
    pub fn handle_fetched(
        &mut self,
        path: &str,
        bytes: &[u8],
        with_events: Option<bool>,
    ) -> Result<JsValue, ExportError> {
        let reader = self.inner.as_mut().ok_or_else(|| {
            ExportError::malformed("the reader was turned into its replica already")
        })?;
        let before = reader.progress().cursor;
        let p = reader.handle_fetched(path, bytes)?;
        let js = progress_to_js(&p)?;
        if with_events == Some(true) && export::check_name(path, "chunks", "cbor").is_ok() {
            let applied = js_sys::Array::new();
            for item in export::split_chunk(path, bytes)? {
                let event = Event::from_cbor(item)?;
                if event.seq > before && event.seq <= p.cursor {
                    applied.push(&to_js(&event)?);
                }
            }
            let _ = js_sys::Reflect::set(&js, &"applied".into(), &applied);
        }
        Ok(js)
    }

    /// How far the reader got: `{cursor, verifiedThrough, headSeq, events, bytes, done}`.
    pub fn progress(&self) -> Result<JsValue, ExportError> {
        Ok(progress_to_js(&self.reader()?.progress())?)
    }

    /// The signed head read from `head.json` (JSON form), or `null` before.
    pub fn head(&self) -> Result<JsValue, ExportError> {
        match self.reader()?.head() {
            Some(h) => Ok(to_js(h)?),
            None => Ok(JsValue::NULL),
        }
    }

    /// The replica, once the export is read whole (`MALFORMED` before): verified through
    /// the head. The reader is empty afterwards.
    #[wasm_bindgen(js_name = intoReplica)]
    pub fn into_replica(&mut self) -> Result<Replica, ExportError> {
        if !self.reader()?.progress().done {
            return Err(ExportError::malformed(
                "the export is not read whole yet: pollFetch() still names a file",
            ));
        }
        let reader = self.inner.take().expect("checked above");
        Ok(Replica::from_core(reader.into_replica()))
    }
}
