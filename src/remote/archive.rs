//! Every statement on the remote archive: connecting, the state of a sync (schema version,
//! snapshot horizon, sessions changed since the last pull) in one round trip, a push batch in
//! one transaction, reading a session's entries for a pull, and search, listing and totals on
//! the server.
//!
//! Invariant: no statement updates or deletes an entry; a push batch is one transaction, so it
//! is stored whole or not at all.

use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, NoTls, Statement};

use crate::remote::conninfo::Target;
use crate::remote::schema;
use crate::remote::text::ArchiveDoc;
use crate::remote::{RemoteError, Result, tls};
use crate::store::derived::UsageFacts;

/// A session the archive changed since a pull horizon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedSession {
    /// Session id.
    pub id: String,
    /// Who pushed it.
    pub user: String,
    /// From which machine.
    pub host: String,
    /// One past its last entry's seq in the archive.
    pub next_seq: i64,
}

/// What one round trip tells a sync.
#[derive(Debug, Clone)]
pub struct ArchiveState {
    /// The archive's schema version.
    pub version: i64,
    /// The horizon to record once every changed session is pulled.
    pub horizon: String,
    /// The sessions whose entries changed at or after the given mark.
    pub changed: Vec<ChangedSession>,
}

/// The session a push batch belongs to.
#[derive(Debug, Clone)]
pub struct PushSession<'a> {
    /// Session id.
    pub id: &'a str,
    /// The header line.
    pub header: &'a [u8],
    /// Working directory.
    pub cwd: &'a str,
    /// Header timestamp.
    pub created_at: &'a str,
    /// Who pushes it.
    pub user: &'a str,
    /// From which machine.
    pub host: &'a str,
}

/// One entry of a push batch.
#[derive(Debug, Clone)]
pub struct PushEntry {
    /// Its seq in the pushing store.
    pub seq: i64,
    /// Entry id.
    pub entry_id: Option<String>,
    /// Parent id.
    pub parent_id: Option<String>,
    /// The `type` string.
    pub type_name: String,
    /// Its timestamp in ms since the epoch, when readable.
    pub ts_ms: Option<i64>,
    /// The exact bytes.
    pub payload: Vec<u8>,
    /// Its accounting.
    pub usage: Option<UsageFacts>,
    /// Its search documents.
    pub docs: Vec<ArchiveDoc>,
}

/// How a push batch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOutcome {
    /// Stored: `inserted` entries were new (the rest the archive had, byte for byte).
    Stored {
        /// Entries the archive did not have.
        inserted: i64,
    },
    /// Nothing stored: these seqs are in the archive with other bytes (`-1`: the header).
    Conflict {
        /// The conflicting seqs.
        seqs: Vec<i64>,
    },
}

/// Filters of search, listing and totals on the archive.
#[derive(Debug, Clone, Default)]
pub struct ArchiveFilter {
    /// Only sessions pushed by this user.
    pub user: Option<String>,
    /// Only sessions pushed from this host.
    pub host: Option<String>,
    /// Only sessions of this working directory.
    pub cwd: Option<String>,
    /// Only sessions that used a model whose `provider/id` contains this text.
    pub model: Option<String>,
    /// Only entries at or after this time.
    pub since_ms: Option<i64>,
    /// Only entries before this time.
    pub until_ms: Option<i64>,
    /// Only sessions whose id starts with this.
    pub session: Option<String>,
}

/// A search hit on the archive.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveHit {
    /// Session id.
    pub session: String,
    /// Entry id.
    pub entry: Option<String>,
    /// The entry's seq in the archive.
    pub seq: i64,
    /// Document role.
    pub role: String,
    /// Document kind.
    pub kind: String,
    /// The document's text.
    pub body: String,
    /// `ts_rank_cd`, higher is better.
    pub score: f64,
    /// Session working directory.
    pub cwd: String,
    /// Entry time, ms since the epoch.
    pub ts_ms: Option<i64>,
    /// Session name.
    pub name: Option<String>,
    /// First user message.
    pub first_message: Option<String>,
    /// Who pushed the session.
    pub user: String,
    /// From which machine.
    pub host: String,
}

/// A session as the archive lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveSession {
    /// Session id.
    pub id: String,
    /// Working directory.
    pub cwd: String,
    /// Header timestamp.
    pub created: String,
    /// Who pushed it.
    pub user: String,
    /// From which machine.
    pub host: String,
    /// Name.
    pub name: Option<String>,
    /// First user message.
    pub first_message: Option<String>,
    /// Last entry time, ms since the epoch.
    pub last_activity_ms: Option<i64>,
    /// Entries.
    pub entries: i64,
    /// `message` entries.
    pub messages: i64,
    /// Input, output, cache read, cache write tokens.
    pub tokens: [i64; 4],
    /// Cost.
    pub cost: f64,
}

/// How archive totals are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveStatsBy {
    /// UTC day.
    Day,
    /// ISO week.
    Week,
    /// `provider/model`.
    Model,
    /// Provider.
    Provider,
    /// Working directory (project).
    Cwd,
    /// Session.
    Session,
    /// The user who pushed.
    User,
    /// The machine pushed from.
    Host,
}

/// One group of archive totals.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveStatsRow {
    /// The group.
    pub key: String,
    /// Sessions in it.
    pub sessions: i64,
    /// `message` entries.
    pub messages: i64,
    /// Input, output, cache read, cache write tokens.
    pub tokens: [i64; 4],
    /// Cost.
    pub cost: f64,
}

const STATE_SQL: &str = "SELECT (SELECT max(version)::int8 FROM pi_schema_migrations),
        pg_snapshot_xmin(pg_current_snapshot())::text,
        s.id, s.user_name, s.host, s.next_seq
   FROM (SELECT 1) AS one
   LEFT JOIN pi_sessions AS s ON s.change_xid >= $1::text::xid8
  ORDER BY s.change_xid, s.id";

const PUSH_SQL: &str = "WITH input AS (
    SELECT * FROM unnest($2::int8[], $3::text[], $4::text[], $5::text[], $6::int8[], $7::bytea[],
                         $8::text[], $9::bool[], $10::text[], $11::text[], $12::int8[],
                         $13::int8[], $14::int8[], $15::int8[], $16::float8[])
        AS t(seq, entry_id, parent_id, type, ts_ms, payload, role, is_message, provider, model,
             input, output, cache_read, cache_write, cost)
), bad AS (
    -- only the batch's own range of the session is read (not every entry the session has,
    -- which made a long session's push quadratic)
    SELECT i.seq FROM input AS i
      JOIN pi_entries AS e ON e.session_id = $1 AND e.seq = i.seq
     WHERE e.seq BETWEEN (SELECT min(seq) FROM unnest($2::int8[]) AS m(seq))
                     AND (SELECT max(seq) FROM unnest($2::int8[]) AS m(seq))
       AND e.payload <> i.payload
    UNION ALL
    SELECT -1 FROM pi_sessions AS s WHERE s.id = $1 AND s.header <> $17
), ins AS (
    INSERT INTO pi_entries (session_id, seq, entry_id, parent_id, type, ts, payload, role,
                            is_message, provider, model, input, output, cache_read,
                            cache_write, cost)
    SELECT $1, seq, entry_id, parent_id, type, to_timestamp(ts_ms / 1000.0), payload, role,
           is_message, provider, model, input, output, cache_read, cache_write, cost
      FROM input WHERE NOT EXISTS (SELECT 1 FROM bad)
    ON CONFLICT (session_id, seq) DO NOTHING
    RETURNING seq, ts, is_message, input, output, cache_read, cache_write, cost
), docs AS (
    INSERT INTO pi_docs (session_id, seq, ord, role, kind, ts, body, tsv)
    SELECT $1, d.seq, d.ord, d.role, d.kind, to_timestamp(d.ts_ms / 1000.0), d.body,
           d.tsv
      FROM unnest($18::int8[], $19::int4[], $20::text[], $21::text[], $22::text[], $23::tsvector[],
                  $31::int8[])
           AS d(seq, ord, role, kind, body, tsv, ts_ms)
     WHERE NOT EXISTS (SELECT 1 FROM bad)
    -- an entry the archive already has has the same documents (same bytes, same text)
    ON CONFLICT (session_id, seq, ord) DO NOTHING
    RETURNING 1
), agg AS (
    SELECT count(*)::int8 AS n, (count(*) FILTER (WHERE is_message))::int8 AS m,
           coalesce(sum(input), 0)::int8 AS input, coalesce(sum(output), 0)::int8 AS output,
           coalesce(sum(cache_read), 0)::int8 AS cache_read,
           coalesce(sum(cache_write), 0)::int8 AS cache_write,
           coalesce(sum(cost), 0)::float8 AS cost, max(ts) AS last_ts,
           coalesce(max(seq) + 1, 0)::int8 AS next_seq
      FROM ins
), sess AS (
    INSERT INTO pi_sessions AS s (id, header, cwd, created_at, user_name, host, next_seq,
                                  entries, messages, input, output, cache_read, cache_write,
                                  cost, last_activity, name, first_message)
    SELECT $1, $17, $24, $25, $26, $27, agg.next_seq, agg.n, agg.m, agg.input, agg.output,
           agg.cache_read, agg.cache_write, agg.cost, agg.last_ts, $28, $29
      FROM agg WHERE agg.n > 0
    ON CONFLICT (id) DO UPDATE SET
        next_seq = greatest(s.next_seq, excluded.next_seq),
        entries = s.entries + excluded.entries,
        messages = s.messages + excluded.messages,
        input = s.input + excluded.input,
        output = s.output + excluded.output,
        cache_read = s.cache_read + excluded.cache_read,
        cache_write = s.cache_write + excluded.cache_write,
        cost = s.cost + excluded.cost,
        last_activity = greatest(s.last_activity, excluded.last_activity),
        name = CASE WHEN $30 THEN excluded.name ELSE s.name END,
        first_message = coalesce(s.first_message, excluded.first_message),
        change_xid = pg_current_xact_id()
    RETURNING 1
)
SELECT (SELECT array_agg(seq ORDER BY seq) FROM bad), (SELECT n FROM agg),
       (SELECT count(*)::int8 FROM docs), (SELECT count(*)::int8 FROM sess)";

/// A `tsvector` already in PostgreSQL's binary format ([`crate::remote::text::tsvector`]).
#[derive(Debug)]
struct TsVector<'a>(&'a [u8]);

impl ToSql for TsVector<'_> {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(self.0);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TS_VECTOR
    }

    to_sql_checked!();
}

/// The session row a push batch's entries belong to, created (empty) before them when the
/// archive lacks it, so that the entries' row-level security check (docs/SYNC.md) sees it.
const SESSION_SQL: &str = "INSERT INTO pi_sessions (id, header, cwd, created_at, user_name, host)
    VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING";

/// A connection to one remote archive.
pub struct Archive {
    client: Client,
    remote: String,
    /// The prepared statements of a push batch: the session row, then the entries.
    push: Option<(Statement, Statement)>,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive")
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

/// What a push batch's session-level columns say.
#[derive(Debug, Clone, Default)]
pub struct BatchMeta {
    /// The name the batch's last `session_info` sets (`Some(None)`: cleared).
    pub name: Option<Option<String>>,
    /// The first user message text in the batch.
    pub first_message: Option<String>,
}

impl Archive {
    /// Connects (TLS as the target's `sslmode` says). The schema is not checked here: the
    /// first [`Self::state`] does that in its round trip.
    pub async fn connect(target: &Target) -> Result<Self> {
        let config = target.driver_config()?;
        let remote = target.name.clone();
        let pg = |error: tokio_postgres::Error| RemoteError::from_pg(&target.name, &error);
        let client = match tls::connector(target)? {
            Some(tls) => {
                let (client, connection) = config.connect(tls).await.map_err(pg)?;
                tokio::spawn(async move {
                    let _ = connection.await;
                });
                client
            }
            None => {
                let (client, connection) = config.connect(NoTls).await.map_err(pg)?;
                tokio::spawn(async move {
                    let _ = connection.await;
                });
                client
            }
        };
        Ok(Self {
            client,
            remote,
            push: None,
        })
    }

    /// The remote's name.
    pub fn remote(&self) -> &str {
        &self.remote
    }

    fn pg(&self) -> impl Fn(tokio_postgres::Error) -> RemoteError + '_ {
        |error| RemoteError::from_pg(&self.remote, &error)
    }

    /// Creates or migrates the archive's schema (refusing one from a newer pi).
    pub async fn ensure_schema(&mut self) -> Result<i64> {
        schema::ensure(&mut self.client, &self.remote).await
    }

    /// The sync's first round trip: schema version, snapshot horizon and the sessions changed
    /// at or after `mark` (`None`: every session). A missing or older schema is created or
    /// migrated first (then the query runs again); a newer one is refused untouched.
    pub async fn state(&mut self, mark: Option<&str>) -> Result<ArchiveState> {
        let mark = mark.unwrap_or("0");
        for attempt in 0..2 {
            let rows = self
                .client
                .query_typed(STATE_SQL, &[(&mark, Type::TEXT)])
                .await;
            let rows = match rows {
                Ok(rows) => rows,
                Err(error)
                    if attempt == 0
                        && error.code()
                            == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) =>
                {
                    self.ensure_schema().await?;
                    continue;
                }
                Err(error) => return Err(RemoteError::from_pg(&self.remote, &error)),
            };
            let Some(first) = rows.first() else {
                return Err(RemoteError::Server {
                    remote: self.remote.clone(),
                    message: "the state query returned no row".to_owned(),
                });
            };
            let version: Option<i64> = first.get(0);
            let version = version.unwrap_or(0);
            if version != schema::latest_version() {
                if attempt == 0 {
                    self.ensure_schema().await?;
                    continue;
                }
                return Err(RemoteError::NewerSchema {
                    remote: self.remote.clone(),
                    found: version,
                    known: schema::latest_version(),
                });
            }
            let horizon: String = first.get(1);
            let changed = rows
                .iter()
                .filter_map(|row| {
                    let id: Option<String> = row.get(2);
                    Some(ChangedSession {
                        id: id?,
                        user: row.get(3),
                        host: row.get(4),
                        next_seq: row.get(5),
                    })
                })
                .collect();
            return Ok(ArchiveState {
                version,
                horizon,
                changed,
            });
        }
        Err(RemoteError::Server {
            remote: self.remote.clone(),
            message: "the archive schema could not be brought up to date".to_owned(),
        })
    }

    /// Stores one batch of a session's entries, all or nothing, in one transaction.
    pub async fn push_batch(
        &mut self,
        session: &PushSession<'_>,
        entries: &[PushEntry],
        meta: &BatchMeta,
    ) -> Result<PushOutcome> {
        if self.push.is_none() {
            let session_row = self.client.prepare(SESSION_SQL).await.map_err(self.pg())?;
            let statement = self.client.prepare(PUSH_SQL).await.map_err(self.pg())?;
            self.push = Some((session_row, statement));
        }
        let Some((session_row, statement)) = self.push.clone() else {
            return Err(RemoteError::Server {
                remote: self.remote.clone(),
                message: "the push statement is not prepared".to_owned(),
            });
        };
        let seqs: Vec<i64> = entries.iter().map(|e| e.seq).collect();
        let ids: Vec<Option<&str>> = entries.iter().map(|e| e.entry_id.as_deref()).collect();
        let parents: Vec<Option<&str>> = entries.iter().map(|e| e.parent_id.as_deref()).collect();
        let types: Vec<&str> = entries.iter().map(|e| e.type_name.as_str()).collect();
        let ts: Vec<Option<i64>> = entries.iter().map(|e| e.ts_ms).collect();
        let payloads: Vec<&[u8]> = entries.iter().map(|e| e.payload.as_slice()).collect();
        let usage = |f: &dyn Fn(&UsageFacts) -> i64| -> Vec<i64> {
            entries
                .iter()
                .map(|e| e.usage.as_ref().map_or(0, f))
                .collect()
        };
        let roles: Vec<Option<&str>> = entries
            .iter()
            .map(|e| e.usage.as_ref().map(|u| u.role.as_str()))
            .collect();
        let is_message: Vec<bool> = entries
            .iter()
            .map(|e| e.usage.as_ref().is_some_and(|u| u.is_message))
            .collect();
        let providers: Vec<Option<&str>> = entries
            .iter()
            .map(|e| e.usage.as_ref().and_then(|u| u.provider.as_deref()))
            .collect();
        let models: Vec<Option<&str>> = entries
            .iter()
            .map(|e| e.usage.as_ref().and_then(|u| u.model.as_deref()))
            .collect();
        let input = usage(&|u| u.input);
        let output = usage(&|u| u.output);
        let cache_read = usage(&|u| u.cache_read);
        let cache_write = usage(&|u| u.cache_write);
        let cost: Vec<f64> = entries
            .iter()
            .map(|e| e.usage.as_ref().map_or(0.0, |u| u.cost))
            .collect();
        let mut doc_seq = Vec::new();
        let mut doc_ord = Vec::new();
        let mut doc_role = Vec::new();
        let mut doc_kind = Vec::new();
        let mut doc_body = Vec::new();
        let mut doc_words = Vec::new();
        let mut doc_ts = Vec::new();
        for entry in entries {
            for (ord, doc) in entry.docs.iter().enumerate() {
                doc_seq.push(entry.seq);
                doc_ts.push(entry.ts_ms);
                doc_ord.push(i32::try_from(ord).unwrap_or(i32::MAX));
                doc_role.push(doc.role);
                doc_kind.push(doc.kind);
                doc_body.push(doc.body.as_str());
                doc_words.push(TsVector(&doc.tsv));
            }
        }
        let name_set = meta.name.is_some();
        let name: Option<&str> = meta.name.as_ref().and_then(|name| name.as_deref());
        let first: Option<&str> = meta.first_message.as_deref();
        let params: [&(dyn ToSql + Sync); 31] = [
            &session.id,
            &seqs,
            &ids,
            &parents,
            &types,
            &ts,
            &payloads,
            &roles,
            &is_message,
            &providers,
            &models,
            &input,
            &output,
            &cache_read,
            &cache_write,
            &cost,
            &session.header,
            &doc_seq,
            &doc_ord,
            &doc_role,
            &doc_kind,
            &doc_body,
            &doc_words,
            &session.cwd,
            &session.created_at,
            &session.user,
            &session.host,
            &name,
            &first,
            &name_set,
            &doc_ts,
        ];
        // One transaction: the session row (when new), then the entries, their documents and
        // the session's counters in one statement; a conflict rolls it all back.
        let remote = self.remote.clone();
        let pg = |error: tokio_postgres::Error| RemoteError::from_pg(&remote, &error);
        let tx = self.client.transaction().await.map_err(pg)?;
        tx.execute(
            &session_row,
            &[
                &session.id,
                &session.header,
                &session.cwd,
                &session.created_at,
                &session.user,
                &session.host,
            ],
        )
        .await
        .map_err(pg)?;
        let row = tx.query_one(&statement, &params).await.map_err(pg)?;
        let conflicts: Option<Vec<i64>> = row.get(0);
        match conflicts {
            Some(seqs) if !seqs.is_empty() => {
                tx.rollback().await.map_err(pg)?;
                Ok(PushOutcome::Conflict { seqs })
            }
            _ => {
                tx.commit().await.map_err(pg)?;
                Ok(PushOutcome::Stored {
                    inserted: row.get::<_, Option<i64>>(1).unwrap_or(0),
                })
            }
        }
    }

    /// The header of an archived session.
    pub async fn header(&self, session: &str) -> Result<Option<Vec<u8>>> {
        let row = self
            .client
            .query_opt("SELECT header FROM pi_sessions WHERE id = $1", &[&session])
            .await
            .map_err(self.pg())?;
        Ok(row.map(|row| row.get(0)))
    }

    /// At most `limit` entries of an archived session from `from_seq` on: `(seq, payload)`.
    pub async fn entries_from(
        &self,
        session: &str,
        from_seq: i64,
        limit: i64,
    ) -> Result<Vec<(i64, Vec<u8>)>> {
        let rows = self
            .client
            .query(
                "SELECT seq, payload FROM pi_entries
                  WHERE session_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3",
                &[&session, &from_seq, &limit],
            )
            .await
            .map_err(self.pg())?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    /// Every entry of an archived session, `(seq, payload)`, for comparisons (tests, `db`).
    pub async fn all_entries(&self, session: &str) -> Result<Vec<(i64, Vec<u8>)>> {
        self.entries_from(session, 0, i64::MAX).await
    }
}

/// The filter clauses over `s` (sessions) and `ts` (an entry-time expression), with their
/// parameters appended from `first`.
fn filter_sql(
    filter: &ArchiveFilter,
    ts: &str,
    first: usize,
) -> (String, Vec<Box<dyn ToSql + Sync + Send>>) {
    let mut clauses = Vec::new();
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    let mut next = first;
    let mut push = |clause: String, value: Box<dyn ToSql + Sync + Send>| {
        clauses.push(clause.replace("$?", &format!("${next}")));
        params.push(value);
        next += 1;
    };
    if let Some(user) = &filter.user {
        push("s.user_name = $?::text".to_owned(), Box::new(user.clone()));
    }
    if let Some(host) = &filter.host {
        push("s.host = $?::text".to_owned(), Box::new(host.clone()));
    }
    if let Some(cwd) = &filter.cwd {
        push("s.cwd = $?::text".to_owned(), Box::new(cwd.clone()));
    }
    if let Some(session) = &filter.session {
        push(
            "starts_with(s.id, $?::text)".to_owned(),
            Box::new(session.clone()),
        );
    }
    if let Some(model) = &filter.model {
        push(
            "EXISTS (SELECT 1 FROM pi_entries AS me WHERE me.session_id = s.id
                 AND me.model IS NOT NULL
                 AND strpos(lower(coalesce(me.provider, '') || '/' || me.model), lower($?::text)) > 0)"
                .to_owned(),
            Box::new(model.clone()),
        );
    }
    if let Some(since) = filter.since_ms {
        push(
            format!("{ts} >= to_timestamp($?::int8 / 1000.0)"),
            Box::new(since),
        );
    }
    if let Some(until) = filter.until_ms {
        push(
            format!("{ts} < to_timestamp($?::int8 / 1000.0)"),
            Box::new(until),
        );
    }
    let sql = if clauses.is_empty() {
        "TRUE".to_owned()
    } else {
        clauses.join(" AND ")
    };
    (sql, params)
}

/// How many of the newest matching documents a search ranks (docs/SYNC.md).
pub const RECENT_MATCHES: i64 = 1_000;

fn ms_of(column: &str) -> String {
    format!("(extract(epoch FROM {column}) * 1000)::int8")
}

impl Archive {
    /// Full-text search on the server (`tsquery` from [`crate::remote::text::tsquery`]).
    pub async fn search(
        &self,
        tsquery: &str,
        filter: &ArchiveFilter,
        roles: &[String],
        kinds: &[String],
        limit: i64,
    ) -> Result<Vec<ArchiveHit>> {
        let (where_sql, extra) = filter_sql(filter, "d.ts", 5);
        // The newest RECENT_MATCHES matching documents (after the filters) are ranked: a
        // word in many documents walks `pi_docs_ts` from the newest end and stops there, a
        // rare one comes from the GIN index; the query text is a constant to the planner
        // (an unnamed statement is planned with its parameters), so it knows which.
        let sql = format!(
            "SELECT r.session_id, e.entry_id, r.seq, r.role, r.kind, r.body,
                    ts_rank_cd(r.tsv, $1::text::tsquery, 32)::float8 AS score, r.cwd, {ts},
                    r.name, r.first_message, r.user_name, r.host
               FROM (SELECT d.session_id, d.seq, d.ord, d.role, d.kind, d.body, d.ts, d.tsv,
                            s.cwd, s.name, s.first_message, s.user_name, s.host
                       FROM pi_docs AS d
                       JOIN pi_sessions AS s ON s.id = d.session_id
                      WHERE d.tsv @@ $1::text::tsquery
                        AND (cardinality($2::text[]) = 0 OR d.role = ANY($2::text[]))
                        AND (cardinality($3::text[]) = 0 OR d.kind = ANY($3::text[]))
                        AND {where_sql}
                      ORDER BY d.ts DESC NULLS LAST
                      LIMIT {RECENT_MATCHES}) AS r
               JOIN pi_entries AS e ON e.session_id = r.session_id AND e.seq = r.seq
              ORDER BY score DESC, r.ts DESC NULLS LAST, r.session_id, r.seq, r.ord
              LIMIT $4::int8",
            ts = ms_of("r.ts"),
        );
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&tsquery, &roles, &kinds, &limit];
        for value in &extra {
            params.push(value.as_ref() as &(dyn ToSql + Sync));
        }
        let rows = self.client.query(&sql, &params).await.map_err(self.pg())?;
        Ok(rows
            .iter()
            .map(|row| ArchiveHit {
                session: row.get(0),
                entry: row.get(1),
                seq: row.get(2),
                role: row.get(3),
                kind: row.get(4),
                body: row.get(5),
                score: row.get(6),
                cwd: row.get(7),
                ts_ms: row.get(8),
                name: row.get(9),
                first_message: row.get(10),
                user: row.get(11),
                host: row.get(12),
            })
            .collect())
    }

    /// The archived sessions, latest activity first.
    pub async fn list(&self, filter: &ArchiveFilter, limit: i64) -> Result<Vec<ArchiveSession>> {
        let (where_sql, extra) = filter_sql(filter, "s.last_activity", 2);
        let sql = format!(
            "SELECT s.id, s.cwd, s.created_at, s.user_name, s.host, s.name, s.first_message,
                    {last}, s.entries, s.messages, s.input, s.output, s.cache_read,
                    s.cache_write, s.cost
               FROM pi_sessions AS s
              WHERE {where_sql}
              ORDER BY s.last_activity DESC NULLS LAST, s.id
              LIMIT $1::int8",
            last = ms_of("s.last_activity"),
        );
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&limit];
        for value in &extra {
            params.push(value.as_ref() as &(dyn ToSql + Sync));
        }
        let rows = self.client.query(&sql, &params).await.map_err(self.pg())?;
        Ok(rows
            .iter()
            .map(|row| ArchiveSession {
                id: row.get(0),
                cwd: row.get(1),
                created: row.get(2),
                user: row.get(3),
                host: row.get(4),
                name: row.get(5),
                first_message: row.get(6),
                last_activity_ms: row.get(7),
                entries: row.get(8),
                messages: row.get(9),
                tokens: [row.get(10), row.get(11), row.get(12), row.get(13)],
                cost: row.get(14),
            })
            .collect())
    }

    /// Token and cost totals grouped by `by`, and the number of sessions they come from.
    pub async fn stats(
        &self,
        by: ArchiveStatsBy,
        filter: &ArchiveFilter,
    ) -> Result<(Vec<ArchiveStatsRow>, i64)> {
        let key = match by {
            ArchiveStatsBy::Day => "to_char(e.ts AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
            ArchiveStatsBy::Week => "to_char(e.ts AT TIME ZONE 'UTC', 'IYYY-\"W\"IW')",
            ArchiveStatsBy::Model => "coalesce(e.provider || '/' || e.model, '(no model)')",
            ArchiveStatsBy::Provider => "coalesce(e.provider, '(no model)')",
            ArchiveStatsBy::Cwd => "s.cwd",
            ArchiveStatsBy::Session => "s.id",
            ArchiveStatsBy::User => "s.user_name",
            ArchiveStatsBy::Host => "s.host",
        };
        let (where_sql, extra) = filter_sql(filter, "e.ts", 1);
        let from = format!(
            "FROM pi_entries AS e JOIN pi_sessions AS s ON s.id = e.session_id
              WHERE e.role IS NOT NULL AND {where_sql}"
        );
        let sql = format!(
            "SELECT coalesce({key}, '(no time)'), count(DISTINCT e.session_id)::int8,
                    (count(*) FILTER (WHERE e.is_message))::int8,
                    coalesce(sum(e.input), 0)::int8, coalesce(sum(e.output), 0)::int8,
                    coalesce(sum(e.cache_read), 0)::int8, coalesce(sum(e.cache_write), 0)::int8,
                    coalesce(sum(e.cost), 0)::float8
               {from}
              GROUP BY 1 ORDER BY 1"
        );
        let params: Vec<&(dyn ToSql + Sync)> = extra
            .iter()
            .map(|value| value.as_ref() as &(dyn ToSql + Sync))
            .collect();
        let rows = self.client.query(&sql, &params).await.map_err(self.pg())?;
        let sessions: i64 = self
            .client
            .query_one(
                &format!("SELECT count(DISTINCT e.session_id)::int8 {from}"),
                &params,
            )
            .await
            .map_err(self.pg())?
            .get(0);
        Ok((
            rows.iter()
                .map(|row| ArchiveStatsRow {
                    key: row.get(0),
                    sessions: row.get(1),
                    messages: row.get(2),
                    tokens: [row.get(3), row.get(4), row.get(5), row.get(6)],
                    cost: row.get(7),
                })
                .collect(),
            sessions,
        ))
    }
}
