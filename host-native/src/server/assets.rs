//! The dashboard's static files. Today a placeholder page is embedded; the real dashboard
//! (built in `js/`) will be embedded by replacing [`EMBEDDED`], or served from a directory
//! with `mwp serve --dashboard DIR` while it is being developed.

use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};

/// One embedded file: URL path, content type, bytes.
pub type EmbeddedFile = (&'static str, &'static str, &'static [u8]);

/// The files compiled into the binary. `/` serves `/index.html`.
pub const EMBEDDED: &[EmbeddedFile] = &[(
    "/index.html",
    "text/html; charset=utf-8",
    include_bytes!("placeholder.html"),
)];

/// A file to answer with.
#[derive(Debug, Clone)]
pub struct Asset {
    /// Its content type.
    pub content_type: &'static str,
    /// Its bytes.
    pub bytes: Cow<'static, [u8]>,
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
            Assets::Embedded(files) => {
                files
                    .iter()
                    .find(|(p, _, _)| *p == path)
                    .map(|(_, t, b)| Asset {
                        content_type: t,
                        bytes: Cow::Borrowed(b),
                    })
            }
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
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_serves_the_embedded_index() {
        let a = Assets::default().get("/").expect("index");
        assert!(a.content_type.starts_with("text/html"));
        assert!(Assets::default().get("/nope.js").is_none());
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
