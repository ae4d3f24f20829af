//! The reference's own TypeScript extensions — the examples shipped in the 1.6.0 package,
//! unchanged — run by pi's Node host (`docs/extensions.md`, "The reference's extensions")
//! behave as in the reference: the same scripted runs through both agents (the 1.6.0 CLI with
//! `--offline`, the scripted model server on 127.0.0.1) send the model the same requests and
//! store the same sessions.
//!
//! The examples: `hello.ts` (a tool registered and called), `permission-gate.ts` (a
//! `tool_call` handler whose result blocks `rm -rf` when nobody can confirm),
//! `entry-renderer.ts` (the `/status-card` command writing a custom entry with `appendEntry`)
//! and `bookmark.ts` (the `/bookmark` command reading the resumed session's entries through
//! `ctx.sessionManager` and labelling the last answer with `setLabel`).

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::common::TestEnv;
use crate::common::agent::models_json;
use crate::common::provider::{MockResponse, ProviderServer, sse};
use crate::suite::cli16::{Agent, assert_same, live_runs, normalize_session};
use crate::suite::interop16::interop16_dir;

fn example(name: &str) -> String {
    let path: PathBuf = interop16_dir()
        .join("node_modules/@earendil-works/pi-coding-agent/examples/extensions")
        .join(name);
    assert!(path.exists(), "{} is missing", path.display());
    path.display().to_string()
}

fn runs_of(agent: Agent) -> (Vec<Vec<Value>>, Vec<Value>) {
    let (hello, gate, card, bookmark) = (
        example("hello.ts"),
        example("permission-gate.ts"),
        example("entry-renderer.ts"),
        example("bookmark.ts"),
    );
    let first = vec![
        "-e",
        hello.as_str(),
        "-e",
        gate.as_str(),
        "-p",
        "Greet Ada, then clean the build directory.",
    ];
    let second = vec![
        "-c",
        "-e",
        card.as_str(),
        "-p",
        "/status-card build cleaned",
    ];
    let third = vec!["-c", "-e", bookmark.as_str(), "-p", "/bookmark greeted"];
    let runs = [
        (
            first,
            json!([
                {"toolCalls": [{"id": "call_hello", "name": "hello", "arguments": {"name": "Ada"}}]},
                {"toolCalls": [{"id": "call_rm", "name": "bash", "arguments": {"command": "rm -rf build"}}]},
                {"text": "Greeted Ada; the clean-up was blocked."}
            ]),
        ),
        (second, json!([])),
        (third, json!([])),
    ];
    live_runs(&agent, &json!({}), 128_000, &runs)
}

#[test]
fn reference_example_extensions_run_by_the_node_host_behave_as_in_the_reference() {
    let (reference_requests, reference_lines) = runs_of(Agent::Reference);
    let (our_requests, our_lines) = runs_of(Agent::Pi);
    // Run 1: three model calls; the second carries the hello tool's result, the third the
    // gate's block reason.
    assert_eq!(reference_requests[0].len(), 3, "the reference's first run");
    let last = reference_requests[0][2].to_string();
    assert!(last.contains("Hello, Ada!"), "{last}");
    assert!(
        last.contains("Dangerous command blocked (no UI for confirmation)"),
        "{last}"
    );
    for (run, (expected, sent)) in reference_requests.iter().zip(&our_requests).enumerate() {
        assert_eq!(expected.len(), sent.len(), "run {run}: number of requests");
        for (idx, (expected, sent)) in expected.iter().zip(sent).enumerate() {
            assert_same(expected, sent, &format!("run {run} request {idx}"));
        }
    }
    // The custom entry of run 2 and the label of run 3 (on the answer of run 1, found in the
    // resumed session) are stored as the reference stores them.
    let reference = normalize_session(&reference_lines);
    let text = Value::Array(reference.clone()).to_string();
    assert!(text.contains(r#""customType":"status-card""#), "{text}");
    assert!(text.contains(r#""label":"greeted""#), "{text}");
    assert_same(
        &Value::Array(reference),
        &Value::Array(normalize_session(&our_lines)),
        "the session",
    );
}

/// Without `node` on PATH a reference extension is one error line naming what is missing;
/// the run goes on.
#[test]
fn without_node_a_reference_extension_is_reported_and_the_run_goes_on() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Hi."))]);
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json(&server.url(), 128_000),
    )
    .unwrap();
    let hello = example("hello.ts");
    let output = env
        .pi()
        .env("PATH", "/nonexistent")
        .args(["-p", "--model", "mock/mock-model", "-e", &hello, "Hello."])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Hi.\n");
    assert!(
        stderr.contains(&format!(
            "Extension error ({hello}): failed to start: TypeScript/JavaScript extensions need Node.js 18 or newer, and no `node` was found on PATH"
        )),
        "{stderr}"
    );
}
