//! Sessions the reference writes appear on their own: before `pi -c`, `-r`, `/resume`,
//! `pi sessions list`, `--session ID`/`--fork ID` and RPC `switch_session` look for a session,
//! an incremental import (`cli/import.rs`) runs over the reference's sessions directory.
//!
//! The directory is resolved as the reference resolves it (its `main.js`): `--session-dir`,
//! else `PI_CODING_AGENT_SESSION_DIR`, else the `sessionDir` setting (`~` expanded, relative
//! to the working directory), else `<agent dir>/sessions`. Only the reference's own layout is
//! looked at: `<agent dir>/sessions/--<encoded cwd>--/*.jsonl` for the default directory (one
//! level of project directories, links to directories followed), the `*.jsonl` files directly
//! in a directory given by one of the overrides.
//!
//! Cost when nothing changed: one `readdir` per directory, one `stat` per file, one indexed
//! query for every recorded file under the directory — no file is opened, nothing is
//! written, no writer connection is opened (`docs/BENCHMARKS.md`, "Automatic import").
//!
//! It never fails the command: a file that cannot be read or is refused is one warning line
//! (control characters in names escaped) and is skipped; a refused file is recorded, so it is
//! not read (nor reported) again until it changes. A database that cannot be written (opened
//! read-only, a read-only file) or a session another process writes is a warning, and the
//! command goes on with what is stored. `PI_AUTO_IMPORT=0` or the setting
//! `{"database": {"autoImport": false}}` turns it off.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::cli::config::Env;
use crate::cli::import::{self, Candidate, FileStat, Tally, Trigger, dir_key};
use crate::cli::settings::Settings;
use crate::store::{ImportMode, ImportStatus, SessionStore, StoreError};

/// How the reference lays out the files of a sessions directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The default `<agent dir>/sessions`: one directory per project (`--<encoded cwd>--`).
    ByProject,
    /// A directory named by `--session-dir`, `PI_CODING_AGENT_SESSION_DIR` or `sessionDir`:
    /// the files directly in it.
    Flat,
}

/// The reference's sessions directory and its layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionsDir {
    /// The directory.
    pub path: PathBuf,
    /// How its files are laid out.
    pub layout: Layout,
}

impl SessionsDir {
    /// Resolves the directory as the reference does: `--session-dir` (`flag`), else
    /// `PI_CODING_AGENT_SESSION_DIR`, else the `sessionDir` setting, else
    /// `<agent dir>/sessions`.
    pub fn resolve(env: &Env, settings: &Settings, flag: Option<&str>) -> Self {
        let custom = flag
            .filter(|dir| !dir.is_empty())
            .or_else(|| env.var("PI_CODING_AGENT_SESSION_DIR"))
            .map(|dir| env.expand_tilde(dir))
            .or_else(|| settings.session_dir());
        match custom {
            Some(dir) => Self {
                path: env.absolute(&dir),
                layout: Layout::Flat,
            },
            None => Self {
                path: env.agent_dir().join("sessions"),
                layout: Layout::ByProject,
            },
        }
    }

    /// Resolves the directory for a command without `--session-dir` (settings read here).
    pub fn for_command(env: &Env) -> Self {
        let settings = Settings::load(&env.agent_dir(), env.cwd(), env.home());
        Self::resolve(env, &settings, None)
    }
}

/// The automatic import: where to look, and whether to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoImport {
    /// The reference's sessions directory.
    pub dir: SessionsDir,
    /// Off with `PI_AUTO_IMPORT=0` or `database.autoImport: false`.
    pub enabled: bool,
}

/// What one automatic import did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Files found in the directory.
    pub found: usize,
    /// What happened to the files that were looked at (skipped ones are not counted).
    pub tally: Tally,
    /// One line per problem, for stderr.
    pub warnings: Vec<String>,
}

impl AutoImport {
    /// Reads the switch and the directory from the environment and the settings.
    pub fn new(env: &Env, settings: &Settings, session_dir_flag: Option<&str>) -> Self {
        let disabled = matches!(
            env.var("PI_AUTO_IMPORT"),
            Some("0" | "false" | "no" | "off")
        );
        Self {
            dir: SessionsDir::resolve(env, settings, session_dir_flag),
            enabled: !disabled && settings.auto_import(),
        }
    }

    /// The automatic import of a command without `--session-dir` (settings read here).
    pub fn for_command(env: &Env) -> Self {
        let settings = Settings::load(&env.agent_dir(), env.cwd(), env.home());
        Self::new(env, &settings, None)
    }

    /// Imports what changed in the directory since the last look; never fails. `store` is
    /// read first (it may be read-only); `writer` opens a store that can write, called only
    /// when a file needs importing.
    pub fn run(
        &self,
        store: &SessionStore,
        writer: &dyn Fn() -> anyhow::Result<SessionStore>,
    ) -> Outcome {
        let mut outcome = Outcome::default();
        if !self.enabled {
            return outcome;
        }
        let root = match fs::canonicalize(&self.dir.path) {
            Ok(root) => root,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return outcome,
            Err(error) => {
                outcome.warnings.push(warning(&format!(
                    "cannot read the reference sessions directory {}: {error}",
                    self.dir.path.display()
                )));
                return outcome;
            }
        };
        let mut found = Vec::new();
        scan(
            &self.dir.path,
            &root,
            self.dir.layout,
            &mut found,
            &mut outcome.warnings,
        );
        outcome.found = found.len();
        // One query for every recorded file: a file with the size and mtime it had when it
        // was read needs nothing (whatever became of it: stored, or refused and left alone).
        let recorded: HashMap<Vec<u8>, (u64, i64)> = match store.file_stats_under(&dir_key(&root)) {
            Ok(rows) => rows
                .into_iter()
                .map(|(key, size, mtime_ns)| (key, (size, mtime_ns)))
                .collect(),
            Err(error) => {
                outcome.warnings.push(warning(&format!(
                    "reference sessions were not imported: {error:#}"
                )));
                return outcome;
            }
        };
        let mut work = Vec::new();
        for candidate in found {
            let stat = (candidate.stat.size, candidate.stat.mtime_ns);
            if recorded.get(&candidate.key) == Some(&stat) {
                continue;
            }
            // Changed or new: its whole record (one lookup) decides how to read it.
            match store.file_record(&candidate.key) {
                Ok(record) => {
                    if import::needs_import(record.as_ref(), candidate.stat) {
                        work.push((candidate, record));
                    }
                }
                Err(error) => outcome
                    .warnings
                    .push(warning(&format!("{}: {error:#}", candidate.file.display()))),
            }
        }
        if work.is_empty() {
            return outcome;
        }
        let writer = match writer() {
            Ok(writer) => writer,
            Err(error) => {
                outcome.warnings.push(warning(&format!(
                    "{} reference session file{} not imported: {error:#}",
                    work.len(),
                    if work.len() == 1 { " was" } else { "s were" }
                )));
                return outcome;
            }
        };
        let indexed_before = writer.search_index_docs().unwrap_or(0);
        let total = work.len();
        for (done, (candidate, record)) in work.into_iter().enumerate() {
            let result = import::import_candidate(
                &writer,
                &candidate,
                record,
                ImportMode::Merge,
                Trigger::Automatic,
                &mut |_| {},
            );
            let shown = candidate.file.display();
            match result {
                Ok(report) => {
                    if report.status == ImportStatus::Refused {
                        outcome.warnings.push(warning(&format!(
                            "{shown} was not imported: {}",
                            report.error.as_deref().unwrap_or("refused")
                        )));
                    }
                    if report.read != import::ReadKind::None {
                        outcome.tally.add(&report);
                    }
                }
                Err(error) => {
                    let fatal = matches!(
                        error.downcast_ref::<StoreError>(),
                        Some(
                            StoreError::ReadOnly { .. }
                                | StoreError::DiskFull { .. }
                                | StoreError::Damaged { .. }
                                | StoreError::MarkedDamaged { .. }
                                | StoreError::WalLost { .. }
                                | StoreError::Busy { .. }
                        )
                    );
                    if fatal {
                        let left = total - done;
                        outcome.warnings.push(warning(&format!(
                            "{left} reference session file{} not imported: {error:#}",
                            if left == 1 { " was" } else { "s were" }
                        )));
                        break;
                    }
                    outcome
                        .warnings
                        .push(warning(&format!("{shown} was not imported: {error:#}")));
                }
            }
        }
        if let Err(error) = writer.optimize_search_index_after_load(indexed_before) {
            outcome.warnings.push(warning(&format!("{error:#}")));
        }
        if outcome.tally.whole + outcome.tally.appended + outcome.tally.changed > 0
            && let Err(error) = writer.checkpoint()
        {
            outcome.warnings.push(warning(&format!("{error:#}")));
        }
        outcome
    }
}

/// Returns a warning as one printable line: control characters (and line breaks) escaped,
/// so that a file name cannot move the cursor or change the terminal.
pub fn warning(text: &str) -> String {
    let mut res = String::with_capacity(text.len());
    for ch in text.chars() {
        if ch.is_control() {
            res.extend(ch.escape_default());
        } else {
            res.push(ch);
        }
    }
    res
}

/// Lists the `*.jsonl` files of the reference's layout under `dir` (its canonical path
/// `root`): one `readdir` per directory and one `stat` per file.
fn scan(
    dir: &Path,
    root: &Path,
    layout: Layout,
    out: &mut Vec<Candidate>,
    warnings: &mut Vec<String>,
) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            warnings.push(warning(&format!(
                "cannot read the reference sessions directory {}: {error}",
                dir.display()
            )));
            return;
        }
    };
    let mut projects = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name();
        match layout {
            Layout::Flat => {
                if name.as_encoded_bytes().ends_with(b".jsonl") {
                    push_file(&entry, kind, root, out, warnings);
                }
            }
            Layout::ByProject => {
                if kind.is_dir() {
                    projects.push((entry.path(), root.join(&name)));
                } else if kind.is_symlink() && fs::metadata(entry.path()).is_ok_and(|m| m.is_dir())
                {
                    let path = entry.path();
                    let canonical = fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
                    projects.push((path, canonical));
                }
            }
        }
    }
    for (project, canonical) in projects {
        scan(&project, &canonical, Layout::Flat, out, warnings);
    }
}

/// Adds one directory entry named `*.jsonl` that is a file (or a link to one).
fn push_file(
    entry: &fs::DirEntry,
    kind: fs::FileType,
    dir: &Path,
    out: &mut Vec<Candidate>,
    warnings: &mut Vec<String>,
) {
    let path = entry.path();
    let (meta, key) = if kind.is_symlink() {
        match fs::metadata(&path).and_then(|meta| Ok((meta, fs::canonicalize(&path)?))) {
            Ok((meta, target)) => (Ok(meta), target),
            // A dangling link is not a session.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
            Err(error) => (Err(error), path.clone()),
        }
    } else {
        (entry.metadata(), dir.join(entry.file_name()))
    };
    match meta {
        Ok(meta) if meta.is_file() => out.push(Candidate {
            file: path,
            key: std::os::unix::ffi::OsStrExt::as_bytes(key.as_os_str()).to_vec(),
            stat: FileStat::of(&meta),
        }),
        Ok(_) => {}
        // Removed between readdir and stat: gone, not a problem.
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => warnings.push(warning(&format!("cannot read {}: {error}", path.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_escape_control_characters() {
        assert_eq!(
            warning("a\u{1b}[31mb\nc\u{9b}d"),
            "a\\u{1b}[31mb\\nc\\u{9b}d"
        );
        assert_eq!(warning("plain – ünïcode"), "plain – ünïcode");
    }

    #[test]
    fn the_directory_is_resolved_as_the_reference_resolves_it() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent");
        let home = dir.path().join("home");
        let cwd = dir.path().join("work");
        std::fs::create_dir_all(&agent).unwrap();
        let env = |vars: &[(&str, &str)]| {
            let mut map: std::collections::HashMap<String, String> = vars
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect();
            map.insert(
                "PI_CODING_AGENT_DIR".to_owned(),
                agent.to_string_lossy().into_owned(),
            );
            Env::from_parts(map, cwd.clone(), Some(home.clone()))
        };
        let settings = |env: &Env| Settings::load(&env.agent_dir(), env.cwd(), env.home());
        let plain = env(&[]);
        assert_eq!(
            SessionsDir::resolve(&plain, &settings(&plain), None),
            SessionsDir {
                path: agent.join("sessions"),
                layout: Layout::ByProject
            }
        );
        std::fs::write(agent.join("settings.json"), r#"{"sessionDir": "rel/s"}"#).unwrap();
        assert_eq!(
            SessionsDir::resolve(&plain, &settings(&plain), None).path,
            cwd.join("rel/s")
        );
        let with_env = env(&[("PI_CODING_AGENT_SESSION_DIR", "~/from-env")]);
        assert_eq!(
            SessionsDir::resolve(&with_env, &settings(&with_env), None),
            SessionsDir {
                path: home.join("from-env"),
                layout: Layout::Flat
            }
        );
        assert_eq!(
            SessionsDir::resolve(&with_env, &settings(&with_env), Some("flag")).path,
            cwd.join("flag")
        );
        assert!(AutoImport::new(&plain, &settings(&plain), None).enabled);
        let off = env(&[("PI_AUTO_IMPORT", "0")]);
        assert!(!AutoImport::new(&off, &settings(&off), None).enabled);
        std::fs::write(
            agent.join("settings.json"),
            r#"{"database": {"autoImport": false}}"#,
        )
        .unwrap();
        assert!(!AutoImport::new(&plain, &settings(&plain), None).enabled);
    }
}
