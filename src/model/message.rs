//! Agent messages and their content blocks, exactly as the reference writes them
//! (`spec/session-format.md` §6).
//!
//! Field order in each struct is the reference's key order, so serialising a message this
//! project created produces the reference's bytes (through [`crate::support::json`]). Unknown
//! roles and block types parse to `Unknown` with their raw JSON; unknown fields of known shapes
//! are kept in `extra` and written back after the known ones.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::model::lenient;

/// Text content block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextContent {
    /// The text.
    #[serde(default)]
    pub text: String,
    /// Provider metadata (legacy id or JSON `{"v":1,"id":..}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_signature: Option<String>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Thinking (reasoning) content block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingContent {
    /// The reasoning text.
    #[serde(default)]
    pub thinking: String,
    /// Provider signature needed to replay the block to the same model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_signature: Option<String>,
    /// True when the provider redacted the reasoning (the payload is in the signature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<bool>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Image content block (base64 inline).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// Base64-encoded image bytes.
    #[serde(default)]
    pub data: String,
    /// MIME type such as `image/png`.
    #[serde(default)]
    pub mime_type: String,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool call made by the assistant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Provider-assigned call id, echoed by the tool result.
    #[serde(default)]
    pub id: String,
    /// Tool name.
    #[serde(default)]
    pub name: String,
    /// Arguments as a JSON object.
    #[serde(default)]
    pub arguments: Value,
    /// 1.6.0: why the finished argument text was not a JSON object (`arguments` is then `{}`):
    /// the parse error and the text the model sent (`argumentsError`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_error: Option<String>,
    /// Provider signature (Gemini).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One content block of any message role.
#[derive(Clone, Debug, PartialEq)]
pub enum ContentBlock {
    /// `{"type":"text"}`.
    Text(TextContent),
    /// `{"type":"thinking"}`.
    Thinking(ThinkingContent),
    /// `{"type":"image"}`.
    Image(ImageContent),
    /// `{"type":"toolCall"}`.
    ToolCall(ToolCall),
    /// A block type this version does not know, kept as it was.
    Unknown(Value),
}

impl ContentBlock {
    /// Returns a plain text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextContent {
            text: text.into(),
            text_signature: None,
            extra: Map::new(),
        })
    }

    /// Returns the text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(block) => Some(&block.text),
            Self::Thinking(_) | Self::Image(_) | Self::ToolCall(_) | Self::Unknown(_) => None,
        }
    }
}

#[derive(Serialize)]
#[serde(tag = "type")]
enum TaggedBlock<'a> {
    #[serde(rename = "text")]
    Text(&'a TextContent),
    #[serde(rename = "thinking")]
    Thinking(&'a ThinkingContent),
    #[serde(rename = "image")]
    Image(&'a ImageContent),
    #[serde(rename = "toolCall")]
    ToolCall(&'a ToolCall),
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Text(block) => TaggedBlock::Text(block).serialize(serializer),
            Self::Thinking(block) => TaggedBlock::Thinking(block).serialize(serializer),
            Self::Image(block) => TaggedBlock::Image(block).serialize(serializer),
            Self::ToolCall(block) => TaggedBlock::ToolCall(block).serialize(serializer),
            Self::Unknown(value) => value.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(Self::from_value(value))
    }
}

impl ContentBlock {
    /// Builds a block from JSON; anything unrecognised or malformed becomes `Unknown`.
    pub fn from_value(value: Value) -> Self {
        let Value::Object(mut map) = value else {
            return Self::Unknown(value);
        };
        let tag = match map.get("type") {
            Some(Value::String(tag)) => tag.clone(),
            _ => return Self::Unknown(Value::Object(map)),
        };
        let removed = map.shift_remove("type");
        let parsed = match tag.as_str() {
            "text" => serde_json::from_value(Value::Object(map.clone())).map(Self::Text),
            "thinking" => serde_json::from_value(Value::Object(map.clone())).map(Self::Thinking),
            "image" => serde_json::from_value(Value::Object(map.clone())).map(Self::Image),
            "toolCall" => serde_json::from_value(Value::Object(map.clone())).map(Self::ToolCall),
            _ => Err(serde_json::Error::custom("unknown block type")),
        };
        match parsed {
            Ok(block) => block,
            Err(_) => {
                let mut original = Map::new();
                if let Some(tag) = removed {
                    original.insert("type".to_owned(), tag);
                }
                original.extend(map);
                Self::Unknown(Value::Object(original))
            }
        }
    }
}

/// User-style content: a plain string or a list of blocks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    /// A plain string.
    Text(String),
    /// Text and image blocks.
    Blocks(Vec<ContentBlock>),
}

impl Default for UserContent {
    fn default() -> Self {
        Self::Text(String::new())
    }
}

impl UserContent {
    /// Returns the text parts joined with a space (the reference's `firstMessage` rule), or
    /// the string itself.
    pub fn joined_text(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Blocks(blocks) => blocks
                .iter()
                .filter_map(ContentBlock::as_text)
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// Returns the content as blocks (a string becomes one text block).
    pub fn to_blocks(&self) -> Vec<ContentBlock> {
        match self {
            Self::Text(text) => vec![ContentBlock::text(text.clone())],
            Self::Blocks(blocks) => blocks.clone(),
        }
    }
}

/// Costs in USD.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// Input tokens cost.
    #[serde(default, deserialize_with = "lenient::f64_any")]
    pub input: f64,
    /// Output tokens cost.
    #[serde(default, deserialize_with = "lenient::f64_any")]
    pub output: f64,
    /// Cache read cost.
    #[serde(default, deserialize_with = "lenient::f64_any")]
    pub cache_read: f64,
    /// Cache write cost.
    #[serde(default, deserialize_with = "lenient::f64_any")]
    pub cache_write: f64,
    /// Sum of the above (or the provider's billed total, see `total_from_provider`).
    #[serde(default, deserialize_with = "lenient::f64_any")]
    pub total: f64,
    /// 1.6.0: whether `total` is what the provider billed (OpenRouter) rather than the sum of
    /// the catalog prices; every cost computation writes it (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_from_provider: Option<bool>,
}

/// Where [`Usage::reasoning`] is written: 1.6.0's OpenAI-compatible usage builds it before
/// `totalTokens`, Anthropic's adds it after `cost` (and after `cacheWrite1h`).
///
/// Key order is presentation only: two usages that differ only in it compare equal.
#[derive(Clone, Copy, Debug, Default, Eq)]
pub enum UsageKeyOrder {
    /// `input, output, cacheRead, cacheWrite, reasoning, totalTokens, cost, cacheWrite1h`.
    #[default]
    ReasoningBeforeTotal,
    /// `input, output, cacheRead, cacheWrite, totalTokens, cost, cacheWrite1h, reasoning`.
    ReasoningAfterCost,
    /// `input, output, cacheRead, cacheWrite, cacheWrite1h, reasoning, totalTokens, cost`: a
    /// sum of two usages (1.6.0 `combineUsage`, a split turn's summaries).
    Combined,
}

impl PartialEq for UsageKeyOrder {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

/// Token usage of one assistant message.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    /// Input (prompt) tokens not served from cache.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Tokens read from the prompt cache.
    pub cache_read: u64,
    /// Tokens written to the prompt cache.
    pub cache_write: u64,
    /// 1.6.0: reasoning tokens, a part of `output` (`reasoning`).
    pub reasoning: Option<u64>,
    /// Total tokens as reported or computed.
    pub total_tokens: u64,
    /// Cost in USD.
    pub cost: Cost,
    /// 1.6.0: the part of `cache_write` written with the one-hour TTL (`cacheWrite1h`,
    /// Anthropic), priced at twice the input rate.
    pub cache_write_1h: Option<u64>,
    /// Where `reasoning` goes when serialised.
    pub key_order: UsageKeyOrder,
}

impl Serialize for Usage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("input", &self.input)?;
        map.serialize_entry("output", &self.output)?;
        map.serialize_entry("cacheRead", &self.cache_read)?;
        map.serialize_entry("cacheWrite", &self.cache_write)?;
        let combined = matches!(self.key_order, UsageKeyOrder::Combined);
        if combined && let Some(long) = self.cache_write_1h {
            map.serialize_entry("cacheWrite1h", &long)?;
        }
        let after_cost = matches!(self.key_order, UsageKeyOrder::ReasoningAfterCost);
        if !after_cost && let Some(reasoning) = self.reasoning {
            map.serialize_entry("reasoning", &reasoning)?;
        }
        map.serialize_entry("totalTokens", &self.total_tokens)?;
        map.serialize_entry("cost", &self.cost)?;
        if !combined && let Some(long) = self.cache_write_1h {
            map.serialize_entry("cacheWrite1h", &long)?;
        }
        if after_cost && let Some(reasoning) = self.reasoning {
            map.serialize_entry("reasoning", &reasoning)?;
        }
        map.end()
    }
}

/// A JSON number read leniently as a `u64` ([`lenient::u64_any`]).
struct LenientU64(u64);

impl<'de> Deserialize<'de> for LenientU64 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        lenient::u64_any(deserializer).map(Self)
    }
}

impl<'de> Deserialize<'de> for Usage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct UsageVisitor;
        impl<'de> serde::de::Visitor<'de> for UsageVisitor {
            type Value = Usage;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a usage object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Usage, A::Error> {
                let mut usage = Usage::default();
                let mut seen_total = false;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "input" => usage.input = map.next_value::<LenientU64>()?.0,
                        "output" => usage.output = map.next_value::<LenientU64>()?.0,
                        "cacheRead" => usage.cache_read = map.next_value::<LenientU64>()?.0,
                        "cacheWrite" => usage.cache_write = map.next_value::<LenientU64>()?.0,
                        "totalTokens" => {
                            seen_total = true;
                            usage.total_tokens = map.next_value::<LenientU64>()?.0;
                        }
                        "cost" => usage.cost = map.next_value()?,
                        "reasoning" => {
                            if seen_total {
                                usage.key_order = UsageKeyOrder::ReasoningAfterCost;
                            }
                            usage.reasoning = map
                                .next_value::<Option<serde_json::Number>>()?
                                .map(|n| u64::try_from(lenient::number_to_i64(&n)).unwrap_or(0));
                        }
                        "cacheWrite1h" => {
                            usage.cache_write_1h = map
                                .next_value::<Option<serde_json::Number>>()?
                                .map(|n| u64::try_from(lenient::number_to_i64(&n)).unwrap_or(0));
                        }
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(usage)
            }
        }
        deserializer.deserialize_map(UsageVisitor)
    }
}

/// Why an assistant message ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// Normal end of turn.
    #[default]
    Stop,
    /// Output token limit reached.
    Length,
    /// The model called tools.
    ToolUse,
    /// The request or stream failed.
    Error,
    /// The user aborted.
    Aborted,
    /// 1.6.0: the message is still streaming (partial messages only).
    Pending,
    /// A value this version does not know.
    #[serde(other)]
    Unknown,
}

impl StopReason {
    /// The reference's name of the stop reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolUse => "toolUse",
            Self::Error => "error",
            Self::Aborted => "aborted",
            Self::Pending => "pending",
            Self::Unknown => "unknown",
        }
    }
}

/// A key of an assistant message, for its key order ([`AssistantKeyOrder`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssistantKey {
    /// `content`.
    Content,
    /// `api`.
    Api,
    /// `provider`.
    Provider,
    /// `model`.
    Model,
    /// `providerThinkingLevel`.
    ProviderThinkingLevel,
    /// `usage`.
    Usage,
    /// `stopReason`.
    StopReason,
    /// `timestamp`.
    Timestamp,
    /// `responseId`.
    ResponseId,
    /// `responseModel`.
    ResponseModel,
    /// `rawStopReason`.
    RawStopReason,
    /// `errorMessage`.
    ErrorMessage,
    /// `diagnostics`.
    Diagnostics,
    /// `durationMs`.
    DurationMs,
    /// `thinkingLevel`.
    ThinkingLevel,
}

impl AssistantKey {
    /// Every key in the default order.
    pub const ALL: [AssistantKey; 15] = [
        Self::Content,
        Self::Api,
        Self::Provider,
        Self::Model,
        Self::ProviderThinkingLevel,
        Self::Usage,
        Self::StopReason,
        Self::Timestamp,
        Self::ResponseId,
        Self::ResponseModel,
        Self::RawStopReason,
        Self::ErrorMessage,
        Self::Diagnostics,
        Self::DurationMs,
        Self::ThinkingLevel,
    ];

    /// The JSON name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Content => "content",
            Self::Api => "api",
            Self::Provider => "provider",
            Self::Model => "model",
            Self::ProviderThinkingLevel => "providerThinkingLevel",
            Self::Usage => "usage",
            Self::StopReason => "stopReason",
            Self::Timestamp => "timestamp",
            Self::ResponseId => "responseId",
            Self::ResponseModel => "responseModel",
            Self::RawStopReason => "rawStopReason",
            Self::ErrorMessage => "errorMessage",
            Self::Diagnostics => "diagnostics",
            Self::DurationMs => "durationMs",
            Self::ThinkingLevel => "thinkingLevel",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|key| key.name() == name)
    }
}

/// The order in which an assistant message's keys were created, as JavaScript keeps it: a
/// message read from a file keeps the file's order; the providers record each key when the
/// reference would create it (1.6.0 adds `responseId`, `rawStopReason`, `errorMessage`,
/// `diagnostics`, `durationMs`… in the order the stream produced them). Keys never recorded
/// are written after the recorded ones, in [`AssistantKey::ALL`] order; unknown fields last.
///
/// Key order is presentation only: two messages that differ only in it compare equal.
#[derive(Clone, Debug, Default)]
pub struct AssistantKeyOrder(Vec<AssistantKey>);

impl PartialEq for AssistantKeyOrder {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl AssistantKeyOrder {
    /// The order of a message created by a provider stream: `content, api, provider, model,
    /// usage, stopReason, timestamp`.
    pub fn created() -> Self {
        Self(vec![
            AssistantKey::Content,
            AssistantKey::Api,
            AssistantKey::Provider,
            AssistantKey::Model,
            AssistantKey::Usage,
            AssistantKey::StopReason,
            AssistantKey::Timestamp,
        ])
    }

    /// Records that `key` now exists (no effect when it already does), as a JavaScript
    /// assignment to a new property would.
    pub fn touch(&mut self, key: AssistantKey) {
        if self.0.is_empty() {
            // No recorded order: the default one, with `key` created now (last).
            self.0 = AssistantKey::ALL
                .into_iter()
                .filter(|existing| *existing != key)
                .collect();
        }
        if !self.0.contains(&key) {
            self.0.push(key);
        }
    }

    /// Records `key` right after `after` (a key an object literal creates in the middle),
    /// or last when `after` is not recorded; no effect when `key` already exists.
    pub fn insert_after(&mut self, key: AssistantKey, after: AssistantKey) {
        if self.0.contains(&key) {
            return;
        }
        match self.0.iter().position(|existing| *existing == after) {
            Some(at) => self.0.insert(at + 1, key),
            None => self.touch(key),
        }
    }

    /// Forgets `key` (a JavaScript `delete`).
    pub fn remove(&mut self, key: AssistantKey) {
        self.0.retain(|existing| *existing != key);
    }

    /// The keys in the order they are written.
    pub fn keys(&self) -> Vec<AssistantKey> {
        let mut keys = self.0.clone();
        for key in AssistantKey::ALL {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }

    /// Reads the order of a message object's keys.
    pub fn of_map(map: &Map<String, Value>) -> Self {
        Self(
            map.keys()
                .filter_map(|name| AssistantKey::from_name(name))
                .collect(),
        )
    }
}

/// An assistant message.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// Text, thinking and tool-call blocks (`null` reads as none, as 1.6.0 normalises it).
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub content: Vec<ContentBlock>,
    /// Wire protocol name (`openai-completions`, `anthropic-messages`, …).
    #[serde(default)]
    pub api: String,
    /// Provider name.
    #[serde(default)]
    pub provider: String,
    /// Model id.
    #[serde(default)]
    pub model: String,
    /// Token usage and cost.
    #[serde(default)]
    pub usage: Usage,
    /// Why the message ended.
    #[serde(default)]
    pub stop_reason: StopReason,
    /// Creation time, Unix ms.
    #[serde(default, deserialize_with = "lenient::i64_any")]
    pub timestamp: i64,
    /// 1.6.0: the effort the provider was asked for inside the conversation
    /// (`providerThinkingLevel`, models with mid-conversation effort).
    #[serde(default)]
    pub provider_thinking_level: Option<String>,
    /// Provider response id.
    #[serde(default)]
    pub response_id: Option<String>,
    /// Model name the provider reported, when it differs.
    #[serde(default)]
    pub response_model: Option<String>,
    /// 1.6.0: the provider's own stop reason (`finish_reason`, `stop_reason`).
    #[serde(default)]
    pub raw_stop_reason: Option<String>,
    /// Error text when `stop_reason` is `error` or `aborted`.
    #[serde(default)]
    pub error_message: Option<String>,
    /// Provider diagnostics (a list of `{type, timestamp, error?, details?}`).
    #[serde(default, deserialize_with = "lenient::present")]
    pub diagnostics: Option<Value>,
    /// 1.6.0: how long the response took, ms (`durationMs`).
    #[serde(default, deserialize_with = "lenient::opt_u64_any")]
    pub duration_ms: Option<u64>,
    /// 1.6.0: the thinking level the agent loop requested (`thinkingLevel`), set by the loop
    /// on the final message.
    #[serde(default)]
    pub thinking_level: Option<String>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
    /// The order of the keys when serialised.
    #[serde(skip)]
    pub key_order: AssistantKeyOrder,
}

impl Serialize for AssistantMessage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        for key in self.key_order.keys() {
            let name = key.name();
            match key {
                AssistantKey::Content => map.serialize_entry(name, &self.content)?,
                AssistantKey::Api => map.serialize_entry(name, &self.api)?,
                AssistantKey::Provider => map.serialize_entry(name, &self.provider)?,
                AssistantKey::Model => map.serialize_entry(name, &self.model)?,
                AssistantKey::Usage => map.serialize_entry(name, &self.usage)?,
                AssistantKey::StopReason => map.serialize_entry(name, &self.stop_reason)?,
                AssistantKey::Timestamp => map.serialize_entry(name, &self.timestamp)?,
                AssistantKey::ProviderThinkingLevel => {
                    if let Some(value) = &self.provider_thinking_level {
                        map.serialize_entry(name, value)?;
                    }
                }
                AssistantKey::ResponseId => {
                    if let Some(value) = &self.response_id {
                        map.serialize_entry(name, value)?;
                    }
                }
                AssistantKey::ResponseModel => {
                    if let Some(value) = &self.response_model {
                        map.serialize_entry(name, value)?;
                    }
                }
                AssistantKey::RawStopReason => {
                    if let Some(value) = &self.raw_stop_reason {
                        map.serialize_entry(name, value)?;
                    }
                }
                AssistantKey::ErrorMessage => {
                    if let Some(value) = &self.error_message {
                        map.serialize_entry(name, value)?;
                    }
                }
                AssistantKey::Diagnostics => {
                    if let Some(value) = &self.diagnostics {
                        map.serialize_entry(name, value)?;
                    }
                }
                AssistantKey::DurationMs => {
                    if let Some(value) = &self.duration_ms {
                        map.serialize_entry(name, value)?;
                    }
                }
                AssistantKey::ThinkingLevel => {
                    if let Some(value) = &self.thinking_level {
                        map.serialize_entry(name, value)?;
                    }
                }
            }
        }
        for (key, value) in &self.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl AssistantMessage {
    /// Records the thinking level the agent loop asked for (1.6.0's `Object.assign(message,
    /// {thinkingLevel})`: appended last, or replaced in place when present).
    pub fn set_thinking_level(&mut self, level: &str) {
        self.key_order.touch(AssistantKey::ThinkingLevel);
        self.thinking_level = Some(level.to_owned());
    }

    /// Returns the text blocks joined with newlines.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Returns the tool calls in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolCall(call) => Some(call),
            ContentBlock::Text(_)
            | ContentBlock::Thinking(_)
            | ContentBlock::Image(_)
            | ContentBlock::Unknown(_) => None,
        })
    }
}

/// A user message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// String or text/image blocks (`null` reads as no blocks, as 1.6.0 normalises it).
    #[serde(default, deserialize_with = "lenient::null_as_empty_blocks")]
    pub content: UserContent,
    /// Creation time, Unix ms.
    #[serde(default, deserialize_with = "lenient::i64_any")]
    pub timestamp: i64,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The result of one tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    /// The call this answers.
    #[serde(default)]
    pub tool_call_id: String,
    /// The tool's name.
    #[serde(default)]
    pub tool_name: String,
    /// Text and image blocks (`null` reads as none, as 1.6.0 normalises it).
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub content: Vec<ContentBlock>,
    /// Tool-specific details, never sent to the model.
    #[serde(
        default,
        deserialize_with = "lenient::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub details: Option<Value>,
    /// Usage of the model calls the tool made (1.6.0); counts in the session's totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// True when the tool failed.
    #[serde(default, deserialize_with = "lenient::bool_any")]
    pub is_error: bool,
    /// How long the tool ran, in ms (1.6.0; absent for calls that never ran).
    #[serde(
        default,
        deserialize_with = "lenient::opt_u64_any",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ms: Option<u64>,
    /// Creation time, Unix ms.
    #[serde(default, deserialize_with = "lenient::i64_any")]
    pub timestamp: i64,
    /// The tool calls the tool made itself (1.6.0 `nestedCalls`), kept as they are.
    #[serde(
        default,
        deserialize_with = "lenient::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub nested_calls: Option<Value>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A user-initiated shell command (`!cmd`, `!!cmd`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BashExecutionMessage {
    /// The command line.
    #[serde(default)]
    pub command: String,
    /// Combined output (possibly truncated).
    #[serde(default)]
    pub output: String,
    /// Exit code; absent when killed or unknown.
    #[serde(
        default,
        deserialize_with = "lenient::opt_i64_any",
        skip_serializing_if = "Option::is_none"
    )]
    pub exit_code: Option<i64>,
    /// True when the command was cancelled.
    #[serde(default, deserialize_with = "lenient::bool_any")]
    pub cancelled: bool,
    /// True when `output` was truncated.
    #[serde(default, deserialize_with = "lenient::bool_any")]
    pub truncated: bool,
    /// Where the full output was saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    /// Creation time, Unix ms.
    #[serde(default, deserialize_with = "lenient::i64_any")]
    pub timestamp: i64,
    /// True for `!!` commands, which never reach the model (after `timestamp`, where the
    /// reference writes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_from_context: Option<bool>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An extension message (from a `custom_message` entry, or a legacy `message` entry).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomMessage {
    /// Extension identifier.
    #[serde(default)]
    pub custom_type: String,
    /// String or text/image blocks.
    #[serde(default)]
    pub content: UserContent,
    /// UI only: whether the message is shown.
    #[serde(default, deserialize_with = "lenient::bool_any")]
    pub display: bool,
    /// Extension details, never sent to the model.
    #[serde(
        default,
        deserialize_with = "lenient::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub details: Option<Value>,
    /// Creation time, Unix ms.
    #[serde(default, deserialize_with = "lenient::i64_any")]
    pub timestamp: i64,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool as a system message declares it to the model (`toToolDeclaration`: name,
/// description, JSON-schema parameters, and `constrainedSampling` when set).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDeclaration {
    /// Tool name.
    #[serde(default)]
    pub name: String,
    /// What the model reads about the tool.
    #[serde(default)]
    pub description: String,
    /// JSON schema of the arguments.
    #[serde(default)]
    pub parameters: Value,
    /// Fields this version does not know (`constrainedSampling` among them).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool a system message removes (`{name}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolRemoval {
    /// Tool name.
    #[serde(default)]
    pub name: String,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Where a system message writes its `timestamp` relative to its tool fields: 1.6.0's replayed
/// checkpoint (`getCurrentSystemMessage`) puts the tools first, a request's patch
/// (`declareToolChanges` on `{role, content, sections?, timestamp}`) puts them last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SystemKeyOrder {
    /// `content, sections, toolsAdded, toolsRemoved, timestamp`.
    #[default]
    ToolsThenTimestamp,
    /// `content, sections, timestamp, toolsAdded, toolsRemoved`.
    TimestampThenTools,
}

/// A system message (1.6.0): the prompt and tool loadout, or a patch of them. Replaying the
/// system messages of a transcript in order gives the current prompt (`content` appended,
/// `sections` patched by name, a `null` section removed) and tools (removals, then additions).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct SystemMessage {
    /// Text (string or text blocks); `None` when null or absent.
    pub content: Option<UserContent>,
    /// Prompt sections by name; a `null` value removes the section. Key order is kept.
    pub sections: Option<Map<String, Value>>,
    /// Tools declared (or redeclared) by this message.
    pub tools_added: Option<Vec<ToolDeclaration>>,
    /// Tools removed by this message.
    pub tools_removed: Option<Vec<ToolRemoval>>,
    /// Creation time, Unix ms.
    pub timestamp: i64,
    /// Where `timestamp` goes when serialised.
    pub key_order: SystemKeyOrder,
    /// Fields this version does not know.
    pub extra: Map<String, Value>,
}

impl SystemMessage {
    /// Returns the text of `content` (text blocks joined with newlines, `contentText`).
    pub fn content_text(&self) -> String {
        match &self.content {
            None => String::new(),
            Some(UserContent::Text(text)) => text.clone(),
            Some(UserContent::Blocks(blocks)) => blocks
                .iter()
                .filter_map(ContentBlock::as_text)
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    fn from_map(mut map: Map<String, Value>) -> Result<Self, serde_json::Error> {
        let position = |key: &str| map.keys().position(|name| name == key);
        let timestamp_at = position("timestamp");
        let tools_at = position("toolsAdded").or(position("toolsRemoved"));
        let key_order = match (timestamp_at, tools_at) {
            (Some(timestamp), Some(tools)) if timestamp < tools => {
                SystemKeyOrder::TimestampThenTools
            }
            _ => SystemKeyOrder::ToolsThenTimestamp,
        };
        let content = match map.shift_remove("content") {
            None | Some(Value::Null) => None,
            Some(content) => Some(serde_json::from_value(content)?),
        };
        let sections = match map.shift_remove("sections") {
            None => None,
            Some(Value::Object(sections)) => Some(sections),
            Some(_) => return Err(serde_json::Error::custom("sections is not an object")),
        };
        let tools_added = match map.shift_remove("toolsAdded") {
            None => None,
            Some(tools) => Some(serde_json::from_value(tools)?),
        };
        let tools_removed = match map.shift_remove("toolsRemoved") {
            None => None,
            Some(tools) => Some(serde_json::from_value(tools)?),
        };
        let timestamp = match map.shift_remove("timestamp") {
            Some(Value::Number(number)) => lenient::number_to_i64(&number),
            _ => 0,
        };
        Ok(Self {
            content,
            sections,
            tools_added,
            tools_removed,
            timestamp,
            key_order,
            extra: map,
        })
    }

    /// Serialises with `role` first, in this message's key order.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("role".to_owned(), Value::from("system"));
        if let Some(content) = &self.content {
            map.insert(
                "content".to_owned(),
                serde_json::to_value(content).unwrap_or(Value::Null),
            );
        }
        if let Some(sections) = &self.sections {
            map.insert("sections".to_owned(), Value::Object(sections.clone()));
        }
        let timestamp = Value::from(self.timestamp);
        if self.key_order == SystemKeyOrder::TimestampThenTools {
            map.insert("timestamp".to_owned(), timestamp.clone());
        }
        if let Some(tools) = &self.tools_added {
            map.insert(
                "toolsAdded".to_owned(),
                serde_json::to_value(tools).unwrap_or(Value::Null),
            );
        }
        if let Some(tools) = &self.tools_removed {
            map.insert(
                "toolsRemoved".to_owned(),
                serde_json::to_value(tools).unwrap_or(Value::Null),
            );
        }
        if self.key_order == SystemKeyOrder::ToolsThenTimestamp {
            map.insert("timestamp".to_owned(), timestamp);
        }
        for (key, value) in &self.extra {
            map.insert(key.clone(), value.clone());
        }
        Value::Object(map)
    }
}

/// The in-memory message made from a `branch_summary` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BranchSummaryMessage {
    /// Summary text.
    #[serde(default)]
    pub summary: String,
    /// The entry the summarised branch hung from (or `root`).
    #[serde(default)]
    pub from_id: String,
    /// The entry's time, Unix ms.
    #[serde(default, deserialize_with = "lenient::i64_any")]
    pub timestamp: i64,
}

/// The in-memory message made from the active `compaction` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSummaryMessage {
    /// Summary text.
    #[serde(default)]
    pub summary: String,
    /// Context tokens before the compaction.
    #[serde(default, deserialize_with = "lenient::u64_any")]
    pub tokens_before: u64,
    /// The entry's time, Unix ms.
    #[serde(default, deserialize_with = "lenient::i64_any")]
    pub timestamp: i64,
}

/// A message of the agent transcript, tagged by `role`.
// Assistant messages are the common case of a transcript; boxing them would cost an
// allocation per message for no gain.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum AgentMessage {
    /// `role: "system"` (1.6.0): the prompt and tool loadout, or a patch of them.
    System(SystemMessage),
    /// `role: "user"`.
    User(UserMessage),
    /// `role: "assistant"`.
    Assistant(AssistantMessage),
    /// `role: "toolResult"`.
    ToolResult(ToolResultMessage),
    /// `role: "bashExecution"`.
    BashExecution(BashExecutionMessage),
    /// `role: "custom"`.
    Custom(CustomMessage),
    /// `role: "branchSummary"` (in memory only).
    BranchSummary(BranchSummaryMessage),
    /// `role: "compactionSummary"` (in memory only).
    CompactionSummary(CompactionSummaryMessage),
    /// Any other role (or a known role whose shape does not parse), kept as it was.
    Unknown(Value),
}

#[derive(Serialize)]
#[serde(tag = "role")]
enum TaggedMessage<'a> {
    #[serde(rename = "user")]
    User(&'a UserMessage),
    #[serde(rename = "assistant")]
    Assistant(&'a AssistantMessage),
    #[serde(rename = "toolResult")]
    ToolResult(&'a ToolResultMessage),
    #[serde(rename = "bashExecution")]
    BashExecution(&'a BashExecutionMessage),
    #[serde(rename = "custom")]
    Custom(&'a CustomMessage),
    #[serde(rename = "branchSummary")]
    BranchSummary(&'a BranchSummaryMessage),
    #[serde(rename = "compactionSummary")]
    CompactionSummary(&'a CompactionSummaryMessage),
}

impl Serialize for AgentMessage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::System(msg) => msg.to_value().serialize(serializer),
            Self::User(msg) => TaggedMessage::User(msg).serialize(serializer),
            Self::Assistant(msg) => TaggedMessage::Assistant(msg).serialize(serializer),
            Self::ToolResult(msg) => TaggedMessage::ToolResult(msg).serialize(serializer),
            Self::BashExecution(msg) => TaggedMessage::BashExecution(msg).serialize(serializer),
            Self::Custom(msg) => TaggedMessage::Custom(msg).serialize(serializer),
            Self::BranchSummary(msg) => TaggedMessage::BranchSummary(msg).serialize(serializer),
            Self::CompactionSummary(msg) => {
                TaggedMessage::CompactionSummary(msg).serialize(serializer)
            }
            Self::Unknown(value) => value.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for AgentMessage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(Self::from_value(value))
    }
}

impl AgentMessage {
    /// Builds a message from JSON; an unknown role or a shape that does not parse becomes
    /// `Unknown` with the JSON kept.
    pub fn from_value(value: Value) -> Self {
        let Value::Object(mut map) = value else {
            return Self::Unknown(value);
        };
        let role = match map.get("role") {
            Some(Value::String(role)) => role.clone(),
            _ => return Self::Unknown(Value::Object(map)),
        };
        let removed = map.shift_remove("role");
        // Deserialising from a reference keeps the original for the `Unknown` fallback
        // without copying the whole object first.
        let body = Value::Object(map);
        let parsed = match role.as_str() {
            "system" => match &body {
                Value::Object(map) => SystemMessage::from_map(map.clone()).map(Self::System),
                _ => Err(serde_json::Error::custom("not an object")),
            },
            "user" => UserMessage::deserialize(&body).map(Self::User),
            "assistant" => AssistantMessage::deserialize(&body).map(|mut message| {
                if let Value::Object(map) = &body {
                    message.key_order = AssistantKeyOrder::of_map(map);
                }
                Self::Assistant(message)
            }),
            "toolResult" => ToolResultMessage::deserialize(&body).map(Self::ToolResult),
            "bashExecution" => BashExecutionMessage::deserialize(&body).map(Self::BashExecution),
            "custom" => CustomMessage::deserialize(&body).map(Self::Custom),
            "branchSummary" => BranchSummaryMessage::deserialize(&body).map(Self::BranchSummary),
            "compactionSummary" => {
                CompactionSummaryMessage::deserialize(&body).map(Self::CompactionSummary)
            }
            _ => Err(serde_json::Error::custom("unknown role")),
        };
        match parsed {
            Ok(message) => message,
            Err(_) => {
                let mut original = Map::new();
                if let Some(role) = removed {
                    original.insert("role".to_owned(), role);
                }
                if let Value::Object(map) = body {
                    original.extend(map);
                }
                Self::Unknown(Value::Object(original))
            }
        }
    }

    /// Returns the role string as written in JSON.
    pub fn role(&self) -> &str {
        match self {
            Self::System(_) => "system",
            Self::User(_) => "user",
            Self::Assistant(_) => "assistant",
            Self::ToolResult(_) => "toolResult",
            Self::BashExecution(_) => "bashExecution",
            Self::Custom(_) => "custom",
            Self::BranchSummary(_) => "branchSummary",
            Self::CompactionSummary(_) => "compactionSummary",
            Self::Unknown(value) => value.get("role").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// Returns the message's timestamp (Unix ms), 0 when unknown.
    pub fn timestamp(&self) -> i64 {
        match self {
            Self::System(msg) => msg.timestamp,
            Self::User(msg) => msg.timestamp,
            Self::Assistant(msg) => msg.timestamp,
            Self::ToolResult(msg) => msg.timestamp,
            Self::BashExecution(msg) => msg.timestamp,
            Self::Custom(msg) => msg.timestamp,
            Self::BranchSummary(msg) => msg.timestamp,
            Self::CompactionSummary(msg) => msg.timestamp,
            Self::Unknown(value) => value
                .get("timestamp")
                .and_then(Value::as_i64)
                .unwrap_or_default(),
        }
    }

    /// Serialises to a JSON value (key order as the reference writes it).
    pub fn to_value(&self) -> Value {
        // Serialising these types into a Value cannot fail: every map key is a string.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::json::to_js_string;

    fn round_trip(text: &str) {
        let message: AgentMessage = serde_json::from_str(text).unwrap();
        assert!(!matches!(message, AgentMessage::Unknown(_)), "{text}");
        assert_eq!(to_js_string(&message.to_value()), text);
    }

    #[test]
    fn a_combined_usage_writes_its_splits_before_the_total_as_1_6_0_combine_usage() {
        let usage = Usage {
            input: 1,
            output: 2,
            cache_write: 3,
            cache_write_1h: Some(3),
            reasoning: Some(1),
            total_tokens: 6,
            key_order: UsageKeyOrder::Combined,
            ..Usage::default()
        };
        let text = serde_json::to_string(&usage).unwrap();
        assert!(
            text.starts_with(
                r#"{"input":1,"output":2,"cacheRead":0,"cacheWrite":3,"cacheWrite1h":3,"reasoning":1,"totalTokens":6,"cost":"#
            ),
            "{text}"
        );
    }

    #[test]
    fn assistant_messages_of_1_6_0_keep_their_fields_and_key_order() {
        // OpenAI-compatible: reasoning before totalTokens, cost with totalFromProvider.
        round_trip(
            r#"{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"x","arguments":{},"argumentsError":"Unexpected end\n\nReceived arguments:\n{"}],"api":"openai-completions","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"reasoning":1,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0,"totalFromProvider":false}},"stopReason":"stop","timestamp":1,"responseId":"r","responseModel":"m2","rawStopReason":"stop","durationMs":12,"thinkingLevel":"max"}"#,
        );
        // Anthropic: cacheWrite1h and reasoning after cost; diagnostics before responseId;
        // providerThinkingLevel after timestamp; an unknown field last.
        round_trip(
            r#"{"role":"assistant","content":[],"api":"anthropic-messages","provider":"anthropic","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":5,"totalTokens":8,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0,"totalFromProvider":false},"cacheWrite1h":5,"reasoning":1},"stopReason":"error","timestamp":1,"providerThinkingLevel":"high","diagnostics":[{"type":"anthropic_thread_fallback","timestamp":2}],"errorMessage":"e","durationMs":3,"future":true}"#,
        );
        let AgentMessage::Assistant(message) = AgentMessage::from_value(serde_json::json!({
            "role": "assistant", "content": [], "api": "a", "provider": "p", "model": "m",
            "usage": {"input": 1.0, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "stop", "timestamp": 1
        })) else {
            panic!("not an assistant message")
        };
        assert_eq!(message.usage.input, 1);
        assert_eq!(message.usage.reasoning, None);
        let mut reordered = message.clone();
        reordered.key_order = AssistantKeyOrder::default();
        assert_eq!(reordered, message, "key order is not part of equality");
        let mut finished = message.clone();
        finished.set_thinking_level("high");
        let value = AgentMessage::Assistant(finished).to_value();
        assert_eq!(
            value
                .as_object()
                .and_then(|map| map.keys().next_back())
                .map(String::as_str),
            Some("thinkingLevel")
        );
        // Without a recorded order the default one holds and the level comes last.
        let AgentMessage::Assistant(mut fresh) = AgentMessage::Assistant(message) else {
            panic!()
        };
        fresh.key_order = AssistantKeyOrder::default();
        fresh.set_thinking_level("off");
        let value = AgentMessage::Assistant(fresh).to_value();
        let keys: Vec<&String> = value
            .as_object()
            .map(|map| map.keys().collect())
            .unwrap_or_default();
        assert_eq!(keys.first().map(|key| key.as_str()), Some("role"));
        assert_eq!(keys.last().map(|key| key.as_str()), Some("thinkingLevel"));
    }

    #[test]
    fn reference_messages_round_trip_byte_for_byte() {
        round_trip(r#"{"role":"user","content":"hello","timestamp":1748422830583}"#);
        round_trip(
            r#"{"role":"assistant","content":[{"type":"thinking","thinking":"hm","thinkingSignature":"sig"},{"type":"text","text":"Hi"},{"type":"toolCall","id":"call_1","name":"bash","arguments":{"command":"ls"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":259,"output":15,"cacheRead":2687,"cacheWrite":259,"totalTokens":3220,"cost":{"input":0.000777,"output":0.000225,"cacheRead":0.0008060999999999999,"cacheWrite":0.00097125,"total":0.00277935}},"stopReason":"toolUse","timestamp":1748422830615,"responseId":"msg_01","errorMessage":"x"}"#,
        );
        round_trip(
            r#"{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"image","data":"AAAA","mimeType":"image/png"}],"details":{"a":1},"isError":false,"timestamp":5}"#,
        );
        round_trip(
            r#"{"role":"bashExecution","command":"ls","output":"","cancelled":true,"truncated":false,"timestamp":5}"#,
        );
        round_trip(
            r#"{"role":"custom","customType":"x","content":[{"type":"text","text":"t"}],"display":false,"details":null,"timestamp":5}"#,
        );
    }

    #[test]
    fn unknown_roles_and_blocks_survive() {
        let text =
            r#"{"role":"hookMessage","customType":"x","content":"c","display":true,"timestamp":1}"#;
        let message: AgentMessage = serde_json::from_str(text).unwrap();
        assert!(matches!(message, AgentMessage::Unknown(_)));
        assert_eq!(to_js_string(&message.to_value()), text);
        let block = ContentBlock::from_value(serde_json::json!({"type":"audio","x":1}));
        assert!(matches!(block, ContentBlock::Unknown(_)));
        let text =
            r#"{"role":"user","content":[{"type":"audio","x":1}],"timestamp":1,"extraField":[1]}"#;
        let message: AgentMessage = serde_json::from_str(text).unwrap();
        assert_eq!(to_js_string(&message.to_value()), text);
    }
}
