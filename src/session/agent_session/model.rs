//! Model and thinking level: the startup choice (spec models-providers-settings §6.6, §6.7:
//! explicit, the scope's, the session's own, the fallback; the level explicit, restored,
//! default, clamped to the model), changes as `model_change` and `thinking_level_change`
//! entries with the defaults saved and the extensions told (`model_select`,
//! `thinking_level_select`), cycling through the scope, and recording the live level when a
//! run starts.
//!
//! Invariant: the thinking level is always one the current model supports.

use std::sync::Arc;

use serde_json::Value;

use crate::ai::models::{clamp_thinking_level, supported_thinking_levels};
use crate::ai::{Model, ModelRegistry, ThinkingLevel};
use crate::ai::{auth, availability};
use crate::model::entry::{EntryKind, ModelRef};
use crate::session::agent_session::config::{ModelChoice, OpenReport, SessionConfig};
use crate::session::agent_session::error::SessionError;
use crate::session::agent_session::state::AgentSession;
use crate::session::events::SessionEvent;
use crate::session::extensions::event::ExtensionEvent;
use crate::session::persist::{Persistence, blocking};
use crate::store::SessionContext;

impl AgentSession {
    /// The model and thinking level a loaded session starts with (spec
    /// models-providers-settings §6.6, §6.7); a stored model that is gone or has no key is
    /// named in `report`.
    pub(super) fn startup_model(
        config: &SessionConfig,
        context: Option<&SessionContext>,
        has_messages: bool,
        report: &mut OpenReport,
    ) -> (Option<Model>, ThinkingLevel) {
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
        } else if has_messages && let Some(stored) = context.and_then(|context| context.model_ref())
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
        (model, thinking)
    }

    /// Returns the current model.
    pub fn model(&self) -> Option<Model> {
        self.state().model.clone()
    }

    /// Returns the thinking level.
    pub fn thinking_level(&self) -> ThinkingLevel {
        self.state().thinking
    }

    /// Returns the registry.
    pub fn registry(&self) -> &Arc<ModelRegistry> {
        &self.config().registry
    }

    /// Returns the models with a configured key, in registry order.
    pub fn available_models(&self) -> Vec<Model> {
        auth::available_models(&self.config().registry, &self.config().credentials)
            .into_iter()
            .cloned()
            .collect()
    }

    /// Returns every model of the registry with why it cannot be used here (`None`: it can),
    /// in registry order ([`availability::classify`]).
    pub fn classified_models(&self) -> Vec<(Model, Option<availability::Unusable>)> {
        availability::classify(&self.config().registry, &self.config().credentials)
            .into_iter()
            .map(|(model, reason)| (model.clone(), reason))
            .collect()
    }

    /// Returns the thinking levels the current model supports.
    pub fn available_thinking_levels(&self) -> Vec<ThinkingLevel> {
        match &self.state().model {
            Some(model) => supported_thinking_levels(model),
            None => ThinkingLevel::ALL.to_vec(),
        }
    }

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

    /// Switches to `model`: a `model_change` entry, the default saved, the thinking level set
    /// again (`explicit_level`, else the switch rule), `model_select` when it changed.
    pub(super) async fn apply_model(
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

    /// The level a model switch asks for (1.6.0): the `defaultThinkingLevel` setting, else
    /// the current level (a switch from a non-reasoning model keeps its `off`); the new
    /// model's levels then clamp it.
    pub(super) fn level_for_model_switch(&self) -> ThinkingLevel {
        self.config()
            .settings
            .default_thinking
            .unwrap_or_else(|| self.state().thinking)
    }

    /// Cycles through the scoped models (or every available model), as 1.6.0 does; returns the
    /// new model, or `None` when there is nothing to cycle to.
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
        // 1.6.0's `getNextCycleIndex`: a current model outside the list goes to its first
        // (forward) or last model, even a list of one; else the next one, none in a list of one.
        let len = candidates.len();
        let index = current.as_ref().and_then(|current| {
            candidates.iter().position(|choice| {
                choice.model.provider == current.provider && choice.model.id == current.id
            })
        });
        let next = match index {
            _ if len == 0 => return None,
            None if forward => 0,
            None => len - 1,
            Some(_) if len == 1 => return None,
            Some(index) if forward => (index + 1) % len,
            Some(index) => (index + len - 1) % len,
        };
        let choice = candidates[next].clone();
        self.apply_model(choice.model.clone(), choice.thinking, "cycle")
            .await;
        Some(choice.model)
    }

    /// The scoped models (`--models`, `enabledModels`, `/scoped-models`), in cycling order.
    pub fn model_scope(&self) -> Vec<ModelChoice> {
        self.state().scope.clone()
    }

    /// Replaces the scoped models (`/scoped-models`); empty: cycling goes through every
    /// available model.
    pub fn set_model_scope(&self, scope: Vec<ModelChoice>) {
        self.state().scope = scope;
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

    /// Records the live thinking level on the branch when the branch's latest
    /// `thinking_level_change` (clamped to the model) says another one, so that a resume
    /// restores the level the run used: `-c --thinking high` on a `medium` session (1.6.0
    /// `_recordThinkingLevel`, when a run starts).
    pub(super) async fn record_thinking_level(&self) {
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
}
