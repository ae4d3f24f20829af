//! AWS credentials and region for Bedrock, resolved as 1.6.0's `bedrock-converse-stream.js`
//! configures the AWS SDK for JavaScript and as that SDK's default chain then finds them, from
//! the provider environment and the shared files' text (`cli` reads them; this module is pure):
//!
//! - `AWS_BEDROCK_SKIP_AUTH=1`: dummy keys (for proxies that need no auth);
//! - a Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`, or the call's key): `Authorization:
//!   Bearer`, no signature;
//! - `AWS_PROFILE`: that profile's keys from the credentials file (`[name]`) or the config
//!   file (`[profile name]`), winning over keys in the environment (the reference's #6957);
//! - `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`);
//! - the `default` profile of the files.
//!
//! The shared files are `AWS_SHARED_CREDENTIALS_FILE` (else `~/.aws/credentials`) and
//! `AWS_CONFIG_FILE` (else `~/.aws/config`), INI with `#`/`;` comments.
//!
//! SSO profiles (`sso_session` with an `[sso-session name]` section, or the legacy
//! `sso_start_url`/`sso_region` in the profile) use the token `aws sso login` cached in
//! `~/.aws/sso/cache/<sha1 of the session name or start URL>.json` (`cli` reads it): an
//! unexpired `accessToken` is exchanged for role credentials at the portal
//! (`GET <portal>/federation/credentials?account_id=…&role_name=…` with
//! `x-amz-sso_bearer_token`; the portal is `https://portal.sso.<sso_region>.amazonaws.com`, or
//! `AWS_ENDPOINT_URL_SSO`), which the client caches until five minutes before they expire.
//!
//! Further sources, as the SDK's default chain (`fromProcess`, `fromTokenFile`,
//! `fromContainerMetadata`) after the profile and environment keys:
//! - a profile's `credential_process`: `cli` runs the command (`KeyResolver::run_command`) and
//!   its JSON (`Version: 1`, `AccessKeyId`, `SecretAccessKey`, `SessionToken`, `Expiration`)
//!   comes in as [`SharedFiles::process_output`];
//! - web identity (`AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`, `AWS_ROLE_SESSION_NAME`):
//!   the token file's text is exchanged at STS (`AssumeRoleWithWebIdentity`, unsigned form
//!   POST; `AWS_ENDPOINT_URL_STS`, else `AWS_ENDPOINT_URL`, else
//!   `https://sts.<region>.amazonaws.com`) for role credentials;
//! - container credentials (`AWS_CONTAINER_CREDENTIALS_FULL_URI`, else
//!   `http://169.254.170.2` + `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`; plain HTTP only to
//!   loopback or the ECS/EKS agent addresses, as the SDK): `GET` with `Authorization` from
//!   `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` (read by `cli`) or
//!   `AWS_CONTAINER_AUTHORIZATION_TOKEN`.
//!
//! Fetched credentials are cached by the client until five minutes before they expire.
//! Not carried over: SSO token refresh with the cached client registration, `role_arn` +
//! `source_profile` chains, instance metadata (IMDS); a profile that only has those fails
//! with the SDK's "Could not load credentials" text.

use std::collections::HashMap;

/// Static keys.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsKeys {
    /// `aws_access_key_id`.
    pub access_key_id: String,
    /// `aws_secret_access_key`.
    pub secret_access_key: String,
    /// `aws_session_token`.
    pub session_token: Option<String>,
}

impl std::fmt::Debug for AwsKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsKeys")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// An SSO role whose credentials the portal gives for a cached token.
#[derive(Clone, PartialEq, Eq)]
pub struct SsoRole {
    /// The portal's base URL.
    pub portal: String,
    /// `sso_account_id`.
    pub account_id: String,
    /// `sso_role_name`.
    pub role_name: String,
    /// The cached `accessToken`.
    pub token: String,
}

impl std::fmt::Debug for SsoRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SsoRole")
            .field("portal", &self.portal)
            .field("account_id", &self.account_id)
            .field("role_name", &self.role_name)
            .finish_non_exhaustive()
    }
}

impl SsoRole {
    /// Returns the portal request's URL (parameters in the SDK's order).
    pub fn url(&self) -> String {
        format!(
            "{}/federation/credentials?account_id={}&role_name={}",
            self.portal.trim_end_matches('/'),
            form_encode(&self.account_id),
            form_encode(&self.role_name)
        )
    }
}

/// A role to assume at STS with a web identity token.
#[derive(Clone, PartialEq, Eq)]
pub struct WebIdentity {
    /// The STS endpoint (no trailing `/`).
    pub endpoint: String,
    /// `AWS_ROLE_ARN`.
    pub role_arn: String,
    /// `AWS_ROLE_SESSION_NAME`, else the SDK's `aws-sdk-js-session-<ms>`.
    pub session_name: String,
    /// The token file's text, trimmed.
    pub token: String,
}

impl std::fmt::Debug for WebIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebIdentity")
            .field("endpoint", &self.endpoint)
            .field("role_arn", &self.role_arn)
            .finish_non_exhaustive()
    }
}

/// The container credentials endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct Container {
    /// The full URL.
    pub url: String,
    /// The `Authorization` header value, if any.
    pub authorization: Option<String>,
}

impl std::fmt::Debug for Container {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Container")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Credentials fetched over HTTP before the call is signed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Remote {
    /// An SSO role at the portal.
    Sso(SsoRole),
    /// A role assumed with a web identity token.
    WebIdentity(WebIdentity),
    /// The container credentials endpoint.
    Container(Container),
}

impl Remote {
    /// What names the credentials in the cache.
    fn cache_key(&self) -> String {
        match self {
            Self::Sso(role) => format!(
                "sso\n{}\n{}\n{}\n{}",
                role.portal, role.account_id, role.role_name, role.token
            ),
            Self::WebIdentity(web) => {
                format!("web\n{}\n{}\n{}", web.endpoint, web.role_arn, web.token)
            }
            Self::Container(container) => format!(
                "container\n{}\n{}",
                container.url,
                container.authorization.as_deref().unwrap_or("")
            ),
        }
    }

    /// The host a failure names.
    fn origin(&self) -> &str {
        match self {
            Self::Sso(role) => &role.portal,
            Self::WebIdentity(web) => &web.endpoint,
            Self::Container(container) => &container.url,
        }
    }
}

/// How a Bedrock call authenticates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AwsAuth {
    /// SigV4 with these keys.
    SigV4(AwsKeys),
    /// A Bedrock API key.
    Bearer(String),
    /// SigV4 with credentials fetched first.
    Remote(Remote),
}

/// One INI file: section name → key → value (keys lower-cased).
pub type Ini = HashMap<String, HashMap<String, String>>;

/// Parses an AWS shared file (`[section]`, `key = value`, `#`/`;` comment lines).
pub fn parse_ini(text: &str) -> Ini {
    let mut out = Ini::new();
    let mut section: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
            out.entry(name.clone()).or_default();
            section = Some(name);
            continue;
        }
        if let (Some(section), Some((key, value))) = (&section, line.split_once('=')) {
            out.entry(section.clone())
                .or_default()
                .insert(key.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    out
}

/// The shared files' contents, `None` when absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedFiles {
    /// The credentials file.
    pub credentials: Option<String>,
    /// The config file.
    pub config: Option<String>,
    /// The SSO token cache file of the active profile ([`sso_cache_file`]).
    pub sso_token: Option<String>,
    /// The stdout of the active profile's `credential_process` ([`credential_process`]).
    pub process_output: Option<String>,
    /// The text of `AWS_WEB_IDENTITY_TOKEN_FILE`.
    pub web_identity_token: Option<String>,
    /// The text of `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`.
    pub container_token: Option<String>,
}

impl SharedFiles {
    /// Returns a profile's settings: the credentials file's `[name]` over the config file's
    /// `[profile name]` (`[default]` in both for `default`).
    pub fn profile(&self, name: &str) -> Option<HashMap<String, String>> {
        let credentials = self
            .credentials
            .as_deref()
            .map(parse_ini)
            .unwrap_or_default();
        let config = self.config.as_deref().map(parse_ini).unwrap_or_default();
        let config_section = if name == "default" {
            config
                .get("default")
                .or_else(|| config.get("profile default"))
        } else {
            config.get(&format!("profile {name}"))
        };
        let credentials_section = credentials.get(name);
        if config_section.is_none() && credentials_section.is_none() {
            return None;
        }
        let mut merged = config_section.cloned().unwrap_or_default();
        merged.extend(credentials_section.cloned().unwrap_or_default());
        Some(merged)
    }
}

/// The SSO settings of a profile: the region, the cache key (session name or start URL),
/// the account and the role.
fn sso_of(
    files: &SharedFiles,
    profile: &HashMap<String, String>,
) -> Option<(String, String, String, String)> {
    let account = profile.get("sso_account_id")?.clone();
    let role = profile.get("sso_role_name")?.clone();
    if let Some(session) = profile.get("sso_session") {
        let config = files.config.as_deref().map(parse_ini).unwrap_or_default();
        let section = config.get(&format!("sso-session {session}"))?;
        let region = section.get("sso_region")?.clone();
        return Some((region, session.clone(), account, role));
    }
    let region = profile.get("sso_region")?.clone();
    let start_url = profile.get("sso_start_url")?.clone();
    Some((region, start_url, account, role))
}

/// The name of the active profile's SSO token cache file (`<sha1 hex>.json` under
/// `~/.aws/sso/cache/`), when the profile is an SSO one.
pub fn sso_cache_file(env: &dyn Fn(&str) -> Option<String>, files: &SharedFiles) -> Option<String> {
    let name = env("AWS_PROFILE").unwrap_or_else(|| "default".to_owned());
    let profile = files.profile(&name)?;
    let (_, key, _, _) = sso_of(files, &profile)?;
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, key.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    Some(format!("{hex}.json"))
}

/// The `credential_process` command `cli` should run: the active profile's (`AWS_PROFILE`,
/// else `default` when the environment has no keys), when it has no static keys.
pub fn credential_process(
    env: &dyn Fn(&str) -> Option<String>,
    files: &SharedFiles,
) -> Option<String> {
    let name = match env("AWS_PROFILE") {
        Some(name) => name,
        None if env("AWS_ACCESS_KEY_ID").is_some() && env("AWS_SECRET_ACCESS_KEY").is_some() => {
            return None;
        }
        None => "default".to_owned(),
    };
    let profile = files.profile(&name)?;
    if keys_of(&profile).is_some() {
        return None;
    }
    profile
        .get("credential_process")
        .filter(|command| !command.trim().is_empty())
        .cloned()
}

/// Reads a `credential_process` answer (the SDK's `getValidatedProcessCredentials`).
fn process_keys(output: Option<&str>, now_ms: i64) -> Result<AwsKeys, String> {
    let json = output
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        .ok_or("credential_process did not return credentials (no JSON on its stdout)")?;
    if json.get("Version").and_then(serde_json::Value::as_i64) != Some(1) {
        return Err("credential_process did not return Version 1.".to_owned());
    }
    let get = |key: &str| {
        json.get(key)
            .and_then(serde_json::Value::as_str)
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
    };
    if let Some(expiration) = get("Expiration") {
        let expires = chrono::DateTime::parse_from_rfc3339(&expiration)
            .map_err(|_| "credential_process returned an unreadable Expiration.".to_owned())?;
        if expires.timestamp_millis() <= now_ms {
            return Err("credential_process returned expired credentials.".to_owned());
        }
    }
    match (get("AccessKeyId"), get("SecretAccessKey")) {
        (Some(access_key_id), Some(secret_access_key)) => Ok(AwsKeys {
            access_key_id,
            secret_access_key,
            session_token: get("SessionToken"),
        }),
        _ => Err("credential_process did not return AccessKeyId and SecretAccessKey.".to_owned()),
    }
}

/// The web identity role of the environment, when `AWS_WEB_IDENTITY_TOKEN_FILE` and
/// `AWS_ROLE_ARN` are set.
fn web_identity(
    env: &dyn Fn(&str) -> Option<String>,
    files: &SharedFiles,
    now_ms: i64,
) -> Option<Result<WebIdentity, String>> {
    let path = env("AWS_WEB_IDENTITY_TOKEN_FILE")?;
    let role_arn = env("AWS_ROLE_ARN")?;
    let Some(token) = files
        .web_identity_token
        .as_deref()
        .map(str::trim)
        .filter(|token| !token.is_empty())
    else {
        return Some(Err(format!(
            "Could not read the web identity token file {path}"
        )));
    };
    let region = env("AWS_REGION")
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|| "us-east-1".to_owned());
    let endpoint = env("AWS_ENDPOINT_URL_STS")
        .or_else(|| env("AWS_ENDPOINT_URL"))
        .unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com"));
    Some(Ok(WebIdentity {
        endpoint: endpoint.trim_end_matches('/').to_owned(),
        role_arn,
        session_name: env("AWS_ROLE_SESSION_NAME")
            .unwrap_or_else(|| format!("aws-sdk-js-session-{now_ms}")),
        token: token.to_owned(),
    }))
}

/// The container credentials endpoint of the environment, when one is set.
fn container(
    env: &dyn Fn(&str) -> Option<String>,
    files: &SharedFiles,
) -> Option<Result<Container, String>> {
    let url = match (
        env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"),
        env("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
    ) {
        (Some(relative), _) => format!("http://169.254.170.2{relative}"),
        (None, Some(full)) => full,
        (None, None) => return None,
    };
    let parsed = match reqwest::Url::parse(&url) {
        Ok(parsed) => parsed,
        Err(_) => {
            return Some(Err(format!(
                "{url} is not a valid container credentials URL"
            )));
        }
    };
    let host = parsed.host_str().unwrap_or("");
    let allowed_http = matches!(
        host,
        "localhost" | "169.254.170.2" | "169.254.170.23" | "[fd00:ec2::23]"
    ) || host.starts_with("127.")
        || host == "[::1]";
    if parsed.scheme() != "https" && !(parsed.scheme() == "http" && allowed_http) {
        return Some(Err(format!(
            "{host} is not a valid container metadata service hostname"
        )));
    }
    let authorization = files
        .container_token
        .as_deref()
        .map(str::trim)
        .filter(|token| !token.is_empty())
        .map(str::to_owned)
        .or_else(|| env("AWS_CONTAINER_AUTHORIZATION_TOKEN"));
    Some(Ok(Container { url, authorization }))
}

/// The SDK's text for a missing or expired SSO token.
pub const SSO_EXPIRED: &str = "The SSO session associated with this profile has expired or is otherwise invalid. To refresh this SSO session run aws sso login with the corresponding profile.";

/// The SSO role of a profile, with its cached token checked against `now_ms`.
fn sso_role(
    env: &dyn Fn(&str) -> Option<String>,
    files: &SharedFiles,
    profile: &HashMap<String, String>,
    now_ms: i64,
) -> Option<Result<SsoRole, String>> {
    let (region, _, account_id, role_name) = sso_of(files, profile)?;
    let token = files
        .sso_token
        .as_deref()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok());
    let access = token
        .as_ref()
        .and_then(|token| token.get("accessToken"))
        .and_then(serde_json::Value::as_str)
        .filter(|token| !token.is_empty());
    let expires = token
        .as_ref()
        .and_then(|token| token.get("expiresAt"))
        .and_then(serde_json::Value::as_str)
        .and_then(|text| chrono::DateTime::parse_from_rfc3339(text).ok())
        .map(|at| at.timestamp_millis());
    Some(match (access, expires) {
        (Some(token), Some(expires)) if now_ms < expires => Ok(SsoRole {
            portal: env("AWS_ENDPOINT_URL_SSO")
                .unwrap_or_else(|| format!("https://portal.sso.{region}.amazonaws.com")),
            account_id,
            role_name,
            token: token.to_owned(),
        }),
        _ => Err(SSO_EXPIRED.to_owned()),
    })
}

/// Reads the portal's answer (`roleCredentials`) into keys and their expiry (Unix ms).
pub fn parse_role_credentials(status: u16, body: &str) -> Result<(AwsKeys, i64), String> {
    let json = serde_json::from_str::<serde_json::Value>(body).unwrap_or_default();
    if !(200..300).contains(&status) {
        let message = json
            .get("message")
            .or_else(|| json.get("Message"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("Unknown error");
        return Err(format!(
            "SSO credentials request failed ({status}): {message}"
        ));
    }
    let creds = &json["roleCredentials"];
    let get = |key: &str| {
        creds
            .get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    match (get("accessKeyId"), get("secretAccessKey")) {
        (Some(access_key_id), Some(secret_access_key)) => Ok((
            AwsKeys {
                access_key_id,
                secret_access_key,
                session_token: get("sessionToken"),
            },
            creds
                .get("expiration")
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(0),
        )),
        _ => Err("The SSO portal answered without role credentials".to_owned()),
    }
}

fn keys_of(profile: &HashMap<String, String>) -> Option<AwsKeys> {
    let get = |key: &str| profile.get(key).filter(|value| !value.is_empty()).cloned();
    Some(AwsKeys {
        access_key_id: get("aws_access_key_id")?,
        secret_access_key: get("aws_secret_access_key")?,
        session_token: get("aws_session_token"),
    })
}

/// The SDK's text when no source gives credentials.
pub const NO_CREDENTIALS: &str = "Could not load credentials from any providers";

/// Resolves the auth of one call. `env` looks up the provider environment; `api_key` is the
/// call's key (placeholders such as `<authenticated>` are no key).
pub fn resolve_auth(
    env: &dyn Fn(&str) -> Option<String>,
    api_key: Option<&str>,
    files: &SharedFiles,
    now_ms: i64,
) -> Result<AwsAuth, String> {
    let skip_auth = env("AWS_BEDROCK_SKIP_AUTH").as_deref() == Some("1");
    if skip_auth {
        return Ok(AwsAuth::SigV4(AwsKeys {
            access_key_id: "dummy-access-key".into(),
            secret_access_key: "dummy-secret-key".into(),
            session_token: None,
        }));
    }
    let key = api_key
        .map(str::trim)
        .filter(|key| !(key.is_empty() || key.starts_with('<') && key.ends_with('>')))
        .map(str::to_owned)
        .or_else(|| env("AWS_BEARER_TOKEN_BEDROCK"));
    if let Some(token) = key {
        return Ok(AwsAuth::Bearer(token));
    }
    if let Some(name) = env("AWS_PROFILE") {
        let profile = files.profile(&name).ok_or_else(|| {
            format!("Profile {name} could not be found or parsed in shared credentials file.")
        })?;
        return profile_auth(env, files, &profile, now_ms)
            .unwrap_or_else(|| Err(NO_CREDENTIALS.to_owned()));
    }
    if let (Some(access_key_id), Some(secret_access_key)) =
        (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"))
    {
        return Ok(AwsAuth::SigV4(AwsKeys {
            access_key_id,
            secret_access_key,
            session_token: env("AWS_SESSION_TOKEN"),
        }));
    }
    if let Some(auth) = files
        .profile("default")
        .and_then(|profile| profile_auth(env, files, &profile, now_ms))
    {
        return auth;
    }
    if let Some(web) = web_identity(env, files, now_ms) {
        return web.map(|web| AwsAuth::Remote(Remote::WebIdentity(web)));
    }
    if let Some(container) = container(env, files) {
        return container.map(|container| AwsAuth::Remote(Remote::Container(container)));
    }
    Err(NO_CREDENTIALS.to_owned())
}

/// What a profile gives: its keys, its SSO role, its `credential_process`; `None` for none.
fn profile_auth(
    env: &dyn Fn(&str) -> Option<String>,
    files: &SharedFiles,
    profile: &HashMap<String, String>,
    now_ms: i64,
) -> Option<Result<AwsAuth, String>> {
    if let Some(keys) = keys_of(profile) {
        return Some(Ok(AwsAuth::SigV4(keys)));
    }
    if let Some(role) = sso_role(env, files, profile, now_ms) {
        return Some(role.map(|role| AwsAuth::Remote(Remote::Sso(role))));
    }
    profile
        .contains_key("credential_process")
        .then(|| process_keys(files.process_output.as_deref(), now_ms).map(AwsAuth::SigV4))
}

/// The region the shared config gives the active profile (`AWS_PROFILE`, else `default`).
pub fn profile_region(env: &dyn Fn(&str) -> Option<String>, files: &SharedFiles) -> Option<String> {
    let name = env("AWS_PROFILE").unwrap_or_else(|| "default".to_owned());
    files
        .profile(&name)
        .and_then(|profile| profile.get("region").cloned())
        .filter(|region| !region.is_empty())
}

/// SSO role credentials per token and role, shared by every call of an
/// [`crate::ai::AiClient`].
#[derive(Debug, Default)]
pub struct RoleCache {
    roles: std::sync::Mutex<HashMap<String, (AwsKeys, i64)>>,
}

fn lock_roles(cache: &RoleCache) -> std::sync::MutexGuard<'_, HashMap<String, (AwsKeys, i64)>> {
    match cache.roles.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// A role's credentials are fetched again when less than this is left of them.
const ROLE_REFRESH_MS: i64 = 5 * 60 * 1000;

/// Why no role credentials came.
#[derive(Debug)]
pub enum RoleFailure {
    /// The caller cancelled.
    Aborted,
    /// The portal refused or could not be reached.
    Failed(String),
}

/// Reads an STS `AssumeRoleWithWebIdentity` answer (XML) into keys and their expiry.
pub fn parse_sts_credentials(status: u16, body: &str) -> Result<(AwsKeys, i64), String> {
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        let start = body.find(&open)? + open.len();
        let end = body[start..].find(&close)? + start;
        Some(body[start..end].trim().to_owned())
    };
    if !(200..300).contains(&status) {
        let code = tag("Code").unwrap_or_else(|| "UnknownError".to_owned());
        let message = tag("Message").unwrap_or_default();
        return Err(format!(
            "AssumeRoleWithWebIdentity failed ({status}): {code}: {message}"
        ));
    }
    let expires = tag("Expiration")
        .and_then(|text| chrono::DateTime::parse_from_rfc3339(&text).ok())
        .map_or(0, |at| at.timestamp_millis());
    match (tag("AccessKeyId"), tag("SecretAccessKey")) {
        (Some(access_key_id), Some(secret_access_key)) => Ok((
            AwsKeys {
                access_key_id,
                secret_access_key,
                session_token: tag("SessionToken"),
            },
            expires,
        )),
        _ => Err("STS answered without credentials".to_owned()),
    }
}

/// Reads a container credentials answer (`AccessKeyId`, `SecretAccessKey`, `Token`,
/// `Expiration`) into keys and their expiry.
pub fn parse_container_credentials(status: u16, body: &str) -> Result<(AwsKeys, i64), String> {
    if !(200..300).contains(&status) {
        return Err(format!("Container credentials request failed ({status})"));
    }
    let json = serde_json::from_str::<serde_json::Value>(body).unwrap_or_default();
    let get = |key: &str| {
        json.get(key)
            .and_then(serde_json::Value::as_str)
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
    };
    let expires = get("Expiration")
        .and_then(|text| chrono::DateTime::parse_from_rfc3339(&text).ok())
        .map_or(0, |at| at.timestamp_millis());
    match (get("AccessKeyId"), get("SecretAccessKey")) {
        (Some(access_key_id), Some(secret_access_key)) => Ok((
            AwsKeys {
                access_key_id,
                secret_access_key,
                session_token: get("Token"),
            },
            expires,
        )),
        _ => Err("The container credentials endpoint answered without credentials".to_owned()),
    }
}

/// Percent-encodes a query or form value (unreserved bytes kept, as the SDK's query
/// serializer).
fn form_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Returns the remote source's credentials: cached, or fetched (then cached).
pub async fn role_keys(
    http: &reqwest::Client,
    cache: &RoleCache,
    remote: &Remote,
    now_ms: i64,
    timeout: std::time::Duration,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<AwsKeys, RoleFailure> {
    let key = remote.cache_key();
    if let Some((keys, expires)) = lock_roles(cache).get(&key)
        && now_ms < expires - ROLE_REFRESH_MS
    {
        return Ok(keys.clone());
    }
    let request = match remote {
        Remote::Sso(role) => http
            .get(role.url())
            .header("x-amz-sso_bearer_token", &role.token),
        Remote::WebIdentity(web) => http
            .post(format!("{}/", web.endpoint))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!(
                "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn={}&RoleSessionName={}&WebIdentityToken={}",
                form_encode(&web.role_arn),
                form_encode(&web.session_name),
                form_encode(&web.token)
            )),
        Remote::Container(container) => {
            let request = http.get(&container.url);
            match &container.authorization {
                Some(token) => request.header("authorization", token),
                None => request,
            }
        }
    };
    let fetch = async {
        let response = request.send().await?;
        let status = response.status().as_u16();
        Ok::<_, reqwest::Error>((status, response.text().await?))
    };
    let outcome = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(RoleFailure::Aborted),
        outcome = tokio::time::timeout(timeout, fetch) => outcome,
    };
    match outcome {
        Ok(Ok((status, body))) => {
            let parsed = match remote {
                Remote::Sso(_) => parse_role_credentials(status, &body),
                Remote::WebIdentity(_) => parse_sts_credentials(status, &body),
                Remote::Container(_) => parse_container_credentials(status, &body),
            };
            let (keys, expires) = parsed.map_err(RoleFailure::Failed)?;
            lock_roles(cache).insert(key, (keys.clone(), expires));
            Ok(keys)
        }
        Ok(Err(err)) => Err(RoleFailure::Failed(format!(
            "request to {} failed, reason: {err}",
            remote.origin()
        ))),
        Err(_) => Err(RoleFailure::Failed("Request timed out.".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> SharedFiles {
        SharedFiles {
            credentials: Some(
                "# c\n[default]\naws_access_key_id = D\naws_secret_access_key = DS\n\n[dev]\naws_access_key_id=K\naws_secret_access_key = S\naws_session_token = T\n".into(),
            ),
            config: Some("[default]\nregion = us-east-2\n[profile dev]\nregion = eu-west-1\n[profile cfg]\naws_access_key_id = C\naws_secret_access_key = CS\n".into()),
            sso_token: None,
            ..SharedFiles::default()
        }
    }

    #[test]
    fn the_chain_prefers_a_named_profile_then_env_keys_then_default() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| (*value).to_owned())
            }
        };
        let env_keys = vars(&[("AWS_ACCESS_KEY_ID", "E"), ("AWS_SECRET_ACCESS_KEY", "ES")]);
        let with_profile = vars(&[
            ("AWS_PROFILE", "dev"),
            ("AWS_ACCESS_KEY_ID", "E"),
            ("AWS_SECRET_ACCESS_KEY", "ES"),
        ]);
        let key_of = |auth: Result<AwsAuth, String>| match auth {
            Ok(AwsAuth::SigV4(keys)) => keys.access_key_id,
            other => format!("{other:?}"),
        };
        assert_eq!(key_of(resolve_auth(&with_profile, None, &files(), 0)), "K");
        assert_eq!(key_of(resolve_auth(&env_keys, None, &files(), 0)), "E");
        assert_eq!(key_of(resolve_auth(&vars(&[]), None, &files(), 0)), "D");
        assert_eq!(
            key_of(resolve_auth(
                &vars(&[("AWS_PROFILE", "cfg")]),
                None,
                &files(),
                0
            )),
            "C"
        );
        assert_eq!(
            resolve_auth(
                &vars(&[]),
                Some("<authenticated>"),
                &SharedFiles::default(),
                0
            ),
            Err(NO_CREDENTIALS.to_owned())
        );
        assert_eq!(
            resolve_auth(&env_keys, Some("ABSK"), &files(), 0),
            Ok(AwsAuth::Bearer("ABSK".into()))
        );
        assert_eq!(
            profile_region(&vars(&[("AWS_PROFILE", "dev")]), &files()).as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(
            profile_region(&vars(&[]), &files()).as_deref(),
            Some("us-east-2")
        );
    }

    #[test]
    fn sso_profiles_use_the_cached_token_until_it_expires() {
        let mut files = SharedFiles {
            credentials: None,
            config: Some("[profile sso]\nsso_session = corp\nsso_account_id = 111122223333\nsso_role_name = Dev\n[sso-session corp]\nsso_region = us-east-1\nsso_start_url = https://corp.awsapps.com/start\n".into()),
            sso_token: Some(r#"{"accessToken":"tok","expiresAt":"2026-01-01T01:00:00Z"}"#.into()),
            ..SharedFiles::default()
        };
        let env = |name: &str| (name == "AWS_PROFILE").then(|| "sso".to_owned());
        // sha1("corp"), as the AWS CLI names the cache file.
        assert_eq!(
            sso_cache_file(&env, &files).as_deref(),
            Some("ee0bfd2552fbd840c02cc48b6e823320543c450f.json")
        );
        let before = 1_767_225_600_000;
        match resolve_auth(&env, None, &files, before) {
            Ok(AwsAuth::Remote(Remote::Sso(role))) => assert_eq!(
                role.url(),
                "https://portal.sso.us-east-1.amazonaws.com/federation/credentials?account_id=111122223333&role_name=Dev"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            resolve_auth(&env, None, &files, before + 3_600_000),
            Err(SSO_EXPIRED.to_owned())
        );
        files.sso_token = None;
        assert_eq!(
            resolve_auth(&env, None, &files, before),
            Err(SSO_EXPIRED.to_owned())
        );
    }

    #[test]
    fn web_identity_and_container_sources_follow_the_profile_and_env_keys() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| (*value).to_owned())
            }
        };
        let files = SharedFiles {
            web_identity_token: Some(" tok \n".into()),
            container_token: Some("file-token\n".into()),
            ..SharedFiles::default()
        };
        let web = vars(&[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"),
            ("AWS_ROLE_ARN", "arn:r"),
            ("AWS_REGION", "eu-west-3"),
            ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds"),
        ]);
        match resolve_auth(&web, None, &files, 42) {
            Ok(AwsAuth::Remote(Remote::WebIdentity(identity))) => {
                assert_eq!(identity.endpoint, "https://sts.eu-west-3.amazonaws.com");
                assert_eq!(identity.session_name, "aws-sdk-js-session-42");
                assert_eq!(identity.token, "tok");
            }
            other => panic!("{other:?}"),
        }
        let container = vars(&[("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds")]);
        match resolve_auth(&container, None, &files, 0) {
            Ok(AwsAuth::Remote(Remote::Container(found))) => {
                assert_eq!(found.url, "http://169.254.170.2/v2/creds");
                assert_eq!(found.authorization.as_deref(), Some("file-token"));
            }
            other => panic!("{other:?}"),
        }
        // Plain HTTP only to loopback and the agents' addresses.
        let remote_http = vars(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://example.com/c")]);
        assert!(
            resolve_auth(&remote_http, None, &files, 0).is_err_and(
                |error| error.contains("not a valid container metadata service hostname")
            )
        );
        // Environment keys come first.
        let keys = vars(&[
            ("AWS_ACCESS_KEY_ID", "E"),
            ("AWS_SECRET_ACCESS_KEY", "ES"),
            ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds"),
        ]);
        assert!(matches!(
            resolve_auth(&keys, None, &files, 0),
            Ok(AwsAuth::SigV4(_))
        ));
    }

    #[test]
    fn sts_and_container_answers_parse_and_refusals_name_the_failure() {
        let (keys, expires) = parse_sts_credentials(
            200,
            "<Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>S</SecretAccessKey><SessionToken>T</SessionToken><Expiration>2026-01-01T00:00:00Z</Expiration></Credentials>",
        )
        .unwrap();
        assert_eq!(
            (
                keys.access_key_id.as_str(),
                keys.session_token.as_deref(),
                expires
            ),
            ("A", Some("T"), 1_767_225_600_000)
        );
        assert_eq!(
            parse_sts_credentials(
                403,
                "<ErrorResponse><Error><Code>AccessDenied</Code><Message>Not authorized</Message></Error></ErrorResponse>"
            )
            .unwrap_err(),
            "AssumeRoleWithWebIdentity failed (403): AccessDenied: Not authorized"
        );
        let (keys, _) = parse_container_credentials(
            200,
            r#"{"AccessKeyId":"A","SecretAccessKey":"S","Token":"T","Expiration":"2026-01-01T00:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(keys.session_token.as_deref(), Some("T"));
        assert!(process_keys(Some(r#"{"Version":2}"#), 0).is_err());
        assert!(
            process_keys(
                Some(r#"{"Version":1,"AccessKeyId":"A","SecretAccessKey":"S"}"#),
                0
            )
            .is_ok()
        );
    }
}
