//! What an entry contributes to the index: its documents (one per searchable unit, with a
//! role and kind), the text FTS5 is given (CJK runs as bigrams), and the tokens FTS5's
//! `unicode61` tokenizer makes of it (for the length a docid carries, and to look a query
//! term up in FTS5's vocabulary).
//!
//! Invariant: no I/O.

use std::borrow::Cow;

use serde_json::Value;

use crate::model::entry::{Entry, EntryKind};
use crate::model::message::{AgentMessage, ContentBlock, UserContent};
use crate::store::search::unicode61;
use crate::support::json;

/// Longest text indexed for one document; the rest of a huge tool output is not searchable.
pub const MAX_DOC_BYTES: usize = 256 * 1024;

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
pub(super) fn joined<'a>(mut parts: impl Iterator<Item = &'a str>) -> Cow<'a, str> {
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
pub(super) fn is_word_char(ch: char) -> bool {
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

pub(super) fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
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

/// Folds a word as the tokenizer does: lower case, diacritics removed.
pub(super) fn fold(word: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    word.nfd()
        .filter(|ch| !unicode_normalization::char::is_combining_mark(*ch))
        .flat_map(char::to_lowercase)
        .collect()
}
