//! Reading a file that must be a regular file: opened without blocking and refused, by its
//! type, unless it is one. A FIFO, socket or device put where a command expects a file (an
//! export's `head.json`, a key file) would otherwise block the read forever, or never end.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// What a file of this type is called in a message.
pub(crate) fn kind(t: std::fs::FileType) -> &'static str {
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading, without blocking (`O_NONBLOCK`: opening a FIFO with no writer
/// returns at once), and refuses it with `InvalidInput` unless `fstat` says it is a regular
/// file. The returned file reads as any other (the flag changes nothing for regular files).
pub fn open(path: &Path) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)?;
    let t = file.metadata()?.file_type();
    if !t.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("it is {}, not a regular file", kind(t)),
        ));
    }
    Ok(file)
}

/// The bytes of the regular file at `path` ([`open`]), at most `max + 1` of them: a caller
/// that gets more than `max` knows the file is over its cap without having read it whole
/// (it grew while it was read). A file `fstat` already says is longer than `max` is refused
/// unread, with `FileTooLarge`: a sparse file of 50 GiB under a 4 GiB cap is not read for
/// 4 GiB of zeros first.
pub fn read(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    read_opened(open(path)?, max)
}

/// [`read`] of a file [`open`] opened already: for a caller that checks something of the
/// file itself (its mode, by `fstat`) between the open and the read, so that what it checks
/// is what it reads.
pub fn read_opened(file: std::fs::File, max: u64) -> std::io::Result<Vec<u8>> {
    let len = file.metadata()?.len();
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("it is {len} bytes, over the {max} bytes it may hold"),
        ));
    }
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Makes a FIFO at `path`: what a test puts where a regular file is expected.
#[cfg(test)]
pub(crate) fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_without_blocking_and_a_regular_file_is_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("head.json");
        mkfifo(&fifo);
        let e = read(&fifo, 10).expect_err("a FIFO is refused");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = read(dir.path(), 10).expect_err("a directory is refused");
        assert!(e.to_string().contains("a directory"), "{e}");
        let file = dir.path().join("a");
        std::fs::write(&file, b"0123456789abc").expect("write");
        assert_eq!(read(&file, 100).expect("read"), b"0123456789abc");
        let e = read(&file, 4).expect_err("over the cap, by its size");
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
        assert!(e.to_string().contains("13 bytes, over the 4"), "{e}");
        // A sparse file far over its cap is refused unread.
        std::fs::File::create(&file)
            .and_then(|f| f.set_len(50 << 30))
            .expect("sparse");
        let e = read(&file, 1 << 20).expect_err("over the cap");
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
    }
}
