//! Replaying system messages (1.6.0 `utils/transcript.js` and `utils/text.js` of pi-ai): the
//! prompt and tool loadout a transcript declares, and the difference between two tool states.
//!
//! A transcript's system messages are a log of the prompt: the first carries every section and
//! tool declaration, later ones patch sections by name (`null` removes one), add or redeclare
//! tools and remove them. Replaying them in order gives the current prompt and tools.
//!
//! Invariant: pure functions over the shared model; no I/O.

use serde_json::{Map, Value};

use crate::model::message::{
    ContentBlock, SystemKeyOrder, SystemMessage, ToolDeclaration, ToolRemoval, UserContent,
};
use crate::support::json;

/// `contentText(content)`: the string, or the text blocks joined with newlines.
fn text_of(content: Option<&UserContent>) -> String {
    match content {
        None => String::new(),
        Some(UserContent::Text(text)) => text.clone(),
        Some(UserContent::Blocks(blocks)) => blocks
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// The tools available after applying every system message in order (`getCurrentTools`): per
/// message its removals, then its additions; a redeclared tool keeps its place, a removed and
/// re-added one goes last (JavaScript `Map` order).
pub fn current_tools<'a>(
    messages: impl IntoIterator<Item = &'a SystemMessage>,
) -> Vec<ToolDeclaration> {
    let mut tools: Vec<ToolDeclaration> = Vec::new();
    for message in messages {
        for removal in message.tools_removed.iter().flatten() {
            tools.retain(|tool| tool.name != removal.name);
        }
        for added in message.tools_added.iter().flatten() {
            match tools.iter_mut().find(|tool| tool.name == added.name) {
                Some(slot) => *slot = added.clone(),
                None => tools.push(added.clone()),
            }
        }
    }
    tools
}

/// Replays every system message into one that holds the current prompt and tools
/// (`getCurrentSystemMessage`): the first timestamp, non-empty contents joined with a blank
/// line, sections patched by name (an updated section keeps its place, a new one goes last),
/// the current tools. `None` when there is no system message and no tool.
pub fn current_system_message<'a>(
    messages: impl IntoIterator<Item = &'a SystemMessage> + Clone,
) -> Option<SystemMessage> {
    let mut content: Vec<String> = Vec::new();
    let mut sections: Map<String, Value> = Map::new();
    let mut timestamp: Option<i64> = None;
    for message in messages.clone() {
        timestamp.get_or_insert(message.timestamp);
        let text = text_of(message.content.as_ref());
        if !text.is_empty() {
            content.push(text);
        }
        for (name, value) in message.sections.iter().flatten() {
            if value.is_null() {
                sections.shift_remove(name);
            } else {
                sections.insert(name.clone(), value.clone());
            }
        }
    }
    let tools = current_tools(messages);
    if timestamp.is_none() && tools.is_empty() {
        return None;
    }
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

/// A system message rendered as one prompt (`getSystemMessageText`): its content, then the
/// text of each section, the non-empty parts joined with a blank line.
pub fn system_message_text(message: &SystemMessage) -> String {
    let mut parts = vec![text_of(message.content.as_ref())];
    for value in message
        .sections
        .iter()
        .flat_map(|sections| sections.values())
    {
        if let Some(text) = value.as_str() {
            parts.push(text.to_owned());
        }
    }
    parts.retain(|part| !part.is_empty());
    parts.join("\n\n")
}

/// A later system message rendered for APIs that accept system messages mid-conversation
/// (`renderSystemMessageUpdate`): its content, then each section change framed by name.
pub fn render_system_message_update(message: &SystemMessage) -> String {
    let mut parts = Vec::new();
    let text = text_of(message.content.as_ref());
    if !text.is_empty() {
        parts.push(text);
    }
    for (name, value) in message.sections.iter().flatten() {
        match value.as_str() {
            Some(text) => parts.push(format!(
                "Updated system prompt section \"{name}\":\n\n{text}"
            )),
            None => parts.push(format!("Removed system prompt section \"{name}\".")),
        }
    }
    parts.join("\n\n")
}

/// A tool as the model sees it (`toToolDeclaration`): name, description, parameters and
/// `constrainedSampling` when set; other fields dropped.
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

fn declaration_text(tool: &ToolDeclaration) -> String {
    json::to_js_string(&serde_json::to_value(to_tool_declaration(tool)).unwrap_or(Value::Null))
}

/// Whether two tools declare the same interface to the model (`declarationsEqual`).
pub fn declarations_equal(left: &ToolDeclaration, right: &ToolDeclaration) -> bool {
    declaration_text(left) == declaration_text(right)
}

/// The change from one complete tool state to another (`getToolStateChanges`): tools new or
/// changed are added (a changed one is also removed), tools gone or changed are removed, each
/// list in its state's order.
pub fn tool_state_changes(
    previous: &[ToolDeclaration],
    current: &[ToolDeclaration],
) -> (Vec<ToolDeclaration>, Vec<ToolRemoval>) {
    let find = |tools: &[ToolDeclaration], name: &str| -> Option<usize> {
        tools.iter().position(|tool| tool.name == name)
    };
    let added = current
        .iter()
        .filter(|tool| match find(previous, &tool.name) {
            None => true,
            Some(idx) => !declarations_equal(&previous[idx], tool),
        })
        .map(to_tool_declaration)
        .collect();
    let removed = previous
        .iter()
        .filter(|tool| match find(current, &tool.name) {
            None => true,
            Some(idx) => !declarations_equal(tool, &current[idx]),
        })
        .map(|tool| ToolRemoval {
            name: tool.name.clone(),
            extra: Map::new(),
        })
        .collect();
    (added, removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, description: &str) -> ToolDeclaration {
        ToolDeclaration {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters: json!({"type": "object"}),
            extra: Map::new(),
        }
    }

    fn system(value: Value) -> SystemMessage {
        match crate::model::AgentMessage::from_value(value) {
            crate::model::AgentMessage::System(system) => system,
            other => panic!("not a system message: {other:?}"),
        }
    }

    #[test]
    fn replay_patches_sections_in_place_and_resolves_tools() {
        let messages = [
            system(
                json!({"role": "system", "content": "", "sections": {"preamble": "P", "tools": "T", "cwd": "C"}, "timestamp": 5, "toolsAdded": [{"name": "read", "description": "r", "parameters": {}}, {"name": "bash", "description": "b", "parameters": {}}]}),
            ),
            system(
                json!({"role": "system", "content": "extra", "sections": {"tools": "T2", "cwd": null, "skills": "S"}, "timestamp": 9, "toolsRemoved": [{"name": "read"}], "toolsAdded": [{"name": "read", "description": "r2", "parameters": {}}]}),
            ),
        ];
        let current = current_system_message(messages.iter()).unwrap();
        assert_eq!(
            json::to_js_string(&current.to_value()),
            r#"{"role":"system","content":"extra","sections":{"preamble":"P","tools":"T2","skills":"S"},"toolsAdded":[{"name":"bash","description":"b","parameters":{}},{"name":"read","description":"r2","parameters":{}}],"timestamp":5}"#
        );
        assert_eq!(system_message_text(&current), "extra\n\nP\n\nT2\n\nS");
        assert_eq!(
            render_system_message_update(&messages[1]),
            "extra\n\nUpdated system prompt section \"tools\":\n\nT2\n\nRemoved system prompt section \"cwd\".\n\nUpdated system prompt section \"skills\":\n\nS"
        );
        assert!(current_system_message(std::iter::empty()).is_none());
    }

    #[test]
    fn a_changed_tool_is_removed_and_added() {
        let previous = [tool("read", "r"), tool("bash", "b"), tool("ls", "l")];
        let current = [tool("bash", "b2"), tool("read", "r"), tool("grep", "g")];
        let (added, removed) = tool_state_changes(&previous, &current);
        let names: Vec<&str> = added.iter().map(|tool| tool.name.as_str()).collect();
        assert_eq!(names, ["bash", "grep"]);
        let names: Vec<&str> = removed.iter().map(|tool| tool.name.as_str()).collect();
        assert_eq!(names, ["bash", "ls"]);
        let (added, removed) = tool_state_changes(&previous, &previous);
        assert!(added.is_empty() && removed.is_empty());
    }
}
