//! The files a command reads as its input (a transcript, events for `mwp replica`, a snapshot,
//! a fork proof, a command body, an org policy): a regular file or a pipe, read up to a cap.
//!
//! A path that names a directory, a device (`/dev/zero` would never end) or a socket is
//! refused by its type, before it is opened, except the null device (`/dev/null`, an empty
//! input, as scripts give one); a FIFO is opened as a pipe is, waiting for its writer (a
//! named pipe whose writer starts after the command is read whole). Whatever the source, no
//! more than its cap is ever held: a longer input is refused, naming the cap, after reading
//! one byte past it.

use std::io::{BufRead, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

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

/// Opens `path` for reading if it is a regular file or a FIFO (a pipe such as `<(…)`,
/// `/dev/stdin` on a pipe, or a named pipe, whose writer it waits for as any reader of a pipe
/// does) or the null device (an empty input); anything else is `InvalidInput` naming what it
/// is, refused before it is opened (opening a device may wait, or act). The file opened is
/// checked again.
pub fn open(path: &Path) -> std::io::Result<std::fs::File> {
    refuse_other_types(&std::fs::metadata(path)?)?;
    let file = std::fs::File::open(path)?;
    refuse_other_types(&file.metadata()?)?;
    Ok(file)
}

/// Whether `m` is the null device: the device `/dev/null` names.
fn is_null_device(m: &std::fs::Metadata) -> bool {
    m.file_type().is_char_device()
        && std::fs::metadata("/dev/null")
            .is_ok_and(|null| null.file_type().is_char_device() && null.rdev() == m.rdev())
}

/// `Ok` for a regular file, a FIFO or the null device, else `InvalidInput` naming what `m` is.
fn refuse_other_types(m: &std::fs::Metadata) -> std::io::Result<()> {
    let t = m.file_type();
    if t.is_file() || t.is_fifo() || is_null_device(m) {
        return Ok(());
    }
    let what = crate::regular_file::kind(t);
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("it is {what}, not a file"),
    ))
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
        // The null device is an empty input, as scripts give one.
        assert_eq!(read(Path::new("/dev/null"), 10).expect("empty"), b"");
        let dir = tempfile::tempdir().expect("tempdir");
        let e = read(dir.path(), 10).expect_err("a directory");
        assert!(e.to_string().contains("a directory"), "{e}");
        let fifo = dir.path().join("fifo");
        crate::regular_file::mkfifo(&fifo);
        // A named pipe whose writer starts after the reader is read whole, as a pipe is.
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(200));
                std::fs::write(&fifo, b"late").expect("write the fifo");
            })
        };
        assert_eq!(read(&fifo, 10).expect("a late writer"), b"late");
        writer.join().expect("the writer");
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
