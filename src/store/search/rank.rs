//! Ranking: FTS5's bm25 computed here from FTS5's vocabulary (`fts5vocab`), the lengths
//! docids carry and the store's own totals, or FTS5's own `bm25()` where a phrase is ranked;
//! the recency boost; and the plan that decides, per term, which one ranks it.

use std::collections::HashMap;

use rusqlite::Connection;

use crate::store::StoreError;
use crate::store::search::docid;
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
/// each of its words' documents and positions, ≈ 5 times the work per match of one word, so a
/// phrase is "very common" once it fills the candidate window.
pub const COMMON_PHRASE_DOCS: i64 = CANDIDATES;

/// The number of matches from which a term (as typed) is very common.
pub(super) fn common_docs(text: &str) -> i64 {
    if single_token(text).is_some() {
        COMMON_TERM_DOCS
    } else {
        COMMON_PHRASE_DOCS
    }
}

/// FTS5's bm25 (k1 = 1.2, b = 0.75), computed from the index's term frequencies and the
/// lengths docids carry; [`Bm25::score`] returns what `bm25()` would (lower is better).
#[derive(Debug, Clone, Copy)]
pub struct Bm25 {
    rows: f64,
    average_length: f64,
}

/// One ranked term of a query: its frequency in each document that has it, by docid
/// ascending (the order FTS5's vocabulary yields them in; a lookup is a binary search, no
/// hashing per row).
#[derive(Debug, Clone, Default)]
pub struct TermFrequencies {
    per_doc: Vec<(i64, u32)>,
    sorted: bool,
    /// The documents that have the term, when `per_doc` lists only some of them.
    documents: Option<usize>,
}

impl TermFrequencies {
    /// From per-document counts by docid ascending (some of the term's documents: those a
    /// query can rank) and the number of documents that have the term.
    pub fn from_counts(per_doc: Vec<(i64, u32)>, documents: usize) -> Self {
        Self {
            per_doc,
            sorted: true,
            documents: Some(documents),
        }
    }

    /// Counts one occurrence in `docid`.
    pub fn add(&mut self, docid: i64) {
        match self.per_doc.last_mut() {
            Some((last, count)) if *last == docid => *count += 1,
            Some((last, _)) => {
                if docid < *last {
                    // A prefix's tokens each list their documents in order; they interleave.
                    self.sorted = false;
                }
                self.per_doc.push((docid, 1));
            }
            None => {
                self.sorted = true;
                self.per_doc.push((docid, 1));
            }
        }
    }

    /// Puts the documents in docid order with one count each (after the last [`Self::add`]).
    pub fn finish(&mut self) {
        if self.sorted {
            return;
        }
        self.per_doc.sort_unstable_by_key(|(docid, _)| *docid);
        let mut merged: Vec<(i64, u32)> = Vec::with_capacity(self.per_doc.len());
        for (docid, count) in self.per_doc.drain(..) {
            match merged.last_mut() {
                Some((last, total)) if *last == docid => *total += count,
                _ => merged.push((docid, count)),
            }
        }
        self.per_doc = merged;
        self.sorted = true;
    }

    /// How many documents have the term (an upper bound until [`Self::finish`]).
    pub fn docs(&self) -> usize {
        self.documents.unwrap_or(self.per_doc.len())
    }

    /// The term's occurrences in `docid`.
    pub fn get(&self, docid: i64) -> Option<u32> {
        self.per_doc
            .binary_search_by_key(&docid, |(doc, _)| *doc)
            .ok()
            .map(|idx| self.per_doc[idx].1)
    }
}

impl Bm25 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;

    /// From the index totals: documents and tokens.
    pub fn new(rows: i64, tokens: i64) -> Self {
        let rows = (rows.max(1)) as f64;
        Self {
            rows,
            average_length: ((tokens.max(1)) as f64 / rows).max(f64::MIN_POSITIVE),
        }
    }

    /// The inverse document frequency of a term in `hits` documents (FTS5's formula).
    fn idf(&self, hits: usize) -> f64 {
        let hits = hits as f64;
        let idf = ((self.rows - hits + 0.5) / (hits + 0.5)).ln();
        if idf <= 0.0 { 1e-6 } else { idf }
    }

    /// bm25 of the document `docid` for these terms (negative; 0 when it has none).
    pub fn score(&self, terms: &[TermFrequencies], docid: i64) -> f64 {
        let length = docid::length(docid);
        let norm = Self::K1 * (1.0 - Self::B + Self::B * length / self.average_length);
        let mut sum = 0.0;
        for term in terms {
            if let Some(tf) = term.get(docid) {
                let tf = f64::from(tf);
                sum += self.idf(term.docs()) * (tf * (Self::K1 + 1.0)) / (tf + norm);
            }
        }
        -sum
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
    conn: &Connection,
    path: &str,
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
    let ranks: HashMap<i64, f64> = fts::bm25_scores(conn, path, fts, window_start)?
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
        conn: &Connection,
        path: &str,
        query: &Query,
        terms: &[(String, bool)],
        known_hits: Option<i64>,
    ) -> Result<(Self, Option<i64>), StoreError> {
        let totals = fts::totals(conn, path)?;
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
                _ => fts::match_count_capped(conn, path, &term.to_fts(), common)?,
            };
            if hits >= common {
                any_common = true;
                continue;
            }
            counted.push((text, *prefix, hits));
            if from_vocabulary && hits > 0 {
                let frequencies = match single_token(text) {
                    Some(token) => fts::term_frequencies(
                        conn,
                        path,
                        &token,
                        *prefix,
                        COMMON_TERM_DOCS as usize,
                    )?,
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
