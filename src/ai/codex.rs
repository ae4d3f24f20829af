//! The `openai-codex-responses` wire protocol: the ChatGPT Codex backend, `POST
//! <baseUrl>/codex/responses` (default base `https://chatgpt.com/backend-api`), a Responses
//! API stream authenticated with the ChatGPT sign-in token, exactly as 1.6.0's
//! `api/openai-codex-responses.js` shapes and reads it over its SSE transport.
//!
//! What is Codex's own, on top of [`crate::ai::responses`] (whose input conversion, tool
//! declarations and stream decoder it uses with [`Flavor::Codex`]):
//! - Auth: the token is a JWT; its `https://api.openai.com/auth` claim names the
//!   `chatgpt_account_id`, sent as `chatgpt-account-id` next to `Authorization: Bearer`.
//!   Headers: `originator: pi`, the identity headers, the model's and the caller's headers,
//!   then `OpenAI-Beta: responses=experimental`, `accept: text/event-stream`, and the session
//!   as `session-id` and `x-client-request-id`. The body goes zstd-compressed
//!   (`content-encoding: zstd`, [`compress_body`], applied by `ai::stream` after
//!   serialisation).
//! - Body: `model, store: false, stream: true, input, text: {verbosity: "low"}, include:
//!   ["reasoning.encrypted_content"], prompt_cache_key, tool_choice: "auto",
//!   parallel_tool_calls: true, max_output_tokens, tools, reasoning`. The system prompt is a
//!   leading `developer` item (never `instructions`); thinking `off` is sent as effort `none`
//!   (so a `configuration_update` switch to it keeps the cache); tools carry `strict: null`
//!   unless they ask for strict sampling.
//! - Stream: `error` events fail the call with `Codex error: <message>`, `response.failed`
//!   with the response's error message; `response.done`, `response.completed` and
//!   `response.incomplete` all end the stream as a completed response (unknown statuses
//!   dropped). The `event:` line is ignored; unreadable JSON fails with `Invalid Codex SSE
//!   JSON: <serde's complaint>` (V8's there).
//! - HTTP failures: the body's `error.message`, or `You have hit your ChatGPT usage limit
//!   (<plan> plan). Try again in ~N min.` for 429s and usage-limit codes. Retries follow
//!   Codex's loop: 429 (unless the body names a quota or billing limit), 500, 502–504 and
//!   bodies that read like rate limits or overload wait `retry-after-ms`/`retry-after`; every
//!   other failure but a usage limit is re-sent too, after a backoff doubling from twice the
//!   transport's first step, without jitter.
//!
//! Departures: the reference's default transport is a WebSocket (`transport: "auto"`),
//! falling back to this SSE transport when the socket fails; pi speaks only SSE (the
//! reference's `transport: "sse"`), so no `previous_response_id` continuation. Tokens are
//! decoded with either base64 alphabet (the reference's `atob` takes only the standard one).
//! Not carried over: OpenAI grammar tools (sent as function tools), `end_turn`,
//! `service_tier`/`temperature`/`textVerbosity` requests (the agent never sets them).

use std::collections::VecDeque;

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::ai::models::{Model, ThinkingLevel, clamp_thinking_level};
use crate::ai::request::{clamp_max_tokens_to_context, identity_headers};
use crate::ai::responses::{
    Flavor, ResponsesCompat, ResponsesDecoder, convert_messages, convert_tools, prompt_cache_key,
};
use crate::ai::transcript::{normalize_context, resolve_transcript, resolve_transcript_tools};
use crate::ai::transport::{WireRequest, set_header_ci};
use crate::ai::{CacheRetention, Request, StreamEvent, StreamOptions};
use crate::model::message::{AssistantMessage, StopReason};
use crate::support::json::to_js_string;

/// The backend when a model names none.
const DEFAULT_BASE_URL: &str = "https://chatgpt.com/backend-api";
/// The JWT claim that carries the account.
const JWT_CLAIM: &str = "https://api.openai.com/auth";
/// The Responses API rejects `max_output_tokens` below 16.
const MIN_OUTPUT_TOKENS: u64 = 16;
/// The `reasoning.effort` sent while `configuration_update` items carry the level.
const CONFIGURATION_UPDATE_REQUEST_EFFORT: &str = "medium";
/// The zstd level of request bodies (the official Codex client's).
const REQUEST_COMPRESSION_ZSTD_LEVEL: i32 = 3;

/// Compresses a serialised request body (`compressRequestBodyZstd`); `None` when that fails,
/// and the body then goes uncompressed, as the reference's fallback sends it.
pub fn compress_body(body: &[u8]) -> Option<Vec<u8>> {
    zstd::bulk::compress(body, REQUEST_COMPRESSION_ZSTD_LEVEL).ok()
}

/// The endpoint of a base URL (`resolveCodexUrl`).
pub fn endpoint(base_url: &str) -> String {
    let raw = if base_url.trim().is_empty() {
        DEFAULT_BASE_URL
    } else {
        base_url
    };
    let normalized = raw.trim_end_matches('/');
    if normalized.ends_with("/codex/responses") {
        normalized.to_owned()
    } else if normalized.ends_with("/codex") {
        format!("{normalized}/responses")
    } else {
        format!("{normalized}/codex/responses")
    }
}

/// The ChatGPT account a sign-in token belongs to (`extractAccountId`).
pub fn account_id(token: &str) -> Result<String, String> {
    let failed = || "Failed to extract accountId from token".to_owned();
    let parts: Vec<&str> = token.split('.').collect();
    let [_, payload, _] = parts.as_slice() else {
        return Err(failed());
    };
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let standard: String = payload
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            other => other,
        })
        .collect();
    let bytes = engine.decode(standard).map_err(|_| failed())?;
    let claims: Value = serde_json::from_slice(&bytes).map_err(|_| failed())?;
    match claims
        .get(JWT_CLAIM)
        .and_then(|claim| claim.get("chatgpt_account_id"))
    {
        Some(Value::String(id)) if !id.is_empty() => Ok(id.clone()),
        Some(value) if crate::ai::openai::truthy(value) => Ok(to_js_string(value)),
        _ => Err(failed()),
    }
}

/// The effort `streamSimple` asks for: the clamped level, `none` for `off` on reasoning
/// models, nothing otherwise.
fn requested_effort(model: &Model, options: &StreamOptions) -> Option<&'static str> {
    let level = match options.thinking {
        ThinkingLevel::Off => ThinkingLevel::Off,
        requested => clamp_thinking_level(model, requested),
    };
    match level {
        ThinkingLevel::Off => model.reasoning.then_some("none"),
        level => Some(level.as_str()),
    }
}

/// `resolveReasoningEffort`: the provider's effort for a level (`null` where the model takes
/// no reasoning field for it).
fn resolve_effort(model: &Model, effort: &str) -> Value {
    let map = model.thinking_level_map.as_ref();
    if effort == "none" {
        return match map.and_then(|map| map.get("off")) {
            None => json!("none"),
            Some(value) => value.clone(),
        };
    }
    match map.and_then(|map| map.get(effort)) {
        None | Some(Value::Null) => json!(effort),
        Some(value) => value.clone(),
    }
}

/// The effort sent in `configuration_update` items (`getConfigurationUpdateEffort`), also the
/// message's `providerThinkingLevel`.
pub fn configuration_update_effort(model: &Model, options: &StreamOptions) -> Option<Value> {
    if model.compat_bool("supportsMidConvoEffort") != Some(true) {
        return None;
    }
    let effort = resolve_effort(model, requested_effort(model, options)?);
    (!effort.is_null()).then_some(effort)
}

/// Builds the HTTP request of one call (`buildRequestBody` + `buildSSEHeaders`); `Err` with
/// the reference's text when it cannot be built (a token without an account).
pub fn build_request(
    model: &Model,
    request: &Request,
    options: &StreamOptions,
) -> Result<WireRequest, String> {
    let token = options.api_key.as_deref().unwrap_or("");
    let account = account_id(token)?;
    let base_url = options
        .base_url
        .as_deref()
        .filter(|url| !url.is_empty())
        .unwrap_or(&model.base_url);
    let session = match options.cache_retention {
        CacheRetention::None => None,
        _ => options.session_id.as_deref().map(prompt_cache_key),
    };
    // Codex expects an originator on every request; it is not attribution.
    let mut headers = vec![("originator".to_owned(), "pi".to_owned())];
    let model_headers = model
        .headers
        .iter()
        .flatten()
        .filter_map(|(name, value)| Some((name.clone(), value.as_str()?.to_owned())));
    for (name, value) in identity_headers(model, &options.identity)
        .into_iter()
        .chain(model_headers)
        .chain(options.headers.iter().cloned())
    {
        set_header_ci(&mut headers, &name, &value);
    }
    set_header_ci(&mut headers, "Authorization", &format!("Bearer {token}"));
    set_header_ci(&mut headers, "chatgpt-account-id", &account);
    set_header_ci(&mut headers, "OpenAI-Beta", "responses=experimental");
    set_header_ci(&mut headers, "accept", "text/event-stream");
    set_header_ci(&mut headers, "content-type", "application/json");
    if let Some(session) = &session {
        set_header_ci(&mut headers, "session-id", session);
        set_header_ci(&mut headers, "x-client-request-id", session);
    }
    let body = build_body(model, request, options, session.as_deref())?;
    Ok(WireRequest {
        url: endpoint(base_url),
        headers,
        body,
    })
}

/// The request body (`buildRequestBody`), in its key order.
fn build_body(
    model: &Model,
    request: &Request,
    options: &StreamOptions,
    session: Option<&str>,
) -> Result<Value, String> {
    let compat = ResponsesCompat::resolve(model, Flavor::Codex);
    let transcript = normalize_context(request);
    let resolved = resolve_transcript(
        transcript.to_vec(),
        compat.supports_mid_convo_system_messages,
    );
    let transcript_tools = resolve_transcript_tools(&resolved, compat.tool_support());
    let update_effort = configuration_update_effort(model, options);
    let input = convert_messages(
        model,
        &resolved,
        Flavor::Codex,
        &compat,
        update_effort.as_ref(),
    )?;
    let max_tokens = clamp_max_tokens_to_context(
        model,
        &transcript,
        options.max_tokens.unwrap_or(model.max_tokens),
    );
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("store".into(), Value::Bool(false));
    body.insert("stream".into(), Value::Bool(true));
    body.insert("input".into(), Value::Array(input));
    body.insert("text".into(), json!({"verbosity": "low"}));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    if let Some(session) = session {
        body.insert("prompt_cache_key".into(), json!(session));
    }
    body.insert("tool_choice".into(), json!("auto"));
    body.insert("parallel_tool_calls".into(), Value::Bool(true));
    if max_tokens > 0 && compat.supports_max_output_tokens {
        body.insert(
            "max_output_tokens".into(),
            json!(max_tokens.max(MIN_OUTPUT_TOKENS)),
        );
    }
    if !transcript_tools.request_tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(convert_tools(
                &transcript_tools.request_tools,
                Flavor::Codex,
                &compat,
                false,
            )?),
        );
    }
    match requested_effort(model, options) {
        Some(requested) => {
            let effort = if update_effort.is_some() {
                json!(CONFIGURATION_UPDATE_REQUEST_EFFORT)
            } else {
                resolve_effort(model, requested)
            };
            if !effort.is_null() {
                body.insert(
                    "reasoning".into(),
                    json!({"effort": effort, "summary": "auto"}),
                );
            }
        }
        None => {
            let off = model
                .thinking_level_map
                .as_ref()
                .and_then(|map| map.get("off"));
            if model.reasoning && !matches!(off, Some(Value::Null)) {
                let effort = off.cloned().unwrap_or_else(|| json!("none"));
                body.insert("reasoning".into(), json!({"effort": effort}));
            }
        }
    }
    Ok(Value::Object(body))
}

/// Rate limits that retrying cannot fix (`isTerminalRateLimitError`).
fn is_terminal_rate_limit(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    [
        "gousagelimiterror",
        "freeusagelimiterror",
        "monthly usage limit reached",
        "available balance",
        "insufficient_quota",
        "out of budget",
        "quota exceeded",
        "billing",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// Whether a failed response is worth sending again (`isRetryableError`).
pub fn is_retryable_error(status: u16, text: &str) -> bool {
    static RETRYABLE_TEXT: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(
        || {
            regex::Regex::new(
                r"(?i)rate.?limit|overloaded|service.?unavailable|upstream.?connect|connection.?refused",
            )
            .ok()
        },
    );
    if status == 429 && is_terminal_rate_limit(text) {
        return false;
    }
    if matches!(status, 429 | 500 | 502 | 503 | 504) {
        return true;
    }
    RETRYABLE_TEXT
        .as_ref()
        .is_some_and(|pattern| pattern.is_match(text))
}

/// The error text of a failed HTTP response (`parseErrorResponse`: the friendly usage-limit
/// message, else the error's message, else the body or the status text). `now_ms` dates a
/// `resets_at` (without it the wait is left out).
pub fn http_error_text(status: u16, body: &str, now_ms: Option<i64>) -> String {
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|code| code.canonical_reason())
        .unwrap_or("");
    let mut message = if !body.is_empty() {
        body.to_owned()
    } else if !reason.is_empty() {
        reason.to_owned()
    } else {
        "Request failed".to_owned()
    };
    let mut friendly = None;
    if let Ok(parsed) = serde_json::from_str::<Value>(body)
        && let Some(error) = parsed.get("error").filter(|e| crate::ai::openai::truthy(e))
    {
        let text_of = |key: &str| {
            error
                .get(key)
                .filter(|value| crate::ai::openai::truthy(value))
                .map(|value| match value {
                    Value::String(text) => text.clone(),
                    other => to_js_string(other),
                })
        };
        let code = text_of("code")
            .or_else(|| text_of("type"))
            .unwrap_or_default();
        let limit_code = [
            "usage_limit_reached",
            "usage_not_included",
            "rate_limit_exceeded",
        ]
        .iter()
        .any(|needle| code.to_ascii_lowercase().contains(needle));
        if limit_code || status == 429 {
            let plan = text_of("plan_type")
                .map(|plan| format!(" ({} plan)", plan.to_lowercase()))
                .unwrap_or_default();
            let when = match (
                error
                    .get("resets_at")
                    .and_then(Value::as_f64)
                    .filter(|at| *at != 0.0),
                now_ms,
            ) {
                (Some(resets_at), Some(now)) => {
                    let minutes = ((resets_at * 1000.0 - now as f64) / 60000.0)
                        .round()
                        .max(0.0);
                    format!(" Try again in ~{minutes} min.")
                }
                _ => String::new(),
            };
            friendly = Some(
                format!("You have hit your ChatGPT usage limit{plan}.{when}")
                    .trim()
                    .to_owned(),
            );
        }
        if let Some(text) = text_of("message").or_else(|| friendly.clone()) {
            message = text;
        }
    }
    friendly.unwrap_or(message)
}

/// Codex's reading of the stream (`mapCodexEvents` over `parseSSE`) feeding the shared
/// Responses decoder.
pub struct CodexDecoder {
    inner: ResponsesDecoder,
}

impl CodexDecoder {
    /// Starts decoding into `message` (the empty message of [`crate::ai::new_assistant_message`]).
    pub fn new(message: AssistantMessage, model: &Model) -> Self {
        Self {
            inner: ResponsesDecoder::new(message, model, Flavor::Codex),
        }
    }

    /// Returns the message as built so far.
    pub fn message(&self) -> &AssistantMessage {
        self.inner.message()
    }

    /// Returns the message for final edits.
    pub fn message_mut(&mut self) -> &mut AssistantMessage {
        self.inner.message_mut()
    }

    /// Takes the message.
    pub fn into_message(self) -> AssistantMessage {
        self.inner.into_message()
    }

    /// Sets the time diagnostics are stamped with.
    pub fn set_now(&mut self, now_ms: i64) {
        self.inner.set_now(now_ms);
    }

    /// Re-parses the partial arguments of tool calls that received text.
    pub fn refresh(&mut self) {
        self.inner.refresh();
    }

    /// Processes one SSE frame's data: a terminal response ends the stream (`Ok(true)`),
    /// error events and failed responses fail it, anything else goes to the Responses decoder.
    pub fn on_frame(
        &mut self,
        data: &str,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<bool, String> {
        let data = data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(false);
        }
        if self.inner.on_delta(data, out) {
            return Ok(false);
        }
        let event: Value =
            serde_json::from_str(data).map_err(|err| format!("Invalid Codex SSE JSON: {err}"))?;
        let Some(kind) = event.get("type").and_then(Value::as_str) else {
            return Ok(false);
        };
        match kind {
            "error" => {
                let nested = event.get("error").filter(|error| error.is_object());
                let field = |key: &str| {
                    event
                        .get(key)
                        .and_then(Value::as_str)
                        .or_else(|| {
                            nested
                                .and_then(|error| error.get(key))
                                .and_then(Value::as_str)
                        })
                        .filter(|text| !text.is_empty())
                };
                let text = field("message")
                    .or_else(|| field("code"))
                    .map(str::to_owned)
                    .unwrap_or_else(|| to_js_string(&event));
                Err(format!("Codex error: {text}"))
            }
            "response.failed" => Err(event
                .pointer("/response/error/message")
                .filter(|message| crate::ai::openai::truthy(message))
                .map(|message| match message {
                    Value::String(text) => text.clone(),
                    other => to_js_string(other),
                })
                .unwrap_or_else(|| "Codex response failed".to_owned())),
            "response.done" | "response.completed" | "response.incomplete" => {
                let mut response = event.get("response").cloned().unwrap_or(Value::Null);
                if let Value::Object(map) = &mut response {
                    let known = map.get("status").and_then(Value::as_str).filter(|status| {
                        matches!(
                            *status,
                            "completed"
                                | "incomplete"
                                | "failed"
                                | "cancelled"
                                | "queued"
                                | "in_progress"
                        )
                    });
                    match known.map(str::to_owned) {
                        Some(status) => {
                            map.insert("status".into(), Value::String(status));
                        }
                        None => {
                            map.shift_remove("status");
                        }
                    }
                }
                let completed = json!({"type": "response.completed", "response": response});
                self.inner.on_event(&completed, out)?;
                Ok(true)
            }
            _ => {
                self.inner.on_event(&event, out)?;
                Ok(false)
            }
        }
    }

    /// The stream ended: the Responses decoder's checks, then Codex's stop-reason check.
    pub fn complete(&mut self) -> Result<StopReason, String> {
        self.inner.complete()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token whose payload names `account`.
    fn token(account: &str) -> String {
        let claims = json!({JWT_CLAIM: {"chatgpt_account_id": account}});
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims.to_string());
        format!("e30.{payload}.sig")
    }

    #[test]
    fn account_ids_come_from_the_token() {
        assert_eq!(account_id(&token("acc-1")).unwrap(), "acc-1");
        assert_eq!(
            account_id("not-a-jwt").unwrap_err(),
            "Failed to extract accountId from token"
        );
        assert!(account_id("a.e30.c").is_err());
    }

    #[test]
    fn endpoints_end_in_codex_responses() {
        assert_eq!(
            endpoint(""),
            "https://chatgpt.com/backend-api/codex/responses"
        );
        assert_eq!(endpoint("http://h/x/"), "http://h/x/codex/responses");
        assert_eq!(endpoint("http://h/codex"), "http://h/codex/responses");
        assert_eq!(
            endpoint("http://h/codex/responses/"),
            "http://h/codex/responses"
        );
    }

    #[test]
    fn http_errors_read_like_the_reference() {
        assert_eq!(
            http_error_text(
                429,
                r#"{"error":{"type":"usage_limit_reached","plan_type":"PLUS","resets_at":1200}}"#,
                Some(0)
            ),
            "You have hit your ChatGPT usage limit (plus plan). Try again in ~20 min."
        );
        assert_eq!(
            http_error_text(400, r#"{"error":{"message":"bad input"}}"#, None),
            "bad input"
        );
        assert_eq!(http_error_text(502, "", None), "Bad Gateway");
        assert!(is_retryable_error(503, ""));
        assert!(!is_retryable_error(429, "insufficient_quota"));
        assert!(is_retryable_error(400, "model overloaded"));
        assert!(!is_retryable_error(400, "bad input"));
    }
}
