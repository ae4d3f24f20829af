//! The resource steps of input processing (spec/resources.md §5, step 3): `/skill:name args`
//! becomes the skill's text block, then `/template args` becomes the expanded template.
//!
//! The session runs the whole pipeline: registered extension commands first, then the `input`
//! extension hook, then `expand_input` here (skipped for messages an extension sends), then
//! queueing or sending. Each step is also public on its own so the session can put other
//! steps between them.
//!
//! The skill block (the stored user message; the REPL recognises it with
//! `parse_skill_block`):
//!
//! ```text
//! <skill name="pdf-tools" location="/home/u/.pi/agent/skills/pdf-tools/SKILL.md">
//! References are relative to /home/u/.pi/agent/skills/pdf-tools.
//!
//! <body of SKILL.md without frontmatter, trimmed>
//! </skill>
//!
//! <args, when given>
//! ```
//!
//! Invariant: pure except that `expand_skill_command` reads the skill file through the reader
//! it is given (the reference reads it at expansion time, so edits show without `/reload`).

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use crate::session::resources::frontmatter::strip_frontmatter;
use crate::session::resources::paths::display;
use crate::session::resources::skills::Skill;
use crate::session::resources::templates::{PromptTemplate, expand_prompt_template};
use crate::session::resources::text::js_trim;

/// The prefix of a skill command.
pub const SKILL_COMMAND_PREFIX: &str = "/skill:";

/// Splits `/skill:name args` into the name (up to the first space) and the trimmed
/// arguments; `None` when the text is not a skill command.
pub fn parse_skill_command(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix(SKILL_COMMAND_PREFIX)?;
    Some(match rest.find(' ') {
        Some(space) => (&rest[..space], js_trim(&rest[space + 1..])),
        None => (rest, ""),
    })
}

/// Formats the user message for a skill invocation from the skill file's text.
///
/// # Errors
/// Returns the frontmatter error when the file's frontmatter is not valid YAML.
pub fn format_skill_block(
    skill: &Skill,
    file_content: &str,
    args: &str,
) -> Result<String, crate::session::resources::frontmatter::FrontmatterError> {
    let body = strip_frontmatter(file_content)?;
    let block = format!(
        "<skill name=\"{}\" location=\"{}\">\nReferences are relative to {}.\n\n{}\n</skill>",
        skill.name,
        display(&skill.file_path),
        display(&skill.base_dir),
        js_trim(&body)
    );
    Ok(if args.is_empty() {
        block
    } else {
        format!("{block}\n\n{args}")
    })
}

/// A skill invocation whose file could not be read or parsed; the input is then used as typed
/// and the session reports this as an extension error event (`skill_expansion`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct SkillExpansionError {
    /// The skill file.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

/// Expands `/skill:name args` for a known skill; `Ok(None)` when the text is not a skill
/// command or names no loaded skill (the text then passes through unchanged).
///
/// # Errors
/// Returns `SkillExpansionError` when the skill file cannot be read or parsed.
pub fn expand_skill_command(
    text: &str,
    skills: &[Skill],
    read_file: impl FnOnce(&Path) -> std::io::Result<Vec<u8>>,
) -> Result<Option<String>, SkillExpansionError> {
    let Some((name, args)) = parse_skill_command(text) else {
        return Ok(None);
    };
    let Some(skill) = skills.iter().find(|skill| skill.name == name) else {
        return Ok(None);
    };
    let fail = |message: String| SkillExpansionError {
        path: skill.file_path.clone(),
        message,
    };
    let bytes = read_file(&skill.file_path).map_err(|err| fail(err.to_string()))?;
    format_skill_block(skill, &String::from_utf8_lossy(&bytes), args)
        .map(Some)
        .map_err(|err| fail(err.to_string()))
}

/// The outcome of the resource expansion steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    /// The text to send or queue.
    pub text: String,
    /// A skill invocation that failed (the text is then the input as typed, possibly
    /// template-expanded).
    pub error: Option<SkillExpansionError>,
}

/// Runs `/skill:` expansion, then prompt-template expansion, as the reference does for typed
/// input.
pub fn expand_input(
    text: &str,
    skills: &[Skill],
    templates: &[PromptTemplate],
    read_file: impl FnOnce(&Path) -> std::io::Result<Vec<u8>>,
) -> Expanded {
    let (after_skill, error) = match expand_skill_command(text, skills, read_file) {
        Ok(Some(expanded)) => (expanded, None),
        Ok(None) => (text.to_string(), None),
        Err(err) => (text.to_string(), Some(err)),
    };
    let text = expand_prompt_template(&after_skill, templates).unwrap_or(after_skill);
    Expanded { text, error }
}

/// A stored skill invocation message, taken apart for display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillBlock {
    /// The skill's name.
    pub name: String,
    /// The skill file's path.
    pub location: String,
    /// The text between the opening and closing tags.
    pub content: String,
    /// The user's arguments after the block, trimmed; `None` when absent or blank.
    pub user_message: Option<String>,
}

static SKILL_BLOCK: LazyLock<Regex> = LazyLock::new(|| {
    // A constant pattern that is known to compile.
    #[allow(clippy::expect_used)]
    Regex::new(
        r#"^<skill name="([^"]+)" location="([^"]+)">\n((?s:.)*?)\n</skill>(?:\n\n((?s:.)+))?$"#,
    )
    .expect("valid regex")
});

/// Recognises a skill invocation message (the reference's `parseSkillBlock`).
pub fn parse_skill_block(text: &str) -> Option<SkillBlock> {
    let caps = SKILL_BLOCK.captures(text)?;
    Some(SkillBlock {
        name: caps[1].to_string(),
        location: caps[2].to_string(),
        content: caps[3].to_string(),
        user_message: caps
            .get(4)
            .map(|m| js_trim(m.as_str()).to_string())
            .filter(|message| !message.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::resources::origin::ResourceOrigin;

    fn skill() -> Skill {
        Skill {
            name: "pdf-tools".to_string(),
            description: "d".to_string(),
            file_path: PathBuf::from("/s/pdf-tools/SKILL.md"),
            base_dir: PathBuf::from("/s/pdf-tools"),
            origin: ResourceOrigin::UserAuto,
            disable_model_invocation: false,
        }
    }

    const FILE: &str = "---\nname: pdf-tools\ndescription: d\n---\n\nUse pdftotext.\n";

    #[test]
    fn skill_command_expands_with_and_without_args() {
        let skills = [skill()];
        let plain = expand_skill_command("/skill:pdf-tools", &skills, |_| Ok(FILE.into())).unwrap();
        assert_eq!(
            plain.as_deref(),
            Some(
                "<skill name=\"pdf-tools\" location=\"/s/pdf-tools/SKILL.md\">\nReferences are relative to /s/pdf-tools.\n\nUse pdftotext.\n</skill>"
            )
        );
        let with_args =
            expand_skill_command("/skill:pdf-tools   a.pdf b  ", &skills, |_| Ok(FILE.into()))
                .unwrap()
                .unwrap();
        assert!(with_args.ends_with("</skill>\n\na.pdf b"));
        let parsed = parse_skill_block(&with_args).unwrap();
        assert_eq!(parsed.name, "pdf-tools");
        assert_eq!(parsed.location, "/s/pdf-tools/SKILL.md");
        assert_eq!(
            parsed.content,
            "References are relative to /s/pdf-tools.\n\nUse pdftotext."
        );
        assert_eq!(parsed.user_message.as_deref(), Some("a.pdf b"));
    }

    #[test]
    fn unknown_skill_and_other_text_pass_through() {
        let skills = [skill()];
        let never = |_: &Path| -> std::io::Result<Vec<u8>> { panic!("must not read") };
        assert_eq!(
            expand_skill_command("/skill:nope x", &skills, never).unwrap(),
            None
        );
        assert_eq!(expand_skill_command("hello", &skills, never).unwrap(), None);
        assert_eq!(
            expand_skill_command("/skill:pdf-toolsx", &skills, never).unwrap(),
            None
        );
    }

    #[test]
    fn read_failure_keeps_the_text_and_reports() {
        let skills = [skill()];
        let res = expand_input("/skill:pdf-tools go", &skills, &[], |_| {
            Err(std::io::Error::new(std::io::ErrorKind::NotFound, "gone"))
        });
        assert_eq!(res.text, "/skill:pdf-tools go");
        let err = res.error.unwrap();
        assert_eq!(err.path, PathBuf::from("/s/pdf-tools/SKILL.md"));
        assert_eq!(err.message, "gone");
    }

    #[test]
    fn unknown_skill_falls_through_to_templates() {
        let template = PromptTemplate {
            name: "skill:pdf-tools".to_string(),
            description: String::new(),
            argument_hint: None,
            content: "T:$@".to_string(),
            file_path: PathBuf::from("/p/x.md"),
            origin: ResourceOrigin::UserAuto,
        };
        // An unknown skill falls through to templates, where the name may match.
        let res = expand_input("/skill:pdf-tools a", &[], &[template], |_| Ok(Vec::new()));
        assert_eq!(res.text, "T:a");
    }

    #[test]
    fn parse_skill_block_rejects_other_text() {
        assert_eq!(parse_skill_block("hello"), None);
        assert_eq!(
            parse_skill_block("<skill name=\"a\" location=\"b\">\nx\n</skill>\n\n  ")
                .and_then(|b| b.user_message),
            None
        );
    }
}
