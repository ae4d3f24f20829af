//! Text from a session made safe for an HTML page.

use std::borrow::Cow;

/// Drops control characters other than tab and newline (terminal escapes, NUL, …): they
/// mean nothing on a page and some browsers show them as boxes.
pub fn clean(text: &str) -> Cow<'_, str> {
    if text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        Cow::Owned(
            text.chars()
                .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
                .collect(),
        )
    } else {
        Cow::Borrowed(text)
    }
}

/// Appends `text` to `out`, escaped for element content and quoted attribute values.
pub fn escape_into(out: &mut String, text: &str) {
    for c in clean(text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// `text` escaped (see [`escape_into`]).
#[cfg(test)]
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape_into(&mut out, text);
    out
}

/// The first `max` characters of `text` on one line (whitespace runs folded), with `…` when
/// cut.
pub fn preview(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            space = !out.is_empty();
            continue;
        }
        if space {
            out.push(' ');
            count += 1;
            space = false;
        }
        if count >= max {
            out.push('…');
            return out;
        }
        out.push(c);
        count += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_quotes_and_control_characters() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>\u{1b}[2J\u{0}"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;[2J"
        );
        assert_eq!(escape("tab\tand\nnewline"), "tab\tand\nnewline");
    }

    #[test]
    fn previews_fold_whitespace_and_cut_long_text() {
        assert_eq!(preview("  a \n\n b  ", 10), "a b");
        assert_eq!(preview("abcdef", 3), "abc…");
    }
}
