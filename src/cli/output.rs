//! Terminal output helpers: colour only on a terminal (and never with `NO_COLOR`), aligned
//! columns, and writers that turn a closed stdout into a quiet success.

use std::io::{self, IsTerminal, Write};

/// Colours for human output; all no-ops when colour is off.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    enabled: bool,
}

impl Style {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset.
    pub fn for_stdout(color_allowed: bool) -> Self {
        Self {
            enabled: color_allowed && io::stdout().is_terminal(),
        }
    }

    /// Returns `Style` with colour off.
    pub fn plain() -> Self {
        Self { enabled: false }
    }

    /// Whether colour is on.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.enabled {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// Dim text.
    pub fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }

    /// Bold text.
    pub fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }

    /// Cyan text (ids).
    pub fn id(&self, text: &str) -> String {
        self.paint("36", text)
    }

    /// Yellow text (labels, highlights).
    pub fn accent(&self, text: &str) -> String {
        self.paint("33", text)
    }

    /// Green text.
    pub fn ok(&self, text: &str) -> String {
        self.paint("32", text)
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
