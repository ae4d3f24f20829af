//! Project context files: `AGENTS.md`/`CLAUDE.md` from the agent directory (global) and from
//! every directory between the filesystem root and `cwd` (spec/resources.md §2).
//!
//! Order: the global file first, then ancestors outermost first, `cwd` last. Per directory
//! the first existing of `AGENTS.md`, `AGENTS.MD`, `CLAUDE.md`, `CLAUDE.MD` is taken; one that
//! exists but cannot be read is reported and the next candidate is tried. A path already taken
//! (the global file, when `cwd` is the agent directory) is not repeated. The walk stops at the
//! filesystem root, not at a repository root.
//!
//! Invariant: reads only the candidate files; contents are kept as read (lossy UTF-8, a BOM
//! kept), since they go into the system prompt verbatim.

use std::path::{Path, PathBuf};

use crate::session::resources::diagnostics::{Diagnostic, ResourceKind};
use crate::session::resources::paths::normalize;

/// The file names tried in each directory, first existing wins.
pub const CONTEXT_FILE_NAMES: [&str; 4] = ["AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD"];

/// One loaded context file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextFile {
    /// The file's absolute path, as shown in the `## <path>` heading.
    pub path: PathBuf,
    /// The file's text.
    pub content: String,
}

fn load_from_dir(dir: &Path, diagnostics: &mut Vec<Diagnostic>) -> Option<ContextFile> {
    for name in CONTEXT_FILE_NAMES {
        let path = dir.join(name);
        if !path.exists() {
            continue;
        }
        match std::fs::read(&path) {
            Ok(bytes) => {
                return Some(ContextFile {
                    path,
                    content: String::from_utf8_lossy(&bytes).into_owned(),
                });
            }
            Err(err) => diagnostics.push(Diagnostic::warning(
                ResourceKind::ContextFile,
                &path,
                format!("could not read context file: {err}"),
            )),
        }
    }
    None
}

/// Loads the context files for `cwd` (absolute) with the global one from `agent_dir`;
/// unreadable files are reported in `diagnostics`.
pub fn load_context_files(
    cwd: &Path,
    agent_dir: &Path,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<ContextFile> {
    let mut res = Vec::new();
    if let Some(global) = load_from_dir(agent_dir, diagnostics) {
        res.push(global);
    }
    let mut ancestors = Vec::new();
    let cwd = normalize(cwd);
    for dir in cwd.ancestors() {
        if let Some(file) = load_from_dir(dir, diagnostics)
            && !res.iter().any(|seen: &ContextFile| seen.path == file.path)
            && !ancestors
                .iter()
                .any(|seen: &ContextFile| seen.path == file.path)
        {
            ancestors.push(file);
        }
    }
    ancestors.reverse();
    res.extend(ancestors);
    res
}
