//! Compaction inside a live session: the threshold check after a run, overflow recovery,
//! manual `/compact`, and tree navigation with a branch summary — a real `AgentSession`, a
//! real database and a scripted OpenAI-compatible provider on 127.0.0.1.

use pi::model::entry::EntryKind;
use pi::model::message::{AgentMessage, StopReason};
use pi::model::{EntryId, SessionId};
use pi::session::{NavigateOptions, PromptOptions, SessionEvent, SessionTarget};
use pi::store::{LeafSelector, SessionStore};
use serde_json::Value;

use crate::common::agent::{Harness, models_json};
use crate::common::provider::{MockResponse, ProviderServer, RecordedRequest, sse};
use crate::common::{TestEnv, stdout_json};

const OVERFLOW_BODY: &str = r#"{"error":{"message":"This model's maximum context length is 1000 tokens. However, your messages resulted in 1500 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;

fn new_target() -> SessionTarget {
    SessionTarget::New {
        parent_session: None,
    }
}

/// A user prompt long enough (≈27 estimated tokens) that keeping the last 20 tokens cuts at it.
fn long_prompt(head: &str, word: &str) -> String {
    format!("{head}: {}", format!("{word} ").repeat(15).trim_end())
}

/// A harness whose model has a 1000-token window, compacting above 800 tokens and keeping
/// the last 20 estimated tokens.
fn small_window(responses: Vec<MockResponse>) -> Harness {
    let mut harness = Harness::new(responses);
    harness.context_window = 1000;
    harness.settings.compaction.reserve_tokens = 200;
    harness.settings.compaction.keep_recent_tokens = 20;
    harness
}

/// The text of every message of a recorded chat-completions request, with its role.
fn request_messages(request: &RecordedRequest) -> Vec<(String, String)> {
    request.json()["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|message| {
            let role = message["role"].as_str().unwrap_or_default().to_owned();
            let text = match &message["content"] {
                Value::String(text) => text.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|part| part["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
                _ => String::new(),
            };
            (role, text)
        })
        .collect()
}

fn compactions(
    store: &SessionStore,
    id: &SessionId,
) -> Vec<(EntryId, pi::model::entry::CompactionEntry)> {
    store
        .entries(id)
        .unwrap()
        .into_iter()
        .filter_map(|stored| match stored.entry.kind {
            EntryKind::Compaction(compaction) => Some((stored.entry.id.expect("id"), compaction)),
            _ => None,
        })
        .collect()
}

/// The id of the stored user message whose text starts with `prefix`.
fn user_entry(store: &SessionStore, id: &SessionId, prefix: &str) -> EntryId {
    store
        .entries(id)
        .unwrap()
        .into_iter()
        .find_map(|stored| match &stored.entry.kind {
            EntryKind::Message(message @ AgentMessage::User(_))
                if message_text(message).starts_with(prefix) =>
            {
                stored.entry.id.clone()
            }
            _ => None,
        })
        .expect("user entry")
}

fn message_text(message: &AgentMessage) -> String {
    serde_json::to_value(message).unwrap()["content"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|part| part["text"].as_str())
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}

/// Exports the session as `pi export --jsonl` does and has the pinned reference read it:
/// leaf, context, tree and name equal ours, at the leaf and at every entry listed.
fn reference_reads_export(store: &SessionStore, id: &SessionId, at: &[EntryId]) {
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("session.jsonl");
    let mut out = Vec::new();
    store.export_jsonl(id, &mut out).unwrap();
    std::fs::write(&file, out).unwrap();
    let case = |leaf: Option<&EntryId>| crate::suite::interop::Case {
        what: format!("live session at {leaf:?}"),
        store: store.clone(),
        session: id.clone(),
        leaf: leaf.map(EntryId::to_string),
        file: file.clone(),
    };
    let mut cases = vec![case(None)];
    cases.extend(at.iter().map(|entry| case(Some(entry))));
    crate::suite::interop::check_cases(&cases, scratch.path());
}

fn compaction_ends(events: &mut tokio::sync::mpsc::UnboundedReceiver<SessionEvent>) -> Vec<Value> {
    let mut out = Vec::new();
    while let Ok(event) = events.try_recv() {
        if matches!(event, SessionEvent::CompactionEnd { .. }) {
            out.extend(event.to_json());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crossing_the_threshold_compacts_and_the_next_compaction_updates_the_summary() {
    let harness = small_window(vec![
        MockResponse::sse(sse::openai_text("Answer one.")),
        MockResponse::sse(sse::openai_text_with_usage("Answer two.", 850, 50)),
        MockResponse::sse(sse::openai_text("## Goal\nFirst summary of apples.")),
        MockResponse::sse(sse::openai_text_with_usage("Answer three.", 850, 50)),
        MockResponse::sse(sse::openai_text("## Goal\nSecond summary of pears.")),
        MockResponse::sse(sse::openai_text("Answer four.")),
    ]);
    let session = harness.open(new_target()).await;
    let mut events = session.subscribe();
    session
        .prompt("first question about apples", PromptOptions::default())
        .await
        .unwrap();
    let second = long_prompt("Second question", "pears");
    session
        .prompt(&second, PromptOptions::default())
        .await
        .unwrap();
    let id = session.session_id().await;

    // The run crossed 800 tokens: one compaction, keeping the second question onwards.
    let first = compactions(&harness.store, &id);
    assert_eq!(first.len(), 1);
    let (_, compaction) = &first[0];
    assert_eq!(compaction.summary, "## Goal\nFirst summary of apples.");
    assert_eq!(
        compaction.first_kept_entry_id,
        Some(user_entry(&harness.store, &id, "Second question"))
    );
    assert_eq!(compaction.tokens_before, 900);
    let ends = compaction_ends(&mut events);
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["reason"], "threshold");
    assert_eq!(ends[0]["willRetry"], false);
    assert_eq!(
        ends[0]["result"]["summary"],
        "## Goal\nFirst summary of apples."
    );

    // The summariser saw the first exchange only, without a previous summary.
    let requests = harness.server.requests();
    let summarize = request_messages(&requests[2]);
    let prompt = &summarize.last().unwrap().1;
    assert!(
        prompt.contains("[User]: first question about apples"),
        "{prompt}"
    );
    assert!(prompt.contains("[Assistant]: Answer one."), "{prompt}");
    assert!(!prompt.contains("pears"), "{prompt}");
    assert!(!prompt.contains("<previous-summary>"), "{prompt}");

    // The stored context and the session's transcript now start with the compaction's
    // checkpoint (1.6.0: the replayed system message, stored as `systemMessage`) and the
    // summary.
    let context = harness.store.context(&id, &LeafSelector::Current).unwrap();
    assert_eq!(
        context.messages.len(),
        4,
        "checkpoint, summary, second question, answer"
    );
    assert!(context.messages[0].starts_with(r#"{"role":"system""#));
    assert!(compaction.system_message.is_some());
    assert_eq!(session.messages().len(), 4);

    // The next run crosses again: the second summary updates the first.
    let third = long_prompt("Third question", "plums");
    session
        .prompt(&third, PromptOptions::default())
        .await
        .unwrap();
    let all = compactions(&harness.store, &id);
    assert_eq!(all.len(), 2);
    assert_eq!(
        all[1].1.first_kept_entry_id,
        Some(user_entry(&harness.store, &id, "Third question"))
    );
    let requests = harness.server.requests();
    let update = &request_messages(&requests[4]).last().unwrap().1.clone();
    assert!(
        update
            .contains("<previous-summary>\n## Goal\nFirst summary of apples.\n</previous-summary>"),
        "{update}"
    );
    assert!(update.contains("pears"), "{update}");
    assert!(!update.contains("first question about apples"), "{update}");

    // The next request carries the latest summary, then the kept messages.
    session
        .prompt("fourth question", PromptOptions::default())
        .await
        .unwrap();
    let requests = harness.server.requests();
    assert_eq!(requests.len(), 6);
    let sent = request_messages(&requests[5]);
    let roles: Vec<&str> = sent.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "user", "assistant", "user"]);
    assert!(
        sent[1].1.contains("Second summary of pears."),
        "{:?}",
        sent[1]
    );
    assert!(sent[2].1.starts_with("Third question"));
    assert!(sent.iter().all(|(_, text)| !text.contains("apples")));
    assert_eq!(
        session.last_assistant_text().as_deref(),
        Some("Answer four.")
    );
    assert_eq!(harness.server.remaining(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflow_compacts_once_and_continues_without_the_error() {
    // 1.6.0 omits the failed attempt before compacting; the omitted attempt closes the kept
    // range, so the cut lies after the question and splits its turn: a history summary and a
    // turn-prefix summary (cli16 `an_overflow_is_recovered_as_1_6_recovers_it` checks the same
    // against the 1.6.0 CLI).
    let harness = small_window(vec![
        MockResponse::sse(sse::openai_text("Answer one.")),
        MockResponse::json(400, OVERFLOW_BODY),
        MockResponse::sse(sse::openai_text("## Goal\nOverflow summary.")),
        MockResponse::sse(sse::openai_text("The user asked about pears.")),
        MockResponse::sse(sse::openai_text("Recovered answer.")),
    ]);
    let session = harness.open(new_target()).await;
    let mut events = session.subscribe();
    session
        .prompt("first question about apples", PromptOptions::default())
        .await
        .unwrap();
    session
        .prompt(
            &long_prompt("Second question", "pears"),
            PromptOptions::default(),
        )
        .await
        .unwrap();
    let id = session.session_id().await;
    assert_eq!(
        session.last_assistant_text().as_deref(),
        Some("Recovered answer.")
    );
    assert_eq!(harness.server.requests().len(), 5);

    // One compaction; the failed answer stays in the store (omitted by a context edit), the
    // recovered one follows the compaction.
    let all = compactions(&harness.store, &id);
    assert_eq!(all.len(), 1);
    let entries = harness.store.entries(&id).unwrap();
    let errors: Vec<_> = entries
        .iter()
        .filter(|stored| {
            matches!(&stored.entry.kind,
                EntryKind::Message(AgentMessage::Assistant(a)) if a.stop_reason == StopReason::Error)
        })
        .collect();
    assert_eq!(errors.len(), 1);
    let last = entries.last().unwrap();
    assert_eq!(last.entry.parent_id.as_ref(), Some(&all[0].0));

    let omitted = entries.iter().any(|stored| {
        matches!(&stored.entry.kind, EntryKind::ContextEdit(edit)
            if edit.target_id == errors[0].entry.id && edit.replacement == Some(Value::Null))
    });
    assert!(omitted, "the failed attempt is omitted");
    assert_eq!(all[0].1.first_kept_entry_id, errors[0].entry.id);

    // The continued request: the summary (the question is in its turn-prefix part); no
    // error, no first exchange.
    let sent = request_messages(&harness.server.requests()[4]);
    let roles: Vec<&str> = sent.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(roles, ["system", "user"]);
    assert!(sent[1].1.contains("Overflow summary."));
    assert!(sent[1].1.contains("The user asked about pears."));
    assert!(
        sent.iter()
            .all(|(_, text)| !text.contains("maximum context length"))
    );

    let ends = compaction_ends(&mut events);
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["reason"], "overflow");
    assert_eq!(ends[0]["willRetry"], true);
    assert!(
        session
            .messages()
            .iter()
            .all(|message| !matches!(message, AgentMessage::Assistant(a) if a.stop_reason == StopReason::Error))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_overflow_after_recovery_stops_instead_of_looping() {
    let harness = small_window(vec![
        MockResponse::sse(sse::openai_text("Answer one.")),
        MockResponse::json(400, OVERFLOW_BODY),
        MockResponse::sse(sse::openai_text("## Goal\nOverflow summary.")),
        MockResponse::sse(sse::openai_text("The user asked about pears.")),
        MockResponse::json(400, OVERFLOW_BODY),
        MockResponse::sse(sse::openai_text("never sent")),
    ]);
    let session = harness.open(new_target()).await;
    let mut events = session.subscribe();
    session
        .prompt("first question about apples", PromptOptions::default())
        .await
        .unwrap();
    let _ = session
        .prompt(
            &long_prompt("Second question", "pears"),
            PromptOptions::default(),
        )
        .await;
    let id = session.session_id().await;
    assert_eq!(
        harness.server.requests().len(),
        5,
        "no second compaction, no loop (the first splits the turn: two summaries)"
    );
    assert_eq!(harness.server.remaining(), 1);
    assert_eq!(compactions(&harness.store, &id).len(), 1);
    let ends = compaction_ends(&mut events);
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert_eq!(ends[1]["reason"], "overflow");
    assert!(ends[1]["result"].is_null());
    assert!(
        ends[1]["errorMessage"]
            .as_str()
            .unwrap_or_default()
            .contains("Context overflow recovery failed"),
        "{ends:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_compact_uses_the_focus_and_refuses_to_compact_twice() {
    let harness = small_window(vec![
        MockResponse::sse(sse::openai_text("Answer one.")),
        MockResponse::sse(sse::openai_text("Answer two.")),
        MockResponse::sse(sse::openai_text("## Goal\nManual summary.")),
    ]);
    let session = harness.open(new_target()).await;
    let mut events = session.subscribe();
    session
        .prompt("first question about apples", PromptOptions::default())
        .await
        .unwrap();
    session
        .prompt(
            &long_prompt("Second question", "pears"),
            PromptOptions::default(),
        )
        .await
        .unwrap();
    assert!(compactions(&harness.store, &session.session_id().await).is_empty());
    let result = session
        .compact(Some("Focus on the apples".into()))
        .await
        .unwrap();
    let id = session.session_id().await;
    let second = user_entry(&harness.store, &id, "Second question");
    assert_eq!(result["summary"], "## Goal\nManual summary.");
    assert_eq!(result["firstKeptEntryId"], second.as_str());
    assert!(result["tokensBefore"].as_u64().unwrap() > 0);
    let summarize = request_messages(&harness.server.requests()[2]);
    let prompt = &summarize.last().unwrap().1;
    assert!(
        prompt.ends_with("\n\nAdditional focus: Focus on the apples"),
        "{prompt}"
    );

    let error = session.compact(None).await.unwrap_err();
    assert_eq!(error.to_string(), "Already compacted");
    assert_eq!(compactions(&harness.store, &id).len(), 1);
    let ends = compaction_ends(&mut events);
    assert_eq!(ends.len(), 2);
    assert_eq!(ends[0]["reason"], "manual");
    assert_eq!(
        ends[1]["errorMessage"],
        "Compaction failed: Already compacted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn navigating_away_with_a_summary_records_the_abandoned_branch() {
    let harness = Harness::new(vec![
        MockResponse::sse(sse::openai_text("Answer one.")),
        MockResponse::sse(sse::openai_text("Answer two about pears.")),
        MockResponse::sse(sse::openai_text("## Goal\nBranch summary of pears.")),
        MockResponse::sse(sse::openai_text("Answer three.")),
    ]);
    let session = harness.open(new_target()).await;
    session
        .prompt("first question about apples", PromptOptions::default())
        .await
        .unwrap();
    session
        .prompt("second question about pears", PromptOptions::default())
        .await
        .unwrap();
    let id = session.session_id().await;
    let entries = harness.store.entries(&id).unwrap();
    let answer_one = entries
        .iter()
        .find(|stored| {
            matches!(
                &stored.entry.kind,
                EntryKind::Message(AgentMessage::Assistant(_))
            )
        })
        .and_then(|stored| stored.entry.id.clone())
        .unwrap();
    let old_leaf = entries.last().unwrap().entry.id.clone().unwrap();

    let outcome = session
        .navigate_tree_with(
            &answer_one,
            NavigateOptions {
                summarize: true,
                custom_instructions: None,
                replace_instructions: false,
                label: Some("before pears".into()),
            },
        )
        .await
        .unwrap();
    assert!(!outcome.cancelled);
    assert_eq!(outcome.editor_text, None);

    // The summariser saw the abandoned branch only.
    let summarize = request_messages(&harness.server.requests()[2]);
    let prompt = &summarize.last().unwrap().1;
    assert!(prompt.contains("second question about pears"), "{prompt}");
    assert!(!prompt.contains("apples"), "{prompt}");

    let entries = harness.store.entries(&id).unwrap();
    let summary = entries
        .iter()
        .find(|stored| matches!(stored.entry.kind, EntryKind::BranchSummary(_)))
        .expect("branch summary entry");
    assert_eq!(summary.entry.parent_id.as_ref(), Some(&answer_one));
    let EntryKind::BranchSummary(branch) = &summary.entry.kind else {
        unreachable!()
    };
    let text = &branch.summary;
    // 1.6.0 `branchWithSummary`: `fromId` is the leaf left (0.73.1 named the destination),
    // and the entry carries the summary request's usage.
    assert_eq!(branch.from_id, old_leaf.as_str(), "the leaf left");
    assert!(branch.usage.is_some(), "the summary's usage");
    let details = branch.details.as_ref().expect("details");
    assert!(details.get("readFiles").is_some() && details.get("modifiedFiles").is_some());
    assert_ne!(old_leaf, answer_one);
    assert!(text.contains("Branch summary of pears."), "{text}");
    let labels = harness.store.labels(&id).unwrap();
    assert_eq!(labels.len(), 1);
    assert_eq!(&labels[0].0, summary.entry.id.as_ref().unwrap());
    assert_eq!(labels[0].1, "before pears");

    // The next request: the first exchange, then the branch summary, then the new prompt.
    session
        .prompt("third question", PromptOptions::default())
        .await
        .unwrap();
    let sent = request_messages(&harness.server.requests()[3]);
    let roles: Vec<&str> = sent.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user", "user"]);
    assert!(sent[3].1.contains("summary of a branch"), "{:?}", sent[3]);
    assert!(sent[3].1.contains("Branch summary of pears."));
    reference_reads_export(
        &harness.store,
        &id,
        &[summary.entry.id.clone().unwrap(), old_leaf.clone()],
    );

    // Navigating to a user message puts its text back in the editor without a summary.
    let first_question = user_entry(&harness.store, &id, "first question");
    let outcome = session.navigate_tree(&first_question).await.unwrap();
    assert_eq!(outcome.as_deref(), Some("first question about apples"));
    // The leaf is the question's parent: the system message the first run stored (1.6.0), so
    // the context holds the prompt and nothing of the conversation.
    assert!(
        session
            .messages()
            .iter()
            .all(|message| matches!(message, AgentMessage::System(_))),
        "{:?}",
        session.messages()
    );
    assert_eq!(harness.server.requests().len(), 4);
}

/// `pi -c -p` on a session whose next request overflows: the answer printed is the one
/// recovered after compacting, and the session file holds one compaction.
#[test]
fn print_mode_prints_the_answer_recovered_after_an_overflow() {
    let env = TestEnv::new();
    // Two summary requests: the omitted attempt splits the question's turn (1.6.0).
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("Answer one.")),
        MockResponse::json(400, OVERFLOW_BODY),
        MockResponse::sse(sse::openai_text("## Goal\nOverflow summary.")),
        MockResponse::sse(sse::openai_text("The user asked about pears.")),
        MockResponse::sse(sse::openai_text("Recovered answer.")),
    ]);
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json(&server.url(), 1000),
    )
    .unwrap();
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"compaction":{"keepRecentTokens":20}}"#,
    )
    .unwrap();
    let first = env
        .pi()
        .args([
            "--model",
            "mock/mock-model",
            "-p",
            "first question about apples",
        ])
        .output()
        .unwrap();
    assert!(first.status.success(), "{first:?}");
    assert_eq!(String::from_utf8_lossy(&first.stdout).trim(), "Answer one.");
    let second = env
        .pi()
        .args(["--model", "mock/mock-model", "-c", "-p"])
        .arg(long_prompt("Second question", "pears"))
        .output()
        .unwrap();
    assert!(second.status.success(), "{second:?}");
    assert_eq!(
        String::from_utf8_lossy(&second.stdout).trim(),
        "Recovered answer."
    );
    let sessions = env
        .pi()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let listed = stdout_json(&sessions);
    let id = listed[0]["session"].as_str().unwrap().to_owned();
    let shown = env
        .pi()
        .args(["sessions", "show", &id, "--tree", "--json"])
        .output()
        .unwrap();
    let shown = stdout_json(&shown);
    let types: Vec<&str> = shown
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types.iter().filter(|t| **t == "compaction").count(),
        1,
        "{types:?}"
    );
    assert_eq!(server.remaining(), 0);
}
