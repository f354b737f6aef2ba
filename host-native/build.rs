//! Embeds the dashboard bundle (`host-native/dashboard/`, assembled by
//! `scripts/build-dashboard.sh` and committed) into the `mwp` binary: writes
//! `$OUT_DIR/dashboard.rs`, a list of `include_bytes!` entries with an ETag per file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            files(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
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
    let dir = Path::new(&manifest).join("dashboard");
    println!("cargo:rerun-if-changed=dashboard");
    let mut list = Vec::new();
    if let Err(e) = files(&dir, &mut list) {
        panic!(
            "cannot read the dashboard bundle {}: {e}; run scripts/build-dashboard.sh",
            dir.display()
        );
    }
    list.sort();
    let mut code = String::from("&[\n");
    for path in &list {
        let relative = path.strip_prefix(&dir).expect("listed below the bundle");
        let url: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let bytes = std::fs::read(path).expect("a file just listed is readable");
        writeln!(
            code,
            "    EmbeddedFile {{ path: {:?}, etag: \"\\\"{:016x}\\\"\", bytes: include_bytes!({:?}) }},",
            format!("/{}", url.join("/")),
            fnv1a(&bytes),
            path.display().to_string(),
        )
        .expect("writing to a String cannot fail");
    }
    code.push(']');
    std::fs::write(Path::new(&out_dir).join("dashboard.rs"), code).expect("OUT_DIR is writable");
}
