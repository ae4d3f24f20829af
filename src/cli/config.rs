//! Everything pi reads from its environment at startup: environment variables, the agent
//! directory and the database location, and the test hooks that fix time and randomness.
//!
//! Invariant: this is the only module that reads `std::env`; lower layers get values.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::store::{LeaseConfig, StoreConfig, StoreLocation};
use crate::support::clock::{Clock, SteppingClock, SystemClock, ms_from_iso};
use crate::support::ids::IdSource;

/// A snapshot of the process environment taken once at startup.
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: HashMap<String, String>,
    cwd: PathBuf,
    home: Option<PathBuf>,
    executable: Option<PathBuf>,
}

impl Env {
    /// Captures the real process environment.
    pub fn capture() -> Self {
        let vars = std::env::vars_os()
            .filter_map(|(key, value)| Some((key.into_string().ok()?, value.into_string().ok()?)))
            .collect::<HashMap<_, _>>();
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let home = vars
            .get("HOME")
            .filter(|home| !home.is_empty())
            .map(PathBuf::from)
            .or_else(std::env::home_dir);
        let executable = std::env::current_exe().ok();
        Self {
            vars,
            cwd,
            home,
            executable,
        }
    }

    /// Builds an environment from explicit values (for tests).
    pub fn from_parts(vars: HashMap<String, String>, cwd: PathBuf, home: Option<PathBuf>) -> Self {
        Self {
            vars,
            cwd,
            home,
            executable: None,
        }
    }

    /// Returns a variable's value when it is set and not empty.
    pub fn var(&self, key: &str) -> Option<&str> {
        self.vars
            .get(key)
            .map(String::as_str)
            .filter(|value| !value.is_empty())
    }

    /// Returns every variable of the snapshot (for child processes that must see the same
    /// environment, such as `!command` key lookups).
    pub fn vars(&self) -> &HashMap<String, String> {
        &self.vars
    }

    /// Returns the working directory pi was started in.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Returns the path of the running executable, when known (not for [`Self::from_parts`]).
    pub fn executable(&self) -> Option<&Path> {
        self.executable.as_deref()
    }

    /// Returns the home directory.
    pub fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// Expands a leading `~` or `~/` as the reference does.
    pub fn expand_tilde(&self, value: &str) -> PathBuf {
        match (value.strip_prefix('~'), self.home()) {
            (Some(""), Some(home)) => home.to_path_buf(),
            (Some(rest), Some(home)) if rest.starts_with('/') => home.join(&rest[1..]),
            _ => PathBuf::from(value),
        }
    }

    /// Returns the agent directory: `$PI_CODING_AGENT_DIR`, else `~/.pi/agent`.
    pub fn agent_dir(&self) -> PathBuf {
        match self.var("PI_CODING_AGENT_DIR") {
            Some(dir) => self.absolute(&self.expand_tilde(dir)),
            None => match self.home() {
                Some(home) => home.join(".pi").join("agent"),
                None => self.cwd.join(".pi").join("agent"),
            },
        }
    }

    /// Resolves a path against the working directory.
    pub fn absolute(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.cwd.join(path)
        }
    }

    /// Whether colour output is allowed (`NO_COLOR` unset or empty).
    pub fn color_allowed(&self) -> bool {
        self.var("NO_COLOR").is_none()
    }

    /// Returns the clock: the system clock, or a stepping clock from `PI_TEST_CLOCK`
    /// (Unix ms or ISO-8601; each read advances `PI_TEST_CLOCK_STEP_MS`, default 1).
    pub fn clock(&self) -> Arc<dyn Clock> {
        let start = self
            .var("PI_TEST_CLOCK")
            .and_then(|value| value.parse::<i64>().ok().or_else(|| ms_from_iso(value)));
        match start {
            Some(start) => {
                let step = self
                    .var("PI_TEST_CLOCK_STEP_MS")
                    .and_then(|value| value.parse::<i64>().ok())
                    .unwrap_or(1);
                Arc::new(SteppingClock::new(start, step))
            }
            None => Arc::new(SystemClock),
        }
    }

    /// Returns the id source: seeded from `PI_TEST_SEED`, else random.
    pub fn id_source(&self) -> Arc<IdSource> {
        match self
            .var("PI_TEST_SEED")
            .and_then(|value| value.parse::<u64>().ok())
        {
            Some(seed) => Arc::new(IdSource::seeded(seed)),
            None => Arc::new(IdSource::random()),
        }
    }

    /// Returns the database path: `--db`, else `<agent dir>/pi.db`.
    pub fn db_path(&self, db: Option<&Path>) -> PathBuf {
        match db {
            Some(db) => self.absolute(&self.expand_tilde(&db.to_string_lossy())),
            None => self.agent_dir().join("pi.db"),
        }
    }

    /// Returns the store configuration for a database file.
    pub fn store_config(&self, db: Option<&Path>) -> StoreConfig {
        StoreConfig {
            location: StoreLocation::File(self.db_path(db)),
            clock: self.clock(),
            ids: self.id_source(),
            busy_timeout: self.busy_timeout(None),
        }
    }
}

impl Env {
    /// Returns the writer-lease intervals: 10 s heartbeat and 30 s staleness, or the
    /// `settings.json` values (`lease.heartbeatMs`, `lease.staleMs`, passed in), overridden
    /// (for tests and unusual file systems) by `PI_LEASE_HEARTBEAT_MS` and
    /// `PI_LEASE_STALE_MS`. A staleness below three heartbeats is raised to three, so a
    /// holder that renews on time is never taken over.
    pub fn lease_config(&self, heartbeat_ms: Option<u64>, stale_ms: Option<u64>) -> LeaseConfig {
        let millis = |key: &str, setting: Option<u64>| {
            self.var(key)
                .and_then(|value| value.parse::<u64>().ok())
                .or(setting)
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis)
        };
        let heartbeat =
            millis("PI_LEASE_HEARTBEAT_MS", heartbeat_ms).unwrap_or(LeaseConfig::DEFAULT_HEARTBEAT);
        let stale_after = millis("PI_LEASE_STALE_MS", stale_ms)
            .unwrap_or(LeaseConfig::DEFAULT_STALE_AFTER)
            .max(heartbeat * 3);
        LeaseConfig {
            heartbeat,
            stale_after,
        }
    }

    /// Returns how long a writer waits for SQLite's write lock: `PI_BUSY_TIMEOUT_MS`, else
    /// the `settings.json` value (`database.busyTimeoutMs`, passed in), else 5 s.
    pub fn busy_timeout(&self, setting_ms: Option<u64>) -> Duration {
        Duration::from_millis(
            self.var("PI_BUSY_TIMEOUT_MS")
                .and_then(|value| value.parse().ok())
                .or(setting_ms)
                .unwrap_or(5000),
        )
    }
}

/// Returns the process arguments.
pub fn args() -> Vec<OsString> {
    std::env::args_os().collect()
}
