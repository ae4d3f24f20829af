//! [`ExtensionContext`]: what an extension can do to and learn from its session — the
//! reference's `pi.*` actions (`appendEntry`, `sendMessage`, `sendUserMessage`,
//! `setSessionName`, `setLabel`, `exec`, tool activation, `setModel`, `setThinkingLevel`) and
//! `ctx.*` (`ui`, `hasUI`, `cwd`, the read-only session view, `isIdle`, `abort`,
//! `getSystemPrompt`).
//!
//! The context reaches its session through [`SessionLink`] and [`ExtensionSession`], which
//! the session implements (`session/agent_session/extension_api.rs`), so this module knows no
//! session type. The link is weak, so an extension never keeps a session alive; after the
//! session is gone every action fails with "the session has ended". A context without a
//! session ([`ExtensionContext::detached`]) serves benchmarks and bus tests.
//!
//! Invariants: `sendMessage` and `sendUserMessage` never wait for the run they start (they
//! are fire-and-forget in the reference; their failures become `extension_error` events from
//! `<runtime>`), so an extension calling them from a handler cannot deadlock its own session.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use crate::agent::tool::BoxFuture;
use crate::ai::{Model, ThinkingLevel};
use crate::model::ids::{EntryId, SessionId};
use crate::model::message::{ContentBlock, CustomMessage, ImageContent, UserContent};
use crate::session::extensions::error::{ErrorSink, ExtensionError, ExtensionErrorReport};
use crate::session::extensions::result::CustomMessageSpec;
use crate::session::extensions::ui::{ExtensionUi, NotifyKind};

/// The result of `exec` (`{stdout, stderr, code, killed}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecResult {
    /// Standard output (lossy UTF-8).
    pub stdout: String,
    /// Standard error (lossy UTF-8).
    pub stderr: String,
    /// The exit code (1 when it could not start, or died from a signal).
    pub code: i32,
    /// Whether pi killed it (timeout or abort).
    pub killed: bool,
}

/// A tool as `getAllTools` lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolInfo {
    /// The name.
    pub name: String,
    /// The description.
    pub description: String,
    /// The JSON schema.
    pub parameters: Value,
}

/// How an extension's message is delivered (`deliverAs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliverAs {
    /// While streaming: after the current tool calls.
    Steer,
    /// While streaming: when the agent would stop.
    FollowUp,
    /// Held and sent with the next user prompt.
    NextTurn,
}

/// The options of `pi.sendMessage`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendMessageOptions {
    /// When idle: start a turn with the message.
    pub trigger_turn: bool,
    /// How to deliver it (default: steer while streaming, else at once).
    pub deliver_as: Option<DeliverAs>,
}

/// What an [`ExtensionContext`] asks of its session (the session implements it). Fallible
/// operations give the session's error as [`ExtensionError::Handler`].
pub trait ExtensionSession: Send + Sync {
    /// Emits an `extension_error` event.
    fn report_error(&self, report: ExtensionErrorReport);
    /// Returns the session clock's time (Unix ms).
    fn now_ms(&self) -> i64;
    /// Appends a `custom` entry.
    fn append_custom<'a>(&'a self, custom_type: &'a str, data: Option<Value>) -> BoxFuture<'a, ()>;
    /// Delivers a custom message in the background (`pi.sendMessage`); returns at once.
    fn send_message(&self, message: CustomMessage, options: SendMessageOptions);
    /// Prompts with a user message in the background (`pi.sendUserMessage`, no expansion);
    /// returns at once, a failure becomes an `extension_error` from `<runtime>`.
    fn send_user_message(
        &self,
        text: String,
        images: Vec<ImageContent>,
        deliver_as: Option<DeliverAs>,
    );
    /// Names the session.
    fn set_session_name<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), ExtensionError>>;
    /// Returns the session name.
    fn session_name(&self) -> Option<String>;
    /// Sets (or clears) an entry's label.
    fn set_label<'a>(
        &'a self,
        entry_id: &'a EntryId,
        label: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ExtensionError>>;
    /// Returns the active tool names.
    fn active_tool_names(&self) -> Vec<String>;
    /// Returns every registered tool.
    fn all_tools(&self) -> Vec<ToolInfo>;
    /// Sets the active tools (unknown names are ignored).
    fn set_active_tools(&self, names: &[String]);
    /// Switches to a registered model; `false` when it is unknown or has no credentials.
    fn set_model<'a>(&'a self, provider: &'a str, model_id: &'a str) -> BoxFuture<'a, bool>;
    /// Returns the current model.
    fn model(&self) -> Option<Model>;
    /// Returns the thinking level.
    fn thinking_level(&self) -> ThinkingLevel;
    /// Sets the thinking level (clamped to the model).
    fn set_thinking_level(&self, level: ThinkingLevel) -> BoxFuture<'_, ()>;
    /// Returns every entry in append order, as the reference's entry objects.
    fn entries_json(&self) -> BoxFuture<'_, Result<Vec<Value>, ExtensionError>>;
    /// Returns the entries of the active path, root first.
    fn branch_json(&self) -> BoxFuture<'_, Result<Vec<Value>, ExtensionError>>;
    /// Returns the leaf entry id (`None` before the first entry).
    fn leaf_id(&self) -> BoxFuture<'_, Result<Option<EntryId>, ExtensionError>>;
    /// Returns the session id.
    fn session_id(&self) -> BoxFuture<'_, SessionId>;
    /// Returns whether a run is in progress.
    fn is_streaming(&self) -> bool;
    /// Aborts the running turn.
    fn abort(&self);
    /// Returns the current system prompt.
    fn system_prompt(&self) -> String;
}

/// A link to a session that does not keep it alive.
pub trait SessionLink: Send + Sync {
    /// Returns the session while it exists.
    fn session(&self) -> Option<Box<dyn ExtensionSession>>;
}

/// The handle an extension uses to reach its session and the user.
#[derive(Clone)]
pub struct ExtensionContext {
    session: Option<Arc<dyn SessionLink>>,
    ui: Arc<dyn ExtensionUi>,
    cwd: PathBuf,
    env: Vec<(OsString, OsString)>,
    errors: Option<ErrorSink>,
}

impl std::fmt::Debug for ExtensionContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtensionContext")
            .field("cwd", &self.cwd)
            .field("has_ui", &self.ui.has_ui())
            .field("attached", &self.session.is_some())
            .finish()
    }
}

fn ended() -> ExtensionError {
    ExtensionError::Handler("the session has ended".to_owned())
}

impl ExtensionContext {
    /// A context bound to a session.
    pub(crate) fn attached(
        session: Arc<dyn SessionLink>,
        ui: Arc<dyn ExtensionUi>,
        cwd: PathBuf,
        env: Vec<(OsString, OsString)>,
    ) -> Self {
        Self {
            session: Some(session),
            ui,
            cwd,
            env,
            errors: None,
        }
    }

    /// A context without a session: actions that need one fail, errors go to `errors`.
    pub fn detached(
        ui: Arc<dyn ExtensionUi>,
        cwd: PathBuf,
        env: Vec<(OsString, OsString)>,
        errors: ErrorSink,
    ) -> Self {
        Self {
            session: None,
            ui,
            cwd,
            env,
            errors: Some(errors),
        }
    }

    fn session(&self) -> Result<Box<dyn ExtensionSession>, ExtensionError> {
        self.session
            .as_ref()
            .and_then(|link| link.session())
            .ok_or_else(ended)
    }

    /// Reports an extension error (an `extension_error` event of the session).
    pub fn report_error(&self, extension_path: &str, event: &str, error: &str) {
        let report = ExtensionErrorReport {
            extension_path: extension_path.to_owned(),
            event: event.to_owned(),
            error: error.to_owned(),
        };
        if let Some(session) = self.session.as_ref().and_then(|link| link.session()) {
            session.report_error(report);
        } else if let Some(sink) = &self.errors {
            sink(report);
        }
    }

    /// The UI (`ctx.ui`).
    pub fn ui(&self) -> &Arc<dyn ExtensionUi> {
        &self.ui
    }

    /// Whether a person can answer dialogs (`ctx.hasUI`).
    pub fn has_ui(&self) -> bool {
        self.ui.has_ui()
    }

    /// The working directory (`ctx.cwd`).
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Shows a notification.
    pub fn notify(&self, message: &str, kind: NotifyKind) {
        self.ui.notify(message, kind);
    }

    /// Appends a `custom` entry (extension state, never in the context).
    pub async fn append_entry(
        &self,
        custom_type: &str,
        data: Option<Value>,
    ) -> Result<(), ExtensionError> {
        self.session()?.append_custom(custom_type, data).await;
        Ok(())
    }

    /// Sends a custom message (`pi.sendMessage`); returns at once, the delivery (and any turn
    /// it triggers) runs in the background.
    pub fn send_message(
        &self,
        message: CustomMessageSpec,
        options: SendMessageOptions,
    ) -> Result<(), ExtensionError> {
        let session = self.session()?;
        let custom = CustomMessage {
            custom_type: message.custom_type,
            content: message.content,
            display: message.display,
            details: message.details,
            timestamp: session.now_ms(),
            extra: serde_json::Map::new(),
        };
        session.send_message(custom, options);
        Ok(())
    }

    /// Sends a user message (`pi.sendUserMessage`): like a typed prompt with source
    /// `extension` and no expansion; while the agent runs, `deliver_as` is required. Returns
    /// at once; a failure becomes an `extension_error` from `<runtime>`.
    pub fn send_user_message(
        &self,
        content: UserContent,
        deliver_as: Option<DeliverAs>,
    ) -> Result<(), ExtensionError> {
        let session = self.session()?;
        let (text, images) = split_content(content);
        session.send_user_message(text, images, deliver_as);
        Ok(())
    }

    /// Names the session.
    pub async fn set_session_name(&self, name: &str) -> Result<(), ExtensionError> {
        self.session()?.set_session_name(name).await
    }

    /// Returns the session name.
    pub fn session_name(&self) -> Result<Option<String>, ExtensionError> {
        Ok(self.session()?.session_name())
    }

    /// Sets (or clears) an entry's label.
    pub async fn set_label(
        &self,
        entry_id: &str,
        label: Option<&str>,
    ) -> Result<(), ExtensionError> {
        let entry_id = EntryId::new(entry_id);
        self.session()?.set_label(&entry_id, label).await
    }

    /// Runs a program (no shell) in the working directory or `cwd`, killing it after
    /// `timeout` or when `cancel` fires.
    pub async fn exec(
        &self,
        command: &str,
        args: &[String],
        cwd: Option<&Path>,
        timeout: Option<Duration>,
        cancel: Option<CancellationToken>,
    ) -> ExecResult {
        run_exec(
            command,
            args,
            cwd.unwrap_or(&self.cwd),
            &self.env,
            timeout,
            cancel,
        )
        .await
    }

    /// The active tool names.
    pub fn active_tools(&self) -> Result<Vec<String>, ExtensionError> {
        Ok(self.session()?.active_tool_names())
    }

    /// Every registered tool.
    pub fn all_tools(&self) -> Result<Vec<ToolInfo>, ExtensionError> {
        Ok(self.session()?.all_tools())
    }

    /// Sets the active tools (unknown names are ignored).
    pub fn set_active_tools(&self, names: &[String]) -> Result<(), ExtensionError> {
        self.session()?.set_active_tools(names);
        Ok(())
    }

    /// Switches the model; `false` when it is unknown or has no credentials.
    pub async fn set_model(&self, provider: &str, model_id: &str) -> Result<bool, ExtensionError> {
        Ok(self.session()?.set_model(provider, model_id).await)
    }

    /// The current model as the reference's model object.
    pub fn model(&self) -> Result<Option<Value>, ExtensionError> {
        Ok(self
            .session()?
            .model()
            .and_then(|model| serde_json::to_value(model).ok()))
    }

    /// The thinking level.
    pub fn thinking_level(&self) -> Result<ThinkingLevel, ExtensionError> {
        Ok(self.session()?.thinking_level())
    }

    /// Sets the thinking level (clamped to the model).
    pub async fn set_thinking_level(&self, level: ThinkingLevel) -> Result<(), ExtensionError> {
        self.session()?.set_thinking_level(level).await;
        Ok(())
    }

    /// Every entry of the session in append order, as the reference's entry objects.
    pub async fn entries(&self) -> Result<Vec<Value>, ExtensionError> {
        self.session()?.entries_json().await
    }

    /// The entries of the active path, root first.
    pub async fn branch(&self) -> Result<Vec<Value>, ExtensionError> {
        self.session()?.branch_json().await
    }

    /// The leaf entry id (`None` before the first entry).
    pub async fn leaf_id(&self) -> Result<Option<String>, ExtensionError> {
        let leaf = self.session()?.leaf_id().await?;
        Ok(leaf.map(|id| id.to_string()))
    }

    /// The session id.
    pub async fn session_id(&self) -> Result<String, ExtensionError> {
        Ok(self.session()?.session_id().await.into_string())
    }

    /// Whether no run is in progress (`ctx.isIdle()`).
    pub fn is_idle(&self) -> Result<bool, ExtensionError> {
        Ok(!self.session()?.is_streaming())
    }

    /// Aborts the running turn.
    pub fn abort(&self) -> Result<(), ExtensionError> {
        self.session()?.abort();
        Ok(())
    }

    /// The current system prompt.
    pub fn system_prompt(&self) -> Result<String, ExtensionError> {
        Ok(self.session()?.system_prompt())
    }
}

/// Splits user content into text (text blocks joined with `\n`) and images, as the
/// reference's `sendUserMessage` does.
fn split_content(content: UserContent) -> (String, Vec<ImageContent>) {
    match content {
        UserContent::Text(text) => (text, Vec::new()),
        UserContent::Blocks(blocks) => {
            let mut texts = Vec::new();
            let mut images = Vec::new();
            for block in blocks {
                match block {
                    ContentBlock::Text(text) => texts.push(text.text),
                    ContentBlock::Image(image) => images.push(image),
                    ContentBlock::Thinking(_)
                    | ContentBlock::ToolCall(_)
                    | ContentBlock::Unknown(_) => {}
                }
            }
            (texts.join("\n"), images)
        }
    }
}

async fn run_exec(
    command: &str,
    args: &[String],
    cwd: &Path,
    env: &[(OsString, OsString)],
    timeout: Option<Duration>,
    cancel: Option<CancellationToken>,
) -> ExecResult {
    let mut child = match tokio::process::Command::new(command)
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(key, value)| (key, value)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(error) => {
            return ExecResult {
                stdout: String::new(),
                stderr: format!("{command}: {error}"),
                code: 1,
                killed: false,
            };
        }
    };
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let read_out = async move {
        let mut buffer = Vec::new();
        if let Some(pipe) = stdout.as_mut() {
            let _ = pipe.read_to_end(&mut buffer).await;
        }
        buffer
    };
    let read_err = async move {
        let mut buffer = Vec::new();
        if let Some(pipe) = stderr.as_mut() {
            let _ = pipe.read_to_end(&mut buffer).await;
        }
        buffer
    };
    let cancel = cancel.unwrap_or_default();
    let deadline = async {
        match timeout.filter(|limit| !limit.is_zero()) {
            Some(limit) => tokio::time::sleep(limit).await,
            None => std::future::pending().await,
        }
    };
    let mut killed = false;
    let output = futures::future::join(read_out, read_err);
    tokio::pin!(output);
    let (out, err) = tokio::select! {
        pair = &mut output => pair,
        () = deadline => {
            killed = true;
            let _ = child.start_kill();
            output.await
        }
        () = cancel.cancelled() => {
            killed = true;
            let _ = child.start_kill();
            output.await
        }
    };
    let code = match child.wait().await {
        Ok(status) => status.code().unwrap_or(1),
        Err(_) => 1,
    };
    ExecResult {
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
        code,
        killed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sent_user_content_joins_text_blocks_with_newlines_and_keeps_images() {
        let (text, images) = split_content(UserContent::Blocks(vec![
            ContentBlock::text("a"),
            ContentBlock::text("b"),
        ]));
        assert_eq!(text, "a\nb");
        assert!(images.is_empty());
    }

    #[tokio::test]
    async fn exec_captures_output_and_the_exit_code_and_kills_on_timeout() {
        let env = vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
        let done = run_exec(
            "sh",
            &["-c".into(), "echo out; echo err >&2; exit 3".into()],
            Path::new("/"),
            &env,
            None,
            None,
        )
        .await;
        assert_eq!(
            (
                done.stdout.as_str(),
                done.stderr.as_str(),
                done.code,
                done.killed
            ),
            ("out\n", "err\n", 3, false)
        );
        let slow = run_exec(
            "sleep",
            &["5".into()],
            Path::new("/"),
            &env,
            Some(Duration::from_millis(50)),
            None,
        )
        .await;
        assert!(slow.killed);
        let missing = run_exec("/no/such/program", &[], Path::new("/"), &env, None, None).await;
        assert_eq!(missing.code, 1);
    }
}
