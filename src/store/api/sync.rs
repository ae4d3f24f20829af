//! The sync marks of remote archives (`store/sync.rs`): what `remote/` reads and records
//! around a push or a pull.

use crate::model::ids::SessionId;
use crate::store::sql;
use crate::store::sync::{self, PushCandidate, SyncOrigin};
use crate::store::types::StoredEntry;
use crate::store::{Result, SessionStore};

impl SessionStore {
    /// Returns the local sessions (all, or `only`) with entries `remote` has not acknowledged:
    /// one query on this database, no remote round trip.
    pub fn push_candidates(
        &self,
        remote: &str,
        only: Option<&SessionId>,
    ) -> Result<Vec<PushCandidate>> {
        self.read(|db| sync::push_candidates(db, remote, only))
    }

    /// Returns at most `limit` entries of a session with `seq >= from_seq`, in seq order.
    pub fn entries_from(
        &self,
        session: &SessionId,
        from_seq: i64,
        limit: usize,
    ) -> Result<Vec<StoredEntry>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            sql::entries_from(db, sid, from_seq, i64::try_from(limit).unwrap_or(i64::MAX))?
                .into_iter()
                .map(|row| Self::stored(db.path(), row))
                .collect()
        })
    }

    /// Records that `remote` holds every entry of `session` below `pushed_seq` (never moves a
    /// mark back).
    pub fn set_push_mark(&self, remote: &str, session: &SessionId, pushed_seq: i64) -> Result<()> {
        self.write(|db| sync::set_push_mark(db, remote, session, pushed_seq))
    }

    /// Returns the horizon of the last completed pull from `remote`.
    pub fn pull_mark(&self, remote: &str) -> Result<Option<String>> {
        self.read(|db| sync::pull_mark(db, remote))
    }

    /// Records the horizon of a completed pull from `remote`.
    pub fn set_pull_mark(&self, remote: &str, mark: &str) -> Result<()> {
        self.write(|db| sync::set_pull_mark(db, remote, mark))
    }

    /// Returns where a session came from, if it was pulled from a remote.
    pub fn sync_origin(&self, session: &SessionId) -> Result<Option<SyncOrigin>> {
        self.read(|db| sync::origin(db, session))
    }

    /// Records where a pulled session came from and how far it was pulled.
    pub fn put_sync_origin(&self, session: &SessionId, origin: &SyncOrigin) -> Result<()> {
        self.write(|db| sync::put_origin(db, session, origin))
    }

    /// Forgets the push and pull marks of a remote that was removed.
    pub fn forget_remote(&self, remote: &str) -> Result<()> {
        self.write(|db| sync::forget_remote(db, remote))
    }

    /// Whether a published session with this id is stored.
    pub fn has_session(&self, session: &SessionId) -> Result<bool> {
        self.read(|db| sync::session_exists(db, session))
    }
}
