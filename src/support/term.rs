//! Text for a terminal: data from session files, tool output and models made harmless before
//! it is printed for people (`docs/SECURITY.md`, "Terminal output").
//!
//! A terminal obeys control characters and escape sequences in what it is sent: clearing the
//! screen, moving the cursor over earlier lines, setting the window title, writing the
//! clipboard (OSC 52), or hiding text. Data pi prints for people therefore never reaches the
//! terminal with them: every C0 control character (U+0000–U+001F), DEL (U+007F), every C1
//! control (U+0080–U+009F) and the bidirectional embedding, override and isolate controls
//! (U+202A–U+202E, U+2066–U+2069, which reorder what is shown) are replaced by a visible
//! escape:
//!
//! | character | shown as |
//! | --- | --- |
//! | newline, carriage return, tab (where they are not kept) | `\n`, `\r`, `\t` |
//! | other C0, DEL | `\x1b`, `\x07`, `\x7f` (two lower-case hex digits) |
//! | C1, bidirectional controls | `\u{9b}`, `\u{202e}` |
//!
//! An escape sequence is thereby shown as text (`\x1b]0;title\x07`), never obeyed. A
//! backslash in the data is not escaped itself: the display is for reading, not a reversible
//! encoding (`--json` outputs keep the exact data).
//!
//! - [`line`]: a field shown on one line (an id, a path, a name, a model): everything above is
//!   escaped, newlines and tabs included, so one field never spans lines.
//! - [`text`]: text shown as lines (a message, tool output): newlines and tabs are kept, a
//!   CR before a newline is dropped, everything else is escaped.
//! - [`output`]: the last step before a line of human output is written (the CLI's and the
//!   REPL's writers): as [`text`], except that the few SGR colour sequences pi itself writes
//!   are kept (a fixed list, and a theme's foreground colours in exactly two numeric forms).
//!   Whatever a caller forgot to escape, no other sequence reaches the terminal.
//! - [`error_line`]: an error and its causes on one line, each cause once.
//!
//! Invariant: pure functions; they only ever replace characters, so an input without them is
//! returned as it is (borrowed).

use std::borrow::Cow;
use std::error::Error;
use std::fmt::Write as _;

/// The SGR (colour) sequences pi writes itself (`modes::render::Palette`, the search
/// highlight, the REPL prompt); [`output`] lets exactly these through, and a theme's
/// foreground colours (`ESC[38;5;N m`, `ESC[38;2;R;G;B m`).
pub const OWN_SGR: &[&str] = &[
    "\x1b[0m",
    "\x1b[1m",
    "\x1b[2m",
    "\x1b[3m",
    "\x1b[4m",
    "\x1b[9m",
    "\x1b[31m",
    "\x1b[32m",
    "\x1b[33m",
    "\x1b[34m",
    "\x1b[35m",
    "\x1b[36m",
    "\x1b[1;33m",
    "\x1b[1;36m",
];

/// The length of the SGR sequence pi writes itself at the start of `text`, if there is one:
/// one of [`OWN_SGR`], or a theme's foreground colour (`modes::theme`), exactly
/// `ESC[38;5;N m` or `ESC[38;2;R;G;B m` with each number 0–255 in at most three digits.
fn own_sgr_len(text: &str) -> Option<usize> {
    if let Some(sgr) = OWN_SGR.iter().find(|sgr| text.starts_with(**sgr)) {
        return Some(sgr.len());
    }
    let (count, params) = if let Some(params) = text.strip_prefix("\x1b[38;5;") {
        (1, params)
    } else {
        (3, text.strip_prefix("\x1b[38;2;")?)
    };
    let mut rest = params;
    for index in 0..count {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 3 || rest[..digits].parse::<u16>().ok()? > 255 {
            return None;
        }
        rest = &rest[digits..];
        let separator = if index + 1 == count { 'm' } else { ';' };
        rest = rest.strip_prefix(separator)?;
    }
    Some(text.len() - rest.len())
}

/// Whether `ch` is shown escaped (in every mode; newline and tab are decided by the caller).
fn is_unsafe(ch: char) -> bool {
    ch.is_control() || matches!(ch, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Appends the visible form of `ch` (one of the characters [`is_unsafe`] names).
fn push_escaped(out: &mut String, ch: char) {
    match ch {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\0'..='\u{1f}' | '\u{7f}' => {
            let _ = write!(out, "\\x{:02x}", u32::from(ch));
        }
        _ => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(ch));
        }
    }
}

/// How the shared loop treats layout characters and pi's own colour sequences.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Line,
    Text,
    Output,
}

fn escape(input: &str, mode: Mode) -> Cow<'_, str> {
    let needs_work = |ch: char| match ch {
        '\n' | '\t' => mode == Mode::Line,
        _ => is_unsafe(ch),
    };
    let Some(first) = input.find(needs_work) else {
        return Cow::Borrowed(input);
    };
    let mut out = String::with_capacity(input.len() + 16);
    out.push_str(&input[..first]);
    let mut rest = &input[first..];
    while let Some(ch) = rest.chars().next() {
        if mode == Mode::Output
            && ch == '\x1b'
            && let Some(len) = own_sgr_len(rest)
        {
            out.push_str(&rest[..len]);
            rest = &rest[len..];
            continue;
        }
        let keep = match ch {
            '\n' | '\t' => mode != Mode::Line,
            // CRLF line endings: the CR is dropped where lines are kept.
            '\r' if mode != Mode::Line && rest[1..].starts_with('\n') => {
                rest = &rest[1..];
                continue;
            }
            _ => !is_unsafe(ch),
        };
        if keep {
            out.push(ch);
        } else {
            push_escaped(&mut out, ch);
        }
        rest = &rest[ch.len_utf8()..];
    }
    Cow::Owned(out)
}

/// Returns `text` for one line of a terminal: every control character (newline and tab
/// included), DEL, C1 and bidirectional control shown escaped.
pub fn line(text: &str) -> Cow<'_, str> {
    escape(text, Mode::Line)
}

/// Returns `text` for lines of a terminal: newlines and tabs kept (a CR before a newline
/// dropped), every other control character shown escaped.
pub fn text(text: &str) -> Cow<'_, str> {
    escape(text, Mode::Text)
}

/// Returns a line of human output ready for the terminal: as [`text`], but the colour
/// sequences pi writes itself ([`OWN_SGR`]) kept.
pub fn output(text: &str) -> Cow<'_, str> {
    escape(text, Mode::Output)
}

/// Returns an error and its causes as one line for a terminal: `error: cause: cause`, a cause
/// left out when the text so far already contains it (an error whose message includes its
/// source, as many do, is not repeated), then shown as by [`line`].
pub fn error_line<'a>(chain: impl IntoIterator<Item = &'a (dyn Error + 'static)>) -> String {
    let mut message = String::new();
    for cause in chain {
        let text = cause.to_string();
        let text = text.trim();
        if text.is_empty() || message.contains(text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(text);
    }
    line(&message).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_show_every_control_character_escaped() {
        assert_eq!(line("plain text, ünïcode ✓"), "plain text, ünïcode ✓");
        assert!(matches!(line("plain"), Cow::Borrowed(_)));
        assert_eq!(
            line("a\x1b]0;pwned\x07b\x1b[2J\x1bc"),
            "a\\x1b]0;pwned\\x07b\\x1b[2J\\x1bc"
        );
        assert_eq!(line("two\nlines\tand\r"), "two\\nlines\\tand\\r");
        assert_eq!(line("\0\x7f"), "\\x00\\x7f");
        assert_eq!(
            line("c1 \u{9b}2J \u{9d}52;c;x\u{9c}"),
            "c1 \\u{9b}2J \\u{9d}52;c;x\\u{9c}"
        );
        assert_eq!(
            line("evil\u{202e}txt.exe\u{2066}"),
            "evil\\u{202e}txt.exe\\u{2066}"
        );
    }

    #[test]
    fn text_keeps_its_lines_and_tabs_but_nothing_else() {
        assert_eq!(text("a\n\tb\r\nc\rd"), "a\n\tb\nc\\rd");
        assert_eq!(text("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
        assert!(matches!(text("a\nb"), Cow::Borrowed(_)));
    }

    #[test]
    fn output_keeps_only_pis_own_colours() {
        for sgr in OWN_SGR {
            let painted = format!("{sgr}x\x1b[0m");
            assert_eq!(output(&painted), painted);
        }
        assert_eq!(output("\x1b[8mhidden"), "\\x1b[8mhidden");
        assert_eq!(output("\x1b[1;31m"), "\\x1b[1;31m");
        assert_eq!(output("\x1b]52;c;aGk=\x07"), "\\x1b]52;c;aGk=\\x07");
        assert_eq!(output("\x1b"), "\\x1b");
        assert_eq!(output("\x1b[3"), "\\x1b[3");
        // A theme's colours, exactly those forms.
        for sgr in ["\x1b[38;5;0m", "\x1b[38;5;255m", "\x1b[38;2;140;156;240m"] {
            let painted = format!("{sgr}x\x1b[0m");
            assert_eq!(output(&painted), painted);
        }
        for bad in [
            "\x1b[38;5;256m",
            "\x1b[38;5;0001m",
            "\x1b[38;5;m",
            "\x1b[38;5;1;8m",
            "\x1b[38;2;1;2m",
            "\x1b[38;2;1;2;3;4m",
            "\x1b[48;5;1m",
            "\x1b[38;2;1;2;3",
        ] {
            assert!(output(bad).starts_with("\\x1b["), "{bad:?} let through");
        }
    }

    #[derive(Debug)]
    struct Failure(&'static str, Option<Box<Failure>>);

    impl std::fmt::Display for Failure {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Failure {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1
                .as_deref()
                .map(|source| source as &(dyn Error + 'static))
        }
    }

    fn chain(error: &Failure) -> Vec<&(dyn Error + 'static)> {
        let mut out: Vec<&(dyn Error + 'static)> = Vec::new();
        let mut next: Option<&(dyn Error + 'static)> = Some(error);
        while let Some(current) = next {
            out.push(current);
            next = current.source();
        }
        out
    }

    #[test]
    fn an_error_line_names_each_cause_once() {
        let io = Failure("File exists (os error 17)", None);
        let store = Failure("/b.db: File exists (os error 17)", Some(Box::new(io)));
        assert_eq!(
            error_line(chain(&store)),
            "/b.db: File exists (os error 17)"
        );
        let context = Failure("cannot open /x", Some(Box::new(Failure("denied", None))));
        assert_eq!(error_line(chain(&context)), "cannot open /x: denied");
        let multi = Failure("bad\nline \x1b[2J", None);
        assert_eq!(error_line(chain(&multi)), "bad\\nline \\x1b[2J");
    }
}
