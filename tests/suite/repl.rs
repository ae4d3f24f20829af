//! The interactive REPL, driven in a real terminal (tmux) against the scripted provider on
//! 127.0.0.1: a conversation with a tool call, `/tree` back to an earlier point and a new
//! branch, `/label`, `/name`, exit; `pi -c` resumes at the same leaf and shows the history;
//! Ctrl+C aborts a streaming turn and keeps the REPL; history, completion and the exits.

use std::time::Duration;

use pi::model::entry::EntryKind;
use pi::model::message::AgentMessage;
use pi::store::ListScope;

use crate::common::TestEnv;
use crate::common::agent::models_json;
use crate::common::provider::{MockResponse, ProviderServer, sse};
use crate::common::tmux::{Tmux, row_number};

/// Writes `models.json` (the scripted provider) and fast retry settings into the agent dir.
fn configure(env: &TestEnv, server: &ProviderServer) {
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json(&server.url(), 128_000),
    )
    .unwrap();
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"retry": {"baseDelayMs": 10, "provider": {"maxRetries": 0}}}"#,
    )
    .unwrap();
}

/// Writes a Python extension (on the helper library of `examples/extensions/`, found through
/// `PI_EXAMPLES`) as an executable file and starts pi in tmux with it.
fn start_with_extension(env: &TestEnv, name: &str, file: &str, script: &str) -> Tmux {
    use std::os::unix::fs::PermissionsExt;
    let extension = env.dir.path().join(file);
    std::fs::write(&extension, script).unwrap();
    std::fs::set_permissions(&extension, std::fs::Permissions::from_mode(0o755)).unwrap();
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/extensions");
    Tmux::start(
        env,
        name,
        &["-e", &extension.to_string_lossy()],
        &[("PI_EXAMPLES", &examples.to_string_lossy())],
    )
}

fn user_text(kind: &EntryKind) -> Option<String> {
    match kind {
        EntryKind::Message(AgentMessage::User(user)) => Some(user.content.joined_text()),
        _ => None,
    }
}

#[test]
fn a_conversation_with_a_tool_call_a_new_branch_labels_and_a_name_resumes_with_pi_c() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "bash",
            r#"{"command":"echo tool-output-42"}"#,
        )),
        MockResponse::sse(sse::openai_text("The command printed forty-two.")),
        MockResponse::sse(sse::openai_text("Second answer here.")),
        MockResponse::sse(sse::openai_text("Branch answer here.")),
    ]);
    configure(&env, &server);

    let tmux = Tmux::start(&env, "first", &[], &[]);
    tmux.wait_for_prompt();
    tmux.line("run the command please");
    let screen = tmux.wait_for("The command printed forty-two.");
    assert!(
        screen.contains("[bash: echo tool-output-42]"),
        "the tool call is one line:\n{screen}"
    );
    assert!(screen.contains("  tool-output-42"), "its result:\n{screen}");
    tmux.wait_for("mock/mock-model • ctx");
    tmux.wait_for_prompt();

    tmux.line("second question");
    tmux.wait_for("Second answer here.");
    tmux.wait_for_count("mock/mock-model • ctx", 2);
    tmux.wait_for_prompt();

    // Back to before the second question: selecting a user message puts the leaf on its
    // parent and the message text into the editor.
    tmux.line("/tree");
    let screen = tmux.wait_for("Go to entry");
    assert!(screen.contains("user: run the command please"), "{screen}");
    assert!(
        screen.contains("← current"),
        "the leaf is marked:\n{screen}"
    );
    let row = row_number(&screen, "user: second question");
    tmux.line(&row.to_string());
    tmux.wait_for("Summarize the branch you leave?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Navigated to selected point");
    tmux.wait_for("> second question");
    // Ctrl+C on a non-empty line clears it.
    tmux.keys(&["C-c"]);
    tmux.wait_for_prompt();
    tmux.line("branch question");
    tmux.wait_for("Branch answer here.");
    tmux.wait_for_count("mock/mock-model • ctx", 3);
    tmux.wait_for_prompt();

    tmux.line("/tree");
    let screen = tmux.wait_for_count("Go to entry", 2);
    let listing = screen.rsplit("> /tree").next().unwrap();
    assert!(
        listing.contains("├─ • user: branch question"),
        "the active branch comes first:\n{listing}"
    );
    assert!(listing.contains("└─ user: second question"), "{listing}");
    let first = row_number(listing, "user: run the command please");
    tmux.keys(&["Enter"]);
    tmux.wait_for_prompt();
    tmux.line(&format!("/label {first} checkpoint"));
    tmux.wait_for("Label set on");
    tmux.line("/name demo session");
    tmux.wait_for("Session name set: demo session");
    tmux.line("/tree");
    let screen = tmux.wait_for_count("Go to entry", 3);
    assert!(
        screen.contains("• [checkpoint] user: run the command please"),
        "{screen}"
    );
    tmux.keys(&["Enter"]);
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);

    assert_eq!(server.requests().len(), 4);
    server.assert_tool_calls_answered();

    // The store has the tree: two branches after the first turn, the label and the name.
    let store = env.store();
    let sessions = store.list(&ListScope::All).unwrap();
    assert_eq!(sessions.len(), 1);
    let session = &sessions[0];
    assert_eq!(session.name.as_deref(), Some("demo session"));
    let entries = store.entries(&session.id).unwrap();
    let find_user = |text: &str| {
        entries
            .iter()
            .find(|stored| user_text(&stored.entry.kind).as_deref() == Some(text))
            .unwrap_or_else(|| panic!("user message {text:?}"))
    };
    let second = find_user("second question");
    let branch = find_user("branch question");
    assert_eq!(second.entry.parent_id, branch.entry.parent_id);
    let first_user = find_user("run the command please");
    let labels = store.labels(&session.id).unwrap();
    assert_eq!(labels.len(), 1);
    assert_eq!(Some(&labels[0].0), first_user.entry.id.as_ref());
    assert_eq!(labels[0].1, "checkpoint");
    let leaf = store.leaf(&session.id).unwrap().unwrap();
    match &leaf.entry.kind {
        EntryKind::Message(AgentMessage::Assistant(assistant)) => {
            assert_eq!(assistant.text(), "Branch answer here.")
        }
        // The label and the name are appended at the leaf, so the leaf is the name entry.
        EntryKind::SessionInfo { .. } => {}
        other => panic!("unexpected leaf {other:?}"),
    }
    drop(tmux);

    // `pi -c` resumes at the same leaf and shows the history of the active branch.
    let tmux = Tmux::start(&env, "continue", &["-c"], &[]);
    let screen = tmux.wait_for_prompt();
    assert!(
        screen.contains(&format!("session {}", session.id.as_str())),
        "{screen}"
    );
    assert!(screen.contains("> run the command please"), "{screen}");
    assert!(screen.contains("[bash: echo tool-output-42]"), "{screen}");
    assert!(screen.contains("> branch question"), "{screen}");
    assert!(screen.contains("Branch answer here."), "{screen}");
    assert!(
        !screen.contains("Second answer here."),
        "the other branch is not on the path:\n{screen}"
    );
    tmux.line("/session");
    let screen = tmux.wait_for("Tool Calls:");
    assert!(screen.contains("Name: demo session"), "{screen}");
    assert!(
        screen.contains(&format!("ID: {}", session.id.as_str())),
        "{screen}"
    );
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
    let after = env.store().leaf(&session.id).unwrap().unwrap();
    assert_eq!(after.seq, leaf.seq, "resuming moved nothing");
}

#[test]
fn ctrl_c_aborts_a_streaming_turn_and_the_repl_goes_on() {
    let env = TestEnv::new();
    // The answer streams its first words, then stalls far longer than the test waits.
    let body = sse::openai_text("Streaming words then a long pause before the rest.");
    let stall_at = body.find("then").expect("a word to stall at");
    let server = ProviderServer::start(vec![
        MockResponse::sse(body).stall_after(stall_at, Duration::from_secs(300)),
        MockResponse::sse(sse::openai_text("Recovered fine.")),
    ]);
    configure(&env, &server);
    let tmux = Tmux::start(&env, "abort", &[], &[]);
    tmux.wait_for_prompt();
    tmux.line("tell me something");
    // The first words are on the screen while the response is still open: output streams.
    tmux.wait_for("Streaming words");
    tmux.keys(&["C-c"]);
    tmux.wait_for("Aborted");
    assert!(tmux.is_running(), "Ctrl+C during a turn does not end pi");
    tmux.wait_for_prompt();
    tmux.line("again");
    tmux.wait_for("Recovered fine.");
    tmux.wait_for_prompt();
    // Ctrl+C twice on an empty line exits.
    tmux.keys(&["C-c"]);
    tmux.wait_for("press Ctrl+C again to exit");
    tmux.keys(&["C-c"]);
    assert_eq!(tmux.wait_for_exit(), 0);

    let store = env.store();
    let session = &store.list(&ListScope::All).unwrap()[0];
    let stop_reasons: Vec<String> = store
        .entries(&session.id)
        .unwrap()
        .iter()
        .filter_map(|stored| match &stored.entry.kind {
            EntryKind::Message(AgentMessage::Assistant(assistant)) => {
                Some(format!("{:?}", assistant.stop_reason))
            }
            _ => None,
        })
        .collect();
    assert_eq!(stop_reasons, ["Aborted", "Stop"]);
}

#[test]
fn input_history_persists_and_commands_complete() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    let tmux = Tmux::start(&env, "history", &[], &[]);
    let screen = tmux.wait_for_prompt();
    assert!(
        screen.contains("No model available. Configure one of:"),
        "without a model pi says what to configure:\n{screen}"
    );
    assert!(
        screen.contains(&env.agent_dir.join("models.json").display().to_string()),
        "{screen}"
    );
    tmux.line("!echo shell-says-hi");
    tmux.wait_for("shell-says-hi\n");
    tmux.wait_for_prompt();
    // Tab completes a unique command.
    tmux.type_text("/sess");
    tmux.keys(&["Tab"]);
    tmux.wait_for("> /session");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Session Info");
    tmux.wait_for_prompt();
    tmux.line("/quit");
    assert_eq!(tmux.wait_for_exit(), 0);
    drop(tmux);

    let history = std::fs::read_to_string(env.agent_dir.join("repl-history")).unwrap();
    assert!(history.contains("!echo shell-says-hi"), "{history}");
    let tmux = Tmux::start(&env, "history-again", &[], &[]);
    tmux.wait_for_prompt();
    tmux.keys(&["Up", "Up", "Up"]);
    tmux.wait_for("> !echo shell-says-hi");
    tmux.keys(&["C-c"]);
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
    drop(tmux);

    // `-r` with nothing chosen exits 0.
    let tmux = Tmux::start(&env, "resume-nothing", &["-r"], &[]);
    tmux.wait_for("Resume (number or id");
    tmux.keys(&["Enter"]);
    tmux.wait_for("No session selected");
    assert_eq!(tmux.wait_for_exit(), 0);
}

#[test]
fn pickers_resume_fork_clone_model_thinking_and_new() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("Checkout answer.")),
        MockResponse::sse(sse::openai_text("Billing answer.")),
        MockResponse::sse(sse::openai_text("Fresh answer.")),
    ]);
    configure(&env, &server);
    std::fs::create_dir_all(env.agent_dir.join("prompts")).unwrap();
    std::fs::write(
        env.agent_dir.join("prompts/review.md"),
        "---\ndescription: Review a file\n---\nReview $1 carefully.",
    )
    .unwrap();
    // Each run gets its own id seed: with the fixed test clock, equal seeds give equal ids.
    for (seed, prompt) in [
        ("8", "first session about checkout"),
        ("9", "second session about billing"),
    ] {
        let output = env
            .pi()
            .env("PI_TEST_SEED", seed)
            .args(["-p", prompt])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
    }
    let store = env.store();
    let before = store.list(&ListScope::All).unwrap();
    let billing = before
        .iter()
        .find(|summary| summary.first_message.as_deref() == Some("second session about billing"))
        .unwrap_or_else(|| panic!("{before:#?}"))
        .id
        .clone();

    let tmux = Tmux::start(&env, "pickers", &["-r"], &[]);
    let screen = tmux.wait_for("Resume (number or id");
    assert!(screen.contains("Recent sessions in"), "{screen}");
    let row = row_number(&screen, "first session about checkout");
    tmux.line(&row.to_string());
    let screen = tmux.wait_for_prompt();
    assert!(
        screen.contains("> first session about checkout"),
        "{screen}"
    );
    assert!(screen.contains("Checkout answer."), "{screen}");

    // `/resume WORDS` searches.
    tmux.line("/resume billing");
    let screen = tmux.wait_for("Sessions matching \"billing\"");
    let listing = screen.rsplit("> /resume billing").next().unwrap();
    assert!(
        !listing.contains("first session about checkout"),
        "{listing}"
    );
    let row = row_number(listing, "second session about billing");
    tmux.wait_for_count("Resume (number or id", 2);
    tmux.line(&row.to_string());
    tmux.wait_for(&format!("session {}", billing.as_str()));
    tmux.wait_for_prompt();

    // `/fork` before the only user message: a new session, the text back in the editor.
    tmux.line("/fork");
    tmux.wait_for("Fork before which message");
    tmux.line("1");
    tmux.wait_for("Forked to new session");
    tmux.wait_for("> second session about billing");
    tmux.keys(&["C-c"]);
    tmux.wait_for_prompt();
    tmux.line("/clone");
    tmux.wait_for("Cloned to new session");
    tmux.wait_for_prompt();

    tmux.line("/model");
    let screen = tmux.wait_for("Model (number");
    assert!(screen.contains("1 mock/mock-model  ← current"), "{screen}");
    tmux.line("1");
    tmux.wait_for("Model: mock/mock-model");
    tmux.wait_for_prompt();
    tmux.line("/thinking");
    tmux.wait_for("Thinking level: off (available: off)");
    tmux.line("/thinking high");
    tmux.wait_for("The current model does not support thinking");
    tmux.line("/thinking bogus");
    tmux.wait_for("Unknown thinking level \"bogus\"; available: off");
    tmux.line("/name");
    tmux.wait_for("Usage: /name <name>");
    tmux.wait_for_prompt();

    // Prompt templates complete like commands.
    tmux.type_text("/rev");
    tmux.keys(&["Tab"]);
    tmux.wait_for("> /review");
    tmux.keys(&["C-c"]);
    tmux.wait_for_prompt();

    tmux.line("/new");
    tmux.wait_for("New session started");
    // A trailing backslash continues the input on a new line.
    tmux.line("hi there \\");
    tmux.line("on two lines");
    tmux.wait_for("Fresh answer.");
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);

    let after = store.list(&ListScope::All).unwrap();
    assert_eq!(
        after.len(),
        5,
        "two from -p, the fork, the clone, the new one"
    );
    let children: Vec<_> = after
        .iter()
        .filter(|summary| summary.parent_session.as_deref() == Some(billing.as_str()))
        .collect();
    assert_eq!(children.len(), 1, "the fork records its parent");
    assert!(
        after
            .iter()
            .any(|summary| summary.first_message.as_deref() == Some("hi there \non two lines")),
        "{after:#?}"
    );
}

#[test]
fn import_switches_to_a_jsonl_session_and_export_writes_the_active_branch() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text(
        "Imported and continued.",
    ))]);
    configure(&env, &server);
    let fixture = crate::common::fixtures::dir().join("branches.jsonl");
    let tmux = Tmux::start(&env, "interchange", &[], &[]);
    tmux.wait_for_prompt();
    tmux.line(&format!("/import {}", fixture.display()));
    tmux.wait_for("Replace the current session with");
    tmux.line("y");
    // The file was recorded in a directory that does not exist here: asked, as the reference
    // asks, whether to continue in this one.
    tmux.wait_for("cwd from session file does not exist");
    tmux.wait_for("Continue in the current directory? [y/N]");
    tmux.line("y");
    let screen = tmux.wait_for("Session imported from:");
    assert!(
        screen.contains("imported "),
        "the import's summary:\n{screen}"
    );
    assert!(
        screen.contains("> Add a test for Oregon (no sales tax)."),
        "the history of the imported session:\n{screen}"
    );
    tmux.wait_for_prompt();
    tmux.line("next step");
    tmux.wait_for("Imported and continued.");
    tmux.wait_for_prompt();
    tmux.line("/export out.jsonl");
    tmux.wait_for("Session exported to:");
    // Any other name, or none, is the session's HTML page, as the reference's `/export`.
    tmux.line("/export notes.html");
    tmux.wait_for_count("Session exported to:", 2);
    tmux.line("/export");
    tmux.wait_for_count("Session exported to:", 3);
    // A directory: a new file named as the reference names session files, after the new id.
    tmux.line("/export handed-over/");
    tmux.wait_for_count("Session exported to:", 4);
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);

    let handed: Vec<std::path::PathBuf> = std::fs::read_dir(env.workspace.join("handed-over"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(handed.len(), 1, "{handed:?}");
    let name = handed[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let header: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&handed[0])
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let id = header["id"].as_str().unwrap();
    assert_ne!(id, "0196dd78-be80-74cc-b418-74fc28742ba5");
    let stamp = header["timestamp"]
        .as_str()
        .unwrap()
        .replace([':', '.'], "-");
    assert_eq!(
        name,
        format!("{stamp}_{id}.jsonl"),
        "the reference's session file name"
    );

    let text = std::fs::read_to_string(env.workspace.join("out.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "session");
    assert_ne!(
        lines[0]["id"], "0196dd78-be80-74cc-b418-74fc28742ba5",
        "the branch is written under a new session id"
    );
    for pair in lines[1..].windows(2) {
        assert_eq!(pair[1]["parentId"], pair[0]["id"], "a linear session");
    }
    assert!(text.contains("Add a test for Oregon"));
    assert!(
        !text.contains("Skip the table; hardcode California"),
        "only the active branch"
    );
    assert!(text.ends_with("\n"));
    let last_message = lines
        .iter()
        .rev()
        .find(|line| line["type"] == "message")
        .unwrap();
    assert_eq!(
        last_message["message"]["content"][0]["text"],
        "Imported and continued."
    );
    let page = std::fs::read_to_string(env.workspace.join("notes.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(page.contains("Imported and continued."), "{page}");
    assert!(
        page.contains("Skip the table; hardcode California"),
        "the page holds the whole tree"
    );
    let default: Vec<String> = std::fs::read_dir(&env.workspace)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("pi-session-") && name.ends_with(".html"))
        .collect();
    assert_eq!(default.len(), 1, "{default:?}");
    assert!(
        default[0].contains("0196dd78-be80-74cc-b418-74fc28742ba5"),
        "{default:?}"
    );
}

#[test]
fn copy_share_hotkeys_and_an_unknown_command_never_reach_the_model() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text(
        "The answer is 42.",
    ))]);
    configure(&env, &server);
    // The GitHub CLI, as `/share` runs it: a script that keeps its arguments and the page.
    let bin = env.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let record = env.dir.path().join("gh-record");
    std::fs::write(
        bin.join("gh"),
        format!(
            "#!/bin/sh\necho \"$@\" > {dir}/gh-args\nfor last; do :; done\ncp \"$last\" {dir}/gh-page.html\necho https://gist.github.com/pi-test/abc123\n",
            dir = record.display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(&record).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(bin.join("gh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let raw = env.dir.path().join("copy.raw");
    let tmux = Tmux::start_capturing(&env, "copy", &[], &[("PATH", &path)], &raw);
    tmux.wait_for_prompt();
    tmux.line("/share");
    tmux.wait_for("Nothing to share yet");
    tmux.line("/copy");
    tmux.wait_for("No answer to copy yet");
    tmux.line("What is the answer?");
    tmux.wait_for("The answer is 42.");
    tmux.wait_for_prompt();
    tmux.line("/copy");
    tmux.wait_for("Copied the last answer (17 characters) to the clipboard");
    assert_eq!(tmux.buffer(), "The answer is 42.");
    tmux.line("/hotkeys");
    tmux.wait_for("Ctrl+D exits");
    tmux.line("/exprt out.html");
    tmux.wait_for("Unknown command /exprt: nothing was sent to the model. Did you mean /export?");
    // pi's changelog (the reference shows its package's), rendered: no `##` left.
    tmux.line("/changelog");
    let screen = tmux.wait_for("What changed in pi, newest first.");
    assert!(
        screen.contains("[Unreleased]") && !screen.contains("## [Unreleased]"),
        "{screen}"
    );
    tmux.line("/share");
    tmux.wait_for("Shared: https://gist.github.com/pi-test/abc123");
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
    assert_eq!(
        server.requests().len(),
        1,
        "only the one prompt reached the model"
    );
    let args = std::fs::read_to_string(record.join("gh-args")).unwrap();
    assert!(args.starts_with("gist create"), "{args}");
    assert!(!args.contains("--public"), "a secret gist: {args}");
    let page = std::fs::read_to_string(record.join("gh-page.html")).unwrap();
    assert!(page.contains("The answer is 42."), "{page}");

    // Without gh, `/share` says what to do.
    let empty = env.dir.path().join("no-tools");
    std::fs::create_dir_all(&empty).unwrap();
    let tmux = Tmux::start(
        &env,
        "nogh",
        &["-c"],
        &[("PATH", &empty.display().to_string())],
    );
    tmux.wait_for_prompt();
    tmux.line("/share");
    tmux.wait_for("Sharing needs the GitHub CLI: install gh and run `gh auth login`");
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
}

#[test]
fn compact_and_a_branch_summary_from_the_repl() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("First answer.")),
        MockResponse::sse(sse::openai_text("Second answer.")),
        MockResponse::sse(sse::openai_text(
            "Summary: the second question was explored.",
        )),
        MockResponse::sse(sse::openai_text("Compacted: the numbers are 1, 2, 3.")),
    ]);
    configure(&env, &server);
    // Keep almost nothing: 1.6.0 plans no compaction when everything would be kept (the
    // default keeps 20000 tokens, more than this whole session).
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"retry": {"baseDelayMs": 10, "provider": {"maxRetries": 0}}, "compaction": {"keepRecentTokens": 1}}"#,
    )
    .unwrap();
    let tmux = Tmux::start(&env, "compact", &[], &[]);
    tmux.wait_for_prompt();
    tmux.line("first question");
    tmux.wait_for("First answer.");
    tmux.wait_for_prompt();
    tmux.line("second question");
    tmux.wait_for("Second answer.");
    tmux.wait_for_prompt();

    tmux.line("/tree");
    let screen = tmux.wait_for("Go to entry");
    tmux.line(&row_number(&screen, "user: second question").to_string());
    tmux.wait_for("Summarize the branch you leave?");
    tmux.line("s");
    tmux.wait_for("Navigated to selected point");
    tmux.wait_for("> second question");
    tmux.keys(&["C-c"]);
    tmux.wait_for_prompt();
    tmux.line("/tree");
    let screen = tmux.wait_for_count("Go to entry", 2);
    assert!(
        screen
            .lines()
            .any(|line| line.contains("• [branch summary]: ")
                && line.contains("Summary: the second question was explored.")
                && line.ends_with("← current")),
        "the summary is the new leaf:\n{screen}"
    );
    tmux.keys(&["Enter"]);
    tmux.wait_for_prompt();

    tmux.line("/compact keep the numbers");
    tmux.wait_for("Compacted the context");
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);

    let requests = server.requests();
    assert_eq!(
        requests.len(),
        4,
        "two turns, a branch summary, a compaction"
    );
    assert!(
        requests[3].json().to_string().contains("keep the numbers"),
        "the focus text reaches the summary request"
    );
    let store = env.store();
    let session = &store.list(&ListScope::All).unwrap()[0];
    let kinds: Vec<String> = store
        .entries(&session.id)
        .unwrap()
        .iter()
        .map(|stored| stored.entry.kind.type_name().to_owned())
        .collect();
    assert!(
        kinds.iter().any(|kind| kind == "branch_summary"),
        "{kinds:?}"
    );
    assert_eq!(kinds.last().map(String::as_str), Some("compaction"));
}

#[test]
fn an_extension_dialog_is_answered_in_the_repl_during_a_turn() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "bash",
            r#"{"command":"rm -rf build"}"#,
        )),
        MockResponse::sse(sse::openai_text("Understood, nothing was deleted.")),
    ]);
    configure(&env, &server);
    std::fs::create_dir_all(env.workspace.join("build")).unwrap();
    std::fs::write(env.workspace.join("build/keep.txt"), "keep").unwrap();
    let guard = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/extensions/guard.py")
        .display()
        .to_string();
    let tmux = Tmux::start(&env, "guard", &["-e", &guard], &[]);
    tmux.wait_for_prompt();
    tmux.line("clean up the build");
    tmux.wait_for("Dangerous command");
    tmux.wait_for("Allow `rm -rf build`? [y/N]");
    tmux.line("n");
    let screen = tmux.wait_for("Understood, nothing was deleted.");
    assert!(screen.contains("Blocked by the user"), "{screen}");
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
    assert!(env.workspace.join("build/keep.txt").exists());
    server.assert_tool_calls_answered();
}

const SHUTDOWN_LOGGER: &str = r#"#!/usr/bin/env python3
import os, sys
sys.path.insert(0, os.environ["PI_EXAMPLES"])
from pi_extension import Extension

ext = Extension("shutdown-logger")

@ext.on("session_shutdown")
def stopped(event):
    with open(os.path.join(ext.cwd, "shutdown.log"), "a") as out:
        out.write("shutdown %s\n" % event["reason"])

ext.run()
"#;

/// SIGTERM while a turn streams ends the REPL as the reference's does: the turn is aborted,
/// extensions get `session_shutdown`, the writer lease is released, exit code 143, and what
/// was stored before stays.
#[test]
fn sigterm_mid_turn_shuts_the_repl_down_cleanly() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("First answer.")),
        MockResponse::sse(sse::openai_text("This answer never finishes streaming."))
            .stall_after(60, Duration::from_secs(60)),
    ]);
    configure(&env, &server);
    let tmux = start_with_extension(&env, "term", "shutdown_logger.py", SHUTDOWN_LOGGER);
    tmux.wait_for_prompt();
    tmux.line("hello");
    tmux.wait_for("First answer.");
    tmux.wait_for_prompt();
    tmux.line("a slow one");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while server.requests().len() < 2 {
        assert!(std::time::Instant::now() < deadline, "no second request");
        std::thread::sleep(Duration::from_millis(20));
    }
    let store = env.store();
    let session = store.list(&ListScope::All).unwrap()[0].id.clone();
    let holder = store
        .lease_holder(&session)
        .unwrap()
        .expect("the REPL holds the lease");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(holder.pid).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(tmux.wait_for_exit(), 143);
    assert_eq!(
        std::fs::read_to_string(env.workspace.join("shutdown.log")).unwrap(),
        "shutdown quit\n"
    );
    assert!(
        store.lease_holder(&session).unwrap().is_none(),
        "the lease was released"
    );
    let texts: Vec<String> = store
        .entries(&session)
        .unwrap()
        .iter()
        .filter_map(|stored| user_text(&stored.entry.kind))
        .collect();
    assert_eq!(texts, ["hello", "a slow one"]);
}

/// Long `!` output is folded as the reference folds it: the first lines stream, the last
/// ones are shown after a count of what was left out, and `/expand` shows it all.
#[test]
fn long_shell_output_is_folded_and_expand_shows_it_all() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![]);
    configure(&env, &server);
    let tmux = Tmux::start(&env, "fold", &[], &[]);
    tmux.wait_for_prompt();
    tmux.line("!seq 1 300");
    tmux.wait_for("… 275 more lines (/expand shows the whole output)");
    let screen = tmux.wait_until("the tail", |screen| {
        screen.contains("\n300\n") || screen.ends_with("300")
    });
    let lines: Vec<&str> = screen.lines().collect();
    for shown in ["1", "20", "296", "300"] {
        assert!(lines.contains(&shown), "{shown} is not shown:\n{screen}");
    }
    for folded in ["21", "150", "295"] {
        assert!(
            !lines.contains(&folded),
            "{folded} was not folded:\n{screen}"
        );
    }
    tmux.wait_for_prompt();
    tmux.line("/expand");
    let screen = tmux.wait_until("the expanded output", |screen| {
        screen.lines().any(|line| line == "150")
    });
    assert!(screen.lines().any(|line| line == "295"), "{screen}");
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
}

/// Lines sent in one burst at the prompt (typed fast, or pasted without bracketed paste) are
/// all delivered in order, none lost: what the line editor read ahead of the first line is
/// kept for the next prompts.
#[test]
fn a_burst_of_typed_lines_loses_none() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("One.")),
        MockResponse::sse(sse::openai_text("Two.")),
        MockResponse::sse(sse::openai_text("Three.")),
        MockResponse::sse(sse::openai_text("Four.")),
        MockResponse::sse(sse::openai_text("Five.")),
    ]);
    configure(&env, &server);
    let tmux = Tmux::start(&env, "burst", &[], &[]);
    tmux.wait_for_prompt();
    tmux.type_text("first line\rsecond line\rthird line\r");
    tmux.wait_for("Three.");
    tmux.wait_for_prompt();
    // A paste without bracketed paste: lines ended by LF.
    tmux.type_text("fourth line\nfifth line\n");
    tmux.wait_for("Five.");
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
    let requests = server.requests();
    let texts: Vec<String> = requests
        .iter()
        .map(|request| request.json()["messages"].to_string())
        .collect();
    let last = texts.last().cloned().unwrap_or_default();
    for line in [
        "first line",
        "second line",
        "third line",
        "fourth line",
        "fifth line",
    ] {
        assert!(last.contains(line), "{line} was lost: {texts:?}");
    }
}

/// A steering message queued for a turn that is then aborted with `key` is not lost: it goes
/// back into the editor, as the reference restores queued messages, and is never sent; the
/// key is not echoed as `^[`.
fn aborting_puts_the_queue_back(name: &str, key: &str) {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_tool_call(
        "call_1",
        "bash",
        r#"{"command":"sleep 30"}"#,
    ))]);
    configure(&env, &server);
    let tmux = Tmux::start(&env, name, &[], &[]);
    tmux.wait_for_prompt();
    tmux.line("start the work");
    server.wait_for_requests(1, Duration::from_secs(30));
    tmux.line("check the tests too");
    tmux.wait_for("Steering queued: check the tests too");
    tmux.keys(&[key]);
    tmux.wait_for("1 queued message put back into the editor");
    let screen = tmux.wait_for("> check the tests too");
    assert!(!screen.contains("^["), "{screen}");
    tmux.keys(&["C-u"]);
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
    assert_eq!(
        server.requests().len(),
        1,
        "the queued message was sent anyway"
    );
}

/// Ctrl+C aborts the turn; its queued steering message goes back into the editor.
#[test]
fn an_aborted_turn_puts_its_queued_messages_back_into_the_editor() {
    aborting_puts_the_queue_back("abortq", "C-c");
}

/// Lines typed while the agent works are queued as the reference's editor queues them: Enter
/// steers (delivered after the running tool call), Alt+Enter queues a follow-up (delivered
/// when the agent would stop); both reach the model in that order and are stored.
#[test]
fn lines_typed_during_a_turn_steer_it_or_follow_up() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "bash",
            r#"{"command":"while [ ! -e go ]; do sleep 0.05; done; echo released"}"#,
        )),
        MockResponse::sse(sse::openai_text("Steered answer.")),
        MockResponse::sse(sse::openai_text("Follow-up answer.")),
    ]);
    configure(&env, &server);
    let tmux = Tmux::start(&env, "steer", &[], &[]);
    tmux.wait_for_prompt();
    tmux.line("start the work");
    // The tool runs until the file appears: the agent is busy while we type.
    server.wait_for_requests(1, Duration::from_secs(30));
    tmux.line("check the tests too");
    tmux.wait_for("Steering queued: check the tests too");
    tmux.type_text("then summarise");
    tmux.keys(&["M-Enter"]);
    tmux.wait_for("Follow-up queued: then summarise");
    std::fs::write(env.workspace.join("go"), "").unwrap();
    tmux.wait_for("Follow-up answer.");
    let screen = tmux.wait_for_prompt();
    assert!(screen.contains("Steered answer."), "{screen}");
    // Alt+Enter's ESC is not echoed as `^[`.
    assert!(!screen.contains("^["), "{screen}");
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let last_user = |idx: usize| {
        let body = requests[idx].json();
        let messages = body["messages"].as_array().unwrap().clone();
        let last = messages.last().unwrap().clone();
        assert_eq!(last["role"], "user", "{last}");
        last["content"].to_string()
    };
    assert!(last_user(1).contains("check the tests too"));
    assert!(last_user(2).contains("then summarise"));
    // The steering message came after the tool's result.
    let second = requests[1].json();
    let roles: Vec<&str> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|message| message["role"].as_str())
        .collect();
    assert_eq!(roles[roles.len() - 2..], ["tool", "user"]);
    server.assert_tool_calls_answered();

    let store = env.store();
    let session = &store.list(&ListScope::All).unwrap()[0];
    let users: Vec<String> = store
        .entries(&session.id)
        .unwrap()
        .iter()
        .filter_map(|stored| user_text(&stored.entry.kind))
        .collect();
    assert_eq!(
        users,
        ["start the work", "check the tests too", "then summarise"]
    );
}

/// A session resumed from another project's directory runs there: `@` paths complete against
/// that directory, not the one pi started in.
#[test]
fn paths_complete_in_the_directory_of_a_resumed_session() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    let project = env.dir.path().join("project-b");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("only_in_b.txt"), "b").unwrap();
    let session = {
        let store = env.store();
        store
            .create_session(&pi::store::NewSession {
                cwd: project.display().to_string(),
                parent_session: None,
            })
            .unwrap()
            .id
    };
    let tmux = Tmux::start(&env, "complete-b", &["--session", session.as_str()], &[]);
    tmux.wait_for_prompt();
    tmux.type_text("@only_in");
    tmux.keys(&["Tab"]);
    tmux.wait_for("> @only_in_b.txt");
    tmux.keys(&["C-c"]);
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
}

/// `/export NAME` writes where 1.6.0 writes: relative to the directory pi was started in,
/// also when the session (resumed from another project) works elsewhere.
#[test]
fn export_writes_relative_to_where_pi_was_started_as_the_reference() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Exported."))]);
    configure(&env, &server);
    let project = env.dir.path().join("project-b");
    std::fs::create_dir_all(&project).unwrap();
    let session = env
        .store()
        .create_session(&pi::store::NewSession {
            cwd: project.display().to_string(),
            parent_session: None,
        })
        .unwrap()
        .id;
    let tmux = Tmux::start(&env, "export-where", &["--session", session.as_str()], &[]);
    tmux.wait_for_prompt();
    tmux.line("hello");
    tmux.wait_for("Exported.");
    tmux.wait_for_prompt();
    tmux.line("/export branch.jsonl");
    tmux.wait_for("Session exported to:");
    tmux.line("/export page.html");
    tmux.wait_until("the second export", |screen| {
        screen.matches("Session exported to:").count() == 2
    });
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
    let started_in = env.workspace.clone();
    for name in ["branch.jsonl", "page.html"] {
        assert!(
            started_in.join(name).is_file(),
            "{name} not where pi started"
        );
        assert!(
            !project.join(name).exists(),
            "{name} written in the session's directory"
        );
    }
}

/// A stored session whose working directory is gone: the REPL asks, as the reference does,
/// whether to continue in the current directory — no leaves pi, yes opens it here.
#[test]
fn the_repl_asks_before_continuing_a_session_whose_directory_is_gone() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    let (session, gone) = env.session_in_a_deleted_directory();
    let tmux = Tmux::start(&env, "gone-no", &["--session", session.as_str()], &[]);
    tmux.wait_for("cwd from session file does not exist");
    tmux.wait_for(&gone.display().to_string());
    tmux.wait_for("Continue in the current directory? [y/N]");
    tmux.line("n");
    assert_eq!(tmux.wait_for_exit(), 0);
    drop(tmux);

    let tmux = Tmux::start(&env, "gone-yes", &["--session", session.as_str()], &[]);
    tmux.wait_for("Continue in the current directory? [y/N]");
    tmux.line("y");
    tmux.wait_for("does not exist; continuing in");
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
}

const UI_EXTENSION: &str = r#"#!/usr/bin/env python3
import os, sys
sys.path.insert(0, os.environ["PI_EXAMPLES"])
from pi_extension import Extension

ext = Extension("ui-demo")

@ext.command("ui", "Exercise the UI calls")
def ui(args):
    ext.set_status("build", "build: green")
    ext.set_widget("todo", ["widget: two tasks left"])
    ext.set_title("pi-ui-title")
    edited = ext.editor("Commit message", prefill="draft")
    ext.notify("edited: %s" % edited)
    ext.set_editor_text("prefilled by the extension")

ext.run()
"#;

/// The REPL serves extensions' status texts, widgets, the title, the editor dialog and the
/// editor text.
#[test]
fn extension_status_widget_title_editor_and_editor_text_in_the_repl() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Done."))]);
    configure(&env, &server);
    let tmux = start_with_extension(&env, "ui", "ui_demo.py", UI_EXTENSION);
    tmux.wait_for_prompt();
    tmux.line("/ui");
    tmux.wait_for("widget: two tasks left");
    tmux.wait_for("Commit message: draft");
    tmux.type_text(" v2");
    tmux.keys(&["Enter"]);
    tmux.wait_for("edited: draft v2");
    // The next prompt starts with the extension's text.
    tmux.wait_for("> prefilled by the extension");
    tmux.keys(&["C-u"]);
    tmux.line("go");
    // The status text follows every status line, the turn's too.
    tmux.wait_for("Done.");
    tmux.wait_for_count("build: green", 2);
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
}

/// Esc (the reference's interrupt) aborts a running turn as Ctrl+C does: the queued steering
/// message goes back into the editor and is never sent; Esc is not echoed as `^[`.
#[test]
fn esc_aborts_a_running_turn_and_puts_its_queue_back() {
    aborting_puts_the_queue_back("escabort", "Escape");
}

#[test]
fn esc_at_the_prompt_never_eats_the_next_key() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![]);
    configure(&env, &server);
    let tmux = Tmux::start(&env, "esckey", &[], &[]);
    tmux.wait_for_prompt();
    tmux.keys(&["Escape"]);
    // More than the editor's wait for the rest of a key sequence.
    std::thread::sleep(Duration::from_millis(300));
    tmux.line("/session");
    tmux.wait_for("Tool Calls:");
    // Esc on a line with text keeps the text.
    tmux.type_text("kept text");
    tmux.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(300));
    let screen = tmux.wait_for("> kept text");
    assert!(!screen.contains("^["), "{screen}");
    tmux.keys(&["C-u"]);
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
    assert_eq!(server.requests().len(), 0, "nothing reached the model");
}

/// Esc twice on an empty prompt does what `doubleEscapeAction` says: the session tree by
/// default, nothing with `none`.
#[test]
fn double_esc_on_an_empty_prompt_opens_the_tree() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("First answer."))]);
    configure(&env, &server);
    let tmux = Tmux::start(&env, "esctree", &[], &[]);
    tmux.wait_for_prompt();
    tmux.line("first question");
    tmux.wait_for("First answer.");
    tmux.wait_for_prompt();
    // Two presses as a person makes them (a terminal sending ESC ESC at once means one Esc).
    tmux.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(150));
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for("Go to entry");
    assert!(screen.contains("user: first question"), "{screen}");
    tmux.keys(&["Enter"]);
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);

    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"doubleEscapeAction": "none"}"#,
    )
    .unwrap();
    let tmux = Tmux::start(&env, "escnone", &["-c"], &[]);
    tmux.wait_for_prompt();
    tmux.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(150));
    tmux.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(500));
    tmux.line("/session");
    let screen = tmux.wait_for("Tool Calls:");
    assert!(!screen.contains("Go to entry"), "{screen}");
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
}

/// What is typed while the agent works is not echoed into its output; the unfinished line is
/// the next prompt's text, and Alt+Up takes the queued messages back into the editor (never
/// sent).
#[test]
fn typed_text_stays_out_of_the_reply_and_alt_up_takes_the_queue_back() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "bash",
            r#"{"command":"while [ ! -e go ]; do sleep 0.05; done; echo released"}"#,
        )),
        MockResponse::sse(sse::openai_text("Done here.")),
    ]);
    configure(&env, &server);
    let tmux = Tmux::start(&env, "altup", &[], &[]);
    tmux.wait_for_prompt();
    tmux.line("start the work");
    server.wait_for_requests(1, Duration::from_secs(30));
    tmux.line("queued words");
    tmux.wait_for("Steering queued: queued words");
    // Alt+Up as terminals send it.
    tmux.type_text("\x1b[1;3A");
    tmux.wait_for("1 queued message taken back");
    tmux.type_text("unfinished thought");
    std::thread::sleep(Duration::from_millis(300));
    let screen = tmux.screen();
    assert!(
        !screen.contains("unfinished thought"),
        "typed text was echoed into the output:\n{screen}"
    );
    std::fs::write(env.workspace.join("go"), "").unwrap();
    tmux.wait_for("Done here.");
    tmux.wait_for("> queued words unfinished thought");
    tmux.keys(&["C-u"]);
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        !requests[1].json()["messages"]
            .to_string()
            .contains("queued words"),
        "the message taken back was sent"
    );
}

/// The answer of the Markdown tests: a heading, emphasis, code, a table, fenced code, a list.
const MARKDOWN_ANSWER: &str = "# Plan ahead\n\nUse **bold** and `code` here.\n\n| key | value |\n|-----|------:|\n| alpha | 10 |\n\n```rust\nfn main() {}\n```\n- last item";

#[test]
fn answers_are_rendered_as_markdown_in_a_terminal_and_written_as_is_with_no_color() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text(MARKDOWN_ANSWER)),
        MockResponse::sse(sse::openai_text(MARKDOWN_ANSWER)),
    ]);
    configure(&env, &server);
    let rendered = [
        "Use bold and code here.",
        "┌───────┬───────┐",
        "│ key   │ value │",
        "│ alpha │    10 │",
        "└───────┴───────┘",
        "```rust",
        "fn main() {}",
        "- last item",
    ];
    let tmux = Tmux::start(&env, "markdown", &[], &[]);
    tmux.wait_for_prompt();
    tmux.line("show me markdown");
    tmux.wait_for("- last item");
    let screen = tmux.wait_until("the table drawn", |screen| {
        screen.contains("└───────┴───────┘")
    });
    for line in rendered {
        assert!(screen.contains(line), "{line:?} not shown:\n{screen}");
    }
    assert!(
        screen.lines().any(|line| line.trim_end() == "Plan ahead"),
        "{screen}"
    );
    assert!(
        !screen.contains("**bold**") && !screen.contains("| key |"),
        "{screen}"
    );
    // The keyword in colour (blue); tmux adds its default background to each colour change.
    let colours = tmux.screen_with_colours().replace("\x1b[49m", "");
    assert!(colours.contains("\x1b[34mfn"), "{colours:?}");
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);

    // The stored history of `pi -c` is rendered too.
    let tmux = Tmux::start(&env, "markdown-again", &["-c"], &[]);
    let screen = tmux.wait_for_prompt();
    assert!(screen.contains("│ alpha │    10 │"), "{screen}");
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);

    // NO_COLOR: the answer as the model wrote it (another agent dir: the test clock and ids
    // would make the same new session id again).
    let env = TestEnv::new();
    configure(&env, &server);
    let tmux = Tmux::start(&env, "markdown-plain", &[], &[("NO_COLOR", "1")]);
    tmux.wait_for_prompt();
    tmux.line("again without colour");
    tmux.wait_for("- last item");
    // The turn's end (its status line) before Ctrl+D.
    let screen = tmux.wait_for("↓20");
    assert!(screen.contains("Use **bold** and `code` here."), "{screen}");
    assert!(screen.contains("| alpha | 10 |"), "{screen}");
    assert!(screen.contains("# Plan ahead"), "{screen}");
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
}

/// [`configure`] with [`two_models_json`], `mock/alpha` the default.
fn configure_two_models(env: &TestEnv, server: &ProviderServer) {
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        two_models_json(&server.url()),
    )
    .unwrap();
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"retry": {"baseDelayMs": 10, "provider": {"maxRetries": 0}}, "defaultModel": "alpha", "defaultProvider": "mock"}"#,
    )
    .unwrap();
}

/// Two reasoning models of the scripted provider (`mock/alpha`, `mock/beta`).
fn two_models_json(base_url: &str) -> String {
    let model = |id: &str| {
        format!(
            r#"{{"id":"{id}","name":"{id}","reasoning":true,"input":["text"],"contextWindow":128000,"maxTokens":4096,"cost":{{"input":1,"output":2,"cacheRead":0,"cacheWrite":0}}}}"#
        )
    };
    format!(
        r#"{{"providers":{{"mock":{{"baseUrl":"{base_url}/v1","api":"openai-completions","apiKey":"test-key","models":[{},{}]}}}}}}"#,
        model("alpha"),
        model("beta")
    )
}

#[test]
fn application_keys_cycle_models_and_thinking_fold_output_edit_externally_and_follow_keybindings_json()
 {
    use serde_json::json;
    let env = TestEnv::new();
    let thinking_answer = sse::openai_chunks(&[
        sse::openai_chunk(json!({"role": "assistant", "content": ""}), None),
        sse::openai_chunk(json!({"reasoning_content": "secret deliberation"}), None),
        sse::openai_chunk(json!({"content": "Visible answer."}), None),
        sse::openai_chunk(json!({}), Some("stop")),
        sse::openai_usage(10, 5),
    ]);
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "bash",
            r#"{"command":"seq 1 30"}"#,
        )),
        MockResponse::sse(sse::openai_text("Counted.")),
        MockResponse::sse(thinking_answer),
        MockResponse::sse(sse::openai_text("Edited prompt answered.")),
    ]);
    configure_two_models(&env, &server);
    // keybindings.json: /new on Alt+N, Ctrl+X unbound, one invalid key warned about.
    std::fs::write(
        env.agent_dir.join("keybindings.json"),
        r#"{"app.session.new": "alt+n", "app.message.copy": [], "app.session.tree": "q"}"#,
    )
    .unwrap();
    // The external editor: a script that appends to the file it is given.
    let editor = env.dir.path().join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nprintf ' and more from the editor' >> \"$1\"\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let tmux = Tmux::start(
        &env,
        "appkeys",
        &[],
        &[("VISUAL", &editor.to_string_lossy())],
    );
    let screen = tmux.wait_for_prompt();
    assert!(screen.contains("\"q\" is needed for typing"), "{screen}");

    // Ctrl+P with text typed: the next model, and the text is still in the prompt.
    tmux.type_text("half typed");
    tmux.keys(&["C-p"]);
    tmux.wait_for("Model: mock/beta");
    tmux.keys(&["C-p"]);
    tmux.wait_for("Model: mock/alpha");
    // Shift+Tab: the next thinking level.
    tmux.keys(&["BTab"]);
    tmux.wait_for("Thinking level: high");
    tmux.keys(&["C-u"]);

    // A long tool result is cut; Ctrl+O shows it whole, and later ones too.
    tmux.line("count please");
    tmux.wait_for("Counted.");
    let screen = tmux.wait_for("more lines");
    assert!(!screen.contains("  15\n"), "{screen}");
    tmux.keys(&["C-o"]);
    let screen = tmux.wait_for("Tool output shown whole");
    assert!(screen.contains("  15\n"), "{screen}");

    // Ctrl+T: thinking collapsed to one line.
    tmux.keys(&["C-t"]);
    tmux.wait_for("Thinking collapsed");
    tmux.line("think about it");
    let screen = tmux.wait_for("Visible answer.");
    assert!(screen.contains("Thinking… (Ctrl+T shows it)"), "{screen}");
    assert!(!screen.contains("secret deliberation"), "{screen}");

    // Ctrl+G: the prompt in $VISUAL, back in the editor edited; Enter sends it.
    tmux.type_text("from the prompt");
    tmux.keys(&["C-g"]);
    tmux.wait_for("> from the prompt and more from the editor");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Edited prompt answered.");

    // Alt+N from keybindings.json: a new session; /hotkeys lists the keys as bound.
    tmux.keys(&["M-n"]);
    tmux.wait_for("New session");
    tmux.line("/hotkeys");
    let screen = tmux.wait_for("(app.session.new)");
    assert!(
        screen.contains("Start a new session (/new): alt+n (app.session.new)"),
        "{screen}"
    );
    assert!(
        screen.contains("Copy the last answer (/copy): (no key) (app.message.copy)"),
        "{screen}"
    );
    assert!(
        screen.contains(
            "Cycle to the previous model: shift+ctrl+p (not sent by this terminal), alt+p"
        ),
        "{screen}"
    );
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[3].json()["model"], "alpha");
    assert!(
        requests[3].json()["messages"]
            .to_string()
            .contains("from the prompt and more from the editor"),
        "the edited prompt was sent"
    );
    assert!(
        !requests
            .iter()
            .any(|r| r.json()["messages"].to_string().contains("half typed")),
        "a key's line is never sent"
    );
}

#[test]
fn scoped_models_and_settings_are_edited_from_the_repl_and_saved() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![]);
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        two_models_json(&server.url()),
    )
    .unwrap();
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"defaultModel": "alpha", "defaultProvider": "mock", "custom": 7}"#,
    )
    .unwrap();
    let tmux = Tmux::start(&env, "scoped", &[], &[]);
    tmux.wait_for_prompt();
    tmux.line("/scoped-models 2");
    tmux.wait_for("2 [x] mock/beta");
    tmux.wait_for("Ctrl+P cycles the checked models");
    // One model in the scope, not the current one: Ctrl+P goes to it (1.6.0's
    // getNextCycleIndex); once there, nothing to cycle to.
    tmux.keys(&["C-p"]);
    tmux.wait_for("Model: mock/beta");
    tmux.keys(&["C-p"]);
    tmux.wait_for("No other model to cycle to");
    tmux.line("/scoped-models 1");
    tmux.wait_for("1 [x] mock/alpha");
    tmux.keys(&["C-p"]);
    tmux.wait_for("(scoped models)");
    tmux.line("/scoped-models 7");
    tmux.wait_for("N from 1 to 2");
    tmux.line("/scoped-models save");
    tmux.wait_for("Saved enabledModels: mock/beta, mock/alpha");

    tmux.line("/settings");
    let screen = tmux.wait_for("/settings NAME VALUE sets one");
    assert!(screen.contains("doubleEscapeAction"), "{screen}");
    tmux.line("/settings doubleEscapeAction none");
    tmux.wait_for("doubleEscapeAction = none");
    tmux.line("/settings hideThinkingBlock maybe");
    tmux.wait_for("hideThinkingBlock: \"maybe\" is not true or false");
    tmux.line("/settings noSuchThing 1");
    tmux.wait_for("is no setting /settings changes");
    tmux.line("/settings autoCompact false");
    tmux.wait_for("autoCompact = false");
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);

    let saved: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.agent_dir.join("settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        saved["enabledModels"],
        serde_json::json!(["mock/beta", "mock/alpha"])
    );
    assert_eq!(saved["doubleEscapeAction"], "none");
    assert_eq!(saved["compaction"]["enabled"], false);
    assert_eq!(saved["custom"], 7, "other settings are kept");
    assert!(server.requests().is_empty(), "nothing went to the model");
}

/// `/model` picks from the models that can be used here and names the others: with words that
/// only unusable models match, why they cannot be used (per provider: the variable to set, the
/// `pi auth login` to run, an API pi does not speak); without words, how many there are.
#[test]
fn model_says_why_a_matching_model_cannot_be_used() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![]);
    configure(&env, &server);
    let tmux = Tmux::start(&env, "model-why", &[], &[]);
    tmux.wait_for_prompt();
    tmux.line("/model radius");
    let screen = tmux.wait_for("is not one pi speaks");
    assert!(
        screen.contains("No available model matches \"radius\""),
        "{screen}"
    );
    assert!(
        screen.contains("matching models pi knows cannot be used here:"),
        "{screen}"
    );
    assert!(screen.contains("radius ("), "{screen}");
    tmux.wait_for_prompt();
    tmux.line("/model mistral-large");
    let screen = tmux.wait_for("no API key: set MISTRAL_API_KEY, or run `pi auth login mistral`");
    assert!(screen.contains("mistral ("), "{screen}");
    tmux.wait_for_prompt();
    tmux.line("/model");
    let screen = tmux.wait_for("Model (number");
    assert!(screen.contains("1 mock/mock-model  ← current"), "{screen}");
    assert!(
        screen.contains("models pi knows cannot be used here (`pi --list-models` says why)"),
        "{screen}"
    );
    tmux.keys(&["Enter"]);
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
}

#[test]
fn themes_colour_the_answers_from_the_reference_s_theme_files_and_settings_switch_them() {
    use pi::modes::theme::{ColorMode, color_sgr};
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text(MARKDOWN_ANSWER)),
        MockResponse::sse(sse::openai_text(MARKDOWN_ANSWER)),
    ]);
    configure(&env, &server);
    // A user theme: the reference's dark one with its own keyword colour, and a broken file.
    let themes = env.agent_dir.join("themes");
    std::fs::create_dir_all(&themes).unwrap();
    let mut mine: serde_json::Value =
        serde_json::from_str(include_str!("../../src/modes/themes/dark.json")).unwrap();
    mine["name"] = "mine".into();
    mine["colors"]["syntaxKeyword"] = "#ff2000".into();
    std::fs::write(themes.join("mine.json"), mine.to_string()).unwrap();
    std::fs::write(
        themes.join("broken.json"),
        r#"{"name":"broken","colors":{"accent":"nowhere"}}"#,
    )
    .unwrap();
    let no_background = |screen: String| screen.replace("\x1b[49m", "");

    let tmux = Tmux::start(
        &env,
        "themes",
        &["--use-theme", "mine"],
        &[("COLORTERM", "truecolor")],
    );
    let screen = tmux.wait_for_prompt();
    assert!(
        screen.contains("broken.json") && screen.contains("variable reference not found: nowhere"),
        "the broken theme is reported:\n{screen}"
    );
    tmux.line("show me markdown");
    // The turn's end (its status line): every line rewritten.
    tmux.wait_for("↓20");
    let colours = no_background(tmux.screen_with_colours());
    assert!(colours.contains("\x1b[38;2;255;32;0mfn"), "{colours:?}");
    // 1.6.0's mdHeading of dark (`yellow`), with the heading's bold.
    let heading = color_sgr(&"okhsl(83 88% 67%)".into(), ColorMode::TrueColor).unwrap();
    assert!(colours.contains(&heading), "{heading:?} not in {colours:?}");

    // /settings theme switches now and saves the setting.
    tmux.line("/settings theme light");
    tmux.wait_for("theme = light");
    let settings: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.agent_dir.join("settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(settings["theme"], "light");
    tmux.line("/settings theme nosuch");
    tmux.wait_for("no theme \"nosuch\"");
    tmux.line("again");
    let light_keyword = color_sgr(&"okhsl(231 68% 47%)".into(), ColorMode::TrueColor).unwrap();
    tmux.wait_until("the second answer in light colours", |_| {
        no_background(tmux.screen_with_colours()).contains(&format!("{light_keyword}fn"))
    });
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);

    // Without a truecolor announcement: the saved theme in the 256-colour palette.
    let tmux = Tmux::start(&env, "themes-256", &["-c"], &[]);
    tmux.wait_for_prompt();
    let colours = no_background(tmux.screen_with_colours());
    let keyword = color_sgr(&"okhsl(231 68% 47%)".into(), ColorMode::Ansi256).unwrap();
    assert!(keyword.starts_with("\x1b[38;5;"));
    assert!(
        colours.contains(&format!("{keyword}fn")),
        "{keyword:?} in {colours:?}"
    );
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
}

/// The walk-through's input: a line typed, or keys sent by name.
enum Walk<'a> {
    Line(&'a str),
    Keys(&'a [&'a str]),
}

#[test]
fn a_walk_through_of_the_new_keys_and_commands_shows_what_a_reference_user_expects() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text(
        "Hi, from **beta**.",
    ))]);
    configure_two_models(&env, &server);
    let tmux = Tmux::start(&env, "walk", &[], &[("NO_COLOR", "1")]);
    tmux.wait_for_prompt();
    let mut walk = Vec::new();
    for (input, last) in [
        (Walk::Line("/hotkeys"), "app.session.resume"),
        (Walk::Line("/scoped-models"), "Ctrl+P cycles every"),
        (Walk::Line("/scoped-models 2"), "Ctrl+P cycles the checked"),
        (Walk::Keys(&["C-p"]), "mock/beta"),
        (Walk::Keys(&["BTab"]), "Thinking level"),
        (Walk::Line("/settings"), "/settings NAME VALUE"),
        (
            Walk::Line("/settings steeringMode all"),
            "steeringMode = all",
        ),
        (Walk::Line("/settings theme dark"), "theme = dark"),
        (Walk::Line("/settings theme nosuch"), "no theme"),
        (Walk::Line("/nosuch"), "Unknown command"),
        (Walk::Line("/sesion"), "Did you mean"),
        (Walk::Line("hello"), "↓"),
    ] {
        // The screen's lines so far, the prompt line this input goes to included.
        let before = tmux.screen().lines().count().saturating_sub(1);
        match input {
            Walk::Line(line) => tmux.line(line),
            Walk::Keys(keys) => tmux.keys(keys),
        }
        let screen = tmux.wait_until(&format!("{last:?}, then the prompt"), |screen| {
            let new: Vec<&str> = screen.lines().skip(before + 1).collect();
            new.iter().any(|line| line.contains(last))
                && new.last().is_some_and(|line| line.trim_end() == ">")
        });
        let lines: Vec<&str> = screen.lines().skip(before).map(str::trim_end).collect();
        // Without the new prompt at the end.
        walk.push(lines[..lines.len() - 1].join("\n"));
    }
    let walk = walk.join("\n");
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suite/walk_through.txt");
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if walk != expected.trim_end() && std::env::var_os("PI_WALK_THROUGH_WRITE").is_some() {
        std::fs::write(&path, format!("{walk}\n")).unwrap();
    }
    pretty_assertions::assert_eq!(walk, expected.trim_end(), "tests/suite/walk_through.txt");
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "only the prompt reached the model");
    assert_eq!(requests[0].json()["model"], "beta");
}
