//! `pi import [PATH…] [--as-new] [--json]`: reference JSONL session files into the database
//! (`CONTRACT.md`, "Interchange"), incrementally.
//!
//! Files are imported one transaction each, in path order (directories are searched
//! recursively for `*.jsonl`, sorted); without a PATH, the reference's sessions directory
//! (`cli/autoimport.rs` resolves it as the reference does). Sources are only read. A refused
//! file (no valid header, a conflicting line, unreadable) makes the command exit 1 after every
//! file was tried.
//!
//! Every import records where it left each file (`store::imported`, keyed by the canonical
//! path), and the next one compares the file with that record first:
//! - the same size and modification time: the file is not opened (`read: "none"`);
//! - it grew, and the recorded last line is still where it was (its bytes are read and
//!   hashed, nothing else before it): only the lines after it are read, numbered from the
//!   file's start, and appended to the session (`"appended"`);
//! - otherwise (shorter, rewritten, a v1/v2 file): read whole and merged as before
//!   (`"changed"`; a file never recorded is `"whole"`).
//!
//! A torn last line — not JSON and without its LF, the reference is still writing it — is
//! neither stored nor quarantined: the record stops before it and the next import reads it
//! once it is complete (it is reported, with its number, as left for later).

use std::collections::HashMap;
use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, IsTerminal, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;

use anyhow::{Result, anyhow};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Map, Value};

use crate::cli::CliContext;
use crate::cli::autoimport::SessionsDir;
use crate::cli::output::{self, field, json_line, line};
use crate::jsonl::{
    CompleteLines, Item, MAX_LINE_BYTES, SessionReader, SkipReason, TailReader, is_torn,
};
use crate::model::ids::SessionId;
use crate::store::{
    AppendOutcome, FileMark, FileRecord, ImportMode, ImportOptions, ImportReport, ImportStatus,
    SessionStore, StoreError,
};
use crate::support::files::{self, ReadError};
use crate::support::hash::fnv1a_64;
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

/// Why a file recorded by an earlier import was read whole again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// It is shorter than when it was read.
    Shrank,
    /// The same size, another modification time: rewritten (or touched).
    Rewritten,
    /// It grew, but the line the last import ended with is no longer where it was.
    RewrittenAndGrown,
    /// It grew, but its new lines cannot be read on their own (a v1/v2 file, migrated as a
    /// whole; or its last line had no LF and was imported as it was).
    GrewWhole,
}

impl Change {
    /// Returns the reason as reported to people.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shrank => "shorter than at the last import",
            Self::Rewritten => "rewritten since the last import",
            Self::RewrittenAndGrown => "rewritten and grown since the last import",
            Self::GrewWhole => "grew, and its new lines cannot be read on their own",
        }
    }
}

/// How much of a file an import read (`import --json` `read`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadKind {
    /// Not opened: the same size and modification time as when an import last read it.
    None,
    /// Only the lines the file grew by since the last import, from this 1-based line on.
    Appended {
        /// The first line read.
        from_line: u64,
    },
    /// Read whole: not read before (or nothing of it was stored).
    Whole,
    /// Read whole again: it changed since the last import, not only by growing.
    Changed(Change),
}

impl ReadKind {
    /// Returns the contract's word for it: `none`, `appended`, `whole` or `changed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Appended { .. } => "appended",
            Self::Whole => "whole",
            Self::Changed(_) => "changed",
        }
    }
}

/// The reason reported for a torn last line that was left for the next import.
pub const PENDING_REASON: &str = "torn last line (not JSON, no final newline): not stored; the next import reads it once it is complete";

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
    /// Lines skipped (and quarantined): 1-based number and reason.
    pub skipped: Vec<(usize, SkipReason)>,
    /// A torn last line left for the next import (its 1-based number).
    pub pending: Option<usize>,
    /// How much of the file was read.
    pub read: ReadKind,
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
            pending: None,
            read: ReadKind::Whole,
            error: Some(error),
        }
    }

    /// Returns the report as the contract's JSON object (`read` and, for an appended file,
    /// `fromLine` after the contract's keys).
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
            .skipped_lines()
            .map(|(number, reason)| {
                let mut item = Map::new();
                item.insert("line".to_owned(), Value::from(number));
                item.insert("reason".to_owned(), Value::from(reason));
                Value::Object(item)
            })
            .collect();
        map.insert("skipped".to_owned(), Value::Array(skipped));
        map.insert("read".to_owned(), Value::from(self.read.as_str()));
        if let ReadKind::Appended { from_line } = self.read {
            map.insert("fromLine".to_owned(), Value::from(from_line));
        }
        if let Some(error) = &self.error {
            map.insert("error".to_owned(), Value::from(error.as_str()));
        }
        Value::Object(map)
    }

    /// Returns the skipped lines and the pending one, in line order, with their reasons.
    pub fn skipped_lines(&self) -> impl Iterator<Item = (usize, &'static str)> + '_ {
        self.skipped
            .iter()
            .map(|(number, reason)| (*number, reason.as_str()))
            .chain(self.pending.map(|number| (number, PENDING_REASON)))
    }
}

/// A file's size and modification time, as `stat` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
}

impl FileStat {
    /// Returns the stat of file metadata.
    pub fn of(meta: &fs::Metadata) -> Self {
        Self {
            size: meta.len(),
            mtime_ns: meta
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.mtime_nsec()),
        }
    }
}

/// A file to import: the path as named or found, its canonical path (the key of its record)
/// and its stat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The file as named or found (reports and quarantine name it so).
    pub file: PathBuf,
    /// Its canonical path, as bytes.
    pub key: Vec<u8>,
    /// Its size and modification time when it was found.
    pub stat: FileStat,
}

impl Candidate {
    /// Stats and canonicalises a file named by the user: only a regular file (or a symlink to
    /// one) is a candidate; anything else is refused without being opened.
    pub fn of(file: &Path) -> Result<Self, ReadError> {
        files::check_regular(file)?;
        let meta = fs::metadata(file)?;
        let canonical = fs::canonicalize(file)?;
        Ok(Self {
            file: file.to_path_buf(),
            key: canonical.as_os_str().as_bytes().to_vec(),
            stat: FileStat::of(&meta),
        })
    }
}

/// Who asked for an import: it decides what happens to a file whose record says nothing of
/// it is stored (refused before, or its session removed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// `pi import`, `--session FILE`, `/import`: the user named it; it is read.
    Command,
    /// The automatic import at start: left alone until it changes.
    Automatic,
}

/// What to do with a file, from its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    Skip,
    Tail,
    Whole(ReadKind),
}

fn plan(record: Option<&FileRecord>, stat: FileStat, mode: ImportMode, trigger: Trigger) -> Plan {
    let Some(record) = record.filter(|_| mode == ImportMode::Merge) else {
        return Plan::Whole(ReadKind::Whole);
    };
    let unchanged = record.mark.size == stat.size && record.mark.mtime_ns == stat.mtime_ns;
    if record.session.is_none() {
        return match (trigger, unchanged) {
            (Trigger::Automatic, true) => Plan::Skip,
            _ => Plan::Whole(ReadKind::Whole),
        };
    }
    if unchanged {
        return Plan::Skip;
    }
    let change = if stat.size < record.mark.size {
        Change::Shrank
    } else if stat.size == record.mark.size {
        Change::Rewritten
    } else if !record.mark.appendable || record.mark.tail_len == 0 {
        Change::GrewWhole
    } else {
        return Plan::Tail;
    };
    Plan::Whole(ReadKind::Changed(change))
}

/// Whether the automatic import must look into a file: it is new, or it changed since its
/// record (a file whose record says nothing was stored is left alone while unchanged).
pub fn needs_import(record: Option<&FileRecord>, stat: FileStat) -> bool {
    plan(record, stat, ImportMode::Merge, Trigger::Automatic) != Plan::Skip
}

/// How many parsed lines the reading thread may run ahead of the database.
const READ_AHEAD: usize = 512;

/// Where the complete lines of `bytes` (a whole file, or the part after `base`) leave the
/// file's record.
fn mark_after(
    key: &[u8],
    stat: FileStat,
    bytes: &[u8],
    base: Option<&FileMark>,
    whole_only: bool,
) -> (FileMark, bool) {
    let complete = CompleteLines::of(bytes);
    let remainder = &bytes[complete.len..];
    let torn = !remainder.is_empty() && is_torn(remainder);
    let (read_to, lines) = base.map_or((0, 0), |base| (base.read_to, base.lines));
    let (tail_len, tail_hash) = if complete.count > 0 {
        let last = &bytes[complete.last.clone()];
        (last.len() as u64, fnv1a_64(last))
    } else {
        base.map_or((0, 0), |base| (base.tail_len, base.tail_hash))
    };
    let mark = FileMark {
        path: key.to_vec(),
        size: stat.size,
        mtime_ns: stat.mtime_ns,
        read_to: read_to + complete.len as u64,
        lines: lines + complete.count as u64,
        tail_len,
        tail_hash,
        appendable: !whole_only && (remainder.is_empty() || torn),
    };
    (mark, torn)
}

/// Opens a regular file and reads it from `from` (which starts line `first_line`) to its end,
/// no line longer than the limit (a FIFO blocked forever, `/dev/zero` grew without end);
/// returns the bytes and the stat taken before reading. A file that changed size while it was
/// read gets an impossible mtime, so that the next import looks at it again.
fn read_from(
    path: &Path,
    from: u64,
    first_line: u64,
) -> Result<(File, Vec<u8>, FileStat), ReadError> {
    let mut file = files::open_regular(path)?;
    let mut stat = FileStat::of(&file.metadata()?);
    file.seek(SeekFrom::Start(from))?;
    let first_line = usize::try_from(first_line).unwrap_or(usize::MAX);
    let bytes = files::read_lines_bounded_from(&mut file, first_line, MAX_LINE_BYTES)?;
    let read_to = from + bytes.len() as u64;
    if read_to != stat.size {
        stat.size = read_to;
        stat.mtime_ns = i64::MIN;
    }
    Ok((file, bytes, stat))
}

/// Imports one file as the user named it (`--session FILE`, `/import`, the benchmarks):
/// compared with its record first, as `pi import` does; `progress` is told how many of its
/// bytes were read so far.
pub fn import_file(
    store: &SessionStore,
    file: &Path,
    mode: ImportMode,
    progress: &mut dyn FnMut(u64),
) -> Result<FileReport> {
    let candidate = match Candidate::of(file) {
        Ok(candidate) => candidate,
        Err(error) => {
            return Ok(FileReport::refused(
                file,
                None,
                format!("{error}; nothing was imported"),
            ));
        }
    };
    let record = match mode {
        ImportMode::Merge => store.file_record(&candidate.key)?,
        ImportMode::AsNew => None,
    };
    import_candidate(store, &candidate, record, mode, Trigger::Command, progress)
}

/// Imports one file after comparing it with its record (`None`: never read): skips it,
/// appends what it grew by, or reads it whole (see the module documentation). Problems with
/// the file are a refused report; a database error is returned.
pub fn import_candidate(
    store: &SessionStore,
    candidate: &Candidate,
    record: Option<FileRecord>,
    mode: ImportMode,
    trigger: Trigger,
    progress: &mut dyn FnMut(u64),
) -> Result<FileReport> {
    let mut record = record;
    // A record that changes under us (another import got there first) is read again; twice
    // in a row is unlikely enough to settle with a whole read.
    for _ in 0..2 {
        match plan(record.as_ref(), candidate.stat, mode, trigger) {
            Plan::Skip => {
                let record = record.as_ref();
                return Ok(FileReport {
                    file: candidate.file.clone(),
                    session: record.and_then(|record| record.session.clone()),
                    status: ImportStatus::Unchanged,
                    entries: record.map_or(0, |record| record.entries),
                    added: 0,
                    skipped: Vec::new(),
                    pending: None,
                    read: ReadKind::None,
                    error: None,
                });
            }
            Plan::Whole(read) => {
                return import_whole(store, candidate, mode, read, trigger, progress);
            }
            Plan::Tail => {
                let Some(found) = &record else {
                    break;
                };
                match import_tail(store, candidate, found, progress)? {
                    TailOutcome::Done(report) => return Ok(report),
                    TailOutcome::Whole(change) => {
                        return import_whole(
                            store,
                            candidate,
                            mode,
                            ReadKind::Changed(change),
                            trigger,
                            progress,
                        );
                    }
                    TailOutcome::Stale => record = store.file_record(&candidate.key)?,
                }
            }
        }
    }
    import_whole(
        store,
        candidate,
        mode,
        ReadKind::Changed(Change::RewrittenAndGrown),
        trigger,
        progress,
    )
}

enum TailOutcome {
    Done(FileReport),
    Whole(Change),
    Stale,
}

/// Reads what a file grew by since its record and appends it to the record's session.
fn import_tail(
    store: &SessionStore,
    candidate: &Candidate,
    record: &FileRecord,
    progress: &mut dyn FnMut(u64),
) -> Result<TailOutcome> {
    let path = &candidate.file;
    let base = &record.mark;
    let opened = files::open_regular(path).and_then(|file| {
        let stat = FileStat::of(&file.metadata()?);
        // The line the last import ended with must still be there, byte for byte.
        let mut last = vec![0; usize::try_from(base.tail_len).unwrap_or(0)];
        let start = base.read_to.saturating_sub(base.tail_len);
        if stat.size < base.read_to || file.read_exact_at(&mut last, start).is_err() {
            return Ok(None);
        }
        Ok::<_, ReadError>(Some(last))
    });
    let last = match opened {
        Ok(last) => last,
        Err(error) => {
            return Ok(TailOutcome::Done(FileReport::refused(
                path,
                record.session.clone(),
                format!("{error}; nothing was imported"),
            )));
        }
    };
    let Some(last) = last else {
        return Ok(TailOutcome::Whole(Change::Shrank));
    };
    if last.last() != Some(&b'\n') || fnv1a_64(&last) != base.tail_hash {
        return Ok(TailOutcome::Whole(Change::RewrittenAndGrown));
    }
    let (_file, bytes, stat) = match read_from(path, base.read_to, base.lines + 1) {
        Ok(read) => read,
        Err(error) => {
            return Ok(TailOutcome::Done(FileReport::refused(
                path,
                record.session.clone(),
                format!("{error}; nothing was imported"),
            )));
        }
    };
    let (mark, torn) = mark_after(&candidate.key, stat, &bytes, Some(base), false);
    let first_line = base.lines + 1;
    let lines_before = usize::try_from(base.lines).unwrap_or(usize::MAX);
    let mut skipped = Vec::new();
    let mut pending = None;
    let items = TailReader::new(&bytes, lines_before).filter_map(|item| {
        match &item {
            Item::Skipped(line) if torn && line.reason == SkipReason::Torn => {
                pending = Some(line.line);
                return None;
            }
            Item::Skipped(line) => skipped.push((line.line, line.reason)),
            Item::Entry(_) => {}
        }
        Some(Ok(item))
    });
    let source = path.to_string_lossy().into_owned();
    let outcome = store.append_file_lines(record, items, &source, &mark)?;
    progress(bytes.len() as u64);
    let report = match outcome {
        AppendOutcome::Stale => return Ok(TailOutcome::Stale),
        AppendOutcome::Done(report) => report,
    };
    Ok(TailOutcome::Done(file_report(
        path,
        report,
        skipped,
        pending,
        ReadKind::Appended {
            from_line: first_line,
        },
    )))
}

/// The report of a file whose lines reached the store.
fn file_report(
    file: &Path,
    report: ImportReport,
    skipped: Vec<(usize, SkipReason)>,
    pending: Option<usize>,
    read: ReadKind,
) -> FileReport {
    let error = report.conflict.as_ref().map(|conflict| {
        format!(
            "line {}: entry '{}' is stored in session {} with different content; nothing was imported (--as-new imports the file as a new session)",
            conflict.line, conflict.id, report.session
        )
    });
    let refused = report.status == ImportStatus::Refused;
    FileReport {
        file: file.to_path_buf(),
        session: Some(report.session),
        status: report.status,
        entries: report.entries,
        added: report.added,
        // Nothing of a refused file was stored, quarantine included.
        skipped: if refused { Vec::new() } else { skipped },
        pending: if refused { None } else { pending },
        read,
        error,
    }
}

/// Reads a whole file and imports it (merged into its session when that exists).
///
/// Lines are read and parsed on a second thread while this one stores them, so parsing and
/// SQLite overlap on a machine with a core to spare.
fn import_whole(
    store: &SessionStore,
    candidate: &Candidate,
    mode: ImportMode,
    read: ReadKind,
    trigger: Trigger,
    progress: &mut dyn FnMut(u64),
) -> Result<FileReport> {
    let file = &candidate.file;
    let (_handle, bytes, stat) = match read_from(file, 0, 1) {
        Ok(read) => read,
        Err(error) => {
            return Ok(FileReport::refused(
                file,
                None,
                format!("{error}; nothing was imported"),
            ));
        }
    };
    let record = mode == ImportMode::Merge;
    // A refused file is recorded as such (so that the automatic import leaves it alone until
    // it changes) unless an earlier import stored it: that record stays, and the file keeps
    // looking changed until it merges again.
    let record_refusal = record && !matches!(read, ReadKind::Changed(_));
    let mut reader = match SessionReader::new(&bytes) {
        Ok(reader) => reader,
        Err(error) => {
            progress(bytes.len() as u64);
            // A file with no complete line yet is one the reference is creating: left alone
            // at start, without a warning or a record.
            let being_written = !bytes.contains(&b'\n');
            if trigger == Trigger::Automatic && being_written {
                return Ok(FileReport {
                    read: ReadKind::None,
                    status: ImportStatus::Unchanged,
                    error: None,
                    ..FileReport::refused(file, None, String::new())
                });
            }
            if record_refusal {
                let (mark, _) = mark_after(&candidate.key, stat, &[], None, true);
                store.record_unstored_file(&mark)?;
            }
            return Ok(FileReport {
                read,
                ..FileReport::refused(file, None, format!("{error}; the file was left as it is"))
            });
        }
    };
    let whole_only = reader.migration().rewrites();
    let (mark, torn) = mark_after(&candidate.key, stat, &bytes, None, whole_only);
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
    let (report, read_side) = thread::scope(|scope| {
        // `move`: the thread owns the sender, so the channel closes when reading ends.
        let reading = scope.spawn(move || {
            let mut skipped = Vec::new();
            let mut pending = None;
            while let Some(item) = reader.next() {
                bytes_read.store(reader.bytes_read() as u64, Ordering::Relaxed);
                if let Item::Skipped(line) = &item {
                    // The torn last line is left for the next import (not quarantined).
                    if torn && line.reason == SkipReason::Torn {
                        pending = Some(line.line);
                        continue;
                    }
                    skipped.push((line.line, line.reason));
                }
                // The receiver is gone when the import stopped early (a conflict or an error).
                if sender.send(Some(item)).is_err() {
                    return (skipped, pending);
                }
            }
            let _ = sender.send(None);
            (skipped, pending)
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
        let mark = record.then_some(&mark);
        let report = store.import_lines_marked(&header, &header_bytes, items, &options, mark);
        // Unblocks the reading thread if the import did not consume every line.
        drop(receiver);
        let read_side = reading
            .join()
            .map_err(|_| anyhow!("{}: the reading thread failed", file.display()));
        (report, read_side)
    });
    let report = report?;
    let (skipped, pending) = read_side?;
    if report.status == ImportStatus::Refused && record_refusal {
        let (mark, _) = mark_after(&candidate.key, stat, &[], None, true);
        store.record_unstored_file(&mark)?;
    }
    Ok(file_report(file, report, skipped, pending, read))
}

/// A file to import, or a path that cannot be read.
enum Target {
    File(Candidate),
    Unreadable(PathBuf, String),
}

/// Returns the canonical form of `dir` with a trailing `/`, the prefix of its files' keys.
pub fn dir_key(canonical_dir: &Path) -> Vec<u8> {
    let mut key = canonical_dir.as_os_str().as_bytes().to_vec();
    if key.last() != Some(&b'/') {
        key.push(b'/');
    }
    key
}

/// Finds `*.jsonl` files under `dir` (canonical), sorted, following directory links once;
/// one `stat` per file (a link is resolved and canonicalised, other names are joined to the
/// canonical directory).
fn walk(named: &Path, canonical: &Path, seen: &mut HashSet<PathBuf>, out: &mut Vec<Target>) {
    if !seen.insert(canonical.to_path_buf()) {
        return;
    }
    let entries = match fs::read_dir(named) {
        Ok(entries) => entries,
        Err(error) => {
            out.push(Target::Unreadable(named.to_path_buf(), error.to_string()));
            return;
        }
    };
    let mut found: Vec<fs::DirEntry> = entries.filter_map(Result::ok).collect();
    found.sort_by_key(fs::DirEntry::file_name);
    for entry in found {
        let path = entry.path();
        let is_link = entry.file_type().is_ok_and(|kind| kind.is_symlink());
        let meta = if is_link {
            fs::metadata(&path)
        } else {
            entry.metadata()
        };
        let is_jsonl = path.extension().is_some_and(|ext| ext == "jsonl");
        match meta {
            Ok(meta) if meta.is_dir() => {
                let target = if is_link {
                    fs::canonicalize(&path).unwrap_or_else(|_| path.clone())
                } else {
                    canonical.join(entry.file_name())
                };
                walk(&path, &target, seen, out);
            }
            Ok(meta) if meta.is_file() && is_jsonl => {
                let key = if is_link {
                    match fs::canonicalize(&path) {
                        Ok(target) => target.as_os_str().as_bytes().to_vec(),
                        Err(error) => {
                            out.push(Target::Unreadable(path, error.to_string()));
                            continue;
                        }
                    }
                } else {
                    canonical
                        .join(entry.file_name())
                        .as_os_str()
                        .as_bytes()
                        .to_vec()
                };
                out.push(Target::File(Candidate {
                    file: path,
                    key,
                    stat: FileStat::of(&meta),
                }));
            }
            // Refused when it is not a regular file: a FIFO named *.jsonl is neither skipped
            // silently nor waited for.
            Ok(_) if is_jsonl => {
                let error = match files::check_regular(&path) {
                    Err(error) => error.to_string(),
                    Ok(()) => "not a regular file".to_owned(),
                };
                out.push(Target::Unreadable(path, error));
            }
            Ok(_) => {}
            Err(error) => {
                if is_jsonl {
                    out.push(Target::Unreadable(path, error.to_string()));
                }
            }
        }
    }
}

/// The files to import under the given paths, and the canonical directories searched.
fn discover(paths: &[PathBuf]) -> (Vec<Target>, Vec<PathBuf>) {
    let mut out = Vec::new();
    let mut roots = Vec::new();
    let mut seen = HashSet::new();
    for path in paths {
        match fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                let canonical = fs::canonicalize(path).unwrap_or_else(|_| path.clone());
                roots.push(canonical.clone());
                walk(path, &canonical, &mut seen, &mut out);
            }
            Ok(_) => match Candidate::of(path) {
                Ok(candidate) => out.push(Target::File(candidate)),
                Err(error) => out.push(Target::Unreadable(path.clone(), error.to_string())),
            },
            Err(error) => out.push(Target::Unreadable(path.clone(), error.to_string())),
        }
    }
    (out, roots)
}

/// The records of the files under some directories, read with one query per directory;
/// files elsewhere are looked up one by one.
pub struct Records {
    dirs: Vec<Vec<u8>>,
    by_key: HashMap<Vec<u8>, FileRecord>,
}

impl Records {
    /// Reads the records under each canonical directory.
    pub fn under(store: &SessionStore, dirs: &[PathBuf]) -> Result<Self> {
        let mut by_key = HashMap::new();
        let mut keys = Vec::new();
        for dir in dirs {
            let key = dir_key(dir);
            for record in store.file_records_under(&key)? {
                by_key.insert(record.mark.path.clone(), record);
            }
            keys.push(key);
        }
        Ok(Self { dirs: keys, by_key })
    }

    /// Returns the record of a file.
    pub fn get(&self, store: &SessionStore, key: &[u8]) -> Result<Option<FileRecord>> {
        if let Some(record) = self.by_key.get(key) {
            return Ok(Some(record.clone()));
        }
        if self.dirs.iter().any(|dir| key.starts_with(dir)) {
            return Ok(None);
        }
        Ok(store.file_record(key)?)
    }
}

/// Counts of what an import run did, for its summary line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Files read whole for the first time.
    pub whole: usize,
    /// Files of which only the new lines were read.
    pub appended: usize,
    /// Files not opened (unchanged).
    pub unchanged: usize,
    /// Files read whole again because they changed otherwise.
    pub changed: usize,
    /// Files refused.
    pub refused: usize,
}

impl Tally {
    /// Counts one report.
    pub fn add(&mut self, report: &FileReport) {
        if report.status == ImportStatus::Refused {
            self.refused += 1;
            return;
        }
        match report.read {
            ReadKind::None => self.unchanged += 1,
            ReadKind::Appended { .. } => self.appended += 1,
            ReadKind::Whole => self.whole += 1,
            ReadKind::Changed(_) => self.changed += 1,
        }
    }

    /// The number of files counted.
    pub fn files(&self) -> usize {
        self.whole + self.appended + self.unchanged + self.changed + self.refused
    }

    /// Returns the summary for people: `N files: 1 read whole (new), 2 appended …`.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = [
            (self.whole, "read whole (new)"),
            (self.appended, "appended (only their new lines read)"),
            (self.unchanged, "unchanged (not read)"),
            (
                self.changed,
                "read whole again (changed since the last import)",
            ),
            (self.refused, "refused"),
        ]
        .iter()
        .filter(|(count, _)| *count > 0)
        .map(|(count, what)| format!("{count} {what}"))
        .collect();
        let files = self.files();
        let noun = if files == 1 { "file" } else { "files" };
        format!("{files} {noun}: {}", parts.join(", "))
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
            let how = match report.read {
                ReadKind::Appended { from_line } => format!(", read from line {from_line}"),
                ReadKind::Changed(change) => format!(", read whole: {}", change.as_str()),
                ReadKind::None | ReadKind::Whole => String::new(),
            };
            line(
                out,
                &format!(
                    "{:<9}  {session}  {file}  ({} entries, {} added{how})",
                    status.as_str(),
                    report.entries,
                    report.added
                ),
            )?;
        }
    }
    const SHOWN: usize = 10;
    let lines: Vec<(usize, &str)> = report.skipped_lines().collect();
    for (number, reason) in lines.iter().take(SHOWN) {
        line(out, &format!("  skipped line {number}: {reason}"))?;
    }
    if lines.len() > SHOWN {
        line(
            out,
            &format!(
                "  … and {} more skipped lines (--json lists them all)",
                lines.len() - SHOWN
            ),
        )?;
    }
    Ok(())
}

/// Runs `pi import`.
pub fn run_import(args: ImportArgs, ctx: &CliContext) -> Result<()> {
    let paths: Vec<PathBuf> = if args.paths.is_empty() {
        let dir = SessionsDir::for_command(&ctx.env).path;
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
    let (targets, roots) = discover(&paths);
    let store = ctx.open_store()?;
    let indexed_before = store.search_index_docs()?;
    let mode = if args.as_new {
        ImportMode::AsNew
    } else {
        ImportMode::Merge
    };
    let records = match mode {
        ImportMode::Merge => Records::under(&store, &roots)?,
        ImportMode::AsNew => Records {
            dirs: Vec::new(),
            by_key: HashMap::new(),
        },
    };
    let bar = if io::stderr().is_terminal() {
        let total: u64 = targets
            .iter()
            .map(|target| match target {
                Target::File(candidate) => candidate.stat.size,
                Target::Unreadable(..) => 0,
            })
            .sum();
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
    let mut tally = Tally::default();
    let mut done_before: u64 = 0;
    for target in &targets {
        let report = match target {
            Target::Unreadable(path, error) => {
                FileReport::refused(path, None, format!("cannot read: {error}"))
            }
            Target::File(candidate) => {
                if let Some(bar) = &bar {
                    bar.set_message(
                        candidate
                            .file
                            .file_name()
                            .map(|name| field(&name.to_string_lossy()).into_owned())
                            .unwrap_or_default(),
                    );
                }
                let mut progress = |read: u64| {
                    if let Some(bar) = &bar {
                        bar.set_position(done_before + read);
                    }
                };
                let record = match mode {
                    ImportMode::Merge => records.get(&store, &candidate.key)?,
                    ImportMode::AsNew => None,
                };
                let report = import_candidate(
                    &store,
                    candidate,
                    record,
                    mode,
                    Trigger::Command,
                    &mut progress,
                )?;
                done_before += candidate.stat.size;
                report
            }
        };
        tally.add(&report);
        let printed = if args.json {
            json_line(&mut out, &to_js_string(&report.to_json()))
        } else if report.read == ReadKind::None {
            // Counted in the summary line, not listed one by one.
            Ok(())
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
    // Copy the bulk write into the database file and truncate the WAL (which would otherwise
    // keep the size of the whole import while another process has the database open).
    store.checkpoint()?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if !args.json && !targets.is_empty() {
        line(&mut out, &tally.summary())?;
    }
    out.flush()?;
    if targets.is_empty() && !args.json {
        let mut err = io::stderr().lock();
        let named: Vec<String> = paths
            .iter()
            .map(|path| field(&path.to_string_lossy()).into_owned())
            .collect();
        writeln!(
            err,
            "pi: no sessions to import: no *.jsonl files in {}",
            named.join(", ")
        )?;
    }
    if tally.refused > 0 {
        return Err(anyhow!(
            "{} of {} files refused; nothing was stored from them",
            tally.refused,
            targets.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(size: u64, mtime_ns: i64, appendable: bool, stored: bool) -> FileRecord {
        let store = crate::store::SessionStore::open(crate::store::StoreConfig {
            location: crate::store::StoreLocation::Memory,
            clock: std::sync::Arc::new(crate::support::clock::SystemClock),
            ids: std::sync::Arc::new(crate::support::ids::IdSource::seeded(1)),
            busy_timeout: std::time::Duration::from_secs(1),
        })
        .unwrap();
        let mark = FileMark {
            path: b"/x.jsonl".to_vec(),
            size,
            mtime_ns,
            read_to: size,
            lines: 3,
            tail_len: 10,
            tail_hash: 5,
            appendable,
        };
        store.record_unstored_file(&mark).unwrap();
        let mut found = store.file_record(b"/x.jsonl").unwrap().unwrap();
        if stored {
            found.session = Some(SessionId::new("s"));
        }
        found
    }

    #[test]
    fn the_plan_follows_size_mtime_and_the_record() {
        let stat = |size, mtime_ns| FileStat { size, mtime_ns };
        let merge = ImportMode::Merge;
        let stored = record(100, 7, true, true);
        let plan_of = |record: &FileRecord, stat, trigger| plan(Some(record), stat, merge, trigger);
        assert_eq!(plan_of(&stored, stat(100, 7), Trigger::Command), Plan::Skip);
        assert_eq!(plan_of(&stored, stat(150, 9), Trigger::Command), Plan::Tail);
        assert_eq!(
            plan_of(&stored, stat(100, 9), Trigger::Command),
            Plan::Whole(ReadKind::Changed(Change::Rewritten))
        );
        assert_eq!(
            plan_of(&stored, stat(50, 9), Trigger::Command),
            Plan::Whole(ReadKind::Changed(Change::Shrank))
        );
        let migrated = record(100, 7, false, true);
        assert_eq!(
            plan_of(&migrated, stat(150, 9), Trigger::Command),
            Plan::Whole(ReadKind::Changed(Change::GrewWhole))
        );
        // Nothing stored (refused, or its session removed): the user's import reads it, the
        // automatic one leaves it while it is unchanged.
        let unstored = record(100, 7, true, false);
        assert_eq!(
            plan_of(&unstored, stat(100, 7), Trigger::Command),
            Plan::Whole(ReadKind::Whole)
        );
        assert_eq!(
            plan_of(&unstored, stat(100, 7), Trigger::Automatic),
            Plan::Skip
        );
        assert_eq!(
            plan_of(&unstored, stat(120, 8), Trigger::Automatic),
            Plan::Whole(ReadKind::Whole)
        );
        assert_eq!(
            plan(
                Some(&stored),
                stat(100, 7),
                ImportMode::AsNew,
                Trigger::Command
            ),
            Plan::Whole(ReadKind::Whole)
        );
        assert_eq!(
            plan(None, stat(100, 7), merge, Trigger::Automatic),
            Plan::Whole(ReadKind::Whole)
        );
    }

    #[test]
    fn a_mark_stops_before_a_torn_line_and_after_an_imported_one() {
        let stat = FileStat {
            size: 0,
            mtime_ns: 0,
        };
        let (mark, torn) = mark_after(b"k", stat, b"{\"a\":1}\n{\"b\":", None, false);
        assert!(torn);
        assert_eq!((mark.read_to, mark.lines, mark.tail_len), (8, 1, 8));
        assert_eq!(mark.tail_hash, fnv1a_64(b"{\"a\":1}\n"));
        assert!(mark.appendable);
        // A complete JSON line without its LF is imported as it is: the next growth is read
        // whole (the line is read again there).
        let (mark, torn) = mark_after(b"k", stat, b"{\"a\":1}\n{\"b\":2}", None, false);
        assert!(!torn);
        assert!(!mark.appendable);
        // After a base: offsets and line numbers go on; no complete line keeps the base's.
        let (next, torn) = mark_after(b"k", stat, b"{\"c\"", Some(&mark), false);
        assert!(torn);
        assert_eq!(
            (next.read_to, next.lines, next.tail_hash),
            (8, 1, mark.tail_hash)
        );
    }
}
