//! Markdown for a terminal: the model's answers as people read them in the REPL — headings,
//! emphasis, inline code, links, lists, quotes, rules, tables and fenced code blocks with
//! syntax highlighting.
//!
//! Text arrives line by line ([`Blocks::push_line`]): the block structure (fences, headings,
//! list markers, quotes, rules, table rows) is decided per line here, with the state a line
//! carries to the next (an open fence and its highlighter, table rows held until the table is
//! known); the inline part of a line is parsed by `pulldown-cmark` (CommonMark emphasis rules,
//! code spans, links, strikethrough). Fenced code is highlighted by `syntect` (Sublime Text's
//! grammars) with the grammar's scopes mapped onto the theme's `syntax*` tokens.
//!
//! Colours come from the theme ([`super::theme`]: `md*` and `syntax*` tokens; the default
//! `system` theme is the terminal's own 16 colours, so it reads on a dark or a light
//! background). Every piece of text from the model is escaped ([`term::text`]) before it is
//! styled; the only escape sequences in the output are SGR codes of the roles and the theme,
//! all of them forms [`term::output`] lets through. Rendering is used only with colour on (a
//! terminal, `NO_COLOR` unset): without colour the REPL shows the model's Markdown as written,
//! which reads well as it is.
//!
//! Invariant: rendering does no I/O; [`Blocks`] is tested on strings.

use std::sync::{Arc, OnceLock};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use syntect::easy::ScopeRegionIterator;
use syntect::parsing::{ParseState, ScopeStack, SyntaxReference, SyntaxSet};
use unicode_width::UnicodeWidthStr;

use super::theme::Theme;
use crate::support::term;

/// What a piece of rendered text is, coloured by the theme's token for it ([`Role::style`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A heading's text.
    Heading,
    /// `*emphasis*`.
    Emphasis,
    /// `**strong**`.
    Strong,
    /// `~~struck~~`.
    Strike,
    /// An inline code span.
    Code,
    /// Code in a fence whose language has no grammar here.
    CodeBlock,
    /// A fence line, a rule, a table's borders, a quote's bar.
    Border,
    /// A link's text.
    Link,
    /// A link's destination, shown after its text.
    LinkUrl,
    /// A quote's text.
    Quote,
    /// A list item's marker.
    Bullet,
    /// Highlighted code: comments.
    SyntaxComment,
    /// Highlighted code: keywords.
    SyntaxKeyword,
    /// Highlighted code: function names.
    SyntaxFunction,
    /// Highlighted code: strings.
    SyntaxString,
    /// Highlighted code: numbers and other constants.
    SyntaxNumber,
    /// Highlighted code: type names.
    SyntaxType,
}

impl Role {
    /// The role's own SGR modifier (bold, italic, …; empty: none) and the theme token of its
    /// colour (`mdHeading`, `syntaxKeyword`, …; none: the role is not coloured).
    fn style(self) -> (&'static str, Option<&'static str>) {
        match self {
            Role::Heading => ("\x1b[1m", Some("mdHeading")),
            Role::Emphasis => ("\x1b[3m", None),
            Role::Strong => ("\x1b[1m", None),
            Role::Strike => ("\x1b[9m", None),
            Role::Code => ("", Some("mdCode")),
            Role::CodeBlock => ("", Some("mdCodeBlock")),
            Role::Border => ("", Some("mdCodeBlockBorder")),
            Role::Link => ("\x1b[4m", Some("mdLink")),
            Role::LinkUrl => ("", Some("mdLinkUrl")),
            Role::Quote => ("\x1b[3m", Some("mdQuote")),
            Role::Bullet => ("", Some("mdListBullet")),
            Role::SyntaxComment => ("", Some("syntaxComment")),
            Role::SyntaxKeyword => ("", Some("syntaxKeyword")),
            Role::SyntaxFunction => ("", Some("syntaxFunction")),
            Role::SyntaxString => ("", Some("syntaxString")),
            Role::SyntaxNumber => ("", Some("syntaxNumber")),
            Role::SyntaxType => ("", Some("syntaxType")),
        }
    }
}

/// Text being built with styles, and its width on the terminal.
struct Styled {
    text: String,
    width: usize,
    theme: Arc<Theme>,
}

impl Styled {
    fn new(theme: &Arc<Theme>) -> Self {
        Self {
            text: String::new(),
            width: 0,
            theme: Arc::clone(theme),
        }
    }

    /// Appends `text` (already escaped) in the styles of `roles` (outermost first).
    fn push(&mut self, text: &str, roles: &[Role]) {
        if text.is_empty() {
            return;
        }
        let mut styled = false;
        for role in roles {
            let (modifier, token) = role.style();
            let color = token.map_or("", |token| self.theme.fg(token));
            for code in [modifier, color] {
                if !code.is_empty() {
                    self.text.push_str(code);
                    styled = true;
                }
            }
        }
        self.text.push_str(text);
        if styled {
            self.text.push_str("\x1b[0m");
        }
        self.width += UnicodeWidthStr::width(text);
    }

    /// Appends model text: escaped first.
    fn push_data(&mut self, text: &str, roles: &[Role]) {
        let escaped = term::line(text);
        self.push(&escaped, roles);
    }
}

/// The grammars, loaded once (≈ 2 ms; a grammar's rules are compiled on first use).
fn syntaxes() -> &'static SyntaxSet {
    static SET: OnceLock<SyntaxSet> = OnceLock::new();
    SET.get_or_init(SyntaxSet::load_defaults_newlines)
}

/// The grammar for a fence's info string (`rust`, `py`, `ts`, `sh`, …), if there is one.
fn syntax_for(info: &str) -> Option<&'static SyntaxReference> {
    let token = info
        .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    // Languages the bundled grammars know under another name.
    let token = match token.as_str() {
        "" => return None,
        "ts" | "typescript" | "tsx" | "jsx" | "mjs" | "cjs" => "js",
        "shell" | "console" | "zsh" | "sh" | "shellscript" => "bash",
        "yml" => "yaml",
        "golang" => "go",
        "c++" => "cpp",
        "jsonc" | "json5" => "json",
        other => other,
    };
    let set = syntaxes();
    set.find_syntax_by_token(token)
}

/// The role of highlighted code under `stack` (the innermost scope that names one).
fn syntax_role(stack: &ScopeStack) -> Option<Role> {
    for scope in stack.as_slice().iter().rev() {
        let name = scope.build_string();
        let role = if name.starts_with("comment") {
            Role::SyntaxComment
        } else if name.starts_with("string") {
            Role::SyntaxString
        } else if name.starts_with("constant.numeric") || name.starts_with("constant.language") {
            Role::SyntaxNumber
        } else if name.starts_with("keyword.operator") || name.starts_with("punctuation") {
            return None;
        } else if name.starts_with("keyword") || name.starts_with("storage.modifier") {
            Role::SyntaxKeyword
        } else if name.starts_with("storage.type")
            || name.starts_with("entity.name.type")
            || name.starts_with("entity.name.class")
            || name.starts_with("entity.name.struct")
            || name.starts_with("support.type")
            || name.starts_with("support.class")
        {
            // `fn`, `let`, `def`: the grammars file them under storage.type.
            if name.starts_with("storage.type.function") || name == "storage.type.rust" {
                Role::SyntaxKeyword
            } else {
                Role::SyntaxType
            }
        } else if name.starts_with("entity.name.function")
            || name.starts_with("support.function")
            || name.starts_with("variable.function")
        {
            Role::SyntaxFunction
        } else {
            continue;
        };
        return Some(role);
    }
    None
}

/// An open fenced code block.
struct Fence {
    marker: char,
    len: usize,
    /// The grammar's state across lines (none: the language has no grammar).
    highlight: Option<(ParseState, ScopeStack)>,
}

/// What a finished line turned into.
#[derive(Debug, PartialEq, Eq)]
pub struct Rendered {
    /// How many lines, counted back from the latest one pushed, the lines below replace (the
    /// latest line and the held lines before it; from [`Blocks::finish`], the held lines).
    pub replaces: usize,
    /// The rendered lines, with their styles.
    pub lines: Vec<String>,
    /// How many of the last `lines` are still held (0 or 1): the latest line, shown as it was
    /// written, may begin another table.
    pub still_held: usize,
}

/// The block state of a Markdown text rendered line by line.
pub struct Blocks {
    /// Columns of the terminal (rules and tables fit into them).
    columns: usize,
    fence: Option<Fence>,
    /// Table rows held until the table is known (a header row, then a delimiter row).
    held: Vec<String>,
    /// The colours of the roles.
    theme: Arc<Theme>,
}

/// Table rows held at most (the rest of a longer table is shown as it is).
const MAX_HELD_ROWS: usize = 200;

impl Blocks {
    /// Returns the state at the start of a text, for a terminal `columns` wide, in the
    /// colours of `theme`.
    pub fn new(columns: usize, theme: Arc<Theme>) -> Self {
        Self {
            columns: columns.max(20),
            fence: None,
            held: Vec::new(),
            theme,
        }
    }

    /// Sets the terminal's width (it may change between lines).
    pub fn set_columns(&mut self, columns: usize) {
        self.columns = columns.max(20);
    }

    /// Renders a finished line (without its line end). `None`: the line is held (it may be a
    /// table's row) and stays as it was shown until a later line or [`Self::finish`] decides.
    pub fn push_line(&mut self, line: &str) -> Option<Rendered> {
        if self.fence.is_some() {
            return Some(Rendered {
                replaces: 1,
                lines: vec![self.fenced_line(line)],
                still_held: 0,
            });
        }
        if !self.held.is_empty() {
            return self.after_held(line);
        }
        if is_table_row(line) {
            self.held.push(line.to_owned());
            return None;
        }
        Some(Rendered {
            replaces: 1,
            lines: vec![self.block_line(line)],
            still_held: 0,
        })
    }

    /// Ends the text: the held lines are rendered (`None`: nothing was held), and a fence
    /// left open is closed.
    pub fn finish(&mut self) -> Option<Rendered> {
        let rendered = self.flush_held();
        self.fence = None;
        rendered
    }

    /// Renders the held lines now (other output comes between them and what follows); an
    /// open fence stays open.
    pub fn flush_held(&mut self) -> Option<Rendered> {
        if self.held.is_empty() {
            return None;
        }
        let lines = std::mem::take(&mut self.held);
        Some(Rendered {
            replaces: lines.len(),
            lines: self.held_lines(&lines),
            still_held: 0,
        })
    }

    /// Renders a whole text (an answer that was not streamed, a stored transcript).
    pub fn render_text(columns: usize, theme: Arc<Theme>, text: &str) -> Vec<String> {
        let mut blocks = Blocks::new(columns, theme);
        // A held line has its place in `out` (as written) until it is decided.
        let mut out: Vec<String> = Vec::new();
        for line in text.lines() {
            match blocks.push_line(line) {
                Some(rendered) => {
                    let keep = out
                        .len()
                        .saturating_sub(rendered.replaces.saturating_sub(1));
                    out.truncate(keep);
                    out.extend(rendered.lines);
                }
                None => out.push(term::line(line).into_owned()),
            }
        }
        if let Some(rendered) = blocks.finish() {
            let keep = out.len().saturating_sub(rendered.replaces);
            out.truncate(keep);
            out.extend(rendered.lines);
        }
        out
    }

    /// A line after held table rows.
    fn after_held(&mut self, line: &str) -> Option<Rendered> {
        let held = self.held.len();
        let is_table = held >= 2 || (held == 1 && is_delimiter_row(line));
        if is_table && is_table_row(line) && held < MAX_HELD_ROWS {
            self.held.push(line.to_owned());
            return None;
        }
        // The table (or the lines that were not one) ends before this line.
        let lines = std::mem::take(&mut self.held);
        let mut out = self.held_lines(&lines);
        let (still_held, tail) = match self.push_line(line) {
            Some(rendered) => (0, rendered.lines),
            // This line begins another candidate: held now, shown as written.
            None => (1, vec![term::line(line).into_owned()]),
        };
        out.extend(tail);
        Some(Rendered {
            replaces: held + 1,
            lines: out,
            still_held,
        })
    }

    /// The held lines rendered: a table when they are one, each line by itself otherwise.
    fn held_lines(&mut self, lines: &[String]) -> Vec<String> {
        if lines.len() >= 2
            && is_delimiter_row(&lines[1])
            && let Some(table) = render_table(lines, self.columns, &self.theme)
        {
            return table;
        }
        lines.iter().map(|line| self.block_line(line)).collect()
    }

    /// A line inside a fence (or the fence's closing line).
    fn fenced_line(&mut self, line: &str) -> String {
        let Some(fence) = self.fence.as_mut() else {
            return self.block_line(line);
        };
        let trimmed = line.trim_start_matches(' ');
        let indent = line.len() - trimmed.len();
        if indent <= 3 {
            let run = trimmed.chars().take_while(|c| *c == fence.marker).count();
            if run >= fence.len && trimmed[run * fence.marker.len_utf8()..].trim().is_empty() {
                self.fence = None;
                let mut styled = Styled::new(&self.theme);
                styled.push_data(line, &[Role::Border]);
                return styled.text;
            }
        }
        let mut styled = Styled::new(&self.theme);
        match fence.highlight.as_mut() {
            Some((state, stack)) => {
                let with_end = format!("{line}\n");
                match state.parse_line(&with_end, syntaxes()) {
                    Ok(ops) => {
                        for (piece, op) in ScopeRegionIterator::new(&ops, &with_end) {
                            if stack.apply(op).is_err() {
                                break;
                            }
                            let piece = piece.strip_suffix('\n').unwrap_or(piece);
                            let escaped = term::text(piece);
                            match syntax_role(stack) {
                                Some(role) => styled.push(&escaped, &[role]),
                                None => styled.push(&escaped, &[]),
                            }
                        }
                    }
                    // A grammar that fails on a line: the rest of the block is plain.
                    Err(_) => {
                        fence.highlight = None;
                        styled.push(&term::text(line), &[Role::CodeBlock]);
                    }
                }
            }
            None => styled.push(&term::text(line), &[Role::CodeBlock]),
        }
        styled.text
    }

    /// A line outside fences and tables: its block structure here, its inline part parsed.
    fn block_line(&mut self, line: &str) -> String {
        let trimmed = line.trim_start_matches(' ');
        let indent = line.len() - trimmed.len();
        let mut styled = Styled::new(&self.theme);
        if indent <= 3 {
            // A fence opens.
            if let Some(marker) = trimmed.chars().next().filter(|c| *c == '`' || *c == '~') {
                let len = trimmed.chars().take_while(|c| *c == marker).count();
                let info = trimmed[len..].trim();
                if len >= 3 && !(marker == '`' && info.contains('`')) {
                    let highlight =
                        syntax_for(info).map(|syntax| (ParseState::new(syntax), ScopeStack::new()));
                    self.fence = Some(Fence {
                        marker,
                        len,
                        highlight,
                    });
                    styled.push_data(line, &[Role::Border]);
                    return styled.text;
                }
            }
            // A heading.
            let hashes = trimmed.chars().take_while(|c| *c == '#').count();
            if (1..=6).contains(&hashes)
                && (trimmed.len() == hashes || trimmed[hashes..].starts_with([' ', '\t']))
            {
                let text = trimmed[hashes..].trim();
                let text = text.trim_end_matches('#').trim_end();
                if hashes >= 3 {
                    styled.push(&"#".repeat(hashes), &[Role::Heading]);
                    styled.push(" ", &[]);
                }
                inline(&mut styled, text, &[Role::Heading]);
                return styled.text;
            }
            // A thematic break.
            if is_rule(trimmed) {
                let width = self.columns.min(80);
                styled.push(&"─".repeat(width), &[Role::Border]);
                return styled.text;
            }
            // A quote.
            if let Some(rest) = trimmed.strip_prefix('>') {
                let rest = rest.strip_prefix(' ').unwrap_or(rest);
                styled.push("│ ", &[Role::Border]);
                // What is quoted is a line of its own (a list, a heading, another quote).
                let inner = self.block_line(rest);
                styled.text.push_str(&inner);
                return styled.text;
            }
        }
        // A list item (any indent: nested lists).
        if let Some((marker, rest)) = list_marker(trimmed) {
            styled.push(&" ".repeat(indent), &[]);
            styled.push_data(marker, &[Role::Bullet]);
            styled.push(" ", &[]);
            inline(&mut styled, rest, &[]);
            return styled.text;
        }
        styled.push(&" ".repeat(indent), &[]);
        inline(&mut styled, trimmed, &[]);
        styled.text
    }
}

/// A list item's marker and its text: `- `, `* `, `+ `, `1. `, `1) `.
fn list_marker(line: &str) -> Option<(&str, &str)> {
    let bytes = line.as_bytes();
    let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    let end = if matches!(bytes.first(), Some(b'-' | b'*' | b'+')) {
        1
    } else if (1..=9).contains(&digits) && matches!(bytes.get(digits), Some(b'.' | b')')) {
        digits + 1
    } else {
        return None;
    };
    let rest = &line[end..];
    if rest.is_empty() {
        return Some((&line[..end], ""));
    }
    let text = rest.strip_prefix([' ', '\t'])?;
    // `**bold**` at a line's start is not a list.
    Some((&line[..end], text))
}

/// Whether a (left-trimmed) line is a thematic break: three or more `-`, `*` or `_`.
fn is_rule(line: &str) -> bool {
    let mut chars = line.chars().filter(|c| !c.is_whitespace());
    let Some(first) = chars.next().filter(|c| matches!(c, '-' | '*' | '_')) else {
        return false;
    };
    let mut count = 1;
    for c in chars {
        if c != first {
            return false;
        }
        count += 1;
    }
    count >= 3
}

/// Whether a line may be a table's row (it starts with `|`).
fn is_table_row(line: &str) -> bool {
    let trimmed = line.trim();
    trimmed.starts_with('|') && trimmed.len() > 1
}

/// Whether a line is a table's delimiter row (`|---|:---:|`).
fn is_delimiter_row(line: &str) -> bool {
    let cells = split_row(line);
    !cells.is_empty()
        && cells.iter().all(|cell| {
            let cell = cell.trim();
            let inner = cell.trim_start_matches(':').trim_end_matches(':');
            !inner.is_empty() && inner.chars().all(|c| c == '-')
        })
}

/// A row's cells: split at `|` outside code spans and not escaped.
fn split_row(line: &str) -> Vec<String> {
    let trimmed = line.trim();
    let trimmed = trimmed.strip_prefix('|').unwrap_or(trimmed);
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut in_code = false;
    let mut chars = trimmed.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push('|');
                chars.next();
            }
            '`' => {
                in_code = !in_code;
                cell.push(c);
            }
            '|' if !in_code => cells.push(std::mem::take(&mut cell)),
            _ => cell.push(c),
        }
    }
    if !cell.trim().is_empty() {
        cells.push(cell);
    }
    cells
}

#[derive(Clone, Copy)]
enum Align {
    Left,
    Center,
    Right,
}

/// A table drawn with box lines, its cells' inline Markdown rendered; `None` when it does not
/// fit the terminal (it is then shown as written).
fn render_table(lines: &[String], columns: usize, theme: &Arc<Theme>) -> Option<Vec<String>> {
    let aligns: Vec<Align> = split_row(&lines[1])
        .iter()
        .map(|cell| {
            let cell = cell.trim();
            match (cell.starts_with(':'), cell.ends_with(':')) {
                (true, true) => Align::Center,
                (false, true) => Align::Right,
                _ => Align::Left,
            }
        })
        .collect();
    let count = aligns.len();
    let rows: Vec<Vec<Styled>> = lines
        .iter()
        .enumerate()
        .filter(|(index, _)| *index != 1)
        .map(|(index, line)| {
            let mut cells: Vec<Styled> = split_row(line)
                .iter()
                .take(count)
                .map(|cell| {
                    let mut styled = Styled::new(theme);
                    let roles: &[Role] = if index == 0 { &[Role::Strong] } else { &[] };
                    inline(&mut styled, cell.trim(), roles);
                    styled
                })
                .collect();
            cells.resize_with(count, || Styled::new(theme));
            cells
        })
        .collect();
    let widths: Vec<usize> = (0..count)
        .map(|column| {
            rows.iter()
                .map(|row| row[column].width)
                .max()
                .unwrap_or(0)
                .max(1)
        })
        .collect();
    let total = widths.iter().sum::<usize>() + 3 * count + 1;
    if total > columns {
        return None;
    }
    let border = |left: &str, middle: &str, right: &str| {
        let mut styled = Styled::new(theme);
        let inner: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
        styled.push(
            &format!("{left}{}{right}", inner.join(middle)),
            &[Role::Border],
        );
        styled.text
    };
    let mut out = vec![border("┌", "┬", "┐")];
    for (index, row) in rows.iter().enumerate() {
        let mut line = Styled::new(theme);
        line.push("│", &[Role::Border]);
        for (column, cell) in row.iter().enumerate() {
            let pad = widths[column] - cell.width;
            let (before, after) = match aligns[column] {
                Align::Left => (0, pad),
                Align::Right => (pad, 0),
                Align::Center => (pad / 2, pad - pad / 2),
            };
            line.text.push(' ');
            line.text.push_str(&" ".repeat(before));
            line.text.push_str(&cell.text);
            line.text.push_str(&" ".repeat(after));
            line.text.push(' ');
            line.push("│", &[Role::Border]);
        }
        out.push(line.text);
        if index == 0 {
            out.push(border("├", "┼", "┤"));
        }
    }
    out.push(border("└", "┴", "┘"));
    Some(out)
}

/// Appends the inline Markdown of `text` (one line) in the styles of `base` and its own.
fn inline(styled: &mut Styled, text: &str, base: &[Role]) {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_STRIKETHROUGH);
    let mut roles: Vec<Role> = base.to_vec();
    let mut links: Vec<String> = Vec::new();
    for event in Parser::new_ext(text, options) {
        match event {
            Event::Text(text) => styled.push_data(&text, &roles),
            Event::Code(code) => {
                let mut with = roles.clone();
                with.push(Role::Code);
                styled.push_data(&code, &with);
            }
            // Raw HTML is text like any other.
            Event::Html(raw) | Event::InlineHtml(raw) => styled.push_data(&raw, &roles),
            Event::SoftBreak | Event::HardBreak => styled.push(" ", &[]),
            Event::TaskListMarker(done) => {
                styled.push(if done { "[x] " } else { "[ ] " }, &[Role::Bullet]);
            }
            Event::FootnoteReference(name) => styled.push_data(&format!("[^{name}]"), &roles),
            Event::Start(Tag::Emphasis) => roles.push(Role::Emphasis),
            Event::Start(Tag::Strong) => roles.push(Role::Strong),
            Event::Start(Tag::Strikethrough) => roles.push(Role::Strike),
            Event::Start(Tag::Link { dest_url, .. }) => {
                roles.push(Role::Link);
                links.push(dest_url.into_string());
            }
            Event::Start(Tag::Image { dest_url, .. }) => {
                styled.push("[image: ", &roles);
                links.push(dest_url.into_string());
                roles.push(Role::Link);
            }
            Event::End(TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough) => {
                roles.pop();
            }
            Event::End(TagEnd::Link) => {
                roles.pop();
                if let Some(url) = links.pop() {
                    // An autolink's text is its address already.
                    if !url.is_empty() && !styled.text.ends_with(&format!("{url}\x1b[0m")) {
                        styled.push_data(&format!(" ({url})"), &[Role::LinkUrl]);
                    }
                }
            }
            Event::End(TagEnd::Image) => {
                roles.pop();
                if let Some(url) = links.pop() {
                    styled.push_data(&format!(" ({url})"), &[Role::LinkUrl]);
                }
                styled.push("]", &roles);
            }
            // Block structure is decided line by line above; what the parser still sees as a
            // block here (an indented line, a `#` after a list marker) is shown as its text.
            Event::Start(_) | Event::End(_) => {}
            Event::Rule => styled.push("---", &roles),
            Event::InlineMath(math) | Event::DisplayMath(math) => styled.push_data(&math, &roles),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text of rendered lines without their styles.
    fn plain(lines: &[String]) -> String {
        let joined = lines.join("\n");
        let mut out = String::new();
        let mut rest = joined.as_str();
        while let Some(start) = rest.find("\x1b[") {
            out.push_str(&rest[..start]);
            let after = &rest[start..];
            let end = after.find('m').map_or(after.len(), |end| end + 1);
            rest = &after[end..];
        }
        out.push_str(rest);
        out
    }

    fn render(text: &str) -> Vec<String> {
        Blocks::render_text(80, Arc::new(Theme::system()), text)
    }

    #[test]
    fn headings_emphasis_code_and_links_lose_their_markers_and_keep_their_text() {
        let lines = render(
            "# Title\n## Part\n### Detail\nSome **bold**, *soft*, ~~gone~~ and `code`.\nSee [the docs](https://example.com/d) or <https://example.com>.",
        );
        assert_eq!(
            plain(&lines),
            "Title\nPart\n### Detail\nSome bold, soft, gone and code.\nSee the docs (https://example.com/d) or https://example.com."
        );
        assert!(
            lines[0].starts_with("\x1b[1m\x1b[33mTitle"),
            "{:?}",
            lines[0]
        );
        assert!(lines[3].contains("\x1b[1mbold\x1b[0m"), "{:?}", lines[3]);
        assert!(lines[3].contains("\x1b[3msoft\x1b[0m"), "{:?}", lines[3]);
        assert!(lines[3].contains("\x1b[35mcode\x1b[0m"), "{:?}", lines[3]);
        assert!(
            lines[4].contains("\x1b[4m\x1b[34mthe docs\x1b[0m"),
            "{:?}",
            lines[4]
        );
    }

    #[test]
    fn lists_quotes_and_rules_keep_their_structure() {
        let lines = render(
            "- one\n  - nested `x`\n1. first\n2) second\n> quoted *word*\n---\n**not a list**",
        );
        assert_eq!(
            plain(&lines),
            format!(
                "- one\n  - nested x\n1. first\n2) second\n│ quoted word\n{}\nnot a list",
                "─".repeat(80)
            )
        );
        assert!(lines[0].starts_with("\x1b[35m-\x1b[0m"), "{:?}", lines[0]);
    }

    #[test]
    fn fenced_code_is_highlighted_and_kept_as_written() {
        let lines =
            render("```rust\nfn main() { // hi\n    let s = \"x\" + 42;\n}\n```\nafter `it`");
        assert_eq!(
            plain(&lines),
            "```rust\nfn main() { // hi\n    let s = \"x\" + 42;\n}\n```\nafter it"
        );
        // `fn` a keyword, `main` a function, the comment dim, the string and number coloured.
        assert!(lines[1].contains("\x1b[34mfn\x1b[0m"), "{:?}", lines[1]);
        assert!(lines[1].contains("\x1b[33mmain\x1b[0m"), "{:?}", lines[1]);
        assert!(lines[1].contains("\x1b[2m"), "{:?}", lines[1]);
        assert!(lines[2].contains("\x1b[32m"), "{:?}", lines[2]);
        assert!(lines[2].contains("\x1b[36m42\x1b[0m"), "{:?}", lines[2]);
        // Inside the fence, Markdown is not Markdown.
        let lines = render("```\n**x** `y`\n```\n");
        assert_eq!(plain(&lines), "```\n**x** `y`\n```");
        assert!(lines[1].starts_with("\x1b[32m**x**"), "{:?}", lines[1]);
        // Aliases the grammars know under another name.
        for info in ["ts", "sh", "python", "json", "yml"] {
            assert!(syntax_for(info).is_some(), "{info}");
        }
        assert!(syntax_for("no-such-language").is_none());
    }

    #[test]
    fn a_table_is_held_until_it_is_known_and_drawn_aligned() {
        let mut blocks = Blocks::new(80, Arc::new(Theme::system()));
        assert_eq!(blocks.push_line("| Name | n |"), None);
        assert_eq!(blocks.push_line("|:-----|--:|"), None);
        assert_eq!(blocks.push_line("| **a** | 1 |"), None);
        assert_eq!(blocks.push_line("| bb | 22 |"), None);
        let rendered = blocks.push_line("after").unwrap();
        assert_eq!(rendered.replaces, 5);
        assert_eq!(
            plain(&rendered.lines),
            "┌──────┬────┐\n│ Name │  n │\n├──────┼────┤\n│ a    │  1 │\n│ bb   │ 22 │\n└──────┴────┘\nafter"
        );
        // A row with pipes that is not followed by a delimiter row is text.
        let mut blocks = Blocks::new(80, Arc::new(Theme::system()));
        assert_eq!(blocks.push_line("| not a table"), None);
        let rendered = blocks.push_line("plain").unwrap();
        assert_eq!(rendered.replaces, 2);
        assert_eq!(plain(&rendered.lines), "| not a table\nplain");
        // The text ends with a table: `finish` draws it.
        let mut blocks = Blocks::new(80, Arc::new(Theme::system()));
        assert_eq!(blocks.push_line("| a |"), None);
        assert_eq!(blocks.push_line("|---|"), None);
        let rendered = blocks.finish().unwrap();
        assert_eq!(rendered.replaces, 2);
        assert_eq!(plain(&rendered.lines), "┌───┐\n│ a │\n├───┤\n└───┘");
        // Too wide for the terminal: shown as written.
        let wide = format!("| {} |", "x".repeat(100));
        let lines = Blocks::render_text(40, Arc::new(Theme::system()), &format!("{wide}\n|---|\n"));
        assert_eq!(plain(&lines), format!("{wide}\n|---|"));
    }

    #[test]
    fn control_characters_from_the_model_are_escaped_everywhere() {
        let lines = render(
            "# \x1b]0;title\x07\n**\x1b[2J**\n```rust\nlet a = \"\x1b]52;c;eA==\x07\";\n```\n| \x1bc |\n|---|",
        );
        let joined = plain(&lines);
        for line in &lines {
            let checked = term::output(line);
            assert_eq!(
                checked,
                line.as_str(),
                "an escape not of pi's own: {line:?}"
            );
        }
        assert!(joined.contains("\\x1b]0;title\\x07"), "{joined:?}");
        assert!(joined.contains("\\x1b[2J"), "{joined:?}");
        assert!(joined.contains("\\x1b]52;c;eA==\\x07"), "{joined:?}");
        assert!(joined.contains("\\x1bc"), "{joined:?}");
    }
}
