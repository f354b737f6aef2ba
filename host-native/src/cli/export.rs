//! `mwp export --group G --out DIR`: writes a Group's history as a static export (SPEC §8b,
//! docs/format.md "Static export") that any static file host or CDN can serve, and that
//! `mwp verify --source` (or any `StaticReader`) checks with nothing but the authority key.
//!
//! The source is a store opened read-only (`--data DIR`, `--store URL`: no writer lock,
//! nothing in it changes) or a server (`--server URL`). With a store, the head is the one the
//! store's own `sign_head` signs (its last durable event) with the authority key it keeps
//! (`DIR/authority.key`, or `--authority-key-file` for PostgreSQL); with a server it is the
//! signed head `GET /v1/groups/{g}/head` answers.
//!
//! Writing is crash safe: each new file goes to a temporary name in its directory, is synced,
//! then linked to its name (never replacing a file), and the directory is synced; `head.json`
//! goes last the same way, replacing the old one by rename. A crash at any point leaves the
//! old export whole (at worst with unreferenced new files, or a leftover temporary file).
//! Files are 0644 and directories 0755: an export is public by design.
//!
//! The events are read a page at a time and each chunk is written as soon as it is cut
//! ([`export::Planner`]), so an export holds one page and one chunk in memory, not the whole
//! run; the index and `head.json` are written once every event reached the signed head. A run
//! that fails removes the files and directories it created, so the export in place (or its
//! absence) is left as it was.

use std::path::{Path, PathBuf};

use clap::Args;
use mwp_core::export::{self, ExportIndex, HEAD_FILE};
use mwp_core::head::SignedHead;
use mwp_core::{Error, PublicKey};
use serde_json::json;

use super::client::source::SourceArgs;
use super::client::{id, OutputArgs};
use super::export_dir::ExportDir;
use super::store::{self, StoreUrl};
use super::{Failure, Outcome, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE};
use crate::server::client::Client;
use crate::service::AuthorityService;

/// Events read per page from a store.
const STORE_PAGE: usize = 8192;
/// Events asked for per page from a server.
const SERVER_PAGE: usize = 1000;

/// `mwp export` arguments.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Where the history is.
    #[command(flatten)]
    pub source: SourceArgs,
    /// The group.
    #[arg(long, env = "MWP_GROUP")]
    pub group: String,
    /// The export directory (created if missing; an export already there is continued).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// PostgreSQL: the authority's secret key (64 hex digits, mode 0600) to sign the head
    /// with. A file store's key is read from DIR/authority.key.
    #[arg(long, value_name = "FILE")]
    pub authority_key_file: Option<PathBuf>,
    /// How to print.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Where the history comes from, with what signs (or signed) its head.
enum From {
    /// A store opened read-only, holding the authority's secret key (its `sign_head`).
    Store(std::sync::Arc<dyn AuthorityService>),
    /// A server.
    Server(Client),
}

fn failed(message: impl Into<String>) -> Failure {
    Failure::new(EXIT_FAILED, message)
}

/// Opens the source: a store (read-only) with its authority key, or a server.
fn open(args: &ExportArgs) -> Result<From, Failure> {
    let s = &args.source;
    let url = match (&s.data, &s.store, &s.server) {
        (Some(dir), _, _) => StoreUrl::File(dir.clone()),
        (None, Some(url), _) => url.clone(),
        (None, None, Some(server)) => {
            return super::client::client(server, s.token.as_deref()).map(From::Server)
        }
        (None, None, None) => store::from_env()?.ok_or_else(|| {
            Failure::new(
                EXIT_BAD_INPUT,
                "name the history with --data DIR, --store URL or --server URL",
            )
        })?,
    };
    let key_file = match (&url, &args.authority_key_file) {
        (StoreUrl::File(_), Some(_)) => {
            return Err(Failure::new(
                EXIT_BAD_INPUT,
                "--authority-key-file is for PostgreSQL stores; a file store keeps its key in DIR/authority.key",
            ))
        }
        (StoreUrl::File(dir), None) => dir.join(crate::server::key::FILE_NAME),
        (StoreUrl::Memory, _) => {
            return Err(Failure::new(
                EXIT_BAD_INPUT,
                "memory: holds no history to export; use --data DIR, --store URL or --server URL",
            ))
        }
        (StoreUrl::Postgres(_), Some(file)) => file.clone(),
        (StoreUrl::Postgres(_), None) => {
            return Err(Failure::new(
                EXIT_BAD_INPUT,
                "exporting from PostgreSQL signs the head with the authority key: give it with --authority-key-file FILE (or export through --server)",
            ))
        }
    };
    let key = crate::server::key::load_protected(&key_file)
        .map_err(|e| Failure::new(EXIT_BAD_INPUT, e.message))?;
    let options = store::Options {
        read_only: true,
        authority_key: matches!(url, StoreUrl::Postgres(_)).then(|| key.clone()),
        ..store::Options::default()
    };
    let service = store::open(&url, &options)?;
    if service.authority_key() != key.public() {
        return Err(Failure::new(
            EXIT_BAD_INPUT,
            format!(
                "{} holds the key {}, but the store's authority key is {}",
                key_file.display(),
                key.public(),
                service.authority_key()
            ),
        ));
    }
    Ok(From::Store(service))
}

/// The export in place, if any: its index and the index's path.
struct Previous {
    index: ExportIndex,
    path: String,
}

/// `--out` names a directory, or nothing yet (it is then created): anything else (a regular
/// file, a FIFO, a link to nothing) is bad input (exit 2), named before anything is read.
fn check_out(out: &Path) -> Result<(), Failure> {
    let bad = |what: String| {
        Failure::new(
            EXIT_BAD_INPUT,
            format!(
                "--out {}: {what}; name a directory (created if missing)",
                out.display()
            ),
        )
    };
    match std::fs::metadata(out) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(m) => Err(bad(format!(
            "it is {}, not a directory",
            crate::regular_file::kind(m.file_type())
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::read_link(out) {
            Ok(target) => Err(bad(format!(
                "it is a symbolic link to {}, which does not exist",
                target.display()
            ))),
            Err(_) => Ok(()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Err(bad(e.to_string())),
        Err(e) => Err(super::export_dir::io_fail("read", out, e)),
    }
}

/// What the export directory holds now: its index, if any. A damaged `head.json` or index
/// stops the export (exit 1).
fn previous(dir: &mut ExportDir, out: &Path) -> Result<Option<Previous>, Failure> {
    let head_path = out.join(HEAD_FILE);
    let bytes = match dir.read(HEAD_FILE, export::max_file_bytes(HEAD_FILE)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::FileTooLarge
            ) =>
        {
            return Err(damaged(out, format!("{HEAD_FILE}: {e}")))
        }
        Err(e) => {
            return Err(Failure::new(
                EXIT_UNAVAILABLE,
                format!("cannot read {}: {e}", head_path.display()),
            ))
        }
    };
    let hf = export::read_head_file(&bytes).map_err(|e| damaged(out, e))?;
    let index_bytes = dir
        .read(&hf.index, export::max_file_bytes(&hf.index))
        .map_err(|e| {
            failed(format!(
                "the export in {} names {}, which cannot be read: {e}",
                out.display(),
                hf.index
            ))
        })?;
    let index = export::read_index(&hf.index, &index_bytes).map_err(|e| damaged(out, e))?;
    Ok(Some(Previous {
        index,
        path: hf.index,
    }))
}

fn damaged(out: &Path, e: impl std::fmt::Display) -> Failure {
    failed(format!(
        "the export in {} is damaged, so it is not continued (nothing was changed): {e}",
        out.display()
    ))
}

/// Checks the export in place against what its index says, before the index is carried
/// into the next one: every chunk is a regular file of the size listed, and every snapshot
/// file hashes to its name, verifies under `trusted` and holds the seq and state hash listed.
/// Anything else is a damaged export (exit 1), and nothing is written.
fn check_previous(
    dir: &mut ExportDir,
    out: &Path,
    prev: &Previous,
    trusted: &PublicKey,
) -> Result<(), Failure> {
    let index = &prev.index;
    for chunk in &index.chunks {
        let len = dir
            .open_file(&chunk.file)
            .and_then(|f| f.metadata())
            .map_err(|e| damaged(out, format!("{}: {e}", chunk.file)))?
            .len();
        export::check_chunk_size(&prev.path, chunk, len).map_err(|e| damaged(out, e))?;
    }
    for entry in &index.snapshots {
        let bytes = dir
            .read(&entry.file, export::max_file_bytes(&entry.file))
            .map_err(|e| damaged(out, format!("{}: {e}", entry.file)))?;
        export::check_snapshot_file(&prev.path, entry, &bytes, trusted, &index.org, &index.group)
            .map_err(|e| damaged(out, e))?;
    }
    Ok(())
}

/// The current time in ms since the epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Hands the events of `group` with seq in `after+1 ..= upto`, as canonical CBOR, to
/// `each`, one page read at a time.
fn stream(
    read: &dyn Fn(u64, usize) -> Result<Vec<mwp_core::Event>, Failure>,
    after: u64,
    upto: u64,
    page: usize,
    each: &mut dyn FnMut(Vec<u8>) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let mut cursor = after;
    while cursor < upto {
        let want = usize::try_from(upto - cursor)
            .unwrap_or(usize::MAX)
            .min(page);
        let events = read(cursor, want)?;
        if events.is_empty() {
            return Err(failed(format!(
                "the source's events end at seq {cursor}, short of the head's seq {upto}"
            )));
        }
        for e in events {
            if e.seq != cursor + 1 {
                return Err(failed(format!(
                    "the source answered seq {} where seq {} was due",
                    e.seq,
                    cursor + 1
                )));
            }
            if e.seq > upto {
                break;
            }
            cursor = e.seq;
            each(
                e.to_cbor()
                    .map_err(|err| Failure::from_error("cannot encode an event", &err))?,
            )?;
        }
    }
    Ok(())
}

/// The latest snapshot, if the source has one: an export without one is still whole (a
/// reader replays from seq 1), so a failure to read it is a warning, not an error.
fn no_snapshot(read: mwp_core::Result<Vec<u8>>) -> Option<Vec<u8>> {
    read.map_err(|e| {
        eprintln!("mwp: exporting without a snapshot: cannot read the latest one: {e}")
    })
    .ok()
}

/// Runs `mwp export`.
pub fn run(args: &ExportArgs) -> Outcome {
    let group = id(&args.group, "--group")?;
    check_out(&args.out)?;
    let source = open(args)?;
    let mut dir = ExportDir::open(&args.out)?;
    let previous = match &mut dir {
        Some(dir) => previous(dir, &args.out)?,
        None => None,
    };
    let prev = previous.as_ref().map(|p| &p.index);
    let after = prev.map_or(0, |p| p.seq);
    let (head, trusted) = match &source {
        From::Store(service) => {
            // The head first (the last durable event, signed by the store's own
            // `sign_head`), then the events up to it: a writer still appending meanwhile
            // cannot make the export name an event it does not hold.
            let head = service.sign_head(&group, now_ms()).map_err(|e| {
                if e.code == mwp_core::Code::NotFound {
                    Failure::new(
                        EXIT_BAD_INPUT,
                        format!("the store holds no events of group {group}"),
                    )
                } else {
                    Failure::from_error(&format!("cannot read group {group}"), &e)
                }
            })?;
            if head.seq < after {
                return Err(failed(format!(
                    "the store's group {group} ends at seq {}, behind the export's seq {after}",
                    head.seq
                )));
            }
            (head, service.authority_key())
        }
        From::Server(client) => {
            let fail = |ctx: &str, e: &Error| super::client::server_failure(ctx, e);
            let trusted = client
                .authority_key()
                .map_err(|e| fail("cannot read the authority key", &e))?;
            let path = format!("/v1/groups/{group}/head");
            let body = client
                .fetch(&path, "application/json")
                .map_err(|e| fail(&format!("cannot read the signed head of {group}"), &e))?;
            let text = String::from_utf8_lossy(&body);
            let head = SignedHead::from_json(&text)
                .map_err(|e| failed(format!("{path} answered no signed head: {e}")))?;
            head.verify(&trusted, &group)
                .map_err(|e| failed(format!("the server's head: {e}")))?;
            (head, trusted)
        }
    };
    if let Some(p) = &previous {
        if p.index.authority != trusted {
            return Err(failed(format!(
                "the export in {} is under authority key {}, the source's is {trusted}; export to a new directory",
                args.out.display(),
                p.index.authority
            )));
        }
        if let Some(dir) = &mut dir {
            check_previous(dir, &args.out, p, &trusted)?;
        }
    }
    let cannot = |e: mwp_core::Error| failed(format!("cannot export group {group}: {e}"));
    let mut planner =
        export::Planner::new(prev, &head, &trusted, export::CHUNK_EVENTS).map_err(cannot)?;
    // Each chunk is written as soon as it is cut, so that the export holds one chunk in
    // memory rather than the whole run; the index and `head.json` go last, once every event
    // reached the head. A run that fails removes the chunks it created: the export in place
    // is left as it was.
    let dir = match dir {
        Some(dir) => dir,
        None => ExportDir::create(&args.out)?,
    };
    let mut files = NewFiles {
        dir,
        written: Written::default(),
    };
    let planned = (|| {
        let mut each = |bytes: Vec<u8>| match planner.handle_event(bytes).map_err(cannot)? {
            Some(chunk) => files.write(&chunk),
            None => Ok(()),
        };
        let snapshot = match &source {
            From::Store(service) => {
                let read = |after: u64, limit: usize| {
                    service
                        .events(&group, after, limit)
                        .map_err(|e| Failure::from_error(&format!("cannot read group {group}"), &e))
                };
                stream(&read, after, head.seq, STORE_PAGE, &mut each)?;
                no_snapshot(service.latest_snapshot(&group))
            }
            From::Server(client) => {
                let read = |after: u64, limit: usize| {
                    client.events(&group, after, limit).map_err(|e| {
                        super::client::server_failure(
                            &format!("cannot read the events of {group}"),
                            &e,
                        )
                    })
                };
                stream(&read, after, head.seq, SERVER_PAGE, &mut each)?;
                no_snapshot(client.snapshot(&group))
            }
        };
        let planned = planner.finish(snapshot.as_deref()).map_err(cannot)?;
        files.finish(&planned)
    })();
    let written = match planned {
        Ok(written) => written,
        Err(e) => {
            files.dir.remove_created();
            return Err(e);
        }
    };
    let value = json!({
        "group": group,
        "seq": head.seq,
        "head_id": head.id,
        "chunks_added": written.chunks,
        "files_written": written.files,
        "bytes_written": written.bytes,
        "authority_key": trusted,
        "out": args.out.display().to_string(),
    });
    super::client::print(args.output.json(), &value, || {
        format!(
            "exported {group} through seq {} to {}: {} new chunks, {} files, {} bytes (authority key {trusted})",
            head.seq,
            args.out.display(),
            written.chunks,
            written.files,
            written.bytes
        )
    })?;
    Ok(EXIT_OK)
}

/// What one `mwp export` run wrote.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// New chunk files.
    pub chunks: u64,
    /// Files written, `head.json` included.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// The files one export run writes into its directory, counted as they are written.
struct NewFiles {
    dir: ExportDir,
    written: Written,
}

impl NewFiles {
    /// Writes one planned file (durable; an identical file already there is left as it is).
    fn write(&mut self, file: &export::ExportFile) -> Result<(), Failure> {
        // `plan` names only `dir/<hex>.ext`; checked again before touching the disk.
        let (dir, ext) = file
            .path
            .split_once('/')
            .and_then(|(d, rest)| rest.rsplit_once('.').map(|(_, ext)| (d, ext)))
            .unwrap_or(("", ""));
        export::check_name(&file.path, dir, ext)
            .map_err(|e| failed(format!("refusing to write {}: {e}", file.path)))?;
        if self.dir.write_new(&file.path, &file.bytes)? {
            self.written.files += 1;
            self.written.bytes += file.bytes.len() as u64;
            if dir == "chunks" {
                self.written.chunks += 1;
            }
        }
        Ok(())
    }

    /// Writes the rest of a planned export: its files (each durable), the directories that
    /// gained files synced, then `head.json`; answers what the run wrote.
    fn finish(&mut self, planned: &export::Export) -> Result<Written, Failure> {
        for file in &planned.files {
            self.write(file)?;
        }
        self.dir.sync_changed()?;
        self.dir.replace(HEAD_FILE, &planned.head_file)?;
        Ok(Written {
            chunks: self.written.chunks,
            files: self.written.files + 1,
            bytes: self.written.bytes + planned.head_file.len() as u64,
        })
    }
}

/// Reads a pinned key given as hex.
pub fn parse_key(hex: &str, flag: &str) -> Result<PublicKey, Failure> {
    PublicKey::from_hex(hex).map_err(|e| Failure::new(EXIT_BAD_INPUT, format!("{flag}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_appears_whole_or_not_at_all_and_is_never_replaced() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut dir = ExportDir::create(tmp.path()).expect("open");
        assert!(dir.write_new("chunks/a.cbor", b"one").expect("written"));
        assert!(!dir
            .write_new("chunks/a.cbor", b"one")
            .expect("same bytes: nothing to do"));
        let err = dir
            .write_new("chunks/a.cbor", b"two")
            .expect_err("other bytes are refused");
        assert_eq!(err.exit, EXIT_FAILED);
        let path = tmp.path().join("chunks/a.cbor");
        assert_eq!(std::fs::read(&path).expect("read"), b"one");
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(tmp.path().join("chunks"))
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("a.cbor")]);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
    }

    #[test]
    fn a_crash_before_the_link_leaves_no_file_at_the_name() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(tmp.path().join("chunks")).expect("mkdir");
        // What a crash between the temporary write and the link leaves: a temporary file
        // only, which no reader ever asks for, and which the next write replaces.
        let leftover = tmp
            .path()
            .join(format!("chunks/.b.cbor.tmp-{}", std::process::id()));
        std::fs::write(&leftover, b"partial").expect("temp");
        let mut dir = ExportDir::open(tmp.path()).expect("open").expect("there");
        assert!(dir.write_new("chunks/b.cbor", b"whole").expect("written"));
        assert_eq!(
            std::fs::read(tmp.path().join("chunks/b.cbor")).expect("read"),
            b"whole"
        );
        assert!(!leftover.exists());
    }

    #[test]
    fn replacing_the_head_keeps_the_old_one_until_the_new_is_durable() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut dir = ExportDir::open(tmp.path()).expect("open").expect("there");
        dir.replace(HEAD_FILE, b"old").expect("written");
        dir.replace(HEAD_FILE, b"new").expect("replaced");
        assert_eq!(
            std::fs::read(tmp.path().join(HEAD_FILE)).expect("read"),
            b"new"
        );
        assert_eq!(std::fs::read_dir(tmp.path()).expect("list").count(), 1);
    }
}
