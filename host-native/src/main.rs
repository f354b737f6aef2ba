//! The `mwp` command-line tool.
fn main() {}
