//! `mwp bench` — placeholder while it is written.
use clap::Args;

/// `mwp bench` arguments.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Concurrent clients.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
}

/// Runs the benchmark.
pub fn run(_args: BenchArgs) -> super::Outcome {
    Ok(0)
}
