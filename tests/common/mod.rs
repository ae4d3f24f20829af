//! Test helpers: a hermetic environment (temporary agent dir, cleared environment, fixed clock
//! and id seed), the `pi` command builder, and fixture loading.

pub mod agent;
pub mod chromium;
pub mod corpus;
pub mod fixtures;
pub mod interchange;
pub mod postgres;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use assert_cmd::Command;
use pi::store::{SessionStore, StoreConfig, StoreLocation};
use pi::support::clock::SteppingClock;
use pi::support::ids::IdSource;
use tempfile::TempDir;

/// 2026-01-01T00:00:00.000Z, the start of the test clock.
pub const TEST_CLOCK_START_MS: i64 = 1_767_225_600_000;

/// A temporary agent directory, workspace and database, with a cleared environment.
pub struct TestEnv {
    pub dir: TempDir,
    pub agent_dir: PathBuf,
    pub workspace: PathBuf,
    pub home: PathBuf,
}

impl TestEnv {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let agent_dir = dir.path().join("agent");
        let workspace = dir.path().join("work");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        Self {
            dir,
            agent_dir,
            workspace,
            home,
        }
    }

    /// The default database path (`<agent dir>/pi.db`).
    pub fn db(&self) -> PathBuf {
        self.agent_dir.join("pi.db")
    }

    /// A `pi` command with a cleared environment, run in the workspace.
    pub fn pi(&self) -> Command {
        let mut cmd = Command::from_std(self.pi_process());
        cmd.timeout(Duration::from_secs(120));
        cmd
    }

    /// The same command as [`TestEnv::pi`] as a plain `std::process::Command`, for tests that
    /// spawn `pi` and talk to it while it runs (signals, closed pipes).
    pub fn pi_process(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("pi"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("PI_CODING_AGENT_DIR", &self.agent_dir)
            .env("PI_TEST_CLOCK", TEST_CLOCK_START_MS.to_string())
            .env("PI_TEST_SEED", "7")
            .env("NO_COLOR", "1")
            .current_dir(&self.workspace);
        cmd
    }

    /// Opens the store on the default database with a stepping clock and a seeded id source.
    pub fn store(&self) -> SessionStore {
        open_store(&self.db(), 11)
    }

    /// Stores an empty session recorded in a directory that does not exist; returns its id
    /// and that directory.
    pub fn session_in_a_deleted_directory(&self) -> (pi::model::SessionId, PathBuf) {
        let gone = self.dir.path().join("deleted-project");
        let session = self
            .store()
            .create_session(&pi::store::NewSession {
                cwd: gone.display().to_string(),
                parent_session: None,
            })
            .expect("create a session")
            .id;
        (session, gone)
    }
}

/// Creates an empty session recorded in `cwd`; returns its id.
pub fn new_session(store: &SessionStore, cwd: &str) -> pi::model::SessionId {
    store
        .create_session(&pi::store::NewSession {
            cwd: cwd.to_owned(),
            parent_session: None,
        })
        .expect("create a session")
        .id
}

/// A user message with plain `text` at `timestamp` (ms).
pub fn user_message(text: &str, timestamp: i64) -> pi::model::message::AgentMessage {
    pi::model::message::AgentMessage::User(pi::model::message::UserMessage {
        content: pi::model::message::UserContent::Text(text.to_owned()),
        timestamp,
        extra: serde_json::Map::new(),
    })
}

/// Opens a store on `db` with a stepping test clock and a seeded id source.
pub fn open_store(db: &Path, seed: u64) -> SessionStore {
    SessionStore::open(StoreConfig {
        location: StoreLocation::File(db.to_path_buf()),
        clock: Arc::new(SteppingClock::new(TEST_CLOCK_START_MS, 1000)),
        ids: Arc::new(IdSource::seeded(seed)),
        busy_timeout: Duration::from_secs(10),
    })
    .expect("open store")
}

/// Opens an in-memory store.
pub fn memory_store(seed: u64) -> SessionStore {
    SessionStore::open(StoreConfig {
        location: StoreLocation::Memory,
        clock: Arc::new(SteppingClock::new(TEST_CLOCK_START_MS, 1000)),
        ids: Arc::new(IdSource::seeded(seed)),
        busy_timeout: Duration::from_secs(10),
    })
    .expect("open memory store")
}

/// Runs a command that must succeed, and returns its output; on failure the assertion shows
/// its stderr and stdout.
pub fn succeeded(cmd: &mut Command) -> std::process::Output {
    let output = cmd.output().expect("run command");
    assert!(
        output.status.success(),
        "{:?}\nstderr: {}\nstdout: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    output
}

/// Runs a command that must succeed, and returns its stdout as text.
pub fn stdout_text(cmd: &mut Command) -> String {
    String::from_utf8(succeeded(cmd).stdout).expect("stdout is UTF-8")
}

/// `text` with each `from` replaced by its `to`: what a snapshot must not depend on (temporary
/// paths, the crate version) becomes a fixed placeholder.
pub fn redact(text: &str, replacements: &[(&str, &str)]) -> String {
    replacements
        .iter()
        .fold(text.to_owned(), |text, (from, to)| text.replace(from, to))
}

/// Parses stdout of a finished command as JSON (lenient about lone surrogates).
pub fn stdout_json(output: &std::process::Output) -> serde_json::Value {
    pi::support::json::parse_lenient(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "stdout is not JSON ({err}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}
pub mod provider;
pub mod search_corpus;
pub mod tmux;

/// A session file of `entries` linear messages (user and assistant in turn, each with about
/// `filler` bytes of text: `question N …` / `answer N …`), for bulk imports and merges.
pub fn bulk_session_file(path: &Path, id: &str, entries: usize, filler: usize) {
    use serde_json::{Value, json};
    use std::io::Write as _;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(
        out,
        "{}",
        json!({"type": "session", "version": 3, "id": id, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/bulk"})
    )
    .unwrap();
    let text = "lorem ipsum dolor sit amet ".repeat(filler / 27 + 1);
    let mut parent = Value::Null;
    for n in 0..entries {
        let entry_id = format!("{:08x}", n + 1);
        let message = if n % 2 == 0 {
            json!({"role": "user", "content": format!("question {n} {text}"), "timestamp": n})
        } else {
            json!({"role": "assistant", "content": [{"type": "text", "text": format!("answer {n} {text}")}],
                   "api": "openai-completions", "provider": "test", "model": "m",
                   "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                   "stopReason": "stop", "timestamp": n})
        };
        writeln!(
            out,
            "{}",
            json!({"type": "message", "id": entry_id, "parentId": parent,
                   "timestamp": "2026-01-01T00:00:01.000Z", "message": message})
        )
        .unwrap();
        parent = Value::String(entry_id);
    }
    out.flush().unwrap();
}
