//! The `find` tool (`spec/tools.md` §8), native on `ignore` and `globset` with fd's semantics
//! as pi invokes it (`fd --glob --color=never --hidden --no-require-git --max-results <lim>
//! [--full-path]`).
//!
//! Matching: a pattern without `/` is a glob over the entry's name; a pattern with `/` is
//! matched against the absolute path, prefixed with `**/` unless it starts with `/` or `**/` or
//! is `**`. `*` never crosses `/`. Smart case: case-insensitive unless the pattern has an
//! uppercase letter. Results include files, directories (printed with a trailing `/`) and
//! symlinks (not followed); hidden entries are included; `.gitignore` applies hierarchically
//! whether or not inside a git repository, plus `.ignore`, `.fdignore`, `.git/info/exclude` and
//! the global git excludes. Results come in fd's sorted order (path components compared
//! byte-wise), taking the first `limit` of a sorted walk. fd's own global ignore file
//! (`~/.config/fd/ignore`) is not read.
//!
//! Output: paths relative to the search directory joined with `\n`, cut at 50 KB; notices
//! `[<lim> results limit reached. Use limit=<2·lim> for more, or refine pattern. 50.0KB limit
//! reached]`; nothing found → `No files found matching pattern`.
//!
//! Invariant: read-only; checks the abort signal for every entry.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use globset::GlobBuilder;
use ignore::WalkBuilder;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::agent::tool::{ToolContext, ToolDefinition, ToolError, ToolOutput, lenient};
use crate::session::tools::builtin::{BuiltinTool, Notices, js_number};
use crate::session::tools::workspace::{Workspace, blocking_abortable};
use crate::support::truncate::{DEFAULT_MAX_BYTES, UNLIMITED_LINES, truncate_head};

const DEFAULT_LIMIT: f64 = 1000.0;

/// The `find` tool.
#[derive(Debug)]
pub struct FindTool {
    workspace: Workspace,
}

impl FindTool {
    /// Returns the tool with its reference definition.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: "find".to_owned(),
    label: "find".to_owned(),
    description: format!(
        "Search for files by glob pattern. Returns matching file paths relative to the search directory. Respects .gitignore. Output is truncated to 1000 results or {}KB (whichever is hit first).",
        DEFAULT_MAX_BYTES / 1024
    ),
    parameters: json!({
        "type": "object",
        "required": ["pattern"],
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern relative to the search directory, e.g. 'src/**/*.ts'. Without '/', e.g. '*.ts', it matches file names at any depth"},
            "path": {"type": "string", "description": "Directory to search in (default: current directory)"},
            "limit": {"type": "number", "description": "Maximum number of results (default: 1000)"}
        }
    }),
    prompt_snippet: Some("Find files by glob pattern (respects .gitignore)".to_owned()),
    prompt_guidelines: Vec::new(),
    constrained_sampling: None,
});

/// A `find` call's arguments.
#[derive(Debug, Default, Deserialize)]
pub struct FindArgs {
    #[serde(default, deserialize_with = "lenient")]
    pattern: String,
    #[serde(default, deserialize_with = "lenient")]
    path: String,
    #[serde(default, deserialize_with = "lenient")]
    limit: Option<f64>,
}

impl BuiltinTool for FindTool {
    type Args = FindArgs;
    const MUTATES_WORKSPACE: bool = false;

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    async fn run(&self, args: FindArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let search_path = self.workspace.resolve_dir(&args.path, &ctx.cwd);
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        let cancel = ctx.cancel.clone();
        blocking_abortable(&ctx.cancel, move || {
            find(&search_path, &args.pattern, limit, &cancel)
        })
        .await
    }
}

/// The glob pi hands to fd, and whether it is matched against the full path.
fn effective_pattern(pattern: &str) -> (String, bool) {
    if !pattern.contains('/') {
        return (pattern.to_owned(), false);
    }
    if pattern.starts_with('/') || pattern.starts_with("**/") || pattern == "**" {
        (pattern.to_owned(), true)
    } else {
        (format!("**/{pattern}"), true)
    }
}

fn find(
    search_path: &Path,
    pattern: &str,
    limit: f64,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    if limit < 0.0 || limit.fract() != 0.0 {
        // fd parses `--max-results` as an unsigned integer.
        return Err(ToolError::ForModel(format!(
            "error: invalid value '{}' for '--max-results <count>': invalid digit found in string\n\nFor more information, try '--help'.",
            js_number(limit)
        )));
    }
    let shown = search_path.to_string_lossy();
    if !search_path.is_dir() {
        return Err(ToolError::ForModel(format!(
            "[fd error]: Search path '{shown}' is not a directory.\n[fd error]: No valid search paths given."
        )));
    }
    let (glob, full_path) = effective_pattern(pattern);
    let matcher = if glob.is_empty() {
        None
    } else {
        let case_sensitive = glob.chars().any(char::is_uppercase);
        let compiled = GlobBuilder::new(&glob)
            .literal_separator(true)
            .case_insensitive(!case_sensitive)
            .build()
            .map_err(|error| ToolError::ForModel(format!("[fd error]: {error}")))?;
        Some(compiled.compile_matcher())
    };
    // `--max-results 0` means no limit to fd.
    let max_results = if limit == 0.0 {
        usize::MAX
    } else {
        limit as usize
    };
    let walker = WalkBuilder::new(search_path)
        .hidden(false)
        .parents(true)
        .ignore(true)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .add_custom_ignore_filename(".fdignore")
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    let prefix = format!("{shown}/");
    let mut results: Vec<String> = Vec::new();
    for entry in walker {
        if cancel.is_cancelled() {
            return Err(ToolError::aborted());
        }
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        let path = entry.path();
        let matched = match &matcher {
            None => true,
            Some(matcher) if full_path => matcher.is_match(path),
            Some(matcher) => path
                .file_name()
                .is_some_and(|name| matcher.is_match(Path::new(name))),
        };
        if !matched {
            continue;
        }
        let is_dir = entry.file_type().is_some_and(|kind| kind.is_dir());
        results.push(output_line(path, is_dir, &prefix, search_path));
        if results.len() >= max_results {
            break;
        }
    }
    results.retain(|line| !line.is_empty());
    if results.is_empty() {
        return Ok(ToolOutput::text("No files found matching pattern"));
    }
    let result_limit_reached = results.len() as f64 >= limit;
    let truncation = truncate_head(&results.join("\n"), UNLIMITED_LINES, DEFAULT_MAX_BYTES);
    let mut notices = Notices::new();
    if result_limit_reached {
        notices.limit_reached(
            limit,
            "results",
            ", or refine pattern",
            "resultLimitReached",
        );
    }
    notices.truncation(&truncation);
    Ok(notices.output(&truncation.content))
}

/// fd's output line for an entry (absolute, `/` after directories), as pi post-processes it:
/// trimmed, made relative to the search path, separators as `/`.
fn output_line(path: &Path, is_dir: bool, prefix: &str, search_path: &Path) -> String {
    let mut line = path.to_string_lossy().into_owned();
    if is_dir {
        line.push('/');
    }
    let line = line.trim();
    let had_trailing_slash = line.ends_with('/');
    let mut relative = match line.strip_prefix(prefix) {
        Some(rest) => rest.to_owned(),
        None => relative_to(Path::new(line), search_path),
    };
    if had_trailing_slash && !relative.ends_with('/') {
        relative.push('/');
    }
    relative.replace('\\', "/")
}

fn relative_to(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .map(PathBuf::from)
        .unwrap_or_else(|_| path.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_with_a_slash_match_the_full_path() {
        assert_eq!(effective_pattern("*.ts"), ("*.ts".to_owned(), false));
        assert_eq!(
            effective_pattern("src/**/*.ts"),
            ("**/src/**/*.ts".to_owned(), true)
        );
        assert_eq!(effective_pattern("**/x"), ("**/x".to_owned(), true));
        assert_eq!(effective_pattern("/abs/*"), ("/abs/*".to_owned(), true));
    }
}
