//! Session headers and the nine entry types (`spec/session-format.md` §3–§5), plus unknown
//! types from newer versions.
//!
//! An [`Entry`] is a typed view of one stored line. Imported lines are never re-serialised
//! (their bytes are the payload); [`Entry::to_value`] is for entries this project creates and
//! writes the reference's key order with absent optional fields omitted.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::ids::{EntryId, SessionId};
use crate::model::lenient;
use crate::model::message::{AgentMessage, SystemMessage, Usage, UserContent};
use crate::support::json;

/// The current session file format version.
pub const CURRENT_VERSION: i64 = 3;

/// The first line of a session file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHeader {
    /// Format version; absent means 1.
    #[serde(
        default,
        deserialize_with = "lenient::opt_i64_any",
        skip_serializing_if = "Option::is_none"
    )]
    pub version: Option<i64>,
    /// Session id.
    pub id: SessionId,
    /// Creation time, ISO-8601 UTC with milliseconds.
    #[serde(default)]
    pub timestamp: String,
    /// Working directory of the session (`""` in old files that lack it).
    #[serde(default)]
    pub cwd: String,
    /// The session this one was forked or cloned from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SessionHeader {
    /// Returns a version-3 header.
    pub fn new(
        id: SessionId,
        timestamp: String,
        cwd: String,
        parent_session: Option<String>,
    ) -> Self {
        Self {
            version: Some(CURRENT_VERSION),
            id,
            timestamp,
            cwd,
            parent_session,
            extra: Map::new(),
        }
    }

    /// Parses a header line; `None` unless it is an object with `type: "session"` and a string
    /// `id` (the reference's validity rule).
    pub fn parse(line: &[u8]) -> Option<Self> {
        let value = json::parse_lenient(line).ok()?;
        Self::from_value(&value)
    }

    /// Builds a header from parsed JSON, with the same validity rule as [`Self::parse`].
    pub fn from_value(value: &Value) -> Option<Self> {
        let map = value.as_object()?;
        if map.get("type").and_then(Value::as_str) != Some("session") {
            return None;
        }
        map.get("id")?.as_str()?;
        let mut body = map.clone();
        body.shift_remove("type");
        // Non-string fields of a valid header are tolerated as the reference tolerates them.
        for key in ["timestamp", "cwd", "parentSession"] {
            if body.get(key).is_some_and(|field| !field.is_string()) {
                body.shift_remove(key);
            }
        }
        if body.get("version").is_some_and(|field| !field.is_number()) {
            body.shift_remove("version");
        }
        serde_json::from_value(Value::Object(body)).ok()
    }

    /// Returns the format version (absent means 1).
    pub fn version_or_default(&self) -> i64 {
        self.version.unwrap_or(1)
    }

    /// Serialises the header in the reference's key order.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".to_owned(), Value::from("session"));
        if let Some(version) = self.version {
            map.insert("version".to_owned(), Value::from(version));
        }
        map.insert("id".to_owned(), Value::from(self.id.as_str()));
        map.insert("timestamp".to_owned(), Value::from(self.timestamp.as_str()));
        map.insert("cwd".to_owned(), Value::from(self.cwd.as_str()));
        if let Some(parent) = &self.parent_session {
            map.insert("parentSession".to_owned(), Value::from(parent.as_str()));
        }
        for (key, value) in &self.extra {
            map.insert(key.clone(), value.clone());
        }
        Value::Object(map)
    }

    /// Returns the header as one JSON line (no newline), as the reference writes it.
    pub fn to_line(&self) -> String {
        json::to_js_string(&self.to_value())
    }
}

fn usage_value(usage: &Usage) -> Value {
    // Serialising a `Usage` into a Value cannot fail: every map key is a string.
    serde_json::to_value(usage).unwrap_or(Value::Null)
}

/// A model reference: provider and model id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRef {
    /// Provider name.
    pub provider: String,
    /// Model id within the provider.
    pub model_id: String,
}

/// A `compaction` entry's fields.
#[derive(Clone, Debug, PartialEq)]
pub struct CompactionEntry {
    /// Summary text, file lists included.
    pub summary: String,
    /// First entry whose message survives; absent when a v1 index did not resolve.
    pub first_kept_entry_id: Option<EntryId>,
    /// Context tokens before compacting.
    pub tokens_before: u64,
    /// `{readFiles, modifiedFiles}` for pi-generated summaries, anything for extensions.
    pub details: Option<Value>,
    /// Usage of the summary request (1.6.0).
    pub usage: Option<Usage>,
    /// True when an extension supplied the summary.
    pub from_hook: Option<bool>,
    /// The replayed prompt and tools at the boundary (1.6.0): the leading message of the
    /// compacted context.
    pub system_message: Option<SystemMessage>,
}

/// A `branch_summary` entry's fields.
#[derive(Clone, Debug, PartialEq)]
pub struct BranchSummaryEntry {
    /// The entry the abandoned branch hung from, or `root`.
    pub from_id: String,
    /// Summary text; empty summaries are ignored by the context.
    pub summary: String,
    /// `{readFiles, modifiedFiles}` for pi-generated summaries.
    pub details: Option<Value>,
    /// Usage of the summary request (1.6.0).
    pub usage: Option<Usage>,
    /// True when an extension supplied the summary.
    pub from_hook: Option<bool>,
}

/// A `usage` entry's fields (1.6.0): model-attributed usage that is no message and never in
/// the context (cache warming, …); it counts in the session's token and cost totals.
#[derive(Clone, Debug, PartialEq)]
pub struct UsageEntry {
    /// What the usage was for (`cache_warm`, …; unknown kinds are ordinary usage).
    pub kind: String,
    /// Provider name.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// Tokens and cost.
    pub usage: Usage,
    /// A note, when given.
    pub note: Option<String>,
}

/// A `context_edit` entry's fields (1.6.0): an append-only edit of an earlier entry's
/// contribution to the model context, on the branch it is appended to.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextEditEntry {
    /// The edited entry.
    pub target_id: Option<EntryId>,
    /// `Some(Value::Null)`: the target leaves the context; `Some({content})`: its content is
    /// replaced; `None`: the key is absent.
    pub replacement: Option<Value>,
}

/// What an entry is, by its `type`.
// Most entries are messages, so boxing the large variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum EntryKind {
    /// `message`: an agent message.
    Message(AgentMessage),
    /// `thinking_level_change`.
    ThinkingLevelChange {
        /// The new level (`off|minimal|low|medium|high|xhigh`, not validated on read).
        thinking_level: String,
    },
    /// `model_change`.
    ModelChange(ModelRef),
    /// `compaction`.
    Compaction(CompactionEntry),
    /// `branch_summary`.
    BranchSummary(BranchSummaryEntry),
    /// `usage` (1.6.0).
    Usage(UsageEntry),
    /// `context_edit` (1.6.0).
    ContextEdit(ContextEditEntry),
    /// `custom`: extension state, never in the context.
    Custom {
        /// Extension identifier.
        custom_type: String,
        /// Any JSON; `None` when the key is absent.
        data: Option<Value>,
    },
    /// `custom_message`: an extension message that is part of the context.
    CustomMessage {
        /// Extension identifier.
        custom_type: String,
        /// String or text/image blocks.
        content: UserContent,
        /// UI only.
        display: bool,
        /// Extension details, never sent to the model.
        details: Option<Value>,
    },
    /// `label`: sets (or clears, when absent or empty) the label of `target_id`.
    Label {
        /// The labelled entry.
        target_id: Option<EntryId>,
        /// The label; absent or empty clears.
        label: Option<String>,
    },
    /// `session_info`: sets the session name (the last one wins; empty clears).
    SessionInfo {
        /// The name as written.
        name: Option<String>,
    },
    /// A type this version does not know (or a known type whose shape does not parse).
    Unknown {
        /// The `type` string.
        type_name: String,
    },
}

impl EntryKind {
    /// Returns the entry kind as appended at `timestamp` (ISO): a compaction's checkpoint
    /// (`systemMessage`) carries the compaction's own time, as 1.6.0's `appendCompaction`
    /// writes it. Other kinds are unchanged.
    pub fn stamped(mut self, timestamp: &str) -> Self {
        if let Self::Compaction(compaction) = &mut self
            && let Some(system) = &mut compaction.system_message
            && let Some(ms) = crate::support::clock::ms_from_iso(timestamp)
        {
            system.timestamp = ms;
        }
        self
    }

    /// Returns the `type` string as written in JSON.
    pub fn type_name(&self) -> &str {
        match self {
            Self::Message(_) => "message",
            Self::ThinkingLevelChange { .. } => "thinking_level_change",
            Self::ModelChange(_) => "model_change",
            Self::Compaction(_) => "compaction",
            Self::BranchSummary(_) => "branch_summary",
            Self::Usage(_) => "usage",
            Self::ContextEdit(_) => "context_edit",
            Self::Custom { .. } => "custom",
            Self::CustomMessage { .. } => "custom_message",
            Self::Label { .. } => "label",
            Self::SessionInfo { .. } => "session_info",
            Self::Unknown { type_name } => type_name,
        }
    }
}

/// One entry line: base fields and its kind.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Entry id; `None` for a line without a string id (stored but not referenceable).
    pub id: Option<EntryId>,
    /// Parent id; `None` for a root.
    pub parent_id: Option<EntryId>,
    /// Append time, ISO-8601 UTC with milliseconds (empty when absent).
    pub timestamp: String,
    /// The typed content.
    pub kind: EntryKind,
    /// Fields this version does not know (for `Unknown`, every field but the base ones).
    pub extra: Map<String, Value>,
}

fn take_string(map: &mut Map<String, Value>, key: &str) -> Option<String> {
    match map.get(key) {
        Some(Value::String(_)) => match map.shift_remove(key) {
            Some(Value::String(text)) => Some(text),
            _ => None,
        },
        _ => None,
    }
}

fn take_present(map: &mut Map<String, Value>, key: &str) -> Option<Value> {
    map.shift_remove(key)
}

/// Takes `key` out of the map when `read` accepts its value; otherwise leaves it in place
/// (then it is written back as an unknown field).
fn take_typed<T>(
    map: &mut Map<String, Value>,
    key: &str,
    read: impl FnOnce(&Value) -> Option<T>,
) -> Option<T> {
    let typed = read(map.get(key)?)?;
    map.shift_remove(key);
    Some(typed)
}

fn usage_of(value: &Value) -> Option<Usage> {
    Usage::deserialize(value).ok()
}

fn number_as_u64(value: Option<Value>) -> u64 {
    match value {
        Some(Value::Number(number)) => u64::try_from(lenient::number_to_i64(&number)).unwrap_or(0),
        _ => 0,
    }
}

impl Entry {
    /// Parses one stored line (lenient about lone surrogates and invalid UTF-8).
    ///
    /// Returns `None` unless the line is an entry object: a JSON object whose `type` is a
    /// string other than `session`.
    pub fn parse(line: &[u8]) -> Option<Self> {
        let value = json::parse_lenient(line).ok()?;
        Self::from_value(value)
    }

    /// Builds an entry from parsed JSON, with the same rule as [`Self::parse`].
    pub fn from_value(value: Value) -> Option<Self> {
        let Value::Object(mut map) = value else {
            return None;
        };
        let type_name = match map.get("type") {
            Some(Value::String(type_name)) if type_name != "session" => type_name.clone(),
            _ => return None,
        };
        // Only a `custom_message` can fail to parse after fields were taken out of the map
        // (its content is read last); every other shape fails before touching it, so only
        // that type pays for a copy of the original.
        let original = (type_name == "custom_message").then(|| map.clone());
        map.shift_remove("type");
        let id = take_string(&mut map, "id").map(EntryId::from);
        let parent_id = match map.get("parentId") {
            Some(Value::String(_)) => take_string(&mut map, "parentId").map(EntryId::from),
            Some(Value::Null) => {
                map.shift_remove("parentId");
                None
            }
            _ => None,
        };
        let timestamp = take_string(&mut map, "timestamp").unwrap_or_default();
        let kind = match Self::parse_kind(&type_name, &mut map) {
            Some(kind) => kind,
            None => {
                // Keep every non-base field of a shape we could not read.
                let mut extra = original.unwrap_or(map);
                for key in ["type", "id", "parentId", "timestamp"] {
                    extra.shift_remove(key);
                }
                map = extra;
                EntryKind::Unknown { type_name }
            }
        };
        Some(Self {
            id,
            parent_id,
            timestamp,
            kind,
            extra: map,
        })
    }

    fn parse_kind(type_name: &str, map: &mut Map<String, Value>) -> Option<EntryKind> {
        let kind = match type_name {
            "message" => {
                let message = map.shift_remove("message")?;
                EntryKind::Message(AgentMessage::from_value(message))
            }
            "thinking_level_change" => EntryKind::ThinkingLevelChange {
                thinking_level: take_string(map, "thinkingLevel").unwrap_or_default(),
            },
            "model_change" => EntryKind::ModelChange(ModelRef {
                provider: take_string(map, "provider").unwrap_or_default(),
                model_id: take_string(map, "modelId").unwrap_or_default(),
            }),
            "compaction" => {
                // A checkpoint or usage that does not read as one is kept as an unknown field.
                let system_message =
                    take_typed(
                        map,
                        "systemMessage",
                        |value| match AgentMessage::from_value(value.clone()) {
                            AgentMessage::System(system) => Some(system),
                            _ => None,
                        },
                    );
                let usage = take_typed(map, "usage", usage_of);
                EntryKind::Compaction(CompactionEntry {
                    summary: take_string(map, "summary").unwrap_or_default(),
                    first_kept_entry_id: take_string(map, "firstKeptEntryId").map(EntryId::from),
                    tokens_before: number_as_u64(map.shift_remove("tokensBefore")),
                    details: take_present(map, "details"),
                    usage,
                    from_hook: map
                        .shift_remove("fromHook")
                        .and_then(|value| value.as_bool()),
                    system_message,
                })
            }
            "branch_summary" => {
                let usage = take_typed(map, "usage", usage_of);
                EntryKind::BranchSummary(BranchSummaryEntry {
                    from_id: take_string(map, "fromId").unwrap_or_default(),
                    summary: take_string(map, "summary").unwrap_or_default(),
                    details: take_present(map, "details"),
                    usage,
                    from_hook: map
                        .shift_remove("fromHook")
                        .and_then(|value| value.as_bool()),
                })
            }
            "usage" => EntryKind::Usage(UsageEntry {
                kind: take_string(map, "kind").unwrap_or_default(),
                provider: take_string(map, "provider").unwrap_or_default(),
                model: take_string(map, "model").unwrap_or_default(),
                usage: take_typed(map, "usage", usage_of).unwrap_or_default(),
                note: take_string(map, "note"),
            }),
            "context_edit" => EntryKind::ContextEdit(ContextEditEntry {
                target_id: take_string(map, "targetId").map(EntryId::from),
                replacement: take_present(map, "replacement"),
            }),
            "custom" => EntryKind::Custom {
                custom_type: take_string(map, "customType").unwrap_or_default(),
                data: take_present(map, "data"),
            },
            "custom_message" => EntryKind::CustomMessage {
                custom_type: take_string(map, "customType").unwrap_or_default(),
                content: match map.shift_remove("content") {
                    Some(content) => serde_json::from_value(content).ok()?,
                    None => UserContent::default(),
                },
                display: map
                    .shift_remove("display")
                    .and_then(|value| value.as_bool())
                    .unwrap_or(false),
                details: take_present(map, "details"),
            },
            "label" => EntryKind::Label {
                target_id: take_string(map, "targetId").map(EntryId::from),
                label: take_string(map, "label"),
            },
            "session_info" => EntryKind::SessionInfo {
                name: take_string(map, "name"),
            },
            _ => return None,
        };
        Some(kind)
    }

    /// Returns the entry's `type` string.
    pub fn type_name(&self) -> &str {
        self.kind.type_name()
    }

    /// Returns the message of a `message` entry.
    pub fn message(&self) -> Option<&AgentMessage> {
        match &self.kind {
            EntryKind::Message(message) => Some(message),
            EntryKind::ThinkingLevelChange { .. }
            | EntryKind::ModelChange(_)
            | EntryKind::Compaction(_)
            | EntryKind::BranchSummary(_)
            | EntryKind::Usage(_)
            | EntryKind::ContextEdit(_)
            | EntryKind::Custom { .. }
            | EntryKind::CustomMessage { .. }
            | EntryKind::Label { .. }
            | EntryKind::SessionInfo { .. }
            | EntryKind::Unknown { .. } => None,
        }
    }

    /// Serialises the entry in the reference's key order (for entries this project creates).
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        let put = |map: &mut Map<String, Value>, key: &str, value: Value| {
            map.insert(key.to_owned(), value);
        };
        let id_value = || match &self.id {
            Some(id) => Value::from(id.as_str()),
            None => Value::Null,
        };
        let parent_value = || match &self.parent_id {
            Some(id) => Value::from(id.as_str()),
            None => Value::Null,
        };
        let base = |map: &mut Map<String, Value>| {
            map.insert("type".to_owned(), Value::from(self.kind.type_name()));
            if self.id.is_some() {
                map.insert("id".to_owned(), id_value());
            }
            map.insert("parentId".to_owned(), parent_value());
            map.insert("timestamp".to_owned(), Value::from(self.timestamp.as_str()));
        };
        match &self.kind {
            EntryKind::Message(message) => {
                base(&mut map);
                put(&mut map, "message", message.to_value());
            }
            EntryKind::ThinkingLevelChange { thinking_level } => {
                base(&mut map);
                put(
                    &mut map,
                    "thinkingLevel",
                    Value::from(thinking_level.as_str()),
                );
            }
            EntryKind::ModelChange(model) => {
                base(&mut map);
                put(&mut map, "provider", Value::from(model.provider.as_str()));
                put(&mut map, "modelId", Value::from(model.model_id.as_str()));
            }
            EntryKind::Compaction(compaction) => {
                base(&mut map);
                put(
                    &mut map,
                    "summary",
                    Value::from(compaction.summary.as_str()),
                );
                if let Some(first_kept) = &compaction.first_kept_entry_id {
                    put(
                        &mut map,
                        "firstKeptEntryId",
                        Value::from(first_kept.as_str()),
                    );
                }
                put(
                    &mut map,
                    "tokensBefore",
                    Value::from(compaction.tokens_before),
                );
                if let Some(details) = &compaction.details {
                    put(&mut map, "details", details.clone());
                }
                if let Some(usage) = &compaction.usage {
                    put(&mut map, "usage", usage_value(usage));
                }
                if let Some(from_hook) = compaction.from_hook {
                    put(&mut map, "fromHook", Value::from(from_hook));
                }
                if let Some(system) = &compaction.system_message {
                    put(&mut map, "systemMessage", system.to_value());
                }
            }
            EntryKind::BranchSummary(summary) => {
                base(&mut map);
                put(&mut map, "fromId", Value::from(summary.from_id.as_str()));
                put(&mut map, "summary", Value::from(summary.summary.as_str()));
                if let Some(details) = &summary.details {
                    put(&mut map, "details", details.clone());
                }
                if let Some(usage) = &summary.usage {
                    put(&mut map, "usage", usage_value(usage));
                }
                if let Some(from_hook) = summary.from_hook {
                    put(&mut map, "fromHook", Value::from(from_hook));
                }
            }
            EntryKind::Usage(usage) => {
                base(&mut map);
                put(&mut map, "kind", Value::from(usage.kind.as_str()));
                put(&mut map, "provider", Value::from(usage.provider.as_str()));
                put(&mut map, "model", Value::from(usage.model.as_str()));
                put(&mut map, "usage", usage_value(&usage.usage));
                if let Some(note) = &usage.note {
                    put(&mut map, "note", Value::from(note.as_str()));
                }
            }
            EntryKind::ContextEdit(edit) => {
                base(&mut map);
                if let Some(target) = &edit.target_id {
                    put(&mut map, "targetId", Value::from(target.as_str()));
                }
                if let Some(replacement) = &edit.replacement {
                    put(&mut map, "replacement", replacement.clone());
                }
            }
            EntryKind::Custom { custom_type, data } => {
                put(&mut map, "type", Value::from("custom"));
                put(&mut map, "customType", Value::from(custom_type.as_str()));
                if let Some(data) = data {
                    put(&mut map, "data", data.clone());
                }
                if self.id.is_some() {
                    put(&mut map, "id", id_value());
                }
                put(&mut map, "parentId", parent_value());
                put(&mut map, "timestamp", Value::from(self.timestamp.as_str()));
            }
            EntryKind::CustomMessage {
                custom_type,
                content,
                display,
                details,
            } => {
                put(&mut map, "type", Value::from("custom_message"));
                put(&mut map, "customType", Value::from(custom_type.as_str()));
                put(
                    &mut map,
                    "content",
                    serde_json::to_value(content).unwrap_or(Value::Null),
                );
                put(&mut map, "display", Value::from(*display));
                if let Some(details) = details {
                    put(&mut map, "details", details.clone());
                }
                if self.id.is_some() {
                    put(&mut map, "id", id_value());
                }
                put(&mut map, "parentId", parent_value());
                put(&mut map, "timestamp", Value::from(self.timestamp.as_str()));
            }
            EntryKind::Label { target_id, label } => {
                base(&mut map);
                if let Some(target) = target_id {
                    put(&mut map, "targetId", Value::from(target.as_str()));
                }
                if let Some(label) = label {
                    put(&mut map, "label", Value::from(label.as_str()));
                }
            }
            EntryKind::SessionInfo { name } => {
                base(&mut map);
                if let Some(name) = name {
                    put(&mut map, "name", Value::from(name.as_str()));
                }
            }
            EntryKind::Unknown { .. } => base(&mut map),
        }
        for (key, value) in &self.extra {
            map.insert(key.clone(), value.clone());
        }
        Value::Object(map)
    }

    /// Returns the entry as one JSON line (no newline), as the reference writes it.
    pub fn to_line(&self) -> String {
        json::to_js_string(&self.to_value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(line: &str) -> Entry {
        let entry = Entry::parse(line.as_bytes()).unwrap();
        assert_eq!(entry.to_line(), line);
        entry
    }

    #[test]
    fn every_entry_type_round_trips_in_reference_key_order() {
        let lines = [
            r##"{"type":"model_change","id":"168bb115","parentId":null,"timestamp":"2025-05-28T09:00:00.000Z","provider":"anthropic","modelId":"claude-sonnet-4-5"}"##,
            r##"{"type":"thinking_level_change","id":"b8ba3a9e","parentId":"168bb115","timestamp":"2025-05-28T09:00:00.000Z","thinkingLevel":"medium"}"##,
            r##"{"type":"message","id":"555d79e2","parentId":"b8ba3a9e","timestamp":"2025-05-28T09:00:30.585Z","message":{"role":"user","content":"hello","timestamp":1748422830583}}"##,
            r##"{"type":"custom","customType":"ext-state","data":{"mode":"review"},"id":"191c1548","parentId":"74e2a173","timestamp":"2025-05-28T09:01:58.870Z"}"##,
            r##"{"type":"custom","customType":"ext-state","id":"191c1548","parentId":"74e2a173","timestamp":"2025-05-28T09:01:58.870Z"}"##,
            r##"{"type":"custom","customType":"ext-state","data":null,"id":"191c1548","parentId":"74e2a173","timestamp":"2025-05-28T09:01:58.870Z"}"##,
            r##"{"type":"custom_message","customType":"ext-note","content":"Reminder","display":true,"id":"4a3ad67c","parentId":"191c1548","timestamp":"2025-05-28T09:01:58.870Z"}"##,
            r##"{"type":"label","id":"019c9464","parentId":"4a3ad67c","timestamp":"2025-05-28T09:01:58.870Z","targetId":"555d79e2","label":"start"}"##,
            r##"{"type":"label","id":"019c9465","parentId":"4a3ad67c","timestamp":"2025-05-28T09:01:58.870Z","targetId":"555d79e2"}"##,
            r##"{"type":"session_info","id":"bd34ea68","parentId":"019c9464","timestamp":"2025-05-28T09:01:58.870Z","name":"Cart work"}"##,
            r##"{"type":"compaction","id":"3410f0f8","parentId":"e6b37eb7","timestamp":"2025-05-28T09:02:50.762Z","summary":"Goal: cart","firstKeptEntryId":"4def356e","tokensBefore":1834,"details":{"readFiles":[],"modifiedFiles":["src/cart.ts"]},"fromHook":false}"##,
            r##"{"type":"branch_summary","id":"4d15909e","parentId":"1cc9d0a0","timestamp":"2025-05-28T09:03:23.920Z","fromId":"1cc9d0a0","summary":"Summary","details":{"readFiles":["src/cart.ts"],"modifiedFiles":[]},"fromHook":false}"##,
            r##"{"type":"frobnicate","id":"aa","parentId":"bb","timestamp":"2025-05-28T09:03:23.920Z","payload":{"x":[1,2]}}"##,
        ];
        for line in lines {
            round_trip(line);
        }
    }

    #[test]
    fn non_entries_are_rejected() {
        assert!(Entry::parse(b"null").is_none());
        assert!(Entry::parse(b"[1]").is_none());
        assert!(Entry::parse(br#"{"type":"session","id":"x"}"#).is_none());
        assert!(Entry::parse(br#"{"type":3}"#).is_none());
        let entry = Entry::parse(br#"{"type":"message","message":{"role":"user"}}"#).unwrap();
        assert!(entry.id.is_none());
    }

    #[test]
    fn headers_follow_the_validity_rule() {
        let header = SessionHeader::parse(
            br#"{"type":"session","version":3,"id":"s1","timestamp":"2025-05-28T09:00:00.000Z","cwd":"/x"}"#,
        )
        .unwrap();
        assert_eq!(header.version_or_default(), 3);
        assert_eq!(
            header.to_line(),
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2025-05-28T09:00:00.000Z","cwd":"/x"}"#
        );
        assert!(SessionHeader::parse(br#"{"type":"session","id":5}"#).is_none());
        assert!(SessionHeader::parse(br#"{"type":"message","id":"x"}"#).is_none());
    }
}
