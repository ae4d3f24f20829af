//! The user's shell: `!cmd` (`!!` keeps it out of the context) runs in the runtime
//! directory through `session::tools::user_shell`, or a `user_bash` handler supplies the
//! result; either way it is recorded as a `bashExecution` message — at once when idle,
//! queued until the run ends while streaming.
//!
//! Invariant: a read-only session runs no command.

use std::sync::Arc;

use serde_json::Map;
use tokio_util::sync::CancellationToken;

use crate::model::entry::EntryKind;
use crate::model::message::{AgentMessage, BashExecutionMessage};
use crate::session::agent_session::error::SessionError;
use crate::session::agent_session::state::AgentSession;
use crate::session::extensions::event::UserBashEvent;
use crate::session::tools::user_shell;

/// Receives streamed output of a `!command`.
pub type OutputSink = Arc<dyn Fn(&str) + Send + Sync>;

impl AgentSession {
    /// Runs a `!command` (`!!` when `exclude_from_context`), records it as a `bashExecution`
    /// message (queued until the run ends when streaming) and returns it. A `user_bash`
    /// handler may supply the result instead; it is recorded the same way.
    pub async fn execute_bash(
        &self,
        command: &str,
        exclude_from_context: bool,
        on_chunk: Option<OutputSink>,
    ) -> Result<BashExecutionMessage, SessionError> {
        self.execute_bash_with(command, exclude_from_context.then_some(true), on_chunk)
            .await
    }

    /// [`AgentSession::execute_bash`] with `excludeFromContext` recorded as given (1.6.0's
    /// RPC `bash` stores the client's value: absent, `false` or `true`); only `Some(true)`
    /// keeps the output from the model.
    pub async fn execute_bash_with(
        &self,
        command: &str,
        recorded_exclusion: Option<bool>,
        on_chunk: Option<OutputSink>,
    ) -> Result<BashExecutionMessage, SessionError> {
        let exclude_from_context = recorded_exclusion == Some(true);
        self.refuse_read_only().await?;
        let bus = self.bus();
        if bus.has_handlers("user_bash") {
            let event = UserBashEvent {
                command: command.to_owned(),
                exclude_from_context,
                cwd: self.cwd().to_string_lossy().into_owned(),
            };
            if let Some(result) = bus.emit_user_bash(&event).await {
                let message = BashExecutionMessage {
                    command: command.to_owned(),
                    output: result.output,
                    exit_code: result.exit_code,
                    cancelled: result.cancelled,
                    truncated: result.truncated,
                    full_output_path: result.full_output_path,
                    exclude_from_context: recorded_exclusion,
                    timestamp: self.config().clock.now_ms(),
                    extra: Map::new(),
                };
                self.record_bash(message.clone()).await;
                return Ok(message);
            }
        }
        let cancel = CancellationToken::new();
        self.state().bash_cancel = Some(cancel.clone());
        let result = user_shell::run_user_shell(
            &self.config().shell,
            command,
            &self.cwd(),
            cancel,
            |chunk: &str| {
                if let Some(sink) = &on_chunk {
                    sink(chunk);
                }
            },
        )
        .await;
        self.state().bash_cancel = None;
        let result = result.map_err(|error| SessionError::Shell(error.to_string()))?;
        let parsed = user_shell::UserShellCommand {
            command: command.to_owned(),
            exclude_from_context,
        };
        let mut message = result.to_message(&parsed, self.config().clock.now_ms());
        message.exclude_from_context = recorded_exclusion;
        self.record_bash(message.clone()).await;
        Ok(message)
    }

    /// Records a `!cmd` result: at once when idle, after the run while streaming.
    pub(super) async fn record_bash(&self, message: BashExecutionMessage) {
        if self.is_streaming() {
            self.state().pending_bash.push(message);
        } else {
            self.state()
                .transcript
                .push(AgentMessage::BashExecution(message.clone()));
            self.persist(EntryKind::Message(AgentMessage::BashExecution(message)))
                .await;
        }
    }

    /// Stops a running `!command`.
    pub fn abort_bash(&self) {
        if let Some(cancel) = &self.state().bash_cancel {
            cancel.cancel();
        }
    }

    /// Records the `!cmd` results that waited for the run to end.
    pub(super) async fn flush_pending_bash(&self) {
        let pending = std::mem::take(&mut self.state().pending_bash);
        for message in pending {
            let message = AgentMessage::BashExecution(message);
            self.state().transcript.push(message.clone());
            self.persist(EntryKind::Message(message)).await;
        }
    }
}
