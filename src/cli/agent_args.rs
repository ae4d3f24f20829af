//! The agent's command line, parsed exactly as the reference parses it (`dist/cli/args.js`,
//! spec models-providers-settings §13.1): value flags take the next argument only when there
//! is one, `-p` takes the next argument as a message unless it starts with `@` or `-`
//! (`---…` counts as text), `@path` is a file argument, other words are messages, an unknown
//! single-dash option is an error and unknown `--name[=value]` flags are collected (they are
//! an error unless an extension declares them). The multi-letter short forms (`-nc`, `-nt`,
//! `-nbt`, `-ne`, `-ns`, `-np`, `-na`) are their long forms.

use std::collections::BTreeMap;

use crate::session::tools::{is_tool_modifier, parse_tools_flag};

pub use crate::modes::Mode;

/// `--list-models` with or without a search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListModels {
    /// Every available model.
    All,
    /// Models matching the search.
    Search(String),
}

/// A diagnostic of parsing (the reference prints warnings and stops on errors).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Diagnostic {
    /// Printed, parsing goes on.
    Warning(String),
    /// Printed; pi exits with status 2.
    Error(String),
}

/// The parsed agent command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentArgs {
    /// `--help`.
    pub help: bool,
    /// `--version`.
    pub version: bool,
    /// `--mode`.
    pub mode: Option<Mode>,
    /// `-c`.
    pub continue_session: bool,
    /// `-r`.
    pub resume: bool,
    /// `--provider`.
    pub provider: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--api-key`.
    pub api_key: Option<String>,
    /// `--system-prompt`.
    pub system_prompt: Option<String>,
    /// `--append-system-prompt` (repeatable).
    pub append_system_prompt: Option<Vec<String>>,
    /// `--no-session`.
    pub no_session: bool,
    /// `--session`.
    pub session: Option<String>,
    /// `--session-id`: the current directory's session with this id, created when missing.
    pub session_id: Option<String>,
    /// `--fork`.
    pub fork: Option<String>,
    /// `--session-dir`.
    pub session_dir: Option<String>,
    /// `--models` (comma-separated, trimmed).
    pub models: Option<Vec<String>>,
    /// `--no-tools`.
    pub no_tools: bool,
    /// `--no-builtin-tools`.
    pub no_builtin_tools: bool,
    /// `--tools` (comma-separated, empty names dropped): plain names and `*` patterns (an
    /// allowlist), or only `+name`/`-name` entries (changes to the default tools); a list that
    /// mixes them, or a modifier with a pattern, is an error (1.6.0 `getToolListError`).
    pub tools: Option<Vec<String>>,
    /// `--exclude-tools`/`-xt` (comma-separated names and `*` patterns never registered).
    pub exclude_tools: Option<Vec<String>>,
    /// `--name`/`-n`: the name the session is given at start (a `session_info` entry).
    pub name: Option<String>,
    /// `--thinking` (valid levels only; an invalid one is a warning).
    pub thinking: Option<String>,
    /// `-p`.
    pub print: bool,
    /// `--export`.
    pub export: Option<String>,
    /// `-e` (repeatable).
    pub extensions: Vec<String>,
    /// `--no-extensions`.
    pub no_extensions: bool,
    /// `--no-mcp`: no MCP servers for this run.
    pub no_mcp: bool,
    /// `--skill` (repeatable).
    pub skills: Vec<String>,
    /// `--prompt-template` (repeatable).
    pub prompt_templates: Vec<String>,
    /// `--theme` (repeatable): theme files or directories, loaded even with `--no-themes`.
    pub themes: Vec<String>,
    /// `--use-theme NAME[/NAME]`: the REPL's theme for this run (the `theme` setting's form).
    pub use_theme: Option<String>,
    /// `--no-skills`.
    pub no_skills: bool,
    /// `--no-prompt-templates`.
    pub no_prompt_templates: bool,
    /// `--no-themes`.
    pub no_themes: bool,
    /// `--no-context-files`.
    pub no_context_files: bool,
    /// `--approve` (`Some(true)`: trust the project for this run) or `--no-approve`
    /// (`Some(false)`: ignore its protected resources); the last one given wins.
    pub project_trust_override: Option<bool>,
    /// `--list-models`.
    pub list_models: Option<ListModels>,
    /// `--verbose`.
    pub verbose: bool,
    /// `--offline`.
    pub offline: bool,
    /// `@file` arguments (without the `@`).
    pub file_args: Vec<String>,
    /// Message words, in order.
    pub messages: Vec<String>,
    /// Unknown `--name[=value]` flags (`true` when given without a value).
    pub unknown_flags: BTreeMap<String, Option<String>>,
    /// Warnings and errors.
    pub diagnostics: Vec<Diagnostic>,
}

const THINKING_LEVELS: [&str; 7] = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];

/// What is wrong with a `--tools` list, if anything (1.6.0 `getToolListError`): it is either
/// an allowlist of names and patterns, or only `+name`/`-name` entries with exact names.
pub fn tool_list_error(entries: &[String]) -> Option<String> {
    let modifiers: Vec<&String> = entries
        .iter()
        .filter(|entry| is_tool_modifier(entry))
        .collect();
    if modifiers.is_empty() {
        return None;
    }
    if modifiers.len() < entries.len() {
        return Some("tool names cannot be mixed with +name or -name entries".to_owned());
    }
    modifiers
        .iter()
        .find(|entry| entry.contains('*'))
        .map(|pattern| {
            format!("+name and -name entries take exact tool names, not patterns: {pattern}")
        })
}

/// Parses the agent's arguments (without the program name).
pub fn parse(args: &[String]) -> AgentArgs {
    let mut out = AgentArgs::default();
    let mut idx = 0;
    let take = |idx: &mut usize| -> Option<String> {
        if *idx + 1 < args.len() {
            *idx += 1;
            Some(args[*idx].clone())
        } else {
            None
        }
    };
    while idx < args.len() {
        let arg = args[idx].as_str();
        let has_value = idx + 1 < args.len();
        match arg {
            // Ends the options: everything after it is a message (or an `@file`), as 1.6.0
            // reads it.
            "--" => {
                for rest in &args[idx + 1..] {
                    match rest.strip_prefix('@') {
                        Some(file) => out.file_args.push(file.to_owned()),
                        None => out.messages.push(rest.clone()),
                    }
                }
                break;
            }
            "--help" | "-h" => out.help = true,
            "--version" | "-v" => out.version = true,
            "--mode" if has_value => {
                if let Some(mode) = take(&mut idx) {
                    match mode.as_str() {
                        "text" => out.mode = Some(Mode::Text),
                        "json" => out.mode = Some(Mode::Json),
                        "rpc" => out.mode = Some(Mode::Rpc),
                        _ => {}
                    }
                }
            }
            "--continue" | "-c" => out.continue_session = true,
            "--resume" | "-r" => out.resume = true,
            "--provider" if has_value => out.provider = take(&mut idx),
            "--model" if has_value => out.model = take(&mut idx),
            "--api-key" if has_value => out.api_key = take(&mut idx),
            "--system-prompt" if has_value => out.system_prompt = take(&mut idx),
            "--append-system-prompt" if has_value => {
                if let Some(value) = take(&mut idx) {
                    out.append_system_prompt
                        .get_or_insert_with(Vec::new)
                        .push(value);
                }
            }
            "--no-session" => out.no_session = true,
            "--session" if has_value => out.session = take(&mut idx),
            "--session-id" if has_value => out.session_id = take(&mut idx),
            "--fork" if has_value => out.fork = take(&mut idx),
            "--session-dir" if has_value => out.session_dir = take(&mut idx),
            "--models" if has_value => {
                out.models = take(&mut idx).map(|value| {
                    value
                        .split(',')
                        .map(|part| part.trim().to_owned())
                        .collect()
                });
            }
            "--no-tools" | "-nt" => out.no_tools = true,
            "--no-builtin-tools" | "-nbt" => out.no_builtin_tools = true,
            "--tools" | "-t" if has_value => {
                let tools = take(&mut idx).map(|value| parse_tools_flag(&value));
                match tools.as_deref().and_then(tool_list_error) {
                    Some(error) => out
                        .diagnostics
                        .push(Diagnostic::Error(format!("{arg}: {error}"))),
                    None => out.tools = tools,
                }
            }
            "--exclude-tools" | "-xt" if has_value => {
                out.exclude_tools = take(&mut idx).map(|value| parse_tools_flag(&value));
            }
            "--name" | "-n" => match take(&mut idx) {
                Some(name) => out.name = Some(name),
                None => out
                    .diagnostics
                    .push(Diagnostic::Error("--name requires a value".to_owned())),
            },
            "--thinking" if has_value => {
                if let Some(level) = take(&mut idx) {
                    if THINKING_LEVELS.contains(&level.as_str()) {
                        out.thinking = Some(level);
                    } else {
                        out.diagnostics.push(Diagnostic::Warning(format!(
                            "Invalid thinking level \"{level}\". Valid values: {}",
                            THINKING_LEVELS.join(", ")
                        )));
                    }
                }
            }
            "--print" | "-p" => {
                out.print = true;
                if let Some(next) = args.get(idx + 1)
                    && !next.starts_with('@')
                    && (!next.starts_with('-') || next.starts_with("---"))
                {
                    out.messages.push(next.clone());
                    idx += 1;
                }
            }
            "--export" if has_value => out.export = take(&mut idx),
            "--extension" | "-e" if has_value => out.extensions.extend(take(&mut idx)),
            "--no-extensions" | "-ne" => out.no_extensions = true,
            "--no-mcp" => out.no_mcp = true,
            "--skill" if has_value => out.skills.extend(take(&mut idx)),
            "--prompt-template" if has_value => out.prompt_templates.extend(take(&mut idx)),
            "--theme" if has_value => out.themes.extend(take(&mut idx)),
            "--use-theme" if has_value => out.use_theme = take(&mut idx),
            "--no-skills" | "-ns" => out.no_skills = true,
            "--no-prompt-templates" | "-np" => out.no_prompt_templates = true,
            "--no-themes" => out.no_themes = true,
            "--no-context-files" | "-nc" => out.no_context_files = true,
            "--approve" | "-a" => out.project_trust_override = Some(true),
            "--no-approve" | "-na" => out.project_trust_override = Some(false),
            "--list-models" => match args.get(idx + 1) {
                Some(next) if !next.starts_with('-') && !next.starts_with('@') => {
                    out.list_models = Some(ListModels::Search(next.clone()));
                    idx += 1;
                }
                _ => out.list_models = Some(ListModels::All),
            },
            "--verbose" => out.verbose = true,
            "--offline" => out.offline = true,
            _ if arg.starts_with('@') => out.file_args.push(arg[1..].to_owned()),
            _ if arg.starts_with("--") => {
                let name = &arg[2..];
                match name.split_once('=') {
                    Some((name, value)) => {
                        out.unknown_flags
                            .insert(name.to_owned(), Some(value.to_owned()));
                    }
                    None => match args.get(idx + 1) {
                        Some(next) if !next.starts_with('-') && !next.starts_with('@') => {
                            out.unknown_flags
                                .insert(name.to_owned(), Some(next.clone()));
                            idx += 1;
                        }
                        _ => {
                            out.unknown_flags.insert(name.to_owned(), None);
                        }
                    },
                }
            }
            _ if arg.starts_with('-') => {
                out.diagnostics
                    .push(Diagnostic::Error(format!("Unknown option: {arg}")));
            }
            _ => out.messages.push(arg.to_owned()),
        }
        idx += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(args: &[&str]) -> AgentArgs {
        parse(&args.iter().map(|arg| (*arg).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn print_takes_the_next_word_unless_it_is_a_flag_or_file() {
        let args = parse_str(&["-p", "hello", "world"]);
        assert!(args.print);
        assert_eq!(args.messages, ["hello", "world"]);
        let args = parse_str(&["-p", "@notes.md", "go"]);
        assert_eq!(args.file_args, ["notes.md"]);
        assert_eq!(args.messages, ["go"]);
        let args = parse_str(&["-p", "---not-a-flag"]);
        assert_eq!(args.messages, ["---not-a-flag"]);
        let args = parse_str(&["-p", "-c"]);
        assert!(args.continue_session && args.messages.is_empty());
    }

    #[test]
    fn multi_letter_short_forms_are_their_long_forms() {
        let args = parse_str(&["-nc", "-nt", "-nbt", "-ne", "-ns", "-np"]);
        assert!(args.no_context_files && args.no_tools && args.no_builtin_tools);
        assert!(args.no_extensions && args.no_skills && args.no_prompt_templates);
        assert!(args.diagnostics.is_empty());
    }

    #[test]
    fn approve_and_no_approve_override_project_trust_and_the_last_wins() {
        assert_eq!(parse_str(&["hi"]).project_trust_override, None);
        assert_eq!(parse_str(&["-a"]).project_trust_override, Some(true));
        assert_eq!(parse_str(&["--approve"]).project_trust_override, Some(true));
        assert_eq!(parse_str(&["-na"]).project_trust_override, Some(false));
        let args = parse_str(&["--no-approve", "--approve", "-p", "x"]);
        assert_eq!(args.project_trust_override, Some(true));
        assert_eq!(args.messages, ["x"]);
        assert!(args.diagnostics.is_empty());
    }

    #[test]
    fn value_flags_lists_and_unknowns() {
        let args = parse_str(&[
            "--model",
            "anthropic/claude:high",
            "--tools",
            "read, bash,,",
            "--append-system-prompt",
            "a",
            "--append-system-prompt",
            "b",
            "--models",
            "x, y",
            "--custom=1",
            "--flag",
            "value",
            "--bool",
            "-x",
        ]);
        assert_eq!(args.model.as_deref(), Some("anthropic/claude:high"));
        assert_eq!(args.tools, Some(vec!["read".to_owned(), "bash".to_owned()]));
        assert_eq!(
            args.append_system_prompt,
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        assert_eq!(args.models, Some(vec!["x".to_owned(), "y".to_owned()]));
        assert_eq!(
            args.unknown_flags.get("custom"),
            Some(&Some("1".to_owned()))
        );
        assert_eq!(
            args.unknown_flags.get("flag"),
            Some(&Some("value".to_owned()))
        );
        assert_eq!(args.unknown_flags.get("bool"), Some(&None));
        assert_eq!(
            args.diagnostics,
            [Diagnostic::Error("Unknown option: -x".to_owned())]
        );
    }

    #[test]
    fn a_value_flag_at_the_end_is_unknown_and_bad_levels_warn() {
        let args = parse_str(&["--model"]);
        assert_eq!(args.model, None);
        assert_eq!(args.unknown_flags.get("model"), Some(&None));
        let args = parse_str(&[
            "--thinking",
            "maximal",
            "--mode",
            "weird",
            "--list-models",
            "gpt",
        ]);
        assert!(
            matches!(&args.diagnostics[0], Diagnostic::Warning(text) if text.contains("maximal"))
        );
        assert_eq!(
            parse_str(&["--thinking", "max"]).thinking.as_deref(),
            Some("max")
        );
        assert_eq!(args.mode, None);
        assert_eq!(args.list_models, Some(ListModels::Search("gpt".to_owned())));
    }

    #[test]
    fn a_double_dash_ends_the_options() {
        let args = parse_str(&["-p", "--", "--not-a-flag", "@notes.txt", "-x"]);
        assert!(args.print);
        assert_eq!(args.messages, ["--not-a-flag", "-x"]);
        assert_eq!(args.file_args, ["notes.txt"]);
        assert!(args.diagnostics.is_empty());
        assert!(args.unknown_flags.is_empty());
    }

    #[test]
    fn tool_lists_names_and_exclusions_parse_as_1_6_0_parses_them() {
        let args = parse_str(&["-t", "+ls, -write", "-xt", "b*,ls", "-n", "Two\nlines"]);
        assert_eq!(
            args.tools,
            Some(vec!["+ls".to_owned(), "-write".to_owned()])
        );
        assert_eq!(
            args.exclude_tools,
            Some(vec!["b*".to_owned(), "ls".to_owned()])
        );
        assert_eq!(args.name.as_deref(), Some("Two\nlines"));
        assert!(args.diagnostics.is_empty());
        let mixed = parse_str(&["--tools", "read,+ls"]);
        assert_eq!(mixed.tools, None);
        assert_eq!(
            mixed.diagnostics,
            [Diagnostic::Error(
                "--tools: tool names cannot be mixed with +name or -name entries".to_owned()
            )]
        );
        assert_eq!(
            parse_str(&["-t", "+g*"]).diagnostics,
            [Diagnostic::Error(
                "-t: +name and -name entries take exact tool names, not patterns: +g*".to_owned()
            )]
        );
        assert_eq!(
            parse_str(&["-n"]).diagnostics,
            [Diagnostic::Error("--name requires a value".to_owned())]
        );
    }
}
