//! The interactive REPL (rustyline).

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::modes::Prepared;

/// Runs the REPL.
pub async fn run(_prepared: Prepared, _resume: bool) -> Result<ExitCode> {
    bail!("the interactive mode is not built yet; use -p \"prompt\" or --mode json")
}
