//! Prompt templates: loading a template file, and the pure argument parsing and
//! substitution behind `/name args` (spec/resources.md §4).
//!
//! Substitution runs four passes over the template text, each over the previous pass's
//! output, exactly as the reference does:
//!
//! 1. `$N` (decimal, N ≥ 1) → argument N, or `""` (`$0` → `""`);
//! 2. `${@:N}` → arguments N… joined by one space; `${@:N:L}` → L arguments from N (N = 0 is 1);
//! 3. `$ARGUMENTS` → all arguments joined by one space;
//! 4. `$@` → the same.
//!
//! Passes 3 and 4 replace with a *string* in the reference (`String.prototype.replace`), so
//! `$$`, `$&`, `` $` `` and `$'` inside the arguments are expanded by JavaScript's
//! substitution rules; this module reproduces that too. Example: template `Fix $1 in $@`,
//! input `/fix "the bug" src/a.rs` → `Fix the bug in the bug src/a.rs`.
//!
//! Invariant: everything but `load_template_file` is pure.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::{Captures, Regex};

use crate::session::resources::frontmatter::{FrontmatterError, parse_frontmatter};
use crate::session::resources::origin::ResourceOrigin;
use crate::session::resources::text::{is_blank, utf16_len, utf16_prefix};

/// A description taken from the body's first line is cut to this many UTF-16 code units.
pub const DESCRIPTION_FROM_BODY_MAX: usize = 60;

/// A loaded prompt template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptTemplate {
    /// The name: the file name without `.md` (`/name` invokes it).
    pub name: String,
    /// Frontmatter `description`, else the body's first non-blank line (cut to 60 + `...`).
    pub description: String,
    /// Frontmatter `argument-hint`, shown in completion.
    pub argument_hint: Option<String>,
    /// The template text: the body (trimmed only when there was frontmatter).
    pub content: String,
    /// The template file.
    pub file_path: PathBuf,
    /// Where it was found.
    pub origin: ResourceOrigin,
}

/// Builds a template from a file's path and text.
///
/// # Errors
/// Returns `FrontmatterError` when the frontmatter is not valid YAML.
pub fn parse_template(
    file_path: &Path,
    content: &str,
    origin: ResourceOrigin,
) -> Result<PromptTemplate, FrontmatterError> {
    let doc = parse_frontmatter(content)?;
    let file_name = file_path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = file_name
        .strip_suffix(".md")
        .unwrap_or(&file_name)
        .to_string();
    let description = doc
        .frontmatter
        .truthy_text("description")
        .or_else(|| {
            let first = doc.body.split('\n').find(|line| !is_blank(line))?;
            let mut res = utf16_prefix(first, DESCRIPTION_FROM_BODY_MAX).to_string();
            if utf16_len(first) > DESCRIPTION_FROM_BODY_MAX {
                res.push_str("...");
            }
            Some(res)
        })
        .unwrap_or_default();
    Ok(PromptTemplate {
        name,
        description,
        argument_hint: doc.frontmatter.truthy_text("argument-hint"),
        content: doc.body,
        file_path: file_path.to_path_buf(),
        origin,
    })
}

/// A template file that could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum TemplateLoadError {
    /// The file could not be read.
    #[error("could not read prompt template: {0}")]
    Read(#[from] std::io::Error),
    /// The frontmatter is not valid YAML.
    #[error(transparent)]
    Frontmatter(#[from] FrontmatterError),
}

/// Reads and parses one template file.
///
/// # Errors
/// Returns `TemplateLoadError` when the file cannot be read or its frontmatter is invalid.
pub fn load_template_file(
    file_path: &Path,
    origin: ResourceOrigin,
) -> Result<PromptTemplate, TemplateLoadError> {
    let bytes = std::fs::read(file_path)?;
    Ok(parse_template(
        file_path,
        &String::from_utf8_lossy(&bytes),
        origin,
    )?)
}

/// Splits a template's argument string like the reference's `parseCommandArgs`: words are
/// separated by spaces and tabs only (newlines stay inside words); `'` or `"` starts a quoted
/// run that ends at the same quote; quote characters are dropped and quoted text joins the
/// current word; there are no escapes; an empty word (`""`) is no argument; an unterminated
/// quote runs to the end.
pub fn parse_command_args(args: &str) -> Vec<String> {
    let mut res = Vec::new();
    let mut current = String::new();
    let mut in_quote: Option<char> = None;
    for c in args.chars() {
        match in_quote {
            Some(quote) if c == quote => in_quote = None,
            Some(_) => current.push(c),
            None if c == '"' || c == '\'' => in_quote = Some(c),
            None if c == ' ' || c == '\t' => {
                if !current.is_empty() {
                    res.push(std::mem::take(&mut current));
                }
            }
            None => current.push(c),
        }
    }
    if !current.is_empty() {
        res.push(current);
    }
    res
}

static POSITIONAL: LazyLock<Regex> = LazyLock::new(|| {
    // A constant pattern that is known to compile.
    #[allow(clippy::expect_used)]
    Regex::new(r"\$([0-9]+)").expect("valid regex")
});

static SLICE: LazyLock<Regex> = LazyLock::new(|| {
    // A constant pattern that is known to compile.
    #[allow(clippy::expect_used)]
    Regex::new(r"\$\{@:([0-9]+)(?::([0-9]+))?\}").expect("valid regex")
});

/// Parses a decimal digit string, saturating instead of overflowing (JavaScript's `parseInt`
/// yields a huge number there, which indexes past any argument list just the same).
fn parse_saturating(digits: &str) -> usize {
    digits.bytes().fold(0usize, |acc, b| {
        acc.saturating_mul(10).saturating_add(usize::from(b - b'0'))
    })
}

/// Replaces every occurrence of `needle` in `haystack` with `replacement`, expanding `$$`,
/// `$&`, `` $` `` and `$'` in `replacement` as JavaScript's `String.prototype.replace` does for
/// a pattern without capture groups.
fn js_replace_all(haystack: &str, needle: &str, replacement: &str) -> String {
    let mut res = String::with_capacity(haystack.len());
    let mut last = 0;
    for (pos, matched) in haystack.match_indices(needle) {
        res.push_str(&haystack[last..pos]);
        let mut rest = replacement;
        while let Some(dollar) = rest.find('$') {
            res.push_str(&rest[..dollar]);
            let after = &rest[dollar + 1..];
            match after.chars().next() {
                Some('$') => res.push('$'),
                Some('&') => res.push_str(matched),
                Some('`') => res.push_str(&haystack[..pos]),
                Some('\'') => res.push_str(&haystack[pos + matched.len()..]),
                _ => {
                    res.push('$');
                    rest = after;
                    continue;
                }
            }
            rest = &after[1..];
        }
        res.push_str(rest);
        last = pos + matched.len();
    }
    res.push_str(&haystack[last..]);
    res
}

/// Substitutes the arguments into a template's text (the reference's `substituteArgs`).
pub fn substitute_args(content: &str, args: &[String]) -> String {
    let res = POSITIONAL.replace_all(content, |caps: &Captures<'_>| {
        let n = parse_saturating(&caps[1]);
        n.checked_sub(1)
            .and_then(|idx| args.get(idx))
            .cloned()
            .unwrap_or_default()
    });
    let res = SLICE.replace_all(&res, |caps: &Captures<'_>| {
        let start = parse_saturating(&caps[1]).saturating_sub(1).min(args.len());
        let end = match caps.get(2) {
            Some(length) => start
                .saturating_add(parse_saturating(length.as_str()))
                .min(args.len()),
            None => args.len(),
        };
        args[start..end].join(" ")
    });
    let all_args = args.join(" ");
    let res = js_replace_all(&res, "$ARGUMENTS", &all_args);
    js_replace_all(&res, "$@", &all_args)
}

/// Splits `/name args` into the name (up to the first space) and the raw argument string.
/// Returns `None` when the text does not start with `/`.
pub fn split_command(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix('/')?;
    Some(match rest.find(' ') {
        Some(space) => (&rest[..space], &rest[space + 1..]),
        None => (rest, ""),
    })
}

/// Expands `/name args` when `name` is exactly a template's name; `None` otherwise (the text is
/// then sent as typed).
pub fn expand_prompt_template(text: &str, templates: &[PromptTemplate]) -> Option<String> {
    let (name, args) = split_command(text)?;
    let template = templates.iter().find(|template| template.name == name)?;
    Some(substitute_args(
        &template.content,
        &parse_command_args(args),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn quoting_joins_words_and_drops_empty_quotes() {
        assert_eq!(
            parse_command_args("a\"b c\"d '' \"\" e\tf\ng 'unterminated x"),
            args(&["ab cd", "e", "f\ng", "unterminated x"])
        );
        assert_eq!(parse_command_args("  "), Vec::<String>::new());
        assert_eq!(
            parse_command_args("'it\"s' \"a'b\""),
            args(&["it\"s", "a'b"])
        );
    }

    #[test]
    fn positional_and_slices() {
        let a = args(&["a", "b", "c", "d"]);
        assert_eq!(substitute_args("$1|$2|$5|$0", &a), "a|b||");
        assert_eq!(substitute_args("${@:2}", &a), "b c d");
        assert_eq!(substitute_args("${@:2:2}", &a), "b c");
        assert_eq!(substitute_args("${@:0:1}", &a), "a");
        assert_eq!(substitute_args("${@:9}", &a), "");
        assert_eq!(substitute_args("$ARGUMENTS/$@", &a), "a b c d/a b c d");
        assert_eq!(substitute_args("$99999999999999999999999", &a), "");
    }

    #[test]
    fn later_passes_see_inserted_text() {
        assert_eq!(substitute_args("$1 $@", &args(&["$@", "b"])), "$@ b $@ b");
    }

    #[test]
    fn string_replacement_patterns_expand_like_javascript() {
        assert_eq!(
            substitute_args("A $ARGUMENTS B", &args(&["x$&y", "$$"])),
            "A x$ARGUMENTSy $ B"
        );
        assert_eq!(substitute_args("<$@>", &args(&["$`", "$'"])), "<< >>");
        assert_eq!(substitute_args("$@", &args(&["$1", "$<n>"])), "$1 $<n>");
    }

    #[test]
    fn template_name_must_match_exactly() {
        let template = PromptTemplate {
            name: "fix".to_string(),
            description: String::new(),
            argument_hint: None,
            content: "Fix $1".to_string(),
            file_path: PathBuf::from("/p/fix.md"),
            origin: ResourceOrigin::UserAuto,
        };
        let templates = [template];
        assert_eq!(
            expand_prompt_template("/fix bug", &templates).as_deref(),
            Some("Fix bug")
        );
        assert_eq!(
            expand_prompt_template("/fix", &templates).as_deref(),
            Some("Fix ")
        );
        assert_eq!(expand_prompt_template("/Fix bug", &templates), None);
        assert_eq!(expand_prompt_template("/fix\tbug", &templates), None);
        assert_eq!(expand_prompt_template("fix bug", &templates), None);
    }

    #[test]
    fn description_falls_back_to_first_body_line() {
        let long = "x".repeat(61);
        let t = parse_template(
            Path::new("/p/a.md"),
            &format!("\n  \n{long}\nmore"),
            ResourceOrigin::UserAuto,
        )
        .unwrap();
        assert_eq!(t.description, format!("{}...", "x".repeat(60)));
        assert_eq!(t.content, format!("\n  \n{long}\nmore"));
        let t = parse_template(
            Path::new("/p/b.md"),
            "---\ndescription: Review\nargument-hint: <file>\n---\n\nBody $1\n",
            ResourceOrigin::UserAuto,
        )
        .unwrap();
        assert_eq!(t.name, "b");
        assert_eq!(t.description, "Review");
        assert_eq!(t.argument_hint.as_deref(), Some("<file>"));
        assert_eq!(t.content, "Body $1");
    }
}
