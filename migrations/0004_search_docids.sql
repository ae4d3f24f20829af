-- 0004: search docids carry what ranking needs (see `store::search::docid`):
-- [entry day, days since 1970: 20 bits][order within the day: 24 bits][length: 7 bits].
-- A query then ranks its candidates from the FTS index alone, and "the most recent matches"
-- are the most recent by entry day. The tables keep their shape; the derived tables are
-- rebuilt from the entries after this migration, which gives every document its new docid.

DELETE FROM search_docs;
INSERT INTO search_fts (search_fts) VALUES ('delete-all');
