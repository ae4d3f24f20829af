//! The session tree as the reference's `/tree` navigator shows it, as plain rows: the branch
//! holding the active leaf first, single-child chains in one column, `├─`/`└─` connectors
//! and `│` gutters where the tree branches, the active path marked, labels in brackets, and
//! one line of text per entry (`user: …`, `assistant: …`, `[bash: ls]` for a tool result, …).
//! The filter modes hide bookkeeping entries the way the reference's do.
//!
//! Invariant: pure — no I/O and no colour; the REPL numbers, paints and prints the rows.

use std::collections::HashMap;
use std::path::Path;

use crate::model::entry::{Entry, EntryKind};
use crate::model::ids::EntryId;
use crate::model::message::{AgentMessage, ContentBlock, StopReason, UserContent};
use crate::modes::render::format_tool_call;
use crate::store::TreeNode;

/// Which entries the tree shows (the reference's filter modes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TreeFilter {
    /// Everything but settings and bookkeeping (labels, custom, model, thinking, names).
    #[default]
    Default,
    /// The default minus tool results.
    NoTools,
    /// User messages only.
    UserOnly,
    /// Labelled entries only.
    LabeledOnly,
    /// Every entry.
    All,
}

impl TreeFilter {
    /// Parses a filter name (`default`, `no-tools`, `user`, `labeled`, `all`).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "" | "default" => Some(Self::Default),
            "no-tools" | "notools" => Some(Self::NoTools),
            "user" | "user-only" => Some(Self::UserOnly),
            "labeled" | "labelled" | "labeled-only" | "labels" => Some(Self::LabeledOnly),
            "all" => Some(Self::All),
            _ => None,
        }
    }
}

/// What kind of entry a row shows (for colouring).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowRole {
    /// A user message.
    User,
    /// An assistant message.
    Assistant,
    /// An assistant message that failed or was aborted.
    Failed,
    /// Tool results, shell commands and bookkeeping.
    Other,
}

/// One row of the drawn tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeRow {
    /// The entry's id (`None` for a line without one: shown, not selectable).
    pub id: Option<EntryId>,
    /// Guides before the entry (`│  ├─ `).
    pub prefix: String,
    /// Whether the entry is on the path root → active leaf.
    pub on_active_path: bool,
    /// Whether the entry is the active leaf.
    pub is_leaf: bool,
    /// The entry's label.
    pub label: Option<String>,
    /// One line of text.
    pub text: String,
    /// For colouring.
    pub role: RowRole,
}

struct Flat {
    node: usize,
    indent: i64,
    show_connector: bool,
    is_last: bool,
    gutters: Vec<(i64, bool)>,
    virtual_root_child: bool,
}

fn normalize(text: &str) -> String {
    text.replace(['\n', '\t'], " ").trim().to_owned()
}

fn content_text(blocks: &[ContentBlock]) -> String {
    // The reference cuts user and assistant text at 200 characters.
    let mut out = String::new();
    for block in blocks {
        if let ContentBlock::Text(text) = block {
            out.push_str(&text.text);
            if out.chars().count() >= 200 {
                return out.chars().take(200).collect();
            }
        }
    }
    out
}

fn user_content(content: &UserContent) -> String {
    match content {
        UserContent::Text(text) => text.chars().take(200).collect(),
        UserContent::Blocks(blocks) => content_text(blocks),
    }
}

fn has_text(blocks: &[ContentBlock]) -> bool {
    blocks
        .iter()
        .any(|block| matches!(block, ContentBlock::Text(text) if !text.text.trim().is_empty()))
}

/// Returns the row text and role of an entry (the reference's `getEntryDisplayText`).
fn display(
    entry: &Entry,
    tool_calls: &HashMap<String, (String, serde_json::Value)>,
    home: Option<&Path>,
) -> (String, RowRole) {
    match &entry.kind {
        EntryKind::Message(message) => match message {
            AgentMessage::User(user) => (
                format!("user: {}", normalize(&user_content(&user.content))),
                RowRole::User,
            ),
            AgentMessage::Assistant(assistant) => {
                let text = normalize(&content_text(&assistant.content));
                if !text.is_empty() {
                    (format!("assistant: {text}"), RowRole::Assistant)
                } else if assistant.stop_reason == StopReason::Aborted {
                    ("assistant: (aborted)".to_owned(), RowRole::Failed)
                } else if let Some(error) = &assistant.error_message {
                    let error: String = normalize(error).chars().take(80).collect();
                    (format!("assistant: {error}"), RowRole::Failed)
                } else {
                    ("assistant: (no content)".to_owned(), RowRole::Assistant)
                }
            }
            AgentMessage::ToolResult(result) => match tool_calls.get(&result.tool_call_id) {
                Some((name, args)) => (format_tool_call(name, args, home), RowRole::Other),
                None => (format!("[{}]", result.tool_name), RowRole::Other),
            },
            AgentMessage::BashExecution(bash) => (
                format!("[bash]: {}", normalize(&bash.command)),
                RowRole::Other,
            ),
            other => (format!("[{}]", other.role()), RowRole::Other),
        },
        EntryKind::CustomMessage {
            custom_type,
            content,
            ..
        } => (
            format!("[{custom_type}]: {}", normalize(&content.joined_text())),
            RowRole::Other,
        ),
        EntryKind::Compaction(compaction) => (
            format!(
                "[compaction: {}k tokens]",
                (compaction.tokens_before as f64 / 1000.0).round()
            ),
            RowRole::Other,
        ),
        EntryKind::BranchSummary(summary) => (
            format!("[branch summary]: {}", normalize(&summary.summary)),
            RowRole::Other,
        ),
        EntryKind::ModelChange(model) => (format!("[model: {}]", model.model_id), RowRole::Other),
        EntryKind::ThinkingLevelChange { thinking_level } => {
            (format!("[thinking: {thinking_level}]"), RowRole::Other)
        }
        EntryKind::Usage(usage) => (format!("[usage: {}]", usage.kind), RowRole::Other),
        EntryKind::ContextEdit(edit) => (
            format!(
                "[context edit: {}]",
                edit.target_id.as_ref().map_or("?", |id| id.as_str())
            ),
            RowRole::Other,
        ),
        EntryKind::Custom { custom_type, .. } => {
            (format!("[custom: {custom_type}]"), RowRole::Other)
        }
        EntryKind::Label { label, .. } => (
            format!("[label: {}]", label.as_deref().unwrap_or("(cleared)")),
            RowRole::Other,
        ),
        EntryKind::SessionInfo { name } => (
            format!("[title: {}]", name.as_deref().unwrap_or("empty")),
            RowRole::Other,
        ),
        EntryKind::Unknown { type_name, .. } => (format!("[{type_name}]"), RowRole::Other),
    }
}

fn is_settings_entry(kind: &EntryKind) -> bool {
    match kind {
        EntryKind::Label { .. }
        | EntryKind::Custom { .. }
        | EntryKind::ModelChange(_)
        | EntryKind::ThinkingLevelChange { .. }
        | EntryKind::Usage(_)
        | EntryKind::SessionInfo { .. } => true,
        EntryKind::Message(_)
        | EntryKind::CustomMessage { .. }
        | EntryKind::Compaction(_)
        | EntryKind::BranchSummary(_)
        | EntryKind::ContextEdit(_)
        | EntryKind::Unknown { .. } => false,
    }
}

fn passes(filter: TreeFilter, entry: &Entry, labelled: bool) -> bool {
    let tool_result = matches!(&entry.kind, EntryKind::Message(AgentMessage::ToolResult(_)));
    match filter {
        TreeFilter::Default => !is_settings_entry(&entry.kind),
        TreeFilter::NoTools => !is_settings_entry(&entry.kind) && !tool_result,
        TreeFilter::UserOnly => matches!(&entry.kind, EntryKind::Message(AgentMessage::User(_))),
        TreeFilter::LabeledOnly => labelled,
        TreeFilter::All => true,
    }
}

/// The tree's shape, rebuilt from the store's pre-order nodes and their depths (the one
/// rebuild both tree drawings use: this navigator and `cli`'s `sessions show --tree`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Indices of the root nodes, in order.
    pub roots: Vec<usize>,
    /// Per node, the indices of its children, in order.
    pub children: Vec<Vec<usize>>,
}

impl Shape {
    /// Rebuilds the child lists of `nodes` (pre-order: a node's children follow it, one level
    /// deeper).
    pub fn of(nodes: &[TreeNode]) -> Self {
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
        let mut roots = Vec::new();
        let mut open: Vec<usize> = Vec::new();
        for (idx, node) in nodes.iter().enumerate() {
            while open
                .last()
                .is_some_and(|&top| nodes[top].depth >= node.depth)
            {
                open.pop();
            }
            match open.last() {
                Some(&parent) => children[parent].push(idx),
                None => roots.push(idx),
            }
            open.push(idx);
        }
        Self { roots, children }
    }
}

fn prefix(flat: &Flat, multiple_roots: bool) -> String {
    let display_indent = if multiple_roots {
        (flat.indent - 1).max(0)
    } else {
        flat.indent
    };
    let connector = flat.show_connector && !flat.virtual_root_child;
    let connector_position = if connector { display_indent - 1 } else { -1 };
    let mut out = String::new();
    for idx in 0..display_indent * 3 {
        let level = idx / 3;
        let column = idx % 3;
        if let Some((_, show)) = flat.gutters.iter().find(|(pos, _)| *pos == level) {
            out.push(if column == 0 && *show { '│' } else { ' ' });
        } else if connector && level == connector_position {
            out.push(match column {
                0 if flat.is_last => '└',
                0 => '├',
                1 => '─',
                _ => ' ',
            });
        } else {
            out.push(' ');
        }
    }
    out
}

/// Lays out the tree (`nodes` in the store's pre-order with depths; `entries` by append
/// sequence) as the reference's navigator does and returns the rows that pass `filter`.
pub fn rows(
    nodes: &[TreeNode],
    entries: &HashMap<i64, Entry>,
    leaf: Option<&str>,
    filter: TreeFilter,
    home: Option<&Path>,
) -> Vec<TreeRow> {
    let Shape { roots, children } = Shape::of(nodes);
    // Which subtrees hold the leaf (children come after their parent in pre-order).
    let mut contains_leaf = vec![false; nodes.len()];
    for idx in (0..nodes.len()).rev() {
        let own = leaf.is_some() && nodes[idx].id.as_deref() == leaf;
        contains_leaf[idx] = own || children[idx].iter().any(|&child| contains_leaf[child]);
    }
    let active_first = |list: &[usize]| -> Vec<usize> {
        let mut ordered: Vec<usize> = list
            .iter()
            .copied()
            .filter(|&idx| contains_leaf[idx])
            .collect();
        ordered.extend(list.iter().copied().filter(|&idx| !contains_leaf[idx]));
        ordered
    };

    let multiple_roots = roots.len() > 1;
    let ordered_roots = active_first(&roots);
    let mut flat: Vec<Flat> = Vec::with_capacity(nodes.len());
    // (node, indent, just branched, show connector, is last, gutters, virtual root child)
    type Work = (usize, i64, bool, bool, bool, Vec<(i64, bool)>, bool);
    let mut work: Vec<Work> = Vec::new();
    for (pos, &root) in ordered_roots.iter().enumerate().rev() {
        let is_last = pos + 1 == ordered_roots.len();
        work.push((
            root,
            i64::from(multiple_roots),
            multiple_roots,
            multiple_roots,
            is_last,
            Vec::new(),
            multiple_roots,
        ));
    }
    while let Some((node, indent, just_branched, show_connector, is_last, gutters, virtual_child)) =
        work.pop()
    {
        let kids = active_first(&children[node]);
        let multiple_children = kids.len() > 1;
        let child_indent = if multiple_children || (just_branched && indent > 0) {
            indent + 1
        } else {
            indent
        };
        let connector_displayed = show_connector && !virtual_child;
        let display_indent = if multiple_roots {
            (indent - 1).max(0)
        } else {
            indent
        };
        let connector_position = (display_indent - 1).max(0);
        let mut child_gutters = gutters.clone();
        if connector_displayed {
            child_gutters.push((connector_position, !is_last));
        }
        for (pos, &kid) in kids.iter().enumerate().rev() {
            work.push((
                kid,
                child_indent,
                multiple_children,
                multiple_children,
                pos + 1 == kids.len(),
                child_gutters.clone(),
                false,
            ));
        }
        flat.push(Flat {
            node,
            indent,
            show_connector,
            is_last,
            gutters,
            virtual_root_child: virtual_child,
        });
    }

    // Tool calls by id, for naming tool results.
    let mut tool_calls: HashMap<String, (String, serde_json::Value)> = HashMap::new();
    for node in nodes {
        if let Some(Entry {
            kind: EntryKind::Message(AgentMessage::Assistant(assistant)),
            ..
        }) = entries.get(&node.seq)
        {
            for call in assistant.tool_calls() {
                tool_calls.insert(call.id.clone(), (call.name.clone(), call.arguments.clone()));
            }
        }
    }
    // The active path: walk parents from the leaf.
    let by_id: HashMap<&str, &TreeNode> = nodes
        .iter()
        .filter_map(|node| node.id.as_deref().map(|id| (id, node)))
        .collect();
    let mut active: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut current = leaf;
    while let Some(id) = current {
        if !active.insert(id) {
            break;
        }
        current = by_id.get(id).and_then(|node| node.parent_id.as_deref());
    }

    let mut out = Vec::new();
    for item in &flat {
        let node = &nodes[item.node];
        let Some(entry) = entries.get(&node.seq) else {
            continue;
        };
        let is_leaf = leaf.is_some() && node.id.as_deref() == leaf;
        if let EntryKind::Message(AgentMessage::Assistant(assistant)) = &entry.kind
            && !is_leaf
            && !has_text(&assistant.content)
            && matches!(
                assistant.stop_reason,
                StopReason::Stop | StopReason::ToolUse | StopReason::Pending | StopReason::Unknown
            )
        {
            continue;
        }
        if !passes(filter, entry, node.label.is_some()) {
            continue;
        }
        let (text, role) = display(entry, &tool_calls, home);
        out.push(TreeRow {
            id: node.id.as_ref().map(EntryId::new),
            prefix: prefix(item, multiple_roots),
            on_active_path: node.id.as_deref().is_some_and(|id| active.contains(id)),
            is_leaf,
            label: node.label.clone(),
            text,
            role,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(id: &str, parent: Option<&str>, kind: serde_json::Value) -> Entry {
        let mut value = kind;
        value["id"] = json!(id);
        value["parentId"] = parent.map_or(serde_json::Value::Null, |p| json!(p));
        value["timestamp"] = json!("2026-01-01T00:00:00.000Z");
        Entry::from_value(value).expect("entry")
    }

    fn user(text: &str) -> serde_json::Value {
        json!({"type": "message", "message": {"role": "user", "content": text, "timestamp": 0}})
    }

    fn assistant(content: serde_json::Value, stop: &str) -> serde_json::Value {
        json!({"type": "message", "message": {"role": "assistant", "content": content,
            "api": "x", "provider": "p", "model": "m",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": stop, "timestamp": 0}})
    }

    /// Builds nodes and entries from (id, parent, depth, kind) in pre-order.
    fn tree(
        items: Vec<(&str, Option<&str>, usize, serde_json::Value)>,
    ) -> (Vec<TreeNode>, HashMap<i64, Entry>) {
        let mut nodes = Vec::new();
        let mut entries = HashMap::new();
        for (seq, (id, parent, depth, kind)) in items.into_iter().enumerate() {
            let seq = seq as i64;
            let entry = entry(id, parent, kind);
            nodes.push(TreeNode {
                seq,
                id: Some(id.to_owned()),
                parent_id: parent.map(str::to_owned),
                type_name: "message".to_owned(),
                timestamp: String::new(),
                depth,
                label: None,
                label_timestamp: None,
            });
            entries.insert(seq, entry);
        }
        (nodes, entries)
    }

    #[test]
    fn the_shape_is_rebuilt_from_pre_order_depths() {
        // a has the children b (whose child is c) and d; e is a second root.
        let (nodes, _) = tree(vec![
            ("a", None, 0, user("a")),
            ("b", Some("a"), 1, user("b")),
            ("c", Some("b"), 2, user("c")),
            ("d", Some("a"), 1, user("d")),
            ("e", None, 0, user("e")),
        ]);
        assert_eq!(
            Shape::of(&nodes),
            Shape {
                roots: vec![0, 4],
                children: vec![vec![1, 3], vec![2], vec![], vec![], vec![]],
            }
        );
    }

    fn drawn(rows: &[TreeRow]) -> Vec<String> {
        rows.iter()
            .map(|row| {
                format!(
                    "{}{}{}{}",
                    row.prefix,
                    if row.on_active_path { "• " } else { "" },
                    row.label
                        .as_ref()
                        .map(|label| format!("[{label}] "))
                        .unwrap_or_default(),
                    row.text
                )
            })
            .collect()
    }

    #[test]
    fn the_active_branch_comes_first_and_branches_get_connectors() {
        // a (user) → b (assistant) → c (user) → d (assistant)
        //                          → e (user) → f (assistant)   [leaf f]
        let (nodes, entries) = tree(vec![
            ("a", None, 0, user("first")),
            (
                "b",
                Some("a"),
                1,
                assistant(json!([{"type": "text", "text": "one"}]), "stop"),
            ),
            ("c", Some("b"), 2, user("old branch")),
            (
                "d",
                Some("c"),
                3,
                assistant(json!([{"type": "text", "text": "old answer"}]), "stop"),
            ),
            ("e", Some("b"), 2, user("new branch")),
            (
                "f",
                Some("e"),
                3,
                assistant(json!([{"type": "text", "text": "new answer"}]), "stop"),
            ),
        ]);
        let rows = rows(&nodes, &entries, Some("f"), TreeFilter::Default, None);
        assert_eq!(
            drawn(&rows),
            [
                "• user: first",
                "• assistant: one",
                "├─ • user: new branch",
                // The first generation after a branch is indented once more, as in the
                // reference ("visual grouping").
                "│     • assistant: new answer",
                "└─ user: old branch",
                "      assistant: old answer",
            ]
        );
        assert!(rows[3].is_leaf);
        assert_eq!(rows[0].role, RowRole::User);
    }

    #[test]
    fn tool_only_answers_are_hidden_and_results_show_their_call() {
        let (nodes, entries) = tree(vec![
            ("a", None, 0, user("list")),
            (
                "b",
                Some("a"),
                1,
                assistant(
                    json!([{"type": "toolCall", "id": "t1", "name": "ls", "arguments": {"path": "src"}}]),
                    "toolUse",
                ),
            ),
            (
                "c",
                Some("b"),
                2,
                json!({"type": "message", "message": {"role": "toolResult", "toolCallId": "t1",
                    "toolName": "ls", "content": [{"type": "text", "text": "main.rs"}],
                    "isError": false, "timestamp": 0}}),
            ),
            (
                "d",
                Some("c"),
                3,
                json!({"type": "model_change", "provider": "p", "modelId": "m2"}),
            ),
        ]);
        let shown = drawn(&rows(
            &nodes,
            &entries,
            Some("d"),
            TreeFilter::Default,
            None,
        ));
        assert_eq!(shown, ["• user: list", "• [ls: src]"]);
        let all = drawn(&rows(&nodes, &entries, Some("d"), TreeFilter::All, None));
        assert_eq!(
            all,
            ["• user: list", "• [ls: src]", "• [model: m2]"],
            "the tool-only answer stays hidden unless it is the leaf"
        );
        let users = drawn(&rows(
            &nodes,
            &entries,
            Some("d"),
            TreeFilter::UserOnly,
            None,
        ));
        assert_eq!(users, ["• user: list"]);
        let no_tools = drawn(&rows(
            &nodes,
            &entries,
            Some("d"),
            TreeFilter::NoTools,
            None,
        ));
        assert_eq!(no_tools, ["• user: list"]);
    }

    #[test]
    fn several_roots_hang_off_a_virtual_root_and_labels_are_shown() {
        let (mut nodes, entries) = tree(vec![
            ("a", None, 0, user("one")),
            ("b", None, 0, user("two")),
        ]);
        nodes[0].label = Some("start".to_owned());
        let rows = rows(&nodes, &entries, Some("b"), TreeFilter::Default, None);
        assert_eq!(drawn(&rows), ["• user: two", "[start] user: one"]);
        let labelled = super::rows(&nodes, &entries, Some("b"), TreeFilter::LabeledOnly, None);
        assert_eq!(drawn(&labelled), ["[start] user: one"]);
    }

    #[test]
    fn filters_parse_from_their_names() {
        assert_eq!(TreeFilter::parse(""), Some(TreeFilter::Default));
        assert_eq!(TreeFilter::parse("user"), Some(TreeFilter::UserOnly));
        assert_eq!(TreeFilter::parse("labeled"), Some(TreeFilter::LabeledOnly));
        assert_eq!(TreeFilter::parse("bogus"), None);
    }
}
