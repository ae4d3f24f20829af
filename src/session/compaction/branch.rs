//! Branch summaries for tree navigation (`spec/compaction.md` §8): which entries a move away
//! from the current leaf abandons, what of them fits the summariser's budget, and where the
//! leaf lands.
//!
//! Invariant: pure; messages of `message` entries are borrowed from the path.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::model::entry::{Entry, EntryKind};
use crate::model::ids::EntryId;
use crate::model::message::{AgentMessage, UserContent};
use crate::session::compaction::PathEntry;
use crate::session::compaction::files::FileOps;
use crate::session::compaction::prepare::{PathMessage, entry_message};
use crate::session::compaction::tokens::estimate_tokens;

/// The entries a navigation abandons (`collectEntriesForBranchSummary`).
#[derive(Debug)]
pub struct BranchSelection<'a, E> {
    /// From just below the common ancestor down to the old leaf, in path order.
    pub entries: &'a [E],
    /// The deepest entry on both paths; `None` when they share no entry.
    pub common_ancestor_id: Option<EntryId>,
}

/// Returns the part of the old leaf's path (root → old leaf) that is not on the target's path
/// (root → target): the old leaf back to the common ancestor, exclusive.
///
/// An empty `old_path` (no old leaf) abandons nothing. A target below the old leaf abandons
/// nothing; a target above it on the same branch abandons the entries after the target.
pub fn collect_entries_for_branch_summary<'a, E: PathEntry>(
    old_path: &'a [E],
    target_path: &[E],
) -> BranchSelection<'a, E> {
    if old_path.is_empty() {
        return BranchSelection {
            entries: old_path,
            common_ancestor_id: None,
        };
    }
    let old_ids: HashSet<Option<&EntryId>> = old_path
        .iter()
        .map(|entry| entry.entry().id.as_ref())
        .collect();
    let common = target_path
        .iter()
        .rev()
        .map(|entry| entry.entry().id.as_ref())
        .find(|id| old_ids.contains(id));
    let Some(common) = common else {
        return BranchSelection {
            entries: old_path,
            common_ancestor_id: None,
        };
    };
    // Walking up from the old leaf stops at the first entry carrying the ancestor's id.
    let start = old_path
        .iter()
        .rposition(|entry| entry.entry().id.as_ref() == common)
        .map_or(0, |idx| idx + 1);
    BranchSelection {
        entries: &old_path[start..],
        common_ancestor_id: common.cloned(),
    }
}

/// The abandoned branch as the summariser reads it (`prepareBranchEntries`).
#[derive(Debug, Clone, PartialEq)]
pub struct BranchPreparation<'a> {
    /// The newest messages that fit the budget, in order.
    pub messages: Vec<PathMessage<'a>>,
    /// Files touched by the whole branch (earlier branch summaries' details included).
    pub file_ops: FileOps,
    /// Estimated tokens of `messages`.
    pub total_tokens: u64,
}

/// The message an abandoned entry contributes: tool results are left out (the call carries
/// their context), compactions count as their summary.
fn branch_message(entry: &Entry) -> Option<PathMessage<'_>> {
    match &entry.kind {
        EntryKind::Message(AgentMessage::ToolResult(_)) => None,
        EntryKind::Message(message) if message.role() == "toolResult" => None,
        _ => entry_message(entry, true),
    }
}

/// Selects the newest messages of `entries` that fit `token_budget` (0 = no limit), and the
/// files the whole branch touched.
///
/// File operations come from every pi-generated `branch_summary`'s details and from the tool
/// calls of every message considered, including the first one that no longer fits. A
/// compaction or branch summary that does not fit is still taken when less than 90 % of the
/// budget is used.
pub fn prepare_branch_entries<E: PathEntry>(
    entries: &[E],
    token_budget: u64,
) -> BranchPreparation<'_> {
    let mut file_ops = FileOps::default();
    for entry in entries {
        if let EntryKind::BranchSummary(summary) = &entry.entry().kind
            && summary.from_hook != Some(true)
            && let Some(details) = &summary.details
        {
            file_ops.add_details(details);
        }
    }
    // 1.6.0: context edits among the abandoned entries hide or replace their targets; the
    // latest edit per target wins.
    let mut edits: HashMap<Option<&EntryId>, &Value> = HashMap::new();
    for entry in entries {
        if let EntryKind::ContextEdit(edit) = &entry.entry().kind
            && let Some(replacement) = &edit.replacement
        {
            edits.insert(edit.target_id.as_ref(), replacement);
        }
    }
    let mut newest_first: Vec<PathMessage<'_>> = Vec::new();
    let mut total_tokens: u64 = 0;
    for entry in entries.iter().rev().map(PathEntry::entry) {
        let Some(message) = branch_message(entry) else {
            continue;
        };
        let message = match (&entry.kind, edits.get(&entry.id.as_ref())) {
            (EntryKind::Message(_) | EntryKind::CustomMessage { .. }, Some(replacement)) => {
                match edited(&message, replacement) {
                    Some(message) => message,
                    None => continue,
                }
            }
            _ => message,
        };
        file_ops.add_message(&message);
        let tokens = estimate_tokens(&message);
        if token_budget > 0 && total_tokens + tokens > token_budget {
            let is_summary = matches!(
                entry.kind,
                EntryKind::Compaction(_) | EntryKind::BranchSummary(_)
            );
            if is_summary && (total_tokens as f64) < token_budget as f64 * 0.9 {
                newest_first.push(message);
                total_tokens += tokens;
            }
            break;
        }
        newest_first.push(message);
        total_tokens += tokens;
    }
    newest_first.reverse();
    BranchPreparation {
        messages: newest_first,
        file_ops,
        total_tokens,
    }
}

/// A message under a context edit (1.6.0 `projectContextEntry(entry, edit)[0]`): `None` when
/// the edit omits it; otherwise user, assistant, tool-result and custom messages get the
/// replacement's content (a string becomes one text block for assistant and tool results).
fn edited(message: &AgentMessage, replacement: &Value) -> Option<PathMessage<'static>> {
    if replacement.is_null() {
        return None;
    }
    let role = message.role();
    if !matches!(role, "user" | "assistant" | "toolResult" | "custom") {
        return Some(PathMessage::Owned(Box::new(message.clone())));
    }
    let mut value = message.to_value();
    if let Value::Object(map) = &mut value {
        match replacement.get("content") {
            None => {
                map.shift_remove("content");
            }
            Some(Value::String(text)) if matches!(role, "assistant" | "toolResult") => {
                map.insert(
                    "content".to_owned(),
                    serde_json::json!([{"type": "text", "text": text}]),
                );
            }
            Some(content) => {
                map.insert("content".to_owned(), content.clone());
            }
        }
    }
    Some(PathMessage::Owned(Box::new(AgentMessage::from_value(
        value,
    ))))
}

/// Where the leaf goes when navigating to an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NavigationTarget {
    /// The new leaf: the target's parent for a user message or a custom message (`None` = before
    /// the first entry), else the target.
    pub new_leaf: Option<EntryId>,
    /// The text of a user or custom message target, for re-editing.
    pub editor_text: Option<String>,
}

fn joined_text(content: &UserContent) -> String {
    match content {
        UserContent::Text(text) => text.clone(),
        UserContent::Blocks(blocks) => blocks
            .iter()
            .filter_map(crate::model::message::ContentBlock::as_text)
            .collect(),
    }
}

/// Returns where the leaf lands when navigating to `target` (`navigateTree` step 5).
pub fn navigation_target(target: &Entry) -> NavigationTarget {
    match &target.kind {
        EntryKind::Message(AgentMessage::User(user)) => NavigationTarget {
            new_leaf: target.parent_id.clone(),
            editor_text: Some(joined_text(&user.content)),
        },
        EntryKind::Message(AgentMessage::Unknown(value))
            if value.get("role").and_then(serde_json::Value::as_str) == Some("user") =>
        {
            NavigationTarget {
                new_leaf: target.parent_id.clone(),
                editor_text: Some(String::new()),
            }
        }
        EntryKind::CustomMessage { content, .. } => NavigationTarget {
            new_leaf: target.parent_id.clone(),
            editor_text: Some(joined_text(content)),
        },
        EntryKind::Message(_)
        | EntryKind::ThinkingLevelChange { .. }
        | EntryKind::ModelChange(_)
        | EntryKind::Compaction(_)
        | EntryKind::BranchSummary(_)
        | EntryKind::Usage(_)
        | EntryKind::ContextEdit(_)
        | EntryKind::Custom { .. }
        | EntryKind::Label { .. }
        | EntryKind::SessionInfo { .. }
        | EntryKind::Unknown { .. } => NavigationTarget {
            new_leaf: target.id.clone(),
            editor_text: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn entry(id: &str, parent: Option<&str>, body: Value) -> Entry {
        let mut value = body;
        value["id"] = json!(id);
        value["parentId"] = json!(parent);
        value["timestamp"] = json!("2025-01-01T00:00:00.000Z");
        Entry::from_value(value).unwrap()
    }

    fn user(id: &str, parent: Option<&str>, text: &str) -> Entry {
        entry(
            id,
            parent,
            json!({"type":"message","message":{"role":"user","content":text,"timestamp":1}}),
        )
    }

    fn ids(entries: &[Entry]) -> Vec<&str> {
        entries
            .iter()
            .map(|entry| entry.id.as_ref().unwrap().as_str())
            .collect()
    }

    #[test]
    fn the_spec_example_abandons_b_c_d() {
        let a = user("A", None, "a");
        let b = user("B", Some("A"), "b");
        let c = user("C", Some("B"), "c");
        let d = user("D", Some("C"), "d");
        let e = user("E", Some("A"), "e");
        let f = user("F", Some("E"), "f");
        let old = vec![a.clone(), b, c, d];
        let target = vec![a.clone(), e, f];
        let selection = collect_entries_for_branch_summary(&old, &target);
        assert_eq!(ids(selection.entries), vec!["B", "C", "D"]);
        assert_eq!(selection.common_ancestor_id, Some(EntryId::from("A")));
        // Above the old leaf on the same branch: what follows the target.
        let selection = collect_entries_for_branch_summary(&old, &old[..2]);
        assert_eq!(ids(selection.entries), vec!["C", "D"]);
        // Below it: nothing.
        let mut deeper = old.clone();
        deeper.push(user("G", Some("D"), "g"));
        assert!(
            collect_entries_for_branch_summary(&old, &deeper)
                .entries
                .is_empty()
        );
        // No old leaf, and disjoint roots.
        let empty: Vec<Entry> = Vec::new();
        assert!(
            collect_entries_for_branch_summary(&empty, &old)
                .entries
                .is_empty()
        );
        let other_root = vec![user("R", None, "r")];
        let selection = collect_entries_for_branch_summary(&old, &other_root);
        assert_eq!(selection.entries.len(), 4);
        assert_eq!(selection.common_ancestor_id, None);
    }

    #[test]
    fn branch_entries_fit_the_budget_newest_first_and_keep_all_files() {
        let entries = vec![
            entry(
                "s",
                None,
                json!({"type":"branch_summary","fromId":"root","summary":"x".repeat(400),
                    "details":{"readFiles":["old.ts"],"modifiedFiles":["mod.ts"]}}),
            ),
            entry(
                "a1",
                Some("s"),
                json!({"type":"message","message":{"role":"assistant","content":[
                    {"type":"text","text":"x".repeat(381)},
                    {"type":"toolCall","id":"1","name":"edit","arguments":{"path":"e.ts"}}],
                    "stopReason":"toolUse","timestamp":1}}),
            ),
            entry(
                "r1",
                Some("a1"),
                json!({"type":"message","message":{"role":"toolResult","toolCallId":"1","toolName":"edit",
                    "content":[{"type":"text","text":"x".repeat(4000)}],"isError":false,"timestamp":1}}),
            ),
            entry(
                "h",
                Some("r1"),
                json!({"type":"branch_summary","fromId":"r1","summary":"ext","details":{"readFiles":["hook.ts"]},"fromHook":true}),
            ),
            user("u", Some("h"), &"x".repeat(200)),
        ];
        // u = 50, h = 1 (a branch summary), r1 skipped, a1 = 100, s = 100.
        let all = prepare_branch_entries(&entries, 0);
        assert_eq!(all.messages.len(), 4);
        assert_eq!(all.total_tokens, 251);
        let lists = all.file_ops.lists();
        assert_eq!(lists.read_files, vec!["old.ts"]);
        assert_eq!(lists.modified_files, vec!["e.ts", "mod.ts"]);
        // Budget 120: u + h = 51, a1 would make 151 → stop (its files still count).
        let some = prepare_branch_entries(&entries, 120);
        assert_eq!(some.messages.len(), 2);
        assert_eq!(some.total_tokens, 51);
        assert_eq!(some.file_ops.lists().modified_files, vec!["e.ts", "mod.ts"]);
        // Budget 160: u + h + a1 = 151, then the summary s (100) does not fit but 151 < 144 is
        // false → stop.
        let more = prepare_branch_entries(&entries, 160);
        assert_eq!(more.messages.len(), 3);
        // Budget 200: 151 < 180, so the summary is squeezed in anyway.
        let squeezed = prepare_branch_entries(&entries, 200);
        assert_eq!(squeezed.messages.len(), 4);
        assert_eq!(squeezed.total_tokens, 251);
        assert!(matches!(
            squeezed.messages[0].as_ref(),
            AgentMessage::BranchSummary(_)
        ));
    }

    #[test]
    fn compactions_count_as_their_summary_on_a_branch() {
        let entries = vec![entry(
            "c",
            None,
            json!({"type":"compaction","summary":"abcdefgh","firstKeptEntryId":"x","tokensBefore":3,
                "details":{"readFiles":["ignored.ts"]}}),
        )];
        let prepared = prepare_branch_entries(&entries, 0);
        assert_eq!(prepared.total_tokens, 2);
        assert!(matches!(
            prepared.messages[0].as_ref(),
            AgentMessage::CompactionSummary(_)
        ));
        assert_eq!(prepared.file_ops.lists().read_files, Vec::<String>::new());
    }

    #[test]
    fn user_and_custom_targets_move_the_leaf_to_their_parent() {
        let target = entry(
            "u",
            Some("p"),
            json!({"type":"message","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"timestamp":1}}),
        );
        assert_eq!(
            navigation_target(&target),
            NavigationTarget {
                new_leaf: Some(EntryId::from("p")),
                editor_text: Some("ab".to_owned())
            }
        );
        let root_custom = entry(
            "c",
            None,
            json!({"type":"custom_message","customType":"x","content":"again","display":true}),
        );
        assert_eq!(
            navigation_target(&root_custom),
            NavigationTarget {
                new_leaf: None,
                editor_text: Some("again".to_owned())
            }
        );
        let assistant = entry(
            "a",
            Some("u"),
            json!({"type":"message","message":{"role":"assistant","content":[],"timestamp":1}}),
        );
        assert_eq!(
            navigation_target(&assistant),
            NavigationTarget {
                new_leaf: Some(EntryId::from("a")),
                editor_text: None
            }
        );
    }
}
