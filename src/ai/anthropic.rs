//! The `anthropic-messages` wire protocol: `POST <baseUrl>/v1/messages` with `stream: true`
//! (`spec/models-providers-settings.md` §6.9, §9, §10).
//!
//! Two pure halves:
//! - [`build_request`]: headers (`x-api-key`, `anthropic-version`, betas; OAuth mode for
//!   `sk-ant-oat` keys), and the body — system blocks, messages with thinking signatures and
//!   tool results, tools, thinking (adaptive or budget) and `cache_control` markers — in the
//!   reference's construction order.
//! - [`AnthropicDecoder`]: typed SSE events → [`StreamEvent`]s and the assistant message.
//!
//! A stream looks like:
//!
//! ```text
//! event: message_start
//! data: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":25,"output_tokens":1}}}
//!
//! event: content_block_start
//! data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}
//!
//! event: content_block_delta
//! data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}
//!
//! event: content_block_stop
//! data: {"type":"content_block_stop","index":0}
//!
//! event: message_delta
//! data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}
//!
//! event: message_stop
//! data: {"type":"message_stop"}
//! ```
//!
//! Only the six message events are processed (`ping` and unknown events are ignored);
//! `event: error` fails the call with the raw data text; a stream without `message_stop`
//! fails with `Anthropic stream ended before message_stop` (also when `message_start` never
//! came — the reference would return an empty answer there).

use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::ai::convert::{LlmMessage, transform_messages};
use crate::ai::models::{
    LevelMapping, Model, ModelCost, ThinkingLevel, calculate_cost, clamp_thinking_level,
};
use crate::ai::openai::{lenient_num, lenient_str, utf16_prefix};
use crate::ai::partial_json::{parse_json_with_repair, parse_streaming_json};
use crate::ai::transport::{WireRequest, set_header_ci};
use crate::ai::{
    CacheRetention, Request, StreamEvent, StreamOptions, default_max_tokens, join_url,
};
use crate::model::message::{
    AssistantMessage, ContentBlock, StopReason, TextContent, ThinkingContent, ToolCall,
    ToolResultMessage, UserContent,
};

const FINE_GRAINED_TOOL_STREAMING_BETA: &str = "fine-grained-tool-streaming-2025-05-14";
const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";
const CLAUDE_CODE_VERSION: &str = "2.1.75";
const CLAUDE_CODE_IDENTITY: &str = "You are Claude Code, Anthropic's official CLI for Claude.";
const CLAUDE_CODE_TOOLS: &[&str] = &[
    "Read",
    "Write",
    "Edit",
    "Bash",
    "Grep",
    "Glob",
    "AskUserQuestion",
    "EnterPlanMode",
    "ExitPlanMode",
    "KillShell",
    "NotebookEdit",
    "Skill",
    "Task",
    "TaskOutput",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
];

/// Whether the key is an Anthropic OAuth token (switches the request to OAuth mode).
pub fn is_oauth_token(key: &str) -> bool {
    key.contains("sk-ant-oat")
}

/// Models that think adaptively (`thinking: {type: "adaptive"}` + `output_config.effort`).
pub fn supports_adaptive_thinking(model_id: &str) -> bool {
    [
        "opus-4-6",
        "opus-4.6",
        "opus-4-7",
        "opus-4.7",
        "sonnet-4-6",
        "sonnet-4.6",
    ]
    .iter()
    .any(|marker| model_id.contains(marker))
}

fn to_claude_code_name(name: &str) -> String {
    let lower = name.to_lowercase();
    CLAUDE_CODE_TOOLS
        .iter()
        .find(|tool| tool.to_lowercase() == lower)
        .map_or_else(|| name.to_owned(), |tool| (*tool).to_owned())
}

/// The tool-call id normalisation for this protocol: `[A-Za-z0-9_-]`, at most 64 long.
pub fn normalize_tool_call_id(id: &str) -> String {
    let cleaned: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    utf16_prefix(&cleaned, 64)
}

fn eager_tool_streaming(model: &Model) -> bool {
    model
        .compat_bool("supportsEagerToolInputStreaming")
        .unwrap_or(true)
}

fn cache_control(model: &Model, retention: CacheRetention) -> Option<Value> {
    match retention {
        CacheRetention::None => None,
        CacheRetention::Short => Some(json!({"type": "ephemeral"})),
        CacheRetention::Long => {
            if model
                .compat_bool("supportsLongCacheRetention")
                .unwrap_or(true)
            {
                Some(json!({"type": "ephemeral", "ttl": "1h"}))
            } else {
                Some(json!({"type": "ephemeral"}))
            }
        }
    }
}

/// The thinking decision for one call.
struct Thinking {
    /// `Some(true)` enabled, `Some(false)` disabled (sent only for reasoning models).
    enabled: bool,
    effort: Option<String>,
    budget: Option<u64>,
    max_tokens: Option<u64>,
}

fn plan_thinking(model: &Model, options: &StreamOptions) -> Thinking {
    let base_max = default_max_tokens(model, options.max_tokens);
    let level = match options.thinking {
        ThinkingLevel::Off => None,
        requested => {
            Some(clamp_thinking_level(model, requested)).filter(|l| *l != ThinkingLevel::Off)
        }
    };
    let Some(level) = level else {
        return Thinking {
            enabled: false,
            effort: None,
            budget: None,
            max_tokens: base_max,
        };
    };
    if supports_adaptive_thinking(&model.id) {
        let effort = match model.level_mapping(level) {
            LevelMapping::Value(value) => value.to_owned(),
            LevelMapping::Absent | LevelMapping::Unsupported => match level {
                ThinkingLevel::Minimal | ThinkingLevel::Low => "low".to_owned(),
                ThinkingLevel::Medium => "medium".to_owned(),
                _ => "high".to_owned(),
            },
        };
        return Thinking {
            enabled: true,
            effort: Some(effort),
            budget: None,
            max_tokens: base_max,
        };
    }
    let budgets = &options.thinking_budgets;
    let mut budget = match level {
        ThinkingLevel::Minimal => budgets.minimal,
        ThinkingLevel::Low => budgets.low,
        ThinkingLevel::Medium => budgets.medium,
        ThinkingLevel::High | ThinkingLevel::Xhigh | ThinkingLevel::Max | ThinkingLevel::Off => {
            budgets.high
        }
    };
    let max_tokens = (base_max.unwrap_or(0) + budget).min(model.max_tokens);
    if max_tokens <= budget {
        budget = max_tokens.saturating_sub(1024);
    }
    Thinking {
        enabled: true,
        effort: None,
        budget: Some(budget),
        max_tokens: Some(max_tokens),
    }
}

/// Builds the HTTP request of one call (the reference's `createClient` + `buildParams`).
pub fn build_request(model: &Model, request: &Request, options: &StreamOptions) -> WireRequest {
    let base_url = options.base_url.as_deref().unwrap_or(&model.base_url);
    let api_key = options.api_key.clone().unwrap_or_default();
    let oauth = model.provider != "github-copilot"
        && model.provider != "cloudflare-ai-gateway"
        && is_oauth_token(&api_key);
    let mut betas: Vec<&str> = Vec::new();
    if !request.tools.is_empty() && !eager_tool_streaming(model) {
        betas.push(FINE_GRAINED_TOOL_STREAMING_BETA);
    }
    if !supports_adaptive_thinking(&model.id) {
        betas.push(INTERLEAVED_THINKING_BETA);
    }

    let mut headers: Vec<(String, String)> = Vec::new();
    match model.provider.as_str() {
        "cloudflare-ai-gateway" => {
            headers.push(("cf-aig-authorization".into(), format!("Bearer {api_key}")));
        }
        "github-copilot" => headers.push(("Authorization".into(), format!("Bearer {api_key}"))),
        _ if oauth => headers.push(("Authorization".into(), format!("Bearer {api_key}"))),
        _ => headers.push(("x-api-key".into(), api_key.clone())),
    }
    headers.push(("anthropic-version".into(), "2023-06-01".into()));
    headers.push(("content-type".into(), "application/json".into()));
    headers.push(("accept".into(), "application/json".into()));
    headers.push((
        "anthropic-dangerous-direct-browser-access".into(),
        "true".into(),
    ));
    if oauth {
        let mut all = vec!["claude-code-20250219", "oauth-2025-04-20"];
        all.extend(betas.iter().copied());
        headers.push(("anthropic-beta".into(), all.join(",")));
        headers.push((
            "user-agent".into(),
            format!("claude-cli/{CLAUDE_CODE_VERSION}"),
        ));
        headers.push(("x-app".into(), "cli".into()));
    } else if !betas.is_empty() {
        headers.push(("anthropic-beta".into(), betas.join(",")));
    }
    for (name, value) in model.headers.iter().flatten() {
        if let Some(value) = value.as_str() {
            set_header_ci(&mut headers, name, value);
        }
    }
    for (name, value) in &options.headers {
        set_header_ci(&mut headers, name, value);
    }

    WireRequest {
        url: join_url(base_url, "v1/messages"),
        headers,
        body: build_body(model, request, options, oauth),
    }
}

/// The request body (the reference's `buildParams`), in its key order.
pub fn build_body(model: &Model, request: &Request, options: &StreamOptions, oauth: bool) -> Value {
    let cache = cache_control(model, options.cache_retention);
    let thinking = plan_thinking(model, options);
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert(
        "messages".into(),
        Value::Array(convert_messages(
            &request.messages,
            model,
            oauth,
            cache.as_ref(),
        )),
    );
    let max_tokens = thinking
        .max_tokens
        .filter(|max| *max > 0)
        .unwrap_or(model.max_tokens / 3);
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    let system_block = |text: &str| {
        let mut block = Map::new();
        block.insert("type".into(), json!("text"));
        block.insert("text".into(), json!(text));
        if let Some(cache) = &cache {
            block.insert("cache_control".into(), cache.clone());
        }
        Value::Object(block)
    };
    if oauth {
        let mut system = vec![system_block(CLAUDE_CODE_IDENTITY)];
        if !request.system_prompt.is_empty() {
            system.push(system_block(&request.system_prompt));
        }
        body.insert("system".into(), Value::Array(system));
    } else if !request.system_prompt.is_empty() {
        body.insert(
            "system".into(),
            json!([system_block(&request.system_prompt)]),
        );
    }
    if !request.tools.is_empty() {
        let eager = eager_tool_streaming(model);
        let last = request.tools.len() - 1;
        let tools: Vec<Value> = request
            .tools
            .iter()
            .enumerate()
            .map(|(idx, tool)| {
                let mut out = Map::new();
                let name = if oauth {
                    to_claude_code_name(&tool.name)
                } else {
                    tool.name.clone()
                };
                out.insert("name".into(), json!(name));
                out.insert("description".into(), json!(tool.description));
                if eager {
                    out.insert("eager_input_streaming".into(), json!(true));
                }
                let properties = tool
                    .parameters
                    .get("properties")
                    .filter(|value| !value.is_null())
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                let required = tool
                    .parameters
                    .get("required")
                    .filter(|value| !value.is_null())
                    .cloned()
                    .unwrap_or_else(|| json!([]));
                out.insert(
                    "input_schema".into(),
                    json!({"type": "object", "properties": properties, "required": required}),
                );
                if idx == last
                    && let Some(cache) = &cache
                {
                    out.insert("cache_control".into(), cache.clone());
                }
                Value::Object(out)
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if model.reasoning {
        if thinking.enabled {
            if supports_adaptive_thinking(&model.id) {
                body.insert(
                    "thinking".into(),
                    json!({"type": "adaptive", "display": "summarized"}),
                );
                if let Some(effort) = thinking.effort {
                    body.insert("output_config".into(), json!({"effort": effort}));
                }
            } else {
                let budget = thinking.budget.filter(|budget| *budget > 0).unwrap_or(1024);
                body.insert(
                    "thinking".into(),
                    json!({"type": "enabled", "budget_tokens": budget, "display": "summarized"}),
                );
            }
        } else {
            body.insert("thinking".into(), json!({"type": "disabled"}));
        }
    }
    Value::Object(body)
}

fn image_block(image: &crate::model::message::ImageContent) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": image.mime_type, "data": image.data}})
}

fn tool_result_content(result: &ToolResultMessage) -> Value {
    let has_images = result
        .content
        .iter()
        .any(|block| matches!(block, ContentBlock::Image(_)));
    if !has_images {
        let text = result
            .content
            .iter()
            .map(|block| block.as_text().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        return json!(text);
    }
    let mut blocks: Vec<Value> = result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(json!({"type": "text", "text": text.text})),
            ContentBlock::Image(image) => Some(image_block(image)),
            ContentBlock::Thinking(_) | ContentBlock::ToolCall(_) | ContentBlock::Unknown(_) => {
                None
            }
        })
        .collect();
    if !blocks.iter().any(|block| block["type"] == "text") {
        blocks.insert(0, json!({"type": "text", "text": "(see attached image)"}));
    }
    Value::Array(blocks)
}

/// Maps the conversation to Messages API messages (the reference's `convertMessages`).
pub fn convert_messages(
    messages: &[LlmMessage],
    model: &Model,
    oauth: bool,
    cache: Option<&Value>,
) -> Vec<Value> {
    let transformed = transform_messages(messages, model, &normalize_tool_call_id);
    let transformed: Vec<&LlmMessage> = transformed.iter().map(|message| &**message).collect();
    let mut params: Vec<Value> = Vec::with_capacity(transformed.len());
    let mut idx = 0;
    while idx < transformed.len() {
        match &transformed[idx] {
            // Provisional until the 1.6.0 request shaping lands: the prompt comes from
            // `system_prompt`.
            LlmMessage::System(_) => {}
            LlmMessage::User(user) => match &user.content {
                UserContent::Text(text) => {
                    if !text.trim().is_empty() {
                        params.push(json!({"role": "user", "content": text}));
                    }
                }
                UserContent::Blocks(blocks) => {
                    let content: Vec<Value> = blocks
                        .iter()
                        .filter_map(|block| match block {
                            ContentBlock::Text(text) if !text.text.trim().is_empty() => {
                                Some(json!({"type": "text", "text": text.text}))
                            }
                            ContentBlock::Image(image) => Some(image_block(image)),
                            _ => None,
                        })
                        .collect();
                    if !content.is_empty() {
                        params.push(json!({"role": "user", "content": content}));
                    }
                }
            },
            LlmMessage::Assistant(assistant) => {
                let mut blocks = Vec::new();
                for block in &assistant.content {
                    match block {
                        ContentBlock::Text(text) => {
                            if !text.text.trim().is_empty() {
                                blocks.push(json!({"type": "text", "text": text.text}));
                            }
                        }
                        ContentBlock::Thinking(thinking) => {
                            if thinking.redacted == Some(true) {
                                let mut redacted = Map::new();
                                redacted.insert("type".into(), json!("redacted_thinking"));
                                if let Some(data) = &thinking.thinking_signature {
                                    redacted.insert("data".into(), json!(data));
                                }
                                blocks.push(Value::Object(redacted));
                                continue;
                            }
                            if thinking.thinking.trim().is_empty() {
                                continue;
                            }
                            match thinking.thinking_signature.as_deref() {
                                Some(signature) if !signature.trim().is_empty() => blocks.push(
                                    json!({"type": "thinking", "thinking": thinking.thinking, "signature": signature}),
                                ),
                                _ => blocks.push(json!({"type": "text", "text": thinking.thinking})),
                            }
                        }
                        ContentBlock::ToolCall(call) => {
                            let name = if oauth {
                                to_claude_code_name(&call.name)
                            } else {
                                call.name.clone()
                            };
                            let input = if call.arguments.is_null() {
                                json!({})
                            } else {
                                call.arguments.clone()
                            };
                            blocks.push(json!({"type": "tool_use", "id": call.id, "name": name, "input": input}));
                        }
                        ContentBlock::Image(_) | ContentBlock::Unknown(_) => {}
                    }
                }
                if !blocks.is_empty() {
                    params.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            LlmMessage::ToolResult(_) => {
                let mut results = Vec::new();
                while let Some(LlmMessage::ToolResult(result)) = transformed.get(idx) {
                    results.push(json!({
                        "type": "tool_result",
                        "tool_use_id": result.tool_call_id,
                        "content": tool_result_content(result),
                        "is_error": result.is_error,
                    }));
                    idx += 1;
                }
                params.push(json!({"role": "user", "content": results}));
                continue;
            }
        }
        idx += 1;
    }
    if let Some(cache) = cache
        && let Some(last) = params.last_mut()
        && last["role"] == "user"
    {
        match &mut last["content"] {
            Value::Array(blocks) => {
                if let Some(Value::Object(block)) = blocks.last_mut()
                    && matches!(
                        block.get("type").and_then(Value::as_str),
                        Some("text" | "image" | "tool_result")
                    )
                {
                    block.insert("cache_control".into(), cache.clone());
                }
            }
            Value::String(text) => {
                let text = std::mem::take(text);
                last["content"] = json!([{"type": "text", "text": text, "cache_control": cache}]);
            }
            _ => {}
        }
    }
    params
}

// ---------------------------------------------------------------------------------------
// Decoding

#[derive(Deserialize, Default)]
struct RawUsage {
    #[serde(default, deserialize_with = "lenient_num")]
    input_tokens: Option<f64>,
    #[serde(default, deserialize_with = "lenient_num")]
    output_tokens: Option<f64>,
    #[serde(default, deserialize_with = "lenient_num")]
    cache_read_input_tokens: Option<f64>,
    #[serde(default, deserialize_with = "lenient_num")]
    cache_creation_input_tokens: Option<f64>,
}

#[derive(Deserialize)]
struct MessageStart {
    message: StartedMessage,
}

#[derive(Deserialize)]
struct StartedMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    usage: RawUsage,
}

#[derive(Deserialize)]
struct BlockStart {
    index: Value,
    content_block: Value,
}

#[derive(Deserialize)]
struct BlockDelta<'a> {
    index: Value,
    #[serde(borrow)]
    delta: DeltaBody<'a>,
}

#[derive(Deserialize)]
struct DeltaBody<'a> {
    #[serde(rename = "type", default, borrow, deserialize_with = "lenient_str")]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    text: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    thinking: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    partial_json: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    signature: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Deserialize)]
struct BlockStop {
    index: Value,
}

#[derive(Deserialize)]
struct MessageDelta {
    #[serde(default)]
    delta: MessageDeltaBody,
    #[serde(default)]
    usage: Option<RawUsage>,
}

#[derive(Deserialize, Default)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

fn tokens(value: Option<f64>) -> u64 {
    value
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(|v| v as u64)
        .unwrap_or(0)
}

fn map_stop_reason(reason: &str) -> Result<StopReason, String> {
    match reason {
        "end_turn" | "pause_turn" | "stop_sequence" => Ok(StopReason::Stop),
        "max_tokens" => Ok(StopReason::Length),
        "tool_use" => Ok(StopReason::ToolUse),
        "refusal" | "sensitive" => Ok(StopReason::Error),
        other => Err(format!("Unhandled stop reason: {other}")),
    }
}

struct BlockState {
    /// The event `index` this block answers to, until its `content_block_stop`.
    stream_index: Option<Value>,
    partial_json: String,
    dirty: bool,
}

/// Turns Messages API stream events into events and the assistant message (pure: feed it
/// each SSE frame's event name and data).
pub struct AnthropicDecoder {
    message: AssistantMessage,
    cost: ModelCost,
    blocks: Vec<BlockState>,
    /// Local tool names, to map Claude Code casing back (OAuth mode).
    tool_names: Option<Vec<String>>,
    saw_start: bool,
}

impl AnthropicDecoder {
    /// Starts decoding into `message`; `oauth_tools` are the request's tool names when the call
    /// runs in OAuth mode (tool names are then mapped back to the local casing).
    pub fn new(message: AssistantMessage, model: &Model, oauth_tools: Option<Vec<String>>) -> Self {
        Self {
            message,
            cost: model.cost.clone(),
            blocks: Vec::new(),
            tool_names: oauth_tools,
            saw_start: false,
        }
    }

    /// Returns the message as built so far.
    pub fn message(&self) -> &AssistantMessage {
        &self.message
    }

    /// Returns the message for final edits.
    pub fn message_mut(&mut self) -> &mut AssistantMessage {
        &mut self.message
    }

    /// Takes the message.
    pub fn into_message(self) -> AssistantMessage {
        self.message
    }

    /// Re-parses tool arguments that received JSON since the last call.
    pub fn refresh(&mut self) {
        for (index, state) in self.blocks.iter_mut().enumerate() {
            if state.dirty {
                state.dirty = false;
                if let Some(ContentBlock::ToolCall(call)) = self.message.content.get_mut(index) {
                    call.arguments = parse_streaming_json(&state.partial_json);
                }
            }
        }
    }

    fn find_block(&self, index: &Value) -> Option<usize> {
        self.blocks
            .iter()
            .position(|state| state.stream_index.as_ref() == Some(index))
    }

    fn recompute_usage(&mut self) {
        let usage = &mut self.message.usage;
        usage.total_tokens = usage.input + usage.output + usage.cache_read + usage.cache_write;
        calculate_cost(&self.cost, usage);
    }

    /// Processes one SSE frame. `Ok(true)` at `message_stop`; `Err` with the error text for
    /// `event: error`, unreadable data or an unknown stop reason.
    pub fn on_frame(
        &mut self,
        event: &str,
        data: &str,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, String> {
        if event == "error" {
            return Err(data.to_owned());
        }
        let known = matches!(
            event,
            "message_start"
                | "message_delta"
                | "message_stop"
                | "content_block_start"
                | "content_block_delta"
                | "content_block_stop"
        );
        if !known {
            return Ok(false);
        }
        let fail = |err: &dyn std::fmt::Display| {
            format!("Could not parse Anthropic SSE event {event}: {err}; data={data}")
        };
        match event {
            "content_block_delta" => {
                // The hot path: parse straight into the typed shape.
                let parsed: BlockDelta<'_> = match serde_json::from_str(data) {
                    Ok(parsed) => parsed,
                    Err(_) => {
                        let value = parse_json_with_repair(data).map_err(|err| fail(&err))?;
                        let parsed: BlockDelta<'_> =
                            BlockDelta::deserialize(&value).map_err(|err| fail(&err))?;
                        return self.on_delta(parsed, out).map(|()| false);
                    }
                };
                self.on_delta(parsed, out)?;
                Ok(false)
            }
            "message_stop" => Ok(true),
            _ => {
                let value = parse_json_with_repair(data).map_err(|err| fail(&err))?;
                match event {
                    "message_start" => {
                        let start: MessageStart =
                            serde_json::from_value(value).map_err(|err| fail(&err))?;
                        self.saw_start = true;
                        self.message.response_id = start.message.id;
                        let usage = &start.message.usage;
                        self.message.usage.input = tokens(usage.input_tokens);
                        self.message.usage.output = tokens(usage.output_tokens);
                        self.message.usage.cache_read = tokens(usage.cache_read_input_tokens);
                        self.message.usage.cache_write = tokens(usage.cache_creation_input_tokens);
                        self.recompute_usage();
                    }
                    "content_block_start" => {
                        let start: BlockStart =
                            serde_json::from_value(value).map_err(|err| fail(&err))?;
                        self.on_block_start(start, out);
                    }
                    "content_block_stop" => {
                        let stop: BlockStop =
                            serde_json::from_value(value).map_err(|err| fail(&err))?;
                        self.on_block_stop(&stop.index, out);
                    }
                    "message_delta" => {
                        let delta: MessageDelta =
                            serde_json::from_value(value).map_err(|err| fail(&err))?;
                        if let Some(reason) =
                            delta.delta.stop_reason.as_deref().filter(|r| !r.is_empty())
                        {
                            self.message.stop_reason = map_stop_reason(reason)?;
                        }
                        if let Some(usage) = &delta.usage {
                            if let Some(input) = usage.input_tokens {
                                self.message.usage.input = tokens(Some(input));
                            }
                            if let Some(output) = usage.output_tokens {
                                self.message.usage.output = tokens(Some(output));
                            }
                            if let Some(read) = usage.cache_read_input_tokens {
                                self.message.usage.cache_read = tokens(Some(read));
                            }
                            if let Some(write) = usage.cache_creation_input_tokens {
                                self.message.usage.cache_write = tokens(Some(write));
                            }
                        }
                        self.recompute_usage();
                    }
                    _ => {}
                }
                Ok(false)
            }
        }
    }

    fn push_block(&mut self, block: ContentBlock, index: Value) -> usize {
        let content_index = self.message.content.len();
        self.message.content.push(block);
        self.blocks.push(BlockState {
            stream_index: Some(index),
            partial_json: String::new(),
            dirty: false,
        });
        content_index
    }

    fn on_block_start(&mut self, start: BlockStart, out: &mut VecDeque<StreamEvent>) {
        let block = &start.content_block;
        match block["type"].as_str() {
            Some("text") => {
                let content_index = self.push_block(
                    ContentBlock::Text(TextContent {
                        text: String::new(),
                        text_signature: None,
                        extra: Map::new(),
                    }),
                    start.index,
                );
                out.push_back(StreamEvent::TextStart { content_index });
            }
            Some("thinking") => {
                let content_index = self.push_block(
                    ContentBlock::Thinking(ThinkingContent {
                        thinking: String::new(),
                        thinking_signature: Some(String::new()),
                        redacted: None,
                        extra: Map::new(),
                    }),
                    start.index,
                );
                out.push_back(StreamEvent::ThinkingStart { content_index });
            }
            Some("redacted_thinking") => {
                let content_index = self.push_block(
                    ContentBlock::Thinking(ThinkingContent {
                        thinking: "[Reasoning redacted]".to_owned(),
                        thinking_signature: block["data"].as_str().map(str::to_owned),
                        redacted: Some(true),
                        extra: Map::new(),
                    }),
                    start.index,
                );
                out.push_back(StreamEvent::ThinkingStart { content_index });
            }
            Some("tool_use") => {
                let raw_name = block["name"].as_str().unwrap_or("");
                let name = match &self.tool_names {
                    Some(names) => names
                        .iter()
                        .find(|name| name.to_lowercase() == raw_name.to_lowercase())
                        .cloned()
                        .unwrap_or_else(|| raw_name.to_owned()),
                    None => raw_name.to_owned(),
                };
                let arguments = match &block["input"] {
                    Value::Null => Value::Object(Map::new()),
                    input => input.clone(),
                };
                let content_index = self.push_block(
                    ContentBlock::ToolCall(ToolCall {
                        id: block["id"].as_str().unwrap_or("").to_owned(),
                        name,
                        arguments,
                        arguments_error: None,
                        thought_signature: None,
                        extra: Map::new(),
                    }),
                    start.index,
                );
                out.push_back(StreamEvent::ToolCallStart { content_index });
            }
            _ => {}
        }
    }

    fn on_delta(
        &mut self,
        delta: BlockDelta<'_>,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<(), String> {
        let Some(index) = self.find_block(&delta.index) else {
            return Ok(());
        };
        let body = delta.delta;
        match (
            body.kind.as_deref().unwrap_or(""),
            self.message.content.get_mut(index),
        ) {
            ("text_delta", Some(ContentBlock::Text(block))) => {
                let text = body.text.as_deref().unwrap_or("");
                block.text.push_str(text);
                out.push_back(StreamEvent::TextDelta {
                    content_index: index,
                    delta: text.to_owned(),
                });
            }
            ("thinking_delta", Some(ContentBlock::Thinking(block))) => {
                let text = body.thinking.as_deref().unwrap_or("");
                block.thinking.push_str(text);
                out.push_back(StreamEvent::ThinkingDelta {
                    content_index: index,
                    delta: text.to_owned(),
                });
            }
            ("input_json_delta", Some(ContentBlock::ToolCall(_))) => {
                let fragment = body.partial_json.as_deref().unwrap_or("");
                let state = &mut self.blocks[index];
                state.partial_json.push_str(fragment);
                state.dirty = true;
                out.push_back(StreamEvent::ToolCallDelta {
                    content_index: index,
                    delta: fragment.to_owned(),
                });
            }
            ("signature_delta", Some(ContentBlock::Thinking(block))) => {
                block
                    .thinking_signature
                    .get_or_insert_with(String::new)
                    .push_str(body.signature.as_deref().unwrap_or(""));
            }
            _ => {}
        }
        Ok(())
    }

    fn on_block_stop(&mut self, index: &Value, out: &mut VecDeque<StreamEvent>) {
        let Some(position) = self.find_block(index) else {
            return;
        };
        self.blocks[position].stream_index = None;
        match self.message.content.get_mut(position) {
            Some(ContentBlock::Text(text)) => out.push_back(StreamEvent::TextEnd {
                content_index: position,
                content: text.text.clone(),
            }),
            Some(ContentBlock::Thinking(thinking)) => out.push_back(StreamEvent::ThinkingEnd {
                content_index: position,
                content: thinking.thinking.clone(),
            }),
            Some(ContentBlock::ToolCall(call)) => {
                let state = &mut self.blocks[position];
                call.arguments = parse_streaming_json(&state.partial_json);
                state.dirty = false;
                out.push_back(StreamEvent::ToolCallEnd {
                    content_index: position,
                    tool_call: call.clone(),
                });
            }
            _ => {}
        }
    }

    /// The stream ended normally (`message_stop`); `Err` when the stop reason was an error
    /// (refusal, sensitive).
    pub fn complete(&mut self) -> Result<StopReason, String> {
        self.refresh();
        match self.message.stop_reason {
            StopReason::Error | StopReason::Aborted | StopReason::Unknown => {
                Err("An unknown error occurred".to_owned())
            }
            reason => Ok(reason),
        }
    }

    /// The body ended without `message_stop`.
    pub fn on_eof(&mut self) -> Result<StopReason, String> {
        Err("Anthropic stream ended before message_stop".to_owned())
    }

    /// Whether `message_start` arrived.
    pub fn started(&self) -> bool {
        self.saw_start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ai::models::builtin_models;
    use crate::ai::{ThinkingBudgets, auth::RequestAuth};

    fn model(id: &str) -> Model {
        builtin_models()
            .iter()
            .find(|model| model.provider == "anthropic" && model.id == id)
            .unwrap()
            .clone()
    }

    fn options(level: ThinkingLevel) -> StreamOptions {
        let mut options = StreamOptions::new(RequestAuth {
            api_key: Some("k".into()),
            headers: vec![],
            base_url: "https://api.anthropic.com".into(),
        });
        options.thinking = level;
        options
    }

    #[test]
    fn thinking_budgets_follow_the_worked_numbers() {
        let sonnet = build_body(
            &model("claude-sonnet-4-5"),
            &Request::default(),
            &options(ThinkingLevel::Medium),
            false,
        );
        assert_eq!(sonnet["max_tokens"], 40192);
        assert_eq!(
            sonnet["thinking"],
            json!({"type":"enabled","budget_tokens":8192,"display":"summarized"})
        );
        let opus41 = build_body(
            &model("claude-opus-4-1"),
            &Request::default(),
            &options(ThinkingLevel::High),
            false,
        );
        assert_eq!(
            (
                opus41["max_tokens"].clone(),
                opus41["thinking"]["budget_tokens"].clone()
            ),
            (json!(32000), json!(16384))
        );
        let opus47 = build_body(
            &model("claude-opus-4-7"),
            &Request::default(),
            &options(ThinkingLevel::Xhigh),
            false,
        );
        assert_eq!(opus47["max_tokens"], 32000);
        assert_eq!(opus47["output_config"], json!({"effort":"xhigh"}));
        assert_eq!(
            opus47["thinking"],
            json!({"type":"adaptive","display":"summarized"})
        );
        let mut custom = model("claude-sonnet-4-5");
        custom.max_tokens = 16384;
        let custom_body = build_body(
            &custom,
            &Request::default(),
            &options(ThinkingLevel::High),
            false,
        );
        assert_eq!(
            (
                custom_body["max_tokens"].clone(),
                custom_body["thinking"]["budget_tokens"].clone()
            ),
            (json!(16384), json!(15360))
        );
        let off = build_body(
            &model("claude-sonnet-4-5"),
            &Request::default(),
            &options(ThinkingLevel::Off),
            false,
        );
        assert_eq!(off["thinking"], json!({"type":"disabled"}));
        assert_eq!(off["max_tokens"], 32000);
        let mut budgets = options(ThinkingLevel::Low);
        budgets.thinking_budgets = ThinkingBudgets {
            low: 3000,
            ..ThinkingBudgets::default()
        };
        let low = build_body(
            &model("claude-sonnet-4-5"),
            &Request::default(),
            &budgets,
            false,
        );
        assert_eq!(low["thinking"]["budget_tokens"], 3000);
    }

    #[test]
    fn oauth_keys_switch_headers_system_and_tool_names() {
        let mut opts = options(ThinkingLevel::Off);
        opts.api_key = Some("sk-ant-oat01-x".into());
        let request = Request {
            system_prompt: "Be brief.".into(),
            messages: vec![],
            tools: vec![crate::ai::ToolDefinition {
                name: "read".into(),
                description: "Read".into(),
                parameters: json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}),
            }],
        };
        let wire = build_request(&model("claude-sonnet-4-5"), &request, &opts);
        let header = |name: &str| {
            wire.headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            header("Authorization").as_deref(),
            Some("Bearer sk-ant-oat01-x")
        );
        assert_eq!(header("x-api-key"), None);
        assert_eq!(
            header("anthropic-beta").as_deref(),
            Some("claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14")
        );
        assert_eq!(wire.body["system"][0]["text"], CLAUDE_CODE_IDENTITY);
        assert_eq!(wire.body["system"][1]["text"], "Be brief.");
        assert_eq!(wire.body["tools"][0]["name"], "Read");
        assert_eq!(wire.url, "https://api.anthropic.com/v1/messages");
    }

    #[test]
    fn decoder_maps_blocks_by_index() {
        let model = model("claude-sonnet-4-5");
        let mut decoder =
            AnthropicDecoder::new(crate::ai::new_assistant_message(&model, 1), &model, None);
        let mut out = VecDeque::new();
        let frames = [
            (
                "message_start",
                r#"{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":5}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"ls","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"src\"}"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":1}"#,
            ),
            ("ping", r#"{"type":"ping"}"#),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30}}"#,
            ),
        ];
        for (event, data) in frames {
            assert_eq!(decoder.on_frame(event, data, &mut out), Ok(false));
        }
        assert_eq!(
            decoder.on_frame("message_stop", r#"{"type":"message_stop"}"#, &mut out),
            Ok(true)
        );
        assert_eq!(decoder.complete(), Ok(StopReason::ToolUse));
        let message = decoder.into_message();
        assert_eq!(message.response_id.as_deref(), Some("msg_1"));
        assert_eq!(
            (
                message.usage.input,
                message.usage.output,
                message.usage.cache_read
            ),
            (10, 30, 5)
        );
        let ContentBlock::Thinking(thinking) = &message.content[0] else {
            panic!()
        };
        assert_eq!(thinking.thinking_signature.as_deref(), Some("SIG"));
        let ContentBlock::ToolCall(call) = &message.content[1] else {
            panic!()
        };
        assert_eq!(call.arguments, json!({"path":"src"}));
        let kinds: Vec<&str> = out.iter().map(StreamEvent::kind).collect();
        assert_eq!(
            kinds,
            [
                "thinking_start",
                "thinking_delta",
                "thinking_end",
                "toolcall_start",
                "toolcall_delta",
                "toolcall_delta",
                "toolcall_end"
            ]
        );
    }

    #[test]
    fn error_events_and_unknown_stop_reasons_fail() {
        let model = model("claude-sonnet-4-5");
        let mut decoder =
            AnthropicDecoder::new(crate::ai::new_assistant_message(&model, 1), &model, None);
        let mut out = VecDeque::new();
        let raw = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            decoder.on_frame("error", raw, &mut out),
            Err(raw.to_owned())
        );
        assert_eq!(
            decoder.on_frame(
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"weird"},"usage":{}}"#,
                &mut out
            ),
            Err("Unhandled stop reason: weird".to_owned())
        );
        assert_eq!(
            decoder.on_eof(),
            Err("Anthropic stream ended before message_stop".to_owned())
        );
    }
}
