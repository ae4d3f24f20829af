//! `SessionEvent`: everything a session reports — the agent's events plus the session's own
//! (retries, queues, compaction, name and thinking-level changes) — with the reference's JSON
//! shape for JSON and RPC modes (`spec/extensions-and-modes.md` §6).
//!
//! The JSON is `Serialize`, derived as `AgentEvent`'s is: `{"type": <snake_case variant>,
//! <camelCase fields in declaration order>}`, absent optional fields left out where the
//! reference leaves them out; an agent event is written as the agent writes it.

use serde::Serialize;
use serde_json::Value;

use crate::agent::AgentEvent;

/// How serious a notice is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoticeLevel {
    /// Informational.
    Info,
    /// Something did not work as asked, the session goes on.
    Warning,
    /// Something failed (for example an entry could not be saved yet).
    Error,
}

/// One event of a session.
// Nearly every event is an agent event, so boxing that variant would only add allocations.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum SessionEvent {
    /// A failed turn is about to be retried.
    AutoRetryStart {
        /// 1-based attempt number.
        attempt: u32,
        /// `retry.maxRetries`.
        max_attempts: u32,
        /// The wait before the attempt.
        delay_ms: u64,
        /// The error being retried.
        error_message: String,
    },
    /// Retrying ended.
    AutoRetryEnd {
        /// Whether a retry succeeded.
        success: bool,
        /// The last attempt.
        attempt: u32,
        /// Why it failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        final_error: Option<String>,
    },
    /// A compaction or branch summary request failed and is sent again after `delay_ms`
    /// (1.6.0's `summarization_retry_scheduled`).
    SummarizationRetryScheduled {
        /// 1-based retry number.
        attempt: u32,
        /// `retry.maxRetries`.
        max_attempts: u32,
        /// The wait before it.
        delay_ms: u64,
        /// Why the request failed.
        error_message: String,
    },
    /// The retried summary request starts: `source` is `compaction` (with its `reason`) or
    /// `branchSummary`.
    SummarizationRetryAttemptStart {
        /// `compaction` or `branchSummary`.
        source: String,
        /// A compaction's `manual`, `threshold` or `overflow`.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Retrying a summary request ended.
    SummarizationRetryFinished,
    /// The steering / follow-up queues changed.
    QueueUpdate {
        /// Queued steering texts.
        steering: Vec<String>,
        /// Queued follow-up texts.
        follow_up: Vec<String>,
    },
    /// A session-level run settled: no retry, compaction recovery or queued message will
    /// continue it on its own (1.6.0's `agent_settled`, after the last `agent_end`).
    AgentSettled {
        /// Whether the run ended because it was aborted.
        aborted: bool,
    },
    /// A compaction started.
    CompactionStart {
        /// `manual`, `threshold` or `overflow`.
        reason: String,
    },
    /// A compaction ended.
    CompactionEnd {
        /// `manual`, `threshold` or `overflow`.
        reason: String,
        /// `{summary, firstKeptEntryId, tokensBefore, details?}` when it succeeded.
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// Whether it was aborted.
        aborted: bool,
        /// Whether the agent continues automatically.
        will_retry: bool,
        /// Why it failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
    },
    /// An entry was appended outside the message flow (1.6.0's `entry_appended`): here the
    /// `context_edit` that omits a failed attempt before its retry.
    EntryAppended {
        /// The entry, as stored (the reference's session entry object).
        entry: Value,
    },
    /// The thinking level changed.
    ThinkingLevelChanged {
        /// The new level.
        level: String,
    },
    /// The session name changed.
    SessionInfoChanged {
        /// The new name (absent when cleared).
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// An extension failed (its handler threw, it timed out, crashed or broke the protocol);
    /// the session goes on. The reference's RPC `extension_error` event.
    ExtensionError {
        /// The extension's path (`command:<name>` for a command, `<runtime>` for a message
        /// an extension sent).
        extension_path: String,
        /// The event being handled (`load` when it could not start, `process` when it stopped
        /// between events).
        event: String,
        /// One line.
        error: String,
    },
    /// Entries of a session could not be stored (a damaged database, a full disk, a lost
    /// write-ahead log…) when the session was left: they were saved to `path` (a JSONL file
    /// that `pi import` adds back), or, when even that failed, dropped (`path` is `None`).
    /// pi's own event (`session_unsaved`); the process exits 1.
    SessionUnsaved {
        /// The session.
        session_id: String,
        /// How many entries were not stored.
        entries: usize,
        /// The rescue file, when it was written (`null` when not).
        path: Option<String>,
        /// Why they could not be stored (and, without a file, why it was not written).
        error: String,
    },
    /// Something the user should know (not part of the reference's event stream, never
    /// serialised).
    #[serde(skip)]
    Notice {
        /// Severity.
        level: NoticeLevel,
        /// One line.
        message: String,
    },
    /// An agent-loop event (written as the agent writes it, its own `type` first).
    #[serde(untagged)]
    Agent(AgentEvent),
}

impl SessionEvent {
    /// Returns the reference's JSON object for the event, or `None` for events the reference
    /// stream does not have (notices).
    pub fn to_json(&self) -> Option<Value> {
        match self {
            Self::Notice { .. } => None,
            // Every map key is a string, so serialising into a `Value` cannot fail.
            _ => serde_json::to_value(self).ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::tool::ToolOutput;
    use crate::support::json::to_js_string;

    fn text(event: SessionEvent) -> String {
        to_js_string(&event.to_json().unwrap())
    }

    // The texts are those the hand-built maps wrote before the events derived `Serialize`.
    #[test]
    fn session_events_keep_the_reference_shapes() {
        let cases = [
            (
                SessionEvent::AutoRetryStart {
                    attempt: 1,
                    max_attempts: 3,
                    delay_ms: 2000,
                    error_message: "overloaded".into(),
                },
                r#"{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"overloaded"}"#,
            ),
            (
                SessionEvent::AutoRetryEnd {
                    success: false,
                    attempt: 3,
                    final_error: Some("x".into()),
                },
                r#"{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"x"}"#,
            ),
            (
                SessionEvent::AutoRetryEnd {
                    success: true,
                    attempt: 2,
                    final_error: None,
                },
                r#"{"type":"auto_retry_end","success":true,"attempt":2}"#,
            ),
            // 1.6.0 docs/json.md, "Retry events".
            (
                SessionEvent::SummarizationRetryScheduled {
                    attempt: 1,
                    max_attempts: 3,
                    delay_ms: 2000,
                    error_message: "terminated".into(),
                },
                r#"{"type":"summarization_retry_scheduled","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"terminated"}"#,
            ),
            (
                SessionEvent::SummarizationRetryAttemptStart {
                    source: "compaction".into(),
                    reason: Some("threshold".into()),
                },
                r#"{"type":"summarization_retry_attempt_start","source":"compaction","reason":"threshold"}"#,
            ),
            (
                SessionEvent::SummarizationRetryAttemptStart {
                    source: "branchSummary".into(),
                    reason: None,
                },
                r#"{"type":"summarization_retry_attempt_start","source":"branchSummary"}"#,
            ),
            (
                SessionEvent::SummarizationRetryFinished,
                r#"{"type":"summarization_retry_finished"}"#,
            ),
            (
                SessionEvent::QueueUpdate {
                    steering: vec!["a".into()],
                    follow_up: Vec::new(),
                },
                r#"{"type":"queue_update","steering":["a"],"followUp":[]}"#,
            ),
            (
                SessionEvent::AgentSettled { aborted: true },
                r#"{"type":"agent_settled","aborted":true}"#,
            ),
            (
                SessionEvent::CompactionStart {
                    reason: "manual".into(),
                },
                r#"{"type":"compaction_start","reason":"manual"}"#,
            ),
            (
                SessionEvent::CompactionEnd {
                    reason: "overflow".into(),
                    result: Some(json!({"summary": "s", "tokensBefore": 5})),
                    aborted: false,
                    will_retry: true,
                    error_message: None,
                },
                r#"{"type":"compaction_end","reason":"overflow","result":{"summary":"s","tokensBefore":5},"aborted":false,"willRetry":true}"#,
            ),
            (
                SessionEvent::CompactionEnd {
                    reason: "threshold".into(),
                    result: None,
                    aborted: true,
                    will_retry: false,
                    error_message: Some("stopped".into()),
                },
                r#"{"type":"compaction_end","reason":"threshold","aborted":true,"willRetry":false,"errorMessage":"stopped"}"#,
            ),
            (
                SessionEvent::ThinkingLevelChanged {
                    level: "high".into(),
                },
                r#"{"type":"thinking_level_changed","level":"high"}"#,
            ),
            (
                SessionEvent::SessionInfoChanged {
                    name: Some("n".into()),
                },
                r#"{"type":"session_info_changed","name":"n"}"#,
            ),
            (
                SessionEvent::SessionInfoChanged { name: None },
                r#"{"type":"session_info_changed"}"#,
            ),
            (
                SessionEvent::ExtensionError {
                    extension_path: "/e".into(),
                    event: "load".into(),
                    error: "boom".into(),
                },
                r#"{"type":"extension_error","extensionPath":"/e","event":"load","error":"boom"}"#,
            ),
            (
                SessionEvent::SessionUnsaved {
                    session_id: "s1".into(),
                    entries: 2,
                    path: None,
                    error: "disk full".into(),
                },
                r#"{"type":"session_unsaved","sessionId":"s1","entries":2,"path":null,"error":"disk full"}"#,
            ),
            (
                SessionEvent::Agent(AgentEvent::AgentStart),
                r#"{"type":"agent_start"}"#,
            ),
            (
                SessionEvent::Agent(AgentEvent::ToolExecutionEnd {
                    tool_call_id: "c1".into(),
                    tool_name: "ls".into(),
                    result: ToolOutput::text("a"),
                    is_error: false,
                    duration_ms: Some(7),
                }),
                r#"{"type":"tool_execution_end","toolCallId":"c1","toolName":"ls","result":{"content":[{"type":"text","text":"a"}]},"isError":false,"durationMs":7}"#,
            ),
            (
                SessionEvent::Agent(AgentEvent::ToolExecutionUpdate {
                    tool_call_id: "c1".into(),
                    tool_name: "bash".into(),
                    args: json!({"command": "ls"}),
                    partial_result: ToolOutput {
                        content: Vec::new(),
                        details: Some(json!({})),
                    },
                }),
                r#"{"type":"tool_execution_update","toolCallId":"c1","toolName":"bash","args":{"command":"ls"},"partialResult":{"content":[],"details":{}}}"#,
            ),
            (
                SessionEvent::Agent(AgentEvent::ToolExecutionEnd {
                    tool_call_id: "c2".into(),
                    tool_name: "x".into(),
                    result: ToolOutput::error("Tool x not found"),
                    is_error: true,
                    duration_ms: None,
                }),
                r#"{"type":"tool_execution_end","toolCallId":"c2","toolName":"x","result":{"content":[{"type":"text","text":"Tool x not found"}],"details":{}},"isError":true}"#,
            ),
            (
                SessionEvent::Agent(AgentEvent::AgentEnd {
                    messages: Vec::new(),
                    will_retry: false,
                }),
                r#"{"type":"agent_end","messages":[],"willRetry":false}"#,
            ),
        ];
        for (event, expected) in cases {
            assert_eq!(text(event), expected);
        }
        let notice = SessionEvent::Notice {
            level: NoticeLevel::Info,
            message: "m".into(),
        };
        assert_eq!(notice.to_json(), None);
    }
}
