//! Subscription sign-in (OAuth) for the providers 1.6.0 signs in to with an account, as its
//! pi-ai does it (`auth/oauth/anthropic.js`, `openai-codex.js`, `github-copilot.js`):
//! client ids, scopes, endpoints, the token requests and the credential each one stores in
//! `auth.json` (`{"type": "oauth", "refresh", "access", "expires", …}`, key order as 1.6.0
//! writes it).
//!
//! - [`pkce`]: the PKCE verifier and S256 challenge, random state.
//! - [`callback`]: the loopback server a browser is redirected to.
//! - this file: the providers ([`OAuthProvider`]), the endpoints ([`Endpoints`], with the
//!   test-only override), the requests (authorization URL, code exchange, refresh, GitHub's
//!   device flow and Copilot's token exchange) and [`refresh`].
//!
//! Invariants: no token, code or verifier is ever part of an error message or a log line
//! (errors name the endpoint's host and path, the HTTP status and the server's `error` code);
//! this layer reads no environment variable and no file — `cli` passes the override in and
//! keeps `auth.json`.

pub mod callback;
pub mod device;
pub mod pkce;

use std::time::Duration;

use serde_json::{Map, Value, json};

/// Anthropic's OAuth client (Claude Pro/Max), 1.6.0's `CLIENT_ID`.
pub const ANTHROPIC_CLIENT_ID: &str = "9d1c250a-e61b-44d9-88ed-5944d1962f5e";
/// The scopes 1.6.0 asks Anthropic for.
pub const ANTHROPIC_SCOPES: &str = "org:create_api_key user:profile user:inference user:sessions:claude_code user:mcp_servers user:file_upload";
const ANTHROPIC_AUTHORIZE_URL: &str = "https://claude.ai/oauth/authorize";
const ANTHROPIC_TOKEN_URL: &str = "https://platform.claude.com/v1/oauth/token";
/// The loopback port 1.6.0 prefers for Anthropic (any free one is accepted).
pub const ANTHROPIC_CALLBACK_PORT: u16 = 53692;
/// The redirect of Anthropic's copy-the-code (headless) login.
pub const ANTHROPIC_COPY_CODE_REDIRECT_URI: &str =
    "https://platform.claude.com/oauth/code/callback";

const OPENROUTER_AUTHORIZE_URL: &str = "https://openrouter.ai/auth";
const OPENROUTER_KEYS_URL: &str = "https://openrouter.ai/api/v1/auth/keys";
/// JavaScript's `Number.MAX_SAFE_INTEGER`, the expiry 1.6.0 stores for OpenRouter's key.
pub const OPENROUTER_NEVER_EXPIRES: i64 = 9_007_199_254_740_991;
/// The loopback port and path of a Radius browser sign-in.
pub const RADIUS_CALLBACK_PORT: u16 = 1456;

/// OpenAI's Codex CLI client (ChatGPT Plus/Pro).
pub const CODEX_CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";
const CODEX_AUTHORIZE_URL: &str = "https://auth.openai.com/oauth/authorize";
const CODEX_TOKEN_URL: &str = "https://auth.openai.com/oauth/token";
/// The only loopback port OpenAI accepts (shared with the Codex CLI).
pub const CODEX_CALLBACK_PORT: u16 = 1455;
const CODEX_SCOPE: &str = "openid profile email offline_access";
const CODEX_DEVICE_USER_CODE_URL: &str = "https://auth.openai.com/api/accounts/deviceauth/usercode";
const CODEX_DEVICE_TOKEN_URL: &str = "https://auth.openai.com/api/accounts/deviceauth/token";
/// The page a Codex device code is entered at.
pub const CODEX_DEVICE_VERIFICATION_URI: &str = "https://auth.openai.com/codex/device";
const CODEX_DEVICE_REDIRECT_URI: &str = "https://auth.openai.com/deviceauth/callback";
const CODEX_DEVICE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
const CODEX_JWT_CLAIM: &str = "https://api.openai.com/auth";

/// GitHub Copilot's OAuth app (the VS Code Copilot Chat client).
pub const COPILOT_CLIENT_ID: &str = "Iv1.b507a08c87ecfe98";
/// The headers 1.6.0 sends to GitHub's Copilot endpoints.
pub const COPILOT_HEADERS: &[(&str, &str)] = &[
    ("User-Agent", "GitHubCopilotChat/0.35.0"),
    ("Editor-Version", "vscode/1.107.0"),
    ("Editor-Plugin-Version", "copilot-chat/0.35.0"),
    ("Copilot-Integration-Id", "vscode-chat"),
];
const COPILOT_API_VERSION: &str = "2026-06-01";
const COPILOT_DEFAULT_BASE_URL: &str = "https://api.individual.githubcopilot.com";

/// Five minutes: 1.6.0 stores `expires` that much before the server's expiry and refreshes
/// a token with less than that left.
pub const EXPIRY_MARGIN_MS: i64 = 5 * 60 * 1000;
/// How long one token request may take (1.6.0: 30 s per request, 15 s per refresh).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// A provider pi can sign in to with an account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OAuthProvider {
    /// Claude Pro/Max: browser authorization code with PKCE, loopback or pasted code.
    Anthropic,
    /// ChatGPT Plus/Pro through the Codex backend: browser authorization code with PKCE.
    OpenAiCodex,
    /// GitHub Copilot: device code, then Copilot's own token.
    GithubCopilot,
    /// Kimi Code: device code.
    KimiCoding,
    /// OpenRouter: browser authorization code with PKCE for a permanent API key.
    OpenRouter,
    /// xAI (SuperGrok, X Premium): device code.
    Xai,
    /// Meta (Muse): device code, then a minted Model API key.
    Meta,
    /// Radius gateway: browser authorization code with PKCE or device code.
    Radius,
}

impl OAuthProvider {
    /// Every OAuth provider, in the order `/login` lists them.
    pub const ALL: [OAuthProvider; 8] = [
        OAuthProvider::Anthropic,
        OAuthProvider::OpenAiCodex,
        OAuthProvider::GithubCopilot,
        OAuthProvider::KimiCoding,
        OAuthProvider::OpenRouter,
        OAuthProvider::Xai,
        OAuthProvider::Meta,
        OAuthProvider::Radius,
    ];

    /// Returns the provider for its `auth.json` key.
    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|provider| provider.id() == id)
    }

    /// The `auth.json` key (the provider id).
    pub fn id(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenAiCodex => "openai-codex",
            Self::GithubCopilot => "github-copilot",
            Self::KimiCoding => "kimi-coding",
            Self::OpenRouter => "openrouter",
            Self::Xai => "xai",
            Self::Meta => "meta",
            Self::Radius => "radius",
        }
    }

    /// The name 1.6.0 shows.
    pub fn name(self) -> &'static str {
        match self {
            Self::Anthropic => "Anthropic (Claude Pro/Max)",
            Self::OpenAiCodex => "OpenAI (ChatGPT Plus/Pro)",
            Self::GithubCopilot => "GitHub Copilot",
            Self::KimiCoding => "Kimi Code (subscription)",
            Self::OpenRouter => "OpenRouter OAuth",
            Self::Xai => "xAI (Grok/X subscription)",
            Self::Meta => "Meta (Muse subscription)",
            Self::Radius => "Radius",
        }
    }
}

/// Why a sign-in or refresh failed. The texts never hold a token, code or verifier.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OAuthError {
    /// The request did not get an answer (connection, timeout).
    #[error("{what} failed: {endpoint} could not be reached ({reason})")]
    Unreachable {
        /// What was being done (`Token refresh`, …).
        what: String,
        /// The endpoint's host and path.
        endpoint: String,
        /// The transport's reason, without the URL's query.
        reason: String,
    },
    /// The server refused the request.
    #[error("{what} failed: {endpoint} answered HTTP {status}{detail}")]
    Refused {
        /// What was being done.
        what: String,
        /// The endpoint's host and path.
        endpoint: String,
        /// The HTTP status.
        status: u16,
        /// `: <error code>` from the body (`invalid_grant`, …), when it had one.
        detail: String,
    },
    /// The answer lacked what the flow needs.
    #[error("{0}")]
    Invalid(String),
    /// The pasted redirect belonged to another sign-in.
    #[error("OAuth state mismatch: the pasted redirect URL belongs to another sign-in")]
    StateMismatch,
    /// Nothing that holds an authorization code was given.
    #[error("Missing authorization code")]
    MissingCode,
    /// The user cancelled.
    #[error("Login cancelled")]
    Cancelled,
}

impl OAuthError {
    /// Whether the server refused the credential itself (revoked or expired refresh token):
    /// signing in again is the only way on.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Self::Refused { status, .. } if (400..500).contains(status) && *status != 429)
    }
}

/// Where the OAuth requests go. In production the constants of 1.6.0; `test_base` (set by
/// `cli` from `PI_TEST_OAUTH_BASE`, a test-only variable) replaces the scheme, host and port
/// of every endpoint and lets the loopback callback take any free port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoints {
    /// `http://127.0.0.1:<port>` of a test's authorization server.
    pub test_base: Option<String>,
    /// The host the loopback callback binds (1.6.0's `PI_OAUTH_CALLBACK_HOST`, default
    /// 127.0.0.1).
    pub callback_host: Option<String>,
    /// The program that opens the authorization URL (`BROWSER`), else the desktop's opener
    /// (`xdg-open`, `open`; not under a test base).
    pub browser: Option<String>,
}

impl Endpoints {
    /// Returns `url` with the test base in place of its origin (unchanged without one).
    pub fn url(&self, url: &str) -> String {
        let Some(base) = &self.test_base else {
            return url.to_owned();
        };
        let path = url
            .find("://")
            .and_then(|scheme| {
                url[scheme + 3..]
                    .find('/')
                    .map(|at| &url[scheme + 3 + at..])
            })
            .unwrap_or("/");
        format!("{}{path}", base.trim_end_matches('/'))
    }

    /// The callback port to bind: the provider's, or any free one under a test base.
    pub fn callback_port(&self, preferred: u16) -> u16 {
        if self.test_base.is_some() {
            0
        } else {
            preferred
        }
    }

    /// The host the callback server binds.
    pub fn callback_host(&self) -> &str {
        self.callback_host.as_deref().unwrap_or("127.0.0.1")
    }

    /// The Copilot API base for a Copilot token (`proxy-ep=proxy.x` → `https://api.x`), the
    /// enterprise's, or the individual default; the test base under a test.
    pub fn copilot_base_url(&self, token: &str, enterprise: Option<&str>) -> String {
        if let Some(base) = &self.test_base {
            return base.trim_end_matches('/').to_owned();
        }
        copilot_base_url(token, enterprise)
    }
}

/// 1.6.0's `getGitHubCopilotBaseUrl`.
pub fn copilot_base_url(token: &str, enterprise: Option<&str>) -> String {
    let proxy = token
        .split(';')
        .find_map(|part| part.strip_prefix("proxy-ep="))
        .filter(|host| !host.is_empty());
    if let Some(host) = proxy {
        let api = host
            .strip_prefix("proxy.")
            .map_or_else(|| host.to_owned(), |rest| format!("api.{rest}"));
        return format!("https://{api}");
    }
    match enterprise {
        Some(domain) => format!("https://copilot-api.{domain}"),
        None => COPILOT_DEFAULT_BASE_URL.to_owned(),
    }
}

/// The host and path of a URL, for error messages (never its query).
fn endpoint_of(url: &str) -> String {
    let without_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    without_scheme
        .split(['?', '#'])
        .next()
        .unwrap_or(without_scheme)
        .to_owned()
}

/// An HTTP client for the token endpoints.
pub fn http_client() -> Result<reqwest::Client, OAuthError> {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|error| OAuthError::Invalid(format!("cannot build an HTTP client: {error}")))
}

/// A request body.
enum Body<'a> {
    Json(Value),
    Form(&'a [(&'a str, &'a str)]),
    None,
}

/// Sends one token request and returns the JSON answer (2xx) or the refusal.
async fn call(
    http: &reqwest::Client,
    what: &str,
    method: reqwest::Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Body<'_>,
) -> Result<Value, OAuthError> {
    let endpoint = endpoint_of(url);
    let (status, value) = call_any(http, what, method, url, headers, body).await?;
    if !(200..300).contains(&status) {
        return Err(OAuthError::Refused {
            what: what.to_owned(),
            endpoint,
            status,
            detail: error_code(&value),
        });
    }
    if !value.is_object() {
        return Err(OAuthError::Invalid(format!(
            "{what} failed: {endpoint} did not answer with a JSON object"
        )));
    }
    Ok(value)
}

/// Sends one request and returns the HTTP status with the JSON body (`null` when it was
/// none), whatever the status.
/// [`call`] with a POST of the JSON `body` and no headers of its own (the token endpoints).
async fn post_json(
    http: &reqwest::Client,
    what: &str,
    url: &str,
    body: Value,
) -> Result<Value, OAuthError> {
    call(
        http,
        what,
        reqwest::Method::POST,
        url,
        &[],
        Body::Json(body),
    )
    .await
}

/// [`call`] with a POST of `form` and no headers of its own (the token endpoints).
async fn post_form(
    http: &reqwest::Client,
    what: &str,
    url: &str,
    form: &[(&str, &str)],
) -> Result<Value, OAuthError> {
    call(
        http,
        what,
        reqwest::Method::POST,
        url,
        &[],
        Body::Form(form),
    )
    .await
}

async fn call_any(
    http: &reqwest::Client,
    what: &str,
    method: reqwest::Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Body<'_>,
) -> Result<(u16, Value), OAuthError> {
    let mut request = http
        .request(method, url)
        .header("Accept", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request = match body {
        Body::Json(value) => request
            .header("Content-Type", "application/json")
            .body(value.to_string()),
        Body::Form(pairs) => {
            let mut form = reqwest::Url::parse("http://form.invalid/")
                .map_err(|error| OAuthError::Invalid(format!("cannot encode a form: {error}")))?;
            form.query_pairs_mut().extend_pairs(pairs.iter().copied());
            request
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(form.query().unwrap_or_default().to_owned())
        }
        Body::None => request,
    };
    let endpoint = endpoint_of(url);
    let response = request
        .send()
        .await
        .map_err(|error| OAuthError::Unreachable {
            what: what.to_owned(),
            endpoint: endpoint.clone(),
            reason: transport_reason(error),
        })?;
    let status = response.status().as_u16();
    let text = response
        .text()
        .await
        .map_err(|error| OAuthError::Unreachable {
            what: what.to_owned(),
            endpoint: endpoint.clone(),
            reason: transport_reason(error),
        })?;
    let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    Ok((status, value))
}

/// 1.6.0's `trustedHttpUrl`: the value when it is an `http:` or `https:` URL (a login opens
/// or shows server-supplied URLs), normalized.
fn trusted_http_url(value: &Value) -> Option<String> {
    let url = reqwest::Url::parse(value.as_str()?).ok()?;
    matches!(url.scheme(), "http" | "https").then(|| url.to_string())
}

/// Why a request got no answer, without the URL (reqwest's display names it, query and all).
fn transport_reason(error: reqwest::Error) -> String {
    if error.is_timeout() {
        "timed out".to_owned()
    } else if error.is_connect() {
        "connection failed".to_owned()
    } else {
        error.without_url().to_string()
    }
}

/// `: <code>` from an OAuth error body (`error` as a string, or `error.code`), bounded and
/// limited to a code's characters so no token an odd server echoes gets through.
fn error_code(body: &Value) -> String {
    let code = match &body["error"] {
        Value::String(code) => Some(code.as_str()),
        Value::Object(error) => error
            .get("code")
            .or_else(|| error.get("type"))
            .and_then(Value::as_str),
        _ => None,
    };
    match code {
        Some(code)
            if !code.is_empty()
                && code.len() <= 64
                && code
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')) =>
        {
            format!(": {code}")
        }
        _ => String::new(),
    }
}

fn string_field(value: &Value, name: &str, what: &str) -> Result<String, OAuthError> {
    value[name]
        .as_str()
        .filter(|text| !text.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| OAuthError::Invalid(format!("{what}: the answer has no {name}")))
}

fn number_field(value: &Value, name: &str, what: &str) -> Result<f64, OAuthError> {
    value[name]
        .as_f64()
        .filter(|number| number.is_finite())
        .ok_or_else(|| OAuthError::Invalid(format!("{what}: the answer has no {name}")))
}

/// The authorization URL a browser opens, with what the callback must match.
#[derive(Clone, Debug)]
pub struct Authorization {
    /// The URL to open.
    pub url: String,
    /// The `state` the redirect must carry.
    pub state: String,
    /// The PKCE verifier (secret: sent only to the token endpoint).
    pub verifier: String,
    /// The redirect URI sent (the token request repeats it).
    pub redirect_uri: String,
}

/// Builds the authorization URL of a browser sign-in (Anthropic, Codex) for `redirect_uri`.
pub fn authorization(
    provider: OAuthProvider,
    endpoints: &Endpoints,
    redirect_uri: &str,
) -> Result<Authorization, OAuthError> {
    let pkce = pkce::Pkce::generate()?;
    let (base, state, pairs): (&str, String, Vec<(&str, String)>) = match provider {
        OAuthProvider::Anthropic => {
            // 1.6.0 sends the verifier itself as the state, which puts the secret in the URL
            // shown (and in the browser's history); pi's state is random, sent again with the
            // code exchange as 1.6.0 sends it.
            let state = pkce::random_hex(32)?;
            (
                ANTHROPIC_AUTHORIZE_URL,
                state.clone(),
                vec![
                    ("code", "true".to_owned()),
                    ("client_id", ANTHROPIC_CLIENT_ID.to_owned()),
                    ("response_type", "code".to_owned()),
                    ("redirect_uri", redirect_uri.to_owned()),
                    ("scope", ANTHROPIC_SCOPES.to_owned()),
                    ("code_challenge", pkce.challenge.clone()),
                    ("code_challenge_method", "S256".to_owned()),
                    ("state", state),
                ],
            )
        }
        OAuthProvider::OpenAiCodex => {
            let state = pkce::random_hex(16)?;
            (
                CODEX_AUTHORIZE_URL,
                state.clone(),
                vec![
                    ("response_type", "code".to_owned()),
                    ("client_id", CODEX_CLIENT_ID.to_owned()),
                    ("redirect_uri", redirect_uri.to_owned()),
                    ("scope", CODEX_SCOPE.to_owned()),
                    ("code_challenge", pkce.challenge.clone()),
                    ("code_challenge_method", "S256".to_owned()),
                    ("state", state),
                    ("id_token_add_organizations", "true".to_owned()),
                    ("codex_cli_simplified_flow", "true".to_owned()),
                    ("originator", "pi".to_owned()),
                ],
            )
        }
        OAuthProvider::OpenRouter => (
            // OpenRouter sends no state back; the callback's random path stands in for it.
            OPENROUTER_AUTHORIZE_URL,
            String::new(),
            vec![
                ("callback_url", redirect_uri.to_owned()),
                ("code_challenge", pkce.challenge.clone()),
                ("code_challenge_method", "S256".to_owned()),
            ],
        ),
        OAuthProvider::Radius => {
            return Err(OAuthError::Invalid(
                "Radius names its authorization endpoint: use radius_authorization".to_owned(),
            ));
        }
        OAuthProvider::GithubCopilot
        | OAuthProvider::KimiCoding
        | OAuthProvider::Xai
        | OAuthProvider::Meta => {
            return Err(OAuthError::Invalid(format!(
                "{} signs in with a device code, not a browser redirect",
                provider.name()
            )));
        }
    };
    build_authorization(&endpoints.url(base), state, &pairs, pkce, redirect_uri)
}

fn build_authorization(
    base: &str,
    state: String,
    pairs: &[(&str, String)],
    pkce: pkce::Pkce,
    redirect_uri: &str,
) -> Result<Authorization, OAuthError> {
    let mut url = reqwest::Url::parse(base)
        .map_err(|error| OAuthError::Invalid(format!("bad authorization URL: {error}")))?;
    url.query_pairs_mut()
        .extend_pairs(pairs.iter().map(|(name, value)| (*name, value.as_str())));
    Ok(Authorization {
        url: url.to_string(),
        state,
        verifier: pkce.verifier,
        redirect_uri: redirect_uri.to_owned(),
    })
}

/// The authorization URL of a Radius browser sign-in at the endpoint the gateway named
/// ([`device::radius_discovery`]).
pub fn radius_authorization(
    authorization_endpoint: &str,
    redirect_uri: &str,
) -> Result<Authorization, OAuthError> {
    let pkce = pkce::Pkce::generate()?;
    let state = pkce::random_hex(16)?;
    let pairs = vec![
        ("response_type", "code".to_owned()),
        ("client_id", device::RADIUS_CLIENT_ID.to_owned()),
        ("redirect_uri", redirect_uri.to_owned()),
        ("scope", device::RADIUS_SCOPE.to_owned()),
        ("code_challenge", pkce.challenge.clone()),
        ("code_challenge_method", "S256".to_owned()),
        ("handoff", "url".to_owned()),
        ("state", state.clone()),
    ];
    build_authorization(authorization_endpoint, state, &pairs, pkce, redirect_uri)
}

/// What a pasted authorization input holds (1.6.0's `parseAuthorizationInput`): a redirect
/// URL, `code#state`, a query string, or the bare code.
pub fn parse_authorization_input(input: &str) -> (Option<String>, Option<String>) {
    let value = input.trim();
    if value.is_empty() {
        return (None, None);
    }
    if let Ok(url) = reqwest::Url::parse(value)
        && url.has_host()
    {
        let get = |name: &str| {
            url.query_pairs()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.into_owned())
        };
        return (get("code"), get("state"));
    }
    if let Some((code, state)) = value.split_once('#') {
        return (Some(code.to_owned()), Some(state.to_owned()));
    }
    if value.contains("code=") {
        let pairs: Vec<(String, String)> = reqwest::Url::parse(&format!(
            "http://x.invalid/?{}",
            value.trim_start_matches('?')
        ))
        .map(|url| url.query_pairs().into_owned().collect())
        .unwrap_or_default();
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
        };
        return (get("code"), get("state"));
    }
    (Some(value.to_owned()), None)
}

/// Checks a pasted input against the sign-in and returns its code.
pub fn code_from_input(input: &str, authorization: &Authorization) -> Result<String, OAuthError> {
    let (code, state) = parse_authorization_input(input);
    if state
        .as_deref()
        .is_some_and(|state| state != authorization.state)
    {
        return Err(OAuthError::StateMismatch);
    }
    code.filter(|code| !code.is_empty())
        .ok_or(OAuthError::MissingCode)
}

/// Exchanges an authorization code for the credential to store.
pub async fn exchange_code(
    provider: OAuthProvider,
    endpoints: &Endpoints,
    http: &reqwest::Client,
    code: &str,
    authorization: &Authorization,
    now_ms: i64,
) -> Result<Value, OAuthError> {
    const WHAT: &str = "Token exchange";
    match provider {
        OAuthProvider::Anthropic => {
            let body = json!({
                "grant_type": "authorization_code",
                "client_id": ANTHROPIC_CLIENT_ID,
                "code": code,
                "state": authorization.state,
                "redirect_uri": authorization.redirect_uri,
                "code_verifier": authorization.verifier,
            });
            let url = endpoints.url(ANTHROPIC_TOKEN_URL);
            let answer = post_json(http, WHAT, &url, body).await?;
            anthropic_credential(&answer, now_ms, WHAT)
        }
        OAuthProvider::OpenAiCodex => {
            let url = endpoints.url(CODEX_TOKEN_URL);
            let form = [
                ("grant_type", "authorization_code"),
                ("client_id", CODEX_CLIENT_ID),
                ("code", code),
                ("code_verifier", authorization.verifier.as_str()),
                ("redirect_uri", authorization.redirect_uri.as_str()),
            ];
            let answer = post_form(http, WHAT, &url, &form).await?;
            codex_credential(&answer, now_ms, WHAT)
        }
        OAuthProvider::OpenRouter => {
            let url = endpoints.url(OPENROUTER_KEYS_URL);
            let body = json!({
                "code": code,
                "code_verifier": authorization.verifier,
                "code_challenge_method": "S256",
            });
            let answer = post_json(http, "OpenRouter OAuth key exchange", &url, body).await?;
            let key = answer["key"]
                .as_str()
                .filter(|key| !key.is_empty())
                .ok_or_else(|| {
                    OAuthError::Invalid("OpenRouter OAuth response carries no \"key\"".to_owned())
                })?;
            // A permanent key: 1.6.0 stores it as an OAuth credential that never expires.
            Ok(json!({
                "type": "oauth",
                "access": key,
                "refresh": "",
                "expires": OPENROUTER_NEVER_EXPIRES,
            }))
        }
        OAuthProvider::Radius => {
            let form = [
                ("grant_type", "authorization_code"),
                ("client_id", device::RADIUS_CLIENT_ID),
                ("redirect_uri", authorization.redirect_uri.as_str()),
                ("code", code),
                ("code_verifier", authorization.verifier.as_str()),
            ];
            device::radius_token(
                endpoints,
                http,
                device::RADIUS_DEFAULT_GATEWAY,
                &form,
                now_ms,
                WHAT,
            )
            .await
        }
        OAuthProvider::GithubCopilot
        | OAuthProvider::KimiCoding
        | OAuthProvider::Xai
        | OAuthProvider::Meta => Err(OAuthError::Invalid(format!(
            "{} signs in with a device code",
            provider.name()
        ))),
    }
}

/// `{"type": "oauth", "refresh", "access", "expires"}`, `expires` five minutes early.
fn anthropic_credential(answer: &Value, now_ms: i64, what: &str) -> Result<Value, OAuthError> {
    let access = string_field(answer, "access_token", what)?;
    let refresh = string_field(answer, "refresh_token", what)?;
    let expires_in = number_field(answer, "expires_in", what)?;
    Ok(json!({
        "type": "oauth",
        "refresh": refresh,
        "access": access,
        "expires": now_ms + (expires_in * 1000.0) as i64 - EXPIRY_MARGIN_MS,
    }))
}

/// `{"type": "oauth", "access", "refresh", "expires", "accountId"}` (the account from the
/// access token's claims, which the Codex backend needs as `chatgpt-account-id`).
fn codex_credential(answer: &Value, now_ms: i64, what: &str) -> Result<Value, OAuthError> {
    let access = string_field(answer, "access_token", what)?;
    let refresh = string_field(answer, "refresh_token", what)?;
    let expires_in = number_field(answer, "expires_in", what)?;
    let account = codex_account_id(&access)
        .ok_or_else(|| OAuthError::Invalid("Failed to extract accountId from token".to_owned()))?;
    Ok(json!({
        "type": "oauth",
        "access": access,
        "refresh": refresh,
        "expires": now_ms + (expires_in * 1000.0) as i64,
        "accountId": account,
    }))
}

/// The `chatgpt_account_id` claim of a Codex access token (a JWT).
pub fn codex_account_id(token: &str) -> Option<String> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    claims[CODEX_JWT_CLAIM]["chatgpt_account_id"]
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// Refreshes a stored OAuth credential (`entry`, its `auth.json` object) and returns the one
/// to store in its place (1.6.0's `oauth.refresh`).
pub async fn refresh(
    provider: OAuthProvider,
    endpoints: &Endpoints,
    http: &reqwest::Client,
    entry: &Map<String, Value>,
    now_ms: i64,
) -> Result<Value, OAuthError> {
    const WHAT: &str = "Token refresh";
    if provider == OAuthProvider::OpenRouter {
        // A permanent key: nothing to refresh (1.6.0 returns the credential as it is).
        return Ok(Value::Object(entry.clone()));
    }
    let refresh_token = entry
        .get("refresh")
        .and_then(Value::as_str)
        .filter(|token| !token.is_empty())
        .ok_or_else(|| {
            OAuthError::Invalid("the stored credential has no refresh token".to_owned())
        })?;
    match provider {
        OAuthProvider::Anthropic => {
            let body = json!({
                "grant_type": "refresh_token",
                "client_id": ANTHROPIC_CLIENT_ID,
                "refresh_token": refresh_token,
            });
            let url = endpoints.url(ANTHROPIC_TOKEN_URL);
            let answer = post_json(http, WHAT, &url, body).await?;
            anthropic_credential(&answer, now_ms, WHAT)
        }
        OAuthProvider::OpenAiCodex => {
            let url = endpoints.url(CODEX_TOKEN_URL);
            let form = [
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh_token),
                ("client_id", CODEX_CLIENT_ID),
            ];
            let answer = post_form(http, WHAT, &url, &form).await?;
            codex_credential(&answer, now_ms, WHAT)
        }
        OAuthProvider::GithubCopilot => {
            let enterprise = entry
                .get("enterpriseUrl")
                .and_then(Value::as_str)
                .and_then(normalize_domain);
            copilot_credential(endpoints, http, refresh_token, enterprise.as_deref()).await
        }
        OAuthProvider::KimiCoding => {
            device::kimi_refresh(endpoints, http, refresh_token, now_ms).await
        }
        OAuthProvider::Xai => device::xai_refresh(endpoints, http, refresh_token, now_ms).await,
        OAuthProvider::Meta => device::meta_mint(endpoints, http, refresh_token, now_ms).await,
        OAuthProvider::Radius => {
            let form = [
                ("grant_type", "refresh_token"),
                ("client_id", device::RADIUS_CLIENT_ID),
                ("refresh_token", refresh_token),
            ];
            device::radius_token(
                endpoints,
                http,
                device::RADIUS_DEFAULT_GATEWAY,
                &form,
                now_ms,
                WHAT,
            )
            .await
        }
        OAuthProvider::OpenRouter => Ok(Value::Object(entry.clone())),
    }
}

/// 1.6.0's `normalizeDomain`: the host of a URL or bare domain.
pub fn normalize_domain(input: &str) -> Option<String> {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return None;
    }
    let url = if trimmed.contains("://") {
        reqwest::Url::parse(trimmed)
    } else {
        reqwest::Url::parse(&format!("https://{trimmed}"))
    };
    url.ok()?.host_str().map(str::to_owned)
}

/// The authorization of Anthropic's copy-the-code login (headless): the redirect goes to
/// Anthropic's page, which shows `code#state` to paste.
pub fn anthropic_copy_code_authorization(
    endpoints: &Endpoints,
) -> Result<Authorization, OAuthError> {
    authorization(
        OAuthProvider::Anthropic,
        endpoints,
        ANTHROPIC_COPY_CODE_REDIRECT_URI,
    )
}

/// A Codex device-code sign-in in progress.
#[derive(Clone, Debug)]
pub struct CodexDevice {
    /// The code the user types at [`CODEX_DEVICE_VERIFICATION_URI`].
    pub user_code: String,
    device_auth_id: String,
    interval: Duration,
}

/// Starts Codex's device flow (`/api/accounts/deviceauth/usercode`).
pub async fn codex_device_code(
    endpoints: &Endpoints,
    http: &reqwest::Client,
) -> Result<CodexDevice, OAuthError> {
    const WHAT: &str = "Device code request";
    let url = endpoints.url(CODEX_DEVICE_USER_CODE_URL);
    let body = json!({ "client_id": CODEX_CLIENT_ID });
    let answer = post_json(http, WHAT, &url, body).await?;
    let interval = match &answer["interval"] {
        Value::String(text) => text.trim().parse::<f64>().ok(),
        other => other.as_f64(),
    }
    .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
    .ok_or_else(|| OAuthError::Invalid("Invalid OpenAI Codex device code response".into()))?;
    Ok(CodexDevice {
        user_code: string_field(&answer, "user_code", WHAT)?,
        device_auth_id: string_field(&answer, "device_auth_id", WHAT)?,
        interval: Duration::from_secs_f64(interval.max(1.0)),
    })
}

/// Polls until the device is authorized (403/404 and `deviceauth_authorization_pending`
/// wait), then exchanges the code it gives with its verifier; the credential to store.
pub async fn codex_device_complete(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    device: &CodexDevice,
    now_ms: &(dyn Fn() -> i64 + Send + Sync),
) -> Result<Value, OAuthError> {
    const WHAT: &str = "Device authorization";
    let url = endpoints.url(CODEX_DEVICE_TOKEN_URL);
    let deadline = tokio::time::Instant::now() + CODEX_DEVICE_TIMEOUT;
    let mut interval = device.interval;
    loop {
        if tokio::time::Instant::now() >= deadline {
            return Err(OAuthError::Invalid("Device flow timed out".to_owned()));
        }
        let body =
            json!({ "device_auth_id": device.device_auth_id, "user_code": device.user_code });
        match post_json(http, WHAT, &url, body).await {
            Ok(answer) => {
                let code = string_field(&answer, "authorization_code", WHAT)?;
                let verifier = string_field(&answer, "code_verifier", WHAT)?;
                let authorization = Authorization {
                    url: String::new(),
                    state: String::new(),
                    verifier,
                    redirect_uri: CODEX_DEVICE_REDIRECT_URI.to_owned(),
                };
                return exchange_code(
                    OAuthProvider::OpenAiCodex,
                    endpoints,
                    http,
                    &code,
                    &authorization,
                    now_ms(),
                )
                .await;
            }
            Err(OAuthError::Refused {
                status: 403 | 404, ..
            }) => {}
            Err(OAuthError::Refused { detail, .. })
                if detail == ": deviceauth_authorization_pending" => {}
            Err(OAuthError::Refused { detail, .. }) if detail == ": slow_down" => {
                interval += Duration::from_secs(5);
            }
            Err(error) => return Err(error),
        }
        tokio::time::sleep(interval).await;
    }
}

/// A device-code sign-in in progress (GitHub).
#[derive(Clone, Debug)]
pub struct DeviceCode {
    /// The code the user types at the verification page.
    pub user_code: String,
    /// The page to open.
    pub verification_uri: String,
    device_code: String,
    interval: Duration,
    expires_in: Duration,
    domain: String,
}

fn github_url(endpoints: &Endpoints, domain: &str, path: &str) -> String {
    endpoints.url(&format!("https://{domain}{path}"))
}

/// Starts GitHub's device flow (`/login/device/code`, scope `read:user`).
pub async fn copilot_device_code(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    enterprise: Option<&str>,
) -> Result<DeviceCode, OAuthError> {
    const WHAT: &str = "Device code request";
    let domain = enterprise.unwrap_or("github.com").to_owned();
    let url = github_url(endpoints, &domain, "/login/device/code");
    let form = [("client_id", COPILOT_CLIENT_ID), ("scope", "read:user")];
    let answer = call(
        http,
        WHAT,
        reqwest::Method::POST,
        &url,
        &[("User-Agent", "GitHubCopilotChat/0.35.0")],
        Body::Form(&form),
    )
    .await?;
    let verification_uri = string_field(&answer, "verification_uri", WHAT)?;
    if !(verification_uri.starts_with("https://") || verification_uri.starts_with("http://")) {
        return Err(OAuthError::Invalid(
            "Untrusted verification_uri in device code response".to_owned(),
        ));
    }
    let interval = answer["interval"].as_f64().unwrap_or(5.0).max(1.0);
    Ok(DeviceCode {
        user_code: string_field(&answer, "user_code", WHAT)?,
        verification_uri,
        device_code: string_field(&answer, "device_code", WHAT)?,
        interval: Duration::from_secs_f64(interval),
        expires_in: Duration::from_secs_f64(number_field(&answer, "expires_in", WHAT)?.max(0.0)),
        domain,
    })
}

/// Polls until the user has authorized the device (RFC 8628: wait an interval before the
/// first poll, `authorization_pending` waits, `slow_down` waits longer), then exchanges the
/// GitHub token for Copilot's and returns the credential to store.
pub async fn copilot_complete(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    device: &DeviceCode,
    enterprise: Option<&str>,
) -> Result<Value, OAuthError> {
    const WHAT: &str = "Device authorization";
    let url = github_url(endpoints, &device.domain, "/login/oauth/access_token");
    let deadline = tokio::time::Instant::now() + device.expires_in;
    let mut interval = device.interval;
    loop {
        tokio::time::sleep(interval).await;
        if tokio::time::Instant::now() >= deadline {
            return Err(OAuthError::Invalid("Device flow timed out".to_owned()));
        }
        let form = [
            ("client_id", COPILOT_CLIENT_ID),
            ("device_code", device.device_code.as_str()),
            ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
        ];
        let answer = call(
            http,
            WHAT,
            reqwest::Method::POST,
            &url,
            &[("User-Agent", "GitHubCopilotChat/0.35.0")],
            Body::Form(&form),
        )
        .await?;
        if let Some(token) = answer["access_token"].as_str() {
            return copilot_credential(endpoints, http, token, enterprise).await;
        }
        match answer["error"].as_str() {
            Some("authorization_pending") => {}
            Some("slow_down") => {
                interval = match answer["interval"].as_f64() {
                    Some(seconds) if seconds > 0.0 => Duration::from_secs_f64(seconds.max(1.0)),
                    _ => interval + Duration::from_secs(5),
                };
            }
            Some(other) => {
                return Err(OAuthError::Invalid(format!(
                    "Device flow failed{}",
                    error_code(&json!({ "error": other }))
                )));
            }
            None => {
                return Err(OAuthError::Invalid(
                    "Invalid device token response".to_owned(),
                ));
            }
        }
    }
}

/// Exchanges a GitHub token for a Copilot token and lists the account's models:
/// `{"type": "oauth", "refresh": <GitHub token>, "access": <Copilot token>, "expires",
/// "enterpriseUrl"?, "availableModelIds"}`.
async fn copilot_credential(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    github_token: &str,
    enterprise: Option<&str>,
) -> Result<Value, OAuthError> {
    const WHAT: &str = "Copilot token request";
    let domain = enterprise.unwrap_or("github.com");
    let url = github_url(
        endpoints,
        &format!("api.{domain}"),
        "/copilot_internal/v2/token",
    );
    let bearer = format!("Bearer {github_token}");
    let mut headers: Vec<(&str, &str)> = vec![("Authorization", bearer.as_str())];
    headers.extend_from_slice(COPILOT_HEADERS);
    let answer = call(http, WHAT, reqwest::Method::GET, &url, &headers, Body::None).await?;
    let token = string_field(&answer, "token", WHAT)?;
    let expires_at = number_field(&answer, "expires_at", WHAT)?;
    let models = copilot_models(endpoints, http, &token, enterprise).await?;
    let mut credential = Map::new();
    credential.insert("type".into(), json!("oauth"));
    credential.insert("refresh".into(), json!(github_token));
    credential.insert("access".into(), json!(token));
    credential.insert(
        "expires".into(),
        json!((expires_at * 1000.0) as i64 - EXPIRY_MARGIN_MS),
    );
    if let Some(enterprise) = enterprise {
        credential.insert("enterpriseUrl".into(), json!(enterprise));
    }
    credential.insert("availableModelIds".into(), json!(models));
    Ok(Value::Object(credential))
}

/// The account's usable models (`GET <api>/models`: picker-enabled, not disabled by policy,
/// tool calls supported; an individual account with none enabled falls back to the
/// policy-enabled ones, as 1.6.0 does).
async fn copilot_models(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    token: &str,
    enterprise: Option<&str>,
) -> Result<Vec<String>, OAuthError> {
    const WHAT: &str = "Copilot model list";
    let base = endpoints.copilot_base_url(token, enterprise);
    let bearer = format!("Bearer {token}");
    let mut headers: Vec<(&str, &str)> = vec![("Authorization", bearer.as_str())];
    headers.extend_from_slice(COPILOT_HEADERS);
    headers.push(("X-GitHub-Api-Version", COPILOT_API_VERSION));
    let url = format!("{base}/models");
    let answer = call(http, WHAT, reqwest::Method::GET, &url, &headers, Body::None).await?;
    let Some(data) = answer["data"].as_array() else {
        return Err(OAuthError::Invalid(
            "Invalid Copilot models response".to_owned(),
        ));
    };
    let usable: Vec<&Value> = data
        .iter()
        .filter(|item| item["id"].is_string())
        .filter(|item| item["capabilities"]["supports"]["tool_calls"] != json!(false))
        .collect();
    let id = |item: &&Value| item["id"].as_str().unwrap_or_default().to_owned();
    let picker: Vec<String> = usable
        .iter()
        .filter(|item| {
            item["model_picker_enabled"] == json!(true)
                && item["policy"]["state"] != json!("disabled")
        })
        .map(id)
        .collect();
    if !picker.is_empty() || base != COPILOT_DEFAULT_BASE_URL {
        return Ok(picker);
    }
    Ok(usable
        .iter()
        .filter(|item| item["policy"]["state"] == json!("enabled"))
        .map(id)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_swap_the_origin_under_a_test_base() {
        let production = Endpoints::default();
        assert_eq!(production.url(ANTHROPIC_TOKEN_URL), ANTHROPIC_TOKEN_URL);
        assert_eq!(production.callback_port(1455), 1455);
        let test = Endpoints {
            test_base: Some("http://127.0.0.1:9/".into()),
            callback_host: None,
            browser: None,
        };
        assert_eq!(
            test.url(ANTHROPIC_TOKEN_URL),
            "http://127.0.0.1:9/v1/oauth/token"
        );
        assert_eq!(
            test.url("https://api.github.com/copilot_internal/v2/token"),
            "http://127.0.0.1:9/copilot_internal/v2/token"
        );
        assert_eq!(test.callback_port(1455), 0);
    }

    #[test]
    fn pasted_inputs_parse_as_1_6_0_parses_them() {
        assert_eq!(
            parse_authorization_input("http://localhost:1/callback?code=c1&state=s1"),
            (Some("c1".into()), Some("s1".into()))
        );
        assert_eq!(
            parse_authorization_input(" c2#s2 "),
            (Some("c2".into()), Some("s2".into()))
        );
        assert_eq!(
            parse_authorization_input("code=c3&state=s3"),
            (Some("c3".into()), Some("s3".into()))
        );
        assert_eq!(parse_authorization_input("c4"), (Some("c4".into()), None));
        assert_eq!(parse_authorization_input("  "), (None, None));
    }

    #[test]
    fn copilot_base_urls_come_from_the_token() {
        assert_eq!(
            copilot_base_url(
                "tid=1;exp=2;proxy-ep=proxy.business.githubcopilot.com;x=y",
                None
            ),
            "https://api.business.githubcopilot.com"
        );
        assert_eq!(
            copilot_base_url("tid=1", Some("corp.ghe.com")),
            "https://copilot-api.corp.ghe.com"
        );
        assert_eq!(copilot_base_url("tid=1", None), COPILOT_DEFAULT_BASE_URL);
        assert_eq!(
            normalize_domain("https://corp.ghe.com/x").as_deref(),
            Some("corp.ghe.com")
        );
        assert_eq!(normalize_domain(" "), None);
    }

    #[test]
    fn codex_account_ids_come_from_the_claims() {
        use base64::Engine as _;
        let claims = json!({ CODEX_JWT_CLAIM: { "chatgpt_account_id": "acct-1" } });
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims.to_string());
        assert_eq!(
            codex_account_id(&format!("h.{payload}.s")).as_deref(),
            Some("acct-1")
        );
        assert_eq!(codex_account_id("not-a-jwt"), None);
    }

    #[test]
    fn error_codes_never_carry_odd_text() {
        assert_eq!(
            error_code(&json!({"error": "invalid_grant"})),
            ": invalid_grant"
        );
        assert_eq!(
            error_code(&json!({"error": {"code": "token_expired"}})),
            ": token_expired"
        );
        assert_eq!(
            error_code(&json!({"error": "secret value with spaces"})),
            ""
        );
        assert_eq!(error_code(&Value::Null), "");
    }
}
