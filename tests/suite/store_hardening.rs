//! Issue 19, items 5, 6 and 10, through the real binary and real files: a clean command leaves
//! every entry in `pi.db` itself (checkpoint on close and after bulk writes), a `-wal` deleted
//! under a live process is detected and its entries rescued; `db check` never takes the write
//! lock and a bulk import never holds it for long; a damaged database never loses a
//! conversation silently (rescued to `unsaved/`, exit 1, a `session_unsaved` event) and, once
//! `db check` called it damaged, is not written to until repaired.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use pi::store::ListScope;
use serde_json::{Value, json};

use crate::common::agent::models_json;
use crate::common::provider::{MockResponse, ProviderServer, sse};
use crate::common::{TestEnv, bulk_session_file as session_file, open_store, succeeded};

fn configure(env: &TestEnv, server: &ProviderServer) {
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json(&server.url(), 128_000),
    )
    .unwrap();
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"retry": {"baseDelayMs": 10, "maxRetries": 1, "provider": {"maxRetries": 0}}}"#,
    )
    .unwrap();
}

fn wal_of(db: &Path) -> PathBuf {
    PathBuf::from(format!("{}-wal", db.display()))
}

fn wal_size(db: &Path) -> u64 {
    std::fs::metadata(wal_of(db)).map_or(0, |meta| meta.len())
}

/// Counts the sessions and entries of a database file opened on its own.
fn sessions_and_entries(db: &Path) -> (usize, i64) {
    let store = open_store(db, 3);
    let sessions = store.list(&ListScope::All).unwrap();
    let entries = sessions.iter().map(|session| session.entries).sum();
    (sessions.len(), entries)
}

/// Copies `db` alone (no `-wal`, no `-shm`) into a fresh directory.
fn copy_alone(db: &Path, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let copy = dir.join("alone.db");
    std::fs::copy(db, &copy).unwrap();
    copy
}

// ----- item 5: the data lives in pi.db -------------------------------------------------------

#[test]
fn after_a_clean_command_pi_db_alone_holds_every_entry() {
    let env = TestEnv::new();
    let file = env.dir.path().join("bulk.jsonl");
    session_file(&file, "bulk-session", 600, 200);
    succeeded(env.pi().args(["import", file.to_str().unwrap()]));
    let copy = copy_alone(&env.db(), &env.dir.path().join("copy1"));
    assert_eq!(sessions_and_entries(&copy), (1, 600));
    assert_eq!(wal_size(&env.db()), 0, "the import left a WAL");

    // A print-mode run: its conversation is in pi.db once pi has ended.
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Stored."))]);
    configure(&env, &server);
    let output = succeeded(env.pi().args(["-p", "remember this"]));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Stored.\n");
    let copy = copy_alone(&env.db(), &env.dir.path().join("copy2"));
    let (sessions, entries) = sessions_and_entries(&copy);
    assert_eq!((sessions, entries), sessions_and_entries(&env.db()));
    assert_eq!(sessions, 2);
    assert!(entries >= 602, "{entries}");
    assert_eq!(wal_size(&env.db()), 0, "pi -p left a WAL");
}

#[test]
fn a_bulk_import_leaves_no_large_wal_while_another_process_has_the_database_open() {
    let env = TestEnv::new();
    // Another process keeps the database open (as a live REPL does), so that the import's
    // close is not the last one, which SQLite would checkpoint anyway.
    succeeded(env.pi().args(["sessions", "list", "--all"]));
    let file = env.dir.path().join("bulk.jsonl");
    session_file(&file, "bulk-session", 4000, 600);
    let file_size = std::fs::metadata(&file).unwrap().len();
    let holder = rusqlite::Connection::open(env.db()).unwrap();
    let _: i64 = holder
        .query_row("SELECT COUNT(*) FROM sessions", [], |row| row.get(0))
        .unwrap();
    succeeded(env.pi().args(["import", file.to_str().unwrap()]));
    let wal = wal_size(&env.db());
    eprintln!("file {file_size} bytes, WAL after the import {wal} bytes");
    assert!(
        wal < 1024 * 1024,
        "the WAL kept {wal} bytes after importing {file_size}"
    );
    let copy = copy_alone(&env.db(), &env.dir.path().join("copy"));
    assert_eq!(sessions_and_entries(&copy), (1, 4000));
    drop(holder);
}

#[test]
fn a_wal_deleted_under_a_live_process_is_reported_and_its_entries_rescued() {
    let env = TestEnv::new();
    let wal = wal_of(&env.db());
    // The tool call deletes the WAL while pi runs; the answer after it cannot be stored.
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "bash",
            &json!({"command": format!("rm -f '{}'", wal.display())}).to_string(),
        )),
        MockResponse::sse(sse::openai_text("After the deletion.")),
    ]);
    configure(&env, &server);
    let output = env.pi().args(["-p", "delete the wal"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("write-ahead log") && stderr.contains("deleted or replaced"),
        "{stderr}"
    );
    let rescued = rescued_files(&env);
    assert_eq!(rescued.len(), 1, "{stderr}");
    let text = std::fs::read_to_string(&rescued[0]).unwrap();
    assert!(text.contains("After the deletion."), "{text}");
    assert!(text.contains("delete the wal"), "{text}");
    // The rescue file adds the conversation back into a sound database.
    let fresh = TestEnv::new();
    succeeded(fresh.pi().args(["import", rescued[0].to_str().unwrap()]));
    let store = fresh.store();
    let sessions = store.list(&ListScope::All).unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        sessions[0].messages, 5,
        "system prompt, question, tool call, tool result, answer"
    );
}

// ----- item 10: a damaged database never loses a conversation silently ------------------------

fn rescued_files(env: &TestEnv) -> Vec<PathBuf> {
    let dir = env.agent_dir.join("unsaved");
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries.map(|entry| entry.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    for file in &files {
        assert!(
            std::fs::metadata(file).unwrap().len() > 0,
            "{} is empty",
            file.display()
        );
    }
    files
}

/// A database whose `sessions` table and its id index are overwritten with garbage: it opens,
/// and storing a session fails with "database disk image is malformed".
fn damaged_database(env: &TestEnv) -> Vec<u8> {
    {
        let store = env.store();
        let session = store
            .create_session(&pi::store::NewSession {
                cwd: "/damaged".into(),
                parent_session: None,
            })
            .unwrap()
            .id;
        store.append_session_info(&session, "before").unwrap();
    }
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    let roots: Vec<i64> = conn
        .prepare("SELECT rootpage FROM sqlite_schema WHERE tbl_name = 'sessions' AND rootpage > 0")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    drop(conn);
    let mut bytes = std::fs::read(env.db()).unwrap();
    for root in roots {
        let at = usize::try_from(root - 1).unwrap() * 4096;
        for byte in &mut bytes[at..at + 4096] {
            *byte = 0xA5;
        }
    }
    std::fs::write(env.db(), &bytes).unwrap();
    bytes
}

#[test]
fn a_damaged_database_rescues_the_print_mode_conversation_and_exits_1() {
    let env = TestEnv::new();
    let damaged = damaged_database(&env);
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("The answer."))]);
    configure(&env, &server);
    let output = env.pi().args(["-p", "a question"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "The answer.\n");
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("unsaved"), "{stderr}");
    let rescued = rescued_files(&env);
    assert_eq!(rescued.len(), 1, "{stderr}");
    let text = std::fs::read_to_string(&rescued[0]).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "session", "{text}");
    assert!(
        text.contains("a question") && text.contains("The answer."),
        "{text}"
    );
    // The file the notice names adds the conversation to a sound database.
    let fresh = TestEnv::new();
    succeeded(fresh.pi().args(["import", rescued[0].to_str().unwrap()]));
    let sessions = fresh.store().list(&ListScope::All).unwrap();
    assert_eq!(sessions.len(), 1);
    // The system prompt, the question, the answer.
    assert_eq!(sessions[0].messages, 3, "{text}");
    // JSON mode: the same, and a `session_unsaved` event names the file.
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Again."))]);
    configure(&env, &server);
    std::fs::write(env.db(), &damaged).unwrap();
    let output = env
        .pi()
        .args(["--mode", "json", "another question"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let events: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let unsaved: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == "session_unsaved")
        .collect();
    assert_eq!(unsaved.len(), 1, "{events:?}");
    let path = unsaved[0]["path"].as_str().expect("a rescue file");
    assert!(
        std::fs::read_to_string(path)
            .unwrap()
            .contains("another question")
    );
    assert_eq!(rescued_files(&env).len(), 2);
}

#[test]
fn an_rpc_client_gets_a_session_unsaved_event_from_a_damaged_database() {
    let env = TestEnv::new();
    damaged_database(&env);
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Via RPC."))]);
    configure(&env, &server);
    let mut child = env
        .pi_process()
        .args(["--mode", "rpc"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"type": "prompt", "message": "over rpc"})
    )
    .unwrap();
    stdin.flush().unwrap();
    // Close stdin once the answer is stored (or kept): the request was answered.
    server.wait_for_requests(1, Duration::from_secs(60));
    let start = Instant::now();
    while rescued_files(&env).is_empty() && start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    let event = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["type"] == "session_unsaved")
        .unwrap_or_else(|| panic!("no session_unsaved event: {stdout}"));
    assert!(event["entries"].as_u64().unwrap() >= 1, "{event}");
    let path = event["path"].as_str().unwrap();
    assert!(std::fs::read_to_string(path).unwrap().contains("over rpc"));
}

#[test]
fn a_database_db_check_calls_damaged_is_not_written_until_repaired() {
    let env = TestEnv::new();
    let good = {
        let store = env.store();
        let session = store
            .create_session(&pi::store::NewSession {
                cwd: "/marked".into(),
                parent_session: None,
            })
            .unwrap()
            .id;
        store.append_session_info(&session, "first").unwrap();
        drop(store);
        let conn = rusqlite::Connection::open(env.db()).unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .unwrap();
        drop(conn);
        (session, std::fs::read(env.db()).unwrap())
    };
    let (session, good_bytes) = good;
    damaged_database_in_place(&env.db(), &good_bytes);
    let damaged = std::fs::read(env.db()).unwrap();
    let output = env.pi().args(["db", "check"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let mark = PathBuf::from(format!("{}.damaged", env.db().display()));
    assert!(mark.exists(), "no damage mark: {stderr}");
    assert!(stderr.contains(".damaged"), "{stderr}");
    // Every writing command refuses in one line, and the file is left as it was.
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("unused"))]);
    configure(&env, &server);
    for args in [
        vec!["-p", "hello"],
        vec!["sessions", "rename", session.as_str(), "second"],
    ] {
        let output = env.pi().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains("found this database damaged") && stderr.contains("pi db recover"),
            "{stderr}"
        );
    }
    assert!(server.requests().is_empty(), "pi -p asked the model");
    assert_eq!(std::fs::read(env.db()).unwrap(), damaged);
    // Repaired (a backup put back): check passes and removes the mark; writes work again.
    std::fs::write(env.db(), &good_bytes).unwrap();
    succeeded(env.pi().args(["db", "check"]));
    assert!(!mark.exists());
    succeeded(
        env.pi()
            .args(["sessions", "rename", session.as_str(), "second"]),
    );
}

fn damaged_database_in_place(db: &Path, good: &[u8]) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let root: i64 = conn
        .query_row(
            "SELECT rootpage FROM sqlite_schema WHERE name = 'entries'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    drop(conn);
    let mut bytes = good.to_vec();
    let at = usize::try_from(root - 1).unwrap() * 4096;
    for byte in &mut bytes[at..at + 4096] {
        *byte = 0x5A;
    }
    std::fs::write(db, &bytes).unwrap();
}

// ----- item 6: no long hold of the write lock -----------------------------------------------

#[test]
fn db_check_never_takes_the_write_lock() {
    let env = TestEnv::new();
    let file = env.dir.path().join("bulk.jsonl");
    session_file(&file, "checked", 300, 200);
    succeeded(env.pi().args(["import", file.to_str().unwrap()]));
    // Another process holds the write lock for the whole check.
    let holder = rusqlite::Connection::open(env.db()).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = Instant::now();
    let output = succeeded(
        env.pi()
            .env("PI_BUSY_TIMEOUT_MS", "200")
            .args(["db", "check"]),
    );
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("ok:"));
    eprintln!("db check beside a held write lock: {:?}", started.elapsed());
    holder.execute_batch("ROLLBACK").unwrap();
    // Nothing left beside the database.
    let left: Vec<String> = std::fs::read_dir(&env.agent_dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("pi-check"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Waits until a `staged_sessions` row exists (a staged import is under way); false when the
/// child ended first.
fn wait_for_staging(db: &Path, child: &mut std::process::Child) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        if let Ok(conn) =
            rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        {
            let staged: rusqlite::Result<i64> =
                conn.query_row("SELECT COUNT(*) FROM staged_sessions", [], |row| row.get(0));
            if staged.is_ok_and(|count| count > 0) {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn writers_wait_at_most_about_a_second_behind_a_large_import() {
    let env = TestEnv::new();
    let small = env.dir.path().join("small.jsonl");
    session_file(&small, "renamed-meanwhile", 4, 50);
    succeeded(env.pi().args(["import", small.to_str().unwrap()]));
    let big = env.dir.path().join("big.jsonl");
    session_file(&big, "big-import", 40_000, 400);
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Meanwhile."))]);
    configure(&env, &server);

    let started = Instant::now();
    let mut import = env
        .pi_process()
        .args(["import", big.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Half a second into the import (its file read and its first steps written).
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        import.try_wait().unwrap().is_none(),
        "the import ended at once"
    );
    let mut waits = Vec::new();
    for round in 0..3 {
        let at = Instant::now();
        succeeded(env.pi().args([
            "sessions",
            "rename",
            "renamed-meanwhile",
            &format!("name {round}"),
        ]));
        waits.push(("rename", at.elapsed()));
    }
    let at = Instant::now();
    let output = succeeded(env.pi().args(["-p", "while importing"]));
    waits.push(("pi -p", at.elapsed()));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Meanwhile.\n");
    // The import was still running through all of it (otherwise this proves nothing).
    let still_running = import.try_wait().unwrap().is_none();
    let status = import.wait().unwrap();
    let total = started.elapsed();
    eprintln!("import of 40,000 entries: {total:?}; writers meanwhile: {waits:?}");
    assert!(status.success());
    assert!(
        still_running,
        "the import ended before the writers did ({total:?})"
    );
    for (what, wait) in &waits {
        // A command's own start-up and work included (debug build, shared machine); a rename is
        // one write transaction, `pi -p` several (the session, the lease, the answer, the
        // release), each of which may wait for one step of the import.
        let bound = if *what == "rename" { 2 } else { 4 };
        assert!(*wait < Duration::from_secs(bound), "{what} took {wait:?}");
    }
    let store = env.store();
    let sessions = store.list(&ListScope::All).unwrap();
    assert_eq!(sessions.len(), 3);
    let big_session = sessions
        .iter()
        .find(|s| s.id.as_str() == "big-import")
        .unwrap();
    assert_eq!(big_session.entries, 40_000);
    let mut exported = Vec::new();
    store.export_jsonl(&big_session.id, &mut exported).unwrap();
    assert_eq!(exported, std::fs::read(&big).unwrap());
}

#[test]
fn a_killed_staged_import_is_invisible_and_removed_by_the_next_import() {
    let env = TestEnv::new();
    let big = env.dir.path().join("big.jsonl");
    // More lines than one step takes (`STAGE_STEP_ENTRIES`): staged however fast the machine.
    let entries = pi::store::interchange::STAGE_STEP_ENTRIES + 1_000;
    session_file(&big, "killed-import", entries, 100);
    let mut import = env
        .pi_process()
        .args(["import", big.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_for_staging(&env.db(), &mut import),
        "the import did not stage"
    );
    import.kill().unwrap();
    import.wait().unwrap();
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    let staged: i64 = conn
        .query_row("SELECT COUNT(*) FROM staged_sessions", [], |row| row.get(0))
        .unwrap();
    assert_eq!(staged, 1, "the kill did not land while staging");
    drop(conn);
    // Invisible: not listed, not found, not searched; the database is sound.
    let listed = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    assert_eq!(crate::common::stdout_json(&listed), json!([]));
    let shown = env
        .pi()
        .args(["sessions", "show", "killed-import"])
        .output()
        .unwrap();
    assert_eq!(shown.status.code(), Some(1));
    let found = succeeded(
        env.pi()
            .args(["sessions", "search", "--all", "--json", "question"]),
    );
    assert_eq!(crate::common::stdout_json(&found), json!([]), "{found:?}");
    succeeded(env.pi().args(["db", "check"]));
    // The next import removes the remnant and stores the whole file.
    let report = succeeded(env.pi().args(["import", "--json", big.to_str().unwrap()]));
    let line: Value = serde_json::from_str(
        String::from_utf8_lossy(&report.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(line["status"], "imported", "{line}");
    assert_eq!(line["entries"], entries);
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    let (sessions, staged): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM staged_sessions)",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!((sessions, staged), (1, 0));
    succeeded(env.pi().args(["db", "check"]));
}

#[test]
fn migration_0007_adds_the_staging_table_and_keeps_stored_sessions() {
    use pi::store::testing::migrate_to;
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    let mut conn = rusqlite::Connection::open(env.db()).unwrap();
    migrate_to(&mut conn, "v6", 6).unwrap();
    conn.execute(
        "INSERT INTO sessions (sid, id, cwd, created_at, header) VALUES (1, 's6', '/six', '2026-01-01T00:00:00.000Z', ?1)",
        [br#"{"type":"session","version":3,"id":"s6","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/six"}"#.as_slice()],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO session_stats (sid, last_activity) VALUES (1, '2026-01-01T00:00:00.000Z')",
        [],
    )
    .unwrap();
    conn.execute("INSERT INTO leaf (sid, seq) VALUES (1, NULL)", [])
        .unwrap();
    assert!(
        conn.prepare("SELECT * FROM staged_sessions").is_err(),
        "no table before 0007"
    );
    migrate_to(&mut conn, "v6", 7).unwrap();
    let staged: i64 = conn
        .query_row("SELECT COUNT(*) FROM staged_sessions", [], |row| row.get(0))
        .unwrap();
    assert_eq!(staged, 0);
    drop(conn);
    let store = env.store();
    let sessions = store.list(&ListScope::All).unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].id.as_str(), "s6");
}

#[test]
fn a_repl_on_a_damaged_database_rescues_the_conversation_at_quit_and_exits_1() {
    let env = TestEnv::new();
    damaged_database(&env);
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text(
        "Answered in the REPL.",
    ))]);
    configure(&env, &server);
    let tmux = crate::common::tmux::Tmux::start(&env, "damaged", &[], &[]);
    tmux.wait_for_prompt();
    tmux.line("a repl question");
    tmux.wait_for("Answered in the REPL.");
    tmux.wait_for("could not save to the session database");
    tmux.wait_for_prompt();
    tmux.line("/quit");
    assert_eq!(tmux.wait_for_exit(), 1);
    let rescued = rescued_files(&env);
    assert_eq!(rescued.len(), 1);
    let text = std::fs::read_to_string(&rescued[0]).unwrap();
    assert!(
        text.contains("a repl question") && text.contains("Answered in the REPL."),
        "{text}"
    );
}

/// `pi ARGS` under a file-size limit of `bytes` (`ulimit -f`, SIGXFSZ ignored: writes past it
/// fail with EFBIG, as on a full disk), in the test environment.
fn pi_with_file_size_limit(env: &TestEnv, bytes: u64, args: &[&str]) -> std::process::Output {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -S -f {}; exec \"$0\" \"$@\"",
            bytes / 512
        ))
        .arg(assert_cmd::cargo::cargo_bin("pi"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &env.home)
        .env("PI_CODING_AGENT_DIR", &env.agent_dir)
        .env(
            "PI_TEST_CLOCK",
            crate::common::TEST_CLOCK_START_MS.to_string(),
        )
        .env("PI_TEST_SEED", "7")
        .env("NO_COLOR", "1")
        .current_dir(&env.workspace)
        .output()
        .unwrap()
}

#[test]
fn a_full_disk_rescues_the_print_mode_conversation_and_exits_1() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text(
        "Answer on a full disk.",
    ))]);
    configure(&env, &server);
    // The database exists (created without the limit); the new session's first write needs
    // more WAL than the limit allows, its rescue file much less.
    succeeded(env.pi().args(["sessions", "list", "--all"]));
    let output = pi_with_file_size_limit(&env, 32 * 1024, &["-p", "full disk question"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "Answer on a full disk.\n",
        "{stderr}"
    );
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("file-size limit"), "{stderr}");
    let rescued = rescued_files(&env);
    assert_eq!(rescued.len(), 1, "{stderr}");
    let text = std::fs::read_to_string(&rescued[0]).unwrap();
    assert!(
        text.contains("full disk question") && text.contains("Answer on a full disk."),
        "{text}"
    );
    // Room again: `pi import` of the file stores the conversation in the same database.
    succeeded(env.pi().args(["import", rescued[0].to_str().unwrap()]));
    let sessions = env.store().list(&ListScope::All).unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].messages, 3);
    succeeded(env.pi().args(["db", "check"]));
}

#[test]
fn db_recover_copies_what_a_damaged_database_can_read_and_the_copy_replaces_it() {
    let env = TestEnv::new();
    let mut exports = Vec::new();
    for n in 0..3 {
        let file = env.dir.path().join(format!("s{n}.jsonl"));
        session_file(&file, &format!("recover-{n}"), 40 + n, 300);
        succeeded(env.pi().args(["import", file.to_str().unwrap()]));
        exports.push(std::fs::read(&file).unwrap());
    }
    // Damage the full-text index's data: integrity fails, the entries are intact.
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    let root: i64 = conn
        .query_row(
            "SELECT rootpage FROM sqlite_schema WHERE name = 'search_fts_data'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    drop(conn);
    let mut bytes = std::fs::read(env.db()).unwrap();
    let at = usize::try_from(root - 1).unwrap() * 4096;
    bytes[at..at + 4096].fill(0x33);
    std::fs::write(env.db(), &bytes).unwrap();
    let check = env.pi().args(["db", "check"]).output().unwrap();
    assert_eq!(check.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(stderr.contains("db recover"), "{stderr}");

    let recovered = env.dir.path().join("recovered.db");
    let output = succeeded(
        env.pi()
            .args(["db", "recover", recovered.to_str().unwrap()]),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("3 sessions recovered whole, 0 partly, 0 lost"),
        "{stdout}"
    );
    // A second recover to the same name is refused; the damaged file is as it was.
    let again = env
        .pi()
        .args(["db", "recover", recovered.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(std::fs::read(env.db()).unwrap(), bytes);
    succeeded(
        env.pi()
            .args(["--db", recovered.to_str().unwrap(), "db", "check"]),
    );
    // Moved into place: the check passes, removes the mark, and pi writes again.
    std::fs::rename(&recovered, env.db()).unwrap();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", env.db().display()));
    }
    succeeded(env.pi().args(["db", "check"]));
    assert!(!PathBuf::from(format!("{}.damaged", env.db().display())).exists());
    for (n, expected) in exports.iter().enumerate() {
        let exported = succeeded(
            env.pi()
                .args(["export", "--jsonl", &format!("recover-{n}")]),
        );
        assert_eq!(&exported.stdout, expected, "session {n}");
    }
    succeeded(
        env.pi()
            .args(["sessions", "rename", "recover-0", "after recovery"]),
    );
    let found = succeeded(
        env.pi()
            .args(["sessions", "search", "--all", "--json", "question"]),
    );
    assert!(
        !crate::common::stdout_json(&found)
            .as_array()
            .unwrap()
            .is_empty(),
        "the copy's search index works"
    );
}
