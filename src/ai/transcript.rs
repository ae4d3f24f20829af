//! The transcript model of 1.6.0: the system prompt and the tool loadout travel as system
//! messages inside the conversation (`utils/transcript.js` and the system-message part of
//! `utils/text.js` of `@earendil-works/pi-ai` 1.6.0, function for function).
//!
//! A transcript's system messages, replayed in order, give the current prompt and tools:
//! later `content` is appended to the base prompt, `sections` are patched by name (a `null`
//! value removes a section), `toolsRemoved` drop tools by name and `toolsAdded` declare or
//! redeclare them. Providers call [`normalize_context`] first (a non-empty
//! `Request::system_prompt` and `Request::tools` become a leading system message), then
//! [`resolve_transcript`] (later system messages stay in place where the model accepts them,
//! otherwise everything collapses into one leading message) and [`resolve_transcript_tools`]
//! (which tools go in the request's top-level tool list and which are declared in place).
//!
//! The session layer writes system messages with [`get_current_system_message`] (the replayed
//! checkpoint), [`get_current_tools`] and [`get_tool_state_changes`] (what changed between two
//! tool states).
//!
//! Every function takes any slice of messages that can show their system message
//! ([`AsSystemMessage`]: [`LlmMessage`], [`AgentMessage`], and references or `Cow`s of them).
//!
//! Departures: a system message whose `content` is `null` reads as empty text (the reference
//! throws on it outside `transformMessages`); JavaScript's ordering of integer-like object keys
//! (`"2"` before `"a"`) is applied to `sections` wherever the reference iterates them.
//!
//! Invariant: pure functions; nothing here is sent anywhere.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::ai::convert::LlmMessage;
use crate::ai::{Request, ToolDefinition};
use crate::model::message::{
    AgentMessage, ContentBlock, SystemKeyOrder, SystemMessage, ToolDeclaration, ToolRemoval,
    UserContent,
};
use crate::support::json::to_js_string;

/// A message that may be a system message (the reference's `message.role === "system"`).
pub trait AsSystemMessage {
    /// The system message, when this is one.
    fn as_system(&self) -> Option<&SystemMessage>;
}

impl AsSystemMessage for SystemMessage {
    fn as_system(&self) -> Option<&SystemMessage> {
        Some(self)
    }
}

impl AsSystemMessage for LlmMessage {
    fn as_system(&self) -> Option<&SystemMessage> {
        match self {
            LlmMessage::System(system) => Some(system),
            LlmMessage::User(_) | LlmMessage::Assistant(_) | LlmMessage::ToolResult(_) => None,
        }
    }
}

impl AsSystemMessage for AgentMessage {
    fn as_system(&self) -> Option<&SystemMessage> {
        match self {
            AgentMessage::System(system) => Some(system),
            _ => None,
        }
    }
}

impl<T: AsSystemMessage + ?Sized> AsSystemMessage for &T {
    fn as_system(&self) -> Option<&SystemMessage> {
        (**self).as_system()
    }
}

impl<T: AsSystemMessage + Clone> AsSystemMessage for Cow<'_, T> {
    fn as_system(&self) -> Option<&SystemMessage> {
        self.as_ref().as_system()
    }
}

/// How much a transport can express of a transcript's tool changes
/// ([`resolve_transcript_tools`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolChangeSupport {
    /// `"none"`: the top-level tool list is the current tool set.
    None,
    /// `"additions"`: later additions are declared in place; a removal or redefinition folds
    /// the tool state up to it into the top-level list.
    Additions,
    /// `"changes"`: every system message declares its tools in place; no top-level list.
    Changes,
}

/// Where a request's tools go ([`resolve_transcript_tools`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TranscriptTools {
    /// The request's top-level tool list.
    pub request_tools: Vec<ToolDeclaration>,
    /// How many system messages (from the first) the top-level list accounts for; later ones
    /// declare their `toolsAdded` in place.
    pub folded_system_messages: usize,
}

/// What changed between two tool states ([`get_tool_state_changes`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolStateChanges {
    /// Tools that are new or whose definition changed.
    pub tools_added: Vec<ToolDeclaration>,
    /// Tools that are gone or whose definition changed (`{name}`).
    pub tools_removed: Vec<ToolRemoval>,
}

/// Text of message content: a string as it is, else the text blocks joined with `separator`
/// (`contentText`); `None` (a `null` content) is empty.
pub fn content_text(content: Option<&UserContent>, separator: &str) -> String {
    match content {
        None => String::new(),
        Some(UserContent::Text(text)) => text.clone(),
        Some(UserContent::Blocks(blocks)) => blocks
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect::<Vec<_>>()
            .join(separator),
    }
}

/// Whether `key` is a JavaScript array index (such keys come first in an object's key order).
fn is_array_index(key: &str) -> bool {
    !key.is_empty()
        && (key == "0" || !key.starts_with('0'))
        && key.bytes().all(|byte| byte.is_ascii_digit())
        && key
            .parse::<u64>()
            .is_ok_and(|index| index < u64::from(u32::MAX))
}

/// The entries of an object in JavaScript's order: array-index keys ascending, then the others
/// in insertion order (`Object.entries`).
pub fn js_entries(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut indexed: Vec<(u64, (&String, &Value))> = map
        .iter()
        .filter(|(key, _)| is_array_index(key))
        .filter_map(|(key, value)| Some((key.parse::<u64>().ok()?, (key, value))))
        .collect();
    indexed.sort_by_key(|(index, _)| *index);
    let mut entries: Vec<(&String, &Value)> = indexed.into_iter().map(|(_, kv)| kv).collect();
    entries.extend(map.iter().filter(|(key, _)| !is_array_index(key)));
    entries
}

/// The declaration a tool definition makes (the shape `Context.tools` folds into the leading
/// system message).
pub fn declaration_of(tool: &ToolDefinition) -> ToolDeclaration {
    ToolDeclaration {
        name: tool.name.clone(),
        description: tool.description.clone(),
        parameters: tool.parameters.clone(),
        extra: Map::new(),
    }
}

/// Builds the leading system message for a prompt and tool set (`createInitialSystemMessage`):
/// `{role, content, toolsAdded?, timestamp: 0}`, or `None` when both are empty.
pub fn create_initial_system_message(
    system_prompt: &str,
    tools: &[ToolDeclaration],
) -> Option<SystemMessage> {
    if system_prompt.is_empty() && tools.is_empty() {
        return None;
    }
    Some(SystemMessage {
        content: Some(UserContent::Text(system_prompt.to_owned())),
        sections: None,
        tools_added: (!tools.is_empty()).then(|| tools.to_vec()),
        tools_removed: None,
        timestamp: 0,
        key_order: SystemKeyOrder::ToolsThenTimestamp,
        extra: Map::new(),
    })
}

/// Folds `Request::system_prompt` and `Request::tools` into a leading system message ahead of
/// `Request::messages` (`normalizeContext`); the messages are borrowed.
pub fn normalize_context(request: &Request) -> Vec<Cow<'_, LlmMessage>> {
    let tools: Vec<ToolDeclaration> = request.tools.iter().map(declaration_of).collect();
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(initial) = create_initial_system_message(&request.system_prompt, &tools) {
        messages.push(Cow::Owned(LlmMessage::System(initial)));
    }
    messages.extend(request.messages.iter().map(Cow::Borrowed));
    messages
}

/// The leading system message, if the transcript starts with one (`getInitialSystemMessage`).
pub fn get_initial_system_message<M: AsSystemMessage>(messages: &[M]) -> Option<&SystemMessage> {
    messages.first().and_then(AsSystemMessage::as_system)
}

/// The tools available after applying every system message in order (`getCurrentTools`): a
/// removal deletes the name, an addition of a known name replaces its definition in place, a
/// new name is appended.
pub fn get_current_tools<M: AsSystemMessage>(messages: &[M]) -> Vec<ToolDeclaration> {
    let mut tools: Vec<ToolDeclaration> = Vec::new();
    for system in messages.iter().filter_map(AsSystemMessage::as_system) {
        for removed in system.tools_removed.iter().flatten() {
            tools.retain(|tool| tool.name != removed.name);
        }
        for added in system.tools_added.iter().flatten() {
            match tools.iter_mut().find(|tool| tool.name == added.name) {
                Some(existing) => *existing = added.clone(),
                None => tools.push(added.clone()),
            }
        }
    }
    tools
}

/// Replays every system message into one leading system message holding the current prompt
/// and tools (`getCurrentSystemMessage`): non-empty contents joined with a blank line,
/// sections patched by name, tools from [`get_current_tools`], the first system message's
/// timestamp. Keys: `role, content, sections?, toolsAdded?, timestamp`. `None` without system
/// messages.
pub fn get_current_system_message<M: AsSystemMessage>(messages: &[M]) -> Option<SystemMessage> {
    let mut content: Vec<String> = Vec::new();
    let mut sections = Map::new();
    let mut timestamp = None;
    for system in messages.iter().filter_map(AsSystemMessage::as_system) {
        timestamp.get_or_insert(system.timestamp);
        let text = content_text(system.content.as_ref(), "\n");
        if !text.is_empty() {
            content.push(text);
        }
        for (name, value) in system.sections.as_ref().map(js_entries).unwrap_or_default() {
            if value.is_null() {
                sections.shift_remove(name);
            } else if let Some(existing) = sections.get_mut(name) {
                *existing = value.clone();
            } else {
                sections.insert(name.clone(), value.clone());
            }
        }
    }
    let tools = get_current_tools(messages);
    if timestamp.is_none() && tools.is_empty() {
        return None;
    }
    // `Object.fromEntries` of the sections map: integer-like names first, as any object.
    let sections: Map<String, Value> = js_entries(&sections)
        .into_iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    Some(SystemMessage {
        content: Some(UserContent::Text(content.join("\n\n"))),
        sections: (!sections.is_empty()).then_some(sections),
        tools_added: (!tools.is_empty()).then_some(tools),
        tools_removed: None,
        timestamp: timestamp.unwrap_or(0),
        key_order: SystemKeyOrder::ToolsThenTimestamp,
        extra: Map::new(),
    })
}

/// The current system prompt text after replaying every system message
/// (`getCurrentSystemPrompt`).
pub fn get_current_system_prompt<M: AsSystemMessage>(messages: &[M]) -> String {
    get_current_system_message(messages)
        .map(|message| get_system_message_text(&message))
        .unwrap_or_default()
}

/// Rebuilds the transcript for models without mid-conversation system messages
/// (`collapseSystemMessages`): the replayed system message leads, every other system message
/// is dropped.
pub fn collapse_system_messages<'a>(messages: &[Cow<'a, LlmMessage>]) -> Vec<Cow<'a, LlmMessage>> {
    let head = get_current_system_message(messages);
    let mut out = Vec::with_capacity(messages.len() + 1);
    if let Some(head) = head {
        out.push(Cow::Owned(LlmMessage::System(head)));
    }
    out.extend(
        messages
            .iter()
            .filter(|message| message.as_system().is_none())
            .cloned(),
    );
    out
}

/// Keeps later system messages in place when the model accepts them, otherwise collapses them
/// (`resolveTranscript`).
pub fn resolve_transcript<'a>(
    messages: Vec<Cow<'a, LlmMessage>>,
    supports_mid_conversation_system_messages: bool,
) -> Vec<Cow<'a, LlmMessage>> {
    if supports_mid_conversation_system_messages {
        messages
    } else {
        collapse_system_messages(&messages)
    }
}

/// A tool as the transcript declares and compares it (`toToolDeclaration`): name,
/// description, parameters, and `constrainedSampling` when set; every other field dropped.
pub fn to_tool_declaration(tool: &ToolDeclaration) -> ToolDeclaration {
    let mut extra = Map::new();
    if let Some(sampling) = tool.extra.get("constrainedSampling") {
        extra.insert("constrainedSampling".to_owned(), sampling.clone());
    }
    ToolDeclaration {
        name: tool.name.clone(),
        description: tool.description.clone(),
        parameters: tool.parameters.clone(),
        extra,
    }
}

fn declaration_json(tool: &ToolDeclaration) -> String {
    serde_json::to_value(to_tool_declaration(tool))
        .map(|value| to_js_string(&value))
        .unwrap_or_default()
}

/// Whether two tools declare the same interface to the model (`declarationsEqual`: their
/// declarations serialise to the same JSON, key order included).
pub fn declarations_equal(left: &ToolDeclaration, right: &ToolDeclaration) -> bool {
    declaration_json(left) == declaration_json(right)
}

/// Compares two complete tool states (`getToolStateChanges`); a changed definition is a
/// removal followed by an addition.
pub fn get_tool_state_changes(
    previous: &[ToolDeclaration],
    current: &[ToolDeclaration],
) -> ToolStateChanges {
    let find = |tools: &[ToolDeclaration], name: &str| -> Option<usize> {
        // `new Map(tools.map(...))`: the last tool of a name wins.
        tools.iter().rposition(|tool| tool.name == name)
    };
    ToolStateChanges {
        tools_added: current
            .iter()
            .filter(|tool| {
                find(previous, &tool.name)
                    .is_none_or(|index| !declarations_equal(&previous[index], tool))
            })
            .map(to_tool_declaration)
            .collect(),
        tools_removed: previous
            .iter()
            .filter(|tool| {
                find(current, &tool.name)
                    .is_none_or(|index| !declarations_equal(tool, &current[index]))
            })
            .map(|tool| ToolRemoval {
                name: tool.name.clone(),
                extra: Map::new(),
            })
            .collect(),
    }
}

/// Every definition the transcript's system messages declared, in first-declaration order,
/// each name with its latest definition (`getDeclaredTools`).
pub fn get_declared_tools<M: AsSystemMessage>(messages: &[M]) -> Vec<ToolDeclaration> {
    let mut tools: Vec<ToolDeclaration> = Vec::new();
    for system in messages.iter().filter_map(AsSystemMessage::as_system) {
        for added in system.tools_added.iter().flatten() {
            match tools.iter_mut().find(|tool| tool.name == added.name) {
                Some(existing) => *existing = added.clone(),
                None => tools.push(added.clone()),
            }
        }
    }
    tools
}

/// Whether a tool name was declared twice with different definitions
/// (`hasToolRedefinitions`, deprecated in the reference).
pub fn has_tool_redefinitions<M: AsSystemMessage>(messages: &[M]) -> bool {
    let mut declared: Vec<&ToolDeclaration> = Vec::new();
    for system in messages.iter().filter_map(AsSystemMessage::as_system) {
        for added in system.tools_added.iter().flatten() {
            match declared.iter_mut().find(|tool| tool.name == added.name) {
                Some(previous) => {
                    if !declarations_equal(previous, added) {
                        return true;
                    }
                    *previous = added;
                }
                None => declared.push(added),
            }
        }
    }
    false
}

/// The index (among the system messages) of the last one with a removal or a same-name
/// redeclaration; a name declared before counts as redeclared even after its removal.
fn find_last_non_additive_tool_change(systems: &[&SystemMessage]) -> Option<usize> {
    let mut declared: Vec<&str> = Vec::new();
    let mut last = None;
    for (index, system) in systems.iter().enumerate() {
        if system
            .tools_removed
            .as_ref()
            .is_some_and(|tools| !tools.is_empty())
        {
            last = Some(index);
        }
        for added in system.tools_added.iter().flatten() {
            if declared.contains(&added.name.as_str()) {
                last = Some(index);
            }
            declared.push(&added.name);
        }
    }
    last
}

/// Whether the tool history has a removal or same-name redeclaration that an addition-only
/// transport cannot replay (`hasNonAdditiveToolChanges`).
pub fn has_non_additive_tool_changes<M: AsSystemMessage>(messages: &[M]) -> bool {
    let systems: Vec<&SystemMessage> = messages
        .iter()
        .filter_map(AsSystemMessage::as_system)
        .collect();
    find_last_non_additive_tool_change(&systems).is_some()
}

/// Splits tool declarations between the request's top-level list and in-place declarations
/// (`resolveTranscriptTools`): with [`ToolChangeSupport::None`] the list is the current tool
/// set; with [`ToolChangeSupport::Changes`] it is empty and every system message declares its
/// tools in place; with [`ToolChangeSupport::Additions`] it is the tool state after the last
/// removal or redefinition (at least the leading system message), later additions anchored in
/// place.
pub fn resolve_transcript_tools<M: AsSystemMessage>(
    messages: &[M],
    support: ToolChangeSupport,
) -> TranscriptTools {
    let systems: Vec<&SystemMessage> = messages
        .iter()
        .filter_map(AsSystemMessage::as_system)
        .collect();
    match support {
        ToolChangeSupport::None => TranscriptTools {
            request_tools: get_current_tools(&systems),
            folded_system_messages: systems.len(),
        },
        ToolChangeSupport::Changes => TranscriptTools {
            request_tools: Vec::new(),
            folded_system_messages: 0,
        },
        ToolChangeSupport::Additions => {
            let leading = usize::from(get_initial_system_message(messages).is_some());
            let folded =
                leading.max(find_last_non_additive_tool_change(&systems).map_or(0, |i| i + 1));
            TranscriptTools {
                request_tools: get_current_tools(&systems[..folded.min(systems.len())]),
                folded_system_messages: folded,
            }
        }
    }
}

/// Renders a system message as a complete prompt: its content, then its non-null sections,
/// the non-empty parts joined with a blank line (`getSystemMessageText`).
pub fn get_system_message_text(message: &SystemMessage) -> String {
    let mut parts = vec![content_text(message.content.as_ref(), "\n")];
    for (_, value) in message
        .sections
        .as_ref()
        .map(js_entries)
        .unwrap_or_default()
    {
        match value {
            Value::Null => {}
            Value::String(text) => parts.push(text.clone()),
            other => parts.push(to_js_string(other)),
        }
    }
    parts.retain(|part| !part.is_empty());
    parts.join("\n\n")
}

/// Renders a later system message for models that accept system messages mid-conversation
/// (`renderSystemMessageUpdate`): its content, then each section change framed by name.
pub fn render_system_message_update(message: &SystemMessage) -> String {
    let mut parts = Vec::new();
    let text = content_text(message.content.as_ref(), "\n");
    if !text.is_empty() {
        parts.push(text);
    }
    for (name, value) in message
        .sections
        .as_ref()
        .map(js_entries)
        .unwrap_or_default()
    {
        parts.push(match value {
            Value::Null => format!("Removed system prompt section \"{name}\"."),
            Value::String(text) => format!("Updated system prompt section \"{name}\":\n\n{text}"),
            other => format!(
                "Updated system prompt section \"{name}\":\n\n{}",
                to_js_string(other)
            ),
        });
    }
    parts.join("\n\n")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn system(value: Value) -> LlmMessage {
        let mut value = value;
        value["role"] = json!("system");
        match AgentMessage::from_value(value) {
            AgentMessage::System(system) => LlmMessage::System(system),
            other => panic!("not a system message: {other:?}"),
        }
    }

    fn user(text: &str) -> LlmMessage {
        match AgentMessage::from_value(json!({"role": "user", "content": text, "timestamp": 5})) {
            AgentMessage::User(user) => LlmMessage::User(user),
            other => panic!("{other:?}"),
        }
    }

    fn tool(name: &str, description: &str) -> Value {
        json!({"name": name, "description": description, "parameters": {"type": "object"}})
    }

    fn decl(name: &str, description: &str) -> ToolDeclaration {
        serde_json::from_value(tool(name, description)).unwrap()
    }

    fn names(tools: &[ToolDeclaration]) -> Vec<String> {
        tools
            .iter()
            .map(|tool| format!("{}:{}", tool.name, tool.description))
            .collect()
    }

    fn js(message: &SystemMessage) -> String {
        to_js_string(&message.to_value())
    }

    #[test]
    fn the_initial_message_folds_prompt_and_tools_in_reference_key_order() {
        assert_eq!(create_initial_system_message("", &[]), None);
        let message = create_initial_system_message("Be brief.", &[decl("read", "Read")]).unwrap();
        assert_eq!(
            js(&message),
            r#"{"role":"system","content":"Be brief.","toolsAdded":[{"name":"read","description":"Read","parameters":{"type":"object"}}],"timestamp":0}"#
        );
        let only_tools = create_initial_system_message("", &[decl("a", "A")]).unwrap();
        assert_eq!(only_tools.content, Some(UserContent::Text(String::new())));
        let request = Request {
            system_prompt: "P".into(),
            messages: vec![user("hi")],
            tools: vec![],
        };
        let normalized = normalize_context(&request);
        assert_eq!(normalized.len(), 2);
        assert!(matches!(normalized[0], Cow::Owned(LlmMessage::System(_))));
        assert!(matches!(normalized[1], Cow::Borrowed(LlmMessage::User(_))));
        let empty = Request::default();
        assert!(normalize_context(&empty).is_empty());
    }

    #[test]
    fn current_tools_replay_removals_then_additions_keeping_positions() {
        let messages = vec![
            system(
                json!({"content": "p", "toolsAdded": [tool("a", "1"), tool("b", "1"), tool("c", "1")], "timestamp": 1}),
            ),
            user("x"),
            system(
                json!({"content": "", "toolsAdded": [tool("b", "2"), tool("d", "1")], "timestamp": 2}),
            ),
            system(
                json!({"toolsRemoved": [{"name": "a"}], "toolsAdded": [tool("a", "3")], "timestamp": 3}),
            ),
        ];
        assert_eq!(
            names(&get_current_tools(&messages)),
            ["b:2", "c:1", "d:1", "a:3"]
        );
        assert_eq!(
            names(&get_declared_tools(&messages)),
            ["a:3", "b:2", "c:1", "d:1"]
        );
        assert!(has_tool_redefinitions(&messages));
        assert!(has_non_additive_tool_changes(&messages));
        assert!(!has_non_additive_tool_changes(&messages[..2]));
    }

    #[test]
    fn the_current_system_message_replays_content_sections_and_tools() {
        let messages = vec![
            system(
                json!({"content": "Base.", "sections": {"skills": "S1", "2": "two", "agents": "A"}, "toolsAdded": [tool("read", "R")], "timestamp": 10}),
            ),
            user("x"),
            system(
                json!({"content": [{"type": "text", "text": "More"}, {"type": "text", "text": "lines"}], "sections": {"skills": "S2", "agents": null, "new": "N"}, "timestamp": 20}),
            ),
            system(
                json!({"content": null, "toolsRemoved": [{"name": "read"}], "toolsAdded": [tool("ls", "L")], "timestamp": 30}),
            ),
        ];
        let current = get_current_system_message(&messages).unwrap();
        assert_eq!(
            js(&current),
            r#"{"role":"system","content":"Base.\n\nMore\nlines","sections":{"2":"two","skills":"S2","new":"N"},"toolsAdded":[{"name":"ls","description":"L","parameters":{"type":"object"}}],"timestamp":10}"#
        );
        assert_eq!(
            get_current_system_prompt(&messages),
            "Base.\n\nMore\nlines\n\ntwo\n\nS2\n\nN"
        );
        assert_eq!(get_current_system_message(&[user("x")]), None);
        assert_eq!(get_current_system_prompt(&[user("x")]), "");
        // Without sections or tools those keys are absent.
        let plain =
            get_current_system_message(&[system(json!({"content": "p", "timestamp": 4}))]).unwrap();
        assert_eq!(
            js(&plain),
            r#"{"role":"system","content":"p","timestamp":4}"#
        );
    }

    #[test]
    fn collapse_and_resolve_transcript() {
        let messages = [
            system(json!({"content": "p", "timestamp": 1})),
            user("a"),
            system(json!({"content": "q", "timestamp": 2})),
            user("b"),
        ];
        let cows: Vec<Cow<'_, LlmMessage>> = messages.iter().map(Cow::Borrowed).collect();
        let kept = resolve_transcript(cows.clone(), true);
        assert_eq!(kept.len(), 4);
        let collapsed = resolve_transcript(cows, false);
        assert_eq!(collapsed.len(), 3);
        let LlmMessage::System(head) = &*collapsed[0] else {
            panic!()
        };
        assert_eq!(get_system_message_text(head), "p\n\nq");
        assert!(matches!(collapsed[1], Cow::Borrowed(LlmMessage::User(_))));
        // A transcript without system messages collapses to itself.
        let only_users = [user("a")];
        let cows: Vec<Cow<'_, LlmMessage>> = only_users.iter().map(Cow::Borrowed).collect();
        assert_eq!(collapse_system_messages(&cows).len(), 1);
    }

    #[test]
    fn declarations_compare_by_their_json_and_changes_are_removal_plus_addition() {
        let mut with_extra = decl("a", "A");
        with_extra.extra.insert("execute".into(), json!("fn"));
        with_extra
            .extra
            .insert("constrainedSampling".into(), json!({"type": "grammar"}));
        let declared = to_tool_declaration(&with_extra);
        assert_eq!(
            to_js_string(&serde_json::to_value(&declared).unwrap()),
            r#"{"name":"a","description":"A","parameters":{"type":"object"},"constrainedSampling":{"type":"grammar"}}"#
        );
        let mut executable = decl("a", "A");
        executable.extra.insert("execute".into(), json!("fn"));
        assert!(declarations_equal(&executable, &decl("a", "A")));
        assert!(!declarations_equal(&decl("a", "A"), &decl("a", "B")));
        let reordered: ToolDeclaration = serde_json::from_value(
            json!({"name": "a", "description": "A", "parameters": {"required": [], "type": "object"}}),
        )
        .unwrap();
        let ordered: ToolDeclaration = serde_json::from_value(
            json!({"name": "a", "description": "A", "parameters": {"type": "object", "required": []}}),
        )
        .unwrap();
        assert!(
            !declarations_equal(&reordered, &ordered),
            "key order counts"
        );

        let previous = [decl("a", "A"), decl("b", "B"), decl("c", "C")];
        let current = [decl("b", "B2"), decl("c", "C"), decl("d", "D")];
        let changes = get_tool_state_changes(&previous, &current);
        assert_eq!(names(&changes.tools_added), ["b:B2", "d:D"]);
        let removed: Vec<&str> = changes
            .tools_removed
            .iter()
            .map(|tool| tool.name.as_str())
            .collect();
        assert_eq!(removed, ["a", "b"]);
        assert_eq!(
            get_tool_state_changes(&current, &current),
            ToolStateChanges::default()
        );
    }

    #[test]
    fn transcript_tools_by_support_level() {
        let messages = vec![
            system(json!({"content": "p", "toolsAdded": [tool("a", "1")], "timestamp": 1})),
            user("x"),
            system(json!({"toolsAdded": [tool("b", "1")], "timestamp": 2})),
            system(json!({"toolsRemoved": [{"name": "a"}], "timestamp": 3})),
            system(json!({"toolsAdded": [tool("c", "1")], "timestamp": 4})),
        ];
        let none = resolve_transcript_tools(&messages, ToolChangeSupport::None);
        assert_eq!(names(&none.request_tools), ["b:1", "c:1"]);
        assert_eq!(none.folded_system_messages, 4);
        let changes = resolve_transcript_tools(&messages, ToolChangeSupport::Changes);
        assert!(changes.request_tools.is_empty());
        assert_eq!(changes.folded_system_messages, 0);
        let additions = resolve_transcript_tools(&messages, ToolChangeSupport::Additions);
        assert_eq!(names(&additions.request_tools), ["b:1"]);
        assert_eq!(additions.folded_system_messages, 3);
        // Only additions: the leading message is folded, later ones stay in place.
        let additive = resolve_transcript_tools(&messages[..3], ToolChangeSupport::Additions);
        assert_eq!(names(&additive.request_tools), ["a:1"]);
        assert_eq!(additive.folded_system_messages, 1);
        // A redeclaration after a removal still counts as non-additive.
        let redeclared = vec![
            user("x"),
            system(json!({"toolsAdded": [tool("a", "1")], "timestamp": 1})),
            system(json!({"toolsRemoved": [{"name": "a"}], "timestamp": 2})),
            system(json!({"toolsAdded": [tool("a", "1")], "timestamp": 3})),
        ];
        let folded = resolve_transcript_tools(&redeclared, ToolChangeSupport::Additions);
        assert_eq!(folded.folded_system_messages, 3);
        assert_eq!(names(&folded.request_tools), ["a:1"]);
        let no_leading = resolve_transcript_tools(&redeclared[..2], ToolChangeSupport::Additions);
        assert_eq!(no_leading.folded_system_messages, 0);
        assert!(no_leading.request_tools.is_empty());
    }

    #[test]
    fn system_message_text_and_updates() {
        let LlmMessage::System(message) = system(json!({
            "content": "Now in plan mode.",
            "sections": {"skills": "S", "agents": null},
            "timestamp": 1
        })) else {
            panic!()
        };
        assert_eq!(get_system_message_text(&message), "Now in plan mode.\n\nS");
        assert_eq!(
            render_system_message_update(&message),
            "Now in plan mode.\n\nUpdated system prompt section \"skills\":\n\nS\n\nRemoved system prompt section \"agents\"."
        );
        let LlmMessage::System(empty) = system(json!({"content": "", "timestamp": 1})) else {
            panic!()
        };
        assert_eq!(render_system_message_update(&empty), "");
        assert_eq!(get_system_message_text(&empty), "");
        assert_eq!(
            content_text(
                Some(&UserContent::Blocks(vec![
                    ContentBlock::text("a"),
                    ContentBlock::text("b")
                ])),
                " "
            ),
            "a b"
        );
    }
}
