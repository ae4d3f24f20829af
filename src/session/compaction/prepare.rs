//! The compaction plan (1.6.0 `prepareCompaction`): what is summarised, what is kept, the
//! previous summary to update, the files touched and the checkpoint of the prompt state.
//!
//! Planning reads the **projection** of the path (`buildSessionProjection`, the rule of
//! [`crate::store::context::project`]): the newest compaction (checkpoint and summary) first,
//! its kept range without system messages, then every later entry, context edits applied. The
//! summarised range starts right after the previous compaction in that projection (its kept
//! range is folded into the new summary together with the previous summary text) and ends at
//! the cut, or at the start of a split turn, whose prefix is summarised apart. System messages
//! are never summarised: the compaction entry carries their replay (`systemMessage`).
//!
//! Invariant: pure.

use std::borrow::Borrow;
use std::ops::Deref;

use serde_json::{Map, Value};

use crate::ai::transcript::get_current_system_message;
use crate::model::entry::{Entry, EntryKind};
use crate::model::ids::EntryId;
use crate::model::message::{
    AgentMessage, BranchSummaryMessage, CompactionSummaryMessage, CustomMessage, SystemMessage,
    UserContent,
};
use crate::session::compaction::files::FileOps;
use crate::session::compaction::tokens::{estimate_context_tokens, estimate_tokens};
use crate::session::compaction::{CompactionError, CompactionSettings, PathEntry};
use crate::store::context::{PathRow, project};
use crate::support::clock::ms_from_iso;
use crate::support::json;

/// A message of a path: borrowed from a `message` entry, or made from another entry type
/// (custom message, branch summary, compaction) or by the projection (an edited message).
#[derive(Debug, Clone, PartialEq)]
pub enum PathMessage<'a> {
    /// The message of a `message` entry.
    Borrowed(&'a AgentMessage),
    /// A message made from an entry.
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

/// One entry of a path's projection: its source entry, where it is on the path, and the
/// messages it gives the context (after edits).
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectedEntry<'a> {
    /// The source entry.
    pub entry: &'a Entry,
    /// Its index in the path.
    pub path_index: usize,
    /// Its context messages.
    pub messages: Vec<AgentMessage>,
}

/// Returns the projection of a path (root → leaf, or a tail of it from the last compaction's
/// kept boundary): 1.6.0's `buildSessionProjection(path).entries`.
pub fn project_path<E: PathEntry>(path: &[E]) -> Vec<ProjectedEntry<'_>> {
    let mut rows: Vec<PathRow> = path
        .iter()
        .enumerate()
        .map(|(idx, entry)| PathRow {
            seq: i64::try_from(idx).unwrap_or(i64::MAX),
            id: entry.entry().id.as_ref().map(ToString::to_string),
            type_name: entry.entry().type_name().to_owned(),
            payload: Some(entry.line().into_owned()),
            flags: None,
        })
        .collect();
    project(&mut rows)
        .into_iter()
        .map(|projected| ProjectedEntry {
            entry: path[projected.index].entry(),
            path_index: projected.index,
            messages: projected
                .messages
                .iter()
                .map(|text| match json::parse_lenient(text.as_bytes()) {
                    Ok(value) => AgentMessage::from_value(value),
                    Err(_) => AgentMessage::Unknown(Value::Null),
                })
                .collect(),
        })
        .collect()
}

/// What [`crate::session::compaction::compact`] summarises and keeps (the reference's
/// `CompactionPreparation`, plus the indices it was derived from).
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionPreparation<'a> {
    /// The first entry that stays verbatim after the compaction.
    pub first_kept_entry_id: EntryId,
    /// Its index in the path.
    pub first_kept_entry_index: usize,
    /// Where the summarised range starts, as an index in the path: the entry after the
    /// previous compaction in the projection (the first of its kept range), else the first
    /// projected entry.
    pub boundary_start: usize,
    /// Index in the path of the split turn's first entry.
    pub turn_start_index: Option<usize>,
    /// The history to summarise (system messages left out).
    pub messages_to_summarize: Vec<PathMessage<'a>>,
    /// The prefix of a split turn.
    pub turn_prefix_messages: Vec<PathMessage<'a>>,
    /// Whether the cut falls inside a turn.
    pub is_split_turn: bool,
    /// Estimated context size before compacting (`estimateProjectedContextTokens`).
    pub tokens_before: u64,
    /// The previous compaction's summary, to be updated rather than rewritten.
    pub previous_summary: Option<&'a str>,
    /// The previous compaction's `details`, when pi wrote it (not an extension): its file
    /// lists carry over.
    pub previous_details: Option<&'a Value>,
    /// The prompt state of the projection (`getCurrentSystemMessage`): the checkpoint the
    /// compaction entry stores as `systemMessage` (its timestamp set to the entry's time).
    pub system_message: Option<SystemMessage>,
    /// The settings the plan was made with.
    pub settings: CompactionSettings,
}

impl CompactionPreparation<'_> {
    /// Returns the files touched by the summarised messages (history and turn prefix) and
    /// recorded by the previous compaction (the reference's `fileOps`).
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

/// Returns the message an entry contributes to a compaction's summarised range, unedited:
/// messages, custom messages, branch summaries; never a compaction.
pub fn entry_message_for_compaction(entry: &Entry) -> Option<PathMessage<'_>> {
    entry_message(entry, false)
}

/// Returns the messages of 1.6.0's `buildSessionContext` over a path (root → leaf): the
/// projection's messages, in order.
pub fn session_context_messages<E: PathEntry>(path: &[E]) -> Vec<PathMessage<'_>> {
    project_path(path)
        .into_iter()
        .flat_map(|entry| entry.messages)
        .map(owned)
        .collect()
}

/// `isCutPointMessage`.
fn is_cut_point_message(message: &AgentMessage) -> bool {
    matches!(
        message.role(),
        "user" | "assistant" | "bashExecution" | "custom" | "branchSummary" | "compactionSummary"
    )
}

/// `isTurnStartMessage`.
fn is_turn_start_message(message: &AgentMessage) -> bool {
    matches!(
        message.role(),
        "user" | "bashExecution" | "custom" | "branchSummary" | "compactionSummary"
    )
}

fn is_compaction(entry: &Entry) -> bool {
    matches!(entry.kind, EntryKind::Compaction(_))
}

/// `isProjectedTurnStart`.
fn is_projected_turn_start(entry: &ProjectedEntry<'_>) -> bool {
    !is_compaction(entry.entry) && entry.messages.iter().any(is_turn_start_message)
}

/// Whether the entry gives the context messages before any edit
/// (`sessionEntryToContextMessages(entry).length > 0`).
fn gives_messages(entry: &Entry) -> bool {
    match &entry.kind {
        EntryKind::Message(_) | EntryKind::CustomMessage { .. } | EntryKind::Compaction(_) => true,
        EntryKind::BranchSummary(summary) => !summary.summary.is_empty(),
        EntryKind::ThinkingLevelChange { .. }
        | EntryKind::ModelChange(_)
        | EntryKind::Usage(_)
        | EntryKind::ContextEdit(_)
        | EntryKind::Custom { .. }
        | EntryKind::Label { .. }
        | EntryKind::SessionInfo { .. }
        | EntryKind::Unknown { .. } => false,
    }
}

/// Where a compaction cuts a projection (indices into the projection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProjectedCut {
    first_kept: usize,
    turn_start: Option<usize>,
    is_split_turn: bool,
}

/// `findProjectedCutPoint`: walking back from the newest projected entry, message estimates
/// accumulate until `keep_recent_tokens`; the cut is the nearest cut point at or after that
/// entry. A suffix made only of an omitted recovery attempt (and its edits) moves the cut one
/// entry on; metadata entries just before the cut are pulled into the kept part.
fn find_projected_cut_point(
    entries: &[ProjectedEntry<'_>],
    start: usize,
    end: usize,
    keep_recent_tokens: u64,
) -> ProjectedCut {
    let cut_points: Vec<usize> = (start..end)
        .filter(|&idx| {
            !is_compaction(entries[idx].entry)
                && entries[idx].messages.iter().any(is_cut_point_message)
        })
        .collect();
    let (Some(&first), Some(&last)) = (cut_points.first(), cut_points.last()) else {
        return ProjectedCut {
            first_kept: start,
            turn_start: None,
            is_split_turn: false,
        };
    };
    let mut accumulated: u64 = 0;
    let mut exceeded = false;
    let mut cut = first;
    for idx in (start..end).rev() {
        let tokens: u64 = entries[idx].messages.iter().map(estimate_tokens).sum();
        if tokens == 0 {
            continue;
        }
        accumulated += tokens;
        if accumulated >= keep_recent_tokens {
            exceeded = true;
            cut = cut_points
                .iter()
                .copied()
                .find(|&candidate| candidate >= idx)
                .unwrap_or(last);
            break;
        }
    }
    // A recovery attempt and its omission edits are context-invisible after the last visible
    // input: advance only for a closed suffix containing an omitted assistant attempt.
    let suffix = entries.get(cut + 1..end).unwrap_or_default();
    let intrinsically_visible = |entry: &ProjectedEntry<'_>| {
        !matches!(entry.entry.kind, EntryKind::ContextEdit(_)) && gives_messages(entry.entry)
    };
    let omitted =
        |entry: &ProjectedEntry<'_>| intrinsically_visible(entry) && entry.messages.is_empty();
    let omitted_ids: Vec<Option<&EntryId>> = suffix
        .iter()
        .filter(|entry| omitted(entry))
        .map(|entry| entry.entry.id.as_ref())
        .collect();
    let external_replacement = suffix.iter().any(|entry| match &entry.entry.kind {
        EntryKind::ContextEdit(edit) => {
            !matches!(edit.replacement, Some(Value::Null))
                && !omitted_ids.contains(&edit.target_id.as_ref())
        }
        _ => false,
    });
    let recovery_suffix = exceeded
        && !external_replacement
        && suffix.iter().any(|entry| {
            matches!(
                entry.entry.kind,
                EntryKind::Message(AgentMessage::Assistant(_))
            ) && omitted(entry)
        })
        && suffix.iter().all(|entry| {
            !is_compaction(entry.entry) && (!intrinsically_visible(entry) || omitted(entry))
        });
    if recovery_suffix {
        cut += 1;
    }
    while cut > start {
        let previous = &entries[cut - 1];
        if is_compaction(previous.entry) || !previous.messages.is_empty() {
            break;
        }
        cut -= 1;
    }
    let starts_turn = entries.get(cut).is_some_and(is_projected_turn_start);
    let turn_start = if starts_turn {
        None
    } else {
        (start..=cut.min(entries.len().saturating_sub(1)))
            .rev()
            .find(|&idx| is_projected_turn_start(&entries[idx]))
    };
    ProjectedCut {
        first_kept: cut,
        turn_start,
        is_split_turn: !starts_turn && turn_start.is_some(),
    }
}

/// `estimateProjectedContextTokens`: the last trustworthy usage plus the estimates after it,
/// unless a context edit or compaction on the path comes after the entry that usage came
/// from; then the estimate of the replayed prompt and every other message.
pub fn estimate_projected_context_tokens<E: PathEntry>(
    projection: &[ProjectedEntry<'_>],
    path: &[E],
) -> u64 {
    let messages: Vec<&AgentMessage> = projection
        .iter()
        .flat_map(|entry| entry.messages.iter())
        .collect();
    let estimate = estimate_context_tokens(&messages);
    if let Some(usage_index) = estimate.last_usage_index {
        let mut at = 0;
        let mut usage_entry = None;
        for entry in projection {
            let next = at + entry.messages.len();
            if usage_index < next {
                usage_entry = Some(entry.entry.id.as_ref());
                break;
            }
            at = next;
        }
        let usage_entry_index = usage_entry.and_then(|id| {
            path.iter()
                .position(|entry| entry.entry().id.as_ref() == id)
        });
        let invalidating = path.iter().rposition(|entry| {
            matches!(
                entry.entry().kind,
                EntryKind::ContextEdit(_) | EntryKind::Compaction(_)
            )
        });
        let valid = match (usage_entry_index, invalidating) {
            (Some(usage), Some(invalidating)) => usage > invalidating,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if valid {
            return estimate.tokens;
        }
    }
    let mut tokens = get_current_system_message(&messages_owned(&messages))
        .map_or(0, |system| estimate_tokens(&AgentMessage::System(system)));
    for message in &messages {
        if message.role() != "system" {
            tokens += estimate_tokens(message);
        }
    }
    tokens
}

fn messages_owned(messages: &[&AgentMessage]) -> Vec<AgentMessage> {
    messages
        .iter()
        .filter(|message| message.role() == "system")
        .map(|message| (*message).clone())
        .collect()
}

/// `getMessagesFromProjectedEntryForCompaction`: a compaction gives nothing, system messages
/// are prompt state, not conversation.
fn summarised_messages<'a>(entry: &ProjectedEntry<'_>) -> Vec<PathMessage<'a>> {
    let messages = if is_compaction(entry.entry) {
        Vec::new()
    } else {
        entry
            .messages
            .iter()
            .filter(|message| message.role() != "system")
            .cloned()
            .collect()
    };
    messages
        .into_iter()
        .map(|message| PathMessage::Owned(Box::new(message)))
        .collect()
}

/// Plans a compaction of a path (root → leaf, or its tail from the last compaction's kept
/// boundary); `None` when the last entry is already a compaction, when the first kept entry
/// has no id, or when nothing would be summarised.
pub fn prepare_compaction<'a, E: PathEntry>(
    path: &'a [E],
    settings: &CompactionSettings,
) -> Option<CompactionPreparation<'a>> {
    if path
        .last()
        .is_some_and(|entry| is_compaction(entry.entry()))
    {
        return None;
    }
    let projection = project_path(path);
    let previous = projection
        .iter()
        .position(|entry| is_compaction(entry.entry) && !entry.messages.is_empty());
    let (boundary_start, previous_compaction) = match previous {
        Some(idx) => match &projection[idx].entry.kind {
            EntryKind::Compaction(compaction) => (idx + 1, Some(compaction)),
            _ => (idx + 1, None),
        },
        None => (0, None),
    };
    let end = projection.len();
    let tokens_before = estimate_projected_context_tokens(&projection, path);
    let cut = find_projected_cut_point(
        &projection,
        boundary_start,
        end,
        settings.keep_recent_tokens,
    );
    let first_kept = projection.get(cut.first_kept)?;
    let first_kept_entry_id = first_kept.entry.id.clone()?;
    let history_end = match cut.turn_start {
        Some(turn_start) if cut.is_split_turn => turn_start,
        _ => cut.first_kept,
    };
    let range = |from: usize, to: usize| -> Vec<PathMessage<'a>> {
        projection
            .get(from..to.max(from))
            .unwrap_or_default()
            .iter()
            .flat_map(summarised_messages)
            .collect()
    };
    let messages_to_summarize = range(boundary_start, history_end);
    let turn_prefix_messages = match cut.turn_start {
        Some(turn_start) if cut.is_split_turn => range(turn_start, cut.first_kept),
        _ => Vec::new(),
    };
    if messages_to_summarize.is_empty() && turn_prefix_messages.is_empty() {
        return None;
    }
    let all: Vec<&AgentMessage> = projection
        .iter()
        .flat_map(|entry| entry.messages.iter())
        .collect();
    let system_message = get_current_system_message(&messages_owned(&all));
    let path_index = |idx: usize| {
        projection
            .get(idx)
            .map_or(path.len(), |entry| entry.path_index)
    };
    Some(CompactionPreparation {
        first_kept_entry_id,
        first_kept_entry_index: first_kept.path_index,
        boundary_start: path_index(boundary_start),
        turn_start_index: cut.turn_start.map(path_index),
        messages_to_summarize,
        turn_prefix_messages,
        is_split_turn: cut.is_split_turn,
        tokens_before,
        previous_summary: previous_compaction.map(|compaction| compaction.summary.as_str()),
        previous_details: previous_compaction
            .filter(|compaction| compaction.from_hook != Some(true))
            .and_then(|compaction| compaction.details.as_ref()),
        system_message,
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
            .is_some_and(|entry| is_compaction(entry.entry()))
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

    fn tight() -> CompactionSettings {
        CompactionSettings {
            keep_recent_tokens: 50,
            ..CompactionSettings::default()
        }
    }

    #[test]
    fn the_range_starts_after_the_previous_compaction_with_its_summary_and_files() {
        let path = path(false);
        // Nothing reaches 20000 tokens: everything is kept, nothing would be summarised
        // (1.6.0 plans nothing then).
        assert!(prepare_compaction(&path, &CompactionSettings::default()).is_none());
        let prep = prepare_compaction(&path, &tight()).unwrap();
        assert_eq!(prep.boundary_start, 2, "u2, the previous first kept entry");
        assert_eq!(prep.previous_summary, Some("previous"));
        // The projection is summary, u2, a2, u3, a3, u4: a3's usage (300) plus u4 (10).
        assert_eq!(prep.tokens_before, 310);
        assert_eq!(prep.first_kept_entry_id.as_str(), "u3");
        let summarised: Vec<&str> = prep
            .messages_to_summarize
            .iter()
            .map(|message| message.role())
            .collect();
        assert_eq!(summarised, vec!["user", "assistant"], "u2 and a2, never c1");
        assert_eq!(prep.file_ops().lists().read_files, vec!["b.ts", "old.ts"]);
        assert_eq!(prep.file_ops().lists().modified_files, vec!["gone.ts"]);
        assert_eq!(prep.system_message, None, "no system message on the path");
    }

    #[test]
    fn an_extension_compaction_lends_no_files() {
        let path = path(true);
        let prep = prepare_compaction(&path, &tight()).unwrap();
        assert_eq!(prep.previous_details, None);
        assert_eq!(prep.file_ops().lists().read_files, vec!["b.ts"]);
    }

    #[test]
    fn system_messages_are_checkpointed_not_summarised() {
        let mut path = path(false);
        path.insert(
            0,
            entry(
                "s0",
                json!({"type":"message","message":{"role":"system","content":"",
                    "sections":{"preamble":"Be brief."},"timestamp":1}}),
            ),
        );
        path.truncate(5);
        path.push(user("u5", &"z".repeat(400)));
        let prep = prepare_compaction(&path, &tight()).unwrap();
        assert!(
            prep.messages_to_summarize
                .iter()
                .all(|message| message.role() != "system")
        );
        let system = prep.system_message.expect("the checkpoint");
        assert_eq!(
            system
                .sections
                .as_ref()
                .and_then(|sections| sections.get("preamble")),
            Some(&json!("Be brief."))
        );
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
        assert_eq!(
            estimate_projected_context_tokens(&project_path(&odd), &odd),
            310
        );
    }
}
