//! MCP servers (1.6.0 `docs/mcp.md`): the configured servers of `mcp.json` ([`config`]),
//! their connections on the official Rust SDK `rmcp` ([`client`]), their tools as pi tools
//! ([`tool`]) and the resource tools ([`resources`]), held by one [`McpManager`] per pi process.
//!
//! Exposure: pi has neither `codemode` nor `tool_search`, so a tool the reference would reach
//! through them (`codemode`, the default, and `deferred`) is declared to the model directly,
//! like `direct`; `hidden` tools are not registered. The resource tools exist while a
//! connected, non-hidden server offers resources.
//!
//! The manager never prints: connection problems and dropped connections go to the notice
//! sink its owner (the `cli` edge) gives it.
//!
//! Invariant: a server that fails, hangs or answers garbage costs at most its timeout and
//! becomes a notice or an error result; it never ends pi.

pub mod client;
pub mod config;
pub mod resources;
pub mod tool;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::agent::tool::Tool;
use crate::session::mcp::client::{ConnectContext, ServerConnection, State, Status};
use crate::session::mcp::config::{LoadedConfig, ServerEntry};

/// Why an MCP operation failed.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// A configuration file could not be read or written.
    #[error("{path}: {message}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// No server of that name is configured.
    #[error("No MCP server named \"{0}\"")]
    UnknownServer(String),
}

impl McpError {
    /// A configuration error for `path`.
    pub fn config(path: &Path, message: impl Into<String>) -> Self {
        Self::Config {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

/// How long an agent run waits for its servers before the first prompt (1.6.0 waits up to
/// 10 s for the servers whose tools it declares).
pub const STARTUP_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Receives one-line notices for the user (connection failures, drops, reconnects).
pub type NoticeSink = Arc<dyn Fn(&str) + Send + Sync>;

/// The servers of one pi process.
pub struct McpManager {
    connections: Vec<Arc<ServerConnection>>,
    errors: Vec<String>,
    temp_dir: PathBuf,
    notice: NoticeSink,
}

impl std::fmt::Debug for McpManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpManager")
            .field("connections", &self.connections)
            .finish_non_exhaustive()
    }
}

/// Whether an exposure puts a tool in front of the model in pi (everything but `hidden`).
pub fn offered(exposure: &str) -> bool {
    exposure != "hidden"
}

impl McpManager {
    /// A manager of `loaded`'s servers, none connected yet.
    pub fn new(
        loaded: LoadedConfig,
        ctx: ConnectContext,
        temp_dir: PathBuf,
        notice: NoticeSink,
    ) -> Arc<Self> {
        // rmcp's HTTP client (reqwest 0.13) brings no TLS provider of its own: ring, as ours.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let connections = loaded
            .servers
            .into_iter()
            .map(|entry| Arc::new(ServerConnection::new(entry, ctx.clone())))
            .collect();
        Arc::new(Self {
            connections,
            errors: loaded.errors,
            temp_dir,
            notice,
        })
    }

    /// The configuration errors found when loading.
    pub fn config_errors(&self) -> &[String] {
        &self.errors
    }

    /// Every configured server.
    pub fn connections(&self) -> &[Arc<ServerConnection>] {
        &self.connections
    }

    /// The connection of `name`.
    pub fn connection(&self, name: &str) -> Option<&Arc<ServerConnection>> {
        self.connections.iter().find(|conn| conn.name() == name)
    }

    /// Where binary resources and cut outputs are saved.
    pub fn temp_dir(&self) -> &Path {
        &self.temp_dir
    }

    fn notify(&self, text: &str) {
        (self.notice)(text);
    }

    /// Connects every enabled server at once, waiting at most `wait` in all (1.6.0's first
    /// prompt waits up to 10 s); failures are reported once each, and a server still starting
    /// when the wait ends is stopped and reported.
    pub async fn connect_all(&self, wait: std::time::Duration) {
        let attempts =
            self.connections
                .iter()
                .filter(|conn| conn.enabled())
                .map(|conn| async move {
                    let result = tokio::time::timeout(wait, conn.connect()).await;
                    (conn.name().to_owned(), result)
                });
        for (name, result) in futures::future::join_all(attempts).await {
            match result {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    self.notify(&format!("MCP server \"{name}\" failed to connect: {error}"));
                }
                Err(_) => self.notify(&format!(
                    "MCP server \"{name}\" did not connect within {} s; its tools are left out (/mcp reconnect {name} in the REPL)",
                    wait.as_secs()
                )),
            }
        }
    }

    /// The tools of the connected servers, in configuration order, with their pi names, plus
    /// the resource tools when a server offers resources.
    pub fn tools(self: &Arc<Self>) -> Vec<Arc<dyn Tool>> {
        let mut taken: Vec<String> = Vec::new();
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for conn in &self.connections {
            let status = conn.status();
            if status.state != State::Connected {
                continue;
            }
            let ids: Vec<String> = status
                .tools
                .iter()
                .map(|tool| {
                    tool.get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect();
            let names = {
                let taken = taken.clone();
                tool::tool_names(conn.name(), &ids, &move |name| {
                    taken.iter().any(|other| other == name)
                })
            };
            for ((id, name), server_tool) in ids.iter().zip(names).zip(&status.tools) {
                taken.push(name.clone());
                if !offered(conn.entry().tool_exposure(id)) {
                    continue;
                }
                tools.push(Arc::new(tool::McpTool::new(
                    self.clone(),
                    conn.name(),
                    &name,
                    server_tool,
                )));
            }
        }
        if !self.resource_servers().is_empty() {
            tools.extend(resources::resource_tools(self.clone()));
        }
        tools
    }

    /// The enabled, connected, non-hidden servers with resources.
    pub fn resource_servers(&self) -> Vec<Arc<ServerConnection>> {
        self.connections
            .iter()
            .filter(|conn| {
                conn.enabled() && offered(conn.entry().exposure()) && conn.status().has_resources
            })
            .cloned()
            .collect()
    }

    /// Whether `server`'s resource links can be read with `read_mcp_resource`.
    pub fn readable_resources(&self, server: &str) -> bool {
        self.resource_servers()
            .iter()
            .any(|conn| conn.name() == server)
    }

    fn drop_notice(&self, server: &str) -> impl Fn(&str) + Send + Sync + '_ {
        let server = server.to_owned();
        move |error: &str| {
            let first = error.lines().next().unwrap_or_default();
            self.notify(&format!(
                "MCP server \"{server}\" disconnected ({first}); reconnecting"
            ));
        }
    }

    /// Calls `tool` of `server` (reconnecting a dropped server first).
    pub async fn call_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<Map<String, Value>, String> {
        let conn = self
            .connection(server)
            .ok_or_else(|| format!("MCP server \"{server}\" is not configured."))?;
        if !conn.enabled() {
            return Err(format!("MCP server \"{server}\" is disabled."));
        }
        let on_drop = self.drop_notice(server);
        conn.call_tool(tool, arguments, &on_drop).await
    }

    /// Reads a resource of `server`.
    pub async fn read_resource(&self, server: &str, uri: &str) -> Result<Vec<Value>, String> {
        let conn = self.resource_server(server)?;
        let on_drop = self.drop_notice(server);
        conn.read_resource(uri, &on_drop).await
    }

    /// The resource server `name`, or the reference's error naming the ones there are.
    pub fn resource_server(&self, name: &str) -> Result<Arc<ServerConnection>, String> {
        let servers = self.resource_servers();
        if let Some(conn) = servers.iter().find(|conn| conn.name() == name) {
            return Ok(conn.clone());
        }
        let available: Vec<&str> = servers.iter().map(|conn| conn.name()).collect();
        Err(if available.is_empty() {
            format!("MCP server \"{name}\" has no resources")
        } else {
            format!(
                "MCP server \"{name}\" has no resources. Servers with resources: {}",
                available.join(", ")
            )
        })
    }

    /// Reconnects `name`.
    pub async fn reconnect(&self, name: &str) -> Result<Status, McpError> {
        let conn = self
            .connection(name)
            .ok_or_else(|| McpError::UnknownServer(name.to_owned()))?;
        let _ = conn.connect().await;
        Ok(conn.status())
    }

    /// Enables or disables `name`: saved to the file that defines it (a project override
    /// when there is one), applied to this process at once; returns that file.
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<PathBuf, McpError> {
        let conn = self
            .connection(name)
            .ok_or_else(|| McpError::UnknownServer(name.to_owned()))?;
        let path = conn
            .entry()
            .override_path
            .clone()
            .unwrap_or_else(|| conn.entry().source.clone());
        let (file, server) = (path.clone(), name.to_owned());
        tokio::task::spawn_blocking(move || config::set_enabled(&file, &server, enabled))
            .await
            .map_err(|error| McpError::config(&path, error.to_string()))??;
        conn.set_enabled(enabled).await;
        if enabled && let Err(error) = conn.connect().await {
            self.notify(&format!("MCP server \"{name}\" failed to connect: {error}"));
        }
        Ok(path)
    }

    /// Stops every server.
    pub async fn close_all(&self) {
        futures::future::join_all(self.connections.iter().map(|conn| conn.close())).await;
    }

    /// One line per server as `/mcp` prints it: `name: state, N tools (exposure, scope)`, the
    /// transport, and the error when there is one.
    pub fn status_text(&self) -> String {
        let mut out = String::new();
        if self.connections.is_empty() && self.errors.is_empty() {
            out.push_str("No MCP servers configured.\n");
        }
        for conn in &self.connections {
            out.push_str(&report_lines(conn.entry(), &conn.status()));
        }
        for error in &self.errors {
            out.push_str(&format!("config error: {error}\n"));
        }
        out
    }
}

/// The lines `pi mcp list` and `/mcp` print for one server (1.6.0's `list` text).
pub fn report_lines(entry: &ServerEntry, status: &Status) -> String {
    let state = match status.state {
        State::Connected => {
            let count = status.tools.len();
            format!(
                "connected, {count} tool{}",
                if count == 1 { "" } else { "s" }
            )
        }
        other => other.as_str().to_owned(),
    };
    let mut out = format!(
        "{}: {state} ({}, {})\n  {}\n",
        entry.name,
        entry.exposure(),
        entry.scope.as_str(),
        entry.describe_transport()
    );
    if let Some(path) = &entry.override_path {
        out.push_str(&format!("  project override: {}\n", path.display()));
    }
    if !status.tools.is_empty() {
        let tools: Vec<String> = status
            .tools
            .iter()
            .map(|tool| {
                let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
                let exposure = entry.tool_exposure(name);
                if exposure == entry.exposure() {
                    name.to_owned()
                } else {
                    format!("{name} [{exposure}]")
                }
            })
            .collect();
        out.push_str(&format!("  tools: {}\n", tools.join(", ")));
    }
    if status.has_resources {
        out.push_str("  offers resources\n");
    }
    if status.state != State::Connected
        && let Some(error) = &status.error
    {
        out.push_str(&format!(
            "  {}\n",
            error.split('\n').collect::<Vec<_>>().join("\n  ")
        ));
    }
    out
}
