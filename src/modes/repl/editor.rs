//! The line editor: rustyline on its own thread (it blocks on the terminal), asked for one
//! line at a time over a channel and answering on a tokio channel, so the async side never
//! blocks (STYLE rule 10). It keeps the input history in a file of the agent dir, completes
//! slash commands (built-ins, prompt templates, `skill:` names) and file paths (also after
//! `@`), takes multi-line input (a line ending in `\`, Alt+Enter, or a bracketed paste), and
//! turns Ctrl+C on a non-empty line into "clear the line" so that only Ctrl+C on an empty
//! line reaches the REPL.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::keys::KeyAction;
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::{FileHistory, History};
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{
    Cmd, CompletionType, ConditionalEventHandler, Config, Editor, Event, EventContext,
    EventHandler, KeyCode, KeyEvent, Modifiers, Movement, RepeatCount,
};

/// What the editor returned for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// A submitted line (continuation backslashes removed).
    Line(String),
    /// Ctrl+C on an empty line.
    Interrupted,
    /// Ctrl+D on an empty line, or the end of input.
    Eof,
    /// Esc twice on an empty line.
    DoubleEscape,
    /// An application key (`keys.rs`) at the main prompt, with the line as it was (not
    /// submitted: the REPL acts, then offers the line again).
    Action {
        /// What the key does.
        action: KeyAction,
        /// The line being edited.
        line: String,
    },
    /// The terminal could not be read.
    Failed(String),
}

/// How the editor is set up.
#[derive(Clone, Debug)]
pub struct EditorConfig {
    /// The history file (`None`: history in memory only).
    pub history_path: Option<PathBuf>,
    /// The directory file paths complete against; the REPL updates it when the session's
    /// working directory changes (a resumed session from another project).
    pub cwd: Arc<Mutex<PathBuf>>,
    /// Slash command names (without `/`) offered for completion; the REPL updates them on
    /// `/reload`.
    pub commands: Arc<Mutex<Vec<String>>>,
    /// Whether the prompt may be coloured.
    pub color: bool,
    /// The application keys (`keys.rs`) bound at the start.
    pub keys: Vec<(KeyEvent, KeyAction)>,
}

struct Request {
    prompt: String,
    initial: String,
    history: bool,
    /// Shown as `*`s, kept out of the history (an API key).
    secret: bool,
    /// The application keys act (the main prompt); elsewhere they are the editor's keys.
    actions: bool,
    /// New application keys, bound before this read (`/reload`).
    keys: Option<Vec<(KeyEvent, KeyAction)>>,
}

/// The editor thread's handle.
pub struct LineEditor {
    requests: Option<std::sync::mpsc::Sender<Request>>,
    replies: tokio::sync::mpsc::UnboundedReceiver<Result<Reply, String>>,
    thread: Option<JoinHandle<()>>,
    color: bool,
    /// Application keys to bind before the next read.
    pending_keys: Option<Vec<(KeyEvent, KeyAction)>>,
}

impl LineEditor {
    /// Starts the editor thread.
    pub fn start(config: EditorConfig) -> std::io::Result<Self> {
        let (request_tx, request_rx) = std::sync::mpsc::channel::<Request>();
        let (reply_tx, reply_rx) = tokio::sync::mpsc::unbounded_channel();
        let color = config.color;
        let thread = std::thread::Builder::new()
            .name("pi-line-editor".to_owned())
            .spawn(move || editor_thread(config, request_rx, reply_tx))?;
        Ok(Self {
            requests: Some(request_tx),
            replies: reply_rx,
            thread: Some(thread),
            color,
            pending_keys: None,
        })
    }

    /// Binds new application keys (from the next read on), replacing the ones bound.
    pub fn set_keys(&mut self, keys: Vec<(KeyEvent, KeyAction)>) {
        self.pending_keys = Some(keys);
    }

    /// Reads one line with `prompt`, the editor pre-filled with `initial`; the line goes to
    /// the history when `history` is set.
    ///
    /// Both are shown with their control characters escaped (`support::term`): a prompt can
    /// quote an extension or a file, and the pre-filled text is a stored message.
    pub async fn read(&mut self, prompt: &str, initial: &str, history: bool) -> Reply {
        let prompt = crate::support::term::line(prompt);
        let prompt = if self.color {
            format!("\x1b[1;36m{prompt}\x1b[0m")
        } else {
            prompt.into_owned()
        };
        let request = Request {
            prompt,
            initial: crate::support::term::text(initial).into_owned(),
            history,
            secret: false,
            // The main prompt (the only one with history) is where application keys act.
            actions: history,
            keys: self.pending_keys.take(),
        };
        let sent = self
            .requests
            .as_ref()
            .is_some_and(|requests| requests.send(request).is_ok());
        if !sent {
            return Reply::Failed("the line editor stopped".to_owned());
        }
        match self.replies.recv().await {
            Some(Ok(reply)) => reply,
            Some(Err(error)) => Reply::Failed(error),
            None => Reply::Failed("the line editor stopped".to_owned()),
        }
    }
}

impl LineEditor {
    /// Reads a line shown as `*`s and kept out of the history (an API key typed at `/login`).
    pub async fn read_secret(&mut self, prompt: &str) -> Reply {
        let request = Request {
            prompt: crate::support::term::line(prompt).into_owned(),
            initial: String::new(),
            history: false,
            secret: true,
            actions: false,
            keys: self.pending_keys.take(),
        };
        let sent = self
            .requests
            .as_ref()
            .is_some_and(|requests| requests.send(request).is_ok());
        if !sent {
            return Reply::Failed("the line editor stopped".to_owned());
        }
        match self.replies.recv().await {
            Some(Ok(reply)) => reply,
            Some(Err(error)) => Reply::Failed(error),
            None => Reply::Failed("the line editor stopped".to_owned()),
        }
    }

    /// Lets the editor thread go without waiting for it (it may be blocked reading the
    /// terminal); for an exit on a signal, where the process ends next.
    pub fn detach(&mut self) {
        self.requests = None;
        self.thread = None;
    }
}

impl Drop for LineEditor {
    fn drop(&mut self) {
        // Closing the request channel ends the thread's loop (it is idle between requests).
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Ctrl+C: clear a non-empty line; on an empty one, interrupt (the REPL decides).
struct CtrlC;

impl ConditionalEventHandler for CtrlC {
    fn handle(
        &self,
        _event: &Event,
        _n: RepeatCount,
        _positive: bool,
        ctx: &EventContext,
    ) -> Option<Cmd> {
        if ctx.line().is_empty() {
            None
        } else {
            Some(Cmd::Kill(Movement::WholeBuffer))
        }
    }
}

/// How soon a second Esc must follow the first to count as a double press.
const DOUBLE_ESCAPE: std::time::Duration = std::time::Duration::from_millis(500);

/// How long the editor waits, after ESC, for the rest of a key's sequence before taking it as
/// Esc alone (without a bound ESC waited for the next key and made it Alt+key: Esc then `/`
/// lost the `/`).
const KEYSEQ_TIMEOUT_MS: u16 = 50;

/// Esc: nothing on a line with text (it is kept); twice on an empty line, the REPL's
/// double-Esc action (the line is accepted empty with `double` set).
struct Esc {
    last: Mutex<Option<std::time::Instant>>,
    double: Arc<std::sync::atomic::AtomicBool>,
}

impl ConditionalEventHandler for Esc {
    fn handle(
        &self,
        _event: &Event,
        _n: RepeatCount,
        _positive: bool,
        ctx: &EventContext,
    ) -> Option<Cmd> {
        let mut last = match self.last.lock() {
            Ok(last) => last,
            Err(poisoned) => poisoned.into_inner(),
        };
        if !ctx.line().is_empty() {
            *last = None;
            return Some(Cmd::Noop);
        }
        let now = std::time::Instant::now();
        match last.take() {
            Some(first) if now.duration_since(first) <= DOUBLE_ESCAPE => {
                self.double.store(true, std::sync::atomic::Ordering::SeqCst);
                Some(Cmd::AcceptLine)
            }
            _ => {
                *last = Some(now);
                Some(Cmd::Noop)
            }
        }
    }
}

/// An application key: at the main prompt the line is accepted with the key's action noted
/// (the REPL acts and offers the line again); elsewhere the key does what the editor does.
struct ActionKey {
    action: KeyAction,
    /// Whether application keys act in the current read.
    enabled: Arc<std::sync::atomic::AtomicBool>,
    /// The action of the key that ended the read.
    pressed: Arc<Mutex<Option<KeyAction>>>,
}

impl ConditionalEventHandler for ActionKey {
    fn handle(
        &self,
        _event: &Event,
        _n: RepeatCount,
        _positive: bool,
        _ctx: &EventContext,
    ) -> Option<Cmd> {
        if !self.enabled.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        match self.pressed.lock() {
            Ok(mut pressed) => *pressed = Some(self.action),
            Err(poisoned) => *poisoned.into_inner() = Some(self.action),
        }
        Some(Cmd::AcceptLine)
    }
}

/// Completion and multi-line validation.
struct Helper {
    commands: Arc<Mutex<Vec<String>>>,
    cwd: Arc<Mutex<PathBuf>>,
    /// The line being read is a secret: drawn as `*`s.
    masked: Arc<std::sync::atomic::AtomicBool>,
    /// An application key ended the read: the line is taken as it is (not continued).
    pressed: Arc<Mutex<Option<KeyAction>>>,
}

impl Completer for Helper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let commands = match self.commands.lock() {
            Ok(commands) => commands.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let cwd = match self.cwd.lock() {
            Ok(cwd) => cwd.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let (start, candidates) = complete(line, pos, &commands, &cwd);
        Ok((
            start,
            candidates
                .into_iter()
                .map(|candidate| Pair {
                    display: candidate.display,
                    replacement: candidate.replacement,
                })
                .collect(),
        ))
    }
}

impl Hinter for Helper {
    type Hint = String;
}

impl Highlighter for Helper {
    fn highlight<'l>(&self, line: &'l str, _pos: usize) -> Cow<'l, str> {
        if self.masked.load(std::sync::atomic::Ordering::SeqCst) {
            Cow::Owned("*".repeat(line.chars().count()))
        } else {
            Cow::Borrowed(line)
        }
    }

    fn highlight_char(
        &self,
        _line: &str,
        _pos: usize,
        _kind: rustyline::highlight::CmdKind,
    ) -> bool {
        self.masked.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(
        &'s self,
        prompt: &'p str,
        _default: bool,
    ) -> Cow<'b, str> {
        Cow::Borrowed(prompt)
    }
}

impl Validator for Helper {
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        let pressed = match self.pressed.lock() {
            Ok(pressed) => pressed.is_some(),
            Err(poisoned) => poisoned.into_inner().is_some(),
        };
        if !pressed && ctx.input().ends_with('\\') {
            Ok(ValidationResult::Incomplete)
        } else {
            Ok(ValidationResult::Valid(None))
        }
    }
}

impl rustyline::Helper for Helper {}

/// Joins lines continued with a trailing backslash.
pub fn join_continuations(line: &str) -> String {
    line.replace("\\\n", "\n")
}

fn editor_thread(
    config: EditorConfig,
    requests: std::sync::mpsc::Receiver<Request>,
    replies: tokio::sync::mpsc::UnboundedSender<Result<Reply, String>>,
) {
    let editor_config = Config::builder()
        .max_history_size(2000)
        .and_then(|builder| builder.history_ignore_dups(true))
        .map(|builder| {
            builder
                .history_ignore_space(true)
                .auto_add_history(false)
                .completion_type(CompletionType::List)
                .bracketed_paste(true)
                .keyseq_timeout(Some(KEYSEQ_TIMEOUT_MS))
                .build()
        });
    let editor_config = match editor_config {
        Ok(config) => config,
        Err(error) => {
            let _ = replies.send(Err(error.to_string()));
            return;
        }
    };
    let mut editor: Editor<Helper, FileHistory> = match Editor::with_config(editor_config) {
        Ok(editor) => editor,
        Err(error) => {
            let _ = replies.send(Err(error.to_string()));
            return;
        }
    };
    let masked = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pressed: Arc<Mutex<Option<KeyAction>>> = Arc::new(Mutex::new(None));
    let actions_enabled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    editor.set_helper(Some(Helper {
        commands: config.commands.clone(),
        cwd: config.cwd.clone(),
        masked: masked.clone(),
        pressed: pressed.clone(),
    }));
    let mut bound: Vec<KeyEvent> = Vec::new();
    let mut bind_keys = |editor: &mut Editor<Helper, FileHistory>,
                         keys: Vec<(KeyEvent, KeyAction)>| {
        for event in bound.drain(..) {
            editor.unbind_sequence(event);
        }
        for (event, action) in keys {
            editor.bind_sequence(
                event,
                EventHandler::Conditional(Box::new(ActionKey {
                    action,
                    enabled: actions_enabled.clone(),
                    pressed: pressed.clone(),
                })),
            );
            bound.push(event);
        }
    };
    bind_keys(&mut editor, config.keys.clone());
    editor.bind_sequence(
        KeyEvent::ctrl('C'),
        EventHandler::Conditional(Box::new(CtrlC)),
    );
    editor.bind_sequence(
        KeyEvent(KeyCode::Enter, Modifiers::ALT),
        EventHandler::Simple(Cmd::Newline),
    );
    let double = Arc::new(std::sync::atomic::AtomicBool::new(false));
    editor.bind_sequence(
        KeyEvent(KeyCode::Esc, Modifiers::NONE),
        EventHandler::Conditional(Box::new(Esc {
            last: Mutex::new(None),
            double: double.clone(),
        })),
    );
    let history_path = config.history_path.filter(|path| prepare_history(path));
    if let Some(path) = &history_path {
        // A missing or unreadable history starts empty.
        let _ = editor.load_history(path);
    }
    while let Ok(request) = requests.recv() {
        if let Some(keys) = request.keys.clone() {
            bind_keys(&mut editor, keys);
        }
        masked.store(request.secret, std::sync::atomic::Ordering::SeqCst);
        actions_enabled.store(request.actions, std::sync::atomic::Ordering::SeqCst);
        let result = editor.readline_with_initial(&request.prompt, (&request.initial, ""));
        masked.store(false, std::sync::atomic::Ordering::SeqCst);
        actions_enabled.store(false, std::sync::atomic::Ordering::SeqCst);
        let action = match pressed.lock() {
            Ok(mut pressed) => pressed.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        let reply = match (result, action) {
            (Ok(line), Some(action)) => Ok(Reply::Action { action, line }),
            (result, _) => reply_of(
                result,
                &request,
                &double,
                &mut editor,
                history_path.as_deref(),
            ),
        };
        if replies.send(reply).is_err() {
            break;
        }
    }
}

/// The reply for a read that no application key ended.
fn reply_of(
    result: rustyline::Result<String>,
    request: &Request,
    double: &std::sync::atomic::AtomicBool,
    editor: &mut Editor<Helper, FileHistory>,
    history_path: Option<&Path>,
) -> Result<Reply, String> {
    match result {
        Ok(_) if double.swap(false, std::sync::atomic::Ordering::SeqCst) => Ok(Reply::DoubleEscape),
        Ok(line) => {
            let line = join_continuations(&line);
            if request.history && !line.trim().is_empty() {
                let added = editor.add_history_entry(line.as_str()).unwrap_or(false);
                if added && let Some(path) = history_path {
                    // A history that cannot be written is not worth stopping for.
                    let _ = editor.history_mut().append(path);
                }
            }
            Ok(Reply::Line(line))
        }
        Err(ReadlineError::Interrupted) => Ok(Reply::Interrupted),
        Err(ReadlineError::Eof) => Ok(Reply::Eof),
        Err(error) => Err(error.to_string()),
    }
}

/// Makes sure the history file can be used: its directory exists (it is the agent dir, which
/// is not created just for the history) and the file is private to the user.
fn prepare_history(path: &Path) -> bool {
    let Some(dir) = path.parent() else {
        return false;
    };
    if !dir.is_dir() {
        return false;
    }
    if !path.exists() {
        use std::os::unix::fs::OpenOptionsExt;
        return std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .is_ok();
    }
    true
}

/// A completion candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Shown in the list.
    pub display: String,
    /// Put in the line.
    pub replacement: String,
}

/// Completes the word before `pos`: a slash command as the first word, else a file path
/// (after an optional `@`) relative to `cwd`. Returns the start of the replaced text.
pub fn complete(
    line: &str,
    pos: usize,
    commands: &[String],
    cwd: &Path,
) -> (usize, Vec<Candidate>) {
    let pos = pos.min(line.len());
    let before = &line[..pos];
    if let Some(partial) = before.strip_prefix('/')
        && !partial.contains(char::is_whitespace)
    {
        let mut out: Vec<Candidate> = commands
            .iter()
            .filter(|name| name.starts_with(partial))
            .map(|name| Candidate {
                display: format!("/{name}"),
                replacement: format!("/{name}"),
            })
            .collect();
        out.dedup();
        return (0, out);
    }
    let start = before.rfind(char::is_whitespace).map_or(0, |idx| {
        idx + before[idx..].chars().next().map_or(1, char::len_utf8)
    });
    let word = &before[start..];
    let (at, path) = match word.strip_prefix('@') {
        Some(path) => ("@", path),
        None => ("", word),
    };
    if path.is_empty() && at.is_empty() {
        return (pos, Vec::new());
    }
    (start, complete_path(at, path, cwd))
}

fn complete_path(at: &str, typed: &str, cwd: &Path) -> Vec<Candidate> {
    let (dir_part, prefix) = match typed.rfind('/') {
        Some(idx) => (&typed[..=idx], &typed[idx + 1..]),
        None => ("", typed),
    };
    let dir = if dir_part.starts_with('/') {
        PathBuf::from(dir_part)
    } else {
        cwd.join(dir_part)
    };
    let Ok(read) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut names: Vec<(String, bool)> = read
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            if !name.starts_with(prefix) || (name.starts_with('.') && !prefix.starts_with('.')) {
                return None;
            }
            let is_dir = entry.path().is_dir();
            Some((name, is_dir))
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|(name, is_dir)| {
            let slash = if is_dir { "/" } else { "" };
            Candidate {
                display: format!("{name}{slash}"),
                replacement: format!("{at}{dir_part}{name}{slash}"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(candidates: &[Candidate]) -> Vec<&str> {
        candidates
            .iter()
            .map(|candidate| candidate.replacement.as_str())
            .collect()
    }

    #[test]
    fn slash_commands_complete_as_the_first_word() {
        let commands: Vec<String> = ["tree", "thinking", "skill:pdf", "review"]
            .iter()
            .map(|name| (*name).to_owned())
            .collect();
        let (start, found) = complete("/t", 2, &commands, Path::new("/"));
        assert_eq!(start, 0);
        assert_eq!(names(&found), ["/tree", "/thinking"]);
        let (_, found) = complete("/sk", 3, &commands, Path::new("/"));
        assert_eq!(names(&found), ["/skill:pdf"]);
    }

    #[test]
    fn paths_complete_relative_to_the_working_directory_and_after_an_at() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/main.rs"), "").unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "").unwrap();
        std::fs::write(dir.path().join(".hidden"), "").unwrap();
        std::fs::write(dir.path().join("README.md"), "").unwrap();
        let line = "look at @sr";
        let (start, found) = complete(line, line.len(), &[], dir.path());
        assert_eq!(start, 8);
        assert_eq!(names(&found), ["@src/"]);
        let line = "read src/m";
        let (start, found) = complete(line, line.len(), &[], dir.path());
        assert_eq!(start, 5);
        assert_eq!(names(&found), ["src/main.rs"]);
        let (_, found) = complete("/export ", 8, &[], dir.path());
        assert!(found.is_empty(), "an empty word completes nothing");
        let (_, found) = complete("x @", 3, &[], dir.path());
        assert_eq!(names(&found), ["@README.md", "@src/"]);
    }

    #[test]
    fn continued_lines_lose_their_backslashes() {
        assert_eq!(join_continuations("one\\\ntwo"), "one\ntwo");
        assert_eq!(join_continuations("a \\ b"), "a \\ b");
    }
}
