//! `mcp.json`: the `mcpServers` files of 1.6.0 (`docs/mcp.md`, "Configure servers") — read,
//! validated and edited.
//!
//! * [`load`] reads `<agent dir>/mcp.json`, then, for a trusted project only,
//!   `<cwd>/.pi/mcp.json`: a project entry replaces a user-level entry of the same name; a
//!   project entry without `command`, `url` or `type` overrides only `enabled`, `exposure` and
//!   `toolExposure` of the user-level one; names that differ only in `-`/`_` are the same
//!   server (the second is rejected). Invalid entries are reported (with the file) and skipped.
//! * [`validate`] is 1.6.0's `validateMcpServerConfig` (pi-mcp's fields and pi's
//!   `exposure`/`toolExposure`), with the reference's error texts.
//! * [`add_server`] / [`remove_server`] / [`set_enabled`] edit one file, keeping its other
//!   content and its indentation (the reference's `editMcpServers`).
//!
//! Invariant: no network and no processes; the only I/O is reading and writing these files.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::session::mcp::McpError;

/// The exposures of 1.6.0 (`codemode-deferred` is read as `codemode`).
pub const EXPOSURES: [&str; 4] = ["codemode", "deferred", "direct", "hidden"];

/// The keys a project override may set.
const OVERRIDE_KEYS: [&str; 3] = ["enabled", "exposure", "toolExposure"];

/// Default per-request timeout in seconds (1.6.0 `DEFAULT_TIMEOUT_SECONDS`).
pub const DEFAULT_TIMEOUT_SECONDS: f64 = 60.0;

/// Where a server entry comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `<agent dir>/mcp.json`.
    Global,
    /// `<cwd>/.pi/mcp.json` of a trusted project.
    Project,
}

impl Scope {
    /// The reference's name of the scope (`global`, `project`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::Project => "project",
        }
    }
}

/// How a server is reached.
#[derive(Clone, Debug, PartialEq)]
pub enum Transport {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio {
        /// The executable (not a shell command).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to pi's environment (values may use `${VAR}` or `!command`).
        env: Vec<(String, String)>,
        /// Working directory (relative to the session directory).
        cwd: Option<String>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Headers (values may use `${VAR}` or `!command`).
        headers: Vec<(String, String)>,
    },
}

/// One validated server entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerEntry {
    /// The server's name (letters, digits, `_`, `-`).
    pub name: String,
    /// The entry as written (after exposure aliases were resolved).
    pub raw: Map<String, Value>,
    /// How it is reached.
    pub transport: Transport,
    /// The file that defines it.
    pub source: PathBuf,
    /// Global or project.
    pub scope: Scope,
    /// The project file whose override applies to this (global) entry.
    pub override_path: Option<PathBuf>,
}

impl ServerEntry {
    /// False for `enabled: false`.
    pub fn enabled(&self) -> bool {
        self.raw.get("enabled").and_then(Value::as_bool) != Some(false)
    }

    /// The server's exposure (`codemode` by default).
    pub fn exposure(&self) -> &str {
        self.raw
            .get("exposure")
            .and_then(Value::as_str)
            .unwrap_or("codemode")
    }

    /// The exposure of one of its tools: an exact `toolExposure` key, else the first pattern
    /// that matches, else the server's (1.6.0 `getMcpToolExposure`).
    pub fn tool_exposure(&self, tool: &str) -> &str {
        if let Some(Value::Object(overrides)) = self.raw.get("toolExposure") {
            if let Some(exposure) = overrides.get(tool).and_then(Value::as_str) {
                return exposure;
            }
            for (pattern, exposure) in overrides {
                if pattern.contains('*')
                    && crate::session::tools::ToolMatcher::new(std::slice::from_ref(pattern))
                        .matches(tool)
                    && let Some(exposure) = exposure.as_str()
                {
                    return exposure;
                }
            }
        }
        self.exposure()
    }

    /// The per-request timeout.
    pub fn timeout(&self) -> std::time::Duration {
        let seconds = self
            .raw
            .get("timeout")
            .and_then(Value::as_f64)
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
        std::time::Duration::from_secs_f64(seconds.clamp(0.001, 86_400.0))
    }

    /// The configured `description`, trimmed.
    pub fn description(&self) -> Option<&str> {
        self.raw
            .get("description")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|text| !text.is_empty())
    }

    /// The command line or URL, as `pi mcp list` shows it.
    pub fn describe_transport(&self) -> String {
        match &self.transport {
            Transport::Stdio { command, args, .. } => {
                let mut parts = vec![command.clone()];
                parts.extend(args.iter().cloned());
                parts.join(" ")
            }
            Transport::Http { url, .. } => url.clone(),
        }
    }
}

/// What [`load`] found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadedConfig {
    /// Valid entries in file order (global first; a project entry replaces in place).
    pub servers: Vec<ServerEntry>,
    /// `<file>: <problem>` for every invalid entry or file.
    pub errors: Vec<String>,
    /// The project file, when the project is trusted.
    pub project_config: Option<PathBuf>,
}

impl LoadedConfig {
    /// The entry called `name`.
    pub fn server(&self, name: &str) -> Option<&ServerEntry> {
        self.servers.iter().find(|server| server.name == name)
    }
}

/// The user-level file.
pub fn global_path(agent_dir: &Path) -> PathBuf {
    agent_dir.join("mcp.json")
}

/// A project's file.
pub fn project_path(cwd: &Path) -> PathBuf {
    cwd.join(".pi").join("mcp.json")
}

/// Reads the user-level file and, when `project_trusted`, the project's (1.6.0
/// `loadMcpConfig`).
pub fn load(agent_dir: &Path, cwd: &Path, project_trusted: bool) -> LoadedConfig {
    let mut loaded = LoadedConfig::default();
    read_file(&global_path(agent_dir), Scope::Global, &mut loaded);
    if project_trusted {
        let project = project_path(cwd);
        read_file(&project, Scope::Project, &mut loaded);
        loaded.project_config = Some(project);
    }
    loaded
}

/// The namespace a server's tools share: `mcp__<name>` with `-` as `_` (1.6.0 `mcpNamespace`).
pub fn namespace(server: &str) -> String {
    format!("mcp__{}", server.replace('-', "_"))
}

fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

fn read_file(path: &Path, scope: Scope, loaded: &mut LoadedConfig) {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
        Err(error) => {
            loaded.errors.push(format!("{}: {error}", path.display()));
            return;
        }
    };
    let parsed: Value = match serde_json::from_str(strip_bom(&text)) {
        Ok(value) => value,
        Err(error) => {
            loaded.errors.push(format!("{}: {error}", path.display()));
            return;
        }
    };
    let servers = match &parsed {
        Value::Object(object) => match object.get("mcpServers") {
            None => return,
            Some(Value::Object(servers)) => servers.clone(),
            Some(_) => {
                loaded.errors.push(format!(
                    "{}: expected an object with an \"mcpServers\" object",
                    path.display()
                ));
                return;
            }
        },
        _ => {
            loaded.errors.push(format!(
                "{}: expected an object with an \"mcpServers\" object",
                path.display()
            ));
            return;
        }
    };
    for (name, value) in servers {
        if scope == Scope::Project
            && let Value::Object(object) = &value
            && is_override(object)
        {
            let Some(at) = loaded.servers.iter().position(|entry| entry.name == name) else {
                loaded.errors.push(format!(
                    "{}: server \"{name}\" needs \"command\" or \"url\", or a global server to override",
                    path.display()
                ));
                continue;
            };
            if object
                .keys()
                .any(|key| !OVERRIDE_KEYS.contains(&key.as_str()))
            {
                loaded.errors.push(format!(
                    "{}: server \"{name}\": an override can only set {}",
                    path.display(),
                    OVERRIDE_KEYS.join(", ")
                ));
                continue;
            }
            let base = &loaded.servers[at];
            let mut merged = base.raw.clone();
            for (key, value) in object {
                merged.insert(key.clone(), value.clone());
            }
            match validate(&name, &Value::Object(merged)) {
                Ok((raw, transport)) => {
                    let entry = ServerEntry {
                        raw,
                        transport,
                        override_path: Some(path.to_path_buf()),
                        ..base.clone()
                    };
                    loaded.servers[at] = entry;
                }
                Err(error) => loaded.errors.push(format!("{}: {error}", path.display())),
            }
            continue;
        }
        let (raw, transport) = match validate(&name, &value) {
            Ok(valid) => valid,
            Err(error) => {
                loaded.errors.push(format!("{}: {error}", path.display()));
                continue;
            }
        };
        if let Some(clash) = loaded
            .servers
            .iter()
            .find(|other| other.name != name && namespace(&other.name) == namespace(&name))
        {
            loaded.errors.push(format!(
                "{}: server \"{name}\" conflicts with \"{}\"",
                path.display(),
                clash.name
            ));
            continue;
        }
        if scope == Scope::Project
            && matches!(transport, Transport::Http { .. })
            && raw.contains_key("auth")
        {
            loaded.errors.push(format!(
                "{}: server \"{name}\": auth is only allowed in the global mcp.json",
                path.display()
            ));
            continue;
        }
        let entry = ServerEntry {
            name: name.clone(),
            raw,
            transport,
            source: path.to_path_buf(),
            scope,
            override_path: None,
        };
        match loaded.servers.iter().position(|other| other.name == name) {
            Some(at) => loaded.servers[at] = entry,
            None => loaded.servers.push(entry),
        }
    }
}

/// True for an entry without `command`, `url` and `type` (1.6.0 `isMcpServerOverride`).
pub fn is_override(entry: &Map<String, Value>) -> bool {
    !entry.contains_key("command") && !entry.contains_key("url") && !entry.contains_key("type")
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
}

fn string_record(value: Option<&Value>) -> Option<Result<Vec<(String, String)>, ()>> {
    let value = value?;
    Some(match value {
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| match value {
                Value::String(text) => Ok((key.clone(), text.clone())),
                _ => Err(()),
            })
            .collect(),
        _ => Err(()),
    })
}

/// Validates one entry (1.6.0 `validateMcpServerConfig`); returns it with exposure aliases
/// resolved and its transport, or the reference's message.
pub fn validate(name: &str, raw: &Value) -> Result<(Map<String, Value>, Transport), String> {
    if !valid_name(name) {
        return Err(format!(
            "invalid server name \"{name}\" (use letters, digits, \"_\" and \"-\")"
        ));
    }
    let Value::Object(object) = raw else {
        return Err(format!("server \"{name}\" must be an object"));
    };
    let mut object = object.clone();
    for key in ["exposure"] {
        if object.get(key).and_then(Value::as_str) == Some("codemode-deferred") {
            object.insert(key.to_owned(), Value::String("codemode".to_owned()));
        }
    }
    if let Some(Value::Object(tools)) = object.get_mut("toolExposure") {
        for value in tools.values_mut() {
            if value.as_str() == Some("codemode-deferred") {
                *value = Value::String("codemode".to_owned());
            }
        }
    }
    let fail = |message: &str| Err(format!("server \"{name}\": {message}"));
    if object
        .get("enabled")
        .is_some_and(|value| !value.is_boolean())
    {
        return fail("enabled must be a boolean");
    }
    if object
        .get("description")
        .is_some_and(|value| !value.is_string())
    {
        return fail("description must be a string");
    }
    if let Some(timeout) = object.get("timeout")
        && !timeout.as_f64().is_some_and(|seconds| seconds > 0.0)
    {
        return fail("timeout must be a positive number of seconds");
    }
    let kind = object.get("type").cloned();
    if kind.as_ref().and_then(Value::as_str) == Some("sse") {
        return fail("legacy SSE transport is not supported; use the streamable HTTP URL");
    }
    let kind = kind.as_ref().map(|value| value.as_str().unwrap_or("\u{0}"));
    let transport = match (object.get("url"), object.get("command")) {
        (Some(Value::String(url)), _)
            if matches!(kind, None | Some("http") | Some("streamable-http")) =>
        {
            let parsed = reqwest::Url::parse(url).ok();
            if !parsed.is_some_and(|url| url.scheme() == "http" || url.scheme() == "https") {
                return fail("url must be an http or https URL");
            }
            let headers = match string_record(object.get("headers")) {
                None => Vec::new(),
                Some(Ok(headers)) => headers,
                Some(Err(())) => return fail("headers must map names to strings"),
            };
            if object.get("oauth").is_some_and(|value| !value.is_object()) {
                return fail("oauth must be an object");
            }
            Transport::Http {
                url: url.clone(),
                headers,
            }
        }
        (_, Some(Value::String(command))) if matches!(kind, None | Some("stdio")) => {
            let args = match object.get("args") {
                None => Vec::new(),
                Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                Some(_) => return fail("args must be an array of strings"),
            };
            let env = match string_record(object.get("env")) {
                None => Vec::new(),
                Some(Ok(env)) => env,
                Some(Err(())) => return fail("env must map names to strings"),
            };
            let cwd = match object.get("cwd") {
                None => None,
                Some(Value::String(cwd)) => Some(cwd.clone()),
                Some(_) => return fail("cwd must be a string"),
            };
            Transport::Stdio {
                command: command.clone(),
                args,
                env,
                cwd,
            }
        }
        _ => {
            return Err(format!(
                "server \"{name}\" needs either \"command\" (stdio) or \"url\" (streamable HTTP)"
            ));
        }
    };
    let exposures = EXPOSURES
        .iter()
        .map(|value| format!("\"{value}\""))
        .collect::<Vec<_>>()
        .join(", ");
    if let Some(exposure) = object.get("exposure")
        && !exposure
            .as_str()
            .is_some_and(|value| EXPOSURES.contains(&value))
    {
        return fail(&format!("exposure must be one of {exposures}"));
    }
    match object.get("toolExposure") {
        None => {}
        Some(Value::Object(tools)) => {
            for (tool, value) in tools {
                if !value
                    .as_str()
                    .is_some_and(|value| EXPOSURES.contains(&value))
                {
                    return fail(&format!(
                        "toolExposure \"{tool}\" must be one of {exposures}"
                    ));
                }
            }
        }
        Some(_) => return fail("toolExposure must map tool names to exposures"),
    }
    Ok((object, transport))
}

/// Reads a file for editing: its object and the indentation it uses.
fn read_for_edit(path: &Path) -> Result<(Map<String, Value>, String), McpError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => return Err(McpError::config(path, error.to_string())),
    };
    let Some(text) = text else {
        return Ok((Map::new(), "  ".to_owned()));
    };
    let text = strip_bom(&text);
    let parsed: Value =
        serde_json::from_str(text).map_err(|error| McpError::config(path, error.to_string()))?;
    let Value::Object(object) = parsed else {
        return Err(McpError::config(
            path,
            "expected an object with an \"mcpServers\" object",
        ));
    };
    if object
        .get("mcpServers")
        .is_some_and(|servers| !servers.is_object())
    {
        return Err(McpError::config(
            path,
            "expected an object with an \"mcpServers\" object",
        ));
    }
    let indent = text
        .lines()
        .find_map(|line| {
            let trimmed = line.trim_start_matches([' ', '\t']);
            (trimmed.len() < line.len() && !trimmed.is_empty())
                .then(|| line[..line.len() - trimmed.len()].to_owned())
        })
        .unwrap_or_else(|| "  ".to_owned());
    Ok((object, indent))
}

fn write_for_edit(path: &Path, object: &Map<String, Value>, indent: &str) -> Result<(), McpError> {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(object, &mut serializer)
        .map_err(|error| McpError::config(path, error.to_string()))?;
    out.push(b'\n');
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|error| McpError::config(path, error.to_string()))?;
    }
    std::fs::write(path, out).map_err(|error| McpError::config(path, error.to_string()))
}

/// Adds or replaces `name` in `path`; true when it replaced one (1.6.0 `addMcpServerConfig`).
pub fn add_server(path: &Path, name: &str, config: Map<String, Value>) -> Result<bool, McpError> {
    let (mut object, indent) = read_for_edit(path)?;
    let mut servers = match object.remove("mcpServers") {
        Some(Value::Object(servers)) => servers,
        _ => Map::new(),
    };
    let replaced = servers.contains_key(name);
    servers.insert(name.to_owned(), Value::Object(config));
    object.insert("mcpServers".to_owned(), Value::Object(servers));
    write_for_edit(path, &object, &indent)?;
    Ok(replaced)
}

/// Removes `name` from `path`; false when the file does not define it.
pub fn remove_server(path: &Path, name: &str) -> Result<bool, McpError> {
    if !path.exists() {
        return Ok(false);
    }
    let (mut object, indent) = read_for_edit(path)?;
    let Some(Value::Object(servers)) = object.get_mut("mcpServers") else {
        return Ok(false);
    };
    if servers.shift_remove(name).is_none() {
        return Ok(false);
    }
    write_for_edit(path, &object, &indent)?;
    Ok(true)
}

/// Sets `enabled` of `name` in `path` (1.6.0 `updateMcpServerConfig`: enabling a full entry
/// deletes the key; an override keeps it).
pub fn set_enabled(path: &Path, name: &str, enabled: bool) -> Result<(), McpError> {
    let (mut object, indent) = read_for_edit(path)?;
    let server = object
        .get_mut("mcpServers")
        .and_then(Value::as_object_mut)
        .and_then(|servers| servers.get_mut(name))
        .and_then(Value::as_object_mut);
    let Some(server) = server else {
        return Err(McpError::config(
            path,
            format!("does not define MCP server \"{name}\""),
        ));
    };
    if enabled && !is_override(server) {
        server.shift_remove("enabled");
    } else {
        server.insert("enabled".to_owned(), Value::Bool(enabled));
    }
    write_for_edit(path, &object, &indent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(path: &Path, value: Value) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, value.to_string()).unwrap();
    }

    #[test]
    fn a_project_entry_replaces_the_global_one_and_overrides_keep_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent");
        let cwd = dir.path().join("proj");
        write(
            &global_path(&agent),
            json!({"mcpServers": {
                "a": {"command": "x", "env": {"K": "${V}"}},
                "b": {"url": "http://127.0.0.1:1/mcp"},
                "c-d": {"command": "c"}
            }}),
        );
        write(
            &project_path(&cwd),
            json!({"mcpServers": {
                "a": {"enabled": false},
                "b": {"command": "local"},
                "c_d": {"command": "clash"},
                "d": {"enabled": true}
            }}),
        );
        let untrusted = load(&agent, &cwd, false);
        assert_eq!(untrusted.servers.len(), 3);
        assert!(untrusted.errors.is_empty());
        let loaded = load(&agent, &cwd, true);
        let a = loaded.server("a").unwrap();
        assert!(!a.enabled());
        assert_eq!(a.scope, Scope::Global);
        assert!(matches!(&a.transport, Transport::Stdio { env, .. } if env[0].1 == "${V}"));
        let b = loaded.server("b").unwrap();
        assert_eq!(b.scope, Scope::Project);
        assert_eq!(b.describe_transport(), "local");
        assert!(loaded.server("c_d").is_none());
        assert_eq!(loaded.errors.len(), 2, "{:?}", loaded.errors);
        assert!(loaded.errors[0].ends_with("server \"c_d\" conflicts with \"c-d\""));
        assert!(loaded.errors[1].contains("server \"d\" needs \"command\" or \"url\""));
    }

    #[test]
    fn validation_gives_the_reference_messages() {
        let cases = [
            (
                "a b",
                json!({"command": "x"}),
                "invalid server name \"a b\" (use letters, digits, \"_\" and \"-\")",
            ),
            (
                "s",
                json!({"type": "sse", "url": "http://x"}),
                "server \"s\": legacy SSE transport is not supported; use the streamable HTTP URL",
            ),
            (
                "s",
                json!({}),
                "server \"s\" needs either \"command\" (stdio) or \"url\" (streamable HTTP)",
            ),
            (
                "s",
                json!({"command": "x", "args": [1]}),
                "server \"s\": args must be an array of strings",
            ),
            (
                "s",
                json!({"url": "ftp://x"}),
                "server \"s\": url must be an http or https URL",
            ),
            (
                "s",
                json!({"command": "x", "exposure": "loud"}),
                "server \"s\": exposure must be one of \"codemode\", \"deferred\", \"direct\", \"hidden\"",
            ),
            (
                "s",
                json!({"command": "x", "timeout": 0}),
                "server \"s\": timeout must be a positive number of seconds",
            ),
        ];
        for (name, raw, message) in cases {
            assert_eq!(validate(name, &raw).unwrap_err(), message);
        }
        let (raw, _) = validate(
            "s",
            &json!({"command": "x", "exposure": "codemode-deferred"}),
        )
        .unwrap();
        assert_eq!(raw["exposure"], "codemode");
    }

    #[test]
    fn tool_exposure_prefers_exact_names_then_the_first_pattern() {
        let (raw, transport) = validate(
            "s",
            &json!({"command": "x", "exposure": "deferred", "toolExposure": {"get_*": "hidden", "get_one": "direct", "g*": "codemode"}}),
        )
        .unwrap();
        let entry = ServerEntry {
            name: "s".into(),
            raw,
            transport,
            source: PathBuf::new(),
            scope: Scope::Global,
            override_path: None,
        };
        assert_eq!(entry.tool_exposure("get_one"), "direct");
        assert_eq!(entry.tool_exposure("get_two"), "hidden");
        assert_eq!(entry.tool_exposure("go"), "codemode");
        assert_eq!(entry.tool_exposure("other"), "deferred");
    }

    #[test]
    fn edits_keep_other_content_and_indentation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        std::fs::write(&path, "{\n    \"other\": 1,\n    \"mcpServers\": {}\n}\n").unwrap();
        let config = json!({"command": "x"}).as_object().unwrap().clone();
        assert!(!add_server(&path, "a", config.clone()).unwrap());
        assert!(add_server(&path, "a", config).unwrap());
        set_enabled(&path, "a", false).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("{\n    \"other\": 1,\n    \"mcpServers\": {\n        \"a\""));
        assert!(text.contains("\"enabled\": false"));
        set_enabled(&path, "a", true).unwrap();
        assert!(!std::fs::read_to_string(&path).unwrap().contains("enabled"));
        assert!(remove_server(&path, "a").unwrap());
        assert!(!remove_server(&path, "a").unwrap());
    }
}
