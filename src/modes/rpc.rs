//! RPC mode over stdin/stdout.

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::modes::Prepared;

/// Runs RPC mode.
pub async fn run(_prepared: Prepared) -> Result<ExitCode> {
    bail!("RPC mode is not built yet")
}
