//! The store conformance suite: the reference fixtures rebuilt through the store API, and the
//! behaviour of appends, branches, labels, names, forks and deletes.

use std::collections::HashMap;

use pi::model::entry::{CompactionEntry, EntryKind};
use pi::model::{EntryId, ModelRef, SessionId};
use pi::store::{LeafSelector, ListScope, NewSession, SessionStore, StoreError};
use serde_json::{Value, json};

use crate::common::interchange::{branch_value, context_value, tree_value};
use crate::common::{TestEnv, fixtures, memory_store, new_session, user_message};

/// Checks one fixture against its expectation: context, leaf, entry count, name, tree, branch.
fn check_fixture(store: &SessionStore, name: &str) {
    let session = fixtures::load(store, name);
    let expected = fixtures::expected(name);
    assert_eq!(
        context_value(store, &session, &LeafSelector::Current),
        expected["context"],
        "{name}: context"
    );
    let leaf = store.leaf(&session).unwrap();
    let leaf_id = leaf.as_ref().and_then(|stored| stored.entry.id.clone());
    assert_eq!(
        leaf_id
            .as_ref()
            .map_or(Value::Null, |id| Value::from(id.as_str())),
        expected["leafId"],
        "{name}: leaf"
    );
    let summary = store.session(&session).unwrap();
    assert_eq!(
        Value::from(summary.entries),
        expected["entries"],
        "{name}: entries"
    );
    assert_eq!(
        summary.name.map_or(Value::Null, Value::from),
        expected["sessionName"],
        "{name}: name"
    );
    assert_eq!(
        tree_value(store, &session),
        expected["tree"],
        "{name}: tree"
    );
    assert_eq!(
        branch_value(store, &session),
        expected["branch"],
        "{name}: branch"
    );
    for (leaf, variant) in fixtures::leaf_variants(name) {
        let selector = LeafSelector::Entry(EntryId::new(leaf.as_str()));
        assert_eq!(
            context_value(store, &session, &selector),
            variant["context"],
            "{name} at leaf {leaf}: context"
        );
    }
}

#[test]
fn every_plain_v3_fixture_rebuilds_the_reference_context_tree_and_leaf() {
    let env = TestEnv::new();
    let store = env.store();
    let mut checked = Vec::new();
    for name in fixtures::names() {
        if fixtures::is_plain_v3(&name) {
            check_fixture(&store, &name);
            checked.push(name);
        }
    }
    // The fixtures that matter most must be among those checked.
    for must in [
        "all-entry-types",
        "branches",
        "compaction-twice",
        "compaction-split-turn",
        "multi-root",
        "labels",
        "damaged-duplicate-id",
        "reopen-duplicates-bug",
        "unicode-escapes",
        "huge-tool-output",
        "long-linear-chat",
    ] {
        assert!(
            checked.iter().any(|name| name == must),
            "{must} was not checked"
        );
    }
}

#[test]
fn fixtures_rebuild_the_same_in_an_in_memory_store() {
    let store = memory_store(3);
    for name in ["basic-chat", "branches", "compaction-single"] {
        check_fixture(&store, name);
    }
}

#[test]
fn appends_chain_to_the_leaf_and_branching_makes_siblings() {
    let store = memory_store(1);
    let session = new_session(&store, "/w");
    let a = store
        .append_message(&session, user_message("a", 1))
        .unwrap();
    assert_eq!(a.entry.parent_id, None);
    let b = store
        .append_message(&session, user_message("b", 2))
        .unwrap();
    assert_eq!(b.entry.parent_id, a.entry.id);
    let a_id = a.entry.id.clone().unwrap();
    store.branch(&session, &a_id).unwrap();
    let c = store
        .append_message(&session, user_message("c", 3))
        .unwrap();
    assert_eq!(c.entry.parent_id.as_ref(), Some(&a_id));
    let children: Vec<_> = store
        .children(&session, &a_id)
        .unwrap()
        .into_iter()
        .map(|stored| stored.entry.id)
        .collect();
    assert_eq!(children, vec![b.entry.id.clone(), c.entry.id.clone()]);
    let context = store.context(&session, &LeafSelector::Current).unwrap();
    assert_eq!(context.messages.len(), 2);
    assert!(context.messages[1].contains("\"c\""));
    // Ids are 8 lowercase hex characters; payloads use the reference key order.
    let id = c.entry.id.unwrap();
    assert!(id.as_str().len() == 8 && id.as_str().chars().all(|ch| ch.is_ascii_hexdigit()));
    let payload = String::from_utf8(c.payload).unwrap();
    assert!(payload.starts_with(&format!(
        r#"{{"type":"message","id":"{id}","parentId":"{a_id}","timestamp":"2026-01-01T00:00:0"#
    )));
}

#[test]
fn reset_leaf_makes_the_next_append_a_new_root_and_empties_the_context() {
    let store = memory_store(2);
    let session = new_session(&store, "/w");
    store
        .append_message(&session, user_message("a", 1))
        .unwrap();
    store.reset_leaf(&session).unwrap();
    let context = store.context(&session, &LeafSelector::Current).unwrap();
    assert!(context.messages.is_empty());
    assert_eq!(context.thinking_level, "off");
    let root = store
        .append_message(&session, user_message("b", 2))
        .unwrap();
    assert_eq!(root.entry.parent_id, None);
    assert_eq!(
        store
            .tree(&session)
            .unwrap()
            .iter()
            .filter(|node| node.depth == 0)
            .count(),
        2
    );
}

#[test]
fn branch_with_summary_appends_at_the_destination() {
    let store = memory_store(3);
    let session = new_session(&store, "/w");
    let a = store
        .append_message(&session, user_message("a", 1))
        .unwrap();
    let b = store
        .append_message(&session, user_message("b", 2))
        .unwrap();
    let a_id = a.entry.id.unwrap();
    let summary = store
        .branch_with_summary(
            &session,
            Some(&a_id),
            "tried b".into(),
            Some(json!({"readFiles":[],"modifiedFiles":[]})),
            Some(false),
        )
        .unwrap();
    assert_eq!(summary.entry.parent_id.as_ref(), Some(&a_id));
    // 1.6.0 `branchWithSummary`: `fromId` is the leaf left (b), not the destination.
    let b_id = b.entry.id.unwrap();
    let text = String::from_utf8(summary.payload).unwrap();
    assert!(text.contains(&format!(r#""fromId":"{b_id}","summary":"tried b","details":{{"readFiles":[],"modifiedFiles":[]}},"fromHook":false"#)), "{text}");
    let summary_id = summary.entry.id.unwrap();
    let root = store
        .branch_with_summary(&session, None, "from root".into(), None, None)
        .unwrap();
    assert_eq!(root.entry.parent_id, None);
    assert!(
        String::from_utf8(root.payload)
            .unwrap()
            .contains(&format!(r#""fromId":"{summary_id}""#))
    );
    // Without a leaf (a fresh session) it is `root`.
    let fresh = new_session(&store, "/w");
    let alone = store
        .branch_with_summary(&fresh, None, "nothing".into(), None, None)
        .unwrap();
    assert!(
        String::from_utf8(alone.payload)
            .unwrap()
            .contains(r#""fromId":"root""#)
    );
    let context = store.context(&session, &LeafSelector::Current).unwrap();
    assert_eq!(context.messages.len(), 1);
    assert!(context.messages[0].contains("branchSummary"));
}

#[test]
fn labels_last_write_wins_and_empty_clears() {
    let store = memory_store(4);
    let session = new_session(&store, "/w");
    let a = store
        .append_message(&session, user_message("a", 1))
        .unwrap()
        .entry
        .id
        .unwrap();
    let b = store
        .append_message(&session, user_message("b", 2))
        .unwrap()
        .entry
        .id
        .unwrap();
    store.append_label(&session, &a, Some("one")).unwrap();
    store.append_label(&session, &b, Some("two")).unwrap();
    store.append_label(&session, &a, Some("uno")).unwrap();
    assert_eq!(store.label(&session, &a).unwrap().as_deref(), Some("uno"));
    store.append_label(&session, &b, Some("")).unwrap();
    assert_eq!(store.label(&session, &b).unwrap(), None);
    store.append_label(&session, &a, None).unwrap();
    assert!(store.labels(&session).unwrap().is_empty());
    let missing = store.append_label(&session, &EntryId::new("nope"), Some("x"));
    assert!(matches!(missing, Err(StoreError::EntryNotFound { .. })));
}

#[test]
fn the_last_session_info_names_the_session() {
    let store = memory_store(5);
    let session = new_session(&store, "/w");
    store.append_session_info(&session, "  First  ").unwrap();
    assert_eq!(
        store.session_name(&session).unwrap().as_deref(),
        Some("First")
    );
    store.append_session_info(&session, "Second").unwrap();
    assert_eq!(
        store.session_name(&session).unwrap().as_deref(),
        Some("Second")
    );
    store.append_session_info(&session, "").unwrap();
    assert_eq!(store.session_name(&session).unwrap(), None);
}

#[test]
fn model_and_thinking_come_from_the_whole_path_even_past_a_compaction() {
    let store = memory_store(6);
    let session = new_session(&store, "/w");
    store
        .append_model_change(
            &session,
            ModelRef {
                provider: "p".into(),
                model_id: "m".into(),
            },
        )
        .unwrap();
    store.append_thinking_level(&session, "high").unwrap();
    let u1 = store
        .append_message(&session, user_message("one", 1))
        .unwrap();
    let u2 = store
        .append_message(&session, user_message("two", 2))
        .unwrap();
    store
        .append_compaction(
            &session,
            CompactionEntry {
                summary: "sum".into(),
                first_kept_entry_id: u2.entry.id.clone(),
                tokens_before: 10,
                details: None,
                from_hook: Some(false),
                usage: None,
                system_message: None,
            },
        )
        .unwrap();
    store
        .append_message(&session, user_message("three", 3))
        .unwrap();
    let context = store.context(&session, &LeafSelector::Current).unwrap();
    assert_eq!(context.thinking_level, "high");
    assert!(context.has_thinking_entry);
    assert_eq!(context.model, Some(json!({"provider":"p","modelId":"m"})));
    assert_eq!(context.messages.len(), 3);
    assert!(context.messages[0].contains("compactionSummary"));
    assert!(!context.messages.iter().any(|m| m.contains("\"one\"")));
    // At an earlier leaf the compaction is not on the path.
    let at_u1 = store
        .context(&session, &LeafSelector::Entry(u1.entry.id.unwrap()))
        .unwrap();
    assert_eq!(at_u1.messages.len(), 1);
}

#[test]
fn fork_copies_the_path_without_labels_and_recreates_them() {
    let store = memory_store(7);
    let session = new_session(&store, "/w");
    let a = store
        .append_message(&session, user_message("a", 1))
        .unwrap()
        .entry
        .id
        .unwrap();
    let b = store
        .append_message(&session, user_message("b", 2))
        .unwrap()
        .entry
        .id
        .unwrap();
    store.append_label(&session, &a, Some("start")).unwrap();
    let c = store
        .append_message(&session, user_message("c", 3))
        .unwrap()
        .entry
        .id
        .unwrap();
    let forked = store.fork(&session, Some(&c), None).unwrap();
    assert_eq!(forked.parent_session.as_deref(), Some(session.as_str()));
    let entries = store.entries(&forked.id).unwrap();
    let types: Vec<&str> = entries
        .iter()
        .map(|stored| stored.entry.type_name())
        .collect();
    assert_eq!(types, ["message", "message", "message", "label"]);
    assert_eq!(entries[0].entry.id.as_ref(), Some(&a));
    assert_eq!(entries[1].entry.id.as_ref(), Some(&b));
    // c's parent was the label entry, which is not copied: c is an orphan, as in the reference.
    assert_eq!(entries[3].entry.parent_id.as_ref(), Some(&c));
    assert_eq!(
        store.label(&forked.id, &a).unwrap().as_deref(),
        Some("start")
    );
    // The original is untouched.
    assert_eq!(store.entries(&session).unwrap().len(), 4);
    let empty = store.fork(&session, None, Some("/elsewhere")).unwrap();
    assert_eq!(empty.entries, 0);
    assert_eq!(empty.cwd, "/elsewhere");
}

/// Two sessions, in `/a` (with one message, so latest activity) and `/b`.
fn two_sessions(store: &SessionStore) -> (SessionId, SessionId) {
    let one = new_session(store, "/a");
    let two = new_session(store, "/b");
    store
        .append_message(&one, user_message("hello there", 1))
        .unwrap();
    (one, two)
}

#[test]
fn listing_is_latest_activity_first_and_scoped_by_directory() {
    let env = TestEnv::new();
    let store = env.store();
    let (one, _) = two_sessions(&store);
    let all = store.list(&ListScope::All).unwrap();
    assert_eq!(all[0].id, one, "latest activity first");
    assert_eq!(all[0].first_message.as_deref(), Some("hello there"));
    assert_eq!(all[0].messages, 1);
    assert_eq!(store.list(&ListScope::Cwd("/b".into())).unwrap().len(), 1);
    assert_eq!(store.most_recent("/a").unwrap(), Some(one.clone()));
    assert_eq!(store.most_recent("/zzz").unwrap(), None);
}

#[test]
fn an_id_or_a_unique_prefix_resolves_and_a_shared_prefix_is_ambiguous() {
    let env = TestEnv::new();
    let store = env.store();
    let (one, two) = two_sessions(&store);
    assert_eq!(store.resolve(one.as_str()).unwrap(), one);
    assert_eq!(store.resolve(&one.as_str()[..30]).unwrap(), one);
    // Both are UUIDv7 made in the same second: a short prefix matches both.
    let common: String = one
        .as_str()
        .chars()
        .zip(two.as_str().chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect();
    assert!(matches!(
        store.resolve(&common),
        Err(StoreError::AmbiguousSession { .. })
    ));
    assert!(matches!(
        store.resolve("zz"),
        Err(StoreError::SessionNotFound { .. })
    ));
}

#[test]
fn a_deleted_session_is_gone_and_the_others_stay() {
    let env = TestEnv::new();
    let store = env.store();
    let (one, _) = two_sessions(&store);
    store.delete_session(&one).unwrap();
    assert!(matches!(
        store.session(&one),
        Err(StoreError::SessionNotFound { .. })
    ));
    assert_eq!(store.list(&ListScope::All).unwrap().len(), 1);
}

#[test]
fn entries_cannot_be_updated_or_deleted_outside_a_session_delete() {
    let env = TestEnv::new();
    let store = env.store();
    let session = new_session(&store, "/w");
    store
        .append_message(&session, user_message("a", 1))
        .unwrap();
    drop(store);
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    let update = conn.execute("UPDATE entries SET payload = x'00'", []);
    assert!(update.unwrap_err().to_string().contains("append-only"));
    let delete = conn.execute("DELETE FROM entries", []);
    assert!(
        delete
            .unwrap_err()
            .to_string()
            .contains("together with their session")
    );
}

#[test]
fn a_parent_cycle_terminates_every_walk() {
    let store = memory_store(8);
    let header = pi::model::SessionHeader::new(
        SessionId::new("cyc"),
        "2025-01-01T00:00:00.000Z".into(),
        "/c".into(),
        None,
    );
    let lines = [
        r#"{"type":"message","id":"a","parentId":"b","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"a","timestamp":1}}"#,
        r#"{"type":"message","id":"b","parentId":"a","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"user","content":"b","timestamp":2}}"#,
        r#"{"type":"message","id":"s","parentId":"s","timestamp":"2025-01-01T00:00:03.000Z","message":{"role":"user","content":"s","timestamp":3}}"#,
    ];
    let entries: Vec<_> = lines
        .iter()
        .map(|line| pi::store::RawEntry::parse(line.as_bytes()).unwrap())
        .collect();
    let session = store
        .insert_raw_session(&header, header.to_line().as_bytes(), &entries)
        .unwrap()
        .id;
    let context = store.context(&session, &LeafSelector::Current).unwrap();
    assert_eq!(
        context.messages.len(),
        1,
        "s is its own parent: the walk stops"
    );
    let at_b = store
        .context(&session, &LeafSelector::Entry(EntryId::new("b")))
        .unwrap();
    assert_eq!(at_b.messages.len(), 2);
    let tree = store.tree(&session).unwrap();
    assert_eq!(
        tree.len(),
        1,
        "a and b are in a cycle with no root; s is a root"
    );
    assert_eq!(
        store
            .branch_path(&session, &LeafSelector::Entry(EntryId::new("a")))
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn rebuilding_derived_rows_gives_what_the_appends_gave() {
    let env = TestEnv::new();
    let store = env.store();
    let mut sessions = HashMap::new();
    for name in [
        "all-entry-types",
        "branches",
        "compaction-twice",
        "damaged-duplicate-id",
        "labels",
    ] {
        sessions.insert(name, fixtures::load(&store, name));
    }
    let before: Vec<_> = store.list(&ListScope::All).unwrap();
    let dump = |store: &SessionStore| -> Vec<String> {
        let conn = rusqlite::Connection::open(env.db()).unwrap();
        let mut out = Vec::new();
        for table in ["entry_path", "labels", "session_stats"] {
            let mut stmt = conn
                .prepare(&format!("SELECT * FROM {table} ORDER BY 1, 2"))
                .unwrap();
            let columns = stmt.column_count();
            let rows = stmt
                .query_map([], |row| {
                    let mut text = String::new();
                    for idx in 0..columns {
                        let value: rusqlite::types::Value = row.get(idx)?;
                        text.push_str(&format!("{value:?}|"));
                    }
                    Ok(text)
                })
                .unwrap();
            out.extend(rows.map(Result::unwrap));
        }
        let _ = store;
        out
    };
    let derived_before = dump(&store);
    store.rebuild_derived().unwrap();
    assert_eq!(dump(&store), derived_before);
    assert_eq!(store.list(&ListScope::All).unwrap(), before);
    for (name, session) in sessions {
        let expected = fixtures::expected(name);
        assert_eq!(
            context_value(&store, &session, &LeafSelector::Current),
            expected["context"],
            "{name}"
        );
    }
}

#[test]
fn stored_entries_keep_their_bytes_and_unknown_types() {
    let store = memory_store(9);
    let session = fixtures::load(&store, "damaged-unknown-type");
    let (_, _, raw) = fixtures::read_minimal("damaged-unknown-type");
    let stored = store.entries(&session).unwrap();
    assert_eq!(stored.len(), raw.len());
    for (stored, raw) in stored.iter().zip(&raw) {
        assert_eq!(stored.payload, raw.payload);
    }
    assert!(stored.iter().any(
        |s| matches!(&s.entry.kind, EntryKind::Unknown { type_name } if type_name == "frobnicate")
    ));
}

#[test]
fn the_fast_rebuild_agrees_with_the_plain_walk_at_every_entry_of_every_fixture() {
    let store = memory_store(10);
    for name in fixtures::names() {
        if !fixtures::is_plain_v3(&name) {
            continue;
        }
        let session = fixtures::load(&store, &name);
        for stored in store.entries(&session).unwrap() {
            let Some(id) = stored.entry.id else { continue };
            let leaf = LeafSelector::Entry(id.clone());
            assert_eq!(
                store.context(&session, &leaf).unwrap(),
                store.context_by_plain_walk(&session, &leaf).unwrap(),
                "{name} at {id}"
            );
        }
    }
}

#[test]
fn ancestor_tests_hold_on_deep_paths() {
    let store = memory_store(12);
    let session = new_session(&store, "/w");
    let mut seqs = Vec::new();
    let mut ids = Vec::new();
    for idx in 0..700 {
        let stored = store
            .append_message(&session, user_message(&format!("m{idx}"), idx))
            .unwrap();
        seqs.push(stored.seq);
        ids.push(stored.entry.id.unwrap());
    }
    // Branch off at 333 and grow a side chain.
    store.branch(&session, &ids[333]).unwrap();
    let mut side = Vec::new();
    for idx in 0..200 {
        side.push(
            store
                .append_message(&session, user_message(&format!("s{idx}"), idx))
                .unwrap()
                .seq,
        );
    }
    for (idx, seq) in seqs.iter().enumerate() {
        assert_eq!(
            store.on_active_path(&session, *seq).unwrap(),
            idx <= 333,
            "main {idx}"
        );
    }
    assert!(
        side.iter()
            .all(|seq| store.on_active_path(&session, *seq).unwrap())
    );
    store.branch(&session, &ids[699]).unwrap();
    assert!(
        seqs.iter()
            .all(|seq| store.on_active_path(&session, *seq).unwrap())
    );
    assert!(
        !side
            .iter()
            .any(|seq| store.on_active_path(&session, *seq).unwrap())
    );
}

#[test]
fn a_read_only_store_reads_what_a_writer_appends_and_refuses_to_write() {
    use std::sync::Arc;
    use std::time::Duration;

    use pi::store::{StoreConfig, StoreLocation};
    use pi::support::clock::SystemClock;
    use pi::support::ids::IdSource;

    let env = TestEnv::new();
    let config = || StoreConfig {
        location: StoreLocation::File(env.db()),
        clock: Arc::new(SystemClock),
        ids: Arc::new(IdSource::seeded(7)),
        busy_timeout: Duration::from_secs(10),
    };
    // No database yet: the read-only open falls back to the ordinary one, which creates it.
    assert!(!env.db().exists());
    drop(SessionStore::open_read_only(config()).unwrap());
    assert!(env.db().exists());

    let writer = SessionStore::open(config()).unwrap();
    let session = writer
        .create_session(&NewSession {
            cwd: "/work".into(),
            parent_session: None,
        })
        .unwrap();
    let reader = SessionStore::open_read_only(config()).unwrap();
    writer
        .append_message(&session.id, user_message("first", 1))
        .unwrap();
    assert_eq!(reader.list(&ListScope::All).unwrap()[0].messages, 1);
    // Each read is its own snapshot: an append after the reader opened is visible.
    writer
        .append_message(&session.id, user_message("second", 2))
        .unwrap();
    assert_eq!(reader.list(&ListScope::All).unwrap()[0].messages, 2);
    match reader.create_session(&NewSession {
        cwd: "/work".into(),
        parent_session: None,
    }) {
        Err(StoreError::ReadOnly { detail, .. }) => {
            assert!(detail.contains("read-only"), "{detail}")
        }
        other => panic!("expected a read-only refusal, got {other:?}"),
    }
    assert_eq!(writer.list(&ListScope::All).unwrap().len(), 1);
}
