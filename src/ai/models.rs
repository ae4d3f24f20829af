//! The model registry: the built-in model table, `models.json` exactly as the reference reads
//! it, thinking levels and how they clamp (`spec/models-providers-settings.md` §2–§4, §6.8).
//!
//! - The built-in table is data: `builtin_models.json`, generated from the reference
//!   package by `scripts/gen-models.mjs` and embedded at compile time (1698 models of
//!   `@earendil-works/pi-ai` 1.6.0, in the reference catalog's order, with their compat
//!   flags, cost tiers and every other field; models of APIs this layer does not speak are
//!   listed too).
//! - [`ModelRegistry::load`] takes the *text* of `models.json` (this layer reads no files;
//!   the rules are still 0.73.1's):
//!   `//` comments and trailing commas are stripped, the schema is checked (errors listed as
//!   `  - <path>: <message>`), then the semantic checks, then the merge of §4.6: provider
//!   overrides and `modelOverrides` patch built-in models, custom models replace a built-in
//!   with the same `(provider, id)` in place or are appended. Any failure discards the whole
//!   file and keeps the built-ins; the error text is kept for the caller to show.
//! - Request-time data (`apiKey`, `headers`, `authHeader` of providers; per-model headers) is
//!   kept unresolved here; `ai::auth` resolves it when a request is made.
//!
//! Invariants: no I/O; the registry order is the reference's (built-in providers in table
//! order, then new custom models in file order); a broken `models.json` never loses the
//! built-ins.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::support::json::to_js_string;

/// Prices in USD per million tokens.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCost {
    /// Input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Cache reads.
    pub cache_read: f64,
    /// Cache writes.
    pub cache_write: f64,
    /// 1.6.0: other prices above an input size (`tiers`; the tier with the highest threshold
    /// below the request's input applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiers: Option<Vec<CostTier>>,
}

/// Prices that apply above an input size (1.6.0's `cost.tiers[]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CostTier {
    /// The tier applies when input + cache read + cache write tokens exceed this.
    pub input_tokens_above: f64,
    /// Input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Cache reads.
    pub cache_read: f64,
    /// Cache writes.
    pub cache_write: f64,
}

/// One model record (built-in or custom); identity is `(provider, id)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Model {
    /// Sent as `model` on the wire.
    pub id: String,
    /// Display label, also searched by pattern matching.
    pub name: String,
    /// Wire protocol (`openai-completions`, `anthropic-messages`, …; any string).
    pub api: String,
    /// Provider key (also the `auth.json` key).
    pub provider: String,
    /// Endpoint root.
    pub base_url: String,
    /// Whether the model can think.
    #[serde(default)]
    pub reasoning: bool,
    /// Per-level provider value (string) or `null` for an unsupported level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level_map: Option<Map<String, Value>>,
    /// `"text"` and optionally `"image"`.
    #[serde(default)]
    pub input: Vec<String>,
    /// Prices.
    #[serde(default)]
    pub cost: ModelCost,
    /// Context window in tokens.
    #[serde(default)]
    pub context_window: u64,
    /// Output limit in tokens.
    #[serde(default)]
    pub max_tokens: u64,
    /// Extra request headers of built-in models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Map<String, Value>>,
    /// Compatibility flags, carried as written (typed views in `openai`/`anthropic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compat: Option<Map<String, Value>>,
    /// Fields this layer does not interpret, carried as written (1.6.0's `type`,
    /// `inputLimits`, `promptCache`, `samplingParams`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Model {
    /// Whether the model accepts image input.
    pub fn accepts_images(&self) -> bool {
        self.input.iter().any(|kind| kind == "image")
    }

    /// Returns `provider/id`.
    pub fn reference(&self) -> String {
        format!("{}/{}", self.provider, self.id)
    }

    /// Returns the thinking-level map entry for `level`.
    pub fn level_mapping(&self, level: ThinkingLevel) -> LevelMapping<'_> {
        match self
            .thinking_level_map
            .as_ref()
            .and_then(|map| map.get(level.as_str()))
        {
            None => LevelMapping::Absent,
            Some(Value::Null) => LevelMapping::Unsupported,
            Some(Value::String(value)) => LevelMapping::Value(value),
            // The schema allows only strings and null; anything else reads as absent.
            Some(_) => LevelMapping::Absent,
        }
    }

    /// Returns the compat flag `key` when it is a boolean.
    pub fn compat_bool(&self, key: &str) -> Option<bool> {
        self.compat.as_ref()?.get(key)?.as_bool()
    }

    /// Returns the compat flag `key` when it is a string.
    pub fn compat_str(&self, key: &str) -> Option<&str> {
        self.compat.as_ref()?.get(key)?.as_str()
    }

    /// Returns the compat value `key` as written.
    pub fn compat_value(&self, key: &str) -> Option<&Value> {
        self.compat.as_ref()?.get(key)
    }
}

/// What a model's `thinkingLevelMap` says about one level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LevelMapping<'a> {
    /// No entry: the provider default.
    Absent,
    /// `null`: the level is not supported.
    Unsupported,
    /// The provider's value for the level.
    Value(&'a str),
}

/// A thinking level, in the reference's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    /// No thinking.
    Off,
    /// Minimal.
    Minimal,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Extra high (only where the model maps it).
    Xhigh,
    /// 1.6.0: the maximum effort (only where the model maps it).
    Max,
}

impl ThinkingLevel {
    /// Every level, lowest first.
    pub const ALL: [ThinkingLevel; 7] = [
        Self::Off,
        Self::Minimal,
        Self::Low,
        Self::Medium,
        Self::High,
        Self::Xhigh,
        Self::Max,
    ];

    /// Returns the level's name as the reference writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Minimal => "minimal",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Xhigh => "xhigh",
            Self::Max => "max",
        }
    }

    /// Parses a level name (exact, lower case, as the reference's `isValidThinkingLevel`).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|level| level.as_str() == text)
    }

    fn index(self) -> usize {
        Self::ALL
            .iter()
            .position(|level| *level == self)
            .unwrap_or(0)
    }
}

/// Returns the levels a model supports (§6.8, 1.6.0's `getSupportedThinkingLevels`): only
/// `off` without reasoning; otherwise every level not mapped to `null`, and `xhigh` and `max`
/// only when mapped.
pub fn supported_thinking_levels(model: &Model) -> Vec<ThinkingLevel> {
    if !model.reasoning {
        return vec![ThinkingLevel::Off];
    }
    ThinkingLevel::ALL
        .into_iter()
        .filter(|level| match model.level_mapping(*level) {
            LevelMapping::Unsupported => false,
            LevelMapping::Absent => !matches!(level, ThinkingLevel::Xhigh | ThinkingLevel::Max),
            LevelMapping::Value(_) => true,
        })
        .collect()
}

/// Clamps a requested level to the model (§6.8): kept if supported, else the first supported
/// level above it, else the nearest below, else the first supported.
pub fn clamp_thinking_level(model: &Model, level: ThinkingLevel) -> ThinkingLevel {
    let available = supported_thinking_levels(model);
    if available.contains(&level) {
        return level;
    }
    let requested = level.index();
    let above = ThinkingLevel::ALL[requested..]
        .iter()
        .find(|candidate| available.contains(candidate));
    let below = ThinkingLevel::ALL[..requested]
        .iter()
        .rev()
        .find(|candidate| available.contains(candidate));
    above
        .or(below)
        .copied()
        .or_else(|| available.first().copied())
        .unwrap_or(ThinkingLevel::Off)
}

/// Returns the usage cost of `tokens` at the model's prices, computed as 1.6.0's
/// `calculateCost` does: the tier with the highest threshold below input + cache read + cache
/// write applies; `price / 1e6 × tokens` per kind, one-hour cache writes at twice the input
/// price; the sum in that order; `totalFromProvider: false`.
pub fn calculate_cost(cost: &ModelCost, usage: &mut crate::model::message::Usage) {
    let input_tokens = (usage.input + usage.cache_read + usage.cache_write) as f64;
    let (mut input, mut output, mut cache_read, mut cache_write) =
        (cost.input, cost.output, cost.cache_read, cost.cache_write);
    let mut matched = -1.0;
    for tier in cost.tiers.iter().flatten() {
        if input_tokens > tier.input_tokens_above && tier.input_tokens_above > matched {
            (input, output, cache_read, cache_write) =
                (tier.input, tier.output, tier.cache_read, tier.cache_write);
            matched = tier.input_tokens_above;
        }
    }
    let long_write = usage.cache_write_1h.unwrap_or(0) as f64;
    let short_write = usage.cache_write as f64 - long_write;
    usage.cost.input = (input / 1_000_000.0) * usage.input as f64;
    usage.cost.output = (output / 1_000_000.0) * usage.output as f64;
    usage.cost.cache_read = (cache_read / 1_000_000.0) * usage.cache_read as f64;
    usage.cost.cache_write = (cache_write * short_write + input * 2.0 * long_write) / 1_000_000.0;
    usage.cost.total =
        usage.cost.input + usage.cost.output + usage.cost.cache_read + usage.cost.cache_write;
    usage.cost.total_from_provider = Some(false);
}

#[derive(Deserialize)]
struct BuiltinFile {
    models: Vec<Model>,
}

static BUILTIN: LazyLock<Vec<Model>> = LazyLock::new(|| {
    // The embedded file is generated and checked by a unit test; a parse failure there would
    // show up as an empty table in that test, never as a panic here.
    serde_json::from_str::<BuiltinFile>(include_str!("builtin_models.json"))
        .map(|file| file.models)
        .unwrap_or_default()
});

/// Returns the built-in model table in the reference registry's order.
pub fn builtin_models() -> &'static [Model] {
    &BUILTIN
}

/// Returns the built-in provider keys in registry order.
pub fn builtin_providers() -> Vec<&'static str> {
    let mut seen = HashSet::new();
    builtin_models()
        .iter()
        .filter(|model| seen.insert(model.provider.as_str()))
        .map(|model| model.provider.as_str())
        .collect()
}

/// Request-time configuration of a provider from `models.json` (values unresolved: a literal,
/// a `$NAME`/`${NAME}` template, or `!command`; see [`crate::ai::auth::resolve_config_value`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderRequestConfig {
    /// `apiKey` value form.
    pub api_key: Option<String>,
    /// `headers`, name → value form, in file order.
    pub headers: Option<Vec<(String, String)>>,
    /// `authHeader`: send `Authorization: Bearer <key>`.
    pub auth_header: bool,
}

/// All models (built-in plus `models.json`), and the request-time configuration that
/// `models.json` adds.
#[derive(Clone, Debug, Default)]
pub struct ModelRegistry {
    models: Vec<Model>,
    provider_requests: HashMap<String, ProviderRequestConfig>,
    model_headers: HashMap<(String, String), Vec<(String, String)>>,
    load_error: Option<String>,
}

impl ModelRegistry {
    /// Returns the registry of built-in models only.
    pub fn builtin() -> Self {
        Self {
            models: builtin_models().to_vec(),
            ..Self::default()
        }
    }

    /// Builds the registry from the text of `models.json` (`None` when the file does not
    /// exist). `path` only names the file in error texts. Never fails: a broken file is
    /// reported by [`Self::error`] and only the built-ins are kept.
    pub fn load(models_json: Option<&str>, path: &str) -> Self {
        Self::load_over(builtin_models(), models_json, path)
    }

    /// [`Self::load`] over another built-in table (the tests of the `models.json` rules run
    /// them over the table they were recorded with).
    pub fn load_over(builtins: &[Model], models_json: Option<&str>, path: &str) -> Self {
        let base = || Self {
            models: builtins.to_vec(),
            ..Self::default()
        };
        let Some(text) = models_json else {
            return base();
        };
        match parse_models_json(text, path, builtins) {
            Ok(custom) => custom.merge(builtins),
            Err(error) => Self {
                load_error: Some(error),
                ..base()
            },
        }
    }

    /// Returns the built-in registry with a load error to report (a `models.json` that
    /// exists but cannot be read).
    pub fn failed(error: String) -> Self {
        Self {
            load_error: Some(error),
            ..Self::builtin()
        }
    }

    /// Returns a registry over exactly these models (for tests and extensions).
    pub fn from_models(models: Vec<Model>) -> Self {
        Self {
            models,
            ..Self::default()
        }
    }

    /// Returns every model in registry order.
    pub fn all(&self) -> &[Model] {
        &self.models
    }

    /// Returns the model `(provider, id)`.
    pub fn find(&self, provider: &str, id: &str) -> Option<&Model> {
        self.models
            .iter()
            .find(|model| model.provider == provider && model.id == id)
    }

    /// Returns the text of the last `models.json` failure (the reference's `getError`).
    pub fn error(&self) -> Option<&str> {
        self.load_error.as_deref()
    }

    /// Returns the request configuration `models.json` gives a provider.
    pub fn provider_request_config(&self, provider: &str) -> Option<&ProviderRequestConfig> {
        self.provider_requests.get(provider)
    }

    /// Returns the per-model headers of a custom model or a `modelOverrides` entry.
    pub fn model_headers(&self, provider: &str, id: &str) -> Option<&[(String, String)]> {
        self.model_headers
            .get(&(provider.to_owned(), id.to_owned()))
            .map(Vec::as_slice)
    }

    /// Returns the provider keys present, in registry order.
    pub fn providers(&self) -> Vec<&str> {
        let mut seen = HashSet::new();
        self.models
            .iter()
            .filter(|model| seen.insert(model.provider.as_str()))
            .map(|model| model.provider.as_str())
            .collect()
    }

    /// Adds or replaces a model (same `(provider, id)` replaced in place), as an extension's
    /// custom model does.
    pub fn upsert(&mut self, model: Model) {
        match self
            .models
            .iter_mut()
            .find(|existing| existing.provider == model.provider && existing.id == model.id)
        {
            Some(existing) => *existing = model,
            None => self.models.push(model),
        }
    }
}

/// Removes `//` line comments and trailing commas before `}`/`]`, leaving string literals
/// untouched (the reference's `stripJsonComments`; block comments are not supported).
pub fn strip_json_comments(text: &str) -> String {
    static COMMENTS: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r#""(?:\\.|[^"\\])*"|//[^\n]*"#).ok());
    static TRAILING: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r#""(?:\\.|[^"\\])*"|,(\s*[}\]])"#).ok());
    let (Some(comments), Some(trailing)) = (COMMENTS.as_ref(), TRAILING.as_ref()) else {
        return text.to_owned();
    };
    let without_comments = comments.replace_all(text, |caps: &regex::Captures<'_>| {
        let matched = &caps[0];
        if matched.starts_with('"') {
            matched.to_owned()
        } else {
            String::new()
        }
    });
    trailing
        .replace_all(&without_comments, |caps: &regex::Captures<'_>| {
            match caps.get(1) {
                Some(tail) => tail.as_str().to_owned(),
                None => caps[0].to_owned(),
            }
        })
        .into_owned()
}

/// The validated content of `models.json`.
struct CustomConfig {
    providers: Vec<(String, Map<String, Value>)>,
}

fn parse_models_json(text: &str, path: &str, builtins: &[Model]) -> Result<CustomConfig, String> {
    let value: Value = serde_json::from_str(&strip_json_comments(text))
        .map_err(|err| format!("Failed to parse models.json: {err}\n\nFile: {path}"))?;
    let mut errors = Vec::new();
    validate_root(&value, &mut errors);
    if !errors.is_empty() {
        let list = errors
            .iter()
            .map(|(path, message)| format!("  - {path}: {message}"))
            .collect::<Vec<_>>()
            .join("\n");
        return Err(format!(
            "Invalid models.json schema:\n{list}\n\nFile: {path}"
        ));
    }
    let providers = value
        .get("providers")
        .and_then(Value::as_object)
        .map(|providers| {
            providers
                .iter()
                .filter_map(|(name, config)| Some((name.clone(), config.as_object()?.clone())))
                .collect()
        })
        .unwrap_or_default();
    let config = CustomConfig { providers };
    validate_semantics(&config, builtins)
        .map_err(|err| format!("Failed to load models.json: {err}\n\nFile: {path}"))?;
    Ok(config)
}

type Errors = Vec<(String, String)>;

fn join_path(base: &str, key: &str) -> String {
    if base.is_empty() {
        key.to_owned()
    } else {
        format!("{base}.{key}")
    }
}

fn display_path(path: &str) -> String {
    if path.is_empty() {
        "root".to_owned()
    } else {
        path.to_owned()
    }
}

fn expect_string(value: &Value, path: &str, min_len: bool, errors: &mut Errors) {
    match value {
        Value::String(text) if min_len && text.is_empty() => errors.push((
            display_path(path),
            "must not have fewer than 1 characters".into(),
        )),
        Value::String(_) => {}
        _ => errors.push((display_path(path), "must be string".into())),
    }
}

fn expect_kind(value: &Value, path: &str, kind: &str, errors: &mut Errors) -> bool {
    let ok = match kind {
        "boolean" => value.is_boolean(),
        "number" => value.is_number(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        _ => true,
    };
    if !ok {
        errors.push((display_path(path), format!("must be {kind}")));
    }
    ok
}

fn validate_root(value: &Value, errors: &mut Errors) {
    let Some(root) = value.as_object() else {
        errors.push(("root".into(), "must be object".into()));
        return;
    };
    let Some(providers) = root.get("providers") else {
        errors.push((
            "providers".into(),
            "must have required properties providers".into(),
        ));
        return;
    };
    if !expect_kind(providers, "providers", "object", errors) {
        return;
    }
    for (name, provider) in providers.as_object().into_iter().flatten() {
        validate_provider(provider, &join_path("providers", name), errors);
    }
}

fn validate_string_record(value: &Value, path: &str, errors: &mut Errors) {
    if !expect_kind(value, path, "object", errors) {
        return;
    }
    for (key, item) in value.as_object().into_iter().flatten() {
        expect_string(item, &join_path(path, key), false, errors);
    }
}

fn validate_thinking_map(value: &Value, path: &str, errors: &mut Errors) {
    if !expect_kind(value, path, "object", errors) {
        return;
    }
    for (key, item) in value.as_object().into_iter().flatten() {
        if ThinkingLevel::parse(key).is_some() && !(item.is_string() || item.is_null()) {
            errors.push((join_path(path, key), "must be string".into()));
            errors.push((join_path(path, key), "must be null".into()));
            errors.push((join_path(path, key), "must match a schema in anyOf".into()));
        }
    }
}

fn validate_input(value: &Value, path: &str, errors: &mut Errors) {
    if !expect_kind(value, path, "array", errors) {
        return;
    }
    for (idx, item) in value.as_array().into_iter().flatten().enumerate() {
        if !matches!(item.as_str(), Some("text" | "image")) {
            let item_path = join_path(path, &idx.to_string());
            errors.push((item_path.clone(), "must be equal to constant".into()));
            errors.push((item_path.clone(), "must be equal to constant".into()));
            errors.push((item_path, "must match a schema in anyOf".into()));
        }
    }
}

fn validate_cost(value: &Value, path: &str, all_required: bool, errors: &mut Errors) {
    if !expect_kind(value, path, "object", errors) {
        return;
    }
    let keys = ["input", "output", "cacheRead", "cacheWrite"];
    let missing: Vec<&str> = keys
        .iter()
        .copied()
        .filter(|key| value.get(key).is_none())
        .collect();
    if all_required && !missing.is_empty() {
        errors.push((
            join_path(path, missing[0]),
            format!("must have required properties {}", missing.join(", ")),
        ));
    }
    for key in keys {
        if let Some(item) = value.get(key) {
            expect_kind(item, &join_path(path, key), "number", errors);
        }
    }
}

fn validate_compat(value: &Value, path: &str, errors: &mut Errors) {
    if !expect_kind(value, path, "object", errors) {
        return;
    }
    // The schema is a union of three all-optional object shapes that tolerate unknown keys,
    // so only a key shared by all three can fail: `supportsLongCacheRetention`.
    if let Some(item) = value.get("supportsLongCacheRetention") {
        expect_kind(
            item,
            &join_path(path, "supportsLongCacheRetention"),
            "boolean",
            errors,
        );
    }
}

fn validate_model_fields(
    model: &Map<String, Value>,
    path: &str,
    is_override: bool,
    errors: &mut Errors,
) {
    for (key, item) in model {
        let item_path = join_path(path, key);
        match key.as_str() {
            "id" if !is_override => expect_string(item, &item_path, true, errors),
            "name" => expect_string(item, &item_path, true, errors),
            "api" | "baseUrl" if !is_override => expect_string(item, &item_path, true, errors),
            "reasoning" => {
                expect_kind(item, &item_path, "boolean", errors);
            }
            "thinkingLevelMap" => validate_thinking_map(item, &item_path, errors),
            "input" => validate_input(item, &item_path, errors),
            "cost" => validate_cost(item, &item_path, !is_override, errors),
            "contextWindow" | "maxTokens" => {
                expect_kind(item, &item_path, "number", errors);
            }
            "headers" => validate_string_record(item, &item_path, errors),
            "compat" => validate_compat(item, &item_path, errors),
            _ => {}
        }
    }
}

fn validate_provider(value: &Value, path: &str, errors: &mut Errors) {
    let Some(provider) = value.as_object() else {
        errors.push((display_path(path), "must be object".into()));
        return;
    };
    for (key, item) in provider {
        let item_path = join_path(path, key);
        match key.as_str() {
            "name" | "baseUrl" | "apiKey" | "api" => expect_string(item, &item_path, true, errors),
            "headers" => validate_string_record(item, &item_path, errors),
            "compat" => validate_compat(item, &item_path, errors),
            "authHeader" => {
                expect_kind(item, &item_path, "boolean", errors);
            }
            "models" => validate_models(item, &item_path, errors),
            "modelOverrides" => validate_overrides(item, &item_path, errors),
            _ => {}
        }
    }
}

fn validate_models(item: &Value, path: &str, errors: &mut Errors) {
    if !expect_kind(item, path, "array", errors) {
        return;
    }
    for (idx, model) in item.as_array().into_iter().flatten().enumerate() {
        let model_path = join_path(path, &idx.to_string());
        match model.as_object() {
            Some(fields) => {
                if !fields.contains_key("id") {
                    errors.push((
                        join_path(&model_path, "id"),
                        "must have required properties id".into(),
                    ));
                }
                validate_model_fields(fields, &model_path, false, errors);
            }
            None => errors.push((model_path, "must be object".into())),
        }
    }
}

fn validate_overrides(item: &Value, path: &str, errors: &mut Errors) {
    if !expect_kind(item, path, "object", errors) {
        return;
    }
    for (id, entry) in item.as_object().into_iter().flatten() {
        let entry_path = join_path(path, id);
        match entry.as_object() {
            Some(fields) => validate_model_fields(fields, &entry_path, true, errors),
            None => errors.push((entry_path, "must be object".into())),
        }
    }
}

fn str_field<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

fn models_of(config: &Map<String, Value>) -> &[Value] {
    config
        .get("models")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn validate_semantics(config: &CustomConfig, builtins: &[Model]) -> Result<(), String> {
    let builtin: HashSet<&str> = builtins
        .iter()
        .map(|model| model.provider.as_str())
        .collect();
    for (name, provider) in &config.providers {
        let is_builtin = builtin.contains(name.as_str());
        let has_provider_api = str_field(provider, "api").is_some();
        let models = models_of(provider);
        let has_overrides = provider
            .get("modelOverrides")
            .and_then(Value::as_object)
            .is_some_and(|map| !map.is_empty());
        if models.is_empty() {
            if str_field(provider, "baseUrl").is_none()
                && provider.get("headers").is_none()
                && provider.get("compat").is_none()
                && !has_overrides
            {
                return Err(format!(
                    "Provider {name}: must specify \"baseUrl\", \"headers\", \"compat\", \"modelOverrides\", or \"models\"."
                ));
            }
        } else if !is_builtin {
            if str_field(provider, "baseUrl").is_none() {
                return Err(format!(
                    "Provider {name}: \"baseUrl\" is required when defining custom models."
                ));
            }
            if str_field(provider, "apiKey").is_none() {
                return Err(format!(
                    "Provider {name}: \"apiKey\" is required when defining custom models."
                ));
            }
        }
        for model in models {
            let id = model.get("id").and_then(Value::as_str).unwrap_or("");
            let has_model_api = model.get("api").and_then(Value::as_str).is_some();
            if !has_provider_api && !has_model_api && !is_builtin {
                return Err(format!(
                    "Provider {name}, model {id}: no \"api\" specified. Set at provider or model level."
                ));
            }
            if id.is_empty() {
                return Err(format!("Provider {name}: model missing \"id\""));
            }
            for (key, label) in [
                ("contextWindow", "contextWindow"),
                ("maxTokens", "maxTokens"),
            ] {
                if let Some(number) = model.get(key).and_then(Value::as_f64)
                    && number <= 0.0
                {
                    return Err(format!("Provider {name}, model {id}: invalid {label}"));
                }
            }
        }
    }
    Ok(())
}

/// `{...base, ...override}` with the two routing objects merged one level deeper (the
/// reference's `mergeCompat`).
pub fn merge_compat(
    base: Option<&Map<String, Value>>,
    overrides: Option<&Map<String, Value>>,
) -> Option<Map<String, Value>> {
    let Some(overrides) = overrides else {
        return base.cloned();
    };
    let mut merged = base.cloned().unwrap_or_default();
    for (key, value) in overrides {
        merged.insert(key.clone(), value.clone());
    }
    for key in ["openRouterRouting", "vercelGatewayRouting"] {
        let base_part = base.and_then(|map| map.get(key));
        let over_part = overrides.get(key);
        if base_part.is_some() || over_part.is_some() {
            let mut routing = Map::new();
            for part in [base_part, over_part].into_iter().flatten() {
                if let Value::Object(fields) = part {
                    for (field, value) in fields {
                        routing.insert(field.clone(), value.clone());
                    }
                }
            }
            merged.insert(key.to_owned(), Value::Object(routing));
        }
    }
    Some(merged)
}

fn number_u64(value: &Value) -> Option<u64> {
    value.as_f64().map(|number| number.max(0.0) as u64)
}

fn string_list(value: &Value) -> Option<Vec<String>> {
    value.as_array().map(|items| {
        items
            .iter()
            .filter_map(|item| item.as_str().map(str::to_owned))
            .collect()
    })
}

fn header_list(value: Option<&Value>) -> Option<Vec<(String, String)>> {
    let map = value?.as_object()?;
    Some(
        map.iter()
            .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
            .collect(),
    )
}

/// Applies a `modelOverrides` entry (the reference's `applyModelOverride`).
fn apply_model_override(model: &Model, entry: &Map<String, Value>) -> Model {
    let mut result = model.clone();
    if let Some(name) = str_field(entry, "name") {
        result.name = name.to_owned();
    }
    if let Some(reasoning) = entry.get("reasoning").and_then(Value::as_bool) {
        result.reasoning = reasoning;
    }
    if let Some(Value::Object(map)) = entry.get("thinkingLevelMap") {
        let mut merged = model.thinking_level_map.clone().unwrap_or_default();
        for (key, value) in map {
            merged.insert(key.clone(), value.clone());
        }
        result.thinking_level_map = Some(merged);
    }
    if let Some(input) = entry.get("input").and_then(string_list) {
        result.input = input;
    }
    if let Some(window) = entry.get("contextWindow").and_then(number_u64) {
        result.context_window = window;
    }
    if let Some(max) = entry.get("maxTokens").and_then(number_u64) {
        result.max_tokens = max;
    }
    if let Some(Value::Object(cost)) = entry.get("cost") {
        let pick = |key: &str, old: f64| cost.get(key).and_then(Value::as_f64).unwrap_or(old);
        result.cost = ModelCost {
            input: pick("input", model.cost.input),
            output: pick("output", model.cost.output),
            cache_read: pick("cacheRead", model.cost.cache_read),
            cache_write: pick("cacheWrite", model.cost.cache_write),
            tiers: model.cost.tiers.clone(),
        };
    }
    result.compat = merge_compat(
        model.compat.as_ref(),
        entry.get("compat").and_then(Value::as_object),
    );
    result
}

/// A provider entry's `baseUrl` and `compat`, applied to its built-in models.
type ProviderOverride<'a> = (Option<String>, Option<&'a Map<String, Value>>);

impl CustomConfig {
    fn merge(self, builtins: &[Model]) -> ModelRegistry {
        let mut registry = ModelRegistry::default();
        let mut provider_overrides: HashMap<&str, ProviderOverride<'_>> = HashMap::new();
        let mut model_overrides: HashMap<&str, &Map<String, Value>> = HashMap::new();
        for (name, provider) in &self.providers {
            let base_url = str_field(provider, "baseUrl").map(str::to_owned);
            let compat = provider.get("compat").and_then(Value::as_object);
            if base_url.is_some() || compat.is_some() {
                provider_overrides.insert(name, (base_url, compat));
            }
            let request = ProviderRequestConfig {
                api_key: str_field(provider, "apiKey").map(str::to_owned),
                headers: header_list(provider.get("headers")),
                auth_header: provider
                    .get("authHeader")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            };
            if request.api_key.is_some() || request.headers.is_some() || request.auth_header {
                registry.provider_requests.insert(name.clone(), request);
            }
            if let Some(Value::Object(overrides)) = provider.get("modelOverrides") {
                model_overrides.insert(name, overrides);
                for (id, entry) in overrides {
                    registry.store_model_headers(name, id, entry.get("headers"));
                }
            }
        }

        // Built-ins, patched by provider overrides and modelOverrides.
        for model in builtins {
            let mut model = model.clone();
            if let Some((base_url, compat)) = provider_overrides.get(model.provider.as_str()) {
                if let Some(base_url) = base_url {
                    model.base_url = base_url.clone();
                }
                model.compat = merge_compat(model.compat.as_ref(), *compat);
            }
            if let Some(entry) = model_overrides
                .get(model.provider.as_str())
                .and_then(|overrides| overrides.get(&model.id))
                .and_then(Value::as_object)
            {
                model = apply_model_override(&model, entry);
            }
            registry.models.push(model);
        }

        // Custom models, upserted by (provider, id).
        for model in self.custom_models(&mut registry, builtins) {
            registry.upsert(model);
        }
        registry
    }

    fn custom_models(&self, registry: &mut ModelRegistry, builtins: &[Model]) -> Vec<Model> {
        let mut models = Vec::new();
        for (name, provider) in &self.providers {
            let defs = models_of(provider);
            if defs.is_empty() {
                continue;
            }
            let builtin_default = builtins.iter().find(|model| &model.provider == name);
            for def in defs.iter().filter_map(Value::as_object) {
                let Some(id) = str_field(def, "id") else {
                    continue;
                };
                let api = str_field(def, "api")
                    .or_else(|| str_field(provider, "api"))
                    .or_else(|| builtin_default.map(|model| model.api.as_str()));
                let Some(api) = api else {
                    continue;
                };
                let base_url = str_field(def, "baseUrl")
                    .or_else(|| str_field(provider, "baseUrl"))
                    .or_else(|| builtin_default.map(|model| model.base_url.as_str()));
                let Some(base_url) = base_url else {
                    continue;
                };
                let compat = merge_compat(
                    provider.get("compat").and_then(Value::as_object),
                    def.get("compat").and_then(Value::as_object),
                );
                registry.store_model_headers(name, id, def.get("headers"));
                let cost = match def.get("cost") {
                    Some(Value::Object(cost)) => {
                        let pick = |key: &str| cost.get(key).and_then(Value::as_f64).unwrap_or(0.0);
                        ModelCost {
                            input: pick("input"),
                            output: pick("output"),
                            cache_read: pick("cacheRead"),
                            cache_write: pick("cacheWrite"),
                            tiers: None,
                        }
                    }
                    _ => ModelCost::default(),
                };
                models.push(Model {
                    id: id.to_owned(),
                    name: str_field(def, "name").unwrap_or(id).to_owned(),
                    api: api.to_owned(),
                    provider: name.clone(),
                    base_url: base_url.to_owned(),
                    reasoning: def
                        .get("reasoning")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    thinking_level_map: def
                        .get("thinkingLevelMap")
                        .and_then(Value::as_object)
                        .cloned(),
                    input: def
                        .get("input")
                        .and_then(string_list)
                        .unwrap_or_else(|| vec!["text".to_owned()]),
                    cost,
                    context_window: def
                        .get("contextWindow")
                        .and_then(number_u64)
                        .unwrap_or(128_000),
                    max_tokens: def.get("maxTokens").and_then(number_u64).unwrap_or(16_384),
                    headers: None,
                    compat,
                    extra: Map::new(),
                });
            }
        }
        models
    }
}

impl ModelRegistry {
    fn store_model_headers(&mut self, provider: &str, id: &str, headers: Option<&Value>) {
        let key = (provider.to_owned(), id.to_owned());
        match header_list(headers) {
            Some(list) if !list.is_empty() => {
                self.model_headers.insert(key, list);
            }
            _ => {
                self.model_headers.remove(&key);
            }
        }
    }
}

/// Returns a model as the reference serialises it (for `--list-models --json` style output
/// and tests).
pub fn model_json(model: &Model) -> String {
    serde_json::to_value(model)
        .map(|value| to_js_string(&value))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_is_the_reference_table() {
        let models = builtin_models();
        assert_eq!(models.len(), 1698);
        let sonnet = models
            .iter()
            .find(|model| model.provider == "anthropic" && model.id == "claude-sonnet-4-5")
            .unwrap();
        assert!(sonnet.reasoning);
        assert_eq!(sonnet.input, ["text", "image"]);
        assert_eq!(
            sonnet.cost,
            ModelCost {
                input: 3.0,
                output: 15.0,
                cache_read: 0.3,
                cache_write: 3.75,
                tiers: None,
            }
        );
        assert_eq!(sonnet.compat_bool("supportsStrictTools"), Some(true));
        assert_eq!(sonnet.extra["type"], "chat");
        assert_eq!(
            (sonnet.context_window, sonnet.max_tokens),
            (200_000, 64_000)
        );
        assert_eq!(
            models
                .iter()
                .filter(|model| model.provider == "anthropic")
                .count(),
            18
        );
        assert_eq!(builtin_providers()[0], "amazon-bedrock");
    }

    #[test]
    fn comments_and_trailing_commas_are_stripped_outside_strings() {
        let text = "{\"a\": \"http://x//y\", // note\n \"b\": [1, 2,], }";
        let stripped = strip_json_comments(text);
        let value: Value = serde_json::from_str(&stripped).unwrap();
        assert_eq!(value, serde_json::json!({"a": "http://x//y", "b": [1, 2]}));
        assert_eq!(strip_json_comments(r#"{"s": "a,]"}"#), r#"{"s": "a,]"}"#);
    }

    #[test]
    fn clamping_follows_the_reference_examples() {
        let mut model = builtin_models()[0].clone();
        model.reasoning = true;
        model.thinking_level_map = None;
        assert_eq!(
            supported_thinking_levels(&model),
            [
                ThinkingLevel::Off,
                ThinkingLevel::Minimal,
                ThinkingLevel::Low,
                ThinkingLevel::Medium,
                ThinkingLevel::High
            ]
        );
        assert_eq!(
            clamp_thinking_level(&model, ThinkingLevel::Xhigh),
            ThinkingLevel::High
        );
        let map = serde_json::json!({"minimal": null, "low": null, "medium": null, "high": "high", "xhigh": "max"});
        model.thinking_level_map = map.as_object().cloned();
        assert_eq!(
            supported_thinking_levels(&model),
            [
                ThinkingLevel::Off,
                ThinkingLevel::High,
                ThinkingLevel::Xhigh
            ]
        );
        assert_eq!(
            clamp_thinking_level(&model, ThinkingLevel::Medium),
            ThinkingLevel::High
        );
        model.thinking_level_map = serde_json::json!({"off": null}).as_object().cloned();
        assert_eq!(
            clamp_thinking_level(&model, ThinkingLevel::Off),
            ThinkingLevel::Minimal
        );
        // 1.6.0's `max`: only where mapped; a request above every level clamps down.
        model.thinking_level_map = serde_json::json!({"off": null, "xhigh": "xhigh", "max": "max"})
            .as_object()
            .cloned();
        assert_eq!(
            supported_thinking_levels(&model),
            [
                ThinkingLevel::Minimal,
                ThinkingLevel::Low,
                ThinkingLevel::Medium,
                ThinkingLevel::High,
                ThinkingLevel::Xhigh,
                ThinkingLevel::Max
            ]
        );
        model.thinking_level_map = None;
        assert_eq!(
            clamp_thinking_level(&model, ThinkingLevel::Max),
            ThinkingLevel::High
        );
        assert_eq!(ThinkingLevel::parse("max"), Some(ThinkingLevel::Max));
        model.reasoning = false;
        assert_eq!(
            clamp_thinking_level(&model, ThinkingLevel::High),
            ThinkingLevel::Off
        );
    }

    #[test]
    fn cost_is_computed_per_million_and_summed_in_order() {
        let mut usage = crate::model::message::Usage {
            input: 200,
            output: 50,
            cache_read: 1000,
            ..Default::default()
        };
        calculate_cost(
            &ModelCost {
                input: 3.0,
                output: 15.0,
                cache_read: 0.3,
                cache_write: 3.75,
                tiers: None,
            },
            &mut usage,
        );
        assert_eq!(usage.cost.input, 3.0 / 1_000_000.0 * 200.0);
        assert!((usage.cost.total - 0.00165).abs() < 1e-12);
        assert_eq!(usage.cost.total_from_provider, Some(false));
        // Tiers above the input size, and one-hour cache writes at twice the input price.
        let tiered = ModelCost {
            input: 1.0,
            output: 2.0,
            cache_read: 0.1,
            cache_write: 1.25,
            tiers: Some(vec![
                CostTier {
                    input_tokens_above: 1000.0,
                    input: 10.0,
                    output: 20.0,
                    cache_read: 1.0,
                    cache_write: 12.5,
                },
                CostTier {
                    input_tokens_above: 100.0,
                    input: 5.0,
                    output: 6.0,
                    cache_read: 0.5,
                    cache_write: 6.25,
                },
            ]),
        };
        let mut usage = crate::model::message::Usage {
            input: 100,
            cache_write: 400,
            cache_write_1h: Some(100),
            ..Default::default()
        };
        calculate_cost(&tiered, &mut usage);
        assert_eq!(usage.cost.input, 5.0 / 1_000_000.0 * 100.0);
        assert_eq!(
            usage.cost.cache_write,
            (6.25 * 300.0 + 5.0 * 2.0 * 100.0) / 1_000_000.0
        );
    }
}
