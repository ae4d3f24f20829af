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
//! `AWS_CONFIG_FILE` (else `~/.aws/config`), INI with `#`/`;` comments. Not carried over: SSO
//! (`sso_session`/`sso_start_url` profiles, whose token cache needs a portal call),
//! `credential_process`, web identity, container and instance metadata credentials; a profile
//! that only has those fails with the SDK's "Could not load credentials" text.

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

/// How a Bedrock call authenticates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AwsAuth {
    /// SigV4 with these keys.
    SigV4(AwsKeys),
    /// A Bedrock API key.
    Bearer(String),
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
        return keys_of(&profile)
            .map(AwsAuth::SigV4)
            .ok_or_else(|| NO_CREDENTIALS.to_owned());
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
    files
        .profile("default")
        .as_ref()
        .and_then(keys_of)
        .map(AwsAuth::SigV4)
        .ok_or_else(|| NO_CREDENTIALS.to_owned())
}

/// The region the shared config gives the active profile (`AWS_PROFILE`, else `default`).
pub fn profile_region(env: &dyn Fn(&str) -> Option<String>, files: &SharedFiles) -> Option<String> {
    let name = env("AWS_PROFILE").unwrap_or_else(|| "default".to_owned());
    files
        .profile(&name)
        .and_then(|profile| profile.get("region").cloned())
        .filter(|region| !region.is_empty())
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
        assert_eq!(key_of(resolve_auth(&with_profile, None, &files())), "K");
        assert_eq!(key_of(resolve_auth(&env_keys, None, &files())), "E");
        assert_eq!(key_of(resolve_auth(&vars(&[]), None, &files())), "D");
        assert_eq!(
            key_of(resolve_auth(
                &vars(&[("AWS_PROFILE", "cfg")]),
                None,
                &files()
            )),
            "C"
        );
        assert_eq!(
            resolve_auth(&vars(&[]), Some("<authenticated>"), &SharedFiles::default()),
            Err(NO_CREDENTIALS.to_owned())
        );
        assert_eq!(
            resolve_auth(&env_keys, Some("ABSK"), &files()),
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
}
