//! `AgentEvent`: what the agent loop reports, named and shaped as the reference's agent events
//! (`spec/extensions-and-modes.md` §6), so JSON and RPC modes can write them as they are.
//!
//! The JSON is `Serialize`, derived: `{"type": <snake_case variant>, <camelCase fields in
//! declaration order>}` — the field order is the key order, so it is the reference's. Only
//! `message_update` is written by hand (`fn message_update`): 1.6.0's delta-only
//! `{type, usage, assistantMessageEvent}`.
//!
//! Invariant: events carry values, never references into the loop.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use crate::agent::tool::ToolOutput;
use crate::ai::StreamEvent;
use crate::model::message::{AgentMessage, AssistantMessage, ContentBlock};

/// One event of an agent run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum AgentEvent {
    /// A run started.
    AgentStart,
    /// A run ended; `messages` are the messages it added.
    AgentEnd {
        /// The run's new messages, in order.
        messages: Vec<AgentMessage>,
        /// Whether the session retries the run (1.6.0's `willRetry`; the loop reports false,
        /// the session decides before passing the event on).
        will_retry: bool,
    },
    /// A turn (one model call and its tool calls) started.
    TurnStart,
    /// A turn ended.
    TurnEnd {
        /// The turn's assistant message.
        message: AgentMessage,
        /// Its tool results, in call order.
        tool_results: Vec<AgentMessage>,
    },
    /// A message started (user, custom and tool-result messages start and end at once).
    MessageStart {
        /// The message (for an assistant message: as it was when streaming began).
        message: AgentMessage,
    },
    /// The assistant message being streamed changed.
    #[serde(serialize_with = "message_update")]
    MessageUpdate {
        /// What changed (the reference's `assistantMessageEvent`).
        event: StreamEvent,
        /// The message so far, when the loop was asked to carry it (JSON/RPC modes need it).
        partial: Option<Box<AssistantMessage>>,
    },
    /// A message is final; the session persists it now.
    MessageEnd {
        /// The final message.
        message: AgentMessage,
    },
    /// A tool call is about to run.
    ToolExecutionStart {
        /// The call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The arguments as the model sent them.
        args: Value,
    },
    /// A tool streamed a partial result.
    ToolExecutionUpdate {
        /// The call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The arguments as the model sent them.
        args: Value,
        /// The partial result.
        partial_result: ToolOutput,
    },
    /// A tool call finished.
    ToolExecutionEnd {
        /// The call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// Its result.
        result: ToolOutput,
        /// Whether it failed.
        is_error: bool,
        /// How long the tool's `execute` took (1.6.0's `durationMs`); `None` when the tool
        /// did not run.
        #[serde(skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
}

/// Returns a tool output as the reference's `{content, details}` object.
pub fn tool_output_json(output: &ToolOutput) -> Value {
    serde_json::to_value(output).unwrap_or(Value::Null)
}

/// Writes a `message_update` as JSON and RPC mode write it (1.6.0): `{type, usage,
/// assistantMessageEvent}` with no cumulative `message` and no `partial` in the nested event
/// (`toolcall_start` names the call's `id` and `toolName` instead).
fn message_update<S: Serializer>(
    event: &StreamEvent,
    partial: &Option<Box<AssistantMessage>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let empty;
    let partial_message = match partial {
        Some(partial) => partial.as_ref(),
        None => {
            empty = crate::ai::new_assistant_message(&placeholder_model(), 0);
            &empty
        }
    };
    let mut nested = event.to_json(partial_message);
    if let Value::Object(fields) = &mut nested {
        fields.remove("partial");
        if fields.get("type").and_then(Value::as_str) == Some("toolcall_start") {
            let call = fields
                .get("contentIndex")
                .and_then(Value::as_u64)
                .and_then(|idx| usize::try_from(idx).ok())
                .and_then(|idx| partial_message.content.get(idx));
            if let Some(ContentBlock::ToolCall(call)) = call {
                fields.insert("id".to_owned(), Value::from(call.id.as_str()));
                fields.insert("toolName".to_owned(), Value::from(call.name.as_str()));
            }
        }
    }
    // The tag (`type`) is written by the enum's derive, before these.
    let mut map = serializer.serialize_map(None)?;
    map.serialize_entry("usage", &partial_message.usage)?;
    map.serialize_entry("assistantMessageEvent", &nested)?;
    map.end()
}

impl AgentEvent {
    /// Returns the event's `type` string.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::AgentStart => "agent_start",
            Self::AgentEnd { .. } => "agent_end",
            Self::TurnStart => "turn_start",
            Self::TurnEnd { .. } => "turn_end",
            Self::MessageStart { .. } => "message_start",
            Self::MessageUpdate { .. } => "message_update",
            Self::MessageEnd { .. } => "message_end",
            Self::ToolExecutionStart { .. } => "tool_execution_start",
            Self::ToolExecutionUpdate { .. } => "tool_execution_update",
            Self::ToolExecutionEnd { .. } => "tool_execution_end",
        }
    }

    /// Returns the event as JSON and RPC mode write it (the `Serialize` form).
    pub fn to_json(&self) -> Value {
        // Every map key is a string, so serialising into a `Value` cannot fail.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

fn placeholder_model() -> crate::ai::Model {
    crate::ai::Model {
        id: String::new(),
        name: String::new(),
        api: String::new(),
        provider: String::new(),
        base_url: String::new(),
        reasoning: false,
        thinking_level_map: None,
        input: Vec::new(),
        cost: crate::ai::models::ModelCost::default(),
        context_window: 0,
        max_tokens: 0,
        headers: None,
        compat: None,
        extra: serde_json::Map::new(),
    }
}
