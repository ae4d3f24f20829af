//! The reference's session files that imports have read (`imported_files`, migration 0005):
//! per file, where the last import left it, so that the next one skips an unchanged file
//! without opening it and reads a grown one from where it stopped.
//!
//! A record is written in the transaction of the import that read the file (with the entries,
//! or on its own for a refused file), so a crash never leaves a record that claims lines the
//! database does not hold. Comparing a file with its record, reading it and deciding what the
//! difference means is the caller's business (`cli/import.rs`); the store keeps the facts.
//!
//! Invariant: no file-system access here; paths are opaque bytes (canonical paths chosen by
//! the caller).

use crate::model::ids::SessionId;
use crate::store::Result;
use crate::store::db::Db;
use crate::store::sql::{self, ImportedFileRow, ImportedFileUpsert};

/// Where an import left a file: what the next import compares with and reads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMark {
    /// The file's canonical path, as bytes.
    pub path: Vec<u8>,
    /// Its size when it was read.
    pub size: u64,
    /// Its modification time (ns since the epoch) when it was read.
    pub mtime_ns: i64,
    /// The byte offset just after the last complete (LF-terminated) line that was read.
    pub read_to: u64,
    /// The number of lines before `read_to`.
    pub lines: u64,
    /// The length of the last complete line before `read_to`, its LF included (0: none).
    pub tail_len: u64,
    /// `support::hash::fnv1a_64` of that line's bytes.
    pub tail_hash: u64,
    /// Whether the lines after `read_to` can be read on their own (not a migrated v1/v2 file,
    /// no unterminated line imported as it was).
    pub appendable: bool,
}

/// A file as the last import that read it recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    /// Where that import left it.
    pub mark: FileMark,
    /// The session it went into; `None` when nothing of it is stored (it was refused, or its
    /// session was removed since).
    pub session: Option<SessionId>,
    /// That session's entry count now (0 without a session).
    pub entries: i64,
    /// The session's next append sequence right after that import (another append since
    /// makes the session's differ).
    pub next_seq: i64,
    /// When it was read (ISO-8601).
    pub imported_at: String,
    pub(crate) sid: Option<i64>,
}

impl FileRecord {
    pub(crate) fn from_row(row: ImportedFileRow) -> Self {
        let unsigned = |value: i64| u64::try_from(value).unwrap_or(0);
        Self {
            mark: FileMark {
                path: row.path,
                size: unsigned(row.size),
                mtime_ns: row.mtime_ns,
                read_to: unsigned(row.offset),
                lines: unsigned(row.lines),
                tail_len: unsigned(row.tail_len),
                // Stored as the same 64 bits in SQLite's signed integer.
                tail_hash: row.tail_hash as u64,
                appendable: row.appendable,
            },
            session: row.session.map(SessionId::new),
            entries: row.entries,
            next_seq: row.next_seq,
            imported_at: row.imported_at,
            sid: row.sid,
        }
    }
}

fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Writes the record of `mark` for session `sid` (its `next_seq` read now), inside the
/// caller's write transaction.
pub(crate) fn put_record(
    db: Db<'_>,
    mark: &FileMark,
    sid: Option<i64>,
    imported_at: &str,
) -> Result<()> {
    let next_seq = match sid {
        Some(sid) => sql::next_seq(db, sid)?,
        None => 0,
    };
    sql::put_imported_file(
        db,
        &ImportedFileUpsert {
            path: &mark.path,
            size: signed(mark.size),
            mtime_ns: mark.mtime_ns,
            offset: signed(mark.read_to),
            lines: signed(mark.lines),
            tail_len: signed(mark.tail_len),
            tail_hash: mark.tail_hash as i64,
            appendable: mark.appendable,
            sid,
            next_seq,
            imported_at,
        },
    )
}

/// Reads the record of one file inside a transaction.
pub(crate) fn record_in(db: Db<'_>, file: &[u8]) -> Result<Option<FileRecord>> {
    Ok(sql::imported_file(db, file)?.map(FileRecord::from_row))
}
