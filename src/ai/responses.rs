//! The `openai-responses` and `azure-openai-responses` wire protocols: `POST
//! <baseUrl>/responses` with `stream: true` (Azure: `?api-version=…` and an `api-key`
//! header), exactly as 1.6.0's `api/openai-responses.js`, `api/azure-openai-responses.js` and
//! `api/openai-responses-shared.js` shape and read it.
//!
//! Two pure halves:
//! - [`build_request`]: model + request + options → URL, headers and the JSON body, in the
//!   reference's key order. The conversation becomes `input` items: instruction messages
//!   (`developer` for reasoning models), `input_text`/`input_image` user content, the
//!   assistant's earlier output replayed as items — reasoning items from the thinking block's
//!   signature (the item JSON with its `encrypted_content`, as `store: false` needs), messages
//!   with their ids (`textSignature` `{"v":1,"id":…,"phase":…}`), `function_call`s with
//!   `call_id` and item id (tool-call ids are `call_id|item_id`) — and `function_call_output`s.
//!   Models with `supportsAdditionalTools` declare tools in `additional_tools` items, those
//!   with `supportsToolSearch` as client tool-search results, and `supportsMidConvoEffort`
//!   models get `configuration_update` items.
//! - [`ResponsesDecoder`]: the SSE events (`response.output_item.added` / `.done`,
//!   `response.output_text.delta`, `response.reasoning_summary_text.delta`,
//!   `response.function_call_arguments.delta`, `response.completed` / `.incomplete` /
//!   `.failed`, `error`) → [`StreamEvent`]s and the assistant message. Output items are kept
//!   apart by `output_index`, so parallel tool calls may interleave. Usage (cached tokens
//!   subtracted from input, reasoning tokens, cost with tiers and the service tier's
//!   multiplier) and the stop reason come from the terminal response.
//!
//! A stream looks like:
//!
//! ```text
//! event: response.output_item.added
//! data: {"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message",…}}
//! event: response.output_text.delta
//! data: {"type":"response.output_text.delta","output_index":0,"delta":"Hi"}
//! event: response.output_item.done
//! data: {"type":"response.output_item.done","output_index":0,"item":{…,"content":[{"type":"output_text","text":"Hi"}]}}
//! event: response.completed
//! data: {"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{…}}}
//! ```
//!
//! Not carried over from the reference: OpenAI grammar tools (`custom` tools and
//! `custom_tool_call` items; such tools are sent as function tools), GitHub Copilot's dynamic
//! headers, `temperature`/`tool_choice`/`service_tier` requests (the agent never sets them).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::ai::convert::{LlmMessage, transform_messages};
use crate::ai::models::{Model, ModelCost, ThinkingLevel, calculate_cost, clamp_thinking_level};
use crate::ai::partial_json::{parse_streaming_json, parse_tool_call_arguments};
use crate::ai::request::{
    assign, clamp_max_tokens_to_context, identity_headers, json_schema_tool_parameters,
    resolve_json_schema_strict_sampling, sampling_params, short_hash,
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

/// Which of the Responses transports a call uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// `openai-responses`: OpenAI and OpenAI-compatible Responses servers.
    OpenAi,
    /// `azure-openai-responses`: Azure OpenAI (deployments, `api-version`, `api-key`).
    Azure,
    /// `openai-codex-responses`: the ChatGPT Codex backend ([`crate::ai::codex`] builds its
    /// requests and reads its events; the conversion and decoding here are shared).
    Codex,
}

impl Flavor {
    /// The protocol of a model API name, if it is one of these.
    pub fn of_api(api: &str) -> Option<Self> {
        match api {
            "openai-responses" => Some(Self::OpenAi),
            "azure-openai-responses" => Some(Self::Azure),
            _ => None,
        }
    }

    /// Providers whose `call|item` tool-call ids this transport replays with their item ids.
    fn tool_call_providers(self) -> &'static [&'static str] {
        match self {
            Self::OpenAi | Self::Codex => &["openai", "openai-codex", "opencode"],
            Self::Azure => &["openai", "openai-codex", "opencode", "azure"],
        }
    }

    /// How a failed HTTP response is prefixed (`formatProviderError`'s prefix).
    pub fn error_prefix(self, provider: &str) -> String {
        match self {
            Self::Azure => "Azure OpenAI API error".to_owned(),
            Self::Codex => "Codex API error".to_owned(),
            Self::OpenAi if provider == "openai" => "OpenAI API error".to_owned(),
            Self::OpenAi => format!("{provider} API error"),
        }
    }

    fn ended_without_stop_reason(self) -> &'static str {
        match self {
            Self::OpenAi => "OpenAI Responses stream ended without a stop reason",
            Self::Azure => "Azure OpenAI Responses stream ended without a stop reason",
            Self::Codex => "Codex stream ended without a stop reason",
        }
    }
}

/// The compat flags this protocol reads (`getCompat`), defaults applied.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponsesCompat {
    /// `supportsDeveloperRole` (default true).
    pub supports_developer_role: bool,
    /// `supportsMidConvoSystemMessages` (default false).
    pub supports_mid_convo_system_messages: bool,
    /// `sessionAffinityFormat`: `openrouter` for OpenRouter, else `openai`.
    pub session_affinity_format: String,
    /// `promptCacheKeyMode` (default `auto`).
    pub prompt_cache_key_mode: String,
    /// `supportsLongCacheRetention` (default true).
    pub supports_long_cache_retention: bool,
    /// `supportsStrictMode` (OpenAI default false, Azure and Codex true).
    pub supports_strict_mode: bool,
    /// `supportsAdditionalTools` (default false).
    pub supports_additional_tools: bool,
    /// `supportsToolSearch` (default false).
    pub supports_tool_search: bool,
    /// `supportsExplicitPromptCacheMode` (default false).
    pub supports_explicit_prompt_cache_mode: bool,
    /// `supportsMaxOutputTokens` (default true).
    pub supports_max_output_tokens: bool,
    /// `supportsMidConvoEffort` (default false).
    pub supports_mid_convo_effort: bool,
}

impl ResponsesCompat {
    /// Reads the model's compat with the transport's defaults.
    pub fn resolve(model: &Model, flavor: Flavor) -> Self {
        let flag = |key: &str, default: bool| model.compat_bool(key).unwrap_or(default);
        let open_router =
            model.provider == "openrouter" || model.base_url.contains("openrouter.ai");
        Self {
            supports_developer_role: flag("supportsDeveloperRole", true),
            supports_mid_convo_system_messages: flag("supportsMidConvoSystemMessages", false),
            session_affinity_format: model
                .compat_str("sessionAffinityFormat")
                .map(str::to_owned)
                .unwrap_or_else(|| if open_router { "openrouter" } else { "openai" }.to_owned()),
            prompt_cache_key_mode: model
                .compat_str("promptCacheKeyMode")
                .unwrap_or("auto")
                .to_owned(),
            supports_long_cache_retention: flag("supportsLongCacheRetention", true),
            supports_strict_mode: flag("supportsStrictMode", flavor != Flavor::OpenAi),
            supports_additional_tools: flag("supportsAdditionalTools", false),
            supports_tool_search: flag("supportsToolSearch", false),
            supports_explicit_prompt_cache_mode: flag("supportsExplicitPromptCacheMode", false),
            supports_max_output_tokens: flag("supportsMaxOutputTokens", true),
            supports_mid_convo_effort: flag("supportsMidConvoEffort", false),
        }
    }

    /// `getResponsesToolSupport`.
    pub fn tool_support(&self) -> ToolChangeSupport {
        if self.supports_mid_convo_system_messages && self.supports_additional_tools {
            ToolChangeSupport::Changes
        } else if self.supports_tool_search {
            ToolChangeSupport::Additions
        } else {
            ToolChangeSupport::None
        }
    }
}

/// Whether the caller's headers carry authentication instead of a key.
pub fn has_header_auth(flavor: Flavor, headers: &[(String, String)]) -> bool {
    flavor == Flavor::OpenAi && crate::ai::openai::has_header_auth(headers)
}

/// A key sent straight to OpenAI that is not an API key is a ChatGPT sign-in token
/// (`isChatGPTSignIn`), which rejects some request fields.
fn is_chatgpt_sign_in(model: &Model, api_key: Option<&str>) -> bool {
    model.provider == "openai"
        && model.base_url == "https://api.openai.com/v1"
        && api_key.is_some_and(|key| !key.starts_with("sk-"))
}

/// The clamped, non-`off` reasoning level of the call (`streamSimple`'s `reasoningEffort`).
fn reasoning_effort(model: &Model, options: &StreamOptions) -> Option<ThinkingLevel> {
    match options.thinking {
        ThinkingLevel::Off => None,
        requested => {
            Some(clamp_thinking_level(model, requested)).filter(|l| *l != ThinkingLevel::Off)
        }
    }
}

/// `thinkingLevelMap[level] ?? level`.
fn mapped_effort(model: &Model, level: ThinkingLevel) -> Value {
    match model
        .thinking_level_map
        .as_ref()
        .and_then(|map| map.get(level.as_str()))
    {
        None | Some(Value::Null) => Value::String(level.as_str().to_owned()),
        Some(value) => value.clone(),
    }
}

/// The effort sent in `configuration_update` items (`getConfigurationUpdateEffort`), also the
/// message's `providerThinkingLevel`.
pub fn configuration_update_effort(
    model: &Model,
    options: &StreamOptions,
    flavor: Flavor,
) -> Option<Value> {
    if flavor != Flavor::OpenAi {
        return None;
    }
    let compat = ResponsesCompat::resolve(model, flavor);
    let effort = reasoning_effort(model, options)?;
    if !compat.supports_mid_convo_effort || is_chatgpt_sign_in(model, options.api_key.as_deref()) {
        return None;
    }
    Some(mapped_effort(model, effort))
}

/// The deployment an Azure call names (`resolveDeploymentName`):
/// `AZURE_OPENAI_DEPLOYMENT_NAME_MAP` (`id=deployment,…`), else the model id.
fn azure_deployment(model: &Model, options: &StreamOptions) -> String {
    let map = options.provider_env("AZURE_OPENAI_DEPLOYMENT_NAME_MAP");
    for entry in map.unwrap_or("").split(',') {
        let entry = entry.trim();
        let mut parts = entry.splitn(2, '=');
        if let (Some(id), Some(deployment)) = (parts.next(), parts.next())
            && !id.is_empty()
            && !deployment.is_empty()
            && id.trim() == model.id
        {
            return deployment.trim().to_owned();
        }
    }
    model.id.clone()
}

/// Azure's base URL (`normalizeAzureBaseUrl`): an Azure host without a path gets
/// `/openai/v1`; trailing slashes go.
pub fn normalize_azure_base_url(base_url: &str) -> Result<String, String> {
    let trimmed = base_url.trim().trim_end_matches('/');
    let mut url = reqwest::Url::parse(trimmed)
        .map_err(|_| format!("Invalid Azure OpenAI base URL: {base_url}"))?;
    let host = url.host_str().unwrap_or("");
    let azure_host = host.ends_with(".openai.azure.com")
        || host.ends_with(".cognitiveservices.azure.com")
        || host.ends_with(".ai.azure.com");
    let path = url.path().trim_end_matches('/').to_owned();
    if azure_host && matches!(path.as_str(), "" | "/" | "/openai" | "/openai/v1/responses") {
        url.set_path("/openai/v1");
        url.set_query(None);
    }
    Ok(url.to_string().trim_end_matches('/').to_owned())
}

/// The Azure base URL of a call (`resolveAzureBaseUrl`): `AZURE_OPENAI_BASE_URL`, else the
/// resource `AZURE_OPENAI_RESOURCE_NAME`, else the model's.
fn azure_base_url(base_url: &str, options: &StreamOptions) -> Result<String, String> {
    let configured = options
        .provider_env("AZURE_OPENAI_BASE_URL")
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(str::to_owned)
        .or_else(|| {
            options
                .provider_env("AZURE_OPENAI_RESOURCE_NAME")
                .filter(|name| !name.is_empty())
                .map(|name| format!("https://{name}.openai.azure.com/openai/v1"))
        })
        .or_else(|| (!base_url.is_empty()).then(|| base_url.to_owned()));
    match configured {
        Some(url) => normalize_azure_base_url(&url),
        None => Err("Azure OpenAI base URL is required. Set AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME, or pass azureBaseUrl, azureResourceName, or model.baseUrl.".to_owned()),
    }
}

/// Builds the HTTP request of one call (the reference's `createClient` + `buildParams`);
/// `Err` with the reference's text when it cannot be built.
pub fn build_request(
    model: &Model,
    request: &Request,
    options: &StreamOptions,
    flavor: Flavor,
) -> Result<WireRequest, String> {
    if flavor == Flavor::Codex {
        return crate::ai::codex::build_request(model, request, options);
    }
    let compat = ResponsesCompat::resolve(model, flavor);
    let base_url = options.base_url.as_deref().unwrap_or(&model.base_url);
    let api_key = options
        .api_key
        .as_deref()
        .filter(|key| !key.is_empty())
        .unwrap_or("unused");
    let mut headers: Vec<(String, String)> = Vec::new();
    let url = match flavor {
        Flavor::OpenAi | Flavor::Codex => {
            headers.push(("Authorization".to_owned(), format!("Bearer {api_key}")));
            join_url(base_url, "responses")
        }
        Flavor::Azure => {
            headers.push(("api-key".to_owned(), api_key.to_owned()));
            let version = options
                .provider_env("AZURE_OPENAI_API_VERSION")
                .filter(|version| !version.is_empty())
                .unwrap_or("v1");
            format!(
                "{}?api-version={}",
                join_url(&azure_base_url(base_url, options)?, "responses"),
                version
            )
        }
    };
    headers.push(("Content-Type".to_owned(), "application/json".to_owned()));
    headers.push(("Accept".to_owned(), "application/json".to_owned()));
    let mut configured = identity_headers(model, &options.identity);
    for (name, value) in model.headers.iter().flatten() {
        if let Some(value) = value.as_str() {
            configured.push((name.clone(), value.to_owned()));
        }
    }
    let cache_session = match options.cache_retention {
        CacheRetention::None => None,
        _ => options.session_id.as_deref(),
    };
    if flavor == Flavor::OpenAi
        && let Some(session) = cache_session
    {
        if compat.session_affinity_format == "openrouter" {
            configured.push(("x-session-id".to_owned(), session.to_owned()));
        } else {
            if compat.session_affinity_format == "openai" {
                configured.push(("session-id".to_owned(), session.to_owned()));
            }
            configured.push(("x-client-request-id".to_owned(), session.to_owned()));
        }
    }
    configured.extend(options.headers.iter().cloned());
    for (name, value) in configured {
        set_header_ci(&mut headers, &name, &value);
    }
    let normalized = normalize_context(request);
    let body = build_body(model, &normalized, options, &compat, flavor)?;
    Ok(WireRequest { url, headers, body })
}

/// `clampOpenAIPromptCacheKey`: at most 64 code points.
pub fn prompt_cache_key(session: &str) -> String {
    session.chars().take(64).collect()
}

/// The request body (the reference's `buildParams`), in its key order.
pub fn build_body(
    model: &Model,
    transcript: &[Cow<'_, LlmMessage>],
    options: &StreamOptions,
    compat: &ResponsesCompat,
    flavor: Flavor,
) -> Result<Value, String> {
    let retention = options.cache_retention;
    let effort = reasoning_effort(model, options);
    let update_effort = configuration_update_effort(model, options, flavor);
    let max_tokens = clamp_max_tokens_to_context(
        model,
        transcript,
        options.max_tokens.unwrap_or(model.max_tokens),
    );
    let resolved = resolve_transcript(
        transcript.to_vec(),
        compat.supports_mid_convo_system_messages,
    );
    let tool_support = compat.tool_support();
    let transcript_tools = resolve_transcript_tools(&resolved, tool_support);
    let input = convert_messages(model, &resolved, flavor, compat, update_effort.as_ref())?;
    let omit = flavor == Flavor::OpenAi && is_chatgpt_sign_in(model, options.api_key.as_deref());

    let mut body = Map::new();
    let model_name = match flavor {
        Flavor::OpenAi | Flavor::Codex => model.id.clone(),
        Flavor::Azure => azure_deployment(model, options),
    };
    body.insert("model".into(), Value::String(model_name));
    body.insert("input".into(), Value::Array(input));
    body.insert("stream".into(), Value::Bool(true));
    let session = options.session_id.as_deref();
    match flavor {
        Flavor::OpenAi | Flavor::Codex => {
            if retention != CacheRetention::None
                && compat.prompt_cache_key_mode != "disabled"
                && let Some(session) = session
            {
                body.insert("prompt_cache_key".into(), json!(prompt_cache_key(session)));
            }
            if !omit {
                if retention == CacheRetention::Long
                    && compat.supports_long_cache_retention
                    && !compat.supports_explicit_prompt_cache_mode
                {
                    body.insert("prompt_cache_retention".into(), json!("24h"));
                }
                if compat.supports_explicit_prompt_cache_mode {
                    if retention == CacheRetention::None {
                        body.insert("prompt_cache_options".into(), json!({"mode": "explicit"}));
                    } else if retention == CacheRetention::Long
                        && compat.supports_long_cache_retention
                    {
                        body.insert("prompt_cache_options".into(), json!({"ttl": "30m"}));
                    }
                }
            }
        }
        Flavor::Azure => {
            if compat.prompt_cache_key_mode != "disabled"
                && let Some(session) = session
            {
                body.insert("prompt_cache_key".into(), json!(prompt_cache_key(session)));
            }
        }
    }
    body.insert("store".into(), Value::Bool(false));
    let send_max = match flavor {
        Flavor::OpenAi | Flavor::Codex => compat.supports_max_output_tokens && !omit,
        Flavor::Azure => true,
    };
    if max_tokens > 0 && send_max {
        body.insert("max_output_tokens".into(), json!(max_tokens.max(16)));
    }
    if !transcript_tools.request_tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(convert_tools(
                &transcript_tools.request_tools,
                flavor,
                compat,
                false,
            )?),
        );
    }
    if model.reasoning {
        let off = model
            .thinking_level_map
            .as_ref()
            .and_then(|map| map.get("off"));
        if let Some(level) = effort {
            let requested = mapped_effort(model, level);
            let sent = if update_effort.is_some() {
                json!("medium")
            } else {
                requested
            };
            body.insert(
                "reasoning".into(),
                json!({"effort": sent, "summary": "auto"}),
            );
            body.insert("include".into(), json!(["reasoning.encrypted_content"]));
        } else if (flavor == Flavor::Azure || model.provider != "github-copilot")
            && !matches!(off, Some(Value::Null))
        {
            let effort = off.cloned().unwrap_or_else(|| json!("none"));
            body.insert("reasoning".into(), json!({"effort": effort}));
        }
        if flavor == Flavor::OpenAi && model.provider == "xai" {
            body.insert("include".into(), json!(["reasoning.encrypted_content"]));
        }
    }
    if let Some(params) = sampling_params(model, effort.unwrap_or(ThinkingLevel::Off)) {
        assign(&mut body, params);
    }
    Ok(Value::Object(body))
}

/// Tool definitions (`convertResponsesTools`): function tools, `strict` where supported
/// (Codex sends `null` for tools that do not ask for strict sampling, the others `false`),
/// `defer_loading` for tool-search results.
pub fn convert_tools(
    tools: &[ToolDeclaration],
    flavor: Flavor,
    compat: &ResponsesCompat,
    tool_search_result: bool,
) -> Result<Vec<Value>, String> {
    let supports_strict_mode = compat.supports_strict_mode;
    tools
        .iter()
        .map(|tool| {
            let strict = resolve_json_schema_strict_sampling(tool, supports_strict_mode, None)?;
            let mut function = Map::new();
            function.insert("type".into(), json!("function"));
            function.insert("name".into(), json!(tool.name));
            function.insert("description".into(), json!(tool.description));
            function.insert(
                "parameters".into(),
                json_schema_tool_parameters(tool, strict),
            );
            if tool_search_result {
                function.insert("defer_loading".into(), Value::Bool(true));
            }
            if supports_strict_mode {
                let strict = match (strict, flavor) {
                    (false, Flavor::Codex) => Value::Null,
                    (strict, _) => Value::Bool(strict),
                };
                function.insert("strict".into(), strict);
            }
            Ok(Value::Object(function))
        })
        .collect()
}

/// `normalizeIdPart`: characters other than `[A-Za-z0-9_-]` become `_` (one per UTF-16 unit),
/// at most 64 units, trailing `_` removed.
fn normalize_id_part(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for c in part.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else {
            for _ in 0..c.len_utf16() {
                out.push('_');
            }
        }
    }
    out.truncate(64);
    out.trim_end_matches('_').to_owned()
}

/// `id.split("|")` destructured as `[first, second]`.
fn split_pipe(id: &str) -> (&str, Option<&str>) {
    let mut parts = id.split('|');
    let first = parts.next().unwrap_or("");
    (first, parts.next())
}

/// The tool-call id of another model's call, as this transport replays it
/// (`normalizeToolCallId` of `convertResponsesMessages`).
pub fn normalize_tool_call_id(
    model: &Model,
    flavor: Flavor,
    id: &str,
    source: &AssistantMessage,
) -> String {
    if !flavor
        .tool_call_providers()
        .contains(&model.provider.as_str())
        || !id.contains('|')
    {
        return normalize_id_part(id);
    }
    let (call_id, item_id) = split_pipe(id);
    let item_id = item_id.unwrap_or("");
    let foreign = source.provider != model.provider || source.api != model.api;
    let mut normalized = if foreign {
        let mut hashed = format!("fc_{}", short_hash(item_id));
        hashed.truncate(64);
        hashed
    } else {
        normalize_id_part(item_id)
    };
    if !normalized.starts_with("fc_") {
        normalized = normalize_id_part(&format!("fc_{normalized}"));
    }
    format!("{}|{normalized}", normalize_id_part(call_id))
}

/// A text block's signature (`parseTextSignature`): the v1 JSON form, else the whole text as
/// the id.
fn parse_text_signature(signature: Option<&str>) -> Option<(String, Option<String>)> {
    let signature = signature.filter(|s| !s.is_empty())?;
    if signature.starts_with('{')
        && let Ok(Value::Object(parsed)) = serde_json::from_str::<Value>(signature)
        && parsed.get("v").and_then(Value::as_f64) == Some(1.0)
        && let Some(Value::String(id)) = parsed.get("id")
    {
        let phase = parsed
            .get("phase")
            .and_then(Value::as_str)
            .filter(|phase| matches!(*phase, "commentary" | "final_answer"))
            .map(str::to_owned);
        return Some((id.clone(), phase));
    }
    Some((signature.to_owned(), None))
}

/// `convertToolResultOutput`: the text, or `input_text`/`input_image` parts when the result
/// has images the model can see.
fn tool_result_output(model: &Model, content: &[ContentBlock]) -> Value {
    let text = content
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect::<Vec<_>>()
        .join("\n");
    let images: Vec<&crate::model::message::ImageContent> = content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Image(image) => Some(image),
            _ => None,
        })
        .collect();
    let has_text = !text.trim().is_empty();
    if images.is_empty() || !model.accepts_images() {
        return Value::String(if has_text {
            text
        } else if !images.is_empty() {
            "(see attached image)".to_owned()
        } else {
            "(no tool output)".to_owned()
        });
    }
    let mut parts = Vec::new();
    if has_text {
        parts.push(json!({"type": "input_text", "text": text}));
    }
    for image in images {
        parts.push(input_image(image));
    }
    Value::Array(parts)
}

fn input_image(image: &crate::model::message::ImageContent) -> Value {
    json!({"type": "input_image", "detail": "auto", "image_url": format!("data:{};base64,{}", image.mime_type, image.data)})
}

const INCREMENTAL_TOOLS_NOTICE: &str = "This is an incremental tools update. Previously declared tools remain available unless explicitly marked unavailable. A tool declared again here is available again, and its latest definition replaces the earlier one.";

/// Maps the resolved transcript to Responses `input` items (`convertResponsesMessages`).
pub fn convert_messages(
    model: &Model,
    transcript: &[Cow<'_, LlmMessage>],
    flavor: Flavor,
    compat: &ResponsesCompat,
    update_effort: Option<&Value>,
) -> Result<Vec<Value>, String> {
    // The reference normalises ids with the source message at hand; the source of an id is
    // looked up from the transcript here.
    let sources: HashMap<&str, &AssistantMessage> = transcript
        .iter()
        .filter_map(|message| match &**message {
            LlmMessage::Assistant(assistant) => Some(assistant),
            _ => None,
        })
        .flat_map(|assistant| {
            assistant
                .tool_calls()
                .map(move |call| (call.id.as_str(), assistant))
        })
        .collect();
    let normalize = |id: &str| match sources.get(id) {
        Some(source) => normalize_tool_call_id(model, flavor, id, source),
        None => normalize_id_part(id),
    };
    let transformed = transform_messages(transcript, model, &normalize);
    let tool_support = compat.tool_support();
    let transcript_tools = resolve_transcript_tools(transcript, tool_support);
    let instruction_role =
        if model.reasoning && model.compat_bool("supportsDeveloperRole") != Some(false) {
            "developer"
        } else {
            "system"
        };
    let mut items: Vec<Value> = Vec::with_capacity(transformed.len() + 1);
    let mut declared_additional_tools = false;
    let mut unavailable: Vec<String> = Vec::new();
    let mut msg_index = 0usize;
    let mut system_index = 0usize;
    for (source_index, message) in transformed.iter().enumerate() {
        let leading_system = source_index == 0 && matches!(&**message, LlmMessage::System(_));
        match &**message {
            LlmMessage::System(system) => {
                let anchors = system_index >= transcript_tools.folded_system_messages;
                system_index += 1;
                let added: &[ToolDeclaration] = system.tools_added.as_deref().unwrap_or(&[]);
                if anchors {
                    for tool in added {
                        unavailable.retain(|name| name != &tool.name);
                    }
                    if !added.is_empty() {
                        match tool_support {
                            ToolChangeSupport::Changes => {
                                if declared_additional_tools {
                                    let notice = if unavailable.is_empty() {
                                        INCREMENTAL_TOOLS_NOTICE.to_owned()
                                    } else {
                                        format!(
                                            "{INCREMENTAL_TOOLS_NOTICE}\nStill unavailable: {}.",
                                            unavailable.join(", ")
                                        )
                                    };
                                    items
                                        .push(json!({"role": instruction_role, "content": notice}));
                                }
                                declared_additional_tools = true;
                                items.push(json!({
                                    "type": "additional_tools",
                                    "role": "developer",
                                    "tools": convert_tools(added, flavor, compat, false)?,
                                }));
                            }
                            ToolChangeSupport::Additions => {
                                let names: Vec<&str> =
                                    added.iter().map(|tool| tool.name.as_str()).collect();
                                let call_id = format!(
                                    "pi_tool_load_{}",
                                    short_hash(&format!("system:{msg_index}:{}", names.join(",")))
                                );
                                items.push(json!({
                                    "type": "tool_search_call",
                                    "call_id": call_id,
                                    "execution": "client",
                                    "status": "completed",
                                    "arguments": {"query": names.join(" "), "limit": names.len()},
                                }));
                                items.push(json!({
                                    "type": "tool_search_output",
                                    "call_id": call_id,
                                    "execution": "client",
                                    "status": "completed",
                                    "tools": convert_tools(added, flavor, compat, true)?,
                                }));
                            }
                            ToolChangeSupport::None => {}
                        }
                    }
                }
                let mut parts = vec![if leading_system {
                    get_system_message_text(system)
                } else {
                    render_system_message_update(system)
                }];
                if anchors {
                    let added_names: HashSet<&str> =
                        added.iter().map(|tool| tool.name.as_str()).collect();
                    let removed: Vec<&str> = system
                        .tools_removed
                        .iter()
                        .flatten()
                        .map(|tool| tool.name.as_str())
                        .filter(|name| !added_names.contains(name))
                        .collect();
                    if !removed.is_empty() {
                        let list: Vec<String> =
                            removed.iter().map(|name| format!("- {name}")).collect();
                        parts.push(format!(
                            "The following tools are no longer available. Do not call them:\n{}",
                            list.join("\n")
                        ));
                    }
                    for name in removed {
                        if !unavailable.iter().any(|known| known == name) {
                            unavailable.push(name.to_owned());
                        }
                    }
                }
                let text = parts
                    .into_iter()
                    .filter(|part| !part.is_empty())
                    .collect::<Vec<_>>()
                    .join("\n\n");
                if !text.is_empty() {
                    items.push(json!({"role": instruction_role, "content": text}));
                }
            }
            LlmMessage::User(user) => {
                match &user.content {
                    UserContent::Text(text) => {
                        items.push(json!({"role": "user", "content": [{"type": "input_text", "text": text}]}));
                    }
                    UserContent::Blocks(blocks) => {
                        let content: Vec<Value> = blocks
                            .iter()
                            .filter_map(|block| match block {
                                ContentBlock::Text(text) => {
                                    Some(json!({"type": "input_text", "text": text.text}))
                                }
                                ContentBlock::Image(image) => Some(input_image(image)),
                                _ => None,
                            })
                            .collect();
                        if content.is_empty() {
                            continue;
                        }
                        items.push(json!({"role": "user", "content": content}));
                    }
                }
            }
            LlmMessage::Assistant(assistant) => {
                let output = convert_assistant(model, assistant, msg_index);
                if output.is_empty() {
                    continue;
                }
                let same_model = assistant.provider == model.provider
                    && assistant.api == model.api
                    && assistant.model == model.id;
                if update_effort.is_some()
                    && same_model
                    && let Some(level) = &assistant.provider_thinking_level
                {
                    items.push(
                        json!({"type": "configuration_update", "reasoning": {"effort": level}}),
                    );
                }
                items.extend(output);
            }
            LlmMessage::ToolResult(result) => {
                let (call_id, _) = split_pipe(&result.tool_call_id);
                items.push(json!({
                    "type": "function_call_output",
                    "call_id": call_id,
                    "output": tool_result_output(model, &result.content),
                }));
            }
        }
        if !leading_system {
            msg_index += 1;
        }
    }
    if let Some(effort) = update_effort {
        items.push(json!({"type": "configuration_update", "reasoning": {"effort": effort}}));
    }
    Ok(items)
}

/// One assistant message's replayed items.
fn convert_assistant(model: &Model, assistant: &AssistantMessage, msg_index: usize) -> Vec<Value> {
    let same_provider_and_api = assistant.provider == model.provider && assistant.api == model.api;
    let same_model = same_provider_and_api && assistant.model == model.id;
    let different_model = same_provider_and_api && assistant.model != model.id;
    let mut output = Vec::new();
    let mut text_index = 0usize;
    for block in &assistant.content {
        match block {
            ContentBlock::Thinking(thinking) => {
                if let Some(signature) = thinking
                    .thinking_signature
                    .as_deref()
                    .filter(|s| !s.is_empty())
                    && let Ok(item) = serde_json::from_str::<Value>(signature)
                {
                    output.push(item);
                }
            }
            ContentBlock::Text(text) => {
                let parsed = parse_text_signature(text.text_signature.as_deref());
                let fallback = if text_index == 0 {
                    format!("msg_pi_{msg_index}")
                } else {
                    format!("msg_pi_{msg_index}_{text_index}")
                };
                text_index += 1;
                let (id, phase) = match parsed {
                    Some((id, phase)) if !id.is_empty() => {
                        if id.encode_utf16().count() > 64 {
                            (format!("msg_{}", short_hash(&id)), phase)
                        } else {
                            (id, phase)
                        }
                    }
                    Some((_, phase)) => (fallback, phase),
                    None => (fallback, None),
                };
                let mut item = Map::new();
                item.insert("type".into(), json!("message"));
                item.insert("role".into(), json!("assistant"));
                item.insert(
                    "content".into(),
                    json!([{"type": "output_text", "text": text.text, "annotations": []}]),
                );
                item.insert("status".into(), json!("completed"));
                item.insert("id".into(), json!(id));
                if let Some(phase) = phase {
                    item.insert("phase".into(), json!(phase));
                }
                output.push(Value::Object(item));
            }
            ContentBlock::ToolCall(call) => {
                let (call_id, item_id) = split_pipe(&call.id);
                let item_id = item_id.filter(|id| !different_model && id.starts_with("fc_"));
                let mut item = Map::new();
                item.insert("type".into(), json!("function_call"));
                if let Some(item_id) = item_id {
                    item.insert("id".into(), json!(item_id));
                }
                item.insert("call_id".into(), json!(call_id));
                item.insert("name".into(), json!(call.name));
                item.insert("arguments".into(), json!(to_js_string(&call.arguments)));
                if same_model && let Some(namespace) = call.extra.get("namespace") {
                    item.insert("namespace".into(), namespace.clone());
                }
                output.push(Value::Object(item));
            }
            ContentBlock::Image(_) | ContentBlock::Unknown(_) => {}
        }
    }
    output
}

// ---------------------------------------------------------------------------------------
// Decoding

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotKind {
    Thinking,
    Text,
    ToolCall,
}

struct Slot {
    kind: SlotKind,
    content_index: usize,
    /// The argument text of a tool call (`ToolCallArgumentsStream.text`).
    arguments: String,
}

/// Turns Responses stream events into [`StreamEvent`]s and the assistant message (pure: feed
/// it the `data` of each SSE frame).
pub struct ResponsesDecoder {
    message: AssistantMessage,
    cost: ModelCost,
    model_id: String,
    flavor: Flavor,
    slots: HashMap<String, Slot>,
    /// Content indexes of tool calls whose `output_item.done` has not arrived.
    unfinished: Vec<usize>,
    /// Content indexes of tool calls whose arguments changed since the last refresh.
    dirty: HashMap<usize, String>,
    /// Reasoning blocks by item id (for the terminal response's `encrypted_content`).
    reasoning_blocks: HashMap<String, usize>,
    saw_terminal: bool,
    now_ms: i64,
}

/// A delta event, read without building a JSON tree (strings borrowed where they have no
/// escapes).
#[derive(Deserialize)]
struct DeltaEvent<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    delta: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    output_index: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a serde_json::value::RawValue>,
}

/// The key of an output slot: `output_index` as JavaScript would use it as a `Map` key.
fn slot_key(event: &Value) -> String {
    match event.get("output_index") {
        None => "undefined".to_owned(),
        Some(value) => to_js_string(value),
    }
}

/// `${value}` of a JSON member in a template string.
fn template(value: Option<&Value>) -> String {
    match value {
        None => "undefined".to_owned(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) => "null".to_owned(),
        Some(other) => to_js_string(other),
    }
}

fn truthy(value: Option<&Value>) -> bool {
    value.is_some_and(crate::ai::openai::truthy)
}

fn count(value: Option<&Value>) -> u64 {
    match value.and_then(Value::as_f64) {
        Some(n) if n.is_finite() && n > 0.0 => n as u64,
        _ => 0,
    }
}

impl ResponsesDecoder {
    /// Starts decoding into `message` (the empty message of [`crate::ai::new_assistant_message`]).
    pub fn new(message: AssistantMessage, model: &Model, flavor: Flavor) -> Self {
        Self {
            message,
            cost: model.cost.clone(),
            model_id: model.id.clone(),
            flavor,
            slots: HashMap::new(),
            unfinished: Vec::new(),
            dirty: HashMap::new(),
            reasoning_blocks: HashMap::new(),
            saw_terminal: false,
            now_ms: 0,
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

    /// Sets the time diagnostics are stamped with.
    pub fn set_now(&mut self, now_ms: i64) {
        self.now_ms = now_ms;
    }

    /// Re-parses the partial arguments of tool calls that received text since the last call.
    pub fn refresh(&mut self) {
        for (index, text) in self.dirty.drain() {
            if let Some(ContentBlock::ToolCall(call)) = self.message.content.get_mut(index) {
                call.arguments = match parse_streaming_json(&text) {
                    object @ Value::Object(_) => object,
                    _ => Value::Object(Map::new()),
                };
            }
        }
    }

    /// Processes one SSE frame, as the OpenAI SDK's stream and `processResponsesStream` do:
    /// `[DONE]` ends it (`Ok(true)`), unreadable JSON, an `error` event, an `error` member or a
    /// failed response fail with their text, anything else is applied.
    pub fn on_frame(
        &mut self,
        event: &str,
        data: &str,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, String> {
        if data == "[DONE]" {
            return Ok(true);
        }
        if event != "error" && self.on_delta(data, out) {
            return Ok(false);
        }
        let value: Value = serde_json::from_str(data)
            .map_err(|_| "Error reading response: malformed server-sent event JSON.".to_owned())?;
        if event == "error" {
            let error = match value.get("error") {
                None | Some(Value::Null) => value.clone(),
                Some(error) => error.clone(),
            };
            return Err(crate::ai::transport::api_error_message(
                None,
                Some(&error),
                None,
            ));
        }
        if let Some(error) = value.get("error").filter(|error| truthy(Some(error))) {
            return Err(crate::ai::transport::api_error_message(
                None,
                Some(error),
                None,
            ));
        }
        self.on_event(&value, out)?;
        Ok(false)
    }

    /// The fast path for the events that make up most of a stream (text, reasoning and
    /// argument deltas): read without building a JSON tree. Returns false when the frame is
    /// not such an event (or not plainly one), for the general path to handle.
    pub(crate) fn on_delta(&mut self, data: &str, out: &mut VecDeque<StreamEvent>) -> bool {
        let Ok(event) = serde_json::from_str::<DeltaEvent<'_>>(data) else {
            return false;
        };
        let (Some(kind), Some(delta)) = (event.kind, event.delta) else {
            return false;
        };
        if event.error.is_some_and(|error| error.get() != "null") {
            return false;
        }
        let key = match event.output_index {
            None => "undefined".to_owned(),
            Some(raw) if raw.get().bytes().all(|b| b.is_ascii_digit()) => raw.get().to_owned(),
            Some(_) => return false,
        };
        match &*kind {
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.append_text(&key, SlotKind::Thinking, &delta, out);
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                self.append_text(&key, SlotKind::Text, &delta, out);
            }
            "response.function_call_arguments.delta" => {
                if let Some(slot) = self.slot_mut(&key, SlotKind::ToolCall) {
                    slot.arguments.push_str(&delta);
                    let (index, text) = (slot.content_index, slot.arguments.clone());
                    self.dirty.insert(index, text);
                    out.push_back(StreamEvent::ToolCallDelta {
                        content_index: index,
                        delta: delta.into_owned(),
                    });
                }
            }
            _ => return false,
        }
        true
    }

    pub(crate) fn on_event(
        &mut self,
        event: &Value,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<(), String> {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let delta = || event.get("delta").and_then(Value::as_str);
        match kind {
            "response.created" => {
                self.message.key_order.touch(AssistantKey::ResponseId);
                self.message.response_id = event
                    .get("response")
                    .and_then(|response| response.get("id"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            "response.output_item.added" => {
                if let Some(item) = event.get("item") {
                    self.create_slot(slot_key(event), item, out);
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(delta) = delta() {
                    self.append_text(&slot_key(event), SlotKind::Thinking, delta, out);
                }
            }
            "response.reasoning_summary_part.done" => {
                self.append_text(&slot_key(event), SlotKind::Thinking, "\n\n", out);
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(delta) = delta() {
                    self.append_text(&slot_key(event), SlotKind::Text, delta, out);
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(delta) = delta()
                    && let Some(slot) = self.slot_mut(&slot_key(event), SlotKind::ToolCall)
                {
                    slot.arguments.push_str(delta);
                    let (index, text) = (slot.content_index, slot.arguments.clone());
                    self.dirty.insert(index, text);
                    out.push_back(StreamEvent::ToolCallDelta {
                        content_index: index,
                        delta: delta.to_owned(),
                    });
                }
            }
            "response.function_call_arguments.done" => {
                let full = template(event.get("arguments"));
                if let Some(slot) = self.slot_mut(&slot_key(event), SlotKind::ToolCall) {
                    let index = slot.content_index;
                    let delta = replace_arguments(&mut slot.arguments, &full);
                    let text = slot.arguments.clone();
                    self.dirty.insert(index, text);
                    if let Some(delta) = delta.filter(|delta| !delta.is_empty()) {
                        out.push_back(StreamEvent::ToolCallDelta {
                            content_index: index,
                            delta,
                        });
                    }
                }
            }
            "response.output_item.done" => {
                if let Some(item) = event.get("item") {
                    self.on_item_done(slot_key(event), item, out);
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = event.get("response").cloned().unwrap_or(Value::Null);
                self.finalize(&response)?;
            }
            "error" => {
                return Err(format!(
                    "Error Code {}: {}",
                    template(event.get("code")),
                    template(event.get("message"))
                ));
            }
            "response.failed" => {
                self.saw_terminal = true;
                let response = event.get("response");
                self.message.key_order.touch(AssistantKey::RawStopReason);
                self.message.raw_stop_reason = response
                    .and_then(|response| response.get("status"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let error = response.and_then(|response| response.get("error"));
                let details = response.and_then(|response| response.get("incomplete_details"));
                let text = if truthy(error) {
                    let field = |key: &str, default: &str| match error.and_then(|e| e.get(key)) {
                        Some(value) if truthy(Some(value)) => template(Some(value)),
                        _ => default.to_owned(),
                    };
                    format!(
                        "{}: {}",
                        field("code", "unknown"),
                        field("message", "no message")
                    )
                } else if let Some(reason) = details
                    .and_then(|details| details.get("reason"))
                    .filter(|reason| truthy(Some(reason)))
                {
                    format!("incomplete: {}", template(Some(reason)))
                } else {
                    "Unknown error (no error details in response)".to_owned()
                };
                return Err(text);
            }
            _ => {}
        }
        Ok(())
    }

    fn slot_mut(&mut self, key: &str, kind: SlotKind) -> Option<&mut Slot> {
        self.slots.get_mut(key).filter(|slot| slot.kind == kind)
    }

    fn append_text(
        &mut self,
        key: &str,
        kind: SlotKind,
        delta: &str,
        out: &mut VecDeque<StreamEvent>,
    ) {
        let Some(index) = self.slot_mut(key, kind).map(|slot| slot.content_index) else {
            return;
        };
        match self.message.content.get_mut(index) {
            Some(ContentBlock::Thinking(block)) => block.thinking.push_str(delta),
            Some(ContentBlock::Text(block)) => block.text.push_str(delta),
            _ => return,
        }
        out.push_back(match kind {
            SlotKind::Thinking => StreamEvent::ThinkingDelta {
                content_index: index,
                delta: delta.to_owned(),
            },
            _ => StreamEvent::TextDelta {
                content_index: index,
                delta: delta.to_owned(),
            },
        });
    }

    /// `applyMessagePhaseStopReason`.
    fn apply_phase(&mut self, item: &Value) {
        if item.get("type").and_then(Value::as_str) == Some("message")
            && item.get("phase").and_then(Value::as_str) == Some("final_answer")
        {
            self.message.stop_reason = StopReason::Stop;
        }
    }

    fn create_slot(
        &mut self,
        key: String,
        item: &Value,
        out: &mut VecDeque<StreamEvent>,
    ) -> Option<SlotKind> {
        let index = self.message.content.len();
        let kind = match item.get("type").and_then(Value::as_str) {
            Some("reasoning") => {
                self.message
                    .content
                    .push(ContentBlock::Thinking(ThinkingContent {
                        thinking: String::new(),
                        thinking_signature: None,
                        redacted: None,
                        extra: Map::new(),
                    }));
                out.push_back(StreamEvent::ThinkingStart {
                    content_index: index,
                });
                SlotKind::Thinking
            }
            Some("message") => {
                self.apply_phase(item);
                self.message.content.push(ContentBlock::Text(TextContent {
                    text: String::new(),
                    text_signature: None,
                    extra: Map::new(),
                }));
                out.push_back(StreamEvent::TextStart {
                    content_index: index,
                });
                SlotKind::Text
            }
            Some("function_call") => {
                let initial = item
                    .get("arguments")
                    .and_then(Value::as_str)
                    .filter(|text| !text.is_empty())
                    .unwrap_or("");
                let mut extra = Map::new();
                if let Some(namespace) = item.get("namespace") {
                    extra.insert("namespace".into(), namespace.clone());
                }
                self.message.content.push(ContentBlock::ToolCall(ToolCall {
                    id: format!(
                        "{}|{}",
                        template(item.get("call_id")),
                        template(item.get("id"))
                    ),
                    name: item
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    arguments: Value::Object(Map::new()),
                    arguments_error: None,
                    thought_signature: None,
                    extra,
                }));
                if !initial.is_empty() {
                    self.dirty.insert(index, initial.to_owned());
                }
                self.unfinished.push(index);
                self.slots.insert(
                    key,
                    Slot {
                        kind: SlotKind::ToolCall,
                        content_index: index,
                        arguments: initial.to_owned(),
                    },
                );
                out.push_back(StreamEvent::ToolCallStart {
                    content_index: index,
                });
                return Some(SlotKind::ToolCall);
            }
            _ => return None,
        };
        self.slots.insert(
            key,
            Slot {
                kind,
                content_index: index,
                arguments: String::new(),
            },
        );
        Some(kind)
    }

    fn on_item_done(&mut self, key: String, item: &Value, out: &mut VecDeque<StreamEvent>) {
        self.apply_phase(item);
        if !self.slots.contains_key(&key) && self.create_slot(key.clone(), item, out).is_none() {
            return;
        }
        let Some(slot) = self.slots.get(&key) else {
            return;
        };
        let (kind, index) = (slot.kind, slot.content_index);
        match (item.get("type").and_then(Value::as_str), kind) {
            (Some("reasoning"), SlotKind::Thinking) => {
                let joined = |field: &str| {
                    item.get(field)
                        .and_then(Value::as_array)
                        .map(|parts| {
                            parts
                                .iter()
                                .map(|part| match part.get("text") {
                                    None | Some(Value::Null) => String::new(),
                                    Some(text) => template(Some(text)),
                                })
                                .collect::<Vec<_>>()
                                .join("\n\n")
                        })
                        .unwrap_or_default()
                };
                let summary = joined("summary");
                let content = joined("content");
                if let Some(ContentBlock::Thinking(block)) = self.message.content.get_mut(index) {
                    if !summary.is_empty() {
                        block.thinking = summary;
                    } else if !content.is_empty() {
                        block.thinking = content;
                    }
                    block.thinking_signature = Some(to_js_string(item));
                    out.push_back(StreamEvent::ThinkingEnd {
                        content_index: index,
                        content: block.thinking.clone(),
                    });
                }
                self.reasoning_blocks
                    .insert(template(item.get("id")), index);
                self.slots.remove(&key);
            }
            (Some("message"), SlotKind::Text) => {
                let text: String = item
                    .get("content")
                    .and_then(Value::as_array)
                    .map(|parts| {
                        parts
                            .iter()
                            .map(|part| {
                                let field = if part.get("type").and_then(Value::as_str)
                                    == Some("output_text")
                                {
                                    "text"
                                } else {
                                    "refusal"
                                };
                                match part.get(field) {
                                    None | Some(Value::Null) => String::new(),
                                    Some(text) => template(Some(text)),
                                }
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let mut signature = Map::new();
                signature.insert("v".into(), json!(1));
                if let Some(id) = item.get("id") {
                    signature.insert("id".into(), id.clone());
                }
                if let Some(phase) = item.get("phase").filter(|phase| !phase.is_null()) {
                    signature.insert("phase".into(), phase.clone());
                }
                if let Some(ContentBlock::Text(block)) = self.message.content.get_mut(index) {
                    block.text = text;
                    block.text_signature = Some(to_js_string(&Value::Object(signature)));
                    out.push_back(StreamEvent::TextEnd {
                        content_index: index,
                        content: block.text.clone(),
                    });
                }
                self.slots.remove(&key);
            }
            (Some("function_call"), SlotKind::ToolCall) => {
                let mut arguments = self
                    .slots
                    .get(&key)
                    .map(|slot| slot.arguments.clone())
                    .unwrap_or_default();
                if let Some(full) = item
                    .get("arguments")
                    .filter(|arguments| truthy(Some(arguments)))
                {
                    replace_arguments(&mut arguments, &template(Some(full)));
                }
                let (parsed, error) = parse_tool_call_arguments(&arguments);
                self.dirty.remove(&index);
                if let Some(ContentBlock::ToolCall(call)) = self.message.content.get_mut(index) {
                    call.arguments = parsed;
                    call.arguments_error = error;
                    if let Some(namespace) = item.get("namespace") {
                        call.extra.insert("namespace".into(), namespace.clone());
                    }
                    out.push_back(StreamEvent::ToolCallEnd {
                        content_index: index,
                        tool_call: call.clone(),
                    });
                }
                self.unfinished.retain(|open| *open != index);
                self.slots.remove(&key);
            }
            _ => {}
        }
    }

    /// `finalizeResponse`: ids, usage and cost, stop reason from the terminal response.
    fn finalize(&mut self, response: &Value) -> Result<(), String> {
        self.saw_terminal = true;
        if let Some(Value::Array(output)) = response.get("output") {
            self.backfill_reasoning(output);
        }
        self.append_reasoning_removals(response.get("input_transformations"));
        if let Some(id) = response
            .get("id")
            .filter(|id| truthy(Some(id)))
            .and_then(Value::as_str)
        {
            self.message.key_order.touch(AssistantKey::ResponseId);
            self.message.response_id = Some(id.to_owned());
        }
        if let Some(usage) = response.get("usage").filter(|usage| truthy(Some(usage))) {
            let details = usage.get("input_tokens_details");
            let cached = count(details.and_then(|d| d.get("cached_tokens")));
            let written = count(details.and_then(|d| d.get("cache_write_tokens")));
            let input = count(usage.get("input_tokens"));
            self.message.usage = Usage {
                input: input.saturating_sub(cached + written),
                output: count(usage.get("output_tokens")),
                cache_read: cached,
                cache_write: written,
                reasoning: Some(count(
                    usage
                        .get("output_tokens_details")
                        .and_then(|d| d.get("reasoning_tokens")),
                )),
                total_tokens: count(usage.get("total_tokens")),
                ..Default::default()
            };
        }
        calculate_cost(&self.cost, &mut self.message.usage);
        if self.flavor != Flavor::Azure {
            let tier = response.get("service_tier").and_then(Value::as_str);
            // Codex's multiplier knows no `fast` tier.
            let priority =
                tier == Some("priority") || (self.flavor == Flavor::OpenAi && tier == Some("fast"));
            let multiplier = if tier == Some("flex") {
                0.5
            } else if priority && self.model_id == "gpt-5.5" {
                2.5
            } else if priority {
                2.0
            } else {
                1.0
            };
            if multiplier != 1.0 {
                let cost = &mut self.message.usage.cost;
                cost.input *= multiplier;
                cost.output *= multiplier;
                cost.cache_read *= multiplier;
                cost.cache_write *= multiplier;
                cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write;
            }
        }
        let status = response.get("status").and_then(Value::as_str);
        let reason = response
            .get("incomplete_details")
            .and_then(|details| details.get("reason"))
            .and_then(Value::as_str);
        self.message.key_order.touch(AssistantKey::RawStopReason);
        self.message.raw_stop_reason = match (status, reason) {
            (Some(status), Some(reason)) => Some(format!("{status}.{reason}")),
            (None, Some(reason)) => Some(format!("undefined.{reason}")),
            (status, None) => status.map(str::to_owned),
        };
        let (stop, error) = match status {
            None | Some("completed" | "in_progress" | "queued") => (StopReason::Stop, None),
            Some("incomplete") => match reason {
                Some("max_output_tokens") => (StopReason::Length, None),
                Some(reason) => (
                    StopReason::Error,
                    Some(format!("Response incomplete: {reason}")),
                ),
                None => (
                    StopReason::Error,
                    Some("Response incomplete without a provider reason".to_owned()),
                ),
            },
            Some("failed" | "cancelled") => (StopReason::Error, None),
            Some(other) => return Err(format!("Unhandled stop reason: {other}")),
        };
        self.message.stop_reason = stop;
        match error {
            Some(text) => {
                self.message.key_order.touch(AssistantKey::ErrorMessage);
                self.message.error_message = Some(text);
            }
            None => self.message.error_message = None,
        }
        if stop == StopReason::Stop && self.message.tool_calls().next().is_some() {
            self.message.stop_reason = StopReason::ToolUse;
        }
        Ok(())
    }

    /// Azure can leave `encrypted_content` out of `output_item.done` and send it only in the
    /// terminal response: copied into the stored reasoning item.
    fn backfill_reasoning(&mut self, output: &[Value]) {
        for item in output {
            if item.get("type").and_then(Value::as_str) != Some("reasoning")
                || !truthy(item.get("encrypted_content"))
            {
                continue;
            }
            let Some(index) = self.reasoning_blocks.get(&template(item.get("id"))) else {
                continue;
            };
            let Some(ContentBlock::Thinking(block)) = self.message.content.get_mut(*index) else {
                continue;
            };
            let Some(Ok(Value::Object(mut stored))) = block
                .thinking_signature
                .as_deref()
                .filter(|sig| !sig.is_empty())
                .map(serde_json::from_str::<Value>)
            else {
                continue;
            };
            if truthy(stored.get("encrypted_content")) {
                continue;
            }
            if let Some(content) = item.get("encrypted_content") {
                stored.insert("encrypted_content".into(), content.clone());
            }
            block.thinking_signature = Some(to_js_string(&Value::Object(stored)));
        }
    }

    /// Records reasoning the API withheld (`appendReasoningRemovals`), except `turn_boundary`.
    fn append_reasoning_removals(&mut self, transformations: Option<&Value>) {
        let Some(Value::Array(transformations)) = transformations else {
            return;
        };
        let removals: Vec<Value> = transformations
            .iter()
            .filter(|t| {
                t.get("type").and_then(Value::as_str) == Some("reasoning")
                    && t.get("action").and_then(Value::as_str) == Some("removed")
                    && t.get("reason").and_then(Value::as_str) != Some("turn_boundary")
            })
            .map(|t| {
                let mut entry = Map::new();
                for key in ["type", "id", "action", "reason"] {
                    if let Some(value) = t.get(key) {
                        entry.insert(key.into(), value.clone());
                    }
                }
                Value::Object(entry)
            })
            .collect();
        if removals.is_empty() {
            return;
        }
        let diagnostic = json!({
            "type": "openai_input_transformations",
            "timestamp": self.now_ms,
            "details": {"transformations": removals},
        });
        self.message.key_order.touch(AssistantKey::Diagnostics);
        match &mut self.message.diagnostics {
            Some(Value::Array(list)) => list.push(diagnostic),
            other => *other = Some(Value::Array(vec![diagnostic])),
        }
    }

    /// The stream ended (`[DONE]` or the end of the body): `Err` with the reference's text
    /// when there was no terminal event, a tool call never finished, or the stop reason is an
    /// error.
    pub fn complete(&mut self) -> Result<StopReason, String> {
        self.refresh();
        if !self.saw_terminal {
            return Err(
                "OpenAI Responses stream ended before a terminal response event".to_owned(),
            );
        }
        if self.message.stop_reason == StopReason::ToolUse
            && let Some(index) = self.unfinished.first()
            && let Some(ContentBlock::ToolCall(call)) = self.message.content.get(*index)
        {
            return Err(format!(
                "OpenAI Responses stream completed with an unfinished tool call: {} ({})",
                call.name, call.id
            ));
        }
        match self.message.stop_reason {
            StopReason::Pending => Err(self.flavor.ended_without_stop_reason().to_owned()),
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

/// `ToolCallArgumentsStream.replace`: the provider's complete argument text; returns the
/// missing piece when it continues the text so far (else the text starts over, no delta).
fn replace_arguments(current: &mut String, full: &str) -> Option<String> {
    if let Some(rest) = full.strip_prefix(current.as_str()) {
        let delta = rest.to_owned();
        current.push_str(&delta);
        Some(delta)
    } else {
        *current = full.to_owned();
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ai::auth::RequestAuth;
    use crate::ai::models::builtin_models;

    fn azure_model() -> Model {
        builtin_models()
            .iter()
            .find(|model| model.provider == "azure" && model.id == "gpt-5")
            .cloned()
            .expect("azure/gpt-5")
    }

    fn options(env: &[(&str, &str)]) -> StreamOptions {
        let mut options = StreamOptions::new(RequestAuth {
            api_key: Some("az-key".into()),
            provider_env: env
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
                .collect(),
            ..Default::default()
        });
        options.base_url = None;
        options
    }

    fn request() -> Request {
        Request {
            system_prompt: "Be brief.".into(),
            ..Default::default()
        }
    }

    #[test]
    fn azure_urls_versions_and_deployments_follow_the_environment() {
        let model = azure_model();
        let missing = build_request(&model, &request(), &options(&[]), Flavor::Azure);
        assert!(
            missing
                .unwrap_err()
                .starts_with("Azure OpenAI base URL is required.")
        );

        let by_resource = build_request(
            &model,
            &request(),
            &options(&[("AZURE_OPENAI_RESOURCE_NAME", "team")]),
            Flavor::Azure,
        )
        .unwrap();
        assert_eq!(
            by_resource.url,
            "https://team.openai.azure.com/openai/v1/responses?api-version=v1"
        );
        assert_eq!(by_resource.headers[0], ("api-key".into(), "az-key".into()));
        assert!(
            !by_resource
                .headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case("authorization"))
        );

        let configured = build_request(
            &model,
            &request(),
            &options(&[
                (
                    "AZURE_OPENAI_BASE_URL",
                    " https://x.cognitiveservices.azure.com/ ",
                ),
                ("AZURE_OPENAI_RESOURCE_NAME", "ignored"),
                ("AZURE_OPENAI_API_VERSION", "2025-04-01-preview"),
                (
                    "AZURE_OPENAI_DEPLOYMENT_NAME_MAP",
                    "gpt-4o=a, gpt-5 = prod-gpt5 ,bad",
                ),
            ]),
            Flavor::Azure,
        )
        .unwrap();
        assert_eq!(
            configured.url,
            "https://x.cognitiveservices.azure.com/openai/v1/responses?api-version=2025-04-01-preview"
        );
        assert_eq!(configured.body["model"], "prod-gpt5");
    }

    #[test]
    fn azure_base_urls_are_normalised_like_the_reference() {
        for (input, expected) in [
            (
                "https://r.openai.azure.com",
                "https://r.openai.azure.com/openai/v1",
            ),
            (
                "https://r.openai.azure.com/openai/",
                "https://r.openai.azure.com/openai/v1",
            ),
            (
                "https://r.openai.azure.com/openai/v1/responses?x=1",
                "https://r.openai.azure.com/openai/v1",
            ),
            (
                "https://r.services.ai.azure.com/custom/",
                "https://r.services.ai.azure.com/custom",
            ),
            (
                "http://127.0.0.1:8080/openai/v1/",
                "http://127.0.0.1:8080/openai/v1",
            ),
        ] {
            assert_eq!(
                normalize_azure_base_url(input).unwrap(),
                expected,
                "{input}"
            );
        }
        assert_eq!(
            normalize_azure_base_url("not a url").unwrap_err(),
            "Invalid Azure OpenAI base URL: not a url"
        );
    }

    #[test]
    fn tool_call_ids_from_elsewhere_are_normalised() {
        let model = builtin_models()
            .iter()
            .find(|model| model.provider == "openai" && model.id == "gpt-5.4")
            .cloned()
            .unwrap();
        let mut source = crate::ai::new_assistant_message(&model, 0);
        assert_eq!(
            normalize_tool_call_id(&model, Flavor::OpenAi, "call_1|fc_x+y", &source),
            "call_1|fc_x_y"
        );
        assert_eq!(
            normalize_tool_call_id(&model, Flavor::OpenAi, "call_1|item_9", &source),
            "call_1|fc_item_9"
        );
        source.provider = "anthropic".into();
        let foreign = normalize_tool_call_id(&model, Flavor::OpenAi, "call_1|rs_abc", &source);
        assert_eq!(foreign, format!("call_1|fc_{}", short_hash("rs_abc")));
        assert_eq!(
            normalize_tool_call_id(&model, Flavor::OpenAi, "toolu_01🎉/x__", &source),
            "toolu_01___x"
        );
    }
}
