-- 0010: merges in progress. Merging a file into a stored session (a re-import of a changed
-- file, or the lines a file grew by) compares the file with the session in a read snapshot
-- first, then writes only the lines the session lacks, in bounded steps (each its own
-- transaction, so that other writers never wait long behind it). The first step takes the
-- session's writer lease (no other process writes the session until the merge ends) and
-- inserts this row; each step moves `next_seq`; the last step moves the leaf, records the
-- file and removes the row and the lease, in one transaction, so a merge that fits in one
-- step never shows this row. A row left by a killed merge (its process gone on this host) is
-- rolled back — the entries in `first_seq .. next_seq` and the quarantined lines after
-- `last_qid` removed, the session's derived rows rebuilt — by the next writable open of the
-- database or the next import: each file stays all or nothing.
--
-- `token` is the lease the merge holds; `pid`, `pid_start` and `host` identify the merging
-- process (as `session_leases` does); `started_ms` is when the merge began writing;
-- `rolling_back` is set by the rollback's transaction just before it deletes the entries.
--
-- Entries stay append-only: the trigger of 0001 that refuses a delete outside a session's
-- removal now lets through exactly the entries of a merge being rolled back, never an entry
-- an acknowledged write stored.

CREATE TABLE merging_imports (
    sid        INTEGER PRIMARY KEY REFERENCES sessions (sid),
    first_seq  INTEGER NOT NULL,
    next_seq   INTEGER NOT NULL,
    last_qid   INTEGER NOT NULL,
    token      TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    pid_start  INTEGER,
    host       TEXT NOT NULL,
    started_ms INTEGER NOT NULL,
    rolling_back INTEGER NOT NULL DEFAULT 0
);

DROP TRIGGER entries_deleted_with_session;

CREATE TRIGGER entries_deleted_with_session BEFORE DELETE ON entries
WHEN (SELECT deleting FROM sessions WHERE sid = OLD.sid) IS NOT 1
 AND NOT EXISTS (
     SELECT 1 FROM merging_imports AS m
      WHERE m.sid = OLD.sid AND m.rolling_back = 1
        AND OLD.seq >= m.first_seq AND OLD.seq < m.next_seq)
BEGIN
    SELECT RAISE(ABORT, 'entries are deleted only together with their session');
END;
