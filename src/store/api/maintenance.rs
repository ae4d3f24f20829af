//! Maintenance: rebuilding derived data, merging the full-text index, check and backup.

use rusqlite::Connection;

use crate::store::db::Db;
use crate::store::error::SqliteContext;
use crate::store::maintenance::*;
use crate::store::sql::{self, RebuildMode};
use crate::store::types::ListScope;
use std::path::{Path, PathBuf};

use crate::store::{Result, SessionStore, StoreError, derived, migrate, search};
use rusqlite::params;

impl SessionStore {
    // ----- maintenance ----------------------------------------------------------------------

    /// Recomputes every derived row (path state, labels, statistics, usage, the full-text
    /// index) from the entries, in one transaction (the reference a stepped reindex is held
    /// to in the tests; commands use [`Self::reindex`]).
    pub fn rebuild_derived(&self) -> Result<()> {
        self.write_bulk(rebuild_all_derived)
    }

    /// Recomputes every derived row from the entries in bounded steps (`pi db reindex`), so
    /// that other writers wait at most one step behind it:
    ///
    /// 1. one transaction creates the next full-text index beside the live one and records
    ///    the reindex (`search_reindex`, migration 0009) — or finds one a killed reindex left,
    ///    and goes on from its cursor;
    /// 2. each step, one transaction of about `pacing.step`, rebuilds sessions in sid order:
    ///    their derived rows in place, their search documents into the next index alone, and
    ///    moves the cursor; a session larger than a step is taken over several steps, its
    ///    aggregates replaced in the step that ends it ([`derived::rebuild_session_step`],
    ///    migration 0011); `pacing.gap` passes between steps;
    /// 3. the step that finds no session left (those created meanwhile included) swaps the
    ///    next index in by rename; then the new index is merged in steps
    ///    ([`MERGE_STEP_PAGES`] each).
    ///
    /// Search answers from the live index, complete, until the swap: every writer puts a
    /// rebuilt session's new documents into both indexes. A kill at any point loses nothing
    /// and leaves each session's aggregates whole (old or rebuilt) and each entry's rows whole.
    /// `progress` is told after each step.
    pub fn reindex(
        &self,
        pacing: StepPacing,
        progress: &mut dyn FnMut(ReindexProgress),
    ) -> Result<ReindexProgress> {
        self.reindex_if(false, pacing, progress)
            .map(|done| done.unwrap_or_default())
    }

    /// [`Self::reindex`]; with `only_if_pending`, only while a migration's rebuild is pending
    /// (checked in the transaction that would begin it: `None` when it is not).
    fn reindex_if(
        &self,
        only_if_pending: bool,
        pacing: StepPacing,
        progress: &mut dyn FnMut(ReindexProgress),
    ) -> Result<Option<ReindexProgress>> {
        let begun = self.write(|db| {
            if only_if_pending && !migrate::rebuild_pending(db)? {
                return Ok(None);
            }
            let resumed = search::fts::reindex_cursor(db)?.is_some();
            if !resumed {
                begin_reindex(db)?;
            }
            Ok(Some((sql::all_sids(db)?.len(), resumed)))
        })?;
        let Some((total, resumed)) = begun else {
            return Ok(None);
        };
        let mut done = ReindexProgress {
            sessions: 0,
            total,
            resumed,
        };
        loop {
            // One step: sessions after the cursor, each whole or (a large one) part-way. The
            // step that finds none left swaps the next index in, in the same transaction, so
            // no session created meanwhile is missed and no step is longer than its budget.
            let step = self.write_bulk(|db| {
                let deadline = std::time::Instant::now() + pacing.step;
                let Some(cursor) = search::fts::reindex_cursor(db)? else {
                    // Another process took the same reindex to its end.
                    return Ok((0, true));
                };
                let mut rebuilt = 0;
                for sid in sql::sids_after(db, cursor)? {
                    if !derived::rebuild_session_step(db, sid, RebuildMode::Reindex, deadline)? {
                        return Ok((rebuilt, false));
                    }
                    set_reindex_cursor(db, sid)?;
                    rebuilt += 1;
                    if std::time::Instant::now() >= deadline {
                        return Ok((rebuilt, false));
                    }
                }
                swap_in_next_index(db)?;
                migrate::set_rebuild_pending(db, false)?;
                Ok((rebuilt, true))
            })?;
            done.sessions += step.0;
            progress(done);
            if step.1 {
                break;
            }
            std::thread::sleep(pacing.gap);
        }
        for _ in 0..100_000 {
            std::thread::sleep(pacing.gap);
            if !self.write(|db| search::fts::merge_search_index_step(db, MERGE_STEP_PAGES))? {
                break;
            }
        }
        Ok(Some(done))
    }

    /// The number of documents in the full-text index (0 when it has none).
    pub fn search_index_docs(&self) -> Result<i64> {
        self.read(|db| Ok(search::fts::totals(db)?.map_or(0, |(docs, _)| docs)))
    }

    /// After a bulk load (`pi import`): merges the full-text index into one segment when the
    /// load added at least [`OPTIMIZE_GROWTH`] of its documents (`docs_before`: what
    /// [`Self::search_index_docs`] said before the load), so that the merge, which rewrites
    /// the whole index, costs a bounded share of the load. The merge runs in steps of
    /// [`MERGE_STEP_PAGES`], each its own write transaction, so that a live session's appends
    /// wait for a step (a fraction of a second), not for the whole merge (seconds) and its
    /// busy timeout. Returns whether it merged.
    pub fn optimize_search_index_after_load(&self, docs_before: i64) -> Result<bool> {
        let docs = self.search_index_docs()?;
        let grown = docs - docs_before.max(0);
        if grown <= 0 || (grown as f64) < OPTIMIZE_GROWTH * docs as f64 {
            return Ok(false);
        }
        // A step that did no work ends it; the bound only guards against a merge that never
        // reports completion (the benchmark's index takes a few dozen steps).
        for _ in 0..100_000 {
            if !self.write(|db| search::fts::merge_search_index_step(db, MERGE_STEP_PAGES))? {
                break;
            }
        }
        Ok(true)
    }

    /// Rebuilds the derived tables if a migration left that pending, as a stepped reindex
    /// ([`Self::reindex`]) with the staged import's pacing, whose pause is what another
    /// process's writer (polling in SQLite's busy handler) needs to take the lock between two
    /// steps: no transaction is longer than a step, so
    /// another process opening meanwhile never meets its busy timeout; it finds the rebuild
    /// pending too and takes the same reindex on from its cursor, and both return once it is
    /// done (no command works on derived rows of the old shape). A kill leaves the rebuild
    /// pending and the cursor; the next open goes on.
    pub(super) fn rebuild_derived_if_pending(&self) -> Result<()> {
        self.reindex_if(true, StepPacing::default(), &mut |_| {})?;
        Ok(())
    }
}

/// The share of the full-text index a bulk load must have added for
/// [`SessionStore::optimize_search_index_after_load`] to merge it (a merge rewrites the whole
/// index: worth it after a load of that size, not after a few sessions; docs/BENCHMARKS.md).
pub const OPTIMIZE_GROWTH: f64 = 0.1;

/// Leaf pages (4 KiB) merged per write transaction by
/// [`SessionStore::optimize_search_index_after_load`].
pub const MERGE_STEP_PAGES: i64 = 2000;

/// How a stepped operation paces itself: the time one transaction may take, and the pause
/// between two, in which other processes' writers get the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepPacing {
    /// A step's transaction ends at the first session boundary after this much time.
    pub step: std::time::Duration,
    /// The pause between steps.
    pub gap: std::time::Duration,
}

impl Default for StepPacing {
    /// The staged import's pacing: 500 ms steps, 100 ms between them.
    fn default() -> Self {
        Self {
            step: crate::store::interchange::STAGE_STEP_TIME,
            gap: crate::store::interchange::STAGE_STEP_GAP,
        }
    }
}

/// How far a stepped reindex got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReindexProgress {
    /// Sessions rebuilt by this run.
    pub sessions: usize,
    /// Sessions in the database when it began.
    pub total: usize,
    /// Whether it went on from a reindex that a kill had left part-way.
    pub resumed: bool,
}

/// The shape of the live full-text index (migrations 0002 and 0008) under the next names.
/// The document map's index takes whichever of two names the live one does not have (an
/// index keeps its name when its table is renamed).
fn begin_reindex(db: Db<'_>) -> Result<()> {
    let live_index_named_entry: bool = db.value(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'index' AND name = 'search_docs_entry')",
        [],
    )?;
    let index_name = if live_index_named_entry {
        "search_docs_entry_next"
    } else {
        "search_docs_entry"
    };
    db.batch(&format!(
        "DROP TABLE IF EXISTS search_fts_next;
         DROP TABLE IF EXISTS search_docs_next;
         DROP TABLE IF EXISTS search_totals_next;
         CREATE TABLE search_docs_next (
             docid INTEGER PRIMARY KEY,
             sid   INTEGER NOT NULL,
             seq   INTEGER NOT NULL,
             role  TEXT NOT NULL,
             kind  TEXT NOT NULL,
             ts    INTEGER NOT NULL
         );
         CREATE INDEX {index_name} ON search_docs_next (sid, seq);
         CREATE VIRTUAL TABLE search_fts_next USING fts5 (
             body,
             content = '',
             contentless_delete = 1,
             tokenize = 'unicode61 remove_diacritics 2'
         );
         CREATE TABLE search_totals_next (
             sid    INTEGER PRIMARY KEY REFERENCES sessions (sid),
             docs   INTEGER NOT NULL,
             tokens INTEGER NOT NULL
         );
         INSERT INTO search_reindex (one, cursor) VALUES (1, 0);"
    ))
}

fn set_reindex_cursor(db: Db<'_>, sid: i64) -> Result<()> {
    db.execute(
        "UPDATE search_reindex SET cursor = ?1 WHERE one = 1",
        params![sid],
    )?;
    Ok(())
}

/// Replaces the live full-text index with the next one and ends the reindex.
fn swap_in_next_index(db: Db<'_>) -> Result<()> {
    db.batch(
        "DROP TABLE search_fts;
         DROP TABLE search_docs;
         DROP TABLE search_totals;
         ALTER TABLE search_fts_next RENAME TO search_fts;
         ALTER TABLE search_docs_next RENAME TO search_docs;
         ALTER TABLE search_totals_next RENAME TO search_totals;
         DELETE FROM search_reindex;",
    )
}

/// Abandons a reindex in progress (a one-transaction rebuild supersedes it).
fn abandon_reindex(db: Db<'_>) -> Result<()> {
    db.batch(
        "DROP TABLE IF EXISTS search_fts_next;
         DROP TABLE IF EXISTS search_docs_next;
         DROP TABLE IF EXISTS search_totals_next;
         DELETE FROM search_reindex;",
    )
}

/// Recomputes every derived row from the entries, merges the full-text index into one
/// segment, and clears the pending-rebuild mark.
fn rebuild_all_derived(db: Db<'_>) -> Result<()> {
    abandon_reindex(db)?;
    sql::clear_all_derived(db)?;
    for sid in sql::all_sids(db)? {
        derived::rebuild_session(db, sid)?;
    }
    search::fts::optimize_search_index(db)?;
    migrate::set_rebuild_pending(db, false)
}

impl SessionStore {
    /// Checks integrity, orphans and that every derived table matches a rebuild from the
    /// entries. Changes nothing in the database, and never takes its write lock.
    ///
    /// Integrity and orphans are read in one snapshot on a reader connection (writers go on);
    /// the full-text index check and each session's rebuild comparison run on a scratch copy
    /// beside the database (`check_on_scratch`). Damage found on the way is reported as a
    /// problem and leaves the damage mark `<db>.damaged` (no command writes to the database
    /// until a check passes, which removes it); a database that cannot be checked at all
    /// (busy, disk full, an unwritable directory for the scratch copy) is an error.
    pub fn check(&self) -> std::result::Result<CheckReport, StoreError> {
        let mut report = CheckReport::default();
        let sids = match self.read(|db| check_snapshot(db, &mut report)) {
            Ok(sids) => Some(sids),
            Err(StoreError::Damaged { detail, .. }) => {
                report.damaged = true;
                report.problems.push(format!("damaged: {detail}"));
                None
            }
            Err(other) => return Err(other),
        };
        if let Some(sids) = sids {
            match self.inner.conns.file.clone() {
                Some(file) => self.check_on_scratch(&file, sids, &mut report)?,
                None => {
                    let conn = super::lock(&self.inner.conns.writer);
                    compare_all(Db::new(&conn, self.path()), sids, &mut report)?;
                }
            }
        }
        if let Some(file) = &self.inner.conns.file {
            let marked = if report.damaged {
                mark_damaged(file, &report.problems).map(|_| ())
            } else {
                clear_damage_mark(file)
            };
            if let Err(error) = marked {
                report.problems.push(error.to_string());
            }
        }
        Ok(report)
    }

    /// The part of `check` that must write (the full-text index's integrity check, each
    /// session's rebuild comparison), run on a scratch copy of the database beside it
    /// (`.<name>.<pid>.pi-check`, made with `VACUUM INTO` on a reader, removed afterwards), so
    /// that `db check` never takes the database's write lock: writers go on whatever its
    /// length.
    fn check_on_scratch(
        &self,
        file: &Path,
        sids: Vec<i64>,
        report: &mut CheckReport,
    ) -> std::result::Result<(), StoreError> {
        use std::os::unix::fs::OpenOptionsExt;
        let name = file
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| "pi.db".to_owned());
        let dir = match file.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let scratch = dir.join(format!(".{name}.{}.pi-check", std::process::id()));
        remove_backup_files(&scratch);
        let display = self.path().to_owned();
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&scratch)
            .map_err(|source| StoreError::io(&display, &scratch, source))?;
        let result = (|| {
            let scratch_text = scratch.to_string_lossy().into_owned();
            let copied = self.with_reader(|db| {
                db.execute_uncached("VACUUM INTO ?1", params![scratch_text])?;
                Ok(())
            });
            match copied {
                Ok(()) => {}
                Err(StoreError::Damaged { detail, .. }) => {
                    report.damaged = true;
                    report.problems.push(format!("damaged: {detail}"));
                    return Ok(());
                }
                Err(other) => return Err(other),
            }
            let conn = Connection::open(&scratch).at(&scratch_text)?;
            compare_all(Db::new(&conn, &display), sids, report)
        })();
        remove_backup_files(&scratch);
        result
    }

    /// Writes a consistent copy of the database to `dest` (mode 0600; it must not exist),
    /// while other processes may keep writing.
    ///
    /// The copy is written to a temporary file beside `dest` (`.<name>.<pid>.pi-backup`),
    /// synced, and renamed to `dest` only when complete (a rename that refuses to replace a
    /// file, so a file created meanwhile is kept), then the directory is synced: whatever
    /// happens, `dest` is either absent or a whole backup. The temporary is removed when the
    /// backup fails; one a killed backup left behind is removed by the next backup to the same
    /// name (only when its process is gone).
    pub fn backup(&self, dest: &Path) -> std::result::Result<(), StoreError> {
        let failed = |detail: String| StoreError::Backup {
            path: dest.to_path_buf(),
            detail,
        };
        if std::fs::symlink_metadata(dest).is_ok() {
            return Err(StoreError::BackupExists {
                path: dest.to_path_buf(),
            });
        }
        let name = dest
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .ok_or_else(|| failed("it does not name a file".to_owned()))?;
        let dir = match dest.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(failed(format!(
                "the directory {} does not exist",
                dir.display()
            )));
        }
        remove_stale_backups(&dir, &name);
        let temp = dir.join(format!(".{name}.{}.pi-backup", std::process::id()));
        let result = self.backup_through(&temp, dest, &dir);
        if result.is_err() {
            remove_backup_files(&temp);
        }
        result.map_err(|error| match error {
            BackupFailure::Exists => StoreError::BackupExists {
                path: dest.to_path_buf(),
            },
            BackupFailure::Io(what, at, source) => failed(match source.kind() {
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => {
                    format!("the directory {} is not writable ({source})", dir.display())
                }
                _ => format!("{what} {}: {source}", at.display()),
            }),
            BackupFailure::Store(error) => error,
        })
    }

    /// Writes the copy to `temp`, syncs it and renames it to `dest`.
    fn backup_through(
        &self,
        temp: &Path,
        dest: &Path,
        dir: &Path,
    ) -> std::result::Result<(), BackupFailure> {
        use std::os::unix::fs::OpenOptionsExt;
        let io = |what: &'static str, at: &Path| {
            let at = at.to_path_buf();
            move |source| BackupFailure::Io(what, at, source)
        };
        // Created here, empty, with mode 0600: VACUUM INTO fills an empty file.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(temp)
            .map_err(io("cannot create", temp))?;
        let temp_text = temp.to_string_lossy().into_owned();
        self.with_reader(|db| {
            db.execute_uncached("VACUUM INTO ?1", params![temp_text])?;
            Ok(())
        })
        .map_err(BackupFailure::Store)?;
        // VACUUM INTO does not sync what it wrote.
        std::fs::File::open(temp)
            .and_then(|file| file.sync_all())
            .map_err(io("cannot sync", temp))?;
        rename_no_replace(temp, dest)?;
        std::fs::File::open(dir)
            .and_then(|handle| handle.sync_all())
            .map_err(io("cannot sync the directory", dir))
    }

    /// Token and cost totals grouped by day, week, model, provider, cwd or session, and the
    /// number of sessions they come from (the groups of every key add up to the same totals).
    pub fn usage_stats(
        &self,
        by: StatsBy,
        filter: &StatsFilter,
    ) -> std::result::Result<(Vec<sql::StatsRow>, i64), StoreError> {
        let model_key = format!("COALESCE(u.provider || '/' || u.model, '{NO_MODEL}')");
        let provider_key = format!("COALESCE(u.provider, '{NO_MODEL}')");
        let (key, by_key) = match by {
            StatsBy::Day => ("u.day", true),
            StatsBy::Week => ("u.week", true),
            StatsBy::Model => (model_key.as_str(), false),
            StatsBy::Provider => (provider_key.as_str(), false),
            StatsBy::Cwd => ("s.cwd", false),
            StatsBy::Session => ("s.id", false),
        };
        let rows_filter = sql::UsageFilter {
            since_ms: filter.since_ms,
            until_ms: filter.until_ms,
            cwd: match &filter.scope {
                ListScope::All => None,
                ListScope::Cwd(cwd) => Some(cwd.as_str()),
            },
        };
        self.read(|db| {
            Ok((
                sql::usage_stats(db, key, &rows_filter, by_key)?,
                sql::usage_sessions(db, &rows_filter)?,
            ))
        })
    }
}
