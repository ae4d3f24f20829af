//! What this database knows of the remote archives it syncs with (migration 0011,
//! docs/SYNC.md): per remote and session the entries the remote acknowledged
//! (`sync_push_marks`), per remote the horizon of the last pull (`sync_pull_marks`), and the
//! sessions that came from a remote (`sync_origins`).
//!
//! Invariant: the store keeps these facts and knows nothing of PostgreSQL; deciding what to
//! push, pull or refuse is `remote/`'s business.

use rusqlite::{OptionalExtension, params};

use crate::model::ids::SessionId;
use crate::store::Result;
use crate::store::db::Db;
use crate::store::error::SqliteContext;

/// A local session with entries a remote has not acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushCandidate {
    /// The session.
    pub session: SessionId,
    /// Every entry with a smaller seq is acknowledged by the remote.
    pub pushed_seq: i64,
    /// The session's next append sequence (one past its last entry).
    pub next_seq: i64,
}

/// Where a pulled session came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncOrigin {
    /// The remote's name in this agent dir.
    pub remote: String,
    /// Who pushed it.
    pub user: String,
    /// The machine it was pushed from.
    pub host: String,
    /// The remote's sequence up to which the local session holds its entries.
    pub pulled_seq: i64,
}

/// The sessions with unacknowledged entries, of every session or of `only`: local sessions
/// only (not pulled ones), published (not staged), not being merged into or deleted.
pub(crate) fn push_candidates(
    db: Db<'_>,
    remote: &str,
    only: Option<&SessionId>,
) -> Result<Vec<PushCandidate>> {
    db.rows(
        "SELECT s.id, COALESCE(m.pushed_seq, 0), st.next_seq
           FROM sessions AS s JOIN session_stats AS st ON st.sid = s.sid
           LEFT JOIN sync_push_marks AS m ON m.remote = ?1 AND m.session_id = s.id
          WHERE s.deleting = 0 AND substr(s.id, 1, 1) <> char(1)
            AND (?2 IS NULL OR s.id = ?2)
            AND st.next_seq > COALESCE(m.pushed_seq, 0)
            AND NOT EXISTS (SELECT 1 FROM sync_origins AS o WHERE o.session_id = s.id)
            AND NOT EXISTS (SELECT 1 FROM merging_imports AS mi WHERE mi.sid = s.sid)
          ORDER BY s.sid",
        params![remote, only.map(SessionId::as_str)],
        |row| {
            Ok(PushCandidate {
                session: SessionId::new(row.get::<_, String>(0)?),
                pushed_seq: row.get(1)?,
                next_seq: row.get(2)?,
            })
        },
    )
}

/// Moves a session's push mark forward (never back).
pub(crate) fn set_push_mark(
    db: Db<'_>,
    remote: &str,
    session: &SessionId,
    pushed_seq: i64,
) -> Result<()> {
    db.execute(
        "INSERT INTO sync_push_marks (remote, session_id, pushed_seq) VALUES (?1, ?2, ?3)
         ON CONFLICT (remote, session_id)
         DO UPDATE SET pushed_seq = max(pushed_seq, excluded.pushed_seq)",
        params![remote, session.as_str(), pushed_seq],
    )?;
    Ok(())
}

/// The horizon of the last completed pull from a remote.
pub(crate) fn pull_mark(db: Db<'_>, remote: &str) -> Result<Option<String>> {
    db.conn()
        .query_row(
            "SELECT mark FROM sync_pull_marks WHERE remote = ?1",
            params![remote],
            |row| row.get(0),
        )
        .optional()
        .at(db.path())
}

/// Records the horizon of a completed pull.
pub(crate) fn set_pull_mark(db: Db<'_>, remote: &str, mark: &str) -> Result<()> {
    db.execute(
        "INSERT INTO sync_pull_marks (remote, mark) VALUES (?1, ?2)
         ON CONFLICT (remote) DO UPDATE SET mark = excluded.mark",
        params![remote, mark],
    )?;
    Ok(())
}

/// Where a session came from, if it was pulled.
pub(crate) fn origin(db: Db<'_>, session: &SessionId) -> Result<Option<SyncOrigin>> {
    db.conn()
        .query_row(
            "SELECT remote, user_name, host, pulled_seq FROM sync_origins WHERE session_id = ?1",
            params![session.as_str()],
            |row| {
                Ok(SyncOrigin {
                    remote: row.get(0)?,
                    user: row.get(1)?,
                    host: row.get(2)?,
                    pulled_seq: row.get(3)?,
                })
            },
        )
        .optional()
        .at(db.path())
}

/// Records (or updates) where a session came from.
pub(crate) fn put_origin(db: Db<'_>, session: &SessionId, origin: &SyncOrigin) -> Result<()> {
    db.execute(
        "INSERT INTO sync_origins (session_id, remote, user_name, host, pulled_seq)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (session_id) DO UPDATE SET remote = excluded.remote,
             user_name = excluded.user_name, host = excluded.host,
             pulled_seq = excluded.pulled_seq",
        params![
            session.as_str(),
            origin.remote,
            origin.user,
            origin.host,
            origin.pulled_seq
        ],
    )?;
    Ok(())
}

/// Forgets a remote's marks (its pulled sessions keep their origin).
pub(crate) fn forget_remote(db: Db<'_>, remote: &str) -> Result<()> {
    db.execute(
        "DELETE FROM sync_push_marks WHERE remote = ?1",
        params![remote],
    )?;
    db.execute(
        "DELETE FROM sync_pull_marks WHERE remote = ?1",
        params![remote],
    )?;
    Ok(())
}

/// Whether a published session with this id is stored.
pub(crate) fn session_exists(db: Db<'_>, session: &SessionId) -> Result<bool> {
    let found: Option<i64> = db
        .conn()
        .query_row(
            "SELECT 1 FROM sessions WHERE id = ?1 AND deleting = 0",
            params![session.as_str()],
            |row| row.get(0),
        )
        .optional()
        .at(db.path())?;
    Ok(found.is_some())
}
