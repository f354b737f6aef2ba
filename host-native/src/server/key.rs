//! The authority's key file: 64 lowercase hex digits (the Ed25519 seed) and a newline, mode
//! 0600, created on first start.

use std::io::Write;
use std::path::Path;

use mwp_core::{Code, Error, PublicKey, Result, SecretKey};

use crate::memory_service::random_key;

/// The key file's name inside a data directory.
pub const FILE_NAME: &str = "authority.key";

fn storage(path: &Path, what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(
        Code::Storage,
        format!("authority key file {}: {what}: {e}", path.display()),
    )
}

/// Reads the key at `path`, or creates it with a fresh random key if the file is missing.
/// A file that exists but does not hold a key is an error: it is never overwritten.
pub fn load_or_create(path: &Path) -> Result<SecretKey> {
    match std::fs::read_to_string(path) {
        Ok(text) => return parse(path, &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(storage(path, "cannot be read", e)),
    }
    let key = random_key()?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = match options.open(path) {
        Ok(f) => f,
        // Another process created it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text =
                std::fs::read_to_string(path).map_err(|e| storage(path, "cannot be read", e))?;
            return parse(path, &text);
        }
        Err(e) => return Err(storage(path, "cannot be created", e)),
    };
    file.write_all(format!("{}\n", hex::encode(key.to_bytes())).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| storage(path, "cannot be written", e))?;
    if let Some(dir) = path.parent() {
        // Make the new directory entry durable too; failure here only weakens durability.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(key)
}

/// Reads the key at `path` (`--authority-key-file`), refusing a file that group or others may
/// read or write: its mode must be 0600 (or stricter). Never creates one.
pub fn load_protected(path: &Path) -> Result<SecretKey> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).map_err(|e| storage(path, "cannot be read", e))?;
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
    // A regular file only, opened without blocking: a FIFO would wait for a writer forever.
    let bytes =
        crate::regular_file::read(path, 4096).map_err(|e| storage(path, "cannot be read", e))?;
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

    #[test]
    fn created_once_then_read_back_with_mode_0600() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(FILE_NAME);
        let a = load_or_create(&path).expect("created");
        let b = load_or_create(&path).expect("read");
        assert_eq!(a.public(), b.public());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_protected_key_file_must_be_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("key");
        let key = load_or_create(&path).expect("created");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let err = load_protected(&path).expect_err("refused");
        assert!(err.message.contains("0640"), "{}", err.message);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(load_protected(&path).expect("read").public(), key.public());
    }

    #[test]
    fn transcript_keys_are_recognised() {
        let derived = SecretKey::for_transcript("@authority").public();
        assert_eq!(transcript_actor(&derived), Some("@authority"));
        let random = crate::memory_service::random_key().expect("key").public();
        assert_eq!(transcript_actor(&random), None);
    }

    #[test]
    fn a_damaged_key_file_is_refused_not_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, "not a key").expect("write");
        let err = load_or_create(&path).expect_err("refused");
        assert_eq!(err.code, Code::Storage);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "not a key");
    }
}
