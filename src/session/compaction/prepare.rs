//! The compaction plan (`spec/compaction.md` §5, `prepareCompaction` of 0.73.1): what is
//! summarised, what is kept, the previous summary to update, and the files touched.
//!
//! The summarised range starts at the previous compaction's kept boundary (its
//! `firstKeptEntryId`), so messages that survived the earlier compaction are folded into the new
//! summary together with the previous summary text; it ends at the cut (or at the start of a
//! split turn, whose prefix is summarised apart).
//!
//! Invariant: pure; messages of `message` entries are borrowed from the path, never copied.

use std::borrow::Cow;

use serde_json::Map;

use crate::model::entry::{Entry, EntryKind};
use crate::model::ids::EntryId;
use crate::model::message::{
    AgentMessage, BranchSummaryMessage, CompactionSummaryMessage, CustomMessage, UserContent,
};
use crate::session::compaction::cut::find_cut_point;
use crate::session::compaction::files::FileOps;
use crate::session::compaction::tokens::estimate_context_tokens;
use crate::session::compaction::{CompactionError, CompactionSettings, PathEntry};
use crate::support::clock::ms_from_iso;

/// What [`crate::session::compaction::compact`] summarises and keeps (the reference's
/// `CompactionPreparation`, plus the indices it was derived from).
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionPreparation<'a> {
    /// The first entry that stays verbatim after the compaction.
    pub first_kept_entry_id: EntryId,
    /// Its index in the path.
    pub first_kept_entry_index: usize,
    /// Where the summarised range starts: the previous compaction's first kept entry (or the
    /// entry after it when that id is not on the path), else 0.
    pub boundary_start: usize,
    /// Index of the split turn's first entry.
    pub turn_start_index: Option<usize>,
    /// The history to summarise: messages of `path[boundary_start .. turn start or cut)`.
    pub messages_to_summarize: Vec<Cow<'a, AgentMessage>>,
    /// The prefix of a split turn: messages of `path[turn start .. cut)`.
    pub turn_prefix_messages: Vec<Cow<'a, AgentMessage>>,
    /// Whether the cut falls inside a turn.
    pub is_split_turn: bool,
    /// Estimated context size before compacting (over the rebuilt context of the whole path).
    pub tokens_before: u64,
    /// The previous compaction's summary, to be updated rather than rewritten.
    pub previous_summary: Option<&'a str>,
    /// Files touched by the summarised messages and recorded by the previous compaction.
    pub file_ops: FileOps,
    /// The settings the plan was made with.
    pub settings: CompactionSettings,
}

fn entry_ms(entry: &Entry) -> i64 {
    // `new Date(timestamp).getTime()`; NaN (an unreadable timestamp) becomes 0 here, which no
    // decision reads: summaries never show message times.
    ms_from_iso(&entry.timestamp).unwrap_or(0)
}

fn custom_message(entry: &Entry, content: &UserContent, custom_type: &str) -> AgentMessage {
    let (display, details) = match &entry.kind {
        EntryKind::CustomMessage {
            display, details, ..
        } => (*display, details.clone()),
        _ => (false, None),
    };
    AgentMessage::Custom(CustomMessage {
        custom_type: custom_type.to_owned(),
        content: content.clone(),
        display,
        details,
        timestamp: entry_ms(entry),
        extra: Map::new(),
    })
}

/// The message an entry contributes, or `None`; `branch_summary` entries contribute even with
/// an empty summary, `compaction` entries as a compaction summary when `compaction_too`.
pub(crate) fn entry_message(entry: &Entry, compaction_too: bool) -> Option<Cow<'_, AgentMessage>> {
    match &entry.kind {
        EntryKind::Message(message) => Some(Cow::Borrowed(message)),
        EntryKind::CustomMessage {
            custom_type,
            content,
            ..
        } => Some(Cow::Owned(custom_message(entry, content, custom_type))),
        EntryKind::BranchSummary(summary) => Some(Cow::Owned(AgentMessage::BranchSummary(
            BranchSummaryMessage {
                summary: summary.summary.clone(),
                from_id: summary.from_id.clone(),
                timestamp: entry_ms(entry),
            },
        ))),
        EntryKind::Compaction(compaction) if compaction_too => Some(Cow::Owned(
            AgentMessage::CompactionSummary(CompactionSummaryMessage {
                summary: compaction.summary.clone(),
                tokens_before: compaction.tokens_before,
                timestamp: entry_ms(entry),
            }),
        )),
        EntryKind::Compaction(_)
        | EntryKind::ThinkingLevelChange { .. }
        | EntryKind::ModelChange(_)
        | EntryKind::Custom { .. }
        | EntryKind::Label { .. }
        | EntryKind::SessionInfo { .. }
        | EntryKind::Unknown { .. } => None,
    }
}

/// Returns the message an entry contributes to a compaction's summarised range
/// (`getMessageFromEntryForCompaction`): messages, custom messages, branch summaries; never a
/// compaction.
pub fn entry_message_for_compaction(entry: &Entry) -> Option<Cow<'_, AgentMessage>> {
    entry_message(entry, false)
}

/// The message `buildSessionContext` emits for an entry (`appendMessage`): empty branch
/// summaries are skipped.
fn context_message(entry: &Entry) -> Option<Cow<'_, AgentMessage>> {
    match &entry.kind {
        EntryKind::BranchSummary(summary) if summary.summary.is_empty() => None,
        _ => entry_message(entry, false),
    }
}

/// Returns the messages of the reference's `buildSessionContext` over a path (root → leaf): with
/// a compaction on it, the last one's summary, then the entries from its `firstKeptEntryId` up
/// to it, then everything after it.
pub fn session_context_messages<E: PathEntry>(path: &[E]) -> Vec<Cow<'_, AgentMessage>> {
    let last_compaction = path
        .iter()
        .rev()
        .find(|entry| matches!(entry.entry().kind, EntryKind::Compaction(_)));
    let Some(compaction_entry) = last_compaction.map(PathEntry::entry) else {
        return path
            .iter()
            .filter_map(|entry| context_message(entry.entry()))
            .collect();
    };
    let EntryKind::Compaction(compaction) = &compaction_entry.kind else {
        return Vec::new();
    };
    // The reference finds the compaction again by id: the first compaction on the path with
    // that id (the same one unless ids repeat).
    let compaction_idx = path
        .iter()
        .position(|entry| {
            matches!(entry.entry().kind, EntryKind::Compaction(_))
                && entry.entry().id == compaction_entry.id
        })
        .unwrap_or(0);
    let mut messages = Vec::with_capacity(path.len() - compaction_idx);
    messages.push(Cow::Owned(AgentMessage::CompactionSummary(
        CompactionSummaryMessage {
            summary: compaction.summary.clone(),
            tokens_before: compaction.tokens_before,
            timestamp: entry_ms(compaction_entry),
        },
    )));
    let first_kept = compaction.first_kept_entry_id.as_ref();
    if let Some(kept_start) = path[..compaction_idx]
        .iter()
        .position(|entry| entry.entry().id.as_ref() == first_kept)
    {
        messages.extend(
            path[kept_start..compaction_idx]
                .iter()
                .filter_map(|entry| context_message(entry.entry())),
        );
    }
    messages.extend(
        path[compaction_idx + 1..]
            .iter()
            .filter_map(|entry| context_message(entry.entry())),
    );
    messages
}

/// Plans a compaction of a path (root → leaf); `None` when the last entry is already a
/// compaction, when the path is empty, or when the first kept entry has no id.
pub fn prepare_compaction<'a, E: PathEntry>(
    path: &'a [E],
    settings: &CompactionSettings,
) -> Option<CompactionPreparation<'a>> {
    if path
        .last()
        .is_some_and(|entry| matches!(entry.entry().kind, EntryKind::Compaction(_)))
    {
        return None;
    }
    let previous =
        path.iter()
            .enumerate()
            .rev()
            .find_map(|(idx, entry)| match &entry.entry().kind {
                EntryKind::Compaction(compaction) => Some((idx, compaction)),
                _ => None,
            });
    let (boundary_start, previous_summary) = match previous {
        Some((idx, compaction)) => {
            let first_kept = compaction.first_kept_entry_id.as_ref();
            let start = path
                .iter()
                .position(|entry| entry.entry().id.as_ref() == first_kept)
                .unwrap_or(idx + 1);
            (start, Some(compaction.summary.as_str()))
        }
        None => (0, None),
    };
    let tokens_before = estimate_context_tokens(&session_context_messages(path)).tokens;
    let cut = find_cut_point(
        path,
        boundary_start,
        path.len(),
        settings.keep_recent_tokens,
    );
    let first_kept_entry_id = path.get(cut.first_kept_entry_index)?.entry().id.clone()?;
    let history_end = match cut.turn_start_index {
        Some(turn_start) if cut.is_split_turn => turn_start,
        _ => cut.first_kept_entry_index,
    };
    let messages_in = |from: usize, to: usize| -> Vec<Cow<'a, AgentMessage>> {
        path.get(from..to.max(from))
            .unwrap_or_default()
            .iter()
            .filter_map(|entry| entry_message_for_compaction(entry.entry()))
            .collect()
    };
    let messages_to_summarize = messages_in(boundary_start, history_end);
    let turn_prefix_messages = match cut.turn_start_index {
        Some(turn_start) if cut.is_split_turn => {
            messages_in(turn_start, cut.first_kept_entry_index)
        }
        _ => Vec::new(),
    };
    let mut file_ops = FileOps::default();
    if let Some((_, compaction)) = previous
        && compaction.from_hook != Some(true)
        && let Some(details) = &compaction.details
    {
        file_ops.add_details(details);
    }
    for message in messages_to_summarize.iter().chain(&turn_prefix_messages) {
        file_ops.add_message(message);
    }
    Some(CompactionPreparation {
        first_kept_entry_id,
        first_kept_entry_index: cut.first_kept_entry_index,
        boundary_start,
        turn_start_index: cut.turn_start_index,
        messages_to_summarize,
        turn_prefix_messages,
        is_split_turn: cut.is_split_turn,
        tokens_before,
        previous_summary,
        file_ops,
        settings: *settings,
    })
}

/// Plans a manual compaction (`/compact`): as [`prepare_compaction`], with the reference's
/// reasons when there is nothing to do.
pub fn prepare_manual_compaction<'a, E: PathEntry>(
    path: &'a [E],
    settings: &CompactionSettings,
) -> Result<CompactionPreparation<'a>, CompactionError> {
    prepare_compaction(path, settings).ok_or_else(|| {
        if path
            .last()
            .is_some_and(|entry| matches!(entry.entry().kind, EntryKind::Compaction(_)))
        {
            CompactionError::AlreadyCompacted
        } else {
            CompactionError::NothingToCompact
        }
    })
}
