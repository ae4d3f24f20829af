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
//! Not carried over: token refresh with the cached client registration, `credential_process`,
//! web identity, container and instance metadata credentials; a profile that only has those
//! fails with the SDK's "Could not load credentials" text.

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
        let encode = |text: &str| {
            text.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect::<String>()
        };
        format!(
            "{}/federation/credentials?account_id={}&role_name={}",
            self.portal.trim_end_matches('/'),
            encode(&self.account_id),
            encode(&self.role_name)
        )
    }
}

/// How a Bedrock call authenticates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AwsAuth {
    /// SigV4 with these keys.
    SigV4(AwsKeys),
    /// A Bedrock API key.
    Bearer(String),
    /// SigV4 with an SSO role's credentials, fetched first.
    Sso(SsoRole),
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
        if let Some(keys) = keys_of(&profile) {
            return Ok(AwsAuth::SigV4(keys));
        }
        return match sso_role(env, files, &profile, now_ms) {
            Some(role) => role.map(AwsAuth::Sso),
            None => Err(NO_CREDENTIALS.to_owned()),
        };
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
    let Some(profile) = files.profile("default") else {
        return Err(NO_CREDENTIALS.to_owned());
    };
    if let Some(keys) = keys_of(&profile) {
        return Ok(AwsAuth::SigV4(keys));
    }
    match sso_role(env, files, &profile, now_ms) {
        Some(role) => role.map(AwsAuth::Sso),
        None => Err(NO_CREDENTIALS.to_owned()),
    }
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

/// Returns the role's credentials: cached, or fetched from the portal (then cached).
pub async fn role_keys(
    http: &reqwest::Client,
    cache: &RoleCache,
    role: &SsoRole,
    now_ms: i64,
    timeout: std::time::Duration,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<AwsKeys, RoleFailure> {
    let key = format!(
        "{}\n{}\n{}\n{}",
        role.portal, role.account_id, role.role_name, role.token
    );
    if let Some((keys, expires)) = lock_roles(cache).get(&key)
        && now_ms < expires - ROLE_REFRESH_MS
    {
        return Ok(keys.clone());
    }
    let fetch = async {
        let response = http
            .get(role.url())
            .header("x-amz-sso_bearer_token", &role.token)
            .send()
            .await?;
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
            let (keys, expires) =
                parse_role_credentials(status, &body).map_err(RoleFailure::Failed)?;
            lock_roles(cache).insert(key, (keys.clone(), expires));
            Ok(keys)
        }
        Ok(Err(err)) => Err(RoleFailure::Failed(format!(
            "request to {} failed, reason: {err}",
            role.portal
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
        };
        let env = |name: &str| (name == "AWS_PROFILE").then(|| "sso".to_owned());
        // sha1("corp"), as the AWS CLI names the cache file.
        assert_eq!(
            sso_cache_file(&env, &files).as_deref(),
            Some("ee0bfd2552fbd840c02cc48b6e823320543c450f.json")
        );
        let before = 1_767_225_600_000;
        match resolve_auth(&env, None, &files, before) {
            Ok(AwsAuth::Sso(role)) => assert_eq!(
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
}
