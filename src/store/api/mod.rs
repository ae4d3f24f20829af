//! [`SessionStore`]: the store's one handle — its connections, the transaction helpers every
//! operation runs in, and (one file per concern) the operations: sessions and appends
//! (`sessions.rs`), leaf and reads (`reads.rs`), fork and raw lines (`fork.rs`), writer
//! leases (`leases.rs`), imported files (`imported.rs`), import and export
//! (`interchange.rs`), maintenance (`maintenance.rs`) and search (`search.rs`). Nothing below
//! `api` names `SessionStore`: the modules under it work on a [`Db`], which the transaction
//! helpers hand their closures.

mod fork;
mod imported;
mod interchange;
pub(crate) mod leases;
pub(crate) mod maintenance;
mod merge;
mod reads;
mod search;
mod sessions;
mod sync;

use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{Connection, TransactionBehavior};

use crate::model::ids::SessionId;
use crate::support::clock::Clock;
use crate::support::ids::IdSource;

use crate::store::db::Db;
use crate::store::error::SqliteContext;
use crate::store::sql::{self};
use crate::store::types::*;
use crate::store::{Result, StoreError, lease, open};

/// The SQLite session store; cheap to clone (shared connections).
#[derive(Debug, Clone)]
pub struct SessionStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    conns: open::Connections,
    clock: Arc<dyn Clock>,
    ids: Arc<IdSource>,
    /// The writer leases this store holds (see `lease.rs`).
    leases: lease::LeaseRegistry,
    /// Write transactions committed through this store (diagnostics, benchmarks).
    commits: std::sync::atomic::AtomicU64,
}

enum ReadConn<'a> {
    Pooled(r2d2::PooledConnection<r2d2_sqlite::SqliteConnectionManager>),
    Writer(MutexGuard<'a, Connection>),
}

impl std::ops::Deref for ReadConn<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        match self {
            Self::Pooled(conn) => conn,
            Self::Writer(conn) => conn,
        }
    }
}

/// Page cache (KiB) of the writer during a bulk write. SQLite's default of 2 MiB cannot hold
/// the index pages that random entry ids touch (`entries_id`, `entries_parent`) plus the
/// full-text index's segments, so in a large import every such page went to the WAL, was read
/// back and written again: 1.5 GB read and 1.3 GB written for a 250 MB file with the default,
/// a third less with this (`docs/BENCHMARKS.md`, "Interchange").
const BULK_CACHE_KIB: i64 = 32 * 1024;

fn lock(mutex: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic while holding the lock rolled its transaction back (the guard dropped it), so the
    // connection itself is still usable.
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl SessionStore {
    /// Opens (creating and migrating as needed) the store.
    pub fn open(config: StoreConfig) -> Result<Self> {
        let conns = open::open(&config.location, config.busy_timeout)?;
        let needs_rebuild = conns.needs_rebuild;
        let merges_recorded = conns.merges_recorded;
        let store = Self::with_connections(conns, config);
        if needs_rebuild {
            store.rebuild_derived_if_pending()?;
        }
        if merges_recorded {
            store.roll_back_abandoned_merges()?;
        }
        Ok(store)
    }

    /// Opens the store for reading only when that is all a command needs: one read-only
    /// connection, no writer and no reader pool (see `open::open_read_only`). Falls back to
    /// [`Self::open`] for an in-memory store, a missing database file or pending migrations.
    /// A write through the returned store fails with [`StoreError::ReadOnly`].
    pub fn open_read_only(config: StoreConfig) -> Result<Self> {
        match open::open_read_only(&config.location, config.busy_timeout)? {
            Some(conns) => Ok(Self::with_connections(conns, config)),
            None => Self::open(config),
        }
    }

    fn with_connections(conns: open::Connections, config: StoreConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                conns,
                clock: config.clock,
                ids: config.ids,
                leases: lease::LeaseRegistry::default(),
                commits: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// Returns the database path (or `:memory:`), for messages.
    pub fn display_path(&self) -> &str {
        &self.inner.conns.display
    }

    /// Returns the clock the store stamps entries with.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// Returns the id source the store draws new ids from.
    pub fn ids(&self) -> &Arc<IdSource> {
        &self.inner.ids
    }

    fn path(&self) -> &str {
        &self.inner.conns.display
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction on the writer connection.
    pub(crate) fn write<T>(&self, f: impl FnOnce(Db<'_>) -> Result<T>) -> Result<T> {
        let path = self.path();
        let mut conn = lock(&self.inner.conns.writer);
        self.transaction(&mut conn, path, f)
    }

    /// Runs `f` like [`Self::write`], with a page cache of [`BULK_CACHE_KIB`] for the
    /// transaction; the connection's own cache size is restored afterwards, whatever the
    /// outcome. For writes of many rows at once (an import).
    pub(crate) fn write_bulk<T>(&self, f: impl FnOnce(Db<'_>) -> Result<T>) -> Result<T> {
        let path = self.path();
        let mut conn = lock(&self.inner.conns.writer);
        let previous: i64 = conn
            .query_row("PRAGMA cache_size", [], |row| row.get(0))
            .at(path)?;
        conn.execute_batch(&format!("PRAGMA cache_size = -{BULK_CACHE_KIB}"))
            .at(path)?;
        let out = self.transaction(&mut conn, path, f);
        let restored = conn
            .execute_batch(&format!("PRAGMA cache_size = {previous}"))
            .at(path);
        let out = out?;
        restored?;
        Ok(out)
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction on `conn` (the locked writer) and counts
    /// the commit.
    fn transaction<T>(
        &self,
        conn: &mut Connection,
        path: &str,
        f: impl FnOnce(Db<'_>) -> Result<T>,
    ) -> Result<T> {
        self.check_wal()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .at(path)?;
        let out = f(Db::new(&tx, path))?;
        tx.commit().at(path)?;
        self.inner
            .commits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A commit into a `-wal` file another program deleted "succeeds" into a file nobody
        // will read again: reported as not saved.
        self.check_wal()?;
        Ok(out)
    }

    /// Fails with [`StoreError::WalLost`] once the `-wal` file this process writes through was
    /// deleted or replaced.
    fn check_wal(&self) -> Result<()> {
        match &self.inner.conns.wal {
            Some(watch) if !watch.still_ours() => Err(StoreError::WalLost {
                path: self.path().to_owned(),
                wal: watch.path.display().to_string(),
            }),
            _ => Ok(()),
        }
    }

    /// Copies the write-ahead log into the database file and truncates it
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`): after a bulk write, so that the WAL does not keep
    /// its size, and at a clean close (the store's last handle dropped does it too). Returns
    /// whether every frame was copied (`false` when another process's read kept some; they are
    /// copied by a later checkpoint). Nothing to do for an in-memory or read-only store.
    pub fn checkpoint(&self) -> Result<bool> {
        if self.inner.conns.wal.is_none() {
            return Ok(true);
        }
        self.check_wal()?;
        let conn = lock(&self.inner.conns.writer);
        open::checkpoint_truncate(&conn, self.inner.conns.busy_timeout).at(self.path())
    }

    /// Returns how many write transactions this store has committed since it was opened
    /// (each one durable: `synchronous=FULL`). Diagnostics and benchmarks use it to count the
    /// commits an operation costs.
    pub fn commit_count(&self) -> u64 {
        self.inner
            .commits
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction that writes an existing session, after
    /// resolving its `sid` and checking its writer lease.
    fn write_session<T>(
        &self,
        session: &SessionId,
        f: impl FnOnce(Db<'_>, i64) -> Result<T>,
    ) -> Result<T> {
        self.write(|db| {
            let sid = Self::sid(db, session)?;
            self.guard_session_write(db, sid, session)?;
            f(db, sid)
        })
    }

    /// Checks, inside a write transaction, that this store may write session `sid`: fails
    /// with `SessionHeld` while another process's live lease holds it, and with `LeaseLost`
    /// when this store held it and was taken over. Every write to an existing session calls
    /// it (new write paths outside this file too, such as an import into a stored session).
    pub(crate) fn guard_session_write(
        &self,
        db: Db<'_>,
        sid: i64,
        session: &SessionId,
    ) -> Result<()> {
        lease::guard_write(db, sid, session, &self.inner.leases)
    }

    /// Runs `f` in one read transaction (a consistent snapshot) on a reader connection.
    pub(crate) fn read<T>(&self, f: impl FnOnce(Db<'_>) -> Result<T>) -> Result<T> {
        self.with_reader(|db| {
            let tx = db.conn().unchecked_transaction().at(db.path())?;
            let out = f(Db::new(&tx, db.path()))?;
            tx.finish().at(db.path())?;
            Ok(out)
        })
    }

    /// Runs `f` on a reader connection outside any transaction (for statements such as
    /// `VACUUM INTO` that make their own).
    pub(crate) fn with_reader<T>(&self, f: impl FnOnce(Db<'_>) -> Result<T>) -> Result<T> {
        let path = self.path();
        // Once the `-wal` file was deleted under this process, only the writer still reads the
        // frames it committed (through its open descriptor): a new reader would open a new,
        // empty file under the old name.
        let wal_lost = self
            .inner
            .conns
            .wal
            .as_ref()
            .is_some_and(|watch| watch.lost.load(std::sync::atomic::Ordering::SeqCst));
        let conn = match &self.inner.conns.readers {
            _ if wal_lost => ReadConn::Writer(lock(&self.inner.conns.writer)),
            Some(pool) => ReadConn::Pooled(pool.get().map_err(|source| StoreError::Pool {
                path: path.to_owned(),
                source,
            })?),
            None => ReadConn::Writer(lock(&self.inner.conns.writer)),
        };
        f(Db::new(&conn, path))
    }

    fn sid(db: Db<'_>, session: &SessionId) -> Result<i64> {
        sql::sid_of(db, session.as_str())?.ok_or_else(|| StoreError::SessionNotFound {
            query: session.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::StoreLocation;
    use crate::support::clock::SystemClock;

    fn memory_store() -> SessionStore {
        SessionStore::open(StoreConfig {
            location: StoreLocation::Memory,
            clock: Arc::new(SystemClock),
            ids: Arc::new(IdSource::seeded(1)),
            busy_timeout: Duration::from_secs(1),
        })
        .unwrap()
    }

    fn cache_size(store: &SessionStore) -> i64 {
        lock(&store.inner.conns.writer)
            .query_row("PRAGMA cache_size", [], |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn a_bulk_write_has_a_large_cache_and_restores_the_connection_s_own() {
        let store = memory_store();
        let before = cache_size(&store);
        assert_ne!(before, -BULK_CACHE_KIB);
        let inside: i64 = store
            .write_bulk(|db| {
                db.conn()
                    .query_row("PRAGMA cache_size", [], |row| row.get(0))
                    .at(db.path())
            })
            .unwrap();
        assert_eq!(inside, -BULK_CACHE_KIB);
        assert_eq!(cache_size(&store), before);
        // A failed transaction (rolled back) restores it too.
        let failed: Result<()> = store.write_bulk(|db| db.batch("SELECT * FROM no_such_table"));
        assert!(failed.is_err());
        assert_eq!(cache_size(&store), before);
    }

    #[test]
    fn a_full_day_of_search_documents_spills_into_the_next() {
        use crate::store::search::{Doc, docid};
        let store = memory_store();
        let ts = 1_748_077_205_165;
        let day = docid::day_of_ms(ts);
        let doc = Doc {
            role: "assistant",
            kind: "thinking",
            text: "spilled over".into(),
        };
        // The documents' session (the totals row references it).
        let session = store
            .create_session(&crate::store::NewSession {
                cwd: "/spill".into(),
                parent_session: None,
            })
            .unwrap();
        let ids: Vec<i64> = store
            .write(|db| {
                assert_eq!(sql::sid_of(db, session.id.as_str())?, Some(1));
                let mut ids = Vec::new();
                crate::store::search::fts::insert_search_doc_into(db, &[crate::store::search::fts::Index::Live], 1, 1, &doc, ts)?;
                crate::store::search::fts::insert_search_doc_into(db, &[crate::store::search::fts::Index::Live], 1, 2, &doc, ts)?;
                // Fill the day up to its last order.
                db.execute_uncached("INSERT INTO search_docs (docid, sid, seq, role, kind, ts) VALUES (?1, 1, 3, 'user', 'text', ?2)",
                    rusqlite::params![docid::make(day, docid::PER_DAY - 1, 1), ts])?;
                crate::store::search::fts::insert_search_doc_into(db, &[crate::store::search::fts::Index::Live], 1, 4, &doc, ts)?;
                ids.extend(db.rows_uncached(
                    "SELECT docid FROM search_docs ORDER BY seq",
                    [],
                    |row| row.get::<_, i64>(0),
                )?);
                Ok(ids)
            })
            .unwrap();
        assert_eq!(ids.len(), 4);
        assert_eq!((docid::day(ids[0]), docid::order(ids[0])), (day, 0));
        assert_eq!((docid::day(ids[1]), docid::order(ids[1])), (day, 1));
        assert!((docid::length(ids[1]) - 2.0).abs() < 0.1);
        assert_eq!((docid::day(ids[3]), docid::order(ids[3])), (day + 1, 0));
    }
}
