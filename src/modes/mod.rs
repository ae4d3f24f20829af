//! The agent run modes: the REPL, print (`-p`), JSON events and RPC over stdin/stdout. Each
//! drives the same `AgentSession`; `modes` and `cli` are the only layers that write to the
//! terminal.
//!
//! `cli` builds a [`Prepared`] (session configuration, target, prompts, terminal settings)
//! from the command line and the environment and hands it to one mode; nothing in `modes`
//! reads the environment.

pub mod html;
pub mod login;
pub mod markdown;
pub mod print;
pub mod render;
pub mod repl;
pub mod rpc;
pub mod theme;
pub mod tree;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::model::ids::SessionId;
use crate::model::message::ImageContent;
use crate::session::{SessionConfig, SessionTarget};
use crate::store::SessionStore;

/// Everything an agent run needs, built by `cli` from the command line and the environment.
pub struct Prepared {
    /// The session configuration.
    pub config: SessionConfig,
    /// Which session to open.
    pub target: SessionTarget,
    /// The mode chosen (text means print when `print` is set).
    pub mode: Mode,
    /// Whether print mode was chosen (`-p`, or piped stdin).
    pub print: bool,
    /// The prompts to send, in order (the first with stdin and `@file` text joined).
    pub prompts: Vec<(String, Vec<ImageContent>)>,
    /// Warnings to show before starting.
    pub warnings: Vec<String>,
    /// What the interactive mode needs from the environment.
    pub terminal: TerminalConfig,
    /// File import and export, lent by `cli` for `/import` and `/export`.
    pub interchange: Interchange,
    /// The MCP servers of this run (`None` with `--no-mcp`); connected before the mode starts.
    pub mcp: Option<std::sync::Arc<crate::session::mcp::McpManager>>,
}

/// What `/import` did with a file (one line for people, and the session to switch to).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportedFile {
    /// The session the file went to; `None` when it was refused.
    pub session: Option<SessionId>,
    /// `imported`, `updated`, `unchanged` or `refused`, with counts, or why it was refused.
    pub summary: String,
}

/// Imports a file exactly as `pi import FILE` does.
pub type ImportFn = Arc<dyn Fn(&SessionStore, &Path) -> anyhow::Result<ImportedFile> + Send + Sync>;

/// Writes the active branch of a session to a new JSONL file as
/// `pi export --jsonl --branch -o FILE` does, continued by the lines the session could not
/// write yet (the third argument: each the child of the one before, the first a child of the
/// store's leaf), so the file is the branch as it will be once they are saved. Returns the
/// file written.
pub type ExportBranchFn = Arc<
    dyn Fn(&SessionStore, &SessionId, &[Vec<u8>], &ExportTarget) -> anyhow::Result<PathBuf>
        + Send
        + Sync,
>;

/// Where `/export` writes a branch as JSONL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExportTarget {
    /// This file (`/export FILE.jsonl`).
    File(PathBuf),
    /// A new file in this directory named as the reference names session files,
    /// `<timestamp>_<id>.jsonl` with the id of the session inside (`/export DIR/`): a
    /// reference sessions directory then lists it as a session of its own.
    Directory(PathBuf),
}

/// Imports what the reference wrote since the last look (`cli/autoimport.rs`) before a
/// session list or lookup; never fails, returns one printable warning line per problem.
pub type RefreshFn = Arc<dyn Fn(&SessionStore) -> Vec<String> + Send + Sync>;

/// Told that the REPL left a session (exit, `/new`, `/resume`, a fork or clone): starts what
/// `cli` does then (the automatic push of `sync.auto`, in a process of its own) without
/// waiting for it; returns one printable warning line per earlier automatic push that failed.
pub type LeftFn = Arc<dyn Fn(&SessionId) -> Vec<String> + Send + Sync>;

/// The file operations `cli` lends the REPL and RPC mode, so that `/import`, `/export` and the
/// automatic import run the same code as the commands (a higher layer hands a lower one
/// callbacks).
#[derive(Clone)]
pub struct Interchange {
    /// `/import FILE`.
    pub import: ImportFn,
    /// `/export FILE.jsonl`.
    pub export_branch: ExportBranchFn,
    /// The automatic import before `/resume`, `-r` and RPC `switch_session`.
    pub refresh: RefreshFn,
    /// A session was left (the REPL).
    pub left: LeftFn,
}

impl std::fmt::Debug for Interchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interchange").finish_non_exhaustive()
    }
}

/// What the modes need to know about the user's environment (resolved by `cli`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminalConfig {
    /// Colour is allowed (`NO_COLOR` unset); it is still used only on a terminal.
    pub color_allowed: bool,
    /// The agent directory (`models.json`, `auth.json`, the input history).
    pub agent_dir: PathBuf,
    /// The home directory (shown as `~` in paths).
    pub home: Option<PathBuf>,
    /// Where the REPL keeps its input history; `None` keeps it in memory only.
    pub history_path: Option<PathBuf>,
    /// The database path as shown to people (`/session`).
    pub database: String,
    /// What Esc twice on an empty prompt does (`doubleEscapeAction`).
    pub double_escape: DoubleEscape,
    /// The command Ctrl+G edits the prompt with: the `externalEditor` setting, else `$VISUAL`,
    /// `$EDITOR`, `nano` (resolved by `cli`).
    pub external_editor: String,
    /// The directory pi was started in (`/export` writes relative to it, as 1.6.0 does).
    pub start_dir: PathBuf,
    /// The `hideThinkingBlock` setting: thinking collapsed (Ctrl+T toggles it).
    pub hide_thinking: bool,
    /// What the theme is chosen from (`modes::theme`).
    pub theme: theme::ThemeConfig,
}

/// What Esc pressed twice on an empty prompt does: the settings' `doubleEscapeAction`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DoubleEscape {
    /// `tree` (the default): the session tree (`/tree`).
    #[default]
    Tree,
    /// `fork`: `/fork`.
    Fork,
    /// `none`: nothing.
    Nothing,
}

impl DoubleEscape {
    /// The setting's value; anything else is the default.
    pub fn from_setting(value: &str) -> Self {
        match value {
            "fork" => Self::Fork,
            "none" => Self::Nothing,
            _ => Self::Tree,
        }
    }
}

impl TerminalConfig {
    /// Returns a configuration for an agent dir, with colour and history as given.
    pub fn new(agent_dir: &Path, home: Option<&Path>, color_allowed: bool) -> Self {
        Self {
            color_allowed,
            agent_dir: agent_dir.to_path_buf(),
            home: home.map(Path::to_path_buf),
            history_path: Some(agent_dir.join("repl-history")),
            database: agent_dir.join("pi.db").display().to_string(),
            double_escape: DoubleEscape::default(),
            external_editor: "nano".to_owned(),
            start_dir: agent_dir.to_path_buf(),
            hide_thinking: false,
            theme: theme::ThemeConfig::default(),
        }
    }
}

/// Returns the text that tells a user with no usable model exactly what to configure.
pub fn setup_help(agent_dir: &Path) -> String {
    let models = agent_dir.join("models.json");
    let auth = agent_dir.join("auth.json");
    [
        "No model available. Configure one of:".to_owned(),
        "  - a subscription or API key saved by `pi auth login <provider>` (or /login): anthropic, openai-codex, github-copilot sign in with an account".to_owned(),
        "  - an API key in the environment: ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENROUTER_API_KEY, GROQ_API_KEY, XAI_API_KEY, DEEPSEEK_API_KEY, …".to_owned(),
        format!(
            "  - a key in {}: {{\"anthropic\": {{\"type\": \"api_key\", \"key\": \"sk-…\"}}}}",
            auth.display()
        ),
        format!(
            "  - a local OpenAI-compatible server (Ollama, llama.cpp, vLLM) in {}:",
            models.display()
        ),
        "    {\"providers\": {\"ollama\": {\"baseUrl\": \"http://localhost:11434/v1\", \"api\": \"openai-completions\", \"apiKey\": \"ollama\", \"models\": [{\"id\": \"qwen2.5-coder:7b\"}]}}}".to_owned(),
        "then start pi again (`pi --list-models` shows the models it can use; choose one with --model provider/id).".to_owned(),
    ]
    .join("\n")
}

/// Output mode (`--mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Text (the REPL, or print with `-p`).
    Text,
    /// JSON event lines.
    Json,
    /// RPC over stdin/stdout.
    Rpc,
}

/// Resolves with the exit code of the first SIGTERM (143) or SIGHUP (129).
pub(crate) async fn termination_signal() -> u8 {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        // Without signal handlers the default action (termination) still applies.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => 143,
        _ = hup.recv() => 129,
    }
}

/// `<database path>#<session id>` (what the reference calls the session file), or `None` for
/// an in-memory store (`--no-session`).
pub fn session_file(store: &SessionStore, session_id: &str) -> Option<String> {
    let path = store.display_path();
    (path != ":memory:").then(|| format!("{path}#{session_id}"))
}

/// A stored session whose working directory no longer exists (the reference's
/// `MissingSessionCwdError`): the REPL asks whether to continue in the current directory,
/// the other modes refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingCwd {
    /// The directory the session recorded.
    pub session_cwd: String,
    /// [`session_file`] of the session.
    pub session_file: Option<String>,
    /// Where the session would continue instead.
    pub fallback: PathBuf,
}

impl MissingCwd {
    /// Reads the session's directory; `Some` when it is recorded and does not exist.
    pub fn check(
        store: &SessionStore,
        session: &SessionId,
        fallback: &Path,
    ) -> Result<Option<Self>, crate::store::StoreError> {
        let summary = store.session(session)?;
        if summary.cwd.is_empty() || Path::new(&summary.cwd).exists() {
            return Ok(None);
        }
        Ok(Some(Self {
            session_cwd: summary.cwd,
            session_file: session_file(store, session.as_str()),
            fallback: fallback.to_path_buf(),
        }))
    }

    /// The refusal of the non-interactive modes (the reference's wording).
    pub fn error_message(&self) -> String {
        let file = self
            .session_file
            .as_deref()
            .map(|file| format!("\nSession file: {file}"))
            .unwrap_or_default();
        format!(
            "Stored session working directory does not exist: {}{file}\nCurrent working directory: {}",
            self.session_cwd,
            self.fallback.display()
        )
    }

    /// The REPL's question, as the reference words it (answered Continue or Cancel).
    pub fn question(&self) -> String {
        format!(
            "cwd from session file does not exist\n{}\n\ncontinue in current cwd\n{}",
            crate::support::term::line(&self.session_cwd),
            crate::support::term::line(&self.fallback.to_string_lossy())
        )
    }
}
