//! Line/byte truncation of tool output, exactly as the reference cuts it
//! (`spec/tools.md` §2.2): keep the head ([`truncate_head`]) or the tail ([`truncate_tail`]) in
//! whole lines under two independent limits, and cut single long lines ([`truncate_line`]).
//!
//! Units: *bytes* are UTF-8 bytes; *lines* come from splitting on `\n` only (a trailing newline
//! yields a final empty line); *chars* in [`truncate_line`] are UTF-16 code units, as
//! JavaScript's `String#length`. The [`Truncation`] record serialises to the reference's
//! `details.truncation` object, key for key and in the same order.
//!
//! Invariant: pure functions, no I/O; the kept text is always a prefix (head) or suffix (tail)
//! of the input made of whole lines, except the one documented partial-last-line case.

use serde::Serialize;

/// Default line limit of every tool (2000).
pub const DEFAULT_MAX_LINES: usize = 2000;

/// Default byte limit of every tool (50 KiB).
pub const DEFAULT_MAX_BYTES: usize = 50 * 1024;

/// Character limit (UTF-16 units) of one grep output line.
pub const GREP_MAX_LINE_LENGTH: usize = 500;

/// The line limit grep/find/ls pass to [`truncate_head`]: JavaScript's `Number.MAX_SAFE_INTEGER`,
/// which the reference stores in `details.truncation.maxLines`.
pub const UNLIMITED_LINES: usize = 9_007_199_254_740_991;

/// Which limit stopped the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TruncatedBy {
    /// The line limit.
    Lines,
    /// The byte limit.
    Bytes,
}

/// The outcome of a truncation, serialised as the reference's `details.truncation`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Truncation {
    /// The kept text.
    pub content: String,
    /// True when anything was cut.
    pub truncated: bool,
    /// Which limit cut it (`null` when nothing was cut).
    pub truncated_by: Option<TruncatedBy>,
    /// Lines of the whole input.
    pub total_lines: usize,
    /// UTF-8 bytes of the whole input.
    pub total_bytes: usize,
    /// Lines kept.
    pub output_lines: usize,
    /// UTF-8 bytes kept.
    pub output_bytes: usize,
    /// True when the kept text is the end of a single line longer than the byte limit.
    pub last_line_partial: bool,
    /// True when the first line alone is over the byte limit (head truncation keeps nothing).
    pub first_line_exceeds_limit: bool,
    /// The line limit used.
    pub max_lines: usize,
    /// The byte limit used.
    pub max_bytes: usize,
}

impl Truncation {
    fn untouched(content: &str, total_lines: usize, max_lines: usize, max_bytes: usize) -> Self {
        Self {
            content: content.to_owned(),
            truncated: false,
            truncated_by: None,
            total_lines,
            total_bytes: content.len(),
            output_lines: total_lines,
            output_bytes: content.len(),
            last_line_partial: false,
            first_line_exceeds_limit: false,
            max_lines,
            max_bytes,
        }
    }

    /// Serialises the record to JSON in the reference's key order.
    pub fn to_value(&self) -> serde_json::Value {
        // Serialising a struct of strings, numbers and booleans cannot fail.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// Formats a byte count as the reference's `formatSize`: `512B`, `50.0KB`, `1.5MB`.
///
/// One decimal, rounded half up on the exact value (JavaScript's `toFixed`), which Rust's
/// `{:.1}` (half to even) would get wrong for sizes like 1280 bytes (`1.3KB`).
pub fn format_size(bytes: usize) -> String {
    const KIB: u128 = 1024;
    const MIB: u128 = 1024 * 1024;
    let value = bytes as u128;
    let (unit, suffix) = if value < KIB {
        return format!("{bytes}B");
    } else if value < MIB {
        (KIB, "KB")
    } else {
        (MIB, "MB")
    };
    let tenths = (value * 10 + unit / 2) / unit;
    format!("{}.{}{}", tenths / 10, tenths % 10, suffix)
}

/// Keeps the beginning of `text`: whole lines while under `max_lines` and `max_bytes`.
///
/// When the first line alone is over `max_bytes` nothing is kept and
/// `first_line_exceeds_limit` is set.
pub fn truncate_head(text: &str, max_lines: usize, max_bytes: usize) -> Truncation {
    let lines: Vec<&str> = text.split('\n').collect();
    let total_lines = lines.len();
    let total_bytes = text.len();
    if total_lines <= max_lines && total_bytes <= max_bytes {
        return Truncation::untouched(text, total_lines, max_lines, max_bytes);
    }
    let first_line_bytes = lines.first().map_or(0, |line| line.len());
    if first_line_bytes > max_bytes {
        return Truncation {
            content: String::new(),
            truncated: true,
            truncated_by: Some(TruncatedBy::Bytes),
            total_lines,
            total_bytes,
            output_lines: 0,
            output_bytes: 0,
            last_line_partial: false,
            first_line_exceeds_limit: true,
            max_lines,
            max_bytes,
        };
    }
    let mut kept = 0usize;
    let mut kept_bytes = 0usize;
    let mut truncated_by = TruncatedBy::Lines;
    for (idx, line) in lines.iter().enumerate() {
        if idx >= max_lines {
            break;
        }
        let line_bytes = line.len() + usize::from(idx > 0);
        if kept_bytes + line_bytes > max_bytes {
            truncated_by = TruncatedBy::Bytes;
            break;
        }
        kept += 1;
        kept_bytes += line_bytes;
    }
    if kept >= max_lines && kept_bytes <= max_bytes {
        truncated_by = TruncatedBy::Lines;
    }
    let content = lines[..kept].join("\n");
    Truncation {
        output_bytes: content.len(),
        content,
        truncated: true,
        truncated_by: Some(truncated_by),
        total_lines,
        total_bytes,
        output_lines: kept,
        last_line_partial: false,
        first_line_exceeds_limit: false,
        max_lines,
        max_bytes,
    }
}

/// Keeps the end of `text`: whole lines while under `max_lines` and `max_bytes`.
///
/// When the last line alone is over `max_bytes`, its last `max_bytes` bytes are kept (moved
/// forward to a character boundary) and `last_line_partial` is set.
pub fn truncate_tail(text: &str, max_lines: usize, max_bytes: usize) -> Truncation {
    let lines: Vec<&str> = text.split('\n').collect();
    let total_lines = lines.len();
    let total_bytes = text.len();
    if total_lines <= max_lines && total_bytes <= max_bytes {
        return Truncation::untouched(text, total_lines, max_lines, max_bytes);
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut kept_bytes = 0usize;
    let mut truncated_by = TruncatedBy::Lines;
    let mut last_line_partial = false;
    for line in lines.iter().rev() {
        if kept.len() >= max_lines {
            break;
        }
        let line_bytes = line.len() + usize::from(!kept.is_empty());
        if kept_bytes + line_bytes > max_bytes {
            truncated_by = TruncatedBy::Bytes;
            if kept.is_empty() {
                let tail = tail_bytes(line, max_bytes);
                kept_bytes = tail.len();
                kept.push(tail);
                last_line_partial = true;
            }
            break;
        }
        kept.push(line);
        kept_bytes += line_bytes;
    }
    if kept.len() >= max_lines && kept_bytes <= max_bytes {
        truncated_by = TruncatedBy::Lines;
    }
    kept.reverse();
    let content = kept.join("\n");
    Truncation {
        output_bytes: content.len(),
        content,
        truncated: true,
        truncated_by: Some(truncated_by),
        total_lines,
        total_bytes,
        output_lines: kept.len(),
        last_line_partial,
        first_line_exceeds_limit: false,
        max_lines,
        max_bytes,
    }
}

/// Returns the last `max_bytes` bytes of `text`, starting at the next character boundary.
pub fn tail_bytes(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut start = text.len() - max_bytes;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Cuts one line to `max_chars` UTF-16 units plus `... [truncated]`; returns the text and
/// whether it was cut.
///
/// JavaScript may cut between the two halves of a surrogate pair; a Rust string cannot hold
/// the lone half, so such a cut keeps one unit less.
pub fn truncate_line(line: &str, max_chars: usize) -> (String, bool) {
    let mut units = 0usize;
    for (idx, ch) in line.char_indices() {
        let width = ch.len_utf16();
        if units + width > max_chars {
            return (format!("{}... [truncated]", &line[..idx]), true);
        }
        units += width;
    }
    (line.to_owned(), false)
}

/// Returns the length of `text` in UTF-16 code units (JavaScript's `String#length`).
pub fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_size_matches_javascript_to_fixed() {
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(1023), "1023B");
        assert_eq!(format_size(1024), "1.0KB");
        assert_eq!(format_size(1280), "1.3KB");
        assert_eq!(format_size(51200), "50.0KB");
        assert_eq!(format_size(70000), "68.4KB");
        assert_eq!(format_size(1024 * 1024), "1.0MB");
        assert_eq!(format_size(1024 * 1024 * 3 / 2), "1.5MB");
    }

    #[test]
    fn head_keeps_whole_lines_under_both_limits() {
        let text = "a\nbb\nccc";
        let t = truncate_head(text, 2, 100);
        assert_eq!(t.content, "a\nbb");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Lines));
        assert_eq!((t.total_lines, t.output_lines, t.output_bytes), (3, 2, 4));
        let t = truncate_head(text, 10, 5);
        assert_eq!(t.content, "a\nbb");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
        let t = truncate_head("toolong\nx", 10, 3);
        assert!(t.first_line_exceeds_limit);
        assert_eq!(t.content, "");
        let t = truncate_head(text, 3, 8);
        assert!(!t.truncated);
        assert_eq!(t.truncated_by, None);
    }

    #[test]
    fn tail_keeps_the_end_and_cuts_a_huge_last_line_at_a_char_boundary() {
        let t = truncate_tail("1\n2\n3\n", 2, 100);
        assert_eq!(t.content, "3\n");
        assert_eq!((t.total_lines, t.output_lines), (4, 2));
        let t = truncate_tail("xé€", 4, 4);
        assert!(t.last_line_partial);
        assert_eq!(t.content, "€");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
        let t = truncate_tail("aaaa\nbb", 10, 4);
        assert_eq!(t.content, "bb");
        assert!(!t.last_line_partial);
    }

    #[test]
    fn truncation_serialises_in_reference_key_order() {
        let t = truncate_head("a\nb", 1, 10);
        assert_eq!(
            crate::support::json::to_js_string(&t.to_value()),
            r#"{"content":"a","truncated":true,"truncatedBy":"lines","totalLines":2,"totalBytes":3,"outputLines":1,"outputBytes":1,"lastLinePartial":false,"firstLineExceedsLimit":false,"maxLines":1,"maxBytes":10}"#
        );
    }

    #[test]
    fn line_cut_counts_utf16_units() {
        assert_eq!(truncate_line("abc", 3), ("abc".to_owned(), false));
        assert_eq!(
            truncate_line("abcd", 3),
            ("abc... [truncated]".to_owned(), true)
        );
        assert_eq!(
            truncate_line("a😀b", 2),
            ("a... [truncated]".to_owned(), true)
        );
        assert_eq!(utf16_len("héllo 😀\n"), 9);
    }
}
