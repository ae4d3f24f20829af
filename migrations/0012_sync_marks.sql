-- 0012: what this database knows of the remote archives it syncs with (`pi sync`, PostgreSQL,
-- `src/remote/`, docs/SYNC.md). Not derived data: `db reindex` leaves these tables alone.
--
-- `sync_push_marks`: per remote and session, every entry with `seq < pushed_seq` is
-- acknowledged by that remote (written only after the remote committed them, so a sync
-- killed in between pushes those entries again, which the remote finds identical).
--
-- `sync_pull_marks`: per remote, the remote's snapshot horizon (`pg_snapshot_xmin` as text)
-- of the last pull that completed: sessions whose change transaction is older are known.
--
-- `sync_origins`: sessions pulled from a remote (someone else's, or this person's from
-- another machine), with who pushed them and where from; `pulled_seq` is the remote's
-- sequence up to which the local session holds its entries. Such a session is never pushed
-- back, and is read-only here unless forked. A row is written before the session's entries
-- are imported, so a pull killed in between never leaves a pulled session looking local.

CREATE TABLE sync_push_marks (
    remote     TEXT NOT NULL,
    session_id TEXT NOT NULL,
    pushed_seq INTEGER NOT NULL,
    PRIMARY KEY (remote, session_id)
) WITHOUT ROWID;

CREATE TABLE sync_pull_marks (
    remote TEXT PRIMARY KEY,
    mark   TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE sync_origins (
    session_id TEXT PRIMARY KEY,
    remote     TEXT NOT NULL,
    user_name  TEXT NOT NULL,
    host       TEXT NOT NULL,
    pulled_seq INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
