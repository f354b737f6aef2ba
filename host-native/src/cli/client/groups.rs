//! `mwp groups --server URL` (or `--data DIR`): the groups and the seq of each one's last
//! event.

use clap::Args;
use serde_json::json;

use super::super::{Outcome, EXIT_OK};
use super::source::SourceArgs;
use super::OutputArgs;

/// `mwp groups` arguments.
#[derive(Debug, Args)]
pub struct GroupsArgs {
    /// Where the groups are.
    #[command(flatten)]
    pub source: SourceArgs,
    /// How to print.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Runs `mwp groups`: one line per group, `{"group", "head"}`.
pub fn run(args: &GroupsArgs) -> Outcome {
    let source = args.source.open()?;
    let json = args.output.json();
    for (group, head) in source.groups()? {
        super::print(json, &json!({"group": group, "head": head}), || {
            format!("{group:<32} head seq {head}")
        })?;
    }
    Ok(EXIT_OK)
}
