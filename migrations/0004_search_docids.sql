-- 0004: search docids carry what ranking needs (see `store::search::docid`):
-- [entry time, Unix seconds: 34 bits][order within the second: 16][role and kind: 4][length: 9].
-- A query then ranks its candidates from the FTS index alone, and "the most recent matches"
-- are the most recent by entry time. The tables keep their shape; the derived tables are
-- rebuilt from the entries after this migration, which gives every document its new docid.

DELETE FROM search_docs;
INSERT INTO search_fts (search_fts) VALUES ('delete-all');
