//! The stateless agent loop: turns, concurrent tool calls with results in call order,
//! steering and follow-up queues, abort; it emits the reference's agent events.
//!
//! Invariant: `agent` knows nothing of storage.

pub mod event;
pub mod run;
pub mod tool;

pub use event::AgentEvent;
pub use run::{
    LoopError, LoopHooks, RunConfig, ToolCallDecision, ToolResultPatch, run, run_continue,
};
