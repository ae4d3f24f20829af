//! `SessionEvent`: everything a session reports — the agent's events plus the session's own
//! (retries, queues, compaction, name and thinking-level changes) — with the reference's JSON
//! shape for JSON and RPC modes (`spec/extensions-and-modes.md` §6).

use serde_json::{Map, Value, json};

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
#[derive(Clone, Debug, PartialEq)]
pub enum SessionEvent {
    /// An agent-loop event.
    Agent(AgentEvent),
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
        final_error: Option<String>,
    },
    /// The steering / follow-up queues changed.
    QueueUpdate {
        /// Queued steering texts.
        steering: Vec<String>,
        /// Queued follow-up texts.
        follow_up: Vec<String>,
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
        result: Option<Value>,
        /// Whether it was aborted.
        aborted: bool,
        /// Whether the agent continues automatically.
        will_retry: bool,
        /// Why it failed.
        error_message: Option<String>,
    },
    /// The thinking level changed.
    ThinkingLevelChanged {
        /// The new level.
        level: String,
    },
    /// The session name changed.
    SessionInfoChanged {
        /// The new name (absent when cleared).
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
        /// The rescue file, when it was written.
        path: Option<String>,
        /// Why they could not be stored (and, without a file, why it was not written).
        error: String,
    },
    /// Something the user should know (not part of the reference's event stream).
    Notice {
        /// Severity.
        level: NoticeLevel,
        /// One line.
        message: String,
    },
}

impl SessionEvent {
    /// Returns the reference's JSON object for the event, or `None` for events the reference
    /// stream does not have (notices).
    pub fn to_json(&self) -> Option<Value> {
        let value = match self {
            Self::Agent(event) => event.to_json(),
            Self::AutoRetryStart {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
            } => json!({
                "type": "auto_retry_start",
                "attempt": attempt,
                "maxAttempts": max_attempts,
                "delayMs": delay_ms,
                "errorMessage": error_message,
            }),
            Self::AutoRetryEnd {
                success,
                attempt,
                final_error,
            } => {
                let mut map = Map::new();
                map.insert("type".into(), Value::from("auto_retry_end"));
                map.insert("success".into(), Value::from(*success));
                map.insert("attempt".into(), Value::from(*attempt));
                if let Some(error) = final_error {
                    map.insert("finalError".into(), Value::from(error.as_str()));
                }
                Value::Object(map)
            }
            Self::QueueUpdate {
                steering,
                follow_up,
            } => json!({"type": "queue_update", "steering": steering, "followUp": follow_up}),
            Self::CompactionStart { reason } => {
                json!({"type": "compaction_start", "reason": reason})
            }
            Self::CompactionEnd {
                reason,
                result,
                aborted,
                will_retry,
                error_message,
            } => {
                let mut map = Map::new();
                map.insert("type".into(), Value::from("compaction_end"));
                map.insert("reason".into(), Value::from(reason.as_str()));
                if let Some(result) = result {
                    map.insert("result".into(), result.clone());
                }
                map.insert("aborted".into(), Value::from(*aborted));
                map.insert("willRetry".into(), Value::from(*will_retry));
                if let Some(error) = error_message {
                    map.insert("errorMessage".into(), Value::from(error.as_str()));
                }
                Value::Object(map)
            }
            Self::ThinkingLevelChanged { level } => {
                json!({"type": "thinking_level_changed", "level": level})
            }
            Self::SessionInfoChanged { name } => {
                let mut map = Map::new();
                map.insert("type".into(), Value::from("session_info_changed"));
                if let Some(name) = name {
                    map.insert("name".into(), Value::from(name.as_str()));
                }
                Value::Object(map)
            }
            Self::ExtensionError {
                extension_path,
                event,
                error,
            } => json!({
                "type": "extension_error",
                "extensionPath": extension_path,
                "event": event,
                "error": error,
            }),
            Self::SessionUnsaved {
                session_id,
                entries,
                path,
                error,
            } => json!({
                "type": "session_unsaved",
                "sessionId": session_id,
                "entries": entries,
                "path": path,
                "error": error,
            }),
            Self::Notice { .. } => return None,
        };
        Some(value)
    }
}
