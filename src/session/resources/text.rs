//! JavaScript string semantics the reference relies on: `String.prototype.trim`'s whitespace
//! set, UTF-16 lengths and prefixes, and the XML escaping of the skills index.
//!
//! Invariant: pure functions over `&str`; every rule here is the one the reference's
//! JavaScript applies, so text built from them matches the reference byte for byte.

pub use crate::support::js::is_whitespace as is_js_whitespace;

/// Returns `s` without leading and trailing JavaScript whitespace (`String.prototype.trim`).
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_whitespace)
}

/// Returns whether `s` is empty after `js_trim`.
pub fn is_blank(s: &str) -> bool {
    s.chars().all(is_js_whitespace)
}

pub use crate::support::truncate::utf16_len;

/// Returns the longest prefix of `s` whose UTF-16 length is at most `max_units`.
///
/// JavaScript's `slice(0, n)` can cut a surrogate pair in half; this keeps whole characters,
/// so the result is at most one code unit shorter in that case.
pub fn utf16_prefix(s: &str, max_units: usize) -> &str {
    let mut units = 0;
    for (idx, c) in s.char_indices() {
        units += c.len_utf16();
        if units > max_units {
            return &s[..idx];
        }
    }
    s
}

/// Collapses every run of JavaScript whitespace (newlines included) into one space and trims
/// the result — the reference's normalisation of a tool's one-line prompt snippet.
pub fn collapse_whitespace(s: &str) -> String {
    let mut res = String::with_capacity(s.len());
    let mut pending_space = false;
    for c in s.chars() {
        if is_js_whitespace(c) {
            pending_space = true;
        } else {
            if pending_space && !res.is_empty() {
                res.push(' ');
            }
            pending_space = false;
            res.push(c);
        }
    }
    res
}

/// Returns `s` without one leading byte-order mark (U+FEFF), as the reference's `stripBom`.
pub fn strip_bom(s: &str) -> &str {
    s.strip_prefix('\u{FEFF}').unwrap_or(s)
}

/// Escapes `& < > " '` as XML entities, in the reference's order.
pub fn escape_xml(s: &str) -> String {
    let mut res = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => res.push_str("&amp;"),
            '<' => res.push_str("&lt;"),
            '>' => res.push_str("&gt;"),
            '"' => res.push_str("&quot;"),
            '\'' => res.push_str("&apos;"),
            other => res.push(other),
        }
    }
    res
}

/// Normalises line endings as the reference's frontmatter reader does: CRLF, then lone CR,
/// become LF.
pub fn normalize_newlines(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\r', "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn js_trim_strips_bom_and_keeps_nel() {
        assert_eq!(js_trim("\u{FEFF} a \u{3000}"), "a");
        assert_eq!(js_trim("\u{85}a\u{85}"), "\u{85}a\u{85}");
    }

    #[test]
    fn utf16_prefix_counts_code_units_and_keeps_whole_chars() {
        assert_eq!(utf16_prefix("abc", 2), "ab");
        assert_eq!(utf16_prefix("a😀b", 2), "a");
        assert_eq!(utf16_prefix("a😀b", 3), "a😀");
        assert_eq!(utf16_len("a😀b"), 4);
    }

    #[test]
    fn collapse_whitespace_joins_lines_with_single_spaces() {
        assert_eq!(
            collapse_whitespace("  Read\r\n\n  file\tcontents  "),
            "Read file contents"
        );
        assert_eq!(collapse_whitespace(" \n "), "");
    }

    #[test]
    fn escape_xml_escapes_the_five_entities() {
        assert_eq!(escape_xml(r#"a&b<c>"d'"#), "a&amp;b&lt;c&gt;&quot;d&apos;");
    }

    #[test]
    fn normalize_newlines_handles_crlf_and_lone_cr() {
        assert_eq!(normalize_newlines("a\r\nb\rc\n"), "a\nb\nc\n");
    }
}
