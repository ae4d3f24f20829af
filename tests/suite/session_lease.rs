//! Writer leases held by live sessions (issue 10, the session half), with real binaries: two
//! REPLs on one session (tmux) — the second gets the choice: read-only refuses a prompt, fork
//! continues in a new session with `parentSession`, take over waits while the first is alive
//! and fresh and succeeds at once after it is SIGKILLed; a SIGSTOPped REPL is taken over once
//! stale and, resumed, cannot write (its entries stay unsaved and it says so); print, JSON and
//! RPC modes on a held session exit 1 with one line, RPC `switch_session` to one errors; and a
//! REPL whose appends fail while another process holds SQLite's write lock keeps the entries,
//! shows them in `/session` and `/export`, and writes them in order once the lock is gone.
//!
//! Every wait is bounded (the tmux helper's 60 s); each process has its own `PI_TEST_SEED`
//! (equal seeds would draw equal session ids).

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pi::model::entry::EntryKind;
use pi::model::ids::SessionId;
use pi::store::{LeaseAttempt, LeaseConfig, LeaseHolder, ListScope, SessionStore};
use serde_json::{Value, json};

use crate::common::agent::models_json;
use crate::common::provider::{MockResponse, ProviderServer, sse};
use crate::common::tmux::Tmux;
use crate::common::{TestEnv, succeeded};

const WAIT: Duration = Duration::from_secs(60);

/// Writes `models.json` (the scripted provider) and `settings.json` (fast retries plus
/// `extra`, a JSON object body fragment such as `"lease": {…}`).
fn configure(env: &TestEnv, server: &ProviderServer, extra: &str) {
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json(&server.url(), 128_000),
    )
    .unwrap();
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(", {extra}")
    };
    std::fs::write(
        env.agent_dir.join("settings.json"),
        format!(r#"{{"retry": {{"baseDelayMs": 10, "provider": {{"maxRetries": 0}}}}{extra}}}"#),
    )
    .unwrap();
}

/// Stores one exchange with `pi -p` and returns its session.
fn one_session(env: &TestEnv) -> SessionId {
    succeeded(env.pi().args(["-p", "hello"]));
    let store = env.store();
    let sessions = store.list(&ListScope::All).unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        store.lease_holder(&sessions[0].id).unwrap(),
        None,
        "print mode released its lease"
    );
    sessions[0].id.clone()
}

/// Waits until the session's lease is held by a process other than `not`.
fn wait_for_holder(store: &SessionStore, session: &SessionId, not: Option<u32>) -> LeaseHolder {
    let start = Instant::now();
    loop {
        if let Some(holder) = store.lease_holder(session).unwrap()
            && Some(holder.pid) != not
        {
            return holder;
        }
        assert!(start.elapsed() < WAIT, "no new lease holder");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGSTOPs `process` at a moment it holds no SQLite write lock (its heartbeat writes every
/// 100 ms; a process stopped inside a transaction blocks every writer, a documented limit):
/// stop, probe the lock with `BEGIN IMMEDIATE` (no waiting), resume and retry if it was held.
fn stop_outside_a_transaction(process: Pid, db: &std::path::Path) {
    let probe = rusqlite::Connection::open(db).unwrap();
    probe.busy_timeout(Duration::ZERO).unwrap();
    let start = Instant::now();
    loop {
        kill(process, Signal::SIGSTOP).unwrap();
        if probe.execute_batch("BEGIN IMMEDIATE; ROLLBACK;").is_ok() {
            return;
        }
        kill(process, Signal::SIGCONT).unwrap();
        assert!(start.elapsed() < WAIT, "the lock was always held");
        std::thread::sleep(Duration::from_millis(7));
    }
}

fn pid(holder: &LeaseHolder) -> Pid {
    Pid::from_raw(i32::try_from(holder.pid).unwrap())
}

fn texts(store: &SessionStore, session: &SessionId) -> Vec<String> {
    store
        .entries(session)
        .unwrap()
        .iter()
        .filter_map(|stored| match &stored.entry.kind {
            EntryKind::Message(message) => Some(format!("{message:?}")),
            EntryKind::SessionInfo { name } => Some(format!("name {name:?}")),
            _ => None,
        })
        .collect()
}

#[test]
fn a_second_repl_gets_the_choice_read_only_fork_or_take_over_after_the_first_is_killed() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("First answer.")),
        MockResponse::sse(sse::openai_text("Forked answer.")),
        MockResponse::sse(sse::openai_text("Taken over answer.")),
    ]);
    configure(&env, &server, "");
    let session = one_session(&env);
    let store = env.store();
    let before = texts(&store, &session);

    let first = Tmux::start(
        &env,
        "first",
        &["--session", session.as_str()],
        &[("PI_TEST_SEED", "101")],
    );
    first.wait_for("First answer.");
    first.wait_for_prompt();
    let holder = wait_for_holder(&store, &session, None);
    assert_eq!(holder.owner, "pi (interactive)");
    assert_eq!(holder.owner_alive_on_this_host, Some(true));

    // Read-only: the history is there, a prompt is refused with the ways on.
    let second = Tmux::start(
        &env,
        "second",
        &["--session", session.as_str()],
        &[("PI_TEST_SEED", "102")],
    );
    let screen = second.wait_for("[1] read-only  [2] fork into a new session  [3] take over");
    assert!(
        screen.contains(&format!("Session {session} is being written by another pi"))
            && screen.contains(&format!("pid {}", holder.pid)),
        "{screen}"
    );
    second.line("1");
    second.wait_for("This session is read-only here");
    second.wait_for_prompt();
    assert!(second.screen().contains("First answer."), "history shown");
    second.line("may I write here?");
    let screen = second.wait_for_count("This session is read-only here", 2);
    assert!(
        screen.contains("/clone") && screen.contains("/takeover"),
        "{screen}"
    );
    second.line("/quit");
    assert_eq!(second.wait_for_exit(), 0);
    assert_eq!(
        server.requests().len(),
        1,
        "the refused prompt sent nothing"
    );
    assert_eq!(texts(&store, &session), before, "read-only wrote nothing");

    // Fork: a new session with parentSession, continued there.
    let third = Tmux::start(
        &env,
        "third",
        &["--session", session.as_str()],
        &[("PI_TEST_SEED", "103")],
    );
    third.wait_for("[2] fork");
    third.line("2");
    third.wait_for("into new session");
    third.wait_for_prompt();
    third.line("continue in the fork");
    third.wait_for("Forked answer.");
    third.wait_for_prompt();
    third.line("/quit");
    assert_eq!(third.wait_for_exit(), 0);
    let sessions = store.list(&ListScope::All).unwrap();
    let fork = sessions
        .iter()
        .find(|summary| summary.id != session)
        .expect("the fork");
    let header = String::from_utf8(store.header_bytes(&fork.id).unwrap()).unwrap();
    assert!(
        header.contains(&format!("\"parentSession\":\"{session}\"")),
        "{header}"
    );
    let forked = texts(&store, &fork.id);
    assert!(forked.starts_with(&before) && forked.len() == before.len() + 2);
    assert!(forked.last().unwrap().contains("Forked answer."));
    assert_eq!(store.lease_holder(&fork.id).unwrap(), None, "released");
    assert_eq!(texts(&store, &session), before);

    // Take over: waits while the first is alive and fresh (Ctrl+C asks again), then goes
    // ahead at once when the first is killed.
    let fourth = Tmux::start(
        &env,
        "fourth",
        &["--session", session.as_str()],
        &[("PI_TEST_SEED", "104")],
    );
    fourth.wait_for(&format!(
        "[3] take over (waits for pid {} to end)",
        holder.pid
    ));
    fourth.line("3");
    // An honest wait: the holder is alive and renews its heartbeat, so no countdown.
    let screen = fourth.wait_for(&format!("Waiting for pid {} (", holder.pid));
    assert!(!screen.contains("Taking over in"), "{screen}");
    fourth.keys(&["C-c"]);
    fourth.wait_for_count("[3] take over (waits", 2);
    assert_eq!(
        store.lease_holder(&session).unwrap().map(|h| h.pid),
        Some(holder.pid),
        "refused while the first is alive and fresh"
    );
    fourth.line("3");
    fourth.wait_for_count(&format!("Waiting for pid {} (", holder.pid), 2);
    kill(pid(&holder), Signal::SIGKILL).unwrap();
    assert_ne!(first.wait_for_exit(), 0);
    let taker = wait_for_holder(&store, &session, Some(holder.pid));
    fourth.wait_for_prompt();
    fourth.line("after the take over");
    fourth.wait_for("Taken over answer.");
    fourth.wait_for_prompt();
    assert_eq!(
        store.lease_holder(&session).unwrap().map(|h| h.pid),
        Some(taker.pid)
    );
    fourth.line("/quit");
    assert_eq!(fourth.wait_for_exit(), 0);
    assert_eq!(store.lease_holder(&session).unwrap(), None, "released");
    let after = texts(&store, &session);
    assert!(after.starts_with(&before) && after.len() == before.len() + 2);
    assert!(after.last().unwrap().contains("Taken over answer."));
}

#[test]
fn a_stopped_repl_is_taken_over_once_stale_and_cannot_write_when_resumed() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("First answer.")),
        MockResponse::sse(sse::openai_text("Second writer's answer.")),
    ]);
    // Short intervals from settings.json (no environment variable).
    configure(
        &env,
        &server,
        r#""lease": {"heartbeatMs": 100, "staleMs": 600}"#,
    );
    let session = one_session(&env);
    let store = env.store();

    let first = Tmux::start(
        &env,
        "first",
        &["--session", session.as_str()],
        &[("PI_TEST_SEED", "201")],
    );
    first.wait_for_prompt();
    let holder = wait_for_holder(&store, &session, None);
    assert_eq!(
        holder.stale_after,
        Duration::from_millis(600),
        "from settings"
    );
    stop_outside_a_transaction(pid(&holder), &env.db());

    let second = Tmux::start(
        &env,
        "second",
        &["--session", session.as_str()],
        &[("PI_TEST_SEED", "202")],
    );
    second.wait_for("[3] take over");
    second.line("3");
    let taker = wait_for_holder(&store, &session, Some(holder.pid));
    second.wait_for_prompt();
    second.line("written by the second");
    second.wait_for("Second writer's answer.");
    second.wait_for_prompt();
    let written = texts(&store, &session);

    kill(pid(&holder), Signal::SIGCONT).unwrap();
    // The first notices at its next heartbeat; `/session` shows the events that came.
    let start = Instant::now();
    loop {
        first.line("/session");
        std::thread::sleep(Duration::from_millis(200));
        if first.screen().contains("Writer: read-only here") {
            break;
        }
        assert!(
            start.elapsed() < WAIT,
            "the first never noticed:\n{}",
            first.screen()
        );
    }
    let screen = first.screen();
    assert!(
        screen.contains(&format!("this process no longer holds session {session}"))
            && screen.contains(&format!("pid {}", taker.pid)),
        "one notice names the new holder:\n{screen}"
    );
    first.wait_for_prompt();
    first.line("/name from the first");
    first.wait_for_prompt();
    first.line("/session");
    first.wait_for("Unsaved: 1 entry kept in memory");
    first.wait_for_prompt();
    first.line("a prompt after the loss");
    first.wait_for("This session is read-only here");
    first.wait_for_prompt();
    assert_eq!(texts(&store, &session), written, "the first wrote nothing");
    assert_eq!(server.requests().len(), 2);
    assert_eq!(
        store.lease_holder(&session).unwrap().map(|h| h.pid),
        Some(taker.pid)
    );
    first.line("/quit");
    // The kept entry could not be stored (it went to `unsaved/`): the exit code says so.
    assert_eq!(first.wait_for_exit(), 1);
    assert_eq!(
        store.lease_holder(&session).unwrap().map(|h| h.pid),
        Some(taker.pid),
        "the first's exit left the new holder's lease alone"
    );
    // The kept entry was not dropped at exit: it is saved after the session in a rescue file.
    let rescued: Vec<_> = std::fs::read_dir(env.agent_dir.join("unsaved"))
        .expect("a rescue directory")
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(rescued.len(), 1, "{rescued:?}");
    let rescue = &rescued[0];
    assert!(
        rescue
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(session.as_str()),
        "{rescue:?}"
    );
    let screen = first.screen();
    assert!(
        screen.contains("1 unsaved entry of the session left could not be written")
            && screen.contains(&format!("pi import {}", rescue.display())),
        "{screen}"
    );
    let rescue_text = std::fs::read_to_string(rescue).unwrap();
    let last: Value = serde_json::from_str(rescue_text.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "session_info");
    assert_eq!(last["name"], "from the first");
    // While the second holds the session, importing the rescue is refused; once it has
    // ended, the import adds exactly the kept entry.
    let held = env
        .pi()
        .args(["import", "--json"])
        .arg(rescue)
        .output()
        .unwrap();
    assert_eq!(held.status.code(), Some(1), "{held:?}");
    assert!(
        String::from_utf8_lossy(&held.stdout).contains("held by another writer")
            || String::from_utf8_lossy(&held.stderr).contains("held by another writer"),
        "{held:?}"
    );
    second.line("/quit");
    assert_eq!(second.wait_for_exit(), 0);
    let before = store.entries(&session).unwrap().len();
    let output = env
        .pi()
        .args(["import", "--json"])
        .arg(rescue)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["status"], "updated", "{report}");
    assert_eq!(report["added"], 1, "{report}");
    let entries = store.entries(&session).unwrap();
    assert_eq!(entries.len(), before + 1);
    assert_eq!(
        String::from_utf8_lossy(&entries.last().unwrap().payload),
        rescue_text.lines().last().unwrap()
    );
    let check = env.pi().args(["db", "check"]).output().unwrap();
    assert!(check.status.success(), "{check:?}");
}

/// Reads JSON lines from an RPC process until the response with `id`.
fn response(lines: &mut impl Iterator<Item = std::io::Result<String>>, id: &str) -> Value {
    for line in lines {
        let value: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if value["type"] == "response" && value["id"] == id {
            return value;
        }
    }
    panic!("no response {id}");
}

#[test]
fn print_json_and_rpc_modes_refuse_a_held_session_with_one_line() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("First answer.")),
        MockResponse::sse(sse::openai_text("After the release.")),
    ]);
    configure(&env, &server, "");
    let session = one_session(&env);
    // This test process holds the lease, as a live pi would.
    let holder_store = env.store();
    let LeaseAttempt::Acquired(lease) = holder_store
        .acquire_lease(&session, "pi (interactive)", LeaseConfig::default())
        .unwrap()
    else {
        panic!("nobody held the session")
    };
    let me = std::process::id();
    for args in [
        vec!["-c", "-p", "again"],
        vec!["--session", session.as_str(), "-p", "again"],
        vec!["--mode", "json", "-c", "again"],
        vec!["--mode", "rpc", "--session", session.as_str()],
    ] {
        let output = env.pi().args(&args).write_stdin("").output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "pi: session {session} is held by another writer (pi (interactive), pid {me} on "
            )) && stderr.contains("last heartbeat")
                && stderr.contains(&format!("`pi --fork {session}`"))
                && stderr.contains("retry once that process has ended"),
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(server.requests().len(), 1, "nothing was sent");

    // RPC: switching to the held session errors and the current session stays.
    let mut child = env
        .pi_process()
        .env("PI_TEST_SEED", "301")
        .args(["--mode", "rpc"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let send = |stdin: &mut std::process::ChildStdin, value: Value| {
        writeln!(stdin, "{value}").unwrap();
        stdin.flush().unwrap();
    };
    send(&mut stdin, json!({"id": "s1", "type": "get_state"}));
    let state = response(&mut lines, "s1");
    let current = state["data"]["sessionId"].as_str().unwrap().to_owned();
    send(
        &mut stdin,
        json!({"id": "w1", "type": "switch_session", "sessionPath": session.as_str()}),
    );
    let switched = response(&mut lines, "w1");
    assert_eq!(switched["success"], false, "{switched}");
    let error = switched["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("session {session} is held by another writer"))
            && error.contains(&format!("pid {me}")),
        "{error}"
    );
    send(&mut stdin, json!({"id": "s2", "type": "get_state"}));
    let state = response(&mut lines, "s2");
    assert_eq!(state["data"]["sessionId"], current.as_str());
    drop(stdin);
    assert!(child.wait().unwrap().success());

    // Released: `pi -c -p` continues the session.
    holder_store.release_lease(&lease).unwrap();
    let output = succeeded(env.pi().args(["-c", "-p", "again"]));
    assert!(String::from_utf8_lossy(&output.stdout).contains("After the release."));
}

#[test]
fn a_repl_keeps_entries_it_cannot_write_exports_them_and_saves_them_in_order_later() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("First answer.")),
        MockResponse::sse(sse::openai_text("Answer while locked.")),
    ]);
    configure(&env, &server, r#""database": {"busyTimeoutMs": 200}"#);
    let repl = Tmux::start(&env, "repl", &[], &[("PI_TEST_SEED", "401")]);
    repl.wait_for_prompt();
    repl.line("first question");
    repl.wait_for("First answer.");
    repl.wait_for_prompt();
    let store = env.store();
    let session = store.list(&ListScope::All).unwrap()[0].id.clone();
    let stored_before = store.entries(&session).unwrap().len();

    // Another process holds SQLite's write lock past the 200 ms busy timeout.
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE; UPDATE leaf SET seq = seq WHERE 0;")
        .unwrap();
    repl.line("second question");
    repl.wait_for("Answer while locked.");
    repl.wait_for_prompt();
    let screen = repl.screen();
    assert_eq!(
        screen
            .matches("could not save to the session database")
            .count(),
        1,
        "one notice for the failure:\n{screen}"
    );
    assert!(
        screen.contains("locked by another process") && screen.contains("pi.db"),
        "{screen}"
    );
    repl.line("/session");
    repl.wait_for("Unsaved: 2 entries kept in memory");
    repl.wait_for_prompt();
    repl.line("/export locked.jsonl");
    repl.wait_for("Session exported to");
    repl.wait_for_prompt();
    assert_eq!(store.entries(&session).unwrap().len(), stored_before);

    // The lock goes away: the next append writes everything, in order.
    conn.execute_batch("ROLLBACK").unwrap();
    repl.line("/name saved later");
    repl.wait_for("saved the 2 entries kept in memory");
    repl.wait_for_prompt();
    repl.line("/session");
    repl.wait_for_count("Session Info", 2);
    repl.wait_for_prompt();
    assert_eq!(repl.screen().matches("Unsaved:").count(), 1);
    let entries = store.entries(&session).unwrap();
    assert_eq!(entries.len(), stored_before + 3);
    let tail: Vec<String> = entries[stored_before..]
        .iter()
        .map(|stored| match &stored.entry.kind {
            EntryKind::Message(message) => format!("{message:?}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert!(tail[0].contains("second question"), "{tail:?}");
    assert!(tail[1].contains("Answer while locked."), "{tail:?}");
    assert!(tail[2].contains("saved later"), "{tail:?}");
    for pair in entries.windows(2) {
        assert_eq!(pair[1].entry.parent_id, pair[0].entry.id, "one linear path");
    }

    // The export made while locked equals the branch as saved (apart from the new header).
    let exported = std::fs::read_to_string(env.workspace.join("locked.jsonl")).unwrap();
    let output = env
        .pi()
        .args(["export", "--jsonl", "--branch", session.as_str()])
        .output()
        .unwrap();
    assert!(output.status.success());
    let saved = String::from_utf8(output.stdout).unwrap();
    let exported_lines: Vec<&str> = exported.lines().skip(1).collect();
    let saved_lines: Vec<&str> = saved.lines().skip(1).collect();
    assert_eq!(exported_lines.len() + 1, saved_lines.len());
    assert_eq!(exported_lines, saved_lines[..exported_lines.len()]);

    let check = env.pi().args(["db", "check"]).output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    repl.line("/quit");
    assert_eq!(repl.wait_for_exit(), 0);
    assert_eq!(store.lease_holder(&session).unwrap(), None);
}

/// The session layer in one process: a second store on the same database stands for another
/// process's view (the lease row names this process, which is alive, so it counts as held).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_layer_holds_refuses_opens_read_only_and_takes_over() {
    use pi::session::{AgentSession, OpenAccess, PromptOptions, SessionError, SessionTarget};

    let harness = crate::common::agent::Harness::new(vec![MockResponse::sse(sse::openai_text(
        "Stored answer.",
    ))]);
    let writer = harness
        .open(SessionTarget::New {
            parent_session: None,
        })
        .await;
    assert!(
        !writer.holds_lease(),
        "nothing to hold before the first write"
    );
    writer
        .prompt("hello", PromptOptions::default())
        .await
        .unwrap();
    assert!(writer.holds_lease(), "the first write took the lease");
    let session = writer.session_id().await;

    let mut other = harness.config();
    other.store = crate::common::open_store(&harness.env.db(), 77);
    let target = SessionTarget::Open(session.clone());
    match AgentSession::open(other.clone(), target.clone()).await {
        Err(SessionError::Held(held)) => {
            assert_eq!(held.session, session);
            assert_eq!(held.holder.pid, std::process::id());
            assert!(!held.holder.can_take_over_now());
        }
        other => panic!("expected Held, got {other:?}"),
    }
    let (reader, _) = AgentSession::open_with(other, target, OpenAccess::ReadOnly)
        .await
        .unwrap();
    assert!(reader.read_only().is_some());
    assert_eq!(
        reader.messages().len(),
        3,
        "the history is there (system, user, assistant)"
    );
    assert!(matches!(
        reader.prompt("may I?", PromptOptions::default()).await,
        Err(SessionError::ReadOnly { .. })
    ));
    let before = harness.store.entries(&session).unwrap().len();
    reader.set_session_name("from the reader").await.unwrap();
    assert_eq!(reader.unsaved_lines().await.len(), 1, "kept, not written");
    assert_eq!(harness.store.entries(&session).unwrap().len(), before);
    match reader.take_over().await {
        Err(SessionError::Held(_)) => {}
        other => panic!("the writer is alive and fresh: {other:?}"),
    }

    writer.shutdown().await;
    assert_eq!(harness.store.lease_holder(&session).unwrap(), None);
    assert_eq!(reader.take_over().await.unwrap(), 1);
    assert!(reader.read_only().is_none() && reader.holds_lease());
    let entries = harness.store.entries(&session).unwrap();
    assert_eq!(entries.len(), before + 1);
    assert!(matches!(
        &entries.last().unwrap().entry.kind,
        EntryKind::SessionInfo { name: Some(name) } if name == "from the reader"
    ));
    assert_eq!(
        entries.last().unwrap().entry.parent_id,
        entries[before - 1].entry.id
    );
    reader.shutdown().await;
    assert_eq!(harness.store.lease_holder(&session).unwrap(), None);
}

/// Entries kept in memory are saved to a rescue file when their session is left, even when
/// the session can no longer be read from the store (here: another process deleted it) — a
/// header of the same session then stands in for the export.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_entries_are_rescued_even_when_the_session_cannot_be_read_any_more() {
    use pi::session::{AgentSession, OpenAccess, PromptOptions, SessionTarget};

    let harness = crate::common::agent::Harness::new(vec![MockResponse::sse(sse::openai_text(
        "Stored answer.",
    ))]);
    let writer = harness
        .open(SessionTarget::New {
            parent_session: None,
        })
        .await;
    writer
        .prompt("hello", PromptOptions::default())
        .await
        .unwrap();
    let session = writer.session_id().await;

    let rescue_dir = harness.env.dir.path().join("unsaved");
    let mut other = harness.config();
    other.store = crate::common::open_store(&harness.env.db(), 78);
    other.settings.lease.rescue_dir = Some(rescue_dir.clone());
    let (reader, _) = AgentSession::open_with(
        other,
        SessionTarget::Open(session.clone()),
        OpenAccess::ReadOnly,
    )
    .await
    .unwrap();
    reader.set_session_name("kept name").await.unwrap();
    let kept = reader.unsaved_lines().await;
    assert_eq!(kept.len(), 1);
    writer.shutdown().await;
    harness.store.delete_session(&session).unwrap();

    let mut events = reader.subscribe();
    reader.shutdown().await;
    let files: Vec<_> = std::fs::read_dir(&rescue_dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let header: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(header["type"], "session");
    assert_eq!(header["id"], session.as_str());
    assert_eq!(lines[1].as_bytes(), kept[0].as_slice());
    let mut notices = Vec::new();
    while let Ok(event) = events.try_recv() {
        notices.push(format!("{event:?}"));
    }
    assert!(
        notices
            .iter()
            .any(|notice| notice.contains("saved with the session to")),
        "{notices:?}"
    );
}
