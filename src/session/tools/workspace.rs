//! Path resolution every tool uses (`spec/tools.md` §2.1), the OS-error texts tools report,
//! and running blocking file work off the async runtime.
//!
//! * [`expand`]: drop one leading `@`, turn exotic Unicode spaces into ASCII spaces, expand
//!   `~` and `~/…` with the configured home directory.
//! * [`resolve`]: an absolute result is returned as is (not normalised); a relative one is
//!   joined to the cwd and normalised lexically (`.`/`..` collapsed, trailing slash dropped),
//!   as Node's `path.resolve`.
//! * [`resolve_read_path`]: `read`'s fallbacks for macOS screenshot names (U+202F before
//!   AM/PM, NFD, U+2019 for `'`).
//! * [`os_error_message`]: Node's errno text, `ENOENT: no such file or directory, open '<path>'`.
//!
//! Invariants: no environment access (the home directory comes from [`Workspace`]); paths are
//! never canonicalised except for the mutation-lock key.

use std::io;
use std::path::{Component, Path, PathBuf};

use icu_normalizer::DecomposingNormalizerBorrowed;
use tokio_util::sync::CancellationToken;

use crate::agent::tool::ToolError;

/// What path resolution needs from the environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workspace {
    /// The user's home directory, for `~`; `None` leaves `~` unexpanded.
    pub home: Option<PathBuf>,
}

impl Workspace {
    /// Returns a workspace that expands `~` to `home`.
    pub fn new(home: Option<PathBuf>) -> Self {
        Self { home }
    }

    /// Applies [`expand`] with this workspace's home.
    pub fn expand(&self, raw: &str) -> String {
        expand(raw, self.home.as_deref())
    }

    /// Applies [`resolve`] with this workspace's home.
    pub fn resolve(&self, raw: &str, cwd: &Path) -> PathBuf {
        resolve(raw, cwd, self.home.as_deref())
    }

    /// Resolves a directory argument, whose empty value (or absence) means the working
    /// directory (`ls`, `find` and `grep`'s `path`).
    pub fn resolve_dir(&self, raw: &str, cwd: &Path) -> PathBuf {
        self.resolve(if raw.is_empty() { "." } else { raw }, cwd)
    }

    /// Applies [`resolve_read_path`] with this workspace's home.
    pub fn resolve_read_path(&self, raw: &str, cwd: &Path) -> PathBuf {
        resolve_read_path(raw, cwd, self.home.as_deref())
    }
}

fn is_unicode_space(c: char) -> bool {
    matches!(
        c,
        '\u{a0}' | '\u{2000}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// Removes one leading `@`, maps Unicode spaces to ASCII spaces and expands `~`/`~/…`.
pub fn expand(raw: &str, home: Option<&Path>) -> String {
    let without_at = raw.strip_prefix('@').unwrap_or(raw);
    let normalised: String = without_at
        .chars()
        .map(|c| if is_unicode_space(c) { ' ' } else { c })
        .collect();
    match home {
        Some(home) if normalised == "~" => home.to_string_lossy().into_owned(),
        Some(home) if normalised.starts_with("~/") => {
            format!("{}{}", home.to_string_lossy(), &normalised[1..])
        }
        _ => normalised,
    }
}

/// Resolves a tool path argument against `cwd` (see the module docs).
pub fn resolve(raw: &str, cwd: &Path, home: Option<&Path>) -> PathBuf {
    let expanded = expand(raw, home);
    let path = Path::new(&expanded);
    if path.is_absolute() {
        return path.to_path_buf();
    }
    normalize(&cwd.join(path))
}

/// Collapses `.` and `..` and drops a trailing slash, without touching the file system.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(component);
                }
            }
            Component::RootDir | Component::Prefix(_) | Component::Normal(_) => out.push(component),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Resolves a `read` path, trying the macOS screenshot-name variants when it does not exist.
pub fn resolve_read_path(raw: &str, cwd: &Path, home: Option<&Path>) -> PathBuf {
    let resolved = resolve(raw, cwd, home);
    if resolved.exists() {
        return resolved;
    }
    let text = resolved.to_string_lossy().into_owned();
    let am_pm = am_pm_variant(&text);
    let nfd = DecomposingNormalizerBorrowed::new_nfd()
        .normalize(&text)
        .into_owned();
    let curly = text.replace('\'', "\u{2019}");
    let nfd_curly = nfd.replace('\'', "\u{2019}");
    for candidate in [am_pm, nfd, curly, nfd_curly] {
        if candidate != text && Path::new(&candidate).exists() {
            return PathBuf::from(candidate);
        }
    }
    resolved
}

/// Replaces ` AM.`/` PM.` (any case) by the same with U+202F instead of the space.
fn am_pm_variant(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find(' ') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let is_marker = after.len() >= 3
            && after.is_char_boundary(3)
            && (after[..2].eq_ignore_ascii_case("am") || after[..2].eq_ignore_ascii_case("pm"))
            && after.as_bytes()[2] == b'.';
        if is_marker {
            out.push('\u{202f}');
            out.push_str(&after[..3]);
            rest = &after[3..];
        } else {
            out.push(' ');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Returns Node's errno code for an I/O error (`ENOENT`, `EISDIR`, …).
pub fn errno_code(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(code) => {
            let errno = nix::errno::Errno::from_raw(code);
            format!("{errno:?}")
        }
        None => match error.kind() {
            io::ErrorKind::NotFound => "ENOENT".to_owned(),
            io::ErrorKind::PermissionDenied => "EACCES".to_owned(),
            io::ErrorKind::AlreadyExists => "EEXIST".to_owned(),
            io::ErrorKind::IsADirectory => "EISDIR".to_owned(),
            io::ErrorKind::NotADirectory => "ENOTDIR".to_owned(),
            io::ErrorKind::InvalidData => "EILSEQ".to_owned(),
            _ => "EIO".to_owned(),
        },
    }
}

/// Returns libuv's description of an errno code (the middle part of Node's error text).
fn errno_description(code: &str) -> Option<&'static str> {
    Some(match code {
        "ENOENT" => "no such file or directory",
        "EACCES" => "permission denied",
        "EPERM" => "operation not permitted",
        "EISDIR" => "illegal operation on a directory",
        "ENOTDIR" => "not a directory",
        "EEXIST" => "file already exists",
        "ENOTEMPTY" => "directory not empty",
        "EROFS" => "read-only file system",
        "ENOSPC" => "no space left on device",
        "EMFILE" => "too many open files",
        "ELOOP" => "too many symbolic links encountered",
        "ENAMETOOLONG" => "name too long",
        "EBUSY" => "resource busy or locked",
        "ETXTBSY" => "text file is busy",
        "EINVAL" => "invalid argument",
        "EIO" => "i/o error",
        _ => return None,
    })
}

/// Node's error text for a failed file operation: `<CODE>: <description>, <syscall> '<path>'`.
pub fn os_error_message(error: &io::Error, syscall: &str, path: &Path) -> String {
    let code = errno_code(error);
    let description = errno_description(&code)
        .map(str::to_owned)
        .unwrap_or_else(|| error.to_string().to_lowercase());
    format!(
        "{code}: {description}, {syscall} '{}'",
        path.to_string_lossy()
    )
}

/// Runs blocking file work on the blocking pool; a panic or cancellation of the pool task is
/// a [`ToolError::Fatal`].
pub async fn blocking<T, F>(work: F) -> Result<T, ToolError>
where
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(join_error) => Err(ToolError::Fatal(format!(
            "blocking tool task failed: {join_error}"
        ))),
    }
}

/// Runs side-effect-free blocking work, but returns `Operation aborted` as soon as `cancel`
/// fires (the work's result is then dropped). Only for work that changes nothing.
pub async fn blocking_abortable<T, F>(cancel: &CancellationToken, work: F) -> Result<T, ToolError>
where
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
    T: Send + 'static,
{
    if cancel.is_cancelled() {
        return Err(ToolError::aborted());
    }
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(ToolError::aborted()),
        result = blocking(work) => result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expand_and_resolve_follow_the_reference() {
        let home = Path::new("/home/u");
        assert_eq!(expand("@a.txt", Some(home)), "a.txt");
        assert_eq!(expand("@@a", Some(home)), "@a");
        assert_eq!(expand("~", Some(home)), "/home/u");
        assert_eq!(expand("~/x", Some(home)), "/home/u/x");
        assert_eq!(expand("~user/x", Some(home)), "~user/x");
        assert_eq!(expand("a\u{a0}b\u{3000}c", None), "a b c");
        let cwd = Path::new("/w/p");
        assert_eq!(resolve("a/../b/./c/", cwd, None), PathBuf::from("/w/p/b/c"));
        assert_eq!(resolve("../..", cwd, None), PathBuf::from("/"));
        assert_eq!(resolve("/x/../y", cwd, None), PathBuf::from("/x/../y"));
        assert_eq!(resolve("", cwd, None), PathBuf::from("/w/p"));
    }

    #[test]
    fn am_pm_marker_gets_a_narrow_space() {
        assert_eq!(
            am_pm_variant("Shot 10.00.00 pm.png x am"),
            "Shot 10.00.00\u{202f}pm.png x am"
        );
    }

    #[test]
    fn os_errors_read_like_node() {
        let error = io::Error::from_raw_os_error(2);
        assert_eq!(
            os_error_message(&error, "open", Path::new("/x")),
            "ENOENT: no such file or directory, open '/x'"
        );
        let error = io::Error::from_raw_os_error(21);
        assert_eq!(
            os_error_message(&error, "read", Path::new("/d")),
            "EISDIR: illegal operation on a directory, read '/d'"
        );
    }
}
