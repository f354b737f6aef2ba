//! `mwp demo` — placeholder while it is written.
use clap::Args;

/// `mwp demo` arguments.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Stop when the mission is done instead of serving until Ctrl-C.
    #[arg(long)]
    pub exit: bool,
}

/// Runs the demo.
pub fn run(_args: DemoArgs) -> crate::cli::Outcome {
    Ok(0)
}
