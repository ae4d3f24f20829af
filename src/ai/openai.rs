//! The `openai-completions` wire protocol: `POST <baseUrl>/chat/completions` with
//! `stream: true`, for OpenAI and every OpenAI-compatible server (OpenRouter, vLLM,
//! llama.cpp, Ollama, LM Studio, …), exactly as 1.6.0's `api/openai-completions.js` shapes
//! and reads it.
//!
//! Two pure halves:
//! - [`build_request`]: model + request + options → URL, headers and the JSON body, field for
//!   field in the reference's construction order. The transcript is normalised first
//!   (`Request::system_prompt` and `Request::tools` become a leading system message), then
//!   resolved for the model ([`OpenAiCompat::supports_mid_convo_system_messages`]: later
//!   system messages stay in place as instruction messages rendered as updates, otherwise
//!   everything collapses into one leading message). Tools come from the transcript: the
//!   top-level `tools` list, plus `{"role":"system","tools":[…]}` messages for tools a later
//!   system message adds when the model takes mid-conversation tool additions (Kimi style).
//!   Compat flags are auto-detected from provider and base URL and overridden by `compat`.
//! - [`OpenAiDecoder`]: SSE `data:` payloads → [`StreamEvent`]s and the assistant message
//!   (`responseId`, `responseModel`, `rawStopReason`, usage with `reasoning`, OpenRouter's
//!   billed cost).
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
//! can be replayed) or as `reasoning_details` (kept, as JSON, in the signature); tool calls
//! arrive as `delta.tool_calls[]` fragments keyed by `index`. A stream that ends without a
//! `finish_reason` fails with `Stream ended without finish_reason` (unless the model's
//! `supportsFinishReason` is false).
//!
//! Not carried over from the reference: OpenAI grammar tools (`supportsOpenAIGrammarTools`
//! with grammar `constrainedSampling`; such tools are sent as function tools), GitHub Copilot's
//! dynamic headers, `temperature`/`tool_choice` (the agent never sets them).

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value, json};

use crate::ai::convert::{LlmMessage, transform_messages};
use crate::ai::models::{Model, ModelCost, ThinkingLevel, calculate_cost, clamp_thinking_level};
use crate::ai::partial_json::{parse_streaming_json, parse_tool_call_arguments};
use crate::ai::request::{
    assign, clamp_max_tokens_to_context, clamp_thinking_budget_to_answer_room, identity_headers,
    json_schema_tool_parameters, open_code_session_headers, resolve_json_schema_strict_sampling,
    sampling_params, short_hash, thinking_budget_for_level,
};
use crate::ai::transcript::{
    ToolChangeSupport, get_system_message_text, normalize_context, render_system_message_update,
    resolve_transcript, resolve_transcript_tools,
};
use crate::ai::transport::{WireRequest, set_header_ci};
use crate::ai::{CacheRetention, Request, StreamEvent, StreamOptions, join_url};
use crate::model::message::{
    AssistantKey, AssistantMessage, ContentBlock, StopReason, TextContent, ThinkingContent,
    ToolCall, ToolDeclaration, Usage, UserContent,
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
    /// `reasoning: {enabled}` + `reasoning_effort`.
    Together,
    /// `chat_template_args` + `reasoning_effort`.
    Baseten,
    /// `thinking: {type, clear_thinking}` + `reasoning_effort`.
    Zai,
    /// `enable_thinking` + `reasoning_effort`.
    Qwen,
    /// `chat_template_kwargs` from `compat.chatTemplateKwargs`.
    ChatTemplate,
    /// `chat_template_kwargs: {enable_thinking, preserve_thinking}`.
    QwenChatTemplate,
    /// top-level `thinking: "<effort>"`.
    StringThinking,
    /// `reasoning: {effort}` only when the level maps to a value.
    AntLing,
}

/// How session-affinity headers are written (`compat.sessionAffinityFormat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionAffinityFormat {
    /// `session_id`, `x-client-request-id`, `x-session-affinity`.
    OpenAi,
    /// `x-client-request-id`, `x-session-affinity` (also any unknown value).
    OpenAiNoSession,
    /// `x-session-id`.
    OpenRouter,
}

/// The resolved compatibility flags of an OpenAI-compatible model (1.6.0's `getCompat`):
/// auto-detected from provider and base URL (`detectCompat`), each overridable by the model's
/// `compat`.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenAiCompat {
    /// Send `"store": false`.
    pub supports_store: bool,
    /// Instruction messages of reasoning models use the role `developer` (default: only
    /// OpenAI's own API).
    pub supports_developer_role: bool,
    /// `reasoning_effort` is accepted.
    pub supports_reasoning_effort: bool,
    /// Send `stream_options.include_usage`.
    pub supports_usage_in_streaming: bool,
    /// Streams end with a `finish_reason` (when false, `stop`/`toolUse` is inferred).
    pub supports_finish_reason: bool,
    /// The output-limit field is `max_tokens` (else `max_completion_tokens`).
    pub max_tokens_field_is_max_tokens: bool,
    /// Tool results carry `name`.
    pub requires_tool_result_name: bool,
    /// Insert an assistant message between tool results and a user message.
    pub requires_assistant_after_tool_result: bool,
    /// Replayed assistant messages without text send `""` instead of `null`.
    pub requires_non_null_assistant_content: bool,
    /// Send `"tools": []` when the conversation has tool history but no tools.
    pub requires_tools_with_tool_history: bool,
    /// Replay thinking as text.
    pub requires_thinking_as_text: bool,
    /// Replayed assistant messages need `reasoning_content`.
    pub requires_reasoning_content_on_assistant_messages: bool,
    /// How thinking is requested.
    pub thinking_format: ThinkingFormat,
    /// `chat_template_kwargs` of the `chat-template` format.
    pub chat_template_kwargs: Map<String, Value>,
    /// `chat_template_args` of the `baseten` format.
    pub chat_template_args: Map<String, Value>,
    /// `tool_stream: true` with tools (z.ai).
    pub zai_tool_stream: bool,
    /// `thinking_token_budget` (vLLM) caps reasoning.
    pub supports_thinking_token_budget: bool,
    /// The top-level field that caps reasoning tokens.
    pub thinking_token_budget_field: Option<String>,
    /// Function definitions carry `strict` (default false).
    pub supports_strict_mode: bool,
    /// Later system messages stay in place (default false: they fold into the leading one).
    pub supports_mid_convo_system_messages: bool,
    /// Later system messages may add tools in place (with the above).
    pub supports_mid_convo_tool_additions: bool,
    /// Anthropic-style `cache_control` markers.
    pub cache_control_anthropic: bool,
    /// Session-affinity headers (default: OpenRouter).
    pub send_session_affinity_headers: bool,
    /// Which session-affinity headers.
    pub session_affinity_format: SessionAffinityFormat,
    /// Long cache retention is accepted.
    pub supports_long_cache_retention: bool,
    /// `promptCacheKeyMode`: `auto` (`None`), `enabled`, `disabled`.
    pub prompt_cache_key_mode: Option<String>,
    /// vLLM scheduler priority (`priority`).
    pub vllm_priority: Option<Value>,
}

impl OpenAiCompat {
    /// Resolves the flags for a model (the reference's `getCompat` over `detectCompat`).
    pub fn resolve(model: &Model) -> Self {
        let provider = model.provider.as_str();
        let url = model.base_url.as_str();
        let is_zai = provider == "zai"
            || provider == "zai-coding-cn"
            || url.contains("api.z.ai")
            || url.contains("open.bigmodel.cn");
        let is_together = provider == "together"
            || url.contains("api.together.ai")
            || url.contains("api.together.xyz");
        let is_moonshot = provider == "moonshotai"
            || provider == "moonshotai-cn"
            || url.contains("api.moonshot.");
        let is_open_router = provider == "openrouter" || url.contains("openrouter.ai");
        let is_cf_workers =
            provider == "cloudflare-workers-ai" || url.contains("api.cloudflare.com");
        let is_cf_gateway =
            provider == "cloudflare-ai-gateway" || url.contains("gateway.ai.cloudflare.com");
        let is_nvidia = provider == "nvidia" || url.contains("integrate.api.nvidia.com");
        let is_ant_ling = provider == "ant-ling" || url.contains("api.ant-ling.com");
        let is_cerebras = provider == "cerebras" || url.contains("cerebras.ai");
        let is_deepseek = provider == "deepseek" || url.to_lowercase().contains("deepseek.com");
        let is_grok = provider == "xai" || url.contains("api.x.ai");
        let non_standard = is_nvidia
            || is_cerebras
            || is_grok
            || is_together
            || url.contains("chutes.ai")
            || is_deepseek
            || is_zai
            || is_moonshot
            || provider == "opencode"
            || url.contains("opencode.ai")
            || is_cf_workers
            || is_cf_gateway
            || is_ant_ling;
        let use_max_tokens = url.contains("chutes.ai")
            || is_deepseek
            || is_moonshot
            || is_cf_gateway
            || is_together
            || is_nvidia
            || is_ant_ling
            || is_zai;
        let is_openai = provider == "openai" || url.contains("api.openai.com");
        let detected_format = if is_deepseek {
            ThinkingFormat::DeepSeek
        } else if is_zai {
            ThinkingFormat::Zai
        } else if is_together {
            ThinkingFormat::Together
        } else if is_ant_ling {
            ThinkingFormat::AntLing
        } else if is_open_router {
            ThinkingFormat::OpenRouter
        } else {
            ThinkingFormat::OpenAi
        };
        let flag = |key: &str, detected: bool| model.compat_bool(key).unwrap_or(detected);
        let object = |key: &str| -> Map<String, Value> {
            model
                .compat_value(key)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        Self {
            supports_store: flag("supportsStore", !non_standard),
            supports_developer_role: flag("supportsDeveloperRole", is_openai),
            supports_reasoning_effort: flag(
                "supportsReasoningEffort",
                !is_grok
                    && !is_zai
                    && !is_moonshot
                    && !is_together
                    && !is_cf_gateway
                    && !is_nvidia
                    && !is_ant_ling,
            ),
            supports_usage_in_streaming: flag("supportsUsageInStreaming", true),
            supports_finish_reason: flag("supportsFinishReason", true),
            max_tokens_field_is_max_tokens: match model.compat_str("maxTokensField") {
                Some(field) => field == "max_tokens",
                None => use_max_tokens,
            },
            requires_tool_result_name: flag("requiresToolResultName", false),
            requires_assistant_after_tool_result: flag("requiresAssistantAfterToolResult", false),
            requires_non_null_assistant_content: flag("requiresNonNullAssistantContent", false),
            requires_tools_with_tool_history: flag("requiresToolsWithToolHistory", false),
            requires_thinking_as_text: flag("requiresThinkingAsText", false),
            requires_reasoning_content_on_assistant_messages: flag(
                "requiresReasoningContentOnAssistantMessages",
                is_deepseek,
            ),
            thinking_format: match model.compat_str("thinkingFormat") {
                None => detected_format,
                Some("openrouter") => ThinkingFormat::OpenRouter,
                Some("deepseek") => ThinkingFormat::DeepSeek,
                Some("together") => ThinkingFormat::Together,
                Some("baseten") => ThinkingFormat::Baseten,
                Some("zai") => ThinkingFormat::Zai,
                Some("qwen") => ThinkingFormat::Qwen,
                Some("chat-template") => ThinkingFormat::ChatTemplate,
                Some("qwen-chat-template") => ThinkingFormat::QwenChatTemplate,
                Some("string-thinking") => ThinkingFormat::StringThinking,
                Some("ant-ling") => ThinkingFormat::AntLing,
                Some(_) => ThinkingFormat::OpenAi,
            },
            chat_template_kwargs: object("chatTemplateKwargs"),
            chat_template_args: object("chatTemplateArgs"),
            zai_tool_stream: flag("zaiToolStream", false),
            supports_thinking_token_budget: flag("supportsThinkingTokenBudget", false),
            thinking_token_budget_field: model
                .compat_str("thinkingTokenBudgetField")
                .map(str::to_owned),
            supports_strict_mode: flag("supportsStrictMode", false),
            supports_mid_convo_system_messages: flag("supportsMidConvoSystemMessages", false),
            supports_mid_convo_tool_additions: flag("supportsMidConvoToolAdditions", false),
            cache_control_anthropic: match model.compat_str("cacheControlFormat") {
                Some(format) => format == "anthropic",
                None => provider == "openrouter" && model.id.starts_with("anthropic/"),
            },
            send_session_affinity_headers: flag("sendSessionAffinityHeaders", is_open_router),
            session_affinity_format: match model.compat_str("sessionAffinityFormat") {
                Some("openai") => SessionAffinityFormat::OpenAi,
                Some("openrouter") => SessionAffinityFormat::OpenRouter,
                Some(_) => SessionAffinityFormat::OpenAiNoSession,
                None if is_open_router => SessionAffinityFormat::OpenRouter,
                None => SessionAffinityFormat::OpenAi,
            },
            supports_long_cache_retention: flag(
                "supportsLongCacheRetention",
                !(is_together || is_cf_workers || is_cf_gateway || is_nvidia || is_ant_ling),
            ),
            prompt_cache_key_mode: model.compat_str("promptCacheKeyMode").map(str::to_owned),
            vllm_priority: model.compat_value("vllmPriority").cloned(),
        }
    }

    fn tool_support(&self) -> ToolChangeSupport {
        if self.supports_mid_convo_system_messages && self.supports_mid_convo_tool_additions {
            ToolChangeSupport::Additions
        } else {
            ToolChangeSupport::None
        }
    }
}

/// Whether the caller's headers carry authentication (the reference's `getClientApiKey`
/// accepts those instead of a key).
pub fn has_header_auth(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(name, value)| {
        (name.eq_ignore_ascii_case("authorization")
            || name.eq_ignore_ascii_case("cf-aig-authorization"))
            && !value.trim().is_empty()
    })
}

/// Builds the HTTP request of one call (the reference's `createClient` + `buildParams`);
/// `Err` with the reference's text when a tool's constrained sampling cannot be had.
pub fn build_request(
    model: &Model,
    request: &Request,
    options: &StreamOptions,
) -> Result<WireRequest, String> {
    let compat = OpenAiCompat::resolve(model);
    let base_url = options.base_url.as_deref().unwrap_or(&model.base_url);
    let api_key = match options.api_key.as_deref().filter(|key| !key.is_empty()) {
        Some(key) => key.to_owned(),
        None => "unused".to_owned(),
    };
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
    let mut configured: Vec<(String, String)> = identity_headers(model, &options.identity);
    for (name, value) in model.headers.iter().flatten() {
        if let Some(value) = value.as_str() {
            configured.push((name.clone(), value.to_owned()));
        }
    }
    if let Some(session) = cache_session
        && compat.send_session_affinity_headers
    {
        let names: &[&str] = match compat.session_affinity_format {
            SessionAffinityFormat::OpenRouter => &["x-session-id"],
            SessionAffinityFormat::OpenAi => {
                &["session_id", "x-client-request-id", "x-session-affinity"]
            }
            SessionAffinityFormat::OpenAiNoSession => {
                &["x-client-request-id", "x-session-affinity"]
            }
        };
        for name in names {
            configured.push(((*name).to_owned(), session.to_owned()));
        }
    }
    configured.extend(open_code_session_headers(
        model,
        options.session_id.as_deref(),
    ));
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

    let normalized = normalize_context(request);
    let body = build_body(model, &normalized, options, &compat)?;
    Ok(WireRequest {
        url: join_url(base_url, "chat/completions"),
        headers,
        body,
    })
}

/// The effort sent for a level: the model's `thinkingLevelMap` value when it has one
/// (`map[level] ?? level`).
fn mapped_or_level(model: &Model, level: ThinkingLevel) -> Value {
    match model
        .thinking_level_map
        .as_ref()
        .and_then(|map| map.get(level.as_str()))
    {
        None | Some(Value::Null) => Value::String(level.as_str().to_owned()),
        Some(value) => value.clone(),
    }
}

/// `model.thinkingLevelMap?.[key]`: `None` when absent (undefined), `Some(Null)` when null.
fn map_entry<'a>(model: &'a Model, key: &str) -> Option<&'a Value> {
    model.thinking_level_map.as_ref()?.get(key)
}

/// The request body (the reference's `buildParams`) over the normalised transcript, in its
/// key order.
pub fn build_body(
    model: &Model,
    transcript: &[Cow<'_, LlmMessage>],
    options: &StreamOptions,
    compat: &OpenAiCompat,
) -> Result<Value, String> {
    let retention = options.cache_retention;
    let effort = match options.thinking {
        ThinkingLevel::Off => None,
        requested => {
            Some(clamp_thinking_level(model, requested)).filter(|l| *l != ThinkingLevel::Off)
        }
    };
    // `buildBaseOptions`: the limit (the caller's or the model's) fitted to the context.
    let max_tokens = clamp_max_tokens_to_context(
        model,
        transcript,
        options.max_tokens.unwrap_or(model.max_tokens),
    );
    let resolved = resolve_transcript(
        transcript.to_vec(),
        compat.supports_mid_convo_system_messages,
    );
    let transcript_tools = resolve_transcript_tools(&resolved, compat.tool_support());
    let mut messages = convert_messages(model, &resolved, compat)?;

    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.id.clone()));
    body.insert("messages".into(), Value::Null);
    body.insert("stream".into(), Value::Bool(true));
    let supports_prompt_cache_key = match compat.prompt_cache_key_mode.as_deref() {
        Some("enabled") => true,
        None | Some("auto") => {
            model.base_url.contains("api.openai.com")
                || (retention == CacheRetention::Long && compat.supports_long_cache_retention)
        }
        Some(_) => false,
    };
    if retention != CacheRetention::None
        && supports_prompt_cache_key
        && let Some(session) = &options.session_id
    {
        let key: String = session.chars().take(64).collect();
        body.insert("prompt_cache_key".into(), Value::String(key));
    }
    if retention == CacheRetention::Long && compat.supports_long_cache_retention {
        body.insert("prompt_cache_retention".into(), json!("24h"));
    }
    if compat.supports_usage_in_streaming {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if compat.supports_store {
        body.insert("store".into(), Value::Bool(false));
    }
    if max_tokens > 0 {
        let field = if compat.max_tokens_field_is_max_tokens {
            "max_tokens"
        } else {
            "max_completion_tokens"
        };
        body.insert(field.into(), json!(max_tokens));
    }
    let mut tools: Option<Vec<Value>> = None;
    if !transcript_tools.request_tools.is_empty() {
        tools = Some(convert_tools(&transcript_tools.request_tools, compat)?);
    } else if compat.requires_tools_with_tool_history && has_tool_history(&resolved) {
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
    if let Some(priority) = &compat.vllm_priority {
        body.insert("priority".into(), priority.clone());
    }
    let budget_field = compat.thinking_token_budget_field.clone().or_else(|| {
        compat
            .supports_thinking_token_budget
            .then(|| "thinking_token_budget".to_owned())
    });
    let thinking_budget = match effort {
        Some(level) if model.reasoning => {
            let ceiling = body
                .get("max_tokens")
                .or_else(|| body.get("max_completion_tokens"))
                .and_then(Value::as_u64)
                .unwrap_or(model.max_tokens);
            let budget = clamp_thinking_budget_to_answer_room(
                thinking_budget_for_level(level, &options.thinking_budgets),
                ceiling,
            );
            (budget > 0).then_some(budget)
        }
        _ => None,
    };
    insert_thinking(&mut body, model, effort, compat, thinking_budget);
    if let (Some(field), Some(budget)) = (budget_field, thinking_budget) {
        body.insert(field, json!(budget));
    }
    if let Some(routing) = model
        .compat_value("openRouterRouting")
        .filter(|v| truthy(v))
    {
        body.insert("provider".into(), routing.clone());
    }
    if let Some(routing) = model
        .compat_value("vercelGatewayRouting")
        .filter(|v| truthy(v))
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
    if let Some(params) = sampling_params(model, effort.unwrap_or(ThinkingLevel::Off)) {
        assign(&mut body, params);
    }
    Ok(Value::Object(body))
}

pub(crate) fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// `chat_template_kwargs`/`chat_template_args` from a compat map
/// (`buildChatTemplateValues`): literals as they are; `{$var}` objects resolved.
fn chat_template_values(
    model: &Model,
    effort: Option<ThinkingLevel>,
    values: &Map<String, Value>,
    budget: Option<u64>,
) -> Option<Map<String, Value>> {
    let mut out = Map::new();
    for (key, value) in values {
        let resolved = match value {
            Value::Object(spec) => {
                if effort.is_none() && spec.get("omitWhenOff").is_some_and(truthy) {
                    None
                } else {
                    match spec.get("$var").and_then(Value::as_str) {
                        Some("thinking.enabled") => Some(Value::Bool(effort.is_some())),
                        Some("thinking.budget") => budget.map(|budget| json!(budget)),
                        _ => {
                            let mapped = match effort {
                                Some(level) => map_entry(model, level.as_str()),
                                None => map_entry(model, "off"),
                            };
                            match mapped {
                                None => effort.map(|level| json!(level.as_str())),
                                Some(Value::String(text)) => Some(json!(text)),
                                Some(_) => None,
                            }
                        }
                    }
                }
            }
            other => Some(other.clone()),
        };
        if let Some(resolved) = resolved {
            out.insert(key.clone(), resolved);
        }
    }
    (!out.is_empty()).then_some(out)
}

fn insert_thinking(
    body: &mut Map<String, Value>,
    model: &Model,
    effort: Option<ThinkingLevel>,
    compat: &OpenAiCompat,
    budget: Option<u64>,
) {
    let reasoning = model.reasoning;
    let format = compat.thinking_format;
    let off_not_null = !matches!(map_entry(model, "off"), Some(Value::Null));
    match (format, reasoning) {
        (ThinkingFormat::Zai, true) => {
            body.insert(
                "thinking".into(),
                match effort {
                    Some(_) => json!({"type": "enabled", "clear_thinking": false}),
                    None => json!({"type": "disabled"}),
                },
            );
            if let Some(level) = effort
                && compat.supports_reasoning_effort
            {
                let value = match map_entry(model, level.as_str()) {
                    None => json!(level.as_str()),
                    Some(value) => value.clone(),
                };
                if value.is_string() {
                    body.insert("reasoning_effort".into(), value);
                }
            }
        }
        (ThinkingFormat::Qwen, true) => {
            body.insert("enable_thinking".into(), Value::Bool(effort.is_some()));
            if let Some(level) = effort
                && compat.supports_reasoning_effort
            {
                let value = mapped_or_level(model, level);
                if value.is_string() {
                    body.insert("reasoning_effort".into(), value);
                }
            }
        }
        (ThinkingFormat::QwenChatTemplate, true) => {
            body.insert(
                "chat_template_kwargs".into(),
                json!({"enable_thinking": effort.is_some(), "preserve_thinking": true}),
            );
        }
        (ThinkingFormat::ChatTemplate, true) => {
            if let Some(values) =
                chat_template_values(model, effort, &compat.chat_template_kwargs, budget)
            {
                body.insert("chat_template_kwargs".into(), Value::Object(values));
            }
        }
        (ThinkingFormat::Baseten, true) => {
            if let Some(values) =
                chat_template_values(model, effort, &compat.chat_template_args, budget)
            {
                body.insert("chat_template_args".into(), Value::Object(values));
            }
            if compat.supports_reasoning_effort {
                let mapped = match effort {
                    Some(level) => map_entry(model, level.as_str()),
                    None => map_entry(model, "off"),
                };
                let value = match mapped {
                    None => effort.map(|level| json!(level.as_str())),
                    Some(value) => Some(value.clone()),
                };
                if let Some(value) = value.filter(Value::is_string) {
                    body.insert("reasoning_effort".into(), value);
                }
            }
        }
        (ThinkingFormat::DeepSeek, true) => {
            if effort.is_some() {
                body.insert("thinking".into(), json!({"type": "enabled"}));
            } else if off_not_null {
                body.insert("thinking".into(), json!({"type": "disabled"}));
            }
            if let Some(level) = effort
                && compat.supports_reasoning_effort
            {
                body.insert("reasoning_effort".into(), mapped_or_level(model, level));
            }
        }
        (ThinkingFormat::OpenRouter, true) => match effort {
            Some(level) => {
                body.insert(
                    "reasoning".into(),
                    json!({"effort": mapped_or_level(model, level)}),
                );
            }
            None if off_not_null => {
                let off = match map_entry(model, "off") {
                    None | Some(Value::Null) => json!("none"),
                    Some(value) => value.clone(),
                };
                body.insert("reasoning".into(), json!({"effort": off}));
            }
            None => {}
        },
        (ThinkingFormat::AntLing, true) if effort.is_some() => {
            if let Some(level) = effort
                && let Some(Value::String(value)) = map_entry(model, level.as_str())
            {
                body.insert("reasoning".into(), json!({"effort": value}));
            }
        }
        (ThinkingFormat::Together, true) => {
            body.insert("reasoning".into(), json!({"enabled": effort.is_some()}));
            if let Some(level) = effort
                && compat.supports_reasoning_effort
            {
                body.insert("reasoning_effort".into(), mapped_or_level(model, level));
            }
        }
        (ThinkingFormat::StringThinking, true) => match effort {
            Some(level) => {
                body.insert("thinking".into(), mapped_or_level(model, level));
            }
            None if off_not_null => {
                let off = match map_entry(model, "off") {
                    None | Some(Value::Null) => json!("none"),
                    Some(value) => value.clone(),
                };
                body.insert("thinking".into(), off);
            }
            None => {}
        },
        _ => {
            if !reasoning || !compat.supports_reasoning_effort {
                return;
            }
            match effort {
                Some(level) => {
                    body.insert("reasoning_effort".into(), mapped_or_level(model, level));
                }
                None => {
                    if let Some(Value::String(off)) = map_entry(model, "off") {
                        body.insert("reasoning_effort".into(), json!(off));
                    }
                }
            }
        }
    }
}

fn has_tool_history(messages: &[Cow<'_, LlmMessage>]) -> bool {
    messages.iter().any(|message| match &**message {
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
        if matches!(
            message["role"].as_str(),
            Some("user" | "assistant" | "tool")
        ) && add_cache_control_to_text(message, marker)
        {
            return;
        }
    }
}

fn add_cache_control_to_text(message: &mut Value, marker: &Value) -> bool {
    let Some(content) = message.get_mut("content") else {
        return false;
    };
    match content {
        Value::String(text) => {
            if text.is_empty() {
                return false;
            }
            let text = std::mem::take(text);
            *content = json!([{"type": "text", "text": text, "cache_control": marker}]);
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

fn sanitize_id(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The reference's tool-call id normalisation for this protocol: `call|item` ids from the
/// Responses API become `call_item` (sanitised; over 40 characters, the call id cut and a
/// short hash of the whole id); OpenAI ids are cut to 40.
pub fn normalize_tool_call_id(model: &Model, id: &str) -> String {
    if let Some((call_id, item_id)) = id.split_once('|') {
        let call_id = sanitize_id(call_id);
        let item_id = sanitize_id(item_id);
        let combined = if item_id.is_empty() {
            call_id.clone()
        } else {
            format!("{call_id}_{item_id}")
        };
        if combined.encode_utf16().count() <= 40 {
            return combined;
        }
        let hash: String = short_hash(id).chars().take(8).collect();
        let keep = 40usize.saturating_sub(hash.len() + 1).max(1);
        return format!("{}_{hash}", utf16_prefix(&call_id, keep));
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

/// Tool definitions (`convertTools`): function tools, `strict` where the compat supports it.
pub fn convert_tools(
    tools: &[ToolDeclaration],
    compat: &OpenAiCompat,
) -> Result<Vec<Value>, String> {
    tools
        .iter()
        .map(|tool| {
            let strict =
                resolve_json_schema_strict_sampling(tool, compat.supports_strict_mode, None)?;
            let mut function = Map::new();
            function.insert("name".into(), Value::String(tool.name.clone()));
            function.insert(
                "description".into(),
                Value::String(tool.description.clone()),
            );
            function.insert(
                "parameters".into(),
                json_schema_tool_parameters(tool, strict),
            );
            if compat.supports_strict_mode {
                function.insert("strict".into(), Value::Bool(strict));
            }
            Ok(json!({"type": "function", "function": Value::Object(function)}))
        })
        .collect()
}

const REASONING_FIELDS: [&str; 3] = ["reasoning", "reasoning_content", "reasoning_text"];

/// Whether a value is one of the reasoning details OpenAI-compatible servers replay
/// (`isOpenAIReasoningDetail`).
fn is_reasoning_detail(detail: &Value) -> bool {
    let Value::Object(map) = detail else {
        return false;
    };
    let common = map
        .get("id")
        .is_none_or(|id| id.is_null() || id.is_string())
        && map.get("format").is_none_or(Value::is_string)
        && map.get("index").is_none_or(Value::is_number);
    if !common {
        return false;
    }
    match map.get("type").and_then(Value::as_str) {
        Some("reasoning.summary") => map.get("summary").is_some_and(Value::is_string),
        Some("reasoning.encrypted") => map.get("data").is_some_and(Value::is_string),
        Some("reasoning.text") => {
            map.get("text").is_some_and(Value::is_string)
                && map
                    .get("signature")
                    .is_none_or(|sig| sig.is_null() || sig.is_string())
        }
        _ => false,
    }
}

fn parse_reasoning_details(signature: Option<&str>) -> Option<Vec<Value>> {
    let parsed: Value = serde_json::from_str(signature.filter(|s| !s.is_empty())?).ok()?;
    match parsed {
        Value::Array(items) if !items.is_empty() && items.iter().all(is_reasoning_detail) => {
            Some(items)
        }
        _ => None,
    }
}

fn parse_legacy_encrypted_detail(signature: Option<&str>) -> Option<Value> {
    let parsed: Value = serde_json::from_str(signature.filter(|s| !s.is_empty())?).ok()?;
    (is_reasoning_detail(&parsed)
        && parsed["type"] == "reasoning.encrypted"
        && parsed["id"].as_str().is_some_and(|id| !id.is_empty())
        && parsed["data"].as_str().is_some_and(|data| !data.is_empty()))
    .then_some(parsed)
}

/// Maps the resolved transcript to chat-completions messages (the reference's
/// `convertMessages`).
pub fn convert_messages(
    model: &Model,
    transcript: &[Cow<'_, LlmMessage>],
    compat: &OpenAiCompat,
) -> Result<Vec<Value>, String> {
    let normalize = |id: &str| normalize_tool_call_id(model, id);
    let transformed = transform_messages(transcript, model, &normalize);
    let messages: Vec<&LlmMessage> = transformed.iter().map(|message| &**message).collect();
    let transcript_tools = resolve_transcript_tools(transcript, compat.tool_support());
    let instruction_role = if model.reasoning && compat.supports_developer_role {
        "developer"
    } else {
        "system"
    };
    let mut params: Vec<Value> = Vec::with_capacity(messages.len() + 1);
    let bridge = || json!({"role": "assistant", "content": "I have processed the tool results."});
    let mut last_role: Option<&str> = None;
    let mut system_index = 0usize;
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
            LlmMessage::System(system) => {
                let folded = system_index < transcript_tools.folded_system_messages;
                system_index += 1;
                let added = if folded {
                    &[][..]
                } else {
                    system.tools_added.as_deref().unwrap_or(&[])
                };
                if !added.is_empty() {
                    params.push(json!({"role": "system", "tools": convert_tools(added, compat)?}));
                }
                let text = if idx == 0 {
                    get_system_message_text(system)
                } else {
                    render_system_message_update(system)
                };
                if !text.is_empty() {
                    params.push(json!({"role": instruction_role, "content": text}));
                }
                last_role = Some("system");
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
                                ContentBlock::Text(text) if text.text.is_empty() => None,
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
                    last_role = Some("assistant");
                }
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
                    let content = if !text.trim().is_empty() {
                        text.as_str()
                    } else if has_images {
                        "(see attached image)"
                    } else {
                        "(no tool output)"
                    };
                    let mut tool = Map::new();
                    tool.insert("role".into(), json!("tool"));
                    tool.insert("content".into(), json!(content));
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
    Ok(params)
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
        if compat.requires_assistant_after_tool_result || compat.requires_non_null_assistant_content
        {
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
            ContentBlock::Thinking(thinking) => Some(thinking),
            _ => None,
        })
        .collect();
    let calls: Vec<&ToolCall> = assistant.tool_calls().collect();
    let signed_details = thinking
        .iter()
        .find_map(|block| parse_reasoning_details(block.thinking_signature.as_deref()));
    let legacy_details: Vec<Value> = calls
        .iter()
        .filter_map(|call| parse_legacy_encrypted_detail(call.thought_signature.as_deref()))
        .collect();
    let preserved =
        signed_details.or_else(|| (!legacy_details.is_empty()).then_some(legacy_details));
    let non_empty: Vec<&&ThinkingContent> = thinking
        .iter()
        .filter(|block| !block.thinking.trim().is_empty())
        .collect();
    if !non_empty.is_empty() {
        if compat.requires_thinking_as_text {
            let thinking_text = non_empty
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
            if preserved.is_none() {
                let mut signature = non_empty[0].thinking_signature.as_deref();
                if model.provider == "opencode-go" && signature == Some("reasoning") {
                    signature = Some("reasoning_content");
                }
                if let Some(signature) = signature.filter(|sig| REASONING_FIELDS.contains(sig)) {
                    let text = non_empty
                        .iter()
                        .map(|block| block.thinking.as_str())
                        .collect::<Vec<_>>()
                        .join("\n");
                    out.insert(signature.to_owned(), json!(text));
                }
            }
        }
    } else if !joined.is_empty() {
        out.insert("content".into(), json!(joined));
    }
    if !calls.is_empty() {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|call| {
                json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": to_js_string(&call.arguments)}})
            })
            .collect();
        out.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    if let Some(details) = preserved {
        out.insert("reasoning_details".into(), Value::Array(details));
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
    usage: Option<Value>,
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
    usage: Option<Value>,
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
    reasoning_details: Option<Value>,
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

/// A number of a usage object: JavaScript's `value || 0` (`None` for 0, null, absent or a
/// non-number).
fn number(value: &Value, key: &str) -> Option<f64> {
    value
        .get(key)
        .and_then(Value::as_f64)
        .filter(|n| n.is_finite() && *n != 0.0)
}

/// JavaScript's `a ?? b`: the first value that is neither null nor absent, as a number.
fn first_present(candidates: &[Option<&Value>]) -> f64 {
    for candidate in candidates {
        match candidate {
            None | Some(Value::Null) => continue,
            Some(value) => return value.as_f64().unwrap_or(0.0),
        }
    }
    0.0
}

fn tokens(value: f64) -> u64 {
    if value.is_finite() && value > 0.0 {
        value as u64
    } else {
        0
    }
}

/// Whether a cost is a usable number (`isValidCost`).
fn valid_cost(value: Option<&Value>) -> Option<f64> {
    value
        .and_then(Value::as_f64)
        .filter(|cost| cost.is_finite() && *cost >= 0.0)
}

/// Replaces the catalog total with OpenRouter's billed cost when the usage reports complete
/// accounting (`applyOpenRouterReportedCost`).
pub(crate) fn apply_open_router_reported_cost(usage: &mut Usage, reported: &Value) {
    let Some(cost) = valid_cost(reported.get("cost")) else {
        return;
    };
    match reported.get("is_byok") {
        Some(Value::Bool(false)) => {
            usage.cost.total = cost;
            usage.cost.total_from_provider = Some(true);
        }
        Some(Value::Bool(true)) => {
            let Some(details) = reported.get("cost_details").filter(|d| truthy(d)) else {
                return;
            };
            let upstream = match details.get("upstream_inference_cost") {
                Some(Value::Null) => {
                    let (Some(prompt), Some(completions)) = (
                        valid_cost(details.get("upstream_inference_prompt_cost")),
                        valid_cost(details.get("upstream_inference_completions_cost")),
                    ) else {
                        return;
                    };
                    Some(prompt + completions)
                }
                other => valid_cost(other),
            };
            let Some(upstream) = upstream else {
                return;
            };
            usage.cost.total = cost + upstream;
            usage.cost.total_from_provider = Some(true);
        }
        _ => {}
    }
}

/// Whether usage should take OpenRouter's billed cost (`isOpenRouterModel`).
pub(crate) fn is_open_router(model: &Model) -> bool {
    model.provider == "openrouter" || model.base_url.contains("openrouter.ai")
}

/// Maps chunk usage to the reference's usage with cost (`parseChunkUsage`): cached tokens
/// from `prompt_tokens_details.cached_tokens`, `prompt_cache_hit_tokens` or `cached_tokens`;
/// cache writes from `prompt_tokens_details.cache_write_tokens`; reasoning from
/// `completion_tokens_details.reasoning_tokens` or `reasoning_tokens`.
fn parse_usage(raw: &Value, cost: &ModelCost, open_router: bool) -> Usage {
    let prompt = number(raw, "prompt_tokens").unwrap_or(0.0);
    let details = raw.get("prompt_tokens_details");
    let cache_read = first_present(&[
        details.and_then(|details| details.get("cached_tokens")),
        raw.get("prompt_cache_hit_tokens"),
        raw.get("cached_tokens"),
    ]);
    let cache_write = details
        .and_then(|details| number(details, "cache_write_tokens"))
        .unwrap_or(0.0);
    let input = (prompt - cache_read - cache_write).max(0.0);
    let output = number(raw, "completion_tokens").unwrap_or(0.0);
    let reasoning = raw
        .get("completion_tokens_details")
        .and_then(|details| number(details, "reasoning_tokens"))
        .or_else(|| number(raw, "reasoning_tokens"))
        .unwrap_or(0.0);
    let mut usage = Usage {
        input: tokens(input),
        output: tokens(output),
        cache_read: tokens(cache_read),
        cache_write: tokens(cache_write),
        reasoning: Some(tokens(reasoning)),
        total_tokens: tokens(input + output + cache_read + cache_write),
        ..Default::default()
    };
    calculate_cost(cost, &mut usage);
    if open_router {
        apply_open_router_reported_cost(&mut usage, raw);
    }
    usage
}

/// Maps a `finish_reason` (`mapStopReason`).
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
    model_id: String,
    provider: String,
    open_router: bool,
    supports_finish_reason: bool,
    text_block: Option<usize>,
    thinking_block: Option<usize>,
    tools: Vec<ToolState>,
    tools_by_index: HashMap<u64, usize>,
    tools_by_id: HashMap<String, usize>,
    saw_finish_reason: bool,
    /// `reasoning_details` received so far (merged), written to the thinking block's
    /// signature when it closes.
    reasoning_details: Option<Vec<Value>>,
    /// Whether the blocks were closed (`*_end` events sent).
    finished: bool,
}

impl OpenAiDecoder {
    /// Starts decoding into `message` (the empty message of [`crate::ai::new_assistant_message`]).
    pub fn new(message: AssistantMessage, model: &Model) -> Self {
        Self {
            message,
            cost: model.cost.clone(),
            model_id: model.id.clone(),
            provider: model.provider.clone(),
            open_router: is_open_router(model),
            supports_finish_reason: OpenAiCompat::resolve(model).supports_finish_reason,
            text_block: None,
            thinking_block: None,
            tools: Vec::new(),
            tools_by_index: HashMap::new(),
            tools_by_id: HashMap::new(),
            saw_finish_reason: false,
            reasoning_details: None,
            finished: false,
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
                call.arguments = match parse_streaming_json(&tool.partial_args) {
                    object @ Value::Object(_) => object,
                    _ => Value::Object(Map::new()),
                };
            }
        }
    }

    /// Processes one SSE `data` payload. Returns `Ok(true)` at `[DONE]`; `Err` with the error
    /// text when the provider reported an error or sent something unreadable.
    pub fn on_data(&mut self, data: &str, out: &mut VecDeque<StreamEvent>) -> Result<bool, String> {
        self.on_frame("", data, out)
    }

    /// Processes one SSE frame (its `event` name and `data`), as the OpenAI SDK's stream
    /// does: `[DONE]` ends it, unreadable JSON fails, an `error` event or an `error` member
    /// fails with the error's message, JSON that is not an object is skipped.
    pub fn on_frame(
        &mut self,
        event: &str,
        data: &str,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, String> {
        if data == "[DONE]" {
            return Ok(true);
        }
        const MALFORMED: &str = "Error reading response: malformed server-sent event JSON.";
        let is_object = data.trim_start().starts_with('{');
        if event == "error" || !is_object {
            let value: Value = serde_json::from_str(data).map_err(|_| MALFORMED.to_owned())?;
            if event == "error" {
                let error = match value.get("error") {
                    None | Some(Value::Null) => value.clone(),
                    Some(error) => error.clone(),
                };
                return Err(stream_error_text(&error));
            }
            // Valid JSON that is not an object (e.g. `null`) is skipped, as the reference does.
            return Ok(false);
        }
        let chunk: Chunk<'_> = serde_json::from_str(data).map_err(|_| MALFORMED.to_owned())?;
        if let Some(error) = chunk.error.as_ref().filter(|error| truthy(error)) {
            return Err(stream_error_text(error));
        }
        self.on_chunk(chunk, out);
        Ok(false)
    }

    fn on_chunk(&mut self, chunk: Chunk<'_>, out: &mut VecDeque<StreamEvent>) {
        // `output.responseId ||= chunk.id` creates the key on the first chunk.
        self.message.key_order.touch(AssistantKey::ResponseId);
        if self
            .message
            .response_id
            .as_deref()
            .is_none_or(str::is_empty)
        {
            self.message.response_id = chunk
                .id
                .as_deref()
                .filter(|id| !id.is_empty())
                .map(str::to_owned);
        }
        if let Some(model) = chunk.model.as_deref()
            && !model.is_empty()
            && model != self.model_id
            && self
                .message
                .response_model
                .as_deref()
                .is_none_or(str::is_empty)
        {
            self.message.key_order.touch(AssistantKey::ResponseModel);
            self.message.response_model = Some(model.to_owned());
        }
        if let Some(usage) = chunk.usage.as_ref().filter(|usage| truthy(usage)) {
            self.message.usage = parse_usage(usage, &self.cost, self.open_router);
        }
        let Some(choice) = chunk.choices else {
            return;
        };
        if chunk.usage.as_ref().is_none_or(|usage| !truthy(usage))
            && let Some(usage) = choice.usage.as_ref().filter(|usage| truthy(usage))
        {
            self.message.usage = parse_usage(usage, &self.cost, self.open_router);
        }
        if let Some(reason) = choice
            .finish_reason
            .as_deref()
            .filter(|reason| !reason.is_empty())
        {
            self.message.key_order.touch(AssistantKey::RawStopReason);
            self.message.raw_stop_reason = Some(reason.to_owned());
            let (stop, error) = map_finish_reason(reason);
            self.message.stop_reason = stop;
            if error.is_some() {
                self.message.key_order.touch(AssistantKey::ErrorMessage);
                self.message.error_message = error;
            }
            self.saw_finish_reason = true;
        }
        let Some(delta) = choice.delta else {
            return;
        };
        // Reasoning first: a proxy may put reasoning and answer in one delta, and the thinking
        // block must come before the text block.
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
            let signature = if self.provider == "opencode-go" && field == "reasoning" {
                "reasoning_content"
            } else {
                field
            };
            let index = self.ensure_thinking(signature, out);
            if let Some(ContentBlock::Thinking(block)) = self.message.content.get_mut(index) {
                block.thinking.push_str(text);
            }
            out.push_back(StreamEvent::ThinkingDelta {
                content_index: index,
                delta: text.to_owned(),
            });
        }
        if let Some(Value::Array(details)) = &delta.reasoning_details {
            for detail in details.iter().filter(|detail| is_reasoning_detail(detail)) {
                self.ensure_thinking("", out);
                let merged = self.reasoning_details.get_or_insert_with(Vec::new);
                append_reasoning_detail(merged, detail);
            }
        }
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
        for call in delta.tool_calls.unwrap_or_default() {
            self.on_tool_call(call, out);
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

    fn ensure_thinking(&mut self, signature: &str, out: &mut VecDeque<StreamEvent>) -> usize {
        if let Some(index) = self.thinking_block {
            return index;
        }
        let index = self.message.content.len();
        self.message
            .content
            .push(ContentBlock::Thinking(ThinkingContent {
                thinking: String::new(),
                thinking_signature: Some(signature.to_owned()),
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
            .unwrap_or("");
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
                    name: name.to_owned(),
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
            if call.name.is_empty() && !name.is_empty() {
                call.name = name.to_owned();
            }
            if call.id.is_empty()
                && let Some(id) = id
            {
                call.id = id.to_owned();
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

    fn apply_reasoning_details(&mut self) {
        let Some(details) = &self.reasoning_details else {
            return;
        };
        let signature = to_js_string(&Value::Array(details.clone()));
        for block in &mut self.message.content {
            if let ContentBlock::Thinking(thinking) = block {
                thinking.thinking_signature = Some(signature.clone());
            }
        }
    }

    /// Closes every block in content order (`*_end` events; tool arguments parsed for good,
    /// malformed ones reported in `argumentsError`).
    pub fn finish_blocks(&mut self, out: &mut VecDeque<StreamEvent>) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.apply_reasoning_details();
        let finals: HashMap<usize, String> = self
            .tools
            .iter()
            .map(|tool| (tool.content_index, tool.partial_args.clone()))
            .collect();
        for tool in &mut self.tools {
            tool.dirty = false;
        }
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
                ContentBlock::ToolCall(call) => {
                    let (arguments, error) =
                        parse_tool_call_arguments(finals.get(&index).map_or("", String::as_str));
                    call.arguments = arguments;
                    call.arguments_error = error;
                    out.push_back(StreamEvent::ToolCallEnd {
                        content_index: index,
                        tool_call: call.clone(),
                    });
                }
                ContentBlock::Image(_) | ContentBlock::Unknown(_) => {}
            }
        }
    }

    /// The stream ended (`[DONE]` or the end of the body): closes the blocks; `Err` with the
    /// error text when the finish reason was an error or there was none.
    pub fn complete(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<StopReason, String> {
        self.finish_blocks(out);
        if !self.saw_finish_reason && !self.supports_finish_reason {
            self.message.stop_reason = if self.message.tool_calls().next().is_some() {
                StopReason::ToolUse
            } else {
                StopReason::Stop
            };
            return Ok(self.message.stop_reason);
        }
        if self.message.stop_reason == StopReason::Error {
            return Err(self
                .message
                .error_message
                .clone()
                .filter(|message| !message.is_empty())
                .unwrap_or_else(|| "Provider returned an error stop reason".to_owned()));
        }
        if !self.saw_finish_reason {
            return Err("Stream ended without finish_reason".to_owned());
        }
        match self.message.stop_reason {
            StopReason::Aborted | StopReason::Pending | StopReason::Unknown => {
                Err("Provider returned an error stop reason".to_owned())
            }
            reason => Ok(reason),
        }
    }

    /// The body ended without `[DONE]`: the same as [`Self::complete`] (the reference ends
    /// its iteration either way).
    pub fn on_eof(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<StopReason, String> {
        self.complete(out)
    }

    /// The call failed: reasoning details reach the thinking blocks (the reference's catch).
    pub fn on_failure(&mut self) {
        self.apply_reasoning_details();
    }
}

/// The text of an error the stream reported (`new APIError(undefined, error)` through
/// `formatProviderError`, OpenRouter's `metadata.raw` appended).
fn stream_error_text(error: &Value) -> String {
    crate::ai::transport::openai_error_text(None, Some(error), None)
}

/// Appends a streamed reasoning detail, merging consecutive text and summary deltas
/// (`appendOpenAIReasoningDetail`).
fn append_reasoning_detail(details: &mut Vec<Value>, detail: &Value) {
    let kind = detail["type"].as_str();
    if let Some(Value::Object(last)) = details.last_mut()
        && last.get("type").and_then(Value::as_str) == kind
        && matches!(kind, Some("reasoning.text" | "reasoning.summary"))
    {
        let field = if kind == Some("reasoning.text") {
            "text"
        } else {
            "summary"
        };
        let addition = detail[field].as_str().unwrap_or("").to_owned();
        if let Some(Value::String(existing)) = last.get_mut(field) {
            existing.push_str(&addition);
        }
        if kind == Some("reasoning.text")
            && !last.get("signature").is_some_and(truthy)
            && let Some(signature) = detail.get("signature")
        {
            last.insert("signature".into(), signature.clone());
        }
        // `??=` for id and index, `||=` for format.
        for key in ["id", "index"] {
            if last.get(key).is_none_or(Value::is_null)
                && let Some(value) = detail.get(key)
            {
                last.insert(key.into(), value.clone());
            }
        }
        if !last.get("format").is_some_and(truthy)
            && let Some(value) = detail.get("format")
        {
            last.insert("format".into(), value.clone());
        }
        return;
    }
    details.push(detail.clone());
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
        // 1.6.0 keeps the item id (distinct ids for calls sharing a call id), hashed when long.
        assert_eq!(
            normalize_tool_call_id(&openai, "call_1|fc_+/=abc"),
            "call_1_fc____abc"
        );
        assert_eq!(normalize_tool_call_id(&openai, "c a|x"), "c_a_x");
        let long = format!("call_{}|fc_{}", "y".repeat(40), "z".repeat(300));
        assert_eq!(
            normalize_tool_call_id(&openai, &long),
            "call_yyyyyyyyyyyyyyyyyyyyyyyyyy_1slwilo1"
        );
        assert_eq!(normalize_tool_call_id(&openai, "a|"), "a");
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
        assert_eq!(end, Err("Stream ended without finish_reason".to_owned()));
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
        assert_eq!(
            end,
            Err("Error reading response: malformed server-sent event JSON.".to_owned())
        );
    }
}
