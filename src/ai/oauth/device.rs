//! The device authorization grant (RFC 8628) as 1.6.0's `device-code.js` polls it, and the
//! device-code sign-ins built on it: Kimi Code, xAI, Meta (`kimi-coding.js`, `xai.js`,
//! `meta.js`) and Radius's device method (`radius.js`). GitHub's and Codex's own device
//! flows stay in the parent module.
//!
//! The poller: at least one second between polls (five when the server names no interval),
//! optionally an interval before the first poll, `authorization_pending` waits,
//! `slow_down` takes the server's new interval or adds five seconds, `expired_token` and
//! `access_denied` end the sign-in, the code's lifetime bounds the whole wait.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::ai::oauth::{
    Body, Endpoints, OAuthError, call, call_any, error_code, post_form, string_field,
    trusted_http_url,
};

/// Kimi Code's OAuth client.
pub const KIMI_CLIENT_ID: &str = "17e5f671-d194-4dfb-9706-5516cb48c098";
const KIMI_DEVICE_URL: &str = "https://auth.kimi.com/api/oauth/device_authorization";
const KIMI_TOKEN_URL: &str = "https://auth.kimi.com/api/oauth/token";

/// xAI's OAuth client (Grok CLI access).
pub const XAI_CLIENT_ID: &str = "b1a00492-073a-47ea-816f-4c329264a828";
/// The scopes 1.6.0 asks xAI for.
pub const XAI_SCOPE: &str = "openid profile email offline_access grok-cli:access api:access";
const XAI_DEVICE_URL: &str = "https://auth.x.ai/oauth2/device/code";
const XAI_TOKEN_URL: &str = "https://auth.x.ai/oauth2/token";
const XAI_REFRESH_SKEW_MS: i64 = 5 * 60 * 1000;

/// Meta's Muse Code CLI client.
pub const META_CLIENT_ID: &str = "1031625952748946";
const META_DEVICE_URL: &str = "https://auth.meta.com/oidc/device/authorization/";
const META_TOKEN_URL: &str = "https://auth.meta.com/oidc/device/token/";
const META_MINT_URL: &str = "https://api.meta.ai/muse-code/key";
const META_KEY_LIFETIME_MS: i64 = 24 * 60 * 60 * 1000;

/// Radius's gateway client.
pub const RADIUS_CLIENT_ID: &str = "pi-gateway";
/// The scopes 1.6.0 asks a Radius gateway for.
pub const RADIUS_SCOPE: &str = "gateway offline_access";
/// 1.6.0's default gateway.
pub const RADIUS_DEFAULT_GATEWAY: &str = "https://radius.pi.dev";
const RADIUS_EXPIRY_SKEW_MS: i64 = 60_000;

const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
const DEFAULT_INTERVAL: f64 = 5.0;

/// A device-code sign-in in progress.
#[derive(Clone, Debug)]
pub struct Device {
    /// The code the user enters.
    pub user_code: String,
    /// The page to open (with the code in it when the server gave such a page).
    pub verification_uri: String,
    device_code: String,
    interval: Duration,
    expires_in: Option<Duration>,
}

fn positive(value: &Value) -> Option<f64> {
    value
        .as_f64()
        .filter(|number| number.is_finite() && *number > 0.0)
}

fn interval_of(value: &Value) -> Duration {
    Duration::from_secs_f64(positive(value).unwrap_or(DEFAULT_INTERVAL).max(1.0))
}

/// Asks `url` for a device code (a form post) and reads the answer. `complete_first`: show
/// `verification_uri_complete` when there is one (Kimi requires it, Meta and xAI prefer it).
async fn start(
    http: &reqwest::Client,
    what: &str,
    url: &str,
    form: &[(&str, &str)],
    require_complete: bool,
    default_expiry: Option<Duration>,
) -> Result<Device, OAuthError> {
    let answer = post_form(http, what, url, form).await?;
    let complete = trusted_http_url(&answer["verification_uri_complete"]);
    let plain = trusted_http_url(&answer["verification_uri"]);
    if require_complete && (complete.is_none() || plain.is_none()) {
        return Err(OAuthError::Invalid(format!(
            "{what}: the answer has no trusted verification URI"
        )));
    }
    let verification_uri = complete.or(plain).ok_or_else(|| {
        OAuthError::Invalid(format!(
            "{what}: the answer has no trusted verification URI"
        ))
    })?;
    Ok(Device {
        user_code: string_field(&answer, "user_code", what)?,
        verification_uri,
        device_code: string_field(&answer, "device_code", what)?,
        interval: interval_of(&answer["interval"]),
        expires_in: positive(&answer["expires_in"])
            .map(Duration::from_secs_f64)
            .or(default_expiry),
    })
}

/// Polls `url` with the device code until the token answer comes (returned as it is).
/// `label` names the provider in the messages of a denied or expired sign-in.
async fn poll(
    http: &reqwest::Client,
    url: &str,
    device: &Device,
    client_id: &str,
    label: &str,
    wait_first: bool,
) -> Result<Value, OAuthError> {
    const WHAT: &str = "Device authorization";
    let deadline = device
        .expires_in
        .map(|lifetime| tokio::time::Instant::now() + lifetime);
    let remaining = || deadline.map(|deadline| deadline - tokio::time::Instant::now());
    let mut interval = device.interval;
    let mut slowed = false;
    if wait_first {
        tokio::time::sleep(remaining().map_or(interval, |left| left.min(interval))).await;
    }
    loop {
        if remaining().is_some_and(|left| left.is_zero()) {
            return Err(OAuthError::Invalid(timeout_message(slowed)));
        }
        let form = [
            ("grant_type", DEVICE_GRANT),
            ("client_id", client_id),
            ("device_code", device.device_code.as_str()),
        ];
        let (status, answer) = call_any(
            http,
            WHAT,
            reqwest::Method::POST,
            url,
            &[],
            Body::Form(&form),
        )
        .await?;
        let ok = (200..300).contains(&status);
        if ok
            && answer["access_token"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        {
            return Ok(answer);
        }
        match answer["error"].as_str() {
            Some("authorization_pending") if status < 500 => {}
            Some("slow_down") if status < 500 => {
                slowed = true;
                interval = match positive(&answer["interval"]) {
                    Some(seconds) => Duration::from_secs_f64(seconds.max(1.0)),
                    None => interval + Duration::from_secs(5),
                };
            }
            Some("expired_token") => {
                return Err(OAuthError::Invalid(format!(
                    "{label} device authorization expired. Please restart login."
                )));
            }
            Some("access_denied" | "authorization_denied") => {
                return Err(OAuthError::Invalid(format!("{label} login was denied.")));
            }
            _ => {
                return Err(OAuthError::Refused {
                    what: WHAT.to_owned(),
                    endpoint: super::endpoint_of(url),
                    status,
                    detail: error_code(&answer),
                });
            }
        }
        let wait = remaining().map_or(interval, |left| left.min(interval));
        if wait.is_zero() {
            return Err(OAuthError::Invalid(timeout_message(slowed)));
        }
        tokio::time::sleep(wait).await;
    }
}

fn timeout_message(slowed: bool) -> String {
    if slowed {
        "Device flow timed out after one or more slow_down responses. This is often caused by clock drift in WSL or VM environments. Please sync or restart the VM clock and try again.".to_owned()
    } else {
        "Device flow timed out".to_owned()
    }
}

fn expires_in_ms(answer: &Value, what: &str) -> Result<i64, OAuthError> {
    positive(&answer["expires_in"])
        .map(|seconds| (seconds * 1000.0) as i64)
        .ok_or_else(|| OAuthError::Invalid(format!("{what}: the answer has no expires_in")))
}

// ---------------------------------------------------------------------------------------
// Kimi Code

/// Starts Kimi Code's device flow.
pub async fn kimi_start(
    endpoints: &Endpoints,
    http: &reqwest::Client,
) -> Result<Device, OAuthError> {
    let url = endpoints.url(KIMI_DEVICE_URL);
    start(
        http,
        "Kimi Code device authorization",
        &url,
        &[("client_id", KIMI_CLIENT_ID)],
        true,
        Some(Duration::from_secs(15 * 60)),
    )
    .await
}

/// Waits for the Kimi Code device and returns `{"type": "oauth", "access", "refresh",
/// "expires"}`.
pub async fn kimi_complete(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    device: &Device,
    now_ms: &(dyn Fn() -> i64 + Send + Sync),
) -> Result<Value, OAuthError> {
    let url = endpoints.url(KIMI_TOKEN_URL);
    let answer = poll(http, &url, device, KIMI_CLIENT_ID, "Kimi Code", true).await?;
    kimi_credential(&answer, now_ms(), "Kimi Code token poll")
}

fn kimi_credential(answer: &Value, now_ms: i64, what: &str) -> Result<Value, OAuthError> {
    Ok(json!({
        "type": "oauth",
        "access": string_field(answer, "access_token", what)?,
        "refresh": string_field(answer, "refresh_token", what)?,
        "expires": now_ms + expires_in_ms(answer, what)?,
    }))
}

/// Refreshes a Kimi Code token (429 and 5xx retried three times, 1 s, 2 s, 4 s apart).
pub async fn kimi_refresh(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    refresh_token: &str,
    now_ms: i64,
) -> Result<Value, OAuthError> {
    const WHAT: &str = "Token refresh";
    let url = endpoints.url(KIMI_TOKEN_URL);
    let form = [
        ("client_id", KIMI_CLIENT_ID),
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
    ];
    let mut attempt = 0u32;
    loop {
        let result = post_form(http, WHAT, &url, &form).await;
        let retryable = match &result {
            Err(OAuthError::Refused { status, .. }) => *status == 429 || *status >= 500,
            Err(OAuthError::Unreachable { .. }) => true,
            _ => false,
        };
        if !retryable || attempt >= 3 {
            return kimi_credential(&result?, now_ms, WHAT);
        }
        tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
        attempt += 1;
    }
}

// ---------------------------------------------------------------------------------------
// xAI

/// Starts xAI's device flow.
pub async fn xai_start(
    endpoints: &Endpoints,
    http: &reqwest::Client,
) -> Result<Device, OAuthError> {
    let url = endpoints.url(XAI_DEVICE_URL);
    let form = [
        ("client_id", XAI_CLIENT_ID),
        ("scope", XAI_SCOPE),
        ("referrer", "pi"),
    ];
    let device = start(http, "xAI device authorization", &url, &form, false, None).await?;
    if device.expires_in.is_none() {
        return Err(OAuthError::Invalid(
            "Invalid xAI OAuth response field: expires_in".to_owned(),
        ));
    }
    Ok(device)
}

/// Waits for the xAI device; `{"type": "oauth", "access", "refresh", "expires"}` (five
/// minutes early).
pub async fn xai_complete(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    device: &Device,
    now_ms: &(dyn Fn() -> i64 + Send + Sync),
) -> Result<Value, OAuthError> {
    let url = endpoints.url(XAI_TOKEN_URL);
    let answer = poll(http, &url, device, XAI_CLIENT_ID, "xAI", true).await?;
    xai_credential(&answer, None, now_ms(), "xAI token poll")
}

/// xAI may leave `refresh_token` out of a refresh (not rotated) and `expires_in` (an hour).
fn xai_credential(
    answer: &Value,
    previous_refresh: Option<&str>,
    now_ms: i64,
    what: &str,
) -> Result<Value, OAuthError> {
    let access = string_field(answer, "access_token", what)?;
    let refresh = match (answer.get("refresh_token"), previous_refresh) {
        (None, Some(previous)) => previous.to_owned(),
        _ => string_field(answer, "refresh_token", what)?,
    };
    let lifetime = if answer.get("expires_in").is_none() {
        3_600_000
    } else {
        expires_in_ms(answer, what)?
    };
    Ok(json!({
        "type": "oauth",
        "access": access,
        "refresh": refresh,
        "expires": now_ms + lifetime - XAI_REFRESH_SKEW_MS,
    }))
}

/// Refreshes an xAI token.
pub async fn xai_refresh(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    refresh_token: &str,
    now_ms: i64,
) -> Result<Value, OAuthError> {
    const WHAT: &str = "Token refresh";
    let url = endpoints.url(XAI_TOKEN_URL);
    let form = [
        ("grant_type", "refresh_token"),
        ("client_id", XAI_CLIENT_ID),
        ("refresh_token", refresh_token),
    ];
    let answer = post_form(http, WHAT, &url, &form).await?;
    xai_credential(&answer, Some(refresh_token), now_ms, WHAT)
}

// ---------------------------------------------------------------------------------------
// Meta

/// Starts Meta's device flow.
pub async fn meta_start(
    endpoints: &Endpoints,
    http: &reqwest::Client,
) -> Result<Device, OAuthError> {
    let url = endpoints.url(META_DEVICE_URL);
    start(
        http,
        "Meta device authorization",
        &url,
        &[("client_id", META_CLIENT_ID)],
        false,
        None,
    )
    .await
}

/// Waits for the Meta device, then mints a Model API key with the identity token:
/// `{"type": "oauth", "refresh": <identity token>, "access": <API key>, "expires"}` (a day).
pub async fn meta_complete(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    device: &Device,
    now_ms: &(dyn Fn() -> i64 + Send + Sync),
) -> Result<Value, OAuthError> {
    let url = endpoints.url(META_TOKEN_URL);
    let answer = poll(http, &url, device, META_CLIENT_ID, "Meta", true).await?;
    let identity = string_field(&answer, "access_token", "Meta token poll")?;
    meta_mint(endpoints, http, &identity, now_ms()).await
}

/// Mints a Meta Model API key (also Meta's refresh: the identity token is not renewable, so
/// a 401 or 403 here means signing in again).
pub async fn meta_mint(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    identity: &str,
    now_ms: i64,
) -> Result<Value, OAuthError> {
    const WHAT: &str = "Meta API key mint";
    let url = endpoints.url(META_MINT_URL);
    let bearer = format!("Bearer {identity}");
    let headers = [
        ("Authorization", bearer.as_str()),
        ("x-api-version", "1.0.0"),
    ];
    let answer = call(
        http,
        WHAT,
        reqwest::Method::POST,
        &url,
        &headers,
        Body::Json(json!({})),
    )
    .await?;
    let Some(key) = answer["api_key"].as_str().filter(|key| !key.is_empty()) else {
        let action = trusted_http_url(&answer["action_url"])
            .map(|url| format!(" Complete setup at {}", crate::support::term::line(&url)))
            .unwrap_or_default();
        return Err(OAuthError::Invalid(format!(
            "Meta did not issue an API key.{action}"
        )));
    };
    Ok(json!({
        "type": "oauth",
        "refresh": identity,
        "access": key,
        "expires": now_ms + META_KEY_LIFETIME_MS,
    }))
}

// ---------------------------------------------------------------------------------------
// Radius

/// 1.6.0's `normalizeRadiusGatewayUrl`: `https://` when no scheme, no trailing slash.
pub fn radius_gateway(value: &str) -> String {
    let lower = value.to_ascii_lowercase();
    let with_scheme = if lower.starts_with("http://") || lower.starts_with("https://") {
        value.to_owned()
    } else {
        format!("https://{value}")
    };
    with_scheme.trim_end_matches('/').to_owned()
}

/// Starts a Radius gateway's device flow (`/v1/oauth/device`).
pub async fn radius_start(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    gateway: &str,
) -> Result<Device, OAuthError> {
    let url = endpoints.url(&format!("{gateway}/v1/oauth/device"));
    let form = [("client_id", RADIUS_CLIENT_ID), ("scope", RADIUS_SCOPE)];
    let device = start(
        http,
        "Radius OAuth device authorization",
        &url,
        &form,
        false,
        None,
    )
    .await?;
    if device.expires_in.is_none() {
        return Err(OAuthError::Invalid(
            "Radius OAuth device authorization response is missing required fields".to_owned(),
        ));
    }
    Ok(device)
}

/// Waits for the Radius device (no wait before the first poll, as 1.6.0).
pub async fn radius_complete(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    gateway: &str,
    device: &Device,
    now_ms: &(dyn Fn() -> i64 + Send + Sync),
) -> Result<Value, OAuthError> {
    let url = endpoints.url(&format!("{gateway}/v1/oauth/token"));
    let answer = poll(http, &url, device, RADIUS_CLIENT_ID, "Radius", false).await?;
    radius_credential(&answer, now_ms(), "Radius token poll")
}

/// `{"type": "oauth", "access", "refresh", "expires" (a minute early), "scope"}`.
pub fn radius_credential(answer: &Value, now_ms: i64, what: &str) -> Result<Value, OAuthError> {
    let mut credential = Map::new();
    credential.insert("type".into(), json!("oauth"));
    credential.insert(
        "access".into(),
        json!(string_field(answer, "access_token", what)?),
    );
    credential.insert(
        "refresh".into(),
        json!(string_field(answer, "refresh_token", what)?),
    );
    credential.insert(
        "expires".into(),
        json!(now_ms + expires_in_ms(answer, what)? - RADIUS_EXPIRY_SKEW_MS),
    );
    if let Some(scope) = answer.get("scope") {
        credential.insert("scope".into(), scope.clone());
    }
    Ok(Value::Object(credential))
}

/// Exchanges a code or refresh token at a Radius gateway's token endpoint.
pub async fn radius_token(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    gateway: &str,
    form: &[(&str, &str)],
    now_ms: i64,
    what: &str,
) -> Result<Value, OAuthError> {
    let url = endpoints.url(&format!("{gateway}/v1/oauth/token"));
    let answer = post_form(http, what, &url, form).await?;
    radius_credential(&answer, now_ms, what)
}

/// The authorization endpoint a Radius gateway names (`GET /v1/oauth`).
pub async fn radius_discovery(
    endpoints: &Endpoints,
    http: &reqwest::Client,
    gateway: &str,
) -> Result<String, OAuthError> {
    const WHAT: &str = "Radius OAuth config";
    let url = endpoints.url(&format!("{gateway}/v1/oauth"));
    let answer = call(http, WHAT, reqwest::Method::GET, &url, &[], Body::None).await?;
    trusted_http_url(&answer["authorizationEndpoint"])
        .ok_or_else(|| OAuthError::Invalid(format!("Invalid Radius OAuth config from {gateway}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xai_keeps_an_unrotated_refresh_token_and_expires_early() {
        let answer = json!({"access_token": "a"});
        let credential = xai_credential(&answer, Some("r0"), 1_000_000, "t").unwrap();
        assert_eq!(credential["refresh"], "r0");
        assert_eq!(credential["expires"], 1_000_000 + 3_600_000 - 300_000);
        assert!(xai_credential(&answer, None, 0, "t").is_err());
    }

    #[test]
    fn radius_gateways_normalize_as_1_6_0() {
        assert_eq!(radius_gateway("radius.pi.dev/"), "https://radius.pi.dev");
        assert_eq!(radius_gateway("http://127.0.0.1:9"), "http://127.0.0.1:9");
    }

    #[test]
    fn intervals_are_at_least_a_second_and_five_by_default() {
        assert_eq!(interval_of(&json!(0)), Duration::from_secs(5));
        assert_eq!(interval_of(&json!(0.2)), Duration::from_secs(1));
        assert_eq!(interval_of(&Value::Null), Duration::from_secs(5));
    }
}
