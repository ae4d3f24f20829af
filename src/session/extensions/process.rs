//! Out-of-process extensions: an executable started once per session runtime, speaking the
//! JSON-lines protocol of [`crate::session::extensions::protocol`] over its stdin/stdout.
//!
//! Lifecycle: spawn (own process group, cwd = the session's, pi's environment) → `hello` →
//! `register` within the timeout → requests (`event`, `execute_tool`, `command`), each
//! answered by one `response` with its id; meanwhile the extension may `call` into pi (each
//! call runs concurrently and is answered by a `return`). `stop` closes stdin, waits briefly,
//! then kills the group.
//!
//! Faults — the process cannot be started, exits, writes something that is not a protocol
//! message, or leaves a request unanswered for longer than the timeout — stop the extension:
//! the fault is reported once as an `extension_error` (one line, with the last line of its
//! stderr when there is one), the process group is killed, every pending request fails with
//! [`ExtensionError::Stopped`], and later events skip it. The session goes on.
//!
//! The timeout measures *inactivity*: it restarts whenever the extension sends anything, and
//! it is suspended while one of its calls into pi is being served (a `confirm` waiting for the
//! user does not count against a guard) and while it runs one of its tools or commands (they
//! take as long as they need — a single-threaded extension answers events only afterwards;
//! the user can abort a tool).
//!
//! Invariants: one writer at a time on stdin (a line is never interleaved); no lock is held
//! across an `.await` except the stdin writer lock; a fault is reported exactly once.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, Command};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentEvent;
use crate::agent::tool::{
    BoxFuture, Tool, ToolContext, ToolDefinition, ToolError, ToolInput, ToolOutput, UpdateSink,
};
use crate::model::message::AgentMessage;
use crate::session::extensions::api::{CommandInfo, Extension, HookFuture};
use crate::session::extensions::context::ExtensionContext;
use crate::session::extensions::error::ExtensionError;
use crate::session::extensions::event::{
    BeforeAgentStartEvent, ExtensionEvent, InputEvent, ToolCallEvent, ToolResultEvent, TurnStamp,
    UserBashEvent,
};
use crate::session::extensions::host;
use crate::session::extensions::protocol::{self, Incoming, Registration};
use crate::session::extensions::result::{
    self, BeforeAgentStartResult, InputAction, ResourcePaths, SessionBeforeResult, ToolCallResult,
    ToolResultChange, UserBashResult,
};

/// The longest line accepted from an extension (a tool result with images can be large).
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// How long `stop` waits for the process to exit after closing its stdin.
pub const STOP_GRACE: Duration = Duration::from_millis(500);

/// How many stderr lines are kept for error reports.
const STDERR_TAIL: usize = 20;

/// How to start an extension process.
#[derive(Clone, Debug)]
pub struct ProcessConfig {
    /// The program to run.
    pub program: PathBuf,
    /// Its arguments (the Node host gets its script and the extension's path).
    pub args: Vec<OsString>,
    /// How the extension is named in reports (`extensionPath`).
    pub display: String,
    /// The working directory (the session's).
    pub cwd: PathBuf,
    /// The environment (pi's own).
    pub env: Vec<(OsString, OsString)>,
    /// The handshake limit and the inactivity limit of a request.
    pub timeout: Duration,
    /// pi's version, sent in `hello`.
    pub version: String,
}

enum Health {
    Running,
    Stopped(String),
}

struct Pending {
    event: String,
    reply: oneshot::Sender<Result<Option<Value>, ExtensionError>>,
    updates: Option<UpdateSink>,
    /// A tool run or a command: it may take as long as it needs.
    long: bool,
}

struct Shared {
    path: String,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pending: Mutex<HashMap<u64, Pending>>,
    next_id: AtomicU64,
    health: Mutex<Health>,
    activity: Mutex<Instant>,
    calls_in_flight: AtomicUsize,
    stopping: AtomicBool,
    pid: Option<i32>,
    exit: watch::Receiver<Option<ExitStatus>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    ctx: ExtensionContext,
    timeout: Duration,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn describe_exit(status: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(status) => match (status.code(), status.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(signal)) => format!("was killed by signal {signal}"),
            (None, None) => "exited".to_owned(),
        },
        None => "closed its output".to_owned(),
    }
}

fn kill_group(pid: Option<i32>) {
    if let Some(pid) = pid {
        // The child leads its own group; a failure means it is gone already.
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

async fn wait_exit(
    exit: &mut watch::Receiver<Option<ExitStatus>>,
    limit: Duration,
) -> Option<ExitStatus> {
    let waited = match tokio::time::timeout(limit, exit.wait_for(Option::is_some)).await {
        Ok(Ok(status)) => Some(*status),
        _ => None,
    };
    waited.unwrap_or_else(|| *exit.borrow())
}

/// Reads one LF-terminated line (without the LF and a trailing CR); `None` at EOF.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    buffer: &mut Vec<u8>,
) -> std::io::Result<Option<usize>> {
    buffer.clear();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if buffer.is_empty() {
                None
            } else {
                Some(buffer.len())
            });
        }
        match available.iter().position(|byte| *byte == b'\n') {
            Some(pos) => {
                buffer.extend_from_slice(&available[..pos]);
                reader.consume(pos + 1);
                if buffer.last() == Some(&b'\r') {
                    buffer.pop();
                }
                return Ok(Some(buffer.len()));
            }
            None => {
                let len = available.len();
                buffer.extend_from_slice(available);
                reader.consume(len);
                if buffer.len() > MAX_LINE_BYTES {
                    return Err(std::io::Error::other(format!(
                        "a line longer than {MAX_LINE_BYTES} bytes"
                    )));
                }
            }
        }
    }
}

impl Shared {
    fn touch(&self) {
        *lock(&self.activity) = Instant::now();
    }

    fn last_activity(&self) -> Instant {
        *lock(&self.activity)
    }

    fn stopped_reason(&self) -> Option<String> {
        match &*lock(&self.health) {
            Health::Running => None,
            Health::Stopped(reason) => Some(reason.clone()),
        }
    }

    fn stderr_hint(&self) -> String {
        let tail = lock(&self.stderr_tail);
        match tail.iter().rev().find(|line| !line.trim().is_empty()) {
            Some(line) => format!(": {}", line.trim()),
            None => String::new(),
        }
    }

    /// Stops the extension because of a fault; reports it once. Returns false when it was
    /// stopped already.
    fn fail(&self, reason: String, event: Option<&str>) -> bool {
        {
            let mut health = lock(&self.health);
            if matches!(*health, Health::Stopped(_)) {
                return false;
            }
            *health = Health::Stopped(reason.clone());
        }
        kill_group(self.pid);
        let pending: Vec<Pending> = lock(&self.pending).drain().map(|(_, p)| p).collect();
        let event = event
            .map(str::to_owned)
            .or_else(|| pending.first().map(|p| p.event.clone()))
            .unwrap_or_else(|| "process".to_owned());
        self.ctx.report_error(&self.path, &event, &reason);
        for waiting in pending {
            let _ = waiting
                .reply
                .send(Err(ExtensionError::Stopped(reason.clone())));
        }
        true
    }

    /// Writes one line; an extension that stops reading (its pipe stays full for longer
    /// than the timeout) is an error, so a write never blocks pi for good.
    async fn write(&self, message: &Value) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let write = async {
            let mut stdin = self.stdin.lock().await;
            let Some(pipe) = stdin.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::BrokenPipe,
                    "stdin closed",
                ));
            };
            pipe.write_all(&line).await?;
            pipe.flush().await
        };
        match tokio::time::timeout(self.timeout, write).await {
            Ok(result) => result,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("its input stayed full for {} ms", self.timeout.as_millis()),
            )),
        }
    }

    /// Sends a request and waits for its response (see the module docs for the timeout).
    async fn request(
        self: &Arc<Self>,
        event: &str,
        build: impl FnOnce(u64) -> Value,
        updates: Option<UpdateSink>,
        cancel: Option<&CancellationToken>,
    ) -> Result<Option<Value>, ExtensionError> {
        if let Some(reason) = self.stopped_reason() {
            return Err(ExtensionError::Stopped(reason));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply, mut answer) = oneshot::channel();
        let long = matches!(event, "execute_tool" | "command");
        lock(&self.pending).insert(
            id,
            Pending {
                event: event.to_owned(),
                reply,
                updates,
                long,
            },
        );
        self.touch();
        if let Err(error) = self.write(&build(id)).await {
            let status = *self.exit.borrow();
            let reason = match status {
                Some(_) => format!("{}{}", describe_exit(status), self.stderr_hint()),
                None => format!("stopped reading its input ({error}); extension stopped"),
            };
            self.fail(reason, Some(event));
            return Err(ExtensionError::Stopped(
                self.stopped_reason().unwrap_or_default(),
            ));
        }
        loop {
            let deadline = self.last_activity() + self.timeout;
            tokio::select! {
                reply = &mut answer => {
                    return reply.unwrap_or_else(|_| {
                        Err(ExtensionError::Stopped(self.stopped_reason().unwrap_or_default()))
                    });
                }
                () = tokio::time::sleep_until(deadline) => {
                    let busy = self.calls_in_flight.load(Ordering::SeqCst) > 0
                        || lock(&self.pending).values().any(|pending| pending.long);
                    let idle = !busy && self.last_activity() + self.timeout <= Instant::now();
                    if idle {
                        let reason = format!(
                            "did not answer `{event}` within {} ms; extension stopped",
                            self.timeout.as_millis()
                        );
                        self.fail(reason, Some(event));
                        // The answer may have raced the timeout; take it if it did.
                        return match answer.try_recv() {
                            Ok(result) => result,
                            Err(_) => Err(ExtensionError::Stopped(
                                self.stopped_reason().unwrap_or_default(),
                            )),
                        };
                    }
                }
                () = async {
                    match cancel {
                        Some(token) => token.cancelled().await,
                        None => std::future::pending().await,
                    }
                } => {
                    lock(&self.pending).remove(&id);
                    let _ = self.write(&protocol::cancel(id)).await;
                    return Err(ExtensionError::Handler(
                        crate::agent::tool::ABORTED_MESSAGE.to_owned(),
                    ));
                }
            }
        }
    }

    async fn event(
        self: &Arc<Self>,
        name: &str,
        event: Value,
    ) -> Result<Option<Value>, ExtensionError> {
        self.request(name, |id| protocol::event_request(id, event), None, None)
            .await
    }

    fn dispatch(self: &Arc<Self>, incoming: Incoming) {
        match incoming {
            Incoming::Response { id, result } => {
                let waiting = lock(&self.pending).remove(&id);
                if let Some(waiting) = waiting {
                    let _ = waiting.reply.send(result.map_err(ExtensionError::Handler));
                }
                // An unknown id answers a request that was abandoned (abort); ignore it.
            }
            Incoming::ToolUpdate { id, partial } => {
                let sink = lock(&self.pending)
                    .get(&id)
                    .and_then(|waiting| waiting.updates.clone());
                if let Some(sink) = sink {
                    sink(partial);
                }
            }
            Incoming::Call { id, method, params } => {
                self.calls_in_flight.fetch_add(1, Ordering::SeqCst);
                let shared = self.clone();
                tokio::spawn(async move {
                    let result = host::handle_call(&shared.ctx, &method, params).await;
                    if let Err(error) = shared.write(&protocol::call_return(&id, result)).await
                        && !shared.stopping.load(Ordering::SeqCst)
                    {
                        shared.fail(
                            format!("stopped reading its input ({error}); extension stopped"),
                            None,
                        );
                    }
                    shared.touch();
                    shared.calls_in_flight.fetch_sub(1, Ordering::SeqCst);
                });
            }
        }
    }

    async fn read_loop<R: AsyncRead + Unpin>(self: Arc<Self>, mut reader: BufReader<R>) {
        let mut buffer = Vec::new();
        loop {
            match read_line(&mut reader, &mut buffer).await {
                Ok(Some(_)) => {
                    self.touch();
                    if buffer.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    match protocol::parse_incoming(&buffer) {
                        Ok(incoming) => self.dispatch(incoming),
                        Err(error) => {
                            self.fail(format!("{error}; extension stopped"), None);
                            return;
                        }
                    }
                }
                Ok(None) => {
                    if self.stopping.load(Ordering::SeqCst) {
                        return;
                    }
                    let mut exit = self.exit.clone();
                    let status = wait_exit(&mut exit, Duration::from_secs(2)).await;
                    // Give the stderr reader a moment to drain the last lines.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let reason = format!("{}{}", describe_exit(status), self.stderr_hint());
                    self.fail(reason, None);
                    return;
                }
                Err(error) => {
                    self.fail(
                        format!("could not be read: {error}; extension stopped"),
                        None,
                    );
                    return;
                }
            }
        }
    }
}

/// A running extension process.
pub struct ProcessExtension {
    shared: Arc<Shared>,
    registration: Registration,
    tools: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for ProcessExtension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessExtension")
            .field("path", &self.shared.path)
            .field("events", &self.registration.events)
            .finish_non_exhaustive()
    }
}

impl Drop for ProcessExtension {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        kill_group(self.shared.pid);
    }
}

impl ProcessExtension {
    /// Starts the process and completes the handshake; the error is one line describing
    /// why it could not start (the caller reports it).
    pub async fn start(config: ProcessConfig, ctx: ExtensionContext) -> Result<Self, String> {
        let mut child = Command::new(&config.program)
            .args(&config.args)
            .current_dir(&config.cwd)
            .env_clear()
            .envs(config.env.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| format!("could not start: {error}"))?;
        let pid = child.id().and_then(|pid| i32::try_from(pid).ok());
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            kill_group(pid);
            return Err("could not start: its pipes are missing".to_owned());
        };
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        {
            let tail = stderr_tail.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(stderr);
                let mut buffer = Vec::new();
                while let Ok(Some(_)) = read_line(&mut reader, &mut buffer).await {
                    let line: String = String::from_utf8_lossy(&buffer).chars().take(500).collect();
                    let mut tail = lock(&tail);
                    if tail.len() == STDERR_TAIL {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            });
        }
        let (exit_tx, exit_rx) = watch::channel(None);
        tokio::spawn(async move {
            let status = child.wait().await.ok();
            let _ = exit_tx.send(status);
        });
        let shared = Arc::new(Shared {
            path: config.display.clone(),
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            health: Mutex::new(Health::Running),
            activity: Mutex::new(Instant::now()),
            calls_in_flight: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
            pid,
            exit: exit_rx,
            stderr_tail,
            ctx: ctx.clone(),
            timeout: config.timeout,
        });
        let hello = protocol::hello(&config.version, &config.cwd.to_string_lossy(), ctx.has_ui());
        let mut reader = BufReader::new(stdout);
        let mut buffer = Vec::new();
        let handshake = async {
            // A process that exits at once may close its stdin before `hello` arrives; the
            // read below then reports how it ended.
            let _ = shared.write(&hello).await;
            loop {
                match read_line(&mut reader, &mut buffer).await {
                    Ok(Some(_)) if buffer.iter().all(u8::is_ascii_whitespace) => continue,
                    other => return other,
                }
            }
        };
        let first = tokio::time::timeout(config.timeout, handshake).await;
        let failure = |shared: &Shared, reason: String| {
            shared.stopping.store(true, Ordering::SeqCst);
            kill_group(shared.pid);
            reason
        };
        let registration = match first {
            Err(_) => {
                return Err(failure(
                    &shared,
                    format!(
                        "did not complete its handshake within {} ms",
                        config.timeout.as_millis()
                    ),
                ));
            }
            Ok(Err(error)) => {
                return Err(failure(&shared, format!("could not be read: {error}")));
            }
            Ok(Ok(None)) => {
                let mut exit = shared.exit.clone();
                let status = wait_exit(&mut exit, Duration::from_secs(2)).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
                return Err(failure(
                    &shared,
                    format!(
                        "failed to start: {} before its handshake{}",
                        describe_exit(status),
                        shared.stderr_hint()
                    ),
                ));
            }
            Ok(Ok(Some(_))) => match protocol::parse_registration(&buffer) {
                Ok(registration) => registration,
                Err(error) => {
                    return Err(failure(&shared, format!("failed to start: {error}")));
                }
            },
        };
        for unknown in &registration.unknown_events {
            ctx.report_error(
                &config.display,
                "register",
                &format!("unknown event `{unknown}` ignored"),
            );
        }
        let tools = registration
            .tools
            .iter()
            .map(|spec| {
                Arc::new(ProcessTool {
                    shared: shared.clone(),
                    definition: spec.definition.clone(),
                }) as Arc<dyn Tool>
            })
            .collect();
        tokio::spawn(shared.clone().read_loop(reader));
        Ok(Self {
            shared,
            registration,
            tools,
        })
    }

    /// What the extension registered.
    pub fn registration(&self) -> &Registration {
        &self.registration
    }

    /// Whether the process is still serving requests.
    pub fn is_running(&self) -> bool {
        self.shared.stopped_reason().is_none()
    }

    /// Delivers an event and returns the handler's raw answer (for benchmarks and tests;
    /// the bus uses the typed hooks).
    pub async fn request_event(
        &self,
        event: &ExtensionEvent,
    ) -> Result<Option<Value>, ExtensionError> {
        self.shared.event(event.name(), event.to_json()).await
    }
}

impl Extension for ProcessExtension {
    fn path(&self) -> &str {
        &self.shared.path
    }

    fn handles(&self, event: &str) -> bool {
        self.is_running() && self.registration.events.iter().any(|name| name == event)
    }

    fn manages_timeouts(&self) -> bool {
        true
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.clone()
    }

    fn commands(&self) -> Vec<CommandInfo> {
        self.registration.commands.clone()
    }

    fn run_command<'a>(
        &'a self,
        name: &'a str,
        args: &'a str,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, ()> {
        Box::pin(async move {
            self.shared
                .request(
                    "command",
                    |id| protocol::command_request(id, name, args),
                    None,
                    None,
                )
                .await
                .map(|_| ())
        })
    }

    fn on_event<'a>(
        &'a self,
        event: &'a ExtensionEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, ()> {
        Box::pin(async move {
            self.shared
                .event(event.name(), event.to_json())
                .await
                .map(|_| ())
        })
    }

    fn on_input<'a>(
        &'a self,
        event: &'a InputEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<InputAction>> {
        Box::pin(async move {
            let answer = self.shared.event("input", event.to_json()).await?;
            Ok(InputAction::from_json(answer)?)
        })
    }

    fn on_before_agent_start<'a>(
        &'a self,
        event: &'a BeforeAgentStartEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<BeforeAgentStartResult>> {
        Box::pin(async move {
            let answer = self
                .shared
                .event("before_agent_start", event.to_json())
                .await?;
            Ok(BeforeAgentStartResult::from_json(answer)?)
        })
    }

    fn on_context<'a>(
        &'a self,
        messages: &'a [AgentMessage],
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<Vec<AgentMessage>>> {
        Box::pin(async move {
            let event = ExtensionEvent::Context {
                messages: messages.to_vec(),
            };
            let answer = self.shared.event("context", event.to_json()).await?;
            Ok(result::context_result(answer)?)
        })
    }

    fn on_tool_call<'a>(
        &'a self,
        event: &'a ToolCallEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<ToolCallResult>> {
        Box::pin(async move {
            let answer = self.shared.event("tool_call", event.to_json()).await?;
            Ok(ToolCallResult::from_json(answer)?)
        })
    }

    fn on_tool_result<'a>(
        &'a self,
        event: &'a ToolResultEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<ToolResultChange>> {
        Box::pin(async move {
            let answer = self.shared.event("tool_result", event.to_json()).await?;
            Ok(ToolResultChange::from_json(answer)?)
        })
    }

    fn on_message_end<'a>(
        &'a self,
        message: &'a AgentMessage,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<AgentMessage>> {
        Box::pin(async move {
            let event = ExtensionEvent::Agent {
                event: Box::new(AgentEvent::MessageEnd {
                    message: message.clone(),
                }),
                turn: TurnStamp::default(),
            };
            let answer = self.shared.event("message_end", event.to_json()).await?;
            Ok(result::message_end_result(answer)?)
        })
    }

    fn on_session_before<'a>(
        &'a self,
        event: &'a ExtensionEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<SessionBeforeResult>> {
        Box::pin(async move {
            let answer = self.shared.event(event.name(), event.to_json()).await?;
            Ok(SessionBeforeResult::from_json(event.name(), answer)?)
        })
    }

    fn on_user_bash<'a>(
        &'a self,
        event: &'a UserBashEvent,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<UserBashResult>> {
        Box::pin(async move {
            let answer = self.shared.event("user_bash", event.to_json()).await?;
            Ok(UserBashResult::from_json(answer)?)
        })
    }

    fn on_resources_discover<'a>(
        &'a self,
        cwd: &'a str,
        reason: &'static str,
        _ctx: &'a ExtensionContext,
    ) -> HookFuture<'a, Option<ResourcePaths>> {
        Box::pin(async move {
            let event = ExtensionEvent::ResourcesDiscover {
                cwd: cwd.to_owned(),
                reason,
            };
            let answer = self
                .shared
                .event("resources_discover", event.to_json())
                .await?;
            Ok(ResourcePaths::from_json(answer)?)
        })
    }

    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let shared = &self.shared;
            shared.stopping.store(true, Ordering::SeqCst);
            let pending: Vec<Pending> = {
                let mut health = lock(&shared.health);
                if matches!(*health, Health::Running) {
                    *health = Health::Stopped("stopped by pi".to_owned());
                }
                lock(&shared.pending).drain().map(|(_, p)| p).collect()
            };
            for waiting in pending {
                let _ = waiting
                    .reply
                    .send(Err(ExtensionError::Stopped("stopped by pi".to_owned())));
            }
            // Closing stdin asks the extension to exit (a writer stuck on a full pipe holds
            // the lock: then the extension is killed at once).
            let closed = match tokio::time::timeout(STOP_GRACE, shared.stdin.lock()).await {
                Ok(mut stdin) => {
                    stdin.take();
                    true
                }
                Err(_) => false,
            };
            let mut exit = shared.exit.clone();
            if !closed || wait_exit(&mut exit, STOP_GRACE).await.is_none() {
                kill_group(shared.pid);
            }
        })
    }
}

/// A tool an extension registered: execution is a request to its process.
struct ProcessTool {
    shared: Arc<Shared>,
    definition: ToolDefinition,
}

impl Tool for ProcessTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn mutates_workspace(&self) -> bool {
        // Unknown: an extension tool may do anything.
        true
    }

    fn execute<'a>(
        &'a self,
        input: ToolInput,
        ctx: ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let name = self.definition.name.clone();
            let answer = self
                .shared
                .request(
                    "execute_tool",
                    |id| protocol::tool_request(id, input.id.as_str(), &name, &input.arguments),
                    ctx.on_update.clone(),
                    Some(&ctx.cancel),
                )
                .await;
            match answer {
                Ok(Some(value)) => protocol::parse_tool_output(&value).map_err(|reason| {
                    ToolError::ForModel(format!(
                        "Extension {} returned an invalid result: {reason}",
                        self.shared.path
                    ))
                }),
                Ok(None) => Ok(ToolOutput {
                    content: Vec::new(),
                    details: None,
                }),
                Err(ExtensionError::Handler(message)) => Err(ToolError::ForModel(message)),
                Err(error) => Err(ToolError::ForModel(format!(
                    "Extension {} failed: {error}",
                    self.shared.path
                ))),
            }
        })
    }
}
