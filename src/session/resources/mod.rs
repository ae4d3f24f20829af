//! Resources: everything a session reads from the workspace and the agent directory to build
//! its system prompt and expand typed input — the base and append prompts, the project
//! context files, skills and prompt templates (spec/resources.md §1–§5).
//!
//! `Resources::load` discovers and reads everything once (call it from `spawn_blocking`: it
//! reads files); `reload` repeats that for `/reload`. Loading never fails: problems are kept
//! as `Diagnostic`s for the mode to show. `system_prompt_options` (1.6.0's prompt options for
//! the active tools, from which `system_prompt::build_system_prompt_sections` builds the named
//! sections) and `expand_input` then work from the loaded values; the pure assembly and
//! expansion functions live in the submodules and are tested without a file system.
//!
//! Invariant: reads no environment variable and no clock — the working directory, agent
//! directory, home directory, options, settings entries and project trust are all inputs.

pub mod context_files;
pub mod diagnostics;
pub mod discovery;
pub mod expand;
pub mod frontmatter;
pub mod origin;
pub mod paths;
pub mod scan;
pub mod skills;
pub mod system_prompt;
pub mod templates;
pub mod text;

use std::path::{Path, PathBuf};

pub use crate::session::resources::context_files::ContextFile;
pub use crate::session::resources::diagnostics::{Diagnostic, ResourceKind, Severity};
pub use crate::session::resources::expand::{Expanded, SkillExpansionError};
pub use crate::session::resources::origin::ResourceOrigin;
pub use crate::session::resources::skills::Skill;
pub use crate::session::resources::system_prompt::{
    HarnessDocs, SkillReader, SystemPromptError, SystemPromptOptions, SystemPromptState,
    ToolPromptInfo,
};
pub use crate::session::resources::templates::PromptTemplate;

use crate::session::resources::discovery::{DiscoveryInput, Kind, resolve_resource_paths};
use crate::session::resources::paths::{normalize, resolve};
use crate::session::resources::templates::{TemplateLoadError, load_template_file};
use crate::session::resources::text::strip_bom;

/// The `skills` and `prompts` entries of one settings file (user or project).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeSettings {
    /// `skills`: files, directories and patterns.
    pub skills: Vec<String>,
    /// `prompts`: files, directories and patterns.
    pub prompts: Vec<String>,
    /// `themes`: files, directories and patterns.
    pub themes: Vec<String>,
}

impl ScopeSettings {
    /// Reads the entries from a parsed `settings.json`, including the older
    /// `skills: {customDirectories: [...]}` form the reference migrates. Non-string items are
    /// ignored.
    pub fn from_settings_json(settings: &serde_json::Value) -> Self {
        let strings = |value: Option<&serde_json::Value>| -> Vec<String> {
            value
                .and_then(serde_json::Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|item| item.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let skills = match settings.get("skills") {
            Some(serde_json::Value::Object(legacy)) => strings(legacy.get("customDirectories")),
            other => strings(other),
        };
        Self {
            skills,
            prompts: strings(settings.get("prompts")),
            themes: strings(settings.get("themes")),
        }
    }
}

/// Everything resource loading depends on.
#[derive(Debug, Clone)]
pub struct ResourceConfig {
    /// The session's working directory (absolute).
    pub cwd: PathBuf,
    /// The agent directory (absolute).
    pub agent_dir: PathBuf,
    /// The home directory (`~` expansion, `~/.agents/skills`).
    pub home: Option<PathBuf>,
    /// `--system-prompt`: text, or a file whose contents are used. `Some("")` means the
    /// default prompt (and `SYSTEM.md` is not consulted), as in the reference.
    pub system_prompt: Option<String>,
    /// `--append-system-prompt` values (text or file), in order; `None` when the flag was not
    /// given, so `APPEND_SYSTEM.md` is used.
    pub append_system_prompt: Option<Vec<String>>,
    /// `--no-context-files`.
    pub no_context_files: bool,
    /// Whether the project is trusted (1.6.0). Only then are `<cwd>/.pi/SYSTEM.md`,
    /// `<cwd>/.pi/APPEND_SYSTEM.md`, the project settings entries and the project's
    /// auto-discovered skills and templates used; context files load either way. Defaults to
    /// `true`.
    pub project_trusted: bool,
    /// `--skill` paths, as typed (relative to `cwd`).
    pub skill_paths: Vec<String>,
    /// `--no-skills`: no settings entries and no auto-discovery; `--skill` still counts.
    pub no_skills: bool,
    /// `--prompt-template` paths, as typed (relative to `cwd`).
    pub prompt_template_paths: Vec<String>,
    /// `--no-prompt-templates`: like `no_skills`, for templates.
    pub no_prompt_templates: bool,
    /// Entries from `<agent dir>/settings.json`.
    pub user_settings: ScopeSettings,
    /// Entries from `<cwd>/.pi/settings.json`.
    pub project_settings: ScopeSettings,
    /// Skill paths extensions contributed (`resources_discover`), loaded like `--skill`.
    pub extension_skill_paths: Vec<String>,
    /// Prompt template paths extensions contributed, loaded like `--prompt-template`.
    pub extension_prompt_paths: Vec<String>,
}

impl ResourceConfig {
    /// Returns a configuration with no options and no settings entries.
    pub fn new(cwd: &Path, agent_dir: &Path, home: Option<&Path>) -> Self {
        Self {
            cwd: cwd.to_path_buf(),
            agent_dir: agent_dir.to_path_buf(),
            home: home.map(Path::to_path_buf),
            system_prompt: None,
            append_system_prompt: None,
            no_context_files: false,
            project_trusted: true,
            skill_paths: Vec::new(),
            no_skills: false,
            prompt_template_paths: Vec::new(),
            no_prompt_templates: false,
            user_settings: ScopeSettings::default(),
            project_settings: ScopeSettings::default(),
            extension_skill_paths: Vec::new(),
            extension_prompt_paths: Vec::new(),
        }
    }
}

impl HarnessDocs {
    /// Finds pi's own documentation for the `<docs>` section. pi is no npm package, so the
    /// reference's package directory is replaced by, in order:
    ///
    /// 1. `package_dir` (`$PI_PACKAGE_DIR`, as for the reference): its `README.md`, `docs/`,
    ///    `examples/`;
    /// 2. the nearest ancestor of the executable's directory (itself included) holding a
    ///    `README.md` file and a `docs/` directory — the repository root for a binary built in
    ///    a checkout (`target/<profile>/pi`), or an install that copies `README.md`, `docs/`
    ///    and `examples/` next to the binary (or one level up, `<prefix>/bin/pi`);
    /// 3. the executable's directory itself (the reference's Bun-binary rule), whether or not
    ///    the files exist.
    pub fn locate(package_dir: Option<&Path>, executable: &Path) -> Self {
        if let Some(dir) = package_dir {
            return Self::in_dir(&normalize(dir));
        }
        let exe_dir = executable.parent().unwrap_or(executable);
        let found = exe_dir
            .ancestors()
            .find(|dir| dir.join("README.md").is_file() && dir.join("docs").is_dir());
        Self::in_dir(found.unwrap_or(exe_dir))
    }
}

/// What a `/` command of the resources is, for completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandKind {
    /// `/name` expands a prompt template.
    PromptTemplate,
    /// `/skill:name` inserts a skill.
    Skill,
}

/// A slash command provided by a template or a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceCommand {
    /// The name after `/`: the template's name, or `skill:<name>`.
    pub name: String,
    /// The description shown next to it.
    pub description: String,
    /// The template's `argument-hint`, if any.
    pub argument_hint: Option<String>,
    /// Template or skill.
    pub kind: CommandKind,
    /// The file it comes from.
    pub path: PathBuf,
}

/// The loaded resources of a session.
#[derive(Debug, Clone)]
pub struct Resources {
    config: ResourceConfig,
    custom_prompt: Option<String>,
    append_prompt: Vec<String>,
    context_files: Vec<ContextFile>,
    skills: Vec<Skill>,
    templates: Vec<PromptTemplate>,
    diagnostics: Vec<Diagnostic>,
}

/// Resolves `--system-prompt`-style input: an existing file's contents (a leading byte-order
/// mark dropped), else the text itself (`None` for an empty value).
fn resolve_prompt_input(
    value: &str,
    cwd: &Path,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    let path = resolve(cwd, Path::new(value));
    if !path.exists() {
        return Some(value.to_string());
    }
    match std::fs::read(&path) {
        Ok(bytes) => Some(strip_bom(&String::from_utf8_lossy(&bytes)).to_owned()),
        Err(err) => {
            diagnostics.push(Diagnostic::warning(
                ResourceKind::SystemPrompt,
                &path,
                format!("could not read the file, using the value as text: {err}"),
            ));
            Some(value.to_string())
        }
    }
}

/// The first existing of `<cwd>/.pi/<name>` (trusted projects only) and `<agent dir>/<name>`.
fn discover_prompt_file(config: &ResourceConfig, name: &str) -> Option<PathBuf> {
    let project = config.cwd.join(".pi").join(name);
    if config.project_trusted && project.exists() {
        return Some(project);
    }
    Some(config.agent_dir.join(name)).filter(|path| path.exists())
}

fn load_templates(
    config: &ResourceConfig,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<PromptTemplate> {
    let paths = resolve_resource_paths(
        &DiscoveryInput {
            cwd: &config.cwd,
            agent_dir: &config.agent_dir,
            home: config.home.as_deref(),
            discover: !config.no_prompt_templates,
            project_entries: &config.project_settings.prompts,
            user_entries: &config.user_settings.prompts,
            cli_paths: &[
                config.prompt_template_paths.as_slice(),
                config.extension_prompt_paths.as_slice(),
            ]
            .concat(),
            project_trusted: config.project_trusted,
        },
        Kind::Prompts,
    );
    let mut loaded = Vec::new();
    let mut load = |file: &Path, origin: ResourceOrigin, diagnostics: &mut Vec<Diagnostic>| {
        match load_template_file(file, origin) {
            Ok(template) => loaded.push(template),
            // The reference drops such a file silently; we say why it is missing.
            Err(err @ (TemplateLoadError::Read(_) | TemplateLoadError::Frontmatter(_))) => {
                diagnostics.push(Diagnostic::warning(
                    ResourceKind::PromptTemplate,
                    file,
                    err.to_string(),
                ));
            }
        }
    };
    for (path, origin) in &paths {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                for file in scan::list_markdown_files(path) {
                    load(&file, *origin, diagnostics);
                }
            }
            Ok(meta) if meta.is_file() && path.to_string_lossy().ends_with(".md") => {
                load(path, *origin, diagnostics);
            }
            _ => {}
        }
    }
    let mut templates: Vec<PromptTemplate> = Vec::new();
    for template in loaded {
        match templates.iter().find(|kept| kept.name == template.name) {
            Some(winner) => diagnostics.push(Diagnostic::collision(
                ResourceKind::PromptTemplate,
                &template.name,
                &winner.file_path,
                &template.file_path,
            )),
            None => templates.push(template),
        }
    }
    for (path, origin) in &paths {
        if *origin == ResourceOrigin::CommandLine
            && !path.exists()
            && !diagnostics.iter().any(|d| &d.path == path)
        {
            diagnostics.push(Diagnostic::error(
                ResourceKind::PromptTemplate,
                path,
                "Prompt template path does not exist",
            ));
        }
    }
    templates
}

impl Resources {
    /// Discovers and reads every resource for `config`.
    pub fn load(config: ResourceConfig) -> Self {
        let mut diagnostics = Vec::new();

        let skill_paths = resolve_resource_paths(
            &DiscoveryInput {
                cwd: &config.cwd,
                agent_dir: &config.agent_dir,
                home: config.home.as_deref(),
                discover: !config.no_skills,
                project_entries: &config.project_settings.skills,
                user_entries: &config.user_settings.skills,
                cli_paths: &[
                    config.skill_paths.as_slice(),
                    config.extension_skill_paths.as_slice(),
                ]
                .concat(),
                project_trusted: config.project_trusted,
            },
            Kind::Skills,
        );
        let (skills, skill_diagnostics) = skills::load_skills(&skill_paths);
        diagnostics.extend(skill_diagnostics);

        let templates = load_templates(&config, &mut diagnostics);

        let context_files = if config.no_context_files {
            Vec::new()
        } else {
            context_files::load_context_files(&config.cwd, &config.agent_dir, &mut diagnostics)
        };

        let custom_source = match &config.system_prompt {
            Some(value) => Some(value.clone()),
            None => discover_prompt_file(&config, "SYSTEM.md").map(|p| paths::display(&p)),
        };
        let custom_prompt = custom_source
            .and_then(|source| resolve_prompt_input(&source, &config.cwd, &mut diagnostics));

        let append_sources = match &config.append_system_prompt {
            Some(values) => values.clone(),
            None => discover_prompt_file(&config, "APPEND_SYSTEM.md")
                .map(|p| vec![paths::display(&p)])
                .unwrap_or_default(),
        };
        let append_prompt = append_sources
            .iter()
            .filter_map(|source| resolve_prompt_input(source, &config.cwd, &mut diagnostics))
            .collect();

        Self {
            config,
            custom_prompt,
            append_prompt,
            context_files,
            skills,
            templates,
            diagnostics,
        }
    }

    /// Discovers and reads everything again with the same configuration (`/reload`).
    pub fn reload(&mut self) {
        *self = Self::load(self.config.clone());
    }

    /// Loads everything again for another working directory (a session of another project
    /// was opened: the reference builds its runtime in the session's cwd), with the
    /// `skills`/`prompts` entries of that project's parsed `settings.json`. Values given on
    /// the command line keep meaning what they meant at startup: `--skill` and
    /// `--prompt-template` paths, and `--system-prompt` / `--append-system-prompt` values
    /// naming files, are resolved against the previous directory first. `project_trusted` is
    /// that directory's trust decision (`session::trust`).
    pub fn relocate(
        &mut self,
        cwd: &Path,
        project_settings: &serde_json::Value,
        project_trusted: bool,
    ) {
        if self.config.cwd == cwd {
            return;
        }
        let mut config = self.config.clone();
        let old = config.cwd.clone();
        let absolute = |value: &String| {
            resolve(&old, Path::new(value))
                .to_string_lossy()
                .into_owned()
        };
        let file_or_text = |value: &String| {
            if value.is_empty() || !resolve(&old, Path::new(value)).exists() {
                value.clone()
            } else {
                absolute(value)
            }
        };
        config.system_prompt = config.system_prompt.as_ref().map(file_or_text);
        config.append_system_prompt = config
            .append_system_prompt
            .as_ref()
            .map(|values| values.iter().map(file_or_text).collect());
        config.skill_paths = config.skill_paths.iter().map(absolute).collect();
        config.prompt_template_paths = config.prompt_template_paths.iter().map(absolute).collect();
        // The project's own `skills` / `prompts` entries (`<cwd>/.pi/settings.json`).
        config.project_settings = ScopeSettings::from_settings_json(project_settings);
        config.project_trusted = project_trusted;
        config.cwd = cwd.to_path_buf();
        *self = Self::load(config);
    }

    /// Replaces the skill and prompt paths contributed by extensions (`resources_discover`)
    /// and reloads when they changed; returns whether they did.
    pub fn set_extension_paths(
        &mut self,
        skill_paths: Vec<String>,
        prompt_paths: Vec<String>,
    ) -> bool {
        if self.config.extension_skill_paths == skill_paths
            && self.config.extension_prompt_paths == prompt_paths
        {
            return false;
        }
        let mut config = self.config.clone();
        config.extension_skill_paths = skill_paths;
        config.extension_prompt_paths = prompt_paths;
        *self = Self::load(config);
        true
    }

    /// Returns the configuration the resources were loaded with.
    pub fn config(&self) -> &ResourceConfig {
        &self.config
    }

    /// Returns the custom base prompt, if any (`--system-prompt` or `SYSTEM.md`).
    pub fn custom_prompt(&self) -> Option<&str> {
        self.custom_prompt.as_deref()
    }

    /// Returns the append texts, in order.
    pub fn append_prompt(&self) -> &[String] {
        &self.append_prompt
    }

    /// Returns the context files, in prompt order.
    pub fn context_files(&self) -> &[ContextFile] {
        &self.context_files
    }

    /// Returns the skills, in precedence order.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// Returns the prompt templates, in precedence order.
    pub fn templates(&self) -> &[PromptTemplate] {
        &self.templates
    }

    /// Returns what loading reported: skill problems and collisions, then template problems
    /// and collisions, then context-file and system-prompt problems.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// Returns 1.6.0's prompt options for the active tools (`_rebuildSystemPrompt`): the custom
    /// prompt, the append texts joined with a blank line, the context files, the skills, the
    /// tools' normalised snippets and guidelines, `cwd` and pi's documentation paths. No tool
    /// is hidden and there are no extension sections or guidelines; a `before_agent_start`
    /// handler may add them to the returned value. Build the sections with
    /// [`system_prompt::build_system_prompt_sections`].
    pub fn system_prompt_options(
        &self,
        tools: &[ToolPromptInfo],
        cwd: &Path,
        docs: &HarnessDocs,
    ) -> SystemPromptOptions {
        let mut options = SystemPromptOptions::new(cwd, docs.clone());
        options.set_tools(tools);
        options.custom_prompt = self.custom_prompt.clone();
        options.append_system_prompt = self.append_prompt.join("\n\n");
        options.context_files = self.context_files.clone();
        options.skills = self.skills.clone();
        options
    }

    /// Returns the prompt text for the active tools as a 1.6.0 system message renders it
    /// (content empty, the sections joined by blank lines): what a model without
    /// mid-conversation system messages receives as its leading system prompt.
    pub fn system_prompt(
        &self,
        tools: &[ToolPromptInfo],
        cwd: &Path,
        docs: &HarnessDocs,
    ) -> String {
        let options = self.system_prompt_options(tools, cwd, docs);
        // The options carry no extension sections, so no section name can be invalid.
        system_prompt::build_system_prompt(&options).unwrap_or_default()
    }

    /// Expands `/skill:name args` and then `/template args` in typed input (step 3 of the
    /// input pipeline). Reads the skill file when a skill is invoked.
    pub fn expand_input(&self, text: &str) -> Expanded {
        expand::expand_input(text, &self.skills, &self.templates, |path| {
            std::fs::read(path)
        })
    }

    /// Returns the slash commands the resources provide, for completion: templates (`/name`)
    /// then skills (`/skill:name`), each in precedence order.
    pub fn commands(&self) -> Vec<ResourceCommand> {
        let templates = self.templates.iter().map(|template| ResourceCommand {
            name: template.name.clone(),
            description: template.description.clone(),
            argument_hint: template.argument_hint.clone(),
            kind: CommandKind::PromptTemplate,
            path: template.file_path.clone(),
        });
        let skills = self.skills.iter().map(|skill| ResourceCommand {
            name: format!("skill:{}", skill.name),
            description: skill.description.clone(),
            argument_hint: None,
            kind: CommandKind::Skill,
            path: skill.file_path.clone(),
        });
        templates.chain(skills).collect()
    }
}
