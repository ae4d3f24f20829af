//! The reference's `getTree()` as a pure function: roots in append order, children ordered by
//! entry timestamp (ties in append order), flattened in pre-order.
//!
//! Duplicate ids behave as in the reference (the node of the latest line with an id is the one
//! placed, possibly more than once); unlike the reference, a parent cycle never hangs: a node
//! is not descended into again while it is already on the current walk.
//!
//! Invariant: no I/O here.

use std::collections::HashMap;

use crate::support::clock::ms_from_iso;

/// One entry as the tree needs it.
#[derive(Debug, Clone)]
pub struct TreeInput {
    /// Append sequence.
    pub seq: i64,
    /// Entry id.
    pub id: Option<String>,
    /// Parent id.
    pub parent_id: Option<String>,
    /// The `type` string.
    pub type_name: String,
    /// Entry timestamp (ISO-8601).
    pub timestamp: String,
}

/// One node of the flattened tree.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeNode {
    /// Append sequence of the entry shown.
    pub seq: i64,
    /// Entry id.
    pub id: Option<String>,
    /// Parent id as written in the entry.
    pub parent_id: Option<String>,
    /// The `type` string.
    pub type_name: String,
    /// Entry timestamp.
    pub timestamp: String,
    /// Depth in the flattened walk (0 for roots).
    pub depth: usize,
    /// Current label of the entry, if any.
    pub label: Option<String>,
    /// Timestamp of the label entry that set it.
    pub label_timestamp: Option<String>,
}

/// Builds the flattened tree from entries in append order and the current labels
/// (`target id → (label, label timestamp)`).
pub fn build(entries: &[TreeInput], labels: &HashMap<String, (String, String)>) -> Vec<TreeNode> {
    // nodeMap: id → index of the latest entry with that id.
    let mut node_of: HashMap<Option<&str>, usize> = HashMap::with_capacity(entries.len());
    for (idx, entry) in entries.iter().enumerate() {
        node_of.insert(entry.id.as_deref(), idx);
    }
    let mut roots: Vec<usize> = Vec::new();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); entries.len()];
    for entry in entries {
        let Some(&node) = node_of.get(&entry.id.as_deref()) else {
            continue;
        };
        match &entry.parent_id {
            None => roots.push(node),
            Some(parent) if Some(parent) == entry.id.as_ref() => roots.push(node),
            Some(parent) => match node_of.get(&Some(parent.as_str())) {
                Some(&parent_node) => children[parent_node].push(node),
                None => roots.push(node),
            },
        }
    }
    let times: Vec<i64> = entries
        .iter()
        .map(|entry| ms_from_iso(&entry.timestamp).unwrap_or(i64::MIN))
        .collect();
    for list in &mut children {
        // Stable: ties keep append order.
        list.sort_by_key(|&idx| times[idx]);
    }

    let mut out = Vec::with_capacity(entries.len());
    let mut on_path = vec![false; entries.len()];
    // (node, depth, leaving): `leaving` marks the end of a node's subtree.
    let mut stack: Vec<(usize, usize, bool)> =
        roots.iter().rev().map(|&node| (node, 0, false)).collect();
    while let Some((node, depth, leaving)) = stack.pop() {
        if leaving {
            on_path[node] = false;
            continue;
        }
        if on_path[node] {
            continue;
        }
        let entry = &entries[node];
        let label = entry.id.as_ref().and_then(|id| labels.get(id));
        out.push(TreeNode {
            seq: entry.seq,
            id: entry.id.clone(),
            parent_id: entry.parent_id.clone(),
            type_name: entry.type_name.clone(),
            timestamp: entry.timestamp.clone(),
            depth,
            label: label.map(|(text, _)| text.clone()),
            label_timestamp: label.map(|(_, ts)| ts.clone()),
        });
        on_path[node] = true;
        stack.push((node, depth, true));
        for &child in children[node].iter().rev() {
            stack.push((child, depth + 1, false));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(seq: i64, id: &str, parent: Option<&str>, ts: &str) -> TreeInput {
        TreeInput {
            seq,
            id: Some(id.to_owned()),
            parent_id: parent.map(str::to_owned),
            type_name: "message".to_owned(),
            timestamp: ts.to_owned(),
        }
    }

    fn ids(nodes: &[TreeNode]) -> Vec<String> {
        nodes
            .iter()
            .map(|node| node.id.clone().unwrap_or_default())
            .collect()
    }

    #[test]
    fn children_sort_by_timestamp_and_orphans_are_roots() {
        let entries = vec![
            input(0, "a", None, "2025-01-01T00:00:00.000Z"),
            input(1, "c", Some("a"), "2025-01-01T00:00:02.000Z"),
            input(2, "b", Some("a"), "2025-01-01T00:00:01.000Z"),
            input(3, "o", Some("missing"), "2025-01-01T00:00:00.000Z"),
            input(4, "s", Some("s"), "2025-01-01T00:00:00.000Z"),
        ];
        let nodes = build(&entries, &HashMap::new());
        assert_eq!(ids(&nodes), ["a", "b", "c", "o", "s"]);
        assert_eq!(nodes[1].depth, 1);
    }

    #[test]
    fn a_cycle_through_duplicate_ids_terminates() {
        let entries = vec![
            input(0, "x", None, "2025-01-01T00:00:00.000Z"),
            input(1, "y", Some("x"), "2025-01-01T00:00:01.000Z"),
            input(2, "x", Some("y"), "2025-01-01T00:00:02.000Z"),
        ];
        let nodes = build(&entries, &HashMap::new());
        assert_eq!(ids(&nodes), ["x", "y"]);
    }
}
