//! Terminal output helpers: colour only on a terminal (and never with `NO_COLOR`), aligned
//! columns, and writers that turn a closed stdout into a quiet success.

use std::io::{self, IsTerminal, Write};

use crate::modes::render::Palette;

/// Colours for human output; all no-ops when colour is off. The codes are the REPL's
/// ([`Palette`]), named for what the listings show.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    palette: Palette,
}

impl Style {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset.
    pub fn for_stdout(color_allowed: bool) -> Self {
        Self {
            palette: Palette::new(color_allowed && io::stdout().is_terminal()),
        }
    }

    /// Returns `Style` with colour off.
    pub fn plain() -> Self {
        Self {
            palette: Palette::new(false),
        }
    }

    /// Whether colour is on.
    pub fn enabled(&self) -> bool {
        self.palette.color()
    }

    /// Dim text.
    pub fn dim(&self, text: &str) -> String {
        self.palette.dim(text)
    }

    /// Bold text.
    pub fn bold(&self, text: &str) -> String {
        self.palette.bold(text)
    }

    /// Cyan text (ids).
    pub fn id(&self, text: &str) -> String {
        self.palette.accent(text)
    }

    /// Yellow text (labels, highlights).
    pub fn accent(&self, text: &str) -> String {
        self.palette.warning(text)
    }

    /// Green text.
    pub fn ok(&self, text: &str) -> String {
        self.palette.success(text)
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

/// Returns the first line of `text`, cut to `max` characters with an ellipsis.
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
    out
}

/// Writes `text` and a newline, flushing at the end of a command.
pub fn line(out: &mut impl Write, text: &str) -> io::Result<()> {
    out.write_all(text.as_bytes())?;
    out.write_all(b"\n")
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
