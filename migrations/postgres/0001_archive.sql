-- Archive 0001: the team archive's sessions, entries and full-text documents (docs/SYNC.md).
--
-- Entries are append-only, as in every pi.db: `(session_id, seq)` is an entry's identity and
-- `payload` its exact bytes; a push inserts what the archive lacks and compares what it has
-- (same key, other bytes: a conflict, refused). No leaf is kept: leaves are per machine.
-- The counters of `pi_sessions` are derived from the entries a push inserted, in the
-- statement that inserts them. `change_xid` is the transaction that last added entries to
-- the session: a pull asks for the sessions changed at or after its last snapshot's horizon.

CREATE TABLE pi_sessions (
    id            text PRIMARY KEY,
    header        bytea NOT NULL,
    cwd           text NOT NULL,
    created_at    text NOT NULL,
    user_name     text NOT NULL,
    host          text NOT NULL,
    next_seq      bigint NOT NULL DEFAULT 0,
    entries       bigint NOT NULL DEFAULT 0,
    messages      bigint NOT NULL DEFAULT 0,
    input         bigint NOT NULL DEFAULT 0,
    output        bigint NOT NULL DEFAULT 0,
    cache_read    bigint NOT NULL DEFAULT 0,
    cache_write   bigint NOT NULL DEFAULT 0,
    cost          double precision NOT NULL DEFAULT 0,
    last_activity timestamptz,
    name          text,
    first_message text,
    first_pushed  timestamptz NOT NULL DEFAULT now(),
    change_xid    xid8 NOT NULL DEFAULT pg_current_xact_id()
);

CREATE INDEX pi_sessions_change ON pi_sessions (change_xid);
CREATE INDEX pi_sessions_user ON pi_sessions (user_name, last_activity);
CREATE INDEX pi_sessions_activity ON pi_sessions (last_activity);

CREATE TABLE pi_entries (
    session_id  text NOT NULL,
    seq         bigint NOT NULL,
    entry_id    text,
    parent_id   text,
    type        text NOT NULL,
    ts          timestamptz,
    payload     bytea NOT NULL,
    -- accounting, as the local statistics count it (`store::derived::usage_facts`)
    role        text,
    is_message  boolean NOT NULL DEFAULT false,
    provider    text,
    model       text,
    input       bigint NOT NULL DEFAULT 0,
    output      bigint NOT NULL DEFAULT 0,
    cache_read  bigint NOT NULL DEFAULT 0,
    cache_write bigint NOT NULL DEFAULT 0,
    cost        double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, seq)
);

CREATE INDEX pi_entries_ts ON pi_entries (ts) WHERE role IS NOT NULL;

-- One row per searchable unit of an entry (`store::search::docs`): `body` is the text as it
-- reads (snippets), `tsv` the words pi's tokenizer made of it, under the `simple` config (no
-- stemming, no stop words: the same matching as the local unicode61 index).
CREATE TABLE pi_docs (
    session_id text NOT NULL,
    seq        bigint NOT NULL,
    ord        integer NOT NULL,
    role       text NOT NULL,
    kind       text NOT NULL,
    ts         timestamptz,
    body       text NOT NULL,
    tsv        tsvector NOT NULL,
    PRIMARY KEY (session_id, seq, ord)
);

CREATE INDEX pi_docs_tsv ON pi_docs USING gin (tsv);

CREATE FUNCTION pi_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'pi archive entries are append-only';
END;
$$;

CREATE TRIGGER pi_entries_append_only BEFORE UPDATE ON pi_entries
    FOR EACH ROW EXECUTE FUNCTION pi_refuse_update();
CREATE TRIGGER pi_docs_append_only BEFORE UPDATE ON pi_docs
    FOR EACH ROW EXECUTE FUNCTION pi_refuse_update();
