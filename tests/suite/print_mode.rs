//! Print mode (`pi -p`, piped stdin) and JSON mode (`--mode json`) with the real binary
//! against the scripted provider: answers, the event stream, the first prompt built from
//! stdin, `@file` and the message, and the exit codes of CONTRACT.md — provider errors (after
//! retries), Ctrl+C, a closed stdout, a missing model, bad flags.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pi::model::entry::EntryKind;
use pi::model::message::AgentMessage;
use pi::store::ListScope;
use serde_json::{Value, json};

use crate::common::TestEnv;
use crate::common::agent::models_json;
use crate::common::provider::{MockResponse, ProviderServer, sse};

fn configure(env: &TestEnv, server: &ProviderServer, settings: &str) {
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json(&server.url(), 128_000),
    )
    .unwrap();
    std::fs::write(env.agent_dir.join("settings.json"), settings).unwrap();
}

const FAST_RETRIES: &str =
    r#"{"retry": {"baseDelayMs": 10, "maxRetries": 1, "provider": {"maxRetries": 0}}}"#;

/// Waits for a spawned `pi` to exit (generous bound) and returns its exit code.
fn wait_exit(child: &mut Child) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().expect("exited normally, not by a signal");
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("pi did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assistant_texts(env: &TestEnv) -> Vec<String> {
    let store = env.store();
    let mut out = Vec::new();
    for session in store.list(&ListScope::All).unwrap() {
        for stored in store.entries(&session.id).unwrap() {
            if let EntryKind::Message(AgentMessage::Assistant(assistant)) = &stored.entry.kind {
                out.push(assistant.text());
            }
        }
    }
    out
}

#[test]
fn print_mode_prints_the_final_answer_after_a_tool_call_and_stores_the_session() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "bash",
            r#"{"command":"echo from-the-tool"}"#,
        )),
        MockResponse::sse(sse::openai_text("The tool said from-the-tool.")),
    ]);
    configure(&env, &server, FAST_RETRIES);
    let output = env.pi().args(["-p", "run it"]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "The tool said from-the-tool.\n"
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    server.assert_tool_calls_answered();
    assert_eq!(assistant_texts(&env), ["", "The tool said from-the-tool."]);
}

#[test]
fn stdin_file_arguments_and_the_message_form_the_first_prompt() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("First.")),
        MockResponse::sse(sse::openai_text("Second.")),
    ]);
    configure(&env, &server, FAST_RETRIES);
    std::fs::write(env.workspace.join("notes.txt"), "note body").unwrap();
    let output = env
        .pi()
        .args(["@notes.txt", "summarise", "then this"])
        .write_stdin("piped text\n")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Second.\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let user_text = |body: &Value, idx: usize| -> String {
        let users: Vec<&Value> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|message| message["role"] == "user")
            .collect();
        match &users[idx]["content"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|part| part["text"].as_str())
                .collect(),
            other => panic!("content {other}"),
        }
    };
    let notes = env.workspace.join("notes.txt");
    assert_eq!(
        user_text(&requests[0].json(), 0),
        format!(
            "piped text<file name=\"{}\">\nnote body\n</file>\nsummarise",
            notes.display()
        )
    );
    assert_eq!(user_text(&requests[1].json(), 1), "then this");
}

#[test]
fn json_mode_writes_the_header_then_every_event_as_a_line() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call("call_1", "ls", r#"{"path":"."}"#)),
        MockResponse::sse(sse::openai_text("Listed.")),
    ]);
    configure(&env, &server, FAST_RETRIES);
    let output = env
        .pi()
        .args(["--mode", "json", "-t", "ls,read", "list files"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let tools: Vec<String> = server.requests()[0].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tools, ["ls", "read"], "--tools chooses the active tools");
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect();
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(lines[0]["version"], 3);
    let types: Vec<&str> = lines[1..]
        .iter()
        .map(|line| line["type"].as_str().unwrap())
        .collect();
    let mut wanted = [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_update",
        "tool_execution_start",
        "tool_execution_end",
        "turn_end",
        "turn_start",
        "message_update",
        "message_end",
        "agent_end",
        "agent_settled",
    ]
    .into_iter()
    .peekable();
    for kind in &types {
        if wanted.peek() == Some(kind) {
            wanted.next();
        }
    }
    assert!(
        wanted.peek().is_none(),
        "missing {:?} in {types:?}",
        wanted.collect::<Vec<_>>()
    );
    assert_eq!(
        lines.last().unwrap(),
        &json!({"type": "agent_settled", "aborted": false}),
        "1.6.0 ends a run with agent_settled"
    );
    let delta = lines
        .iter()
        .find(|line| line["assistantMessageEvent"]["type"] == "text_delta")
        .expect("a text delta");
    let keys: Vec<&String> = delta.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["type", "usage", "assistantMessageEvent"],
        "updates are delta-only (1.6.0): no cumulative message"
    );
    assert_eq!(
        delta["assistantMessageEvent"],
        json!({"type": "text_delta", "contentIndex": 0, "delta": "Listed."}),
        "no partial"
    );
    assert_eq!(
        delta["usage"]["totalTokens"], 120,
        "the latest usage the provider reported"
    );
    let call_start = lines
        .iter()
        .find(|line| line["assistantMessageEvent"]["type"] == "toolcall_start")
        .expect("a tool call start");
    assert_eq!(
        call_start["assistantMessageEvent"],
        json!({"type": "toolcall_start", "contentIndex": 0, "id": "call_1", "toolName": "ls"})
    );
    let end = lines
        .iter()
        .find(|line| line["type"] == "tool_execution_end")
        .unwrap();
    assert_eq!(end["toolName"], "ls");
    assert_eq!(end["isError"], false, "{end}");
}

#[test]
fn a_provider_error_exits_1_with_the_message_on_stderr() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::json(
        400,
        r#"{"error": {"message": "model mock-model does not exist", "type": "invalid_request_error"}}"#,
    )]);
    configure(&env, &server, FAST_RETRIES);
    let output = env.pi().args(["-p", "hello"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("model mock-model does not exist"),
        "{stderr}"
    );
    // JSON mode: the same exit code, and the error is in the stream.
    let server = ProviderServer::start(vec![MockResponse::json(
        400,
        r#"{"error": {"message": "still missing"}}"#,
    )]);
    configure(&env, &server, FAST_RETRIES);
    let output = env.pi().args(["--mode", "json", "hello"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("still missing"));
}

#[test]
fn print_mode_waits_for_retries_and_fails_only_when_they_run_out() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::json(503, r#"{"error": {"message": "overloaded, try again"}}"#),
        MockResponse::sse(sse::openai_text("Recovered answer.")),
    ]);
    configure(&env, &server, FAST_RETRIES);
    let output = env.pi().args(["-p", "hello"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "Recovered answer.\n"
    );

    let server = ProviderServer::start(vec![
        MockResponse::json(503, r#"{"error": {"message": "overloaded, try again"}}"#),
        MockResponse::json(503, r#"{"error": {"message": "overloaded, still"}}"#),
    ]);
    configure(&env, &server, FAST_RETRIES);
    let output = env.pi().args(["-p", "hello"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(server.requests().len(), 2, "one retry (retry.maxRetries 1)");
    assert!(String::from_utf8_lossy(&output.stderr).contains("overloaded, still"));
}

#[test]
fn ctrl_c_during_a_run_exits_130_in_print_and_json_mode() {
    for json in [false, true] {
        let env = TestEnv::new();
        let body = sse::openai_text("Some words and then a very long pause.");
        let stall_at = body.find("then").unwrap();
        let server = ProviderServer::start(vec![
            MockResponse::sse(body).stall_after(stall_at, Duration::from_secs(300)),
        ]);
        configure(&env, &server, FAST_RETRIES);
        let mut command = env.pi_process();
        if json {
            command.args(["--mode", "json", "hello"]);
        } else {
            command.args(["-p", "hello"]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if json {
            // Interrupt once the answer is visibly streaming.
            let stdout = child.stdout.take().unwrap();
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            loop {
                line.clear();
                assert!(reader.read_line(&mut line).unwrap() > 0, "stream ended");
                if line.contains("\"text_delta\"") {
                    break;
                }
            }
            std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        } else {
            server.wait_for_requests(1, Duration::from_secs(60));
        }
        kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
        assert_eq!(wait_exit(&mut child), 130, "json: {json}");
        // The aborted answer is stored.
        let store = env.store();
        let sessions = store.list(&ListScope::All).unwrap();
        assert_eq!(sessions.len(), 1, "json: {json}");
    }
}

#[test]
fn a_closed_stdout_ends_quietly_with_0() {
    let long: String = (0..2000).map(|n| format!("word{n} ")).collect();
    for json in [false, true] {
        let env = TestEnv::new();
        let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text(&long))]);
        configure(&env, &server, FAST_RETRIES);
        let mut command = env.pi_process();
        if json {
            command.args(["--mode", "json", "hello"]);
        } else {
            command.args(["-p", "hello"]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        if json {
            // Read the header and a few events, then hang up (`pi … | head -3`).
            for _ in 0..3 {
                let mut line = String::new();
                stdout.read_line(&mut line).unwrap();
            }
        }
        drop(stdout);
        assert_eq!(wait_exit(&mut child), 0, "json: {json}");
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(stderr, "", "json: {json}");
        if json {
            assert_eq!(
                assistant_texts(&env).len(),
                1,
                "the run went on and was stored after the reader left"
            );
        }
    }
}

#[test]
fn without_a_model_print_mode_says_what_to_configure() {
    let env = TestEnv::new();
    let output = env.pi().args(["-p", "hello"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("No model available"), "{stderr}");
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
    assert!(
        stderr.contains(&env.agent_dir.join("models.json").display().to_string()),
        "{stderr}"
    );
}

#[test]
fn resume_needs_the_interactive_mode_and_no_session_writes_nothing() {
    let env = TestEnv::new();
    let output = env.pi().args(["-r", "-p", "hello"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--session ID"));

    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Ephemeral."))]);
    configure(&env, &server, FAST_RETRIES);
    let output = env
        .pi()
        .args(["--no-session", "-p", "hello"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Ephemeral.\n");
    assert!(
        !env.db().exists() || env.store().list(&ListScope::All).unwrap().is_empty(),
        "--no-session keeps nothing"
    );
}

#[test]
fn prompt_and_model_flags_reach_the_request() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Done."))]);
    configure(&env, &server, FAST_RETRIES);
    std::fs::write(
        env.workspace.join("AGENTS.md"),
        "PROJECT RULES FROM AGENTS.MD",
    )
    .unwrap();
    let output = env
        .pi()
        .args([
            "--provider",
            "mock",
            "--model",
            "mock-model",
            "--api-key",
            "key-from-the-flag",
            "--system-prompt",
            "You are terse.",
            "--append-system-prompt",
            "First addition.",
            "--append-system-prompt",
            "Second addition.",
            "-nc",
            "-nt",
            "--offline",
            "-p",
            "hello",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let request = &server.requests()[0];
    assert_eq!(
        request.header("authorization"),
        Some("Bearer key-from-the-flag")
    );
    let body = request.json();
    assert_eq!(body["model"], "mock-model");
    assert!(
        body.get("tools")
            .is_none_or(|tools| tools.as_array().is_some_and(Vec::is_empty))
    );
    let system = body["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(system.starts_with("You are terse."), "{system}");
    assert!(
        system.contains("First addition.\n\nSecond addition."),
        "{system}"
    );
    assert!(
        !system.contains("PROJECT RULES"),
        "-nc leaves AGENTS.md out: {system}"
    );
}

fn fixture(name: &str) -> std::path::PathBuf {
    crate::common::fixtures::dir().join(format!("{name}.jsonl"))
}

#[test]
fn session_and_fork_accept_jsonl_files_which_are_imported_first() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("Continued.")),
        MockResponse::sse(sse::openai_text("Again.")),
        MockResponse::sse(sse::openai_text("Forked.")),
    ]);
    configure(&env, &server, FAST_RETRIES);
    // The fixture was recorded in /home/alice/projects/webshop, which does not exist here (the
    // reference refuses such a session outside its TUI; see the end): a copy recorded in this
    // workspace.
    let original = std::fs::read_to_string(fixture("branches")).unwrap();
    let recorded = r#""cwd":"/home/alice/projects/webshop""#;
    assert!(original.contains(recorded));
    let file = env.dir.path().join("branches.jsonl");
    std::fs::write(
        &file,
        original.replacen(
            recorded,
            &format!(
                r#""cwd":{}"#,
                serde_json::json!(env.workspace.display().to_string())
            ),
            1,
        ),
    )
    .unwrap();
    let file_arg = file.display().to_string();
    let output = env
        .pi()
        .args(["--session", &file_arg, "-p", "continue please"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Continued.\n");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "pi: imported {file_arg} as session 0196dd78-be80-74cc-b418-74fc28742ba5"
        )),
        "{stderr}"
    );
    // The file's conversation (at its last line) was the context of the new prompt.
    let body = server.requests()[0].json();
    let texts: Vec<String> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["content"].to_string())
        .collect();
    assert!(
        texts
            .iter()
            .any(|text| text.contains("Add a test for Oregon")),
        "{texts:?}"
    );
    let store = env.store();
    let sessions = store.list(&ListScope::All).unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        sessions[0].id.as_str(),
        "0196dd78-be80-74cc-b418-74fc28742ba5"
    );

    // The same file again: nothing new to import, the stored session goes on.
    let output = env
        .pi()
        .args(["--session", &file_arg, "-p", "and again"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("pi: unchanged"));
    assert_eq!(store.list(&ListScope::All).unwrap().len(), 1);

    // --fork FILE copies it into a new session of this directory.
    let output = env
        .pi()
        .env("PI_TEST_SEED", "99")
        .args(["--fork", &file_arg, "-p", "on the fork"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let sessions = store.list(&ListScope::All).unwrap();
    assert_eq!(sessions.len(), 2);
    let fork = sessions
        .iter()
        .find(|summary| summary.id.as_str() != "0196dd78-be80-74cc-b418-74fc28742ba5")
        .unwrap();
    assert_eq!(fork.cwd, env.workspace.display().to_string());

    // A file that does not exist is an error (exit 1).
    let output = env
        .pi()
        .args(["--session", "missing/nothing.jsonl", "-p", "x"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("no such session file"));

    // The fixture itself: its directory is gone, so print mode refuses to continue it.
    let other = TestEnv::new();
    configure(&other, &server, FAST_RETRIES);
    let output = other
        .pi()
        .args([
            "--session",
            &fixture("branches").display().to_string(),
            "-p",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(
            "Stored session working directory does not exist: /home/alice/projects/webshop"
        ),
        "{output:?}"
    );
}

/// A stored session whose working directory is gone: print and JSON mode refuse it with the
/// reference's message (exit 1) and ask the model nothing.
#[test]
fn a_session_whose_directory_is_gone_is_refused_outside_the_repl() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("unused"))]);
    configure(&env, &server, "{}");
    let (session, gone) = env.session_in_a_deleted_directory();
    for mode in [&["-p"][..], &["--mode", "json"][..]] {
        let output = env
            .pi()
            .args(mode)
            .args(["--session", session.as_str(), "hello"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!(
                "Stored session working directory does not exist: {}",
                gone.display()
            )) && stderr.contains("Current working directory: "),
            "{stderr}"
        );
    }
    assert!(server.requests().is_empty());
}

#[test]
fn session_id_creates_this_directorys_session_under_that_id_then_continues_it() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("First answer.")),
        MockResponse::sse(sse::openai_text("Second answer.")),
        MockResponse::sse(sse::openai_text("Forked answer.")),
    ]);
    configure(&env, &server, FAST_RETRIES);
    for (prompt, answer) in [("one", "First answer.\n"), ("two", "Second answer.\n")] {
        let output = env
            .pi()
            .args(["--session-id", "my-task.1", "-p", prompt])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        assert_eq!(String::from_utf8_lossy(&output.stdout), answer);
    }
    let store = env.store();
    let sessions = store.list(&ListScope::All).unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].id.as_str(), "my-task.1");
    assert_eq!(
        sessions[0].cwd,
        env.workspace.canonicalize().unwrap().to_string_lossy()
    );
    assert_eq!(assistant_texts(&env), ["First answer.", "Second answer."]);
    // Refused, exit 2, before any request: a bad id, a combination 1.6.0 refuses, and the id
    // of another directory's session.
    let other = env.dir.path().join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    for (args, dir, says) in [
        (
            vec!["--session-id", "-bad-", "-p", "x"],
            &env.workspace,
            "starts and ends",
        ),
        (
            vec!["--session-id", "a/b", "-p", "x"],
            &env.workspace,
            "letters, digits",
        ),
        (
            vec!["--session-id", "my-task.1", "-c", "-p", "x"],
            &env.workspace,
            "cannot be combined",
        ),
        (
            vec!["--session-id", "my-task.1", "-p", "x"],
            &other,
            "belongs to",
        ),
    ] {
        let output = env.pi().args(&args).current_dir(dir).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(says),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert_eq!(assistant_texts(&env), ["First answer.", "Second answer."]);
    // With --fork it names the fork; a taken id is refused.
    let output = env
        .pi()
        .args([
            "--fork",
            "my-task.1",
            "--session-id",
            "forked-2",
            "-p",
            "three",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Forked answer.\n");
    let store = env.store();
    let forked = store
        .session(&pi::model::SessionId::new("forked-2"))
        .unwrap();
    assert_eq!(forked.parent_session.as_deref(), Some("my-task.1"));
    let output = env
        .pi()
        .args([
            "--fork",
            "my-task.1",
            "--session-id",
            "forked-2",
            "-p",
            "four",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("exists already"));
}
