//! Drawing a session tree for people: branch points indent, single-child chains stay in one
//! column (a 10,000-entry linear session does not walk off the screen).

use crate::modes::tree::Shape;
use crate::store::TreeNode;

/// One drawn row: which node, and the prefix (guides and connector) before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawnRow {
    /// Index into the nodes given to [`layout`].
    pub index: usize,
    /// Guide characters to print before the node.
    pub prefix: String,
}

/// Lays out pre-order nodes (with depths) as rows with tree guides.
pub fn layout(nodes: &[TreeNode]) -> Vec<DrawnRow> {
    let Shape { roots, children } = Shape::of(nodes);
    let mut rows = Vec::with_capacity(nodes.len());
    // (node, prefix for its own row, prefix base for its children)
    let mut work: Vec<(usize, String, String)> = roots
        .iter()
        .rev()
        .map(|&root| (root, String::new(), String::new()))
        .collect();
    while let Some((idx, own, base)) = work.pop() {
        rows.push(DrawnRow {
            index: idx,
            prefix: own,
        });
        let kids = &children[idx];
        if kids.len() == 1 {
            work.push((kids[0], base.clone(), base));
            continue;
        }
        for (pos, &kid) in kids.iter().enumerate().rev() {
            let last = pos + 1 == kids.len();
            let own = format!("{base}{}", if last { "└─ " } else { "├─ " });
            let child_base = format!("{base}{}", if last { "   " } else { "│  " });
            work.push((kid, own, child_base));
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, depth: usize) -> TreeNode {
        TreeNode {
            seq: 0,
            id: Some(id.to_owned()),
            parent_id: None,
            type_name: "message".to_owned(),
            timestamp: String::new(),
            depth,
            label: None,
            label_timestamp: None,
        }
    }

    #[test]
    fn chains_stay_in_one_column_and_branches_indent() {
        // a - b -+- c - d
        //        +- e
        let nodes = vec![
            node("a", 0),
            node("b", 1),
            node("c", 2),
            node("d", 3),
            node("e", 2),
        ];
        let rows: Vec<String> = layout(&nodes)
            .into_iter()
            .map(|row| {
                format!(
                    "{}{}",
                    row.prefix,
                    nodes[row.index].id.clone().unwrap_or_default()
                )
            })
            .collect();
        assert_eq!(rows, ["a", "b", "├─ c", "│  d", "└─ e"]);
    }
}
