//! The extension event catalogue (`spec/extensions-and-modes.md` §2): what pi tells its
//! extensions, as typed values with the reference's JSON shape, and what a handler may answer,
//! as typed results parsed leniently from JSON.
//!
//! Event payloads follow the reference's field names and order. Where the reference passes a
//! session *file* (`previousSessionFile`, `targetSessionFile`), pi passes the session id
//! under `previousSessionId` / `targetSessionId`: sessions live in the database, not in files.
//! An `AbortSignal` (`signal`) cannot cross a process boundary and is not part of the JSON.
//!
//! Invariants: `to_json` is pure; a result parser never panics and turns a malformed answer
//! into [`ResultError`] (which the bus reports as an `extension_error`), and an absent or
//! `null` answer into "no result".

use serde_json::{Map, Value, json};

use crate::agent::tool::ToolOutput;
use crate::model::message::{AgentMessage, ContentBlock, ImageContent, UserContent};

/// A handler's answer did not have the shape its event allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid result for `{event}`: {message}")]
pub struct ResultError {
    /// The event name.
    pub event: &'static str,
    /// What was wrong.
    pub message: String,
}

fn bad(event: &'static str, message: impl Into<String>) -> ResultError {
    ResultError {
        event,
        message: message.into(),
    }
}

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

/// What an `input` handler decided.
#[derive(Clone, Debug, PartialEq)]
pub enum InputAction {
    /// Go on unchanged.
    Continue,
    /// Replace the text (and the images, when given); later handlers see the new text.
    Transform {
        /// The new text.
        text: String,
        /// New images (`None` keeps the current ones).
        images: Option<Vec<ImageContent>>,
    },
    /// The extension dealt with it: nothing is sent.
    Handled,
}

impl InputAction {
    /// Parses `{action: "continue" | "transform" | "handled", text?, images?}`.
    pub fn from_json(value: Option<Value>) -> Result<Option<Self>, ResultError> {
        let Some(Value::Object(map)) = value.filter(|value| !value.is_null()) else {
            return Ok(None);
        };
        match map.get("action").and_then(Value::as_str) {
            Some("continue") | None => Ok(Some(Self::Continue)),
            Some("handled") => Ok(Some(Self::Handled)),
            Some("transform") => {
                let text = map
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("input", "`transform` needs a string `text`"))?;
                let images = match map.get("images") {
                    None | Some(Value::Null) => None,
                    Some(value) => Some(
                        serde_json::from_value::<Vec<ImageContent>>(value.clone())
                            .map_err(|error| bad("input", format!("`images`: {error}")))?,
                    ),
                };
                Ok(Some(Self::Transform {
                    text: text.to_owned(),
                    images,
                }))
            }
            Some(other) => Err(bad("input", format!("unknown action `{other}`"))),
        }
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

/// A custom message an extension wants in the context (`{customType, content, display,
/// details?}`).
#[derive(Clone, Debug, PartialEq)]
pub struct CustomMessageSpec {
    /// Extension identifier.
    pub custom_type: String,
    /// Text or blocks.
    pub content: UserContent,
    /// Whether the UI shows it.
    pub display: bool,
    /// Extension data (never sent to the model).
    pub details: Option<Value>,
}

impl CustomMessageSpec {
    /// Parses the reference's message object.
    pub fn from_json(event: &'static str, value: &Value) -> Result<Self, ResultError> {
        let Value::Object(map) = value else {
            return Err(bad(event, "a message must be an object"));
        };
        let custom_type = map
            .get("customType")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(event, "a message needs a string `customType`"))?
            .to_owned();
        let content = match map.get("content") {
            Some(value @ (Value::String(_) | Value::Array(_))) => {
                serde_json::from_value::<UserContent>(value.clone())
                    .map_err(|error| bad(event, format!("`content`: {error}")))?
            }
            _ => return Err(bad(event, "a message needs `content` (text or blocks)")),
        };
        Ok(Self {
            custom_type,
            content,
            display: map.get("display").and_then(Value::as_bool).unwrap_or(true),
            details: map.get("details").filter(|value| !value.is_null()).cloned(),
        })
    }
}

/// What a `before_agent_start` handler returned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BeforeAgentStartResult {
    /// A custom message to send (and persist) after the user message.
    pub message: Option<CustomMessageSpec>,
    /// The system prompt for this run.
    pub system_prompt: Option<String>,
}

impl BeforeAgentStartResult {
    /// Parses `{message?, systemPrompt?}`.
    pub fn from_json(value: Option<Value>) -> Result<Option<Self>, ResultError> {
        let Some(Value::Object(map)) = value.filter(|value| !value.is_null()) else {
            return Ok(None);
        };
        let message = match map.get("message") {
            None | Some(Value::Null) => None,
            Some(value) => Some(CustomMessageSpec::from_json("before_agent_start", value)?),
        };
        let system_prompt = match map.get("systemPrompt") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(_) => return Err(bad("before_agent_start", "`systemPrompt` must be text")),
        };
        Ok(Some(Self {
            message,
            system_prompt,
        }))
    }
}

/// Parses a `context` answer: `{messages?}` (the new list for this model call).
pub fn context_result(value: Option<Value>) -> Result<Option<Vec<AgentMessage>>, ResultError> {
    let Some(Value::Object(map)) = value.filter(|value| !value.is_null()) else {
        return Ok(None);
    };
    match map.get("messages") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => Ok(Some(
            items
                .iter()
                .cloned()
                .map(AgentMessage::from_value)
                .collect(),
        )),
        Some(_) => Err(bad("context", "`messages` must be an array")),
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

/// What a `tool_call` handler decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolCallResult {
    /// Do not run the call.
    pub block: bool,
    /// Why (shown to the model).
    pub reason: Option<String>,
    /// Replacement arguments (the reference mutates `event.input` in place; across a process
    /// boundary the handler returns the new object). Not validated again.
    pub input: Option<Value>,
}

impl ToolCallResult {
    /// Parses `{block?, reason?, input?}`.
    pub fn from_json(value: Option<Value>) -> Result<Option<Self>, ResultError> {
        let Some(Value::Object(map)) = value.filter(|value| !value.is_null()) else {
            return Ok(None);
        };
        let reason = match map.get("reason") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(_) => return Err(bad("tool_call", "`reason` must be text")),
        };
        Ok(Some(Self {
            block: map.get("block").and_then(Value::as_bool).unwrap_or(false),
            reason,
            input: map.get("input").filter(|value| !value.is_null()).cloned(),
        }))
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

/// A partial rewrite of a tool result (each part optional, chained across handlers).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolResultChange {
    /// Replacement content.
    pub content: Option<Vec<ContentBlock>>,
    /// Replacement details.
    pub details: Option<Value>,
    /// Replacement error flag.
    pub is_error: Option<bool>,
}

impl ToolResultChange {
    /// Parses `{content?, details?, isError?}`.
    pub fn from_json(value: Option<Value>) -> Result<Option<Self>, ResultError> {
        let Some(Value::Object(map)) = value.filter(|value| !value.is_null()) else {
            return Ok(None);
        };
        let content = match map.get("content") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .cloned()
                    .map(ContentBlock::from_value)
                    .collect(),
            ),
            Some(_) => return Err(bad("tool_result", "`content` must be an array of blocks")),
        };
        let is_error = match map.get("isError") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(flag)) => Some(*flag),
            Some(_) => return Err(bad("tool_result", "`isError` must be a boolean")),
        };
        Ok(Some(Self {
            content,
            details: map.get("details").filter(|value| !value.is_null()).cloned(),
            is_error,
        }))
    }
}

/// Parses a `message_end` answer: `{message?}`.
pub fn message_end_result(value: Option<Value>) -> Result<Option<AgentMessage>, ResultError> {
    let Some(Value::Object(map)) = value.filter(|value| !value.is_null()) else {
        return Ok(None);
    };
    match map.get("message") {
        None | Some(Value::Null) => Ok(None),
        Some(message @ Value::Object(_)) => Ok(Some(AgentMessage::from_value(message.clone()))),
        Some(_) => Err(bad("message_end", "`message` must be an object")),
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

/// A `!command` result supplied by an extension (`{output, exitCode, cancelled, truncated,
/// fullOutputPath?}`).
#[derive(Clone, Debug, PartialEq)]
pub struct UserBashResult {
    /// The output to record.
    pub output: String,
    /// The exit code (`None`: killed or unknown).
    pub exit_code: Option<i64>,
    /// Whether it was cancelled.
    pub cancelled: bool,
    /// Whether the output was truncated.
    pub truncated: bool,
    /// Where the full output is.
    pub full_output_path: Option<String>,
}

impl UserBashResult {
    /// Parses `{result?: {...}}`; `{operations}` (a custom executor) cannot cross a process
    /// boundary and is refused.
    pub fn from_json(value: Option<Value>) -> Result<Option<Self>, ResultError> {
        let Some(Value::Object(map)) = value.filter(|value| !value.is_null()) else {
            return Ok(None);
        };
        if map.contains_key("operations") {
            return Err(bad(
                "user_bash",
                "`operations` (a custom executor) is not supported; return `result` instead",
            ));
        }
        let Some(result) = map.get("result").filter(|value| !value.is_null()) else {
            return Ok(None);
        };
        let Value::Object(result) = result else {
            return Err(bad("user_bash", "`result` must be an object"));
        };
        Ok(Some(Self {
            output: result
                .get("output")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            exit_code: result.get("exitCode").and_then(Value::as_i64),
            cancelled: result
                .get("cancelled")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            truncated: result
                .get("truncated")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            full_output_path: result
                .get("fullOutputPath")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }))
    }
}

/// Resource paths an extension contributes (`resources_discover`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourcePaths {
    /// Skill files or directories.
    pub skill_paths: Vec<String>,
    /// Prompt template files or directories.
    pub prompt_paths: Vec<String>,
    /// Theme paths (pi has no themes; kept for the record).
    pub theme_paths: Vec<String>,
}

impl ResourcePaths {
    /// Parses `{skillPaths?, promptPaths?, themePaths?}`.
    pub fn from_json(value: Option<Value>) -> Result<Option<Self>, ResultError> {
        let Some(Value::Object(map)) = value.filter(|value| !value.is_null()) else {
            return Ok(None);
        };
        let list = |key: &str| -> Result<Vec<String>, ResultError> {
            match map.get(key) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        item.as_str().map(str::to_owned).ok_or_else(|| {
                            bad("resources_discover", format!("`{key}` must hold strings"))
                        })
                    })
                    .collect(),
                Some(_) => Err(bad(
                    "resources_discover",
                    format!("`{key}` must be an array"),
                )),
            }
        };
        Ok(Some(Self {
            skill_paths: list("skillPaths")?,
            prompt_paths: list("promptPaths")?,
            theme_paths: list("themePaths")?,
        }))
    }
}

/// A summary supplied by an extension for compaction
/// (`{summary, firstKeptEntryId, tokensBefore, details?}`).
#[derive(Clone, Debug, PartialEq)]
pub struct CompactionOverride {
    /// The summary text.
    pub summary: String,
    /// The first entry kept after the summary.
    pub first_kept_entry_id: String,
    /// Context tokens before the compaction.
    pub tokens_before: u64,
    /// Extension data stored with the entry.
    pub details: Option<Value>,
}

/// A branch summary supplied by an extension for tree navigation (`{summary, details?}`).
#[derive(Clone, Debug, PartialEq)]
pub struct TreeSummary {
    /// The summary text.
    pub summary: String,
    /// Extension data stored with the entry.
    pub details: Option<Value>,
}

/// What a `session_before_*` handler returned (every field optional; which fields an event
/// honours is listed in the spec).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionBeforeResult {
    /// Cancel the operation.
    pub cancel: bool,
    /// `session_before_compact`: use this summary instead of generating one.
    pub compaction: Option<CompactionOverride>,
    /// `session_before_tree`: use this branch summary.
    pub summary: Option<TreeSummary>,
    /// `session_before_tree`: override the summariser instructions.
    pub custom_instructions: Option<String>,
    /// `session_before_tree`: whether the instructions replace the default prompt.
    pub replace_instructions: Option<bool>,
    /// `session_before_tree`: label for the summary (or target) entry.
    pub label: Option<String>,
}

impl SessionBeforeResult {
    /// Parses the answer of a `session_before_*` handler.
    pub fn from_json(
        event: &'static str,
        value: Option<Value>,
    ) -> Result<Option<Self>, ResultError> {
        let Some(Value::Object(map)) = value.filter(|value| !value.is_null()) else {
            return Ok(None);
        };
        let text = |key: &str| -> Result<Option<String>, ResultError> {
            match map.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) => Ok(Some(text.clone())),
                Some(_) => Err(bad(event, format!("`{key}` must be text"))),
            }
        };
        let compaction = match map.get("compaction") {
            None | Some(Value::Null) => None,
            Some(Value::Object(fields)) => {
                let summary = fields
                    .get("summary")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad(event, "`compaction.summary` must be text"))?;
                let first_kept = fields
                    .get("firstKeptEntryId")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad(event, "`compaction.firstKeptEntryId` must be text"))?;
                Some(CompactionOverride {
                    summary: summary.to_owned(),
                    first_kept_entry_id: first_kept.to_owned(),
                    tokens_before: fields
                        .get("tokensBefore")
                        .and_then(Value::as_u64)
                        .unwrap_or(0),
                    details: fields
                        .get("details")
                        .filter(|value| !value.is_null())
                        .cloned(),
                })
            }
            Some(_) => return Err(bad(event, "`compaction` must be an object")),
        };
        let summary = match map.get("summary") {
            None | Some(Value::Null) => None,
            Some(Value::Object(fields)) => Some(TreeSummary {
                summary: fields
                    .get("summary")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad(event, "`summary.summary` must be text"))?
                    .to_owned(),
                details: fields
                    .get("details")
                    .filter(|value| !value.is_null())
                    .cloned(),
            }),
            Some(_) => return Err(bad(event, "`summary` must be an object")),
        };
        Ok(Some(Self {
            cancel: map.get("cancel").and_then(Value::as_bool).unwrap_or(false),
            compaction,
            summary,
            custom_instructions: text("customInstructions")?,
            replace_instructions: map.get("replaceInstructions").and_then(Value::as_bool),
            label: text("label")?,
        }))
    }
}

impl CompactionOverride {
    /// The result object of `compaction_end` and `compact()`: `{summary, firstKeptEntryId,
    /// tokensBefore, details?}`.
    pub fn to_result_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("summary".into(), Value::from(self.summary.as_str()));
        map.insert(
            "firstKeptEntryId".into(),
            Value::from(self.first_kept_entry_id.as_str()),
        );
        map.insert("tokensBefore".into(), Value::from(self.tokens_before));
        if let Some(details) = &self.details {
            map.insert("details".into(), details.clone());
        }
        Value::Object(map)
    }

    /// The `compaction` entry to store for this summary (`fromHook: true`).
    pub fn to_entry(&self) -> crate::model::entry::CompactionEntry {
        crate::model::entry::CompactionEntry {
            summary: self.summary.clone(),
            first_kept_entry_id: Some(crate::model::ids::EntryId::new(
                self.first_kept_entry_id.as_str(),
            )),
            tokens_before: self.tokens_before,
            details: self.details.clone(),
            usage: None,
            from_hook: Some(true),
            system_message: None,
        }
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
    /// `agent_start`.
    AgentStart,
    /// `agent_end {messages}`.
    AgentEnd {
        /// The run's new messages.
        messages: Vec<AgentMessage>,
    },
    /// `turn_start {turnIndex, timestamp}`.
    TurnStart {
        /// 0-based turn of the run.
        turn_index: u64,
        /// Unix ms.
        timestamp: i64,
    },
    /// `turn_end {turnIndex, message, toolResults}`.
    TurnEnd {
        /// 0-based turn of the run.
        turn_index: u64,
        /// The turn's assistant message.
        message: AgentMessage,
        /// Its tool results.
        tool_results: Vec<AgentMessage>,
    },
    /// `message_start {message}`.
    MessageStart {
        /// The message.
        message: AgentMessage,
    },
    /// `message_update {message, assistantMessageEvent}`.
    MessageUpdate {
        /// The partial assistant message.
        message: Value,
        /// The stream event.
        assistant_message_event: Value,
    },
    /// `message_end {message}`.
    MessageEnd {
        /// The final message.
        message: AgentMessage,
    },
    /// `tool_execution_start {toolCallId, toolName, args}`.
    ToolExecutionStart {
        /// The call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The arguments as the model sent them.
        args: Value,
    },
    /// `tool_execution_update {toolCallId, toolName, args, partialResult}`.
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
    /// `tool_execution_end {toolCallId, toolName, result, isError}`.
    ToolExecutionEnd {
        /// The call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The result.
        result: ToolOutput,
        /// Whether it failed.
        is_error: bool,
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
            Self::AgentStart => "agent_start",
            Self::AgentEnd { .. } => "agent_end",
            Self::TurnStart { .. } => "turn_start",
            Self::TurnEnd { .. } => "turn_end",
            Self::MessageStart { .. } => "message_start",
            Self::MessageUpdate { .. } => "message_update",
            Self::MessageEnd { .. } => "message_end",
            Self::ToolExecutionStart { .. } => "tool_execution_start",
            Self::ToolExecutionUpdate { .. } => "tool_execution_update",
            Self::ToolExecutionEnd { .. } => "tool_execution_end",
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
            Self::Context { messages } | Self::AgentEnd { messages } => {
                put("messages", messages_json(messages));
            }
            Self::BeforeAgentStart(event) => return event.to_json(),
            Self::AgentStart => {}
            Self::TurnStart {
                turn_index,
                timestamp,
            } => {
                put("turnIndex", Value::from(*turn_index));
                put("timestamp", Value::from(*timestamp));
            }
            Self::TurnEnd {
                turn_index,
                message,
                tool_results,
            } => {
                put("turnIndex", Value::from(*turn_index));
                put("message", message.to_value());
                put("toolResults", messages_json(tool_results));
            }
            Self::MessageStart { message } | Self::MessageEnd { message } => {
                put("message", message.to_value());
            }
            Self::MessageUpdate {
                message,
                assistant_message_event,
            } => {
                put("message", message.clone());
                put("assistantMessageEvent", assistant_message_event.clone());
            }
            Self::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                put("toolCallId", Value::from(tool_call_id.as_str()));
                put("toolName", Value::from(tool_name.as_str()));
                put("args", args.clone());
            }
            Self::ToolExecutionUpdate {
                tool_call_id,
                tool_name,
                args,
                partial_result,
            } => {
                put("toolCallId", Value::from(tool_call_id.as_str()));
                put("toolName", Value::from(tool_name.as_str()));
                put("args", args.clone());
                put(
                    "partialResult",
                    crate::agent::event::tool_output_json(partial_result),
                );
            }
            Self::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
            } => {
                put("toolCallId", Value::from(tool_call_id.as_str()));
                put("toolName", Value::from(tool_name.as_str()));
                put("result", crate::agent::event::tool_output_json(result));
                put("isError", Value::from(*is_error));
            }
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
    use crate::agent::AgentEvent;

    #[test]
    fn input_results_parse_every_action_and_refuse_a_transform_without_text() {
        assert_eq!(InputAction::from_json(None), Ok(None));
        assert_eq!(InputAction::from_json(Some(Value::Null)), Ok(None));
        assert_eq!(
            InputAction::from_json(Some(json!({"action": "handled"}))),
            Ok(Some(InputAction::Handled))
        );
        assert_eq!(
            InputAction::from_json(Some(json!({"action": "transform", "text": "x"}))),
            Ok(Some(InputAction::Transform {
                text: "x".into(),
                images: None
            }))
        );
        assert!(InputAction::from_json(Some(json!({"action": "transform"}))).is_err());
        assert!(InputAction::from_json(Some(json!({"action": "explode"}))).is_err());
    }

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

    #[test]
    fn session_before_results_read_cancel_and_a_supplied_compaction() {
        let parsed = SessionBeforeResult::from_json(
            "session_before_compact",
            Some(json!({"compaction": {"summary": "S", "firstKeptEntryId": "abcd1234", "tokensBefore": 42}})),
        )
        .unwrap()
        .unwrap();
        assert!(!parsed.cancel);
        let compaction = parsed.compaction.unwrap();
        assert_eq!(compaction.summary, "S");
        assert_eq!(compaction.tokens_before, 42);
        assert!(
            SessionBeforeResult::from_json("session_before_compact", Some(json!({"cancel": true})))
                .unwrap()
                .unwrap()
                .cancel
        );
        assert!(
            SessionBeforeResult::from_json(
                "session_before_compact",
                Some(json!({"compaction": {"summary": 3}}))
            )
            .is_err()
        );
    }

    #[test]
    fn tool_result_changes_keep_only_what_was_given() {
        let change = ToolResultChange::from_json(Some(
            json!({"content": [{"type": "text", "text": "1  a"}]}),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(change.content.unwrap().len(), 1);
        assert!(change.details.is_none() && change.is_error.is_none());
        assert!(ToolResultChange::from_json(Some(json!({"isError": "yes"}))).is_err());
    }

    /// The agent events as the session hands them to extensions (`turn_index` and
    /// `timestamp` as the session counts them).
    fn as_extension_event(event: &AgentEvent, turn_index: u64, timestamp: i64) -> ExtensionEvent {
        match event {
            AgentEvent::AgentStart => ExtensionEvent::AgentStart,
            AgentEvent::AgentEnd { messages, .. } => ExtensionEvent::AgentEnd {
                messages: messages.clone(),
            },
            AgentEvent::TurnStart => ExtensionEvent::TurnStart {
                turn_index,
                timestamp,
            },
            AgentEvent::TurnEnd {
                message,
                tool_results,
            } => ExtensionEvent::TurnEnd {
                turn_index,
                message: message.clone(),
                tool_results: tool_results.clone(),
            },
            AgentEvent::MessageStart { message } => ExtensionEvent::MessageStart {
                message: message.clone(),
            },
            AgentEvent::MessageUpdate { .. } => {
                let mut json = event.to_json();
                ExtensionEvent::MessageUpdate {
                    message: json["message"].take(),
                    assistant_message_event: json["assistantMessageEvent"].take(),
                }
            }
            AgentEvent::MessageEnd { message } => ExtensionEvent::MessageEnd {
                message: message.clone(),
            },
            AgentEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => ExtensionEvent::ToolExecutionStart {
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.clone(),
                args: args.clone(),
            },
            AgentEvent::ToolExecutionUpdate {
                tool_call_id,
                tool_name,
                args,
                partial_result,
            } => ExtensionEvent::ToolExecutionUpdate {
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.clone(),
                args: args.clone(),
                partial_result: partial_result.clone(),
            },
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
                ..
            } => ExtensionEvent::ToolExecutionEnd {
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.clone(),
                result: result.clone(),
                is_error: *is_error,
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
        let event = ExtensionEvent::TurnStart {
            turn_index: 0,
            timestamp: 1,
        };
        assert!(EVENT_NAMES.contains(&event.name()));
        assert_eq!(
            event.to_json(),
            json!({"type": "turn_start", "turnIndex": 0, "timestamp": 1})
        );
    }
}
