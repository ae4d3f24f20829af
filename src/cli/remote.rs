//! `pi remote add|list|rm`, `pi sync`, and `sessions search|list|stats --remote`: the team
//! archive on PostgreSQL (`remote/`, docs/SYNC.md).
//!
//! Remotes live in `<agent dir>/remotes.json` (mode 0600: a URL may carry a password):
//! `{"remotes": {"NAME": {"url": "postgres://…", "password": "!command"}}}`. The password is
//! the URL's, else the entry's `password` (a `!command` is run as `models.json` keys are),
//! else `PGPASSWORD`, else the first matching line of `PGPASSFILE` or `~/.pgpass`. Who pushes
//! is `sync.user` / `sync.host` in `settings.json`, defaulting to the login and host names.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::ai::auth::KeyResolver;
use crate::cli::keys::ShellKeyResolver;
use crate::cli::output::{self, field, json_line, line, one_line, pad, short_time};
use crate::cli::settings::Settings;
use crate::cli::{CliContext, UsageError};
use crate::model::ids::SessionId;
use crate::remote::archive::{ArchiveFilter, ArchiveStatsBy};
use crate::remote::conninfo::{RemoteUrl, pgpass_lookup};
use crate::remote::sync::{Identity, SyncOptions, SyncReport};
use crate::remote::{Archive, RemoteError, Target};
use crate::store::search::{Query, snippet};
use crate::support::clock::iso_from_ms;
use crate::support::json::to_js_string;

/// Manage the remote archives (PostgreSQL) this agent dir syncs with
#[derive(Debug, Args)]
pub struct RemoteArgs {
    /// What to do
    #[command(subcommand)]
    pub command: RemoteCommand,
}

/// The `remote` subcommands.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum RemoteCommand {
    /// Add a remote archive: a postgres:// URL (sslmode=require|verify-full for TLS)
    Add(AddArgs),
    /// List the remotes (passwords hidden)
    List(RemoteListArgs),
    /// Remove a remote (its sessions pulled here stay)
    Rm(RemoteRmArgs),
}

/// Add a remote archive: a postgres:// URL (sslmode=require|verify-full for TLS)
#[derive(Debug, Args)]
pub struct AddArgs {
    /// Its name here
    pub name: String,
    /// postgres://user[:password]@host[:port]/database[?sslmode=…&sslrootcert=FILE]
    pub url: String,
    /// A shell command whose output is the password (instead of one in the URL)
    #[arg(long, value_name = "COMMAND")]
    pub password_command: Option<String>,
}

/// List the remotes (passwords hidden)
#[derive(Debug, Args)]
pub struct RemoteListArgs {
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

/// Remove a remote (its sessions pulled here stay)
#[derive(Debug, Args)]
pub struct RemoteRmArgs {
    /// Its name
    pub name: String,
}

/// Push this machine's sessions to a remote archive and pull everyone else's
#[derive(Debug, Args)]
pub struct SyncArgs {
    /// The remote (optional when only one is configured)
    pub name: Option<String>,
    /// Only push
    #[arg(long, conflicts_with = "pull")]
    pub push: bool,
    /// Only pull
    #[arg(long)]
    pub pull: bool,
    /// Only this session (full id)
    #[arg(long, value_name = "SESSION")]
    pub session: Option<String>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// The automatic push of `sync.auto` (started by the REPL): a failure is also recorded in
    /// `<agent dir>/sync-auto-failures`, for the REPL to report
    #[arg(long, hide = true)]
    pub auto: bool,
}

/// Where automatic pushes that failed are recorded (one line each) until the REPL reports
/// them.
fn auto_failures_path(agent_dir: &std::path::Path) -> PathBuf {
    agent_dir.join("sync-auto-failures")
}

/// The remote `sync.auto` names: `Some(None)` for `true` (the only remote), `Some(Some(NAME))`
/// for a name, `None` when off.
fn auto_remote(settings: &Settings) -> Option<Option<String>> {
    match settings.get_nested("sync", "auto")? {
        Value::Bool(true) => Some(None),
        Value::String(name) if !name.trim().is_empty() => Some(Some(name.trim().to_owned())),
        _ => None,
    }
}

/// Takes the recorded failures of automatic pushes (the file is removed).
fn take_auto_failures(agent_dir: &std::path::Path) -> Vec<String> {
    let path = auto_failures_path(agent_dir);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Vec::new();
    };
    let _ = std::fs::remove_file(&path);
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| format!("{line} (run `pi sync` to retry)"))
        .collect()
}

/// What the REPL calls when it leaves a session: with `sync.auto` set, `pi sync [NAME] --push
/// --session ID --auto` is started as a process of its own (its own process group, so the
/// terminal's Ctrl+C does not reach it; it outlives the REPL), never waited for here; a thread
/// reaps it. The failures of earlier automatic pushes are returned as warnings.
pub fn auto_push_hook(
    env: &crate::cli::config::Env,
    settings: &Settings,
    db: Option<&std::path::Path>,
    no_session: bool,
) -> crate::modes::LeftFn {
    let agent_dir = env.agent_dir();
    let remote = if no_session {
        None
    } else {
        auto_remote(settings)
    };
    let vars: Vec<(String, String)> = env
        .vars()
        .iter()
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let cwd = env.cwd().to_path_buf();
    let db = db.map(std::path::Path::to_path_buf);
    std::sync::Arc::new(move |session: &SessionId| {
        let mut warnings = take_auto_failures(&agent_dir);
        let Some(remote) = &remote else {
            return warnings;
        };
        let started = std::env::current_exe().and_then(|exe| {
            use std::os::unix::process::CommandExt;
            let mut command = std::process::Command::new(exe);
            if let Some(db) = &db {
                command.arg("--db").arg(db);
            }
            command.arg("sync");
            if let Some(name) = remote {
                command.arg(name);
            }
            command
                .args(["--push", "--auto", "--session", session.as_str()])
                .env_clear()
                .envs(vars.iter().map(|(key, value)| (key, value)))
                .current_dir(&cwd)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .process_group(0)
                .spawn()
        });
        match started {
            Ok(mut child) => {
                std::thread::spawn(move || child.wait());
            }
            Err(error) => warnings.push(format!(
                "the automatic push of session {} could not start: {error}",
                field(session.as_str())
            )),
        }
        warnings
    })
}

/// With `sync.auto` set, the failures of earlier automatic pushes (reported at startup).
pub fn auto_push_warnings(env: &crate::cli::config::Env, settings: &Settings) -> Vec<String> {
    if auto_remote(settings).is_none() {
        return Vec::new();
    }
    take_auto_failures(&env.agent_dir())
}

/// Records a failed automatic push for the REPL to report.
fn record_auto_failure(ctx: &CliContext, session: Option<&str>, message: &str) {
    use std::io::Write as _;
    let path = auto_failures_path(&ctx.env.agent_dir());
    let line = format!(
        "the automatic push of session {} failed: {}",
        session.unwrap_or("(all)"),
        message.replace(['\n', '\r'], " ")
    );
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(file, "{line}");
    }
}

/// One remote as `remotes.json` keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RemoteEntry {
    url: String,
    password: Option<String>,
}

fn remotes_path(ctx: &CliContext) -> PathBuf {
    ctx.env.agent_dir().join("remotes.json")
}

fn read_remotes(ctx: &CliContext) -> Result<BTreeMap<String, RemoteEntry>> {
    let path = remotes_path(ctx);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(error) => {
            return Err(error)
                .with_context(|| format!("cannot read {}", field(&path.to_string_lossy())));
        }
    };
    let value: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON", field(&path.to_string_lossy())))?;
    let mut out = BTreeMap::new();
    if let Some(remotes) = value.get("remotes").and_then(Value::as_object) {
        for (name, entry) in remotes {
            if let Some(url) = entry.get("url").and_then(Value::as_str) {
                out.insert(
                    name.clone(),
                    RemoteEntry {
                        url: url.to_owned(),
                        password: entry
                            .get("password")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                    },
                );
            }
        }
    }
    Ok(out)
}

fn write_remotes(ctx: &CliContext, remotes: &BTreeMap<String, RemoteEntry>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut map = Map::new();
    for (name, entry) in remotes {
        let mut object = Map::new();
        object.insert("url".to_owned(), Value::String(entry.url.clone()));
        if let Some(password) = &entry.password {
            object.insert("password".to_owned(), Value::String(password.clone()));
        }
        map.insert(name.clone(), Value::Object(object));
    }
    let text = crate::support::json::to_js_pretty(&json!({ "remotes": map }));
    let path = remotes_path(ctx);
    crate::support::atomic::write_atomically::<std::io::Error>(&path, |out| {
        out.write_all(text.as_bytes())?;
        out.write_all(b"\n")
    })?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

fn check_name(name: &str) -> Result<(), UsageError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_' || ch == '.');
    if ok {
        Ok(())
    } else {
        Err(UsageError(format!(
            "remote name '{}': use letters, digits, '-', '_' or '.' (at most 64)",
            field(name)
        )))
    }
}

/// Runs `pi remote …`.
pub fn run_remote(args: RemoteArgs, ctx: &CliContext) -> Result<()> {
    let mut out = output::stdout();
    match args.command {
        RemoteCommand::Add(add) => {
            check_name(&add.name)?;
            RemoteUrl::parse(&add.url).map_err(|error| UsageError(error.to_string()))?;
            let mut remotes = read_remotes(ctx)?;
            if remotes.contains_key(&add.name) {
                return Err(UsageError(format!(
                    "a remote named '{}' exists (pi remote rm {} first)",
                    add.name, add.name
                ))
                .into());
            }
            remotes.insert(
                add.name.clone(),
                RemoteEntry {
                    url: add.url.clone(),
                    password: add.password_command.map(|command| format!("!{command}")),
                },
            );
            write_remotes(ctx, &remotes)?;
            line(
                &mut out,
                &format!(
                    "added remote {} ({}); `pi sync {}` creates its schema",
                    add.name,
                    field(&RemoteUrl::redacted(&add.url)),
                    add.name
                ),
            )?;
        }
        RemoteCommand::List(list) => {
            let remotes = read_remotes(ctx)?;
            if list.json {
                let rows: Vec<Value> = remotes
                    .iter()
                    .map(|(name, entry)| {
                        json!({
                            "name": name,
                            "url": RemoteUrl::redacted(&entry.url),
                            "passwordCommand": entry.password.as_deref().is_some_and(|p| p.starts_with('!')),
                        })
                    })
                    .collect();
                json_line(&mut out, &to_js_string(&Value::Array(rows)))?;
            } else if remotes.is_empty() {
                line(&mut out, "no remotes (pi remote add NAME postgres://…)")?;
            } else {
                for (name, entry) in &remotes {
                    line(
                        &mut out,
                        &format!("{name}  {}", field(&RemoteUrl::redacted(&entry.url))),
                    )?;
                }
            }
        }
        RemoteCommand::Rm(rm) => {
            let mut remotes = read_remotes(ctx)?;
            if remotes.remove(&rm.name).is_none() {
                return Err(UsageError(format!("no remote named '{}'", field(&rm.name))).into());
            }
            write_remotes(ctx, &remotes)?;
            let store = ctx.open_store()?;
            store.forget_remote(&rm.name)?;
            line(
                &mut out,
                &format!(
                    "removed remote {} (the sessions pulled from it stay here)",
                    rm.name
                ),
            )?;
        }
    }
    Ok(out.flush()?)
}

/// Resolves a remote by name (or the only one) into a connection target.
fn target(ctx: &CliContext, name: Option<&str>) -> Result<Target> {
    let remotes = read_remotes(ctx)?;
    let (name, entry) = match name {
        Some(name) => match remotes.get(name) {
            Some(entry) => (name.to_owned(), entry.clone()),
            None => {
                return Err(UsageError(format!(
                    "no remote named '{}' (pi remote list)",
                    field(name)
                ))
                .into());
            }
        },
        None => match remotes.iter().next() {
            Some((name, entry)) if remotes.len() == 1 => (name.clone(), entry.clone()),
            Some(_) => {
                return Err(UsageError(
                    "more than one remote: name the one to use (pi remote list)".to_owned(),
                )
                .into());
            }
            None => {
                return Err(UsageError(
                    "no remote configured (pi remote add NAME postgres://…)".to_owned(),
                )
                .into());
            }
        },
    };
    let url = RemoteUrl::parse(&entry.url).map_err(|error| UsageError(error.to_string()))?;
    let default_user = login_name(ctx);
    let resolver = ShellKeyResolver::new(&ctx.env);
    let password = if url.has_password() {
        None
    } else {
        match entry.password.as_deref() {
            Some(value) if value.starts_with('!') => {
                Some(resolver.run_command(&value[1..]).ok_or_else(|| {
                    anyhow::anyhow!("remote {name}: the password command gave no password")
                })?)
            }
            Some(value) => Some(value.to_owned()),
            None => ctx
                .env
                .var("PGPASSWORD")
                .filter(|value| !value.is_empty())
                .map(str::to_owned)
                .or_else(|| {
                    let file = ctx
                        .env
                        .var("PGPASSFILE")
                        .map(PathBuf::from)
                        .or_else(|| ctx.env.home().map(|home| home.join(".pgpass")))?;
                    let text = std::fs::read_to_string(file).ok()?;
                    let user = url.user().unwrap_or(&default_user).to_owned();
                    let db = url.dbname().unwrap_or(&user).to_owned();
                    pgpass_lookup(&text, &url.host(), url.port(), &db, &user)
                }),
        }
    };
    let root_file = url
        .root_cert
        .as_ref()
        .map(|file| ctx.env.expand_tilde(file))
        .or_else(|| {
            let default = ctx.env.home()?.join(".postgresql/root.crt");
            default.exists().then_some(default)
        });
    let root_pem = match root_file {
        Some(file) => Some(std::fs::read(&file).with_context(|| {
            format!("cannot read sslrootcert {}", field(&file.to_string_lossy()))
        })?),
        None => None,
    };
    let connect_ms = ctx
        .env
        .var("PI_SYNC_CONNECT_TIMEOUT_MS")
        .and_then(|value| value.parse::<u64>().ok())
        .unwrap_or(10_000);
    Ok(Target {
        name,
        url,
        password,
        default_user,
        root_pem,
        connect_timeout: Duration::from_millis(connect_ms),
    })
}

fn login_name(ctx: &CliContext) -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|user| user.name)
        .or_else(|| ctx.env.var("USER").map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

fn identity(ctx: &CliContext) -> Identity {
    let settings = Settings::load(&ctx.env.agent_dir(), ctx.env.cwd(), ctx.env.home());
    let setting = |key: &str| {
        settings
            .get_nested("sync", key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
    };
    Identity {
        user: setting("user").unwrap_or_else(|| login_name(ctx)),
        host: setting("host").unwrap_or_else(|| {
            nix::unistd::gethostname()
                .ok()
                .and_then(|name| name.into_string().ok())
                .unwrap_or_else(|| "unknown".to_owned())
        }),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

fn env_usize(ctx: &CliContext, key: &str) -> Option<usize> {
    ctx.env.var(key).and_then(|value| value.parse().ok())
}

/// Runs `pi sync`.
pub fn run_sync(args: SyncArgs, ctx: &CliContext) -> Result<()> {
    let auto = args.auto;
    let session = args.session.clone();
    let result = sync_once(args, ctx);
    if auto && let Err(error) = &result {
        record_auto_failure(ctx, session.as_deref(), &format!("{error:#}"));
    }
    result
}

fn sync_once(args: SyncArgs, ctx: &CliContext) -> Result<()> {
    let target = target(ctx, args.name.as_deref())?;
    let identity = identity(ctx);
    let store = ctx.open_store()?;
    let mut options = SyncOptions {
        push: !args.pull,
        pull: !args.push,
        session: args.session.map(SessionId::new),
        ..SyncOptions::default()
    };
    // Test and benchmark knobs: smaller batches make a sync take many steps.
    if let Some(n) = env_usize(ctx, "PI_SYNC_BATCH_ENTRIES") {
        options.batch_entries = n.max(1);
    }
    if let Some(n) = env_usize(ctx, "PI_SYNC_PULL_BATCH") {
        options.pull_batch = i64::try_from(n.max(1)).unwrap_or(i64::MAX);
    }
    let started = std::time::Instant::now();
    let result: std::result::Result<SyncReport, RemoteError> = runtime()?.block_on(async {
        let mut archive = Archive::connect(&target).await?;
        crate::remote::sync::sync(&store, &mut archive, &identity, &options).await
    });
    let report = match result {
        Ok(report) => report,
        Err(error) if error.is_connection() => {
            return Err(anyhow::Error::new(error).context(format!(
                "sync with {} stopped; what both sides committed is kept, run `pi sync {}` again to complete it",
                target.name, target.name
            )));
        }
        Err(error) => return Err(error.into()),
    };
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut out = output::stdout();
    if args.json {
        let conflicts: Vec<Value> = report
            .conflicts
            .iter()
            .map(|conflict| {
                json!({
                    "session": conflict.session,
                    "direction": conflict.direction,
                    "detail": conflict.detail,
                })
            })
            .collect();
        let value = json!({
            "remote": report.remote,
            "user": identity.user,
            "host": identity.host,
            "pushed": {
                "sessions": report.pushed.iter().filter(|(_, n)| *n > 0).count(),
                "entries": report.pushed_entries(),
                "batches": report.batches,
            },
            "pulled": {
                "sessions": report.pulled.iter().filter(|(_, n)| *n > 0).count(),
                "entries": report.pulled_entries(),
            },
            "conflicts": conflicts,
            "ms": (elapsed_ms * 10.0).round() / 10.0,
        });
        json_line(&mut out, &to_js_string(&value))?;
    } else {
        let pushed = report.pushed.iter().filter(|(_, n)| *n > 0).count();
        let pulled = report.pulled.iter().filter(|(_, n)| *n > 0).count();
        if pushed == 0 && pulled == 0 && report.conflicts.is_empty() {
            line(&mut out, &format!("{}: up to date", report.remote))?;
        } else {
            line(
                &mut out,
                &format!(
                    "{}: pushed {} entries of {pushed} sessions, pulled {} entries of {pulled} sessions",
                    report.remote,
                    report.pushed_entries(),
                    report.pulled_entries()
                ),
            )?;
        }
        for conflict in &report.conflicts {
            line(
                &mut out,
                &format!(
                    "conflict ({}) in session {}: {} — nothing was overwritten",
                    conflict.direction,
                    field(&conflict.session),
                    field(&conflict.detail)
                ),
            )?;
        }
    }
    out.flush()?;
    if !report.conflicts.is_empty() {
        return Err(anyhow::anyhow!(
            "{} session(s) stopped at a conflict",
            report.conflicts.len()
        ));
    }
    Ok(())
}

/// The filters `--remote` commands take besides the local ones.
#[derive(Debug, Clone, Default)]
pub struct RemoteFilters {
    /// The remote's name.
    pub remote: String,
    /// `--user`.
    pub user: Option<String>,
    /// `--host`.
    pub host: Option<String>,
    /// `--cwd` (absolute).
    pub cwd: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--since`, `--until` in ms.
    pub since_ms: Option<i64>,
    /// `--until` in ms.
    pub until_ms: Option<i64>,
    /// `--session`.
    pub session: Option<String>,
}

impl RemoteFilters {
    fn archive_filter(&self) -> ArchiveFilter {
        ArchiveFilter {
            user: self.user.clone(),
            host: self.host.clone(),
            cwd: self.cwd.clone(),
            model: self.model.clone(),
            since_ms: self.since_ms,
            until_ms: self.until_ms,
            session: self.session.clone(),
        }
    }
}

fn with_archive<T>(
    ctx: &CliContext,
    remote: &str,
    f: impl AsyncFnOnce(&mut Archive) -> std::result::Result<T, RemoteError>,
) -> Result<T> {
    let target = target(ctx, Some(remote))?;
    Ok(runtime()?.block_on(async {
        let mut archive = Archive::connect(&target).await?;
        // The schema is checked (created or migrated) before anything is read.
        archive.ensure_schema().await?;
        f(&mut archive).await
    })?)
}

/// `sessions search --remote`: the same query language, run on the server.
#[allow(clippy::too_many_arguments)]
pub fn run_remote_search(
    ctx: &CliContext,
    filters: &RemoteFilters,
    query: &Query,
    roles: &[String],
    kinds: &[String],
    limit: usize,
    json_out: bool,
    highlight: (&str, &str),
) -> Result<Vec<Value>> {
    let tsquery = crate::remote::text::tsquery(query);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let hits = with_archive(ctx, &filters.remote, async |archive| {
        archive
            .search(&tsquery, &filters.archive_filter(), roles, kinds, limit)
            .await
    })?;
    let terms = query.positive_terms();
    let _ = json_out;
    Ok(hits
        .into_iter()
        .map(|hit| {
            let snippet = snippet(&hit.body, &terms, highlight.0, highlight.1, 160);
            json!({
                "session": hit.session,
                "entry": hit.entry,
                "role": hit.role,
                "kind": hit.kind,
                "snippet": snippet,
                "score": hit.score,
                "cwd": hit.cwd,
                "timestamp": hit.ts_ms.map(iso_from_ms),
                "name": hit.name,
                "onActivePath": Value::Null,
                "contextEdit": Value::Null,
                "user": hit.user,
                "host": hit.host,
                "firstMessage": hit.first_message,
            })
        })
        .collect())
}

/// `sessions list --remote`.
pub fn run_remote_list(ctx: &CliContext, filters: &RemoteFilters, json_out: bool) -> Result<()> {
    let sessions = with_archive(ctx, &filters.remote, async |archive| {
        archive.list(&filters.archive_filter(), 10_000).await
    })?;
    let mut out = output::stdout();
    if json_out {
        let rows: Vec<Value> = sessions
            .iter()
            .map(|s| {
                json!({
                    "session": s.id,
                    "name": s.name,
                    "firstMessage": s.first_message,
                    "cwd": s.cwd,
                    "created": output::iso_or_null(&s.created),
                    "lastActivity": s.last_activity_ms.map(iso_from_ms),
                    "messages": s.messages,
                    "entries": s.entries,
                    "tokens": {
                        "input": s.tokens[0],
                        "output": s.tokens[1],
                        "cacheRead": s.tokens[2],
                        "cacheWrite": s.tokens[3],
                    },
                    "cost": s.cost,
                    "user": s.user,
                    "host": s.host,
                })
            })
            .collect();
        json_line(&mut out, &to_js_string(&Value::Array(rows)))?;
        return Ok(out.flush()?);
    }
    let style = ctx.style();
    if sessions.is_empty() {
        line(&mut out, &style.dim("no sessions in the archive"))?;
    }
    for s in &sessions {
        let title = s
            .name
            .as_deref()
            .map(|name| field(name).into_owned())
            .or_else(|| s.first_message.as_deref().map(|text| one_line(text, 60)))
            .unwrap_or_else(|| "(no messages)".to_owned());
        let when = s
            .last_activity_ms
            .map(|ms| short_time(&iso_from_ms(ms)))
            .unwrap_or_default();
        line(
            &mut out,
            &format!(
                "{}  {}  {}@{}  {}  {} msgs",
                style.id(&field(&s.id)),
                style.dim(&when),
                field(&s.user),
                field(&s.host),
                style.bold(&title),
                s.messages
            ),
        )?;
    }
    Ok(out.flush()?)
}

/// The `--by` keys of `stats --remote` (the local ones plus `user` and `host`).
pub fn stats_by(key: &str) -> Option<ArchiveStatsBy> {
    Some(match key {
        "day" => ArchiveStatsBy::Day,
        "week" => ArchiveStatsBy::Week,
        "model" => ArchiveStatsBy::Model,
        "provider" => ArchiveStatsBy::Provider,
        "cwd" => ArchiveStatsBy::Cwd,
        "session" => ArchiveStatsBy::Session,
        "user" => ArchiveStatsBy::User,
        "host" => ArchiveStatsBy::Host,
        _ => return None,
    })
}

/// `sessions stats --remote`: rows in the local JSON shape.
pub fn run_remote_stats(
    ctx: &CliContext,
    filters: &RemoteFilters,
    by: ArchiveStatsBy,
    json_out: bool,
) -> Result<()> {
    let (rows, sessions) = with_archive(ctx, &filters.remote, async |archive| {
        archive.stats(by, &filters.archive_filter()).await
    })?;
    let mut out = output::stdout();
    if json_out {
        let values: Vec<Value> = rows
            .iter()
            .map(|row| {
                json!({
                    "key": row.key,
                    "sessions": row.sessions,
                    "messages": row.messages,
                    "input": row.tokens[0],
                    "output": row.tokens[1],
                    "cacheRead": row.tokens[2],
                    "cacheWrite": row.tokens[3],
                    "cost": row.cost,
                })
            })
            .collect();
        json_line(&mut out, &to_js_string(&Value::Array(values)))?;
        return Ok(out.flush()?);
    }
    let width = rows
        .iter()
        .map(|row| field(&row.key).chars().count())
        .max()
        .unwrap_or(3)
        .max(5);
    let style = ctx.style();
    line(
        &mut out,
        &style.bold(&format!(
            "{}  {:>8}  {:>9}  {:>12}  {:>10}  {:>10}",
            pad("key", width),
            "sessions",
            "messages",
            "input",
            "output",
            "cost"
        )),
    )?;
    for row in &rows {
        line(
            &mut out,
            &format!(
                "{}  {:>8}  {:>9}  {:>12}  {:>10}  {:>10}",
                pad(&field(&row.key), width),
                row.sessions,
                row.messages,
                row.tokens[0],
                row.tokens[1],
                format!("${:.4}", row.cost)
            ),
        )?;
    }
    line(
        &mut out,
        &style.dim(&format!("{sessions} sessions in the archive")),
    )?;
    Ok(out.flush()?)
}
