//! `AgentSession`: the stateful layer over the stateless agent loop — the prompt pipeline,
//! the single persistence point (every message is appended to the store on `message_end`, in
//! the order the agent saw it), turn-level auto-retry, compaction, model and thinking-level
//! changes as entries, `!cmd` executions, steering and follow-up queues, tree navigation and
//! session switches, the extension hook points, and the event fan-out that modes subscribe to.
//!
//! One type, one concern per file: `state.rs` holds the handle and everything it holds; every
//! other file is an `impl AgentSession` block for one concern (see each file's header, and
//! `docs/ARCHITECTURE.md`, "src/session/agent_session/"). The files call each other's methods
//! freely; the types they import from each other go one way only (the layering test checks
//! that no two of them import each other in a cycle). This file only declares them and says
//! what the session's public API is.
//!
//! Concurrency: an `AgentSession` is a cheap handle; one run at a time (`run_lock`), while
//! `steer`, `follow_up`, `abort` and the getters work during a run. Store calls run in
//! `spawn_blocking`; no lock is held across an `.await` except the run lock and the
//! persistence lock (an async mutex that orders appends).
//!
//! Invariants: the transcript equals a rebuild from the store at the leaf (apart from failed
//! turns dropped for a retry, which stay in the store); nothing below `modes` prints.

mod compaction;
mod config;
mod error;
mod extension_api;
mod fanout;
mod hooks;
mod lease;
mod loop_hooks;
mod metadata;
mod model;
mod navigation;
mod open;
mod persistence;
mod prompt;
mod queues;
mod retry;
mod run;
mod runtime_dir;
mod state;
mod system_prompt;
mod transcript;
mod user_shell;

pub use crate::session::extensions::context::{DeliverAs, SendMessageOptions};
pub use crate::session::settings::LeaseSettings;
pub use compaction::{NavigateOptions, NavigateOutcome};
pub use config::{ModelCandidates, ModelChoice, OpenReport, SessionConfig, SessionTarget};
pub use error::{HeldSession, ReadOnlyReason, SessionError, describe_read_only, seconds};
pub use lease::OpenAccess;
pub use metadata::sanitize_session_name;
pub use prompt::{PromptDisposition, PromptOptions, PromptSource};
pub use queues::StreamingBehavior;
pub use retry::is_retryable;
pub use state::{AgentSession, WeakSession};
pub use transcript::SessionStats;
pub use user_shell::OutputSink;
