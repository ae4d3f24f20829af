//! Interop with the reference itself: our exports are opened by the pinned
//! `@mariozechner/pi-coding-agent@0.73.1` (`tests/interop/`, installed by `.ci/run` with
//! `npm ci`), and what its `SessionManager` rebuilds — leaf, context, tree, name, branch —
//! must equal what we rebuild from the same session.

use std::path::{Path, PathBuf};
use std::process::Command;

use pi::model::entry::{CompactionEntry, EntryKind};
use pi::model::message::{AgentMessage, UserContent};
use pi::model::{EntryId, ModelRef, SessionId};
use pi::store::{ImportMode, LeafSelector, NewSession, SessionStore};
use serde_json::{Value, json};

use crate::common::interchange::{
    branch_value, context_value, export, import_bytes, leaf_value, tree_value,
};
use crate::common::{fixtures, memory_store};

fn interop_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("interop")
}

/// One file for the reference to open, optionally at another leaf, or only to migrate.
struct Ask {
    file: PathBuf,
    leaf: Option<String>,
    migrate: bool,
}

/// Runs `tests/interop/reference.mjs` once for all files; returns its answers in order.
fn ask_reference(asks: &[Ask], scratch: &Path) -> Vec<Value> {
    let package = interop_dir().join("node_modules/@mariozechner/pi-coding-agent/package.json");
    assert!(
        package.exists(),
        "the reference package is not installed: run `npm ci` in tests/interop (.ci/run does)"
    );
    let version: Value = serde_json::from_slice(&std::fs::read(&package).unwrap()).unwrap();
    assert_eq!(version["version"], "0.73.1", "the pinned reference version");
    let spec: Vec<Value> = asks
        .iter()
        .map(|ask| json!({"file": ask.file.to_string_lossy(), "leaf": ask.leaf, "migrate": ask.migrate}))
        .collect();
    let spec_file = scratch.join("spec.json");
    std::fs::write(&spec_file, serde_json::to_vec(&spec).unwrap()).unwrap();
    let output = Command::new("node")
        .arg("reference.mjs")
        .arg(&spec_file)
        .current_dir(interop_dir())
        .output()
        .expect("node must be installed for the interop tests");
    assert!(
        output.status.success(),
        "reference.mjs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answers = pi::support::json::parse_lenient(&output.stdout).unwrap();
    let answers = answers.as_array().unwrap().clone();
    assert_eq!(answers.len(), asks.len());
    answers
}

/// What we rebuild, in the reference script's shape.
fn ours(store: &SessionStore, session: &SessionId, leaf: Option<&str>) -> Value {
    let selector = match leaf {
        Some(id) => LeafSelector::Entry(EntryId::new(id)),
        None => LeafSelector::Current,
    };
    let summary = store.session(session).unwrap();
    let leaf_id = match leaf {
        Some(id) => Value::from(id),
        None => leaf_value(store, session),
    };
    let branch = match leaf {
        None => branch_value(store, session),
        Some(_) => Value::Array(
            store
                .branch_path(session, &selector)
                .unwrap()
                .iter()
                .rev()
                .map(|stored| Value::from(stored.entry.id.as_ref().unwrap().as_str()))
                .collect(),
        ),
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

fn assert_same(reference: &Value, ours: &Value, what: &str) {
    assert!(
        reference.get("error").is_none(),
        "{what}: the reference failed: {}",
        reference["error"]
    );
    assert_eq!(
        reference["fileRewritten"], false,
        "{what}: the reference rewrote our file"
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

pub struct Case {
    pub what: String,
    pub store: SessionStore,
    pub session: SessionId,
    pub leaf: Option<String>,
    pub file: PathBuf,
}

#[test]
fn the_reference_reads_our_export_of_every_fixture_as_we_read_the_fixture() {
    let scratch = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    for name in fixtures::names() {
        let bytes = std::fs::read(fixtures::dir().join(format!("{name}.jsonl"))).unwrap();
        let store = memory_store(3);
        let Ok(imported) = import_bytes(&store, &bytes, ImportMode::Merge) else {
            continue;
        };
        let session = imported.report.session;
        let file = scratch.path().join(format!("{name}.jsonl"));
        std::fs::write(&file, export(&store, &session)).unwrap();
        let mut leaves: Vec<Option<String>> = vec![None];
        leaves.extend(
            fixtures::leaf_variants(&name)
                .into_iter()
                .map(|(id, _)| Some(id)),
        );
        for leaf in leaves {
            cases.push(Case {
                what: format!("{name} at {leaf:?}"),
                store: store.clone(),
                session: session.clone(),
                leaf,
                file: file.clone(),
            });
        }
    }
    assert!(cases.len() > 40, "{} cases", cases.len());
    check_cases(&cases, scratch.path());
}

pub fn check_cases(cases: &[Case], scratch: &Path) {
    let asks: Vec<Ask> = cases
        .iter()
        .map(|case| Ask {
            file: case.file.clone(),
            leaf: case.leaf.clone(),
            migrate: false,
        })
        .collect();
    let answers = ask_reference(&asks, scratch);
    for (case, answer) in cases.iter().zip(&answers) {
        let ours = ours(&case.store, &case.session, case.leaf.as_deref());
        assert_same(answer, &ours, &case.what);
    }
}

fn message(value: Value) -> AgentMessage {
    AgentMessage::from_value(value)
}

fn user(text: &str, ts: i64) -> AgentMessage {
    message(json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}))
}

fn assistant(text: &str, ts: i64) -> AgentMessage {
    message(json!({
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hm", "thinkingSignature": "sig"},
            {"type": "text", "text": text},
            {"type": "toolCall", "id": format!("call_{ts}"), "name": "read", "arguments": {"path": "a.rs"}}
        ],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                  "cost": {"input": 0.00003, "output": 0.000075, "cacheRead": 0, "cacheWrite": 0, "total": 0.000105}},
        "stopReason": "toolUse",
        "timestamp": ts
    }))
}

fn tool_result(ts: i64) -> AgentMessage {
    message(json!({
        "role": "toolResult",
        "toolCallId": format!("call_{}", ts - 1),
        "toolName": "read",
        "content": [{"type": "text", "text": "fn main() {}\n"}],
        "details": {"lines": 1},
        "isError": false,
        "timestamp": ts
    }))
}

fn bash(ts: i64) -> AgentMessage {
    message(json!({
        "role": "bashExecution",
        "command": "ls",
        "output": "a.rs\n",
        "exitCode": 0,
        "cancelled": false,
        "truncated": false,
        "timestamp": ts
    }))
}

fn id(stored: &pi::store::StoredEntry) -> EntryId {
    stored.entry.id.clone().unwrap()
}

/// A session with every entry type, two branches, two compactions, branch summaries,
/// labels set, changed and cleared, and names.
fn rich_session(store: &SessionStore) -> (SessionId, Vec<EntryId>) {
    let session = store
        .create_session(&NewSession {
            cwd: "/home/u/project".to_owned(),
            parent_session: None,
        })
        .unwrap()
        .id;
    let s = &session;
    let mut ids = Vec::new();
    let mut push = |stored: pi::store::StoredEntry| {
        ids.push(id(&stored));
        id(&stored)
    };
    push(
        store
            .append_model_change(
                s,
                ModelRef {
                    provider: "anthropic".into(),
                    model_id: "claude-sonnet-4-5".into(),
                },
            )
            .unwrap(),
    );
    push(store.append_thinking_level(s, "medium").unwrap());
    let first_user = push(
        store
            .append_message(s, user("first question", 1000))
            .unwrap(),
    );
    push(store.append_message(s, assistant("looking", 1001)).unwrap());
    let fork_point = push(store.append_message(s, tool_result(1002)).unwrap());
    push(store.append_message(s, assistant("done", 1003)).unwrap());
    push(store.append_message(s, bash(1004)).unwrap());
    push(store.append_label(s, &first_user, Some("start")).unwrap());
    push(store.append_session_info(s, "  Rich session  ").unwrap());
    let kept = push(
        store
            .append_message(s, user("second question", 1005))
            .unwrap(),
    );
    push(store.append_message(s, assistant("answer", 1006)).unwrap());
    push(
        store
            .append_compaction(
                s,
                CompactionEntry {
                    summary: "Summary of the start".into(),
                    first_kept_entry_id: Some(kept.clone()),
                    tokens_before: 1234,
                    details: Some(json!({"readFiles": ["a.rs"], "modifiedFiles": []})),
                    from_hook: Some(false),
                    usage: None,
                    system_message: None,
                },
            )
            .unwrap(),
    );
    push(
        store
            .append_custom(s, "todo-ext", Some(json!({"open": 2})))
            .unwrap(),
    );
    push(store.append_custom(s, "todo-ext", None).unwrap());
    push(
        store
            .append_custom_message(
                s,
                "ci",
                UserContent::Text("CI green".into()),
                true,
                Some(json!({"run": 7})),
            )
            .unwrap(),
    );
    push(store.append_message(s, user("third", 1007)).unwrap());
    push(
        store
            .append_label(s, &first_user, Some("beginning"))
            .unwrap(),
    );
    push(store.append_label(s, &kept, Some("kept")).unwrap());
    push(store.append_label(s, &kept, None).unwrap());
    push(
        store
            .append_model_change(
                s,
                ModelRef {
                    provider: "openai".into(),
                    model_id: "gpt-5".into(),
                },
            )
            .unwrap(),
    );
    // A second branch from the tool result, summarised.
    push(
        store
            .branch_with_summary(
                s,
                Some(&fork_point),
                "The other branch answered.".into(),
                Some(json!({"readFiles": [], "modifiedFiles": ["b.rs"]})),
                Some(false),
            )
            .unwrap(),
    );
    push(store.append_message(s, user("on the side", 1008)).unwrap());
    push(store.append_thinking_level(s, "high").unwrap());
    let side_kept = push(
        store
            .append_message(s, assistant("side answer", 1009))
            .unwrap(),
    );
    push(
        store
            .append_compaction(
                s,
                CompactionEntry {
                    summary: "Side summary".into(),
                    first_kept_entry_id: Some(side_kept),
                    tokens_before: 99,
                    details: None,
                    from_hook: Some(true),
                    usage: None,
                    system_message: None,
                },
            )
            .unwrap(),
    );
    push(
        store
            .append_message(s, user("after the side compaction", 1010))
            .unwrap(),
    );
    push(
        store
            .append(
                s,
                EntryKind::SessionInfo {
                    name: Some("Renamed".into()),
                },
            )
            .unwrap(),
    );
    push(store.append_message(s, user("last", 1011)).unwrap());
    (session, ids)
}

#[test]
fn the_reference_reads_sessions_we_create_as_we_do() {
    let scratch = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    let mut add = |what: &str, store: &SessionStore, session: &SessionId, leaf: Option<String>| {
        let file = scratch.path().join(format!("{}.jsonl", cases.len()));
        std::fs::write(&file, export(store, session)).unwrap();
        cases.push(Case {
            what: what.to_owned(),
            store: store.clone(),
            session: session.clone(),
            leaf,
            file,
        });
    };

    let store = memory_store(21);
    let (session, ids) = rich_session(&store);
    add("rich session", &store, &session, None);
    for (idx, entry) in ids.iter().enumerate().step_by(3) {
        add(
            &format!("rich session at entry {idx}"),
            &store,
            &session,
            Some(entry.to_string()),
        );
    }

    // The leaf moved back without appending: the export writes its line last, so the
    // reference resumes where we are.
    for back in [2usize, 5, 9, 15, 20] {
        let store = memory_store(22 + back as u64);
        let (session, ids) = rich_session(&store);
        store.branch(&session, &ids[back]).unwrap();
        let mut out = Vec::new();
        let summary = store.export_jsonl(&session, &mut out).unwrap();
        assert!(summary.leaf_last, "entry {back} can be written last");
        add(
            &format!("leaf moved back to entry {back}"),
            &store,
            &session,
            None,
        );
    }

    // A reset leaf followed by a new root: two roots, the reference reads both.
    let store = memory_store(40);
    let (session, _) = rich_session(&store);
    store.reset_leaf(&session).unwrap();
    store
        .append_message(&session, user("a new root", 2000))
        .unwrap();
    store
        .append_message(&session, assistant("from the top", 2001))
        .unwrap();
    add("second root", &store, &session, None);

    // 1.6.0 shapes pi writes: a system message with every section and tool declaration, a
    // later patch, thinking level `max` recorded on an assistant message. 0.73.1 reads them
    // as messages of their own (it has no other view of a system message).
    let store = memory_store(41);
    let session = store
        .create_session(&NewSession {
            cwd: "/work".to_owned(),
            parent_session: None,
        })
        .unwrap()
        .id;
    let fixture = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/pi16/cli-tool-call.jsonl"),
    )
    .unwrap();
    let system = fixture
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|line| line["message"]["role"] == "system")
        .unwrap();
    store
        .append_message(&session, message(system["message"].clone()))
        .unwrap();
    store
        .append_message(&session, user("what is here?", 3000))
        .unwrap();
    store
        .append_message(&session, assistant("a README", 3001))
        .unwrap();
    store
        .append_message(
            &session,
            message(json!({
                "role": "system",
                "content": "",
                "sections": {"append": "Answer in one line."},
                "timestamp": 3002,
            })),
        )
        .unwrap();
    store
        .append_message(&session, user("and now?", 3003))
        .unwrap();
    add("system messages and a patch", &store, &session, None);

    check_cases(&cases, scratch.path());
}

#[test]
fn where_the_leaf_cannot_move_the_reference_resumes_at_the_last_line() {
    let scratch = tempfile::tempdir().unwrap();
    let store = memory_store(50);
    let (session, ids) = rich_session(&store);
    // Entry 7 is a label: moving it would change the order labels apply in.
    store.branch(&session, &ids[7]).unwrap();
    let mut out = Vec::new();
    assert!(!store.export_jsonl(&session, &mut out).unwrap().leaf_last);
    let file = scratch.path().join("label-leaf.jsonl");
    std::fs::write(&file, &out).unwrap();
    let answers = ask_reference(
        &[Ask {
            file: file.clone(),
            leaf: None,
            migrate: false,
        }],
        scratch.path(),
    );
    let last = ids.last().unwrap().to_string();
    let at_last = ours(&store, &session, Some(&last));
    assert_same(
        &answers[0],
        &at_last,
        "label leaf: the reference resumes at the last line",
    );
}

#[test]
fn the_reference_reads_a_branch_export_as_the_active_path() {
    let scratch = tempfile::tempdir().unwrap();
    let store = memory_store(60);
    let (session, _) = rich_session(&store);
    let exe = assert_cmd::cargo::cargo_bin("pi");
    let db = scratch.path().join("pi.db");
    // The CLI reads the database; put the session there through an export/import.
    let full = scratch.path().join("full.jsonl");
    std::fs::write(&full, export(&store, &session)).unwrap();
    let run = |args: &[&str]| {
        let output = Command::new(&exe)
            .args(args)
            .env_clear()
            .env("PI_CODING_AGENT_DIR", scratch.path())
            .env("PI_TEST_CLOCK", "1767225600000")
            .env("PI_TEST_SEED", "3")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    };
    run(&[
        "--db",
        db.to_str().unwrap(),
        "import",
        full.to_str().unwrap(),
    ]);
    let branch_file = scratch.path().join("branch.jsonl");
    run(&[
        "--db",
        db.to_str().unwrap(),
        "export",
        "--jsonl",
        session.as_str(),
        "--branch",
        "-o",
        branch_file.to_str().unwrap(),
    ]);
    let answers = ask_reference(
        &[Ask {
            file: branch_file.clone(),
            leaf: None,
            migrate: false,
        }],
        scratch.path(),
    );
    let answer = &answers[0];
    assert!(answer.get("error").is_none(), "{answer}");
    assert_ne!(answer["header"]["id"], session.as_str(), "a new session id");
    assert_eq!(
        answer["context"],
        context_value(&store, &session, &LeafSelector::Current),
        "the branch export rebuilds the same context"
    );
    assert_eq!(answer["leafId"], leaf_value(&store, &session));
    let path = branch_value(&store, &session);
    assert_eq!(answer["branch"], path, "the same path, now linear");
    assert_eq!(
        answer["tree"].as_array().unwrap().len(),
        path.as_array().unwrap().len(),
        "only the active path"
    );
}

/// Legacy files with every byte-fidelity trap: lone surrogates, astral pairs, U+2028,
/// control characters, `\/`, numbers JavaScript writes differently (`1.0`, `-0`, `1E21`,
/// `5e-324`, 30-digit integers, `1e400`), integer-like keys, duplicate keys, a BOM, CRLF.
const LEGACY_V2: &str = concat!(
    "\u{feff}{\"type\":\"session\",\"version\":2,\"id\":\"v2-traps\",\"timestamp\":\"2025-01-10T09:00:00.000Z\",\"cwd\":\"/w\",\"x\":1.50}\r\n",
    "{\"type\":\"message\",\"id\":\"a1\",\"parentId\":null,\"timestamp\":\"2025-01-10T09:00:01.000Z\",\"message\":{\"role\":\"hookMessage\",\"customType\":\"x\",\"content\":\"lone \\ud83c pair \\ud83c\\udf89 \\u00e9 \\u2028 \\/ \\u0000\\u001f\\u007f \\\"q\\\"\",\"display\":true,\"details\":{\"b\":1,\"2\":2,\"a\":-0,\"1\":1E21,\"n\":1.0,\"big\":123456789012345678901234567890,\"tiny\":5e-324,\"huge\":1e400,\"dup\":1,\"dup\":2,\"f\":0.30000000000000004},\"timestamp\":1736499601000}}\r\n",
    "  {\"type\":\"message\",\"id\":\"b2\",\"parentId\":\"a1\",\"timestamp\":\"2025-01-10T09:00:02.000Z\",\"message\":{\"role\":\"user\",\"content\":\"\\uDBFF\\uDFFF \\udfff\",\"timestamp\":1.736499602e12}}  \n",
);

const LEGACY_V1: &str = concat!(
    "{\"type\":\"session\",\"id\":\"v1-traps\",\"timestamp\":\"2024-11-20T10:00:00.000Z\",\"cwd\":\"/w\"}\n",
    "{\"type\":\"message\",\"timestamp\":\"2024-11-20T10:00:01.000Z\",\"message\":{\"role\":\"user\",\"content\":\"\\ud83c\",\"timestamp\":1.0}}\n",
    "{\"type\":\"thinking_level_change\",\"id\":\"kept-position\",\"timestamp\":\"2024-11-20T10:00:02.000Z\",\"thinkingLevel\":\"low\"}\n",
    "{\"type\":\"compaction\",\"timestamp\":\"2024-11-20T10:00:03.000Z\",\"summary\":\"s\",\"firstKeptEntryIndex\":2,\"tokensBefore\":1e3}\n",
    "{\"type\":\"compaction\",\"timestamp\":\"2024-11-20T10:00:04.000Z\",\"summary\":\"t\",\"firstKeptEntryIndex\":0,\"tokensBefore\":5}\n",
    "{\"type\":\"compaction\",\"timestamp\":\"2024-11-20T10:00:05.000Z\",\"summary\":\"u\",\"firstKeptEntryIndex\":4.5,\"tokensBefore\":5}\n",
    "{\"type\":\"message\",\"timestamp\":\"2024-11-20T10:00:06.000Z\",\"message\":{\"role\":\"hookMessage\",\"customType\":\"c\",\"content\":\"h\",\"display\":false,\"timestamp\":6}}\n",
);

#[test]
fn legacy_migration_writes_the_same_bytes_as_the_reference() {
    let scratch = tempfile::tempdir().unwrap();
    let mut asks = Vec::new();
    let mut ours = Vec::new();
    for (name, text) in [("v2.jsonl", LEGACY_V2), ("v1.jsonl", LEGACY_V1)] {
        let file = scratch.path().join(name);
        std::fs::write(&file, text).unwrap();
        asks.push(Ask {
            file,
            leaf: None,
            migrate: true,
        });
        let read = pi::jsonl::SessionFile::read(text.as_bytes()).unwrap();
        assert!(read.skipped().next().is_none(), "{name}: nothing skipped");
        let mut lines = vec![read.header_bytes.clone()];
        lines.extend(read.entries().map(|entry| entry.payload.clone()));
        ours.push((name, lines));
    }
    let answers = ask_reference(&asks, scratch.path());
    for ((name, lines), answer) in ours.iter().zip(&answers) {
        let expected: Vec<String> = answer["migrated"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: {answer}"))
            .iter()
            .map(|line| line.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(lines.len(), expected.len(), "{name}");
        // The reference invents ids 00000001, 00000002, ...; ours are derived. Rename ours
        // in order of appearance, then every byte must match.
        let mut renamed: Vec<String> = lines
            .iter()
            .map(|line| String::from_utf8(line.clone()).unwrap())
            .collect();
        if *name == "v1.jsonl" {
            for (idx, line) in lines.iter().enumerate().skip(1) {
                let value = pi::support::json::parse_lenient(line).unwrap();
                let ours_id = value["id"].as_str().unwrap().to_owned();
                let theirs = format!("{idx:08x}");
                for text in &mut renamed {
                    *text = text.replace(&format!("\"{ours_id}\""), &format!("\"{theirs}\""));
                }
            }
        }
        for (idx, (ours_line, reference_line)) in renamed.iter().zip(&expected).enumerate() {
            assert_eq!(ours_line, reference_line, "{name} line {idx}");
        }
    }
}
