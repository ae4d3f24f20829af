//! Rendering a session for people in a line-oriented terminal: streamed text as it arrives,
//! thinking dimmed, each tool call on one line and its result cut to a few lines with a
//! visible marker, errors and retries, the status line after each turn, and a stored
//! transcript (the history shown when a session is resumed).
//!
//! Text from the session, the model and tools is shown with its control characters escaped
//! (`support::term`, `docs/SECURITY.md`, "Terminal output"): fields on one line, text with its
//! lines; and every line is passed through `term::output` as it is written, which lets only
//! the palette's own colour codes through.
//!
//! Invariant: the renderer only writes to the writer it was given (no terminal queries), so
//! every decision here is tested against a `Vec<u8>`; colour is decided once by the caller
//! (a terminal, and `NO_COLOR` unset).

use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::markdown::{Blocks, Rendered};
use super::theme::Theme;
use crate::agent::AgentEvent;
use crate::agent::tool::ToolOutput;
use crate::ai::StreamEvent;
use crate::model::message::{AgentMessage, ContentBlock, StopReason, UserContent};
use crate::session::{NoticeLevel, SessionEvent};
use crate::support::term;

/// Lines of a tool result shown before the marker.
pub const RESULT_HEAD_LINES: usize = 4;
/// Lines of a tool result shown after the marker.
pub const RESULT_TAIL_LINES: usize = 2;
/// Characters of one shown result line.
pub const RESULT_LINE_CHARS: usize = 160;

/// ANSI styles, all no-ops when colour is off; colours from the theme ([`Theme`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Palette {
    color: bool,
    theme: Arc<Theme>,
}

impl Palette {
    /// Returns a palette with colour on or off, in the terminal's own colours.
    pub fn new(color: bool) -> Self {
        static SYSTEM: std::sync::OnceLock<Arc<Theme>> = std::sync::OnceLock::new();
        let system = SYSTEM.get_or_init(|| Arc::new(Theme::system()));
        Self::themed(color, Arc::clone(system))
    }

    /// Returns a palette with colour on or off, in the colours of `theme`.
    pub fn themed(color: bool, theme: Arc<Theme>) -> Self {
        Self { color, theme }
    }

    /// Returns whether colour is on.
    pub fn color(&self) -> bool {
        self.color
    }

    /// The theme.
    pub fn theme(&self) -> &Arc<Theme> {
        &self.theme
    }

    fn paint(&self, start: &str, text: &str) -> String {
        if self.color && !text.is_empty() && !start.is_empty() {
            format!("{start}{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// Dim text (thinking, tool output, the status line): the theme's `dim`.
    pub fn dim(&self, text: &str) -> String {
        self.paint(self.theme.fg("dim"), text)
    }

    /// Bold text.
    pub fn bold(&self, text: &str) -> String {
        self.paint("\x1b[1m", text)
    }

    /// Errors: the theme's `error` (red).
    pub fn error(&self, text: &str) -> String {
        self.paint(self.theme.fg("error"), text)
    }

    /// Warnings, labels: the theme's `warning` (yellow).
    pub fn warning(&self, text: &str) -> String {
        self.paint(self.theme.fg("warning"), text)
    }

    /// Tool calls, accents: the theme's `accent`.
    pub fn accent(&self, text: &str) -> String {
        self.paint(self.theme.fg("accent"), text)
    }

    /// The assistant role: the theme's `success` (green).
    pub fn success(&self, text: &str) -> String {
        self.paint(self.theme.fg("success"), text)
    }
}

/// What the status line after a turn shows.
#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    /// `provider/id` of the model, if any.
    pub model: Option<String>,
    /// The thinking level, when the model can think.
    pub thinking: Option<String>,
    /// Context tokens of the last answer (unknown before the first one).
    pub context_tokens: Option<u64>,
    /// The model's context window.
    pub context_window: u64,
    /// Input tokens of the transcript's answers.
    pub input: u64,
    /// Output tokens of the transcript's answers.
    pub output: u64,
    /// Cost of the transcript's answers in USD.
    pub cost: f64,
    /// The session name, if any.
    pub name: Option<String>,
}

/// Formats a token count as the reference's footer does (`999`, `1.2k`, `45k`, `1.5M`).
pub fn format_tokens(count: u64) -> String {
    if count < 1000 {
        count.to_string()
    } else if count < 10_000 {
        format!("{:.1}k", count as f64 / 1000.0)
    } else if count < 1_000_000 {
        format!("{}k", (count as f64 / 1000.0).round())
    } else if count < 10_000_000 {
        format!("{:.1}M", count as f64 / 1_000_000.0)
    } else {
        format!("{}M", (count as f64 / 1_000_000.0).round())
    }
}

/// Returns the status line text (without colour).
pub fn status_text(status: &Status) -> String {
    let mut parts = Vec::new();
    let model = term::line(status.model.as_deref().unwrap_or("no model"));
    match &status.thinking {
        Some(level) => parts.push(format!("{model} • {}", term::line(level))),
        None => parts.push(model.into_owned()),
    }
    let window = format_tokens(status.context_window);
    match status.context_tokens {
        Some(tokens) if status.context_window > 0 => {
            let percent = tokens as f64 * 100.0 / status.context_window as f64;
            parts.push(format!(
                "ctx {}/{window} ({percent:.1}%)",
                format_tokens(tokens)
            ));
        }
        Some(tokens) => parts.push(format!("ctx {}", format_tokens(tokens))),
        None => parts.push(format!("ctx ?/{window}")),
    }
    let mut usage = Vec::new();
    if status.input > 0 {
        usage.push(format!("↑{}", format_tokens(status.input)));
    }
    if status.output > 0 {
        usage.push(format!("↓{}", format_tokens(status.output)));
    }
    usage.push(format!("${:.4}", status.cost));
    parts.push(usage.join(" "));
    if let Some(name) = &status.name {
        parts.push(term::line(name).into_owned());
    }
    parts.join(" • ")
}

/// Replaces the home directory at the start of a path with `~`.
pub fn shorten_path(path: &str, home: Option<&Path>) -> String {
    if let Some(home) = home.and_then(Path::to_str).filter(|home| !home.is_empty())
        && let Some(rest) = path.strip_prefix(home)
        && (rest.is_empty() || rest.starts_with('/'))
    {
        return format!("~{rest}");
    }
    path.to_owned()
}

/// `text` on one line: line breaks and tabs become spaces, other control characters are
/// shown escaped.
fn one_line(text: &str) -> String {
    term::line(text.replace(['\n', '\t', '\r'], " ").trim()).into_owned()
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let mut out: String = text.chars().take(max).collect();
        out.push('…');
        out
    }
}

fn arg_str<'a>(args: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|key| args.get(*key).and_then(Value::as_str))
        .filter(|value| !value.is_empty())
}

/// Formats a tool call on one line, as the reference's tree and transcript do
/// (`[read: src/main.rs:10-29]`, `[bash: ls -la]`, `[grep: /foo/ in src]`, …), control
/// characters of the name and arguments shown escaped.
pub fn format_tool_call(name: &str, args: &Value, home: Option<&Path>) -> String {
    term::line(&tool_call_text(name, args, home)).into_owned()
}

fn tool_call_text(name: &str, args: &Value, home: Option<&Path>) -> String {
    let path = |default: &str| {
        shorten_path(
            arg_str(args, &["path", "file_path"]).unwrap_or(default),
            home,
        )
    };
    match name {
        "read" => {
            let mut shown = path("");
            let offset = args.get("offset").and_then(Value::as_i64);
            let limit = args.get("limit").and_then(Value::as_i64);
            if offset.is_some() || limit.is_some() {
                let start = offset.unwrap_or(1);
                shown.push_str(&format!(":{start}"));
                if let Some(limit) = limit {
                    shown.push_str(&format!("-{}", start + limit - 1));
                }
            }
            format!("[read: {shown}]")
        }
        "write" | "edit" => format!("[{name}: {}]", path("")),
        "bash" => {
            let command = one_line(arg_str(args, &["command"]).unwrap_or(""));
            format!("[bash: {}]", cut(&command, 80))
        }
        "grep" => format!(
            "[grep: /{}/ in {}]",
            arg_str(args, &["pattern"]).unwrap_or(""),
            path(".")
        ),
        "find" => format!(
            "[find: {} in {}]",
            arg_str(args, &["pattern"]).unwrap_or(""),
            path(".")
        ),
        "ls" => format!("[ls: {}]", path(".")),
        _ => {
            let json = crate::support::json::to_js_string(args);
            format!("[{name}: {}]", cut(&json, 60))
        }
    }
}

/// Cuts output to its first and last lines with a marker between them (and long lines to
/// [`RESULT_LINE_CHARS`]); returns the lines to show.
pub fn truncate_output(text: &str, head: usize, tail: usize) -> Vec<String> {
    let trimmed = text.trim_end_matches('\n');
    if trimmed.trim().is_empty() {
        return Vec::new();
    }
    let lines: Vec<&str> = trimmed.split('\n').collect();
    let shorten =
        |line: &str| term::text(&cut(line.trim_end_matches('\r'), RESULT_LINE_CHARS)).into_owned();
    if lines.len() <= head + tail + 1 {
        return lines.iter().map(|line| shorten(line)).collect();
    }
    let hidden = lines.len() - head - tail;
    let mut out: Vec<String> = lines[..head].iter().map(|line| shorten(line)).collect();
    out.push(format!("… {hidden} more lines …"));
    out.extend(lines[lines.len() - tail..].iter().map(|line| shorten(line)));
    out
}

fn blocks_text(blocks: &[ContentBlock]) -> String {
    let mut texts = Vec::new();
    let mut images = 0;
    for block in blocks {
        match block {
            ContentBlock::Text(text) => texts.push(text.text.as_str()),
            ContentBlock::Image(_) => images += 1,
            ContentBlock::Thinking(_) | ContentBlock::ToolCall(_) | ContentBlock::Unknown(_) => {}
        }
    }
    let mut out = texts.join("\n");
    if images > 0 {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!(
            "[{images} image{}]",
            if images == 1 { "" } else { "s" }
        ));
    }
    out
}

fn user_content_text(content: &UserContent) -> String {
    match content {
        UserContent::Text(text) => text.clone(),
        UserContent::Blocks(blocks) => blocks_text(blocks),
    }
}

/// What was last written, so that blocks start on a fresh line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Column {
    /// At the start of a line.
    Start,
    /// In the middle of streamed text.
    Text,
    /// In the middle of streamed (dimmed) thinking.
    Thinking,
}

/// The terminal's size as (rows, columns), asked whenever a streamed line is rewritten
/// (`None`: unknown; 24 × 80 is assumed).
pub type ScreenSize = Box<dyn Fn() -> Option<(usize, usize)> + Send>;

/// Streamed answers rendered as Markdown ([`super::markdown`]): a line is shown as it arrives,
/// then rewritten in place, rendered, when it ends (the rows it took are cleared and the
/// rendered line written there); table rows stay as written until the table is known.
struct MarkdownStream {
    blocks: Blocks,
    /// The colours new texts are rendered in.
    theme: Arc<Theme>,
    size: ScreenSize,
    /// The current line as the model wrote it, not yet ended.
    line: String,
    /// The columns the current line takes as shown.
    line_columns: usize,
    /// The rows each held line takes as shown (oldest first).
    held_rows: Vec<usize>,
}

impl MarkdownStream {
    fn size(&self) -> (usize, usize) {
        let (rows, columns) = (self.size)().unwrap_or((24, 80));
        (rows.max(2), columns.max(1))
    }

    /// The state at the start of a new text: no fence open, nothing held.
    fn reset(&mut self) {
        let (_, columns) = self.size();
        self.blocks = Blocks::new(columns, Arc::clone(&self.theme));
        self.held_rows.clear();
        self.line.clear();
        self.line_columns = 0;
    }
}

/// The column after `text` (as shown: escaped) is written from column `start`.
fn advance_columns(start: usize, text: &str) -> usize {
    text.chars().fold(start, |column, ch| match ch {
        '\t' => (column / 8 + 1) * 8,
        _ => column + unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0),
    })
}

/// The columns a rendered line takes (its SGR codes take none).
fn shown_columns(line: &str) -> usize {
    let mut columns = 0;
    let mut rest = line;
    while let Some(start) = rest.find('\x1b') {
        columns = advance_columns(columns, &rest[..start]);
        let after = &rest[start..];
        rest = after.find('m').map_or("", |end| &after[end + 1..]);
    }
    advance_columns(columns, rest)
}

/// The terminal rows a line `columns` wide takes on a screen `width` wide.
fn rows_of(columns: usize, width: usize) -> usize {
    columns.div_ceil(width).max(1)
}

/// Writes session events and transcripts for people.
pub struct Renderer<W: Write> {
    out: W,
    palette: Palette,
    home: Option<std::path::PathBuf>,
    column: Column,
    /// Whether the current assistant message streamed any text or thinking.
    streamed: bool,
    /// Answers rendered as Markdown (only with colour on a terminal).
    markdown: Option<MarkdownStream>,
    /// Thinking collapsed to one line per block (Ctrl+T).
    hide_thinking: bool,
    /// Whether the collapsed thinking block's line was written.
    thinking_marked: bool,
    /// Tool results shown whole (Ctrl+O).
    expand_tools: bool,
    /// The last tool result that was cut (its text, whether it was an error).
    last_cut: Option<(String, bool)>,
}

impl<W: Write> Renderer<W> {
    /// Returns a renderer writing to `out`.
    pub fn new(out: W, palette: Palette, home: Option<&Path>) -> Self {
        Self {
            out,
            palette,
            home: home.map(Path::to_path_buf),
            column: Column::Start,
            streamed: false,
            markdown: None,
            hide_thinking: false,
            thinking_marked: false,
            expand_tools: false,
            last_cut: None,
        }
    }

    /// Whether thinking is collapsed.
    pub fn thinking_hidden(&self) -> bool {
        self.hide_thinking
    }

    /// Collapses thinking to one line per block, or shows it again.
    pub fn set_thinking_hidden(&mut self, hidden: bool) {
        self.hide_thinking = hidden;
    }

    /// Whether tool results are shown whole.
    pub fn tools_expanded(&self) -> bool {
        self.expand_tools
    }

    /// Shows tool results whole, or cut to their first and last lines again.
    pub fn set_tools_expanded(&mut self, expanded: bool) {
        self.expand_tools = expanded;
    }

    /// Writes the last tool result that was cut, whole.
    pub fn show_last_cut_result(&mut self) -> io::Result<()> {
        let Some((text, is_error)) = self.last_cut.take() else {
            return Ok(());
        };
        self.result_lines(&text, is_error, true)
    }

    /// Renders the model's answers as Markdown for a terminal of the given size (streamed
    /// lines are rewritten in place, so `out` must be that terminal).
    pub fn with_markdown(mut self, size: ScreenSize) -> Self {
        let columns = size().map_or(80, |(_, columns)| columns);
        let theme = Arc::clone(self.palette.theme());
        self.markdown = Some(MarkdownStream {
            blocks: Blocks::new(columns, Arc::clone(&theme)),
            theme,
            size,
            line: String::new(),
            line_columns: 0,
            held_rows: Vec::new(),
        });
        self
    }

    /// Writes a Markdown text of pi's own (the changelog) as an answer is shown: rendered when
    /// Markdown is on, else as written.
    pub fn markdown_text(&mut self, text: &str) -> io::Result<()> {
        for line in self.answer_lines(text.trim_end()) {
            self.line(&line)?;
        }
        Ok(())
    }

    /// The lines of an answer shown whole (not streamed): rendered when Markdown is on.
    fn answer_lines(&self, text: &str) -> Vec<String> {
        match &self.markdown {
            Some(markdown) => {
                Blocks::render_text(markdown.size().1, Arc::clone(&markdown.theme), text)
            }
            None => vec![term::text(text).into_owned()],
        }
    }

    /// Returns the palette.
    pub fn palette(&self) -> Palette {
        self.palette.clone()
    }

    /// Colours what follows in `palette`'s theme (a theme chosen in `/settings`); a text
    /// being streamed keeps its colours to its end.
    pub fn set_palette(&mut self, palette: Palette) {
        if let Some(markdown) = &mut self.markdown {
            markdown.theme = Arc::clone(palette.theme());
        }
        self.palette = palette;
    }

    /// Returns the writer.
    pub fn writer(&mut self) -> &mut W {
        &mut self.out
    }

    /// Ends a partly written line (streamed text) so that the next output starts a line.
    pub fn finish_line(&mut self) -> io::Result<()> {
        if self.column == Column::Text && self.markdown.is_some() {
            self.markdown_line_end()?;
        }
        if let Some(markdown) = self.markdown.as_mut()
            && let Some(rendered) = markdown.blocks.flush_held()
        {
            self.markdown_replace(rendered, None)?;
        }
        if self.column != Column::Start {
            writeln!(self.out)?;
            self.column = Column::Start;
        }
        self.out.flush()
    }

    /// Writes one full line (after ending a partly written one); control characters in it
    /// are shown escaped, except the palette's colours ([`term::output`]).
    pub fn line(&mut self, text: &str) -> io::Result<()> {
        self.finish_line()?;
        writeln!(self.out, "{}", term::output(text))?;
        self.out.flush()
    }

    /// Writes a notice (`Warning:` / `Error:` lines in colour).
    pub fn notice(&mut self, level: NoticeLevel, message: &str) -> io::Result<()> {
        let message = term::text(message);
        let message = message.as_ref();
        let text = match level {
            NoticeLevel::Info => self.palette.dim(message),
            NoticeLevel::Warning => self.palette.warning(&format!("Warning: {message}")),
            NoticeLevel::Error => self.palette.error(&format!("Error: {message}")),
        };
        self.line(&text)
    }

    /// Writes the status line shown after each turn.
    pub fn status(&mut self, status: &Status) -> io::Result<()> {
        let text = self.palette.dim(&status_text(status));
        self.line(&text)
    }

    /// Ends streamed text: what Markdown held is rendered, an open fence closed.
    fn end_text(&mut self) -> io::Result<()> {
        self.finish_line()?;
        if let Some(markdown) = self.markdown.as_mut() {
            markdown.reset();
        }
        Ok(())
    }

    /// Streams answer text as Markdown: shown as it arrives, each line rewritten at its end.
    fn stream_markdown(&mut self, delta: &str) -> io::Result<()> {
        if self.column == Column::Thinking {
            writeln!(self.out)?;
            self.column = Column::Start;
        }
        for piece in delta.split_inclusive('\n') {
            let (text, ends) = match piece.strip_suffix('\n') {
                Some(text) => (text.strip_suffix('\r').unwrap_or(text), true),
                None => (piece, false),
            };
            if !text.is_empty() {
                let escaped = term::text(text);
                write!(self.out, "{escaped}")?;
                if let Some(markdown) = self.markdown.as_mut() {
                    markdown.line.push_str(text);
                    markdown.line_columns = advance_columns(markdown.line_columns, &escaped);
                }
                self.column = Column::Text;
            }
            if ends {
                self.markdown_line_end()?;
            }
        }
        self.streamed = true;
        self.out.flush()
    }

    /// The current streamed line ended: rendered in its place, or held.
    fn markdown_line_end(&mut self) -> io::Result<()> {
        let Some(markdown) = self.markdown.as_mut() else {
            return Ok(());
        };
        let (_, width) = markdown.size();
        markdown.blocks.set_columns(width);
        let line = std::mem::take(&mut markdown.line);
        let rows = rows_of(markdown.line_columns, width);
        markdown.line_columns = 0;
        match markdown.blocks.push_line(&line) {
            None => {
                markdown.held_rows.push(rows);
                writeln!(self.out)?;
            }
            Some(rendered) => self.markdown_replace(rendered, Some(rows))?,
        }
        self.column = Column::Start;
        Ok(())
    }

    /// Writes `rendered` over the lines it replaces: the held lines and, when `current` gives
    /// its rows, the line the cursor is on. Lines scrolled beyond the screen's top cannot be
    /// reached: they are left as shown and the rendered lines written below them.
    fn markdown_replace(&mut self, rendered: Rendered, current: Option<usize>) -> io::Result<()> {
        let Some(markdown) = self.markdown.as_mut() else {
            return Ok(());
        };
        let (screen_rows, width) = markdown.size();
        let from_held = rendered.replaces - usize::from(current.is_some());
        let keep = markdown.held_rows.len().saturating_sub(from_held);
        let held: usize = markdown.held_rows.drain(keep..).sum();
        let rows = held + current.unwrap_or(0);
        // The cursor is on the current line's last row, or below the held lines.
        let up = if current.is_some() { rows - 1 } else { rows };
        if rows < screen_rows {
            write!(self.out, "\r")?;
            if up > 0 {
                write!(self.out, "\x1b[{up}A")?;
            }
            write!(self.out, "\x1b[J")?;
        } else if current.is_some() {
            writeln!(self.out)?;
        }
        let first_held = rendered.lines.len() - rendered.still_held;
        for (index, line) in rendered.lines.iter().enumerate() {
            writeln!(self.out, "{}", term::output(line))?;
            if index >= first_held {
                markdown.held_rows.push(rows_of(shown_columns(line), width));
            }
        }
        self.column = Column::Start;
        Ok(())
    }

    fn stream(&mut self, column: Column, delta: &str) -> io::Result<()> {
        if delta.is_empty() {
            return Ok(());
        }
        if column == Column::Text && self.markdown.is_some() {
            return self.stream_markdown(delta);
        }
        if column == Column::Thinking && self.hide_thinking {
            if !self.thinking_marked {
                self.thinking_marked = true;
                self.streamed = true;
                let painted = self.palette.dim("Thinking… (Ctrl+T shows it)");
                self.line(&painted)?;
            }
            return Ok(());
        }
        if self.column != column && self.column != Column::Start {
            writeln!(self.out)?;
        }
        // A delta is text from the model: its control characters are shown escaped (each
        // one is, whatever the deltas' boundaries: the escaping is per character).
        let escaped = term::text(delta);
        let shown = match column {
            Column::Thinking => self.palette.dim(&escaped),
            Column::Text | Column::Start => escaped.into_owned(),
        };
        write!(self.out, "{shown}")?;
        self.column = if delta.ends_with('\n') {
            Column::Start
        } else {
            column
        };
        self.streamed = true;
        self.out.flush()
    }

    fn tool_result(&mut self, content: &[ContentBlock], is_error: bool) -> io::Result<()> {
        let text = blocks_text(content);
        let whole = self.expand_tools;
        if !whole
            && text.trim_end_matches('\n').split('\n').count()
                > RESULT_HEAD_LINES + RESULT_TAIL_LINES + 1
        {
            self.last_cut = Some((text.clone(), is_error));
        }
        self.result_lines(&text, is_error, whole)
    }

    /// A tool result's lines, cut (`whole` unset) or all of them.
    fn result_lines(&mut self, text: &str, is_error: bool, whole: bool) -> io::Result<()> {
        let lines = if whole {
            truncate_output(text, usize::MAX / 4, 0)
        } else {
            truncate_output(text, RESULT_HEAD_LINES, RESULT_TAIL_LINES)
        };
        for line in lines {
            let shown = format!("  {line}");
            let painted = if is_error {
                self.palette.error(&shown)
            } else {
                self.palette.dim(&shown)
            };
            self.line(&painted)?;
        }
        Ok(())
    }

    fn tool_call_line(&mut self, name: &str, args: &Value) -> io::Result<()> {
        let text = format_tool_call(name, args, self.home.as_deref());
        let painted = self.palette.accent(&text);
        self.line(&painted)
    }

    fn assistant_end(
        &mut self,
        message: &crate::model::message::AssistantMessage,
    ) -> io::Result<()> {
        self.finish_line()?;
        match message.stop_reason {
            StopReason::Error => {
                let error = message.error_message.as_deref().unwrap_or("request error");
                let painted = self.palette.error(&format!("Error: {}", term::text(error)));
                self.line(&painted)?;
            }
            StopReason::Aborted => {
                let painted = self.palette.warning("Aborted");
                self.line(&painted)?;
            }
            StopReason::Stop
            | StopReason::Length
            | StopReason::ToolUse
            | StopReason::Pending
            | StopReason::Unknown => {
                // Text that was not streamed (a provider that sent it in one piece at the end).
                if !self.streamed {
                    let text = message.text();
                    if !text.trim().is_empty() {
                        for line in self.answer_lines(text.trim_end()) {
                            self.line(&line)?;
                        }
                    }
                }
                if message.stop_reason == StopReason::Length {
                    let painted = self
                        .palette
                        .warning("(the answer was cut off: the model reached its output limit)");
                    self.line(&painted)?;
                }
            }
        }
        self.streamed = false;
        Ok(())
    }

    fn agent_event(&mut self, event: &AgentEvent) -> io::Result<()> {
        match event {
            AgentEvent::MessageStart { message } => {
                if let AgentMessage::Assistant(_) = message {
                    self.streamed = false;
                    // A message that ended without its text's end leaves no fence open.
                    if let Some(markdown) = self.markdown.as_mut() {
                        markdown.reset();
                    }
                }
                if let AgentMessage::Custom(custom) = message
                    && custom.display
                {
                    let text = user_content_text(&custom.content);
                    let painted = self.palette.dim(&format!(
                        "[{}] {}",
                        term::line(&custom.custom_type),
                        one_line(&text)
                    ));
                    self.line(&painted)?;
                }
                Ok(())
            }
            AgentEvent::MessageUpdate { event, .. } => match event {
                StreamEvent::TextDelta { delta, .. } => self.stream(Column::Text, delta),
                StreamEvent::ThinkingDelta { delta, .. } => self.stream(Column::Thinking, delta),
                StreamEvent::ThinkingEnd { .. } => {
                    self.thinking_marked = false;
                    self.finish_line()
                }
                StreamEvent::TextEnd { .. } => self.end_text(),
                _ => Ok(()),
            },
            AgentEvent::MessageEnd { message } => match message {
                AgentMessage::Assistant(assistant) => self.assistant_end(assistant),
                _ => Ok(()),
            },
            AgentEvent::ToolExecutionStart {
                tool_name, args, ..
            } => self.tool_call_line(tool_name, args),
            AgentEvent::ToolExecutionEnd {
                result, is_error, ..
            } => self.tool_output(result, *is_error),
            AgentEvent::AgentStart
            | AgentEvent::AgentEnd { .. }
            | AgentEvent::TurnStart
            | AgentEvent::TurnEnd { .. }
            | AgentEvent::ToolExecutionUpdate { .. } => Ok(()),
        }
    }

    fn tool_output(&mut self, output: &ToolOutput, is_error: bool) -> io::Result<()> {
        self.tool_result(&output.content, is_error)
    }

    /// Writes one session event.
    pub fn event(&mut self, event: &SessionEvent) -> io::Result<()> {
        match event {
            SessionEvent::Agent(agent) => self.agent_event(agent),
            SessionEvent::AutoRetryStart {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
            } => {
                let seconds = *delay_ms as f64 / 1000.0;
                let painted = self.palette.warning(&format!(
                    "Retrying ({attempt}/{max_attempts}) in {seconds:.1}s: {}",
                    one_line(error_message)
                ));
                self.line(&painted)
            }
            SessionEvent::AutoRetryEnd {
                success,
                attempt,
                final_error,
            } => {
                if *success {
                    return Ok(());
                }
                let painted = self.palette.error(&format!(
                    "Retry failed after {attempt} attempt{}: {}",
                    if *attempt == 1 { "" } else { "s" },
                    one_line(final_error.as_deref().unwrap_or("unknown error"))
                ));
                self.line(&painted)
            }
            SessionEvent::SummarizationRetryScheduled {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
            } => {
                let seconds = *delay_ms as f64 / 1000.0;
                let painted = self.palette.warning(&format!(
                    "Summary request failed; retrying ({attempt}/{max_attempts}) in {seconds:.1}s: {}",
                    one_line(error_message)
                ));
                self.line(&painted)
            }
            SessionEvent::SummarizationRetryAttemptStart { .. }
            | SessionEvent::SummarizationRetryFinished => Ok(()),
            SessionEvent::AgentSettled { .. } => Ok(()),
            SessionEvent::CompactionStart { reason } => {
                let painted = self
                    .palette
                    .dim(&format!("Compacting the context ({reason})…"));
                self.line(&painted)
            }
            SessionEvent::CompactionEnd {
                result,
                aborted,
                error_message,
                ..
            } => {
                let text = if *aborted {
                    self.palette.warning("Compaction aborted")
                } else if let Some(error) = error_message {
                    self.palette
                        .error(&format!("Compaction failed: {}", one_line(error)))
                } else {
                    let before = result
                        .as_ref()
                        .and_then(|result| result.get("tokensBefore"))
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                    self.palette.dim(&format!(
                        "Compacted the context ({} tokens before)",
                        format_tokens(before)
                    ))
                };
                self.line(&text)
            }
            SessionEvent::Notice { level, message } => self.notice(*level, message),
            // The REPL shows the notice that comes with it.
            SessionEvent::SessionUnsaved { .. } => Ok(()),
            SessionEvent::ExtensionError {
                extension_path,
                error,
                ..
            } => {
                let painted = self.palette.error(&format!(
                    "Extension error ({}): {}",
                    term::line(extension_path),
                    term::text(error)
                ));
                self.line(&painted)
            }
            // Shown by the command that caused them, or not at all.
            SessionEvent::QueueUpdate { .. }
            | SessionEvent::EntryAppended { .. }
            | SessionEvent::ThinkingLevelChanged { .. }
            | SessionEvent::SessionInfoChanged { .. } => Ok(()),
        }
    }

    /// Writes a stored transcript (the history of a resumed session).
    pub fn transcript(&mut self, messages: &[AgentMessage]) -> io::Result<()> {
        for message in messages {
            self.history_message(message)?;
        }
        self.finish_line()
    }

    fn history_message(&mut self, message: &AgentMessage) -> io::Result<()> {
        match message {
            // The prompt and tool loadout are not part of the conversation shown.
            AgentMessage::System(_) => Ok(()),
            AgentMessage::User(user) => {
                let text = user_content_text(&user.content);
                let painted = self
                    .palette
                    .bold(&format!("> {}", term::text(text.trim_end())));
                self.line(&painted)
            }
            AgentMessage::Assistant(assistant) => {
                for block in &assistant.content {
                    match block {
                        ContentBlock::Text(text) if !text.text.trim().is_empty() => {
                            for line in self.answer_lines(text.text.trim_end()) {
                                self.line(&line)?;
                            }
                        }
                        ContentBlock::Thinking(thinking)
                            if !thinking.thinking.trim().is_empty() =>
                        {
                            let shown = if self.hide_thinking {
                                "Thinking…".to_owned()
                            } else {
                                truncate_output(&thinking.thinking, 2, 1).join("\n")
                            };
                            let painted = self.palette.dim(&shown);
                            self.line(&painted)?;
                        }
                        ContentBlock::ToolCall(call) => {
                            self.tool_call_line(&call.name, &call.arguments)?;
                        }
                        _ => {}
                    }
                }
                match assistant.stop_reason {
                    StopReason::Error => {
                        let error = assistant
                            .error_message
                            .as_deref()
                            .unwrap_or("request error");
                        let painted = self.palette.error(&format!("Error: {}", term::text(error)));
                        self.line(&painted)
                    }
                    StopReason::Aborted => {
                        let painted = self.palette.warning("Aborted");
                        self.line(&painted)
                    }
                    _ => Ok(()),
                }
            }
            AgentMessage::ToolResult(result) => self.tool_result(&result.content, result.is_error),
            AgentMessage::BashExecution(bash) => {
                let marker = if bash.exclude_from_context == Some(true) {
                    "!!"
                } else {
                    "!"
                };
                let painted = self
                    .palette
                    .bold(&format!("{marker}{}", term::line(&bash.command)));
                self.line(&painted)?;
                for line in truncate_output(&bash.output, RESULT_HEAD_LINES, RESULT_TAIL_LINES) {
                    let painted = self.palette.dim(&format!("  {line}"));
                    self.line(&painted)?;
                }
                Ok(())
            }
            AgentMessage::Custom(custom) => {
                if !custom.display {
                    return Ok(());
                }
                let text = user_content_text(&custom.content);
                let painted = self.palette.dim(&format!(
                    "[{}] {}",
                    term::line(&custom.custom_type),
                    one_line(&text)
                ));
                self.line(&painted)
            }
            AgentMessage::BranchSummary(summary) => {
                let painted = self.palette.warning(&format!(
                    "[branch summary] {}",
                    cut(&one_line(&summary.summary), 200)
                ));
                self.line(&painted)
            }
            AgentMessage::CompactionSummary(summary) => {
                let painted = self.palette.dim(&format!(
                    "[compaction: {} tokens summarised] {}",
                    format_tokens(summary.tokens_before),
                    cut(&one_line(&summary.summary), 200)
                ));
                self.line(&painted)
            }
            AgentMessage::Unknown(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::message::{AssistantMessage, TextContent};
    use serde_json::json;

    fn render(events: &[SessionEvent]) -> String {
        let mut renderer = Renderer::new(Vec::new(), Palette::new(false), None);
        for event in events {
            renderer.event(event).unwrap();
        }
        renderer.finish_line().unwrap();
        String::from_utf8(renderer.out).unwrap()
    }

    fn delta(text: &str) -> SessionEvent {
        SessionEvent::Agent(AgentEvent::MessageUpdate {
            event: StreamEvent::TextDelta {
                content_index: 0,
                delta: text.to_owned(),
            },
            partial: None,
        })
    }

    fn thinking(text: &str) -> SessionEvent {
        SessionEvent::Agent(AgentEvent::MessageUpdate {
            event: StreamEvent::ThinkingDelta {
                content_index: 0,
                delta: text.to_owned(),
            },
            partial: None,
        })
    }

    fn assistant(stop: StopReason, error: Option<&str>, text: &str) -> AssistantMessage {
        let mut message: AssistantMessage = serde_json::from_value(json!({
            "role": "assistant", "content": [], "api": "x", "provider": "p", "model": "m",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "stop", "timestamp": 0
        }))
        .unwrap();
        message.stop_reason = stop;
        message.error_message = error.map(str::to_owned);
        if !text.is_empty() {
            message.content.push(ContentBlock::Text(TextContent {
                text: text.to_owned(),
                text_signature: None,
                extra: Default::default(),
            }));
        }
        message
    }

    fn end(message: AssistantMessage) -> SessionEvent {
        SessionEvent::Agent(AgentEvent::MessageEnd {
            message: AgentMessage::Assistant(message),
        })
    }

    #[test]
    fn streamed_text_is_written_as_it_arrives_and_thinking_gets_its_own_lines() {
        let out = render(&[
            thinking("Let me"),
            thinking(" think."),
            delta("Hello"),
            delta(", world"),
            end(assistant(StopReason::Stop, None, "Hello, world")),
        ]);
        assert_eq!(out, "Let me think.\nHello, world\n");
    }

    /// What a terminal `width` columns wide shows after `bytes`: printable characters wrap,
    /// `\r`, `\n`, cursor up (`ESC [ n A`) and erase below (`ESC [ J`) move and clear, SGR
    /// codes are dropped. Enough of a terminal to check the rewrites of streamed Markdown.
    fn screen(bytes: &str, width: usize) -> String {
        let mut rows: Vec<Vec<char>> = vec![Vec::new()];
        let (mut row, mut column) = (0usize, 0usize);
        let mut chars = bytes.chars().peekable();
        while let Some(ch) = chars.next() {
            match ch {
                '\r' => column = 0,
                '\n' => {
                    row += 1;
                    column = 0;
                    if rows.len() <= row {
                        rows.push(Vec::new());
                    }
                }
                '\x1b' => {
                    assert_eq!(chars.next(), Some('['), "only CSI sequences are written");
                    let mut parameter = String::new();
                    let command = loop {
                        let next = chars.next().expect("a whole sequence");
                        if next.is_ascii_digit() || next == ';' {
                            parameter.push(next);
                        } else {
                            break next;
                        }
                    };
                    match command {
                        'A' => row -= parameter.parse::<usize>().unwrap_or(1),
                        'J' => {
                            rows[row].truncate(column);
                            rows.truncate(row + 1);
                        }
                        'm' => {}
                        other => panic!("unexpected sequence {other}"),
                    }
                }
                _ => {
                    if column == width {
                        row += 1;
                        column = 0;
                        if rows.len() <= row {
                            rows.push(Vec::new());
                        }
                    }
                    let line = &mut rows[row];
                    if line.len() <= column {
                        line.resize(column + 1, ' ');
                    }
                    line[column] = ch;
                    column += 1;
                }
            }
        }
        let text: Vec<String> = rows.iter().map(|row| row.iter().collect()).collect();
        text.join("\n").trim_end().to_owned()
    }

    #[test]
    fn streamed_markdown_is_rewritten_in_place_line_by_line_and_tables_when_known() {
        let width = 30;
        let mut renderer = Renderer::new(Vec::new(), Palette::new(true), None)
            .with_markdown(Box::new(move || Some((24, width))));
        let long = "A long line with **bold** words that wraps over two rows";
        let events = [
            thinking("Hmm."),
            delta("# Ti"),
            delta("tle\nSome **bo"),
            delta("ld** and `code`.\n"),
            delta(&format!("{long}\n")),
            delta("| k | v |\n|---|--:|\n| a | 10 |\n"),
            delta("after\n```rust\nlet x = 1;\n```\n- item"),
            SessionEvent::Agent(AgentEvent::MessageUpdate {
                event: StreamEvent::TextEnd {
                    content_index: 0,
                    content: String::new(),
                },
                partial: None,
            }),
            end(assistant(StopReason::Stop, None, "")),
        ];
        let mut seen = Vec::new();
        for event in &events {
            renderer.event(event).unwrap();
            seen.push(String::from_utf8(renderer.out.clone()).unwrap());
        }
        let out = String::from_utf8(renderer.out.clone()).unwrap();
        let shown = screen(&out, width);
        let wrapped: Vec<String> = "A long line with bold words that wraps over two rows"
            .chars()
            .collect::<Vec<_>>()
            .chunks(width)
            .map(|chunk| chunk.iter().collect())
            .collect();
        let expected = [
            "Hmm.".to_owned(),
            "Title".to_owned(),
            "Some bold and code.".to_owned(),
            wrapped.join("\n"),
            "┌───┬────┐\n│ k │  v │\n├───┼────┤\n│ a │ 10 │\n└───┴────┘".to_owned(),
            "after\n```rust\nlet x = 1;\n```\n- item".to_owned(),
        ]
        .join("\n");
        assert_eq!(shown, expected, "{out:?}");
        // While a line streams it is shown as written: the partial heading, the raw rows.
        assert!(screen(&seen[1], width).ends_with("# Ti"), "{:?}", seen[1]);
        assert!(
            screen(&seen[5], width).ends_with("| k | v |\n|---|--:|\n| a | 10 |"),
            "{:?}",
            seen[5]
        );
        // Without Markdown (no colour) the text is written exactly as the model wrote it.
        let plain = render(&[
            delta("**x** `y`\n| a |\n"),
            end(assistant(StopReason::Stop, None, "")),
        ]);
        assert_eq!(plain, "**x** `y`\n| a |\n");
    }

    #[test]
    fn thinking_is_dimmed_only_with_colour() {
        let mut renderer = Renderer::new(Vec::new(), Palette::new(true), None);
        renderer.event(&thinking("hmm")).unwrap();
        renderer.finish_line().unwrap();
        assert_eq!(
            String::from_utf8(renderer.out).unwrap(),
            "\x1b[2mhmm\x1b[0m\n"
        );
    }

    #[test]
    fn escapes_in_streamed_text_tool_output_and_notices_are_shown_as_text() {
        let mut renderer = Renderer::new(Vec::new(), Palette::new(true), None);
        renderer.event(&delta("a\x1b]0;title\x07")).unwrap();
        renderer.event(&thinking("\u{9b}2J")).unwrap();
        renderer
            .notice(NoticeLevel::Info, "n\x1b[8mhidden")
            .unwrap();
        renderer.line("\x1b[1mpi's own\x1b[0m \x1bc").unwrap();
        renderer.finish_line().unwrap();
        let out = String::from_utf8(renderer.out).unwrap();
        assert_eq!(
            out,
            "a\\x1b]0;title\\x07\n\x1b[2m\\u{9b}2J\x1b[0m\n\x1b[2mn\\x1b[8mhidden\x1b[0m\n\x1b[1mpi's own\x1b[0m \\x1bc\n"
        );
    }

    #[test]
    fn an_answer_that_was_not_streamed_is_printed_at_its_end() {
        let out = render(&[end(assistant(StopReason::Stop, None, "All at once"))]);
        assert_eq!(out, "All at once\n");
    }

    #[test]
    fn errors_and_aborts_are_reported_after_partial_text() {
        let out = render(&[
            delta("Part"),
            end(assistant(StopReason::Error, Some("429 rate limited"), "")),
        ]);
        assert_eq!(out, "Part\nError: 429 rate limited\n");
        let out = render(&[end(assistant(StopReason::Aborted, None, ""))]);
        assert_eq!(out, "Aborted\n");
    }

    #[test]
    fn tool_calls_take_one_line_and_long_results_are_cut_with_a_marker() {
        let output: String = (1..=20).map(|n| format!("line {n}\n")).collect();
        let out = render(&[
            SessionEvent::Agent(AgentEvent::ToolExecutionStart {
                tool_call_id: "c1".into(),
                tool_name: "bash".into(),
                args: json!({"command": "seq 1 20\n| cat"}),
            }),
            SessionEvent::Agent(AgentEvent::ToolExecutionEnd {
                tool_call_id: "c1".into(),
                tool_name: "bash".into(),
                result: ToolOutput::text(output),
                is_error: false,
                duration_ms: Some(3),
            }),
        ]);
        assert_eq!(
            out,
            "[bash: seq 1 20 | cat]\n  line 1\n  line 2\n  line 3\n  line 4\n  … 14 more lines …\n  line 19\n  line 20\n"
        );
    }

    #[test]
    fn short_results_are_shown_whole_and_empty_ones_not_at_all() {
        assert_eq!(truncate_output("a\nb\n", 4, 2), ["a", "b"]);
        assert_eq!(truncate_output("1\n2\n3\n4\n5\n6\n7", 4, 2).len(), 7);
        assert_eq!(truncate_output("1\n2\n3\n4\n5\n6\n7\n8", 4, 2).len(), 7);
        assert!(truncate_output("\n\n", 4, 2).is_empty());
        let long = "x".repeat(500);
        assert_eq!(
            truncate_output(&long, 4, 2)[0].chars().count(),
            RESULT_LINE_CHARS + 1
        );
    }

    #[test]
    fn tool_calls_are_formatted_like_the_reference() {
        let home = Path::new("/home/u");
        assert_eq!(
            format_tool_call(
                "read",
                &json!({"path": "/home/u/a.rs", "offset": 10, "limit": 20}),
                Some(home)
            ),
            "[read: ~/a.rs:10-29]"
        );
        assert_eq!(
            format_tool_call("grep", &json!({"pattern": "fn"}), None),
            "[grep: /fn/ in .]"
        );
        assert_eq!(
            format_tool_call("ls", &json!({"path": "/home/user2"}), Some(home)),
            "[ls: /home/user2]"
        );
        assert_eq!(
            format_tool_call("custom", &json!({"a": 1}), None),
            "[custom: {\"a\":1}]"
        );
    }

    #[test]
    fn the_status_line_shows_model_context_and_cost() {
        let status = Status {
            model: Some("mock/mock-model".into()),
            thinking: None,
            context_tokens: Some(1234),
            context_window: 128_000,
            input: 1200,
            output: 34,
            cost: 0.00125,
            name: Some("demo".into()),
        };
        assert_eq!(
            status_text(&status),
            "mock/mock-model • ctx 1.2k/128k (1.0%) • ↑1.2k ↓34 $0.0013 • demo"
        );
        let empty = Status {
            model: None,
            thinking: Some("high".into()),
            context_tokens: None,
            context_window: 0,
            input: 0,
            output: 0,
            cost: 0.0,
            name: None,
        };
        assert_eq!(status_text(&empty), "no model • high • ctx ?/0 • $0.0000");
    }

    #[test]
    fn token_counts_are_formatted_like_the_footer() {
        assert_eq!(format_tokens(999), "999");
        assert_eq!(format_tokens(1500), "1.5k");
        assert_eq!(format_tokens(45_400), "45k");
        assert_eq!(format_tokens(1_500_000), "1.5M");
        assert_eq!(format_tokens(12_000_000), "12M");
    }
}
