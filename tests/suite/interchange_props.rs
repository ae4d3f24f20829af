//! Property tests of the interchange: random trees round-trip import → export → import
//! unchanged; re-import after either side appended merges as CONTRACT.md says; random byte
//! damage to the fixtures never panics, never hangs, and always yields a report.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use pi::jsonl::{JsonlError, Migration, SessionReader};
use pi::model::entry::CompactionEntry;
use pi::model::message::{AgentMessage, UserContent};
use pi::model::{EntryId, ModelRef, SessionId};
use pi::store::{ImportMode, ImportStatus, LeafSelector, NewSession, SessionStore};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Value, json};

use crate::common::interchange::{
    context_value, export, import_bytes, leaf_value, minus_reported, tree_value,
};
use crate::common::{fixtures, memory_store};

#[derive(Debug, Clone)]
enum Op {
    User(u8),
    Assistant(u8),
    Custom(u8),
    CustomMessage(u8),
    Thinking(u8),
    Model(u8),
    Label(usize, Option<u8>),
    Name(u8),
    Compaction(usize),
    BranchSummary(usize),
    Branch(usize),
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<u8>().prop_map(Op::User),
        4 => any::<u8>().prop_map(Op::Assistant),
        1 => any::<u8>().prop_map(Op::Custom),
        1 => any::<u8>().prop_map(Op::CustomMessage),
        1 => any::<u8>().prop_map(Op::Thinking),
        1 => any::<u8>().prop_map(Op::Model),
        2 => (any::<usize>(), proptest::option::of(any::<u8>())).prop_map(|(t, l)| Op::Label(t, l)),
        1 => any::<u8>().prop_map(Op::Name),
        1 => any::<usize>().prop_map(Op::Compaction),
        1 => any::<usize>().prop_map(Op::BranchSummary),
        3 => any::<usize>().prop_map(Op::Branch),
        1 => Just(Op::Reset),
    ]
}

/// Text that exercises escaping: quotes, control characters, U+2028, astral characters.
fn text(seed: u8) -> String {
    const PIECES: &[&str] = &[
        "plain",
        "\"quoted\"",
        "back\\slash",
        "tab\there",
        "line\nbreak",
        "\u{2028}",
        "é",
        "🎉",
        "\u{0}",
        "\u{7f}",
        "ZWJ 👩\u{200d}💻",
        "",
    ];
    format!(
        "{} {} #{seed}",
        PIECES[usize::from(seed) % PIECES.len()],
        PIECES[usize::from(seed / 16) % PIECES.len()]
    )
}

fn odd_json(seed: u8) -> Value {
    match seed % 5 {
        0 => json!({"n": 1e21, "f": 0.1, "neg": -0.0, "big": 1.7976931348623157e308}),
        1 => json!([1, "two", null, {"3": 3, "a": true}]),
        2 => json!({"text": text(seed), "nested": {"deep": [[[]]]}}),
        3 => Value::Null,
        _ => json!(seed),
    }
}

fn assistant(seed: u8) -> AgentMessage {
    AgentMessage::from_value(json!({
        "role": "assistant",
        "content": [{"type": "text", "text": text(seed)}],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": format!("model-{}", seed % 3),
        "usage": {"input": seed, "output": 3, "cacheRead": 0, "cacheWrite": 0, "totalTokens": u32::from(seed) + 3,
                  "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.30000000000000004}},
        "stopReason": "stop",
        "timestamp": 1_700_000_000_000_i64 + i64::from(seed)
    }))
}

/// Applies random operations to a new session; returns it and its entry ids in order.
fn build(store: &SessionStore, ops: &[Op]) -> (SessionId, Vec<EntryId>) {
    let session = store
        .create_session(&NewSession {
            cwd: "/w".to_owned(),
            parent_session: None,
        })
        .unwrap()
        .id;
    let s = &session;
    let mut ids: Vec<EntryId> = Vec::new();
    let pick = |ids: &[EntryId], idx: usize| ids[idx % ids.len()].clone();
    for op in ops {
        let stored = match op {
            Op::User(seed) => store.append_message(
                s,
                AgentMessage::from_value(
                    json!({"role": "user", "content": text(*seed), "timestamp": 1}),
                ),
            ),
            Op::Assistant(seed) => store.append_message(s, assistant(*seed)),
            Op::Custom(seed) => store.append_custom(s, "ext", Some(odd_json(*seed))),
            Op::CustomMessage(seed) => store.append_custom_message(
                s,
                "ext",
                UserContent::Text(text(*seed)),
                seed % 2 == 0,
                (seed % 3 == 0).then(|| odd_json(*seed)),
            ),
            Op::Thinking(seed) => {
                store.append_thinking_level(s, ["off", "low", "high"][usize::from(seed % 3)])
            }
            Op::Model(seed) => store.append_model_change(
                s,
                ModelRef {
                    provider: "p".into(),
                    model_id: format!("m{}", seed % 4),
                },
            ),
            Op::Label(target, label) if !ids.is_empty() => store.append_label(
                s,
                &pick(&ids, *target),
                label.map(|seed| format!("l{}", seed % 3)).as_deref(),
            ),
            Op::Name(seed) => store.append_session_info(s, &text(*seed)),
            Op::Compaction(target) if !ids.is_empty() => store.append_compaction(
                s,
                CompactionEntry {
                    summary: "sum".into(),
                    first_kept_entry_id: Some(pick(&ids, *target)),
                    tokens_before: 10,
                    details: None,
                    from_hook: Some(false),
                    usage: None,
                    system_message: None,
                },
            ),
            Op::BranchSummary(target) if !ids.is_empty() => store.branch_with_summary(
                s,
                Some(&pick(&ids, *target)),
                "branch".into(),
                None,
                None,
            ),
            Op::Branch(target) if !ids.is_empty() => {
                store.branch(s, &pick(&ids, *target)).unwrap();
                continue;
            }
            Op::Reset => {
                store.reset_leaf(s).unwrap();
                continue;
            }
            Op::Label(..) | Op::Compaction(_) | Op::BranchSummary(_) | Op::Branch(_) => continue,
        };
        ids.push(stored.unwrap().entry.id.unwrap());
    }
    (session, ids)
}

fn entry_line(id: &str, parent: Option<&str>, kind: u8, ts: u32) -> String {
    let parent = parent.map_or_else(|| "null".to_owned(), |p| format!("\"{p}\""));
    let ts = format!("2026-01-01T00:{:02}:{:02}.000Z", (ts / 60) % 60, ts % 60);
    match kind % 4 {
        0 => format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"{ts}","message":{{"role":"user","content":"u{id}","timestamp":1}}}}"#
        ),
        1 => format!(
            r#"{{"type":"label","id":"{id}","parentId":{parent},"timestamp":"{ts}","targetId":"{id}","label":"x"}}"#
        ),
        2 => format!(
            r#"{{"type":"frobnicate","id":"{id}","parentId":{parent},"timestamp":"{ts}","n":1.50}}"#
        ),
        _ => format!(
            r#"{{"type":"custom_message","customType":"c","content":"c{id}","display":true,"id":"{id}","parentId":{parent},"timestamp":"{ts}"}}"#
        ),
    }
}

#[derive(Debug, Clone)]
enum RawLine {
    Entry {
        id: u8,
        parent: Option<u8>,
        kind: u8,
        ts: u8,
    },
    Junk(u8),
}

fn raw_line() -> impl Strategy<Value = RawLine> {
    prop_oneof![
        8 => (0u8..12, proptest::option::of(0u8..14), any::<u8>(), any::<u8>())
            .prop_map(|(id, parent, kind, ts)| RawLine::Entry { id, parent, kind, ts }),
        1 => any::<u8>().prop_map(RawLine::Junk),
    ]
}

fn raw_file(lines: &[RawLine]) -> Vec<u8> {
    let mut out = String::from(
        r#"{"type":"session","version":3,"id":"raw","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
    );
    out.push('\n');
    for line in lines {
        match line {
            RawLine::Entry {
                id,
                parent,
                kind,
                ts,
            } => {
                let parent = parent.map(|p| format!("e{p:07}"));
                out.push_str(&entry_line(
                    &format!("e{id:07}"),
                    parent.as_deref(),
                    *kind,
                    u32::from(*ts),
                ));
            }
            RawLine::Junk(seed) => out.push_str(
                [
                    "",
                    "  ",
                    "null",
                    "[1]",
                    "42",
                    "{\"no\":\"type\"}",
                    "{\"type\":\"mess",
                    "garbage",
                ][usize::from(seed % 8)],
            ),
        }
        out.push('\n');
    }
    out.into_bytes()
}

proptest! {
    #![proptest_config(Config { cases: 48, ..Config::default() })]

    #[test]
    fn random_sessions_round_trip_import_export_import_unchanged(ops in proptest::collection::vec(op(), 1..40)) {
        let store = memory_store(1);
        let (session, ids) = build(&store, &ops);
        let mut exported = Vec::new();
        let summary = store.export_jsonl(&session, &mut exported).unwrap();
        // Into another database: the same bytes come back out.
        let other = memory_store(2);
        let imported = import_bytes(&other, &exported, ImportMode::Merge).unwrap();
        prop_assert!(imported.skipped.is_empty());
        prop_assert_eq!(imported.report.session.clone(), session.clone());
        let again = export(&other, &session);
        prop_assert_eq!(&again, &exported);
        // The same tree, labels, name and contexts.
        prop_assert_eq!(tree_value(&other, &session), tree_value(&store, &session));
        prop_assert_eq!(other.session(&session).unwrap().name, store.session(&session).unwrap().name);
        for id in &ids {
            let at = LeafSelector::Entry(id.clone());
            prop_assert_eq!(context_value(&other, &session, &at), context_value(&store, &session, &at));
        }
        // The leaf: ours when the export could write it last, else the last line's.
        let expected_leaf = if summary.leaf_last || store.leaf(&session).unwrap().map(|e| e.entry.id) == ids.last().cloned().map(Some) {
            leaf_value(&store, &session)
        } else {
            ids.last().map_or(Value::Null, |id| Value::from(id.as_str()))
        };
        if !ids.is_empty() {
            prop_assert_eq!(leaf_value(&other, &session), expected_leaf);
        }
        // Back into the original: nothing new.
        let back = import_bytes(&store, &exported, ImportMode::Merge).unwrap();
        prop_assert_eq!(back.report.status, ImportStatus::Unchanged);
        prop_assert_eq!(export(&store, &session), exported);
    }

    #[test]
    fn random_raw_files_export_as_the_source_minus_the_reported_lines(lines in proptest::collection::vec(raw_line(), 0..40)) {
        let source = raw_file(&lines);
        let store = memory_store(3);
        let imported = import_bytes(&store, &source, ImportMode::Merge).unwrap();
        let reported: BTreeSet<usize> = imported.skipped.iter().map(|line| line.line).collect();
        let exported = export(&store, &imported.report.session);
        prop_assert_eq!(&exported, &minus_reported(&source, &reported));
        // Trees with duplicates, cycles and orphans rebuild without hanging.
        tree_value(&store, &imported.report.session);
        context_value(&store, &imported.report.session, &LeafSelector::Current);
        let again = import_bytes(&store, &exported, ImportMode::Merge).unwrap();
        prop_assert_eq!(again.report.status, ImportStatus::Unchanged);
        let other = memory_store(4);
        let copy = import_bytes(&other, &exported, ImportMode::Merge).unwrap();
        prop_assert_eq!(export(&other, &copy.report.session), exported);
        prop_assert_eq!(tree_value(&other, &copy.report.session), tree_value(&store, &imported.report.session));
    }

    #[test]
    fn reimport_after_either_side_appended_merges_by_union(
        ops in proptest::collection::vec(op(), 1..25),
        ours in proptest::collection::vec(op(), 0..6),
        theirs in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
    ) {
        let store = memory_store(5);
        let (session, ids) = build(&store, &ops);
        let file = export(&store, &session);
        let before = store.session(&session).unwrap().entries;
        // Our side appends after the export.
        let mut our_added = 0;
        for op in &ours {
            if let Op::User(seed) = op {
                store.append_message(&session, AgentMessage::from_value(json!({"role": "user", "content": text(*seed), "timestamp": 2}))).unwrap();
                our_added += 1;
            }
        }
        let leaf_before = leaf_value(&store, &session);
        // Their side appends new lines to the file (fresh ids, parents among known ids).
        let mut grown = file.clone();
        let mut known: Vec<String> = ids.iter().map(ToString::to_string).collect();
        for (idx, (parent, kind)) in theirs.iter().enumerate() {
            let id = format!("f{idx:07}");
            let parent = (!known.is_empty()).then(|| known[parent % known.len()].clone());
            grown.extend_from_slice(entry_line(&id, parent.as_deref(), *kind % 2 * 3, 3000 + idx as u32).as_bytes());
            grown.push(b'\n');
            known.push(id);
        }
        let merged = import_bytes(&store, &grown, ImportMode::Merge).unwrap();
        let total = before + our_added + theirs.len() as i64;
        prop_assert_eq!(merged.report.entries, total);
        prop_assert_eq!(merged.report.added, theirs.len() as u64);
        if theirs.is_empty() {
            prop_assert_eq!(merged.report.status, ImportStatus::Unchanged);
            prop_assert_eq!(leaf_value(&store, &session), leaf_before);
        } else {
            prop_assert_eq!(merged.report.status, ImportStatus::Updated);
            prop_assert_eq!(leaf_value(&store, &session), Value::from(format!("f{:07}", theirs.len() - 1)));
        }
        // Every line of the grown file is now stored; importing it again changes nothing.
        let exported = export(&store, &session);
        let stored: BTreeSet<&[u8]> = exported.split(|&b| b == b'\n').collect();
        for line in grown.split(|&b| b == b'\n') {
            prop_assert!(stored.contains(line));
        }
        let again = import_bytes(&store, &grown, ImportMode::Merge).unwrap();
        prop_assert_eq!(again.report.status, ImportStatus::Unchanged);
        // A line that changes a stored entry refuses the whole file and stores nothing.
        if let Some(first) = ids.first() {
            let text = String::from_utf8(grown.clone()).unwrap();
            let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
            let target = lines.iter().position(|line| line.contains(&format!("\"id\":\"{first}\""))).unwrap();
            lines[target] = lines[target].replacen("\"timestamp\":\"", "\"timestamp\":\"X", 1);
            lines.push(entry_line("zzzzzzzz", None, 0, 1));
            let changed = format!("{}\n", lines.join("\n"));
            let refused = import_bytes(&store, changed.as_bytes(), ImportMode::Merge).unwrap();
            prop_assert_eq!(refused.report.status, ImportStatus::Refused);
            prop_assert_eq!(refused.report.conflict.unwrap().id, first.clone());
            prop_assert_eq!(export(&store, &session), exported);
        }
    }
}

#[derive(Debug, Clone)]
enum Damage {
    Flip(usize, u8),
    Delete(usize, usize),
    Insert(usize, u8),
    Truncate(usize),
    Duplicate(usize, usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, bits)| Damage::Flip(at, bits)),
        (any::<usize>(), 1usize..40).prop_map(|(at, len)| Damage::Delete(at, len)),
        (
            any::<usize>(),
            prop_oneof![
                Just(b'\n'),
                Just(b'{'),
                Just(b'"'),
                Just(b'\\'),
                Just(b'\r'),
                Just(0xff),
                Just(b'['),
                Just(b'}'),
                any::<u8>()
            ]
        )
            .prop_map(|(at, byte)| Damage::Insert(at, byte)),
        any::<usize>().prop_map(Damage::Truncate),
        (any::<usize>(), 1usize..400).prop_map(|(at, len)| Damage::Duplicate(at, len)),
    ]
}

fn apply(bytes: &mut Vec<u8>, damage: &Damage) {
    if bytes.is_empty() {
        return;
    }
    let at = |pos: usize, len: usize| pos % len;
    match damage {
        Damage::Flip(pos, bits) => {
            let idx = at(*pos, bytes.len());
            bytes[idx] ^= bits | 1;
        }
        Damage::Delete(pos, len) => {
            let start = at(*pos, bytes.len());
            let end = (start + len).min(bytes.len());
            bytes.drain(start..end);
        }
        Damage::Insert(pos, byte) => {
            let idx = at(*pos, bytes.len() + 1);
            bytes.insert(idx, *byte);
        }
        Damage::Truncate(pos) => {
            let idx = at(*pos, bytes.len());
            bytes.truncate(idx);
        }
        Damage::Duplicate(pos, len) => {
            let start = at(*pos, bytes.len());
            let end = (start + len).min(bytes.len());
            let copy = bytes[start..end].to_vec();
            bytes.splice(end..end, copy);
        }
    }
}

const DAMAGED_FIXTURES: &[&str] = &[
    "basic-chat",
    "all-entry-types",
    "branches",
    "labels",
    "unicode-escapes",
    "legacy-v1",
    "legacy-v2",
    "compaction-twice",
    "multi-root",
    "bom-prefixed",
];

proptest! {
    #![proptest_config(Config { cases: 160, ..Config::default() })]

    #[test]
    fn random_damage_never_panics_never_hangs_and_always_reports(
        fixture in 0..DAMAGED_FIXTURES.len(),
        damages in proptest::collection::vec(damage(), 1..6),
    ) {
        let name = DAMAGED_FIXTURES[fixture];
        let mut bytes = std::fs::read(fixtures::dir().join(format!("{name}.jsonl"))).unwrap();
        for damage in &damages {
            apply(&mut bytes, damage);
        }
        // On a thread with a deadline, so that a hang fails the test instead of stalling it
        // (a panic on that thread arrives as a closed channel).
        let (done, outcome) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(check_damaged(&bytes));
        });
        match outcome.recv_timeout(Duration::from_secs(60)) {
            Ok(result) => prop_assert!(result.is_ok(), "{name}: {}", result.unwrap_err()),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                prop_assert!(false, "{name}: no answer within 60 s after {damages:?}")
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                prop_assert!(false, "{name}: panicked after {damages:?}")
            }
        }
    }
}

/// Reads, imports, rebuilds, exports and re-imports damaged bytes; says what went wrong.
fn check_damaged(bytes: &[u8]) -> Result<(), String> {
    let started = Instant::now();
    let store = memory_store(7);
    match SessionReader::new(bytes) {
        Err(JsonlError::NoHeader(reason)) => {
            if reason.to_string().is_empty() {
                return Err("a refusal without a reason".into());
            }
        }
        // A damaged `version` (a digit changed) refuses the file, naming the version.
        Err(JsonlError::UnsupportedVersion { version, .. }) => {
            if version.is_empty() {
                return Err("a version refusal without the version".into());
            }
        }
        Err(other) => return Err(format!("unexpected error {other}")),
        Ok(reader) => {
            let migration = reader.migration();
            drop(reader);
            let imported =
                import_bytes(&store, bytes, ImportMode::Merge).map_err(|e| e.to_string())?;
            let session = imported.report.session.clone();
            if imported.report.status != ImportStatus::Imported {
                return Err(format!("status {:?}", imported.report.status));
            }
            let exported = export(&store, &session);
            if migration == Migration::None {
                let reported: BTreeSet<usize> =
                    imported.skipped.iter().map(|line| line.line).collect();
                if exported != minus_reported(bytes, &reported) {
                    return Err("the export is not the source minus the reported lines".into());
                }
            }
            // Whatever came in rebuilds, exports and re-imports.
            tree_value(&store, &session);
            context_value(&store, &session, &LeafSelector::Current);
            let again =
                import_bytes(&store, &exported, ImportMode::Merge).map_err(|e| e.to_string())?;
            if again.report.status != ImportStatus::Unchanged {
                return Err(format!("re-import: {:?}", again.report.status));
            }
            let quarantined = store.quarantine(&session).map_err(|e| e.to_string())?.len();
            if quarantined != imported.skipped.len() {
                return Err(format!(
                    "{quarantined} quarantined, {} reported",
                    imported.skipped.len()
                ));
            }
        }
    }
    if started.elapsed() > Duration::from_secs(30) {
        return Err(format!("took {:?}", started.elapsed()));
    }
    Ok(())
}
