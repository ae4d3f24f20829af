//! The extension event catalogue (`spec/extensions-and-modes.md` §2): what pi tells its
//! extensions, as typed values with the reference's JSON shape (what handlers answer is
//! [`crate::session::extensions::result`]). The agent loop's events are passed on as the
//! [`AgentEvent`]s they are ([`ExtensionEvent::Agent`]), with the turn count the session
//! keeps for extensions.
//!
//! Event payloads follow the reference's field names and order. Where the reference passes a
//! session *file* (`previousSessionFile`, `targetSessionFile`), pi passes the session id
//! under `previousSessionId` / `targetSessionId`: sessions live in the database, not in files.
//! An `AbortSignal` (`signal`) cannot cross a process boundary and is not part of the JSON.
//!
//! Invariant: `to_json` is pure.

use serde_json::{Map, Value, json};

use crate::agent::AgentEvent;
use crate::model::ids::EntryId;
use crate::model::message::{AgentMessage, ContentBlock, ImageContent};
use crate::store::StoredEntry;

// The answers were declared here before `result.rs` existed; their old paths keep working.
pub use crate::session::extensions::result::{
    BeforeAgentStartResult, CompactionOverride, CustomMessageSpec, InputAction, ResourcePaths,
    ResultError, SessionBeforeResult, ToolCallResult, ToolResultChange, TreeSummary,
    UserBashResult, context_result, message_end_result,
};

fn images_json(images: &[ImageContent]) -> Value {
    serde_json::to_value(images).unwrap_or(Value::Array(Vec::new()))
}

fn messages_json(messages: &[AgentMessage]) -> Value {
    Value::Array(messages.iter().map(AgentMessage::to_value).collect())
}

fn content_json(content: &[ContentBlock]) -> Value {
    serde_json::to_value(content).unwrap_or(Value::Array(Vec::new()))
}

/// Where a prompt came from (`input.source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputSource {
    /// Typed by the user.
    Interactive,
    /// An RPC client.
    Rpc,
    /// An extension (`sendUserMessage`).
    Extension,
}

impl InputSource {
    /// The reference's string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Interactive => "interactive",
            Self::Rpc => "rpc",
            Self::Extension => "extension",
        }
    }
}

/// `input`: a prompt before command expansion.
#[derive(Clone, Debug, PartialEq)]
pub struct InputEvent {
    /// The text as typed (or as transformed by an earlier handler).
    pub text: String,
    /// Attached images (`None`: the reference's `undefined`).
    pub images: Option<Vec<ImageContent>>,
    /// Where it came from.
    pub source: InputSource,
}

impl InputEvent {
    /// The reference's event object.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".into(), Value::from("input"));
        map.insert("text".into(), Value::from(self.text.as_str()));
        if let Some(images) = &self.images {
            map.insert("images".into(), images_json(images));
        }
        map.insert("source".into(), Value::from(self.source.as_str()));
        Value::Object(map)
    }
}

/// `before_agent_start`: the expanded prompt, before the run starts.
#[derive(Clone, Debug, PartialEq)]
pub struct BeforeAgentStartEvent {
    /// The expanded prompt text.
    pub prompt: String,
    /// Attached images.
    pub images: Option<Vec<ImageContent>>,
    /// The system prompt so far (chained across handlers).
    pub system_prompt: String,
}

impl BeforeAgentStartEvent {
    /// The reference's event object.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".into(), Value::from("before_agent_start"));
        map.insert("prompt".into(), Value::from(self.prompt.as_str()));
        if let Some(images) = &self.images {
            map.insert("images".into(), images_json(images));
        }
        map.insert(
            "systemPrompt".into(),
            Value::from(self.system_prompt.as_str()),
        );
        Value::Object(map)
    }
}

/// `tool_call`: a prepared tool call, before it runs.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallEvent {
    /// The call id.
    pub tool_call_id: String,
    /// The tool.
    pub tool_name: String,
    /// The validated arguments (as changed by earlier handlers).
    pub input: Value,
}

impl ToolCallEvent {
    /// The reference's event object.
    pub fn to_json(&self) -> Value {
        json!({
            "type": "tool_call",
            "toolName": self.tool_name,
            "toolCallId": self.tool_call_id,
            "input": self.input,
        })
    }
}

/// `tool_result`: a finished tool call, before it is recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResultEvent {
    /// The call id.
    pub tool_call_id: String,
    /// The tool.
    pub tool_name: String,
    /// The arguments it ran with.
    pub input: Value,
    /// The result content (as changed by earlier handlers).
    pub content: Vec<ContentBlock>,
    /// The result details.
    pub details: Option<Value>,
    /// Whether it failed.
    pub is_error: bool,
}

impl ToolResultEvent {
    /// The reference's event object.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".into(), Value::from("tool_result"));
        map.insert("toolName".into(), Value::from(self.tool_name.as_str()));
        map.insert("toolCallId".into(), Value::from(self.tool_call_id.as_str()));
        map.insert("input".into(), self.input.clone());
        map.insert("content".into(), content_json(&self.content));
        if let Some(details) = &self.details {
            map.insert("details".into(), details.clone());
        }
        map.insert("isError".into(), Value::from(self.is_error));
        Value::Object(map)
    }
}

/// `user_bash`: a `!command` typed by the user.
#[derive(Clone, Debug, PartialEq)]
pub struct UserBashEvent {
    /// The command.
    pub command: String,
    /// `!!`: kept out of the context.
    pub exclude_from_context: bool,
    /// The working directory.
    pub cwd: String,
}

impl UserBashEvent {
    /// The reference's event object.
    pub fn to_json(&self) -> Value {
        json!({
            "type": "user_bash",
            "command": self.command,
            "excludeFromContext": self.exclude_from_context,
            "cwd": self.cwd,
        })
    }
}

fn sorted(set: &std::collections::HashSet<String>) -> Value {
    let mut items: Vec<&String> = set.iter().collect();
    items.sort();
    Value::from(items.into_iter().cloned().collect::<Vec<_>>())
}

/// The reference's `preparation` object of `session_before_compact`: `{firstKeptEntryId,
/// messagesToSummarize, turnPrefixMessages, isSplitTurn, tokensBefore, previousSummary?,
/// fileOps, settings}`. `fileOps` holds sorted arrays (`read`, `written`, `edited`) — the
/// reference's `Set`s would serialise as empty objects.
pub fn compaction_preparation_json(
    preparation: &crate::session::compaction::CompactionPreparation<'_>,
) -> Value {
    let messages = |list: &[crate::session::compaction::PathMessage<'_>]| {
        Value::Array(list.iter().map(|message| message.to_value()).collect())
    };
    let ops = preparation.file_ops();
    let mut map = Map::new();
    map.insert(
        "firstKeptEntryId".into(),
        Value::from(preparation.first_kept_entry_id.as_str()),
    );
    map.insert(
        "messagesToSummarize".into(),
        messages(&preparation.messages_to_summarize),
    );
    map.insert(
        "turnPrefixMessages".into(),
        messages(&preparation.turn_prefix_messages),
    );
    map.insert("isSplitTurn".into(), Value::from(preparation.is_split_turn));
    map.insert(
        "tokensBefore".into(),
        Value::from(preparation.tokens_before),
    );
    if let Some(previous) = preparation.previous_summary {
        map.insert("previousSummary".into(), Value::from(previous));
    }
    map.insert(
        "fileOps".into(),
        json!({"read": sorted(&ops.read), "written": sorted(&ops.written), "edited": sorted(&ops.edited)}),
    );
    map.insert(
        "settings".into(),
        json!({
            "enabled": preparation.settings.enabled,
            "reserveTokens": preparation.settings.reserve_tokens,
            "keepRecentTokens": preparation.settings.keep_recent_tokens,
        }),
    );
    Value::Object(map)
}

/// What `session_before_tree` is told (the reference's `preparation`).
#[derive(Clone, Copy, Debug)]
pub struct TreePreparation<'a> {
    /// The entry navigated to.
    pub target_id: &'a EntryId,
    /// The leaf before the move.
    pub old_leaf_id: Option<&'a EntryId>,
    /// The deepest entry on both paths.
    pub common_ancestor_id: Option<&'a EntryId>,
    /// The abandoned branch, root first.
    pub entries_to_summarize: &'a [StoredEntry],
    /// Whether the user asked for a summary.
    pub user_wants_summary: bool,
    /// The user's summary instructions.
    pub custom_instructions: Option<&'a str>,
    /// Whether they replace the default prompt.
    pub replace_instructions: bool,
    /// The label the user gave.
    pub label: Option<&'a str>,
}

impl TreePreparation<'_> {
    /// `{targetId, oldLeafId, commonAncestorId, entriesToSummarize, userWantsSummary,
    /// customInstructions?, replaceInstructions?, label?}`.
    pub fn to_json(&self) -> Value {
        let mut map = serde_json::Map::new();
        map.insert("targetId".into(), Value::from(self.target_id.as_str()));
        map.insert(
            "oldLeafId".into(),
            self.old_leaf_id
                .map_or(Value::Null, |id| Value::from(id.as_str())),
        );
        map.insert(
            "commonAncestorId".into(),
            self.common_ancestor_id
                .map_or(Value::Null, |id| Value::from(id.as_str())),
        );
        map.insert(
            "entriesToSummarize".into(),
            Value::Array(
                self.entries_to_summarize
                    .iter()
                    .filter_map(|stored| crate::support::json::parse_lenient(&stored.payload).ok())
                    .collect(),
            ),
        );
        map.insert(
            "userWantsSummary".into(),
            Value::Bool(self.user_wants_summary),
        );
        if let Some(instructions) = self.custom_instructions {
            map.insert("customInstructions".into(), Value::from(instructions));
        }
        if self.replace_instructions {
            map.insert("replaceInstructions".into(), Value::Bool(true));
        }
        if let Some(label) = self.label {
            map.insert("label".into(), Value::from(label));
        }
        Value::Object(map)
    }
}

/// Why a session runtime started (`session_start.reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartReason {
    /// pi started.
    Startup,
    /// `/reload`.
    Reload,
    /// `/new`.
    New,
    /// `/resume` (switching to a stored session).
    Resume,
    /// `/fork` or `/clone`.
    Fork,
}

impl StartReason {
    /// The reference's string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Startup => "startup",
            Self::Reload => "reload",
            Self::New => "new",
            Self::Resume => "resume",
            Self::Fork => "fork",
        }
    }
}

/// Why a session runtime ends (`session_shutdown.reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownReason {
    /// pi exits.
    Quit,
    /// `/reload`.
    Reload,
    /// `/new`.
    New,
    /// `/resume`.
    Resume,
    /// `/fork` or `/clone`.
    Fork,
}

impl ShutdownReason {
    /// The reference's string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Quit => "quit",
            Self::Reload => "reload",
            Self::New => "new",
            Self::Resume => "resume",
            Self::Fork => "fork",
        }
    }
}

/// Where an agent event falls in its run, as the session counts turns for extensions (the
/// loop counts none): `turn_start` carries both fields, `turn_end` the index; the other
/// events leave them out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TurnStamp {
    /// 0-based turn of the run (`turnIndex`).
    pub turn_index: u64,
    /// When the turn started, Unix ms (`turn_start.timestamp`).
    pub timestamp: i64,
}

/// An agent event as extensions receive it (the reference's extension runner): the agent's
/// own JSON, with `turnIndex` (and `turn_start`'s `timestamp`) after `type`, and only the keys
/// the runner passes on — no `agent_end.willRetry`, no `tool_execution_end.durationMs`, and
/// `message_update`'s `message` before its `assistantMessageEvent`.
fn agent_event_json(event: &AgentEvent, turn: TurnStamp) -> Value {
    // (`turnIndex`, `timestamp`, the agent's keys passed on, in order)
    let (index, time, keys): (bool, bool, &[&str]) = match event {
        AgentEvent::AgentStart => (false, false, &[]),
        AgentEvent::AgentEnd { .. } => (false, false, &["messages"]),
        AgentEvent::TurnStart => (true, true, &[]),
        AgentEvent::TurnEnd { .. } => (true, false, &["message", "toolResults"]),
        AgentEvent::MessageStart { .. } | AgentEvent::MessageEnd { .. } => {
            (false, false, &["message"])
        }
        AgentEvent::MessageUpdate { .. } => (false, false, &["message", "assistantMessageEvent"]),
        AgentEvent::ToolExecutionStart { .. } => {
            (false, false, &["toolCallId", "toolName", "args"])
        }
        AgentEvent::ToolExecutionUpdate { .. } => (
            false,
            false,
            &["toolCallId", "toolName", "args", "partialResult"],
        ),
        AgentEvent::ToolExecutionEnd { .. } => (
            false,
            false,
            &["toolCallId", "toolName", "result", "isError"],
        ),
    };
    // The runner passes `message_update`'s whole partial message, and the stream event with
    // its `partial` (not JSON mode's delta form); the loop carries the partial whenever a
    // handler wants `message_update` (`RunConfig::emit_partials`).
    let mut agent = if let AgentEvent::MessageUpdate {
        event: stream,
        partial: Some(partial),
    } = event
    {
        let mut map = Map::new();
        map.insert(
            "message".into(),
            AgentMessage::Assistant(partial.as_ref().clone()).to_value(),
        );
        map.insert("assistantMessageEvent".into(), stream.to_json(partial));
        map
    } else {
        match event.to_json() {
            Value::Object(map) => map,
            other => return other,
        }
    };
    let mut map = Map::new();
    map.insert("type".into(), Value::from(event.kind()));
    if index {
        map.insert("turnIndex".into(), Value::from(turn.turn_index));
    }
    if time {
        map.insert("timestamp".into(), Value::from(turn.timestamp));
    }
    for key in keys {
        if let Some(value) = agent.remove(*key) {
            map.insert((*key).to_owned(), value);
        }
    }
    Value::Object(map)
}

/// One event of the catalogue.
#[derive(Clone, Debug, PartialEq)]
pub enum ExtensionEvent {
    /// `resources_discover {cwd, reason}`.
    ResourcesDiscover {
        /// The working directory.
        cwd: String,
        /// `startup` or `reload`.
        reason: &'static str,
    },
    /// `session_start {reason, previousSessionId?}`.
    SessionStart {
        /// Why.
        reason: StartReason,
        /// The session before a switch.
        previous_session: Option<String>,
    },
    /// `session_before_switch {reason, targetSessionId?}`.
    SessionBeforeSwitch {
        /// `new` or `resume`.
        reason: &'static str,
        /// The session switched to.
        target_session: Option<String>,
    },
    /// `session_before_fork {entryId, position}`.
    SessionBeforeFork {
        /// The entry forked at.
        entry_id: String,
        /// `before` or `at`.
        position: &'static str,
    },
    /// `session_before_compact {preparation, branchEntries, customInstructions?}`.
    SessionBeforeCompact {
        /// The compaction plan, as the reference's `preparation` object.
        preparation: Value,
        /// The entries of the active branch.
        branch_entries: Vec<Value>,
        /// `/compact` instructions.
        custom_instructions: Option<String>,
    },
    /// `session_compact {compactionEntry, fromExtension}`.
    SessionCompact {
        /// The stored compaction entry.
        compaction_entry: Value,
        /// Whether an extension supplied the summary.
        from_extension: bool,
    },
    /// `session_shutdown {reason, targetSessionId?}`.
    SessionShutdown {
        /// Why.
        reason: ShutdownReason,
        /// The session switched to.
        target_session: Option<String>,
    },
    /// `session_before_tree {preparation}`.
    SessionBeforeTree {
        /// `{targetId, oldLeafId, commonAncestorId, entriesToSummarize, userWantsSummary,
        /// customInstructions?, replaceInstructions?, label?}`.
        preparation: Value,
    },
    /// `session_tree {newLeafId, oldLeafId, summaryEntry?, fromExtension?}`.
    SessionTree {
        /// The leaf after the move.
        new_leaf_id: Option<String>,
        /// The leaf before the move.
        old_leaf_id: Option<String>,
        /// The branch summary entry written, if any.
        summary_entry: Option<Value>,
        /// Whether an extension supplied the summary (only with a summary).
        from_extension: Option<bool>,
    },
    /// `context {messages}`.
    Context {
        /// The transcript for this model call.
        messages: Vec<AgentMessage>,
    },
    /// `before_agent_start`.
    BeforeAgentStart(BeforeAgentStartEvent),
    /// An agent event (`agent_start`, `agent_end`, `turn_*`, `message_*`,
    /// `tool_execution_*`) as the loop reported it, with the session's turn count.
    Agent {
        /// The agent loop's event (boxed: it is the largest by far).
        event: Box<AgentEvent>,
        /// Where it falls in the run.
        turn: TurnStamp,
    },
    /// `tool_call`.
    ToolCall(ToolCallEvent),
    /// `tool_result`.
    ToolResult(ToolResultEvent),
    /// `model_select {model, previousModel?, source}`.
    ModelSelect {
        /// The new model (the reference's model object).
        model: Value,
        /// The model before.
        previous_model: Option<Value>,
        /// `set`, `cycle` or `restore`.
        source: &'static str,
    },
    /// `thinking_level_select {level, previousLevel}`.
    ThinkingLevelSelect {
        /// The new level.
        level: String,
        /// The level before.
        previous_level: String,
    },
    /// `user_bash`.
    UserBash(UserBashEvent),
    /// `input`.
    Input(InputEvent),
}

/// Every event name of the catalogue, in the spec's order.
pub const EVENT_NAMES: [&str; 29] = [
    "resources_discover",
    "session_start",
    "session_before_switch",
    "session_before_fork",
    "session_before_compact",
    "session_compact",
    "session_shutdown",
    "session_before_tree",
    "session_tree",
    "context",
    "before_agent_start",
    "agent_start",
    "agent_end",
    "turn_start",
    "turn_end",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
    "tool_call",
    "tool_result",
    "model_select",
    "thinking_level_select",
    "user_bash",
    "input",
    // The reference has these two; pi does not emit them (the provider payload is built
    // inside `ai`), but extensions may list them without an error.
    "before_provider_request",
    "after_provider_response",
];

impl ExtensionEvent {
    /// The event's `type` string.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ResourcesDiscover { .. } => "resources_discover",
            Self::SessionStart { .. } => "session_start",
            Self::SessionBeforeSwitch { .. } => "session_before_switch",
            Self::SessionBeforeFork { .. } => "session_before_fork",
            Self::SessionBeforeCompact { .. } => "session_before_compact",
            Self::SessionCompact { .. } => "session_compact",
            Self::SessionShutdown { .. } => "session_shutdown",
            Self::SessionBeforeTree { .. } => "session_before_tree",
            Self::SessionTree { .. } => "session_tree",
            Self::Context { .. } => "context",
            Self::BeforeAgentStart(_) => "before_agent_start",
            Self::Agent { event, .. } => event.kind(),
            Self::ToolCall(_) => "tool_call",
            Self::ToolResult(_) => "tool_result",
            Self::ModelSelect { .. } => "model_select",
            Self::ThinkingLevelSelect { .. } => "thinking_level_select",
            Self::UserBash(_) => "user_bash",
            Self::Input(_) => "input",
        }
    }

    /// Whether this is a `session_before_*` event (last non-empty result kept, `cancel`
    /// returns at once).
    pub fn is_session_before(&self) -> bool {
        matches!(
            self,
            Self::SessionBeforeSwitch { .. }
                | Self::SessionBeforeFork { .. }
                | Self::SessionBeforeCompact { .. }
                | Self::SessionBeforeTree { .. }
        )
    }

    /// The reference's event object.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".into(), Value::from(self.name()));
        let mut put = |key: &str, value: Value| {
            map.insert(key.to_owned(), value);
        };
        match self {
            Self::ResourcesDiscover { cwd, reason } => {
                put("cwd", Value::from(cwd.as_str()));
                put("reason", Value::from(*reason));
            }
            Self::SessionStart {
                reason,
                previous_session,
            } => {
                put("reason", Value::from(reason.as_str()));
                if let Some(previous) = previous_session {
                    put("previousSessionId", Value::from(previous.as_str()));
                }
            }
            Self::SessionBeforeSwitch {
                reason,
                target_session,
            } => {
                put("reason", Value::from(*reason));
                if let Some(target) = target_session {
                    put("targetSessionId", Value::from(target.as_str()));
                }
            }
            Self::SessionBeforeFork { entry_id, position } => {
                put("entryId", Value::from(entry_id.as_str()));
                put("position", Value::from(*position));
            }
            Self::SessionBeforeCompact {
                preparation,
                branch_entries,
                custom_instructions,
            } => {
                put("preparation", preparation.clone());
                put("branchEntries", Value::Array(branch_entries.clone()));
                if let Some(instructions) = custom_instructions {
                    put("customInstructions", Value::from(instructions.as_str()));
                }
            }
            Self::SessionCompact {
                compaction_entry,
                from_extension,
            } => {
                put("compactionEntry", compaction_entry.clone());
                put("fromExtension", Value::from(*from_extension));
            }
            Self::SessionShutdown {
                reason,
                target_session,
            } => {
                put("reason", Value::from(reason.as_str()));
                if let Some(target) = target_session {
                    put("targetSessionId", Value::from(target.as_str()));
                }
            }
            Self::SessionBeforeTree { preparation } => put("preparation", preparation.clone()),
            Self::SessionTree {
                new_leaf_id,
                old_leaf_id,
                summary_entry,
                from_extension,
            } => {
                put(
                    "newLeafId",
                    new_leaf_id.clone().map_or(Value::Null, Value::from),
                );
                put(
                    "oldLeafId",
                    old_leaf_id.clone().map_or(Value::Null, Value::from),
                );
                if let Some(entry) = summary_entry {
                    put("summaryEntry", entry.clone());
                }
                if let Some(flag) = from_extension {
                    put("fromExtension", Value::from(*flag));
                }
            }
            Self::Context { messages } => put("messages", messages_json(messages)),
            Self::BeforeAgentStart(event) => return event.to_json(),
            Self::Agent { event, turn } => return agent_event_json(event, *turn),
            Self::ToolCall(event) => return event.to_json(),
            Self::ToolResult(event) => return event.to_json(),
            Self::ModelSelect {
                model,
                previous_model,
                source,
            } => {
                put("model", model.clone());
                if let Some(previous) = previous_model {
                    put("previousModel", previous.clone());
                }
                put("source", Value::from(*source));
            }
            Self::ThinkingLevelSelect {
                level,
                previous_level,
            } => {
                put("level", Value::from(level.as_str()));
                put("previousLevel", Value::from(previous_level.as_str()));
            }
            Self::UserBash(event) => return event.to_json(),
            Self::Input(event) => return event.to_json(),
        }
        Value::Object(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tool::ToolOutput;

    #[test]
    fn tool_call_events_have_the_reference_key_order() {
        let event = ToolCallEvent {
            tool_call_id: "c1".into(),
            tool_name: "bash".into(),
            input: json!({"command": "ls"}),
        };
        assert_eq!(
            crate::support::json::to_js_string(&event.to_json()),
            r#"{"type":"tool_call","toolName":"bash","toolCallId":"c1","input":{"command":"ls"}}"#
        );
    }

    /// The agent events as the session hands them to extensions (`turn_index` and
    /// `timestamp` as the session counts them).
    fn as_extension_event(event: &AgentEvent, turn_index: u64, timestamp: i64) -> ExtensionEvent {
        ExtensionEvent::Agent {
            event: Box::new(event.clone()),
            turn: TurnStamp {
                turn_index,
                timestamp,
            },
        }
    }

    fn events_user() -> AgentMessage {
        AgentMessage::from_value(
            json!({"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1}),
        )
    }

    fn events_assistant() -> AgentMessage {
        AgentMessage::from_value(json!({
            "role": "assistant",
            "content": [{"type": "toolCall", "id": "c1", "name": "ls", "arguments": {"path": "."}}],
            "api": "openai-completions", "provider": "p", "model": "m",
            "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "toolUse", "timestamp": 2
        }))
    }

    fn events_result() -> AgentMessage {
        AgentMessage::from_value(json!({
            "role": "toolResult", "toolCallId": "c1", "toolName": "ls",
            "content": [{"type": "text", "text": "a"}], "isError": false, "timestamp": 3
        }))
    }

    #[test]
    fn agent_events_reach_extensions_in_the_reference_shape() {
        let (user, assistant, result) = (events_user(), events_assistant(), events_result());
        let AgentMessage::Assistant(partial) = assistant.clone() else {
            unreachable!("an assistant message");
        };
        let output = ToolOutput {
            content: vec![ContentBlock::text("a")],
            details: Some(json!({"n": 1})),
        };
        let events = [
            AgentEvent::AgentStart,
            AgentEvent::TurnStart,
            AgentEvent::MessageStart {
                message: user.clone(),
            },
            AgentEvent::MessageUpdate {
                event: crate::ai::StreamEvent::TextDelta {
                    content_index: 0,
                    delta: "x".into(),
                },
                partial: Some(Box::new(partial)),
            },
            AgentEvent::MessageEnd {
                message: assistant.clone(),
            },
            AgentEvent::ToolExecutionStart {
                tool_call_id: "c1".into(),
                tool_name: "ls".into(),
                args: json!({"path": "."}),
            },
            AgentEvent::ToolExecutionUpdate {
                tool_call_id: "c1".into(),
                tool_name: "ls".into(),
                args: json!({"path": "."}),
                partial_result: output.clone(),
            },
            AgentEvent::ToolExecutionEnd {
                tool_call_id: "c1".into(),
                tool_name: "ls".into(),
                result: output,
                is_error: false,
                duration_ms: Some(7),
            },
            AgentEvent::TurnEnd {
                message: assistant.clone(),
                tool_results: vec![result.clone()],
            },
            AgentEvent::AgentEnd {
                messages: vec![user, assistant, result],
                will_retry: true,
            },
        ];
        let lines: Vec<String> = events
            .iter()
            .map(|event| {
                let extension = as_extension_event(event, 4, 1234);
                assert_eq!(extension.name(), event.kind());
                crate::support::json::to_js_string(&extension.to_json())
            })
            .collect();
        // The messages as `to_js_string` writes them (`U`ser, `A`ssistant, tool `R`esult).
        let js = |message: &AgentMessage| crate::support::json::to_js_string(&message.to_value());
        let (u, a, r) = (
            js(&events_user()),
            js(&events_assistant()),
            js(&events_result()),
        );
        let expected = [
            r#"{"type":"agent_start"}"#.to_owned(),
            r#"{"type":"turn_start","turnIndex":4,"timestamp":1234}"#.to_owned(),
            format!(r#"{{"type":"message_start","message":{u}}}"#),
            format!(
                r#"{{"type":"message_update","message":{a},"assistantMessageEvent":{{"type":"text_delta","contentIndex":0,"delta":"x","partial":{a}}}}}"#
            ),
            format!(r#"{{"type":"message_end","message":{a}}}"#),
            r#"{"type":"tool_execution_start","toolCallId":"c1","toolName":"ls","args":{"path":"."}}"#.to_owned(),
            r#"{"type":"tool_execution_update","toolCallId":"c1","toolName":"ls","args":{"path":"."},"partialResult":{"content":[{"type":"text","text":"a"}],"details":{"n":1}}}"#.to_owned(),
            r#"{"type":"tool_execution_end","toolCallId":"c1","toolName":"ls","result":{"content":[{"type":"text","text":"a"}],"details":{"n":1}},"isError":false}"#.to_owned(),
            format!(r#"{{"type":"turn_end","turnIndex":4,"message":{a},"toolResults":[{r}]}}"#),
            format!(r#"{{"type":"agent_end","messages":[{u},{a},{r}]}}"#),
        ];
        assert_eq!(lines, expected);
    }

    #[test]
    fn every_event_name_is_in_the_catalogue() {
        let event = ExtensionEvent::Agent {
            event: Box::new(AgentEvent::TurnStart),
            turn: TurnStamp {
                turn_index: 0,
                timestamp: 1,
            },
        };
        assert!(EVENT_NAMES.contains(&event.name()));
        assert_eq!(
            event.to_json(),
            json!({"type": "turn_start", "turnIndex": 0, "timestamp": 1})
        );
    }
}
