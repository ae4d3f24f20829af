//! `StoreError`: what can go wrong in the store, with what a caller needs to decide.

use std::path::PathBuf;

use crate::model::{EntryId, SessionId};

/// An error from the session store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database was written by a newer pi; it is left untouched.
    #[error(
        "{path}: the database has schema version {found}, newer than this pi supports ({supported}); upgrade pi or use --db to choose another database"
    )]
    NewerDatabase {
        /// The database file.
        path: String,
        /// The schema version found in the file.
        found: i64,
        /// The newest schema version this binary knows.
        supported: i64,
    },
    /// No session matches the argument.
    #[error("no session matches '{query}'; `pi sessions list --all` shows them")]
    SessionNotFound {
        /// The id or prefix that was looked up.
        query: String,
    },
    /// A prefix matches more than one session.
    #[error("'{prefix}' matches {} sessions; give more of the id", candidates.len())]
    AmbiguousSession {
        /// The prefix that was looked up.
        prefix: String,
        /// The matching session ids.
        candidates: Vec<SessionId>,
    },
    /// No entry with this id in the session.
    #[error("session {session} has no entry '{id}'")]
    EntryNotFound {
        /// The session searched.
        session: SessionId,
        /// The missing entry id.
        id: EntryId,
    },
    /// A session with this id already exists.
    #[error("a session with id {id} already exists")]
    SessionExists {
        /// The id.
        id: SessionId,
    },
    /// A file-system operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The reader pool could not hand out a connection.
    #[error("{path}: cannot open a reader connection: {source}")]
    Pool {
        /// The database file.
        path: String,
        /// The underlying error.
        #[source]
        source: r2d2::Error,
    },
    /// SQLite reported an error.
    #[error("{path}: {source}")]
    Sqlite {
        /// The database file.
        path: String,
        /// The underlying error.
        #[source]
        source: rusqlite::Error,
    },
    /// A re-imported file names an entry id the session stores with different bytes; the
    /// import was rolled back.
    #[error(
        "line {line}: entry '{id}' is stored in session {session} with different content; the file was not imported (`pi import --as-new` imports it as a new session)"
    )]
    ImportConflict {
        /// The session the file's header names.
        session: SessionId,
        /// The 1-based line number in the file.
        line: usize,
        /// The conflicting entry id.
        id: EntryId,
    },
    /// The lines of a file stopped arriving before its end (the reading side failed); the
    /// import was rolled back.
    #[error("{file}: the import was abandoned and nothing was stored: {reason}")]
    ImportAborted {
        /// The file being imported.
        file: String,
        /// What went wrong on the reading side.
        reason: String,
    },
    /// Writing an export failed (a closed pipe included).
    #[error("cannot write the export: {source}")]
    Output {
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A stored line could not be re-serialised for an export or a renamed header.
    #[error("{0}")]
    Jsonl(#[from] crate::jsonl::JsonlError),
    /// The stored data breaks an invariant the store relies on.
    #[error("{path}: {message}")]
    Corrupt {
        /// The database file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// Attaches the database path to SQLite errors.
pub(crate) trait SqliteContext<T> {
    /// Wraps a `rusqlite` error with the database path.
    fn at(self, path: &str) -> Result<T, StoreError>;
}

impl<T> SqliteContext<T> for Result<T, rusqlite::Error> {
    fn at(self, path: &str) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Sqlite {
            path: path.to_owned(),
            source,
        })
    }
}
