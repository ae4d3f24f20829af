//! What the agent command line prints without starting a session: the main help (`pi
//! --help`, `pi help`) and `--list-models [WORDS]` as 1.6.0 prints it.

use std::io::Write;

use anyhow::Result;

use crate::ai::availability;
use crate::cli::config::Env;
use crate::cli::keys;
use crate::support::term;

/// The agent's options for the main help: short form, long form with its value, what it does.
const AGENT_OPTIONS: &[(&str, &str, &str)] = &[
    ("", "--provider <NAME>", "Provider for --model"),
    (
        "",
        "--model <PATTERN>",
        "Model (provider/id, :thinking suffix allowed)",
    ),
    ("", "--api-key <KEY>", "API key for the model's provider"),
    (
        "",
        "--thinking <LEVEL>",
        "off|minimal|low|medium|high|xhigh|max",
    ),
    (
        "",
        "--models <PATTERNS>",
        "Models to cycle through (comma-separated)",
    ),
    (
        "",
        "--system-prompt <TEXT>",
        "Replace the base system prompt",
    ),
    (
        "",
        "--append-system-prompt <TEXT>",
        "Append text or a file (repeatable)",
    ),
    (
        "-p",
        "--print",
        "Print the answer and exit (also with piped stdin)",
    ),
    ("", "--mode <MODE>", "Output mode: text, json or rpc"),
    (
        "-c",
        "--continue",
        "Continue the latest session of this directory",
    ),
    ("-r", "--resume", "Pick a session to resume"),
    (
        "",
        "--session <ID|FILE>",
        "Open a session (id, unique prefix, or a .jsonl file to import)",
    ),
    (
        "",
        "--session-id <ID>",
        "This directory's session with this id (created if missing)",
    ),
    (
        "",
        "--fork <ID|FILE>",
        "Copy a session (or a .jsonl file) into a new one",
    ),
    ("", "--no-session", "Keep nothing (in-memory session)"),
    (
        "",
        "--session-dir <DIR>",
        "The reference's sessions directory to import from",
    ),
    ("-n", "--name <NAME>", "Name the session"),
    (
        "-t",
        "--tools <LIST>",
        "Allowlist of tools (names, * patterns; comma-separated), or only +name/-name entries to change the defaults",
    ),
    (
        "-xt",
        "--exclude-tools <LIST>",
        "Tools never enabled (names, * patterns)",
    ),
    ("-nt", "--no-tools", "No tools"),
    ("-nbt", "--no-builtin-tools", "No built-in tools"),
    ("-nc", "--no-context-files", "No AGENTS.md / CLAUDE.md"),
    ("", "--skill <PATH>", "Load a skill (repeatable)"),
    ("-ns", "--no-skills", "No skill discovery"),
    (
        "",
        "--prompt-template <PATH>",
        "Load a prompt template (repeatable)",
    ),
    ("-np", "--no-prompt-templates", "No template discovery"),
    ("-e", "--extension <PATH>", "Load an extension (repeatable)"),
    ("-ne", "--no-extensions", "No extension discovery"),
    ("", "--no-mcp", "No MCP servers for this run"),
    ("-a", "--approve", "Trust project-local files for this run"),
    (
        "-na",
        "--no-approve",
        "Ignore project-local files for this run",
    ),
    ("", "--list-models [SEARCH]", "List available models"),
    (
        "",
        "--export <FILE> [OUT]",
        "Write the HTML page of a session file (default OUT: pi-session-<name>.html) and exit",
    ),
    (
        "",
        "--db <PATH>",
        "Use this database instead of <agent dir>/pi.db",
    ),
    (
        "",
        "--offline",
        "Accepted (pi makes no network calls at start)",
    ),
    ("-h", "--help", "Print help"),
    ("-v", "--version", "Print version"),
];

/// The main help (`pi --help`, `pi help`), laid out as clap lays out the commands' help
/// (`pi sessions --help`): a line of what it is, `Usage:`, `Commands:`, `Options:`.
pub(crate) fn help_text() -> String {
    let mut out = format!(
        "A coding agent with read, bash, edit and write tools; sessions in SQLite (pi {})\n\n",
        env!("CARGO_PKG_VERSION")
    );
    out.push_str(
        "Usage: pi [OPTIONS] [@FILES]... [MESSAGES]...\n       pi <COMMAND>\n\nCommands:\n",
    );
    for (command, what) in [
        ("sessions", "List, inspect and search stored sessions"),
        (
            "import",
            "Import reference JSONL session files (or directories of them) into the database",
        ),
        (
            "export",
            "Export stored sessions as reference JSONL files or HTML pages",
        ),
        ("db", "Check, back up or reindex the database"),
        ("mcp", "Add, remove and check MCP servers (pi mcp --help)"),
        (
            "remote",
            "Manage the remote archives (PostgreSQL) this agent dir syncs with",
        ),
        (
            "sync",
            "Push this machine's sessions to a remote archive and pull everyone else's",
        ),
        (
            "auth",
            "Sign in to providers (login, logout, status) in <agent dir>/auth.json",
        ),
        (
            "help",
            "Print this message or the help of the given command",
        ),
    ] {
        out.push_str(&format!("  {command:<8}  {what}\n"));
    }
    out.push_str("\nOptions:\n");
    let short_width = AGENT_OPTIONS
        .iter()
        .map(|(short, _, _)| short.len())
        .max()
        .unwrap_or(0);
    let long_width = AGENT_OPTIONS
        .iter()
        .map(|(_, long, _)| long.len())
        .max()
        .unwrap_or(0);
    for (short, long, what) in AGENT_OPTIONS {
        let short = if short.is_empty() {
            " ".repeat(short_width + 2)
        } else {
            format!("{:<width$} ", format!("{short},"), width = short_width + 1)
        };
        out.push_str(&format!("  {short}{long:<long_width$}  {what}\n"));
    }
    out.push_str("\nEnvironment:\n");
    for (name, what) in [
        (
            "PI_CODING_AGENT_DIR",
            "Agent dir (default ~/.pi/agent): models.json, auth.json, settings.json, pi.db",
        ),
        (
            "PI_CODING_AGENT_SESSION_DIR",
            "The reference's sessions directory (default <agent dir>/sessions)",
        ),
        (
            "PI_AUTO_IMPORT=0",
            "Do not import the reference's new sessions before -c, -r, /resume",
        ),
        (
            "ANTHROPIC_API_KEY, …",
            "Provider keys (OPENAI_API_KEY, OPENROUTER_API_KEY, …)",
        ),
    ] {
        out.push_str(&format!("  {name:<27}  {what}\n"));
    }
    out
}

fn format_tokens(count: u64) -> String {
    if count >= 1_000_000 {
        let millions = count as f64 / 1_000_000.0;
        if (millions - millions.round()).abs() < f64::EPSILON {
            format!("{}M", millions.round())
        } else {
            format!("{millions:.1}M")
        }
    } else if count >= 1000 {
        // As the reference's `formatTokenCount`: whole thousands bare, else one decimal
        // (`toFixed(1)`: a tie rounds up).
        if count.is_multiple_of(1000) {
            format!("{}K", count / 1000)
        } else {
            let tenths = (count + 50) / 100;
            format!("{}.{}K", tenths / 10, tenths % 10)
        }
    } else {
        count.to_string()
    }
}

/// `--list-models [WORDS]`: the table of the models that can be used here on stdout, as
/// 1.6.0 prints its available models; then, on stderr, the models pi knows that cannot be
/// used here (the same words matching), one line per provider and reason, saying what to set
/// or run ([`availability::Unusable`]).
pub(crate) fn list_models(env: &Env, search: Option<&str>) -> Result<()> {
    let registry = keys::load_model_registry(env);
    let credentials = keys::load_credentials(env, env.clock());
    let classified = availability::classify(&registry, &credentials);
    let tokens: Vec<String> = search
        .map(|search| search.split_whitespace().map(str::to_lowercase).collect())
        .unwrap_or_default();
    let matches = |model: &crate::ai::Model| {
        let haystack = format!("{} {}", model.provider, model.id).to_lowercase();
        tokens.iter().all(|token| is_subsequence(token, &haystack))
    };
    let unusable: Vec<(&crate::ai::Model, &availability::Unusable)> = classified
        .iter()
        .filter_map(|(model, reason)| reason.as_ref().map(|reason| (*model, reason)))
        .filter(|(model, _)| matches(model))
        .collect();
    let mut models: Vec<&crate::ai::Model> = classified
        .iter()
        .filter(|(_, reason)| reason.is_none())
        .map(|(model, _)| *model)
        .collect();
    let mut out = std::io::stdout().lock();
    if models.is_empty() {
        writeln!(
            out,
            "No models available. Set an API key (e.g. ANTHROPIC_API_KEY), or add a provider to {}",
            env.agent_dir().join("models.json").display()
        )?;
        drop(out);
        return print_unusable(&unusable, search.is_some());
    }
    if let Some(search) = search {
        models.retain(|model| matches(model));
        // As the reference: models exist, none matched the words.
        if models.is_empty() {
            writeln!(out, "No models matching \"{}\"", term::line(search))?;
            drop(out);
            return print_unusable(&unusable, true);
        }
    }
    models.sort_by(|a, b| a.provider.cmp(&b.provider).then(a.id.cmp(&b.id)));
    let rows: Vec<[String; 6]> = models
        .iter()
        .map(|model| {
            [
                term::line(&model.provider).into_owned(),
                term::line(&model.id).into_owned(),
                format_tokens(model.context_window),
                format_tokens(model.max_tokens),
                if model.reasoning { "yes" } else { "no" }.to_owned(),
                if model.accepts_images() { "yes" } else { "no" }.to_owned(),
            ]
        })
        .collect();
    let header = [
        "provider", "model", "context", "max-out", "thinking", "images",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (idx, cell) in row.iter().enumerate() {
            widths[idx] = widths[idx].max(cell.chars().count());
        }
    }
    // Every cell padded to its column, the last one too (the reference's `padEnd`).
    let line = |cells: Vec<&str>| -> String {
        cells
            .iter()
            .enumerate()
            .map(|(idx, cell)| format!("{cell:<width$}", width = widths[idx]))
            .collect::<Vec<_>>()
            .join("  ")
    };
    writeln!(out, "{}", line(header.to_vec()))?;
    for row in &rows {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
    }
    out.flush()?;
    drop(out);
    print_unusable(&unusable, search.is_some())
}

/// The models that cannot be used here, on stderr: a heading, then `provider (N models):
/// reason` per provider and reason.
fn print_unusable(
    unusable: &[(&crate::ai::Model, &availability::Unusable)],
    searched: bool,
) -> Result<()> {
    if unusable.is_empty() {
        return Ok(());
    }
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "{}",
        availability::unusable_heading(unusable.len(), searched)
    )?;
    for line in availability::unusable_lines(unusable) {
        writeln!(err, "  {line}")?;
    }
    Ok(())
}

fn is_subsequence(needle: &str, haystack: &str) -> bool {
    let mut chars = haystack.chars();
    needle.chars().all(|wanted| chars.any(|ch| ch == wanted))
}
