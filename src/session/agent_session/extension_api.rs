//! The session side of `ExtensionContext`: [`AgentSession`] implements
//! `extensions::context::ExtensionSession` (what an extension may do to its session) and its
//! weak handle implements `SessionLink`, so `session::extensions` knows no session type and an
//! extension never keeps its session alive. Work an extension starts in the background
//! (`sendMessage`, `sendUserMessage`) is tracked so a mode can wait for it.
//!
//! Invariant: `send_message` and `send_user_message` return at once; what they start runs in
//! the background and reports its failure as an `extension_error` from `<runtime>`.

use std::future::Future;
use std::sync::atomic::Ordering;

use serde_json::Value;

use crate::agent::tool::BoxFuture;
use crate::ai::{Model, ThinkingLevel};
use crate::model::ids::{EntryId, SessionId};
use crate::model::message::{CustomMessage, ImageContent};
use crate::session::agent_session::error::SessionError;
use crate::session::agent_session::prompt::{PromptOptions, PromptSource};
use crate::session::agent_session::queues::StreamingBehavior;
use crate::session::agent_session::state::{AgentSession, WeakSession};
use crate::session::extensions::context::{
    DeliverAs, ExtensionSession, SendMessageOptions, SessionLink, ToolInfo,
};
use crate::session::extensions::error::{ExtensionError, ExtensionErrorReport};

impl AgentSession {
    /// Runs `work` in the background (extension-triggered messages and turns), tracked so that
    /// [`Self::wait_for_idle`] can wait for it.
    pub(crate) fn spawn_background(&self, work: impl Future<Output = ()> + Send + 'static) {
        let inner = self.inner.clone();
        inner.background.running.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            work.await;
            if inner.background.running.fetch_sub(1, Ordering::SeqCst) == 1 {
                inner.background.idle.notify_waiters();
            }
        });
    }

    /// Waits until no run and no extension-triggered work is in progress.
    pub async fn wait_for_idle(&self) {
        loop {
            let notified = self.inner.background.idle.notified();
            if self.inner.background.running.load(Ordering::SeqCst) == 0 {
                drop(notified);
                let _run = self.inner.run_lock.lock().await;
                if self.inner.background.running.load(Ordering::SeqCst) == 0 {
                    return;
                }
                continue;
            }
            notified.await;
        }
    }
}

impl SessionLink for WeakSession {
    fn session(&self) -> Option<Box<dyn ExtensionSession>> {
        self.upgrade()
            .map(|session| Box::new(session) as Box<dyn ExtensionSession>)
    }
}

/// A session error as an extension sees it.
fn handler_error(error: SessionError) -> ExtensionError {
    ExtensionError::Handler(error.to_string())
}

impl ExtensionSession for AgentSession {
    fn report_error(&self, report: ExtensionErrorReport) {
        self.report_extension_error(report);
    }

    fn now_ms(&self) -> i64 {
        AgentSession::now_ms(self)
    }

    fn append_custom<'a>(&'a self, custom_type: &'a str, data: Option<Value>) -> BoxFuture<'a, ()> {
        Box::pin(AgentSession::append_custom(self, custom_type, data))
    }

    fn send_message(&self, message: CustomMessage, options: SendMessageOptions) {
        let worker = self.clone();
        self.spawn_background(async move {
            worker.send_custom_message_with(message, options).await;
        });
    }

    fn send_user_message(
        &self,
        text: String,
        images: Vec<ImageContent>,
        deliver_as: Option<DeliverAs>,
    ) {
        let options = PromptOptions {
            images,
            streaming_behavior: deliver_as.and_then(|deliver| match deliver {
                DeliverAs::Steer => Some(StreamingBehavior::Steer),
                DeliverAs::FollowUp => Some(StreamingBehavior::FollowUp),
                DeliverAs::NextTurn => None,
            }),
            source: PromptSource::Extension,
            no_expansion: true,
        };
        let worker = self.clone();
        self.spawn_background(async move {
            if let Err(error) = worker.prompt(&text, options).await {
                worker.report_extension_error(ExtensionErrorReport {
                    extension_path: "<runtime>".to_owned(),
                    event: "send_user_message".to_owned(),
                    error: error.to_string(),
                });
            }
        });
    }

    fn set_session_name<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), ExtensionError>> {
        Box::pin(async move {
            AgentSession::set_session_name(self, name)
                .await
                .map_err(handler_error)
        })
    }

    fn session_name(&self) -> Option<String> {
        AgentSession::session_name(self)
    }

    fn set_label<'a>(
        &'a self,
        entry_id: &'a EntryId,
        label: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ExtensionError>> {
        Box::pin(async move {
            AgentSession::set_label(self, entry_id, label)
                .await
                .map_err(handler_error)
        })
    }

    fn active_tool_names(&self) -> Vec<String> {
        AgentSession::active_tool_names(self)
    }

    fn all_tools(&self) -> Vec<ToolInfo> {
        AgentSession::all_tools(self)
    }

    fn set_active_tools(&self, names: &[String]) {
        AgentSession::set_active_tools(self, names);
    }

    fn set_model<'a>(&'a self, provider: &'a str, model_id: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let Some(model) = self.registry().find(provider, model_id).cloned() else {
                return false;
            };
            AgentSession::set_model(self, model).await.is_ok()
        })
    }

    fn model(&self) -> Option<Model> {
        AgentSession::model(self)
    }

    fn thinking_level(&self) -> ThinkingLevel {
        AgentSession::thinking_level(self)
    }

    fn set_thinking_level(&self, level: ThinkingLevel) -> BoxFuture<'_, ()> {
        Box::pin(AgentSession::set_thinking_level(self, level))
    }

    fn entries_json(&self) -> BoxFuture<'_, Result<Vec<Value>, ExtensionError>> {
        Box::pin(async move {
            AgentSession::entries_json(self)
                .await
                .map_err(handler_error)
        })
    }

    fn branch_json(&self) -> BoxFuture<'_, Result<Vec<Value>, ExtensionError>> {
        Box::pin(async move { AgentSession::branch_json(self).await.map_err(handler_error) })
    }

    fn leaf_id(&self) -> BoxFuture<'_, Result<Option<EntryId>, ExtensionError>> {
        Box::pin(async move { AgentSession::leaf_id(self).await.map_err(handler_error) })
    }

    fn session_id(&self) -> BoxFuture<'_, SessionId> {
        Box::pin(AgentSession::session_id(self))
    }

    fn is_streaming(&self) -> bool {
        AgentSession::is_streaming(self)
    }

    fn abort(&self) {
        AgentSession::abort(self);
    }

    fn system_prompt(&self) -> String {
        AgentSession::system_prompt(self)
    }
}
