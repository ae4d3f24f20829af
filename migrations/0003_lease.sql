-- 0003: writer leases. One row per session that a process is writing (the REPL, an agent
-- run): who holds it (owner, pid, host, the pid's start time to tell a reused pid apart), a
-- random token that the holder's appends must match, and the heartbeat. `stale_ms` is the
-- holder's own promise: it renews the heartbeat well within that many milliseconds, so any
-- process may take the lease over once the heartbeat is older (or at once when the pid is
-- gone on the same host). Not derived data: `db reindex` leaves it alone. A clean exit
-- deletes the row; a crash leaves it for the next writer to take over.

CREATE TABLE session_leases (
    sid          INTEGER PRIMARY KEY REFERENCES sessions (sid),
    token        TEXT NOT NULL,
    owner        TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    pid_start    INTEGER,
    host         TEXT NOT NULL,
    acquired_at  INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    stale_ms     INTEGER NOT NULL
) WITHOUT ROWID;
