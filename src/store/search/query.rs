//! The query language people type — words, `"phrases"`, `prefix*`, `AND`, `OR`, `NOT` (upper
//! case) and parentheses; juxtaposition means AND — parsed here and rendered as a safe FTS5
//! expression (every term quoted), or rejected with a one-line reason: FTS5 never sees raw
//! user syntax.
//!
//! Invariant: no I/O.

use crate::store::search::docs::{index_text, is_word_char, token_count};

/// Most terms a query may have.
pub const MAX_TERMS: usize = 64;

/// The most words a quoted phrase may hold: a phrase's cost grows with its length in every
/// document holding its words, and no one types a longer one (an 8,000-word phrase took 42 s).
pub const MAX_PHRASE_WORDS: usize = 64;

/// The longest query text, in bytes.
pub const MAX_QUERY_BYTES: usize = 8192;

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
                    // `a AND NOT b` is `a NOT b` (the NOT is taken on the next turn).
                    if self.peek() == Some(&Token::Not) && left.is_some() {
                        continue;
                    }
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
                Some(Token::Not) => {
                    let Some(kept) = left else {
                        return Err(QueryError(
                            "NOT needs a term before it (e.g. deploy NOT staging)".to_owned(),
                        ));
                    };
                    self.pos += 1;
                    let Some(right) = self.primary()? else {
                        return Err(QueryError(
                            "NOT needs a term after it (e.g. deploy NOT staging)".to_owned(),
                        ));
                    };
                    left = Some(Query::Not(Box::new(kept), Box::new(right)));
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
