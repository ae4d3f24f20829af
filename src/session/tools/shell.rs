//! Running a shell command the way the reference does (`spec/tools.md` §4.2), shared by the
//! `bash` tool and user `!cmd` commands.
//!
//! * Shell: setting `shellPath` (must exist: `Custom shell path not found: <path>`), else
//!   `/bin/bash`, else the first `bash` on the configured `PATH`, else `sh`; invoked as
//!   `<shell> -c <command>`.
//! * Environment: the configured environment (pi's own) with `<agentDir>/bin` put in front of
//!   `PATH` (key matched case-insensitively) unless already listed.
//! * The cwd must exist (`Working directory does not exist: <cwd>\nCannot execute bash
//!   commands.`).
//! * The child leads a new process group, stdin is the null device, stdout and stderr are
//!   read into one stream of chunks in arrival order. Killing means SIGKILL to the group,
//!   falling back to the pid.
//! * Completion: the process exited and both pipes reached EOF, or 100 ms after the exit when
//!   a background descendant still holds the pipes (its later output is lost and it is not
//!   killed).
//!
//! Live process groups are tracked so that a mode can kill them on shutdown
//! ([`kill_tracked_process_groups`]); a [`RunningCommand`] dropped before completion kills its
//! tree.
//!
//! Invariant: no environment variable is read here; everything comes from [`ShellConfig`].

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::support::ids::IdSource;

/// How long completion waits for the pipes after the process exited.
pub const EXIT_STDIO_GRACE: Duration = Duration::from_millis(100);

/// Everything shell execution needs from settings and the environment.
#[derive(Clone, Debug)]
pub struct ShellConfig {
    /// Setting `shellPath`.
    pub shell_path: Option<String>,
    /// Setting `shellCommandPrefix`: prepended to every command with a newline.
    pub command_prefix: Option<String>,
    /// The environment commands inherit (pi's own environment).
    pub env: Vec<(OsString, OsString)>,
    /// `<agentDir>/bin`, put in front of `PATH`.
    pub bin_dir: Option<PathBuf>,
    /// The OS temp directory, for full-output files (`pi-bash-<hex>.log`).
    pub temp_dir: PathBuf,
    /// Randomness for temp file names.
    pub ids: Arc<IdSource>,
}

impl ShellConfig {
    /// Returns the command with the configured prefix applied.
    pub fn prefixed(&self, command: &str) -> String {
        match self
            .command_prefix
            .as_deref()
            .filter(|prefix| !prefix.is_empty())
        {
            Some(prefix) => format!("{prefix}\n{command}"),
            None => command.to_owned(),
        }
    }

    /// Returns a fresh full-output temp file path: `<temp_dir>/pi-bash-<16 hex>.log`.
    pub fn temp_output_path(&self) -> PathBuf {
        self.temp_dir
            .join(format!("pi-bash-{:016x}.log", self.ids.next_u64()))
    }

    /// Returns the environment for commands: `PATH` gets `<agentDir>/bin` in front.
    pub fn command_env(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.env.clone();
        let Some(bin_dir) = &self.bin_dir else {
            return env;
        };
        let bin = bin_dir.as_os_str().to_owned();
        let position = env
            .iter()
            .position(|(key, _)| key.to_string_lossy().eq_ignore_ascii_case("path"));
        let current = position.map(|idx| env[idx].1.clone()).unwrap_or_default();
        let present = split_path_list(&current).any(|entry| entry.as_os_str() == bin);
        if present {
            return env;
        }
        let mut updated = bin;
        if !current.is_empty() {
            updated.push(":");
            updated.push(&current);
        }
        match position {
            Some(idx) => env[idx].1 = updated,
            None => env.push((OsString::from("PATH"), updated)),
        }
        env
    }

    /// Resolves the shell binary (see the module docs).
    pub fn resolve_shell(&self) -> Result<PathBuf, String> {
        if let Some(custom) = self.shell_path.as_deref().filter(|path| !path.is_empty()) {
            return if Path::new(custom).exists() {
                Ok(PathBuf::from(custom))
            } else {
                Err(format!("Custom shell path not found: {custom}"))
            };
        }
        if Path::new("/bin/bash").exists() {
            return Ok(PathBuf::from("/bin/bash"));
        }
        let path = self
            .env
            .iter()
            .find(|(key, _)| key.to_string_lossy().eq_ignore_ascii_case("path"))
            .map(|(_, value)| value.clone())
            .unwrap_or_default();
        for dir in split_path_list(&path) {
            let candidate = dir.join("bash");
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
        Ok(PathBuf::from("sh"))
    }
}

/// Splits a `PATH`-style list on `:`, dropping empty entries.
fn split_path_list(list: &OsString) -> impl Iterator<Item = PathBuf> + '_ {
    use std::os::unix::ffi::OsStrExt as _;
    list.as_bytes()
        .split(|byte| *byte == b':')
        .filter(|entry| !entry.is_empty())
        .map(|entry| PathBuf::from(std::ffi::OsStr::from_bytes(entry)))
}

fn tracked() -> &'static Mutex<HashSet<i32>> {
    static TRACKED: OnceLock<Mutex<HashSet<i32>>> = OnceLock::new();
    TRACKED.get_or_init(|| Mutex::new(HashSet::new()))
}

fn track(pid: i32, live: bool) {
    let mut set = match tracked().lock() {
        Ok(set) => set,
        Err(poisoned) => poisoned.into_inner(),
    };
    if live {
        set.insert(pid);
    } else {
        set.remove(&pid);
    }
}

/// Kills every process group started by [`RunningCommand::spawn`] that has not finished (for
/// SIGTERM/SIGHUP handlers of the modes).
pub fn kill_tracked_process_groups() {
    let pids: Vec<i32> = {
        let mut set = match tracked().lock() {
            Ok(set) => set,
            Err(poisoned) => poisoned.into_inner(),
        };
        set.drain().collect()
    };
    for pid in pids {
        kill_process_tree(pid);
    }
}

/// SIGKILL to the process group `pid`, falling back to the process itself.
pub fn kill_process_tree(pid: i32) {
    if killpg(Pid::from_raw(pid), Signal::SIGKILL).is_err() {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// How a command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandEnd {
    /// It exited by itself; `None` when a signal we did not send killed it.
    Exited(Option<i32>),
    /// The timeout fired and the tree was killed.
    TimedOut,
    /// The cancellation token fired and the tree was killed.
    Aborted,
}

/// One step of a running command.
#[derive(Debug)]
pub enum CommandEvent {
    /// Raw bytes from stdout or stderr, in arrival order.
    Output(Vec<u8>),
    /// The command completed.
    Done(CommandEnd),
}

/// A spawned shell command, driven by [`RunningCommand::next_event`].
#[derive(Debug)]
pub struct RunningCommand {
    child: Child,
    pid: Option<i32>,
    chunks: mpsc::Receiver<Vec<u8>>,
    pipes_closed: bool,
    exit: Option<Option<i32>>,
    grace_deadline: Option<Instant>,
    timeout_deadline: Option<Instant>,
    cancel: CancellationToken,
    killed: Option<CommandEnd>,
    done: bool,
}

impl RunningCommand {
    /// Starts `<shell> -c <command>` in `cwd`; a `timeout` of zero or less means none.
    pub fn spawn(
        config: &ShellConfig,
        command: &str,
        cwd: &Path,
        timeout: Option<Duration>,
        cancel: CancellationToken,
    ) -> Result<Self, String> {
        let shell = config.resolve_shell()?;
        if !cwd.exists() {
            return Err(format!(
                "Working directory does not exist: {}\nCannot execute bash commands.",
                cwd.to_string_lossy()
            ));
        }
        let mut child = Command::new(&shell)
            .arg("-c")
            .arg(command)
            .current_dir(cwd)
            .env_clear()
            .envs(config.command_env())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|error| {
                let code = crate::session::tools::workspace::errno_code(&error);
                format!("spawn {} {code}", shell.to_string_lossy())
            })?;
        let pid = child.id().and_then(|pid| i32::try_from(pid).ok());
        if let Some(pid) = pid {
            track(pid, true);
        }
        let (sender, chunks) = mpsc::channel::<Vec<u8>>(64);
        tokio::spawn(pump(child.stdout.take(), child.stderr.take(), sender));
        Ok(Self {
            child,
            pid,
            chunks,
            pipes_closed: false,
            exit: None,
            grace_deadline: None,
            timeout_deadline: timeout
                .filter(|limit| !limit.is_zero())
                .map(|limit| Instant::now() + limit),
            cancel,
            killed: None,
            done: false,
        })
    }

    fn kill_tree(&mut self, reason: CommandEnd) {
        if self.killed.is_none() {
            self.killed = Some(reason);
            if let Some(pid) = self.pid {
                kill_process_tree(pid);
            }
        }
    }

    /// Waits for the next chunk of output or for completion. Cancel-safe: dropping the future
    /// loses nothing, so it can sit in a `select!` with other timers.
    pub async fn next_event(&mut self) -> CommandEvent {
        loop {
            if self.done || (self.exit.is_some() && self.pipes_closed) {
                self.done = true;
                if let Some(pid) = self.pid {
                    track(pid, false);
                }
                let end = self
                    .killed
                    .unwrap_or(CommandEnd::Exited(self.exit.flatten()));
                return CommandEvent::Done(end);
            }
            let far = Instant::now() + Duration::from_secs(86_400 * 365);
            let timeout_at = self.timeout_deadline.unwrap_or(far);
            let grace_at = self.grace_deadline.unwrap_or(far);
            let watch_cancel = self.killed.is_none();
            let watch_timeout = self.killed.is_none() && self.timeout_deadline.is_some();
            tokio::select! {
                biased;
                chunk = self.chunks.recv(), if !self.pipes_closed => match chunk {
                    Some(chunk) => return CommandEvent::Output(chunk),
                    None => self.pipes_closed = true,
                },
                status = self.child.wait(), if self.exit.is_none() => {
                    self.exit = Some(status.ok().and_then(|status| status.code()));
                    self.grace_deadline = Some(Instant::now() + EXIT_STDIO_GRACE);
                }
                () = self.cancel.cancelled(), if watch_cancel => self.kill_tree(CommandEnd::Aborted),
                () = tokio::time::sleep_until(timeout_at), if watch_timeout => {
                    self.kill_tree(CommandEnd::TimedOut);
                }
                () = tokio::time::sleep_until(grace_at), if self.exit.is_some() && !self.pipes_closed => {
                    // A background descendant holds the pipes: stop listening.
                    self.pipes_closed = true;
                    self.chunks.close();
                }
            }
        }
    }
}

impl Drop for RunningCommand {
    fn drop(&mut self) {
        if !self.done
            && let Some(pid) = self.pid
        {
            if self.exit.is_none() {
                kill_process_tree(pid);
            }
            track(pid, false);
        }
    }
}

/// Reads stdout and stderr into one channel in arrival order; when both are readable at
/// once, stdout goes first (as the reference's event loop sees them).
async fn pump(
    mut stdout: Option<tokio::process::ChildStdout>,
    mut stderr: Option<tokio::process::ChildStderr>,
    sender: mpsc::Sender<Vec<u8>>,
) {
    let mut out_buffer = vec![0u8; 64 * 1024];
    let mut err_buffer = vec![0u8; 64 * 1024];
    while stdout.is_some() || stderr.is_some() {
        let chunk = tokio::select! {
            biased;
            read = read_some(&mut stdout, &mut out_buffer), if stdout.is_some() => match read {
                Some(len) => out_buffer[..len].to_vec(),
                None => {
                    stdout = None;
                    continue;
                }
            },
            read = read_some(&mut stderr, &mut err_buffer), if stderr.is_some() => match read {
                Some(len) => err_buffer[..len].to_vec(),
                None => {
                    stderr = None;
                    continue;
                }
            },
        };
        if sender.send(chunk).await.is_err() {
            return;
        }
    }
}

/// Reads once; `None` at EOF, on error, or without a reader.
async fn read_some<R: tokio::io::AsyncRead + Unpin>(
    reader: &mut Option<R>,
    buffer: &mut [u8],
) -> Option<usize> {
    let reader = reader.as_mut()?;
    match reader.read(buffer).await {
        Ok(0) | Err(_) => None,
        Ok(len) => Some(len),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(env: Vec<(&str, &str)>, bin: Option<&str>) -> ShellConfig {
        ShellConfig {
            shell_path: None,
            command_prefix: None,
            env: env
                .into_iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect(),
            bin_dir: bin.map(PathBuf::from),
            temp_dir: PathBuf::from("/tmp"),
            ids: Arc::new(IdSource::seeded(1)),
        }
    }

    #[test]
    fn bin_dir_goes_in_front_of_path_once() {
        let c = config(vec![("Path", "/usr/bin:/bin")], Some("/a/bin"));
        assert_eq!(
            c.command_env(),
            vec![(
                OsString::from("Path"),
                OsString::from("/a/bin:/usr/bin:/bin")
            )]
        );
        let c = config(vec![("PATH", "/a/bin:/bin")], Some("/a/bin"));
        assert_eq!(c.command_env()[0].1, OsString::from("/a/bin:/bin"));
        let c = config(vec![], Some("/a/bin"));
        assert_eq!(c.command_env()[0].1, OsString::from("/a/bin"));
    }

    #[test]
    fn prefix_and_custom_shell() {
        let mut c = config(vec![], None);
        c.command_prefix = Some("shopt -s expand_aliases".to_owned());
        assert_eq!(c.prefixed("ls"), "shopt -s expand_aliases\nls");
        c.shell_path = Some("/nonexistent/shell".to_owned());
        assert_eq!(
            c.resolve_shell().unwrap_err(),
            "Custom shell path not found: /nonexistent/shell"
        );
        assert!(
            c.temp_output_path()
                .to_string_lossy()
                .starts_with("/tmp/pi-bash-")
        );
    }
}
