//! The reference's `settings.json` files (`spec/models-providers-settings.md` §12): the global
//! `<agent dir>/settings.json` overlaid by the project's `<cwd>/.pi/settings.json`, typed
//! accessors with the reference's defaults, and writing a key back without touching others.
//!
//! Loading: a missing file is `{}`; a file that does not parse (or is not an object) counts
//! as `{}`, is reported by [`Settings::errors`], and is never written while the error
//! persists. Legacy keys are migrated as the reference migrates them (`queueMode` →
//! `steeringMode`, boolean `websockets` → `transport`, object `skills` →
//! `enableSkillCommands` + array `skills`, `retry.maxDelayMs` →
//! `retry.provider.maxRetryDelayMs`). Effective settings = global overlaid by project: a key
//! whose two values are both objects merges one level deep (`{...global, ...project}`),
//! anything else is replaced. Getters treat `null` as absent.
//!
//! Writing ([`Settings::set_global`] and friends): the file is re-read under the reference's
//! lock (`<file>.lock`, a directory, as `proper-lockfile` makes it), only the changed
//! top-level key — or the changed nested keys of an object — is replaced, and the whole
//! object is written back as `JSON.stringify(settings, null, 2)` writes it.
//!
//! Invariant: this module reads and writes only the two settings files; environment values
//! it needs (`PI_CLEAR_ON_SHRINK`, `PI_HARDWARE_CURSOR`, `PI_TELEMETRY`) are passed in.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};

use crate::support::json;

/// Which settings file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `<agent dir>/settings.json`.
    Global,
    /// `<cwd>/.pi/settings.json`.
    Project,
}

impl Scope {
    /// Returns the scope's name as the reference reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::Project => "project",
        }
    }
}

/// A settings file that could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// Which file.
    pub scope: Scope,
    /// Its path.
    pub path: PathBuf,
    /// What is wrong with it.
    pub message: String,
}

/// What can go wrong writing settings.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The project is not trusted (the reference's wording).
    #[error("Project is not trusted; refusing to write project settings")]
    ProjectNotTrusted,
    /// The file had a parse error at load; the reference does not write it, neither do we.
    #[error(
        "{}: not written, because it did not parse when pi started ({message}); fix the file first",
        path.display()
    )]
    Unparseable {
        /// The file.
        path: PathBuf,
        /// The load error.
        message: String,
    },
    /// The file changed into something that does not parse since it was loaded.
    #[error("{}: not written, because it no longer parses ({message})", path.display())]
    ChangedUnparseable {
        /// The file.
        path: PathBuf,
        /// The parse error.
        message: String,
    },
    /// Another process holds the settings lock.
    #[error("{}: settings are locked by another process (remove {} if none is running)", path.display(), lock.display())]
    Locked {
        /// The file.
        path: PathBuf,
        /// The lock directory.
        lock: PathBuf,
    },
    /// A file-system operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// A package source (`packages[]`): a source string or an object with resource filters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackageSource {
    /// `"npm:@scope/pkg"`, a git URL or a path.
    Source(String),
    /// `{source, extensions?, skills?, prompts?, themes?}`.
    Filtered {
        /// The package source.
        source: String,
        /// Extension paths or patterns to load from it.
        extensions: Option<Vec<String>>,
        /// Skill paths or patterns.
        skills: Option<Vec<String>>,
        /// Prompt template paths or patterns.
        prompts: Option<Vec<String>>,
        /// Theme paths or patterns.
        themes: Option<Vec<String>>,
    },
}

/// Thinking token budgets for budget-based models (`thinkingBudgets`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThinkingBudgets {
    /// `minimal` (default 1024).
    pub minimal: i64,
    /// `low` (default 2048).
    pub low: i64,
    /// `medium` (default 8192).
    pub medium: i64,
    /// `high` (default 16384).
    pub high: i64,
}

/// `compaction.*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionSettings {
    /// `compaction.enabled` (default true).
    pub enabled: bool,
    /// `compaction.reserveTokens` (default 16384).
    pub reserve_tokens: i64,
    /// `compaction.keepRecentTokens` (default 20000).
    pub keep_recent_tokens: i64,
}

/// `branchSummary.*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BranchSummarySettings {
    /// `branchSummary.reserveTokens` (default 16384).
    pub reserve_tokens: i64,
    /// `branchSummary.skipPrompt` (default false).
    pub skip_prompt: bool,
}

/// `retry.*` (the session's turn retry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySettings {
    /// `retry.enabled` (default true).
    pub enabled: bool,
    /// `retry.maxRetries` (default 3).
    pub max_retries: i64,
    /// `retry.baseDelayMs` (default 2000).
    pub base_delay_ms: i64,
    /// `retry.maxAgentDelayMs` (default 60000): the cap on one wait.
    pub max_agent_delay_ms: i64,
}

/// `retry.provider.*` (the transport's request retry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderRetrySettings {
    /// `retry.provider.timeoutMs` (absent: the SDK default, 600000).
    pub timeout_ms: Option<i64>,
    /// `retry.provider.maxRetries` (absent: none, as 1.6.0).
    pub max_retries: Option<i64>,
    /// `retry.provider.maxRetryDelayMs` (default 60000).
    pub max_retry_delay_ms: i64,
}

/// The two settings files, loaded and merged.
#[derive(Debug, Clone)]
pub struct Settings {
    global_path: PathBuf,
    project_path: PathBuf,
    home: Option<PathBuf>,
    global: Map<String, Value>,
    project: Map<String, Value>,
    merged: Map<String, Value>,
    errors: Vec<LoadError>,
    /// Set by [`Settings::without_project`]: the project file is not to be written.
    project_untrusted: bool,
}

/// The reference's legacy-key migration, applied to a file's object on load and before a
/// write.
fn migrate(settings: &mut Map<String, Value>) {
    if !settings.contains_key("steeringMode")
        && let Some(mode) = settings.shift_remove("queueMode")
    {
        settings.insert("steeringMode".to_owned(), mode);
    }
    if !settings.contains_key("transport")
        && let Some(Value::Bool(websockets)) = settings.get("websockets").cloned()
    {
        let transport = if websockets { "websocket" } else { "sse" };
        settings.insert("transport".to_owned(), Value::from(transport));
        settings.shift_remove("websockets");
    }
    if let Some(Value::Object(skills)) = settings.get("skills").cloned() {
        let enable = skills.get("enableSkillCommands");
        let enable_unset = settings.get("enableSkillCommands").is_none();
        if let Some(enable) = enable
            && enable_unset
        {
            settings.insert("enableSkillCommands".to_owned(), enable.clone());
        }
        match skills.get("customDirectories") {
            Some(Value::Array(dirs)) if !dirs.is_empty() => {
                settings.insert("skills".to_owned(), Value::Array(dirs.clone()));
            }
            _ => {
                settings.shift_remove("skills");
            }
        }
    }
    if let Some(Value::Object(retry)) = settings.get_mut("retry") {
        let provider = match retry.get("provider") {
            Some(Value::Object(provider)) => Some(provider.clone()),
            _ => None,
        };
        if let Some(Value::Number(max_delay)) = retry.get("maxDelayMs").cloned() {
            let unset = provider
                .as_ref()
                .and_then(|provider| provider.get("maxRetryDelayMs"))
                .is_none_or(Value::is_null);
            if unset {
                let mut provider = provider.unwrap_or_default();
                provider.insert("maxRetryDelayMs".to_owned(), Value::Number(max_delay));
                retry.insert("provider".to_owned(), Value::Object(provider));
            }
        }
        retry.shift_remove("maxDelayMs");
    }
}

/// `{...base, ...overrides}` one level deep, as the reference's `deepMergeSettings`.
fn merge(base: &Map<String, Value>, overrides: &Map<String, Value>) -> Map<String, Value> {
    let mut out = base.clone();
    for (key, value) in overrides {
        match (out.get(key), value) {
            (Some(Value::Object(base_object)), Value::Object(override_object)) => {
                let mut merged = base_object.clone();
                for (nested_key, nested_value) in override_object {
                    merged.insert(nested_key.clone(), nested_value.clone());
                }
                out.insert(key.clone(), Value::Object(merged));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out
}

/// Reads and migrates one settings file; a missing or empty file is `{}`.
fn load_file(path: &Path) -> Result<Map<String, Value>, String> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(error) => return Err(error.to_string()),
    };
    if bytes.is_empty() {
        return Ok(Map::new());
    }
    match json::parse_lenient(&bytes) {
        Ok(Value::Object(mut map)) => {
            migrate(&mut map);
            Ok(map)
        }
        Ok(_) => Err("not a JSON object".to_owned()),
        Err(error) => Err(error.to_string()),
    }
}

/// Holds the reference's settings lock (`<file>.lock`) until dropped.
struct Lock {
    dir: PathBuf,
}

impl Lock {
    /// Takes the lock: 10 attempts 20 ms apart; a lock older than 10 s is stale (the
    /// `proper-lockfile` defaults).
    fn acquire(path: &Path) -> Result<Self, SettingsError> {
        let mut dir = path.as_os_str().to_owned();
        dir.push(".lock");
        let dir = PathBuf::from(dir);
        for attempt in 0..10 {
            match fs::create_dir(&dir) {
                Ok(()) => return Ok(Self { dir }),
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
                    let stale = fs::metadata(&dir)
                        .and_then(|meta| meta.modified())
                        .ok()
                        .and_then(|modified| SystemTime::now().duration_since(modified).ok())
                        .is_some_and(|age| age > Duration::from_secs(10));
                    if stale {
                        let _ = fs::remove_dir(&dir);
                        continue;
                    }
                    if attempt < 9 {
                        thread::sleep(Duration::from_millis(20));
                    }
                }
                Err(source) => {
                    return Err(SettingsError::Io { path: dir, source });
                }
            }
        }
        Err(SettingsError::Locked {
            path: path.to_path_buf(),
            lock: dir,
        })
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.dir);
    }
}

fn number(value: Option<&Value>) -> Option<f64> {
    value.and_then(Value::as_f64)
}

fn int(value: Option<&Value>) -> Option<i64> {
    number(value).filter(|n| n.is_finite()).map(|n| n as i64)
}

fn boolean(value: Option<&Value>) -> Option<bool> {
    value.and_then(Value::as_bool)
}

fn string_list(value: Option<&Value>) -> Option<Vec<String>> {
    match value {
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect(),
        ),
        _ => None,
    }
}

/// What a write changes in a file's object.
enum Change<'a> {
    /// Replace (or with `None`, drop) a top-level key.
    Top(&'a str, Option<Value>),
    /// Replace nested keys of an object-valued key.
    Nested(&'a str, Vec<(&'a str, Value)>),
}

impl Settings {
    /// Loads `<agent_dir>/settings.json` and `<cwd>/.pi/settings.json`; `home` expands `~`.
    pub fn load(agent_dir: &Path, cwd: &Path, home: Option<&Path>) -> Self {
        let global_path = agent_dir.join("settings.json");
        let project_path = cwd.join(".pi").join("settings.json");
        let mut errors = Vec::new();
        let mut load = |scope: Scope, path: &Path| match load_file(path) {
            Ok(map) => map,
            Err(message) => {
                errors.push(LoadError {
                    scope,
                    path: path.to_path_buf(),
                    message,
                });
                Map::new()
            }
        };
        let global = load(Scope::Global, &global_path);
        let project = load(Scope::Project, &project_path);
        let merged = merge(&global, &project);
        Self {
            global_path,
            project_path,
            home: home.map(Path::to_path_buf),
            global,
            project,
            merged,
            errors,
            project_untrusted: false,
        }
    }

    /// Drops the project file (an untrusted project, `session::trust`): what remains is the
    /// user's `settings.json` alone, and writes to the project file are refused.
    pub fn without_project(mut self) -> Self {
        self.project = Map::new();
        self.merged = merge(&self.global, &self.project);
        self.errors.retain(|error| error.scope != Scope::Project);
        self.project_untrusted = true;
        self
    }

    /// Returns one file's (migrated) object as loaded.
    pub fn scope_object(&self, scope: Scope) -> Value {
        match scope {
            Scope::Global => Value::Object(self.global.clone()),
            Scope::Project => Value::Object(self.project.clone()),
        }
    }

    /// Returns the files that could not be loaded (they count as `{}`).
    pub fn errors(&self) -> &[LoadError] {
        &self.errors
    }

    /// Returns the path of a scope's file.
    pub fn path(&self, scope: Scope) -> &Path {
        match scope {
            Scope::Global => &self.global_path,
            Scope::Project => &self.project_path,
        }
    }

    /// Returns an effective top-level value (`null` is absent).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.merged.get(key).filter(|value| !value.is_null())
    }

    /// Returns an effective nested value `key.nested` (`null` is absent).
    pub fn get_nested(&self, key: &str, nested: &str) -> Option<&Value> {
        self.get(key)
            .and_then(|value| value.get(nested))
            .filter(|value| !value.is_null())
    }

    fn string(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    fn expand_tilde(&self, value: &str) -> PathBuf {
        match (value, &self.home) {
            ("~", Some(home)) => home.clone(),
            (_, Some(home)) if value.starts_with("~/") => home.join(&value[2..]),
            _ => PathBuf::from(value),
        }
    }

    // ----- typed accessors (§12.2) ----------------------------------------------------------

    /// `defaultProvider`.
    pub fn default_provider(&self) -> Option<&str> {
        self.string("defaultProvider")
    }

    /// `defaultModel`.
    pub fn default_model(&self) -> Option<&str> {
        self.string("defaultModel")
    }

    /// `defaultThinkingLevel` as written (the startup rule applies its default, `medium`).
    pub fn default_thinking_level(&self) -> Option<&str> {
        self.string("defaultThinkingLevel")
    }

    /// `thinkingBudgets`, with the defaults for missing levels.
    pub fn thinking_budgets(&self) -> ThinkingBudgets {
        let get = |level: &str, default: i64| {
            int(self.get_nested("thinkingBudgets", level)).unwrap_or(default)
        };
        ThinkingBudgets {
            minimal: get("minimal", 1024),
            low: get("low", 2048),
            medium: get("medium", 8192),
            high: get("high", 16384),
        }
    }

    /// Whether `thinkingBudgets` is set at all.
    pub fn has_thinking_budgets(&self) -> bool {
        matches!(self.get("thinkingBudgets"), Some(Value::Object(_)))
    }

    /// `hideThinkingBlock` (default false).
    pub fn hide_thinking_block(&self) -> bool {
        boolean(self.get("hideThinkingBlock")).unwrap_or(false)
    }

    /// `enabledModels` scope patterns.
    pub fn enabled_models(&self) -> Option<Vec<String>> {
        string_list(self.get("enabledModels"))
    }

    /// `transport` (default `auto`).
    pub fn transport(&self) -> &str {
        self.string("transport").unwrap_or("auto")
    }

    /// `steeringMode` (default `one-at-a-time`; an empty string is the default too).
    pub fn steering_mode(&self) -> &str {
        self.string("steeringMode")
            .filter(|mode| !mode.is_empty())
            .unwrap_or("one-at-a-time")
    }

    /// `followUpMode` (default `one-at-a-time`; an empty string is the default too).
    pub fn follow_up_mode(&self) -> &str {
        self.string("followUpMode")
            .filter(|mode| !mode.is_empty())
            .unwrap_or("one-at-a-time")
    }

    /// `compaction.*`.
    pub fn compaction(&self) -> CompactionSettings {
        CompactionSettings {
            enabled: boolean(self.get_nested("compaction", "enabled")).unwrap_or(true),
            reserve_tokens: int(self.get_nested("compaction", "reserveTokens")).unwrap_or(16384),
            keep_recent_tokens: int(self.get_nested("compaction", "keepRecentTokens"))
                .unwrap_or(20000),
        }
    }

    /// `branchSummary.*`.
    pub fn branch_summary(&self) -> BranchSummarySettings {
        BranchSummarySettings {
            reserve_tokens: int(self.get_nested("branchSummary", "reserveTokens")).unwrap_or(16384),
            skip_prompt: boolean(self.get_nested("branchSummary", "skipPrompt")).unwrap_or(false),
        }
    }

    /// `lease.heartbeatMs` and `lease.staleMs` (pi's own keys; the reference ignores them):
    /// the writer-lease intervals, positive milliseconds.
    pub fn lease_intervals(&self) -> (Option<u64>, Option<u64>) {
        let get = |key: &str| {
            int(self.get_nested("lease", key))
                .and_then(|ms| u64::try_from(ms).ok().filter(|ms| *ms > 0))
        };
        (get("heartbeatMs"), get("staleMs"))
    }

    /// `database.busyTimeoutMs` (pi's own key): how long a write waits for SQLite's lock.
    pub fn busy_timeout_ms(&self) -> Option<u64> {
        int(self.get_nested("database", "busyTimeoutMs")).and_then(|ms| u64::try_from(ms).ok())
    }

    /// `database.autoImport` (pi's own key, default true): whether `pi -c`, `-r`, `/resume`,
    /// `pi sessions list` and RPC `switch_session` first import what the reference wrote
    /// (`cli/autoimport.rs`).
    pub fn auto_import(&self) -> bool {
        self.get_nested("database", "autoImport")
            .and_then(Value::as_bool)
            .unwrap_or(true)
    }

    /// `retry.*`.
    pub fn retry(&self) -> RetrySettings {
        RetrySettings {
            enabled: boolean(self.get_nested("retry", "enabled")).unwrap_or(true),
            max_retries: int(self.get_nested("retry", "maxRetries")).unwrap_or(3),
            base_delay_ms: int(self.get_nested("retry", "baseDelayMs")).unwrap_or(2000),
            max_agent_delay_ms: int(self.get_nested("retry", "maxAgentDelayMs")).unwrap_or(60_000),
        }
    }

    /// `retry.provider.*`.
    pub fn provider_retry(&self) -> ProviderRetrySettings {
        let provider = self
            .get_nested("retry", "provider")
            .and_then(Value::as_object);
        let get = |key: &str| provider.and_then(|map| int(map.get(key).filter(|v| !v.is_null())));
        ProviderRetrySettings {
            timeout_ms: get("timeoutMs"),
            max_retries: get("maxRetries"),
            max_retry_delay_ms: get("maxRetryDelayMs").unwrap_or(60000),
        }
    }

    /// `images.autoResize` (default true).
    pub fn image_auto_resize(&self) -> bool {
        boolean(self.get_nested("images", "autoResize")).unwrap_or(true)
    }

    /// `images.blockImages` (default false).
    pub fn block_images(&self) -> bool {
        boolean(self.get_nested("images", "blockImages")).unwrap_or(false)
    }

    /// `terminal.showImages` (default true).
    pub fn show_images(&self) -> bool {
        boolean(self.get_nested("terminal", "showImages")).unwrap_or(true)
    }

    /// `terminal.imageWidthCells`: floored, at least 1; 60 unless a finite number.
    pub fn image_width_cells(&self) -> i64 {
        match number(self.get_nested("terminal", "imageWidthCells")) {
            Some(width) if width.is_finite() => (width.floor() as i64).max(1),
            _ => 60,
        }
    }

    /// `terminal.clearOnShrink`; when unset, `PI_CLEAR_ON_SHRINK=1` (its value passed in).
    pub fn clear_on_shrink(&self, env_clear_on_shrink: Option<&str>) -> bool {
        match self.get_nested("terminal", "clearOnShrink") {
            Some(value) => value.as_bool().unwrap_or(false),
            None => env_clear_on_shrink == Some("1"),
        }
    }

    /// `terminal.showTerminalProgress` (default false).
    pub fn show_terminal_progress(&self) -> bool {
        boolean(self.get_nested("terminal", "showTerminalProgress")).unwrap_or(false)
    }

    /// `shellPath`.
    pub fn shell_path(&self) -> Option<&str> {
        self.string("shellPath")
    }

    /// `shellCommandPrefix`.
    pub fn shell_command_prefix(&self) -> Option<&str> {
        self.string("shellCommandPrefix")
    }

    /// `npmCommand` argv.
    pub fn npm_command(&self) -> Option<Vec<String>> {
        string_list(self.get("npmCommand"))
    }

    /// `sessionDir` with `~` and `~/` expanded (an empty value is unset).
    pub fn session_dir(&self) -> Option<PathBuf> {
        self.string("sessionDir")
            .filter(|dir| !dir.is_empty())
            .map(|dir| self.expand_tilde(dir))
    }

    /// `packages`.
    pub fn packages(&self) -> Vec<PackageSource> {
        let Some(Value::Array(items)) = self.get("packages") else {
            return Vec::new();
        };
        items
            .iter()
            .filter_map(|item| match item {
                Value::String(source) => Some(PackageSource::Source(source.clone())),
                Value::Object(map) => Some(PackageSource::Filtered {
                    source: map.get("source")?.as_str()?.to_owned(),
                    extensions: string_list(map.get("extensions")),
                    skills: string_list(map.get("skills")),
                    prompts: string_list(map.get("prompts")),
                    themes: string_list(map.get("themes")),
                }),
                _ => None,
            })
            .collect()
    }

    /// `extensions` paths or patterns.
    pub fn extensions(&self) -> Vec<String> {
        string_list(self.get("extensions")).unwrap_or_default()
    }

    /// `skills` paths or patterns.
    pub fn skills(&self) -> Vec<String> {
        string_list(self.get("skills")).unwrap_or_default()
    }

    /// `prompts` paths or patterns.
    pub fn prompts(&self) -> Vec<String> {
        string_list(self.get("prompts")).unwrap_or_default()
    }

    /// `themes` paths or patterns.
    pub fn themes(&self) -> Vec<String> {
        string_list(self.get("themes")).unwrap_or_default()
    }

    /// Returns a scope's own resource list (`extensions`, `skills`, `prompts`, `themes`):
    /// its entries are relative to that scope's base directory.
    pub fn scoped_list(&self, scope: Scope, key: &str) -> Vec<String> {
        let map = match scope {
            Scope::Global => &self.global,
            Scope::Project => &self.project,
        };
        string_list(map.get(key)).unwrap_or_default()
    }

    /// `enableSkillCommands` (default true).
    pub fn enable_skill_commands(&self) -> bool {
        boolean(self.get("enableSkillCommands")).unwrap_or(true)
    }

    /// `treeFilterMode` (an unknown value is `default`).
    pub fn tree_filter_mode(&self) -> &str {
        match self.string("treeFilterMode") {
            Some(mode @ ("default" | "no-tools" | "user-only" | "labeled-only" | "all")) => mode,
            _ => "default",
        }
    }

    /// `doubleEscapeAction` (default `tree`).
    pub fn double_escape_action(&self) -> &str {
        self.string("doubleEscapeAction").unwrap_or("tree")
    }

    /// `externalEditor`: the command Ctrl+G opens the prompt in.
    pub fn external_editor(&self) -> Option<&str> {
        self.string("externalEditor")
    }

    /// `theme`.
    pub fn theme(&self) -> Option<&str> {
        self.string("theme")
    }

    /// `quietStartup` (default false).
    pub fn quiet_startup(&self) -> bool {
        boolean(self.get("quietStartup")).unwrap_or(false)
    }

    /// `collapseChangelog` (default false).
    pub fn collapse_changelog(&self) -> bool {
        boolean(self.get("collapseChangelog")).unwrap_or(false)
    }

    /// `lastChangelogVersion`.
    pub fn last_changelog_version(&self) -> Option<&str> {
        self.string("lastChangelogVersion")
    }

    /// `httpProxy` of the global settings only (1.6.0 reads it from there): the proxy used
    /// where `HTTP_PROXY`/`HTTPS_PROXY` are not set.
    pub fn http_proxy(&self) -> Option<&str> {
        self.global.get("httpProxy").and_then(Value::as_str)
    }

    /// `enableInstallTelemetry` (default true).
    pub fn enable_install_telemetry(&self) -> bool {
        boolean(self.get("enableInstallTelemetry")).unwrap_or(true)
    }

    /// `editorPaddingX` (default 0).
    pub fn editor_padding_x(&self) -> i64 {
        int(self.get("editorPaddingX")).unwrap_or(0)
    }

    /// `autocompleteMaxVisible` (default 5).
    pub fn autocomplete_max_visible(&self) -> i64 {
        int(self.get("autocompleteMaxVisible")).unwrap_or(5)
    }

    /// `showHardwareCursor`; when unset, `PI_HARDWARE_CURSOR=1` (its value passed in).
    pub fn show_hardware_cursor(&self, env_hardware_cursor: Option<&str>) -> bool {
        match self.get("showHardwareCursor") {
            Some(value) => value.as_bool().unwrap_or(false),
            None => env_hardware_cursor == Some("1"),
        }
    }

    /// `markdown.codeBlockIndent` (default two spaces).
    pub fn code_block_indent(&self) -> &str {
        self.get_nested("markdown", "codeBlockIndent")
            .and_then(Value::as_str)
            .unwrap_or("  ")
    }

    /// `warnings.anthropicExtraUsage` (default true).
    pub fn warn_anthropic_extra_usage(&self) -> bool {
        boolean(self.get_nested("warnings", "anthropicExtraUsage")).unwrap_or(true)
    }

    // ----- writing -------------------------------------------------------------------------

    /// Sets a top-level key in the global file (`None` removes it) and writes it back,
    /// keeping every other key as the file has it now.
    pub fn set_global(&mut self, key: &str, value: Option<Value>) -> Result<(), SettingsError> {
        self.write(Scope::Global, &[Change::Top(key, value)])
    }

    /// Sets `key.nested` in the global file (creating the object) and writes it back.
    pub fn set_global_nested(
        &mut self,
        key: &str,
        nested: &str,
        value: Value,
    ) -> Result<(), SettingsError> {
        self.write(Scope::Global, &[Change::Nested(key, vec![(nested, value)])])
    }

    /// Sets a top-level key in the project file (resource lists) and writes it back.
    pub fn set_project(&mut self, key: &str, value: Option<Value>) -> Result<(), SettingsError> {
        if self.project_untrusted {
            return Err(SettingsError::ProjectNotTrusted);
        }
        self.write(Scope::Project, &[Change::Top(key, value)])
    }

    /// Persists a model choice as the reference does (`defaultProvider`, `defaultModel`).
    pub fn set_default_model(
        &mut self,
        provider: &str,
        model_id: &str,
    ) -> Result<(), SettingsError> {
        self.write(
            Scope::Global,
            &[
                Change::Top("defaultProvider", Some(Value::from(provider))),
                Change::Top("defaultModel", Some(Value::from(model_id))),
            ],
        )
    }

    /// Persists `defaultThinkingLevel`.
    pub fn set_default_thinking_level(&mut self, level: &str) -> Result<(), SettingsError> {
        self.set_global("defaultThinkingLevel", Some(Value::from(level)))
    }

    /// Persists `steeringMode`.
    pub fn set_steering_mode(&mut self, mode: &str) -> Result<(), SettingsError> {
        self.set_global("steeringMode", Some(Value::from(mode)))
    }

    /// Persists `followUpMode`.
    pub fn set_follow_up_mode(&mut self, mode: &str) -> Result<(), SettingsError> {
        self.set_global("followUpMode", Some(Value::from(mode)))
    }

    /// Persists `compaction.enabled`.
    pub fn set_compaction_enabled(&mut self, enabled: bool) -> Result<(), SettingsError> {
        self.set_global_nested("compaction", "enabled", Value::from(enabled))
    }

    /// Persists `retry.enabled`.
    pub fn set_retry_enabled(&mut self, enabled: bool) -> Result<(), SettingsError> {
        self.set_global_nested("retry", "enabled", Value::from(enabled))
    }

    fn apply(map: &mut Map<String, Value>, changes: &[Change<'_>]) {
        for change in changes {
            match change {
                Change::Top(key, Some(value)) => {
                    map.insert((*key).to_owned(), value.clone());
                }
                Change::Top(key, None) => {
                    map.shift_remove(*key);
                }
                Change::Nested(key, nested) => {
                    let mut object = match map.get(*key) {
                        Some(Value::Object(object)) => object.clone(),
                        _ => Map::new(),
                    };
                    for (nested_key, value) in nested {
                        object.insert((*nested_key).to_owned(), value.clone());
                    }
                    map.insert((*key).to_owned(), Value::Object(object));
                }
            }
        }
    }

    fn write(&mut self, scope: Scope, changes: &[Change<'_>]) -> Result<(), SettingsError> {
        let path = self.path(scope).to_path_buf();
        // In memory first, as the reference does, so the running session sees the change
        // even when the file cannot be written.
        match scope {
            Scope::Global => Self::apply(&mut self.global, changes),
            Scope::Project => Self::apply(&mut self.project, changes),
        }
        self.merged = merge(&self.global, &self.project);
        if let Some(error) = self.errors.iter().find(|error| error.scope == scope) {
            return Err(SettingsError::Unparseable {
                path,
                message: error.message.clone(),
            });
        }
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            fs::create_dir_all(dir).map_err(|source| SettingsError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let _lock = Lock::acquire(&path)?;
        let mut current =
            load_file(&path).map_err(|message| SettingsError::ChangedUnparseable {
                path: path.clone(),
                message,
            })?;
        Self::apply(&mut current, changes);
        let text = json::to_js_pretty(&Value::Object(current));
        fs::write(&path, text).map_err(|source| SettingsError::Io { path, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Dirs {
        _root: tempfile::TempDir,
        agent: PathBuf,
        cwd: PathBuf,
        home: PathBuf,
    }

    fn dirs() -> Dirs {
        let root = tempfile::tempdir().unwrap();
        let agent = root.path().join("agent");
        let cwd = root.path().join("project");
        let home = root.path().join("home");
        fs::create_dir_all(&agent).unwrap();
        fs::create_dir_all(cwd.join(".pi")).unwrap();
        Dirs {
            _root: root,
            agent,
            cwd,
            home,
        }
    }

    fn write(path: &Path, text: &str) {
        fs::write(path, text).unwrap();
    }

    #[test]
    fn an_untrusted_project_file_counts_for_nothing_and_is_not_written() {
        let d = dirs();
        write(&d.agent.join("settings.json"), r#"{"steeringMode": "all"}"#);
        let project = d.cwd.join(".pi/settings.json");
        write(
            &project,
            r#"{"defaultProjectTrust": "always", "followUpMode": "all", "skills": ["x"]"#,
        );
        let settings = Settings::load(&d.agent, &d.cwd, None);
        assert_eq!(
            settings.errors().len(),
            1,
            "the project file does not parse"
        );
        write(
            &project,
            r#"{"defaultProjectTrust": "always", "followUpMode": "all"}"#,
        );
        let mut settings = Settings::load(&d.agent, &d.cwd, None).without_project();
        assert!(settings.errors().is_empty());
        assert_eq!(settings.follow_up_mode(), "one-at-a-time");
        assert_eq!(settings.steering_mode(), "all");
        assert_eq!(settings.scope_object(Scope::Project), json!({}));
        assert!(settings.get("defaultProjectTrust").is_none());
        let error = settings
            .set_project("prompts", Some(json!(["./p"])))
            .unwrap_err();
        assert!(matches!(error, SettingsError::ProjectNotTrusted), "{error}");
        assert!(!fs::read_to_string(&project).unwrap().contains("prompts"));
    }

    #[test]
    fn missing_files_give_every_default() {
        let d = dirs();
        let settings = Settings::load(&d.agent, &d.cwd, Some(&d.home));
        assert!(settings.errors().is_empty());
        assert_eq!(settings.default_provider(), None);
        assert_eq!(settings.transport(), "auto");
        assert_eq!(settings.steering_mode(), "one-at-a-time");
        assert_eq!(settings.follow_up_mode(), "one-at-a-time");
        assert_eq!(
            settings.compaction(),
            CompactionSettings {
                enabled: true,
                reserve_tokens: 16384,
                keep_recent_tokens: 20000
            }
        );
        assert_eq!(
            settings.branch_summary(),
            BranchSummarySettings {
                reserve_tokens: 16384,
                skip_prompt: false
            }
        );
        assert_eq!(
            settings.retry(),
            RetrySettings {
                enabled: true,
                max_retries: 3,
                base_delay_ms: 2000,
                max_agent_delay_ms: 60_000
            }
        );
        assert_eq!(
            settings.provider_retry(),
            ProviderRetrySettings {
                timeout_ms: None,
                max_retries: None,
                max_retry_delay_ms: 60000
            }
        );
        assert_eq!(
            settings.thinking_budgets(),
            ThinkingBudgets {
                minimal: 1024,
                low: 2048,
                medium: 8192,
                high: 16384
            }
        );
        assert!(settings.image_auto_resize() && !settings.block_images());
        assert!(settings.show_images() && !settings.show_terminal_progress());
        assert_eq!(settings.image_width_cells(), 60);
        assert!(!settings.clear_on_shrink(None) && settings.clear_on_shrink(Some("1")));
        assert!(!settings.show_hardware_cursor(None) && settings.show_hardware_cursor(Some("1")));
        assert_eq!(settings.session_dir(), None);
        assert!(settings.packages().is_empty() && settings.extensions().is_empty());
        assert!(settings.enable_skill_commands() && settings.enable_install_telemetry());
        assert_eq!(settings.tree_filter_mode(), "default");
        assert_eq!(settings.double_escape_action(), "tree");
        assert_eq!(settings.editor_padding_x(), 0);
        assert_eq!(settings.autocomplete_max_visible(), 5);
        assert_eq!(settings.code_block_indent(), "  ");
        assert!(settings.warn_anthropic_extra_usage());
        assert!(!settings.hide_thinking_block() && !settings.quiet_startup());
    }

    #[test]
    fn project_overrides_global_one_level_deep() {
        let d = dirs();
        write(
            &d.agent.join("settings.json"),
            r#"{"defaultModel":"m1","compaction":{"enabled":false,"reserveTokens":1000},
                "retry":{"provider":{"maxRetries":5,"timeoutMs":10}},"enabledModels":["a"],
                "sessionDir":"~/sessions","theme":null,"imageWidth":1}"#,
        );
        write(
            &d.cwd.join(".pi/settings.json"),
            r#"{"compaction":{"reserveTokens":8192},"retry":{"provider":{"maxRetries":1}},
                "enabledModels":["b","c"],"defaultModel":null,"terminal":{"imageWidthCells":7.9}}"#,
        );
        let settings = Settings::load(&d.agent, &d.cwd, Some(&d.home));
        assert_eq!(
            settings.compaction(),
            CompactionSettings {
                enabled: false,
                reserve_tokens: 8192,
                keep_recent_tokens: 20000
            }
        );
        // One level only: the project's retry.provider replaces the global one wholesale.
        assert_eq!(settings.provider_retry().max_retries, Some(1));
        assert_eq!(settings.provider_retry().timeout_ms, None);
        assert_eq!(
            settings.enabled_models(),
            Some(vec!["b".to_owned(), "c".to_owned()])
        );
        // A null project value replaces the global value and reads as absent.
        assert_eq!(settings.default_model(), None);
        assert_eq!(settings.session_dir(), Some(d.home.join("sessions")));
        assert_eq!(settings.image_width_cells(), 7);
    }

    #[test]
    fn legacy_keys_are_migrated_on_load() {
        let d = dirs();
        write(
            &d.agent.join("settings.json"),
            r#"{"queueMode":"all","websockets":true,"skills":{"enableSkillCommands":false,"customDirectories":["~/s"]},"retry":{"maxDelayMs":5}}"#,
        );
        let settings = Settings::load(&d.agent, &d.cwd, None);
        assert_eq!(settings.steering_mode(), "all");
        assert_eq!(settings.transport(), "websocket");
        assert!(!settings.enable_skill_commands());
        assert_eq!(settings.skills(), vec!["~/s".to_owned()]);
        assert_eq!(settings.provider_retry().max_retry_delay_ms, 5);
    }

    #[test]
    fn a_broken_file_counts_as_empty_and_is_never_written() {
        let d = dirs();
        let global = d.agent.join("settings.json");
        write(&global, "{ not json");
        write(&d.cwd.join(".pi/settings.json"), r#"{"theme":"light"}"#);
        let mut settings = Settings::load(&d.agent, &d.cwd, None);
        assert_eq!(settings.errors().len(), 1);
        assert_eq!(settings.errors()[0].scope, Scope::Global);
        assert_eq!(settings.theme(), Some("light"));
        let error = settings.set_default_thinking_level("high").unwrap_err();
        assert!(
            matches!(error, SettingsError::Unparseable { .. }),
            "{error}"
        );
        assert_eq!(fs::read_to_string(&global).unwrap(), "{ not json");
        // The running session still sees the change.
        assert_eq!(settings.default_thinking_level(), Some("high"));
        write(&global, "[1]");
        assert_eq!(Settings::load(&d.agent, &d.cwd, None).errors().len(), 1);
    }

    #[test]
    fn writing_a_key_keeps_every_other_key_as_it_is_in_the_file() {
        let d = dirs();
        let global = d.agent.join("settings.json");
        write(
            &global,
            r#"{"theme":"dark","2":"two","compaction":{"keepRecentTokens":100,"x":[1,{"y":1.50}]},"1":1e21,"unknownKey":{"a":[]}}"#,
        );
        let mut settings = Settings::load(&d.agent, &d.cwd, None);
        // Someone else changes the file meanwhile: their key survives our write.
        write(
            &global,
            r#"{"theme":"dark","2":"two","compaction":{"keepRecentTokens":100,"x":[1,{"y":1.50}]},"1":1e21,"unknownKey":{"a":[]},"other":"kept"}"#,
        );
        settings
            .set_default_model("anthropic", "claude-sonnet-4-5")
            .unwrap();
        settings.set_compaction_enabled(false).unwrap();
        let text = fs::read_to_string(&global).unwrap();
        assert_eq!(
            text,
            "{\n  \"1\": 1e+21,\n  \"2\": \"two\",\n  \"theme\": \"dark\",\n  \"compaction\": {\n    \"keepRecentTokens\": 100,\n    \"x\": [\n      1,\n      {\n        \"y\": 1.5\n      }\n    ],\n    \"enabled\": false\n  },\n  \"unknownKey\": {\n    \"a\": []\n  },\n  \"other\": \"kept\",\n  \"defaultProvider\": \"anthropic\",\n  \"defaultModel\": \"claude-sonnet-4-5\"\n}"
        );
        assert!(!d.agent.join("settings.json.lock").exists());
        let reloaded = Settings::load(&d.agent, &d.cwd, None);
        assert_eq!(reloaded.default_model(), Some("claude-sonnet-4-5"));
        assert!(!reloaded.compaction().enabled);
        settings.set_global("theme", None).unwrap();
        assert!(!fs::read_to_string(&global).unwrap().contains("theme"));
    }

    #[test]
    fn files_are_created_on_first_write_and_a_held_lock_is_respected() {
        let d = dirs();
        let agent = d.agent.join("nested");
        let mut settings = Settings::load(&agent, &d.cwd, None);
        assert!(!agent.exists(), "loading creates nothing");
        settings.set_steering_mode("all").unwrap();
        assert_eq!(
            fs::read_to_string(agent.join("settings.json")).unwrap(),
            "{\n  \"steeringMode\": \"all\"\n}"
        );
        fs::create_dir(agent.join("settings.json.lock")).unwrap();
        let error = settings.set_follow_up_mode("all").unwrap_err();
        assert!(matches!(error, SettingsError::Locked { .. }), "{error}");
        settings
            .set_project("prompts", Some(json!(["./p"])))
            .unwrap();
        assert_eq!(
            settings.scoped_list(Scope::Project, "prompts"),
            vec!["./p".to_owned()]
        );
    }

    #[test]
    fn packages_and_lists_are_typed() {
        let d = dirs();
        write(
            &d.agent.join("settings.json"),
            r#"{"packages":["npm:a",{"source":"git:b","skills":["s1"]},5],"npmCommand":["pnpm"],"treeFilterMode":"bogus","sessionDir":""}"#,
        );
        let settings = Settings::load(&d.agent, &d.cwd, None);
        assert_eq!(
            settings.packages(),
            vec![
                PackageSource::Source("npm:a".to_owned()),
                PackageSource::Filtered {
                    source: "git:b".to_owned(),
                    extensions: None,
                    skills: Some(vec!["s1".to_owned()]),
                    prompts: None,
                    themes: None
                }
            ]
        );
        assert_eq!(settings.npm_command(), Some(vec!["pnpm".to_owned()]));
        assert_eq!(settings.tree_filter_mode(), "default");
        assert_eq!(settings.session_dir(), None);
    }
}
