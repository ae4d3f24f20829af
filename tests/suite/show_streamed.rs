//! `sessions show` and `export --branch` walk the branch entry by entry
//! (`SessionStore::visit_branch`): what they print is what the whole path, read at once,
//! gives.

use pi::model::SessionId;
use pi::store::{LeafSelector, SessionStore};
use pi::support::json::{parse_lenient, to_js_string};
use serde_json::Value;

use crate::common::{TestEnv, fixtures, stdout_text};

/// The branch as one JSON array, built from the whole path at once.
fn whole_path_json(store: &SessionStore, session: &SessionId, leaf: &LeafSelector) -> String {
    let path = store.branch_path(session, leaf).unwrap();
    let entries: Vec<Value> = path
        .iter()
        .map(|stored| parse_lenient(&stored.payload).unwrap())
        .collect();
    format!("{}\n", to_js_string(&Value::Array(entries)))
}

fn show(env: &TestEnv, args: &[&str]) -> String {
    stdout_text(env.pi().arg("sessions").arg("show").args(args))
}

/// Every plain v3 fixture, loaded into `store`, with its name.
fn plain_v3_sessions(store: &SessionStore) -> Vec<(String, SessionId)> {
    fixtures::names()
        .into_iter()
        .filter(|name| fixtures::is_plain_v3(name))
        .map(|name| {
            let session = fixtures::load(store, &name);
            (name, session)
        })
        .collect()
}

#[test]
fn show_json_prints_the_branch_byte_for_byte_as_the_whole_path_gives_it_at_every_leaf() {
    let env = TestEnv::new();
    let store = env.store();
    let mut checked = 0;
    for (name, session) in plain_v3_sessions(&store) {
        let current = whole_path_json(&store, &session, &LeafSelector::Current);
        assert_eq!(show(&env, &[session.as_str(), "--json"]), current, "{name}");
        for (leaf, _) in fixtures::leaf_variants(&name) {
            let selector = LeafSelector::Entry(pi::model::EntryId::new(leaf.as_str()));
            let expected = whole_path_json(&store, &session, &selector);
            assert_eq!(
                show(&env, &[session.as_str(), "--json", "--leaf", &leaf]),
                expected,
                "{name} at {leaf}"
            );
            checked += 1;
        }
    }
    assert!(checked > 0, "some fixture has leaf variants");
}

#[test]
fn show_json_of_a_session_without_entries_is_an_empty_array() {
    let env = TestEnv::new();
    let store = env.store();
    let session = store
        .create_session(&pi::store::NewSession {
            cwd: env.workspace.display().to_string(),
            parent_session: None,
        })
        .unwrap()
        .id;
    assert_eq!(show(&env, &[session.as_str(), "--json"]), "[]\n");
    let text = show(&env, &[session.as_str()]);
    assert!(
        text.contains("leaf      (before the first entry)"),
        "{text}"
    );
}

#[test]
fn show_text_puts_the_leaf_in_the_header_and_every_path_entry_after_it() {
    let env = TestEnv::new();
    let store = env.store();
    let mut checked = 0;
    for (name, session) in plain_v3_sessions(&store) {
        for (leaf, _) in fixtures::leaf_variants(&name) {
            let selector = LeafSelector::Entry(pi::model::EntryId::new(leaf.as_str()));
            let path = store.branch_path(&session, &selector).unwrap();
            let text = show(&env, &[session.as_str(), "--leaf", &leaf]);
            assert!(
                text.contains(&format!("leaf      {leaf}\n")),
                "{name} at {leaf}: {text}"
            );
            // Every entry of the path starts a line with its id, in path order.
            let mut from = text.find("\n\n").expect("a header") + 2;
            for stored in &path {
                let id = stored.entry.id.as_ref().unwrap().as_str();
                let at = text[from..]
                    .find(&format!("\n{id}  "))
                    .or_else(|| text[from..].starts_with(&format!("{id}  ")).then_some(0))
                    .unwrap_or_else(|| panic!("{name} at {leaf}: {id} after byte {from}"));
                from += at + 1;
            }
            checked += 1;
        }
    }
    assert!(checked > 0, "some fixture has leaf variants");
}
