//! The one shared data model: session headers, entries, messages and ids, as typed views over
//! the reference JSON (`spec/session-format.md`).
//!
//! Invariants: every type serialises to exactly the reference JSON (key order, optional fields
//! omitted rather than `null`); unknown entry types, roles, content blocks and fields survive a
//! parse as raw JSON; `model` does no I/O.

pub mod entry;
pub mod ids;
pub mod lenient;
pub mod message;

pub use entry::{Entry, EntryKind, ModelRef, SessionHeader};
pub use ids::{EntryId, SessionId, ToolCallId};
pub use message::{AgentMessage, ContentBlock, StopReason, Usage, UserContent};
