//! The `openai-completions` wire protocol: `POST <baseUrl>/chat/completions` with
//! `stream: true`, for OpenAI and every OpenAI-compatible server (OpenRouter, vLLM,
//! llama.cpp, Ollama, LM Studio, …) (`spec/models-providers-settings.md` §4.8, §6.9, §8, §10).
//!
//! Two pure halves:
//! - [`build_request`]: model + request + options → URL, headers and the JSON body, field for
//!   field in the reference's construction order (compat flags auto-detected from provider and
//!   base URL, overridable by `compat`).
//! - [`OpenAiDecoder`]: SSE `data:` payloads → [`StreamEvent`]s and the assistant message.
//!
//! A stream looks like (one JSON chunk per `data:` line, `[DONE]` last):
//!
//! ```text
//! data: {"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}
//! data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}
//! data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}
//! data: [DONE]
//! ```
//!
//! which yields `text_start`, `text_delta("Hel")`, `text_delta("lo")`, `text_end("Hello")`,
//! `done(stop)`. Reasoning arrives in `reasoning_content`, `reasoning` or `reasoning_text`
//! (the first non-empty one; the field name is kept as the thinking block's signature so it
//! can be replayed); tool calls arrive as `delta.tool_calls[]` fragments keyed by `index`.
//!
//! Departure from the reference (on purpose): a stream that ends with neither `[DONE]` nor a
//! `finish_reason` is an error (`… ended without finish_reason or [DONE]`), not a short answer.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value, json};

use crate::ai::convert::{LlmMessage, transform_messages};
use crate::ai::models::{
    LevelMapping, Model, ModelCost, ThinkingLevel, calculate_cost, clamp_thinking_level,
};
use crate::ai::partial_json::parse_streaming_json;
use crate::ai::transport::{WireRequest, api_error_message, set_header_ci};
use crate::ai::{
    CacheRetention, Request, StreamEvent, StreamOptions, default_max_tokens, join_url,
};
use crate::model::message::{
    AssistantMessage, ContentBlock, StopReason, TextContent, ThinkingContent, ToolCall, Usage,
    UserContent,
};
use crate::support::json::to_js_string;

/// How reasoning is requested from an OpenAI-compatible server (`compat.thinkingFormat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThinkingFormat {
    /// `reasoning_effort` (also any unknown value, as in the reference).
    OpenAi,
    /// `reasoning: {effort}`.
    OpenRouter,
    /// `thinking: {type}` + `reasoning_effort`.
    DeepSeek,
    /// `enable_thinking`.
    Zai,
    /// `enable_thinking`.
    Qwen,
    /// `chat_template_kwargs: {enable_thinking, preserve_thinking}`.
    QwenChatTemplate,
}

/// The resolved compatibility flags of an OpenAI-compatible model (§4.8): auto-detected from
/// provider and base URL, each overridable by the model's `compat`.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenAiCompat {
    /// Send `"store": false`.
    pub supports_store: bool,
    /// System prompt role `developer` for reasoning models.
    pub supports_developer_role: bool,
    /// `reasoning_effort` is accepted.
    pub supports_reasoning_effort: bool,
    /// Send `stream_options.include_usage`.
    pub supports_usage_in_streaming: bool,
    /// The output-limit field is `max_tokens` (else `max_completion_tokens`).
    pub max_tokens_field_is_max_tokens: bool,
    /// Tool results carry `name`.
    pub requires_tool_result_name: bool,
    /// Insert an assistant message between tool results and a user message.
    pub requires_assistant_after_tool_result: bool,
    /// Replay thinking as text.
    pub requires_thinking_as_text: bool,
    /// Replayed assistant messages need `reasoning_content`.
    pub requires_reasoning_content_on_assistant_messages: bool,
    /// How thinking is requested.
    pub thinking_format: ThinkingFormat,
    /// `tool_stream: true` with tools (z.ai).
    pub zai_tool_stream: bool,
    /// Function definitions carry `strict: false`.
    pub supports_strict_mode: bool,
    /// Anthropic-style `cache_control` markers.
    pub cache_control_anthropic: bool,
    /// Session-affinity headers.
    pub send_session_affinity_headers: bool,
    /// Long cache retention is accepted.
    pub supports_long_cache_retention: bool,
}

impl OpenAiCompat {
    /// Resolves the flags for a model (the reference's `getCompat`).
    pub fn resolve(model: &Model) -> Self {
        let provider = model.provider.as_str();
        let url = model.base_url.as_str();
        let is_zai = provider == "zai" || url.contains("api.z.ai");
        let is_moonshot = provider == "moonshotai"
            || provider == "moonshotai-cn"
            || url.contains("api.moonshot.");
        let is_cf_workers =
            provider == "cloudflare-workers-ai" || url.contains("api.cloudflare.com");
        let is_cf_gateway =
            provider == "cloudflare-ai-gateway" || url.contains("gateway.ai.cloudflare.com");
        let non_standard = provider == "cerebras"
            || url.contains("cerebras.ai")
            || provider == "xai"
            || url.contains("api.x.ai")
            || url.contains("chutes.ai")
            || url.contains("deepseek.com")
            || is_zai
            || is_moonshot
            || provider == "opencode"
            || url.contains("opencode.ai")
            || is_cf_workers
            || is_cf_gateway;
        let use_max_tokens = url.contains("chutes.ai") || is_moonshot || is_cf_gateway;
        let is_grok = provider == "xai" || url.contains("api.x.ai");
        let is_deepseek = provider == "deepseek" || url.contains("deepseek.com");
        let detected_format = if is_deepseek {
            ThinkingFormat::DeepSeek
        } else if is_zai {
            ThinkingFormat::Zai
        } else if provider == "openrouter" || url.contains("openrouter.ai") {
            ThinkingFormat::OpenRouter
        } else {
            ThinkingFormat::OpenAi
        };
        let flag = |key: &str, detected: bool| model.compat_bool(key).unwrap_or(detected);
        Self {
            supports_store: flag("supportsStore", !non_standard),
            supports_developer_role: flag("supportsDeveloperRole", !non_standard),
            supports_reasoning_effort: flag(
                "supportsReasoningEffort",
                !is_grok && !is_zai && !is_moonshot && !is_cf_gateway,
            ),
            supports_usage_in_streaming: flag("supportsUsageInStreaming", true),
            max_tokens_field_is_max_tokens: match model.compat_str("maxTokensField") {
                Some(field) => field == "max_tokens",
                None => use_max_tokens,
            },
            requires_tool_result_name: flag("requiresToolResultName", false),
            requires_assistant_after_tool_result: flag("requiresAssistantAfterToolResult", false),
            requires_thinking_as_text: flag("requiresThinkingAsText", false),
            requires_reasoning_content_on_assistant_messages: flag(
                "requiresReasoningContentOnAssistantMessages",
                is_deepseek,
            ),
            thinking_format: match model.compat_str("thinkingFormat") {
                None => detected_format,
                Some("openrouter") => ThinkingFormat::OpenRouter,
                Some("deepseek") => ThinkingFormat::DeepSeek,
                Some("zai") => ThinkingFormat::Zai,
                Some("qwen") => ThinkingFormat::Qwen,
                Some("qwen-chat-template") => ThinkingFormat::QwenChatTemplate,
                Some(_) => ThinkingFormat::OpenAi,
            },
            zai_tool_stream: flag("zaiToolStream", false),
            supports_strict_mode: flag("supportsStrictMode", !is_moonshot && !is_cf_gateway),
            cache_control_anthropic: match model.compat_str("cacheControlFormat") {
                Some(format) => format == "anthropic",
                None => provider == "openrouter" && model.id.starts_with("anthropic/"),
            },
            send_session_affinity_headers: flag("sendSessionAffinityHeaders", false),
            supports_long_cache_retention: flag(
                "supportsLongCacheRetention",
                !(is_cf_workers || is_cf_gateway),
            ),
        }
    }
}

/// Builds the HTTP request of one call (the reference's `createClient` + `buildParams`).
pub fn build_request(model: &Model, request: &Request, options: &StreamOptions) -> WireRequest {
    let compat = OpenAiCompat::resolve(model);
    let base_url = options.base_url.as_deref().unwrap_or(&model.base_url);
    let api_key = options.api_key.clone().unwrap_or_default();
    let retention = options.cache_retention;
    let cache_session = if retention == CacheRetention::None {
        None
    } else {
        options.session_id.as_deref()
    };

    let mut headers: Vec<(String, String)> = vec![
        ("Authorization".to_owned(), format!("Bearer {api_key}")),
        ("Content-Type".to_owned(), "application/json".to_owned()),
        ("Accept".to_owned(), "application/json".to_owned()),
    ];
    let mut configured: Vec<(String, String)> = Vec::new();
    for (name, value) in model.headers.iter().flatten() {
        if let Some(value) = value.as_str() {
            configured.push((name.clone(), value.to_owned()));
        }
    }
    if let Some(session) = cache_session
        && compat.send_session_affinity_headers
    {
        for name in ["session_id", "x-client-request-id", "x-session-affinity"] {
            configured.push((name.to_owned(), session.to_owned()));
        }
    }
    configured.extend(options.headers.iter().cloned());
    if model.provider == "cloudflare-ai-gateway" {
        // The gateway authenticates with its own header; a bearer header is only sent when
        // one is configured.
        headers.retain(|(name, _)| !name.eq_ignore_ascii_case("authorization"));
        configured.push((
            "cf-aig-authorization".to_owned(),
            format!("Bearer {api_key}"),
        ));
    }
    for (name, value) in configured {
        set_header_ci(&mut headers, &name, &value);
    }

    WireRequest {
        url: join_url(base_url, "chat/completions"),
        headers,
        body: build_body(model, request, options, &compat),
    }
}

/// The request body (the reference's `buildParams`), in its key order.
pub fn build_body(
    model: &Model,
    request: &Request,
    options: &StreamOptions,
    compat: &OpenAiCompat,
) -> Value {
    let retention = options.cache_retention;
    let mut messages = convert_messages(model, request, compat);
    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.id.clone()));
    body.insert("messages".into(), Value::Null);
    body.insert("stream".into(), Value::Bool(true));
    let long = retention == CacheRetention::Long && compat.supports_long_cache_retention;
    if ((model.base_url.contains("api.openai.com") && retention != CacheRetention::None) || long)
        && let Some(session) = &options.session_id
    {
        body.insert("prompt_cache_key".into(), Value::String(session.clone()));
    }
    if long {
        body.insert("prompt_cache_retention".into(), json!("24h"));
    }
    if compat.supports_usage_in_streaming {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if compat.supports_store {
        body.insert("store".into(), Value::Bool(false));
    }
    if let Some(max_tokens) = default_max_tokens(model, options.max_tokens).filter(|max| *max > 0) {
        let field = if compat.max_tokens_field_is_max_tokens {
            "max_tokens"
        } else {
            "max_completion_tokens"
        };
        body.insert(field.into(), json!(max_tokens));
    }
    let mut tools: Option<Vec<Value>> = None;
    if !request.tools.is_empty() {
        tools = Some(
            request
                .tools
                .iter()
                .map(|tool| {
                    let mut function = Map::new();
                    function.insert("name".into(), Value::String(tool.name.clone()));
                    function.insert(
                        "description".into(),
                        Value::String(tool.description.clone()),
                    );
                    function.insert("parameters".into(), tool.parameters.clone());
                    if compat.supports_strict_mode {
                        function.insert("strict".into(), Value::Bool(false));
                    }
                    json!({"type": "function", "function": Value::Object(function)})
                })
                .collect(),
        );
    } else if has_tool_history(&request.messages) {
        tools = Some(Vec::new());
    }
    if compat.cache_control_anthropic && retention != CacheRetention::None {
        let mut marker = json!({"type": "ephemeral"});
        if retention == CacheRetention::Long && compat.supports_long_cache_retention {
            marker["ttl"] = json!("1h");
        }
        apply_anthropic_cache_control(&mut messages, tools.as_mut(), &marker);
    }
    body.insert("messages".into(), Value::Array(messages));
    if let Some(tools) = tools {
        let has_tools = !tools.is_empty();
        body.insert("tools".into(), Value::Array(tools));
        if has_tools && compat.zai_tool_stream {
            body.insert("tool_stream".into(), Value::Bool(true));
        }
    }
    insert_thinking(&mut body, model, options.thinking, compat);
    if model.base_url.contains("openrouter.ai")
        && let Some(routing) = model.compat_value("openRouterRouting")
    {
        body.insert("provider".into(), routing.clone());
    }
    if model.base_url.contains("ai-gateway.vercel.sh")
        && let Some(Value::Object(routing)) = model.compat_value("vercelGatewayRouting")
    {
        let mut gateway = Map::new();
        for key in ["only", "order"] {
            if let Some(value) = routing.get(key).filter(|value| truthy(value)) {
                gateway.insert(key.into(), value.clone());
            }
        }
        if !gateway.is_empty() {
            body.insert("providerOptions".into(), json!({"gateway": gateway}));
        }
    }
    Value::Object(body)
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// The effort value sent for a level: the model's mapping if it is a string, else the level.
fn mapped_level(model: &Model, level: ThinkingLevel) -> String {
    match model.level_mapping(level) {
        LevelMapping::Value(value) => value.to_owned(),
        LevelMapping::Absent | LevelMapping::Unsupported => level.as_str().to_owned(),
    }
}

fn insert_thinking(
    body: &mut Map<String, Value>,
    model: &Model,
    level: ThinkingLevel,
    compat: &OpenAiCompat,
) {
    let effort = match level {
        ThinkingLevel::Off => None,
        requested => {
            Some(clamp_thinking_level(model, requested)).filter(|l| *l != ThinkingLevel::Off)
        }
    };
    if !model.reasoning {
        return;
    }
    match compat.thinking_format {
        ThinkingFormat::Zai | ThinkingFormat::Qwen => {
            body.insert("enable_thinking".into(), Value::Bool(effort.is_some()));
        }
        ThinkingFormat::QwenChatTemplate => {
            body.insert(
                "chat_template_kwargs".into(),
                json!({"enable_thinking": effort.is_some(), "preserve_thinking": true}),
            );
        }
        ThinkingFormat::DeepSeek => {
            body.insert(
                "thinking".into(),
                json!({"type": if effort.is_some() { "enabled" } else { "disabled" }}),
            );
            if let Some(effort) = effort {
                body.insert(
                    "reasoning_effort".into(),
                    json!(mapped_level(model, effort)),
                );
            }
        }
        ThinkingFormat::OpenRouter => match effort {
            Some(effort) => {
                body.insert(
                    "reasoning".into(),
                    json!({"effort": mapped_level(model, effort)}),
                );
            }
            None => match model.level_mapping(ThinkingLevel::Off) {
                LevelMapping::Unsupported => {}
                LevelMapping::Value(value) => {
                    body.insert("reasoning".into(), json!({"effort": value}));
                }
                LevelMapping::Absent => {
                    body.insert("reasoning".into(), json!({"effort": "none"}));
                }
            },
        },
        ThinkingFormat::OpenAi => {
            if !compat.supports_reasoning_effort {
                return;
            }
            match effort {
                Some(effort) => {
                    body.insert(
                        "reasoning_effort".into(),
                        json!(mapped_level(model, effort)),
                    );
                }
                None => {
                    if let LevelMapping::Value(value) = model.level_mapping(ThinkingLevel::Off) {
                        body.insert("reasoning_effort".into(), json!(value));
                    }
                }
            }
        }
    }
}

fn has_tool_history(messages: &[LlmMessage]) -> bool {
    messages.iter().any(|message| match message {
        LlmMessage::ToolResult(_) => true,
        LlmMessage::Assistant(assistant) => assistant.tool_calls().next().is_some(),
        LlmMessage::System(_) | LlmMessage::User(_) => false,
    })
}

fn apply_anthropic_cache_control(
    messages: &mut [Value],
    tools: Option<&mut Vec<Value>>,
    marker: &Value,
) {
    if let Some(system) = messages
        .iter_mut()
        .find(|message| matches!(message["role"].as_str(), Some("system" | "developer")))
    {
        add_cache_control_to_text(system, marker);
    }
    if let Some(last) = tools.and_then(|tools| tools.last_mut())
        && let Value::Object(tool) = last
    {
        tool.insert("cache_control".into(), marker.clone());
    }
    for message in messages.iter_mut().rev() {
        if matches!(message["role"].as_str(), Some("user" | "assistant"))
            && add_cache_control_to_text(message, marker)
        {
            return;
        }
    }
}

fn add_cache_control_to_text(message: &mut Value, marker: &Value) -> bool {
    match &mut message["content"] {
        Value::String(text) => {
            if text.is_empty() {
                return false;
            }
            let text = std::mem::take(text);
            message["content"] = json!([{"type": "text", "text": text, "cache_control": marker}]);
            true
        }
        Value::Array(parts) => {
            for part in parts.iter_mut().rev() {
                if part["type"] == "text"
                    && let Value::Object(part) = part
                {
                    part.insert("cache_control".into(), marker.clone());
                    return true;
                }
            }
            false
        }
        _ => false,
    }
}

/// The reference's tool-call id normalisation for this protocol (§8.3).
pub fn normalize_tool_call_id(model: &Model, id: &str) -> String {
    if let Some((call_id, _)) = id.split_once('|') {
        let cleaned: String = call_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        return utf16_prefix(&cleaned, 40);
    }
    if model.provider == "openai" && id.encode_utf16().count() > 40 {
        return utf16_prefix(id, 40);
    }
    id.to_owned()
}

/// JavaScript's `slice(0, n)` on a string (UTF-16 code units; a cut surrogate pair is
/// dropped rather than split).
pub(crate) fn utf16_prefix(text: &str, units: usize) -> String {
    let mut count = 0;
    let mut out = String::new();
    for c in text.chars() {
        count += c.len_utf16();
        if count > units {
            break;
        }
        out.push(c);
    }
    out
}

fn image_url(block: &crate::model::message::ImageContent) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("data:{};base64,{}", block.mime_type, block.data)}})
}

/// Maps the conversation to chat-completions messages (the reference's `convertMessages`).
pub fn convert_messages(model: &Model, request: &Request, compat: &OpenAiCompat) -> Vec<Value> {
    let normalize = |id: &str| normalize_tool_call_id(model, id);
    let transformed = transform_messages(&request.messages, model, &normalize);
    let messages: Vec<&LlmMessage> = transformed.iter().map(|message| &**message).collect();
    let mut params: Vec<Value> = Vec::with_capacity(messages.len() + 1);
    if !request.system_prompt.is_empty() {
        let role = if model.reasoning && compat.supports_developer_role {
            "developer"
        } else {
            "system"
        };
        params.push(json!({"role": role, "content": request.system_prompt}));
    }
    let bridge = || json!({"role": "assistant", "content": "I have processed the tool results."});
    let mut last_role: Option<&str> = None;
    let mut idx = 0;
    while idx < messages.len() {
        let message = &messages[idx];
        if compat.requires_assistant_after_tool_result
            && last_role == Some("toolResult")
            && matches!(message, LlmMessage::User(_))
        {
            params.push(bridge());
        }
        match message {
            // Provisional until the 1.6.0 request shaping lands: the prompt comes from
            // `system_prompt`.
            LlmMessage::System(_) => {
                idx += 1;
                continue;
            }
            LlmMessage::User(user) => {
                match &user.content {
                    UserContent::Text(text) => {
                        params.push(json!({"role": "user", "content": text}))
                    }
                    UserContent::Blocks(blocks) => {
                        let content: Vec<Value> = blocks
                            .iter()
                            .filter_map(|block| match block {
                                ContentBlock::Text(text) => {
                                    Some(json!({"type": "text", "text": text.text}))
                                }
                                ContentBlock::Image(image) => Some(image_url(image)),
                                ContentBlock::Thinking(_)
                                | ContentBlock::ToolCall(_)
                                | ContentBlock::Unknown(_) => None,
                            })
                            .collect();
                        if content.is_empty() {
                            idx += 1;
                            continue;
                        }
                        params.push(json!({"role": "user", "content": content}));
                    }
                }
                last_role = Some("user");
            }
            LlmMessage::Assistant(assistant) => {
                if let Some(converted) = convert_assistant(model, assistant, compat) {
                    params.push(converted);
                }
                last_role = Some("assistant");
            }
            LlmMessage::ToolResult(_) => {
                let mut images = Vec::new();
                let mut next = idx;
                while let Some(LlmMessage::ToolResult(result)) = messages.get(next) {
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
                    let mut tool = Map::new();
                    tool.insert("role".into(), json!("tool"));
                    tool.insert(
                        "content".into(),
                        json!(if text.is_empty() {
                            "(see attached image)"
                        } else {
                            text.as_str()
                        }),
                    );
                    tool.insert("tool_call_id".into(), json!(result.tool_call_id));
                    if compat.requires_tool_result_name && !result.tool_name.is_empty() {
                        tool.insert("name".into(), json!(result.tool_name));
                    }
                    params.push(Value::Object(tool));
                    if has_images && model.accepts_images() {
                        for block in &result.content {
                            if let ContentBlock::Image(image) = block {
                                images.push(image_url(image));
                            }
                        }
                    }
                    next += 1;
                }
                idx = next;
                if images.is_empty() {
                    last_role = Some("toolResult");
                } else {
                    if compat.requires_assistant_after_tool_result {
                        params.push(bridge());
                    }
                    let mut content = vec![
                        json!({"type": "text", "text": "Attached image(s) from tool result:"}),
                    ];
                    content.extend(images);
                    params.push(json!({"role": "user", "content": content}));
                    last_role = Some("user");
                }
                continue;
            }
        }
        idx += 1;
    }
    params
}

fn convert_assistant(
    model: &Model,
    assistant: &AssistantMessage,
    compat: &OpenAiCompat,
) -> Option<Value> {
    let mut out = Map::new();
    out.insert("role".into(), json!("assistant"));
    out.insert(
        "content".into(),
        if compat.requires_assistant_after_tool_result {
            json!("")
        } else {
            Value::Null
        },
    );
    let text_parts: Vec<&str> = assistant
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .filter(|text| !text.trim().is_empty())
        .collect();
    let joined: String = text_parts.concat();
    let thinking: Vec<&ThinkingContent> = assistant
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Thinking(thinking) if !thinking.thinking.trim().is_empty() => {
                Some(thinking)
            }
            _ => None,
        })
        .collect();
    if !thinking.is_empty() {
        if compat.requires_thinking_as_text {
            let thinking_text = thinking
                .iter()
                .map(|block| block.thinking.as_str())
                .collect::<Vec<_>>()
                .join("\n\n");
            let mut parts = vec![json!({"type": "text", "text": thinking_text})];
            parts.extend(
                text_parts
                    .iter()
                    .map(|text| json!({"type": "text", "text": text})),
            );
            out.insert("content".into(), Value::Array(parts));
        } else {
            if !joined.is_empty() {
                out.insert("content".into(), json!(joined));
            }
            if let Some(signature) = thinking[0]
                .thinking_signature
                .as_deref()
                .filter(|sig| !sig.is_empty())
            {
                let text = thinking
                    .iter()
                    .map(|block| block.thinking.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                out.insert(signature.to_owned(), json!(text));
            }
        }
    } else if !joined.is_empty() {
        out.insert("content".into(), json!(joined));
    }
    let calls: Vec<&ToolCall> = assistant.tool_calls().collect();
    if !calls.is_empty() {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|call| {
                json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": to_js_string(&call.arguments)}})
            })
            .collect();
        out.insert("tool_calls".into(), Value::Array(tool_calls));
        let details: Vec<Value> = calls
            .iter()
            .filter_map(|call| call.thought_signature.as_deref())
            .filter(|sig| !sig.is_empty())
            .filter_map(|sig| serde_json::from_str::<Value>(sig).ok())
            .filter(truthy)
            .collect();
        if !details.is_empty() {
            out.insert("reasoning_details".into(), Value::Array(details));
        }
    }
    if compat.requires_reasoning_content_on_assistant_messages
        && model.reasoning
        && !out.contains_key("reasoning_content")
    {
        out.insert("reasoning_content".into(), json!(""));
    }
    let has_content = match out.get("content") {
        Some(Value::String(text)) => !text.is_empty(),
        Some(Value::Array(parts)) => !parts.is_empty(),
        _ => false,
    };
    if !has_content && !out.contains_key("tool_calls") {
        return None;
    }
    Some(Value::Object(out))
}

// ---------------------------------------------------------------------------------------
// Decoding

/// Reads a JSON string (borrowed when it has no escapes), or nothing for any other JSON type
/// (the reference's loose checks).
pub(crate) fn lenient_str<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'de, str>>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<Cow<'de, str>>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Borrowed(v)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_owned())))
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v)))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    deserializer.deserialize_any(V)
}

/// Reads a JSON number, or nothing for any other JSON type.
pub(crate) fn lenient_num<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<f64>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<f64>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    deserializer.deserialize_any(V)
}

/// Reads the first element of `choices` without collecting the array (no allocation on
/// the hot path); anything that is not an array reads as no choice.
fn first_choice<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Choice<'de>>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<Choice<'de>>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an array of choices")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            // `[null]` reads as no choice, as the reference's `if (!choice) continue`.
            let first = seq.next_element::<Option<Choice<'de>>>()?.flatten();
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(first)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    deserializer.deserialize_any(V)
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<RawUsage>,
    /// Only `choices[0]` is read (as the reference does); the rest are skipped unparsed.
    #[serde(default, borrow, deserialize_with = "first_choice")]
    choices: Option<Choice<'a>>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<RawUsage>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    reasoning_text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
    #[serde(default)]
    reasoning_details: Option<Vec<Value>>,
}

#[derive(Deserialize)]
struct ToolCallDelta<'a> {
    #[serde(default, deserialize_with = "lenient_num")]
    index: Option<f64>,
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct RawUsage {
    #[serde(default, deserialize_with = "lenient_num")]
    prompt_tokens: Option<f64>,
    #[serde(default, deserialize_with = "lenient_num")]
    completion_tokens: Option<f64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default, deserialize_with = "lenient_num")]
    prompt_cache_hit_tokens: Option<f64>,
}

#[derive(Deserialize, Default)]
struct PromptDetails {
    #[serde(default, deserialize_with = "lenient_num")]
    cached_tokens: Option<f64>,
    #[serde(default, deserialize_with = "lenient_num")]
    cache_write_tokens: Option<f64>,
}

fn tokens(value: Option<f64>) -> u64 {
    value
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(|v| v as u64)
        .unwrap_or(0)
}

/// Maps chunk usage to the reference's usage (§10) with cost.
fn parse_usage(raw: &RawUsage, cost: &ModelCost) -> Usage {
    let prompt = tokens(raw.prompt_tokens);
    let details = raw.prompt_tokens_details.as_ref();
    let cached = tokens(
        details
            .and_then(|details| details.cached_tokens)
            .or(raw.prompt_cache_hit_tokens),
    );
    let cache_write = tokens(details.and_then(|details| details.cache_write_tokens));
    let cache_read = if cache_write > 0 {
        cached.saturating_sub(cache_write)
    } else {
        cached
    };
    let input = prompt
        .saturating_sub(cache_read)
        .saturating_sub(cache_write);
    let output = tokens(raw.completion_tokens);
    let mut usage = Usage {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens: input + output + cache_read + cache_write,
        ..Default::default()
    };
    calculate_cost(cost, &mut usage);
    usage
}

/// Maps a `finish_reason` (§8.5).
fn map_finish_reason(reason: &str) -> (StopReason, Option<String>) {
    match reason {
        "stop" | "end" => (StopReason::Stop, None),
        "length" => (StopReason::Length, None),
        "function_call" | "tool_calls" => (StopReason::ToolUse, None),
        other => (
            StopReason::Error,
            Some(format!("Provider finish_reason: {other}")),
        ),
    }
}

struct ToolState {
    content_index: usize,
    partial_args: String,
    stream_index: Option<u64>,
    dirty: bool,
}

/// Turns chat-completions stream chunks into events and the assistant message (pure: feed it
/// the `data` of each SSE frame).
pub struct OpenAiDecoder {
    message: AssistantMessage,
    cost: ModelCost,
    text_block: Option<usize>,
    thinking_block: Option<usize>,
    tools: Vec<ToolState>,
    tools_by_index: HashMap<u64, usize>,
    tools_by_id: HashMap<String, usize>,
    saw_finish_reason: bool,
}

impl OpenAiDecoder {
    /// Starts decoding into `message` (the empty message of [`crate::ai::new_assistant_message`]).
    pub fn new(message: AssistantMessage, model: &Model) -> Self {
        Self {
            message,
            cost: model.cost.clone(),
            text_block: None,
            thinking_block: None,
            tools: Vec::new(),
            tools_by_index: HashMap::new(),
            tools_by_id: HashMap::new(),
            saw_finish_reason: false,
        }
    }

    /// Returns the message as built so far (tool arguments as of the last [`Self::refresh`]).
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

    /// Re-parses the arguments of tool calls that received text since the last call (the
    /// reference parses after every fragment; here it happens when someone looks).
    pub fn refresh(&mut self) {
        for tool in self.tools.iter_mut().filter(|tool| tool.dirty) {
            tool.dirty = false;
            if let Some(ContentBlock::ToolCall(call)) =
                self.message.content.get_mut(tool.content_index)
            {
                call.arguments = parse_streaming_json(&tool.partial_args);
            }
        }
    }

    /// Processes one SSE `data` payload. Returns `Ok(true)` at `[DONE]`; `Err` with the error
    /// text when the provider reported an error or sent something unreadable.
    pub fn on_data(&mut self, data: &str, out: &mut VecDeque<StreamEvent>) -> Result<bool, String> {
        if data.starts_with("[DONE]") {
            return Ok(true);
        }
        if !data.trim_start().starts_with('{') {
            // Valid JSON that is not an object (e.g. `null`) is skipped, as the reference
            // does; anything else is a parse failure.
            return match serde_json::from_str::<Value>(data) {
                Ok(_) => Ok(false),
                Err(err) => Err(format!("Could not parse stream chunk as JSON: {err}")),
            };
        }
        let chunk: Chunk<'_> = serde_json::from_str(data)
            .map_err(|err| format!("Could not parse stream chunk as JSON: {err}"))?;
        if let Some(error) = chunk.error.as_ref().filter(|error| truthy(error)) {
            let mut message = api_error_message(None, Some(error), None);
            if let Some(raw) = error
                .get("metadata")
                .and_then(|metadata| metadata.get("raw"))
                .and_then(Value::as_str)
                .filter(|raw| !raw.is_empty())
            {
                message.push('\n');
                message.push_str(raw);
            }
            return Err(message);
        }
        self.on_chunk(chunk, out);
        Ok(false)
    }

    fn on_chunk(&mut self, chunk: Chunk<'_>, out: &mut VecDeque<StreamEvent>) {
        if self
            .message
            .response_id
            .as_deref()
            .is_none_or(str::is_empty)
        {
            self.message.response_id = chunk.id.as_deref().map(str::to_owned);
        }
        if let Some(model) = chunk.model.as_deref()
            && !model.is_empty()
            && model != self.message.model
            && self
                .message
                .response_model
                .as_deref()
                .is_none_or(str::is_empty)
        {
            self.message.response_model = Some(model.to_owned());
        }
        if let Some(usage) = &chunk.usage {
            self.message.usage = parse_usage(usage, &self.cost);
        }
        let Some(choice) = chunk.choices else {
            return;
        };
        if chunk.usage.is_none()
            && let Some(usage) = &choice.usage
        {
            self.message.usage = parse_usage(usage, &self.cost);
        }
        if let Some(reason) = choice
            .finish_reason
            .as_deref()
            .filter(|reason| !reason.is_empty())
        {
            let (stop, error) = map_finish_reason(reason);
            self.message.stop_reason = stop;
            if error.is_some() {
                self.message.error_message = error;
            }
            self.saw_finish_reason = true;
        }
        let Some(delta) = choice.delta else {
            return;
        };
        if let Some(content) = delta.content.as_deref().filter(|text| !text.is_empty()) {
            let index = self.ensure_text(out);
            if let Some(ContentBlock::Text(block)) = self.message.content.get_mut(index) {
                block.text.push_str(content);
            }
            out.push_back(StreamEvent::TextDelta {
                content_index: index,
                delta: content.to_owned(),
            });
        }
        let reasoning = [
            ("reasoning_content", &delta.reasoning_content),
            ("reasoning", &delta.reasoning),
            ("reasoning_text", &delta.reasoning_text),
        ]
        .into_iter()
        .find_map(|(field, value)| {
            value
                .as_deref()
                .filter(|text| !text.is_empty())
                .map(|text| (field, text))
        });
        if let Some((field, text)) = reasoning {
            let index = self.ensure_thinking(field, out);
            if let Some(ContentBlock::Thinking(block)) = self.message.content.get_mut(index) {
                block.thinking.push_str(text);
            }
            out.push_back(StreamEvent::ThinkingDelta {
                content_index: index,
                delta: text.to_owned(),
            });
        }
        for call in delta.tool_calls.unwrap_or_default() {
            self.on_tool_call(call, out);
        }
        for detail in delta.reasoning_details.unwrap_or_default() {
            if detail["type"] != "reasoning.encrypted" || !truthy(&detail["data"]) {
                continue;
            }
            let Some(id) = detail["id"].as_str().filter(|id| !id.is_empty()) else {
                continue;
            };
            let signature = to_js_string(&detail);
            if let Some(ContentBlock::ToolCall(call)) = self
                .message
                .content
                .iter_mut()
                .find(|block| matches!(block, ContentBlock::ToolCall(call) if call.id == id))
            {
                call.thought_signature = Some(signature);
            }
        }
    }

    fn ensure_text(&mut self, out: &mut VecDeque<StreamEvent>) -> usize {
        if let Some(index) = self.text_block {
            return index;
        }
        let index = self.message.content.len();
        self.message.content.push(ContentBlock::Text(TextContent {
            text: String::new(),
            text_signature: None,
            extra: Map::new(),
        }));
        self.text_block = Some(index);
        out.push_back(StreamEvent::TextStart {
            content_index: index,
        });
        index
    }

    fn ensure_thinking(&mut self, field: &str, out: &mut VecDeque<StreamEvent>) -> usize {
        if let Some(index) = self.thinking_block {
            return index;
        }
        let index = self.message.content.len();
        self.message
            .content
            .push(ContentBlock::Thinking(ThinkingContent {
                thinking: String::new(),
                thinking_signature: Some(field.to_owned()),
                redacted: None,
                extra: Map::new(),
            }));
        self.thinking_block = Some(index);
        out.push_back(StreamEvent::ThinkingStart {
            content_index: index,
        });
        index
    }

    fn on_tool_call(&mut self, delta: ToolCallDelta<'_>, out: &mut VecDeque<StreamEvent>) {
        let stream_index = delta
            .index
            .filter(|index| index.is_finite() && *index >= 0.0)
            .map(|index| index as u64);
        let id = delta.id.as_deref().filter(|id| !id.is_empty());
        let name = delta
            .function
            .as_ref()
            .and_then(|function| function.name.as_deref())
            .filter(|name| !name.is_empty());
        let mut slot = stream_index.and_then(|index| self.tools_by_index.get(&index).copied());
        if slot.is_none()
            && let Some(id) = id
        {
            slot = self.tools_by_id.get(id).copied();
        }
        let slot = match slot {
            Some(slot) => slot,
            None => {
                let content_index = self.message.content.len();
                self.message.content.push(ContentBlock::ToolCall(ToolCall {
                    id: id.unwrap_or("").to_owned(),
                    name: name.unwrap_or("").to_owned(),
                    arguments: Value::Object(Map::new()),
                    arguments_error: None,
                    thought_signature: None,
                    extra: Map::new(),
                }));
                let slot = self.tools.len();
                self.tools.push(ToolState {
                    content_index,
                    partial_args: String::new(),
                    stream_index,
                    dirty: false,
                });
                if let Some(index) = stream_index {
                    self.tools_by_index.insert(index, slot);
                }
                out.push_back(StreamEvent::ToolCallStart { content_index });
                slot
            }
        };
        if let Some(index) = stream_index
            && self.tools[slot].stream_index.is_none()
        {
            self.tools[slot].stream_index = Some(index);
            self.tools_by_index.insert(index, slot);
        }
        if let Some(id) = id {
            self.tools_by_id.insert(id.to_owned(), slot);
        }
        let content_index = self.tools[slot].content_index;
        if let Some(ContentBlock::ToolCall(call)) = self.message.content.get_mut(content_index) {
            if call.id.is_empty()
                && let Some(id) = id
            {
                call.id = id.to_owned();
            }
            if call.name.is_empty()
                && let Some(name) = name
            {
                call.name = name.to_owned();
            }
        }
        let fragment = delta
            .function
            .as_ref()
            .and_then(|function| function.arguments.as_deref())
            .filter(|args| !args.is_empty())
            .unwrap_or("");
        if !fragment.is_empty() {
            let tool = &mut self.tools[slot];
            tool.partial_args.push_str(fragment);
            tool.dirty = true;
        }
        out.push_back(StreamEvent::ToolCallDelta {
            content_index,
            delta: fragment.to_owned(),
        });
    }

    /// Closes every block in content order (`*_end` events; tool arguments parsed for good).
    pub fn finish_blocks(&mut self, out: &mut VecDeque<StreamEvent>) {
        self.refresh();
        for (index, block) in self.message.content.iter_mut().enumerate() {
            match block {
                ContentBlock::Text(text) => out.push_back(StreamEvent::TextEnd {
                    content_index: index,
                    content: text.text.clone(),
                }),
                ContentBlock::Thinking(thinking) => out.push_back(StreamEvent::ThinkingEnd {
                    content_index: index,
                    content: thinking.thinking.clone(),
                }),
                ContentBlock::ToolCall(call) => out.push_back(StreamEvent::ToolCallEnd {
                    content_index: index,
                    tool_call: call.clone(),
                }),
                ContentBlock::Image(_) | ContentBlock::Unknown(_) => {}
            }
        }
    }

    /// The stream ended normally (`[DONE]`): closes the blocks; `Err` with the error text when
    /// the finish reason was an error.
    pub fn complete(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<StopReason, String> {
        self.finish_blocks(out);
        match self.message.stop_reason {
            StopReason::Error | StopReason::Aborted | StopReason::Unknown => Err(self
                .message
                .error_message
                .clone()
                .filter(|message| !message.is_empty())
                .unwrap_or_else(|| "Provider returned an error stop reason".to_owned())),
            reason => Ok(reason),
        }
    }

    /// The body ended without `[DONE]`: complete if a finish reason arrived, else an error.
    pub fn on_eof(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<StopReason, String> {
        if self.saw_finish_reason {
            self.complete(out)
        } else {
            Err("OpenAI stream ended without finish_reason or [DONE]".to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ai::models::builtin_models;

    fn model(provider: &str, id: &str) -> Model {
        builtin_models()
            .iter()
            .find(|model| model.provider == provider && model.id == id)
            .unwrap_or_else(|| panic!("{provider}/{id}"))
            .clone()
    }

    fn decode(
        body: &str,
    ) -> (
        Vec<StreamEvent>,
        AssistantMessage,
        Result<StopReason, String>,
    ) {
        let model = model("openrouter", "moonshotai/kimi-k2.6");
        let mut decoder = OpenAiDecoder::new(crate::ai::new_assistant_message(&model, 1), &model);
        let mut sse = crate::ai::sse::SseDecoder::new();
        sse.feed(body.as_bytes());
        sse.finish();
        let mut out = VecDeque::new();
        let mut end = None;
        while let Some(frame) = sse.next_frame() {
            match decoder.on_data(frame.data, &mut out) {
                Ok(true) => {
                    end = Some(decoder.complete(&mut out));
                    break;
                }
                Ok(false) => {}
                Err(err) => {
                    end = Some(Err(err));
                    break;
                }
            }
        }
        let end = end.unwrap_or_else(|| decoder.on_eof(&mut out));
        (out.into_iter().collect(), decoder.into_message(), end)
    }

    #[test]
    fn compat_detection_matches_the_reference_table() {
        let deepseek = OpenAiCompat::resolve(&model("deepseek", "deepseek-v4-pro"));
        assert_eq!(deepseek.thinking_format, ThinkingFormat::DeepSeek);
        assert!(!deepseek.supports_store);
        assert!(deepseek.requires_reasoning_content_on_assistant_messages);
        let openrouter = OpenAiCompat::resolve(&model("openrouter", "anthropic/claude-sonnet-4.5"));
        assert!(openrouter.cache_control_anthropic);
        assert_eq!(openrouter.thinking_format, ThinkingFormat::OpenRouter);
        let mut local = model("openrouter", "moonshotai/kimi-k2.6");
        local.provider = "local".into();
        local.base_url = "http://127.0.0.1:8080/v1".into();
        local.compat =
            serde_json::json!({"supportsDeveloperRole": false, "maxTokensField": "max_tokens"})
                .as_object()
                .cloned();
        let compat = OpenAiCompat::resolve(&local);
        assert!(!compat.supports_developer_role);
        assert!(compat.max_tokens_field_is_max_tokens);
        assert!(compat.supports_store);
    }

    #[test]
    fn tool_call_ids_are_normalised_as_the_reference_does() {
        let openai = model("openai", "gpt-5.4");
        assert_eq!(
            normalize_tool_call_id(&openai, "call_1|fc_+/=abc"),
            "call_1"
        );
        assert_eq!(normalize_tool_call_id(&openai, "c a|x"), "c_a");
        assert_eq!(normalize_tool_call_id(&openai, &"x".repeat(50)).len(), 40);
        let other = model("groq", "openai/gpt-oss-120b");
        assert_eq!(normalize_tool_call_id(&other, &"x".repeat(50)).len(), 50);
    }

    #[test]
    fn text_usage_and_done() {
        let (events, message, end) = decode(concat!(
            "data: {\"id\":\"c1\",\"model\":\"moonshotai/kimi-k2.6-0905\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n",
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":1200,\"completion_tokens\":50,\"prompt_tokens_details\":{\"cached_tokens\":1000}}}\n\n",
            "data: [DONE]\n\n",
        ));
        assert_eq!(end, Ok(StopReason::Stop));
        let kinds: Vec<&str> = events.iter().map(StreamEvent::kind).collect();
        assert_eq!(
            kinds,
            ["text_start", "text_delta", "text_delta", "text_end"]
        );
        assert_eq!(message.text(), "Hello");
        assert_eq!(message.response_id.as_deref(), Some("c1"));
        assert_eq!(
            message.response_model.as_deref(),
            Some("moonshotai/kimi-k2.6-0905")
        );
        assert_eq!(
            (
                message.usage.input,
                message.usage.cache_read,
                message.usage.output
            ),
            (200, 1000, 50)
        );
        assert_eq!(message.usage.total_tokens, 1250);
    }

    #[test]
    fn parallel_tool_calls_and_reasoning() {
        let (events, message, end) = decode(concat!(
            "data: {\"choices\":[{\"delta\":{\"reasoning\":\"think\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"ls\",\"arguments\":\"{\\\"pa\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"b\",\"function\":{\"name\":\"read\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"th\\\":\\\"src\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        ));
        assert_eq!(end, Ok(StopReason::ToolUse));
        let calls: Vec<&ToolCall> = message.tool_calls().collect();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].arguments, serde_json::json!({"path": "src"}));
        assert_eq!(calls[1].name, "read");
        let ContentBlock::Thinking(thinking) = &message.content[0] else {
            panic!()
        };
        assert_eq!(thinking.thinking_signature.as_deref(), Some("reasoning"));
        assert_eq!(
            events
                .iter()
                .filter(|event| event.kind() == "toolcall_end")
                .count(),
            2
        );
    }

    #[test]
    fn errors_mid_stream_and_truncation() {
        let (_, message, end) = decode(concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
            "data: {\"error\":{\"message\":\"Upstream overloaded\",\"metadata\":{\"raw\":\"raw detail\"}}}\n\n",
        ));
        assert_eq!(end, Err("Upstream overloaded\nraw detail".to_owned()));
        assert_eq!(message.text(), "Hi");
        let (_, _, end) = decode("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n");
        assert_eq!(
            end,
            Err("OpenAI stream ended without finish_reason or [DONE]".to_owned())
        );
        let (_, message, end) = decode(
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"content_filter\"}]}\n\ndata: [DONE]\n\n",
        );
        assert_eq!(
            end,
            Err("Provider finish_reason: content_filter".to_owned())
        );
        assert_eq!(message.stop_reason, StopReason::Error);
    }

    #[test]
    fn a_finish_reason_without_done_completes_and_null_chunks_are_skipped() {
        let (events, message, end) = decode(concat!(
            "data: null\n\n",
            "data: {\"choices\":[null]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n",
        ));
        assert_eq!(end, Ok(StopReason::Stop));
        assert_eq!(message.text(), "ok");
        assert_eq!(events.last().map(StreamEvent::kind), Some("text_end"));
        let (_, _, end) = decode("data: {not json\n\n");
        assert!(
            end.unwrap_err()
                .starts_with("Could not parse stream chunk as JSON")
        );
    }
}
