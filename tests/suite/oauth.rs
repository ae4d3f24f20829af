//! Sign-in with subscriptions (issue 27): a local OAuth authorization server on 127.0.0.1
//! stands in for Anthropic's, OpenAI's and GitHub's endpoints (`PI_TEST_OAUTH_BASE`) and for
//! the model endpoint: authorization code with PKCE verified, device code, refresh with
//! rotated refresh tokens, revocation, 401s from the model endpoint. The browser is a script
//! (`BROWSER`) that hands the authorization URL to the test, which then plays the user's
//! browser with an HTTP client against the loopback callback.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::common::TestEnv;
use crate::common::provider::{MockResponse, ProviderServer, RecordedRequest, sse};

const ANTHROPIC_CLIENT: &str = "9d1c250a-e61b-44d9-88ed-5944d1962f5e";
const CODEX_CLIENT: &str = "app_EMoamEEZ73f0CkXaXp7hrann";
const COPILOT_CLIENT: &str = "Iv1.b507a08c87ecfe98";
const KIMI_CLIENT: &str = "17e5f671-d194-4dfb-9706-5516cb48c098";
const XAI_CLIENT: &str = "b1a00492-073a-47ea-816f-4c329264a828";
const META_CLIENT: &str = "1031625952748946";
const RADIUS_CLIENT: &str = "pi-gateway";
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
const MODEL: &str = "anthropic/claude-sonnet-4-5";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn s256(verifier: &str) -> String {
    b64(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref())
}

fn query(path: &str) -> HashMap<String, String> {
    reqwest::Url::parse(&format!("http://x{path}"))
        .map(|url| url.query_pairs().into_owned().collect())
        .unwrap_or_default()
}

fn form(body: &[u8]) -> HashMap<String, String> {
    query(&format!("/?{}", String::from_utf8_lossy(body)))
}

/// What the authorization server knows.
#[derive(Default)]
struct State {
    /// code → (client, challenge, redirect_uri)
    codes: HashMap<String, (String, String, String)>,
    /// Refresh tokens that are still valid.
    refresh_valid: HashSet<String>,
    /// Access tokens the model endpoint accepts.
    access_valid: HashSet<String>,
    /// Every token, code and verifier that went over the wire.
    secrets: Vec<String>,
    refreshes: usize,
    counter: usize,
    device_polls: usize,
    /// Delay for refresh answers.
    refresh_delay: Option<Duration>,
    /// Polls per device code (the first is answered `authorization_pending`).
    polls: HashMap<String, usize>,
    /// Meta identity tokens the key mint accepts.
    identities: HashSet<String>,
    /// The OpenRouter and Radius authorization codes: code → (challenge, redirect).
    gateway_codes: HashMap<String, (String, String)>,
    /// Where the Radius gateway's authorization endpoint is.
    base: String,
}

impl State {
    /// A device code and the answer that starts its flow.
    fn device_start(&mut self, prefix: &str, with_complete: bool) -> MockResponse {
        self.counter += 1;
        let device = format!("{prefix}-devcode-{}-secret", self.counter);
        self.secrets.push(device.clone());
        let code = format!("{}-{}", prefix.to_uppercase(), self.counter);
        let mut answer = json!({
            "device_code": device, "user_code": code,
            "verification_uri": format!("https://{prefix}.example/device"),
            "interval": 1, "expires_in": 60,
        });
        if with_complete {
            answer["verification_uri_complete"] =
                json!(format!("https://{prefix}.example/device?user_code={code}"));
        }
        MockResponse::json(200, answer.to_string())
    }

    /// A device-code grant poll: pending once, then the tokens; `None` when not a device
    /// grant.
    fn device_poll(
        &mut self,
        body: &HashMap<String, String>,
        prefix: &str,
    ) -> Option<MockResponse> {
        if body.get("grant_type").map(String::as_str) != Some(DEVICE_GRANT) {
            return None;
        }
        let device = body.get("device_code").cloned().unwrap_or_default();
        if !device.starts_with(&format!("{prefix}-devcode-")) {
            return Some(MockResponse::json(
                400,
                json!({"error": "invalid_grant"}).to_string(),
            ));
        }
        let polls = self.polls.entry(device).or_default();
        *polls += 1;
        if *polls < 2 {
            return Some(MockResponse::json(
                400,
                json!({"error": "authorization_pending"}).to_string(),
            ));
        }
        self.device_polls += 1;
        Some(self.tokens(prefix, true))
    }

    /// A token answer (`expires_in` an hour).
    fn tokens(&mut self, prefix: &str, with_refresh: bool) -> MockResponse {
        let (access, refresh) = self.issue(prefix);
        let mut answer = json!({"access_token": access, "expires_in": 3600, "token_type": "Bearer", "scope": "gateway offline_access"});
        if with_refresh {
            answer["refresh_token"] = json!(refresh);
        }
        MockResponse::json(200, answer.to_string())
    }

    /// A refresh-token grant; `rotate: false` answers without a new refresh token (xAI may).
    fn refresh_grant(
        &mut self,
        body: &HashMap<String, String>,
        prefix: &str,
        rotate: bool,
    ) -> MockResponse {
        let token = body.get("refresh_token").cloned().unwrap_or_default();
        if !self.refresh_valid.contains(&token) {
            return MockResponse::json(400, json!({"error": "invalid_grant"}).to_string());
        }
        if rotate {
            self.refresh_valid.remove(&token);
        }
        self.refreshes += 1;
        self.tokens(prefix, rotate)
    }

    /// An authorization answered with a redirect carrying a code (OpenRouter's, Radius's).
    fn gateway_authorize(
        &mut self,
        redirect: &str,
        challenge: &str,
        state: Option<&str>,
    ) -> MockResponse {
        self.counter += 1;
        let code = format!("gwcode-{}-secret", self.counter);
        self.secrets.push(code.clone());
        self.gateway_codes
            .insert(code.clone(), (challenge.to_owned(), redirect.to_owned()));
        let mut location = reqwest::Url::parse(redirect).unwrap();
        location.query_pairs_mut().append_pair("code", &code);
        if let Some(state) = state {
            location.query_pairs_mut().append_pair("state", state);
        }
        MockResponse::status(302).header("location", location.as_str())
    }

    /// Checks a gateway code against its verifier (and redirect, when one is sent).
    fn gateway_code_ok(&mut self, code: &str, verifier: &str, redirect: Option<&str>) -> bool {
        self.secrets.push(verifier.to_owned());
        match self.gateway_codes.remove(code) {
            Some((challenge, expected)) => {
                s256(verifier) == challenge && redirect.is_none_or(|redirect| redirect == expected)
            }
            None => false,
        }
    }

    fn issue(&mut self, prefix: &str) -> (String, String) {
        self.counter += 1;
        let access = match prefix {
            "codex" => {
                let claims = json!({"https://api.openai.com/auth": {"chatgpt_account_id": format!("acct-{}", self.counter)}});
                format!(
                    "eyJhbGciOiJub25lIn0.{}.sig{}",
                    b64(claims.to_string().as_bytes()),
                    self.counter
                )
            }
            "kimi" | "xai" | "radius" => format!("{prefix}-access{}-secret", self.counter),
            _ => format!("sk-ant-oat01-access{}x", self.counter),
        };
        let refresh = format!("rt-{prefix}-{}-secret", self.counter);
        self.access_valid.insert(access.clone());
        self.refresh_valid.insert(refresh.clone());
        self.secrets.push(access.clone());
        self.secrets.push(refresh.clone());
        (access, refresh)
    }
}

/// The authorization and model server.
struct AuthServer {
    state: Arc<Mutex<State>>,
    server: ProviderServer,
}

fn route(state: &Arc<Mutex<State>>, request: &RecordedRequest) -> MockResponse {
    let mut st = state.lock().unwrap();
    let path = request.path.split('?').next().unwrap_or("").to_owned();
    let bad = |error: &str| MockResponse::json(400, json!({ "error": error }).to_string());
    let form_body = || form(&request.body);
    match (request.method.as_str(), path.as_str()) {
        // Kimi Code
        ("POST", "/api/oauth/device_authorization") => {
            assert_eq!(
                form_body().get("client_id").map(String::as_str),
                Some(KIMI_CLIENT)
            );
            st.device_start("kimi", true)
        }
        ("POST", "/api/oauth/token") => {
            let body = form_body();
            assert_eq!(body.get("client_id").map(String::as_str), Some(KIMI_CLIENT));
            st.device_poll(&body, "kimi")
                .unwrap_or_else(|| st.refresh_grant(&body, "kimi", true))
        }
        // xAI
        ("POST", "/oauth2/device/code") => {
            let body = form_body();
            assert_eq!(body.get("client_id").map(String::as_str), Some(XAI_CLIENT));
            assert!(body["scope"].contains("grok-cli:access"), "{body:?}");
            assert_eq!(body.get("referrer").map(String::as_str), Some("pi"));
            st.device_start("xai", true)
        }
        ("POST", "/oauth2/token") => {
            let body = form_body();
            assert_eq!(body.get("client_id").map(String::as_str), Some(XAI_CLIENT));
            // xAI's refresh does not rotate the refresh token here.
            st.device_poll(&body, "xai")
                .unwrap_or_else(|| st.refresh_grant(&body, "xai", false))
        }
        // Meta: an identity token, exchanged for a Model API key.
        ("POST", "/oidc/device/authorization/") => {
            assert_eq!(
                form_body().get("client_id").map(String::as_str),
                Some(META_CLIENT)
            );
            st.device_start("meta", false)
        }
        ("POST", "/oidc/device/token/") => {
            let body = form_body();
            assert_eq!(body.get("client_id").map(String::as_str), Some(META_CLIENT));
            assert_eq!(
                body.get("grant_type").map(String::as_str),
                Some(DEVICE_GRANT)
            );
            let polls = st.polls.entry(body["device_code"].clone()).or_default();
            *polls += 1;
            if *polls < 2 {
                return MockResponse::json(
                    400,
                    json!({"error": "authorization_pending"}).to_string(),
                );
            }
            st.counter += 1;
            let identity = format!("meta-identity-{}-secret", st.counter);
            st.secrets.push(identity.clone());
            st.identities.insert(identity.clone());
            MockResponse::json(200, json!({"access_token": identity}).to_string())
        }
        ("POST", "/muse-code/key") => {
            assert_eq!(request.header("x-api-version"), Some("1.0.0"));
            let identity = request
                .header("authorization")
                .and_then(|value| value.strip_prefix("Bearer "))
                .unwrap_or("")
                .to_owned();
            if !st.identities.contains(&identity) {
                return MockResponse::json(401, json!({"detail": "session expired"}).to_string());
            }
            st.counter += 1;
            let key = format!("meta-key-{}-secret", st.counter);
            st.secrets.push(key.clone());
            st.refreshes += 1;
            MockResponse::json(200, json!({"api_key": key}).to_string())
        }
        // OpenRouter: PKCE for a permanent key, no state.
        ("GET", "/auth") => {
            let q = query(&request.path);
            assert_eq!(
                q.get("code_challenge_method").map(String::as_str),
                Some("S256")
            );
            assert!(!q.contains_key("state"));
            st.gateway_authorize(&q["callback_url"], &q["code_challenge"], None)
        }
        ("POST", "/api/v1/auth/keys") => {
            let body = request.json();
            assert_eq!(body["code_challenge_method"], "S256");
            let code = body["code"].as_str().unwrap_or_default();
            let verifier = body["code_verifier"].as_str().unwrap_or_default();
            if !st.gateway_code_ok(code, verifier, None) {
                return MockResponse::json(
                    403,
                    json!({"error": {"message": "bad code"}}).to_string(),
                );
            }
            st.counter += 1;
            let key = format!("sk-or-v1-key{}-secret", st.counter);
            st.secrets.push(key.clone());
            MockResponse::json(200, json!({"key": key, "user_id": "u1"}).to_string())
        }
        // Radius: the gateway names its authorization endpoint; code or device grant.
        ("GET", "/v1/oauth") => MockResponse::json(
            200,
            json!({"authorizationEndpoint": format!("{}/radius/authorize", st.base)}).to_string(),
        ),
        ("GET", "/radius/authorize") => {
            let q = query(&request.path);
            assert_eq!(q.get("client_id").map(String::as_str), Some(RADIUS_CLIENT));
            assert_eq!(
                q.get("scope").map(String::as_str),
                Some("gateway offline_access")
            );
            assert_eq!(q.get("handoff").map(String::as_str), Some("url"));
            st.gateway_authorize(&q["redirect_uri"], &q["code_challenge"], Some(&q["state"]))
        }
        ("POST", "/v1/oauth/device") => {
            let body = form_body();
            assert_eq!(
                body.get("client_id").map(String::as_str),
                Some(RADIUS_CLIENT)
            );
            st.device_start("radius", false)
        }
        ("POST", "/v1/oauth/token")
            if request.header("content-type") == Some("application/x-www-form-urlencoded") =>
        {
            let body = form_body();
            assert_eq!(
                body.get("client_id").map(String::as_str),
                Some(RADIUS_CLIENT)
            );
            if let Some(answer) = st.device_poll(&body, "radius") {
                return answer;
            }
            match body.get("grant_type").map(String::as_str) {
                Some("authorization_code") => {
                    let ok = st.gateway_code_ok(
                        &body["code"],
                        body.get("code_verifier").map_or("", String::as_str),
                        body.get("redirect_uri").map(String::as_str),
                    );
                    if ok {
                        st.tokens("radius", true)
                    } else {
                        bad("invalid_grant")
                    }
                }
                _ => st.refresh_grant(&body, "radius", true),
            }
        }
        ("GET", "/oauth/authorize") => {
            let q = query(&request.path);
            let client = q.get("client_id").cloned().unwrap_or_default();
            assert!(
                client == ANTHROPIC_CLIENT || client == CODEX_CLIENT,
                "client {client}"
            );
            assert_eq!(
                q.get("code_challenge_method").map(String::as_str),
                Some("S256")
            );
            assert_eq!(q.get("response_type").map(String::as_str), Some("code"));
            st.counter += 1;
            let code = format!("authcode-{}-secret", st.counter);
            st.secrets.push(code.clone());
            let redirect = q["redirect_uri"].clone();
            st.codes.insert(
                code.clone(),
                (client, q["code_challenge"].clone(), redirect.clone()),
            );
            let mut location = reqwest::Url::parse(&redirect).unwrap();
            location
                .query_pairs_mut()
                .append_pair("code", &code)
                .append_pair("state", &q["state"]);
            MockResponse::status(302).header("location", location.as_str())
        }
        ("POST", "/v1/oauth/token") | ("POST", "/oauth/token") => {
            let anthropic = path == "/v1/oauth/token";
            let body: HashMap<String, String> = if anthropic {
                assert_eq!(request.header("content-type"), Some("application/json"));
                serde_json::from_slice::<HashMap<String, Value>>(&request.body)
                    .unwrap()
                    .into_iter()
                    .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            } else {
                form(&request.body)
            };
            let client = if anthropic {
                ANTHROPIC_CLIENT
            } else {
                CODEX_CLIENT
            };
            assert_eq!(body.get("client_id").map(String::as_str), Some(client));
            let prefix = if anthropic { "ant" } else { "codex" };
            let (access, refresh) = match body.get("grant_type").map(String::as_str) {
                Some("authorization_code") => {
                    let Some((code_client, challenge, redirect)) = st.codes.remove(&body["code"])
                    else {
                        return bad("invalid_grant");
                    };
                    let verifier = body.get("code_verifier").cloned().unwrap_or_default();
                    st.secrets.push(verifier.clone());
                    if code_client != client
                        || s256(&verifier) != challenge
                        || body.get("redirect_uri") != Some(&redirect)
                    {
                        return bad("invalid_grant");
                    }
                    st.issue(prefix)
                }
                Some("refresh_token") => {
                    if !st.refresh_valid.remove(&body["refresh_token"]) {
                        return bad("invalid_grant");
                    }
                    st.refreshes += 1;
                    st.issue(prefix)
                }
                _ => return bad("unsupported_grant_type"),
            };
            let answer = json!({"access_token": access, "refresh_token": refresh, "expires_in": 3600, "token_type": "Bearer"});
            let response = MockResponse::json(200, answer.to_string());
            match st.refresh_delay {
                Some(delay)
                    if body.get("grant_type").map(String::as_str) == Some("refresh_token") =>
                {
                    response.delay_headers(delay)
                }
                _ => response,
            }
        }
        ("POST", "/api/accounts/deviceauth/usercode") => {
            let body: Value = serde_json::from_slice(&request.body).unwrap();
            assert_eq!(body["client_id"], CODEX_CLIENT);
            MockResponse::json(
                200,
                json!({"device_auth_id": "devauth-1", "user_code": "CODX-4321", "interval": "1"})
                    .to_string(),
            )
        }
        ("POST", "/api/accounts/deviceauth/token") => {
            let body: Value = serde_json::from_slice(&request.body).unwrap();
            assert_eq!(body["device_auth_id"], "devauth-1");
            st.device_polls += 1;
            if st.device_polls < 2 {
                return MockResponse::json(403, "{}");
            }
            let verifier = "device-verifier-secret".to_owned();
            let code = "device-code-secret".to_owned();
            st.secrets.push(verifier.clone());
            st.secrets.push(code.clone());
            st.codes.insert(
                code.clone(),
                (
                    CODEX_CLIENT.into(),
                    s256(&verifier),
                    "https://auth.openai.com/deviceauth/callback".into(),
                ),
            );
            MockResponse::json(
                200,
                json!({"authorization_code": code, "code_verifier": verifier}).to_string(),
            )
        }
        ("POST", "/login/device/code") => {
            let body = form(&request.body);
            assert_eq!(
                body.get("client_id").map(String::as_str),
                Some(COPILOT_CLIENT)
            );
            assert_eq!(body.get("scope").map(String::as_str), Some("read:user"));
            st.secrets.push("devcode-secret-1".into());
            MockResponse::json(
                200,
                json!({"device_code": "devcode-secret-1", "user_code": "WXYZ-1234", "verification_uri": "https://github.com/login/device", "interval": 1, "expires_in": 60}).to_string(),
            )
        }
        ("POST", "/login/oauth/access_token") => {
            let body = form(&request.body);
            assert_eq!(
                body.get("device_code").map(String::as_str),
                Some("devcode-secret-1")
            );
            st.device_polls += 1;
            if st.device_polls < 2 {
                return MockResponse::json(
                    200,
                    json!({"error": "authorization_pending"}).to_string(),
                );
            }
            st.secrets.push("gho_github-token-secret".into());
            MockResponse::json(
                200,
                json!({"access_token": "gho_github-token-secret", "token_type": "bearer"})
                    .to_string(),
            )
        }
        ("GET", "/copilot_internal/v2/token") => {
            assert_eq!(
                request.header("authorization"),
                Some("Bearer gho_github-token-secret")
            );
            assert_eq!(
                request.header("copilot-integration-id"),
                Some("vscode-chat")
            );
            st.counter += 1;
            let token = format!(
                "tid=copilot-secret-{};exp=1;proxy-ep=proxy.individual.githubcopilot.com",
                st.counter
            );
            let secret = format!("copilot-secret-{}", st.counter);
            st.secrets.push(secret);
            st.access_valid.insert(token.clone());
            MockResponse::json(
                200,
                json!({"token": token, "expires_at": 1_767_229_200}).to_string(),
            )
        }
        ("GET", "/models") => MockResponse::json(
            200,
            json!({"data": [
                {"id": "gpt-4.1", "model_picker_enabled": true, "policy": {"state": "enabled"}},
                {"id": "hidden", "model_picker_enabled": false}
            ]})
            .to_string(),
        ),
        ("POST", "/v1/messages") => {
            let bearer = request
                .header("authorization")
                .and_then(|value| value.strip_prefix("Bearer "))
                .unwrap_or("");
            if st.access_valid.contains(bearer) {
                MockResponse::sse(sse::anthropic_text("pong"))
            } else {
                MockResponse::json(
                    401,
                    json!({"type": "error", "error": {"type": "authentication_error", "message": "OAuth token has expired"}}).to_string(),
                )
            }
        }
        _ => MockResponse::json(404, "{}"),
    }
}

impl AuthServer {
    fn start() -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let routed = state.clone();
        let server = ProviderServer::start_routed(Arc::new(move |request: &RecordedRequest| {
            route(&routed, request)
        }));
        state.lock().unwrap().base = server.url();
        Self { state, server }
    }

    fn url(&self) -> String {
        self.server.url()
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }

    fn requests(&self, path: &str) -> Vec<RecordedRequest> {
        self.server
            .requests()
            .into_iter()
            .filter(|request| request.path.split('?').next() == Some(path))
            .collect()
    }
}

/// A test environment pointed at the server: models.json sends Anthropic's calls there, the
/// OAuth endpoints are the server's, and the "browser" writes the URL it is given to a file.
struct Setup {
    env: TestEnv,
    server: AuthServer,
    url_file: PathBuf,
    browser: PathBuf,
}

impl Setup {
    fn new() -> Self {
        let env = TestEnv::new();
        let server = AuthServer::start();
        std::fs::create_dir_all(&env.agent_dir).unwrap();
        std::fs::write(
            env.agent_dir.join("models.json"),
            json!({"providers": {"anthropic": {"baseUrl": server.url()}}}).to_string(),
        )
        .unwrap();
        let url_file = env.dir.path().join("browser-url.txt");
        let browser = env.dir.path().join("browser.sh");
        std::fs::write(
            &browser,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$1\" > '{}.tmp' && mv '{0}.tmp' '{0}'\n",
                url_file.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self {
            env,
            server,
            url_file,
            browser,
        }
    }

    fn pi(&self) -> std::process::Command {
        let mut cmd = self.env.pi_process();
        cmd.env("PI_TEST_OAUTH_BASE", self.server.url())
            .env("BROWSER", &self.browser)
            .env("PI_OFFLINE", "1");
        cmd
    }

    fn auth_path(&self) -> PathBuf {
        self.env.agent_dir.join("auth.json")
    }

    fn auth(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.auth_path()).unwrap()).unwrap()
    }

    fn write_auth(&self, value: &Value) {
        std::fs::write(
            self.auth_path(),
            serde_json::to_string_pretty(value).unwrap(),
        )
        .unwrap();
    }

    /// Waits for the browser script to be handed the authorization URL.
    fn browser_url(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(text) = std::fs::read_to_string(&self.url_file)
                && !text.trim().is_empty()
            {
                let _ = std::fs::remove_file(&self.url_file);
                return text.trim().to_owned();
            }
            assert!(Instant::now() < deadline, "no authorization URL was opened");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A prompt answered by the model endpoint (`pong`), as `pi -p` runs it.
    fn turn(&self) -> std::process::Output {
        self.pi()
            .args(["-p", "ping", "--model", MODEL])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Expired and valid Anthropic sign-ins to start from.
    fn signed_in(&self, access: &str, refresh: &str, expires_in_ms: i64) {
        self.server.with(|st| {
            st.refresh_valid.insert(refresh.to_owned());
            st.secrets.push(access.to_owned());
            st.secrets.push(refresh.to_owned());
        });
        self.write_auth(&json!({"anthropic": {
            "type": "oauth", "refresh": refresh, "access": access,
            "expires": crate::common::TEST_CLOCK_START_MS + expires_in_ms
        }}));
    }

    /// Asserts that no token, code or verifier is in the agent dir (but auth.json), the
    /// sessions' exports or `outputs`.
    fn assert_no_secrets(&self, outputs: &[&str]) {
        let secrets = self.server.with(|st| st.secrets.clone());
        assert!(!secrets.is_empty());
        let mut texts: Vec<(String, Vec<u8>)> = outputs
            .iter()
            .map(|text| ("output".to_owned(), text.as_bytes().to_vec()))
            .collect();
        fn walk(dir: &Path, texts: &mut Vec<(String, Vec<u8>)>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, texts);
                } else if path.file_name().is_some_and(|name| name != "auth.json") {
                    texts.push((
                        path.display().to_string(),
                        std::fs::read(&path).unwrap_or_default(),
                    ));
                }
            }
        }
        walk(&self.env.agent_dir, &mut texts);
        for format in ["--jsonl", "--html"] {
            let out = self.pi().args(["export", format]).output().unwrap();
            texts.push((format!("export {format}"), out.stdout));
            texts.push((format!("export {format} stderr"), out.stderr));
        }
        for (name, bytes) in &texts {
            let text = String::from_utf8_lossy(bytes);
            for secret in &secrets {
                assert!(
                    !text.contains(secret.as_str()),
                    "{name} holds a secret ({} chars, starting {:?})",
                    secret.len(),
                    &secret[..secret.len().min(6)]
                );
            }
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Plays the user's browser: opens the authorization URL, follows the redirect to pi's
/// loopback callback; returns the callback's status.
fn browse(url: &str) -> u16 {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        reqwest::Client::new()
            .get(url)
            .send()
            .await
            .expect("the browser reaches the callback")
            .status()
            .as_u16()
    })
}

/// The redirect the authorization server answers with (for a pasted URL).
fn redirect_of(url: &str) -> String {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let response = client.get(url).send().await.unwrap();
        response.headers()["location"].to_str().unwrap().to_owned()
    })
}

fn spawn_login(setup: &Setup, provider: &str) -> Child {
    setup
        .pi()
        .args(["auth", "login", provider])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(child: Child) -> (bool, String, String) {
    let out = child.wait_with_output().unwrap();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_browser_login_stores_1_6_0_s_credential_and_a_turn_sends_it_as_claude_code() {
    let setup = Setup::new();
    let child = spawn_login(&setup, "anthropic");
    let url = setup.browser_url();
    let params = query(&url[url.find("/oauth").unwrap()..]);
    assert_eq!(params["client_id"], ANTHROPIC_CLIENT);
    assert_eq!(params["code"], "true");
    assert!(params["scope"].contains("user:inference"), "{params:?}");
    assert!(
        params["redirect_uri"].starts_with("http://localhost:"),
        "{params:?}"
    );
    assert!(params["redirect_uri"].ends_with("/callback"));
    assert_eq!(browse(&url), 200);
    let (ok, stdout, stderr) = finish(child);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("Signed in to Anthropic"), "{stdout}");
    let auth = setup.auth();
    let entry = auth["anthropic"].as_object().unwrap();
    assert_eq!(
        entry.keys().collect::<Vec<_>>(),
        ["type", "refresh", "access", "expires"],
        "1.6.0's key order"
    );
    assert_eq!(entry["type"], "oauth");
    // expires_in 3600 s, stored five minutes early (the test clock steps 1 ms per read).
    let expires = entry["expires"].as_i64().unwrap() - crate::common::TEST_CLOCK_START_MS;
    assert!((3_300_000..3_310_000).contains(&expires), "{expires}");
    assert_eq!(mode_of(&setup.auth_path()), 0o600);

    let out = setup.turn();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "pong");
    let calls = setup.server.requests("/v1/messages");
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(
        call.header("authorization").unwrap(),
        format!("Bearer {}", entry["access"].as_str().unwrap())
    );
    assert!(call.header("x-api-key").is_none());
    assert!(
        call.header("anthropic-beta")
            .unwrap()
            .contains("oauth-2025-04-20")
    );
    assert_eq!(
        call.json()["system"][0]["text"],
        "You are Claude Code, Anthropic's official CLI for Claude."
    );

    let status = setup.pi().args(["auth", "status"]).output().unwrap();
    assert!(
        text(&status.stdout).contains("anthropic: signed in (OAuth)"),
        "{}",
        text(&status.stdout)
    );
    let logout = setup
        .pi()
        .args(["auth", "logout", "anthropic"])
        .output()
        .unwrap();
    assert!(logout.status.success());
    assert!(setup.auth().get("anthropic").is_none());
    setup.assert_no_secrets(&[&stdout, &stderr, &text(&out.stdout), &text(&out.stderr)]);
}

#[test]
fn a_pasted_redirect_url_signs_in_without_the_callback_and_a_foreign_one_is_refused() {
    let setup = Setup::new();
    // Another sign-in's redirect: refused with the state mismatch.
    let mut child = spawn_login(&setup, "anthropic");
    let url = setup.browser_url();
    let foreign = redirect_of(&url).replace("state=", "state=other");
    writeln!(child.stdin.as_mut().unwrap(), "{foreign}").unwrap();
    let (ok, _, stderr) = finish(child);
    assert!(!ok);
    assert!(stderr.contains("OAuth state mismatch"), "{stderr}");

    let mut child = spawn_login(&setup, "anthropic");
    let url = setup.browser_url();
    let location = redirect_of(&url);
    writeln!(child.stdin.as_mut().unwrap(), "{location}").unwrap();
    let (ok, stdout, stderr) = finish(child);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("Signed in"), "{stdout}");
    assert_eq!(setup.auth()["anthropic"]["type"], "oauth");
    setup.assert_no_secrets(&[&stdout, &stderr]);
}

#[test]
fn codex_signs_in_with_its_account_id_and_copilot_with_a_device_code() {
    let setup = Setup::new();
    let child = spawn_login(&setup, "openai-codex");
    let url = setup.browser_url();
    let params = query(&url[url.find("/oauth").unwrap()..]);
    assert_eq!(params["client_id"], CODEX_CLIENT);
    assert_eq!(params["originator"], "pi");
    assert!(params["redirect_uri"].ends_with("/auth/callback"));
    assert_eq!(browse(&url), 200);
    let (ok, _, stderr) = finish(child);
    assert!(ok, "{stderr}");
    let codex = setup.auth()["openai-codex"].clone();
    assert_eq!(
        codex.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["type", "access", "refresh", "expires", "accountId"]
    );
    assert!(codex["accountId"].as_str().unwrap().starts_with("acct-"));

    let mut child = spawn_login(&setup, "github-copilot");
    writeln!(child.stdin.as_mut().unwrap()).unwrap(); // github.com
    let (ok, stdout, stderr) = finish(child);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("WXYZ-1234"), "{stderr}");
    let copilot = setup.auth()["github-copilot"].clone();
    assert_eq!(copilot["refresh"], "gho_github-token-secret");
    assert!(copilot["access"].as_str().unwrap().contains("proxy-ep="));
    assert_eq!(copilot["expires"], 1_767_229_200_000i64 - 300_000);
    assert_eq!(copilot["availableModelIds"], json!(["gpt-4.1"]));
    assert_eq!(
        setup.server.with(|st| st.device_polls),
        2,
        "one pending poll, then the token"
    );
    // The other provider's entry is kept.
    assert_eq!(setup.auth()["openai-codex"], codex);
    setup.assert_no_secrets(&[&stdout, &stderr]);
}

/// Reads the child's stderr up to the first line holding `needle`.
fn stderr_line(child: &mut Child, needle: &str) -> String {
    use std::io::BufRead as _;
    let stderr = child.stderr.take().unwrap();
    let mut reader = std::io::BufReader::new(stderr);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "no line with {needle}"
        );
        if line.contains(needle) {
            // Keep draining so that pi never blocks on a full pipe.
            std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
            return line.trim().to_owned();
        }
    }
}

#[test]
fn the_headless_methods_are_anthropic_s_code_page_and_codex_s_device_code() {
    let setup = Setup::new();
    let mut child = setup
        .pi()
        .args(["auth", "login", "anthropic", "--no-browser"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = stderr_line(&mut child, "/oauth/authorize");
    let params = query(&url[url.find("/oauth").unwrap()..]);
    assert_eq!(
        params["redirect_uri"],
        "https://platform.claude.com/oauth/code/callback"
    );
    let shown = query(&redirect_of(&url).replace("https://platform.claude.com", ""));
    writeln!(
        child.stdin.as_mut().unwrap(),
        "{}#{}",
        shown["code"],
        shown["state"]
    )
    .unwrap();
    let (ok, stdout, _) = finish(child);
    assert!(ok, "{stdout}");
    assert_eq!(setup.auth()["anthropic"]["type"], "oauth");

    let mut child = setup
        .pi()
        .args(["auth", "login", "openai-codex", "--no-browser"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let line = stderr_line(&mut child, "CODX-4321");
    assert!(
        line.contains("https://auth.openai.com/codex/device"),
        "{line}"
    );
    let (ok, stdout, _) = finish(child);
    assert!(ok, "{stdout}");
    assert!(setup.auth()["openai-codex"]["accountId"].is_string());
    assert!(!setup.url_file.exists(), "no browser was opened");
    setup.assert_no_secrets(&[&stdout]);
}

#[test]
fn a_token_about_to_expire_is_refreshed_before_the_request() {
    let setup = Setup::new();
    setup.signed_in("sk-ant-oat01-old-secret", "rt-old-secret", 60_000);
    let out = setup.turn();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "pong");
    assert_eq!(setup.server.with(|st| st.refreshes), 1);
    let auth = setup.auth();
    let access = auth["anthropic"]["access"].as_str().unwrap().to_owned();
    assert_ne!(access, "sk-ant-oat01-old-secret");
    assert_ne!(
        auth["anthropic"]["refresh"], "rt-old-secret",
        "the rotated refresh token is kept"
    );
    let calls = setup.server.requests("/v1/messages");
    assert_eq!(calls.len(), 1, "nothing was sent with the old token");
    assert_eq!(
        calls[0].header("authorization").unwrap(),
        format!("Bearer {access}")
    );
    setup.assert_no_secrets(&[&text(&out.stdout), &text(&out.stderr)]);
}

#[test]
fn a_401_during_a_turn_refreshes_once_and_the_turn_goes_on() {
    let setup = Setup::new();
    // Valid for an hour by its expiry, but the server no longer takes it.
    setup.signed_in("sk-ant-oat01-revoked-secret", "rt-live-secret", 3_600_000);
    let out = setup.turn();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "pong");
    assert_eq!(setup.server.with(|st| st.refreshes), 1);
    let calls = setup.server.requests("/v1/messages");
    assert_eq!(
        calls.len(),
        2,
        "the refused call, then the same call with the new token"
    );
    assert_eq!(calls[0].json()["messages"], calls[1].json()["messages"]);
    setup.assert_no_secrets(&[&text(&out.stdout), &text(&out.stderr)]);
    // A second refusal after the refresh is not retried again: the turn fails once.
    setup.server.with(|st| st.access_valid.clear());
    let out = setup.turn();
    assert!(!out.status.success());
    assert_eq!(setup.server.with(|st| st.refreshes), 2);
    assert_eq!(setup.server.requests("/v1/messages").len(), 4);
}

#[test]
fn two_processes_refreshing_at_once_send_one_refresh() {
    let setup = Setup::new();
    setup.signed_in("sk-ant-oat01-expired-secret", "rt-once-secret", -1_000);
    setup
        .server
        .with(|st| st.refresh_delay = Some(Duration::from_millis(700)));
    let spawn = |seed: &str| {
        setup
            .pi()
            .env("PI_TEST_SEED", seed)
            // Each its own database: only auth.json is shared.
            .arg("--db")
            .arg(setup.env.dir.path().join(format!("pi-{seed}.db")))
            .args(["-p", "ping", "--model", MODEL])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (spawn("21"), spawn("22"));
    for child in [first, second] {
        let (ok, stdout, stderr) = finish(child);
        assert!(ok, "{stderr}");
        assert_eq!(stdout.trim(), "pong");
    }
    assert_eq!(
        setup.server.with(|st| st.refreshes),
        1,
        "one refresh for both"
    );
    assert_eq!(setup.server.requests("/v1/oauth/token").len(), 1);
    assert!(
        !setup.env.agent_dir.join("auth.json.lock").exists(),
        "the lock is released"
    );
}

#[test]
fn a_revoked_sign_in_says_what_to_run() {
    let setup = Setup::new();
    setup.signed_in("sk-ant-oat01-gone-secret", "rt-gone-secret", -1_000);
    setup.server.with(|st| st.refresh_valid.clear());
    let out = setup.turn();
    assert!(!out.status.success());
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        all.contains("Run `pi auth login anthropic` or /login anthropic"),
        "{all}"
    );
    assert!(all.contains("invalid_grant"), "{all}");
    assert!(setup.server.requests("/v1/messages").is_empty());
    setup.assert_no_secrets(&[&all]);
}

/// 1.6.0's own code (its `AuthStorage` under `proper-lockfile` and its Anthropic refresh, with
/// `fetch` sent to the test server) refreshes what pi saved, and pi uses what it wrote.
#[test]
fn the_reference_refreshes_what_pi_saved_and_pi_uses_what_it_wrote() {
    let setup = Setup::new();
    let child = spawn_login(&setup, "anthropic");
    let url = setup.browser_url();
    assert_eq!(browse(&url), 200);
    let (ok, _, stderr) = finish(child);
    assert!(ok, "{stderr}");
    let saved = setup.auth()["anthropic"].clone();

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop16/oauth16.mjs");
    let out = std::process::Command::new(crate::suite::interop16::node22())
        .arg(&script)
        .arg(setup.auth_path())
        .env("OAUTH_BASE", setup.server.url())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let reported: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        reported["before"]["refresh"], saved["refresh"],
        "1.6.0 read pi's credential"
    );
    let written = setup.auth()["anthropic"].clone();
    assert_ne!(written["access"], saved["access"]);
    assert_eq!(setup.server.with(|st| st.refreshes), 1);

    // pi uses the token 1.6.0 wrote (the real clock: 1.6.0 wrote a real expiry).
    let out = setup
        .pi()
        .env_remove("PI_TEST_CLOCK")
        .args(["-p", "ping", "--model", MODEL])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let calls = setup.server.requests("/v1/messages");
    assert_eq!(
        calls.last().unwrap().header("authorization").unwrap(),
        format!("Bearer {}", written["access"].as_str().unwrap())
    );
    assert_eq!(
        setup.server.with(|st| st.refreshes),
        1,
        "pi did not refresh again"
    );
}

#[test]
fn the_repl_logs_in_and_out() {
    use crate::common::tmux::Tmux;
    let setup = Setup::new();
    let base = setup.server.url();
    let browser = setup.browser.display().to_string();
    let tmux = Tmux::start(
        &setup.env,
        "login",
        &["--model", MODEL],
        &[
            ("PI_TEST_OAUTH_BASE", &base),
            ("BROWSER", &browser),
            ("PI_OFFLINE", "1"),
        ],
    );
    tmux.wait_for_prompt();
    tmux.line("/login anthropic");
    let url = setup.browser_url();
    assert_eq!(browse(&url), 200);
    tmux.wait_for("press Enter");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Signed in to Anthropic");
    tmux.line("ping");
    tmux.wait_for("pong");
    assert_eq!(setup.auth()["anthropic"]["type"], "oauth");
    // An API key is typed without being shown, and stays out of the history.
    tmux.line("/login openai");
    tmux.wait_for("Enter the API key for openai");
    tmux.line("sk-typed-key-secret");
    tmux.wait_for("Saved the API key for openai");
    assert!(!tmux.screen().contains("sk-typed-key-secret"));
    assert_eq!(
        setup.auth()["openai"],
        json!({"type": "api_key", "key": "sk-typed-key-secret"})
    );
    setup
        .server
        .with(|st| st.secrets.push("sk-typed-key-secret".into()));
    tmux.line("/logout anthropic");
    tmux.wait_for("Removed the stored credential of anthropic");
    assert!(setup.auth().get("anthropic").is_none());
    let screen = tmux.screen();
    tmux.line("/quit");
    setup.assert_no_secrets(&[&screen]);
}

/// The entry's keys in the order they are stored.
fn keys_of(entry: &Value) -> Vec<String> {
    entry.as_object().unwrap().keys().cloned().collect()
}

#[test]
fn kimi_xai_and_meta_sign_in_with_device_codes() {
    let setup = Setup::new();
    let mut outputs = Vec::new();
    for (provider, shown) in [
        ("kimi-coding", "https://kimi.example/device?user_code=KIMI-"),
        ("xai", "https://xai.example/device?user_code=XAI-"),
        ("meta", "https://meta.example/device"),
    ] {
        let child = spawn_login(&setup, provider);
        let (ok, stdout, stderr) = finish(child);
        assert!(ok, "{provider}: {stderr}");
        assert!(stderr.contains(shown), "{provider}: {stderr}");
        assert!(stdout.contains("Signed in to"), "{stdout}");
        outputs.push(stdout);
        outputs.push(stderr);
    }
    let auth = setup.auth();
    let start = crate::common::TEST_CLOCK_START_MS;
    let kimi = &auth["kimi-coding"];
    assert_eq!(keys_of(kimi), ["type", "access", "refresh", "expires"]);
    assert!(kimi["access"].as_str().unwrap().starts_with("kimi-access"));
    let lifetime = kimi["expires"].as_i64().unwrap() - start;
    assert!((3_600_000..3_610_000).contains(&lifetime), "{lifetime}");
    let xai = &auth["xai"];
    assert_eq!(keys_of(xai), ["type", "access", "refresh", "expires"]);
    let lifetime = xai["expires"].as_i64().unwrap() - start;
    assert!(
        (3_300_000..3_310_000).contains(&lifetime),
        "five minutes early: {lifetime}"
    );
    let meta = &auth["meta"];
    assert_eq!(keys_of(meta), ["type", "refresh", "access", "expires"]);
    assert!(
        meta["refresh"]
            .as_str()
            .unwrap()
            .starts_with("meta-identity-")
    );
    assert!(
        meta["access"].as_str().unwrap().starts_with("meta-key-"),
        "the minted key"
    );
    let lifetime = meta["expires"].as_i64().unwrap() - start;
    assert!((86_400_000..86_410_000).contains(&lifetime), "{lifetime}");
    assert_eq!(setup.server.with(|st| st.polls.len()), 3);
    assert!(
        setup
            .server
            .with(|st| st.polls.values().all(|polls| *polls == 2))
    );
    let outputs: Vec<&str> = outputs.iter().map(String::as_str).collect();
    setup.assert_no_secrets(&outputs);
}

#[test]
fn openrouter_signs_in_for_a_permanent_key_and_radius_by_browser_or_device() {
    let setup = Setup::new();
    let child = spawn_login(&setup, "openrouter");
    let url = setup.browser_url();
    let params = query(&url[url.find("/auth?").unwrap()..]);
    let callback = &params["callback_url"];
    assert!(callback.starts_with("http://127.0.0.1:"), "{callback}");
    assert!(
        callback.contains("/oauth/callback/"),
        "a random path: {callback}"
    );
    // A stray request on another path does not end the sign-in.
    let stray = callback.rsplit_once('/').unwrap().0.to_owned() + "/other?code=x";
    assert_eq!(browse(&stray), 404);
    assert_eq!(browse(&url), 200);
    let (ok, stdout, stderr) = finish(child);
    assert!(ok, "{stderr}");
    let openrouter = setup.auth()["openrouter"].clone();
    assert_eq!(
        keys_of(&openrouter),
        ["type", "access", "refresh", "expires"]
    );
    assert!(
        openrouter["access"]
            .as_str()
            .unwrap()
            .starts_with("sk-or-v1-key")
    );
    assert_eq!(openrouter["refresh"], "");
    assert_eq!(openrouter["expires"], 9_007_199_254_740_991i64);

    // A server named "radius" that is not the gateway's: the new one is "radius-mcp".
    std::fs::write(
        setup.env.agent_dir.join("mcp.json"),
        r#"{"theme": "kept", "mcpServers": {"radius": {"command": "radius-local"}}}"#,
    )
    .unwrap();
    let mut child = spawn_login(&setup, "radius");
    writeln!(child.stdin.as_mut().unwrap()).unwrap(); // the browser (the default)
    let url = setup.browser_url();
    assert!(
        url.contains("/radius/authorize?"),
        "the gateway's endpoint: {url}"
    );
    let params = query(&url[url.find("/radius").unwrap()..]);
    assert!(params["redirect_uri"].starts_with("http://127.0.0.1:"));
    assert!(params["redirect_uri"].ends_with("/oauth/callback"));
    assert_eq!(browse(&url), 200);
    let (ok, stdout2, stderr2) = finish(child);
    assert!(ok, "{stderr2}");
    let radius = setup.auth()["radius"].clone();
    assert_eq!(
        keys_of(&radius),
        ["type", "access", "refresh", "expires", "scope"]
    );
    // The Radius MCP server is added to the global mcp.json (its other content kept), once.
    assert!(
        stdout2.contains("Added MCP server \"radius-mcp\""),
        "{stdout2}"
    );
    let mcp: Value = serde_json::from_str(
        &std::fs::read_to_string(setup.env.agent_dir.join("mcp.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(mcp["theme"], "kept");
    assert_eq!(mcp["mcpServers"]["radius"]["command"], "radius-local");
    assert_eq!(
        mcp["mcpServers"]["radius-mcp"],
        json!({"url": "https://radius.pi.dev/mcp", "auth": {"provider": "radius"}})
    );
    let lifetime = radius["expires"].as_i64().unwrap() - crate::common::TEST_CLOCK_START_MS;
    assert!(
        (3_540_000..3_550_000).contains(&lifetime),
        "a minute early: {lifetime}"
    );

    let child = setup
        .pi()
        .args(["auth", "login", "radius", "--no-browser"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (ok, stdout3, stderr3) = finish(child);
    assert!(ok, "{stderr3}");
    assert!(stderr3.contains("RADIUS-"), "{stderr3}");
    assert!(
        !stdout3.contains("MCP server"),
        "already uses the login: {stdout3}"
    );
    assert_ne!(setup.auth()["radius"]["access"], radius["access"]);
    assert_eq!(
        setup.auth()["openrouter"],
        openrouter,
        "the other entry is kept"
    );
    setup.assert_no_secrets(&[&stdout, &stderr, &stdout2, &stderr2, &stdout3, &stderr3]);
}

/// The 1.6.0 CLI bundle, run with the Node 22 of `tests/interop16` on the same agent dir.
fn reference16(setup: &Setup) -> std::process::Command {
    let interop16 = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop16");
    let mut command = std::process::Command::new(crate::suite::interop16::node22());
    command
        .arg(interop16.join("node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &setup.env.home)
        .env("PI_CODING_AGENT_DIR", &setup.env.agent_dir)
        .env("PI_TELEMETRY", "0")
        .env("PI_OFFLINE", "1")
        .env("PI_SKIP_VERSION_CHECK", "1")
        .current_dir(&setup.env.workspace);
    command
}

/// `pi auth check|print-api-key|print-bearer-token` print and exit as 1.6.0 does on the same
/// auth.json (no refresh is due: 1.6.0 would reach the real endpoints).
#[test]
fn auth_check_and_the_print_commands_answer_as_1_6_0_does() {
    let setup = Setup::new();
    setup.write_auth(&json!({
        "anthropic": {"type": "oauth", "refresh": "r1", "access": "a1", "expires": 4_102_444_800_000i64},
        "openai": {"type": "api_key", "key": "sk-k1"},
        "xai": {"type": "oauth", "refresh": "r2", "access": "a2", "expires": 1000},
    }));
    let cases: &[&[&str]] = &[
        &[
            "check",
            "--provider",
            "anthropic",
            "--json",
            "--credentials",
        ],
        &["check", "--provider", "anthropic"],
        &["check", "--provider", "openai", "--json"],
        &["check", "--provider", "openai", "--credentials"],
        &["check", "--provider", "mistral", "--json"],
        &["check", "--provider", "nope", "--json"],
        &[
            "check",
            "--provider",
            "xai",
            "--json",
            "--no-refresh",
            "--credentials",
        ],
        &["check", "--provider", "xai", "--no-refresh"],
        &["check"],
        &["check", "--provider", "openai", "--bogus"],
        &["check", "--provider", "openai", "extra"],
        &["check", "--provider", "openai", "--min-expiry", "1h"],
        &["print-api-key", "--provider", "anthropic"],
        &["print-api-key", "--provider", "openai"],
        &["print-api-key", "--provider", "openai", "--json"],
        &["print-api-key", "--provider", "nope"],
        &["print-api-key"],
        &["print-bearer-token", "--provider", "openai"],
        &["print-bearer-token", "--provider", "anthropic"],
        &[
            "print-bearer-token",
            "--provider",
            "anthropic",
            "--min-expiry",
            "30m",
        ],
        &[
            "print-bearer-token",
            "--provider",
            "anthropic",
            "--min-expiry",
            "soon",
        ],
        &["print-api-key", "--model", "gpt-4o"],
    ];
    for case in cases {
        let ours = setup
            .pi()
            .env_remove("PI_TEST_CLOCK")
            .arg("auth")
            .args(*case)
            .output()
            .unwrap();
        let theirs = reference16(&setup)
            .arg("auth")
            .args(*case)
            .output()
            .unwrap();
        assert_eq!(
            (ours.status.code(), text(&ours.stdout)),
            (theirs.status.code(), text(&theirs.stdout)),
            "pi auth {case:?}: {}",
            text(&ours.stderr)
        );
        assert_eq!(
            text(&ours.stderr).trim(),
            text(&theirs.stderr).trim(),
            "pi auth {case:?}"
        );
    }
    assert!(
        setup.server.requests("/oauth2/token").is_empty(),
        "nothing refreshed"
    );
}

#[test]
fn print_bearer_token_refreshes_what_expires_too_soon_and_check_says_invalid_when_it_cannot() {
    let setup = Setup::new();
    let start = crate::common::TEST_CLOCK_START_MS;
    setup.server.with(|st| {
        st.refresh_valid.insert("rt-xai-live-secret".into());
        st.secrets
            .extend(["xai-old-secret".into(), "rt-xai-live-secret".into()]);
    });
    setup.write_auth(&json!({
        "xai": {"type": "oauth", "access": "xai-old-secret", "refresh": "rt-xai-live-secret", "expires": start + 20 * 60_000},
        "openai": {"type": "api_key", "key": "sk-typed-secret"},
    }));
    setup
        .server
        .with(|st| st.secrets.push("sk-typed-secret".into()));
    let auth = |args: &[&str]| setup.pi().arg("auth").args(args).output().unwrap();
    // Twenty minutes left: enough for a request, not for the default --min-expiry of 30m.
    let out = auth(&["check", "--provider", "xai", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout).trim(),
        r#"{"status":"ready","provider":"xai","authType":"oauth"}"#
    );
    assert_eq!(setup.server.with(|st| st.refreshes), 0);
    let out = auth(&[
        "print-bearer-token",
        "--provider",
        "xai",
        "--min-expiry",
        "10m",
    ]);
    assert_eq!(text(&out.stdout).trim(), "xai-old-secret");
    assert_eq!(setup.server.with(|st| st.refreshes), 0);
    let out = auth(&["print-bearer-token", "--provider", "xai"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout).trim().to_owned();
    assert!(printed.starts_with("xai-access"), "{printed}");
    assert_eq!(setup.server.with(|st| st.refreshes), 1);
    let stored = setup.auth()["xai"].clone();
    assert_eq!(stored["access"], printed.as_str());
    assert_eq!(
        stored["refresh"], "rt-xai-live-secret",
        "xAI did not rotate it"
    );
    // Fresh for 55 minutes: two hours cannot be had, even after a refresh.
    let out = auth(&[
        "print-bearer-token",
        "--provider",
        "xai",
        "--min-expiry",
        "2h",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).is_empty());
    assert!(
        text(&out.stderr).contains("OAuth refresh returned a token that expires too soon for xai"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(setup.server.with(|st| st.refreshes), 2);
    // A revoked sign-in: the refresh is refused, the check is invalid (2); without a refresh
    // it is ready, with the stored token.
    setup.server.with(|st| st.refresh_valid.clear());
    let mut expired = setup.auth();
    expired["xai"]["expires"] = json!(start - 1000);
    setup.write_auth(&expired);
    let out = auth(&["check", "--provider", "xai"]);
    assert_eq!(
        (out.status.code(), text(&out.stdout).trim()),
        (Some(2), "invalid")
    );
    let out = auth(&["check", "--provider", "xai", "--no-refresh", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(setup.server.with(|st| st.refreshes), 2);
    let out = auth(&["print-bearer-token", "--provider", "xai"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("pi auth login xai"),
        "{}",
        text(&out.stderr)
    );
    // --model finds the provider of the model.
    let out = auth(&["check", "--model", "openai/gpt-4o", "--json"]);
    assert_eq!(
        text(&out.stdout).trim(),
        r#"{"status":"ready","provider":"openai","authType":"api_key"}"#
    );
    let out = auth(&["print-api-key", "--model", "gpt-4o"]);
    assert_eq!(text(&out.stdout).trim(), "sk-typed-secret");
    // Nothing but the printed credentials carries a secret.
    setup.assert_no_secrets(&[&text(&out.stderr)]);
}

/// A manual compaction whose summary request is refused (the token was revoked meanwhile)
/// refreshes the sign-in once and sends the same request again (RPC mode's `compact`).
#[test]
fn a_401_on_a_compaction_summary_refreshes_once_and_the_compaction_completes() {
    use std::io::BufRead as _;
    let setup = Setup::new();
    setup.signed_in("sk-ant-oat01-first-secret", "rt-compact-secret", 3_600_000);
    setup.server.with(|st| {
        st.access_valid.insert("sk-ant-oat01-first-secret".into());
    });
    std::fs::write(
        setup.env.agent_dir.join("settings.json"),
        r#"{"compaction":{"reserveTokens":200,"keepRecentTokens":20}}"#,
    )
    .unwrap();
    let mut child = setup
        .pi()
        .args(["--mode", "rpc", "--model", MODEL])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (sender, records) = std::sync::mpsc::channel::<Value>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(value) = serde_json::from_str(&line)
                && sender.send(value).is_err()
            {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let mut wait_for = |wanted: &dyn Fn(&Value) -> bool| loop {
        let record = records
            .recv_timeout(Duration::from_secs(60))
            .expect("a record within 60 s");
        lines.push(record.to_string());
        if wanted(&record) {
            return record;
        }
    };
    for (id, question) in [
        ("p1", "first question about apples"),
        ("p2", &"pears ".repeat(30)),
    ] {
        let command = json!({"id": id, "type": "prompt", "message": question});
        writeln!(stdin, "{command}").unwrap();
        wait_for(&|record| record["type"] == "agent_end");
    }
    assert_eq!(setup.server.requests("/v1/messages").len(), 2);
    // The sign-in is revoked at the provider; the refresh token still works.
    setup.server.with(|st| st.access_valid.clear());
    writeln!(stdin, "{}", json!({"id": "c1", "type": "compact"})).unwrap();
    let response = wait_for(&|record| record["type"] == "response" && record["id"] == "c1");
    assert_eq!(response["success"], true, "{response}");
    assert_eq!(response["data"]["summary"], "pong");
    assert_eq!(setup.server.with(|st| st.refreshes), 1);
    let calls = setup.server.requests("/v1/messages");
    assert_eq!(
        calls.len(),
        4,
        "the refused summary request, then the same one again"
    );
    assert_eq!(calls[2].json()["messages"], calls[3].json()["messages"]);
    assert_ne!(
        calls[2].header("authorization"),
        calls[3].header("authorization")
    );
    drop(stdin);
    let _ = child.wait();
    let joined = lines.join("\n");
    setup.assert_no_secrets(&[&joined]);
}

/// A branch summary (`/tree`, leaving a branch with a summary) whose request is refused (the
/// token was revoked meanwhile) refreshes the sign-in once and sends the same request again;
/// the navigation completes with the summary.
#[test]
fn a_401_on_a_branch_summary_refreshes_once_and_the_navigation_completes() {
    use crate::common::tmux::{Tmux, row_number};
    let setup = Setup::new();
    setup.signed_in("sk-ant-oat01-branch-secret", "rt-branch-secret", 3_600_000);
    setup.server.with(|st| {
        st.access_valid.insert("sk-ant-oat01-branch-secret".into());
    });
    let base = setup.server.url();
    let tmux = Tmux::start(
        &setup.env,
        "branch-401",
        &["--model", MODEL],
        &[("PI_TEST_OAUTH_BASE", &base), ("PI_OFFLINE", "1")],
    );
    tmux.wait_for_prompt();
    tmux.line("first question");
    tmux.wait_for_count("pong", 1);
    tmux.wait_for_prompt();
    tmux.line("second question");
    tmux.wait_for_count("pong", 2);
    tmux.wait_for_prompt();
    assert_eq!(setup.server.requests("/v1/messages").len(), 2);
    // The sign-in is revoked at the provider; the refresh token still works.
    setup.server.with(|st| st.access_valid.clear());
    tmux.line("/tree");
    let screen = tmux.wait_for("Go to entry");
    tmux.line(&row_number(&screen, "user: second question").to_string());
    tmux.wait_for("Summarize the branch you leave?");
    tmux.line("s");
    tmux.wait_for("Navigated to selected point");
    tmux.keys(&["C-c"]);
    tmux.wait_for_prompt();
    assert_eq!(setup.server.with(|st| st.refreshes), 1);
    let calls = setup.server.requests("/v1/messages");
    assert_eq!(
        calls.len(),
        4,
        "the refused summary request, then the same one again"
    );
    assert_eq!(calls[2].json()["messages"], calls[3].json()["messages"]);
    assert_ne!(
        calls[2].header("authorization"),
        calls[3].header("authorization")
    );
    tmux.line("/tree");
    let screen = tmux.wait_for_count("Go to entry", 2);
    assert!(
        screen
            .lines()
            .any(|line| line.contains("[branch summary]: ")
                && line.contains("pong")
                && line.trim_end().ends_with("← current")),
        "the summary is the new leaf:\n{screen}"
    );
    tmux.keys(&["Enter"]);
    tmux.wait_for_prompt();
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_for_exit(), 0);
    setup.assert_no_secrets(&[&tmux.screen()]);
}
