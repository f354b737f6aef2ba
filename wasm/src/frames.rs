//! Frame batches: many encoded items (events, receipts) in one `Uint8Array`, so a batch
//! crosses the wasm boundary in one copy instead of one call per item.
//!
//! Layout: a sequence of frames, each a 4-byte little-endian length `n` followed by `n`
//! bytes (one canonical CBOR item). An empty batch is zero bytes. A length running past the
//! end of the batch is `MALFORMED`.

use mwp_core::Error;
use wasm_bindgen::prelude::*;

use crate::error::CodecError;

/// Appends one frame to `out`.
pub fn push(out: &mut Vec<u8>, item: &[u8]) -> Result<(), Error> {
    let len =
        u32::try_from(item.len()).map_err(|_| Error::malformed("a frame holds at most 4 GiB"))?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(item);
    Ok(())
}

/// Joins items into one frame batch.
pub fn join<T: AsRef<[u8]>>(items: impl IntoIterator<Item = T>) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    for item in items {
        push(&mut out, item.as_ref())?;
    }
    Ok(out)
}

/// Splits a batch into its frames, without copying.
pub fn split(batch: &[u8]) -> Result<Vec<&[u8]>, Error> {
    let mut items = Vec::new();
    let mut rest = batch;
    while !rest.is_empty() {
        let (head, tail) = rest.split_at_checked(4).ok_or_else(|| {
            Error::malformed(format!(
                "frame batch: {} trailing bytes are too few for a length",
                rest.len()
            ))
        })?;
        let len = u32::from_le_bytes(head.try_into().expect("split_at_checked(4) gives 4 bytes"));
        let len = usize::try_from(len).map_err(|_| Error::malformed("frame too large"))?;
        let (item, tail) = tail.split_at_checked(len).ok_or_else(|| {
            Error::malformed(format!(
                "frame batch: frame {} claims {len} bytes but only {} remain",
                items.len() + 1,
                tail.len()
            ))
        })?;
        items.push(item);
        rest = tail;
    }
    Ok(items)
}

/// Joins byte arrays into one frame batch.
#[wasm_bindgen(js_name = frameBatch)]
pub fn frame_batch(items: Vec<js_sys::Uint8Array>) -> Result<Vec<u8>, CodecError> {
    Ok(join(items.iter().map(js_sys::Uint8Array::to_vec))?)
}

/// Splits a frame batch into its byte arrays.
#[wasm_bindgen(js_name = splitBatch)]
pub fn split_batch(batch: &[u8]) -> Result<Vec<js_sys::Uint8Array>, CodecError> {
    Ok(split(batch)?
        .into_iter()
        .map(js_sys::Uint8Array::from)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let mut b = Vec::new();
        push(&mut b, b"abc").unwrap();
        push(&mut b, b"").unwrap();
        push(&mut b, b"de").unwrap();
        assert_eq!(split(&b).unwrap(), vec![&b"abc"[..], &b""[..], &b"de"[..]]);
        assert!(split(&b[..b.len() - 1]).is_err());
        assert!(split(&b[..2]).is_err());
        assert!(split(&[]).unwrap().is_empty());
    }
}
