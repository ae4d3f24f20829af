//! `AgentSession`: the stateful layer over the stateless agent loop — the prompt pipeline,
//! the single persistence point (every message is appended to the store on `message_end`, in
//! the order the agent saw it), turn-level auto-retry, model and thinking-level changes as
//! entries, `!cmd` executions, steering and follow-up queues, and the event fan-out that modes
//! subscribe to.
//!
//! Concurrency: an `AgentSession` is a cheap handle; one run at a time (`run_lock`), while
//! `steer`, `follow_up`, `abort` and the getters work during a run. Store calls run in
//! `spawn_blocking`; no lock is held across an `.await` except the run lock and the
//! persistence lock (an async mutex that orders appends).
//!
//! Invariants: the transcript equals a rebuild from the store at the leaf (apart from failed
//! turns dropped for a retry, which stay in the store); nothing below `modes` prints.

use std::collections::VecDeque;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

mod compaction;
mod lease;

pub use compaction::{NavigateOptions, NavigateOutcome};
pub use lease::{HeldSession, LeaseSettings, OpenAccess, ReadOnlyReason, seconds};

use crate::agent::tool::{BoxFuture, Tool, ToolOutput};
use crate::agent::{self, AgentEvent, LoopHooks, RunConfig, ToolCallDecision, ToolResultPatch};
use crate::ai::auth::{self, Credentials};
use crate::ai::convert::{self, LlmMessage};
use crate::ai::models::{clamp_thinking_level, supported_thinking_levels};
use crate::ai::{AiClient, AiError, Model, ModelRegistry, StreamOptions, ThinkingLevel};
use crate::model::entry::{ContextEditEntry, EntryKind, ModelRef, SessionHeader};
use crate::model::ids::{EntryId, SessionId};
use crate::model::message::{
    AgentMessage, AssistantMessage, BashExecutionMessage, ContentBlock, CustomMessage,
    ImageContent, StopReason, SystemKeyOrder, SystemMessage, ToolCall, UserContent, UserMessage,
};
use crate::session::events::{NoticeLevel, SessionEvent};
use crate::session::extensions::context::ToolInfo;
use crate::session::extensions::event::{
    ExtensionEvent, InputSource, ShutdownReason, StartReason, ToolResultEvent, UserBashEvent,
};
use crate::session::extensions::{
    ExtensionBus, ExtensionContext, ExtensionsConfig, InputOutcome, RegisteredCommand,
};
use crate::session::persist::{Appended, Persistence, Writer, blocking};
use crate::session::resources::{HarnessDocs, Resources, ToolPromptInfo};
use crate::session::settings::{QueueMode, SessionSettings, SettingsReload, SettingsSink};
use crate::session::tools::ToolSet;
use crate::session::tools::shell::ShellConfig;
use crate::session::tools::user_shell;
use crate::session::trust::{self, ProjectTrust, TrustDecision};
use crate::store::{LeafSelector, SessionStore, StoreError};
use crate::support::clock::Clock;
use crate::support::ids::IdSource;

/// Receives streamed output of a `!command`.
pub type OutputSink = Arc<dyn Fn(&str) + Send + Sync>;

/// Which session to start with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionTarget {
    /// A new session (written once it has an assistant message).
    New {
        /// The session it was forked or cloned from.
        parent_session: Option<String>,
    },
    /// An existing session, at its persisted leaf.
    Open(SessionId),
    /// The session with the latest activity in the working directory, or a new one.
    ContinueRecent,
}

/// A model chosen with an optional explicit thinking level (`--model x:high`, a scope entry).
#[derive(Clone, Debug, PartialEq)]
pub struct ModelChoice {
    /// The model.
    pub model: Model,
    /// Its explicit thinking level, if any.
    pub thinking: Option<ThinkingLevel>,
}

/// The startup model candidates, resolved by `cli` (spec models-providers-settings §6.6).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelCandidates {
    /// Step 1: `--model`.
    pub explicit: Option<ModelChoice>,
    /// Step 2: the scope's choice (used only for a session without messages).
    pub scoped: Option<ModelChoice>,
    /// Steps 4–6: settings default, provider defaults, first available.
    pub fallback: Option<Model>,
    /// `--thinking` (wins over every other level).
    pub explicit_thinking: Option<ThinkingLevel>,
    /// `--models` / `enabledModels`, for cycling.
    pub scope: Vec<ModelChoice>,
}

/// A session name as 1.6.0 stores it: each run of CR/LF becomes a space, then trimmed.
pub fn sanitize_session_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_break = false;
    for ch in name.chars() {
        if ch == '\r' || ch == '\n' {
            if !in_break {
                out.push(' ');
            }
            in_break = true;
        } else {
            out.push(ch);
            in_break = false;
        }
    }
    out.trim().to_owned()
}

/// Everything a session is built from.
#[derive(Clone)]
pub struct SessionConfig {
    /// The store.
    pub store: SessionStore,
    /// The LLM client.
    pub client: AiClient,
    /// Every known model.
    pub registry: Arc<ModelRegistry>,
    /// Keys.
    pub credentials: Arc<Credentials>,
    /// System prompt inputs, skills and templates.
    pub resources: Arc<Mutex<Resources>>,
    /// The tools (active set included).
    pub tools: ToolSet,
    /// Whether the active tools follow the loaded branch's system messages (1.6.0
    /// `usesDefaultTools`: no `--tools` list of names and no `--no-tools`).
    pub tools_from_transcript: bool,
    /// `--tools +name,-name` entries, applied to a loadout restored from the transcript.
    pub tool_modifiers: Vec<String>,
    /// `--name`: the name the session gets when it starts (a `session_info` entry first).
    pub startup_name: Option<String>,
    /// The shell for `!cmd`.
    pub shell: ShellConfig,
    /// The working directory.
    pub cwd: PathBuf,
    /// Settings values.
    pub settings: SessionSettings,
    /// Where persisted settings go.
    pub settings_sink: Arc<dyn SettingsSink>,
    /// The settings of another working directory (global overlaid by that project's), read
    /// when a stored session from there is loaded; `None`: the startup settings stay.
    pub settings_reload: Option<SettingsReload>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Randomness.
    pub ids: Arc<IdSource>,
    /// Startup model candidates.
    pub models: ModelCandidates,
    /// The local date (no longer part of the 1.6.0 system prompt).
    pub local_date: chrono::NaiveDate,
    /// Documentation paths for the system prompt.
    pub harness_docs: HarnessDocs,
    /// Whether `message_update` events carry the partial message (JSON/RPC).
    pub emit_partials: bool,
    /// Extensions to load for every session runtime, and the UI their dialogs use.
    pub extensions: ExtensionsConfig,
    /// Project trust (`session::trust`): whether a directory the runtime moves to may load
    /// its protected resources. `None`: every project is trusted (library use, tests).
    pub trust: Option<ProjectTrust>,
}

impl std::fmt::Debug for SessionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionConfig")
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

/// What went wrong in a session operation.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No model is selected.
    #[error(
        "No model selected. Set an API key (e.g. ANTHROPIC_API_KEY or OPENAI_API_KEY), or add a provider to models.json in the agent dir, then choose a model with --model provider/id"
    )]
    NoModel,
    /// The model's provider has no key.
    #[error(
        "No API key found for {provider}. Set the provider's API key environment variable, add it to auth.json, or pass --api-key"
    )]
    NoApiKey {
        /// The provider.
        provider: String,
    },
    /// A prompt arrived while the agent is running and no streaming behaviour was given.
    #[error(
        "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
    )]
    Busy,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An entry does not exist or cannot be used for the operation.
    #[error("{0}")]
    InvalidEntry(String),
    /// A model was not found.
    #[error("Model not found: {0}")]
    ModelNotFound(String),
    /// A `!command` could not run.
    #[error("{0}")]
    Shell(String),
    /// A skill could not be expanded.
    #[error("{0}")]
    Expansion(String),
    /// An extension cancelled the operation (`session_before_*` returned `cancel`).
    #[error("cancelled by an extension")]
    Cancelled,
    /// An extension command was sent to a queue (`/cmd` cannot be steered or followed up).
    #[error(
        "Extension command \"/{0}\" cannot be queued. Use prompt() or execute the command when not streaming."
    )]
    CommandNotQueueable(String),
    /// A compaction or branch summary failed.
    #[error("{0}")]
    Compaction(String),
    /// Another process writes the session (its lease is held); nothing was opened or
    /// changed.
    #[error(transparent)]
    Held(Box<HeldSession>),
    /// The session is read-only in this process (opened so, or its lease was taken over).
    #[error(
        "session {session} is read-only here: {}; continue in a new session (fork or clone it) or take it over",
        describe_read_only(reason)
    )]
    ReadOnly {
        /// The session.
        session: SessionId,
        /// Why.
        reason: Box<ReadOnlyReason>,
    },
}

/// Says why a session is read-only, for messages.
pub fn describe_read_only(reason: &ReadOnlyReason) -> String {
    match reason {
        ReadOnlyReason::Opened {
            holder: Some(holder),
        } => format!("another process writes it ({holder})"),
        ReadOnlyReason::Opened { holder: None } => "it was opened read-only".to_owned(),
        ReadOnlyReason::Lost { .. } => "another process took its writer lease over".to_owned(),
    }
}

/// How a prompt sent while the agent runs is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamingBehavior {
    /// After the current tool calls, before the next model call.
    Steer,
    /// When the agent would stop.
    FollowUp,
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

/// Options of [`AgentSession::send_custom_message_with`] (`pi.sendMessage` options).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendMessageOptions {
    /// When idle: start a turn with the message.
    pub trigger_turn: bool,
    /// How to deliver it (default: steer while streaming, else at once).
    pub deliver_as: Option<DeliverAs>,
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

/// Session statistics (RPC `get_session_stats`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionStats {
    /// User messages in the transcript.
    pub user_messages: usize,
    /// Assistant messages in the transcript.
    pub assistant_messages: usize,
    /// Tool calls made.
    pub tool_calls: usize,
    /// Tool results in the transcript.
    pub tool_results: usize,
    /// All transcript messages.
    pub total_messages: usize,
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Cache read tokens.
    pub cache_read: u64,
    /// Cache write tokens.
    pub cache_write: u64,
    /// Cost in USD.
    pub cost: f64,
}

/// Queued prompts: the messages for the agent and their texts for `queue_update`.
#[derive(Debug, Default)]
struct Queue {
    messages: VecDeque<AgentMessage>,
    texts: Vec<String>,
}

#[derive(Debug)]
struct State {
    transcript: Vec<AgentMessage>,
    model: Option<Model>,
    thinking: ThinkingLevel,
    /// The prompt sections for the active tools (what the next request should carry; the
    /// transcript's system messages are patched to them at the start of each turn).
    prompt_sections: Map<String, Value>,
    /// The prompt as one text (`prompt_sections` rendered).
    system_prompt: String,
    tools: ToolSet,
    steering: Queue,
    follow_up: Queue,
    steering_mode: QueueMode,
    follow_up_mode: QueueMode,
    pending_bash: Vec<BashExecutionMessage>,
    pending_next_turn: Vec<AgentMessage>,
    streaming: bool,
    run_cancel: Option<CancellationToken>,
    retry_cancel: Option<CancellationToken>,
    bash_cancel: Option<CancellationToken>,
    compaction_cancel: Option<CancellationToken>,
    retry_attempt: u32,
    last_assistant: Option<AssistantMessage>,
    /// The entry of the last assistant message stored, and of the tool results stored after
    /// it (by tool call id): the targets of a `context_edit` that omits a failed attempt.
    last_assistant_entry: Option<EntryId>,
    tool_result_entries: Vec<(String, EntryId)>,
    overflow_recovery_attempted: bool,
    auto_retry: bool,
    auto_compaction: bool,
    name: Option<String>,
    scope: Vec<ModelChoice>,
    /// The extensions' `turnIndex` (reset at `agent_start`).
    turn_index: u64,
    /// The system prompt `before_agent_start` handlers chose for the current prompt.
    turn_system_prompt: Option<String>,
}

/// Events emitted while the session opens (extension start-up errors, for example) are
/// kept for the first subscriber, who subscribes only after `open` returns.
#[derive(Debug, Default)]
struct Backlog {
    collecting: bool,
    events: Vec<SessionEvent>,
}

/// Background work started by extensions (`sendMessage`, `sendUserMessage`), so a mode
/// can wait until it is done.
#[derive(Debug, Default)]
struct Background {
    running: AtomicUsize,
    idle: tokio::sync::Notify,
}

struct Inner {
    config: SessionConfig,
    state: Mutex<State>,
    persistence: tokio::sync::Mutex<Persistence>,
    run_lock: tokio::sync::Mutex<()>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<SessionEvent>>>,
    writer: Writer,
    bus: Mutex<Arc<ExtensionBus>>,
    backlog: Mutex<Backlog>,
    background: Background,
    /// The writer lease of the current session (see `lease`).
    lease: Mutex<lease::LeaseState>,
    /// The runtime's working directory: the startup one, then the cwd of each stored session
    /// loaded (when it exists), as the reference builds its runtime in the session's cwd.
    cwd: Mutex<PathBuf>,
    /// The executable extensions of the runtime's directory when it moved away from the
    /// startup one (`None`: the configured list).
    executables: Mutex<Option<Vec<crate::session::extensions::ExecutableExtension>>>,
    /// The settings of the runtime's directory (the configured ones until it moves).
    settings: Mutex<SessionSettings>,
    /// Set once entries could not be stored when a session was left (rescued to a file or
    /// dropped): the process reports it in its exit code.
    not_stored: std::sync::atomic::AtomicBool,
}

/// A weak handle to a session (what extensions hold, so they never keep it alive).
#[derive(Clone)]
pub struct WeakSession(Weak<Inner>);

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
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AgentSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSession").finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Whether an assistant message is a failed turn worth retrying (not an overflow; spec
/// models-providers-settings §11.3).
pub fn is_retryable(message: &AssistantMessage, context_window: u64) -> bool {
    crate::ai::error::is_retryable_error(message, context_window)
}

/// The text of a user message (text blocks joined with nothing, as the reference does).
fn user_text(message: &AgentMessage) -> String {
    match message {
        AgentMessage::User(user) => match &user.content {
            UserContent::Text(text) => text.clone(),
            UserContent::Blocks(blocks) => blocks
                .iter()
                .filter_map(ContentBlock::as_text)
                .collect::<Vec<_>>()
                .join(""),
        },
        _ => String::new(),
    }
}

/// Splits `/name args` and looks the name up among the extension commands.
fn find_command<'t>(bus: &ExtensionBus, text: &'t str) -> Option<(RegisteredCommand, &'t str)> {
    let rest = text.strip_prefix('/')?;
    let (name, args) = match rest.find(' ') {
        Some(idx) => (&rest[..idx], &rest[idx + 1..]),
        None => (rest, ""),
    };
    bus.command(name).map(|command| (command, args))
}

fn tool_prompt_infos(tools: &[Arc<dyn Tool>]) -> Vec<ToolPromptInfo> {
    tools
        .iter()
        .map(|tool| {
            let definition = tool.definition();
            ToolPromptInfo {
                name: definition.name.clone(),
                snippet: definition.prompt_snippet.clone(),
                guidelines: definition.prompt_guidelines.clone(),
            }
        })
        .collect()
}

/// What opening a session found out, for the mode to show.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpenReport {
    /// Notices such as "Could not restore model …".
    pub notices: Vec<String>,
}

impl AgentSession {
    /// Opens (or starts) a session and restores its model and thinking level, taking the
    /// session's writer lease ([`OpenAccess::Write`]: a session another live process writes
    /// gives [`SessionError::Held`]).
    pub async fn open(
        config: SessionConfig,
        target: SessionTarget,
    ) -> Result<(Self, OpenReport), SessionError> {
        Self::open_with(config, target, OpenAccess::Write).await
    }

    /// Opens (or starts) a session with the given access to a stored session another process
    /// may hold (see [`OpenAccess`]).
    pub async fn open_with(
        config: SessionConfig,
        target: SessionTarget,
        access: OpenAccess,
    ) -> Result<(Self, OpenReport), SessionError> {
        let writer = Writer {
            store: config.store.clone(),
            clock: config.clock.clone(),
            ids: config.ids.clone(),
        };
        let state = State {
            transcript: Vec::new(),
            model: None,
            thinking: ThinkingLevel::Off,
            prompt_sections: Map::new(),
            system_prompt: String::new(),
            tools: config.tools.clone(),
            steering: Queue::default(),
            follow_up: Queue::default(),
            steering_mode: config.settings.steering_mode,
            follow_up_mode: config.settings.follow_up_mode,
            pending_bash: Vec::new(),
            pending_next_turn: Vec::new(),
            streaming: false,
            run_cancel: None,
            retry_cancel: None,
            bash_cancel: None,
            compaction_cancel: None,
            retry_attempt: 0,
            last_assistant_entry: None,
            tool_result_entries: Vec::new(),
            last_assistant: None,
            overflow_recovery_attempted: false,
            auto_retry: config.settings.retry.enabled,
            auto_compaction: config.settings.compaction.enabled,
            name: None,
            scope: config.models.scope.clone(),
            turn_index: 0,
            turn_system_prompt: None,
        };
        let placeholder =
            SessionHeader::new(SessionId::new(""), String::new(), String::new(), None);
        let startup_cwd = config.cwd.clone();
        let startup_settings = config.settings.clone();
        let inner = Arc::new_cyclic(|weak: &Weak<Inner>| {
            let ctx = ExtensionContext::attached(
                WeakSession(weak.clone()),
                config.extensions.ui.clone(),
                config.cwd.clone(),
                config.extensions.env.clone(),
            );
            let bus = ExtensionBus::new(Vec::new(), ctx, config.extensions.timeout);
            Inner {
                config,
                state: Mutex::new(state),
                persistence: tokio::sync::Mutex::new(Persistence::Pending {
                    header: placeholder,
                    entries: Vec::new(),
                    leaf: None,
                }),
                run_lock: tokio::sync::Mutex::new(()),
                subscribers: Mutex::new(Vec::new()),
                writer,
                bus: Mutex::new(Arc::new(bus)),
                backlog: Mutex::new(Backlog {
                    collecting: true,
                    events: Vec::new(),
                }),
                background: Background::default(),
                lease: Mutex::new(lease::LeaseState::Unleased),
                cwd: Mutex::new(startup_cwd),
                executables: Mutex::new(None),
                settings: Mutex::new(startup_settings),
                not_stored: std::sync::atomic::AtomicBool::new(false),
            }
        });
        let session = Self { inner };
        let result = async {
            let target = session.resolve_target(target).await?;
            let claim = session.claim(&target, access).await?;
            session
                .load(target, claim, StartReason::Startup, None)
                .await
        }
        .await;
        lock(&session.inner.backlog).collecting = false;
        Ok((session, result?))
    }

    /// Returns a weak handle (for extensions).
    pub fn downgrade(&self) -> WeakSession {
        WeakSession(Arc::downgrade(&self.inner))
    }

    pub(crate) fn config(&self) -> &SessionConfig {
        &self.inner.config
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.inner.state)
    }

    /// Loads `target` into this handle (startup, `/new`, `/resume`, fork, clone): starts a
    /// fresh set of extensions, restores the transcript, model and thinking level, and emits
    /// `session_start` and `resources_discover` to the new extensions.
    ///
    /// `target` is resolved (never `ContinueRecent`) and `claim` is its lease, claimed by the
    /// caller before it left the previous session.
    async fn load(
        &self,
        target: SessionTarget,
        claim: lease::Claim,
        reason: StartReason,
        previous_session: Option<String>,
    ) -> Result<OpenReport, SessionError> {
        let startup = reason == StartReason::Startup;
        let config = self.config().clone();
        let store = config.store.clone();
        let mut report = OpenReport::default();
        let (persistence, context) = match &target {
            SessionTarget::Open(id) => {
                let store_for_context = store.clone();
                let session_id = id.clone();
                let (summary, context) = blocking(move || {
                    let summary = store_for_context.session(&session_id)?;
                    let context = store_for_context.context(&session_id, &LeafSelector::Current)?;
                    Ok((summary, context))
                })
                .await?;
                // The runtime follows the session's directory while it exists (otherwise the
                // session continues here, and says so). Its protected project resources load
                // only when that directory is trusted; a directory other than the current one
                // is named before anything runs there.
                if !summary.cwd.is_empty() {
                    let session_cwd = std::path::Path::new(&summary.cwd);
                    if session_cwd.is_dir() {
                        let current = self.cwd();
                        if current.as_path() != session_cwd {
                            let trusted = self.project_trusted(session_cwd, &mut report).await;
                            report.notices.push(format!(
                                "Tools, commands and extensions of this session run in {} (the session's working directory), not in {}",
                                summary.cwd,
                                current.display()
                            ));
                            report.notices.extend(self.relocate(session_cwd, trusted));
                        }
                    } else {
                        report.notices.push(format!(
                            "The session's working directory {} does not exist; continuing in {}",
                            summary.cwd,
                            self.cwd().display()
                        ));
                    }
                }
                (
                    Persistence::Stored {
                        id: id.clone(),
                        unsaved: Vec::new(),
                    },
                    Some(context),
                )
            }
            SessionTarget::New { parent_session } => {
                let now = config.clock.now_ms();
                let header = SessionHeader::new(
                    SessionId::generate(&config.ids, now),
                    crate::support::clock::iso_from_ms(now),
                    self.cwd().to_string_lossy().into_owned(),
                    parent_session.clone(),
                );
                (
                    Persistence::Pending {
                        header,
                        entries: Vec::new(),
                        leaf: None,
                    },
                    None,
                )
            }
            SessionTarget::ContinueRecent => unreachable_continue(),
        };
        let transcript = context
            .as_ref()
            .map(|context| context.agent_messages())
            .unwrap_or_default();
        let has_messages = !transcript.is_empty();

        // Model (§6.6): explicit, else the scope's choice for an empty session, else the
        // session's own model if it still exists and has a key, else the fallback.
        let models = &config.models;
        let mut explicit_level = models.explicit_thinking;
        let mut model: Option<Model> = None;
        if let Some(choice) = &models.explicit {
            model = Some(choice.model.clone());
            explicit_level = explicit_level.or(choice.thinking);
        } else if !has_messages && let Some(choice) = &models.scoped {
            model = Some(choice.model.clone());
            explicit_level = explicit_level.or(choice.thinking);
        } else if has_messages
            && let Some(stored) = context.as_ref().and_then(|context| context.model_ref())
        {
            match config.registry.find(&stored.provider, &stored.model_id) {
                Some(found)
                    if auth::has_configured_auth(&config.registry, &config.credentials, found) =>
                {
                    model = Some(found.clone());
                }
                _ => report.notices.push(format!(
                    "Could not restore model {}/{}",
                    stored.provider, stored.model_id
                )),
            }
        }
        if model.is_none() {
            model = models.fallback.clone();
        }

        // Thinking level (§6.7).
        let restored_level = context
            .as_ref()
            .filter(|context| has_messages && context.has_thinking_entry)
            .and_then(|context| ThinkingLevel::parse(&context.thinking_level));
        let wanted = explicit_level
            .or(restored_level)
            .or(config.settings.default_thinking)
            .unwrap_or(ThinkingLevel::Medium);
        let thinking = match &model {
            Some(model) => clamp_thinking_level(model, wanted),
            None => ThinkingLevel::Off,
        };
        let name = match &persistence {
            Persistence::Stored { id, .. } => {
                let store = store.clone();
                let id = id.clone();
                blocking(move || store.session_name(&id)).await?
            }
            Persistence::Pending { .. } => None,
        };
        let bus = self.start_extensions().await;
        {
            let mut state = self.state();
            state.transcript = transcript;
            state.model = model.clone();
            state.thinking = thinking;
            state.name = name;
            state.steering = Queue::default();
            state.follow_up = Queue::default();
            state.pending_bash.clear();
            state.pending_next_turn.clear();
            state.retry_attempt = 0;
            state.last_assistant = None;
            state.last_assistant_entry = None;
            state.tool_result_entries.clear();
            state.overflow_recovery_attempted = false;
            state.turn_system_prompt = None;
        }
        *self.inner.persistence.lock().await = persistence;
        self.install_claim(claim);
        if self.config().tools_from_transcript {
            self.restore_tools_from_transcript().await;
        }
        self.rebuild_system_prompt();

        // `--name` (1.6.0 appends it when the session manager opens, before anything else).
        if startup && let Some(name) = self.config().startup_name.clone() {
            self.persist(EntryKind::SessionInfo {
                name: Some(name.clone()),
            })
            .await;
            self.state().name = Some(name);
        }

        // Entries written at load (context-building §4).
        let thinking_entry = EntryKind::ThinkingLevelChange {
            thinking_level: thinking.as_str().to_owned(),
        };
        if has_messages {
            if !context
                .as_ref()
                .is_some_and(|context| context.has_thinking_entry)
            {
                self.persist(thinking_entry).await;
            }
        } else if context
            .as_ref()
            .is_none_or(|context| context.messages.is_empty())
        {
            let empty_store_session = context.is_some();
            let nothing_yet = match &*self.inner.persistence.lock().await {
                // (a `--name` entry aside)
                Persistence::Pending { entries, .. } => entries
                    .iter()
                    .all(|raw| matches!(raw.entry.kind, EntryKind::SessionInfo { .. })),
                Persistence::Stored { .. } => empty_store_session,
            };
            if nothing_yet && (startup || matches!(target, SessionTarget::New { .. })) {
                if let Some(model) = &model {
                    self.persist(EntryKind::ModelChange(ModelRef {
                        provider: model.provider.clone(),
                        model_id: model.id.clone(),
                    }))
                    .await;
                }
                self.persist(thinking_entry).await;
            }
        }
        if bus.has_handlers("session_start") {
            bus.emit(&ExtensionEvent::SessionStart {
                reason,
                previous_session,
            })
            .await;
        }
        self.discover_resources(&bus, reason).await;
        Ok(report)
    }

    /// Returns the extension bus of the current session runtime.
    pub(crate) fn bus(&self) -> Arc<ExtensionBus> {
        lock(&self.inner.bus).clone()
    }

    /// Makes `bus` the current runtime's extensions and registers their tools.
    pub(crate) fn install_extensions(&self, bus: Arc<ExtensionBus>) {
        let tools = self.config().tools.with_custom(bus.tools());
        self.state().tools = tools;
        *lock(&self.inner.bus) = bus;
    }

    /// Rebuilds the prompt sections from the resources and the active tools.
    pub(crate) fn rebuild_system_prompt(&self) {
        let tools = self.state().tools.clone();
        let sections = self.build_prompt_sections(&tools);
        let text = crate::session::resources::system_prompt::render_system_prompt("", &sections);
        let mut state = self.state();
        state.prompt_sections = sections;
        state.system_prompt = text;
    }

    /// Activates the tool loadout the branch's system messages declare (1.6.0
    /// `_restoreToolsFromTranscript`): the recorded tools that are registered, plus extension
    /// tools the branch never mentioned; a branch without system messages keeps the tools.
    async fn restore_tools_from_transcript(&self) {
        let Persistence::Stored { id, .. } = &*self.inner.persistence.lock().await else {
            return;
        };
        let store = self.config().store.clone();
        let id = id.clone();
        let texts =
            match blocking(move || store.branch_system_messages(&id, &LeafSelector::Current)).await
            {
                Ok(texts) => texts,
                Err(error) => {
                    self.notice_error(format!("could not read the recorded tools: {error}"));
                    return;
                }
            };
        let systems: Vec<SystemMessage> = texts
            .iter()
            .filter_map(
                |text| match crate::support::json::parse_lenient(text.as_bytes()) {
                    Ok(value) => match AgentMessage::from_value(value) {
                        AgentMessage::System(system) => Some(system),
                        _ => None,
                    },
                    Err(_) => None,
                },
            )
            .collect();
        if systems.is_empty() {
            return;
        }
        let mentioned: std::collections::HashSet<String> = systems
            .iter()
            .flat_map(|system| {
                let added = system
                    .tools_added
                    .iter()
                    .flatten()
                    .map(|tool| tool.name.clone());
                let removed = system
                    .tools_removed
                    .iter()
                    .flatten()
                    .map(|tool| tool.name.clone());
                added.chain(removed).collect::<Vec<_>>()
            })
            .collect();
        let mut names: Vec<String> = crate::ai::transcript::get_current_tools(&systems)
            .into_iter()
            .map(|tool| tool.name)
            .collect();
        let mut state = self.state();
        let new_extension_tools: Vec<String> = state
            .tools
            .custom_names()
            .into_iter()
            .filter(|name| !mentioned.contains(name))
            .collect();
        names.extend(new_extension_tools);
        let names =
            crate::session::tools::apply_tool_modifiers(&names, &self.config().tool_modifiers);
        state.tools.set_active(&names);
    }

    /// Restarts the extensions' turn count (`agent_start`).
    pub(crate) fn start_turn_count(&self) {
        self.state().turn_index = 0;
    }

    /// The current turn's index.
    pub(crate) fn turn_index(&self) -> u64 {
        self.state().turn_index
    }

    /// Ends a turn; returns its index.
    pub(crate) fn end_turn(&self) -> u64 {
        let mut state = self.state();
        state.turn_index += 1;
        state.turn_index - 1
    }

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

    /// Returns the current time of the session's clock (Unix ms).
    pub fn now_ms(&self) -> i64 {
        self.config().clock.now_ms()
    }

    /// Returns every registered tool (`getAllTools`).
    pub fn all_tools(&self) -> Vec<ToolInfo> {
        self.state()
            .tools
            .registry()
            .iter()
            .map(|tool| {
                let definition = tool.definition();
                ToolInfo {
                    name: definition.name.clone(),
                    description: definition.description.clone(),
                    parameters: definition.parameters.clone(),
                }
            })
            .collect()
    }

    /// The prompt sections for these tools' active set.
    fn build_prompt_sections(&self, tools: &ToolSet) -> Map<String, Value> {
        let infos = tool_prompt_infos(&tools.active_tools());
        let cwd = self.cwd();
        let resources = lock(&self.config().resources);
        let options = resources.system_prompt_options(&infos, &cwd, &self.config().harness_docs);
        drop(resources);
        match crate::session::resources::system_prompt::build_system_prompt_sections(&options) {
            Ok(sections) => sections,
            Err(error) => {
                self.notice_error(error.to_string());
                self.state().prompt_sections.clone()
            }
        }
    }

    /// The system message that patches the transcript's prompt to the current sections
    /// (1.6.0 `_preparePromptAndToolLoadout`), or `None` when it already has them.
    fn prompt_patch(&self, transcript: &[AgentMessage]) -> Option<AgentMessage> {
        let previous = crate::ai::transcript::get_current_system_message(transcript)
            .and_then(|system| system.sections)
            .unwrap_or_default();
        let current = self.state().prompt_sections.clone();
        let patch = crate::session::resources::system_prompt::diff_system_prompt_sections(
            &previous, &current,
        )?;
        Some(AgentMessage::System(SystemMessage {
            content: Some(UserContent::Text(String::new())),
            sections: Some(patch),
            timestamp: self.config().clock.now_ms(),
            key_order: SystemKeyOrder::TimestampThenTools,
            ..SystemMessage::default()
        }))
    }

    /// Subscribes to the session's events (every event, in order; never lossy).
    ///
    /// The first subscriber also receives the events emitted while the session opened (such
    /// as an extension that could not start).
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<SessionEvent> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let backlog = std::mem::take(&mut lock(&self.inner.backlog).events);
        for event in backlog {
            // The receiver is still in hand.
            let _ = sender.send(event);
        }
        lock(&self.inner.subscribers).push(sender);
        receiver
    }

    pub(crate) fn emit(&self, event: SessionEvent) {
        {
            let mut backlog = lock(&self.inner.backlog);
            if backlog.collecting {
                backlog.events.push(event.clone());
            }
        }
        let mut subscribers = lock(&self.inner.subscribers);
        subscribers.retain(|subscriber| subscriber.send(event.clone()).is_ok());
    }

    fn notice(&self, level: NoticeLevel, message: String) {
        self.emit(SessionEvent::Notice { level, message });
    }

    /// Whether entries of a session this handle left could not be stored (they were saved to
    /// the rescue directory, or dropped): print mode, JSON mode, RPC and the REPL exit 1.
    pub fn entries_not_stored(&self) -> bool {
        self.inner
            .not_stored
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    fn notice_error(&self, message: String) {
        self.notice(NoticeLevel::Error, message);
    }

    /// Appends an entry, reporting (not failing) when the store refuses it: the entry is kept
    /// in memory and retried with the next append. One notice when entries start being kept
    /// (with the store's message), one when they were written later; a lost lease turns the
    /// session read-only (where entries are kept without asking the store).
    async fn persist(&self, kind: EntryKind) -> Option<EntryId> {
        let attempt = self.read_only().is_none();
        let mut persistence = self.inner.persistence.lock().await;
        let before = persistence.unsaved().len();
        let result = self
            .inner
            .writer
            .append(&mut persistence, kind, attempt)
            .await;
        let unsaved = persistence.unsaved().len();
        match result {
            Ok((Appended::Flushed(count), id)) => {
                drop(persistence);
                self.notice(
                    NoticeLevel::Info,
                    format!("saved the {} kept in memory", entries_text(count)),
                );
                id
            }
            Ok((Appended::Saved, id)) => {
                self.lease_new_session(&persistence).await;
                id
            }
            Ok((Appended::Kept, id)) => id,
            Err(error) => {
                // The entry is kept as the last unsaved line, with the id it will be stored as.
                let kept = persistence
                    .unsaved()
                    .last()
                    .and_then(|raw| raw.entry.id.clone());
                drop(persistence);
                self.check_lease_error(&error);
                if before == 0 && self.read_only().is_none() {
                    self.notice(
                        NoticeLevel::Error,
                        format!(
                            "could not save to the session database: {error}; {} kept in memory and written with the next one",
                            entries_text(unsaved)
                        ),
                    );
                }
                kept
            }
        }
    }

    /// Writes a pending session to the store now (before operations that read the tree).
    async fn ensure_stored(&self) -> Result<SessionId, SessionError> {
        let mut persistence = self.inner.persistence.lock().await;
        self.inner.writer.materialize(&mut persistence).await?;
        self.lease_new_session(&persistence).await;
        Ok(persistence.id())
    }

    // ----- getters ------------------------------------------------------------------------

    /// Returns the session id.
    pub async fn session_id(&self) -> SessionId {
        self.inner.persistence.lock().await.id()
    }

    /// Returns the session header line (as stored, or as it will be written).
    pub async fn header_line(&self) -> Result<String, SessionError> {
        let (id, pending) = {
            let persistence = self.inner.persistence.lock().await;
            match &*persistence {
                Persistence::Pending { header, .. } => (persistence.id(), Some(header.to_line())),
                Persistence::Stored { .. } => (persistence.id(), None),
            }
        };
        if let Some(line) = pending {
            return Ok(line);
        }
        let store = self.store().clone();
        let bytes = blocking(move || store.header_bytes(&id)).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Returns whether the session exists in the store yet.
    pub async fn is_persisted(&self) -> bool {
        self.inner.persistence.lock().await.is_stored()
    }

    /// Returns the entries not yet accepted by the store (for `/export` after a failure).
    pub async fn unsaved_entries(&self) -> Vec<EntryKind> {
        self.inner.persistence.lock().await.unsaved_kinds()
    }

    /// Returns the lines a stored session could not write yet, as they will be stored (each
    /// the child of the one before, the first a child of the store's leaf); empty for a
    /// session not written yet.
    pub async fn unsaved_lines(&self) -> Vec<Vec<u8>> {
        self.inner
            .persistence
            .lock()
            .await
            .unsaved()
            .iter()
            .map(|raw| raw.payload.clone())
            .collect()
    }

    /// Returns every entry of the session in append order, as the reference's entry objects
    /// (buffered entries of a session not yet written included).
    pub async fn entries_json(&self) -> Result<Vec<Value>, SessionError> {
        let stored = {
            let persistence = self.inner.persistence.lock().await;
            match &*persistence {
                Persistence::Pending { entries, .. } => {
                    return Ok(entries
                        .iter()
                        .filter_map(|raw| crate::support::json::parse_lenient(&raw.payload).ok())
                        .collect());
                }
                Persistence::Stored { id, .. } => id.clone(),
            }
        };
        let store = self.store().clone();
        let entries = blocking(move || store.entries(&stored)).await?;
        Ok(entries
            .iter()
            .filter_map(|entry| crate::support::json::parse_lenient(&entry.payload).ok())
            .collect())
    }

    /// Returns the entries of the active path, root first, as the reference's entry objects.
    pub async fn branch_json(&self) -> Result<Vec<Value>, SessionError> {
        let stored = {
            let persistence = self.inner.persistence.lock().await;
            match &*persistence {
                Persistence::Pending { entries, leaf, .. } => {
                    let mut path = Vec::new();
                    let mut current = leaf.clone();
                    while let Some(id) = current {
                        let Some(raw) = entries
                            .iter()
                            .rev()
                            .find(|raw| raw.entry.id.as_ref() == Some(&id))
                        else {
                            break;
                        };
                        if path.len() > entries.len() {
                            break;
                        }
                        path.push(raw);
                        current = raw.entry.parent_id.clone();
                    }
                    return Ok(path
                        .into_iter()
                        .rev()
                        .filter_map(|raw| crate::support::json::parse_lenient(&raw.payload).ok())
                        .collect());
                }
                Persistence::Stored { id, .. } => id.clone(),
            }
        };
        let store = self.store().clone();
        let entries = blocking(move || store.branch_path(&stored, &LeafSelector::Current)).await?;
        Ok(entries
            .iter()
            .filter_map(|entry| crate::support::json::parse_lenient(&entry.payload).ok())
            .collect())
    }

    /// Returns the leaf entry id (`None` before the first entry).
    pub async fn leaf_id(&self) -> Result<Option<EntryId>, SessionError> {
        let stored = {
            let persistence = self.inner.persistence.lock().await;
            match &*persistence {
                Persistence::Pending { leaf, .. } => return Ok(leaf.clone()),
                Persistence::Stored { id, .. } => id.clone(),
            }
        };
        let store = self.store().clone();
        let leaf = blocking(move || store.leaf(&stored)).await?;
        Ok(leaf.and_then(|stored| stored.entry.id))
    }

    /// Returns the store.
    pub fn store(&self) -> &SessionStore {
        &self.config().store
    }

    /// Reads the settings of the runtime's directory.
    pub(crate) fn with_settings<T>(&self, read: impl FnOnce(&SessionSettings) -> T) -> T {
        read(&lock(&self.inner.settings))
    }

    /// Returns the working directory of the current session runtime: the startup directory,
    /// or the stored cwd of the session loaded since (tools, `!cmd`, resources and extensions
    /// work there).
    pub fn cwd(&self) -> PathBuf {
        lock(&self.inner.cwd).clone()
    }

    /// Decides whether `cwd`'s protected resources may load (`session::trust`): without a
    /// decision and with a person to answer (the REPL), asks through the extension UI; what
    /// could not be read or saved, and an untrusted project's notice, go to `report`.
    async fn project_trusted(&self, cwd: &std::path::Path, report: &mut OpenReport) -> bool {
        let Some(trust) = self.config().trust.clone() else {
            return true;
        };
        let trusted = match trust.decide(cwd, &mut report.notices) {
            TrustDecision::Decided(trusted) => trusted,
            TrustDecision::Ask => {
                let options = trust::trust_options(cwd, true);
                let labels: Vec<String> = options.iter().map(|o| o.label.clone()).collect();
                let ui = self.config().extensions.ui.clone();
                let chosen = ui
                    .select(&trust::trust_question(cwd), &labels, None)
                    .await
                    .and_then(|label| options.iter().find(|o| o.label == label));
                match chosen {
                    Some(option) => {
                        if let Err(error) = trust.choose(cwd, option) {
                            report.notices.push(error.to_string());
                        }
                        option.trusted
                    }
                    None => {
                        trust.remember(cwd, false);
                        false
                    }
                }
            }
        };
        if !trusted && trust::has_protected_resources(cwd, trust.home.as_deref()) {
            report.notices.push(if trust.interactive {
                trust::UNTRUSTED_REPL_NOTICE.to_owned()
            } else {
                trust::untrusted_notice(cwd)
            });
        }
        trusted
    }

    /// Returns the project trust of this process (`None`: every project is trusted).
    pub fn project_trust(&self) -> Option<&ProjectTrust> {
        self.config().trust.as_ref()
    }

    /// Returns whether the current runtime directory's protected resources were loaded
    /// (`true` without project trust configured).
    pub fn project_is_trusted(&self) -> bool {
        match &self.config().trust {
            Some(trust) => trust.decided_for(&self.cwd()).unwrap_or(false),
            None => true,
        }
    }

    /// Moves the runtime to `cwd`: the resources (context files, and for a trusted project
    /// its skills, templates and prompt files) are loaded again for it, and the next
    /// extensions are that project's (trusted only) and start there. Returns notices
    /// (extensions that cannot be used, reference extensions skipped).
    fn relocate(&self, cwd: &std::path::Path, project_trusted: bool) -> Vec<String> {
        {
            let mut current = lock(&self.inner.cwd);
            if current.as_path() == cwd {
                return Vec::new();
            }
            *current = cwd.to_path_buf();
        }
        let project_settings = if project_trusted {
            crate::session::settings::read_project_settings(cwd)
        } else {
            serde_json::Value::Null
        };
        lock(&self.config().resources).relocate(cwd, &project_settings, project_trusted);
        if let Some(reload) = &self.config().settings_reload {
            // As the reference builds a new runtime from that directory's settings: retry,
            // compaction, queue modes, provider transport and the rest follow the project; the
            // writer lease keeps the startup intervals (it belongs to the store).
            let mut settings = reload(cwd, project_trusted);
            settings.lease = self.with_settings(|current| current.lease.clone());
            {
                let mut state = self.state();
                state.auto_retry = settings.retry.enabled;
                state.auto_compaction = settings.compaction.enabled;
                state.steering_mode = settings.steering_mode;
                state.follow_up_mode = settings.follow_up_mode;
            }
            *lock(&self.inner.settings) = settings;
        }
        let Some(rediscovery) = &self.config().extensions.rediscovery else {
            return Vec::new();
        };
        let found = rediscovery.discover(cwd, &project_settings, project_trusted);
        let mut notices = found.problems.clone();
        notices.extend(found.skipped_notice());
        *lock(&self.inner.executables) = Some(found.executables);
        notices
    }

    /// The extensions configuration of the current runtime (its directory's executables).
    pub(crate) fn extensions_config(&self) -> ExtensionsConfig {
        let mut config = self.config().extensions.clone();
        if let Some(executables) = lock(&self.inner.executables).clone() {
            config.executables = executables;
        }
        config
    }

    /// Returns the transcript.
    pub fn messages(&self) -> Vec<AgentMessage> {
        self.state().transcript.clone()
    }

    /// Returns the current model.
    pub fn model(&self) -> Option<Model> {
        self.state().model.clone()
    }

    /// Returns the thinking level.
    pub fn thinking_level(&self) -> ThinkingLevel {
        self.state().thinking
    }

    /// Returns the current system prompt.
    pub fn system_prompt(&self) -> String {
        self.state().system_prompt.clone()
    }

    /// Returns whether a run is in progress.
    pub fn is_streaming(&self) -> bool {
        self.state().streaming
    }

    /// Returns the session name.
    pub fn session_name(&self) -> Option<String> {
        self.state().name.clone()
    }

    /// Returns whether turn-level auto-retry is on.
    pub fn auto_retry(&self) -> bool {
        self.state().auto_retry
    }

    /// Returns whether automatic compaction is on.
    pub fn auto_compaction(&self) -> bool {
        self.state().auto_compaction
    }

    /// Returns the queue delivery modes `(steering, follow-up)`.
    pub fn queue_modes(&self) -> (QueueMode, QueueMode) {
        let state = self.state();
        (state.steering_mode, state.follow_up_mode)
    }

    /// Returns the queued texts `(steering, follow-up)`.
    pub fn queued(&self) -> (Vec<String>, Vec<String>) {
        let state = self.state();
        (state.steering.texts.clone(), state.follow_up.texts.clone())
    }

    /// Returns the active tool names.
    pub fn active_tool_names(&self) -> Vec<String> {
        self.state().tools.active_names().to_vec()
    }

    /// Returns the thinking levels the current model supports.
    pub fn available_thinking_levels(&self) -> Vec<ThinkingLevel> {
        match &self.state().model {
            Some(model) => supported_thinking_levels(model),
            None => ThinkingLevel::ALL.to_vec(),
        }
    }

    /// Returns the models with a configured key, in registry order.
    pub fn available_models(&self) -> Vec<Model> {
        auth::available_models(&self.config().registry, &self.config().credentials)
            .into_iter()
            .cloned()
            .collect()
    }

    /// Returns the registry.
    pub fn registry(&self) -> &Arc<ModelRegistry> {
        &self.config().registry
    }

    /// Returns the resources (skills, templates) for completion and `/reload`.
    pub fn resources(&self) -> Arc<Mutex<Resources>> {
        self.config().resources.clone()
    }

    /// Returns the text of the last assistant message, if any.
    pub fn last_assistant_text(&self) -> Option<String> {
        self.state()
            .transcript
            .iter()
            .rev()
            .find_map(|message| match message {
                AgentMessage::Assistant(assistant) => Some(assistant.text()),
                _ => None,
            })
    }

    /// Returns the session's message counts and token and cost totals over all its entries (1.6.0
    /// `getSessionStats`: every branch, compacted history included; a session not yet stored
    /// counts its transcript).
    pub async fn stats(&self) -> SessionStats {
        let stored = match &*self.inner.persistence.lock().await {
            Persistence::Stored { id, unsaved } if unsaved.is_empty() => Some(id.clone()),
            _ => None,
        };
        if let Some(id) = stored {
            let store = self.config().store.clone();
            if let Ok(totals) = blocking(move || store.session_totals(&id)).await {
                let count = |value: i64| usize::try_from(value).unwrap_or(0);
                let tokens = |value: i64| u64::try_from(value).unwrap_or(0);
                return SessionStats {
                    user_messages: count(totals.user),
                    assistant_messages: count(totals.assistant),
                    tool_calls: count(totals.tool_calls),
                    tool_results: count(totals.tool_results),
                    total_messages: count(totals.messages),
                    input: tokens(totals.input),
                    output: tokens(totals.output),
                    cache_read: tokens(totals.cache_read),
                    cache_write: tokens(totals.cache_write),
                    cost: totals.cost,
                };
            }
        }
        // A session not (fully) stored yet: its transcript is all it has.
        let state = self.state();
        let mut stats = SessionStats {
            total_messages: state.transcript.len(),
            ..SessionStats::default()
        };
        for message in &state.transcript {
            match message {
                AgentMessage::User(_) => stats.user_messages += 1,
                AgentMessage::Assistant(assistant) => {
                    stats.assistant_messages += 1;
                    stats.tool_calls += assistant.tool_calls().count();
                    stats.input += assistant.usage.input;
                    stats.output += assistant.usage.output;
                    stats.cache_read += assistant.usage.cache_read;
                    stats.cache_write += assistant.usage.cache_write;
                    stats.cost += assistant.usage.cost.total;
                }
                AgentMessage::ToolResult(result) => {
                    stats.tool_results += 1;
                    if let Some(usage) = &result.usage {
                        stats.input += usage.input;
                        stats.output += usage.output;
                        stats.cache_read += usage.cache_read;
                        stats.cache_write += usage.cache_write;
                        stats.cost += usage.cost.total;
                    }
                }
                _ => {}
            }
        }
        stats
    }

    /// Returns the context tokens as the last assistant usage reports them (input + output +
    /// cache), or `None` before the first answer.
    pub fn context_tokens(&self) -> Option<u64> {
        self.state()
            .transcript
            .iter()
            .rev()
            .find_map(|message| match message {
                AgentMessage::Assistant(assistant)
                    if !matches!(
                        assistant.stop_reason,
                        StopReason::Error | StopReason::Aborted
                    ) =>
                {
                    let usage = &assistant.usage;
                    let total = if usage.total_tokens > 0 {
                        usage.total_tokens
                    } else {
                        usage.input + usage.output + usage.cache_read + usage.cache_write
                    };
                    Some(total)
                }
                _ => None,
            })
    }

    // ----- prompting ------------------------------------------------------------------------

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
    async fn prompt_inner(
        &self,
        text: &str,
        options: PromptOptions,
        accepted: Option<Box<dyn FnOnce() + Send>>,
    ) -> Result<(), SessionError> {
        self.refuse_read_only().await?;
        let bus = self.bus();
        if !options.no_expansion
            && let Some((command, args)) = find_command(&bus, text)
        {
            bus.run_command(&command, args).await;
            if let Some(accepted) = accepted {
                accepted();
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
                        accepted();
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
                accepted();
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
            accepted();
        }
        self.record_thinking_level().await;
        self.run_agent(Some(messages)).await;
        Ok(())
    }

    /// Records the live thinking level on the branch when the branch's latest
    /// `thinking_level_change` (clamped to the model) says another one, so that a resume
    /// restores the level the run used: `-c --thinking high` on a `medium` session (1.6.0
    /// `_recordThinkingLevel`, when a run starts).
    async fn record_thinking_level(&self) {
        // (The persistence lock is released before `persist` takes it again.)
        let id = match &*self.inner.persistence.lock().await {
            Persistence::Stored { id, .. } => id.clone(),
            Persistence::Pending { .. } => return,
        };
        let store = self.config().store.clone();
        let recorded = match blocking(move || store.branch_thinking_level(&id)).await {
            Ok(Some(recorded)) => recorded,
            Ok(None) => return,
            Err(error) => {
                self.notice_error(format!(
                    "could not read the recorded thinking level: {error}"
                ));
                return;
            }
        };
        let (live, recorded_effective) = {
            let state = self.state();
            let recorded = ThinkingLevel::parse(&recorded);
            let effective = match (&state.model, recorded) {
                (Some(model), Some(level)) => Some(clamp_thinking_level(model, level)),
                (None, Some(_)) => Some(ThinkingLevel::Off),
                (_, None) => None,
            };
            (state.thinking, effective)
        };
        if recorded_effective == Some(live) {
            return;
        }
        self.persist(EntryKind::ThinkingLevelChange {
            thinking_level: live.as_str().to_owned(),
        })
        .await;
    }

    /// Expands `/skill:name` and prompt templates.
    fn expand(&self, text: &str) -> Result<String, SessionError> {
        let resources = lock(&self.config().resources);
        let expanded = resources.expand_input(text);
        if let Some(error) = expanded.error {
            drop(resources);
            self.notice(NoticeLevel::Warning, error.to_string());
        }
        Ok(expanded.text)
    }

    fn enqueue(&self, behavior: StreamingBehavior, text: String, images: Vec<ImageContent>) {
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

    fn refuse_queued_command(&self, text: &str) -> Result<(), SessionError> {
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

    /// Cancels a retry that is waiting.
    pub fn abort_retry(&self) {
        if let Some(cancel) = &self.state().retry_cancel {
            cancel.cancel();
        }
    }

    /// Runs the agent (with new prompt messages, or continuing) and the retries it needs.
    async fn run_agent(&self, prompts: Option<Vec<AgentMessage>>) {
        let mut prompts = prompts;
        loop {
            let (config, transcript, cancel) = {
                let mut state = self.state();
                let Some(model) = state.model.clone() else {
                    state.streaming = false;
                    return;
                };
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
            let last = {
                let mut state = self.state();
                state.streaming = false;
                state.run_cancel = None;
                state.last_assistant.take()
            };
            self.flush_pending_bash().await;
            let Some(last) = last else {
                return;
            };
            if self.retry_after(&last, &config.model).await {
                continue;
            }
            if self.check_compaction(&last, true).await == compaction::AfterRun::Done {
                return;
            }
        }
    }

    /// Decides on a retry after a run ended with `last`; waits the backoff and returns true
    /// when the agent should continue.
    async fn retry_after(&self, last: &AssistantMessage, model: &Model) -> bool {
        let (enabled, max) = {
            let state = self.state();
            (
                state.auto_retry,
                self.with_settings(|settings| settings.retry.max_retries),
            )
        };
        if !enabled || !is_retryable(last, model.context_window) {
            let attempt = std::mem::take(&mut self.state().retry_attempt);
            if attempt > 0 && last.stop_reason == StopReason::Error {
                self.emit(SessionEvent::AutoRetryEnd {
                    success: false,
                    attempt,
                    final_error: last.error_message.clone(),
                });
            }
            return false;
        }
        let attempt = {
            let mut state = self.state();
            state.retry_attempt += 1;
            state.retry_attempt
        };
        if attempt > max {
            self.state().retry_attempt = 0;
            self.emit(SessionEvent::AutoRetryEnd {
                success: false,
                attempt: attempt - 1,
                final_error: last.error_message.clone(),
            });
            return false;
        }
        let base = self.with_settings(|settings| settings.retry.base_delay_ms);
        let delay_ms = base.saturating_mul(1u64 << (attempt - 1).min(30));
        let cancel = CancellationToken::new();
        self.state().retry_cancel = Some(cancel.clone());
        self.emit(SessionEvent::AutoRetryStart {
            attempt,
            max_attempts: max,
            delay_ms,
            error_message: last
                .error_message
                .clone()
                .unwrap_or_else(|| "Unknown error".to_owned()),
        });
        // The failed attempt stays in the history and leaves the model context for good (the
        // reference does this synchronously: an abort_retry sent after auto_retry_start finds
        // the wait already cancellable).
        self.omit_recovery_attempt(last).await;
        let cancelled = tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(delay_ms)) => false,
            () = cancel.cancelled() => true,
        };
        self.state().retry_cancel = None;
        if cancelled {
            self.state().retry_attempt = 0;
            self.emit(SessionEvent::AutoRetryEnd {
                success: false,
                attempt,
                final_error: Some("Retry cancelled".to_owned()),
            });
            return false;
        }
        true
    }

    /// Omits a failed attempt from the model context (1.6.0 `_omitRecoveryAttempt`): a
    /// `context_edit` with `replacement: null` for its assistant message and for each stored
    /// tool result answering one of its tool calls; the transcript drops them too.
    pub(crate) async fn omit_recovery_attempt(&self, failed: &AssistantMessage) {
        let call_ids: std::collections::HashSet<String> =
            failed.tool_calls().map(|call| call.id.clone()).collect();
        let targets: Vec<EntryId> = {
            let mut state = self.state();
            let mut targets: Vec<EntryId> = state.last_assistant_entry.take().into_iter().collect();
            targets.extend(
                state
                    .tool_result_entries
                    .drain(..)
                    .filter(|(call_id, _)| call_ids.contains(call_id))
                    .map(|(_, id)| id),
            );
            // The projected context loses the attempt as the edits say.
            if let Some(pos) = state
                .transcript
                .iter()
                .rposition(|message| matches!(message, AgentMessage::Assistant(_)))
            {
                let tail: Vec<AgentMessage> = state.transcript.split_off(pos);
                state.transcript.extend(tail.into_iter().skip(1).filter(|message| {
                    !matches!(message, AgentMessage::ToolResult(result) if call_ids.contains(&result.tool_call_id))
                }));
            }
            targets
        };
        for target in targets {
            self.persist(EntryKind::ContextEdit(ContextEditEntry {
                target_id: Some(target),
                replacement: Some(Value::Null),
            }))
            .await;
        }
    }

    async fn flush_pending_bash(&self) {
        let pending = std::mem::take(&mut self.state().pending_bash);
        for message in pending {
            let message = AgentMessage::BashExecution(message);
            self.state().transcript.push(message.clone());
            self.persist(EntryKind::Message(message)).await;
        }
    }

    /// Handles one agent event: extensions, transcript, persistence on `message_end`, queues,
    /// fan-out.
    async fn on_agent_event(&self, event: AgentEvent) {
        self.deliver_agent_event(&event).await;
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
                    let finished_retry = {
                        let mut state = self.state();
                        state.last_assistant = Some(assistant.clone());
                        if assistant.stop_reason != StopReason::Error {
                            state.overflow_recovery_attempted = false;
                        }
                        (assistant.stop_reason != StopReason::Error && state.retry_attempt > 0)
                            .then(|| std::mem::take(&mut state.retry_attempt))
                    };
                    if let Some(attempt) = finished_retry {
                        self.emit(SessionEvent::AutoRetryEnd {
                            success: true,
                            attempt,
                            final_error: None,
                        });
                    }
                }
            }
            _ => {}
        }
        self.emit(SessionEvent::Agent(event));
    }

    async fn stream_options(&self, model: &Model) -> Result<StreamOptions, AiError> {
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

    fn drain(&self, steering: bool) -> Vec<AgentMessage> {
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

    // ----- models and thinking ----------------------------------------------------------------

    /// Sets the model (it must have a key): appends `model_change`, saves the default, and
    /// re-clamps the thinking level.
    pub async fn set_model(&self, model: Model) -> Result<(), SessionError> {
        if !auth::has_configured_auth(&self.config().registry, &self.config().credentials, &model) {
            return Err(SessionError::NoApiKey {
                provider: model.provider.clone(),
            });
        }
        self.apply_model(model, None, "set").await;
        Ok(())
    }

    async fn apply_model(
        &self,
        model: Model,
        explicit_level: Option<ThinkingLevel>,
        source: &'static str,
    ) {
        let level = explicit_level.unwrap_or_else(|| self.level_for_model_switch());
        let previous = self.state().model.replace(model.clone());
        self.persist(EntryKind::ModelChange(ModelRef {
            provider: model.provider.clone(),
            model_id: model.id.clone(),
        }))
        .await;
        self.config()
            .settings_sink
            .set_default_model(&model.provider, &model.id);
        self.set_thinking_level(level).await;
        let changed = previous
            .as_ref()
            .is_none_or(|before| before.provider != model.provider || before.id != model.id);
        let bus = self.bus();
        if changed && bus.has_handlers("model_select") {
            let json = |model: &Model| serde_json::to_value(model).unwrap_or(Value::Null);
            bus.emit(&ExtensionEvent::ModelSelect {
                model: json(&model),
                previous_model: previous.as_ref().map(json),
                source,
            })
            .await;
        }
    }

    fn level_for_model_switch(&self) -> ThinkingLevel {
        let state = self.state();
        if state.model.as_ref().is_some_and(|model| model.reasoning) {
            state.thinking
        } else {
            self.config()
                .settings
                .default_thinking
                .unwrap_or(ThinkingLevel::Medium)
        }
    }

    /// Cycles through the scoped models (or every available model); returns the new model, or
    /// `None` when there is nothing to cycle to.
    pub async fn cycle_model(&self, forward: bool) -> Option<Model> {
        let current = self.model();
        let scope: Vec<ModelChoice> = self
            .state()
            .scope
            .iter()
            .filter(|choice| {
                auth::has_configured_auth(
                    &self.config().registry,
                    &self.config().credentials,
                    &choice.model,
                )
            })
            .cloned()
            .collect();
        let candidates: Vec<ModelChoice> = if scope.is_empty() {
            self.available_models()
                .into_iter()
                .map(|model| ModelChoice {
                    model,
                    thinking: None,
                })
                .collect()
        } else {
            scope
        };
        if candidates.len() <= 1 {
            return None;
        }
        let index = current
            .as_ref()
            .and_then(|current| {
                candidates.iter().position(|choice| {
                    choice.model.provider == current.provider && choice.model.id == current.id
                })
            })
            .unwrap_or(0);
        let len = candidates.len();
        let next = if forward {
            (index + 1) % len
        } else {
            (index + len - 1) % len
        };
        let choice = candidates[next].clone();
        self.apply_model(choice.model.clone(), choice.thinking, "cycle")
            .await;
        Some(choice.model)
    }

    /// Sets the thinking level (clamped to the model); a real change appends an entry, saves
    /// the default and emits `thinking_level_changed`.
    pub async fn set_thinking_level(&self, level: ThinkingLevel) {
        let (effective, previous, changed, reasons) = {
            let mut state = self.state();
            let effective = match &state.model {
                Some(model) => clamp_thinking_level(model, level),
                None => ThinkingLevel::Off,
            };
            let previous = state.thinking;
            let changed = effective != previous;
            state.thinking = effective;
            (
                effective,
                previous,
                changed,
                state.model.as_ref().is_some_and(|model| model.reasoning),
            )
        };
        if changed {
            self.persist(EntryKind::ThinkingLevelChange {
                thinking_level: effective.as_str().to_owned(),
            })
            .await;
            if reasons || effective != ThinkingLevel::Off {
                self.config()
                    .settings_sink
                    .set_default_thinking_level(effective);
            }
            self.emit(SessionEvent::ThinkingLevelChanged {
                level: effective.as_str().to_owned(),
            });
            let bus = self.bus();
            if bus.has_handlers("thinking_level_select") {
                bus.emit(&ExtensionEvent::ThinkingLevelSelect {
                    level: effective.as_str().to_owned(),
                    previous_level: previous.as_str().to_owned(),
                })
                .await;
            }
        }
    }

    /// Moves to the next supported thinking level; `None` when the model cannot think.
    pub async fn cycle_thinking_level(&self) -> Option<ThinkingLevel> {
        let model = self.model()?;
        if !model.reasoning {
            return None;
        }
        let levels = supported_thinking_levels(&model);
        let current = self.thinking_level();
        let index = levels
            .iter()
            .position(|level| *level == current)
            .unwrap_or(0);
        let next = levels[(index + 1) % levels.len()];
        self.set_thinking_level(next).await;
        Some(next)
    }

    /// Turns turn-level auto-retry on or off (saved to settings).
    pub fn set_auto_retry(&self, enabled: bool) {
        self.state().auto_retry = enabled;
        self.config().settings_sink.set_auto_retry(enabled);
    }

    /// Turns automatic compaction on or off (saved to settings).
    pub fn set_auto_compaction(&self, enabled: bool) {
        self.state().auto_compaction = enabled;
        self.config().settings_sink.set_auto_compaction(enabled);
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

    /// Sets the active tools (unknown names are ignored) and rebuilds the system prompt.
    pub fn set_active_tools(&self, names: &[String]) {
        self.state().tools.set_active(names);
        self.rebuild_system_prompt();
    }

    /// `/reload` (the reference's `AgentSession.reload`): `session_shutdown` (reason `reload`)
    /// to the running extensions, which are stopped; skills, prompt templates and context files
    /// are read again; the extensions start again (their tools registered, the active tools
    /// kept) and get `session_start` (reason `reload`) and `resources_discover` (`reload`).
    pub async fn reload(&self) {
        let active: Vec<String> = self.state().tools.active_names().to_vec();
        self.teardown(ShutdownReason::Reload, None).await;
        lock(&self.config().resources).reload();
        let bus = self.start_extensions().await;
        {
            let mut state = self.state();
            let mut wanted = active;
            wanted.extend(
                bus.tools()
                    .iter()
                    .map(|tool| tool.definition().name.clone()),
            );
            state.tools.set_active(&wanted);
        }
        self.rebuild_system_prompt();
        if bus.has_handlers("session_start") {
            bus.emit(&ExtensionEvent::SessionStart {
                reason: StartReason::Reload,
                previous_session: None,
            })
            .await;
        }
        self.discover_resources(&bus, StartReason::Reload).await;
    }

    // ----- names, labels, custom entries ------------------------------------------------------

    /// Names the session (appends `session_info`, trimmed; empty names are refused).
    pub async fn set_session_name(&self, name: &str) -> Result<(), SessionError> {
        let name = sanitize_session_name(name);
        let name = name.as_str();
        if name.is_empty() {
            return Err(SessionError::InvalidEntry(
                "Session name cannot be empty".to_owned(),
            ));
        }
        self.persist(EntryKind::SessionInfo {
            name: Some(name.to_owned()),
        })
        .await;
        self.state().name = Some(name.to_owned());
        self.emit(SessionEvent::SessionInfoChanged {
            name: Some(name.to_owned()),
        });
        Ok(())
    }

    /// Sets (or clears, with `None` or an empty label) the label of an entry.
    pub async fn set_label(
        &self,
        target: &EntryId,
        label: Option<&str>,
    ) -> Result<(), SessionError> {
        let session = self.ensure_stored().await?;
        let store = self.store().clone();
        let target = target.clone();
        let label = label.map(str::to_owned);
        blocking(move || store.append_label(&session, &target, label.as_deref())).await?;
        Ok(())
    }

    /// Appends a `custom` entry (extension state, never in the context).
    pub async fn append_custom(&self, custom_type: &str, data: Option<Value>) {
        self.persist(EntryKind::Custom {
            custom_type: custom_type.to_owned(),
            data,
        })
        .await;
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

    // ----- user shell -------------------------------------------------------------------------

    /// Runs a `!command` (`!!` when `exclude_from_context`), records it as a `bashExecution`
    /// message (queued until the run ends when streaming) and returns it. A `user_bash`
    /// handler may supply the result instead; it is recorded the same way.
    pub async fn execute_bash(
        &self,
        command: &str,
        exclude_from_context: bool,
        on_chunk: Option<OutputSink>,
    ) -> Result<BashExecutionMessage, SessionError> {
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
                    exclude_from_context: exclude_from_context.then_some(true),
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
        let message = result.to_message(&parsed, self.config().clock.now_ms());
        self.record_bash(message.clone()).await;
        Ok(message)
    }

    async fn record_bash(&self, message: BashExecutionMessage) {
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

    // ----- the tree and other sessions --------------------------------------------------------

    /// Rebuilds the transcript (and model/thinking) from the store at the leaf.
    async fn reload_transcript(&self) -> Result<(), SessionError> {
        let session = self.ensure_stored().await?;
        let store = self.store().clone();
        let context = blocking(move || store.context(&session, &LeafSelector::Current)).await?;
        let mut state = self.state();
        state.transcript = context.agent_messages();
        Ok(())
    }

    /// Moves the leaf to `target` following the reference's rule (a user or custom message:
    /// its parent, returning its text for the editor; anything else: the entry itself),
    /// without a summary.
    pub async fn navigate_tree(&self, target: &EntryId) -> Result<Option<String>, SessionError> {
        let outcome = self
            .navigate_tree_with(target, NavigateOptions::default())
            .await?;
        Ok(outcome.editor_text)
    }

    /// Starts a new session (`/new`, RPC `new_session`); `Err(Cancelled)` when an extension
    /// cancels it.
    pub async fn new_session(
        &self,
        parent_session: Option<String>,
    ) -> Result<OpenReport, SessionError> {
        self.allow_switch("new", None).await?;
        let previous = self.session_id().await.into_string();
        self.leave_lease(None).await;
        self.teardown(ShutdownReason::New, None).await;
        self.load(
            SessionTarget::New { parent_session },
            lease::Claim::Nothing,
            StartReason::New,
            Some(previous),
        )
        .await
    }

    /// Switches to another stored session (`/resume`, RPC `switch_session`); `Err(Cancelled)`
    /// when an extension cancels it, `Err(Held)` when another process writes it (the current
    /// session stays).
    pub async fn switch_session(&self, id: SessionId) -> Result<OpenReport, SessionError> {
        self.switch_session_with(id, OpenAccess::Write).await
    }

    /// [`Self::switch_session`] with the given access to a session another process may hold.
    pub async fn switch_session_with(
        &self,
        id: SessionId,
        access: OpenAccess,
    ) -> Result<OpenReport, SessionError> {
        self.allow_switch("resume", Some(id.to_string())).await?;
        let previous = self.session_id().await;
        let target = SessionTarget::Open(id.clone());
        let claim = self.claim(&target, access).await?;
        self.leave_lease(Some(&id).filter(|id| **id == previous))
            .await;
        self.teardown(ShutdownReason::Resume, Some(id.to_string()))
            .await;
        self.load(
            target,
            claim,
            StartReason::Resume,
            Some(previous.into_string()),
        )
        .await
    }

    /// Forks before a user message (the path up to its parent goes to a new session; returns
    /// the message text for the editor) — the reference's `/fork`; `Err(Cancelled)` when an
    /// extension cancels it.
    pub async fn fork(&self, entry: &EntryId) -> Result<Option<String>, SessionError> {
        let session = self.ensure_stored().await?;
        let store = self.store().clone();
        let target = entry.clone();
        let found = blocking(move || store.entry(&session, &target))
            .await?
            .ok_or_else(|| SessionError::InvalidEntry("Invalid entry ID for forking".to_owned()))?;
        let EntryKind::Message(message @ AgentMessage::User(_)) = &found.entry.kind else {
            return Err(SessionError::InvalidEntry(
                "Invalid entry ID for forking".to_owned(),
            ));
        };
        self.allow_fork(entry.as_str(), "before").await?;
        let text = user_text(message);
        self.branch_into_new_session(found.entry.parent_id.clone())
            .await?;
        Ok(Some(text))
    }

    /// Copies the path root → leaf into a new session (the reference's `/clone`, a fork `at`
    /// the leaf); `Err(Cancelled)` when an extension cancels it.
    pub async fn clone_session(&self) -> Result<(), SessionError> {
        let session = self.ensure_stored().await?;
        let store = self.store().clone();
        let leaf = blocking(move || store.leaf(&session)).await?;
        let leaf_id = leaf.and_then(|stored| stored.entry.id);
        if let Some(leaf_id) = &leaf_id {
            self.allow_fork(leaf_id.as_str(), "at").await?;
        }
        self.branch_into_new_session(leaf_id).await
    }

    async fn branch_into_new_session(&self, at: Option<EntryId>) -> Result<(), SessionError> {
        let session = self.ensure_stored().await?;
        let store = self.store().clone();
        let cwd = self.config().cwd.to_string_lossy().into_owned();
        let previous = session.to_string();
        let forked = blocking(move || store.fork(&session, at.as_ref(), Some(&cwd))).await?;
        let target = SessionTarget::Open(forked.id.clone());
        let claim = self.claim(&target, OpenAccess::Write).await?;
        self.leave_lease(None).await;
        self.teardown(ShutdownReason::Fork, Some(forked.id.to_string()))
            .await;
        self.load(target, claim, StartReason::Fork, Some(previous))
            .await?;
        Ok(())
    }

    /// Returns the user messages of the session with their entry ids, for `/fork` pickers
    /// (RPC `get_fork_messages`).
    pub async fn fork_messages(&self) -> Result<Vec<(EntryId, String)>, SessionError> {
        if !self.is_persisted().await {
            return Ok(Vec::new());
        }
        let session = self.session_id().await;
        let store = self.store().clone();
        let entries = blocking(move || store.entries(&session)).await?;
        Ok(entries
            .into_iter()
            .filter_map(|stored| {
                let EntryKind::Message(message @ AgentMessage::User(_)) = &stored.entry.kind else {
                    return None;
                };
                let text = user_text(message);
                (!text.is_empty()).then_some((stored.entry.id?, text))
            })
            .collect())
    }
}

/// `1 entry`, `3 entries`.
fn entries_text(count: usize) -> String {
    format!("{count} entr{}", if count == 1 { "y" } else { "ies" })
}

fn unreachable_continue() -> (Persistence, Option<crate::store::SessionContext>) {
    // `ContinueRecent` was resolved to `Open` or `New` above.
    (
        Persistence::Pending {
            header: SessionHeader::new(SessionId::new(""), String::new(), String::new(), None),
            entries: Vec::new(),
            leaf: None,
        },
        None,
    )
}

/// The transcript with its system messages replaced by one leading message holding `forced`
/// and the current tools.
fn force_prompt(messages: &[AgentMessage], forced: String, now_ms: i64) -> Vec<AgentMessage> {
    let current = crate::ai::transcript::get_current_system_message(messages);
    let head = SystemMessage {
        content: Some(UserContent::Text(forced)),
        tools_added: current
            .as_ref()
            .and_then(|system| system.tools_added.clone()),
        timestamp: current.as_ref().map_or(now_ms, |system| system.timestamp),
        key_order: SystemKeyOrder::ToolsThenTimestamp,
        ..SystemMessage::default()
    };
    let mut out = Vec::with_capacity(messages.len() + 1);
    out.push(AgentMessage::System(head));
    out.extend(
        messages
            .iter()
            .filter(|message| !matches!(message, AgentMessage::System(_)))
            .cloned(),
    );
    out
}

/// The loop's hooks for one run of a session.
struct RunHooks<'a> {
    session: &'a AgentSession,
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

// ----- RPC support -----
impl AgentSession {
    /// Sends a prompt like [`AgentSession::prompt`], calling `accepted` once the prompt is
    /// queued or about to run (RPC answers a `prompt` command at that point); a prompt refused
    /// before that point returns its error without calling `accepted`.
    pub async fn prompt_with_acceptance(
        &self,
        text: &str,
        options: PromptOptions,
        accepted: impl FnOnce() + Send + 'static,
    ) -> Result<(), SessionError> {
        self.prompt_inner(text, options, Some(Box::new(accepted)))
            .await
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

    /// Returns whether [`AgentSession::cycle_model`] cycles through the scoped models
    /// (`--models`, `enabledModels`) rather than every available model.
    pub fn cycles_scoped_models(&self) -> bool {
        let scope = self.state().scope.clone();
        scope.iter().any(|choice| {
            auth::has_configured_auth(
                &self.config().registry,
                &self.config().credentials,
                &choice.model,
            )
        })
    }

    /// Returns whether a compaction or branch summary is running.
    pub fn is_compacting(&self) -> bool {
        self.state().compaction_cancel.is_some()
    }

    /// Returns how many messages wait in the steering and follow-up queues.
    pub fn pending_message_count(&self) -> usize {
        let state = self.state();
        state.steering.texts.len() + state.follow_up.texts.len()
    }
}
