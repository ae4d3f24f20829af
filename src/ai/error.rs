//! `AiError`: why one LLM call failed, classified the way the reference decides what to do
//! next (`spec/models-providers-settings.md` §11).
//!
//! Every failure of a call ends as an assistant message with `stopReason` `error` or
//! `aborted` and an `errorMessage` worded as the reference words it (the session stores that
//! message, and later decisions match regexes on its text). The classification here is the
//! same decision made once, from the same text plus the HTTP status when there was one:
//! context overflow (→ compaction, never retry), rate limit (with the server's delay),
//! authentication, transient (→ the session may retry), aborted, configuration (nothing was
//! sent), other.
//!
//! Invariant: [`is_context_overflow`] and [`is_retryable_error`] are the reference's
//! `isContextOverflow` and agent-level retry test, pattern for pattern.

use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;

use crate::model::message::{AssistantMessage, StopReason};

/// A failed LLM call, with the cause that decides what the caller does next.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AiError {
    /// The prompt did not fit the model's context window; compact, do not retry.
    #[error("{message}")]
    ContextOverflow {
        /// The provider's error text.
        message: String,
    },
    /// The provider throttled the request.
    #[error("{message}")]
    RateLimited {
        /// The provider's error text.
        message: String,
        /// The delay the server asked for (`retry-after-ms` / `retry-after`), if any.
        retry_after: Option<Duration>,
    },
    /// The key was missing, wrong or expired (HTTP 401/403 or a credentials failure).
    #[error("{message}")]
    Auth {
        /// The error text.
        message: String,
    },
    /// A failure worth retrying: overloaded, 5xx, connection lost, timed out, truncated stream.
    #[error("{message}")]
    Transient {
        /// The error text.
        message: String,
    },
    /// The caller cancelled the call.
    #[error("{message}")]
    Aborted {
        /// `Request was aborted` (with a period when no response had arrived yet).
        message: String,
    },
    /// The call could not be made as configured: no key, an API nobody implements, an
    /// unresolvable header or base URL. Nothing was sent.
    #[error("{message}")]
    Config {
        /// What is missing or wrong.
        message: String,
    },
    /// Anything else the provider rejected (bad request, content filter, refusal, …).
    #[error("{message}")]
    Other {
        /// The error text.
        message: String,
    },
}

impl AiError {
    /// Returns the error text (the assistant message's `errorMessage`).
    pub fn message(&self) -> &str {
        match self {
            Self::ContextOverflow { message }
            | Self::RateLimited { message, .. }
            | Self::Auth { message }
            | Self::Transient { message }
            | Self::Aborted { message }
            | Self::Config { message }
            | Self::Other { message } => message,
        }
    }

    /// Classifies a failure from its error text, the HTTP status when a response carried it,
    /// and the delay the server asked for.
    pub fn classify(message: &str, status: Option<u16>, retry_after: Option<Duration>) -> Self {
        Self::classify_for("", message, status, retry_after)
    }

    /// [`Self::classify`] for a call to `provider` (Cerebras's empty 400 is an overflow).
    pub fn classify_for(
        provider: &str,
        message: &str,
        status: Option<u16>,
        retry_after: Option<Duration>,
    ) -> Self {
        let message = message.to_owned();
        if matches_overflow(&message, provider) {
            return Self::ContextOverflow { message };
        }
        if status == Some(429) || hit(&RATE_LIMIT, &message) {
            return Self::RateLimited {
                message,
                retry_after,
            };
        }
        if matches!(status, Some(401 | 403)) || hit(&AUTH, &message) {
            return Self::Auth { message };
        }
        if matches!(status, Some(408 | 409)) || status.is_some_and(|code| code >= 500) {
            return Self::Transient { message };
        }
        if hit(&RETRYABLE, &message) && !hit(&NON_RETRYABLE, &message) {
            return Self::Transient { message };
        }
        Self::Other { message }
    }
}

/// The reference's overflow patterns (1.6.0's `utils/overflow.js`), in its order.
static OVERFLOW: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"(?i)prompt (?:is )?too long",
        r"(?i)prompt exceeds max length",
        r"(?i)request_too_large",
        r"(?i)input is too long for requested model",
        r"(?i)exceeds the context window",
        r"(?i)exceeds (?:the )?(?:model'?s )?maximum context length(?: of [\d,]+ tokens?|\s*\([\d,]+\))",
        r"(?i)context window exceeded",
        r"(?i)input token count.*exceeds the maximum",
        r"(?i)maximum prompt length is \d+",
        r"(?i)reduce the length of the messages",
        r"(?i)maximum context length is \d+ tokens",
        r"(?i)exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?",
        r"(?i)input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)",
        r"(?i)exceeds the limit of \d+",
        r"(?i)exceeds the available context size",
        r"(?i)greater than the context length",
        r"(?i)context window exceeds limit",
        r"(?i)exceeded model token limit",
        r"(?i)too large for model with \d+ maximum context length",
        r"(?i)prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?",
        r"(?i)model_context_window_exceeded",
        r"(?i)prompt too long; exceeded (?:max )?context length",
        r"(?i)range of input length should be",
        r"(?i)context[_ ]length[_ ]exceeded",
        r"(?i)too many tokens",
        r"(?i)token limit exceeded",
        r"(?i)^(?:[\w -]+ API error \(413\):|413(?:\s|:|$))",
    ]
    .iter()
    .filter_map(|pattern| Regex::new(pattern).ok())
    .collect()
});

/// Cerebras answers an overflow with an empty 400 or 413 (only for that provider).
static CEREBRAS_BODYLESS_OVERFLOW: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)^4(?:00|13)\s*(?:status code)?\s*\(no body\)").ok());

/// Errors that look like overflow but are not (throttling, rate limits).
static NON_OVERFLOW: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"(?i)^(Throttling error|Service unavailable):",
        r"(?i)rate limit",
        r"(?i)too many requests",
    ]
    .iter()
    .filter_map(|pattern| Regex::new(pattern).ok())
    .collect()
});

/// Provider limits that look transient but are not (quota, billing, plan limits; 1.6.0's
/// `NON_RETRYABLE_PROVIDER_LIMIT_ERROR_PATTERN`; the lookahead after `1308` is a class here).
static NON_RETRYABLE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r#"(?i)GoUsageLimitError|FreeUsageLimitError|Monthly usage limit reached|available balance"#,
        r#"|insufficient_quota|out of budget|quota exceeded|billing"#,
        r#"|subscription_sharing_usage_limit_exceeded"#,
        r#"|subscription_sharing_workplace_individual_usage_limit_exceeded"#,
        r#"|"code"\s*:\s*"?1308(?:[^0-9]|$)"#,
    ))
    .ok()
});

/// The agent-level retry test of 1.6.0 (`RETRYABLE_PROVIDER_ERROR_PATTERN`, one regex; its
/// lookarounds around status codes and socket error codes are written as boundary classes).
static RETRYABLE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)overloaded|server_busy|servers are currently busy|currently experiencing high demand",
        r"|model is at capacity|rate.?limit|too many requests",
        r"|(?:^|[^a-z0-9])(?:429|500|502|503|504|520|524)(?:[^a-z0-9]|$)",
        r"|service.?(?:is.?)?(?:temporarily.?)?unavailable|server.?error|internal.?error",
        r"|provider.?returned.?(?:an.?)?error|exceeded request buffer limit while retrying upstream",
        r"|unable to forward upstream|upstream.?request.?failed|upstream_stream_read_error",
        r"|stream was interrupted|http/?2 stream failed",
        r"|network.?error|connection.?error|connection.?refused|connection.?lost|connection.?closed",
        r"|other side closed|fetch failed|request to \S+ failed, reason:|getaddrinfo",
        r"|(?:^|[^a-z0-9_])(?:ECONNRESET|ECONNABORTED|ECONNREFUSED|ETIMEDOUT|EPIPE)(?:[^a-z0-9_]|$)",
        r"|connection reset by peer|ENOTFOUND|EAI_AGAIN|upstream.?connect|reset before headers",
        r"|socket hang up|socket connection was closed|timed? out|timeout|terminated",
        r"|websocket.?closed|websocket.?error|websocket.?connection.?limit.?reached",
        r"|ended without|stream ended before message_stop|stream ended before a terminal response event",
        r"|http2 request did not get a response|stream disconnected before completion",
        r"|cut short after the reply had begun|pending stream has been canceled|retry delay",
        r"|you can retry your request|try your request again|please retry your request",
        r"|ResourceExhausted|subscription_sharing_usage_unavailable|subscription_sharing_user_unavailable",
    ))
    .ok()
});

static RATE_LIMIT: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)rate.?limit|too many requests|\b429\b").ok());

static AUTH: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)^No API key|^Authentication failed|invalid.?api.?key|\b40[13]\b").ok()
});

/// Whether a pattern (compiled once; the unit tests prove each compiles) matches.
fn hit(pattern: &LazyLock<Option<Regex>>, text: &str) -> bool {
    pattern.as_ref().is_some_and(|re| re.is_match(text))
}

fn matches_overflow(message: &str, provider: &str) -> bool {
    !NON_OVERFLOW.iter().any(|re| re.is_match(message))
        && (OVERFLOW.iter().any(|re| re.is_match(message))
            || (provider == "cerebras" && hit(&CEREBRAS_BODYLESS_OVERFLOW, message)))
}

/// Returns true when the message shows the prompt overflowed the context window (the
/// reference's `isContextOverflow`): an overflow error text, a successful answer whose input
/// exceeds the window (silent overflow), or a length stop with no output and a full window.
/// `context_window` 0 disables the two usage checks.
pub fn is_context_overflow(message: &AssistantMessage, context_window: u64) -> bool {
    if message.stop_reason == StopReason::Error
        && let Some(error) = &message.error_message
        && matches_overflow(error, &message.provider)
    {
        return true;
    }
    let input = message.usage.input + message.usage.cache_read;
    if context_window > 0 && message.stop_reason == StopReason::Stop && input > context_window {
        return true;
    }
    context_window > 0
        && message.stop_reason == StopReason::Length
        && message.usage.output == 0
        && input as f64 >= context_window as f64 * 0.99
}

/// 1.6.0's `isRetryableAssistantError` alone (no overflow check), as `retryAssistantCall`
/// uses it for summary requests: an error that is not a quota or plan limit and matches the
/// retryable pattern.
pub fn is_retryable_assistant_error(message: &AssistantMessage) -> bool {
    message.stop_reason == StopReason::Error
        && message
            .error_message
            .as_deref()
            .is_some_and(|error| !hit(&NON_RETRYABLE, error) && hit(&RETRYABLE, error))
}

/// Returns true when the session should retry the turn (1.6.0's `isRetryableAssistantError`
/// after the overflow check): an error message that is not an overflow, not a quota or plan
/// limit, and matches the retryable pattern.
pub fn is_retryable_error(message: &AssistantMessage, context_window: u64) -> bool {
    if message.stop_reason != StopReason::Error {
        return false;
    }
    let Some(error) = &message.error_message else {
        return false;
    };
    !is_context_overflow(message, context_window)
        && !hit(&NON_RETRYABLE, error)
        && hit(&RETRYABLE, error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(text: &str) -> AssistantMessage {
        let mut message: AssistantMessage = serde_json::from_value(serde_json::json!({
            "content": [], "api": "a", "provider": "p", "model": "m",
            "usage": {}, "stopReason": "error", "timestamp": 0
        }))
        .unwrap();
        message.error_message = Some(text.to_owned());
        message
    }

    #[test]
    fn patterns_compile() {
        assert_eq!(OVERFLOW.len(), 27);
        assert_eq!(NON_OVERFLOW.len(), 3);
        assert!(hit(&RETRYABLE, "socket hang up"));
        assert!(NON_RETRYABLE.is_some() && CEREBRAS_BODYLESS_OVERFLOW.is_some());
        assert!(RATE_LIMIT.is_some() && AUTH.is_some());
    }

    #[test]
    fn overflow_texts_of_each_provider_are_recognised() {
        for text in [
            r#"400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}"#,
            "400 This model's maximum context length is 128000 tokens. However, you requested 130000 tokens",
            "400 Your input exceeds the context window of this model",
            "the request exceeds the available context size, try increasing it",
            "413 status code (no body)",
            r#"github-copilot API error (413): {"message":"failed to parse request","code":""}"#,
            "Prompt has 40,000 tokens, but the configured context size is 32,768 tokens",
        ] {
            assert!(is_context_overflow(&failed(text), 0), "{text}");
            assert!(matches!(
                AiError::classify(text, Some(400), None),
                AiError::ContextOverflow { .. }
            ));
        }
        assert!(!is_context_overflow(
            &failed("ThrottlingException: Too many tokens, rate limit"),
            0
        ));
        assert!(!is_context_overflow(&failed("500 internal error"), 0));
        // An empty 400 is an overflow only from Cerebras.
        assert!(!is_context_overflow(
            &failed("400 status code (no body)"),
            0
        ));
        let mut cerebras = failed("400 status code (no body)");
        cerebras.provider = "cerebras".into();
        assert!(is_context_overflow(&cerebras, 0));
        assert!(matches!(
            AiError::classify_for("cerebras", "400 status code (no body)", Some(400), None),
            AiError::ContextOverflow { .. }
        ));
    }

    #[test]
    fn silent_and_length_overflow_use_the_window() {
        let mut message = failed("");
        message.stop_reason = StopReason::Stop;
        message.usage.input = 900;
        message.usage.cache_read = 200;
        assert!(is_context_overflow(&message, 1000));
        assert!(!is_context_overflow(&message, 0));
        message.stop_reason = StopReason::Length;
        message.usage.input = 990;
        message.usage.cache_read = 0;
        assert!(is_context_overflow(&message, 1000));
        message.usage.output = 1;
        assert!(!is_context_overflow(&message, 1000));
    }

    #[test]
    fn classification_follows_status_and_text() {
        let limited = AiError::classify(
            "429 Rate limit reached",
            Some(429),
            Some(Duration::from_secs(3)),
        );
        assert_eq!(
            limited,
            AiError::RateLimited {
                message: "429 Rate limit reached".into(),
                retry_after: Some(Duration::from_secs(3))
            }
        );
        assert!(matches!(
            AiError::classify("401 Invalid API key", Some(401), None),
            AiError::Auth { .. }
        ));
        assert!(matches!(
            AiError::classify("529 Overloaded", Some(529), None),
            AiError::Transient { .. }
        ));
        assert!(matches!(
            AiError::classify("Connection error.", None, None),
            AiError::Transient { .. }
        ));
        assert!(matches!(
            AiError::classify("Provider finish_reason: content_filter", None, None),
            AiError::Other { .. }
        ));
    }

    #[test]
    fn retryable_excludes_overflow() {
        assert!(is_retryable_error(&failed("503 Service Unavailable"), 0));
        assert!(is_retryable_error(&failed("terminated"), 0));
        assert!(!is_retryable_error(
            &failed("500 prompt is too long: 1 tokens"),
            0
        ));
        assert!(!is_retryable_error(&failed("400 bad request"), 0));
        // Status codes only as whole numbers; quota limits never retried.
        assert!(is_retryable_error(&failed("upstream said 502."), 0));
        assert!(!is_retryable_error(
            &failed("request id req_5029 failed"),
            0
        ));
        assert!(is_retryable_error(&failed("read ECONNRESET"), 0));
        assert!(!is_retryable_error(
            &failed(r#"429 {"error":{"code":"1308","message":"usage limit"}}"#),
            0
        ));
        assert!(!is_retryable_error(&failed("429 insufficient_quota"), 0));
    }
}
