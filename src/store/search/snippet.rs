//! Snippets: the part of a hit's text around its best cluster of matched terms, with the
//! matches marked.
//!
//! Invariant: no I/O.

use crate::store::search::docs::{MAX_DOC_BYTES, cut, fold, is_cjk, is_word_char};

/// A word of a text: its byte range, and its folded form when it is not plain ASCII (ASCII
/// words are compared in place, without allocating).
struct Word {
    start: usize,
    end: usize,
    folded: Option<String>,
}

impl Word {
    /// Whether the word equals `want` (folded), or starts with it for a prefix term.
    fn matches(&self, text: &str, want: &str, prefix: bool) -> bool {
        match &self.folded {
            Some(folded) if prefix => folded.starts_with(want),
            Some(folded) => folded == want,
            None => {
                let slice = &text.as_bytes()[self.start..self.end];
                let want = want.as_bytes();
                if prefix {
                    slice.len() >= want.len() && slice[..want.len()].eq_ignore_ascii_case(want)
                } else {
                    slice.eq_ignore_ascii_case(want)
                }
            }
        }
    }
}

/// Splits text into the words the index sees.
fn words(text: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut start = None;
    let mut ascii = true;
    let push = |begin: usize, end: usize, ascii: bool, out: &mut Vec<Word>| {
        out.push(Word {
            start: begin,
            end,
            folded: (!ascii).then(|| fold(&text[begin..end])),
        });
    };
    let bytes = text.as_bytes();
    let mut idx = 0;
    while idx < bytes.len() {
        // ASCII (most of any text here) is classified by its byte, without decoding.
        let (word, len, is_ascii) = match bytes[idx] {
            byte if byte.is_ascii() => (byte.is_ascii_alphanumeric(), 1, true),
            _ => match text[idx..].chars().next() {
                Some(ch) => (is_word_char(ch) && !is_cjk(ch), ch.len_utf8(), false),
                None => break,
            },
        };
        match (word, start) {
            (true, None) => {
                start = Some(idx);
                ascii = is_ascii;
            }
            (true, Some(_)) => ascii &= is_ascii,
            (false, Some(begin)) => {
                push(begin, idx, ascii, &mut out);
                start = None;
            }
            (false, None) => {}
        }
        idx += len;
    }
    if let Some(begin) = start {
        push(begin, text.len(), ascii, &mut out);
    }
    out
}

/// Returns the folded words of a query term.
fn term_words(term: &str) -> Vec<String> {
    words(term)
        .into_iter()
        .map(|word| {
            word.folded
                .unwrap_or_else(|| term[word.start..word.end].to_ascii_lowercase())
        })
        .collect()
}

/// Returns a snippet of `text` around the best cluster of query terms, matches marked with
/// `open`/`close`, at most about `width` characters.
pub fn snippet(
    text: &str,
    terms: &[(String, bool)],
    open: &str,
    close: &str,
    width: usize,
) -> String {
    let text = cut(text, MAX_DOC_BYTES);
    // Each query term becomes a list of lower-case words (a phrase: several) or a CJK string.
    let mut matches: Vec<(usize, usize)> = Vec::new();
    let doc_words = words(text);
    for (term, prefix) in terms {
        let wanted = term_words(term);
        if !wanted.is_empty() {
            let last = wanted.len() - 1;
            for (idx, window) in doc_words.windows(wanted.len()).enumerate() {
                let hit = window
                    .iter()
                    .zip(&wanted)
                    .enumerate()
                    .all(|(pos, (word, want))| word.matches(text, want, pos == last && *prefix));
                if hit {
                    matches.push((doc_words[idx].start, doc_words[idx + last].end));
                }
            }
        }
        // CJK parts of a term: plain substring matches (the index matched their bigrams).
        let cjk: String = term.chars().filter(|ch| is_cjk(*ch)).collect();
        if !cjk.is_empty() {
            let mut from = 0;
            while let Some(pos) = text[from..].find(&cjk) {
                matches.push((from + pos, from + pos + cjk.len()));
                from += pos + cjk.len();
            }
        }
    }
    matches.sort_unstable();
    matches.dedup();
    // The window around the densest cluster of matches.
    let (center_start, center_end) = best_cluster(&matches, width).unwrap_or((0, 0));
    let budget = width.saturating_sub(text[center_start..center_end].chars().count()) / 2;
    let mut start = center_start;
    for _ in 0..budget {
        match text[..start].chars().next_back() {
            Some(ch) => start -= ch.len_utf8(),
            None => break,
        }
    }
    let mut end = center_end.max(start);
    let mut taken = text[start..end].chars().count();
    while taken < width {
        match text[end..].chars().next() {
            Some(ch) => {
                end += ch.len_utf8();
                taken += 1;
            }
            None => break,
        }
    }
    let mut out = String::with_capacity(end - start + 16);
    if start > 0 {
        out.push('…');
    }
    let mut pos = start;
    for &(match_start, match_end) in &matches {
        if match_start < pos || match_end > end {
            continue;
        }
        out.push_str(&text[pos..match_start]);
        out.push_str(open);
        out.push_str(&text[match_start..match_end]);
        out.push_str(close);
        pos = match_end;
    }
    out.push_str(&text[pos..end]);
    if end < text.len() {
        out.push('…');
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn best_cluster(matches: &[(usize, usize)], width: usize) -> Option<(usize, usize)> {
    let first = matches.first()?;
    let mut best = (first.0, first.1, 1);
    for (idx, &(start, _)) in matches.iter().enumerate() {
        let mut count = 0;
        let mut end = start;
        for &(_, other_end) in &matches[idx..] {
            if other_end - start > width {
                break;
            }
            count += 1;
            end = other_end;
        }
        if count > best.2 {
            best = (start, end, count);
        }
    }
    Some((best.0, best.1))
}
