//! Full-text search over every session: what an entry contributes to the index, the query
//! language people type, snippets, and ranking. See `docs/SEARCH.md` for the measurements
//! behind the tokenizer choice.
//!
//! The FTS5 table is contentless (`search_fts`, tokenizer `unicode61 remove_diacritics 2`);
//! `search_docs` maps each FTS row to its session, entry, role and kind. The text of a hit is
//! re-read from its entry for the snippet, so text is stored once (in the payload).
//! CJK runs have no spaces between words, so both the indexed text and the query turn each
//! run of CJK characters into overlapping bigrams before FTS5 sees them.
//!
//! Query syntax: words, `"phrases"`, `prefix*`, `AND`, `OR`, `NOT` (upper case) and
//! parentheses; juxtaposition means AND. Whatever is typed is parsed here and rendered as a
//! safe FTS5 expression (every term quoted), or rejected with a one-line reason — FTS5 never
//! sees raw user syntax.
//!
//! Invariant: the pure parts (docs, query parsing, snippets) do no I/O.

pub mod bm25;
pub mod docid;
pub mod docs;
pub(crate) mod fts;
pub mod query;
pub mod rank;
pub mod run;
pub mod snippet;
#[cfg(test)]
mod tests;
pub mod unicode61;

pub use bm25::{Bm25, TermFrequencies};
pub use docs::{Doc, MAX_DOC_BYTES, docs_for, index_text, is_cjk, single_token, token_count};
pub use query::{MAX_PHRASE_WORDS, MAX_QUERY_BYTES, MAX_TERMS, Query, QueryError};
pub use rank::{CANDIDATES, COMMON_PHRASE_DOCS, COMMON_TERM_DOCS, score};
pub use run::{ContextEditKind, SearchHit, SearchRequest};
pub use snippet::snippet;
