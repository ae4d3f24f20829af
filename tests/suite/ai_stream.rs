//! The streaming client's own behaviour, beyond what the reference oracle can show: stalled
//! streams, aborts at every stage, request timeouts, retry delays and their cap, connection
//! failures, and the SSE builders other suites script conversations with.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pi::ai::models::builtin_models;
use pi::ai::{
    AiError, CancellationToken, Model, Request, StreamEvent, StreamOptions, ThinkingLevel,
    ToolDefinition,
};
use pi::model::message::{AssistantMessage, ContentBlock, StopReason, UserContent, UserMessage};
use serde_json::{Map, json};

use crate::common::provider::{MockResponse, ProviderServer, sse};
use crate::suite::ai_providers::{client, fast_transport};

fn local_model(server_url: &str) -> Model {
    serde_json::from_value(json!({
        "id": "test-model", "name": "Test", "api": "openai-completions", "provider": "local",
        "baseUrl": format!("{server_url}/v1"), "reasoning": false, "input": ["text"],
        "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 32000, "maxTokens": 4096
    }))
    .unwrap()
}

fn anthropic_model(server_url: &str) -> Model {
    let mut model = builtin_models()
        .iter()
        .find(|model| model.provider == "anthropic" && model.id == "claude-sonnet-4-5")
        .unwrap()
        .clone();
    model.base_url = server_url.to_owned();
    model
}

fn request(text: &str) -> Request {
    Request {
        system_prompt: "Be brief.".into(),
        messages: vec![pi::ai::LlmMessage::User(UserMessage {
            content: UserContent::Text(text.into()),
            timestamp: 1,
            extra: Map::new(),
        })],
        tools: vec![ToolDefinition {
            name: "ls".into(),
            description: "List".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
    }
}

fn options() -> StreamOptions {
    let mut options = StreamOptions::new(pi::ai::auth::RequestAuth {
        api_key: Some("k".into()),
        headers: vec![("x-extra".into(), "1".into())],
        base_url: String::new(),
        ..Default::default()
    });
    options.base_url = None;
    options.transport = fast_transport();
    options
}

async fn collect(mut stream: pi::ai::AssistantStream) -> (Vec<StreamEvent>, AssistantMessage) {
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    let message = match events.last() {
        Some(StreamEvent::Done { message, .. }) | Some(StreamEvent::Error { message, .. }) => {
            (**message).clone()
        }
        other => panic!("not terminal: {other:?}"),
    };
    (events, message)
}

fn error_of(events: &[StreamEvent]) -> &AiError {
    match events.last() {
        Some(StreamEvent::Error { error, .. }) => error,
        other => panic!("expected an error event, got {other:?}"),
    }
}

#[tokio::test]
async fn a_stalled_stream_fails_after_the_idle_timeout_keeping_the_partial_text() {
    let body = sse::openai_text("alpha beta gamma delta");
    let stall_at = body.find("gamma").unwrap();
    let server = ProviderServer::start(vec![
        MockResponse::sse(body.clone()).stall_after(stall_at, Duration::from_secs(30)),
    ]);
    let mut opts = options();
    opts.transport.idle_timeout = Duration::from_millis(300);
    let started = Instant::now();
    let (events, message) = collect(client().stream(
        &local_model(&server.url()),
        request("hi"),
        opts,
        CancellationToken::new(),
    ))
    .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(
        message.error_message.as_deref(),
        Some("Request timed out: no data received for 300 ms")
    );
    assert!(matches!(error_of(&events), AiError::Transient { .. }));
    assert_eq!(message.text(), "alpha beta ", "partial text kept");
}

#[tokio::test]
async fn a_pause_shorter_than_the_idle_timeout_is_harmless() {
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("slow but complete"))
            .stall_after(200, Duration::from_millis(150)),
    ]);
    let mut opts = options();
    opts.transport.idle_timeout = Duration::from_secs(5);
    let (_, message) = collect(client().stream(
        &local_model(&server.url()),
        request("hi"),
        opts,
        CancellationToken::new(),
    ))
    .await;
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!(message.text(), "slow but complete");
}

#[tokio::test]
async fn cancelling_mid_stream_aborts_promptly_with_the_partial_message() {
    let body = sse::openai_tool_call("call_1", "ls", r#"{"path":"src/very/deep"}"#);
    // Stall inside the second argument fragment, after the first one has arrived.
    let stall_at = body.find("very/deep").unwrap();
    let server = ProviderServer::start(vec![
        MockResponse::sse(body.clone()).stall_after(stall_at, Duration::from_secs(30)),
    ]);
    let cancel = CancellationToken::new();
    let mut stream = client().stream(
        &local_model(&server.url()),
        request("hi"),
        options(),
        cancel.clone(),
    );
    let mut kinds = Vec::new();
    let started = Instant::now();
    while let Some(event) = stream.next().await {
        if event.kind() == "toolcall_delta" && !cancel.is_cancelled() {
            // The arguments parsed so far are visible in the partial message.
            let partial = stream.partial().clone();
            let call = partial.tool_calls().next().unwrap();
            assert_eq!(call.name, "ls");
            let canceller = cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                canceller.cancel();
            });
        }
        kinds.push((event.kind(), event));
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    let (_, last) = kinds.last().unwrap();
    let StreamEvent::Error {
        reason,
        message,
        error,
    } = last
    else {
        panic!("{last:?}")
    };
    assert_eq!(*reason, StopReason::Aborted);
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(
        message.error_message.as_deref(),
        Some("Request was aborted")
    );
    assert!(matches!(error, AiError::Aborted { .. }));
    // OpenAI closes the open blocks before reporting the abort, as the reference does.
    assert!(kinds.iter().any(|(kind, _)| *kind == "toolcall_end"));
    assert_eq!(message.tool_calls().count(), 1);
}

#[tokio::test]
async fn cancelling_before_the_response_and_during_a_retry_wait() {
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::anthropic_text("late")).delay_headers(Duration::from_secs(30)),
    ]);
    let cancel = CancellationToken::new();
    let stream = client().stream(
        &anthropic_model(&server.url()),
        request("hi"),
        options(),
        cancel.clone(),
    );
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    let (events, message) = collect(stream).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        message.error_message.as_deref(),
        Some("Request was aborted.")
    );
    assert_eq!(events.len(), 1, "no start event without a response");

    let server = ProviderServer::start(vec![
        MockResponse::json(429, r#"{"error":{"message":"slow down"}}"#).header("retry-after", "30"),
    ]);
    let cancel = CancellationToken::new();
    let stream = client().stream(
        &local_model(&server.url()),
        request("hi"),
        options(),
        cancel.clone(),
    );
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    let (_, message) = collect(stream).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn retry_after_is_honoured_and_a_longer_delay_than_the_cap_fails_at_once() {
    let server = ProviderServer::start(vec![
        MockResponse::json(503, r#"{"error":{"message":"busy"}}"#).header("retry-after-ms", "400"),
        MockResponse::sse(sse::openai_text("ok")),
    ]);
    let started = Instant::now();
    let (events, message) = collect(client().stream(
        &local_model(&server.url()),
        request("hi"),
        options(),
        CancellationToken::new(),
    ))
    .await;
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(message.text(), "ok");
    assert_eq!(server.requests().len(), 2);
    // The retry is invisible: one start, one done.
    assert_eq!(
        events
            .iter()
            .filter(|event| event.kind() == "start")
            .count(),
        1
    );
    // Both attempts sent the same request.
    let requests = server.requests();
    assert_eq!(requests[0].body, requests[1].body);

    let server = ProviderServer::start(vec![
        MockResponse::json(429, r#"{"error":{"message":"Rate limit reached"}}"#)
            .header("retry-after", "120"),
    ]);
    let mut opts = options();
    opts.transport.max_retry_delay = Some(Duration::from_secs(1));
    let started = Instant::now();
    let (events, message) = collect(client().stream(
        &local_model(&server.url()),
        request("hi"),
        opts,
        CancellationToken::new(),
    ))
    .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(server.requests().len(), 1);
    assert_eq!(
        message.error_message.as_deref(),
        Some("Server requested 120s retry delay (max: 1s). 429 Rate limit reached")
    );
    assert!(pi::ai::error::is_retryable_error(&message, 32000));
    assert_eq!(
        error_of(&events),
        &AiError::RateLimited {
            message: message.error_message.clone().unwrap(),
            retry_after: Some(Duration::from_secs(120)),
        }
    );
}

#[tokio::test]
async fn x_should_retry_overrides_the_status_and_max_retries_zero_sends_once() {
    let server = ProviderServer::start(vec![
        MockResponse::json(400, r#"{"error":{"message":"flaky"}}"#)
            .header("x-should-retry", "true"),
        MockResponse::sse(sse::openai_text("fine")),
    ]);
    let (_, message) = collect(client().stream(
        &local_model(&server.url()),
        request("hi"),
        options(),
        CancellationToken::new(),
    ))
    .await;
    assert_eq!(message.text(), "fine");
    assert_eq!(server.requests().len(), 2);

    let server = ProviderServer::start(vec![MockResponse::json(
        500,
        r#"{"error":{"message":"boom"}}"#,
    )]);
    let mut opts = options();
    opts.transport.max_retries = 0;
    let (_, message) = collect(client().stream(
        &local_model(&server.url()),
        request("hi"),
        opts,
        CancellationToken::new(),
    ))
    .await;
    assert_eq!(
        message.error_message.as_deref(),
        Some(r#"500: {"message":"boom"}"#)
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn slow_headers_time_out_and_are_retried_then_reported() {
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("late")).delay_headers(Duration::from_secs(5)),
        MockResponse::sse(sse::openai_text("on time")),
    ]);
    let mut opts = options();
    opts.transport.request_timeout = Duration::from_millis(300);
    let (_, message) = collect(client().stream(
        &local_model(&server.url()),
        request("hi"),
        opts.clone(),
        CancellationToken::new(),
    ))
    .await;
    assert_eq!(message.text(), "on time");

    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("late")).delay_headers(Duration::from_secs(5)),
        MockResponse::sse(sse::openai_text("late")).delay_headers(Duration::from_secs(5)),
    ]);
    opts.transport.max_retries = 1;
    let (events, message) = collect(client().stream(
        &local_model(&server.url()),
        request("hi"),
        opts,
        CancellationToken::new(),
    ))
    .await;
    assert_eq!(message.error_message.as_deref(), Some("Request timed out."));
    assert!(matches!(error_of(&events), AiError::Transient { .. }));
}

#[tokio::test]
async fn connection_refused_is_retried_then_a_connection_error() {
    // Bind and release a port so that nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let (events, message) = collect(client().stream(
        &local_model(&url),
        request("hi"),
        options(),
        CancellationToken::new(),
    ))
    .await;
    // 1.6.0 appends Node's cause (`withCauseDetail`).
    assert_eq!(
        message.error_message,
        Some(format!(
            "Connection error.: connect ECONNREFUSED 127.0.0.1:{port}"
        ))
    );
    assert!(matches!(error_of(&events), AiError::Transient { .. }));
    // Two backoff waits of 10 ms and 20 ms (minus jitter) happened.
    assert!(started.elapsed() >= Duration::from_millis(20));
}

#[tokio::test]
async fn unsupported_apis_and_missing_keys_fail_without_sending() {
    let server = ProviderServer::start(vec![]);
    let mut model = local_model(&server.url());
    model.api = "pi-messages".into();
    let (events, message) =
        collect(client().stream(&model, request("hi"), options(), CancellationToken::new())).await;
    assert_eq!(
        message.error_message.as_deref(),
        Some("No API provider registered for api: pi-messages")
    );
    assert!(matches!(error_of(&events), AiError::Config { .. }));

    let mut opts = options();
    opts.api_key = None;
    let (_, message) = collect(client().stream(
        &local_model(&server.url()),
        request("hi"),
        opts,
        CancellationToken::new(),
    ))
    .await;
    assert_eq!(
        message.error_message.as_deref(),
        Some("No API key for provider: local")
    );
    // Built as 1.6.0's `createSetupErrorMessage`: `errorMessage` before `timestamp`.
    assert_eq!(setup_keys(&message), SETUP_ERROR_KEYS);
    assert!(server.requests().is_empty());
}

/// The keys of a setup error message, in the order 1.6.0 writes them.
const SETUP_ERROR_KEYS: [&str; 10] = [
    "role",
    "content",
    "api",
    "provider",
    "model",
    "usage",
    "stopReason",
    "errorMessage",
    "timestamp",
    "durationMs",
];

fn setup_keys(message: &AssistantMessage) -> Vec<String> {
    let value =
        serde_json::to_value(pi::model::message::AgentMessage::Assistant(message.clone())).unwrap();
    value.as_object().unwrap().keys().cloned().collect()
}

#[tokio::test]
async fn a_call_cancelled_before_it_starts_fails_as_a_setup_error_without_sending() {
    let server = ProviderServer::start(vec![]);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let (events, message) = collect(client().stream(
        &local_model(&server.url()),
        request("hi"),
        options(),
        cancel,
    ))
    .await;
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(
        message.error_message.as_deref(),
        Some("This operation was aborted")
    );
    assert!(matches!(error_of(&events), AiError::Aborted { .. }));
    assert_eq!(setup_keys(&message), SETUP_ERROR_KEYS);
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn openai_responses_models_speak_the_responses_api() {
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::responses_tool_calls(&[
            ("call_a", "ls", r#"{"path":"src"}"#),
            ("call_b", "read", r#"{"path":"Cargo.toml"}"#),
        ]))
        .chunked(9, 13),
        MockResponse::sse(sse::responses_text("Two files here.")).chunked(4, 7),
    ]);
    let mut model = builtin_models()
        .iter()
        .find(|model| model.provider == "openai" && model.id == "gpt-5.4")
        .unwrap()
        .clone();
    assert_eq!(model.api, "openai-responses");
    model.base_url = format!("{}/v1", server.url());
    let mut opts = options();
    opts.thinking = ThinkingLevel::High;
    let (_, first) = collect(client().stream(
        &model,
        request("hi"),
        opts.clone(),
        CancellationToken::new(),
    ))
    .await;
    assert_eq!(first.api, "openai-responses");
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    let calls: Vec<_> = first.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].id, "call_a|fc_0");
    assert_eq!(calls[0].arguments, serde_json::json!({"path": "src"}));
    assert_eq!(
        calls[1].arguments,
        serde_json::json!({"path": "Cargo.toml"})
    );
    let sent = server.requests();
    assert_eq!(sent[0].path, "/v1/responses");
    let body = sent[0].json();
    assert_eq!(
        body["reasoning"],
        serde_json::json!({"effort": "high", "summary": "auto"})
    );
    assert_eq!(
        body["include"],
        serde_json::json!(["reasoning.encrypted_content"])
    );
    assert_eq!(body["store"], false);
    assert_eq!(body["input"][0]["role"], "developer");
    assert_eq!(sent[0].header("authorization"), Some("Bearer k"));
    assert_eq!(sent[0].header("x-extra"), Some("1"));

    // The calls and their results go back as items paired by call id.
    let mut messages = request("hi").messages;
    messages.push(pi::ai::LlmMessage::Assistant(first.clone()));
    for call in &calls {
        messages.push(pi::ai::LlmMessage::ToolResult(
            pi::model::message::ToolResultMessage {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                content: vec![ContentBlock::text("ok")],
                details: None,
                usage: None,
                is_error: false,
                duration_ms: None,
                timestamp: 3,
                nested_calls: None,
                extra: Default::default(),
            },
        ));
    }
    let follow_up = Request {
        messages,
        ..request("")
    };
    let (_, second) =
        collect(client().stream(&model, follow_up, opts, CancellationToken::new())).await;
    assert_eq!(second.text(), "Two files here.");
    assert_eq!(second.usage.cache_read, 40);
    assert_eq!(second.usage.input, 60);
    let input = server.requests()[1].json()["input"].clone();
    let kinds: Vec<&str> = input
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["type"].as_str().or(item["role"].as_str()).unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "developer",
            "user",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output"
        ]
    );
    assert_eq!(input[2]["id"], "fc_0");
    assert_eq!(input[4]["call_id"], "call_a");
}

#[tokio::test]
async fn builders_script_a_whole_tool_conversation() {
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::anthropic_thinking("hmm", "SIG", "Let me look.")),
        MockResponse::sse(sse::anthropic_tool_use(
            "toolu_1",
            "ls",
            r#"{"path":"src"}"#,
        ))
        .chunked(3, 5),
        MockResponse::sse(sse::anthropic_text("Two files.")),
    ]);
    let model = anthropic_model(&server.url());
    let mut opts = options();
    opts.thinking = ThinkingLevel::Low;
    let (_, first) = collect(client().stream(
        &model,
        request("hi"),
        opts.clone(),
        CancellationToken::new(),
    ))
    .await;
    let ContentBlock::Thinking(thinking) = &first.content[0] else {
        panic!()
    };
    assert_eq!(thinking.thinking_signature.as_deref(), Some("SIG"));
    assert_eq!(first.text(), "Let me look.");

    let (_, second) = collect(client().stream(
        &model,
        request("list"),
        opts.clone(),
        CancellationToken::new(),
    ))
    .await;
    assert_eq!(second.stop_reason, StopReason::ToolUse);
    let call = second.tool_calls().next().unwrap().clone();
    assert_eq!(call.arguments, json!({"path": "src"}));

    // Replay: the assistant turn and its result go back; the server sees them paired.
    let mut follow_up = request("list");
    follow_up
        .messages
        .push(pi::ai::LlmMessage::Assistant(second.clone()));
    follow_up.messages.push(pi::ai::LlmMessage::ToolResult(
        pi::model::message::ToolResultMessage {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: vec![ContentBlock::text("main.rs\nlib.rs")],
            details: None,
            usage: None,
            is_error: false,
            duration_ms: None,
            timestamp: 3,
            nested_calls: None,
            extra: Map::new(),
        },
    ));
    let (_, third) =
        collect(client().stream(&model, follow_up, opts, CancellationToken::new())).await;
    assert_eq!(third.text(), "Two files.");
    server.assert_tool_calls_answered();
    let last = server.requests().pop().unwrap().json();
    assert_eq!(last["messages"][1]["content"][0]["type"], "tool_use");
    assert_eq!(last["messages"][2]["content"][0]["tool_use_id"], "toolu_1");

    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_calls(&[
            ("call_a", "ls", r#"{"path":"a"}"#),
            ("call_b", "read", r#"{"path":"b"}"#),
        ]))
        .chunked(11, 9),
    ]);
    let (_, message) = collect(client().stream(
        &local_model(&server.url()),
        request("hi"),
        options(),
        CancellationToken::new(),
    ))
    .await;
    let calls: Vec<_> = message
        .tool_calls()
        .map(|call| (call.id.clone(), call.arguments.clone()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_a".to_owned(), json!({"path":"a"})),
            ("call_b".to_owned(), json!({"path":"b"}))
        ]
    );
}

#[tokio::test]
async fn event_json_has_the_reference_shape_with_partial() {
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Hi there"))]);
    let mut stream = client().stream(
        &local_model(&server.url()),
        request("hi"),
        options(),
        CancellationToken::new(),
    );
    let mut shapes = Vec::new();
    while let Some(event) = stream.next().await {
        let partial = stream.partial().clone();
        shapes.push(event.to_json(&partial));
    }
    assert_eq!(shapes[0]["type"], "start");
    assert_eq!(shapes[0]["partial"]["role"], "assistant");
    let delta = shapes
        .iter()
        .find(|value| value["type"] == "text_delta")
        .unwrap();
    assert_eq!(delta["contentIndex"], 0);
    assert_eq!(delta["partial"]["content"][0]["type"], "text");
    let done = shapes.last().unwrap();
    assert_eq!(done["type"], "done");
    assert_eq!(done["reason"], "stop");
    assert_eq!(done["message"]["content"][0]["text"], "Hi there");
    assert_eq!(done["message"]["usage"]["input"], 100);
    // cost = price / 1e6 × tokens
    assert_eq!(
        done["message"]["usage"]["cost"]["input"],
        json!(1.0 / 1_000_000.0 * 100.0)
    );
    assert!(done.get("partial").is_none());
}

#[tokio::test]
async fn result_drains_the_stream() {
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("one two"))]);
    let message = client()
        .stream(
            &local_model(&server.url()),
            request("hi"),
            options(),
            CancellationToken::new(),
        )
        .result()
        .await;
    assert_eq!(message.text(), "one two");
    assert_eq!(message.timestamp, 1_767_225_600_000);
}

#[test]
fn the_client_is_cheap_to_share() {
    let shared = Arc::new(client());
    let clone = (*shared).clone();
    drop(clone);
}
