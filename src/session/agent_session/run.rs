//! One run of the agent loop and what follows it: [`AgentSession::run_agent`] runs the loop
//! (new prompt messages, or continuing), then the retries and compactions it needs, and
//! reports `agent_settled`; `on_agent_event` handles every event of the loop — extensions
//! first, then the transcript, the single persistence point (each message is appended on
//! `message_end`, in the order the agent saw it), the queues, and the fan-out.
//!
//! Invariant: one run at a time (the caller holds the run lock); `abort` works during a run.

use tokio_util::sync::CancellationToken;

use crate::agent::{self, AgentEvent, RunConfig};
use crate::model::entry::EntryKind;
use crate::model::message::{AgentMessage, StopReason};
use crate::session::agent_session::compaction::AfterRun;
use crate::session::agent_session::loop_hooks::RunHooks;
use crate::session::agent_session::state::AgentSession;
use crate::session::agent_session::transcript::user_text;
use crate::session::events::{NoticeLevel, SessionEvent};

impl AgentSession {
    /// Runs the agent (with new prompt messages, or continuing) and the retries it needs,
    /// then reports `agent_settled` (1.6.0: nothing more will run on its own).
    pub(super) async fn run_agent(&self, prompts: Option<Vec<AgentMessage>>) {
        let mut aborted = false;
        if self.run_agent_loop(prompts, &mut aborted).await {
            self.emit(SessionEvent::AgentSettled { aborted });
        }
    }

    /// The runs of [`AgentSession::run_agent`]; returns whether any run started, and sets
    /// `aborted` when one was aborted.
    pub(super) async fn run_agent_loop(
        &self,
        prompts: Option<Vec<AgentMessage>>,
        aborted: &mut bool,
    ) -> bool {
        let mut prompts = prompts;
        let mut ran = false;
        loop {
            let (config, transcript, cancel) = {
                let mut state = self.state();
                let Some(model) = state.model.clone() else {
                    state.streaming = false;
                    return ran;
                };
                ran = true;
                let cancel = CancellationToken::new();
                state.run_cancel = Some(cancel.clone());
                state.streaming = true;
                state.last_assistant = None;
                let config = RunConfig {
                    client: self.config().client.clone(),
                    model,
                    tools: state.tools.active_tools(),
                    thinking_level: state.thinking.as_str().to_owned(),
                    cwd: self.cwd(),
                    clock: self.config().clock.clone(),
                    emit_partials: self.config().emit_partials
                        || self.bus().has_handlers("message_update"),
                };
                // The loop's own copy of the context, with room for the turn's messages (a
                // copy of exactly its length would be copied again by the first push).
                let mut transcript = Vec::with_capacity(state.transcript.len() + 16);
                transcript.extend_from_slice(&state.transcript);
                (config, transcript, cancel)
            };
            let hooks = RunHooks { session: self };
            match prompts.take() {
                Some(messages) => {
                    agent::run(&config, transcript, messages, &hooks, &cancel).await;
                }
                None => {
                    if let Err(error) =
                        agent::run_continue(&config, transcript, &hooks, &cancel).await
                    {
                        self.notice(NoticeLevel::Error, error.to_string());
                    }
                }
            }
            *aborted |= cancel.is_cancelled();
            let last = {
                let mut state = self.state();
                state.run_cancel = None;
                state.last_assistant.take()
            };
            self.flush_pending_bash().await;
            let Some(last) = last else {
                self.state().streaming = false;
                return ran;
            };
            // 1.6.0 waits for a retry inside its run: the session is still streaming (a
            // prompt without `streamingBehavior` is refused, `get_state` says so).
            if self.retry_after(&last, &config.model).await {
                continue;
            }
            self.state().streaming = false;
            // A `bash` that arrived during the retry decision was deferred to the run's end.
            self.flush_pending_bash().await;
            if self.check_compaction(&last, true).await == AfterRun::Done {
                return ran;
            }
        }
    }

    /// Handles one agent event: extensions, transcript, persistence on `message_end`, queues,
    /// fan-out.
    pub(super) async fn on_agent_event(&self, mut event: AgentEvent) {
        if let AgentEvent::AgentEnd {
            messages,
            will_retry,
        } = &mut event
        {
            *will_retry = self.will_retry_after(messages);
        }
        self.deliver_agent_event(&event).await;
        // A retry that this assistant message ends: announced after its `message_end`, as
        // 1.6.0 emits `auto_retry_end` from its own `message_end` handling.
        let mut finished_retry = None;
        match &event {
            AgentEvent::MessageStart { message } if matches!(message, AgentMessage::User(_)) => {
                let text = user_text(message);
                let changed = {
                    let mut state = self.state();
                    state.overflow_recovery_attempted = false;
                    let mut changed = false;
                    if let Some(pos) = state
                        .steering
                        .texts
                        .iter()
                        .position(|queued| *queued == text)
                    {
                        state.steering.texts.remove(pos);
                        changed = true;
                    } else if let Some(pos) = state
                        .follow_up
                        .texts
                        .iter()
                        .position(|queued| *queued == text)
                    {
                        state.follow_up.texts.remove(pos);
                        changed = true;
                    }
                    changed.then(|| (state.steering.texts.clone(), state.follow_up.texts.clone()))
                };
                if let Some((steering, follow_up)) = changed {
                    self.emit(SessionEvent::QueueUpdate {
                        steering,
                        follow_up,
                    });
                }
            }
            AgentEvent::MessageEnd { message } => {
                let kind = match message {
                    AgentMessage::Custom(custom) => Some(EntryKind::CustomMessage {
                        custom_type: custom.custom_type.clone(),
                        content: custom.content.clone(),
                        display: custom.display,
                        details: custom.details.clone(),
                    }),
                    AgentMessage::System(_)
                    | AgentMessage::User(_)
                    | AgentMessage::Assistant(_)
                    | AgentMessage::ToolResult(_) => Some(EntryKind::Message(message.clone())),
                    _ => None,
                };
                self.state().transcript.push(message.clone());
                if let Some(kind) = kind {
                    let id = self.persist(kind).await;
                    let mut state = self.state();
                    match message {
                        AgentMessage::Assistant(_) => {
                            state.last_assistant_entry = id;
                            state.tool_result_entries.clear();
                        }
                        AgentMessage::ToolResult(result) => {
                            if let Some(id) = id {
                                state
                                    .tool_result_entries
                                    .push((result.tool_call_id.clone(), id));
                            }
                        }
                        _ => {}
                    }
                }
                if let AgentMessage::Assistant(assistant) = message {
                    let mut state = self.state();
                    state.last_assistant = Some(assistant.clone());
                    if assistant.stop_reason != StopReason::Error {
                        state.overflow_recovery_attempted = false;
                    }
                    finished_retry = (assistant.stop_reason != StopReason::Error
                        && state.retry_attempt > 0)
                        .then(|| std::mem::take(&mut state.retry_attempt));
                }
            }
            _ => {}
        }
        self.emit(SessionEvent::Agent(event));
        if let Some(attempt) = finished_retry {
            self.emit(SessionEvent::AutoRetryEnd {
                success: true,
                attempt,
                final_error: None,
            });
        }
    }

    /// Returns whether a run is in progress.
    pub fn is_streaming(&self) -> bool {
        self.state().streaming
    }

    /// Aborts the running turn (and a pending retry wait).
    pub fn abort(&self) {
        let state = self.state();
        if let Some(cancel) = &state.run_cancel {
            cancel.cancel();
        }
        if let Some(cancel) = &state.retry_cancel {
            cancel.cancel();
        }
        if let Some(cancel) = &state.compaction_cancel {
            cancel.cancel();
        }
    }
}
