-- 0007: sessions an import is still writing. A large file is imported in bounded steps, each
-- its own transaction (so that other writers never wait long behind it), into a session row
-- whose id is a placeholder (`sessions.id` starts with U+0001, which no listing, prefix or id
-- lookup matches); the last step renames it to the file's id and removes this row, in one
-- transaction. A row left by a killed import (its process gone on this host) is removed, with
-- its session, by the next import: each file stays all or nothing.
--
-- `id` is the session id the import publishes; `pid`, `pid_start` and `host` identify the
-- importing process (as `session_leases` does); `started_ms` is when the import began.

CREATE TABLE staged_sessions (
    sid        INTEGER PRIMARY KEY REFERENCES sessions (sid),
    id         TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    pid_start  INTEGER,
    host       TEXT NOT NULL,
    started_ms INTEGER NOT NULL
);
