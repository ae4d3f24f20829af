//! Opening and loading a session runtime: [`AgentSession::open`] builds the handle and loads
//! the target; `load` (startup, `/new`, `/resume`, fork, clone) restores the transcript,
//! model and thinking level from the store, starts a fresh set of extensions, and writes the
//! entries a load writes (a first `model_change` and `thinking_level_change`, `--name`'s
//! `session_info`); `/reload` restarts the extensions and re-reads the resources.
//!
//! Invariant: `load` gets a resolved target (never `ContinueRecent`) whose lease the caller
//! claimed before it left the previous session.

use std::sync::{Arc, Mutex, Weak};

use serde_json::Map;

use crate::ai::ThinkingLevel;
use crate::model::entry::{EntryKind, ModelRef, SessionHeader};
use crate::model::ids::SessionId;
use crate::session::agent_session::config::{OpenReport, SessionConfig, SessionTarget};
use crate::session::agent_session::error::SessionError;
use crate::session::agent_session::lease::{Claim, OpenAccess};
use crate::session::agent_session::state::{
    AgentSession, Background, Backlog, Inner, LeaseState, Queue, State, WeakSession, lock,
};
use crate::session::extensions::event::{ExtensionEvent, ShutdownReason, StartReason};
use crate::session::extensions::{ExtensionBus, ExtensionContext};
use crate::session::persist::{Persistence, Writer, blocking};
use crate::store::LeafSelector;

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
                Arc::new(WeakSession(weak.clone())),
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
                lease: Mutex::new(LeaseState::Unleased),
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

    /// Loads `target` into this handle (startup, `/new`, `/resume`, fork, clone): starts a
    /// fresh set of extensions, restores the transcript, model and thinking level, and emits
    /// `session_start` and `resources_discover` to the new extensions.
    ///
    /// `target` is resolved (never `ContinueRecent`) and `claim` is its lease, claimed by the
    /// caller before it left the previous session.
    pub(super) async fn load(
        &self,
        target: SessionTarget,
        claim: Claim,
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

        let (model, thinking) =
            Self::startup_model(&config, context.as_ref(), has_messages, &mut report);
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
