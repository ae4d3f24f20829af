//! [`RunHooks`]: what the stateless agent loop asks of the session during a run — request
//! options (key lookup, thinking level, transport and cache settings), the LLM conversion
//! (images blocked or not), the `context` event and a forced prompt's projection, the prompt
//! patch between turns, and the extension hooks on `message_end`, `tool_call` and
//! `tool_result`; the queues' messages are drained here too.
//!
//! Invariant: the hooks skip every extension event no extension handles.

use serde_json::Value;

use crate::agent::tool::{BoxFuture, ToolOutput};
use crate::agent::{AgentEvent, LoopHooks, ToolCallDecision, ToolResultPatch};
use crate::ai::auth;
use crate::ai::convert::{self, LlmMessage};
use crate::ai::{AiError, Model, StreamOptions};
use crate::model::message::{AgentMessage, ToolCall};
use crate::session::agent_session::state::AgentSession;
use crate::session::agent_session::system_prompt::force_prompt;
use crate::session::extensions::event::ToolResultEvent;

impl AgentSession {
    /// Returns the options of a model call: the key (looked up off the runtime thread), the
    /// identity headers, thinking level and budgets, cache retention, transport, session id.
    pub(super) async fn stream_options(&self, model: &Model) -> Result<StreamOptions, AiError> {
        let registry = self.config().registry.clone();
        let credentials = self.config().credentials.clone();
        let target = model.clone();
        let auth = match tokio::task::spawn_blocking(move || {
            auth::request_auth(&registry, &credentials, &target)
        })
        .await
        {
            Ok(result) => result?,
            Err(join) => {
                return Err(AiError::Config {
                    message: format!("key lookup failed: {join}"),
                });
            }
        };
        let (telemetry, thinking_budgets, cache_retention, transport) =
            self.with_settings(|settings| {
                (
                    settings.telemetry,
                    settings.thinking_budgets,
                    settings.cache_retention,
                    settings.transport,
                )
            });
        let mut options = StreamOptions::new(auth);
        // The identity headers (User-Agent, attribution while install telemetry is on) are
        // the provider layer's (1.6.0).
        options.identity = crate::ai::request::ClientIdentity::agent(telemetry);
        options.thinking = self.thinking_level();
        options.thinking_budgets = thinking_budgets;
        options.cache_retention = cache_retention;
        options.transport = transport;
        options.session_id = Some(self.session_id().await.into_string());
        Ok(options)
    }
}

/// The loop's hooks for one run of a session.
pub(super) struct RunHooks<'a> {
    pub(super) session: &'a AgentSession,
}

impl LoopHooks for RunHooks<'_> {
    fn emit<'a>(&'a self, event: AgentEvent) -> BoxFuture<'a, ()> {
        Box::pin(self.session.on_agent_event(event))
    }

    fn stream_options<'a>(
        &'a self,
        model: &'a Model,
    ) -> BoxFuture<'a, Result<StreamOptions, AiError>> {
        Box::pin(self.session.stream_options(model))
    }

    fn may_recover_auth(&self, model: &Model) -> bool {
        self.session
            .config()
            .credentials
            .may_refresh(&model.provider)
    }

    fn recover_auth<'a>(
        &'a self,
        model: &'a Model,
        rejected: Option<&'a str>,
    ) -> BoxFuture<'a, bool> {
        let credentials = self.session.config().credentials.clone();
        let provider = model.provider.clone();
        let rejected = rejected.map(str::to_owned);
        Box::pin(async move {
            let Some(rejected) = rejected else {
                return false;
            };
            tokio::task::spawn_blocking(move || {
                credentials
                    .refresh_rejected(&provider, &rejected)
                    .unwrap_or(false)
            })
            .await
            .unwrap_or(false)
        })
    }

    fn convert_to_llm(&self, messages: &[AgentMessage]) -> Vec<LlmMessage> {
        let converted = convert::convert_to_llm(messages);
        if self.session.with_settings(|settings| settings.block_images) {
            convert::block_images(converted)
        } else {
            converted
        }
    }

    fn transform_context<'a>(
        &'a self,
        messages: &'a [AgentMessage],
    ) -> BoxFuture<'a, Option<Vec<AgentMessage>>> {
        Box::pin(async move {
            let bus = self.session.bus();
            let transformed = if bus.has_handlers("context") {
                Some(bus.emit_context(messages.to_vec()).await)
            } else {
                None
            };
            // A prompt a `before_agent_start` handler forced leads the request in place of the
            // transcript's system messages, with the current tools (1.6.0
            // `_installAgentForcedPromptProjection`); the transcript keeps its sections.
            let forced = self.session.state().turn_system_prompt.clone();
            match forced {
                Some(forced) => Some(force_prompt(
                    transformed.as_deref().unwrap_or(messages),
                    forced,
                    self.session.config().clock.now_ms(),
                )),
                None => transformed,
            }
        })
    }

    fn prepare_next_turn<'a>(
        &'a self,
        context: &'a [AgentMessage],
    ) -> BoxFuture<'a, Vec<AgentMessage>> {
        Box::pin(async move {
            // Extensions may have changed the active tools during the turn.
            self.session.rebuild_system_prompt();
            self.session.prompt_patch(context).into_iter().collect()
        })
    }

    fn finalize_message<'a>(&'a self, message: AgentMessage) -> BoxFuture<'a, AgentMessage> {
        Box::pin(async move {
            let bus = self.session.bus();
            if !bus.has_handlers("message_end") {
                return message;
            }
            bus.emit_message_end(&message).await.unwrap_or(message)
        })
    }

    fn before_tool_call<'a>(
        &'a self,
        call: &'a ToolCall,
        args: &'a Value,
    ) -> BoxFuture<'a, ToolCallDecision> {
        Box::pin(async move {
            let bus = self.session.bus();
            if !bus.has_handlers("tool_call") {
                return ToolCallDecision::Continue;
            }
            bus.emit_tool_call(&call.id, &call.name, args).await
        })
    }

    fn after_tool_call<'a>(
        &'a self,
        call: &'a ToolCall,
        args: &'a Value,
        result: &'a ToolOutput,
        is_error: bool,
    ) -> BoxFuture<'a, Option<ToolResultPatch>> {
        Box::pin(async move {
            let bus = self.session.bus();
            if !bus.has_handlers("tool_result") {
                return None;
            }
            let change = bus
                .emit_tool_result(ToolResultEvent {
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    input: args.clone(),
                    content: result.content.clone(),
                    details: result.details.clone(),
                    is_error,
                })
                .await?;
            Some(ToolResultPatch {
                content: change.content,
                details: change.details,
                is_error: change.is_error,
            })
        })
    }

    fn steering_messages(&self) -> Vec<AgentMessage> {
        self.session.drain(true)
    }

    fn follow_up_messages(&self) -> Vec<AgentMessage> {
        self.session.drain(false)
    }
}
