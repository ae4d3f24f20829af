//! The `grep` tool (`spec/tools.md` §7), native on ripgrep's own crates (`ignore`,
//! `grep-regex`, `grep-searcher`) with ripgrep's defaults as pi invokes it
//! (`rg --json --line-number --color=never --hidden [--ignore-case] [--fixed-strings] [--glob G]`).
//!
//! Semantics kept from rg: Rust regex syntax (or a fixed string), case-sensitive unless
//! `ignoreCase`; hidden files searched, `.git/` contents included; `.gitignore`,
//! `.git/info/exclude` and the global git excludes only inside a git repository, `.ignore` and
//! `.rgignore` always, parent directories' ignore files apply; symlinks not followed; a walked
//! file stops being searched at its first NUL byte (an explicitly named file has NULs
//! converted instead); `glob` is one override glob (no `/` → basename at any depth, leading
//! `!` excludes). Differences: files are visited in sorted order (rg is multi-threaded and
//! unordered); `RIPGREP_CONFIG_PATH` is not read.
//!
//! Output: `path:N: text` per match (context lines `path-N- text`), lines cut at 500 UTF-16
//! units, whole output cut at 50 KB; notices `[<lim> matches limit reached. Use limit=<2·lim>
//! for more, or refine pattern. 50.0KB limit reached. Some lines truncated to 500 chars. Use
//! read tool to see full lines]` (only the applicable parts, joined with `. `).
//!
//! Invariant: read-only; checks the abort signal between files and matches.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::agent::tool::{ToolContext, ToolDefinition, ToolError, ToolOutput, lenient};
use crate::session::tools::builtin::{BuiltinTool, Notices};
use crate::session::tools::workspace::{Workspace, blocking_abortable};
use crate::support::truncate::{
    DEFAULT_MAX_BYTES, GREP_MAX_LINE_LENGTH, UNLIMITED_LINES, truncate_head, truncate_line,
};

const DEFAULT_LIMIT: f64 = 100.0;

/// The `grep` tool.
#[derive(Debug)]
pub struct GrepTool {
    workspace: Workspace,
}

impl GrepTool {
    /// Returns the tool with its reference definition.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: "grep".to_owned(),
    label: "grep".to_owned(),
    description: format!(
        "Search file contents for a pattern. Returns matching lines with file paths and line numbers. Respects .gitignore. Output is truncated to 100 matches or {}KB (whichever is hit first). Long lines are truncated to {GREP_MAX_LINE_LENGTH} chars.",
        DEFAULT_MAX_BYTES / 1024
    ),
    parameters: json!({
        "type": "object",
        "required": ["pattern"],
        "properties": {
            "pattern": {"type": "string", "description": "Search pattern (regex or literal string)"},
            "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
            "glob": {"type": "string", "description": "Filter files by glob pattern relative to path, e.g. 'src/**/*.ts'. Without '/', e.g. '*.ts', it matches file names at any depth"},
            "ignoreCase": {"type": "boolean", "description": "Case-insensitive search (default: false)"},
            "literal": {"type": "boolean", "description": "Treat pattern as literal string instead of regex (default: false)"},
            "context": {"type": "number", "description": "Number of lines to show before and after each match (default: 0)"},
            "limit": {"type": "number", "description": "Maximum number of matches to return (default: 100)"}
        }
    }),
    prompt_snippet: Some("Search file contents for patterns (respects .gitignore)".to_owned()),
    prompt_guidelines: Vec::new(),
    constrained_sampling: None,
});

/// A `grep` call's arguments.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrepArgs {
    #[serde(default, deserialize_with = "lenient")]
    pattern: String,
    #[serde(default, deserialize_with = "lenient")]
    path: String,
    #[serde(default, deserialize_with = "lenient")]
    glob: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    ignore_case: bool,
    #[serde(default, deserialize_with = "lenient")]
    literal: bool,
    #[serde(default, deserialize_with = "lenient")]
    context: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    limit: Option<f64>,
}

/// One grep call's parameters, resolved.
#[derive(Clone, Debug)]
struct GrepRequest {
    pattern: String,
    search_path: PathBuf,
    glob: Option<String>,
    ignore_case: bool,
    literal: bool,
    context: usize,
    limit: f64,
    override_root: PathBuf,
}

impl BuiltinTool for GrepTool {
    type Args = GrepArgs;
    const MUTATES_WORKSPACE: bool = false;

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    async fn run(&self, args: GrepArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let context = args.context.filter(|c| *c > 0.0).unwrap_or(0.0);
        let request = GrepRequest {
            search_path: self.workspace.resolve_dir(&args.path, &ctx.cwd),
            pattern: args.pattern,
            glob: args.glob.filter(|glob| !glob.is_empty()),
            ignore_case: args.ignore_case,
            literal: args.literal,
            context: context.floor() as usize,
            limit: args.limit.unwrap_or(DEFAULT_LIMIT).max(1.0),
            override_root: ctx.cwd.clone(),
        };
        let cancel = ctx.cancel.clone();
        blocking_abortable(&ctx.cancel, move || grep(&request, &cancel)).await
    }
}

/// A matching line as rg's JSON `match` event carries it.
struct Match {
    path: PathBuf,
    line_number: u64,
    /// The line (with its terminator) when it is valid UTF-8.
    text: Option<String>,
}

struct Collector<'a> {
    path: &'a Path,
    matches: &'a mut Vec<Match>,
    count: &'a mut u64,
    limit: f64,
    cancel: &'a CancellationToken,
}

impl Sink for Collector<'_> {
    type Error = io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        if self.cancel.is_cancelled() {
            return Ok(false);
        }
        *self.count += 1;
        // rg reports a non-UTF-8 path as bytes, which pi counts but cannot show.
        if self.path.to_str().is_none() {
            return Ok((*self.count as f64) < self.limit);
        }
        self.matches.push(Match {
            path: self.path.to_path_buf(),
            line_number: mat.line_number().unwrap_or(0),
            text: std::str::from_utf8(mat.bytes()).ok().map(str::to_owned),
        });
        Ok((*self.count as f64) < self.limit)
    }
}

fn grep(request: &GrepRequest, cancel: &CancellationToken) -> Result<ToolOutput, ToolError> {
    let search_path = &request.search_path;
    let metadata = std::fs::metadata(search_path).map_err(|_| {
        ToolError::ForModel(format!("Path not found: {}", search_path.to_string_lossy()))
    })?;
    let is_directory = metadata.is_dir();
    if !request.literal {
        // Parse errors name the pattern as given (grep-regex would show its wrapped form).
        if let Err(error) = regex::RegexBuilder::new(&request.pattern)
            .case_insensitive(request.ignore_case)
            .multi_line(true)
            .build()
        {
            return Err(ToolError::ForModel(error.to_string().trim().to_owned()));
        }
    }
    let matcher = RegexMatcherBuilder::new()
        .multi_line(true)
        .case_insensitive(request.ignore_case)
        .fixed_strings(request.literal)
        .line_terminator(Some(b'\n'))
        .build(&request.pattern)
        .map_err(|error| ToolError::ForModel(matcher_error_text(&error.to_string())))?;
    let mut matches: Vec<Match> = Vec::new();
    let mut count = 0u64;
    let mut errors: Vec<String> = Vec::new();
    let limit_hit = |count: u64| count as f64 >= request.limit;

    if is_directory {
        let mut overrides = OverrideBuilder::new(&request.override_root);
        if let Some(glob) = &request.glob {
            overrides
                .add(glob)
                .map_err(|error| ToolError::ForModel(error.to_string()))?;
        }
        let overrides = overrides
            .build()
            .map_err(|error| ToolError::ForModel(error.to_string()))?;
        let walker = WalkBuilder::new(search_path)
            .hidden(false)
            .parents(true)
            .ignore(true)
            .git_ignore(true)
            .git_global(true)
            .git_exclude(true)
            .require_git(true)
            .follow_links(false)
            .add_custom_ignore_filename(".rgignore")
            .overrides(overrides)
            .sort_by_file_name(|a, b| a.cmp(b))
            .build();
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .build();
        for entry in walker {
            if cancel.is_cancelled() {
                return Err(ToolError::aborted());
            }
            let entry = match entry {
                Ok(entry) => entry,
                Err(error) => {
                    errors.push(format!("rg: {error}"));
                    continue;
                }
            };
            if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                continue;
            }
            let path = entry.path();
            let mut sink = Collector {
                path,
                matches: &mut matches,
                count: &mut count,
                limit: request.limit,
                cancel,
            };
            if let Err(error) = searcher.search_path(&matcher, path, &mut sink) {
                errors.push(format!("rg: {}: {error}", path.to_string_lossy()));
            }
            if limit_hit(count) {
                break;
            }
        }
    } else {
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::convert(b'\x00'))
            .build();
        let mut sink = Collector {
            path: search_path,
            matches: &mut matches,
            count: &mut count,
            limit: request.limit,
            cancel,
        };
        if let Err(error) = searcher.search_path(&matcher, search_path, &mut sink) {
            errors.push(format!("rg: {}: {error}", search_path.to_string_lossy()));
        }
    }
    if cancel.is_cancelled() {
        return Err(ToolError::aborted());
    }
    let match_limit_reached = limit_hit(count);
    // rg exits 2 on any I/O error; pi then reports only the error (unless it killed rg at the
    // match limit).
    if !errors.is_empty() && !match_limit_reached {
        return Err(ToolError::ForModel(errors.join("\n")));
    }
    if count == 0 {
        return Ok(ToolOutput::text("No matches found"));
    }
    Ok(format_matches(
        request,
        is_directory,
        &matches,
        match_limit_reached,
    ))
}

/// rg's wording for matcher errors (a line terminator in the pattern gets its multiline hint).
fn matcher_error_text(message: &str) -> String {
    if message.contains("is not allowed in a regex") {
        return "the literal '\"\\n\"' is not allowed in a regex\n\nConsider enabling multiline mode with the --multiline flag (or -U for short).\nWhen multiline mode is enabled, new line characters can be matched.".to_owned();
    }
    message.trim().to_owned()
}

fn display_path(search_path: &Path, is_directory: bool, path: &Path) -> String {
    if is_directory && let Ok(relative) = path.strip_prefix(search_path) {
        let relative = relative.to_string_lossy().replace('\\', "/");
        if !relative.is_empty() && !relative.starts_with("..") {
            return relative;
        }
    }
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn file_lines(path: &Path) -> Vec<String> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes)
            .replace("\r\n", "\n")
            .replace('\r', "\n")
            .split('\n')
            .map(str::to_owned)
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn format_matches(
    request: &GrepRequest,
    is_directory: bool,
    matches: &[Match],
    match_limit_reached: bool,
) -> ToolOutput {
    let mut cache: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut lines_truncated = false;
    let mut output: Vec<String> = Vec::new();
    let ctx = request.context;
    for found in matches {
        let shown = display_path(&request.search_path, is_directory, &found.path);
        match (&found.text, ctx) {
            (Some(text), 0) => {
                let clean = text.replace("\r\n", "\n").replace('\r', "");
                let clean = clean.strip_suffix('\n').unwrap_or(&clean);
                let (cut, was_cut) = truncate_line(clean, GREP_MAX_LINE_LENGTH);
                lines_truncated |= was_cut;
                output.push(format!("{shown}:{}: {cut}", found.line_number));
            }
            _ => {
                let lines = cache
                    .entry(found.path.clone())
                    .or_insert_with(|| file_lines(&found.path));
                let line_number = usize::try_from(found.line_number).unwrap_or(usize::MAX);
                if lines.is_empty() {
                    output.push(format!("{shown}:{line_number}: (unable to read file)"));
                    continue;
                }
                let (start, end) = if ctx > 0 {
                    (
                        line_number.saturating_sub(ctx).max(1),
                        line_number.saturating_add(ctx).min(lines.len()),
                    )
                } else {
                    (line_number, line_number)
                };
                for current in start..=end {
                    let text = lines
                        .get(current.wrapping_sub(1))
                        .map_or("", String::as_str);
                    let clean = text.replace('\r', "");
                    let (cut, was_cut) = truncate_line(&clean, GREP_MAX_LINE_LENGTH);
                    lines_truncated |= was_cut;
                    if current == line_number {
                        output.push(format!("{shown}:{current}: {cut}"));
                    } else {
                        output.push(format!("{shown}-{current}- {cut}"));
                    }
                }
            }
        }
    }
    let truncation = truncate_head(&output.join("\n"), UNLIMITED_LINES, DEFAULT_MAX_BYTES);
    let mut notices = Notices::new();
    if match_limit_reached {
        notices.limit_reached(
            request.limit,
            "matches",
            ", or refine pattern",
            "matchLimitReached",
        );
    }
    notices.truncation(&truncation);
    if lines_truncated {
        notices.push(
            format!(
                "Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines"
            ),
            "linesTruncated",
            Value::Bool(true),
        );
    }
    notices.output(&truncation.content)
}
