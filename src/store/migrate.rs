//! Schema migrations: the numbered files of `migrations/`, embedded at compile time and applied
//! in order at open, each in its own transaction, recorded in `schema_migrations`.
//!
//! Invariant: a database whose recorded version is newer than the newest embedded migration is
//! refused before anything is written to it.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::store::db::Db;
use crate::store::error::{SqliteContext, StoreError};

/// One embedded migration.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// The version this migration brings the schema to (its file number).
    pub version: i64,
    /// The file name under `migrations/`.
    pub name: &'static str,
    /// The SQL text.
    pub sql: &'static str,
    /// Whether the derived tables must be rebuilt from the entries once it is applied (it
    /// changes their shape; derived data is never migrated by hand).
    pub rebuild_derived: bool,
}

/// Every migration, in order. A test checks this list against the files in `migrations/`.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_init.sql",
        sql: include_str!("../../migrations/0001_init.sql"),
        rebuild_derived: false,
    },
    Migration {
        version: 2,
        name: "0002_search.sql",
        sql: include_str!("../../migrations/0002_search.sql"),
        rebuild_derived: true,
    },
    Migration {
        version: 3,
        name: "0003_lease.sql",
        sql: include_str!("../../migrations/0003_lease.sql"),
        rebuild_derived: false,
    },
    Migration {
        version: 4,
        name: "0004_search_docids.sql",
        sql: include_str!("../../migrations/0004_search_docids.sql"),
        rebuild_derived: true,
    },
    Migration {
        version: 5,
        name: "0005_imported_files.sql",
        sql: include_str!("../../migrations/0005_imported_files.sql"),
        rebuild_derived: false,
    },
    Migration {
        version: 6,
        name: "0006_prompt_state.sql",
        sql: include_str!("../../migrations/0006_prompt_state.sql"),
        rebuild_derived: true,
    },
    Migration {
        version: 7,
        name: "0007_staged_imports.sql",
        sql: include_str!("../../migrations/0007_staged_imports.sql"),
        rebuild_derived: false,
    },
    Migration {
        version: 8,
        name: "0008_search_totals.sql",
        sql: include_str!("../../migrations/0008_search_totals.sql"),
        rebuild_derived: true,
    },
    Migration {
        version: 9,
        name: "0009_stepped_reindex.sql",
        sql: include_str!("../../migrations/0009_stepped_reindex.sql"),
        rebuild_derived: false,
    },
    Migration {
        version: 10,
        name: "0010_stepped_merges.sql",
        sql: include_str!("../../migrations/0010_stepped_merges.sql"),
        rebuild_derived: false,
    },
    Migration {
        version: 11,
        name: "0011_stepped_session_rebuild.sql",
        sql: include_str!("../../migrations/0011_stepped_session_rebuild.sql"),
        rebuild_derived: false,
    },
    Migration {
        version: 12,
        name: "0012_sync_marks.sql",
        sql: include_str!("../../migrations/0012_sync_marks.sql"),
        rebuild_derived: false,
    },
];

/// `PRAGMA user_version` value that marks a rebuild of the derived tables as pending (set in
/// the transaction of a migration that asks for one, cleared in the rebuild's transaction).
const REBUILD_PENDING: i64 = 1;

/// Whether a rebuild of the derived tables is pending.
pub fn rebuild_pending(db: Db<'_>) -> Result<bool, StoreError> {
    let version: i64 = db
        .conn()
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .at(db.path())?;
    Ok(version == REBUILD_PENDING)
}

/// Marks a rebuild of the derived tables as pending or done (inside the caller's transaction).
pub fn set_rebuild_pending(db: Db<'_>, pending: bool) -> Result<(), StoreError> {
    let value = if pending { REBUILD_PENDING } else { 0 };
    db.batch(&format!("PRAGMA user_version = {value}"))
}

/// Abandons a `pi db reindex` or session rebuild part-way (their rows and next index, of the
/// old shape): the rebuild the migration asks for, itself a stepped reindex, starts afresh.
fn abandon_stepped_rebuilds(db: Db<'_>) -> Result<(), StoreError> {
    let has = |table: &str| -> Result<bool, StoreError> {
        db.value(
            "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1)",
            [table],
        )
    };
    db.batch(
        "DROP TABLE IF EXISTS search_fts_next;
         DROP TABLE IF EXISTS search_docs_next;
         DROP TABLE IF EXISTS search_totals_next;",
    )?;
    for table in [
        "search_reindex",
        "session_rebuild",
        "session_rebuild_labels",
    ] {
        if has(table)? {
            db.batch(&format!("DELETE FROM {table}"))?;
        }
    }
    Ok(())
}

/// Returns the newest schema version this binary knows.
pub fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |migration| migration.version)
}

/// Returns the schema version recorded in the database (0 for a new database).
pub fn current_version(db: Db<'_>) -> Result<i64, StoreError> {
    let has_table: Option<i64> = db
        .conn()
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
            [],
            |row| row.get(0),
        )
        .optional()
        .at(db.path())?;
    if has_table.is_none() {
        return Ok(0);
    }
    db.conn()
        .query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            [],
            |row| row.get(0),
        )
        .at(db.path())
}

/// Applies every migration newer than the database's version, up to `target`; returns
/// whether one of them asks for the derived tables to be rebuilt.
///
/// Refuses (without writing) a database newer than this binary.
pub fn migrate_to(conn: &mut Connection, path: &str, target: i64) -> Result<bool, StoreError> {
    let found = current_version(Db::new(conn, path))?;
    if found > latest_version() {
        return Err(StoreError::NewerDatabase {
            path: path.to_owned(),
            found,
            supported: latest_version(),
        });
    }
    let mut rebuild = false;
    for migration in MIGRATIONS {
        if migration.version <= found || migration.version > target {
            continue;
        }
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .at(path)?;
        // Another process may have migrated while this one waited for the write lock.
        let now_found = current_version(Db::new(&tx, path))?;
        if now_found >= migration.version {
            tx.commit().at(path)?;
            continue;
        }
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                 version    INTEGER PRIMARY KEY,
                 name       TEXT NOT NULL,
                 applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
             );",
        )
        .at(path)?;
        tx.execute_batch(migration.sql).at(path)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES (?1, ?2)",
            rusqlite::params![migration.version, migration.name],
        )
        .at(path)?;
        // A brand-new database has nothing to rebuild. Otherwise the pending rebuild is
        // recorded with the migration, so that a process killed before the rebuild finishes
        // leaves it to the next open rather than a database with empty derived tables.
        if migration.rebuild_derived && found > 0 {
            set_rebuild_pending(Db::new(&tx, path), true)?;
            abandon_stepped_rebuilds(Db::new(&tx, path))?;
        }
        tx.commit().at(path)?;
    }
    rebuild |= rebuild_pending(Db::new(conn, path))?;
    Ok(rebuild)
}

/// Applies every pending migration; returns whether the derived tables need a rebuild.
pub fn migrate(conn: &mut Connection, path: &str) -> Result<bool, StoreError> {
    migrate_to(conn, path, latest_version())
}
