//! The agent run modes: the REPL, print (`-p`), JSON events and RPC over stdin/stdout. Each
//! drives the same `AgentSession`; `modes` and `cli` are the only layers that write to the
//! terminal.

pub mod print;
pub mod repl;
pub mod rpc;

use crate::model::message::ImageContent;
use crate::session::{SessionConfig, SessionTarget};

/// Everything an agent run needs, built by `cli` from the command line and the environment.
pub struct Prepared {
    /// The session configuration.
    pub config: SessionConfig,
    /// Which session to open.
    pub target: SessionTarget,
    /// The mode chosen (text means print when `print` is set).
    pub mode: Mode,
    /// Whether print mode was chosen (`-p`, or piped stdin).
    pub print: bool,
    /// The prompts to send, in order (the first with stdin and `@file` text joined).
    pub prompts: Vec<(String, Vec<ImageContent>)>,
    /// Warnings to show before starting.
    pub warnings: Vec<String>,
}

/// Output mode (`--mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Text (the REPL, or print with `-p`).
    Text,
    /// JSON event lines.
    Json,
    /// RPC over stdin/stdout.
    Rpc,
}
