//! Signing in and out (`pi auth login|logout|status`, the REPL's `/login` and `/logout`), the
//! flows of 1.6.0 per provider (`docs/providers.md`): a browser authorization code with PKCE
//! and a loopback callback, the redirect URL or code pasted instead on a headless machine
//! (Anthropic, OpenAI Codex); GitHub's device code (Copilot); an API key typed at a prompt
//! that does not echo it (every other provider). The credential goes to `auth.json` through
//! [`Credentials::save`] (under 1.6.0's lock, in its format).
//!
//! Invariant: nothing shown holds a token, code or verifier; the authorization URL shown
//! carries only the public challenge and state.

use crate::agent::tool::BoxFuture;
use crate::ai::auth::{Credentials, env_key_names};
use crate::ai::oauth::callback::CallbackServer;
use crate::ai::oauth::{self, OAuthError, OAuthProvider};

/// What a sign-in shows and asks, in the terminal of `pi auth` or the REPL.
pub trait LoginUi: Send {
    /// Shows a line.
    fn say(&mut self, text: &str);

    /// Asks for a line (`secret`: not echoed); `None` when input ended or was cancelled.
    fn ask<'a>(&'a mut self, question: &'a str, secret: bool) -> BoxFuture<'a, Option<String>>;

    /// Waits for the browser's redirect to `callback` or a pasted redirect URL or code,
    /// whichever comes first.
    fn code_or_paste<'a>(
        &'a mut self,
        question: &'a str,
        callback: &'a mut CallbackServer,
    ) -> BoxFuture<'a, Pasted>;
}

/// How to sign in.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoginOptions {
    /// Save an API key instead of signing in with an account.
    pub api_key: bool,
    /// Do not use the browser's redirect: the headless method.
    pub no_browser: bool,
}

/// Reads `--api-key` / `--no-browser` out of the words after `login`; the rest stay.
pub fn login_options(words: &[String]) -> (LoginOptions, Vec<String>) {
    let mut options = LoginOptions::default();
    let mut rest = Vec::new();
    for word in words {
        match word.as_str() {
            "--api-key" => options.api_key = true,
            "--no-browser" => options.no_browser = true,
            _ => rest.push(word.clone()),
        }
    }
    (options, rest)
}

/// What [`LoginUi::code_or_paste`] got.
#[derive(Debug)]
pub enum Pasted {
    /// The browser reached the callback with this code (or the provider's refusal).
    Callback(Result<String, OAuthError>),
    /// The user pasted this.
    Input(String),
    /// Input ended.
    Closed,
}

/// Why a sign-in failed.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// The flow failed.
    #[error("{0}")]
    OAuth(#[from] OAuthError),
    /// `auth.json` could not be changed.
    #[error("{0}")]
    Store(#[from] crate::ai::AiError),
    /// No such provider.
    #[error(
        "Unknown provider \"{0}\": `pi auth login` signs in to anthropic, openai-codex, github-copilot, kimi-coding, openrouter, xai, meta or radius, or saves an API key for a provider pi knows (pi --list-models shows them)"
    )]
    UnknownProvider(String),
    /// Nothing was entered.
    #[error("Login cancelled")]
    Cancelled,
}

/// The providers `/login` offers an account sign-in for.
pub fn oauth_providers() -> Vec<(&'static str, &'static str)> {
    OAuthProvider::ALL
        .iter()
        .map(|provider| (provider.id(), provider.name()))
        .collect()
}

/// Whether `provider` takes an API key at the prompt (a provider whose key pi knows how to
/// look up, or one `known` names).
fn takes_api_key(provider: &str, known: &dyn Fn(&str) -> bool) -> bool {
    !env_key_names(provider).is_empty() || known(provider)
}

/// Signs in to `provider` and stores the credential; returns what to tell the user.
/// `known` says whether a provider is in the model registry (API-key providers).
/// `options.api_key` saves an API key even for an OAuth provider; `options.no_browser` uses
/// the headless method (Anthropic's copy-the-code page, Codex's device code), as 1.6.0's
/// `pi auth login --api-key / --no-browser`.
pub async fn login(
    provider: &str,
    credentials: &Credentials,
    ui: &mut dyn LoginUi,
    known: &dyn Fn(&str) -> bool,
    options: LoginOptions,
) -> Result<String, LoginError> {
    let oauth_provider = OAuthProvider::from_id(provider).filter(|_| !options.api_key);
    let Some(oauth_provider) = oauth_provider else {
        if !takes_api_key(provider, known) && OAuthProvider::from_id(provider).is_none() {
            return Err(LoginError::UnknownProvider(
                crate::support::term::line(provider).into_owned(),
            ));
        }
        let key = ui
            .ask(&format!("Enter the API key for {provider}: "), true)
            .await
            .filter(|key| !key.trim().is_empty())
            .ok_or(LoginError::Cancelled)?;
        credentials.save(
            provider,
            serde_json::json!({ "type": "api_key", "key": key.trim() }),
        )?;
        return Ok(format!("Saved the API key for {provider} in auth.json"));
    };
    let endpoints = credentials.endpoints().clone();
    let http = oauth::http_client()?;
    let credential = match oauth_provider {
        OAuthProvider::GithubCopilot => {
            let input = ui
                .ask(
                    "GitHub Enterprise URL/domain (blank for github.com): ",
                    false,
                )
                .await
                .unwrap_or_default();
            let enterprise = oauth::normalize_domain(&input);
            if !input.trim().is_empty() && enterprise.is_none() {
                return Err(
                    OAuthError::Invalid("Invalid GitHub Enterprise URL/domain".into()).into(),
                );
            }
            let device =
                oauth::copilot_device_code(&endpoints, &http, enterprise.as_deref()).await?;
            ui.say(&format!(
                "Open {} and enter the code {}",
                crate::support::term::line(&device.verification_uri),
                crate::support::term::line(&device.user_code)
            ));
            ui.say("Waiting for GitHub to confirm the device…");
            oauth::copilot_complete(&endpoints, &http, &device, enterprise.as_deref()).await?
        }
        OAuthProvider::Anthropic if options.no_browser => {
            let authorization = oauth::anthropic_copy_code_authorization(&endpoints)?;
            ui.say("Open this URL, sign in, then copy the code Anthropic shows:");
            ui.say(&crate::support::term::line(&authorization.url));
            let input = ui
                .ask("Paste the code Anthropic shows after you sign in: ", false)
                .await
                .ok_or(LoginError::Cancelled)?;
            let code = oauth::code_from_input(&input, &authorization)?;
            ui.say("Exchanging authorization code for tokens…");
            oauth::exchange_code(
                oauth_provider,
                &endpoints,
                &http,
                &code,
                &authorization,
                credentials.clock().now_ms(),
            )
            .await?
        }
        OAuthProvider::OpenAiCodex if options.no_browser => {
            let device = oauth::codex_device_code(&endpoints, &http).await?;
            ui.say(&format!(
                "Open {} and enter the code {}",
                oauth::CODEX_DEVICE_VERIFICATION_URI,
                crate::support::term::line(&device.user_code)
            ));
            ui.say("Waiting for OpenAI to confirm the device…");
            let clock = credentials.clock_arc();
            oauth::codex_device_complete(&endpoints, &http, &device, &move || clock.now_ms())
                .await?
        }
        OAuthProvider::KimiCoding | OAuthProvider::Xai | OAuthProvider::Meta => {
            device_login(oauth_provider, credentials, ui, &http).await?
        }
        OAuthProvider::Radius => {
            let device = options.no_browser
                || ui
                    .ask(
                        "Sign in to Radius: 1) with the browser (recommended) 2) with a device code (from another device) [1]: ",
                        false,
                    )
                    .await
                    .is_some_and(|answer| answer.trim() == "2");
            if device {
                device_login(oauth_provider, credentials, ui, &http).await?
            } else {
                browser_login(oauth_provider, credentials, ui, &http).await?
            }
        }
        OAuthProvider::Anthropic | OAuthProvider::OpenAiCodex | OAuthProvider::OpenRouter => {
            browser_login(oauth_provider, credentials, ui, &http).await?
        }
    };
    credentials.save(provider, credential)?;
    Ok(format!(
        "Signed in to {}; the credential is in auth.json",
        oauth_provider.name()
    ))
}

/// The browser flow: callback server, authorization URL, the redirect or a paste, the code
/// exchange.
async fn browser_login(
    provider: OAuthProvider,
    credentials: &Credentials,
    ui: &mut dyn LoginUi,
    http: &reqwest::Client,
) -> Result<serde_json::Value, LoginError> {
    let endpoints = credentials.endpoints();
    let callback_host = endpoints.callback_host().to_owned();
    // (port, path, the host the callback binds, the host the redirect names)
    let (port, path, host, redirect_host) = match provider {
        OAuthProvider::Anthropic => (
            oauth::ANTHROPIC_CALLBACK_PORT,
            "/callback".to_owned(),
            callback_host,
            "localhost".to_owned(),
        ),
        // A random path: OpenRouter sends no state, so the path keeps stray requests out.
        OAuthProvider::OpenRouter => (
            0,
            format!("/oauth/callback/{}", oauth::pkce::random_hex(16)?),
            callback_host.clone(),
            callback_host,
        ),
        OAuthProvider::Radius => (
            oauth::RADIUS_CALLBACK_PORT,
            "/oauth/callback".to_owned(),
            "127.0.0.1".to_owned(),
            "127.0.0.1".to_owned(),
        ),
        _ => (
            oauth::CODEX_CALLBACK_PORT,
            "/auth/callback".to_owned(),
            callback_host,
            "localhost".to_owned(),
        ),
    };
    let preferred = endpoints.callback_port(port);
    let start =
        |port: u16| CallbackServer::start(&host, port, &path, &redirect_host, provider.name());
    let mut callback = start(preferred).await.ok();
    if callback.is_none() && provider == OAuthProvider::Anthropic && preferred != 0 {
        // Anthropic accepts any loopback port (1.6.0 falls back to a free one).
        callback = start(0).await.ok();
    }
    // Without a callback server the pasted redirect URL still works.
    let redirect_uri = callback.as_ref().map_or_else(
        || format!("http://{redirect_host}:{port}{path}"),
        |callback| callback.redirect_uri().to_owned(),
    );
    let authorization = match provider {
        OAuthProvider::Radius => {
            let endpoint = oauth::device::radius_discovery(
                endpoints,
                http,
                oauth::device::RADIUS_DEFAULT_GATEWAY,
            )
            .await?;
            oauth::radius_authorization(&endpoint, &redirect_uri)?
        }
        _ => oauth::authorization(provider, endpoints, &redirect_uri)?,
    };
    if let Some(callback) = &callback {
        if authorization.state.is_empty() {
            callback.accept_without_state();
        } else {
            callback.expect_state(&authorization.state);
        }
    }
    ui.say(&format!("Sign in to {} in your browser:", provider.name()));
    ui.say(&crate::support::term::line(&authorization.url));
    match &endpoints.browser {
        Some(browser) => open_browser(browser, &authorization.url),
        None if endpoints.test_base.is_none() => open_browser(
            if cfg!(target_os = "macos") {
                "open"
            } else {
                "xdg-open"
            },
            &authorization.url,
        ),
        None => {}
    }
    let question =
        "Complete login in your browser, or paste the authorization code / redirect URL here: ";
    let pasted = match callback.as_mut() {
        Some(callback) => ui.code_or_paste(question, callback).await,
        None => match ui.ask(question, false).await {
            Some(input) => Pasted::Input(input),
            None => Pasted::Closed,
        },
    };
    drop(callback);
    let code = match pasted {
        Pasted::Callback(code) => code?,
        Pasted::Input(input) => oauth::code_from_input(&input, &authorization)?,
        Pasted::Closed => return Err(LoginError::Cancelled),
    };
    ui.say("Exchanging authorization code for tokens…");
    Ok(oauth::exchange_code(
        provider,
        endpoints,
        http,
        &code,
        &authorization,
        credentials.clock().now_ms(),
    )
    .await?)
}

/// A device-code sign-in (Kimi Code, xAI, Meta, Radius's device method): the page and code
/// shown, the poll, and Meta's key mint.
async fn device_login(
    provider: OAuthProvider,
    credentials: &Credentials,
    ui: &mut dyn LoginUi,
    http: &reqwest::Client,
) -> Result<serde_json::Value, LoginError> {
    use oauth::device;
    let endpoints = credentials.endpoints();
    let gateway = device::RADIUS_DEFAULT_GATEWAY;
    let started = match provider {
        OAuthProvider::KimiCoding => device::kimi_start(endpoints, http).await?,
        OAuthProvider::Xai => device::xai_start(endpoints, http).await?,
        OAuthProvider::Meta => device::meta_start(endpoints, http).await?,
        _ => device::radius_start(endpoints, http, gateway).await?,
    };
    ui.say(&format!(
        "Open {} and enter the code {}",
        crate::support::term::line(&started.verification_uri),
        crate::support::term::line(&started.user_code)
    ));
    ui.say(&format!(
        "Waiting for {} to confirm the device…",
        provider.name()
    ));
    let clock = credentials.clock_arc();
    let now = move || clock.now_ms();
    Ok(match provider {
        OAuthProvider::KimiCoding => device::kimi_complete(endpoints, http, &started, &now).await?,
        OAuthProvider::Xai => device::xai_complete(endpoints, http, &started, &now).await?,
        OAuthProvider::Meta => {
            ui.say("Enabling Meta Model API access…");
            device::meta_complete(endpoints, http, &started, &now).await?
        }
        _ => device::radius_complete(endpoints, http, gateway, &started, &now).await?,
    })
}

/// Opens the URL with the desktop's opener when there is one (nothing is shown on failure:
/// the URL is printed anyway).
fn open_browser(opener: &str, url: &str) {
    let _ = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

/// Removes the provider's stored credential; what to tell the user.
pub fn logout(provider: &str, credentials: &Credentials) -> Result<String, LoginError> {
    let name = crate::support::term::line(provider).into_owned();
    if credentials.remove(provider)? {
        Ok(format!(
            "Removed the stored credential of {name} from auth.json (environment variables and models.json are unchanged; the provider still knows the sign-in)"
        ))
    } else {
        Ok(format!("No stored credential for {name}"))
    }
}

/// One line per stored credential: provider, kind, and for OAuth its expiry.
pub fn status(credentials: &Credentials, only: Option<&str>) -> Vec<String> {
    let now = credentials.clock().now_ms();
    let mut lines: Vec<String> = credentials
        .stored()
        .into_iter()
        .filter(|(provider, _, _)| only.is_none_or(|only| only == provider))
        .map(|(provider, kind, expires)| {
            let provider = crate::support::term::line(&provider).into_owned();
            match (kind.as_str(), expires) {
                ("oauth", Some(expires)) if expires > now => {
                    let minutes = (expires - now) / 60_000;
                    format!("{provider}: signed in (OAuth), token valid for {minutes} more minutes (refreshed automatically)")
                }
                ("oauth", _) => format!(
                    "{provider}: signed in (OAuth), token expired (refreshed at the next request)"
                ),
                ("api_key", _) => format!("{provider}: API key"),
                (other, _) => format!("{provider}: {}", crate::support::term::line(other)),
            }
        })
        .collect();
    if lines.is_empty() {
        lines.push(match only {
            Some(provider) => format!(
                "{}: not signed in (run `pi auth login {0}` or /login {0})",
                crate::support::term::line(provider)
            ),
            None => "No stored credentials (run `pi auth login <provider>` or /login)".to_owned(),
        });
    }
    lines
}
