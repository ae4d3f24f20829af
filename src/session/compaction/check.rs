//! When compaction runs (`spec/compaction.md` §2, §3): the automatic check the session makes
//! after a run and before a prompt (`_checkCompaction`), the context-usage figure
//! (`getContextUsage`), and the reasons and messages of the `compaction_*` events.
//!
//! Invariant: pure decisions; the session carries them out (drops the failed message, runs the
//! compaction, emits the events, continues the loop).

use std::borrow::Borrow;

use crate::ai::Model;
use crate::ai::error::is_context_overflow;
use crate::model::entry::{Entry, EntryKind};
use crate::model::message::{AgentMessage, AssistantMessage, StopReason};
use crate::session::compaction::tokens::{
    calculate_context_tokens, estimate_context_tokens, should_compact,
};
use crate::session::compaction::{CompactionSettings, PathEntry};
use crate::support::clock::ms_from_iso;

/// Why a compaction runs; the `reason` of `compaction_start` / `compaction_end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionReason {
    /// `/compact`, RPC `compact`, an extension's `ctx.compact()`.
    Manual,
    /// The context crossed `contextWindow − reserveTokens`.
    Threshold,
    /// The provider rejected the prompt as too long; the session retries after compacting.
    Overflow,
}

/// The `compaction_end.errorMessage` when a second overflow arrives for the same user message.
pub const OVERFLOW_RECOVERY_EXHAUSTED: &str = "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model.";

impl CompactionReason {
    /// Returns the reason as the events write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manual => "manual",
            Self::Threshold => "threshold",
            Self::Overflow => "overflow",
        }
    }

    /// Returns the `compaction_end.errorMessage` for a failure with this text (the error's
    /// `Display`, or `compaction failed` when there is none).
    pub fn failure_message(self, error: &str) -> String {
        match self {
            Self::Manual => format!("Compaction failed: {error}"),
            Self::Threshold => format!("Auto-compaction failed: {error}"),
            Self::Overflow => format!("Context overflow recovery failed: {error}"),
        }
    }
}

/// Returns the last compaction entry of a path (`getLatestCompactionEntry`).
pub fn latest_compaction<E: PathEntry>(path: &[E]) -> Option<&Entry> {
    path.iter()
        .rev()
        .map(PathEntry::entry)
        .find(|entry| matches!(entry.kind, EntryKind::Compaction(_)))
}

/// Returns the time of the last compaction of a path in Unix ms; `None` without one, or when
/// its timestamp does not parse (the reference's `NaN`, which no comparison passes).
pub fn latest_compaction_ms<E: PathEntry>(path: &[E]) -> Option<i64> {
    latest_compaction(path).and_then(|entry| ms_from_iso(&entry.timestamp))
}

/// What the automatic check needs to know.
#[derive(Debug, Clone, Copy)]
pub struct CompactionCheckInput<'a> {
    /// The settings in force.
    pub settings: &'a CompactionSettings,
    /// The message to judge: the run's last assistant message (after a run), or the
    /// transcript's last assistant message (before a prompt).
    pub message: &'a AssistantMessage,
    /// True after a run (aborted messages are ignored), false before a prompt (they count).
    pub skip_aborted: bool,
    /// The session's current model, if any.
    pub model: Option<&'a Model>,
    /// [`latest_compaction_ms`] of the active path.
    pub latest_compaction_ms: Option<i64>,
    /// The agent transcript (for estimating after an error message).
    pub transcript: &'a [AgentMessage],
    /// Whether overflow recovery was already tried since the last user message.
    pub overflow_recovery_attempted: bool,
}

/// The automatic check's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionCheck {
    /// Nothing to do.
    None,
    /// The prompt overflowed: mark recovery attempted, drop the trailing assistant message
    /// from the transcript (it stays in the store), compact with reason `overflow`, then
    /// continue the loop.
    Overflow,
    /// A second overflow for the same user message: emit `compaction_end` with reason
    /// `overflow`, no result, and [`OVERFLOW_RECOVERY_EXHAUSTED`]; do not compact.
    OverflowRecoveryExhausted,
    /// The context crossed the threshold: compact with reason `threshold`, no retry.
    Threshold {
        /// The context size that crossed it.
        tokens: u64,
    },
}

/// Decides whether to compact (`_checkCompaction`, `spec/compaction.md` §3.2).
pub fn check_compaction(input: &CompactionCheckInput<'_>) -> CompactionCheck {
    let message = input.message;
    if !input.settings.enabled {
        return CompactionCheck::None;
    }
    if input.skip_aborted && message.stop_reason == StopReason::Aborted {
        return CompactionCheck::None;
    }
    let context_window = input.model.map_or(0, |model| model.context_window);
    let same_model = input
        .model
        .is_some_and(|model| message.provider == model.provider && message.model == model.id);
    // A message from before the latest compaction describes the old, larger context.
    if let Some(compaction_ms) = input.latest_compaction_ms
        && message.timestamp <= compaction_ms
    {
        return CompactionCheck::None;
    }
    if same_model && is_context_overflow(message, context_window) {
        return if input.overflow_recovery_attempted {
            CompactionCheck::OverflowRecoveryExhausted
        } else {
            CompactionCheck::Overflow
        };
    }
    let tokens = if message.stop_reason == StopReason::Error {
        let estimate = estimate_context_tokens(input.transcript);
        let Some(usage_idx) = estimate.last_usage_index else {
            return CompactionCheck::None;
        };
        if let Some(compaction_ms) = input.latest_compaction_ms
            && input.transcript[usage_idx].timestamp() <= compaction_ms
        {
            return CompactionCheck::None;
        }
        estimate.tokens
    } else {
        calculate_context_tokens(&message.usage)
    };
    if should_compact(tokens, context_window, input.settings) {
        CompactionCheck::Threshold { tokens }
    } else {
        CompactionCheck::None
    }
}

/// The context-usage figure (`getContextUsage`, RPC `contextUsage`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextUsage {
    /// Estimated context tokens; `None` right after a compaction, until a model answers.
    pub tokens: Option<u64>,
    /// The model's context window.
    pub context_window: u64,
    /// `tokens / context_window × 100`; `None` with `tokens`.
    pub percent: Option<f64>,
}

/// Returns the context usage of a session: `None` without a model or a window; unknown tokens
/// when the path's last compaction has no trustworthy non-zero usage after it; otherwise the
/// transcript's estimate.
pub fn context_usage<E: PathEntry, M: Borrow<AgentMessage>>(
    model: Option<&Model>,
    path: &[E],
    transcript: &[M],
) -> Option<ContextUsage> {
    let context_window = model?.context_window;
    if context_window == 0 {
        return None;
    }
    if let Some(compaction_idx) = path
        .iter()
        .rposition(|entry| matches!(entry.entry().kind, EntryKind::Compaction(_)))
    {
        // The first trustworthy assistant after the compaction, scanning back from the leaf,
        // decides.
        let usage_after = path[compaction_idx + 1..].iter().rev().find_map(|entry| {
            match entry.entry().message() {
                Some(AgentMessage::Assistant(assistant))
                    if !matches!(
                        assistant.stop_reason,
                        StopReason::Aborted | StopReason::Error
                    ) =>
                {
                    Some(calculate_context_tokens(&assistant.usage))
                }
                _ => None,
            }
        });
        if usage_after.is_none_or(|tokens| tokens == 0) {
            return Some(ContextUsage {
                tokens: None,
                context_window,
                percent: None,
            });
        }
    }
    let tokens = estimate_context_tokens(transcript).tokens;
    Some(ContextUsage {
        tokens: Some(tokens),
        context_window,
        percent: Some(tokens as f64 / context_window as f64 * 100.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn model(window: u64) -> Model {
        serde_json::from_value(
            json!({"id":"m","name":"M","api":"openai-completions","provider":"p",
            "baseUrl":"http://127.0.0.1:1","contextWindow":window,"maxTokens":1000}),
        )
        .unwrap()
    }

    fn assistant(value: Value) -> AssistantMessage {
        let mut base = json!({"content":[],"api":"openai-completions","provider":"p","model":"m",
            "usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0},
            "stopReason":"stop","timestamp":5000});
        for (key, field) in value.as_object().unwrap() {
            base[key] = field.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    fn check(
        message: &AssistantMessage,
        transcript: &[AgentMessage],
        attempted: bool,
    ) -> CompactionCheck {
        let settings = CompactionSettings::default();
        let model = model(100_000);
        check_compaction(&CompactionCheckInput {
            settings: &settings,
            message,
            skip_aborted: true,
            model: Some(&model),
            latest_compaction_ms: Some(1000),
            transcript,
            overflow_recovery_attempted: attempted,
        })
    }

    #[test]
    fn threshold_uses_the_message_usage() {
        let big = assistant(
            json!({"usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":90_000}}),
        );
        assert_eq!(
            check(&big, &[], false),
            CompactionCheck::Threshold { tokens: 90_000 }
        );
        let small = assistant(
            json!({"usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":80_000}}),
        );
        assert_eq!(check(&small, &[], false), CompactionCheck::None);
    }

    #[test]
    fn overflow_is_recovered_once_and_only_for_the_same_model() {
        let overflow = assistant(
            json!({"stopReason":"error","errorMessage":"prompt is too long: 213462 tokens > 200000 maximum"}),
        );
        assert_eq!(check(&overflow, &[], false), CompactionCheck::Overflow);
        assert_eq!(
            check(&overflow, &[], true),
            CompactionCheck::OverflowRecoveryExhausted
        );
        let other = assistant(
            json!({"stopReason":"error","model":"other","errorMessage":"prompt is too long"}),
        );
        assert_eq!(check(&other, &[], false), CompactionCheck::None);
    }

    #[test]
    fn stale_and_aborted_messages_never_trigger() {
        let stale = assistant(
            json!({"timestamp":1000,"usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":99_000}}),
        );
        assert_eq!(check(&stale, &[], false), CompactionCheck::None);
        let aborted = assistant(
            json!({"stopReason":"aborted","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":99_000}}),
        );
        assert_eq!(check(&aborted, &[], false), CompactionCheck::None);
        let settings = CompactionSettings::default();
        let model = model(100_000);
        let before_prompt = check_compaction(&CompactionCheckInput {
            settings: &settings,
            message: &aborted,
            skip_aborted: false,
            model: Some(&model),
            latest_compaction_ms: None,
            transcript: &[],
            overflow_recovery_attempted: false,
        });
        assert_eq!(before_prompt, CompactionCheck::Threshold { tokens: 99_000 });
    }

    #[test]
    fn an_error_message_is_judged_by_the_transcript_estimate() {
        let failed = assistant(json!({"stopReason":"error","errorMessage":"overloaded"}));
        let good = AgentMessage::Assistant(assistant(json!({"timestamp":2000,
            "usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":84_000}})));
        let user = AgentMessage::from_value(
            json!({"role":"user","content":"x".repeat(4000),"timestamp":3000}),
        );
        let transcript = vec![
            good.clone(),
            user.clone(),
            AgentMessage::Assistant(failed.clone()),
        ];
        assert_eq!(
            check(&failed, &transcript, false),
            CompactionCheck::Threshold { tokens: 85_000 }
        );
        // The usage comes from before the compaction: stale.
        let old = AgentMessage::Assistant(assistant(json!({"timestamp":900,
            "usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":99_000}})));
        assert_eq!(check(&failed, &[old, user], false), CompactionCheck::None);
        assert_eq!(check(&failed, &[], false), CompactionCheck::None);
    }

    #[test]
    fn disabled_settings_and_reasons() {
        let settings = CompactionSettings {
            enabled: false,
            ..CompactionSettings::default()
        };
        let overflow = assistant(json!({"stopReason":"error","errorMessage":"prompt is too long"}));
        let model = model(100_000);
        let decision = check_compaction(&CompactionCheckInput {
            settings: &settings,
            message: &overflow,
            skip_aborted: true,
            model: Some(&model),
            latest_compaction_ms: None,
            transcript: &[],
            overflow_recovery_attempted: false,
        });
        assert_eq!(decision, CompactionCheck::None);
        assert_eq!(CompactionReason::Overflow.as_str(), "overflow");
        assert_eq!(
            CompactionReason::Threshold.failure_message("boom"),
            "Auto-compaction failed: boom"
        );
    }

    #[test]
    fn context_usage_is_unknown_right_after_a_compaction() {
        let entry = |value: Value| Entry::from_value(value).unwrap();
        let user = json!({"type":"message","id":"u","parentId":null,"timestamp":"2025-01-01T00:00:00.000Z",
            "message":{"role":"user","content":"x".repeat(400),"timestamp":1}});
        let compaction = json!({"type":"compaction","id":"c","parentId":"u","timestamp":"2025-01-01T00:00:01.000Z",
            "summary":"s","firstKeptEntryId":"u","tokensBefore":10});
        let answered = json!({"type":"message","id":"a","parentId":"c","timestamp":"2025-01-01T00:00:02.000Z",
            "message":{"role":"assistant","content":[],"usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":500},"stopReason":"stop","timestamp":2}});
        let no_window = model(0);
        let model = model(1000);
        let path = vec![entry(user.clone()), entry(compaction)];
        let transcript: Vec<AgentMessage> = vec![];
        let usage = context_usage(Some(&model), &path, &transcript).unwrap();
        assert_eq!(usage.tokens, None);
        assert_eq!(usage.percent, None);
        let mut path = path;
        path.push(entry(answered.clone()));
        let transcript = vec![AgentMessage::from_value(answered["message"].clone())];
        let usage = context_usage(Some(&model), &path, &transcript).unwrap();
        assert_eq!(usage.tokens, Some(500));
        assert_eq!(usage.percent, Some(50.0));
        assert_eq!(context_usage(None, &path, &transcript), None);
        assert_eq!(context_usage(Some(&no_window), &path, &transcript), None);
    }
}
