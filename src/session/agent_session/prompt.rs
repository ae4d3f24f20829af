//! The prompt pipeline, in the reference's order: extension commands (`/name args`, run at
//! once even while streaming), the `input` event (transform or handle), skill and template
//! expansion, queueing while streaming, the model and key checks, the compaction check,
//! `before_agent_start` (injected messages, a system prompt for this run), then the run.
//!
//! Invariant: a prompt refused before it is accepted changes nothing and reports its error;
//! once accepted, the session is streaming.

use serde_json::Map;

use crate::ai::auth;
use crate::model::message::{
    AgentMessage, ContentBlock, CustomMessage, ImageContent, UserContent, UserMessage,
};
use crate::session::agent_session::error::SessionError;
use crate::session::agent_session::queues::{StreamingBehavior, find_command};
use crate::session::agent_session::state::{AgentSession, lock};
use crate::session::events::NoticeLevel;
use crate::session::extensions::InputOutcome;
use crate::session::extensions::event::InputSource;

/// What became of a submitted prompt (the 1.6.0 RPC `prompt` response's `disposition`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptDisposition {
    /// An extension command or `input` handler consumed it: no run started for it.
    Handled,
    /// Queued (steering or follow-up) behind the running turn.
    Queued,
    /// Accepted to start a run.
    Started,
}

impl PromptDisposition {
    /// The wire name: `handled`, `queued` or `started`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Handled => "handled",
            Self::Queued => "queued",
            Self::Started => "started",
        }
    }
}

/// Where a prompt came from (the extension `input` event's `source`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PromptSource {
    /// Typed by the user.
    #[default]
    Interactive,
    /// An RPC client.
    Rpc,
    /// An extension.
    Extension,
}

impl PromptSource {
    fn input_source(self) -> InputSource {
        match self {
            Self::Interactive => InputSource::Interactive,
            Self::Rpc => InputSource::Rpc,
            Self::Extension => InputSource::Extension,
        }
    }
}

/// Options of [`AgentSession::prompt`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PromptOptions {
    /// Images attached to the prompt.
    pub images: Vec<ImageContent>,
    /// How to queue when the agent is running (required then).
    pub streaming_behavior: Option<StreamingBehavior>,
    /// Where the prompt came from.
    pub source: PromptSource,
    /// Skip `/skill:` and template expansion (extension `sendUserMessage`).
    pub no_expansion: bool,
}

impl AgentSession {
    /// Sends a prompt through the pipeline and returns when the agent is idle again. The
    /// reference's order: extension commands (`/name args`, run at once even while
    /// streaming), the `input` event (transform or handle), skill and template expansion,
    /// queueing while streaming, the model check, `before_agent_start` (injected messages, a
    /// system prompt for this run), the run with its retries.
    pub async fn prompt(&self, text: &str, options: PromptOptions) -> Result<(), SessionError> {
        self.prompt_inner(text, options, None).await
    }

    /// `prompt`, calling `accepted` once the prompt is queued or about to run (the session is
    /// then already streaming); errors before that point are returned without calling it.
    pub(super) async fn prompt_inner(
        &self,
        text: &str,
        options: PromptOptions,
        accepted: Option<Box<dyn FnOnce(PromptDisposition) + Send>>,
    ) -> Result<(), SessionError> {
        self.refuse_read_only().await?;
        let bus = self.bus();
        if !options.no_expansion
            && let Some((command, args)) = find_command(&bus, text)
        {
            bus.run_command(&command, args).await;
            if let Some(accepted) = accepted {
                accepted(PromptDisposition::Handled);
            }
            return Ok(());
        }
        let mut text = text.to_owned();
        let mut images = options.images;
        if bus.has_handlers("input") {
            let offered = (!images.is_empty()).then(|| images.clone());
            match bus
                .emit_input(&text, offered, options.source.input_source())
                .await
            {
                InputOutcome::Handled => {
                    if let Some(accepted) = accepted {
                        accepted(PromptDisposition::Handled);
                    }
                    return Ok(());
                }
                InputOutcome::Send {
                    text: new_text,
                    images: new_images,
                } => {
                    text = new_text;
                    images = new_images.unwrap_or_default();
                }
            }
        }
        let expanded = if options.no_expansion {
            text
        } else {
            self.expand(&text)?
        };
        if self.is_streaming() {
            let Some(behavior) = options.streaming_behavior else {
                return Err(SessionError::Busy);
            };
            self.enqueue(behavior, expanded, images);
            if let Some(accepted) = accepted {
                accepted(PromptDisposition::Queued);
            }
            return Ok(());
        }
        let _run = self.inner.run_lock.lock().await;
        self.flush_pending_bash().await;
        let model = self.model().ok_or(SessionError::NoModel)?;
        if !auth::has_configured_auth(&self.config().registry, &self.config().credentials, &model) {
            return Err(SessionError::NoApiKey {
                provider: model.provider.clone(),
            });
        }
        // The compaction check before a prompt counts aborted answers too.
        let last_assistant =
            self.state()
                .transcript
                .iter()
                .rev()
                .find_map(|message| match message {
                    AgentMessage::Assistant(assistant) => Some(assistant.clone()),
                    _ => None,
                });
        if let Some(last) = last_assistant {
            self.check_compaction(&last, false).await;
        }
        let offered = (!images.is_empty()).then(|| images.clone());
        let mut content = vec![ContentBlock::text(expanded.clone())];
        content.extend(images.into_iter().map(ContentBlock::Image));
        let mut messages = vec![AgentMessage::User(UserMessage {
            content: UserContent::Blocks(content),
            timestamp: self.config().clock.now_ms(),
            extra: Map::new(),
        })];
        messages.append(&mut self.state().pending_next_turn);
        let mut turn_prompt = None;
        if bus.has_handlers("before_agent_start") {
            let base = self.state().system_prompt.clone();
            let changes = bus.emit_before_agent_start(&expanded, offered, &base).await;
            for spec in changes.messages {
                messages.push(AgentMessage::Custom(CustomMessage {
                    custom_type: spec.custom_type,
                    content: spec.content,
                    display: spec.display,
                    details: spec.details,
                    timestamp: self.config().clock.now_ms(),
                    extra: Map::new(),
                }));
            }
            turn_prompt = changes.system_prompt;
        }
        self.state().turn_system_prompt = turn_prompt;
        let transcript = self.state().transcript.clone();
        if let Some(patch) = self.prompt_patch(&transcript) {
            messages.insert(0, patch);
        }
        if let Some(accepted) = accepted {
            // Streaming from here on, so a command handled after the acceptance sees the run.
            self.state().streaming = true;
            accepted(PromptDisposition::Started);
        }
        self.record_thinking_level().await;
        self.run_agent(Some(messages)).await;
        Ok(())
    }

    /// Sends a prompt like [`AgentSession::prompt`], calling `accepted` once the prompt is
    /// queued or about to run (RPC answers a `prompt` command at that point); a prompt refused
    /// before that point returns its error without calling `accepted`.
    pub async fn prompt_with_acceptance(
        &self,
        text: &str,
        options: PromptOptions,
        accepted: impl FnOnce(PromptDisposition) + Send + 'static,
    ) -> Result<(), SessionError> {
        self.prompt_inner(text, options, Some(Box::new(accepted)))
            .await
    }

    /// Expands `/skill:name` and prompt templates.
    pub(super) fn expand(&self, text: &str) -> Result<String, SessionError> {
        let resources = lock(&self.config().resources);
        let expanded = resources.expand_input(text);
        if let Some(error) = expanded.error {
            drop(resources);
            self.notice(NoticeLevel::Warning, error.to_string());
        }
        Ok(expanded.text)
    }
}
