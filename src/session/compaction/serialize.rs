//! The conversation as text for the summariser (`spec/compaction.md` §6.1,
//! `serializeConversation`), so that the model reads it instead of continuing it.
//!
//! ```text
//! [User]: fix the bug
//!
//! [Assistant]: Reading it.
//!
//! [Assistant tool calls]: read(path="src/a.ts", limit=20)
//!
//! [Tool result]: 1: fn main() {}
//! ```
//!
//! Parts are separated by a blank line; tool results longer than [`TOOL_RESULT_MAX_CHARS`]
//! UTF-16 units are cut with a note of how many were dropped; images are left out.
//!
//! Invariant: pure functions.

use serde_json::Value;

use crate::ai::LlmMessage;
use crate::model::message::{ContentBlock, UserContent};
use crate::session::compaction::tokens::js_len;
use crate::support::json;

/// Tool results are cut to this many UTF-16 units in the summariser's text.
pub const TOOL_RESULT_MAX_CHARS: usize = 2000;

fn joined_text(blocks: &[ContentBlock]) -> String {
    blocks.iter().filter_map(ContentBlock::as_text).collect()
}

/// Keeps the first `max_units` UTF-16 units of `text` and notes how many were dropped.
///
/// A surrogate pair straddling the limit is dropped whole (JavaScript would keep a lone half,
/// which JSON cannot carry faithfully anyway); the count of dropped units is the reference's.
fn truncate_for_summary(text: &str, max_units: usize) -> String {
    let total = js_len(text);
    let max = max_units as u64;
    if total <= max {
        return text.to_owned();
    }
    let mut units = 0u64;
    let mut end = text.len();
    for (idx, ch) in text.char_indices() {
        let width = ch.len_utf16() as u64;
        if units + width > max {
            end = idx;
            break;
        }
        units += width;
    }
    format!(
        "{}\n\n[... {} more characters truncated]",
        &text[..end],
        total - max
    )
}

fn tool_call_arguments(arguments: &Value) -> String {
    // `Object.entries(args)`: an object's own keys in order, an array's indices, a string's
    // characters; nothing for other values.
    let pairs: Vec<String> = match arguments {
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| format!("{key}={}", json::to_js_string(value)))
            .collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(idx, value)| format!("{idx}={}", json::to_js_string(value)))
            .collect(),
        Value::String(text) => text
            .encode_utf16()
            .enumerate()
            .map(|(idx, unit)| {
                let ch = String::from_utf16_lossy(&[unit]);
                format!("{idx}={}", json::to_js_string(&Value::String(ch)))
            })
            .collect(),
        Value::Null | Value::Bool(_) | Value::Number(_) => Vec::new(),
    };
    pairs.join(", ")
}

/// Serialises LLM messages (after `convertToLlm`) for the summariser.
pub fn serialize_conversation(messages: &[LlmMessage]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for message in messages {
        match message {
            // The prompt is not conversation (1.6.0 `serializeConversation` skips it).
            LlmMessage::System(_) => {}
            LlmMessage::User(user) => {
                let content = match &user.content {
                    UserContent::Text(text) => text.clone(),
                    UserContent::Blocks(blocks) => joined_text(blocks),
                };
                if !content.is_empty() {
                    parts.push(format!("[User]: {content}"));
                }
            }
            LlmMessage::Assistant(assistant) => {
                let mut text_parts: Vec<&str> = Vec::new();
                let mut tool_calls: Vec<String> = Vec::new();
                for block in &assistant.content {
                    match block {
                        ContentBlock::Text(text) => text_parts.push(&text.text),
                        // 1.6.0 leaves thinking out: replayed reasoning is often not part
                        // of the model's live context and can outgrow what it summarises.
                        ContentBlock::Thinking(_) => {}
                        ContentBlock::ToolCall(call) => tool_calls.push(format!(
                            "{}({})",
                            call.name,
                            tool_call_arguments(&call.arguments)
                        )),
                        ContentBlock::Image(_) | ContentBlock::Unknown(_) => {}
                    }
                }
                if !text_parts.is_empty() {
                    parts.push(format!("[Assistant]: {}", text_parts.join("\n")));
                }
                if !tool_calls.is_empty() {
                    parts.push(format!("[Assistant tool calls]: {}", tool_calls.join("; ")));
                }
            }
            LlmMessage::ToolResult(result) => {
                let content = joined_text(&result.content);
                if !content.is_empty() {
                    parts.push(format!(
                        "[Tool result]: {}",
                        truncate_for_summary(&content, TOOL_RESULT_MAX_CHARS)
                    ));
                }
            }
        }
    }
    parts.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ai::convert::convert_to_llm;
    use crate::model::message::AgentMessage;
    use serde_json::json;

    fn llm(values: Vec<Value>) -> Vec<LlmMessage> {
        let messages: Vec<AgentMessage> =
            values.into_iter().map(AgentMessage::from_value).collect();
        convert_to_llm(&messages)
    }

    #[test]
    fn every_role_is_serialised_in_the_reference_layout() {
        let messages = llm(vec![
            json!({"role":"user","content":"fix the bug","timestamp":1}),
            json!({"role":"user","content":[{"type":"text","text":"a"},{"type":"image","data":"x","mimeType":"image/png"},{"type":"text","text":"b"}],"timestamp":1}),
            json!({"role":"assistant","content":[
                {"type":"text","text":"Reading."},
                {"type":"thinking","thinking":"hm"},
                {"type":"toolCall","id":"1","name":"read","arguments":{"path":"src/a.ts","limit":20}},
                {"type":"text","text":"More."},
                {"type":"thinking","thinking":"again"},
                {"type":"toolCall","id":"2","name":"bash","arguments":{"command":"ls \"x\""}}
            ],"stopReason":"toolUse","timestamp":1}),
            json!({"role":"toolResult","toolCallId":"1","toolName":"read","content":[{"type":"text","text":"line1"},{"type":"text","text":"line2"}],"isError":false,"timestamp":1}),
            json!({"role":"toolResult","toolCallId":"2","toolName":"bash","content":[{"type":"image","data":"x","mimeType":"image/png"}],"isError":false,"timestamp":1}),
            json!({"role":"user","content":"","timestamp":1}),
            json!({"role":"bashExecution","command":"ls","output":"a","exitCode":0,"cancelled":false,"truncated":false,"timestamp":1}),
        ]);
        assert_eq!(
            serialize_conversation(&messages),
            "[User]: fix the bug\n\n[User]: ab\n\n[Assistant]: Reading.\nMore.\n\n\
             [Assistant tool calls]: read(path=\"src/a.ts\", limit=20); bash(command=\"ls \\\"x\\\"\")\n\n\
             [Tool result]: line1line2\n\n[User]: Ran `ls`\n```\na\n```"
        );
    }

    #[test]
    fn long_tool_results_are_cut_at_2000_units() {
        let long = "é".repeat(2500);
        let messages = llm(vec![
            json!({"role":"toolResult","toolCallId":"1","toolName":"read",
            "content":[{"type":"text","text":long}],"isError":false,"timestamp":1}),
        ]);
        let text = serialize_conversation(&messages);
        let expected = format!(
            "[Tool result]: {}\n\n[... 500 more characters truncated]",
            "é".repeat(2000)
        );
        assert_eq!(text, expected);
        let exact = "x".repeat(2000);
        let messages = llm(vec![
            json!({"role":"toolResult","toolCallId":"1","toolName":"read",
            "content":[{"type":"text","text":exact}],"isError":false,"timestamp":1}),
        ]);
        assert_eq!(
            serialize_conversation(&messages),
            format!("[Tool result]: {exact}")
        );
    }

    #[test]
    fn a_pair_straddling_the_limit_is_dropped_whole() {
        let text = format!("{}😀tail", "x".repeat(1999));
        assert_eq!(
            truncate_for_summary(&text, 2000),
            format!("{}\n\n[... 5 more characters truncated]", "x".repeat(1999))
        );
    }

    #[test]
    fn odd_argument_shapes_follow_object_entries() {
        assert_eq!(tool_call_arguments(&json!([1, "a"])), "0=1, 1=\"a\"");
        assert_eq!(tool_call_arguments(&json!("ab")), "0=\"a\", 1=\"b\"");
        assert_eq!(tool_call_arguments(&json!(null)), "");
        assert_eq!(tool_call_arguments(&json!({})), "");
        assert_eq!(
            tool_call_arguments(&json!({"n":1.5,"o":{"k":[true]}})),
            "n=1.5, o={\"k\":[true]}"
        );
    }

    #[test]
    fn summaries_and_custom_messages_read_as_user_text() {
        let messages = llm(vec![
            json!({"role":"compactionSummary","summary":"S","tokensBefore":1,"timestamp":1}),
            json!({"role":"branchSummary","summary":"B","fromId":"x","timestamp":1}),
            json!({"role":"custom","customType":"t","content":"C","display":false,"timestamp":1}),
        ]);
        assert_eq!(
            serialize_conversation(&messages),
            "[User]: The conversation history before this point was compacted into the following summary:\n\n<summary>\nS\n</summary>\n\n\
             [User]: The following is a summary of a branch that this conversation came back from:\n\n<summary>\nB</summary>\n\n[User]: C"
        );
    }
}
