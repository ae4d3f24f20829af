//! The system prompt, assembled from values exactly as the reference's `buildSystemPrompt`
//! does (spec/resources.md §1), and the skills index it embeds (§3.5).
//!
//! Default prompt layout (sections joined as shown, `…` filled from the inputs):
//!
//! ```text
//! You are an expert coding assistant operating inside pi, …
//!
//! Available tools:
//! - read: Read file contents            ← active tools with a snippet, or "(none)"
//!
//! In addition to the tools above, …
//!
//! Guidelines:
//! - …                                   ← bash/grep rule, tool guidelines, two fixed ones
//!
//! Pi documentation (…):
//! - Main documentation: <readme> …
//! [\n\n<append>][\n\n# Project Context …][\n\n<skills index>]
//! Current date: YYYY-MM-DD
//! Current working directory: <cwd>
//! ```
//!
//! A custom base prompt (`--system-prompt`/`SYSTEM.md`) replaces everything up to the
//! documentation block; append text, context files, the skills index (only with `read`
//! active) and the date/cwd lines follow it the same way.
//!
//! Invariant: pure — the date, the working directory and the documentation paths are inputs.

use std::path::{Path, PathBuf};

use chrono::{Datelike, NaiveDate};

use crate::session::resources::context_files::ContextFile;
use crate::session::resources::paths::display;
use crate::session::resources::skills::Skill;
use crate::session::resources::text::{collapse_whitespace, escape_xml, js_trim};

/// What one active tool contributes to the system prompt. The tools layer fills these in
/// activation order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPromptInfo {
    /// The tool's name (`read`, `bash`, …).
    pub name: String,
    /// A one-line description for `Available tools:`; a tool without one is not listed.
    /// Newlines and runs of whitespace are collapsed to single spaces.
    pub snippet: Option<String>,
    /// Bullets for `Guidelines:` (trimmed; empty ones and repeats are dropped).
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
}

/// Where the harness's own documentation lives, for the default prompt's documentation block.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Everything the system prompt is built from.
#[derive(Debug, Clone)]
pub struct SystemPromptInput<'a> {
    /// The custom base prompt (`--system-prompt` or `SYSTEM.md`); empty counts as none.
    pub custom_prompt: Option<&'a str>,
    /// The append texts (`--append-system-prompt` values or `APPEND_SYSTEM.md`), joined with
    /// a blank line.
    pub append: &'a [String],
    /// The active tools, in activation order.
    pub tools: &'a [ToolPromptInfo],
    /// The project context files, in prompt order.
    pub context_files: &'a [ContextFile],
    /// The loaded skills; hidden ones are left out of the index here.
    pub skills: &'a [Skill],
    /// The working directory shown in the last line.
    pub cwd: &'a Path,
    /// Today's local calendar date.
    pub date: NaiveDate,
    /// The documentation block's paths.
    pub docs: &'a HarnessDocs,
}

/// Formats the skills index: the model-visible skills as `<available_skills>` XML after three
/// instruction lines; an empty string when no skill is visible.
pub fn format_skills_for_prompt(skills: &[Skill]) -> String {
    let visible: Vec<&Skill> = skills
        .iter()
        .filter(|skill| !skill.disable_model_invocation)
        .collect();
    if visible.is_empty() {
        return String::new();
    }
    let mut lines = vec![
        "\n\nThe following skills provide specialized instructions for specific tasks.".to_string(),
        "Use the read tool to load a skill's file when the task matches its description.".to_string(),
        "When a skill file references a relative path, resolve it against the skill directory (parent of SKILL.md / dirname of the path) and use that absolute path in tool commands.".to_string(),
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

/// Formats a date as `YYYY-MM-DD`.
fn format_date(date: NaiveDate) -> String {
    format!("{}-{:02}-{:02}", date.year(), date.month(), date.day())
}

/// Appends the sections every prompt ends with: append text, context files, skills (when
/// `include_skills`), date and working directory.
fn push_tail(prompt: &mut String, input: &SystemPromptInput<'_>, include_skills: bool) {
    let append = input.append.join("\n\n");
    if !append.is_empty() {
        prompt.push_str("\n\n");
        prompt.push_str(&append);
    }
    if !input.context_files.is_empty() {
        prompt.push_str("\n\n# Project Context\n\n");
        prompt.push_str("Project-specific instructions and guidelines:\n\n");
        for file in input.context_files {
            prompt.push_str(&format!(
                "## {}\n\n{}\n\n",
                display(&file.path),
                file.content
            ));
        }
    }
    if include_skills && !input.skills.is_empty() {
        prompt.push_str(&format_skills_for_prompt(input.skills));
    }
    prompt.push_str(&format!("\nCurrent date: {}", format_date(input.date)));
    prompt.push_str(&format!(
        "\nCurrent working directory: {}",
        display(input.cwd).replace('\\', "/")
    ));
}

/// Collects the guidelines in the reference's order, first occurrence kept.
fn guidelines(tools: &[ToolPromptInfo]) -> Vec<String> {
    let mut res: Vec<String> = Vec::new();
    let mut add = |guideline: &str| {
        if !res.iter().any(|seen| seen == guideline) {
            res.push(guideline.to_string());
        }
    };
    let has = |name: &str| tools.iter().any(|tool| tool.name == name);
    let has_explorer = has("grep") || has("find") || has("ls");
    if has("bash") && !has_explorer {
        add("Use bash for file operations like ls, rg, find");
    } else if has("bash") {
        add(
            "Prefer grep/find/ls tools over bash for file exploration (faster, respects .gitignore)",
        );
    }
    for tool in tools {
        for guideline in &tool.guidelines {
            let guideline = js_trim(guideline);
            if !guideline.is_empty() {
                add(guideline);
            }
        }
    }
    add("Be concise in your responses");
    add("Show file paths clearly when working with files");
    res
}

/// Builds the system prompt.
pub fn build_system_prompt(input: &SystemPromptInput<'_>) -> String {
    let has_read = input.tools.iter().any(|tool| tool.name == "read");
    if let Some(custom) = input.custom_prompt.filter(|custom| !custom.is_empty()) {
        let mut prompt = custom.to_string();
        push_tail(&mut prompt, input, has_read);
        return prompt;
    }

    let tool_lines: Vec<String> = input
        .tools
        .iter()
        .filter_map(|tool| {
            let snippet = collapse_whitespace(tool.snippet.as_deref()?);
            (!snippet.is_empty()).then(|| format!("- {}: {}", tool.name, snippet))
        })
        .collect();
    let tools_list = if tool_lines.is_empty() {
        "(none)".to_string()
    } else {
        tool_lines.join("\n")
    };
    let guideline_lines = guidelines(input.tools)
        .iter()
        .map(|guideline| format!("- {guideline}"))
        .collect::<Vec<_>>()
        .join("\n");
    let readme = display(&input.docs.readme);
    let docs = display(&input.docs.docs);
    let examples = display(&input.docs.examples);

    let mut prompt = format!(
        "You are an expert coding assistant operating inside pi, a coding agent harness. You help users by reading files, executing commands, editing code, and writing new files.

Available tools:
{tools_list}

In addition to the tools above, you may have access to other custom tools depending on the project.

Guidelines:
{guideline_lines}

Pi documentation (read only when the user asks about pi itself, its SDK, extensions, themes, skills, or TUI):
- Main documentation: {readme}
- Additional docs: {docs}
- Examples: {examples} (extensions, custom tools, SDK)
- When asked about: extensions (docs/extensions.md, examples/extensions/), themes (docs/themes.md), skills (docs/skills.md), prompt templates (docs/prompt-templates.md), TUI components (docs/tui.md), keybindings (docs/keybindings.md), SDK integrations (docs/sdk.md), custom providers (docs/custom-provider.md), adding models (docs/models.md), pi packages (docs/packages.md)
- When working on pi topics, read the docs and examples, and follow .md cross-references before implementing
- Always read pi .md files completely and follow links to related docs (e.g., tui.md for TUI API details)"
    );
    push_tail(&mut prompt, input, has_read);
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::resources::origin::ResourceOrigin;

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

    fn date() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 3, 7).unwrap()
    }

    fn docs() -> HarnessDocs {
        HarnessDocs::in_dir(Path::new("/pkg"))
    }

    #[test]
    fn custom_prompt_gets_append_context_skills_and_date() {
        let tools = [ToolPromptInfo::new("read", Some("Read"), &[])];
        let context = [ContextFile {
            path: PathBuf::from("/w/AGENTS.md"),
            content: "Rules".to_string(),
        }];
        let skills = [skill("a", false), skill("b", true)];
        let append = ["one".to_string(), "two".to_string()];
        let docs = docs();
        let prompt = build_system_prompt(&SystemPromptInput {
            custom_prompt: Some("Custom."),
            append: &append,
            tools: &tools,
            context_files: &context,
            skills: &skills,
            cwd: Path::new("C:\\w\\p"),
            date: date(),
            docs: &docs,
        });
        let expected = "Custom.\n\none\n\ntwo\n\n# Project Context\n\nProject-specific instructions and guidelines:\n\n## /w/AGENTS.md\n\nRules\n\n\n\nThe following skills provide specialized instructions for specific tasks.\nUse the read tool to load a skill's file when the task matches its description.\nWhen a skill file references a relative path, resolve it against the skill directory (parent of SKILL.md / dirname of the path) and use that absolute path in tool commands.\n\n<available_skills>\n  <skill>\n    <name>a</name>\n    <description>a &lt;d&gt;</description>\n    <location>/s/a/SKILL.md</location>\n  </skill>\n</available_skills>\nCurrent date: 2026-03-07\nCurrent working directory: C:/w/p";
        assert_eq!(prompt, expected);
    }

    #[test]
    fn skills_index_needs_read_and_a_visible_skill() {
        let docs = docs();
        let only_hidden = [skill("b", true)];
        let with_read = [ToolPromptInfo::new("read", Some("Read"), &[])];
        let base = SystemPromptInput {
            custom_prompt: Some("C"),
            append: &[],
            tools: &with_read,
            context_files: &[],
            skills: &only_hidden,
            cwd: Path::new("/w"),
            date: date(),
            docs: &docs,
        };
        assert_eq!(
            build_system_prompt(&base),
            "C\nCurrent date: 2026-03-07\nCurrent working directory: /w"
        );
        let visible = [skill("a", false)];
        let no_read = [ToolPromptInfo::new("bash", Some("Run"), &[])];
        let prompt = build_system_prompt(&SystemPromptInput {
            tools: &no_read,
            skills: &visible,
            ..base
        });
        assert!(!prompt.contains("<available_skills>"));
    }

    #[test]
    fn empty_custom_prompt_means_the_default_prompt() {
        let docs = docs();
        let prompt = build_system_prompt(&SystemPromptInput {
            custom_prompt: Some(""),
            append: &[String::new()],
            tools: &[],
            context_files: &[],
            skills: &[],
            cwd: Path::new("/w"),
            date: date(),
            docs: &docs,
        });
        assert!(prompt.starts_with("You are an expert coding assistant"));
        assert!(prompt.contains("Available tools:\n(none)\n"));
        assert!(prompt.contains("Guidelines:\n- Be concise in your responses\n- Show file paths clearly when working with files\n"));
        assert!(prompt.contains("- Main documentation: /pkg/README.md\n- Additional docs: /pkg/docs\n- Examples: /pkg/examples (extensions"));
        assert!(prompt.ends_with("(e.g., tui.md for TUI API details)\nCurrent date: 2026-03-07\nCurrent working directory: /w"));
    }

    #[test]
    fn tool_lines_use_normalised_snippets_and_deduplicated_guidelines() {
        let docs = docs();
        let tools = [
            ToolPromptInfo::new(
                "bash",
                Some("Run\n  shell\r\ncommands "),
                &["  Shared rule ", ""],
            ),
            ToolPromptInfo::new("hidden", None, &["Shared rule", "Own rule"]),
            ToolPromptInfo::new("blank", Some(" \n "), &[]),
            ToolPromptInfo::new("ls", Some("List"), &["Be concise in your responses"]),
        ];
        let prompt = build_system_prompt(&SystemPromptInput {
            custom_prompt: None,
            append: &[],
            tools: &tools,
            context_files: &[],
            skills: &[],
            cwd: Path::new("/w"),
            date: date(),
            docs: &docs,
        });
        assert!(prompt.contains("Available tools:\n- bash: Run shell commands\n- ls: List\n\n"));
        assert!(prompt.contains(
            "Guidelines:\n- Prefer grep/find/ls tools over bash for file exploration (faster, respects .gitignore)\n- Shared rule\n- Own rule\n- Be concise in your responses\n- Show file paths clearly when working with files\n\n"
        ));
    }
}
