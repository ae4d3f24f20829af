-- 0009: a `pi db reindex` in progress. The reindex rebuilds each session's derived rows in
-- its own short transaction, in sid order, so that other writers never wait long behind it.
-- The full-text index is rebuilt beside the live one, into `search_docs_next`,
-- `search_fts_next` and `search_totals_next` (created by the reindex, same shape as the live
-- tables), and swapped in by rename in the last step: search answers from the complete live
-- index until then, and FTS5's own totals start exact (they count removed rows otherwise).
--
-- One row while a reindex runs: `cursor` is the last sid rebuilt. Every writer reads it: a
-- search document of a session at or below the cursor goes into both indexes, one above it
-- only into the live one (its step will index it). A reindex killed part-way leaves the row;
-- the next `pi db reindex` goes on from it.

CREATE TABLE search_reindex (
    one    INTEGER PRIMARY KEY CHECK (one = 1),
    cursor INTEGER NOT NULL
);
