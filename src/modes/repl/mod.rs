//! The interactive REPL: read a line (rustyline, on its own thread — see [`editor`]), then
//! either carry out a built-in command, run a `!cmd`, or send a prompt and render the
//! session's events as they arrive, followed by a status line.
//!
//! Keys: Enter submits, Alt+Enter or a trailing `\` continues on a new line, Tab completes
//! slash commands and paths, Ctrl+C clears the line (on an empty line twice in a row it
//! exits), Ctrl+D on an empty line exits, Esc twice on an empty line does
//! `doubleEscapeAction` (`/tree` by default). While a turn or a `!cmd` runs, the line editor
//! is not reading; Ctrl+C arrives as SIGINT, which aborts the turn (or the command) and keeps
//! the REPL. While the agent runs, [`typeahead`] reads the keys: Esc aborts the turn as Ctrl+C
//! does, a line is queued as a steering message (Enter: delivered after the current tool
//! calls) or a follow-up (Alt+Enter: delivered when the agent would stop), Alt+Up takes the
//! queued messages back into the editor.
//!
//! Pickers (`/tree`, `/resume`, `/fork`, `/model`, `-r`) print numbered rows and read the
//! choice as a line: a row number, or an id (prefix); Enter cancels.
//!
//! Invariant: everything the REPL changes goes through `AgentSession` (or, for reads, the
//! store behind it, on the blocking pool); the REPL keeps no session state of its own except
//! the row numbers of the last `/tree` listing.

pub mod command;
pub mod editor;
pub mod keys;
mod lease;
mod login;
pub mod typeahead;
pub mod ui;

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use futures::FutureExt;
use tokio::signal::unix::{Signal, SignalKind};
use tokio::sync::mpsc;

use crate::ai::ThinkingLevel;
use crate::model::entry::Entry;
use crate::model::ids::{EntryId, SessionId};
use crate::model::message::ImageContent;
use crate::modes::DoubleEscape;
use crate::modes::render::{Palette, Renderer, Status};
use crate::modes::tree::{self, RowRole, TreeFilter};
use crate::modes::{ExportTarget, Interchange, MissingCwd, Prepared, TerminalConfig, setup_help};
use crate::session::agent_session::OutputSink;
use crate::session::extensions::NotifyKind;
use crate::session::trust;
use crate::session::{
    AgentSession, NavigateOptions, OpenAccess, PromptOptions, SessionError, SessionEvent,
    SessionTarget,
};
use crate::store::search::{Query, SearchRequest};
use crate::store::{ListScope, SessionStore, SessionSummary, StoreError, StoredEntry, TreeNode};
use crate::support::term;
use command::{COMMANDS, Command, Input};
use editor::{EditorConfig, LineEditor, Reply};
use typeahead::{Typeahead, Typed};
use ui::{ReplUi, UiRequest};

/// The prompt shown for input.
pub const PROMPT: &str = "> ";

/// Sessions listed by the `/resume` and `-r` pickers.
const PICKER_SESSIONS: usize = 20;

/// Runs the REPL; with `resume`, the session picker comes first (no choice: exit 0).
pub async fn run(prepared: Prepared, resume: bool) -> Result<ExitCode> {
    let Prepared {
        mut config,
        target,
        prompts,
        terminal,
        interchange,
        mcp,
        ..
    } = prepared;
    let color = terminal.color_allowed && io::IsTerminal::is_terminal(&io::stdout());
    // Theme files are read only with colour (without it they would change nothing).
    let (themes, theme, theme_problems) = if color {
        terminal.theme.load()
    } else {
        (
            Default::default(),
            crate::modes::theme::Theme::system(),
            Vec::new(),
        )
    };
    let palette = Palette::themed(color, Arc::new(theme));
    let cwd = config.cwd.clone();
    let (extension_ui, ui_requests) = ReplUi::channel();
    config.extensions.ui = Arc::new(extension_ui);
    let mut sigint = tokio::signal::unix::signal(SignalKind::interrupt())
        .context("installing the Ctrl+C handler")?;
    // The terminal's mode before the line editor changes it (not a terminal: nothing).
    let saved_terminal = nix::sys::termios::tcgetattr(io::stdin()).ok();
    let commands = Arc::new(Mutex::new(Vec::new()));
    let editor_cwd = Arc::new(Mutex::new(cwd.clone()));
    let keymap = keys::Keymap::load(&terminal.agent_dir);
    let mut editor = LineEditor::start(EditorConfig {
        history_path: terminal.history_path.clone(),
        cwd: editor_cwd.clone(),
        commands: commands.clone(),
        color,
        keys: keymap.events(),
    })
    .context("starting the line editor")?;
    let mut out = Renderer::new(io::stdout(), palette, terminal.home.as_deref());
    out.set_thinking_hidden(terminal.hide_thinking);
    if color {
        // Colour means a terminal: answers are rendered as Markdown, in its size.
        out = out.with_markdown(Box::new(|| {
            console::Term::stdout()
                .size_checked()
                .map(|(rows, columns)| (usize::from(rows), usize::from(columns)))
        }));
    }
    // A stored session whose directory is gone: continue here, or do not open it.
    if let SessionTarget::Open(id) = &target {
        let missing = {
            let (store, id, cwd) = (config.store.clone(), id.clone(), cwd.clone());
            blocking(move || MissingCwd::check(&store, &id, &cwd)).await?
        };
        if let Some(missing) = missing
            && !ask_missing_cwd(&mut editor, &mut out, &missing).await?
        {
            return Ok(ExitCode::SUCCESS);
        }
    }
    // A session another pi writes: ask (read-only, fork, take over) instead of interleaving.
    let mut target = target;
    let mut access = OpenAccess::Ask;
    let (session, report) = loop {
        match AgentSession::open_with(config.clone(), target.clone(), access).await {
            Ok(opened) => break opened,
            Err(SessionError::Held(held)) => {
                let mut asker = lease::Asker {
                    editor: &mut editor,
                    out: &mut out,
                    sigint: &mut sigint,
                };
                let cwd = cwd.to_string_lossy().into_owned();
                match asker.resolve(&config.store, &cwd, &held).await? {
                    Some((next, next_access)) => {
                        target = next;
                        access = next_access;
                    }
                    None => {
                        out.line("No session opened")?;
                        return Ok(ExitCode::SUCCESS);
                    }
                }
            }
            Err(error) => return Err(error.into()),
        }
    };
    let events = session.subscribe();
    let mut repl = Repl {
        session,
        interchange,
        mcp,
        ui_requests,
        events,
        editor,
        editor_cwd,
        out,
        terminal,
        commands,
        last_shell_output: None,
        sigint,
        last_tree: Vec::new(),
        initial: String::new(),
        interrupts: 0,
        statuses: std::collections::BTreeMap::new(),
        keymap,
        themes,
    };
    repl.refresh_commands();
    for notice in &report.notices {
        repl.warn(notice)?;
    }
    for problem in theme_problems {
        repl.warn(&format!("Warning: theme: {problem}"))?;
    }
    for warning in repl.keymap.warnings.clone() {
        repl.warn(&warning)?;
    }
    if resume {
        match repl.pick_session(None).await? {
            Some(id) => repl.switch_to(id).await?,
            None => {
                repl.out.line("No session selected")?;
                return Ok(ExitCode::SUCCESS);
            }
        }
    } else {
        repl.banner().await?;
        repl.explain_read_only().await?;
    }
    for (text, images) in prompts {
        repl.run_prompt(&text, images).await?;
    }
    // SIGTERM / SIGHUP end the REPL as the reference's do: the running turn is aborted, the
    // session shut down (extensions get `session_shutdown`, the lease is released, entries
    // still unsaved are rescued), the terminal restored; exit 143 / 129.
    let outcome = tokio::select! {
        code = repl.main_loop() => Ok(code),
        signal = super::termination_signal() => Err(signal),
    };
    let session = repl.session.clone();
    match outcome {
        Ok(code) => {
            let code = code?;
            // The extensions get `session_shutdown` (reason `quit`) before pi exits.
            repl.with_events(session.shutdown(), || {}).await?;
            let last = session.session_id().await;
            repl.left(&last)?;
            // Entries that could not be stored (rescued to `unsaved/`, or dropped) make the
            // exit code 1.
            if session.entries_not_stored() {
                return Ok(ExitCode::FAILURE);
            }
            Ok(code)
        }
        Err(signal) => {
            session.abort();
            // Nobody will answer an extension's dialog now: refuse new ones and drop the
            // pending ones, so their callers get the default answer at once.
            repl.ui_requests.close();
            while repl.ui_requests.try_recv().is_ok() {}
            session.shutdown().await;
            let _ = repl.drain_events();
            // The editor thread may be blocked reading the terminal in raw mode: leave it
            // (the process ends) and put the terminal back as it was at start.
            repl.editor.detach();
            if let Some(saved) = &saved_terminal {
                let _ = nix::sys::termios::tcsetattr(
                    io::stdin(),
                    nix::sys::termios::SetArg::TCSANOW,
                    saved,
                );
            }
            let _ = repl.out.line("");
            Ok(ExitCode::from(signal))
        }
    }
}

/// Whether the loop goes on.
enum Flow {
    Continue,
    Quit,
}

/// What `/tree` and `/label` read from the store.
struct TreeSnapshot {
    nodes: Vec<TreeNode>,
    entries: Vec<StoredEntry>,
    leaf: Option<String>,
}

struct Repl {
    session: AgentSession,
    interchange: Interchange,
    /// The MCP servers of this run (`/mcp`).
    mcp: Option<Arc<crate::session::mcp::McpManager>>,
    /// Dialogs and notifications from extensions.
    ui_requests: mpsc::UnboundedReceiver<UiRequest>,
    events: mpsc::UnboundedReceiver<SessionEvent>,
    editor: LineEditor,
    /// The directory the line editor completes paths against.
    editor_cwd: Arc<Mutex<PathBuf>>,
    out: Renderer<io::Stdout>,
    terminal: TerminalConfig,
    commands: Arc<Mutex<Vec<String>>>,
    /// The whole output of the last `!` command (for `/expand`).
    last_shell_output: Option<String>,
    sigint: Signal,
    /// Entry ids of the rows of the last `/tree` listing (row n is index n - 1).
    last_tree: Vec<Option<EntryId>>,
    /// Text to pre-fill the next prompt with (after `/tree` or `/fork` to a user message).
    initial: String,
    /// Ctrl+C presses on an empty line in a row.
    interrupts: u32,
    /// Extensions' status texts by key (`setStatus`), shown after the status line.
    statuses: std::collections::BTreeMap<String, String>,
    /// The application keys (`keybindings.json`; read again by `/reload`).
    keymap: keys::Keymap,
    /// The themes `/settings theme` chooses from (read again by `/reload`).
    themes: crate::modes::theme::ThemeSet,
}

/// Asks whether a session whose directory is gone continues in the current one (the
/// reference's Continue / Cancel question); `false` for no, Ctrl+C or the end of input.
async fn ask_missing_cwd(
    editor: &mut LineEditor,
    out: &mut Renderer<io::Stdout>,
    missing: &MissingCwd,
) -> Result<bool> {
    for line in missing.question().lines() {
        out.line(line)?;
    }
    let answer = editor
        .read("Continue in the current directory? [y/N] ", "", false)
        .await;
    Ok(matches!(
        answer,
        Reply::Line(line) if matches!(line.trim().to_lowercase().as_str(), "y" | "yes")
    ))
}

/// Runs a store read on the blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T> {
    Ok(tokio::task::spawn_blocking(work)
        .await
        .context("a store task failed")??)
}

/// Formats a number with thousands separators (`1,234`), as `toLocaleString` does.
fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (idx, ch) in digits.chars().enumerate() {
        if idx > 0 && (digits.len() - idx).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// `2026-01-01T10:00:05.000Z` → `2026-01-01 10:00`.
/// Lines of a `!` command's output streamed before the rest is folded.
const FOLD_HEAD: usize = 20;
/// Lines shown from the end of folded output.
const FOLD_TAIL: usize = 5;

/// A `!` command's output as it streams: the first [`FOLD_HEAD`] lines pass, the rest is
/// counted and only its last [`FOLD_TAIL`] lines kept.
#[derive(Clone, Debug)]
struct Fold {
    lines: usize,
    hidden: usize,
    tail: std::collections::VecDeque<String>,
    partial: String,
    at_line_start: bool,
}

impl Default for Fold {
    fn default() -> Self {
        Self {
            lines: 0,
            hidden: 0,
            tail: std::collections::VecDeque::new(),
            partial: String::new(),
            at_line_start: true,
        }
    }
}

impl Fold {
    /// Takes a chunk; returns the part to show now.
    fn take(&mut self, chunk: &str) -> String {
        let mut shown = String::new();
        let mut rest = chunk;
        while !rest.is_empty() {
            let (piece, ends_line, next) = match rest.find('\n') {
                Some(at) => (&rest[..=at], true, &rest[at + 1..]),
                None => (rest, false, ""),
            };
            rest = next;
            if self.lines < FOLD_HEAD {
                shown.push_str(piece);
                self.at_line_start = ends_line;
                if ends_line {
                    self.lines += 1;
                }
                continue;
            }
            self.partial.push_str(piece);
            if ends_line {
                let line = std::mem::take(&mut self.partial);
                self.push_hidden(line.trim_end_matches('\n').to_owned());
            }
        }
        shown
    }

    fn push_hidden(&mut self, line: String) {
        self.lines += 1;
        self.tail.push_back(line);
        if self.tail.len() > FOLD_TAIL {
            self.tail.pop_front();
            self.hidden += 1;
        }
    }

    /// Ends the output: a last line without its newline joins the tail.
    fn finish(&mut self) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.push_hidden(line);
        }
    }
}

/// What `/hotkeys` (and `/help`) lists.
const HOTKEYS: &[&str] = &[
    "Keys: Enter sends • Alt+Enter or a trailing \\ adds a line • Tab completes commands and paths • Ctrl+C clears the line (twice on an empty line exits) • Esc twice on an empty line: the session tree (doubleEscapeAction) • Ctrl+D exits",
    "While the agent works: Esc or Ctrl+C aborts the turn (queued messages go back into the editor) • Enter queues what you typed as a steering message (after the current tool calls) • Alt+Enter queues a follow-up (when the agent would stop) • Alt+Up takes the queued messages back • what you type is not echoed into the reply; an unfinished line is in the prompt when the turn ends",
];

/// pi's changelog, shown by `/changelog` (the reference shows its own package's).
const CHANGELOG: &str = include_str!("../../../CHANGELOG.md");

/// An executable named `name` on `PATH`.
fn find_on_path(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate).is_ok_and(|meta| {
                use std::os::unix::fs::PermissionsExt as _;
                meta.is_file() && meta.permissions().mode() & 0o111 != 0
            })
        })
}

/// Puts `text` on the desktop clipboard through the first tool found for the session's display
/// (Wayland's `wl-copy`, X11's `xclip` or `xsel`, macOS's `pbcopy`); returns its name.
fn clipboard_tool(text: &str) -> Option<&'static str> {
    use std::io::Write as _;
    let wayland = std::env::var_os("WAYLAND_DISPLAY").is_some();
    let x11 = std::env::var_os("DISPLAY").is_some();
    let tools: &[(&str, &[&str], bool)] = &[
        ("wl-copy", &[], wayland),
        ("xclip", &["-selection", "clipboard"], x11),
        ("xsel", &["--clipboard", "--input"], x11),
        ("pbcopy", &[], cfg!(target_os = "macos")),
    ];
    for (name, args, usable) in tools {
        if !usable {
            continue;
        }
        let Some(program) = find_on_path(name) else {
            continue;
        };
        let child = std::process::Command::new(program)
            .args(*args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if let Ok(mut child) = child {
            let fed = child
                .stdin
                .take()
                .is_some_and(|mut stdin| stdin.write_all(text.as_bytes()).is_ok());
            if fed && child.wait().is_ok_and(|status| status.success()) {
                return Some(name);
            }
        }
    }
    None
}

fn short_time(iso: &str) -> String {
    let text: String = iso.chars().take(16).collect();
    text.replace('T', " ")
}

/// `text` on one line of at most `max` characters (whitespace runs become one space), its
/// control characters shown escaped.
fn one_line(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = if line.chars().count() > max {
        let mut cut: String = line.chars().take(max).collect();
        cut.push('…');
        cut
    } else {
        line
    };
    term::line(&line).into_owned()
}

/// Returns a session as one picker row.
fn session_row(summary: &SessionSummary, show_cwd: bool) -> String {
    let title = summary
        .name
        .clone()
        .or_else(|| summary.first_message.clone())
        .unwrap_or_else(|| "(no messages)".to_owned());
    let mut row = format!(
        "{}  {}  ({} messages)  {}",
        term::line(&short_time(&summary.last_activity)),
        one_line(&title, 60),
        summary.messages,
        term::line(summary.id.as_str())
    );
    if show_cwd {
        row.push_str(&format!("  {}", term::line(&summary.cwd)));
    }
    row
}

/// Resolves a picker answer to an entry: a row number of the listing, or an entry id or
/// unique id prefix among the session's entries.
fn resolve_entry(
    answer: &str,
    rows: &[Option<EntryId>],
    entries: &[StoredEntry],
) -> Result<EntryId, String> {
    let answer = answer.trim();
    if let Ok(number) = answer.parse::<usize>()
        && number >= 1
        && number <= rows.len()
    {
        return rows[number - 1]
            .clone()
            .ok_or_else(|| format!("Row {number} has no entry id and cannot be selected"));
    }
    let mut found: Vec<&str> = entries
        .iter()
        .filter_map(|stored| stored.entry.id.as_ref().map(EntryId::as_str))
        .filter(|id| id.starts_with(answer))
        .collect();
    found.sort_unstable();
    found.dedup();
    if let Some(exact) = found.iter().find(|id| **id == answer) {
        return Ok(EntryId::new(*exact));
    }
    match found.as_slice() {
        [one] => Ok(EntryId::new(*one)),
        [] => Err(format!("No entry matches {answer:?}")),
        many => Err(format!(
            "{answer:?} matches {} entries: {}",
            many.len(),
            many.join(", ")
        )),
    }
}

fn model_matches(search: &str, provider: &str, id: &str) -> bool {
    let haystack = format!("{provider} {id}").to_lowercase();
    let exact = format!("{provider}/{id}").to_lowercase();
    let search = search.to_lowercase();
    if search == exact || search == id.to_lowercase() {
        return true;
    }
    search.split_whitespace().all(|token| {
        let mut chars = haystack.chars();
        token
            .chars()
            .filter(|ch| *ch != '/')
            .all(|wanted| chars.any(|ch| ch == wanted))
    })
}

impl Repl {
    fn palette(&self) -> Palette {
        self.out.palette()
    }

    /// Shows a message (its control characters escaped; a field in it that must stay on one
    /// line is escaped where it is formatted).
    fn info(&mut self, text: &str) -> io::Result<()> {
        let painted = self.palette().dim(&term::text(text));
        self.out.line(&painted)
    }

    fn warn(&mut self, text: &str) -> io::Result<()> {
        let painted = self.palette().warning(&term::text(text));
        self.out.line(&painted)
    }

    fn error(&mut self, text: &str) -> io::Result<()> {
        let painted = self
            .palette()
            .error(&format!("Error: {}", term::text(text)));
        self.out.line(&painted)
    }

    fn refresh_commands(&mut self) {
        let mut names: Vec<String> = COMMANDS
            .iter()
            .map(|(name, _)| (*name).to_owned())
            .collect();
        let resources = self.session.resources();
        let extra: Vec<String> = match resources.lock() {
            Ok(resources) => resources
                .commands()
                .into_iter()
                .map(|command| command.name)
                .collect(),
            Err(poisoned) => poisoned
                .into_inner()
                .commands()
                .into_iter()
                .map(|command| command.name)
                .collect(),
        };
        names.extend(extra);
        names.extend(
            self.session
                .extension_commands()
                .into_iter()
                .map(|command| command.invocation_name),
        );
        match self.commands.lock() {
            Ok(mut commands) => *commands = names,
            Err(poisoned) => *poisoned.into_inner() = names,
        }
    }

    /// Renders every event already queued.
    fn drain_events(&mut self) -> io::Result<()> {
        while let Ok(event) = self.events.try_recv() {
            self.out.event(&event)?;
        }
        self.out.finish_line()
    }

    /// Forgets Ctrl+C presses that arrived while nothing was running.
    fn drain_signals(&mut self) {
        while let Some(Some(())) = self.sigint.recv().now_or_never() {}
    }

    async fn status(&mut self) -> io::Result<()> {
        let stats = self.session.stats().await;
        let model = self.session.model();
        let status = Status {
            model: model
                .as_ref()
                .map(|model| format!("{}/{}", model.provider, model.id)),
            thinking: model
                .as_ref()
                .filter(|model| model.reasoning)
                .map(|_| self.session.thinking_level().as_str().to_owned()),
            context_tokens: self.session.context_tokens(),
            context_window: model.as_ref().map_or(0, |model| model.context_window),
            input: stats.input,
            output: stats.output,
            cost: stats.cost,
            name: self.session.session_name(),
        };
        self.out.status(&status)?;
        if !self.statuses.is_empty() {
            let line = self
                .statuses
                .values()
                .map(|text| term::line(text))
                .collect::<Vec<_>>()
                .join(" • ");
            let line = self.palette().dim(&line);
            self.out.line(&line)?;
        }
        Ok(())
    }

    async fn banner(&mut self) -> Result<()> {
        let model = self.session.model();
        let model_text = model.as_ref().map_or("no model".to_owned(), |model| {
            term::line(&format!("{}/{}", model.provider, model.id)).into_owned()
        });
        let messages = self.session.messages();
        let session_text = if self.session.is_persisted().await && !messages.is_empty() {
            format!(
                "session {} ({} messages)",
                term::line(self.session.session_id().await.as_str()),
                messages.len()
            )
        } else {
            "new session".to_owned()
        };
        let title = self.palette().bold(&format!(
            "pi {} • {model_text} • {session_text}",
            env!("CARGO_PKG_VERSION")
        ));
        self.out.line(&title)?;
        self.info("/help for commands • Ctrl+C aborts a turn • Ctrl+D exits")?;
        if model.is_none() {
            let help = setup_help(&self.terminal.agent_dir);
            self.warn(&help)?;
        }
        if !messages.is_empty() {
            self.out.line("")?;
            self.out.transcript(&messages)?;
            self.status().await?;
        }
        Ok(())
    }

    async fn main_loop(&mut self) -> Result<ExitCode> {
        loop {
            let initial = std::mem::take(&mut self.initial);
            // Paths complete against the session's directory, which a resume may have changed.
            let cwd = self.session.cwd();
            match self.editor_cwd.lock() {
                Ok(mut current) => *current = cwd,
                Err(poisoned) => *poisoned.into_inner() = cwd,
            }
            match self.editor.read(PROMPT, &initial, true).await {
                Reply::Eof => return Ok(ExitCode::SUCCESS),
                Reply::Failed(error) => {
                    self.error(&format!("reading the terminal failed: {error}"))?;
                    return Ok(ExitCode::FAILURE);
                }
                Reply::Interrupted => {
                    self.interrupts += 1;
                    if self.interrupts >= 2 {
                        return Ok(ExitCode::SUCCESS);
                    }
                    self.info("(press Ctrl+C again to exit, or Ctrl+D)")?;
                }
                Reply::DoubleEscape => {
                    self.interrupts = 0;
                    let line = match self.terminal.double_escape {
                        DoubleEscape::Tree => "/tree",
                        DoubleEscape::Fork => "/fork",
                        DoubleEscape::Nothing => continue,
                    };
                    match self.handle(line).await? {
                        Flow::Continue => {}
                        Flow::Quit => return Ok(ExitCode::SUCCESS),
                    }
                }
                Reply::Line(line) => {
                    self.interrupts = 0;
                    match self.handle(&line).await? {
                        Flow::Continue => {}
                        Flow::Quit => return Ok(ExitCode::SUCCESS),
                    }
                }
                Reply::Action { action, line } => {
                    self.interrupts = 0;
                    match self.key_action(action, line).await? {
                        Flow::Continue => {}
                        Flow::Quit => return Ok(ExitCode::SUCCESS),
                    }
                }
            }
        }
    }

    /// An application key pressed at the prompt with `line` in the editor: the action, then
    /// the line offered again (edited, for the external editor).
    async fn key_action(&mut self, action: keys::KeyAction, line: String) -> Result<Flow> {
        use keys::KeyAction;
        let command = match action {
            KeyAction::ModelCycleForward | KeyAction::ModelCycleBackward => {
                let forward = action == KeyAction::ModelCycleForward;
                match self.session.cycle_model(forward).await {
                    Some(model) => {
                        self.drain_events()?;
                        let scope = if self.session.cycles_scoped_models() {
                            "scoped models"
                        } else {
                            "available models"
                        };
                        self.info(&format!(
                            "Model: {}/{} • thinking {} ({scope})",
                            term::line(&model.provider),
                            term::line(&model.id),
                            self.session.thinking_level().as_str()
                        ))?;
                    }
                    None => self.info("No other model to cycle to (see /model and --models)")?,
                }
                None
            }
            KeyAction::ThinkingCycle => {
                match self.session.cycle_thinking_level().await {
                    Some(level) => {
                        self.drain_events()?;
                        self.info(&format!("Thinking level: {}", level.as_str()))?;
                    }
                    None => self.info("The current model does not support thinking")?,
                }
                None
            }
            KeyAction::ThinkingToggle => {
                let hidden = !self.out.thinking_hidden();
                self.out.set_thinking_hidden(hidden);
                self.info(if hidden {
                    "Thinking collapsed (shown as one line)"
                } else {
                    "Thinking shown"
                })?;
                None
            }
            KeyAction::ToolsExpand => {
                let expanded = !self.out.tools_expanded();
                self.out.set_tools_expanded(expanded);
                if expanded {
                    self.info("Tool output shown whole")?;
                    // What the last result left out, now.
                    self.out.show_last_cut_result()?;
                } else {
                    self.info("Tool output cut to its first and last lines")?;
                }
                None
            }
            KeyAction::ExternalEditor => {
                let edited = self.external_editor(&line).await?;
                self.initial = edited.unwrap_or(line);
                return Ok(Flow::Continue);
            }
            KeyAction::ModelSelect => Some("/model"),
            KeyAction::SessionNew => Some("/new"),
            KeyAction::SessionTree => Some("/tree"),
            KeyAction::SessionFork => Some("/fork"),
            KeyAction::SessionResume => Some("/resume"),
            KeyAction::MessageCopy => Some("/copy"),
        };
        let flow = match command {
            Some(command) => self.handle(command).await?,
            None => Flow::Continue,
        };
        // A command that pre-fills the prompt (`/tree` to a user message) wins.
        if self.initial.is_empty() {
            self.initial = line;
        }
        Ok(flow)
    }

    /// Ctrl+G: `text` edited in the `externalEditor` setting's program, `$VISUAL`, `$EDITOR`
    /// or `nano` (as the reference picks it); `None` when the editor failed (said why).
    async fn external_editor(&mut self, text: &str) -> Result<Option<String>> {
        let program = self.terminal.external_editor.clone();
        let file = match tempfile::Builder::new()
            .prefix("pi-prompt-")
            .suffix(".md")
            .tempfile()
        {
            Ok(file) => file,
            Err(error) => {
                self.warn(&format!("cannot create the file to edit: {error}"))?;
                return Ok(None);
            }
        };
        if let Err(error) = std::fs::write(file.path(), text) {
            self.warn(&format!("cannot write the file to edit: {error}"))?;
            return Ok(None);
        }
        self.out.finish_line()?;
        let path = file.path().to_path_buf();
        let shown = program.clone();
        // The editor gets the terminal: the line editor is not reading now.
        let status = tokio::task::spawn_blocking(move || {
            std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(format!("{program} \"$1\""))
                .arg("pi-external-editor")
                .arg(&path)
                .status()
        })
        .await;
        match status {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => {
                self.warn(&format!(
                    "{} exited with {status}; the prompt is unchanged",
                    term::line(&shown)
                ))?;
                return Ok(None);
            }
            Ok(Err(error)) => {
                self.warn(&format!("cannot run {}: {error}", term::line(&shown)))?;
                return Ok(None);
            }
            Err(error) => {
                self.warn(&format!("the external editor failed: {error}"))?;
                return Ok(None);
            }
        }
        match std::fs::read_to_string(file.path()) {
            Ok(edited) => {
                // An editor ends the file with a newline the prompt did not have.
                let edited = edited.strip_suffix('\n').unwrap_or(&edited);
                Ok(Some(edited.to_owned()))
            }
            Err(error) => {
                self.warn(&format!("cannot read the edited file: {error}"))?;
                Ok(None)
            }
        }
    }

    async fn handle(&mut self, line: &str) -> Result<Flow> {
        match command::parse(line) {
            Input::Empty => {}
            Input::Prompt(text) => {
                // A `/word` that names no command, template, skill or extension command is not
                // sent to the model unannounced.
                if let Some(word) = command::slash_word(&text)
                    && !self.knows_command(word)
                {
                    self.unknown_command(word)?;
                    return Ok(Flow::Continue);
                }
                self.run_prompt(&text, Vec::new()).await?
            }
            Input::Shell {
                command,
                exclude_from_context,
            } => self.shell(&command, exclude_from_context).await?,
            Input::Command(command) => {
                let flow = self.command(command).await;
                // Events the command caused (a model change, a notice).
                self.drain_events()?;
                return flow;
            }
        }
        Ok(Flow::Continue)
    }

    /// Awaits `work` while rendering the session's events as they arrive; the first Ctrl+C
    /// (SIGINT: the editor is not reading, the terminal is in its normal mode) calls
    /// `interrupt`.
    async fn with_events<T>(
        &mut self,
        work: impl std::future::Future<Output = T>,
        interrupt: impl Fn(),
    ) -> Result<T> {
        self.run_with_events(work, interrupt, false).await
    }

    /// [`Self::with_events`] for a run of the agent: a line typed meanwhile is queued as a
    /// steering message (Enter) or a follow-up (Alt+Enter), see [`typeahead`].
    async fn with_events_steerable<T>(
        &mut self,
        work: impl std::future::Future<Output = T>,
        interrupt: impl Fn(),
    ) -> Result<T> {
        self.run_with_events(work, interrupt, true).await
    }

    async fn run_with_events<T>(
        &mut self,
        work: impl std::future::Future<Output = T>,
        interrupt: impl Fn(),
        steerable: bool,
    ) -> Result<T> {
        self.drain_signals();
        tokio::pin!(work);
        let steerable = steerable && io::IsTerminal::is_terminal(&io::stdin());
        let mut typeahead = if steerable {
            Typeahead::start("")
        } else {
            None
        };
        let mut interrupted = false;
        let mut restored: Vec<String> = Vec::new();
        let result = loop {
            let mut abort = false;
            tokio::select! {
                result = &mut work => break result,
                Some(event) = self.events.recv() => self.out.event(&event)?,
                Some(request) = self.ui_requests.recv() => {
                    // A dialog reads the terminal through the line editor: nothing else may.
                    let pause = request.reads_terminal();
                    let mut partial = String::new();
                    if pause && let Some(reader) = typeahead.take() {
                        let stopped = reader.stop();
                        for typed in stopped.keys {
                            abort |= self.typed(typed, &mut restored)?;
                        }
                        partial = stopped.partial;
                    }
                    self.answer_ui(request).await?;
                    if pause && steerable {
                        typeahead = Typeahead::start(&partial);
                    }
                }
                typed = async {
                    match typeahead.as_mut() {
                        Some(reader) => reader.next().await,
                        None => std::future::pending().await,
                    }
                } => abort = self.typed(typed, &mut restored)?,
                Some(()) = self.sigint.recv(), if !interrupted => abort = true,
            }
            if abort && !interrupted {
                interrupted = true;
                // What was queued for the run is taken back before the abort (the loop
                // would otherwise deliver it into the aborted turn), as the reference's
                // editor does.
                if steerable {
                    let (steering, follow_up) = self.session.clear_queues();
                    restored.extend(steering);
                    restored.extend(follow_up);
                }
                interrupt();
            }
        };
        // ... and goes back into the editor.
        if !restored.is_empty() {
            self.out.finish_line()?;
            self.info(&format!(
                "{} queued message{} put back into the editor",
                restored.len(),
                if restored.len() == 1 { "" } else { "s" }
            ))?;
            for text in restored {
                self.prefill(&text);
            }
        }
        // Lines typed as the run ended were too late to steer it, and the line being typed
        // was not finished: they pre-fill the prompt.
        if let Some(reader) = typeahead.take() {
            let stopped = reader.stop();
            for typed in stopped.keys {
                if let Typed::Steer(text) | Typed::FollowUp(text) = typed {
                    self.prefill(&text);
                }
            }
            self.prefill(&stopped.partial);
        }
        self.drain_events()?;
        while let Ok(request) = self.ui_requests.try_recv() {
            self.answer_ui(request).await?;
        }
        Ok(result)
    }

    /// Adds text to what the next prompt starts with.
    fn prefill(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if !self.initial.is_empty() {
            self.initial.push(' ');
        }
        self.initial.push_str(text);
    }

    /// Handles a key typed during a run: a line is queued, Alt+Up takes the queued messages
    /// back (into `restored`, for the editor). Returns whether it asks for the run's abort
    /// (Esc).
    fn typed(&mut self, typed: Typed, restored: &mut Vec<String>) -> io::Result<bool> {
        match typed {
            Typed::Escape => Ok(true),
            Typed::Dequeue => {
                let (steering, follow_up) = self.session.clear_queues();
                let count = steering.len() + follow_up.len();
                restored.extend(steering);
                restored.extend(follow_up);
                self.out.finish_line()?;
                if count == 0 {
                    self.info("Nothing is queued")?;
                } else {
                    self.info(&format!(
                        "{count} queued message{} taken back (in the editor when the turn ends)",
                        if count == 1 { "" } else { "s" }
                    ))?;
                }
                Ok(false)
            }
            Typed::Steer(text) => {
                self.queue_typed(&text, false)?;
                Ok(false)
            }
            Typed::FollowUp(text) => {
                self.queue_typed(&text, true)?;
                Ok(false)
            }
        }
    }

    /// Queues a line typed during a run and says so.
    fn queue_typed(&mut self, text: &str, follow_up: bool) -> io::Result<()> {
        self.out.finish_line()?;
        let (result, label) = if follow_up {
            (self.session.follow_up(text), "Follow-up")
        } else {
            (self.session.steer(text), "Steering")
        };
        match result {
            Ok(()) => self.info(&format!("{label} queued: {text}")),
            Err(error) => self.error(&error.to_string()),
        }
    }

    /// Shows an extension's notification, or asks its question and sends the answer back.
    async fn answer_ui(&mut self, request: UiRequest) -> Result<()> {
        if request.prints() {
            self.out.finish_line()?;
        }
        match request {
            UiRequest::Notify { message, kind } => match kind {
                NotifyKind::Info => self.info(&message)?,
                NotifyKind::Warning => self.warn(&message)?,
                NotifyKind::Error => self.error(&message)?,
            },
            UiRequest::Confirm {
                title,
                message,
                reply,
            } => {
                let title = self.palette().bold(&term::line(&title));
                self.out.line(&title)?;
                let answer = self.ask(&format!("{message} [y/N] ")).await;
                let yes = matches!(
                    answer.as_deref().map(str::to_lowercase).as_deref(),
                    Some("y" | "yes")
                );
                // The extension may have stopped waiting (a timeout).
                let _ = reply.send(yes);
            }
            UiRequest::Select {
                title,
                options,
                reply,
            } => {
                // A title of several lines (the trust question) is shown as those lines.
                for line in title.split('\n') {
                    let line = self.palette().bold(&term::line(line));
                    self.out.line(&line)?;
                }
                let width = options.len().to_string().len();
                for (idx, option) in options.iter().enumerate() {
                    let line = format!(
                        "{} {}",
                        self.palette().dim(&format!("{:>width$}", idx + 1)),
                        term::line(option)
                    );
                    self.out.line(&line)?;
                }
                let answer = self.ask("Choose (number; Enter to cancel): ").await;
                let chosen = answer
                    .and_then(|answer| answer.parse::<usize>().ok())
                    .filter(|number| *number >= 1 && *number <= options.len())
                    .map(|number| options[number - 1].clone());
                let _ = reply.send(chosen);
            }
            UiRequest::Status { key, text } => {
                match text {
                    Some(text) => self.statuses.insert(key, text),
                    None => self.statuses.remove(&key),
                };
            }
            UiRequest::Widget { key: _, lines } => {
                for line in lines.unwrap_or_default() {
                    let line = self.palette().dim(&term::line(&line));
                    self.out.line(&line)?;
                }
            }
            UiRequest::Title { title } => {
                if io::IsTerminal::is_terminal(&io::stdout()) {
                    // OSC 0: the window and icon title; control characters would end it early.
                    let title: String = title.chars().filter(|c| !c.is_control()).collect();
                    let mut stdout = io::stdout();
                    write!(stdout, "\x1b]0;{title}\x07")?;
                    stdout.flush()?;
                }
            }
            UiRequest::EditorText { text } => self.initial = text,
            UiRequest::Editor {
                title,
                prefill,
                reply,
            } => {
                let answer = match self
                    .editor
                    .read(
                        &format!("{title}: "),
                        prefill.as_deref().unwrap_or(""),
                        false,
                    )
                    .await
                {
                    Reply::Line(line) => Some(line),
                    Reply::Interrupted
                    | Reply::Eof
                    | Reply::DoubleEscape
                    | Reply::Action { .. }
                    | Reply::Failed(_) => None,
                };
                let _ = reply.send(answer);
            }
            UiRequest::Input {
                title,
                placeholder,
                reply,
            } => {
                let question = match placeholder {
                    Some(hint) => format!("{title} ({hint}): "),
                    None => format!("{title}: "),
                };
                let answer = self.ask(&question).await;
                let _ = reply.send(answer);
            }
        }
        Ok(())
    }

    /// Sends a prompt and renders the run until the session is idle again; Ctrl+C aborts.
    async fn run_prompt(&mut self, text: &str, images: Vec<ImageContent>) -> Result<()> {
        let session = self.session.clone();
        let options = PromptOptions {
            images,
            ..PromptOptions::default()
        };
        let result = self
            .with_events_steerable(session.prompt(text, options), || {
                // Ctrl+C stops whatever the run is doing: the turn, a retry wait, or a
                // compaction that followed it.
                session.abort();
                session.abort_compaction();
            })
            .await?;
        match result {
            Ok(()) => {}
            Err(SessionError::NoModel) => {
                let help = setup_help(&self.terminal.agent_dir);
                self.warn(&help)?;
                return Ok(());
            }
            Err(SessionError::ReadOnly { .. }) => {
                self.explain_read_only().await?;
                return Ok(());
            }
            Err(error) => self.error(&error.to_string())?,
        }
        self.status().await?;
        Ok(())
    }

    /// `/compact [focus]`: summarise the context now; Ctrl+C cancels the summary.
    async fn compact(&mut self, focus: Option<String>) -> Result<()> {
        if !self.session.is_persisted().await {
            self.info("Nothing to compact yet")?;
            return Ok(());
        }
        let session = self.session.clone();
        let result = self
            .with_events(session.compact(focus), || session.abort_compaction())
            .await?;
        match result {
            // The compaction events already said what happened.
            Ok(_) => {}
            Err(SessionError::NoModel) => {
                let help = setup_help(&self.terminal.agent_dir);
                self.warn(&help)?;
                return Ok(());
            }
            Err(error) => self.error(&error.to_string())?,
        }
        self.status().await?;
        Ok(())
    }

    /// Runs `!cmd` / `!!cmd`, streaming its output; Ctrl+C stops it.
    async fn shell(&mut self, command: &str, exclude_from_context: bool) -> Result<()> {
        self.drain_signals();
        self.out.finish_line()?;
        let fold = Arc::new(Mutex::new(Fold::default()));
        let palette = self.palette();
        let sink: OutputSink = {
            let fold = fold.clone();
            Arc::new(move |chunk: &str| {
                if chunk.is_empty() {
                    return;
                }
                let shown = match fold.lock() {
                    Ok(mut fold) => fold.take(chunk),
                    Err(poisoned) => poisoned.into_inner().take(chunk),
                };
                if !shown.is_empty() {
                    let mut stdout = io::stdout().lock();
                    // The command's output may hold anything a file does: shown escaped.
                    let _ = write!(stdout, "{}", palette.dim(&term::text(&shown)));
                    let _ = stdout.flush();
                }
            })
        };
        let session = self.session.clone();
        let run = session.execute_bash(command, exclude_from_context, Some(sink));
        tokio::pin!(run);
        let result = loop {
            tokio::select! {
                result = &mut run => break result,
                Some(()) = self.sigint.recv() => session.abort_bash(),
            }
        };
        let mut fold = match fold.lock() {
            Ok(fold) => fold.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        fold.finish();
        if !fold.at_line_start {
            self.out.line("")?;
        }
        // Long output is folded as the reference folds it: the head streamed, the tail
        // shown, the rest one `/expand` away.
        if fold.hidden > 0 {
            self.info(&format!(
                "… {} more line{} (/expand shows the whole output)",
                fold.hidden,
                if fold.hidden == 1 { "" } else { "s" }
            ))?;
        }
        {
            for line in &fold.tail {
                let shown = self.palette().dim(&term::text(line));
                self.out.line(&shown)?;
            }
        }
        match result {
            Ok(message) => {
                self.last_shell_output = Some(message.output.clone());
                if message.cancelled {
                    self.warn("(cancelled)")?;
                } else if let Some(code) = message.exit_code.filter(|code| *code != 0) {
                    self.warn(&format!("(exit code {code})"))?;
                }
                if message.truncated {
                    let path = message.full_output_path.as_deref().unwrap_or("");
                    self.info(&format!("(output truncated; full output in {path})"))?;
                }
            }
            Err(SessionError::ReadOnly { .. }) => self.explain_read_only().await?,
            Err(error) => self.error(&error.to_string())?,
        }
        self.drain_events()?;
        Ok(())
    }

    async fn ask(&mut self, question: &str) -> Option<String> {
        match self.editor.read(question, "", false).await {
            Reply::Line(line) => {
                let line = line.trim().to_owned();
                (!line.is_empty()).then_some(line)
            }
            Reply::Interrupted
            | Reply::Eof
            | Reply::DoubleEscape
            | Reply::Action { .. }
            | Reply::Failed(_) => None,
        }
    }

    /// Runs a command; a session it left is handed to `Interchange::left` (the automatic push
    /// of `sync.auto`), which does not wait.
    async fn command(&mut self, command: Command) -> Result<Flow> {
        let before = self.session.session_id().await;
        let flow = self.run_command(command).await;
        if self.session.session_id().await != before {
            self.left(&before)?;
        }
        flow
    }

    fn left(&mut self, session: &SessionId) -> io::Result<()> {
        for warning in (self.interchange.left)(session) {
            self.warn(&warning)?;
        }
        Ok(())
    }

    async fn run_command(&mut self, command: Command) -> Result<Flow> {
        match command {
            Command::Quit => return Ok(Flow::Quit),
            Command::Help => self.help()?,
            Command::Tree(filter) => self.tree(filter.as_deref()).await?,
            Command::Label(args) => self.label(args.as_deref()).await?,
            Command::Name(name) => self.name(name.as_deref()).await?,
            Command::Session => self.session_info().await?,
            Command::New => {
                let session = self.session.clone();
                let report = self.with_events(session.new_session(None), || {}).await??;
                for notice in &report.notices {
                    self.warn(notice)?;
                }
                self.last_tree.clear();
                self.info("New session started")?;
            }
            Command::Resume(words) => {
                if let Some(id) = self.pick_session(words.as_deref()).await? {
                    self.switch_to(id).await?;
                }
            }
            Command::Fork => self.fork().await?,
            Command::Clone => self.clone_session().await?,
            Command::TakeOver => self.take_over().await?,
            Command::Model(search) => self.model(search.as_deref()).await?,
            Command::Thinking(level) => self.thinking(level.as_deref()).await?,
            Command::ScopedModels(args) => self.scoped_models(args.as_deref())?,
            Command::Settings(args) => self.settings(args.as_deref()).await?,
            Command::Reload => self.reload().await?,
            Command::Trust => self.trust().await?,
            Command::Mcp(args) => self.mcp(args.as_deref()).await?,
            Command::Compact(focus) => self.compact(focus).await?,
            Command::Export(path) => self.export(path.as_deref()).await?,
            Command::Share => self.share().await?,
            Command::Copy => self.copy()?,
            Command::Hotkeys => self.hotkeys()?,
            Command::Changelog => self.out.markdown_text(CHANGELOG)?,
            Command::Login(provider) => self.login(provider.as_deref()).await?,
            Command::Logout(provider) => self.logout(provider.as_deref()).await?,
            Command::Expand => self.expand()?,
            Command::Import(path) => self.import(path.as_deref()).await?,
        }
        Ok(Flow::Continue)
    }

    fn help(&mut self) -> io::Result<()> {
        let width = COMMANDS
            .iter()
            .map(|(name, _)| name.len())
            .max()
            .unwrap_or(0);
        let title = self.palette().bold("Commands");
        self.out.line(&title)?;
        for (name, description) in COMMANDS {
            let shown = format!("  /{name:<width$}  {description}");
            self.out.line(&shown)?;
        }
        self.out.line(&format!(
            "  !{:<width$}  Run a shell command (!!cmd keeps its output out of the context)",
            "cmd"
        ))?;
        let templates: Vec<String> = match self.commands.lock() {
            Ok(commands) => commands
                .iter()
                .filter(|name| !COMMANDS.iter().any(|(builtin, _)| builtin == *name))
                .map(|name| format!("/{name}"))
                .collect(),
            Err(_) => Vec::new(),
        };
        if !templates.is_empty() {
            self.out.line(&format!(
                "Prompt templates and skills: {}",
                templates.join(" ")
            ))?;
        }
        self.hotkeys()
    }

    /// `/scoped-models [N…|all|none|save]`: the available models numbered, the ones Ctrl+P
    /// cycles through checked; numbers toggle, `all` and `none` set them all, `save` keeps
    /// them as `enabledModels` in the global settings.
    fn scoped_models(&mut self, args: Option<&str>) -> io::Result<()> {
        use crate::session::ModelChoice;
        let available = self.session.available_models();
        if available.is_empty() {
            return self.warn("No model can be used here (see /login and models.json)");
        }
        let same = |choice: &ModelChoice, model: &crate::ai::Model| {
            choice.model.provider == model.provider && choice.model.id == model.id
        };
        let mut scope = self.session.model_scope();
        let words: Vec<&str> = args.unwrap_or_default().split_whitespace().collect();
        match words.as_slice() {
            [] => {}
            ["all"] => {
                scope = available
                    .iter()
                    .map(|model| ModelChoice {
                        model: model.clone(),
                        thinking: None,
                    })
                    .collect();
            }
            ["none" | "clear"] => scope.clear(),
            ["save"] => {
                let patterns: Vec<String> = scope
                    .iter()
                    .map(|choice| format!("{}/{}", choice.model.provider, choice.model.id))
                    .collect();
                return match self
                    .session
                    .config()
                    .settings_sink
                    .set_enabled_models(&patterns)
                {
                    Ok(()) if patterns.is_empty() => {
                        self.info("Saved: no enabledModels (Ctrl+P cycles every available model)")
                    }
                    Ok(()) => self.info(&format!(
                        "Saved enabledModels: {}",
                        term::line(&patterns.join(", "))
                    )),
                    Err(error) => self.warn(&format!("Not saved: {error}")),
                };
            }
            numbers => {
                let mut picked = Vec::new();
                for word in numbers {
                    match word.parse::<usize>() {
                        Ok(number) if (1..=available.len()).contains(&number) => {
                            picked.push(number - 1);
                        }
                        _ => {
                            return self.warn(&format!(
                                "Usage: /scoped-models [N…|all|none|save], N from 1 to {}; {:?} is none of them",
                                available.len(),
                                term::line(word)
                            ));
                        }
                    }
                }
                for index in picked {
                    let model = &available[index];
                    match scope.iter().position(|choice| same(choice, model)) {
                        Some(at) => {
                            scope.remove(at);
                        }
                        None => scope.push(ModelChoice {
                            model: model.clone(),
                            thinking: None,
                        }),
                    }
                }
            }
        }
        if !words.is_empty() {
            self.session.set_model_scope(scope.clone());
        }
        for (index, model) in available.iter().enumerate() {
            let mark = if scope.iter().any(|choice| same(choice, model)) {
                "[x]"
            } else {
                "[ ]"
            };
            self.info(&format!(
                "{:>3} {mark} {}/{}",
                index + 1,
                term::line(&model.provider),
                term::line(&model.id)
            ))?;
        }
        self.info(if scope.is_empty() {
            "Ctrl+P cycles every available model (none checked) • /scoped-models N… toggles, all, none; save keeps them in settings.json"
        } else {
            "Ctrl+P cycles the checked models • /scoped-models N… toggles, all, none; save keeps them in settings.json (enabledModels)"
        })
    }

    /// `/settings [NAME VALUE]`: the settings this REPL has with their values; a name and a
    /// value set one for this session and save it to the global `settings.json`.
    async fn settings(&mut self, args: Option<&str>) -> io::Result<()> {
        let args = args.unwrap_or_default().trim();
        if args.is_empty() {
            let (steering, follow_up) = self.session.queue_modes();
            let double = match self.terminal.double_escape {
                DoubleEscape::Tree => "tree",
                DoubleEscape::Fork => "fork",
                DoubleEscape::Nothing => "none",
            };
            let editor = self.terminal.external_editor.clone();
            let theme_values = format!("{} | LIGHT/DARK", self.themes.names().join(" | "));
            let rows = [
                (
                    "autoCompact",
                    self.session.auto_compaction().to_string(),
                    "true | false",
                ),
                (
                    "autoRetry",
                    self.session.auto_retry().to_string(),
                    "true | false",
                ),
                (
                    "steeringMode",
                    steering.as_str().to_owned(),
                    "all | one-at-a-time",
                ),
                (
                    "followUpMode",
                    follow_up.as_str().to_owned(),
                    "all | one-at-a-time",
                ),
                (
                    "thinkingLevel",
                    self.session.thinking_level().as_str().to_owned(),
                    "off | minimal | low | medium | high | xhigh",
                ),
                (
                    "doubleEscapeAction",
                    double.to_owned(),
                    "tree | fork | none",
                ),
                (
                    "hideThinkingBlock",
                    self.out.thinking_hidden().to_string(),
                    "true | false",
                ),
                (
                    "externalEditor",
                    editor,
                    "a command ($VISUAL, $EDITOR when empty)",
                ),
                (
                    "theme",
                    self.terminal
                        .theme
                        .setting
                        .clone()
                        .unwrap_or_else(|| crate::modes::theme::SYSTEM.to_owned()),
                    &theme_values,
                ),
            ];
            for (name, value, values) in rows {
                self.info(&format!("{name:<20} {:<16} {values}", term::line(&value)))?;
            }
            return self
                .info("/settings NAME VALUE sets one (saved to settings.json in the agent dir)");
        }
        let (name, value) = match args.split_once(char::is_whitespace) {
            Some((name, value)) => (name, value.trim()),
            None => (args, ""),
        };
        let boolean = match value {
            "true" | "on" | "yes" => Some(true),
            "false" | "off" | "no" => Some(false),
            _ => None,
        };
        let bad = |expected: &str| {
            format!(
                "{name}: {:?} is not {expected}",
                term::line(value).into_owned()
            )
        };
        let sink = self.session.config().settings_sink.clone();
        let saved = match name {
            "autoCompact" => match boolean {
                Some(on) => {
                    self.session.set_auto_compaction(on);
                    Ok(())
                }
                None => return self.warn(&bad("true or false")),
            },
            "autoRetry" => match boolean {
                Some(on) => {
                    self.session.set_auto_retry(on);
                    Ok(())
                }
                None => return self.warn(&bad("true or false")),
            },
            "steeringMode" | "followUpMode" => match crate::session::QueueMode::parse(value) {
                Some(mode) if name == "steeringMode" => {
                    self.session.set_steering_mode(mode);
                    Ok(())
                }
                Some(mode) => {
                    self.session.set_follow_up_mode(mode);
                    Ok(())
                }
                None => return self.warn(&bad("all or one-at-a-time")),
            },
            "thinkingLevel" => return self.thinking(Some(value)).await.map_err(io::Error::other),
            "doubleEscapeAction" => match value {
                "tree" | "fork" | "none" => {
                    self.terminal.double_escape = DoubleEscape::from_setting(value);
                    sink.set_value(name, serde_json::Value::from(value))
                }
                _ => return self.warn(&bad("tree, fork or none")),
            },
            "hideThinkingBlock" => match boolean {
                Some(on) => {
                    self.out.set_thinking_hidden(on);
                    sink.set_value(name, serde_json::Value::from(on))
                }
                None => return self.warn(&bad("true or false")),
            },
            "externalEditor" => {
                if !value.is_empty() {
                    self.terminal.external_editor = value.to_owned();
                }
                sink.set_value(name, serde_json::Value::from(value))
            }
            "theme" => {
                let config = &self.terminal.theme;
                let Some(chosen) = crate::modes::theme::choose(value, config.light) else {
                    return self.warn(&bad("a theme name or LIGHT/DARK"));
                };
                // Both names of a pair must be themes, whichever the terminal picks now.
                let names = self.themes.names();
                if let Some(unknown) = value
                    .split('/')
                    .map(str::trim)
                    .find(|name| !names.iter().any(|known| known == name))
                {
                    return self.warn(&format!(
                        "theme: no theme {:?} (available: {})",
                        term::line(unknown).into_owned(),
                        names.join(", ")
                    ));
                }
                match self.themes.theme(chosen, config.mode) {
                    Ok(theme) => {
                        let color = self.palette().color();
                        self.out
                            .set_palette(Palette::themed(color, Arc::new(theme)));
                        self.terminal.theme.setting = Some(value.to_owned());
                        sink.set_value(name, serde_json::Value::from(value))
                    }
                    Err(error) => return self.warn(&format!("theme: {error}")),
                }
            }
            _ => {
                return self.warn(&format!(
                    "{:?} is no setting /settings changes (it lists them); other settings are edited in settings.json",
                    term::line(name).into_owned()
                ));
            }
        };
        match saved {
            Ok(()) => self.info(&format!("{name} = {}", term::line(value))),
            Err(error) => self.warn(&format!(
                "{name} = {} for this session; not saved: {error}",
                term::line(value)
            )),
        }
    }

    /// `/expand`: the whole output of the last `!` command, which was folded.
    fn expand(&mut self) -> io::Result<()> {
        let Some(output) = self.last_shell_output.clone() else {
            return self.info("No shell output to expand yet");
        };
        for line in output.lines() {
            let shown = self.palette().dim(&term::text(line));
            self.out.line(&shown)?;
        }
        Ok(())
    }

    /// `/mcp`: every server's state (1.6.0 outside its TUI prints the status); `reconnect`,
    /// `enable` and `disable` act on one server, and the tools of a server that came up are
    /// offered from the next prompt.
    async fn mcp(&mut self, args: Option<&str>) -> io::Result<()> {
        let Some(mcp) = self.mcp.clone() else {
            return self.warn("MCP is disabled for this run (--no-mcp)");
        };
        let words: Vec<&str> = args.unwrap_or_default().split_whitespace().collect();
        match words.as_slice() {
            [] => {
                for line in mcp.status_text().lines() {
                    self.info(line)?;
                }
                Ok(())
            }
            [action @ ("reconnect" | "enable" | "disable"), server] => {
                let result = match *action {
                    "reconnect" => mcp.reconnect(server).await.map(|_| None),
                    other => mcp.set_enabled(server, other == "enable").await.map(Some),
                };
                match result {
                    Ok(saved) => {
                        self.session.add_tools(mcp.tools());
                        if let Some(path) = saved {
                            self.info(&format!("Saved to {}", path.display()))?;
                        }
                        if let Some(conn) = mcp.connection(server) {
                            let lines =
                                crate::session::mcp::report_lines(conn.entry(), &conn.status());
                            for line in lines.lines() {
                                self.info(line)?;
                            }
                        }
                        Ok(())
                    }
                    Err(error) => self.warn(&error.to_string()),
                }
            }
            _ => self.warn("Usage: /mcp [reconnect|enable|disable <server>]"),
        }
    }

    /// `/hotkeys` (and the end of `/help`): the keys the REPL knows, the application keys as
    /// `keybindings.json` leaves them.
    fn hotkeys(&mut self) -> io::Result<()> {
        for line in HOTKEYS {
            self.info(line)?;
        }
        self.info(
            "At the prompt (keybindings.json in the agent dir changes them; /reload applies it):",
        )?;
        for line in self.keymap.describe() {
            self.info(&format!("  {line}"))?;
        }
        for warning in self.keymap.warnings.clone() {
            self.warn(&warning)?;
        }
        Ok(())
    }

    /// Whether `/word` names a built-in command, a prompt template, a skill or an extension
    /// command.
    fn knows_command(&self, word: &str) -> bool {
        match self.commands.lock() {
            Ok(commands) => commands.iter().any(|name| name == word),
            Err(poisoned) => poisoned.into_inner().iter().any(|name| name == word),
        }
    }

    /// Says that `/word` is no command here (and the closest one); nothing is sent.
    fn unknown_command(&mut self, word: &str) -> io::Result<()> {
        let names = match self.commands.lock() {
            Ok(commands) => commands.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let hint = command::closest(word, names.iter().map(String::as_str))
            .map(|name| format!(" Did you mean /{name}?"))
            .unwrap_or_default();
        self.warn(&format!(
            "Unknown command /{word}: nothing was sent to the model.{hint} (/help lists the commands)"
        ))
    }

    /// `/copy`: the last answer to the clipboard — OSC 52 to the terminal (which carries it
    /// over SSH and tmux), and the platform's clipboard tool when one is found.
    fn copy(&mut self) -> Result<()> {
        let Some(text) = crate::modes::rpc::last_assistant_text(&self.session.messages()) else {
            self.warn("No answer to copy yet")?;
            return Ok(());
        };
        use base64::Engine as _;
        let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
        self.out.finish_line()?;
        let writer = self.out.writer();
        write!(writer, "\x1b]52;c;{encoded}\x07")?;
        writer.flush()?;
        let tool = clipboard_tool(&text);
        let count = text.chars().count();
        let via = match &tool {
            Some(name) => format!(" (through the terminal and {name})"),
            None => " (through the terminal)".to_owned(),
        };
        self.info(&format!(
            "Copied the last answer ({count} character{}) to the clipboard{via}",
            if count == 1 { "" } else { "s" }
        ))?;
        Ok(())
    }

    /// `/share`: the session's HTML page as a secret gist, through the GitHub CLI.
    async fn share(&mut self) -> Result<()> {
        if !self.session.is_persisted().await {
            self.info("Nothing to share yet - start a conversation first")?;
            return Ok(());
        }
        let Some(gh) = find_on_path("gh") else {
            self.warn(
                "Sharing needs the GitHub CLI: install gh and run `gh auth login`, or write the page with /export FILE.html and share the file",
            )?;
            return Ok(());
        };
        let store = self.session.store().clone();
        let session = self.session.session_id().await;
        let dir = std::env::temp_dir().join(format!("pi-share-{}", std::process::id()));
        let page = dir.join("session.html");
        let file = page.clone();
        let written = tokio::task::spawn_blocking(move || {
            crate::modes::html::write_session_file(&store, &session, &file)
        })
        .await
        .context("the export task failed")?;
        if let Err(error) = written {
            self.error(&format!("Failed to share the session: {error}"))?;
            return Ok(());
        }
        self.info("Publishing the session as a secret gist…")?;
        let output = tokio::process::Command::new(&gh)
            .args(["gist", "create", "--desc", "pi session"])
            .arg(&page)
            .stdin(std::process::Stdio::null())
            .output()
            .await;
        let _ = std::fs::remove_dir_all(&dir);
        match output {
            Ok(output) if output.status.success() => {
                let url = String::from_utf8_lossy(&output.stdout).trim().to_owned();
                self.info(&format!("Shared: {url}"))?;
            }
            Ok(output) => {
                let stderr = String::from_utf8_lossy(&output.stderr);
                self.error(&format!("gh could not create the gist: {}", stderr.trim()))?;
            }
            Err(error) => self.error(&format!("cannot run gh: {error}"))?,
        }
        Ok(())
    }

    // ----- /tree and /label -----------------------------------------------------------------

    /// Reads the tree, the entries and the leaf of the session (`None` before it is written).
    async fn tree_snapshot(&self) -> Result<Option<TreeSnapshot>> {
        if !self.session.is_persisted().await {
            return Ok(None);
        }
        let session = self.session.session_id().await;
        let store: SessionStore = self.session.store().clone();
        let snapshot = blocking(move || {
            let nodes = store.tree(&session)?;
            let entries = store.entries(&session)?;
            let leaf = store.leaf(&session)?;
            Ok(TreeSnapshot {
                nodes,
                entries,
                leaf: leaf.and_then(|stored| stored.entry.id.map(EntryId::into_string)),
            })
        })
        .await?;
        Ok(Some(snapshot))
    }

    async fn tree(&mut self, filter: Option<&str>) -> Result<()> {
        let Some(filter) = TreeFilter::parse(filter.unwrap_or("")) else {
            self.warn("Usage: /tree [default|no-tools|user|labeled|all]")?;
            return Ok(());
        };
        let Some(snapshot) = self.tree_snapshot().await? else {
            self.info("No entries in session")?;
            return Ok(());
        };
        let rows = self.rows_for(filter, &snapshot);
        if rows.is_empty() {
            self.info("No entries in session")?;
            return Ok(());
        }
        self.print_rows(&rows)?;
        let Some(answer) = self
            .ask("Go to entry (number or id; Enter to stay): ")
            .await
        else {
            return Ok(());
        };
        let target = match resolve_entry(&answer, &self.last_tree, &snapshot.entries) {
            Ok(target) => target,
            Err(message) => {
                self.warn(&message)?;
                return Ok(());
            }
        };
        if snapshot.leaf.as_deref() == Some(target.as_str()) {
            self.info("Already at this point")?;
            return Ok(());
        }
        let mut options = NavigateOptions::default();
        if self.session.model().is_some() {
            let choice = self
                .ask("Summarize the branch you leave? [n]o, [s]ummarize, [c]ustom prompt (Enter: no): ")
                .await;
            match choice.as_deref().map(str::to_lowercase).as_deref() {
                None | Some("n" | "no") => {}
                Some("s" | "summarize" | "y" | "yes") => options.summarize = true,
                Some("c" | "custom") => {
                    let Some(instructions) = self.ask("Custom summarization instructions: ").await
                    else {
                        self.info("Navigation cancelled")?;
                        return Ok(());
                    };
                    options.summarize = true;
                    options.custom_instructions = Some(instructions);
                }
                Some(other) => {
                    self.warn(&format!("Not a choice: {other:?}; staying here"))?;
                    return Ok(());
                }
            }
        }
        if options.summarize {
            self.info("Summarizing the branch… (Ctrl+C cancels)")?;
        }
        let session = self.session.clone();
        let outcome = self
            .with_events(session.navigate_tree_with(&target, options), || {
                session.abort_compaction()
            })
            .await??;
        if outcome.cancelled {
            self.info("Branch summarization cancelled")?;
            return Ok(());
        }
        self.info("Navigated to selected point")?;
        if let Some(text) = outcome.editor_text {
            self.initial = text;
        }
        Ok(())
    }

    fn rows_for(&mut self, filter: TreeFilter, snapshot: &TreeSnapshot) -> Vec<tree::TreeRow> {
        let by_seq: HashMap<i64, Entry> = snapshot
            .entries
            .iter()
            .map(|stored| (stored.seq, stored.entry.clone()))
            .collect();
        let rows = tree::rows(
            &snapshot.nodes,
            &by_seq,
            snapshot.leaf.as_deref(),
            filter,
            self.terminal.home.as_deref(),
        );
        self.last_tree = rows.iter().map(|row| row.id.clone()).collect();
        rows
    }

    fn print_rows(&mut self, rows: &[tree::TreeRow]) -> io::Result<()> {
        let palette = self.palette();
        let width = rows.len().to_string().len();
        for (idx, row) in rows.iter().enumerate() {
            let number = palette.dim(&format!("{:>width$}", idx + 1));
            let marker = if row.on_active_path {
                palette.accent("• ")
            } else {
                String::new()
            };
            let label = row
                .label
                .as_ref()
                .map(|label| palette.warning(&format!("[{}] ", term::line(label))))
                .unwrap_or_default();
            let row_text = term::line(&row.text);
            let text = match row.role {
                RowRole::User => palette.bold(&row_text),
                RowRole::Assistant => row_text.into_owned(),
                RowRole::Failed => palette.error(&row_text),
                RowRole::Other => palette.dim(&row_text),
            };
            let leaf = if row.is_leaf {
                palette.accent("  ← current")
            } else {
                String::new()
            };
            let line = format!(
                "{number} {}{marker}{label}{text}{leaf}",
                palette.dim(&row.prefix)
            );
            self.out.line(&line)?;
        }
        Ok(())
    }

    async fn label(&mut self, args: Option<&str>) -> Result<()> {
        let Some(args) = args else {
            self.warn("Usage: /label ENTRY [TEXT] (ENTRY: a row number of /tree or an entry id; no TEXT clears the label)")?;
            return Ok(());
        };
        let (target, text) = match args.split_once(char::is_whitespace) {
            Some((target, text)) => (target, Some(text.trim()).filter(|text| !text.is_empty())),
            None => (args, None),
        };
        let Some(snapshot) = self.tree_snapshot().await? else {
            self.info("No entries in session")?;
            return Ok(());
        };
        let target = match resolve_entry(target, &self.last_tree, &snapshot.entries) {
            Ok(target) => target,
            Err(message) => {
                self.warn(&message)?;
                return Ok(());
            }
        };
        self.session.set_label(&target, text).await?;
        match text {
            Some(text) => self.info(&format!(
                "Label set on {}: {}",
                term::line(target.as_str()),
                term::line(text)
            ))?,
            None => self.info(&format!("Label cleared on {}", term::line(target.as_str())))?,
        }
        Ok(())
    }

    // ----- session commands -----------------------------------------------------------------

    async fn name(&mut self, name: Option<&str>) -> Result<()> {
        match name {
            None => match self.session.session_name() {
                Some(current) => self.info(&format!("Session name: {}", term::line(&current)))?,
                None => self.warn("Usage: /name <name>")?,
            },
            Some(name) => {
                self.session.set_session_name(name).await?;
                self.info(&format!("Session name set: {}", term::line(name.trim())))?;
            }
        }
        Ok(())
    }

    async fn session_info(&mut self) -> Result<()> {
        let stats = self.session.stats().await;
        let palette = self.palette();
        let mut lines = vec![palette.bold("Session Info"), String::new()];
        if let Some(name) = self.session.session_name() {
            lines.push(format!("{} {}", palette.dim("Name:"), term::line(&name)));
        }
        let stored = self.session.is_persisted().await;
        let database = if stored {
            self.terminal.database.clone()
        } else {
            format!("{} (not written yet)", self.terminal.database)
        };
        lines.push(format!(
            "{} {}",
            palette.dim("Database:"),
            term::line(&database)
        ));
        lines.push(format!(
            "{} {}",
            palette.dim("ID:"),
            term::line(self.session.session_id().await.as_str())
        ));
        let unsaved = self.session.unsaved_lines().await.len();
        if unsaved > 0 {
            lines.push(format!(
                "{} {unsaved} entr{} kept in memory (written with the next entry; /export FILE.jsonl includes them)",
                palette.dim("Unsaved:"),
                if unsaved == 1 { "y" } else { "ies" }
            ));
        }
        if let Some(reason) = self.session.read_only() {
            lines.push(format!(
                "{} read-only here: {}",
                palette.dim("Writer:"),
                crate::session::agent_session::describe_read_only(&reason)
            ));
        }
        lines.push(String::new());
        lines.push(palette.bold("Messages"));
        lines.push(format!("{} {}", palette.dim("User:"), stats.user_messages));
        lines.push(format!(
            "{} {}",
            palette.dim("Assistant:"),
            stats.assistant_messages
        ));
        lines.push(format!(
            "{} {}",
            palette.dim("Tool Calls:"),
            stats.tool_calls
        ));
        lines.push(format!(
            "{} {}",
            palette.dim("Tool Results:"),
            stats.tool_results
        ));
        lines.push(format!(
            "{} {}",
            palette.dim("Total:"),
            stats.total_messages
        ));
        lines.push(String::new());
        lines.push(palette.bold("Tokens"));
        lines.push(format!(
            "{} {}",
            palette.dim("Input:"),
            thousands(stats.input)
        ));
        lines.push(format!(
            "{} {}",
            palette.dim("Output:"),
            thousands(stats.output)
        ));
        if stats.cache_read > 0 {
            lines.push(format!(
                "{} {}",
                palette.dim("Cache Read:"),
                thousands(stats.cache_read)
            ));
        }
        if stats.cache_write > 0 {
            lines.push(format!(
                "{} {}",
                palette.dim("Cache Write:"),
                thousands(stats.cache_write)
            ));
        }
        let total = stats.input + stats.output + stats.cache_read + stats.cache_write;
        lines.push(format!("{} {}", palette.dim("Total:"), thousands(total)));
        if stats.cost > 0.0 {
            lines.push(String::new());
            lines.push(palette.bold("Cost"));
            lines.push(format!("{} {:.4}", palette.dim("Total:"), stats.cost));
        }
        for line in lines {
            self.out.line(&line)?;
        }
        Ok(())
    }

    /// Switches to a stored session and shows its history.
    async fn switch_to(&mut self, id: SessionId) -> Result<()> {
        if !self.switch_with_choice(id).await? {
            return Ok(());
        }
        self.last_tree.clear();
        self.banner().await?;
        self.explain_read_only().await?;
        Ok(())
    }

    /// The session picker of `/resume` and `-r`: recent sessions of this directory, `all`
    /// for every project, words to search; returns the chosen session.
    async fn pick_session(&mut self, words: Option<&str>) -> Result<Option<SessionId>> {
        // Sessions the reference wrote since the last look are listed too.
        let warnings = {
            let (refresh, store) = (
                self.interchange.refresh.clone(),
                self.session.store().clone(),
            );
            blocking(move || Ok(refresh(&store))).await?
        };
        for warning in &warnings {
            self.warn(warning)?;
        }
        let cwd = self.session.cwd().to_string_lossy().into_owned();
        let mut all = false;
        let mut query = words.map(str::to_owned);
        loop {
            let scope = if all {
                ListScope::All
            } else {
                ListScope::Cwd(cwd.clone())
            };
            let store = self.session.store().clone();
            let listed = match &query {
                None => {
                    let scope = scope.clone();
                    blocking(move || store.list(&scope)).await?
                }
                Some(words) => match Query::parse(words) {
                    Ok(parsed) => {
                        let request = SearchRequest {
                            query: parsed,
                            scope: scope.clone(),
                            session: None,
                            roles: Vec::new(),
                            kinds: Vec::new(),
                            since_ms: None,
                            until_ms: None,
                            model: None,
                            active_only: false,
                            limit: 200,
                            now_ms: chrono::Utc::now().timestamp_millis(),
                            highlight: (String::new(), String::new()),
                            snippet_width: 80,
                        };
                        blocking(move || {
                            let hits = store.search(&request)?;
                            let mut seen: Vec<SessionId> = Vec::new();
                            for hit in hits {
                                if !seen.contains(&hit.session) {
                                    seen.push(hit.session);
                                }
                            }
                            seen.iter()
                                .take(PICKER_SESSIONS)
                                .map(|id| store.session(id))
                                .collect::<Result<Vec<_>, _>>()
                        })
                        .await?
                    }
                    Err(error) => {
                        self.warn(&error.to_string())?;
                        query = None;
                        continue;
                    }
                },
            };
            let shown: Vec<SessionSummary> = listed.into_iter().take(PICKER_SESSIONS).collect();
            let shown_cwd = term::line(&cwd);
            let heading = match (&query, all) {
                (Some(words), true) => format!("Sessions matching {words:?} (all projects):"),
                (Some(words), false) => format!("Sessions matching {words:?} in {shown_cwd}:"),
                (None, true) => "Recent sessions (all projects):".to_owned(),
                (None, false) => format!("Recent sessions in {shown_cwd}:"),
            };
            let heading = self.palette().bold(&heading);
            self.out.line(&heading)?;
            if shown.is_empty() {
                self.info("  (none)")?;
            }
            let width = shown.len().to_string().len();
            for (idx, summary) in shown.iter().enumerate() {
                let line = format!(
                    "{} {}",
                    self.palette().dim(&format!("{:>width$}", idx + 1)),
                    session_row(summary, all)
                );
                self.out.line(&line)?;
            }
            let question = if all {
                "Resume (number or id; words to search; Enter to cancel): "
            } else {
                "Resume (number or id; words to search; `all` for every project; Enter to cancel): "
            };
            let Some(answer) = self.ask(question).await else {
                return Ok(None);
            };
            if answer == "all" {
                all = true;
                continue;
            }
            if let Ok(number) = answer.parse::<usize>()
                && number >= 1
                && number <= shown.len()
            {
                return Ok(Some(shown[number - 1].id.clone()));
            }
            if let Some(summary) = shown
                .iter()
                .find(|summary| summary.id.as_str().starts_with(&answer))
            {
                return Ok(Some(summary.id.clone()));
            }
            let store = self.session.store().clone();
            let prefix = answer.clone();
            if let Ok(id) = blocking(move || store.resolve(&prefix)).await {
                return Ok(Some(id));
            }
            query = Some(answer);
        }
    }

    async fn fork(&mut self) -> Result<()> {
        let messages = self.session.fork_messages().await?;
        if messages.is_empty() {
            self.info("No messages to fork from")?;
            return Ok(());
        }
        let width = messages.len().to_string().len();
        for (idx, (_, text)) in messages.iter().enumerate() {
            let line = format!(
                "{} {}",
                self.palette().dim(&format!("{:>width$}", idx + 1)),
                one_line(text, 100)
            );
            self.out.line(&line)?;
        }
        let Some(answer) = self
            .ask("Fork before which message (number; Enter to cancel): ")
            .await
        else {
            return Ok(());
        };
        let Some((entry, _)) = answer
            .parse::<usize>()
            .ok()
            .filter(|number| *number >= 1 && *number <= messages.len())
            .map(|number| messages[number - 1].clone())
        else {
            self.warn(&format!("No message {answer:?}"))?;
            return Ok(());
        };
        let session = self.session.clone();
        let text = self.with_events(session.fork(&entry), || {}).await??;
        self.last_tree.clear();
        if let Some(text) = text {
            self.initial = text;
        }
        self.info("Forked to new session")?;
        Ok(())
    }

    async fn clone_session(&mut self) -> Result<()> {
        let has_leaf = if self.session.is_persisted().await {
            let id = self.session.session_id().await;
            let store = self.session.store().clone();
            blocking(move || store.leaf(&id)).await?.is_some()
        } else {
            // A session not written yet has no entries in the store to copy.
            false
        };
        if !has_leaf {
            self.info("Nothing to clone yet")?;
            return Ok(());
        }
        let session = self.session.clone();
        self.with_events(session.clone_session(), || {}).await??;
        self.last_tree.clear();
        self.info("Cloned to new session")?;
        Ok(())
    }

    /// `/model [WORDS]`: the models that can be used here (a single match is chosen, several
    /// are numbered to pick from); the ones the words match that cannot be used are named
    /// with why, per provider ([`crate::ai::availability`]).
    async fn model(&mut self, search: Option<&str>) -> Result<()> {
        let classified = self.session.classified_models();
        let matches = |model: &crate::ai::Model| {
            search.is_none_or(|s| model_matches(s, &model.provider, &model.id))
        };
        let unusable: Vec<(&crate::ai::Model, &crate::ai::availability::Unusable)> = classified
            .iter()
            .filter_map(|(model, reason)| reason.as_ref().map(|reason| (model, reason)))
            .filter(|(model, _)| matches(model))
            .collect();
        let models: Vec<crate::ai::Model> = classified
            .iter()
            .filter(|(_, reason)| reason.is_none())
            .map(|(model, _)| model.clone())
            .collect();
        if models.is_empty() {
            let help = setup_help(&self.terminal.agent_dir);
            self.warn(&help)?;
            if search.is_some() {
                self.show_unusable(&unusable, true)?;
            }
            return Ok(());
        }
        let matching: Vec<crate::ai::Model> = match search {
            Some(search) => models
                .into_iter()
                .filter(|model| model_matches(search, &model.provider, &model.id))
                .collect(),
            None => models,
        };
        let chosen = match matching.as_slice() {
            [] => {
                self.warn(&format!(
                    "No available model matches {:?}",
                    search.unwrap_or("")
                ))?;
                self.show_unusable(&unusable, true)?;
                return Ok(());
            }
            [one] if search.is_some() => one.clone(),
            many => {
                let current = self.session.model();
                let width = many.len().to_string().len();
                for (idx, model) in many.iter().enumerate() {
                    let is_current = current
                        .as_ref()
                        .is_some_and(|c| c.provider == model.provider && c.id == model.id);
                    let line = format!(
                        "{} {}{}",
                        self.palette().dim(&format!("{:>width$}", idx + 1)),
                        term::line(&format!("{}/{}", model.provider, model.id)),
                        if is_current { "  ← current" } else { "" }
                    );
                    self.out.line(&line)?;
                }
                if search.is_some() {
                    self.show_unusable(&unusable, true)?;
                } else if !unusable.is_empty() {
                    self.info(&format!(
                        "{} models pi knows cannot be used here (`pi --list-models` says why)",
                        unusable.len()
                    ))?;
                }
                let Some(answer) = self.ask("Model (number; Enter to cancel): ").await else {
                    return Ok(());
                };
                match answer
                    .parse::<usize>()
                    .ok()
                    .filter(|number| *number >= 1 && *number <= many.len())
                {
                    Some(number) => many[number - 1].clone(),
                    None => {
                        self.warn(&format!("No model {answer:?}"))?;
                        return Ok(());
                    }
                }
            }
        };
        let session = self.session.clone();
        self.with_events(session.set_model(chosen.clone()), || {})
            .await??;
        let mut text = format!(
            "Model: {}",
            term::line(&format!("{}/{}", chosen.provider, chosen.id))
        );
        if chosen.reasoning {
            text.push_str(&format!(
                " • thinking {}",
                self.session.thinking_level().as_str()
            ));
        }
        self.info(&text)?;
        Ok(())
    }

    /// Names the models that cannot be used here, per provider and reason.
    fn show_unusable(
        &mut self,
        unusable: &[(&crate::ai::Model, &crate::ai::availability::Unusable)],
        searched: bool,
    ) -> io::Result<()> {
        if unusable.is_empty() {
            return Ok(());
        }
        let mut text = crate::ai::availability::unusable_heading(unusable.len(), searched);
        for line in crate::ai::availability::unusable_lines(unusable) {
            text.push_str("\n  ");
            text.push_str(&line);
        }
        self.info(&text)
    }

    async fn thinking(&mut self, level: Option<&str>) -> Result<()> {
        let available: Vec<&str> = self
            .session
            .available_thinking_levels()
            .into_iter()
            .map(ThinkingLevel::as_str)
            .collect();
        let Some(level) = level else {
            self.info(&format!(
                "Thinking level: {} (available: {})",
                self.session.thinking_level().as_str(),
                available.join(", ")
            ))?;
            return Ok(());
        };
        // The levels it accepts are the levels it lists.
        let Some(parsed) = ThinkingLevel::parse(level) else {
            self.warn(&format!(
                "Unknown thinking level {:?}; available: {}",
                term::line(level),
                available.join(", ")
            ))?;
            return Ok(());
        };
        if !self.session.model().is_some_and(|model| model.reasoning) {
            self.warn("The current model does not support thinking")?;
            return Ok(());
        }
        if !available.contains(&parsed.as_str()) {
            self.warn(&format!(
                "Thinking level {} is not available for this model; available: {}",
                parsed.as_str(),
                available.join(", ")
            ))?;
            return Ok(());
        }
        self.session.set_thinking_level(parsed).await;
        self.info(&format!(
            "Thinking level: {}",
            self.session.thinking_level().as_str()
        ))?;
        Ok(())
    }

    /// Resolves a path typed in a command (`~` and relative to the working directory).
    fn typed_path(&self, typed: &str) -> PathBuf {
        let expanded = match (typed.strip_prefix("~/"), &self.terminal.home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ if typed == "~" => self
                .terminal
                .home
                .clone()
                .unwrap_or_else(|| PathBuf::from(typed)),
            _ => PathBuf::from(typed),
        };
        if expanded.is_absolute() {
            expanded
        } else {
            self.session.cwd().join(expanded)
        }
    }

    /// Where `/export` writes `typed` (or its default name): as the reference writes, relative
    /// to the directory pi was started in (not the session's, which a resumed session from
    /// another project changes).
    fn export_path(&self, typed: &str) -> PathBuf {
        let path = self.typed_path(typed);
        if Path::new(typed).is_absolute() || typed.starts_with('~') {
            return path;
        }
        self.terminal.start_dir.join(typed)
    }

    /// `/export [FILE]`, as the reference's: `FILE.jsonl` is the active branch as a linear
    /// session in a new file (`pi export --jsonl --branch`), `DIR/` (or an existing
    /// directory) the same in a new file of the reference's session-file name, which carries
    /// the new session's id (pi's own addition); any other name, or none, is the
    /// session's HTML page (`modes/html`; by default `pi-session-<session file name>.html`); a
    /// relative name is taken from the directory pi was started in, as 1.6.0 does.
    async fn export(&mut self, path: Option<&str>) -> Result<()> {
        if !self.session.is_persisted().await {
            self.info("Nothing to export yet - start a conversation first")?;
            return Ok(());
        }
        let session = self.session.session_id().await;
        let store = self.session.store().clone();
        let jsonl = path.and_then(|path| {
            let target = self.export_path(path);
            if path.ends_with(".jsonl") {
                Some(ExportTarget::File(target))
            } else if path.ends_with('/') || target.is_dir() {
                Some(ExportTarget::Directory(target))
            } else {
                None
            }
        });
        let written = match jsonl {
            Some(target) => {
                let export = self.interchange.export_branch.clone();
                // Entries the store refused so far go in too: the file is the branch once saved.
                let unsaved = self.session.unsaved_lines().await;
                tokio::task::spawn_blocking(move || export(&store, &session, &unsaved, &target))
                    .await
                    .context("the export task failed")?
            }
            _ => {
                let target = match path {
                    Some(path) => self.export_path(path),
                    None => {
                        let reader = store.clone();
                        let id = session.clone();
                        let summary = blocking(move || reader.session(&id)).await?;
                        self.export_path(&crate::modes::html::default_file_name(&summary))
                    }
                };
                let file = target.clone();
                tokio::task::spawn_blocking(move || {
                    crate::modes::html::write_session_file(&store, &session, &file)
                })
                .await
                .context("the export task failed")?
                .map(|()| target)
                .map_err(anyhow::Error::from)
            }
        };
        match written {
            Ok(target) => self.info(&format!("Session exported to: {}", target.display()))?,
            Err(error) => self.error(&format!(
                "Failed to export session: {}",
                term::error_line(error.chain())
            ))?,
        }
        Ok(())
    }

    /// `/import FILE`: import a JSONL session (as `pi import` does) and switch to it.
    async fn import(&mut self, path: Option<&str>) -> Result<()> {
        let Some(path) = path else {
            self.warn("Usage: /import <path.jsonl>")?;
            return Ok(());
        };
        let file = self.typed_path(path);
        let answer = self
            .ask(&format!("Replace the current session with {path}? [y/N] "))
            .await;
        if !matches!(answer.as_deref(), Some("y" | "Y" | "yes")) {
            self.info("Import cancelled")?;
            return Ok(());
        }
        let import = self.interchange.import.clone();
        let store = self.session.store().clone();
        let imported = tokio::task::spawn_blocking(move || import(&store, &file))
            .await
            .context("the import task failed")?;
        let imported = match imported {
            Ok(imported) => imported,
            Err(error) => {
                self.error(&format!(
                    "Failed to import session: {}",
                    term::error_line(error.chain())
                ))?;
                return Ok(());
            }
        };
        match imported.session {
            None => self.error(&imported.summary)?,
            Some(id) => {
                self.info(&imported.summary)?;
                self.switch_to(id).await?;
                self.info(&format!("Session imported from: {path}"))?;
            }
        }
        Ok(())
    }

    /// `/trust`: the folder, its saved decision and this session's, then the answers (1.6.0's
    /// trust selector, without the "this session only" ones); the choice is saved for the
    /// next start.
    async fn trust(&mut self) -> Result<()> {
        let Some(trust) = self.session.project_trust().cloned() else {
            return Ok(self.warn("Project trust is not in use in this run.")?);
        };
        let cwd = self.session.cwd();
        let saved = {
            let (store, cwd) = (trust.store.clone(), cwd.clone());
            tokio::task::spawn_blocking(move || store.get_entry(&cwd))
                .await
                .context("a trust store task failed")?
        };
        let saved = match saved {
            Ok(saved) => saved,
            Err(error) => return Ok(self.error(&error.to_string())?),
        };
        let options = trust::trust_options(&cwd, false);
        let own = trust::trust_path(&cwd);
        let saved_text = match &saved {
            None => "none".to_owned(),
            Some(entry) => {
                let label = if entry.decision {
                    "trusted"
                } else {
                    "untrusted"
                };
                if std::path::Path::new(&entry.path) == own {
                    format!("{label} ({})", entry.path)
                } else {
                    format!("{label} (inherited from {})", entry.path)
                }
            }
        };
        let current = if self.session.project_is_trusted() {
            "trusted"
        } else {
            "untrusted"
        };
        self.out.line("Project trust")?;
        self.out.line(&term::line(&cwd.display().to_string()))?;
        self.info(&format!("Saved decision: {saved_text}"))?;
        self.info(&format!("Current session: {current}"))?;
        for (index, option) in options.iter().enumerate() {
            let mark = match &saved {
                Some(entry)
                    if entry.decision == option.trusted
                        && option
                            .saved_path
                            .as_deref()
                            .is_some_and(|path| path == std::path::Path::new(&entry.path)) =>
                {
                    "✓ "
                }
                _ => "  ",
            };
            self.out.line(&format!(
                "  {}. {mark}{}",
                index + 1,
                term::line(&option.label)
            ))?;
        }
        let question = format!("Choose 1-{} (Enter: cancel): ", options.len());
        let Some(answer) = self.ask(&question).await else {
            return Ok(());
        };
        let Some(option) = answer
            .parse::<usize>()
            .ok()
            .and_then(|number| number.checked_sub(1))
            .and_then(|index| options.get(index))
            .cloned()
        else {
            return Ok(self.warn(&format!("No answer {answer}: nothing saved."))?);
        };
        let store = trust.store.clone();
        let updates = option.updates.clone();
        let saved = tokio::task::spawn_blocking(move || store.set_many(&updates))
            .await
            .context("a trust store task failed")?;
        match saved {
            Ok(()) => Ok(self.info(&format!(
                "Saved trust decision: {}. Restart pi for this to take effect.",
                if option.trusted {
                    "trusted"
                } else {
                    "untrusted"
                }
            ))?),
            Err(error) => Ok(self.error(&error.to_string())?),
        }
    }

    async fn reload(&mut self) -> Result<()> {
        if self.session.is_streaming() {
            return Ok(self.warn("Wait for the current response to finish before reloading.")?);
        }
        let session = self.session.clone();
        self.with_events(session.reload(), || {}).await?;
        self.refresh_commands();
        self.keymap = keys::Keymap::load(&self.terminal.agent_dir);
        self.editor.set_keys(self.keymap.events());
        for warning in self.keymap.warnings.clone() {
            self.warn(&warning)?;
        }
        if self.palette().color() {
            // The theme files again: the current theme by its name, as the files now say.
            let mut config = self.terminal.theme.clone();
            config.setting = Some(self.palette().theme().name().to_owned());
            let (themes, theme, problems) = config.load();
            self.themes = themes;
            self.out.set_palette(Palette::themed(true, Arc::new(theme)));
            for problem in problems {
                self.warn(&format!("Warning: theme: {problem}"))?;
            }
        }
        let diagnostics: Vec<String> = match self.session.resources().lock() {
            Ok(resources) => resources
                .diagnostics()
                .iter()
                .map(ToString::to_string)
                .collect(),
            Err(_) => Vec::new(),
        };
        for diagnostic in diagnostics {
            self.warn(&format!("Warning: {diagnostic}"))?;
        }
        Ok(self.info(
            "Reloaded keybindings, extensions, skills, prompt templates, themes and context files",
        )?)
    }
}

#[cfg(test)]
mod fold_tests {
    use super::*;

    fn fold(chunks: &[&str]) -> (String, Fold) {
        let mut fold = Fold::default();
        let mut shown = String::new();
        for chunk in chunks {
            shown.push_str(&fold.take(chunk));
        }
        fold.finish();
        (shown, fold)
    }

    #[test]
    fn long_output_streams_its_head_and_keeps_its_tail() {
        let text: String = (1..=300).map(|n| format!("{n}\n")).collect();
        // Split anywhere: the same result.
        let (a, b) = text.split_at(777);
        let (shown, folded) = fold(&[a, b]);
        let expected: String = (1..=20).map(|n| format!("{n}\n")).collect();
        assert_eq!(shown, expected);
        assert_eq!(folded.hidden, 275);
        assert_eq!(Vec::from(folded.tail), ["296", "297", "298", "299", "300"]);
    }

    #[test]
    fn short_output_and_a_last_line_without_newline() {
        let (shown, folded) = fold(&["a\nb"]);
        assert_eq!(shown, "a\nb");
        assert!(!folded.at_line_start);
        assert_eq!((folded.hidden, folded.tail.len()), (0, 0));
        let text: String = (1..=22).map(|n| format!("{n}\n")).collect();
        let (_, folded) = fold(&[&text, "tail"]);
        assert_eq!(folded.hidden, 0);
        assert_eq!(Vec::from(folded.tail), ["21", "22", "tail"]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_get_thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1234), "1,234");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    fn stored(seq: i64, id: &str) -> StoredEntry {
        let line = format!(
            r#"{{"type":"custom","id":"{id}","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","customType":"x"}}"#
        );
        StoredEntry {
            seq,
            entry: Entry::parse(line.as_bytes()).unwrap(),
            payload: line.into_bytes(),
        }
    }

    #[test]
    fn picker_answers_resolve_row_numbers_and_id_prefixes() {
        let entries = vec![
            stored(0, "ab12cd34"),
            stored(1, "ab99ef00"),
            stored(2, "ff000001"),
        ];
        let rows = vec![Some(EntryId::new("ff000001")), None];
        assert_eq!(
            resolve_entry("1", &rows, &entries),
            Ok(EntryId::new("ff000001"))
        );
        assert!(
            resolve_entry("2", &rows, &entries).is_err(),
            "a row without an id"
        );
        assert_eq!(
            resolve_entry("ab1", &rows, &entries),
            Ok(EntryId::new("ab12cd34"))
        );
        let ambiguous = resolve_entry("ab", &rows, &entries).unwrap_err();
        assert!(ambiguous.contains("matches 2 entries"), "{ambiguous}");
        assert!(resolve_entry("zz", &rows, &entries).is_err());
        // A number beyond the rows is read as an id prefix.
        assert!(resolve_entry("7", &rows, &entries).is_err());
    }

    #[test]
    fn times_are_shortened_to_minutes() {
        assert_eq!(short_time("2026-01-01T10:00:05.000Z"), "2026-01-01 10:00");
        assert_eq!(one_line("a\n  b   c", 4), "a b …");
    }

    #[test]
    fn model_searches_match_ids_and_subsequences() {
        assert!(model_matches("mock/mock-model", "mock", "mock-model"));
        assert!(model_matches("mmod", "mock", "mock-model"));
        assert!(model_matches("sonnet 4", "anthropic", "claude-sonnet-4-5"));
        assert!(!model_matches("gpt", "anthropic", "claude-sonnet-4-5"));
    }
}
