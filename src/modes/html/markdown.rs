//! Markdown from a session rendered as safe HTML (`pulldown-cmark`).
//!
//! Session text is data, never markup: raw HTML in it is shown as text, a link keeps only an
//! `http`, `https` or `mailto` destination, and an image becomes a link to it (the page loads
//! nothing from anywhere). Fenced code keeps its language as a `language-…` class for the
//! page's own highlighter. Control characters other than tab and newline are dropped.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd, html};

use super::text::clean;

/// Renders `text` as Markdown into `out`.
pub fn render(text: &str, out: &mut String) {
    let text = clean(text);
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    options.insert(Options::ENABLE_TASKLISTS);
    let events = Parser::new_ext(&text, options).map(|event| match event {
        // Raw HTML is shown as the text it is.
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Link {
            link_type,
            dest_url: safe_url(dest_url),
            title,
            id,
        }),
        // An image is a link to it: nothing is fetched when the page opens.
        Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Link {
            link_type,
            dest_url: safe_url(dest_url),
            title,
            id,
        }),
        Event::End(TagEnd::Image) => Event::End(TagEnd::Link),
        other => other,
    });
    html::push_html(out, events);
}

/// The destination if its scheme is one a shared page may link to, else nothing.
fn safe_url(url: CowStr<'_>) -> CowStr<'_> {
    let lower = url.trim_start().to_ascii_lowercase();
    if ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| lower.starts_with(scheme))
    {
        url
    } else {
        CowStr::Borrowed("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn html_of(text: &str) -> String {
        let mut out = String::new();
        render(text, &mut out);
        out
    }

    #[test]
    fn markdown_renders_headings_lists_emphasis_tables_and_code() {
        let out = html_of(
            "# Title\n\n- one\n- **two**\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```rust\nfn main() {}\n```\n",
        );
        assert!(out.contains("<h1>Title</h1>"), "{out}");
        assert!(out.contains("<li><strong>two</strong></li>"), "{out}");
        assert!(out.contains("<table>"), "{out}");
        assert!(
            out.contains(r#"<pre><code class="language-rust">fn main() {}"#),
            "{out}"
        );
    }

    #[test]
    fn raw_html_scripts_and_unsafe_links_stay_text() {
        let out = html_of(
            "<script>alert(1)</script>\n\nhi <img src=x onerror=alert(1)> [a](javascript:alert(1)) [b](https://example.com)",
        );
        assert!(!out.contains("<script"), "{out}");
        assert!(!out.contains("<img"), "{out}");
        assert!(out.contains("&lt;script&gt;"), "{out}");
        assert!(out.contains(r#"<a href="">a</a>"#), "{out}");
        assert!(
            out.contains(r#"<a href="https://example.com">b</a>"#),
            "{out}"
        );
    }

    #[test]
    fn images_become_links_and_control_characters_are_dropped() {
        let out = html_of("![logo](https://example.com/x.png) \u{1b}]52;c;Zm9v\u{7}done");
        assert!(!out.contains("<img"), "{out}");
        assert!(
            out.contains(r#"<a href="https://example.com/x.png">logo</a>"#),
            "{out}"
        );
        assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out}");
    }
}
