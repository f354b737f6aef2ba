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

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use mwp_core::export::{self, ExportIndex, HEAD_FILE};
use mwp_core::head::SignedHead;
use mwp_core::{Error, PublicKey};
use serde_json::json;

use super::client::source::SourceArgs;
use super::client::{id, OutputArgs};
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

/// Reads a file of the export in place: one that lies in `out` ([`within`]), a regular file
/// only, refused unread when longer than its cap.
fn read_export_file(out: &Path, name: &str) -> std::io::Result<Vec<u8>> {
    let path = out.join(name);
    within(out, &path)?;
    crate::regular_file::read(&path, export::max_file_bytes(name))
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
        Err(e) => Err(io_fail("read", out, e)),
    }
}

/// Refuses, with `InvalidInput` (a damaged export), a path in the export that a symbolic link
/// takes out of `out`, or a link to nothing: `mwp export` reads and writes only what lies in
/// the export directory, as `mwp verify --source` reads only that. A path with nothing at it
/// passes (`NotFound` is left to the caller).
fn within(out: &Path, path: &Path) -> std::io::Result<()> {
    let refused = |what: String| Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, what));
    let full = match std::fs::canonicalize(path) {
        Ok(full) => full,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return match std::fs::read_link(path) {
                Ok(target) => refused(format!(
                    "it is a symbolic link to {}, which does not exist",
                    target.display()
                )),
                Err(_) => Err(e),
            };
        }
        Err(e) => return Err(e),
    };
    if full.starts_with(std::fs::canonicalize(out)?) {
        Ok(())
    } else {
        refused(format!(
            "a symbolic link takes it out of the export, to {}",
            full.display()
        ))
    }
}

/// What the export directory holds now: its index, if any. A damaged `head.json` or index
/// stops the export (exit 1).
fn previous(out: &Path) -> Result<Option<Previous>, Failure> {
    let head_path = out.join(HEAD_FILE);
    let bytes = match read_export_file(out, HEAD_FILE) {
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
    let index_bytes = read_export_file(out, &hf.index).map_err(|e| {
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
fn check_previous(out: &Path, prev: &Previous, trusted: &PublicKey) -> Result<(), Failure> {
    let index = &prev.index;
    for chunk in &index.chunks {
        let path = out.join(&chunk.file);
        let len = within(out, &path)
            .and_then(|()| crate::regular_file::open(&path))
            .and_then(|f| f.metadata())
            .map_err(|e| damaged(out, format!("{}: {e}", chunk.file)))?
            .len();
        export::check_chunk_size(&prev.path, chunk, len).map_err(|e| damaged(out, e))?;
    }
    for entry in &index.snapshots {
        let bytes = read_export_file(out, &entry.file)
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
    let previous = previous(&args.out)?;
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
        check_previous(&args.out, p, &trusted)?;
    }
    let cannot = |e: mwp_core::Error| failed(format!("cannot export group {group}: {e}"));
    let mut planner =
        export::Planner::new(prev, &head, &trusted, export::CHUNK_EVENTS).map_err(cannot)?;
    // Each chunk is written as soon as it is cut, so that the export holds one chunk in
    // memory rather than the whole run; the index and `head.json` go last, once every event
    // reached the head. A run that fails removes the chunks it created: the export in place
    // is left as it was.
    let mut files = NewFiles::default();
    let planned = (|| {
        files.ensure_dir(&args.out, &args.out)?;
        let mut each = |bytes: Vec<u8>| match planner.handle_event(bytes).map_err(cannot)? {
            Some(chunk) => files.write(&args.out, &chunk),
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
        files.finish(&args.out, &planned)
    })();
    let written = match planned {
        Ok(written) => written,
        Err(e) => {
            files.remove_created();
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

fn io_fail(what: &str, path: &Path, e: std::io::Error) -> Failure {
    Failure::new(
        EXIT_UNAVAILABLE,
        format!("cannot {what} {}: {e}", path.display()),
    )
}

/// Creates `dir` (0755) if missing, syncing its parent.
fn ensure_dir(dir: &Path) -> Result<(), Failure> {
    if dir.is_dir() {
        return Ok(());
    }
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|e| io_fail("create", dir, e))?;
    // Not narrowed by the umask: an export is public.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| io_fail("set the mode of", dir, e))?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Makes a directory's entries durable.
pub fn sync_dir(dir: &Path) -> Result<(), Failure> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_fail("sync", dir, e))
}

/// Writes `bytes` to a temporary file in `path`'s directory (mode 0644) and syncs it;
/// returns its path. The caller links or renames it into place.
fn write_temp(path: &Path, bytes: &[u8]) -> Result<PathBuf, Failure> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)
        .map_err(|e| io_fail("create", &tmp, e))?;
    let done = f
        .write_all(bytes)
        .and_then(|()| f.set_permissions(std::fs::Permissions::from_mode(0o644)))
        .and_then(|()| f.sync_all());
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_fail("write", &tmp, e));
    }
    Ok(tmp)
}

/// Writes an immutable file at `path` crash-safely: nothing at `path` until its whole bytes
/// are durable, and an existing file is never replaced. Answers whether it was written
/// (`false`: the same bytes were already there); other bytes already there fail (exit 1).
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<bool, Failure> {
    if let Some(written) = same_or_other(path, bytes)? {
        return Ok(written);
    }
    let tmp = write_temp(path, bytes)?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        // Another writer put it there meanwhile: it must hold the same bytes.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            same_or_other(path, bytes)?.map_or(Ok(false), Ok)
        }
        Err(e) => Err(io_fail("link", path, e)),
    }
}

/// `Some(false)` when `path` holds `bytes`, an error when it holds others, `None` when it is
/// missing.
fn same_or_other(path: &Path, bytes: &[u8]) -> Result<Option<bool>, Failure> {
    let other = || {
        failed(format!(
            "{} exists with other bytes than the export plans for it; the export directory is damaged or not this group's (nothing was changed)",
            path.display()
        ))
    };
    // A regular file only (a FIFO there must not block the export), and no more than one byte
    // past the planned length (a longer one is refused by its size, unread).
    match crate::regular_file::read(path, bytes.len() as u64) {
        Ok(old) if old == bytes => Ok(Some(false)),
        Ok(_) => Err(other()),
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => Err(other()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => Err(failed(format!(
            "{}: {e}; the export directory is damaged (nothing was changed)",
            path.display()
        ))),
        Err(e) => Err(io_fail("read", path, e)),
    }
}

/// Replaces `path` crash-safely: the temporary file is synced, renamed over it, and the
/// directory synced.
pub fn replace(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let tmp = write_temp(path, bytes)?;
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_fail("rename", &tmp, e));
    }
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// The files one export run wrote, as it writes them: counted, their directories synced once,
/// and those it created removed again if the run fails.
#[derive(Default)]
struct NewFiles {
    written: Written,
    dirs: Vec<PathBuf>,
    /// Files and directories this run created, in order.
    created: Vec<PathBuf>,
    created_dirs: Vec<PathBuf>,
}

impl NewFiles {
    /// Writes one planned file into `out` (durable; an identical file already there is left
    /// as it is).
    fn write(&mut self, out: &Path, file: &export::ExportFile) -> Result<(), Failure> {
        // `plan` names only `dir/<hex>.ext`; checked again before touching the disk.
        let (dir, ext) = file
            .path
            .split_once('/')
            .and_then(|(d, rest)| rest.rsplit_once('.').map(|(_, ext)| (d, ext)))
            .unwrap_or(("", ""));
        export::check_name(&file.path, dir, ext)
            .map_err(|e| failed(format!("refusing to write {}: {e}", file.path)))?;
        let dir_path = out.join(dir);
        self.ensure_dir(out, &dir_path)?;
        let path = out.join(&file.path);
        within(out, &path).or_else(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Ok(()),
            _ => Err(failed(format!(
                "{}: {e}; the export directory is damaged (nothing was changed)",
                path.display()
            ))),
        })?;
        if write_new(&path, &file.bytes)? {
            self.created.push(path);
            self.written.files += 1;
            self.written.bytes += file.bytes.len() as u64;
            if dir == "chunks" {
                self.written.chunks += 1;
            }
            if !self.dirs.contains(&dir_path) {
                self.dirs.push(dir_path);
            }
        }
        Ok(())
    }

    /// Creates `dir` if missing ([`ensure_dir`]), noting it as created; a directory of the
    /// export `out` that a link takes out of it is refused ([`within`]).
    fn ensure_dir(&mut self, out: &Path, dir: &Path) -> Result<(), Failure> {
        if dir != out {
            within(out, dir).or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Ok(()),
                _ => Err(failed(format!(
                    "{}: {e}; the export directory is damaged (nothing was changed)",
                    dir.display()
                ))),
            })?;
        }
        if !dir.is_dir() {
            ensure_dir(dir)?;
            self.created_dirs.push(dir.to_path_buf());
        }
        Ok(())
    }

    /// Writes the rest of a planned export into `out`: its files (each durable), the
    /// directories that gained files synced, then `head.json`; answers what the run wrote.
    fn finish(&mut self, out: &Path, planned: &export::Export) -> Result<Written, Failure> {
        for file in &planned.files {
            self.write(out, file)?;
        }
        for dir in &self.dirs {
            sync_dir(dir)?;
        }
        replace(&out.join(HEAD_FILE), &planned.head_file)?;
        Ok(Written {
            chunks: self.written.chunks,
            files: self.written.files + 1,
            bytes: self.written.bytes + planned.head_file.len() as u64,
        })
    }

    /// Removes the files and then the (empty) directories this run created, newest first
    /// (best effort: nothing names them).
    fn remove_created(&self) {
        for path in self.created.iter().rev() {
            let _ = std::fs::remove_file(path);
        }
        for dir in self.created_dirs.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
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
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.cbor");
        assert!(write_new(&path, b"one").expect("written"));
        assert!(!write_new(&path, b"one").expect("same bytes: nothing to do"));
        let err = write_new(&path, b"two").expect_err("other bytes are refused");
        assert_eq!(err.exit, EXIT_FAILED);
        assert_eq!(std::fs::read(&path).expect("read"), b"one");
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
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
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("b.cbor");
        // What a crash between the temporary write and the link leaves: a temporary file
        // only, which no reader ever asks for, and which the next write replaces.
        let tmp = write_temp(&path, b"partial").expect("temp");
        assert!(!path.exists());
        assert!(tmp
            .file_name()
            .expect("name")
            .to_string_lossy()
            .starts_with('.'));
        assert!(write_new(&path, b"whole").expect("written"));
        assert_eq!(std::fs::read(&path).expect("read"), b"whole");
        assert!(!tmp.exists());
    }

    #[test]
    fn replacing_the_head_keeps_the_old_one_until_the_new_is_durable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(HEAD_FILE);
        replace(&path, b"old").expect("written");
        replace(&path, b"new").expect("replaced");
        assert_eq!(std::fs::read(&path).expect("read"), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1);
    }
}
