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
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

mod compaction;

pub use compaction::{NavigateOptions, NavigateOutcome};

use crate::agent::tool::{BoxFuture, Tool};
use crate::agent::{self, AgentEvent, LoopHooks, RunConfig};
use crate::ai::auth::{self, Credentials};
use crate::ai::convert::{self, LlmMessage};
use crate::ai::models::{clamp_thinking_level, supported_thinking_levels};
use crate::ai::{AiClient, AiError, Model, ModelRegistry, StreamOptions, ThinkingLevel};
use crate::model::entry::{EntryKind, ModelRef, SessionHeader};
use crate::model::ids::{EntryId, SessionId};
use crate::model::message::{
    AgentMessage, AssistantMessage, BashExecutionMessage, ContentBlock, CustomMessage,
    ImageContent, StopReason, UserContent, UserMessage,
};
use crate::session::events::{NoticeLevel, SessionEvent};
use crate::session::persist::{Persistence, Writer, blocking};
use crate::session::resources::{HarnessDocs, Resources, ToolPromptInfo};
use crate::session::settings::{QueueMode, SessionSettings, SettingsSink};
use crate::session::tools::ToolSet;
use crate::session::tools::shell::ShellConfig;
use crate::session::tools::user_shell;
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
    /// The shell for `!cmd`.
    pub shell: ShellConfig,
    /// The working directory.
    pub cwd: PathBuf,
    /// Settings values.
    pub settings: SessionSettings,
    /// Where persisted settings go.
    pub settings_sink: Arc<dyn SettingsSink>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Randomness.
    pub ids: Arc<IdSource>,
    /// Startup model candidates.
    pub models: ModelCandidates,
    /// The local date for the system prompt.
    pub local_date: chrono::NaiveDate,
    /// Documentation paths for the system prompt.
    pub harness_docs: HarnessDocs,
    /// Whether `message_update` events carry the partial message (JSON/RPC).
    pub emit_partials: bool,
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
    /// A compaction or branch summary failed.
    #[error("{0}")]
    Compaction(String),
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
    overflow_recovery_attempted: bool,
    auto_retry: bool,
    auto_compaction: bool,
    name: Option<String>,
    scope: Vec<ModelChoice>,
}

struct Inner {
    config: SessionConfig,
    state: Mutex<State>,
    persistence: tokio::sync::Mutex<Persistence>,
    run_lock: tokio::sync::Mutex<()>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<SessionEvent>>>,
    writer: Writer,
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
    /// Opens (or starts) a session and restores its model and thinking level.
    pub async fn open(
        config: SessionConfig,
        target: SessionTarget,
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
            last_assistant: None,
            overflow_recovery_attempted: false,
            auto_retry: config.settings.retry.enabled,
            auto_compaction: config.settings.compaction.enabled,
            name: None,
            scope: config.models.scope.clone(),
        };
        let placeholder =
            SessionHeader::new(SessionId::new(""), String::new(), String::new(), None);
        let session = Self {
            inner: Arc::new(Inner {
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
            }),
        };
        let report = session.load(target, true).await?;
        Ok((session, report))
    }

    fn config(&self) -> &SessionConfig {
        &self.inner.config
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.inner.state)
    }

    /// Loads `target` into this handle (startup, `/new`, `/resume`, fork, clone).
    async fn load(&self, target: SessionTarget, startup: bool) -> Result<OpenReport, SessionError> {
        let config = self.config().clone();
        let store = config.store.clone();
        let cwd = config.cwd.to_string_lossy().into_owned();
        let target = match target {
            SessionTarget::ContinueRecent => {
                let store = store.clone();
                let cwd = cwd.clone();
                match blocking(move || store.most_recent(&cwd)).await? {
                    Some(id) => SessionTarget::Open(id),
                    None => SessionTarget::New {
                        parent_session: None,
                    },
                }
            }
            other => other,
        };
        let mut report = OpenReport::default();
        let (persistence, context) = match &target {
            SessionTarget::Open(id) => {
                let store_for_context = store.clone();
                let session_id = id.clone();
                let context = blocking(move || {
                    store_for_context.session(&session_id)?;
                    store_for_context.context(&session_id, &LeafSelector::Current)
                })
                .await?;
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
                    cwd.clone(),
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
        let system_prompt = {
            let state = self.state();
            self.build_system_prompt(&state.tools)
        };
        {
            let mut state = self.state();
            state.transcript = transcript;
            state.model = model.clone();
            state.thinking = thinking;
            state.system_prompt = system_prompt;
            state.name = name;
            state.steering = Queue::default();
            state.follow_up = Queue::default();
            state.pending_bash.clear();
            state.pending_next_turn.clear();
            state.retry_attempt = 0;
            state.last_assistant = None;
            state.overflow_recovery_attempted = false;
        }
        *self.inner.persistence.lock().await = persistence;

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
                Persistence::Pending { entries, .. } => entries.is_empty(),
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
        Ok(report)
    }

    fn build_system_prompt(&self, tools: &ToolSet) -> String {
        let infos = tool_prompt_infos(&tools.active_tools());
        let resources = lock(&self.config().resources);
        resources.system_prompt(
            &infos,
            self.config().local_date,
            &self.config().harness_docs,
        )
    }

    /// Subscribes to the session's events (every event, in order; never lossy).
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<SessionEvent> {
        let (sender, receiver) = mpsc::unbounded_channel();
        lock(&self.inner.subscribers).push(sender);
        receiver
    }

    fn emit(&self, event: SessionEvent) {
        let mut subscribers = lock(&self.inner.subscribers);
        subscribers.retain(|subscriber| subscriber.send(event.clone()).is_ok());
    }

    fn notice(&self, level: NoticeLevel, message: String) {
        self.emit(SessionEvent::Notice { level, message });
    }

    fn notice_error(&self, message: String) {
        self.notice(NoticeLevel::Error, message);
    }

    /// Appends an entry, reporting (not failing) when the store refuses it: the entry is kept
    /// in memory and retried with the next append.
    async fn persist(&self, kind: EntryKind) {
        let mut persistence = self.inner.persistence.lock().await;
        if let Err(error) = self.inner.writer.append(&mut persistence, kind).await {
            let unsaved = persistence.unsaved_kinds().len();
            drop(persistence);
            self.notice(
                NoticeLevel::Error,
                format!("could not save to the session database ({error}); {unsaved} entr{} kept in memory and retried with the next one", if unsaved == 1 { "y" } else { "ies" }),
            );
        }
    }

    /// Writes a pending session to the store now (before operations that read the tree).
    async fn ensure_stored(&self) -> Result<SessionId, SessionError> {
        let mut persistence = self.inner.persistence.lock().await;
        self.inner.writer.materialize(&mut persistence).await?;
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

    /// Returns the store.
    pub fn store(&self) -> &SessionStore {
        &self.config().store
    }

    /// Returns the working directory.
    pub fn cwd(&self) -> &std::path::Path {
        &self.config().cwd
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

    /// Returns transcript statistics.
    pub fn stats(&self) -> SessionStats {
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
                AgentMessage::ToolResult(_) => stats.tool_results += 1,
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

    /// Sends a prompt through the pipeline (expansion, queueing while streaming, model check,
    /// run, auto-retry) and returns when the agent is idle again.
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
        let expanded = if options.no_expansion {
            text.to_owned()
        } else {
            self.expand(text)?
        };
        if self.is_streaming() {
            let Some(behavior) = options.streaming_behavior else {
                return Err(SessionError::Busy);
            };
            self.enqueue(behavior, expanded, options.images);
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
        let mut content = vec![ContentBlock::text(expanded)];
        content.extend(options.images.into_iter().map(ContentBlock::Image));
        let mut messages = vec![AgentMessage::User(UserMessage {
            content: UserContent::Blocks(content),
            timestamp: self.config().clock.now_ms(),
            extra: Map::new(),
        })];
        messages.append(&mut self.state().pending_next_turn);
        if let Some(accepted) = accepted {
            // Streaming from here on, so a command handled after the acceptance sees the run.
            self.state().streaming = true;
            accepted();
        }
        self.run_agent(Some(messages)).await;
        Ok(())
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

    /// Queues a steering message (delivered after the current tool calls).
    pub fn steer(&self, text: &str) -> Result<(), SessionError> {
        let expanded = self.expand(text)?;
        self.enqueue(StreamingBehavior::Steer, expanded, Vec::new());
        Ok(())
    }

    /// Queues a follow-up message (delivered when the agent would stop).
    pub fn follow_up(&self, text: &str) -> Result<(), SessionError> {
        let expanded = self.expand(text)?;
        self.enqueue(StreamingBehavior::FollowUp, expanded, Vec::new());
        Ok(())
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
                    system_prompt: state.system_prompt.clone(),
                    tools: state.tools.active_tools(),
                    cwd: self.config().cwd.clone(),
                    clock: self.config().clock.clone(),
                    emit_partials: self.config().emit_partials,
                };
                (config, state.transcript.clone(), cancel)
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
            (state.auto_retry, self.config().settings.retry.max_retries)
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
        let base = self.config().settings.retry.base_delay_ms;
        let delay_ms = base.saturating_mul(1u64 << (attempt - 1).min(30));
        self.emit(SessionEvent::AutoRetryStart {
            attempt,
            max_attempts: max,
            delay_ms,
            error_message: last
                .error_message
                .clone()
                .unwrap_or_else(|| "Unknown error".to_owned()),
        });
        let cancel = CancellationToken::new();
        {
            let mut state = self.state();
            // The failed message leaves the transcript (it stays in the store).
            if matches!(state.transcript.last(), Some(AgentMessage::Assistant(_))) {
                state.transcript.pop();
            }
            state.retry_cancel = Some(cancel.clone());
        }
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

    async fn flush_pending_bash(&self) {
        let pending = std::mem::take(&mut self.state().pending_bash);
        for message in pending {
            let message = AgentMessage::BashExecution(message);
            self.state().transcript.push(message.clone());
            self.persist(EntryKind::Message(message)).await;
        }
    }

    /// Handles one agent event: transcript, persistence on `message_end`, queues, fan-out.
    async fn on_agent_event(&self, event: AgentEvent) {
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
                    AgentMessage::User(_)
                    | AgentMessage::Assistant(_)
                    | AgentMessage::ToolResult(_) => Some(EntryKind::Message(message.clone())),
                    _ => None,
                };
                self.state().transcript.push(message.clone());
                if let Some(kind) = kind {
                    self.persist(kind).await;
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
        let settings = &self.config().settings;
        let mut headers = auth::attribution_headers(model, settings.telemetry);
        let mut options = StreamOptions::new(auth);
        headers.append(&mut options.headers);
        options.headers = headers;
        options.thinking = self.thinking_level();
        options.thinking_budgets = settings.thinking_budgets;
        options.cache_retention = settings.cache_retention;
        options.transport = settings.transport;
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
        self.apply_model(model, None).await;
        Ok(())
    }

    async fn apply_model(&self, model: Model, explicit_level: Option<ThinkingLevel>) {
        let level = explicit_level.unwrap_or_else(|| self.level_for_model_switch());
        self.state().model = Some(model.clone());
        self.persist(EntryKind::ModelChange(ModelRef {
            provider: model.provider.clone(),
            model_id: model.id.clone(),
        }))
        .await;
        self.config()
            .settings_sink
            .set_default_model(&model.provider, &model.id);
        self.set_thinking_level(level).await;
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
        self.apply_model(choice.model.clone(), choice.thinking)
            .await;
        Some(choice.model)
    }

    /// Sets the thinking level (clamped to the model); a real change appends an entry, saves
    /// the default and emits `thinking_level_changed`.
    pub async fn set_thinking_level(&self, level: ThinkingLevel) {
        let (effective, changed, reasons) = {
            let mut state = self.state();
            let effective = match &state.model {
                Some(model) => clamp_thinking_level(model, level),
                None => ThinkingLevel::Off,
            };
            let changed = effective != state.thinking;
            state.thinking = effective;
            (
                effective,
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
        let mut state = self.state();
        state.tools.set_active(names);
        let tools = state.tools.clone();
        drop(state);
        let prompt = self.build_system_prompt(&tools);
        self.state().system_prompt = prompt;
    }

    /// Reloads skills, templates and context files and rebuilds the system prompt.
    pub fn reload_resources(&self) {
        lock(&self.config().resources).reload();
        let tools = self.state().tools.clone();
        let prompt = self.build_system_prompt(&tools);
        self.state().system_prompt = prompt;
    }

    // ----- names, labels, custom entries ------------------------------------------------------

    /// Names the session (appends `session_info`, trimmed; empty names are refused).
    pub async fn set_session_name(&self, name: &str) -> Result<(), SessionError> {
        let name = name.trim();
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
        let agent_message = AgentMessage::Custom(message.clone());
        if self.is_streaming() {
            let mut state = self.state();
            state.steering.messages.push_back(agent_message);
            return;
        }
        if trigger_turn {
            let _run = self.inner.run_lock.lock().await;
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
    /// message (queued until the run ends when streaming) and returns it.
    pub async fn execute_bash(
        &self,
        command: &str,
        exclude_from_context: bool,
        on_chunk: Option<OutputSink>,
    ) -> Result<BashExecutionMessage, SessionError> {
        let cancel = CancellationToken::new();
        self.state().bash_cancel = Some(cancel.clone());
        let result = user_shell::run_user_shell(
            &self.config().shell,
            command,
            &self.config().cwd,
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
        if self.is_streaming() {
            self.state().pending_bash.push(message.clone());
        } else {
            self.state()
                .transcript
                .push(AgentMessage::BashExecution(message.clone()));
            self.persist(EntryKind::Message(AgentMessage::BashExecution(
                message.clone(),
            )))
            .await;
        }
        Ok(message)
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

    /// Starts a new session (`/new`, RPC `new_session`).
    pub async fn new_session(
        &self,
        parent_session: Option<String>,
    ) -> Result<OpenReport, SessionError> {
        self.load(SessionTarget::New { parent_session }, false)
            .await
    }

    /// Switches to another stored session (`/resume`, RPC `switch_session`).
    pub async fn switch_session(&self, id: SessionId) -> Result<OpenReport, SessionError> {
        self.load(SessionTarget::Open(id), false).await
    }

    /// Forks before a user message (the path up to its parent goes to a new session; returns
    /// the message text for the editor) — the reference's `/fork`.
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
        let text = user_text(message);
        self.branch_into_new_session(found.entry.parent_id.clone())
            .await?;
        Ok(Some(text))
    }

    /// Copies the path root → leaf into a new session (the reference's `/clone`).
    pub async fn clone_session(&self) -> Result<(), SessionError> {
        let session = self.ensure_stored().await?;
        let store = self.store().clone();
        let leaf = blocking(move || store.leaf(&session)).await?;
        self.branch_into_new_session(leaf.and_then(|stored| stored.entry.id))
            .await
    }

    async fn branch_into_new_session(&self, at: Option<EntryId>) -> Result<(), SessionError> {
        let session = self.ensure_stored().await?;
        let store = self.store().clone();
        let cwd = self.config().cwd.to_string_lossy().into_owned();
        let forked = blocking(move || store.fork(&session, at.as_ref(), Some(&cwd))).await?;
        self.load(SessionTarget::Open(forked.id), false).await?;
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
        if self.session.config().settings.block_images {
            convert::block_images(converted)
        } else {
            converted
        }
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
    /// and templates are expanded as for a prompt.
    pub fn queue_message(
        &self,
        behavior: StreamingBehavior,
        text: &str,
        images: Vec<ImageContent>,
    ) -> Result<(), SessionError> {
        let expanded = self.expand(text)?;
        self.enqueue(behavior, expanded, images);
        Ok(())
    }

    /// Waits until no run is in progress (prompts already waiting to run included).
    pub async fn wait_for_idle(&self) {
        drop(self.inner.run_lock.lock().await);
    }

    /// Returns the id of the leaf entry (`None` before the first entry).
    pub async fn leaf_id(&self) -> Result<Option<EntryId>, SessionError> {
        let session = {
            let persistence = self.inner.persistence.lock().await;
            match &*persistence {
                Persistence::Pending { leaf, .. } => return Ok(leaf.clone()),
                Persistence::Stored { id, .. } => id.clone(),
            }
        };
        let store = self.store().clone();
        let leaf = blocking(move || store.leaf(&session)).await?;
        Ok(leaf.and_then(|stored| stored.entry.id))
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
