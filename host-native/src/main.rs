//! The `mwp` command-line tool: see `mwp --help` and docs/cli.md.
fn main() -> std::process::ExitCode {
    mwp_host::cli::main()
}
