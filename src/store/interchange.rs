//! Import, re-import (merge) and export of the reference's JSONL sessions
//! (`CONTRACT.md`, "Interchange"), on top of the raw-line storage of `store/mod.rs`.
//!
//! - Import of a new session: the header row, every entry line byte for byte with its derived
//!   rows, every skipped line into `quarantine`; the leaf becomes the file's last entry (as the
//!   reference resumes there). A file of more than one step's lines is written in bounded
//!   transactions into a staged session (a placeholder id nobody sees, migration 0007) that
//!   the last one publishes, so other writers wait for a step, never for the whole file, and
//!   the file is still all or nothing. A merge into a stored session is compared in a read
//!   snapshot and written in bounded steps (`api/merge.rs`), all or nothing as well.
//! - Re-import of a session already stored merges by union: a line whose bytes equal an
//!   entry stored before this import is skipped, other entry lines are appended in file order
//!   (`updated`, the leaf moves to the file's last entry); nothing new is `unchanged` (the
//!   leaf stays). A line whose id is stored with other bytes is a conflict: the transaction
//!   is rolled back and the file `refused`. [`ImportMode::AsNew`] stores a file whose session
//!   exists under a new session id instead of merging.
//! - Export: the header, then every entry's stored bytes plus LF in append order, except
//!   that the persisted leaf's line is written last when `jsonl::writer::leaf_line_last`
//!   allows it; rows are streamed, never all held in memory.
//!
//! Invariant: nothing is written for a refused file; a source's bytes are stored, never
//! re-serialised (migration is the reader's business).

use crate::model::ids::{EntryId, SessionId};

/// What to do with a file whose session id is already stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportMode {
    /// Merge by union (or refuse on a conflicting line).
    Merge,
    /// Store the file as a new session with a new id.
    AsNew,
}

/// How an import ended (`import --json` `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportStatus {
    /// A new session was stored.
    Imported,
    /// New entries were appended to a stored session.
    Updated,
    /// The stored session already had every entry of the file.
    Unchanged,
    /// Nothing was stored: a line conflicts with the stored session.
    Refused,
}

impl ImportStatus {
    /// Returns the contract's word for the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Imported => "imported",
            Self::Updated => "updated",
            Self::Unchanged => "unchanged",
            Self::Refused => "refused",
        }
    }
}

/// Where the lines come from and what to do on an existing session.
#[derive(Debug, Clone, Copy)]
pub struct ImportOptions<'a> {
    /// The source file, recorded with quarantined lines.
    pub source: &'a str,
    /// Merge or import as new.
    pub mode: ImportMode,
}

/// A line that refused a re-import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportConflict {
    /// Its 1-based line number.
    pub line: usize,
    /// The id stored with other bytes.
    pub id: EntryId,
}

/// The outcome of importing one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportReport {
    /// The session the lines went to (a new id for [`ImportMode::AsNew`]).
    pub session: SessionId,
    /// How it ended.
    pub status: ImportStatus,
    /// Entries in the session after the import.
    pub entries: i64,
    /// Entry lines appended by this import.
    pub added: u64,
    /// The conflicting line of a refused import.
    pub conflict: Option<ImportConflict>,
}

/// How an append of a file's new lines ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendOutcome {
    /// The lines were stored (or there was nothing new) and the record moved on.
    Done(ImportReport),
    /// The file's record or its session changed since the caller read the record (another
    /// import got there first, or the session was removed): nothing was written; compare the
    /// file with its record again.
    Stale,
}

/// A quarantined input line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantinedLine {
    /// The file it came from.
    pub source: String,
    /// Its 1-based line number there.
    pub line: i64,
    /// Why it was not stored as an entry.
    pub reason: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// When it was imported (ISO-8601).
    pub imported_at: String,
}

/// What an export wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportSummary {
    /// Entry lines written (the header not counted).
    pub entries: u64,
    /// Bytes written, line endings included.
    pub bytes: u64,
    /// Whether the leaf's line was moved to the end.
    pub leaf_last: bool,
}

/// The longest a step of a staged import holds the write lock (checked every 64 lines): other
/// writers wait at most about this plus one line's insert.
pub const STAGE_STEP_TIME: std::time::Duration = std::time::Duration::from_millis(500);

/// Lines (entries and quarantined lines) per transaction of a staged import, at most.
pub const STAGE_STEP_ENTRIES: usize = 50_000;

/// Line bytes per transaction of a staged import, at most (bounds the WAL a step adds).
pub const STAGE_STEP_BYTES: usize = 32 * 1024 * 1024;

/// The pause between two steps of a staged import, in which other processes' writers take the
/// lock: SQLite's busy handler polls at most every 100 ms, so a waiting writer wakes inside it.
pub const STAGE_STEP_GAP: std::time::Duration = std::time::Duration::from_millis(100);
