//! `AgentEvent`: what the agent loop reports, named and shaped as the reference's agent events
//! (`spec/extensions-and-modes.md` §6), so JSON and RPC modes can write them as they are.
//!
//! Invariant: events carry values, never references into the loop; `to_json` gives the
//! reference's JSON object (key order included).

use serde_json::{Map, Value};

use crate::agent::tool::ToolOutput;
use crate::ai::StreamEvent;
use crate::model::message::{AgentMessage, AssistantMessage};

/// One event of an agent run.
#[derive(Clone, Debug, PartialEq)]
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
        duration_ms: Option<u64>,
    },
}

/// Returns a tool output as the reference's `{content, details}` object.
pub fn tool_output_json(output: &ToolOutput) -> Value {
    let mut map = Map::new();
    map.insert(
        "content".to_owned(),
        serde_json::to_value(&output.content).unwrap_or(Value::Array(Vec::new())),
    );
    if let Some(details) = &output.details {
        map.insert("details".to_owned(), details.clone());
    }
    Value::Object(map)
}

fn messages_json(messages: &[AgentMessage]) -> Value {
    Value::Array(messages.iter().map(AgentMessage::to_value).collect())
}

fn assistant_json(message: &AssistantMessage) -> Value {
    AgentMessage::Assistant(message.clone()).to_value()
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

    /// Returns the event as JSON and RPC mode write it (1.6.0): like [`AgentEvent::to_json`],
    /// except that `message_update` is delta-only — `{type, usage, assistantMessageEvent}`
    /// with no cumulative `message` and no `partial` in the nested event (`toolcall_start`
    /// names the call's `id` and `toolName` instead).
    pub fn to_wire_json(&self) -> Value {
        let Self::MessageUpdate { event, partial } = self else {
            return self.to_json();
        };
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
                if let Some(crate::model::message::ContentBlock::ToolCall(call)) = call {
                    fields.insert("id".to_owned(), Value::from(call.id.as_str()));
                    fields.insert("toolName".to_owned(), Value::from(call.name.as_str()));
                }
            }
        }
        let mut map = Map::new();
        map.insert("type".to_owned(), Value::from(self.kind()));
        let usage = assistant_json(partial_message)
            .get_mut("usage")
            .map(Value::take)
            .unwrap_or(Value::Null);
        map.insert("usage".to_owned(), usage);
        map.insert("assistantMessageEvent".to_owned(), nested);
        Value::Object(map)
    }

    /// Returns the reference's JSON object for this event.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".to_owned(), Value::from(self.kind()));
        match self {
            Self::AgentStart | Self::TurnStart => {}
            Self::AgentEnd {
                messages,
                will_retry,
            } => {
                map.insert("messages".to_owned(), messages_json(messages));
                map.insert("willRetry".to_owned(), Value::from(*will_retry));
            }
            Self::TurnEnd {
                message,
                tool_results,
            } => {
                map.insert("message".to_owned(), message.to_value());
                map.insert("toolResults".to_owned(), messages_json(tool_results));
            }
            Self::MessageStart { message } | Self::MessageEnd { message } => {
                map.insert("message".to_owned(), message.to_value());
            }
            Self::MessageUpdate { event, partial } => {
                let empty;
                let partial_message = match partial {
                    Some(partial) => partial.as_ref(),
                    None => {
                        empty = crate::ai::new_assistant_message(&placeholder_model(), 0);
                        &empty
                    }
                };
                map.insert(
                    "assistantMessageEvent".to_owned(),
                    event.to_json(partial_message),
                );
                map.insert("message".to_owned(), assistant_json(partial_message));
            }
            Self::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                map.insert("toolCallId".to_owned(), Value::from(tool_call_id.as_str()));
                map.insert("toolName".to_owned(), Value::from(tool_name.as_str()));
                map.insert("args".to_owned(), args.clone());
            }
            Self::ToolExecutionUpdate {
                tool_call_id,
                tool_name,
                args,
                partial_result,
            } => {
                map.insert("toolCallId".to_owned(), Value::from(tool_call_id.as_str()));
                map.insert("toolName".to_owned(), Value::from(tool_name.as_str()));
                map.insert("args".to_owned(), args.clone());
                map.insert("partialResult".to_owned(), tool_output_json(partial_result));
            }
            Self::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
                duration_ms,
            } => {
                map.insert("toolCallId".to_owned(), Value::from(tool_call_id.as_str()));
                map.insert("toolName".to_owned(), Value::from(tool_name.as_str()));
                map.insert("result".to_owned(), tool_output_json(result));
                map.insert("isError".to_owned(), Value::from(*is_error));
                if let Some(duration) = duration_ms {
                    map.insert("durationMs".to_owned(), Value::from(*duration));
                }
            }
        }
        Value::Object(map)
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
