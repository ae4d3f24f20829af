//! Import, re-import and export through the library (`jsonl` reader + `store` interchange):
//! every reference fixture, the merge rules, the leaf-last rule and quarantine.

use std::collections::{BTreeSet, HashMap};

use pi::jsonl::{Item, JsonlError, NoHeader, SessionFile, SkipReason};
use pi::model::entry::EntryKind;
use pi::model::message::{AgentMessage, UserContent};
use pi::model::{EntryId, SessionId};
use pi::store::{ImportMode, ImportOptions, ImportStatus, LeafSelector, ListScope};
use serde_json::Value;

use crate::common::interchange::{
    branch_value, context_value, export, import_bytes, leaf_value, minus_reported, rename_ids,
    tree_value,
};
use crate::common::{fixtures, memory_store, new_session, user_message};

/// Compares our migrated export with `X.migrated.jsonl` up to a consistent renaming of the
/// ids the reference invents; returns the renaming (ours → reference's).
fn compare_migrated(name: &str, ours: &[u8]) -> HashMap<String, String> {
    let expected = std::fs::read(fixtures::dir().join(format!("{name}.migrated.jsonl"))).unwrap();
    let ours_lines: Vec<&[u8]> = ours.split(|&b| b == b'\n').collect();
    let expected_lines: Vec<&[u8]> = expected.split(|&b| b == b'\n').collect();
    assert_eq!(ours_lines.len(), expected_lines.len(), "{name}: line count");
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut back: HashMap<String, String> = HashMap::new();
    for (our_line, expected_line) in ours_lines.iter().zip(&expected_lines) {
        if our_line.is_empty() {
            continue;
        }
        let ours_value = pi::support::json::parse_lenient(our_line).unwrap();
        let expected_value = pi::support::json::parse_lenient(expected_line).unwrap();
        if let (Some(Value::String(our_id)), Some(Value::String(expected_id))) =
            (ours_value.get("id"), expected_value.get("id"))
            && ours_value["type"] != "session"
        {
            let previous = ids.insert(our_id.clone(), expected_id.clone());
            assert!(previous.is_none() || previous.as_ref() == Some(expected_id));
            let previous = back.insert(expected_id.clone(), our_id.clone());
            assert!(
                previous.is_none() || previous.as_ref() == Some(our_id),
                "{name}: ids rename consistently"
            );
        }
    }
    // Byte comparison after renaming: ids are 8-hex strings, quoted.
    let mut renamed = String::from_utf8(ours.to_vec()).unwrap();
    for (ours_id, expected_id) in &ids {
        renamed = renamed.replace(&format!("\"{ours_id}\""), &format!("\"{expected_id}\""));
    }
    assert_eq!(
        renamed,
        String::from_utf8(expected).unwrap(),
        "{name}: export equals the reference's migrated file up to invented ids"
    );
    ids
}

/// Where the contract departs from the reference (a `null` line: the reference throws, we
/// skip it), the fixture whose expectation is the same file without the skipped line.
const EXPECTED_WITHOUT_SKIPPED: &[(&str, &str)] = &[("damaged-null-line", "basic-chat")];

/// Imports one fixture into a fresh store and checks everything the contract says.
fn check_fixture(name: &str) {
    let store = memory_store(5);
    let source = std::fs::read(fixtures::dir().join(format!("{name}.jsonl"))).unwrap();
    let mut expected = fixtures::expected(name);
    let imported = match import_bytes(&store, &source, ImportMode::Merge) {
        Err(JsonlError::NoHeader(reason)) => {
            assert_eq!(
                expected["headerSynthesized"],
                Value::Bool(true),
                "{name}: refused ({reason}) but the reference found a header"
            );
            assert!(
                store.list(&ListScope::All).unwrap().is_empty(),
                "{name}: nothing stored"
            );
            return;
        }
        Err(other) => panic!("{name}: {other}"),
        Ok(imported) => imported,
    };
    assert_ne!(expected["headerSynthesized"], Value::Bool(true), "{name}");
    let session = imported.report.session.clone();
    assert_eq!(imported.report.status, ImportStatus::Imported, "{name}");
    if expected.get("error").is_some() {
        let (_, substitute) = EXPECTED_WITHOUT_SKIPPED
            .iter()
            .find(|(fixture, _)| *fixture == name)
            .unwrap_or_else(|| panic!("{name}: the reference fails; say what we expect instead"));
        assert!(
            imported
                .skipped
                .iter()
                .any(|line| line.reason == SkipReason::Null),
            "{name}: the null line is reported"
        );
        expected = fixtures::expected(substitute);
    }

    // Export: the source minus exactly the reported lines, or the reference's migration.
    let exported = export(&store, &session);
    let ids = if imported.migration.rewrites() {
        compare_migrated(name, &exported)
    } else {
        let reported: BTreeSet<usize> = imported.skipped.iter().map(|line| line.line).collect();
        assert_eq!(
            String::from_utf8_lossy(&exported),
            String::from_utf8_lossy(&minus_reported(&source, &reported)),
            "{name}: export is the source minus the reported lines"
        );
        assert_eq!(
            exported,
            minus_reported(&source, &reported),
            "{name}: bytes"
        );
        HashMap::new()
    };
    let ours = |value: Value| rename_ids(&value, &ids);

    // What the reference rebuilds.
    let header = pi::support::json::parse_lenient(&store.header_bytes(&session).unwrap()).unwrap();
    assert_eq!(header, expected["header"], "{name}: header");
    assert_eq!(
        ours(context_value(&store, &session, &LeafSelector::Current)),
        expected["context"],
        "{name}: context"
    );
    assert_eq!(
        ours(leaf_value(&store, &session)),
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
        ours(tree_value(&store, &session)),
        expected["tree"],
        "{name}: tree"
    );
    assert_eq!(
        ours(branch_value(&store, &session)),
        expected["branch"],
        "{name}: branch"
    );
    for (leaf, variant) in fixtures::leaf_variants(name) {
        let selector = LeafSelector::Entry(EntryId::new(leaf.as_str()));
        assert_eq!(
            ours(context_value(&store, &session, &selector)),
            variant["context"],
            "{name} at {leaf}"
        );
    }

    // Quarantine holds exactly the reported lines, with their bytes.
    let quarantined: Vec<(i64, String, Vec<u8>)> = store
        .quarantine(&session)
        .unwrap()
        .into_iter()
        .map(|line| (line.line, line.reason, line.bytes))
        .collect();
    let reported: Vec<(i64, String, Vec<u8>)> = imported
        .skipped
        .iter()
        .map(|line| {
            (
                line.line as i64,
                line.reason.to_string(),
                line.bytes.clone(),
            )
        })
        .collect();
    assert_eq!(quarantined, reported, "{name}: quarantine");

    // Importing the same file again changes nothing.
    let again = import_bytes(&store, &source, ImportMode::Merge).unwrap();
    assert_eq!(
        again.report.status,
        ImportStatus::Unchanged,
        "{name}: re-import"
    );
    assert_eq!(again.report.added, 0);
    assert_eq!(
        export(&store, &session),
        exported,
        "{name}: export after re-import"
    );
    assert_eq!(
        store.quarantine(&session).unwrap().len(),
        reported.len(),
        "{name}"
    );
    // And importing the export gives the same export.
    let other = memory_store(6);
    let round = import_bytes(&other, &exported, ImportMode::Merge).unwrap();
    assert!(
        round.skipped.is_empty(),
        "{name}: the export has nothing to skip"
    );
    assert_eq!(
        export(&other, &round.report.session),
        exported,
        "{name}: round trip"
    );
}

#[test]
fn every_fixture_imports_rebuilds_and_exports_as_the_contract_says() {
    let names = fixtures::names();
    assert!(names.len() >= 35, "fixtures missing: {names:?}");
    for name in &names {
        check_fixture(name);
    }
}

#[test]
fn fixture_imports_report_the_expected_lines() {
    let store = memory_store(1);
    let skipped = |name: &str| -> Vec<(usize, SkipReason)> {
        let bytes = std::fs::read(fixtures::dir().join(format!("{name}.jsonl"))).unwrap();
        let file = SessionFile::read(&bytes).unwrap();
        let _ = &store;
        file.skipped()
            .map(|line| (line.line, line.reason))
            .collect()
    };
    assert_eq!(
        skipped("damaged-not-json-and-blank-lines"),
        [
            (5, SkipReason::NotJson),
            (8, SkipReason::Blank),
            (10, SkipReason::Blank),
            (12, SkipReason::NotJson),
            (15, SkipReason::Blank),
            (16, SkipReason::Blank),
        ]
    );
    assert_eq!(skipped("damaged-torn-last-line"), [(10, SkipReason::Torn)]);
    assert_eq!(skipped("damaged-null-line"), [(6, SkipReason::Null)]);
    assert_eq!(
        skipped("reopen-duplicates-bug"),
        [(3, SkipReason::SecondHeader)]
    );
    assert_eq!(
        skipped("cli-continue-no-trailing-newline"),
        [(4, SkipReason::NotJson)]
    );
    assert!(skipped("damaged-unknown-type").is_empty());
    assert!(skipped("damaged-duplicate-id").is_empty());
    let refused = |name: &str| {
        let bytes = std::fs::read(fixtures::dir().join(format!("{name}.jsonl"))).unwrap();
        match SessionFile::read(&bytes) {
            Err(JsonlError::NoHeader(reason)) => reason,
            other => panic!("{name}: {other:?}"),
        }
    };
    assert_eq!(refused("empty-file"), NoHeader::Empty);
    assert_eq!(
        refused("damaged-missing-header"),
        NoHeader::NotAHeader { line: 1 }
    );
}

#[test]
fn legacy_imports_are_idempotent_thanks_to_derived_ids() {
    for name in ["legacy-v1", "legacy-v2"] {
        let bytes = std::fs::read(fixtures::dir().join(format!("{name}.jsonl"))).unwrap();
        let first = memory_store(1);
        let second = memory_store(2);
        let a = import_bytes(&first, &bytes, ImportMode::Merge).unwrap();
        let b = import_bytes(&second, &bytes, ImportMode::Merge).unwrap();
        assert_eq!(
            export(&first, &a.report.session),
            export(&second, &b.report.session)
        );
        let again = import_bytes(&first, &bytes, ImportMode::Merge).unwrap();
        assert_eq!(again.report.status, ImportStatus::Unchanged, "{name}");
    }
}

fn lines_of(bytes: &[u8]) -> Vec<String> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixtures::dir().join(format!("{name}.jsonl"))).unwrap()
}

fn user_line(id: &str, parent: &str, text: &str, ts: &str) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"{ts}","message":{{"role":"user","content":"{text}","timestamp":1}}}}"#
    )
}

#[test]
fn reimport_after_the_reference_appended_adds_the_new_lines_and_moves_the_leaf() {
    let store = memory_store(1);
    let source = fixture("basic-chat");
    let first = import_bytes(&store, &source, ImportMode::Merge).unwrap();
    let session = first.report.session;
    // The reference continued from an earlier entry (a new branch), then appended more.
    let mut grown = source.clone();
    grown.extend_from_slice(
        user_line("aaaa0001", "450d3725", "side", "2025-05-14T09:10:00.000Z").as_bytes(),
    );
    grown.push(b'\n');
    grown.extend_from_slice(
        user_line("aaaa0002", "aaaa0001", "more", "2025-05-14T09:11:00.000Z").as_bytes(),
    );
    grown.push(b'\n');
    let second = import_bytes(&store, &grown, ImportMode::Merge).unwrap();
    assert_eq!(second.report.status, ImportStatus::Updated);
    assert_eq!(second.report.added, 2);
    assert_eq!(second.report.entries, 11);
    assert_eq!(leaf_value(&store, &session), "aaaa0002");
    assert_eq!(
        export(&store, &session),
        grown,
        "the union exports as the grown file"
    );
    // A file that is now a prefix of the session is unchanged, and the leaf stays.
    store.branch(&session, &EntryId::new("aaaa0001")).unwrap();
    let third = import_bytes(&store, &source, ImportMode::Merge).unwrap();
    assert_eq!(third.report.status, ImportStatus::Unchanged);
    assert_eq!(leaf_value(&store, &session), "aaaa0001");
}

#[test]
fn reimport_after_both_sides_appended_is_the_union() {
    let store = memory_store(4);
    let source = fixture("basic-chat");
    let session = import_bytes(&store, &source, ImportMode::Merge)
        .unwrap()
        .report
        .session;
    let ours = store.append_session_info(&session, "renamed here").unwrap();
    let mut theirs = source.clone();
    theirs.extend_from_slice(
        user_line("bbbb0001", "91aae06f", "there", "2025-05-14T09:20:00.000Z").as_bytes(),
    );
    theirs.push(b'\n');
    let merged = import_bytes(&store, &theirs, ImportMode::Merge).unwrap();
    assert_eq!(merged.report.status, ImportStatus::Updated);
    assert_eq!(merged.report.entries, 11);
    assert_eq!(leaf_value(&store, &session), "bbbb0001");
    let exported = lines_of(&export(&store, &session));
    assert_eq!(exported.len(), 12);
    assert_eq!(exported[10], String::from_utf8(ours.payload).unwrap());
    assert!(exported[11].contains("bbbb0001"));
}

#[test]
fn a_conflicting_line_refuses_the_file_and_stores_nothing() {
    let store = memory_store(1);
    let source = fixture("basic-chat");
    let session = import_bytes(&store, &source, ImportMode::Merge)
        .unwrap()
        .report
        .session;
    let before = export(&store, &session);
    let text = String::from_utf8(source.clone()).unwrap();
    // Line 6 keeps its id but says something else; a new line comes after it.
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[5] = lines[5].replace("Yes please, briefly.", "No thanks.");
    lines.push(user_line(
        "cccc0001",
        "91aae06f",
        "new",
        "2025-05-14T09:30:00.000Z",
    ));
    let changed = format!("{}\n", lines.join("\n"));
    let refused = import_bytes(&store, changed.as_bytes(), ImportMode::Merge).unwrap();
    assert_eq!(refused.report.status, ImportStatus::Refused);
    let conflict = refused.report.conflict.unwrap();
    assert_eq!(conflict.line, 6);
    assert_eq!(conflict.id.as_str(), "450d3725");
    assert_eq!(export(&store, &session), before, "nothing stored");
    // As a new session instead: a new id, the header otherwise as it was, every line kept.
    let copy = import_bytes(&store, changed.as_bytes(), ImportMode::AsNew).unwrap();
    assert_eq!(copy.report.status, ImportStatus::Imported);
    assert_ne!(copy.report.session, session);
    assert_eq!(copy.report.entries, 10);
    let copy_export = export(&store, &copy.report.session);
    let copy_lines = lines_of(&copy_export);
    assert_eq!(
        copy_lines[0],
        lines[0].replace(session.as_str(), copy.report.session.as_str())
    );
    assert_eq!(&copy_lines[1..], &lines[1..]);
    assert_eq!(store.list(&ListScope::All).unwrap().len(), 2);
}

#[test]
fn a_file_with_new_duplicates_stores_them_as_a_first_import_would() {
    let store = memory_store(1);
    let source = fixture("basic-chat");
    let session = import_bytes(&store, &source, ImportMode::Merge)
        .unwrap()
        .report
        .session;
    let line = user_line("dddd0001", "91aae06f", "twice", "2025-05-14T09:40:00.000Z");
    let grown = [source.clone(), format!("{line}\n{line}\n").into_bytes()].concat();
    let merged = import_bytes(&store, &grown, ImportMode::Merge).unwrap();
    assert_eq!(merged.report.added, 2);
    assert_eq!(export(&store, &session), grown);
    let again = import_bytes(&store, &grown, ImportMode::Merge).unwrap();
    assert_eq!(again.report.status, ImportStatus::Unchanged);
}

/// A user message with `text`, at 1 ms.
fn user(text: &str) -> AgentMessage {
    user_message(text, 1)
}

fn id_of(stored: &pi::store::StoredEntry) -> EntryId {
    stored.entry.id.clone().unwrap()
}

#[test]
fn export_writes_the_moved_leaf_last_so_the_reference_resumes_there() {
    let store = memory_store(9);
    let session = new_session(&store, "/w");
    let a = store.append_message(&session, user("a")).unwrap();
    let b = store.append_message(&session, user("b")).unwrap();
    let c = store.append_message(&session, user("c")).unwrap();
    store.branch(&session, &id_of(&b)).unwrap();
    let mut out = Vec::new();
    let summary = store.export_jsonl(&session, &mut out).unwrap();
    assert!(summary.leaf_last);
    let lines = lines_of(&out);
    let payload =
        |stored: &pi::store::StoredEntry| String::from_utf8(stored.payload.clone()).unwrap();
    assert_eq!(&lines[1..], [payload(&a), payload(&c), payload(&b)]);
    // Importing the export resumes at the same leaf with the same context.
    let other = memory_store(10);
    let imported = import_bytes(&other, &out, ImportMode::Merge).unwrap();
    assert_eq!(
        leaf_value(&other, &imported.report.session),
        leaf_value(&store, &session)
    );
    assert_eq!(
        context_value(&other, &imported.report.session, &LeafSelector::Current),
        context_value(&store, &session, &LeafSelector::Current)
    );
    assert_eq!(
        tree_value(&other, &imported.report.session),
        tree_value(&store, &session)
    );
    // Re-importing the export into the original changes nothing.
    let again = import_bytes(&store, &out, ImportMode::Merge).unwrap();
    assert_eq!(again.report.status, ImportStatus::Unchanged);
}

#[test]
fn export_keeps_append_order_when_moving_the_leaf_would_change_something() {
    let store = memory_store(9);
    let in_order = |session: &SessionId| {
        let mut out = Vec::new();
        let summary = store.export_jsonl(session, &mut out).unwrap();
        let ids: Vec<String> = lines_of(&out)[1..]
            .iter()
            .map(|line| {
                pi::support::json::parse_lenient(line.as_bytes()).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        (summary.leaf_last, ids)
    };
    let ids = |entries: &[&pi::store::StoredEntry]| -> Vec<String> {
        entries
            .iter()
            .map(|stored| id_of(stored).to_string())
            .collect()
    };

    // A root leaf.
    let session = new_session(&store, "/w");
    let a = store.append_message(&session, user("a")).unwrap();
    let b = store.append_message(&session, user("b")).unwrap();
    store.branch(&session, &id_of(&a)).unwrap();
    assert_eq!(in_order(&session), (false, ids(&[&a, &b])));

    // A label leaf.
    let session = new_session(&store, "/w");
    let a = store.append_message(&session, user("a")).unwrap();
    let label = store.append_label(&session, &id_of(&a), Some("x")).unwrap();
    let c = store.append_message(&session, user("c")).unwrap();
    store.branch(&session, &id_of(&label)).unwrap();
    assert_eq!(in_order(&session), (false, ids(&[&a, &label, &c])));

    // A session_info leaf.
    let session = new_session(&store, "/w");
    let a = store.append_message(&session, user("a")).unwrap();
    let info = store.append_session_info(&session, "n").unwrap();
    let c = store.append_message(&session, user("c")).unwrap();
    store.branch(&session, &id_of(&info)).unwrap();
    assert_eq!(in_order(&session), (false, ids(&[&a, &info, &c])));

    // A leaf reset to before the first entry.
    let session = new_session(&store, "/w");
    let a = store.append_message(&session, user("a")).unwrap();
    store.reset_leaf(&session).unwrap();
    assert_eq!(in_order(&session), (false, ids(&[&a])));

    // A sibling with the same timestamp (imported lines).
    let header = r#"{"type":"session","version":3,"id":"same-ts","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;
    let text = [
        header.to_owned(),
        user_line("r0000000", "zz", "r", "2026-01-01T00:00:01.000Z").replace("\"zz\"", "null"),
        user_line("s0000001", "r0000000", "s1", "2026-01-01T00:00:02.000Z"),
        user_line("s0000002", "r0000000", "s2", "2026-01-01T00:00:02.000Z"),
        user_line("t0000003", "s0000002", "t", "2026-01-01T00:00:03.000Z"),
        user_line("u0000004", "t0000003", "u", "2026-01-01T00:00:04.000Z"),
    ]
    .join("\n");
    let imported = import_bytes(&store, format!("{text}\n").as_bytes(), ImportMode::Merge).unwrap();
    let session = imported.report.session;
    store.branch(&session, &EntryId::new("s0000001")).unwrap();
    assert!(!in_order(&session).0);
    store.branch(&session, &EntryId::new("s0000002")).unwrap();
    assert!(
        !in_order(&session).0,
        "s0000002 has a same-time sibling too"
    );
    store.branch(&session, &EntryId::new("r0000000")).unwrap();
    assert!(!in_order(&session).0, "a root never moves");
    // Without a tie the leaf moves.
    store.branch(&session, &EntryId::new("t0000003")).unwrap();
    let (moved, order) = in_order(&session);
    assert!(moved);
    assert_eq!(order.last().map(String::as_str), Some("t0000003"));
}

#[test]
fn sessions_created_here_export_in_the_reference_key_order_and_import_back_unchanged() {
    let store = memory_store(12);
    let session = new_session(&store, "/w");
    let a = store.append_message(&session, user("hello")).unwrap();
    store
        .append_custom(&session, "ext", Some(serde_json::json!({"k": [1, 2.5]})))
        .unwrap();
    store
        .append_custom_message(
            &session,
            "ext",
            UserContent::Text("note".into()),
            false,
            None,
        )
        .unwrap();
    store
        .append_label(&session, &id_of(&a), Some("start"))
        .unwrap();
    store.append_thinking_level(&session, "high").unwrap();
    let exported = export(&store, &session);
    let lines = lines_of(&exported);
    assert!(lines[0].starts_with(r#"{"type":"session","version":3,"id":""#));
    assert!(
        lines[2].starts_with(r#"{"type":"custom","customType":"ext","data":{"k":[1,2.5]},"id":""#)
    );
    assert!(lines[3].starts_with(
        r#"{"type":"custom_message","customType":"ext","content":"note","display":false,"id":""#
    ));
    // Absent optional fields are omitted, never written as null.
    for line in &lines[1..] {
        assert!(
            !line.replace("\"parentId\":null", "").contains("null"),
            "{line}"
        );
    }
    let other = memory_store(13);
    let imported = import_bytes(&other, &exported, ImportMode::Merge).unwrap();
    assert_eq!(imported.report.session, session);
    assert_eq!(export(&other, &session), exported);
    let again = import_bytes(&store, &exported, ImportMode::Merge).unwrap();
    assert_eq!(again.report.status, ImportStatus::Unchanged);
    store
        .append(
            &session,
            EntryKind::SessionInfo {
                name: Some("x".into()),
            },
        )
        .unwrap();
    let grown = import_bytes(&other, &export(&store, &session), ImportMode::Merge).unwrap();
    assert_eq!(grown.report.status, ImportStatus::Updated);
    assert_eq!(grown.report.added, 1);
}

#[test]
fn parent_cycles_and_orphans_import_and_rebuild_without_hanging() {
    let store = memory_store(1);
    let header = r#"{"type":"session","version":3,"id":"cyc","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;
    let text = [
        header.to_owned(),
        user_line("x1", "x2", "a", "2026-01-01T00:00:01.000Z"),
        user_line("x2", "x1", "b", "2026-01-01T00:00:02.000Z"),
        user_line("self", "self", "c", "2026-01-01T00:00:03.000Z"),
        user_line("orphan", "missing", "d", "2026-01-01T00:00:04.000Z"),
        user_line("x1", "x2", "e", "2026-01-01T00:00:05.000Z"),
    ]
    .join("\n");
    let imported = import_bytes(&store, text.as_bytes(), ImportMode::Merge).unwrap();
    let session = imported.report.session;
    assert_eq!(imported.report.entries, 5);
    assert_eq!(leaf_value(&store, &session), "x1");
    let context = context_value(&store, &session, &LeafSelector::Current);
    assert!(context["messages"].as_array().unwrap().len() <= 2);
    assert!(!tree_value(&store, &session).as_array().unwrap().is_empty());
    for leaf in ["x2", "self", "orphan"] {
        context_value(&store, &session, &LeafSelector::Entry(EntryId::new(leaf)));
    }
    let mut out = Vec::new();
    store.export_jsonl(&session, &mut out).unwrap();
    assert_eq!(out, format!("{text}\n").into_bytes());
}

#[test]
fn skipped_lines_of_reimports_are_quarantined_once() {
    let store = memory_store(1);
    let source = fixture("damaged-not-json-and-blank-lines");
    let session = import_bytes(&store, &source, ImportMode::Merge)
        .unwrap()
        .report
        .session;
    assert_eq!(store.quarantine(&session).unwrap().len(), 6);
    import_bytes(&store, &source, ImportMode::Merge).unwrap();
    assert_eq!(store.quarantine(&session).unwrap().len(), 6);
    let rows = store.quarantine(&session).unwrap();
    assert_eq!(rows[0].bytes, b"this line is not JSON at all");
    assert_eq!(rows[0].source, "test.jsonl");
    assert_eq!(rows[0].reason, "not JSON");
    assert!(rows[0].imported_at.starts_with("2026-01-01T"));
}

#[test]
fn crlf_bom_and_missing_final_newline_are_repaired_on_export() {
    let store = memory_store(1);
    let source = fixture("basic-chat");
    let text = String::from_utf8(source.clone()).unwrap();
    let damaged = format!("\u{feff}{}", text.trim_end().replace('\n', "\r\n"));
    let imported = import_bytes(&store, damaged.as_bytes(), ImportMode::Merge).unwrap();
    assert!(imported.skipped.is_empty());
    assert_eq!(imported.header_line, 1);
    assert_eq!(export(&store, &imported.report.session), source);
}

#[test]
fn items_stream_in_file_order() {
    let bytes = fixture("damaged-null-line");
    let file = SessionFile::read(&bytes).unwrap();
    let numbers: Vec<usize> = file
        .items
        .iter()
        .map(|item| match item {
            Item::Entry(entry) => entry.line,
            Item::Skipped(line) => line.line,
        })
        .collect();
    assert_eq!(numbers, (2..=11).collect::<Vec<_>>());
}

#[test]
fn an_import_whose_lines_stop_arriving_is_rolled_back() {
    let store = memory_store(1);
    let bytes = fixture("basic-chat");
    let file = SessionFile::read(&bytes).unwrap();
    let aborted = || pi::store::StoreError::ImportAborted {
        file: "test.jsonl".into(),
        reason: "the reader failed".into(),
    };
    let options = ImportOptions {
        source: "test.jsonl",
        mode: ImportMode::Merge,
    };
    let half: Vec<_> = file.items.iter().take(4).cloned().map(Ok).collect();
    let items = half.into_iter().chain(std::iter::once(Err(aborted())));
    let error = store
        .import_lines(&file.header, &file.header_bytes, items, &options)
        .unwrap_err();
    assert!(
        matches!(error, pi::store::StoreError::ImportAborted { .. }),
        "{error}"
    );
    assert!(
        store.list(&ListScope::All).unwrap().is_empty(),
        "nothing stored"
    );
    // The same when merging into a stored session: nothing appended.
    let session = import_bytes(&store, &bytes, ImportMode::Merge)
        .unwrap()
        .report
        .session;
    let before = export(&store, &session);
    let mut grown = bytes.clone();
    grown.extend_from_slice(
        user_line("eeee0001", "91aae06f", "x", "2025-05-14T09:50:00.000Z").as_bytes(),
    );
    grown.push(b'\n');
    let file = SessionFile::read(&grown).unwrap();
    let items = file
        .items
        .iter()
        .cloned()
        .map(Ok)
        .chain(std::iter::once(Err(aborted())));
    assert!(
        store
            .import_lines(&file.header, &file.header_bytes, items, &options)
            .is_err()
    );
    assert_eq!(export(&store, &session), before);
}
