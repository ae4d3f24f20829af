//! The built-in tools (`read`, `bash`, `edit`, `write`, `grep`, `find`, `ls`; `spec/tools.md`)
//! and the registry that decides which tools exist and which are active (§1.1–1.2).
//!
//! * [`builtin_tools`] instantiates the seven built-ins from a [`ToolsConfig`] (workspace/home,
//!   `images.autoResize`, shell settings and environment).
//! * [`ToolSelection::from_flags`] maps `--tools a,b`, `--no-tools`, `--no-builtin-tools`
//!   (precedence: `--tools` > `--no-tools` > `--no-builtin-tools`).
//! * [`ToolSet`] is the registry after the allowlist, plus the active list: by default `read`,
//!   `bash`, `edit`, `write` and then every custom tool in registration order (`grep`, `find`,
//!   `ls` are registered but inactive); a custom tool named like a built-in replaces it in
//!   place. [`ToolSet::set_active`] ignores unknown names; with an allowlist, unlisted tools can
//!   never become active.
//! * `builtin` is what every built-in shares: the `Tool` implementation around a tool's typed
//!   arguments and `run`, and the notices and details of a listing's result.
//! * `user_shell` runs `!cmd`/`!!cmd` and builds the `bashExecution` message.
//!
//! Invariants: tools never print and never read the environment — everything arrives through
//! [`ToolsConfig`] and [`crate::agent::tool::ToolContext`]; every failure the model can act on is
//! an `isError` result, never a panic.

pub mod bash;
pub mod builtin;
pub mod edit;
pub mod edit_diff;
pub mod find;
pub mod grep;
pub mod image;
pub mod ls;
pub mod mutation;
pub mod output;
pub mod read;
pub mod shell;
pub mod user_shell;
pub mod workspace;
pub mod write;

use std::collections::HashSet;
use std::sync::Arc;

use crate::agent::tool::Tool;
use crate::model::message::ToolDeclaration;
use crate::session::tools::bash::BashTool;
use crate::session::tools::edit::EditTool;
use crate::session::tools::find::FindTool;
use crate::session::tools::grep::GrepTool;
use crate::session::tools::ls::LsTool;
use crate::session::tools::read::{ReadConfig, ReadTool};
use crate::session::tools::shell::ShellConfig;
use crate::session::tools::workspace::Workspace;
use crate::session::tools::write::WriteTool;

/// The built-in tool names in registry order.
pub const BUILTIN_TOOL_NAMES: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];

/// The built-ins active when no flag says otherwise.
pub const DEFAULT_ACTIVE_TOOL_NAMES: [&str; 4] = ["read", "bash", "edit", "write"];

/// Settings the built-in tools are constructed with.
#[derive(Clone, Debug)]
pub struct ToolsConfig {
    /// Path resolution (home directory for `~`).
    pub workspace: Workspace,
    /// `read` settings.
    pub read: ReadConfig,
    /// `bash` settings and environment.
    pub shell: ShellConfig,
}

/// Returns the seven built-in tools in registry order.
pub fn builtin_tools(config: &ToolsConfig) -> Vec<Arc<dyn Tool>> {
    let workspace = config.workspace.clone();
    vec![
        Arc::new(ReadTool::new(workspace.clone(), config.read.clone())),
        Arc::new(BashTool::new(config.shell.clone())),
        Arc::new(EditTool::new(workspace.clone())),
        Arc::new(WriteTool::new(workspace.clone())),
        Arc::new(GrepTool::new(workspace.clone())),
        Arc::new(FindTool::new(workspace.clone())),
        Arc::new(LsTool::new(workspace)),
    ]
}

/// Which tools a session starts with, from the CLI flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolSelection {
    /// No flag: all tools registered, `read bash edit write` + custom tools active.
    Default,
    /// `--tools a,b,g*`: only the listed tools (names, `*` patterns) exist; the named ones are
    /// active in list order, then every other allowed tool in registry order.
    Allowlist(Vec<String>),
    /// `--tools +ls,-write` (only `+name`/`-name` entries): everything registered; `selected`
    /// (the default tools changed by `entries` in order) + custom tools active (1.6.0). A
    /// loadout restored from the transcript gets `entries` applied too.
    Modifiers {
        /// The `+name`/`-name` entries as given.
        entries: Vec<String>,
        /// The tools they select.
        selected: Vec<String>,
    },
    /// `--no-builtin-tools`: everything registered, only custom tools active.
    NoBuiltin,
    /// `--no-tools`: nothing registered.
    NoTools,
}

impl ToolSelection {
    /// Maps the flags as 1.6.0's `createAgentSession` does: `--tools` wins over `--no-tools`,
    /// which wins over `--no-builtin-tools`; a list of only `+name`/`-name` entries changes
    /// the default tools (none with `--no-tools` or `--no-builtin-tools`, and with `--no-tools`
    /// the result is also the allowlist).
    pub fn from_flags(tools: Option<&str>, no_tools: bool, no_builtin_tools: bool) -> Self {
        match tools.map(parse_tools_flag) {
            Some(list) if list.iter().any(|entry| is_tool_modifier(entry)) => {
                let base: Vec<String> = if no_tools || no_builtin_tools {
                    Vec::new()
                } else {
                    DEFAULT_ACTIVE_TOOL_NAMES
                        .iter()
                        .map(|name| (*name).to_owned())
                        .collect()
                };
                let selected = apply_tool_modifiers(&base, &list);
                if no_tools {
                    Self::Allowlist(selected)
                } else {
                    Self::Modifiers {
                        entries: list,
                        selected,
                    }
                }
            }
            Some(list) => Self::Allowlist(list),
            None if no_tools => Self::NoTools,
            None if no_builtin_tools => Self::NoBuiltin,
            None => Self::Default,
        }
    }

    /// True when the tools a session's transcript declares are restored on load (1.6.0
    /// `usesDefaultTools`: no `--tools`, or only modifiers, and no `--no-tools`).
    pub fn restores_transcript_tools(&self) -> bool {
        matches!(self, Self::Default | Self::Modifiers { .. })
    }

    /// The `+name`/`-name` entries to apply to a restored loadout.
    pub fn modifiers(&self) -> &[String] {
        match self {
            Self::Modifiers { entries, .. } => entries,
            _ => &[],
        }
    }
}

/// Whether a tool list entry is a `+name` or `-name` modifier (1.6.0 `isToolModifier`).
pub fn is_tool_modifier(entry: &str) -> bool {
    entry.starts_with('+') || entry.starts_with('-')
}

/// Applies the `+name` (add, at the end, if absent) and `-name` (remove) entries of
/// `entries` to `base` in order; other entries are ignored (1.6.0 `applyToolModifiers`).
pub fn apply_tool_modifiers(base: &[String], entries: &[String]) -> Vec<String> {
    let mut tools = base.to_vec();
    for entry in entries {
        let Some(name) = entry.strip_prefix('+') else {
            if let Some(name) = entry.strip_prefix('-') {
                tools.retain(|tool| tool != name);
            }
            continue;
        };
        if !name.is_empty() && !tools.iter().any(|tool| tool == name) {
            tools.push(name.to_owned());
        }
    }
    tools
}

/// Tool names and `*` patterns (1.6.0 `createToolNameMatcher`: a pattern matches the whole
/// name, `*` any run of characters).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolMatcher {
    names: HashSet<String>,
    patterns: Vec<String>,
}

impl ToolMatcher {
    /// A matcher of `entries`.
    pub fn new(entries: &[String]) -> Self {
        let (patterns, names): (Vec<&String>, Vec<&String>) =
            entries.iter().partition(|entry| entry.contains('*'));
        Self {
            names: names.into_iter().cloned().collect(),
            patterns: patterns.into_iter().cloned().collect(),
        }
    }

    /// True when `name` is one of the names or matches one of the patterns.
    pub fn matches(&self, name: &str) -> bool {
        self.names.contains(name)
            || self
                .patterns
                .iter()
                .any(|pattern| glob_matches(pattern, name))
    }
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
fn glob_matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = match parts.split_first() {
        Some(split) => split,
        None => return name.is_empty(),
    };
    let Some(mut remaining) = name.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return remaining.is_empty();
    };
    for part in middle {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

/// Splits a `--tools` value on `,`, trimming items and dropping empty ones (names are not
/// validated).
pub fn parse_tools_flag(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The tool registry after the allowlist, and the active tools.
#[derive(Clone)]
pub struct ToolSet {
    registry: Vec<Arc<dyn Tool>>,
    allowlist: Option<ToolMatcher>,
    excluded: Option<ToolMatcher>,
    active: Vec<String>,
}

impl std::fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSet")
            .field("registry", &self.registry_names())
            .field("active", &self.active)
            .finish()
    }
}

impl ToolSet {
    /// Builds the registry from `builtins` and `custom` tools (extension/SDK, in registration
    /// order) and the initial active list for `selection`.
    pub fn new(
        builtins: Vec<Arc<dyn Tool>>,
        custom: Vec<Arc<dyn Tool>>,
        selection: &ToolSelection,
    ) -> Self {
        let allowlist: Option<ToolMatcher> = match selection {
            ToolSelection::Allowlist(names) => Some(ToolMatcher::new(names)),
            ToolSelection::NoTools => Some(ToolMatcher::default()),
            ToolSelection::Default | ToolSelection::Modifiers { .. } | ToolSelection::NoBuiltin => {
                None
            }
        };
        let allowed = |name: &str| allowlist.as_ref().is_none_or(|set| set.matches(name));
        let mut registry: Vec<Arc<dyn Tool>> = builtins
            .into_iter()
            .filter(|tool| allowed(&tool.definition().name))
            .collect();
        let custom: Vec<Arc<dyn Tool>> = custom
            .into_iter()
            .filter(|tool| allowed(&tool.definition().name))
            .collect();
        for tool in &custom {
            let name = &tool.definition().name;
            match registry
                .iter()
                .position(|existing| existing.definition().name == *name)
            {
                Some(idx) => registry[idx] = tool.clone(),
                None => registry.push(tool.clone()),
            }
        }
        let mut wanted: Vec<String> = match selection {
            ToolSelection::Default => DEFAULT_ACTIVE_TOOL_NAMES
                .iter()
                .map(|name| (*name).to_owned())
                .collect(),
            ToolSelection::Allowlist(names)
            | ToolSelection::Modifiers {
                selected: names, ..
            } => names.clone(),
            ToolSelection::NoBuiltin | ToolSelection::NoTools => Vec::new(),
        };
        match &allowlist {
            Some(set) => wanted.extend(
                registry
                    .iter()
                    .map(|tool| tool.definition().name.clone())
                    .filter(|name| set.matches(name)),
            ),
            None => wanted.extend(custom.iter().map(|tool| tool.definition().name.clone())),
        }
        let mut set = Self {
            registry,
            allowlist,
            excluded: None,
            active: Vec::new(),
        };
        set.set_active(&wanted);
        set
    }

    /// Returns this set without the tools `entries` name or match (`--exclude-tools`): they
    /// are not registered, now or when an extension registers them later.
    pub fn excluding(mut self, entries: &[String]) -> Self {
        if entries.is_empty() {
            return self;
        }
        let excluded = ToolMatcher::new(entries);
        self.registry
            .retain(|tool| !excluded.matches(&tool.definition().name));
        self.active.retain(|name| !excluded.matches(name));
        self.excluded = Some(excluded);
        self
    }

    /// Returns this set with more custom tools (extension tools, in registration order): a
    /// tool named like a registered one replaces it in place, others are appended; tools the
    /// allowlist does not allow are dropped; the new tools become active after the current
    /// active ones (the reference's `_refreshToolRegistry`).
    pub fn with_custom(&self, custom: Vec<Arc<dyn Tool>>) -> Self {
        let mut set = self.clone();
        let mut wanted = set.active.clone();
        for tool in custom {
            let name = tool.definition().name.clone();
            if !set.is_allowed(&name) {
                continue;
            }
            match set
                .registry
                .iter()
                .position(|existing| existing.definition().name == name)
            {
                Some(idx) => set.registry[idx] = tool,
                None => set.registry.push(tool),
            }
            wanted.push(name);
        }
        set.set_active(&wanted);
        set
    }

    /// Returns the names of the registered tools that are not built-in (extension tools).
    pub fn custom_names(&self) -> Vec<String> {
        self.registry_names()
            .into_iter()
            .filter(|name| !BUILTIN_TOOL_NAMES.contains(&name.as_str()))
            .collect()
    }

    /// Returns every registered tool.
    pub fn registry(&self) -> &[Arc<dyn Tool>] {
        &self.registry
    }

    /// Returns the registered names in registry order.
    pub fn registry_names(&self) -> Vec<String> {
        self.registry
            .iter()
            .map(|tool| tool.definition().name.clone())
            .collect()
    }

    /// Returns the active tool names in order.
    pub fn active_names(&self) -> &[String] {
        &self.active
    }

    /// Returns the active tools in order.
    pub fn active_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.active
            .iter()
            .filter_map(|name| self.registered(name))
            .collect()
    }

    /// Returns the active tools' declarations in order, as a system message's `toolsAdded`
    /// and a request's tools carry them (1.6.0: `name, description, parameters`, then
    /// `constrainedSampling` where the tool has one).
    pub fn active_declarations(&self) -> Vec<ToolDeclaration> {
        self.active_tools()
            .iter()
            .map(|tool| tool.declaration())
            .collect()
    }

    /// Returns the registered tool called `name`.
    pub fn registered(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.registry
            .iter()
            .find(|tool| tool.definition().name == name)
            .cloned()
    }

    /// Returns the *active* tool called `name` (a call to anything else is "not found").
    pub fn find_active(&self, name: &str) -> Option<Arc<dyn Tool>> {
        if self.active.iter().any(|active| active == name) {
            self.registered(name)
        } else {
            None
        }
    }

    /// Replaces the active list; names not in the registry are ignored, duplicates keep the
    /// first occurrence.
    pub fn set_active<S: AsRef<str>>(&mut self, names: &[S]) {
        let mut seen = HashSet::new();
        self.active = names
            .iter()
            .map(AsRef::as_ref)
            .filter(|name| self.registered(name).is_some())
            .filter(|name| seen.insert((*name).to_owned()))
            .map(str::to_owned)
            .collect();
    }

    /// True when `name` may ever be active (no allowlist, or listed in it, and not excluded).
    pub fn is_allowed(&self, name: &str) -> bool {
        self.allowlist.as_ref().is_none_or(|set| set.matches(name))
            && !self.excluded.as_ref().is_some_and(|set| set.matches(name))
    }
}
