//! The `mwp` command-line tool: see `mwp --help` and docs/cli.md.

/// mimalloc instead of the C library's allocator: a request allocates and frees many small
/// objects across two threads, where glibc's malloc spent a sixth of the server's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
fn main() -> std::process::ExitCode {
    mwp_host::cli::main()
}
