//! Turn-level auto-retry (spec models-providers-settings §11.3, as 1.6.0): after a run whose
//! last assistant message is a retryable error, wait an exponential backoff and continue;
//! `auto_retry_start`/`auto_retry_end` events; the failed attempt stays in the history and
//! leaves the model context for good (`omit_recovery_attempt`: a `context_edit` with
//! `replacement: null` for it and its tool results).
//!
//! Invariant: nothing else re-sends a turn (the transport's retries are `ai`'s); an overflow
//! is never retried here (compaction recovers it).

use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::ai::Model;
use crate::model::entry::{ContextEditEntry, EntryKind};
use crate::model::ids::EntryId;
use crate::model::message::{AgentMessage, AssistantMessage, StopReason};
use crate::session::agent_session::state::AgentSession;
use crate::session::events::SessionEvent;
use crate::session::settings::RetrySettings;

/// Whether an assistant message is a failed turn worth retrying (not an overflow; spec
/// models-providers-settings §11.3).
pub fn is_retryable(message: &AssistantMessage, context_window: u64) -> bool {
    crate::ai::error::is_retryable_error(message, context_window)
}

impl AgentSession {
    /// 1.6.0's `_willRetryAfterAgentEnd`: not aborted, retries on and not used up, and the
    /// run's last assistant message a retryable error ([`AgentSession::retry_after`]'s rule).
    pub(super) fn will_retry_after(&self, messages: &[AgentMessage]) -> bool {
        let (enabled, attempt, aborted, window) = {
            let state = self.state();
            (
                state.auto_retry,
                state.retry_attempt,
                state
                    .run_cancel
                    .as_ref()
                    .is_some_and(CancellationToken::is_cancelled),
                state.model.as_ref().map_or(0, |model| model.context_window),
            )
        };
        let max = self.with_settings(|settings| settings.retry.max_retries);
        if aborted || !enabled || attempt >= max {
            return false;
        }
        messages
            .iter()
            .rev()
            .find_map(|message| match message {
                AgentMessage::Assistant(assistant) => Some(is_retryable(assistant, window)),
                _ => None,
            })
            .unwrap_or(false)
    }

    /// Decides on a retry after a run ended with `last`; waits the backoff and returns true
    /// when the agent should continue.
    pub(super) async fn retry_after(&self, last: &AssistantMessage, model: &Model) -> bool {
        let (enabled, max) = {
            let state = self.state();
            (
                state.auto_retry,
                self.with_settings(|settings| settings.retry.max_retries),
            )
        };
        if !enabled || !is_retryable(last, model.context_window) {
            let attempt = std::mem::take(&mut self.state().retry_attempt);
            if attempt > 0 && last.stop_reason == StopReason::Error {
                self.emit(SessionEvent::AutoRetryEnd {
                    success: false,
                    attempt,
                    final_error: last.error_message.clone(),
                });
            }
            return false;
        }
        let attempt = {
            let mut state = self.state();
            state.retry_attempt += 1;
            state.retry_attempt
        };
        if attempt > max {
            self.state().retry_attempt = 0;
            self.emit(SessionEvent::AutoRetryEnd {
                success: false,
                attempt: attempt - 1,
                final_error: last.error_message.clone(),
            });
            return false;
        }
        let delay_ms = self.with_settings(|settings| settings.retry.delay_ms(attempt));
        let cancel = CancellationToken::new();
        self.state().retry_cancel = Some(cancel.clone());
        self.emit(SessionEvent::AutoRetryStart {
            attempt,
            max_attempts: max,
            delay_ms,
            error_message: last
                .error_message
                .clone()
                .unwrap_or_else(|| "Unknown error".to_owned()),
        });
        // The failed attempt stays in the history and leaves the model context for good (the
        // reference does this synchronously: an abort_retry sent after auto_retry_start finds
        // the wait already cancellable).
        self.omit_recovery_attempt(last).await;
        let cancelled = tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(delay_ms)) => false,
            () = cancel.cancelled() => true,
        };
        self.state().retry_cancel = None;
        if cancelled {
            self.state().retry_attempt = 0;
            self.emit(SessionEvent::AutoRetryEnd {
                success: false,
                attempt,
                final_error: Some("Retry cancelled".to_owned()),
            });
            return false;
        }
        true
    }

    /// The `retry.*` a summary request runs with: the settings, switched off with the
    /// session's auto-retry toggle.
    pub(super) fn summary_retry(&self) -> RetrySettings {
        let mut retry = self.with_settings(|settings| settings.retry);
        retry.enabled = self.state().auto_retry;
        retry
    }

    /// Omits a failed attempt from the model context (1.6.0 `_omitRecoveryAttempt`): a
    /// `context_edit` with `replacement: null` for its assistant message and for each stored
    /// tool result answering one of its tool calls; the transcript drops them too.
    pub(crate) async fn omit_recovery_attempt(&self, failed: &AssistantMessage) {
        let call_ids: std::collections::HashSet<String> =
            failed.tool_calls().map(|call| call.id.clone()).collect();
        let targets: Vec<EntryId> = {
            let mut state = self.state();
            let mut targets: Vec<EntryId> = state.last_assistant_entry.take().into_iter().collect();
            targets.extend(
                state
                    .tool_result_entries
                    .drain(..)
                    .filter(|(call_id, _)| call_ids.contains(call_id))
                    .map(|(_, id)| id),
            );
            // The projected context loses the attempt as the edits say.
            if let Some(pos) = state
                .transcript
                .iter()
                .rposition(|message| matches!(message, AgentMessage::Assistant(_)))
            {
                let tail: Vec<AgentMessage> = state.transcript.split_off(pos);
                state.transcript.extend(tail.into_iter().skip(1).filter(|message| {
                    !matches!(message, AgentMessage::ToolResult(result) if call_ids.contains(&result.tool_call_id))
                }));
            }
            targets
        };
        for target in targets {
            let id = self
                .persist(EntryKind::ContextEdit(ContextEditEntry {
                    target_id: Some(target),
                    replacement: Some(Value::Null),
                }))
                .await;
            // Announced as 1.6.0 announces it (`entry_appended`, after `auto_retry_start`).
            if let Some(id) = id
                && let Some(entry) = self.entry_json(&id).await
            {
                self.emit(SessionEvent::EntryAppended { entry });
            }
        }
    }

    /// Cancels a retry that is waiting.
    pub fn abort_retry(&self) {
        if let Some(cancel) = &self.state().retry_cancel {
            cancel.cancel();
        }
    }

    /// Returns whether turn-level auto-retry is on.
    pub fn auto_retry(&self) -> bool {
        self.state().auto_retry
    }

    /// Turns turn-level auto-retry on or off (saved to settings).
    pub fn set_auto_retry(&self, enabled: bool) {
        self.state().auto_retry = enabled;
        self.config().settings_sink.set_auto_retry(enabled);
    }
}
