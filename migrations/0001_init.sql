-- 0001: sessions, the append-only entry tree, the leaf pointer, quarantined input lines,
-- and the derived tables kept in the append transaction (path state, labels, statistics).
--
-- Entries are immutable: an UPDATE is refused by a trigger, and entries are deleted only
-- together with their session (the session row is first marked `deleting`).

CREATE TABLE sessions (
    sid            INTEGER PRIMARY KEY,
    id             TEXT NOT NULL UNIQUE,
    cwd            TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    parent_session TEXT,
    -- The header line exactly as export writes it (the imported bytes for v3 files).
    header         BLOB NOT NULL,
    -- 1 once a line's id is named as parent by an earlier line (a forward reference, or a
    -- repeated id whose earlier copy has children): "a lookup takes the latest line" then
    -- re-parents entries stored earlier, so the path state below is not trusted and walks
    -- over this session use the plain id walk.
    irregular      INTEGER NOT NULL DEFAULT 0,
    deleting       INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX sessions_cwd ON sessions (cwd);

-- One row per entry line. `seq` is the append order within the session (0-based);
-- `payload` is the line's bytes as written or imported. `id` is not unique (a lookup takes
-- the latest seq) and `parent_id` has no foreign key (an orphan is a root).
CREATE TABLE entries (
    eid       INTEGER PRIMARY KEY,
    sid       INTEGER NOT NULL REFERENCES sessions (sid),
    seq       INTEGER NOT NULL,
    id        TEXT,
    parent_id TEXT,
    type      TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    payload   BLOB NOT NULL
);

CREATE UNIQUE INDEX entries_seq ON entries (sid, seq);
-- Covers id lookups (the latest seq with an id) and the plain walk, which reads
-- (seq, id, parent_id) of a whole session without touching the payload pages.
CREATE INDEX entries_id ON entries (sid, id, seq, parent_id);
CREATE INDEX entries_parent ON entries (sid, parent_id, seq);

CREATE TRIGGER entries_append_only BEFORE UPDATE ON entries
BEGIN
    SELECT RAISE(ABORT, 'entries are append-only');
END;

CREATE TRIGGER entries_deleted_with_session BEFORE DELETE ON entries
WHEN (SELECT deleting FROM sessions WHERE sid = OLD.sid) IS NOT 1
BEGIN
    SELECT RAISE(ABORT, 'entries are deleted only together with their session');
END;

-- The persisted leaf pointer. NULL seq: before the first entry (the next append is a root).
CREATE TABLE leaf (
    sid INTEGER PRIMARY KEY REFERENCES sessions (sid),
    seq INTEGER
);

-- Input lines an import could not use, kept with their bytes.
CREATE TABLE quarantine (
    qid         INTEGER PRIMARY KEY,
    sid         INTEGER NOT NULL REFERENCES sessions (sid),
    source      TEXT NOT NULL,
    line        INTEGER NOT NULL,
    reason      TEXT NOT NULL,
    bytes       BLOB NOT NULL,
    imported_at TEXT NOT NULL
);

CREATE INDEX quarantine_sid ON quarantine (sid, line);

-- Derived: per-entry path state, computed at append from the parent's row. Lets a context
-- rebuild walk only from the leaf to where the last compaction's kept range begins, and
-- read model and thinking level without walking to the root. `jump_seq` is a skew-binary
-- jump pointer (Myers' level-ancestor structure): "is X an ancestor of the leaf" takes
-- O(log depth) lookups.
CREATE TABLE entry_path (
    sid            INTEGER NOT NULL,
    seq            INTEGER NOT NULL,
    parent_seq     INTEGER,
    depth          INTEGER NOT NULL,
    jump_seq       INTEGER,
    compaction_seq INTEGER,
    model_seq      INTEGER,
    thinking_seq   INTEGER,
    PRIMARY KEY (sid, seq)
) WITHOUT ROWID;

-- Derived: the current label of each target (last label entry per target wins, empty
-- clears). `order_seq` is where the target entered the label map (the reference's Map
-- insertion order, used when a fork re-creates labels).
CREATE TABLE labels (
    sid       INTEGER NOT NULL,
    target_id TEXT NOT NULL,
    label     TEXT NOT NULL,
    label_ts  TEXT NOT NULL,
    order_seq INTEGER NOT NULL,
    PRIMARY KEY (sid, target_id)
) WITHOUT ROWID;

-- Derived: per-session statistics for O(1) listing.
CREATE TABLE session_stats (
    sid           INTEGER PRIMARY KEY REFERENCES sessions (sid),
    next_seq      INTEGER NOT NULL DEFAULT 0,
    entries       INTEGER NOT NULL DEFAULT 0,
    messages      INTEGER NOT NULL DEFAULT 0,
    input         INTEGER NOT NULL DEFAULT 0,
    output        INTEGER NOT NULL DEFAULT 0,
    cache_read    INTEGER NOT NULL DEFAULT 0,
    cache_write   INTEGER NOT NULL DEFAULT 0,
    cost          REAL NOT NULL DEFAULT 0,
    last_activity TEXT NOT NULL,
    name          TEXT,
    first_message TEXT
);

CREATE INDEX session_stats_activity ON session_stats (last_activity);
