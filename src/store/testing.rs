//! What tests and benchmarks may reach inside the store, beyond [`crate::store::SessionStore`]'s
//! API: read-only views of derived data, each opening the database file on its own, and the
//! migrations — the one place a SQLite type crosses into the API, because migration tests
//! write a database of an old version by hand and migrate it on the same connection. Not for
//! product code.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::store::StoreError;
use crate::store::db::Db;
use crate::store::error::SqliteContext;
use crate::store::search::{TermFrequencies, fts};

pub use crate::store::migrate::{MIGRATIONS, Migration, latest_version, migrate_to};

fn open(db: &Path) -> Result<Connection, StoreError> {
    let path = db.display().to_string();
    Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).at(&path)
}

/// The index totals ranking uses (`search_totals`): documents and tokens; `None` when nothing
/// is indexed.
pub fn search_totals(db: &Path) -> Result<Option<(i64, i64)>, StoreError> {
    let path = db.display().to_string();
    fts::totals(Db::new(&open(db)?, &path))
}

/// How often one indexed token (or every token starting with it) occurs in each document,
/// from FTS5's vocabulary, as ranking reads it; `None` when more than `cap` documents hold it.
pub fn term_frequencies(
    db: &Path,
    token: &str,
    prefix: bool,
    cap: usize,
) -> Result<Option<TermFrequencies>, StoreError> {
    let path = db.display().to_string();
    fts::term_frequencies(Db::new(&open(db)?, &path), token, prefix, cap)
}
