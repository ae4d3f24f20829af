//! Import, merge and export of reference JSONL (the logic is `store/interchange.rs`'s).

use crate::model::entry::SessionHeader;
use crate::model::ids::{EntryId, SessionId};

use crate::store::db::Db;
use crate::store::error::SqliteContext;
use crate::store::interchange::*;
use crate::store::sql::{self, EntryInsert};
use std::io::Write;

use crate::jsonl::reader::{FileEntry, Item, SkippedLine};
use crate::jsonl::writer::{self, LeafFacts};
use crate::store::imported::{self, FileMark, FileRecord};
use crate::store::{Result, SessionStore, StoreError, derived};
use crate::support::clock::ms_from_iso;

struct Sink<'w> {
    out: &'w mut dyn Write,
    bytes: u64,
}

impl Sink<'_> {
    fn line(&mut self, payload: &[u8]) -> Result<()> {
        writer::write_line(self.out, payload).map_err(|source| StoreError::Output { source })?;
        self.bytes += payload.len() as u64 + 1;
        Ok(())
    }
}

/// A staged import between steps: its session key, next sequence and last entry.
struct Staged {
    sid: i64,
    seq: i64,
    last: Option<(Option<EntryId>, i64)>,
}

/// How one step of a staged import ended.
enum StageStep {
    /// Lines remain: the next step goes on from here.
    More(Staged),
    /// The file is stored and published.
    Done(ImportReport),
}

impl SessionStore {
    /// Imports the lines of one file (header, then items in file order), all or nothing: a
    /// new session in bounded steps published by the last one (`import_staged`), a
    /// merge into a stored session in one transaction.
    ///
    /// A conflict is not an error: it returns a [`ImportStatus::Refused`] report and stores
    /// nothing. An `Err` among the items (the reading side failed) rolls everything back
    /// (what earlier steps staged is removed) and is returned. Sessions left staged by killed
    /// imports are removed first ([`Self::remove_abandoned_imports`]).
    pub fn import_lines(
        &self,
        header: &SessionHeader,
        header_bytes: &[u8],
        items: impl Iterator<Item = Result<Item>>,
        options: &ImportOptions<'_>,
    ) -> Result<ImportReport> {
        self.import_lines_marked(header, header_bytes, items, options, None)
    }

    /// Imports the lines of one file as [`Self::import_lines`] does and, in the same
    /// transaction, records `mark` as where the file was read to (`imported_files`), so that
    /// the record never claims lines the database does not hold. A refused file is not
    /// recorded here ([`Self::record_unstored_file`] does that).
    pub fn import_lines_marked(
        &self,
        header: &SessionHeader,
        header_bytes: &[u8],
        items: impl Iterator<Item = Result<Item>>,
        options: &ImportOptions<'_>,
        mark: Option<&FileMark>,
    ) -> Result<ImportReport> {
        let imported_at = self.clock().now_iso();
        self.remove_abandoned_imports()?;
        let existing = self.read(|db| sql::sid_of(db, header.id.as_str()))?;
        let outcome = match (existing, options.mode) {
            (None, _) => {
                self.import_staged(header, header_bytes, items, options, mark, &imported_at)
            }
            (Some(_), ImportMode::AsNew) => {
                let id = SessionId::generate(self.ids(), self.clock().now_ms());
                let bytes = writer::header_with_id(header_bytes, &id)?;
                let renamed = SessionHeader {
                    id,
                    ..header.clone()
                };
                self.import_staged(&renamed, &bytes, items, options, mark, &imported_at)
            }
            (Some(sid), ImportMode::Merge) => {
                // Compared in a read snapshot, then written in bounded steps (`api/merge.rs`).
                let session = &header.id;
                self.read(|db| Self::plan_merge(db, sid, session, items, true))
                    .and_then(|plan| {
                        // Removed (or replaced) since it was looked up: nothing is written.
                        let check =
                            |db: Db<'_>| Ok(sql::sid_of(db, session.as_str())? == Some(sid));
                        self.write_merge(session, plan, options.source, mark, &imported_at, &check)
                    })
                    .and_then(|report| {
                        report.ok_or_else(|| StoreError::MergeInterrupted {
                            session: session.clone(),
                        })
                    })
            }
        };
        match outcome {
            Err(StoreError::ImportConflict { session, line, id }) => {
                let entries = self.session(&session)?.entries;
                Ok(ImportReport {
                    session,
                    status: ImportStatus::Refused,
                    entries,
                    added: 0,
                    conflict: Some(ImportConflict { line, id }),
                })
            }
            other => other,
        }
    }

    /// Imports a file as a new session in bounded steps (migration 0007): each step is one
    /// transaction of at most [`STAGE_STEP_TIME`], [`STAGE_STEP_ENTRIES`] lines or
    /// [`STAGE_STEP_BYTES`] bytes, into
    /// a session whose id is a placeholder (listed, searched and resolved by nobody), with a
    /// pause of [`STAGE_STEP_GAP`] between steps in which other processes' writers get the
    /// lock. The step that reads the file's end publishes the session — its real id, the leaf,
    /// the file's record — in the same transaction, so a file that fits in one step is one
    /// transaction as before. A failure removes what was staged; a kill leaves it to
    /// [`Self::remove_abandoned_imports`]. Either way the file is all or nothing.
    fn import_staged(
        &self,
        header: &SessionHeader,
        header_bytes: &[u8],
        items: impl Iterator<Item = Result<Item>>,
        options: &ImportOptions<'_>,
        mark: Option<&FileMark>,
        imported_at: &str,
    ) -> Result<ImportReport> {
        let mut items = items;
        let mut staged: Option<Staged> = None;
        // The staged session committed by earlier steps (removed when a later one fails).
        let mut committed: Option<i64> = None;
        loop {
            let step = self.write_bulk(|db| {
                let mut state = match staged.take() {
                    Some(state) => state,
                    None => Staged {
                        sid: Self::insert_staged_header(db, header, header_bytes)?,
                        seq: 0,
                        last: None,
                    },
                };
                let mut lines = 0usize;
                let mut bytes = 0usize;
                let began = std::time::Instant::now();
                loop {
                    if lines >= STAGE_STEP_ENTRIES
                        || bytes >= STAGE_STEP_BYTES
                        || (lines % 64 == 63 && began.elapsed() >= STAGE_STEP_TIME)
                    {
                        return Ok(StageStep::More(state));
                    }
                    let Some(item) = items.next() else {
                        return Self::publish_staged(db, header, &state, mark, imported_at)
                            .map(StageStep::Done);
                    };
                    match item? {
                        Item::Entry(line) => {
                            bytes += line.payload.len();
                            Self::insert_file_entry(db, state.sid, state.seq, &line)?;
                            state.last = Some((line.entry.id, state.seq));
                            state.seq += 1;
                        }
                        Item::Skipped(line) => {
                            bytes += line.bytes.len();
                            Self::quarantine_line(
                                db,
                                state.sid,
                                options.source,
                                &line,
                                imported_at,
                            )?;
                        }
                    }
                    lines += 1;
                }
            });
            match step {
                Ok(StageStep::Done(report)) => return Ok(report),
                Ok(StageStep::More(state)) => {
                    committed = Some(state.sid);
                    staged = Some(state);
                    std::thread::sleep(STAGE_STEP_GAP);
                }
                Err(error) => {
                    // What earlier steps staged goes (a kill would leave it to the next import).
                    if let Some(sid) = committed {
                        let _ = self.write(|db| Self::drop_staged(db, sid));
                    }
                    return Err(error);
                }
            }
        }
    }

    /// Inserts a staged session's row (a placeholder id) and its `staged_sessions` row.
    fn insert_staged_header(
        db: Db<'_>,
        header: &SessionHeader,
        header_bytes: &[u8],
    ) -> Result<i64> {
        let me = crate::store::lease::this_process();
        let placeholder = format!(
            "\u{1}staged {} {} {}",
            me.pid,
            me.start.unwrap_or(0),
            header.id
        );
        let sid = sql::insert_session(
            db,
            &placeholder,
            &header.cwd,
            &header.timestamp,
            header.parent_session.as_deref(),
            header_bytes,
        )?;
        db.execute_uncached(
            "INSERT INTO staged_sessions (sid, id, pid, pid_start, host, started_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, CAST(strftime('%s', 'now') AS INTEGER) * 1000)",
            rusqlite::params![sid, header.id.as_str(), me.pid, me.start, me.host],
        )?;
        Ok(sid)
    }

    /// The last step of a staged import: gives the session its id, sets the leaf, records the
    /// file, removes the staging row.
    fn publish_staged(
        db: Db<'_>,
        header: &SessionHeader,
        state: &Staged,
        mark: Option<&FileMark>,
        imported_at: &str,
    ) -> Result<ImportReport> {
        if sql::sid_of(db, header.id.as_str())?.is_some() {
            // Another import stored the same session while this one was staging it.
            Self::drop_staged(db, state.sid)?;
            return Err(StoreError::ImportRaced {
                session: header.id.clone(),
            });
        }
        db.execute_uncached(
            "UPDATE sessions SET id = ?2 WHERE sid = ?1",
            rusqlite::params![state.sid, header.id.as_str()],
        )?;
        db.execute_uncached(
            "DELETE FROM staged_sessions WHERE sid = ?1",
            rusqlite::params![state.sid],
        )?;
        let leaf = Self::leaf_after_import(db, state.sid, state.last.clone())?;
        if leaf.is_some() {
            sql::set_leaf(db, state.sid, leaf)?;
        }
        if let Some(mark) = mark {
            imported::put_record(db, mark, Some(state.sid), imported_at)?;
        }
        let entries = Self::summary_by_sid(db, state.sid)?.entries;
        Ok(ImportReport {
            session: header.id.clone(),
            status: ImportStatus::Imported,
            entries,
            added: u64::try_from(state.seq).unwrap_or(0),
            conflict: None,
        })
    }

    /// Removes a staged session and its staging row.
    fn drop_staged(db: Db<'_>, sid: i64) -> Result<()> {
        db.execute_uncached(
            "DELETE FROM staged_sessions WHERE sid = ?1",
            rusqlite::params![sid],
        )?;
        derived::delete_session(db, sid)
    }

    /// Removes the sessions that killed imports left staged: those whose process is gone on
    /// this host (a staging row of another host is left alone), and rolls back the merges
    /// such processes left part-written ([`Self::roll_back_abandoned_merges`]). Each in its
    /// own transaction; returns how many.
    pub fn remove_abandoned_imports(&self) -> Result<usize> {
        let me = crate::store::lease::this_process();
        let rows: Vec<(i64, u32, Option<i64>, String)> = self.read(|db| {
            db.rows_uncached(
                "SELECT sid, pid, pid_start, host FROM staged_sessions",
                [],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
            )
        })?;
        let mut removed = 0;
        for (sid, pid, start, host) in rows {
            let gone = host == me.host
                && !(pid == me.pid && start == me.start)
                && !crate::store::lease::process_alive(pid, start);
            if gone {
                self.write(|db| {
                    // Still there (another process may have removed it meanwhile)?
                    let still: bool = db
                        .conn()
                        .query_row(
                            "SELECT EXISTS (SELECT 1 FROM staged_sessions WHERE sid = ?1)",
                            rusqlite::params![sid],
                            |row| row.get(0),
                        )
                        .at(db.path())?;
                    if still {
                        Self::drop_staged(db, sid)?;
                    }
                    Ok(())
                })?;
                removed += 1;
            }
        }
        Ok(removed + self.roll_back_abandoned_merges()?)
    }

    pub(super) fn insert_file_entry(
        db: Db<'_>,
        sid: i64,
        seq: i64,
        line: &FileEntry,
    ) -> Result<()> {
        let row = EntryInsert {
            sid,
            seq,
            id: line.entry.id.as_ref().map(EntryId::as_str),
            parent_id: line.entry.parent_id.as_ref().map(EntryId::as_str),
            type_name: line.entry.type_name(),
            timestamp: &line.entry.timestamp,
            payload: &line.payload,
        };
        derived::insert(db, &row, &line.entry)
    }

    pub(super) fn quarantine_line(
        db: Db<'_>,
        sid: i64,
        source: &str,
        line: &SkippedLine,
        imported_at: &str,
    ) -> Result<()> {
        let number = i64::try_from(line.line).unwrap_or(i64::MAX);
        if sql::quarantine_has(db, sid, number, &line.bytes)? {
            return Ok(());
        }
        sql::insert_quarantine(
            db,
            sid,
            source,
            number,
            line.reason.as_str(),
            &line.bytes,
            imported_at,
        )
    }

    /// The leaf after an import: the latest line with the last entry's id (the reference's
    /// "later line wins"), or that entry's own line when it has no id.
    pub(super) fn leaf_after_import(
        db: Db<'_>,
        sid: i64,
        last: Option<(Option<EntryId>, i64)>,
    ) -> Result<Option<i64>> {
        match last {
            None => Ok(None),
            Some((Some(id), seq)) => Ok(Some(
                sql::latest_seq_of_id(db, sid, id.as_str())?.unwrap_or(seq),
            )),
            Some((None, seq)) => Ok(Some(seq)),
        }
    }

    /// Appends the lines a file grew by since `record` was read (`items`, numbered from the
    /// file's start) to the record's session, all or nothing, in bounded steps (a merge,
    /// `api/merge.rs`), and moves the record to `mark`.
    ///
    /// When nothing else appended to the session since that import (its next sequence is the
    /// recorded one), every line is stored as a first import of the whole file would store it
    /// (a repeated line included); otherwise the lines are merged as a re-import merges them
    /// (a line already stored is skipped, a conflicting one refuses the append). Skipped lines
    /// are quarantined; the leaf moves to the last new entry. The record is read again in the
    /// comparison's snapshot and in the first write step: if it or the session changed since
    /// the caller read it, nothing is written and [`AppendOutcome::Stale`] is returned.
    pub fn append_file_lines(
        &self,
        record: &FileRecord,
        items: impl Iterator<Item = Result<Item>>,
        source: &str,
        mark: &FileMark,
    ) -> Result<AppendOutcome> {
        let imported_at = self.clock().now_iso();
        let (Some(sid), Some(session)) = (record.sid, record.session.as_ref()) else {
            return Ok(AppendOutcome::Stale);
        };
        // The record and its session as the caller read them?
        let unchanged = |db: Db<'_>| -> Result<bool> {
            let Some(current) = imported::record_in(db, &record.mark.path)? else {
                return Ok(false);
            };
            Ok(current.mark == record.mark
                && current.sid == record.sid
                && current.next_seq == record.next_seq
                && sql::sid_of(db, session.as_str())? == Some(sid))
        };
        let plan = self.read(|db| {
            if !unchanged(db)? {
                return Ok(None);
            }
            // Nothing else appended since that import: every line is new.
            let compare = sql::next_seq(db, sid)? != record.next_seq;
            Self::plan_merge(db, sid, session, items, compare).map(Some)
        });
        let outcome = plan.and_then(|plan| match plan {
            None => Ok(AppendOutcome::Stale),
            Some(plan) => Ok(
                match self.write_merge(
                    session,
                    plan,
                    source,
                    Some(mark),
                    &imported_at,
                    &unchanged,
                )? {
                    Some(report) => AppendOutcome::Done(report),
                    None => AppendOutcome::Stale,
                },
            ),
        });
        match outcome {
            Err(StoreError::ImportConflict { session, line, id }) => {
                let entries = self.session(&session)?.entries;
                Ok(AppendOutcome::Done(ImportReport {
                    session,
                    status: ImportStatus::Refused,
                    entries,
                    added: 0,
                    conflict: Some(ImportConflict { line, id }),
                }))
            }
            other => other,
        }
    }

    /// Returns the lines a session's imports quarantined, in the order they were stored.
    pub fn quarantine(&self, session: &SessionId) -> Result<Vec<QuarantinedLine>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            Ok(sql::quarantine_rows(db, sid)?
                .into_iter()
                .map(|row| QuarantinedLine {
                    source: row.source,
                    line: row.line,
                    reason: row.reason,
                    bytes: row.bytes,
                    imported_at: row.imported_at,
                })
                .collect())
        })
    }

    /// Decides whether the leaf's line is written last; returns its seq if so.
    fn leaf_to_move(db: Db<'_>, sid: i64) -> Result<Option<i64>> {
        let Some(leaf_seq) = sql::leaf(db, sid)? else {
            return Ok(None);
        };
        let last_seq = sql::next_seq(db, sid)? - 1;
        let Some(row) = sql::entry_by_seq(db, sid, leaf_seq)? else {
            return Ok(None);
        };
        let has_own_id = match &row.id {
            Some(id) => sql::latest_seq_of_id(db, sid, id)? == Some(leaf_seq),
            None => false,
        };
        let is_root = match &row.parent_id {
            None => true,
            Some(parent) if Some(parent) == row.id.as_ref() => true,
            Some(parent) => sql::latest_seq_of_id(db, sid, parent)?.is_none(),
        };
        let sibling_with_same_timestamp = match &row.parent_id {
            Some(parent) => {
                // The reference orders children by `new Date(timestamp).getTime()`.
                let leaf_ms = ms_from_iso(&row.timestamp).unwrap_or(i64::MIN);
                sql::children_timestamps(db, sid, parent)?
                    .into_iter()
                    .any(|(seq, ts)| {
                        seq != leaf_seq && ms_from_iso(&ts).unwrap_or(i64::MIN) == leaf_ms
                    })
            }
            None => false,
        };
        let facts = LeafFacts {
            is_last_appended: leaf_seq == last_seq,
            has_own_id,
            is_root,
            type_name: &row.type_name,
            sibling_with_same_timestamp,
        };
        Ok(writer::leaf_line_last(&facts).then_some(leaf_seq))
    }

    /// Writes a session as a reference JSONL file: the header, then every entry's stored
    /// bytes plus LF in append order, the persisted leaf's line last when the contract
    /// allows it. Rows are streamed from one read snapshot.
    pub fn export_jsonl(&self, session: &SessionId, out: &mut dyn Write) -> Result<ExportSummary> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            let header = sql::header(db, sid)?;
            let moved = Self::leaf_to_move(db, sid)?;
            let mut sink = Sink { out, bytes: 0 };
            sink.line(&header)?;
            let mut entries: u64 = 0;
            let mut held: Option<Vec<u8>> = None;
            sql::for_each_payload(db, sid, |seq, payload| {
                entries += 1;
                if Some(seq) == moved {
                    held = Some(payload.to_vec());
                    Ok(())
                } else {
                    sink.line(payload)
                }
            })?;
            if let Some(payload) = &held {
                sink.line(payload)?;
            }
            sink.out
                .flush()
                .map_err(|source| StoreError::Output { source })?;
            Ok(ExportSummary {
                entries,
                bytes: sink.bytes,
                leaf_last: held.is_some(),
            })
        })
    }
}
