//! The cloud protocols' credentials end to end: Vertex AI through the real `pi` binary with
//! gcloud's application-default credentials file in the home directory, access tokens cached
//! by one client across calls until shortly before they expire, and Bedrock through the binary
//! with a named profile from `~/.aws/credentials` and `~/.aws/config`. The token endpoint and
//! the model endpoint are one local server (the key files' `token_uri` points at it).

use pi::ai::{CancellationToken, Request, StreamOptions};
use serde_json::{Value, json};

use crate::common::provider::{MockResponse, ProviderServer};
use crate::common::{TestEnv, succeeded};

fn client() -> pi::ai::AiClient {
    pi::ai::AiClient::new(
        std::sync::Arc::new(pi::support::clock::SteppingClock::new(
            crate::common::TEST_CLOCK_START_MS,
            1,
        )),
        std::sync::Arc::new(pi::support::ids::IdSource::seeded(5)),
    )
    .unwrap()
}

fn fast_transport() -> pi::ai::TransportConfig {
    pi::ai::TransportConfig {
        initial_retry_delay: std::time::Duration::from_millis(10),
        request_timeout: std::time::Duration::from_secs(20),
        idle_timeout: std::time::Duration::from_secs(20),
        ..Default::default()
    }
}

fn fixture(name: &str) -> String {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("providers")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

fn token_response(token: &str, expires_in: u64) -> MockResponse {
    let body = json!({"access_token": token, "expires_in": expires_in, "token_type": "Bearer"});
    MockResponse::json(200, body.to_string())
}

fn vertex_text() -> MockResponse {
    MockResponse::sse(fixture("vertex-text.sse"))
}

#[test]
fn print_mode_reaches_vertex_with_gcloud_application_default_credentials() {
    let server = ProviderServer::start(vec![
        token_response("ya29.e2e-user-token", 3599),
        vertex_text(),
    ]);
    let env = TestEnv::new();
    let gcloud = env.home.join(".config").join("gcloud");
    std::fs::create_dir_all(&gcloud).unwrap();
    std::fs::write(
        gcloud.join("application_default_credentials.json"),
        fixture("vertex-test-authorized-user.json").replace("{server}", &server.url()),
    )
    .unwrap();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        json!({"providers": {"google-vertex": {"baseUrl": server.url()}}}).to_string(),
    )
    .unwrap();
    let output = succeeded(
        env.pi()
            .args([
                "--offline",
                "--no-session",
                "--model",
                "google-vertex/gemini-2.5-flash",
                "-p",
                "What is in src?",
            ])
            .env("GOOGLE_CLOUD_PROJECT", "pi-test-project")
            .env("GOOGLE_CLOUD_LOCATION", "us-central1"),
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "The `src` folder holds `main.rs` and `lib.rs`."
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0].path, "/token");
    assert_eq!(
        String::from_utf8_lossy(&requests[0].body),
        "refresh_token=1%2F%2F0test-refresh-token&client_id=764086051850-test.apps.googleusercontent.com&client_secret=d-FL95Q19q7MQmFpd7hHD0Ty-test&grant_type=refresh_token"
    );
    assert_eq!(
        requests[1].path,
        "/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        requests[1].header("authorization"),
        Some("Bearer ya29.e2e-user-token")
    );
    assert_eq!(
        requests[1].header("x-goog-user-project"),
        Some("pi-quota-project")
    );
    assert_eq!(requests[1].header("x-goog-api-key"), None);
    let body = requests[1].json();
    assert_eq!(body["contents"][0]["parts"][0]["text"], "What is in src?");
}

/// Options for a Vertex call authorised by the test service account.
fn service_account_options(server: &ProviderServer) -> StreamOptions {
    let mut options = StreamOptions::new(pi::ai::auth::RequestAuth::default());
    options.base_url = Some(server.url());
    options.transport = fast_transport();
    options.provider_env = vec![
        ("GOOGLE_CLOUD_PROJECT".into(), "pi-test-project".into()),
        ("GOOGLE_CLOUD_LOCATION".into(), "us-central1".into()),
    ];
    options.cloud = pi::ai::CloudCredentials::GoogleKeyFile {
        path: "service-account.json".into(),
        text: Some(fixture("vertex-test-service-account.json").replace("{server}", &server.url())),
    };
    options
}

async fn call(client: &pi::ai::AiClient, server: &ProviderServer) -> Value {
    let model = pi::ai::models::builtin_models()
        .iter()
        .find(|model| model.provider == "google-vertex" && model.id == "gemini-2.5-flash")
        .unwrap()
        .clone();
    let request = Request {
        system_prompt: "You are a coding agent.".into(),
        messages: vec![],
        tools: vec![],
    };
    let stream = client.stream(
        &model,
        request,
        service_account_options(server),
        CancellationToken::new(),
    );
    let message = stream.result().await;
    json!({"stopReason": format!("{:?}", message.stop_reason), "error": message.error_message})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_token_is_reused_until_five_minutes_before_it_expires() {
    // An hour-long token serves both calls.
    let server = ProviderServer::start(vec![
        token_response("ya29.long", 3599),
        vertex_text(),
        vertex_text(),
    ]);
    let client = client();
    for _ in 0..2 {
        assert_eq!(call(&client, &server).await["stopReason"], "Stop");
    }
    let paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths.iter().filter(|path| *path == "/token").count(), 1);
    for request in &server.requests()[1..] {
        assert_eq!(request.header("authorization"), Some("Bearer ya29.long"));
    }

    // A token with four minutes left is fetched again for every call.
    let server = ProviderServer::start(vec![
        token_response("ya29.short-1", 240),
        vertex_text(),
        token_response("ya29.short-2", 240),
        vertex_text(),
    ]);
    let client = self::client();
    for _ in 0..2 {
        assert_eq!(call(&client, &server).await["stopReason"], "Stop");
    }
    let requests = server.requests();
    let paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths[0], "/token");
    assert_eq!(paths[2], "/token");
    assert_eq!(
        requests[3].header("authorization"),
        Some("Bearer ya29.short-2")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vertex_call_without_a_readable_key_file_says_how_to_set_credentials_up() {
    let server = ProviderServer::start(vec![]);
    let mut options = service_account_options(&server);
    options.cloud = pi::ai::CloudCredentials::GoogleKeyFile {
        path: "/nowhere/application_default_credentials.json".into(),
        text: None,
    };
    let model = pi::ai::models::builtin_models()
        .iter()
        .find(|model| model.provider == "google-vertex")
        .unwrap()
        .clone();
    let message = client()
        .stream(
            &model,
            Request::default(),
            options,
            CancellationToken::new(),
        )
        .result()
        .await;
    assert_eq!(
        message.error_message.as_deref(),
        Some(pi::ai::google_auth::NO_CREDENTIALS)
    );
    assert!(server.requests().is_empty());
}

#[test]
fn print_mode_reaches_bedrock_with_a_profile_from_the_shared_aws_files() {
    let mut stream = MockResponse::sse("");
    stream.body = std::fs::read(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/providers/bedrock-text.eventstream"),
    )
    .unwrap();
    stream = stream.header("content-type", "application/vnd.amazon.eventstream");
    let server = ProviderServer::start(vec![stream]);
    let env = TestEnv::new();
    let aws = env.home.join(".aws");
    std::fs::create_dir_all(&aws).unwrap();
    std::fs::write(
        aws.join("credentials"),
        fixture("bedrock-test-credentials.ini"),
    )
    .unwrap();
    std::fs::write(aws.join("config"), fixture("bedrock-test-config.ini")).unwrap();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        json!({"providers": {"amazon-bedrock": {"baseUrl": server.url()}}}).to_string(),
    )
    .unwrap();
    let output = succeeded(
        env.pi()
            .args([
                "--offline",
                "--no-session",
                "--model",
                "amazon-bedrock/anthropic.claude-haiku-4-5-20251001-v1:0",
                "-p",
                "What is in src?",
            ])
            .env("AWS_PROFILE", "pi-dev"),
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "The `src` folder holds `main.rs` and `lib.rs`."
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(
        requests[0].path,
        "/model/anthropic.claude-haiku-4-5-20251001-v1%3A0/converse-stream"
    );
    let authorization = requests[0].header("authorization").unwrap();
    // The profile's key, the profile's region (config file), Bedrock's signing name.
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7PIDEV00/20260101/eu-west-1/bedrock/aws4_request, SignedHeaders="),
        "{authorization}"
    );
    assert_eq!(requests[0].header("x-amz-date"), Some("20260101T000000Z"));
    assert_eq!(requests[0].header("x-amz-security-token"), None);
    assert_eq!(
        requests[0].json()["messages"][0]["content"][0]["text"],
        "What is in src?"
    );
}

#[test]
fn print_mode_reaches_bedrock_with_an_sso_profile_through_the_cached_login() {
    let mut stream = MockResponse::sse("");
    stream.body = std::fs::read(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/providers/bedrock-text.eventstream"),
    )
    .unwrap();
    stream = stream.header("content-type", "application/vnd.amazon.eventstream");
    let role = json!({"roleCredentials": {
        "accessKeyId": "ASIAIOSFODNN7SSOROLE",
        "secretAccessKey": "sso/role/secret/EXAMPLEKEY",
        "sessionToken": "IQoJb3JpZ2luX2VjEXAMPLESSO",
        "expiration": 1_767_229_200_000_i64,
    }});
    let server = ProviderServer::start(vec![MockResponse::json(200, role.to_string()), stream]);
    let env = TestEnv::new();
    let aws = env.home.join(".aws");
    std::fs::create_dir_all(aws.join("sso").join("cache")).unwrap();
    std::fs::write(
        aws.join("config"),
        "[profile corp-dev]\nsso_session = corp\nsso_account_id = 111122223333\nsso_role_name = Developer\nregion = us-west-2\n\n[sso-session corp]\nsso_start_url = https://corp.awsapps.com/start\nsso_region = us-east-1\n",
    )
    .unwrap();
    // `aws sso login` names the cache file after the SHA-1 of the session name.
    std::fs::write(
        aws.join("sso/cache/ee0bfd2552fbd840c02cc48b6e823320543c450f.json"),
        r#"{"startUrl":"https://corp.awsapps.com/start","region":"us-east-1","accessToken":"aoa-sso-access-token","expiresAt":"2026-01-01T08:00:00Z"}"#,
    )
    .unwrap();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        json!({"providers": {"amazon-bedrock": {"baseUrl": server.url()}}}).to_string(),
    )
    .unwrap();
    let output = succeeded(
        env.pi()
            .args([
                "--offline",
                "--no-session",
                "--model",
                "amazon-bedrock/anthropic.claude-haiku-4-5-20251001-v1:0",
                "-p",
                "What is in src?",
            ])
            .env("AWS_PROFILE", "corp-dev")
            .env("AWS_ENDPOINT_URL_SSO", server.url()),
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "The `src` folder holds `main.rs` and `lib.rs`."
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0].method, "GET");
    assert_eq!(
        requests[0].path,
        "/federation/credentials?account_id=111122223333&role_name=Developer"
    );
    assert_eq!(
        requests[0].header("x-amz-sso_bearer_token"),
        Some("aoa-sso-access-token")
    );
    let authorization = requests[1].header("authorization").unwrap();
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=ASIAIOSFODNN7SSOROLE/20260101/us-west-2/bedrock/aws4_request, "),
        "{authorization}"
    );
    assert_eq!(
        requests[1].header("x-amz-security-token"),
        Some("IQoJb3JpZ2luX2VjEXAMPLESSO")
    );
}

#[test]
fn an_expired_sso_login_says_to_log_in_again() {
    let server = ProviderServer::start(vec![]);
    let env = TestEnv::new();
    let aws = env.home.join(".aws");
    std::fs::create_dir_all(aws.join("sso").join("cache")).unwrap();
    std::fs::write(
        aws.join("config"),
        "[default]\nregion = us-east-1\nsso_start_url = https://corp.awsapps.com/start\nsso_region = us-east-1\nsso_account_id = 1\nsso_role_name = R\n",
    )
    .unwrap();
    // No cache file for the start URL's SHA-1: `aws sso login` was never run (or expired).
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        json!({"providers": {"amazon-bedrock": {"baseUrl": server.url()}}}).to_string(),
    )
    .unwrap();
    let output = env
        .pi()
        .args([
            "--offline",
            "--no-session",
            "--model",
            "amazon-bedrock/anthropic.claude-haiku-4-5-20251001-v1:0",
            "-p",
            "hi",
        ])
        .env("AWS_PROFILE", "default")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(pi::ai::aws_auth::SSO_EXPIRED), "{stderr}");
    assert!(server.requests().is_empty());
}

/// Bedrock's recorded text stream.
fn bedrock_stream() -> MockResponse {
    let mut stream = MockResponse::sse("");
    stream.body = std::fs::read(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/providers/bedrock-text.eventstream"),
    )
    .unwrap();
    stream.header("content-type", "application/vnd.amazon.eventstream")
}

/// Runs `pi -p` against Bedrock at `server` with `vars` set; returns its stdout.
fn bedrock_print(env: &TestEnv, server: &ProviderServer, vars: &[(&str, String)]) -> String {
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        json!({"providers": {"amazon-bedrock": {"baseUrl": server.url()}}}).to_string(),
    )
    .unwrap();
    let mut command = env.pi();
    command.args([
        "--offline",
        "--no-session",
        "--model",
        "amazon-bedrock/anthropic.claude-haiku-4-5-20251001-v1:0",
        "-p",
        "What is in src?",
    ]);
    for (name, value) in vars {
        command.env(name, value);
    }
    let output = succeeded(&mut command);
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

const ANSWER: &str = "The `src` folder holds `main.rs` and `lib.rs`.";

/// Web identity (IRSA): the token file is exchanged at STS (`AWS_ENDPOINT_URL_STS`) with an
/// unsigned `AssumeRoleWithWebIdentity` form, and the call is signed with the role's keys.
#[test]
fn print_mode_reaches_bedrock_with_a_web_identity_token_through_sts() {
    let sts = r#"<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <AccessKeyId>ASIAIOSFODNN7WEBIDNT</AccessKeyId>
      <SecretAccessKey>web/identity/secret/EXAMPLEKEY</SecretAccessKey>
      <SessionToken>IQoJb3JpZ2luX2VjWEBIDENTITY</SessionToken>
      <Expiration>2026-01-01T08:00:00Z</Expiration>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>"#;
    let server = ProviderServer::start(vec![
        MockResponse::json(200, sts).header("content-type", "text/xml"),
        bedrock_stream(),
    ]);
    let env = TestEnv::new();
    let token_file = env.dir.path().join("web-identity-token");
    std::fs::write(&token_file, "eyJ.web+identity/token=\n").unwrap();
    let stdout = bedrock_print(
        &env,
        &server,
        &[
            (
                "AWS_WEB_IDENTITY_TOKEN_FILE",
                token_file.display().to_string(),
            ),
            (
                "AWS_ROLE_ARN",
                "arn:aws:iam::111122223333:role/pi-bedrock".to_owned(),
            ),
            ("AWS_ROLE_SESSION_NAME", "pi-session".to_owned()),
            ("AWS_ENDPOINT_URL_STS", server.url()),
        ],
    );
    assert_eq!(stdout, ANSWER);
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(
        (requests[0].method.as_str(), requests[0].path.as_str()),
        ("POST", "/")
    );
    assert_eq!(
        String::from_utf8_lossy(&requests[0].body),
        "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A111122223333%3Arole%2Fpi-bedrock&RoleSessionName=pi-session&WebIdentityToken=eyJ.web%2Bidentity%2Ftoken%3D"
    );
    assert_eq!(
        requests[0].header("authorization"),
        None,
        "STS is called unsigned"
    );
    let authorization = requests[1].header("authorization").unwrap();
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=ASIAIOSFODNN7WEBIDNT/20260101/us-east-1/bedrock/aws4_request, "),
        "{authorization}"
    );
    assert_eq!(
        requests[1].header("x-amz-security-token"),
        Some("IQoJb3JpZ2luX2VjWEBIDENTITY")
    );
}

/// Container credentials (ECS/EKS Pod Identity): `GET` of the full URI with the token file's
/// text as `Authorization`; a refusal fails the call as an authentication error that names
/// the endpoint's status.
#[test]
fn print_mode_reaches_bedrock_with_container_credentials() {
    let creds = json!({
        "AccessKeyId": "ASIAIOSFODNN7CONTAIN",
        "SecretAccessKey": "container/secret/EXAMPLEKEY",
        "Token": "IQoJb3JpZ2luX2VjCONTAINER",
        "Expiration": "2026-01-01T06:00:00Z",
    });
    let server = ProviderServer::start(vec![
        MockResponse::json(200, creds.to_string()),
        bedrock_stream(),
    ]);
    let env = TestEnv::new();
    let token_file = env.dir.path().join("pod-identity-token");
    std::fs::write(&token_file, "pod-identity-token-value\n").unwrap();
    let stdout = bedrock_print(
        &env,
        &server,
        &[
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                format!("{}/v1/credentials", server.url()),
            ),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                token_file.display().to_string(),
            ),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                "the-file-wins".to_owned(),
            ),
        ],
    );
    assert_eq!(stdout, ANSWER);
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(
        (requests[0].method.as_str(), requests[0].path.as_str()),
        ("GET", "/v1/credentials")
    );
    assert_eq!(
        requests[0].header("authorization"),
        Some("pod-identity-token-value")
    );
    let authorization = requests[1].header("authorization").unwrap();
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=ASIAIOSFODNN7CONTAIN/20260101/us-east-1/bedrock/aws4_request, "),
        "{authorization}"
    );
    assert_eq!(
        requests[1].header("x-amz-security-token"),
        Some("IQoJb3JpZ2luX2VjCONTAINER")
    );

    // The endpoint refusing: no model call, the status named.
    let refusing = ProviderServer::start(vec![MockResponse::json(403, "{}")]);
    let output = env
        .pi()
        .args([
            "--offline",
            "--no-session",
            "--model",
            "amazon-bedrock/anthropic.claude-haiku-4-5-20251001-v1:0",
            "-p",
            "hi",
        ])
        .env(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            format!("{}/v1/credentials", refusing.url()),
        )
        .output()
        .unwrap();
    assert_ne!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Container credentials request failed (403)"),
        "{stderr}"
    );
    assert_eq!(refusing.requests().len(), 1);
}

/// A profile's `credential_process`: the command's JSON gives the keys; expired ones are
/// refused before anything is sent.
#[test]
fn print_mode_reaches_bedrock_with_a_credential_process_profile() {
    let server = ProviderServer::start(vec![bedrock_stream()]);
    let env = TestEnv::new();
    let aws = env.home.join(".aws");
    std::fs::create_dir_all(&aws).unwrap();
    let script = env.dir.path().join("creds.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf '%s' \"{\\\"Version\\\": 1, \\\"AccessKeyId\\\": \\\"ASIAIOSFODNN7PROCESS\\\", \\\"SecretAccessKey\\\": \\\"process/secret\\\", \\\"SessionToken\\\": \\\"IQoJPROCESS\\\", \\\"Expiration\\\": \\\"$1\\\"}\"\n",
    )
    .unwrap();
    std::fs::write(
        aws.join("config"),
        format!(
            "[profile tool]\nregion = eu-central-1\ncredential_process = sh {} 2026-01-01T05:00:00Z\n\n[profile stale]\nregion = eu-central-1\ncredential_process = sh {} 2025-12-31T23:00:00Z\n",
            script.display(),
            script.display()
        ),
    )
    .unwrap();
    let stdout = bedrock_print(&env, &server, &[("AWS_PROFILE", "tool".to_owned())]);
    assert_eq!(stdout, ANSWER);
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let authorization = requests[0].header("authorization").unwrap();
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=ASIAIOSFODNN7PROCESS/20260101/eu-central-1/bedrock/aws4_request, "),
        "{authorization}"
    );
    assert_eq!(
        requests[0].header("x-amz-security-token"),
        Some("IQoJPROCESS")
    );

    let output = env
        .pi()
        .args([
            "--offline",
            "--no-session",
            "--model",
            "amazon-bedrock/anthropic.claude-haiku-4-5-20251001-v1:0",
            "-p",
            "hi",
        ])
        .env("AWS_PROFILE", "stale")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("credential_process returned expired credentials."),
        "{stderr}"
    );
    assert_eq!(server.requests().len(), 1, "nothing more was sent");
}
