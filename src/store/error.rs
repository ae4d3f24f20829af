//! `StoreError`: what can go wrong in the store, with what a caller needs to decide.
//!
//! SQLite and file-system failures are classified here into the faults a user can act on —
//! disk full, read-only file or directory, busy past the timeout, damaged file — each with a
//! one-line message that names the file and says what to do. Invariant: classifying only
//! looks (at the error code, free space, the file-size limit, permissions); it never touches
//! the database.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::ErrorCode;
use rusqlite::ffi;

use crate::model::{EntryId, SessionId};

/// Result alias for the store.
pub type Result<T> = std::result::Result<T, StoreError>;

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
    /// The file a backup was asked to create already exists; nothing was written.
    #[error(
        "{}: the file exists; `pi db backup` never overwrites a file — remove it or choose another name",
        path.display()
    )]
    BackupExists {
        /// The backup file named.
        path: PathBuf,
    },
    /// Writing a backup failed; nothing was left under the backup's name.
    #[error("cannot write the backup {}: {detail}; no backup file was left", path.display())]
    Backup {
        /// The backup file named.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// Writing an export failed (a closed pipe included).
    #[error("cannot write the export: {source}")]
    Output {
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The temporary spool of a merge's lines could not be written or read back
    /// (`store/spool.rs`); nothing of the merge was kept.
    #[error(
        "cannot keep the lines to merge in a temporary file ({source}); nothing of this import was kept"
    )]
    Spool {
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A merge into a session was cut short: the session was removed, replaced or taken over
    /// by another process meanwhile; what the merge had written was removed.
    #[error(
        "session {session} was removed or taken over by another process while this import merged a file into it; nothing of this import was kept — run it again"
    )]
    MergeInterrupted {
        /// The session merged into.
        session: SessionId,
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
    /// Another process holds the session's writer lease; nothing was written.
    #[error("{path}: session {session} is held by another writer ({holder}); {}", holder.advice())]
    SessionHeld {
        /// The database file.
        path: String,
        /// The session.
        session: SessionId,
        /// Who holds it.
        holder: Box<LeaseHolder>,
    },
    /// This process held the session's lease and another process took it over; nothing more
    /// is written to the session by this process.
    #[error(
        "{path}: this process no longer holds session {session}{}; nothing more was written to it — reopen the session (or fork it) to continue",
        holder.as_ref().map(|holder| format!(" (taken over by {holder})")).unwrap_or_default()
    )]
    LeaseLost {
        /// The database file.
        path: String,
        /// The session.
        session: SessionId,
        /// Who holds it now, if anyone.
        holder: Option<Box<LeaseHolder>>,
    },
    /// The disk is full or a file-size limit was reached; the write was rolled back.
    #[error(
        "{path}: cannot write: {detail}; free some space (or raise the limit) and retry — nothing from this write was saved"
    )]
    DiskFull {
        /// The database file.
        path: String,
        /// What ran out.
        detail: String,
    },
    /// The database file or its directory cannot be written.
    #[error(
        "{path}: the database is not writable ({detail}); make the file and its directory writable for this user, or choose another database with --db"
    )]
    ReadOnly {
        /// The database file.
        path: String,
        /// What is not writable.
        detail: String,
    },
    /// Another process kept the database locked for longer than the busy timeout.
    #[error(
        "{path}: the database stayed locked by another process for longer than the busy timeout; nothing was written — retry when that process is done"
    )]
    Busy {
        /// The database file.
        path: String,
    },
    /// The file is damaged or is not a pi database; it is left as it is.
    #[error(
        "{path}: the database file is damaged or is not a pi database ({detail}); it was left untouched — keep a copy, then restore a backup, salvage it with `sqlite3 FILE .recover`, or use --db for another database"
    )]
    Damaged {
        /// The database file.
        path: String,
        /// SQLite's description.
        detail: String,
    },
    /// `pi db check` found the database damaged and left a mark beside it: nothing writes to
    /// it until it is repaired (the mark is removed by a `db check` that passes).
    #[error(
        "{path}: `pi db check` found this database damaged (the mark {marker} beside it says what), so pi does not write to it; nothing from this command was saved to it — repair it: `pi db recover NEW.db` copies every session it can still read into a new database, to move into place of this one (or restore a backup); `pi db check` removes the mark once the database passes"
    )]
    MarkedDamaged {
        /// The database file.
        path: String,
        /// The mark file's name (`<db name>.damaged`, beside the database).
        marker: String,
    },
    /// Another import stored the same session while this one was staging it; what this one
    /// staged was removed.
    #[error(
        "session {session} was imported by another process while this import was writing it; nothing of this import was kept — run it again to merge the file into that session"
    )]
    ImportRaced {
        /// The session id of the file.
        session: SessionId,
    },
    /// The `-wal` file was deleted or replaced by another program while this process had the
    /// database open: what this process committed since may be only in the deleted file.
    #[error(
        "{path}: the write-ahead log {wal} was deleted or replaced by another program while pi was writing; what pi wrote may be lost with it, so pi stops writing to this database in this process — the entries of this run are saved under the agent dir's unsaved/ directory (`pi import FILE` adds them back)"
    )]
    WalLost {
        /// The database file.
        path: String,
        /// The `-wal` file.
        wal: String,
    },
}

impl StoreError {
    /// Returns the error for a failed file-system operation on `path` (part of the database
    /// at `db`), classified as disk full or read-only where it is one of those.
    pub(crate) fn io(db: &str, path: &Path, source: std::io::Error) -> Self {
        use std::io::ErrorKind;
        match source.kind() {
            ErrorKind::StorageFull | ErrorKind::FileTooLarge | ErrorKind::QuotaExceeded => {
                Self::DiskFull {
                    path: db.to_owned(),
                    detail: format!("{}: {source}", path.display()),
                }
            }
            ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => Self::ReadOnly {
                path: db.to_owned(),
                detail: format!("{}: {source}", path.display()),
            },
            _ => Self::Io {
                path: path.to_path_buf(),
                source,
            },
        }
    }
}

/// Classifies a SQLite error on the database at `path`.
pub(crate) fn classify(path: &str, source: rusqlite::Error) -> StoreError {
    let rusqlite::Error::SqliteFailure(failure, message) = &source else {
        return StoreError::Sqlite {
            path: path.to_owned(),
            source,
        };
    };
    let detail = message.clone().unwrap_or_else(|| failure.to_string());
    let owned = path.to_owned();
    match failure.code {
        ErrorCode::DiskFull => StoreError::DiskFull {
            detail: space_problem(path)
                .unwrap_or_else(|| "the disk is full or a file-size limit was reached".to_owned()),
            path: owned,
        },
        ErrorCode::ReadOnly => StoreError::ReadOnly {
            detail: read_only_detail(path, failure.extended_code),
            path: owned,
        },
        ErrorCode::PermissionDenied => StoreError::ReadOnly {
            detail: format!("permission denied: {detail}"),
            path: owned,
        },
        ErrorCode::DatabaseBusy => StoreError::Busy { path: owned },
        ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => StoreError::Damaged {
            path: owned,
            detail,
        },
        ErrorCode::CannotOpen => match not_writable(path) {
            Some(detail) => StoreError::ReadOnly {
                path: owned,
                detail,
            },
            None => StoreError::Sqlite {
                path: owned,
                source,
            },
        },
        ErrorCode::SystemIoFailure if is_write_failure(failure.extended_code) => {
            match space_problem(path) {
                Some(detail) => StoreError::DiskFull {
                    path: owned,
                    detail,
                },
                None => StoreError::Sqlite {
                    path: owned,
                    source,
                },
            }
        }
        _ => StoreError::Sqlite {
            path: owned,
            source,
        },
    }
}

/// Whether an `SQLITE_IOERR_*` code comes from writing or growing a file.
fn is_write_failure(extended_code: i32) -> bool {
    [
        ffi::SQLITE_IOERR_WRITE,
        ffi::SQLITE_IOERR_FSYNC,
        ffi::SQLITE_IOERR_DIR_FSYNC,
        ffi::SQLITE_IOERR_TRUNCATE,
        ffi::SQLITE_IOERR_SHMSIZE,
        ffi::SQLITE_IOERR_SHMMAP,
        ffi::SQLITE_IOERR_SHMOPEN,
    ]
    .contains(&extended_code)
}

/// The directory holding the database (`.` for a bare file name).
fn directory_of(path: &str) -> PathBuf {
    match Path::new(path).parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Says why a write ran out of room: a full disk, or this process's file-size limit.
fn space_problem(path: &str) -> Option<String> {
    let dir = directory_of(path);
    if let Ok(stats) = nix::sys::statvfs::statvfs(&dir) {
        let free = u128::from(stats.blocks_available()) * u128::from(stats.fragment_size());
        // SQLite needs a few pages per transaction; less than this is full for our purposes.
        if free < 256 * 1024 {
            return Some(format!("the disk holding {} is full", dir.display()));
        }
    }
    if let Ok((soft, _)) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_FSIZE)
        && soft != nix::sys::resource::RLIM_INFINITY
    {
        return Some(format!(
            "the file-size limit of this process ({soft} bytes, `ulimit -f`) was reached"
        ));
    }
    None
}

/// Says what is read-only for an `SQLITE_READONLY*` error.
fn read_only_detail(path: &str, extended_code: i32) -> String {
    if let Some(detail) = not_writable(path) {
        return detail;
    }
    match extended_code {
        ffi::SQLITE_READONLY_DIRECTORY | ffi::SQLITE_READONLY_CANTINIT => format!(
            "{} does not let this user create the -wal and -shm files",
            directory_of(path).display()
        ),
        ffi::SQLITE_READONLY_DBMOVED => "the file was moved or deleted while open".to_owned(),
        _ => "the file was opened read-only".to_owned(),
    }
}

/// Returns what is not writable for this user: the file, its `-wal` or `-shm` file (which
/// SQLite must write too, and which another program may have left read-only), or its
/// directory.
pub(crate) fn not_writable(path: &str) -> Option<String> {
    use nix::unistd::{AccessFlags, access};
    let file = Path::new(path);
    if file.exists() && access(file, AccessFlags::W_OK).is_err() {
        return Some(format!("{path} is not writable"));
    }
    for suffix in ["-wal", "-shm"] {
        let journal = format!("{path}{suffix}");
        if Path::new(&journal).exists() && access(Path::new(&journal), AccessFlags::W_OK).is_err() {
            return Some(format!(
                "{journal} is not writable for this user, and SQLite writes it with the database: `chmod 600 {journal}` (a program that read the database while it was read-only may have left it so)"
            ));
        }
    }
    // The directory matters when SQLite must create a file in it: the database, or its
    // `-wal`/`-shm` (absent after every clean close).
    let creates = [String::new(), "-wal".to_owned(), "-shm".to_owned()]
        .iter()
        .any(|suffix| !Path::new(&format!("{path}{suffix}")).exists());
    let dir = directory_of(path);
    if creates && access(&dir, AccessFlags::W_OK | AccessFlags::X_OK).is_err() {
        return Some(format!("the directory {} is not writable", dir.display()));
    }
    None
}

/// Attaches the database path to SQLite errors.
pub(crate) trait SqliteContext<T> {
    /// Wraps a `rusqlite` error with the database path.
    fn at(self, path: &str) -> std::result::Result<T, StoreError>;
}

impl<T> SqliteContext<T> for std::result::Result<T, rusqlite::Error> {
    fn at(self, path: &str) -> std::result::Result<T, StoreError> {
        self.map_err(|source| classify(path, source))
    }
}

/// Who holds a session's lease, as another process sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseHolder {
    /// What holds it, such as `pi (interactive)`.
    pub owner: String,
    /// The holder's process id.
    pub pid: u32,
    /// The holder's host name.
    pub host: String,
    /// When the lease was taken (Unix milliseconds).
    pub acquired_at_ms: i64,
    /// How long ago the holder last renewed the heartbeat.
    pub heartbeat_age: Duration,
    /// The age after which the holder's heartbeat is stale (the holder's setting).
    pub stale_after: Duration,
    /// Whether the holder's process still runs: `Some` on this host, `None` on another host
    /// (where it cannot be told).
    pub owner_alive_on_this_host: Option<bool>,
}

impl LeaseHolder {
    /// Returns true when the heartbeat is older than the holder's `stale_after`.
    pub fn is_stale(&self) -> bool {
        self.heartbeat_age >= self.stale_after
    }

    /// Returns true when the lease may be taken over now: the holder is gone on this host, or
    /// its heartbeat is stale.
    pub fn can_take_over_now(&self) -> bool {
        self.owner_alive_on_this_host == Some(false) || self.is_stale()
    }

    /// Returns how long until the lease may be taken over if the holder stops renewing it
    /// (zero when it may be taken over now).
    pub fn take_over_in(&self) -> Duration {
        if self.can_take_over_now() {
            Duration::ZERO
        } else {
            self.stale_after.saturating_sub(self.heartbeat_age)
        }
    }

    /// Returns what a one-shot command can do about it, for messages.
    pub(crate) fn advice(&self) -> String {
        if self.can_take_over_now() {
            "its holder is gone; retry".to_owned()
        } else {
            format!(
                "retry after it ends (or in {} s if it stopped responding), or continue the session in that process",
                self.take_over_in().as_secs().max(1)
            )
        }
    }
}

impl fmt::Display for LeaseHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, pid {} on {}, last heartbeat {} s ago",
            self.owner,
            self.pid,
            self.host,
            self.heartbeat_age.as_secs()
        )?;
        if self.owner_alive_on_this_host == Some(false) {
            write!(f, ", process gone")?;
        }
        Ok(())
    }
}
