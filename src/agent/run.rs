//! The agent loop (the reference's `runAgentLoop` / `runAgentLoopContinue`): call the model,
//! run the tool calls it makes, feed the results back, until it stops; steering messages go in
//! before the next model call, follow-ups when the agent would stop.
//!
//! Tool calls of one assistant message are prepared one by one in call order (lookup,
//! argument validation, the caller's `before_tool_call`), then executed concurrently; their
//! `tool_execution_end` events come as each finishes, and the tool-result messages are
//! emitted in call order. Every event is awaited through [`LoopHooks::emit`] before the loop
//! goes on, so a caller that persists on `message_end` stores messages in the order the model
//! saw them.
//!
//! Invariants: no storage, no terminal, no environment; the loop works on its own copy of the
//! transcript (the caller keeps its own from the events); every failure becomes a message
//! (an assistant message with `stopReason` `error`/`aborted`, or an `isError` tool result).

use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::event::AgentEvent;
use crate::agent::tool::{
    BoxFuture, Tool, ToolContext, ToolInput, ToolOutput, prepare_call, tool_not_found_message,
};
use crate::ai::convert::{self, LlmMessage};
use crate::ai::transcript::{get_current_tools, get_tool_state_changes, to_tool_declaration};
use crate::ai::{AiClient, AiError, Model, Request, StreamEvent, StreamOptions};
use crate::model::ToolCallId;
use crate::model::message::{
    AgentMessage, AssistantMessage, ContentBlock, StopReason, SystemKeyOrder, SystemMessage,
    ToolCall, ToolDeclaration, ToolResultMessage, UserContent,
};
use crate::support::clock::Clock;

/// What the caller decides before a tool call runs.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolCallDecision {
    /// Run it as prepared.
    Continue,
    /// Do not run it; the model gets an error result with this reason.
    Block {
        /// Why (shown to the model).
        reason: String,
    },
    /// Run it with these arguments instead (not validated again).
    Rewrite(Value),
}

/// Changes the caller makes to a finished tool result (each part optional).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolResultPatch {
    /// Replacement content.
    pub content: Option<Vec<ContentBlock>>,
    /// Replacement details.
    pub details: Option<Value>,
    /// Replacement error flag.
    pub is_error: Option<bool>,
}

/// The caller's side of the loop: event delivery, per-call options, queues and interception.
pub trait LoopHooks: Send + Sync {
    /// Delivers an event; the loop waits for it before going on.
    fn emit<'a>(&'a self, event: AgentEvent) -> BoxFuture<'a, ()>;

    /// Returns the options of the next model call (keys are resolved per call).
    fn stream_options<'a>(
        &'a self,
        model: &'a Model,
    ) -> BoxFuture<'a, Result<StreamOptions, AiError>>;

    /// Whether [`LoopHooks::recover_auth`] may help calls to this model (its credential is a
    /// refreshable sign-in); default `false`.
    ///
    /// After the provider rejected the key of a call (an authentication error before any
    /// output), `recover_auth` refreshes the credential (a subscription's OAuth token); `true` when a new key
    /// is stored and the call is worth repeating once. Default: `false`.
    fn may_recover_auth(&self, _model: &Model) -> bool {
        false
    }

    /// See [`LoopHooks::may_recover_auth`].
    fn recover_auth<'a>(
        &'a self,
        _model: &'a Model,
        _rejected: Option<&'a str>,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async { false })
    }

    /// Returns the transcript rewritten for the next model call (not persisted), or `None` to
    /// send it as it is; default: `None`.
    fn transform_context<'a>(
        &'a self,
        _messages: &'a [AgentMessage],
    ) -> BoxFuture<'a, Option<Vec<AgentMessage>>> {
        Box::pin(async { None })
    }

    /// Converts the transcript for the model; default: the reference's `convertToLlm`.
    fn convert_to_llm(&self, messages: &[AgentMessage]) -> Vec<LlmMessage> {
        convert::convert_to_llm(messages)
    }

    /// Returns the message to report and keep in place of a finished one, before its
    /// `message_end` (extensions may replace a message with one of the same role); default:
    /// unchanged.
    fn finalize_message<'a>(&'a self, message: AgentMessage) -> BoxFuture<'a, AgentMessage> {
        Box::pin(async move { message })
    }

    /// Decides on a prepared tool call; default: run it.
    fn before_tool_call<'a>(
        &'a self,
        _call: &'a ToolCall,
        _args: &'a Value,
    ) -> BoxFuture<'a, ToolCallDecision> {
        Box::pin(async { ToolCallDecision::Continue })
    }

    /// Patches a finished tool result; default: unchanged.
    fn after_tool_call<'a>(
        &'a self,
        _call: &'a ToolCall,
        _args: &'a Value,
        _result: &'a ToolOutput,
        _is_error: bool,
    ) -> BoxFuture<'a, Option<ToolResultPatch>> {
        Box::pin(async { None })
    }

    /// Takes the queued steering messages (delivered before the next model call).
    fn steering_messages(&self) -> Vec<AgentMessage> {
        Vec::new()
    }

    /// Takes the queued follow-up messages (delivered when the agent would stop).
    fn follow_up_messages(&self) -> Vec<AgentMessage> {
        Vec::new()
    }

    /// Returns the messages to add before the next model call of a run, after a turn ended
    /// (1.6.0 `prepareNextTurn`: a system message patching the prompt when it changed);
    /// default: none.
    fn prepare_next_turn<'a>(
        &'a self,
        _context: &'a [AgentMessage],
    ) -> BoxFuture<'a, Vec<AgentMessage>> {
        Box::pin(async { Vec::new() })
    }
}

/// Declares tool loadout changes to the model (1.6.0 `declareToolChanges`).
///
/// The tools are what the run can execute; the transcript's system messages declare what the
/// model may call. Before each request their difference becomes `toolsAdded`/`toolsRemoved`
/// of a system message: the last pending system message's tool fields are replaced by the
/// difference between the committed transcript and the executable set (so that replay always
/// gives exactly `tools`), or, without one, a new system message goes before the first pending
/// message that is not a system message.
pub fn declare_tool_changes(
    context: &[AgentMessage],
    mut pending: Vec<AgentMessage>,
    tools: &[ToolDeclaration],
    now_ms: i64,
) -> Vec<AgentMessage> {
    let system_index = pending
        .iter()
        .rposition(|message| matches!(message, AgentMessage::System(_)));
    let pending_declares = match system_index.map(|idx| &pending[idx]) {
        Some(AgentMessage::System(system)) => {
            system
                .tools_added
                .as_ref()
                .is_some_and(|tools| !tools.is_empty())
                || system
                    .tools_removed
                    .as_ref()
                    .is_some_and(|tools| !tools.is_empty())
        }
        _ => false,
    };
    let mut baseline = pending.clone();
    if let Some(idx) = system_index
        && let AgentMessage::System(system) = &mut baseline[idx]
    {
        system.tools_added = None;
        system.tools_removed = None;
    }
    let systems: Vec<&AgentMessage> = context
        .iter()
        .chain(baseline.iter())
        .filter(|message| matches!(message, AgentMessage::System(_)))
        .collect();
    let declared = get_current_tools(&systems);
    let executable: Vec<ToolDeclaration> = tools.iter().map(to_tool_declaration).collect();
    let changes = get_tool_state_changes(&declared, &executable);
    let (added, removed) = (changes.tools_added, changes.tools_removed);
    let unchanged = added.is_empty() && removed.is_empty();
    let with_changes = |system: &mut crate::model::message::SystemMessage| {
        system.tools_added = (!added.is_empty()).then(|| added.clone());
        system.tools_removed = (!removed.is_empty()).then(|| removed.clone());
    };
    match system_index {
        Some(idx) => {
            if unchanged && !pending_declares {
                return pending;
            }
            if let AgentMessage::System(system) = &mut baseline[idx] {
                with_changes(system);
            }
            baseline
        }
        None => {
            if unchanged {
                return pending;
            }
            let mut update = SystemMessage {
                content: Some(UserContent::Text(String::new())),
                timestamp: now_ms,
                key_order: SystemKeyOrder::TimestampThenTools,
                ..SystemMessage::default()
            };
            with_changes(&mut update);
            let at = pending
                .iter()
                .position(|message| !matches!(message, AgentMessage::System(_)))
                .unwrap_or(pending.len());
            pending.insert(at, AgentMessage::System(update));
            pending
        }
    }
}

/// What one run needs besides the transcript.
#[derive(Clone)]
pub struct RunConfig {
    /// The HTTP client.
    pub client: AiClient,
    /// The model to call.
    pub model: Model,
    /// The active tools: what the run can execute, declared to the model through the
    /// transcript's system messages ([`declare_tool_changes`]).
    pub tools: Vec<Arc<dyn Tool>>,
    /// The thinking level the calls are made with, recorded on each assistant message
    /// (`thinkingLevel`; `off` when off).
    pub thinking_level: String,
    /// Working directory of the tools.
    pub cwd: PathBuf,
    /// Stamps tool-result messages.
    pub clock: Arc<dyn Clock>,
    /// Whether `message_update` events carry the partial message (JSON/RPC need it).
    pub emit_partials: bool,
}

impl std::fmt::Debug for RunConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunConfig")
            .field("model", &self.model.reference())
            .field("tools", &self.tools.len())
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

/// Why a continuation cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoopError {
    /// There is nothing to continue from.
    #[error("Cannot continue: no messages in context")]
    Empty,
    /// The last message is an assistant message.
    #[error("Cannot continue from message role: assistant")]
    EndsWithAssistant,
}

/// Finalizes a message through the hooks and emits its `message_end`; returns the message
/// as finalized.
async fn end_message(hooks: &dyn LoopHooks, message: AgentMessage) -> AgentMessage {
    let message = hooks.finalize_message(message).await;
    hooks
        .emit(AgentEvent::MessageEnd {
            message: message.clone(),
        })
        .await;
    message
}

/// [`end_message`] for an assistant message (a replacement of another role is ignored).
async fn end_assistant(hooks: &dyn LoopHooks, message: AssistantMessage) -> AssistantMessage {
    let finalized = hooks
        .finalize_message(AgentMessage::Assistant(message.clone()))
        .await;
    let message = match finalized {
        AgentMessage::Assistant(replacement) => replacement,
        _ => message,
    };
    hooks
        .emit(AgentEvent::MessageEnd {
            message: AgentMessage::Assistant(message.clone()),
        })
        .await;
    message
}

/// Runs the loop with new prompt messages; returns the messages this run added.
pub async fn run(
    config: &RunConfig,
    transcript: Vec<AgentMessage>,
    prompts: Vec<AgentMessage>,
    hooks: &dyn LoopHooks,
    cancel: &CancellationToken,
) -> Vec<AgentMessage> {
    let mut context = transcript;
    let mut added = Vec::new();
    let prompts = declare_tool_changes(
        &context,
        prompts,
        &declarations(config),
        config.clock.now_ms(),
    );
    hooks.emit(AgentEvent::AgentStart).await;
    hooks.emit(AgentEvent::TurnStart).await;
    for prompt in prompts {
        hooks
            .emit(AgentEvent::MessageStart {
                message: prompt.clone(),
            })
            .await;
        let prompt = end_message(hooks, prompt).await;
        context.push(prompt.clone());
        added.push(prompt);
    }
    run_loop(config, &mut context, &mut added, hooks, cancel).await;
    added
}

/// Continues from the transcript as it is (after a retry or an overflow recovery); the last
/// message must not be an assistant message.
pub async fn run_continue(
    config: &RunConfig,
    transcript: Vec<AgentMessage>,
    hooks: &dyn LoopHooks,
    cancel: &CancellationToken,
) -> Result<Vec<AgentMessage>, LoopError> {
    match transcript.last() {
        None => return Err(LoopError::Empty),
        Some(AgentMessage::Assistant(_)) => return Err(LoopError::EndsWithAssistant),
        Some(_) => {}
    }
    let mut context = transcript;
    let mut added = Vec::new();
    hooks.emit(AgentEvent::AgentStart).await;
    hooks.emit(AgentEvent::TurnStart).await;
    run_loop(config, &mut context, &mut added, hooks, cancel).await;
    Ok(added)
}

async fn run_loop(
    config: &RunConfig,
    context: &mut Vec<AgentMessage>,
    added: &mut Vec<AgentMessage>,
    hooks: &dyn LoopHooks,
    cancel: &CancellationToken,
) {
    let mut first_turn = true;
    let mut pending = hooks.steering_messages();
    let declared = declarations(config);
    loop {
        let mut more_tool_calls = true;
        while more_tool_calls || !pending.is_empty() {
            let mut prepared = Vec::new();
            if !first_turn {
                prepared = hooks.prepare_next_turn(context).await;
                hooks.emit(AgentEvent::TurnStart).await;
            }
            first_turn = false;
            prepared.append(&mut pending);
            let messages =
                declare_tool_changes(context, prepared, &declared, config.clock.now_ms());
            for message in messages {
                hooks
                    .emit(AgentEvent::MessageStart {
                        message: message.clone(),
                    })
                    .await;
                let message = end_message(hooks, message).await;
                context.push(message.clone());
                added.push(message);
            }
            let assistant = stream_assistant(config, context, hooks, cancel).await;
            let assistant_message = AgentMessage::Assistant(assistant.clone());
            context.push(assistant_message.clone());
            added.push(assistant_message.clone());
            if matches!(
                assistant.stop_reason,
                StopReason::Error | StopReason::Aborted
            ) {
                hooks
                    .emit(AgentEvent::TurnEnd {
                        message: assistant_message,
                        tool_results: Vec::new(),
                    })
                    .await;
                hooks
                    .emit(AgentEvent::AgentEnd {
                        messages: added.clone(),
                        will_retry: false,
                    })
                    .await;
                return;
            }
            let calls: Vec<ToolCall> = assistant.tool_calls().cloned().collect();
            more_tool_calls = !calls.is_empty();
            let mut results = Vec::new();
            if !calls.is_empty() {
                results = execute_tool_calls(config, &calls, hooks, cancel).await;
                for result in &results {
                    context.push(result.clone());
                    added.push(result.clone());
                }
            }
            hooks
                .emit(AgentEvent::TurnEnd {
                    message: assistant_message,
                    tool_results: results,
                })
                .await;
            pending = hooks.steering_messages();
        }
        let follow_ups = hooks.follow_up_messages();
        if follow_ups.is_empty() {
            break;
        }
        pending = follow_ups;
    }
    hooks
        .emit(AgentEvent::AgentEnd {
            messages: added.clone(),
            will_retry: false,
        })
        .await;
}

/// The declarations of the run's tools, in order.
fn declarations(config: &RunConfig) -> Vec<ToolDeclaration> {
    config.tools.iter().map(|tool| tool.declaration()).collect()
}

/// Records the requested thinking level on a finished assistant message (1.6.0's
/// `Object.assign(result, {thinkingLevel})`: appended last unless present).
fn with_thinking_level(mut message: AssistantMessage, level: &str) -> AssistantMessage {
    message.set_thinking_level(level);
    message
}

/// Streams one assistant message, emitting start / updates / end.
async fn stream_assistant(
    config: &RunConfig,
    context: &[AgentMessage],
    hooks: &dyn LoopHooks,
    cancel: &CancellationToken,
) -> AssistantMessage {
    // The context is copied only when a hook rewrites it.
    let transformed = hooks.transform_context(context).await;
    let mut llm_messages = hooks.convert_to_llm(transformed.as_deref().unwrap_or(context));
    // Kept for a repeat only when the provider's credential can be refreshed.
    let recoverable = hooks.may_recover_auth(&config.model);
    // A call the provider refuses for its key (an expired subscription token) is repeated
    // once after the credential was refreshed, before anything was shown of it.
    let mut auth_retried = false;
    let (mut stream, mut started) = loop {
        let options = match hooks.stream_options(&config.model).await {
            Ok(options) => options,
            Err(error) => {
                let mut message =
                    crate::ai::new_assistant_message(&config.model, config.clock.now_ms());
                message.stop_reason = if cancel.is_cancelled() {
                    StopReason::Aborted
                } else {
                    StopReason::Error
                };
                message.error_message = Some(error.to_string());
                let message = with_thinking_level(message, &config.thinking_level);
                hooks
                    .emit(AgentEvent::MessageStart {
                        message: AgentMessage::Assistant(message.clone()),
                    })
                    .await;
                return end_assistant(hooks, message).await;
            }
        };
        let key = options.api_key.clone();
        // The system messages of the transcript carry the prompt and the tools.
        let request = Request {
            system_prompt: String::new(),
            messages: if recoverable && !auth_retried {
                llm_messages.clone()
            } else {
                std::mem::take(&mut llm_messages)
            },
            tools: Vec::new(),
        };
        let mut stream = config
            .client
            .stream(&config.model, request, options, cancel.clone());
        let first = stream.next().await;
        match first {
            Some(StreamEvent::Error {
                error: AiError::Auth { .. },
                ..
            }) if recoverable
                && !auth_retried
                && !cancel.is_cancelled()
                && hooks.recover_auth(&config.model, key.as_deref()).await =>
            {
                auth_retried = true;
            }
            Some(event) => {
                stream.push_front(event);
                break (stream, false);
            }
            None => break (stream, false),
        }
    };
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::Start => {
                started = true;
                let partial = stream.partial().clone();
                hooks
                    .emit(AgentEvent::MessageStart {
                        message: AgentMessage::Assistant(partial),
                    })
                    .await;
            }
            StreamEvent::Done { message, .. } | StreamEvent::Error { message, .. } => {
                let message = with_thinking_level(*message, &config.thinking_level);
                if !started {
                    hooks
                        .emit(AgentEvent::MessageStart {
                            message: AgentMessage::Assistant(message.clone()),
                        })
                        .await;
                }
                return end_assistant(hooks, message).await;
            }
            other => {
                if started {
                    let partial = config
                        .emit_partials
                        .then(|| Box::new(stream.partial().clone()));
                    hooks
                        .emit(AgentEvent::MessageUpdate {
                            event: other,
                            partial,
                        })
                        .await;
                }
            }
        }
    }
    // The stream always ends with Done or Error; this is the reference's fallback.
    let message = with_thinking_level(stream.result().await, &config.thinking_level);
    if !started {
        hooks
            .emit(AgentEvent::MessageStart {
                message: AgentMessage::Assistant(message.clone()),
            })
            .await;
    }
    end_assistant(hooks, message).await
}

/// A tool call with its outcome.
struct Finalized {
    output: ToolOutput,
    is_error: bool,
    /// How long the tool ran (`None` when it never ran).
    duration_ms: Option<u64>,
}

enum Prepared {
    Immediate(ToolOutput),
    Ready { tool: Arc<dyn Tool>, args: Value },
}

async fn prepare(config: &RunConfig, call: &ToolCall, hooks: &dyn LoopHooks) -> Prepared {
    let Some(tool) = config
        .tools
        .iter()
        .find(|tool| tool.definition().name == call.name)
        .cloned()
    else {
        return Prepared::Immediate(ToolOutput::error(tool_not_found_message(&call.name)));
    };
    let args = match prepare_call(tool.as_ref(), &call.arguments) {
        Ok(args) => args,
        Err(message) => return Prepared::Immediate(ToolOutput::error(message)),
    };
    match hooks.before_tool_call(call, &args).await {
        ToolCallDecision::Continue => Prepared::Ready { tool, args },
        ToolCallDecision::Rewrite(args) => Prepared::Ready { tool, args },
        ToolCallDecision::Block { reason } => {
            let reason = if reason.is_empty() {
                "Tool execution was blocked".to_owned()
            } else {
                reason
            };
            Prepared::Immediate(ToolOutput::error(reason))
        }
    }
}

async fn execute_tool_calls(
    config: &RunConfig,
    calls: &[ToolCall],
    hooks: &dyn LoopHooks,
    cancel: &CancellationToken,
) -> Vec<AgentMessage> {
    let mut finalized: Vec<Option<Finalized>> = Vec::with_capacity(calls.len());
    let (update_tx, mut update_rx) = mpsc::unbounded_channel::<(usize, ToolOutput)>();
    let mut running = FuturesUnordered::new();
    for (idx, call) in calls.iter().enumerate() {
        finalized.push(None);
        hooks
            .emit(AgentEvent::ToolExecutionStart {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                args: call.arguments.clone(),
            })
            .await;
        match prepare(config, call, hooks).await {
            Prepared::Immediate(output) => {
                hooks
                    .emit(AgentEvent::ToolExecutionEnd {
                        tool_call_id: call.id.clone(),
                        tool_name: call.name.clone(),
                        result: output.clone(),
                        is_error: true,
                        duration_ms: None,
                    })
                    .await;
                finalized[idx] = Some(Finalized {
                    output,
                    is_error: true,
                    duration_ms: None,
                });
            }
            Prepared::Ready { tool, args } => {
                let sender = update_tx.clone();
                let ctx = ToolContext {
                    cwd: config.cwd.clone(),
                    cancel: cancel.clone(),
                    on_update: Some(Arc::new(move |partial: ToolOutput| {
                        // The receiver lives until every tool has finished.
                        let _ = sender.send((idx, partial));
                    })),
                    model_accepts_images: Some(config.model.accepts_images()),
                };
                let input = ToolInput {
                    id: ToolCallId::new(call.id.as_str()),
                    arguments: args.clone(),
                };
                let clock = config.clock.clone();
                running.push(async move {
                    let started = clock.now_ms();
                    let result = tool.execute(input, ctx).await;
                    let duration =
                        u64::try_from(clock.now_ms().saturating_sub(started)).unwrap_or(0);
                    (idx, args, result, duration)
                });
            }
        }
    }
    drop(update_tx);
    while !running.is_empty() {
        tokio::select! {
            biased;
            Some((idx, partial)) = update_rx.recv() => {
                let call = &calls[idx];
                hooks
                    .emit(AgentEvent::ToolExecutionUpdate {
                        tool_call_id: call.id.clone(),
                        tool_name: call.name.clone(),
                        args: call.arguments.clone(),
                        partial_result: partial,
                    })
                    .await;
            }
            Some((idx, args, result, duration)) = running.next() => {
                let call = &calls[idx];
                // Updates sent before the result go out first.
                while let Ok((update_idx, partial)) = update_rx.try_recv() {
                    let update_call = &calls[update_idx];
                    hooks
                        .emit(AgentEvent::ToolExecutionUpdate {
                            tool_call_id: update_call.id.clone(),
                            tool_name: update_call.name.clone(),
                            args: update_call.arguments.clone(),
                            partial_result: partial,
                        })
                        .await;
                }
                let (mut output, mut is_error) = match result {
                    Ok(output) => (output, false),
                    Err(error) => (error.into_output(), true),
                };
                if let Some(patch) = hooks.after_tool_call(call, &args, &output, is_error).await {
                    if let Some(content) = patch.content {
                        output.content = content;
                    }
                    if let Some(details) = patch.details {
                        output.details = Some(details);
                    }
                    if let Some(flag) = patch.is_error {
                        is_error = flag;
                    }
                }
                hooks
                    .emit(AgentEvent::ToolExecutionEnd {
                        tool_call_id: call.id.clone(),
                        tool_name: call.name.clone(),
                        result: output.clone(),
                        is_error,
                        duration_ms: Some(duration),
                    })
                    .await;
                finalized[idx] = Some(Finalized {
                    output,
                    is_error,
                    duration_ms: Some(duration),
                });
            }
        }
    }
    let mut messages = Vec::with_capacity(calls.len());
    for (call, outcome) in calls.iter().zip(finalized) {
        let outcome = outcome.unwrap_or_else(|| Finalized {
            output: ToolOutput::error("Tool call did not complete"),
            is_error: true,
            duration_ms: None,
        });
        let message = AgentMessage::ToolResult(ToolResultMessage {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: outcome.output.content,
            details: outcome.output.details,
            usage: None,
            is_error: outcome.is_error,
            duration_ms: outcome.duration_ms,
            timestamp: config.clock.now_ms(),
            nested_calls: None,
            extra: Map::new(),
        });
        hooks
            .emit(AgentEvent::MessageStart {
                message: message.clone(),
            })
            .await;
        let message = end_message(hooks, message).await;
        messages.push(message);
    }
    messages
}
