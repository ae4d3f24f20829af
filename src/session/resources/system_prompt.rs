//! The system prompt as 1.6.0 builds it: named sections (`buildSystemPromptSections` of the
//! reference's `core/system-prompt.js`), the prompt state a system message stores, the patch
//! between two section sets, and the rendering of sections as one prompt text.
//!
//! Sections, in this order (absent ones are skipped):
//!
//! ```text
//! preamble         the fixed first sentence, or the custom prompt (--system-prompt / SYSTEM.md)
//! <tools>          "- name: snippet" per declared tool with a snippet, or "(none)"; then
//!                  "\n\nAdditional tools may be available."          (default prompt only)
//! <rules>          "- rule" lines: bash rule, tool guidelines, prompt guidelines, two fixed
//!                                                                    (default prompt only)
//! <docs>           the harness documentation block                   (default prompt only)
//! <addendum>       the append text
//! <project_context> "Project-specific instructions and guidelines:" + <project_instructions>
//! <skills>         the <available_skills> index, when a reader tool exists
//! <cwd>            the working directory, `\` written as `/`
//! <name>...        extension sections (`^[a-z][a-z0-9_-]*$`, not `preamble`), non-empty only;
//!                  a name already present keeps its position
//! ```
//!
//! Every section but `preamble` is wrapped as `<name>\n<content>\n</name>`. There is no date.
//! The documentation paths are pi's own (`HarnessDocs`), not the npm package's.
//!
//! Invariant: pure — the working directory, the documentation paths and everything loaded are
//! inputs; nothing reads a clock, the environment or a file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::agent::tool::ToolDefinition;
use crate::session::resources::context_files::ContextFile;
use crate::session::resources::paths::display;
use crate::session::resources::skills::Skill;
use crate::session::resources::text::{collapse_whitespace, escape_xml, js_trim};

/// The tools selected when the options do not say (`normalizeBuildSystemPromptOptions`).
pub const DEFAULT_SELECTED_TOOLS: [&str; 4] = ["read", "bash", "edit", "write"];

/// The first sentence of the default prompt.
pub const DEFAULT_PREAMBLE: &str = "You are a coding assistant running inside pi, a coding agent harness. Help users inspect files, run commands, and modify code.";

/// What one tool contributes to the system prompt, as its definition states it (the session
/// normalises it with [`normalize_prompt_snippet`] / [`normalize_prompt_guidelines`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPromptInfo {
    /// The tool's name (`read`, `bash`, …).
    pub name: String,
    /// The one-line description for `<tools>`; a tool without one is not listed.
    pub snippet: Option<String>,
    /// Bullets for `<rules>` while the tool is declared.
    pub guidelines: Vec<String>,
}

impl ToolPromptInfo {
    /// Builds the prompt info of a tool.
    pub fn new(name: &str, snippet: Option<&str>, guidelines: &[&str]) -> Self {
        Self {
            name: name.to_string(),
            snippet: snippet.map(str::to_string),
            guidelines: guidelines.iter().map(|g| (*g).to_string()).collect(),
        }
    }

    /// The prompt info a tool's definition gives.
    pub fn of_definition(definition: &ToolDefinition) -> Self {
        Self {
            name: definition.name.clone(),
            snippet: definition.prompt_snippet.clone(),
            guidelines: definition.prompt_guidelines.clone(),
        }
    }
}

/// Where the harness's own documentation lives, for the `<docs>` section.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HarnessDocs {
    /// The main README file.
    pub readme: PathBuf,
    /// The directory of further documents.
    pub docs: PathBuf,
    /// The directory of examples.
    pub examples: PathBuf,
}

impl HarnessDocs {
    /// Returns the layout of a package directory: `README.md`, `docs/`, `examples/` in `dir`
    /// (the reference's `getReadmePath`/`getDocsPath`/`getExamplesPath`).
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            readme: dir.join("README.md"),
            docs: dir.join("docs"),
            examples: dir.join("examples"),
        }
    }
}

/// 1.6.0's normalised prompt options (`normalizeBuildSystemPromptOptions`), plus the
/// documentation paths the reference reads from its package directory.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SystemPromptOptions {
    /// The custom base prompt (`--system-prompt` or `SYSTEM.md`); empty counts as none.
    pub custom_prompt: Option<String>,
    /// A prompt an extension forces (`before_agent_start` returning `systemPrompt`): the
    /// state is then this text alone, without sections.
    pub force_system_prompt: Option<String>,
    /// The active tools, in activation order.
    pub selected_tools: Vec<String>,
    /// Selected tools whose declarations are hidden from the model (reachable only through
    /// another tool); they are not "declared".
    pub hidden_tools: Vec<String>,
    /// One-line snippets by tool name (tools without one are not listed under `<tools>`).
    pub tool_snippets: BTreeMap<String, String>,
    /// Rules by tool name, added while the tool is declared.
    pub tool_guidelines: BTreeMap<String, Vec<String>>,
    /// Rules from extensions, after the tools' own.
    pub prompt_guidelines: Vec<String>,
    /// The append text (`--append-system-prompt` values or `APPEND_SYSTEM.md`, joined with a
    /// blank line); empty means no `<addendum>`.
    pub append_system_prompt: String,
    /// Extension sections in insertion order (unique names).
    pub sections: Vec<(String, String)>,
    /// The working directory shown in `<cwd>`.
    pub cwd: PathBuf,
    /// The project context files, in prompt order.
    pub context_files: Vec<ContextFile>,
    /// The loaded skills; hidden ones are left out of the index.
    pub skills: Vec<Skill>,
    /// The `<docs>` section's paths (pi's substitute for the reference's package paths).
    pub docs: HarnessDocs,
}

impl SystemPromptOptions {
    /// Returns the options for `cwd` with nothing loaded and the default tool selection
    /// (`read`, `bash`, `edit`, `write`), as `normalizeBuildSystemPromptOptions({cwd})`.
    pub fn new(cwd: &Path, docs: HarnessDocs) -> Self {
        Self {
            selected_tools: DEFAULT_SELECTED_TOOLS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            cwd: cwd.to_path_buf(),
            docs,
            ..Self::default()
        }
    }

    /// Sets the selected tools and their snippets and guidelines from the tools' own prompt
    /// contributions, normalised as the reference's `_rebuildSystemPrompt` does.
    pub fn set_tools(&mut self, tools: &[ToolPromptInfo]) {
        self.selected_tools = tools.iter().map(|tool| tool.name.clone()).collect();
        self.tool_snippets = tools
            .iter()
            .filter_map(|tool| {
                let snippet = normalize_prompt_snippet(tool.snippet.as_deref()?)?;
                Some((tool.name.clone(), snippet))
            })
            .collect();
        self.tool_guidelines = tools
            .iter()
            .filter_map(|tool| {
                let guidelines = normalize_prompt_guidelines(&tool.guidelines);
                (!guidelines.is_empty()).then(|| (tool.name.clone(), guidelines))
            })
            .collect();
    }

    /// The selected tools that are not hidden, in selection order.
    pub fn declared_tools(&self) -> Vec<&str> {
        self.selected_tools
            .iter()
            .filter(|name| !self.hidden_tools.contains(name))
            .map(String::as_str)
            .collect()
    }
}

/// Why the sections could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SystemPromptError {
    /// An extension section is named `preamble` or does not match `^[a-z][a-z0-9_-]*$`.
    #[error("Invalid system prompt section name: {0}")]
    InvalidSectionName(String),
}

/// The prompt a system message stores: a forced prompt lives in `content` with no sections;
/// otherwise `content` is empty and the sections carry the prompt (`buildSystemPromptState`).
#[derive(Debug, Clone, PartialEq)]
pub struct SystemPromptState {
    /// The forced prompt, or empty.
    pub content: String,
    /// The sections (string values), in order; `None` for a forced prompt.
    pub sections: Option<Map<String, Value>>,
}

/// The tool the skills index tells the model to read skill files with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillReader {
    /// `read` is declared.
    Read,
    /// `bash` is declared (and `read` is not).
    Bash,
    /// A reader is selected but hidden: reachable only through another tool.
    Indirect,
}

/// Normalises a tool's prompt snippet to one line (`_normalizePromptSnippet`): whitespace runs
/// become one space, the ends are trimmed; `None` when nothing is left.
pub fn normalize_prompt_snippet(text: &str) -> Option<String> {
    let one_line = collapse_whitespace(text);
    (!one_line.is_empty()).then_some(one_line)
}

/// Normalises a tool's guidelines (`_normalizePromptGuidelines`): each trimmed, empty ones
/// dropped, repeats dropped (first kept).
pub fn normalize_prompt_guidelines(guidelines: &[String]) -> Vec<String> {
    let mut res: Vec<String> = Vec::new();
    for guideline in guidelines {
        let normalized = js_trim(guideline);
        if !normalized.is_empty() && !res.iter().any(|seen| seen == normalized) {
            res.push(normalized.to_owned());
        }
    }
    res
}

/// Returns whether `name` may name an extension section: `^[a-z][a-z0-9_-]*$`, not `preamble`.
pub fn is_valid_section_name(name: &str) -> bool {
    let mut chars = name.chars();
    let starts_well = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    starts_well
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && name != "preamble"
}

/// Formats the skills index (`formatSkillsForPrompt`): the model-visible skills as
/// `<available_skills>` XML after three instruction lines, led by a blank line; an empty
/// string when no skill is visible.
pub fn format_skills_for_prompt(skills: &[Skill], reader: SkillReader) -> String {
    let visible: Vec<&Skill> = skills
        .iter()
        .filter(|skill| !skill.disable_model_invocation)
        .collect();
    if visible.is_empty() {
        return String::new();
    }
    let how = match reader {
        SkillReader::Read => {
            "Use the read tool to load a skill's file when the task matches its description."
        }
        SkillReader::Bash => {
            "Use bash to load a skill's file when the task matches its description."
        }
        SkillReader::Indirect => "Load a skill's file when the task matches its description.",
    };
    let mut lines = vec![
        "\n\nThe following skills provide specialized instructions for specific tasks.".to_string(),
        how.to_string(),
        "Resolve relative paths against the skill's directory (parent of SKILL.md). Use absolute paths in tool calls.".to_string(),
        String::new(),
        "<available_skills>".to_string(),
    ];
    for skill in visible {
        lines.push("  <skill>".to_string());
        lines.push(format!("    <name>{}</name>", escape_xml(&skill.name)));
        lines.push(format!(
            "    <description>{}</description>",
            escape_xml(&skill.description)
        ));
        lines.push(format!(
            "    <location>{}</location>",
            escape_xml(&display(&skill.file_path))
        ));
        lines.push("  </skill>".to_string());
    }
    lines.push("</available_skills>".to_string());
    lines.join("\n")
}

/// The `<project_context>` content (`renderProjectContext`).
fn render_project_context(files: &[ContextFile]) -> String {
    let mut parts = vec!["Project-specific instructions and guidelines:".to_string()];
    parts.extend(files.iter().map(|file| {
        format!(
            "<project_instructions path=\"{}\">\n{}\n</project_instructions>",
            display(&file.path),
            file.content
        )
    }));
    parts.join("\n\n")
}

/// The `<rules>` content (`buildRules`): trimmed, first occurrence kept, as `- rule` lines.
fn build_rules(declared: &[&str], options: &SystemPromptOptions) -> String {
    let mut rules: Vec<String> = Vec::new();
    let mut add = |rule: &str| {
        let normalized = js_trim(rule);
        if !normalized.is_empty() && !rules.iter().any(|seen| seen == normalized) {
            rules.push(normalized.to_owned());
        }
    };
    let has = |name: &str| declared.contains(&name);
    let (bash, powershell) = (has("bash"), has("powershell"));
    if (bash || powershell) && !has("grep") && !has("find") && !has("ls") {
        if bash && powershell {
            add(
                "Use bash or PowerShell for file operations like listing, searching, and finding files",
            );
        } else if powershell {
            add("Use PowerShell for file operations like listing, searching, and finding files");
        } else {
            add("Use bash for file operations like ls, rg, find");
        }
    }
    for name in declared {
        for rule in options.tool_guidelines.get(*name).into_iter().flatten() {
            add(rule);
        }
    }
    for rule in &options.prompt_guidelines {
        add(rule);
    }
    add("Be concise in your responses");
    add("Show file paths clearly when working with files");
    rules
        .iter()
        .map(|rule| format!("- {rule}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `<docs>` content with pi's documentation paths.
fn docs_section(docs: &HarnessDocs) -> String {
    format!(
        "Pi documentation (read only when the user asks about the harness itself, its SDK, extensions, themes, skills, or TUI):
- Main documentation: {}
- Additional docs: {}
- Examples: {} (extensions, custom tools, SDK)
- When reading pi docs or examples, resolve docs/... under Additional docs and examples/... under Examples, not the current working directory
- When asked about: extensions (docs/extensions.md, examples/extensions/), themes (docs/themes.md), skills (docs/skills.md), prompt templates (docs/prompt-templates.md), TUI components (docs/tui.md), keybindings (docs/keybindings.md), SDK integrations (docs/sdk.md), custom providers (docs/custom-provider.md), adding models (docs/models.md), packages (docs/packages.md), environment variables (docs/environment-variables.md), MCP servers (docs/mcp.md), codemode scripts and non-LLM models such as classifiers and image models (docs/codemode.md)
- Before implementing harness changes, read the relevant docs and examples in full, following related cross-references.",
        display(&docs.readme),
        display(&docs.docs),
        display(&docs.examples),
    )
}

/// Sets `name` in an ordered list of sections: an existing name keeps its position.
fn set_section(sections: &mut Vec<(String, String)>, name: &str, content: String) {
    match sections.iter_mut().find(|(existing, _)| existing == name) {
        Some(slot) => slot.1 = content,
        None => sections.push((name.to_owned(), content)),
    }
}

/// Builds the ordered sections of the structured prompt (`buildSystemPromptSections`).
pub fn build_system_prompt_sections(
    options: &SystemPromptOptions,
) -> Result<Map<String, Value>, SystemPromptError> {
    if let Some((name, _)) = options
        .sections
        .iter()
        .find(|(name, _)| !is_valid_section_name(name))
    {
        return Err(SystemPromptError::InvalidSectionName(name.clone()));
    }
    let declared = options.declared_tools();
    let mut sections: Vec<(String, String)> = Vec::new();
    match options.custom_prompt.as_deref().filter(|p| !p.is_empty()) {
        Some(custom) => sections.push(("preamble".to_owned(), custom.to_owned())),
        None => {
            sections.push(("preamble".to_owned(), DEFAULT_PREAMBLE.to_owned()));
            let lines: Vec<String> = declared
                .iter()
                .filter_map(|name| {
                    let snippet = options.tool_snippets.get(*name)?;
                    (!snippet.is_empty()).then(|| format!("- {name}: {snippet}"))
                })
                .collect();
            let tools = if lines.is_empty() {
                "(none)".to_owned()
            } else {
                lines.join("\n")
            };
            sections.push((
                "tools".to_owned(),
                format!("{tools}\n\nAdditional tools may be available."),
            ));
            sections.push(("rules".to_owned(), build_rules(&declared, options)));
            sections.push(("docs".to_owned(), docs_section(&options.docs)));
        }
    }
    if !options.append_system_prompt.is_empty() {
        sections.push(("addendum".to_owned(), options.append_system_prompt.clone()));
    }
    if !options.context_files.is_empty() {
        sections.push((
            "project_context".to_owned(),
            render_project_context(&options.context_files),
        ));
    }
    let selected = |name: &str| options.selected_tools.iter().any(|tool| tool == name);
    let reader = if declared.contains(&"read") {
        Some(SkillReader::Read)
    } else if declared.contains(&"bash") {
        Some(SkillReader::Bash)
    } else if selected("read") || selected("bash") {
        Some(SkillReader::Indirect)
    } else {
        None
    };
    if let Some(reader) = reader
        && !options.skills.is_empty()
    {
        let index = format_skills_for_prompt(&options.skills, reader);
        let index = js_trim(&index);
        if !index.is_empty() {
            sections.push(("skills".to_owned(), index.to_owned()));
        }
    }
    sections.push(("cwd".to_owned(), display(&options.cwd).replace('\\', "/")));
    for (name, content) in &options.sections {
        if !content.is_empty() {
            set_section(&mut sections, name, content.clone());
        }
    }
    Ok(sections
        .into_iter()
        .map(|(name, content)| {
            let text = if name == "preamble" {
                content
            } else {
                format!("<{name}>\n{content}\n</{name}>")
            };
            (name, Value::String(text))
        })
        .collect())
}

/// Builds the complete prompt state (`buildSystemPromptState`): a forced prompt is the
/// content alone (its sections are not built); otherwise empty content and the sections.
pub fn build_system_prompt_state(
    options: &SystemPromptOptions,
) -> Result<SystemPromptState, SystemPromptError> {
    if let Some(forced) = &options.force_system_prompt {
        return Ok(SystemPromptState {
            content: forced.clone(),
            sections: None,
        });
    }
    Ok(SystemPromptState {
        content: String::new(),
        sections: Some(build_system_prompt_sections(options)?),
    })
}

/// Builds the prompt text as the transcript's system message replays it (`buildSystemPrompt`:
/// the state rendered by [`render_system_prompt`]).
pub fn build_system_prompt(options: &SystemPromptOptions) -> Result<String, SystemPromptError> {
    let state = build_system_prompt_state(options)?;
    Ok(render_system_prompt(
        &state.content,
        state.sections.as_ref().unwrap_or(&Map::new()),
    ))
}

/// Renders content and sections as one prompt text, as pi-ai's `getSystemMessageText` does
/// for a system message: the content, then every section value that is a non-null string,
/// empty parts dropped, joined by a blank line.
///
/// This works on plain values (for `/session`-style display and the flat prompt); for a
/// `SystemMessage` use `ai::transcript::get_system_message_text`, which also reads text
/// blocks.
pub fn render_system_prompt(content: &str, sections: &Map<String, Value>) -> String {
    std::iter::once(content)
        .chain(sections.values().filter_map(Value::as_str))
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Returns the patch that turns `previous` (the sections the model has, replayed from the
/// transcript) into `current` (`diffSystemPromptSections`): every new or changed section with
/// its text, in `current`'s order, then every section gone as `null`, in `previous`'s order;
/// `None` when nothing changed.
pub fn diff_system_prompt_sections(
    previous: &Map<String, Value>,
    current: &Map<String, Value>,
) -> Option<Map<String, Value>> {
    let mut patch = Map::new();
    for (name, text) in current {
        if previous.get(name) != Some(text) {
            patch.insert(name.clone(), text.clone());
        }
    }
    for name in previous.keys() {
        if !current.contains_key(name) {
            patch.insert(name.clone(), Value::Null);
        }
    }
    (!patch.is_empty()).then_some(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::resources::origin::ResourceOrigin;
    use serde_json::json;

    fn skill(name: &str, hidden: bool) -> Skill {
        Skill {
            name: name.to_string(),
            description: format!("{name} <d>"),
            file_path: PathBuf::from(format!("/s/{name}/SKILL.md")),
            base_dir: PathBuf::from(format!("/s/{name}")),
            origin: ResourceOrigin::UserAuto,
            disable_model_invocation: hidden,
        }
    }

    fn options(tools: &[ToolPromptInfo]) -> SystemPromptOptions {
        let mut options = SystemPromptOptions::new(
            Path::new("C:\\w\\p"),
            HarnessDocs::in_dir(Path::new("/pkg")),
        );
        options.set_tools(tools);
        options
    }

    fn names(sections: &Map<String, Value>) -> Vec<&str> {
        sections.keys().map(String::as_str).collect()
    }

    #[test]
    fn custom_prompt_keeps_addendum_context_skills_and_cwd() {
        let mut options = options(&[ToolPromptInfo::new("read", Some("Read"), &["R"])]);
        options.custom_prompt = Some("Custom.".to_owned());
        options.append_system_prompt = "one\n\ntwo".to_owned();
        options.context_files = vec![ContextFile {
            path: PathBuf::from("/w/AGENTS.md"),
            content: "Rules\n".to_string(),
        }];
        options.skills = vec![skill("a", false), skill("b", true)];
        let sections = build_system_prompt_sections(&options).unwrap();
        assert_eq!(
            names(&sections),
            ["preamble", "addendum", "project_context", "skills", "cwd"]
        );
        assert_eq!(sections["preamble"], "Custom.");
        assert_eq!(sections["addendum"], "<addendum>\none\n\ntwo\n</addendum>");
        assert_eq!(
            sections["project_context"],
            "<project_context>\nProject-specific instructions and guidelines:\n\n<project_instructions path=\"/w/AGENTS.md\">\nRules\n\n</project_instructions>\n</project_context>"
        );
        assert_eq!(
            sections["skills"],
            "<skills>\nThe following skills provide specialized instructions for specific tasks.\nUse the read tool to load a skill's file when the task matches its description.\nResolve relative paths against the skill's directory (parent of SKILL.md). Use absolute paths in tool calls.\n\n<available_skills>\n  <skill>\n    <name>a</name>\n    <description>a &lt;d&gt;</description>\n    <location>/s/a/SKILL.md</location>\n  </skill>\n</available_skills>\n</skills>"
        );
        assert_eq!(sections["cwd"], "<cwd>\nC:/w/p\n</cwd>");
    }

    #[test]
    fn skills_reader_is_read_then_bash_then_indirect() {
        let reader_line = |tools: &[&str], hidden: &[&str]| {
            let infos: Vec<ToolPromptInfo> = tools
                .iter()
                .map(|name| ToolPromptInfo::new(name, Some("x"), &[]))
                .collect();
            let mut options = options(&infos);
            options.hidden_tools = hidden.iter().map(|s| (*s).to_owned()).collect();
            options.skills = vec![skill("a", false)];
            let sections = build_system_prompt_sections(&options).unwrap();
            sections
                .get("skills")
                .and_then(Value::as_str)
                .and_then(|text| text.lines().nth(2).map(str::to_owned))
        };
        assert_eq!(
            reader_line(&["bash", "read"], &[]).as_deref(),
            Some("Use the read tool to load a skill's file when the task matches its description.")
        );
        assert_eq!(
            reader_line(&["edit", "bash"], &[]).as_deref(),
            Some("Use bash to load a skill's file when the task matches its description.")
        );
        assert_eq!(
            reader_line(&["read", "edit"], &["read"]).as_deref(),
            Some("Load a skill's file when the task matches its description.")
        );
        assert_eq!(reader_line(&["edit", "write"], &[]), None);
        // Only hidden skills: no section at all.
        let mut only_hidden = options(&[ToolPromptInfo::new("read", Some("x"), &[])]);
        only_hidden.skills = vec![skill("b", true)];
        let sections = build_system_prompt_sections(&only_hidden).unwrap();
        assert!(!sections.contains_key("skills"));
    }

    #[test]
    fn default_prompt_lists_declared_tools_and_deduplicated_rules() {
        let mut options = options(&[
            ToolPromptInfo::new(
                "bash",
                Some("Run\n  shell\r\ncommands "),
                &["  Shared rule ", ""],
            ),
            ToolPromptInfo::new("nosnippet", None, &["Shared rule", "Own rule"]),
            ToolPromptInfo::new("blank", Some(" \n "), &[]),
            ToolPromptInfo::new("secret", Some("Hidden"), &["Not shown"]),
        ]);
        options.hidden_tools = vec!["secret".to_owned()];
        options.prompt_guidelines = vec!["Own rule".to_owned(), " Extension rule ".to_owned()];
        let sections = build_system_prompt_sections(&options).unwrap();
        assert_eq!(
            names(&sections),
            ["preamble", "tools", "rules", "docs", "cwd"]
        );
        assert_eq!(sections["preamble"], DEFAULT_PREAMBLE);
        assert_eq!(
            sections["tools"],
            "<tools>\n- bash: Run shell commands\n\nAdditional tools may be available.\n</tools>"
        );
        assert_eq!(
            sections["rules"],
            "<rules>\n- Use bash for file operations like ls, rg, find\n- Shared rule\n- Own rule\n- Extension rule\n- Be concise in your responses\n- Show file paths clearly when working with files\n</rules>"
        );
        let docs = sections["docs"].as_str().unwrap();
        assert!(docs.contains("\n- Main documentation: /pkg/README.md\n- Additional docs: /pkg/docs\n- Examples: /pkg/examples (extensions, custom tools, SDK)\n"));
        assert!(!render_system_prompt("", &sections).contains("Current date"));
    }

    #[test]
    fn no_tools_and_explorer_tools_change_the_rules() {
        let sections = build_system_prompt_sections(&options(&[])).unwrap();
        assert_eq!(
            sections["tools"],
            "<tools>\n(none)\n\nAdditional tools may be available.\n</tools>"
        );
        assert_eq!(
            sections["rules"],
            "<rules>\n- Be concise in your responses\n- Show file paths clearly when working with files\n</rules>"
        );
        for explorer in ["grep", "find", "ls"] {
            let tools = [
                ToolPromptInfo::new("bash", Some("b"), &[]),
                ToolPromptInfo::new(explorer, Some("e"), &[]),
            ];
            let sections = build_system_prompt_sections(&options(&tools)).unwrap();
            assert!(!sections["rules"].as_str().unwrap().contains("Use bash"));
        }
        let both = [
            ToolPromptInfo::new("powershell", None, &[]),
            ToolPromptInfo::new("bash", None, &[]),
        ];
        let sections = build_system_prompt_sections(&options(&both)).unwrap();
        assert!(sections["rules"].as_str().unwrap().starts_with(
            "<rules>\n- Use bash or PowerShell for file operations like listing, searching, and finding files\n"
        ));
    }

    #[test]
    fn extension_sections_follow_cwd_or_replace_in_place() {
        let mut options = options(&[]);
        options.sections = vec![
            ("extra".to_owned(), "E".to_owned()),
            ("tools".to_owned(), "Replaced".to_owned()),
            ("empty".to_owned(), String::new()),
        ];
        let sections = build_system_prompt_sections(&options).unwrap();
        assert_eq!(
            names(&sections),
            ["preamble", "tools", "rules", "docs", "cwd", "extra"]
        );
        assert_eq!(sections["tools"], "<tools>\nReplaced\n</tools>");
        assert_eq!(sections["extra"], "<extra>\nE\n</extra>");
        for bad in ["preamble", "Upper", "1x", "", "a b", "é"] {
            options.sections = vec![(bad.to_owned(), "x".to_owned())];
            assert_eq!(
                build_system_prompt_sections(&options),
                Err(SystemPromptError::InvalidSectionName(bad.to_owned()))
            );
        }
        assert!(is_valid_section_name("a-b_9"));
        // A forced prompt skips the sections (and their validation).
        options.force_system_prompt = Some("Forced".to_owned());
        let state = build_system_prompt_state(&options).unwrap();
        assert_eq!(state.content, "Forced");
        assert_eq!(state.sections, None);
        assert_eq!(build_system_prompt(&options).unwrap(), "Forced");
    }

    #[test]
    fn diff_lists_changes_in_order_then_removals_as_null() {
        let previous = json!({"preamble": "P", "tools": "T", "skills": "S", "cwd": "C"});
        let current = json!({"preamble": "P", "tools": "T2", "cwd": "C", "extra": "X"});
        let patch = diff_system_prompt_sections(
            previous.as_object().unwrap(),
            current.as_object().unwrap(),
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&patch).unwrap(),
            r#"{"tools":"T2","extra":"X","skills":null}"#
        );
        assert_eq!(
            diff_system_prompt_sections(current.as_object().unwrap(), current.as_object().unwrap()),
            None
        );
    }

    #[test]
    fn rendering_joins_content_and_non_null_sections() {
        let sections = json!({"a": "A", "gone": null, "empty": "", "b": "B"});
        assert_eq!(
            render_system_prompt("", sections.as_object().unwrap()),
            "A\n\nB"
        );
        assert_eq!(
            render_system_prompt("C", sections.as_object().unwrap()),
            "C\n\nA\n\nB"
        );
    }
}
