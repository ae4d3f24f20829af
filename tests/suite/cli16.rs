//! pi replays the print-mode runs the real 1.6.0 CLI made for `fixtures/pi16/cli-*`: the same
//! arguments, the same scripted answers (`tests/interop16/scripted-server.mjs`, the server the
//! fixtures were recorded with, on 127.0.0.1), the same workspace and agent dir settings — and
//! must send the model the same requests (bodies byte for byte, key order included) and store
//! the same session (every line, ids and times aside).
//!
//! Differences by design, normalised before comparing: the working directory (a temporary
//! one here, `/tmp/pi16-fixture/work` in the fixtures); entry ids, session ids and times; the
//! text of a connection lost mid-stream, which 1.6.0 takes from Node's HTTP client
//! (`terminated: other side closed (UND_ERR_SOCKET)`) and pi words as "Connection lost while
//! streaming the response (terminated)" — both carry `terminated`, which the retry rules match.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Map, Value};

use crate::common::fixtures;
use crate::suite::interop16::node22;

const FIXTURE_CWD: &str = "/tmp/pi16-fixture/work";

fn interop16_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("interop16")
}

fn read_json(path: &Path) -> Value {
    pi::support::json::parse_lenient(&std::fs::read(path).unwrap()).unwrap()
}

/// The scripted server of the fixtures, running one run's responses.
struct Scripted {
    child: std::process::Child,
    port: u16,
    requests_file: PathBuf,
}

impl Scripted {
    fn start(responses: &Value, dir: &Path) -> Self {
        let script = dir.join("script.json");
        std::fs::write(&script, serde_json::to_vec(responses).unwrap()).unwrap();
        let requests_file = dir.join("requests.json");
        let mut child = Command::new(node22())
            .arg(interop16_dir().join("scripted-server.mjs"))
            .arg(&script)
            .arg(&requests_file)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the scripted server starts");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let port: u16 = line.trim().parse().expect("the server prints its port");
        Self {
            child,
            port,
            requests_file,
        }
    }

    /// Stops the server; returns the request bodies it recorded, in order.
    fn finish(mut self) -> Vec<Value> {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap()),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        self.child.wait().unwrap();
        let recorded = read_json(&self.requests_file);
        recorded
            .as_array()
            .unwrap()
            .iter()
            .map(|request| request["body"].clone())
            .collect()
    }
}

/// Replaces every string equal to or containing `from` by the same with `to`, recursively.
fn replace_strings(value: &Value, from: &str, to: &str) -> Value {
    match value {
        Value::String(text) => Value::String(text.replace(from, to)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| replace_strings(item, from, to))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.clone(), replace_strings(item, from, to)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A session line with its ids, parents and times replaced by their order of appearance.
fn normalize_line(line: &Value, ids: &mut HashMap<String, String>) -> Value {
    fn walk(value: &Value, ids: &mut HashMap<String, String>, key: Option<&str>) -> Value {
        match value {
            Value::Object(map) => {
                let mut out = Map::new();
                for (name, item) in map {
                    out.insert(name.clone(), walk(item, ids, Some(name)));
                }
                Value::Object(out)
            }
            Value::Array(items) => {
                Value::Array(items.iter().map(|item| walk(item, ids, None)).collect())
            }
            Value::String(text)
                if matches!(
                    key,
                    Some("id" | "parentId" | "targetId" | "firstKeptEntryId" | "fromId")
                ) =>
            {
                let next = ids.len();
                Value::from(
                    ids.entry(text.clone())
                        .or_insert_with(|| format!("<id{next}>"))
                        .clone(),
                )
            }
            Value::String(_) if key == Some("timestamp") => Value::from("<time>"),
            Value::String(text) if key == Some("errorMessage") && text.contains("terminated") => {
                Value::from("<connection lost: terminated>")
            }
            Value::Number(_) if matches!(key, Some("timestamp" | "durationMs")) => {
                Value::from("<time>")
            }
            other => other.clone(),
        }
    }
    walk(line, ids, None)
}

pub(super) fn normalize_session(lines: &[Value]) -> Vec<Value> {
    let mut ids = HashMap::new();
    lines
        .iter()
        .skip(1)
        .map(|line| normalize_line(line, &mut ids))
        .collect()
}

/// Compares as JSON text (key order counts), naming the first differing path.
pub(super) fn assert_same(expected: &Value, ours: &Value, what: &str) {
    let expected_text = pi::support::json::to_js_string(expected);
    let ours_text = pi::support::json::to_js_string(ours);
    if expected_text == ours_text {
        return;
    }
    match (expected, ours) {
        (Value::Object(left), Value::Object(right)) => {
            let left_keys: Vec<&String> = left.keys().collect();
            let right_keys: Vec<&String> = right.keys().collect();
            assert_eq!(left_keys, right_keys, "{what}: keys");
            for (key, item) in left {
                assert_same(item, &right[key], &format!("{what}.{key}"));
            }
        }
        (Value::Array(left), Value::Array(right)) if left.len() == right.len() => {
            for (idx, item) in left.iter().enumerate() {
                assert_same(item, &right[idx], &format!("{what}[{idx}]"));
            }
        }
        (Value::Array(left), Value::Array(right)) => {
            // Different lengths: name the kind of each line first.
            let kinds = |lines: &[Value]| -> Vec<String> {
                lines
                    .iter()
                    .map(|line| {
                        let role = line["message"]["role"].as_str().unwrap_or("");
                        format!("{}{}", line["type"].as_str().unwrap_or("?"), role)
                    })
                    .collect()
            };
            panic!(
                "{what}: {} against {} items\n1.6.0: {:?}\npi:    {:?}\n1.6.0: {expected_text}\npi:    {ours_text}",
                left.len(),
                right.len(),
                kinds(left),
                kinds(right)
            );
        }
        _ => {}
    }
    panic!("{what} differs\n1.6.0: {expected_text}\npi:    {ours_text}");
}

/// pi replays a CLI scenario's 1.6.0 runs; returns the requests of each run and pi's session.
struct Replay {
    requests: Vec<Vec<Value>>,
    session: Vec<Value>,
    cwd: String,
}

/// A session file a run opens with `--session PATH`: the fixture's lines before the first
/// system message (what the 0.73.1 CLI wrote before 1.6.0 continued it), its cwd ours.
fn session_before_1_6(name: &str, cwd: &str) -> String {
    let text = std::fs::read_to_string(fixtures::dir16().join(format!("{name}.jsonl"))).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        if line.contains(r#""role":"system""#) {
            break;
        }
        out.push_str(&line.replace(FIXTURE_CWD, cwd));
        out.push('\n');
    }
    out
}

/// A run's scripted responses with the ids the fixtures' one server gave them (it numbered
/// responses across all runs, `chatcmpl-scripted-NNNN` / `msg_scripted_NNNN`; each replayed run
/// has a server of its own).
fn numbered_responses(script: &Value, run_idx: usize) -> Value {
    let runs = script["runs"].as_array().unwrap();
    let before: usize = runs[..run_idx]
        .iter()
        .map(|run| run["responses"].as_array().unwrap().len())
        .sum();
    let run = &runs[run_idx];
    let args: Vec<&str> = run["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let provider = args
        .iter()
        .position(|arg| *arg == "--model")
        .and_then(|at| args.get(at + 1))
        .and_then(|model| model.split('/').next())
        .unwrap_or("scripted");
    let api = script["modelsJson"]["providers"][provider]["api"]
        .as_str()
        .unwrap_or("openai-completions");
    let mut responses = run["responses"].clone();
    for (idx, response) in responses.as_array_mut().unwrap().iter_mut().enumerate() {
        if response.get("id").is_none() && response.get("status").is_none() {
            let number = before + idx + 1;
            let id = match api {
                "anthropic-messages" => format!("msg_scripted_{number:04}"),
                _ => format!("chatcmpl-scripted-{number:04}"),
            };
            response["id"] = Value::from(id);
        }
    }
    responses
}

fn replay(name: &str, runs: &[usize]) -> Replay {
    let script = read_json(&fixtures::dir16().join(format!("{name}.script.json")));
    let root = tempfile::tempdir().unwrap();
    let root_path = std::fs::canonicalize(root.path()).unwrap();
    let (agent, home, work) = (
        root_path.join("agent"),
        root_path.join("home"),
        root_path.join("work"),
    );
    for dir in [&agent, &home, &work] {
        std::fs::create_dir_all(dir).unwrap();
    }
    for (file, content) in script["workFiles"].as_object().unwrap() {
        std::fs::write(work.join(file), content.as_str().unwrap()).unwrap();
    }
    std::fs::write(
        agent.join("settings.json"),
        serde_json::to_vec(&script["settingsJson"]).unwrap(),
    )
    .unwrap();
    let cwd = work.to_string_lossy().into_owned();
    let mut requests = Vec::new();
    for &run_idx in runs {
        let run = &script["runs"][run_idx];
        let server_dir = root_path.join(format!("server{run_idx}"));
        std::fs::create_dir_all(&server_dir).unwrap();
        let server = Scripted::start(&numbered_responses(&script, run_idx), &server_dir);
        let models = pi::support::json::to_js_string(&script["modelsJson"])
            .replace("PORT", &server.port.to_string());
        std::fs::write(agent.join("models.json"), models).unwrap();
        let mut args: Vec<String> = run["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|arg| arg.as_str().unwrap().to_owned())
            .collect();
        // `--session FILE`: the file as it was when the run opened it, at a path of ours.
        if let Some(at) = args.iter().position(|arg| arg == "--session") {
            let file = root_path.join("sessions").join(format!("{name}.jsonl"));
            if !file.exists() {
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, session_before_1_6(name, &cwd)).unwrap();
            }
            args[at + 1] = file.to_string_lossy().into_owned();
        }
        let output = Command::new(env!("CARGO_BIN_EXE_pi"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("PI_CODING_AGENT_DIR", &agent)
            .env("PI_PACKAGE_DIR", "/tmp/pi16-fixture/pkg")
            .env("PI_TELEMETRY", "0")
            .current_dir(&work)
            .args(&args)
            .output()
            .unwrap();
        let requests_of_run = server.finish();
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            run["stdout"].as_str().unwrap(),
            "{name} run {run_idx}: stdout (stderr: {})",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            output.status.code(),
            run["exitCode"]
                .as_i64()
                .map(|code| i32::try_from(code).unwrap()),
            "{name} run {run_idx}: exit code"
        );
        requests.push(requests_of_run);
    }
    // The one session pi stored, as header and entry lines.
    let store = crate::common::open_store(&agent.join("pi.db"), 1);
    let sessions = store.list(&pi::store::ListScope::All).unwrap();
    assert_eq!(sessions.len(), 1, "{name}: one session");
    let mut exported = Vec::new();
    store.export_jsonl(&sessions[0].id, &mut exported).unwrap();
    let session = exported
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| pi::support::json::parse_lenient(line).unwrap())
        .collect();
    Replay {
        requests,
        session,
        cwd,
    }
}

/// The requests 1.6.0 sent in each run of a scenario (a request per scripted response).
fn reference_requests(name: &str) -> Vec<Vec<Value>> {
    let script = read_json(&fixtures::dir16().join(format!("{name}.script.json")));
    let recorded = read_json(&fixtures::dir16().join(format!("{name}.requests.json")));
    let recorded = recorded.as_array().unwrap();
    let mut out = Vec::new();
    let mut at = 0;
    for run in script["runs"].as_array().unwrap() {
        let count = run["responses"].as_array().unwrap().len();
        out.push(recorded[at..at + count].to_vec());
        at += count;
    }
    assert_eq!(at, recorded.len(), "{name}: requests per run");
    out
}

fn reference_session(name: &str) -> Vec<Value> {
    std::fs::read_to_string(fixtures::dir16().join(format!("{name}.jsonl")))
        .unwrap()
        .lines()
        .map(|line| pi::support::json::parse_lenient(line.as_bytes()).unwrap())
        .collect()
}

/// Replays the 1.6.0 runs of a scenario (the 0.73.1 ones are in the session file a run opens)
/// and compares what pi sent and stored.
fn check_scenario(name: &str) {
    let script = read_json(&fixtures::dir16().join(format!("{name}.script.json")));
    let runs: Vec<usize> = script["runs"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, run)| run["cli"] == "1.6.0")
        .map(|(idx, _)| idx)
        .collect();
    let ours = replay(name, &runs);
    let all = reference_requests(name);
    let reference: Vec<&Vec<Value>> = runs.iter().map(|&idx| &all[idx]).collect();
    for (run_idx, (expected, sent)) in reference.iter().zip(&ours.requests).enumerate() {
        assert_eq!(
            expected.len(),
            sent.len(),
            "{name} run {run_idx}: number of requests"
        );
        for (idx, (expected, sent)) in expected.iter().zip(sent).enumerate() {
            let expected = replace_strings(expected, FIXTURE_CWD, &ours.cwd);
            assert_same(
                &expected,
                sent,
                &format!("{name} run {run_idx} request {idx}"),
            );
        }
    }
    let expected_session = replace_strings(
        &Value::Array(normalize_session(&reference_session(name))),
        FIXTURE_CWD,
        &ours.cwd,
    );
    let ours_session = Value::Array(normalize_session(&ours.session));
    assert_same(
        &expected_session,
        &ours_session,
        &format!("{name}: session"),
    );
}

#[test]
fn a_tool_call_run_sends_and_stores_what_1_6_did() {
    check_scenario("cli-tool-call");
}

#[test]
fn a_cut_stream_retried_sends_and_stores_what_1_6_did() {
    check_scenario("cli-retry");
}

#[test]
fn a_0_73_session_continued_gets_its_system_message_and_sends_what_1_6_sent() {
    check_scenario("cli-continue-0731");
}

/// The 1.6.0 CLI (its bundle), run live with the Node 22 of `tests/interop16`.
fn reference_cli16() -> PathBuf {
    interop16_dir().join("node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js")
}

/// pi or the 1.6.0 CLI, run as the fixtures ran it: only `PATH` from our environment, its own
/// home and agent dir, the fixtures' package dir, offline, no telemetry.
fn agent_command(agent: Agent, home: &Path, agent_dir: &Path, work: &Path) -> Command {
    let mut command = match agent {
        Agent::Pi => Command::new(env!("CARGO_BIN_EXE_pi")),
        Agent::Reference => {
            let mut command = Command::new(node22());
            command.arg(reference_cli16());
            command
        }
    };
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("PI_CODING_AGENT_DIR", agent_dir)
        .env("PI_PACKAGE_DIR", "/tmp/pi16-fixture/pkg")
        .env("PI_TELEMETRY", "0")
        .env("PI_OFFLINE", "1")
        .env("PI_SKIP_VERSION_CHECK", "1")
        .current_dir(work);
    command
}

/// One agent continuing a session file with a prompt against a scripted answer: the request
/// it sent, and the lines its session holds afterwards.
struct Continued {
    request: Value,
    lines: Vec<Value>,
}

#[derive(Clone, Copy)]
pub(super) enum Agent {
    Pi,
    Reference,
}

/// Continues `session` (a file, its header's cwd replaced by a fresh workspace) with `prompt`;
/// the workspace and agent dir are the cli-tool-call scenario's.
fn continue_session(agent: Agent, session: &str, prompt: &str, answer: &str) -> Continued {
    let script = read_json(&fixtures::dir16().join("cli-tool-call.script.json"));
    let root = tempfile::tempdir().unwrap();
    let root_path = std::fs::canonicalize(root.path()).unwrap();
    let (agent_dir, home, work) = (
        root_path.join("agent"),
        root_path.join("home"),
        root_path.join("work"),
    );
    for dir in [&agent_dir, &home, &work] {
        std::fs::create_dir_all(dir).unwrap();
    }
    for (file, content) in script["workFiles"].as_object().unwrap() {
        std::fs::write(work.join(file), content.as_str().unwrap()).unwrap();
    }
    std::fs::write(
        agent_dir.join("settings.json"),
        serde_json::to_vec(&script["settingsJson"]).unwrap(),
    )
    .unwrap();
    let cwd = work.to_string_lossy().into_owned();
    let file = root_path.join("continued.jsonl");
    std::fs::write(&file, session.replace(FIXTURE_CWD, &cwd)).unwrap();
    let server_dir = root_path.join("server");
    std::fs::create_dir_all(&server_dir).unwrap();
    let responses = serde_json::json!([{"text": answer, "id": "chatcmpl-continued",
        "usage": {"prompt_tokens": 1700, "completion_tokens": 9, "total_tokens": 1709}}]);
    let server = Scripted::start(&responses, &server_dir);
    let models = pi::support::json::to_js_string(&script["modelsJson"])
        .replace("PORT", &server.port.to_string());
    std::fs::write(agent_dir.join("models.json"), models).unwrap();
    let file_arg = file.to_string_lossy().into_owned();
    let args = ["--offline", "--session", &file_arg, "-p", prompt];
    let output = agent_command(agent, &home, &agent_dir, &work)
        .args(args)
        .output()
        .unwrap();
    let requests = server.finish();
    assert!(
        output.status.success(),
        "continuing failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim_end(), answer);
    assert_eq!(requests.len(), 1, "one request");
    let request = replace_strings(&requests[0], &cwd, FIXTURE_CWD);
    let lines: Vec<Value> = match agent {
        // The reference appends to the file it continued.
        Agent::Reference => std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .map(|line| pi::support::json::parse_lenient(line.as_bytes()).unwrap())
            .collect(),
        // pi imported the file; its session is in the database.
        Agent::Pi => {
            let store = crate::common::open_store(&agent_dir.join("pi.db"), 1);
            let sessions = store.list(&pi::store::ListScope::All).unwrap();
            assert_eq!(sessions.len(), 1);
            let mut exported = Vec::new();
            store.export_jsonl(&sessions[0].id, &mut exported).unwrap();
            exported
                .split(|&byte| byte == b'\n')
                .filter(|line| !line.is_empty())
                .map(|line| pi::support::json::parse_lenient(line).unwrap())
                .collect()
        }
    };
    let lines = lines
        .iter()
        .map(|line| replace_strings(line, &cwd, FIXTURE_CWD))
        .collect();
    Continued { request, lines }
}

#[test]
fn pi_continues_a_session_1_6_wrote_as_1_6_continues_it() {
    let session = std::fs::read_to_string(fixtures::dir16().join("cli-tool-call.jsonl")).unwrap();
    let prompt = "And what does notes.txt say?";
    let answer = "It lists two open tasks.";
    let reference = continue_session(Agent::Reference, &session, prompt, answer);
    let ours = continue_session(Agent::Pi, &session, prompt, answer);
    // The same messages, prompt and tools, byte for byte.
    assert_same(&reference.request, &ours.request, "the continued request");
    // The same lines appended (no system patch: the prompt is unchanged).
    let reference_new = &reference.lines[session.lines().count()..];
    let ours_new = &ours.lines[session.lines().count()..];
    let types = |lines: &[Value]| -> Vec<String> {
        lines
            .iter()
            .map(|line| format!("{}:{}", line["type"], line["message"]["role"]))
            .collect()
    };
    assert_eq!(types(reference_new), types(ours_new));
    assert_same(
        &Value::Array(normalize_session(&reference.lines)),
        &Value::Array(normalize_session(&ours.lines)),
        "the continued session",
    );
}

#[test]
fn the_reference_1_6_continues_what_pi_wrote_as_it_continues_its_own_file() {
    // pi writes the cli-tool-call conversation itself...
    let ours = replay("cli-tool-call", &[0]);
    let mut written = String::new();
    for line in &ours.session {
        written.push_str(&pi::support::json::to_js_string(&replace_strings(
            line,
            &ours.cwd,
            FIXTURE_CWD,
        )));
        written.push('\n');
    }
    // ...and 1.6.0 continues pi's file and its own file of the same conversation.
    let theirs = std::fs::read_to_string(fixtures::dir16().join("cli-tool-call.jsonl")).unwrap();
    let prompt = "And what does notes.txt say?";
    let answer = "It lists two open tasks.";
    let on_ours = continue_session(Agent::Reference, &written, prompt, answer);
    let on_theirs = continue_session(Agent::Reference, &theirs, prompt, answer);
    assert_same(
        &on_theirs.request,
        &on_ours.request,
        "1.6.0's request continuing pi's file",
    );
    assert_same(
        &Value::Array(normalize_session(&on_theirs.lines)),
        &Value::Array(normalize_session(&on_ours.lines)),
        "1.6.0's session continuing pi's file",
    );
}

#[test]
fn pi_continues_a_session_with_omitted_attempts_as_1_6_does() {
    // cli-retry: three failed attempts, each omitted by a context_edit; none is sent again.
    let session = std::fs::read_to_string(fixtures::dir16().join("cli-retry.jsonl")).unwrap();
    let prompt = "Thanks. Anything else in the README?";
    let answer = "No, that is all.";
    let reference = continue_session(Agent::Reference, &session, prompt, answer);
    let ours = continue_session(Agent::Pi, &session, prompt, answer);
    assert_same(&reference.request, &ours.request, "the continued request");
    let sent = pi::support::json::to_js_string(&ours.request["messages"]);
    assert!(
        !sent.contains("The README describes a tiny demo pro"),
        "the omitted attempt is not sent: {sent}"
    );
    assert_same(
        &Value::Array(normalize_session(&reference.lines)),
        &Value::Array(normalize_session(&ours.lines)),
        "the continued session",
    );
}

#[test]
fn a_named_run_with_added_tools_sends_and_stores_what_1_6_did() {
    // `-n` with a newline in the name, `-t +ls` (a modifier on the default tools), `--thinking
    // max`.
    check_scenario("cli-ls-named");
}

#[test]
fn prompt_and_tool_changes_across_runs_persist_as_1_6_persists_them() {
    // `--append-system-prompt` on a continued session (a section patch), then `-t -write,+ls`
    // (tool removals and additions), then a run without either (back to the defaults).
    check_scenario("cli-prompt-changes");
}

#[test]
fn an_anthropic_session_continued_with_other_flags_sends_what_1_6_sent() {
    check_scenario("cli-anthropic-midconvo");
}

#[test]
fn two_compactions_send_and_store_what_1_6_did() {
    // cli-compact-twice: the first compaction cuts at a user message, the second splits a
    // turn (a history and a turn-prefix summary request); both write `systemMessage` and the
    // summary requests' `usage`.
    check_scenario("cli-compact-twice");
}

/// The same print-mode runs made by pi or by the real 1.6.0 CLI in a fresh workspace of the
/// cli-tool-call scenario (its files), with `settings` and one model of `context_window`
/// tokens: each run gets its own scripted server with its responses. Returns the requests
/// of every run and the session's lines (cwd replaced by the fixtures' one).
pub(super) fn live_runs(
    agent: &Agent,
    settings: &Value,
    context_window: u64,
    runs: &[(Vec<&str>, Value)],
) -> (Vec<Vec<Value>>, Vec<Value>) {
    let script = read_json(&fixtures::dir16().join("cli-tool-call.script.json"));
    let root = tempfile::tempdir().unwrap();
    let root_path = std::fs::canonicalize(root.path()).unwrap();
    let (agent_dir, home, work) = (
        root_path.join("agent"),
        root_path.join("home"),
        root_path.join("work"),
    );
    for dir in [&agent_dir, &home, &work] {
        std::fs::create_dir_all(dir).unwrap();
    }
    for (file, content) in script["workFiles"].as_object().unwrap() {
        std::fs::write(work.join(file), content.as_str().unwrap()).unwrap();
    }
    std::fs::write(
        agent_dir.join("settings.json"),
        serde_json::to_vec(settings).unwrap(),
    )
    .unwrap();
    let cwd = work.to_string_lossy().into_owned();
    let mut requests = Vec::new();
    for (idx, (args, responses)) in runs.iter().enumerate() {
        let server_dir = root_path.join(format!("server{idx}"));
        std::fs::create_dir_all(&server_dir).unwrap();
        let server = Scripted::start(responses, &server_dir);
        let models = serde_json::json!({"providers": {"scripted": {
            "baseUrl": format!("http://127.0.0.1:{}/v1", server.port),
            "api": "openai-completions", "apiKey": "scripted-key",
            "models": [{"id": "scripted-small-1", "name": "Scripted Small", "reasoning": false,
                "contextWindow": context_window, "maxTokens": 200,
                "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}]}}});
        std::fs::write(
            agent_dir.join("models.json"),
            serde_json::to_vec(&models).unwrap(),
        )
        .unwrap();
        let output = agent_command(*agent, &home, &agent_dir, &work)
            .args(["--offline", "--model", "scripted/scripted-small-1"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "run {idx} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        requests.push(
            server
                .finish()
                .iter()
                .map(|request| replace_strings(request, &cwd, FIXTURE_CWD))
                .collect(),
        );
    }
    let lines: Vec<Value> = match agent {
        Agent::Reference => {
            let sessions = agent_dir.join("sessions");
            let dir = std::fs::read_dir(&sessions)
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path();
            let file = std::fs::read_dir(dir)
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path();
            std::fs::read_to_string(file)
                .unwrap()
                .lines()
                .map(|line| pi::support::json::parse_lenient(line.as_bytes()).unwrap())
                .collect()
        }
        Agent::Pi => {
            let store = crate::common::open_store(&agent_dir.join("pi.db"), 1);
            let sessions = store.list(&pi::store::ListScope::All).unwrap();
            assert_eq!(sessions.len(), 1);
            let mut exported = Vec::new();
            store.export_jsonl(&sessions[0].id, &mut exported).unwrap();
            exported
                .split(|&byte| byte == b'\n')
                .filter(|line| !line.is_empty())
                .map(|line| pi::support::json::parse_lenient(line).unwrap())
                .collect()
        }
    };
    let lines = lines
        .iter()
        .map(|line| replace_strings(line, &cwd, FIXTURE_CWD))
        .collect();
    (requests, lines)
}

#[test]
fn an_overflow_is_recovered_as_1_6_recovers_it() {
    // A 1000-token window; the second question's request fails with a context overflow. 1.6.0
    // omits the failed attempt (context_edit), compacts once and retries: the omitted attempt
    // closes the kept range, so the cut moves past the question and splits the turn (a history
    // and a turn-prefix summary request), and the retried request carries the checkpoint and
    // the summary only.
    let settings = serde_json::json!({"retry": {"baseDelayMs": 20},
        "compaction": {"enabled": true, "reserveTokens": 200, "keepRecentTokens": 20}});
    let usage =
        serde_json::json!({"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120});
    let overflow = serde_json::json!({"status": 400, "body": {"error": {
        "message": "This model's maximum context length is 1000 tokens. However, your messages resulted in 1500 tokens.",
        "type": "invalid_request_error", "code": "context_length_exceeded"}}});
    let runs = vec![
        (
            vec!["-p", "first question about apples"],
            serde_json::json!([{"text": "Answer one.", "id": "chatcmpl-live-1", "usage": usage}]),
        ),
        (
            vec![
                "-c",
                "-p",
                "Second question: pears pears pears pears pears pears pears pears pears pears pears pears pears pears pears",
            ],
            serde_json::json!([overflow,
                {"text": "## Goal\nOverflow summary.", "id": "chatcmpl-live-2", "usage": usage},
                {"text": "The user asked about pears.", "id": "chatcmpl-live-3", "usage": usage},
                {"text": "Recovered answer.", "id": "chatcmpl-live-4", "usage": usage}]),
        ),
    ];
    let (reference_requests, reference_lines) =
        live_runs(&Agent::Reference, &settings, 1000, &runs);
    let (our_requests, our_lines) = live_runs(&Agent::Pi, &settings, 1000, &runs);
    assert_eq!(
        reference_requests[1].len(),
        4,
        "overflow, two summaries, retry"
    );
    for (run, (expected, sent)) in reference_requests.iter().zip(&our_requests).enumerate() {
        assert_eq!(expected.len(), sent.len(), "run {run}: number of requests");
        for (idx, (expected, sent)) in expected.iter().zip(sent).enumerate() {
            assert_same(expected, sent, &format!("run {run} request {idx}"));
        }
    }
    assert_same(
        &Value::Array(normalize_session(&reference_lines)),
        &Value::Array(normalize_session(&our_lines)),
        "the recovered session",
    );
}

/// `--list-models [WORDS]` prints what 1.6.0 prints: the table of what can be used here (its
/// thousands with one decimal), and a line saying nothing matched when models exist but none
/// matches the words.
#[test]
fn list_models_prints_what_1_6_prints() {
    let dir = tempfile::tempdir().unwrap();
    let (home, agent_dir, work) = (
        dir.path().join("home"),
        dir.path().join("agent"),
        dir.path().join("work"),
    );
    for path in [&home, &agent_dir, &work] {
        std::fs::create_dir_all(path).unwrap();
    }
    std::fs::write(
        agent_dir.join("models.json"),
        serde_json::json!({
            "providers": {
                "acme": {
                    "baseUrl": "http://127.0.0.1:9/v1",
                    "api": "openai-completions",
                    "apiKey": "acme-key",
                    "models": [
                        {"id": "acme-tiny", "contextWindow": 32768, "maxTokens": 4096,
                         "reasoning": false, "input": ["text"]},
                        {"id": "acme-big", "contextWindow": 1_000_000, "maxTokens": 128_000,
                         "reasoning": true, "input": ["text", "image"]},
                        {"id": "acme-odd", "contextWindow": 1_500_000, "maxTokens": 32_250,
                         "reasoning": false, "input": ["text"]}
                    ]
                }
            }
        })
        .to_string(),
    )
    .unwrap();
    for words in [
        &["--list-models"][..],
        &["--list-models", "acme"],
        &["--list-models", "zzzqqq"],
    ] {
        let run = |agent: Agent| {
            let output = agent_command(agent, &home, &agent_dir, &work)
                .args(words)
                .output()
                .unwrap();
            (
                output.status.code(),
                String::from_utf8(output.stdout).unwrap(),
            )
        };
        let (pi, reference) = (run(Agent::Pi), run(Agent::Reference));
        assert_eq!(pi, reference, "{words:?}");
        assert!(!pi.1.is_empty(), "{words:?}");
    }
}

/// The `(provider, model)` rows of a `--list-models` table.
fn table_rows(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut cells = line.split_whitespace();
            Some((cells.next()?.to_owned(), cells.next()?.to_owned()))
        })
        .collect()
}

/// `--list-models` lists what can be used here and names, on stderr, why each other model pi
/// knows cannot be: no credentials (the variables to set, `pi auth login`), an API pi does not
/// speak, an Azure endpoint missing, a `models.json` key whose variable is unset. The table
/// differs from 1.6.0's by exactly the models pi cannot use although the reference lists them
/// (its `pi-messages` API, Azure without an endpoint); a search narrows both parts.
#[test]
fn list_models_says_why_the_other_models_cannot_be_used() {
    let dir = tempfile::tempdir().unwrap();
    let (home, agent_dir, work) = (
        dir.path().join("home"),
        dir.path().join("agent"),
        dir.path().join("work"),
    );
    for path in [&home, &agent_dir, &work] {
        std::fs::create_dir_all(path).unwrap();
    }
    std::fs::write(
        agent_dir.join("models.json"),
        serde_json::json!({
            "providers": {
                "acme": {
                    "baseUrl": "http://127.0.0.1:9/v1",
                    "api": "openai-completions",
                    "apiKey": "${ACME_ORG}-$ACME_KEY",
                    "models": [{"id": "acme-tiny"}, {"id": "acme-big"}]
                },
                "evil\u{1b}[31m": {
                    "baseUrl": "http://127.0.0.1:9/v1",
                    "api": "openai-completions",
                    "apiKey": "$EVIL_KEY",
                    "models": [{"id": "evil-model"}]
                }
            }
        })
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        agent_dir.join("auth.json"),
        r#"{"anthropic": {"type": "api_key", "key": "sk-stored"}}"#,
    )
    .unwrap();
    let vars = [
        ("GROQ_API_KEY", "groq-key"),
        ("RADIUS_API_KEY", "radius-key"),
        ("AZURE_OPENAI_API_KEY", "azure-key"),
        ("ACME_ORG", "org"),
    ];
    let run = |agent: Agent, words: &[&str]| {
        let output = agent_command(agent, &home, &agent_dir, &work)
            .envs(vars)
            .args(words)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        (
            String::from_utf8(output.stdout).unwrap(),
            String::from_utf8(output.stderr).unwrap(),
        )
    };
    let count = |provider: &str| {
        pi::ai::models::builtin_models()
            .iter()
            .filter(|model| model.provider == provider)
            .count()
    };

    let (stdout, stderr) = run(Agent::Pi, &["--list-models"]);
    let rows = table_rows(&stdout);
    let providers: std::collections::BTreeSet<&str> =
        rows.iter().map(|(provider, _)| provider.as_str()).collect();
    assert_eq!(
        providers.into_iter().collect::<Vec<_>>(),
        ["anthropic", "groq"],
        "{stdout}"
    );
    assert_eq!(rows.len(), count("anthropic") + count("groq"));
    let unusable = pi::ai::models::builtin_models().len() + 3 - rows.len();
    assert!(
        stderr.starts_with(&format!(
            "{unusable} models pi knows cannot be used here:\n"
        )),
        "{stderr}"
    );
    let line = |provider: &str| {
        stderr
            .lines()
            .find(|line| line.trim_start().starts_with(&format!("{provider} (")))
            .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| panic!("no line for {provider}: {stderr}"))
    };
    assert_eq!(
        line("radius"),
        format!(
            "radius ({} models) its API \"pi-messages\" is not one pi speaks",
            count("radius")
        )
    );
    assert_eq!(
        line("azure"),
        format!(
            "azure ({} models) no Azure OpenAI endpoint: set AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME",
            count("azure")
        )
    );
    assert_eq!(
        line("mistral"),
        format!(
            "mistral ({} models) no API key: set MISTRAL_API_KEY, or run `pi auth login mistral`",
            count("mistral")
        )
    );
    assert_eq!(
        line("openai-codex"),
        format!(
            "openai-codex ({} models) not signed in: run `pi auth login openai-codex`",
            count("openai-codex")
        )
    );
    assert_eq!(
        line("acme"),
        "acme (2 models) its models.json apiKey needs the environment variable ACME_KEY, which is not set"
    );
    assert!(line("amazon-bedrock").contains("AWS_PROFILE"), "{stderr}");
    assert!(
        line("google-vertex").contains("GOOGLE_CLOUD_PROJECT"),
        "{stderr}"
    );
    // A provider name from models.json reaches the terminal without its control characters.
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(stderr.contains("evil\\x1b[31m (1 model)"), "{stderr}");

    // 1.6.0 lists what it has keys for, radius and azure too: the difference is exactly those.
    let (reference_stdout, _) = run(Agent::Reference, &["--list-models"]);
    let mut extra: Vec<(String, String)> = table_rows(&reference_stdout)
        .into_iter()
        .filter(|row| !rows.contains(row))
        .collect();
    extra.sort();
    let mut expected: Vec<(String, String)> = pi::ai::models::builtin_models()
        .iter()
        .filter(|model| model.provider == "radius" || model.provider == "azure")
        .map(|model| (model.provider.clone(), model.id.clone()))
        .collect();
    expected.sort();
    assert_eq!(extra, expected);

    // Words narrow both parts; a search only unusable models match says so on stdout as the
    // reference does, and why on stderr.
    let (stdout, stderr) = run(Agent::Pi, &["--list-models", "radius"]);
    assert_eq!(stdout, "No models matching \"radius\"\n");
    let lines: Vec<String> = stderr
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let radius = count("radius");
    assert!(
        lines.contains(&format!(
            "radius ({radius} models) its API \"pi-messages\" is not one pi speaks"
        )),
        "{stderr}"
    );
    // The heading counts the models of the lines under it (the words match as a fuzzy
    // subsequence, so other providers' models match too).
    let counted: usize = lines[1..]
        .iter()
        .map(|line| {
            let inside = line.split(" (").nth(1).unwrap().split(' ').next().unwrap();
            inside.parse::<usize>().unwrap()
        })
        .sum();
    assert_eq!(
        lines[0],
        format!("{counted} matching models pi knows cannot be used here:")
    );
    let (stdout, stderr) = run(Agent::Pi, &["--list-models", "acme"]);
    assert_eq!(stdout, "No models matching \"acme\"\n");
    assert!(
        stderr.lines().any(|line| line
            .starts_with("  acme (2 models)  ")
            && line.ends_with("its models.json apiKey needs the environment variable ACME_KEY, which is not set")),
        "{stderr}"
    );
}
