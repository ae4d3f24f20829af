//! What an extension's handler may answer (`spec/extensions-and-modes.md` §2): typed
//! results — an `input` action, `before_agent_start` messages and prompt, `context` and
//! `message_end` replacements, a `tool_call` decision, a `tool_result` change, a
//! `session_before_*` answer (cancel, a supplied compaction or branch summary), a `user_bash`
//! result, contributed resource paths — parsed leniently from the reference's JSON.
//!
//! Invariants: a parser never panics; it turns a malformed answer into [`ResultError`] (which
//! the bus reports as an `extension_error`), and an absent or `null` answer into "no result".

use serde_json::{Map, Value};

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
}
