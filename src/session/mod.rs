//! `AgentSession`: the stateful layer that ties the agent loop to the store — the prompt
//! pipeline, persistence on `message_end`, retries, compaction triggers and event fan-out —
//! and its parts: resources, compaction, extensions and tools.

pub mod compaction;
pub mod resources;
pub mod tools;
