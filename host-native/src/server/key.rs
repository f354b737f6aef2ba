//! The authority's key file a PostgreSQL store is given (`--authority-key-file`): 64 hex
//! digits (the Ed25519 seed) and a newline, mode 0600. A file store reads and creates its
//! own, `DIR/authority.key` (`crate::store::read_key_file`).

use std::path::Path;

use mwp_core::{Code, Error, PublicKey, Result, SecretKey};

/// The key file's name inside a data directory.
pub const FILE_NAME: &str = "authority.key";

/// The most bytes of a key file read: a key is 64 hex digits and a newline.
const MAX_KEY_FILE: u64 = 4096;

fn storage(path: &Path, what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(
        Code::Storage,
        format!("authority key file {}: {what}: {e}", path.display()),
    )
}

/// Reads the key at `path` (`--authority-key-file`), refusing a file that group or others may
/// read or write: its mode must be 0600 (or stricter). Never creates one.
pub fn load_protected(path: &Path) -> Result<SecretKey> {
    // A regular file only, opened without blocking (a FIFO would wait for a writer forever),
    // and opened first: what is not a regular file is named by its type, not by its mode.
    let file = crate::regular_file::open(path).map_err(|e| storage(path, "cannot be read", e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = file
            .metadata()
            .map_err(|e| storage(path, "cannot be read", e))?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(Error::new(
                Code::Malformed,
                format!(
                    "authority key file {}: its mode is {mode:04o}, so others may read the secret key; it must be 0600 (`chmod 600 {}`)",
                    path.display(),
                    path.display()
                ),
            ));
        }
    }
    // Read up to a cap: a key is 65 bytes, and a file of many GiB is refused unread.
    let bytes = crate::regular_file::read_capped(file, MAX_KEY_FILE)
        .map_err(|e| storage(path, "cannot be read", e))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| storage(path, "does not hold a key", "it is not text"))?;
    parse(path, &text)
}

/// The actors whose transcript keys (SPEC §12) an authority might be found holding: the
/// one `mwp transcript --data DIR` writes, and its spelling without the `@`.
const TRANSCRIPT_ACTORS: &[&str] = &[mwp_core::id::AUTHORITY_ACTOR, "authority"];

/// The actor whose transcript key (`sha256("mwp transcript key " + actor)`, which anyone can
/// derive) `key` is, if it is one an authority might be found holding (the transcripts'
/// authority actor, with or without its `@`).
pub fn transcript_actor(key: &PublicKey) -> Option<&'static str> {
    TRANSCRIPT_ACTORS
        .iter()
        .copied()
        .find(|actor| SecretKey::for_transcript(actor).public() == *key)
}

fn parse(path: &Path, text: &str) -> Result<SecretKey> {
    let mut seed = [0u8; 32];
    let trimmed = text.trim();
    if trimmed.len() != 64 || hex::decode_to_slice(trimmed, &mut seed).is_err() {
        return Err(storage(
            path,
            "does not hold a key",
            "expected 64 hex digits",
        ));
    }
    Ok(SecretKey::from_bytes(&seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key file of mode 0600 holding `key` at `path`.
    #[cfg(unix)]
    fn write_key(path: &Path, key: &SecretKey) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, format!("{}\n", hex::encode(key.to_bytes()))).expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }

    #[cfg(unix)]
    #[test]
    fn a_protected_key_file_must_be_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("key");
        let key = SecretKey::for_transcript("k");
        write_key(&path, &key);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let err = load_protected(&path).expect_err("refused");
        assert!(err.message.contains("0640"), "{}", err.message);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(load_protected(&path).expect("read").public(), key.public());
    }

    /// What is not a regular file is refused by its type, whatever its mode, without waiting
    /// on a FIFO; a file far longer than a key is refused unread; a file that holds no key is
    /// refused and left as it is.
    #[cfg(unix)]
    #[test]
    fn a_key_file_is_a_short_regular_file_holding_a_key() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        crate::regular_file::mkfifo(&fifo);
        for mode in [0o600, 0o644] {
            std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(mode)).expect("chmod");
            let err = load_protected(&fifo).expect_err("a FIFO");
            assert_eq!(
                err.message,
                format!(
                    "authority key file {}: cannot be read: it is a FIFO, not a regular file",
                    fifo.display()
                )
            );
        }
        let huge = dir.path().join("huge");
        write_key(&huge, &SecretKey::for_transcript("k"));
        std::fs::File::options()
            .write(true)
            .open(&huge)
            .and_then(|f| f.set_len(50 << 30))
            .expect("sparse");
        let err = load_protected(&huge).expect_err("too long");
        assert!(
            err.message.contains("over the 4096 bytes"),
            "{}",
            err.message
        );
        let damaged = dir.path().join("damaged");
        std::fs::write(&damaged, "not a key").expect("write");
        std::fs::set_permissions(&damaged, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let err = load_protected(&damaged).expect_err("refused");
        assert_eq!(err.code, Code::Storage);
        assert_eq!(
            std::fs::read_to_string(&damaged).expect("read"),
            "not a key"
        );
    }

    #[test]
    fn transcript_keys_are_recognised() {
        let derived = SecretKey::for_transcript("@authority").public();
        assert_eq!(transcript_actor(&derived), Some("@authority"));
        let random = crate::memory_service::random_key().expect("key").public();
        assert_eq!(transcript_actor(&random), None);
    }
}
