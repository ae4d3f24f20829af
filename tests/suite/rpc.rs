//! RPC mode end to end: a test client drives the real `pi --mode rpc` process over pipes,
//! against the scripted provider on 127.0.0.1, with a real database. Every command of the
//! protocol is exercised, plus the framing (LF only, CRLF, U+2028 inside strings, records split
//! across writes), malformed input, unknown commands and a prompt sent while streaming.
//!
//! Waiting is done on observed records (an event, a response), never on a fixed delay: a turn
//! is held open by a `bash` tool call that waits for a file the test creates.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::agent::models_json;
use crate::common::provider::{MockResponse, ProviderServer, sse};
use crate::common::{TEST_CLOCK_START_MS, TestEnv};

const WAIT: Duration = Duration::from_secs(60);

/// A tool call that keeps the turn running until the test creates `go` in the workspace.
fn held_turn(call_id: &str) -> MockResponse {
    MockResponse::sse(sse::openai_tool_call(
        call_id,
        "bash",
        r#"{"command":"while [ ! -f go ]; do sleep 0.02; done; echo released"}"#,
    ))
}

/// `models.json` with the mock model and a second, reasoning one.
fn two_models_json(base_url: &str) -> String {
    format!(
        r#"{{"providers":{{"mock":{{"baseUrl":"{base_url}/v1","api":"openai-completions","apiKey":"test-key","models":[{{"id":"mock-model","name":"Mock","reasoning":false,"input":["text","image"],"contextWindow":128000,"maxTokens":4096,"cost":{{"input":1,"output":2,"cacheRead":0.5,"cacheWrite":0}}}},{{"id":"mock-reasoner","name":"Reasoner","reasoning":true,"input":["text"],"contextWindow":64000,"maxTokens":2048}}]}}}}}}"#
    )
}

/// A running `pi --mode rpc` and everything it wrote so far.
struct Rpc {
    child: Child,
    stdin: Option<ChildStdin>,
    records: mpsc::Receiver<Value>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    /// Records read but not yet consumed by a wait, in order.
    backlog: Vec<Value>,
    next_id: u32,
}

impl Rpc {
    fn start(env: &TestEnv, args: &[&str]) -> Self {
        Self::start_with_env(env, args, &[])
    }

    fn start_with_env(env: &TestEnv, args: &[&str], vars: &[(&str, &str)]) -> Self {
        let mut command = Command::new(assert_cmd::cargo::cargo_bin("pi"));
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &env.home)
            .env("PI_CODING_AGENT_DIR", &env.agent_dir)
            .env("PI_TEST_CLOCK", TEST_CLOCK_START_MS.to_string())
            .env("PI_TEST_SEED", "7")
            .env("NO_COLOR", "1")
            .current_dir(&env.workspace)
            .arg("--mode")
            .arg("rpc")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command.envs(vars.iter().copied());
        let mut child = command.spawn().expect("spawn pi --mode rpc");
        let stdout = child.stdout.take().unwrap();
        let (sender, records) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                assert_eq!(line.pop(), Some(b'\n'), "a record ends with LF");
                let value = pi::support::json::parse_lenient(&line).unwrap_or_else(|error| {
                    panic!(
                        "stdout carries only JSON records ({error}): {}",
                        String::from_utf8_lossy(&line)
                    )
                });
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut stderr_pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr_pipe, &mut text);
            sink.lock().unwrap().push_str(&text);
        });
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            records,
            stderr,
            backlog: Vec::new(),
            next_id: 0,
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a command with a fresh id; returns the id.
    fn send(&mut self, mut command: Value) -> String {
        self.next_id += 1;
        let id = format!("req_{}", self.next_id);
        command["id"] = Value::from(id.as_str());
        let mut line = command.to_string();
        line.push('\n');
        self.write(line.as_bytes());
        id
    }

    fn next_record(&mut self, deadline: Instant) -> Value {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.records.recv_timeout(left) {
            Ok(record) => record,
            Err(_) => {
                let stderr = self
                    .stderr
                    .lock()
                    .map(|text| text.clone())
                    .unwrap_or_default();
                panic!("no record within {WAIT:?}; stderr:\n{stderr}")
            }
        }
    }

    /// Returns the first record (backlog first) matching `wanted`, keeping the others in the
    /// backlog.
    fn wait_for(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(pos) = self.backlog.iter().position(&wanted) {
            return self.backlog.remove(pos);
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let record = self.next_record(deadline);
            if wanted(&record) {
                return record;
            }
            self.backlog.push(record);
        }
    }

    fn wait_event(&mut self, kind: &str) -> Value {
        self.wait_for(|record| record["type"] == kind)
    }

    fn response(&mut self, id: &str) -> Value {
        self.wait_for(|record| record["type"] == "response" && record["id"] == id)
    }

    /// Sends a command and returns its response.
    fn request(&mut self, command: Value) -> Value {
        let id = self.send(command);
        self.response(&id)
    }

    /// Sends a command, asserts success and returns its `data` (`Null` when absent).
    fn ok(&mut self, command: Value) -> Value {
        let kind = command["type"].clone();
        let response = self.request(command);
        assert_eq!(response["success"], true, "{kind}: {response}");
        assert_eq!(response["command"], kind);
        response.get("data").cloned().unwrap_or(Value::Null)
    }

    /// Sends a command, asserts failure and returns its error text.
    fn err(&mut self, command: Value) -> String {
        let kind = command["type"].clone();
        let response = self.request(command);
        assert_eq!(response["success"], false, "{kind}: {response}");
        assert_eq!(response["command"], kind);
        assert!(response.get("data").is_none());
        response["error"].as_str().unwrap().to_owned()
    }

    /// Sends a prompt and returns every record up to its `agent_end`.
    fn prompt_and_wait(&mut self, message: &str) -> Vec<Value> {
        self.ok(json!({"type": "prompt", "message": message}));
        self.collect_until("agent_end")
    }

    /// Returns the backlog and new records up to (and including) the first `kind` event.
    fn collect_until(&mut self, kind: &str) -> Vec<Value> {
        let mut res = Vec::new();
        let deadline = Instant::now() + WAIT;
        loop {
            let record = if self.backlog.is_empty() {
                self.next_record(deadline)
            } else {
                self.backlog.remove(0)
            };
            let done = record["type"] == kind;
            res.push(record);
            if done {
                return res;
            }
        }
    }

    /// Closes stdin and waits for the exit.
    fn finish(mut self) -> (ExitStatus, Vec<Value>) {
        drop(self.stdin.take());
        let status = wait_exit(&mut self.child);
        let mut rest = std::mem::take(&mut self.backlog);
        while let Ok(record) = self.records.recv_timeout(Duration::from_secs(5)) {
            rest.push(record);
        }
        (status, rest)
    }
}

impl Drop for Rpc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_exit(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "pi did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A workspace whose agent dir points at `server`.
fn env_with(server: &ProviderServer, models: &str) -> TestEnv {
    let _ = server;
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(env.agent_dir.join("models.json"), models).unwrap();
    env
}

fn mock_env(server: &ProviderServer) -> TestEnv {
    env_with(server, &models_json(&server.url(), 128_000))
}

fn types(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .map(|record| record["type"].as_str().unwrap_or("?").to_owned())
        .collect()
}

fn message_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect(),
        _ => String::new(),
    }
}

fn settings(env: &TestEnv) -> Value {
    serde_json::from_slice(&std::fs::read(env.agent_dir.join("settings.json")).unwrap()).unwrap()
}

fn release(env: &TestEnv) {
    std::fs::write(env.workspace.join("go"), "").unwrap();
}

#[test]
fn prompt_is_answered_once_with_its_id_then_streams_the_run() {
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Hello there."))]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    let id = rpc.send(json!({"type": "prompt", "message": "Hi"}));
    let records = rpc.collect_until("agent_settled");
    assert_eq!(
        records[0],
        json!({"id": id, "type": "response", "command": "prompt", "success": true,
               "data": {"disposition": "started"}}),
        "the response comes before the run's events"
    );
    let kinds = types(&records[1..]);
    assert_eq!(
        kinds
            .iter()
            .filter(|kind| *kind != "message_update")
            .collect::<Vec<_>>(),
        [
            "agent_start",
            "turn_start",
            // the system message with the prompt and tools, the user message, the answer
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "turn_end",
            "agent_end",
            "agent_settled"
        ]
    );
    assert_eq!(
        records.last().unwrap(),
        &json!({"type": "agent_settled", "aborted": false})
    );
    assert!(kinds.contains(&"message_update".to_owned()));
    let updates: Vec<&Value> = records
        .iter()
        .filter(|record| record["type"] == "message_update")
        .collect();
    assert!(
        updates.iter().all(|update| {
            let keys: Vec<&String> = update.as_object().unwrap().keys().collect();
            keys == ["type", "usage", "assistantMessageEvent"]
                && update["assistantMessageEvent"].get("partial").is_none()
        }),
        "events carry no id; updates are delta-only (1.6.0): {updates:?}"
    );
    let deltas: String = updates
        .iter()
        .filter_map(|update| update["assistantMessageEvent"]["delta"].as_str())
        .collect();
    assert_eq!(deltas, "Hello there.");
    let end = &records[records.len() - 2];
    assert_eq!(end["willRetry"], false);
    assert_eq!(end["messages"].as_array().unwrap().len(), 3);

    let messages = rpc.ok(json!({"type": "get_messages"}))["messages"].clone();
    assert_eq!(messages.as_array().unwrap().len(), 3);
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[1]["role"], "user");
    assert_eq!(message_text(&messages[1]), "Hi");
    assert_eq!(
        messages[2]["content"],
        json!([{"type": "text", "text": "Hello there."}])
    );
    assert_eq!(messages[2]["usage"]["input"], 100);
    assert_eq!(
        rpc.ok(json!({"type": "get_last_assistant_text"})),
        json!({"text": "Hello there."})
    );
    let (status, rest) = rpc.finish();
    assert!(status.success(), "EOF ends RPC mode with 0: {status:?}");
    assert!(rest.is_empty(), "nothing after the last response: {rest:?}");
}

#[test]
fn get_state_reports_the_session_the_model_and_the_queues() {
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Fine."))]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    let state = rpc.ok(json!({"type": "get_state"}));
    let session_id = state["sessionId"].as_str().unwrap().to_owned();
    let keys: Vec<&String> = state.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "model",
            "thinkingLevel",
            "isStreaming",
            "isCompacting",
            "steeringMode",
            "followUpMode",
            "sessionFile",
            "sessionId",
            "autoCompactionEnabled",
            "messageCount",
            "pendingMessageCount"
        ],
        "the reference's key order; no sessionName before one is set"
    );
    assert_eq!(
        state["model"],
        json!({"id": "mock-model", "name": "Mock", "api": "openai-completions", "provider": "mock",
               "baseUrl": format!("{}/v1", server.url()), "reasoning": false, "input": ["text", "image"],
               "cost": {"input": 1, "output": 2, "cacheRead": 0.5, "cacheWrite": 0},
               "contextWindow": 128000, "maxTokens": 4096})
    );
    assert_eq!(state["thinkingLevel"], "off");
    assert_eq!(state["isStreaming"], false);
    assert_eq!(state["steeringMode"], "one-at-a-time");
    assert_eq!(
        state["sessionFile"],
        format!("{}#{session_id}", env.db().display()),
        "the database path with the session id stands for the reference's file"
    );
    assert_eq!(state["messageCount"], 0);
    rpc.prompt_and_wait("Hi");
    let state = rpc.ok(json!({"type": "get_state"}));
    assert_eq!(state["messageCount"], 3);
    assert_eq!(state["sessionId"], session_id.as_str());
    let stored = env.store().session(&pi::model::SessionId::new(&session_id));
    assert!(stored.is_ok(), "the session is in the database");
}

#[test]
fn no_session_has_no_session_file() {
    let server = ProviderServer::start(vec![]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &["--no-session"]);
    let state = rpc.ok(json!({"type": "get_state"}));
    assert!(state.get("sessionFile").is_none(), "{state}");
    let stats = rpc.ok(json!({"type": "get_session_stats"}));
    assert!(stats.get("sessionFile").is_none(), "{stats}");
    assert_eq!(stats["sessionId"], state["sessionId"]);
}

#[test]
fn a_prompt_while_streaming_needs_a_streaming_behavior_and_queued_messages_are_delivered() {
    let server = ProviderServer::start(vec![
        held_turn("call_1"),
        MockResponse::sse(sse::openai_text("Steered.")),
        MockResponse::sse(sse::openai_text("Followed up.")),
    ]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    rpc.ok(json!({"type": "prompt", "message": "Start"}));
    rpc.wait_event("tool_execution_start");

    let error = rpc.err(json!({"type": "prompt", "message": "Again"}));
    assert_eq!(
        error,
        "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
    );
    assert_eq!(
        rpc.ok(json!({"type": "prompt", "message": "Steer me", "streamingBehavior": "steer"})),
        json!({"disposition": "queued"})
    );
    let update = rpc.wait_event("queue_update");
    assert_eq!(
        update,
        json!({"type": "queue_update", "steering": ["Steer me"], "followUp": []})
    );
    assert_eq!(
        rpc.ok(json!({"type": "follow_up", "message": "Then this"})),
        json!({"disposition": "queued"})
    );
    let update = rpc.wait_event("queue_update");
    assert_eq!(update["followUp"], json!(["Then this"]));
    let state = rpc.ok(json!({"type": "get_state"}));
    assert_eq!(state["isStreaming"], true);
    assert_eq!(state["pendingMessageCount"], 2);

    release(&env);
    let records = rpc.collect_until("agent_end");
    let users: Vec<String> = records
        .iter()
        .filter(|record| record["type"] == "message_start" && record["message"]["role"] == "user")
        .map(|record| message_text(&record["message"]))
        .collect();
    assert_eq!(users, ["Start", "Steer me", "Then this"]);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let second = requests[1].json();
    let roles: Vec<&str> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "user"],
        "the steer message follows the tool result"
    );
    server.assert_tool_calls_answered();
    assert_eq!(
        rpc.ok(json!({"type": "get_state"}))["pendingMessageCount"],
        0
    );
    assert_eq!(
        rpc.ok(json!({"type": "get_last_assistant_text"}))["text"],
        "Followed up."
    );
}

#[test]
fn clear_queue_returns_the_queued_texts_and_nothing_is_delivered() {
    let server = ProviderServer::start(vec![
        held_turn("call_1"),
        MockResponse::sse(sse::openai_text("Done.")),
    ]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    rpc.ok(json!({"type": "prompt", "message": "Start"}));
    rpc.wait_event("tool_execution_start");
    rpc.ok(json!({"type": "steer", "message": "Steer me"}));
    rpc.ok(json!({"type": "follow_up", "message": "Then this"}));
    assert_eq!(
        rpc.ok(json!({"type": "clear_queue"})),
        json!({"steering": ["Steer me"], "followUp": ["Then this"]})
    );
    assert_eq!(
        rpc.ok(json!({"type": "get_state"}))["pendingMessageCount"],
        0
    );
    release(&env);
    let records = rpc.collect_until("agent_settled");
    assert!(
        records.iter().any(|record| record["type"] == "queue_update"
            && record["steering"] == json!([])
            && record["followUp"] == json!([])),
        "the emptied queues are reported"
    );
    assert_eq!(server.requests().len(), 2, "no queued message was sent");

    // get_entries / get_tree of this run: every entry once, a cursor, one linear branch.
    let entries = rpc.ok(json!({"type": "get_entries"}));
    let list = entries["entries"].as_array().unwrap().clone();
    assert_eq!(entries["leafId"], list.last().unwrap()["id"]);
    let since = rpc.ok(json!({"type": "get_entries", "since": list[0]["id"]}));
    assert_eq!(since["entries"].as_array().unwrap()[..], list[1..]);
    assert_eq!(
        rpc.err(json!({"type": "get_entries", "since": "nope"})),
        "Entry not found: nope"
    );
    let tree = rpc.ok(json!({"type": "get_tree"}));
    assert_eq!(tree["leafId"], entries["leafId"]);
    let mut node = &tree["tree"][0];
    let mut seen = vec![node["entry"].clone()];
    while let Some(child) = node["children"].get(0) {
        seen.push(child["entry"].clone());
        node = child;
    }
    assert_eq!(seen, list);
}

#[test]
fn steer_with_an_image_and_follow_up_mode_all() {
    let server = ProviderServer::start(vec![
        held_turn("call_1"),
        MockResponse::sse(sse::openai_text("Seen both.")),
    ]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    rpc.ok(json!({"type": "set_steering_mode", "mode": "all"}));
    rpc.ok(json!({"type": "set_follow_up_mode", "mode": "all"}));
    assert_eq!(settings(&env)["steeringMode"], "all");
    assert_eq!(settings(&env)["followUpMode"], "all");
    let error = rpc.err(json!({"type": "set_steering_mode", "mode": "sometimes"}));
    assert!(error.contains("Invalid mode"), "{error}");
    let state = rpc.ok(json!({"type": "get_state"}));
    assert_eq!(state["steeringMode"], "all");
    assert_eq!(state["followUpMode"], "all");

    rpc.ok(json!({"type": "prompt", "message": "Start"}));
    rpc.wait_event("tool_execution_start");
    let image = json!({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"});
    rpc.ok(json!({"type": "steer", "message": "Look", "images": [image]}));
    rpc.ok(json!({"type": "steer", "message": "And this"}));
    release(&env);
    rpc.collect_until("agent_end");
    let messages = rpc.ok(json!({"type": "get_messages"}))["messages"].clone();
    let roles: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "toolResult",
            "user",
            "user",
            "assistant"
        ],
        "mode all delivers both steering messages at once"
    );
    assert_eq!(
        messages[4]["content"],
        json!([{"type": "text", "text": "Look"}, image]),
        "the image follows the text, as the reference builds it"
    );
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn abort_ends_the_turn_and_answers_when_idle() {
    let server = ProviderServer::start(vec![held_turn("call_1")]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    rpc.ok(json!({"type": "prompt", "message": "Start"}));
    rpc.wait_event("tool_execution_start");
    let id = rpc.send(json!({"type": "abort"}));
    let mut records = rpc.collect_until("agent_end");
    records.push(rpc.response(&id));
    let response_at = records
        .iter()
        .position(|record| record["type"] == "response")
        .unwrap();
    assert_eq!(
        response_at,
        records.len() - 1,
        "abort answers after the run ended: {:?}",
        types(&records)
    );
    assert_eq!(records[response_at]["success"], true);
    let tool_end = records
        .iter()
        .find(|record| record["type"] == "tool_execution_end")
        .unwrap();
    assert_eq!(tool_end["isError"], true);
    let state = rpc.ok(json!({"type": "get_state"}));
    assert_eq!(state["isStreaming"], false);
    let messages = rpc.ok(json!({"type": "get_messages"}))["messages"].clone();
    assert_eq!(
        messages.as_array().unwrap().last().unwrap()["stopReason"],
        "aborted"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn abort_retry_cancels_the_wait_before_a_retry() {
    let body = sse::openai_text("This answer will be cut off before it ends, sadly.");
    let cut_at = body.len() / 2;
    let server = ProviderServer::start(vec![MockResponse::sse(body).drop_after(cut_at)]);
    let env = mock_env(&server);
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"retry":{"enabled":true,"maxRetries":3,"baseDelayMs":600000}}"#,
    )
    .unwrap();
    let mut rpc = Rpc::start(&env, &[]);
    rpc.ok(json!({"type": "prompt", "message": "tell me"}));
    assert_eq!(
        rpc.wait_event("agent_end")["willRetry"],
        true,
        "the failed run's agent_end says a retry follows"
    );
    let start = rpc.wait_event("auto_retry_start");
    assert_eq!(start["attempt"], 1);
    assert_eq!(start["maxAttempts"], 3);
    // The wait is capped by `retry.maxAgentDelayMs` (60 s by default), as 1.6.0 caps it.
    assert_eq!(start["delayMs"], 60000);
    rpc.ok(json!({"type": "abort_retry"}));
    let end = rpc.wait_event("auto_retry_end");
    assert_eq!(
        end,
        json!({"type": "auto_retry_end", "success": false, "attempt": 1, "finalError": "Retry cancelled"})
    );
    assert_eq!(server.requests().len(), 1, "no retry was sent");

    rpc.ok(json!({"type": "set_auto_retry", "enabled": false}));
    assert_eq!(settings(&env)["retry"]["enabled"], false);
    assert_eq!(
        settings(&env)["retry"]["baseDelayMs"],
        600000,
        "other keys kept"
    );
    rpc.ok(json!({"type": "set_auto_compaction", "enabled": false}));
    assert_eq!(settings(&env)["compaction"]["enabled"], false);
    assert_eq!(
        rpc.ok(json!({"type": "get_state"}))["autoCompactionEnabled"],
        false
    );
    let error = rpc.err(json!({"type": "set_auto_retry", "enabled": "yes"}));
    assert!(error.contains("must be a boolean"), "{error}");
}

#[test]
fn bash_runs_records_a_message_and_abort_bash_cancels_it() {
    let server = ProviderServer::start(vec![]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    let data = rpc.ok(json!({"type": "bash", "command": "echo hi; exit 3"}));
    assert_eq!(
        data,
        json!({"output": "hi\n", "exitCode": 3, "cancelled": false, "truncated": false})
    );
    let update = rpc.wait_event("bash_execution_update");
    let id = update["id"].clone();
    assert_eq!(
        update,
        json!({"type": "bash_execution_update", "id": id, "delta": "hi\n"}),
        "the output streamed, with the command's id"
    );
    let messages = rpc.ok(json!({"type": "get_messages"}))["messages"].clone();
    assert_eq!(messages[0]["role"], "bashExecution");
    assert_eq!(messages[0]["command"], "echo hi; exit 3");
    rpc.ok(json!({"type": "bash", "command": "echo private", "excludeFromContext": true}));
    let messages = rpc.ok(json!({"type": "get_messages"}))["messages"].clone();
    assert_eq!(messages[1]["excludeFromContext"], true);
    assert_eq!(
        rpc.err(json!({"type": "bash", "command": "true", "excludeFromContext": "yes"})),
        "Invalid bash command: \"excludeFromContext\" must be a boolean"
    );

    let id = rpc.send(json!({"type": "bash", "command": "echo started; touch running; sleep 600"}));
    let marker = env.workspace.join("running");
    let deadline = Instant::now() + WAIT;
    while !marker.exists() {
        assert!(Instant::now() < deadline, "the command did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    rpc.ok(json!({"type": "abort_bash"}));
    let response = rpc.response(&id);
    assert_eq!(response["success"], true);
    assert_eq!(response["data"]["cancelled"], true);
    assert!(response["data"].get("exitCode").is_none());
    assert_eq!(response["data"]["output"], "started\n");
    let stats = rpc.ok(json!({"type": "get_session_stats"}));
    assert_eq!(stats["totalMessages"], 3);
    assert_eq!(stats["userMessages"], 0);
}

#[test]
fn models_and_thinking_levels() {
    let server = ProviderServer::start(vec![]);
    let env = env_with(&server, &two_models_json(&server.url()));
    let mut rpc = Rpc::start(&env, &["--model", "mock/mock-model"]);
    let models = rpc.ok(json!({"type": "get_available_models"}))["models"].clone();
    let ids: Vec<&str> = models
        .as_array()
        .unwrap()
        .iter()
        .map(|model| model["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["mock-model", "mock-reasoner"]);
    assert_eq!(
        models[1],
        json!({"id": "mock-reasoner", "name": "Reasoner", "api": "openai-completions", "provider": "mock",
               "baseUrl": format!("{}/v1", server.url()), "reasoning": true, "input": ["text"],
               "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
               "contextWindow": 64000, "maxTokens": 2048})
    );
    assert_eq!(
        rpc.ok(json!({"type": "cycle_thinking_level"})),
        Value::Null,
        "a model without reasoning has no levels to cycle"
    );
    assert_eq!(
        rpc.err(json!({"type": "set_model", "provider": "mock", "modelId": "nope"})),
        "Model not found: mock/nope"
    );
    let model =
        rpc.ok(json!({"type": "set_model", "provider": "mock", "modelId": "mock-reasoner"}));
    assert_eq!(model, models[1]);
    // 1.6.0 keeps the current level on a switch (no `defaultThinkingLevel` set): "off".
    assert_eq!(
        rpc.ok(json!({"type": "get_state"}))["thinkingLevel"],
        "off",
        "the level of the model switched from"
    );
    assert_eq!(settings(&env)["defaultModel"], "mock-reasoner");
    assert_eq!(
        rpc.ok(json!({"type": "get_available_thinking_levels"})),
        json!({"levels": ["off", "minimal", "low", "medium", "high"]})
    );

    rpc.ok(json!({"type": "set_thinking_level", "level": "high"}));
    assert_eq!(rpc.wait_event("thinking_level_changed")["level"], "high");
    assert_eq!(
        rpc.ok(json!({"type": "get_state"}))["thinkingLevel"],
        "high"
    );
    assert_eq!(
        rpc.ok(json!({"type": "cycle_thinking_level"})),
        json!({"level": "off"}),
        "after high comes off (xhigh needs a mapping)"
    );
    assert_eq!(
        rpc.ok(json!({"type": "cycle_thinking_level"})),
        json!({"level": "minimal"})
    );
    let cycled = rpc.ok(json!({"type": "cycle_model"}));
    assert_eq!(cycled["model"]["id"], "mock-model");
    assert_eq!(cycled["thinkingLevel"], "off");
    assert_eq!(cycled["isScoped"], false);
    assert_eq!(
        rpc.ok(json!({"type": "get_state"}))["model"]["id"],
        "mock-model"
    );
}

#[test]
fn cycle_model_with_one_model_and_scoped_cycling() {
    let server = ProviderServer::start(vec![]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    assert_eq!(rpc.ok(json!({"type": "cycle_model"})), Value::Null);
    drop(rpc);

    let env = env_with(&server, &two_models_json(&server.url()));
    let mut rpc = Rpc::start(
        &env,
        &["--models", "mock/mock-model,mock/mock-reasoner:low"],
    );
    let cycled = rpc.ok(json!({"type": "cycle_model"}));
    assert_eq!(cycled["model"]["id"], "mock-reasoner");
    assert_eq!(cycled["thinkingLevel"], "low", "the scope's level");
    assert_eq!(cycled["isScoped"], true);
}

#[test]
fn new_session_switch_session_fork_and_clone() {
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("One.")),
        MockResponse::sse(sse::openai_text("Two.")),
    ]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    rpc.prompt_and_wait("First");
    rpc.prompt_and_wait("Second");
    let first_id = rpc.ok(json!({"type": "get_state"}))["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();

    let fork_messages = rpc.ok(json!({"type": "get_fork_messages"}))["messages"].clone();
    let texts: Vec<&str> = fork_messages
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["First", "Second"]);
    let keys: Vec<&String> = fork_messages[0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["entryId", "text"]);

    // Fork before the second prompt: a new session holding the first exchange.
    let forked = rpc.ok(json!({"type": "fork", "entryId": fork_messages[1]["entryId"]}));
    assert_eq!(forked, json!({"text": "Second", "cancelled": false}));
    let state = rpc.ok(json!({"type": "get_state"}));
    let fork_id = state["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(fork_id, first_id);
    assert_eq!(state["messageCount"], 3);
    assert_eq!(
        rpc.ok(json!({"type": "get_last_assistant_text"}))["text"],
        "One."
    );
    let error = rpc.err(json!({"type": "fork", "entryId": "ffffffff"}));
    assert!(error.contains("Invalid entry ID for forking"), "{error}");

    // Clone the fork: same messages, another session.
    assert_eq!(
        rpc.ok(json!({"type": "clone"})),
        json!({"cancelled": false})
    );
    let state = rpc.ok(json!({"type": "get_state"}));
    let clone_id = state["sessionId"].as_str().unwrap().to_owned();
    assert!(clone_id != fork_id && clone_id != first_id);
    assert_eq!(state["messageCount"], 3);

    // A new session, then back to the first by a prefix of its id.
    assert_eq!(
        rpc.ok(json!({"type": "new_session", "parentSession": first_id})),
        json!({"cancelled": false})
    );
    let state = rpc.ok(json!({"type": "get_state"}));
    assert_eq!(state["messageCount"], 0);
    assert!(
        ![&first_id, &fork_id, &clone_id]
            .contains(&&state["sessionId"].as_str().unwrap().to_owned())
    );
    assert_eq!(
        rpc.ok(json!({"type": "get_fork_messages"})),
        json!({"messages": []})
    );
    assert_eq!(
        rpc.ok(json!({"type": "get_last_assistant_text"})),
        json!({})
    );

    let prefix = &first_id[..first_id.len() - 4];
    assert_eq!(
        rpc.ok(json!({"type": "switch_session", "sessionPath": prefix})),
        json!({"cancelled": false})
    );
    let state = rpc.ok(json!({"type": "get_state"}));
    assert_eq!(state["sessionId"], first_id.as_str());
    assert_eq!(state["messageCount"], 5);
    let error = rpc.err(json!({"type": "switch_session", "sessionPath": "no-such-session"}));
    assert!(error.contains("no-such-session"), "{error}");

    let store = env.store();
    let fork = store.session(&pi::model::SessionId::new(&fork_id)).unwrap();
    assert_eq!(fork.parent_session.as_deref(), Some(first_id.as_str()));
    let clone = store
        .session(&pi::model::SessionId::new(&clone_id))
        .unwrap();
    assert_eq!(clone.parent_session.as_deref(), Some(fork_id.as_str()));
}

#[test]
fn without_a_model_a_prompt_is_refused_with_one_error_response() {
    // No models.json: nothing is available.
    let env = TestEnv::new();
    let mut rpc = Rpc::start(&env, &[]);
    let state = rpc.ok(json!({"type": "get_state"}));
    assert!(state.get("model").is_none(), "{state}");
    let id = rpc.send(json!({"type": "prompt", "message": "hi"}));
    let response = rpc.response(&id);
    assert_eq!(response["success"], false);
    assert!(
        response["error"]
            .as_str()
            .unwrap()
            .starts_with("No model selected"),
        "{response}"
    );
    assert_eq!(
        rpc.ok(json!({"type": "get_available_models"})),
        json!({"models": []})
    );
    let (status, rest) = rpc.finish();
    assert!(status.success());
    assert!(rest.is_empty(), "one response only: {rest:?}");
}

#[test]
fn set_session_name_trims_refuses_blank_and_announces_the_change() {
    let server = ProviderServer::start(vec![]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    assert_eq!(
        rpc.err(json!({"type": "set_session_name", "name": "   "})),
        "Session name cannot be empty"
    );
    rpc.ok(json!({"type": "set_session_name", "name": "  My work "}));
    assert_eq!(
        rpc.wait_event("session_info_changed"),
        json!({"type": "session_info_changed", "name": "My work"})
    );
    assert_eq!(
        rpc.ok(json!({"type": "get_state"}))["sessionName"],
        "My work"
    );
}

#[test]
fn get_session_stats_counts_messages_tokens_cost_and_context_use() {
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call("call_1", "ls", "{}")),
        MockResponse::sse(sse::openai_text("Listed.")),
    ]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    rpc.prompt_and_wait("list files");
    let stats = rpc.ok(json!({"type": "get_session_stats"}));
    let session_id = stats["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(
        stats,
        json!({"sessionFile": format!("{}#{session_id}", env.db().display()), "sessionId": session_id,
               "userMessages": 1, "assistantMessages": 2, "toolCalls": 1, "toolResults": 1, "totalMessages": 5,
               "tokens": {"input": 200, "output": 40, "cacheRead": 0, "cacheWrite": 0, "total": 240},
               "cost": 0.00028,
               "contextUsage": {"tokens": 120, "contextWindow": 128000, "percent": 0.09375}})
    );
}

#[test]
fn get_commands_lists_prompt_templates_and_skills_with_their_source() {
    let server = ProviderServer::start(vec![]);
    let env = mock_env(&server);
    std::fs::create_dir_all(env.agent_dir.join("prompts")).unwrap();
    std::fs::write(
        env.agent_dir.join("prompts/review.md"),
        "---\ndescription: Review the change\n---\nReview $1\n",
    )
    .unwrap();
    let skill_dir = env.workspace.join(".pi/skills/tidy");
    std::fs::create_dir_all(&skill_dir).unwrap();
    std::fs::write(
        skill_dir.join("SKILL.md"),
        "---\nname: tidy\ndescription: Tidy up\n---\nTidy.\n",
    )
    .unwrap();
    // The project's skill loads once the project is trusted (`-a`: for this run).
    let mut rpc = Rpc::start(&env, &["-a"]);
    let commands = rpc.ok(json!({"type": "get_commands"}))["commands"].clone();
    assert_eq!(
        commands,
        json!([
            {"name": "review", "description": "Review the change", "source": "prompt",
             "sourceInfo": {"path": env.agent_dir.join("prompts/review.md"), "source": "auto", "scope": "user",
                            "origin": "top-level", "baseDir": env.agent_dir}},
            {"name": "skill:tidy", "description": "Tidy up", "source": "skill",
             "sourceInfo": {"path": skill_dir.join("SKILL.md"), "source": "auto", "scope": "project",
                            "origin": "top-level", "baseDir": env.workspace.join(".pi")}}
        ])
    );
}

#[test]
fn framing_is_lf_only_and_keeps_unicode_separators() {
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Ok."))]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    // U+2028 and U+2029 raw inside the string, CRLF ending, and two records in one write, the
    // second one split across two writes.
    let text = "line\u{2028}sep\u{2029}end";
    let first = format!("{{\"id\":\"a\",\"type\":\"prompt\",\"message\":\"{text}\"}}\r\n");
    rpc.write(format!("{first}{{\"id\":\"b\",\"type\":\"get_").as_bytes());
    rpc.write(b"state\"}\n");
    assert_eq!(rpc.response("a")["success"], true);
    assert_eq!(rpc.response("b")["success"], true);
    rpc.collect_until("agent_settled");
    let messages = rpc.ok(json!({"type": "get_messages"}))["messages"].clone();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(message_text(&messages[1]), text);
    let body = server.requests()[0].json();
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"type": "text", "text": text}]),
        "sent to the model unchanged"
    );
    // The last record may end without LF at end of input.
    rpc.write(b"{\"id\":\"c\",\"type\":\"get_state\"}");
    let (status, rest) = rpc.finish();
    assert!(status.success());
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0]["id"], "c");
    assert_eq!(rest[0]["success"], true);
}

/// Ends the process by closing its input: it exits 0 with nothing more to say.
fn finish_quietly(rpc: Rpc) {
    let (status, rest) = rpc.finish();
    assert!(status.success());
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn malformed_input_gets_a_parse_error_response_and_the_process_goes_on() {
    let server = ProviderServer::start(vec![]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    for bad in ["not json", "{\"type\":", "[1,2]", "42", "null", ""] {
        rpc.write(format!("{bad}\n").as_bytes());
        let record = rpc.wait_for(|record| record["type"] == "response");
        assert_eq!(record["command"], "parse", "{bad:?}: {record}");
        assert_eq!(record["success"], false);
        assert!(record.get("id").is_none());
        assert!(
            record["error"]
                .as_str()
                .unwrap()
                .starts_with("Failed to parse command: "),
            "{record}"
        );
    }
    // A stray extension UI response is ignored; the process still answers.
    rpc.write(b"{\"type\":\"extension_ui_response\",\"id\":\"nobody\",\"value\":\"x\"}\n");
    assert_eq!(rpc.ok(json!({"type": "get_state"}))["isStreaming"], false);
    finish_quietly(rpc);
}

#[test]
fn unknown_commands_are_answered_with_their_id_of_any_json_type() {
    let server = ProviderServer::start(vec![]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    rpc.write(b"{\"id\":\"u1\",\"type\":\"make_coffee\"}\n");
    let record = rpc.wait_for(|record| record["type"] == "response");
    assert_eq!(
        record,
        json!({"id": "u1", "type": "response", "command": "make_coffee", "success": false, "error": "Unknown command: make_coffee"}),
        "an unknown command is answered with its id, as 1.6.0 answers it"
    );
    rpc.write(b"{\"id\":\"u2\"}\n");
    let record = rpc.wait_for(|record| record["type"] == "response");
    assert_eq!(
        record,
        json!({"id": "u2", "type": "response", "success": false, "error": "Unknown command: undefined"})
    );
    // An id of any JSON type is echoed as it was.
    rpc.write(b"{\"id\":7,\"type\":\"abort_retry\"}\n");
    let record = rpc.wait_for(|record| record["type"] == "response");
    assert_eq!(
        record,
        json!({"id": 7, "type": "response", "command": "abort_retry", "success": true})
    );
    finish_quietly(rpc);
}

#[test]
fn a_prompt_with_invalid_arguments_is_refused_naming_the_argument() {
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Nothing yet."))]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    let error = rpc.err(json!({"type": "prompt"}));
    assert!(error.contains("\"message\" must be a string"), "{error}");
    let error = rpc.err(json!({"type": "prompt", "message": "x", "streamingBehavior": "now"}));
    assert!(error.contains("streamingBehavior"), "{error}");
    assert!(server.requests().is_empty());
    finish_quietly(rpc);
}

/// 1.6.0 plans nothing on a session with no message yet (0.73.1 asked the model to summarise an
/// empty conversation): the compaction is refused without a request.
#[test]
fn compact_on_an_empty_session_is_refused_without_a_request() {
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Nothing yet."))]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    assert_eq!(
        rpc.err(json!({"type": "compact"})),
        "Nothing to compact (session too small)"
    );
    assert_eq!(rpc.wait_event("compaction_start")["reason"], "manual");
    assert_eq!(
        rpc.wait_event("compaction_end")["errorMessage"],
        "Compaction failed: Nothing to compact (session too small)"
    );
    assert!(server.requests().is_empty());
    finish_quietly(rpc);
}

#[test]
fn sigterm_ends_a_running_turn_with_143() {
    let server = ProviderServer::start(vec![held_turn("call_1")]);
    let env = mock_env(&server);
    let mut rpc = Rpc::start(&env, &[]);
    rpc.ok(json!({"type": "prompt", "message": "Start"}));
    rpc.wait_event("tool_execution_start");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(rpc.child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = wait_exit(&mut rpc.child);
    assert_eq!(status.code(), Some(143));
    // The aborted turn was recorded before the exit.
    let store = env.store();
    let sessions = store.list(&pi::store::ListScope::All).unwrap();
    assert_eq!(sessions.len(), 1);
    let roles: Vec<String> = store
        .entries(&sessions[0].id)
        .unwrap()
        .iter()
        .filter_map(|stored| match &stored.entry.kind {
            pi::model::entry::EntryKind::Message(message) => Some(
                serde_json::to_value(message).unwrap()["role"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            ),
            _ => None,
        })
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "toolResult", "assistant"],
        "the cancelled tool call got its result and the turn its aborted message"
    );
}

/// As the reference builds its runtime in the cwd of the session it switches to, tools, `!cmd`,
/// context files, settings and later new sessions follow the stored session's directory.
#[test]
fn switch_session_moves_the_runtime_to_the_sessions_directory() {
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_tool_call(
            "call_pwd",
            "bash",
            r#"{"command":"pwd"}"#,
        )),
        MockResponse::sse(sse::openai_text("You are in project B.")),
        MockResponse::sse(sse::openai_text("Still in project B.")),
    ]);
    let env = mock_env(&server);
    let project = env.dir.path().join("project-b");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("AGENTS.md"),
        "Project B rules: answer briefly.\n",
    )
    .unwrap();
    // A skill that project B's own settings point at.
    std::fs::create_dir_all(project.join(".pi")).unwrap();
    std::fs::write(
        project.join(".pi/settings.json"),
        r#"{"skills": ["../team-skills"], "compaction": {"enabled": false}, "steeringMode": "all"}"#,
    )
    .unwrap();
    std::fs::create_dir_all(project.join("team-skills/deploy")).unwrap();
    std::fs::write(
        project.join("team-skills/deploy/SKILL.md"),
        "---\nname: deploy\ndescription: Deploys project B to staging.\n---\nRun make deploy.\n",
    )
    .unwrap();
    // An extension of project B's own: it says where it started.
    std::fs::create_dir_all(project.join(".pi/extensions")).unwrap();
    let extension = project.join(".pi/extensions/where.py");
    std::fs::write(
        &extension,
        "#!/usr/bin/env python3\nimport os, sys\nsys.path.insert(0, os.environ[\"PI_EXAMPLES\"])\n\
         from pi_extension import Extension\next = Extension(\"where\")\n\
         @ext.on(\"session_start\")\ndef started(event):\n    \
         open(os.path.join(os.getcwd(), \"extension-started-here\"), \"a\").write(event[\"reason\"] + \"\\n\")\n\
         ext.run()\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&extension, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let project = project.canonicalize().unwrap();
    let header = json!({"type": "session", "version": 3, "id": "0b7c2a10-5555-4666-8777-888888888888",
                        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": project.to_string_lossy()});
    let user = json!({"type": "message", "id": "f0000001", "parentId": null, "timestamp": "2026-01-01T00:00:01.000Z",
                      "message": {"role": "user", "content": [{"type": "text", "text": "Earlier question in B"}], "timestamp": 1767225601000_i64}});
    std::fs::write(
        env.workspace.join("project-b.jsonl"),
        format!("{header}\n{user}\n"),
    )
    .unwrap();
    // Project B is trusted (a decision saved in 1.6.0's `trust.json`): its settings and
    // extension load when the runtime moves there.
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("trust.json"),
        format!("{}\n", json!({project.to_string_lossy(): true})),
    )
    .unwrap();
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/extensions");
    let mut rpc = Rpc::start_with_env(&env, &[], &[("PI_EXAMPLES", &examples.to_string_lossy())]);
    let here = rpc.ok(json!({"type": "bash", "command": "pwd"}));
    assert_eq!(
        here["output"],
        format!("{}\n", env.workspace.canonicalize().unwrap().display())
    );

    assert!(
        !project.join("extension-started-here").exists(),
        "project B's extension is not the startup directory's"
    );
    let state = rpc.ok(json!({"type": "get_state"}));
    assert_eq!(
        (&state["autoCompactionEnabled"], &state["steeringMode"]),
        (&json!(true), &json!("one-at-a-time"))
    );
    rpc.ok(json!({"type": "switch_session", "sessionPath": "project-b.jsonl"}));
    // Project B's settings apply there, as in the runtime the reference builds for it.
    let state = rpc.ok(json!({"type": "get_state"}));
    assert_eq!(
        (&state["autoCompactionEnabled"], &state["steeringMode"]),
        (&json!(false), &json!("all"))
    );
    let there = rpc.ok(json!({"type": "bash", "command": "pwd"}));
    assert_eq!(there["output"], format!("{}\n", project.display()));
    assert_eq!(
        std::fs::read_to_string(project.join("extension-started-here")).unwrap(),
        "resume\n",
        "project B's own extension started there"
    );
    rpc.prompt_and_wait("Where are we?");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let system = requests[0].json()["messages"][0]["content"].to_string();
    assert!(
        system.contains("Project B rules: answer briefly.")
            && system.contains(&*project.to_string_lossy())
            && system.contains("Deploys project B to staging."),
        "the system prompt is built in project B, with its settings' skill: {system}"
    );
    let second = requests[1].json().to_string();
    assert!(
        second.contains(&format!("{}\\n", project.display())),
        "the bash tool ran in project B: {second}"
    );
    // A new session started from there belongs to project B too.
    rpc.ok(json!({"type": "new_session"}));
    let again = rpc.ok(json!({"type": "bash", "command": "pwd"}));
    assert_eq!(again["output"], format!("{}\n", project.display()));
    rpc.prompt_and_wait("And the new session?");
    let new_id = rpc.ok(json!({"type": "get_state"}))["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let store = env.store();
    let summary = store.session(&pi::model::SessionId::new(&new_id)).unwrap();
    assert_eq!(summary.cwd, project.to_string_lossy());
}

#[test]
fn switch_session_imports_a_reference_file_and_refuses_a_session_whose_cwd_is_gone() {
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Continued."))]);
    let env = mock_env(&server);
    let cwd = env.workspace.to_string_lossy().into_owned();
    let header = json!({"type": "session", "version": 3, "id": "0b7c2a10-1111-4222-8333-444444444444",
                        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd});
    let user = json!({"type": "message", "id": "e0000001", "parentId": null, "timestamp": "2026-01-01T00:00:01.000Z",
                      "message": {"role": "user", "content": [{"type": "text", "text": "Imported question"}], "timestamp": 1767225601000_i64}});
    let assistant = json!({"type": "message", "id": "e0000002", "parentId": "e0000001", "timestamp": "2026-01-01T00:00:02.000Z",
                           "message": {"role": "assistant", "content": [{"type": "text", "text": "Imported answer"}],
                                       "api": "openai-completions", "provider": "mock", "model": "mock-model",
                                       "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                                                 "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                                       "stopReason": "stop", "timestamp": 1767225602000_i64}});
    let file = format!("{header}\n{user}\n{assistant}\n");
    std::fs::write(env.workspace.join("imported.jsonl"), &file).unwrap();
    std::fs::write(env.workspace.join("not-a-session.jsonl"), "hello\n").unwrap();
    let mut rpc = Rpc::start(&env, &[]);

    assert_eq!(
        rpc.ok(json!({"type": "switch_session", "sessionPath": "imported.jsonl"})),
        json!({"cancelled": false})
    );
    let state = rpc.ok(json!({"type": "get_state"}));
    assert_eq!(state["sessionId"], "0b7c2a10-1111-4222-8333-444444444444");
    assert_eq!(state["messageCount"], 2);
    assert_eq!(
        rpc.ok(json!({"type": "get_last_assistant_text"}))["text"],
        "Imported answer"
    );
    // The imported session goes on in the database.
    rpc.prompt_and_wait("And now?");
    let store = env.store();
    let id = pi::model::SessionId::new("0b7c2a10-1111-4222-8333-444444444444");
    assert!(store.session(&id).unwrap().messages >= 4);
    assert_eq!(
        std::fs::read_to_string(env.workspace.join("imported.jsonl")).unwrap(),
        file,
        "the source file is never written"
    );

    let error = rpc.err(json!({"type": "switch_session", "sessionPath": "./not-a-session.jsonl"}));
    assert!(error.contains("left as it is"), "{error}");
    let error = rpc.err(json!({"type": "switch_session", "sessionPath": "missing.jsonl"}));
    assert!(error.contains("cannot read the file"), "{error}");

    // A fixture recorded elsewhere: its working directory does not exist here.
    let fixture = crate::common::fixtures::dir().join("basic-chat.jsonl");
    let error = rpc.err(json!({"type": "switch_session", "sessionPath": fixture}));
    assert!(
        error.starts_with("Stored session working directory does not exist: "),
        "{error}"
    );
    assert_eq!(
        rpc.ok(json!({"type": "get_state"}))["sessionId"],
        "0b7c2a10-1111-4222-8333-444444444444",
        "a refused switch stays in the current session"
    );
}

#[test]
fn compact_summarises_the_history_and_abort_cancels_a_running_compaction() {
    let long =
        |head: &str, word: &str| format!("{head}: {}", format!("{word} ").repeat(15).trim_end());
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("Answer one.")),
        MockResponse::sse(sse::openai_text("Answer two.")),
        MockResponse::sse(sse::openai_text("## Goal\nManual summary.")),
        MockResponse::sse(sse::openai_text("Answer three.")),
        // The second summary never comes: the compaction waits until it is aborted.
        MockResponse::sse(sse::openai_text("Too late.")).delay_headers(Duration::from_secs(600)),
    ]);
    let env = env_with(&server, &models_json(&server.url(), 1000));
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"compaction":{"reserveTokens":200,"keepRecentTokens":20}}"#,
    )
    .unwrap();
    let mut rpc = Rpc::start(&env, &[]);
    rpc.prompt_and_wait("first question about apples");
    rpc.prompt_and_wait(&long("Second question", "pears"));

    let id = rpc.send(json!({"type": "compact", "customInstructions": "Focus on the apples"}));
    let start = rpc.wait_event("compaction_start");
    assert_eq!(
        start,
        json!({"type": "compaction_start", "reason": "manual"})
    );
    let end = rpc.wait_event("compaction_end");
    let response = rpc.response(&id);
    assert_eq!(response["success"], true, "{response}");
    let data = &response["data"];
    let keys: Vec<&String> = data.as_object().unwrap().keys().collect();
    assert_eq!(keys[..3], ["summary", "firstKeptEntryId", "tokensBefore"]);
    assert_eq!(data["summary"], "## Goal\nManual summary.");
    assert!(data["tokensBefore"].as_u64().unwrap() > 0);
    assert_eq!(end["result"], *data);
    assert_eq!(end["aborted"], false);
    let summarize = server.requests()[2].json();
    let prompt = summarize["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(
        prompt.contains("Additional focus: Focus on the apples"),
        "{prompt}"
    );
    let messages = rpc.ok(json!({"type": "get_messages"}))["messages"].clone();
    // 1.6.0: the compaction's checkpoint (the replayed system message) leads, then the summary.
    assert_eq!(messages[0]["role"], "system");
    let messages = Value::Array(messages.as_array().unwrap()[1..].to_vec());
    assert_eq!(messages[0]["role"], "compactionSummary");
    assert_eq!(
        rpc.ok(json!({"type": "get_session_stats"}))["contextUsage"],
        json!({"tokens": null, "contextWindow": 1000, "percent": null}),
        "unknown until a model answers after the compaction"
    );
    assert_eq!(messages[0]["summary"], "## Goal\nManual summary.");
    assert_eq!(
        rpc.err(json!({"type": "compact"})),
        "Already compacted",
        "nothing new since the last compaction"
    );

    rpc.prompt_and_wait(&long("Third question", "plums"));
    let id = rpc.send(json!({"type": "compact"}));
    rpc.wait_event("compaction_start");
    server.wait_for_requests(5, WAIT);
    assert_eq!(rpc.ok(json!({"type": "get_state"}))["isCompacting"], true);
    rpc.ok(json!({"type": "abort"}));
    let end = rpc.wait_event("compaction_end");
    assert_eq!(end["aborted"], true);
    assert_eq!(
        rpc.response(&id),
        json!({"id": id, "type": "response", "command": "compact", "success": false, "error": "Compaction cancelled"})
    );
    assert_eq!(rpc.ok(json!({"type": "get_state"}))["isCompacting"], false);
}

/// An extension (the Python helper of `examples/extensions/`) with a command that asks the
/// RPC client through every dialog and notifies the answers.
const ASKER: &str = r#"#!/usr/bin/env python3
import os, sys
sys.path.insert(0, os.environ["PI_EXAMPLES"])
from pi_extension import Extension
ext = Extension("asker")

@ext.command("ask", "Ask the client")
def ask(args):
    picked = ext.select("Pick one", ["red", "green"])
    name = ext.input("Name?", "your name")
    sure = ext.confirm("Sure?", "Really " + args)
    ext.notify("picked=%s name=%s sure=%s ui=%s" % (picked, name, sure, ext.has_ui), "warning")
    edited = ext.editor("Message", prefill="draft")
    ext.set_status("build", "green")
    ext.set_widget("todo", ["one", "two"], "belowEditor")
    ext.set_title("pi-title")
    ext.set_editor_text("edited=%s" % edited)

ext.run()
"#;

#[test]
fn extension_dialogs_go_to_the_client_and_extension_commands_are_listed() {
    let server = ProviderServer::start(vec![]);
    let env = mock_env(&server);
    let script = env.workspace.join("asker.py");
    std::fs::write(&script, ASKER).unwrap();
    let mut permissions = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&script, permissions).unwrap();
    let examples = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/extensions");
    // The extension finds the helper library through PI_EXAMPLES, which pi passes on.
    let mut rpc = Rpc::start_with_env(
        &env,
        &["-e", script.to_str().unwrap()],
        &[("PI_EXAMPLES", examples.to_str().unwrap())],
    );

    let commands = rpc.ok(json!({"type": "get_commands"}))["commands"].clone();
    assert_eq!(
        commands[0],
        json!({"name": "ask", "description": "Ask the client", "source": "extension",
               "sourceInfo": {"path": script, "source": "cli", "scope": "temporary",
                              "origin": "top-level"}})
    );

    let id = rpc.send(json!({"type": "prompt", "message": "/ask now"}));
    let answer = |rpc: &mut Rpc, method: &str, reply: Value| -> Value {
        let request = rpc.wait_for(|record| record["type"] == "extension_ui_request");
        assert_eq!(request["method"], method, "{request}");
        let mut reply = reply;
        reply["type"] = json!("extension_ui_response");
        reply["id"] = request["id"].clone();
        rpc.write(format!("{reply}\n").as_bytes());
        request
    };
    let select = answer(&mut rpc, "select", json!({"value": "green"}));
    assert_eq!(select["title"], "Pick one");
    assert_eq!(select["options"], json!(["red", "green"]));
    let input = answer(&mut rpc, "input", json!({"value": "Ada"}));
    assert_eq!(input["placeholder"], "your name");
    let confirm = answer(&mut rpc, "confirm", json!({"confirmed": true}));
    assert_eq!(confirm["message"], "Really now");
    let notify = rpc.wait_for(|record| record["type"] == "extension_ui_request");
    assert_eq!(notify["method"], "notify");
    assert_eq!(notify["message"], "picked=green name=Ada sure=True ui=True");
    assert_eq!(notify["notifyType"], "warning");
    let editor = answer(&mut rpc, "editor", json!({"value": "draft v2"}));
    assert_eq!(editor["title"], "Message");
    assert_eq!(editor["prefill"], "draft");
    // The fire-and-forget calls, in order, in the reference's shapes.
    let mut next = |method: &str| {
        let request = rpc.wait_for(|record| record["type"] == "extension_ui_request");
        assert_eq!(request["method"], method, "{request}");
        request
    };
    let status = next("setStatus");
    assert_eq!(
        (&status["statusKey"], &status["statusText"]),
        (&json!("build"), &json!("green"))
    );
    let widget = next("setWidget");
    assert_eq!(widget["widgetLines"], json!(["one", "two"]));
    assert_eq!(widget["widgetPlacement"], "belowEditor");
    assert_eq!(next("setTitle")["title"], "pi-title");
    assert_eq!(next("set_editor_text")["text"], "edited=draft v2");
    assert_eq!(
        rpc.response(&id)["data"],
        json!({"disposition": "handled"}),
        "a handled extension command is an accepted prompt that started no run"
    );
    assert_eq!(
        server.requests().len(),
        0,
        "the command never reached the model"
    );

    assert_eq!(
        rpc.err(json!({"type": "steer", "message": "/ask later"})),
        "Extension command \"/ask\" cannot be queued. Use prompt() or execute the command when not streaming."
    );
}
