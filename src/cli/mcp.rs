//! `pi mcp add|remove|list|get`: MCP servers from the shell, without a session (1.6.0's
//! `extensions/mcp/cli.js`: its options, messages and exit codes), and the [`manager`] an
//! agent run connects.
//!
//! The options are parsed as the reference parses them (not with clap): `-l` is `--local`,
//! `--` ends the options and the positionals after the server name are the command, and
//! repeatable `--env`/`--header`. `login`/`logout` (OAuth) are not implemented and say so.
//! `get <server>` is pi's own: the entry as JSON with its file.
//!
//! Invariant: server output (errors, stderr tails, tool names) reaches the terminal only
//! through `support::term`.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use serde_json::{Map, Value, json};

use crate::cli::config::Env;
use crate::cli::keys::ShellKeyResolver;
use crate::session::mcp::client::{ConnectContext, ServerConnection, State};
use crate::session::mcp::config::{self, LoadedConfig, Scope};
use crate::session::mcp::{McpManager, report_lines};
use crate::session::tools::shell::ShellConfig;
use crate::session::trust::ProjectTrustStore;
use crate::support::term;

const HELP: &str = "Usage:
  pi mcp add <server> [options] -- <command> [args...]
  pi mcp add <server> [options] --url <url>
  pi mcp remove <server> [-l]
  pi mcp list [--json]
  pi mcp get <server>

Configure and check MCP servers without starting a session.
Reads ~/.pi/agent/mcp.json and, in trusted projects, .pi/mcp.json.

Commands:
  add <server>            Add or replace a server in mcp.json
  remove <server>         Remove a server from mcp.json
  list                    Show state, tools, and errors (exits 1 on failure)
  get <server>            Show one server's entry and the file that defines it

Options for add and remove:
  -l, --local             Use .pi/mcp.json in the current project instead of the global file

Options for add:
  --url <url>             Streamable HTTP server URL (instead of a command)
  --env <KEY=VALUE>       Environment variable for a stdio server (repeatable)
  --cwd <dir>             Working directory for a stdio server
  --header <KEY=VALUE>    HTTP header (repeatable)
  --bearer-token-env-var <NAME>
                          Send \"Authorization: Bearer ${NAME}\"
  --exposure <mode>       codemode (default), deferred, direct, or hidden
  --description <text>    What the server offers

Other options:
  --json                  Print the list as JSON";

/// `pi mcp <command> --help`: the command's usage and options.
fn sub_help(command: &str) -> Option<&'static str> {
    Some(match command {
        "add" => {
            "Usage:
  pi mcp add <server> [options] -- <command> [args...]
  pi mcp add <server> [options] --url <url>

Add or replace a server in mcp.json (it is not connected; run pi mcp list to check it).

Options:
  -l, --local             Use .pi/mcp.json in the current project instead of the global file
  --url <url>             Streamable HTTP server URL (instead of a command)
  --env <KEY=VALUE>       Environment variable for a stdio server (repeatable)
  --cwd <dir>             Working directory for a stdio server
  --header <KEY=VALUE>    HTTP header (repeatable)
  --bearer-token-env-var <NAME>
                          Send \"Authorization: Bearer ${NAME}\"
  --exposure <mode>       codemode (default), deferred, direct, or hidden
  --description <text>    What the server offers"
        }
        "remove" => {
            "Usage: pi mcp remove <server> [-l]

Remove a server from mcp.json.

Options:
  -l, --local             Use .pi/mcp.json in the current project instead of the global file"
        }
        "list" => {
            "Usage: pi mcp list [--json]

Connect to every enabled server and print its state, tools, and errors; exit 1 when an
entry is invalid or an enabled server is not connected.

Options:
  --json                  Print the list as JSON"
        }
        "get" => {
            "Usage: pi mcp get <server>

Show one server's entry (as JSON) and the file that defines it."
        }
        _ => return None,
    })
}

const HELP_HINT: &str = "Use \"pi mcp --help\" for usage.";

/// The connection context of this process: its environment, home and key resolver.
fn connect_context(env: &Env, cwd: &Path) -> ConnectContext {
    let mut vars: Vec<(String, String)> = env
        .vars()
        .iter()
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    vars.sort();
    ConnectContext {
        cwd: cwd.to_path_buf(),
        home: env.home().map(Path::to_path_buf),
        env: vars,
        resolver: Arc::new(ShellKeyResolver::new(env)),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    }
}

/// The MCP servers of an agent run: `mcp.json` (the project's when trusted), problems
/// reported on stderr as warnings.
pub fn manager(
    env: &Env,
    agent_dir: &Path,
    cwd: &Path,
    project_trusted: bool,
    shell: &ShellConfig,
) -> Arc<McpManager> {
    let loaded = config::load(agent_dir, cwd, project_trusted);
    for error in &loaded.errors {
        eprintln!("Warning: MCP config error: {}", term::line(error));
    }
    let notice: crate::session::mcp::NoticeSink = Arc::new(|text: &str| {
        eprintln!("Warning: {}", term::text(text));
    });
    McpManager::new(
        loaded,
        connect_context(env, cwd),
        shell.temp_dir.clone(),
        notice,
    )
}

/// Parsed options: positionals, single values and repeated values.
#[derive(Debug, Default)]
struct Options {
    positional: Vec<String>,
    values: Vec<(String, String)>,
    flags: Vec<String>,
    lists: Vec<(String, String)>,
}

impl Options {
    fn value(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    fn has(&self, name: &str) -> bool {
        self.flags.iter().any(|flag| flag == name)
            || self.values.iter().any(|(key, _)| key == name)
            || self.lists.iter().any(|(key, _)| key == name)
    }

    fn list(&self, name: &str) -> Vec<&str> {
        self.lists
            .iter()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
            .collect()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Flag,
    Value,
    List,
}

/// 1.6.0 `parseOptions`.
fn parse_options(
    args: &[String],
    known: &[(&str, Kind)],
    max_positionals: usize,
) -> Result<Options, String> {
    let mut out = Options::default();
    let mut idx = 0;
    while idx < args.len() {
        let typed = &args[idx];
        let arg = if typed == "-l" {
            "--local"
        } else {
            typed.as_str()
        };
        if arg == "--" || out.positional.len() >= max_positionals {
            let from = if arg == "--" { idx + 1 } else { idx };
            out.positional.extend(args[from..].iter().cloned());
            break;
        }
        let Some(name) = arg.strip_prefix("--") else {
            out.positional.push(arg.to_owned());
            idx += 1;
            continue;
        };
        let Some((_, kind)) = known.iter().find(|(known, _)| *known == name) else {
            return Err(format!("Unknown option {typed}.\n{HELP_HINT}"));
        };
        if *kind == Kind::Flag {
            out.flags.push(name.to_owned());
            idx += 1;
            continue;
        }
        let Some(value) = args.get(idx + 1) else {
            return Err(format!("{arg} needs a value."));
        };
        match kind {
            Kind::List => out.lists.push((name.to_owned(), value.clone())),
            _ => out.values.push((name.to_owned(), value.clone())),
        }
        idx += 2;
    }
    Ok(out)
}

fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", term::text(text));
}

fn err(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{}", term::text(text));
}

fn code(value: u8) -> ExitCode {
    ExitCode::from(value)
}

/// Runs `pi mcp <args>`.
pub fn run_mcp(args: &[String], env: &Env) -> Result<ExitCode> {
    let Some(command) = args.first() else {
        out(HELP);
        return Ok(ExitCode::SUCCESS);
    };
    if command == "help" || args.iter().any(|arg| arg == "--help" || arg == "-h") {
        out(sub_help(command).unwrap_or(HELP));
        return Ok(ExitCode::SUCCESS);
    }
    let rest = &args[1..];
    let agent_dir = env.agent_dir();
    let cwd = env.cwd();
    let project_config = config::project_path(cwd);
    match command.as_str() {
        "add" => return Ok(add(rest, &agent_dir, &project_config, env)),
        "remove" => return Ok(remove(rest, &agent_dir, &project_config, cwd)),
        _ => {}
    }
    let trusted = ProjectTrustStore::new(&agent_dir, env.clock())
        .get(cwd)
        .ok()
        .flatten()
        == Some(true);
    let loaded = config::load(&agent_dir, cwd, trusted);
    let untrusted_note = (!trusted && project_config.exists()).then(|| {
        format!(
            "{} is ignored because the project is not trusted. Start pi in the project to trust it.",
            project_config.display()
        )
    });
    match command.as_str() {
        "list" => {
            let parsed = match parse_options(rest, &[("json", Kind::Flag)], usize::MAX) {
                Ok(parsed) => parsed,
                Err(message) => {
                    err(&message);
                    return Ok(code(1));
                }
            };
            if !parsed.positional.is_empty() {
                err(&format!("Usage: pi mcp list [--json]\n{HELP_HINT}"));
                return Ok(code(1));
            }
            list(&loaded, parsed.has("json"), untrusted_note, env, &agent_dir)
        }
        "get" => {
            let [name] = rest else {
                err(&format!("Usage: pi mcp get <server>\n{HELP_HINT}"));
                return Ok(code(1));
            };
            let Some(entry) = loaded.server(name) else {
                no_server(&loaded, name, untrusted_note.as_deref());
                return Ok(code(1));
            };
            let mut shown = Map::new();
            shown.insert("name".to_owned(), json!(entry.name));
            shown.insert("scope".to_owned(), json!(entry.scope.as_str()));
            shown.insert(
                "source".to_owned(),
                json!(entry.source.display().to_string()),
            );
            if let Some(path) = &entry.override_path {
                shown.insert("override".to_owned(), json!(path.display().to_string()));
            }
            shown.insert("config".to_owned(), Value::Object(entry.raw.clone()));
            out(&crate::support::json::to_js_pretty(&Value::Object(shown)));
            Ok(ExitCode::SUCCESS)
        }
        "login" | "logout" => Err(crate::cli::UsageError(format!(
            "`pi mcp {command}` (OAuth sign-in) is not implemented by pi; give the server an Authorization header (pi mcp add <server> --url <url> --bearer-token-env-var <NAME>)"
        ))
        .into()),
        other => {
            err(&format!("Unknown mcp command \"{other}\".\n{HELP_HINT}"));
            Ok(code(1))
        }
    }
}

fn no_server(loaded: &LoadedConfig, name: &str, untrusted_note: Option<&str>) {
    let names: Vec<&str> = loaded
        .servers
        .iter()
        .map(|server| server.name.as_str())
        .collect();
    let configured = if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    };
    let note = untrusted_note
        .map(|note| format!(" {note}"))
        .unwrap_or_default();
    err(&format!(
        "No MCP server named \"{name}\".{note} Configured: {configured}."
    ));
}

fn pairs(option: &str, values: Vec<&str>) -> Result<Vec<(String, String)>, String> {
    values
        .into_iter()
        .map(|pair| match pair.find('=') {
            Some(at) if at > 0 => Ok((pair[..at].to_owned(), pair[at + 1..].to_owned())),
            _ => Err(format!("--{option} expects KEY=VALUE, got \"{pair}\".")),
        })
        .collect()
}

fn record(pairs: Vec<(String, String)>) -> Value {
    Value::Object(
        pairs
            .into_iter()
            .map(|(key, value)| (key, Value::String(value)))
            .collect(),
    )
}

fn add(args: &[String], agent_dir: &Path, project_config: &Path, env: &Env) -> ExitCode {
    let usage = format!(
        "Usage: pi mcp add <server> [options] (--url <url> | -- <command> [args...])\n{HELP_HINT}"
    );
    let known = [
        ("local", Kind::Flag),
        ("url", Kind::Value),
        ("env", Kind::List),
        ("cwd", Kind::Value),
        ("header", Kind::List),
        ("bearer-token-env-var", Kind::Value),
        ("exposure", Kind::Value),
        ("description", Kind::Value),
    ];
    let parsed = match parse_options(args, &known, 2) {
        Ok(parsed) => parsed,
        Err(message) => {
            err(&message);
            return code(1);
        }
    };
    let Some((name, command)) = parsed.positional.split_first() else {
        err(&usage);
        return code(1);
    };
    let url = parsed.value("url");
    if url.is_none() == command.is_empty() {
        err(&usage);
        return code(1);
    }
    let http_only = ["header", "bearer-token-env-var"];
    let stdio_only = ["env", "cwd"];
    let misplaced = if url.is_none() {
        http_only.iter().find(|option| parsed.has(option))
    } else {
        stdio_only.iter().find(|option| parsed.has(option))
    };
    if let Some(option) = misplaced {
        let target = if url.is_none() {
            "HTTP servers (--url)"
        } else {
            "stdio servers"
        };
        err(&format!("--{option} only applies to {target}."));
        return code(1);
    }
    let mut entry = Map::new();
    if let Some(url) = url {
        let mut headers = match pairs("header", parsed.list("header")) {
            Ok(headers) => headers,
            Err(message) => {
                err(&message);
                return code(1);
            }
        };
        if let Some(bearer) = parsed.value("bearer-token-env-var") {
            headers.retain(|(key, _)| key != "Authorization");
            headers.push(("Authorization".to_owned(), format!("Bearer ${{{bearer}}}")));
        }
        entry.insert("url".to_owned(), json!(url));
        if !headers.is_empty() {
            entry.insert("headers".to_owned(), record(headers));
        }
    } else {
        let vars = match pairs("env", parsed.list("env")) {
            Ok(vars) => vars,
            Err(message) => {
                err(&message);
                return code(1);
            }
        };
        let (executable, command_args) = command.split_first().unwrap_or((name, &[]));
        entry.insert("command".to_owned(), json!(executable));
        if !command_args.is_empty() {
            entry.insert("args".to_owned(), json!(command_args));
        }
        if !vars.is_empty() {
            entry.insert("env".to_owned(), record(vars));
        }
        if let Some(cwd) = parsed.value("cwd") {
            entry.insert("cwd".to_owned(), json!(cwd));
        }
    }
    if let Some(exposure) = parsed.value("exposure") {
        entry.insert("exposure".to_owned(), json!(exposure));
    }
    if let Some(description) = parsed.value("description") {
        entry.insert("description".to_owned(), json!(description));
    }
    let validated = match config::validate(name, &Value::Object(entry)) {
        Ok((raw, _)) => raw,
        Err(message) => {
            err(&message);
            return code(1);
        }
    };
    let project = parsed.has("local");
    let (path, scope) = if project {
        (project_config.to_path_buf(), Scope::Project)
    } else {
        (config::global_path(agent_dir), Scope::Global)
    };
    let replaced = match config::add_server(&path, name, validated.clone()) {
        Ok(replaced) => replaced,
        Err(error) => {
            err(&format!("Could not update {}: {error}", path.display()));
            return code(1);
        }
    };
    out(&format!(
        "{} {} MCP server \"{name}\" in {}.",
        if replaced { "Replaced" } else { "Added" },
        scope.as_str(),
        path.display()
    ));
    let trusted = ProjectTrustStore::new(agent_dir, env.clock())
        .get(env.cwd())
        .ok()
        .flatten()
        == Some(true);
    if project && !trusted {
        out(&format!(
            "The project is not trusted, so {} is ignored until you start pi in the project and trust it.",
            path.display()
        ));
    }
    out("Check it with: pi mcp list");
    ExitCode::SUCCESS
}

fn remove(args: &[String], agent_dir: &Path, project_config: &Path, cwd: &Path) -> ExitCode {
    let parsed = match parse_options(args, &[("local", Kind::Flag)], usize::MAX) {
        Ok(parsed) => parsed,
        Err(message) => {
            err(&message);
            return code(1);
        }
    };
    let [name] = parsed.positional.as_slice() else {
        err(&format!("Usage: pi mcp remove <server> [-l]\n{HELP_HINT}"));
        return code(1);
    };
    let project = parsed.has("local");
    let (path, scope) = if project {
        (project_config.to_path_buf(), Scope::Project)
    } else {
        (config::global_path(agent_dir), Scope::Global)
    };
    match config::remove_server(&path, name) {
        Ok(true) => {
            out(&format!(
                "Removed {} MCP server \"{name}\" from {}.",
                scope.as_str(),
                path.display()
            ));
            ExitCode::SUCCESS
        }
        Ok(false) => {
            let other = config::load(agent_dir, cwd, true)
                .servers
                .into_iter()
                .find(|server| server.name == *name && server.scope != scope);
            let hint = other
                .map(|other| {
                    format!(
                        " It is defined in {}{}.",
                        other.source.display(),
                        if other.scope == Scope::Project {
                            "; use --local"
                        } else {
                            "; omit --local"
                        }
                    )
                })
                .unwrap_or_default();
            err(&format!(
                "No {} MCP server named \"{name}\" in {}.{hint}",
                scope.as_str(),
                path.display()
            ));
            code(1)
        }
        Err(error) => {
            err(&format!("Could not update {}: {error}", path.display()));
            code(1)
        }
    }
}

fn list(
    loaded: &LoadedConfig,
    as_json: bool,
    untrusted_note: Option<String>,
    env: &Env,
    agent_dir: &Path,
) -> Result<ExitCode> {
    let ctx = connect_context(env, env.cwd());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let connections: Vec<ServerConnection> = loaded
        .servers
        .iter()
        .map(|entry| ServerConnection::new(entry.clone(), ctx.clone()))
        .collect();
    let statuses = runtime.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let checks = connections.iter().map(|conn| async move {
            if conn.entry().enabled() {
                let _ = conn.connect().await;
                let status = conn.status();
                conn.close().await;
                status
            } else {
                conn.status()
            }
        });
        futures::future::join_all(checks).await
    });
    let failed = !loaded.errors.is_empty()
        || loaded
            .servers
            .iter()
            .zip(&statuses)
            .any(|(entry, status)| entry.enabled() && status.state != State::Connected);
    if as_json {
        let servers: Vec<Value> = loaded
            .servers
            .iter()
            .zip(&statuses)
            .map(|(entry, status)| {
                let mut report = Map::new();
                report.insert("name".to_owned(), json!(entry.name));
                report.insert("scope".to_owned(), json!(entry.scope.as_str()));
                report.insert(
                    "source".to_owned(),
                    json!(entry.source.display().to_string()),
                );
                if let Some(path) = &entry.override_path {
                    report.insert("override".to_owned(), json!(path.display().to_string()));
                }
                report.insert("enabled".to_owned(), json!(entry.enabled()));
                report.insert("exposure".to_owned(), json!(entry.exposure()));
                report.insert("transport".to_owned(), json!(entry.describe_transport()));
                report.insert("state".to_owned(), json!(status.state.as_str()));
                let tools: Vec<&str> = status
                    .tools
                    .iter()
                    .filter_map(|tool| tool.get("name").and_then(Value::as_str))
                    .collect();
                let overrides: Map<String, Value> = tools
                    .iter()
                    .filter(|tool| entry.tool_exposure(tool) != entry.exposure())
                    .map(|tool| ((*tool).to_owned(), json!(entry.tool_exposure(tool))))
                    .collect();
                report.insert("tools".to_owned(), json!(tools));
                if !overrides.is_empty() {
                    report.insert("toolExposure".to_owned(), Value::Object(overrides));
                }
                if status.has_resources {
                    report.insert("resources".to_owned(), json!(true));
                }
                if status.state != State::Connected
                    && let Some(error) = &status.error
                {
                    report.insert("error".to_owned(), json!(error));
                }
                Value::Object(report)
            })
            .collect();
        let mut doc = Map::new();
        doc.insert("servers".to_owned(), Value::Array(servers));
        doc.insert("errors".to_owned(), json!(loaded.errors));
        if let Some(note) = &untrusted_note {
            doc.insert("note".to_owned(), json!(note));
        }
        out(&crate::support::json::to_js_pretty(&Value::Object(doc)));
        return Ok(code(u8::from(failed)));
    }
    if loaded.servers.is_empty() && loaded.errors.is_empty() {
        out(&format!(
            "No MCP servers configured. Add them to {} or .pi/mcp.json.",
            config::global_path(agent_dir).display()
        ));
    }
    for (entry, status) in loaded.servers.iter().zip(&statuses) {
        let lines = report_lines(entry, status);
        out(lines.trim_end_matches('\n'));
    }
    for error in &loaded.errors {
        out(&format!("config error: {error}"));
    }
    if let Some(note) = untrusted_note {
        out(&note);
    }
    Ok(code(u8::from(failed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn options_parse_as_the_reference_parses_them() {
        let known = [
            ("local", Kind::Flag),
            ("env", Kind::List),
            ("url", Kind::Value),
        ];
        let parsed = parse_options(
            &strings(&[
                "fs", "-l", "--env", "A=1", "--env", "B=2", "--", "npx", "-y", "--x",
            ]),
            &known,
            2,
        )
        .unwrap();
        assert_eq!(parsed.positional, strings(&["fs", "npx", "-y", "--x"]));
        assert!(parsed.has("local"));
        assert_eq!(parsed.list("env"), vec!["A=1", "B=2"]);
        // After two positionals the rest is the command, options included.
        let parsed = parse_options(&strings(&["fs", "node", "--env", "x"]), &known, 2).unwrap();
        assert_eq!(parsed.positional, strings(&["fs", "node", "--env", "x"]));
        assert_eq!(
            parse_options(&strings(&["--what"]), &known, 2).unwrap_err(),
            format!("Unknown option --what.\n{HELP_HINT}")
        );
        assert_eq!(
            parse_options(&strings(&["fs", "--url"]), &known, 2).unwrap_err(),
            "--url needs a value."
        );
    }
}
