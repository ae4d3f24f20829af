//! Compaction and branch summaries (`spec/compaction.md`): the engine `AgentSession` calls to
//! keep long sessions inside the context window.
//!
//! Two halves:
//! - **Planning, pure** (no I/O, no clock): token estimates ([`estimate_tokens`],
//!   [`estimate_context_tokens`], [`should_compact`]), the automatic check
//!   ([`check_compaction`]), cut points ([`find_cut_point`]), the compaction plan
//!   ([`prepare_compaction`], 0.73.1 range rule), the abandoned-branch range
//!   ([`collect_entries_for_branch_summary`], [`prepare_branch_entries`]), file-operation
//!   tracking ([`FileOps`]) and the conversation text the summariser reads
//!   ([`serialize_conversation`]).
//! - **Summaries** through the real LLM client ([`Summarizer`]): [`compact`] (history and
//!   split-turn prefix summarised in parallel, merged under the reference's heading, file lists
//!   appended) and [`generate_branch_summary`]. They return values the session appends with
//!   `SessionStore::append_compaction` ([`CompactionResult::to_entry`]) and
//!   `SessionStore::branch_with_summary` ([`BranchSummaryResult::details`]).
//!
//! Inputs are the entries of the active path as stored, root → leaf (`SessionStore::branch_path`),
//! as [`crate::store::StoredEntry`] or [`crate::model::Entry`] (anything that is a
//! [`PathEntry`]). Plans borrow the messages of that path instead of copying them, so planning
//! a 100k-entry path costs a pass over it, not a copy of it.
//!
//! Invariants: nothing here appends to the store, emits events or reads settings files (the
//! session does, with the values these functions return); everything before [`compact`] and
//! [`generate_branch_summary`] is a pure function; the prompts and assembled texts are the
//! reference's, byte for byte.

mod branch;
mod check;
mod cut;
mod error;
mod files;
mod prepare;
mod prompts;
mod serialize;
mod summarize;
mod tokens;

use crate::model::Entry;
use crate::session::settings::CompactionToggles;
use crate::store::StoredEntry;

pub use branch::{
    BranchPreparation, BranchSelection, NavigationTarget, collect_entries_for_branch_summary,
    navigation_target, prepare_branch_entries,
};
pub use check::{
    CompactionCheck, CompactionCheckInput, CompactionReason, ContextUsage,
    OVERFLOW_RECOVERY_EXHAUSTED, check_compaction, context_usage, latest_compaction,
    latest_compaction_ms,
};
pub use cut::{CutPoint, find_cut_point, find_turn_start_index, find_valid_cut_points};
pub use error::CompactionError;
pub use files::{FileLists, FileOps, extract_file_ops_from_message, format_file_operations};
pub use prepare::{
    CompactionPreparation, PathMessage, ProjectedEntry, entry_message_for_compaction,
    estimate_projected_context_tokens, prepare_compaction, prepare_manual_compaction, project_path,
    session_context_messages,
};
pub use prompts::{
    BRANCH_SUMMARY_PREAMBLE, BRANCH_SUMMARY_PROMPT, NO_BRANCH_CONTENT_SUMMARY, NO_PRIOR_HISTORY,
    SPLIT_TURN_HEADING, SUMMARIZATION_PROMPT, SUMMARIZATION_SYSTEM_PROMPT,
    TURN_PREFIX_SUMMARIZATION_PROMPT, UPDATE_SUMMARIZATION_PROMPT,
};
pub use serialize::{TOOL_RESULT_MAX_CHARS, serialize_conversation};
pub use summarize::{
    AuthRecovery, BranchSummaryOptions, BranchSummaryResult, CompactOptions, CompactionResult,
    RetryObserver, Summarizer, SummaryRetry, branch_summary_prompt, compact, compaction_prompt,
    generate_branch_summary, turn_prefix_prompt,
};
pub use tokens::{
    ContextEstimate, assistant_usage, calculate_context_tokens, estimate_context_tokens,
    estimate_tokens, last_assistant_usage, should_compact,
};

/// The `compaction.*` settings (global `settings.json`, then the project's), with the
/// reference's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionSettings {
    /// `compaction.enabled`: automatic compaction on or off (manual is always allowed).
    pub enabled: bool,
    /// `compaction.reserveTokens`: head-room kept free for the reply; also sizes the summary
    /// budgets (`0.8 ×` for the history summary, `0.5 ×` for a turn prefix).
    pub reserve_tokens: u64,
    /// `compaction.keepRecentTokens`: about how many recent tokens are kept verbatim.
    pub keep_recent_tokens: u64,
}

impl Default for CompactionSettings {
    /// Returns the reference's `DEFAULT_COMPACTION_SETTINGS`: enabled, 16384, 20000.
    fn default() -> Self {
        Self {
            enabled: true,
            reserve_tokens: 16_384,
            keep_recent_tokens: 20_000,
        }
    }
}

impl From<&CompactionToggles> for CompactionSettings {
    /// Takes the `compaction.*` values the session was configured with.
    fn from(toggles: &CompactionToggles) -> Self {
        Self {
            enabled: toggles.enabled,
            reserve_tokens: toggles.reserve_tokens,
            keep_recent_tokens: toggles.keep_recent_tokens,
        }
    }
}

/// The `branchSummary.*` settings, with the reference's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BranchSummarySettings {
    /// `branchSummary.reserveTokens`: subtracted from the context window to get the budget of
    /// the abandoned branch's text.
    pub reserve_tokens: u64,
    /// `branchSummary.skipPrompt`: `/tree` never asks and never summarises.
    pub skip_prompt: bool,
}

impl Default for BranchSummarySettings {
    /// Returns the reference's defaults: 16384, no skip.
    fn default() -> Self {
        Self {
            reserve_tokens: 16_384,
            skip_prompt: false,
        }
    }
}

/// An entry of a session path, as the planning functions read it.
pub trait PathEntry {
    /// Returns the typed entry.
    fn entry(&self) -> &Entry;

    /// Returns the entry's line (its stored bytes when there are any).
    fn line(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Owned(self.entry().to_line().into_bytes())
    }
}

impl PathEntry for Entry {
    fn entry(&self) -> &Entry {
        self
    }
}

impl PathEntry for StoredEntry {
    fn entry(&self) -> &Entry {
        &self.entry
    }

    fn line(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(&self.payload)
    }
}

impl<T: PathEntry + ?Sized> PathEntry for &T {
    fn entry(&self) -> &Entry {
        (**self).entry()
    }

    fn line(&self) -> std::borrow::Cow<'_, [u8]> {
        (**self).line()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_toggles_and_the_engine_settings_share_the_reference_defaults() {
        assert_eq!(
            CompactionSettings::from(&CompactionToggles::default()),
            CompactionSettings::default()
        );
        let custom = CompactionToggles {
            enabled: false,
            reserve_tokens: 1,
            keep_recent_tokens: 2,
        };
        assert_eq!(
            CompactionSettings::from(&custom),
            CompactionSettings {
                enabled: false,
                reserve_tokens: 1,
                keep_recent_tokens: 2
            }
        );
    }
}
