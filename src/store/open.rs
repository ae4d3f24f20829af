//! Opening the database: file modes, pragmas, the single writer connection and the reader pool.
//!
//! Every connection gets `busy_timeout` and `foreign_keys=ON`; the writer also sets WAL and
//! `synchronous=FULL` (an acknowledged append survives power loss). A database newer than this
//! binary is refused before any pragma that writes (such as switching to WAL) runs.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{Connection, OpenFlags};

use crate::store::db::Db;
use crate::store::error::{SqliteContext, StoreError};
use crate::store::migrate;

/// Where the database lives.
#[derive(Debug, Clone)]
pub enum StoreLocation {
    /// A database file (created with mode 0600 if missing).
    File(PathBuf),
    /// A private in-memory database (`--no-session`), gone when the store is dropped.
    Memory,
}

/// The open connections of one store.
pub(crate) struct Connections {
    /// The path (or `:memory:`) for messages.
    pub display: String,
    /// The database file (`None` in memory).
    pub file: Option<PathBuf>,
    /// The busy timeout of the connections.
    pub busy_timeout: Duration,
    /// The process's one writer connection.
    pub writer: Mutex<Connection>,
    /// Reader connections; `None` for an in-memory database, whose reads use the writer.
    pub readers: Option<r2d2::Pool<SqliteConnectionManager>>,
    /// Whether a migration applied at open asks for the derived tables to be rebuilt.
    pub needs_rebuild: bool,
    /// Whether a merge is recorded (`merging_imports`, migration 0010): one a killed process
    /// may have left part-written, which the opened store rolls back; or a rollback's rebuild
    /// of a session's aggregates that a killed process left part-way (migration 0011).
    pub merges_recorded: bool,
    /// The `-wal` file this process writes through (`None`: in memory, or read-only), to
    /// notice it being deleted or replaced under a live process.
    pub wal: Option<WalWatch>,
}

/// The identity (device, inode) of the `-wal` file the writer opened, checked after every
/// commit: SQLite keeps writing to a deleted WAL's open descriptor, so a commit into a WAL that
/// another program removed reports success and is lost when the process ends.
#[derive(Debug)]
pub(crate) struct WalWatch {
    /// `<db>-wal`.
    pub path: PathBuf,
    /// (device, inode) when first seen; `None` until the file exists.
    seen: Mutex<Option<(u64, u64)>>,
    /// Set once the loss was seen: every later write is refused.
    pub lost: std::sync::atomic::AtomicBool,
}

impl WalWatch {
    fn new(db: &Path) -> Self {
        let watch = Self {
            path: wal_path(db),
            seen: Mutex::new(None),
            lost: std::sync::atomic::AtomicBool::new(false),
        };
        let _ = watch.still_ours();
        watch
    }

    /// Whether the `-wal` file is still the one first seen (records it the first time it
    /// exists). `false` once it was deleted or replaced.
    pub fn still_ours(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        if self.lost.load(std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        let now = fs::metadata(&self.path)
            .ok()
            .map(|meta| (meta.dev(), meta.ino()));
        let mut seen = match self.seen.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let ours = match (*seen, now) {
            (None, Some(identity)) => {
                *seen = Some(identity);
                true
            }
            (None, None) => true,
            (Some(first), Some(identity)) => first == identity,
            (Some(_), None) => false,
        };
        if !ours {
            self.lost.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        ours
    }
}

/// `<db>-wal`.
pub(crate) fn wal_path(db: &Path) -> PathBuf {
    PathBuf::from(format!("{}-wal", db.display()))
}

/// `<db>.damaged`: the mark `pi db check` leaves beside a database it found damaged.
pub(crate) fn damage_mark_path(db: &Path) -> PathBuf {
    PathBuf::from(format!("{}.damaged", db.display()))
}

/// The most the `-wal` file keeps on disk after a checkpoint reset it (SQLite truncates it to
/// this much): a bulk write no longer leaves hundreds of megabytes behind.
pub const JOURNAL_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

impl Drop for Connections {
    /// A clean close: the readers go first, then the writer copies the WAL into the database
    /// file and truncates it (`wal_checkpoint(TRUNCATE)`), so that `pi.db` alone holds every
    /// committed entry once pi has ended. (Closed last, a read-only reader cannot checkpoint,
    /// and SQLite left the data in `pi.db-wal`.) Best effort: a checkpoint that cannot run now
    /// (another process reading) leaves the WAL to the next one, which loses nothing.
    fn drop(&mut self) {
        if let Some(readers) = self.readers.take() {
            drop(readers);
            if self.wal.as_ref().is_some_and(WalWatch::still_ours) {
                let writer = match self.writer.get_mut() {
                    Ok(conn) => conn,
                    Err(poisoned) => poisoned.into_inner(),
                };
                let _ = checkpoint_truncate(writer, CHECKPOINT_WAIT);
            }
        }
    }
}

/// How long a checkpoint waits for other processes' readers and writer. A `TRUNCATE`
/// checkpoint that waits holds back new writers meanwhile, so it gives up soon: the frames it
/// could not copy stay in the WAL for the next checkpoint (nothing is lost).
pub const CHECKPOINT_WAIT: Duration = Duration::from_millis(200);

/// Runs `PRAGMA wal_checkpoint(TRUNCATE)` on `conn`, waiting at most [`CHECKPOINT_WAIT`] for
/// others, then puts back `busy_timeout`; returns whether it completed (`false` when another
/// process kept it from copying every frame in time).
pub(crate) fn checkpoint_truncate(
    conn: &Connection,
    busy_timeout: Duration,
) -> rusqlite::Result<bool> {
    conn.busy_timeout(CHECKPOINT_WAIT)?;
    let result = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
        row.get::<_, i64>(0)
    });
    conn.busy_timeout(busy_timeout)?;
    match result {
        Ok(busy) => Ok(busy == 0),
        Err(rusqlite::Error::SqliteFailure(error, _))
            if error.code == rusqlite::ErrorCode::DatabaseBusy =>
        {
            Ok(false)
        }
        Err(error) => Err(error),
    }
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("display", &self.display)
            .finish_non_exhaustive()
    }
}

/// Creates `dir` (and missing parents) with mode 0700 for the directories it creates.
pub fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    create_dir_for(&dir.display().to_string(), dir)
}

/// Creates `dir` like [`create_private_dir`], naming the database `db` in errors.
fn create_dir_for(db: &str, dir: &Path) -> Result<(), StoreError> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| StoreError::io(db, dir, source))
}

/// Prepared statements kept per connection. An append runs about 20 distinct statements (the
/// entry, its leaf, path, statistics, usage and search rows); rusqlite's default of 16 would
/// evict and re-parse some on every append.
const STATEMENT_CACHE: usize = 64;

fn init_connection(conn: &Connection, busy_timeout: Duration) -> rusqlite::Result<()> {
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.busy_timeout(busy_timeout)?;
    conn.execute_batch("PRAGMA foreign_keys = ON;")
}

/// Opens (creating if needed) the database and applies pending migrations.
pub(crate) fn open(
    location: &StoreLocation,
    busy_timeout: Duration,
) -> Result<Connections, StoreError> {
    match location {
        StoreLocation::File(path) => open_file(path, busy_timeout),
        StoreLocation::Memory => open_memory(busy_timeout),
    }
}

fn open_file(path: &Path, busy_timeout: Duration) -> Result<Connections, StoreError> {
    let display = path.display().to_string();
    let io_error = |at: &Path, source| StoreError::io(&display, at, source);
    if let Some(parent) = path.parent() {
        create_dir_for(&display, parent)?;
    }
    if !path.exists() {
        // Create the file ourselves so that it (and the WAL and SHM files SQLite derives from
        // its mode) is private to the user.
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(|source| io_error(path, source))?;
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))
            .map_err(|source| io_error(path, source))?;
    }
    // A database file this user cannot write is refused before SQLite opens it: SQLite would
    // fall back to reading it, and its readers would create the `-wal`/`-shm` files with the
    // file's read-only mode, which then break every write once the file is writable again.
    if let Some(detail) = crate::store::error::not_writable(&display) {
        return Err(StoreError::ReadOnly {
            path: display,
            detail,
        });
    }
    // A database `pi db check` found damaged is not written until it is repaired.
    let mark = damage_mark_path(path);
    if mark.exists() {
        return Err(StoreError::MarkedDamaged {
            path: display,
            marker: mark.file_name().map_or_else(
                || mark.display().to_string(),
                |name| name.to_string_lossy().into_owned(),
            ),
        });
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut writer = Connection::open_with_flags(path, flags).at(&display)?;
    init_connection(&writer, busy_timeout).at(&display)?;
    // Refuse a newer database before anything below writes to the file.
    refuse_newer(Db::new(&writer, &display))?;
    writer
        .execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT};"
        ))
        .at(&display)?;
    let needs_rebuild = migrate::migrate(&mut writer, &display)?;
    let merges_recorded = merges_recorded(&writer, &display)?;

    let manager = SqliteConnectionManager::file(path)
        .with_flags(OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .with_init(move |conn| init_connection(conn, busy_timeout));
    let readers = r2d2::Pool::builder()
        .max_size(4)
        .min_idle(Some(0))
        .connection_timeout(Duration::from_secs(30))
        .build_unchecked(manager);
    let wal = Some(WalWatch::new(path));
    Ok(Connections {
        display,
        file: Some(path.to_path_buf()),
        busy_timeout,
        writer: Mutex::new(writer),
        readers: Some(readers),
        needs_rebuild,
        merges_recorded,
        wal,
    })
}

/// Whether `merging_imports` has a row, or `session_rebuild` a rollback's rebuild of a
/// session's aggregates (two probes of tables that are nearly always empty).
fn merges_recorded(conn: &Connection, display: &str) -> Result<bool, StoreError> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM merging_imports)
             OR EXISTS (SELECT 1 FROM session_rebuild WHERE mode = 'aggregates')",
        [],
        |row| row.get(0),
    )
    .at(display)
}

/// Returns the database's schema version, refusing one newer than this binary.
fn refuse_newer(db: Db<'_>) -> Result<i64, StoreError> {
    let found = migrate::current_version(db)?;
    if found > migrate::latest_version() {
        return Err(StoreError::NewerDatabase {
            path: db.path().to_owned(),
            found,
            supported: migrate::latest_version(),
        });
    }
    Ok(found)
}

/// The page cache of the read-only connection, in pages (256 KiB). A short command reads most
/// pages once; every page SQLite caches is a fresh heap buffer, whose first touch costs a page
/// fault (about as much as reading the page). A small cache recycles the same buffers, so
/// searches and listings take fewer faults (figures: docs/BENCHMARKS.md, "Search").
const READ_ONLY_CACHE_PAGES: i64 = 64;

/// Opens an existing, up-to-date database file with one read-only connection and no writer
/// or reader pool, for commands that only read (search, listing, showing, statistics): one
/// schema parse and no pool threads at startup. Returns `None` when the ordinary [`open`] is
/// needed instead — an in-memory store, a missing file, or a database whose migrations are
/// pending (they need the writer); a database newer than this binary is refused as by [`open`].
pub(crate) fn open_read_only(
    location: &StoreLocation,
    busy_timeout: Duration,
) -> Result<Option<Connections>, StoreError> {
    let StoreLocation::File(path) = location else {
        return Ok(None);
    };
    if !path.is_file() {
        return Ok(None);
    }
    let display = path.display().to_string();
    let conn = if read_as_immutable(path) {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        Connection::open_with_flags(immutable_uri(path), flags).at(&display)?
    } else {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        Connection::open_with_flags(path, flags).at(&display)?
    };
    init_connection(&conn, busy_timeout).at(&display)?;
    conn.execute_batch(&format!("PRAGMA cache_size = {READ_ONLY_CACHE_PAGES};"))
        .at(&display)?;
    let db = Db::new(&conn, &display);
    if refuse_newer(db)? < migrate::latest_version() || migrate::rebuild_pending(db)? {
        return Ok(None);
    }
    Ok(Some(Connections {
        display,
        file: Some(path.to_path_buf()),
        busy_timeout,
        writer: Mutex::new(conn),
        readers: None,
        needs_rebuild: false,
        merges_recorded: false,
        wal: None,
    }))
}

/// Whether a read-only open reads the file as immutable: when this user cannot write the
/// database file and no `-wal` file exists. Then nothing this user can write holds a newer
/// state than the file, and a WAL reader would create the `-wal` and `-shm` files — SQLite
/// gives them the database file's mode, so a read of a `chmod 400` database left them 0400,
/// and every write failed once the file was writable again. Read as immutable, SQLite
/// creates no file and takes no lock (a write by another user with the right to make one,
/// during this read, could give this read a torn view: `docs/RELIABILITY.md`).
fn read_as_immutable(path: &Path) -> bool {
    let wal = wal_path(path);
    !wal.exists() && nix::unistd::access(path, nix::unistd::AccessFlags::W_OK).is_err()
}

/// The `file:` URI of `path` with `immutable=1`, the path percent-encoded where a URI needs
/// it.
fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &byte in path.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-_.~".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

fn open_memory(busy_timeout: Duration) -> Result<Connections, StoreError> {
    let display = ":memory:".to_owned();
    let mut writer = Connection::open_in_memory().at(&display)?;
    init_connection(&writer, busy_timeout).at(&display)?;
    let needs_rebuild = migrate::migrate(&mut writer, &display)?;
    Ok(Connections {
        display,
        file: None,
        busy_timeout,
        writer: Mutex::new(writer),
        readers: None,
        needs_rebuild,
        merges_recorded: false,
        wal: None,
    })
}
