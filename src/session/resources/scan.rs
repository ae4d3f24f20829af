//! Directory walks that find resource files, with the reference's rules: entries in byte order
//! of their names (Node's `readdir` order), symlinks followed and broken ones skipped, names
//! starting with `.` and `node_modules` skipped, and `.gitignore`/`.ignore`/`.fdignore` rules
//! found along the way honoured with their patterns re-rooted at the walk's root.
//!
//! Invariant: reads directories only, never file contents other than ignore files; an
//! unreadable directory contributes nothing (the reference swallows the error the same way).

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::session::resources::paths::relative_posix;

const IGNORE_FILE_NAMES: [&str; 3] = [".gitignore", ".ignore", ".fdignore"];

/// What a directory entry is, after following a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file (or a symlink to one).
    File,
    /// A directory (or a symlink to one).
    Dir,
    /// Anything else (sockets, devices, …).
    Other,
}

/// One entry of a directory listing.
#[derive(Debug, Clone)]
pub struct DirItem {
    /// The entry's file name.
    pub name: OsString,
    /// The entry's full path.
    pub path: PathBuf,
    /// The entry's kind, symlinks followed.
    pub kind: EntryKind,
}

impl DirItem {
    fn name_str(&self) -> std::borrow::Cow<'_, str> {
        self.name.to_string_lossy()
    }

    fn is_hidden_or_dependency(&self) -> bool {
        let name = self.name_str();
        name.starts_with('.') || name == "node_modules"
    }

    fn is_markdown_file(&self) -> bool {
        self.kind == EntryKind::File && self.name_str().ends_with(".md")
    }

    fn is_json_file(&self) -> bool {
        self.kind == EntryKind::File && self.name_str().ends_with(".json")
    }
}

/// Lists a directory in byte order of the names; `None` when it cannot be read. Broken
/// symlinks are left out.
pub fn list_dir(dir: &Path) -> Option<Vec<DirItem>> {
    let mut items = Vec::new();
    for entry in std::fs::read_dir(dir).ok()? {
        let Ok(entry) = entry else { continue };
        let path = entry.path();
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        let kind = if file_type.is_symlink() {
            match std::fs::metadata(&path) {
                Ok(meta) => kind_of(&meta.file_type()),
                Err(_) => continue,
            }
        } else {
            kind_of(&file_type)
        };
        items.push(DirItem {
            name: entry.file_name(),
            path,
            kind,
        });
    }
    items.sort_by(|a, b| a.name.as_encoded_bytes().cmp(b.name.as_encoded_bytes()));
    Some(items)
}

fn kind_of(file_type: &std::fs::FileType) -> EntryKind {
    if file_type.is_dir() {
        EntryKind::Dir
    } else if file_type.is_file() {
        EntryKind::File
    } else {
        EntryKind::Other
    }
}

/// The state of one recursive walk: its ignore rules and the real directories already
/// entered, so a symlink cycle is walked once (the reference would recurse until the path
/// grows too long; the files found are the same).
struct Walk {
    rules: IgnoreRules,
    entered: HashSet<PathBuf>,
    res: Vec<PathBuf>,
}

impl Walk {
    fn new(root: &Path) -> Self {
        Self {
            rules: IgnoreRules::new(root),
            entered: HashSet::new(),
            res: Vec::new(),
        }
    }

    /// Records `dir` as entered; false when its real path was entered before.
    fn enter(&mut self, dir: &Path) -> bool {
        let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        self.entered.insert(real)
    }
}

/// Ignore rules gathered during one walk, all relative to the walk's root.
pub struct IgnoreRules {
    root: PathBuf,
    lines: Vec<String>,
    matcher: Gitignore,
}

impl IgnoreRules {
    /// Starts an empty rule set for a walk rooted at `root`.
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            lines: Vec::new(),
            matcher: Gitignore::empty(),
        }
    }

    /// Adds the rules of the ignore files in `dir`, each pattern prefixed with `dir`'s path
    /// relative to the root (the reference's `prefixIgnorePattern`).
    pub fn add_dir(&mut self, dir: &Path) {
        let rel = relative_posix(&self.root, dir);
        let prefix = if rel.is_empty() {
            String::new()
        } else {
            format!("{rel}/")
        };
        let mut added = false;
        for file_name in IGNORE_FILE_NAMES {
            let Ok(content) = std::fs::read_to_string(dir.join(file_name)) else {
                continue;
            };
            for line in content.split('\n') {
                let line = line.strip_suffix('\r').unwrap_or(line);
                if let Some(pattern) = prefix_pattern(line, &prefix) {
                    self.lines.push(pattern);
                    added = true;
                }
            }
        }
        if added {
            self.rebuild();
        }
    }

    fn rebuild(&mut self) {
        let mut builder = GitignoreBuilder::new(&self.root);
        for line in &self.lines {
            // A pattern the glob compiler rejects is skipped, as a bad line in a .gitignore is.
            let _ = builder.add_line(None, line);
        }
        self.matcher = builder.build().unwrap_or_else(|_| Gitignore::empty());
    }

    /// Returns whether the path (relative to the root, `/`-separated) is ignored.
    pub fn ignores(&self, rel: &str, is_dir: bool) -> bool {
        if rel.is_empty() || rel.starts_with('/') || self.lines.is_empty() {
            return false;
        }
        // `rel` is relative, so the matcher's "path under the root" precondition holds.
        self.matcher
            .matched_path_or_any_parents(Path::new(rel), is_dir)
            .is_ignore()
    }

    fn ignores_item(&self, item: &DirItem) -> bool {
        self.ignores(
            &relative_posix(&self.root, &item.path),
            item.kind == EntryKind::Dir,
        )
    }
}

/// Re-roots one ignore-file line at `prefix`; `None` for blank lines and comments.
fn prefix_pattern(line: &str, prefix: &str) -> Option<String> {
    let trimmed = line.trim();
    if trimmed.is_empty() || (trimmed.starts_with('#') && !trimmed.starts_with("\\#")) {
        return None;
    }
    let (negated, pattern) = if let Some(rest) = line.strip_prefix('!') {
        (true, rest)
    } else if line.starts_with("\\!") {
        // The reference drops the backslash only; the pattern then starts with `!`.
        (false, &line[1..])
    } else {
        (false, line)
    };
    let pattern = pattern.strip_prefix('/').unwrap_or(pattern);
    let prefixed = format!("{prefix}{pattern}");
    Some(if negated {
        format!("!{prefixed}")
    } else {
        prefixed
    })
}

/// Finds skill files under `dir`: a directory that directly contains `SKILL.md` is a skill and
/// is not searched further; otherwise, when `root_markdown` is set, every `*.md` file directly
/// in `dir` is a skill, and every sub-directory is searched the same way (without root files).
pub fn collect_skill_files(dir: &Path, root_markdown: bool) -> Vec<PathBuf> {
    let mut walk = Walk::new(dir);
    collect_skill_files_in(dir, root_markdown, &mut walk);
    walk.res
}

fn collect_skill_files_in(dir: &Path, root_markdown: bool, walk: &mut Walk) {
    if !walk.enter(dir) {
        return;
    }
    walk.rules.add_dir(dir);
    let Some(items) = list_dir(dir) else { return };
    if let Some(skill) = items
        .iter()
        .find(|item| item.name == "SKILL.md" && item.kind == EntryKind::File)
        && !walk.rules.ignores_item(skill)
    {
        walk.res.push(skill.path.clone());
        return;
    }
    for item in &items {
        if item.is_hidden_or_dependency() || walk.rules.ignores_item(item) {
            continue;
        }
        match item.kind {
            EntryKind::Dir => collect_skill_files_in(&item.path, false, walk),
            EntryKind::File if root_markdown && item.is_markdown_file() => {
                walk.res.push(item.path.clone());
            }
            EntryKind::File | EntryKind::Other => {}
        }
    }
}

/// Finds prompt templates directly in `dir` (not recursive), skipping hidden files and
/// `node_modules` and honouring the directory's ignore files — the auto-discovery walk.
pub fn collect_prompt_files(dir: &Path) -> Vec<PathBuf> {
    let mut rules = IgnoreRules::new(dir);
    rules.add_dir(dir);
    let Some(items) = list_dir(dir) else {
        return Vec::new();
    };
    items
        .into_iter()
        .filter(|item| !item.is_hidden_or_dependency())
        .filter(|item| !rules.ignores(&relative_posix(dir, &item.path), false))
        .filter(DirItem::is_markdown_file)
        .map(|item| item.path)
        .collect()
}

/// The theme files of a themes directory (`<agent dir>/themes`, `.pi/themes`, or one named in
/// settings or with `--theme`): its `*.json` files, not recursively, as 1.6.0 reads them.
pub fn collect_theme_files(dir: &Path) -> Vec<PathBuf> {
    let Some(items) = list_dir(dir) else {
        return Vec::new();
    };
    items
        .into_iter()
        .filter(|item| !item.is_hidden_or_dependency())
        .filter(DirItem::is_json_file)
        .map(|item| item.path)
        .collect()
}

/// Finds every `*.md` file under `dir`, recursively, skipping hidden entries and
/// `node_modules` and honouring ignore files — how a directory named in settings is expanded.
pub fn collect_markdown_recursive(dir: &Path) -> Vec<PathBuf> {
    let mut walk = Walk::new(dir);
    collect_markdown_in(dir, &mut walk);
    walk.res
}

fn collect_markdown_in(dir: &Path, walk: &mut Walk) {
    if !walk.enter(dir) {
        return;
    }
    walk.rules.add_dir(dir);
    let Some(items) = list_dir(dir) else { return };
    for item in &items {
        if item.is_hidden_or_dependency() || walk.rules.ignores_item(item) {
            continue;
        }
        match item.kind {
            EntryKind::Dir => collect_markdown_in(&item.path, walk),
            EntryKind::File if item.is_markdown_file() => walk.res.push(item.path.clone()),
            EntryKind::File | EntryKind::Other => {}
        }
    }
}

/// Lists the `*.md` files directly in `dir`, hidden ones included and no ignore files read —
/// how the reference loads a template directory named on the command line.
pub fn list_markdown_files(dir: &Path) -> Vec<PathBuf> {
    list_dir(dir)
        .unwrap_or_default()
        .into_iter()
        .filter(DirItem::is_markdown_file)
        .map(|item| item.path)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlink_cycles_are_walked_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skills");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/SKILL.md"), "x").unwrap();
        std::os::unix::fs::symlink("..", root.join("a/loop")).unwrap();
        let found = collect_skill_files(&root, true);
        assert_eq!(found, vec![root.join("a/b/SKILL.md")]);
        std::fs::write(root.join("a/n.md"), "x").unwrap();
        assert_eq!(collect_markdown_recursive(&root).len(), 2);
    }

    #[test]
    fn ignore_files_are_honoured_relative_to_their_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for skill in ["keep", "sub/drop", "sub/deeper/drop"] {
            std::fs::create_dir_all(root.join(skill)).unwrap();
            std::fs::write(root.join(skill).join("SKILL.md"), "x").unwrap();
        }
        // Re-rooted at sub/, `drop` becomes `sub/drop`: anchored, as in the reference.
        std::fs::write(root.join("sub/.fdignore"), "drop\n").unwrap();
        let found = collect_skill_files(root, true);
        assert_eq!(
            found,
            vec![
                root.join("keep/SKILL.md"),
                root.join("sub/deeper/drop/SKILL.md")
            ]
        );
    }

    #[test]
    fn prefix_pattern_re_roots_and_keeps_negation() {
        assert_eq!(prefix_pattern("foo", "a/").as_deref(), Some("a/foo"));
        assert_eq!(prefix_pattern("/foo", "a/").as_deref(), Some("a/foo"));
        assert_eq!(prefix_pattern("!foo", "a/").as_deref(), Some("!a/foo"));
        assert_eq!(prefix_pattern("\\!foo", "").as_deref(), Some("!foo"));
        assert_eq!(prefix_pattern("# c", "a/"), None);
        assert_eq!(prefix_pattern("\\#c", "").as_deref(), Some("\\#c"));
        assert_eq!(prefix_pattern("   ", ""), None);
    }
}
