//! Property tests: random sequences of append / branch / reset / label / fork on a real store,
//! checked against a small in-memory model of the tree (path, children, labels, leaf).

use std::collections::BTreeMap;

use pi::model::message::{AgentMessage, UserContent, UserMessage};
use pi::model::{EntryId, SessionId};
use pi::store::{LeafSelector, NewSession, SessionStore};
use proptest::prelude::*;

use crate::common::memory_store;

#[derive(Debug, Clone)]
enum Op {
    Append(u8),
    Branch(usize),
    Reset,
    Label(usize, Option<&'static str>),
    Fork(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<u8>().prop_map(Op::Append),
        2 => any::<usize>().prop_map(Op::Branch),
        1 => Just(Op::Reset),
        2 => (any::<usize>(), prop_oneof![Just(Some("a")), Just(Some("b")), Just(Some("")), Just(None)])
            .prop_map(|(target, label)| Op::Label(target, label)),
        1 => any::<usize>().prop_map(Op::Fork),
    ]
}

#[derive(Debug, Clone)]
struct ModelEntry {
    id: EntryId,
    seq: i64,
    parent: Option<usize>,
    is_label: bool,
}

#[derive(Debug, Default)]
struct Model {
    entries: Vec<ModelEntry>,
    leaf: Option<usize>,
    /// target id → (label, order key)
    labels: BTreeMap<String, (String, usize)>,
    next_order: usize,
}

impl Model {
    fn path(&self, from: Option<usize>) -> Vec<usize> {
        let mut out = Vec::new();
        let mut current = from;
        while let Some(idx) = current {
            out.push(idx);
            current = self.entries[idx].parent;
        }
        out.reverse();
        out
    }

    fn children(&self, of: usize) -> Vec<usize> {
        (0..self.entries.len())
            .filter(|&idx| self.entries[idx].parent == Some(of))
            .collect()
    }
}

fn message(byte: u8) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: UserContent::Text(format!("m{byte}")),
        timestamp: i64::from(byte),
        extra: serde_json::Map::new(),
    })
}

fn check(store: &SessionStore, session: &SessionId, model: &Model) -> Result<(), TestCaseError> {
    let leaf = store
        .leaf(session)
        .unwrap()
        .and_then(|stored| stored.entry.id);
    prop_assert_eq!(leaf.as_ref(), model.leaf.map(|idx| &model.entries[idx].id));
    let path: Vec<EntryId> = store
        .branch_path(session, &LeafSelector::Current)
        .unwrap()
        .into_iter()
        .filter_map(|stored| stored.entry.id)
        .collect();
    let model_path: Vec<EntryId> = model
        .path(model.leaf)
        .into_iter()
        .map(|idx| model.entries[idx].id.clone())
        .collect();
    prop_assert_eq!(&path, &model_path);
    // The jump-pointer ancestor test agrees with the model for every entry.
    let on_path: std::collections::HashSet<usize> = model.path(model.leaf).into_iter().collect();
    for (idx, entry) in model.entries.iter().enumerate() {
        prop_assert_eq!(
            store.on_active_path(session, entry.seq).unwrap(),
            on_path.contains(&idx)
        );
    }
    let context = store.context(session, &LeafSelector::Current).unwrap();
    let messages = model
        .path(model.leaf)
        .into_iter()
        .filter(|&idx| !model.entries[idx].is_label)
        .count();
    prop_assert_eq!(context.messages.len(), messages);
    for (idx, entry) in model.entries.iter().enumerate() {
        let children: Vec<EntryId> = store
            .children(session, &entry.id)
            .unwrap()
            .into_iter()
            .filter_map(|stored| stored.entry.id)
            .collect();
        let expected: Vec<EntryId> = model
            .children(idx)
            .into_iter()
            .map(|child| model.entries[child].id.clone())
            .collect();
        prop_assert_eq!(children, expected);
    }
    let mut expected_labels: Vec<(&String, &(String, usize))> = model.labels.iter().collect();
    expected_labels.sort_by_key(|(_, (_, order))| *order);
    let labels: Vec<(String, String)> = store
        .labels(session)
        .unwrap()
        .into_iter()
        .map(|(target, label, _)| (target.into_string(), label))
        .collect();
    let expected_labels: Vec<(String, String)> = expected_labels
        .into_iter()
        .map(|(target, (label, _))| (target.clone(), label.clone()))
        .collect();
    prop_assert_eq!(labels, expected_labels);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_operations_agree_with_the_model(ops in proptest::collection::vec(op(), 1..40)) {
        let store = memory_store(99);
        let session = store.create_session(&NewSession { cwd: "/p".into(), parent_session: None }).unwrap().id;
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Append(byte) => {
                    let stored = store.append_message(&session, message(byte)).unwrap();
                    model.entries.push(ModelEntry { id: stored.entry.id.unwrap(), seq: stored.seq, parent: model.leaf, is_label: false });
                    model.leaf = Some(model.entries.len() - 1);
                }
                Op::Branch(pick) if !model.entries.is_empty() => {
                    let idx = pick % model.entries.len();
                    store.branch(&session, &model.entries[idx].id).unwrap();
                    model.leaf = Some(idx);
                }
                Op::Branch(_) => {}
                Op::Reset => {
                    store.reset_leaf(&session).unwrap();
                    model.leaf = None;
                }
                Op::Label(pick, label) if !model.entries.is_empty() => {
                    let target = model.entries[pick % model.entries.len()].id.clone();
                    let stored = store.append_label(&session, &target, label).unwrap();
                    model.entries.push(ModelEntry { id: stored.entry.id.unwrap(), seq: stored.seq, parent: model.leaf, is_label: true });
                    model.leaf = Some(model.entries.len() - 1);
                    match label.filter(|text| !text.is_empty()) {
                        Some(text) => {
                            let order = model.labels.get(target.as_str()).map_or(model.next_order, |(_, order)| *order);
                            model.labels.insert(target.to_string(), (text.to_owned(), order));
                            model.next_order += 1;
                        }
                        None => {
                            model.labels.remove(target.as_str());
                        }
                    }
                }
                Op::Label(..) => {}
                Op::Fork(pick) if !model.entries.is_empty() => {
                    let at_idx = pick % model.entries.len();
                    let forked = store.fork(&session, Some(&model.entries[at_idx].id), None).unwrap();
                    let copied: Vec<EntryId> = store.entries(&forked.id).unwrap().into_iter()
                        .filter(|stored| stored.entry.type_name() != "label")
                        .filter_map(|stored| stored.entry.id).collect();
                    let expected: Vec<EntryId> = model.path(Some(at_idx)).into_iter()
                        .filter(|&idx| !model.entries[idx].is_label)
                        .map(|idx| model.entries[idx].id.clone()).collect();
                    prop_assert_eq!(copied, expected.clone());
                    let relabelled = store.labels(&forked.id).unwrap().len();
                    let expected_labels = model.labels.keys().filter(|target| expected.iter().any(|id| id.as_str() == target.as_str())).count();
                    prop_assert_eq!(relabelled, expected_labels);
                }
                Op::Fork(_) => {}
            }
            check(&store, &session, &model)?;
        }
    }
}
