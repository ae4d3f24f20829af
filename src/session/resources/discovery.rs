//! Which skill, prompt-template and theme files to load, in precedence order: settings entries and
//! auto-discovered directories of the project and the user, then command-line paths
//! (spec/resources.md §3.1, §4; the reference's package manager `resolve()` and the resource
//! loader's `mergePaths`).
//!
//! Order of the candidates before loading (first wins a name collision later):
//! project settings entries, project auto-discovery, user settings entries, user
//! auto-discovery — a stable sort of the order they were found in — then `--skill` /
//! `--prompt-template` paths. The same real file is listed once.
//!
//! Settings entries (`skills`/`prompts` arrays) are resolved against `<cwd>/.pi` for the
//! project and the agent directory for the user (`~` expanded). An entry starting with `!`,
//! `+` or `-`, or containing `*` or `?`, is a pattern: plain globs select among the listed
//! files, `!glob` excludes, `+path` force-includes and `-path` force-excludes (exact paths).
//! The `!`/`+`/`-` patterns also filter the same scope's auto-discovered files.
//!
//! Invariant: decides paths only; reading and parsing the files is `skills`/`templates`' job.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};

use crate::session::resources::origin::ResourceOrigin;
use crate::session::resources::paths::{
    canonical, normalize, relative_node, resolve, resolve_configured,
};
use crate::session::resources::scan::{
    collect_markdown_recursive, collect_prompt_files, collect_skill_files, collect_theme_files,
};

/// The kind of resource being resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Skills: directories are scanned for `SKILL.md` (and root `*.md`).
    Skills,
    /// Prompt templates: directories hold `*.md` templates.
    Prompts,
    /// Themes: directories hold `*.json` theme files (not recursively).
    Themes,
}

/// The inputs of path resolution.
#[derive(Debug, Clone)]
pub struct DiscoveryInput<'a> {
    /// The working directory (absolute).
    pub cwd: &'a Path,
    /// The agent directory (absolute).
    pub agent_dir: &'a Path,
    /// The home directory (for `~` and `~/.agents/skills`).
    pub home: Option<&'a Path>,
    /// Whether auto-discovery and settings entries are used (`--no-skills` /
    /// `--no-prompt-templates` turn them off).
    pub discover: bool,
    /// The project settings entries for this kind.
    pub project_entries: &'a [String],
    /// The user settings entries for this kind.
    pub user_entries: &'a [String],
    /// The command-line paths for this kind, as typed.
    pub cli_paths: &'a [String],
    /// Whether the project is trusted: otherwise its settings entries and auto-discovered
    /// files (`.pi/skills`, `.agents/skills` up to the repository root, `.pi/prompts`) are
    /// left out, as 1.6.0 does.
    pub project_trusted: bool,
}

struct Candidate {
    path: PathBuf,
    origin: ResourceOrigin,
    enabled: bool,
}

/// Candidates keyed by exact path; the first insertion keeps its origin and state.
#[derive(Default)]
struct Candidates {
    list: Vec<Candidate>,
    seen: HashSet<PathBuf>,
}

impl Candidates {
    fn add(&mut self, path: PathBuf, origin: ResourceOrigin, enabled: bool) {
        if self.seen.insert(path.clone()) {
            self.list.push(Candidate {
                path,
                origin,
                enabled,
            });
        }
    }
}

fn is_override(entry: &str) -> bool {
    entry.starts_with('!') || entry.starts_with('+') || entry.starts_with('-')
}

fn is_pattern(entry: &str) -> bool {
    is_override(entry) || entry.contains('*') || entry.contains('?')
}

fn glob(pattern: &str) -> Option<GlobMatcher> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .ok()
        .map(|glob| glob.compile_matcher())
}

fn posix(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

/// The forms of a file's path that patterns are compared with: relative to the base, the
/// file name, the absolute path; for a `SKILL.md` also its directory in those three forms.
fn match_forms(file: &Path, base: &Path) -> Vec<String> {
    let mut res = vec![
        relative_node(base, file),
        file.file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
        posix(file),
    ];
    if file.file_name().is_some_and(|name| name == "SKILL.md")
        && let Some(dir) = file.parent()
    {
        res.push(relative_node(base, dir));
        res.push(
            dir.file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
        res.push(posix(dir));
    }
    res
}

fn matches_any_glob(file: &Path, patterns: &[&str], base: &Path) -> bool {
    let forms = match_forms(file, base);
    patterns
        .iter()
        .filter_map(|pattern| glob(pattern))
        .any(|matcher| forms.iter().any(|form| matcher.is_match(form)))
}

fn matches_any_exact(file: &Path, patterns: &[&str], base: &Path) -> bool {
    let rel = relative_node(base, file);
    let abs = posix(file);
    let skill_dir = file
        .file_name()
        .is_some_and(|name| name == "SKILL.md")
        .then(|| file.parent())
        .flatten();
    patterns.iter().any(|pattern| {
        let pattern = pattern
            .strip_prefix("./")
            .or_else(|| pattern.strip_prefix(".\\"))
            .unwrap_or(pattern)
            .replace('\\', "/");
        if pattern == rel || pattern == abs {
            return true;
        }
        skill_dir.is_some_and(|dir| pattern == relative_node(base, dir) || pattern == posix(dir))
    })
}

struct Overrides<'a> {
    excludes: Vec<&'a str>,
    force_includes: Vec<&'a str>,
    force_excludes: Vec<&'a str>,
    includes: Vec<&'a str>,
}

fn split_overrides<'a>(patterns: &[&'a str]) -> Overrides<'a> {
    let mut res = Overrides {
        excludes: Vec::new(),
        force_includes: Vec::new(),
        force_excludes: Vec::new(),
        includes: Vec::new(),
    };
    for pattern in patterns {
        if let Some(rest) = pattern.strip_prefix('+') {
            res.force_includes.push(rest);
        } else if let Some(rest) = pattern.strip_prefix('-') {
            res.force_excludes.push(rest);
        } else if let Some(rest) = pattern.strip_prefix('!') {
            res.excludes.push(rest);
        } else {
            res.includes.push(pattern);
        }
    }
    res
}

/// Whether an auto-discovered file stays enabled under a scope's `!`/`+`/`-` entries.
fn enabled_by_overrides(file: &Path, entries: &[String], base: &Path) -> bool {
    let overrides: Vec<&str> = entries
        .iter()
        .map(String::as_str)
        .filter(|entry| is_override(entry))
        .collect();
    let split = split_overrides(&overrides);
    let mut enabled = !matches_any_glob(file, &split.excludes, base);
    if matches_any_exact(file, &split.force_includes, base) {
        enabled = true;
    }
    if matches_any_exact(file, &split.force_excludes, base) {
        enabled = false;
    }
    enabled
}

/// The files a settings entry's patterns enable (the reference's `applyPatterns`).
fn apply_patterns(files: &[PathBuf], patterns: &[&str], base: &Path) -> HashSet<PathBuf> {
    let split = split_overrides(patterns);
    let mut res: Vec<&PathBuf> = if split.includes.is_empty() {
        files.iter().collect()
    } else {
        files
            .iter()
            .filter(|file| matches_any_glob(file, &split.includes, base))
            .collect()
    };
    if !split.excludes.is_empty() {
        res.retain(|file| !matches_any_glob(file, &split.excludes, base));
    }
    for file in files {
        if !res.contains(&file) && matches_any_exact(file, &split.force_includes, base) {
            res.push(file);
        }
    }
    res.retain(|file| !matches_any_exact(file, &split.force_excludes, base));
    res.into_iter().cloned().collect()
}

/// Expands a directory named in settings into resource files.
fn files_in_dir(dir: &Path, kind: Kind) -> Vec<PathBuf> {
    match kind {
        Kind::Skills => collect_skill_files(dir, true),
        Kind::Prompts => collect_markdown_recursive(dir),
        Kind::Themes => collect_theme_files(dir),
    }
}

/// Adds a scope's settings entries: listed files and directories (missing ones skipped),
/// enabled according to the entry patterns.
fn add_settings_entries(
    candidates: &mut Candidates,
    entries: &[String],
    base: &Path,
    home: Option<&Path>,
    kind: Kind,
    origin: ResourceOrigin,
) {
    if entries.is_empty() {
        return;
    }
    let patterns: Vec<&str> = entries
        .iter()
        .map(String::as_str)
        .filter(|entry| is_pattern(entry))
        .collect();
    let mut files = Vec::new();
    for entry in entries.iter().filter(|entry| !is_pattern(entry)) {
        let path = resolve_configured(entry, base, home);
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => files.push(path),
            Ok(meta) if meta.is_dir() => files.extend(files_in_dir(&path, kind)),
            _ => {}
        }
    }
    let enabled = apply_patterns(&files, &patterns, base);
    for file in files {
        let is_enabled = enabled.contains(&file);
        candidates.add(file, origin, is_enabled);
    }
}

/// The `.agents/skills` directories from `cwd` up to the repository root (the first directory
/// holding `.git`), or up to `/` outside a repository.
fn ancestor_agents_skill_dirs(cwd: &Path) -> Vec<PathBuf> {
    let cwd = normalize(cwd);
    let repo_root = cwd
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf);
    let mut res = Vec::new();
    for dir in cwd.ancestors() {
        res.push(dir.join(".agents").join("skills"));
        if repo_root.as_deref() == Some(dir) {
            break;
        }
    }
    res
}

fn add_auto(
    candidates: &mut Candidates,
    files: Vec<PathBuf>,
    entries: &[String],
    base: &Path,
    origin: ResourceOrigin,
) {
    for file in files {
        let enabled = enabled_by_overrides(&file, entries, base);
        candidates.add(file, origin, enabled);
    }
}

/// Returns the files (or, for command-line paths, files and directories) to load, each with
/// its origin, in precedence order.
pub fn resolve_resource_paths(
    input: &DiscoveryInput<'_>,
    kind: Kind,
) -> Vec<(PathBuf, ResourceOrigin)> {
    let project_base = input.cwd.join(".pi");
    let user_base = input.agent_dir.to_path_buf();
    let mut resolved: Vec<(PathBuf, ResourceOrigin)> = Vec::new();
    let project_entries: &[String] = if input.project_trusted {
        input.project_entries
    } else {
        &[]
    };
    if input.discover {
        let mut candidates = Candidates::default();
        add_settings_entries(
            &mut candidates,
            project_entries,
            &project_base,
            input.home,
            kind,
            ResourceOrigin::ProjectSettings,
        );
        add_settings_entries(
            &mut candidates,
            input.user_entries,
            &user_base,
            input.home,
            kind,
            ResourceOrigin::UserSettings,
        );
        match kind {
            Kind::Skills => {
                let user_agents = input
                    .home
                    .map(|home| normalize(&home.join(".agents").join("skills")));
                let mut project_files = Vec::new();
                if input.project_trusted {
                    project_files = collect_skill_files(&project_base.join("skills"), true);
                    for dir in ancestor_agents_skill_dirs(input.cwd) {
                        if Some(normalize(&dir)) != user_agents {
                            project_files.extend(collect_skill_files(&dir, false));
                        }
                    }
                }
                add_auto(
                    &mut candidates,
                    project_files,
                    project_entries,
                    &project_base,
                    ResourceOrigin::ProjectAuto,
                );
                let mut user_files = collect_skill_files(&user_base.join("skills"), true);
                if let Some(dir) = &user_agents {
                    user_files.extend(collect_skill_files(dir, false));
                }
                add_auto(
                    &mut candidates,
                    user_files,
                    input.user_entries,
                    &user_base,
                    ResourceOrigin::UserAuto,
                );
            }
            Kind::Prompts | Kind::Themes => {
                let (dir, collect): (&str, fn(&Path) -> Vec<PathBuf>) = match kind {
                    Kind::Themes => ("themes", collect_theme_files),
                    _ => ("prompts", collect_prompt_files),
                };
                let project_files = if input.project_trusted {
                    collect(&project_base.join(dir))
                } else {
                    Vec::new()
                };
                add_auto(
                    &mut candidates,
                    project_files,
                    project_entries,
                    &project_base,
                    ResourceOrigin::ProjectAuto,
                );
                add_auto(
                    &mut candidates,
                    collect(&user_base.join(dir)),
                    input.user_entries,
                    &user_base,
                    ResourceOrigin::UserAuto,
                );
            }
        }
        let mut list = candidates.list;
        list.sort_by_key(|candidate| candidate.origin.rank());
        let mut seen = HashSet::new();
        for candidate in list {
            if seen.insert(canonical(&candidate.path)) && candidate.enabled {
                resolved.push((candidate.path, candidate.origin));
            }
        }
    }
    // The reference merges the two lists with one canonical-path set (`mergePaths`).
    let mut seen: HashSet<PathBuf> = resolved.iter().map(|(path, _)| canonical(path)).collect();
    let mut res = resolved;
    for raw in input.cli_paths {
        let path = resolve(input.cwd, Path::new(raw));
        if seen.insert(canonical(&path)) {
            res.push((path, ResourceOrigin::CommandLine));
        }
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn apply_patterns_filters_excludes_and_forces() {
        let base = Path::new("/b");
        let files = paths(&["/b/s/a/SKILL.md", "/b/s/b/SKILL.md", "/b/s/c.md"]);
        let all = apply_patterns(&files, &[], base);
        assert_eq!(all.len(), 3);
        let some = apply_patterns(&files, &["!a", "+s/a"], base);
        assert!(some.contains(Path::new("/b/s/a/SKILL.md")));
        let none_a = apply_patterns(&files, &["!a"], base);
        assert!(!none_a.contains(Path::new("/b/s/a/SKILL.md")));
        assert_eq!(none_a.len(), 2);
        let only_md = apply_patterns(&files, &["*.md", "-s/c.md"], base);
        assert_eq!(only_md.len(), 2);
        assert!(!only_md.contains(Path::new("/b/s/c.md")));
    }

    #[test]
    fn overrides_disable_auto_discovered_files() {
        let entries = vec!["!old-*".to_string()];
        assert!(!enabled_by_overrides(
            Path::new("/a/skills/old-x/SKILL.md"),
            &entries,
            Path::new("/a")
        ));
        assert!(enabled_by_overrides(
            Path::new("/a/skills/new/SKILL.md"),
            &entries,
            Path::new("/a")
        ));
    }
}
