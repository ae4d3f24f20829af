//! What an [`AgentSession`](crate::session::AgentSession) is built from and opens:
//! [`SessionConfig`] (store, client, models, resources, tools, settings, extensions, trust),
//! the [`SessionTarget`] to start with, the startup [`ModelCandidates`], and the
//! [`OpenReport`] a mode shows afterwards.
//!
//! Invariant: plain values; nothing here runs or reads anything.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::ai::auth::Credentials;
use crate::ai::{AiClient, Model, ModelRegistry, ThinkingLevel};
use crate::model::ids::SessionId;
use crate::session::extensions::ExtensionsConfig;
use crate::session::resources::{HarnessDocs, Resources};
use crate::session::settings::{SessionSettings, SettingsReload, SettingsSink};
use crate::session::tools::ToolSet;
use crate::session::tools::shell::ShellConfig;
use crate::session::trust::ProjectTrust;
use crate::store::SessionStore;
use crate::support::clock::Clock;
use crate::support::ids::IdSource;

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

/// What opening a session found out, for the mode to show.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpenReport {
    /// Notices such as "Could not restore model …".
    pub notices: Vec<String>,
}
