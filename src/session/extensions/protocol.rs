//! The wire protocol of out-of-process extensions (documented with a worked exchange in
//! `docs/extensions.md`): JSON objects, one per line (LF), UTF-8, over the extension's stdin
//! (pi → extension) and stdout (extension → pi). stderr is free text that pi keeps for error
//! reports.
//!
//! pi → extension: `hello` (first line), `event`, `execute_tool`, `command` (requests with an
//! integer `id`, each answered by one `response`), `cancel` (no answer), `return` (the answer
//! to a `call`).
//! extension → pi: `register` (the answer to `hello`), `response`, `tool_update`, `call`.
//!
//! This module builds and parses those messages; it does no I/O.
//!
//! Invariant: parsing never panics; anything that is not a protocol message is a
//! [`ProtocolError`] carrying a short preview of the offending line.

use serde_json::{Map, Value, json};

use crate::agent::tool::{ToolDefinition, ToolOutput};
use crate::model::message::ContentBlock;
use crate::session::extensions::api::CommandInfo;
use crate::session::extensions::event::EVENT_NAMES;

/// The protocol version pi speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// A line that is not a valid protocol message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// Not JSON, or not an object.
    #[error("sent a line that is not a JSON object: {preview}")]
    NotJson {
        /// The start of the line.
        preview: String,
    },
    /// A JSON object that is not a message pi knows, or lacks a field.
    #[error("sent an invalid message ({reason}): {preview}")]
    Invalid {
        /// What is wrong.
        reason: String,
        /// The start of the line.
        preview: String,
    },
}

/// Returns the first 80 characters of a line, for error messages.
pub fn preview(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let trimmed = text.trim_end();
    let mut out: String = trimmed.chars().take(80).collect();
    if trimmed.chars().count() > 80 {
        out.push('…');
    }
    out
}

/// The first line pi writes.
pub fn hello(version: &str, cwd: &str, has_ui: bool) -> Value {
    json!({
        "type": "hello",
        "protocol": PROTOCOL_VERSION,
        "pi": version,
        "cwd": cwd,
        "hasUI": has_ui,
        "events": EVENT_NAMES,
    })
}

/// An event for the extension's handler.
pub fn event_request(id: u64, event: Value) -> Value {
    json!({"type": "event", "id": id, "event": event})
}

/// A call of one of the extension's tools.
pub fn tool_request(id: u64, tool_call_id: &str, tool_name: &str, params: &Value) -> Value {
    json!({
        "type": "execute_tool",
        "id": id,
        "toolCallId": tool_call_id,
        "toolName": tool_name,
        "params": params,
    })
}

/// A run of one of the extension's commands.
pub fn command_request(id: u64, name: &str, args: &str) -> Value {
    json!({"type": "command", "id": id, "name": name, "args": args})
}

/// Tells the extension that the request `id` was abandoned (the user aborted).
pub fn cancel(id: u64) -> Value {
    json!({"type": "cancel", "id": id})
}

/// The answer to a `call`.
pub fn call_return(id: &Value, result: Result<Value, String>) -> Value {
    match result {
        Ok(value) => json!({"type": "return", "id": id, "value": value}),
        Err(error) => json!({"type": "return", "id": id, "error": error}),
    }
}

/// A tool as the extension declared it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// What the model sees.
    pub definition: ToolDefinition,
}

/// The extension's answer to `hello`.
#[derive(Clone, Debug, PartialEq)]
pub struct Registration {
    /// A display name (optional).
    pub name: Option<String>,
    /// The events it subscribes to.
    pub events: Vec<String>,
    /// Event names pi does not know (reported, then ignored).
    pub unknown_events: Vec<String>,
    /// Its tools.
    pub tools: Vec<ToolSpec>,
    /// Its slash commands.
    pub commands: Vec<CommandInfo>,
}

fn invalid(reason: impl Into<String>, line: &[u8]) -> ProtocolError {
    ProtocolError::Invalid {
        reason: reason.into(),
        preview: preview(line),
    }
}

fn object(line: &[u8]) -> Result<Map<String, Value>, ProtocolError> {
    match crate::support::json::parse_lenient(line) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(ProtocolError::NotJson {
            preview: preview(line),
        }),
    }
}

fn string_list(
    map: &Map<String, Value>,
    key: &str,
    line: &[u8],
) -> Result<Vec<String>, ProtocolError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| invalid(format!("`{key}` must hold strings"), line))
            })
            .collect(),
        Some(_) => Err(invalid(format!("`{key}` must be an array"), line)),
    }
}

/// Parses the `register` line.
pub fn parse_registration(line: &[u8]) -> Result<Registration, ProtocolError> {
    let map = object(line)?;
    if map.get("type").and_then(Value::as_str) != Some("register") {
        return Err(invalid("the first line must be `register`", line));
    }
    if let Some(version) = map.get("protocol").and_then(Value::as_u64)
        && version != PROTOCOL_VERSION
    {
        return Err(invalid(
            format!("protocol {version} is not supported (pi speaks {PROTOCOL_VERSION})"),
            line,
        ));
    }
    let mut events = Vec::new();
    let mut unknown_events = Vec::new();
    for event in string_list(&map, "events", line)? {
        if EVENT_NAMES.contains(&event.as_str()) {
            events.push(event);
        } else {
            unknown_events.push(event);
        }
    }
    let mut tools = Vec::new();
    if let Some(items) = map.get("tools").filter(|value| !value.is_null()) {
        let Value::Array(items) = items else {
            return Err(invalid("`tools` must be an array", line));
        };
        for item in items {
            let Value::Object(tool) = item else {
                return Err(invalid("a tool must be an object", line));
            };
            let text = |key: &str| tool.get(key).and_then(Value::as_str).map(str::to_owned);
            let name = text("name")
                .filter(|name| !name.is_empty())
                .ok_or_else(|| invalid("a tool needs a `name`", line))?;
            let parameters = match tool.get("parameters") {
                Some(schema @ Value::Object(_)) => schema.clone(),
                None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
                Some(_) => {
                    return Err(invalid(
                        format!("tool `{name}`: `parameters` must be a JSON schema object"),
                        line,
                    ));
                }
            };
            let guidelines = string_list(tool, "promptGuidelines", line)?;
            tools.push(ToolSpec {
                definition: ToolDefinition {
                    label: text("label").unwrap_or_else(|| name.clone()),
                    description: text("description").unwrap_or_default(),
                    name,
                    parameters,
                    prompt_snippet: text("promptSnippet"),
                    prompt_guidelines: guidelines,
                    constrained_sampling: None,
                },
            });
        }
    }
    let mut commands = Vec::new();
    if let Some(items) = map.get("commands").filter(|value| !value.is_null()) {
        let Value::Array(items) = items else {
            return Err(invalid("`commands` must be an array", line));
        };
        for item in items {
            let (name, description) = match item {
                Value::String(name) => (name.clone(), None),
                Value::Object(command) => (
                    command
                        .get("name")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .ok_or_else(|| invalid("a command needs a `name`", line))?,
                    command
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                ),
                _ => return Err(invalid("a command must be an object or a name", line)),
            };
            let name = name.trim_start_matches('/').to_owned();
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(invalid(format!("invalid command name `{name}`"), line));
            }
            commands.push(CommandInfo { name, description });
        }
    }
    Ok(Registration {
        name: map.get("name").and_then(Value::as_str).map(str::to_owned),
        events,
        unknown_events,
        tools,
        commands,
    })
}

/// A message from the extension after the handshake.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    /// The answer to request `id`: a result (`None` for absent or `null`) or an error text.
    Response {
        /// The request.
        id: u64,
        /// What the handler returned, or its error.
        result: Result<Option<Value>, String>,
    },
    /// A partial result of a running tool.
    ToolUpdate {
        /// The `execute_tool` request.
        id: u64,
        /// The partial result.
        partial: ToolOutput,
    },
    /// A call into pi.
    Call {
        /// Echoed in the `return`.
        id: Value,
        /// The method.
        method: String,
        /// Its parameters (an object; `{}` when absent).
        params: Value,
    },
}

/// Parses a tool result object `{content, details?}`.
pub fn parse_tool_output(value: &Value) -> Result<ToolOutput, String> {
    let Value::Object(map) = value else {
        return Err("a tool result must be an object with `content`".to_owned());
    };
    let content = match map.get("content") {
        Some(Value::Array(items)) => items
            .iter()
            .cloned()
            .map(ContentBlock::from_value)
            .collect(),
        Some(Value::String(text)) => vec![ContentBlock::text(text.clone())],
        None | Some(Value::Null) => Vec::new(),
        Some(_) => return Err("`content` must be an array of blocks".to_owned()),
    };
    Ok(ToolOutput {
        content,
        details: map.get("details").filter(|value| !value.is_null()).cloned(),
    })
}

/// Parses one line received after the handshake.
pub fn parse_incoming(line: &[u8]) -> Result<Incoming, ProtocolError> {
    let map = object(line)?;
    let id_u64 = |map: &Map<String, Value>| {
        map.get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| invalid("`id` must be the integer of the request", line))
    };
    match map.get("type").and_then(Value::as_str) {
        Some("response") => {
            let id = id_u64(&map)?;
            let result = match map.get("error") {
                Some(Value::String(error)) => Err(error.clone()),
                Some(Value::Null) | None => Ok(map.get("result").filter(|v| !v.is_null()).cloned()),
                Some(other) => Err(other.to_string()),
            };
            Ok(Incoming::Response { id, result })
        }
        Some("tool_update") => {
            let id = id_u64(&map)?;
            let partial = map
                .get("partialResult")
                .map(parse_tool_output)
                .transpose()
                .map_err(|reason| invalid(reason, line))?
                .unwrap_or(ToolOutput {
                    content: Vec::new(),
                    details: None,
                });
            Ok(Incoming::ToolUpdate { id, partial })
        }
        Some("call") => {
            let id = match map.get("id") {
                Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
                _ => return Err(invalid("a call needs a string or number `id`", line)),
            };
            let method = map
                .get("method")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("a call needs a `method`", line))?
                .to_owned();
            let params = match map.get("params") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(params @ Value::Object(_)) => params.clone(),
                Some(_) => return Err(invalid("`params` must be an object", line)),
            };
            Ok(Incoming::Call { id, method, params })
        }
        Some(other) => Err(invalid(format!("unknown message type `{other}`"), line)),
        None => Err(invalid("a message needs a `type`", line)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_declares_events_tools_and_commands() {
        let line = br#"{"type":"register","name":"counter","events":["session_start","tool_call","no_such_event"],"tools":[{"name":"counter","description":"Count","parameters":{"type":"object","properties":{"by":{"type":"integer"}}}}],"commands":[{"name":"/count","description":"Show the count"},"reset"]}"#;
        let registration = parse_registration(line).unwrap();
        assert_eq!(registration.events, ["session_start", "tool_call"]);
        assert_eq!(registration.unknown_events, ["no_such_event"]);
        assert_eq!(registration.tools[0].definition.name, "counter");
        assert_eq!(registration.tools[0].definition.label, "counter");
        let names: Vec<&str> = registration
            .commands
            .iter()
            .map(|command| command.name.as_str())
            .collect();
        assert_eq!(names, ["count", "reset"]);
    }

    #[test]
    fn garbage_and_wrong_first_lines_are_protocol_errors_with_a_preview() {
        assert_eq!(
            parse_registration(b"hello there").unwrap_err().to_string(),
            "sent a line that is not a JSON object: hello there"
        );
        assert!(parse_registration(br#"{"type":"response","id":1}"#).is_err());
        assert!(parse_incoming(br#"{"type":"response"}"#).is_err());
        assert!(parse_incoming(br#"[1,2]"#).is_err());
        let long = vec![b'x'; 200];
        assert_eq!(preview(&long).chars().count(), 81);
    }

    #[test]
    fn responses_calls_and_updates_parse() {
        assert_eq!(
            parse_incoming(br#"{"type":"response","id":7,"result":{"block":true}}"#).unwrap(),
            Incoming::Response {
                id: 7,
                result: Ok(Some(json!({"block": true})))
            }
        );
        assert_eq!(
            parse_incoming(br#"{"type":"response","id":7,"error":"nope"}"#).unwrap(),
            Incoming::Response {
                id: 7,
                result: Err("nope".into())
            }
        );
        assert_eq!(
            parse_incoming(br#"{"type":"call","id":"c1","method":"appendEntry"}"#).unwrap(),
            Incoming::Call {
                id: json!("c1"),
                method: "appendEntry".into(),
                params: json!({})
            }
        );
        let Incoming::ToolUpdate { partial, .. } = parse_incoming(
            br#"{"type":"tool_update","id":3,"partialResult":{"content":[{"type":"text","text":"half"}]}}"#,
        )
        .unwrap() else {
            panic!("not an update");
        };
        assert_eq!(partial.joined_text(), "half");
    }
}
