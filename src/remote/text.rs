//! What an entry gives the archive's full-text index, and the query language of `sessions
//! search` (`store::search::Query`) rendered as a PostgreSQL `tsquery`.
//!
//! pi tokenizes both sides itself — CJK runs as bigrams (`index_text`), words split at every
//! character that is not a letter or digit, lower-cased, Latin diacritics dropped, as the
//! local `unicode61` index does — and gives PostgreSQL the words separated by spaces under the
//! `simple` configuration (no stemming, no stop words), so that a word, a prefix or a phrase
//! matches on the server what it matches locally.
//!
//! Invariant: pure.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use crate::model::entry::Entry;
use crate::store::search::Query;
use crate::store::search::docs::{MAX_DOC_BYTES, docs_for, index_text};

/// Longest word given to the index (PostgreSQL refuses lexemes over 2,047 bytes).
const MAX_WORD_BYTES: usize = 255;

/// One searchable unit of an entry, as the archive stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveDoc {
    /// `user`, `assistant`, `tool` or `meta`.
    pub role: &'static str,
    /// `text`, `bash`, `thinking`, `tool_call`, `tool_result`, `custom`, `summary`, `name`.
    pub kind: &'static str,
    /// The text as it reads (snippets), at most [`MAX_DOC_BYTES`], without NUL characters.
    pub body: String,
    /// The words of the text as a `tsvector` in PostgreSQL's binary format ([`tsvector`]).
    pub tsv: Vec<u8>,
}

/// The words pi's tokenizer makes of a text (see the module comment).
pub fn words(text: &str) -> Vec<String> {
    let indexed = index_text(text);
    let mut out = Vec::new();
    let mut current = String::new();
    let flush = |current: &mut String, out: &mut Vec<String>| {
        if !current.is_empty() {
            if current.len() <= MAX_WORD_BYTES {
                out.push(std::mem::take(current));
            } else {
                current.clear();
            }
        }
    };
    for ch in indexed.chars() {
        if ch.is_alphanumeric() {
            for folded in ch.to_lowercase().flat_map(|lower| lower.nfd()) {
                if !is_combining_mark(folded) {
                    current.push(folded);
                }
            }
        } else if !is_combining_mark(ch) {
            flush(&mut current, &mut out);
        }
    }
    flush(&mut current, &mut out);
    out
}

fn bounded(text: &str) -> &str {
    if text.len() <= MAX_DOC_BYTES {
        return text;
    }
    let mut end = MAX_DOC_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The documents an entry contributes to the archive's index (the local index's documents).
pub fn docs(entry: &Entry) -> Vec<ArchiveDoc> {
    docs_for(entry)
        .into_iter()
        .map(|doc| {
            let body = bounded(&doc.text).replace('\0', "");
            let tsv = tsvector(&words(&body));
            ArchiveDoc {
                role: doc.role,
                kind: doc.kind,
                body,
                tsv,
            }
        })
        .collect()
}

/// Highest position a `tsvector` keeps (PostgreSQL's `MAXENTRYPOS - 1`: later words share it).
const MAX_POSITION: u16 = (1 << 14) - 1;
/// Most positions a lexeme keeps (`to_tsvector` keeps `MAXNUMPOS - 1`).
const MAX_POSITIONS: usize = 255;

/// The words as a `tsvector` in PostgreSQL's binary format (`tsvectorsend`): word `n` at
/// position `n + 1` (capped at 16,383), lexemes sorted bytewise and unique, each with at most
/// 255 increasing positions — what `to_tsvector('simple', words.join(" "))` makes of pi's
/// words, built here so that the server does not parse the text again (that parse was most of
/// a push's server time).
pub fn tsvector(words: &[String]) -> Vec<u8> {
    let mut positions: std::collections::BTreeMap<&str, Vec<u16>> =
        std::collections::BTreeMap::new();
    for (index, word) in words.iter().enumerate() {
        if word.is_empty() || word.contains('\0') {
            continue;
        }
        let position = u16::try_from(index + 1)
            .unwrap_or(MAX_POSITION)
            .min(MAX_POSITION);
        let list = positions.entry(word.as_str()).or_default();
        if list.len() < MAX_POSITIONS && list.last() != Some(&position) {
            list.push(position);
        }
    }
    let mut out = Vec::with_capacity(4 + words.len() * 8);
    let count = u32::try_from(positions.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&count.to_be_bytes());
    for (lexeme, list) in &positions {
        out.extend_from_slice(lexeme.as_bytes());
        out.push(0);
        let n = u16::try_from(list.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&n.to_be_bytes());
        for position in list {
            out.extend_from_slice(&position.to_be_bytes());
        }
    }
    out
}

fn lexeme(word: &str) -> String {
    format!("'{}'", word.replace('\\', "\\\\").replace('\'', "''"))
}

/// Renders a query as `tsquery` input (quoted lexemes, cast with `::tsquery`: no parser runs
/// on the server, as none ran on the documents' words): a quoted or multi-word term is a
/// phrase (`<->`), a `*` term a prefix (`:*` on its last word), `a NOT b` is `a & !b`.
pub fn tsquery(query: &Query) -> String {
    match query {
        Query::Term { text, prefix, .. } => {
            let words = words(text);
            if words.is_empty() {
                // Nothing a document can hold (an all-punctuation term matches nothing).
                return lexeme("\u{1}");
            }
            let last = words.len() - 1;
            let parts: Vec<String> = words
                .iter()
                .enumerate()
                .map(|(idx, word)| {
                    let mut out = lexeme(word);
                    if *prefix && idx == last {
                        out.push_str(":*");
                    }
                    out
                })
                .collect();
            if parts.len() == 1 {
                parts.concat()
            } else {
                format!("({})", parts.join(" <-> "))
            }
        }
        Query::And(left, right) => format!("({} & {})", tsquery(left), tsquery(right)),
        Query::Or(left, right) => format!("({} | {})", tsquery(left), tsquery(right)),
        Query::Not(left, right) => format!("({} & !{})", tsquery(left), tsquery(right)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_fold_case_and_diacritics_and_split_punctuation() {
        assert_eq!(
            words("Café-au-lait, v1.5 don't"),
            ["cafe", "au", "lait", "v1", "5", "don", "t"]
        );
    }

    #[test]
    fn a_tsvector_is_sorted_unique_lexemes_with_their_positions() {
        let words: Vec<String> = ["b", "a", "b", "c"]
            .iter()
            .map(|w| (*w).to_owned())
            .collect();
        let tsv = tsvector(&words);
        let mut want = vec![0, 0, 0, 3];
        want.extend_from_slice(b"a\0\0\x01\0\x02");
        want.extend_from_slice(b"b\0\0\x02\0\x01\0\x03");
        want.extend_from_slice(b"c\0\0\x01\0\x04");
        assert_eq!(tsv, want);
        // Positions past 16,383 share the last one, once.
        let many: Vec<String> = (0..20_000).map(|n| format!("w{}", n % 2)).collect();
        let tsv = tsvector(&many);
        assert_eq!(&tsv[..4], &[0, 0, 0, 2]);
        assert_eq!(&tsv[4..8], b"w0\0\0");
        assert_eq!(tsv[8], 255);
    }

    #[test]
    fn queries_render_as_tsquery() {
        let query = Query::parse("\"flaky deploy\" OR deplo* NOT it's").unwrap();
        let text = tsquery(&query);
        assert!(text.contains("('flaky' <-> 'deploy')"), "{text}");
        assert!(text.contains("'deplo':*"), "{text}");
        assert!(text.contains("!('it' <-> 's')"), "{text}");
    }
}
