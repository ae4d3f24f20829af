//! The tool loadout and the system prompt it gives: the active tools (set by the user, by
//! extensions, or restored from the branch's system messages), the prompt sections built for
//! them from the resources, the patch that brings a transcript's replayed sections up to date
//! before a request, and the prompt a `before_agent_start` handler forces for one run.
//!
//! Invariant: the persisted system messages, replayed, always give what the request carried
//! (the session patches them here; the loop declares tool changes on them).

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use crate::agent::tool::Tool;
use crate::model::message::{AgentMessage, SystemKeyOrder, SystemMessage, UserContent};
use crate::session::agent_session::state::{AgentSession, lock};
use crate::session::extensions::context::ToolInfo;
use crate::session::persist::{Persistence, blocking};
use crate::session::resources::{Resources, ToolPromptInfo};
use crate::session::tools::ToolSet;
use crate::store::LeafSelector;

fn tool_prompt_infos(tools: &[Arc<dyn Tool>]) -> Vec<ToolPromptInfo> {
    tools
        .iter()
        .map(|tool| ToolPromptInfo::of_definition(tool.definition()))
        .collect()
}

/// The transcript with its system messages replaced by one leading message holding `forced`
/// and the current tools.
pub(super) fn force_prompt(
    messages: &[AgentMessage],
    forced: String,
    now_ms: i64,
) -> Vec<AgentMessage> {
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

impl AgentSession {
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
    pub(super) async fn restore_tools_from_transcript(&self) {
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

    /// The prompt sections for these tools' active set.
    pub(super) fn build_prompt_sections(&self, tools: &ToolSet) -> Map<String, Value> {
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
    pub(super) fn prompt_patch(&self, transcript: &[AgentMessage]) -> Option<AgentMessage> {
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

    /// Returns the current system prompt.
    pub fn system_prompt(&self) -> String {
        self.state().system_prompt.clone()
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

    /// Returns the active tool names.
    pub fn active_tool_names(&self) -> Vec<String> {
        self.state().tools.active_names().to_vec()
    }

    /// Sets the active tools (unknown names are ignored) and rebuilds the system prompt.
    pub fn set_active_tools(&self, names: &[String]) {
        self.state().tools.set_active(names);
        self.rebuild_system_prompt();
    }

    /// Returns the resources (skills, templates) for completion and `/reload`.
    pub fn resources(&self) -> Arc<Mutex<Resources>> {
        self.config().resources.clone()
    }
}
