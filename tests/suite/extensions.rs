//! Extensions end to end: the examples in `examples/extensions/` (Python and Rust) and small
//! fault scripts run as real processes, loaded into a real `AgentSession` against the
//! scripted provider on 127.0.0.1; the tests assert on the store, on what the model was sent
//! and on the session's events.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pi::agent::tool::BoxFuture;
use pi::model::SessionId;
use pi::model::entry::EntryKind;
use pi::model::message::{AgentMessage, ContentBlock, UserContent};
use pi::session::extensions::event::{
    BeforeAgentStartEvent, BeforeAgentStartResult, CustomMessageSpec,
};
use pi::session::extensions::{
    ExecutableExtension, Extension, ExtensionContext, ExtensionOrigin, ExtensionUi,
    ExtensionsConfig, HookFuture, NoUi, NotifyKind,
};
use pi::session::{AgentSession, PromptOptions, SessionError, SessionEvent, SessionTarget};
use pi::store::SessionStore;
use serde_json::Value;

use crate::common::TestEnv;
use crate::common::agent::{Harness, models_json};
use crate::common::provider::{MockResponse, sse};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/extensions")
}

/// The example built by `cargo test` (examples are built with the tests).
fn counter_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let binary = profile_dir.join("examples/counter_extension");
    assert!(binary.is_file(), "{} is not built", binary.display());
    binary
}

fn executable(path: &Path) -> ExecutableExtension {
    ExecutableExtension {
        program: path.to_path_buf(),
        node: false,
        display: path.display().to_string(),
        origin: ExtensionOrigin::CommandLine,
    }
}

fn extensions(paths: &[PathBuf], ui: Arc<dyn ExtensionUi>) -> ExtensionsConfig {
    ExtensionsConfig {
        executables: paths.iter().map(|path| executable(path)).collect(),
        timeout: Duration::from_secs(20),
        ui,
        env: vec![("PATH".into(), std::env::var_os("PATH").unwrap_or_default())],
        ..ExtensionsConfig::default()
    }
}

/// Writes an executable script into the test's temporary directory.
fn script(env: &TestEnv, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = env.dir.path().join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A UI that answers confirmations from a script and records what it was shown.
#[derive(Default)]
struct ScriptedUi {
    answers: Mutex<VecDeque<bool>>,
    asked: Mutex<Vec<String>>,
    notes: Mutex<Vec<String>>,
}

impl ScriptedUi {
    fn answering(answers: &[bool]) -> Arc<Self> {
        Arc::new(Self {
            answers: Mutex::new(answers.iter().copied().collect()),
            ..Self::default()
        })
    }
}

impl ExtensionUi for ScriptedUi {
    fn has_ui(&self) -> bool {
        true
    }

    fn notify(&self, message: &str, _kind: NotifyKind) {
        self.notes.lock().unwrap().push(message.to_owned());
    }

    fn confirm<'a>(
        &'a self,
        _title: &'a str,
        message: &'a str,
        _timeout: Option<Duration>,
    ) -> BoxFuture<'a, bool> {
        self.asked.lock().unwrap().push(message.to_owned());
        let answer = self.answers.lock().unwrap().pop_front().unwrap_or(false);
        Box::pin(async move { answer })
    }

    fn select<'a>(
        &'a self,
        _title: &'a str,
        _options: &'a [String],
        _timeout: Option<Duration>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async { None })
    }

    fn input<'a>(
        &'a self,
        _title: &'a str,
        _placeholder: Option<&'a str>,
        _timeout: Option<Duration>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async { None })
    }
}

fn new_session() -> SessionTarget {
    SessionTarget::New {
        parent_session: None,
    }
}

/// The stored messages of a session, in order.
fn stored_messages(store: &SessionStore, id: &SessionId) -> Vec<AgentMessage> {
    store
        .entries(id)
        .unwrap()
        .into_iter()
        .filter_map(|stored| match stored.entry.kind {
            EntryKind::Message(message) => Some(message),
            _ => None,
        })
        .collect()
}

fn tool_results(store: &SessionStore, id: &SessionId) -> Vec<(String, bool, String)> {
    stored_messages(store, id)
        .into_iter()
        .filter_map(|message| match message {
            AgentMessage::ToolResult(result) => Some((
                result.tool_call_id.clone(),
                result.is_error,
                result
                    .content
                    .iter()
                    .filter_map(ContentBlock::as_text)
                    .collect::<Vec<_>>()
                    .join("\n"),
            )),
            _ => None,
        })
        .collect()
}

fn user_texts(store: &SessionStore, id: &SessionId) -> Vec<String> {
    stored_messages(store, id)
        .into_iter()
        .filter_map(|message| match message {
            AgentMessage::User(user) => Some(match user.content {
                UserContent::Text(text) => text,
                UserContent::Blocks(blocks) => blocks
                    .iter()
                    .filter_map(ContentBlock::as_text)
                    .collect::<Vec<_>>()
                    .join(""),
            }),
            _ => None,
        })
        .collect()
}

fn custom_counts(store: &SessionStore, id: &SessionId) -> Vec<i64> {
    store
        .entries(id)
        .unwrap()
        .into_iter()
        .filter_map(|stored| match stored.entry.kind {
            EntryKind::Custom { custom_type, data } if custom_type == "counter" => {
                data.and_then(|data| data["count"].as_i64())
            }
            _ => None,
        })
        .collect()
}

/// The extension errors received so far.
fn extension_errors(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<SessionEvent>,
) -> Vec<(String, String, String)> {
    let mut errors = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let SessionEvent::ExtensionError {
            extension_path,
            event,
            error,
        } = event
        {
            errors.push((extension_path, event, error));
        }
    }
    errors
}

/// Waits (up to 10 s) until at least `count` extension errors arrived.
async fn wait_for_errors(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<SessionEvent>,
    count: usize,
) -> Vec<(String, String, String)> {
    let mut errors = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while errors.len() < count {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(SessionEvent::ExtensionError {
                extension_path,
                event,
                error,
            })) => errors.push((extension_path, event, error)),
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    errors
}

fn request_text(harness: &Harness, index: usize) -> String {
    let requests = harness.server.requests();
    String::from_utf8_lossy(&requests[index].body).into_owned()
}

async fn prompt(session: &AgentSession, text: &str) {
    session
        .prompt(text, PromptOptions::default())
        .await
        .unwrap();
    session.wait_for_idle().await;
}

// ----- the examples -------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_blocks_rm_rf_without_a_ui_and_the_model_sees_the_reason() {
    let mut harness = Harness::new(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "bash",
            r#"{"command":"rm -rf build"}"#,
        )),
        MockResponse::sse(sse::openai_text("I could not delete it.")),
    ]);
    harness.extensions = extensions(&[examples().join("guard.py")], Arc::new(NoUi));
    let build = harness.env.workspace.join("build");
    std::fs::create_dir_all(&build).unwrap();
    std::fs::write(build.join("keep.txt"), "precious").unwrap();
    let session = harness.open(new_session()).await;
    let mut events = session.subscribe();
    prompt(&session, "Clean the build directory.").await;

    assert!(build.join("keep.txt").exists(), "the command ran");
    let id = session.session_id().await;
    let results = tool_results(&harness.store, &id);
    assert_eq!(results.len(), 1);
    let (call, is_error, text) = &results[0];
    assert_eq!(call, "call_1");
    assert!(is_error);
    assert_eq!(
        text,
        "Blocked: `rm -rf` needs the user's confirmation, and nobody can confirm in this mode. Ask the user to run it themselves."
    );
    // The model's next request carries the reason as the tool result.
    assert!(request_text(&harness, 1).contains("nobody can confirm in this mode"));
    harness.server.assert_tool_calls_answered();
    assert!(extension_errors(&mut events).is_empty());
    session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_asks_the_user_and_runs_only_what_they_allow() {
    let mut harness = Harness::new(vec![
        MockResponse::sse(sse::openai_tool_calls(&[
            (
                "call_1",
                "bash",
                r#"{"command":"git push --force origin main"}"#,
            ),
            (
                "call_2",
                "bash",
                r#"{"command":"rm -rf build && echo cleaned"}"#,
            ),
            ("call_3", "bash", r#"{"command":"echo harmless"}"#),
        ])),
        MockResponse::sse(sse::openai_text("Done.")),
    ]);
    let ui = ScriptedUi::answering(&[false, true]);
    harness.extensions = extensions(&[examples().join("guard.py")], ui.clone());
    let build = harness.env.workspace.join("build");
    std::fs::create_dir_all(&build).unwrap();
    let session = harness.open(new_session()).await;
    prompt(&session, "Push and clean up.").await;

    assert_eq!(
        *ui.asked.lock().unwrap(),
        [
            "Allow `git push --force origin main`?",
            "Allow `rm -rf build && echo cleaned`?"
        ]
    );
    assert!(!build.exists(), "the allowed command did not run");
    let id = session.session_id().await;
    let results = tool_results(&harness.store, &id);
    assert_eq!(
        results[0],
        (
            "call_1".to_owned(),
            true,
            "Blocked by the user: `git push --force` was not allowed.".to_owned()
        )
    );
    assert_eq!((results[1].1, results[1].2.trim()), (false, "cleaned"));
    assert_eq!((results[2].1, results[2].2.trim()), (false, "harmless"));
    session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn line_numbers_rewrite_read_results_and_the_model_sees_the_rewritten_text() {
    let mut harness = Harness::new(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "read",
            r#"{"path":"notes.txt"}"#,
        )),
        MockResponse::sse(sse::openai_text("Line 2 says beta.")),
    ]);
    harness.extensions = extensions(&[examples().join("line_numbers.py")], Arc::new(NoUi));
    std::fs::write(harness.env.workspace.join("notes.txt"), "alpha\nbeta\n").unwrap();
    let session = harness.open(new_session()).await;
    prompt(&session, "What is on line 2?").await;

    let id = session.session_id().await;
    let results = tool_results(&harness.store, &id);
    assert_eq!(
        results,
        [("call_1".to_owned(), false, "1  alpha\n2  beta\n".to_owned())]
    );
    let next = harness.server.requests()[1].json();
    let tool_message = next["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(tool_message["content"], "1  alpha\n2  beta\n");
    session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_transform_changes_the_stored_user_message_and_handled_input_sends_nothing() {
    let mut harness = Harness::new(vec![MockResponse::sse(sse::openai_text("Fixed."))]);
    let ui = ScriptedUi::answering(&[]);
    harness.extensions = extensions(&[examples().join("snippets.py")], ui.clone());
    let session = harness.open(new_session()).await;
    prompt(&session, ";;fix parser.rs").await;
    prompt(&session, ";;ping").await;

    let id = session.session_id().await;
    assert_eq!(
        user_texts(&harness.store, &id),
        ["Find the bug in parser.rs and fix it. Explain the cause first."]
    );
    assert!(request_text(&harness, 0).contains("Find the bug in parser.rs and fix it."));
    assert_eq!(
        harness.server.requests().len(),
        1,
        ";;ping reached the model"
    );
    assert_eq!(*ui.notes.lock().unwrap(), ["pong"]);
    session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_counter_registers_a_tool_and_a_command_and_keeps_its_count_across_resume() {
    let mut harness = Harness::new(vec![
        MockResponse::sse(sse::openai_tool_call("call_1", "counter", r#"{"by":2}"#)),
        MockResponse::sse(sse::openai_text("The counter is at 2.")),
    ]);
    let ui = ScriptedUi::answering(&[]);
    harness.extensions = extensions(&[counter_binary()], ui.clone());
    let session = harness.open(new_session()).await;
    assert!(session.active_tool_names().contains(&"counter".to_owned()));
    prompt(&session, "Add two to the counter.").await;
    prompt(&session, "/count").await;

    let id = session.session_id().await;
    // The model was offered the tool, and its call ran in the extension.
    assert!(request_text(&harness, 0).contains(r#""name":"counter""#));
    assert_eq!(
        tool_results(&harness.store, &id),
        [("call_1".to_owned(), false, "Counter: 2".to_owned())]
    );
    // The command ran without a model call.
    assert_eq!(harness.server.requests().len(), 2);
    assert_eq!(*ui.notes.lock().unwrap(), ["Counter: 3"]);
    assert_eq!(custom_counts(&harness.store, &id), [2, 3]);
    // Custom entries never reach the context.
    assert!(
        harness
            .store
            .context(&id, &pi::store::LeafSelector::Current)
            .unwrap()
            .agent_messages()
            .iter()
            .all(|message| !matches!(message, AgentMessage::Custom(_)))
    );
    session.shutdown().await;

    // Resume at startup: the extension reads its entries back.
    let resumed = harness.open(SessionTarget::Open(id.clone())).await;
    prompt(&resumed, "/count 4").await;
    assert_eq!(ui.notes.lock().unwrap().last().unwrap(), "Counter: 7");
    resumed.shutdown().await;

    // `/resume` from another session: `session_start` with reason `resume`.
    let other = harness.open(new_session()).await;
    prompt(&other, "/count").await;
    assert_eq!(ui.notes.lock().unwrap().last().unwrap(), "Counter: 1");
    other.switch_session(id.clone()).await.unwrap();
    prompt(&other, "/count").await;
    assert_eq!(ui.notes.lock().unwrap().last().unwrap(), "Counter: 8");
    assert_eq!(custom_counts(&harness.store, &id), [2, 3, 7, 8]);
    other.shutdown().await;
}

// ----- lifecycle ----------------------------------------------------------------------------

const RECORDER: &str = r#"#!/usr/bin/env python3
import os, sys
sys.path.insert(0, os.environ["PI_EXAMPLES"])
from pi_extension import Extension

ext = Extension("recorder")

def log(line):
    with open(os.path.join(ext.cwd, "events.log"), "a") as out:
        out.write(line + "\n")

@ext.on("session_start")
def start(event):
    log("session_start %s %s" % (event["reason"], "previous" if event.get("previousSessionId") else "-"))

@ext.on("session_shutdown")
def shutdown(event):
    log("session_shutdown %s" % event["reason"])

@ext.on("session_before_switch")
def before_switch(event):
    denied = os.path.exists(os.path.join(ext.cwd, "deny-switch"))
    log("session_before_switch %s%s" % (event["reason"], " cancel" if denied else ""))
    return {"cancel": True} if denied else None

@ext.on("session_before_fork")
def before_fork(event):
    log("session_before_fork %s" % event["position"])

@ext.on("model_select")
def model_select(event):
    log("model_select %s/%s %s" % (event["model"]["provider"], event["model"]["id"], event["source"]))

@ext.on("turn_start")
def turn_start(event):
    log("turn_start %d" % event["turnIndex"])

@ext.on("turn_end")
def turn_end(event):
    log("turn_end %d" % event["turnIndex"])

ext.run()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_session_runtime_gets_start_and_shutdown_and_a_switch_can_be_cancelled() {
    let mut harness = Harness::new(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "bash",
            r#"{"command":"true"}"#,
        )),
        MockResponse::sse(sse::openai_text("Ok.")),
    ]);
    let recorder = script(&harness.env, "recorder.py", RECORDER);
    let mut config = extensions(&[recorder], Arc::new(NoUi));
    config
        .env
        .push(("PI_EXAMPLES".into(), examples().into_os_string()));
    harness.extensions = config;
    let session = harness.open(new_session()).await;
    prompt(&session, "Run true.").await;
    let first = session.session_id().await;
    session.new_session(None).await.unwrap();
    session.switch_session(first.clone()).await.unwrap();
    std::fs::write(harness.env.workspace.join("deny-switch"), "").unwrap();
    let refused = session.new_session(None).await;
    assert!(
        matches!(refused, Err(SessionError::Cancelled)),
        "{refused:?}"
    );
    assert_eq!(session.session_id().await, first);
    session.clone_session().await.unwrap();
    // The same model again: no `model_select`.
    session.set_model(session.model().unwrap()).await.unwrap();
    session.shutdown().await;

    let log = std::fs::read_to_string(harness.env.workspace.join("events.log")).unwrap();
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [
            "session_start startup -",
            "turn_start 0",
            "turn_end 0",
            "turn_start 1",
            "turn_end 1",
            "session_before_switch new",
            "session_shutdown new",
            "session_start new previous",
            "session_before_switch resume",
            "session_shutdown resume",
            "session_start resume previous",
            "session_before_switch new cancel",
            "session_before_fork at",
            "session_shutdown fork",
            "session_start fork previous",
            "session_shutdown quit",
        ]
    );
}

const KEEPER: &str = r#"#!/usr/bin/env python3
import os, sys
sys.path.insert(0, os.environ["PI_EXAMPLES"])
from pi_extension import Extension

ext = Extension("keeper")

def log(line):
    with open(os.path.join(ext.cwd, "keeper.log"), "a") as out:
        out.write(line + "\n")

@ext.on("session_before_compact")
def before_compact(event):
    prep = event["preparation"]
    log("before_compact %s summarize=%d kept=%s entries=%d" % (
        event.get("customInstructions"), len(prep["messagesToSummarize"]),
        prep["firstKeptEntryId"], len(event["branchEntries"])))
    if event.get("customInstructions") == "cancel":
        return {"cancel": True}
    return {"compaction": {"summary": "Summary by the extension", "firstKeptEntryId": prep["firstKeptEntryId"],
                           "tokensBefore": prep["tokensBefore"], "details": {"by": "keeper"}}}

@ext.on("session_compact")
def compacted(event):
    log("compacted %s %s" % (event["fromExtension"], event["compactionEntry"]["summary"]))

@ext.on("session_before_tree")
def before_tree(event):
    prep = event["preparation"]
    log("before_tree target=%s old=%s common=%s entries=%d wants=%s" % (
        prep["targetId"], prep["oldLeafId"], prep["commonAncestorId"],
        len(prep["entriesToSummarize"]), prep["userWantsSummary"]))
    if os.path.exists(os.path.join(ext.cwd, "deny-tree")):
        return {"cancel": True}
    return {"summary": {"summary": "Branch summary by the extension", "details": {"by": "keeper"}},
            "label": "explored"}

@ext.on("session_tree")
def moved(event):
    summary = event.get("summaryEntry") or {}
    log("tree from=%s summary=%s" % (event.get("fromExtension"), summary.get("summary")))

ext.run()
"#;

async fn keeper_session(harness: &mut Harness) -> AgentSession {
    let keeper = script(&harness.env, "keeper.py", KEEPER);
    let mut config = extensions(&[keeper], Arc::new(NoUi));
    config
        .env
        .push(("PI_EXAMPLES".into(), examples().into_os_string()));
    harness.extensions = config;
    harness.settings.compaction.keep_recent_tokens = 20;
    let session = harness.open(new_session()).await;
    prompt(&session, "First question about apples.").await;
    prompt(
        &session,
        &format!("Second question: {}", "pears ".repeat(15).trim_end()),
    )
    .await;
    session
}

fn keeper_log(harness: &Harness) -> Vec<String> {
    std::fs::read_to_string(harness.env.workspace.join("keeper.log"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn entries_of(store: &SessionStore, id: &SessionId, type_name: &str) -> Vec<Value> {
    store
        .entries(id)
        .unwrap()
        .into_iter()
        .filter(|stored| stored.entry.kind.type_name() == type_name)
        .map(|stored| serde_json::from_slice(&stored.payload).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_compaction_leaves_no_entry_and_a_supplied_summary_is_stored() {
    let mut harness = Harness::new(vec![
        MockResponse::sse(sse::openai_text("First answer.")),
        MockResponse::sse(sse::openai_text("Second answer.")),
    ]);
    let session = keeper_session(&mut harness).await;
    let id = session.session_id().await;
    let path_len = harness
        .store
        .branch_path(&id, &pi::store::LeafSelector::Current)
        .unwrap()
        .len();
    let mut events = session.subscribe();

    let cancelled = session.compact(Some("cancel".into())).await;
    assert_eq!(cancelled.unwrap_err().to_string(), "Compaction cancelled");
    assert!(entries_of(&harness.store, &id, "compaction").is_empty());

    let result = session.compact(None).await.unwrap();
    assert_eq!(result["summary"], "Summary by the extension");
    assert_eq!(result["details"], serde_json::json!({"by": "keeper"}));
    let stored = entries_of(&harness.store, &id, "compaction");
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["summary"], "Summary by the extension");
    assert_eq!(stored[0]["fromHook"], true);
    assert_eq!(stored[0]["details"], serde_json::json!({"by": "keeper"}));
    assert_eq!(stored[0]["firstKeptEntryId"], result["firstKeptEntryId"]);
    // No model call summarised anything; the transcript starts with the supplied summary.
    assert_eq!(harness.server.requests().len(), 2);
    // 1.6.0 stores the checkpoint with an extension's summary too: it leads the transcript.
    assert!(matches!(&session.messages()[0], AgentMessage::System(_)));
    assert!(stored[0].get("systemMessage").is_some());
    assert!(matches!(
        &session.messages()[1],
        AgentMessage::CompactionSummary(summary) if summary.summary == "Summary by the extension"
    ));
    let ends: Vec<Value> = std::iter::from_fn(|| events.try_recv().ok())
        .filter_map(|event| event.to_json())
        .filter(|event| event["type"] == "compaction_end")
        .collect();
    assert_eq!(ends.len(), 2);
    assert_eq!(ends[0]["aborted"], true);
    assert!(ends[0].get("errorMessage").is_none());
    assert_eq!(ends[1]["result"]["summary"], "Summary by the extension");
    session.shutdown().await;

    let kept = result["firstKeptEntryId"].as_str().unwrap().to_owned();
    let log = keeper_log(&harness);
    assert_eq!(log.len(), 3, "{log:?}");
    assert!(
        log[0].starts_with("before_compact cancel summarize="),
        "{log:?}"
    );
    assert!(
        log[0].ends_with(&format!("kept={kept} entries={path_len}")),
        "{log:?}"
    );
    assert!(
        log[1].starts_with("before_compact None summarize="),
        "{log:?}"
    );
    assert_eq!(log[2], "compacted True Summary by the extension");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tree_navigation_can_be_cancelled_or_get_its_branch_summary_from_an_extension() {
    let mut harness = Harness::new(vec![
        MockResponse::sse(sse::openai_text("First answer.")),
        MockResponse::sse(sse::openai_text("Second answer.")),
    ]);
    let session = keeper_session(&mut harness).await;
    let id = session.session_id().await;
    let path = harness
        .store
        .branch_path(&id, &pi::store::LeafSelector::Current)
        .unwrap();
    let ids: Vec<String> = path
        .iter()
        .map(|stored| stored.entry.id.as_ref().unwrap().to_string())
        .collect();
    // model_change, thinking_level_change, the system message, user 1, assistant 1, user 2,
    // assistant 2.
    let (first_answer, second_question, leaf) = (&ids[4], &ids[5], &ids[6]);
    let target = pi::model::ids::EntryId::new(second_question.as_str());
    let options = pi::session::NavigateOptions {
        summarize: true,
        ..pi::session::NavigateOptions::default()
    };

    std::fs::write(harness.env.workspace.join("deny-tree"), "").unwrap();
    let outcome = session
        .navigate_tree_with(&target, options.clone())
        .await
        .unwrap();
    assert!(outcome.cancelled);
    assert_eq!(
        harness
            .store
            .leaf(&id)
            .unwrap()
            .unwrap()
            .entry
            .id
            .unwrap()
            .to_string(),
        *leaf
    );

    std::fs::remove_file(harness.env.workspace.join("deny-tree")).unwrap();
    let outcome = session.navigate_tree_with(&target, options).await.unwrap();
    assert!(!outcome.cancelled);
    assert!(outcome.editor_text.unwrap().starts_with("Second question"));
    let summaries = entries_of(&harness.store, &id, "branch_summary");
    assert_eq!(summaries.len(), 1);
    assert_eq!(summaries[0]["summary"], "Branch summary by the extension");
    assert_eq!(summaries[0]["fromHook"], true);
    assert_eq!(summaries[0]["details"], serde_json::json!({"by": "keeper"}));
    assert_eq!(summaries[0]["parentId"], first_answer.as_str());
    let labels = harness.store.labels(&id).unwrap();
    assert_eq!(labels.len(), 1);
    assert_eq!(labels[0].0.as_str(), summaries[0]["id"].as_str().unwrap());
    assert_eq!(labels[0].1, "explored");
    assert_eq!(
        harness.server.requests().len(),
        2,
        "no summary was generated"
    );
    session.shutdown().await;

    // The target is on the old path: it is the common ancestor, only the answer is left.
    let line = format!(
        "before_tree target={second_question} old={leaf} common={second_question} entries=1 wants=True"
    );
    assert_eq!(
        keeper_log(&harness),
        [
            line.clone(),
            line,
            "tree from=True summary=Branch summary by the extension".to_owned()
        ]
    );
}

// ----- /reload -----------------------------------------------------------------------------

const RELOADED: &str = r#"#!/usr/bin/env python3
import os, sys
sys.path.insert(0, os.environ["PI_EXAMPLES"])
from pi_extension import Extension

ext = Extension("reloaded")

def log(line):
    with open(os.path.join(ext.cwd, "reloaded.log"), "a") as out:
        out.write(line + "\n")

@ext.on("session_start")
def started(event):
    log("start %s pid=%d" % (event["reason"], os.getpid()))

@ext.on("session_shutdown")
def stopped(event):
    log("shutdown %s pid=%d" % (event["reason"], os.getpid()))

@ext.tool("stamp", "Returns a stamp.", {"type": "object", "properties": {}})
def stamp(params, call):
    return "stamped"

ext.run()
"#;

/// `/reload` as the reference's: the running extensions get `session_shutdown` (reload) and
/// stop, new ones start and get `session_start` (reload); their tools stay registered and
/// active; context files are read again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_restarts_the_extensions_and_reads_the_resources_again() {
    let mut harness = Harness::new(vec![
        MockResponse::sse(sse::openai_text("Before.")),
        MockResponse::sse(sse::openai_text("After.")),
    ]);
    let path = script(&harness.env, "reloaded.py", RELOADED);
    let mut config = extensions(&[path], Arc::new(NoUi));
    config
        .env
        .push(("PI_EXAMPLES".into(), examples().into_os_string()));
    harness.extensions = config;
    let session = harness.open(new_session()).await;
    prompt(&session, "First.").await;
    std::fs::write(
        harness.env.workspace.join("AGENTS.md"),
        "Rules written after startup.\n",
    )
    .unwrap();
    session.reload().await;
    prompt(&session, "Second.").await;
    session.shutdown().await;

    let log: Vec<String> = std::fs::read_to_string(harness.env.workspace.join("reloaded.log"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let words: Vec<String> = log
        .iter()
        .map(|line| line.split(" pid=").next().unwrap().to_owned())
        .collect();
    assert_eq!(
        words,
        [
            "start startup",
            "shutdown reload",
            "start reload",
            "shutdown quit"
        ],
        "{log:?}"
    );
    let pid = |line: &str| line.split("pid=").nth(1).unwrap().to_owned();
    assert_eq!(
        pid(&log[0]),
        pid(&log[1]),
        "the first process got the shutdown"
    );
    assert_ne!(pid(&log[1]), pid(&log[2]), "a new process started");

    let requests = harness.server.requests();
    let tools = |index: usize| -> Vec<String> {
        requests[index].json()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(tools(0).contains(&"stamp".to_owned()), "{:?}", tools(0));
    assert_eq!(tools(0), tools(1), "the active tools are kept");
    let system = |index: usize| {
        requests[index].json()["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(!system(0).contains("Rules written after startup."));
    assert!(
        system(1).contains("Rules written after startup."),
        "{}",
        system(1)
    );
}

// ----- an in-process extension --------------------------------------------------------------

/// A built-in feature on the same bus: injects a note and a system prompt line, masks a word
/// in what the model sees (not in the store), and rewrites the stored answer.
struct Redactor;

impl Extension for Redactor {
    fn path(&self) -> &str {
        "<builtin:redactor>"
    }

    fn on_before_agent_start<'a>(
        &'a self,
        event: &'a BeforeAgentStartEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<BeforeAgentStartResult>> {
        Box::pin(async move {
            Ok(Some(BeforeAgentStartResult {
                message: Some(CustomMessageSpec {
                    custom_type: "note".into(),
                    content: UserContent::Text("Remember: tests first.".into()),
                    display: false,
                    details: None,
                }),
                system_prompt: Some(format!("{}\nAlways answer briefly.", event.system_prompt)),
            }))
        })
    }

    fn on_context<'a>(
        &'a self,
        messages: &'a [AgentMessage],
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<Vec<AgentMessage>>> {
        Box::pin(async move {
            let masked = messages
                .iter()
                .map(|message| match message {
                    AgentMessage::User(user) => {
                        let mut user = user.clone();
                        user.content = UserContent::Text(
                            user.content.joined_text().replace("swordfish", "*****"),
                        );
                        AgentMessage::User(user)
                    }
                    other => other.clone(),
                })
                .collect();
            Ok(Some(masked))
        })
    }

    fn on_message_end<'a>(
        &'a self,
        message: &'a AgentMessage,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<AgentMessage>> {
        Box::pin(async move {
            let AgentMessage::Assistant(assistant) = message else {
                return Ok(None);
            };
            let mut assistant = assistant.clone();
            assistant.content = vec![ContentBlock::text(format!(
                "[checked] {}",
                assistant.text()
            ))];
            Ok(Some(AgentMessage::Assistant(assistant)))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_extension_shapes_the_request_and_the_stored_answer() {
    let mut harness = Harness::new(vec![MockResponse::sse(sse::openai_text("Noted."))]);
    harness.extensions = ExtensionsConfig {
        builtin: vec![Arc::new(|| Arc::new(Redactor) as Arc<dyn Extension>)],
        ..ExtensionsConfig::default()
    };
    let session = harness.open(new_session()).await;
    prompt(&session, "My password is swordfish.").await;

    let request = harness.server.requests()[0].json();
    let messages = request["messages"].as_array().unwrap();
    let system = messages[0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(system.ends_with("\nAlways answer briefly."), "{system}");
    let sent = serde_json::to_string(messages).unwrap();
    assert!(sent.contains("My password is *****."));
    assert!(!sent.contains("swordfish"));
    assert!(sent.contains("Remember: tests first."));

    let id = session.session_id().await;
    let kinds: Vec<String> = harness
        .store
        .entries(&id)
        .unwrap()
        .into_iter()
        .map(|stored| match stored.entry.kind {
            EntryKind::Message(message) => format!("message:{}", message.role()),
            EntryKind::CustomMessage { custom_type, .. } => format!("custom_message:{custom_type}"),
            other => other.type_name().to_owned(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "model_change",
            "thinking_level_change",
            "message:system",
            "message:user",
            "custom_message:note",
            "message:assistant"
        ]
    );
    assert_eq!(
        user_texts(&harness.store, &id),
        ["My password is swordfish."]
    );
    let answer = stored_messages(&harness.store, &id)
        .into_iter()
        .find_map(|message| match message {
            AgentMessage::Assistant(assistant) => Some(assistant.text()),
            _ => None,
        })
        .unwrap();
    assert_eq!(answer, "[checked] Noted.");
    session.shutdown().await;
}

// ----- faults -------------------------------------------------------------------------------

struct Fault {
    script: &'static str,
    timeout: Duration,
    event: &'static str,
    error: &'static str,
}

/// Runs one turn with a tool call next to a faulty extension and checks: one clear error, the
/// conversation complete in the store, every tool call answered.
async fn check_fault(fault: Fault) -> Vec<(String, bool, String)> {
    let mut harness = Harness::new(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "bash",
            r#"{"command":"echo first"}"#,
        )),
        MockResponse::sse(sse::openai_tool_call(
            "call_2",
            "bash",
            r#"{"command":"echo second"}"#,
        )),
        MockResponse::sse(sse::openai_text("All done.")),
    ]);
    let path = script(&harness.env, "faulty", fault.script);
    let mut config = extensions(std::slice::from_ref(&path), Arc::new(NoUi));
    config.timeout = fault.timeout;
    harness.extensions = config;
    let session = harness.open(new_session()).await;
    let mut events = session.subscribe();
    prompt(&session, "Echo twice.").await;

    let mut errors = wait_for_errors(&mut events, 1).await;
    // Nothing else arrives later.
    tokio::time::sleep(Duration::from_millis(200)).await;
    errors.extend(extension_errors(&mut events));
    assert_eq!(errors.len(), 1, "{errors:?}");
    let (extension_path, event, error) = &errors[0];
    assert_eq!(extension_path, &path.display().to_string());
    assert_eq!(event, fault.event);
    assert_eq!(error, fault.error);
    assert!(!error.contains('\n'));

    let id = session.session_id().await;
    let roles: Vec<String> = stored_messages(&harness.store, &id)
        .iter()
        .map(|message| message.role().to_owned())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "toolResult",
            "assistant",
            "toolResult",
            "assistant"
        ]
    );
    harness.server.assert_tool_calls_answered();
    session.shutdown().await;
    tool_results(&harness.store, &id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_that_crashes_at_start_is_reported_once_and_the_session_goes_on() {
    let results = check_fault(Fault {
        script: "#!/bin/sh\necho 'config file missing' >&2\nexit 3\n",
        timeout: Duration::from_secs(20),
        event: "load",
        error: "failed to start: exited with status 3 before its handshake: config file missing",
    })
    .await;
    assert!(results.iter().all(|(_, is_error, _)| !is_error));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_that_writes_garbage_is_stopped_and_reported_once() {
    let results = check_fault(Fault {
        script: "#!/bin/sh\nread -r hello\necho '{\"type\":\"register\",\"events\":[\"turn_start\"]}'\nread -r event\necho 'Traceback (most recent call last): oops'\nsleep 30\n",
        timeout: Duration::from_secs(20),
        event: "turn_start",
        error: "sent a line that is not a JSON object: Traceback (most recent call last): oops; extension stopped",
    })
    .await;
    assert!(results.iter().all(|(_, is_error, _)| !is_error));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_that_never_answers_times_out_blocks_that_call_only_and_is_stopped() {
    let results = check_fault(Fault {
        script: "#!/bin/sh\nread -r hello\necho '{\"type\":\"register\",\"events\":[\"tool_call\"]}'\nwhile read -r line; do :; done\n",
        timeout: Duration::from_millis(1500),
        event: "tool_call",
        error: "did not answer `tool_call` within 1500 ms; extension stopped",
    })
    .await;
    // The guard that went silent blocks the call it owed an answer for; the next call runs.
    assert!(results[0].1);
    assert!(
        results[0]
            .2
            .contains("did not answer `tool_call` within 1500 ms")
    );
    assert_eq!((results[1].1, results[1].2.trim()), (false, "second"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_that_exits_mid_session_is_reported_once_and_the_session_goes_on() {
    let results = check_fault(Fault {
        script: "#!/bin/sh\nread -r hello\necho '{\"type\":\"register\",\"events\":[\"agent_start\"]}'\nread -r event\nid=$(printf '%s' \"$event\" | sed 's/.*\"id\":\\([0-9]*\\).*/\\1/')\necho \"{\\\"type\\\":\\\"response\\\",\\\"id\\\":$id}\"\necho 'giving up after the first event' >&2\nexit 7\n",
        timeout: Duration::from_secs(20),
        event: "process",
        error: "exited with status 7: giving up after the first event",
    })
    .await;
    assert!(results.iter().all(|(_, is_error, _)| !is_error));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_that_stops_reading_its_input_cannot_block_the_session() {
    let mut harness = Harness::new(vec![MockResponse::sse(sse::openai_text("Read it."))]);
    // Registers for `context`, then never reads again: a large event fills the pipe.
    let path = script(
        &harness.env,
        "deaf",
        "#!/bin/sh\nread -r hello\necho '{\"type\":\"register\",\"events\":[\"context\"]}'\nexec sleep 60\n",
    );
    let mut config = extensions(std::slice::from_ref(&path), Arc::new(NoUi));
    config.timeout = Duration::from_millis(1500);
    harness.extensions = config;
    let session = harness.open(new_session()).await;
    let mut events = session.subscribe();
    let long = "lorem ipsum ".repeat(40_000);
    prompt(&session, &long).await;

    let errors = wait_for_errors(&mut events, 1).await;
    assert_eq!(
        errors,
        [(
            path.display().to_string(),
            "context".to_owned(),
            "stopped reading its input (its input stayed full for 1500 ms); extension stopped"
                .to_owned()
        )]
    );
    let id = session.session_id().await;
    let roles: Vec<String> = stored_messages(&harness.store, &id)
        .iter()
        .map(|message| message.role().to_owned())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant"]);
    session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_may_run_longer_than_the_timeout() {
    let mut harness = Harness::new(vec![
        MockResponse::sse(sse::openai_tool_call("call_1", "build", r#"{}"#)),
        MockResponse::sse(sse::openai_text("Built.")),
    ]);
    let builder = script(
        &harness.env,
        "builder.py",
        "#!/usr/bin/env python3\nimport os, sys, time\nsys.path.insert(0, os.environ['PI_EXAMPLES'])\nfrom pi_extension import Extension\next = Extension('builder')\n\n@ext.tool('build', 'Build the project')\ndef build(params, call):\n    time.sleep(2.5)\n    return 'built'\n\n@ext.on('tool_execution_end')\ndef ended(event):\n    return None\n\next.run()\n",
    );
    let mut config = extensions(&[builder], Arc::new(NoUi));
    config.timeout = Duration::from_millis(1000);
    config
        .env
        .push(("PI_EXAMPLES".into(), examples().into_os_string()));
    harness.extensions = config;
    let session = harness.open(new_session()).await;
    let mut events = session.subscribe();
    prompt(&session, "Build it.").await;
    let id = session.session_id().await;
    assert_eq!(
        tool_results(&harness.store, &id),
        [("call_1".to_owned(), false, "built".to_owned())]
    );
    assert!(extension_errors(&mut events).is_empty());
    session.shutdown().await;
}

// ----- the command line ---------------------------------------------------------------------

#[test]
fn print_mode_loads_extensions_reports_faults_on_stderr_and_hosts_reference_extensions() {
    let env = TestEnv::new();
    let server = crate::common::provider::ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "bash",
            r#"{"command":"rm -rf build"}"#,
        )),
        MockResponse::sse(sse::openai_text("It was blocked.")),
    ]);
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json(&server.url(), 128_000),
    )
    .unwrap();
    let extension_dir = env.workspace.join(".pi/extensions");
    std::fs::create_dir_all(&extension_dir).unwrap();
    std::fs::write(
        extension_dir.join("theirs.ts"),
        "export default () => {};\n",
    )
    .unwrap();
    // The guard comes from the project settings, the crashing one from the command line.
    std::fs::write(
        env.workspace.join(".pi/settings.json"),
        serde_json::json!({"executableExtensions": [examples().join("guard.py")]}).to_string(),
    )
    .unwrap();
    std::fs::create_dir_all(env.workspace.join("build")).unwrap();
    let crash = script(
        &env,
        "crash.sh",
        "#!/bin/sh\necho 'no config' >&2\nexit 2\n",
    );
    let output = env
        .pi()
        // The guard is the project's: trusted for this run (`docs/SECURITY.md`).
        .args(["-a", "-p", "--model", "mock/mock-model", "-e"])
        .arg(&crash)
        .arg("Clean up.")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "It was blocked.\n");
    assert!(env.workspace.join("build").exists());
    // The reference's extension is no longer skipped: the Node host loads it (quietly).
    assert!(!stderr.contains("Skipped"), "{stderr}");
    assert!(!stderr.contains("theirs.ts"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "Extension error ({}): failed to start: exited with status 2 before its handshake: no config",
            crash.display()
        )),
        "{stderr}"
    );
    let sent = String::from_utf8_lossy(&server.requests()[1].body).into_owned();
    assert!(sent.contains("nobody can confirm in this mode"));
}

// ----- calls into the session ---------------------------------------------------------------

const HELPER: &str = r#"#!/usr/bin/env python3
import os, sys, time
sys.path.insert(0, os.environ["PI_EXAMPLES"])
from pi_extension import Extension, PiError

ext = Extension("helper")

@ext.command("note", "Add a note to the context")
def note(args):
    ext.send_message("note", args, display=True, details={"from": "helper"})

@ext.command("ask", "Ask the model")
def ask(args):
    ext.send_user_message(args)

@ext.command("meta", "Name the session and label the leaf")
def meta(args):
    ext.call("setSessionName", name="  " + args + "  ")
    leaf = ext.call("getLeafId")
    ext.call("setLabel", entryId=leaf, label="checkpoint")
    entries = ext.get_entries()
    tools = ext.call("getActiveTools")
    ext.call("setActiveTools", toolNames=[name for name in tools if name != "write"])
    done = ext.exec("sh", ["-c", "printf %s \"$PWD\""])
    try:
        ext.call("setThinkingLevel", level="loud")
    except PiError as error:
        refused = str(error)
    ext.append_entry("helper", {"entries": len(entries), "pwd": done["stdout"], "refused": refused,
                                "model": ext.call("getModel")["id"], "idle": ext.call("isIdle")})

@ext.tool("ls", "List files (the extension's own version)")
def ls(params, call):
    return {"content": [{"type": "text", "text": "listed by the extension"}], "details": {"by": "helper"}}

@ext.tool("slow", "Count slowly")
def slow(params, call):
    for step in range(200):
        call.update("step %d" % step)
        time.sleep(0.05)
    return "finished"

@ext.on("user_bash")
def user_bash(event):
    if event["command"].startswith("remote:"):
        return {"result": {"output": "ran remotely: " + event["command"][7:], "exitCode": 0,
                           "cancelled": False, "truncated": False}}
    return None

ext.run()
"#;

async fn helper_session(harness: &mut Harness) -> AgentSession {
    let helper = script(&harness.env, "helper.py", HELPER);
    let mut config = extensions(&[helper], Arc::new(NoUi));
    config
        .env
        .push(("PI_EXAMPLES".into(), examples().into_os_string()));
    harness.extensions = config;
    harness.open(new_session()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_sends_messages_names_labels_and_reads_its_session() {
    let mut harness = Harness::new(vec![
        MockResponse::sse(sse::openai_text("First answer.")),
        MockResponse::sse(sse::openai_tool_call("call_1", "ls", r#"{}"#)),
        MockResponse::sse(sse::openai_text("Second answer.")),
    ]);
    let session = helper_session(&mut harness).await;
    prompt(&session, "Hello.").await;
    prompt(&session, "/note Keep it short.").await;
    // `sendUserMessage` runs in the background; `wait_for_idle` waits for it.
    prompt(&session, "/ask What is in here?").await;
    prompt(&session, "/meta  Helper session").await;

    let id = session.session_id().await;
    assert_eq!(
        user_texts(&harness.store, &id),
        ["Hello.", "What is in here?"]
    );
    // The note was stored at once (no model call of its own) and went into the next request.
    assert_eq!(harness.server.requests().len(), 3);
    assert!(request_text(&harness, 1).contains("Keep it short."));
    // The extension's `ls` replaced the built-in.
    assert_eq!(
        tool_results(&harness.store, &id),
        [(
            "call_1".to_owned(),
            false,
            "listed by the extension".to_owned()
        )]
    );
    assert_eq!(session.session_name().as_deref(), Some("Helper session"));
    assert!(!session.active_tool_names().contains(&"write".to_owned()));
    let entries = harness.store.entries(&id).unwrap();
    let note = entries
        .iter()
        .find_map(|stored| match &stored.entry.kind {
            EntryKind::CustomMessage {
                custom_type,
                content,
                display,
                details,
            } if custom_type == "note" => Some((content.joined_text(), *display, details.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        note,
        (
            "Keep it short.".to_owned(),
            true,
            Some(serde_json::json!({"from": "helper"}))
        )
    );
    let labels = harness.store.labels(&id).unwrap();
    assert_eq!(labels.len(), 1);
    assert_eq!(labels[0].1, "checkpoint");
    let data = entries
        .iter()
        .find_map(|stored| match &stored.entry.kind {
            EntryKind::Custom { custom_type, data } if custom_type == "helper" => data.clone(),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        data["pwd"],
        harness.env.workspace.display().to_string().as_str()
    );
    assert_eq!(data["refused"], "unknown thinking level `loud`");
    assert_eq!(data["model"], "mock-model");
    assert_eq!(data["idle"], true);
    assert!(data["entries"].as_u64().unwrap() >= 8);
    session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_tool_streams_updates_and_an_abort_ends_it_at_once() {
    let mut harness = Harness::new(vec![
        MockResponse::sse(sse::openai_tool_call("call_1", "slow", r#"{}"#)),
        MockResponse::sse(sse::openai_text("unused")),
    ]);
    let session = helper_session(&mut harness).await;
    let mut events = session.subscribe();
    let runner = {
        let session = session.clone();
        tokio::spawn(async move { session.prompt("Count.", PromptOptions::default()).await })
    };
    // Wait for a streamed update, then abort.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(SessionEvent::Agent(pi::session::AgentEvent::ToolExecutionUpdate {
                partial_result,
                ..
            }))) => {
                assert!(partial_result.joined_text().starts_with("step "));
                break;
            }
            Ok(Some(_)) => {}
            other => panic!("no tool update: {other:?}"),
        }
    }
    let aborted_at = std::time::Instant::now();
    session.abort();
    runner.await.unwrap().unwrap();
    assert!(aborted_at.elapsed() < Duration::from_secs(5));
    let id = session.session_id().await;
    assert_eq!(
        tool_results(&harness.store, &id),
        [("call_1".to_owned(), true, "Operation aborted".to_owned())]
    );
    session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_bash_handler_supplies_the_result_of_a_shell_command() {
    let mut harness = Harness::new(Vec::new());
    let session = helper_session(&mut harness).await;
    let remote = session
        .execute_bash("remote:uptime", false, None)
        .await
        .unwrap();
    assert_eq!(remote.output, "ran remotely: uptime");
    assert_eq!(remote.exit_code, Some(0));
    let local = session
        .execute_bash("echo local", true, None)
        .await
        .unwrap();
    assert_eq!(local.output.trim(), "local");
    let messages = session.messages();
    let outputs: Vec<&str> = messages
        .iter()
        .filter_map(|message| match message {
            AgentMessage::BashExecution(bash) => Some(bash.output.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(outputs.len(), 2);
    assert_eq!(outputs[0], "ran remotely: uptime");
    session.shutdown().await;
}
