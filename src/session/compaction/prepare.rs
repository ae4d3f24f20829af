//! The compaction plan (`spec/compaction.md` §5, `prepareCompaction` of 0.73.1): what is
//! summarised, what is kept, the previous summary to update, and the files touched.
//!
//! The summarised range starts at the previous compaction's kept boundary (its
//! `firstKeptEntryId`), so messages that survived the earlier compaction are folded into the new
//! summary together with the previous summary text; it ends at the cut (or at the start of a
//! split turn, whose prefix is summarised apart).
//!
//! Invariant: pure; messages of `message` entries are borrowed from the path, never copied.

use std::borrow::Borrow;
use std::ops::Deref;

use serde_json::{Map, Value};

use crate::model::entry::{CompactionEntry, Entry, EntryKind};
use crate::model::ids::EntryId;
use crate::model::message::{
    AgentMessage, BranchSummaryMessage, CompactionSummaryMessage, CustomMessage, UserContent,
};
use crate::session::compaction::cut::find_cut_point;
use crate::session::compaction::files::FileOps;
use crate::session::compaction::tokens::{
    assistant_usage, calculate_context_tokens, estimate_tokens,
};
use crate::session::compaction::{CompactionError, CompactionSettings, PathEntry};
use crate::support::clock::ms_from_iso;

/// A message of a path: borrowed from a `message` entry, or made from another entry type
/// (custom message, branch summary, compaction). Two words wide, so plans over long paths stay
/// small.
#[derive(Debug, Clone, PartialEq)]
pub enum PathMessage<'a> {
    /// The message of a `message` entry.
    Borrowed(&'a AgentMessage),
    /// A message made from a `custom_message`, `branch_summary` or `compaction` entry.
    Owned(Box<AgentMessage>),
}

impl Deref for PathMessage<'_> {
    type Target = AgentMessage;

    fn deref(&self) -> &AgentMessage {
        match self {
            Self::Borrowed(message) => message,
            Self::Owned(message) => message,
        }
    }
}

impl AsRef<AgentMessage> for PathMessage<'_> {
    fn as_ref(&self) -> &AgentMessage {
        self
    }
}

impl Borrow<AgentMessage> for PathMessage<'_> {
    fn borrow(&self) -> &AgentMessage {
        self
    }
}

fn owned(message: AgentMessage) -> PathMessage<'static> {
    PathMessage::Owned(Box::new(message))
}

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
    pub messages_to_summarize: Vec<PathMessage<'a>>,
    /// The prefix of a split turn: messages of `path[turn start .. cut)`.
    pub turn_prefix_messages: Vec<PathMessage<'a>>,
    /// Whether the cut falls inside a turn.
    pub is_split_turn: bool,
    /// Estimated context size before compacting (over the rebuilt context of the whole path).
    pub tokens_before: u64,
    /// The previous compaction's summary, to be updated rather than rewritten.
    pub previous_summary: Option<&'a str>,
    /// The previous compaction's `details`, when pi wrote it (not an extension): its file
    /// lists carry over.
    pub previous_details: Option<&'a Value>,
    /// The settings the plan was made with.
    pub settings: CompactionSettings,
}

impl CompactionPreparation<'_> {
    /// Returns the files touched by the summarised messages (history and turn prefix) and
    /// recorded by the previous compaction (the reference's `fileOps`).
    ///
    /// Computed on demand: only a generated summary needs it, and on a long range it is the
    /// costly part (every tool call of the range is read).
    pub fn file_ops(&self) -> FileOps {
        let mut ops = FileOps::default();
        if let Some(details) = self.previous_details {
            ops.add_details(details);
        }
        for message in self
            .messages_to_summarize
            .iter()
            .chain(&self.turn_prefix_messages)
        {
            ops.add_message(message);
        }
        ops
    }
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
pub(crate) fn entry_message(entry: &Entry, compaction_too: bool) -> Option<PathMessage<'_>> {
    match &entry.kind {
        EntryKind::Message(message) => Some(PathMessage::Borrowed(message)),
        EntryKind::CustomMessage {
            custom_type,
            content,
            ..
        } => Some(owned(custom_message(entry, content, custom_type))),
        EntryKind::BranchSummary(summary) => {
            Some(owned(AgentMessage::BranchSummary(BranchSummaryMessage {
                summary: summary.summary.clone(),
                from_id: summary.from_id.clone(),
                timestamp: entry_ms(entry),
            })))
        }
        EntryKind::Compaction(compaction) if compaction_too => Some(owned(
            AgentMessage::CompactionSummary(CompactionSummaryMessage {
                summary: compaction.summary.clone(),
                tokens_before: compaction.tokens_before,
                timestamp: entry_ms(entry),
            }),
        )),
        EntryKind::Compaction(_)
        | EntryKind::ThinkingLevelChange { .. }
        | EntryKind::ModelChange(_)
        | EntryKind::Usage(_)
        | EntryKind::ContextEdit(_)
        | EntryKind::Custom { .. }
        | EntryKind::Label { .. }
        | EntryKind::SessionInfo { .. }
        | EntryKind::Unknown { .. } => None,
    }
}

/// Returns the message an entry contributes to a compaction's summarised range
/// (`getMessageFromEntryForCompaction`): messages, custom messages, branch summaries; never a
/// compaction.
pub fn entry_message_for_compaction(entry: &Entry) -> Option<PathMessage<'_>> {
    entry_message(entry, false)
}

/// The message `buildSessionContext` emits for an entry (`appendMessage`): empty branch
/// summaries are skipped.
fn context_message(entry: &Entry) -> Option<PathMessage<'_>> {
    match &entry.kind {
        EntryKind::BranchSummary(summary) if summary.summary.is_empty() => None,
        _ => entry_message(entry, false),
    }
}

/// The last compaction of a path: its index and fields.
fn last_compaction<E: PathEntry>(path: &[E]) -> Option<(usize, &CompactionEntry)> {
    path.iter()
        .enumerate()
        .rev()
        .find_map(|(idx, entry)| match &entry.entry().kind {
            EntryKind::Compaction(compaction) => Some((idx, compaction)),
            _ => None,
        })
}

/// Returns the index of the entry with this id (`findIndex(entry.id === id)`), looking back from
/// `near` first.
///
/// The ids on a path are unique (it is walked by parent id through an id → entry map, so an
/// id cannot come twice), which makes the first match anywhere the only one; looking back
/// from the compaction finds a kept boundary after a few entries instead of a whole path.
/// Without an id, the first entry without one matches, as in the reference.
fn index_of<E: PathEntry>(path: &[E], id: Option<&EntryId>, near: usize) -> Option<usize> {
    let matches = |entry: &E| entry.entry().id.as_ref() == id;
    if id.is_none() {
        return path.iter().position(matches);
    }
    let near = near.min(path.len());
    path[..near]
        .iter()
        .rposition(matches)
        .or_else(|| path[near..].iter().position(matches).map(|idx| idx + near))
}

/// Where the messages of the reference's `buildSessionContext` come from.
struct ContextRanges<'p> {
    /// The last compaction: its summary comes first.
    compaction: Option<(&'p Entry, &'p CompactionEntry)>,
    /// Entries whose messages follow, in order (before the compaction from its first kept
    /// entry, then after it; or the whole path).
    ranges: [std::ops::Range<usize>; 2],
}

fn context_ranges<E: PathEntry>(path: &[E]) -> ContextRanges<'_> {
    let Some((idx, compaction)) = last_compaction(path) else {
        return ContextRanges {
            compaction: None,
            ranges: [0..path.len(), 0..0],
        };
    };
    // Only entries before the compaction can start the kept part.
    let kept = index_of(path, compaction.first_kept_entry_id.as_ref(), idx)
        .filter(|&kept| kept < idx)
        .map_or(0..0, |kept| kept..idx);
    ContextRanges {
        compaction: Some((path[idx].entry(), compaction)),
        ranges: [kept, idx + 1..path.len()],
    }
}

fn summary_message(entry: &Entry, compaction: &CompactionEntry) -> PathMessage<'static> {
    owned(AgentMessage::CompactionSummary(CompactionSummaryMessage {
        summary: compaction.summary.clone(),
        tokens_before: compaction.tokens_before,
        timestamp: entry_ms(entry),
    }))
}

/// Returns the messages of the reference's `buildSessionContext` over a path (root → leaf): with
/// a compaction on it, the last one's summary, then the entries from its `firstKeptEntryId` up
/// to it, then everything after it.
pub fn session_context_messages<E: PathEntry>(path: &[E]) -> Vec<PathMessage<'_>> {
    let context = context_ranges(path);
    let mut messages = Vec::new();
    if let Some((entry, compaction)) = context.compaction {
        messages.push(summary_message(entry, compaction));
    }
    for range in context.ranges {
        messages.extend(
            path[range]
                .iter()
                .filter_map(|entry| context_message(entry.entry())),
        );
    }
    messages
}

/// `estimateContextTokens(buildSessionContext(path).messages).tokens`, reading the context
/// backwards only as far as its last trustworthy usage.
fn context_tokens<E: PathEntry>(path: &[E]) -> u64 {
    let context = context_ranges(path);
    let mut trailing: u64 = 0;
    let [kept, after] = context.ranges;
    for entry in path[after].iter().rev().chain(path[kept].iter().rev()) {
        let Some(message) = context_message(entry.entry()) else {
            continue;
        };
        if let Some(usage) = assistant_usage(&message) {
            return calculate_context_tokens(usage) + trailing;
        }
        trailing += estimate_tokens(&message);
    }
    if let Some((entry, compaction)) = context.compaction {
        trailing += estimate_tokens(&summary_message(entry, compaction));
    }
    trailing
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
    let previous = last_compaction(path);
    let (boundary_start, previous_summary) = match previous {
        Some((idx, compaction)) => {
            let start =
                index_of(path, compaction.first_kept_entry_id.as_ref(), idx).unwrap_or(idx + 1);
            (start, Some(compaction.summary.as_str()))
        }
        None => (0, None),
    };
    let tokens_before = context_tokens(path);
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
    let previous_details = previous
        .filter(|(_, compaction)| compaction.from_hook != Some(true))
        .and_then(|(_, compaction)| compaction.details.as_ref());
    let messages_in = |from: usize, to: usize| -> Vec<PathMessage<'a>> {
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
        previous_details,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::compaction::files::FileLists;
    use serde_json::json;

    fn entry(id: &str, body: Value) -> Entry {
        let mut value = body;
        value["id"] = json!(id);
        value["parentId"] = Value::Null;
        value["timestamp"] = json!("2025-01-01T00:00:00.000Z");
        Entry::from_value(value).unwrap()
    }

    fn user(id: &str, text: &str) -> Entry {
        entry(
            id,
            json!({"type":"message","message":{"role":"user","content":text,"timestamp":1}}),
        )
    }

    fn reader(id: &str, path: &str, total: u64) -> Entry {
        entry(
            id,
            json!({"type":"message","message":{"role":"assistant","content":[
                {"type":"toolCall","id":"c","name":"read","arguments":{"path":path}}],
                "usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":total},
                "stopReason":"toolUse","timestamp":1}}),
        )
    }

    fn compaction(id: &str, first_kept: &str, from_hook: bool) -> Entry {
        entry(
            id,
            json!({"type":"compaction","summary":"previous","firstKeptEntryId":first_kept,"tokensBefore":9,
                "details":{"readFiles":["old.ts"],"modifiedFiles":["gone.ts"]},"fromHook":from_hook}),
        )
    }

    fn path(from_hook: bool) -> Vec<Entry> {
        vec![
            user("u1", "first"),
            reader("a1", "a.ts", 100),
            user("u2", "second"),
            reader("a2", "b.ts", 200),
            compaction("c1", "u2", from_hook),
            user("u3", &"x".repeat(400)),
            reader("a3", "c.ts", 300),
            user("u4", &"y".repeat(40)),
        ]
    }

    #[test]
    fn the_range_starts_at_the_previous_kept_boundary_with_its_summary_and_files() {
        let path = path(false);
        let prep = prepare_compaction(&path, &CompactionSettings::default()).unwrap();
        assert_eq!(prep.boundary_start, 2, "u2, the previous first kept entry");
        assert_eq!(prep.previous_summary, Some("previous"));
        // The context is summary, u2, a2, u3, a3, u4: a3's usage (300) plus u4 (10).
        assert_eq!(prep.tokens_before, 310);
        // Nothing reaches 20000 tokens: everything from the boundary is kept.
        assert_eq!(prep.first_kept_entry_id.as_str(), "u2");
        assert!(prep.messages_to_summarize.is_empty());
        let lists = prep.file_ops().lists();
        assert_eq!(lists.read_files, vec!["old.ts"]);
        assert_eq!(lists.modified_files, vec!["gone.ts"]);

        let tight = CompactionSettings {
            keep_recent_tokens: 50,
            ..CompactionSettings::default()
        };
        let prep = prepare_compaction(&path, &tight).unwrap();
        assert_eq!(prep.first_kept_entry_id.as_str(), "u3");
        let summarised: Vec<&str> = prep
            .messages_to_summarize
            .iter()
            .map(|message| message.role())
            .collect();
        assert_eq!(summarised, vec!["user", "assistant"], "u2 and a2, never c1");
        assert_eq!(prep.file_ops().lists().read_files, vec!["b.ts", "old.ts"]);
    }

    #[test]
    fn an_extension_compaction_lends_no_files() {
        let path = path(true);
        let prep = prepare_compaction(&path, &CompactionSettings::default()).unwrap();
        assert_eq!(prep.previous_details, None);
        assert_eq!(prep.file_ops().lists(), FileLists::default());
    }

    #[test]
    fn nothing_to_plan_is_told_apart() {
        let mut path = path(false);
        path.push(compaction("c2", "u4", false));
        assert_eq!(
            prepare_manual_compaction(&path, &CompactionSettings::default()).unwrap_err(),
            CompactionError::AlreadyCompacted
        );
        let empty: Vec<Entry> = Vec::new();
        assert_eq!(
            prepare_manual_compaction(&empty, &CompactionSettings::default()).unwrap_err(),
            CompactionError::NothingToCompact
        );
    }

    #[test]
    fn context_messages_follow_build_session_context() {
        let path = path(false);
        let roles: Vec<String> = session_context_messages(&path)
            .iter()
            .map(|message| message.role().to_owned())
            .collect();
        assert_eq!(
            roles,
            vec![
                "compactionSummary",
                "user",
                "assistant",
                "user",
                "assistant",
                "user"
            ]
        );
        // A first kept id that is not before the compaction keeps nothing before it.
        let mut odd = path.clone();
        odd[4] = compaction("c1", "u4", false);
        assert_eq!(session_context_messages(&odd).len(), 4);
        assert_eq!(context_tokens(&odd), 310);
    }
}
