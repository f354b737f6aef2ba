//! The agent journal's format ([`mwp_core::log_format::journal`]) for the Node/Deno journal of
//! `js/src/agent-journal.js`, which keeps only the file-system calls: the same bytes the
//! native journal (`mwp-host`'s `store::agent_journal`) writes and reads.
//!
//! Damage is a `StoreError` with code `LOG_CORRUPT` naming the file and the offset
//! (`details.file`, `details.offset`), as the native journal reports it.

use mwp_core::log_format::journal::{self, MAX_PIECE};
use mwp_core::replica::WriteSet;
use mwp_core::{Error, Id};
use wasm_bindgen::prelude::*;

use crate::agent::AgentImage;
use crate::codec::{num, uint};
use crate::error::StoreError;

fn set(obj: &js_sys::Object, key: &str, value: JsValue) {
    // Setting a property on a fresh plain object cannot fail.
    let _ = js_sys::Reflect::set(obj, &key.into(), &value);
}

/// Checks the file name `name` of the agent journal at `path` (as displayed in errors) before
/// the host opens, locks or removes anything: a name that is another journal's lock or
/// temporary file (`a.LOCK`, `a.LOCK.pid`, `a.tmp`) or a data directory's lock file (`LOCK`,
/// `LOCK.pid`) is `MALFORMED` naming the path (`details.file`), as the native journal refuses
/// it (the core's `check_journal_name`).
#[wasm_bindgen(js_name = checkAgentJournalName)]
pub fn check_agent_journal_name(path: &str, name: &str) -> Result<(), StoreError> {
    journal::check_journal_name(path, name).map_err(StoreError)
}

/// Reads a whole agent journal (`bytes`, the file from offset 0; `name` names it in errors):
/// `{group, image, keep, nextSeq}`: the group in its header, every committed write set folded
/// into an `AgentImage`, the length to cut the file to (a torn last write set was never
/// committed), and the seq of the next record. Damage before the last write set is
/// `LOG_CORRUPT`.
#[wasm_bindgen(js_name = readAgentJournal)]
pub fn read_agent_journal(bytes: &[u8], name: &str) -> Result<JsValue, StoreError> {
    let read = journal::read_journal(bytes).map_err(|d| StoreError(d.into_error(name)))?;
    let obj = js_sys::Object::new();
    set(&obj, "group", read.group.as_str().into());
    set(&obj, "image", AgentImage::from_core(read.image).into());
    set(&obj, "keep", num(read.keep).into());
    set(&obj, "nextSeq", num(read.next_seq).into());
    Ok(obj.into())
}

/// The bytes that append one write set (its canonical CBOR, as `pollWriteSet` gave it) to a
/// journal whose next record is `nextSeq`: `{bytes, nextSeq, group}`. `journalGroup` is the
/// group of the existing journal; without it the bytes start a new journal (its header first,
/// `nextSeq` 1). A write set without a group, or of another group, is `MALFORMED`.
#[wasm_bindgen(js_name = encodeAgentJournalAppend)]
pub fn encode_agent_journal_append(
    write_set: &[u8],
    next_seq: f64,
    journal_group: Option<String>,
) -> Result<JsValue, StoreError> {
    let ws = WriteSet::from_canonical(write_set)
        .map_err(|e| Error::malformed(format!("write set: {e}")))?;
    let Some(group) = ws.group.as_ref() else {
        return Err(Error::malformed("a write set without a group").into());
    };
    let mine = match journal_group {
        Some(g) => Some(Id::new(g).map_err(|e| Error::malformed(format!("journalGroup: {e}")))?),
        None => None,
    };
    if let Some(mine) = mine.as_ref().filter(|g| *g != group) {
        return Err(Error::malformed(format!(
            "the journal belongs to group {mine}, the write set to {group}"
        ))
        .into());
    }
    let mut bytes = Vec::with_capacity(write_set.len() + 256);
    let next = journal::encode_write_set(
        &mut bytes,
        group,
        mine.is_none(),
        uint(next_seq, "nextSeq")?,
        write_set,
        MAX_PIECE,
    );
    let obj = js_sys::Object::new();
    set(&obj, "bytes", js_sys::Uint8Array::from(&bytes[..]).into());
    set(&obj, "nextSeq", num(next).into());
    set(&obj, "group", group.as_str().into());
    Ok(obj.into())
}
