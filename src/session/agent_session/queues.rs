//! Delivery of what arrives while the agent runs: the steering queue (after the current tool
//! calls) and the follow-up queue (when the agent would stop), their delivery modes, the
//! `queue_update` events, and the delivery of extension messages (`pi.sendMessage`: steered,
//! followed up, held for the next turn, starting a turn, or appended at once).
//!
//! Invariant: an extension command is never queued (`SessionError::CommandNotQueueable`); a
//! queued text leaves its queue when its message starts.

use serde_json::Map;

use crate::agent::AgentEvent;
use crate::model::entry::EntryKind;
use crate::model::message::{
    AgentMessage, ContentBlock, CustomMessage, ImageContent, UserContent, UserMessage,
};
use crate::session::agent_session::error::SessionError;
use crate::session::agent_session::state::AgentSession;
use crate::session::events::SessionEvent;
use crate::session::extensions::context::{DeliverAs, SendMessageOptions};
use crate::session::extensions::{ExtensionBus, RegisteredCommand};
use crate::session::settings::QueueMode;

/// How a prompt sent while the agent runs is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamingBehavior {
    /// After the current tool calls, before the next model call.
    Steer,
    /// When the agent would stop.
    FollowUp,
}

/// Splits `/name args` and looks the name up among the extension commands.
pub(super) fn find_command<'t>(
    bus: &ExtensionBus,
    text: &'t str,
) -> Option<(RegisteredCommand, &'t str)> {
    let rest = text.strip_prefix('/')?;
    let (name, args) = match rest.find(' ') {
        Some(idx) => (&rest[..idx], &rest[idx + 1..]),
        None => (rest, ""),
    };
    bus.command(name).map(|command| (command, args))
}

impl AgentSession {
    /// Queues a user message as steering or follow-up and emits `queue_update`.
    pub(super) fn enqueue(
        &self,
        behavior: StreamingBehavior,
        text: String,
        images: Vec<ImageContent>,
    ) {
        let mut content = vec![ContentBlock::text(text.clone())];
        content.extend(images.into_iter().map(ContentBlock::Image));
        let message = AgentMessage::User(UserMessage {
            content: UserContent::Blocks(content),
            timestamp: self.config().clock.now_ms(),
            extra: Map::new(),
        });
        let (steering, follow_up) = {
            let mut state = self.state();
            let queue = match behavior {
                StreamingBehavior::Steer => &mut state.steering,
                StreamingBehavior::FollowUp => &mut state.follow_up,
            };
            queue.messages.push_back(message);
            queue.texts.push(text);
            (state.steering.texts.clone(), state.follow_up.texts.clone())
        };
        self.emit(SessionEvent::QueueUpdate {
            steering,
            follow_up,
        });
    }

    /// Queues a steering message (delivered after the current tool calls); an extension
    /// command cannot be queued.
    pub fn steer(&self, text: &str) -> Result<(), SessionError> {
        self.refuse_queued_command(text)?;
        let expanded = self.expand(text)?;
        self.enqueue(StreamingBehavior::Steer, expanded, Vec::new());
        Ok(())
    }

    /// Queues a follow-up message (delivered when the agent would stop); an extension command
    /// cannot be queued.
    pub fn follow_up(&self, text: &str) -> Result<(), SessionError> {
        self.refuse_queued_command(text)?;
        let expanded = self.expand(text)?;
        self.enqueue(StreamingBehavior::FollowUp, expanded, Vec::new());
        Ok(())
    }

    /// Queues a steering or follow-up message with images (RPC `steer` / `follow_up`); skills
    /// and templates are expanded as for a prompt, extension commands are refused.
    pub fn queue_message(
        &self,
        behavior: StreamingBehavior,
        text: &str,
        images: Vec<ImageContent>,
    ) -> Result<(), SessionError> {
        self.refuse_queued_command(text)?;
        let expanded = self.expand(text)?;
        self.enqueue(behavior, expanded, images);
        Ok(())
    }

    /// Refuses an extension command sent to a queue.
    pub(super) fn refuse_queued_command(&self, text: &str) -> Result<(), SessionError> {
        match find_command(&self.bus(), text) {
            Some((command, _)) => Err(SessionError::CommandNotQueueable(command.invocation_name)),
            None => Ok(()),
        }
    }

    /// Empties both queues and returns their texts.
    pub fn clear_queues(&self) -> (Vec<String>, Vec<String>) {
        let (steering, follow_up) = {
            let mut state = self.state();
            let steering = std::mem::take(&mut state.steering).texts;
            let follow_up = std::mem::take(&mut state.follow_up).texts;
            (steering, follow_up)
        };
        self.emit(SessionEvent::QueueUpdate {
            steering: Vec::new(),
            follow_up: Vec::new(),
        });
        (steering, follow_up)
    }

    /// Takes what the queue's mode delivers now (all, or one at a time).
    pub(super) fn drain(&self, steering: bool) -> Vec<AgentMessage> {
        let mut state = self.state();
        let mode = if steering {
            state.steering_mode
        } else {
            state.follow_up_mode
        };
        let queue = if steering {
            &mut state.steering
        } else {
            &mut state.follow_up
        };
        match mode {
            QueueMode::All => queue.messages.drain(..).collect(),
            QueueMode::OneAtATime => queue.messages.pop_front().into_iter().collect(),
        }
    }

    /// Returns the queued texts `(steering, follow-up)`.
    pub fn queued(&self) -> (Vec<String>, Vec<String>) {
        let state = self.state();
        (state.steering.texts.clone(), state.follow_up.texts.clone())
    }

    /// Returns the queue delivery modes `(steering, follow-up)`.
    pub fn queue_modes(&self) -> (QueueMode, QueueMode) {
        let state = self.state();
        (state.steering_mode, state.follow_up_mode)
    }

    /// Sets how steering messages are delivered (saved to settings).
    pub fn set_steering_mode(&self, mode: QueueMode) {
        self.state().steering_mode = mode;
        self.config().settings_sink.set_steering_mode(mode);
    }

    /// Sets how follow-up messages are delivered (saved to settings).
    pub fn set_follow_up_mode(&self, mode: QueueMode) {
        self.state().follow_up_mode = mode;
        self.config().settings_sink.set_follow_up_mode(mode);
    }

    /// Returns how many messages wait in the steering and follow-up queues.
    pub fn pending_message_count(&self) -> usize {
        let state = self.state();
        state.steering.texts.len() + state.follow_up.texts.len()
    }

    /// Adds a custom (extension) message: appended to the transcript and stored at once when
    /// idle, queued as steering while a run is in progress.
    pub async fn send_custom_message(&self, message: CustomMessage, trigger_turn: bool) {
        self.send_custom_message_with(
            message,
            SendMessageOptions {
                trigger_turn,
                deliver_as: None,
            },
        )
        .await;
    }

    /// Adds a custom (extension) message as `pi.sendMessage` does: `nextTurn` holds it for
    /// the next prompt; while streaming it is steered (or followed up); when idle it starts a
    /// turn (`trigger_turn`) or is appended to the transcript and stored at once.
    pub async fn send_custom_message_with(
        &self,
        message: CustomMessage,
        options: SendMessageOptions,
    ) {
        let agent_message = AgentMessage::Custom(message.clone());
        if options.deliver_as == Some(DeliverAs::NextTurn) {
            self.state().pending_next_turn.push(agent_message);
            return;
        }
        if self.is_streaming() {
            let mut state = self.state();
            match options.deliver_as {
                Some(DeliverAs::FollowUp) => state.follow_up.messages.push_back(agent_message),
                _ => state.steering.messages.push_back(agent_message),
            }
            return;
        }
        if options.trigger_turn {
            let _run = self.inner.run_lock.lock().await;
            self.record_thinking_level().await;
            self.run_agent(Some(vec![agent_message])).await;
            return;
        }
        self.state().transcript.push(agent_message.clone());
        self.persist(EntryKind::CustomMessage {
            custom_type: message.custom_type.clone(),
            content: message.content.clone(),
            display: message.display,
            details: message.details.clone(),
        })
        .await;
        self.emit(SessionEvent::Agent(AgentEvent::MessageStart {
            message: agent_message.clone(),
        }));
        self.emit(SessionEvent::Agent(AgentEvent::MessageEnd {
            message: agent_message,
        }));
    }
}
