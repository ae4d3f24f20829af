//! Driving the real `pi` binary in a terminal: a private tmux server (its own socket in the
//! test's temporary directory, no user configuration) running one pane with `pi` and the
//! test environment, keys sent with `send-keys`, the screen read with `capture-pane`.
//!
//! Synchronisation is by polling the screen for expected text with generous timeouts, never
//! by fixed sleeps. A small shell script runs `pi` and writes its exit status to a file (tmux's
//! own `pane_dead_status` is sometimes left empty); the script traps SIGINT with a handler —
//! not by ignoring it, which `pi` would inherit — so that Ctrl+C in the terminal reaches `pi`
//! with its default disposition and does not end the script.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{TEST_CLOCK_START_MS, TestEnv};

/// How long to wait for expected text before failing.
pub const WAIT: Duration = Duration::from_secs(60);

/// A tmux server with one pane running `pi`.
pub struct Tmux {
    socket: PathBuf,
    status: PathBuf,
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

impl Tmux {
    /// Starts `pi args…` in the test environment's workspace (its own tmux server), with the
    /// environment `TestEnv::pi` uses plus `extra_env`.
    pub fn start(env: &TestEnv, name: &str, args: &[&str], extra_env: &[(&str, &str)]) -> Self {
        Self::start_with(env, name, args, extra_env, None)
    }

    /// [`Tmux::start`], also copying every byte `pi` writes to the terminal into `raw` from
    /// its first one (`pipe-pane`; the pane waits for the pipe before it starts `pi`), and
    /// with `set-clipboard on`, so that a clipboard write (OSC 52) would make a tmux buffer.
    pub fn start_capturing(
        env: &TestEnv,
        name: &str,
        args: &[&str],
        extra_env: &[(&str, &str)],
        raw: &Path,
    ) -> Self {
        Self::start_with(env, name, args, extra_env, Some(raw))
    }

    fn start_with(
        env: &TestEnv,
        name: &str,
        args: &[&str],
        extra_env: &[(&str, &str)],
        raw: Option<&Path>,
    ) -> Self {
        let dir = env.dir.path();
        let socket = dir.join(format!("tmux-{name}.sock"));
        let script = dir.join(format!("run-{name}.sh"));
        let binary = assert_cmd::cargo::cargo_bin("pi");
        let mut vars: Vec<(String, String)> = vec![
            ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".to_owned(), env.home.display().to_string()),
            (
                "PI_CODING_AGENT_DIR".to_owned(),
                env.agent_dir.display().to_string(),
            ),
            ("PI_TEST_CLOCK".to_owned(), TEST_CLOCK_START_MS.to_string()),
            ("PI_TEST_SEED".to_owned(), "7".to_owned()),
        ];
        vars.extend(
            extra_env
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned())),
        );
        let assignments: Vec<String> = vars
            .iter()
            .map(|(key, value)| format!("{key}={}", shell_quote(value)))
            .collect();
        let quoted_args: Vec<String> = args.iter().map(|arg| shell_quote(arg)).collect();
        let status = dir.join(format!("status-{name}"));
        let go = dir.join(format!("go-{name}"));
        // With a capture, the pane waits until the pipe is in place.
        let wait = if raw.is_some() {
            format!(
                "while [ ! -e {} ]; do sleep 0.02; done\n",
                shell_quote(&go.display().to_string())
            )
        } else {
            String::new()
        };
        let body = format!(
            "#!/bin/sh\ntrap : INT\n{wait}cd {}\nenv -i TERM=\"$TERM\" {} {} {}\necho $? > {}.tmp\nmv {}.tmp {}\n",
            shell_quote(&env.workspace.display().to_string()),
            assignments.join(" "),
            shell_quote(&binary.display().to_string()),
            quoted_args.join(" "),
            shell_quote(&status.display().to_string()),
            shell_quote(&status.display().to_string()),
            shell_quote(&status.display().to_string()),
        );
        std::fs::write(&script, body).expect("write the pane script");
        let config = dir.join(format!("tmux-{name}.conf"));
        let settings = if raw.is_some() {
            "set -g remain-on-exit on\nset -g set-clipboard on\n"
        } else {
            "set -g remain-on-exit on\n"
        };
        std::fs::write(&config, settings).expect("write the tmux config");
        let tmux = Self { socket, status };
        tmux.run(&[
            "-f",
            &config.display().to_string(),
            "new-session",
            "-d",
            "-x",
            "200",
            "-y",
            "50",
            "-s",
            "pi",
            &format!("sh {}", shell_quote(&script.display().to_string())),
        ]);
        if let Some(raw) = raw {
            tmux.run(&[
                "pipe-pane",
                "-o",
                "-t",
                "pi",
                &format!("cat >> {}", shell_quote(&raw.display().to_string())),
            ]);
            std::fs::write(&go, b"").expect("start the pane");
        }
        tmux
    }

    /// Returns a tmux format for the pane (`#{pane_title}`, …).
    pub fn format(&self, format: &str) -> String {
        self.run(&["display-message", "-p", "-t", "pi", format])
            .trim_end()
            .to_owned()
    }

    /// Returns the names of tmux's paste buffers (a clipboard write by the program makes one).
    pub fn buffers(&self) -> String {
        self.run(&["list-buffers", "-F", "#{buffer_name}"])
    }

    /// Returns the newest tmux paste buffer's text (what a clipboard write put there).
    pub fn buffer(&self) -> String {
        self.run(&["show-buffer"])
    }

    fn run(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux is installed (.ci/run installs it)");
        assert!(
            output.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Returns the whole pane: scrollback and screen, wrapped lines joined, trailing blank
    /// lines dropped.
    pub fn screen(&self) -> String {
        let text = self.run(&["capture-pane", "-p", "-J", "-S", "-", "-t", "pi"]);
        text.trim_end().to_owned()
    }

    /// Returns the whole pane as [`Self::screen`] does, with its colours (SGR sequences).
    pub fn screen_with_colours(&self) -> String {
        let text = self.run(&["capture-pane", "-p", "-e", "-J", "-S", "-", "-t", "pi"]);
        text.trim_end().to_owned()
    }

    /// Types `text` literally.
    pub fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-t", "pi", "-l", text]);
    }

    /// Sends keys by name (`Enter`, `C-c`, `Up`, `Tab`, …).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "pi"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Types a line and presses Enter.
    pub fn line(&self, text: &str) {
        self.type_text(text);
        self.keys(&["Enter"]);
    }

    /// Waits until `check` holds for the screen; returns the screen.
    pub fn wait_until(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            if start.elapsed() > WAIT {
                panic!("timed out waiting for {what}; the screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until `needle` appears on the screen at least `count` times; returns the screen.
    pub fn wait_for_count(&self, needle: &str, count: usize) -> String {
        self.wait_until(&format!("{count}× {needle:?}"), |screen| {
            screen.matches(needle).count() >= count
        })
    }

    /// Waits until `needle` appears on the screen; returns the screen.
    pub fn wait_for(&self, needle: &str) -> String {
        self.wait_for_count(needle, 1)
    }

    /// Waits for the input prompt to be the last line (the REPL is idle, reading).
    pub fn wait_for_prompt(&self) -> String {
        // capture-pane drops trailing spaces: the idle prompt `> ` reads as `>`.
        self.wait_until("the prompt", |screen| screen.lines().last() == Some(">"))
    }

    /// Returns whether `pi` is still running.
    pub fn is_running(&self) -> bool {
        !self.status.exists()
    }

    /// Waits until `pi` exits; returns its exit code.
    pub fn wait_for_exit(&self) -> i32 {
        let start = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(&self.status) {
                return text
                    .trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("exit status {text:?}"));
            }
            if start.elapsed() > WAIT {
                panic!("pi did not exit; the screen:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Returns the socket path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// Returns the row number `/tree` (or another picker) printed for the first line containing
/// `needle` (`  3 • user: hello` → 3).
pub fn row_number(screen: &str, needle: &str) -> usize {
    let line = screen
        .lines()
        .rev()
        .find(|line| line.contains(needle))
        .unwrap_or_else(|| panic!("no row with {needle:?} in:\n{screen}"));
    line.split_whitespace()
        .next()
        .and_then(|word| word.parse().ok())
        .unwrap_or_else(|| panic!("no row number in {line:?}"))
}
