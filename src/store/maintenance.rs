//! Database maintenance: `db check` (integrity, orphans, derived tables consistent with the
//! entries), `db backup` (an online, consistent copy) and usage statistics.
//!
//! Invariant: `check` changes nothing in the database and takes no write lock — its rebuild
//! comparison runs on a scratch copy, inside a savepoint that is always rolled back; the only
//! file it writes is the damage mark beside a damaged database.

use std::path::{Path, PathBuf};

use rusqlite::params;

use crate::store::db::Db;
use crate::store::error::SqliteContext;
use crate::store::{StoreError, derived, sql};

/// What `db check` found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Sessions checked.
    pub sessions: usize,
    /// Entries in the database.
    pub entries: i64,
    /// One line per problem; empty when the database is sound.
    pub problems: Vec<String>,
    /// Whether the file itself is damaged (SQLite's integrity check failed, or a page could
    /// not be read), as opposed to derived data that a reindex rebuilds.
    pub damaged: bool,
}

/// How `sessions stats` groups usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsBy {
    /// `YYYY-MM-DD` (UTC).
    Day,
    /// `YYYY-Www` (ISO week, UTC).
    Week,
    /// `provider/model`; rows without a model (user messages, tool results) under
    /// [`NO_MODEL`].
    Model,
    /// Provider; rows without one under [`NO_MODEL`].
    Provider,
    /// Session working directory.
    Cwd,
    /// Session id.
    Session,
}

/// The key of the usage rows that carry no model (user messages, tool results), so that
/// `--by model` and `--by provider` count what every other key counts.
pub const NO_MODEL: &str = "(no model)";

/// Which usage a `sessions stats` totals.
#[derive(Debug, Clone)]
pub struct StatsFilter {
    /// Entry time at or after (Unix ms).
    pub since_ms: Option<i64>,
    /// Entry time before (Unix ms).
    pub until_ms: Option<i64>,
    /// Which sessions.
    pub scope: crate::store::ListScope,
}

/// A snapshot of one session's derived rows, comparable before and after a rebuild.
fn derived_snapshot(db: Db<'_>, sid: i64) -> Result<Vec<String>, StoreError> {
    let queries = [
        "SELECT 'path', seq, parent_seq, depth, jump_seq, compaction_seq, model_seq, thinking_seq,
                system_seq, flags
           FROM entry_path WHERE sid = ?1 ORDER BY seq",
        "SELECT 'edit', seq, target_id, omits FROM context_edits WHERE sid = ?1 ORDER BY seq",
        "SELECT 'label', target_id, label, label_ts, order_seq FROM labels WHERE sid = ?1 ORDER BY target_id",
        "SELECT 'stats', next_seq, entries, messages, input, output, cache_read, cache_write, cost,
                last_activity, name, first_message FROM session_stats WHERE sid = ?1",
        "SELECT 'doc', seq, role, kind, ts FROM search_docs WHERE sid = ?1 ORDER BY seq, role, kind, ts",
        "SELECT 'search totals', docs, tokens FROM search_totals WHERE sid = ?1",
        "SELECT 'usage', seq, ts, day, week, role, provider, model, input, output, cache_read,
                cache_write, cost, is_message, tool_calls FROM usage WHERE sid = ?1 ORDER BY seq",
        "SELECT 'irregular', irregular FROM sessions WHERE sid = ?1",
    ];
    let mut out = Vec::new();
    for query in queries {
        out.extend(db.rows_uncached(query, params![sid], |row| {
            let mut text = String::new();
            for idx in 0..row.as_ref().column_count() {
                let value: rusqlite::types::Value = row.get(idx)?;
                text.push_str(&format!("{value:?}|"));
            }
            Ok(text)
        })?);
    }
    Ok(out)
}

fn count(db: Db<'_>, sql_text: &str) -> Result<i64, StoreError> {
    db.conn()
        .query_row(sql_text, [], |row| row.get(0))
        .at(db.path())
}

/// The read-only part of `check`, in one snapshot: integrity, orphans, counts; returns the
/// sessions to compare.
pub(crate) fn check_snapshot(db: Db<'_>, report: &mut CheckReport) -> Result<Vec<i64>, StoreError> {
    let lines = db.rows_uncached("PRAGMA integrity_check", [], |row| row.get::<_, String>(0))?;
    for line in lines {
        if line != "ok" {
            report.damaged = true;
            report.problems.push(format!("integrity: {line}"));
        }
    }
    let orphan_checks = [
        (
            "entries without a session",
            "SELECT COUNT(*) FROM entries WHERE sid NOT IN (SELECT sid FROM sessions)",
        ),
        (
            "leaf pointers to missing entries",
            "SELECT COUNT(*) FROM leaf l WHERE l.seq IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.sid = l.sid AND e.seq = l.seq)",
        ),
        (
            "sessions without a leaf row",
            "SELECT COUNT(*) FROM sessions WHERE sid NOT IN (SELECT sid FROM leaf)",
        ),
        (
            "sessions without statistics",
            "SELECT COUNT(*) FROM sessions WHERE sid NOT IN (SELECT sid FROM session_stats)",
        ),
        (
            "search documents without an entry",
            "SELECT COUNT(*) FROM search_docs d
               WHERE NOT EXISTS (SELECT 1 FROM entries e WHERE e.sid = d.sid AND e.seq = d.seq)",
        ),
        (
            "quarantined lines without a session",
            "SELECT COUNT(*) FROM quarantine WHERE sid NOT IN (SELECT sid FROM sessions)",
        ),
        (
            "leases of missing sessions",
            "SELECT COUNT(*) FROM session_leases WHERE sid NOT IN (SELECT sid FROM sessions)",
        ),
        (
            "imported files recorded for missing sessions",
            "SELECT COUNT(*) FROM imported_files
               WHERE sid IS NOT NULL AND sid NOT IN (SELECT sid FROM sessions)",
        ),
    ];
    for (what, query) in orphan_checks {
        let found = count(db, query)?;
        if found > 0 {
            report.problems.push(format!("{found} {what}"));
        }
    }
    // A docid carries its document's day (ranking and the candidate window read it there);
    // a full day spills into later ones, never earlier.
    let misdated = count(
        db,
        &format!(
            "SELECT COUNT(*) FROM search_docs WHERE {} < {}",
            crate::store::search::docid::docid_day_sql("docid"),
            crate::store::search::docid::day_sql("ts")
        ),
    )?;
    if misdated > 0 {
        report.problems.push(format!(
            "{misdated} search documents whose docid does not carry their day (run `pi db reindex`)"
        ));
    }
    let fts_rows = count(db, "SELECT COUNT(*) FROM search_fts")?;
    let docs = count(db, "SELECT COUNT(*) FROM search_docs")?;
    if fts_rows != docs {
        report.problems.push(format!(
            "full-text index has {fts_rows} rows for {docs} documents (run `pi db reindex`)"
        ));
    }
    report.entries = count(db, "SELECT COUNT(*) FROM entries")?;
    let sids = sql::all_sids(db)?;
    report.sessions = sids.len();
    Ok(sids)
}

/// Compares one session's derived rows with a rebuild from its entries, inside a savepoint
/// that is always rolled back (on a scratch copy, in a transaction the caller rolls back
/// too); returns the problem, if any.
fn compare_rebuild(db: Db<'_>, sid: i64) -> Result<Option<String>, StoreError> {
    let Some(session) = sql::session_by_sid(db, sid)? else {
        // Deleted since the snapshot.
        return Ok(None);
    };
    let before = derived_snapshot(db, sid)?;
    db.batch("SAVEPOINT pi_check")?;
    let rebuilt = derived::rebuild_session(db, sid).and_then(|()| derived_snapshot(db, sid));
    db.batch("ROLLBACK TO pi_check; RELEASE pi_check")?;
    let after = rebuilt?;
    if after == before {
        return Ok(None);
    }
    let tables: std::collections::BTreeSet<&str> = before
        .iter()
        .filter(|row| !after.contains(row))
        .chain(after.iter().filter(|row| !before.contains(row)))
        .filter_map(|row| row.split('|').next())
        .collect();
    Ok(Some(format!(
        "session {}: derived data differs from the entries ({}); run `pi db reindex`",
        session.id,
        tables.into_iter().collect::<Vec<_>>().join(", ")
    )))
}

/// The full-text index's integrity check and every session's rebuild comparison on `db`
/// (a scratch copy, or an in-memory store's own connection); problems go to `report`.
pub(crate) fn compare_all(
    db: Db<'_>,
    sids: Vec<i64>,
    report: &mut CheckReport,
) -> Result<(), StoreError> {
    let fts = db.execute_uncached(
        "INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 0)",
        [],
    );
    match fts {
        Ok(_) => {}
        Err(
            error @ (StoreError::ReadOnly { .. }
            | StoreError::Busy { .. }
            | StoreError::DiskFull { .. }),
        ) => return Err(error),
        Err(error) => {
            report.damaged |= matches!(error, StoreError::Damaged { .. });
            report.problems.push(format!("full-text index: {error}"));
        }
    }
    for sid in sids {
        let compared = db.batch("BEGIN").and_then(|()| compare_rebuild(db, sid));
        let _ = db.conn().execute_batch("ROLLBACK");
        match compared {
            Ok(None) => {}
            Ok(Some(problem)) => report.problems.push(problem),
            Err(
                error @ (StoreError::ReadOnly { .. }
                | StoreError::Busy { .. }
                | StoreError::DiskFull { .. }),
            ) => return Err(error),
            Err(error) => {
                report.damaged |= matches!(error, StoreError::Damaged { .. });
                report.problems.push(format!("session #{sid}: {error}"));
            }
        }
    }
    Ok(())
}

/// Leaves the damage mark `<db>.damaged` beside `db` (mode 0600, the problems found, one a
/// line): until it is removed, no command writes to the database (`StoreError::MarkedDamaged`).
/// Returns the mark's path.
pub fn mark_damaged(db: &Path, problems: &[String]) -> Result<PathBuf, StoreError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mark = super::open::damage_mark_path(db);
    let display = db.display().to_string();
    let mut text = String::from(
        "pi db check found this database damaged; pi does not write to it until it is repaired\n",
    );
    for problem in problems {
        text.push_str(problem);
        text.push('\n');
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&mark)
        .and_then(|mut file| {
            file.write_all(text.as_bytes())
                .and_then(|()| file.sync_all())
        })
        .map_err(|source| StoreError::io(&display, &mark, source))?;
    Ok(mark)
}

/// Removes the damage mark beside `db`, if any (a `db check` that found no damage).
pub fn clear_damage_mark(db: &Path) -> Result<(), StoreError> {
    let mark = super::open::damage_mark_path(db);
    match std::fs::remove_file(&mark) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(StoreError::io(&db.display().to_string(), &mark, source)),
    }
}

/// Why a backup stopped, before it becomes a [`StoreError`] naming the backup.
pub(crate) enum BackupFailure {
    /// The backup's name appeared while it was written.
    Exists,
    /// A file-system step failed: what, on which file.
    Io(&'static str, PathBuf, std::io::Error),
    /// Copying the database failed.
    Store(StoreError),
}

/// Renames `from` to `to` unless `to` exists (`renameat2` with `RENAME_NOREPLACE`; on a file
/// system without it, a check just before a plain rename).
pub(crate) fn rename_no_replace(from: &Path, to: &Path) -> Result<(), BackupFailure> {
    use nix::errno::Errno;
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    match renameat2(AT_FDCWD, from, AT_FDCWD, to, RenameFlags::RENAME_NOREPLACE) {
        Ok(()) => Ok(()),
        Err(Errno::EEXIST) => Err(BackupFailure::Exists),
        Err(Errno::EINVAL | Errno::ENOSYS) => {
            if std::fs::symlink_metadata(to).is_ok() {
                return Err(BackupFailure::Exists);
            }
            std::fs::rename(from, to)
                .map_err(|source| BackupFailure::Io("cannot rename to", to.to_path_buf(), source))
        }
        Err(errno) => Err(BackupFailure::Io(
            "cannot rename to",
            to.to_path_buf(),
            std::io::Error::from(errno),
        )),
    }
}

/// Removes a backup's temporary file and the journal files SQLite may have made beside it.
pub(crate) fn remove_backup_files(temp: &Path) {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", temp.display()));
    }
}

/// Removes the temporaries of backups to `name` in `dir` whose process is gone (a killed
/// backup's); only files of exactly that shape, `.<name>.<pid>.pi-backup` (and its journals).
pub(crate) fn remove_stale_backups(dir: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{name}.");
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        let Some(rest) = file_name.strip_prefix(&prefix) else {
            continue;
        };
        let Some(pid) = rest.strip_suffix(".pi-backup") else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            remove_backup_files(&entry.path());
        }
    }
}
