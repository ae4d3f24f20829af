//! What resource loading reports instead of failing: warnings (a skill with a bad name, an
//! unreadable file), errors (a path given on the command line that does not exist) and name
//! collisions (the first resource with a name wins; the later one is reported).
//!
//! Invariant: loading never fails and never prints; every problem becomes a `Diagnostic` for
//! the mode to show.

use std::fmt;
use std::path::{Path, PathBuf};

/// Which kind of resource a diagnostic is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceKind {
    /// A skill (`SKILL.md` or a root-level `*.md` in a skills directory).
    Skill,
    /// A prompt template.
    PromptTemplate,
    /// An `AGENTS.md`/`CLAUDE.md` context file.
    ContextFile,
    /// `--system-prompt`, `--append-system-prompt`, `SYSTEM.md` or `APPEND_SYSTEM.md`.
    SystemPrompt,
}

/// How serious a diagnostic is, and for a collision, who won.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Severity {
    /// Something odd that did not stop the resource from loading (or skipped only it).
    Warning,
    /// A path the user named explicitly is unusable.
    Error,
    /// Two resources share a name; the first one found is used.
    Collision {
        /// The shared name.
        name: String,
        /// The file that is used.
        winner: PathBuf,
        /// The file that is ignored.
        loser: PathBuf,
    },
}

/// One problem found while loading resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The kind of resource concerned.
    pub resource: ResourceKind,
    /// Warning, error or collision.
    pub severity: Severity,
    /// What is wrong, in the reference's words where it has them.
    pub message: String,
    /// The file or directory concerned.
    pub path: PathBuf,
}

impl Diagnostic {
    /// Builds a warning.
    pub fn warning(resource: ResourceKind, path: &Path, message: impl Into<String>) -> Self {
        Self {
            resource,
            severity: Severity::Warning,
            message: message.into(),
            path: path.to_path_buf(),
        }
    }

    /// Builds an error.
    pub fn error(resource: ResourceKind, path: &Path, message: impl Into<String>) -> Self {
        Self {
            resource,
            severity: Severity::Error,
            message: message.into(),
            path: path.to_path_buf(),
        }
    }

    /// Builds a collision report: `loser` is ignored because `winner` has the same name.
    pub fn collision(resource: ResourceKind, name: &str, winner: &Path, loser: &Path) -> Self {
        let shown = match resource {
            ResourceKind::PromptTemplate => format!("/{name}"),
            _ => name.to_string(),
        };
        Self {
            resource,
            severity: Severity::Collision {
                name: name.to_string(),
                winner: winner.to_path_buf(),
                loser: loser.to_path_buf(),
            },
            message: format!("name \"{shown}\" collision"),
            path: loser.to_path_buf(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.severity {
            Severity::Collision { winner, .. } => write!(
                f,
                "{}: {} (using {})",
                self.path.display(),
                self.message,
                winner.display()
            ),
            Severity::Warning | Severity::Error => {
                write!(f, "{}: {}", self.path.display(), self.message)
            }
        }
    }
}
