//! Project context files: `AGENTS.md`/`CLAUDE.md` from the agent directory (global) and from
//! every directory between the filesystem root and `cwd` (1.6.0's `loadProjectContextFiles`).
//!
//! Order: the global file first, then ancestors outermost first, `cwd` last. Per directory
//! the first of `AGENTS.override.md`, `AGENTS.md`, `AGENTS.MD`, `CLAUDE.md`, `CLAUDE.MD` that is
//! a regular file is taken (a directory of that name is passed over silently); one that cannot
//! be read is reported and the next candidate is tried. A path already taken (the global file,
//! when `cwd` is the agent directory) is not repeated. The walk stops at the filesystem root,
//! not at a repository root.
//!
//! A linked worktree nested inside its main repository (`git worktree add sub/dir`) shadows the
//! main repository's context file of the same name: both cover the same repository, so only
//! the worktree's copy is loaded (`findShadowedContextFile`).
//!
//! Invariant: reads only the candidate files and the `.git` pointers; contents are kept as
//! read (lossy UTF-8, not trimmed) except for a leading byte-order mark, which is dropped.

use std::path::{Path, PathBuf};

use crate::session::resources::diagnostics::{Diagnostic, ResourceKind};
use crate::session::resources::paths::{canonical, normalize, resolve};
use crate::session::resources::text::strip_bom;

/// The file names tried in each directory, first regular file wins.
pub const CONTEXT_FILE_NAMES: [&str; 5] = [
    "AGENTS.override.md",
    "AGENTS.md",
    "AGENTS.MD",
    "CLAUDE.md",
    "CLAUDE.MD",
];

/// One loaded context file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextFile {
    /// The file's absolute path, as shown in `<project_instructions path="…">`.
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
        let read = std::fs::metadata(&path).and_then(|meta| {
            if meta.is_file() {
                std::fs::read(&path).map(Some)
            } else {
                Ok(None)
            }
        });
        match read {
            Ok(Some(bytes)) => {
                return Some(ContextFile {
                    content: strip_bom(&String::from_utf8_lossy(&bytes)).to_owned(),
                    path,
                });
            }
            Ok(None) => {}
            Err(err) => diagnostics.push(Diagnostic::warning(
                ResourceKind::ContextFile,
                &path,
                format!("could not read context file: {err}"),
            )),
        }
    }
    None
}

/// The repository `cwd` is in (`findGitPaths`): the directory holding the nearest `.git`
/// and the common git directory. A `.git` file must read `gitdir: <dir>`; the git directory
/// must have a `HEAD`; a `commondir` file points at the common directory of a linked worktree.
fn find_git_paths(cwd: &Path) -> Option<(PathBuf, PathBuf)> {
    for dir in cwd.ancestors() {
        let git = dir.join(".git");
        if !git.exists() {
            continue;
        }
        let meta = std::fs::metadata(&git).ok()?;
        if meta.is_file() {
            let text = std::fs::read_to_string(&git).ok()?;
            let Some(target) = text.trim().strip_prefix("gitdir: ") else {
                continue;
            };
            let git_dir = resolve(dir, Path::new(target.trim()));
            if !git_dir.join("HEAD").exists() {
                return None;
            }
            let commondir = git_dir.join("commondir");
            let common = if commondir.exists() {
                let text = std::fs::read_to_string(&commondir).ok()?;
                resolve(&git_dir, Path::new(text.trim()))
            } else {
                git_dir
            };
            return Some((dir.to_path_buf(), common));
        } else if meta.is_dir() {
            if !git.join("HEAD").exists() {
                return None;
            }
            return Some((dir.to_path_buf(), git));
        }
    }
    None
}

/// The main repository's context file that a nested linked worktree's own file shadows
/// (real path), if `cwd` is in such a worktree.
fn find_shadowed_context_file(cwd: &Path) -> Option<PathBuf> {
    let (repo_dir, common_git_dir) = find_git_paths(cwd)?;
    let common = canonical(&common_git_dir);
    let worktree_root = canonical(&repo_dir);
    let main_root = common.parent()?.to_path_buf();
    // An ordinary repository (the same directory) or a sibling worktree shadows nothing.
    if !worktree_root.starts_with(&main_root) || worktree_root == main_root {
        return None;
    }
    // Only when the main root is itself checked out from that repository (not a bare layout
    // or a submodule).
    if canonical(&main_root.join(".git")) != common {
        return None;
    }
    let own = load_from_dir(&worktree_root, &mut Vec::new())?;
    Some(main_root.join(own.path.file_name()?))
}

/// Loads the context files for `cwd` (absolute) with the global one from `agent_dir`;
/// unreadable files are reported in `diagnostics`.
pub fn load_context_files(
    cwd: &Path,
    agent_dir: &Path,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<ContextFile> {
    let mut res = Vec::new();
    if let Some(global) = load_from_dir(&normalize(agent_dir), diagnostics) {
        res.push(global);
    }
    let cwd = normalize(cwd);
    let shadowed = find_shadowed_context_file(&cwd);
    let mut ancestors = Vec::new();
    for dir in cwd.ancestors() {
        let Some(file) = load_from_dir(dir, diagnostics) else {
            continue;
        };
        let is_shadowed = shadowed.as_ref().is_some_and(|shadowed| {
            file.path
                .file_name()
                .is_some_and(|name| canonical(dir).join(name) == *shadowed)
        });
        let seen = res
            .iter()
            .chain(&ancestors)
            .any(|seen: &ContextFile| seen.path == file.path);
        if !is_shadowed && !seen {
            ancestors.push(file);
        }
    }
    ancestors.reverse();
    res.extend(ancestors);
    res
}
