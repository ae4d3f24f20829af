//! The [`AgentSession`] handle and everything it holds: the configuration, the mutable
//! [`State`] of the conversation (transcript, model, thinking level, queues, run and retry
//! state), the persistence and run locks, the subscribers, the current extension bus, the
//! writer lease and the runtime directory. The other files of `agent_session/` are `impl
//! AgentSession` blocks over these fields, one concern each.
//!
//! Invariants: an `AgentSession` is a cheap handle (one `Arc`); `State` is behind a std mutex
//! that is never held across an `.await` ([`lock`] ignores poisoning: the state stays usable
//! after a panicking listener); the run lock and the persistence lock are async mutexes.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::ai::{Model, ThinkingLevel};
use crate::model::ids::EntryId;
use crate::model::message::{AgentMessage, AssistantMessage, BashExecutionMessage};
use crate::session::agent_session::config::{ModelChoice, SessionConfig};
use crate::session::agent_session::error::ReadOnlyReason;
use crate::session::events::SessionEvent;
use crate::session::extensions::{ExecutableExtension, ExtensionBus};
use crate::session::persist::{Persistence, Writer};
use crate::session::settings::{QueueMode, SessionSettings};
use crate::session::tools::ToolSet;
use crate::store::{Lease, SessionStore};

/// Queued prompts: the messages for the agent and their texts for `queue_update`.
#[derive(Debug, Default)]
pub(super) struct Queue {
    pub(super) messages: VecDeque<AgentMessage>,
    pub(super) texts: Vec<String>,
}

/// The conversation's mutable state (behind `Inner::state`).
#[derive(Debug)]
pub(super) struct State {
    pub(super) transcript: Vec<AgentMessage>,
    pub(super) model: Option<Model>,
    pub(super) thinking: ThinkingLevel,
    /// The prompt sections for the active tools (what the next request should carry; the
    /// transcript's system messages are patched to them at the start of each turn).
    pub(super) prompt_sections: Map<String, Value>,
    /// The prompt as one text (`prompt_sections` rendered).
    pub(super) system_prompt: String,
    pub(super) tools: ToolSet,
    pub(super) steering: Queue,
    pub(super) follow_up: Queue,
    pub(super) steering_mode: QueueMode,
    pub(super) follow_up_mode: QueueMode,
    pub(super) pending_bash: Vec<BashExecutionMessage>,
    pub(super) pending_next_turn: Vec<AgentMessage>,
    pub(super) streaming: bool,
    pub(super) run_cancel: Option<CancellationToken>,
    pub(super) retry_cancel: Option<CancellationToken>,
    pub(super) bash_cancel: Option<CancellationToken>,
    pub(super) compaction_cancel: Option<CancellationToken>,
    pub(super) retry_attempt: u32,
    pub(super) last_assistant: Option<AssistantMessage>,
    /// The entry of the last assistant message stored, and of the tool results stored after
    /// it (by tool call id): the targets of a `context_edit` that omits a failed attempt.
    pub(super) last_assistant_entry: Option<EntryId>,
    pub(super) tool_result_entries: Vec<(String, EntryId)>,
    pub(super) overflow_recovery_attempted: bool,
    pub(super) auto_retry: bool,
    pub(super) auto_compaction: bool,
    pub(super) name: Option<String>,
    pub(super) scope: Vec<ModelChoice>,
    /// The extensions' `turnIndex` (reset at `agent_start`).
    pub(super) turn_index: u64,
    /// The system prompt `before_agent_start` handlers chose for the current prompt.
    pub(super) turn_system_prompt: Option<String>,
}

/// Events emitted while the session opens (extension start-up errors, for example) are
/// kept for the first subscriber, who subscribes only after `open` returns.
#[derive(Debug, Default)]
pub(super) struct Backlog {
    pub(super) collecting: bool,
    pub(super) events: Vec<SessionEvent>,
}

/// Background work started by extensions (`sendMessage`, `sendUserMessage`), so a mode
/// can wait until it is done.
#[derive(Debug, Default)]
pub(super) struct Background {
    pub(super) running: AtomicUsize,
    pub(super) idle: tokio::sync::Notify,
}

/// The lease state of a handle (`lease.rs` takes, renews and releases it).
#[derive(Debug, Default)]
pub(super) enum LeaseState {
    /// Nothing held: a new session not written yet, or an in-memory store.
    #[default]
    Unleased,
    /// The current session's lease, renewed by a heartbeat task.
    Held(HeldLease),
    /// Read-only.
    ReadOnly(ReadOnlyReason),
}

/// A held lease and the task renewing it.
#[derive(Debug)]
pub(super) struct HeldLease {
    pub(super) lease: Lease,
    pub(super) stop: CancellationToken,
    pub(super) task: JoinHandle<()>,
}

/// What the handle shares.
pub(super) struct Inner {
    pub(super) config: SessionConfig,
    pub(super) state: Mutex<State>,
    pub(super) persistence: tokio::sync::Mutex<Persistence>,
    pub(super) run_lock: tokio::sync::Mutex<()>,
    pub(super) subscribers: Mutex<Vec<mpsc::UnboundedSender<SessionEvent>>>,
    pub(super) writer: Writer,
    pub(super) bus: Mutex<Arc<ExtensionBus>>,
    pub(super) backlog: Mutex<Backlog>,
    pub(super) background: Background,
    /// The writer lease of the current session (see `lease`).
    pub(super) lease: Mutex<LeaseState>,
    /// The runtime's working directory: the startup one, then the cwd of each stored session
    /// loaded (when it exists), as the reference builds its runtime in the session's cwd.
    pub(super) cwd: Mutex<PathBuf>,
    /// The executable extensions of the runtime's directory when it moved away from the
    /// startup one (`None`: the configured list).
    pub(super) executables: Mutex<Option<Vec<ExecutableExtension>>>,
    /// The settings of the runtime's directory (the configured ones until it moves).
    pub(super) settings: Mutex<SessionSettings>,
    /// Set once entries could not be stored when a session was left (rescued to a file or
    /// dropped): the process reports it in its exit code.
    pub(super) not_stored: AtomicBool,
}

/// A weak handle to a session (what extensions hold, so they never keep it alive).
#[derive(Clone)]
pub struct WeakSession(pub(super) Weak<Inner>);

impl WeakSession {
    /// Returns the session if it still exists.
    pub fn upgrade(&self) -> Option<AgentSession> {
        self.0.upgrade().map(|inner| AgentSession { inner })
    }
}

impl std::fmt::Debug for WeakSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeakSession")
    }
}

/// The agent session handle (cheap to clone).
#[derive(Clone)]
pub struct AgentSession {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for AgentSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSession").finish_non_exhaustive()
    }
}

/// Locks a std mutex; a poisoned one is used as it is (a listener that panicked leaves the
/// state as consistent as it was between two statements).
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl AgentSession {
    /// Returns a weak handle (for extensions).
    pub fn downgrade(&self) -> WeakSession {
        WeakSession(Arc::downgrade(&self.inner))
    }

    /// Returns what the session was built from.
    pub(crate) fn config(&self) -> &SessionConfig {
        &self.inner.config
    }

    /// Locks the conversation state (never held across an `.await`).
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.inner.state)
    }

    /// Returns the current time of the session's clock (Unix ms).
    pub fn now_ms(&self) -> i64 {
        self.config().clock.now_ms()
    }

    /// Returns the store.
    pub fn store(&self) -> &SessionStore {
        &self.config().store
    }
}
