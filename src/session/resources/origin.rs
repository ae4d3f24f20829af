//! Where a skill or prompt template was found, which decides who wins a name collision.
//!
//! Invariant: the precedence order here is the reference's (`resourcePrecedenceRank`):
//! project settings entries, project auto-discovery, user settings entries, user
//! auto-discovery; paths from the command line are merged after all of them.

/// Where a resource came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceOrigin {
    /// Listed in `<cwd>/.pi/settings.json` (`skills`/`prompts`).
    ProjectSettings,
    /// Found in `<cwd>/.pi/skills`, `<cwd>/.pi/prompts` or an ancestor's `.agents/skills`.
    ProjectAuto,
    /// Listed in `<agent dir>/settings.json`.
    UserSettings,
    /// Found in `<agent dir>/skills`, `<agent dir>/prompts` or `~/.agents/skills`.
    UserAuto,
    /// Given with `--skill` or `--prompt-template`.
    CommandLine,
}

impl ResourceOrigin {
    /// Returns the precedence rank: lower wins a name collision.
    pub fn rank(self) -> u8 {
        match self {
            Self::ProjectSettings => 0,
            Self::ProjectAuto => 1,
            Self::UserSettings => 2,
            Self::UserAuto => 3,
            Self::CommandLine => 5,
        }
    }

    /// Returns whether the resource belongs to the project (rather than the user or the
    /// command line).
    pub fn is_project(self) -> bool {
        matches!(self, Self::ProjectSettings | Self::ProjectAuto)
    }
}
