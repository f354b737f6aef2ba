//! The file store's byte layout, as the native host uses it. The layout itself (headers,
//! records, CRC32C, snapshot files, names, the scan and its tail rule) is
//! [`mwp_core::log_format`], shared with the Node/Deno file store; this module re-exports it
//! and adds what does IO: [`scan`] reads a [`StorageFile`] for the core's [`Scanner`].

use std::sync::Arc;

use mwp_core::{Code, Error, Result};

use mwp_core::log_format::{self, Scanner, Step};
pub use mwp_core::log_format::{
    corrupt_at, crc32c, decode_overlay_entry, decode_snapshot_file, encode_batch,
    encode_overlay_entry, encode_record, encode_snapshot_file, group_dir_name, group_from_dir_name,
    parse_numbered, record_crc, segment_name, snapshot_file_header, snapshot_name, Damage, Erased,
    Erasure, FileHeader, Record, RecordHeader, ScanEnd, FILE_HEADER_LEN, GROUPS_DIR, KEY_NAME,
    MAX_RECORD_LEN, OVERLAY_MAGIC, OVERLAY_NAME, RECORD_HEADER_LEN, SEGMENT_MAGIC,
    SNAPSHOT_HEADER_LEN, SNAPSHOT_MAGIC, VERSION,
};

use super::backend::{Backend, StorageFile};

/// A `STORAGE` error from an IO failure.
pub fn storage(what: impl std::fmt::Display, e: std::io::Error) -> Error {
    Error::new(Code::Storage, format!("{what}: {e}"))
}

/// Opens the store file at `path` ([`Backend::open`]: a regular file only). What cannot be
/// opened, or is not a regular file, is `STORAGE` naming the path in its message (`open
/// PATH: it is a FIFO, not a regular file`) and in `details.file`, so that `mwp fsck` names
/// the file, not the group that holds it.
pub fn open_file(be: &dyn Backend, path: &std::path::Path) -> Result<Arc<dyn StorageFile>> {
    be.open(path).map_err(|e| {
        storage(format!("open {}", path.display()), e).with("file", path.display().to_string())
    })
}

/// Options of one [`scan`].
pub struct ScanSpec<'a> {
    /// File name, for errors.
    pub name: &'a str,
    /// Seq the first record must carry.
    pub first_seq: u64,
    /// Whether seqs must follow each other (segments) or merely be present (overlay).
    pub contiguous: bool,
    /// Whether damage at the end may be a torn tail (the last segment, the overlay).
    pub may_be_torn: bool,
    /// Whether the file may end in zero bytes reserved for later appends (the last segment).
    pub reserve: bool,
    /// The overlay's knowledge of redacted seqs.
    pub erased: &'a dyn Fn(u64) -> Option<Erased>,
}

/// Walks every record of `file` after its header with the core's [`Scanner`], reading what
/// it asks for (a chunk at a time), calling `visit` for each good record in order. Returns
/// where the good records end; damage the tail rule cannot explain is `LOG_CORRUPT` naming
/// the file and offset. Damage followed by a later batch is read again from the file before
/// it is reported (the scanner asks; see [`Scanner`]).
pub fn scan(
    file: &dyn StorageFile,
    spec: &ScanSpec<'_>,
    visit: &mut dyn FnMut(Record<'_>) -> Result<()>,
) -> Result<ScanEnd> {
    let len = file
        .len()
        .map_err(|e| storage(format!("size of {}", spec.name), e))?;
    let mut scanner = Scanner::new(log_format::ScanSpec {
        file_len: len,
        first_seq: spec.first_seq,
        contiguous: spec.contiguous,
        may_be_torn: spec.may_be_torn,
        reserve: spec.reserve,
    });
    let mut buf: Vec<u8> = Vec::new();
    let mut buf_start = 0;
    loop {
        match scanner.step(&buf, buf_start, spec.erased) {
            Step::Record(r) => visit(r)?,
            Step::Need(need) => {
                buf.resize(need.len, 0);
                file.read_at(need.at, &mut buf)
                    .map_err(|e| storage(format!("read {} at {}", spec.name, need.at), e))?;
                buf_start = need.at;
            }
            Step::End(end) => return Ok(end),
            Step::Corrupt(damage) => return Err(damage.into_error(spec.name)),
        }
    }
}
