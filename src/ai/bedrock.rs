//! The `bedrock-converse-stream` wire protocol (Amazon Bedrock's ConverseStream), as 1.6.0's
//! `api/bedrock-converse-stream.js` drives `@aws-sdk/client-bedrock-runtime`:
//! `POST <endpoint>/model/<url-encoded model id>/converse-stream`, signed with SigV4 (service
//! `bedrock`; `aws-sigv4`) or carrying a Bedrock API key as `Authorization: Bearer`, answered
//! in the binary `application/vnd.amazon.eventstream` framing (`aws-smithy-eventstream`).
//!
//! - [`build_request`]: the body in the SDK's key order — `messages` (user text/images, the
//!   model's text, `toolUse` and `reasoningContent` — with its signature for Claude, redacted
//!   payloads replayed — consecutive tool results in one user message, blank text as
//!   `<empty>`), `system`, `inferenceConfig.maxTokens`, `toolConfig` (`toolSpec`: `name`,
//!   `inputSchema.json`, `description`, `strict` where the model's compat allows), and
//!   `additionalModelRequestFields` (Claude thinking: adaptive with an effort, or a budget
//!   with `display: summarized` and the interleaved-thinking beta; GPT reasoning efforts);
//!   cache points after the system prompt and the last user message for Claude models that
//!   cache (`AWS_BEDROCK_FORCE_CACHE=1` for others), one hour with long retention.
//! - Endpoint and region as the reference picks them: a region in an inference-profile ARN,
//!   else `AWS_REGION`/`AWS_DEFAULT_REGION`, else the standard endpoint's region when the
//!   model's endpoint is kept, else `us-east-1` (or, under `AWS_PROFILE`, the profile's
//!   region); the model's base URL is used unless it is a standard
//!   `bedrock-runtime.<region>.amazonaws.com` one and a region or profile is configured.
//! - [`BedrockDecoder`]: event-stream messages `messageStart`, `contentBlockStart`
//!   (`toolUse`), `contentBlockDelta` (`text`, `toolUse.input` pieces, `reasoningContent`
//!   text/signature/redacted bytes), `contentBlockStop`, `messageStop` (`end_turn` …),
//!   `metadata` (usage, cache reads/writes); `exception` messages fail the call as the SDK's
//!   exception classes are worded (`Throttling error: …`); failures carry a
//!   `bedrock_response_failure` diagnostic (status, error code, request id).
//!
//! A message on the wire (prelude: total and header lengths, CRC32; headers; payload; CRC32):
//!
//! ```text
//! :event-type contentBlockDelta  :content-type application/json  :message-type event
//! {"contentBlockIndex":0,"delta":{"text":"Hi"},"p":"abcd"}
//! ```
//!
//! Not carried over: the strict-tool-limit fallback, the proxy and HTTP/1.1 switches (reqwest
//! negotiates), `requestMetadata`.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use bytes::BytesMut;
use serde_json::{Map, Value, json};

use crate::ai::aws_auth::{self, AwsAuth, SharedFiles};
use crate::ai::convert::{LlmMessage, transform_messages};
use crate::ai::models::{Model, ModelCost, ThinkingLevel, calculate_cost, clamp_thinking_level};
use crate::ai::partial_json::{parse_streaming_json, parse_tool_call_arguments};
use crate::ai::request::{
    adjust_max_tokens_for_thinking, clamp_max_tokens_to_context, identity_headers,
    json_schema_tool_parameters, resolve_json_schema_strict_sampling,
};
use crate::ai::transcript::{
    collapse_system_messages, get_current_tools, get_initial_system_message,
    get_system_message_text, normalize_context,
};
use crate::ai::transport::{WireRequest, set_header_ci};
use crate::ai::{CacheRetention, CloudCredentials, Request, StreamEvent, StreamOptions};
use crate::model::message::{
    AssistantKey, AssistantMessage, ContentBlock, StopReason, TextContent, ThinkingContent,
    ToolCall, Usage, UserContent,
};

/// The provider settings this protocol reads at request time.
pub const PROVIDER_ENV_NAMES: &[&str] = &[
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_BEDROCK_SKIP_AUTH",
    "AWS_BEDROCK_FORCE_CACHE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_ENDPOINT_URL_SSO",
    "AWS_ENDPOINT_URL_STS",
    "AWS_ENDPOINT_URL",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
];

const EMPTY_TEXT: &str = "<empty>";
const REDACTED_THINKING: &str = "[Reasoning redacted]";
const BLOCK_BINDING_BETA: &str = "thinking-binding-controls-2026-08-01";

fn candidates(model: &Model) -> Vec<String> {
    let mut out = Vec::new();
    for value in [model.id.as_str(), model.name.as_str()] {
        if value.is_empty() {
            continue;
        }
        let lower = value.to_lowercase();
        let mut dashed = String::with_capacity(lower.len());
        let mut in_run = false;
        for ch in lower.chars() {
            if ch.is_whitespace() || matches!(ch, '_' | '.' | ':') {
                if !in_run {
                    dashed.push('-');
                }
                in_run = true;
            } else {
                dashed.push(ch);
                in_run = false;
            }
        }
        out.push(lower);
        out.push(dashed);
    }
    out
}

fn any_contains(model: &Model, needles: &[&str]) -> bool {
    candidates(model)
        .iter()
        .any(|candidate| needles.iter().any(|needle| candidate.contains(needle)))
}

/// `isAnthropicClaudeModel`.
fn is_claude(model: &Model) -> bool {
    let id = model.id.to_lowercase();
    let name = model.name.to_lowercase();
    id.contains("anthropic.claude") || id.contains("anthropic/claude") || name.contains("claude")
}

const CLAUDE_5: &[&str] = &["fable-5", "opus-5", "sonnet-5", "haiku-5"];

fn supports_adaptive_thinking(model: &Model) -> bool {
    any_contains(model, &["opus-4-6", "opus-4-7", "opus-4-8", "sonnet-4-6"])
        || any_contains(model, CLAUDE_5)
}

fn supports_native_xhigh(model: &Model) -> bool {
    any_contains(model, &["opus-4-7", "opus-4-8"]) || any_contains(model, CLAUDE_5)
}

fn supports_prompt_caching(model: &Model, force: bool) -> bool {
    if !any_contains(model, &["claude"]) {
        return force;
    }
    any_contains(model, CLAUDE_5)
        || any_contains(model, &["-4-", "claude-3-7-sonnet", "claude-3-5-haiku"])
}

/// `normalizeToolCallId`.
fn normalize_tool_call_id(id: &str) -> String {
    id.chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || ch == '_' || ch == '-' {
                ch
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

fn non_blank_text(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({"text": text}))
}

fn image_block(image: &crate::model::message::ImageContent) -> Value {
    let format = match image.mime_type.as_str() {
        "image/jpeg" | "image/jpg" => "jpeg",
        "image/png" => "png",
        "image/gif" => "gif",
        _ => "webp",
    };
    json!({"image": {"format": format, "source": {"bytes": image.data}}})
}

/// `sanitizeBedrockDocument`: keys that are empty strings are dropped.
fn sanitize_document(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(sanitize_document).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| !key.is_empty())
                .map(|(key, value)| (key.clone(), sanitize_document(value)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn cache_point(retention: CacheRetention) -> Value {
    match retention {
        CacheRetention::Long => json!({"cachePoint": {"type": "default", "ttl": "1h"}}),
        _ => json!({"cachePoint": {"type": "default"}}),
    }
}

fn convert_messages(
    model: &Model,
    collapsed: &[Cow<'_, LlmMessage>],
    caching: Option<CacheRetention>,
) -> Vec<Value> {
    let conversation: &[Cow<'_, LlmMessage>] = match collapsed.first() {
        Some(first) if matches!(&**first, LlmMessage::System(_)) => &collapsed[1..],
        _ => collapsed,
    };
    let transformed = transform_messages(conversation, model, &normalize_tool_call_id);
    let claude = is_claude(model);
    let mut result: Vec<Value> = Vec::new();
    let mut index = 0;
    while index < transformed.len() {
        match &*transformed[index] {
            LlmMessage::System(_) => {}
            LlmMessage::User(user) => {
                let mut content = Vec::new();
                match &user.content {
                    UserContent::Text(text) => {
                        content.push(non_blank_text(text).unwrap_or(json!({"text": EMPTY_TEXT})));
                    }
                    UserContent::Blocks(blocks) => {
                        for block in blocks {
                            match block {
                                ContentBlock::Text(text) => {
                                    content.extend(non_blank_text(&text.text));
                                }
                                ContentBlock::Image(image) => content.push(image_block(image)),
                                _ => {}
                            }
                        }
                        if content.is_empty() {
                            content.push(json!({"text": EMPTY_TEXT}));
                        }
                    }
                }
                result.push(json!({"role": "user", "content": content}));
            }
            LlmMessage::Assistant(assistant) => {
                let mut blocks = Vec::new();
                for block in &assistant.content {
                    match block {
                        ContentBlock::Text(text) => blocks.extend(non_blank_text(&text.text)),
                        ContentBlock::ToolCall(call) => blocks.push(json!({
                            "toolUse": {
                                "toolUseId": call.id,
                                "name": call.name,
                                "input": sanitize_document(&call.arguments),
                            }
                        })),
                        ContentBlock::Thinking(thinking) => {
                            if thinking.redacted == Some(true) {
                                if let Some(signature) = thinking
                                    .thinking_signature
                                    .as_deref()
                                    .filter(|signature| !signature.is_empty())
                                    .filter(|signature| {
                                        base64::engine::general_purpose::STANDARD
                                            .decode(signature)
                                            .is_ok_and(|bytes| !bytes.is_empty())
                                    })
                                {
                                    blocks.push(
                                        json!({"reasoningContent": {"redactedContent": signature}}),
                                    );
                                }
                                continue;
                            }
                            if thinking.thinking.trim().is_empty() {
                                continue;
                            }
                            let signature = thinking
                                .thinking_signature
                                .as_deref()
                                .filter(|signature| !signature.trim().is_empty());
                            match (claude, signature) {
                                (true, None) => blocks.push(json!({"text": thinking.thinking})),
                                (true, Some(signature)) => blocks.push(json!({
                                    "reasoningContent": {"reasoningText": {"text": thinking.thinking, "signature": signature}}
                                })),
                                (false, _) => blocks.push(json!({
                                    "reasoningContent": {"reasoningText": {"text": thinking.thinking}}
                                })),
                            }
                        }
                        ContentBlock::Image(_) | ContentBlock::Unknown(_) => {}
                    }
                }
                if !blocks.is_empty() {
                    result.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            LlmMessage::ToolResult(_) => {
                let mut results = Vec::new();
                // Claude rejects images in error results: they follow all results of the
                // turn, after a caption naming the call.
                let mut error_images = Vec::new();
                while let Some(LlmMessage::ToolResult(tool)) = transformed.get(index).map(|m| &**m)
                {
                    let split = if claude {
                        crate::ai::anthropic::split_error_tool_result_images(tool)
                    } else {
                        None
                    };
                    let blocks: &[ContentBlock] = match &split {
                        Some((content, caption, images)) => {
                            error_images.push(json!({"text": caption}));
                            error_images.extend(images.iter().map(|image| image_block(image)));
                            content
                        }
                        None => &tool.content,
                    };
                    let mut content: Vec<Value> = Vec::new();
                    for block in blocks {
                        match block {
                            ContentBlock::Image(image) => content.push(image_block(image)),
                            ContentBlock::Text(text) => content.extend(non_blank_text(&text.text)),
                            _ => {}
                        }
                    }
                    if content.is_empty() {
                        content.push(json!({"text": EMPTY_TEXT}));
                    }
                    results.push(json!({"toolResult": {
                        "toolUseId": tool.tool_call_id,
                        "content": content,
                        "status": if tool.is_error { "error" } else { "success" },
                    }}));
                    index += 1;
                }
                results.extend(error_images);
                result.push(json!({"role": "user", "content": results}));
                continue;
            }
        }
        index += 1;
    }
    if let Some(retention) = caching
        && let Some(last) = result.last_mut()
        && last["role"] == "user"
        && let Some(content) = last["content"].as_array_mut()
    {
        content.push(cache_point(retention));
    }
    result
}

fn effort(model: &Model, level: ThinkingLevel) -> Value {
    if level == ThinkingLevel::Xhigh && supports_native_xhigh(model) {
        return json!("xhigh");
    }
    if let Some(Value::String(mapped)) = model
        .thinking_level_map
        .as_ref()
        .and_then(|map| map.get(level.as_str()))
    {
        return json!(mapped);
    }
    json!(match level {
        ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        _ => "high",
    })
}

/// `buildAdditionalModelRequestFields`; `budget` is the thinking budget `streamSimple` fixed.
fn additional_fields(
    model: &Model,
    level: ThinkingLevel,
    budget: u64,
    gov_cloud_region: bool,
) -> Option<Value> {
    if level == ThinkingLevel::Off || !model.reasoning {
        return None;
    }
    if is_claude(model) {
        // `isGovCloudBedrockTarget`: GovCloud rejects `thinking.display` and block binding.
        let gov = gov_cloud_region
            || model.id.to_lowercase().starts_with("us-gov.")
            || model.id.to_lowercase().starts_with("arn:aws-us-gov:");
        let binding = !gov
            && (any_contains(model, &["opus-4-7", "opus-4-8"]) || any_contains(model, CLAUDE_5));
        let mut result = Map::new();
        if supports_adaptive_thinking(model) {
            let mut thinking = Map::new();
            thinking.insert("type".into(), json!("adaptive"));
            if !gov {
                thinking.insert("display".into(), json!("summarized"));
            }
            if binding {
                thinking.insert(
                    "block_binding".into(),
                    json!({"prefix_mismatch_behavior": "drop_block"}),
                );
            }
            result.insert("thinking".into(), Value::Object(thinking));
            result.insert(
                "output_config".into(),
                json!({"effort": effort(model, level)}),
            );
            if binding {
                result.insert("anthropic_beta".into(), json!([BLOCK_BINDING_BETA]));
            }
        } else {
            let mut thinking = Map::new();
            thinking.insert("type".into(), json!("enabled"));
            thinking.insert("budget_tokens".into(), json!(budget));
            if !gov {
                thinking.insert("display".into(), json!("summarized"));
            }
            result.insert("thinking".into(), Value::Object(thinking));
            result.insert(
                "anthropic_beta".into(),
                json!(["interleaved-thinking-2025-05-14"]),
            );
        }
        return Some(Value::Object(result));
    }
    if any_contains(model, &["gpt-oss"]) {
        let effort = match level {
            ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            _ => "high",
        };
        return Some(json!({"reasoning_effort": effort}));
    }
    if any_contains(model, &["gpt-"]) {
        let mapped = model
            .thinking_level_map
            .as_ref()
            .and_then(|map| map.get(level.as_str()))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let effort = mapped.unwrap_or_else(|| {
            match level {
                ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
                ThinkingLevel::Medium => "medium",
                ThinkingLevel::Xhigh => "xhigh",
                ThinkingLevel::Max => "max",
                _ => "high",
            }
            .to_owned()
        });
        return Some(json!({"reasoning": {"effort": effort}}));
    }
    None
}

/// The region of a standard `bedrock-runtime[-fips].<region>.amazonaws.com[.cn]` URL.
fn standard_endpoint_region(base_url: &str) -> Option<String> {
    let rest = base_url.split_once("://")?.1;
    let host = rest.split(['/', '?', '#']).next()?;
    let host = host.rsplit_once('@').map_or(host, |(_, host)| host);
    let host = host.split(':').next()?.to_lowercase();
    let host = host.strip_suffix(".cn").unwrap_or(&host);
    let host = host.strip_suffix(".amazonaws.com")?;
    let region = host
        .strip_prefix("bedrock-runtime-fips.")
        .or_else(|| host.strip_prefix("bedrock-runtime."))?;
    (!region.is_empty()
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'))
    .then(|| region.to_owned())
}

/// `extendedEncodeURIComponent`.
fn encode_path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char);
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// What signs or authorises the request once its body is serialised.
#[derive(Debug)]
pub struct Signing {
    auth: AwsAuth,
    region: String,
}

/// One Bedrock call.
#[derive(Debug)]
pub struct BedrockRequest {
    /// URL, headers (unsigned) and body.
    pub wire: WireRequest,
    /// How to sign it.
    pub signing: Signing,
}

/// Builds the request of one call (`streamSimple` + `stream` up to `client.send`).
pub fn build_request(
    model: &Model,
    request: &Request,
    options: &StreamOptions,
    now_ms: i64,
) -> Result<BedrockRequest, String> {
    let env = |name: &str| options.provider_env(name).map(str::to_owned);
    let files = match &options.cloud {
        CloudCredentials::AwsFiles(files) => files.clone(),
        _ => SharedFiles::default(),
    };
    let configured_region = env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION"));
    let flags = BodyFlags {
        force_cache: env("AWS_BEDROCK_FORCE_CACHE").as_deref() == Some("1"),
        gov_cloud_region: configured_region
            .as_deref()
            .is_some_and(|region| region.to_lowercase().starts_with("us-gov-")),
    };
    let profile = env("AWS_PROFILE").is_some();
    let endpoint_region = standard_endpoint_region(&model.base_url);
    let explicit_endpoint = endpoint_region.is_none() || (configured_region.is_none() && !profile);
    let arn_region = model
        .id
        .strip_prefix("arn:aws")
        .and_then(|rest| rest.split_once(":bedrock:"))
        .filter(|(partition, _)| partition.is_empty() || partition.starts_with('-'))
        .and_then(|(_, rest)| rest.split(':').next())
        .filter(|region| !region.is_empty())
        .map(str::to_owned);
    let region = arn_region
        .or(configured_region)
        .or(if explicit_endpoint {
            endpoint_region
        } else {
            None
        })
        .or_else(|| (!profile).then(|| "us-east-1".to_owned()))
        .or_else(|| aws_auth::profile_region(&env, &files))
        .ok_or("Region is missing")?;
    let auth = aws_auth::resolve_auth(&env, options.api_key.as_deref(), &files, now_ms)?;
    let base = if explicit_endpoint && !model.base_url.trim().is_empty() {
        model.base_url.trim().trim_end_matches('/').to_owned()
    } else {
        format!("https://bedrock-runtime.{region}.amazonaws.com")
    };
    let url = format!(
        "{base}/model/{}/converse-stream",
        encode_path_segment(&model.id)
    );
    let mut headers = vec![("Content-Type".to_owned(), "application/json".to_owned())];
    for (name, value) in identity_headers(model, &options.identity) {
        set_header_ci(&mut headers, &name, &value);
    }
    for (name, value) in &options.headers {
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("x-amz-") || lower == "authorization" || lower == "host" {
            continue;
        }
        set_header_ci(&mut headers, name, value);
    }
    let body = build_body(model, request, options, &flags);
    Ok(BedrockRequest {
        wire: WireRequest { url, headers, body },
        signing: Signing { auth, region },
    })
}

/// What the provider environment changes in the body.
struct BodyFlags {
    /// `AWS_BEDROCK_FORCE_CACHE=1`: cache points for models not known to cache.
    force_cache: bool,
    /// The configured region is a GovCloud one.
    gov_cloud_region: bool,
}

fn build_body(
    model: &Model,
    request: &Request,
    options: &StreamOptions,
    flags: &BodyFlags,
) -> Value {
    let transcript = normalize_context(request);
    let collapsed = collapse_system_messages(&transcript);
    let level = if options.thinking == ThinkingLevel::Off {
        ThinkingLevel::Off
    } else {
        clamp_thinking_level(model, options.thinking)
    };
    let mut max_tokens = clamp_max_tokens_to_context(
        model,
        &transcript,
        options.max_tokens.unwrap_or(model.max_tokens),
    );
    let mut budget = 0;
    if options.thinking != ThinkingLevel::Off
        && is_claude(model)
        && !supports_adaptive_thinking(model)
    {
        let (adjusted, adjusted_budget) = adjust_max_tokens_for_thinking(
            Some(max_tokens),
            model.max_tokens,
            options.thinking,
            &options.thinking_budgets,
        );
        max_tokens = clamp_max_tokens_to_context(model, &transcript, adjusted);
        budget = adjusted_budget.min(max_tokens.saturating_sub(1024));
    }
    let caching = (options.cache_retention != CacheRetention::None
        && supports_prompt_caching(model, flags.force_cache))
    .then_some(options.cache_retention);
    let mut body = Map::new();
    body.insert(
        "messages".into(),
        Value::Array(convert_messages(model, &collapsed, caching)),
    );
    let system = get_initial_system_message(&collapsed)
        .map(get_system_message_text)
        .unwrap_or_default();
    if !system.is_empty() {
        let mut blocks = vec![json!({"text": system})];
        if let Some(retention) = caching {
            blocks.push(cache_point(retention));
        }
        body.insert("system".into(), Value::Array(blocks));
    }
    body.insert("inferenceConfig".into(), json!({"maxTokens": max_tokens}));
    let tools = get_current_tools(&collapsed);
    if !tools.is_empty() {
        let strict_supported = model.compat_bool("supportsStrictMode").unwrap_or(false);
        let specs: Vec<Value> = tools
            .iter()
            .map(|tool| {
                let strict = resolve_json_schema_strict_sampling(tool, strict_supported, None)
                    .unwrap_or(false);
                let mut spec = Map::new();
                spec.insert("name".into(), json!(tool.name));
                spec.insert(
                    "inputSchema".into(),
                    json!({"json": json_schema_tool_parameters(tool, strict)}),
                );
                spec.insert("description".into(), json!(tool.description));
                if strict {
                    spec.insert("strict".into(), json!(true));
                }
                json!({"toolSpec": spec})
            })
            .collect();
        body.insert("toolConfig".into(), json!({"tools": specs}));
    }
    if let Some(fields) = additional_fields(model, level, budget, flags.gov_cloud_region) {
        body.insert("additionalModelRequestFields".into(), fields);
    }
    Value::Object(body)
}

impl Signing {
    /// Returns the source whose credentials must be fetched before [`Self::apply`].
    pub fn remote(&self) -> Option<&aws_auth::Remote> {
        match &self.auth {
            AwsAuth::Remote(remote) => Some(remote),
            AwsAuth::SigV4(_) | AwsAuth::Bearer(_) => None,
        }
    }

    /// Adds the authorisation headers for `body` at `now_ms` (SigV4: `x-amz-date`,
    /// `x-amz-content-sha256`, `x-amz-security-token`, `authorization`); `sso_keys` are the
    /// fetched credentials of an SSO role.
    pub fn apply(
        &self,
        wire: &mut WireRequest,
        body: &[u8],
        now_ms: i64,
        sso_keys: Option<&aws_auth::AwsKeys>,
    ) -> Result<(), String> {
        let keys = match (&self.auth, sso_keys) {
            (AwsAuth::Bearer(token), _) => {
                set_header_ci(
                    &mut wire.headers,
                    "Authorization",
                    &format!("Bearer {token}"),
                );
                return Ok(());
            }
            (AwsAuth::SigV4(keys), _) | (AwsAuth::Remote(_), Some(keys)) => keys,
            (AwsAuth::Remote(_), None) => return Err(aws_auth::NO_CREDENTIALS.to_owned()),
        };
        let identity = aws_credential_types::Credentials::new(
            &keys.access_key_id,
            &keys.secret_access_key,
            keys.session_token.clone(),
            None,
            "pi",
        )
        .into();
        let mut settings = aws_sigv4::http_request::SigningSettings::default();
        settings.payload_checksum_kind = aws_sigv4::http_request::PayloadChecksumKind::XAmzSha256;
        let time =
            SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(now_ms).unwrap_or(0));
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("bedrock")
            .time(time)
            .settings(settings)
            .build()
            .map_err(|err| format!("Could not sign the request: {err}"))?
            .into();
        let signable = aws_sigv4::http_request::SignableRequest::new(
            "POST",
            &wire.url,
            wire.headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str())),
            aws_sigv4::http_request::SignableBody::Bytes(body),
        )
        .map_err(|err| format!("Could not sign the request: {err}"))?;
        let (instructions, _signature) = aws_sigv4::http_request::sign(signable, &params)
            .map_err(|err| format!("Could not sign the request: {err}"))?
            .into_parts();
        for (name, value) in instructions.headers() {
            set_header_ci(&mut wire.headers, name, value);
        }
        Ok(())
    }
}

/// `BEDROCK_ERROR_PREFIXES`, else the exception name.
fn error_prefix(name: &str) -> &str {
    match name {
        "InternalServerException" => "Internal server error",
        "ModelStreamErrorException" => "Model stream error",
        "ValidationException" => "Validation error",
        "ThrottlingException" => "Throttling error",
        "ServiceUnavailableException" => "Service unavailable",
        other => other,
    }
}

fn data_retention_hint(text: &str) -> &'static str {
    if text.to_lowercase().contains("data retention mode") {
        " See https://docs.aws.amazon.com/bedrock/latest/userguide/data-retention.html for supported data retention modes."
    } else {
        ""
    }
}

/// The text of a failed HTTP response (`formatBedrockError` over the SDK's exception): the
/// `x-amzn-errortype` name's prefix and the body's `message`.
pub fn http_error_text(status: u16, error_type: Option<&str>, body: &str) -> String {
    let json = serde_json::from_str::<Value>(body).ok();
    let message = json
        .as_ref()
        .and_then(|json| json.get("message").or_else(|| json.get("Message")))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let name = error_type
        .map(|kind| kind.split(':').next().unwrap_or(kind).trim().to_owned())
        .or_else(|| {
            json.as_ref()
                .and_then(|json| json.get("__type"))
                .and_then(Value::as_str)
                .map(|kind| kind.rsplit('#').next().unwrap_or(kind).to_owned())
        })
        .filter(|name| !name.is_empty());
    let core = match &message {
        Some(message) => message.clone(),
        None => format!("{status}: {body}"),
    };
    let hint = data_retention_hint(&core);
    match name {
        Some(name) => format!("{}: {core}{hint}", error_prefix(&name)),
        None => format!("{core}{hint}"),
    }
}

/// The error code of an `x-amzn-errortype` value.
pub fn error_code(error_type: Option<&str>) -> Option<String> {
    let kind = error_type?.split(':').next()?.trim();
    kind.ends_with("Exception").then(|| kind.to_owned())
}

struct Open {
    content_index: usize,
    arguments: Option<String>,
    redacted: Option<Vec<u8>>,
    dirty: bool,
}

/// Turns event-stream bytes into [`StreamEvent`]s and the assistant message (pure: feed it
/// the body as it arrives).
pub struct BedrockDecoder {
    message: AssistantMessage,
    cost: ModelCost,
    buffer: BytesMut,
    frames: aws_smithy_eventstream::frame::MessageFrameDecoder,
    open: HashMap<i64, Open>,
    order: Vec<i64>,
    /// `x-amzn-requestid` of the response.
    request_id: Option<String>,
    /// What a failure's diagnostic reports.
    failure: Option<(Option<u16>, Option<String>)>,
    now_ms: i64,
}

fn count(value: Option<&Value>) -> u64 {
    match value.and_then(Value::as_f64) {
        Some(n) if n.is_finite() && n > 0.0 => n as u64,
        _ => 0,
    }
}

fn header<'a>(message: &'a aws_smithy_types::event_stream::Message, name: &str) -> Option<&'a str> {
    message
        .headers()
        .iter()
        .find(|header| header.name().as_str() == name)
        .and_then(|header| header.value().as_string().ok())
        .map(|value| value.as_str())
}

impl BedrockDecoder {
    /// Starts decoding into `message`.
    pub fn new(message: AssistantMessage, model: &Model) -> Self {
        Self {
            message,
            cost: model.cost.clone(),
            buffer: BytesMut::new(),
            frames: aws_smithy_eventstream::frame::MessageFrameDecoder::new(),
            open: HashMap::new(),
            order: Vec::new(),
            request_id: None,
            failure: None,
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

    /// Sets the time diagnostics carry.
    pub fn set_now(&mut self, now_ms: i64) {
        self.now_ms = now_ms;
    }

    /// Keeps the response's request id (for failure diagnostics).
    pub fn set_request_id(&mut self, request_id: Option<&str>) {
        self.request_id = request_id
            .map(str::trim)
            .filter(|id| !id.is_empty() && id.chars().count() <= 200)
            .map(str::to_owned);
    }

    /// Records what an HTTP failure's diagnostic reports.
    pub fn set_http_failure(
        &mut self,
        status: Option<u16>,
        code: Option<String>,
        request_id: Option<&str>,
    ) {
        self.set_request_id(request_id);
        self.failure = Some((status, code));
    }

    /// Re-parses the arguments of open tool calls (the reference's `partial`).
    pub fn refresh(&mut self) {
        for open in self.open.values_mut() {
            if open.dirty {
                open.dirty = false;
                if let (Some(arguments), Some(ContentBlock::ToolCall(call))) = (
                    &open.arguments,
                    self.message.content.get_mut(open.content_index),
                ) {
                    call.arguments = match parse_streaming_json(arguments) {
                        object @ Value::Object(_) => object,
                        _ => Value::Object(Map::new()),
                    };
                }
            }
        }
    }

    /// Feeds body bytes; `Err` with the reference's text when the stream reports a failure or
    /// cannot be read. Never ends the call (`Ok(false)`): the body's end does.
    pub fn on_bytes(
        &mut self,
        bytes: &[u8],
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, String> {
        self.buffer.extend_from_slice(bytes);
        loop {
            let decoded = self
                .frames
                .decode_frame(&mut self.buffer)
                .map_err(|err| format!("Could not read the event stream: {err}"))?;
            match decoded {
                aws_smithy_eventstream::frame::DecodedFrame::Incomplete => return Ok(false),
                aws_smithy_eventstream::frame::DecodedFrame::Complete(message) => {
                    self.on_message(&message, out)?;
                }
            }
        }
    }

    fn on_message(
        &mut self,
        message: &aws_smithy_types::event_stream::Message,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<(), String> {
        let payload = || serde_json::from_slice::<Value>(message.payload()).unwrap_or(Value::Null);
        match header(message, ":message-type") {
            Some("event") => {}
            Some("exception") => {
                let kind = header(message, ":exception-type").unwrap_or("UnknownError");
                let mut name = kind.to_owned();
                if let Some(first) = name.get_mut(0..1) {
                    first.make_ascii_uppercase();
                }
                let body = payload();
                let text = body
                    .get("message")
                    .or_else(|| body.get("Message"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| String::from_utf8_lossy(message.payload()).into_owned());
                let hint = data_retention_hint(&text);
                let prefix = error_prefix(&name).to_owned();
                self.failure = Some((None, name.ends_with("Exception").then_some(name)));
                return Err(format!("{prefix}: {text}{hint}"));
            }
            _ => {
                let code = header(message, ":error-code")
                    .unwrap_or("UnknownError")
                    .to_owned();
                let text = header(message, ":error-message").unwrap_or("").to_owned();
                self.failure = Some((None, code.ends_with("Exception").then_some(code)));
                return Err(text);
            }
        }
        let event = payload();
        match header(message, ":event-type") {
            Some("messageStart")
                if event.get("role").and_then(Value::as_str) != Some("assistant") =>
            {
                return Err(
                    "Unexpected assistant message start but got user message start instead"
                        .to_owned(),
                );
            }
            Some("contentBlockStart") => self.on_block_start(&event, out),
            Some("contentBlockDelta") => self.on_block_delta(&event, out),
            Some("contentBlockStop") => self.on_block_stop(&event, out),
            Some("messageStop") => {
                let reason = event.get("stopReason").and_then(Value::as_str);
                self.message.key_order.touch(AssistantKey::RawStopReason);
                self.message.raw_stop_reason = reason.map(str::to_owned);
                self.message.stop_reason = match reason {
                    Some("end_turn" | "stop_sequence") => StopReason::Stop,
                    Some("max_tokens" | "model_context_window_exceeded") => StopReason::Length,
                    Some("tool_use") => StopReason::ToolUse,
                    Some(other) => {
                        self.message.key_order.touch(AssistantKey::ErrorMessage);
                        self.message.error_message =
                            Some(format!("Provider stopped with: {other}"));
                        StopReason::Error
                    }
                    None => StopReason::Error,
                };
            }
            Some("metadata") => {
                if let Some(usage) = event.get("usage").filter(|usage| usage.is_object()) {
                    let input = count(usage.get("inputTokens"));
                    let output = count(usage.get("outputTokens"));
                    let cache_write_1h =
                        usage
                            .get("cacheDetails")
                            .and_then(Value::as_array)
                            .map(|details| {
                                details
                                    .iter()
                                    .filter(|detail| detail["ttl"] == "1h")
                                    .map(|detail| count(detail.get("inputTokens")))
                                    .sum()
                            });
                    let total = count(usage.get("totalTokens"));
                    self.message.usage = Usage {
                        input,
                        output,
                        cache_read: count(usage.get("cacheReadInputTokens")),
                        cache_write: count(usage.get("cacheWriteInputTokens")),
                        cache_write_1h,
                        total_tokens: if total > 0 { total } else { input + output },
                        ..Default::default()
                    };
                    calculate_cost(&self.cost, &mut self.message.usage);
                }
            }
            // Modelled exceptions can also arrive as events of their name.
            Some(
                kind @ ("internalServerException"
                | "modelStreamErrorException"
                | "validationException"
                | "throttlingException"
                | "serviceUnavailableException"),
            ) => {
                let mut name = kind.to_owned();
                if let Some(first) = name.get_mut(0..1) {
                    first.make_ascii_uppercase();
                }
                let text = event.get("message").and_then(Value::as_str).unwrap_or("");
                let prefix = error_prefix(&name).to_owned();
                self.failure = Some((None, Some(name)));
                return Err(format!("{prefix}: {text}"));
            }
            _ => {}
        }
        Ok(())
    }

    fn on_block_start(&mut self, event: &Value, out: &mut VecDeque<StreamEvent>) {
        let Some(tool) = event.pointer("/start/toolUse") else {
            return;
        };
        let index = event["contentBlockIndex"].as_i64().unwrap_or(0);
        let content_index = self.message.content.len();
        self.message.content.push(ContentBlock::ToolCall(ToolCall {
            id: tool["toolUseId"].as_str().unwrap_or("").to_owned(),
            name: tool["name"].as_str().unwrap_or("").to_owned(),
            arguments: Value::Object(Map::new()),
            arguments_error: None,
            thought_signature: None,
            extra: Map::new(),
        }));
        self.open_block(index, content_index, Some(String::new()));
        out.push_back(StreamEvent::ToolCallStart { content_index });
    }

    fn open_block(&mut self, index: i64, content_index: usize, arguments: Option<String>) {
        self.open.insert(
            index,
            Open {
                content_index,
                arguments,
                redacted: None,
                dirty: false,
            },
        );
        self.order.retain(|known| *known != index);
        self.order.push(index);
    }

    fn on_block_delta(&mut self, event: &Value, out: &mut VecDeque<StreamEvent>) {
        let index = event["contentBlockIndex"].as_i64().unwrap_or(0);
        let Some(delta) = event.get("delta") else {
            return;
        };
        if let Some(text) = delta.get("text").and_then(Value::as_str) {
            if !self.open.contains_key(&index) {
                let content_index = self.message.content.len();
                self.message.content.push(ContentBlock::Text(TextContent {
                    text: String::new(),
                    text_signature: None,
                    extra: Map::new(),
                }));
                self.open_block(index, content_index, None);
                out.push_back(StreamEvent::TextStart { content_index });
            }
            let content_index = self.open[&index].content_index;
            if let Some(ContentBlock::Text(block)) = self.message.content.get_mut(content_index) {
                block.text.push_str(text);
                out.push_back(StreamEvent::TextDelta {
                    content_index,
                    delta: text.to_owned(),
                });
            }
        } else if let Some(tool) = delta.get("toolUse") {
            let Some(open) = self.open.get_mut(&index) else {
                return;
            };
            let Some(arguments) = open.arguments.as_mut() else {
                return;
            };
            let input = tool.get("input").and_then(Value::as_str).unwrap_or("");
            arguments.push_str(input);
            open.dirty = true;
            out.push_back(StreamEvent::ToolCallDelta {
                content_index: open.content_index,
                delta: input.to_owned(),
            });
        } else if let Some(reasoning) = delta.get("reasoningContent") {
            if !self.open.contains_key(&index) {
                let content_index = self.message.content.len();
                self.message
                    .content
                    .push(ContentBlock::Thinking(ThinkingContent {
                        thinking: String::new(),
                        thinking_signature: Some(String::new()),
                        redacted: None,
                        extra: Map::new(),
                    }));
                self.open_block(index, content_index, None);
                out.push_back(StreamEvent::ThinkingStart { content_index });
            }
            let Some(open) = self.open.get_mut(&index) else {
                return;
            };
            let content_index = open.content_index;
            let Some(ContentBlock::Thinking(block)) = self.message.content.get_mut(content_index)
            else {
                return;
            };
            if let Some(text) = reasoning
                .get("text")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                block.thinking.push_str(text);
                out.push_back(StreamEvent::ThinkingDelta {
                    content_index,
                    delta: text.to_owned(),
                });
            }
            if let Some(signature) = reasoning
                .get("signature")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                && block.redacted != Some(true)
            {
                block
                    .thinking_signature
                    .get_or_insert_with(String::new)
                    .push_str(signature);
            }
            // The SDK hands the blob over as bytes; JSON carries it as base64.
            if let Some(redacted) = reasoning
                .get("redactedContent")
                .and_then(Value::as_str)
                .and_then(|text| base64::engine::general_purpose::STANDARD.decode(text).ok())
                .filter(|bytes| !bytes.is_empty())
            {
                if block.redacted != Some(true) {
                    block.redacted = Some(true);
                    block.thinking_signature = Some(String::new());
                    block.thinking.push_str(REDACTED_THINKING);
                    out.push_back(StreamEvent::ThinkingDelta {
                        content_index,
                        delta: REDACTED_THINKING.to_owned(),
                    });
                }
                open.redacted.get_or_insert_with(Vec::new).extend(redacted);
            }
        }
    }

    fn flush_redacted(&mut self, open: &mut Open) {
        if let (Some(bytes), Some(ContentBlock::Thinking(block))) = (
            open.redacted.take(),
            self.message.content.get_mut(open.content_index),
        ) {
            block.thinking_signature =
                Some(base64::engine::general_purpose::STANDARD.encode(bytes));
        }
    }

    fn on_block_stop(&mut self, event: &Value, out: &mut VecDeque<StreamEvent>) {
        let index = event["contentBlockIndex"].as_i64().unwrap_or(0);
        let Some(mut open) = self.open.remove(&index) else {
            return;
        };
        self.order.retain(|known| *known != index);
        let content_index = open.content_index;
        self.flush_redacted(&mut open);
        match self.message.content.get_mut(content_index) {
            Some(ContentBlock::Text(text)) => out.push_back(StreamEvent::TextEnd {
                content_index,
                content: text.text.clone(),
            }),
            Some(ContentBlock::Thinking(thinking)) => out.push_back(StreamEvent::ThinkingEnd {
                content_index,
                content: thinking.thinking.clone(),
            }),
            Some(ContentBlock::ToolCall(call)) => {
                if let Some(arguments) = &open.arguments {
                    let (value, error) = parse_tool_call_arguments(arguments);
                    call.arguments = value;
                    call.arguments_error = error;
                }
                out.push_back(StreamEvent::ToolCallEnd {
                    content_index,
                    tool_call: call.clone(),
                });
            }
            _ => {}
        }
    }

    /// Ends the stream state of blocks the stream never stopped (`flushOpenBlocks`).
    fn flush_open(&mut self) {
        let order = std::mem::take(&mut self.order);
        for index in order {
            if let Some(mut open) = self.open.remove(&index) {
                self.flush_redacted(&mut open);
            }
        }
        self.open.clear();
    }

    /// The body ended: `Err` with the reference's text when no stop reason came or it is an
    /// error one.
    pub fn complete(&mut self) -> Result<StopReason, String> {
        self.flush_open();
        match self.message.stop_reason {
            StopReason::Pending => Err("Bedrock stream ended without a stop reason".to_owned()),
            StopReason::Error | StopReason::Aborted => Err(self
                .message
                .error_message
                .clone()
                .unwrap_or_else(|| "An unknown error occurred".to_owned())),
            reason => Ok(reason),
        }
    }

    /// The call failed (after `errorMessage` was set): open blocks are flushed and the
    /// `bedrock_response_failure` diagnostic appended (status, error code, request id; none
    /// when nothing is known).
    pub fn on_failed(&mut self) {
        self.flush_open();
        let (status, code) = self.failure.take().unwrap_or((None, None));
        let mut details = Map::new();
        if let Some(status) = status {
            details.insert("status".into(), json!(status));
        }
        if let Some(code) = code {
            details.insert("errorCode".into(), json!(code));
        }
        if let Some(id) = &self.request_id {
            details.insert("requestId".into(), json!(id));
        }
        if details.is_empty() {
            return;
        }
        let diagnostic = json!({"type": "bedrock_response_failure", "timestamp": self.now_ms, "details": details});
        match &mut self.message.diagnostics {
            Some(Value::Array(items)) => items.push(diagnostic),
            _ => {
                self.message.key_order.touch(AssistantKey::Diagnostics);
                self.message.diagnostics = Some(Value::Array(vec![diagnostic]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_endpoints_name_their_region() {
        assert_eq!(
            standard_endpoint_region("https://bedrock-runtime.us-east-1.amazonaws.com").as_deref(),
            Some("us-east-1")
        );
        assert_eq!(
            standard_endpoint_region("https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com/")
                .as_deref(),
            Some("us-gov-west-1")
        );
        assert_eq!(standard_endpoint_region("http://127.0.0.1:9"), None);
        assert_eq!(encode_path_segment("a.b:0/c"), "a.b%3A0%2Fc");
    }

    #[test]
    fn http_errors_are_worded_with_the_exception_prefix() {
        assert_eq!(
            http_error_text(
                429,
                Some("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
                r#"{"message":"Slow down"}"#
            ),
            "Throttling error: Slow down"
        );
        assert_eq!(http_error_text(502, None, "<html>"), "502: <html>");
        assert_eq!(
            error_code(Some("AccessDeniedException:http://x/")).as_deref(),
            Some("AccessDeniedException")
        );
    }

    #[test]
    fn model_names_are_matched_with_separators_as_dashes() {
        let mut model = crate::ai::models::builtin_models()
            .iter()
            .find(|model| model.provider == "amazon-bedrock")
            .cloned()
            .expect("a built-in Bedrock model");
        model.id = "arn:aws:bedrock:eu-west-1:1:application-inference-profile/x".into();
        model.name = "Claude Opus 4.6".into();
        assert!(supports_adaptive_thinking(&model));
        assert!(is_claude(&model));
        assert!(supports_prompt_caching(&model, false));
    }
}
