//! The files a command reads as its input (a transcript, events for `mwp replica`, a snapshot,
//! a fork proof, a command body, an org policy): a regular file or a pipe, read up to a cap.
//!
//! A path that names a directory, a device (`/dev/zero` would never end) or a socket is
//! refused by its type; a FIFO is opened without waiting for a writer (one with no writer
//! reads as empty) and then read as a pipe. Whatever the source, no more than its cap is ever
//! held: a longer input is refused, naming the cap, after reading one byte past it.

use std::io::{BufRead, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use rustix::fs::OFlags;

/// Largest transcript file: 64 MiB (SPEC §12 steps are commands of at most 64 KiB each).
pub const MAX_TRANSCRIPT_BYTES: u64 = 64 << 20;
/// Largest line of `mwp replica`'s input: the largest event a store holds
/// (`log_format::MAX_RECORD_LEN`), as for a line of `mwp tail`.
pub const MAX_EVENT_LINE_BYTES: u64 = mwp_core::log_format::MAX_RECORD_LEN as u64;
/// Largest fork proof file: 64 MiB (two events of at most 16 MiB, the heads and signatures).
pub const MAX_PROOF_BYTES: u64 = 64 << 20;
/// Largest command body file (`mwp submit BODY`, or `-`): the server's request body limit
/// (docs/http.md "Limits"), 4 × 64 KiB + 4 KiB.
pub const MAX_BODY_BYTES: u64 = 4 * 64 * 1024 + 4096;
/// Largest org policy file: 1 MiB.
pub const MAX_POLICY_BYTES: u64 = 1 << 20;

/// Opens `path` for reading if it is a regular file or a FIFO (a pipe such as `<(…)` or
/// `/dev/stdin` on a pipe), without blocking on a FIFO that has no writer; anything else is
/// `InvalidInput` naming what it is.
pub fn open(path: &Path) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OFlags::NONBLOCK.bits() as i32)
        .open(path)?;
    let t = file.metadata()?.file_type();
    let what = if t.is_file() || t.is_fifo() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    };
    if let Some(what) = what {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("it is {what}, not a file"),
        ));
    }
    if t.is_fifo() {
        // Opened: now wait for what the writer sends, as a pipe is read.
        let flags = rustix::fs::fcntl_getfl(&file)?;
        rustix::fs::fcntl_setfl(&file, flags - OFlags::NONBLOCK)?;
    }
    Ok(file)
}

/// Reads all of `reader`, refusing (`InvalidData`) an input longer than `max` bytes after
/// reading one byte past it.
pub fn read_capped(reader: impl Read, max: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("it is longer than {max} bytes, the most this command reads"),
        ));
    }
    Ok(bytes)
}

/// The bytes of the file at `path` ([`open`]), at most `max` of them ([`read_capped`]).
pub fn read(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    read_capped(open(path)?, max)
}

/// `bytes` as text, or where it stops being UTF-8: `line L column C` (from 1, of bytes).
pub fn text(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let before = &bytes[..at];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = at
            - before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1)
            + 1;
        format!("it is not UTF-8 text: line {line} column {column}")
    })
}

/// The next line of `reader` (without its `\n`, or `\r\n`), `None` at the end; a line longer
/// than `max` bytes is `InvalidData`, read no further than one byte past `max`.
pub fn next_line(reader: &mut impl BufRead, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let n = reader
        .by_ref()
        .take(max.saturating_add(2))
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
    }
    if line.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a line is longer than {max} bytes"),
        ));
    }
    Ok(Some(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_directories_are_refused_and_inputs_are_capped() {
        let e = read(Path::new("/dev/zero"), 10).expect_err("a device");
        assert!(e.to_string().contains("a character device"), "{e}");
        let dir = tempfile::tempdir().expect("tempdir");
        let e = read(dir.path(), 10).expect_err("a directory");
        assert!(e.to_string().contains("a directory"), "{e}");
        let fifo = dir.path().join("fifo");
        crate::regular_file::mkfifo(&fifo);
        assert_eq!(read(&fifo, 10).expect("no writer: empty"), b"");
        let file = dir.path().join("f");
        std::fs::write(&file, b"0123456789").expect("write");
        assert_eq!(read(&file, 10).expect("at the cap"), b"0123456789");
        let e = read(&file, 9).expect_err("over the cap");
        assert!(e.to_string().contains("longer than 9 bytes"), "{e}");
    }

    #[test]
    fn lines_are_split_and_capped() {
        let mut r = std::io::BufReader::new(&b"ab\r\ncd\n\nefgh"[..]);
        assert_eq!(next_line(&mut r, 4).expect("ok"), Some(b"ab".to_vec()));
        assert_eq!(next_line(&mut r, 4).expect("ok"), Some(b"cd".to_vec()));
        assert_eq!(next_line(&mut r, 4).expect("ok"), Some(Vec::new()));
        assert_eq!(next_line(&mut r, 4).expect("ok"), Some(b"efgh".to_vec()));
        assert_eq!(next_line(&mut r, 4).expect("ok"), None);
        let mut r = std::io::BufReader::new(&b"abcde\n"[..]);
        assert!(next_line(&mut r, 4).is_err());
        assert_eq!(
            text(b"ok\n\xffno"),
            Err("it is not UTF-8 text: line 2 column 1".to_owned())
        );
    }
}
