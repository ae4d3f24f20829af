//! The session's extension hook points: starting a runtime's extensions (their tools
//! installed) and stopping them, the current bus, passing agent events on (with the turn
//! count extensions see), and the `session_*` events (switch, fork, tree, compaction) — so
//! the other files keep only the call sites.
//!
//! Invariant: every hook is skipped (and builds no event) when no extension handles it.

use std::sync::Arc;

use serde_json::Value;

use crate::agent::AgentEvent;
use crate::model::ids::EntryId;
use crate::session::agent_session::error::SessionError;
use crate::session::agent_session::state::{AgentSession, lock};
use crate::session::events::SessionEvent;
use crate::session::extensions::error::ExtensionErrorReport;
use crate::session::extensions::event::{
    ExtensionEvent, ShutdownReason, StartReason, TreePreparation, TurnStamp,
};
use crate::session::extensions::result::{CompactionOverride, ResourcePaths, SessionBeforeResult};
use crate::session::extensions::{self, ExtensionBus, ExtensionContext, RegisteredCommand};
use crate::session::persist::blocking;
use crate::store::StoredEntry;

impl AgentSession {
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

    /// Registers tools that became available while the session runs (an MCP server connected
    /// by `/mcp reconnect` or `/mcp enable`): a tool of the same name is replaced in place, new
    /// ones become active. They last until the tool registry is rebuilt (`/reload`).
    pub fn add_tools(&self, tools: Vec<Arc<dyn crate::agent::tool::Tool>>) {
        let mut state = self.state();
        let updated = state.tools.with_custom(tools);
        state.tools = updated;
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

    /// Starts the configured extensions for a new session runtime and registers their tools.
    pub(crate) async fn start_extensions(&self) -> Arc<ExtensionBus> {
        let config = self.config();
        let cwd = self.cwd();
        let ctx = ExtensionContext::attached(
            Arc::new(self.downgrade()),
            config.extensions.ui.clone(),
            cwd.clone(),
            config.extensions.env.clone(),
        );
        let loaded = extensions::load(&self.extensions_config(), &ctx, &cwd).await;
        let bus = Arc::new(ExtensionBus::new(loaded, ctx, config.extensions.timeout));
        self.install_extensions(bus.clone());
        bus
    }

    /// `resources_discover`: loads the skill and prompt paths extensions contribute (and
    /// drops those of a previous runtime).
    pub(crate) async fn discover_resources(&self, bus: &ExtensionBus, reason: StartReason) {
        let paths = if bus.has_handlers("resources_discover") {
            let cwd = self.cwd().to_string_lossy().into_owned();
            let kind = if reason == StartReason::Reload {
                "reload"
            } else {
                "startup"
            };
            bus.emit_resources_discover(&cwd, kind).await
        } else {
            ResourcePaths::default()
        };
        let changed = match self.config().resources.lock() {
            Ok(mut resources) => {
                resources.set_extension_paths(paths.skill_paths, paths.prompt_paths)
            }
            Err(poisoned) => poisoned
                .into_inner()
                .set_extension_paths(paths.skill_paths, paths.prompt_paths),
        };
        if changed {
            self.rebuild_system_prompt();
        }
    }

    /// Emits `session_shutdown` to the current extensions and stops them.
    pub(crate) async fn teardown(&self, reason: ShutdownReason, target_session: Option<String>) {
        let bus = self.bus();
        if bus.has_handlers("session_shutdown") {
            bus.emit(&ExtensionEvent::SessionShutdown {
                reason,
                target_session,
            })
            .await;
        }
        bus.stop_all().await;
    }

    /// Ends the session runtime: `session_shutdown` (reason `quit`) to the extensions, which
    /// are then stopped; entries still unsaved are written if the store takes them and the
    /// writer lease is released. Modes call it once before exiting.
    pub async fn shutdown(&self) {
        self.teardown(ShutdownReason::Quit, None).await;
        self.release_at_exit().await;
    }

    /// Reports an extension failure as an `extension_error` event.
    pub fn report_extension_error(&self, report: ExtensionErrorReport) {
        self.emit(SessionEvent::ExtensionError {
            extension_path: report.extension_path,
            event: report.event,
            error: report.error,
        });
    }

    /// Returns the commands extensions registered (for completion and RPC `get_commands`).
    pub fn extension_commands(&self) -> Vec<RegisteredCommand> {
        self.bus().commands()
    }

    /// Delivers an agent event to the extensions (before listeners and persistence, as the
    /// reference does), counting turns as they see them; `message_end` went to them already,
    /// through `finalize_message`.
    pub(crate) async fn deliver_agent_event(&self, event: &AgentEvent) {
        let bus = self.bus();
        let name = event.kind();
        let wanted = name != "message_end" && bus.has_handlers(name);
        let turn_index = match event {
            AgentEvent::AgentStart => {
                self.start_turn_count();
                0
            }
            AgentEvent::TurnStart => self.turn_index(),
            AgentEvent::TurnEnd { .. } => self.end_turn(),
            AgentEvent::AgentEnd { .. }
            | AgentEvent::MessageStart { .. }
            | AgentEvent::MessageUpdate { .. }
            | AgentEvent::MessageEnd { .. }
            | AgentEvent::ToolExecutionStart { .. }
            | AgentEvent::ToolExecutionUpdate { .. }
            | AgentEvent::ToolExecutionEnd { .. } => 0,
        };
        if !wanted {
            return;
        }
        // Only `turn_start` carries a time (the clock is read for nothing else).
        let timestamp = if matches!(event, AgentEvent::TurnStart) {
            self.now_ms()
        } else {
            0
        };
        bus.emit(&ExtensionEvent::Agent {
            event: Box::new(event.clone()),
            turn: TurnStamp {
                turn_index,
                timestamp,
            },
        })
        .await;
    }

    /// `session_before_tree`: asks the extensions before the leaf moves.
    /// `Err(Cancelled)` when one cancels (nothing may change); otherwise what they returned
    /// (a `summary` to store instead of generating one — honoured only when the user wants a
    /// summary —, instructions and a `label`).
    pub async fn extensions_before_tree(
        &self,
        preparation: &TreePreparation<'_>,
    ) -> Result<Option<SessionBeforeResult>, SessionError> {
        let bus = self.bus();
        if !bus.has_handlers("session_before_tree") {
            return Ok(None);
        }
        let result = bus
            .emit_session_before(&ExtensionEvent::SessionBeforeTree {
                preparation: preparation.to_json(),
            })
            .await;
        match result {
            Some(result) if result.cancel => Err(SessionError::Cancelled),
            other => Ok(other),
        }
    }

    /// `session_tree`: tells the extensions the leaf moved (with the branch summary entry
    /// stored for the move, if any, and whether an extension supplied it).
    pub async fn extensions_tree_moved(
        &self,
        old_leaf: Option<&EntryId>,
        summary_entry: Option<Value>,
        from_extension: Option<bool>,
    ) -> Result<(), SessionError> {
        let bus = self.bus();
        if !bus.has_handlers("session_tree") {
            return Ok(());
        }
        let new_leaf = self.leaf_id().await?;
        bus.emit(&ExtensionEvent::SessionTree {
            new_leaf_id: new_leaf.map(|id| id.to_string()),
            old_leaf_id: old_leaf.map(ToString::to_string),
            summary_entry,
            from_extension,
        })
        .await;
        Ok(())
    }

    /// `session_before_compact`: asks the extensions before a compaction is summarised.
    /// `Err(Cancelled)` when one cancels (no compaction entry may be written); `Ok(Some(_))`
    /// when one supplies the summary (store [`CompactionOverride::to_entry`]
    /// instead of generating one).
    pub async fn extensions_before_compact(
        &self,
        preparation: &crate::session::compaction::CompactionPreparation<'_>,
        branch_entries: &[StoredEntry],
        custom_instructions: Option<&str>,
    ) -> Result<Option<CompactionOverride>, SessionError> {
        let bus = self.bus();
        if !bus.has_handlers("session_before_compact") {
            return Ok(None);
        }
        let event = ExtensionEvent::SessionBeforeCompact {
            preparation: extensions::event::compaction_preparation_json(preparation),
            branch_entries: branch_entries
                .iter()
                .filter_map(|stored| crate::support::json::parse_lenient(&stored.payload).ok())
                .collect(),
            custom_instructions: custom_instructions.map(str::to_owned),
        };
        match bus.emit_session_before(&event).await {
            Some(result) if result.cancel => Err(SessionError::Cancelled),
            Some(result) => Ok(result.compaction),
            None => Ok(None),
        }
    }

    /// `session_compact` for the compaction entry just appended (the leaf).
    pub(crate) async fn extensions_compacted_at_leaf(&self, from_extension: bool) {
        if !self.bus().has_handlers("session_compact") {
            return;
        }
        let session = self.session_id().await;
        let store = self.store().clone();
        if let Ok(Some(leaf)) = blocking(move || store.leaf(&session)).await {
            self.extensions_compacted(&leaf, from_extension).await;
        }
    }

    /// `session_compact`: tells the extensions about the stored compaction entry.
    pub async fn extensions_compacted(&self, compaction_entry: &StoredEntry, from_extension: bool) {
        let bus = self.bus();
        if !bus.has_handlers("session_compact") {
            return;
        }
        let entry =
            crate::support::json::parse_lenient(&compaction_entry.payload).unwrap_or(Value::Null);
        bus.emit(&ExtensionEvent::SessionCompact {
            compaction_entry: entry,
            from_extension,
        })
        .await;
    }

    /// Asks the extensions whether a switch may happen (`session_before_switch`).
    pub(crate) async fn allow_switch(
        &self,
        reason: &'static str,
        target_session: Option<String>,
    ) -> Result<(), SessionError> {
        let bus = self.bus();
        if !bus.has_handlers("session_before_switch") {
            return Ok(());
        }
        let result = bus
            .emit_session_before(&ExtensionEvent::SessionBeforeSwitch {
                reason,
                target_session,
            })
            .await;
        if result.is_some_and(|result| result.cancel) {
            return Err(SessionError::Cancelled);
        }
        Ok(())
    }

    /// Asks the extensions whether a fork may happen (`session_before_fork`).
    pub(crate) async fn allow_fork(
        &self,
        entry_id: &str,
        position: &'static str,
    ) -> Result<(), SessionError> {
        let bus = self.bus();
        if !bus.has_handlers("session_before_fork") {
            return Ok(());
        }
        let result = bus
            .emit_session_before(&ExtensionEvent::SessionBeforeFork {
                entry_id: entry_id.to_owned(),
                position,
            })
            .await;
        if result.is_some_and(|result| result.cancel) {
            return Err(SessionError::Cancelled);
        }
        Ok(())
    }
}
