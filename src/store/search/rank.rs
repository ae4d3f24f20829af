//! Ranking: FTS5's bm25 computed here from FTS5's vocabulary (`fts5vocab`), the lengths
//! docids carry and the store's own totals, or FTS5's own `bm25()` where a phrase is ranked;
//! the recency boost; and the plan that decides, per term, which one ranks it.

use std::collections::HashMap;

use crate::store::StoreError;
use crate::store::db::Db;
use crate::store::search::bm25::{Bm25, TermFrequencies};
use crate::store::search::docs::single_token;
use crate::store::search::fts;
use crate::store::search::query::Query;

/// How many of the most recent matching documents are ranked (a bound for very common words).
pub const CANDIDATES: i64 = 2000;

/// A search of some sessions tests matches against the set of their docids when they have at
/// most this many entries (about 16 bytes of memory each); larger scopes read the document map
/// per match, which then mostly lies inside the scope.
pub const SCOPE_SET_MAX: i64 = 300_000;

/// A term in at least this many documents is "very common": FTS5's bm25 would count all of
/// them on every query, so its weight (≈ 0 anyway) is left out of the ranking.
pub const COMMON_TERM_DOCS: i64 = 5_000;

/// The same bound for a term of several tokens (a phrase): FTS5 matches a phrase by walking
/// each of its words' documents and positions, several times the work per match of one word,
/// so a phrase is "very common" once it fills the candidate window.
pub const COMMON_PHRASE_DOCS: i64 = CANDIDATES;

/// The number of matches from which a term (as typed) is very common.
pub(super) fn common_docs(text: &str) -> i64 {
    if single_token(text).is_some() {
        COMMON_TERM_DOCS
    } else {
        COMMON_PHRASE_DOCS
    }
}

/// Combines bm25 relevance with recency: `relevance × (0.5 + 0.5 · e^(−age_days / 30))`.
/// A hit from today keeps its full relevance, one from a month ago about 68%, old hits level
/// off at half — relevance decides, recency breaks near-ties.
pub fn score(bm25: f64, age_ms: i64) -> f64 {
    let relevance = -bm25;
    let age_days = (age_ms.max(0) as f64) / 86_400_000.0;
    relevance * (0.5 + 0.5 * (-age_days / 30.0).exp())
}

/// How to walk the matches of a query whose terms bound them by `bound`: all of them, in FTS5's
/// cheaper forward order, when that is at most [`COMMON_TERM_DOCS`]; else the newest
/// [`CANDIDATES`] only.
pub(super) fn walk_for(bound: Option<i64>) -> fts::Walk {
    match bound {
        Some(bound) if bound <= COMMON_TERM_DOCS => fts::Walk::All,
        _ => fts::Walk::Newest(CANDIDATES),
    }
}

/// Gives candidates FTS5's `bm25()` when the ranking is FTS5's over the whole query (every
/// term selective, so the matches of the window are few).
pub(super) fn fts_bm25_inline(
    db: Db<'_>,
    ranking: &Ranking,
    fts: &str,
    candidates: &mut [fts::Candidate],
) -> Result<(), StoreError> {
    let Ranking::Fts {
        any_common: false, ..
    } = ranking
    else {
        return Ok(());
    };
    let Some(window_start) = candidates.iter().map(|candidate| candidate.docid).min() else {
        return Ok(());
    };
    let ranks: HashMap<i64, f64> = fts::bm25_scores(db, fts, window_start)?
        .into_iter()
        .collect();
    for candidate in candidates {
        candidate.bm25 = ranks.get(&candidate.docid).copied().unwrap_or(0.0);
    }
    Ok(())
}

/// How a search ranks its candidates.
pub(super) enum Ranking {
    /// bm25 computed here from the index: the frequencies of the selective terms (none:
    /// recency alone) and the lengths docids carry.
    Index {
        bm25: Bm25,
        terms: Vec<TermFrequencies>,
    },
    /// FTS5's `bm25()`: over the whole query when no term is very common, else over the
    /// selective terms only.
    Fts {
        selective: Vec<Query>,
        any_common: bool,
    },
}

impl Ranking {
    /// Whether no term is ranked (every term very common): every candidate scores 0, so the
    /// newest come first.
    pub(super) fn ranks_nothing(&self) -> bool {
        match self {
            Self::Index { terms, .. } => terms.is_empty(),
            Self::Fts { selective, .. } => selective.is_empty(),
        }
    }

    /// Looks at each positive term once (`known_hits`: the match count of a one-term query,
    /// capped at [`COMMON_TERM_DOCS`], when the caller has it): a very common term only
    /// filters (its weight is ≈ 0 and counting it would read all of its documents); a
    /// selective term of one token is ranked from the vocabulary; any other selective term (a
    /// phrase) hands the ranking to FTS5. Also returns a bound on the query's matches
    /// ([`Query::match_bound`]; none when an OR side or every AND side is very common).
    pub(super) fn plan(
        db: Db<'_>,
        query: &Query,
        terms: &[(String, bool)],
        known_hits: Option<i64>,
    ) -> Result<(Self, Option<i64>), StoreError> {
        let totals = fts::totals(db)?;
        let mut counted: Vec<(&str, bool, i64)> = Vec::with_capacity(terms.len());
        let mut from_vocabulary = totals.is_some();
        let mut ranked = Vec::new();
        let mut selective = Vec::new();
        let mut any_common = false;
        for (text, prefix) in terms {
            let term = Query::Term {
                text: text.clone(),
                phrase: true,
                prefix: *prefix,
            };
            // The caller counted a one-term query's matches already.
            let common = common_docs(text);
            let hits = match known_hits {
                Some(hits) if terms.len() == 1 => hits.min(common),
                _ => fts::match_count_capped(db, &term.to_fts(), common)?,
            };
            if hits >= common {
                any_common = true;
                continue;
            }
            counted.push((text, *prefix, hits));
            if from_vocabulary && hits > 0 {
                let frequencies = match single_token(text) {
                    Some(token) => {
                        fts::term_frequencies(db, &token, *prefix, COMMON_TERM_DOCS as usize)?
                    }
                    None => None,
                };
                // The vocabulary must see the same documents the query does (it would not if
                // the term folded differently from the tokenizer).
                match frequencies {
                    Some(frequencies) if frequencies.docs() as i64 == hits => {
                        ranked.push(frequencies)
                    }
                    _ => from_vocabulary = false,
                }
            }
            selective.push(term);
        }
        let ranking = match totals {
            Some((rows, tokens)) if from_vocabulary => Self::Index {
                bm25: Bm25::new(rows, tokens),
                terms: ranked,
            },
            _ => Self::Fts {
                selective,
                any_common,
            },
        };
        let bound = query.match_bound(&|text, prefix| {
            counted
                .iter()
                .find(|(found, found_prefix, _)| *found == text && *found_prefix == prefix)
                .map(|(_, _, hits)| *hits)
        });
        Ok((ranking, bound))
    }
}
