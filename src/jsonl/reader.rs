//! Reading a session file: lines, the header rule, tolerance, and migration of old versions.
//!
//! A file is split on LF (a UTF-8 byte-order mark before the first line is dropped, the `\r`
//! of a CRLF ending is removed). The first line that `JSON.parse` accepts must be a session
//! header (an object with `type: "session"` and a string `id`), else the file is refused
//! ([`JsonlError::NoHeader`]). Every later line is either an entry — a JSON object whose
//! `type` is a string other than `session` — kept byte for byte as its payload, or a
//! [`SkippedLine`] with its 1-based number, a [`SkipReason`] and its bytes, for the caller to
//! quarantine. Lines before the header that are blank or not JSON are skipped the same way.
//!
//! Version 3 files are read lazily, line by line, so a large file is never held
//! as parsed values. Older files are read whole, migrated (`migrate.rs`) and every line is
//! re-serialised as the reference rewrites it (`value.rs`).
//!
//! Worked example — this file (line 3 is torn by a crash):
//! ```text
//! {"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}
//! {"type":"message","id":"a1","parentId":null,"timestamp":"…","message":{…}}
//! {"type":"message","id":"b2","par
//! ```
//! reads as the header `s1`, one entry `a1` (payload = line 2's bytes), and
//! `SkippedLine { line: 3, reason: Torn, .. }`.
//!
//! Invariant: pure over the given bytes; never panics on any input, never loops on it.

use std::collections::VecDeque;
use std::fmt;

use serde_json::Value;

use crate::jsonl::JsonlError;
use crate::jsonl::migrate::{self, Migration, ParsedLine};
use crate::jsonl::validate::{self, Kind};
use crate::jsonl::value::{self, JsValue, ParseError};
use crate::model::entry::{Entry, SessionHeader};
use crate::support::json;

/// Why a line is not stored as an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// Empty or only whitespace.
    Blank,
    /// Not JSON.
    NotJson,
    /// The last line, not JSON and without a final newline (a crash while appending).
    Torn,
    /// A JSON array.
    Array,
    /// A bare string, number or boolean.
    Scalar,
    /// The JSON value `null`.
    Null,
    /// A `type: "session"` line after the header.
    SecondHeader,
    /// An object whose `type` is missing or not a string.
    NoType,
    /// JSON the reference accepts but this project cannot hold as an entry (nested deeper
    /// than the typed reader allows, or a number beyond the double range).
    Unsupported,
}

impl SkipReason {
    /// Returns the reason as reported to users (`import --json` `skipped[].reason`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Blank => "blank line",
            Self::NotJson => "not JSON",
            Self::Torn => "torn last line (not JSON, no final newline)",
            Self::Array => "a JSON array, not an entry object",
            Self::Scalar => "a bare JSON value, not an entry object",
            Self::Null => "JSON null, not an entry object",
            Self::SecondHeader => "a second session header",
            Self::NoType => "an object without a string type, not an entry",
            Self::Unsupported => {
                "JSON that pi cannot store (nested too deeply or a number out of range)"
            }
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An entry line: its number, its payload bytes and its typed view.
#[derive(Debug, Clone, PartialEq)]
pub struct FileEntry {
    /// 1-based line number in the file.
    pub line: usize,
    /// The bytes stored and exported (the line without its line ending; re-serialised for
    /// migrated files).
    pub payload: Vec<u8>,
    /// The typed view of the payload.
    pub entry: Entry,
}

/// A line that is not an entry, kept for quarantine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLine {
    /// 1-based line number in the file.
    pub line: usize,
    /// Why it was skipped.
    pub reason: SkipReason,
    /// The line's bytes (without its line ending).
    pub bytes: Vec<u8>,
}

/// One line after the header, in file order.
// Nearly every item is an entry, so boxing the large variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// An entry to store.
    Entry(FileEntry),
    /// A line to quarantine.
    Skipped(SkippedLine),
}

/// What reading repaired silently (export writes the repaired form).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Repairs {
    /// The file started with a UTF-8 byte-order mark.
    pub byte_order_mark: bool,
    /// At least one line ended in CRLF.
    pub crlf: bool,
    /// The last line had no final LF.
    pub missing_final_newline: bool,
}

/// A line of the file without its ending.
#[derive(Debug, Clone, Copy)]
struct RawLine<'a> {
    number: usize,
    content: &'a [u8],
    terminated: bool,
}

/// Splits bytes into LF-terminated lines, removing the `\r` of CRLF.
#[derive(Debug, Clone)]
struct Lines<'a> {
    bytes: &'a [u8],
    pos: usize,
    number: usize,
    crlf: bool,
    unterminated: bool,
}

impl<'a> Lines<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            pos: 0,
            number: 0,
            crlf: false,
            unterminated: false,
        }
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = RawLine<'a>;

    fn next(&mut self) -> Option<RawLine<'a>> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        let rest = &self.bytes[self.pos..];
        self.number += 1;
        let (mut content, terminated) = match memchr::memchr(b'\n', rest) {
            Some(end) => {
                self.pos += end + 1;
                (&rest[..end], true)
            }
            None => {
                self.pos = self.bytes.len();
                self.unterminated = true;
                (rest, false)
            }
        };
        if terminated && let Some(stripped) = content.strip_suffix(b"\r") {
            content = stripped;
            self.crlf = true;
        }
        Some(RawLine {
            number: self.number,
            content,
            terminated,
        })
    }
}

/// Whether a line is empty after JavaScript's `trim()`.
fn is_blank(content: &[u8]) -> bool {
    if content
        .iter()
        .all(|byte| byte.is_ascii_whitespace() || *byte == 0x0b)
    {
        return true;
    }
    if content.is_ascii() {
        return false;
    }
    String::from_utf8_lossy(content)
        .chars()
        .all(crate::support::js::is_whitespace)
}

fn skipped(line: RawLine<'_>, reason: SkipReason) -> Item {
    Item::Skipped(SkippedLine {
        line: line.number,
        reason,
        bytes: line.content.to_vec(),
    })
}

fn not_json(line: RawLine<'_>) -> Item {
    let reason = if line.terminated {
        SkipReason::NotJson
    } else {
        SkipReason::Torn
    };
    skipped(line, reason)
}

/// The reason for a parsed line that is not an entry object (`None`: it is one).
fn reason_for_serde(value: &Value) -> Option<SkipReason> {
    match value {
        Value::Object(map) => match map.get("type") {
            Some(Value::String(kind)) if kind == "session" => Some(SkipReason::SecondHeader),
            Some(Value::String(_)) => None,
            _ => Some(SkipReason::NoType),
        },
        Value::Array(_) => Some(SkipReason::Array),
        Value::Null => Some(SkipReason::Null),
        Value::Bool(_) | Value::Number(_) | Value::String(_) => Some(SkipReason::Scalar),
    }
}

fn reason_for_js(value: &JsValue) -> Option<SkipReason> {
    match value {
        JsValue::Object(object) => match object.get("type") {
            Some(JsValue::String(kind)) if kind.eq_str("session") => Some(SkipReason::SecondHeader),
            Some(JsValue::String(_)) => None,
            _ => Some(SkipReason::NoType),
        },
        JsValue::Array(_) => Some(SkipReason::Array),
        JsValue::Null => Some(SkipReason::Null),
        JsValue::Bool(_) | JsValue::Number(_) | JsValue::String(_) => Some(SkipReason::Scalar),
    }
}

fn reason_for_outline(outline: &validate::Outline) -> SkipReason {
    match outline.kind {
        Kind::Object => match outline.string("type") {
            Some(kind) if kind.eq_str("session") => SkipReason::SecondHeader,
            Some(_) => SkipReason::Unsupported,
            None => SkipReason::NoType,
        },
        Kind::Array => SkipReason::Array,
        Kind::Null => SkipReason::Null,
        Kind::String | Kind::Number | Kind::Bool => SkipReason::Scalar,
    }
}

/// Classifies one line of a version-3 file, keeping its bytes as the payload.
fn classify(line: RawLine<'_>) -> Item {
    if is_blank(line.content) {
        return skipped(line, SkipReason::Blank);
    }
    // serde_json first (fast); then what JSON.parse also accepts: lone surrogate escapes and
    // invalid UTF-8 (decoded as Node decodes the file), deep nesting, huge numbers.
    let value = serde_json::from_slice::<Value>(line.content)
        .or_else(|_| json::parse_lenient(line.content));
    match value {
        Ok(value) => {
            if let Some(reason) = reason_for_serde(&value) {
                return skipped(line, reason);
            }
            match Entry::from_value(value) {
                Some(entry) => Item::Entry(FileEntry {
                    line: line.number,
                    payload: line.content.to_vec(),
                    entry,
                }),
                None => skipped(line, SkipReason::NoType),
            }
        }
        Err(_) => {
            let text = String::from_utf8_lossy(line.content);
            match validate::outline(&text) {
                Ok(outline) => skipped(line, reason_for_outline(&outline)),
                Err(_) => not_json(line),
            }
        }
    }
}

/// Whether the bytes after a file's last LF would be reported as a torn line
/// ([`SkipReason::Torn`]: not JSON, no final newline) — a line its writer has not finished.
pub fn is_torn(remainder: &[u8]) -> bool {
    let line = RawLine {
        number: 1,
        content: remainder,
        terminated: false,
    };
    matches!(
        classify(line),
        Item::Skipped(SkippedLine {
            reason: SkipReason::Torn,
            ..
        })
    )
}

/// Why a file has no valid header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoHeader {
    /// Zero bytes (or only a byte-order mark).
    Empty,
    /// No line is JSON.
    NoJsonLine,
    /// The first JSON line is not `{"type":"session","id":<string>}`.
    NotAHeader {
        /// Its 1-based line number.
        line: usize,
    },
    /// The header is valid JSON that pi cannot read.
    Unreadable {
        /// Its 1-based line number.
        line: usize,
    },
}

impl fmt::Display for NoHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "the file is empty"),
            Self::NoJsonLine => write!(f, "no line is JSON"),
            Self::NotAHeader { line } => write!(
                f,
                "line {line}, the first JSON line, is not a session header ({{\"type\":\"session\",\"id\":\"…\"}})"
            ),
            Self::Unreadable { line } => write!(
                f,
                "line {line} is a session header pi cannot read (nested too deeply or a number out of range)"
            ),
        }
    }
}

/// The header of a file being read.
#[derive(Debug, Clone, PartialEq)]
struct HeaderLine {
    typed: SessionHeader,
    js: JsValue,
    line: usize,
    bytes: Vec<u8>,
}

/// Reads the header from the first JSON line, or says why there is none.
fn header_from(line: RawLine<'_>) -> Result<HeaderLine, NoHeader> {
    let text = String::from_utf8_lossy(line.content);
    let js = match value::parse(&text) {
        Ok(js) => js,
        Err(ParseError::TooDeep) => {
            return Err(match validate::outline(&text) {
                Ok(outline)
                    if outline.kind == Kind::Object
                        && outline.string("type").is_some_and(|t| t.eq_str("session"))
                        && outline.string("id").is_some() =>
                {
                    NoHeader::Unreadable { line: line.number }
                }
                _ => NoHeader::NotAHeader { line: line.number },
            });
        }
        Err(ParseError::Syntax { .. }) => return Err(NoHeader::NoJsonLine),
    };
    let object = js
        .as_object()
        .ok_or(NoHeader::NotAHeader { line: line.number })?;
    let is_session = object
        .get("type")
        .and_then(JsValue::as_js_string)
        .is_some_and(|kind| kind.eq_str("session"));
    let has_id = matches!(object.get("id"), Some(JsValue::String(_)));
    if !is_session || !has_id {
        return Err(NoHeader::NotAHeader { line: line.number });
    }
    let typed =
        SessionHeader::parse(line.content).ok_or(NoHeader::Unreadable { line: line.number })?;
    Ok(HeaderLine {
        typed,
        js,
        line: line.number,
        bytes: line.content.to_vec(),
    })
}

/// Refuses a header whose `version` pi would misread.
///
/// The reference takes `version ?? 1` and compares it as JavaScript compares (`>= 3`: no
/// migration; `< 2`: v1 → v2; `< 3`: v2 → v3). Accepted here: an absent or `null` version
/// (v1), and a number or string whose JavaScript number is exactly 1, 2 or 3 — `3`, and also
/// `"3"` or `" 3 "`, which the reference reads exactly as `3`, so both read the file the same
/// way.
/// Refused, naming the version:
/// - a number above 3 (`4`, `999`, `"4"`, `Infinity`): a format newer than pi knows, which
///   the reference would read as version 3 without a word;
/// - anything else (`-1`, `0`, `2.5`, `true`, `[3]`, `"three"`, `{}`): no version at all; the
///   reference would migrate `-1` or `0` as version 1 — giving every entry a new id and
///   chaining them in file order, which rearranges a tree whose lines carry their own ids —
///   and rewrite a `"three"` file, so there is no reading of it to agree with.
fn check_version(version: Option<&JsValue>, line: usize) -> Result<(), JsonlError> {
    let number = match version {
        None | Some(JsValue::Null) => return Ok(()),
        Some(value @ (JsValue::Number(_) | JsValue::String(_))) => migrate::to_number(value),
        // `true` (1 to JavaScript), `[3]`, `{}`: not a version, whatever they coerce to.
        Some(_) => f64::NAN,
    };
    if [1.0, 2.0, 3.0].contains(&number) {
        return Ok(());
    }
    let text = version
        .map(|value| String::from_utf8_lossy(&value.to_json()).into_owned())
        .unwrap_or_default();
    let mut shown: String = text.chars().take(40).collect();
    if text.chars().count() > 40 {
        shown.push('…');
    }
    Err(JsonlError::UnsupportedVersion {
        line,
        version: shown,
        newer: number > 3.0,
    })
}

/// Reads a session file: the header up front, then the other lines as [`Item`]s in file
/// order (an iterator).
#[derive(Debug)]
pub struct SessionReader<'a> {
    header: SessionHeader,
    header_bytes: Vec<u8>,
    header_line: usize,
    migration: Migration,
    queued: VecDeque<Item>,
    lines: Lines<'a>,
    offset: usize,
    bom: bool,
}

impl<'a> SessionReader<'a> {
    /// Reads the header of `bytes` (migrating the whole file if it is older than version 3).
    pub fn new(bytes: &'a [u8]) -> Result<Self, JsonlError> {
        let (body, bom) = match bytes.strip_prefix(b"\xef\xbb\xbf") {
            Some(rest) => (rest, true),
            None => (bytes, false),
        };
        if body.is_empty() {
            return Err(JsonlError::NoHeader(NoHeader::Empty));
        }
        let mut lines = Lines::new(body);
        let mut queued = VecDeque::new();
        let header = loop {
            let Some(line) = lines.next() else {
                return Err(JsonlError::NoHeader(NoHeader::NoJsonLine));
            };
            if is_blank(line.content) {
                queued.push_back(skipped(line, SkipReason::Blank));
                continue;
            }
            match header_from(line) {
                Ok(header) => break header,
                Err(NoHeader::NoJsonLine) => {
                    // Not JSON at all: skipped like any other such line.
                    queued.push_back(not_json(line));
                }
                Err(other) => return Err(JsonlError::NoHeader(other)),
            }
        };
        let version = header
            .js
            .as_object()
            .and_then(|object| object.get("version"));
        check_version(version, header.line)?;
        let migration = Migration::for_version(version);
        let offset = usize::from(bom) * 3;
        let mut reader = Self {
            header: header.typed.clone(),
            header_bytes: header.bytes.clone(),
            header_line: header.line,
            migration,
            queued,
            lines,
            offset,
            bom,
        };
        if migration.rewrites() {
            reader.migrate_all(header);
        }
        Ok(reader)
    }

    /// Reads every remaining line, migrates, and queues the re-serialised items.
    fn migrate_all(&mut self, header: HeaderLine) {
        #[allow(clippy::large_enum_variant)]
        enum Slot<'b> {
            Parsed(usize, RawLine<'b>),
            Skipped(Item),
        }
        let header_id = header.typed.id.to_string();
        let mut parsed = vec![ParsedLine {
            line: header.line,
            value: Some(header.js),
            is_entry: false,
        }];
        let mut slots: Vec<Slot<'a>> = Vec::new();
        for line in self.lines.by_ref() {
            if is_blank(line.content) {
                slots.push(Slot::Skipped(skipped(line, SkipReason::Blank)));
                continue;
            }
            let text = String::from_utf8_lossy(line.content);
            match value::parse(&text) {
                Ok(value) => {
                    let is_entry = reason_for_js(&value).is_none();
                    slots.push(Slot::Parsed(parsed.len(), line));
                    parsed.push(ParsedLine {
                        line: line.number,
                        value: Some(value),
                        is_entry,
                    });
                }
                Err(ParseError::TooDeep) => {
                    // Parseable for the reference (it counts for firstKeptEntryIndex), but
                    // too deep to migrate here.
                    parsed.push(ParsedLine {
                        line: line.number,
                        value: None,
                        is_entry: false,
                    });
                    let reason = validate::outline(&text)
                        .map_or(SkipReason::Unsupported, |outline| {
                            reason_for_outline(&outline)
                        });
                    slots.push(Slot::Skipped(skipped(line, reason)));
                }
                Err(ParseError::Syntax { .. }) => slots.push(Slot::Skipped(not_json(line))),
            }
        }
        migrate::migrate(&mut parsed, &header_id, self.migration);
        if let Some(Some(header_value)) = parsed.first().map(|line| line.value.as_ref()) {
            let bytes = header_value.to_json();
            if let Some(typed) = SessionHeader::parse(&bytes) {
                self.header = typed;
                self.header_bytes = bytes;
            }
        }
        for slot in slots {
            let item = match slot {
                Slot::Skipped(item) => item,
                Slot::Parsed(idx, line) => {
                    let Some(value) = parsed[idx].value.as_ref() else {
                        self.queued
                            .push_back(skipped(line, SkipReason::Unsupported));
                        continue;
                    };
                    if let Some(reason) = reason_for_js(value) {
                        skipped(line, reason)
                    } else {
                        let payload = value.to_json();
                        match Entry::parse(&payload) {
                            Some(entry) => Item::Entry(FileEntry {
                                line: line.number,
                                payload,
                                entry,
                            }),
                            None => skipped(line, SkipReason::Unsupported),
                        }
                    }
                }
            };
            self.queued.push_back(item);
        }
    }

    /// Returns the session header (after migration).
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// Returns the header line as stored and exported (re-serialised for migrated files).
    pub fn header_bytes(&self) -> &[u8] {
        &self.header_bytes
    }

    /// Returns the header's 1-based line number.
    pub fn header_line(&self) -> usize {
        self.header_line
    }

    /// Returns what reading the file does to its lines.
    pub fn migration(&self) -> Migration {
        self.migration
    }

    /// Returns what was repaired so far (complete once the iterator is exhausted).
    pub fn repairs(&self) -> Repairs {
        Repairs {
            byte_order_mark: self.bom,
            crlf: self.lines.crlf,
            missing_final_newline: self.lines.unterminated,
        }
    }

    /// Returns how many bytes of the file have been read (for progress).
    pub fn bytes_read(&self) -> usize {
        self.offset + self.lines.pos
    }

    /// Reads every remaining line.
    pub fn read_all(mut self) -> SessionFile {
        let items: Vec<Item> = self.by_ref().collect();
        SessionFile {
            repairs: self.repairs(),
            header: self.header,
            header_bytes: self.header_bytes,
            header_line: self.header_line,
            migration: self.migration,
            items,
        }
    }
}

impl Iterator for SessionReader<'_> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        if let Some(item) = self.queued.pop_front() {
            return Some(item);
        }
        self.lines.next().map(classify)
    }
}

/// Reads the lines of a version-3 file that follow its first `lines_before` lines (the part
/// a file grew by since an import read up to there): each line is classified exactly as
/// [`SessionReader`] classifies it, numbered from the file's start.
///
/// Only for files whose header said version 3 (their lines are read one by one, without
/// migration); `bytes` starts right after an LF of the file.
#[derive(Debug, Clone)]
pub struct TailReader<'a> {
    lines: Lines<'a>,
}

impl<'a> TailReader<'a> {
    /// Reads `bytes`, numbering its first line `lines_before + 1`.
    pub fn new(bytes: &'a [u8], lines_before: usize) -> Self {
        let mut lines = Lines::new(bytes);
        lines.number = lines_before;
        Self { lines }
    }

    /// Returns how many bytes have been read (for progress).
    pub fn bytes_read(&self) -> usize {
        self.lines.pos
    }
}

impl Iterator for TailReader<'_> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        self.lines.next().map(classify)
    }
}

/// Where the complete (LF-terminated) lines of some bytes end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompleteLines {
    /// Bytes up to and including the last LF (0 when there is none).
    pub len: usize,
    /// The number of LFs, that is of complete lines.
    pub count: usize,
    /// The last complete line, its LF included (empty when there is none).
    pub last: std::ops::Range<usize>,
}

impl CompleteLines {
    /// Finds the complete lines of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        let Some(end) = memchr::memrchr(b'\n', bytes) else {
            return Self {
                len: 0,
                count: 0,
                last: 0..0,
            };
        };
        let start = memchr::memrchr(b'\n', &bytes[..end]).map_or(0, |before| before + 1);
        Self {
            len: end + 1,
            count: memchr::memchr_iter(b'\n', &bytes[..=end]).count(),
            last: start..end + 1,
        }
    }

    /// Whether bytes follow the last LF (a line without its LF yet).
    pub fn has_remainder(&self, bytes: &[u8]) -> bool {
        bytes.len() > self.len
    }
}

/// A whole file read into memory (for tests and small files).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionFile {
    /// The header (after migration).
    pub header: SessionHeader,
    /// The header line as stored and exported.
    pub header_bytes: Vec<u8>,
    /// The header's 1-based line number.
    pub header_line: usize,
    /// What reading did to the lines.
    pub migration: Migration,
    /// What reading repaired.
    pub repairs: Repairs,
    /// Every other line, in file order.
    pub items: Vec<Item>,
}

impl SessionFile {
    /// Reads a whole file.
    pub fn read(bytes: &[u8]) -> Result<Self, JsonlError> {
        SessionReader::new(bytes).map(SessionReader::read_all)
    }

    /// Returns the entries in file order.
    pub fn entries(&self) -> impl Iterator<Item = &FileEntry> {
        self.items.iter().filter_map(|item| match item {
            Item::Entry(entry) => Some(entry),
            Item::Skipped(_) => None,
        })
    }

    /// Returns the skipped lines in file order.
    pub fn skipped(&self) -> impl Iterator<Item = &SkippedLine> {
        self.items.iter().filter_map(|item| match item {
            Item::Skipped(line) => Some(line),
            Item::Entry(_) => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;

    fn entry(id: &str, parent: Option<&str>) -> String {
        let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"hi","timestamp":1}}}}"#
        )
    }

    fn reasons(file: &SessionFile) -> Vec<(usize, SkipReason)> {
        file.skipped()
            .map(|line| (line.line, line.reason))
            .collect()
    }

    #[test]
    fn every_kind_of_bad_line_is_reported_with_its_number() {
        let text = format!(
            "\n{HEADER}\r\n{}\r\nnot json\n\n  \t\n[1]\n7\nnull\n{{\"a\":1}}\n{HEADER}\n{}\n{{\"type\":\"message\",\"id\":\"x",
            entry("a1", None),
            entry("b2", Some("a1")),
        );
        let file = SessionFile::read(text.as_bytes()).unwrap();
        assert_eq!(file.header_line, 2);
        assert_eq!(file.header_bytes, HEADER.as_bytes());
        let entries: Vec<(usize, &[u8])> = file
            .entries()
            .map(|entry| (entry.line, entry.payload.as_slice()))
            .collect();
        assert_eq!(
            entries,
            [
                (3, entry("a1", None).as_bytes()),
                (12, entry("b2", Some("a1")).as_bytes())
            ]
        );
        assert_eq!(
            reasons(&file),
            [
                (1, SkipReason::Blank),
                (4, SkipReason::NotJson),
                (5, SkipReason::Blank),
                (6, SkipReason::Blank),
                (7, SkipReason::Array),
                (8, SkipReason::Scalar),
                (9, SkipReason::Null),
                (10, SkipReason::NoType),
                (11, SkipReason::SecondHeader),
                (13, SkipReason::Torn),
            ]
        );
        assert!(file.repairs.crlf && file.repairs.missing_final_newline);
    }

    #[test]
    fn the_first_json_line_must_be_a_header() {
        let no_header = |text: &str| match SessionFile::read(text.as_bytes()) {
            Err(JsonlError::NoHeader(reason)) => reason,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert_eq!(no_header(""), NoHeader::Empty);
        assert_eq!(no_header("\u{feff}"), NoHeader::Empty);
        assert_eq!(no_header("\n\ngarbage\n"), NoHeader::NoJsonLine);
        assert_eq!(
            no_header(&format!("{}\n{HEADER}\n", entry("a", None))),
            NoHeader::NotAHeader { line: 1 }
        );
        assert_eq!(no_header("x\nnull\n"), NoHeader::NotAHeader { line: 2 });
        assert_eq!(
            no_header(r#"{"type":"session","id":5}"#),
            NoHeader::NotAHeader { line: 1 }
        );
        // Garbage before the header is allowed (and reported).
        let file = SessionFile::read(format!("garbage\n\u{feff}{HEADER}\n").as_bytes());
        assert!(
            file.is_err(),
            "a BOM is only dropped at the start of the file"
        );
        let file = SessionFile::read(format!("\u{feff}garbage\n{HEADER}\n").as_bytes()).unwrap();
        assert_eq!(reasons(&file), [(1, SkipReason::NotJson)]);
        assert!(file.repairs.byte_order_mark);
    }

    #[test]
    fn payloads_keep_lone_surrogates_and_odd_numbers() {
        let line = r#"{"type":"custom","customType":"x","data":{"t":"\ud83c","n":1.0,"e":1E21},"id":"c1","parentId":null,"timestamp":"t"}"#;
        let file = SessionFile::read(format!("{HEADER}\n{line}\n").as_bytes()).unwrap();
        let entries: Vec<&FileEntry> = file.entries().collect();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].payload, line.as_bytes());
        assert_eq!(entries[0].entry.id.as_ref().unwrap().as_str(), "c1");
    }

    #[test]
    fn deep_and_huge_lines_are_reported_not_fatal() {
        let deep = format!(
            r#"{{"type":"custom","customType":"x","data":{}0{},"id":"d","parentId":null,"timestamp":"t"}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let huge = r#"{"type":"custom","customType":"x","data":1e400,"id":"h","parentId":null,"timestamp":"t"}"#;
        let file = SessionFile::read(format!("{HEADER}\n{deep}\n{huge}\n").as_bytes()).unwrap();
        assert_eq!(
            reasons(&file),
            [(2, SkipReason::Unsupported), (3, SkipReason::Unsupported)]
        );
    }

    #[test]
    fn a_tail_reads_as_the_whole_file_reads_the_same_lines() {
        let text = format!(
            "{HEADER}\n{}\nnot json\n{}\n\n{{\"type\":\"message\",\"id\":\"x",
            entry("a1", None),
            entry("b2", Some("a1")),
        );
        let whole = SessionFile::read(text.as_bytes()).unwrap();
        // The tail after the first three lines (header, a1, "not json").
        let cut = text.match_indices('\n').nth(2).unwrap().0 + 1;
        let tail: Vec<Item> = TailReader::new(&text.as_bytes()[cut..], 3).collect();
        assert_eq!(tail.as_slice(), &whole.items[2..]);
        assert_eq!(
            tail.iter()
                .map(|item| match item {
                    Item::Entry(entry) => entry.line,
                    Item::Skipped(line) => line.line,
                })
                .collect::<Vec<_>>(),
            [4, 5, 6]
        );
    }

    #[test]
    fn complete_lines_end_at_the_last_lf() {
        let none = CompleteLines::of(b"no newline");
        assert_eq!((none.len, none.count, none.last.clone()), (0, 0, 0..0));
        assert!(none.has_remainder(b"no newline"));
        let one = CompleteLines::of(b"a\n");
        assert_eq!((one.len, one.count, one.last), (2, 1, 0..2));
        let bytes = b"a\nbb\r\n\nccc";
        let lines = CompleteLines::of(bytes);
        assert_eq!((lines.len, lines.count, lines.last.clone()), (7, 3, 6..7));
        assert!(lines.has_remainder(bytes));
        let ended = CompleteLines::of(b"a\nbb\n");
        assert_eq!((ended.len, ended.count, ended.last.clone()), (5, 2, 2..5));
        assert!(!ended.has_remainder(b"a\nbb\n"));
    }

    #[test]
    fn legacy_files_are_migrated_and_reserialised() {
        let text = concat!(
            "{\"type\":\"session\",\"id\":\"old\",\"timestamp\":\"t\",\"cwd\":\"/w\"}\n",
            "{\"type\":\"message\",\"timestamp\":\"t\",\"message\":{\"role\":\"user\",\"content\":\"a\",\"timestamp\":1.0}}\n",
            "[1]\n",
            "{\"type\":\"compaction\",\"timestamp\":\"t\",\"summary\":\"s\",\"firstKeptEntryIndex\":1,\"tokensBefore\":5e0}\n",
        );
        let file = SessionFile::read(text.as_bytes()).unwrap();
        assert_eq!(file.migration, Migration::FromV1);
        assert_eq!(
            file.header_bytes,
            br#"{"type":"session","id":"old","timestamp":"t","cwd":"/w","version":3}"#
        );
        let entries: Vec<&FileEntry> = file.entries().collect();
        let first = entries[0].entry.id.clone().unwrap();
        assert_eq!(
            String::from_utf8(entries[0].payload.clone()).unwrap(),
            format!(
                r#"{{"type":"message","timestamp":"t","message":{{"role":"user","content":"a","timestamp":1}},"id":"{first}","parentId":null}}"#
            )
        );
        let second = entries[1].entry.id.clone().unwrap();
        assert_eq!(
            String::from_utf8(entries[1].payload.clone()).unwrap(),
            format!(
                r#"{{"type":"compaction","timestamp":"t","summary":"s","tokensBefore":5,"id":"{second}","parentId":"{first}","firstKeptEntryId":"{first}"}}"#
            )
        );
        assert_eq!(reasons(&file), [(3, SkipReason::Array)]);
        // Reading again gives the same ids.
        let again = SessionFile::read(text.as_bytes()).unwrap();
        assert_eq!(again, file);
    }
}
