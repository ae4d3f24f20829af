//! HTTP for one call: sending the request, the reference SDKs' transport retry, and the
//! wording of HTTP failures (`spec/models-providers-settings.md` §11.1, §11.4).
//!
//! Retry rule: a request that failed before any of its response body was consumed — a
//! connection error, a timeout before the headers, or a status of 408, 409, 429 or ≥ 500
//! (`x-should-retry: true|false` overrides) — is sent again, up to `max_retries` extra times.
//! The wait is `retry-after-ms`, else `retry-after` (seconds or an HTTP date), else
//! `min(initial · 2^k, 8 s)` minus up to 25 % jitter. A server-requested wait above
//! `max_retry_delay` fails at once with a message containing `retry delay`. Nothing else
//! re-sends: once the body is being read, a failure belongs to the caller.
//!
//! Error texts are the SDKs': `"<status> <message>"` where the message is the body's
//! `error.message` (OpenAI style) or the whole body JSON (Anthropic style), the raw text for a
//! non-JSON body, `"<status> status code (no body)"` for none; `Connection error.`,
//! `Request timed out.`, `Request was aborted.`.

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::ai::TransportConfig;
use crate::support::clock::Clock;
use crate::support::ids::IdSource;
use crate::support::json::to_js_string;

/// One HTTP request as built by a protocol module: `POST url` with these headers and body.
#[derive(Clone, Debug, PartialEq)]
pub struct WireRequest {
    /// The endpoint.
    pub url: String,
    /// Headers in sending order (names as written; unique case-insensitively).
    pub headers: Vec<(String, String)>,
    /// The JSON body (serialised as `JSON.stringify` would).
    pub body: Value,
}

/// Sets a header, replacing any existing one with the same name in any letter case.
pub fn set_header_ci(headers: &mut Vec<(String, String)>, name: &str, value: &str) {
    match headers
        .iter_mut()
        .find(|(existing, _)| existing.eq_ignore_ascii_case(name))
    {
        Some(entry) => *entry = (name.to_owned(), value.to_owned()),
        None => headers.push((name.to_owned(), value.to_owned())),
    }
}

/// The SDKs' `APIError.makeMessage`: the status and the error's `message` (a non-string
/// message as JSON), else the error object as JSON, else `text`.
pub fn api_error_message(status: Option<u16>, error: Option<&Value>, text: Option<&str>) -> String {
    let truthy = |value: &Value| match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    };
    let error = error.filter(|error| truthy(error));
    let message = match error {
        Some(error) => match error.get("message").filter(|message| truthy(message)) {
            Some(Value::String(message)) => Some(message.clone()),
            Some(message) => Some(to_js_string(message)),
            None => Some(to_js_string(error)),
        },
        None => text.filter(|text| !text.is_empty()).map(str::to_owned),
    };
    match (status, message) {
        (Some(status), Some(message)) => format!("{status} {message}"),
        (Some(status), None) => format!("{status} status code (no body)"),
        (None, Some(message)) => message,
        (None, None) => "(no status code or body)".to_owned(),
    }
}

/// Where a provider puts the error object in a failed response's JSON body, and how the
/// failure is worded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorBodyStyle {
    /// `{"error": {...}}`: the `error` member (OpenAI SDK).
    ErrorMember,
    /// The whole body (Anthropic SDK).
    WholeBody,
    /// The `error` member (OpenAI SDK), worded `"<prefix> (<status>): <error JSON or
    /// message>"` (`formatProviderError` with a prefix, as the Responses transports do).
    Prefixed(String),
    /// `@google/genai`: the JSON body re-serialised (or the text wrapped in an error object),
    /// and no server-requested delay (the reference's Google retry never sees the headers).
    Google,
    /// The AWS SDK (Bedrock): the `x-amzn-errortype` exception's prefix and the body's
    /// `message` (`Throttling error: …`).
    Bedrock,
    /// Mistral (`fetch`, no SDK): `Mistral API error (<status>): <body or status text>`.
    Mistral,
    /// The ChatGPT Codex backend: the `error.message` (a usage-limit notice for 429s and
    /// usage-limit codes), and the Codex retry rule (the body decides, no jitter).
    Codex,
}

/// The longest provider error body kept in an error text (`MAX_PROVIDER_ERROR_BODY_CHARS`).
const MAX_ERROR_BODY_CHARS: usize = 4000;

/// `truncateErrorText`: at most [`MAX_ERROR_BODY_CHARS`] UTF-16 units, then how many were cut.
pub(crate) fn truncate_error_text(text: &str) -> String {
    let units = text.encode_utf16().count();
    if units <= MAX_ERROR_BODY_CHARS {
        return text.to_owned();
    }
    let kept = crate::ai::openai::utf16_prefix(text, MAX_ERROR_BODY_CHARS);
    format!(
        "{kept}... [truncated {} chars]",
        units - MAX_ERROR_BODY_CHARS
    )
}

/// The error text of an OpenAI SDK error as 1.6.0 words it (`formatProviderError` over
/// `normalizeProviderError`): the SDK message, or `"<status>: <error JSON>"` when the message
/// does not already carry the error object; OpenRouter's `metadata.raw` appended.
pub fn openai_error_text(status: Option<u16>, error: Option<&Value>, text: Option<&str>) -> String {
    let message = api_error_message(status, error, text);
    let body = error
        .filter(|error| error.as_object().is_some_and(|map| !map.is_empty()))
        .map(|error| truncate_error_text(to_js_string(error).trim()));
    let mut formatted = match (status, body) {
        (Some(status), Some(body)) if !message.contains(&body) => format!("{status}: {body}"),
        _ => message,
    };
    if let Some(raw) = error
        .and_then(|error| error.get("metadata"))
        .and_then(|metadata| metadata.get("raw"))
        .filter(|raw| match raw {
            Value::Null => false,
            Value::Bool(flag) => *flag,
            Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
            Value::String(text) => !text.is_empty(),
            Value::Array(_) | Value::Object(_) => true,
        })
    {
        let raw = match raw {
            Value::String(text) => text.clone(),
            Value::Object(_) => "[object Object]".to_owned(),
            other => to_js_string(other),
        };
        if !formatted.contains(&raw) {
            formatted.push('\n');
            formatted.push_str(&raw);
        }
    }
    formatted
}

/// Returns the error text of a failed HTTP response.
pub fn status_error_message(status: u16, body: &str, style: &ErrorBodyStyle) -> String {
    error_texts(status, body, style).1
}

/// The SDK's own message of a failed response (`APIError.message`), and the text 1.6.0 makes
/// of it.
fn error_texts(status: u16, body: &str, style: &ErrorBodyStyle) -> (String, String) {
    let json = serde_json::from_str::<Value>(body).ok();
    // The SDKs use the parsed body only when it is truthy (`errJSON ? undefined : errText`).
    let json = json.filter(|json| match json {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    });
    // `makeStatusError`: an object without an `error` member is the error itself.
    let error_member = |json: &Value| match json {
        Value::Object(map) if map.get("error").is_none_or(Value::is_null) => Some(json.clone()),
        Value::Array(_) => Some(json.clone()),
        Value::Object(map) => map.get("error").cloned(),
        _ => None,
    };
    match (style, json) {
        (ErrorBodyStyle::Bedrock, _) => {
            let text = crate::ai::bedrock::http_error_text(status, None, body);
            (text.clone(), text)
        }
        (ErrorBodyStyle::Mistral, _) => {
            let text = crate::ai::mistral::http_error_text(status, body);
            (text.clone(), text)
        }
        (ErrorBodyStyle::Codex, _) => {
            let text = crate::ai::codex::http_error_text(status, body, None);
            (text.clone(), text)
        }
        (ErrorBodyStyle::Google, _) => {
            let text = crate::ai::google::http_error_text(status, Some("application/json"), body);
            (text.clone(), text)
        }
        (ErrorBodyStyle::Prefixed(prefix), json) => {
            let error = json.as_ref().and_then(error_member);
            let sdk_message = api_error_message(Some(status), error.as_ref(), Some(body));
            // `normalizeProviderError`: a plain non-empty error object is the body.
            let error_body = error
                .as_ref()
                .filter(|error| error.as_object().is_some_and(|map| !map.is_empty()))
                .map(|error| truncate_error_text(to_js_string(error).trim()));
            let text = match error_body {
                Some(error_body) if !sdk_message.contains(&error_body) => {
                    format!("{prefix} ({status}): {error_body}")
                }
                _ => format!("{prefix} ({status}): {sdk_message}"),
            };
            (sdk_message, text)
        }
        (ErrorBodyStyle::ErrorMember, Some(json)) => {
            let error = error_member(&json);
            (
                api_error_message(Some(status), error.as_ref(), None),
                openai_error_text(Some(status), error.as_ref(), None),
            )
        }
        (ErrorBodyStyle::ErrorMember, None) => (
            api_error_message(Some(status), None, Some(body)),
            openai_error_text(Some(status), None, Some(body)),
        ),
        (ErrorBodyStyle::WholeBody, Some(json)) => {
            let text = api_error_message(Some(status), Some(&json), None);
            (text.clone(), text)
        }
        (ErrorBodyStyle::WholeBody, None) => {
            let text = api_error_message(Some(status), None, Some(body));
            (text.clone(), text)
        }
    }
}

/// A request that failed before its body was handed over.
#[derive(Clone, Debug, PartialEq)]
pub struct SendFailure {
    /// The error text.
    pub message: String,
    /// The HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// The delay the server asked for.
    pub retry_after: Option<Duration>,
    /// The caller cancelled.
    pub aborted: bool,
    /// The response's `x-amzn-errortype` and `x-amzn-requestid` (Bedrock diagnostics).
    pub aws_error: Option<(Option<String>, Option<String>)>,
}

impl SendFailure {
    fn aborted() -> Self {
        Self {
            message: "Request was aborted.".to_owned(),
            status: None,
            retry_after: None,
            aborted: true,
            aws_error: None,
        }
    }
}

/// Parses the leading number of a header value (JavaScript's `parseFloat`).
fn parse_float_prefix(text: &str) -> Option<f64> {
    let text = text.trim_start();
    let mut end = 0;
    let bytes = text.as_bytes();
    let mut seen_digit = false;
    let mut seen_dot = false;
    let mut seen_exp = false;
    while end < bytes.len() {
        let byte = bytes[end];
        let ok = match byte {
            b'0'..=b'9' => {
                seen_digit = true;
                true
            }
            b'+' | b'-' => end == 0 || matches!(bytes[end - 1], b'e' | b'E'),
            b'.' if !seen_dot && !seen_exp => {
                seen_dot = true;
                true
            }
            b'e' | b'E' if seen_digit && !seen_exp => {
                seen_exp = true;
                true
            }
            _ => false,
        };
        if !ok {
            break;
        }
        end += 1;
    }
    let mut candidate = &text[..end];
    while !candidate.is_empty() {
        if let Ok(value) = candidate.parse::<f64>() {
            return Some(value);
        }
        candidate = &candidate[..candidate.len() - 1];
    }
    None
}

/// The delay a response asks for: `retry-after-ms`, else `retry-after` (seconds or HTTP date).
pub fn requested_delay(headers: &reqwest::header::HeaderMap, now_ms: i64) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let millis = header("retry-after-ms")
        .filter(|value| !value.is_empty())
        .and_then(parse_float_prefix)
        .or_else(|| {
            let value = header("retry-after")?;
            match parse_float_prefix(value) {
                Some(seconds) => Some(seconds * 1000.0),
                None => chrono::DateTime::parse_from_rfc2822(value)
                    .ok()
                    .map(|date| (date.timestamp_millis() - now_ms) as f64),
            }
        })?;
    Some(Duration::from_secs_f64(
        (millis.max(0.0) / 1000.0).min(1.0e9),
    ))
}

fn should_retry(response: &reqwest::Response) -> bool {
    match response
        .headers()
        .get("x-should-retry")
        .and_then(|value| value.to_str().ok())
    {
        Some("true") => return true,
        Some("false") => return false,
        _ => {}
    }
    let status = response.status().as_u16();
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// Codex's backoff: twice the first step, doubling, no jitter and no cap (1 s, 2 s, 4 s … with
/// the default step, as the reference's `BASE_DELAY_MS * 2 ** attempt`).
fn codex_delay(config: &TransportConfig, retries_done: u32) -> Duration {
    config
        .initial_retry_delay
        .saturating_mul(2u32.saturating_pow(retries_done.min(30) + 1))
}

/// A failed Codex response, as the reference's retry loop treats it: while retries remain,
/// a retryable one (`isRetryableError`, which reads the body) waits for the server's delay,
/// anything else but a usage limit for the plain backoff. `Ok` with the wait before the next
/// attempt, `Err` with the final failure.
async fn codex_failure(
    response: reqwest::Response,
    ctx: &SendContext<'_>,
    can_retry: bool,
    retries_done: u32,
) -> Result<Duration, SendFailure> {
    let status = response.status().as_u16();
    let requested = requested_delay(response.headers(), ctx.clock.now_ms());
    let text = read_error_body(response, ctx).await?;
    let failure = |message: String| SendFailure {
        message,
        status: Some(status),
        retry_after: requested,
        aborted: false,
        aws_error: None,
    };
    if !can_retry {
        return Err(failure(crate::ai::codex::http_error_text(
            status,
            &text,
            Some(ctx.clock.now_ms()),
        )));
    }
    if !crate::ai::codex::is_retryable_error(status, &text) {
        // The reference re-sends any other failure too (its catch-all retry), after the
        // plain backoff, unless the text names a usage limit.
        let message = crate::ai::codex::http_error_text(status, &text, Some(ctx.clock.now_ms()));
        if message.contains("usage limit") {
            return Err(failure(message));
        }
        return Ok(codex_delay(ctx.config, retries_done));
    }
    match (requested, ctx.config.max_retry_delay) {
        (Some(requested), Some(cap)) if !cap.is_zero() && requested > cap => {
            // `validateRetryDelayMs`: whole seconds, rounded up, and nothing else.
            Err(failure(format!(
                "Server requested {}s retry delay (max: {}s)",
                requested.as_millis().div_ceil(1000),
                cap.as_millis().div_ceil(1000)
            )))
        }
        (Some(requested), _) => Ok(requested),
        (None, _) => Ok(codex_delay(ctx.config, retries_done)),
    }
}

/// The wait before re-sending after a connection failure.
fn connection_retry_delay(ctx: &SendContext<'_>, retries_done: u32) -> Duration {
    match ctx.error_style {
        ErrorBodyStyle::Codex => codex_delay(ctx.config, retries_done),
        _ => default_delay(ctx.config, retries_done, ctx.ids),
    }
}

/// The SDKs' default backoff: `min(initial · 2^retries, 8 s) · (1 − jitter)`, jitter ≤ 25 %.
fn default_delay(config: &TransportConfig, retries_done: u32, ids: &IdSource) -> Duration {
    let base = config.initial_retry_delay.as_secs_f64() * 2f64.powi(retries_done.min(30) as i32);
    let capped = base.min(8.0);
    let jitter = (ids.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    Duration::from_secs_f64(capped * (1.0 - jitter * 0.25))
}

/// Everything [`send`] needs besides the request.
pub(crate) struct SendContext<'a> {
    pub http: &'a reqwest::Client,
    pub config: &'a TransportConfig,
    pub cancel: &'a CancellationToken,
    pub clock: &'a dyn Clock,
    pub ids: &'a IdSource,
    pub error_style: ErrorBodyStyle,
}

/// Sends the request with the transport retry; returns the first successful response (its
/// body not yet read).
pub(crate) async fn send(
    request: &WireRequest,
    body: &Bytes,
    ctx: &SendContext<'_>,
) -> Result<reqwest::Response, SendFailure> {
    let mut retries_done = 0u32;
    loop {
        let mut builder = ctx.http.post(&request.url);
        for (name, value) in &request.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let attempt = builder.body(body.clone()).send();
        let outcome = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Err(SendFailure::aborted()),
            result = tokio::time::timeout(ctx.config.request_timeout, attempt) => result,
        };
        let can_retry = retries_done < ctx.config.max_retries;
        let failure_delay = match outcome {
            Ok(Ok(response)) if response.status().is_success() => return Ok(response),
            Ok(Ok(response)) if ctx.error_style == ErrorBodyStyle::Codex => {
                codex_failure(response, ctx, can_retry, retries_done).await?
            }
            Ok(Ok(response)) => {
                let status = response.status().as_u16();
                let google = matches!(ctx.error_style, ErrorBodyStyle::Google);
                let requested = if google {
                    None
                } else {
                    requested_delay(response.headers(), ctx.clock.now_ms())
                };
                let content_type = response
                    .headers()
                    .get(reqwest::header::CONTENT_TYPE)
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned);
                let aws_error = matches!(ctx.error_style, ErrorBodyStyle::Bedrock).then(|| {
                    let header = |name: &str| {
                        response
                            .headers()
                            .get(name)
                            .and_then(|value| value.to_str().ok())
                            .map(str::to_owned)
                    };
                    (header("x-amzn-errortype"), header("x-amzn-requestid"))
                });
                let retryable = should_retry(&response);
                let over_cap = match (requested, ctx.config.max_retry_delay) {
                    (Some(requested), Some(cap)) if !cap.is_zero() => requested > cap,
                    _ => false,
                };
                if retryable && can_retry && !over_cap {
                    tracing::info!(status, retries_done, "provider request failed; retrying");
                    requested.unwrap_or_else(|| default_delay(ctx.config, retries_done, ctx.ids))
                } else {
                    let text = read_error_body(response, ctx).await?;
                    let (sdk_message, mut message) = if google {
                        let text = crate::ai::google::http_error_text(
                            status,
                            content_type.as_deref(),
                            &text,
                        );
                        (text.clone(), text)
                    } else if let Some((error_type, _)) = &aws_error {
                        let text = crate::ai::bedrock::http_error_text(
                            status,
                            error_type.as_deref(),
                            &text,
                        );
                        (text.clone(), text)
                    } else {
                        error_texts(status, &text, &ctx.error_style)
                    };
                    if retryable && can_retry && over_cap {
                        // `validateServerRetryDelayMs`: whole seconds, rounded up.
                        let seconds = |duration: Option<Duration>| {
                            duration.map_or(0, |d| d.as_millis().div_ceil(1000))
                        };
                        message = format!(
                            "Server requested {}s retry delay (max: {}s). {sdk_message}",
                            seconds(requested),
                            seconds(ctx.config.max_retry_delay)
                        );
                    }
                    return Err(SendFailure {
                        message,
                        status: Some(status),
                        retry_after: requested,
                        aborted: false,
                        aws_error,
                    });
                }
            }
            Ok(Err(err)) => {
                let timed_out = err.is_timeout();
                tracing::info!(error = %err, retries_done, "provider connection failed");
                if !can_retry {
                    return Err(SendFailure {
                        message: if timed_out {
                            "Request timed out.".to_owned()
                        } else {
                            connection_error_text(&err, &request.url)
                        },
                        status: None,
                        retry_after: None,
                        aborted: false,
                        aws_error: None,
                    });
                }
                connection_retry_delay(ctx, retries_done)
            }
            Err(_elapsed) => {
                tracing::info!(retries_done, "provider request timed out");
                if !can_retry {
                    return Err(SendFailure {
                        message: "Request timed out.".to_owned(),
                        status: None,
                        retry_after: None,
                        aborted: false,
                        aws_error: None,
                    });
                }
                connection_retry_delay(ctx, retries_done)
            }
        };
        tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Err(SendFailure::aborted()),
            () = tokio::time::sleep(failure_delay) => {}
        }
        retries_done += 1;
    }
}

/// The SDKs' `Connection error.` with the deepest cause appended as Node words it (1.6.0's
/// `withCauseDetail`: `Connection error.: read ECONNRESET`, `…: connect ECONNREFUSED
/// 127.0.0.1:9`, `…: other side closed (UND_ERR_SOCKET)` for a peer that closed without
/// answering); without a cause we can name, the bare text. Node names the resolved address of
/// a refused connect; pi names the URL's host and port.
fn connection_error_text(err: &reqwest::Error, url: &str) -> String {
    const BASE: &str = "Connection error.";
    let mut io_kind = None;
    let mut closed_early = false;
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(current) = source {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            io_kind = Some(io.kind());
        }
        // hyper's `IncompleteMessage`: the connection ended before a response.
        if current
            .to_string()
            .contains("connection closed before message completed")
        {
            closed_early = true;
        }
        source = current.source();
    }
    let detail = match io_kind {
        Some(std::io::ErrorKind::ConnectionReset) => "read ECONNRESET".to_owned(),
        Some(std::io::ErrorKind::BrokenPipe) => "write EPIPE".to_owned(),
        Some(std::io::ErrorKind::ConnectionRefused) => {
            let authority = reqwest::Url::parse(url).ok().map(|parsed| {
                let host = parsed.host_str().unwrap_or("").to_owned();
                let port = parsed.port_or_known_default().unwrap_or(0);
                format!("{host}:{port}")
            });
            format!("connect ECONNREFUSED {}", authority.unwrap_or_default())
        }
        _ if closed_early => "other side closed (UND_ERR_SOCKET)".to_owned(),
        _ => return BASE.to_owned(),
    };
    format!("{BASE}: {detail}")
}

/// Reads a failed response's body, bounded by the idle timeout and the cancel token.
async fn read_error_body(
    response: reqwest::Response,
    ctx: &SendContext<'_>,
) -> Result<String, SendFailure> {
    tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => Err(SendFailure::aborted()),
        result = tokio::time::timeout(ctx.config.idle_timeout, response.text()) => {
            Ok(match result {
                Ok(Ok(text)) => text,
                Ok(Err(err)) => err.to_string(),
                Err(_) => String::new(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn status_messages_follow_the_sdks() {
        assert_eq!(
            status_error_message(
                400,
                r#"{"error":{"message":"bad","type":"x"}}"#,
                &ErrorBodyStyle::ErrorMember
            ),
            r#"400: {"message":"bad","type":"x"}"#
        );
        assert_eq!(
            status_error_message(400, r#"{"error":{"code":5}}"#, &ErrorBodyStyle::ErrorMember),
            r#"400 {"code":5}"#
        );
        assert_eq!(
            status_error_message(500, r#"{"detail":"x"}"#, &ErrorBodyStyle::ErrorMember),
            r#"500 {"detail":"x"}"#
        );
        assert_eq!(
            status_error_message(502, "Bad Gateway", &ErrorBodyStyle::ErrorMember),
            "502 Bad Gateway"
        );
        assert_eq!(
            status_error_message(413, "", &ErrorBodyStyle::WholeBody),
            "413 status code (no body)"
        );
        assert_eq!(
            status_error_message(
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}"#,
                &ErrorBodyStyle::WholeBody
            ),
            r#"400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}"#
        );
        assert_eq!(
            status_error_message(
                429,
                r#"{"error":{"message":"Provider returned error","metadata":{"raw":"upstream says no"}}}"#,
                &ErrorBodyStyle::ErrorMember
            ),
            r#"429: {"message":"Provider returned error","metadata":{"raw":"upstream says no"}}"#
        );
        assert_eq!(
            api_error_message(None, Some(&json!({"message": {"a": 1}})), None),
            r#"{"a":1}"#
        );
    }

    #[test]
    fn retry_after_headers() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(requested_delay(&headers, 0), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(
            requested_delay(&headers, 0),
            Some(Duration::from_millis(150))
        );
        let mut dated = reqwest::header::HeaderMap::new();
        dated.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:05 GMT".parse().unwrap(),
        );
        let now = chrono::DateTime::parse_from_rfc2822("Wed, 21 Oct 2015 07:28:00 GMT")
            .unwrap()
            .timestamp_millis();
        assert_eq!(requested_delay(&dated, now), Some(Duration::from_secs(5)));
        assert_eq!(requested_delay(&reqwest::header::HeaderMap::new(), 0), None);
        assert_eq!(parse_float_prefix("1.5s"), Some(1.5));
        assert_eq!(parse_float_prefix("x"), None);
    }

    #[test]
    fn default_backoff_doubles_and_caps_with_jitter() {
        let config = TransportConfig::default();
        let ids = IdSource::seeded(3);
        for (retries, full) in [(0u32, 0.5f64), (1, 1.0), (4, 8.0), (10, 8.0)] {
            let delay = default_delay(&config, retries, &ids).as_secs_f64();
            assert!(delay <= full && delay >= full * 0.75, "{retries}: {delay}");
        }
    }
}
