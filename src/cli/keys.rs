//! The I/O half of provider configuration: reading `models.json` and `auth.json` from the
//! agent directory, and the [`KeyResolver`] that looks up environment variables and runs the
//! `!command` value forms (`spec/models-providers-settings.md` §4.5, §5).
//!
//! The `ai` layer takes the file contents as text and calls back into [`ShellKeyResolver`]
//! for environment lookups, commands and cloud credential files (Vertex key files); nothing
//! below `cli` reads the environment, files or runs processes for keys.
//!
//! Invariant: commands run with `/bin/sh -c`, stdin closed, stderr discarded, in their own
//! process group, killed after 10 s; their trimmed stdout is the value, empty or a non-zero
//! exit is no value.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::ai::auth::{AuthFile, Credentials, KeyResolver};
use crate::ai::models::ModelRegistry;
use crate::cli::config::Env;
use crate::support::clock::Clock;

/// How long a `!command` may run.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// Resolves environment variables from the startup snapshot and runs `!command`s.
#[derive(Debug, Clone)]
pub struct ShellKeyResolver {
    vars: HashMap<String, String>,
    cwd: PathBuf,
    timeout: Duration,
}

impl ShellKeyResolver {
    /// Builds a resolver over the environment snapshot.
    pub fn new(env: &Env) -> Self {
        Self {
            vars: env.vars().clone(),
            cwd: env.cwd().to_path_buf(),
            timeout: COMMAND_TIMEOUT,
        }
    }

    /// Uses a different command timeout (tests).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl KeyResolver for ShellKeyResolver {
    fn env(&self, name: &str) -> Option<String> {
        self.vars
            .get(name)
            .filter(|value| !value.is_empty())
            .cloned()
    }

    fn read_file(&self, path: &str) -> Option<String> {
        // Credential files are small; anything over 1 MiB is not one.
        const LIMIT: u64 = 1 << 20;
        let path = match path.strip_prefix("~/") {
            Some(rest) => PathBuf::from(self.vars.get("HOME")?).join(rest),
            None => self.cwd.join(path),
        };
        let file = std::fs::File::open(path).ok()?;
        let mut text = String::new();
        file.take(LIMIT).read_to_string(&mut text).ok()?;
        Some(text)
    }

    fn run_command(&self, command: &str) -> Option<String> {
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(command)
            .env_clear()
            .envs(&self.vars)
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .ok()?;
        let mut stdout = child.stdout.take()?;
        let reader = std::thread::spawn(move || {
            let mut out = Vec::new();
            let _ = stdout.read_to_end(&mut out);
            out
        });
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if started.elapsed() < self.timeout => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                _ => {
                    // Timed out (or cannot wait): kill the whole group so that nothing keeps
                    // the pipe open.
                    if let Ok(pid) = i32::try_from(child.id()) {
                        let _ = nix::sys::signal::killpg(
                            nix::unistd::Pid::from_raw(pid),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let output = reader.join().unwrap_or_default();
        if !status?.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&output).trim().to_owned();
        (!text.is_empty()).then_some(text)
    }
}

/// Reads `<agent dir>/models.json` into the model registry (built-ins only when the file is
/// missing; a broken file is reported by [`ModelRegistry::error`]).
pub fn load_model_registry(env: &Env) -> ModelRegistry {
    let path = env.agent_dir().join("models.json");
    let display = path.display().to_string();
    match std::fs::read_to_string(&path) {
        Ok(text) => ModelRegistry::load(Some(&text), &display),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => ModelRegistry::builtin(),
        Err(err) => ModelRegistry::failed(format!(
            "Failed to load models.json: {err}\n\nFile: {display}"
        )),
    }
}

/// Reads `<agent dir>/auth.json` and builds the credential chain (an unreadable file counts
/// as empty and is reported by [`AuthFile::error`]).
pub fn load_credentials(env: &Env, clock: Arc<dyn Clock>) -> Credentials {
    let path = env.agent_dir().join("auth.json");
    let text = std::fs::read_to_string(&path).ok();
    Credentials::new(
        AuthFile::parse(text.as_deref()),
        Arc::new(ShellKeyResolver::new(env)),
        clock,
    )
    .with_store(
        Arc::new(crate::cli::auth_store::FileCredentialStore::new(path)),
        oauth_endpoints(env),
    )
}

/// The OAuth endpoints: 1.6.0's, unless the test-only `PI_TEST_OAUTH_BASE`
/// (`http://127.0.0.1:<port>` of a test's authorization server) replaces their origin;
/// `PI_OAUTH_CALLBACK_HOST` is the host the loopback callback binds (1.6.0's variable);
/// `BROWSER` the program that opens the authorization URL.
pub fn oauth_endpoints(env: &Env) -> crate::ai::oauth::Endpoints {
    let var = |name: &str| {
        env.vars()
            .get(name)
            .filter(|value| !value.trim().is_empty())
            .cloned()
    };
    crate::ai::oauth::Endpoints {
        test_base: var("PI_TEST_OAUTH_BASE"),
        callback_host: var("PI_OAUTH_CALLBACK_HOST"),
        browser: var("BROWSER"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver(vars: &[(&str, &str)]) -> ShellKeyResolver {
        let env = Env::from_parts(
            vars.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            std::env::temp_dir(),
            None,
        );
        ShellKeyResolver::new(&env)
    }

    #[test]
    fn commands_give_trimmed_stdout_or_nothing() {
        let keys = resolver(&[("PATH", "/usr/bin:/bin"), ("SECRET", "s3")]);
        assert_eq!(
            keys.run_command("printf '  key-1 \\n'").as_deref(),
            Some("key-1")
        );
        assert_eq!(keys.run_command("echo $SECRET").as_deref(), Some("s3"));
        assert_eq!(keys.run_command("echo out; exit 3"), None);
        assert_eq!(keys.run_command("true"), None);
        assert_eq!(keys.run_command("echo oops >&2"), None);
        assert_eq!(keys.env("SECRET").as_deref(), Some("s3"));
        assert_eq!(keys.env("MISSING"), None);
    }

    #[test]
    fn slow_commands_are_killed() {
        let keys = resolver(&[("PATH", "/usr/bin:/bin")]).with_timeout(Duration::from_millis(200));
        let started = Instant::now();
        assert_eq!(keys.run_command("sleep 5; echo late"), None);
        assert!(started.elapsed() < Duration::from_secs(4));
    }
}
