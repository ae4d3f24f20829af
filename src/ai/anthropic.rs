//! The `anthropic-messages` wire protocol: `POST <baseUrl>/v1/messages` with `stream: true`,
//! exactly as 1.6.0's `api/anthropic-messages.js` shapes and reads it.
//!
//! Two pure halves:
//! - [`build_request`]: headers (`x-api-key`, `anthropic-version`, `anthropic-beta`; OAuth mode
//!   for `sk-ant-oat` keys; identity and session-affinity headers) and the body. The
//!   transcript is normalised (`Request::system_prompt` and `Request::tools` become a leading
//!   system message) and resolved for the model: the leading system message becomes the
//!   `system` blocks; where the model accepts mid-conversation system messages
//!   (`compat.supportsMidConvoSystemMessages`) later ones are sent as `{"role":"system"}`
//!   messages (rendered updates), held until the next assistant message so they never split a
//!   tool call from its results, otherwise everything collapses into `system`. With
//!   `supportsMidConvoToolChanges` the tool list stays the leading message's (plus a deferred
//!   placeholder) and later tool changes are `tool_addition`/`tool_removal` blocks; otherwise
//!   `tools` is the current tool set. Thinking is adaptive (`forceAdaptiveThinking`:
//!   `output_config.effort`) or budgeted; models with mid-conversation effort get effort
//!   markers. `cache_control` goes on the system blocks, the last tool and the last user or
//!   system message.
//! - [`AnthropicDecoder`]: typed SSE events → [`StreamEvent`]s and the assistant message
//!   (`responseId`, `responseModel`, `rawStopReason`, usage with `cacheWrite1h` and
//!   `reasoning`, input-transformation diagnostics).
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
//! `event: error` fails the call with the raw data text; a stream that stops after
//! `message_start` without `message_stop` fails with `Anthropic stream ended before
//! message_stop`, one without a stop reason with `Anthropic stream ended without a stop
//! reason`.
//!
//! Not carried over from the reference: message threads (`supportsMessageThreads`, on by
//! default for api.anthropic.com: requests are sent without `thread`), the strict-tool-limit
//! fallback, workload identity federation, GitHub Copilot's dynamic headers.

use std::borrow::Cow;
use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::ai::convert::{LlmMessage, transform_messages};
use crate::ai::models::{Model, ModelCost, ThinkingLevel, calculate_cost};
use crate::ai::openai::{
    apply_open_router_reported_cost, is_open_router, lenient_str, utf16_prefix,
};
use crate::ai::partial_json::{
    parse_json_with_repair, parse_streaming_json, parse_tool_call_arguments,
};
use crate::ai::request::{
    adjust_max_tokens_for_thinking, clamp_max_tokens_to_context, identity_headers,
    json_schema_tool_parameters, open_code_session_headers, resolve_json_schema_strict_sampling,
};
use crate::ai::transcript::{
    get_current_tools, get_initial_system_message, get_system_message_text, normalize_context,
    render_system_message_update, resolve_transcript,
};
use crate::ai::transport::{WireRequest, set_header_ci};
use crate::ai::{CacheRetention, Request, StreamEvent, StreamOptions, join_url};
use crate::model::message::{
    AssistantKey, AssistantMessage, ContentBlock, StopReason, TextContent, ThinkingContent,
    ToolCall, ToolDeclaration, ToolResultMessage, UsageKeyOrder, UserContent,
};

const FINE_GRAINED_TOOL_STREAMING_BETA: &str = "fine-grained-tool-streaming-2025-05-14";
const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";
const SERVER_SIDE_FALLBACK_BETA: &str = "server-side-fallback-2026-07-01";
const MID_CONVERSATION_OUTPUT_CONFIG_BETA: &str = "mid-conversation-output-config-2026-07-01";
const THINKING_BINDING_CONTROLS_BETA: &str = "thinking-binding-controls-2026-08-01";
const INLINE_TOOLS_BETA: &str = "inline-tools-2026-09-15";
const CLAUDE_CODE_VERSION: &str = "2.1.322";
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
const ERROR_TOOL_IMAGE_PLACEHOLDER: &str = "(image attached after the tool results)";

/// Whether the key is an Anthropic OAuth token (switches the request to OAuth mode).
pub fn is_oauth_token(key: &str) -> bool {
    key.contains("sk-ant-oat")
}

/// Whether the caller's headers carry authentication instead of a key (`hasRequestAuth`).
pub fn has_header_auth(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(name, value)| {
        ["authorization", "x-api-key", "cf-aig-authorization"]
            .iter()
            .any(|auth| name.eq_ignore_ascii_case(auth))
            && !value.trim().is_empty()
    })
}

/// Whether a request with this key runs in OAuth mode.
pub fn oauth_mode(model: &Model, api_key: Option<&str>) -> bool {
    model.provider != "github-copilot"
        && model.provider != "cloudflare-ai-gateway"
        && api_key.is_some_and(is_oauth_token)
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

/// The resolved compatibility flags of an Anthropic-compatible model (`getAnthropicCompat`).
#[derive(Clone, Debug, PartialEq)]
pub struct AnthropicCompat {
    /// Tools carry `eager_input_streaming` (else the fine-grained streaming beta).
    pub supports_eager_tool_input_streaming: bool,
    /// `cache_control.ttl: "1h"` with long retention.
    pub supports_long_cache_retention: bool,
    /// Session-affinity header (default: OpenRouter).
    pub send_session_affinity_headers: bool,
    /// `x-session-id` (OpenRouter format) instead of `x-session-affinity`.
    pub session_affinity_open_router: bool,
    /// `cache_control` on the last tool.
    pub supports_cache_control_on_tools: bool,
    /// Replay thinking with an empty signature instead of as text.
    pub allow_empty_signature: bool,
    /// Strict tool schemas.
    pub supports_strict_tools: bool,
    /// Later system messages stay in the conversation.
    pub supports_mid_convo_system_messages: bool,
    /// Later tool changes as `tool_addition`/`tool_removal` blocks.
    pub supports_mid_convo_tool_changes: bool,
    /// Adaptive thinking with `output_config.effort`.
    pub force_adaptive_thinking: bool,
    /// Effort markers in the conversation and thinking binding controls.
    pub supports_mid_convo_effort: bool,
}

impl AnthropicCompat {
    /// Resolves the flags for a model.
    pub fn resolve(model: &Model) -> Self {
        let open_router = is_open_router(model);
        let flag = |key: &str, default: bool| model.compat_bool(key).unwrap_or(default);
        Self {
            supports_eager_tool_input_streaming: flag("supportsEagerToolInputStreaming", true),
            supports_long_cache_retention: flag("supportsLongCacheRetention", true),
            send_session_affinity_headers: flag("sendSessionAffinityHeaders", open_router),
            session_affinity_open_router: match model.compat_str("sessionAffinityFormat") {
                Some(format) => format == "openrouter",
                None => open_router,
            },
            supports_cache_control_on_tools: flag("supportsCacheControlOnTools", true),
            allow_empty_signature: flag("allowEmptySignature", false),
            supports_strict_tools: flag("supportsStrictTools", false),
            supports_mid_convo_system_messages: flag("supportsMidConvoSystemMessages", false),
            supports_mid_convo_tool_changes: flag("supportsMidConvoToolChanges", false),
            force_adaptive_thinking: model.compat_bool("forceAdaptiveThinking") == Some(true),
            supports_mid_convo_effort: model.compat_bool("supportsMidConvoEffort") == Some(true),
        }
    }
}

fn cache_control(compat: &AnthropicCompat, retention: CacheRetention) -> Option<Value> {
    match retention {
        CacheRetention::None => None,
        CacheRetention::Short => Some(json!({"type": "ephemeral"})),
        CacheRetention::Long if compat.supports_long_cache_retention => {
            Some(json!({"type": "ephemeral", "ttl": "1h"}))
        }
        CacheRetention::Long => Some(json!({"type": "ephemeral"})),
    }
}

/// The thinking decision of one call (`streamSimple`).
struct Thinking {
    enabled: bool,
    effort: Option<String>,
    budget: Option<u64>,
    max_tokens: u64,
}

/// The effort of an adaptive-thinking level (`mapThinkingLevelToEffort`).
fn effort_for(model: &Model, level: ThinkingLevel) -> String {
    if let Some(Value::String(mapped)) = model
        .thinking_level_map
        .as_ref()
        .and_then(|map| map.get(level.as_str()))
    {
        return mapped.clone();
    }
    match level {
        ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        _ => "high",
    }
    .to_owned()
}

fn plan_thinking(
    model: &Model,
    compat: &AnthropicCompat,
    transcript: &[Cow<'_, LlmMessage>],
    options: &StreamOptions,
) -> Thinking {
    let base = clamp_max_tokens_to_context(
        model,
        transcript,
        options.max_tokens.unwrap_or(model.max_tokens),
    );
    let level = options.thinking;
    if level == ThinkingLevel::Off {
        return Thinking {
            enabled: false,
            effort: None,
            budget: None,
            max_tokens: base,
        };
    }
    if compat.force_adaptive_thinking {
        return Thinking {
            enabled: true,
            effort: Some(effort_for(model, level)),
            budget: None,
            max_tokens: base,
        };
    }
    let (adjusted, budget) = adjust_max_tokens_for_thinking(
        Some(base),
        model.max_tokens,
        level,
        &options.thinking_budgets,
    );
    let max_tokens = clamp_max_tokens_to_context(model, transcript, adjusted);
    Thinking {
        enabled: true,
        effort: None,
        budget: Some(budget.min(max_tokens.saturating_sub(1024))),
        max_tokens,
    }
}

/// The configured `anthropic-beta` header (model, then caller headers; the last one wins).
fn configured_betas(model: &Model, options: &StreamOptions) -> Option<String> {
    let mut configured = None;
    for (name, value) in model.headers.iter().flatten() {
        if name.eq_ignore_ascii_case("anthropic-beta")
            && let Some(value) = value.as_str()
        {
            configured = Some(value.to_owned());
        }
    }
    for (name, value) in &options.headers {
        if name.eq_ignore_ascii_case("anthropic-beta") {
            configured = Some(value.clone());
        }
    }
    configured
}

struct Features {
    oauth: bool,
    native_tool_changes: bool,
    thinking_enabled: bool,
    has_tools: bool,
}

/// The beta features of a request (`getBetaFeatures`), sent as `anthropic-beta`.
fn beta_features(
    model: &Model,
    compat: &AnthropicCompat,
    options: &StreamOptions,
    features: &Features,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |feature: &str| {
        if !out.iter().any(|existing| existing == feature) {
            out.push(feature.to_owned());
        }
    };
    if let Some(configured) = configured_betas(model, options) {
        for feature in configured
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty())
        {
            push(feature);
        }
        return out;
    }
    if features.oauth {
        push("claude-code-20250219");
        push("oauth-2025-04-20");
    }
    if features.has_tools && !compat.supports_eager_tool_input_streaming {
        push(FINE_GRAINED_TOOL_STREAMING_BETA);
    }
    if model.reasoning && features.thinking_enabled && !compat.force_adaptive_thinking {
        push(INTERLEAVED_THINKING_BETA);
    }
    if fallback_models(model).is_some() {
        push(SERVER_SIDE_FALLBACK_BETA);
    }
    if compat.supports_mid_convo_effort {
        push(MID_CONVERSATION_OUTPUT_CONFIG_BETA);
        push(THINKING_BINDING_CONTROLS_BETA);
    }
    if features.native_tool_changes {
        push(INLINE_TOOLS_BETA);
    }
    out
}

/// `compat.allowedFallbackModels` when it has entries.
fn fallback_models(model: &Model) -> Option<&Vec<Value>> {
    model
        .compat_value("allowedFallbackModels")
        .and_then(Value::as_array)
        .filter(|models| !models.is_empty())
}

/// Builds the HTTP request of one call (the reference's `createClient` + `buildParams`);
/// `Err` with the reference's text when a tool's constrained sampling cannot be had.
pub fn build_request(
    model: &Model,
    request: &Request,
    options: &StreamOptions,
) -> Result<WireRequest, String> {
    let compat = AnthropicCompat::resolve(model);
    let base_url = options.base_url.as_deref().unwrap_or(&model.base_url);
    let api_key = options.api_key.clone().filter(|key| !key.is_empty());
    let oauth = oauth_mode(model, api_key.as_deref());
    let cache_session = if options.cache_retention == CacheRetention::None {
        None
    } else {
        options.session_id.as_deref()
    };

    let normalized = normalize_context(request);
    let thinking = plan_thinking(model, &compat, &normalized, options);
    let transcript = resolve_transcript(normalized, compat.supports_mid_convo_system_messages);
    let (body, betas) = build_body(model, &transcript, options, &compat, oauth, &thinking)?;

    let mut headers: Vec<(String, String)> = Vec::new();
    let key = api_key.clone().unwrap_or_default();
    match model.provider.as_str() {
        "cloudflare-ai-gateway" => {
            headers.push(("cf-aig-authorization".into(), format!("Bearer {key}")));
        }
        "github-copilot" => headers.push(("Authorization".into(), format!("Bearer {key}"))),
        _ if oauth => headers.push(("Authorization".into(), format!("Bearer {key}"))),
        _ => {
            if api_key.is_some() {
                headers.push(("x-api-key".into(), key.clone()));
            }
        }
    }
    headers.push(("anthropic-version".into(), "2023-06-01".into()));
    headers.push(("content-type".into(), "application/json".into()));
    let mut configured: Vec<(String, String)> = Vec::new();
    if !oauth {
        configured.extend(identity_headers(model, &options.identity));
    }
    configured.push(("accept".into(), "application/json".into()));
    configured.push((
        "anthropic-dangerous-direct-browser-access".into(),
        "true".into(),
    ));
    if oauth {
        configured.push((
            "user-agent".into(),
            format!("claude-cli/{CLAUDE_CODE_VERSION}"),
        ));
        configured.push(("x-app".into(), "cli".into()));
    } else if model.provider != "github-copilot"
        && let Some(session) = cache_session
        && compat.send_session_affinity_headers
    {
        let name = if compat.session_affinity_open_router {
            "x-session-id"
        } else {
            "x-session-affinity"
        };
        configured.push((name.into(), session.to_owned()));
    }
    for (name, value) in model.headers.iter().flatten() {
        if let Some(value) = value.as_str() {
            configured.push((name.clone(), value.to_owned()));
        }
    }
    configured.extend(open_code_session_headers(
        model,
        options.session_id.as_deref(),
    ));
    configured.extend(options.headers.iter().cloned());
    for (name, value) in configured {
        set_header_ci(&mut headers, &name, &value);
    }
    // The SDK sends the request's `betas` as the `anthropic-beta` header.
    headers.retain(|(name, _)| !name.eq_ignore_ascii_case("anthropic-beta"));
    if !betas.is_empty() {
        headers.push(("anthropic-beta".into(), betas.join(",")));
    }

    Ok(WireRequest {
        // The SDK's beta endpoint.
        url: join_url(base_url, "v1/messages?beta=true"),
        headers,
        body,
    })
}

/// The effort the request asks for inside the conversation (`providerThinkingLevel`), for
/// models with mid-conversation effort.
pub fn provider_thinking_level(model: &Model, options: &StreamOptions) -> Option<String> {
    let compat = AnthropicCompat::resolve(model);
    let thinking_disabled =
        model.reasoning && options.thinking == ThinkingLevel::Off && !off_is_null(model);
    if !compat.supports_mid_convo_effort || thinking_disabled {
        return None;
    }
    Some(
        if compat.force_adaptive_thinking && options.thinking != ThinkingLevel::Off {
            effort_for(model, options.thinking)
        } else {
            "high".to_owned()
        },
    )
}

fn off_is_null(model: &Model) -> bool {
    matches!(
        model
            .thinking_level_map
            .as_ref()
            .and_then(|map| map.get("off")),
        Some(Value::Null)
    )
}

/// The request body (the reference's `buildParams`) and its beta features, in its key order.
fn build_body(
    model: &Model,
    transcript: &[Cow<'_, LlmMessage>],
    options: &StreamOptions,
    compat: &AnthropicCompat,
    oauth: bool,
    thinking: &Thinking,
) -> Result<(Value, Vec<String>), String> {
    let cache = cache_control(compat, options.cache_retention);
    let initial = get_initial_system_message(transcript);
    let initial_text = initial.map(get_system_message_text).unwrap_or_default();
    let transformed = transform_messages(transcript, model, &normalize_tool_call_id);
    let conversation: Vec<&LlmMessage> = transformed
        .iter()
        .skip(usize::from(initial.is_some()))
        .map(|message| &**message)
        .collect();
    let initial_tools: &[ToolDeclaration] = initial
        .and_then(|system| system.tools_added.as_deref())
        .unwrap_or(&[]);
    let native_tool_changes = compat.supports_mid_convo_system_messages
        && compat.supports_mid_convo_tool_changes
        && !initial_tools.is_empty();
    let thinking_disabled = model.reasoning && !thinking.enabled && !off_is_null(model);
    let effort_messages = compat.supports_mid_convo_effort && !thinking_disabled;
    let tool_cache = if compat.supports_cache_control_on_tools {
        cache.as_ref()
    } else {
        None
    };
    let convert_definitions = |tools: &[ToolDeclaration], cache: Option<&Value>| {
        convert_tools(tools, oauth, compat, cache)
    };
    let converted = convert_messages(
        &conversation,
        oauth,
        cache.as_ref(),
        compat.allow_empty_signature,
        effort_messages.then_some(model.provider.as_str()),
        native_tool_changes.then_some(&convert_definitions),
    )?;
    let active_effort = thinking.effort.clone().unwrap_or_else(|| "high".to_owned());
    let current_tools = get_current_tools(transcript);
    let betas = beta_features(
        model,
        compat,
        options,
        &Features {
            oauth,
            native_tool_changes,
            thinking_enabled: thinking.enabled,
            has_tools: !current_tools.is_empty(),
        },
    );

    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    let messages = if effort_messages {
        insert_thinking_level_messages(converted, &active_effort)
    } else {
        converted.messages
    };
    body.insert("messages".into(), Value::Array(messages));
    body.insert("max_tokens".into(), json!(thinking.max_tokens));
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
        if !initial_text.is_empty() {
            system.push(system_block(&initial_text));
        }
        body.insert("system".into(), Value::Array(system));
    } else if !initial_text.is_empty() {
        body.insert("system".into(), json!([system_block(&initial_text)]));
    }
    if native_tool_changes {
        let mut tools = convert_tools(initial_tools, oauth, compat, tool_cache)?;
        tools.push(json!({
            "name": "__pi_deferred_placeholder__",
            "description": "Reserved placeholder. Never available. Never call this.",
            "input_schema": {"type": "object", "properties": {}, "required": []},
            "defer_loading": true,
        }));
        body.insert("tools".into(), Value::Array(tools));
    } else if !current_tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(convert_tools(&current_tools, oauth, compat, tool_cache)?),
        );
    }
    if thinking_disabled {
        body.insert("thinking".into(), json!({"type": "disabled"}));
    } else if effort_messages {
        body.insert(
            "thinking".into(),
            json!({"type": "adaptive", "display": "summarized", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}),
        );
        body.insert("output_config".into(), json!({"effort": "low"}));
    } else if model.reasoning && thinking.enabled {
        if compat.force_adaptive_thinking {
            body.insert(
                "thinking".into(),
                json!({"type": "adaptive", "display": "summarized"}),
            );
            if let Some(effort) = &thinking.effort {
                body.insert("output_config".into(), json!({"effort": effort}));
            }
        } else {
            let budget = thinking.budget.filter(|budget| *budget > 0).unwrap_or(1024);
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget, "display": "summarized"}),
            );
        }
    }
    if let Some(fallbacks) = fallback_models(model) {
        let list: Vec<Value> = fallbacks
            .iter()
            .map(|fallback| json!({"model": fallback.get("model").cloned().unwrap_or(Value::Null)}))
            .collect();
        body.insert("fallbacks".into(), Value::Array(list));
    }
    Ok((Value::Object(body), betas))
}

/// Keywords Anthropic's strict tool use rejects (`isAnthropicStrictUnsupportedKeyword`).
fn anthropic_strict_unsupported(key: &str, value: &Value) -> bool {
    const UNSUPPORTED: &[&str] = &[
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "maxItems",
        "uniqueItems",
        "minContains",
        "maxContains",
        "minProperties",
        "maxProperties",
    ];
    const FORMATS: &[&str] = &[
        "date-time",
        "time",
        "date",
        "duration",
        "email",
        "hostname",
        "uri",
        "ipv4",
        "ipv6",
        "uuid",
    ];
    if UNSUPPORTED.contains(&key) {
        return true;
    }
    match key {
        "minItems" => !(value == &json!(0) || value == &json!(1)),
        "format" => !value
            .as_str()
            .is_some_and(|format| FORMATS.contains(&format)),
        _ => false,
    }
}

/// Tool definitions (`convertTools`): the Anthropic input schema (properties, required, and
/// `additionalProperties`/`$defs`/`definitions` when set), strict where supported.
fn convert_tools(
    tools: &[ToolDeclaration],
    oauth: bool,
    compat: &AnthropicCompat,
    cache: Option<&Value>,
) -> Result<Vec<Value>, String> {
    let last = tools.len().saturating_sub(1);
    tools
        .iter()
        .enumerate()
        .map(|(idx, tool)| {
            let strict = resolve_json_schema_strict_sampling(
                tool,
                compat.supports_strict_tools,
                Some(&anthropic_strict_unsupported),
            )?;
            let parameters = json_schema_tool_parameters(tool, strict);
            let field = |key: &str| parameters.get(key).filter(|value| !value.is_null());
            let mut legacy = Map::new();
            legacy.insert("type".into(), json!("object"));
            legacy.insert(
                "properties".into(),
                field("properties").cloned().unwrap_or_else(|| json!({})),
            );
            legacy.insert(
                "required".into(),
                field("required").cloned().unwrap_or_else(|| json!([])),
            );
            for key in ["additionalProperties", "$defs", "definitions"] {
                if let Some(value) = parameters.get(key) {
                    legacy.insert(key.into(), value.clone());
                }
            }
            let input_schema = if strict {
                let mut merged = parameters.as_object().cloned().unwrap_or_default();
                for (key, value) in legacy {
                    merged.insert(key, value);
                }
                merged
            } else {
                legacy
            };
            let mut out = Map::new();
            let name = if oauth {
                to_claude_code_name(&tool.name)
            } else {
                tool.name.clone()
            };
            out.insert("name".into(), json!(name));
            out.insert("description".into(), json!(tool.description));
            if compat.supports_eager_tool_input_streaming {
                out.insert("eager_input_streaming".into(), json!(true));
            }
            if strict {
                out.insert("strict".into(), json!(true));
            }
            out.insert("input_schema".into(), Value::Object(input_schema));
            if idx == last
                && let Some(cache) = cache
            {
                out.insert("cache_control".into(), cache.clone());
            }
            Ok(Value::Object(out))
        })
        .collect()
}

fn image_block(image: &crate::model::message::ImageContent) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": image.mime_type, "data": image.data}})
}

/// A tool result's content (`convertContentBlocks`): the texts joined when there are no
/// images, else blocks (with a text placeholder when only images).
fn content_blocks(content: &[ContentBlock]) -> Value {
    let has_images = content
        .iter()
        .any(|block| matches!(block, ContentBlock::Image(_)));
    if !has_images {
        let text = content
            .iter()
            .map(|block| block.as_text().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        return json!(text);
    }
    let mut blocks: Vec<Value> = content
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

/// Images replaced by one placeholder per run (the reference's `replaceImagesWithPlaceholder`).
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

/// An error result's images go after all tool results of the turn (Anthropic rejects images
/// in error results; `splitErrorToolResultImages`): the result's content, the caption and
/// images.
fn split_error_images(result: &ToolResultMessage) -> Option<(Vec<ContentBlock>, Vec<Value>)> {
    let (content, caption, images) = split_error_tool_result_images(result)?;
    let mut after = vec![json!({"type": "text", "text": caption})];
    after.extend(images.into_iter().map(image_block));
    Some((content, after))
}

/// `splitErrorToolResultImages`, for every protocol that needs it (Anthropic, Claude on
/// Bedrock): an error result's content with each run of images replaced by a note, the
/// caption naming the call, and the images; `None` when there is nothing to split.
pub(crate) fn split_error_tool_result_images(
    result: &ToolResultMessage,
) -> Option<(
    Vec<ContentBlock>,
    String,
    Vec<&crate::model::message::ImageContent>,
)> {
    if !result.is_error {
        return None;
    }
    let images: Vec<&crate::model::message::ImageContent> = result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Image(image) => Some(image),
            _ => None,
        })
        .collect();
    if images.is_empty() {
        return None;
    }
    let caption = format!(
        "Images from the error result of tool call {} ({}):",
        result.tool_call_id, result.tool_name
    );
    Some((
        replace_images(&result.content, ERROR_TOOL_IMAGE_PLACEHOLDER),
        caption,
        images,
    ))
}

/// The converted conversation and the effort each replayed assistant message was asked for.
struct Converted {
    messages: Vec<Value>,
    assistant_levels: Vec<(usize, String)>,
}

type DefinitionConverter<'a> =
    dyn Fn(&[ToolDeclaration], Option<&Value>) -> Result<Vec<Value>, String> + 'a;

/// Maps the conversation (after the leading system message) to Messages API messages (the
/// reference's `convertMessages`).
fn convert_messages(
    messages: &[&LlmMessage],
    oauth: bool,
    cache: Option<&Value>,
    allow_empty_signature: bool,
    managed_provider: Option<&str>,
    convert_definitions: Option<&DefinitionConverter<'_>>,
) -> Result<Converted, String> {
    let mut params: Vec<Value> = Vec::with_capacity(messages.len());
    let mut assistant_levels = Vec::new();
    let mut pending: Vec<Value> = Vec::new();
    let mut idx = 0;
    while idx < messages.len() {
        match messages[idx] {
            LlmMessage::System(system) => {
                let text = render_system_message_update(system);
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                if let Some(convert) = convert_definitions {
                    let added = system.tools_added.as_deref().unwrap_or(&[]);
                    for removed in system.tools_removed.iter().flatten() {
                        if added.iter().any(|tool| tool.name == removed.name) {
                            continue;
                        }
                        let name = if oauth {
                            to_claude_code_name(&removed.name)
                        } else {
                            removed.name.clone()
                        };
                        blocks.push(json!({"type": "tool_removal", "tool": {"type": "tool_reference", "name": name}}));
                    }
                    for definition in convert(added, None)? {
                        blocks.push(json!({"type": "tool_addition", "tool": {"type": "tool_definition", "definition": definition}}));
                    }
                }
                if !blocks.is_empty() {
                    pending.push(json!({"role": "system", "content": blocks}));
                }
            }
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
                            let signature = thinking
                                .thinking_signature
                                .as_deref()
                                .filter(|sig| !sig.trim().is_empty());
                            if thinking.thinking.trim().is_empty() && signature.is_none() {
                                continue;
                            }
                            match signature {
                                Some(signature) => blocks.push(
                                    json!({"type": "thinking", "thinking": thinking.thinking, "signature": signature}),
                                ),
                                None if allow_empty_signature => blocks.push(
                                    json!({"type": "thinking", "thinking": thinking.thinking, "signature": ""}),
                                ),
                                None => {
                                    blocks.push(json!({"type": "text", "text": thinking.thinking}))
                                }
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
                    params.append(&mut pending);
                    let index = params.len();
                    params.push(json!({"role": "assistant", "content": blocks}));
                    if let Some(provider) = managed_provider
                        && assistant.api == "anthropic-messages"
                        && assistant.provider == provider
                        && let Some(level) =
                            assistant
                                .provider_thinking_level
                                .as_deref()
                                .filter(|level| {
                                    matches!(*level, "low" | "medium" | "high" | "xhigh" | "max")
                                })
                    {
                        assistant_levels.push((index, level.to_owned()));
                    }
                }
            }
            LlmMessage::ToolResult(_) => {
                let mut results = Vec::new();
                let mut error_images = Vec::new();
                while let Some(LlmMessage::ToolResult(result)) = messages.get(idx) {
                    let content = match split_error_images(result) {
                        Some((content, after)) => {
                            error_images.extend(after);
                            content_blocks(&content)
                        }
                        None => content_blocks(&result.content),
                    };
                    results.push(json!({
                        "type": "tool_result",
                        "tool_use_id": result.tool_call_id,
                        "content": content,
                        "is_error": result.is_error,
                    }));
                    idx += 1;
                }
                results.extend(error_images);
                params.push(json!({"role": "user", "content": results}));
                continue;
            }
        }
        idx += 1;
    }
    params.append(&mut pending);
    if let Some(cache) = cache
        && let Some(last) = params.last_mut()
        && matches!(last["role"].as_str(), Some("user" | "system"))
    {
        match &mut last["content"] {
            Value::Array(blocks) => {
                if let Some(Value::Object(block)) = blocks.last_mut()
                    && matches!(
                        block.get("type").and_then(Value::as_str),
                        Some("text" | "image" | "tool_result" | "tool_addition" | "tool_removal")
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
    Ok(Converted {
        messages: params,
        assistant_levels,
    })
}

/// Effort markers: an empty system message with `output_config.effort` before each replayed
/// assistant message that recorded its level, and the active level last
/// (`insertThinkingLevelMessages`).
fn insert_thinking_level_messages(converted: Converted, active: &str) -> Vec<Value> {
    let mut out = Vec::with_capacity(converted.messages.len() + 1);
    for (index, message) in converted.messages.into_iter().enumerate() {
        if let Some((_, level)) = converted
            .assistant_levels
            .iter()
            .find(|(at, _)| *at == index)
        {
            out.push(json!({"role": "system", "content": [], "output_config": {"effort": level}}));
        }
        out.push(message);
    }
    out.push(json!({"role": "system", "content": [], "output_config": {"effort": active}}));
    out
}

// ---------------------------------------------------------------------------------------
// Decoding

#[derive(Deserialize)]
struct MessageStart {
    message: StartedMessage,
}

#[derive(Deserialize)]
struct StartedMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Value,
    #[serde(default)]
    input_transformations: Option<Value>,
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
    delta: Value,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    input_transformations: Option<Value>,
}

/// A usage count: JavaScript's `value || 0`.
fn count(usage: &Value, key: &str) -> u64 {
    usage
        .get(key)
        .and_then(Value::as_f64)
        .filter(|value| value.is_finite() && *value > 0.0)
        .map_or(0, |value| value as u64)
}

/// A usage count that is only applied when present (`!= null`).
fn present_count(usage: &Value, key: &str) -> Option<u64> {
    match usage.get(key) {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            value
                .as_f64()
                .filter(|value| value.is_finite() && *value > 0.0)
                .map_or(0, |value| value as u64),
        ),
    }
}

/// Maps a `stop_reason` (`mapStopReason`): the stop reason and the error text it carries.
fn map_stop_reason(
    reason: &str,
    details: Option<&Value>,
) -> Result<(StopReason, Option<String>), String> {
    match reason {
        "end_turn" | "pause_turn" | "stop_sequence" => Ok((StopReason::Stop, None)),
        "max_tokens" => Ok((StopReason::Length, None)),
        "tool_use" => Ok((StopReason::ToolUse, None)),
        "refusal" => Ok((
            StopReason::Error,
            Some(
                details
                    .and_then(|details| details.get("explanation"))
                    .and_then(Value::as_str)
                    .filter(|text| !text.is_empty())
                    .unwrap_or("The model refused to complete the request")
                    .to_owned(),
            ),
        )),
        "sensitive" => Ok((
            StopReason::Error,
            Some("Provider stopped with: sensitive".to_owned()),
        )),
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
    model_id: String,
    open_router: bool,
    /// The prices usage is computed with (a fallback model's when one answered).
    cost: ModelCost,
    fallback_costs: Vec<(String, ModelCost)>,
    blocks: Vec<BlockState>,
    /// Local tool names, to map Claude Code casing back (OAuth mode).
    tool_names: Option<Vec<String>>,
    saw_start: bool,
    saw_stop_reason: bool,
    input_transformations: Option<Vec<Value>>,
}

impl AnthropicDecoder {
    /// Starts decoding into `message`; `oauth_tools` are the request's current tool names when
    /// the call runs in OAuth mode (tool names are then mapped back to the local casing).
    pub fn new(message: AssistantMessage, model: &Model, oauth_tools: Option<Vec<String>>) -> Self {
        let fallback_costs = fallback_models(model)
            .into_iter()
            .flatten()
            .filter(|fallback| fallback["provider"] == model.provider.as_str())
            .filter_map(|fallback| {
                Some((
                    fallback["model"].as_str()?.to_owned(),
                    serde_json::from_value::<ModelCost>(fallback.get("cost")?.clone()).ok()?,
                ))
            })
            .collect();
        Self {
            message,
            model_id: model.id.clone(),
            open_router: is_open_router(model),
            cost: model.cost.clone(),
            fallback_costs,
            blocks: Vec::new(),
            tool_names: oauth_tools,
            saw_start: false,
            saw_stop_reason: false,
            input_transformations: None,
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
                    call.arguments = match parse_streaming_json(&state.partial_json) {
                        object @ Value::Object(_) => object,
                        _ => Value::Object(Map::new()),
                    };
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
    /// `event: error`, unreadable data, an unknown stop reason or a mid-output fallback.
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
            let raw = std::iter::once(format!("event: {event}"))
                .chain(data.split('\n').map(|line| format!("data: {line}")))
                .collect::<Vec<_>>()
                .join("\\n");
            format!("Could not parse Anthropic SSE event {event}: {err}; data={data}; raw={raw}")
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
                        self.on_delta(parsed, out);
                        return Ok(false);
                    }
                };
                self.on_delta(parsed, out);
                Ok(false)
            }
            "message_stop" => Ok(true),
            _ => {
                let value = parse_json_with_repair(data).map_err(|err| fail(&err))?;
                match event {
                    "message_start" => {
                        let start: MessageStart =
                            serde_json::from_value(value).map_err(|err| fail(&err))?;
                        self.on_start(start);
                    }
                    "content_block_start" => {
                        let start: BlockStart =
                            serde_json::from_value(value).map_err(|err| fail(&err))?;
                        self.on_block_start(start, out)?;
                    }
                    "content_block_stop" => {
                        let stop: BlockStop =
                            serde_json::from_value(value).map_err(|err| fail(&err))?;
                        self.on_block_stop(&stop.index, out);
                    }
                    "message_delta" => {
                        let delta: MessageDelta =
                            serde_json::from_value(value).map_err(|err| fail(&err))?;
                        self.on_message_delta(delta)?;
                    }
                    _ => {}
                }
                Ok(false)
            }
        }
    }

    fn on_start(&mut self, start: MessageStart) {
        self.saw_start = true;
        let message = &mut self.message;
        message.key_order.touch(AssistantKey::ResponseId);
        message.response_id = start.message.id;
        if let Some(Value::Array(transformations)) = start.message.input_transformations {
            self.input_transformations = Some(transformations);
        }
        let response_model = start.message.model;
        if response_model.as_deref() != Some(self.model_id.as_str()) {
            message.key_order.touch(AssistantKey::ResponseModel);
            message.response_model = response_model.clone();
            if let Some(answered) = &response_model
                && let Some((_, cost)) = self
                    .fallback_costs
                    .iter()
                    .find(|(model, _)| model == answered)
            {
                self.cost = cost.clone();
            }
        }
        let usage = &start.message.usage;
        let out = &mut self.message.usage;
        out.input = count(usage, "input_tokens");
        out.output = count(usage, "output_tokens");
        out.cache_read = count(usage, "cache_read_input_tokens");
        out.cache_write = count(usage, "cache_creation_input_tokens");
        out.cache_write_1h = Some(
            usage
                .get("cache_creation")
                .map_or(0, |creation| count(creation, "ephemeral_1h_input_tokens")),
        );
        out.key_order = UsageKeyOrder::ReasoningAfterCost;
        self.recompute_usage();
    }

    fn on_message_delta(&mut self, delta: MessageDelta) -> Result<(), String> {
        if let Some(Value::Array(transformations)) = delta.input_transformations {
            self.input_transformations = Some(transformations);
        }
        if let Some(reason) = delta
            .delta
            .get("stop_reason")
            .and_then(Value::as_str)
            .filter(|reason| !reason.is_empty())
        {
            self.message.key_order.touch(AssistantKey::RawStopReason);
            self.message.raw_stop_reason = Some(reason.to_owned());
            let (stop, error) = map_stop_reason(reason, delta.delta.get("stop_details"))?;
            self.message.stop_reason = stop;
            self.saw_stop_reason = true;
            if error.is_some() {
                self.message.key_order.touch(AssistantKey::ErrorMessage);
                self.message.error_message = error;
            }
        }
        if let Some(usage) = delta.usage.as_ref().filter(|usage| !usage.is_null()) {
            let out = &mut self.message.usage;
            if let Some(input) = present_count(usage, "input_tokens") {
                out.input = input;
            }
            if let Some(output) = present_count(usage, "output_tokens") {
                out.output = output;
            }
            if let Some(read) = present_count(usage, "cache_read_input_tokens") {
                out.cache_read = read;
            }
            if let Some(write) = present_count(usage, "cache_creation_input_tokens") {
                out.cache_write = write;
            }
            if let Some(long) = usage
                .get("cache_creation")
                .and_then(|creation| present_count(creation, "ephemeral_1h_input_tokens"))
            {
                out.cache_write_1h = Some(long);
            }
            if let Some(thinking) = usage
                .get("output_tokens_details")
                .and_then(|details| present_count(details, "thinking_tokens"))
            {
                if out.cache_write_1h.is_none() {
                    // Created after `cost` (no `message_start` came).
                    out.key_order = UsageKeyOrder::ReasoningAfterCost;
                }
                out.reasoning = Some(thinking);
            }
        }
        self.recompute_usage();
        if self.open_router
            && let Some(usage) = delta.usage.as_ref().filter(|usage| !usage.is_null())
        {
            apply_open_router_reported_cost(&mut self.message.usage, usage);
        }
        Ok(())
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

    fn on_block_start(
        &mut self,
        start: BlockStart,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<(), String> {
        let block = &start.content_block;
        let text_of = |key: &str| block[key].as_str().unwrap_or("").to_owned();
        match block["type"].as_str() {
            Some("fallback") if !self.message.content.is_empty() => {
                return Err(
                    "Anthropic performed an unsupported mid-output model fallback".to_owned(),
                );
            }
            Some("text") => {
                let content_index = self.push_block(
                    ContentBlock::Text(TextContent {
                        text: text_of("text"),
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
                        thinking: text_of("thinking"),
                        thinking_signature: Some(text_of("signature")),
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
        Ok(())
    }

    fn on_delta(&mut self, delta: BlockDelta<'_>, out: &mut VecDeque<StreamEvent>) {
        let Some(index) = self.find_block(&delta.index) else {
            return;
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
                let (arguments, error) = parse_tool_call_arguments(&state.partial_json);
                call.arguments = arguments;
                call.arguments_error = error;
                state.dirty = false;
                out.push_back(StreamEvent::ToolCallEnd {
                    content_index: position,
                    tool_call: call.clone(),
                });
            }
            _ => {}
        }
    }

    /// The stream ended normally (`message_stop`); `Err` when there was no stop reason or it
    /// was an error (refusal, sensitive). `now_ms` stamps the diagnostics.
    pub fn complete(&mut self, now_ms: i64) -> Result<StopReason, String> {
        self.refresh();
        if !self.saw_stop_reason {
            return Err("Anthropic stream ended without a stop reason".to_owned());
        }
        match self.message.stop_reason {
            StopReason::Error | StopReason::Aborted | StopReason::Pending | StopReason::Unknown => {
                return Err(self
                    .message
                    .error_message
                    .clone()
                    .filter(|text| !text.is_empty())
                    .unwrap_or_else(|| "An unknown error occurred".to_owned()));
            }
            _ => {}
        }
        if let Some(transformations) = self.input_transformations.take().filter(|t| !t.is_empty()) {
            let listed: Vec<Value> = transformations
                .iter()
                .map(|transformation| {
                    let mut entry = Map::new();
                    for key in ["type", "path", "reason"] {
                        if let Some(value) = transformation.get(key).filter(|v| !v.is_null()) {
                            entry.insert(key.into(), value.clone());
                        }
                    }
                    Value::Object(entry)
                })
                .collect();
            let diagnostic = json!({
                "type": "anthropic_input_transformations",
                "timestamp": now_ms,
                "details": {"transformations": listed},
            });
            self.message.key_order.touch(AssistantKey::Diagnostics);
            match &mut self.message.diagnostics {
                Some(Value::Array(list)) => list.push(diagnostic),
                other => *other = Some(Value::Array(vec![diagnostic])),
            }
        }
        Ok(self.message.stop_reason)
    }

    /// The body ended without `message_stop`.
    pub fn on_eof(&mut self, now_ms: i64) -> Result<StopReason, String> {
        if self.saw_start {
            Err("Anthropic stream ended before message_stop".to_owned())
        } else {
            self.complete(now_ms)
        }
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
            ..Default::default()
        });
        options.thinking = level;
        options
    }

    fn body(model: &Model, level: ThinkingLevel) -> Value {
        build_request(model, &Request::default(), &options(level))
            .unwrap()
            .body
    }

    #[test]
    fn thinking_budgets_follow_the_reference() {
        let sonnet = body(&model("claude-sonnet-4-5"), ThinkingLevel::Medium);
        // maxTokens 64000 fitted to the window (200000 − 4096), plus the budget, capped at 64000.
        assert_eq!(sonnet["max_tokens"], 64000);
        assert_eq!(
            sonnet["thinking"],
            json!({"type":"enabled","budget_tokens":8192,"display":"summarized"})
        );
        let opus = body(&model("claude-opus-4-7"), ThinkingLevel::Xhigh);
        assert_eq!(opus["output_config"], json!({"effort":"xhigh"}));
        assert_eq!(
            opus["thinking"],
            json!({"type":"adaptive","display":"summarized"})
        );
        let mut custom = model("claude-sonnet-4-5");
        custom.max_tokens = 16384;
        let custom_body = body(&custom, ThinkingLevel::High);
        assert_eq!(
            (
                custom_body["max_tokens"].clone(),
                custom_body["thinking"]["budget_tokens"].clone()
            ),
            (json!(16384), json!(15360))
        );
        let off = body(&model("claude-sonnet-4-5"), ThinkingLevel::Off);
        assert_eq!(off["thinking"], json!({"type":"disabled"}));
        let mut budgets = options(ThinkingLevel::Low);
        budgets.thinking_budgets = ThinkingBudgets {
            low: 3000,
            ..ThinkingBudgets::default()
        };
        let low = build_request(&model("claude-sonnet-4-5"), &Request::default(), &budgets)
            .unwrap()
            .body;
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
        let wire = build_request(&model("claude-sonnet-4-5"), &request, &opts).unwrap();
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
            Some("claude-code-20250219,oauth-2025-04-20")
        );
        assert_eq!(header("user-agent").as_deref(), Some("claude-cli/2.1.322"));
        assert_eq!(wire.body["system"][0]["text"], CLAUDE_CODE_IDENTITY);
        assert_eq!(wire.body["system"][1]["text"], "Be brief.");
        assert_eq!(wire.body["tools"][0]["name"], "Read");
        assert_eq!(wire.url, "https://api.anthropic.com/v1/messages?beta=true");
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
                r#"{"type":"message_start","message":{"id":"msg_1","model":"claude-sonnet-4-5","usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":5}}}"#,
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
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30,"output_tokens_details":{"thinking_tokens":12}}}"#,
            ),
        ];
        for (event, data) in frames {
            assert_eq!(decoder.on_frame(event, data, &mut out), Ok(false));
        }
        assert_eq!(
            decoder.on_frame("message_stop", r#"{"type":"message_stop"}"#, &mut out),
            Ok(true)
        );
        assert_eq!(decoder.complete(0), Ok(StopReason::ToolUse));
        let message = decoder.into_message();
        assert_eq!(message.response_id.as_deref(), Some("msg_1"));
        assert_eq!(message.response_model, None);
        assert_eq!(message.raw_stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(
            (
                message.usage.input,
                message.usage.output,
                message.usage.cache_read,
                message.usage.reasoning,
                message.usage.cache_write_1h,
            ),
            (10, 30, 5, Some(12), Some(0))
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
            decoder.on_eof(0),
            Err("Anthropic stream ended without a stop reason".to_owned())
        );
    }
}
