//! `pi import [PATH…] [--as-new] [--json]`: reference JSONL session files into the database
//! (`CONTRACT.md`, "Interchange").
//!
//! Files are imported one transaction each, in path order (directories are searched
//! recursively for `*.jsonl`, sorted); without a PATH, the reference's sessions directory
//! (`PI_CODING_AGENT_SESSION_DIR`, else the `sessionDir` setting, else
//! `<agent dir>/sessions`). Sources are only read. A refused file (no valid header, a
//! conflicting line, unreadable) makes the command exit 1 after every file was tried.

use std::collections::HashSet;
use std::fs;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;

use anyhow::{Result, anyhow};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Map, Value};

use crate::cli::CliContext;
use crate::cli::output::{self, field, json_line, line};
use crate::cli::settings::Settings;
use crate::jsonl::{Item, MAX_LINE_BYTES, SessionReader, SkipReason};
use crate::model::ids::SessionId;
use crate::store::{ImportMode, ImportOptions, ImportStatus, SessionStore, StoreError};
use crate::support::files;
use crate::support::json::to_js_string;

/// Import reference JSONL session files (or directories of them) into the database
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Session files, or directories searched recursively for *.jsonl (default: the
    /// reference's sessions directory)
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Store a file whose session is already in the database as a new session instead of
    /// merging it
    #[arg(long)]
    pub as_new: bool,
    /// Print one JSON object per file
    #[arg(long)]
    pub json: bool,
}

/// The outcome of one file, as `import --json` prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct FileReport {
    /// The file as named or found.
    pub file: PathBuf,
    /// The session it went to (none when refused before a header was read).
    pub session: Option<SessionId>,
    /// How it ended.
    pub status: ImportStatus,
    /// Entries in the session after the import.
    pub entries: i64,
    /// Entry lines appended.
    pub added: u64,
    /// Lines skipped: 1-based number and reason.
    pub skipped: Vec<(usize, SkipReason)>,
    /// Why the file was refused.
    pub error: Option<String>,
}

impl FileReport {
    fn refused(file: &Path, session: Option<SessionId>, error: String) -> Self {
        Self {
            file: file.to_path_buf(),
            session,
            status: ImportStatus::Refused,
            entries: 0,
            added: 0,
            skipped: Vec::new(),
            error: Some(error),
        }
    }

    /// Returns the report as the contract's JSON object.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert(
            "file".to_owned(),
            Value::from(self.file.to_string_lossy().into_owned()),
        );
        map.insert(
            "session".to_owned(),
            self.session
                .as_ref()
                .map_or(Value::Null, |id| Value::from(id.as_str())),
        );
        map.insert("status".to_owned(), Value::from(self.status.as_str()));
        map.insert("entries".to_owned(), Value::from(self.entries));
        map.insert("added".to_owned(), Value::from(self.added));
        let skipped: Vec<Value> = self
            .skipped
            .iter()
            .map(|(number, reason)| {
                let mut item = Map::new();
                item.insert("line".to_owned(), Value::from(*number));
                item.insert("reason".to_owned(), Value::from(reason.as_str()));
                Value::Object(item)
            })
            .collect();
        map.insert("skipped".to_owned(), Value::Array(skipped));
        if let Some(error) = &self.error {
            map.insert("error".to_owned(), Value::from(error.as_str()));
        }
        Value::Object(map)
    }
}

/// How many parsed lines the reading thread may run ahead of the database.
const READ_AHEAD: usize = 512;

/// Imports one file; `progress` is told how many of its bytes were read so far.
///
/// Lines are read and parsed on a second thread while this one stores them, so parsing and
/// SQLite overlap on a machine with a core to spare. Problems with the file are a refused
/// report; a database error is returned.
pub fn import_file(
    store: &SessionStore,
    file: &Path,
    mode: ImportMode,
    progress: &mut dyn FnMut(u64),
) -> Result<FileReport> {
    // Only a regular file, and no line longer than the limit (a FIFO blocked forever,
    // `/dev/zero` grew without end).
    let bytes = match files::read_regular(file, MAX_LINE_BYTES) {
        Ok(bytes) => bytes,
        Err(error) => {
            return Ok(FileReport::refused(
                file,
                None,
                format!("{error}; nothing was imported"),
            ));
        }
    };
    let mut reader = match SessionReader::new(&bytes) {
        Ok(reader) => reader,
        Err(error) => {
            progress(bytes.len() as u64);
            return Ok(FileReport::refused(
                file,
                None,
                format!("{error}; the file was left as it is"),
            ));
        }
    };
    let header = reader.header().clone();
    let header_bytes = reader.header_bytes().to_vec();
    let source = file.to_string_lossy().into_owned();
    let options = ImportOptions {
        source: &source,
        mode,
    };
    let read_so_far = AtomicU64::new(0);
    let bytes_read = &read_so_far;
    // `None` marks the end of the file: a channel that closes without it means the reading
    // side failed, and the import must be rolled back rather than commit a prefix.
    let (sender, receiver) = mpsc::sync_channel::<Option<Item>>(READ_AHEAD);
    let (report, skipped) = thread::scope(|scope| {
        // `move`: the thread owns the sender, so the channel closes when reading ends.
        let reading = scope.spawn(move || {
            let mut skipped = Vec::new();
            while let Some(item) = reader.next() {
                if let Item::Skipped(line) = &item {
                    skipped.push((line.line, line.reason));
                }
                bytes_read.store(reader.bytes_read() as u64, Ordering::Relaxed);
                // The receiver is gone when the import stopped early (a conflict or an error).
                if sender.send(Some(item)).is_err() {
                    return skipped;
                }
            }
            let _ = sender.send(None);
            skipped
        });
        let mut finished = false;
        let items = std::iter::from_fn(|| {
            if finished {
                return None;
            }
            match receiver.recv() {
                Ok(Some(item)) => {
                    progress(bytes_read.load(Ordering::Relaxed));
                    Some(Ok(item))
                }
                Ok(None) => {
                    finished = true;
                    None
                }
                Err(_) => {
                    finished = true;
                    Some(Err(StoreError::ImportAborted {
                        file: source.clone(),
                        reason: "the reading thread stopped before the end of the file".into(),
                    }))
                }
            }
        });
        let report = store.import_lines(&header, &header_bytes, items, &options);
        // Unblocks the reading thread if the import did not consume every line.
        drop(receiver);
        let skipped = reading
            .join()
            .map_err(|_| anyhow!("{}: the reading thread failed", file.display()));
        (report, skipped)
    });
    let report = report?;
    let skipped = skipped?;
    let error = report.conflict.as_ref().map(|conflict| {
        format!(
            "line {}: entry '{}' is stored in session {} with different content; nothing was imported (--as-new imports the file as a new session)",
            conflict.line, conflict.id, report.session
        )
    });
    Ok(FileReport {
        file: file.to_path_buf(),
        session: Some(report.session),
        status: report.status,
        entries: report.entries,
        added: report.added,
        // Nothing of a refused file was stored, quarantine included.
        skipped: if report.status == ImportStatus::Refused {
            Vec::new()
        } else {
            skipped
        },
        error,
    })
}

/// A file to import, or a path that cannot be read (or is not a regular file).
enum Target {
    File(PathBuf),
    Unreadable(PathBuf, String),
}

/// The target for a path named or found: a regular file (or a symlink to one) to import,
/// anything else refused without being opened.
fn target_for(path: &Path) -> Target {
    match files::check_regular(path) {
        Ok(()) => Target::File(path.to_path_buf()),
        Err(error) => {
            Target::Unreadable(path.to_path_buf(), format!("{error}; nothing was imported"))
        }
    }
}

/// Finds `*.jsonl` files under `dir`, sorted, following directory links once.
fn walk(dir: &Path, seen: &mut HashSet<PathBuf>, out: &mut Vec<Target>) {
    let canonical = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    if !seen.insert(canonical) {
        return;
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            out.push(Target::Unreadable(
                dir.to_path_buf(),
                format!("cannot read: {error}"),
            ));
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .collect();
    paths.sort();
    for path in paths {
        match fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => walk(&path, seen, out),
            // Refused when it is not a regular file: a FIFO named *.jsonl is not skipped
            // silently, nor waited for.
            Ok(_) => {
                if path.extension().is_some_and(|ext| ext == "jsonl") {
                    out.push(target_for(&path));
                }
            }
            Err(error) => {
                if path.extension().is_some_and(|ext| ext == "jsonl") {
                    out.push(Target::Unreadable(path, format!("cannot read: {error}")));
                }
            }
        }
    }
}

fn discover(paths: &[PathBuf]) -> Vec<Target> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for path in paths {
        match fs::metadata(path) {
            Ok(meta) if meta.is_dir() => walk(path, &mut seen, &mut out),
            Ok(_) => out.push(target_for(path)),
            Err(error) => out.push(Target::Unreadable(
                path.clone(),
                format!("cannot read: {error}"),
            )),
        }
    }
    out
}

/// Returns the reference's sessions directory: `PI_CODING_AGENT_SESSION_DIR`, else the
/// `sessionDir` setting, else `<agent dir>/sessions`.
pub fn reference_sessions_dir(ctx: &CliContext) -> PathBuf {
    if let Some(dir) = ctx.env.var("PI_CODING_AGENT_SESSION_DIR") {
        return ctx.env.absolute(&ctx.env.expand_tilde(dir));
    }
    let agent_dir = ctx.env.agent_dir();
    let settings = Settings::load(&agent_dir, ctx.env.cwd(), ctx.env.home());
    match settings.session_dir() {
        Some(dir) => ctx.env.absolute(&dir),
        None => agent_dir.join("sessions"),
    }
}

fn print_human(out: &mut impl Write, report: &FileReport) -> io::Result<()> {
    let file = field(&report.file.to_string_lossy()).into_owned();
    match (&report.status, &report.error) {
        (ImportStatus::Refused, Some(error)) => {
            line(out, &format!("refused    {file}: {}", field(error)))?;
        }
        (status, _) => {
            let session = report
                .session
                .as_ref()
                .map_or_else(String::new, |id| field(id.as_str()).into_owned());
            line(
                out,
                &format!(
                    "{:<9}  {session}  {file}  ({} entries, {} added)",
                    status.as_str(),
                    report.entries,
                    report.added
                ),
            )?;
        }
    }
    const SHOWN: usize = 10;
    for (number, reason) in report.skipped.iter().take(SHOWN) {
        line(out, &format!("  skipped line {number}: {reason}"))?;
    }
    if report.skipped.len() > SHOWN {
        line(
            out,
            &format!(
                "  … and {} more skipped lines (--json lists them all)",
                report.skipped.len() - SHOWN
            ),
        )?;
    }
    Ok(())
}

/// Runs `pi import`.
pub fn run_import(args: ImportArgs, ctx: &CliContext) -> Result<()> {
    let paths: Vec<PathBuf> = if args.paths.is_empty() {
        let dir = reference_sessions_dir(ctx);
        if !dir.is_dir() {
            let mut err = io::stderr().lock();
            writeln!(
                err,
                "pi: no reference sessions directory at {}",
                field(&dir.to_string_lossy())
            )?;
            return Ok(());
        }
        vec![dir]
    } else {
        args.paths
            .iter()
            .map(|path| ctx.env.absolute(path))
            .collect()
    };
    let targets = discover(&paths);
    let store = ctx.open_store()?;
    let indexed_before = store.search_index_docs()?;
    let mode = if args.as_new {
        ImportMode::AsNew
    } else {
        ImportMode::Merge
    };
    let total: u64 = targets
        .iter()
        .map(|target| match target {
            Target::File(path) => fs::metadata(path).map_or(0, |meta| meta.len()),
            Target::Unreadable(..) => 0,
        })
        .sum();
    let bar = if io::stderr().is_terminal() {
        let bar = ProgressBar::new(total);
        if let Ok(style) = ProgressStyle::with_template(
            "{bar:30} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} {msg}",
        ) {
            bar.set_style(style);
        }
        Some(bar)
    } else {
        None
    };
    let mut out = output::stdout();
    let mut refused = 0usize;
    let mut done_before: u64 = 0;
    for target in &targets {
        let report = match target {
            Target::Unreadable(path, error) => FileReport::refused(path, None, error.clone()),
            Target::File(path) => {
                if let Some(bar) = &bar {
                    bar.set_message(
                        path.file_name()
                            .map(|name| field(&name.to_string_lossy()).into_owned())
                            .unwrap_or_default(),
                    );
                }
                let mut progress = |read: u64| {
                    if let Some(bar) = &bar {
                        bar.set_position(done_before + read);
                    }
                };
                let report = import_file(&store, path, mode, &mut progress)?;
                done_before += fs::metadata(path).map_or(0, |meta| meta.len());
                report
            }
        };
        if report.status == ImportStatus::Refused {
            refused += 1;
        }
        let printed = if args.json {
            json_line(&mut out, &to_js_string(&report.to_json()))
        } else {
            match &bar {
                Some(bar) => bar.suspend(|| print_human(&mut out, &report)),
                None => print_human(&mut out, &report),
            }
        };
        printed?;
        out.flush()?;
    }
    // A bulk load leaves the full-text index in many segments: merged when the load added a
    // good share of it (searches then read one doclist per term).
    if let Some(bar) = &bar {
        bar.set_message("merging the search index");
    }
    store.optimize_search_index_after_load(indexed_before)?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    out.flush()?;
    if targets.is_empty() && !args.json {
        let mut err = io::stderr().lock();
        writeln!(err, "pi: no *.jsonl files found")?;
    }
    if refused > 0 {
        return Err(anyhow!(
            "{refused} of {} files refused; nothing was stored from them",
            targets.len()
        ));
    }
    Ok(())
}
