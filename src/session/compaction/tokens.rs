//! Token accounting as the reference does it (`spec/compaction.md` §2): a `chars / 4` estimate
//! per message, the last valid usage plus estimates for what came after it, and the threshold.
//!
//! Lengths are JavaScript lengths (UTF-16 code units). A message whose known role did not parse
//! into its typed shape is estimated from its JSON the way the reference reads it, counting 0
//! where the reference would throw.
//!
//! Invariant: pure functions.

use std::borrow::Borrow;

use serde_json::Value;

use crate::model::message::{AgentMessage, ContentBlock, StopReason, Usage, UserContent};
use crate::session::compaction::{CompactionSettings, PathEntry};
use crate::support::json;

/// Characters an image block counts for in tool results and custom messages (≈1200 tokens).
const IMAGE_CHARS: u64 = 4800;

/// Returns the length of `text` in UTF-16 code units (JavaScript's `String#length`).
pub(crate) fn js_len(text: &str) -> u64 {
    // Every byte that starts a character counts one unit; a four-byte character (outside the
    // BMP) is a surrogate pair, so its lead byte counts one more.
    text.as_bytes()
        .iter()
        .map(|&byte| u64::from(byte & 0xC0 != 0x80) + u64::from(byte >= 0xF0))
        .sum()
}

fn ceil_quarter(chars: u64) -> u64 {
    chars.div_ceil(4)
}

/// 1.6.0 `estimateTextAndImageContentChars`: text, and a fixed size per image (user and
/// system content count images too since 1.6.0).
fn user_content_chars(content: &UserContent) -> u64 {
    match content {
        UserContent::Text(text) => js_len(text),
        UserContent::Blocks(blocks) => blocks_with_images_chars(blocks),
    }
}

fn blocks_with_images_chars(blocks: &[ContentBlock]) -> u64 {
    blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => js_len(&text.text),
            ContentBlock::Image(_) => IMAGE_CHARS,
            ContentBlock::Unknown(value) => unknown_block_chars(value, true),
            ContentBlock::Thinking(_) | ContentBlock::ToolCall(_) => 0,
        })
        .sum()
}

/// An unknown block still counts when its `type` is `image` (a malformed image block).
fn unknown_block_chars(value: &Value, count_images: bool) -> u64 {
    match value.get("type").and_then(Value::as_str) {
        Some("image") if count_images => IMAGE_CHARS,
        Some("text") => value.get("text").and_then(Value::as_str).map_or(0, js_len),
        _ => 0,
    }
}

/// Returns the estimated tokens of one message (`estimateTokens`): `ceil(chars / 4)`.
pub fn estimate_tokens(message: &AgentMessage) -> u64 {
    let chars = match message {
        // 1.6.0: content, the sections' text and the declared tools as JSON.
        AgentMessage::System(system) => {
            let content = system.content.as_ref().map_or(0, user_content_chars);
            let sections: u64 = system
                .sections
                .iter()
                .flat_map(|sections| sections.values())
                .filter_map(Value::as_str)
                .map(js_len)
                .sum();
            let tools = system.tools_added.as_ref().map_or(0, |tools| {
                js_len(&json::to_js_string(
                    &serde_json::to_value(tools).unwrap_or(Value::Null),
                ))
            });
            content + sections + tools
        }
        AgentMessage::User(user) => user_content_chars(&user.content),
        AgentMessage::Assistant(assistant) => assistant
            .content
            .iter()
            .map(|block| match block {
                ContentBlock::Text(text) => js_len(&text.text),
                ContentBlock::Thinking(thinking) => js_len(&thinking.thinking),
                ContentBlock::ToolCall(call) => {
                    js_len(&call.name) + js_len(&json::to_js_string(&call.arguments))
                }
                ContentBlock::Image(_) => 0,
                ContentBlock::Unknown(value) => unknown_block_chars(value, false),
            })
            .sum(),
        AgentMessage::ToolResult(result) => blocks_with_images_chars(&result.content),
        AgentMessage::Custom(custom) => match &custom.content {
            UserContent::Text(text) => js_len(text),
            UserContent::Blocks(blocks) => blocks_with_images_chars(blocks),
        },
        AgentMessage::BashExecution(bash) => js_len(&bash.command) + js_len(&bash.output),
        AgentMessage::BranchSummary(summary) => js_len(&summary.summary),
        AgentMessage::CompactionSummary(summary) => js_len(&summary.summary),
        AgentMessage::Unknown(value) => unknown_message_chars(value),
    };
    ceil_quarter(chars)
}

fn str_len(value: Option<&Value>) -> u64 {
    value.and_then(Value::as_str).map_or(0, js_len)
}

/// The reference's estimate over raw JSON, for messages whose shape did not parse.
fn unknown_message_chars(value: &Value) -> u64 {
    let role = value.get("role").and_then(Value::as_str).unwrap_or("");
    let content = value.get("content");
    let blocks = || content.and_then(Value::as_array).into_iter().flatten();
    match role {
        "user" => match content {
            Some(Value::String(text)) => js_len(text),
            _ => blocks().map(|block| unknown_block_chars(block, true)).sum(),
        },
        "assistant" => blocks()
            .map(|block| match block.get("type").and_then(Value::as_str) {
                Some("text") => str_len(block.get("text")),
                Some("thinking") => str_len(block.get("thinking")),
                Some("toolCall") => {
                    str_len(block.get("name"))
                        + block
                            .get("arguments")
                            .map_or(0, |arguments| js_len(&json::to_js_string(arguments)))
                }
                _ => 0,
            })
            .sum(),
        "custom" | "toolResult" => match content {
            Some(Value::String(text)) => js_len(text),
            _ => blocks().map(|block| unknown_block_chars(block, true)).sum(),
        },
        "bashExecution" => str_len(value.get("command")) + str_len(value.get("output")),
        "branchSummary" | "compactionSummary" => str_len(value.get("summary")),
        _ => 0,
    }
}

/// Returns the context size a usage reports (`calculateContextTokens`): `totalTokens` when
/// non-zero, else the sum of its parts.
pub fn calculate_context_tokens(usage: &Usage) -> u64 {
    if usage.total_tokens != 0 {
        usage.total_tokens
    } else {
        usage.input + usage.output + usage.cache_read + usage.cache_write
    }
}

/// Returns the usage of an assistant message that can be trusted: not `aborted`, not `error`.
pub fn assistant_usage(message: &AgentMessage) -> Option<&Usage> {
    match message {
        AgentMessage::Assistant(assistant)
            if !matches!(
                assistant.stop_reason,
                StopReason::Aborted | StopReason::Error
            ) =>
        {
            Some(&assistant.usage)
        }
        AgentMessage::System(_)
        | AgentMessage::User(_)
        | AgentMessage::Assistant(_)
        | AgentMessage::ToolResult(_)
        | AgentMessage::BashExecution(_)
        | AgentMessage::Custom(_)
        | AgentMessage::BranchSummary(_)
        | AgentMessage::CompactionSummary(_)
        | AgentMessage::Unknown(_) => None,
    }
}

/// Returns the last trustworthy assistant usage among `message` entries of a path
/// (`getLastAssistantUsage`).
pub fn last_assistant_usage<E: PathEntry>(entries: &[E]) -> Option<&Usage> {
    entries
        .iter()
        .rev()
        .find_map(|entry| entry.entry().message().and_then(assistant_usage))
}

/// The estimated size of a transcript (`estimateContextTokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextEstimate {
    /// `usage_tokens + trailing_tokens`.
    pub tokens: u64,
    /// The context size the last trustworthy usage reports (0 without one).
    pub usage_tokens: u64,
    /// Estimated tokens of the messages after that usage (all messages without one).
    pub trailing_tokens: u64,
    /// Index of the message whose usage was taken.
    pub last_usage_index: Option<usize>,
}

/// Estimates a transcript's context size: the last trustworthy assistant usage plus the
/// estimates of every message after it, or the sum of all estimates without such a usage.
pub fn estimate_context_tokens<M: Borrow<AgentMessage>>(messages: &[M]) -> ContextEstimate {
    let last_usage = messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(idx, message)| assistant_usage(message.borrow()).map(|usage| (idx, usage)));
    match last_usage {
        None => {
            let estimated = messages
                .iter()
                .map(|message| estimate_tokens(message.borrow()))
                .sum();
            ContextEstimate {
                tokens: estimated,
                usage_tokens: 0,
                trailing_tokens: estimated,
                last_usage_index: None,
            }
        }
        Some((idx, usage)) => {
            let usage_tokens = calculate_context_tokens(usage);
            let trailing_tokens = messages[idx + 1..]
                .iter()
                .map(|message| estimate_tokens(message.borrow()))
                .sum();
            ContextEstimate {
                tokens: usage_tokens + trailing_tokens,
                usage_tokens,
                trailing_tokens,
                last_usage_index: Some(idx),
            }
        }
    }
}

/// Returns whether a context of `context_tokens` must be compacted (`shouldCompact`):
/// enabled, and more than `context_window − reserve_tokens` (a window smaller than the reserve
/// makes every context too large, as in the reference).
pub fn should_compact(
    context_tokens: u64,
    context_window: u64,
    settings: &CompactionSettings,
) -> bool {
    settings.enabled
        && i128::from(context_tokens)
            > i128::from(context_window) - i128::from(settings.reserve_tokens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(value: Value) -> AgentMessage {
        AgentMessage::from_value(value)
    }

    #[test]
    fn js_length_counts_utf16_units() {
        assert_eq!(js_len(""), 0);
        assert_eq!(js_len("abc"), 3);
        assert_eq!(js_len("é"), 1);
        assert_eq!(js_len("€"), 1);
        assert_eq!(js_len("😀"), 2);
        assert_eq!(js_len("a😀b€"), 5);
    }

    #[test]
    fn the_spec_example_assistant_is_six_tokens() {
        let assistant = message(json!({"role":"assistant","content":[
            {"type":"text","text":"Hello"},
            {"type":"toolCall","id":"c","name":"read","arguments":{"path":"a.ts"}}
        ],"stopReason":"toolUse","timestamp":1}));
        assert_eq!(estimate_tokens(&assistant), 6);
    }

    #[test]
    fn estimates_follow_the_reference_per_role() {
        let user_blocks = message(json!({"role":"user","content":[
            {"type":"text","text":"abcde"},{"type":"image","data":"AAAA","mimeType":"image/png"}
        ],"timestamp":1}));
        // 1.6.0 counts a user image as 4800 characters (0.73.1 counted 0).
        assert_eq!(
            estimate_tokens(&user_blocks),
            1202,
            "images count 4800 characters for users"
        );
        let tool = message(
            json!({"role":"toolResult","toolCallId":"c","toolName":"read",
            "content":[{"type":"text","text":"abcd"},{"type":"image","data":"A","mimeType":"image/png"}],
            "isError":false,"timestamp":1}),
        );
        assert_eq!(estimate_tokens(&tool), 1201);
        let custom = message(
            json!({"role":"custom","customType":"x","content":"123456789",
            "display":true,"timestamp":1}),
        );
        assert_eq!(estimate_tokens(&custom), 3);
        let bash = message(
            json!({"role":"bashExecution","command":"ls","output":"a\nb",
            "cancelled":false,"truncated":false,"timestamp":1}),
        );
        assert_eq!(estimate_tokens(&bash), 2);
        let summary = message(
            json!({"role":"compactionSummary","summary":"12345","tokensBefore":1,"timestamp":1}),
        );
        assert_eq!(estimate_tokens(&summary), 2);
        let thinking = message(json!({"role":"assistant","content":[
            {"type":"thinking","thinking":"1234567"},{"type":"text","text":"😀"}
        ],"timestamp":1}));
        assert_eq!(estimate_tokens(&thinking), 3);
        let other = message(json!({"role":"somethingNew","content":"long text here"}));
        assert_eq!(estimate_tokens(&other), 0);
    }

    #[test]
    fn malformed_known_roles_are_estimated_from_their_json() {
        let user = message(json!({"role":"user","content":12,"timestamp":1}));
        assert!(matches!(user, AgentMessage::Unknown(_)));
        assert_eq!(estimate_tokens(&user), 0);
        let bash = message(json!({"role":"bashExecution","command":"abcdefgh","output":5}));
        assert!(matches!(bash, AgentMessage::Unknown(_)));
        assert_eq!(estimate_tokens(&bash), 2);
    }

    fn assistant(total: u64, stop: &str, timestamp: i64) -> AgentMessage {
        message(
            json!({"role":"assistant","content":[{"type":"text","text":"ok"}],
            "usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":total},
            "stopReason":stop,"timestamp":timestamp}),
        )
    }

    #[test]
    fn context_tokens_prefer_total_and_fall_back_to_the_parts() {
        let mut usage = Usage {
            input: 10,
            output: 5,
            cache_read: 100,
            cache_write: 7,
            total_tokens: 0,
            ..Usage::default()
        };
        assert_eq!(calculate_context_tokens(&usage), 122);
        usage.total_tokens = 50;
        assert_eq!(calculate_context_tokens(&usage), 50);
    }

    #[test]
    fn context_estimate_takes_the_last_valid_usage_and_estimates_the_rest() {
        let user = message(json!({"role":"user","content":"12345678","timestamp":1}));
        let messages = vec![
            user.clone(),
            assistant(1000, "stop", 2),
            user.clone(),
            assistant(5000, "error", 3),
            user.clone(),
        ];
        let estimate = estimate_context_tokens(&messages);
        assert_eq!(estimate.last_usage_index, Some(1));
        assert_eq!(estimate.usage_tokens, 1000);
        // user (2) + error assistant "ok" (1) + user (2)
        assert_eq!(estimate.trailing_tokens, 5);
        assert_eq!(estimate.tokens, 1005);
        let none = estimate_context_tokens(&[user.clone(), assistant(9, "aborted", 4)]);
        assert_eq!(none.last_usage_index, None);
        assert_eq!(none.usage_tokens, 0);
        assert_eq!(none.tokens, 3);
    }

    #[test]
    fn should_compact_uses_the_reserve_and_the_switch() {
        let settings = CompactionSettings::default();
        assert!(!should_compact(100_000 - 16_384, 100_000, &settings));
        assert!(should_compact(100_000 - 16_383, 100_000, &settings));
        assert!(
            should_compact(1, 1000, &settings),
            "window below the reserve"
        );
        let off = CompactionSettings {
            enabled: false,
            ..settings
        };
        assert!(!should_compact(1_000_000, 100_000, &off));
    }
}
