//! Cut-point selection (`spec/compaction.md` §4): where the kept tail of a path begins.
//!
//! Walking back from the newest entry, message estimates accumulate until `keepRecentTokens`;
//! the cut is the nearest valid cut point at or after that entry — never a tool result, which
//! must stay with its call. Non-message entries just before the cut are pulled into the kept
//! part. A cut at anything but a user message splits a turn when the turn's start lies inside
//! the range.
//!
//! The reference lists every valid cut point of the range first; here the two lookups it makes
//! in that list (the first one, and the smallest one at or after an index) scan the path
//! directly, so the cost is the length of the kept tail rather than of the whole range. The
//! results are the same.
//!
//! Invariant: pure functions over the path; indices are positions in the slice given.

use crate::model::entry::EntryKind;
use crate::session::compaction::PathEntry;
use crate::session::compaction::tokens::estimate_tokens;

/// Where a compaction cuts a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutPoint {
    /// Index of the first entry that is kept.
    pub first_kept_entry_index: usize,
    /// Index of the entry that starts the cut turn, when the cut is not at a user message and
    /// such a start lies in the range.
    pub turn_start_index: Option<usize>,
    /// Whether the cut falls inside a turn (then the turn's prefix is summarised apart).
    pub is_split_turn: bool,
}

/// Whether the entry is a valid cut point: a message of role `user`, `assistant`,
/// `bashExecution`, `custom`, `branchSummary` or `compactionSummary`, or a `branch_summary` or
/// `custom_message` entry.
fn is_valid_cut_point(kind: &EntryKind) -> bool {
    match kind {
        EntryKind::Message(message) => matches!(
            message.role(),
            "user"
                | "assistant"
                | "bashExecution"
                | "custom"
                | "branchSummary"
                | "compactionSummary"
        ),
        EntryKind::BranchSummary(_) | EntryKind::CustomMessage { .. } => true,
        EntryKind::ThinkingLevelChange { .. }
        | EntryKind::ModelChange(_)
        | EntryKind::Compaction(_)
        | EntryKind::Usage(_)
        | EntryKind::ContextEdit(_)
        | EntryKind::Custom { .. }
        | EntryKind::Label { .. }
        | EntryKind::SessionInfo { .. }
        | EntryKind::Unknown { .. } => false,
    }
}

/// Whether the entry can start a turn: a `user` or `bashExecution` message, a
/// `branch_summary` or a `custom_message`.
fn starts_turn(kind: &EntryKind) -> bool {
    match kind {
        EntryKind::Message(message) => matches!(message.role(), "user" | "bashExecution"),
        EntryKind::BranchSummary(_) | EntryKind::CustomMessage { .. } => true,
        EntryKind::ThinkingLevelChange { .. }
        | EntryKind::ModelChange(_)
        | EntryKind::Compaction(_)
        | EntryKind::Usage(_)
        | EntryKind::ContextEdit(_)
        | EntryKind::Custom { .. }
        | EntryKind::Label { .. }
        | EntryKind::SessionInfo { .. }
        | EntryKind::Unknown { .. } => false,
    }
}

/// Returns the indices of the valid cut points in `path[start..end]`, in order
/// (`findValidCutPoints`).
pub fn find_valid_cut_points<E: PathEntry>(path: &[E], start: usize, end: usize) -> Vec<usize> {
    let end = end.min(path.len());
    (start..end)
        .filter(|&idx| is_valid_cut_point(&path[idx].entry().kind))
        .collect()
}

/// Returns the index of the entry that starts the turn containing `entry_index`, scanning down
/// to `start` (`findTurnStartIndex`); `None` when there is none.
pub fn find_turn_start_index<E: PathEntry>(
    path: &[E],
    entry_index: usize,
    start: usize,
) -> Option<usize> {
    if path.is_empty() || entry_index < start {
        return None;
    }
    let top = entry_index.min(path.len() - 1);
    (start..=top)
        .rev()
        .find(|&idx| starts_turn(&path[idx].entry().kind))
}

/// Finds where to cut `path[start..end]` so that about `keep_recent_tokens` stay
/// (`findCutPoint`).
///
/// Without any valid cut point the whole range is kept (`first_kept_entry_index = start`).
pub fn find_cut_point<E: PathEntry>(
    path: &[E],
    start: usize,
    end: usize,
    keep_recent_tokens: u64,
) -> CutPoint {
    let end = end.min(path.len());
    let cut_point_at_or_after =
        |from: usize| (from..end).find(|&idx| is_valid_cut_point(&path[idx].entry().kind));
    let Some(first_cut_point) = cut_point_at_or_after(start) else {
        return CutPoint {
            first_kept_entry_index: start,
            turn_start_index: None,
            is_split_turn: false,
        };
    };
    let mut accumulated: u64 = 0;
    let mut cut = first_cut_point;
    for idx in (start..end).rev() {
        let Some(message) = path[idx].entry().message() else {
            continue;
        };
        accumulated += estimate_tokens(message);
        if accumulated >= keep_recent_tokens {
            // Crossed on trailing tool results with no cut point after them: keep the default.
            if let Some(found) = cut_point_at_or_after(idx) {
                cut = found;
            }
            break;
        }
    }
    // Pull settings, labels, custom entries and the like just before the cut into the kept
    // part; stop at a message or a compaction.
    while cut > start {
        match &path[cut - 1].entry().kind {
            EntryKind::Message(_) | EntryKind::Compaction(_) => break,
            EntryKind::ThinkingLevelChange { .. }
            | EntryKind::ModelChange(_)
            | EntryKind::BranchSummary(_)
            | EntryKind::Usage(_)
            | EntryKind::ContextEdit(_)
            | EntryKind::Custom { .. }
            | EntryKind::CustomMessage { .. }
            | EntryKind::Label { .. }
            | EntryKind::SessionInfo { .. }
            | EntryKind::Unknown { .. } => cut -= 1,
        }
    }
    let is_user = path[cut]
        .entry()
        .message()
        .is_some_and(|message| message.role() == "user");
    let turn_start_index = if is_user {
        None
    } else {
        find_turn_start_index(path, cut, start)
    };
    CutPoint {
        first_kept_entry_index: cut,
        turn_start_index,
        is_split_turn: turn_start_index.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Entry;
    use serde_json::{Value, json};

    fn entry(id: &str, body: Value) -> Entry {
        let mut value = body;
        value["id"] = json!(id);
        value["parentId"] = Value::Null;
        value["timestamp"] = json!("2025-01-01T00:00:00.000Z");
        Entry::from_value(value).unwrap()
    }

    fn text_of(tokens: usize) -> String {
        "x".repeat(tokens * 4)
    }

    fn user(id: &str, tokens: usize) -> Entry {
        entry(
            id,
            json!({"type":"message","message":{"role":"user","content":text_of(tokens),"timestamp":1}}),
        )
    }

    /// An assistant whose estimate is exactly `tokens` (with an empty-argument tool call when
    /// `tool` is set: name `t` + `{}` = 3 chars, padded to a multiple of 4 by the text).
    fn assistant(id: &str, tokens: usize, tool: bool) -> Entry {
        let mut content = vec![];
        if tool {
            content.push(json!({"type":"text","text":"x".repeat(tokens * 4 - 3)}));
            content.push(json!({"type":"toolCall","id":"c","name":"t","arguments":{}}));
        } else {
            content.push(json!({"type":"text","text":text_of(tokens)}));
        }
        entry(
            id,
            json!({"type":"message","message":{"role":"assistant","content":content,"stopReason":"stop","timestamp":1}}),
        )
    }

    fn result(id: &str, tokens: usize) -> Entry {
        entry(
            id,
            json!({"type":"message","message":{"role":"toolResult","toolCallId":"c","toolName":"t",
                "content":[{"type":"text","text":text_of(tokens)}],"isError":false,"timestamp":1}}),
        )
    }

    /// The worked example of `spec/compaction.md` §4.
    fn example() -> Vec<Entry> {
        vec![
            entry(
                "M",
                json!({"type":"model_change","provider":"p","modelId":"m"}),
            ),
            entry(
                "T",
                json!({"type":"thinking_level_change","thinkingLevel":"high"}),
            ),
            user("u1", 10),
            assistant("a1", 40, true),
            result("r1", 300),
            assistant("a2", 20, false),
            user("u2", 10),
            assistant("a3", 50, true),
            result("r2", 60),
            assistant("a4", 30, false),
        ]
    }

    #[test]
    fn the_spec_worked_example_splits_at_a3() {
        let path = example();
        assert_eq!(
            find_valid_cut_points(&path, 0, path.len()),
            vec![2, 3, 5, 6, 7, 9]
        );
        let cut = find_cut_point(&path, 0, path.len(), 100);
        assert_eq!(
            cut,
            CutPoint {
                first_kept_entry_index: 7,
                turn_start_index: Some(6),
                is_split_turn: true
            }
        );
        let cut = find_cut_point(&path, 0, path.len(), 50);
        assert_eq!(cut.first_kept_entry_index, 9);
        assert_eq!(cut.turn_start_index, Some(6));
        assert!(cut.is_split_turn);
    }

    #[test]
    fn a_cut_at_a_user_message_is_not_split_and_absorbs_settings_before_it() {
        let path = example();
        // 30 + 60 + 50 + 10 = 150 at u2.
        let cut = find_cut_point(&path, 0, path.len(), 150);
        assert_eq!(cut.first_kept_entry_index, 6);
        assert_eq!(cut.turn_start_index, None);
        assert!(!cut.is_split_turn);
        // Everything: the threshold is never reached, the first cut point (u1) is kept, and
        // the settings entries before it are pulled in.
        let cut = find_cut_point(&path, 0, path.len(), 1_000_000);
        assert_eq!(cut.first_kept_entry_index, 0);
        assert!(!cut.is_split_turn);
    }

    #[test]
    fn tool_results_are_never_cut_points() {
        let path = vec![user("u1", 10), assistant("a1", 5, true), result("r1", 500)];
        // The threshold is crossed on r1, and no cut point follows it: the first cut point.
        let cut = find_cut_point(&path, 0, path.len(), 100);
        assert_eq!(cut.first_kept_entry_index, 0);
        assert!(!cut.is_split_turn);
    }

    #[test]
    fn absorption_stops_at_a_compaction_and_at_the_range_start() {
        let path = vec![
            user("u1", 10),
            entry(
                "c1",
                json!({"type":"compaction","summary":"s","firstKeptEntryId":"u1","tokensBefore":1}),
            ),
            entry("l1", json!({"type":"label","targetId":"u1","label":"x"})),
            assistant("a1", 10, false),
        ];
        let cut = find_cut_point(&path, 0, path.len(), 5);
        assert_eq!(
            cut.first_kept_entry_index, 2,
            "label pulled in, compaction not"
        );
        assert_eq!(cut.turn_start_index, Some(0));
        assert!(cut.is_split_turn);
        let cut = find_cut_point(&path, 2, path.len(), 5);
        assert_eq!(cut.first_kept_entry_index, 2);
        assert_eq!(cut.turn_start_index, None, "no turn start inside the range");
        assert!(!cut.is_split_turn);
    }

    #[test]
    fn custom_messages_and_branch_summaries_are_cut_points_but_not_counted() {
        let path = vec![
            user("u1", 10),
            assistant("a1", 10, false),
            entry(
                "b1",
                json!({"type":"branch_summary","fromId":"a1","summary":"x".repeat(4000)}),
            ),
            entry(
                "cm",
                json!({"type":"custom_message","customType":"x","content":"x".repeat(4000),"display":true}),
            ),
            assistant("a2", 10, false),
        ];
        // b1 and cm are skipped by the count: a2 (10) + a1 (10) = 20 at a1.
        let cut = find_cut_point(&path, 0, path.len(), 20);
        assert_eq!(cut.first_kept_entry_index, 1);
        assert_eq!(cut.turn_start_index, Some(0));
        // Crossing at a2: the cut is a2, and cm/b1 (non-messages) are pulled in before it.
        let cut = find_cut_point(&path, 0, path.len(), 10);
        assert_eq!(cut.first_kept_entry_index, 2);
        assert_eq!(
            cut.turn_start_index,
            Some(2),
            "a branch summary starts a turn"
        );
        assert!(cut.is_split_turn);
    }

    #[test]
    fn a_range_without_cut_points_keeps_everything() {
        let path = vec![result("r1", 10), result("r2", 10)];
        let cut = find_cut_point(&path, 0, path.len(), 1);
        assert_eq!(cut.first_kept_entry_index, 0);
        assert!(!cut.is_split_turn);
        let empty: Vec<Entry> = Vec::new();
        assert_eq!(find_cut_point(&empty, 0, 0, 1).first_kept_entry_index, 0);
        assert_eq!(find_turn_start_index(&empty, 0, 0), None);
    }

    #[test]
    fn bash_executions_start_turns() {
        let path = vec![
            user("u1", 1),
            entry(
                "b",
                json!({"type":"message","message":{"role":"bashExecution","command":"ls","output":"","cancelled":false,"truncated":false,"timestamp":1}}),
            ),
            assistant("a1", 10, false),
        ];
        assert_eq!(find_turn_start_index(&path, 2, 0), Some(1));
        let cut = find_cut_point(&path, 0, path.len(), 5);
        assert_eq!(cut.first_kept_entry_index, 2);
        assert_eq!(cut.turn_start_index, Some(1));
    }
}
