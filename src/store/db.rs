//! [`Db`]: a connection together with the database path its errors name — what every
//! statement in the store runs on — and the few row-mapping helpers the statements share.
//!
//! Each helper is one `rusqlite` call chain with the path attached to every error exactly
//! as `.at(path)` attaches it ([`crate::store::error`]'s classification), so a statement
//! written with a helper fails the same way as one written out. `rows`, `row`, `one`,
//! `value`, `execute` and `prepare` use the connection's statement cache (`prepare_cached`);
//! `rows_uncached`, `execute_uncached` and `batch` do not (`prepare`, `Connection::execute`,
//! `execute_batch`): a statement run once (a schema change, a pragma, a `format!`-built
//! query) stays out of the cache. What the helpers do not cover — stepping through rows or
//! running one statement in a loop ([`Db::prepare`]), a transaction, an uncached single row —
//! goes through [`Db::conn`] and `SqliteContext::at` with [`Db::path`].
//!
//! Invariant: low in the store — this module imports only `error.rs`.

use rusqlite::types::FromSql;
use rusqlite::{CachedStatement, Connection, OptionalExtension, Params, Row};

use crate::store::error::{Result, SqliteContext};

/// A connection (a transaction derefs to one) and the path of its database, for messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Db<'a> {
    conn: &'a Connection,
    path: &'a str,
}

impl<'a> Db<'a> {
    /// Pairs a connection with the path its errors name.
    pub(crate) fn new(conn: &'a Connection, path: &'a str) -> Self {
        Self { conn, path }
    }

    /// The connection, for what the helpers do not cover (streaming rows, transactions).
    pub(crate) fn conn(self) -> &'a Connection {
        self.conn
    }

    /// The database path (or `:memory:`), as errors name it.
    pub(crate) fn path(self) -> &'a str {
        self.path
    }

    /// A cached statement, for a caller that steps through its rows or runs it many times.
    pub(crate) fn prepare(self, sql: &str) -> Result<CachedStatement<'a>> {
        self.conn.prepare_cached(sql).at(self.path)
    }

    /// Every row of a cached statement, mapped.
    pub(crate) fn rows<T>(
        self,
        sql: &str,
        params: impl Params,
        map: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let mut stmt = self.conn.prepare_cached(sql).at(self.path)?;
        let rows = stmt.query_map(params, map).at(self.path)?;
        rows.collect::<rusqlite::Result<Vec<T>>>().at(self.path)
    }

    /// Every row of a statement prepared without the cache (`format!`-built SQL), mapped.
    pub(crate) fn rows_uncached<T>(
        self,
        sql: &str,
        params: impl Params,
        map: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let mut stmt = self.conn.prepare(sql).at(self.path)?;
        let rows = stmt.query_map(params, map).at(self.path)?;
        rows.collect::<rusqlite::Result<Vec<T>>>().at(self.path)
    }

    /// The first row of a cached statement, mapped; `None` when it returns no row.
    pub(crate) fn row<T>(
        self,
        sql: &str,
        params: impl Params,
        map: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Option<T>> {
        self.conn
            .prepare_cached(sql)
            .at(self.path)?
            .query_row(params, map)
            .optional()
            .at(self.path)
    }

    /// The first row of a cached statement, mapped; no row is an error (SQLite's
    /// `QueryReturnedNoRows`, with the path).
    pub(crate) fn one<T>(
        self,
        sql: &str,
        params: impl Params,
        map: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<T> {
        self.conn
            .prepare_cached(sql)
            .at(self.path)?
            .query_row(params, map)
            .at(self.path)
    }

    /// The first column of the first row of a cached statement (an aggregate, an `EXISTS`);
    /// no row is an error as for [`Self::one`].
    pub(crate) fn value<T: FromSql>(self, sql: &str, params: impl Params) -> Result<T> {
        self.one(sql, params, |row| row.get(0))
    }

    /// Runs a cached statement; returns the number of rows it changed.
    pub(crate) fn execute(self, sql: &str, params: impl Params) -> Result<usize> {
        self.conn
            .prepare_cached(sql)
            .at(self.path)?
            .execute(params)
            .at(self.path)
    }

    /// Runs a statement without caching it (`Connection::execute`); returns the number of
    /// rows it changed.
    pub(crate) fn execute_uncached(self, sql: &str, params: impl Params) -> Result<usize> {
        self.conn.execute(sql, params).at(self.path)
    }

    /// Runs statements separated by `;`, uncached, without parameters.
    pub(crate) fn batch(self, sql: &str) -> Result<()> {
        self.conn.execute_batch(sql).at(self.path)
    }
}
