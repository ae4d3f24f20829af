//! `pi auth check`, `pi auth print-api-key` and `pi auth print-bearer-token` (1.6.0's
//! `cli/auth-command.js`, `auth-check.js`, `credential-print.js`): whether a provider's
//! credential is ready, and the resolved credential for an external client.
//!
//! `check` prints `ready`, `not_ready` or `invalid` (with `--json`
//! `{"status", "provider", "authType" | "reason", "credentials"?}`) and exits 0, 1 or 2;
//! an OAuth token about to expire is refreshed unless `--no-refresh`. The printing commands
//! write the secret to stdout and exit 1 with `Error: …` on stderr when there is none.

use std::process::ExitCode;

use anyhow::Result;
use serde_json::{Map, Value, json};

use crate::ai::auth::Credentials;
use crate::ai::models::ModelRegistry;
use crate::ai::oauth::OAuthProvider;
use crate::cli::config::Env;
use crate::cli::keys;

/// Which command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Check,
    ApiKey,
    BearerToken,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Check => "auth check",
            Self::ApiKey => "auth print-api-key",
            Self::BearerToken => "auth print-bearer-token",
        }
    }

    fn usage(self) -> &'static str {
        match self {
            Self::Check => {
                "pi auth check --provider <provider> [--json] [--credentials] [--no-refresh]"
            }
            Self::ApiKey => "pi auth print-api-key --provider <provider> [--model <model>]",
            Self::BearerToken => {
                "pi auth print-bearer-token --provider <provider> [--model <model>] [--min-expiry <duration>]"
            }
        }
    }
}

/// 1.6.0's default `--min-expiry`: half an hour.
const DEFAULT_MIN_EXPIRY_MS: i64 = 30 * 60_000;

/// The parsed command line.
#[derive(Debug, Default)]
struct Options {
    provider: Option<String>,
    model: Option<String>,
    json: bool,
    credentials: bool,
    no_refresh: bool,
    min_expiry_ms: Option<i64>,
    positional: bool,
}

/// Whether `word` (the word after `auth`) is one of these commands.
pub fn is_command(word: &str) -> bool {
    kind_of(word).is_some()
}

fn kind_of(word: &str) -> Option<Kind> {
    match word {
        "check" => Some(Kind::Check),
        "print-api-key" => Some(Kind::ApiKey),
        "print-bearer-token" => Some(Kind::BearerToken),
        _ => None,
    }
}

/// A failure: the message for stderr and the exit status.
struct Failure(String, u8);

fn error(message: impl Into<String>, code: u8) -> Failure {
    Failure(message.into(), code)
}

/// `--min-expiry`: digits and `ms`, `s`, `m` or `h`.
fn duration_ms(text: &str) -> Option<i64> {
    let lower = text.to_ascii_lowercase();
    let split = lower.find(|c: char| !c.is_ascii_digit())?;
    let (digits, unit) = lower.split_at(split);
    let amount: i64 = digits.parse().ok()?;
    let factor = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    amount.checked_mul(factor)
}

fn parse(kind: Kind, args: &[String]) -> Result<Options, Failure> {
    let mut options = Options::default();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((flag, value)) if word.starts_with("--") => (flag, Some(value.to_owned())),
            _ => (word.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| words.next().cloned())
                .ok_or_else(|| error(format!("{name} needs a value"), 1))
        };
        match flag {
            "--min-expiry" => {
                if kind != Kind::BearerToken {
                    return Err(error(
                        "--min-expiry is only supported by print-bearer-token",
                        1,
                    ));
                }
                let text = value("--min-expiry")?;
                options.min_expiry_ms = Some(duration_ms(&text).ok_or_else(|| {
                    error("--min-expiry must use a duration such as 30m or 1h", 1)
                })?);
            }
            "--json" | "--credentials" | "--no-refresh" => {
                if kind != Kind::Check {
                    return Err(error(format!("{flag} is only supported by auth check"), 1));
                }
                match flag {
                    "--json" => options.json = true,
                    "--credentials" => options.credentials = true,
                    _ => options.no_refresh = true,
                }
            }
            "--provider" => options.provider = Some(value("--provider")?),
            "--model" => options.model = Some(value("--model")?),
            other if other.starts_with('-') && other.len() > 1 => {
                let name = other.trim_start_matches('-');
                return Err(error(
                    format!(
                        "Unknown option --{} for \"{}\".\nUse \"pi --help\" or \"{}\".",
                        crate::support::term::line(name),
                        kind.name(),
                        kind.usage()
                    ),
                    1,
                ));
            }
            _ => options.positional = true,
        }
    }
    options.provider = options
        .provider
        .take()
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty());
    options.model = options
        .model
        .take()
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty());
    Ok(options)
}

/// Runs `pi auth check|print-api-key|print-bearer-token …` (`args`: from the command word).
pub fn run(args: &[String], env: Env) -> Result<ExitCode> {
    let Some(kind) = args.first().and_then(|word| kind_of(word)) else {
        return Ok(ExitCode::from(1));
    };
    let outcome = parse(kind, &args[1..]).and_then(|options| {
        let status_code = if kind == Kind::Check { 2 } else { 1 };
        if options.positional {
            return Err(error(
                "Auth commands only accept --provider and --model",
                status_code,
            ));
        }
        if options.provider.is_none() && options.model.is_none() {
            return Err(error(
                if kind == Kind::Check {
                    "Auth checks require --provider <provider> or --model <model>"
                } else {
                    "Credential printing requires --provider <provider> or --model <model>"
                },
                status_code,
            ));
        }
        let registry = keys::load_model_registry(&env);
        if kind == Kind::Check {
            let credentials = if options.no_refresh {
                // Nothing is written: 1.6.0's read-only storage.
                Credentials::new(
                    crate::ai::auth::AuthFile::parse(
                        std::fs::read_to_string(env.agent_dir().join("auth.json"))
                            .ok()
                            .as_deref(),
                    ),
                    std::sync::Arc::new(keys::ShellKeyResolver::new(&env)),
                    env.clock(),
                )
            } else {
                keys::load_credentials(&env, env.clock())
            };
            let (result, code) = check(&options, &registry, &credentials);
            println!("{result}");
            return Ok(code);
        }
        let credentials = keys::load_credentials(&env, env.clock());
        let value = print_credential(kind, &options, &registry, &credentials)?;
        println!("{value}");
        Ok(0)
    });
    match outcome {
        Ok(code) => Ok(ExitCode::from(code)),
        Err(Failure(message, code)) => {
            // 1.6.0 shows an unknown option with its usage, without the `Error:` prefix.
            let prefix = if message.starts_with("Unknown option") {
                ""
            } else {
                "Error: "
            };
            eprintln!("{prefix}{}", crate::support::term::text(&message));
            Ok(ExitCode::from(code))
        }
    }
}

/// Whether the registry (or the sign-ins) know the provider.
fn known_provider(registry: &ModelRegistry, provider: &str) -> bool {
    registry.providers().contains(&provider) || OAuthProvider::from_id(provider).is_some()
}

/// The stored credential's `type` for the provider, if `auth.json` has one.
fn stored_type(credentials: &Credentials, provider: &str) -> Option<String> {
    credentials
        .stored()
        .into_iter()
        .find(|(stored, _, _)| stored == provider)
        .map(|(_, kind, _)| kind)
}

/// The provider's key as a request resolves it (a `models.json` `apiKey` included); for an
/// OAuth sign-in its access token, refreshed when it is about to expire.
fn resolve_key(
    registry: &ModelRegistry,
    credentials: &Credentials,
    provider: &str,
) -> Result<Option<String>, crate::ai::AiError> {
    match registry
        .provider_request_config(provider)
        .and_then(|config| config.api_key.as_deref())
    {
        Some(configured) => credentials.api_key_configured(provider, configured),
        None => credentials.api_key(provider),
    }
    .map(|key| key.filter(|key| !key.is_empty()))
}

/// `pi auth check`: the line to print and the exit status.
fn check(options: &Options, registry: &ModelRegistry, credentials: &Credentials) -> (String, u8) {
    let requested = options
        .provider
        .clone()
        .or_else(|| options.model.clone())
        .unwrap_or_default();
    let result = check_result(options, registry, credentials).unwrap_or_else(|| {
        (
            status("invalid", &requested, "reason", "invalid_state"),
            None,
        )
    });
    let (mut result, credential) = result;
    let state = result["status"].as_str().unwrap_or("invalid").to_owned();
    let code = match state.as_str() {
        "ready" => 0,
        "not_ready" => 1,
        _ => 2,
    };
    if !options.json {
        return (credential.unwrap_or(state), code);
    }
    if let Some(credential) = credential {
        result.insert("credentials".into(), json!(credential));
    }
    (Value::Object(result).to_string(), code)
}

fn status(state: &str, provider: &str, key: &str, value: &str) -> Map<String, Value> {
    let mut result = Map::new();
    result.insert("status".into(), json!(state));
    result.insert("provider".into(), json!(provider));
    result.insert(key.into(), json!(value));
    result
}

/// The check's result and, with `--credentials` when ready, the credential; `None` when the
/// check itself failed (an unresolvable model): `invalid`.
fn check_result(
    options: &Options,
    registry: &ModelRegistry,
    credentials: &Credentials,
) -> Option<(Map<String, Value>, Option<String>)> {
    let provider = match &options.model {
        Some(model) => {
            crate::ai::resolve::resolve_cli_model(
                options.provider.as_deref(),
                Some(model),
                registry,
            )
            .ok()??
            .model
            .provider
        }
        None => options.provider.clone()?,
    };
    let not_ready = |reason: &str| Some((status("not_ready", &provider, "reason", reason), None));
    if registry.error().is_some() || credentials.auth_error().is_some() {
        return Some((
            status("invalid", &provider, "reason", "invalid_state"),
            None,
        ));
    }
    if !known_provider(registry, &provider) {
        return not_ready("provider_not_found");
    }
    let oauth = stored_type(credentials, &provider).as_deref() == Some("oauth");
    let auth_type = if oauth {
        if OAuthProvider::from_id(&provider).is_none() {
            return not_ready("credentials_not_configured");
        }
        "oauth"
    } else {
        "api_key"
    };
    // An API key is resolved either way (1.6.0's check resolves it); an OAuth token only
    // when refreshing is allowed.
    let resolved = if oauth && options.no_refresh {
        credentials.stored_access(&provider)
    } else {
        match resolve_key(registry, credentials, &provider) {
            Ok(key) => key,
            Err(_) => {
                return Some((
                    status("invalid", &provider, "reason", "invalid_state"),
                    None,
                ));
            }
        }
    };
    if resolved.is_none() && !(oauth && options.no_refresh) {
        return not_ready("credentials_not_configured");
    }
    let credential = if options.credentials {
        match resolved {
            Some(value) => Some(value),
            None => return not_ready("credential_not_available"),
        }
    } else {
        None
    };
    Some((
        status("ready", &provider, "authType", auth_type),
        credential,
    ))
}

/// `pi auth print-api-key` / `print-bearer-token`: the one credential to print.
fn print_credential(
    kind: Kind,
    options: &Options,
    registry: &ModelRegistry,
    credentials: &Credentials,
) -> Result<String, Failure> {
    let fail = |message: String| error(message, 1);
    let mut providers: Vec<String> = Vec::new();
    match (&options.provider, &options.model) {
        (Some(provider), model) => {
            if !known_provider(registry, provider) {
                return Err(fail(format!(
                    "Unknown provider \"{}\". Use --list-models to see available providers.",
                    crate::support::term::line(provider)
                )));
            }
            if let Some(model) = model {
                crate::ai::resolve::resolve_cli_model(Some(provider), Some(model), registry)
                    .map_err(fail)?
                    .ok_or_else(|| {
                        fail("Unable to resolve the requested provider/model".to_owned())
                    })?;
            }
            providers.push(provider.clone());
        }
        (None, Some(model)) => {
            // Every provider with a stored credential that has this model.
            for (provider, _, _) in credentials.stored() {
                let found =
                    crate::ai::resolve::resolve_cli_model(Some(&provider), Some(model), registry)
                        .ok()
                        .flatten()
                        .is_some_and(|resolved| resolved.model.provider == provider);
                if found && !providers.contains(&provider) {
                    providers.push(provider);
                }
            }
            if providers.is_empty() {
                return Err(fail(format!(
                    "Model \"{}\" not found. Use --list-models to see available models.",
                    crate::support::term::line(model)
                )));
            }
        }
        (None, None) => unreachable_usage()?,
    }
    let min_expiry = options.min_expiry_ms.unwrap_or(DEFAULT_MIN_EXPIRY_MS);
    let mut found: Vec<(String, String)> = Vec::new();
    for provider in &providers {
        let stored = stored_type(credentials, provider);
        let oauth = stored.as_deref() == Some("oauth");
        let value = match kind {
            Kind::ApiKey if oauth => continue,
            Kind::BearerToken if !oauth => continue,
            Kind::BearerToken => credentials.bearer_token(provider, min_expiry),
            _ => resolve_key(registry, credentials, provider),
        }
        .map_err(|error| fail(error.to_string()))?;
        if let Some(value) = value {
            found.push((provider.clone(), value));
        }
    }
    match found.len() {
        1 => Ok(found.remove(0).1),
        0 => {
            let first = providers.first().cloned().unwrap_or_default();
            let oauth = stored_type(credentials, &first).as_deref() == Some("oauth");
            let name = crate::support::term::line(&first).into_owned();
            Err(fail(match kind {
                Kind::ApiKey if options.provider.is_some() && oauth => {
                    format!("Provider \"{name}\" is configured with OAuth, not an API key")
                }
                Kind::BearerToken if options.provider.is_some() && !oauth => {
                    format!("Provider \"{name}\" is not configured with an OAuth bearer token")
                }
                Kind::ApiKey => "No usable API key is configured".to_owned(),
                _ => "No usable OAuth bearer token is configured".to_owned(),
            }))
        }
        _ => Err(fail(format!(
            "Multiple configured providers matched ({}). Specify --provider.",
            found
                .iter()
                .map(|(provider, _)| crate::support::term::line(provider).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn unreachable_usage() -> Result<(), Failure> {
    Err(error(
        "Credential printing requires --provider <provider> or --model <model>",
        1,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_as_1_6_0_parses_them() {
        assert_eq!(duration_ms("30m"), Some(1_800_000));
        assert_eq!(duration_ms("1H"), Some(3_600_000));
        assert_eq!(duration_ms("250ms"), Some(250));
        assert_eq!(duration_ms("5s"), Some(5_000));
        assert_eq!(duration_ms("5"), None);
        assert_eq!(duration_ms("m"), None);
        assert_eq!(duration_ms("1d"), None);
    }

    #[test]
    fn options_belong_to_their_commands() {
        let words = |list: &[&str]| list.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert!(parse(Kind::ApiKey, &words(&["--json"])).is_err());
        assert!(parse(Kind::Check, &words(&["--min-expiry", "1h"])).is_err());
        let options = parse(
            Kind::Check,
            &words(&["--provider=xai", "--json", "--no-refresh"]),
        )
        .unwrap_or_default();
        assert_eq!(options.provider.as_deref(), Some("xai"));
        assert!(options.json && options.no_refresh);
        let Err(Failure(message, 1)) = parse(Kind::Check, &words(&["--bogus"])) else {
            panic!("an unknown option");
        };
        assert!(
            message.starts_with("Unknown option --bogus for \"auth check\"."),
            "{message}"
        );
    }
}
