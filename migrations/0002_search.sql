-- 0002: full-text search and usage statistics (derived, rebuilt from the entries after this
-- migration is applied).
--
-- search_docs: one row per searchable unit of an entry (an assistant message may give a
-- text, a thinking and a tool-call document); `docid` is the rowid of the FTS row.
-- search_fts: contentless FTS5 (the text lives in the entry payload; snippets re-read it),
-- with contentless_delete so that removing a session removes its rows.
-- usage: one row per `message` entry, for `pi sessions stats`.

CREATE TABLE search_docs (
    docid INTEGER PRIMARY KEY,
    sid   INTEGER NOT NULL,
    seq   INTEGER NOT NULL,
    role  TEXT NOT NULL,
    kind  TEXT NOT NULL,
    ts    INTEGER NOT NULL
);

CREATE INDEX search_docs_entry ON search_docs (sid, seq);

CREATE VIRTUAL TABLE search_fts USING fts5 (
    body,
    content = '',
    contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TABLE usage (
    sid         INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    ts          INTEGER NOT NULL,
    day         TEXT NOT NULL,
    week        TEXT NOT NULL,
    role        TEXT NOT NULL,
    provider    TEXT,
    model       TEXT,
    input       INTEGER NOT NULL,
    output      INTEGER NOT NULL,
    cache_read  INTEGER NOT NULL,
    cache_write INTEGER NOT NULL,
    cost        REAL NOT NULL,
    PRIMARY KEY (sid, seq)
) WITHOUT ROWID;

CREATE INDEX usage_ts ON usage (ts);
