//! From the agent's transcript to what a provider is sent: the reference's `convertToLlm`
//! (`spec/context-building.md` §2), image blocking, and the per-request provider
//! normalisation `transformMessages` (`spec/models-providers-settings.md` §7).
//!
//! - [`convert_to_llm`] maps agent messages to the three LLM roles: `custom`,
//!   `bashExecution`, `branchSummary` and `compactionSummary` become user messages with the
//!   reference's exact wording; `bashExecution` with `excludeFromContext` and unknown roles are
//!   dropped.
//! - [`block_images`] applies the `images.blockImages` setting.
//! - [`transform_messages`] runs inside each protocol before its wire mapping: images for
//!   models without image input become placeholders; assistant messages from another
//!   `(provider, api, model)` lose their thinking (1.6.0: dropped, no longer sent as text),
//!   text signatures and tool-call signatures, and their tool-call ids are normalised (tool
//!   results remapped); error and aborted assistant messages are skipped; tool calls without a
//!   result get a synthetic error result; a system message arriving while tool calls are open
//!   waits until they are closed.
//!
//! Invariant: pure functions; the input is never modified.

use std::borrow::{Borrow, Cow};
use std::collections::{HashMap, HashSet};

use serde_json::Map;

use crate::ai::models::Model;
use crate::model::message::{
    AgentMessage, AssistantMessage, ContentBlock, StopReason, SystemMessage, TextContent,
    ToolResultMessage, UserContent, UserMessage,
};

/// A message as an LLM sees it (the reference's `Message`): user, assistant or tool result.
// Assistant messages are the common case of a transcript; boxing them would cost an
// allocation per message for no gain.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum LlmMessage {
    /// `role: "system"`: the prompt and tool loadout, or a patch of them (1.6.0).
    System(SystemMessage),
    /// `role: "user"`.
    User(UserMessage),
    /// `role: "assistant"`.
    Assistant(AssistantMessage),
    /// `role: "toolResult"`.
    ToolResult(ToolResultMessage),
}

/// The lead-in of a compaction summary sent to the model.
pub const COMPACTION_SUMMARY_PREFIX: &str = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
/// The closing of a compaction summary.
pub const COMPACTION_SUMMARY_SUFFIX: &str = "\n</summary>";
/// The lead-in of a branch summary sent to the model.
pub const BRANCH_SUMMARY_PREFIX: &str =
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
/// The closing of a branch summary.
pub const BRANCH_SUMMARY_SUFFIX: &str = "</summary>";
/// The text that replaces images when `images.blockImages` is set.
pub const IMAGE_BLOCKED_TEXT: &str = "Image reading is disabled.";
const NON_VISION_USER_IMAGE_PLACEHOLDER: &str = "(image omitted: model does not support images)";
const NON_VISION_TOOL_IMAGE_PLACEHOLDER: &str =
    "(tool image omitted: model does not support images)";

fn user_text(text: String, timestamp: i64) -> LlmMessage {
    LlmMessage::User(UserMessage {
        content: UserContent::Blocks(vec![ContentBlock::text(text)]),
        timestamp,
        extra: Map::new(),
    })
}

/// Returns the text a `!command` execution is shown to the model as (the reference's
/// `bashExecutionToText`).
pub fn bash_execution_text(message: &crate::model::message::BashExecutionMessage) -> String {
    let mut text = format!("Ran `{}`\n", message.command);
    if message.output.is_empty() {
        text.push_str("(no output)");
    } else {
        text.push_str(&format!("```\n{}\n```", message.output));
    }
    if message.cancelled {
        text.push_str("\n\n(command cancelled)");
    } else if let Some(code) = message.exit_code.filter(|code| *code != 0) {
        text.push_str(&format!("\n\nCommand exited with code {code}"));
    }
    if message.truncated
        && let Some(path) = &message.full_output_path
    {
        text.push_str(&format!("\n\n[Output truncated. Full output: {path}]"));
    }
    text
}

/// Maps the agent transcript to LLM messages (the reference's `convertToLlm`).
pub fn convert_to_llm(messages: &[AgentMessage]) -> Vec<LlmMessage> {
    // Sized once: `filter_map` gives `collect` no lower bound, and doubling a vector of the
    // whole context copies it again per doubling.
    let mut converted = Vec::with_capacity(messages.len());
    converted.extend(messages.iter().filter_map(|message| match message {
        AgentMessage::System(system) => Some(LlmMessage::System(system.clone())),
        AgentMessage::User(user) => Some(LlmMessage::User(user.clone())),
        AgentMessage::Assistant(assistant) => Some(LlmMessage::Assistant(assistant.clone())),
        AgentMessage::ToolResult(result) => Some(LlmMessage::ToolResult(result.clone())),
        AgentMessage::BashExecution(bash) => {
            if bash.exclude_from_context == Some(true) {
                None
            } else {
                Some(user_text(bash_execution_text(bash), bash.timestamp))
            }
        }
        AgentMessage::Custom(custom) => Some(LlmMessage::User(UserMessage {
            content: UserContent::Blocks(custom.content.to_blocks()),
            timestamp: custom.timestamp,
            extra: Map::new(),
        })),
        AgentMessage::BranchSummary(summary) => Some(user_text(
            format!(
                "{BRANCH_SUMMARY_PREFIX}{}{BRANCH_SUMMARY_SUFFIX}",
                summary.summary
            ),
            summary.timestamp,
        )),
        AgentMessage::CompactionSummary(summary) => Some(user_text(
            format!(
                "{COMPACTION_SUMMARY_PREFIX}{}{COMPACTION_SUMMARY_SUFFIX}",
                summary.summary
            ),
            summary.timestamp,
        )),
        AgentMessage::Unknown(value) => null_content_message(value),
    }));
    converted
}

/// A message whose `content` is `null` reads as one with no content (1.6.0's
/// `transformMessages` normalises `content == null` to `[]` before anything else), so a tool
/// result without content is still sent as that call's result.
fn null_content_message(value: &serde_json::Value) -> Option<LlmMessage> {
    let map = value.as_object()?;
    if !matches!(
        map.get("role").and_then(serde_json::Value::as_str),
        Some("user" | "assistant" | "toolResult")
    ) || !map.get("content").is_some_and(serde_json::Value::is_null)
    {
        return None;
    }
    let mut fixed = map.clone();
    fixed.insert("content".to_owned(), serde_json::Value::Array(Vec::new()));
    match AgentMessage::from_value(serde_json::Value::Object(fixed)) {
        AgentMessage::User(user) => Some(LlmMessage::User(user)),
        AgentMessage::Assistant(assistant) => Some(LlmMessage::Assistant(assistant)),
        AgentMessage::ToolResult(result) => Some(LlmMessage::ToolResult(result)),
        _ => None,
    }
}

/// Replaces images in user and tool-result messages by [`IMAGE_BLOCKED_TEXT`], collapsing
/// consecutive copies of that text (the `images.blockImages` setting).
pub fn block_images(messages: Vec<LlmMessage>) -> Vec<LlmMessage> {
    fn filter(blocks: &[ContentBlock]) -> Option<Vec<ContentBlock>> {
        if !blocks
            .iter()
            .any(|block| matches!(block, ContentBlock::Image(_)))
        {
            return None;
        }
        let replaced: Vec<ContentBlock> = blocks
            .iter()
            .map(|block| match block {
                ContentBlock::Image(_) => ContentBlock::text(IMAGE_BLOCKED_TEXT),
                other => other.clone(),
            })
            .collect();
        let mut out: Vec<ContentBlock> = Vec::with_capacity(replaced.len());
        for block in replaced {
            let is_notice = block.as_text() == Some(IMAGE_BLOCKED_TEXT);
            let previous_notice = out
                .last()
                .is_some_and(|previous| previous.as_text() == Some(IMAGE_BLOCKED_TEXT));
            if !(is_notice && previous_notice) {
                out.push(block);
            }
        }
        Some(out)
    }
    messages
        .into_iter()
        .map(|message| match message {
            LlmMessage::User(mut user) => {
                if let UserContent::Blocks(blocks) = &user.content
                    && let Some(filtered) = filter(blocks)
                {
                    user.content = UserContent::Blocks(filtered);
                }
                LlmMessage::User(user)
            }
            LlmMessage::ToolResult(mut result) => {
                if let Some(filtered) = filter(&result.content) {
                    result.content = filtered;
                }
                LlmMessage::ToolResult(result)
            }
            other => other,
        })
        .collect()
}

fn replace_images(content: &[ContentBlock], placeholder: &str) -> Vec<ContentBlock> {
    let mut out = Vec::with_capacity(content.len());
    let mut previous_was_placeholder = false;
    for block in content {
        if matches!(block, ContentBlock::Image(_)) {
            if !previous_was_placeholder {
                out.push(ContentBlock::text(placeholder));
            }
            previous_was_placeholder = true;
            continue;
        }
        previous_was_placeholder = block.as_text() == Some(placeholder);
        out.push(block.clone());
    }
    out
}

/// The provider normalisation applied to every request (the reference's
/// `transformMessages`); `normalize_id` maps a tool-call id from another model to one the
/// target protocol accepts.
///
/// Messages the normalisation leaves as they are are borrowed, not copied (every request
/// carries the whole context).
pub fn transform_messages<'a, M: Borrow<LlmMessage>>(
    messages: &'a [M],
    model: &Model,
    normalize_id: &dyn Fn(&str) -> String,
) -> Vec<Cow<'a, LlmMessage>> {
    let accepts_images = model.accepts_images();
    let has_image = |blocks: &[ContentBlock]| {
        blocks
            .iter()
            .any(|block| matches!(block, ContentBlock::Image(_)))
    };
    let mut id_map: HashMap<String, String> = HashMap::new();
    let mut transformed: Vec<Cow<'a, LlmMessage>> = Vec::with_capacity(messages.len());
    for message in messages {
        let message: &'a LlmMessage = message.borrow();
        let message = match message {
            LlmMessage::System(_) => Cow::Borrowed(message),
            LlmMessage::User(user) => match &user.content {
                UserContent::Blocks(blocks) if !accepts_images && has_image(blocks) => {
                    let mut user = user.clone();
                    user.content = UserContent::Blocks(replace_images(
                        blocks,
                        NON_VISION_USER_IMAGE_PLACEHOLDER,
                    ));
                    Cow::Owned(LlmMessage::User(user))
                }
                _ => Cow::Borrowed(message),
            },
            LlmMessage::ToolResult(result) => {
                let mapped = id_map.get(&result.tool_call_id);
                let replace = !accepts_images && has_image(&result.content);
                if mapped.is_none() && !replace {
                    Cow::Borrowed(message)
                } else {
                    let mut result = result.clone();
                    if replace {
                        result.content =
                            replace_images(&result.content, NON_VISION_TOOL_IMAGE_PLACEHOLDER);
                    }
                    if let Some(mapped) = mapped {
                        result.tool_call_id = mapped.clone();
                    }
                    Cow::Owned(LlmMessage::ToolResult(result))
                }
            }
            LlmMessage::Assistant(assistant) => {
                if assistant_unchanged(assistant, model) {
                    Cow::Borrowed(message)
                } else {
                    Cow::Owned(LlmMessage::Assistant(transform_assistant(
                        assistant,
                        model,
                        normalize_id,
                        &mut id_map,
                    )))
                }
            }
        };
        transformed.push(message);
    }

    // Second pass: skip failed turns, add results for tool calls that never got one; a
    // system message that arrives while tool calls are open waits until they are closed, so it
    // never separates a call from its result.
    let mut result: Vec<Cow<'a, LlmMessage>> = Vec::with_capacity(transformed.len());
    let mut pending: Vec<(String, String)> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut held: Vec<Cow<'a, LlmMessage>> = Vec::new();
    let flush = |result: &mut Vec<Cow<'a, LlmMessage>>,
                 pending: &mut Vec<(String, String)>,
                 answered: &mut HashSet<String>,
                 held: &mut Vec<Cow<'a, LlmMessage>>| {
        for (id, name) in pending.drain(..) {
            if !answered.contains(&id) {
                result.push(Cow::Owned(LlmMessage::ToolResult(ToolResultMessage {
                    tool_call_id: id,
                    tool_name: name,
                    content: vec![ContentBlock::text("No result provided")],
                    details: None,
                    usage: None,
                    is_error: true,
                    duration_ms: None,
                    timestamp: 0,
                    nested_calls: None,
                    extra: Map::new(),
                })));
            }
        }
        answered.clear();
        result.append(held);
    };
    for message in transformed {
        match &*message {
            LlmMessage::Assistant(assistant) => {
                flush(&mut result, &mut pending, &mut answered, &mut held);
                if matches!(
                    assistant.stop_reason,
                    StopReason::Error | StopReason::Aborted
                ) {
                    continue;
                }
                let calls: Vec<(String, String)> = assistant
                    .tool_calls()
                    .map(|call| (call.id.clone(), call.name.clone()))
                    .collect();
                if !calls.is_empty() {
                    pending = calls;
                    answered.clear();
                }
                result.push(message);
            }
            LlmMessage::ToolResult(tool) => {
                answered.insert(tool.tool_call_id.clone());
                result.push(message);
            }
            LlmMessage::System(_) => {
                if pending.is_empty() {
                    result.push(message);
                } else {
                    held.push(message);
                }
            }
            LlmMessage::User(_) => {
                flush(&mut result, &mut pending, &mut answered, &mut held);
                result.push(message);
            }
        }
    }
    flush(&mut result, &mut pending, &mut answered, &mut held);
    result
}

/// Whether [`transform_assistant`] would return `assistant` unchanged: it comes from this
/// very model (so nothing is normalised) and has no empty thinking block to drop.
fn assistant_unchanged(assistant: &AssistantMessage, model: &Model) -> bool {
    let same_model = assistant.provider == model.provider
        && assistant.api == model.api
        && assistant.model == model.id;
    same_model
        && assistant.content.iter().all(|block| match block {
            ContentBlock::Thinking(thinking) => {
                thinking.redacted == Some(true)
                    || thinking
                        .thinking_signature
                        .as_deref()
                        .is_some_and(|sig| !sig.is_empty())
                    || !thinking.thinking.trim().is_empty()
            }
            _ => true,
        })
}

fn transform_assistant(
    assistant: &AssistantMessage,
    model: &Model,
    normalize_id: &dyn Fn(&str) -> String,
    id_map: &mut HashMap<String, String>,
) -> AssistantMessage {
    let same_model = assistant.provider == model.provider
        && assistant.api == model.api
        && assistant.model == model.id;
    let mut out = assistant.clone();
    out.content = assistant
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Thinking(thinking) => {
                // Another model's thinking is dropped: its signatures only replay to the model
                // that made them, and readable thinking sent as text would read as the reply.
                if !same_model {
                    return None;
                }
                if thinking.redacted == Some(true)
                    || thinking
                        .thinking_signature
                        .as_deref()
                        .is_some_and(|sig| !sig.is_empty())
                {
                    return Some(block.clone());
                }
                if thinking.thinking.trim().is_empty() {
                    return None;
                }
                Some(block.clone())
            }
            ContentBlock::Text(text) => {
                if same_model {
                    Some(block.clone())
                } else {
                    Some(ContentBlock::Text(TextContent {
                        text: text.text.clone(),
                        text_signature: None,
                        extra: Map::new(),
                    }))
                }
            }
            ContentBlock::ToolCall(call) => {
                let mut call = call.clone();
                if !same_model {
                    call.thought_signature = None;
                    let normalized = normalize_id(&call.id);
                    if normalized != call.id {
                        id_map.insert(call.id.clone(), normalized.clone());
                        call.id = normalized;
                    }
                }
                Some(ContentBlock::ToolCall(call))
            }
            ContentBlock::Image(_) | ContentBlock::Unknown(_) => Some(block.clone()),
        })
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ai::models::builtin_models;

    fn agent(value: serde_json::Value) -> AgentMessage {
        AgentMessage::from_value(value)
    }

    fn texts(message: &LlmMessage) -> Vec<String> {
        let blocks = match message {
            LlmMessage::System(system) => vec![ContentBlock::text(system.content_text())],
            LlmMessage::User(user) => user.content.to_blocks(),
            LlmMessage::ToolResult(result) => result.content.clone(),
            LlmMessage::Assistant(assistant) => assistant.content.clone(),
        };
        blocks
            .iter()
            .map(|block| match block {
                ContentBlock::Text(text) => text.text.clone(),
                ContentBlock::Image(_) => "<image>".into(),
                ContentBlock::Thinking(thinking) => format!("<thinking {}>", thinking.thinking),
                ContentBlock::ToolCall(call) => format!("<call {}>", call.id),
                ContentBlock::Unknown(_) => "<unknown>".into(),
            })
            .collect()
    }

    #[test]
    fn convert_to_llm_uses_the_reference_wording() {
        let messages = [
            agent(
                json!({"role":"bashExecution","command":"ls","output":"a\nb","exitCode":2,"cancelled":false,"truncated":true,"fullOutputPath":"/tmp/o","timestamp":1}),
            ),
            agent(
                json!({"role":"bashExecution","command":"x","output":"","cancelled":false,"truncated":false,"excludeFromContext":true,"timestamp":2}),
            ),
            agent(
                json!({"role":"bashExecution","command":"sleep","output":"","cancelled":true,"truncated":false,"timestamp":3}),
            ),
            agent(
                json!({"role":"custom","customType":"c","content":"hello","display":true,"timestamp":4}),
            ),
            agent(json!({"role":"branchSummary","summary":"S","fromId":"x","timestamp":5})),
            agent(json!({"role":"compactionSummary","summary":"C","tokensBefore":9,"timestamp":6})),
            agent(json!({"role":"weird","timestamp":7})),
            agent(
                json!({"role":"toolResult","toolCallId":"c","toolName":"ls","content":null,"isError":false,"timestamp":8}),
            ),
        ];
        let converted = convert_to_llm(&messages);
        assert_eq!(converted.len(), 6);
        let LlmMessage::ToolResult(result) = &converted[5] else {
            panic!("{:?}", converted[5])
        };
        assert!(result.content.is_empty(), "null content reads as none");
        assert_eq!(
            texts(&converted[0]),
            [
                "Ran `ls`\n```\na\nb\n```\n\nCommand exited with code 2\n\n[Output truncated. Full output: /tmp/o]"
            ]
        );
        assert_eq!(
            texts(&converted[1]),
            ["Ran `sleep`\n(no output)\n\n(command cancelled)"]
        );
        assert_eq!(texts(&converted[2]), ["hello"]);
        assert_eq!(
            texts(&converted[3]),
            [
                "The following is a summary of a branch that this conversation came back from:\n\n<summary>\nS</summary>"
            ]
        );
        assert_eq!(
            texts(&converted[4]),
            [
                "The conversation history before this point was compacted into the following summary:\n\n<summary>\nC\n</summary>"
            ]
        );
    }

    #[test]
    fn blocked_images_collapse_into_one_notice() {
        let messages = convert_to_llm(&[agent(json!({"role":"user","content":[
            {"type":"image","data":"A","mimeType":"image/png"},
            {"type":"image","data":"B","mimeType":"image/png"},
            {"type":"text","text":"look"}],"timestamp":1}))]);
        let blocked = block_images(messages);
        assert_eq!(texts(&blocked[0]), [IMAGE_BLOCKED_TEXT, "look"]);
    }

    #[test]
    fn other_models_lose_signatures_and_orphans_get_results() {
        let model = builtin_models()
            .iter()
            .find(|model| model.provider == "anthropic" && model.id == "claude-sonnet-4-5")
            .unwrap()
            .clone();
        let messages = convert_to_llm(&[
            agent(json!({"role":"user","content":"hi","timestamp":1})),
            agent(json!({"role":"assistant","content":[
                {"type":"thinking","thinking":"hmm","thinkingSignature":"reasoning_content"},
                {"type":"thinking","thinking":"  "},
                {"type":"toolCall","id":"call|ABC+/=","name":"ls","arguments":{},"thoughtSignature":"x"}],
                "api":"openai-responses","provider":"openai","model":"gpt-5","usage":{},"stopReason":"toolUse","timestamp":2})),
            agent(
                json!({"role":"toolResult","toolCallId":"call|ABC+/=","toolName":"ls","content":[{"type":"image","data":"A","mimeType":"image/png"}],"isError":false,"timestamp":3}),
            ),
            agent(
                json!({"role":"assistant","content":[{"type":"toolCall","id":"t2","name":"read","arguments":{}}],
                "api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{},"stopReason":"toolUse","timestamp":4}),
            ),
            agent(
                json!({"role":"assistant","content":[{"type":"text","text":"partial"}],
                "api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{},"stopReason":"aborted","timestamp":5}),
            ),
            agent(json!({"role":"user","content":"next","timestamp":6})),
        ]);
        let normalize = |id: &str| {
            id.replace(
                |c: char| !c.is_ascii_alphanumeric() && c != '_' && c != '-',
                "_",
            )
        };
        let out = transform_messages(&messages, &model, &normalize);
        assert_eq!(out.len(), 6);
        // What the normalisation leaves alone is borrowed; what it changes is a copy.
        assert!(matches!(out[0], Cow::Borrowed(_)), "the user message");
        assert!(
            matches!(out[1], Cow::Owned(_)),
            "another model's assistant message"
        );
        assert!(
            matches!(out[2], Cow::Owned(_)),
            "a result whose call id was mapped"
        );
        assert!(
            matches!(out[3], Cow::Borrowed(_)),
            "this model's assistant message"
        );
        // 1.6.0: another model's thinking is dropped, not replayed as text.
        assert_eq!(texts(&out[1]), ["<call call_ABC___>"]);
        let LlmMessage::Assistant(first) = &*out[1] else {
            panic!()
        };
        assert!(
            first
                .tool_calls()
                .all(|call| call.thought_signature.is_none())
        );
        let LlmMessage::ToolResult(result) = &*out[2] else {
            panic!()
        };
        assert_eq!(result.tool_call_id, "call_ABC___");
        // The orphaned call t2 gets a synthetic result before the next user message; the
        // aborted turn is dropped.
        let LlmMessage::ToolResult(synthetic) = &*out[4] else {
            panic!("{:?}", out[4])
        };
        assert_eq!(synthetic.tool_call_id, "t2");
        assert!(synthetic.is_error);
        assert_eq!(texts(&out[4]), ["No result provided"]);
    }

    #[test]
    fn a_system_message_between_a_call_and_its_result_waits_for_the_result() {
        let model = builtin_models()
            .iter()
            .find(|model| model.provider == "anthropic" && model.id == "claude-sonnet-4-5")
            .unwrap()
            .clone();
        let messages = convert_to_llm(&[
            agent(json!({"role":"system","content":"p","timestamp":0})),
            agent(json!({"role":"user","content":"hi","timestamp":1})),
            agent(json!({"role":"assistant","content":[
                {"type":"toolCall","id":"a","name":"ls","arguments":{}},
                {"type":"toolCall","id":"b","name":"ls","arguments":{}}],
                "api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{},"stopReason":"toolUse","timestamp":2})),
            agent(
                json!({"role":"toolResult","toolCallId":"a","toolName":"ls","content":[],"isError":false,"timestamp":3}),
            ),
            agent(json!({"role":"system","content":"update","timestamp":4})),
            agent(json!({"role":"user","content":"next","timestamp":5})),
        ]);
        let out = transform_messages(&messages, &model, &|id: &str| id.to_owned());
        let roles: Vec<String> = out
            .iter()
            .map(|message| match &**message {
                LlmMessage::System(system) => format!("system:{}", system.content_text()),
                LlmMessage::User(_) => "user".to_owned(),
                LlmMessage::Assistant(_) => "assistant".to_owned(),
                LlmMessage::ToolResult(result) => format!("result:{}", result.tool_call_id),
            })
            .collect();
        assert_eq!(
            roles,
            [
                "system:p",
                "user",
                "assistant",
                "result:a",
                "result:b",
                "system:update",
                "user"
            ]
        );
    }

    #[test]
    fn images_become_placeholders_for_text_only_models() {
        let mut model = builtin_models()[0].clone();
        model.input = vec!["text".into()];
        let messages = convert_to_llm(&[
            agent(
                json!({"role":"user","content":[{"type":"image","data":"A","mimeType":"image/png"},{"type":"image","data":"B","mimeType":"image/png"},{"type":"text","text":"t"}],"timestamp":1}),
            ),
            agent(
                json!({"role":"toolResult","toolCallId":"c","toolName":"read","content":[{"type":"image","data":"A","mimeType":"image/png"}],"isError":false,"timestamp":2}),
            ),
        ]);
        let out = transform_messages(&messages, &model, &|id: &str| id.to_owned());
        assert_eq!(texts(&out[0]), [NON_VISION_USER_IMAGE_PLACEHOLDER, "t"]);
        assert_eq!(texts(&out[1]), [NON_VISION_TOOL_IMAGE_PLACEHOLDER]);
    }
}
