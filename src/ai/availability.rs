//! Which models of the registry can be used here, and why the others cannot
//! (`--list-models`, `/model`).
//!
//! A model is usable when pi speaks its API, its provider has credentials (the reference's
//! `hasConfiguredAuth`, [`auth::has_configured_auth`]) and the settings its requests need are
//! set (an Azure endpoint, Cloudflare's account placeholders). The first missing piece is the
//! reason: [`Unusable`], whose text names what to set or run.
//!
//! Invariant: like [`auth`], this reads the environment and files only through the
//! [`KeyResolver`]; it runs no commands and refreshes no tokens.

use std::fmt;

use crate::ai::auth::{self, Credentials, KeyResolver, env_key_names};
use crate::ai::models::{Model, ModelRegistry};
use crate::ai::oauth::OAuthProvider;
use crate::support::term;

/// Why a model cannot be used here.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Unusable {
    /// pi does not speak the model's API.
    UnsupportedApi {
        /// The API.
        api: String,
    },
    /// No credentials for the provider.
    NoCredentials {
        /// The provider.
        provider: String,
    },
    /// The provider's `models.json` `apiKey` refers to environment variables that are not set.
    ConfiguredKeyUnset {
        /// The variables not set.
        names: Vec<String>,
    },
    /// Settings a request needs are missing (the key is there).
    MissingSetting {
        /// What to set, as a sentence fragment.
        what: String,
    },
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnsupportedApi { api } => {
                write!(f, "its API \"{api}\" is not one pi speaks")
            }
            Self::NoCredentials { provider } => f.write_str(&credentials_hint(provider)),
            Self::ConfiguredKeyUnset { names } => {
                let (noun, verb) = if names.len() == 1 {
                    ("variable", "is")
                } else {
                    ("variables", "are")
                };
                write!(
                    f,
                    "its models.json apiKey needs the environment {noun} {}, which {verb} not set",
                    join_words(names, "and")
                )
            }
            Self::MissingSetting { what } => write!(f, "{what}"),
        }
    }
}

/// Joins words as a sentence does: `A`, `A or B`, `A, B or C`.
fn join_words(words: &[String], last: &str) -> String {
    match words {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., tail] => format!("{} {last} {tail}", rest.join(", ")),
    }
}

/// What gives a provider credentials, as one sentence fragment.
fn credentials_hint(provider: &str) -> String {
    let login = format!("`pi auth login {provider}`");
    match provider {
        "amazon-bedrock" => format!(
            "no AWS credentials: set AWS_PROFILE, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
             AWS_BEARER_TOKEN_BEDROCK, AWS_WEB_IDENTITY_TOKEN_FILE or \
             AWS_CONTAINER_CREDENTIALS_FULL_URI, or run {login}"
        ),
        "google-vertex" => format!(
            "no Google Cloud credentials: set GOOGLE_CLOUD_API_KEY, or GOOGLE_CLOUD_PROJECT and \
             GOOGLE_CLOUD_LOCATION with Application Default Credentials \
             (`gcloud auth application-default login` or GOOGLE_APPLICATION_CREDENTIALS), or run {login}"
        ),
        _ => {
            let names: Vec<String> = env_key_names(provider)
                .iter()
                .map(|name| (*name).to_owned())
                .collect();
            let oauth = OAuthProvider::from_id(provider).is_some();
            match (names.is_empty(), oauth) {
                (true, true) => format!("not signed in: run {login}"),
                (true, false) => format!("no API key: run {login}"),
                (false, true) => format!(
                    "not signed in: run {login}, or set {}",
                    join_words(&names, "or")
                ),
                (false, false) => {
                    format!(
                        "no API key: set {}, or run {login}",
                        join_words(&names, "or")
                    )
                }
            }
        }
    }
}

/// Whether pi speaks `api` (the protocols of [`crate::ai::AiClient::stream`]).
pub fn speaks(api: &str) -> bool {
    matches!(
        api,
        "openai-completions"
            | "openai-responses"
            | "azure-openai-responses"
            | "openai-codex-responses"
            | "anthropic-messages"
            | "google-generative-ai"
            | "google-vertex"
            | "bedrock-converse-stream"
            | "mistral-conversations"
    )
}

/// Why `model` cannot be used here; `None` when it can.
pub fn why_unusable(
    registry: &ModelRegistry,
    credentials: &Credentials,
    model: &Model,
) -> Option<Unusable> {
    if !speaks(&model.api) {
        return Some(Unusable::UnsupportedApi {
            api: model.api.clone(),
        });
    }
    let resolver = credentials.resolver();
    if !auth::has_configured_auth(registry, credentials, model) {
        let configured = registry
            .provider_request_config(&model.provider)
            .and_then(|config| config.api_key.as_deref());
        return Some(match configured {
            Some(value) => Unusable::ConfiguredKeyUnset {
                names: auth::config_value_env_names(value)
                    .into_iter()
                    .filter(|name| resolver.env(name).is_none())
                    .collect(),
            },
            None => Unusable::NoCredentials {
                provider: model.provider.clone(),
            },
        });
    }
    missing_setting(model, resolver).map(|what| Unusable::MissingSetting { what })
}

/// The setting a request for `model` needs and does not have, besides credentials.
fn missing_setting(model: &Model, resolver: &dyn KeyResolver) -> Option<String> {
    // 1.6.0's Azure provider resolves its endpoint for both of its APIs.
    if (model.api == "azure-openai-responses" || model.provider == "azure")
        && model.base_url.trim().is_empty()
        && resolver.env("AZURE_OPENAI_BASE_URL").is_none()
        && resolver.env("AZURE_OPENAI_RESOURCE_NAME").is_none()
    {
        return Some(
            "no Azure OpenAI endpoint: set AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME"
                .to_owned(),
        );
    }
    auth::resolve_base_url(model, resolver)
        .err()
        .map(|error| error.message().trim_end_matches('.').to_owned())
}

/// The models of the registry with why each cannot be used (`None`: usable), in registry
/// order.
pub fn classify<'a>(
    registry: &'a ModelRegistry,
    credentials: &Credentials,
) -> Vec<(&'a Model, Option<Unusable>)> {
    registry
        .all()
        .iter()
        .map(|model| (model, why_unusable(registry, credentials, model)))
        .collect()
}

/// Models that cannot be used, grouped by provider and reason: `(provider, reason, count)`
/// sorted by provider, then reason text.
pub fn group_unusable<'a>(
    unusable: impl IntoIterator<Item = (&'a Model, &'a Unusable)>,
) -> Vec<(String, Unusable, usize)> {
    let mut groups: Vec<(String, Unusable, usize)> = Vec::new();
    for (model, reason) in unusable {
        match groups
            .iter_mut()
            .find(|(provider, known, _)| *provider == model.provider && known == reason)
        {
            Some(group) => group.2 += 1,
            None => groups.push((model.provider.clone(), reason.clone(), 1)),
        }
    }
    groups.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| a.1.to_string().cmp(&b.1.to_string()))
    });
    groups
}

/// `N models pi knows cannot be used here:` (`N matching models` when words were given).
pub fn unusable_heading(count: usize, searched: bool) -> String {
    let noun = if count == 1 { "model" } else { "models" };
    let matching = if searched { " matching" } else { "" };
    format!("{count}{matching} {noun} pi knows cannot be used here:")
}

/// One line per provider and reason, for people: `provider (N models)  reason`, the labels
/// padded to one width, control characters of `models.json` names made visible.
pub fn unusable_lines(unusable: &[(&Model, &Unusable)]) -> Vec<String> {
    let groups = group_unusable(unusable.iter().copied());
    let labels: Vec<String> = groups
        .iter()
        .map(|(provider, _, count)| {
            let noun = if *count == 1 { "model" } else { "models" };
            format!("{} ({count} {noun})", term::line(provider))
        })
        .collect();
    let width = labels
        .iter()
        .map(|label| label.chars().count())
        .max()
        .unwrap_or(0);
    groups
        .iter()
        .zip(&labels)
        .map(|((_, reason, _), label)| {
            format!("{label:<width$}  {}", term::line(&reason.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::*;
    use crate::ai::auth::AuthFile;
    use crate::support::clock::SystemClock;

    #[derive(Debug)]
    struct Vars(HashMap<&'static str, &'static str>);

    impl KeyResolver for Vars {
        fn env(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|value| (*value).to_owned())
        }
        fn run_command(&self, _command: &str) -> Option<String> {
            None
        }
    }

    fn credentials(vars: &[(&'static str, &'static str)]) -> Credentials {
        Credentials::new(
            AuthFile::parse(None),
            Arc::new(Vars(vars.iter().copied().collect())),
            Arc::new(SystemClock),
        )
    }

    fn reason(registry: &ModelRegistry, creds: &Credentials, provider: &str) -> Option<String> {
        let model = registry
            .all()
            .iter()
            .find(|model| model.provider == provider)
            .expect("a model of the provider");
        why_unusable(registry, creds, model).map(|reason| reason.to_string())
    }

    #[test]
    fn each_reason_names_what_to_set_or_run() {
        let registry = ModelRegistry::builtin();
        let none = credentials(&[]);
        assert_eq!(
            reason(&registry, &none, "anthropic").as_deref(),
            Some(
                "not signed in: run `pi auth login anthropic`, or set ANTHROPIC_OAUTH_TOKEN or ANTHROPIC_API_KEY"
            )
        );
        assert_eq!(
            reason(&registry, &none, "groq").as_deref(),
            Some("no API key: set GROQ_API_KEY, or run `pi auth login groq`")
        );
        assert_eq!(
            reason(&registry, &none, "openai-codex").as_deref(),
            Some("not signed in: run `pi auth login openai-codex`")
        );
        assert!(
            reason(&registry, &none, "amazon-bedrock")
                .is_some_and(|text| text.starts_with("no AWS credentials: set AWS_PROFILE"))
        );
        assert_eq!(
            reason(
                &registry,
                &credentials(&[("RADIUS_API_KEY", "k")]),
                "radius"
            )
            .as_deref(),
            Some("its API \"pi-messages\" is not one pi speaks")
        );
        let keyed = credentials(&[("GROQ_API_KEY", "k"), ("AZURE_OPENAI_API_KEY", "k")]);
        assert_eq!(reason(&registry, &keyed, "groq"), None);
        assert_eq!(
            reason(&registry, &keyed, "azure").as_deref(),
            Some(
                "no Azure OpenAI endpoint: set AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME"
            )
        );
        let cloudflare = credentials(&[("CLOUDFLARE_API_KEY", "k")]);
        assert_eq!(
            reason(&registry, &cloudflare, "cloudflare-workers-ai").as_deref(),
            Some(
                "CLOUDFLARE_ACCOUNT_ID is required for provider cloudflare-workers-ai but is not set"
            )
        );
    }

    #[test]
    fn a_configured_key_names_its_unset_variables() {
        let registry = ModelRegistry::load(
            Some(
                r#"{"providers":{"acme":{"baseUrl":"http://127.0.0.1:9/v1","api":"openai-completions",
                "apiKey":"${ACME_ORG}-$ACME_KEY","models":[{"id":"m"}]}}}"#,
            ),
            "models.json",
        );
        let creds = credentials(&[("ACME_ORG", "o")]);
        assert_eq!(
            reason(&registry, &creds, "acme").as_deref(),
            Some(
                "its models.json apiKey needs the environment variable ACME_KEY, which is not set"
            )
        );
    }

    #[test]
    fn unusable_models_group_by_provider_and_reason() {
        let registry = ModelRegistry::builtin();
        let none = credentials(&[]);
        let classified = classify(&registry, &none);
        let unusable: Vec<(&Model, &Unusable)> = classified
            .iter()
            .filter_map(|(model, reason)| reason.as_ref().map(|reason| (*model, reason)))
            .collect();
        assert_eq!(unusable.len(), registry.all().len());
        let groups = group_unusable(unusable);
        let bedrock = groups
            .iter()
            .find(|(provider, _, _)| provider == "amazon-bedrock")
            .expect("bedrock");
        let count = registry
            .all()
            .iter()
            .filter(|model| model.provider == "amazon-bedrock")
            .count();
        assert_eq!(bedrock.2, count);
        assert!(groups.windows(2).all(|pair| pair[0].0 <= pair[1].0));
    }
}
