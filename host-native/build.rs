//! Embeds the dashboard into the `mwp` binary, from where its files live: the page itself
//! (`js/dashboard/`: HTML, JS, CSS, SVG) at `/`, the npm package's browser modules (`js/src/`,
//! less the Node and Deno entries and the Node/Deno file store) at `/lib/src/`, and the
//! optimised wasm module with its glue (`host-native/dashboard/pkg/`, the one generated part,
//! built by `scripts/build-dashboard.sh` and committed so that a machine without wasm tools
//! gets the real dashboard) at `/lib/pkg/`. Writes `$OUT_DIR/dashboard.rs`, a list of
//! `include_bytes!` entries with an ETag per file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Modules of `js/src` that are not for browsers: the Node and Deno entries and the
/// Node/Deno file store with its writer lock, and the Node/Deno agent journal.
const NOT_FOR_BROWSERS: &[&str] = &[
    "node.js",
    "deno.js",
    "file-store.js",
    "dir-lock.js",
    "agent-journal.js",
];

/// The files of `dir` (not recursive) whose extension is one of `exts`, sorted.
fn files(dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| {
        panic!("cannot read {}: {e}", dir.display());
    });
    let mut out: Vec<PathBuf> = entries
        .map(|e| e.expect("a directory entry is readable").path())
        .filter(|p| p.is_file())
        .filter(|p| {
            p.extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| exts.contains(&x))
        })
        .collect();
    out.sort();
    out
}

/// FNV-1a, 64 bits: enough to tell versions of a file apart for HTTP revalidation.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let manifest = Path::new(&manifest);
    let page = manifest.join("../js/dashboard");
    let modules = manifest.join("../js/src");
    let pkg = manifest.join("dashboard/pkg");
    // The files embedded, one by one, not `js/dashboard/` whole: a directory is watched with
    // everything beneath it, and `js/dashboard/lib/` (gitignored) is where the development
    // builds put a module, which would rebuild this crate, and every test that links it, after
    // each wasm build. A file added to the page is embedded once a watched file changes (the
    // page or a module that loads it). `js/src/` and `dashboard/pkg/` hold only what is
    // embedded, and are watched whole, so a module added there is embedded at once.
    for dir in [&modules, &pkg] {
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    let mut list: Vec<(String, PathBuf)> = Vec::new();
    for path in files(&page, &["html", "js", "css", "svg"]) {
        println!("cargo:rerun-if-changed={}", path.display());
        list.push((url("/", &path), path));
    }
    for path in files(&modules, &["js"]) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !NOT_FOR_BROWSERS.contains(&name) {
            list.push((url("/lib/src/", &path), path));
        }
    }
    let wasm = files(&pkg, &["js", "wasm"]);
    assert!(
        wasm.len() == 2,
        "{} must hold mwp_wasm.js and mwp_wasm_bg.wasm: run scripts/build-dashboard.sh",
        pkg.display()
    );
    for path in wasm {
        list.push((url("/lib/pkg/", &path), path));
    }
    let mut code = String::from("&[\n");
    for (url, path) in &list {
        let bytes = std::fs::read(path).expect("a file just listed is readable");
        let path = path.canonicalize().expect("a file just listed has a path");
        writeln!(
            code,
            "    EmbeddedFile {{ path: {url:?}, etag: \"\\\"{:016x}\\\"\", bytes: include_bytes!({:?}) }},",
            fnv1a(&bytes),
            path.display().to_string(),
        )
        .expect("writing to a String cannot fail");
    }
    code.push(']');
    std::fs::write(Path::new(&out_dir).join("dashboard.rs"), code).expect("OUT_DIR is writable");
}

/// The URL path of `path` under `prefix`.
fn url(prefix: &str, path: &Path) -> String {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .expect("UTF-8 file names");
    format!("{prefix}{name}")
}
