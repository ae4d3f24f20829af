//! Schema migrations: the embedded list matches `migrations/`, each migration applies on top of
//! the previous one, and a database from a newer pi is refused without being touched.

use pi::store::StoreError;
use pi::store::testing::{MIGRATIONS, latest_version, migrate_to};
use rusqlite::Connection;

use crate::common::{TestEnv, open_store, succeeded};

#[test]
fn the_embedded_list_matches_the_files() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".sql"))
        .collect();
    files.sort();
    let embedded: Vec<&str> = MIGRATIONS.iter().map(|migration| migration.name).collect();
    assert_eq!(files, embedded);
    for (idx, migration) in MIGRATIONS.iter().enumerate() {
        assert_eq!(migration.version, idx as i64 + 1);
        assert!(
            migration
                .name
                .starts_with(&format!("{:04}_", migration.version))
        );
        let text = std::fs::read_to_string(dir.join(migration.name)).unwrap();
        assert_eq!(
            text, migration.sql,
            "{} differs from its embedded copy",
            migration.name
        );
    }
}

#[test]
fn migration_0001_creates_the_tree_tables_and_records_its_version() {
    // (Applied alone: version 1 only.)
    let mut conn = Connection::open_in_memory().unwrap();
    migrate_to(&mut conn, ":memory:", 1).unwrap();
    let version: i64 = conn
        .query_row("SELECT MAX(version) FROM schema_migrations", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(version, 1);
    for table in [
        "sessions",
        "entries",
        "leaf",
        "quarantine",
        "entry_path",
        "labels",
        "session_stats",
    ] {
        let found: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = ?1",
                [table],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(found, 1, "{table}");
    }
    // Applying again is a no-op.
    migrate_to(&mut conn, ":memory:", latest_version()).unwrap();
}

#[test]
fn a_database_from_a_newer_pi_is_refused_and_left_untouched() {
    let env = TestEnv::new();
    drop(open_store(&env.db(), 1));
    {
        let conn = Connection::open(env.db()).unwrap();
        conn.execute(
            "INSERT INTO schema_migrations (version, name) VALUES (999, 'future.sql')",
            [],
        )
        .unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE;")
            .unwrap();
    }
    let before = std::fs::read(env.db()).unwrap();
    let result = pi::store::SessionStore::open(pi::store::StoreConfig {
        location: pi::store::StoreLocation::File(env.db()),
        clock: std::sync::Arc::new(pi::support::clock::SystemClock),
        ids: std::sync::Arc::new(pi::support::ids::IdSource::seeded(1)),
        busy_timeout: std::time::Duration::from_secs(1),
    });
    match result {
        Err(StoreError::NewerDatabase { found, .. }) => assert_eq!(found, 999),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        std::fs::read(env.db()).unwrap(),
        before,
        "the file must not change"
    );
    assert!(!env.db().with_extension("db-wal").exists());
    let output = env.pi().args(["sessions", "list"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("newer") && stderr.contains("pi.db"),
        "{stderr}"
    );
    // The read-only commands refuse it as well, and touch nothing either.
    let output = env
        .pi()
        .args(["sessions", "search", "--all", "anything"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("newer"));
    assert_eq!(std::fs::read(env.db()).unwrap(), before);
    assert!(!env.db().with_extension("db-wal").exists());
}

#[test]
fn database_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let store = open_store(&env.db(), 1);
    store
        .create_session(&pi::store::NewSession {
            cwd: "/x".into(),
            parent_session: None,
        })
        .unwrap();
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&env.db()), 0o600);
    assert_eq!(mode(&env.agent_dir), 0o700);
    let wal = env.agent_dir.join("pi.db-wal");
    assert!(wal.exists());
    assert_eq!(mode(&wal), 0o600);
}

/// Writes a version-1 database holding the basic-chat fixture as 0001 stored it (no search
/// tables, no derived rows beyond its statistics and leaf); returns the open connection.
fn version_1_database(env: &TestEnv) -> Connection {
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    let mut conn = Connection::open(env.db()).unwrap();
    migrate_to(&mut conn, "v1", 1).unwrap();
    {
        let (header, header_bytes, entries) = crate::common::fixtures::read_minimal("basic-chat");
        conn.execute(
            "INSERT INTO sessions (sid, id, cwd, created_at, header) VALUES (1, ?1, ?2, ?3, ?4)",
            rusqlite::params![
                header.id.as_str(),
                header.cwd,
                header.timestamp,
                header_bytes
            ],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO session_stats (sid, last_activity) VALUES (1, ?1)",
            [header.timestamp.as_str()],
        )
        .unwrap();
        for (seq, raw) in entries.iter().enumerate() {
            conn.execute(
                "INSERT INTO entries (sid, seq, id, parent_id, type, timestamp, payload) VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6)",
                rusqlite::params![
                    seq as i64,
                    raw.entry.id.as_ref().map(|id| id.as_str()),
                    raw.entry.parent_id.as_ref().map(|id| id.as_str()),
                    raw.entry.type_name(),
                    raw.entry.timestamp,
                    raw.payload
                ],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO leaf (sid, seq) VALUES (1, ?1)",
            [entries.len() as i64 - 1],
        )
        .unwrap();
    }
    conn
}

#[test]
fn migration_0002_indexes_sessions_stored_before_search_existed() {
    let env = TestEnv::new();
    drop(version_1_database(&env));
    // Opening migrates to the latest version and rebuilds the derived tables.
    let store = open_store(&env.db(), 1);
    let summary = store.list(&pi::store::ListScope::All).unwrap();
    assert_eq!(summary[0].name.as_deref(), Some("Checkout overview"));
    drop(store);
    assert_search_finds_the_fixture_and_check_passes(&env);
}

#[test]
fn a_rebuild_cut_short_after_its_migration_is_finished_by_the_next_open() {
    let env = TestEnv::new();
    let mut conn = version_1_database(&env);
    // The migrations commit, then the process dies before rebuilding the derived tables.
    assert!(migrate_to(&mut conn, "v1", latest_version()).unwrap());
    let pending: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(
        pending, 1,
        "the pending rebuild is recorded with the migration"
    );
    drop(conn);
    // The next command, even a read-only one, finishes it first.
    assert_search_finds_the_fixture_and_check_passes(&env);
    let conn = Connection::open(env.db()).unwrap();
    let pending: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(pending, 0);
}

/// `pi sessions search` finds the basic-chat fixture's `validateCart` once, and `pi db check`
/// passes.
fn assert_search_finds_the_fixture_and_check_passes(env: &TestEnv) {
    let output =
        succeeded(
            env.pi()
                .args(["sessions", "search", "--all", "--json", "validateCart"]),
        );
    let hits = crate::common::stdout_json(&output);
    assert_eq!(hits.as_array().unwrap().len(), 1, "{hits}");
    let output = env.pi().args(["db", "check"]).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

/// Whether a stepped reindex is recorded (`search_reindex`).
fn reindex_recorded(db: &std::path::Path) -> bool {
    let Ok(conn) = Connection::open(db) else {
        return false;
    };
    if conn
        .busy_timeout(std::time::Duration::from_secs(5))
        .is_err()
    {
        return false;
    }
    conn.query_row("SELECT count(*) FROM search_reindex", [], |row| {
        row.get::<_, i64>(0)
    })
    .is_ok_and(|rows| rows > 0)
}

#[test]
fn a_migration_s_rebuild_goes_in_steps_and_a_process_opening_meanwhile_waits_for_its_end_without_a_busy_error()
 {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    let file = env.dir.path().join("large.jsonl");
    crate::common::bulk_session_file(&file, "large-session", 30_000, 60);
    succeeded(env.pi().arg("import").arg(&file));
    // As a migration that asks for a rebuild leaves it (the derived rows of the old shape: some
    // path state gone here).
    let conn = Connection::open(env.db()).unwrap();
    conn.execute_batch("DELETE FROM entry_path WHERE seq % 3 = 0; PRAGMA user_version = 1;")
        .unwrap();
    drop(conn);

    // One process opens and rebuilds; another opens meanwhile with a 3 s busy timeout (shorter
    // than the rebuild: about 9 s in a debug build here; a step is about 0.6 s, more on a
    // loaded machine) and must neither fail nor act before the rebuild is done.
    let first = env
        .pi_process()
        .args(["sessions", "list", "--json"])
        .env("PI_BUSY_TIMEOUT_MS", "3000")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !reindex_recorded(&env.db()) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the rebuild was not seen stepping"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let rename = env
        .pi()
        .args(["sessions", "rename", "large-session", "renamed"])
        .env("PI_BUSY_TIMEOUT_MS", "3000")
        .output()
        .unwrap();
    assert!(
        rename.status.success(),
        "{}",
        String::from_utf8_lossy(&rename.stderr)
    );
    let first = first.wait_with_output().unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(!reindex_recorded(&env.db()), "the rebuild ended");
    let conn = Connection::open(env.db()).unwrap();
    let pending: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(pending, 0);
    drop(conn);
    let store = open_store(&env.db(), 1);
    let large = pi::model::SessionId::new("large-session");
    let summary = store.session(&large).unwrap();
    assert_eq!(summary.name.as_deref(), Some("renamed"));
    assert_eq!(summary.entries, 30_001);
    drop(store);
    let check = env.pi().args(["db", "check"]).output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
}

#[test]
fn migration_0012_adds_empty_sync_marks_beside_the_sessions() {
    let mut conn = Connection::open_in_memory().unwrap();
    migrate_to(&mut conn, ":memory:", 11).unwrap();
    conn.execute_batch(
        "INSERT INTO sessions (sid, id, cwd, created_at, header)
             VALUES (1, 's-1', '/w', '2026-01-01T00:00:00.000Z', X'7B7D');
         INSERT INTO session_stats (sid, next_seq, last_activity)
             VALUES (1, 0, '2026-01-01T00:00:00.000Z');",
    )
    .unwrap();
    migrate_to(&mut conn, ":memory:", 12).unwrap();
    for table in ["sync_push_marks", "sync_pull_marks", "sync_origins"] {
        let rows: i64 = conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
                row.get(0)
            })
            .unwrap();
        assert_eq!(rows, 0, "{table}");
    }
    let sessions: i64 = conn
        .query_row("SELECT count(*) FROM sessions", [], |row| row.get(0))
        .unwrap();
    assert_eq!(sessions, 1);
    conn.execute(
        "INSERT INTO sync_push_marks (remote, session_id, pushed_seq) VALUES ('team', 's-1', 3)",
        [],
    )
    .unwrap();
}
