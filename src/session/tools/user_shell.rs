//! User shell commands, `!cmd` and `!!cmd` (`spec/tools.md` §10): run with the same shell,
//! prefix, cwd and process handling as the `bash` tool but without a timeout, clean the output
//! for display, and produce the `bashExecution` message the session records.
//!
//! Output handling: each chunk is decoded (streaming UTF-8), stripped of ANSI escape sequences
//! (the `ansi-regex` 6.6 pattern the reference uses), of C0 controls other than TAB/LF/CR and
//! of U+FFF9–U+FFFB, then of every `\r`; the cleaned chunk goes to the `on_chunk` callback. A
//! rolling buffer keeps the newest chunks (oldest dropped while over 102,400 UTF-16 units and
//! more than one chunk is held). A temp file `pi-bash-<hex>.log` is opened once the raw total
//! passes 51,200 bytes (or at the end when the result is cut) and receives the cleaned text.
//! The result is the buffer, tail-truncated to 2000 lines / 50 KB.
//!
//! A non-zero exit is not an error; only setup failures are ([`UserShellError`]).
//!
//! Invariant: records nothing itself — the caller appends the returned message (at once when
//! idle, after the agent run otherwise).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use regex::Regex;
use tokio_util::sync::CancellationToken;

use crate::model::message::BashExecutionMessage;
use crate::session::tools::output::Utf8Stream;
use crate::session::tools::shell::{CommandEnd, CommandEvent, RunningCommand, ShellConfig};
use crate::support::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, truncate_tail, utf16_len};

/// A setup failure of a user shell command (missing cwd, missing custom shell, spawn error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UserShellError(pub String);

/// A parsed `!` input line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserShellCommand {
    /// The command text (trimmed, without the `!`/`!!`).
    pub command: String,
    /// True for `!!`: the output is kept out of the model's context.
    pub exclude_from_context: bool,
}

/// Recognises `!cmd` / `!!cmd` input; `None` for other input or an empty command.
pub fn parse_user_shell_input(input: &str) -> Option<UserShellCommand> {
    let (rest, exclude_from_context) = match input.strip_prefix("!!") {
        Some(rest) => (rest, true),
        None => (input.strip_prefix('!')?, false),
    };
    let command = rest.trim();
    (!command.is_empty()).then(|| UserShellCommand {
        command: command.to_owned(),
        exclude_from_context,
    })
}

/// The outcome of a user shell command (the reference's `BashResult`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserShellResult {
    /// Cleaned output, tail-truncated when long.
    pub output: String,
    /// Exit status; `None` when cancelled or killed by a signal.
    pub exit_code: Option<i32>,
    /// True when the user aborted it.
    pub cancelled: bool,
    /// True when `output` was cut.
    pub truncated: bool,
    /// The temp file holding the (cleaned) full output, when one was written.
    pub full_output_path: Option<PathBuf>,
}

impl UserShellResult {
    /// Builds the `bashExecution` message to record for `command` (the text the user typed
    /// after `!`/`!!`, without the prefix setting).
    pub fn to_message(
        &self,
        command: &UserShellCommand,
        timestamp_ms: i64,
    ) -> BashExecutionMessage {
        BashExecutionMessage {
            command: command.command.clone(),
            output: self.output.clone(),
            exit_code: self.exit_code.map(i64::from),
            cancelled: self.cancelled,
            truncated: self.truncated,
            full_output_path: self
                .full_output_path
                .as_ref()
                .map(|path| path.to_string_lossy().into_owned()),
            exclude_from_context: command.exclude_from_context.then_some(true),
            timestamp: timestamp_ms,
            extra: serde_json::Map::new(),
        }
    }
}

fn ansi_regex() -> &'static Regex {
    static ANSI: OnceLock<Regex> = OnceLock::new();
    ANSI.get_or_init(|| {
        let st = r"(?:\x1B\x5C|\x{9C})";
        let controls = r"\x18\x1A\x1B\x{80}-\x{9F}";
        let osc = format!(r"(?:\x1B\]|\x{{9D}})[^\x07{controls}]*(?:\x07|{st})");
        let control_string =
            format!(r"(?:\x1B[PX^_k]|[\x{{90}}\x{{98}}\x{{9E}}\x{{9F}}])[^{controls}]*{st}");
        let linux_palette = format!(r"\x1B\](?:P[0-9A-Fa-f]{{7}}|R)(?:\x07|{st})?");
        let csi = r"(?:\x1B\[|\x{9B})[\x30-\x3F]*[\x20-\x2F]*[\x40-\x7E]";
        let escape = r"\x1B(?:[\x20-\x2F]+[\x30-\x7E]|[0-9A-PR-TZcf-oq-uy=><~|}])";
        let pattern = format!("{linux_palette}|{osc}|{control_string}|{csi}|{escape}");
        // Invariant: the pattern is built from constants only and compiles (tested below).
        Regex::new(&pattern).expect("constant ANSI pattern compiles")
    })
}

/// Cleans one decoded chunk for display: strip ANSI sequences, drop control characters
/// (except TAB, LF, CR) and U+FFF9–U+FFFB, then remove every `\r`.
pub fn clean_chunk(text: &str) -> String {
    let stripped = if text.contains('\u{1b}') || text.contains('\u{9b}') {
        ansi_regex().replace_all(text, "").into_owned()
    } else {
        text.to_owned()
    };
    stripped
        .chars()
        .filter(|&c| {
            let code = u32::from(c);
            if matches!(code, 0x09 | 0x0a) {
                return true;
            }
            if code <= 0x1f || code == 0x0d {
                return false;
            }
            !(0xfff9..=0xfffb).contains(&code)
        })
        .collect()
}

/// Runs a user shell command; `on_chunk` receives each cleaned chunk as it arrives.
pub async fn run_user_shell(
    shell: &ShellConfig,
    command: &str,
    cwd: &Path,
    cancel: CancellationToken,
    mut on_chunk: impl FnMut(&str),
) -> Result<UserShellResult, UserShellError> {
    const MAX_BUFFER_UNITS: usize = DEFAULT_MAX_BYTES * 2;
    let mut running =
        RunningCommand::spawn(shell, &shell.prefixed(command), cwd, None, cancel.clone())
            .map_err(UserShellError)?;
    let mut decoder = Utf8Stream::default();
    let mut chunks: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let mut buffered_units = 0usize;
    let mut raw_total = 0usize;
    let mut temp = CleanedTemp::default();
    let end = loop {
        match running.next_event().await {
            CommandEvent::Output(raw) => {
                raw_total += raw.len();
                let text = clean_chunk(&decoder.decode(&raw));
                if raw_total > DEFAULT_MAX_BYTES {
                    temp.ensure(shell, &chunks).await;
                }
                temp.write(&text).await;
                buffered_units += utf16_len(&text);
                chunks.push_back(text);
                while buffered_units > MAX_BUFFER_UNITS && chunks.len() > 1 {
                    if let Some(removed) = chunks.pop_front() {
                        buffered_units -= utf16_len(&removed);
                    }
                }
                if let Some(last) = chunks.back() {
                    on_chunk(last);
                }
            }
            CommandEvent::Done(end) => break end,
        }
    };
    let full: String = chunks.iter().map(String::as_str).collect();
    let truncation = truncate_tail(&full, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
    if truncation.truncated {
        temp.ensure(shell, &chunks).await;
    }
    temp.close().await;
    let cancelled = cancel.is_cancelled() || end == CommandEnd::Aborted;
    let exit_code = match end {
        CommandEnd::Exited(code) if !cancelled => code,
        CommandEnd::Exited(_) | CommandEnd::Aborted | CommandEnd::TimedOut => None,
    };
    Ok(UserShellResult {
        output: if truncation.truncated {
            truncation.content
        } else {
            full
        },
        exit_code,
        cancelled,
        truncated: truncation.truncated,
        full_output_path: temp.path,
    })
}

/// The cleaned-output temp file of a user command.
#[derive(Default)]
struct CleanedTemp {
    path: Option<PathBuf>,
    file: Option<std::fs::File>,
}

impl CleanedTemp {
    async fn ensure(&mut self, shell: &ShellConfig, buffered: &std::collections::VecDeque<String>) {
        if self.path.is_some() {
            return;
        }
        let path = shell.temp_output_path();
        let head: String = buffered.iter().map(String::as_str).collect();
        let target = path.clone();
        self.file = tokio::task::spawn_blocking(move || {
            let mut file = std::fs::File::create(&target).ok()?;
            file.write_all(head.as_bytes()).ok()?;
            Some(file)
        })
        .await
        .ok()
        .flatten();
        self.path = Some(path);
    }

    async fn write(&mut self, text: &str) {
        let Some(mut file) = self.file.take() else {
            return;
        };
        let text = text.to_owned();
        self.file = tokio::task::spawn_blocking(move || {
            file.write_all(text.as_bytes()).ok()?;
            Some(file)
        })
        .await
        .ok()
        .flatten();
    }

    async fn close(&mut self) {
        if let Some(file) = self.file.take() {
            let _ = tokio::task::spawn_blocking(move || file.sync_all()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_parsing() {
        assert_eq!(
            parse_user_shell_input("!  ls -la "),
            Some(UserShellCommand {
                command: "ls -la".to_owned(),
                exclude_from_context: false
            })
        );
        assert_eq!(
            parse_user_shell_input("!!git status"),
            Some(UserShellCommand {
                command: "git status".to_owned(),
                exclude_from_context: true
            })
        );
        assert_eq!(parse_user_shell_input("!  "), None);
        assert_eq!(parse_user_shell_input("hello"), None);
    }

    #[test]
    fn cleaning_strips_ansi_controls_and_carriage_returns() {
        assert_eq!(clean_chunk("\u{1b}[31mred\u{1b}[0m\r\n"), "red\n");
        assert_eq!(clean_chunk("a\u{1b}]0;title\u{7}b"), "ab");
        assert_eq!(clean_chunk("x\u{0}\u{7}y\tz\u{fffa}"), "xy\tz");
        assert_eq!(clean_chunk("\u{1b}7saved"), "saved");
    }
}
