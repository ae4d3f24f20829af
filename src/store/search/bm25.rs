//! FTS5's bm25, computed from what ranking reads of the index: a term's frequency in each
//! document (FTS5's vocabulary), each document's length (its docid) and the index's totals
//! (`search_totals`).
//!
//! Invariant: no I/O.

use crate::store::search::docid;

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
