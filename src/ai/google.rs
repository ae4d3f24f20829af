//! The `google-generative-ai` wire protocol (the Gemini API): `POST
//! <baseUrl>/models/<model>:streamGenerateContent?alt=sse` with the key in `x-goog-api-key`,
//! exactly as 1.6.0's `api/google-generative-ai.js` and `api/google-shared.js` shape and read
//! it through `@google/genai` (whose converters fix the body's key order).
//!
//! Two pure halves:
//! - [`build_request`]: model + request + options → URL, headers and the JSON body:
//!   `contents` (user text and `inlineData` images; the model's earlier turns as `text`,
//!   `thought: true` and `functionCall` parts with their `thoughtSignature`s when they came
//!   from this model and are base64; tool results as `functionResponse` parts merged into one
//!   user turn, images nested in them for Gemini 3+), `systemInstruction` (the collapsed
//!   system prompt; Gemini has no mid-conversation system messages), `tools`
//!   (`functionDeclarations` with `parametersJsonSchema`, `const` rewritten as one-value
//!   `enum`), `toolConfig` (`VALIDATED` for strict tools on Gemini 3+) and `generationConfig`
//!   (`maxOutputTokens`, `thinkingConfig`: a `thinkingLevel` for Gemini 3+/Gemma 4, a
//!   `thinkingBudget` for 2.5, disabled thinking as budget 0 or the lowest level).
//! - [`GoogleDecoder`]: each SSE `data:` chunk is a whole `GenerateContentResponse`: text
//!   parts (a `thought: true` part opens a thinking block), signatures kept on the block they
//!   came with, `functionCall` parts complete at once (parallel calls are several parts),
//!   `usageMetadata` (cached tokens out of the input, thought tokens counted as output and as
//!   `reasoning`), `finishReason` → stop reason. An `{"error":{…}}` chunk fails the call with
//!   `got status: <STATUS>. <chunk JSON>`.
//!
//! A stream looks like:
//!
//! ```text
//! data: {"candidates":[{"content":{"parts":[{"text":"Hi","thought":true}],"role":"model"}}],"responseId":"r1"}
//! data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"ls","args":{}}}]},"finishReason":"STOP"}],"usageMetadata":{…}}
//! ```
//!
//! Not carried over from the reference: `toolChoice` and `temperature` requests (the agent
//! never sets them). Departures: a thinking budget counts as the user's own (the reference's
//! `thinkingBudgets` setting) only when it differs from the default budget of its level.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::ai::convert::{LlmMessage, transform_messages};
use crate::ai::models::{Model, ModelCost, ThinkingLevel, calculate_cost, clamp_thinking_level};
use crate::ai::request::{
    clamp_max_tokens_to_context, identity_headers, json_schema_tool_parameters,
    resolve_json_schema_strict_sampling,
};
use crate::ai::transcript::{
    collapse_system_messages, get_current_tools, get_initial_system_message,
    get_system_message_text, normalize_context,
};
use crate::ai::transport::{WireRequest, set_header_ci};
use crate::ai::{Request, StreamEvent, StreamOptions, ThinkingBudgets, join_url};
use crate::model::message::{
    AssistantKey, AssistantMessage, ContentBlock, StopReason, TextContent, ThinkingContent,
    ToolCall, ToolDeclaration, Usage, UserContent,
};
use crate::support::json::to_js_string;

/// The Gemini API's address when a model has none (`@google/genai`'s default).
const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// Whether the call authenticates through a header the caller set (`x-goog-api-key`).
pub fn has_header_auth(headers: &[(String, String)]) -> bool {
    headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("x-goog-api-key"))
}

/// The major version of a `gemini-N…` / `gemini-live-N…` id (`getGeminiMajorVersion`).
fn gemini_major_version(model_id: &str) -> Option<u32> {
    let id = model_id.to_ascii_lowercase();
    let rest = id.strip_prefix("gemini-")?;
    let rest = rest.strip_prefix("live-").unwrap_or(rest);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Models that need tool-call ids in function calls and responses (`requiresToolCallId`).
fn requires_tool_call_id(model_id: &str) -> bool {
    model_id.starts_with("claude-")
        || model_id.starts_with("gpt-oss-")
        || gemini_major_version(model_id).is_some_and(|major| major >= 3)
}

/// Gemini 3+ (and non-Gemini models) take images inside `functionResponse.parts`.
fn supports_multimodal_function_response(model_id: &str) -> bool {
    gemini_major_version(model_id).is_none_or(|major| major >= 3)
}

/// Gemini 3+ enforces required parameters in validated tool calling
/// (`supportsGoogleStrictToolSampling`).
fn supports_strict_tool_sampling(model_id: &str) -> bool {
    gemini_major_version(model_id).is_some_and(|major| major >= 3)
}

/// Whether the model takes a discrete `thinkingLevel` instead of a `thinkingBudget`
/// (`usesGoogleThinkingLevel`).
pub fn uses_thinking_level(model: &Model) -> bool {
    let id = model.id.to_ascii_lowercase();
    let gemini_3 = id.match_indices("gemini-3").any(|(at, _)| {
        let rest = &id[at + "gemini-3".len()..];
        let rest = match rest.strip_prefix('.') {
            Some(minor) => {
                let digits = minor.chars().take_while(char::is_ascii_digit).count();
                if digits == 0 {
                    return false;
                }
                &minor[digits..]
            }
            None => rest,
        };
        rest.starts_with("-pro") || rest.starts_with("-flash")
    });
    let gemini_4_plus = id.match_indices("gemini-").any(|(at, _)| {
        let rest = &id.as_bytes()[at + "gemini-".len()..];
        matches!(rest, [b'4'..=b'9', ..] | [b'1'..=b'9', b'0'..=b'9', ..])
    });
    let gemma_4 = id.contains("gemma-4") || id.contains("gemma4");
    gemini_3
        || gemini_4_plus
        || id == "gemini-flash-latest"
        || id == "gemini-flash-lite-latest"
        || gemma_4
}

/// A pi level (or the model's mapping of it) as a Google level
/// (`resolveGoogleThinkingLevel`).
fn resolve_thinking_level(model: &Model, level: ThinkingLevel) -> Result<&'static str, String> {
    let mapped = model
        .thinking_level_map
        .as_ref()
        .and_then(|map| map.get(level.as_str()));
    let resolved = match mapped {
        Some(Value::String(text)) => text.to_lowercase(),
        _ => level.as_str().to_owned(),
    };
    match resolved.as_str() {
        "minimal" => Ok("MINIMAL"),
        "low" => Ok("LOW"),
        "medium" => Ok("MEDIUM"),
        "high" => Ok("HIGH"),
        _ => Err(format!(
            "Unsupported Google thinking level mapping for {}/{}: {} -> {}",
            model.provider,
            model.id,
            level.as_str(),
            match mapped {
                None => "undefined".to_owned(),
                Some(Value::String(text)) => text.clone(),
                Some(other) => to_js_string(other),
            }
        )),
    }
}

/// `getDisabledGoogleThinkingConfig`: budget 0, or the lowest level a level-only model has.
fn disabled_thinking_config(model: &Model) -> Result<Value, String> {
    if !uses_thinking_level(model) {
        return Ok(json!({"thinkingBudget": 0}));
    }
    let fallback = clamp_thinking_level(model, ThinkingLevel::Off);
    if fallback == ThinkingLevel::Off {
        return Ok(json!({"thinkingBudget": 0}));
    }
    Ok(json!({"thinkingLevel": resolve_thinking_level(model, fallback)?}))
}

/// `getGoogleBudget`: the user's budget for the level, else the model family's, else `-1`
/// (dynamic). See the module docs for how a user's budget is told apart.
/// Which budget table a protocol's `getGoogleBudget` has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetTable {
    /// The Gemini API's (2.5 Flash-Lite has its own row).
    Gemini,
    /// Vertex's (2.5 Flash-Lite falls under 2.5 Flash).
    Vertex,
}

fn thinking_budget(
    model: &Model,
    level: &str,
    budgets: &ThinkingBudgets,
    table: BudgetTable,
) -> i64 {
    let defaults = ThinkingBudgets::default();
    let (custom, default) = match level {
        "MINIMAL" => (budgets.minimal, defaults.minimal),
        "LOW" => (budgets.low, defaults.low),
        "MEDIUM" => (budgets.medium, defaults.medium),
        _ => (budgets.high, defaults.high),
    };
    if custom != default {
        return i64::try_from(custom).unwrap_or(i64::MAX);
    }
    let table: [i64; 4] = if model.id.contains("2.5-pro") {
        [128, 2048, 8192, 32768]
    } else if table == BudgetTable::Gemini && model.id.contains("2.5-flash-lite") {
        [512, 2048, 8192, 24576]
    } else if model.id.contains("2.5-flash") {
        [128, 2048, 8192, 24576]
    } else {
        return -1;
    };
    match level {
        "MINIMAL" => table[0],
        "LOW" => table[1],
        "MEDIUM" => table[2],
        _ => table[3],
    }
}

/// The `thinkingConfig` of a call (`streamSimple` + `buildParams`), `None` for models
/// without reasoning.
fn thinking_config(
    model: &Model,
    options: &StreamOptions,
    table: BudgetTable,
) -> Result<Option<Value>, String> {
    if !model.reasoning {
        return Ok(None);
    }
    let level = if options.thinking == ThinkingLevel::Off {
        ThinkingLevel::Off
    } else {
        clamp_thinking_level(model, options.thinking)
    };
    if level == ThinkingLevel::Off {
        return disabled_thinking_config(model).map(Some);
    }
    let google = resolve_thinking_level(model, level)?;
    if uses_thinking_level(model) {
        return Ok(Some(
            json!({"includeThoughts": true, "thinkingLevel": google}),
        ));
    }
    let budget = thinking_budget(model, google, &options.thinking_budgets, table);
    Ok(Some(
        json!({"includeThoughts": true, "thinkingBudget": budget}),
    ))
}

/// Builds the HTTP request of one call (the reference's `createClient` + `buildParams`);
/// `Err` with the reference's text when it cannot be built.
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
    let base_url = if base_url.is_empty() {
        DEFAULT_BASE_URL
    } else {
        base_url
    };
    let url = format!(
        "{}?alt=sse",
        join_url(
            base_url,
            &format!("models/{}:streamGenerateContent", model.id)
        )
    );
    let mut headers: Vec<(String, String)> = vec![
        ("Content-Type".to_owned(), "application/json".to_owned()),
        (
            "x-goog-api-key".to_owned(),
            options.api_key.clone().unwrap_or_default(),
        ),
    ];
    let mut configured = identity_headers(model, &options.identity);
    for (name, value) in model.headers.iter().flatten() {
        if let Some(value) = value.as_str() {
            configured.push((name.clone(), value.to_owned()));
        }
    }
    configured.extend(options.headers.iter().cloned());
    for (name, value) in configured {
        set_header_ci(&mut headers, &name, &value);
    }
    let transcript = normalize_context(request);
    let body = build_body(model, &transcript, options, BudgetTable::Gemini)?;
    Ok(WireRequest { url, headers, body })
}

/// The request body as `@google/genai` sends it: `contents`, `systemInstruction`, `tools`,
/// `toolConfig`, `generationConfig`.
pub fn build_body(
    model: &Model,
    transcript: &[Cow<'_, LlmMessage>],
    options: &StreamOptions,
    table: BudgetTable,
) -> Result<Value, String> {
    let max_tokens = clamp_max_tokens_to_context(
        model,
        transcript,
        options.max_tokens.unwrap_or(model.max_tokens),
    );
    let collapsed = collapse_system_messages(transcript);
    let system_text = get_initial_system_message(&collapsed)
        .map(get_system_message_text)
        .unwrap_or_default();
    let tools = get_current_tools(&collapsed);
    let strict_supported = supports_strict_tool_sampling(&model.id);
    let mut body = Map::new();
    body.insert(
        "contents".into(),
        Value::Array(convert_messages(model, &collapsed)),
    );
    if !system_text.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": system_text}], "role": "user"}),
        );
    }
    if !tools.is_empty() {
        body.insert(
            "tools".into(),
            json!([{"functionDeclarations": convert_tools(&tools, strict_supported)?}]),
        );
        let mut validated = false;
        for tool in &tools {
            validated |= resolve_json_schema_strict_sampling(tool, strict_supported, None)?;
        }
        if validated {
            body.insert(
                "toolConfig".into(),
                json!({"functionCallingConfig": {"mode": "VALIDATED"}}),
            );
        }
    }
    let mut generation = Map::new();
    generation.insert("maxOutputTokens".into(), json!(max_tokens));
    if let Some(config) = thinking_config(model, options, table)? {
        generation.insert("thinkingConfig".into(), config);
    }
    body.insert("generationConfig".into(), Value::Object(generation));
    Ok(Value::Object(body))
}

/// Function declarations (`convertTools`): `parametersJsonSchema`, strict where the tool asks
/// and the model supports it, `const` sent as a one-value `enum`.
pub fn convert_tools(tools: &[ToolDeclaration], strict_supported: bool) -> Result<Value, String> {
    let declarations = tools
        .iter()
        .map(|tool| {
            let strict = resolve_json_schema_strict_sampling(tool, strict_supported, None)?;
            let parameters = json_schema_tool_parameters(tool, strict);
            Ok(json!({
                "name": tool.name,
                "description": tool.description,
                "parametersJsonSchema": rewrite_const_as_enum(&parameters, false),
            }))
        })
        .collect::<Result<Vec<Value>, String>>()?;
    Ok(Value::Array(declarations))
}

/// Keywords whose values map names to subschemas.
const NAME_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
];

/// Keywords holding a subschema or a list of them.
const SUBSCHEMAS: &[&str] = &[
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "items",
    "prefixItems",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];

/// `rewriteConstAsEnum`: string and number `const`s become `enum: [value]` (Gemini ignores
/// `const`), at the end of the schema's keys.
fn rewrite_const_as_enum(schema: &Value, name_map: bool) -> Value {
    match schema {
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| rewrite_const_as_enum(item, false))
                .collect(),
        ),
        Value::Object(map) => {
            let mut result: Map<String, Value> = map
                .iter()
                .map(|(key, value)| {
                    let value = if name_map || SUBSCHEMAS.contains(&key.as_str()) {
                        rewrite_const_as_enum(value, false)
                    } else if NAME_MAPS.contains(&key.as_str()) {
                        rewrite_const_as_enum(value, true)
                    } else {
                        value.clone()
                    };
                    (key.clone(), value)
                })
                .collect();
            if !name_map
                && !result.contains_key("enum")
                && let Some(value) = result.get("const").cloned()
                && (value.is_string() || value.is_number())
            {
                result.shift_remove("const");
                result.insert("enum".into(), Value::Array(vec![value]));
            }
            Value::Object(result)
        }
        other => other.clone(),
    }
}

/// `isValidThoughtSignature`: base64 (Gemini's `TYPE_BYTES`).
fn valid_signature(signature: &str) -> bool {
    if signature.is_empty() || !signature.len().is_multiple_of(4) {
        return false;
    }
    let body = signature.trim_end_matches('=');
    signature.len() - body.len() <= 2
        && !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// A signature replayed only to the model that made it, and only when valid.
fn replayed_signature(same_model: bool, signature: Option<&str>) -> Option<String> {
    signature
        .filter(|signature| same_model && valid_signature(signature))
        .map(str::to_owned)
}

/// `normalizeToolCallId`: ids other models made, fitted to `[A-Za-z0-9_-]{0,64}` for models
/// that need ids.
fn normalize_tool_call_id(model_id: &str, id: &str) -> String {
    if !requires_tool_call_id(model_id) {
        return id.to_owned();
    }
    let mut out = String::new();
    let mut units = 0usize;
    for ch in id.chars() {
        let (text, width) = if ch.is_ascii_alphanumeric() || ch == '_' || ch == '-' {
            (ch.to_string(), 1)
        } else {
            let width = ch.len_utf16();
            ("_".repeat(width), width)
        };
        for unit in text.chars().take(64usize.saturating_sub(units)) {
            out.push(unit);
        }
        units += width;
        if units >= 64 {
            break;
        }
    }
    out
}

fn inline_data(image: &crate::model::message::ImageContent) -> Value {
    json!({"inlineData": {"mimeType": image.mime_type, "data": image.data}})
}

/// The conversation as Gemini `Content`s (`convertMessages`), the leading system message left
/// out (it is the `systemInstruction`).
pub fn convert_messages(model: &Model, collapsed: &[Cow<'_, LlmMessage>]) -> Vec<Value> {
    let conversation: &[Cow<'_, LlmMessage>] = match collapsed.first() {
        Some(first) if matches!(&**first, LlmMessage::System(_)) => &collapsed[1..],
        _ => collapsed,
    };
    let normalize = |id: &str| normalize_tool_call_id(&model.id, id);
    let transformed = transform_messages(conversation, model, &normalize);
    let include_id = requires_tool_call_id(&model.id);
    let mut contents: Vec<Value> = Vec::with_capacity(transformed.len());
    for message in &transformed {
        match &**message {
            LlmMessage::System(_) => {}
            LlmMessage::User(user) => match &user.content {
                UserContent::Text(text) => {
                    contents.push(json!({"parts": [{"text": text}], "role": "user"}));
                }
                UserContent::Blocks(blocks) => {
                    let parts: Vec<Value> = blocks
                        .iter()
                        .filter_map(|block| match block {
                            ContentBlock::Text(text) => Some(json!({"text": text.text})),
                            ContentBlock::Image(image) => Some(inline_data(image)),
                            _ => None,
                        })
                        .collect();
                    if !parts.is_empty() {
                        contents.push(json!({"parts": parts, "role": "user"}));
                    }
                }
            },
            LlmMessage::Assistant(assistant) => {
                let parts = convert_assistant(model, assistant, include_id);
                if !parts.is_empty() {
                    contents.push(json!({"parts": parts, "role": "model"}));
                }
            }
            LlmMessage::ToolResult(result) => {
                let text = result
                    .content
                    .iter()
                    .filter_map(ContentBlock::as_text)
                    .collect::<Vec<_>>()
                    .join("\n");
                let images: Vec<Value> = if model.accepts_images() {
                    result
                        .content
                        .iter()
                        .filter_map(|block| match block {
                            ContentBlock::Image(image) => Some(inline_data(image)),
                            _ => None,
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let has_text = !text.trim().is_empty();
                let has_images = !images.is_empty();
                let nested = supports_multimodal_function_response(&model.id);
                let value = if has_text {
                    text
                } else if has_images {
                    "(see attached image)".to_owned()
                } else {
                    String::new()
                };
                let mut response = Map::new();
                response.insert("name".into(), json!(result.tool_name));
                response.insert(
                    "response".into(),
                    if result.is_error {
                        json!({"error": value})
                    } else {
                        json!({"output": value})
                    },
                );
                if has_images && nested {
                    response.insert("parts".into(), Value::Array(images.clone()));
                }
                if include_id {
                    response.insert("id".into(), json!(result.tool_call_id));
                }
                let part = json!({"functionResponse": response});
                let merged = contents.last_mut().and_then(|last| {
                    let is_responses = last["role"] == "user"
                        && last["parts"].as_array().is_some_and(|parts| {
                            parts.iter().any(|p| p.get("functionResponse").is_some())
                        });
                    if is_responses {
                        last["parts"].as_array_mut()
                    } else {
                        None
                    }
                });
                match merged {
                    Some(parts) => parts.push(part),
                    None => contents.push(json!({"parts": [part], "role": "user"})),
                }
                if has_images && !nested {
                    let mut parts = vec![json!({"text": "Tool result image:"})];
                    parts.extend(images);
                    contents.push(json!({"parts": parts, "role": "user"}));
                }
            }
        }
    }
    contents
}

/// An assistant message's parts, in `@google/genai`'s part key order (`functionCall`,
/// `text`, `thought`, `thoughtSignature`; a call's `args`, `id`, `name`).
fn convert_assistant(model: &Model, assistant: &AssistantMessage, include_id: bool) -> Vec<Value> {
    let same_model = assistant.provider == model.provider && assistant.model == model.id;
    let mut parts = Vec::new();
    for block in &assistant.content {
        match block {
            ContentBlock::Text(text) => {
                let signature = replayed_signature(same_model, text.text_signature.as_deref());
                if text.text.trim().is_empty() && signature.is_none() {
                    continue;
                }
                let mut part = Map::new();
                part.insert("text".into(), json!(text.text));
                if let Some(signature) = signature {
                    part.insert("thoughtSignature".into(), json!(signature));
                }
                parts.push(Value::Object(part));
            }
            ContentBlock::Thinking(thinking) => {
                if same_model {
                    let signature =
                        replayed_signature(same_model, thinking.thinking_signature.as_deref());
                    if thinking.thinking.trim().is_empty() && signature.is_none() {
                        continue;
                    }
                    let mut part = Map::new();
                    part.insert("text".into(), json!(thinking.thinking));
                    part.insert("thought".into(), Value::Bool(true));
                    if let Some(signature) = signature {
                        part.insert("thoughtSignature".into(), json!(signature));
                    }
                    parts.push(Value::Object(part));
                } else if !thinking.thinking.trim().is_empty() {
                    parts.push(json!({"text": thinking.thinking}));
                }
            }
            ContentBlock::ToolCall(call) => {
                let signature = replayed_signature(same_model, call.thought_signature.as_deref());
                let mut function = Map::new();
                let args = match &call.arguments {
                    Value::Null => Value::Object(Map::new()),
                    other => other.clone(),
                };
                function.insert("args".into(), args);
                if include_id {
                    function.insert("id".into(), json!(call.id));
                }
                function.insert("name".into(), json!(call.name));
                let mut part = Map::new();
                part.insert("functionCall".into(), Value::Object(function));
                if let Some(signature) = signature {
                    part.insert("thoughtSignature".into(), json!(signature));
                }
                parts.push(Value::Object(part));
            }
            ContentBlock::Image(_) | ContentBlock::Unknown(_) => {}
        }
    }
    parts
}

/// The text of a failed HTTP response as `@google/genai` words it (`throwErrorIfNotOK`): the
/// JSON body re-serialised when the response says it is JSON, else
/// `{"error":{"message":<body>,"code":<status>,"status":<reason phrase>}}`.
pub fn http_error_text(status: u16, content_type: Option<&str>, body: &str) -> String {
    if content_type.is_some_and(|kind| kind.contains("application/json"))
        && let Ok(json) = serde_json::from_str::<Value>(body)
    {
        return to_js_string(&json);
    }
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|code| code.canonical_reason())
        .unwrap_or("");
    to_js_string(&json!({"error": {"message": body, "code": status, "status": reason}}))
}

/// Tool-call ids made up for calls that came without one (`toolCallCounter`).
static TOOL_CALL_COUNTER: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
}

/// A streamed `GenerateContentResponse`, read without building a JSON tree (strings borrowed
/// where they have no escapes). A member of another type than these fails the read, and the
/// chunk goes the tree way.
#[derive(Deserialize)]
struct ChunkView<'a> {
    #[serde(borrow, default)]
    candidates: Option<Vec<CandidateView<'a>>>,
    #[serde(rename = "usageMetadata", default)]
    usage: Option<UsageView>,
    #[serde(rename = "responseId", borrow, default)]
    response_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CandidateView<'a> {
    #[serde(borrow, default)]
    content: Option<ContentView<'a>>,
    #[serde(rename = "finishReason", borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ContentView<'a> {
    #[serde(borrow, default)]
    parts: Option<Vec<PartView<'a>>>,
}

#[derive(Deserialize)]
struct PartView<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(rename = "thoughtSignature", borrow, default)]
    thought_signature: Option<Cow<'a, str>>,
    #[serde(rename = "functionCall", borrow, default)]
    function_call: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct UsageView {
    #[serde(rename = "promptTokenCount", default)]
    prompt: Option<f64>,
    #[serde(rename = "candidatesTokenCount", default)]
    candidates: Option<f64>,
    #[serde(rename = "cachedContentTokenCount", default)]
    cached: Option<f64>,
    #[serde(rename = "thoughtsTokenCount", default)]
    thoughts: Option<f64>,
    #[serde(rename = "totalTokenCount", default)]
    total: Option<f64>,
}

/// Turns Gemini stream chunks into [`StreamEvent`]s and the assistant message (pure: feed it
/// the `data` of each SSE frame).
pub struct GoogleDecoder {
    message: AssistantMessage,
    cost: ModelCost,
    open: Option<Open>,
    now_ms: i64,
    no_finish: &'static str,
}

/// `mapStopReason` over `FinishReason`.
fn map_finish_reason(reason: &str) -> Result<StopReason, String> {
    match reason {
        "STOP" => Ok(StopReason::Stop),
        "MAX_TOKENS" | "CONTINUATION" => Ok(StopReason::Length),
        "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "SAFETY"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION"
        | "IMAGE_OTHER"
        | "RECITATION"
        | "FINISH_REASON_UNSPECIFIED"
        | "OTHER"
        | "LANGUAGE"
        | "MALFORMED_FUNCTION_CALL"
        | "UNEXPECTED_TOOL_CALL"
        | "TOO_MANY_TOOL_CALLS"
        | "NO_IMAGE" => Ok(StopReason::Error),
        other => Err(format!("Unhandled stop reason: {other}")),
    }
}

impl GoogleDecoder {
    /// Starts decoding into `message` (the empty message of [`crate::ai::new_assistant_message`]).
    pub fn new(message: AssistantMessage, model: &Model) -> Self {
        Self {
            message,
            cost: model.cost.clone(),
            open: None,
            now_ms: 0,
            no_finish: "Google stream ended without a finish reason",
        }
    }

    /// Sets the text of a stream that ended without a finish reason (Vertex words it its
    /// own way).
    pub fn with_no_finish_text(mut self, text: &'static str) -> Self {
        self.no_finish = text;
        self
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

    /// Sets the time made-up tool-call ids carry.
    pub fn set_now(&mut self, now_ms: i64) {
        self.now_ms = now_ms;
    }

    /// Processes one SSE frame: an error chunk fails the call with `@google/genai`'s text,
    /// unreadable JSON fails it, anything else is applied. Never ends the stream (`Ok(false)`):
    /// Gemini streams end with the body.
    pub fn on_frame(
        &mut self,
        data: &str,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, String> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        if let Some(applied) = self.on_common_chunk(data, out) {
            applied?;
            return Ok(false);
        }
        self.on_frame_tree(data, out)
    }

    /// [`GoogleDecoder::on_frame`] with every chunk read into a JSON tree (the general path;
    /// public so that the decoding benchmark can compare it with the typed view).
    #[doc(hidden)]
    pub fn on_frame_tree(
        &mut self,
        data: &str,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, String> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|err| format!("exception parsing stream chunk {data}. {err}"))?;
        if let Some(error) = chunk.get("error").filter(|error| error.is_object())
            && let Some(code) = error.get("code").and_then(Value::as_f64)
            && (400.0..600.0).contains(&code)
        {
            let status = match error.get("status") {
                None => "undefined".to_owned(),
                Some(Value::String(text)) => text.clone(),
                Some(other) => to_js_string(other),
            };
            return Err(format!("got status: {status}. {}", to_js_string(&chunk)));
        }
        self.on_chunk(&chunk, out)?;
        Ok(false)
    }

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

    fn on_text_part(
        &mut self,
        thinking: bool,
        signature: Option<&str>,
        text: &str,
        out: &mut VecDeque<StreamEvent>,
    ) {
        let wanted = if thinking { Open::Thinking } else { Open::Text };
        if self.open != Some(wanted) {
            self.close_block(out);
            let content_index = self.message.content.len();
            if thinking {
                self.message
                    .content
                    .push(ContentBlock::Thinking(ThinkingContent {
                        thinking: String::new(),
                        thinking_signature: None,
                        redacted: None,
                        extra: Map::new(),
                    }));
                out.push_back(StreamEvent::ThinkingStart { content_index });
            } else {
                self.message.content.push(ContentBlock::Text(TextContent {
                    text: String::new(),
                    text_signature: None,
                    extra: Map::new(),
                }));
                out.push_back(StreamEvent::TextStart { content_index });
            }
            self.open = Some(wanted);
        }
        let signature = signature.filter(|signature| !signature.is_empty());
        let content_index = self.message.content.len() - 1;
        match self.message.content.last_mut() {
            Some(ContentBlock::Thinking(block)) => {
                block.thinking.push_str(text);
                if let Some(signature) = signature {
                    block.thinking_signature = Some(signature.to_owned());
                }
                out.push_back(StreamEvent::ThinkingDelta {
                    content_index,
                    delta: text.to_owned(),
                });
            }
            Some(ContentBlock::Text(block)) => {
                block.text.push_str(text);
                if let Some(signature) = signature {
                    block.text_signature = Some(signature.to_owned());
                }
                out.push_back(StreamEvent::TextDelta {
                    content_index,
                    delta: text.to_owned(),
                });
            }
            _ => {}
        }
    }

    fn on_function_call(&mut self, part: &Value, call: &Value, out: &mut VecDeque<StreamEvent>) {
        self.close_block(out);
        let name = call.get("name").and_then(Value::as_str).unwrap_or("");
        let provided = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty());
        let duplicate = provided.is_some_and(|id| self.message.tool_calls().any(|c| c.id == id));
        let id = match provided {
            Some(id) if !duplicate => id.to_owned(),
            _ => {
                let n = TOOL_CALL_COUNTER.fetch_add(1, Ordering::Relaxed) + 1;
                let name = match call.get("name") {
                    None => "undefined".to_owned(),
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => to_js_string(other),
                };
                format!("{name}_{}_{n}", self.now_ms)
            }
        };
        let arguments = match call.get("args") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(args) => args.clone(),
        };
        let tool_call = ToolCall {
            id,
            name: name.to_owned(),
            arguments,
            arguments_error: None,
            thought_signature: part
                .get("thoughtSignature")
                .and_then(Value::as_str)
                .filter(|signature| !signature.is_empty())
                .map(str::to_owned),
            extra: Map::new(),
        };
        let content_index = self.message.content.len();
        let delta = to_js_string(&tool_call.arguments);
        self.message
            .content
            .push(ContentBlock::ToolCall(tool_call.clone()));
        out.push_back(StreamEvent::ToolCallStart { content_index });
        out.push_back(StreamEvent::ToolCallDelta {
            content_index,
            delta,
        });
        out.push_back(StreamEvent::ToolCallEnd {
            content_index,
            tool_call,
        });
    }

    /// The common chunk (text or thought parts, no `functionCall`, no `error`, every member
    /// of the expected type) read through the borrowed typed view [`ChunkView`], applied
    /// exactly as [`GoogleDecoder::on_chunk`] applies the tree. `None`: not such a chunk, so
    /// nothing was applied and the tree path decides.
    fn on_common_chunk(
        &mut self,
        data: &str,
        out: &mut VecDeque<StreamEvent>,
    ) -> Option<Result<(), String>> {
        let chunk: ChunkView<'_> = serde_json::from_str(data).ok()?;
        if chunk.error.is_some_and(|error| error.get() != "null") {
            return None;
        }
        let candidate = chunk.candidates.as_ref().and_then(|list| list.first());
        let parts = candidate
            .and_then(|candidate| candidate.content.as_ref())
            .and_then(|content| content.parts.as_deref())
            .unwrap_or(&[]);
        if parts
            .iter()
            .any(|part| part.function_call.is_some_and(|call| call.get() != "null"))
        {
            return None;
        }
        self.on_response_id(chunk.response_id.as_deref());
        for part in parts {
            if let Some(text) = &part.text {
                self.on_text_part(
                    part.thought == Some(true),
                    part.thought_signature.as_deref(),
                    text,
                    out,
                );
            }
        }
        let reason = candidate.and_then(|candidate| candidate.finish_reason.as_deref());
        if let Err(err) = self.on_finish_reason(reason) {
            return Some(Err(err));
        }
        if let Some(usage) = &chunk.usage {
            self.on_usage(
                usage.prompt,
                usage.candidates,
                usage.cached,
                usage.thoughts,
                usage.total,
            );
        }
        Some(Ok(()))
    }

    fn on_response_id(&mut self, id: Option<&str>) {
        if self
            .message
            .response_id
            .as_deref()
            .is_none_or(str::is_empty)
            && let Some(id) = id.filter(|id| !id.is_empty())
        {
            self.message.key_order.touch(AssistantKey::ResponseId);
            self.message.response_id = Some(id.to_owned());
        }
    }

    fn on_finish_reason(&mut self, reason: Option<&str>) -> Result<(), String> {
        if let Some(reason) = reason.filter(|reason| !reason.is_empty()) {
            self.message.key_order.touch(AssistantKey::RawStopReason);
            self.message.raw_stop_reason = Some(reason.to_owned());
            self.message.stop_reason = map_finish_reason(reason)?;
            if self.message.stop_reason == StopReason::Stop
                && self.message.tool_calls().next().is_some()
            {
                self.message.stop_reason = StopReason::ToolUse;
            }
        }
        Ok(())
    }

    /// `usageMetadata`'s counts (absent, not a number, negative or zero is 0).
    fn on_usage(
        &mut self,
        prompt: Option<f64>,
        candidates: Option<f64>,
        cached: Option<f64>,
        thoughts: Option<f64>,
        total: Option<f64>,
    ) {
        let n = |value: Option<f64>| match value {
            Some(n) if n.is_finite() && n > 0.0 => n as u64,
            _ => 0,
        };
        let (cached, thoughts) = (n(cached), n(thoughts));
        self.message.usage = Usage {
            input: n(prompt).saturating_sub(cached),
            output: n(candidates) + thoughts,
            cache_read: cached,
            cache_write: 0,
            reasoning: Some(thoughts),
            total_tokens: n(total),
            ..Default::default()
        };
        calculate_cost(&self.cost, &mut self.message.usage);
    }

    fn on_chunk(&mut self, chunk: &Value, out: &mut VecDeque<StreamEvent>) -> Result<(), String> {
        self.on_response_id(chunk.get("responseId").and_then(Value::as_str));
        let candidate = chunk
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|candidates| candidates.first());
        if let Some(parts) = candidate
            .and_then(|candidate| candidate.get("content"))
            .and_then(|content| content.get("parts"))
            .and_then(Value::as_array)
        {
            for part in parts {
                if let Some(text) = part.get("text").and_then(Value::as_str) {
                    let thinking = part.get("thought") == Some(&Value::Bool(true));
                    let signature = part.get("thoughtSignature").and_then(Value::as_str);
                    self.on_text_part(thinking, signature, text, out);
                }
                if let Some(call) = part.get("functionCall").filter(|call| call.is_object()) {
                    self.on_function_call(part, call, out);
                }
            }
        }
        self.on_finish_reason(
            candidate
                .and_then(|candidate| candidate.get("finishReason"))
                .and_then(Value::as_str),
        )?;
        if let Some(usage) = chunk.get("usageMetadata").filter(|usage| usage.is_object()) {
            let number = |key: &str| usage.get(key).and_then(Value::as_f64);
            self.on_usage(
                number("promptTokenCount"),
                number("candidatesTokenCount"),
                number("cachedContentTokenCount"),
                number("thoughtsTokenCount"),
                number("totalTokenCount"),
            );
        }
        Ok(())
    }

    /// The body ended: the open block is closed, then `Err` with the reference's text when no
    /// finish reason came or it is an error one.
    pub fn complete(&mut self, out: &mut VecDeque<StreamEvent>) -> Result<StopReason, String> {
        self.close_block(out);
        match self.message.stop_reason {
            StopReason::Pending => Err(self.no_finish.to_owned()),
            StopReason::Error | StopReason::Aborted => Err(match &self.message.raw_stop_reason {
                Some(raw) if !raw.is_empty() => format!("Provider stopped with: {raw}"),
                _ => "An unknown error occurred".to_owned(),
            }),
            reason => Ok(reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(id: &str) -> Model {
        crate::ai::models::builtin_models()
            .iter()
            .find(|model| model.provider == "google" && model.id == id)
            .cloned()
            .expect("a built-in Google model")
    }

    /// Decodes `frames` through `on_frame` (typed view first) or `on_frame_tree` alone.
    fn decode_all(
        frames: &[String],
        tree_only: bool,
    ) -> (Vec<StreamEvent>, Vec<Result<bool, String>>, String) {
        let model = model("gemini-3-flash-preview");
        let mut decoder = GoogleDecoder::new(crate::ai::new_assistant_message(&model, 0), &model);
        let mut out = VecDeque::new();
        let mut results = Vec::new();
        for frame in frames {
            results.push(if tree_only {
                decoder.on_frame_tree(frame, &mut out)
            } else {
                decoder.on_frame(frame, &mut out)
            });
        }
        results.push(decoder.complete(&mut out).map(|_| true));
        let message = serde_json::to_string(decoder.message()).unwrap_or_default();
        (out.into_iter().collect(), results, message)
    }

    #[test]
    fn the_typed_view_decodes_every_chunk_as_the_tree_does() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/providers");
        let mut streams: Vec<Vec<String>> = Vec::new();
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("google-") && name.ends_with(".sse") {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                streams.push(
                    text.lines()
                        .filter_map(|line| line.strip_prefix("data:"))
                        .map(str::to_owned)
                        .collect(),
                );
            }
        }
        assert!(streams.len() >= 6, "the Google fixtures");
        // Chunks at the edges of the view: members of other types, nulls, escapes, errors,
        // duplicate keys, a call next to text (with its id: made-up ids count globally),
        // several candidates, not an object.
        streams.push(
            [
                r#"{"candidates":[{"content":{"parts":[{"text":"a\n\"b\" \u00e9","thought":true,"thoughtSignature":"QUJD"}]}}],"responseId":"r1"}"#,
                r#"{"candidates":[{"content":{"parts":[{"text":"x","thought":"true"}]}}]}"#,
                r#"{"candidates":[{"content":{"parts":[{"text":null,"thought":null},{"text":"y","thoughtSignature":null}]},"finishReason":null}],"responseId":null}"#,
                r#"{"candidates":[{"content":{"parts":[{"text":"z","text":"w"}]}}]}"#,
                r#"{"candidates":[{"content":{"parts":[{"text":"t"},{"functionCall":{"id":"c1","name":"ls","args":{"p":1}}}]}}]}"#,
                r#"{"candidates":[{"content":{"parts":[{"text":"u"}]}},{"content":{"parts":[{"text":5}]}}]}"#,
                r#"{"candidates":{"0":{}},"usageMetadata":{"promptTokenCount":"7","totalTokenCount":-3}}"#,
                r#"{"candidates":[],"usageMetadata":{"promptTokenCount":70,"candidatesTokenCount":5.5,"cachedContentTokenCount":20,"thoughtsTokenCount":3,"totalTokenCount":99}}"#,
                r#"{"candidates":[{"content":{"parts":"none"},"finishReason":"STOP"}],"usageMetadata":null}"#,
                r#"[1,2]"#,
                r#"{"error":null,"candidates":[{"finishReason":""}]}"#,
                r#"{"error":{"code":503,"status":"UNAVAILABLE","message":"busy"}}"#,
            ]
            .iter()
            .map(|chunk| (*chunk).to_owned())
            .collect(),
        );
        streams.push(vec![
            r#"{"candidates":[{"content":{"parts":[{"text":"s"}]},"finishReason":"NOT_A_REASON"}]}"#
                .to_owned(),
        ]);
        for frames in &streams {
            assert_eq!(
                decode_all(frames, false),
                decode_all(frames, true),
                "{frames:?}"
            );
        }
    }

    #[test]
    fn thinking_level_models_are_told_apart_as_the_reference_does() {
        for id in [
            "gemini-3-flash-preview",
            "gemini-3.1-pro-preview",
            "gemini-4-argon",
            "gemini-flash-latest",
            "gemma-4-31b-it",
        ] {
            assert!(uses_thinking_level(&model(id)), "{id}");
        }
        for id in ["gemini-2.5-flash", "gemini-2.5-pro", "gemini-pro-latest"] {
            assert!(!uses_thinking_level(&model(id)), "{id}");
        }
    }

    #[test]
    fn signatures_are_replayed_only_when_base64_and_from_the_same_model() {
        assert!(valid_signature("QUJD"));
        assert!(valid_signature("QUI="));
        assert!(!valid_signature("QUI"));
        assert!(!valid_signature("not base64!"));
        assert!(!valid_signature("===="));
        assert_eq!(replayed_signature(false, Some("QUJD")), None);
    }

    #[test]
    fn const_becomes_a_one_value_enum_outside_name_maps() {
        let schema = json!({"type": "object", "properties": {"const": {"const": 3}, "m": {"const": "x", "type": "string"}}, "const": true});
        let rewritten = rewrite_const_as_enum(&schema, false);
        assert_eq!(
            to_js_string(&rewritten),
            r#"{"type":"object","properties":{"const":{"enum":[3]},"m":{"type":"string","enum":["x"]}},"const":true}"#
        );
    }

    #[test]
    fn ids_are_normalised_for_models_that_need_them() {
        assert_eq!(
            normalize_tool_call_id("gemini-3-flash-preview", "toolu_01A+b/c"),
            "toolu_01A_b_c"
        );
        assert_eq!(
            normalize_tool_call_id("gemini-2.5-flash", "toolu_01A+b/c"),
            "toolu_01A+b/c"
        );
        assert_eq!(
            normalize_tool_call_id("gemini-3-pro", &"a".repeat(70)).len(),
            64
        );
    }

    #[test]
    fn http_errors_are_worded_as_the_sdk_words_them() {
        assert_eq!(
            http_error_text(503, Some("text/html"), "down"),
            r#"{"error":{"message":"down","code":503,"status":"Service Unavailable"}}"#
        );
        assert_eq!(
            http_error_text(
                400,
                Some("application/json; charset=UTF-8"),
                "{\n  \"error\": {\"code\": 400}\n}"
            ),
            r#"{"error":{"code":400}}"#
        );
    }
}
