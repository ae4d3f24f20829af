//! Running a search: candidates from FTS5 within the filters, ranked, the top hits read back
//! with their snippets, session and active-path flags.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::model::entry::Entry;
use crate::model::ids::{EntryId, SessionId};
use crate::store::db::Db;
use crate::store::search::docs::docs_for;
use crate::store::search::query::Query;
use crate::store::search::rank::{
    CANDIDATES, COMMON_TERM_DOCS, Ranking, SCOPE_SET_MAX, common_docs, fts_bm25_inline, score,
    walk_for,
};
use crate::store::search::snippet::snippet;
use crate::store::search::{docid, fts};
use crate::store::{ListScope, StoreError, derived, sql};

/// A search as the CLI hands it to the store.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    /// The parsed query.
    pub query: Query,
    /// Which sessions.
    pub scope: ListScope,
    /// Only this session.
    pub session: Option<SessionId>,
    /// Only these roles (`user`, `assistant`, `tool`, `meta`); empty: all.
    pub roles: Vec<String>,
    /// Only these kinds; empty: all.
    pub kinds: Vec<String>,
    /// Entry time at or after (Unix ms).
    pub since_ms: Option<i64>,
    /// Entry time before (Unix ms).
    pub until_ms: Option<i64>,
    /// Case-insensitive substring of `provider/model` in effect at the hit.
    pub model: Option<String>,
    /// Keep only hits on each session's active path.
    pub active_only: bool,
    /// Most hits returned.
    pub limit: usize,
    /// "Now" for the recency boost (Unix ms).
    pub now_ms: i64,
    /// Marks put around matched terms in snippets.
    pub highlight: (String, String),
    /// Snippet width in characters.
    pub snippet_width: usize,
}

/// One search hit.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// Session id.
    pub session: SessionId,
    /// Entry id.
    pub entry: Option<EntryId>,
    /// Append sequence of the entry.
    pub seq: i64,
    /// Document role.
    pub role: String,
    /// Document kind.
    pub kind: String,
    /// Snippet with the matches marked.
    pub snippet: String,
    /// Higher is better.
    pub score: f64,
    /// Session working directory.
    pub cwd: String,
    /// Entry timestamp (ISO-8601).
    pub timestamp: String,
    /// Session name.
    pub name: Option<String>,
    /// First user message of the session.
    pub first_message: Option<String>,
    /// Whether the entry is on the session's active path (root → leaf).
    pub on_active_path: bool,
    /// How a `context_edit` on the active path changed the entry's contribution to the model
    /// context (the latest such edit): the text is history and stays searchable.
    pub context_edit: Option<ContextEditKind>,
}

/// What a `context_edit` did to an entry's contribution to the model context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextEditKind {
    /// `replacement: null`: the entry is not sent to the model any more.
    Omitted,
    /// The entry's content is replaced in what the model sees.
    Replaced,
}

impl ContextEditKind {
    /// `omitted` or `replaced`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Omitted => "omitted",
            Self::Replaced => "replaced",
        }
    }
}

struct Scored {
    candidate: fts::Candidate,
    score: f64,
}

/// How many of the newest matches a search ranks (without a per-entry filter): all
/// [`CANDIDATES`], unless nothing is ranked and no exact phrase can lift a hit — then the hits
/// are the newest matches themselves.
fn window(ranking: &Ranking, request: &SearchRequest) -> usize {
    if ranking.ranks_nothing() && request.query.as_phrase().is_none() {
        request.limit.min(CANDIDATES as usize)
    } else {
        CANDIDATES as usize
    }
}

/// A search's candidates, newest first, with how they are ranked and which have the exact
/// phrase of the query's words.
struct Evaluated {
    ranking: Ranking,
    candidates: Vec<fts::Candidate>,
    phrase_hits: HashSet<i64>,
}

/// Finds a search's candidates through FTS5 (every query shape and filter) and how they are
/// ranked.
fn evaluate(
    db: Db<'_>,
    request: &SearchRequest,
    filter: &fts::SearchFilter<'_>,
    per_entry: bool,
    terms: &[(String, bool)],
) -> Result<Evaluated, StoreError> {
    let fts = request.query.to_fts();
    // A one-term query without SQL filters: its candidates are the term's newest
    // matches, so one pass up to the term's commonness bound both counts the term and
    // gives them (instead of a count, then the candidates over the same pages).
    let one_pass =
        matches!(request.query, Query::Term { .. }) && filter.is_unfiltered() && !per_entry;
    let mut scope = None;
    let mut query_bound = None;
    let (ranking, mut candidates) = if one_pass {
        let walk = terms
            .first()
            .map_or(COMMON_TERM_DOCS, |(text, _)| common_docs(text))
            .max(CANDIDATES);
        let (hits, mut matches) = fts::newest_matches(db, &fts, walk, CANDIDATES as usize)?;
        let (ranking, _) = Ranking::plan(db, &request.query, terms, Some(hits))?;
        fts_bm25_inline(db, &ranking, &fts, &mut matches)?;
        (ranking, matches)
    } else {
        let (ranking, match_bound) = Ranking::plan(db, &request.query, terms, None)?;
        // A search of some sessions only (a directory's, or one): their docids come
        // from the document map's session index and the matches are tested against
        // them, instead of a document-map read per match (most matches of a common
        // word lie outside a directory's sessions) — unless the query matches so few
        // documents that reading theirs is cheaper than listing the sessions'.
        if let Some(sids) = fts::scope_sids(db, filter)? {
            let entries = fts::scope_entries(db, &sids)?;
            if entries <= SCOPE_SET_MAX
                && match_bound.is_none_or(|bound| bound.saturating_mul(4) > entries)
            {
                scope = Some(fts::scope_docids(db, &sids)?);
            }
        }
        // When nothing is ranked and no exact phrase can lift a hit, the hits are the
        // newest matches themselves: the walk stops at them (a very common word in a
        // directory's sessions would otherwise walk the whole index's matches until
        // 2,000 of them fell in the directory).
        let window = if per_entry {
            CANDIDATES
        } else {
            window(&ranking, request) as i64
        };
        let candidates = match &scope {
            Some(scope) => {
                let mut matches = fts::candidates_in(db, &fts, scope, None, window as usize)?;
                fts_bm25_inline(db, &ranking, &fts, &mut matches)?;
                if per_entry {
                    for candidate in &mut matches {
                        candidate.doc = fts::doc_by_id(db, candidate.docid)?.map(Box::new);
                    }
                }
                matches
            }
            None => {
                let mut matches = fts::search_candidates(
                    db,
                    &fts,
                    filter,
                    if window < CANDIDATES {
                        fts::Walk::Newest(window)
                    } else {
                        walk_for(match_bound)
                    },
                    matches!(
                        ranking,
                        Ranking::Fts {
                            any_common: false,
                            ..
                        }
                    ),
                )?;
                matches.truncate(CANDIDATES as usize);
                matches
            }
        };
        query_bound = match_bound;
        (ranking, candidates)
    };
    let window_start = candidates.iter().map(|candidate| candidate.docid).min();
    // (`Ranking::Index` scores in the caller, for both evaluations.)
    match &ranking {
        Ranking::Fts {
            selective,
            any_common: true,
        } if !selective.is_empty() => {
            if let Some(window_start) = window_start {
                let expression = selective
                    .iter()
                    .map(Query::to_fts)
                    .collect::<Vec<_>>()
                    .join(" OR ");
                let ranks: HashMap<i64, f64> = fts::bm25_scores(db, &expression, window_start)?
                    .into_iter()
                    .collect();
                for candidate in &mut candidates {
                    candidate.bm25 = ranks.get(&candidate.docid).copied().unwrap_or(0.0);
                }
            }
        }
        Ranking::Index { .. } | Ranking::Fts { .. } => {}
    }
    // The exact-phrase pass looks only inside the candidates' docid window, so a rare
    // phrase of common words cannot make it scan the whole index.
    let window = fts::SearchFilter {
        min_docid: window_start,
        with_doc: false,
        ..filter.clone()
    };
    let phrase_hits: HashSet<i64> = match (request.query.as_phrase(), &scope) {
        (Some(phrase), Some(scope)) if !candidates.is_empty() => {
            fts::candidates_in(db, &phrase.to_fts(), scope, window_start, usize::MAX)?
                .into_iter()
                .map(|candidate| candidate.docid)
                .collect()
        }
        (Some(phrase), None) if !candidates.is_empty() => fts::search_candidates(
            db,
            &phrase.to_fts(),
            &window,
            // The phrase's matches are among the query's.
            walk_for(query_bound),
            false,
        )?
        .into_iter()
        .map(|candidate| candidate.docid)
        .collect(),
        (Some(_) | None, _) => HashSet::new(),
    };
    Ok(Evaluated {
        ranking,
        candidates,
        phrase_hits,
    })
}

/// The model in effect at an entry: its own for an assistant message, else the last model
/// entry on its path (`provider/model`).
fn model_at(
    db: Db<'_>,
    sid: i64,
    seq: i64,
    cache: &mut HashMap<(i64, i64), Option<String>>,
) -> Result<Option<String>, StoreError> {
    let Some(state) = sql::path_state(db, sid, seq)? else {
        return Ok(None);
    };
    let Some(model_seq) = state.model_seq else {
        return Ok(None);
    };
    if let Some(found) = cache.get(&(sid, model_seq)) {
        return Ok(found.clone());
    }
    let model = sql::entry_by_seq(db, sid, model_seq)?
        .and_then(|row| crate::store::context::model_of(&row.type_name, &row.payload))
        .map(|model| {
            format!(
                "{}/{}",
                model.get("provider").and_then(Value::as_str).unwrap_or(""),
                model.get("modelId").and_then(Value::as_str).unwrap_or("")
            )
        });
    cache.insert((sid, model_seq), model.clone());
    Ok(model)
}

/// The active path of one session: its leaf, and for sessions without trusted path state
/// the whole path as a set.
struct SessionPath {
    leaf: Option<i64>,
    set: Option<HashSet<i64>>,
    /// The active path holds every entry (the session never branched).
    linear: bool,
}

/// Answers "is this entry on its session's active path", caching per session, and keeps the
/// session rows it reads for the hits.
#[derive(Default)]
struct ActivePaths {
    sessions: HashMap<i64, SessionPath>,
    rows: HashMap<i64, Option<sql::HitSession>>,
}

impl ActivePaths {
    /// A session's row, with its leaf (read once).
    fn session(&mut self, db: Db<'_>, sid: i64) -> Result<Option<&sql::HitSession>, StoreError> {
        let row = match self.rows.entry(sid) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                entry.insert(sql::hit_session(db, sid)?)
            }
        };
        Ok(row.as_ref())
    }

    fn contains(&mut self, db: Db<'_>, sid: i64, seq: i64) -> Result<bool, StoreError> {
        if !self.sessions.contains_key(&sid) {
            let (leaf, irregular, linear_depth) = match self.session(db, sid)? {
                Some(row) => (
                    row.leaf,
                    row.irregular,
                    row.leaf_depth.map(|depth| depth + 1 == row.entries),
                ),
                None => (None, false, None),
            };
            let set = match leaf {
                Some(leaf_seq) if irregular => Some(derived::path_set(db, sid, leaf_seq)?),
                Some(_) => None,
                None => Some(HashSet::new()),
            };
            // A path from the root as long as the session has entries holds them all: no
            // entry needs the walk from the leaf.
            let linear = set.is_none() && linear_depth == Some(true);
            self.sessions.insert(sid, SessionPath { leaf, set, linear });
        }
        let Some(session) = self.sessions.get(&sid) else {
            return Ok(false);
        };
        if let Some(set) = &session.set {
            return Ok(set.contains(&seq));
        }
        if session.linear {
            return Ok(true);
        }
        let Some(leaf) = session.leaf else {
            return Ok(false);
        };
        let Some(state) = sql::path_state(db, sid, seq)? else {
            return Ok(false);
        };
        Ok(derived::ancestor_at_depth(db, sid, leaf, state.depth)? == Some(seq))
    }
}

/// Runs a full-text search: the most recent [`CANDIDATES`] matching documents that pass
/// the filters, ranked by bm25 with a recency boost.
///
/// Ranking reads the index only where it can ([`Ranking::Index`]): each selective term's
/// frequencies come from FTS5's vocabulary, each document's length and time from its docid,
/// the totals from `search_totals`, and the document map is read for the hits shown (and
/// for the candidates when a filter needs their session). A query with a selective phrase
/// is ranked by FTS5's `bm25()` instead, which reads each candidate's length.
pub(crate) fn search(db: Db<'_>, request: &SearchRequest) -> Result<Vec<SearchHit>, StoreError> {
    let sid =
        match &request.session {
            Some(session) => Some(sql::sid_of(db, session.as_str())?.ok_or_else(|| {
                StoreError::SessionNotFound {
                    query: session.to_string(),
                }
            })?),
            None => None,
        };
    // The model and branch filters look at each candidate's entry.
    let per_entry = request.model.is_some() || request.active_only;
    let filter = fts::SearchFilter {
        cwd: match &request.scope {
            ListScope::All => None,
            ListScope::Cwd(cwd) => Some(cwd.as_str()),
        },
        sid,
        roles: &request.roles,
        kinds: &request.kinds,
        since_ms: request.since_ms,
        until_ms: request.until_ms,
        min_docid: None,
        with_doc: per_entry,
    };
    let terms = request.query.positive_terms();
    let Evaluated {
        ranking,
        mut candidates,
        phrase_hits,
    } = evaluate(db, request, &filter, per_entry, &terms)?;
    if let Ranking::Index { bm25, terms } = &ranking {
        for candidate in &mut candidates {
            candidate.bm25 = bm25.score(terms, candidate.docid);
        }
    }
    let mut active = ActivePaths::default();
    let mut models: HashMap<(i64, i64), Option<String>> = HashMap::new();
    let mut scored = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        if per_entry {
            let Some(doc) = &candidate.doc else {
                continue;
            };
            if let Some(pattern) = &request.model {
                let model = model_at(db, doc.sid, doc.seq, &mut models)?;
                let pattern = pattern.to_lowercase();
                if !model.is_some_and(|model| model.to_lowercase().contains(&pattern)) {
                    continue;
                }
            }
            if request.active_only && !active.contains(db, doc.sid, doc.seq)? {
                continue;
            }
        }
        let ts = candidate
            .doc
            .as_ref()
            .map_or_else(|| docid::time_ms(candidate.docid), |doc| doc.ts);
        // Without a selective term every relevance is 0: the newest matches come first
        // (the sort below breaks ties by recency); an exact phrase still ranks first.
        let mut value = score(candidate.bm25, request.now_ms - ts);
        if phrase_hits.contains(&candidate.docid) {
            value = value * 2.0 + 1.0;
        }
        scored.push(Scored {
            candidate,
            score: value,
        });
    }
    // Best first; docids are unique, so the order is total and the top `limit` are
    // the same whether all candidates are sorted or only those selected first.
    let best_first = |a: &Scored, b: &Scored| {
        b.score
            .total_cmp(&a.score)
            .then(b.candidate.docid.cmp(&a.candidate.docid))
    };
    if request.limit > 0 && scored.len() > request.limit {
        scored.select_nth_unstable_by(request.limit - 1, best_first);
        scored.truncate(request.limit);
    }
    scored.sort_by(best_first);
    scored.truncate(request.limit);
    let mut hits = Vec::with_capacity(scored.len());
    for Scored { candidate, score } in scored {
        let found = match candidate.doc {
            Some(doc) => sql::entry_by_seq(db, doc.sid, doc.seq)?.map(|row| (*doc, row)),
            None => fts::doc_and_entry(db, candidate.docid)?,
        };
        let Some((doc, row)) = found else {
            continue;
        };
        let Some(session) = active.session(db, doc.sid)?.cloned() else {
            continue;
        };
        let entry = Entry::parse(&row.payload);
        let text = entry
            .as_ref()
            .map(docs_for)
            .unwrap_or_default()
            .into_iter()
            .find(|found| found.kind == doc.kind && found.role == doc.role)
            .map(|found| found.text.into_owned())
            .unwrap_or_default();
        let on_active_path = active.contains(db, doc.sid, doc.seq)?;
        let context_edit = match (&row.id, on_active_path) {
            (Some(id), true) => {
                let mut found = None;
                for (edit_seq, omits) in sql::context_edits_of(db, doc.sid, id)? {
                    if active.contains(db, doc.sid, edit_seq)? {
                        found = Some(if omits {
                            ContextEditKind::Omitted
                        } else {
                            ContextEditKind::Replaced
                        });
                        break;
                    }
                }
                found
            }
            _ => None,
        };
        hits.push(SearchHit {
            session: SessionId::new(session.id.clone()),
            entry: row.id.map(EntryId::new),
            seq: doc.seq,
            role: doc.role,
            kind: doc.kind,
            snippet: snippet(
                &text,
                &terms,
                &request.highlight.0,
                &request.highlight.1,
                request.snippet_width,
            ),
            score,
            cwd: session.cwd.clone(),
            timestamp: row.timestamp,
            name: session.name.clone(),
            first_message: session.first_message.clone(),
            on_active_path,
            context_edit,
        });
    }
    Ok(hits)
}

/// Whether an entry (by seq) lies on its session's active path.
pub(crate) fn on_active_path(
    db: Db<'_>,
    session: &SessionId,
    seq: i64,
) -> Result<bool, StoreError> {
    let sid = sql::sid_of(db, session.as_str())?.ok_or_else(|| StoreError::SessionNotFound {
        query: session.to_string(),
    })?;
    ActivePaths::default().contains(db, sid, seq)
}
