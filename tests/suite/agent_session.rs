//! `AgentSession` end to end: a real session in a temporary workspace, a real database and
//! real tools, against a scripted OpenAI-compatible provider on 127.0.0.1.

use std::time::Duration;

use pi::model::entry::EntryKind;
use pi::model::message::{AgentMessage, StopReason};
use pi::session::{AgentEvent, PromptOptions, SessionEvent, SessionTarget};
use pi::store::LeafSelector;
use serde_json::Value;

use crate::common::agent::Harness;
use crate::common::provider::{MockResponse, sse};

fn types_and_roles(store: &pi::store::SessionStore, session: &pi::model::SessionId) -> Vec<String> {
    store
        .entries(session)
        .unwrap()
        .iter()
        .map(|stored| match &stored.entry.kind {
            EntryKind::Message(message) => format!("message:{}", message.role()),
            other => other.type_name().to_owned(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_with_bash_read_edit_and_write_stores_the_conversation_and_resumes_it() {
    let harness = Harness::new(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_1",
            "bash",
            r#"{"command":"echo hello > greeting.txt"}"#,
        )),
        MockResponse::sse(sse::openai_tool_call(
            "call_2",
            "read",
            r#"{"path":"greeting.txt"}"#,
        ))
        .chunked(3, 9),
        MockResponse::sse(sse::openai_tool_call(
            "call_3",
            "edit",
            r#"{"path":"greeting.txt","edits":[{"oldText":"hello","newText":"hello world"}]}"#,
        )),
        MockResponse::sse(sse::openai_tool_call(
            "call_4",
            "write",
            r#"{"path":"notes/todo.md","content":"- ship it\n"}"#,
        )),
        MockResponse::sse(sse::openai_text("Done: greeting.txt says hello world.")).chunked(11, 5),
    ]);
    let session = harness
        .open(SessionTarget::New {
            parent_session: None,
        })
        .await;
    let mut events = session.subscribe();
    session
        .prompt(
            "Create a greeting file, then fix it.",
            PromptOptions::default(),
        )
        .await
        .unwrap();

    // The workspace changed as the tools said.
    let workspace = &harness.env.workspace;
    assert_eq!(
        std::fs::read_to_string(workspace.join("greeting.txt")).unwrap(),
        "hello world\n"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes/todo.md")).unwrap(),
        "- ship it\n"
    );

    // The store holds exactly the conversation, in order.
    let id = session.session_id().await;
    assert!(session.is_persisted().await);
    assert_eq!(
        types_and_roles(&harness.store, &id),
        [
            "model_change",
            "thinking_level_change",
            "message:system",
            "message:user",
            "message:assistant",
            "message:toolResult",
            "message:assistant",
            "message:toolResult",
            "message:assistant",
            "message:toolResult",
            "message:assistant",
            "message:toolResult",
            "message:assistant",
        ]
    );
    let entries = harness.store.entries(&id).unwrap();
    let results: Vec<(String, bool)> = entries
        .iter()
        .filter_map(|stored| match &stored.entry.kind {
            EntryKind::Message(AgentMessage::ToolResult(result)) => {
                Some((result.tool_name.clone(), result.is_error))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            ("bash".into(), false),
            ("read".into(), false),
            ("edit".into(), false),
            ("write".into(), false)
        ]
    );
    let read_result = entries
        .iter()
        .find_map(|stored| match &stored.entry.kind {
            EntryKind::Message(AgentMessage::ToolResult(result)) if result.tool_name == "read" => {
                Some(result.content[0].as_text().unwrap_or_default().to_owned())
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(read_result, "hello\n");
    assert_eq!(
        session.last_assistant_text().as_deref(),
        Some("Done: greeting.txt says hello world.")
    );

    // What we sent: every tool call answered, the tool results in the next request.
    let requests = harness.server.requests();
    assert_eq!(requests.len(), 5);
    harness.server.assert_tool_calls_answered();
    let last = requests[4].json();
    let roles: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "tool"
        ]
    );
    assert_eq!(requests[0].header("authorization"), Some("Bearer test-key"));

    // Events: one agent run, persisted messages in order, tool executions started and ended.
    let mut kinds = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let SessionEvent::Agent(event) = event {
            kinds.push(event.kind());
        }
    }
    assert_eq!(kinds.first(), Some(&"agent_start"));
    assert_eq!(kinds.last(), Some(&"agent_end"));
    assert_eq!(
        kinds
            .iter()
            .filter(|kind| **kind == "tool_execution_start")
            .count(),
        4
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|kind| **kind == "tool_execution_end")
            .count(),
        4
    );
    assert_eq!(
        kinds.iter().filter(|kind| **kind == "turn_start").count(),
        5
    );

    // A resume rebuilds the same transcript from the store.
    let transcript = session.messages();
    drop(session);
    let resumed = harness.open(SessionTarget::Open(id.clone())).await;
    assert_eq!(resumed.messages(), transcript);
    assert_eq!(resumed.model().unwrap().id, "mock-model");
    // A resumed session with a thinking entry gets no new entries.
    assert_eq!(harness.store.entries(&id).unwrap().len(), 13);
    let continued = harness.open(SessionTarget::ContinueRecent).await;
    assert_eq!(continued.session_id().await, id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_an_answer_is_not_written() {
    let harness = Harness::new(vec![MockResponse::status(401)]);
    let session = harness
        .open(SessionTarget::New {
            parent_session: None,
        })
        .await;
    assert!(!session.is_persisted().await);
    drop(session);
    assert!(
        harness
            .store
            .list(&pi::store::ListScope::All)
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_then_success_leaves_one_assistant_message() {
    let harness = Harness::new(vec![
        MockResponse::json(429, r#"{"error":{"message":"Rate limit reached"}}"#)
            .header("retry-after-ms", "20"),
        MockResponse::sse(sse::openai_text("All good.")),
    ]);
    let session = harness
        .open(SessionTarget::New {
            parent_session: None,
        })
        .await;
    session
        .prompt("hi", PromptOptions::default())
        .await
        .unwrap();
    let id = session.session_id().await;
    assert_eq!(
        types_and_roles(&harness.store, &id),
        [
            "model_change",
            "thinking_level_change",
            "message:system",
            "message:user",
            "message:assistant"
        ]
    );
    assert_eq!(
        harness.server.requests().len(),
        2,
        "the transport re-sent the request"
    );
    assert_eq!(session.last_assistant_text().as_deref(), Some("All good."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_midway_is_kept_and_retried_as_its_child() {
    let body = sse::openai_text("This answer will be cut off before it ends, sadly.");
    let cut_at = body.len() / 2;
    let harness = Harness::new(vec![
        MockResponse::sse(body).drop_after(cut_at),
        MockResponse::sse(sse::openai_text("Second try worked.")),
    ]);
    let session = harness
        .open(SessionTarget::New {
            parent_session: None,
        })
        .await;
    let mut events = session.subscribe();
    session
        .prompt("tell me", PromptOptions::default())
        .await
        .unwrap();
    let id = session.session_id().await;
    let entries = harness.store.entries(&id).unwrap();
    let assistants: Vec<_> = entries
        .iter()
        .filter(|stored| {
            matches!(
                &stored.entry.kind,
                EntryKind::Message(AgentMessage::Assistant(_))
            )
        })
        .collect();
    assert_eq!(assistants.len(), 2);
    let EntryKind::Message(AgentMessage::Assistant(failed)) = &assistants[0].entry.kind else {
        unreachable!()
    };
    assert_eq!(failed.stop_reason, StopReason::Error);
    assert!(
        failed
            .error_message
            .as_deref()
            .unwrap_or("")
            .to_lowercase()
            .contains("connection lost"),
        "{failed:?}"
    );
    // 1.6.0: the failed attempt stays in the history and a `context_edit` (its child) omits it
    // from the model context; the retried answer follows the edit.
    let edit = entries
        .iter()
        .find(|stored| matches!(&stored.entry.kind, EntryKind::ContextEdit(_)))
        .expect("a context_edit omits the failed attempt");
    let EntryKind::ContextEdit(edit_fields) = &edit.entry.kind else {
        unreachable!()
    };
    assert_eq!(edit_fields.target_id, assistants[0].entry.id);
    assert_eq!(edit_fields.replacement, Some(serde_json::Value::Null));
    assert_eq!(edit.entry.parent_id, assistants[0].entry.id);
    assert_eq!(
        assistants[1].entry.parent_id, edit.entry.id,
        "the retried answer is the edit's child"
    );
    // The error is absent from the retried request and from the transcript.
    let retried = harness.server.requests()[1].json();
    let roles: Vec<&str> = retried["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user"]);
    assert!(session.messages().iter().all(|message| !matches!(message, AgentMessage::Assistant(a) if a.stop_reason == StopReason::Error)));
    let mut saw = Vec::new();
    while let Ok(event) = events.try_recv() {
        match event {
            SessionEvent::AutoRetryStart { attempt, .. } => saw.push(format!("start {attempt}")),
            SessionEvent::AutoRetryEnd {
                success, attempt, ..
            } => saw.push(format!("end {success} {attempt}")),
            _ => {}
        }
    }
    assert_eq!(saw, ["start 1", "end true 1"]);
    // The stored context at the leaf still holds the error (it is skipped when sent).
    let context = harness.store.context(&id, &LeafSelector::Current).unwrap();
    assert_eq!(context.messages.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_mid_stream_keeps_an_aborted_message() {
    let body = sse::openai_text("A long answer that streams slowly and is interrupted.");
    // Stall after the third text delta has been sent in full.
    let stall = body
        .match_indices("\n\n")
        .nth(3)
        .map(|(at, _)| at + 2)
        .unwrap();
    let harness = Harness::new(vec![
        MockResponse::sse(body)
            .chunked(2, 20)
            .stall_after(stall, Duration::from_secs(30)),
    ]);
    let session = harness
        .open(SessionTarget::New {
            parent_session: None,
        })
        .await;
    let mut events = session.subscribe();
    let runner = {
        let session = session.clone();
        tokio::spawn(async move { session.prompt("go", PromptOptions::default()).await })
    };
    // Abort once text has started arriving.
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), events.recv())
            .await
            .unwrap()
            .unwrap();
        if let SessionEvent::Agent(AgentEvent::MessageUpdate { .. }) = event {
            session.abort();
            break;
        }
    }
    tokio::time::timeout(Duration::from_secs(20), runner)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let id = session.session_id().await;
    let last = harness.store.leaf(&id).unwrap().unwrap();
    let EntryKind::Message(AgentMessage::Assistant(aborted)) = &last.entry.kind else {
        panic!("leaf is {:?}", last.entry.kind)
    };
    assert_eq!(aborted.stop_reason, StopReason::Aborted);
    assert!(!aborted.text().is_empty(), "the partial text is kept");
    assert_eq!(
        harness.server.requests().len(),
        1,
        "an abort is not retried"
    );
    assert!(!session.is_streaming());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_thinking_names_and_shell_commands_are_entries() {
    let harness = Harness::new(vec![MockResponse::sse(sse::openai_text("ok"))]);
    let session = harness
        .open(SessionTarget::New {
            parent_session: None,
        })
        .await;
    session
        .prompt("hello", PromptOptions::default())
        .await
        .unwrap();
    session.set_session_name("  My work ").await.unwrap();
    assert!(session.set_session_name("   ").await.is_err());
    let bash = session
        .execute_bash("echo from-shell", false, None)
        .await
        .unwrap();
    assert_eq!(bash.output.trim(), "from-shell");
    assert_eq!(bash.exit_code, Some(0));
    let hidden = session
        .execute_bash("echo secret", true, None)
        .await
        .unwrap();
    assert_eq!(hidden.exclude_from_context, Some(true));
    let id = session.session_id().await;
    assert_eq!(
        harness.store.session_name(&id).unwrap().as_deref(),
        Some("My work")
    );
    let kinds = types_and_roles(&harness.store, &id);
    assert_eq!(
        &kinds[kinds.len() - 3..],
        [
            "session_info",
            "message:bashExecution",
            "message:bashExecution"
        ]
    );
    // A non-reasoning model clamps every level to off: no change, no entry.
    session
        .set_thinking_level(pi::ai::ThinkingLevel::High)
        .await;
    assert_eq!(session.thinking_level(), pi::ai::ThinkingLevel::Off);
    assert_eq!(types_and_roles(&harness.store, &id).len(), kinds.len());
    let context = harness.store.context(&id, &LeafSelector::Current).unwrap();
    let last: Value = serde_json::from_str(context.messages.last().unwrap()).unwrap();
    assert_eq!(last["role"], "bashExecution");
    assert_eq!(last["excludeFromContext"], true);
}
