//! The `ls` tool (`spec/tools.md` §9): one directory's entries, sorted as JavaScript's
//! `a.toLowerCase().localeCompare(b.toLowerCase())` sorts them (ICU root collation), `/` after
//! directories, dotfiles included, no recursion and no ignore files.
//!
//! The entry limit is checked *before* each entry, so `N entries limit reached` appears only
//! when at least one more entry exists. Entries whose stat fails (a broken symlink) are skipped
//! silently and not counted. Output is cut at 50 KB with the notice `50.0KB limit reached`.
//!
//! Invariant: read-only; an abort returns `Operation aborted` at once.

use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::LazyLock;

use icu_collator::options::CollatorOptions;
use icu_collator::{CollatorBorrowed, CollatorPreferences};
use serde::Deserialize;
use serde_json::json;

use crate::agent::tool::{ToolContext, ToolDefinition, ToolError, ToolOutput, lenient};
use crate::session::tools::builtin::{BuiltinTool, Notices};
use crate::session::tools::workspace::{Workspace, blocking_abortable};
use crate::support::truncate::{DEFAULT_MAX_BYTES, UNLIMITED_LINES, truncate_head};

const DEFAULT_LIMIT: f64 = 500.0;

/// The `ls` tool.
#[derive(Debug)]
pub struct LsTool {
    workspace: Workspace,
}

impl LsTool {
    /// Returns the tool with its reference definition.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: "ls".to_owned(),
    label: "ls".to_owned(),
    description: format!(
        "List directory contents. Returns entries sorted alphabetically, with '/' suffix for directories. Includes dotfiles. Output is truncated to 500 entries or {}KB (whichever is hit first).",
        DEFAULT_MAX_BYTES / 1024
    ),
    parameters: json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Directory to list (default: current directory)"},
            "limit": {"type": "number", "description": "Maximum number of entries to return (default: 500)"}
        }
    }),
    prompt_snippet: Some("List directory contents".to_owned()),
    prompt_guidelines: Vec::new(),
    constrained_sampling: None,
});

/// An `ls` call's arguments.
#[derive(Debug, Default, Deserialize)]
pub struct LsArgs {
    #[serde(default, deserialize_with = "lenient")]
    path: String,
    #[serde(default, deserialize_with = "lenient")]
    limit: Option<f64>,
}

impl BuiltinTool for LsTool {
    type Args = LsArgs;
    const MUTATES_WORKSPACE: bool = false;

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    async fn run(&self, args: LsArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let dir = self.workspace.resolve_dir(&args.path, &ctx.cwd);
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        blocking_abortable(&ctx.cancel, move || list(&dir, limit)).await
    }
}

/// Compares names as `a.toLowerCase().localeCompare(b.toLowerCase())` does in Node.
pub fn compare_names(collator: &CollatorBorrowed<'_>, a: &str, b: &str) -> Ordering {
    collator.compare(&a.to_lowercase(), &b.to_lowercase())
}

/// Returns the collator the sort uses (ICU root collation, tertiary strength).
pub fn root_collator() -> Result<CollatorBorrowed<'static>, ToolError> {
    CollatorBorrowed::try_new(CollatorPreferences::default(), CollatorOptions::default())
        .map_err(|error| ToolError::Fatal(format!("collation data unavailable: {error}")))
}

fn list(dir: &PathBuf, limit: f64) -> Result<ToolOutput, ToolError> {
    let shown = dir.to_string_lossy();
    let metadata = match std::fs::metadata(dir) {
        Ok(metadata) => metadata,
        Err(_) => return Err(ToolError::ForModel(format!("Path not found: {shown}"))),
    };
    if !metadata.is_dir() {
        return Err(ToolError::ForModel(format!("Not a directory: {shown}")));
    }
    let reader = std::fs::read_dir(dir)
        .map_err(|error| ToolError::ForModel(format!("Cannot read directory: {error}")))?;
    let mut names: Vec<String> = reader
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    let collator = root_collator()?;
    names.sort_by(|a, b| compare_names(&collator, a, b));
    let mut results: Vec<String> = Vec::new();
    let mut limit_reached = false;
    for name in names {
        if results.len() as f64 >= limit {
            limit_reached = true;
            break;
        }
        // Follows symlinks; a broken link (or any stat failure) is skipped.
        let Ok(entry_meta) = std::fs::metadata(dir.join(&name)) else {
            continue;
        };
        if entry_meta.is_dir() {
            results.push(format!("{name}/"));
        } else {
            results.push(name);
        }
    }
    if results.is_empty() {
        return Ok(ToolOutput::text("(empty directory)"));
    }
    let truncation = truncate_head(&results.join("\n"), UNLIMITED_LINES, DEFAULT_MAX_BYTES);
    let mut notices = Notices::new();
    if limit_reached {
        notices.limit_reached(limit, "entries", "", "entryLimitReached");
    }
    notices.truncation(&truncation);
    Ok(notices.output(&truncation.content))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collation_matches_the_observed_order() {
        let collator = root_collator().unwrap();
        let mut names = vec![
            "Zeta.txt",
            "sub",
            "a.txt",
            ".hidden",
            ".gitignore",
            ".git",
            ".dot",
            "_under",
            "10",
            "9",
        ];
        names.sort_by(|a, b| compare_names(&collator, a, b));
        assert_eq!(
            names,
            [
                "_under",
                ".dot",
                ".git",
                ".gitignore",
                ".hidden",
                "10",
                "9",
                "a.txt",
                "sub",
                "Zeta.txt"
            ]
        );
    }
}
