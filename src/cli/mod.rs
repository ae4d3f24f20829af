//! The command line: argument dispatch, the non-agent commands (`sessions`, `import`,
//! `export`, `db`) and the mapping of errors to exit codes (`../shared/CONTRACT.md`).
//!
//! A first non-option argument equal to a command name selects that command; everything else
//! is the agent's command line. Invariant: this layer and `modes/` are the only ones that
//! write to the terminal; `cli/config.rs` is the only reader of the environment.

pub mod agent_args;
pub mod auth;
pub mod auth_check;
pub mod auth_store;
pub mod autoimport;
pub mod config;
pub mod db;
pub mod export;
pub mod help;
pub mod import;
pub mod keys;
pub mod mcp;
pub mod output;
pub mod remote;
pub mod search;
pub mod sessions;
pub mod settings;
pub mod startup;
pub mod tree_view;
pub mod trust;

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::cli::config::Env;
use crate::cli::output::Style;
use crate::store::{SessionStore, StoreError};
use crate::support::term;

/// The non-agent commands.
#[derive(Debug, Parser)]
#[command(
    name = "pi",
    version,
    about = "pi: a coding agent with its memory in SQLite"
)]
pub struct Cli {
    /// Use this database instead of <agent dir>/pi.db
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// The command
    #[command(subcommand)]
    pub command: Command,
}

/// A non-agent command.
///
/// `defer`: each command's arguments are declared only when clap reaches that command, so a
/// `pi sessions search` process does not build the whole command tree (its cost per start:
/// `docs/BENCHMARKS.md`, "Search"); help and errors are the same.
// Parsed once per process and moved into its handler: the size of the largest variant (the
// `sessions` arguments) costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// List, inspect and search stored sessions
    Sessions(sessions::SessionsArgs),
    /// Import reference JSONL session files (or directories of them) into the database
    Import(import::ImportArgs),
    /// Export stored sessions as reference JSONL files or HTML pages
    Export(export::ExportArgs),
    /// Check, back up or reindex the database
    Db(db::DbArgs),
    /// Manage the remote archives (PostgreSQL) this agent dir syncs with
    Remote(remote::RemoteArgs),
    /// Push this machine's sessions to a remote archive and pull everyone else's
    Sync(remote::SyncArgs),
}

/// The words that select a non-agent command when they are the first non-option argument.
pub const COMMAND_WORDS: &[&str] = &["sessions", "import", "export", "db", "remote", "sync"];

/// The reference's package commands, which pi does not implement.
const PACKAGE_WORDS: &[&str] = &["install", "remove", "uninstall", "update", "list", "config"];

/// The one-line answer (exit 2) to a command word of the reference that pi does not implement:
/// never a prompt to the model.
fn unimplemented_word(word: &str) -> Option<String> {
    PACKAGE_WORDS.contains(&word).then(|| {
        format!(
            "`pi {word}` manages the reference's packages and is not implemented by pi; use the reference CLI for packages"
        )
    })
}

/// `pi help [COMMAND]`: the main help, or a command's (`pi COMMAND --help`); `after` is what
/// follows the word `help`.
fn help(after: &[OsString]) -> Result<ExitCode> {
    let words: Vec<String> = after
        .iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    match words.as_slice() {
        [] => {
            print!("{}", help::help_text());
            Ok(ExitCode::SUCCESS)
        }
        [command, ..] if command == "mcp" => mcp::run_mcp(&["--help".to_owned()], &Env::capture()),
        [command, sub @ ..] if COMMAND_WORDS.contains(&command.as_str()) => {
            let mut help_args: Vec<OsString> = vec![OsString::from("pi"), OsString::from(command)];
            help_args.extend(sub.iter().map(OsString::from));
            help_args.push(OsString::from("--help"));
            match Cli::try_parse_from(&help_args) {
                Err(error) if is_help(&error) => {
                    let _ = error.print();
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => Err(UsageError(clap_error_line(&error)).into()),
                Ok(_) => Ok(ExitCode::SUCCESS),
            }
        }
        [command, ..] if command == "auth" => {
            auth::print_help();
            Ok(ExitCode::SUCCESS)
        }
        [command, ..] => Err(UsageError(match unimplemented_word(command) {
            Some(answer) => answer,
            None => format!(
                "no command `{}`; the commands are {} (and `pi --help` for the agent)",
                term::line(command),
                COMMAND_WORDS.join(", ")
            ),
        })
        .into()),
    }
}

/// A usage error: bad arguments (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// What every command gets: the environment and the global options.
#[derive(Debug)]
pub struct CliContext {
    /// The captured environment.
    pub env: Env,
    /// The `--db` option.
    pub db: Option<PathBuf>,
}

impl CliContext {
    /// Opens the store (the database file named by `--db` or the agent dir).
    pub fn open_store(&self) -> Result<SessionStore> {
        Ok(SessionStore::open(
            self.env.store_config(self.db.as_deref()),
        )?)
    }

    /// Opens the store for a command that only reads it (search, list, show, stats): one
    /// read-only connection when the database exists and is up to date.
    pub fn open_store_read_only(&self) -> Result<SessionStore> {
        Ok(SessionStore::open_read_only(
            self.env.store_config(self.db.as_deref()),
        )?)
    }

    /// Returns the colour style for stdout.
    pub fn style(&self) -> Style {
        Style::for_stdout(self.env.color_allowed())
    }
}

/// Returns the first argument that is not an option or the value of `--db`.
fn first_word(args: &[OsString]) -> Option<(usize, String)> {
    let mut idx = 1;
    while idx < args.len() {
        let arg = args[idx].to_string_lossy();
        if arg == "--db" {
            idx += 2;
            continue;
        }
        if arg.starts_with('-') {
            return None;
        }
        return Some((idx, arg.into_owned()));
    }
    None
}

/// Whether clap's "error" is help or the version, which it prints as they are.
fn is_help(error: &clap::Error) -> bool {
    use clap::error::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    )
}

/// Returns a clap usage error as one line (clap writes it over three to six: the message,
/// its details indented, a usage paragraph, a tip): the message with its details, then the
/// usage when clap gave one (every error is one line, CONTRACT "Exit codes").
fn clap_error_line(error: &clap::Error) -> String {
    let text = error.to_string();
    let mut paragraphs = text
        .split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|paragraph| !paragraph.is_empty());
    let message = paragraphs.next().unwrap_or_default();
    let message = message
        .strip_prefix("error: ")
        .unwrap_or(&message)
        .to_owned();
    let usage = paragraphs.find_map(|paragraph| {
        paragraph
            .strip_prefix("Usage: ")
            .map(|usage| usage.to_owned())
    });
    match usage {
        Some(usage) => format!("{message} (usage: {usage}; --help shows more)"),
        None => format!("{message} (--help shows the usage)"),
    }
}

/// Runs pi with these arguments and returns the exit code.
pub fn run(args: Vec<OsString>, env: Env) -> ExitCode {
    match dispatch(args, env) {
        Ok(code) => code,
        Err(error) => report(&error),
    }
}

fn dispatch(args: Vec<OsString>, env: Env) -> Result<ExitCode> {
    if let Some((idx, word)) = first_word(&args) {
        if COMMAND_WORDS.contains(&word.as_str()) {
            let cli = match Cli::try_parse_from(&args) {
                Ok(cli) => cli,
                Err(error) if is_help(&error) => {
                    let code = error.exit_code();
                    // clap prints help and version to stdout (help for a missing subcommand
                    // to stderr).
                    let _ = error.print();
                    return Ok(ExitCode::from(u8::try_from(code).unwrap_or(2)));
                }
                Err(error) => return Err(UsageError(clap_error_line(&error)).into()),
            };
            let ctx = CliContext { env, db: cli.db };
            match cli.command {
                Command::Sessions(sessions_args) => sessions::run_sessions(sessions_args, &ctx)?,
                Command::Import(import_args) => import::run_import(import_args, &ctx)?,
                Command::Export(export_args) => export::run_export(export_args, &ctx)?,
                Command::Db(db_args) => db::run_db(db_args, &ctx)?,
                Command::Remote(remote_args) => remote::run_remote(remote_args, &ctx)?,
                Command::Sync(sync_args) => remote::run_sync(sync_args, &ctx)?,
            }
            return Ok(ExitCode::SUCCESS);
        }
        if word == "help" {
            return help(&args[idx + 1..]);
        }
        if word == "mcp" {
            let rest: Vec<String> = args[idx + 1..]
                .iter()
                .map(|arg| arg.to_string_lossy().into_owned())
                .collect();
            return mcp::run_mcp(&rest, &env);
        }
        if word == "auth" {
            let rest: Vec<String> = args[idx + 1..]
                .iter()
                .map(|arg| arg.to_string_lossy().into_owned())
                .collect();
            return auth::run(&rest, env);
        }
        if let Some(answer) = unimplemented_word(&word) {
            return Err(UsageError(answer).into());
        }
    }
    // The agent: everything else (the global --db option is taken out first).
    let mut db = None;
    let mut rest = Vec::new();
    let mut idx = 1;
    while idx < args.len() {
        let arg = args[idx].to_string_lossy().into_owned();
        if arg == "--db" && idx + 1 < args.len() {
            db = Some(PathBuf::from(&args[idx + 1]));
            idx += 2;
            continue;
        }
        if let Some(value) = arg.strip_prefix("--db=") {
            db = Some(PathBuf::from(value));
        } else {
            rest.push(arg);
        }
        idx += 1;
    }
    startup::run(rest, env, db)
}

/// Maps an error to its exit code, printing one line on stderr (nothing for a closed stdout):
/// the error and its causes, each once ([`term::error_line`]).
fn report(error: &anyhow::Error) -> ExitCode {
    for cause in error.chain() {
        if let Some(io_error) = cause.downcast_ref::<io::Error>()
            && io_error.kind() == io::ErrorKind::BrokenPipe
        {
            return ExitCode::SUCCESS;
        }
    }
    let code = exit_code(error);
    let mut stderr = io::stderr().lock();
    let _ = writeln!(stderr, "pi: {}", term::error_line(error.chain()));
    if let Some(StoreError::AmbiguousSession { candidates, .. }) =
        error.downcast_ref::<StoreError>()
    {
        for candidate in candidates {
            let _ = writeln!(stderr, "  {}", term::line(candidate.as_str()));
        }
    }
    ExitCode::from(code)
}

/// Returns the exit code for an error: 2 for usage errors, 1 otherwise.
pub fn exit_code(error: &anyhow::Error) -> u8 {
    for cause in error.chain() {
        if cause.downcast_ref::<UsageError>().is_some() {
            return 2;
        }
        if let Some(StoreError::AmbiguousSession { .. }) = cause.downcast_ref::<StoreError>() {
            return 2;
        }
    }
    1
}

/// Entry point used by `main.rs`.
pub fn main() -> ExitCode {
    run(config::args(), Env::capture())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_db_works_before_and_after_the_command() {
        let cli = Cli::try_parse_from(["pi", "--db", "x.db", "sessions", "list", "--all"]).unwrap();
        assert_eq!(cli.db, Some(PathBuf::from("x.db")));
        let cli = Cli::try_parse_from(["pi", "sessions", "list", "--db", "y.db"]).unwrap();
        assert_eq!(cli.db, Some(PathBuf::from("y.db")));
        assert!(Cli::try_parse_from(["pi", "sessions", "list", "--all", "--cwd", "/x"]).is_err());
    }

    /// Renders the `--help` of the command at `path` (clap's `DisplayHelp` error).
    fn help_of(path: &[String]) -> String {
        let mut args = vec!["pi"];
        args.extend(path.iter().map(String::as_str));
        args.push("--help");
        match Cli::try_parse_from(args) {
            Err(error) if error.kind() == clap::error::ErrorKind::DisplayHelp => error.to_string(),
            other => panic!("expected help for {path:?}, got {other:?}"),
        }
    }

    /// Returns the `Commands:` list of a help text: each name with its about text.
    fn listed_commands(help: &str) -> Vec<(String, String)> {
        help.lines()
            .skip_while(|line| *line != "Commands:")
            .skip(1)
            .take_while(|line| !line.is_empty())
            .filter_map(|line| {
                let (name, about) = line.trim().split_once(' ')?;
                Some((name.to_owned(), about.trim().to_owned()))
            })
            .collect()
    }

    #[test]
    fn deferred_commands_show_the_about_their_parent_lists() {
        // `#[command(defer = true)]` declares a command's arguments when clap reaches it, and
        // then its `Args` struct's doc comment becomes its about text: it must be the text the
        // parent's command list shows, at every level.
        let mut pending: Vec<Vec<String>> = vec![Vec::new()];
        let mut checked = 0;
        while let Some(path) = pending.pop() {
            for (name, about) in listed_commands(&help_of(&path)) {
                if name == "help" {
                    continue;
                }
                let mut child = path.clone();
                child.push(name);
                let help = help_of(&child);
                assert_eq!(help.lines().next(), Some(about.as_str()), "pi {child:?}");
                checked += 1;
                pending.push(child);
            }
        }
        // sessions, import, export, db, remote, sync; sessions' 6, db's 4, remote's 3
        assert_eq!(checked, 6 + 6 + 4 + 3, "commands checked");
    }

    #[test]
    fn first_word_skips_the_db_value() {
        let args: Vec<OsString> = ["pi", "--db", "sessions", "sessions", "list"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(first_word(&args), Some((3, "sessions".to_owned())));
        let args: Vec<OsString> = ["pi", "-p", "sessions"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(first_word(&args), None);
    }

    #[test]
    fn show_takes_tree_context_leaf_and_entry() {
        let cli = Cli::try_parse_from([
            "pi",
            "sessions",
            "show",
            "abc",
            "--context",
            "--leaf",
            "x1",
            "--json",
        ])
        .unwrap();
        let Command::Sessions(args) = cli.command else {
            panic!("expected the sessions command");
        };
        assert!(
            matches!(args.command, sessions::SessionsCommand::Show(ref show) if show.context && show.json)
        );
        assert!(
            Cli::try_parse_from(["pi", "sessions", "show", "abc", "--tree", "--context"]).is_err()
        );
    }
}
