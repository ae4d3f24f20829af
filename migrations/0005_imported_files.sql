-- 0005: the reference's session files that imports have read, one row per file, so that the
-- next import recognises an unchanged file without opening it (same size and mtime) and
-- reads a file that grew from where the last import stopped (`store/imported.rs`).
--
-- `path` is the file's canonical path, as bytes (file names need not be UTF-8). `read_to` is
-- the byte offset just after the last LF that import read (complete lines only: a torn last
-- line the reference is still writing stays after it), `lines` the number of lines before it,
-- so the next line's number is `lines + 1`. `tail_len` and `tail_hash` are the length (LF
-- included) and the 64-bit FNV-1a hash of the last complete line before `read_to`: a file that
-- grew is read from `read_to` only when those bytes are still there (a file rewritten and
-- grown is read whole). `appendable` is 0 when the lines after `read_to` cannot be read on
-- their own (a v1/v2 file, migrated as a whole; an unterminated last line that was imported
-- as it was). `sid` is the session the file went into, NULL when nothing of it is stored (the
-- file was refused, or its session was removed since); `next_seq` is that session's next
-- append sequence after the import, so that appends from elsewhere in between are noticed.
-- Not derived data: `db reindex` leaves it alone; removing a session keeps its files' rows,
-- with a NULL `sid`.

CREATE TABLE imported_files (
    path        BLOB PRIMARY KEY,
    size        INTEGER NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    read_to     INTEGER NOT NULL,
    lines       INTEGER NOT NULL,
    tail_len    INTEGER NOT NULL,
    tail_hash   INTEGER NOT NULL,
    appendable  INTEGER NOT NULL,
    sid         INTEGER REFERENCES sessions (sid),
    next_seq    INTEGER NOT NULL,
    imported_at TEXT NOT NULL
) WITHOUT ROWID;

CREATE INDEX imported_files_sid ON imported_files (sid);
