//! Google Application Default Credentials for Vertex AI: the key file `cli` read (the
//! `GOOGLE_APPLICATION_CREDENTIALS` file, else gcloud's
//! `application_default_credentials.json`) turned into an OAuth access token, as
//! google-auth-library (under `@google/genai`) does for 1.6.0.
//!
//! Two kinds of file are spoken:
//! - `service_account`: a JWT `{"alg":"RS256"}` / `{iss: client_email, scope:
//!   cloud-platform, aud, exp: iat + 3600, iat}` signed with the file's PKCS#8 `private_key`
//!   (RSA PKCS#1 v1.5 SHA-256), posted as
//!   `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<jwt>`;
//! - `authorized_user` (`gcloud auth application-default login`):
//!   `refresh_token=…&client_id=…&client_secret=…&grant_type=refresh_token`.
//!
//! Both go to the file's `token_uri` (default `https://oauth2.googleapis.com/token`) and
//! answer `{"access_token", "expires_in", …}`; the token is sent as `Authorization: Bearer`,
//! with `x-goog-user-project` when the file names a `quota_project_id`. Tokens are cached per
//! key file until five minutes before they expire (google-auth-library's
//! `eagerRefreshThresholdMillis`).
//!
//! Departures: the file's `token_uri` is honoured, and is the JWT audience (google-auth-library
//! 10.9 posts to, and signs for, the fixed Google URL; Google's Python and Go libraries use
//! `token_uri`, which is that URL in every real key file); the token request is not retried
//! (gaxios retries it on 5xx); no GCE metadata server, workload identity or impersonation.
//!
//! Pure except [`access_token`], which posts the exchange.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::json::to_js_string;

/// Google's token endpoint, for files without a `token_uri`.
pub const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The scope `@google/genai` asks for (`REQUIRED_VERTEX_AI_SCOPE`).
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// A token is refreshed when less than this is left of it.
const EAGER_REFRESH: i64 = 5 * 60 * 1000;

/// The text when no credentials file can be read (google-auth-library's wording).
pub const NO_CREDENTIALS: &str = "Could not load the default credentials. Browse to https://cloud.google.com/docs/authentication/getting-started for more information.";

/// A parsed key file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdcCredentials {
    /// A service-account key.
    ServiceAccount {
        /// `client_email`, the JWT issuer.
        client_email: String,
        /// `private_key`, PKCS#8 PEM.
        private_key: String,
        /// `token_uri`.
        token_uri: String,
        /// `quota_project_id`, sent as `x-goog-user-project`.
        quota_project_id: Option<String>,
    },
    /// gcloud's user credentials.
    AuthorizedUser {
        /// `client_id`.
        client_id: String,
        /// `client_secret`.
        client_secret: String,
        /// `refresh_token`.
        refresh_token: String,
        /// `token_uri` (gcloud writes none).
        token_uri: String,
        /// `quota_project_id`, sent as `x-goog-user-project`.
        quota_project_id: Option<String>,
    },
}

fn field<'a>(map: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    map.get(name)
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
}

impl AdcCredentials {
    /// Parses a key file; `Err` names what is missing (google-auth-library's texts).
    pub fn parse(text: &str) -> Result<Self, String> {
        let json: Value = serde_json::from_str(text)
            .map_err(|err| format!("Could not parse the credentials file: {err}"))?;
        let Some(map) = json.as_object() else {
            return Err("Must pass in a JSON object containing the Google auth settings.".into());
        };
        let token_uri = field(map, "token_uri")
            .unwrap_or(DEFAULT_TOKEN_URI)
            .to_owned();
        let quota_project_id = field(map, "quota_project_id").map(str::to_owned);
        match field(map, "type") {
            Some("service_account") => {
                let (Some(client_email), Some(private_key)) =
                    (field(map, "client_email"), field(map, "private_key"))
                else {
                    return Err(
                        "The incoming JSON object does not contain a client_email field".into(),
                    );
                };
                Ok(Self::ServiceAccount {
                    client_email: client_email.to_owned(),
                    private_key: private_key.to_owned(),
                    token_uri,
                    quota_project_id,
                })
            }
            Some("authorized_user") => {
                let (Some(client_id), Some(client_secret), Some(refresh_token)) = (
                    field(map, "client_id"),
                    field(map, "client_secret"),
                    field(map, "refresh_token"),
                ) else {
                    return Err("The incoming JSON object does not contain a client_id, client_secret or refresh_token field".into());
                };
                Ok(Self::AuthorizedUser {
                    client_id: client_id.to_owned(),
                    client_secret: client_secret.to_owned(),
                    refresh_token: refresh_token.to_owned(),
                    token_uri,
                    quota_project_id,
                })
            }
            other => Err(format!(
                "The incoming JSON object does not contain a supported credential type: {}",
                other.unwrap_or("undefined")
            )),
        }
    }

    /// Returns the project billed for quota (`x-goog-user-project`).
    pub fn quota_project_id(&self) -> Option<&str> {
        match self {
            Self::ServiceAccount {
                quota_project_id, ..
            }
            | Self::AuthorizedUser {
                quota_project_id, ..
            } => quota_project_id.as_deref(),
        }
    }

    /// Returns the token endpoint.
    pub fn token_uri(&self) -> &str {
        match self {
            Self::ServiceAccount { token_uri, .. } | Self::AuthorizedUser { token_uri, .. } => {
                token_uri
            }
        }
    }

    /// Returns the form body of the token exchange at `now_ms`.
    pub fn token_request_body(&self, now_ms: i64) -> Result<String, String> {
        match self {
            Self::ServiceAccount {
                client_email,
                private_key,
                token_uri,
                ..
            } => {
                let assertion = signed_jwt(client_email, private_key, token_uri, now_ms)?;
                Ok(form(&[
                    ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                    ("assertion", &assertion),
                ]))
            }
            Self::AuthorizedUser {
                client_id,
                client_secret,
                refresh_token,
                ..
            } => Ok(form(&[
                ("refresh_token", refresh_token),
                ("client_id", client_id),
                ("client_secret", client_secret),
                ("grant_type", "refresh_token"),
            ])),
        }
    }
}

/// `application/x-www-form-urlencoded` as `URLSearchParams` writes it.
fn form(pairs: &[(&str, &str)]) -> String {
    let encode = |text: &str| {
        let mut out = String::with_capacity(text.len());
        for byte in text.bytes() {
            match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                    out.push(byte as char);
                }
                b' ' => out.push('+'),
                _ => out.push_str(&format!("%{byte:02X}")),
            }
        }
        out
    };
    pairs
        .iter()
        .map(|(key, value)| format!("{}={}", encode(key), encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

fn base64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The DER inside a PEM block.
fn pem_der(pem: &str) -> Result<Vec<u8>, String> {
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|err| format!("The private key is not valid PEM: {err}"))
}

/// Returns the RS256 JWT a service account exchanges for a token (gtoken's `getJwsSign`).
pub fn signed_jwt(
    client_email: &str,
    private_key: &str,
    audience: &str,
    now_ms: i64,
) -> Result<String, String> {
    let iat = now_ms.div_euclid(1000);
    let header = base64url(br#"{"alg":"RS256"}"#);
    let claims = json!({
        "iss": client_email,
        "scope": CLOUD_PLATFORM_SCOPE,
        "aud": audience,
        "exp": iat + 3600,
        "iat": iat,
    });
    let payload = base64url(to_js_string(&claims).as_bytes());
    let signing_input = format!("{header}.{payload}");
    let der = pem_der(private_key)?;
    let key = ring::signature::RsaKeyPair::from_pkcs8(&der)
        .map_err(|err| format!("The private key is not an RSA PKCS#8 key: {err}"))?;
    let mut signature = vec![0u8; key.public().modulus_len()];
    // PKCS#1 v1.5 padding is deterministic; ring asks for a generator all the same.
    key.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signing_input.as_bytes(),
        &mut signature,
    )
    .map_err(|_| "Could not sign the token request".to_owned())?;
    Ok(format!("{signing_input}.{}", base64url(&signature)))
}

/// An access token and when it expires (Unix ms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessToken {
    /// `access_token`.
    pub token: String,
    /// `now + expires_in`.
    pub expires_at_ms: i64,
}

/// Reads the token endpoint's answer; `Err` with gtoken's wording (`<error>:
/// <error_description>`) for a refusal.
pub fn parse_token_response(status: u16, body: &str, now_ms: i64) -> Result<AccessToken, String> {
    let json = serde_json::from_str::<Value>(body).ok();
    if !(200..300).contains(&status) {
        return Err(match json.as_ref().and_then(|json| json.get("error")) {
            Some(Value::String(error)) => {
                let description = match json.as_ref().and_then(|json| json.get("error_description"))
                {
                    Some(Value::String(text)) => text.clone(),
                    None => "undefined".to_owned(),
                    Some(other) => to_js_string(other),
                };
                format!("{error}: {description}")
            }
            _ => format!("Request failed with status code {status}"),
        });
    }
    let token = json
        .as_ref()
        .and_then(|json| json.get("access_token"))
        .and_then(Value::as_str)
        .filter(|token| !token.is_empty())
        .ok_or_else(|| "The token endpoint answered without an access_token".to_owned())?;
    let expires_in = json
        .as_ref()
        .and_then(|json| json.get("expires_in"))
        .and_then(Value::as_f64)
        .unwrap_or(3600.0);
    Ok(AccessToken {
        token: token.to_owned(),
        expires_at_ms: now_ms + (expires_in * 1000.0) as i64,
    })
}

/// Access tokens per key file, shared by every call of an [`crate::ai::AiClient`].
#[derive(Debug, Default)]
pub struct TokenCache {
    tokens: Mutex<HashMap<String, AccessToken>>,
}

impl TokenCache {
    fn key(credentials: &AdcCredentials) -> String {
        format!("{credentials:?}")
    }

    /// Returns the cached token of `credentials` when more than five minutes of it are left.
    pub fn get(&self, credentials: &AdcCredentials, now_ms: i64) -> Option<String> {
        let tokens = match self.tokens.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        tokens
            .get(&Self::key(credentials))
            .filter(|token| now_ms < token.expires_at_ms - EAGER_REFRESH)
            .map(|token| token.token.clone())
    }

    /// Keeps a fresh token.
    pub fn put(&self, credentials: &AdcCredentials, token: AccessToken) {
        let mut tokens = match self.tokens.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        tokens.insert(Self::key(credentials), token);
    }
}

/// Why no token came.
#[derive(Debug)]
pub enum TokenFailure {
    /// The caller cancelled.
    Aborted,
    /// Anything else, with its text and the endpoint's status.
    Failed {
        /// The error text.
        message: String,
        /// The HTTP status, when the endpoint answered.
        status: Option<u16>,
    },
}

/// Returns an access token for `credentials`: the cached one, or a fresh exchange at the
/// file's `token_uri` (then cached).
pub async fn access_token(
    http: &reqwest::Client,
    cache: &TokenCache,
    credentials: &AdcCredentials,
    now_ms: i64,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<String, TokenFailure> {
    if let Some(token) = cache.get(credentials, now_ms) {
        return Ok(token);
    }
    let failed = |message: String, status: Option<u16>| TokenFailure::Failed { message, status };
    let body = credentials
        .token_request_body(now_ms)
        .map_err(|message| failed(message, None))?;
    let exchange = async {
        let response = http
            .post(credentials.token_uri())
            .header(
                "Content-Type",
                "application/x-www-form-urlencoded;charset=UTF-8",
            )
            .header("Accept", "application/json")
            .body(body)
            .send()
            .await?;
        let status = response.status().as_u16();
        let text = response.text().await?;
        Ok::<_, reqwest::Error>((status, text))
    };
    let outcome = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(TokenFailure::Aborted),
        outcome = tokio::time::timeout(timeout, exchange) => outcome,
    };
    match outcome {
        Ok(Ok((status, text))) => {
            let token = parse_token_response(status, &text, now_ms)
                .map_err(|message| failed(message, Some(status)))?;
            cache.put(credentials, token.clone());
            Ok(token.token)
        }
        Ok(Err(err)) => Err(failed(
            format!(
                "request to {} failed, reason: {err}",
                credentials.token_uri()
            ),
            None,
        )),
        Err(_elapsed) => Err(failed("Request timed out.".to_owned(), None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_encoded_as_url_search_params_encodes_them() {
        assert_eq!(
            form(&[("a b", "1//0x~y*z:"), ("g", "urn:x")]),
            "a+b=1%2F%2F0x%7Ey*z%3A&g=urn%3Ax"
        );
    }

    #[test]
    fn key_files_are_told_apart_and_missing_fields_named() {
        let user = AdcCredentials::parse(
            r#"{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r","quota_project_id":"q"}"#,
        )
        .unwrap();
        assert_eq!(user.token_uri(), DEFAULT_TOKEN_URI);
        assert_eq!(user.quota_project_id(), Some("q"));
        assert_eq!(
            user.token_request_body(0).unwrap(),
            "refresh_token=r&client_id=c&client_secret=s&grant_type=refresh_token"
        );
        assert!(
            AdcCredentials::parse(r#"{"type":"service_account"}"#)
                .unwrap_err()
                .contains("client_email")
        );
        assert!(
            AdcCredentials::parse(r#"{"type":"external_account"}"#)
                .unwrap_err()
                .contains("external_account")
        );
    }

    #[test]
    fn tokens_are_reused_until_five_minutes_before_they_expire() {
        let cache = TokenCache::default();
        let credentials = AdcCredentials::parse(
            r#"{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r"}"#,
        )
        .unwrap();
        let token =
            parse_token_response(200, r#"{"access_token":"t","expires_in":3599}"#, 0).unwrap();
        cache.put(&credentials, token);
        assert_eq!(cache.get(&credentials, 3_298_999).as_deref(), Some("t"));
        assert_eq!(cache.get(&credentials, 3_299_000), None);
        assert_eq!(
            parse_token_response(
                400,
                r#"{"error":"invalid_grant","error_description":"Bad"}"#,
                0
            ),
            Err("invalid_grant: Bad".to_owned())
        );
    }
}
