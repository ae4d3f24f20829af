//! The `mistral-conversations` wire protocol: `POST <baseUrl>/v1/chat/completions` with
//! `stream: true` and a bearer key, exactly as 1.6.0's `api/mistral-conversations.js` shapes
//! and reads it (the reference calls the endpoint with `fetch` and its own SSE reader; no SDK,
//! and no transport retry).
//!
//! Two pure halves:
//! - [`build_request`]: model + request + options → URL, headers and the JSON body. The body
//!   is built in the reference's camelCase order and then renamed to the wire's snake_case
//!   names the way it does (a renamed key moves to the end): `model, stream, messages, tools,
//!   max_tokens, reasoning_effort | prompt_mode, prompt_cache_key`. Messages: system text
//!   (later system messages as rendered updates), user text and `image_url` chunks, the
//!   assistant's earlier turns as `text` and `thinking` chunks plus `tool_calls` (`prefix:
//!   false`), tool results as `role: "tool"` messages with `[tool error]` marking failures.
//!   Tool-call ids from elsewhere become Mistral's 9 alphanumerics (a `shortHash` of the id,
//!   collisions resolved per request). Reasoning: models with a thinking-level map get
//!   `reasoning_effort`, other reasoning models `prompt_mode: "reasoning"`. With a session id
//!   (and caching not off) the session is the `prompt_cache_key` and the `x-affinity` header.
//! - [`MistralDecoder`]: each `data:` chunk is a `CompletionChunk` (`choices[0].delta` with
//!   string or chunked `content` — `text` and `thinking` chunks — and `tool_calls`, keyed by
//!   `index` so parallel calls stay apart; `usage` with cached prompt tokens out of the
//!   input; `finish_reason` → stop reason). `[DONE]` or the end of the body closes the open
//!   blocks and the tool calls; a chunk without `choices` fails the call.
//!
//! A stream looks like:
//!
//! ```text
//! data: {"id":"cmpl-1","object":"chat.completion.chunk","model":"mistral-small-latest","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}
//! data: {"id":"cmpl-1","choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}
//! data: [DONE]
//! ```
//!
//! HTTP failures read `Mistral API error (<status>): <body>` (the body trimmed and cut at 4,000
//! characters; the status text when there is no body). A chunk that is not JSON fails with
//! serde's wording of the problem (V8's there). Not carried over: `temperature` and
//! `toolChoice` (the agent never sets them), the `Mistral response headers timed out`
//! wording (the transport's `Request timed out.` instead).

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};

use serde_json::{Map, Value, json};

use crate::ai::convert::{LlmMessage, transform_messages};
use crate::ai::models::{Model, ModelCost, ThinkingLevel, calculate_cost, clamp_thinking_level};
use crate::ai::partial_json::{parse_streaming_json, parse_tool_call_arguments};
use crate::ai::request::{
    clamp_max_tokens_to_context, identity_headers, json_schema_tool_parameters,
    resolve_json_schema_strict_sampling, short_hash,
};
use crate::ai::transcript::{
    get_current_tools, get_system_message_text, normalize_context, render_system_message_update,
    resolve_transcript,
};
use crate::ai::transport::{WireRequest, set_header_ci};
use crate::ai::{CacheRetention, Request, StreamEvent, StreamOptions};
use crate::model::message::{
    AssistantKey, AssistantMessage, ContentBlock, StopReason, TextContent, ThinkingContent,
    ToolCall, ToolDeclaration, Usage, UserContent,
};
use crate::support::json::to_js_string;

/// Mistral's tool-call ids are exactly this many alphanumerics.
const TOOL_CALL_ID_LENGTH: usize = 9;

/// The prefix of HTTP failures (`formatMistralError`).
pub const ERROR_PREFIX: &str = "Mistral API error";

/// `deriveMistralToolCallId`: the id's alphanumerics when there are exactly nine, else nine
/// characters of a hash of them (`:<attempt>` appended after a collision).
pub fn derive_tool_call_id(id: &str, attempt: u32) -> String {
    let normalized: String = id.chars().filter(char::is_ascii_alphanumeric).collect();
    if attempt == 0 && normalized.chars().count() == TOOL_CALL_ID_LENGTH {
        return normalized;
    }
    let seed_base = if normalized.is_empty() {
        id
    } else {
        &normalized
    };
    let seed = if attempt == 0 {
        seed_base.to_owned()
    } else {
        format!("{seed_base}:{attempt}")
    };
    short_hash(&seed)
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(TOOL_CALL_ID_LENGTH)
        .collect()
}

/// `createMistralToolCallIdNormalizer`: one id per source id, never two sources on one id.
#[derive(Default)]
struct ToolCallIds {
    by_source: HashMap<String, String>,
    by_target: HashMap<String, String>,
}

impl ToolCallIds {
    fn normalize(&mut self, id: &str) -> String {
        if let Some(existing) = self.by_source.get(id) {
            return existing.clone();
        }
        let mut attempt = 0;
        loop {
            let candidate = derive_tool_call_id(id, attempt);
            if self
                .by_target
                .get(&candidate)
                .is_none_or(|owner| owner == id)
            {
                self.by_source.insert(id.to_owned(), candidate.clone());
                self.by_target.insert(candidate.clone(), id.to_owned());
                return candidate;
            }
            attempt += 1;
        }
    }
}

/// The endpoint (`requestMistralStream`): the base URL's path with one trailing `/`, then
/// `v1/chat/completions` (the base's query is dropped, as `new URL(path, base)` does).
pub fn endpoint(base_url: &str) -> Result<String, String> {
    let mut base = reqwest::Url::parse(base_url).map_err(|_| "Invalid URL".to_owned())?;
    let path = format!("{}/", base.path().trim_end_matches('/'));
    base.set_path(&path);
    base.join("v1/chat/completions")
        .map(|url| url.to_string())
        .map_err(|_| "Invalid URL".to_owned())
}

/// The clamped, non-`off` thinking level of the call (`streamSimple`'s `reasoning`).
fn reasoning_level(model: &Model, options: &StreamOptions) -> Option<ThinkingLevel> {
    match options.thinking {
        ThinkingLevel::Off => None,
        requested => {
            Some(clamp_thinking_level(model, requested)).filter(|l| *l != ThinkingLevel::Off)
        }
    }
}

/// `reasoning_effort` for models with a thinking-level map (a level mapped to nothing asks
/// for `high`; `off` sends the map's `off` value when it has one).
fn reasoning_effort(model: &Model, level: Option<ThinkingLevel>) -> Option<Value> {
    let map = model
        .thinking_level_map
        .as_ref()
        .filter(|_| model.reasoning)?;
    let effort = match level {
        Some(level) => match map.get(level.as_str()) {
            None | Some(Value::Null) => json!("high"),
            Some(value) => value.clone(),
        },
        None => map.get("off").filter(|value| !value.is_null())?.clone(),
    };
    // `if (options?.reasoningEffort)`: an empty or zero value is not sent.
    crate::ai::openai::truthy(&effort).then_some(effort)
}

fn uses_prompt_caching(options: &StreamOptions) -> Option<&str> {
    match options.cache_retention {
        CacheRetention::None => None,
        _ => options.session_id.as_deref(),
    }
}

/// Builds the HTTP request of one call (`requestMistralStream` + `buildChatPayload`); `Err`
/// with the reference's text when it cannot be built.
pub fn build_request(
    model: &Model,
    request: &Request,
    options: &StreamOptions,
) -> Result<WireRequest, String> {
    let base_url = options
        .base_url
        .as_deref()
        .filter(|url| !url.is_empty())
        .unwrap_or(&model.base_url);
    let url = endpoint(base_url)?;
    let api_key = options.api_key.as_deref().unwrap_or("");
    let mut headers = identity_headers(model, &options.identity);
    set_header_ci(&mut headers, "accept", "text/event-stream");
    set_header_ci(&mut headers, "authorization", &format!("Bearer {api_key}"));
    set_header_ci(&mut headers, "content-type", "application/json");
    let mut explicit_affinity = false;
    let model_headers = model
        .headers
        .iter()
        .flatten()
        .filter_map(|(name, value)| Some((name.clone(), value.as_str()?.to_owned())));
    for (name, value) in model_headers.chain(options.headers.iter().cloned()) {
        explicit_affinity |= name.eq_ignore_ascii_case("x-affinity");
        set_header_ci(&mut headers, &name, &value);
    }
    if let Some(session) = uses_prompt_caching(options)
        && !explicit_affinity
    {
        set_header_ci(&mut headers, "x-affinity", session);
    }
    let transcript = normalize_context(request);
    let body = build_body(model, &transcript, options)?;
    Ok(WireRequest { url, headers, body })
}

/// The request body as it goes on the wire (`toMistralWirePayload(buildChatPayload(…))`).
pub fn build_body(
    model: &Model,
    transcript: &[Cow<'_, LlmMessage>],
    options: &StreamOptions,
) -> Result<Value, String> {
    let max_tokens = clamp_max_tokens_to_context(
        model,
        transcript,
        options.max_tokens.unwrap_or(model.max_tokens),
    );
    let resolved = resolve_transcript(
        transcript.to_vec(),
        model
            .compat_bool("supportsMidConvoSystemMessages")
            .unwrap_or(false),
    );
    let ids = std::cell::RefCell::new(ToolCallIds::default());
    let normalize = |id: &str| ids.borrow_mut().normalize(id);
    let transformed = transform_messages(&resolved, model, &normalize);
    let tools = get_current_tools(&resolved);
    let level = reasoning_level(model, options);
    let effort = reasoning_effort(model, level);
    let prompt_mode = model.reasoning && model.thinking_level_map.is_none() && level.is_some();

    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("stream".into(), Value::Bool(true));
    body.insert(
        "messages".into(),
        Value::Array(convert_messages(&transformed, model.accepts_images())),
    );
    if !tools.is_empty() {
        // Strict tools are opt-in (`supportsStrictMode`, default false).
        let strict_supported = model.compat_bool("supportsStrictMode").unwrap_or(false);
        body.insert(
            "tools".into(),
            Value::Array(convert_tools(&tools, strict_supported)?),
        );
    }
    body.insert("max_tokens".into(), json!(max_tokens));
    if let Some(effort) = effort {
        body.insert("reasoning_effort".into(), effort);
    }
    if prompt_mode {
        body.insert("prompt_mode".into(), json!("reasoning"));
    }
    if let Some(session) = uses_prompt_caching(options) {
        body.insert("prompt_cache_key".into(), json!(session));
    }
    Ok(Value::Object(body))
}

/// Function tools (`toFunctionTools`): `strict` always present.
pub fn convert_tools(
    tools: &[ToolDeclaration],
    strict_supported: bool,
) -> Result<Vec<Value>, String> {
    tools
        .iter()
        .map(|tool| {
            let strict = resolve_json_schema_strict_sampling(tool, strict_supported, None)?;
            Ok(json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": json_schema_tool_parameters(tool, strict),
                    "strict": strict,
                },
            }))
        })
        .collect()
}

fn image_url(image: &crate::model::message::ImageContent) -> Value {
    json!({"type": "image_url", "image_url": format!("data:{};base64,{}", image.mime_type, image.data)})
}

/// `buildToolResultText`.
fn tool_result_text(text: &str, has_images: bool, supports_images: bool, is_error: bool) -> String {
    let trimmed = text.trim();
    let prefix = if is_error { "[tool error] " } else { "" };
    if !trimmed.is_empty() {
        let suffix = if has_images && !supports_images {
            "\n[tool image omitted: model does not support images]"
        } else {
            ""
        };
        return format!("{prefix}{trimmed}{suffix}");
    }
    if has_images {
        if supports_images {
            return format!("{prefix}(see attached image)");
        }
        return format!("{prefix}(image omitted: model does not support images)");
    }
    format!("{prefix}(no tool output)")
}

/// Maps the transformed transcript to Mistral messages (`toChatMessages`), in their wire form.
pub fn convert_messages(messages: &[Cow<'_, LlmMessage>], supports_images: bool) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        match &**message {
            LlmMessage::System(system) => {
                let text = if index == 0 {
                    get_system_message_text(system)
                } else {
                    render_system_message_update(system)
                };
                if !text.is_empty() {
                    out.push(json!({"role": "system", "content": text}));
                }
            }
            LlmMessage::User(user) => match &user.content {
                UserContent::Text(text) => out.push(json!({"role": "user", "content": text})),
                UserContent::Blocks(blocks) => {
                    let had_images = blocks
                        .iter()
                        .any(|block| matches!(block, ContentBlock::Image(_)));
                    let content: Vec<Value> = blocks
                        .iter()
                        .filter_map(|block| match block {
                            ContentBlock::Text(text) => {
                                Some(json!({"type": "text", "text": text.text}))
                            }
                            ContentBlock::Image(image) if supports_images => Some(image_url(image)),
                            _ => None,
                        })
                        .collect();
                    if !content.is_empty() {
                        out.push(json!({"role": "user", "content": content}));
                    } else if had_images && !supports_images {
                        out.push(json!({"role": "user", "content": "(image omitted: model does not support images)"}));
                    }
                }
            },
            LlmMessage::Assistant(assistant) => {
                let mut content = Vec::new();
                let mut tool_calls = Vec::new();
                for block in &assistant.content {
                    match block {
                        ContentBlock::Text(text) if !text.text.trim().is_empty() => {
                            content.push(json!({"type": "text", "text": text.text}));
                        }
                        ContentBlock::Thinking(thinking) if !thinking.thinking.trim().is_empty() => {
                            content.push(json!({"type": "thinking", "thinking": [{"type": "text", "text": thinking.thinking}]}));
                        }
                        ContentBlock::ToolCall(call) => tool_calls.push(json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": to_js_string(&call.arguments)},
                            "index": 0,
                        })),
                        _ => {}
                    }
                }
                if content.is_empty() && tool_calls.is_empty() {
                    continue;
                }
                let mut item = Map::new();
                item.insert("role".into(), json!("assistant"));
                item.insert("prefix".into(), Value::Bool(false));
                if !content.is_empty() {
                    item.insert("content".into(), Value::Array(content));
                }
                if !tool_calls.is_empty() {
                    item.insert("tool_calls".into(), Value::Array(tool_calls));
                }
                out.push(Value::Object(item));
            }
            LlmMessage::ToolResult(result) => {
                let text = result
                    .content
                    .iter()
                    .filter_map(ContentBlock::as_text)
                    .collect::<Vec<_>>()
                    .join("\n");
                let has_images = result
                    .content
                    .iter()
                    .any(|block| matches!(block, ContentBlock::Image(_)));
                let mut content = vec![json!({
                    "type": "text",
                    "text": tool_result_text(&text, has_images, supports_images, result.is_error),
                })];
                if supports_images {
                    content.extend(result.content.iter().filter_map(|block| match block {
                        ContentBlock::Image(image) => Some(image_url(image)),
                        _ => None,
                    }));
                }
                out.push(json!({
                    "role": "tool",
                    "name": result.tool_name,
                    "content": content,
                    "tool_call_id": result.tool_call_id,
                }));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Decoding

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
}

struct OpenCall {
    content_index: usize,
    arguments: String,
}

/// Turns Mistral stream chunks into [`StreamEvent`]s and the assistant message (pure: feed it
/// the `data` of each SSE frame).
pub struct MistralDecoder {
    message: AssistantMessage,
    cost: ModelCost,
    open: Option<Open>,
    /// Tool calls by their stream key (`index`, else the id), in the order they opened.
    calls: Vec<(String, OpenCall)>,
    /// Content indexes of tool calls whose arguments changed since the last refresh.
    dirty: Vec<usize>,
    finished: bool,
}

/// `output.usage` from a chunk's `usage` (`getMistralCachedPromptTokens`: the cached count
/// under any of the SDK's spellings, at most the prompt).
fn usage_of(usage: &Value) -> Usage {
    let count = |value: Option<&Value>| match value.and_then(Value::as_f64) {
        Some(n) if n.is_finite() && n > 0.0 => n as u64,
        _ => 0,
    };
    let prompt = count(usage.get("prompt_tokens"));
    let cached_raw = [
        usage.pointer("/promptTokensDetails/cachedTokens"),
        usage.pointer("/prompt_tokens_details/cached_tokens"),
        usage.pointer("/promptTokenDetails/cachedTokens"),
        usage.pointer("/prompt_token_details/cached_tokens"),
        usage.get("numCachedTokens"),
        usage.get("num_cached_tokens"),
    ]
    .into_iter()
    .flatten()
    .find(|value| !value.is_null());
    let cached = count(cached_raw).min(prompt);
    let input = prompt - cached;
    let output = count(usage.get("completion_tokens"));
    let total = match count(usage.get("total_tokens")) {
        0 => input + output + cached,
        total => total,
    };
    Usage {
        input,
        output,
        cache_read: cached,
        cache_write: 0,
        total_tokens: total,
        ..Default::default()
    }
}

/// `mapChatStopReason`.
fn stop_reason(reason: &str) -> (StopReason, Option<String>) {
    match reason {
        "stop" => (StopReason::Stop, None),
        "length" | "model_length" => (StopReason::Length, None),
        "tool_calls" => (StopReason::ToolUse, None),
        // Mistral reports transient server failures this way; "server error" makes the
        // message retryable.
        "error" => (
            StopReason::Error,
            Some("Provider stopped with: error (server error)".to_owned()),
        ),
        other => (
            StopReason::Error,
            Some(format!("Provider stopped with: {other}")),
        ),
    }
}

impl MistralDecoder {
    /// Starts decoding into `message` (the empty message of [`crate::ai::new_assistant_message`]).
    pub fn new(message: AssistantMessage, model: &Model) -> Self {
        Self {
            message,
            cost: model.cost.clone(),
            open: None,
            calls: Vec::new(),
            dirty: Vec::new(),
            finished: false,
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

    /// Re-parses the partial arguments of tool calls that received text since the last call.
    pub fn refresh(&mut self) {
        for index in std::mem::take(&mut self.dirty) {
            let Some((_, call)) = self.calls.iter().find(|(_, c)| c.content_index == index) else {
                continue;
            };
            let parsed = match parse_streaming_json(&call.arguments) {
                object @ Value::Object(_) => object,
                _ => Value::Object(Map::new()),
            };
            if let Some(ContentBlock::ToolCall(block)) = self.message.content.get_mut(index) {
                block.arguments = parsed;
            }
        }
    }

    /// Processes one SSE frame (`parseMistralEvent` + one round of `consumeChatStream`):
    /// `[DONE]` ends the stream (`Ok(true)`), a chunk that is not an object with `choices`
    /// fails it, anything else is applied.
    pub fn on_frame(
        &mut self,
        data: &str,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, String> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        if data == "[DONE]" {
            return Ok(true);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|err| err.to_string())?;
        if !chunk.get("choices").is_some_and(Value::is_array) {
            return Err("Invalid Mistral streaming event".to_owned());
        }
        self.on_chunk(&chunk, out);
        Ok(false)
    }

    fn on_chunk(&mut self, chunk: &Value, out: &mut VecDeque<StreamEvent>) {
        if self
            .message
            .response_id
            .as_deref()
            .is_none_or(str::is_empty)
            && let Some(id) = chunk.get("id").filter(|id| crate::ai::openai::truthy(id))
        {
            self.message.key_order.touch(AssistantKey::ResponseId);
            self.message.response_id = Some(match id {
                Value::String(text) => text.clone(),
                other => to_js_string(other),
            });
        }
        if let Some(usage) = chunk.get("usage").filter(|u| crate::ai::openai::truthy(u)) {
            self.message.usage = usage_of(usage);
            calculate_cost(&self.cost, &mut self.message.usage);
        }
        let Some(choice) = chunk.pointer("/choices/0") else {
            return;
        };
        if let Some(reason) = choice
            .get("finish_reason")
            .filter(|reason| crate::ai::openai::truthy(reason))
        {
            let reason = match reason {
                Value::String(text) => text.clone(),
                other => to_js_string(other),
            };
            let (stop, error) = stop_reason(&reason);
            self.message.key_order.touch(AssistantKey::RawStopReason);
            self.message.raw_stop_reason = Some(reason);
            self.message.stop_reason = stop;
            if let Some(error) = error {
                self.message.key_order.touch(AssistantKey::ErrorMessage);
                self.message.error_message = Some(error);
            }
        }
        let Some(delta) = choice.get("delta") else {
            return;
        };
        match delta.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => self.append(Open::Text, text, out),
            Some(Value::Array(items)) => {
                for item in items {
                    match item {
                        Value::String(text) => self.append(Open::Text, text, out),
                        _ => match item.get("type").and_then(Value::as_str) {
                            Some("thinking") => {
                                let text: String = item
                                    .get("thinking")
                                    .and_then(Value::as_array)
                                    .into_iter()
                                    .flatten()
                                    .filter_map(|part| part.get("text").and_then(Value::as_str))
                                    .collect();
                                self.append(Open::Thinking, &text, out);
                            }
                            Some("text") => {
                                let text = item.get("text").and_then(Value::as_str).unwrap_or("");
                                self.append(Open::Text, text, out);
                            }
                            _ => {}
                        },
                    }
                }
            }
            Some(_) => {}
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.on_tool_call(call, out);
        }
    }

    /// Appends text or reasoning, opening a block of that kind when another kind is open
    /// (empty deltas open nothing: GLM models send them around thinking and tool calls).
    fn append(&mut self, kind: Open, delta: &str, out: &mut VecDeque<StreamEvent>) {
        if delta.is_empty() {
            return;
        }
        if self.open != Some(kind) {
            self.close_block(out);
            let content_index = self.message.content.len();
            match kind {
                Open::Text => {
                    self.message.content.push(ContentBlock::Text(TextContent {
                        text: String::new(),
                        text_signature: None,
                        extra: Map::new(),
                    }));
                    out.push_back(StreamEvent::TextStart { content_index });
                }
                Open::Thinking => {
                    self.message
                        .content
                        .push(ContentBlock::Thinking(ThinkingContent {
                            thinking: String::new(),
                            thinking_signature: None,
                            redacted: None,
                            extra: Map::new(),
                        }));
                    out.push_back(StreamEvent::ThinkingStart { content_index });
                }
            }
            self.open = Some(kind);
        }
        let content_index = self.message.content.len() - 1;
        match self.message.content.last_mut() {
            Some(ContentBlock::Text(block)) => {
                block.text.push_str(delta);
                out.push_back(StreamEvent::TextDelta {
                    content_index,
                    delta: delta.to_owned(),
                });
            }
            Some(ContentBlock::Thinking(block)) => {
                block.thinking.push_str(delta);
                out.push_back(StreamEvent::ThinkingDelta {
                    content_index,
                    delta: delta.to_owned(),
                });
            }
            _ => {}
        }
    }

    /// `finishCurrentBlock`.
    fn close_block(&mut self, out: &mut VecDeque<StreamEvent>) {
        let Some(open) = self.open.take() else {
            return;
        };
        let content_index = self.message.content.len().saturating_sub(1);
        match (open, self.message.content.last()) {
            (Open::Text, Some(ContentBlock::Text(text))) => out.push_back(StreamEvent::TextEnd {
                content_index,
                content: text.text.clone(),
            }),
            (Open::Thinking, Some(ContentBlock::Thinking(thinking))) => {
                out.push_back(StreamEvent::ThinkingEnd {
                    content_index,
                    content: thinking.thinking.clone(),
                });
            }
            _ => {}
        }
    }

    fn on_tool_call(&mut self, call: &Value, out: &mut VecDeque<StreamEvent>) {
        self.close_block(out);
        let index = call.get("index").filter(|index| !index.is_null());
        let call_id = match call.get("id") {
            Some(Value::String(id)) if !id.is_empty() && id != "null" => id.clone(),
            _ => {
                let index = index.map_or_else(|| "0".to_owned(), to_js_string);
                derive_tool_call_id(&format!("toolcall:{index}"), 0)
            }
        };
        // A JavaScript `Map` key: the number `index`, else the id string.
        let key = match index {
            Some(index) => format!("#{}", to_js_string(index)),
            None => format!("${call_id}"),
        };
        let function = call.get("function");
        let position = match self.calls.iter().position(|(existing, _)| *existing == key) {
            Some(position) => position,
            None => {
                let content_index = self.message.content.len();
                let name = function
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                self.message.content.push(ContentBlock::ToolCall(ToolCall {
                    id: call_id,
                    name,
                    arguments: Value::Object(Map::new()),
                    arguments_error: None,
                    thought_signature: None,
                    extra: Map::new(),
                }));
                self.calls.push((
                    key,
                    OpenCall {
                        content_index,
                        arguments: String::new(),
                    },
                ));
                out.push_back(StreamEvent::ToolCallStart { content_index });
                self.calls.len() - 1
            }
        };
        let delta = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(text)) => text.clone(),
            None | Some(Value::Null) => "{}".to_owned(),
            Some(value) if !crate::ai::openai::truthy(value) => "{}".to_owned(),
            Some(value) => to_js_string(value),
        };
        let open = &mut self.calls[position].1;
        open.arguments.push_str(&delta);
        let content_index = open.content_index;
        if !self.dirty.contains(&content_index) {
            self.dirty.push(content_index);
        }
        out.push_back(StreamEvent::ToolCallDelta {
            content_index,
            delta,
        });
    }

    /// The stream ended (`[DONE]` or the end of the body): closes the open block and every
    /// tool call, then `Err` with the reference's text when there was no finish reason or the
    /// finish reason is an error.
    pub fn complete(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<StopReason, String> {
        if !self.finished {
            self.finished = true;
            self.close_block(out);
            self.dirty.clear();
            for (_, open) in &self.calls {
                let (arguments, error) = parse_tool_call_arguments(&open.arguments);
                if let Some(ContentBlock::ToolCall(call)) =
                    self.message.content.get_mut(open.content_index)
                {
                    call.arguments = arguments;
                    call.arguments_error = error;
                    out.push_back(StreamEvent::ToolCallEnd {
                        content_index: open.content_index,
                        tool_call: call.clone(),
                    });
                }
            }
        }
        match self.message.stop_reason {
            StopReason::Pending => Err("Mistral stream ended without a finish reason".to_owned()),
            StopReason::Error | StopReason::Aborted => Err(self
                .message
                .error_message
                .clone()
                .filter(|text| !text.is_empty())
                .unwrap_or_else(|| "An unknown error occurred".to_owned())),
            reason => Ok(reason),
        }
    }
}

/// The error text of a failed HTTP response (`formatMistralError` of a `MistralHttpError`):
/// the trimmed body cut at 4,000 characters, else the status text.
pub fn http_error_text(status: u16, body: &str) -> String {
    let body = body.trim();
    if !body.is_empty() {
        return format!(
            "{ERROR_PREFIX} ({status}): {}",
            crate::ai::transport::truncate_error_text(body)
        );
    }
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|code| code.canonical_reason())
        .map(str::to_owned)
        .unwrap_or_else(|| format!("Request failed with status {status}"));
    format!("{ERROR_PREFIX} ({status}): {reason}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_ids_become_nine_alphanumerics() {
        assert_eq!(derive_tool_call_id("abc-DEF-123", 0), "abcDEF123");
        let hashed = derive_tool_call_id("call_0123456789abcdef|fc_1", 0);
        assert_eq!(hashed.len(), 9);
        assert!(hashed.chars().all(|c| c.is_ascii_alphanumeric()));
        let mut ids = ToolCallIds::default();
        let first = ids.normalize("toolu_01");
        assert_eq!(ids.normalize("toolu_01"), first);
        assert_ne!(ids.normalize("toolu_02"), first);
    }

    #[test]
    fn endpoints_keep_the_base_path() {
        assert_eq!(
            endpoint("https://api.mistral.ai").unwrap(),
            "https://api.mistral.ai/v1/chat/completions"
        );
        assert_eq!(
            endpoint("http://127.0.0.1:9/proxy/?x=1").unwrap(),
            "http://127.0.0.1:9/proxy/v1/chat/completions"
        );
        assert_eq!(endpoint("not a url").unwrap_err(), "Invalid URL");
    }

    #[test]
    fn http_errors_name_the_status_and_the_body() {
        assert_eq!(
            http_error_text(429, " {\"message\":\"slow down\"}\n"),
            "Mistral API error (429): {\"message\":\"slow down\"}"
        );
        assert_eq!(
            http_error_text(503, ""),
            "Mistral API error (503): Service Unavailable"
        );
    }
}
