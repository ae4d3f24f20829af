//! Terminal output helpers: colour only on a terminal (and never with `NO_COLOR`), aligned
//! columns, and the writers of human output (control characters from data shown escaped,
//! `docs/SECURITY.md`, "Terminal output") and of JSON output (exact).

use std::io::{self, IsTerminal, Write};

use crate::modes::render::Palette;
use crate::support::term;

/// Colours for human output; all no-ops when colour is off. The codes are the REPL's
/// ([`Palette`] in the terminal's own colours: listings are not themed), named for what the
/// listings show.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    color: bool,
}

impl Style {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset.
    pub fn for_stdout(color_allowed: bool) -> Self {
        Self {
            color: color_allowed && io::stdout().is_terminal(),
        }
    }

    /// Returns `Style` with colour off.
    pub fn plain() -> Self {
        Self { color: false }
    }

    /// Whether colour is on.
    pub fn enabled(&self) -> bool {
        self.color
    }

    fn palette(&self) -> Palette {
        Palette::new(self.color)
    }

    /// Dim text.
    pub fn dim(&self, text: &str) -> String {
        self.palette().dim(text)
    }

    /// Bold text.
    pub fn bold(&self, text: &str) -> String {
        self.palette().bold(text)
    }

    /// Cyan text (ids).
    pub fn id(&self, text: &str) -> String {
        self.palette().accent(text)
    }

    /// Yellow text (labels, highlights).
    pub fn accent(&self, text: &str) -> String {
        self.palette().warning(text)
    }

    /// Green text.
    pub fn ok(&self, text: &str) -> String {
        self.palette().success(text)
    }
}

/// Returns a buffered, locked stdout.
pub fn stdout() -> io::BufWriter<io::StdoutLock<'static>> {
    io::BufWriter::new(io::stdout().lock())
}

/// Pads `text` to `width` display columns (characters).
pub fn pad(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count >= width {
        text.to_owned()
    } else {
        format!("{text}{}", " ".repeat(width - count))
    }
}

/// Returns the first line of `text`, cut to `max` characters with an ellipsis, its control
/// characters shown escaped ([`term::line`]).
pub fn one_line(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut out: String = line.chars().take(max).collect();
    if line.chars().count() > max || text.trim().lines().count() > 1 {
        out.push('…');
    }
    term::line(&out).into_owned()
}

/// Writes a line of human output and a newline: control characters and escape sequences in
/// it are shown escaped, except the colours this module writes ([`term::output`]), so that
/// nothing from a session file reaches the terminal as a command. Fields are escaped where
/// they are formatted too ([`term::line`]), so that a newline in an id never starts a line.
pub fn line(out: &mut impl Write, text: &str) -> io::Result<()> {
    out.write_all(term::output(text).as_bytes())?;
    out.write_all(b"\n")
}

/// Writes a line of JSON output exactly as given (`--json` keeps the data; JSON's own escapes
/// keep control characters out of it, except DEL and C1, which a JSON reader takes as they are).
pub fn json_line(out: &mut impl Write, text: &str) -> io::Result<()> {
    out.write_all(text.as_bytes())?;
    out.write_all(b"\n")
}

/// Returns a field (an id, a path, a name) for one line of human output: every control
/// character shown escaped ([`term::line`]).
pub fn field(text: &str) -> std::borrow::Cow<'_, str> {
    term::line(text)
}

/// Returns a timestamp from a session file as the contract's JSON gives it: ISO-8601 UTC with
/// milliseconds (`2026-01-01T00:00:00.000Z`, whatever form or offset the file used), or null
/// when the text is not a time.
pub fn iso_or_null(text: &str) -> serde_json::Value {
    match crate::support::clock::ms_from_iso(text.trim()) {
        Some(ms) => serde_json::Value::from(crate::support::clock::iso_from_ms(ms)),
        None => serde_json::Value::Null,
    }
}

/// Returns a timestamp from a session file for human output, to the minute
/// (`2026-01-01 10:00`, UTC): normalised when it is a time, else the text itself, escaped and
/// cut to 16 characters.
pub fn short_time(text: &str) -> String {
    match crate::support::clock::ms_from_iso(text.trim()) {
        Some(ms) => {
            let iso = crate::support::clock::iso_from_ms(ms);
            iso.get(..16).unwrap_or(&iso).replace('T', " ")
        }
        None => {
            let cut: String = text.chars().take(16).collect();
            field(&cut).into_owned()
        }
    }
}
