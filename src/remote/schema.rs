//! The archive's schema: the numbered files of `migrations/postgres/`, embedded at compile
//! time, each applied in its own transaction under an advisory lock (two pi processes
//! migrating one server at once apply each file once) and recorded in `pi_schema_migrations`.
//!
//! Invariant: an archive whose recorded version is newer than this binary's newest migration
//! is refused before any statement writes to it.

use tokio_postgres::Client;

use crate::remote::{RemoteError, Result};

/// One embedded archive migration.
#[derive(Debug, Clone, Copy)]
pub struct ArchiveMigration {
    /// The version it brings the archive to (its file number).
    pub version: i64,
    /// The file name under `migrations/postgres/`.
    pub name: &'static str,
    /// The SQL text.
    pub sql: &'static str,
}

/// Every archive migration, in order (a test checks it against the folder).
pub const MIGRATIONS: &[ArchiveMigration] = &[
    ArchiveMigration {
        version: 1,
        name: "0001_archive.sql",
        sql: include_str!("../../migrations/postgres/0001_archive.sql"),
    },
    ArchiveMigration {
        version: 2,
        name: "0002_docs_recent.sql",
        sql: include_str!("../../migrations/postgres/0002_docs_recent.sql"),
    },
];

/// The newest archive version this binary knows.
pub fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |migration| migration.version)
}

/// The key of the advisory lock migrations take (any constant both sides agree on).
const MIGRATION_LOCK: i64 = 0x7069_5f61_7263_6876; // "pi_archv"

async fn recorded_version(client: &Client, remote: &str) -> Result<i64> {
    let exists: Option<String> = client
        .query_one("SELECT to_regclass('pi_schema_migrations')::text", &[])
        .await
        .map_err(|error| RemoteError::from_pg(remote, &error))?
        .get(0);
    if exists.is_none() {
        return Ok(0);
    }
    let version: Option<i64> = client
        .query_one("SELECT max(version)::int8 FROM pi_schema_migrations", &[])
        .await
        .map_err(|error| RemoteError::from_pg(remote, &error))?
        .get(0);
    Ok(version.unwrap_or(0))
}

/// Brings the archive to [`latest_version`]; refuses (untouched) one made by a newer pi.
/// Returns the version it found.
pub async fn ensure(client: &mut Client, remote: &str) -> Result<i64> {
    let found = recorded_version(client, remote).await?;
    let known = latest_version();
    if found > known {
        return Err(RemoteError::NewerSchema {
            remote: remote.to_owned(),
            found,
            known,
        });
    }
    if found == known {
        return Ok(found);
    }
    let pg = |error: tokio_postgres::Error| RemoteError::from_pg(remote, &error);
    for migration in MIGRATIONS {
        let tx = client.transaction().await.map_err(pg)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(pg)?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS pi_schema_migrations (
                 version    bigint PRIMARY KEY,
                 name       text NOT NULL,
                 applied_at timestamptz NOT NULL DEFAULT now()
             )",
        )
        .await
        .map_err(pg)?;
        let current: Option<i64> = tx
            .query_one("SELECT max(version)::int8 FROM pi_schema_migrations", &[])
            .await
            .map_err(pg)?
            .get(0);
        let current = current.unwrap_or(0);
        if current > known {
            // Another, newer pi migrated it meanwhile: leave it as it is.
            tx.rollback().await.map_err(pg)?;
            return Err(RemoteError::NewerSchema {
                remote: remote.to_owned(),
                found: current,
                known,
            });
        }
        if migration.version <= current {
            tx.rollback().await.map_err(pg)?;
            continue;
        }
        tx.batch_execute(migration.sql).await.map_err(pg)?;
        tx.execute(
            "INSERT INTO pi_schema_migrations (version, name) VALUES ($1, $2)",
            &[&migration.version, &migration.name],
        )
        .await
        .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
    }
    Ok(found)
}
