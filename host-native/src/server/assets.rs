//! The dashboard's static files. The dashboard (`js/dashboard/`, the npm package's browser
//! modules from `js/src/` and the optimised wasm module of `host-native/dashboard/pkg/`) is
//! compiled into the binary by `build.rs`; `mwp serve
//! --dashboard DIR` serves a directory instead while the dashboard is being developed.
//!
//! A directory's files are read off the server's request threads ([`Assets::fetch`]), and
//! only what a dashboard is made of is served (docs/decisions.md, "Files of a dashboard
//! directory"): a regular file, opened for reading (without blocking) only once it is checked,
//! that lies in the directory (a link that stays in it is followed) and holds at most [`MAX_DIR_FILE_BYTES`]. Anything else is
//! answered as if nothing were there, and the server logs why.

use std::borrow::Cow;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// The most bytes a file of a `--dashboard` directory may hold: 32 MiB. A dashboard's largest
/// file is its WebAssembly module, about 1 MiB optimised and a few MiB without `wasm-opt`;
/// each answer is held whole in memory while it is sent, so the cap bounds what one request
/// for a file can hold (a link to `/dev/zero` or a file of gigabytes would otherwise be read
/// until memory runs out).
pub const MAX_DIR_FILE_BYTES: u64 = 32 << 20;

/// One embedded file.
#[derive(Debug)]
pub struct EmbeddedFile {
    /// URL path, from `/`.
    pub path: &'static str,
    /// Strong ETag (quoted), from a hash of the bytes taken at build time.
    pub etag: &'static str,
    /// The bytes.
    pub bytes: &'static [u8],
}

/// The files compiled into the binary. `/` serves `/index.html`. A `static`, not a `const`: a
/// constant's bytes were copied into every code unit that used it, four copies of the
/// dashboard in the `mwp` binary.
pub static EMBEDDED: &[EmbeddedFile] = include!(concat!(env!("OUT_DIR"), "/dashboard.rs"));

/// A file to answer with.
#[derive(Debug, Clone)]
pub struct Asset {
    /// Its content type.
    pub content_type: &'static str,
    /// Its bytes.
    pub bytes: Cow<'static, [u8]>,
    /// Its ETag, for embedded files (a directory's files are read afresh and not cached).
    pub etag: Option<&'static str>,
}

/// Where static files come from.
#[derive(Debug, Clone)]
pub enum Assets {
    /// Compiled into the binary.
    Embedded(&'static [EmbeddedFile]),
    /// Read from a directory at each request (for dashboard development).
    Dir(PathBuf),
}

impl Default for Assets {
    fn default() -> Self {
        Assets::Embedded(EMBEDDED)
    }
}

/// The content type of a file name, by extension.
pub fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "wasm" => "application/wasm",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        _ => "application/octet-stream",
    }
}

impl Assets {
    /// The file for a URL path, if there is one. A directory's file is read here, on the
    /// calling thread: a server calls [`Assets::fetch`].
    pub fn get(&self, path: &str) -> Option<Asset> {
        let path = if path == "/" || path.is_empty() {
            "/index.html"
        } else {
            path
        };
        match self {
            Assets::Embedded(files) => files.iter().find(|f| f.path == path).map(|f| Asset {
                content_type: content_type(f.path),
                bytes: Cow::Borrowed(f.bytes),
                etag: Some(f.etag),
            }),
            Assets::Dir(dir) => {
                let relative = Path::new(path.trim_start_matches('/'));
                // Only plain names below the directory: no `..`, no absolute paths.
                if !relative
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)))
                {
                    return None;
                }
                let file = dir.join(relative);
                match read_below(dir, &file) {
                    Ok(bytes) => Some(Asset {
                        content_type: content_type(path),
                        bytes: Cow::Owned(bytes),
                        etag: None,
                    }),
                    Err(Unserved::Absent) => None,
                    Err(Unserved::Refused(why)) => {
                        tracing::warn!(
                            "not served from the dashboard directory: {}: {why}",
                            file.display()
                        );
                        None
                    }
                }
            }
        }
    }

    /// [`Assets::get`] for a server: a directory's file is read on a blocking thread, never
    /// on the thread that answers requests.
    pub async fn fetch(&self, path: &str) -> Option<Asset> {
        match self {
            Assets::Embedded(_) => self.get(path),
            Assets::Dir(_) => {
                let (assets, path) = (self.clone(), path.to_owned());
                tokio::task::spawn_blocking(move || assets.get(&path))
                    .await
                    .unwrap_or_else(|e| {
                        tracing::warn!(error = %e, "reading a file of the dashboard directory failed");
                        None
                    })
            }
        }
    }
}

/// Why a file of a directory is not served.
enum Unserved {
    /// Nothing is there: a plain 404, not worth a log line.
    Absent,
    /// Something is there that is not served; why, for the log.
    Refused(String),
}

/// The bytes of `file`, a path below `dir`, if it is a regular file that lies in `dir` and
/// holds at most [`MAX_DIR_FILE_BYTES`]. Every check is made on the opened file, not on a path
/// looked up again.
fn read_below(dir: &Path, file: &Path) -> Result<Vec<u8>, Unserved> {
    let refused = |e: std::io::Error| Unserved::Refused(e.to_string());
    let root = std::fs::canonicalize(dir)
        .map_err(|e| Unserved::Refused(format!("the directory cannot be opened: {e}")))?;
    let opened = match look(file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A link to nothing is a mistake in the directory, worth telling.
            return Err(match std::fs::symlink_metadata(file) {
                Ok(m) if m.file_type().is_symlink() => {
                    Unserved::Refused("it is a link that leads to nothing".to_owned())
                }
                _ => Unserved::Absent,
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Err(Unserved::Absent),
        Err(e) => return Err(refused(e)),
    };
    let opened = crate::regular_file::checked(opened).map_err(refused)?;
    let real = real_path(&opened, file).map_err(refused)?;
    if !real.starts_with(&root) {
        return Err(Unserved::Refused(format!(
            "it leads out of the directory, to {}",
            real.display()
        )));
    }
    let opened = reopen(opened, file).map_err(refused)?;
    let len = opened.metadata().map_err(refused)?.len();
    let over = |len: u64| {
        Unserved::Refused(format!(
            "it is {len} bytes, over the {MAX_DIR_FILE_BYTES} bytes it may hold"
        ))
    };
    if len > MAX_DIR_FILE_BYTES {
        return Err(over(len));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    opened
        .take(MAX_DIR_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(refused)?;
    // It grew while it was read.
    if bytes.len() as u64 > MAX_DIR_FILE_BYTES {
        return Err(over(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Opens `file` to be checked: on Linux as a path only (`O_PATH`), which neither reads it
/// nor opens a device or FIFO, so that nothing a link leads to outside the directory is
/// opened before it is refused; it is opened for reading once it passed its checks
/// ([`reopen`]). Elsewhere it is opened for reading at once, without blocking.
#[cfg(target_os = "linux")]
fn look(file: &Path) -> std::io::Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(file, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())?;
    Ok(std::fs::File::from(fd))
}

/// Opens `file` for reading, without blocking.
#[cfg(not(target_os = "linux"))]
fn look(file: &Path) -> std::io::Result<std::fs::File> {
    crate::regular_file::open(file)
}

/// Whether this process can name what its handles hold (`/proc/self/fd`): without it (a
/// chroot or sandbox without `/proc`), the path is resolved instead.
#[cfg(target_os = "linux")]
fn handles_named() -> bool {
    Path::new("/proc/self/fd").is_dir()
}

/// Where the opened file really is: what its descriptor names in `/proc/self/fd`, or,
/// without `/proc`, the path it was opened by, resolved.
#[cfg(target_os = "linux")]
fn real_path(opened: &std::fs::File, path: &Path) -> std::io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    if !handles_named() {
        return std::fs::canonicalize(path);
    }
    std::fs::read_link(format!("/proc/self/fd/{}", opened.as_raw_fd()))
}

/// Opens for reading, without blocking, the very file `checked` holds as a path only:
/// through `/proc/self/fd`, or, without `/proc`, by its path again, refused unless it is
/// the same file.
#[cfg(target_os = "linux")]
fn reopen(checked: std::fs::File, path: &Path) -> std::io::Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags};
    use std::os::fd::AsRawFd;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    if handles_named() {
        let proc_path = format!("/proc/self/fd/{}", checked.as_raw_fd());
        return Ok(std::fs::File::from(rustix::fs::open(
            proc_path.as_str(),
            flags,
            Mode::empty(),
        )?));
    }
    let file = std::fs::File::from(rustix::fs::open(path, flags, Mode::empty())?);
    let (a, b) = (rustix::fs::fstat(&checked)?, rustix::fs::fstat(&file)?);
    if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino) {
        Ok(file)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it was replaced while it was opened",
        ))
    }
}

/// The file `checked`, already open for reading.
#[cfg(not(target_os = "linux"))]
fn reopen(checked: std::fs::File, _path: &Path) -> std::io::Result<std::fs::File> {
    Ok(checked)
}

/// Where the opened file really is: without `/proc`, the path it was opened by, resolved (a
/// check that a link swapped in between the open and it can pass).
#[cfg(not(target_os = "linux"))]
fn real_path(_opened: &std::fs::File, path: &Path) -> std::io::Result<PathBuf> {
    std::fs::canonicalize(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_serves_the_embedded_dashboard() {
        let a = Assets::default().get("/").expect("index");
        assert!(a.content_type.starts_with("text/html"));
        let html = String::from_utf8_lossy(&a.bytes);
        assert!(
            html.contains("dashboard.js"),
            "the real dashboard, not a stand-in"
        );
        assert!(a
            .etag
            .is_some_and(|e| e.starts_with('"') && e.ends_with('"')));
        assert!(Assets::default().get("/nope.js").is_none());
    }

    #[test]
    fn the_embedded_bundle_is_complete() {
        let assets = Assets::default();
        for path in [
            "/dashboard.js",
            "/dashboard.css",
            "/lib/src/browser.js",
            "/lib/pkg/mwp_wasm.js",
        ] {
            let a = assets
                .get(path)
                .unwrap_or_else(|| panic!("{path} is embedded"));
            assert!(!a.bytes.is_empty(), "{path}");
        }
        let wasm = assets.get("/lib/pkg/mwp_wasm_bg.wasm").expect("the module");
        assert!(wasm.bytes.starts_with(b"\0asm"));
        assert_eq!(wasm.content_type, "application/wasm");
    }

    #[test]
    fn a_directory_refuses_paths_that_leave_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("app.js"), "x").expect("write");
        let assets = Assets::Dir(dir.path().to_owned());
        assert_eq!(assets.get("/app.js").expect("found").bytes.as_ref(), b"x");
        assert!(assets.get("/../etc/passwd").is_none());
    }

    /// A link out of the directory to a FIFO is refused before the FIFO is opened: a writer
    /// waiting for a reader there is not let through (a reader's open, even one that does not
    /// block, would end its wait).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_link_out_of_the_directory_to_a_fifo_does_not_open_it() {
        use std::os::unix::fs::OpenOptionsExt;
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("dashboard");
        std::fs::create_dir(&dir).expect("mkdir");
        let fifo = tmp.path().join("fifo");
        crate::regular_file::mkfifo(&fifo);
        std::os::unix::fs::symlink(&fifo, dir.join("app.js")).expect("symlink");
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                // Blocks until a reader opens the FIFO.
                let opened = std::fs::OpenOptions::new().write(true).open(&fifo);
                let _ = tx.send(opened.is_ok());
            })
        };
        // Let the writer reach its open.
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(Assets::Dir(dir).get("/app.js").is_none());
        let woke = rx.recv_timeout(std::time::Duration::from_millis(500));
        // Release the writer whatever happened.
        let release = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(&fifo);
        let _ = writer.join();
        drop(release);
        assert!(
            woke.is_err(),
            "the FIFO outside the directory was opened before the link was refused"
        );
    }
}
