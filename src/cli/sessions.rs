//! `pi sessions list` and `pi sessions show`: finding and inspecting stored sessions.

use std::io::Write;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::cli::autoimport::AutoImport;
use crate::cli::output::{self, Style, field, json_line, line, one_line, pad, short_time};
use crate::cli::{CliContext, UsageError};
use crate::model::entry::{Entry, EntryKind};
use crate::model::ids::{EntryId, SessionId};
use crate::model::message::{AgentMessage, ContentBlock, SystemMessage};
use crate::store::{
    BranchStep, LeafSelector, ListScope, SessionStore, SessionSummary, StoredEntry,
};
use crate::support::json::{stored_json_text, to_js_string};
use crate::support::term;

/// List, inspect and search stored sessions
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// What to do
    #[command(subcommand)]
    pub command: SessionsCommand,
}

/// The `sessions` subcommands (declared lazily, as [`crate::cli::Command`]).
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum SessionsCommand {
    /// List sessions, latest activity first (this directory's unless --all or --cwd)
    List(ListArgs),
    /// Show a session: its active branch, its tree or its rebuilt context
    Show(ShowArgs),
    /// Search every conversation (this directory's unless --all or --cwd)
    Search(crate::cli::search::SearchArgs),
    /// Token and cost totals by day, week, model, provider, directory or session
    Stats(crate::cli::search::StatsArgs),
    /// Name a session (appends a session_info entry)
    Rename(RenameArgs),
    /// Delete a session and all its entries
    Rm(RmArgs),
}

/// Name a session (appends a session_info entry)
#[derive(Debug, Args)]
pub struct RenameArgs {
    /// Session id or a unique prefix of one
    pub session: String,
    /// The new name
    pub name: String,
}

/// Delete a session and all its entries
#[derive(Debug, Args)]
pub struct RmArgs {
    /// Session id or a unique prefix of one
    pub session: String,
    /// Delete without asking
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// List sessions, latest activity first (this directory's unless --all or --cwd)
#[derive(Debug, Args)]
pub struct ListArgs {
    /// List the sessions of every directory
    #[arg(long, conflicts_with = "cwd")]
    pub all: bool,
    /// List the sessions of this directory
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<std::path::PathBuf>,
    /// List the sessions of this remote archive (PostgreSQL) instead of the local database
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
    /// With --remote: only sessions pushed by this user
    #[arg(long, value_name = "USER", requires = "remote")]
    pub user: Option<String>,
    /// With --remote: only sessions pushed from this host
    #[arg(long, value_name = "HOST", requires = "remote")]
    pub host: Option<String>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

/// Show a session: its active branch, its tree or its rebuilt context
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Session id or a unique prefix of one
    pub session: String,
    /// Show the whole tree of entries
    #[arg(long, conflicts_with_all = ["context", "entry"])]
    pub tree: bool,
    /// Show the context the model would see at the leaf
    #[arg(long, conflicts_with = "entry")]
    pub context: bool,
    /// Rebuild at this entry instead of the session's leaf
    #[arg(long, value_name = "ENTRY")]
    pub leaf: Option<String>,
    /// Show the entries around this one on its path
    #[arg(long, value_name = "ENTRY")]
    pub entry: Option<String>,
    /// How many entries before and after --entry to show
    #[arg(long, value_name = "N", default_value_t = 3, requires = "entry")]
    pub around: usize,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

/// Runs a `sessions` subcommand.
pub fn run_sessions(args: SessionsArgs, ctx: &CliContext) -> Result<()> {
    match args.command {
        SessionsCommand::List(list) => run_list(list, ctx),
        SessionsCommand::Show(show) => run_show(show, ctx),
        SessionsCommand::Search(search) => crate::cli::search::run_search(search, ctx),
        SessionsCommand::Stats(stats) => crate::cli::search::run_stats(stats, ctx),
        SessionsCommand::Rename(rename) => run_rename(rename, ctx),
        SessionsCommand::Rm(rm) => run_rm(rm, ctx),
    }
}

fn summary_json(summary: &SessionSummary) -> Value {
    json!({
        "session": summary.id.as_str(),
        "name": summary.name,
        "firstMessage": summary.first_message,
        "cwd": summary.cwd,
        "created": output::iso_or_null(&summary.created),
        "lastActivity": output::iso_or_null(&summary.last_activity),
        "messages": summary.messages,
        "entries": summary.entries,
        "tokens": {
            "input": summary.tokens.input,
            "output": summary.tokens.output,
            "cacheRead": summary.tokens.cache_read,
            "cacheWrite": summary.tokens.cache_write,
        },
        "cost": summary.cost,
    })
}

fn run_list(args: ListArgs, ctx: &CliContext) -> Result<()> {
    if let Some(remote) = &args.remote {
        let filters = crate::cli::remote::RemoteFilters {
            remote: remote.clone(),
            user: args.user.clone(),
            host: args.host.clone(),
            cwd: args
                .cwd
                .as_ref()
                .map(|dir| ctx.env.absolute(dir).to_string_lossy().into_owned()),
            ..Default::default()
        };
        return crate::cli::remote::run_remote_list(ctx, &filters, args.json);
    }
    let store = ctx.open_store_read_only()?;
    // What the reference wrote since the last look is listed too (a writer is opened only
    // when a file needs importing).
    let imported = AutoImport::for_command(&ctx.env).run(&store, &|| ctx.open_store());
    {
        let mut err = std::io::stderr().lock();
        for warning in &imported.warnings {
            writeln!(err, "pi: warning: {warning}")?;
        }
    }
    let scope = if args.all {
        ListScope::All
    } else {
        let dir = match &args.cwd {
            Some(dir) => ctx.env.absolute(dir),
            None => ctx.env.cwd().to_path_buf(),
        };
        ListScope::Cwd(dir.to_string_lossy().into_owned())
    };
    let sessions = store.list(&scope)?;
    let mut out = output::stdout();
    if args.json {
        let array = Value::Array(sessions.iter().map(summary_json).collect());
        json_line(&mut out, &to_js_string(&array))?;
        return Ok(out.flush()?);
    }
    let style = ctx.style();
    if sessions.is_empty() {
        let hint = match &scope {
            ListScope::All => "no sessions yet".to_owned(),
            ListScope::Cwd(dir) => format!("no sessions in {} (try --all)", field(dir)),
        };
        line(&mut out, &style.dim(&hint))?;
        return Ok(out.flush()?);
    }
    let id_width = sessions
        .iter()
        .map(|summary| field(summary.id.as_str()).chars().count())
        .max()
        .unwrap_or(0);
    for summary in &sessions {
        let title = title_of(summary);
        let when = short_time(&summary.last_activity);
        let row = format!(
            "{}  {}  {:>5} msgs  {}",
            style.id(&pad(&field(summary.id.as_str()), id_width)),
            style.dim(&when),
            summary.messages,
            style.bold(&title),
        );
        line(&mut out, &row)?;
        if matches!(scope, ListScope::All) {
            line(
                &mut out,
                &format!(
                    "{}  {}",
                    " ".repeat(id_width),
                    style.dim(&field(&summary.cwd))
                ),
            )?;
        }
    }
    Ok(out.flush()?)
}

/// A session's title for a listing: its name, else its first message, on one line.
fn title_of(summary: &SessionSummary) -> String {
    summary
        .name
        .as_deref()
        .map(|name| field(name).into_owned())
        .or_else(|| {
            summary
                .first_message
                .as_deref()
                .map(|text| one_line(text, 60))
        })
        .unwrap_or_else(|| "(no messages)".to_owned())
}

fn resolve(store: &SessionStore, query: &str) -> Result<SessionId> {
    Ok(store.resolve(query)?)
}

fn run_rename(args: RenameArgs, ctx: &CliContext) -> Result<()> {
    let name = args.name.trim();
    if name.is_empty() {
        return Err(UsageError("a session name cannot be empty".to_owned()).into());
    }
    let store = ctx.open_store()?;
    let session = resolve(&store, &args.session)?;
    store.append_session_info(&session, name)?;
    let mut out = output::stdout();
    line(
        &mut out,
        &format!("renamed {} to \"{}\"", field(session.as_str()), field(name)),
    )?;
    Ok(out.flush()?)
}

fn run_rm(args: RmArgs, ctx: &CliContext) -> Result<()> {
    use std::io::{BufRead, IsTerminal};
    let store = ctx.open_store()?;
    let session = resolve(&store, &args.session)?;
    let summary = store.session(&session)?;
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            return Err(UsageError(format!(
                "refusing to delete session {session} without --yes (stdin is not a terminal)"
            ))
            .into());
        }
        let title = title_of(&summary);
        let mut err = std::io::stderr().lock();
        write!(
            err,
            "Delete session {} \"{title}\" ({} entries, {})? [y/N] ",
            field(session.as_str()),
            summary.entries,
            field(&summary.cwd)
        )?;
        err.flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            let mut out = output::stdout();
            line(&mut out, "kept")?;
            return Ok(out.flush()?);
        }
    }
    store.delete_session(&session)?;
    let mut out = output::stdout();
    line(
        &mut out,
        &format!(
            "deleted {} ({} entries)",
            field(session.as_str()),
            summary.entries
        ),
    )?;
    Ok(out.flush()?)
}

fn run_show(args: ShowArgs, ctx: &CliContext) -> Result<()> {
    let store = ctx.open_store_read_only()?;
    let session = resolve(&store, &args.session)?;
    let leaf = match &args.leaf {
        Some(id) => LeafSelector::Entry(EntryId::new(id.as_str())),
        None => LeafSelector::Current,
    };
    let mut out = output::stdout();
    let style = ctx.style();
    if let Some(entry) = &args.entry {
        show_around(
            &store,
            &session,
            &EntryId::new(entry.as_str()),
            args.around,
            args.json,
            &mut out,
            style,
        )?;
    } else if args.tree {
        show_tree(&store, &session, args.json, &mut out, style)?;
    } else if args.context {
        let context = store.context(&session, &leaf)?;
        if args.json {
            context.write_json(&mut out)?;
            out.write_all(b"\n")?;
        } else {
            let model = context.model_ref().map_or_else(
                || "(none)".to_owned(),
                |model| field(&format!("{}/{}", model.provider, model.model_id)).into_owned(),
            );
            line(
                &mut out,
                &format!(
                    "model: {model}  thinking: {}",
                    field(&context.thinking_level.to_string())
                ),
            )?;
            for message in context.agent_messages() {
                render_message(&mut out, style, None, &message)?;
            }
        }
    } else {
        show_branch(&store, &session, &leaf, args.json, &mut out, style)?;
    }
    Ok(out.flush()?)
}

/// Shows the branch ending at `leaf`, entry by entry as the store walks it: as a JSON array
/// of the entries (each as stored, [`stored_json_text`]) or as text after the session's
/// header. Nothing holds more than one entry.
fn show_branch(
    store: &SessionStore,
    session: &SessionId,
    leaf: &LeafSelector,
    json: bool,
    out: &mut impl Write,
    style: Style,
) -> Result<()> {
    if json {
        out.write_all(b"[")?;
        let mut first = true;
        store.visit_branch_payloads(session, leaf, &mut |payload| -> Result<()> {
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            match stored_json_text(payload) {
                Some(text) => out.write_all(text.as_bytes())?,
                None => out.write_all(b"null")?,
            }
            Ok(())
        })?;
        out.write_all(b"]\n")?;
        return Ok(());
    }
    let summary = store.session(session)?;
    store.visit_branch(session, leaf, &mut |step| -> Result<()> {
        match step {
            BranchStep::Leaf(leaf) => print_header(out, style, &summary, leaf)?,
            BranchStep::Entry(stored) => render_entry(out, style, stored)?,
        }
        Ok(())
    })
}

fn raw_value(stored: &StoredEntry) -> Value {
    crate::support::json::parse_lenient(&stored.payload).unwrap_or(Value::Null)
}

fn print_header(
    out: &mut impl Write,
    style: Style,
    summary: &SessionSummary,
    leaf: Option<&StoredEntry>,
) -> Result<()> {
    line(
        out,
        &format!(
            "{} {}",
            style.bold("session"),
            style.id(&field(summary.id.as_str()))
        ),
    )?;
    if let Some(name) = &summary.name {
        line(out, &format!("name      {}", field(name)))?;
    }
    line(out, &format!("cwd       {}", field(&summary.cwd)))?;
    line(out, &format!("created   {}", field(&summary.created)))?;
    line(out, &format!("activity  {}", field(&summary.last_activity)))?;
    line(
        out,
        &format!(
            "entries   {} ({} messages)",
            summary.entries, summary.messages
        ),
    )?;
    let leaf_id = leaf
        .and_then(|stored| stored.entry.id.as_ref())
        .map_or_else(
            || "(before the first entry)".to_owned(),
            |id| field(id.as_str()).into_owned(),
        );
    line(out, &format!("leaf      {leaf_id}"))?;
    if let Some(parent) = &summary.parent_session {
        line(out, &format!("parent    {}", field(parent)))?;
    }
    line(out, "")?;
    Ok(())
}

/// Returns a one-line description of an entry for trees and listings, every part from the
/// file shown escaped ([`field`], [`one_line`]).
pub fn describe(entry: &Entry) -> String {
    match &entry.kind {
        EntryKind::Message(message) => describe_message(message),
        EntryKind::ThinkingLevelChange { thinking_level } => {
            format!("thinking: {}", field(&thinking_level.to_string()))
        }
        EntryKind::ModelChange(model) => format!(
            "model: {}",
            field(&format!("{}/{}", model.provider, model.model_id))
        ),
        EntryKind::Compaction(compaction) => {
            format!("compaction: {}", one_line(&compaction.summary, 60))
        }
        EntryKind::BranchSummary(summary) => {
            format!("branch summary: {}", one_line(&summary.summary, 60))
        }
        EntryKind::Usage(usage) => format!(
            "usage ({}): {}/{} {} tokens",
            field(&usage.kind),
            field(&usage.provider),
            field(&usage.model),
            usage.usage.total_tokens
        ),
        EntryKind::ContextEdit(edit) => {
            let target = field(edit.target_id.as_ref().map_or("?", EntryId::as_str));
            match &edit.replacement {
                Some(serde_json::Value::Null) => format!("context edit: {target} omitted"),
                _ => format!("context edit: {target} replaced"),
            }
        }
        EntryKind::Custom { custom_type, .. } => format!("custom: {}", field(custom_type)),
        EntryKind::CustomMessage {
            custom_type,
            content,
            ..
        } => format!(
            "{}: {}",
            field(custom_type),
            one_line(&content.joined_text(), 60)
        ),
        EntryKind::Label { target_id, label } => format!(
            "label {} → {}",
            field(target_id.as_ref().map_or("?", EntryId::as_str)),
            field(label.as_deref().unwrap_or("(cleared)"))
        ),
        EntryKind::SessionInfo { name } => {
            format!("name: {}", field(name.as_deref().unwrap_or("")))
        }
        EntryKind::Unknown { type_name } => format!("({})", field(type_name)),
    }
}

fn describe_message(message: &AgentMessage) -> String {
    match message {
        AgentMessage::System(system) => describe_system(system),
        AgentMessage::User(user) => format!("user: {}", one_line(&user.content.joined_text(), 70)),
        AgentMessage::Assistant(assistant) => {
            let text = assistant.text();
            let calls: Vec<String> = assistant
                .tool_calls()
                .map(|call| field(&call.name).into_owned())
                .collect();
            let mut out = format!("assistant: {}", one_line(&text, 60));
            if !calls.is_empty() {
                out.push_str(&format!(" [{}]", calls.join(", ")));
            }
            out
        }
        AgentMessage::ToolResult(result) => {
            let text: Vec<&str> = result
                .content
                .iter()
                .filter_map(ContentBlock::as_text)
                .collect();
            let marker = if result.is_error { " (error)" } else { "" };
            format!(
                "{}{marker}: {}",
                field(&result.tool_name),
                one_line(&text.join("\n"), 60)
            )
        }
        AgentMessage::BashExecution(bash) => format!("!{}", one_line(&bash.command, 70)),
        AgentMessage::Custom(custom) => {
            format!(
                "{}: {}",
                field(&custom.custom_type),
                one_line(&custom.content.joined_text(), 60)
            )
        }
        AgentMessage::BranchSummary(summary) => {
            format!("branch summary: {}", one_line(&summary.summary, 60))
        }
        AgentMessage::CompactionSummary(summary) => {
            format!("compaction summary: {}", one_line(&summary.summary, 60))
        }
        AgentMessage::Unknown(value) => format!(
            "({})",
            field(
                value
                    .get("role")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown message")
            )
        ),
    }
}

/// `system: sections a, b; +tools x, y; -tools z` (the names a system message sets).
fn describe_system(system: &SystemMessage) -> String {
    let mut parts = Vec::new();
    if let Some(sections) = &system.sections {
        let names: Vec<String> = sections
            .iter()
            .map(|(name, value)| {
                if value.is_null() {
                    format!("-{}", field(name))
                } else {
                    field(name).into_owned()
                }
            })
            .collect();
        parts.push(format!("sections {}", names.join(", ")));
    }
    if let Some(tools) = system
        .tools_added
        .as_ref()
        .filter(|tools| !tools.is_empty())
    {
        let names: Vec<String> = tools
            .iter()
            .map(|tool| field(&tool.name).into_owned())
            .collect();
        parts.push(format!("+tools {}", names.join(", ")));
    }
    if let Some(tools) = system
        .tools_removed
        .as_ref()
        .filter(|tools| !tools.is_empty())
    {
        let names: Vec<String> = tools
            .iter()
            .map(|tool| field(&tool.name).into_owned())
            .collect();
        parts.push(format!("-tools {}", names.join(", ")));
    }
    if parts.is_empty() {
        "system".to_owned()
    } else {
        format!("system: {}", parts.join("; "))
    }
}

/// The prompt text a system message carries (content, then its sections).
fn system_body(system: &SystemMessage) -> String {
    let mut parts = vec![system.content_text()];
    for value in system
        .sections
        .iter()
        .flat_map(|sections| sections.values())
    {
        if let Some(text) = value.as_str() {
            parts.push(text.to_owned());
        }
    }
    parts.retain(|part| !part.is_empty());
    parts.join("\n\n")
}

const MAX_BODY_LINES: usize = 12;

/// The body of a message as indented lines, each with its control characters (but tabs)
/// shown escaped.
fn body_lines(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = lines
        .iter()
        .take(MAX_BODY_LINES)
        .map(|l| format!("  {}", term::text(l)))
        .collect();
    if lines.len() > MAX_BODY_LINES {
        out.push(format!("  … {} more lines", lines.len() - MAX_BODY_LINES));
    }
    out
}

fn render_entry(out: &mut impl Write, style: Style, stored: &StoredEntry) -> Result<()> {
    let id = field(stored.entry.id.as_ref().map_or("", EntryId::as_str)).into_owned();
    match &stored.entry.kind {
        EntryKind::Message(message) => render_message(out, style, Some(&id), message),
        _ => {
            line(
                out,
                &style.dim(&format!("{id}  {}", describe(&stored.entry))),
            )?;
            Ok(())
        }
    }
}

/// Writes a message: a head line (the role, the model or the tool) and its body; `id` is
/// already escaped.
fn render_message(
    out: &mut impl Write,
    style: Style,
    id: Option<&str>,
    message: &AgentMessage,
) -> Result<()> {
    let prefix = id
        .map(|id| format!("{}  ", style.id(id)))
        .unwrap_or_default();
    let (head, body) = match message {
        AgentMessage::System(system) => (describe_system(system), system_body(system)),
        AgentMessage::User(user) => ("user".to_owned(), user.content.joined_text()),
        AgentMessage::Assistant(assistant) => {
            let mut body = assistant.text();
            for call in assistant.tool_calls() {
                body.push_str(&format!(
                    "\n→ {} {}",
                    field(&call.name),
                    field(&to_js_string(&call.arguments))
                ));
            }
            (
                format!(
                    "assistant ({})",
                    field(&format!("{}/{}", assistant.provider, assistant.model))
                ),
                body,
            )
        }
        AgentMessage::ToolResult(result) => {
            let text: Vec<&str> = result
                .content
                .iter()
                .filter_map(ContentBlock::as_text)
                .collect();
            let head = if result.is_error {
                format!("{} (error)", field(&result.tool_name))
            } else {
                field(&result.tool_name).into_owned()
            };
            (head, text.join("\n"))
        }
        AgentMessage::BashExecution(bash) => {
            (format!("!{}", field(&bash.command)), bash.output.clone())
        }
        AgentMessage::Custom(custom) => (
            field(&custom.custom_type).into_owned(),
            custom.content.joined_text(),
        ),
        AgentMessage::BranchSummary(summary) => {
            ("branch summary".to_owned(), summary.summary.clone())
        }
        AgentMessage::CompactionSummary(summary) => {
            ("compaction summary".to_owned(), summary.summary.clone())
        }
        AgentMessage::Unknown(_) => (describe_message(message), String::new()),
    };
    line(out, &format!("{prefix}{}", style.bold(&head)))?;
    for body_line in body_lines(&body) {
        line(out, &body_line)?;
    }
    Ok(())
}

fn show_tree(
    store: &SessionStore,
    session: &SessionId,
    json: bool,
    out: &mut impl Write,
    style: Style,
) -> Result<()> {
    let nodes = store.tree(session)?;
    if json {
        let rows: Vec<Value> = nodes
            .iter()
            .map(|node| {
                let mut map = Map::new();
                map.insert(
                    "id".to_owned(),
                    node.id.clone().map_or(Value::Null, Value::from),
                );
                map.insert(
                    "parentId".to_owned(),
                    node.parent_id.clone().map_or(Value::Null, Value::from),
                );
                map.insert("type".to_owned(), Value::from(node.type_name.clone()));
                if let Some(label) = &node.label {
                    map.insert("label".to_owned(), Value::from(label.clone()));
                }
                if let Some(ts) = &node.label_timestamp {
                    map.insert("labelTimestamp".to_owned(), Value::from(ts.clone()));
                }
                Value::Object(map)
            })
            .collect();
        json_line(out, &to_js_string(&Value::Array(rows)))?;
        return Ok(());
    }
    let leaf_seq = store.leaf(session)?.map(|stored| stored.seq);
    let entries = store.entries(session)?;
    let by_seq: std::collections::HashMap<i64, &StoredEntry> =
        entries.iter().map(|stored| (stored.seq, stored)).collect();
    for drawn in crate::cli::tree_view::layout(&nodes) {
        let node = &nodes[drawn.index];
        let description = by_seq.get(&node.seq).map_or_else(
            || field(&node.type_name).into_owned(),
            |stored| describe(&stored.entry),
        );
        let mut text = format!(
            "{}{} {}",
            drawn.prefix,
            style.id(&field(node.id.as_deref().unwrap_or("?"))),
            description
        );
        if let Some(label) = &node.label {
            text.push_str(&format!(
                " {}",
                style.accent(&format!("[{}]", field(label)))
            ));
        }
        if Some(node.seq) == leaf_seq {
            text.push_str(&format!(" {}", style.ok("← leaf")));
        }
        line(out, &text)?;
    }
    Ok(())
}

fn show_around(
    store: &SessionStore,
    session: &SessionId,
    entry: &EntryId,
    around: usize,
    json: bool,
    out: &mut impl Write,
    style: Style,
) -> Result<()> {
    let path = store.branch_path(session, &LeafSelector::Entry(entry.clone()))?;
    let Some(target) = path.last().cloned() else {
        return Err(UsageError(format!("session {session} has no entry '{entry}'")).into());
    };
    let before: Vec<StoredEntry> = path[..path.len() - 1]
        .iter()
        .rev()
        .take(around)
        .rev()
        .cloned()
        .collect();
    let mut after = Vec::new();
    let mut current = target.entry.id.clone();
    while after.len() < around {
        let Some(id) = current else { break };
        let children = store.children(session, &id).context("reading children")?;
        let Some(next) = children.into_iter().max_by_key(|child| child.seq) else {
            break;
        };
        current = next.entry.id.clone();
        after.push(next);
    }
    if json {
        let value = json!({
            "session": session.as_str(),
            "entry": entry.as_str(),
            // Nearest first: `before` follows the path up from the target.
            "before": before.iter().rev().map(raw_value).collect::<Vec<_>>(),
            "target": raw_value(&target),
            "after": after.iter().map(raw_value).collect::<Vec<_>>(),
        });
        json_line(out, &to_js_string(&value))?;
        return Ok(());
    }
    for stored in &before {
        render_entry(out, style, stored)?;
    }
    line(out, &style.accent("▶"))?;
    render_entry(out, style, &target)?;
    line(out, &style.accent("◀"))?;
    for stored in &after {
        render_entry(out, style, stored)?;
    }
    Ok(())
}
