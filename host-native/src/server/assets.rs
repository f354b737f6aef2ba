//! The dashboard's static files. The dashboard (`js/dashboard/`, the npm package's browser
//! modules from `js/src/` and the optimised wasm module of `host-native/dashboard/pkg/`) is
//! compiled into the binary by `build.rs`; `mwp serve
//! --dashboard DIR` serves a directory instead while the dashboard is being developed.

use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};

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
    /// The file for a URL path, if there is one.
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
                let bytes = std::fs::read(dir.join(relative)).ok()?;
                Some(Asset {
                    content_type: content_type(path),
                    bytes: Cow::Owned(bytes),
                    etag: None,
                })
            }
        }
    }
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
}
