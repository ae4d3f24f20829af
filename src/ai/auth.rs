//! API keys and request headers, resolved the reference's way (`spec/models-providers-settings.md`
//! §4.5, §4.7, §5).
//!
//! Resolution order for a provider's key: the runtime key (`--api-key`), then `auth.json`
//! (`api_key` entries resolve their value form; an unresolvable one stops the search;
//! unexpired `oauth` entries give their `access` token), then the provider's `models.json`
//! `apiKey` (an unresolvable one is an error, never a fall-through), then the provider's
//! environment variables — 1.6.0's `composeApiKeyAuth` (`provider-composer.js`), where the
//! configured key replaces the built-in provider's environment lookup. A value form (1.6.0's
//! `resolveConfigValue`) is `!command` (run by the shell, stdout trimmed), else a template:
//! `$NAME` and `${NAME}` are replaced by the environment variable (unset or empty: the value
//! does not resolve), `$$` and `$!` are a literal `$` and `!`, everything else — a plain
//! `OPENAI_API_KEY` too — is literal. `auth.json` command results are cached for the process;
//! `models.json` values are resolved afresh on every request.
//!
//! OAuth entries of the subscription providers (`ai::oauth`) are refreshed when less than five
//! minutes are left (1.6.0's `resolveStoredOAuth`) and once more when the provider rejects the
//! token ([`Credentials::refresh_rejected`]): under the `auth.json` lock of the
//! [`CredentialStore`] `cli` supplies, re-checked there, so concurrent processes (pi's and
//! 1.6.0's) refresh once.
//!
//! Invariant: this layer reads no environment variables, runs no commands and touches no file
//! itself; all go through the [`KeyResolver`] and [`CredentialStore`] that `cli` supplies. The
//! file contents come in as text. No token is ever part of an error message.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, RwLock};

use regex::Regex;
use serde_json::{Map, Value};

use crate::ai::error::AiError;
use crate::ai::models::{Model, ModelRegistry};
use crate::ai::oauth::{self, Endpoints, OAuthError, OAuthProvider};
use crate::support::clock::Clock;

/// Environment lookups and shell commands, supplied by the caller (`cli/keys.rs`).
pub trait KeyResolver: Send + Sync + std::fmt::Debug {
    /// Returns the environment variable `name` when it is set and not empty.
    fn env(&self, name: &str) -> Option<String>;

    /// Runs `command` with the shell (stdin closed, stderr discarded, 10 s timeout) and
    /// returns its trimmed stdout; `None` on a non-zero exit, a timeout or empty output.
    /// Blocking.
    fn run_command(&self, command: &str) -> Option<String>;

    /// Returns the text of the file at `path` (relative paths from the working directory,
    /// `~/` from the home directory), `None` when it cannot be read. Blocking. The default
    /// reads nothing.
    fn read_file(&self, path: &str) -> Option<String> {
        let _ = path;
        None
    }
}

/// Returns the environment variables that hold a provider's key, in lookup order (§3).
pub fn env_key_names(provider: &str) -> &'static [&'static str] {
    match provider {
        "github-copilot" => &["COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"],
        "anthropic" => &["ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"],
        "openai" => &["OPENAI_API_KEY"],
        "azure" | "azure-openai-responses" => &["AZURE_OPENAI_API_KEY"],
        "deepseek" => &["DEEPSEEK_API_KEY"],
        "google" => &["GEMINI_API_KEY"],
        "google-vertex" => &["GOOGLE_CLOUD_API_KEY"],
        "groq" => &["GROQ_API_KEY"],
        "cerebras" => &["CEREBRAS_API_KEY"],
        "xai" => &["XAI_API_KEY"],
        "openrouter" => &["OPENROUTER_API_KEY"],
        "vercel-ai-gateway" => &["AI_GATEWAY_API_KEY"],
        "zai" => &["ZAI_API_KEY"],
        "mistral" => &["MISTRAL_API_KEY"],
        "minimax" => &["MINIMAX_API_KEY"],
        "minimax-cn" => &["MINIMAX_CN_API_KEY"],
        "moonshotai" | "moonshotai-cn" => &["MOONSHOT_API_KEY"],
        "huggingface" => &["HF_TOKEN"],
        "fireworks" => &["FIREWORKS_API_KEY"],
        "opencode" | "opencode-go" => &["OPENCODE_API_KEY"],
        "kimi-coding" => &["KIMI_API_KEY"],
        "cloudflare-workers-ai" | "cloudflare-ai-gateway" => &["CLOUDFLARE_API_KEY"],
        "xiaomi" => &["XIAOMI_API_KEY"],
        "xiaomi-token-plan-cn" => &["XIAOMI_TOKEN_PLAN_CN_API_KEY"],
        "xiaomi-token-plan-ams" => &["XIAOMI_TOKEN_PLAN_AMS_API_KEY"],
        "xiaomi-token-plan-sgp" => &["XIAOMI_TOKEN_PLAN_SGP_API_KEY"],
        // Providers 1.6.0 added (its `getApiKeyEnvVars`).
        "ant-ling" => &["ANT_LING_API_KEY"],
        "qwen-token-plan" => &["QWEN_TOKEN_PLAN_TEAM_API_KEY", "QWEN_TOKEN_PLAN_API_KEY"],
        "qwen-token-plan-cn" => &[
            "QWEN_TOKEN_PLAN_TEAM_CN_API_KEY",
            "QWEN_TOKEN_PLAN_CN_API_KEY",
        ],
        "qwen-token-plan-individual" => &[
            "QWEN_TOKEN_PLAN_INDIVIDUAL_API_KEY",
            "QWEN_TOKEN_PLAN_API_KEY",
        ],
        "qwen-token-plan-individual-cn" => &[
            "QWEN_TOKEN_PLAN_INDIVIDUAL_CN_API_KEY",
            "QWEN_TOKEN_PLAN_CN_API_KEY",
        ],
        "nvidia" => &["NVIDIA_API_KEY"],
        "typesafe" => &["TYPESAFE_API_KEY"],
        "radius" => &["RADIUS_API_KEY"],
        "zai-coding-cn" => &["ZAI_CODING_CN_API_KEY"],
        "together" => &["TOGETHER_API_KEY"],
        "baseten" => &["BASETEN_API_KEY"],
        "meta" => &["META_API_KEY"],
        _ => &[],
    }
}

/// Returns the key the environment gives a provider (the reference's `getEnvApiKey`):
/// the first non-empty variable of [`env_key_names`], or `<authenticated>` for Vertex (a readable ADC
/// credentials file named, project and location set) and Bedrock (any AWS credential
/// variable).
pub fn env_api_key(provider: &str, resolver: &dyn KeyResolver) -> Option<String> {
    if let Some(key) = env_key_names(provider)
        .iter()
        .find_map(|name| resolver.env(name))
    {
        return Some(key);
    }
    let set = |name: &str| resolver.env(name).is_some();
    let authenticated = match provider {
        "google-vertex" => {
            (set("GOOGLE_CLOUD_PROJECT") || set("GCLOUD_PROJECT"))
                && set("GOOGLE_CLOUD_LOCATION")
                && resolver
                    .read_file(&google_key_file_path(resolver))
                    .is_some()
        }
        "amazon-bedrock" => {
            set("AWS_PROFILE")
                || (set("AWS_ACCESS_KEY_ID") && set("AWS_SECRET_ACCESS_KEY"))
                || set("AWS_BEARER_TOKEN_BEDROCK")
                || set("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
                || set("AWS_CONTAINER_CREDENTIALS_FULL_URI")
                || set("AWS_WEB_IDENTITY_TOKEN_FILE")
        }
        _ => false,
    };
    authenticated.then(|| "<authenticated>".to_owned())
}

/// One `auth.json` entry.
#[derive(Clone, Debug, PartialEq)]
pub enum StoredCredential {
    /// `{"type": "api_key", "key": <value form>}`.
    ApiKey {
        /// The value form (literal, environment variable name or `!command`).
        key: String,
    },
    /// `{"type": "oauth", "access", "expires", …}`.
    OAuth {
        /// The access token.
        access: Option<String>,
        /// Expiry, Unix ms.
        expires: Option<i64>,
        /// Whether the entry has a refresh token.
        refreshable: bool,
    },
    /// Any other shape; counts as configured, gives no key.
    Other,
}

/// The parsed `auth.json`. A file that does not parse counts as empty (the reference then
/// also refuses to write it; this layer never writes).
#[derive(Clone, Debug, Default)]
pub struct AuthFile {
    entries: Map<String, Value>,
    error: Option<String>,
}

impl AuthFile {
    /// Parses the text of `auth.json` (`None`: the file does not exist).
    pub fn parse(text: Option<&str>) -> Self {
        let Some(text) = text else {
            return Self::default();
        };
        if text.trim().is_empty() {
            return Self::default();
        }
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(entries)) => Self {
                entries,
                error: None,
            },
            Ok(_) => Self {
                entries: Map::new(),
                error: Some("auth.json is not a JSON object".to_owned()),
            },
            Err(err) => Self {
                entries: Map::new(),
                error: Some(format!("Failed to parse auth.json: {err}")),
            },
        }
    }

    /// Returns the parse error, if the file was unreadable.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Whether the file has an entry for the provider (any type).
    pub fn has(&self, provider: &str) -> bool {
        self.entries
            .get(provider)
            .is_some_and(|value| !value.is_null() && value != &Value::Bool(false))
    }

    /// The providers with an entry, in file order, with the entry's `type`.
    pub fn list(&self) -> Vec<(String, String)> {
        self.entries
            .iter()
            .filter(|(_, value)| value.is_object())
            .map(|(provider, value)| {
                (
                    provider.clone(),
                    value["type"].as_str().unwrap_or("unknown").to_owned(),
                )
            })
            .collect()
    }

    /// Returns the provider's entry as stored.
    pub fn raw(&self, provider: &str) -> Option<&Map<String, Value>> {
        self.entries.get(provider)?.as_object()
    }

    /// Returns the provider's entry.
    pub fn get(&self, provider: &str) -> Option<StoredCredential> {
        let entry = self.entries.get(provider)?.as_object()?;
        Some(match entry.get("type").and_then(Value::as_str) {
            Some("api_key") => match entry.get("key").and_then(Value::as_str) {
                Some(key) => StoredCredential::ApiKey {
                    key: key.to_owned(),
                },
                None => StoredCredential::Other,
            },
            Some("oauth") => StoredCredential::OAuth {
                access: entry
                    .get("access")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                expires: entry
                    .get("expires")
                    .and_then(Value::as_f64)
                    .map(|ms| ms as i64),
                refreshable: entry
                    .get("refresh")
                    .and_then(Value::as_str)
                    .is_some_and(|token| !token.is_empty()),
            },
            _ => StoredCredential::Other,
        })
    }
}

/// What a [`CredentialStore::modify`] does with the provider's entry.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Leave the file as it is.
    Keep,
    /// Store this entry (replacing the provider's).
    Set(Value),
    /// Remove the provider's entry.
    Remove,
}

/// `auth.json` itself, as `cli` keeps it: read, and changed under the lock 1.6.0 also takes
/// (`proper-lockfile`'s `auth.json.lock`), written all or nothing with mode 0600.
pub trait CredentialStore: Send + Sync + std::fmt::Debug {
    /// Returns the file's text (`None`: no file). Blocking.
    fn read(&self) -> Result<Option<String>, AiError>;

    /// Under the lock: reads the file, asks `change` what to do with the provider's entry
    /// (the current one, read under the lock), writes the result, and returns the file's text
    /// afterwards. An error from `change` leaves the file untouched. Blocking.
    fn modify(
        &self,
        provider: &str,
        change: &mut dyn FnMut(Option<&Value>) -> Result<Change, AiError>,
    ) -> Result<Option<String>, AiError>;
}

/// The sentence every credential error ends with: what to run.
pub fn login_hint(provider: &str) -> String {
    format!("Run `pi auth login {provider}` or /login {provider} to sign in again.")
}

/// Where keys come from: the runtime key, `auth.json`, the environment (through the
/// resolver). Shared by every request of a process.
#[derive(Debug)]
pub struct Credentials {
    runtime: HashMap<String, String>,
    auth: RwLock<AuthFile>,
    resolver: Arc<dyn KeyResolver>,
    clock: Arc<dyn Clock>,
    command_cache: Mutex<HashMap<String, Option<String>>>,
    store: Option<Arc<dyn CredentialStore>>,
    endpoints: Endpoints,
}

impl Credentials {
    /// Builds the credential chain over a parsed `auth.json`.
    pub fn new(auth: AuthFile, resolver: Arc<dyn KeyResolver>, clock: Arc<dyn Clock>) -> Self {
        Self {
            runtime: HashMap::new(),
            auth: RwLock::new(auth),
            resolver,
            clock,
            command_cache: Mutex::new(HashMap::new()),
            store: None,
            endpoints: Endpoints::default(),
        }
    }

    /// Keeps `auth.json` through `store` (refreshes, sign-ins) with these OAuth endpoints.
    pub fn with_store(mut self, store: Arc<dyn CredentialStore>, endpoints: Endpoints) -> Self {
        self.store = Some(store);
        self.endpoints = endpoints;
        self
    }

    /// The OAuth endpoints (the test override included).
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// The clock expiries are read against.
    pub fn clock(&self) -> &dyn Clock {
        self.clock.as_ref()
    }

    /// The clock, shared.
    pub fn clock_arc(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    fn auth(&self) -> std::sync::RwLockReadGuard<'_, AuthFile> {
        match self.auth.read() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn replace_auth(&self, text: Option<&str>) {
        let parsed = AuthFile::parse(text);
        match self.auth.write() {
            Ok(mut guard) => *guard = parsed,
            Err(poisoned) => *poisoned.into_inner() = parsed,
        }
    }

    fn store(&self) -> Result<&Arc<dyn CredentialStore>, AiError> {
        self.store.as_ref().ok_or_else(|| AiError::Config {
            message: "auth.json cannot be written in this process".to_owned(),
        })
    }

    /// Re-reads `auth.json` (after another process or a sign-in changed it).
    pub fn reload(&self) -> Result<(), AiError> {
        let text = self.store()?.read()?;
        self.replace_auth(text.as_deref());
        Ok(())
    }

    /// Stores a credential for the provider (a sign-in's result), under the lock.
    pub fn save(&self, provider: &str, credential: Value) -> Result<(), AiError> {
        let mut credential = Some(credential);
        let text = self.store()?.modify(provider, &mut |_| {
            Ok(credential.take().map_or(Change::Keep, Change::Set))
        })?;
        self.replace_auth(text.as_deref());
        Ok(())
    }

    /// Removes the provider's stored credential; `false` when there was none.
    pub fn remove(&self, provider: &str) -> Result<bool, AiError> {
        let mut existed = false;
        let text = self.store()?.modify(provider, &mut |entry| {
            existed = entry.is_some();
            Ok(if existed {
                Change::Remove
            } else {
                Change::Keep
            })
        })?;
        self.replace_auth(text.as_deref());
        Ok(existed)
    }

    /// The stored entries: provider, `type`, and for OAuth ones the expiry (Unix ms).
    pub fn stored(&self) -> Vec<(String, String, Option<i64>)> {
        let auth = self.auth();
        auth.list()
            .into_iter()
            .map(|(provider, kind)| {
                let expires = match auth.get(&provider) {
                    Some(StoredCredential::OAuth { expires, .. }) => expires,
                    _ => None,
                };
                (provider, kind, expires)
            })
            .collect()
    }

    /// Refreshes the provider's OAuth token under the store's lock when `needs` says so of
    /// the entry read under the lock (another process may have refreshed it meanwhile), and
    /// re-reads the file.
    fn refresh_locked(
        &self,
        provider: OAuthProvider,
        needs: &dyn Fn(&Map<String, Value>) -> bool,
    ) -> Result<(), AiError> {
        let store = self.store()?.clone();
        let endpoints = self.endpoints.clone();
        let clock = self.clock.clone();
        let text = store.modify(provider.id(), &mut |entry| {
            let Some(entry) = entry
                .and_then(Value::as_object)
                .filter(|entry| entry.get("type").and_then(Value::as_str) == Some("oauth"))
            else {
                return Ok(Change::Keep); // logged out meanwhile
            };
            if !needs(entry) {
                return Ok(Change::Keep); // another process refreshed
            }
            let refreshed = run_async({
                let endpoints = endpoints.clone();
                let entry = entry.clone();
                let now = clock.now_ms();
                async move {
                    let http = oauth::http_client()?;
                    oauth::refresh(provider, &endpoints, &http, &entry, now).await
                }
            })
            .map_err(|error| refresh_error(provider.id(), &error))?;
            Ok(Change::Set(refreshed))
        })?;
        self.replace_auth(text.as_deref());
        Ok(())
    }

    /// After the provider rejected `rejected` (HTTP 401): refreshes the token once when the
    /// stored one is still that token; `true` when a different token is now stored (refreshed
    /// here or by another process), so the request is worth repeating.
    pub fn refresh_rejected(&self, provider: &str, rejected: &str) -> Result<bool, AiError> {
        let Some(oauth_provider) = OAuthProvider::from_id(provider) else {
            return Ok(false);
        };
        if self.store.is_none() || !self.holds_oauth(provider) {
            return Ok(false);
        }
        let _ = self.reload();
        let rejected_owned = rejected.to_owned();
        self.refresh_locked(oauth_provider, &move |entry| {
            entry.get("access").and_then(Value::as_str) == Some(rejected_owned.as_str())
        })?;
        Ok(match self.auth().get(provider) {
            Some(StoredCredential::OAuth {
                access: Some(access),
                ..
            }) => access != rejected,
            _ => false,
        })
    }

    /// The provider's OAuth access token with at least `min_validity_ms` left (never less
    /// than the five minutes of a request), refreshed under the lock when it has less; `None`
    /// when the provider's stored credential is not an OAuth sign-in (1.6.0's
    /// `getAuth(…, {minOAuthValidityMs})`, for `pi auth print-bearer-token`).
    pub fn bearer_token(
        &self,
        provider: &str,
        min_validity_ms: i64,
    ) -> Result<Option<String>, AiError> {
        let Some(oauth_provider) = OAuthProvider::from_id(provider) else {
            return Ok(None);
        };
        let Some(StoredCredential::OAuth {
            access, expires, ..
        }) = self.auth().get(provider)
        else {
            return Ok(None);
        };
        let minimum = min_validity_ms.max(oauth::EXPIRY_MARGIN_MS);
        let now = self.clock.now_ms();
        let soon =
            move |expires: Option<i64>| expires.is_none_or(|expires| now + minimum >= expires);
        if !soon(expires) {
            return Ok(access);
        }
        if !self.may_refresh(provider) {
            return Err(AiError::Auth {
                message: format!(
                    "Authentication failed for \"{provider}\": the stored sign-in expires too soon and cannot be refreshed. {}",
                    login_hint(provider)
                ),
            });
        }
        self.refresh_locked(oauth_provider, &|entry| {
            soon(
                entry
                    .get("expires")
                    .and_then(Value::as_f64)
                    .map(|ms| ms as i64),
            )
        })?;
        match self.auth().get(provider) {
            Some(StoredCredential::OAuth {
                access: Some(access),
                expires,
                ..
            }) if !soon(expires) => Ok(Some(access)),
            Some(StoredCredential::OAuth { .. }) => Err(AiError::Auth {
                message: format!(
                    "OAuth refresh returned a token that expires too soon for {provider}"
                ),
            }),
            _ => Ok(None), // logged out meanwhile
        }
    }

    /// The stored OAuth access token as it is (no refresh, expired or not).
    pub fn stored_access(&self, provider: &str) -> Option<String> {
        match self.auth().get(provider) {
            Some(StoredCredential::OAuth { access, .. }) => access,
            _ => None,
        }
    }

    /// Whether the provider's credential is a sign-in this process can refresh (an OAuth
    /// entry of an OAuth provider, with a refresh token, and a store to write it to).
    pub fn may_refresh(&self, provider: &str) -> bool {
        self.store.is_some()
            && !self.runtime.contains_key(provider)
            && OAuthProvider::from_id(provider).is_some()
            && matches!(
                self.auth().get(provider),
                Some(StoredCredential::OAuth {
                    refreshable: true,
                    ..
                })
            )
    }

    fn holds_oauth(&self, provider: &str) -> bool {
        matches!(
            self.auth().get(provider),
            Some(StoredCredential::OAuth { .. })
        )
    }

    /// The access token and enterprise domain of the provider's OAuth entry, if it has one.
    fn oauth_access(&self, provider: &str) -> Option<(String, Option<String>)> {
        let auth = self.auth();
        let entry = auth.raw(provider)?;
        if entry.get("type").and_then(Value::as_str) != Some("oauth") {
            return None;
        }
        let access = entry.get("access")?.as_str()?.to_owned();
        let enterprise = entry
            .get("enterpriseUrl")
            .and_then(Value::as_str)
            .and_then(oauth::normalize_domain);
        Some((access, enterprise))
    }

    /// Sets the runtime key of a provider (`--api-key`), which wins over everything.
    pub fn set_runtime_key(&mut self, provider: &str, key: &str) {
        self.runtime.insert(provider.to_owned(), key.to_owned());
    }

    /// Returns the resolver (for request-time resolution of `models.json` values).
    pub fn resolver(&self) -> &dyn KeyResolver {
        self.resolver.as_ref()
    }

    /// Returns the parse error of `auth.json`, if it was unreadable.
    pub fn auth_error(&self) -> Option<String> {
        self.auth().error().map(str::to_owned)
    }

    /// Whether any key source is configured for the provider, without running commands or
    /// refreshing tokens (the reference's `hasAuth`).
    pub fn has_auth(&self, provider: &str) -> bool {
        self.has_stored(provider) || env_api_key(provider, self.resolver.as_ref()).is_some()
    }

    /// Whether the runtime key or `auth.json` has an entry for the provider.
    pub fn has_stored(&self, provider: &str) -> bool {
        self.runtime.contains_key(provider) || self.auth().has(provider)
    }

    /// Returns the provider's key from the runtime key, `auth.json` or the environment
    /// (for a provider without a `models.json` `apiKey`). Blocking: may run an `auth.json`
    /// command (cached for the process). An expired OAuth token of a known OAuth provider is
    /// an [`AiError::Auth`].
    pub fn api_key(&self, provider: &str) -> Result<Option<String>, AiError> {
        match self.stored_key(provider)? {
            Some(stored) => Ok(stored),
            None => Ok(env_api_key(provider, self.resolver.as_ref())),
        }
    }

    /// Returns the provider's key when `models.json` configures one (`configured`, a value
    /// form): the runtime key or `auth.json` first, else (an `auth.json` entry that gives no
    /// key included, spec §5.3 step 2) the configured value resolved now (an unresolvable one
    /// is an [`AiError::Config`]); the environment is not consulted.
    pub fn api_key_configured(
        &self,
        provider: &str,
        configured: &str,
    ) -> Result<Option<String>, AiError> {
        match self.stored_key(provider)? {
            Some(Some(stored)) => Ok(Some(stored)),
            Some(None) | None => resolve_or_fail(
                configured,
                &format!("API key for provider \"{provider}\""),
                self.resolver.as_ref(),
            )
            .map(Some),
        }
    }

    /// What the runtime key and `auth.json` say: `None` when neither has an entry (the
    /// search goes on), `Some(key)` otherwise — `Some(None)` when the entry gives no key,
    /// which ends the search.
    fn stored_key(&self, provider: &str) -> Result<Option<Option<String>>, AiError> {
        if let Some(key) = self.runtime.get(provider).filter(|key| !key.is_empty()) {
            return Ok(Some(Some(key.clone())));
        }
        let stored = self.auth().get(provider);
        match stored {
            Some(StoredCredential::ApiKey { key }) => return Ok(Some(self.resolve_cached(&key))),
            Some(StoredCredential::OAuth {
                access,
                expires,
                refreshable,
            }) => {
                let Some(oauth_provider) = OAuthProvider::from_id(provider) else {
                    return Ok(Some(None));
                };
                let now = self.clock.now_ms();
                let expires_soon = |expires: Option<i64>| {
                    expires.is_none_or(|expires| now + oauth::EXPIRY_MARGIN_MS >= expires)
                };
                if expires_soon(expires) && refreshable && self.store.is_some() {
                    // 1.6.0 refreshes a token with less than five minutes left; the check is
                    // repeated under the lock.
                    self.refresh_locked(oauth_provider, &|entry| {
                        expires_soon(
                            entry
                                .get("expires")
                                .and_then(Value::as_f64)
                                .map(|ms| ms as i64),
                        )
                    })?;
                    if let Some(StoredCredential::OAuth {
                        access: Some(access),
                        expires: Some(expires),
                        ..
                    }) = self.auth().get(provider)
                        && now < expires
                    {
                        return Ok(Some(Some(access)));
                    }
                } else if let Some(access) = access.filter(|_| expires.is_some_and(|e| now < e)) {
                    return Ok(Some(Some(access)));
                }
                return Err(AiError::Auth {
                    message: format!(
                        "Authentication failed for \"{provider}\": the stored sign-in has expired. {}",
                        login_hint(provider)
                    ),
                });
            }
            Some(StoredCredential::Other) | None => {}
        }
        Ok(None)
    }

    /// Resolves an `auth.json` value form, caching command results (failures included).
    fn resolve_cached(&self, value: &str) -> Option<String> {
        let Some(command) = value.strip_prefix('!') else {
            return resolve_config_value(value, self.resolver.as_ref());
        };
        let mut cache = match self.command_cache.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        cache
            .entry(value.to_owned())
            .or_insert_with(|| self.resolver.run_command(command))
            .clone()
    }
}

/// One piece of a `models.json` / `auth.json` value template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ConfigPart {
    Literal(String),
    Env(String),
}

fn push_literal(parts: &mut Vec<ConfigPart>, text: &str) {
    if text.is_empty() {
        return;
    }
    match parts.last_mut() {
        Some(ConfigPart::Literal(previous)) => previous.push_str(text),
        _ => parts.push(ConfigPart::Literal(text.to_owned())),
    }
}

/// The length of the environment-variable name at the start of `text`
/// (`[A-Za-z_][A-Za-z0-9_]*`), 0 for none.
fn env_name_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    match bytes.first() {
        Some(first) if first.is_ascii_alphabetic() || *first == b'_' => {}
        _ => return 0,
    }
    bytes
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .count()
}

/// 1.6.0's `parseConfigValueTemplate`: `$NAME` and `${NAME}` are environment references, `$$`
/// and `$!` a literal `$` and `!`, anything else (a lone `$`, `${` without `}`, `${not a
/// name}`) literal text.
fn parse_config_template(value: &str) -> Vec<ConfigPart> {
    let mut parts = Vec::new();
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        push_literal(&mut parts, &rest[..at]);
        let after = &rest[at + 1..];
        match after.chars().next() {
            Some(c @ ('$' | '!')) => {
                push_literal(&mut parts, if c == '$' { "$" } else { "!" });
                rest = &after[1..];
            }
            Some('{') => match after[1..].find('}') {
                None => {
                    push_literal(&mut parts, "$");
                    rest = after;
                }
                Some(end) => {
                    let name = &after[1..1 + end];
                    if !name.is_empty() && env_name_len(name) == name.len() {
                        parts.push(ConfigPart::Env(name.to_owned()));
                    } else {
                        push_literal(&mut parts, &rest[at..at + 1 + end + 2]);
                    }
                    rest = &after[end + 2..];
                }
            },
            _ => {
                let len = env_name_len(after);
                if len > 0 {
                    parts.push(ConfigPart::Env(after[..len].to_owned()));
                    rest = &after[len..];
                } else {
                    push_literal(&mut parts, "$");
                    rest = after;
                }
            }
        }
    }
    push_literal(&mut parts, rest);
    parts
}

/// The environment variables a value form refers to, in order, each once
/// (`getConfigValueEnvVarNames`); none for a `!command`.
pub fn config_value_env_names(value: &str) -> Vec<String> {
    if value.starts_with('!') {
        return Vec::new();
    }
    let mut names: Vec<String> = Vec::new();
    for part in parse_config_template(value) {
        if let ConfigPart::Env(name) = part
            && !names.contains(&name)
        {
            names.push(name);
        }
    }
    names
}

/// Whether a value form can resolve without running anything: a command counts as
/// configured; a template when every variable it names is set (`isConfigValueConfigured`).
pub fn config_value_configured(value: &str, resolver: &dyn KeyResolver) -> bool {
    value.starts_with('!')
        || config_value_env_names(value)
            .iter()
            .all(|name| resolver.env(name).is_some())
}

/// Resolves a value form (1.6.0's `resolveConfigValueUncached`) without caching: `!command`
/// (stdout trimmed), else the template with every `$NAME`/`${NAME}` replaced by the
/// variable's value — `None` when one of them is unset or empty. A plain string is a
/// literal.
pub fn resolve_config_value(value: &str, resolver: &dyn KeyResolver) -> Option<String> {
    if let Some(command) = value.strip_prefix('!') {
        return resolver.run_command(command);
    }
    let mut out = String::with_capacity(value.len());
    for part in parse_config_template(value) {
        match part {
            ConfigPart::Literal(text) => out.push_str(&text),
            ConfigPart::Env(name) => out.push_str(&resolver.env(&name)?),
        }
    }
    Some(out)
}

fn resolve_or_fail(
    value: &str,
    description: &str,
    resolver: &dyn KeyResolver,
) -> Result<String, AiError> {
    resolve_config_value(value, resolver).ok_or_else(|| AiError::Config {
        message: match value.strip_prefix('!') {
            Some(command) => {
                format!("Failed to resolve {description} from shell command: {command}")
            }
            None => {
                let missing: Vec<String> = config_value_env_names(value)
                    .into_iter()
                    .filter(|name| resolver.env(name).is_none())
                    .collect();
                match missing.as_slice() {
                    [] => format!("Failed to resolve {description}"),
                    [one] => {
                        format!("Failed to resolve {description} from environment variable: {one}")
                    }
                    many => format!(
                        "Failed to resolve {description} from environment variables: {}",
                        many.join(", ")
                    ),
                }
            }
        },
    })
}

/// Sets `name` in an ordered header list, replacing an entry with the same name.
pub fn set_header(headers: &mut Vec<(String, String)>, name: &str, value: &str) {
    match headers.iter_mut().find(|(existing, _)| existing == name) {
        Some(entry) => entry.1 = value.to_owned(),
        None => headers.push((name.to_owned(), value.to_owned())),
    }
}

/// Everything a request for one model needs that is resolved at request time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestAuth {
    /// The key, if any source gave one.
    pub api_key: Option<String>,
    /// Headers from the model table and `models.json`, later sources winning.
    pub headers: Vec<(String, String)>,
    /// The base URL with `{NAME}` placeholders substituted (Cloudflare).
    pub base_url: String,
    /// The provider settings the protocol reads at request time (`getProviderEnvValue`),
    /// those of [`PROVIDER_ENV_NAMES`] (or the protocol's own list) that are set.
    pub provider_env: Vec<(String, String)>,
    /// Credentials read from files (Vertex key files).
    pub cloud: crate::ai::CloudCredentials,
}

/// The environment variables a protocol reads at request time, besides keys (1.6.0's
/// `getProviderEnvValue` callers).
pub const PROVIDER_ENV_NAMES: &[&str] = &[
    "AZURE_OPENAI_BASE_URL",
    "AZURE_OPENAI_RESOURCE_NAME",
    "AZURE_OPENAI_API_VERSION",
    "AZURE_OPENAI_DEPLOYMENT_NAME_MAP",
];

/// Resolves a model's key, headers and base URL for one request (the reference's
/// `getApiKeyAndHeaders` plus the Cloudflare placeholder substitution). Blocking: may run
/// shell commands; call it from `spawn_blocking` in async code.
pub fn request_auth(
    registry: &ModelRegistry,
    credentials: &Credentials,
    model: &Model,
) -> Result<RequestAuth, AiError> {
    let resolver = credentials.resolver();
    let provider_config = registry.provider_request_config(&model.provider);
    let api_key = match provider_config.and_then(|config| config.api_key.as_deref()) {
        Some(configured) => credentials.api_key_configured(&model.provider, configured)?,
        None => credentials.api_key(&model.provider)?,
    };
    let mut headers = Vec::new();
    for (name, value) in model.headers.iter().flatten() {
        if let Some(value) = value.as_str() {
            set_header(&mut headers, name, value);
        }
    }
    for (name, value) in provider_config
        .and_then(|config| config.headers.as_deref())
        .unwrap_or(&[])
    {
        let description = format!("provider \"{}\" header \"{name}\"", model.provider);
        set_header(
            &mut headers,
            name,
            &resolve_or_fail(value, &description, resolver)?,
        );
    }
    for (name, value) in registry
        .model_headers(&model.provider, &model.id)
        .unwrap_or(&[])
    {
        let description = format!(
            "model \"{}/{}\" header \"{name}\"",
            model.provider, model.id
        );
        set_header(
            &mut headers,
            name,
            &resolve_or_fail(value, &description, resolver)?,
        );
    }
    if provider_config.is_some_and(|config| config.auth_header) {
        let Some(key) = &api_key else {
            return Err(AiError::Config {
                message: format!("No API key found for \"{}\"", model.provider),
            });
        };
        set_header(&mut headers, "Authorization", &format!("Bearer {key}"));
    }
    let (provider_env, cloud) = provider_settings(model, api_key.as_deref(), resolver);
    let mut base_url = resolve_base_url(model, resolver)?;
    // A Copilot token names its API host (`proxy-ep`); 1.6.0's `toAuth` uses it.
    if model.provider == "github-copilot"
        && let Some((access, enterprise)) = credentials.oauth_access(&model.provider)
        && api_key.as_deref() == Some(access.as_str())
    {
        base_url = credentials
            .endpoints
            .copilot_base_url(&access, enterprise.as_deref());
    }
    Ok(RequestAuth {
        api_key,
        headers,
        base_url,
        provider_env,
        cloud,
    })
}

/// Returns the provider settings a protocol reads at request time (the environment variables
/// it names, set ones only) and the credential files it needs (a Vertex call without an API
/// key reads its key file).
pub fn provider_settings(
    model: &Model,
    api_key: Option<&str>,
    resolver: &dyn KeyResolver,
) -> (Vec<(String, String)>, crate::ai::CloudCredentials) {
    let names: &[&str] = match model.api.as_str() {
        "azure-openai-responses" => PROVIDER_ENV_NAMES,
        "google-vertex" => crate::ai::vertex::PROVIDER_ENV_NAMES,
        "bedrock-converse-stream" => crate::ai::bedrock::PROVIDER_ENV_NAMES,
        _ => &[],
    };
    let provider_env = names
        .iter()
        .filter_map(|name| resolver.env(name).map(|value| ((*name).to_owned(), value)))
        .collect();
    let cloud =
        if model.api == "google-vertex" && crate::ai::vertex::resolve_api_key(api_key).is_none() {
            google_key_file(resolver)
        } else if model.api == "bedrock-converse-stream" {
            aws_shared_files(resolver)
        } else {
            crate::ai::CloudCredentials::None
        };
    (provider_env, cloud)
}

/// Reads the AWS shared credentials and config files (`AWS_SHARED_CREDENTIALS_FILE`, else
/// `~/.aws/credentials`; `AWS_CONFIG_FILE`, else `~/.aws/config`), for an SSO profile its
/// token cache file (`~/.aws/sso/cache/<sha1>.json`), the web identity and container token
/// files the environment names, and runs the active profile's `credential_process`.
pub fn aws_shared_files(resolver: &dyn KeyResolver) -> crate::ai::CloudCredentials {
    let path = |name: &str, default: &str| resolver.env(name).unwrap_or_else(|| default.to_owned());
    let mut files = crate::ai::aws_auth::SharedFiles {
        credentials: resolver.read_file(&path("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials")),
        config: resolver.read_file(&path("AWS_CONFIG_FILE", "~/.aws/config")),
        ..Default::default()
    };
    let env = |name: &str| resolver.env(name);
    if let Some(name) = crate::ai::aws_auth::sso_cache_file(&env, &files) {
        files.sso_token = resolver.read_file(&format!("~/.aws/sso/cache/{name}"));
    }
    if let Some(command) = crate::ai::aws_auth::credential_process(&env, &files) {
        files.process_output = resolver.run_command(&command);
    }
    if let Some(path) = resolver.env("AWS_WEB_IDENTITY_TOKEN_FILE") {
        files.web_identity_token = resolver.read_file(&path);
    }
    if let Some(path) = resolver.env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") {
        files.container_token = resolver.read_file(&path);
    }
    crate::ai::CloudCredentials::AwsFiles(files)
}

/// Where Application Default Credentials are looked for: `GOOGLE_APPLICATION_CREDENTIALS`,
/// else gcloud's `application_default_credentials.json` (in `CLOUDSDK_CONFIG`, else
/// `~/.config/gcloud`), as google-auth-library looks.
pub fn google_key_file_path(resolver: &dyn KeyResolver) -> String {
    if let Some(path) = resolver.env("GOOGLE_APPLICATION_CREDENTIALS") {
        return path;
    }
    let dir = resolver
        .env("CLOUDSDK_CONFIG")
        .unwrap_or_else(|| "~/.config/gcloud".to_owned());
    format!("{dir}/application_default_credentials.json")
}

/// Reads the Application Default Credentials file ([`google_key_file_path`]).
pub fn google_key_file(resolver: &dyn KeyResolver) -> crate::ai::CloudCredentials {
    let path = google_key_file_path(resolver);
    let text = resolver.read_file(&path);
    crate::ai::CloudCredentials::GoogleKeyFile { path, text }
}

/// Substitutes `{NAME}` placeholders of Cloudflare base URLs from the environment.
pub fn resolve_base_url(model: &Model, resolver: &dyn KeyResolver) -> Result<String, AiError> {
    static PLACEHOLDER: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"\{([A-Z_][A-Z0-9_]*)\}").ok());
    let cloudflare = matches!(
        model.provider.as_str(),
        "cloudflare-workers-ai" | "cloudflare-ai-gateway"
    );
    let Some(pattern) = PLACEHOLDER.as_ref().filter(|_| cloudflare) else {
        return Ok(model.base_url.clone());
    };
    let mut missing = None;
    let url = pattern.replace_all(&model.base_url, |caps: &regex::Captures<'_>| {
        let name = &caps[1];
        resolver.env(name).unwrap_or_else(|| {
            missing.get_or_insert_with(|| name.to_owned());
            String::new()
        })
    });
    match missing {
        Some(name) => Err(AiError::Config {
            message: format!(
                "{name} is required for provider {} but is not set.",
                model.provider
            ),
        }),
        None => Ok(url.into_owned()),
    }
}

/// Whether a model counts as available (the reference's `hasConfiguredAuth`; runs no
/// commands): a runtime key or `auth.json` entry, else the `models.json` `apiKey` when there
/// is one (a command, or a template whose variables are set), else the environment.
pub fn has_configured_auth(
    registry: &ModelRegistry,
    credentials: &Credentials,
    model: &Model,
) -> bool {
    if credentials.has_stored(&model.provider) {
        return true;
    }
    match registry
        .provider_request_config(&model.provider)
        .and_then(|config| config.api_key.as_deref())
    {
        Some(key) => config_value_configured(key, credentials.resolver()),
        None => env_api_key(&model.provider, credentials.resolver()).is_some(),
    }
}

/// Returns the available models in registry order (the reference's `getAvailable`).
pub fn available_models<'a>(
    registry: &'a ModelRegistry,
    credentials: &Credentials,
) -> Vec<&'a Model> {
    registry
        .all()
        .iter()
        .filter(|model| has_configured_auth(registry, credentials, model))
        .collect()
}

/// A refresh failure as the session reports it: what failed (never a token) and what to run.
fn refresh_error(provider: &str, error: &OAuthError) -> AiError {
    let message = if error.is_refusal() {
        format!(
            "Authentication failed for \"{provider}\": the provider refused the stored sign-in ({error}). {}",
            login_hint(provider)
        )
    } else {
        format!(
            "Authentication failed for \"{provider}\": the token could not be refreshed ({error}). Check the network, or {}",
            lowercase_first(&login_hint(provider))
        )
    };
    AiError::Auth { message }
}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Runs a future to completion from blocking code, on a thread of its own with its own
/// runtime (the caller may be a runtime's blocking thread or none).
fn run_async<T: Send + 'static>(
    future: impl std::future::Future<Output = Result<T, OAuthError>> + Send + 'static,
) -> Result<T, OAuthError> {
    let worker = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| OAuthError::Invalid(format!("cannot start a runtime: {error}")))?;
        runtime.block_on(future)
    });
    worker
        .join()
        .unwrap_or_else(|_| Err(OAuthError::Invalid("the refresh thread failed".to_owned())))
}

#[cfg(test)]
mod config_value_tests {
    use super::*;

    #[derive(Debug)]
    struct Vars(HashMap<&'static str, &'static str>);

    impl KeyResolver for Vars {
        fn env(&self, name: &str) -> Option<String> {
            self.0
                .get(name)
                .filter(|value| !value.is_empty())
                .map(|value| (*value).to_owned())
        }
        fn run_command(&self, command: &str) -> Option<String> {
            Some(format!("ran {command}"))
        }
    }

    fn vars() -> Vars {
        Vars(HashMap::from([("KEY", "k1"), ("HOST", "h"), ("EMPTY", "")]))
    }

    #[test]
    fn templates_interpolate_as_1_6_0_does() {
        let vars = vars();
        let resolve = |value: &str| resolve_config_value(value, &vars);
        assert_eq!(resolve("KEY").as_deref(), Some("KEY"));
        assert_eq!(resolve("$KEY").as_deref(), Some("k1"));
        assert_eq!(resolve("${KEY}").as_deref(), Some("k1"));
        assert_eq!(resolve("Bearer $KEY!").as_deref(), Some("Bearer k1!"));
        assert_eq!(resolve("${HOST}x-$KEY.y").as_deref(), Some("hx-k1.y"));
        assert_eq!(resolve("$$KEY $! $").as_deref(), Some("$KEY ! $"));
        assert_eq!(
            resolve("${not a name} ${KEY").as_deref(),
            Some("${not a name} ${KEY")
        );
        assert_eq!(resolve("$1abc").as_deref(), Some("$1abc"));
        assert_eq!(resolve("$MISSING"), None);
        assert_eq!(resolve("a${EMPTY}b"), None);
        assert_eq!(resolve("!echo $KEY").as_deref(), Some("ran echo $KEY"));
        assert_eq!(
            config_value_env_names("$A-${B}-$A-$$C"),
            ["A".to_owned(), "B".to_owned()]
        );
        assert!(config_value_configured("$KEY", &vars));
        assert!(!config_value_configured("$KEY$MISSING", &vars));
        assert!(config_value_configured("!false", &vars));
        assert!(config_value_configured("PLAIN", &vars));
    }

    #[test]
    fn unresolved_templates_name_the_missing_variables() {
        let vars = vars();
        let error = |value: &str| match resolve_or_fail(value, "API key for provider \"p\"", &vars)
        {
            Err(error) => error.message().to_owned(),
            Ok(value) => panic!("resolved to {value}"),
        };
        assert_eq!(
            error("$MISSING"),
            "Failed to resolve API key for provider \"p\" from environment variable: MISSING"
        );
        assert_eq!(
            error("${A}:$KEY:$B:$A"),
            "Failed to resolve API key for provider \"p\" from environment variables: A, B"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::support::clock::SteppingClock;

    #[derive(Debug, Default)]
    struct FakeEnv {
        vars: HashMap<String, String>,
        commands: HashMap<String, String>,
        runs: AtomicUsize,
    }

    impl KeyResolver for FakeEnv {
        fn env(&self, name: &str) -> Option<String> {
            self.vars
                .get(name)
                .filter(|value| !value.is_empty())
                .cloned()
        }
        fn run_command(&self, command: &str) -> Option<String> {
            self.runs.fetch_add(1, Ordering::SeqCst);
            self.commands.get(command).cloned()
        }
    }

    fn creds(auth: &str, env: FakeEnv) -> (Credentials, Arc<FakeEnv>) {
        let env = Arc::new(env);
        let creds = Credentials::new(
            AuthFile::parse(Some(auth)),
            env.clone(),
            Arc::new(SteppingClock::new(1_000, 1)),
        );
        (creds, env)
    }

    #[test]
    fn resolution_order_runtime_auth_env() {
        let mut env = FakeEnv::default();
        env.vars
            .insert("ANTHROPIC_API_KEY".into(), "env-key".into());
        env.vars.insert("OPENAI_API_KEY".into(), "oa-env".into());
        env.vars.insert("MY_KEY".into(), "from-var".into());
        env.commands.insert("echo hi".into(), "cmd-key".into());
        let (mut creds, env) = creds(
            r#"{"openai":{"type":"api_key","key":"$MY_KEY"},"mistral":{"type":"api_key","key":"MY_KEY"},"groq":{"type":"api_key","key":"!echo hi"},"xai":{"type":"api_key","key":"!false"}}"#,
            env,
        );
        assert_eq!(
            creds.api_key("anthropic").unwrap().as_deref(),
            Some("env-key")
        );
        assert_eq!(
            creds.api_key("openai").unwrap().as_deref(),
            Some("from-var")
        );
        // 1.6.0: a plain name is the key itself.
        assert_eq!(creds.api_key("mistral").unwrap().as_deref(), Some("MY_KEY"));
        assert_eq!(creds.api_key("groq").unwrap().as_deref(), Some("cmd-key"));
        assert_eq!(creds.api_key("groq").unwrap().as_deref(), Some("cmd-key"));
        assert_eq!(
            env.runs.load(Ordering::SeqCst),
            1,
            "auth.json commands are cached"
        );
        // An auth.json key that resolves to nothing stops the search (env is not consulted).
        assert_eq!(creds.api_key("xai").unwrap(), None);
        creds.set_runtime_key("openai", "cli");
        assert_eq!(creds.api_key("openai").unwrap().as_deref(), Some("cli"));
        assert_eq!(creds.api_key("custom").unwrap(), None);
    }

    #[test]
    fn oauth_tokens_are_used_until_they_expire() {
        let (creds, _) = creds(
            r#"{"anthropic":{"type":"oauth","access":"sk-ant-oat-1","refresh":"r","expires":5000},"github-copilot":{"type":"oauth","access":"a","expires":10}}"#,
            FakeEnv::default(),
        );
        assert_eq!(
            creds.api_key("anthropic").unwrap().as_deref(),
            Some("sk-ant-oat-1")
        );
        let err = creds.api_key("github-copilot").unwrap_err();
        assert!(matches!(err, AiError::Auth { .. }));
        assert!(
            err.message()
                .starts_with("Authentication failed for \"github-copilot\"")
        );
    }

    #[test]
    fn broken_auth_json_counts_as_empty() {
        let file = AuthFile::parse(Some("{not json"));
        assert!(file.error().is_some());
        assert!(!file.has("openai"));
    }

    #[test]
    fn request_auth_merges_headers_and_resolves_models_json_values() {
        let registry = ModelRegistry::load(
            Some(
                r#"{"providers":{"local":{"baseUrl":"http://h/v1","api":"openai-completions","apiKey":"LOCAL_KEY","authHeader":true,
                "headers":{"x-a":"1","x-b":"!printf b"},"models":[{"id":"m","headers":{"x-b":"model"}}]}}}"#,
            ),
            "models.json",
        );
        assert_eq!(registry.error(), None);
        let mut env = FakeEnv::default();
        env.commands.insert("printf b".into(), "B".into());
        let (creds, _) = creds("{}", env);
        let model = registry.find("local", "m").unwrap().clone();
        let auth = request_auth(&registry, &creds, &model).unwrap();
        assert_eq!(auth.api_key.as_deref(), Some("LOCAL_KEY"));
        assert_eq!(
            auth.headers,
            vec![
                ("x-a".to_owned(), "1".to_owned()),
                ("x-b".to_owned(), "model".to_owned()),
                ("Authorization".to_owned(), "Bearer LOCAL_KEY".to_owned()),
            ]
        );
        assert!(has_configured_auth(&registry, &creds, &model));
    }

    /// 1.6.0 reads a `models.json` `apiKey` before the environment (`composeApiKeyAuth`:
    /// the configured key replaces the built-in provider's environment lookup); `auth.json`
    /// and the runtime key still come first.
    #[test]
    fn a_models_json_key_wins_over_the_environment() {
        let registry = ModelRegistry::load(
            Some(
                r#"{"providers":{"mistral":{"baseUrl":"http://127.0.0.1:9","apiKey":"$TEAM_MISTRAL_KEY"},
                "openai":{"baseUrl":"http://127.0.0.1:9/v1","apiKey":"$UNSET_KEY"}}}"#,
            ),
            "models.json",
        );
        assert_eq!(registry.error(), None);
        let mut env = FakeEnv::default();
        env.vars.insert("MISTRAL_API_KEY".into(), "from-env".into());
        env.vars
            .insert("TEAM_MISTRAL_KEY".into(), "from-models-json".into());
        env.vars.insert("OPENAI_API_KEY".into(), "oa-env".into());
        let (mut creds, _) = creds("{}", env);
        let mistral = registry.find("mistral", "devstral-2512").unwrap().clone();
        let auth = request_auth(&registry, &creds, &mistral).unwrap();
        assert_eq!(auth.api_key.as_deref(), Some("from-models-json"));
        assert!(has_configured_auth(&registry, &creds, &mistral));
        // An unresolvable configured key is an error, not a fall-through to the environment.
        let openai = registry.find("openai", "gpt-5.4").unwrap().clone();
        let err = request_auth(&registry, &creds, &openai).unwrap_err();
        assert_eq!(
            err.message(),
            "Failed to resolve API key for provider \"openai\" from environment variable: UNSET_KEY"
        );
        assert!(!has_configured_auth(&registry, &creds, &openai));
        creds.set_runtime_key("mistral", "cli");
        let auth = request_auth(&registry, &creds, &mistral).unwrap();
        assert_eq!(auth.api_key.as_deref(), Some("cli"));
    }

    #[test]
    fn failing_header_commands_and_missing_placeholders_are_config_errors() {
        let registry = ModelRegistry::load(
            Some(r#"{"providers":{"anthropic":{"headers":{"x-team":"!nope"}}}}"#),
            "models.json",
        );
        let (creds, _) = creds("{}", FakeEnv::default());
        let model = registry
            .find("anthropic", "claude-sonnet-4-5")
            .unwrap()
            .clone();
        let err = request_auth(&registry, &creds, &model).unwrap_err();
        assert_eq!(
            err.message(),
            "Failed to resolve provider \"anthropic\" header \"x-team\" from shell command: nope"
        );
        let registry = ModelRegistry::builtin();
        let model = registry
            .all()
            .iter()
            .find(|model| model.provider == "cloudflare-workers-ai")
            .unwrap()
            .clone();
        let err = request_auth(&registry, &creds, &model).unwrap_err();
        assert_eq!(
            err.message(),
            "CLOUDFLARE_ACCOUNT_ID is required for provider cloudflare-workers-ai but is not set."
        );
    }
}
