//! RPC mode (`pi --mode rpc`): the reference's headless protocol over stdin/stdout
//! (spec extensions-and-modes §8), so that clients written for the reference — its own
//! `RpcClient` included — drive pi unchanged.
//!
//! # The line protocol
//!
//! Both directions are strict JSON Lines: one JSON value per record, records separated by LF
//! only (a `\r` before it is dropped; U+2028/U+2029 inside strings are not separators, see
//! [`framing`]). stdout carries protocol records only; diagnostics go to stderr.
//!
//! * **Commands** (stdin) are objects with a `type` and an optional `id`.
//! * **Responses** (stdout): exactly one per command,
//!   `{"id"?, "type":"response", "command":<type>, "success":true, "data"?}` or
//!   `{"id"?, "type":"response", "command":<type>, "success":false, "error":<text>}`; `id`
//!   echoes the command's `id` when it had one. An unknown `type` is answered without `id`;
//!   a line that is not JSON (or not an object) gets `command: "parse"`. The process keeps
//!   running after any error.
//! * **Events** (stdout): every session event (§6: `agent_start` … `agent_end`,
//!   `agent_settled`, `queue_update`, `auto_retry_*`, `compaction_*`,
//!   `thinking_level_changed`, `session_info_changed`) as one record, without `id`, in
//!   1.6.0's shapes (`docs/json.md` of the reference): `message_update` is delta-only
//!   (`{type, usage, assistantMessageEvent}`, no cumulative message, no `partial`), and
//!   `agent_settled` (`{aborted}`) follows the last `agent_end` (`{messages, willRetry}`)
//!   of a run once nothing (retry, compaction recovery, queued message) continues it. A `bash` command streams
//!   `bash_execution_update` (`{id?, delta}`) records. An event emitted before a command
//!   finished is written before that command's response.
//! * **Entries** (1.6.0): `get_entries` answers `{entries, leafId}` (every entry in append
//!   order, or those after the `since` id; an unknown id is an error), `get_tree`
//!   `{tree, leafId}` with `{entry, children, label?, labelTimestamp?}` nodes.
//! * **Dispositions** (1.6.0): `prompt` answers `data: {disposition}` — `"started"` (a run
//!   starts), `"queued"` (steering / follow-up behind the running turn) or `"handled"` (an
//!   extension command or `input` handler consumed it: no run, no `agent_settled` to wait
//!   for); `steer` and `follow_up` answer `"queued"`.
//! * **Extension UI**: `extension_ui_request` records and `extension_ui_response` replies
//!   ([`ui`]).
//!
//! A worked exchange (`→` stdin, `←` stdout; message objects shortened):
//!
//! ```text
//! → {"id":"1","type":"get_state"}
//! ← {"id":"1","type":"response","command":"get_state","success":true,"data":{"model":{…},"thinkingLevel":"off","isStreaming":false,"isCompacting":false,"steeringMode":"one-at-a-time","followUpMode":"one-at-a-time","sessionFile":"/home/me/.pi/agent/pi.db#019b…","sessionId":"019b…","autoCompactionEnabled":true,"messageCount":0,"pendingMessageCount":0}}
//! → {"id":"2","type":"prompt","message":"Hi"}
//! ← {"id":"2","type":"response","command":"prompt","success":true,"data":{"disposition":"started"}}
//! ← {"type":"agent_start"}
//! ← {"type":"turn_start"}
//! ← {"type":"message_start","message":{"role":"user",…}}
//! ← …message_update…message_end…turn_end…
//! ← {"type":"agent_end","messages":[…]}
//! ← {"type":"agent_settled","aborted":false}
//! → {"id":"3","type":"prompt","message":"Again"}            (while streaming)
//! ← {"id":"3","type":"response","command":"prompt","success":false,"error":"Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."}
//! → {"id":"4","type":"nope"}
//! ← {"id":"4","type":"response","command":"nope","success":false,"error":"Unknown command: nope"}
//! → not json
//! ← {"type":"response","command":"parse","success":false,"error":"Failed to parse command: expected ident at line 1 column 2"}
//! ```
//!
//! Where the reference reports a session file (`sessionFile` of `get_state` and
//! `get_session_stats`), pi reports `<database path>#<session id>`; with `--no-session` the
//! field is absent, as the reference omits it. `switch_session` takes such a
//! `<database path>#<session id>` of its own database, a session id, a unique
//! prefix, or a reference JSONL file (a path: it contains `/` or ends in `.jsonl`), which is
//! imported first exactly as `pi import` imports it.
//!
//! # Ordering and concurrency
//!
//! Commands run one after the other in arrival order, so a command sees the effects of the
//! ones before it; a `prompt` is answered once the session accepted it (it is then streaming
//! or queued), and its run continues in the background. The long commands — the run of a
//! prompt, `bash`, `compact` and the wait of `abort` — run as tasks and answer when they
//! finish.
//! `abort`, `abort_retry`, `abort_bash` and `extension_ui_response` lines act at once, even
//! while an earlier command waits. Commands that replace the session (`new_session`,
//! `switch_session`, `fork`, `clone`) first abort a running turn and wait for it to end (the
//! reference leaves the old run going in the background; here one handle owns the session).
//!
//! End of stdin: pi finishes what is in flight (a running prompt included), then exits 0.
//! SIGTERM / SIGHUP abort the turn and a running `bash`, then exit 143 / 129.

pub mod framing;
pub mod ui;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::ai::ThinkingLevel;
use crate::jsonl::SessionReader;
use crate::model::ids::EntryId;
use crate::model::message::{AgentMessage, ContentBlock, ImageContent, StopReason};
use crate::modes::Prepared;
use crate::session::compaction::{self, ContextUsage};
use crate::session::extensions::discovery::ExtensionOrigin;
use crate::session::resources::{ResourceConfig, ResourceOrigin};
use crate::session::{
    AgentSession, PromptDisposition, PromptOptions, PromptSource, QueueMode, SessionEvent,
    StreamingBehavior,
};
use crate::store::{ImportMode, ImportOptions, ImportReport, SessionStore};

pub use crate::session::extensions::WidgetPlacement;
pub use framing::{LineSplitter, serialize_record};
pub use ui::{DialogOptions, RpcUi};

/// What a command handler returns: the response `data` (`None` for none), or the error text.
type Outcome = Result<Option<Value>, String>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Builds a response record.
fn response(id: Option<&Value>, command: Option<&Value>, outcome: Outcome) -> Value {
    let mut record = Map::new();
    if let Some(id) = id {
        record.insert("id".into(), id.clone());
    }
    record.insert("type".into(), Value::from("response"));
    if let Some(command) = command {
        record.insert("command".into(), command.clone());
    }
    match outcome {
        Ok(data) => {
            record.insert("success".into(), Value::from(true));
            if let Some(data) = data {
                record.insert("data".into(), data);
            }
        }
        Err(error) => {
            record.insert("success".into(), Value::from(false));
            record.insert("error".into(), Value::from(error));
        }
    }
    Value::Object(record)
}

/// Returns a record or `data` as JSON. Every map key is a string, so this cannot fail.
///
/// Only for shallow values: `Serialize` into a `Value` copies (recursively) what the value
/// holds, so the entries of `get_entries`/`get_tree` and a response's `data` are put together
/// as maps instead.
fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// A `bash_execution_update` record: one chunk of a `bash` command's output.
#[derive(Serialize)]
struct BashUpdate<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a Value>,
    delta: &'a str,
}

/// The `data` of a `bash` response.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BashResult<'a> {
    output: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_code: Option<i64>,
    cancelled: bool,
    truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    full_output_path: Option<&'a str>,
}

/// The `data` of `get_state` (the reference's `RpcSessionState`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct State<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a crate::ai::Model>,
    thinking_level: &'static str,
    is_streaming: bool,
    is_compacting: bool,
    steering_mode: &'static str,
    follow_up_mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_file: Option<String>,
    session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_name: Option<String>,
    auto_compaction_enabled: bool,
    message_count: usize,
    pending_message_count: usize,
}

/// The `data` of `get_session_stats`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Stats {
    #[serde(skip_serializing_if = "Option::is_none")]
    session_file: Option<String>,
    session_id: String,
    user_messages: usize,
    assistant_messages: usize,
    tool_calls: usize,
    tool_results: usize,
    total_messages: usize,
    tokens: Tokens,
    cost: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_usage: Option<Usage>,
}

/// `get_session_stats`' `tokens`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tokens {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    total: u64,
}

/// `get_session_stats`' `contextUsage` (`null` tokens and percent right after a compaction).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    tokens: Option<u64>,
    context_window: u64,
    percent: Option<f64>,
}

/// The `data` of `fork` (`text` absent when the entry had none).
#[derive(Serialize)]
struct Forked {
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    cancelled: bool,
}

/// One command of `get_commands`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CommandInfo<'a> {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    source: &'static str,
    source_info: SourceInfo<'a>,
}

/// The reference's `sourceInfo` of a command's extension, template or skill.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceInfo<'a> {
    path: String,
    source: &'a str,
    scope: &'static str,
    origin: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    base_dir: Option<String>,
}

impl<'a> SourceInfo<'a> {
    fn new(path: String, source: &'a str, scope: &'static str, base_dir: Option<PathBuf>) -> Self {
        Self {
            path,
            source,
            scope,
            origin: "top-level",
            base_dir: base_dir.map(|dir| dir.to_string_lossy().into_owned()),
        }
    }
}

/// The ordered stream of stdout records: session events and everything the mode writes.
///
/// Events are moved from the session's subscription into one channel under a lock, and a
/// record written by the mode first moves the events already emitted, so the stdout order is
/// the order in which things happened.
#[derive(Clone)]
struct Output {
    inner: Arc<Mutex<OutputInner>>,
}

struct OutputInner {
    events: mpsc::UnboundedReceiver<SessionEvent>,
    records: mpsc::UnboundedSender<Value>,
}

impl OutputInner {
    fn forward(&self, event: &SessionEvent) {
        match event.to_json() {
            Some(value) => {
                let _ = self.records.send(value);
            }
            None => {
                if let SessionEvent::Notice { message, .. } = event {
                    eprintln!("{}", crate::support::term::text(message));
                }
            }
        }
    }

    fn drain(&mut self) {
        while let Ok(event) = self.events.try_recv() {
            self.forward(&event);
        }
    }
}

impl Output {
    fn new(
        events: mpsc::UnboundedReceiver<SessionEvent>,
        records: mpsc::UnboundedSender<Value>,
    ) -> Self {
        Self {
            inner: Arc::new(Mutex::new(OutputInner { events, records })),
        }
    }

    /// Writes a record after the events emitted so far.
    fn send(&self, record: Value) {
        let mut inner = lock(&self.inner);
        inner.drain();
        let _ = inner.records.send(record);
    }

    /// Moves events to the record stream as they come, until the session drops its senders.
    async fn forward_events(&self) {
        std::future::poll_fn(|cx| {
            let mut inner = lock(&self.inner);
            loop {
                match inner.events.poll_recv(cx) {
                    std::task::Poll::Ready(Some(event)) => inner.forward(&event),
                    std::task::Poll::Ready(None) => return std::task::Poll::Ready(()),
                    std::task::Poll::Pending => return std::task::Poll::Pending,
                }
            }
        })
        .await;
    }

    /// Moves the events emitted so far (before shutting down).
    fn flush_events(&self) {
        lock(&self.inner).drain();
    }
}

/// Writes records to stdout until `done` fires and everything queued is written; returns
/// false when stdout is closed.
async fn write_records(mut records: mpsc::UnboundedReceiver<Value>, done: CancellationToken) {
    let mut stdout = tokio::io::stdout();
    let mut open = true;
    let mut write = async |record: Value, open: &mut bool| {
        if !*open {
            return;
        }
        let line = serialize_record(&record);
        if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
            *open = false;
        }
    };
    loop {
        tokio::select! {
            biased;
            record = records.recv() => match record {
                Some(record) => write(record, &mut open).await,
                None => break,
            },
            () = done.cancelled() => {
                while let Ok(record) = records.try_recv() {
                    write(record, &mut open).await;
                }
                break;
            }
        }
    }
}

/// Reads stdin on its own thread (a blocking read must not hold up the runtime's shutdown)
/// and sends its records; the channel closes at end of input.
fn spawn_stdin_reader(lines: mpsc::UnboundedSender<String>) {
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut splitter = LineSplitter::new();
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match stdin.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => {
                    for line in splitter.push(&buffer[..read]) {
                        if lines.send(line).is_err() {
                            return;
                        }
                    }
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => {
                    eprintln!("rpc: reading stdin failed: {error}");
                    break;
                }
            }
        }
        if let Some(line) = splitter.finish() {
            let _ = lines.send(line);
        }
    });
}

/// Runs RPC mode until stdin ends or a termination signal arrives.
pub async fn run(prepared: Prepared) -> Result<ExitCode> {
    let Prepared {
        mut config,
        target,
        interchange,
        ..
    } = prepared;
    let (records_tx, records_rx) = mpsc::unbounded_channel();
    let writer_done = CancellationToken::new();
    let writer = tokio::spawn(write_records(records_rx, writer_done.clone()));
    // Extensions' dialogs go to the client from the start (`session_start` handlers included).
    let ui = RpcUi::new(records_tx.clone(), config.ids.clone());
    config.extensions.ui = Arc::new(ui.clone());
    let extensions = ExtensionSources {
        origins: config
            .extensions
            .executables
            .iter()
            .map(|extension| (extension.display.clone(), extension.origin))
            .collect(),
        cwd: config.cwd.clone(),
        agent_dir: lock(&config.resources).config().agent_dir.clone(),
    };
    let (session, report) = AgentSession::open(config, target).await?;
    for notice in &report.notices {
        eprintln!("Warning: {}", crate::support::term::line(notice));
    }
    let output = Output::new(session.subscribe(), records_tx);
    let forwarder = {
        let output = output.clone();
        tokio::spawn(async move { output.forward_events().await })
    };
    let server = Server {
        session: session.clone(),
        output: output.clone(),
        ui,
        tasks: Arc::new(Mutex::new(Vec::new())),
        extensions: Arc::new(extensions),
        refresh: interchange.refresh,
    };
    let (lines_tx, lines_rx) = mpsc::unbounded_channel();
    spawn_stdin_reader(lines_tx);

    let code = tokio::select! {
        () = server.serve(lines_rx) => 0,
        code = super::termination_signal() => {
            session.abort();
            session.abort_bash();
            // Give the turn a moment to record its aborted message; the exit does not wait
            // for a stuck tool.
            let _ = tokio::time::timeout(Duration::from_secs(2), session.wait_for_idle()).await;
            code
        }
    };
    // The extensions get `session_shutdown` (reason `quit`) and are stopped.
    let _ = tokio::time::timeout(Duration::from_secs(5), session.shutdown()).await;
    forwarder.abort();
    output.flush_events();
    writer_done.cancel();
    let _ = writer.await;
    // Entries that could not be stored (a `session_unsaved` event was sent) make it 1.
    if code == 0 && session.entries_not_stored() {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::from(code))
}

/// Where the executable extensions were found, for the `sourceInfo` of their commands.
struct ExtensionSources {
    origins: Vec<(String, ExtensionOrigin)>,
    cwd: PathBuf,
    agent_dir: PathBuf,
}

/// A parsed command: its `id` (echoed), `type` and fields.
struct Command {
    id: Option<Value>,
    kind: String,
    fields: Map<String, Value>,
}

impl Command {
    fn respond(&self, outcome: Outcome) -> Value {
        response(
            self.id.as_ref(),
            Some(&Value::from(self.kind.as_str())),
            outcome,
        )
    }

    fn string(&self, key: &str) -> Result<String, String> {
        match self.fields.get(key) {
            Some(Value::String(text)) => Ok(text.clone()),
            _ => Err(format!(
                "Invalid {} command: \"{key}\" must be a string",
                self.kind
            )),
        }
    }

    fn optional_string(&self, key: &str) -> Result<Option<String>, String> {
        match self.fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(format!(
                "Invalid {} command: \"{key}\" must be a string",
                self.kind
            )),
        }
    }

    fn boolean(&self, key: &str) -> Result<bool, String> {
        match self.fields.get(key) {
            Some(Value::Bool(value)) => Ok(*value),
            _ => Err(format!(
                "Invalid {} command: \"{key}\" must be a boolean",
                self.kind
            )),
        }
    }

    fn optional_boolean(&self, key: &str) -> Result<Option<bool>, String> {
        match self.fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(value)) => Ok(Some(*value)),
            Some(_) => Err(format!(
                "Invalid {} command: \"{key}\" must be a boolean",
                self.kind
            )),
        }
    }

    /// `images`: `ImageContent` objects (`{type:"image", data, mimeType}`).
    fn images(&self) -> Result<Vec<ImageContent>, String> {
        let items = match self.fields.get("images") {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(items)) => items,
            Some(_) => {
                return Err(format!(
                    "Invalid {} command: \"images\" must be an array",
                    self.kind
                ));
            }
        };
        items
            .iter()
            .map(|item| {
                let mut object = item.as_object().cloned().ok_or_else(|| {
                    format!("Invalid {} command: an image must be an object", self.kind)
                })?;
                // The block's `type` is the content-block tag, not part of the image fields.
                object.remove("type");
                serde_json::from_value(Value::Object(object))
                    .map_err(|error| format!("Invalid {} command: {error}", self.kind))
            })
            .collect()
    }
}

/// The RPC server state shared by the reader, the command loop and the command tasks.
#[derive(Clone)]
struct Server {
    session: AgentSession,
    output: Output,
    ui: RpcUi,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    extensions: Arc<ExtensionSources>,
    /// The automatic import of the reference's new sessions, before `switch_session` looks
    /// a session up.
    refresh: super::RefreshFn,
}

impl Server {
    /// Reads stdin records until end of input, then waits for the work in flight.
    async fn serve(&self, mut lines: mpsc::UnboundedReceiver<String>) {
        let (commands_tx, mut commands_rx) = mpsc::unbounded_channel::<Command>();
        let runner = {
            let server = self.clone();
            tokio::spawn(async move {
                while let Some(command) = commands_rx.recv().await {
                    server.execute(command).await;
                }
            })
        };
        while let Some(line) = lines.recv().await {
            if let Some(command) = self.accept_line(&line) {
                let _ = commands_tx.send(command);
            }
        }
        drop(commands_tx);
        let _ = runner.await;
        loop {
            let pending: Vec<_> = std::mem::take(&mut *lock(&self.tasks));
            if pending.is_empty() {
                break;
            }
            for task in pending {
                let _ = task.await;
            }
        }
        self.session.wait_for_idle().await;
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let handle = tokio::spawn(task);
        let mut tasks = lock(&self.tasks);
        tasks.retain(|task| !task.is_finished());
        tasks.push(handle);
    }

    /// Parses one stdin record; answers what needs no ordering at once (parse errors,
    /// extension UI responses, aborts) and returns the commands for the command loop.
    fn accept_line(&self, line: &str) -> Option<Command> {
        let parsed = match crate::support::json::parse_lenient(line.as_bytes()) {
            Ok(value) => value,
            Err(error) => {
                self.parse_error(&error.to_string());
                return None;
            }
        };
        let Value::Object(fields) = parsed else {
            self.parse_error("a command must be a JSON object");
            return None;
        };
        let kind = match fields.get("type") {
            Some(Value::String(kind)) => kind.clone(),
            other => {
                // Without a string `type` the command cannot be known (the reference says
                // "Unknown command: undefined" and echoes what it found).
                let shown = match other {
                    None => "undefined".to_owned(),
                    Some(value) => crate::support::json::to_js_string(value),
                };
                self.output.send(response(
                    fields.get("id"),
                    other,
                    Err(format!("Unknown command: {shown}")),
                ));
                return None;
            }
        };
        if kind == "extension_ui_response" {
            self.ui.resolve(&Value::Object(fields));
            return None;
        }
        let command = Command {
            id: fields.get("id").cloned(),
            kind,
            fields,
        };
        match command.kind.as_str() {
            "abort" => {
                self.session.abort();
                let server = self.clone();
                self.spawn(async move {
                    server.session.wait_for_idle().await;
                    server.output.send(command.respond(Ok(None)));
                });
                None
            }
            "abort_retry" => {
                self.session.abort_retry();
                self.output.send(command.respond(Ok(None)));
                None
            }
            "abort_bash" => {
                self.session.abort_bash();
                self.output.send(command.respond(Ok(None)));
                None
            }
            _ => Some(command),
        }
    }

    fn parse_error(&self, message: &str) {
        self.output.send(response(
            None,
            Some(&Value::from("parse")),
            Err(format!("Failed to parse command: {message}")),
        ));
    }

    /// Runs one command from the command loop and writes its response (long commands answer
    /// from their task).
    async fn execute(&self, command: Command) {
        let outcome = match command.kind.as_str() {
            "prompt" => return self.prompt(command).await,
            "bash" => return self.bash(command),
            "steer" => self.queue(&command, StreamingBehavior::Steer),
            "follow_up" => self.queue(&command, StreamingBehavior::FollowUp),
            "new_session" => self.new_session(&command).await,
            "get_state" => Ok(Some(self.state().await)),
            "get_messages" => Ok(Some(json!({"messages": self.session.messages()}))),
            "set_model" => self.set_model(&command).await,
            "cycle_model" => Ok(Some(self.cycle_model().await)),
            "get_available_models" => Ok(Some(json!({"models": self.session.available_models()}))),
            "set_thinking_level" => self.set_thinking_level(&command).await,
            "cycle_thinking_level" => Ok(Some(match self.session.cycle_thinking_level().await {
                Some(level) => json!({"level": level.as_str()}),
                None => Value::Null,
            })),
            "get_available_thinking_levels" => {
                let levels: Vec<&str> = self
                    .session
                    .available_thinking_levels()
                    .into_iter()
                    .map(ThinkingLevel::as_str)
                    .collect();
                Ok(Some(json!({"levels": levels})))
            }
            "get_entries" => self.entries(&command).await,
            "get_tree" => self.tree().await,
            "clear_queue" => {
                let (steering, follow_up) = self.session.clear_queues();
                Ok(Some(json!({"steering": steering, "followUp": follow_up})))
            }
            "set_steering_mode" => self.set_queue_mode(&command, true),
            "set_follow_up_mode" => self.set_queue_mode(&command, false),
            "set_auto_compaction" => command.boolean("enabled").map(|enabled| {
                self.session.set_auto_compaction(enabled);
                None
            }),
            "set_auto_retry" => command.boolean("enabled").map(|enabled| {
                self.session.set_auto_retry(enabled);
                None
            }),
            "get_session_stats" => Ok(Some(self.stats().await)),
            "switch_session" => self.switch_session(&command).await,
            "fork" => self.fork(&command).await,
            "clone" => self.clone_session().await,
            "get_fork_messages" => self.fork_messages().await,
            "get_last_assistant_text" => {
                Ok(Some(match last_assistant_text(&self.session.messages()) {
                    Some(text) => json!({"text": text}),
                    // The reference's `{text: undefined}` serialises as `{}`.
                    None => json!({}),
                }))
            }
            "set_session_name" => self.set_session_name(&command).await,
            "get_commands" => Ok(Some(self.commands())),
            "compact" => return self.compact(command),
            "export_html" => self.export_html(&command).await,
            unknown => {
                // With the request's id, as 1.6.0 answers it.
                self.output.send(response(
                    command.id.as_ref(),
                    Some(&Value::from(unknown)),
                    Err(format!("Unknown command: {unknown}")),
                ));
                return;
            }
        };
        self.output.send(command.respond(outcome));
    }

    /// `prompt`: answered once the session accepted (queued or started) the prompt, or with
    /// the error that refused it; the run goes on in a task.
    async fn prompt(&self, command: Command) {
        let parsed = (|| {
            let message = command.string("message")?;
            let images = command.images()?;
            let streaming_behavior = match command.fields.get("streamingBehavior") {
                None | Some(Value::Null) => None,
                Some(Value::String(text)) if text == "steer" => Some(StreamingBehavior::Steer),
                Some(Value::String(text)) if text == "followUp" => {
                    Some(StreamingBehavior::FollowUp)
                }
                Some(_) => {
                    return Err(
                        "Invalid prompt command: \"streamingBehavior\" must be \"steer\" or \"followUp\""
                            .to_owned(),
                    );
                }
            };
            Ok((message, images, streaming_behavior))
        })();
        let (message, images, streaming_behavior) = match parsed {
            Ok(parsed) => parsed,
            Err(error) => return self.output.send(command.respond(Err(error))),
        };
        let options = PromptOptions {
            images,
            streaming_behavior,
            source: PromptSource::Rpc,
            no_expansion: false,
        };
        let (decided_tx, decided_rx) = oneshot::channel::<()>();
        let decided = Arc::new(Mutex::new(Some(decided_tx)));
        let id = command.id.clone();
        let server = self.clone();
        self.spawn(async move {
            let on_accept = {
                let output = server.output.clone();
                let decided = decided.clone();
                move |disposition: PromptDisposition| {
                    output.send(response(
                        id.as_ref(),
                        Some(&Value::from("prompt")),
                        Ok(Some(json!({"disposition": disposition.as_str()}))),
                    ));
                    if let Some(sender) = lock(&decided).take() {
                        let _ = sender.send(());
                    }
                }
            };
            let result = server
                .session
                .prompt_with_acceptance(&message, options, on_accept)
                .await;
            if let Err(error) = result {
                server.output.send(command.respond(Err(error.to_string())));
            }
            if let Some(sender) = lock(&decided).take() {
                let _ = sender.send(());
            }
        });
        // The next command waits until this one is accepted or refused.
        let _ = decided_rx.await;
    }

    /// `bash`: runs in a task; `abort_bash` cancels it. Each output chunk is streamed as a
    /// `bash_execution_update` event (`{type, id?, delta}`, `id` the command's) before the
    /// response; `excludeFromContext` keeps the output out of the next prompt's context.
    fn bash(&self, command: Command) {
        let parsed = command.string("command").and_then(|text| {
            let exclude = command.optional_boolean("excludeFromContext")?;
            Ok((text, exclude))
        });
        let (text, exclude_from_context) = match parsed {
            Ok(parsed) => parsed,
            Err(error) => return self.output.send(command.respond(Err(error))),
        };
        let on_chunk: crate::session::OutputSink = {
            let output = self.output.clone();
            let id = command.id.clone();
            Arc::new(move |delta: &str| {
                output.send(to_value(&BashUpdate {
                    kind: "bash_execution_update",
                    id: id.as_ref(),
                    delta,
                }));
            })
        };
        let server = self.clone();
        self.spawn(async move {
            let outcome = match server
                .session
                .execute_bash_with(&text, exclude_from_context, Some(on_chunk))
                .await
            {
                Ok(message) => Ok(Some(to_value(&BashResult {
                    output: &message.output,
                    exit_code: message.exit_code,
                    cancelled: message.cancelled,
                    truncated: message.truncated,
                    full_output_path: message.full_output_path.as_deref(),
                }))),
                Err(error) => Err(error.to_string()),
            };
            server.output.send(command.respond(outcome));
        });
    }

    /// `compact`: runs in a task (a running turn is aborted first; `abort` cancels the
    /// summary) and answers `{summary, firstKeptEntryId, tokensBefore, details?}`.
    fn compact(&self, command: Command) {
        let instructions = match command.optional_string("customInstructions") {
            Ok(instructions) => instructions,
            Err(error) => return self.output.send(command.respond(Err(error))),
        };
        let server = self.clone();
        self.spawn(async move {
            let outcome = server
                .session
                .compact(instructions)
                .await
                .map(Some)
                .map_err(|error| error.to_string());
            server.output.send(command.respond(outcome));
        });
    }

    fn queue(&self, command: &Command, behavior: StreamingBehavior) -> Outcome {
        let message = command.string("message")?;
        let images = command.images()?;
        self.session
            .queue_message(behavior, &message, images)
            .map_err(|error| error.to_string())?;
        // pi's steering and follow-up messages do not pass through `input` handlers, so none
        // is ever "handled".
        Ok(Some(
            json!({"disposition": PromptDisposition::Queued.as_str()}),
        ))
    }

    /// Ends a running turn before the session is replaced.
    async fn settle(&self) {
        if self.session.is_streaming() {
            self.session.abort();
        }
        self.session.wait_for_idle().await;
    }

    async fn new_session(&self, command: &Command) -> Outcome {
        let parent = command.optional_string("parentSession")?;
        self.settle().await;
        self.session
            .new_session(parent)
            .await
            .map_err(|error| error.to_string())?;
        Ok(Some(json!({"cancelled": false})))
    }

    /// `get_entries`: every entry in append order (`since`: only those after that id),
    /// with the current leaf id.
    async fn entries(&self, command: &Command) -> Outcome {
        let since = command.optional_string("since")?;
        let mut entries = self
            .session
            .entries_json()
            .await
            .map_err(|error| error.to_string())?;
        if let Some(since) = since {
            let Some(pos) = entries.iter().position(|entry| entry["id"] == since) else {
                return Err(format!("Entry not found: {since}"));
            };
            entries.drain(..=pos);
        }
        let mut data = Map::new();
        data.insert("entries".into(), Value::Array(entries));
        data.insert("leafId".into(), self.leaf().await?);
        Ok(Some(Value::Object(data)))
    }

    /// `get_tree`: the entries as `{entry, children, label?, labelTimestamp?}` nodes.
    async fn tree(&self) -> Outcome {
        let entries = self
            .session
            .entries_json()
            .await
            .map_err(|error| error.to_string())?;
        // Built by hand: `json!` would copy the tree through serde, recursing per level.
        let mut data = Map::new();
        data.insert("tree".into(), entry_tree(entries));
        data.insert("leafId".into(), self.leaf().await?);
        Ok(Some(Value::Object(data)))
    }

    async fn leaf(&self) -> Result<Value, String> {
        let leaf = self
            .session
            .leaf_id()
            .await
            .map_err(|error| error.to_string())?;
        Ok(leaf.map_or(Value::Null, |id| Value::from(id.into_string())))
    }

    /// `<database path>#<session id>`, or `None` for an in-memory session.
    async fn session_file(&self) -> Option<String> {
        super::session_file(
            self.session.store(),
            &self.session.session_id().await.into_string(),
        )
    }

    async fn state(&self) -> Value {
        let session = &self.session;
        let (steering, follow_up) = session.queue_modes();
        let model = session.model();
        to_value(&State {
            model: model.as_ref(),
            thinking_level: session.thinking_level().as_str(),
            is_streaming: session.is_streaming(),
            is_compacting: session.is_compacting(),
            steering_mode: steering.as_str(),
            follow_up_mode: follow_up.as_str(),
            session_file: self.session_file().await,
            session_id: session.session_id().await.into_string(),
            session_name: session.session_name(),
            auto_compaction_enabled: session.auto_compaction(),
            message_count: session.messages().len(),
            pending_message_count: session.pending_message_count(),
        })
    }

    async fn set_model(&self, command: &Command) -> Outcome {
        let provider = command.string("provider")?;
        let model_id = command.string("modelId")?;
        let Some(model) = self
            .session
            .available_models()
            .into_iter()
            .find(|model| model.provider == provider && model.id == model_id)
        else {
            return Err(format!("Model not found: {provider}/{model_id}"));
        };
        self.session
            .set_model(model.clone())
            .await
            .map_err(|error| error.to_string())?;
        Ok(Some(model_json(&model)))
    }

    async fn cycle_model(&self) -> Value {
        let scoped = self.session.cycles_scoped_models();
        match self.session.cycle_model(true).await {
            Some(model) => json!({
                "model": model_json(&model),
                "thinkingLevel": self.session.thinking_level().as_str(),
                "isScoped": scoped,
            }),
            None => Value::Null,
        }
    }

    async fn set_thinking_level(&self, command: &Command) -> Outcome {
        // The reference clamps any value, an unknown one to the model's first level.
        let level = command
            .fields
            .get("level")
            .and_then(Value::as_str)
            .and_then(ThinkingLevel::parse)
            .or_else(|| self.session.available_thinking_levels().first().copied())
            .unwrap_or(ThinkingLevel::Off);
        self.session.set_thinking_level(level).await;
        Ok(None)
    }

    fn set_queue_mode(&self, command: &Command, steering: bool) -> Outcome {
        let text = command.string("mode")?;
        let mode = QueueMode::parse(&text).ok_or_else(|| {
            format!("Invalid mode: {text} (expected \"all\" or \"one-at-a-time\")")
        })?;
        if steering {
            self.session.set_steering_mode(mode);
        } else {
            self.session.set_follow_up_mode(mode);
        }
        Ok(None)
    }

    async fn stats(&self) -> Value {
        let session = &self.session;
        let stats = session.stats().await;
        let usage = self.context_usage().await;
        to_value(&Stats {
            session_file: self.session_file().await,
            session_id: session.session_id().await.into_string(),
            user_messages: stats.user_messages,
            assistant_messages: stats.assistant_messages,
            tool_calls: stats.tool_calls,
            tool_results: stats.tool_results,
            total_messages: stats.total_messages,
            tokens: Tokens {
                input: stats.input,
                output: stats.output,
                cache_read: stats.cache_read,
                cache_write: stats.cache_write,
                total: stats.input + stats.output + stats.cache_read + stats.cache_write,
            },
            cost: stats.cost,
            context_usage: usage.map(|usage| Usage {
                tokens: usage.tokens,
                context_window: usage.context_window,
                percent: usage.percent,
            }),
        })
    }

    /// The reference's `getContextUsage`: the transcript's token estimate against the model's
    /// window, unknown right after a compaction until a model answers.
    async fn context_usage(&self) -> Option<ContextUsage> {
        let model = self.session.model();
        let transcript = self.session.messages();
        // A session not written yet has no compaction on its path; a stored one is read from
        // its last compaction's kept range on (all the rule looks at), not from the root.
        let path = if self.session.is_persisted().await {
            let store = self.session.store().clone();
            let id = self.session.session_id().await;
            tokio::task::spawn_blocking(move || store.compaction_window(&id))
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        compaction::context_usage(model.as_ref(), &path, &transcript)
    }

    /// `export_html`: the session's HTML page (`modes/html`) at `outputPath` (relative to the
    /// session's directory) or, by default, `pi-session-<session file name>.html` there.
    async fn export_html(&self, command: &Command) -> Outcome {
        let output = command.optional_string("outputPath")?;
        if !self.session.is_persisted().await {
            return Err("Nothing to export yet - start a conversation first".to_owned());
        }
        let store = self.session.store().clone();
        let session = self.session.session_id().await;
        let cwd = self.session.cwd().to_path_buf();
        let path = tokio::task::spawn_blocking(move || {
            let target = match output {
                Some(path) => cwd.join(path),
                None => cwd.join(crate::modes::html::default_file_name(
                    &store.session(&session)?,
                )),
            };
            crate::modes::html::write_session_file(&store, &session, &target)?;
            Ok::<_, crate::modes::html::HtmlError>(target)
        })
        .await
        .map_err(|error| error.to_string())?
        .map_err(|error| error.to_string())?;
        Ok(Some(json!({"path": path.to_string_lossy()})))
    }

    /// `switch_session`: a session id, a unique prefix, or a reference JSONL file (imported
    /// first, merging as `pi import` does). A session whose stored working directory is gone
    /// is refused, as the reference refuses it outside the interactive mode.
    async fn switch_session(&self, command: &Command) -> Outcome {
        let target = command.string("sessionPath")?;
        let store = self.session.store().clone();
        let cwd = self.session.cwd().to_path_buf();
        let refresh = self.refresh.clone();
        let (id, imported) = tokio::task::spawn_blocking(move || {
            // What `get_state` reported as the session file (`<database>#<id>`), as a client
            // of the reference hands back the `sessionFile` it was given.
            if let Some((path, id)) = target.rsplit_once('#')
                && path == store.display_path()
            {
                let id = store.resolve(id).map_err(|error| error.to_string())?;
                return Ok::<_, String>((id, None));
            }
            if !(target.contains('/') || target.ends_with(".jsonl")) {
                // A session the reference wrote since the last look can be switched to.
                for warning in refresh(&store) {
                    eprintln!("Warning: {warning}");
                }
            }
            if target.contains('/') || target.ends_with(".jsonl") {
                let path = cwd.join(&target);
                let report = import_session_file(&store, &path)?;
                let status = report.status.as_str();
                let imported = format!(
                    "Imported {} into session {} ({status})",
                    path.display(),
                    report.session
                );
                return Ok::<_, String>((report.session, Some(imported)));
            }
            let id = store.resolve(&target).map_err(|error| error.to_string())?;
            Ok((id, None))
        })
        .await
        .map_err(|error| error.to_string())??;
        if let Some(imported) = imported {
            eprintln!("{}", crate::support::term::line(&imported));
        }
        let store = self.session.store().clone();
        let session = id.clone();
        let fallback = self.session.cwd();
        let missing = tokio::task::spawn_blocking(move || {
            super::MissingCwd::check(&store, &session, &fallback)
        })
        .await
        .map_err(|error| error.to_string())?
        .map_err(|error| error.to_string())?;
        if let Some(missing) = missing {
            return Err(missing.error_message());
        }
        self.settle().await;
        let report = self
            .session
            .switch_session(id)
            .await
            .map_err(|error| error.to_string())?;
        // Where tools now run, an untrusted project skipped: stderr, as at startup (stdout
        // carries protocol records only).
        for notice in &report.notices {
            eprintln!("Warning: {}", crate::support::term::line(notice));
        }
        Ok(Some(json!({"cancelled": false})))
    }

    async fn fork(&self, command: &Command) -> Outcome {
        let entry = command.string("entryId")?;
        self.settle().await;
        let text = self
            .session
            .fork(&EntryId::new(entry))
            .await
            .map_err(|error| error.to_string())?;
        Ok(Some(to_value(&Forked {
            text,
            cancelled: false,
        })))
    }

    async fn clone_session(&self) -> Outcome {
        let leaf = self
            .session
            .leaf_id()
            .await
            .map_err(|error| error.to_string())?;
        if leaf.is_none() {
            return Err("Cannot clone session: no current entry selected".to_owned());
        }
        self.settle().await;
        self.session
            .clone_session()
            .await
            .map_err(|error| error.to_string())?;
        Ok(Some(json!({"cancelled": false})))
    }

    async fn fork_messages(&self) -> Outcome {
        let messages = self
            .session
            .fork_messages()
            .await
            .map_err(|error| error.to_string())?;
        let messages: Vec<Value> = messages
            .into_iter()
            .map(|(entry, text)| json!({"entryId": entry.as_str(), "text": text}))
            .collect();
        Ok(Some(json!({"messages": messages})))
    }

    async fn set_session_name(&self, command: &Command) -> Outcome {
        let name = command.string("name")?;
        self.session
            .set_session_name(&name)
            .await
            .map_err(|error| error.to_string())?;
        Ok(None)
    }

    /// `get_commands`: prompt templates, then skills, with the reference's `sourceInfo`.
    fn commands(&self) -> Value {
        let resources = self.session.resources();
        let resources = lock(&resources);
        let config = resources.config();
        let mut commands = Vec::new();
        let extension_commands = self.session.extension_commands();
        for command in &extension_commands {
            commands.push(CommandInfo {
                name: command.invocation_name.clone(),
                description: command.info.description.as_deref(),
                source: "extension",
                source_info: extension_source_info(&self.extensions, &command.extension_path),
            });
        }
        for template in resources.templates() {
            commands.push(CommandInfo {
                name: template.name.clone(),
                description: Some(&template.description),
                source: "prompt",
                source_info: source_info(
                    config,
                    &template.file_path,
                    template.origin,
                    &config.prompt_template_paths,
                ),
            });
        }
        for skill in resources.skills() {
            commands.push(CommandInfo {
                name: format!("skill:{}", skill.name),
                description: Some(&skill.description),
                source: "skill",
                source_info: source_info(
                    config,
                    &skill.file_path,
                    skill.origin,
                    &config.skill_paths,
                ),
            });
        }
        json!({"commands": to_value(&commands)})
    }
}

/// Imports a reference JSONL session file into the store as `pi import` does (a session
/// already stored is merged by union); a refused file is an error naming the reason.
fn import_session_file(store: &SessionStore, path: &Path) -> Result<ImportReport, String> {
    let shown = path.display();
    let bytes = crate::support::files::read_regular(path, crate::jsonl::MAX_LINE_BYTES)
        .map_err(|error| format!("{shown}: {error}; nothing was imported"))?;
    let reader = SessionReader::new(&bytes)
        .map_err(|error| format!("{shown}: {error}; the file was left as it is"))?;
    let header = reader.header().clone();
    let header_bytes = reader.header_bytes().to_vec();
    let source = path.to_string_lossy().into_owned();
    let options = ImportOptions {
        source: &source,
        mode: ImportMode::Merge,
    };
    let report = store
        .import_lines(&header, &header_bytes, reader.map(Ok), &options)
        .map_err(|error| format!("{shown}: {error}"))?;
    if let Some(conflict) = &report.conflict {
        return Err(format!(
            "{shown}: line {}: entry '{}' is stored in session {} with different content; nothing was imported",
            conflict.line, conflict.id, report.session
        ));
    }
    Ok(report)
}

/// The reference's `Model` object.
/// 1.6.0's `SessionManager.getTree()`: one node per entry, under its parent (an entry whose
/// parent is missing, itself or `null` is a root), children oldest first (a stable sort on
/// the ISO timestamps), each node labelled by the last `label` entry naming it (an empty
/// label clears it). Built without recursion: a session may be thousands of entries deep.
pub fn entry_tree(entries: Vec<Value>) -> Value {
    let mut labels: std::collections::HashMap<String, (Value, Value)> =
        std::collections::HashMap::new();
    for entry in &entries {
        if entry["type"] != "label" {
            continue;
        }
        let Some(target) = entry["targetId"].as_str() else {
            continue;
        };
        match entry["label"].as_str() {
            Some(label) if !label.is_empty() => {
                labels.insert(
                    target.to_owned(),
                    (Value::from(label), entry["timestamp"].clone()),
                );
            }
            _ => {
                labels.remove(target);
            }
        }
    }
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (idx, entry) in entries.iter().enumerate() {
        if let Some(id) = entry["id"].as_str() {
            index.insert(id.to_owned(), idx);
        }
    }
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); entries.len()];
    let mut roots = Vec::new();
    for (idx, entry) in entries.iter().enumerate() {
        let parent = entry["parentId"]
            .as_str()
            .filter(|parent| Some(*parent) != entry["id"].as_str())
            .and_then(|parent| index.get(parent).copied());
        match parent {
            Some(parent) if parent != idx => children[parent].push(idx),
            _ => roots.push(idx),
        }
    }
    let timestamp = |idx: &usize| entries[*idx]["timestamp"].as_str().unwrap_or("").to_owned();
    for list in &mut children {
        list.sort_by_key(timestamp);
    }
    // Post-order without recursion: a node is built once all its children are.
    let mut built: Vec<Option<Value>> = vec![None; entries.len()];
    let mut entries: Vec<Option<Value>> = entries.into_iter().map(Some).collect();
    let mut stack: Vec<(usize, bool)> = roots.iter().rev().map(|idx| (*idx, false)).collect();
    let mut visited = vec![false; entries.len()];
    while let Some((idx, expanded)) = stack.pop() {
        if !expanded {
            if visited[idx] {
                continue;
            }
            visited[idx] = true;
            stack.push((idx, true));
            stack.extend(children[idx].iter().rev().map(|child| (*child, false)));
            continue;
        }
        let kids: Vec<Value> = children[idx]
            .iter()
            .filter_map(|child| built[*child].take())
            .collect();
        let entry = entries[idx].take().unwrap_or(Value::Null);
        let mut node = Map::new();
        let label = entry["id"].as_str().and_then(|id| labels.get(id)).cloned();
        node.insert("entry".into(), entry);
        node.insert("children".into(), Value::Array(kids));
        if let Some((label, stamp)) = label {
            node.insert("label".into(), label);
            node.insert("labelTimestamp".into(), stamp);
        }
        built[idx] = Some(Value::Object(node));
    }
    Value::Array(
        roots
            .iter()
            .filter_map(|root| built[*root].take())
            .collect(),
    )
}

fn model_json(model: &crate::ai::Model) -> Value {
    // `Model` serialises to the reference's shape; a failure here would be a bug in its derive.
    serde_json::to_value(model).unwrap_or(Value::Null)
}

/// The reference's `getLastAssistantText`: the last assistant message that is not an empty
/// aborted one, its text blocks joined without separator and trimmed; `None` when empty.
pub fn last_assistant_text(messages: &[AgentMessage]) -> Option<String> {
    let last = messages.iter().rev().find_map(|message| match message {
        AgentMessage::Assistant(assistant)
            if !(assistant.stop_reason == StopReason::Aborted && assistant.content.is_empty()) =>
        {
            Some(assistant)
        }
        _ => None,
    })?;
    let text: String = last
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect();
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The reference's `sourceInfo` of a skill or template: auto-discovered resources carry the
/// scope's directory as `baseDir` (the agent dir, or `<cwd>/.pi`), settings entries none, and
/// command-line ones the directory given (or the file's directory).
pub fn source_info(
    config: &ResourceConfig,
    path: &Path,
    origin: ResourceOrigin,
    cli_paths: &[String],
) -> SourceInfo<'static> {
    let (source, scope, base_dir) = match origin {
        ResourceOrigin::ProjectSettings => ("local", "project", None),
        ResourceOrigin::ProjectAuto => ("auto", "project", Some(config.cwd.join(".pi"))),
        ResourceOrigin::UserSettings => ("local", "user", None),
        ResourceOrigin::UserAuto => ("auto", "user", Some(config.agent_dir.clone())),
        ResourceOrigin::CommandLine => (
            "local",
            "temporary",
            Some(command_line_base_dir(&config.cwd, path, cli_paths)),
        ),
    };
    SourceInfo::new(path.to_string_lossy().into_owned(), source, scope, base_dir)
}

/// The reference's `sourceInfo` of an extension: in-process ones (`<builtin:name>`) are
/// synthetic, discovered ones follow where they were found as skills and templates do.
fn extension_source_info<'a>(sources: &ExtensionSources, path: &'a str) -> SourceInfo<'a> {
    let origin = sources
        .origins
        .iter()
        .find(|(display, _)| display == path)
        .map(|(_, origin)| *origin);
    let (source, scope, base_dir) = match origin {
        None if path.starts_with('<') && path.ends_with('>') => {
            let inner = &path[1..path.len() - 1];
            let source = inner.split(':').next().filter(|part| !part.is_empty());
            (source.unwrap_or("temporary"), "temporary", None)
        }
        // 1.6.0 marks `-e` extensions `{source: "cli", scope: "temporary"}` without a
        // `baseDir` (its resource loader's metadata for command-line extension paths).
        None | Some(ExtensionOrigin::CommandLine) => ("cli", "temporary", None),
        Some(ExtensionOrigin::ProjectSettings) => ("local", "project", None),
        Some(ExtensionOrigin::ProjectDir) => ("auto", "project", Some(sources.cwd.join(".pi"))),
        Some(ExtensionOrigin::UserSettings) => ("local", "user", None),
        Some(ExtensionOrigin::UserDir) => ("auto", "user", Some(sources.agent_dir.clone())),
    };
    SourceInfo::new(path.to_owned(), source, scope, base_dir)
}

/// The `baseDir` of a command-line resource: the `--skill` / `--prompt-template` path that
/// holds it when that is a directory, else the file's directory.
fn command_line_base_dir(cwd: &Path, path: &Path, cli_paths: &[String]) -> PathBuf {
    let parent = || path.parent().map_or_else(PathBuf::new, Path::to_path_buf);
    for raw in cli_paths {
        let given = crate::session::resources::paths::resolve(cwd, Path::new(raw));
        if path == given {
            return parent();
        }
        if path.starts_with(&given) {
            return given;
        }
    }
    parent()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::message::{AssistantMessage, TextContent};

    fn assistant(texts: &[&str], stop_reason: StopReason) -> AgentMessage {
        let mut message: AssistantMessage =
            serde_json::from_value(json!({"role": "assistant", "content": []})).unwrap();
        message.content = texts
            .iter()
            .map(|text| {
                ContentBlock::Text(TextContent {
                    text: (*text).to_owned(),
                    text_signature: None,
                    extra: Map::new(),
                })
            })
            .collect();
        message.stop_reason = stop_reason;
        AgentMessage::Assistant(message)
    }

    #[test]
    fn last_assistant_text_joins_trims_and_skips_empty_aborted_messages() {
        let messages = vec![
            assistant(&[" Hello", " world \n"], StopReason::Stop),
            assistant(&[], StopReason::Aborted),
        ];
        assert_eq!(
            last_assistant_text(&messages).as_deref(),
            Some("Hello world")
        );
        let blank = vec![assistant(&["  "], StopReason::Stop)];
        assert_eq!(last_assistant_text(&blank), None);
        assert_eq!(last_assistant_text(&[]), None);
    }

    #[test]
    fn entry_tree_nests_sorts_labels_and_roots_orphans_like_the_reference() {
        let entry = |id: &str, parent: Option<&str>, stamp: &str| json!({"type": "message", "id": id, "parentId": parent, "timestamp": stamp});
        let label = |target: &str, text: &str, stamp: &str| {
            json!({"type": "label", "id": format!("l{stamp}"), "parentId": "c", "timestamp": stamp,
                   "targetId": target, "label": text})
        };
        let entries = vec![
            entry("a", None, "2026-01-01T00:00:01.000Z"),
            // b is newer than c, so c comes first among a's children
            entry("b", Some("a"), "2026-01-01T00:00:05.000Z"),
            entry("c", Some("a"), "2026-01-01T00:00:03.000Z"),
            entry("d", Some("missing"), "2026-01-01T00:00:04.000Z"),
            entry("e", Some("e"), "2026-01-01T00:00:06.000Z"),
            label("a", "start", "7"),
            label("b", "old", "8"),
            label("b", "", "9"),
        ];
        let tree = entry_tree(entries);
        let ids = |nodes: &Value| -> Vec<String> {
            nodes
                .as_array()
                .unwrap()
                .iter()
                .map(|node| node["entry"]["id"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(
            ids(&tree),
            ["a", "d", "e"],
            "orphans and self-parents are roots"
        );
        assert_eq!(
            ids(&tree[0]["children"]),
            ["c", "b"],
            "children oldest first"
        );
        assert_eq!(tree[0]["label"], "start");
        assert_eq!(tree[0]["labelTimestamp"], "7");
        let b = &tree[0]["children"][1];
        assert!(b.get("label").is_none(), "an empty label clears it: {b}");
        let keys: Vec<&String> = b.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["entry", "children"]);
        // c holds the labels
        assert_eq!(
            tree[0]["children"][0]["children"].as_array().unwrap().len(),
            3
        );

        // A long chain is built and serialised without recursion.
        const MAX_TREE_DEPTH: usize = 10_000;
        let chain: Vec<Value> = (0..MAX_TREE_DEPTH)
            .map(|idx| {
                let parent = (idx > 0).then(|| format!("n{}", idx - 1));
                json!({"type": "message", "id": format!("n{idx}"), "parentId": parent, "timestamp": "t"})
            })
            .collect();
        let tree = entry_tree(chain);
        let line = serialize_record(&tree);
        assert!(line.ends_with("]}]}]\n"), "serialised whole");
        assert_eq!(line.matches("\"children\":[").count(), MAX_TREE_DEPTH);
        let mut node = &tree[0];
        let mut depth = 0;
        while let Some(child) = node["children"].get(0) {
            node = child;
            depth += 1;
        }
        assert_eq!(depth, MAX_TREE_DEPTH - 1);
        assert_eq!(node["entry"]["id"], format!("n{}", MAX_TREE_DEPTH - 1));
    }

    #[test]
    fn responses_echo_the_id_and_omit_absent_parts() {
        let command = Value::from("get_state");
        assert_eq!(
            crate::support::json::to_js_string(&response(
                Some(&json!("req_1")),
                Some(&command),
                Ok(None)
            )),
            r#"{"id":"req_1","type":"response","command":"get_state","success":true}"#
        );
        assert_eq!(
            crate::support::json::to_js_string(&response(
                None,
                Some(&command),
                Err("nope".to_owned())
            )),
            r#"{"type":"response","command":"get_state","success":false,"error":"nope"}"#
        );
        assert_eq!(
            crate::support::json::to_js_string(&response(
                Some(&json!(7)),
                Some(&command),
                Ok(Some(Value::Null))
            )),
            r#"{"id":7,"type":"response","command":"get_state","success":true,"data":null}"#
        );
    }

    #[test]
    fn source_info_follows_the_reference_per_origin() {
        let config = ResourceConfig::new(Path::new("/w"), Path::new("/a"), Some(Path::new("/h")));
        let info = |path: &str, origin, cli: &[&str]| {
            let cli: Vec<String> = cli.iter().map(|path| (*path).to_owned()).collect();
            to_value(&source_info(&config, Path::new(path), origin, &cli))
        };
        assert_eq!(
            info(
                "/h/.agents/skills/x/SKILL.md",
                ResourceOrigin::UserAuto,
                &[]
            ),
            json!({"path": "/h/.agents/skills/x/SKILL.md", "source": "auto", "scope": "user", "origin": "top-level", "baseDir": "/a"})
        );
        assert_eq!(
            info("/w/.pi/prompts/p.md", ResourceOrigin::ProjectAuto, &[]),
            json!({"path": "/w/.pi/prompts/p.md", "source": "auto", "scope": "project", "origin": "top-level", "baseDir": "/w/.pi"})
        );
        assert_eq!(
            info("/s/p.md", ResourceOrigin::UserSettings, &[]),
            json!({"path": "/s/p.md", "source": "local", "scope": "user", "origin": "top-level"})
        );
        assert_eq!(
            info(
                "/w/extra/sk/SKILL.md",
                ResourceOrigin::CommandLine,
                &["extra"]
            )["baseDir"],
            "/w/extra"
        );
        assert_eq!(
            info("/t/one.md", ResourceOrigin::CommandLine, &["/t/one.md"])["baseDir"],
            "/t"
        );
    }
}
