//! `pi export [--jsonl] [SESSION] [-o FILE] [--branch]` and `pi export [--jsonl] --all -o DIR
//! [--force]`: stored sessions as reference JSONL files (`CONTRACT.md`, "Interchange"; JSONL
//! is the default, so `--jsonl` may be left out — issue 21 over the contract's form).
//! `pi export --html [SESSION] [-o FILE]`: the session as one self-contained HTML page
//! (`modes/html`); `pi --export FILE.jsonl [OUT.html]` (the reference's flag, `export_file`)
//! makes the page of a session file without storing it.
//!
//! A single session goes to stdout unless `-o` names a file (written to a temporary file
//! beside it, then renamed). `--branch` writes only the active path, re-chained, under a new
//! session id, as the reference's `/export file.jsonl` does. `--all` writes every session to
//! `DIR/--<cwd>--/<timestamp>_<id>.jsonl` and never overwrites a file unless `--force`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use clap::Args;

use crate::cli::output::{self, line};
use crate::cli::{CliContext, UsageError};
use crate::jsonl::writer;
use crate::model::ids::SessionId;
use crate::store::{LeafSelector, ListScope, SessionStore, StoreError};
use crate::support::clock::iso_from_ms;
use crate::support::term;

/// Export stored sessions as reference JSONL files or HTML pages
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Write the reference's JSONL session format (the default; the flag is kept for the
    /// contract's `pi export --jsonl`)
    #[arg(long, conflicts_with = "html")]
    pub jsonl: bool,
    /// Write one self-contained HTML page of the session: its whole tree, the active path
    /// shown, messages rendered (loads nothing from the network)
    #[arg(long, conflicts_with_all = ["branch", "all"])]
    pub html: bool,
    /// Session id or a unique prefix (default: the latest session of this directory)
    pub session: Option<String>,
    /// Write to this file instead of stdout; with --all, the directory to write into
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Export only the active branch, as a linear session under a new id
    #[arg(long, conflicts_with = "all")]
    pub branch: bool,
    /// Export every session into the directory given by -o, in the reference's layout
    #[arg(long, requires = "output", conflicts_with = "session")]
    pub all: bool,
    /// With --all, overwrite files that already exist
    #[arg(long, requires = "all")]
    pub force: bool,
}

/// Writes into a temporary file beside `target` and renames it over `target` on success
/// (also used by the REPL's `/export`).
pub fn write_atomically(
    target: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    crate::support::atomic::write_atomically(target, write)
}

fn write_session(store: &SessionStore, session: &SessionId, out: &mut dyn Write) -> Result<()> {
    store.export_jsonl(session, out)?;
    Ok(())
}

/// Writes the active path of `session` as a linear session under a new id (also the REPL's
/// `/export FILE.jsonl`, which continues it with the lines not saved yet, `unsaved`).
pub fn write_branch(
    store: &SessionStore,
    session: &SessionId,
    unsaved: &[Vec<u8>],
    out: &mut dyn Write,
) -> Result<()> {
    write_branch_as(store, session, &BranchId::new(store), unsaved, out)
}

/// The id and time of a branch export's new session, chosen before it is written (the
/// REPL's `/export DIR/` names the file after them).
pub struct BranchId {
    /// The new session's id.
    pub id: SessionId,
    /// Its header's time (Unix ms).
    pub now: i64,
}

impl BranchId {
    /// A new id at the store's clock's time.
    pub fn new(store: &SessionStore) -> Self {
        let now = store.clock().now_ms();
        Self {
            id: SessionId::generate(store.ids(), now),
            now,
        }
    }

    /// The reference's session file name for it (`<timestamp>_<id>.jsonl`).
    pub fn file_name(&self) -> String {
        writer::session_file_name(&iso_from_ms(self.now), &self.id)
    }
}

/// [`write_branch`] under the id and time of `new`.
pub fn write_branch_as(
    store: &SessionStore,
    session: &SessionId,
    new: &BranchId,
    unsaved: &[Vec<u8>],
    out: &mut dyn Write,
) -> Result<()> {
    let summary = store.session(session)?;
    let (id, now) = (&new.id, new.now);
    let header = writer::branch_header(id, &iso_from_ms(now), &summary.cwd);
    let output = |error| StoreError::Output { source: error };
    writer::write_line(out, &header).map_err(output)?;
    // The path is streamed from the store: one entry in memory at a time.
    let mut chain = writer::LinearBranch::new();
    let mut write = |payload: &[u8]| -> std::result::Result<(), StoreError> {
        let line = chain.next_line(payload).map_err(StoreError::from)?;
        writer::write_line(out, &line).map_err(output)
    };
    store.visit_branch_payloads(session, &LeafSelector::Current, &mut write)?;
    for payload in unsaved {
        write(payload)?;
    }
    out.flush().map_err(output)?;
    Ok(())
}

fn resolve_session(
    store: &SessionStore,
    ctx: &CliContext,
    query: Option<&str>,
) -> Result<SessionId> {
    match query {
        Some(query) => Ok(store.resolve(query)?),
        None => {
            let cwd = ctx.env.cwd().to_string_lossy().into_owned();
            store.most_recent(&cwd)?.ok_or_else(|| {
                anyhow!("no session in {cwd}; name one (`pi sessions list --all` shows them)")
            })
        }
    }
}

/// Writes every session into `dir` in the reference's layout. A session whose file cannot be
/// written is reported on stderr in one line naming it, and the others are still written; an
/// existing file is kept unless `force`. Either makes the command fail at the end.
fn export_all(store: &SessionStore, ctx: &CliContext, dir: &Path, force: bool) -> Result<()> {
    let dir = ctx.env.absolute(dir);
    let sessions = store.list(&ListScope::All)?;
    let mut out = output::stdout();
    let mut existing = 0usize;
    let mut failed = 0usize;
    for summary in &sessions {
        let target = dir
            .join(writer::session_dir_name(&summary.cwd))
            .join(writer::session_file_name(&summary.created, &summary.id));
        if target.exists() && !force {
            existing += 1;
            let mut err = io::stderr().lock();
            writeln!(
                err,
                "pi: {} exists; not overwritten",
                term::line(&target.to_string_lossy())
            )?;
            continue;
        }
        match write_atomically(&target, |file| write_session(store, &summary.id, file)) {
            Ok(()) => line(&mut out, &term::line(&target.to_string_lossy()))?,
            Err(error) => {
                // A closed stdout or stderr ends the command; anything else is this session's.
                if is_broken_pipe(&error) {
                    return Err(error);
                }
                failed += 1;
                out.flush()?;
                let mut err = io::stderr().lock();
                writeln!(
                    err,
                    "pi: session {} not exported: {}",
                    term::line(summary.id.as_str()),
                    term::error_line(error.chain())
                )?;
            }
        }
    }
    out.flush()?;
    let mut problems = Vec::new();
    if failed > 0 {
        problems.push(format!("{failed} could not be written (named above)"));
    }
    if existing > 0 {
        problems.push(format!(
            "{existing} already existed and were kept (--force overwrites them)"
        ));
    }
    if !problems.is_empty() {
        return Err(anyhow!(
            "{} of {} sessions not exported to {}: {}",
            failed + existing,
            sessions.len(),
            term::line(&dir.to_string_lossy()),
            problems.join("; ")
        ));
    }
    Ok(())
}

/// Whether an error comes from a closed pipe.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io_error| io_error.kind() == io::ErrorKind::BrokenPipe)
            || matches!(
                cause.downcast_ref::<StoreError>(),
                Some(StoreError::Output { source }) if source.kind() == io::ErrorKind::BrokenPipe
            )
    })
}

/// Runs `pi export`.
pub fn run_export(args: ExportArgs, ctx: &CliContext) -> Result<()> {
    // Export only reads: the read-only open, which also reads a database this user cannot
    // write without leaving files behind.
    let store = ctx.open_store_read_only()?;
    if args.all {
        let Some(dir) = &args.output else {
            return Err(UsageError("--all needs -o DIR".to_owned()).into());
        };
        return export_all(&store, ctx, dir, args.force);
    }
    let session = resolve_session(&store, ctx, args.session.as_deref())?;
    let write = |out: &mut dyn Write| {
        if args.html {
            crate::modes::html::write_session(&store, &session, out)?;
            Ok(())
        } else if args.branch {
            write_branch(&store, &session, &[], out)
        } else {
            write_session(&store, &session, out)
        }
    };
    match &args.output {
        Some(file) => write_atomically(&ctx.env.absolute(file), write),
        None => {
            let mut out = output::stdout();
            write(&mut out)
        }
    }
}

/// `pi --export FILE.jsonl [OUT.html]`: the page of a session file, made without storing the
/// file (it is read into a store in memory). `OUT` defaults to `pi-session-<file name>.html`
/// in the current directory, as the reference names it; returns the path written.
pub fn export_file(env: &crate::cli::Env, input: &Path, output: Option<&Path>) -> Result<PathBuf> {
    use crate::jsonl::reader::SessionReader;
    use crate::store::{ImportMode, ImportOptions, StoreConfig, StoreLocation};
    let input = env.absolute(input);
    let bytes = crate::support::files::read_regular(&input, crate::jsonl::MAX_LINE_BYTES)
        .with_context(|| format!("cannot read {}", term::line(&input.to_string_lossy())))?;
    let reader = SessionReader::new(&bytes).with_context(|| {
        format!(
            "{} is not a session file",
            term::line(&input.to_string_lossy())
        )
    })?;
    let header = reader.header().clone();
    let header_bytes = reader.header_bytes().to_vec();
    let store = SessionStore::open(StoreConfig {
        location: StoreLocation::Memory,
        clock: std::sync::Arc::new(crate::support::clock::SystemClock),
        ids: std::sync::Arc::new(crate::support::ids::IdSource::random()),
        busy_timeout: std::time::Duration::from_secs(1),
    })?;
    let source = input.to_string_lossy().into_owned();
    let options = ImportOptions {
        source: &source,
        mode: ImportMode::Merge,
    };
    let report = store.import_lines(&header, &header_bytes, reader.map(Ok), &options)?;
    let target = match output {
        Some(path) => env.absolute(path),
        None => {
            let stem = input
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_else(|| "session".to_owned());
            env.cwd().join(format!("pi-session-{stem}.html"))
        }
    };
    write_atomically(&target, |out| {
        crate::modes::html::write_session(&store, &report.session, out)?;
        Ok(())
    })?;
    Ok(target)
}
