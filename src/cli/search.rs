//! `pi sessions search` and `pi sessions stats`: finding old conversations and totalling
//! their usage.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use crate::cli::output::{self, field, json_line, line, one_line, pad, short_time};
use crate::cli::{CliContext, UsageError};
use crate::remote::archive::ArchiveStatsBy;
use crate::store::ListScope;
use crate::store::maintenance::{StatsBy, StatsFilter};
use crate::store::search::{ContextEditKind, Query, SearchRequest};
use crate::support::clock::{iso_from_ms, ms_from_iso};
use crate::support::json::to_js_string;

const ROLES: &[&str] = &["user", "assistant", "tool", "meta"];
const KINDS: &[&str] = &[
    "text",
    "bash",
    "thinking",
    "tool_call",
    "tool_result",
    "custom",
    "summary",
    "name",
];

/// Which branches a search covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BranchScope {
    /// Every branch.
    All,
    /// Only entries on each session's active path.
    Active,
}

/// Search every conversation (this directory's unless --all or --cwd)
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Words, "phrases", prefix*, AND, OR, NOT, parentheses
    #[arg(required = true, num_args = 1..)]
    pub query: Vec<String>,
    /// Search every directory's sessions
    #[arg(long, conflicts_with = "cwd")]
    pub all: bool,
    /// Search this directory's sessions
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Only hits of these roles: user, assistant, tool, meta (comma-separated or repeated)
    #[arg(long, value_delimiter = ',')]
    pub role: Vec<String>,
    /// Only hits of these kinds: text, bash, thinking, tool_call, tool_result, custom, summary, name
    #[arg(long, value_delimiter = ',')]
    pub kind: Vec<String>,
    /// Only entries at or after this time (ISO date or time, or 7d, 12h, 30m, 2w ago)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only entries before this time (same forms as --since)
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Only hits made under a model whose provider/id contains this text
    #[arg(long, value_name = "PATTERN")]
    pub model: Option<String>,
    /// Only this session (id or unique prefix)
    #[arg(long, value_name = "SESSION")]
    pub session: Option<String>,
    /// Which branches: all (default) or active (each session's current path)
    #[arg(long, value_enum, default_value_t = BranchScope::All)]
    pub branch: BranchScope,
    /// How many hits to show
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Run on this remote archive (PostgreSQL) instead of the local database
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

/// Grouping of `sessions stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatsKey {
    /// Per UTC day.
    Day,
    /// Per ISO week.
    Week,
    /// Per provider/model.
    Model,
    /// Per provider.
    Provider,
    /// Per working directory.
    Cwd,
    /// Per session.
    Session,
    /// Per user who pushed (with --remote).
    User,
    /// Per host pushed from (with --remote).
    Host,
}

/// Token and cost totals by day, week, model, provider, directory or session
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// How to group the totals
    #[arg(long, value_enum, default_value_t = StatsKey::Day)]
    pub by: StatsKey,
    /// Total every directory's sessions
    #[arg(long, conflicts_with = "cwd")]
    pub all: bool,
    /// Total this directory's sessions
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Only usage at or after this time (ISO date or time, or 7d, 12h, 30m, 2w ago)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only usage before this time (same forms as --since)
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// With --remote: only sessions that used a model whose provider/id contains this text
    #[arg(long, value_name = "PATTERN", requires = "remote")]
    pub model: Option<String>,
    /// Run on this remote archive (PostgreSQL) instead of the local database
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

/// Parses `--since`/`--until`: an ISO date or date-time, or an age like `7d`, `12h`, `30m`,
/// `2w` (before `now_ms`).
pub fn parse_time(text: &str, now_ms: i64) -> Result<i64, UsageError> {
    let trimmed = text.trim();
    if let Some(ms) = ms_from_iso(trimmed) {
        return Ok(ms);
    }
    let unit_ms = match trimmed.chars().last() {
        Some('s') => 1_000,
        Some('m') => 60_000,
        Some('h') => 3_600_000,
        Some('d') => 86_400_000,
        Some('w') => 7 * 86_400_000,
        _ => 0,
    };
    let number = trimmed.get(..trimmed.len().saturating_sub(1)).unwrap_or("");
    match (unit_ms, number.parse::<i64>()) {
        (unit, Ok(count)) if unit > 0 && count >= 0 => Ok(now_ms - count.saturating_mul(unit)),
        _ => Err(UsageError(format!(
            "cannot read the time '{text}': use an ISO date (2026-05-07), a date-time (2026-05-07T09:15:00Z) or an age such as 7d, 12h, 30m, 2w"
        ))),
    }
}

fn check_values(flag: &str, values: &[String], allowed: &[&str]) -> Result<(), UsageError> {
    for value in values {
        if !allowed.contains(&value.as_str()) {
            return Err(UsageError(format!(
                "--{flag} '{value}' is not one of: {}",
                allowed.join(", ")
            )));
        }
    }
    Ok(())
}

/// Marks the start of a match in a snippet for people (a private-use character).
const MARK_OPEN: char = '\u{e000}';
/// Marks the end of a match in a snippet for people.
const MARK_CLOSE: char = '\u{e001}';

/// Returns a snippet for people: its control characters shown escaped, then its matches
/// marked in bold yellow (`**…**` without colour). A snippet holding the marker characters
/// itself gets a stray highlight at worst: only pi's own colour codes are ever written.
fn shown_snippet(snippet: &str, style: crate::cli::output::Style) -> String {
    let (open, close) = if style.enabled() {
        ("\x1b[1;33m", "\x1b[0m")
    } else {
        ("**", "**")
    };
    field(snippet)
        .replace(MARK_OPEN, open)
        .replace(MARK_CLOSE, close)
}

/// Runs `sessions search`.
pub fn run_search(args: SearchArgs, ctx: &CliContext) -> Result<()> {
    let text = args.query.join(" ");
    let query =
        Query::parse(&text).map_err(|error| UsageError(format!("search query: {error}")))?;
    check_values("role", &args.role, ROLES)?;
    check_values("kind", &args.kind, KINDS)?;
    if args.limit == 0 {
        return Err(UsageError("--limit must be at least 1".to_owned()).into());
    }
    let now_ms = ctx.env.clock().now_ms();
    let since_ms = args
        .since
        .as_deref()
        .map(|value| parse_time(value, now_ms))
        .transpose()?;
    let until_ms = args
        .until
        .as_deref()
        .map(|value| parse_time(value, now_ms))
        .transpose()?;
    if let Some(remote) = &args.remote {
        let filters = crate::cli::remote::RemoteFilters {
            remote: remote.clone(),
            user: args.user.clone(),
            host: args.host.clone(),
            // The archive holds every machine's directories: all of them unless --cwd.
            cwd: args
                .cwd
                .as_ref()
                .map(|dir| ctx.env.absolute(dir).to_string_lossy().into_owned()),
            model: args.model.clone(),
            since_ms,
            until_ms,
            session: args.session.clone(),
        };
        let highlight = if args.json {
            ("**".to_owned(), "**".to_owned())
        } else {
            (MARK_OPEN.to_string(), MARK_CLOSE.to_string())
        };
        let hits = crate::cli::remote::run_remote_search(
            ctx,
            &filters,
            &query,
            &args.role,
            &args.kind,
            args.limit,
            args.json,
            (&highlight.0, &highlight.1),
        )?;
        let mut out = output::stdout();
        if args.json {
            json_line(&mut out, &to_js_string(&Value::Array(hits)))?;
            return Ok(out.flush()?);
        }
        let style = ctx.style();
        if hits.is_empty() {
            line(&mut out, &style.dim("no matches in the archive"))?;
        }
        for (idx, hit) in hits.iter().enumerate() {
            if idx > 0 {
                line(&mut out, "")?;
            }
            let text = |key: &str| hit.get(key).and_then(Value::as_str).unwrap_or("");
            let title = hit
                .get("name")
                .and_then(Value::as_str)
                .map(|name| field(name).into_owned())
                .or_else(|| {
                    hit.get("firstMessage")
                        .and_then(Value::as_str)
                        .map(|text| one_line(text, 60))
                })
                .unwrap_or_else(|| "(no messages)".to_owned());
            line(
                &mut out,
                &format!(
                    "{}  {}  {}  {}@{}",
                    style.bold(&title),
                    style.dim(&short_time(text("timestamp"))),
                    style.id(&field(text("session"))),
                    field(text("user")),
                    field(text("host"))
                ),
            )?;
            line(
                &mut out,
                &format!(
                    "  {}  entry {}  {}/{}",
                    style.dim(&field(text("cwd"))),
                    style.id(&field(text("entry"))),
                    text("role"),
                    text("kind")
                ),
            )?;
            line(
                &mut out,
                &format!("  {}", shown_snippet(text("snippet"), style)),
            )?;
        }
        return Ok(out.flush()?);
    }
    let store = ctx.open_store_read_only()?;
    let session = args
        .session
        .as_deref()
        .map(|value| store.resolve(value))
        .transpose()?;
    let scope = if args.all || session.is_some() {
        ListScope::All
    } else {
        let dir = match &args.cwd {
            Some(dir) => ctx.env.absolute(dir),
            None => ctx.env.cwd().to_path_buf(),
        };
        ListScope::Cwd(dir.to_string_lossy().into_owned())
    };
    let style = ctx.style();
    // For people the snippet is marked with two private-use characters, replaced by the
    // highlight only after the snippet's own control characters were escaped.
    let highlight = if args.json {
        ("**".to_owned(), "**".to_owned())
    } else {
        (MARK_OPEN.to_string(), MARK_CLOSE.to_string())
    };
    let request = SearchRequest {
        query,
        scope: scope.clone(),
        session,
        roles: args.role,
        kinds: args.kind,
        since_ms,
        until_ms,
        model: args.model,
        active_only: args.branch == BranchScope::Active,
        limit: args.limit,
        now_ms,
        highlight,
        snippet_width: 160,
    };
    let hits = store.search(&request)?;
    let mut out = output::stdout();
    if args.json {
        let rows: Vec<Value> = hits
            .iter()
            .map(|hit| {
                json!({
                    "session": hit.session.as_str(),
                    "entry": hit.entry.as_ref().map(|id| id.as_str()),
                    "role": hit.role,
                    "kind": hit.kind,
                    "snippet": hit.snippet,
                    "score": hit.score,
                    "cwd": hit.cwd,
                    "timestamp": output::iso_or_null(&hit.timestamp),
                    "name": hit.name,
                    "onActivePath": hit.on_active_path,
                    "contextEdit": hit.context_edit.map(|edit| edit.as_str()),
                })
            })
            .collect();
        json_line(&mut out, &to_js_string(&Value::Array(rows)))?;
        return Ok(out.flush()?);
    }
    if hits.is_empty() {
        let hint = match scope {
            ListScope::Cwd(dir) => {
                format!("no matches in the sessions of {} (try --all)", field(&dir))
            }
            ListScope::All => "no matches".to_owned(),
        };
        line(&mut out, &style.dim(&hint))?;
        return Ok(out.flush()?);
    }
    for (idx, hit) in hits.iter().enumerate() {
        if idx > 0 {
            line(&mut out, "")?;
        }
        let title = hit
            .name
            .as_deref()
            .map(|name| field(name).into_owned())
            .or_else(|| hit.first_message.as_deref().map(|text| one_line(text, 60)))
            .unwrap_or_else(|| "(no messages)".to_owned());
        let date = short_time(&hit.timestamp);
        line(
            &mut out,
            &format!(
                "{}  {}  {}",
                style.bold(&title),
                style.dim(&date),
                style.id(&field(hit.session.as_str()))
            ),
        )?;
        let branch = match (hit.on_active_path, hit.context_edit) {
            (false, _) => "  (other branch)",
            (true, Some(ContextEditKind::Omitted)) => "  (history: omitted from the context)",
            (true, Some(ContextEditKind::Replaced)) => "  (history: replaced in the context)",
            (true, None) => "",
        };
        line(
            &mut out,
            &format!(
                "  {}  entry {}  {}/{}{}",
                style.dim(&field(&hit.cwd)),
                style.id(&field(hit.entry.as_ref().map_or("?", |id| id.as_str()))),
                hit.role,
                hit.kind,
                branch
            ),
        )?;
        line(
            &mut out,
            &format!("  {}", shown_snippet(&hit.snippet, style)),
        )?;
    }
    Ok(out.flush()?)
}

/// Runs `sessions stats`.
pub fn run_stats(args: StatsArgs, ctx: &CliContext) -> Result<()> {
    let now_ms = ctx.env.clock().now_ms();
    let since_ms = args
        .since
        .as_deref()
        .map(|value| parse_time(value, now_ms))
        .transpose()?;
    let until_ms = args
        .until
        .as_deref()
        .map(|value| parse_time(value, now_ms))
        .transpose()?;
    if let Some(remote) = &args.remote {
        let by = match args.by {
            StatsKey::Day => ArchiveStatsBy::Day,
            StatsKey::Week => ArchiveStatsBy::Week,
            StatsKey::Model => ArchiveStatsBy::Model,
            StatsKey::Provider => ArchiveStatsBy::Provider,
            StatsKey::Cwd => ArchiveStatsBy::Cwd,
            StatsKey::Session => ArchiveStatsBy::Session,
            StatsKey::User => ArchiveStatsBy::User,
            StatsKey::Host => ArchiveStatsBy::Host,
        };
        let filters = crate::cli::remote::RemoteFilters {
            remote: remote.clone(),
            user: args.user.clone(),
            host: args.host.clone(),
            cwd: args
                .cwd
                .as_ref()
                .map(|dir| ctx.env.absolute(dir).to_string_lossy().into_owned()),
            model: args.model.clone(),
            since_ms,
            until_ms,
            session: None,
        };
        return crate::cli::remote::run_remote_stats(ctx, &filters, by, args.json);
    }
    let by = match args.by {
        StatsKey::Day => StatsBy::Day,
        StatsKey::Week => StatsBy::Week,
        StatsKey::Model => StatsBy::Model,
        StatsKey::Provider => StatsBy::Provider,
        StatsKey::Cwd => StatsBy::Cwd,
        StatsKey::Session => StatsBy::Session,
        StatsKey::User | StatsKey::Host => {
            return Err(UsageError(
                "--by user and --by host total a remote archive: add --remote NAME".to_owned(),
            )
            .into());
        }
    };
    // The sessions of this directory unless --all or --cwd, as `search` and `list` take them.
    let scope = if args.all {
        ListScope::All
    } else {
        let dir = match &args.cwd {
            Some(dir) => ctx.env.absolute(dir),
            None => ctx.env.cwd().to_path_buf(),
        };
        ListScope::Cwd(dir.to_string_lossy().into_owned())
    };
    let store = ctx.open_store_read_only()?;
    let (rows, sessions) = store.usage_stats(
        by,
        &StatsFilter {
            since_ms,
            until_ms,
            scope: scope.clone(),
        },
    )?;
    let mut out = output::stdout();
    if args.json {
        let values: Vec<Value> = rows
            .iter()
            .map(|row| {
                json!({
                    "key": row.key,
                    "sessions": row.sessions,
                    "messages": row.messages,
                    "input": row.input,
                    "output": row.output,
                    "cacheRead": row.cache_read,
                    "cacheWrite": row.cache_write,
                    "cost": row.cost,
                })
            })
            .collect();
        json_line(&mut out, &to_js_string(&Value::Array(values)))?;
        return Ok(out.flush()?);
    }
    let style = ctx.style();
    if rows.is_empty() {
        let since = since_ms
            .map(|ms| format!(" since {}", iso_from_ms(ms)))
            .unwrap_or_default();
        let until = until_ms
            .map(|ms| format!(" before {}", iso_from_ms(ms)))
            .unwrap_or_default();
        let place = match &scope {
            ListScope::All => String::new(),
            ListScope::Cwd(dir) => format!(" in the sessions of {} (try --all)", field(dir)),
        };
        line(
            &mut out,
            &style.dim(&format!("no usage recorded{since}{until}{place}")),
        )?;
        return Ok(out.flush()?);
    }
    let key_width = rows
        .iter()
        .map(|row| field(&row.key).chars().count())
        .max()
        .unwrap_or(3)
        .max(3);
    line(
        &mut out,
        &style.bold(&format!(
            "{}  {:>8}  {:>9}  {:>12}  {:>10}  {:>12}  {:>11}  {:>10}",
            pad("key", key_width),
            "sessions",
            "messages",
            "input",
            "output",
            "cache read",
            "cache write",
            "cost"
        )),
    )?;
    let mut total = (0, 0, 0, 0, 0, 0.0);
    for row in &rows {
        total.0 += row.messages;
        total.1 += row.input;
        total.2 += row.output;
        total.3 += row.cache_read;
        total.4 += row.cache_write;
        total.5 += row.cost;
        line(
            &mut out,
            &format!(
                "{}  {:>8}  {:>9}  {:>12}  {:>10}  {:>12}  {:>11}  {:>10}",
                pad(&field(&row.key), key_width),
                row.sessions,
                row.messages,
                row.input,
                row.output,
                row.cache_read,
                row.cache_write,
                format!("${:.4}", row.cost)
            ),
        )?;
    }
    line(
        &mut out,
        &style.dim(&format!(
            "{}  {:>8}  {:>9}  {:>12}  {:>10}  {:>12}  {:>11}  {:>10}",
            pad("total", key_width),
            sessions,
            total.0,
            total.1,
            total.2,
            total.3,
            total.4,
            format!("${:.4}", total.5)
        )),
    )?;
    Ok(out.flush()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_iso_or_ages() {
        let now = ms_from_iso("2026-01-10T00:00:00.000Z").unwrap();
        assert_eq!(
            parse_time("7d", now).unwrap(),
            ms_from_iso("2026-01-03T00:00:00.000Z").unwrap()
        );
        assert_eq!(parse_time("12h", now).unwrap(), now - 12 * 3_600_000);
        assert_eq!(
            parse_time("2026-01-01", now).unwrap(),
            ms_from_iso("2026-01-01T00:00:00Z").unwrap()
        );
        assert!(parse_time("yesterday", now).is_err());
        assert!(parse_time("-3d", now).is_err());
    }
}
