-- Archive 0002: documents by time, for search (docs/SYNC.md, "Search on the server").
--
-- A search ranks the newest 1,000 documents that match (and `--since`/`--until` bound them):
-- for a word that is in many documents the server walks this index from the newest end and
-- stops after 1,000 matches instead of ranking every match; for a rare word the GIN index
-- still finds them all. Either way its time no longer grows with the archive.
CREATE INDEX pi_docs_ts ON pi_docs (ts DESC NULLS LAST);
