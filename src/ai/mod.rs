//! One LLM call, streamed back as one event enum; the providers' wire protocols, the model
//! registry and transport retries (`spec/models-providers-settings.md`).
//!
//! Entry point: [`AiClient::stream`] takes a [`Model`], a [`Request`] (the conversation as
//! already-converted [`LlmMessage`]s, system messages included — see
//! [`convert::convert_to_llm`] and [`transcript`] — and optionally a system prompt and tool
//! definitions) and [`StreamOptions`] (key, headers, identity, thinking level, limits,
//! transport settings), plus a cancellation token, and returns an [`AssistantStream`]. Pull events with
//! [`AssistantStream::next`]; [`AssistantStream::partial`] is the assistant message as built
//! so far (what the reference's events carry as `partial`). The last event is always
//! [`StreamEvent::Done`] or [`StreamEvent::Error`], carrying the final message exactly as the
//! reference would store it.
//!
//! ```text
//! let mut stream = client.stream(&model, request, options, cancel);
//! while let Some(event) = stream.next().await {
//!     let json = event.to_json(stream.partial()); // message_update.assistantMessageEvent
//! }
//! ```
//!
//! Modules: `sse` (framing), `transcript` (system messages: the prompt and tools as a
//! transcript), `openai`, `responses` (with `codex` on top of it), `anthropic`, `google`,
//! `vertex` and `mistral` (request mapping and stream decoding, pure), `bedrock` (Bedrock
//! ConverseStream: SigV4, the binary event stream), `google_auth` (Google key files → access
//! tokens), `aws_auth` (AWS credential chain over the environment and the shared files),
//! `request` (what the protocols share), `transport` (HTTP with the reference's retry
//! rules), `proxy` (which proxy a request goes through), `stream` (the driver: idle timeout, abort, terminal events), `convert`
//! (`convertToLlm` and provider normalisation),
//! `models` (model table, `models.json`, thinking levels), `resolve` (`--model` patterns),
//! `auth` (keys and headers), `availability` (which models can be used here, and why not), `error` (`AiError` and its classification), `partial_json`.
//!
//! Invariants: `ai` knows nothing of sessions or storage; it reads no environment variables or
//! files (values come in as text, or through [`auth::KeyResolver`]); the only re-sending of a
//! request is the transport retry before any response body was consumed.

pub mod anthropic;
pub mod auth;
pub mod availability;
pub mod aws_auth;
pub mod bedrock;
pub mod codex;
pub mod convert;
pub mod error;
pub mod google;
pub mod google_auth;
pub mod mistral;
pub mod models;
pub mod oauth;
pub mod openai;
pub mod partial_json;
pub mod proxy;
pub mod request;
pub mod resolve;
pub mod responses;
pub mod sse;
mod stream;
pub mod transcript;
pub mod transport;
pub mod vertex;

use std::time::Duration;

use serde_json::{Map, Value, json};

pub use convert::LlmMessage;
pub use error::AiError;
pub use models::{Model, ModelRegistry, ThinkingLevel};
pub use stream::{AiClient, AssistantStream};
pub use tokio_util::sync::CancellationToken;

use crate::model::message::{AssistantMessage, StopReason, ToolCall};

/// A tool the model may call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDefinition {
    /// Tool name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// What one call sends: the conversation, and optionally a system prompt and tools.
///
/// In 1.6.0's model the prompt and tools are system messages in `messages`; a non-empty
/// `system_prompt` and non-empty `tools` are folded into a leading system message first
/// ([`transcript::normalize_context`]), as the reference does with `Context.systemPrompt` and
/// `Context.tools`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Request {
    /// The system prompt (folded into a leading system message when not empty).
    pub system_prompt: String,
    /// The conversation, already converted for the LLM ([`convert::convert_to_llm`]),
    /// system messages included; the provider normalisation
    /// ([`convert::transform_messages`]) is applied per protocol.
    pub messages: Vec<LlmMessage>,
    /// Tools to declare in the leading system message.
    pub tools: Vec<ToolDefinition>,
}

/// Prompt-cache retention (`PI_CACHE_RETENTION=long` ⇒ `Long`; the coding agent otherwise
/// uses `Short`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CacheRetention {
    /// No cache markers.
    None,
    /// Ephemeral markers (the default).
    #[default]
    Short,
    /// One-hour / 24-hour retention where supported.
    Long,
}

/// Anthropic thinking budgets per level (setting `thinkingBudgets`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThinkingBudgets {
    /// `minimal` (default 1024).
    pub minimal: u64,
    /// `low` (default 2048).
    pub low: u64,
    /// `medium` (default 8192).
    pub medium: u64,
    /// `high` and `xhigh` (default 16384).
    pub high: u64,
}

impl Default for ThinkingBudgets {
    fn default() -> Self {
        Self {
            minimal: 1024,
            low: 2048,
            medium: 8192,
            high: 16384,
        }
    }
}

/// How the HTTP layer behaves (settings `retry.provider.*`; the defaults are the reference
/// SDKs').
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransportConfig {
    /// Extra attempts for a request that failed before any response body was consumed
    /// (`retry.provider.maxRetries`; 1.6.0's default is none, the SDKs' own 2 is this
    /// struct's default for direct callers).
    pub max_retries: u32,
    /// Time allowed until the response headers arrive (`retry.provider.timeoutMs`, default
    /// 600 s).
    pub request_timeout: Duration,
    /// Longest silence allowed between two pieces of the response body; a stalled stream
    /// fails with `Request timed out: …` (default 600 s, as the request timeout).
    pub idle_timeout: Duration,
    /// A server-requested retry delay above this fails at once instead of waiting
    /// (`retry.provider.maxRetryDelayMs`, default 60 s; `None` = no cap).
    pub max_retry_delay: Option<Duration>,
    /// First backoff step when the server names no delay (doubles per retry, at most 8 s,
    /// minus up to 25 % jitter; default 0.5 s).
    pub initial_retry_delay: Duration,
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self {
            max_retries: 2,
            request_timeout: Duration::from_millis(600_000),
            idle_timeout: Duration::from_millis(600_000),
            max_retry_delay: Some(Duration::from_millis(60_000)),
            initial_retry_delay: Duration::from_millis(500),
        }
    }
}

/// Credentials that cloud protocols read from files, as `cli` found them at request time
/// (this layer reads no files).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum CloudCredentials {
    /// None needed or found.
    #[default]
    None,
    /// Google Application Default Credentials: the key file's path and text (`None` when it
    /// could not be read), for `google-vertex` calls without an API key.
    GoogleKeyFile {
        /// Where the file was looked for.
        path: String,
        /// Its contents.
        text: Option<String>,
    },
    /// The AWS shared credentials and config files (for `bedrock-converse-stream`).
    AwsFiles(aws_auth::SharedFiles),
}

/// Per-call options.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamOptions {
    /// The provider key (from [`auth::request_auth`]); calls without one fail with
    /// `No API key for provider: <p>` before sending.
    pub api_key: Option<String>,
    /// Extra headers, later entries winning: the `models.json` headers, then caller
    /// overrides. They override the protocol's own headers and the identity headers
    /// (case-insensitively).
    pub headers: Vec<(String, String)>,
    /// The base URL to use instead of the model's (resolved placeholders).
    pub base_url: Option<String>,
    /// The session's thinking level (clamped to the model here again).
    pub thinking: ThinkingLevel,
    /// Output limit; `None` = the model's `maxTokens`. Either is fitted into the context
    /// window left by the estimated input (1.6.0's `clampMaxTokensToContext`).
    pub max_tokens: Option<u64>,
    /// Anthropic thinking budgets.
    pub thinking_budgets: ThinkingBudgets,
    /// Prompt-cache retention.
    pub cache_retention: CacheRetention,
    /// The session id (cache key, affinity headers).
    pub session_id: Option<String>,
    /// HTTP retry and timeout behaviour.
    pub transport: TransportConfig,
    /// How requests identify themselves (`User-Agent`, provider attribution).
    pub identity: request::ClientIdentity,
    /// The provider settings the reference reads from the environment at request time
    /// (`getProviderEnvValue`: `AZURE_OPENAI_BASE_URL`, `AZURE_OPENAI_API_VERSION`, …), as
    /// resolved by [`auth::request_auth`]; this layer reads no environment itself.
    pub provider_env: Vec<(String, String)>,
    /// Credentials read from files ([`auth::request_auth`]).
    pub cloud: CloudCredentials,
}

impl StreamOptions {
    /// Returns options for a resolved request auth, with the reference's defaults for the
    /// rest (thinking `off`, short cache retention, default transport).
    pub fn new(auth: auth::RequestAuth) -> Self {
        Self {
            api_key: auth.api_key,
            headers: auth.headers,
            base_url: Some(auth.base_url),
            thinking: ThinkingLevel::Off,
            max_tokens: None,
            thinking_budgets: ThinkingBudgets::default(),
            cache_retention: CacheRetention::Short,
            session_id: None,
            transport: TransportConfig::default(),
            identity: request::ClientIdentity::default(),
            provider_env: auth.provider_env,
            cloud: auth.cloud,
        }
    }

    /// Returns the provider setting `name` of [`Self::provider_env`].
    pub fn provider_env(&self, name: &str) -> Option<&str> {
        self.provider_env
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// One event of a streamed assistant message (the reference's `AssistantMessageEvent`, with
/// the partial message kept by the stream instead of copied into every event).
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// The response started (headers received).
    Start,
    /// A text block opened.
    TextStart {
        /// Index in `content`.
        content_index: usize,
    },
    /// Text arrived.
    TextDelta {
        /// Index in `content`.
        content_index: usize,
        /// The new text.
        delta: String,
    },
    /// A text block closed.
    TextEnd {
        /// Index in `content`.
        content_index: usize,
        /// The block's full text.
        content: String,
    },
    /// A thinking block opened.
    ThinkingStart {
        /// Index in `content`.
        content_index: usize,
    },
    /// Reasoning text arrived.
    ThinkingDelta {
        /// Index in `content`.
        content_index: usize,
        /// The new text.
        delta: String,
    },
    /// A thinking block closed.
    ThinkingEnd {
        /// Index in `content`.
        content_index: usize,
        /// The block's full reasoning text.
        content: String,
    },
    /// A tool call opened.
    ToolCallStart {
        /// Index in `content`.
        content_index: usize,
    },
    /// Argument JSON arrived (the partial message holds the arguments parsed so far).
    ToolCallDelta {
        /// Index in `content`.
        content_index: usize,
        /// The new argument text.
        delta: String,
    },
    /// A tool call closed with its final arguments.
    ToolCallEnd {
        /// Index in `content`.
        content_index: usize,
        /// The finished call.
        tool_call: ToolCall,
    },
    /// The message finished (`stop`, `length` or `toolUse`).
    Done {
        /// The stop reason.
        reason: StopReason,
        /// The final message (boxed: every event is moved through the queue, and the
        /// message is most of a terminal event's size).
        message: Box<AssistantMessage>,
    },
    /// The call failed or was aborted; the message keeps the partial content.
    Error {
        /// `error` or `aborted`.
        reason: StopReason,
        /// The final message, with `errorMessage`.
        message: Box<AssistantMessage>,
        /// The classified cause.
        error: AiError,
    },
}

fn stop_reason_name(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Stop => "stop",
        StopReason::Length => "length",
        StopReason::ToolUse => "toolUse",
        StopReason::Error => "error",
        StopReason::Aborted => "aborted",
        StopReason::Pending => "pending",
        StopReason::Unknown => "unknown",
    }
}

fn message_value(message: &AssistantMessage) -> Value {
    let mut value = serde_json::to_value(message).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        // The reference's message objects carry `role` first.
        let mut with_role = Map::new();
        with_role.insert("role".to_owned(), Value::String("assistant".to_owned()));
        with_role.extend(std::mem::take(map));
        return Value::Object(with_role);
    }
    value
}

impl StreamEvent {
    /// Returns the reference's `AssistantMessageEvent` JSON for this event, with `partial`
    /// (the message so far, from [`AssistantStream::partial`]) where the reference puts it.
    pub fn to_json(&self, partial: &AssistantMessage) -> Value {
        let partial_value = || message_value(partial);
        match self {
            Self::Start => json!({"type": "start", "partial": partial_value()}),
            Self::TextStart { content_index } => {
                json!({"type": "text_start", "contentIndex": content_index, "partial": partial_value()})
            }
            Self::TextDelta {
                content_index,
                delta,
            } => {
                json!({"type": "text_delta", "contentIndex": content_index, "delta": delta, "partial": partial_value()})
            }
            Self::TextEnd {
                content_index,
                content,
            } => {
                json!({"type": "text_end", "contentIndex": content_index, "content": content, "partial": partial_value()})
            }
            Self::ThinkingStart { content_index } => {
                json!({"type": "thinking_start", "contentIndex": content_index, "partial": partial_value()})
            }
            Self::ThinkingDelta {
                content_index,
                delta,
            } => {
                json!({"type": "thinking_delta", "contentIndex": content_index, "delta": delta, "partial": partial_value()})
            }
            Self::ThinkingEnd {
                content_index,
                content,
            } => {
                json!({"type": "thinking_end", "contentIndex": content_index, "content": content, "partial": partial_value()})
            }
            Self::ToolCallStart { content_index } => {
                json!({"type": "toolcall_start", "contentIndex": content_index, "partial": partial_value()})
            }
            Self::ToolCallDelta {
                content_index,
                delta,
            } => {
                json!({"type": "toolcall_delta", "contentIndex": content_index, "delta": delta, "partial": partial_value()})
            }
            Self::ToolCallEnd {
                content_index,
                tool_call,
            } => {
                let mut call = serde_json::to_value(tool_call).unwrap_or(Value::Null);
                if let Value::Object(map) = &mut call {
                    let mut typed = Map::new();
                    typed.insert("type".to_owned(), Value::String("toolCall".to_owned()));
                    typed.extend(std::mem::take(map));
                    call = Value::Object(typed);
                }
                json!({"type": "toolcall_end", "contentIndex": content_index, "toolCall": call, "partial": partial_value()})
            }
            Self::Done { reason, message } => {
                json!({"type": "done", "reason": stop_reason_name(*reason), "message": message_value(message)})
            }
            Self::Error {
                reason, message, ..
            } => {
                json!({"type": "error", "reason": stop_reason_name(*reason), "error": message_value(message)})
            }
        }
    }

    /// The reference's event type name (`text_delta`, `done`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::TextStart { .. } => "text_start",
            Self::TextDelta { .. } => "text_delta",
            Self::TextEnd { .. } => "text_end",
            Self::ThinkingStart { .. } => "thinking_start",
            Self::ThinkingDelta { .. } => "thinking_delta",
            Self::ThinkingEnd { .. } => "thinking_end",
            Self::ToolCallStart { .. } => "toolcall_start",
            Self::ToolCallDelta { .. } => "toolcall_delta",
            Self::ToolCallEnd { .. } => "toolcall_end",
            Self::Done { .. } => "done",
            Self::Error { .. } => "error",
        }
    }
}

/// Returns the empty assistant message a call starts from (the reference's `output`).
pub fn new_assistant_message(model: &Model, timestamp: i64) -> AssistantMessage {
    AssistantMessage {
        content: Vec::new(),
        api: model.api.clone(),
        provider: model.provider.clone(),
        model: model.id.clone(),
        usage: Default::default(),
        stop_reason: StopReason::Pending,
        timestamp,
        provider_thinking_level: None,
        response_id: None,
        response_model: None,
        raw_stop_reason: None,
        error_message: None,
        diagnostics: None,
        duration_ms: None,
        thinking_level: None,
        extra: Map::new(),
        key_order: crate::model::message::AssistantKeyOrder::created(),
    }
}

/// Joins a base URL and a path with exactly one `/` between them.
pub(crate) fn join_url(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.strip_suffix('/').unwrap_or(base),
        path.trim_start_matches('/')
    )
}
