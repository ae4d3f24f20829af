//! Merging a file into a stored session in bounded steps (migration 0010).
//!
//! A merge has two phases. [`SessionStore::plan_merge`] reads the file and compares each line
//! with the session in one read snapshot, holding no lock: a line already stored is passed
//! over, a line whose id is stored with other bytes refuses the file, and the lines the session
//! lacks go to a [`Spool`]. [`SessionStore::write_merge`] then writes the spooled lines in
//! steps of at most [`STAGE_STEP_TIME`], [`STAGE_STEP_ENTRIES`] lines or [`STAGE_STEP_BYTES`]
//! bytes, each its own transaction, with [`STAGE_STEP_GAP`] between them for other writers.
//!
//! The first step takes the session's writer lease (no other process writes the session until
//! the merge ends) and records the merge in `merging_imports`; the last step moves the leaf,
//! records the file, and removes both, in one transaction. A merge that fits in one step is one
//! transaction, as before. What other processes see between steps: the entries written so
//! far (in counts and search), never a moved leaf. A failure removes what earlier steps wrote;
//! a kill leaves it to [`SessionStore::roll_back_abandoned_merges`], run by the next writable
//! open and the next import. Either way the file is all or nothing.

use crate::jsonl::reader::{FileEntry, Item};
use crate::model::ids::{EntryId, SessionId};
use crate::store::db::Db;
use crate::store::imported::{self, FileMark};
use crate::store::interchange::*;
use crate::store::lease::{self, LeaseConfig, millis, registry};
use crate::store::spool::Spool;
use crate::store::sql::{self, LeaseRow, RebuildMode};
use crate::store::{Result, SessionStore, StoreError, derived, search};
use crate::support::clock::{Clock, SystemClock};

/// What the owner of a merge's lease is called in "session in use" messages.
pub const MERGE_OWNER: &str = "pi import (merging a file)";

/// What a merge's read phase found: the lines to write, and where the file's last entry is.
pub(super) struct MergePlan {
    sid: i64,
    /// The session's next sequence when the file was compared with it.
    compared_next: i64,
    spool: Spool,
    last: Option<LastLine>,
}

/// The file's last entry line, as the comparison left it.
enum LastLine {
    /// Already stored, at this sequence.
    Stored(Option<EntryId>, i64),
    /// The last line of the spool.
    Spooled,
}

/// A merge between its write steps.
struct Writing {
    first_seq: i64,
    seq: i64,
    /// The lease the merge took (`None`: this store already held the session's lease).
    token: Option<String>,
    /// Set when the session grew between the comparison and the first step: the spooled
    /// lines are compared again with the entries before this sequence as they are written.
    compare_before: Option<i64>,
    written_entries: u64,
    added: u64,
    last: Option<(Option<EntryId>, i64)>,
}

/// How one write step ended.
enum MergeStep {
    More(Writing),
    Done(ImportReport),
    /// The caller's check failed in the first step: nothing was written.
    Stale,
}

/// Whether a spooled line the comparison found new is stored after all (an equal line came in
/// meanwhile) or conflicts.
fn stored_match(
    db: Db<'_>,
    sid: i64,
    session: &SessionId,
    line: &FileEntry,
    before: i64,
) -> Result<Option<i64>> {
    match &line.entry.id {
        Some(id) => {
            let stored = sql::same_id_before(db, sid, id.as_str(), before, &line.payload)?;
            if stored.is_empty() {
                return Ok(None);
            }
            match stored.iter().find(|(_, equal)| *equal) {
                Some((stored_seq, _)) => Ok(Some(*stored_seq)),
                None => Err(StoreError::ImportConflict {
                    session: session.clone(),
                    line: line.line,
                    id: id.clone(),
                }),
            }
        }
        None => sql::idless_with_payload_before(db, sid, &line.payload, before),
    }
}

impl SessionStore {
    /// The read phase of a merge into session `sid`: reads every item and keeps the lines to
    /// write. With `compare`, a line is compared with what the session held before this
    /// import (so a file that repeats a new line stores it as often as a first import would);
    /// without it, every line is new (the lines a file grew by since its last import, when
    /// nothing else wrote the session meanwhile). A quarantined line already recorded is
    /// passed over. A conflict is returned as [`StoreError::ImportConflict`].
    pub(super) fn plan_merge(
        db: Db<'_>,
        sid: i64,
        session: &SessionId,
        items: impl Iterator<Item = Result<Item>>,
        compare: bool,
    ) -> Result<MergePlan> {
        let compared_next = sql::next_seq(db, sid)?;
        let mut spool = Spool::new();
        let mut last = None;
        for item in items {
            let item = item?;
            match &item {
                Item::Skipped(line) => {
                    let number = i64::try_from(line.line).unwrap_or(i64::MAX);
                    if !sql::quarantine_has(db, sid, number, &line.bytes)? {
                        spool.push(&item)?;
                    }
                }
                Item::Entry(line) => {
                    let stored = if compare {
                        stored_match(db, sid, session, line, compared_next)?
                    } else {
                        None
                    };
                    match stored {
                        Some(seq) => last = Some(LastLine::Stored(line.entry.id.clone(), seq)),
                        None => {
                            spool.push(&item)?;
                            last = Some(LastLine::Spooled);
                        }
                    }
                }
            }
        }
        Ok(MergePlan {
            sid,
            compared_next,
            spool,
            last,
        })
    }

    /// The write phase of a merge (see the module docs). `check` runs first, inside the
    /// first step's transaction: when it returns false nothing is written and `Ok(None)` is
    /// returned. The file's record (`mark`) is written by the last step.
    pub(super) fn write_merge(
        &self,
        session: &SessionId,
        plan: MergePlan,
        source: &str,
        mark: Option<&FileMark>,
        imported_at: &str,
        check: &dyn Fn(Db<'_>) -> Result<bool>,
    ) -> Result<Option<ImportReport>> {
        let MergePlan {
            sid,
            compared_next,
            spool,
            last: planned_last,
        } = plan;
        let to_write = spool.entries();
        let nothing = spool.is_empty();
        let mut items = spool.into_items()?;
        let mut state: Option<Writing> = None;
        // Set once a step committed rows that a failure must remove.
        let mut committed = false;
        loop {
            let step = self.write_bulk(|db| {
                let mut writing = match state.take() {
                    Some(writing) => {
                        self.keep_merging(db, sid, session, &writing)?;
                        writing
                    }
                    None => {
                        if !check(db)? {
                            return Ok(MergeStep::Stale);
                        }
                        if nothing {
                            // Nothing to write: only the file's record.
                            if let Some(mark) = mark {
                                imported::put_record(db, mark, Some(sid), imported_at)?;
                            }
                            return Ok(MergeStep::Done(Self::merge_report(
                                db,
                                sid,
                                session,
                                ImportStatus::Unchanged,
                                0,
                            )?));
                        }
                        let mut writing = self.begin_merge(db, sid, session, compared_next)?;
                        if let Some(LastLine::Stored(id, seq)) = &planned_last {
                            writing.last = Some((id.clone(), *seq));
                        }
                        writing
                    }
                };
                let began = std::time::Instant::now();
                let mut lines = 0usize;
                let mut bytes = 0usize;
                loop {
                    if lines >= STAGE_STEP_ENTRIES
                        || bytes >= STAGE_STEP_BYTES
                        || (lines % 64 == 63 && began.elapsed() >= STAGE_STEP_TIME)
                    {
                        sql::move_merge(db, sid, writing.seq)?;
                        return Ok(MergeStep::More(writing));
                    }
                    let Some(item) = items.next() else {
                        return self
                            .finish_merge(db, sid, session, writing, mark, imported_at)
                            .map(MergeStep::Done);
                    };
                    match item? {
                        Item::Skipped(line) => {
                            bytes += line.bytes.len();
                            Self::quarantine_line(db, sid, source, &line, imported_at)?;
                        }
                        Item::Entry(line) => {
                            bytes += line.payload.len();
                            writing.written_entries += 1;
                            let stored = match writing.compare_before {
                                Some(before) => stored_match(db, sid, session, &line, before)?,
                                None => None,
                            };
                            let at = match stored {
                                Some(seq) => seq,
                                None => {
                                    Self::insert_file_entry(db, sid, writing.seq, &line)?;
                                    writing.seq += 1;
                                    writing.added += 1;
                                    writing.seq - 1
                                }
                            };
                            if writing.written_entries == to_write
                                && matches!(planned_last, Some(LastLine::Spooled))
                            {
                                writing.last = Some((line.entry.id, at));
                            }
                        }
                    }
                    lines += 1;
                }
            });
            match step {
                Ok(MergeStep::Done(report)) => return Ok(Some(report)),
                Ok(MergeStep::Stale) => return Ok(None),
                Ok(MergeStep::More(writing)) => {
                    committed = true;
                    state = Some(writing);
                    std::thread::sleep(STAGE_STEP_GAP);
                }
                Err(error) => {
                    if committed {
                        // What earlier steps wrote goes (a kill would leave it to the next open).
                        let _ = self.roll_back_merge(sid, &|_| true);
                    }
                    return Err(error);
                }
            }
        }
    }

    /// The first write step: the session's lease taken (unless this store holds it), the
    /// merge recorded.
    fn begin_merge(
        &self,
        db: Db<'_>,
        sid: i64,
        session: &SessionId,
        compared_next: i64,
    ) -> Result<Writing> {
        self.guard_session_write(db, sid, session)?;
        let mine = registry(&self.inner.leases).get(session.as_str()).cloned();
        let token = match mine {
            Some(_) => None,
            None => {
                let me = lease::this_process();
                let now = SystemClock.now_ms();
                let token = format!("{}:{}", me.pid, uuid::Uuid::new_v4().simple());
                sql::put_lease(
                    db,
                    sid,
                    &LeaseRow {
                        token: token.clone(),
                        owner: MERGE_OWNER.to_owned(),
                        pid: i64::from(me.pid),
                        pid_start: me.start,
                        host: me.host.clone(),
                        acquired_at: now,
                        heartbeat_at: now,
                        stale_ms: millis(LeaseConfig::default().stale_after),
                    },
                )?;
                Some(token)
            }
        };
        let first_seq = sql::next_seq(db, sid)?;
        let me = lease::this_process();
        sql::insert_merge(
            db,
            sid,
            first_seq,
            token.as_deref().unwrap_or(""),
            (me.pid, me.start, &me.host),
        )?;
        Ok(Writing {
            first_seq,
            seq: first_seq,
            token,
            compare_before: (first_seq != compared_next).then_some(first_seq),
            written_entries: 0,
            added: 0,
            last: None,
        })
    }

    /// A later write step's check: the merge is still recorded and its lease still held
    /// (renewed here), or this store's own lease still holds the session.
    fn keep_merging(
        &self,
        db: Db<'_>,
        sid: i64,
        session: &SessionId,
        writing: &Writing,
    ) -> Result<()> {
        let interrupted = || StoreError::MergeInterrupted {
            session: session.clone(),
        };
        if sql::merge_first_seq(db, sid)? != Some(writing.first_seq) {
            return Err(interrupted());
        }
        match &writing.token {
            Some(token) => {
                if !sql::renew_lease(db, sid, token, SystemClock.now_ms())? {
                    return Err(interrupted());
                }
                Ok(())
            }
            None => self.guard_session_write(db, sid, session),
        }
    }

    /// The last write step: the leaf moved to the file's last entry when lines were added,
    /// the file recorded, the merge and its lease removed.
    fn finish_merge(
        &self,
        db: Db<'_>,
        sid: i64,
        session: &SessionId,
        writing: Writing,
        mark: Option<&FileMark>,
        imported_at: &str,
    ) -> Result<ImportReport> {
        let status = if writing.added > 0 {
            let leaf = Self::leaf_after_import(db, sid, writing.last)?;
            sql::set_leaf(db, sid, leaf)?;
            ImportStatus::Updated
        } else {
            ImportStatus::Unchanged
        };
        if let Some(mark) = mark {
            imported::put_record(db, mark, Some(sid), imported_at)?;
        }
        sql::delete_merge(db, sid)?;
        if let Some(token) = &writing.token {
            sql::delete_lease(db, sid, token)?;
        }
        Self::merge_report(db, sid, session, status, writing.added)
    }

    fn merge_report(
        db: Db<'_>,
        sid: i64,
        session: &SessionId,
        status: ImportStatus,
        added: u64,
    ) -> Result<ImportReport> {
        Ok(ImportReport {
            session: session.clone(),
            status,
            entries: Self::summary_by_sid(db, sid)?.entries,
            added,
            conflict: None,
        })
    }

    /// One step of rolling back the merge into `sid`, in the caller's transaction: its entries
    /// removed from the last one down, with their own derived rows and search documents, until
    /// `deadline` passes. The step that removes its first entry also removes its quarantined
    /// lines, its lease and its record, and begins the stepped rebuild of the session's
    /// aggregates ([`derived::begin_aggregates_rebuild`]; the remaining entries' own rows are
    /// what they were before the merge). Returns whether the merge's entries are all gone.
    fn roll_back_merge_step(db: Db<'_>, sid: i64, deadline: std::time::Instant) -> Result<bool> {
        let Some(row) = sql::merge_row(db, sid)? else {
            return Ok(true);
        };
        // The one delete of entries outside a session's removal (the trigger of migration 0010
        // lets through only the rows of a merge marked as rolling back).
        db.execute_uncached(
            "UPDATE merging_imports SET rolling_back = 1 WHERE sid = ?1",
            rusqlite::params![sid],
        )?;
        let mut next = row.next_seq;
        while next > row.first_seq {
            let from = (next - ROLLBACK_BATCH).max(row.first_seq);
            for stored in sql::entries_from(db, sid, from, next - from)? {
                if let Some(entry) = crate::model::entry::Entry::parse(&stored.payload) {
                    let docs = crate::store::search::docs::docs_for(&entry);
                    search::fts::delete_entry_search_rows(db, sid, stored.seq, &docs)?;
                }
            }
            sql::delete_entry_rows(db, sid, from, next)?;
            db.execute_uncached(
                "DELETE FROM entries WHERE sid = ?1 AND seq >= ?2 AND seq < ?3",
                rusqlite::params![sid, from, next],
            )?;
            sql::move_merge(db, sid, from)?;
            next = from;
            if next > row.first_seq && std::time::Instant::now() >= deadline {
                return Ok(false);
            }
        }
        db.execute_uncached(
            "DELETE FROM quarantine WHERE sid = ?1 AND qid > ?2",
            rusqlite::params![sid, row.last_qid],
        )?;
        if !row.token.is_empty() {
            sql::delete_lease(db, sid, &row.token)?;
        }
        sql::delete_merge(db, sid)?;
        derived::begin_aggregates_rebuild(db, sid)?;
        Ok(true)
    }

    /// Rolls back the merge into `sid` in steps of [`STAGE_STEP_TIME`] with [`STAGE_STEP_GAP`]
    /// between them, while `still_it(row)` says the recorded merge is still the one to roll
    /// back (another process may have rolled it back meanwhile), then rebuilds the session's
    /// aggregates in steps ([`Self::finish_aggregates_rebuilds`]).
    fn roll_back_merge(&self, sid: i64, still_it: &dyn Fn(&sql::MergeRow) -> bool) -> Result<()> {
        loop {
            let done = self.write(|db| match sql::merge_row(db, sid)? {
                Some(row) if still_it(&row) => {
                    Self::roll_back_merge_step(db, sid, std::time::Instant::now() + STAGE_STEP_TIME)
                }
                _ => Ok(true),
            })?;
            if done {
                break;
            }
            std::thread::sleep(STAGE_STEP_GAP);
        }
        self.finish_aggregates_rebuilds()
    }

    /// Takes every session whose aggregates a rollback left to rebuild (migration 0011) to its
    /// end, in steps of [`STAGE_STEP_TIME`] with [`STAGE_STEP_GAP`] between them.
    pub(super) fn finish_aggregates_rebuilds(&self) -> Result<()> {
        let sids = self.read(|db| sql::session_rebuilds(db, RebuildMode::Aggregates))?;
        for sid in sids {
            loop {
                let done = self.write(|db| {
                    if sql::session_rebuild(db, sid)?.map(|found| found.mode)
                        != Some(RebuildMode::Aggregates)
                    {
                        // Done by another process, or taken over by a reindex.
                        return Ok(true);
                    }
                    derived::rebuild_session_step(
                        db,
                        sid,
                        RebuildMode::Aggregates,
                        std::time::Instant::now() + STAGE_STEP_TIME,
                    )
                })?;
                if done {
                    break;
                }
                std::thread::sleep(STAGE_STEP_GAP);
            }
        }
        Ok(())
    }

    /// Rolls back the merges that killed processes left part-written (their process gone on
    /// this host; another host's merge is left alone), each in its own steps, and finishes the
    /// rebuilds of aggregates such rollbacks left part-way. Returns how many merges it rolled
    /// back.
    pub fn roll_back_abandoned_merges(&self) -> Result<usize> {
        let me = lease::this_process();
        let rows = self.read(sql::merge_rows)?;
        let mut rolled = 0;
        for row in rows {
            let gone = row.host == me.host
                && !(row.pid == me.pid && row.pid_start == me.start)
                && !lease::process_alive(row.pid, row.pid_start);
            if gone {
                self.roll_back_merge(row.sid, &|now| now.token == row.token && now.pid == row.pid)?;
                rolled += 1;
            }
        }
        self.finish_aggregates_rebuilds()?;
        Ok(rolled)
    }
}

/// How many entries a rollback step reads and removes at once.
const ROLLBACK_BATCH: i64 = 512;

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::jsonl::reader::SessionReader;
    use crate::store::{StoreConfig, StoreLocation};
    use crate::support::ids::IdSource;

    fn store() -> SessionStore {
        SessionStore::open(StoreConfig {
            location: StoreLocation::Memory,
            clock: Arc::new(SystemClock),
            ids: Arc::new(IdSource::seeded(7)),
            busy_timeout: Duration::from_secs(1),
        })
        .expect("a memory store")
    }

    fn line(id: &str, parent: Option<&str>, text: &str) -> String {
        let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"{text}","timestamp":1}}}}"#
        )
    }

    fn file(lines: &[String]) -> Vec<u8> {
        let mut out = String::from(
            r#"{"type":"session","version":3,"id":"merged","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/m"}"#,
        );
        out.push('\n');
        for line in lines {
            out.push_str(line);
            out.push('\n');
        }
        out.into_bytes()
    }

    fn import(store: &SessionStore, bytes: &[u8]) -> Result<ImportReport> {
        let reader = SessionReader::new(bytes).expect("a session file");
        let header = reader.header().clone();
        let header_bytes = reader.header_bytes().to_vec();
        let options = ImportOptions {
            source: "test.jsonl",
            mode: ImportMode::Merge,
        };
        store.import_lines(&header, &header_bytes, reader.map(Ok), &options)
    }

    /// Compares `bytes` with the stored session, lets `meanwhile` write, then writes the merge.
    fn merge_with(
        store: &SessionStore,
        bytes: &[u8],
        meanwhile: impl FnOnce(&SessionStore),
    ) -> Result<Option<ImportReport>> {
        let reader = SessionReader::new(bytes).expect("a session file");
        let session = reader.header().id.clone();
        let sid = store.read(|db| sql::sid_of(db, session.as_str()))?;
        let sid = sid.expect("stored");
        let plan = store.read(|db| SessionStore::plan(db, sid, &session, reader))?;
        meanwhile(store);
        store.write_merge(&session, plan, "test.jsonl", None, "now", &|_| Ok(true))
    }

    impl SessionStore {
        fn plan(
            db: Db<'_>,
            sid: i64,
            session: &SessionId,
            reader: SessionReader<'_>,
        ) -> Result<MergePlan> {
            Self::plan_merge(db, sid, session, reader.map(Ok), true)
        }
    }

    fn stored_ids(store: &SessionStore) -> Vec<String> {
        let session = SessionId::new("merged");
        let mut out = Vec::new();
        store
            .read(|db| {
                let sid = SessionStore::sid(db, &session)?;
                sql::for_each_payload(db, sid, |_, payload| {
                    let entry = crate::model::entry::Entry::parse(payload);
                    out.push(
                        entry
                            .and_then(|e| e.id.map(|id| id.to_string()))
                            .unwrap_or_default(),
                    );
                    Ok(())
                })
            })
            .expect("read");
        out
    }

    #[test]
    fn a_line_that_came_in_between_comparison_and_write_is_not_stored_twice() -> Result<()> {
        let store = store();
        let a = line("a", None, "one");
        let b = line("b", Some("a"), "two");
        let c = line("c", Some("b"), "three");
        import(&store, &file(std::slice::from_ref(&a)))?;
        let report = merge_with(&store, &file(&[a.clone(), b.clone(), c]), |store| {
            // Another writer stores `b` (the same bytes) between the two phases.
            import(store, &file(&[a.clone(), b.clone()])).expect("the other import");
        })?
        .expect("not stale");
        assert_eq!(report.status, ImportStatus::Updated);
        assert_eq!(report.added, 1);
        assert_eq!(stored_ids(&store), ["a", "b", "c"]);
        let leaf = store
            .leaf(&SessionId::new("merged"))?
            .and_then(|e| e.entry.id);
        assert_eq!(leaf.map(|id| id.to_string()).as_deref(), Some("c"));
        Ok(())
    }

    #[test]
    fn a_conflict_that_came_in_between_refuses_the_merge_and_keeps_nothing() -> Result<()> {
        let store = store();
        let a = line("a", None, "one");
        import(&store, &file(std::slice::from_ref(&a)))?;
        let result = merge_with(
            &store,
            &file(&[a.clone(), line("b", Some("a"), "two")]),
            |store| {
                import(store, &file(&[a.clone(), line("b", Some("a"), "other")]))
                    .expect("the other import");
            },
        );
        assert!(
            matches!(result, Err(StoreError::ImportConflict { ref id, .. }) if id.as_str() == "b"),
            "{result:?}"
        );
        assert_eq!(stored_ids(&store), ["a", "b"]);
        store.read(|db| {
            assert_eq!(sql::merge_rows(db)?, []);
            Ok(())
        })
    }

    #[test]
    fn a_rollback_removes_exactly_the_merge_s_rows_and_rebuilds_the_session() -> Result<()> {
        let store = store();
        let a = line("a", None, "one");
        import(&store, &file(std::slice::from_ref(&a)))?;
        let before = store.session(&SessionId::new("merged"))?;
        let leaf_before = store.leaf(&SessionId::new("merged"))?;
        // A merge as a killed process leaves it: recorded, its rows written, not finished.
        let session = SessionId::new("merged");
        store.write(|db| {
            let sid = SessionStore::sid(db, &session)?;
            let writing = store.begin_merge(db, sid, &session, 1)?;
            let bytes = line("b", Some("a"), "two").into_bytes();
            let entry = crate::model::entry::Entry::parse(&bytes).expect("an entry");
            let row = FileEntry {
                line: 3,
                payload: bytes,
                entry,
            };
            SessionStore::insert_file_entry(db, sid, writing.seq, &row)?;
            sql::move_merge(db, sid, writing.seq + 1)
        })?;
        assert_eq!(stored_ids(&store), ["a", "b"]);
        // Nobody may delete entries outside a rollback.
        let refused = store.write(|db| {
            db.execute_uncached("DELETE FROM entries WHERE seq = 1", [])?;
            Ok(())
        });
        assert!(refused.is_err(), "{refused:?}");
        let sid = store.read(|db| SessionStore::sid(db, &session))?;
        store.roll_back_merge(sid, &|_| true)?;
        assert_eq!(stored_ids(&store), ["a"]);
        let after = store.session(&session)?;
        assert_eq!(after, before);
        assert_eq!(store.leaf(&session)?, leaf_before);
        store.read(|db| {
            assert_eq!(sql::merge_rows(db)?, []);
            let sid = SessionStore::sid(db, &session)?;
            assert_eq!(sql::lease(db, sid)?, None);
            Ok(())
        })
    }

    #[test]
    fn a_rollback_goes_in_steps_and_one_left_part_way_is_finished_by_the_next_open() -> Result<()> {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("pi.db");
        let open = || {
            SessionStore::open(StoreConfig {
                location: StoreLocation::File(path.clone()),
                clock: Arc::new(SystemClock),
                ids: Arc::new(IdSource::seeded(7)),
                busy_timeout: Duration::from_secs(5),
            })
        };
        let store = open()?;
        let session = SessionId::new("merged");
        import(&store, &file(&[line("a", None, "one")]))?;
        let before = store.session(&session)?;
        let labels_before = store.labels(&session)?;
        // A merge of more lines than a rollback step takes, with a label and a word of its own,
        // left recorded as a killed process leaves it.
        let merged = 3 * ROLLBACK_BATCH as usize + 10;
        let sid = store.read(|db| SessionStore::sid(db, &session))?;
        store.write(|db| {
            let writing = store.begin_merge(db, sid, &session, 1)?;
            let mut seq = writing.seq;
            let mut parent = "a".to_owned();
            for n in 0..merged {
                let id = format!("m{n}");
                let bytes = if n == 5 {
                    format!(
                        r#"{{"type":"label","id":"{id}","parentId":"{parent}","timestamp":"2026-01-01T00:00:02.000Z","targetId":"a","label":"merged-label"}}"#
                    )
                } else {
                    line(&id, Some(&parent), &format!("okapi {n}"))
                }
                .into_bytes();
                let entry = crate::model::entry::Entry::parse(&bytes).expect("an entry");
                let row = FileEntry {
                    line: n + 3,
                    payload: bytes,
                    entry,
                };
                SessionStore::insert_file_entry(db, sid, seq, &row)?;
                seq += 1;
                parent = id;
            }
            sql::move_merge(db, sid, seq)
        })?;
        assert_ne!(store.labels(&session)?, labels_before);

        // The first step removes one batch, from the top.
        let done = store
            .write(|db| SessionStore::roll_back_merge_step(db, sid, std::time::Instant::now()))?;
        assert!(!done, "one step took the whole merge");
        let row = store
            .read(|db| sql::merge_row(db, sid))?
            .expect("still recorded");
        assert_eq!(row.next_seq - row.first_seq, merged as i64 - ROLLBACK_BATCH);
        assert_eq!(
            stored_ids(&store).len(),
            1 + merged - ROLLBACK_BATCH as usize
        );
        // The steps that remove the rest end with the aggregates' rebuild begun, not finished:
        // as a process killed there leaves it.
        while !store
            .write(|db| SessionStore::roll_back_merge_step(db, sid, std::time::Instant::now()))?
        {
        }
        assert_eq!(stored_ids(&store), ["a"]);
        let rebuild = store.read(|db| sql::session_rebuild(db, sid))?;
        assert_eq!(
            rebuild.map(|found| found.mode),
            Some(RebuildMode::Aggregates)
        );
        assert_eq!(store.read(sql::merge_rows)?, []);
        drop(store);

        // The next open finishes it.
        let store = open()?;
        assert_eq!(store.read(|db| sql::session_rebuild(db, sid))?, None);
        assert_eq!(store.session(&session)?, before);
        assert_eq!(store.labels(&session)?, labels_before);
        let report = store.check()?;
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        Ok(())
    }
}
