//! Request shaping shared by both protocols, as 1.6.0's pi-ai does it: the client identity
//! headers (`utils/identity.js`), the output limit fitted into the context window
//! (`clampMaxTokensToContext` over `estimateContextTokens`), thinking budgets
//! (`api/simple-options.js`), strict JSON-schema tools (`api/constrained-sampling.js`),
//! sampling parameters, and the short hash of `utils/hash.js`.
//!
//! Invariant: pure functions; lengths are JavaScript string lengths (UTF-16 code units).

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::ai::convert::LlmMessage;
use crate::ai::models::{Model, ThinkingLevel, clamp_thinking_level};
use crate::ai::transcript::get_system_message_text;
use crate::ai::{ThinkingBudgets, ToolDefinition};
use crate::model::message::{ContentBlock, StopReason, ToolDeclaration, Usage, UserContent};
use crate::support::json::to_js_string;

/// A name, home page and categories a request attributes itself to (`PI_ATTRIBUTION`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attribution {
    /// `pi`.
    pub name: String,
    /// `https://pi.dev`.
    pub url: String,
    /// `["cli-agent"]`.
    pub categories: Vec<String>,
}

impl Attribution {
    /// pi's attribution (`PI_ATTRIBUTION`).
    pub fn pi() -> Self {
        Self {
            name: "pi".to_owned(),
            url: "https://pi.dev".to_owned(),
            categories: vec!["cli-agent".to_owned()],
        }
    }
}

/// How the `User-Agent` reads (`identity.userAgent`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum UserAgent {
    /// `pi/<version> (<platform>; <runtime>; <arch>)`.
    #[default]
    Detailed,
    /// `pi`.
    Short,
    /// As given.
    Custom(String),
}

/// How requests identify themselves to providers (1.6.0's `ClientIdentity`): the agent loop
/// sends a detailed `User-Agent` and attribution to pi (off when install telemetry is off).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The `User-Agent` form.
    pub user_agent: UserAgent,
    /// The version in the detailed `User-Agent` (default: this build's version).
    pub version: Option<String>,
    /// Provider attribution headers (OpenRouter, NVIDIA, OpenCode); `None` sends none.
    pub attribution: Option<Attribution>,
}

impl Default for ClientIdentity {
    fn default() -> Self {
        Self::agent(true)
    }
}

impl ClientIdentity {
    /// The identity of agent requests: detailed `User-Agent`, attribution to pi unless
    /// `attribution` is false (setting `enableInstallTelemetry`).
    pub fn agent(attribution: bool) -> Self {
        Self {
            user_agent: UserAgent::Detailed,
            version: None,
            attribution: attribution.then(Attribution::pi),
        }
    }

    /// The `User-Agent` value (`formatUserAgent`). The runtime is named `rust` where the
    /// reference names its JavaScript runtime (`node/v22.…`).
    pub fn user_agent(&self) -> String {
        match &self.user_agent {
            UserAgent::Custom(text) => text.clone(),
            UserAgent::Short => "pi".to_owned(),
            UserAgent::Detailed => {
                let version = self
                    .version
                    .clone()
                    .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned());
                let arch = match std::env::consts::ARCH {
                    "x86_64" => "x64",
                    "aarch64" => "arm64",
                    "x86" => "ia32",
                    other => other,
                };
                let platform = match std::env::consts::OS {
                    "macos" => "darwin",
                    "windows" => "win32",
                    other => other,
                };
                format!("pi/{version} ({platform}; rust; {arch})")
            }
        }
    }
}

fn host_of(base_url: &str) -> Option<&str> {
    let rest = base_url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    Some(host.split(':').next().unwrap_or(host))
}

fn is_open_router(model: &Model) -> bool {
    model.provider == "openrouter" || model.base_url.contains("openrouter.ai")
}

fn is_open_code(model: &Model) -> bool {
    model.provider == "opencode"
        || model.provider == "opencode-go"
        || host_of(&model.base_url).is_some_and(|host| host.eq_ignore_ascii_case("opencode.ai"))
}

/// The identity headers of a request (`getIdentityHeaders`): `User-Agent` and the provider
/// attribution headers, sent below every configured header.
pub fn identity_headers(model: &Model, identity: &ClientIdentity) -> Vec<(String, String)> {
    let mut headers = vec![("User-Agent".to_owned(), identity.user_agent())];
    let Some(attribution) = &identity.attribution else {
        return headers;
    };
    if is_open_router(model) {
        headers.push(("HTTP-Referer".to_owned(), attribution.url.clone()));
        headers.push(("X-OpenRouter-Title".to_owned(), attribution.name.clone()));
        if !attribution.categories.is_empty() {
            headers.push((
                "X-OpenRouter-Categories".to_owned(),
                attribution.categories.join(","),
            ));
        }
    } else if model.provider == "nvidia"
        || host_of(&model.base_url)
            .is_some_and(|host| host.eq_ignore_ascii_case("integrate.api.nvidia.com"))
    {
        let mut chars = attribution.name.chars();
        let capitalised = chars
            .next()
            .map(|first| first.to_uppercase().chain(chars).collect::<String>())
            .unwrap_or_default();
        headers.push(("X-BILLING-INVOKE-ORIGIN".to_owned(), capitalised));
    } else if is_open_code(model) {
        headers.push(("x-opencode-client".to_owned(), attribution.name.clone()));
    }
    headers
}

/// OpenCode's per-conversation routing header (`getOpenCodeSessionHeaders`), added below the
/// auth and caller headers.
pub fn open_code_session_headers(model: &Model, session_id: Option<&str>) -> Vec<(String, String)> {
    match session_id.filter(|id| !id.is_empty()) {
        Some(id) if is_open_code(model) => vec![("x-opencode-session".to_owned(), id.to_owned())],
        _ => Vec::new(),
    }
}

/// JavaScript's `text.length`.
pub fn js_len(text: &str) -> usize {
    text.encode_utf16().count()
}

const CHARS_PER_TOKEN: f64 = 3.5;
const ESTIMATED_IMAGE_CHARS: usize = 4800;

fn estimate_text_tokens(chars: usize) -> u64 {
    (chars as f64 / CHARS_PER_TOKEN).ceil() as u64
}

fn content_chars(blocks: &[ContentBlock]) -> usize {
    blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => js_len(&text.text),
            _ => ESTIMATED_IMAGE_CHARS,
        })
        .sum()
}

fn tools_tokens<T: serde::Serialize>(tools: Option<&Vec<T>>) -> u64 {
    match tools {
        Some(tools) if !tools.is_empty() => serde_json::to_value(tools)
            .map(|value| estimate_text_tokens(js_len(&to_js_string(&value))))
            .unwrap_or(0),
        _ => 0,
    }
}

/// The token estimate of one message (`estimateMessageTokens`).
pub fn estimate_message_tokens(message: &LlmMessage) -> u64 {
    match message {
        LlmMessage::System(system) => {
            estimate_text_tokens(js_len(&get_system_message_text(system)))
                + tools_tokens(system.tools_added.as_ref())
                + tools_tokens(system.tools_removed.as_ref())
        }
        LlmMessage::User(user) => match &user.content {
            UserContent::Text(text) => estimate_text_tokens(js_len(text)),
            UserContent::Blocks(blocks) => estimate_text_tokens(content_chars(blocks)),
        },
        LlmMessage::ToolResult(result) => estimate_text_tokens(content_chars(&result.content)),
        LlmMessage::Assistant(assistant) => {
            let chars: usize = assistant
                .content
                .iter()
                .map(|block| match block {
                    ContentBlock::Text(text) => js_len(&text.text),
                    ContentBlock::Thinking(thinking) => js_len(&thinking.thinking),
                    ContentBlock::ToolCall(call) => {
                        js_len(&call.name) + js_len(&to_js_string(&call.arguments))
                    }
                    ContentBlock::Image(_) | ContentBlock::Unknown(_) => 0,
                })
                .sum();
            estimate_text_tokens(chars)
        }
    }
}

fn context_tokens(usage: &Usage) -> u64 {
    if usage.total_tokens > 0 {
        usage.total_tokens
    } else {
        usage.input + usage.output + usage.cache_read + usage.cache_write
    }
}

fn timestamp_of(message: &LlmMessage) -> i64 {
    match message {
        LlmMessage::System(system) => system.timestamp,
        LlmMessage::User(user) => user.timestamp,
        LlmMessage::Assistant(assistant) => assistant.timestamp,
        LlmMessage::ToolResult(result) => result.timestamp,
    }
}

/// The context's token estimate (`estimateContextTokens`): the last usable assistant usage
/// plus an estimate of the messages after it, else an estimate of every message.
pub fn estimate_context_tokens(messages: &[Cow<'_, LlmMessage>]) -> u64 {
    let mut latest_prefix = i64::MIN;
    let mut last_usage: Option<(u64, usize)> = None;
    for (index, message) in messages.iter().enumerate() {
        if let LlmMessage::Assistant(assistant) = &**message
            && assistant.timestamp >= latest_prefix
            && !matches!(
                assistant.stop_reason,
                StopReason::Aborted | StopReason::Error
            )
            && context_tokens(&assistant.usage) > 0
        {
            last_usage = Some((context_tokens(&assistant.usage), index));
        }
        latest_prefix = latest_prefix.max(timestamp_of(message));
    }
    match last_usage {
        Some((tokens, index)) => {
            tokens
                + messages[index + 1..]
                    .iter()
                    .map(|message| estimate_message_tokens(message))
                    .sum::<u64>()
        }
        None => messages
            .iter()
            .map(|message| estimate_message_tokens(message))
            .sum(),
    }
}

const CONTEXT_SAFETY_TOKENS: f64 = 4096.0;
const CONTEXT_SAFETY_RATIO: f64 = 0.15;
const MIN_OUTPUT_WITH_RATIO_MARGIN: f64 = 32768.0;

/// Fits an output limit into the context window, leaving room for the input being counted
/// higher than estimated (`clampMaxTokensToContext`).
pub fn clamp_max_tokens_to_context(
    model: &Model,
    messages: &[Cow<'_, LlmMessage>],
    max_tokens: u64,
) -> u64 {
    if model.context_window == 0 {
        return max_tokens.max(1);
    }
    let window = model.context_window as f64;
    let input = estimate_context_tokens(messages) as f64;
    let margin = CONTEXT_SAFETY_TOKENS.max((input * CONTEXT_SAFETY_RATIO).ceil());
    let mut room = window - input - margin;
    if room < MIN_OUTPUT_WITH_RATIO_MARGIN {
        room = MIN_OUTPUT_WITH_RATIO_MARGIN.min(window - input - CONTEXT_SAFETY_TOKENS);
    }
    let clamped = (max_tokens as f64).min(room.max(1.0));
    clamped.max(0.0) as u64
}

/// Tokens always left for the answer when a thinking budget shares the response ceiling.
pub const MIN_ANSWER_TOKENS: u64 = 1024;

/// The budget of a level (`thinkingBudgetForLevel`: `xhigh` and `max` use `high`'s).
pub fn thinking_budget_for_level(level: ThinkingLevel, budgets: &ThinkingBudgets) -> u64 {
    match level {
        ThinkingLevel::Minimal => budgets.minimal,
        ThinkingLevel::Low => budgets.low,
        ThinkingLevel::Medium => budgets.medium,
        ThinkingLevel::High | ThinkingLevel::Xhigh | ThinkingLevel::Max | ThinkingLevel::Off => {
            budgets.high
        }
    }
}

/// Caps a budget so at least [`MIN_ANSWER_TOKENS`] remain under a shared ceiling.
pub fn clamp_thinking_budget_to_answer_room(budget: u64, ceiling: u64) -> u64 {
    budget.min(ceiling.saturating_sub(MIN_ANSWER_TOKENS))
}

/// The output limit and thinking budget of a budget-thinking request
/// (`adjustMaxTokensForThinking`; `base` `None` = no caller cap).
pub fn adjust_max_tokens_for_thinking(
    base: Option<u64>,
    model_max_tokens: u64,
    level: ThinkingLevel,
    budgets: &ThinkingBudgets,
) -> (u64, u64) {
    let mut budget = thinking_budget_for_level(level, budgets);
    let max_tokens = match base {
        None => model_max_tokens,
        Some(base) => (base + budget).min(model_max_tokens),
    };
    if max_tokens <= budget {
        budget = clamp_thinking_budget_to_answer_room(budget, max_tokens);
    }
    (max_tokens, budget)
}

/// The sampling parameters of a request (`resolveSamplingParams`): the model's
/// `samplingParams`, then its `samplingParamsByThinkingLevel` entry for the clamped level.
pub fn sampling_params(model: &Model, level: ThinkingLevel) -> Option<Map<String, Value>> {
    let effective = clamp_thinking_level(model, level);
    let base = model
        .extra
        .get("samplingParams")
        .filter(|value| !value.is_null());
    let by_level = model
        .extra
        .get("samplingParamsByThinkingLevel")
        .and_then(|levels| levels.get(effective.as_str()))
        .filter(|value| !value.is_null());
    if base.is_none() && by_level.is_none() {
        return None;
    }
    let mut merged = Map::new();
    for part in [base, by_level].into_iter().flatten() {
        if let Value::Object(fields) = part {
            for (key, value) in fields {
                merged.insert(key.clone(), value.clone());
            }
        }
    }
    Some(merged)
}

/// `Object.assign(target, source)`: existing keys keep their position.
pub fn assign(target: &mut Map<String, Value>, source: Map<String, Value>) {
    for (key, value) in source {
        target.insert(key, value);
    }
}

/// 1.6.0's `shortHash`: two 32-bit multiplicative hashes of the UTF-16 code units, in base 36.
pub fn short_hash(text: &str) -> String {
    let mut h1: u32 = 0xdead_beef;
    let mut h2: u32 = 0x41c6_ce57;
    for unit in text.encode_utf16() {
        let ch = u32::from(unit);
        h1 = (h1 ^ ch).wrapping_mul(2_654_435_761);
        h2 = (h2 ^ ch).wrapping_mul(1_597_334_677);
    }
    h1 = (h1 ^ (h1 >> 16)).wrapping_mul(2_246_822_507)
        ^ (h2 ^ (h2 >> 13)).wrapping_mul(3_266_489_909);
    h2 = (h2 ^ (h2 >> 16)).wrapping_mul(2_246_822_507)
        ^ (h1 ^ (h1 >> 13)).wrapping_mul(3_266_489_909);
    format!("{}{}", base36(h2), base36(h1))
}

fn base36(mut value: u32) -> String {
    if value == 0 {
        return "0".to_owned();
    }
    let mut digits = Vec::new();
    while value > 0 {
        let digit = (value % 36) as u8;
        digits.push(if digit < 10 {
            b'0' + digit
        } else {
            b'a' + digit - 10
        });
        value /= 36;
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

/// A tool as the protocols read it: its declaration (name, description, parameters and
/// `constrainedSampling`).
pub fn tool_constrained_sampling(tool: &ToolDeclaration) -> Option<&Value> {
    tool.extra
        .get("constrainedSampling")
        .filter(|value| value.is_object())
}

/// The declaration of a request tool definition.
pub fn declaration(tool: &ToolDefinition) -> ToolDeclaration {
    crate::ai::transcript::declaration_of(tool)
}

/// Whether the tool asks for strict JSON-schema sampling only where possible
/// (`prefersJsonSchemaStrictSampling`).
pub fn prefers_json_schema_strict_sampling(tool: &ToolDeclaration) -> bool {
    tool_constrained_sampling(tool)
        .is_some_and(|config| config["type"] == "json_schema" && config["strict"] == "prefer")
}

/// Decides whether a tool is sent strict (`resolveJsonSchemaStrictSampling`): `Ok(true)` when
/// it asks for JSON-schema sampling, the transport supports strict tools and its schema has a
/// strict form; `Ok(false)` otherwise; `Err` when the tool requires strict sampling that
/// cannot be had.
pub fn resolve_json_schema_strict_sampling(
    tool: &ToolDeclaration,
    supports_strict_mode: bool,
    unsupported_keyword: Option<UnsupportedKeyword<'_>>,
) -> Result<bool, String> {
    let Some(config) = tool_constrained_sampling(tool).filter(|c| c["type"] == "json_schema")
    else {
        return Ok(false);
    };
    let required = config["strict"] == "require";
    if supports_strict_mode {
        return match make_strict_json_schema(&tool.parameters, unsupported_keyword) {
            Ok(_) => Ok(true),
            Err(reason) if required => Err(format!(
                "Tool \"{}\" requires JSON-schema constrained sampling, but {reason}.",
                tool.name
            )),
            Err(_) => Ok(false),
        };
    }
    if required {
        return Err(format!(
            "Tool \"{}\" requires JSON-schema constrained sampling, but strict tools are unsupported.",
            tool.name
        ));
    }
    Ok(false)
}

/// The parameters sent for a tool (`getJsonSchemaToolParameters`): the strict form when
/// strict, else as declared.
pub fn json_schema_tool_parameters(tool: &ToolDeclaration, strict: bool) -> Value {
    if strict {
        make_strict_json_schema(&tool.parameters, None).unwrap_or_else(|_| tool.parameters.clone())
    } else {
        tool.parameters.clone()
    }
}

/// A provider's extra test for schema keywords its strict mode rejects (`isUnsupportedKeyword`).
pub type UnsupportedKeyword<'a> = &'a dyn Fn(&str, &Value) -> bool;

const UNSUPPORTED_STRICT_SCHEMA_KEYS: &[&str] = &[
    "$ref",
    "$defs",
    "definitions",
    "allOf",
    "oneOf",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "propertyNames",
    "contains",
    "prefixItems",
    "not",
    "if",
    "then",
    "else",
];

fn is_structured(schema: &Value) -> bool {
    let Value::Object(map) = schema else {
        return false;
    };
    let has_type = |kind: &str| match map.get("type") {
        Some(Value::String(text)) => text == kind,
        Some(Value::Array(items)) => items.iter().any(|item| item == kind),
        _ => false,
    };
    has_type("object")
        || has_type("array")
        || map.get("properties").is_some()
        || map.get("items").is_some()
}

fn allows_null(schema: &Value) -> bool {
    let Value::Object(map) = schema else {
        return false;
    };
    match map.get("type") {
        Some(Value::String(text)) if text == "null" => return true,
        Some(Value::Array(items)) if items.iter().any(|item| item == "null") => return true,
        _ => {}
    }
    if map.get("const").is_some_and(Value::is_null)
        || map
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|items| items.iter().any(Value::is_null))
    {
        return true;
    }
    map.get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|variants| variants.iter().any(allows_null))
}

fn strict_node(
    schema: &mut Value,
    unsupported: Option<UnsupportedKeyword<'_>>,
) -> Result<(), String> {
    let Value::Object(map) = schema else {
        return Err("boolean schemas are unsupported".to_owned());
    };
    for key in UNSUPPORTED_STRICT_SCHEMA_KEYS {
        if map.get(*key).is_some() {
            return Err(format!("{key} schemas are unsupported"));
        }
    }
    if let Some(unsupported) = unsupported {
        for (key, value) in map.iter() {
            if unsupported(key, value) {
                return Err(format!("{key}: {} is unsupported", to_js_string(value)));
            }
        }
    }
    if map.get("type").is_none() && map.get("anyOf").is_none() && map.get("enum").is_none() {
        return Err("schemas without a type are unsupported".to_owned());
    }
    if let Some(any_of) = map.get_mut("anyOf") {
        let Value::Array(variants) = any_of else {
            return Err("anyOf must contain at least one schema".to_owned());
        };
        if variants.is_empty() {
            return Err("anyOf must contain at least one schema".to_owned());
        }
        for variant in variants.iter_mut() {
            if is_structured(variant) {
                return Err("object and array unions are unsupported".to_owned());
            }
            strict_node(variant, unsupported)?;
        }
    }
    if let Some(items) = map.get_mut("items") {
        if items.is_array() {
            return Err("tuple schemas are unsupported".to_owned());
        }
        strict_node(items, unsupported)?;
    }
    let is_object = map.get("type").and_then(Value::as_str) == Some("object");
    if map.get("properties").is_some() && !is_object {
        return Err("properties require type object".to_owned());
    }
    if !is_object {
        return Ok(());
    }
    if map
        .get("additionalProperties")
        .is_some_and(|value| value != &Value::Bool(false))
    {
        return Err("schema-valued or true additionalProperties is unsupported".to_owned());
    }
    if map
        .get("properties")
        .is_some_and(|value| !value.is_object())
    {
        return Err("object properties must be a schema map".to_owned());
    }
    let required: Vec<String> = match map.get("required") {
        None => Vec::new(),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(|item| item.as_str().map(str::to_owned))
            .collect(),
        Some(_) => return Err("object required must be a string array".to_owned()),
    };
    let names: Vec<String> = match map.get("properties") {
        Some(Value::Object(properties)) => properties.keys().cloned().collect(),
        _ => Vec::new(),
    };
    if required.iter().any(|key| !names.contains(key)) {
        return Err("required contains an unknown property".to_owned());
    }
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for (key, property) in properties.iter_mut() {
            strict_node(property, unsupported)?;
            if !required.contains(key) && !allows_null(property) {
                let original = std::mem::take(property);
                *property = serde_json::json!({"anyOf": [original, {"type": "null"}]});
            }
        }
    }
    map.insert(
        "required".to_owned(),
        Value::Array(names.into_iter().map(Value::String).collect()),
    );
    map.insert("additionalProperties".to_owned(), Value::Bool(false));
    Ok(())
}

/// The strict subset of a tool schema (`makeStrictJsonSchema`): optional properties become
/// nullable, every property required, `additionalProperties: false`; `Err` with the reason the
/// schema has no strict form.
pub fn make_strict_json_schema(
    schema: &Value,
    unsupported: Option<UnsupportedKeyword<'_>>,
) -> Result<Value, String> {
    let mut cloned = schema.clone();
    if !cloned.is_object() {
        return Err("root schema must have type object".to_owned());
    }
    strict_node(&mut cloned, unsupported)?;
    if cloned.get("type").and_then(Value::as_str) != Some("object") {
        return Err("root schema must have type object".to_owned());
    }
    Ok(cloned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn short_hash_matches_the_reference() {
        // Values from 1.6.0's `shortHash`.
        assert_eq!(short_hash(""), "k4n83c7h0j2b");
        assert_eq!(short_hash("call_1|fc_abc"), "1ovdkvd13vy6fo");
        assert_eq!(short_hash("é😀x"), "1i488u5srdge7");
    }

    #[test]
    fn strict_schemas_make_optional_properties_nullable() {
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "number"}}, "required": ["path"]});
        let strict = make_strict_json_schema(&schema, None).unwrap();
        assert_eq!(
            to_js_string(&strict),
            r#"{"type":"object","properties":{"path":{"type":"string"},"limit":{"anyOf":[{"type":"number"},{"type":"null"}]}},"required":["path","limit"],"additionalProperties":false}"#
        );
        assert!(
            make_strict_json_schema(
                &json!({"type": "object", "additionalProperties": true}),
                None
            )
            .is_err()
        );
        assert!(make_strict_json_schema(&json!({"anyOf": []}), None).is_err());
    }

    #[test]
    fn the_identity_names_pi_and_attributes_per_host() {
        let mut model: Model = serde_json::from_value(json!({
            "id": "m", "name": "m", "api": "openai-completions", "provider": "openrouter",
            "baseUrl": "https://openrouter.ai/api/v1"
        }))
        .unwrap();
        let identity = ClientIdentity::agent(true);
        let headers = identity_headers(&model, &identity);
        assert!(headers[0].1.starts_with("pi/"));
        assert_eq!(headers[1], ("HTTP-Referer".into(), "https://pi.dev".into()));
        assert_eq!(
            headers[3],
            ("X-OpenRouter-Categories".into(), "cli-agent".into())
        );
        model.provider = "nvidia".into();
        model.base_url = "https://integrate.api.nvidia.com/v1".into();
        assert_eq!(
            identity_headers(&model, &identity)[1],
            ("X-BILLING-INVOKE-ORIGIN".into(), "Pi".into())
        );
        assert_eq!(
            identity_headers(&model, &ClientIdentity::agent(false)).len(),
            1
        );
        model.provider = "x".into();
        model.base_url = "https://opencode.ai/zen/v1".into();
        assert_eq!(
            open_code_session_headers(&model, Some("s")),
            [("x-opencode-session".to_owned(), "s".to_owned())]
        );
    }
}
