-- 0008: the store's own totals for bm25, per session: how many search documents it has and
-- how many tokens they hold (FTS5's `unicode61` count, as each docid's length carries it).
-- Ranking reads their sums instead of FTS5's private averages record, which a
-- contentless-delete table cannot keep exact (a deleted document's length is unknown to it).
-- A session's row goes with its documents. The derived tables are rebuilt from the entries
-- after this migration, which fills the rows.

CREATE TABLE search_totals (
    sid    INTEGER PRIMARY KEY REFERENCES sessions (sid),
    docs   INTEGER NOT NULL,
    tokens INTEGER NOT NULL
);

DELETE FROM search_docs;
INSERT INTO search_fts (search_fts) VALUES ('delete-all');
