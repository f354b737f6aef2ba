//! `mwp verify --source URL|DIR --group G`: checks a static export (`mwp export`, SPEC §8b)
//! offline with the core's [`StaticReader`]: the signed head under the pinned key, every
//! file's bytes against its content address, every snapshot's signature and every event
//! through a replica, ending verified through the head's seq.
//!
//! The source is an `http://`/`https://` base URL (each file fetched relative to it) or a
//! local directory (each file read from it; a name that would leave the directory is
//! refused, though the reader only ever asks for validated names). Without
//! `--authority-key` the key the export's index names is used, and the report says so
//! (`"key_source": "export"`): that checks the export is whole, not whose it is.
//!
//! On a `FORK` that carries a fork proof, the proof is written to `--proof-out FILE`
//! (default `mwp-fork-<group>-<seq>.proof` in the current directory) and its path printed.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use mwp_core::export::{self, Start, StaticReader, HEAD_FILE};
use mwp_core::{Code, Error, Id, PublicKey};
use serde_json::{json, Value};

use super::super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use super::verify::VerifyArgs;
use super::{id, print};
use crate::cli::export_dir::ExportDir;
use crate::server::client::Client;

/// Where the export's files are read from.
pub enum Files {
    /// An http(s) base URL.
    Http(Client),
    /// A local directory, read through its handle ([`ExportDir`]).
    Dir(ExportDir),
}

impl Files {
    /// The export at `source`: a URL when it starts with `http://` or `https://`, else a
    /// directory.
    pub fn open(source: &str) -> Result<Files, Error> {
        if source.starts_with("http://") || source.starts_with("https://") {
            return Ok(Files::Http(Client::new(source)));
        }
        match ExportDir::open_existing(Path::new(source)) {
            Ok(Some(dir)) => Ok(Files::Dir(dir)),
            Ok(None) => Err(Error::new(
                Code::NotFound,
                format!("the export {source} cannot be read: it does not exist"),
            )),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) => {
                Err(Error::new(
                    Code::NotFound,
                    format!("the export {source} is not a directory"),
                ))
            }
            Err(e) => Err(Error::new(
                Code::NotFound,
                format!("the export {source} cannot be read: {e}"),
            )),
        }
    }

    /// The bytes of `path` (relative to the export's base). A path that is not plain names
    /// (`..`, absolute, empty) or that resolves outside the directory is refused.
    pub fn fetch(&self, path: &str) -> Result<Vec<u8>, Error> {
        let refuse = || {
            Error::malformed(format!("refusing to read {path:?}: it leaves the export"))
                .with("file", path)
        };
        let rel = Path::new(path);
        if path.is_empty()
            || path.contains('\\')
            || !rel.components().all(|c| matches!(c, Component::Normal(_)))
        {
            return Err(refuse());
        }
        match self {
            // At most the bytes a reader accepts for the file, as from a directory: a
            // server cannot make this buffer more by answering a longer body.
            Files::Http(client) => client
                .fetch_limited(&format!("/{path}"), "*/*", export::max_file_bytes(path))
                .map_err(|e| e.with("file", path)),
            Files::Dir(dir) => {
                // Only what lies in the directory, checked on the file opened; at most one
                // byte past the cap, so a file that grows after a length check (another
                // process writing it) still cannot make this buffer without end; and only a
                // regular file, opened without blocking, so a FIFO cannot make this wait
                // forever.
                let max = export::max_file_bytes(path);
                let over = || {
                    Error::malformed(format!(
                        "{path} is over the {max} bytes a reader accepts for it"
                    ))
                    .with("file", path)
                };
                let bytes = dir.read(path, max).map_err(|e| match e.kind() {
                    // Refused by its size before a byte is read.
                    std::io::ErrorKind::FileTooLarge => over(),
                    std::io::ErrorKind::InvalidInput => {
                        Error::malformed(format!("refusing to read {path}: {e}")).with("file", path)
                    }
                    _ => Error::new(Code::NotFound, format!("{path} cannot be read: {e}"))
                        .with("file", path),
                })?;
                if bytes.len() as u64 > max {
                    return Err(over());
                }
                Ok(bytes)
            }
        }
    }
}

/// What the reader ended with.
struct Verified {
    report: Value,
}

/// Reads the whole export through a [`StaticReader`], fetching each file it asks for
/// (`cache` answers files already fetched).
fn read_all(
    files: &Files,
    group: &Id,
    key: PublicKey,
    start: Start,
    mut cache: BTreeMap<String, Vec<u8>>,
) -> Result<Verified, Error> {
    // Every snapshot the index lists is checked, not only the one replay starts from: this
    // is an audit of the whole export.
    let mut reader = StaticReader::new(group.clone(), key, start).check_every_snapshot();
    while let Some(path) = reader.poll_fetch() {
        let bytes = match cache.remove(&path) {
            Some(b) => b,
            None => files.fetch(&path)?,
        };
        reader.handle_fetched(&path, &bytes)?;
    }
    let progress = reader.progress();
    let head = reader
        .head()
        .cloned()
        .ok_or_else(|| Error::malformed("the reader ended without a head"))?;
    let state_hash = reader.replica().state_hash()?;
    Ok(Verified {
        report: json!({
            "ok": true,
            "group": group,
            "seq": head.seq,
            "verified_through": progress.verified_through,
            "head_at": head.at,
            "events": progress.events,
            "state_hash": state_hash,
        }),
    })
}

/// The key the export's own index names, with the files read to find it.
fn key_of_export(files: &Files) -> Result<(PublicKey, BTreeMap<String, Vec<u8>>), Error> {
    let head_bytes = files.fetch(HEAD_FILE)?;
    let hf = export::read_head_file(&head_bytes)?;
    let index_bytes = files.fetch(&hf.index)?;
    let index = export::read_index(&hf.index, &index_bytes)?;
    let mut cache = BTreeMap::new();
    cache.insert(HEAD_FILE.to_owned(), head_bytes);
    cache.insert(hf.index, index_bytes);
    Ok((index.authority, cache))
}

/// Writes the fork proof an error carries (hex of its CBOR), if any; answers its path.
fn write_proof(e: &Error, group: &Id, out: Option<&Path>) -> Result<Option<PathBuf>, Failure> {
    let Some(hex) = e.details.get("proof").and_then(Value::as_str) else {
        return Ok(None);
    };
    let Ok(bytes) = hex::decode(hex) else {
        return Ok(None);
    };
    let seq = e.details.get("seq").and_then(Value::as_u64).unwrap_or(0);
    let path = out.map_or_else(
        || PathBuf::from(format!("mwp-fork-{group}-{seq}.proof")),
        Path::to_path_buf,
    );
    std::fs::write(&path, bytes).map_err(|err| {
        Failure::new(
            super::super::EXIT_UNAVAILABLE,
            format!("cannot write the fork proof to {}: {err}", path.display()),
        )
    })?;
    Ok(Some(path))
}

/// Runs `mwp verify --source`.
pub fn run(args: &VerifyArgs, source: &str) -> Outcome {
    let group = id(&args.group, "--group")?;
    let pinned = match &args.authority_key {
        Some(hex) => Some(super::super::export::parse_key(hex, "--authority-key")?),
        None => None,
    };
    let json = args.output.json();
    let start = match args.from {
        super::verify::From::Genesis => Start::Genesis,
        super::verify::From::Snapshot => Start::Snapshot,
    };
    // An export that cannot be opened at all is bad input (exit 2), like any unreadable
    // file named on the command line; a file missing or damaged inside it is a check that
    // failed (exit 1).
    let files = Files::open(source).map_err(|e| Failure::new(EXIT_BAD_INPUT, e.message))?;
    let outcome = (|| {
        let (key, key_source, cache) = match pinned {
            Some(k) => (k, "pinned", BTreeMap::new()),
            None => {
                let (k, cache) = key_of_export(&files)?;
                (k, "export", cache)
            }
        };
        read_all(&files, &group, key, start, cache).map(|v| (v, key, key_source))
    })();
    match outcome {
        Ok((verified, key, key_source)) => {
            let mut value = verified.report;
            value["key_source"] = json!(key_source);
            value["authority_key"] = json!(key);
            if key_source == "export" {
                eprintln!(
                    "mwp: no --authority-key given: checked under the key the export names ({key}); pin the authority's key to know whose history this is"
                );
            }
            print(json, &value, || {
                format!(
                    "ok: {group} verified through seq {} ({} events read), state {}, under {key} ({key_source})",
                    value["verified_through"], value["events"],
                    value["state_hash"].as_str().unwrap_or("")
                )
            })?;
            Ok(EXIT_OK)
        }
        Err(e) => {
            let proof = if e.code == Code::Fork {
                write_proof(&e, &group, args.proof_out.as_deref())?
            } else {
                None
            };
            let mut error = json!(e);
            if let Some(obj) = error.as_object_mut() {
                // The proof goes to its file; the heads stay as evidence.
                obj.remove("proof");
            }
            let mut value = json!({"ok": false, "group": group, "error": error});
            if let Some(p) = &proof {
                value["proof"] = json!(p.display().to_string());
            }
            print(json, &value, || {
                let mut line = format!("FAILED: {e}");
                if let Some(p) = &proof {
                    line.push_str(&format!("\nfork proof written to {}", p.display()));
                }
                line
            })?;
            Ok(EXIT_FAILED)
        }
    }
}
