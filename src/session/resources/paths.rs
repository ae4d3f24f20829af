//! Path arithmetic as Node's `path` module does it (lexical `resolve`/`normalize`), the
//! reference's `~` expansion, and symlink-resolving identity for de-duplication.
//!
//! Invariant: everything except `canonical` and `exists` is lexical and touches no file system.

use std::path::{Component, Path, PathBuf};

/// Normalises a path lexically: drops `.` components, folds `..` into its parent (never above
/// the root) and drops a trailing separator — Node's `path.normalize` for absolute paths.
pub fn normalize(path: &Path) -> PathBuf {
    let mut res = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(prefix) => res.push(prefix.as_os_str()),
            Component::RootDir => res.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                let at_root = res.parent().is_none();
                if !at_root {
                    res.pop();
                } else if !res.has_root() {
                    res.push("..");
                }
            }
            Component::Normal(name) => res.push(name),
        }
    }
    res
}

/// Resolves `path` against `base` (Node's `path.resolve(base, path)`): absolute paths stay,
/// relative ones are joined to `base`; the result is normalised.
pub fn resolve(base: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        normalize(path)
    } else {
        normalize(&base.join(path))
    }
}

/// Expands a leading `~` the way the reference's resource loaders do, after trimming: `~` is
/// the home directory, `~/x` and also `~x` are `x` under it. Without a home directory the
/// value is kept as written.
pub fn expand_tilde(value: &str, home: Option<&Path>) -> PathBuf {
    let trimmed = value.trim();
    match (trimmed.strip_prefix('~'), home) {
        (Some(rest), Some(home)) => {
            let rest = rest.strip_prefix('/').unwrap_or(rest);
            if rest.is_empty() {
                home.to_path_buf()
            } else {
                normalize(&home.join(rest))
            }
        }
        _ => PathBuf::from(trimmed),
    }
}

/// Resolves a configured resource path: trims it, expands `~`, and resolves it against
/// `base` (the reference's `resolvePathFromBase` / `resolveSkillPath`).
pub fn resolve_configured(value: &str, base: &Path, home: Option<&Path>) -> PathBuf {
    resolve(base, &expand_tilde(value, home))
}

/// Returns the real path (symlinks resolved), or the path itself when it cannot be resolved.
pub fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Returns whether `target` is `root` or lies under it, comparing lexically.
pub fn is_under(target: &Path, root: &Path) -> bool {
    target.starts_with(normalize(root))
}

/// Returns the path as `/`-separated text relative to `base` (Node's `path.relative` for a
/// path under `base`), or the whole path when it is not under `base`.
pub fn relative_posix(base: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(base).unwrap_or(path);
    rel.components()
        .map(|component| component.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Returns the `/`-separated path from `from` to `to` (Node's `path.relative`), with `..`
/// segments when `to` is not under `from`. Both paths should be absolute.
pub fn relative_node(from: &Path, to: &Path) -> String {
    let from = normalize(from);
    let to = normalize(to);
    let from_parts: Vec<_> = from.components().collect();
    let to_parts: Vec<_> = to.components().collect();
    let common = from_parts
        .iter()
        .zip(&to_parts)
        .take_while(|(a, b)| a == b)
        .count();
    let mut parts: Vec<String> = Vec::new();
    parts.extend(std::iter::repeat_n(
        "..".to_string(),
        from_parts.len() - common,
    ));
    parts.extend(
        to_parts[common..]
            .iter()
            .map(|component| component.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

/// Returns a path as text for prompts and messages (lossy for non-UTF-8 names).
pub fn display(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_folds_dots_like_node() {
        assert_eq!(normalize(Path::new("/a/./b/../c/")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../x")), PathBuf::from("/x"));
    }

    #[test]
    fn resolve_joins_relative_paths_only() {
        assert_eq!(
            resolve(Path::new("/w/p"), Path::new("../s")),
            PathBuf::from("/w/s")
        );
        assert_eq!(
            resolve(Path::new("/w/p"), Path::new("/abs/./x")),
            PathBuf::from("/abs/x")
        );
    }

    #[test]
    fn tilde_forms_expand_under_home() {
        let home = Path::new("/home/u");
        assert_eq!(expand_tilde(" ~ ", Some(home)), PathBuf::from("/home/u"));
        assert_eq!(expand_tilde("~/s", Some(home)), PathBuf::from("/home/u/s"));
        assert_eq!(expand_tilde("~s", Some(home)), PathBuf::from("/home/u/s"));
        assert_eq!(expand_tilde("~/s", None), PathBuf::from("~/s"));
        assert_eq!(expand_tilde("a/~", Some(home)), PathBuf::from("a/~"));
    }

    #[test]
    fn relative_node_climbs_with_dot_dot() {
        assert_eq!(
            relative_node(Path::new("/a/b"), Path::new("/a/c/d")),
            "../c/d"
        );
        assert_eq!(relative_node(Path::new("/a"), Path::new("/a/x")), "x");
        assert_eq!(relative_node(Path::new("/a"), Path::new("/a")), "");
    }

    #[test]
    fn relative_posix_is_slash_joined() {
        assert_eq!(
            relative_posix(Path::new("/r"), Path::new("/r/a/b.md")),
            "a/b.md"
        );
        assert_eq!(relative_posix(Path::new("/r"), Path::new("/r")), "");
    }
}
