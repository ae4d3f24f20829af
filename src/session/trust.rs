//! Project trust, as 1.6.0 has it (`dist/core/trust-manager.js`, `dist/core/project-trust.js`,
//! `docs/security.md` of the package): a folder's protected resources — `.pi/settings.json`,
//! `.pi/mcp.json`, `.pi/extensions`, `.pi/skills`, `.pi/prompts`, `.pi/themes`, `.pi/SYSTEM.md`,
//! `.pi/APPEND_SYSTEM.md`, and `.agents/skills` in the folder or an ancestor — load only once
//! the user trusts the folder. Context files (`AGENTS.md`, `CLAUDE.md`, …) are not protected.
//!
//! The decision for a runtime directory ([`ProjectTrust::decide`]) is, in order: one already
//! made in this process; `--approve` / `--no-approve`; for a folder without protected resources
//! its saved decision, else trusted; the closest saved decision of the folder or a parent; the
//! user's `defaultProjectTrust` (`always` trusts, `never` does not, `ask` asks when a person can
//! answer and otherwise does not trust).
//!
//! Saved decisions live in `<agent dir>/trust.json`, the reference's file: an object from
//! canonical directory paths to `true` / `false` (`null` is read as "no decision" and never
//! written), keys sorted, two-space indented, with a final newline:
//!
//! ```text
//! {
//!   "/home/me/code": true,
//!   "/home/me/code/untrusted-clone": false
//! }
//! ```
//!
//! Every read and write holds the reference's lock: the directory `trust.json.lock`
//! (proper-lockfile's `mkdir` lock; one older than 10 s is stale and taken over; a held one is
//! retried 10 times, 20 ms apart).
//!
//! Invariant: prints nothing and reads no environment variable (home, agent dir and clock
//! come in); a trust file that cannot be read never makes a folder trusted.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::session::resources::paths::{canonical, normalize};
use crate::support::clock::Clock;

/// The entries of `.pi` whose presence makes a folder need a trust decision.
pub const PROTECTED_PROJECT_ENTRIES: [&str; 8] = [
    "settings.json",
    "mcp.json",
    "extensions",
    "skills",
    "prompts",
    "themes",
    "SYSTEM.md",
    "APPEND_SYSTEM.md",
];

/// How long a lock directory may stay unchanged before it counts as abandoned (proper-lockfile's
/// default `stale`).
const LOCK_STALE_MS: i64 = 10_000;
/// Attempts at taking a held lock, and the wait between them (the reference's).
const LOCK_ATTEMPTS: u32 = 10;
const LOCK_DELAY: Duration = Duration::from_millis(20);

/// A failure of the trust store.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The file exists but is not JSON (the reference's wording).
    #[error("Failed to read trust store {}: {message}", path.display())]
    Read {
        /// The trust file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The file is JSON but not the trust format (the reference's wording).
    #[error("Invalid trust store {}: {message}", path.display())]
    Invalid {
        /// The trust file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// Writing the file or its lock failed.
    #[error("Failed to write trust store {}: {source}", path.display())]
    Write {
        /// The file or lock directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Another process holds the lock.
    #[error("Trust store {} is locked by another process", path.display())]
    Locked {
        /// The lock directory.
        path: PathBuf,
    },
}

/// The user's `defaultProjectTrust` (read from `<agent dir>/settings.json` only, never from a
/// project's settings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DefaultProjectTrust {
    /// Ask when a person can answer; otherwise do not trust (the default).
    #[default]
    Ask,
    /// Trust.
    Always,
    /// Do not trust.
    Never,
}

impl DefaultProjectTrust {
    /// Parses the setting as the reference does: `"always"` and `"never"`, anything else asks.
    pub fn parse(value: Option<&Value>) -> Self {
        match value.and_then(Value::as_str) {
            Some("always") => Self::Always,
            Some("never") => Self::Never,
            _ => Self::Ask,
        }
    }
}

/// A saved decision that applies to a folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustEntry {
    /// The key it is saved under (the folder or one of its parents).
    pub path: String,
    /// Trusted or not.
    pub decision: bool,
}

/// One change to the saved decisions: `None` removes the folder's own decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustUpdate {
    /// The folder.
    pub path: PathBuf,
    /// The decision to save, or `None` to remove one.
    pub decision: Option<bool>,
}

/// One answer of the trust question (`getProjectTrustOptions`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustOption {
    /// The label shown.
    pub label: String,
    /// Whether choosing it trusts the folder for this process.
    pub trusted: bool,
    /// What choosing it saves.
    pub updates: Vec<TrustUpdate>,
    /// The folder whose saved decision it is (none for "this session only").
    pub saved_path: Option<PathBuf>,
}

/// The folder as trust keys name it: absolute, normalised, symlinks resolved when it exists.
pub fn trust_path(cwd: &Path) -> PathBuf {
    canonical(&normalize(cwd))
}

/// The folder's parent as the second answer offers it (none for `/`).
pub fn trust_parent(cwd: &Path) -> Option<PathBuf> {
    trust_path(cwd).parent().map(Path::to_path_buf)
}

/// Returns whether `cwd` has resources that need a trust decision: a protected entry under
/// `<cwd>/.pi`, or `.agents/skills` in `cwd` or an ancestor — except the user's own
/// `~/.agents/skills` (`hasTrustRequiringProjectResources`). A bare `.pi` needs none.
pub fn has_protected_resources(cwd: &Path, home: Option<&Path>) -> bool {
    let current = trust_path(cwd);
    let config_dir = current.join(".pi");
    if PROTECTED_PROJECT_ENTRIES
        .iter()
        .any(|entry| config_dir.join(entry).exists())
    {
        return true;
    }
    let user_skills = home.map(|home| trust_path(home).join(".agents").join("skills"));
    current.ancestors().any(|dir| {
        let skills = dir.join(".agents").join("skills");
        Some(&skills) != user_skills.as_ref() && skills.exists()
    })
}

/// The answers of the trust question for `cwd`, in the reference's order: Trust, Trust parent
/// folder (…), [Trust (this session only)], Do not trust, [Do not trust (this session only)].
pub fn trust_options(cwd: &Path, include_session_only: bool) -> Vec<TrustOption> {
    let path = trust_path(cwd);
    let mut options = vec![TrustOption {
        label: "Trust".to_owned(),
        trusted: true,
        updates: vec![TrustUpdate {
            path: path.clone(),
            decision: Some(true),
        }],
        saved_path: Some(path.clone()),
    }];
    if let Some(parent) = path.parent() {
        options.push(TrustOption {
            label: format!("Trust parent folder ({})", parent.display()),
            trusted: true,
            updates: vec![
                TrustUpdate {
                    path: parent.to_path_buf(),
                    decision: Some(true),
                },
                TrustUpdate {
                    path: path.clone(),
                    decision: None,
                },
            ],
            saved_path: Some(parent.to_path_buf()),
        });
    }
    if include_session_only {
        options.push(TrustOption {
            label: "Trust (this session only)".to_owned(),
            trusted: true,
            updates: Vec::new(),
            saved_path: None,
        });
    }
    options.push(TrustOption {
        label: "Do not trust".to_owned(),
        trusted: false,
        updates: vec![TrustUpdate {
            path: path.clone(),
            decision: Some(false),
        }],
        saved_path: Some(path),
    });
    if include_session_only {
        options.push(TrustOption {
            label: "Do not trust (this session only)".to_owned(),
            trusted: false,
            updates: Vec::new(),
            saved_path: None,
        });
    }
    options
}

/// The question asked at startup (`formatProjectTrustPrompt`).
pub fn trust_question(cwd: &Path) -> String {
    format!(
        "Trust project folder?\n{}\n\nThis allows pi to load .pi settings and resources, install missing project packages, and execute project extensions.",
        cwd.display()
    )
}

/// What the REPL says about an untrusted folder with protected resources (the reference's
/// warning).
pub const UNTRUSTED_REPL_NOTICE: &str = "This project is not trusted. Project .pi resources and packages are ignored. Use /trust to save a trust decision, then restart pi.";

/// What print, JSON and RPC modes say on stderr when they skip a folder's protected resources.
pub fn untrusted_notice(cwd: &Path) -> String {
    format!(
        "{} is not trusted: its .pi settings, extensions, skills, prompt templates and system prompt files are ignored (trust it with --approve, /trust in the REPL, or \"defaultProjectTrust\": \"always\" in the user settings)",
        cwd.display()
    )
}

/// `<agent dir>/trust.json` and its lock.
#[derive(Clone, Debug)]
pub struct ProjectTrustStore {
    path: PathBuf,
    clock: Arc<dyn Clock>,
}

impl ProjectTrustStore {
    /// The store of `agent_dir`; `clock` judges whether a lock is stale.
    pub fn new(agent_dir: &Path, clock: Arc<dyn Clock>) -> Self {
        Self {
            path: normalize(agent_dir).join("trust.json"),
            clock,
        }
    }

    /// Returns the trust file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Returns the closest saved decision for `cwd` (the folder, else its nearest parent).
    pub fn get(&self, cwd: &Path) -> Result<Option<bool>, TrustError> {
        Ok(self.get_entry(cwd)?.map(|entry| entry.decision))
    }

    /// Returns the closest saved decision for `cwd` and the folder it is saved for.
    pub fn get_entry(&self, cwd: &Path) -> Result<Option<TrustEntry>, TrustError> {
        let _lock = self.lock()?;
        let data = self.read()?;
        Ok(nearest(&data, cwd))
    }

    /// Saves one decision (`None` removes the folder's own).
    pub fn set(&self, cwd: &Path, decision: Option<bool>) -> Result<(), TrustError> {
        self.set_many(&[TrustUpdate {
            path: cwd.to_path_buf(),
            decision,
        }])
    }

    /// Applies `updates` in order in one locked read-modify-write.
    pub fn set_many(&self, updates: &[TrustUpdate]) -> Result<(), TrustError> {
        let _lock = self.lock()?;
        let mut data = self.read()?;
        for update in updates {
            let key = trust_path(&update.path).to_string_lossy().into_owned();
            data.retain(|(existing, _)| !same_path(existing, &key));
            if let Some(decision) = update.decision {
                data.push((key, Some(decision)));
            }
        }
        self.write(&data)
    }

    fn read(&self) -> Result<Vec<(String, Option<bool>)>, TrustError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => {
                return Err(TrustError::Read {
                    path: self.path.clone(),
                    message: error.to_string(),
                });
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let parsed: Value = serde_json::from_str(text).map_err(|error| TrustError::Read {
            path: self.path.clone(),
            message: error.to_string(),
        })?;
        let Value::Object(map) = parsed else {
            return Err(TrustError::Invalid {
                path: self.path.clone(),
                message: "expected an object".to_owned(),
            });
        };
        let mut data = Vec::with_capacity(map.len());
        for (key, value) in map {
            let decision = match value {
                Value::Bool(decision) => Some(decision),
                Value::Null => None,
                _ => {
                    let mut quoted = String::new();
                    crate::support::json::write_string(&mut quoted, &key);
                    return Err(TrustError::Invalid {
                        path: self.path.clone(),
                        message: format!("value for {quoted} must be true, false, or null"),
                    });
                }
            };
            data.push((key, decision));
        }
        Ok(data)
    }

    /// Writes the file as `JSON.stringify(sorted, null, 2)` plus a newline, keys in UTF-16
    /// order (JavaScript's default sort); written to a temporary file and renamed into place.
    fn write(&self, data: &[(String, Option<bool>)]) -> Result<(), TrustError> {
        let mut sorted: Vec<&(String, Option<bool>)> = data.iter().collect();
        sorted.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
        let mut text = String::from("{");
        for (index, (key, decision)) in sorted.iter().enumerate() {
            text.push_str(if index == 0 { "\n  " } else { ",\n  " });
            crate::support::json::write_string(&mut text, key);
            text.push_str(match decision {
                Some(true) => ": true",
                Some(false) => ": false",
                None => ": null",
            });
        }
        text.push_str(if sorted.is_empty() { "}\n" } else { "\n}\n" });
        let write_error = |path: &Path, source| TrustError::Write {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|error| write_error(dir, error))?;
        }
        let temp = self.path.with_extension("json.tmp");
        std::fs::write(&temp, text).map_err(|error| write_error(&temp, error))?;
        std::fs::rename(&temp, &self.path).map_err(|error| write_error(&self.path, error))
    }

    /// Takes the `trust.json.lock` directory lock.
    fn lock(&self) -> Result<TrustLock, TrustError> {
        let lock = PathBuf::from(format!("{}.lock", self.path.display()));
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| TrustError::Write {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        for attempt in 1..=LOCK_ATTEMPTS {
            match std::fs::create_dir(&lock) {
                Ok(()) => return Ok(TrustLock { path: lock }),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    if self.is_stale(&lock) {
                        // Abandoned by a process that died holding it: take it over.
                        let _ = std::fs::remove_dir_all(&lock);
                        continue;
                    }
                    if attempt < LOCK_ATTEMPTS {
                        std::thread::sleep(LOCK_DELAY);
                    }
                }
                Err(source) => return Err(TrustError::Write { path: lock, source }),
            }
        }
        Err(TrustError::Locked { path: lock })
    }

    fn is_stale(&self, lock: &Path) -> bool {
        let Ok(modified) = std::fs::metadata(lock).and_then(|meta| meta.modified()) else {
            return false;
        };
        let Ok(since_epoch) = modified.duration_since(std::time::UNIX_EPOCH) else {
            return false;
        };
        let modified_ms = i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX);
        modified_ms < self.clock.now_ms() - LOCK_STALE_MS
    }
}

/// The held lock; dropping it releases it.
struct TrustLock {
    path: PathBuf,
}

impl Drop for TrustLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// Whether a key names `path` (Node's `path.resolve` comparison on POSIX).
fn same_path(key: &str, path: &str) -> bool {
    normalize(Path::new(key)) == Path::new(path)
}

/// The decision saved for the folder or its closest parent (`null` values are passed over).
fn nearest(data: &[(String, Option<bool>)], cwd: &Path) -> Option<TrustEntry> {
    let path = trust_path(cwd);
    for dir in path.ancestors() {
        let dir = dir.to_string_lossy();
        for (key, decision) in data {
            if let Some(decision) = decision
                && same_path(key, &dir)
            {
                return Some(TrustEntry {
                    path: key.clone(),
                    decision: *decision,
                });
            }
        }
    }
    None
}

/// The outcome of [`ProjectTrust::decide`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrustDecision {
    /// Decided: whether the folder's protected resources load.
    Decided(bool),
    /// Nothing decides and a person can answer: ask them ([`trust_options`]).
    Ask,
}

/// The trust decisions of one pi process: the command-line override, the user's default, the
/// saved decisions, and those made so far (a folder is decided once per process).
#[derive(Clone, Debug)]
pub struct ProjectTrust {
    /// The trust file.
    pub store: ProjectTrustStore,
    /// `--approve` (`Some(true)`) or `--no-approve` (`Some(false)`).
    pub cli_override: Option<bool>,
    /// The user's `defaultProjectTrust`.
    pub default: DefaultProjectTrust,
    /// The home directory (its `~/.agents/skills` is the user's, not a project's).
    pub home: Option<PathBuf>,
    /// Whether a person can answer the question (the REPL; not print, JSON or RPC mode).
    pub interactive: bool,
    decided: Arc<Mutex<HashMap<PathBuf, bool>>>,
}

impl ProjectTrust {
    /// The decisions of a process using `store`.
    pub fn new(
        store: ProjectTrustStore,
        cli_override: Option<bool>,
        default: DefaultProjectTrust,
        home: Option<PathBuf>,
        interactive: bool,
    ) -> Self {
        Self {
            store,
            cli_override,
            default,
            home,
            interactive,
            decided: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Decides for `cwd` without asking (see the module docs); a trust file that cannot be
    /// read counts as no saved decision and is reported in `problems`.
    pub fn decide(&self, cwd: &Path, problems: &mut Vec<String>) -> TrustDecision {
        let key = trust_path(cwd);
        if let Some(trusted) = self.decided_for(&key) {
            return TrustDecision::Decided(trusted);
        }
        let decision = self.decide_fresh(cwd, problems);
        if let TrustDecision::Decided(trusted) = decision {
            self.remember(cwd, trusted);
        }
        decision
    }

    fn decide_fresh(&self, cwd: &Path, problems: &mut Vec<String>) -> TrustDecision {
        if let Some(trusted) = self.cli_override {
            return TrustDecision::Decided(trusted);
        }
        let mut saved = || match self.store.get(cwd) {
            Ok(saved) => saved,
            Err(error) => {
                problems.push(error.to_string());
                None
            }
        };
        if !has_protected_resources(cwd, self.home.as_deref()) {
            return TrustDecision::Decided(saved().unwrap_or(true));
        }
        if let Some(saved) = saved() {
            return TrustDecision::Decided(saved);
        }
        match self.default {
            DefaultProjectTrust::Always => TrustDecision::Decided(true),
            DefaultProjectTrust::Never => TrustDecision::Decided(false),
            DefaultProjectTrust::Ask if self.interactive => TrustDecision::Ask,
            DefaultProjectTrust::Ask => TrustDecision::Decided(false),
        }
    }

    /// Applies the answer the user chose: saves its updates and remembers the decision for
    /// this process (also when saving fails, which is returned).
    pub fn choose(&self, cwd: &Path, option: &TrustOption) -> Result<(), TrustError> {
        self.remember(cwd, option.trusted);
        if option.updates.is_empty() {
            return Ok(());
        }
        self.store.set_many(&option.updates)
    }

    /// Records the decision for `cwd` in this process.
    pub fn remember(&self, cwd: &Path, trusted: bool) {
        if let Ok(mut decided) = self.decided.lock() {
            decided.insert(trust_path(cwd), trusted);
        }
    }

    /// The decision made for `cwd` in this process, if any.
    pub fn decided_for(&self, cwd: &Path) -> Option<bool> {
        let key = trust_path(cwd);
        self.decided
            .lock()
            .ok()
            .and_then(|decided| decided.get(&key).copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::clock::SystemClock;

    fn store(dir: &Path) -> ProjectTrustStore {
        ProjectTrustStore::new(dir, Arc::new(SystemClock))
    }

    #[test]
    fn the_closest_saved_decision_applies_and_the_file_is_the_references_format() {
        let dir = tempfile::tempdir().unwrap();
        let root = trust_path(dir.path());
        let project = root.join("code/app");
        std::fs::create_dir_all(&project).unwrap();
        let store = store(&root.join("agent"));
        assert_eq!(store.get(&project).unwrap(), None);
        store.set(&root.join("code"), Some(true)).unwrap();
        assert_eq!(
            store.get_entry(&project).unwrap(),
            Some(TrustEntry {
                path: root.join("code").display().to_string(),
                decision: true
            })
        );
        store.set(&project, Some(false)).unwrap();
        assert_eq!(store.get(&project).unwrap(), Some(false));
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert_eq!(
            text,
            format!(
                "{{\n  \"{}\": true,\n  \"{}\": false\n}}\n",
                root.join("code").display(),
                project.display()
            )
        );
        // "Trust parent folder" saves the parent and removes the folder's own decision.
        let options = trust_options(&project, true);
        let labels: Vec<&str> = options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels[0], "Trust");
        assert!(labels[1].starts_with("Trust parent folder ("));
        assert_eq!(
            &labels[2..],
            [
                "Trust (this session only)",
                "Do not trust",
                "Do not trust (this session only)"
            ]
        );
        store.set_many(&options[1].updates).unwrap();
        assert_eq!(store.get(&project).unwrap(), Some(true));
        assert!(
            !std::fs::read_to_string(store.path())
                .unwrap()
                .contains("app")
        );
        assert!(!root.join("agent/trust.json.lock").exists());
    }

    #[test]
    fn bad_files_are_errors_and_null_is_no_decision() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let cwd = trust_path(dir.path());
        std::fs::write(store.path(), format!("{{\"{}\": null}}", cwd.display())).unwrap();
        assert_eq!(store.get(&cwd).unwrap(), None);
        std::fs::write(store.path(), "[]").unwrap();
        assert!(matches!(store.get(&cwd), Err(TrustError::Invalid { .. })));
        std::fs::write(store.path(), "{\"/x\": 1}").unwrap();
        let error = store.get(&cwd).unwrap_err().to_string();
        assert!(error.ends_with("value for \"/x\" must be true, false, or null"));
        std::fs::write(store.path(), "{").unwrap();
        assert!(matches!(store.get(&cwd), Err(TrustError::Read { .. })));
    }

    #[test]
    fn a_held_lock_is_waited_for_and_a_stale_one_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("trust.json.lock");
        std::fs::create_dir(&lock).unwrap();
        let fresh = store(dir.path());
        assert!(matches!(
            fresh.get(dir.path()),
            Err(TrustError::Locked { .. })
        ));
        // A clock 11 s ahead of the lock's mtime finds it stale.
        let later = ProjectTrustStore::new(
            dir.path(),
            Arc::new(crate::support::clock::SteppingClock::new(
                SystemClock.now_ms() + 11_000,
                0,
            )),
        );
        assert_eq!(later.get(dir.path()).unwrap(), None);
        assert!(!lock.exists());
    }

    #[test]
    fn protected_resources_are_the_references_list() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let cwd = home.join("code");
        std::fs::create_dir_all(cwd.join(".pi")).unwrap();
        assert!(!has_protected_resources(&cwd, Some(&home)));
        // The user's own ~/.agents/skills is not a project's.
        std::fs::create_dir_all(home.join(".agents/skills")).unwrap();
        assert!(!has_protected_resources(&cwd, Some(&home)));
        assert!(has_protected_resources(&cwd, None));
        for entry in PROTECTED_PROJECT_ENTRIES {
            let path = cwd.join(".pi").join(entry);
            std::fs::write(&path, "").unwrap();
            assert!(has_protected_resources(&cwd, Some(&home)), "{entry}");
            std::fs::remove_file(&path).unwrap();
        }
        std::fs::create_dir_all(dir.path().join(".agents/skills")).unwrap();
        assert!(has_protected_resources(&cwd, Some(&home)));
    }

    #[test]
    fn decisions_follow_the_references_order() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("p");
        std::fs::create_dir_all(cwd.join(".pi/extensions")).unwrap();
        let plain = dir.path().join("plain");
        std::fs::create_dir_all(&plain).unwrap();
        let trust = |cli, default, interactive| {
            ProjectTrust::new(
                store(&dir.path().join("agent")),
                cli,
                default,
                None,
                interactive,
            )
        };
        let mut problems = Vec::new();
        let ask = trust(None, DefaultProjectTrust::Ask, false);
        assert_eq!(
            ask.decide(&cwd, &mut problems),
            TrustDecision::Decided(false)
        );
        assert_eq!(
            ask.decide(&plain, &mut problems),
            TrustDecision::Decided(true)
        );
        let asking = trust(None, DefaultProjectTrust::Ask, true);
        assert_eq!(asking.decide(&cwd, &mut problems), TrustDecision::Ask);
        let always = trust(None, DefaultProjectTrust::Always, false);
        assert_eq!(
            always.decide(&cwd, &mut problems),
            TrustDecision::Decided(true)
        );
        let never = trust(Some(true), DefaultProjectTrust::Never, false);
        assert_eq!(
            never.decide(&cwd, &mut problems),
            TrustDecision::Decided(true)
        );
        // A saved "no" wins over the default, and holds for a folder without resources.
        asking.store.set(&cwd, Some(false)).unwrap();
        asking.store.set(&plain, Some(false)).unwrap();
        let always = trust(None, DefaultProjectTrust::Always, true);
        assert_eq!(
            always.decide(&cwd, &mut problems),
            TrustDecision::Decided(false)
        );
        assert_eq!(
            always.decide(&plain, &mut problems),
            TrustDecision::Decided(false)
        );
        assert!(problems.is_empty());
        // Once decided, a folder stays decided in this process.
        always.remember(&cwd, true);
        assert_eq!(
            always.decide(&cwd, &mut problems),
            TrustDecision::Decided(true)
        );
    }
}
