//! The SQLite session store: every session is an append-only tree of entries with a persisted
//! leaf pointer (`../shared/DESIGN.md`, "Storage").
//!
//! [`SessionStore`] offers what the reference `SessionManager` offers — create, open, continue,
//! append every entry type, branch, reset, branch with summary, path, tree, labels, names,
//! fork, delete — plus listing from derived statistics. Each write is one `BEGIN IMMEDIATE`
//! transaction: entry row, leaf move and derived rows, all or nothing. Every write to an
//! existing session first checks the session's writer lease in that same transaction
//! (`lease.rs`): a live writer elsewhere makes it fail with `SessionHeld`, a lease taken over
//! from this process with `LeaseLost`.
//!
//! Invariants: `store` knows nothing of agents or providers; no `rusqlite` type appears in its
//! public API (errors aside); entries are never updated, and deleted only with their session.
//! The methods are blocking: async callers run them in `spawn_blocking`.

pub mod context;
pub mod derived;
mod error;
pub mod imported;
pub mod interchange;
pub mod lease;
pub mod maintenance;
pub mod migrate;
mod open;
pub mod search;
pub mod sql;
pub mod testing;
pub mod tree;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};

use crate::model::ModelRef;
use crate::model::entry::{BranchSummaryEntry, CompactionEntry, Entry, EntryKind, SessionHeader};
use crate::model::ids::{EntryId, SessionId};
use crate::model::message::{AgentMessage, Usage, UserContent};
use crate::support::clock::Clock;
use crate::support::ids::IdSource;

pub use context::SessionContext;
pub use error::StoreError;
pub use imported::{FileMark, FileRecord};
pub use interchange::{
    AppendOutcome, ExportSummary, ImportConflict, ImportMode, ImportOptions, ImportReport,
    ImportStatus, QuarantinedLine,
};
pub use lease::{
    Heartbeat, HeartbeatStatus, Lease, LeaseAttempt, LeaseConfig, LeaseHolder, spawn_heartbeat,
};
pub use open::{StoreLocation, create_private_dir};
pub use tree::TreeNode;

use error::SqliteContext;
use sql::EntryInsert;

/// Result alias for the store.
pub type Result<T> = std::result::Result<T, StoreError>;

/// How to open a store.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Database file or in-memory.
    pub location: StoreLocation,
    /// Time source for entry timestamps and session creation.
    pub clock: Arc<dyn Clock>,
    /// Randomness for new ids.
    pub ids: Arc<IdSource>,
    /// How long a write waits for another process's write lock.
    pub busy_timeout: Duration,
}

/// Token totals of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenTotals {
    /// Input tokens.
    pub input: i64,
    /// Output tokens.
    pub output: i64,
    /// Cache read tokens.
    pub cache_read: i64,
    /// Cache write tokens.
    pub cache_write: i64,
}

/// A session as listed: header fields and derived statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// Session id.
    pub id: SessionId,
    /// Working directory.
    pub cwd: String,
    /// Creation time (header timestamp).
    pub created: String,
    /// The session this one was forked or cloned from.
    pub parent_session: Option<String>,
    /// Display name (the last `session_info`).
    pub name: Option<String>,
    /// Text of the first user message.
    pub first_message: Option<String>,
    /// Timestamp of the last appended entry (the header's when there is none).
    pub last_activity: String,
    /// Number of entries.
    pub entries: i64,
    /// Number of `message` entries.
    pub messages: i64,
    /// Token totals over assistant messages.
    pub tokens: TokenTotals,
    /// Summed `usage.cost.total`.
    pub cost: f64,
}

impl SessionSummary {
    fn from_row(row: sql::SessionRow) -> Self {
        Self {
            id: SessionId::new(row.id),
            cwd: row.cwd,
            created: row.created_at,
            parent_session: row.parent_session,
            name: row.name,
            first_message: row.first_message,
            last_activity: row.last_activity,
            entries: row.entries,
            messages: row.messages,
            tokens: TokenTotals {
                input: row.input,
                output: row.output,
                cache_read: row.cache_read,
                cache_write: row.cache_write,
            },
            cost: row.cost,
        }
    }
}

/// An entry as stored: its append sequence, typed view and exact bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEntry {
    /// Append sequence in the session (0-based).
    pub seq: i64,
    /// The typed view.
    pub entry: Entry,
    /// The line bytes (no newline).
    pub payload: Vec<u8>,
}

/// A line read from a file: its exact bytes (no newline) and its typed view.
#[derive(Debug, Clone, PartialEq)]
pub struct RawEntry {
    /// The line bytes as stored and exported.
    pub payload: Vec<u8>,
    /// The typed view of the same line.
    pub entry: Entry,
}

impl RawEntry {
    /// Parses a line; `None` unless it is an entry object.
    pub fn parse(line: &[u8]) -> Option<Self> {
        Some(Self {
            entry: Entry::parse(line)?,
            payload: line.to_vec(),
        })
    }
}

/// Which sessions to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListScope {
    /// Every session.
    All,
    /// Sessions whose `cwd` equals this directory.
    Cwd(String),
}

/// Where to rebuild a context or a path from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeafSelector {
    /// The persisted leaf.
    Current,
    /// The latest entry with this id.
    Entry(EntryId),
}

/// A new session's header fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    /// Working directory.
    pub cwd: String,
    /// The session it was forked or cloned from.
    pub parent_session: Option<String>,
}

/// The SQLite session store; cheap to clone (shared connections).
#[derive(Debug, Clone)]
pub struct SessionStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
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
        let store = Self::with_connections(conns, config);
        if needs_rebuild {
            store.rebuild_derived_if_pending()?;
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
    pub(crate) fn write<T>(&self, f: impl FnOnce(&Connection, &str) -> Result<T>) -> Result<T> {
        let path = self.path();
        let mut conn = lock(&self.inner.conns.writer);
        self.transaction(&mut conn, path, f)
    }

    /// Runs `f` like [`Self::write`], with a page cache of [`BULK_CACHE_KIB`] for the
    /// transaction; the connection's own cache size is restored afterwards, whatever the
    /// outcome. For writes of many rows at once (an import).
    pub(crate) fn write_bulk<T>(
        &self,
        f: impl FnOnce(&Connection, &str) -> Result<T>,
    ) -> Result<T> {
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
        f: impl FnOnce(&Connection, &str) -> Result<T>,
    ) -> Result<T> {
        self.check_wal()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .at(path)?;
        let out = f(&tx, path)?;
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
        f: impl FnOnce(&Connection, &str, i64) -> Result<T>,
    ) -> Result<T> {
        self.write(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            self.guard_session_write(conn, path, sid, session)?;
            f(conn, path, sid)
        })
    }

    /// Checks, inside a write transaction, that this store may write session `sid`: fails
    /// with `SessionHeld` while another process's live lease holds it, and with `LeaseLost`
    /// when this store held it and was taken over. Every write to an existing session calls
    /// it (new write paths outside this file too, such as an import into a stored session).
    pub(crate) fn guard_session_write(
        &self,
        conn: &Connection,
        path: &str,
        sid: i64,
        session: &SessionId,
    ) -> Result<()> {
        lease::guard_write(conn, path, sid, session, &self.inner.leases)
    }

    /// Runs `f` in one read transaction (a consistent snapshot) on a reader connection.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection, &str) -> Result<T>) -> Result<T> {
        self.with_reader(|conn, path| {
            let tx = conn.unchecked_transaction().at(path)?;
            let out = f(&tx, path)?;
            tx.finish().at(path)?;
            Ok(out)
        })
    }

    /// Runs `f` on a reader connection outside any transaction (for statements such as
    /// `VACUUM INTO` that make their own).
    pub(crate) fn with_reader<T>(
        &self,
        f: impl FnOnce(&Connection, &str) -> Result<T>,
    ) -> Result<T> {
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
        f(&conn, path)
    }

    fn sid(conn: &Connection, path: &str, session: &SessionId) -> Result<i64> {
        sql::sid_of(conn, path, session.as_str())?.ok_or_else(|| StoreError::SessionNotFound {
            query: session.to_string(),
        })
    }

    // ----- sessions -------------------------------------------------------------------------

    /// Creates an empty session (a v3 header, no entries, leaf before the first entry).
    pub fn create_session(&self, new: &NewSession) -> Result<SessionSummary> {
        let now = self.inner.clock.now_ms();
        let header = SessionHeader::new(
            SessionId::generate(&self.inner.ids, now),
            crate::support::clock::iso_from_ms(now),
            new.cwd.clone(),
            new.parent_session.clone(),
        );
        self.write(|conn, path| {
            let sid = Self::insert_header(conn, path, &header, header.to_line().as_bytes())?;
            Self::summary_by_sid(conn, path, sid)
        })
    }

    /// Inserts a session row for a header; fails if the id exists.
    pub(crate) fn insert_header(
        conn: &Connection,
        path: &str,
        header: &SessionHeader,
        header_bytes: &[u8],
    ) -> Result<i64> {
        if sql::sid_of(conn, path, header.id.as_str())?.is_some() {
            return Err(StoreError::SessionExists {
                id: header.id.clone(),
            });
        }
        sql::insert_session(
            conn,
            path,
            header.id.as_str(),
            &header.cwd,
            &header.timestamp,
            header.parent_session.as_deref(),
            header_bytes,
        )
    }

    fn summary_by_sid(conn: &Connection, path: &str, sid: i64) -> Result<SessionSummary> {
        sql::session_by_sid(conn, path, sid)?
            .map(SessionSummary::from_row)
            .ok_or_else(|| StoreError::SessionNotFound {
                query: format!("#{sid}"),
            })
    }

    /// Returns a session's summary.
    pub fn session(&self, session: &SessionId) -> Result<SessionSummary> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            Self::summary_by_sid(conn, path, sid)
        })
    }

    /// Returns the session header as stored (the line export writes first).
    pub fn header_bytes(&self, session: &SessionId) -> Result<Vec<u8>> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            sql::header(conn, path, sid)
        })
    }

    /// Resolves a full session id or a prefix matching exactly one session.
    pub fn resolve(&self, query: &str) -> Result<SessionId> {
        self.read(|conn, path| {
            if sql::sid_of(conn, path, query)?.is_some() {
                return Ok(SessionId::new(query));
            }
            let matches = if query.is_empty() {
                Vec::new()
            } else {
                sql::sessions_with_prefix(conn, path, query, 50)?
            };
            match matches.len() {
                0 => Err(StoreError::SessionNotFound {
                    query: query.to_owned(),
                }),
                1 => Ok(SessionId::new(matches[0].clone())),
                _ => Err(StoreError::AmbiguousSession {
                    prefix: query.to_owned(),
                    candidates: matches.into_iter().map(SessionId::new).collect(),
                }),
            }
        })
    }

    /// Returns the session with the latest activity whose `cwd` equals `cwd`.
    pub fn most_recent(&self, cwd: &str) -> Result<Option<SessionId>> {
        self.read(|conn, path| {
            Ok(sql::list_sessions(conn, path, Some(cwd))?
                .into_iter()
                .next()
                .map(|row| SessionId::new(row.id)))
        })
    }

    /// Lists sessions, latest activity first.
    pub fn list(&self, scope: &ListScope) -> Result<Vec<SessionSummary>> {
        self.read(|conn, path| {
            let cwd = match scope {
                ListScope::All => None,
                ListScope::Cwd(cwd) => Some(cwd.as_str()),
            };
            Ok(sql::list_sessions(conn, path, cwd)?
                .into_iter()
                .map(SessionSummary::from_row)
                .collect())
        })
    }

    /// Deletes a session and all its entries (the only delete there is).
    pub fn delete_session(&self, session: &SessionId) -> Result<()> {
        self.write_session(session, |conn, path, sid| {
            derived::delete_session(conn, path, sid)
        })
    }

    // ----- appends --------------------------------------------------------------------------

    /// Appends an entry of any kind as a child of the leaf and makes it the leaf.
    pub fn append(&self, session: &SessionId, kind: EntryKind) -> Result<StoredEntry> {
        self.write_session(session, |conn, path, sid| {
            Self::append_in(conn, path, sid, &self.inner, kind)
        })
    }

    fn append_in(
        conn: &Connection,
        path: &str,
        sid: i64,
        inner: &Inner,
        kind: EntryKind,
    ) -> Result<StoredEntry> {
        let leaf_seq = sql::leaf(conn, path, sid)?;
        let parent_id = match leaf_seq {
            Some(seq) => sql::id_by_seq(conn, path, sid, seq)?.flatten(),
            None => None,
        };
        let mut lookup_error = None;
        let id = EntryId::generate(&inner.ids, |candidate| {
            match sql::id_taken(conn, path, sid, candidate) {
                Ok(taken) => taken,
                Err(error) => {
                    lookup_error = Some(error);
                    true
                }
            }
        });
        if let Some(error) = lookup_error {
            return Err(error);
        }
        let timestamp = inner.clock.now_iso();
        let entry = Entry {
            id: Some(id),
            parent_id: parent_id.map(EntryId::new),
            kind: kind.stamped(&timestamp),
            timestamp,
            extra: serde_json::Map::new(),
        };
        let payload = entry.to_line().into_bytes();
        let seq = sql::next_seq(conn, path, sid)?;
        let row = EntryInsert {
            sid,
            seq,
            id: entry.id.as_ref().map(EntryId::as_str),
            parent_id: entry.parent_id.as_ref().map(EntryId::as_str),
            type_name: entry.type_name(),
            timestamp: &entry.timestamp,
            payload: &payload,
        };
        derived::insert(conn, path, &row, &entry)?;
        sql::set_leaf(conn, path, sid, Some(seq))?;
        Ok(StoredEntry {
            seq,
            entry,
            payload,
        })
    }

    /// Appends a `message` entry.
    pub fn append_message(
        &self,
        session: &SessionId,
        message: AgentMessage,
    ) -> Result<StoredEntry> {
        self.append(session, EntryKind::Message(message))
    }

    /// Appends a `thinking_level_change` entry.
    pub fn append_thinking_level(&self, session: &SessionId, level: &str) -> Result<StoredEntry> {
        self.append(
            session,
            EntryKind::ThinkingLevelChange {
                thinking_level: level.to_owned(),
            },
        )
    }

    /// Appends a `model_change` entry.
    pub fn append_model_change(&self, session: &SessionId, model: ModelRef) -> Result<StoredEntry> {
        self.append(session, EntryKind::ModelChange(model))
    }

    /// Appends a `compaction` entry.
    pub fn append_compaction(
        &self,
        session: &SessionId,
        compaction: CompactionEntry,
    ) -> Result<StoredEntry> {
        self.append(session, EntryKind::Compaction(compaction))
    }

    /// Appends a `custom` entry (extension state, never in the context).
    pub fn append_custom(
        &self,
        session: &SessionId,
        custom_type: &str,
        data: Option<serde_json::Value>,
    ) -> Result<StoredEntry> {
        self.append(
            session,
            EntryKind::Custom {
                custom_type: custom_type.to_owned(),
                data,
            },
        )
    }

    /// Appends a `custom_message` entry (an extension message in the context).
    pub fn append_custom_message(
        &self,
        session: &SessionId,
        custom_type: &str,
        content: UserContent,
        display: bool,
        details: Option<serde_json::Value>,
    ) -> Result<StoredEntry> {
        self.append(
            session,
            EntryKind::CustomMessage {
                custom_type: custom_type.to_owned(),
                content,
                display,
                details,
            },
        )
    }

    /// Appends a `label` entry; `None` or an empty label clears. The target must exist.
    pub fn append_label(
        &self,
        session: &SessionId,
        target: &EntryId,
        label: Option<&str>,
    ) -> Result<StoredEntry> {
        self.write_session(session, |conn, path, sid| {
            if sql::latest_seq_of_id(conn, path, sid, target.as_str())?.is_none() {
                return Err(StoreError::EntryNotFound {
                    session: session.clone(),
                    id: target.clone(),
                });
            }
            let kind = EntryKind::Label {
                target_id: Some(target.clone()),
                label: label.map(str::to_owned),
            };
            Self::append_in(conn, path, sid, &self.inner, kind)
        })
    }

    /// Appends a `session_info` entry (trimmed, as the reference writes it).
    pub fn append_session_info(&self, session: &SessionId, name: &str) -> Result<StoredEntry> {
        self.append(
            session,
            EntryKind::SessionInfo {
                name: Some(name.trim().to_owned()),
            },
        )
    }

    // ----- leaf -----------------------------------------------------------------------------

    /// Moves the leaf to an existing entry (the latest line with that id).
    pub fn branch(&self, session: &SessionId, id: &EntryId) -> Result<()> {
        self.write_session(session, |conn, path, sid| {
            let seq = Self::seq_of(conn, path, sid, session, id)?;
            sql::set_leaf(conn, path, sid, Some(seq))
        })
    }

    /// Moves the leaf to before the first entry (the next append is a new root).
    pub fn reset_leaf(&self, session: &SessionId) -> Result<()> {
        self.write_session(session, |conn, path, sid| {
            sql::set_leaf(conn, path, sid, None)
        })
    }

    /// Moves the leaf to `target` (or before the first entry) and appends a `branch_summary`
    /// child there, in one transaction. `fromId` is the leaf left (1.6.0
    /// `branchWithSummary`: `this.leafId ?? "root"`).
    pub fn branch_with_summary(
        &self,
        session: &SessionId,
        target: Option<&EntryId>,
        summary: String,
        details: Option<serde_json::Value>,
        from_hook: Option<bool>,
    ) -> Result<StoredEntry> {
        self.branch_with_summary_usage(session, target, summary, details, None, from_hook)
    }

    /// As [`Self::branch_with_summary`], with the usage of the summary request.
    pub fn branch_with_summary_usage(
        &self,
        session: &SessionId,
        target: Option<&EntryId>,
        summary: String,
        details: Option<serde_json::Value>,
        usage: Option<Usage>,
        from_hook: Option<bool>,
    ) -> Result<StoredEntry> {
        self.write_session(session, |conn, path, sid| {
            let seq = match target {
                Some(id) => Some(Self::seq_of(conn, path, sid, session, id)?),
                None => None,
            };
            let from_id = match sql::leaf(conn, path, sid)? {
                Some(leaf) => sql::id_by_seq(conn, path, sid, leaf)?.flatten(),
                None => None,
            };
            sql::set_leaf(conn, path, sid, seq)?;
            let kind = EntryKind::BranchSummary(BranchSummaryEntry {
                from_id: from_id.unwrap_or_else(|| "root".to_owned()),
                summary,
                details,
                usage,
                from_hook,
            });
            Self::append_in(conn, path, sid, &self.inner, kind)
        })
    }

    fn seq_of(
        conn: &Connection,
        path: &str,
        sid: i64,
        session: &SessionId,
        id: &EntryId,
    ) -> Result<i64> {
        sql::latest_seq_of_id(conn, path, sid, id.as_str())?.ok_or_else(|| {
            StoreError::EntryNotFound {
                session: session.clone(),
                id: id.clone(),
            }
        })
    }

    /// Returns the leaf entry (`None`: before the first entry).
    pub fn leaf(&self, session: &SessionId) -> Result<Option<StoredEntry>> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            match sql::leaf(conn, path, sid)? {
                Some(seq) => Self::stored_by_seq(conn, path, sid, seq),
                None => Ok(None),
            }
        })
    }

    // ----- reads ----------------------------------------------------------------------------

    fn stored(path: &str, row: sql::EntryRow) -> Result<StoredEntry> {
        let entry = Entry::parse(&row.payload).ok_or_else(|| StoreError::Corrupt {
            path: path.to_owned(),
            message: format!("entry #{} is not an entry object", row.seq),
        })?;
        Ok(StoredEntry {
            seq: row.seq,
            entry,
            payload: row.payload,
        })
    }

    fn stored_by_seq(
        conn: &Connection,
        path: &str,
        sid: i64,
        seq: i64,
    ) -> Result<Option<StoredEntry>> {
        match sql::entry_by_seq(conn, path, sid, seq)? {
            Some(row) => Self::stored(path, row).map(Some),
            None => Ok(None),
        }
    }

    /// Returns the entry with this id (the latest line with it).
    pub fn entry(&self, session: &SessionId, id: &EntryId) -> Result<Option<StoredEntry>> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            match sql::latest_seq_of_id(conn, path, sid, id.as_str())? {
                Some(seq) => Self::stored_by_seq(conn, path, sid, seq),
                None => Ok(None),
            }
        })
    }

    /// Returns the direct children of an entry, in append order (one per id, the latest line).
    pub fn children(&self, session: &SessionId, id: &EntryId) -> Result<Vec<StoredEntry>> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            let mut out = Vec::new();
            for row in sql::entries_with_parent(conn, path, sid, id.as_str())? {
                let latest = match &row.id {
                    Some(child_id) => sql::latest_seq_of_id(conn, path, sid, child_id)?,
                    None => Some(row.seq),
                };
                if latest == Some(row.seq) {
                    out.push(Self::stored(path, row)?);
                }
            }
            Ok(out)
        })
    }

    /// Returns every entry in append order.
    pub fn entries(&self, session: &SessionId) -> Result<Vec<StoredEntry>> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            sql::all_entries(conn, path, sid)?
                .into_iter()
                .map(|row| Self::stored(path, row))
                .collect()
        })
    }

    fn resolve_leaf(
        conn: &Connection,
        path: &str,
        sid: i64,
        session: &SessionId,
        leaf: &LeafSelector,
    ) -> Result<Option<i64>> {
        match leaf {
            LeafSelector::Current => sql::leaf(conn, path, sid),
            LeafSelector::Entry(id) => Self::seq_of(conn, path, sid, session, id).map(Some),
        }
    }

    /// Returns the path from the root to the leaf (or to the selected entry).
    pub fn branch_path(
        &self,
        session: &SessionId,
        leaf: &LeafSelector,
    ) -> Result<Vec<StoredEntry>> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            let Some(leaf_seq) = Self::resolve_leaf(conn, path, sid, session, leaf)? else {
                return Ok(Vec::new());
            };
            let seqs = Self::path_seqs(conn, path, sid, leaf_seq)?;
            let mut out = Vec::with_capacity(seqs.len());
            for seq in seqs {
                out.extend(Self::stored_by_seq(conn, path, sid, seq)?);
            }
            Ok(out)
        })
    }

    /// Returns the seqs of the path root → `leaf_seq` (cycle-safe).
    fn path_seqs(conn: &Connection, path: &str, sid: i64, leaf_seq: i64) -> Result<Vec<i64>> {
        let session = sql::session_by_sid(conn, path, sid)?;
        if session.as_ref().is_some_and(|row| row.irregular) {
            return Self::plain_walk(conn, path, sid, leaf_seq);
        }
        Ok(sql::walk_path(conn, path, sid, leaf_seq, 0)?
            .into_iter()
            .map(|row| row.seq)
            .collect())
    }

    /// Returns the seqs on the path root → `leaf_seq` as a set (plain walk).
    pub(crate) fn path_set(
        conn: &Connection,
        path: &str,
        sid: i64,
        leaf_seq: i64,
    ) -> Result<HashSet<i64>> {
        Ok(Self::plain_walk(conn, path, sid, leaf_seq)?
            .into_iter()
            .collect())
    }

    /// Walks parent ids from `leaf_seq` (a lookup takes the latest line with an id), stopping
    /// at a root, an unknown parent, or an entry already visited.
    fn plain_walk(conn: &Connection, path: &str, sid: i64, leaf_seq: i64) -> Result<Vec<i64>> {
        let mut links = sql::all_links(conn, path, sid)?;
        links.sort_unstable_by_key(|(seq, _, _)| *seq);
        let mut latest: HashMap<&str, usize> = HashMap::with_capacity(links.len());
        for (idx, (_, id, _)) in links.iter().enumerate() {
            if let Some(id) = id {
                latest.insert(id.as_str(), idx);
            }
        }
        let mut out = Vec::new();
        let mut visited = HashSet::new();
        let mut current = links
            .binary_search_by_key(&leaf_seq, |(seq, _, _)| *seq)
            .ok();
        while let Some(idx) = current {
            if !visited.insert(idx) {
                break;
            }
            let (seq, _, parent) = &links[idx];
            out.push(*seq);
            current = parent
                .as_deref()
                .and_then(|parent| latest.get(parent).copied());
        }
        out.reverse();
        Ok(out)
    }

    /// Rebuilds the reference `SessionContext` at the leaf (or the selected entry).
    ///
    /// Reads only the path from the leaf up to where the last compaction's kept range begins,
    /// and only the payloads the messages need; model and thinking level come from the
    /// per-entry path state. Sessions with repeated ids or forward parent references use the
    /// plain walk.
    pub fn context(&self, session: &SessionId, leaf: &LeafSelector) -> Result<SessionContext> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            let Some(leaf_seq) = Self::resolve_leaf(conn, path, sid, session, leaf)? else {
                return Ok(SessionContext::empty());
            };
            let irregular = sql::session_by_sid(conn, path, sid)?.is_some_and(|row| row.irregular);
            if irregular {
                Self::context_plain(conn, path, sid, leaf_seq)
            } else {
                Self::context_fast(conn, path, sid, leaf_seq)
            }
        })
    }

    /// Rebuilds the context by the reference's own walk over the whole path, ignoring the
    /// derived path state: the slow reference the fast rebuild must agree with (`db check`,
    /// tests).
    pub fn context_by_plain_walk(
        &self,
        session: &SessionId,
        leaf: &LeafSelector,
    ) -> Result<SessionContext> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            match Self::resolve_leaf(conn, path, sid, session, leaf)? {
                Some(leaf_seq) => Self::context_plain(conn, path, sid, leaf_seq),
                None => Ok(SessionContext::empty()),
            }
        })
    }

    /// Walks from `leaf_seq` up to where the last compaction's kept range begins (the first
    /// kept entry when it is an ancestor, else the compaction; the root without a compaction);
    /// returns the leaf's path state and the rows in path order.
    fn kept_tail(
        conn: &Connection,
        path: &str,
        sid: i64,
        leaf_seq: i64,
    ) -> Result<(sql::PathState, Vec<sql::WalkRow>)> {
        let corrupt = |what: &str| StoreError::Corrupt {
            path: path.to_owned(),
            message: format!("missing path state for {what}"),
        };
        let state =
            sql::path_state(conn, path, sid, leaf_seq)?.ok_or_else(|| corrupt("the leaf"))?;
        let mut min_depth = 0;
        let mut expected_first_kept = None;
        if let Some(compaction_seq) = state.compaction_seq {
            let compaction_state = sql::path_state(conn, path, sid, compaction_seq)?
                .ok_or_else(|| corrupt("a compaction"))?;
            min_depth = compaction_state.depth;
            let payload = sql::payload_by_seq(conn, path, sid, compaction_seq)?.unwrap_or_default();
            let first_kept = crate::support::json::parse_lenient(&payload)
                .ok()
                .and_then(|value| {
                    value
                        .get("firstKeptEntryId")
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_owned)
                });
            if let Some(first_kept) = first_kept
                && let Some(first_seq) = sql::latest_seq_of_id(conn, path, sid, &first_kept)?
                && let Some(first_state) = sql::path_state(conn, path, sid, first_seq)?
                && first_state.depth < compaction_state.depth
            {
                min_depth = first_state.depth;
                expected_first_kept = Some(first_seq);
            }
        }
        let mut rows = sql::walk_path(conn, path, sid, leaf_seq, min_depth)?;
        // When the first kept entry is not an ancestor, only the summary and what follows the
        // compaction count, so drop the rows before it.
        if let Some(first_seq) = expected_first_kept
            && rows.first().map(|row| row.seq) != Some(first_seq)
            && let Some(compaction_seq) = state.compaction_seq
        {
            rows.retain(|row| row.seq >= compaction_seq);
        }
        Ok((state, rows))
    }

    /// Returns the part of the path a compaction plan needs: from where the last compaction's
    /// kept range begins (or the root) to the leaf, as stored entries. Planning a compaction
    /// on this tail gives the same plan as on the whole path, and it reads only the context.
    pub fn compaction_window(&self, session: &SessionId) -> Result<Vec<StoredEntry>> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            let Some(leaf_seq) = sql::leaf(conn, path, sid)? else {
                return Ok(Vec::new());
            };
            let irregular = sql::session_by_sid(conn, path, sid)?.is_some_and(|row| row.irregular);
            let seqs: Vec<i64> = if irregular {
                Self::plain_walk(conn, path, sid, leaf_seq)?
            } else {
                Self::kept_tail(conn, path, sid, leaf_seq)?
                    .1
                    .into_iter()
                    .map(|row| row.seq)
                    .collect()
            };
            let mut out = Vec::with_capacity(seqs.len());
            for seq in seqs {
                out.extend(Self::stored_by_seq(conn, path, sid, seq)?);
            }
            Ok(out)
        })
    }

    fn context_fast(
        conn: &Connection,
        path: &str,
        sid: i64,
        leaf_seq: i64,
    ) -> Result<SessionContext> {
        let (state, rows) = Self::kept_tail(conn, path, sid, leaf_seq)?;
        let path_rows: Vec<context::PathRow> = rows
            .into_iter()
            .map(|row| context::PathRow {
                seq: row.seq,
                id: row.id,
                type_name: row.type_name,
                payload: row.payload,
                flags: Some(row.flags),
            })
            .collect();
        let mut settings = context::PathSettings::default();
        if let Some(model_seq) = state.model_seq
            && let Some(row) = sql::entry_by_seq(conn, path, sid, model_seq)?
        {
            settings.model = context::model_of(&row.type_name, &row.payload);
        }
        if let Some(thinking_seq) = state.thinking_seq
            && let Some(payload) = sql::payload_by_seq(conn, path, sid, thinking_seq)?
        {
            settings.thinking_level = context::thinking_of(&payload);
        }
        Ok(context::build(path_rows, settings))
    }

    fn context_plain(
        conn: &Connection,
        path: &str,
        sid: i64,
        leaf_seq: i64,
    ) -> Result<SessionContext> {
        let seqs = Self::plain_walk(conn, path, sid, leaf_seq)?;
        let mut rows = Vec::with_capacity(seqs.len());
        for seq in seqs {
            let Some(row) = sql::entry_by_seq(conn, path, sid, seq)? else {
                continue;
            };
            let wanted = context::needs_payload_for_messages(&row.type_name)
                || context::needs_payload_for_settings(&row.type_name);
            rows.push(context::PathRow {
                seq: row.seq,
                id: row.id,
                type_name: row.type_name,
                payload: wanted.then_some(row.payload),
                flags: None,
            });
        }
        let settings = context::scan_settings(&rows);
        Ok(context::build(rows, settings))
    }

    /// Returns a session's message counts and token and cost totals over all its entries (the
    /// reference's `getSessionStats`: every branch, compacted history and omitted attempts
    /// included).
    pub fn session_totals(&self, session: &SessionId) -> Result<sql::SessionTotals> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            sql::session_totals(conn, path, sid)
        })
    }

    /// The level the latest `thinking_level_change` on the path to the current leaf records
    /// (`None`: the path has none). 1.6.0 compares it with the live level when a run starts
    /// and records the live one when they differ (`_recordThinkingLevel`).
    pub fn branch_thinking_level(&self, session: &SessionId) -> Result<Option<String>> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            let Some(leaf_seq) =
                Self::resolve_leaf(conn, path, sid, session, &LeafSelector::Current)?
            else {
                return Ok(None);
            };
            let irregular = sql::session_by_sid(conn, path, sid)?.is_some_and(|row| row.irregular);
            let thinking_seq = if irregular {
                let mut found = None;
                for seq in Self::plain_walk(conn, path, sid, leaf_seq)? {
                    if sql::entry_by_seq(conn, path, sid, seq)?
                        .is_some_and(|row| row.type_name == "thinking_level_change")
                    {
                        found = Some(seq);
                    }
                }
                found
            } else {
                sql::path_state(conn, path, sid, leaf_seq)?.and_then(|state| state.thinking_seq)
            };
            Ok(match thinking_seq {
                Some(seq) => sql::payload_by_seq(conn, path, sid, seq)?
                    .and_then(|payload| context::thinking_of(&payload)),
                None => None,
            })
        })
    }

    /// Returns every system message on the branch to the leaf (or the selected entry), root
    /// first, as JSON text — those before a compaction too (1.6.0 restores the tool loadout
    /// from them). Follows the chain of `entry_path.system_seq`: the cost is the number of
    /// system messages, not the length of the branch.
    pub fn branch_system_messages(
        &self,
        session: &SessionId,
        leaf: &LeafSelector,
    ) -> Result<Vec<String>> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            let Some(leaf_seq) = Self::resolve_leaf(conn, path, sid, session, leaf)? else {
                return Ok(Vec::new());
            };
            let irregular = sql::session_by_sid(conn, path, sid)?.is_some_and(|row| row.irregular);
            let mut seqs = Vec::new();
            if irregular {
                for seq in Self::plain_walk(conn, path, sid, leaf_seq)? {
                    seqs.push(seq);
                }
            } else {
                let mut current =
                    sql::path_state(conn, path, sid, leaf_seq)?.and_then(|state| state.system_seq);
                while let Some(seq) = current {
                    seqs.push(seq);
                    let state = sql::path_state(conn, path, sid, seq)?;
                    current = match state.and_then(|state| state.parent_seq) {
                        Some(parent) => {
                            sql::path_state(conn, path, sid, parent)?.and_then(|s| s.system_seq)
                        }
                        None => None,
                    };
                }
                seqs.reverse();
            }
            let mut out = Vec::with_capacity(seqs.len());
            for seq in seqs {
                let Some(row) = sql::entry_by_seq(conn, path, sid, seq)? else {
                    continue;
                };
                if row.type_name != "message" {
                    continue;
                }
                let path_row = context::PathRow {
                    seq: row.seq,
                    id: row.id,
                    type_name: row.type_name,
                    payload: Some(row.payload),
                    flags: None,
                };
                if let Some(message) = context::system_message_text(&path_row) {
                    out.push(message);
                }
            }
            Ok(out)
        })
    }

    /// Returns the tree flattened in pre-order, with labels.
    pub fn tree(&self, session: &SessionId) -> Result<Vec<TreeNode>> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            let shapes = sql::all_shapes(conn, path, sid)?;
            let inputs: Vec<tree::TreeInput> = shapes
                .into_iter()
                .map(|shape| tree::TreeInput {
                    seq: shape.seq,
                    id: shape.id,
                    parent_id: shape.parent_id,
                    type_name: shape.type_name,
                    timestamp: shape.timestamp,
                })
                .collect();
            let labels: HashMap<String, (String, String)> = sql::labels(conn, path, sid)?
                .into_iter()
                .map(|row| (row.target_id, (row.label, row.label_ts)))
                .collect();
            Ok(tree::build(&inputs, &labels))
        })
    }

    /// Returns the current labels `(target, label, label timestamp)` in the reference's order.
    pub fn labels(&self, session: &SessionId) -> Result<Vec<(EntryId, String, String)>> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            Ok(sql::labels(conn, path, sid)?
                .into_iter()
                .map(|row| (EntryId::new(row.target_id), row.label, row.label_ts))
                .collect())
        })
    }

    /// Returns the current label of an entry.
    pub fn label(&self, session: &SessionId, id: &EntryId) -> Result<Option<String>> {
        self.read(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            sql::label_of(conn, path, sid, id.as_str())
        })
    }

    /// Returns the session name (the last `session_info`, trimmed; empty clears).
    pub fn session_name(&self, session: &SessionId) -> Result<Option<String>> {
        Ok(self.session(session)?.name)
    }

    // ----- fork -----------------------------------------------------------------------------

    /// Forks the path root → `at` (the leaf when `None` is not wanted, pass the leaf id) into
    /// a new session, as the reference's `createBranchedSession`: entries copied unchanged
    /// without `label` entries, then the current labels of path entries re-created as new
    /// label entries chained at the end with their original timestamps. `at = None` creates an
    /// empty session. The new header's `parentSession` is the source session id.
    pub fn fork(
        &self,
        session: &SessionId,
        at: Option<&EntryId>,
        cwd: Option<&str>,
    ) -> Result<SessionSummary> {
        let now = self.inner.clock.now_ms();
        self.write(|conn, path| {
            let sid = Self::sid(conn, path, session)?;
            let source = Self::summary_by_sid(conn, path, sid)?;
            let header = SessionHeader::new(
                SessionId::generate(&self.inner.ids, now),
                crate::support::clock::iso_from_ms(now),
                cwd.map_or_else(|| source.cwd.clone(), str::to_owned),
                Some(session.to_string()),
            );
            let new_sid = Self::insert_header(conn, path, &header, header.to_line().as_bytes())?;
            let Some(at) = at else {
                return Self::summary_by_sid(conn, path, new_sid);
            };
            let leaf_seq = Self::seq_of(conn, path, sid, session, at)?;
            let seqs = Self::path_seqs(conn, path, sid, leaf_seq)?;
            let mut copied_ids: HashSet<String> = HashSet::new();
            let mut last_id: Option<String> = None;
            let mut seq = 0;
            for source_seq in seqs {
                let Some(row) = sql::entry_by_seq(conn, path, sid, source_seq)? else {
                    continue;
                };
                if row.type_name == "label" {
                    continue;
                }
                let stored = Self::stored(path, row)?;
                let insert = EntryInsert {
                    sid: new_sid,
                    seq,
                    id: stored.entry.id.as_ref().map(EntryId::as_str),
                    parent_id: stored.entry.parent_id.as_ref().map(EntryId::as_str),
                    type_name: stored.entry.type_name(),
                    timestamp: &stored.entry.timestamp,
                    payload: &stored.payload,
                };
                derived::insert(conn, path, &insert, &stored.entry)?;
                if let Some(id) = &stored.entry.id {
                    copied_ids.insert(id.to_string());
                }
                last_id = stored.entry.id.as_ref().map(EntryId::to_string);
                seq += 1;
            }
            for label in sql::labels(conn, path, sid)? {
                if !copied_ids.contains(&label.target_id) {
                    continue;
                }
                let id =
                    EntryId::generate(&self.inner.ids, |candidate| copied_ids.contains(candidate));
                let entry = Entry {
                    id: Some(id.clone()),
                    parent_id: last_id.clone().map(EntryId::new),
                    timestamp: label.label_ts.clone(),
                    kind: EntryKind::Label {
                        target_id: Some(EntryId::new(label.target_id.clone())),
                        label: Some(label.label.clone()),
                    },
                    extra: serde_json::Map::new(),
                };
                let payload = entry.to_line().into_bytes();
                let insert = EntryInsert {
                    sid: new_sid,
                    seq,
                    id: Some(id.as_str()),
                    parent_id: entry.parent_id.as_ref().map(EntryId::as_str),
                    type_name: "label",
                    timestamp: &entry.timestamp,
                    payload: &payload,
                };
                derived::insert(conn, path, &insert, &entry)?;
                copied_ids.insert(id.to_string());
                last_id = Some(id.to_string());
                seq += 1;
            }
            if seq > 0 {
                sql::set_leaf(conn, path, new_sid, Some(seq - 1))?;
            }
            Self::summary_by_sid(conn, path, new_sid)
        })
    }

    /// Copies a whole session (every entry, unchanged) into a new session for `cwd` whose
    /// `parentSession` is the source id — the reference's `--fork` (`forkFrom`).
    pub fn copy_session(&self, source: &SessionId, cwd: &str) -> Result<SessionSummary> {
        let now = self.inner.clock.now_ms();
        self.write(|conn, path| {
            let sid = Self::sid(conn, path, source)?;
            let header = SessionHeader::new(
                SessionId::generate(&self.inner.ids, now),
                crate::support::clock::iso_from_ms(now),
                cwd.to_owned(),
                Some(source.to_string()),
            );
            let new_sid = Self::insert_header(conn, path, &header, header.to_line().as_bytes())?;
            let entries = sql::all_entries(conn, path, sid)?
                .into_iter()
                .map(|row| {
                    Self::stored(path, row).map(|stored| RawEntry {
                        payload: stored.payload,
                        entry: stored.entry,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Self::append_raw_in(conn, path, new_sid, &entries)?;
            Self::summary_by_sid(conn, path, new_sid)
        })
    }

    // ----- raw lines (interchange) ----------------------------------------------------------

    /// Stores a session from lines read elsewhere (a file), byte for byte, in one transaction:
    /// the header bytes, then every entry in order; the leaf becomes the last entry. Ids and
    /// parents are kept as they are (duplicates and orphans included).
    pub fn insert_raw_session(
        &self,
        header: &SessionHeader,
        header_bytes: &[u8],
        entries: &[RawEntry],
    ) -> Result<SessionSummary> {
        self.write(|conn, path| {
            let sid = Self::insert_header(conn, path, header, header_bytes)?;
            Self::append_raw_in(conn, path, sid, entries)?;
            Self::summary_by_sid(conn, path, sid)
        })
    }

    /// Appends lines read elsewhere to an existing session, byte for byte, in one transaction;
    /// the leaf becomes the last of them (unchanged when `entries` is empty).
    pub fn append_raw(&self, session: &SessionId, entries: &[RawEntry]) -> Result<SessionSummary> {
        self.write_session(session, |conn, path, sid| {
            Self::append_raw_in(conn, path, sid, entries)?;
            Self::summary_by_sid(conn, path, sid)
        })
    }

    fn append_raw_in(conn: &Connection, path: &str, sid: i64, entries: &[RawEntry]) -> Result<()> {
        let first_seq = sql::next_seq(conn, path, sid)?;
        let mut last = None;
        for (seq, raw) in (first_seq..).zip(entries) {
            let row = EntryInsert {
                sid,
                seq,
                id: raw.entry.id.as_ref().map(EntryId::as_str),
                parent_id: raw.entry.parent_id.as_ref().map(EntryId::as_str),
                type_name: raw.entry.type_name(),
                timestamp: &raw.entry.timestamp,
                payload: &raw.payload,
            };
            derived::insert(conn, path, &row, &raw.entry)?;
            last = Some(seq);
        }
        if last.is_some() {
            sql::set_leaf(conn, path, sid, last)?;
        }
        Ok(())
    }

    // ----- maintenance ----------------------------------------------------------------------

    /// Recomputes every derived row (path state, labels, statistics, usage, the full-text
    /// index) from the entries, in one transaction (`pi db reindex`).
    pub fn rebuild_derived(&self) -> Result<()> {
        self.write_bulk(rebuild_all_derived)
    }

    /// The number of documents in the full-text index (0 when it has none).
    pub fn search_index_docs(&self) -> Result<i64> {
        self.read(|conn, path| Ok(search::fts::totals(conn, path)?.map_or(0, |(docs, _)| docs)))
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
        // reports completion (the 1.25 M-document index takes ≈ 40 steps).
        for _ in 0..100_000 {
            if !self.write(|conn, path| {
                search::fts::merge_search_index_step(conn, path, MERGE_STEP_PAGES)
            })? {
                break;
            }
        }
        Ok(true)
    }

    /// Rebuilds the derived tables if a migration left that pending (checked again inside the
    /// write transaction: another process opening at the same time may have done it).
    fn rebuild_derived_if_pending(&self) -> Result<()> {
        self.write_bulk(|conn, path| {
            if migrate::rebuild_pending(conn, path)? {
                rebuild_all_derived(conn, path)?;
            }
            Ok(())
        })
    }
}

/// The share of the full-text index a bulk load must have added for
/// [`SessionStore::optimize_search_index_after_load`] to merge it (the merge of the 1.25 M
/// documents of the search benchmark takes ≈ 6 s, their import minutes).
pub const OPTIMIZE_GROWTH: f64 = 0.1;

/// Leaf pages (4 KiB) merged per write transaction by
/// [`SessionStore::optimize_search_index_after_load`].
pub const MERGE_STEP_PAGES: i64 = 2000;

/// Recomputes every derived row from the entries, merges the full-text index into one
/// segment, and clears the pending-rebuild mark.
fn rebuild_all_derived(conn: &Connection, path: &str) -> Result<()> {
    sql::clear_all_derived(conn, path)?;
    for sid in sql::all_sids(conn, path)? {
        derived::rebuild_session(conn, path, sid)?;
    }
    search::fts::optimize_search_index(conn, path)?;
    migrate::set_rebuild_pending(conn, path, false)
}

#[cfg(test)]
mod tests {
    use super::*;
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
            .write_bulk(|conn, path| {
                conn.query_row("PRAGMA cache_size", [], |row| row.get(0))
                    .at(path)
            })
            .unwrap();
        assert_eq!(inside, -BULK_CACHE_KIB);
        assert_eq!(cache_size(&store), before);
        // A failed transaction (rolled back) restores it too.
        let failed: Result<()> = store
            .write_bulk(|conn, path| conn.execute_batch("SELECT * FROM no_such_table").at(path));
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
        let ids: Vec<i64> = store
            .write(|conn, path| {
                let mut ids = Vec::new();
                search::fts::insert_search_doc(conn, path, 1, 1, &doc, ts)?;
                search::fts::insert_search_doc(conn, path, 1, 2, &doc, ts)?;
                // Fill the day up to its last order.
                conn.execute(
                    "INSERT INTO search_docs (docid, sid, seq, role, kind, ts) VALUES (?1, 1, 3, 'user', 'text', ?2)",
                    rusqlite::params![docid::make(day, docid::PER_DAY - 1, 1), ts],
                )
                .at(path)?;
                search::fts::insert_search_doc(conn, path, 1, 4, &doc, ts)?;
                let mut stmt = conn
                    .prepare("SELECT docid FROM search_docs ORDER BY seq")
                    .at(path)?;
                let rows = stmt.query_map([], |row| row.get(0)).at(path)?;
                for row in rows {
                    ids.push(row.at(path)?);
                }
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
