//! Extensions: change pi's behaviour without touching its core (`spec/extensions-and-modes.md`
//! §1–§5, `docs/extensions.md`).
//!
//! * [`event`] — the event catalogue (agent events passed on as they are), and [`result`] —
//!   the typed results handlers may give;
//! * [`api`] — the [`Extension`] trait (one hook per event, each with a no-op default), so
//!   built-in features and external programs use the same bus;
//! * [`bus`] — [`ExtensionBus`]: dispatch in load order with the reference's result semantics,
//!   errors reported as `extension_error` events, time limits;
//! * [`context`] — [`ExtensionContext`]: what an extension can do to its session, through the
//!   [`context::ExtensionSession`] trait the session implements (nothing here names
//!   `AgentSession`: the session's side is `session/agent_session/hooks.rs` and
//!   `extension_api.rs`);
//! * [`error`] — [`ExtensionError`] and the `extension_error` report;
//! * [`ui`] — [`ExtensionUi`]: dialogs answered by the REPL or the RPC client, [`NoUi`]
//!   otherwise;
//! * [`process`], [`protocol`], [`host`] — out-of-process extensions speaking JSON lines;
//! * [`discovery`] — where executable extensions are found.
//!
//! A fresh set of extensions is started for every session runtime (startup, `/new`,
//! `/resume`, fork, clone), as in the reference 0.73.1.
//!
//! Invariants: an extension's failure never aborts a run or loses an entry; nothing here
//! prints or reads environment variables (the environment for child processes is passed in).

pub mod api;
pub mod bus;
pub mod context;
pub mod discovery;
pub mod error;
pub mod event;
pub mod host;
pub mod node_host;
pub mod process;
pub mod protocol;
pub mod result;
pub mod ui;

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use api::{CommandInfo, Extension, HookFuture};
pub use bus::{ExtensionBus, InputOutcome, RegisteredCommand};
pub use context::{DeliverAs, ExtensionContext, SendMessageOptions};
pub use discovery::{Discovered, DiscoveryInput, ExecutableExtension, ExtensionOrigin};
pub use error::{ExtensionError, ExtensionErrorReport};
pub use event::ExtensionEvent;
pub use process::{ProcessConfig, ProcessExtension};
pub use ui::{ExtensionUi, NoUi, NotifyKind, WidgetPlacement};

/// The default time limit: a handshake, and an extension's silence while it owes an answer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds a fresh in-process extension for each session runtime.
pub type ExtensionFactory = Arc<dyn Fn() -> Arc<dyn Extension> + Send + Sync>;

/// Which extensions a session loads, and how.
#[derive(Clone)]
pub struct ExtensionsConfig {
    /// In-process extensions (built-in features), loaded first, in order.
    pub builtin: Vec<ExtensionFactory>,
    /// Executable extensions, in load order (see [`discovery`]).
    pub executables: Vec<ExecutableExtension>,
    /// The handshake limit and the per-request inactivity limit (settings key
    /// `executableExtensionTimeoutMs`); also the limit of in-process hooks.
    pub timeout: Duration,
    /// Dialogs and notifications (the mode's UI; [`NoUi`] when nobody can answer).
    pub ui: Arc<dyn ExtensionUi>,
    /// The environment extension processes and `exec` get (pi's own).
    pub env: Vec<(OsString, OsString)>,
    /// How `executables` were found, so that a runtime moved to another project's directory
    /// finds that project's extensions (`None`: the list stays as it is).
    pub rediscovery: Option<Rediscovery>,
}

impl Default for ExtensionsConfig {
    fn default() -> Self {
        Self {
            builtin: Vec::new(),
            executables: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            ui: Arc::new(NoUi),
            env: Vec::new(),
            rediscovery: None,
        }
    }
}

/// The inputs of [`discovery::discover`] that do not depend on the working directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rediscovery {
    /// The agent directory.
    pub agent_dir: std::path::PathBuf,
    /// The home directory, for `~/`.
    pub home: Option<std::path::PathBuf>,
    /// `-e` values, resolved against the startup directory.
    pub cli_paths: Vec<String>,
    /// `executableExtensions` of `<agent dir>/settings.json`.
    pub user_settings: Vec<String>,
    /// False with `--no-extensions`.
    pub discover: bool,
}

impl Rediscovery {
    /// Discovers the executable extensions of a runtime in `cwd` (its project's
    /// `.pi/extensions/` and the `executableExtensions` entries of its `project_settings`,
    /// with the user's and `-e`); the project's own only when `project_trusted`.
    pub fn discover(
        &self,
        cwd: &Path,
        project_settings: &serde_json::Value,
        project_trusted: bool,
    ) -> discovery::Discovered {
        let project = discovery::executable_entries(project_settings);
        discovery::discover(&discovery::DiscoveryInput {
            cwd,
            agent_dir: &self.agent_dir,
            home: self.home.as_deref(),
            cli_paths: &self.cli_paths,
            project_settings: &project,
            user_settings: &self.user_settings,
            discover: self.discover,
            project_trusted,
        })
    }
}

impl std::fmt::Debug for ExtensionsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtensionsConfig")
            .field("builtin", &self.builtin.len())
            .field("executables", &self.executables)
            .field("timeout", &self.timeout)
            .field("has_ui", &self.ui.has_ui())
            .finish()
    }
}

/// Starts every configured extension for a session runtime: in-process ones first, then the
/// executables (started concurrently, kept in load order). One that cannot start is reported
/// as an `extension_error` (event `load`) and left out.
pub async fn load(
    config: &ExtensionsConfig,
    ctx: &ExtensionContext,
    cwd: &Path,
) -> Vec<Arc<dyn Extension>> {
    let mut loaded: Vec<Arc<dyn Extension>> =
        config.builtin.iter().map(|factory| factory()).collect();
    let cache_dir = config.rediscovery.as_ref().map_or_else(
        || std::env::temp_dir().join("pi-cache"),
        |rediscovery| rediscovery.agent_dir.join("cache"),
    );
    let node_host = if config.executables.iter().any(|executable| executable.node) {
        Some(node_host::prepare(&config.env, &cache_dir).await)
    } else {
        None
    };
    let starts = config.executables.iter().map(|executable| {
        let (program, args) = match (&node_host, executable.node) {
            (Some(Ok(host)), true) => (host.node.clone(), host.args(&executable.program)),
            _ => (executable.program.clone(), Vec::new()),
        };
        let process = ProcessConfig {
            program,
            args,
            display: executable.display.clone(),
            cwd: cwd.to_path_buf(),
            env: config.env.clone(),
            timeout: config.timeout,
            version: env!("CARGO_PKG_VERSION").to_owned(),
        };
        let host_error = match (&node_host, executable.node) {
            (Some(Err(error)), true) => Some(error.clone()),
            _ => None,
        };
        let ctx = ctx.clone();
        async move {
            match host_error {
                Some(error) => Err(format!("failed to start: {error}")),
                None => ProcessExtension::start(process, ctx).await,
            }
        }
    });
    let started = futures::future::join_all(starts).await;
    for (executable, result) in config.executables.iter().zip(started) {
        match result {
            Ok(extension) => loaded.push(Arc::new(extension)),
            Err(reason) => ctx.report_error(&executable.display, "load", &reason),
        }
    }
    loaded
}
