//! The streaming client against recorded provider streams, compared with what the reference
//! implementation made of the same bytes (`fixtures/providers/*.case.json` and the
//! `*.expected.json` written by `scripts/provider-oracle.mjs`): the requests we send (body
//! byte for byte, the headers that matter), the events, and the final assistant message.
//! Every case runs with the body whole and cut at seeded random points.

use std::time::Duration;

use pi::ai::convert::convert_to_llm;
use pi::ai::models::builtin_models;
use pi::ai::{
    AiClient, CacheRetention, CancellationToken, Model, Request, StreamEvent, StreamOptions,
    ThinkingLevel, ToolDefinition, TransportConfig,
};
use pi::model::message::AgentMessage;
use pi::support::clock::SteppingClock;
use pi::support::ids::IdSource;
use pi::support::json::to_js_string;
use serde_json::{Map, Value, json};

use crate::common::provider::{MockResponse, ProviderServer, RecordedRequest};

fn dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("providers")
}

fn case_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".case.json").map(str::to_owned)
        })
        .collect();
    names.sort();
    names
}

fn read_json(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(dir().join(name)).unwrap()).unwrap()
}

pub fn client() -> AiClient {
    AiClient::new(
        std::sync::Arc::new(SteppingClock::new(1_767_225_600_000, 1)),
        std::sync::Arc::new(IdSource::seeded(5)),
    )
    .unwrap()
}

pub fn fast_transport() -> TransportConfig {
    TransportConfig {
        max_retries: 2,
        request_timeout: Duration::from_secs(20),
        idle_timeout: Duration::from_secs(20),
        max_retry_delay: Some(Duration::from_secs(60)),
        initial_retry_delay: Duration::from_millis(10),
    }
}

fn model_for(spec: &Value, server: &ProviderServer) -> Model {
    let mut value = if let Some(builtin) = spec["model"]["builtin"].as_array() {
        let (provider, id) = (builtin[0].as_str().unwrap(), builtin[1].as_str().unwrap());
        let model = builtin_models()
            .iter()
            .find(|model| model.provider == provider && model.id == id)
            .unwrap();
        let mut value = serde_json::to_value(model).unwrap();
        if let Some(set) = spec["model"]["set"].as_object() {
            for (key, item) in set {
                value[key] = item.clone();
            }
        }
        value
    } else {
        spec["model"]["custom"].clone()
    };
    value["baseUrl"] = json!(format!(
        "{}{}",
        server.url(),
        spec["basePath"].as_str().unwrap_or("")
    ));
    serde_json::from_value(value).unwrap()
}

fn request_for(spec: &Value) -> Request {
    let context = &spec["context"];
    let messages: Vec<AgentMessage> = context["messages"]
        .as_array()
        .unwrap()
        .iter()
        .cloned()
        .map(AgentMessage::from_value)
        .collect();
    Request {
        system_prompt: context["systemPrompt"].as_str().unwrap_or("").to_owned(),
        messages: convert_to_llm(&messages),
        tools: context["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|tool| ToolDefinition {
                name: tool["name"].as_str().unwrap().to_owned(),
                description: tool["description"].as_str().unwrap().to_owned(),
                parameters: tool["parameters"].clone(),
            })
            .collect(),
    }
}

/// The environment a case's `options.env` gives (the reference's scoped provider
/// environment), over the case's files written into a temporary directory.
#[derive(Debug)]
struct CaseEnv {
    vars: std::collections::HashMap<String, String>,
}

impl pi::ai::auth::KeyResolver for CaseEnv {
    fn env(&self, name: &str) -> Option<String> {
        self.vars
            .get(name)
            .filter(|value| !value.is_empty())
            .cloned()
    }

    fn run_command(&self, _command: &str) -> Option<String> {
        None
    }

    fn read_file(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
}

/// Writes the case's `files` (with `{server}` replaced) and returns its environment.
fn case_env(spec: &Value, server_url: &str, files: &std::path::Path) -> CaseEnv {
    for (name, fixture) in spec["files"].as_object().into_iter().flatten() {
        let text = std::fs::read_to_string(dir().join(fixture.as_str().unwrap())).unwrap();
        std::fs::write(files.join(name), text.replace("{server}", server_url)).unwrap();
    }
    let files = files.to_str().unwrap();
    CaseEnv {
        vars: spec["options"]["env"]
            .as_object()
            .into_iter()
            .flatten()
            .chain(spec["processEnv"].as_object().into_iter().flatten())
            .map(|(name, value)| {
                let value = value.as_str().unwrap();
                let value = value
                    .replace("{files}", files)
                    .replace("{server}", server_url);
                (name.clone(), value)
            })
            .collect(),
    }
}

fn options_for(spec: &Value, model: &Model, env: &CaseEnv) -> StreamOptions {
    let opts = &spec["options"];
    let mut options = StreamOptions::new(pi::ai::auth::RequestAuth {
        api_key: opts["apiKey"].as_str().map(str::to_owned),
        headers: opts["headers"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, value)| (name.clone(), value.as_str().unwrap().to_owned()))
            .collect(),
        base_url: String::new(),
        ..Default::default()
    });
    options.base_url = None;
    (options.provider_env, options.cloud) =
        pi::ai::auth::provider_settings(model, options.api_key.as_deref(), env);
    options.thinking = opts["reasoning"]
        .as_str()
        .and_then(ThinkingLevel::parse)
        .unwrap_or(ThinkingLevel::Off);
    options.session_id = opts["sessionId"].as_str().map(str::to_owned);
    options.cache_retention = match opts["cacheRetention"].as_str() {
        Some("long") => CacheRetention::Long,
        Some("none") => CacheRetention::None,
        _ => CacheRetention::Short,
    };
    options.transport = fast_transport();
    options.transport.max_retries = opts["maxRetries"].as_u64().unwrap_or(2) as u32;
    options.identity = pi::ai::request::ClientIdentity::agent(opts["attribution"] != false);
    if let Some(max) = opts["maxTokens"].as_u64() {
        options.max_tokens = Some(max);
    }
    if let Some(budgets) = opts["thinkingBudgets"].as_object() {
        let pick =
            |key: &str, default: u64| budgets.get(key).and_then(Value::as_u64).unwrap_or(default);
        let defaults = pi::ai::ThinkingBudgets::default();
        options.thinking_budgets = pi::ai::ThinkingBudgets {
            minimal: pick("minimal", defaults.minimal),
            low: pick("low", defaults.low),
            medium: pick("medium", defaults.medium),
            high: pick("high", defaults.high),
        };
    }
    options
}

fn responses_for(spec: &Value, chunking: Option<(u64, usize)>) -> Vec<MockResponse> {
    spec["responses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|response| {
            let status = response["status"].as_u64().unwrap() as u16;
            let mut mock = match response["bodyFile"].as_str() {
                Some(file) => {
                    // SSE text, or binary event-stream frames (Bedrock).
                    let mut mock = MockResponse::sse("");
                    mock.body = std::fs::read(dir().join(file)).unwrap();
                    mock.status = status;
                    mock.headers.clear();
                    mock
                }
                None => {
                    let mut mock =
                        MockResponse::json(status, response["body"].as_str().unwrap_or(""));
                    mock.headers.clear();
                    mock
                }
            };
            for (name, value) in response["headers"].as_object().into_iter().flatten() {
                mock = mock.header(name, value.as_str().unwrap());
            }
            if let Some(limit) = response["dropAfter"].as_u64() {
                mock = mock.drop_after(limit as usize);
            }
            if let Some((seed, max)) = chunking {
                mock = mock.chunked(seed, max);
            }
            mock
        })
        .collect()
}

/// The event as the oracle records it: no `partial`, `message` or `error`.
pub fn event_json(event: &StreamEvent, partial: &pi::model::message::AssistantMessage) -> Value {
    let mut value = event.to_json(partial);
    if let Value::Object(map) = &mut value {
        map.shift_remove("partial");
        map.shift_remove("message");
        map.shift_remove("error");
    }
    value
}

/// The message as the oracle records it: `role` first, timestamp, duration and diagnostic
/// timestamps 0.
fn message_json(message: &pi::model::message::AssistantMessage) -> Value {
    let mut message = message.clone();
    message.timestamp = 0;
    if message.duration_ms.is_some() {
        message.duration_ms = Some(0);
    }
    if let Some(Value::Array(diagnostics)) = &mut message.diagnostics {
        for diagnostic in diagnostics {
            diagnostic["timestamp"] = json!(0);
        }
    }
    let mut out = Map::new();
    out.insert("role".into(), json!("assistant"));
    if let Value::Object(map) = serde_json::to_value(&message).unwrap() {
        out.extend(map);
    }
    Value::Object(out)
}

struct Outcome {
    events: Vec<Value>,
    message: Value,
    requests: Vec<RecordedRequest>,
}

async fn run_case(name: &str, chunking: Option<(u64, usize)>) -> Outcome {
    let spec = read_json(&format!("{name}.case.json"));
    let server = ProviderServer::start(responses_for(&spec, chunking));
    let model = model_for(&spec, &server);
    let files = tempfile::tempdir().unwrap();
    let env = case_env(&spec, &server.url(), files.path());
    let mut stream = client().stream(
        &model,
        request_for(&spec),
        options_for(&spec, &model, &env),
        CancellationToken::new(),
    );
    let mut events = Vec::new();
    let mut last = None;
    while let Some(event) = stream.next().await {
        let partial = stream.partial().clone();
        events.push(event_json(&event, &partial));
        last = Some(event);
    }
    let message = match last {
        Some(StreamEvent::Done { message, .. }) | Some(StreamEvent::Error { message, .. }) => {
            *message
        }
        other => panic!("{name}: the last event is not terminal: {other:?}"),
    };
    assert!(
        stream.next().await.is_none(),
        "{name}: events after the terminal one"
    );
    Outcome {
        events,
        message: message_json(&message),
        requests: server.requests(),
    }
}

/// The expectation with this project's deliberate departures (`departure` in the case) applied.
fn expected_for(name: &str) -> (Value, Value) {
    let spec = read_json(&format!("{name}.case.json"));
    let mut expected = read_json(&format!("{name}.expected.json"));
    if let Some(departure) = spec.get("departure") {
        if let Some(text) = departure["errorMessage"].as_str() {
            expected["message"]["errorMessage"] = json!(text);
        }
        if departure["stopReason"] == "error" {
            expected["message"]["stopReason"] = json!("error");
            let events = expected["events"].as_array_mut().unwrap();
            events.pop();
            if departure["finishBlocks"] == false {
                while events
                    .last()
                    .is_some_and(|event| event["type"].as_str().unwrap().ends_with("_end"))
                {
                    events.pop();
                }
            }
            events.push(json!({"type": "error", "reason": "error"}));
        }
    }
    (spec, expected)
}

const CHECKED_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "anthropic-version",
    "anthropic-beta",
    "anthropic-dangerous-direct-browser-access",
    "content-type",
    "accept",
    "x-app",
    "http-referer",
    "x-openrouter-title",
    "x-openrouter-categories",
    "x-billing-invoke-origin",
    "x-opencode-client",
    "x-opencode-session",
    "session_id",
    "session-id",
    "api-key",
    "x-session-id",
    "x-session-affinity",
    "x-client-request-id",
    "cf-aig-authorization",
    "x-goog-api-key",
    "x-goog-user-project",
    "x-amz-security-token",
    "x-amz-content-sha256",
    "x-affinity",
    "chatgpt-account-id",
    "originator",
    "openai-beta",
    "content-encoding",
];

/// The identity `User-Agent` with what legitimately differs replaced: the version and the
/// runtime (`pi/1.6.0 (linux; node/v22.23.5; x64)` there, `pi/0.1.0 (linux; rust; x64)` here).
fn user_agent_shape(agent: &str) -> String {
    match agent
        .strip_prefix("pi/")
        .and_then(|rest| rest.split_once(" ("))
    {
        Some((_, detail)) => {
            let parts: Vec<&str> = detail.trim_end_matches(')').split("; ").collect();
            match parts.as_slice() {
                [platform, _, arch] => format!("pi/<version> ({platform}; <runtime>; {arch})"),
                _ => agent.to_owned(),
            }
        }
        None => agent.to_owned(),
    }
}

/// A tool call's `argumentsError` names the JSON parser's complaint (V8's there, serde's
/// here) before the text the model sent; only the latter is compared.
fn normalize_arguments_errors(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(error)) = map.get_mut("argumentsError")
                && let Some(at) = error.find("\n\nReceived arguments:")
            {
                *error = format!("<parse error>{}", &error[at..]);
            }
            for item in map.values_mut() {
                normalize_arguments_errors(item);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize_arguments_errors),
        _ => {}
    }
}

fn compare(name: &str, label: &str, outcome: &Outcome, expected: &Value) {
    let expected_requests = expected["requests"].as_array().unwrap();
    assert_eq!(
        outcome.requests.len(),
        expected_requests.len(),
        "{name} {label}: request count (errorMessage: {})",
        outcome.message["errorMessage"]
    );
    for (ours, theirs) in outcome.requests.iter().zip(expected_requests) {
        assert_eq!(
            ours.method,
            theirs["method"].as_str().unwrap(),
            "{name}: method"
        );
        assert_eq!(ours.path, theirs["path"].as_str().unwrap(), "{name}: path");
        if ours.path == "/token" {
            compare_token_request(name, label, ours, theirs);
            continue;
        }
        pretty_assertions::assert_eq!(
            to_js_string(&ours.json()),
            to_js_string(&theirs["body"]),
            "{name} {label}: request body"
        );
        let sigv4 = theirs["headers"]["authorization"]
            .as_str()
            .is_some_and(|value| value.starts_with("AWS4-HMAC-SHA256 "));
        if sigv4 {
            check_sigv4(name, label, ours, theirs);
        }
        for header in CHECKED_HEADERS {
            if sigv4 && *header == "authorization" {
                continue;
            }
            // reqwest's default `Accept: */*` where the AWS SDK sends none.
            if *header == "accept"
                && ours.header("accept") == Some("*/*")
                && theirs["headers"]["accept"].is_null()
            {
                continue;
            }
            assert_eq!(
                ours.header(header),
                theirs["headers"][*header].as_str(),
                "{name} {label}: header {header}"
            );
        }
        if let Some(agent) = theirs["headers"]["user-agent"]
            .as_str()
            .filter(|agent| agent.starts_with("aws-sdk-js/"))
        {
            // The AWS SDK's agent with pi's pair appended; ours is pi's identity agent.
            assert!(agent.ends_with(" pi/1.6.0"), "{name}: {agent}");
            assert!(
                ours.header("user-agent")
                    .is_some_and(|ua| ua.starts_with("pi/")),
                "{name}: user-agent"
            );
        } else if let Some(agent) = theirs["headers"]["user-agent"].as_str() {
            assert_eq!(
                ours.header("user-agent").map(user_agent_shape),
                Some(user_agent_shape(agent)),
                "{name}: user-agent"
            );
        }
    }
    let mut ours_events = Value::Array(outcome.events.clone());
    let mut theirs_events = expected["events"].clone();
    normalize_arguments_errors(&mut ours_events);
    normalize_arguments_errors(&mut theirs_events);
    pretty_assertions::assert_eq!(ours_events, theirs_events, "{name} {label}: events");
    let mut ours_message = outcome.message.clone();
    let mut theirs_message = expected["message"].clone();
    normalize_arguments_errors(&mut ours_message);
    normalize_arguments_errors(&mut theirs_message);
    pretty_assertions::assert_eq!(
        to_js_string(&ours_message),
        to_js_string(&theirs_message),
        "{name} {label}: final message"
    );
}

/// The secret key of an access key id the fixtures use: the case environment's, or the
/// one the test credentials file pairs with it.
fn aws_secret_for(access_key_id: &str) -> String {
    for case in case_names() {
        let spec = read_json(&format!("{case}.case.json"));
        let env = &spec["options"]["env"];
        if env["AWS_ACCESS_KEY_ID"] == access_key_id {
            return env["AWS_SECRET_ACCESS_KEY"].as_str().unwrap().to_owned();
        }
    }
    let ini = std::fs::read_to_string(dir().join("bedrock-test-credentials.ini")).unwrap();
    let mut lines = ini.lines().map(str::trim);
    while let Some(line) = lines.next() {
        if line.replace(' ', "") == format!("aws_access_key_id={access_key_id}") {
            let next = lines.next().unwrap();
            return next.split_once('=').unwrap().1.trim().to_owned();
        }
    }
    panic!("no secret for {access_key_id}");
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    ring::hmac::sign(&key, data.as_bytes()).as_ref().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SigV4 checked independently of the signer we use: the `Authorization` header parsed, its
/// scope compared with the reference's (key id, region, service `bedrock`), the signed headers
/// required, and the signature recomputed here from the request as received (canonical
/// request with the path encoded once more, string to sign, the HMAC key chain).
fn check_sigv4(name: &str, label: &str, ours: &RecordedRequest, theirs: &Value) {
    let header = ours
        .header("authorization")
        .expect("an Authorization header");
    let fields = |value: &str| -> (String, Vec<String>, String) {
        let rest = value.strip_prefix("AWS4-HMAC-SHA256 ").unwrap();
        let mut credential = String::new();
        let mut signed = Vec::new();
        let mut signature = String::new();
        for part in rest.split(", ") {
            let (key, value) = part.split_once('=').unwrap();
            match key {
                "Credential" => credential = value.to_owned(),
                "SignedHeaders" => signed = value.split(';').map(str::to_owned).collect(),
                "Signature" => signature = value.to_owned(),
                other => panic!("{name}: unexpected Authorization field {other}"),
            }
        }
        (credential, signed, signature)
    };
    let (credential, signed, signature) = fields(header);
    let (their_credential, _, _) = fields(theirs["headers"]["authorization"].as_str().unwrap());
    let scope: Vec<&str> = credential.split('/').collect();
    let their_scope: Vec<&str> = their_credential.split('/').collect();
    assert_eq!(scope.len(), 5, "{name}: credential scope {credential}");
    assert_eq!(
        (scope[0], scope[2], scope[3], scope[4]),
        (
            their_scope[0],
            their_scope[2],
            their_scope[3],
            their_scope[4]
        ),
        "{name} {label}: key id, region, service"
    );
    let amz_date = ours.header("x-amz-date").expect("x-amz-date");
    assert_eq!(&amz_date[..8], scope[1], "{name}: scope date");
    let mut required = vec!["content-type", "host", "x-amz-content-sha256", "x-amz-date"];
    if ours.header("x-amz-security-token").is_some() {
        required.push("x-amz-security-token");
    }
    for header in required {
        assert!(
            signed.iter().any(|h| h == header),
            "{name}: {header} is signed"
        );
    }
    let payload_hash = hex(ring::digest::digest(&ring::digest::SHA256, &ours.body).as_ref());
    assert_eq!(
        ours.header("x-amz-content-sha256"),
        Some(payload_hash.as_str()),
        "{name}: payload hash"
    );
    let (path, query) = ours.path.split_once('?').unwrap_or((&ours.path, ""));
    let canonical_uri: String = path.replace('%', "%25");
    let canonical_headers: String = signed
        .iter()
        .map(|header| format!("{header}:{}\n", ours.header(header).unwrap().trim()))
        .collect();
    let canonical_request = format!(
        "POST\n{canonical_uri}\n{query}\n{canonical_headers}\n{}\n{payload_hash}",
        signed.join(";")
    );
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{}\n{}",
        scope[1..].join("/"),
        hex(ring::digest::digest(&ring::digest::SHA256, canonical_request.as_bytes()).as_ref())
    );
    let secret = aws_secret_for(scope[0]);
    let mut key = hmac(format!("AWS4{secret}").as_bytes(), scope[1]);
    for part in &scope[2..] {
        key = hmac(&key, part);
    }
    assert_eq!(
        hex(&hmac(&key, &string_to_sign)),
        signature,
        "{name} {label}: SigV4 signature"
    );
}

/// The fixture service account's public key (`vertex-test-service-account.pub.pem`, PKCS#1
/// DER inside), a key pair made for these tests only.
fn test_service_account_public_key() -> Vec<u8> {
    use base64::Engine as _;
    let pem = std::fs::read_to_string(dir().join("vertex-test-service-account.pub.pem")).unwrap();
    let body: String = pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap()
}

fn form_fields(body: &str) -> Vec<(String, String)> {
    body.split('&')
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap();
            let decode = |text: &str| {
                let text = text.replace('+', " ");
                let bytes = text.as_bytes();
                let mut out = Vec::new();
                let mut at = 0;
                while at < bytes.len() {
                    if bytes[at] == b'%' {
                        out.push(u8::from_str_radix(&text[at + 1..at + 3], 16).unwrap());
                        at += 3;
                    } else {
                        out.push(bytes[at]);
                        at += 1;
                    }
                }
                String::from_utf8(out).unwrap()
            };
            (decode(key), decode(value))
        })
        .collect()
}

/// A token exchange: a refresh-token form byte for byte; a service account's JWT verified
/// with the test key's public half, its header and claims compared with the reference's
/// (`iat`/`exp` are the clocks' own; `aud` is the key file's `token_uri` here, Google's fixed
/// URL there).
fn compare_token_request(name: &str, label: &str, ours: &RecordedRequest, theirs: &Value) {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    assert_eq!(
        ours.header("content-type"),
        theirs["headers"]["content-type"].as_str(),
        "{name} {label}: token request content type"
    );
    let ours_body = String::from_utf8(ours.body.clone()).unwrap();
    let theirs_body = theirs["body"].as_str().unwrap();
    let ours_form = form_fields(&ours_body);
    let theirs_form = form_fields(theirs_body);
    let names = |form: &[(String, String)]| form.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&ours_form),
        names(&theirs_form),
        "{name}: token form fields"
    );
    let Some((_, assertion)) = ours_form.iter().find(|(key, _)| key == "assertion") else {
        assert_eq!(
            ours_body, theirs_body,
            "{name} {label}: refresh-token exchange"
        );
        return;
    };
    assert_eq!(ours_form[0], theirs_form[0], "{name}: grant type");
    let (_, their_assertion) = theirs_form
        .iter()
        .find(|(key, _)| key == "assertion")
        .unwrap();
    let parts: Vec<&str> = assertion.split('.').collect();
    let their_parts: Vec<&str> = their_assertion.split('.').collect();
    assert_eq!(parts.len(), 3, "{name}: a JWT");
    let public_key = test_service_account_public_key();
    ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        &public_key,
    )
    .verify(
        format!("{}.{}", parts[0], parts[1]).as_bytes(),
        &b64.decode(parts[2]).unwrap(),
    )
    .expect("the JWT is signed with the service account's key");
    assert_eq!(
        b64.decode(parts[0]).unwrap(),
        b64.decode(their_parts[0]).unwrap(),
        "{name}: JWT header"
    );
    let claims =
        |part: &str| -> Value { serde_json::from_slice(&b64.decode(part).unwrap()).unwrap() };
    let mut ours_claims = claims(parts[1]);
    let mut theirs_claims = claims(their_parts[1]);
    for claims in [&mut ours_claims, &mut theirs_claims] {
        let iat = claims["iat"].as_i64().unwrap();
        assert_eq!(claims["exp"].as_i64().unwrap() - iat, 3600, "{name}: exp");
        claims["iat"] = json!(0);
        claims["exp"] = json!(3600);
    }
    assert_eq!(
        ours_claims["aud"].as_str().unwrap(),
        format!("http://{}/token", ours.header("host").unwrap()),
        "{name}: the JWT is for the key file's token_uri"
    );
    theirs_claims["aud"] = ours_claims["aud"].clone();
    assert_eq!(
        to_js_string(&ours_claims),
        to_js_string(&theirs_claims),
        "{name}: JWT claims"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recorded_case_matches_the_reference_whole_and_split_at_random_points() {
    let names = case_names();
    assert!(names.len() >= 25, "cases: {names:?}");
    for name in &names {
        let (_, expected) = expected_for(name);
        for (label, chunking) in [
            ("whole", None),
            ("seed 1", Some((1, 7))),
            ("seed 2", Some((2, 31))),
        ] {
            let outcome = run_case(name, chunking).await;
            compare(name, label, &outcome, &expected);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_classified_as_the_reference_decides() {
    use pi::ai::AiError;
    type Check = fn(&AiError) -> bool;
    let expectations: &[(&str, Check)] = &[
        ("openai-overflow", |e| {
            matches!(e, AiError::ContextOverflow { .. })
        }),
        ("openai-llamacpp-overflow", |e| {
            matches!(e, AiError::ContextOverflow { .. })
        }),
        ("anthropic-overflow", |e| {
            matches!(e, AiError::ContextOverflow { .. })
        }),
        ("anthropic-413", |e| {
            matches!(e, AiError::ContextOverflow { .. })
        }),
        ("anthropic-401", |e| matches!(e, AiError::Auth { .. })),
        ("openai-500-exhausted", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("anthropic-529-exhausted", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("openai-no-body-503", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("openai-dropped", |e| matches!(e, AiError::Transient { .. })),
        ("openai-no-finish", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("anthropic-error-event", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("openai-error-midstream", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("openai-content-filter", |e| {
            matches!(e, AiError::Other { .. })
        }),
        ("anthropic-refusal", |e| matches!(e, AiError::Other { .. })),
        ("responses-overflow", |e| {
            matches!(e, AiError::ContextOverflow { .. })
        }),
        ("responses-failed-overflow", |e| {
            matches!(e, AiError::ContextOverflow { .. })
        }),
        ("responses-500-exhausted", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        // "The server had an error …" matches none of 1.6.0's retry patterns.
        ("responses-error-event", |e| {
            matches!(e, AiError::Other { .. })
        }),
        ("responses-dropped", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("responses-no-terminal", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("google-overflow", |e| {
            matches!(e, AiError::ContextOverflow { .. })
        }),
        ("google-500-exhausted", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("google-503-text", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        // `got status: UNAVAILABLE. {… "The model is overloaded …"}`.
        ("google-error-midstream", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("google-dropped", |e| matches!(e, AiError::Transient { .. })),
        // 1.6.0's retry patterns include "ended without".
        ("google-no-finish", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("google-safety", |e| matches!(e, AiError::Other { .. })),
        ("vertex-overflow", |e| {
            matches!(e, AiError::ContextOverflow { .. })
        }),
        ("vertex-500-exhausted", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("vertex-dropped", |e| matches!(e, AiError::Transient { .. })),
        ("vertex-error-midstream", |e| {
            matches!(e, AiError::RateLimited { .. })
        }),
        ("vertex-token-denied", |e| matches!(e, AiError::Auth { .. })),
        ("bedrock-overflow", |e| {
            matches!(e, AiError::ContextOverflow { .. })
        }),
        ("bedrock-500-exhausted", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("bedrock-dropped", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        // "Throttling error: …" matches none of 1.6.0's retry patterns.
        ("bedrock-exception-midstream", |e| {
            matches!(e, AiError::Other { .. })
        }),
        ("mistral-overflow", |e| {
            matches!(e, AiError::ContextOverflow { .. })
        }),
        ("mistral-429", |e| matches!(e, AiError::RateLimited { .. })),
        ("mistral-500", |e| matches!(e, AiError::Transient { .. })),
        // "Provider stopped with: error (server error)".
        ("mistral-error-finish", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("mistral-dropped", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("mistral-no-finish", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("codex-overflow", |e| {
            matches!(e, AiError::ContextOverflow { .. })
        }),
        ("codex-failed-overflow", |e| {
            matches!(e, AiError::ContextOverflow { .. })
        }),
        ("codex-usage-limit", |e| {
            matches!(e, AiError::RateLimited { .. })
        }),
        ("codex-500-exhausted", |e| {
            matches!(e, AiError::Transient { .. })
        }),
        ("codex-dropped", |e| matches!(e, AiError::Transient { .. })),
        ("codex-bad-token", |e| matches!(e, AiError::Other { .. })),
    ];
    for (name, check) in expectations {
        let spec = read_json(&format!("{name}.case.json"));
        let server = ProviderServer::start(responses_for(&spec, None));
        let model = model_for(&spec, &server);
        let files = tempfile::tempdir().unwrap();
        let env = case_env(&spec, &server.url(), files.path());
        let stream = client().stream(
            &model,
            request_for(&spec),
            options_for(&spec, &model, &env),
            CancellationToken::new(),
        );
        let error = last_error(stream).await;
        assert!(check(&error), "{name}: {error:?}");
    }
}

async fn last_error(mut stream: pi::ai::AssistantStream) -> pi::ai::AiError {
    let mut error = None;
    while let Some(event) = stream.next().await {
        if let StreamEvent::Error { error: e, .. } = event {
            error = Some(e);
        }
    }
    error.expect("an error event")
}

#[test]
fn every_case_has_a_reference_expectation() {
    for name in case_names() {
        assert!(
            dir().join(format!("{name}.expected.json")).exists(),
            "{name}: run scripts/provider-oracle.mjs"
        );
    }
}

/// Writes a `models.json` that points a built-in provider at the scripted server.
fn override_base_url(env: &crate::common::TestEnv, provider: &str, base_url: &str) {
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        json!({"providers": {provider: {"baseUrl": base_url}}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"retry": {"baseDelayMs": 10, "maxRetries": 0}}"#,
    )
    .unwrap();
}

#[test]
fn pi_print_mode_talks_to_mistral_through_a_base_url_override() {
    let env = crate::common::TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(
        String::from_utf8(std::fs::read(dir().join("mistral-text.sse")).unwrap()).unwrap(),
    )]);
    override_base_url(&env, "mistral", &server.url());
    let output = env
        .pi()
        .env("MISTRAL_API_KEY", "mistral-env-key")
        .args([
            "--model",
            "mistral/mistral-small-2506",
            "-nt",
            "-p",
            "What is in src?",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "src holds main.rs and lib.rs — the CLI and the library.\n"
    );
    let sent = server.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path, "/v1/chat/completions");
    assert_eq!(
        sent[0].header("authorization"),
        Some("Bearer mistral-env-key")
    );
    let body = sent[0].json();
    assert_eq!(body["model"], "mistral-small-2506");
    assert_eq!(body["stream"], true);
    assert_eq!(body["messages"][0]["role"], "system");
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last,
        json!({"role": "user", "content": [{"type": "text", "text": "What is in src?"}]})
    );
    // The session id is the cache key and the affinity header.
    let session = body["prompt_cache_key"].as_str().unwrap();
    assert_eq!(sent[0].header("x-affinity"), Some(session));
}

#[test]
fn pi_print_mode_talks_to_codex_with_the_chatgpt_token_of_auth_json() {
    let env = crate::common::TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(
        String::from_utf8(std::fs::read(dir().join("codex-text.sse")).unwrap()).unwrap(),
    )]);
    override_base_url(&env, "openai-codex", &server.url());
    let token = read_json("codex-text.case.json")["options"]["apiKey"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(
        env.agent_dir.join("auth.json"),
        json!({"openai-codex": {"type": "oauth", "access": token, "refresh": "r", "expires": 4_102_444_800_000i64, "accountId": "acc-7f3e2d1c"}}).to_string(),
    )
    .unwrap();
    let output = env
        .pi()
        .args([
            "--model",
            "openai-codex/gpt-5.6-luna",
            "-nt",
            "-p",
            "What is in src?",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "src holds main.rs and lib.rs.\n"
    );
    let sent = server.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path, "/codex/responses");
    assert_eq!(
        sent[0].header("authorization").map(str::to_owned),
        Some(format!("Bearer {token}"))
    );
    assert_eq!(sent[0].header("chatgpt-account-id"), Some("acc-7f3e2d1c"));
    assert_eq!(sent[0].header("originator"), Some("pi"));
    assert_eq!(
        sent[0].header("openai-beta"),
        Some("responses=experimental")
    );
    assert_eq!(sent[0].header("content-encoding"), Some("zstd"));
    let body = sent[0].json();
    assert_eq!(body["model"], "gpt-5.6-luna");
    assert_eq!(body["store"], false);
    assert_eq!(body["input"][0]["role"], "developer");
    // The agent's default thinking level.
    assert_eq!(
        body["reasoning"],
        json!({"effort": "medium", "summary": "auto"})
    );
    let session = body["prompt_cache_key"].as_str().unwrap();
    assert_eq!(sent[0].header("session-id"), Some(session));
}
