-- 0011: one session's derived rows rebuilt over several steps. A stepped reindex (0009)
-- rebuilt each session in one transaction however large it was, and the rollback of a killed
-- merge (0010) rebuilt the whole session in one transaction: a session of a million entries
-- held the write lock for its whole rebuild.
--
-- One row per session part-way through such a rebuild. `cursor_seq` is the first entry seq not
-- yet rebuilt; entries are taken in seq order, a bounded number per step (each step its own
-- transaction). `mode` says what a step writes:
--   'reindex'    (a stepped reindex): each entry's own derived rows (path state, usage,
--                context edits) rewritten in place, its search documents written into the
--                next index (`search_docs_next`, 0009);
--   'aggregates' (after a merge's rollback removed its entries): nothing per entry, the
--                remaining entries' own rows being what they were before the merge.
-- In both modes the session's aggregates (statistics, labels, the irregular flag) accumulate
-- here and in `session_rebuild_labels`, and replace the live ones in the step that reaches the
-- session's last entry, which also removes the rows. Until then readers see the live
-- aggregates as they were. Writers of the session go on meanwhile: what they append is a later
-- entry, taken by a later step. The columns after `irregular` are those of `session_stats`.

CREATE TABLE session_rebuild (
    sid           INTEGER PRIMARY KEY REFERENCES sessions (sid),
    mode          TEXT NOT NULL CHECK (mode IN ('reindex', 'aggregates')),
    cursor_seq    INTEGER NOT NULL,
    irregular     INTEGER NOT NULL DEFAULT 0,
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

CREATE TABLE session_rebuild_labels (
    sid       INTEGER NOT NULL,
    target_id TEXT NOT NULL,
    label     TEXT NOT NULL,
    label_ts  TEXT NOT NULL,
    order_seq INTEGER NOT NULL,
    PRIMARY KEY (sid, target_id)
) WITHOUT ROWID;
