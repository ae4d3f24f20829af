//! One MCP server connection on the official Rust SDK (`rmcp`): started (a child process or a
//! streamable HTTP session), initialised, its tools listed, calls made with the server's
//! timeout, and its state kept for `/mcp` and `pi mcp list` (1.6.0 `McpServerConnection`).
//!
//! States are the reference's: `connecting`, `connected`, `failed` (with the error and the
//! tail of a stdio server's stderr), `disconnected` (the connection dropped: a killed server,
//! a closed stream), `disabled`, `closed`. A dropped connection is noticed when it is next
//! used and is reconnected then ([`ServerConnection::peer`]); a call already on the wire when
//! the server dies fails, as in the reference (tool calls are never re-sent: the server may
//! have run them).
//!
//! A stdio server runs in its own process group with pi's environment plus its `env`
//! (values resolved from `${VAR}` / `!command`); stopping it closes its stdin, sends SIGTERM,
//! then SIGKILL to the group (rmcp's graceful shutdown through `process-wrap`), which also
//! stops servers started through `npx`.
//!
//! Roots (the session directory, as 1.6.0 offers it) are deprecated in the newest protocol
//! revision (SEP-2577) but still asked for by servers of earlier revisions, hence the
//! `allow(deprecated)`.
//!
//! Invariant: nothing here panics on server input; a server that hangs costs at most its
//! timeout; nothing prints (notices go to the manager's sink).

#![allow(deprecated)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ListRootsResult,
    ReadResourceRequestParams, Root,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{Peer, ServiceExt};
use serde_json::{Map, Value};
use tokio::io::AsyncReadExt;

use crate::ai::auth::{KeyResolver, config_value_env_names, resolve_config_value};
use crate::session::mcp::config::{ServerEntry, Transport};

/// How much of a failed stdio server's stderr is kept (1.6.0 `STDERR_TAIL_CHARS`).
const STDERR_TAIL_CHARS: usize = 2_000;

/// What every connection needs from the session around it.
#[derive(Clone)]
pub struct ConnectContext {
    /// The session directory (relative `cwd`s resolve against it).
    pub cwd: PathBuf,
    /// The home directory, for `~/`.
    pub home: Option<PathBuf>,
    /// pi's environment, which stdio servers inherit.
    pub env: Vec<(String, String)>,
    /// Resolves `${VAR}` and `!command` values.
    pub resolver: Arc<dyn KeyResolver>,
    /// The version sent as `clientInfo.version`.
    pub version: String,
}

impl std::fmt::Debug for ConnectContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectContext")
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

/// A connection's state, named as in the reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Starting or initialising.
    Connecting,
    /// Initialised; tools listed.
    Connected,
    /// The last attempt failed.
    Failed,
    /// The connection dropped after it was up.
    Disconnected,
    /// `enabled: false`.
    Disabled,
    /// Shut down by pi.
    Closed,
}

impl State {
    /// The reference's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connecting => "connecting",
            Self::Connected => "connected",
            Self::Failed => "failed",
            Self::Disconnected => "disconnected",
            Self::Disabled => "disabled",
            Self::Closed => "closed",
        }
    }
}

/// A server tool as listed: the MCP `Tool` object as JSON.
pub type ServerTool = Map<String, Value>;

/// What `/mcp` and `pi mcp list` show of a connection.
#[derive(Clone, Debug)]
pub struct Status {
    /// The state.
    pub state: State,
    /// The last error (with the stderr tail), when not connected.
    pub error: Option<String>,
    /// The tools the server offers.
    pub tools: Vec<ServerTool>,
    /// Whether it has the resources capability.
    pub has_resources: bool,
    /// Its instructions, trimmed.
    pub instructions: Option<String>,
}

type Service = RunningService<RoleClient, PiClient>;

/// Whether a connection ended: closed by pi, or its transport gone (the server exited, the
/// stream closed).
fn closed(running: &Service) -> bool {
    running.is_closed() || running.peer().is_transport_closed()
}

/// pi as an MCP client: `clientInfo` `pi`, and the session directory as its one root (as
/// 1.6.0 offers it).
#[derive(Clone)]
pub struct PiClient {
    config: ClientConfig,
    roots: Vec<Root>,
}

impl rmcp::ClientHandler for PiClient {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    fn list_roots(
        &self,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl std::future::Future<Output = Result<ListRootsResult, rmcp::ErrorData>> + Send + '_
    {
        std::future::ready(Ok(ListRootsResult::new(self.roots.clone())))
    }
}

/// A `file://` URL of an absolute path (percent-encoding what a URL path cannot hold).
fn file_url(path: &Path) -> String {
    reqwest::Url::from_file_path(path).map_or_else(
        |()| format!("file://{}", path.display()),
        |url| url.to_string(),
    )
}

/// One configured server and its (re)connections.
pub struct ServerConnection {
    entry: ServerEntry,
    ctx: ConnectContext,
    status: Mutex<Status>,
    service: tokio::sync::Mutex<Option<Service>>,
    stderr: Arc<Mutex<String>>,
    enabled: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for ServerConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConnection")
            .field("name", &self.entry.name)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Keeps the last `max` characters of `text`.
fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    text.chars().skip(count - max).collect()
}

fn expand_home(value: &str, home: Option<&Path>) -> String {
    match (value, home) {
        ("~", Some(home)) => home.to_string_lossy().into_owned(),
        (value, Some(home)) if value.starts_with("~/") => {
            home.join(&value[2..]).to_string_lossy().into_owned()
        }
        (value, _) => value.to_owned(),
    }
}

/// Resolves one `${VAR}`/`!command` value with the reference's error text.
fn resolve_value(
    value: &str,
    description: &str,
    resolver: &dyn KeyResolver,
) -> Result<String, String> {
    resolve_config_value(value, resolver).ok_or_else(|| match value.strip_prefix('!') {
        Some(command) => format!("Failed to resolve {description} from shell command: {command}"),
        None => {
            let missing: Vec<String> = config_value_env_names(value)
                .into_iter()
                .filter(|name| resolver.env(name).is_none())
                .collect();
            match missing.as_slice() {
                [one] => {
                    format!("Failed to resolve {description} from environment variable: {one}")
                }
                many => format!(
                    "Failed to resolve {description} from environment variables: {}",
                    many.join(", ")
                ),
            }
        }
    })
}

/// Resolves `pairs` on the blocking pool (a `!command` runs the shell).
async fn resolve_pairs(
    pairs: Vec<(String, String)>,
    what: String,
    resolver: Arc<dyn KeyResolver>,
) -> Result<Vec<(String, String)>, String> {
    tokio::task::spawn_blocking(move || {
        pairs
            .into_iter()
            .map(|(key, value)| {
                let description = format!("{what} \"{key}\"");
                resolve_value(&value, &description, resolver.as_ref()).map(|value| (key, value))
            })
            .collect()
    })
    .await
    .map_err(|error| error.to_string())?
}

fn to_json<T: serde::Serialize>(value: &T) -> Map<String, Value> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// Describes an SDK error in one line.
fn describe(error: &rmcp::ServiceError, timeout: Duration) -> String {
    match error {
        rmcp::ServiceError::Timeout { .. } => request_timeout(timeout),
        rmcp::ServiceError::McpError(error) => {
            format!("MCP error {}: {}", error.code.0, error.message)
        }
        other => other.to_string(),
    }
}

fn request_timeout(timeout: Duration) -> String {
    format!("Request timed out after {} ms", timeout.as_millis())
}

impl ServerConnection {
    /// A connection for `entry`, not yet started.
    pub fn new(entry: ServerEntry, ctx: ConnectContext) -> Self {
        let state = if entry.enabled() {
            State::Connecting
        } else {
            State::Disabled
        };
        Self {
            enabled: std::sync::atomic::AtomicBool::new(entry.enabled()),
            entry,
            ctx,
            status: Mutex::new(Status {
                state,
                error: None,
                tools: Vec::new(),
                has_resources: false,
                instructions: None,
            }),
            service: tokio::sync::Mutex::new(None),
            stderr: Arc::new(Mutex::new(String::new())),
        }
    }

    /// The configured entry.
    pub fn entry(&self) -> &ServerEntry {
        &self.entry
    }

    /// Whether the server is enabled in this process (its entry, or `/mcp enable|disable`).
    pub fn enabled(&self) -> bool {
        self.enabled.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Enables or disables the server for this process (a disabled one is stopped).
    pub async fn set_enabled(&self, enabled: bool) {
        self.enabled
            .store(enabled, std::sync::atomic::Ordering::Relaxed);
        if !enabled {
            self.close().await;
            self.set_status(|status| {
                status.state = State::Disabled;
                status.tools.clear();
                status.error = None;
            });
        }
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.entry.name
    }

    /// A snapshot of the state (a dropped connection shows as `disconnected`).
    pub fn status(&self) -> Status {
        if let Ok(service) = self.service.try_lock()
            && service.as_ref().is_some_and(closed)
        {
            self.mark_dropped();
        }
        lock(&self.status).clone()
    }

    fn set_status(&self, update: impl FnOnce(&mut Status)) {
        update(&mut lock(&self.status));
    }

    fn mark_dropped(&self) {
        let stderr = tail(lock(&self.stderr).trim(), STDERR_TAIL_CHARS);
        self.set_status(|status| {
            if status.state == State::Connected {
                status.state = State::Disconnected;
                status.error = Some(if stderr.is_empty() {
                    "Connection closed".to_owned()
                } else {
                    format!("Connection closed\n{stderr}")
                });
            }
        });
    }

    /// Connects (again): closes a previous connection first. Returns the error text on failure.
    pub async fn connect(&self) -> Result<(), String> {
        let mut service = self.service.lock().await;
        if let Some(mut old) = service.take() {
            let _ = old.close().await;
        }
        self.connect_locked(&mut service).await
    }

    async fn connect_locked(&self, slot: &mut Option<Service>) -> Result<(), String> {
        self.set_status(|status| {
            status.state = State::Connecting;
            status.error = None;
        });
        lock(&self.stderr).clear();
        let timeout = self.entry.timeout();
        let attempt = tokio::time::timeout(timeout, self.open()).await;
        let result = match attempt {
            Ok(result) => result,
            Err(_) => Err(request_timeout(timeout)),
        };
        match result {
            Ok((service, tools)) => {
                let info = service.peer_info();
                let has_resources = info
                    .as_ref()
                    .is_some_and(|info| info.capabilities.resources.is_some());
                let instructions = info
                    .as_ref()
                    .and_then(|info| info.instructions.as_deref())
                    .map(str::trim)
                    .filter(|text| !text.is_empty())
                    .map(str::to_owned);
                self.set_status(|status| {
                    status.state = State::Connected;
                    status.error = None;
                    status.tools = tools;
                    status.has_resources = has_resources;
                    status.instructions = instructions;
                });
                *slot = Some(service);
                Ok(())
            }
            Err(error) => {
                // Give the stderr reader a moment to collect what the process wrote last.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let stderr = tail(lock(&self.stderr).trim(), STDERR_TAIL_CHARS);
                let error = if stderr.is_empty() {
                    error
                } else {
                    format!("{error}\n{stderr}")
                };
                self.set_status(|status| {
                    status.state = State::Failed;
                    status.error = Some(error.clone());
                });
                Err(error)
            }
        }
    }

    fn client_config(&self) -> PiClient {
        let name = self
            .ctx
            .cwd
            .file_name()
            .map(|name| name.to_string_lossy().into_owned());
        let mut root = Root::new(file_url(&self.ctx.cwd));
        root.name = name;
        PiClient {
            config: ClientConfig::new(
                {
                    let mut capabilities = ClientCapabilities::default();
                    capabilities.roots = Some(rmcp::model::RootsCapabilities::default());
                    capabilities
                },
                Implementation::new("pi", self.ctx.version.clone()),
            ),
            roots: vec![root],
        }
    }

    async fn open(&self) -> Result<(Service, Vec<ServerTool>), String> {
        let name = &self.entry.name;
        let service = match &self.entry.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let env = resolve_pairs(
                    env.clone(),
                    format!("MCP server \"{name}\" env"),
                    self.ctx.resolver.clone(),
                )
                .await?;
                let home = self.ctx.home.as_deref();
                let mut cmd = tokio::process::Command::new(expand_home(command, home));
                cmd.args(args.iter().map(|arg| expand_home(arg, home)));
                cmd.current_dir(
                    self.ctx
                        .cwd
                        .join(expand_home(cwd.as_deref().unwrap_or("."), home)),
                );
                cmd.env_clear();
                cmd.envs(self.ctx.env.iter().map(|(key, value)| (key, value)));
                cmd.envs(env);
                let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
                wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
                let (transport, stderr) = TokioChildProcess::builder(wrapped)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|error| format!("spawn {command}: {error}"))?;
                if let Some(mut stderr) = stderr {
                    let sink = self.stderr.clone();
                    tokio::spawn(async move {
                        let mut buf = [0u8; 4096];
                        while let Ok(read) = stderr.read(&mut buf).await {
                            if read == 0 {
                                break;
                            }
                            let mut text = lock(&sink);
                            text.push_str(&String::from_utf8_lossy(&buf[..read]));
                            if text.len() > STDERR_TAIL_CHARS * 8 {
                                let kept = tail(&text, STDERR_TAIL_CHARS * 2);
                                *text = kept;
                            }
                        }
                    });
                }
                self.client_config()
                    .serve(transport)
                    .await
                    .map_err(|error| error.to_string())?
            }
            Transport::Http { url, headers } => {
                let headers = resolve_pairs(
                    headers.clone(),
                    format!("MCP server \"{name}\" header"),
                    self.ctx.resolver.clone(),
                )
                .await?;
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                let mut custom = HashMap::new();
                for (key, value) in headers {
                    if key.eq_ignore_ascii_case("authorization")
                        && let Some(token) = value.strip_prefix("Bearer ")
                    {
                        config = config.auth_header(token.to_owned());
                        continue;
                    }
                    let header = reqwest_header(&key, &value)
                        .ok_or_else(|| format!("invalid header \"{key}\""))?;
                    custom.insert(header.0, header.1);
                }
                let config = config.custom_headers(custom);
                let transport = StreamableHttpClientTransport::from_config(config);
                self.client_config()
                    .serve(transport)
                    .await
                    .map_err(|error| error.to_string())?
            }
        };
        let capable = service
            .peer_info()
            .is_some_and(|info| info.capabilities.tools.is_some());
        let tools = if capable {
            service
                .peer()
                .list_all_tools()
                .await
                .map_err(|error| describe(&error, self.entry.timeout()))?
                .iter()
                .map(to_json)
                .collect()
        } else {
            Vec::new()
        };
        Ok((service, tools))
    }

    /// The live peer: connects when there is no connection or it dropped (reported through
    /// `on_drop` with the error the drop left).
    pub async fn peer(
        &self,
        on_drop: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Peer<RoleClient>, String> {
        if !self.enabled() {
            return Err(format!("MCP server \"{}\" is disabled.", self.entry.name));
        }
        let mut service = self.service.lock().await;
        if let Some(running) = service.as_ref()
            && !closed(running)
        {
            return Ok(running.peer().clone());
        }
        if service.is_some() {
            self.mark_dropped();
            let error = lock(&self.status).error.clone().unwrap_or_default();
            on_drop(&error);
            *service = None;
        }
        self.connect_locked(&mut service).await.map_err(|error| {
            format!(
                "MCP server \"{}\" failed to connect: {error}",
                self.entry.name
            )
        })?;
        match service.as_ref() {
            Some(running) => Ok(running.peer().clone()),
            None => Err(format!(
                "MCP server \"{}\" is not connected",
                self.entry.name
            )),
        }
    }

    /// Calls `tool` with `arguments`; the result as JSON (`content`, `structuredContent`,
    /// `isError`), or the error text.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        on_drop: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Map<String, Value>, String> {
        let peer = self.peer(on_drop).await?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments);
        let timeout = self.entry.timeout();
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Ok(Ok(result)) => Ok(to_json(&result)),
            Ok(Err(error)) => {
                if matches!(error, rmcp::ServiceError::TransportClosed) {
                    self.mark_dropped();
                }
                Err(describe(&error, timeout))
            }
            Err(_) => Err(request_timeout(timeout)),
        }
    }

    /// Lists the server's resources (all pages).
    pub async fn list_resources(
        &self,
        on_drop: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Vec<Map<String, Value>>, String> {
        let peer = self.peer(on_drop).await?;
        let timeout = self.entry.timeout();
        match tokio::time::timeout(timeout, peer.list_all_resources()).await {
            Ok(Ok(resources)) => Ok(resources.iter().map(to_json).collect()),
            Ok(Err(error)) => Err(describe(&error, timeout)),
            Err(_) => Err(request_timeout(timeout)),
        }
    }

    /// Lists the server's resource templates (none when it does not implement the method).
    pub async fn list_resource_templates(
        &self,
        on_drop: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Vec<Map<String, Value>>, String> {
        let peer = self.peer(on_drop).await?;
        let timeout = self.entry.timeout();
        match tokio::time::timeout(timeout, peer.list_all_resource_templates()).await {
            Ok(Ok(templates)) => Ok(templates.iter().map(to_json).collect()),
            Ok(Err(rmcp::ServiceError::McpError(error))) if error.code.0 == -32601 => {
                Ok(Vec::new())
            }
            Ok(Err(error)) => Err(describe(&error, timeout)),
            Err(_) => Err(request_timeout(timeout)),
        }
    }

    /// Reads one resource: its `contents` as JSON.
    pub async fn read_resource(
        &self,
        uri: &str,
        on_drop: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Vec<Value>, String> {
        let peer = self.peer(on_drop).await?;
        let timeout = self.entry.timeout();
        let params = ReadResourceRequestParams::new(uri.to_owned());
        match tokio::time::timeout(timeout, peer.read_resource(params)).await {
            Ok(Ok(result)) => Ok(match to_json(&result).remove("contents") {
                Some(Value::Array(contents)) => contents,
                _ => Vec::new(),
            }),
            Ok(Err(error)) => Err(describe(&error, timeout)),
            Err(_) => Err(request_timeout(timeout)),
        }
    }

    /// Stops the server (stdin closed, SIGTERM, then SIGKILL to its process group).
    pub async fn close(&self) {
        let mut service = self.service.lock().await;
        if let Some(mut running) = service.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), running.close()).await;
        }
        self.set_status(|status| status.state = State::Closed);
    }
}

fn reqwest_header(
    key: &str,
    value: &str,
) -> Option<(rmcp_http::HeaderName, rmcp_http::HeaderValue)> {
    let name = rmcp_http::HeaderName::from_bytes(key.as_bytes()).ok()?;
    let value = rmcp_http::HeaderValue::from_str(value).ok()?;
    Some((name, value))
}

/// The `http` crate's header types, as rmcp's config takes them.
mod rmcp_http {
    pub use http::{HeaderName, HeaderValue};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_expansion_and_tails() {
        let home = Path::new("/home/u");
        assert_eq!(expand_home("~/bin/x", Some(home)), "/home/u/bin/x");
        assert_eq!(expand_home("~", Some(home)), "/home/u");
        assert_eq!(expand_home("a~/b", Some(home)), "a~/b");
        assert_eq!(tail("abcdef", 3), "def");
    }
}
