//! Starting the agent: from the parsed command line, the environment and the settings files
//! to an [`AgentSession`] in the chosen mode (spec models-providers-settings §6.6–§6.7 for the
//! model and thinking level, extensions-and-modes §7 and §9 for modes and session flags).
//!
//! Invariant: this is where files and the environment are read for an agent run; everything
//! below gets values.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};

use crate::ai::auth::{self, Credentials};
use crate::ai::models::ThinkingLevel;
use crate::ai::resolve::{self, resolve_cli_model, resolve_model_scope};
use crate::ai::{AiClient, CacheRetention, ModelRegistry, ThinkingBudgets, TransportConfig};
use crate::cli::agent_args::{self, AgentArgs, Diagnostic, ListModels, Mode};
use crate::cli::autoimport::AutoImport;
use crate::cli::config::Env;
use crate::cli::export::{BranchId, write_atomically, write_branch_as};
use crate::cli::help::{help_text, list_models};
use crate::cli::import::{FileReport, import_file};
use crate::cli::settings::{Scope, Settings};
use crate::cli::{UsageError, keys};
use crate::model::SessionHeader;
use crate::model::ids::SessionId;
use crate::model::message::ImageContent;
use crate::modes::{ExportTarget, ImportedFile, Interchange, TerminalConfig};
use crate::session::extensions::{self, DiscoveryInput, ExtensionsConfig};
use crate::session::resources::{HarnessDocs, ResourceConfig, Resources, ScopeSettings};
use crate::session::settings::SaveError;
use crate::session::settings::{
    CompactionToggles, QueueMode, RetrySettings, SessionSettings, SettingsSink,
};
use crate::session::tools::read::ReadConfig;
use crate::session::tools::shell::ShellConfig;
use crate::session::tools::workspace::{self, Workspace};
use crate::session::tools::{ToolSelection, ToolSet, ToolsConfig, builtin_tools};
use crate::session::{LeaseSettings, ModelCandidates, ModelChoice, SessionConfig, SessionTarget};
use crate::store::{ImportMode, ImportStatus, StoreError};
use crate::support::clock::iso_from_ms;
use crate::support::term;

pub use crate::modes::Prepared;
use crate::store::{SessionStore, StoreConfig, StoreLocation};

/// Writes the settings the session persists into the global `settings.json`.
#[derive(Debug)]
struct FileSettingsSink {
    settings: Mutex<Settings>,
}

impl FileSettingsSink {
    fn with<T>(&self, write: impl FnOnce(&mut Settings) -> T) -> T {
        let mut settings = match self.settings.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        write(&mut settings)
    }
}

impl SettingsSink for FileSettingsSink {
    fn set_default_model(&self, provider: &str, model_id: &str) {
        // A settings file that cannot be written keeps the session going; the reference
        // reports it the same way (not at all in print mode).
        let _ = self.with(|settings| settings.set_default_model(provider, model_id));
    }
    fn set_default_thinking_level(&self, level: ThinkingLevel) {
        let _ = self.with(|settings| settings.set_default_thinking_level(level.as_str()));
    }
    fn set_auto_compaction(&self, enabled: bool) {
        let _ = self.with(|settings| settings.set_compaction_enabled(enabled));
    }
    fn set_auto_retry(&self, enabled: bool) {
        let _ = self.with(|settings| settings.set_retry_enabled(enabled));
    }
    fn set_steering_mode(&self, mode: QueueMode) {
        let _ = self.with(|settings| settings.set_steering_mode(mode.as_str()));
    }
    fn set_follow_up_mode(&self, mode: QueueMode) {
        let _ = self.with(|settings| settings.set_follow_up_mode(mode.as_str()));
    }
    fn set_enabled_models(&self, patterns: &[String]) -> Result<(), SaveError> {
        let value = serde_json::Value::from(patterns.to_vec());
        self.set_value("enabledModels", value)
    }
    fn set_value(&self, key: &str, value: serde_json::Value) -> Result<(), SaveError> {
        self.with(|settings| settings.set_global(key, Some(value)))
            .map_err(|error| SaveError::Write(error.to_string()))
    }
}

/// The session settings from `settings.json` and the environment.
pub fn session_settings_of(settings: &Settings, env: &Env) -> SessionSettings {
    let retry = settings.retry();
    let provider = settings.provider_retry();
    let budgets = settings.thinking_budgets();
    let compaction = settings.compaction();
    let positive = |value: i64| u64::try_from(value).unwrap_or(0);
    let timeout = provider
        .timeout_ms
        .map_or(std::time::Duration::from_millis(600_000), |ms| {
            std::time::Duration::from_millis(positive(ms))
        });
    let telemetry = match env.var("PI_TELEMETRY") {
        Some("0" | "false") => false,
        Some(_) => true,
        None => settings.enable_install_telemetry(),
    };
    SessionSettings {
        retry: RetrySettings {
            enabled: retry.enabled,
            max_retries: u32::try_from(retry.max_retries).unwrap_or(0),
            base_delay_ms: positive(retry.base_delay_ms),
            max_agent_delay_ms: positive(retry.max_agent_delay_ms),
        },
        transport: TransportConfig {
            // 1.6.0: no transport retries unless `retry.provider.maxRetries` is set (the
            // agent-level retry omits each failed attempt from the context instead).
            max_retries: provider
                .max_retries
                .map_or(0, |value| u32::try_from(value).unwrap_or(0)),
            request_timeout: timeout,
            idle_timeout: timeout,
            max_retry_delay: (provider.max_retry_delay_ms > 0)
                .then(|| std::time::Duration::from_millis(positive(provider.max_retry_delay_ms))),
            ..TransportConfig::default()
        },
        thinking_budgets: ThinkingBudgets {
            minimal: positive(budgets.minimal),
            low: positive(budgets.low),
            medium: positive(budgets.medium),
            high: positive(budgets.high),
        },
        cache_retention: match env.var("PI_CACHE_RETENTION") {
            Some("long") => CacheRetention::Long,
            _ => CacheRetention::Short,
        },
        block_images: settings.block_images(),
        default_thinking: settings
            .default_thinking_level()
            .and_then(ThinkingLevel::parse),
        steering_mode: QueueMode::parse(settings.steering_mode()).unwrap_or_default(),
        follow_up_mode: QueueMode::parse(settings.follow_up_mode()).unwrap_or_default(),
        compaction: CompactionToggles {
            enabled: compaction.enabled,
            reserve_tokens: positive(compaction.reserve_tokens),
            keep_recent_tokens: positive(compaction.keep_recent_tokens),
        },
        branch_summary_reserve_tokens: positive(settings.branch_summary().reserve_tokens),
        telemetry,
        lease: {
            let (heartbeat_ms, stale_ms) = settings.lease_intervals();
            LeaseSettings {
                config: env.lease_config(heartbeat_ms, stale_ms),
                owner: "pi".to_owned(),
                rescue_dir: Some(env.agent_dir().join("unsaved")),
            }
        },
    }
}

/// The `executableExtensions` list of one settings scope.
fn executable_extensions(settings: &Settings, scope: Scope) -> Vec<String> {
    extensions::discovery::executable_entries(&settings.scope_object(scope))
}

/// Finds the executable extensions (`-e`, settings `executableExtensions`, the extension
/// directories) and the time limit (`executableExtensionTimeoutMs`); the skipped reference
/// extensions and unusable paths become warnings.
fn extensions_config(
    args: &AgentArgs,
    settings: &Settings,
    env: &Env,
    agent_dir: &Path,
    project_trusted: bool,
    warnings: &mut Vec<String>,
) -> ExtensionsConfig {
    let project = executable_extensions(settings, Scope::Project);
    let user = executable_extensions(settings, Scope::Global);
    let found = extensions::discovery::discover(&DiscoveryInput {
        cwd: env.cwd(),
        agent_dir,
        home: env.home(),
        cli_paths: &args.extensions,
        project_settings: &project,
        user_settings: &user,
        discover: !args.no_extensions,
        project_trusted,
    });
    warnings.extend(found.problems.iter().cloned());
    let timeout = settings
        .get("executableExtensionTimeoutMs")
        .and_then(serde_json::Value::as_u64)
        .filter(|ms| *ms > 0)
        .map_or(
            extensions::DEFAULT_TIMEOUT,
            std::time::Duration::from_millis,
        );
    // `-e` paths keep meaning what they meant here when the runtime moves to a session of
    // another directory (which then brings its own project extensions).
    let cli_paths = args
        .extensions
        .iter()
        .map(|value| {
            let path = Path::new(value);
            if value.starts_with('~') || path.is_absolute() {
                value.clone()
            } else {
                env.cwd().join(path).to_string_lossy().into_owned()
            }
        })
        .collect();
    ExtensionsConfig {
        executables: found.executables,
        rediscovery: Some(extensions::Rediscovery {
            agent_dir: agent_dir.to_path_buf(),
            home: env.home().map(Path::to_path_buf),
            cli_paths,
            user_settings: user,
            discover: !args.no_extensions,
        }),
        timeout,
        env: env
            .vars()
            .iter()
            .map(|(key, value)| (key.into(), value.into()))
            .collect(),
        ..ExtensionsConfig::default()
    }
}

/// Where the REPL's themes come from and which one it starts with (1.6.0's theme resources:
/// `--theme` paths, the `themes` settings entries, `.pi/themes` of a trusted project and
/// `<agent dir>/themes`; `--use-theme` over the `theme` setting), and the terminal's colour
/// capability and background as the reference reads them from the environment.
fn theme_config(
    args: &AgentArgs,
    env: &Env,
    resources: &ResourceConfig,
    setting: Option<&str>,
) -> crate::modes::theme::ThemeConfig {
    use crate::session::resources::discovery::{self, Kind};
    let input = discovery::DiscoveryInput {
        cwd: &resources.cwd,
        agent_dir: &resources.agent_dir,
        home: resources.home.as_deref(),
        discover: !args.no_themes,
        project_entries: &resources.project_settings.themes,
        user_entries: &resources.user_settings.themes,
        cli_paths: &args.themes,
        project_trusted: resources.project_trusted,
    };
    let sources = discovery::resolve_resource_paths(&input, Kind::Themes)
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    crate::modes::theme::ThemeConfig {
        sources,
        setting: args.use_theme.clone().or(setting.map(str::to_owned)),
        light: env
            .var("COLORFGBG")
            .and_then(crate::modes::theme::light_background)
            .unwrap_or(false),
        mode: color_mode(env),
    }
}

/// Truecolor where the terminal announces it (`COLORTERM=truecolor|24bit`, a `TERM` ending in
/// `-direct`) or is one known to have it (outside tmux and screen, which pass it on only when
/// announced), else 256 colours: the reference's `detectCapabilitiesFromEnvironment`.
fn color_mode(env: &Env) -> crate::modes::theme::ColorMode {
    use crate::modes::theme::ColorMode;
    let lower = |name: &str| env.var(name).unwrap_or("").to_ascii_lowercase();
    let (term, program, colorterm) = (lower("TERM"), lower("TERM_PROGRAM"), lower("COLORTERM"));
    let announced = colorterm == "truecolor" || colorterm == "24bit" || term.ends_with("-direct");
    let multiplexer =
        env.var("TMUX").is_some() || term.starts_with("tmux") || term.starts_with("screen");
    let known = !multiplexer
        && (matches!(
            program.as_str(),
            "rex"
                | "kitty"
                | "ghostty"
                | "wezterm"
                | "warpterminal"
                | "iterm.app"
                | "alacritty"
                | "vscode"
                | "zed"
        ) || [
            "KITTY_WINDOW_ID",
            "GHOSTTY_RESOURCES_DIR",
            "WEZTERM_PANE",
            "WARP_SESSION_ID",
            "ITERM_SESSION_ID",
            "WT_SESSION",
            "ALACRITTY_WINDOW_ID",
        ]
        .iter()
        .any(|name| env.var(name).is_some())
            || term.contains("ghostty")
            || term.starts_with("alacritty"));
    if announced || known {
        ColorMode::TrueColor
    } else {
        ColorMode::Ansi256
    }
}

fn local_date(env: &Env) -> chrono::NaiveDate {
    if env.var("PI_TEST_CLOCK").is_some() {
        let ms = env.clock().now_ms();
        return chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms).map_or_else(
            || chrono::Local::now().date_naive(),
            |time| time.date_naive(),
        );
    }
    chrono::Local::now().date_naive()
}

/// Reads `@file` arguments as the reference does: text files inlined in `<file>` tags, images
/// attached (resized to the inline limits when `auto_resize`).
pub fn process_file_args(
    files: &[String],
    env: &Env,
    auto_resize: bool,
) -> Result<(String, Vec<ImageContent>)> {
    use base64::Engine;
    let mut text = String::new();
    let mut images = Vec::new();
    for arg in files {
        let path = workspace::resolve_read_path(arg, env.cwd(), env.home());
        let absolute = workspace::normalize(&path);
        let shown = absolute.display();
        let bytes =
            std::fs::read(&absolute).map_err(|_| anyhow::anyhow!("File not found: {shown}"))?;
        if bytes.is_empty() {
            continue;
        }
        let head = &bytes[..bytes.len().min(64)];
        match crate::session::tools::image::sniff_image_mime(head) {
            Some(mime) => {
                let (data, mime_type, note) = if auto_resize {
                    match crate::session::tools::image::resize_for_inline(&bytes, mime) {
                        Some(resized) => (
                            resized.data.clone(),
                            resized.mime_type.clone(),
                            resized.dimension_note(),
                        ),
                        None => {
                            text.push_str(&format!(
                                "<file name=\"{shown}\">[Image omitted: could not be resized below the inline image size limit.]</file>\n"
                            ));
                            continue;
                        }
                    }
                } else {
                    (
                        base64::engine::general_purpose::STANDARD.encode(&bytes),
                        mime.to_owned(),
                        None,
                    )
                };
                images.push(ImageContent {
                    data,
                    mime_type,
                    extra: serde_json::Map::new(),
                });
                text.push_str(&format!(
                    "<file name=\"{shown}\">{}</file>\n",
                    note.unwrap_or_default()
                ));
            }
            None => {
                let content = String::from_utf8_lossy(&bytes);
                text.push_str(&format!("<file name=\"{shown}\">\n{content}\n</file>\n"));
            }
        }
    }
    Ok((text, images))
}

fn parse_level(text: Option<&str>) -> Option<ThinkingLevel> {
    text.and_then(ThinkingLevel::parse)
}

/// Opens the store for an agent run (an in-memory one with `--no-session`); `busy_ms` is the
/// settings' `database.busyTimeoutMs`.
pub fn open_store(
    env: &Env,
    db: Option<&Path>,
    no_session: bool,
    busy_ms: Option<u64>,
) -> Result<SessionStore> {
    let mut config: StoreConfig = env.store_config(db);
    config.busy_timeout = env.busy_timeout(busy_ms);
    if no_session {
        config.location = StoreLocation::Memory;
    }
    Ok(SessionStore::open(config)?)
}

/// Resolves the model candidates (§6.6) and applies `--api-key`.
fn model_candidates(
    args: &AgentArgs,
    settings: &Settings,
    registry: &ModelRegistry,
    credentials: &mut Credentials,
    warnings: &mut Vec<String>,
) -> Result<ModelCandidates> {
    let explicit =
        match resolve_cli_model(args.provider.as_deref(), args.model.as_deref(), registry) {
            Ok(found) => found.map(|cli| {
                if let Some(warning) = cli.warning {
                    warnings.push(warning);
                }
                ModelChoice {
                    model: cli.model,
                    thinking: cli.thinking,
                }
            }),
            Err(message) => bail!(message),
        };
    if let (Some(key), Some(choice)) = (&args.api_key, &explicit) {
        credentials.set_runtime_key(&choice.model.provider, key);
    }
    let available: Vec<&crate::ai::Model> = auth::available_models(registry, credentials);
    let patterns = args.models.clone().or_else(|| settings.enabled_models());
    let mut scope = Vec::new();
    if let Some(patterns) = patterns.filter(|patterns| !patterns.is_empty()) {
        let (scoped, scope_warnings) = resolve_model_scope(&patterns, &available);
        warnings.extend(scope_warnings);
        scope = scoped
            .into_iter()
            .map(|entry| ModelChoice {
                model: entry.model.clone(),
                thinking: entry.thinking,
            })
            .collect();
    }
    let default = match (settings.default_provider(), settings.default_model()) {
        (Some(provider), Some(id)) => registry.find(provider, id).cloned(),
        _ => None,
    };
    let scoped = scope.first().map(|first| {
        default
            .as_ref()
            .and_then(|default| {
                scope.iter().find(|choice| {
                    choice.model.provider == default.provider && choice.model.id == default.id
                })
            })
            .unwrap_or(first)
            .clone()
    });
    let fallback = default.or_else(|| resolve::pick_default_model(&available).cloned());
    if let (Some(key), None, Some(model)) = (&args.api_key, &explicit, &fallback) {
        credentials.set_runtime_key(&model.provider, key);
    }
    Ok(ModelCandidates {
        explicit,
        scoped,
        fallback,
        explicit_thinking: parse_level(args.thinking.as_deref()),
        scope,
    })
}

/// Returns one line saying what an import did (as `pi import` words it).
fn import_summary(report: &FileReport) -> String {
    let file = term::line(&report.file.to_string_lossy()).into_owned();
    match (&report.status, &report.error) {
        (ImportStatus::Refused, Some(error)) => format!("refused {file}: {}", term::line(error)),
        (status, _) => {
            let session = report.session.as_ref().map_or_else(String::new, |id| {
                format!(" as session {}", term::line(id.as_str()))
            });
            let mut text = format!(
                "{} {file}{session} ({} entries, {} added",
                status.as_str(),
                report.entries,
                report.added
            );
            if !report.skipped.is_empty() {
                text.push_str(&format!(
                    ", {} lines skipped (`pi import --json` lists them)",
                    report.skipped.len()
                ));
            }
            text.push(')');
            text
        }
    }
}

/// Imports a JSONL file named by `--session` or `--fork` (exactly as `pi import` does) and
/// returns its session; says so on stderr in one line.
fn import_session_file(store: &SessionStore, env: &Env, value: &str) -> Result<SessionId> {
    let path = env.absolute(&env.expand_tilde(value));
    // A FIFO or a device is refused by the import, naming what it is.
    if !path.exists() {
        bail!(
            "{}: no such session file (a SESSION argument containing `/` or ending in .jsonl is a file)",
            path.display()
        );
    }
    let report = import_file(store, &path, ImportMode::Merge, &mut |_| {})?;
    let summary = import_summary(&report);
    match (&report.status, &report.session) {
        (ImportStatus::Refused, _) | (_, None) => bail!("{summary}"),
        (_, Some(id)) => {
            let _ = writeln!(std::io::stderr(), "pi: {}", term::line(&summary));
            Ok(id.clone())
        }
    }
}

/// The import and export that the REPL's `/import` and `/export` borrow from `cli`, and the
/// automatic import of `/resume`, `-r` and RPC `switch_session`.
fn interchange(auto_import: AutoImport, left: crate::modes::LeftFn) -> Interchange {
    Interchange {
        left,
        refresh: Arc::new(move |store| {
            let writer = store.clone();
            auto_import.run(store, &|| Ok(writer.clone())).warnings
        }),
        import: Arc::new(|store, path| {
            let report = import_file(store, path, ImportMode::Merge, &mut |_| {})?;
            let session = match report.status {
                ImportStatus::Refused => None,
                ImportStatus::Imported | ImportStatus::Updated | ImportStatus::Unchanged => {
                    report.session.clone()
                }
            };
            Ok(ImportedFile {
                session,
                summary: import_summary(&report),
            })
        }),
        export_branch: Arc::new(|store, session, unsaved, target| {
            let new = BranchId::new(store);
            let path = match target {
                ExportTarget::File(path) => path.clone(),
                ExportTarget::Directory(dir) => {
                    std::fs::create_dir_all(dir)
                        .with_context(|| format!("creating {}", dir.display()))?;
                    dir.join(new.file_name())
                }
            };
            write_atomically(&path, |out| {
                write_branch_as(store, session, &new, unsaved, out)
            })?;
            Ok(path)
        }),
    }
}

/// Resolves `--session`, `--fork`, `-c` and `--no-session` to a session target; before a
/// session is looked up in the database (`-c`, a session id or prefix), what the reference
/// wrote since the last look is imported (`cli/autoimport.rs`; its problems go to `warnings`).
fn session_target(
    args: &AgentArgs,
    store: &SessionStore,
    env: &Env,
    auto_import: &AutoImport,
    warnings: &mut Vec<String>,
) -> Result<SessionTarget> {
    // (`--session-id` looks up too: a session of that id the reference wrote is imported
    // first, and then continued, not shadowed by a new one.)
    let looks_up = !args.no_session
        && (args.continue_session
            || args.session_id.is_some()
            || args.fork.as_deref().is_some_and(|fork| !names_a_file(fork))
            || args
                .session
                .as_deref()
                .is_some_and(|session| !names_a_file(session)));
    if looks_up {
        let writer = store.clone();
        warnings.extend(auto_import.run(store, &|| Ok(writer.clone())).warnings);
    }
    if let Some(id) = &args.session_id {
        return session_with_id(args, store, env, id);
    }
    if let Some(source) = &args.fork {
        if args.session.is_some() || args.continue_session || args.resume || args.no_session {
            return Err(UsageError(
                "--fork cannot be combined with --session, --continue, --resume or --no-session"
                    .to_owned(),
            )
            .into());
        }
        let id = if names_a_file(source) {
            import_session_file(store, env, source)?
        } else {
            store.resolve(source)?
        };
        let cwd = env.cwd().to_string_lossy().into_owned();
        let copy = store.copy_session(&id, &cwd)?;
        return Ok(SessionTarget::Open(copy.id));
    }
    if let Some(session) = &args.session {
        if names_a_file(session) {
            return Ok(SessionTarget::Open(import_session_file(
                store, env, session,
            )?));
        }
        return Ok(SessionTarget::Open(store.resolve(session)?));
    }
    if args.continue_session {
        return Ok(SessionTarget::ContinueRecent);
    }
    Ok(SessionTarget::New {
        parent_session: None,
    })
}

/// Whether a `--session`/`--fork` value names a session file rather than an id or prefix.
fn names_a_file(value: &str) -> bool {
    value.contains('/') || value.ends_with(".jsonl")
}

/// Whether a `--session-id` is one the reference takes: letters, digits, `.`, `_` and `-`,
/// starting and ending with a letter or digit.
fn valid_session_id(id: &str) -> bool {
    let edge = |ch: Option<char>| ch.is_some_and(|ch| ch.is_ascii_alphanumeric());
    edge(id.chars().next())
        && edge(id.chars().last())
        && id
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '-'))
}

/// `--session-id ID` as 1.6.0 takes it: the current directory's session with that id, or a
/// new empty session under it; with `--fork`, the fork's id. The id of a session of another directory is refused (pi's
/// store holds one session per id; the reference's files would be two).
fn session_with_id(
    args: &AgentArgs,
    store: &SessionStore,
    env: &Env,
    id: &str,
) -> Result<SessionTarget> {
    if args.session.is_some() || args.continue_session || args.resume {
        return Err(UsageError(
            "--session-id cannot be combined with --session, --continue or --resume".to_owned(),
        )
        .into());
    }
    if !valid_session_id(id) {
        return Err(UsageError(format!(
            "--session-id {:?}: an id has letters, digits, '.', '_' and '-', and starts and ends with a letter or digit",
            term::line(id)
        ))
        .into());
    }
    let cwd = env.cwd().to_string_lossy().into_owned();
    let session = SessionId::new(id);
    // With --fork: the fork gets this id (1.6.0 "combine it with --fork to choose the new ID").
    if let Some(source) = &args.fork {
        if args.no_session {
            return Err(
                UsageError("--fork cannot be combined with --no-session".to_owned()).into(),
            );
        }
        let source_id = if names_a_file(source) {
            import_session_file(store, env, source)?
        } else {
            store.resolve(source)?
        };
        let copy = match store.copy_session_as(&source_id, &cwd, Some(&session)) {
            Err(StoreError::SessionExists { .. }) => {
                return Err(UsageError(format!(
                    "--session-id {}: a session with that id exists already; the fork needs a new one",
                    term::line(id)
                ))
                .into());
            }
            other => other?,
        };
        return Ok(SessionTarget::Open(copy.id));
    }
    match store.session(&session) {
        Ok(found) if found.cwd == cwd => Ok(SessionTarget::Open(session)),
        Ok(found) => Err(UsageError(format!(
            "--session-id {}: that session belongs to {}; open it with --session {}",
            term::line(id),
            term::line(&found.cwd),
            term::line(id)
        ))
        .into()),
        Err(StoreError::SessionNotFound { .. }) => {
            let now = env.clock().now_ms();
            let header = SessionHeader::new(session.clone(), iso_from_ms(now), cwd, None);
            store.insert_raw_session(&header, header.to_line().as_bytes(), &[])?;
            Ok(SessionTarget::Open(session))
        }
        Err(error) => Err(error.into()),
    }
}

/// Builds everything for an agent run.
pub fn prepare(
    args: &AgentArgs,
    env: &Env,
    db: Option<&Path>,
    stdin_text: Option<String>,
) -> Result<Prepared> {
    let mut warnings = Vec::new();
    let agent_dir = env.agent_dir();
    // Both files, the project's included: only the session lookup reads them (the database's
    // busy timeout, the reference's sessions directory), as the reference looks up its session
    // before it resolves project trust (`docs/SECURITY.md`, "Project trust").
    let lookup_settings = Settings::load(&agent_dir, env.cwd(), env.home());
    let clock = env.clock();
    let ids = env.id_source();
    let store = open_store(env, db, args.no_session, lookup_settings.busy_timeout_ms())?;
    let mut auto_import = AutoImport::new(env, &lookup_settings, args.session_dir.as_deref());
    // An in-memory session store keeps nothing: importing into it would only cost time.
    auto_import.enabled &= !args.no_session;
    let target = session_target(args, &store, env, &auto_import, &mut warnings)?;
    // A session pulled from a remote archive is someone else's (or another machine's) history:
    // read-only here, continued through a local fork (`docs/SYNC.md`).
    if let SessionTarget::Open(id) = &target
        && let Some(origin) = store.sync_origin(id)?
    {
        return Err(UsageError(format!(
            "session {} was pulled from remote {} ({}@{}) and is read-only here; continue it in a local copy with `pi --fork {}`",
            term::line(id.as_str()),
            term::line(&origin.remote),
            term::line(&origin.user),
            term::line(&origin.host),
            term::line(id.as_str())
        ))
        .into());
    }

    // Project trust, for the directory the runtime will work in. The startup directory's
    // project counts only when that is the one (a session of another directory moves the
    // runtime there, and its own decision applies).
    let mode = args.mode.unwrap_or(Mode::Text);
    let interactive =
        mode == Mode::Text && !args.print && stdin_text.is_none() && std::io::stdin().is_terminal();
    let trust = crate::cli::trust::project_trust(args, env, &lookup_settings, interactive);
    let runtime_cwd = crate::cli::trust::runtime_cwd(&store, &target, env.cwd())?;
    let runtime_trusted =
        crate::cli::trust::decide_at_startup(&trust, &runtime_cwd, env.cwd(), &mut warnings);
    let project_trusted = runtime_trusted && runtime_cwd == env.cwd();
    let settings = if project_trusted {
        lookup_settings
    } else {
        lookup_settings.without_project()
    };
    for error in settings.errors() {
        warnings.push(format!("{}: {}", error.path.display(), error.message));
    }
    let registry = keys::load_model_registry(env);
    if let Some(error) = registry.error() {
        warnings.push(error.to_owned());
    }
    let mut credentials = keys::load_credentials(env, clock.clone());
    let models = model_candidates(args, &settings, &registry, &mut credentials, &mut warnings)?;

    let shell = ShellConfig {
        shell_path: settings.shell_path().map(str::to_owned),
        command_prefix: settings.shell_command_prefix().map(str::to_owned),
        env: env
            .vars()
            .iter()
            .map(|(key, value)| (key.into(), value.into()))
            .collect(),
        bin_dir: Some(agent_dir.join("bin")),
        temp_dir: env
            .var("TMPDIR")
            .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from),
        ids: ids.clone(),
    };
    let tools_config = ToolsConfig {
        workspace: Workspace::new(env.home().map(Path::to_path_buf)),
        read: ReadConfig {
            auto_resize_images: settings.image_auto_resize(),
        },
        shell: shell.clone(),
    };
    let extensions = extensions_config(
        args,
        &settings,
        env,
        &agent_dir,
        project_trusted,
        &mut warnings,
    );
    let tools_flag = args.tools.as_ref().map(|names| names.join(","));
    let tool_selection =
        ToolSelection::from_flags(tools_flag.as_deref(), args.no_tools, args.no_builtin_tools);
    let tools = ToolSet::new(builtin_tools(&tools_config), Vec::new(), &tool_selection)
        .excluding(args.exclude_tools.as_deref().unwrap_or_default());
    let mut resource_config = ResourceConfig::new(env.cwd(), &agent_dir, env.home());
    resource_config.system_prompt = args.system_prompt.clone();
    resource_config.append_system_prompt = args.append_system_prompt.clone();
    resource_config.no_context_files = args.no_context_files;
    resource_config.skill_paths = args.skills.clone();
    resource_config.no_skills = args.no_skills;
    resource_config.prompt_template_paths = args.prompt_templates.clone();
    resource_config.no_prompt_templates = args.no_prompt_templates;
    resource_config.user_settings =
        ScopeSettings::from_settings_json(&settings.scope_object(Scope::Global));
    resource_config.project_settings =
        ScopeSettings::from_settings_json(&settings.scope_object(Scope::Project));
    resource_config.project_trusted = project_trusted;
    let theme = theme_config(args, env, &resource_config, settings.theme());
    let resources = Resources::load(resource_config);
    for diagnostic in resources.diagnostics() {
        warnings.push(diagnostic.to_string());
    }
    // pi's own README/docs/examples for the prompt's <docs> section.
    let package_dir = env
        .var("PI_PACKAGE_DIR")
        .map(|dir| env.absolute(&env.expand_tilde(dir)));
    let harness_docs = match env.executable() {
        Some(executable) => HarnessDocs::locate(package_dir.as_deref(), executable),
        None => HarnessDocs::in_dir(package_dir.as_deref().unwrap_or(&agent_dir)),
    };

    let print = mode == Mode::Text && (args.print || stdin_text.is_some());
    let (file_text, images) = if args.file_args.is_empty() {
        (String::new(), Vec::new())
    } else {
        if mode == Mode::Rpc {
            return Err(
                UsageError("@file arguments cannot be used with --mode rpc".to_owned()).into(),
            );
        }
        process_file_args(&args.file_args, env, settings.image_auto_resize())?
    };
    let mut messages = args.messages.clone();
    let mut first = String::new();
    if let Some(stdin_text) = stdin_text {
        first.push_str(&stdin_text);
    }
    first.push_str(&file_text);
    let has_first = !first.is_empty() || !messages.is_empty();
    if !messages.is_empty() {
        first.push_str(&messages.remove(0));
    }
    let mut prompts = Vec::new();
    if has_first {
        prompts.push((first, images));
    }
    prompts.extend(messages.into_iter().map(|text| (text, Vec::new())));

    let mut session_settings = session_settings_of(&settings, env);
    session_settings.lease.owner = match (mode, print) {
        (Mode::Rpc, _) => "pi (rpc)",
        (Mode::Json, _) => "pi (json)",
        (_, true) => "pi (print)",
        _ => "pi (interactive)",
    }
    .to_owned();
    let settings_http_proxy = settings.http_proxy().map(str::to_owned);
    let double_escape = crate::modes::DoubleEscape::from_setting(settings.double_escape_action());
    let external_editor = settings.external_editor().map(str::to_owned);
    let hide_thinking = settings.hide_thinking_block();
    let auto_push_warnings = crate::cli::remote::auto_push_warnings(env, &settings);
    let left = crate::cli::remote::auto_push_hook(env, &settings, db, args.no_session);
    let sink_settings = settings;
    let settings_reload: crate::session::settings::SettingsReload = {
        let (agent_dir, env, owner) = (
            agent_dir.clone(),
            env.clone(),
            session_settings.lease.owner.clone(),
        );
        Arc::new(move |cwd: &std::path::Path, project_trusted: bool| {
            let loaded = Settings::load(&agent_dir, cwd, env.home());
            let loaded = if project_trusted {
                loaded
            } else {
                loaded.without_project()
            };
            let mut reloaded = session_settings_of(&loaded, &env);
            reloaded.lease.owner = owner.clone();
            reloaded
        })
    };
    // `--name` (1.6.0 `normalizeSessionName`, then its session_info sanitising).
    let startup_name = match &args.name {
        Some(name) => {
            let name = crate::session::agent_session::sanitize_session_name(name);
            if name.is_empty() {
                bail!("--name requires a non-empty value");
            }
            Some(name)
        }
        None => None,
    };
    let config = SessionConfig {
        store,
        client: AiClient::new(clock.clone(), ids.clone())?.with_proxy(
            crate::ai::proxy::ProxyConfig::from_env(
                |name| env.vars().get(name).cloned(),
                settings_http_proxy.as_deref(),
            ),
        ),
        registry: Arc::new(registry),
        credentials: Arc::new(credentials),
        resources: Arc::new(Mutex::new(resources)),
        tools,
        tools_from_transcript: tool_selection.restores_transcript_tools(),
        tool_modifiers: tool_selection.modifiers().to_vec(),
        startup_name,
        shell,
        cwd: env.cwd().to_path_buf(),
        settings: session_settings,
        settings_sink: Arc::new(FileSettingsSink {
            settings: Mutex::new(sink_settings),
        }),
        settings_reload: Some(settings_reload),
        clock,
        ids,
        models,
        local_date: local_date(env),
        harness_docs,
        emit_partials: mode != Mode::Text,
        extensions,
        trust: Some(trust),
    };
    let mut terminal = TerminalConfig::new(&agent_dir, env.home(), env.color_allowed());
    terminal.database = env.db_path(db).display().to_string();
    terminal.double_escape = double_escape;
    // The external editor as the reference picks it: the setting, `$VISUAL`, `$EDITOR`, nano.
    terminal.external_editor = external_editor
        .into_iter()
        .chain(env.var("VISUAL").map(str::to_owned))
        .chain(env.var("EDITOR").map(str::to_owned))
        .find(|command| !command.trim().is_empty())
        .unwrap_or_else(|| "nano".to_owned());
    terminal.start_dir = env.cwd().to_path_buf();
    terminal.hide_thinking = hide_thinking;
    terminal.theme = theme;
    if args.no_session {
        terminal.database = "in memory (--no-session)".to_owned();
    }
    let mcp = (!args.no_mcp).then(|| {
        crate::cli::mcp::manager(env, &agent_dir, env.cwd(), project_trusted, &config.shell)
    });
    warnings.extend(auto_push_warnings);
    Ok(Prepared {
        config,
        target,
        mode,
        print,
        prompts,
        warnings,
        terminal,
        interchange: interchange(auto_import, left),
        mcp,
    })
}

/// Runs the agent command line (everything that is not a subcommand).
pub fn run(raw_args: Vec<String>, env: Env, db: Option<PathBuf>) -> Result<ExitCode> {
    let args = agent_args::parse(&raw_args);
    let mut stderr = std::io::stderr();
    for diagnostic in &args.diagnostics {
        match diagnostic {
            Diagnostic::Warning(message) => writeln!(stderr, "Warning: {}", term::line(message))?,
            Diagnostic::Error(message) => return Err(UsageError(message.clone()).into()),
        }
    }
    if args.help {
        print!("{}", help_text());
        return Ok(ExitCode::SUCCESS);
    }
    if args.version {
        println!("pi {}", env!("CARGO_PKG_VERSION"));
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(name) = args.unknown_flags.keys().next() {
        return Err(UsageError(format!("Unknown option: --{name}")).into());
    }
    if let Some(input) = &args.export {
        // The reference's `--export FILE [OUT]`: the page of a session file, then exit.
        let output = args.messages.first().map(PathBuf::from);
        let written = crate::cli::export::export_file(&env, Path::new(input), output.as_deref())?;
        println!(
            "Exported to: {}",
            crate::support::term::line(&written.to_string_lossy())
        );
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(list) = &args.list_models {
        let search = match list {
            ListModels::All => None,
            ListModels::Search(search) => Some(search.as_str()),
        };
        list_models(&env, search)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mode = args.mode.unwrap_or(Mode::Text);
    let stdin_text = if mode != Mode::Rpc && !std::io::stdin().is_terminal() {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading stdin")?;
        let text = text.trim().to_owned();
        (!text.is_empty()).then_some(text)
    } else {
        None
    };
    let piped = mode != Mode::Rpc && !std::io::stdin().is_terminal();
    // `-r` picks a session in the REPL; `--no-session`, `--fork` and `--session` win over it.
    let pick_session =
        args.resume && !args.no_session && args.fork.is_none() && args.session.is_none();
    let interactive = mode == Mode::Text && !args.print && !piped;
    if pick_session && !interactive {
        return Err(UsageError(
            "--resume picks a session interactively; with -p, piped input or --mode, use --session ID (`pi sessions list` shows the ids)".to_owned(),
        )
        .into());
    }
    let prepared = prepare(&args, &env, db.as_deref(), stdin_text)?;
    for warning in &prepared.warnings {
        writeln!(stderr, "Warning: {}", term::line(warning))?;
    }
    // A stored session whose directory is gone: the REPL asks, the other modes refuse.
    if !interactive
        && let SessionTarget::Open(id) = &prepared.target
        && let Some(missing) =
            crate::modes::MissingCwd::check(&prepared.config.store, id, &prepared.config.cwd)?
    {
        anyhow::bail!(missing.error_message());
    }
    // One runtime thread: an agent run is one sequence of steps (request, stream, tools,
    // appends), so a second worker only adds handoffs between threads (futex wakes, cache
    // misses) — about 6–10 % of a turn's CPU (`docs/BENCHMARKS.md`, "Agent turns"). Blocking
    // work (store calls, file tools, key commands) still runs on tokio's blocking pool, and
    // nothing here blocks the runtime thread (`block_in_place` would panic on this runtime).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let mut prepared = prepared;
        let mcp = prepared.mcp.clone();
        if let Some(mcp) = &mcp {
            // Every enabled server, at once, before the first prompt: at most its timeout and
            // `STARTUP_WAIT` in all; one that fails is reported and left out.
            mcp.connect_all(crate::session::mcp::STARTUP_WAIT).await;
            prepared.config.tools = prepared.config.tools.with_custom(mcp.tools());
        }
        let result = match mode {
            Mode::Json => crate::modes::print::run(prepared, true).await,
            Mode::Rpc => crate::modes::rpc::run(prepared).await,
            Mode::Text if prepared.print || piped => {
                crate::modes::print::run(prepared, false).await
            }
            Mode::Text => crate::modes::repl::run(prepared, pick_session).await,
        };
        if let Some(mcp) = &mcp {
            mcp.close_all().await;
        }
        result
    })
}
