//! The `bash` tool (`spec/tools.md` §4): run a command, stream throttled partial results,
//! keep the last 2000 lines / 50 KB, save the complete raw output to a temp file when cut.
//!
//! Results:
//!
//! | outcome | result |
//! |---|---|
//! | exit 0, or no code (killed by a signal we did not send) | output (+ notice) or `(no output)`; `details = {truncation, fullOutputPath}` only when cut |
//! | exit N ≠ 0 | error: output (+ notice) or `(no output)`, `\n\n`, `Command exited with code N` |
//! | timeout | error: output (+ notice) + `\n\n` + `Command timed out after <timeout> seconds`, or that line alone |
//! | abort | error: the same shape with `Command aborted` |
//! | setup failure | error with its message |
//!
//! Notices (S = first shown line, T = total lines): `[Showing lines S-T of T. Full output:
//! <path>]`, `[Showing lines S-T of T (50.0KB limit). Full output: <path>]`, and for a single
//! huge last line `[Showing last <size> of line T (line is <size>). Full output: <path>]`.
//!
//! Updates: `{content: [], details: undefined}` at once, then at most one per 100 ms
//! `{content: [text], details: {truncation?, fullOutputPath?}}`; a pending one is flushed
//! before the result. Nothing is sanitised: ANSI escapes and `\r` reach the model.
//!
//! Invariant: the process tree is killed on abort, timeout, and when the call is dropped.

use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use crate::agent::tool::{ToolContext, ToolDefinition, ToolError, ToolOutput, lenient};
use crate::model::message::ContentBlock;
use crate::session::tools::builtin::{BuiltinTool, js_number, prefer_strict_json_schema};
use crate::session::tools::output::{OutputAccumulator, OutputSnapshot};
use crate::session::tools::shell::{CommandEnd, CommandEvent, RunningCommand, ShellConfig};
use crate::support::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, TruncatedBy, format_size};

/// Minimum time between two streamed updates.
pub const UPDATE_THROTTLE: Duration = Duration::from_millis(100);

/// The `bash` tool.
#[derive(Debug)]
pub struct BashTool {
    shell: ShellConfig,
}

impl BashTool {
    /// Returns the tool with its reference definition.
    pub fn new(shell: ShellConfig) -> Self {
        Self { shell }
    }
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: "bash".to_owned(),
    label: "bash".to_owned(),
    description: format!(
        "Execute a bash command in the current working directory. Returns stdout and stderr. Output is truncated to last {DEFAULT_MAX_LINES} lines or {}KB (whichever is hit first). If truncated, full output is saved to a temp file. Optionally provide a timeout in seconds.",
        DEFAULT_MAX_BYTES / 1024
    ),
    parameters: json!({
        "type": "object",
        "required": ["command"],
        "properties": {
            "command": {"type": "string", "description": "Shell command to execute"},
            "timeout": {"type": "number", "description": "Timeout in seconds (optional, no default timeout)"}
        }
    }),
    prompt_snippet: Some("Execute bash commands (ls, grep, find, etc.)".to_owned()),
    prompt_guidelines: vec![
        "You can inspect PI_* environment variables for current model and session details."
            .to_owned(),
    ],
    constrained_sampling: prefer_strict_json_schema(),
});

/// A `bash` call's arguments.
#[derive(Debug, Default, Deserialize)]
pub struct BashArgs {
    #[serde(default, deserialize_with = "lenient")]
    command: String,
    #[serde(default, deserialize_with = "lenient")]
    timeout: Option<f64>,
}

impl BuiltinTool for BashTool {
    type Args = BashArgs;
    const MUTATES_WORKSPACE: bool = true;

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    async fn run(&self, args: BashArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        run_bash(&self.shell, &args.command, args.timeout, &ctx).await
    }
}

/// The full-output file, opened lazily (the accumulator decides when).
struct TempOutput {
    path: Option<PathBuf>,
    file: Option<tokio::fs::File>,
}

impl TempOutput {
    async fn ensure(&mut self, shell: &ShellConfig, acc: &mut OutputAccumulator) {
        if self.path.is_none() {
            let path = shell.temp_output_path();
            // Failing to create the file loses the full copy but not the result.
            self.file = tokio::fs::File::create(&path).await.ok();
            self.path = Some(path);
        }
        self.write(acc).await;
    }

    async fn write(&mut self, acc: &mut OutputAccumulator) {
        let pending = acc.take_unpersisted();
        if let Some(file) = &mut self.file
            && !pending.is_empty()
            && file.write_all(&pending).await.is_err()
        {
            self.file = None;
        }
    }

    async fn close(&mut self) {
        if let Some(mut file) = self.file.take() {
            let _ = file.flush().await;
        }
    }
}

fn update_output(snapshot: &OutputSnapshot, path: Option<&PathBuf>) -> ToolOutput {
    let mut details = Map::new();
    if snapshot.truncation.truncated {
        details.insert("truncation".to_owned(), snapshot.truncation.to_value());
    }
    if let Some(path) = path {
        details.insert(
            "fullOutputPath".to_owned(),
            Value::String(path.to_string_lossy().into_owned()),
        );
    }
    ToolOutput {
        content: vec![ContentBlock::text(snapshot.content.clone())],
        details: Some(Value::Object(details)),
    }
}

/// Runs one `bash` tool call (see the module docs).
pub async fn run_bash(
    shell: &ShellConfig,
    command: &str,
    timeout: Option<f64>,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let limit = timeout
        .filter(|secs| *secs > 0.0 && secs.is_finite())
        .map(|secs| Duration::from_secs_f64(secs.min(1e9)));
    let streaming = ctx.on_update.is_some();
    if streaming {
        ctx.update(ToolOutput {
            content: Vec::new(),
            details: None,
        });
    }
    let mut running = RunningCommand::spawn(
        shell,
        &shell.prefixed(command),
        &ctx.cwd,
        limit,
        ctx.cancel.clone(),
    )
    .map_err(ToolError::ForModel)?;
    let mut acc = OutputAccumulator::new(DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
    let mut temp = TempOutput {
        path: None,
        file: None,
    };
    let mut last_update: Option<Instant> = None;
    let mut pending_update_at: Option<Instant> = None;
    let end = loop {
        let deadline = pending_update_at;
        let event = tokio::select! {
            event = running.next_event() => Some(event),
            () = sleep_until_opt(deadline), if deadline.is_some() => None,
        };
        match event {
            Some(CommandEvent::Output(chunk)) => {
                acc.append(&chunk);
                if temp.path.is_some() || acc.wants_temp_file() {
                    temp.ensure(shell, &mut acc).await;
                }
                if streaming {
                    let now = Instant::now();
                    let due = last_update.map_or(now, |at| at + UPDATE_THROTTLE);
                    if due <= now {
                        pending_update_at = None;
                        emit_update(ctx, &mut acc, &mut temp, shell).await;
                        last_update = Some(now);
                    } else if pending_update_at.is_none() {
                        pending_update_at = Some(due);
                    }
                }
            }
            Some(CommandEvent::Done(end)) => break end,
            None => {
                pending_update_at = None;
                emit_update(ctx, &mut acc, &mut temp, shell).await;
                last_update = Some(Instant::now());
            }
        }
    };
    acc.finish();
    if acc.wants_temp_file() {
        temp.ensure(shell, &mut acc).await;
    }
    if pending_update_at.is_some() {
        emit_update(ctx, &mut acc, &mut temp, shell).await;
    }
    let snapshot = acc.snapshot();
    if snapshot.truncation.truncated {
        temp.ensure(shell, &mut acc).await;
    }
    temp.write(&mut acc).await;
    temp.close().await;
    let path = temp.path.clone();
    let format = |empty: &str| format_output(&snapshot, &acc, path.as_ref(), empty);
    let append_status = |text: String, status: String| {
        if text.is_empty() {
            status
        } else {
            format!("{text}\n\n{status}")
        }
    };
    match end {
        CommandEnd::Aborted => {
            let (text, _) = format("");
            Err(ToolError::ForModel(append_status(
                text,
                "Command aborted".to_owned(),
            )))
        }
        CommandEnd::TimedOut => {
            let (text, _) = format("");
            let secs = timeout.map_or_else(String::new, js_number);
            Err(ToolError::ForModel(append_status(
                text,
                format!("Command timed out after {secs} seconds"),
            )))
        }
        CommandEnd::Exited(code) => {
            let (text, details) = format("(no output)");
            match code {
                Some(code) if code != 0 => Err(ToolError::ForModel(append_status(
                    text,
                    format!("Command exited with code {code}"),
                ))),
                _ => Ok(ToolOutput {
                    content: vec![ContentBlock::text(text)],
                    details,
                }),
            }
        }
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn emit_update(
    ctx: &ToolContext,
    acc: &mut OutputAccumulator,
    temp: &mut TempOutput,
    shell: &ShellConfig,
) {
    let snapshot = acc.snapshot();
    if snapshot.truncation.truncated {
        // A cut snapshot persists the full output (`persistIfTruncated`).
        temp.ensure(shell, acc).await;
    }
    ctx.update(update_output(&snapshot, temp.path.as_ref()));
}

/// The final text and details: content (or `empty`) plus the truncation notice.
fn format_output(
    snapshot: &OutputSnapshot,
    acc: &OutputAccumulator,
    path: Option<&PathBuf>,
    empty: &str,
) -> (String, Option<Value>) {
    let truncation = &snapshot.truncation;
    let mut text = if snapshot.content.is_empty() {
        empty.to_owned()
    } else {
        snapshot.content.clone()
    };
    if !truncation.truncated {
        return (text, None);
    }
    let shown_path = path.map_or_else(
        || "undefined".to_owned(),
        |p| p.to_string_lossy().into_owned(),
    );
    let mut details = Map::new();
    details.insert("truncation".to_owned(), truncation.to_value());
    if let Some(path) = path {
        details.insert(
            "fullOutputPath".to_owned(),
            Value::String(path.to_string_lossy().into_owned()),
        );
    }
    let end_line = truncation.total_lines;
    let start_line =
        truncation.total_lines + 1 - truncation.output_lines.min(truncation.total_lines);
    if truncation.last_line_partial {
        text.push_str(&format!(
            "\n\n[Showing last {} of line {end_line} (line is {}). Full output: {shown_path}]",
            format_size(truncation.output_bytes),
            format_size(acc.last_line_bytes())
        ));
    } else if truncation.truncated_by == Some(TruncatedBy::Lines) {
        text.push_str(&format!(
            "\n\n[Showing lines {start_line}-{end_line} of {}. Full output: {shown_path}]",
            truncation.total_lines
        ));
    } else {
        text.push_str(&format!(
            "\n\n[Showing lines {start_line}-{end_line} of {} ({} limit). Full output: {shown_path}]",
            truncation.total_lines,
            format_size(DEFAULT_MAX_BYTES)
        ));
    }
    (text, Some(Value::Object(details)))
}
