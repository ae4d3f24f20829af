//! `AgentSession`: the stateful layer that ties the agent loop to the store — the prompt
//! pipeline, persistence on `message_end`, retries, compaction triggers and event fan-out —
//! and its parts: resources, compaction, extensions and tools.

pub mod agent_session;
pub mod compaction;
pub mod events;
pub mod extensions;
pub mod mcp;
pub mod persist;
pub mod resources;
pub mod settings;
pub mod tools;
pub mod trust;

pub use crate::agent::AgentEvent;
pub use agent_session::{
    AgentSession, DeliverAs, HeldSession, LeaseSettings, ModelCandidates, ModelChoice,
    NavigateOptions, NavigateOutcome, OpenAccess, OpenReport, OutputSink, PromptDisposition,
    PromptOptions, PromptSource, ReadOnlyReason, SendMessageOptions, SessionConfig, SessionError,
    SessionStats, SessionTarget, StreamingBehavior, WeakSession,
};
pub use events::{NoticeLevel, SessionEvent};
pub use settings::{QueueMode, RetrySettings, SessionSettings, SettingsSink};
