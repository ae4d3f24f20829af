//! The full-text index's SQL: adding and removing a session's documents (with the store's own
//! totals for bm25, `search_totals`), the candidate walks of a query, FTS5's `bm25()`, its
//! vocabulary of instances (`fts5vocab`), and merging the index. Only FTS5's documented
//! interfaces: `MATCH`, `rowid` order, auxiliary functions, `fts5vocab` and the special
//! `INSERT` commands — never its shadow tables.

use rusqlite::{OptionalExtension, params};

use crate::store::db::Db;
use crate::store::error::{SqliteContext, StoreError};
use crate::store::search::bm25::TermFrequencies;
use crate::store::search::docid;
use crate::store::search::docs::{Doc, index_text, token_count};
use crate::store::sql::{EntryRow, entry_row};

/// Result alias for this module.
pub type Result<T> = std::result::Result<T, StoreError>;

/// Which full-text index a write goes to: the live one that search reads, or the one a
/// stepped `pi db reindex` is building beside it (migration 0009), swapped in by its last step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// `search_docs`, `search_fts`, `search_totals`.
    Live,
    /// `search_docs_next`, `search_fts_next`, `search_totals_next`.
    Next,
}

impl Index {
    fn docs(self) -> &'static str {
        match self {
            Self::Live => "search_docs",
            Self::Next => "search_docs_next",
        }
    }

    fn fts(self) -> &'static str {
        match self {
            Self::Live => "search_fts",
            Self::Next => "search_fts_next",
        }
    }

    fn totals(self) -> &'static str {
        match self {
            Self::Live => "search_totals",
            Self::Next => "search_totals_next",
        }
    }
}

/// The last sid a stepped reindex has rebuilt, while one runs (`search_reindex`).
pub fn reindex_cursor(db: Db<'_>) -> Result<Option<i64>> {
    db.row(
        "SELECT cursor FROM search_reindex WHERE one = 1",
        [],
        |row| row.get(0),
    )
}

/// The indexes a live write of session `sid` goes to: the live one, and the next one too
/// when a running reindex has already rebuilt the session.
pub fn live_targets(db: Db<'_>, sid: i64) -> Result<&'static [Index]> {
    Ok(match reindex_cursor(db)? {
        Some(cursor) if sid <= cursor => &[Index::Live, Index::Next],
        _ => &[Index::Live],
    })
}

/// Deletes a session's search documents and their FTS rows (in the next index too while a
/// reindex runs).
pub fn delete_search_rows(db: Db<'_>, sid: i64) -> Result<()> {
    let indexes: &[Index] = if reindex_cursor(db)?.is_some() {
        &[Index::Live, Index::Next]
    } else {
        &[Index::Live]
    };
    for index in indexes {
        delete_search_rows_in(db, *index, sid)?;
    }
    Ok(())
}

/// Deletes a session's search documents, FTS rows and totals from one index.
pub fn delete_search_rows_in(db: Db<'_>, index: Index, sid: i64) -> Result<()> {
    let (docs, fts, totals) = (index.docs(), index.fts(), index.totals());
    db.execute_uncached(
        &format!("DELETE FROM {fts} WHERE rowid IN (SELECT docid FROM {docs} WHERE sid = ?1)"),
        params![sid],
    )?;
    db.execute_uncached(&format!("DELETE FROM {docs} WHERE sid = ?1"), params![sid])?;
    db.execute_uncached(
        &format!("DELETE FROM {totals} WHERE sid = ?1"),
        params![sid],
    )?;
    Ok(())
}

/// Deletes one entry's search documents from every index that has them (the live one, and
/// the next one while a reindex runs), and takes them out of their session's totals: `docs`
/// are the entry's documents ([`crate::store::search::docs::docs_for`]), whose token counts
/// the totals hold (a merge's rollback, migration 0011).
pub fn delete_entry_search_rows(db: Db<'_>, sid: i64, seq: i64, docs: &[Doc<'_>]) -> Result<()> {
    let tokens: usize = docs
        .iter()
        .map(|doc| token_count(&index_text(&doc.text)))
        .sum();
    let indexes: &[Index] = if reindex_cursor(db)?.is_some() {
        &[Index::Live, Index::Next]
    } else {
        &[Index::Live]
    };
    for index in indexes {
        let (docs_table, fts, totals) = (index.docs(), index.fts(), index.totals());
        db.execute(
            &format!(
                "DELETE FROM {fts} WHERE rowid IN (SELECT docid FROM {docs_table} WHERE sid = ?1 AND seq = ?2)"
            ),
            params![sid, seq],
        )?;
        let removed = db.execute(
            &format!("DELETE FROM {docs_table} WHERE sid = ?1 AND seq = ?2"),
            params![sid, seq],
        )?;
        if removed > 0 {
            db.execute(
                &format!(
                    "UPDATE {totals} SET docs = MAX(docs - ?2, 0), tokens = MAX(tokens - ?3, 0)
                      WHERE sid = ?1"
                ),
                params![sid, removed as i64, tokens as i64],
            )?;
        }
    }
    Ok(())
}

/// Adds one search document and its FTS row to each of `indexes` (a live write:
/// [`live_targets`]; a reindex step: the next index alone), under a docid that carries its
/// day and length (see [`docid`]), and counts it in its session's totals.
pub fn insert_search_doc_into(
    db: Db<'_>,
    indexes: &[Index],
    sid: i64,
    seq: i64,
    doc: &Doc<'_>,
    ts: i64,
) -> Result<()> {
    let indexed = index_text(&doc.text);
    let tokens = token_count(&indexed);
    for index in indexes {
        let (docs, fts, totals) = (index.docs(), index.fts(), index.totals());
        let docid = allocate_docid(db, *index, ts, tokens)?;
        db.execute(
            &format!(
                "INSERT INTO {docs} (docid, sid, seq, role, kind, ts) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
            ),
            params![docid, sid, seq, doc.role, doc.kind, ts],
        )?;
        db.execute(
            &format!("INSERT INTO {fts} (rowid, body) VALUES (?1, ?2)"),
            params![docid, indexed],
        )?;
        db.execute(
            &format!(
                "INSERT INTO {totals} (sid, docs, tokens) VALUES (?1, 1, ?2)
                 ON CONFLICT (sid) DO UPDATE SET docs = docs + 1, tokens = tokens + excluded.tokens"
            ),
            params![sid, tokens as i64],
        )?;
    }
    Ok(())
}

/// The index's totals for bm25 — documents and tokens — summed over the sessions' rows of
/// `search_totals` (exact: a session's rows go with its documents); `None` when nothing is
/// indexed.
pub fn totals(db: Db<'_>) -> Result<Option<(i64, i64)>> {
    let (docs, tokens): (Option<i64>, Option<i64>) = db.one(
        "SELECT SUM(docs), SUM(tokens) FROM search_totals",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    Ok(match (docs, tokens) {
        (Some(docs), Some(tokens)) if docs > 0 => Some((docs, tokens)),
        _ => None,
    })
}

/// Picks the next free docid of the entry's day (the next day when one is full).
fn allocate_docid(db: Db<'_>, index: Index, ts: i64, tokens: usize) -> Result<i64> {
    let mut day = docid::day_of_ms(ts);
    let mut stmt = db.prepare(&format!(
        "SELECT max(docid) FROM {} WHERE docid >= ?1 AND docid < ?2",
        index.docs()
    ))?;
    while docid::day_in_range(day) {
        let last: Option<i64> = stmt
            .query_row(
                params![docid::first_of_day(day), docid::first_of_day(day + 1)],
                |row| row.get(0),
            )
            .at(db.path())?;
        let order = last.map_or(0, |last| docid::order(last) + 1);
        if order < docid::PER_DAY {
            return Ok(docid::make(day, order, tokens));
        }
        day += 1;
    }
    Err(StoreError::Corrupt {
        path: db.path().to_owned(),
        message: "the search index has no docid left after this entry's time".to_owned(),
    })
}

/// A search document's row in the document map.
#[derive(Debug, Clone)]
pub struct DocRow {
    /// Session key.
    pub sid: i64,
    /// Entry seq.
    pub seq: i64,
    /// Role of the document.
    pub role: String,
    /// Kind of the document.
    pub kind: String,
    /// Entry time, Unix ms.
    pub ts: i64,
}

/// One FTS candidate: a document that matched, with its bm25 rank, and its document-map row
/// when the search needed it (filters by session, directory, time, model or branch).
#[derive(Debug, Clone)]
pub struct Candidate {
    /// FTS rowid / search_docs key.
    pub docid: i64,
    /// bm25 (lower is better).
    pub bm25: f64,
    /// The document-map row, when read (boxed: a search holds up to 2,000 candidates, most
    /// without one).
    pub doc: Option<Box<DocRow>>,
}

/// SQL filters of a search.
#[derive(Debug, Clone, Default)]
pub struct SearchFilter<'a> {
    /// Only sessions whose cwd equals this.
    pub cwd: Option<&'a str>,
    /// Only this session.
    pub sid: Option<i64>,
    /// Only these roles (empty: all).
    pub roles: &'a [String],
    /// Only these kinds (empty: all).
    pub kinds: &'a [String],
    /// Entry time at or after (Unix ms).
    pub since_ms: Option<i64>,
    /// Entry time before (Unix ms).
    pub until_ms: Option<i64>,
    /// Only documents at or after this docid (bounds a second pass to the first one's window).
    pub min_docid: Option<i64>,
    /// Read each candidate's document-map row (else only the docid is read).
    pub with_doc: bool,
}

impl SearchFilter<'_> {
    /// Whether no filter narrows the matches (every match of the query is a candidate).
    pub fn is_unfiltered(&self) -> bool {
        !self.needs_doc() && self.min_docid.is_none()
    }

    /// Whether a candidate must be checked against its document-map row.
    pub fn needs_doc(&self) -> bool {
        self.cwd.is_some()
            || self.sid.is_some()
            || self.since_ms.is_some()
            || self.until_ms.is_some()
            || !self.roles.is_empty()
            || !self.kinds.is_empty()
    }
}

/// Which matches [`search_candidates`] walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walk {
    /// The most recent this many (FTS5's reverse walk, stopped there).
    Newest(i64),
    /// All of them, in FTS5's forward order, returned newest first: for a query whose terms
    /// bound its matches. The forward walk does less work per document, and an AND skips
    /// through its longer lists by their doclist indexes instead of reading every entry.
    All,
}

/// Returns the documents matching an FTS5 expression and the filters, newest first, as `walk`
/// says; `bm25` is computed only when asked (FTS5 counts every document of each term for it,
/// and reads each candidate's length), else it is 0. The document map is joined only when
/// `filter.with_doc` or a filter needs it; `--since` also bounds the docid range.
pub fn search_candidates(
    db: Db<'_>,
    fts: &str,
    filter: &SearchFilter<'_>,
    walk: Walk,
    with_bm25: bool,
) -> Result<Vec<Candidate>> {
    let rank = if with_bm25 { "bm25(search_fts)" } else { "0.0" };
    let join = filter.with_doc || filter.needs_doc();
    let mut sql = if join {
        format!(
            "SELECT search_fts.rowid, {rank}, d.sid, d.seq, d.role, d.kind, d.ts
               FROM search_fts CROSS JOIN search_docs d ON d.docid = search_fts.rowid"
        )
    } else {
        format!("SELECT search_fts.rowid, {rank} FROM search_fts")
    };
    if filter.cwd.is_some() {
        sql.push_str(" CROSS JOIN sessions s ON s.sid = d.sid");
    }
    sql.push_str(" WHERE search_fts MATCH ?1");
    let mut values: Vec<rusqlite::types::Value> = vec![fts.to_owned().into()];
    let mut push = |clause: &str, value: rusqlite::types::Value, sql: &mut String| {
        values.push(value);
        sql.push_str(&clause.replace('?', &format!("?{}", values.len())));
    };
    if let Some(cwd) = filter.cwd {
        push(" AND s.cwd = ?", cwd.to_owned().into(), &mut sql);
    }
    if let Some(sid) = filter.sid {
        push(" AND d.sid = ?", sid.into(), &mut sql);
    }
    let mut lowest = filter.min_docid;
    if let Some(since) = filter.since_ms {
        // Docids sort by day: the range starts at the day of `since` (a full day spills
        // only later), the exact time is checked on the row.
        let first = docid::first_of_day(docid::day_of_ms(since));
        lowest = Some(lowest.map_or(first, |low| low.max(first)));
        push(" AND d.ts >= ?", since.into(), &mut sql);
    }
    if let Some(low) = lowest {
        push(" AND search_fts.rowid >= ?", low.into(), &mut sql);
    }
    if let Some(until) = filter.until_ms {
        push(" AND d.ts < ?", until.into(), &mut sql);
    }
    for (column, list) in [("d.role", filter.roles), ("d.kind", filter.kinds)] {
        if list.is_empty() {
            continue;
        }
        sql.push_str(&format!(" AND {column} IN ("));
        for (idx, item) in list.iter().enumerate() {
            if idx > 0 {
                sql.push(',');
            }
            push("?", item.clone().into(), &mut sql);
        }
        sql.push(')');
    }
    if let Walk::Newest(limit) = walk {
        push(
            " ORDER BY search_fts.rowid DESC LIMIT ?",
            limit.into(),
            &mut sql,
        );
    }
    let mut out = db.rows(&sql, rusqlite::params_from_iter(values.iter()), |row| {
        let doc = if join {
            Some(Box::new(DocRow {
                sid: row.get(2)?,
                seq: row.get(3)?,
                role: row.get(4)?,
                kind: row.get(5)?,
                ts: row.get(6)?,
            }))
        } else {
            None
        };
        Ok(Candidate {
            docid: row.get(0)?,
            bm25: row.get(1)?,
            doc,
        })
    })?;
    if walk == Walk::All {
        out.reverse();
    }
    Ok(out)
}

/// Counts the newest matches of an FTS5 expression, up to `cap`, and returns them with the
/// first `keep` of them as candidates (no filter, no document row, `bm25` 0): a one-term
/// search's count and candidates in one walk, without a row struct per counted match.
pub fn newest_matches(
    db: Db<'_>,
    fts: &str,
    cap: i64,
    keep: usize,
) -> Result<(i64, Vec<Candidate>)> {
    let mut stmt = db.prepare(
        "SELECT rowid FROM search_fts WHERE search_fts MATCH ?1 ORDER BY rowid DESC LIMIT ?2",
    )?;
    let mut rows = stmt.query(params![fts, cap]).at(db.path())?;
    let mut count = 0i64;
    let mut kept = Vec::with_capacity(keep.min(usize::try_from(cap).unwrap_or(0)));
    while let Some(row) = rows.next().at(db.path())? {
        count += 1;
        if kept.len() < keep {
            kept.push(Candidate {
                docid: row.get(0).at(db.path())?,
                bm25: 0.0,
                doc: None,
            });
        }
    }
    Ok((count, kept))
}

/// The sessions a filter keeps, when it keeps only some sessions and nothing else about a
/// document (no role, kind or time filter): `--session`, or a directory's sessions.
pub fn scope_sids(db: Db<'_>, filter: &SearchFilter<'_>) -> Result<Option<Vec<i64>>> {
    if !filter.roles.is_empty()
        || !filter.kinds.is_empty()
        || filter.since_ms.is_some()
        || filter.until_ms.is_some()
    {
        return Ok(None);
    }
    let mut sids = match filter.cwd {
        Some(cwd) => db.rows(
            "SELECT sid FROM sessions WHERE cwd = ?1",
            params![cwd],
            |row| row.get(0),
        )?,
        None => match filter.sid {
            Some(sid) => vec![sid],
            None => return Ok(None),
        },
    };
    if let (Some(sid), Some(_)) = (filter.sid, filter.cwd) {
        sids.retain(|found| *found == sid);
    }
    Ok(Some(sids))
}

/// The number of entries of these sessions (an upper bound of their search documents'
/// count, give or take the assistant messages that make several).
pub fn scope_entries(db: Db<'_>, sids: &[i64]) -> Result<i64> {
    let mut stmt = db.prepare("SELECT entries FROM session_stats WHERE sid = ?1")?;
    let mut total = 0i64;
    for sid in sids {
        let entries: Option<i64> = stmt
            .query_row(params![sid], |row| row.get(0))
            .optional()
            .at(db.path())?;
        total = total.saturating_add(entries.unwrap_or(0));
    }
    Ok(total)
}

/// The docids of these sessions' search documents, sorted (from the `(sid, seq)` index, which
/// holds the docid: no table read).
pub fn scope_docids(db: Db<'_>, sids: &[i64]) -> Result<Vec<i64>> {
    let mut stmt = db.prepare("SELECT docid FROM search_docs WHERE sid = ?1")?;
    let mut out = Vec::new();
    for sid in sids {
        let rows = stmt
            .query_map(params![sid], |row| row.get(0))
            .at(db.path())?;
        for row in rows {
            out.push(row.at(db.path())?);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The most recent `limit` documents matching an FTS5 expression whose docid is in `scope`
/// (sorted docids; docid order, newest first; `bm25` 0, no document-map row), from `min_docid`
/// on. Only the docid range the scope spans is read (a session's days, not the whole index).
pub fn candidates_in(
    db: Db<'_>,
    fts: &str,
    scope: &[i64],
    min_docid: Option<i64>,
    limit: usize,
) -> Result<Vec<Candidate>> {
    let (Some(&first), Some(&last)) = (scope.first(), scope.last()) else {
        return Ok(Vec::new());
    };
    let mut stmt = db.prepare(
        "SELECT rowid FROM search_fts WHERE search_fts MATCH ?1 AND rowid >= ?2 AND rowid <= ?3
              ORDER BY rowid DESC",
    )?;
    let mut rows = stmt
        .query(params![
            fts,
            min_docid.map_or(first, |low| low.max(first)),
            last
        ])
        .at(db.path())?;
    let mut out = Vec::new();
    while out.len() < limit {
        let Some(row) = rows.next().at(db.path())? else {
            break;
        };
        let docid: i64 = row.get(0).at(db.path())?;
        if scope.binary_search(&docid).is_ok() {
            out.push(Candidate {
                docid,
                bm25: 0.0,
                doc: None,
            });
        }
    }
    Ok(out)
}

/// Returns a document's row in the document map.
pub fn doc_by_id(db: Db<'_>, docid: i64) -> Result<Option<DocRow>> {
    db.row(
        "SELECT sid, seq, role, kind, ts FROM search_docs WHERE docid = ?1",
        params![docid],
        |row| {
            Ok(DocRow {
                sid: row.get(0)?,
                seq: row.get(1)?,
                role: row.get(2)?,
                kind: row.get(3)?,
                ts: row.get(4)?,
            })
        },
    )
}

/// Returns a document's row in the document map with its entry, in one statement (a hit
/// shown needs both).
pub fn doc_and_entry(db: Db<'_>, docid: i64) -> Result<Option<(DocRow, EntryRow)>> {
    db.row("SELECT e.seq, e.id, e.parent_id, e.type, e.timestamp, e.payload, d.sid, d.role, d.kind, d.ts
           FROM search_docs d JOIN entries e ON e.sid = d.sid AND e.seq = d.seq
          WHERE d.docid = ?1", params![docid], |row| {
        let entry = entry_row(row)?;
        let doc = DocRow {
            sid: row.get(6)?,
            seq: entry.seq,
            role: row.get(7)?,
            kind: row.get(8)?,
            ts: row.get(9)?,
        };
        Ok((doc, entry))
    })
}

/// Counts the occurrences of one indexed token (or of every token starting with it) per
/// document, from FTS5's vocabulary of instances; `None` when more than `cap` documents have
/// it. Reads the token's position lists only — no row per document.
pub fn term_frequencies(
    db: Db<'_>,
    token: &str,
    prefix: bool,
    cap: usize,
) -> Result<Option<TermFrequencies>> {
    db.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.search_vocab
           USING fts5vocab(main, 'search_fts', 'instance')",
        [],
    )?;
    let mut stmt = if prefix {
        db.prepare("SELECT doc FROM temp.search_vocab WHERE term >= ?1 AND term < ?2")
    } else {
        db.prepare("SELECT doc FROM temp.search_vocab WHERE term = ?1 AND ?2 IS NOT NULL")
    }?;
    let upper = format!("{token}\u{10FFFF}");
    let mut rows = stmt.query(params![token, upper]).at(db.path())?;
    let mut out = TermFrequencies::default();
    // Rows come by token, then docid: a prefix's documents repeat across its tokens, so its
    // count is exact only once merged (done again each time the list grows by `cap`).
    let mut check_at = cap;
    while let Some(row) = rows.next().at(db.path())? {
        out.add(row.get(0).at(db.path())?);
        if out.docs() > check_at {
            out.finish();
            if out.docs() > cap {
                return Ok(None);
            }
            check_at = out.docs() + cap;
        }
    }
    out.finish();
    Ok(Some(out))
}

/// Counts the documents matching an FTS5 expression, stopping at `cap`. In FTS5's own order
/// (oldest first): its reverse walk decodes each page twice, more work per document than the
/// pages the candidates' newest-first walk then shares with it saves.
pub fn match_count_capped(db: Db<'_>, fts: &str, cap: i64) -> Result<i64> {
    db.value(
        "SELECT COUNT(*) FROM (SELECT rowid FROM search_fts WHERE search_fts MATCH ?1 LIMIT ?2)",
        params![fts, cap],
    )
}

/// Returns `(docid, bm25)` of the documents from `min_docid` on matching an FTS5 expression.
pub fn bm25_scores(db: Db<'_>, fts: &str, min_docid: i64) -> Result<Vec<(i64, f64)>> {
    db.rows(
        "SELECT rowid, bm25(search_fts) FROM search_fts WHERE search_fts MATCH ?1 AND rowid >= ?2",
        params![fts, min_docid],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
}

/// Merges the full-text index into one segment (FTS5's `optimize`): a term is then one
/// b-tree lookup and one doclist instead of one per segment (a bulk load leaves a dozen).
pub fn optimize_search_index(db: Db<'_>) -> Result<()> {
    db.batch("INSERT INTO search_fts (search_fts) VALUES ('optimize');")
}

/// One step of the same merge, of at most about `pages` leaf pages (FTS5's `merge` command
/// with a negative budget: all segments towards one). Returns whether it did any work (FTS5
/// writes at least two rows when it does).
pub fn merge_search_index_step(db: Db<'_>, pages: i64) -> Result<bool> {
    let before = db.conn().total_changes();
    db.execute(
        "INSERT INTO search_fts (search_fts, rank) VALUES ('merge', ?1)",
        params![-pages.max(1)],
    )?;
    Ok(db.conn().total_changes().saturating_sub(before) >= 2)
}
