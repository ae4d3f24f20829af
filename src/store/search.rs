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

use std::borrow::Cow;

use serde_json::Value;

use crate::model::entry::{Entry, EntryKind};
use crate::model::message::{AgentMessage, ContentBlock, UserContent};
use crate::support::json;

/// Longest text indexed for one document; the rest of a huge tool output is not searchable.
pub const MAX_DOC_BYTES: usize = 256 * 1024;

/// Most terms a query may have.
pub const MAX_TERMS: usize = 64;

/// The most words a quoted phrase may hold: a phrase's cost grows with its length in every
/// document holding its words, and no one types a longer one (an 8,000-word phrase took 42 s).
pub const MAX_PHRASE_WORDS: usize = 64;

/// The longest query text, in bytes.
pub const MAX_QUERY_BYTES: usize = 8192;

/// One searchable unit of an entry; its text borrows from the entry where it is one piece.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc<'a> {
    /// `user`, `assistant`, `tool` or `meta`.
    pub role: &'static str,
    /// `text`, `bash`, `thinking`, `tool_call`, `tool_result`, `custom`, `summary`, `name`.
    pub kind: &'static str,
    /// The text as it reads (before indexing transforms).
    pub text: Cow<'a, str>,
}

fn doc<'a>(role: &'static str, kind: &'static str, text: Cow<'a, str>) -> Option<Doc<'a>> {
    (!text.trim().is_empty()).then_some(Doc { role, kind, text })
}

/// The parts joined with LF (as `collect::<Vec<_>>().join("\n")`), borrowed when there is
/// at most one part.
fn joined<'a>(mut parts: impl Iterator<Item = &'a str>) -> Cow<'a, str> {
    let Some(first) = parts.next() else {
        return Cow::Borrowed("");
    };
    let Some(second) = parts.next() else {
        return Cow::Borrowed(first);
    };
    let mut out = String::with_capacity(first.len() + second.len() + 1);
    out.push_str(first);
    for part in std::iter::once(second).chain(parts) {
        out.push('\n');
        out.push_str(part);
    }
    Cow::Owned(out)
}

fn blocks_text(blocks: &[ContentBlock]) -> Cow<'_, str> {
    joined(blocks.iter().filter_map(ContentBlock::as_text))
}

fn content_text(content: &UserContent) -> Cow<'_, str> {
    match content {
        UserContent::Text(text) => Cow::Borrowed(text),
        UserContent::Blocks(blocks) => blocks_text(blocks),
    }
}

/// Returns the documents an entry contributes to the index (the contract's role/kind table).
pub fn docs_for(entry: &Entry) -> Vec<Doc<'_>> {
    let mut out = Vec::new();
    match &entry.kind {
        EntryKind::Message(message) => match message {
            // The prompt and tool loadout: not conversation.
            AgentMessage::System(_) => {}
            AgentMessage::User(user) => {
                out.extend(doc("user", "text", content_text(&user.content)))
            }
            AgentMessage::Assistant(assistant) => {
                let mut text = Vec::new();
                let mut thinking = Vec::new();
                let mut calls = Vec::new();
                for block in &assistant.content {
                    match block {
                        ContentBlock::Text(block) => text.push(block.text.as_str()),
                        ContentBlock::Thinking(block) => thinking.push(block.thinking.as_str()),
                        ContentBlock::ToolCall(call) => calls.push(format!(
                            "{} {}",
                            call.name,
                            json::to_js_string(&call.arguments)
                        )),
                        ContentBlock::Image(_) | ContentBlock::Unknown(_) => {}
                    }
                }
                out.extend(doc("assistant", "text", joined(text.into_iter())));
                out.extend(doc("assistant", "thinking", joined(thinking.into_iter())));
                out.extend(doc("assistant", "tool_call", Cow::Owned(calls.join("\n"))));
            }
            AgentMessage::ToolResult(result) => {
                out.extend(doc("tool", "tool_result", blocks_text(&result.content)))
            }
            AgentMessage::BashExecution(bash) => out.extend(doc(
                "user",
                "bash",
                Cow::Owned(format!("{}\n{}", bash.command, bash.output)),
            )),
            AgentMessage::Custom(custom) => {
                out.extend(doc("meta", "custom", content_text(&custom.content)))
            }
            AgentMessage::BranchSummary(summary) => {
                out.extend(doc("meta", "summary", Cow::Borrowed(&summary.summary)))
            }
            AgentMessage::CompactionSummary(summary) => {
                out.extend(doc("meta", "summary", Cow::Borrowed(&summary.summary)))
            }
            AgentMessage::Unknown(value) => {
                // Legacy roles (e.g. a v2 `hookMessage` kept as it was): index their content.
                if let Some(content) = value.get("content") {
                    let text = match content {
                        Value::String(text) => Cow::Borrowed(text.as_str()),
                        Value::Array(_) => serde_json::from_value::<UserContent>(content.clone())
                            .map(|content| Cow::Owned(content_text(&content).into_owned()))
                            .unwrap_or_default(),
                        _ => Cow::Borrowed(""),
                    };
                    out.extend(doc("meta", "custom", text));
                }
            }
        },
        EntryKind::CustomMessage { content, .. } => {
            out.extend(doc("meta", "custom", content_text(content)))
        }
        EntryKind::Compaction(compaction) => {
            out.extend(doc("meta", "summary", Cow::Borrowed(&compaction.summary)))
        }
        EntryKind::BranchSummary(summary) => {
            out.extend(doc("meta", "summary", Cow::Borrowed(&summary.summary)))
        }
        EntryKind::SessionInfo { name } => out.extend(doc(
            "meta",
            "name",
            Cow::Borrowed(name.as_deref().unwrap_or_default()),
        )),
        EntryKind::ThinkingLevelChange { .. }
        | EntryKind::ModelChange(_)
        | EntryKind::Usage(_)
        | EntryKind::ContextEdit(_)
        | EntryKind::Custom { .. }
        | EntryKind::Label { .. }
        | EntryKind::Unknown { .. } => {}
    }
    out
}

/// Whether a character is CJK (written without spaces between words).
pub fn is_cjk(ch: char) -> bool {
    matches!(ch as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F) // CJK Extensions B–F, Compatibility Supplement
}

/// Whether the tokenizer indexes this character (letters and digits; unicode61's rule).
fn is_word_char(ch: char) -> bool {
    ch.is_alphanumeric()
}

/// Rewrites text for indexing: every run of CJK characters becomes its overlapping bigrams
/// separated by spaces (a single character stays as it is); everything else is unchanged.
/// Cut at [`MAX_DOC_BYTES`]. Text without CJK (the common case) is borrowed, not copied.
pub fn index_text(text: &str) -> Cow<'_, str> {
    let text = cut(text, MAX_DOC_BYTES);
    // Every CJK range starts at U+3040 or above, whose UTF-8 lead byte is 0xE3 or above: a
    // byte scan (vectorised) rules out most texts without decoding characters.
    if !text.bytes().any(|byte| byte >= 0xE3) || !text.chars().any(is_cjk) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() * 2);
    let mut run: Vec<char> = Vec::new();
    let flush = |run: &mut Vec<char>, out: &mut String| {
        if run.is_empty() {
            return;
        }
        out.push(' ');
        if run.len() == 1 {
            out.push(run[0]);
        } else {
            for pair in run.windows(2) {
                out.push(pair[0]);
                out.push(pair[1]);
                out.push(' ');
            }
        }
        out.push(' ');
        run.clear();
    };
    for ch in text.chars() {
        if is_cjk(ch) {
            run.push(ch);
        } else {
            flush(&mut run, &mut out);
            out.push(ch);
        }
    }
    flush(&mut run, &mut out);
    Cow::Owned(out)
}

fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The FTS rowid of a document (its "docid") carries what ranking needs, so that a query
/// ranks its candidates from the index alone, without reading a row per candidate:
///
/// `[entry day, days since 1970: 20 bits][order within that day: 24][length: 7]`
///
/// Docids therefore sort by entry day, then by insertion within the day: "the most recent
/// matches" are the most recent by the clock (to the day), whatever order sessions were
/// imported in. The length is the document's token count on a log scale (eight steps per
/// doubling, within 4.4 %), which is what bm25 normalises by. Within a day docids are dense,
/// so the gaps FTS5 stores between the docids of a term's documents stay small (a day holds
/// 16.7 million documents; a fuller day spills into the next).
pub mod docid {
    /// Bits below the day.
    const DAY_SHIFT: u32 = 31;
    /// Bits below the order within a day.
    const ORDER_SHIFT: u32 = 7;
    /// Documents one day can hold; more spill into the next day.
    pub const PER_DAY: i64 = 1 << (DAY_SHIFT - ORDER_SHIFT);
    /// The latest day a docid can carry (year 4840).
    const MAX_DAY: i64 = (1 << 20) - 1;
    /// Milliseconds in a day.
    const DAY_MS: i64 = 86_400_000;
    /// Steps of the length scale per doubling.
    const LENGTH_STEPS: f64 = 8.0;
    /// Largest length code (≈ 60,000 tokens; longer documents share it).
    const MAX_LENGTH_CODE: i64 = (1 << ORDER_SHIFT) - 1;

    /// Returns the day a docid for an entry at `ts_ms` starts from (clamped to the range a
    /// docid can carry; day 0 is left unused).
    pub fn day_of_ms(ts_ms: i64) -> i64 {
        ts_ms.div_euclid(DAY_MS).clamp(1, MAX_DAY)
    }

    /// The first docid of a day; the docids of that day are `[first(d), first(d + 1))`
    /// (past the last day: `i64::MAX`).
    pub fn first_of_day(day: i64) -> i64 {
        if day > MAX_DAY {
            i64::MAX
        } else {
            day.max(0) << DAY_SHIFT
        }
    }

    /// Whether documents can still be given this day.
    pub fn day_in_range(day: i64) -> bool {
        (1..=MAX_DAY).contains(&day)
    }

    /// Builds a docid.
    pub fn make(day: i64, order: i64, tokens: usize) -> i64 {
        (day.clamp(1, MAX_DAY) << DAY_SHIFT)
            | ((order & (PER_DAY - 1)) << ORDER_SHIFT)
            | length_code(tokens)
    }

    /// The day of a docid.
    pub fn day(docid: i64) -> i64 {
        docid >> DAY_SHIFT
    }

    /// The order within its day of a docid.
    pub fn order(docid: i64) -> i64 {
        (docid >> ORDER_SHIFT) & (PER_DAY - 1)
    }

    /// The entry time a docid stands for, Unix ms: the middle of its day (within 12 hours).
    pub fn time_ms(docid: i64) -> i64 {
        day(docid) * DAY_MS + DAY_MS / 2
    }

    /// The code of a token count.
    pub fn length_code(tokens: usize) -> i64 {
        let code = (LENGTH_STEPS * ((tokens as f64) + 1.0).log2()).round() as i64;
        code.clamp(0, MAX_LENGTH_CODE)
    }

    /// The token count a docid stands for (within 4.4 %).
    pub fn length(docid: i64) -> f64 {
        let code = docid & MAX_LENGTH_CODE;
        ((code as f64) / LENGTH_STEPS).exp2() - 1.0
    }

    /// An SQL expression giving the day a docid for an entry at `ts_column` (Unix ms) starts
    /// from, as [`day_of_ms`] computes it.
    pub fn day_sql(ts_column: &str) -> String {
        format!(
            "MAX(1, MIN(CASE WHEN {ts_column} < 0 THEN 0 ELSE {ts_column} / {DAY_MS} END, {MAX_DAY}))"
        )
    }

    /// An SQL expression giving the day of the docid in `column`.
    pub fn docid_day_sql(column: &str) -> String {
        format!("({column} >> {DAY_SHIFT})")
    }
}

/// Counts the tokens FTS5's `unicode61` tokenizer makes of indexed text, for the length a
/// docid carries (see [`crate::store::unicode61`]).
pub fn token_count(indexed: &str) -> usize {
    unicode61::token_count(indexed)
}

/// The one token a query term is to the index (folded as the tokenizer folds), or `None` when
/// the term is several tokens (a phrase, `src/auth.ts`, a CJK word of three characters).
pub fn single_token(term: &str) -> Option<String> {
    let indexed = index_text(term);
    let tokens = unicode61::tokens(&indexed);
    let [range] = tokens.as_slice() else {
        return None;
    };
    let token = &indexed[range.clone()];
    Some(if token.is_ascii() {
        token.to_ascii_lowercase()
    } else {
        fold(token)
    })
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

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// A word or phrase; `prefix` for a trailing `*`.
    Term {
        /// The text as typed (without quotes or `*`).
        text: String,
        /// Whether it was quoted.
        phrase: bool,
        /// Whether it ends with `*`.
        prefix: bool,
    },
    /// Both sides.
    And(Box<Query>, Box<Query>),
    /// Either side.
    Or(Box<Query>, Box<Query>),
    /// The left side without the right.
    Not(Box<Query>, Box<Query>),
}

/// Why a query cannot be run (exit 2 with this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QueryError(pub String);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Term {
        text: String,
        phrase: bool,
        prefix: bool,
    },
    And,
    Or,
    Not,
    Open,
    Close,
}

fn lex(input: &str) -> Result<Vec<Token>, QueryError> {
    let mut tokens = Vec::new();
    let mut chars = input.chars().peekable();
    while let Some(&ch) = chars.peek() {
        if ch.is_whitespace() {
            chars.next();
            continue;
        }
        match ch {
            '"' => {
                chars.next();
                let mut text = String::new();
                let mut closed = false;
                for next in chars.by_ref() {
                    if next == '"' {
                        closed = true;
                        break;
                    }
                    text.push(next);
                }
                if !closed {
                    return Err(QueryError(
                        "unclosed quote: a phrase needs a closing \" (e.g. \"connection refused\")"
                            .to_owned(),
                    ));
                }
                let prefix = chars.peek() == Some(&'*');
                if prefix {
                    chars.next();
                }
                tokens.push(Token::Term {
                    text,
                    phrase: true,
                    prefix,
                });
            }
            '(' => {
                chars.next();
                tokens.push(Token::Open);
            }
            ')' => {
                chars.next();
                tokens.push(Token::Close);
            }
            _ => {
                let mut word = String::new();
                while let Some(&next) = chars.peek() {
                    if next.is_whitespace() || next == '"' || next == '(' || next == ')' {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                match word.as_str() {
                    "AND" => tokens.push(Token::And),
                    "OR" => tokens.push(Token::Or),
                    "NOT" => tokens.push(Token::Not),
                    _ => {
                        let prefix = word.ends_with('*') && word.len() > 1;
                        let text = word.trim_end_matches('*').to_owned();
                        tokens.push(Token::Term {
                            text,
                            phrase: false,
                            prefix,
                        });
                    }
                }
            }
        }
    }
    Ok(tokens)
}

/// Whether a term has anything the index can match.
fn searchable(text: &str) -> bool {
    text.chars().any(is_word_char)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn or_expr(&mut self) -> Result<Option<Query>, QueryError> {
        let mut left = self.and_expr()?;
        while self.peek() == Some(&Token::Or) {
            self.pos += 1;
            let right = self.and_expr()?;
            left = match (left, right) {
                (Some(left), Some(right)) => Some(Query::Or(Box::new(left), Box::new(right))),
                (None, _) | (_, None) => {
                    return Err(QueryError(
                        "OR needs a term on each side (e.g. timeout OR deadline)".to_owned(),
                    ));
                }
            };
        }
        Ok(left)
    }

    fn and_expr(&mut self) -> Result<Option<Query>, QueryError> {
        let mut left = self.not_expr()?;
        loop {
            match self.peek() {
                Some(Token::And) => {
                    self.pos += 1;
                    let right = self.not_expr()?;
                    if left.is_none() || right.is_none() {
                        return Err(QueryError(
                            "AND needs a term on each side (e.g. cargo AND test)".to_owned(),
                        ));
                    }
                    left = combine_and(left, right);
                }
                Some(Token::Term { .. } | Token::Open) => {
                    let right = self.not_expr()?;
                    left = combine_and(left, right);
                }
                Some(Token::Not) if left.is_none() => {
                    return Err(QueryError(
                        "NOT needs a term before it (e.g. deploy NOT staging)".to_owned(),
                    ));
                }
                _ => return Ok(left),
            }
        }
    }

    fn not_expr(&mut self) -> Result<Option<Query>, QueryError> {
        let mut left = self.primary()?;
        while self.peek() == Some(&Token::Not) {
            self.pos += 1;
            let right = self.primary()?;
            left = match (left, right) {
                (Some(left), Some(right)) => Some(Query::Not(Box::new(left), Box::new(right))),
                (None, _) => {
                    return Err(QueryError(
                        "NOT needs a term before it (e.g. deploy NOT staging)".to_owned(),
                    ));
                }
                (Some(_), None) => {
                    return Err(QueryError(
                        "NOT needs a term after it (e.g. deploy NOT staging)".to_owned(),
                    ));
                }
            };
        }
        Ok(left)
    }

    fn primary(&mut self) -> Result<Option<Query>, QueryError> {
        match self.peek().cloned() {
            Some(Token::Open) => {
                self.pos += 1;
                let inner = self.or_expr()?;
                if self.peek() != Some(&Token::Close) {
                    return Err(QueryError(
                        "unbalanced parenthesis: a ( has no )".to_owned(),
                    ));
                }
                self.pos += 1;
                Ok(inner)
            }
            Some(Token::Close) => Err(QueryError(
                "unbalanced parenthesis: a ) has no (".to_owned(),
            )),
            Some(Token::Term {
                text,
                phrase,
                prefix,
            }) => {
                self.pos += 1;
                // Punctuation-only terms (`-`, `*`, emoji) have nothing to match: drop them.
                Ok(searchable(&text).then_some(Query::Term {
                    text,
                    phrase,
                    prefix,
                }))
            }
            Some(Token::And | Token::Or | Token::Not) | None => Ok(None),
        }
    }
}

fn combine_and(left: Option<Query>, right: Option<Query>) -> Option<Query> {
    match (left, right) {
        (Some(left), Some(right)) => Some(Query::And(Box::new(left), Box::new(right))),
        (Some(one), None) | (None, Some(one)) => Some(one),
        (None, None) => None,
    }
}

impl Query {
    /// Parses what a person typed.
    pub fn parse(input: &str) -> Result<Self, QueryError> {
        if input.trim().is_empty() {
            return Err(QueryError(
                "empty query: give words to search for".to_owned(),
            ));
        }
        if input.len() > MAX_QUERY_BYTES {
            return Err(QueryError(format!(
                "the query is {} bytes long; at most {MAX_QUERY_BYTES} are allowed",
                input.len()
            )));
        }
        let tokens = lex(input)?;
        for token in &tokens {
            if let Token::Term { text, .. } = token {
                let words = token_count(&index_text(text));
                if words > MAX_PHRASE_WORDS {
                    return Err(QueryError(format!(
                        "a phrase of {words} words; at most {MAX_PHRASE_WORDS} are allowed (quote a shorter, distinctive part)"
                    )));
                }
            }
        }
        let terms = tokens
            .iter()
            .filter(|token| matches!(token, Token::Term { .. }))
            .count();
        if terms > MAX_TERMS {
            return Err(QueryError(format!(
                "the query has {terms} terms; at most {MAX_TERMS} are allowed (quote a phrase or pick distinctive words)"
            )));
        }
        let mut parser = Parser { tokens, pos: 0 };
        let query = parser.or_expr()?;
        if let Some(token) = parser.peek() {
            let reason = match token {
                Token::Close => "unbalanced parenthesis: a ) has no (",
                Token::And | Token::Or => "AND/OR needs a term on each side",
                Token::Not => "NOT needs a term on each side (e.g. deploy NOT staging)",
                Token::Open | Token::Term { .. } => "unexpected text in the query",
            };
            return Err(QueryError(reason.to_owned()));
        }
        query.ok_or_else(|| {
            QueryError(
                "the query has no searchable words (punctuation and emoji are not indexed)"
                    .to_owned(),
            )
        })
    }

    /// Renders the query as an FTS5 expression; every term is a quoted string.
    pub fn to_fts(&self) -> String {
        match self {
            Self::Term { text, prefix, .. } => {
                let indexed = index_text(text);
                let mut out = String::with_capacity(indexed.len() + 4);
                out.push('"');
                out.push_str(&indexed.trim().replace('"', "\"\""));
                out.push('"');
                if *prefix {
                    out.push('*');
                }
                out
            }
            Self::And(left, right) => format!("({} AND {})", left.to_fts(), right.to_fts()),
            Self::Or(left, right) => format!("({} OR {})", left.to_fts(), right.to_fts()),
            Self::Not(left, right) => format!("({} NOT {})", left.to_fts(), right.to_fts()),
        }
    }

    /// Returns the positive terms (those not under a `NOT` right side), for snippets.
    pub fn positive_terms(&self) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        self.collect_terms(&mut out);
        out
    }

    fn collect_terms(&self, out: &mut Vec<(String, bool)>) {
        match self {
            Self::Term { text, prefix, .. } => out.push((text.clone(), *prefix)),
            Self::And(left, right) | Self::Or(left, right) => {
                left.collect_terms(out);
                right.collect_terms(out);
            }
            Self::Not(left, _) => left.collect_terms(out),
        }
    }

    /// An upper bound on the documents the query matches, from its terms' match counts
    /// (`count` gives `None` for a term too common to have been counted): the smaller side of
    /// an AND, the sum of an OR's, the left side of a NOT.
    pub fn match_bound(&self, count: &dyn Fn(&str, bool) -> Option<i64>) -> Option<i64> {
        match self {
            Self::Term { text, prefix, .. } => count(text, *prefix),
            Self::And(left, right) => match (left.match_bound(count), right.match_bound(count)) {
                (Some(one), Some(other)) => Some(one.min(other)),
                (one, None) | (None, one) => one,
            },
            Self::Or(left, right) => Some(
                left.match_bound(count)?
                    .saturating_add(right.match_bound(count)?),
            ),
            Self::Not(left, _) => left.match_bound(count),
        }
    }

    /// For a query of two or more plain words joined by AND, returns the same words as one
    /// exact phrase (hits with the exact phrase rank first).
    pub fn as_phrase(&self) -> Option<Query> {
        let mut words = Vec::new();
        if !self.plain_words(&mut words) || words.len() < 2 {
            return None;
        }
        Some(Self::Term {
            text: words.join(" "),
            phrase: true,
            prefix: false,
        })
    }

    fn plain_words(&self, out: &mut Vec<String>) -> bool {
        match self {
            Self::Term {
                text,
                phrase: false,
                prefix: false,
            } => {
                out.push(text.clone());
                true
            }
            Self::And(left, right) => left.plain_words(out) && right.plain_words(out),
            Self::Term { .. } | Self::Or(..) | Self::Not(..) => false,
        }
    }
}

/// Folds a word as the tokenizer does: lower case, diacritics removed.
fn fold(word: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    word.nfd()
        .filter(|ch| !unicode_normalization::char::is_combining_mark(*ch))
        .flat_map(char::to_lowercase)
        .collect()
}

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

/// Combines bm25 relevance with recency: `relevance × (0.5 + 0.5 · e^(−age_days / 30))`.
/// A hit from today keeps its full relevance, one from a month ago about 68%, old hits level
/// off at half — relevance decides, recency breaks near-ties.
pub fn score(bm25: f64, age_ms: i64) -> f64 {
    let relevance = -bm25;
    let age_days = (age_ms.max(0) as f64) / 86_400_000.0;
    relevance * (0.5 + 0.5 * (-age_days / 30.0).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fts(input: &str) -> Result<String, QueryError> {
        Query::parse(input).map(|query| query.to_fts())
    }

    #[test]
    fn queries_render_as_quoted_fts5() {
        assert_eq!(fts("SessionManager").unwrap(), "\"SessionManager\"");
        assert_eq!(fts("cargo test").unwrap(), "(\"cargo\" AND \"test\")");
        assert_eq!(fts("\"src/auth.ts\"").unwrap(), "\"src/auth.ts\"");
        assert_eq!(fts("sess*").unwrap(), "\"sess\"*");
        assert_eq!(fts("a OR b NOT c").unwrap(), "(\"a\" OR (\"b\" NOT \"c\"))");
        assert_eq!(fts("(a OR b) c").unwrap(), "((\"a\" OR \"b\") AND \"c\")");
        assert!(fts("NEAR(").unwrap_err().0.contains("parenthesis"));
        assert_eq!(
            fts("NEAR(a b)").unwrap(),
            "(\"NEAR\" AND (\"a\" AND \"b\"))"
        );
        assert!(fts("it's \"x").unwrap_err().0.contains("unclosed"));
        assert!(fts("say \"hi\"\"").unwrap_err().0.contains("unclosed"));
        assert_eq!(
            fts("'; DROP TABLE entries; --").unwrap(),
            "((\"DROP\" AND \"TABLE\") AND \"entries;\")"
        );
        assert_eq!(fts("数据库连接").unwrap(), "\"数据 据库 库连 连接\"");
    }

    #[test]
    fn hostile_queries_get_a_reason() {
        for input in [
            "", "   ", "AND", "NOT x", "x NOT", "OR y", "-", "*", "🎉", "(a", "a)", "\"",
        ] {
            let error = Query::parse(input).unwrap_err();
            assert!(!error.0.is_empty(), "{input}");
        }
        let long = "word ".repeat(2000);
        assert!(Query::parse(&long).unwrap_err().0.contains("at most"));
    }

    #[test]
    fn joined_parts_equal_a_join_and_one_part_is_borrowed() {
        for parts in [
            vec![],
            vec!["one"],
            vec!["one", "two"],
            vec!["", "two", ""],
            vec!["a", "b", "c"],
        ] {
            assert_eq!(joined(parts.iter().copied()), parts.join("\n"), "{parts:?}");
        }
        assert!(matches!(joined(["one"].into_iter()), Cow::Borrowed("one")));
    }

    #[test]
    fn text_without_cjk_is_indexed_as_it_is_without_a_copy() {
        // Non-ASCII below U+3040 (Latin, dashes, euro sign) and above it (emoji) but no CJK.
        for text in ["plain text", "Köln — “quoted” 5 €", "done 🎉 ok", ""] {
            assert!(
                matches!(index_text(text), Cow::Borrowed(same) if same == text),
                "{text}"
            );
        }
        assert!(matches!(index_text("错误"), Cow::Owned(_)));
        assert_eq!(index_text("안녕하세요").split_whitespace().count(), 4);
    }

    #[test]
    fn cjk_runs_become_bigrams() {
        let tokens = |text: &str| {
            index_text(text)
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(tokens("错误: 数据库"), ["错误", ":", "数据", "据库"]);
        assert_eq!(tokens("a字b"), ["a", "字", "b"]);
        assert_eq!(index_text("plain text"), "plain text");
    }

    #[test]
    fn snippets_mark_terms_and_phrases() {
        let text = "first line\nthe connection was refused by the server at port 5432\nlast";
        let terms = Query::parse("\"connection was refused\" port")
            .unwrap()
            .positive_terms();
        let out = snippet(text, &terms, "[", "]", 80);
        assert!(out.contains("[connection was refused]"), "{out}");
        assert!(out.contains("[port]"), "{out}");
        let out = snippet(
            "SessionManager.open(file)",
            &[("sessionman".into(), true)],
            "[",
            "]",
            80,
        );
        assert_eq!(out, "[SessionManager].open(file)");
    }

    #[test]
    fn recency_breaks_ties_but_relevance_decides() {
        assert!(score(-10.0, 0) > score(-10.0, 86_400_000 * 60));
        assert!(score(-10.0, 86_400_000 * 365) > score(-4.0, 0));
    }

    #[test]
    fn a_docid_carries_day_order_and_length() {
        let day = docid::day_of_ms(1_748_077_205_165);
        assert_eq!(day, 20_232);
        let id = docid::make(day, docid::PER_DAY - 1, 1_000);
        assert!(id > 0);
        assert_eq!(docid::day(id), day);
        assert_eq!(docid::time_ms(id), 20_232 * 86_400_000 + 43_200_000);
        assert_eq!(docid::order(id), docid::PER_DAY - 1);
        assert!((docid::length(id) - 1_000.0).abs() <= 45.0);
        assert!(id >= docid::first_of_day(day));
        assert!(id < docid::first_of_day(day + 1));
        // Docids sort by day first, then by order within the day.
        assert!(docid::make(day, 0, 60_000) < docid::make(day, 1, 0));
        assert!(docid::make(day, docid::PER_DAY - 1, 60_000) < docid::make(day + 1, 0, 0));
        // Lengths: exact for the shortest documents, within 4.4 % above, shared past the cap.
        for tokens in [0usize, 1, 2, 3, 7, 20, 99, 1_234, 50_000] {
            let carried = docid::length(docid::make(day, 0, tokens));
            let tolerance = (tokens as f64) * 0.045 + 0.5;
            assert!(
                (carried - tokens as f64).abs() <= tolerance,
                "{tokens}: {carried}"
            );
        }
        assert_eq!(
            docid::length(docid::make(day, 0, 1 << 20)),
            docid::length(docid::make(day, 0, 1 << 30))
        );
        // Times outside the range are clamped; the last day's range ends at i64::MAX.
        assert_eq!(docid::day_of_ms(-5_000), 1);
        assert_eq!(docid::day_of_ms(0), 1);
        assert_eq!(docid::first_of_day((1 << 20) + 7), i64::MAX);
        assert!(docid::make(i64::MAX, 0, 0) > 0);
        assert!(!docid::day_in_range(1 << 20));
    }

    #[test]
    fn tokens_are_counted_and_single_tokens_folded_as_the_tokenizer_does() {
        assert_eq!(token_count("fix the src/auth.ts error, again!"), 7);
        assert_eq!(token_count(""), 0);
        assert_eq!(token_count("  ...  "), 0);
        assert_eq!(token_count(&index_text("日本語の文章 test")), 6);
        assert_eq!(
            single_token("SessionManager").as_deref(),
            Some("sessionmanager")
        );
        assert_eq!(single_token("Café").as_deref(), Some("cafe"));
        assert_eq!(single_token("src/auth.ts"), None);
        assert_eq!(single_token("two words"), None);
        assert_eq!(single_token("日本").as_deref(), Some("日本"));
        assert_eq!(single_token("日本語"), None);
        assert_eq!(single_token("!!"), None);
    }

    #[test]
    fn term_frequencies_count_per_document_across_a_prefix_s_tokens() {
        let mut one = TermFrequencies::default();
        for docid in [3, 3, 5, 9, 9, 9] {
            one.add(docid);
        }
        one.finish();
        assert_eq!(one.docs(), 3);
        assert_eq!(
            (one.get(3), one.get(5), one.get(9), one.get(4)),
            (Some(2), Some(1), Some(3), None)
        );
        // A prefix: each token's documents in order, the tokens one after the other.
        let mut prefix = TermFrequencies::default();
        for docid in [2, 7, 7, 1, 7, 8, 2] {
            prefix.add(docid);
        }
        prefix.finish();
        assert_eq!(prefix.docs(), 4);
        let counts: Vec<Option<u32>> = [1, 2, 7, 8, 3].iter().map(|&doc| prefix.get(doc)).collect();
        assert_eq!(counts, [Some(1), Some(2), Some(3), Some(1), None]);
    }

    #[test]
    fn plain_word_queries_offer_an_exact_phrase() {
        let query = Query::parse("connection refused").unwrap();
        assert_eq!(
            query.as_phrase().unwrap().to_fts(),
            "\"connection refused\""
        );
        assert!(Query::parse("a OR b").unwrap().as_phrase().is_none());
        assert!(Query::parse("single").unwrap().as_phrase().is_none());
    }
}

// ----- running a search (I/O) ---------------------------------------------------------------

use std::collections::{HashMap, HashSet};

use rusqlite::Connection;

use crate::model::ids::{EntryId, SessionId};
use crate::store::{ListScope, SessionStore, StoreError, derived, fts_index, sql, unicode61};

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
fn common_docs(text: &str) -> i64 {
    if single_token(text).is_some() {
        COMMON_TERM_DOCS
    } else {
        COMMON_PHRASE_DOCS
    }
}

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
    candidate: sql::Candidate,
    score: f64,
}

/// How to walk the matches of a query whose terms bound them by `bound`: all of them, in FTS5's
/// cheaper forward order, when that is at most [`COMMON_TERM_DOCS`]; else the newest
/// [`CANDIDATES`] only.
fn walk_for(bound: Option<i64>) -> sql::Walk {
    match bound {
        Some(bound) if bound <= COMMON_TERM_DOCS => sql::Walk::All,
        _ => sql::Walk::Newest(CANDIDATES),
    }
}

/// Gives candidates FTS5's `bm25()` when the ranking is FTS5's over the whole query (every
/// term selective, so the matches of the window are few).
fn fts_bm25_inline(
    conn: &Connection,
    path: &str,
    ranking: &Ranking,
    fts: &str,
    candidates: &mut [sql::Candidate],
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
    let ranks: HashMap<i64, f64> = sql::bm25_scores(conn, path, fts, window_start)?
        .into_iter()
        .collect();
    for candidate in candidates {
        candidate.bm25 = ranks.get(&candidate.docid).copied().unwrap_or(0.0);
    }
    Ok(())
}

/// How a search ranks its candidates.
enum Ranking {
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
    fn ranks_nothing(&self) -> bool {
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
    fn plan(
        conn: &Connection,
        path: &str,
        query: &Query,
        terms: &[(String, bool)],
        known_hits: Option<i64>,
    ) -> Result<(Self, Option<i64>), StoreError> {
        let totals = sql::fts_totals(conn, path)?;
        let mut counted: Vec<(&str, bool, i64)> = Vec::with_capacity(terms.len());
        let mut from_index = totals.is_some();
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
                _ => sql::match_count_capped(conn, path, &term.to_fts(), common)?,
            };
            if hits >= common {
                any_common = true;
                continue;
            }
            counted.push((text, *prefix, hits));
            if from_index && hits > 0 {
                let frequencies = match single_token(text) {
                    Some(token) => sql::term_frequencies(
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
                    _ => from_index = false,
                }
            }
            selective.push(term);
        }
        let ranking = match totals {
            Some((rows, tokens)) if from_index => Self::Index {
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

/// The tokens of a query that [`from_index`] can evaluate, in query order: single ASCII
/// tokens (not prefixes) joined by AND. Other shapes, and words outside ASCII (whose folding
/// FTS5's tokenizer owns), run through FTS5.
fn index_tokens(query: &Query) -> Option<Vec<String>> {
    match query {
        Query::Term {
            text,
            prefix: false,
            ..
        } if text.is_ascii() => single_token(text).map(|token| vec![token]),
        Query::And(left, right) => {
            let mut tokens = index_tokens(left)?;
            tokens.extend(index_tokens(right)?);
            Some(tokens)
        }
        Query::Term { .. } | Query::Or(..) | Query::Not(..) => None,
    }
}

/// A term whose doclists span at most this many leaf pages (≈ 4 KB each; ≈ 600 documents
/// of one occurrence) is read whole; a longer one only where it meets the shorter ones.
pub const FULL_READ_PAGES: u64 = 16;

/// Evaluates an AND of single tokens from FTS5's index itself ([`fts_index`]): the shortest
/// doclists are read whole and intersected, each longer one is read only for the documents
/// still matching (with its count up to [`COMMON_TERM_DOCS`]), the newest [`CANDIDATES`]
/// matches in scope are kept, ranked as [`Ranking::plan`] ranks them (a very common term
/// filters, a selective one is ranked from its frequencies), and the exact phrase is checked
/// on their positions. The same candidates, ranking and phrase hits as [`through_fts5`];
/// `None` when a filter other than the scope applies, when every term is long (reading
/// newest first is cheaper then: [`from_index_newest`]), or when the index holds something
/// the reader does not expect.
fn from_index(
    conn: &Connection,
    path: &str,
    request: &SearchRequest,
    filter: &sql::SearchFilter<'_>,
    terms: &[(String, bool)],
    tokens: &[String],
) -> Result<Option<Evaluated>, StoreError> {
    if !filter.roles.is_empty()
        || !filter.kinds.is_empty()
        || filter.since_ms.is_some()
        || filter.until_ms.is_some()
        || filter.min_docid.is_some()
    {
        return Ok(None);
    }
    let Some((index, bm25)) = open_index(conn, path)? else {
        return Ok(None);
    };
    let distinct = distinct_tokens(tokens);
    let mut located = Vec::with_capacity(distinct.len());
    for token in &distinct {
        located.push(index.locate(conn, path, token)?);
    }
    let mut order: Vec<usize> = (0..distinct.len()).collect();
    order.sort_by_key(|&idx| located[idx].pages());
    if order
        .first()
        .is_none_or(|&idx| located[idx].pages() > FULL_READ_PAGES)
    {
        return Ok(None);
    }
    let mut postings: Vec<Option<fts_index::Postings>> =
        (0..distinct.len()).map(|_| None).collect();
    let mut matches: Option<Vec<i64>> = None;
    for &idx in &order {
        let term = &located[idx];
        let read = match &matches {
            Some(within) if term.pages() > FULL_READ_PAGES => {
                index.read(conn, path, term, Some(within), COMMON_TERM_DOCS as usize)?
            }
            _ => index.read(conn, path, term, None, usize::MAX)?,
        };
        let Some(read) = read else {
            return Ok(None);
        };
        matches = Some(match matches {
            None => read.docids().collect(),
            Some(previous) => intersect(&previous, read.docids()),
        });
        postings[idx] = Some(read);
        if matches.as_ref().is_some_and(Vec::is_empty) {
            // No match: the other terms' documents cannot matter.
            break;
        }
    }
    let matches = matches.unwrap_or_default();
    let postings_of = |text: &str| {
        let token = single_token(text)?;
        let idx = distinct.iter().position(|found| *found == token)?;
        postings[idx].as_ref()
    };
    // As `Ranking::plan`: each positive term once per mention; a very common one only filters.
    let mut ranked = Vec::new();
    for (text, _) in terms {
        let Some(read) = postings_of(text) else {
            continue;
        };
        let docs = read.docs();
        if docs > 0 && (docs as i64) < common_docs(text) {
            ranked.push(TermFrequencies::from_counts(read.frequencies(), docs));
        }
    }
    let ranking = Ranking::Index {
        bm25,
        terms: ranked,
    };
    // `Query::match_bound` over the selective terms' counts, as `Ranking::plan` gives it.
    let bound = distinct
        .iter()
        .zip(&postings)
        .filter_map(|(_, read)| read.as_ref())
        .map(|read| read.docs() as i64)
        .filter(|&docs| docs < COMMON_TERM_DOCS)
        .min();
    // The newest matches in scope (as `through_fts5` picks between the two ways to test it:
    // the scope's docids, or each match's document row — which also gives its exact time).
    let candidate = |docid| sql::Candidate {
        docid,
        bm25: 0.0,
        doc: None,
    };
    let newest = matches.iter().rev().copied();
    let window = window(&ranking, request);
    let candidates: Vec<sql::Candidate> = match sql::scope_sids(conn, path, filter)? {
        None => newest.take(window).map(candidate).collect(),
        Some(sids) => {
            let entries = sql::scope_entries(conn, path, &sids)?;
            if entries <= SCOPE_SET_MAX
                && bound.is_none_or(|bound| bound.saturating_mul(4) > entries)
            {
                let scope = sql::scope_docids(conn, path, &sids)?;
                newest
                    .filter(|docid| scope.binary_search(docid).is_ok())
                    .take(window)
                    .map(candidate)
                    .collect()
            } else {
                let mut kept = Vec::new();
                for docid in newest {
                    if kept.len() >= window {
                        break;
                    }
                    let doc = sql::doc_by_id(conn, path, docid)?.map(Box::new);
                    if doc.as_ref().is_some_and(|doc| sids.contains(&doc.sid)) {
                        kept.push(sql::Candidate {
                            docid,
                            bm25: 0.0,
                            doc,
                        });
                    }
                }
                kept
            }
        }
    };
    let phrase_hits = match request.query.as_phrase() {
        Some(_) => {
            let sequence: Option<Vec<&fts_index::Postings>> = tokens
                .iter()
                .map(|token| {
                    let idx = distinct.iter().position(|found| found == token)?;
                    postings[idx].as_ref()
                })
                .collect();
            match sequence {
                Some(sequence) => candidates
                    .iter()
                    .map(|candidate| candidate.docid)
                    .filter(|&docid| has_phrase(&sequence, docid))
                    .collect(),
                None => HashSet::new(),
            }
        }
        None => HashSet::new(),
    };
    Ok(Some(Evaluated {
        ranking,
        candidates,
        phrase_hits,
    }))
}

/// The docids of `sorted` that `other` (ascending) also yields.
fn intersect(sorted: &[i64], other: impl Iterator<Item = i64>) -> Vec<i64> {
    let mut out = Vec::with_capacity(sorted.len());
    let mut rest = sorted;
    for docid in other {
        while let Some((&first, tail)) = rest.split_first() {
            if first >= docid {
                break;
            }
            rest = tail;
        }
        match rest.first() {
            Some(&first) if first == docid => out.push(docid),
            Some(_) => {}
            None => break,
        }
    }
    out
}

/// Whether the tokens occur in `docid` one after the other, in this order.
fn has_phrase(sequence: &[&fts_index::Postings], docid: i64) -> bool {
    sequence
        .iter()
        .map(|postings| postings.positions(docid))
        .collect::<Option<Vec<&[i64]>>>()
        .is_some_and(|lists| consecutive(&lists))
}

/// Whether position lists (ascending, in phrase order) hold consecutive positions: FTS5's
/// phrase match (the same column, offsets one after the other).
fn consecutive(lists: &[&[i64]]) -> bool {
    let Some((first, rest)) = lists.split_first() else {
        return false;
    };
    first.iter().any(|&start| {
        rest.iter()
            .enumerate()
            .all(|(step, list)| list.binary_search(&(start + step as i64 + 1)).is_ok())
    })
}

/// FTS5's index as [`fts_index`] reads it, and bm25 over its totals; `None` when either
/// record is missing or unreadable (the search then runs through FTS5).
fn open_index(
    conn: &Connection,
    path: &str,
) -> Result<Option<(fts_index::Index, Bm25)>, StoreError> {
    let Some(index) = fts_index::Index::open(conn, path)? else {
        return Ok(None);
    };
    Ok(sql::fts_totals(conn, path)?.map(|(rows, tokens)| (index, Bm25::new(rows, tokens))))
}

/// The distinct tokens of a query, in their first order.
fn distinct_tokens(tokens: &[String]) -> Vec<&str> {
    let mut distinct: Vec<&str> = Vec::with_capacity(tokens.len());
    for token in tokens {
        if !distinct.contains(&token.as_str()) {
            distinct.push(token);
        }
    }
    distinct
}

/// The tokens of an ASCII term, folded as the tokenizer folds them (`None` for other text).
fn ascii_tokens(text: &str) -> Option<Vec<String>> {
    if !text.is_ascii() {
        return None;
    }
    let tokens: Vec<String> = unicode61::tokens(text)
        .into_iter()
        .map(|range| text[range].to_ascii_lowercase())
        .collect();
    (!tokens.is_empty()).then_some(tokens)
}

/// The most leaf pages a newest-first evaluation ([`from_index_newest`]) reads before it
/// leaves the query to FTS5 (a rare phrase of common words, say).
pub const NEWEST_MAX_PAGES: u64 = 128;

/// Moves every reader to the newest document they all have (the leapfrog of an AND, from the
/// newest back); `None` when one of them has no more.
fn next_common(
    readers: &mut [fts_index::Newest],
    index: &fts_index::Index,
    conn: &Connection,
    path: &str,
) -> Result<Option<i64>, StoreError> {
    let count = readers.len();
    let Some(mut target) = readers[0].head(index, conn, path)? else {
        return Ok(None);
    };
    let mut agreed = 1;
    let mut turn = 1;
    while agreed < count {
        let reader = &mut readers[turn % count];
        let head = loop {
            match reader.head(index, conn, path)? {
                None => return Ok(None),
                Some(head) if head > target => reader.pass(index, conn, path)?,
                Some(head) => break head,
            }
        };
        if head == target {
            agreed += 1;
        } else {
            target = head;
            agreed = 1;
        }
        turn += 1;
    }
    Ok(Some(target))
}

/// Evaluates, over the whole index, an AND of single tokens (`phrase: false`) or one phrase
/// from FTS5's index itself, newest first ([`fts_index::Newest`]): the matches are found from
/// the newest back until there are [`CANDIDATES`] of them, each term is counted up to its
/// commonness bound, positions are decoded for the matches only. The same candidates, ranking
/// and phrase hits as [`through_fts5`]; `None` when the evaluation needs more than
/// [`NEWEST_MAX_PAGES`] pages, when a phrase is selective (FTS5 ranks those), or when the
/// index holds something the reader does not expect.
fn from_index_newest(
    conn: &Connection,
    path: &str,
    request: &SearchRequest,
    terms: &[(String, bool)],
    tokens: &[String],
    phrase: bool,
) -> Result<Option<Evaluated>, StoreError> {
    let Some((index, bm25)) = open_index(conn, path)? else {
        return Ok(None);
    };
    let distinct = distinct_tokens(tokens);
    let mut readers = Vec::with_capacity(distinct.len());
    for token in &distinct {
        let term = index.locate(conn, path, token)?;
        readers.push(index.newest(conn, path, &term)?);
    }
    // The query's tokens in order, as indexes into `distinct` (for phrase positions).
    let sequence: Vec<usize> = tokens
        .iter()
        .filter_map(|token| distinct.iter().position(|found| found == token))
        .collect();
    let bonus = request.query.as_phrase().is_some();
    let pages = |readers: &[fts_index::Newest]| -> u64 {
        readers.iter().map(fts_index::Newest::pages).sum()
    };
    let mut positions: Vec<Vec<i64>> = vec![Vec::new(); distinct.len()];
    // Each match's occurrences of each distinct token (`distinct.len()` per match).
    let mut frequencies: Vec<u32> = Vec::new();
    let mut matches: Vec<i64> = Vec::new();
    let mut phrase_hits = HashSet::new();
    while matches.len() < CANDIDATES as usize {
        if pages(&readers) > NEWEST_MAX_PAGES {
            return Ok(None);
        }
        let Some(docid) = next_common(&mut readers, &index, conn, path)? else {
            break;
        };
        for (reader, found) in readers.iter_mut().zip(&mut positions) {
            found.clear();
            if !reader.head_positions(&index, conn, path, found)? {
                return Ok(None);
            }
        }
        let in_order = sequence.len() > 1
            && consecutive(
                &sequence
                    .iter()
                    .map(|&idx| positions[idx].as_slice())
                    .collect::<Vec<_>>(),
            );
        if !phrase || in_order {
            matches.push(docid);
            frequencies.extend(positions.iter().map(|found| found.len() as u32));
            if bonus && in_order {
                phrase_hits.insert(docid);
            }
        }
        for reader in &mut readers {
            reader.pass(&index, conn, path)?;
        }
    }
    if readers.iter().any(fts_index::Newest::gave_up) {
        return Ok(None);
    }
    let ranking = if phrase {
        // As `Ranking::plan`: a phrase is very common from `COMMON_PHRASE_DOCS` matches, and
        // then only filters; a selective one is FTS5's to rank.
        if (matches.len() as i64) < COMMON_PHRASE_DOCS {
            return Ok(None);
        }
        Ranking::Index {
            bm25,
            terms: Vec::new(),
        }
    } else {
        // Each term counted up to its commonness bound (or all of it).
        for reader in &mut readers {
            while (reader.docs() as i64) < COMMON_TERM_DOCS {
                if pages(std::slice::from_ref(reader)) > NEWEST_MAX_PAGES {
                    return Ok(None);
                }
                if reader.head(&index, conn, path)?.is_none() {
                    break;
                }
                reader.pass(&index, conn, path)?;
            }
            if reader.gave_up() {
                return Ok(None);
            }
        }
        let mut ranked = Vec::new();
        for (text, _) in terms {
            let Some(idx) = single_token(text)
                .and_then(|token| distinct.iter().position(|found| *found == token))
            else {
                continue;
            };
            let docs = readers[idx].docs();
            if docs > 0 && (docs as i64) < COMMON_TERM_DOCS {
                let counts = matches
                    .iter()
                    .enumerate()
                    .rev()
                    .map(|(at, &docid)| (docid, frequencies[at * distinct.len() + idx]))
                    .collect();
                ranked.push(TermFrequencies::from_counts(counts, docs));
            }
        }
        Ranking::Index {
            bm25,
            terms: ranked,
        }
    };
    matches.truncate(window(&ranking, request));
    Ok(Some(Evaluated {
        ranking,
        candidates: matches
            .into_iter()
            .map(|docid| sql::Candidate {
                docid,
                bm25: 0.0,
                doc: None,
            })
            .collect(),
        phrase_hits,
    }))
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
    candidates: Vec<sql::Candidate>,
    phrase_hits: HashSet<i64>,
}

/// Runs a search's query through FTS5 (every query shape and filter).
fn through_fts5(
    conn: &Connection,
    path: &str,
    request: &SearchRequest,
    filter: &sql::SearchFilter<'_>,
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
        let (hits, mut matches) = sql::newest_matches(conn, path, &fts, walk, CANDIDATES as usize)?;
        let (ranking, _) = Ranking::plan(conn, path, &request.query, terms, Some(hits))?;
        fts_bm25_inline(conn, path, &ranking, &fts, &mut matches)?;
        (ranking, matches)
    } else {
        let (ranking, match_bound) = Ranking::plan(conn, path, &request.query, terms, None)?;
        // A search of some sessions only (a directory's, or one): their docids come
        // from the document map's session index and the matches are tested against
        // them, instead of a document-map read per match (most matches of a common
        // word lie outside a directory's sessions) — unless the query matches so few
        // documents that reading theirs is cheaper than listing the sessions'.
        if let Some(sids) = sql::scope_sids(conn, path, filter)? {
            let entries = sql::scope_entries(conn, path, &sids)?;
            if entries <= SCOPE_SET_MAX
                && match_bound.is_none_or(|bound| bound.saturating_mul(4) > entries)
            {
                scope = Some(sql::scope_docids(conn, path, &sids)?);
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
                let mut matches =
                    sql::candidates_in(conn, path, &fts, scope, None, window as usize)?;
                fts_bm25_inline(conn, path, &ranking, &fts, &mut matches)?;
                if per_entry {
                    for candidate in &mut matches {
                        candidate.doc = sql::doc_by_id(conn, path, candidate.docid)?.map(Box::new);
                    }
                }
                matches
            }
            None => {
                let mut matches = sql::search_candidates(
                    conn,
                    path,
                    &fts,
                    filter,
                    if window < CANDIDATES {
                        sql::Walk::Newest(window)
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
                let ranks: HashMap<i64, f64> =
                    sql::bm25_scores(conn, path, &expression, window_start)?
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
    let window = sql::SearchFilter {
        min_docid: window_start,
        with_doc: false,
        ..filter.clone()
    };
    let phrase_hits: HashSet<i64> = match (request.query.as_phrase(), &scope) {
        (Some(phrase), Some(scope)) if !candidates.is_empty() => sql::candidates_in(
            conn,
            path,
            &phrase.to_fts(),
            scope,
            window_start,
            usize::MAX,
        )?
        .into_iter()
        .map(|candidate| candidate.docid)
        .collect(),
        (Some(phrase), None) if !candidates.is_empty() => sql::search_candidates(
            conn,
            path,
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

impl SessionStore {
    /// Runs a full-text search: the most recent [`CANDIDATES`] matching documents that pass
    /// the filters, ranked by bm25 with a recency boost.
    ///
    /// Ranking reads the index only when it can ([`Ranking::Index`]): each selective term's
    /// frequencies come from FTS5's vocabulary, each document's length and time from its docid,
    /// and the document map is read for the hits shown (and for the candidates when a filter
    /// needs their session). A query with a selective phrase is ranked by FTS5's `bm25()`
    /// instead, which reads each candidate's length.
    pub fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, StoreError> {
        self.search_with(request, true)
    }

    /// The same search with FTS5 evaluating every query: the reference that [`Self::search`]'s
    /// reading of the index itself is tested against.
    #[doc(hidden)]
    pub fn search_through_fts5(
        &self,
        request: &SearchRequest,
    ) -> Result<Vec<SearchHit>, StoreError> {
        self.search_with(request, false)
    }

    fn search_with(
        &self,
        request: &SearchRequest,
        read_index: bool,
    ) -> Result<Vec<SearchHit>, StoreError> {
        self.read(|conn, path| {
            let sid = match &request.session {
                Some(session) => {
                    Some(sql::sid_of(conn, path, session.as_str())?.ok_or_else(|| {
                        StoreError::SessionNotFound {
                            query: session.to_string(),
                        }
                    })?)
                }
                None => None,
            };
            // The model and branch filters look at each candidate's entry.
            let per_entry = request.model.is_some() || request.active_only;
            let filter = sql::SearchFilter {
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
            let mut evaluated = None;
            if read_index && !per_entry {
                evaluated = match &request.query {
                    // One phrase (or a term of several tokens): newest first, over the index.
                    Query::Term {
                        text,
                        prefix: false,
                        ..
                    } if filter.is_unfiltered() => match ascii_tokens(text) {
                        Some(tokens) if tokens.len() > 1 => {
                            from_index_newest(conn, path, request, &terms, &tokens, true)?
                        }
                        _ => None,
                    },
                    _ => None,
                };
                if evaluated.is_none()
                    && let Some(tokens) = index_tokens(&request.query)
                {
                    evaluated = from_index(conn, path, request, &filter, &terms, &tokens)?;
                    if evaluated.is_none() && filter.is_unfiltered() {
                        evaluated = from_index_newest(conn, path, request, &terms, &tokens, false)?;
                    }
                }
            }
            let Evaluated {
                ranking,
                mut candidates,
                phrase_hits,
            } = match evaluated {
                Some(evaluated) => evaluated,
                None => through_fts5(conn, path, request, &filter, per_entry, &terms)?,
            };
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
                        let model = model_at(conn, path, doc.sid, doc.seq, &mut models)?;
                        let pattern = pattern.to_lowercase();
                        if !model.is_some_and(|model| model.to_lowercase().contains(&pattern)) {
                            continue;
                        }
                    }
                    if request.active_only && !active.contains(conn, path, doc.sid, doc.seq)? {
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
                    Some(doc) => {
                        sql::entry_by_seq(conn, path, doc.sid, doc.seq)?.map(|row| (*doc, row))
                    }
                    None => sql::doc_and_entry(conn, path, candidate.docid)?,
                };
                let Some((doc, row)) = found else {
                    continue;
                };
                let Some(session) = active.session(conn, path, doc.sid)?.cloned() else {
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
                let on_active_path = active.contains(conn, path, doc.sid, doc.seq)?;
                let context_edit = match (&row.id, on_active_path) {
                    (Some(id), true) => {
                        let mut found = None;
                        for (edit_seq, omits) in sql::context_edits_of(conn, path, doc.sid, id)? {
                            if active.contains(conn, path, doc.sid, edit_seq)? {
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
        })
    }

    /// Whether an entry (by seq) lies on its session's active path.
    pub fn on_active_path(&self, session: &SessionId, seq: i64) -> Result<bool, StoreError> {
        self.read(|conn, path| {
            let sid = sql::sid_of(conn, path, session.as_str())?.ok_or_else(|| {
                StoreError::SessionNotFound {
                    query: session.to_string(),
                }
            })?;
            ActivePaths::default().contains(conn, path, sid, seq)
        })
    }
}

/// The model in effect at an entry: its own for an assistant message, else the last model
/// entry on its path (`provider/model`).
fn model_at(
    conn: &Connection,
    path: &str,
    sid: i64,
    seq: i64,
    cache: &mut HashMap<(i64, i64), Option<String>>,
) -> Result<Option<String>, StoreError> {
    let Some(state) = sql::path_state(conn, path, sid, seq)? else {
        return Ok(None);
    };
    let Some(model_seq) = state.model_seq else {
        return Ok(None);
    };
    if let Some(found) = cache.get(&(sid, model_seq)) {
        return Ok(found.clone());
    }
    let model = sql::entry_by_seq(conn, path, sid, model_seq)?
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
    fn session(
        &mut self,
        conn: &Connection,
        path: &str,
        sid: i64,
    ) -> Result<Option<&sql::HitSession>, StoreError> {
        let row = match self.rows.entry(sid) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                entry.insert(sql::hit_session(conn, path, sid)?)
            }
        };
        Ok(row.as_ref())
    }

    fn contains(
        &mut self,
        conn: &Connection,
        path: &str,
        sid: i64,
        seq: i64,
    ) -> Result<bool, StoreError> {
        if !self.sessions.contains_key(&sid) {
            let (leaf, irregular, linear_depth) = match self.session(conn, path, sid)? {
                Some(row) => (
                    row.leaf,
                    row.irregular,
                    row.leaf_depth.map(|depth| depth + 1 == row.entries),
                ),
                None => (None, false, None),
            };
            let set = match leaf {
                Some(leaf_seq) if irregular => {
                    Some(SessionStore::path_set(conn, path, sid, leaf_seq)?)
                }
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
        let Some(state) = sql::path_state(conn, path, sid, seq)? else {
            return Ok(false);
        };
        Ok(derived::ancestor_at_depth(conn, path, sid, leaf, state.depth)? == Some(seq))
    }
}
