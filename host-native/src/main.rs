//! The `mwp` command-line tool: see `mwp --help` and docs/cli.md.

/// mimalloc instead of the C library's allocator: a request allocates and frees many small
/// objects across two threads, where glibc's malloc spent a sixth of the server's CPU. Its
/// version 2 line (the crate's `v2` feature): version 3 held freed pages for a second and
/// peaked higher (docs/decisions.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
fn main() -> std::process::ExitCode {
    mwp_host::cli::main()
}
