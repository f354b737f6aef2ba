//! The redaction overlay and erasure (SPEC §6): the redacted form of an event is written to
//! the overlay and synced, then the record's payload is zeroed in place with a matching CRC.

use super::*;

impl Overlay {
    /// Whether the overlay holds the redacted form of event `seq`.
    pub(crate) fn holds(&self, seq: u64) -> bool {
        self.entries.contains_key(&seq)
    }

    /// Reads the redacted event an entry points at; `dir` is the group's directory.
    pub(super) fn read(&self, dir: &Path, e: &OverlayEntry) -> Result<Event> {
        let file = self
            .file
            .as_ref()
            .ok_or_else(|| Error::corrupt("redaction overlay is missing"))?;
        let mut buf = vec![0u8; e.len as usize];
        file.read_at(e.offset, &mut buf)
            .map_err(io_err(format!("read {}", dir.join(OVERLAY_NAME).display())))?;
        // A redacted event keeps its payload hash and id (SPEC §6): both still verify.
        Event::from_cbor_verified(&buf).map_err(|x| corrupt_at(OVERLAY_NAME, e.offset, x.message))
    }
}

impl GroupLog {
    /// Erases the stored opaque values of event `seq` (SPEC §6): the redacted form goes to the
    /// overlay (synced), then the record's payload is zeroed in place (synced).
    pub(crate) fn erase(&self, seq: u64) -> Result<()> {
        let _one_at_a_time = lock(&self.erasing);
        let (file, name, off, h, payload) = self.read_record(seq)?;
        let known = read(&self.overlay).entries.get(&seq).copied();
        if known.is_none() {
            if !h.matches(&payload) {
                return Err(corrupt_at(
                    &name,
                    off,
                    format!("record seq {seq} checksum mismatch"),
                ));
            }
            if payload.iter().all(|&b| b == 0) {
                return Err(erased_without_entry(&name, off, seq));
            }
            let mut event =
                Event::from_cbor(&payload).map_err(|e| corrupt_at(&name, off, e.message))?;
            event.redact()?;
            let red = event.to_cbor()?;
            let entry = encode_overlay_entry(
                Erased {
                    len: h.len,
                    crc: h.crc,
                },
                &red,
            );
            let (ofile, oend) = self.overlay_file()?;
            let mut rec = Vec::new();
            encode_record(&mut rec, seq, seq, &entry);
            let oname = self.path(OVERLAY_NAME).display().to_string();
            ofile
                .write_at(oend, &rec)
                .map_err(io_err(format!("append to {oname}")))?;
            ofile.sync_data().map_err(io_err(format!("sync {oname}")))?;
            let mut ov = write(&self.overlay);
            ov.end = oend + rec.len() as u64;
            ov.entries.insert(
                seq,
                OverlayEntry {
                    offset: oend + (RECORD_HEADER_LEN + 8) as u64,
                    len: red.len() as u32,
                    orig: Erased {
                        len: h.len,
                        crc: h.crc,
                    },
                },
            );
        }
        zero_record(&file, &self.path(&name), off, &h)
    }

    /// The overlay file and its end, creating it (durably) if needed.
    pub(super) fn overlay_file(&self) -> Result<(Arc<dyn StorageFile>, u64)> {
        {
            let ov = read(&self.overlay);
            if let Some(f) = &ov.file {
                return Ok((f.clone(), ov.end));
            }
        }
        let header = FileHeader {
            magic: OVERLAY_MAGIC,
            first_seq: 0,
            prev: Hash::ZERO,
            group: self.id.clone(),
        }
        .encode();
        let file = write_new_file(&self.ctx, &self.dir, OVERLAY_NAME, &header)?;
        let mut ov = write(&self.overlay);
        ov.file = Some(file.clone());
        ov.end = FILE_HEADER_LEN as u64;
        Ok((file, ov.end))
    }

    pub(super) fn needs_zeroing(&self, seq: u64) -> Result<bool> {
        let (_, _, _, h, payload) = self.read_record(seq)?;
        Ok(!h.is_erased(&payload))
    }
}

/// Zeroes a record's payload and rewrites its CRC to match, in one write, then syncs.
pub(super) fn zero_record(
    file: &Arc<dyn StorageFile>,
    path: &Path,
    off: u64,
    h: &RecordHeader,
) -> Result<()> {
    file.write_at(off + 20, &h.erase_patch())
        .map_err(io_err(format!("erase in {}", path.display())))?;
    file.sync_data()
        .map_err(io_err(format!("sync {}", path.display())))
}
