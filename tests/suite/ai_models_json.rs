//! `models.json` files written for the reference — the examples of its documentation and of
//! the spec, every key form, and broken files — load here exactly as there: the same error
//! text, the same models (built-ins patched, custom models added), and the same key and
//! headers per request (`fixtures/providers/models-json/*.expected.json`, written by
//! `scripts/models-json-oracle.mjs`).
//!
//! The expectations were recorded with 0.73.1 and its built-in table; `models.json` loading
//! still follows 0.73.1 (1.6.0's provider composer is a separate change), so the files load
//! over that table (`builtin-0.73.1.catalog.json`, the table pi carried until the 1.6.0
//! catalog), not over today's.

use std::collections::HashMap;
use std::sync::Arc;

use pi::ai::auth::{AuthFile, Credentials, request_auth};
use pi::ai::models::{Model, ModelRegistry};
use pi::cli::config::Env;
use pi::cli::keys::ShellKeyResolver;
use pi::support::clock::SteppingClock;
use pi::support::json::to_js_string;
use serde_json::{Map, Value, json};

fn dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("providers")
        .join("models-json")
}

/// The environment the oracle ran with (`ORACLE_ENV` in the script), plus PATH and an empty
/// home directory.
fn credentials(home: &std::path::Path) -> Credentials {
    let mut vars: HashMap<String, String> = [
        ("LOCAL_KEY", "local-secret"),
        ("MY_API_KEY", "my-secret"),
        ("PORTKEY_API_KEY", "portkey-secret"),
        ("ANTHROPIC_PROXY_KEY", "proxy-secret"),
        ("AI_GATEWAY_API_KEY", "gateway-secret"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    vars.insert("PATH".into(), std::env::var("PATH").unwrap_or_default());
    vars.insert("HOME".into(), home.display().to_string());
    let env = Env::from_parts(vars, home.to_path_buf(), Some(home.to_path_buf()));
    Credentials::new(
        AuthFile::parse(Some("{}")),
        Arc::new(ShellKeyResolver::new(&env)),
        Arc::new(SteppingClock::new(0, 1)),
    )
}

/// Sorts object keys recursively and prints numbers the JavaScript way, so that `0` and
/// `0.0` and key order do not matter.
fn canonical(value: &Value) -> String {
    fn sort(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for key in keys {
                    out.insert(key.clone(), sort(&map[key]));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    to_js_string(&sort(value))
}

/// The built-in table the expectations were recorded with.
fn recorded_builtins() -> Vec<Model> {
    let file: Value =
        serde_json::from_slice(&std::fs::read(dir().join("builtin-0.73.1.catalog.json")).unwrap())
            .unwrap();
    serde_json::from_value(file["models"].clone()).unwrap()
}

fn model_value(model: &Model) -> Value {
    serde_json::to_value(model).unwrap()
}

#[test]
fn reference_models_json_files_load_exactly_as_there() {
    let home = tempfile::tempdir().unwrap();
    let creds = credentials(home.path());
    let builtins = recorded_builtins();
    assert_eq!(builtins.len(), 969);
    let builtin: HashMap<String, String> = builtins
        .iter()
        .map(|model| (model.reference(), canonical(&model_value(model))))
        .collect();
    let mut inputs: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| {
            name.ends_with(".json")
                && !name.ends_with(".expected.json")
                && !name.ends_with(".catalog.json")
        })
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 20);
    for name in inputs {
        let text = std::fs::read_to_string(dir().join(&name)).unwrap();
        let expected: Value = serde_json::from_slice(
            &std::fs::read(dir().join(name.replace(".json", ".expected.json"))).unwrap(),
        )
        .unwrap();
        let registry = ModelRegistry::load_over(&builtins, Some(&text), "<path>");

        match (registry.error(), expected["error"].as_str()) {
            (None, None) => {}
            (Some(ours), Some(theirs)) if theirs.starts_with("Failed to parse models.json: ") => {
                // The JSON parser's own wording differs (V8 vs serde); the frame is the same.
                assert!(
                    ours.starts_with("Failed to parse models.json: "),
                    "{name}: {ours}"
                );
                assert!(ours.ends_with("\n\nFile: <path>"), "{name}: {ours}");
            }
            (ours, theirs) => assert_eq!(ours, theirs, "{name}: error"),
        }
        assert_eq!(
            registry.all().len() as u64,
            expected["count"].as_u64().unwrap(),
            "{name}: model count"
        );

        let changed: Vec<&Model> = registry
            .all()
            .iter()
            .filter(|model| {
                builtin.get(&model.reference()) != Some(&canonical(&model_value(model)))
            })
            .collect();
        let ours: Vec<String> = changed
            .iter()
            .map(|model| canonical(&model_value(model)))
            .collect();
        let theirs: Vec<String> = expected["changed"]
            .as_array()
            .unwrap()
            .iter()
            .map(canonical)
            .collect();
        pretty_assertions::assert_eq!(ours, theirs, "{name}: changed models");

        for model in changed {
            let result = match request_auth(&registry, &creds, model) {
                Ok(auth) => {
                    let mut out = Map::new();
                    out.insert("ok".into(), json!(true));
                    if let Some(key) = auth.api_key {
                        out.insert("apiKey".into(), json!(key));
                    }
                    if !auth.headers.is_empty() {
                        let headers: Map<String, Value> = auth
                            .headers
                            .into_iter()
                            .map(|(name, value)| (name, Value::String(value)))
                            .collect();
                        out.insert("headers".into(), Value::Object(headers));
                    }
                    Value::Object(out)
                }
                Err(err) => json!({"ok": false, "error": err.message()}),
            };
            let key = model.reference();
            assert_eq!(
                to_js_string(&result),
                to_js_string(&expected["auth"][&key]),
                "{name}: request auth of {key}"
            );
        }
    }
}

#[test]
fn the_readme_models_json_example_loads_and_resolves() {
    let readme = std::fs::read_to_string(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md"),
    )
    .unwrap();
    let section = &readme[readme.find("## Providers").unwrap()..];
    let start = section.find("```json\n").unwrap() + "```json\n".len();
    let text = &section[start..start + section[start..].find("```").unwrap()];
    let registry = ModelRegistry::load(Some(text), "README.md");
    assert_eq!(registry.error(), None);
    let found =
        pi::ai::resolve::resolve_cli_model(None, Some("ollama/qwen2.5-coder:7b"), &registry)
            .unwrap()
            .unwrap();
    assert_eq!(found.model.reference(), "ollama/qwen2.5-coder:7b");
    assert_eq!(found.model.base_url, "http://localhost:11434/v1");
    let found =
        pi::ai::resolve::resolve_cli_model(Some("llama-cpp"), Some("local:high"), &registry)
            .unwrap()
            .unwrap();
    assert_eq!(found.model.reference(), "llama-cpp/local");
    assert_eq!(found.thinking, Some(pi::ai::ThinkingLevel::High));
}

/// 1.6.0's value templates end to end: `${NAME}` and `$NAME` in `apiKey` and headers reach
/// the provider interpolated; a plain upper-case string is sent as it is.
#[test]
fn dollar_names_in_models_json_are_interpolated_into_the_request() {
    use crate::common::provider::{MockResponse, ProviderServer, sse};
    use crate::common::{TestEnv, succeeded};
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("one")),
        MockResponse::sse(sse::openai_text("two")),
    ]);
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    let models = |api_key: &str| {
        format!(
            r#"{{"providers":{{"mock":{{"baseUrl":"{}/v1","api":"openai-completions","apiKey":"{api_key}",
            "headers":{{"x-team":"team-$TEAM_ID","x-cost":"$$5 and $!"}},
            "models":[{{"id":"mock-model","name":"Mock","input":["text"],"contextWindow":128000,"maxTokens":4096}}]}}}}}}"#,
            server.url()
        )
    };
    let run = |api_key: &str| {
        std::fs::write(env.agent_dir.join("models.json"), models(api_key)).unwrap();
        succeeded(
            env.pi()
                .args([
                    "--offline",
                    "--no-session",
                    "--model",
                    "mock/mock-model",
                    "-p",
                    "hi",
                ])
                .env("MOCK_KEY", "sk-from-env")
                .env("TEAM_ID", "42"),
        );
    };
    run("${MOCK_KEY}");
    run("MOCK_KEY");
    let requests = server.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-from-env")
    );
    assert_eq!(requests[0].header("x-team"), Some("team-42"));
    assert_eq!(requests[0].header("x-cost"), Some("$5 and !"));
    assert_eq!(requests[1].header("authorization"), Some("Bearer MOCK_KEY"));
}
