//! The reference's `buildSessionContext`, as pure functions over the rows of a leaf path
//! (`spec/context-building.md` §1).
//!
//! The store's SQL walks the path and fetches only the payloads that matter; these functions
//! apply the compaction rule and the message mapping. Messages are produced as JSON text: a
//! `message` entry contributes its stored `message` bytes unchanged, so nothing a provider
//! wrote (unknown fields, signatures, number spelling, lone surrogates) is lost on the way.
//!
//! Invariant: no I/O here.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::model::ModelRef;
use crate::model::message::AgentMessage;
use crate::support::clock::ms_from_iso;
use crate::support::json;

/// One entry of a path, as the context needs it.
#[derive(Debug, Clone)]
pub struct PathRow {
    /// Append sequence in the session.
    pub seq: i64,
    /// Entry id (absent for a line without a string id).
    pub id: Option<String>,
    /// The `type` string.
    pub type_name: String,
    /// The stored line; fetched only for the types that contribute to the context.
    pub payload: Option<Vec<u8>>,
    /// What the derived path state knows of the entry (`FLAG_*`), or `None` to read it from
    /// the payload.
    pub flags: Option<i64>,
}

/// `entry_path.flags` bit: a `message` entry holding a system message.
pub const FLAG_SYSTEM: i64 = 1;
/// `entry_path.flags` bit: a `message` entry whose message has no content (null or absent).
pub const FLAG_NO_CONTENT: i64 = 2;

/// The `entry_path.flags` of an entry, from its type and payload.
pub fn flags_of(type_name: &str, payload: &[u8]) -> i64 {
    if type_name != "message" {
        return 0;
    }
    let view = MessageView::of(payload);
    let mut flags = 0;
    if view.is_system() {
        flags |= FLAG_SYSTEM;
    }
    if view.no_content {
        flags |= FLAG_NO_CONTENT;
    }
    flags
}

/// Whether the context needs the payload of an entry of this type for its messages.
pub fn needs_payload_for_messages(type_name: &str) -> bool {
    matches!(
        type_name,
        "message" | "custom_message" | "branch_summary" | "compaction" | "context_edit"
    )
}

/// Whether the settings scan needs the payload of an entry of this type.
pub fn needs_payload_for_settings(type_name: &str) -> bool {
    matches!(
        type_name,
        "message" | "model_change" | "thinking_level_change" | "compaction"
    )
}

/// The reference `SessionContext`, with messages as JSON text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionContext {
    /// Each message as JSON text (an `AgentMessage`, synthetic roles included).
    pub messages: Vec<String>,
    /// The append sequence of the entry each message came from (parallel to `messages`).
    pub sources: Vec<i64>,
    /// The thinking level (`off` when no `thinking_level_change` is on the path).
    pub thinking_level: String,
    /// Whether a `thinking_level_change` is on the path (the reference restores the level on
    /// load only then).
    pub has_thinking_entry: bool,
    /// The last `model_change` or assistant message on the path, as a JSON object
    /// `{provider, modelId}` (fields the entry lacked are absent), or `None`.
    pub model: Option<Value>,
}

impl SessionContext {
    /// Returns the empty context: no messages, thinking `off`, no model.
    pub fn empty() -> Self {
        Self {
            messages: Vec::new(),
            sources: Vec::new(),
            thinking_level: "off".to_owned(),
            has_thinking_entry: false,
            model: None,
        }
    }

    /// Returns the messages as typed values.
    pub fn agent_messages(&self) -> Vec<AgentMessage> {
        self.messages
            .iter()
            .map(|text| match json::parse_lenient(text.as_bytes()) {
                Ok(value) => AgentMessage::from_value(value),
                Err(_) => AgentMessage::Unknown(Value::Null),
            })
            .collect()
    }

    /// Returns the model as a typed reference when both fields are strings.
    pub fn model_ref(&self) -> Option<ModelRef> {
        let model = self.model.as_ref()?;
        Some(ModelRef {
            provider: model.get("provider")?.as_str()?.to_owned(),
            model_id: model.get("modelId")?.as_str()?.to_owned(),
        })
    }

    /// Writes the JSON of `{messages, thinkingLevel, model}` (as [`Self::to_json`]) without
    /// building it in memory first.
    pub fn write_json(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        out.write_all(b"{\"messages\":[")?;
        for (idx, message) in self.messages.iter().enumerate() {
            if idx > 0 {
                out.write_all(b",")?;
            }
            out.write_all(message.as_bytes())?;
        }
        let mut tail = String::from("],\"thinkingLevel\":");
        json::write_string(&mut tail, &self.thinking_level);
        tail.push_str(",\"model\":");
        match &self.model {
            Some(model) => json::write_value(&mut tail, model),
            None => tail.push_str("null"),
        }
        tail.push('}');
        out.write_all(tail.as_bytes())
    }

    /// Returns the JSON text of `{messages, thinkingLevel, model}` (the reference shape).
    pub fn to_json(&self) -> String {
        let mut out =
            String::with_capacity(64 + self.messages.iter().map(String::len).sum::<usize>());
        out.push_str("{\"messages\":[");
        for (idx, message) in self.messages.iter().enumerate() {
            if idx > 0 {
                out.push(',');
            }
            out.push_str(message);
        }
        out.push_str("],\"thinkingLevel\":");
        json::write_string(&mut out, &self.thinking_level);
        out.push_str(",\"model\":");
        match &self.model {
            Some(model) => json::write_value(&mut out, model),
            None => out.push_str("null"),
        }
        out.push('}');
        out
    }
}

/// Model and thinking level derived from a path.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PathSettings {
    /// The last thinking level on the path, if any.
    pub thinking_level: Option<String>,
    /// The last model on the path, if any (as `{provider, modelId}`).
    pub model: Option<Value>,
}

fn parse_value(payload: &[u8]) -> Option<Value> {
    json::parse_lenient(payload).ok()
}

/// Returns the model an entry sets (`model_change`, or an assistant `message`), if any.
pub fn model_of(type_name: &str, payload: &[u8]) -> Option<Value> {
    let value = parse_value(payload)?;
    let (provider, model_id) = match type_name {
        "model_change" => (value.get("provider"), value.get("modelId")),
        "message" => {
            let message = value.get("message")?;
            if message.get("role").and_then(Value::as_str) != Some("assistant") {
                return None;
            }
            (message.get("provider"), message.get("model"))
        }
        _ => return None,
    };
    let mut map = Map::new();
    if let Some(provider) = provider {
        map.insert("provider".to_owned(), provider.clone());
    }
    if let Some(model_id) = model_id {
        map.insert("modelId".to_owned(), model_id.clone());
    }
    Some(Value::Object(map))
}

/// Returns the thinking level a `thinking_level_change` payload sets.
pub fn thinking_of(payload: &[u8]) -> Option<String> {
    let value = parse_value(payload)?;
    match value.get("thinkingLevel") {
        Some(Value::String(level)) => Some(level.clone()),
        Some(other) => Some(json::to_js_string(other)),
        None => Some(String::new()),
    }
}

/// Scans a whole path (root → leaf) for its model and thinking level, last writer wins.
pub fn scan_settings(path: &[PathRow]) -> PathSettings {
    let mut settings = PathSettings::default();
    for row in path {
        let Some(payload) = &row.payload else {
            continue;
        };
        match row.type_name.as_str() {
            "thinking_level_change" => settings.thinking_level = thinking_of(payload),
            "model_change" | "message" => {
                if let Some(model) = model_of(&row.type_name, payload) {
                    settings.model = Some(model);
                }
            }
            _ => {}
        }
    }
    settings
}

#[derive(Deserialize)]
struct MessageField<'a> {
    #[serde(borrow)]
    message: Option<&'a RawValue>,
}

/// The payload as text: borrowed when it is UTF-8 (checked quickly), else with replacement
/// characters.
fn utf8(payload: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(payload) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(payload),
    }
}

/// Returns the JSON text of a `message` entry's `message` field, byte for byte.
fn message_text(payload: &[u8]) -> String {
    let text = utf8(payload);
    match serde_json::from_str::<MessageField<'_>>(&text) {
        Ok(MessageField { message: Some(raw) }) => raw.get().to_owned(),
        Ok(MessageField { message: None }) => "null".to_owned(),
        Err(_) => match parse_value(payload) {
            Some(value) => json::to_js_string(value.get("message").unwrap_or(&Value::Null)),
            None => "null".to_owned(),
        },
    }
}

/// [`message_text`] of a payload the caller gives up: the message's bytes are cut out of the
/// payload's own buffer (a context of megabytes is not copied once more).
fn message_text_owned(payload: Vec<u8>) -> String {
    let range = std::str::from_utf8(&payload).ok().and_then(|text| {
        match serde_json::from_str::<MessageField<'_>>(text) {
            Ok(MessageField { message: Some(raw) }) => {
                let start = (raw.get().as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
                let end = start.checked_add(raw.get().len())?;
                (end <= text.len()).then_some(start..end)
            }
            _ => None,
        }
    });
    match range {
        Some(range) => {
            let mut bytes = payload;
            bytes.truncate(range.end);
            bytes.drain(..range.start);
            String::from_utf8(bytes)
                .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
        }
        None => message_text(&payload),
    }
}

/// `new Date(timestamp).getTime()`: milliseconds, or `null` (NaN) when unparseable.
fn timestamp_ms(entry: &Value) -> Value {
    entry
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(ms_from_iso)
        .map_or(Value::Null, Value::from)
}

fn copy_field(map: &mut Map<String, Value>, entry: &Value, key: &str) {
    if let Some(value) = entry.get(key) {
        map.insert(key.to_owned(), value.clone());
    }
}

#[derive(Deserialize)]
struct MessagePeek<'a> {
    #[serde(default)]
    role: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
}

/// A `message` entry's message: its JSON text (byte for byte), its role, and whether it has
/// no content (`content == null`: null or absent).
struct MessageView {
    text: String,
    role: Option<String>,
    no_content: bool,
}

impl MessageView {
    /// Reads a `message` entry's payload, with what the path state knows of it: the payload is
    /// scanned once; without flags, the message is scanned a second time for its role.
    fn of_row(payload: &[u8], flags: Option<i64>) -> Self {
        let Some(flags) = flags else {
            return Self::of(payload);
        };
        let system = flags & FLAG_SYSTEM != 0;
        let no_content = flags & FLAG_NO_CONTENT != 0;
        let text = message_text(payload);
        if no_content && !system {
            // The role decides what a missing content becomes: read it.
            return Self::of(payload);
        }
        Self {
            text,
            role: system.then(|| "system".to_owned()),
            no_content,
        }
    }

    /// [`Self::of_row`] of a payload the caller gives up (its buffer becomes the text).
    fn of_owned(payload: Vec<u8>, flags: Option<i64>) -> Self {
        match flags {
            Some(flags) if flags & FLAG_NO_CONTENT == 0 => Self {
                role: (flags & FLAG_SYSTEM != 0).then(|| "system".to_owned()),
                text: message_text_owned(payload),
                no_content: false,
            },
            _ => Self::of_row(&payload, flags),
        }
    }

    /// Reads a `message` entry's payload (the payload once, then the message once).
    fn of(payload: &[u8]) -> Self {
        let text = message_text(payload);
        let (role, no_content) = match serde_json::from_str::<MessagePeek<'_>>(&text) {
            Ok(peek) => (
                peek.role.map(std::borrow::Cow::into_owned),
                peek.content.is_none_or(|raw| raw.get() == "null"),
            ),
            Err(_) => (None, false),
        };
        Self {
            text,
            role,
            no_content,
        }
    }

    fn is_system(&self) -> bool {
        self.role.as_deref() == Some("system")
    }

    /// The message as the context has it (1.6.0 `sessionEntryToContextMessages`): a message
    /// without content gets `""` (system) or `[]` (user, assistant, tool result).
    fn into_message(self) -> String {
        if !self.no_content {
            return self.text;
        }
        let content = match self.role.as_deref() {
            Some("system") => Value::from(""),
            Some("user" | "assistant" | "toolResult") => Value::Array(Vec::new()),
            _ => return self.text,
        };
        with_content(&self.text, content)
    }
}

/// `{...message, content}`: the content replaced in place, or added last when absent.
fn with_content(message: &str, content: Value) -> String {
    match json::parse_lenient(message.as_bytes()) {
        Ok(Value::Object(mut map)) => {
            map.insert("content".to_owned(), content);
            json::to_js_string(&Value::Object(map))
        }
        _ => message.to_owned(),
    }
}

/// Returns the messages an entry contributes to the context, as JSON text (1.6.0
/// `sessionEntryToContextMessages`): a `message` entry's stored message (null content
/// normalised), a custom message, a non-empty branch summary, or a compaction's checkpoint
/// (`systemMessage`, when present) followed by its summary.
pub fn entry_messages(row: &PathRow) -> Vec<String> {
    let Some(payload) = row.payload.as_deref() else {
        return Vec::new();
    };
    match row.type_name.as_str() {
        "message" => vec![MessageView::of_row(payload, row.flags).into_message()],
        "custom_message" => {
            let Some(entry) = parse_value(payload) else {
                return Vec::new();
            };
            let mut map = Map::new();
            map.insert("role".to_owned(), Value::from("custom"));
            copy_field(&mut map, &entry, "customType");
            // `entry.content ?? []`
            let content = match entry.get("content") {
                None | Some(Value::Null) => Value::Array(Vec::new()),
                Some(content) => content.clone(),
            };
            map.insert("content".to_owned(), content);
            copy_field(&mut map, &entry, "display");
            copy_field(&mut map, &entry, "details");
            map.insert("timestamp".to_owned(), timestamp_ms(&entry));
            vec![json::to_js_string(&Value::Object(map))]
        }
        "branch_summary" => {
            let Some(entry) = parse_value(payload) else {
                return Vec::new();
            };
            let Some(summary) = entry.get("summary").filter(|summary| truthy(summary)) else {
                return Vec::new();
            };
            let mut map = Map::new();
            map.insert("role".to_owned(), Value::from("branchSummary"));
            map.insert("summary".to_owned(), summary.clone());
            copy_field(&mut map, &entry, "fromId");
            map.insert("timestamp".to_owned(), timestamp_ms(&entry));
            vec![json::to_js_string(&Value::Object(map))]
        }
        "compaction" => {
            let compaction = compaction_fields(payload);
            let mut out = Vec::with_capacity(2);
            out.extend(compaction.system_message);
            out.push(compaction.summary);
            out
        }
        _ => Vec::new(),
    }
}

/// JavaScript truthiness of a JSON value.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64().is_some_and(|float| float != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// What the context needs of a `compaction` entry.
struct CompactionFields {
    /// The summary message, as JSON text.
    summary: String,
    /// `firstKeptEntryId`, when it is a string.
    first_kept: Option<String>,
    /// The checkpoint (`systemMessage`, when truthy), as JSON text.
    system_message: Option<String>,
}

#[derive(Deserialize)]
struct CheckpointField<'a> {
    #[serde(default, borrow, rename = "systemMessage")]
    system_message: Option<&'a RawValue>,
}

fn compaction_fields(payload: &[u8]) -> CompactionFields {
    let Some(entry) = parse_value(payload) else {
        return CompactionFields {
            summary: "null".to_owned(),
            first_kept: None,
            system_message: None,
        };
    };
    let mut map = Map::new();
    map.insert("role".to_owned(), Value::from("compactionSummary"));
    copy_field(&mut map, &entry, "summary");
    copy_field(&mut map, &entry, "tokensBefore");
    map.insert("timestamp".to_owned(), timestamp_ms(&entry));
    let first_kept = entry
        .get("firstKeptEntryId")
        .and_then(Value::as_str)
        .map(str::to_owned);
    // The checkpoint's bytes as stored (the raw field), when the value is truthy.
    let system_message = entry
        .get("systemMessage")
        .filter(|value| truthy(value))
        .map(|value| {
            let text = utf8(payload);
            match serde_json::from_str::<CheckpointField<'_>>(&text) {
                Ok(CheckpointField {
                    system_message: Some(raw),
                }) => raw.get().to_owned(),
                _ => json::to_js_string(value),
            }
        });
    CompactionFields {
        summary: json::to_js_string(&Value::Object(map)),
        first_kept,
        system_message,
    }
}

/// A `context_edit` entry's fields.
struct ContextEdit {
    /// `replacement`: `None` when the key is absent (such an edit is not applied: the
    /// reference fails on it), `Some(Null)` omits the target.
    replacement: Option<Value>,
}

/// Returns the target (`targetId`: `None` when absent or not a string, which matches entries
/// without an id, as JavaScript's `Map.get(undefined)` does) and the edit of a `context_edit`.
fn context_edit(payload: &[u8]) -> Option<(Option<String>, ContextEdit)> {
    let Value::Object(mut map) = parse_value(payload)? else {
        return None;
    };
    let target = match map.shift_remove("targetId") {
        Some(Value::String(target)) => Some(target),
        _ => None,
    };
    let replacement = map.shift_remove("replacement");
    Some((target, ContextEdit { replacement }))
}

/// Applies an edit to the messages of its target (1.6.0 `projectContextEntry`): `null` omits
/// them; otherwise the content of user, assistant, tool-result and custom messages is replaced
/// (a string becomes one text block for assistant and tool-result messages), other roles are
/// kept.
fn apply_edit(messages: Vec<String>, edit: &ContextEdit) -> Vec<String> {
    let Some(replacement) = &edit.replacement else {
        return messages;
    };
    if replacement.is_null() {
        return Vec::new();
    }
    // `replacement.content`: undefined (dropped by JSON.stringify) unless an object has it.
    let content = replacement.get("content");
    messages
        .into_iter()
        .map(|message| {
            let Ok(Value::Object(mut map)) = json::parse_lenient(message.as_bytes()) else {
                return message;
            };
            let role = map.get("role").and_then(Value::as_str).unwrap_or("");
            let text_block = match role {
                "assistant" | "toolResult" => true,
                "user" | "custom" => false,
                _ => return message,
            };
            match content {
                None => {
                    map.shift_remove("content");
                }
                Some(Value::String(text)) if text_block => {
                    let mut block = Map::new();
                    block.insert("type".to_owned(), Value::from("text"));
                    block.insert("text".to_owned(), Value::from(text.as_str()));
                    map.insert(
                        "content".to_owned(),
                        Value::Array(vec![Value::Object(block)]),
                    );
                }
                Some(content) => {
                    map.insert("content".to_owned(), content.clone());
                }
            }
            json::to_js_string(&Value::Object(map))
        })
        .collect()
}

/// Builds the context from a path (root → leaf, or a tail of it that starts at or before the
/// last compaction's first kept entry) and the path's settings, as 1.6.0's
/// `buildSessionProjection`:
///
/// 1. With a compaction on the path, the last one leads (its checkpoint and summary), followed
///    by the entries from its `firstKeptEntryId` up to it (system messages excepted: the
///    checkpoint replaces them) and every entry after it; an older compaction among them
///    contributes nothing. A retain-none compaction names itself as first kept entry, so
///    nothing before it is kept.
/// 2. The latest `context_edit` among those entries, per target, is applied to the target's
///    messages; edits elsewhere (other branches, the summarised part) do nothing.
pub fn build(mut path: Vec<PathRow>, settings: PathSettings) -> SessionContext {
    let projected = project(&mut path);
    let mut messages = Vec::new();
    let mut sources = Vec::new();
    for entry in projected {
        let seq = path[entry.index].seq;
        for message in entry.messages {
            messages.push(message);
            sources.push(seq);
        }
    }
    SessionContext {
        messages,
        sources,
        has_thinking_entry: settings.thinking_level.is_some(),
        thinking_level: settings.thinking_level.unwrap_or_else(|| "off".to_owned()),
        model: settings.model,
    }
}

/// One entry of a projection (1.6.0 `ProjectedSessionEntry`): where it is on the path and the
/// messages it gives the context, after edits (none for an omitted target, a metadata entry
/// or an older compaction inside the kept range).
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectedEntry {
    /// Index of the source entry in the path given to [`project`].
    pub index: usize,
    /// Its messages as JSON text.
    pub messages: Vec<String>,
}

/// 1.6.0's `buildSessionProjection().entries` over a path (the rule of [`build`]): the
/// selected entries in context order, the leading compaction first. Message payloads are
/// moved out of `path` (the rows keep their other fields).
pub fn project(path: &mut [PathRow]) -> Vec<ProjectedEntry> {
    // The selected entries: indexes into `path`, the leading compaction first. Messages of the
    // kept range are read while selecting (to drop system messages) and kept for the output.
    let mut selected: Vec<usize> = Vec::with_capacity(path.len());
    let mut read_views: HashMap<usize, MessageView> = HashMap::new();
    let mut head_compaction = None;
    match path.iter().rposition(|row| row.type_name == "compaction") {
        Some(last_idx) => {
            let compaction = &path[last_idx];
            // `path.findIndex((entry) => entry.id === compaction.id)`: the first entry with
            // that id, of any type; on a path ids are unique unless lines repeat them.
            let idx = path
                .iter()
                .position(|row| row.id == compaction.id)
                .unwrap_or(last_idx);
            let fields = compaction_fields(compaction.payload.as_deref().unwrap_or(b"{}"));
            selected.push(last_idx);
            head_compaction = Some((last_idx, fields));
            let first_kept = head_compaction
                .as_ref()
                .and_then(|(_, fields)| fields.first_kept.clone());
            let mut found_first_kept = false;
            for (row_idx, row) in path[..idx].iter().enumerate() {
                if row.id == first_kept {
                    found_first_kept = true;
                }
                if !found_first_kept {
                    continue;
                }
                if row.type_name == "message" {
                    match row.flags {
                        Some(flags) if flags & FLAG_SYSTEM != 0 => continue,
                        Some(_) => {}
                        None => {
                            if let Some(payload) = row.payload.as_deref() {
                                let view = MessageView::of(payload);
                                if view.is_system() {
                                    continue;
                                }
                                read_views.insert(row_idx, view);
                            }
                        }
                    }
                }
                selected.push(row_idx);
            }
            selected.extend(idx + 1..path.len());
        }
        None => selected.extend(0..path.len()),
    }

    // The latest edit per target among the selected entries.
    let mut edits: HashMap<Option<String>, ContextEdit> = HashMap::new();
    for &idx in &selected {
        let row = &path[idx];
        if row.type_name != "context_edit" {
            continue;
        }
        if let Some((target, edit)) = row.payload.as_deref().and_then(context_edit)
            && edit.replacement.is_some()
        {
            edits.insert(target, edit);
        }
    }

    let mut out = Vec::with_capacity(selected.len());
    for (position, &idx) in selected.iter().enumerate() {
        let row = &mut path[idx];
        let produced = match &head_compaction {
            Some((head_idx, fields)) if position == 0 && *head_idx == idx => {
                let mut out = Vec::with_capacity(2);
                out.extend(fields.system_message.clone());
                out.push(fields.summary.clone());
                out
            }
            // An older compaction inside the kept range contributes nothing.
            _ if row.type_name == "compaction" => Vec::new(),
            _ => match read_views.remove(&idx) {
                Some(view) => vec![view.into_message()],
                None if row.type_name == "message" => match row.payload.take() {
                    Some(payload) => vec![MessageView::of_owned(payload, row.flags).into_message()],
                    None => Vec::new(),
                },
                None => entry_messages(row),
            },
        };
        let produced = match edits.get(&row.id) {
            Some(edit) if !produced.is_empty() => apply_edit(produced, edit),
            _ => produced,
        };
        out.push(ProjectedEntry {
            index: idx,
            messages: produced,
        });
    }
    out
}

/// Returns the message of a `message` entry holding a system message, as JSON text (null
/// content normalised), or `None` for any other entry.
pub fn system_message_text(row: &PathRow) -> Option<String> {
    if !is_system_message(row) {
        return None;
    }
    entry_messages(row).into_iter().next()
}

#[derive(Deserialize)]
struct RolePeek<'a> {
    #[serde(default, borrow)]
    message: Option<RoleOnly<'a>>,
}

#[derive(Deserialize)]
struct RoleOnly<'a> {
    #[serde(default, borrow)]
    role: Option<std::borrow::Cow<'a, str>>,
}

/// Whether a row is a `message` entry holding a system message.
fn is_system_message(row: &PathRow) -> bool {
    if row.type_name != "message" {
        return false;
    }
    let Some(payload) = row.payload.as_deref() else {
        return false;
    };
    let text = utf8(payload);
    serde_json::from_str::<RolePeek<'_>>(&text)
        .ok()
        .and_then(|peek| peek.message)
        .and_then(|message| message.role)
        .is_some_and(|role| role == "system")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: i64, id: &str, type_name: &str, payload: &str) -> PathRow {
        PathRow {
            seq,
            id: Some(id.to_owned()),
            type_name: type_name.to_owned(),
            payload: Some(payload.as_bytes().to_vec()),
            flags: None,
        }
    }

    fn user(seq: i64, id: &str, text: &str) -> PathRow {
        row(
            seq,
            id,
            "message",
            &format!(
                r#"{{"type":"message","id":"{id}","message":{{"role":"user","content":"{text}","timestamp":{seq}}}}}"#
            ),
        )
    }

    #[test]
    fn compaction_keeps_from_first_kept_and_skips_earlier_compactions() {
        let path = vec![
            user(0, "u1", "one"),
            user(1, "u2", "two"),
            row(
                2,
                "c1",
                "compaction",
                r#"{"summary":"s1","firstKeptEntryId":"u2","tokensBefore":5,"timestamp":"2025-01-01T00:00:00.000Z"}"#,
            ),
            user(3, "u3", "three"),
            row(
                4,
                "c2",
                "compaction",
                r#"{"summary":"s2","firstKeptEntryId":"u2","tokensBefore":9,"timestamp":"2025-01-01T00:00:01.000Z"}"#,
            ),
            user(5, "u4", "four"),
        ];
        let context = build(path, PathSettings::default());
        assert_eq!(
            context.messages,
            vec![
                r#"{"role":"compactionSummary","summary":"s2","tokensBefore":9,"timestamp":1735689601000}"#.to_owned(),
                r#"{"role":"user","content":"two","timestamp":1}"#.to_owned(),
                r#"{"role":"user","content":"three","timestamp":3}"#.to_owned(),
                r#"{"role":"user","content":"four","timestamp":5}"#.to_owned(),
            ]
        );
        assert_eq!(context.thinking_level, "off");
        assert!(!context.has_thinking_entry);
    }

    #[test]
    fn missing_first_kept_emits_only_summary_and_later_entries() {
        let path = vec![
            user(0, "u1", "one"),
            row(
                1,
                "c1",
                "compaction",
                r#"{"summary":"s","firstKeptEntryId":"zz","tokensBefore":5,"timestamp":"x"}"#,
            ),
            user(2, "u2", "two"),
        ];
        let context = build(path, PathSettings::default());
        assert_eq!(context.messages.len(), 2);
        assert!(context.messages[0].contains(r#""timestamp":null"#));
    }

    #[test]
    fn settings_take_the_last_writer_on_the_path() {
        let path = vec![
            row(0, "m", "model_change", r#"{"provider":"a","modelId":"x"}"#),
            row(
                1,
                "t",
                "thinking_level_change",
                r#"{"thinkingLevel":"high"}"#,
            ),
            row(
                2,
                "a",
                "message",
                r#"{"message":{"role":"assistant","provider":"b","model":"y"}}"#,
            ),
        ];
        let settings = scan_settings(&path);
        assert_eq!(settings.thinking_level.as_deref(), Some("high"));
        assert_eq!(
            settings.model,
            Some(serde_json::json!({"provider":"b","modelId":"y"}))
        );
    }

    #[test]
    fn empty_branch_summaries_are_skipped() {
        let path = vec![
            row(
                0,
                "b1",
                "branch_summary",
                r#"{"summary":"","fromId":"root","timestamp":"2025-01-01T00:00:00.000Z"}"#,
            ),
            row(
                1,
                "b2",
                "branch_summary",
                r#"{"summary":"s","fromId":"root","timestamp":"2025-01-01T00:00:00.000Z"}"#,
            ),
        ];
        let context = build(path, PathSettings::default());
        assert_eq!(
            context.messages,
            vec![r#"{"role":"branchSummary","summary":"s","fromId":"root","timestamp":1735689600000}"#.to_owned()]
        );
    }
}
