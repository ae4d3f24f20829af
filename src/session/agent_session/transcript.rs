//! The transcript and what is read from it: the messages, the last answer, the context
//! tokens the last usage reports, the session statistics (from the store's totals, or from
//! the transcript of a session not stored yet), and the rebuild from the store at the leaf.
//!
//! Invariant: the transcript equals a rebuild from the store at the leaf, except failed turns
//! dropped for a retry (they stay in the store).

use crate::model::message::{AgentMessage, ContentBlock, StopReason, UserContent};
use crate::session::agent_session::error::SessionError;
use crate::session::agent_session::state::AgentSession;
use crate::session::persist::{Persistence, blocking};
use crate::store::LeafSelector;

/// Session statistics (RPC `get_session_stats`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionStats {
    /// User messages in the transcript.
    pub user_messages: usize,
    /// Assistant messages in the transcript.
    pub assistant_messages: usize,
    /// Tool calls made.
    pub tool_calls: usize,
    /// Tool results in the transcript.
    pub tool_results: usize,
    /// All transcript messages.
    pub total_messages: usize,
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Cache read tokens.
    pub cache_read: u64,
    /// Cache write tokens.
    pub cache_write: u64,
    /// Cost in USD.
    pub cost: f64,
}

/// The text of a user message (text blocks joined with nothing, as the reference does).
pub(super) fn user_text(message: &AgentMessage) -> String {
    match message {
        AgentMessage::User(user) => match &user.content {
            UserContent::Text(text) => text.clone(),
            UserContent::Blocks(blocks) => blocks
                .iter()
                .filter_map(ContentBlock::as_text)
                .collect::<Vec<_>>()
                .join(""),
        },
        _ => String::new(),
    }
}

impl AgentSession {
    /// Returns the transcript.
    pub fn messages(&self) -> Vec<AgentMessage> {
        self.state().transcript.clone()
    }

    /// Returns the text of the last assistant message, if any.
    pub fn last_assistant_text(&self) -> Option<String> {
        self.state()
            .transcript
            .iter()
            .rev()
            .find_map(|message| match message {
                AgentMessage::Assistant(assistant) => Some(assistant.text()),
                _ => None,
            })
    }

    /// Returns the session's message counts and token and cost totals over all its entries (1.6.0
    /// `getSessionStats`: every branch, compacted history included; a session not yet stored
    /// counts its transcript).
    pub async fn stats(&self) -> SessionStats {
        let stored = match &*self.inner.persistence.lock().await {
            Persistence::Stored { id, unsaved } if unsaved.is_empty() => Some(id.clone()),
            _ => None,
        };
        if let Some(id) = stored {
            let store = self.config().store.clone();
            if let Ok(totals) = blocking(move || store.session_totals(&id)).await {
                let count = |value: i64| usize::try_from(value).unwrap_or(0);
                let tokens = |value: i64| u64::try_from(value).unwrap_or(0);
                return SessionStats {
                    user_messages: count(totals.user),
                    assistant_messages: count(totals.assistant),
                    tool_calls: count(totals.tool_calls),
                    tool_results: count(totals.tool_results),
                    total_messages: count(totals.messages),
                    input: tokens(totals.input),
                    output: tokens(totals.output),
                    cache_read: tokens(totals.cache_read),
                    cache_write: tokens(totals.cache_write),
                    cost: totals.cost,
                };
            }
        }
        // A session not (fully) stored yet: its transcript is all it has.
        let state = self.state();
        let mut stats = SessionStats {
            total_messages: state.transcript.len(),
            ..SessionStats::default()
        };
        for message in &state.transcript {
            match message {
                AgentMessage::User(_) => stats.user_messages += 1,
                AgentMessage::Assistant(assistant) => {
                    stats.assistant_messages += 1;
                    stats.tool_calls += assistant.tool_calls().count();
                    stats.input += assistant.usage.input;
                    stats.output += assistant.usage.output;
                    stats.cache_read += assistant.usage.cache_read;
                    stats.cache_write += assistant.usage.cache_write;
                    stats.cost += assistant.usage.cost.total;
                }
                AgentMessage::ToolResult(result) => {
                    stats.tool_results += 1;
                    if let Some(usage) = &result.usage {
                        stats.input += usage.input;
                        stats.output += usage.output;
                        stats.cache_read += usage.cache_read;
                        stats.cache_write += usage.cache_write;
                        stats.cost += usage.cost.total;
                    }
                }
                _ => {}
            }
        }
        stats
    }

    /// Returns the context tokens as the last assistant usage reports them (input + output +
    /// cache), or `None` before the first answer.
    pub fn context_tokens(&self) -> Option<u64> {
        self.state()
            .transcript
            .iter()
            .rev()
            .find_map(|message| match message {
                AgentMessage::Assistant(assistant)
                    if !matches!(
                        assistant.stop_reason,
                        StopReason::Error | StopReason::Aborted
                    ) =>
                {
                    let usage = &assistant.usage;
                    let total = if usage.total_tokens > 0 {
                        usage.total_tokens
                    } else {
                        usage.input + usage.output + usage.cache_read + usage.cache_write
                    };
                    Some(total)
                }
                _ => None,
            })
    }

    /// Rebuilds the transcript (and model/thinking) from the store at the leaf.
    pub(super) async fn reload_transcript(&self) -> Result<(), SessionError> {
        let session = self.ensure_stored().await?;
        let store = self.store().clone();
        let context = blocking(move || store.context(&session, &LeafSelector::Current)).await?;
        let mut state = self.state();
        state.transcript = context.agent_messages();
        Ok(())
    }
}
