//! `mwp keygen [--out FILE]` and the member key file it writes.
//!
//! A key file holds the Ed25519 seed as 64 lowercase hex digits and a newline, the format of
//! a data directory's `authority.key` (docs/decisions.md, "Member key files"). `keygen`
//! creates it with mode 0600 and never overwrites a file; commands that sign refuse a key
//! file that group or others may read.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use mwp_core::SecretKey;
use serde_json::json;

use super::super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_OK, EXIT_UNAVAILABLE};
use super::OutputArgs;

/// `mwp keygen` arguments.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Write the secret key to FILE (created with mode 0600; an existing file is never
    /// overwritten). Without it the secret key is printed.
    #[arg(long, short, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// How to print.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Runs `mwp keygen`: prints the public key (and the secret one when there is no `--out`).
pub fn run(args: &KeygenArgs) -> Outcome {
    let key = crate::memory_service::random_key()
        .map_err(|e| Failure::new(EXIT_UNAVAILABLE, e.message))?;
    let public = key.public().to_hex();
    let json = args.output.json();
    match &args.out {
        Some(path) => {
            write_new(path, &key)?;
            let value = json!({"file": path.display().to_string(), "public": public});
            super::print(json, &value, || {
                format!(
                    "secret key written to {} (mode 0600)\npublic key: {public}",
                    path.display()
                )
            })?;
        }
        None => {
            let secret = hex::encode(key.to_bytes());
            let value = json!({"secret": secret, "public": public});
            super::print(json, &value, || {
                format!("secret key: {secret}\npublic key: {public}")
            })?;
        }
    }
    Ok(EXIT_OK)
}

fn write_new(path: &Path, key: &SecretKey) -> Result<(), Failure> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let fail = |what: &str, e: std::io::Error| {
        let exit = if e.kind() == std::io::ErrorKind::AlreadyExists {
            EXIT_BAD_INPUT
        } else {
            EXIT_UNAVAILABLE
        };
        Failure::new(exit, format!("key file {}: {what}: {e}", path.display()))
    };
    let mut file = options.open(path).map_err(|e| {
        fail(
            "cannot be created (an existing file is never overwritten)",
            e,
        )
    })?;
    file.write_all(format!("{}\n", hex::encode(key.to_bytes())).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| fail("cannot be written", e))
}

/// Reads a member key file: it must grant nothing to group or others (mode 0600) and hold
/// 64 hex digits. Every failure is bad input (exit 2) naming the file and what is wrong.
pub fn load(path: &Path) -> Result<SecretKey, Failure> {
    let bad = |what: String| {
        Failure::new(
            EXIT_BAD_INPUT,
            format!("key file {}: {what}", path.display()),
        )
    };
    // A regular file only, opened without blocking: a FIFO would wait for a writer forever.
    let text =
        crate::regular_file::read(path, 4096).map_err(|e| bad(format!("cannot be read: {e}")))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(|e| bad(format!("cannot be read: {e}")))?
            .permissions()
            .mode()
            & 0o777;
        if mode & 0o077 != 0 {
            return Err(bad(format!(
                "its mode is {mode:04o}, so others may read the secret key; it must be 0600 (`chmod 600 {}`)",
                path.display()
            )));
        }
    }
    let text = std::str::from_utf8(&text).map_err(|_| {
        bad(
            "does not hold a key: expected 64 hex digits (as `mwp keygen --out FILE` writes)"
                .into(),
        )
    })?;
    let mut seed = [0u8; 32];
    let trimmed = text.trim();
    if trimmed.len() != 64 || hex::decode_to_slice(trimmed, &mut seed).is_err() {
        return Err(bad(
            "does not hold a key: expected 64 hex digits (as `mwp keygen --out FILE` writes)"
                .into(),
        ));
    }
    Ok(SecretKey::from_bytes(&seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_key_reads_back_and_is_never_overwritten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("k");
        let key = crate::memory_service::random_key().expect("key");
        write_new(&path, &key).expect("written");
        assert_eq!(load(&path).expect("read").public(), key.public());
        let again = write_new(&path, &key).expect_err("exists");
        assert_eq!(again.exit, EXIT_BAD_INPUT);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_key_file_others_may_read_or_without_a_key_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("k");
        std::fs::write(&path, "not a key\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let fifo = dir.path().join("fifo");
        crate::regular_file::mkfifo(&fifo);
        let err = load(&fifo).expect_err("a FIFO is no key file");
        assert!(err.message.contains("a FIFO"), "{}", err.message);
        let err = load(&path).expect_err("no key");
        assert!(
            err.message.contains("does not hold a key"),
            "{}",
            err.message
        );
        std::fs::write(&path, format!("{}\n", "ab".repeat(32))).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = load(&path).expect_err("readable by others");
        assert!(err.message.contains("0644"), "{}", err.message);
    }
}
