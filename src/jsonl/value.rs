//! JSON values with JavaScript's semantics, for the lines this project must re-serialise
//! exactly as the reference does (`JSON.stringify(JSON.parse(line))` after a migration or a
//! `--branch` re-chaining).
//!
//! Three things differ from `serde_json::Value` and matter for byte fidelity:
//! - strings are sequences of UTF-16 code units in JavaScript, so a lone surrogate escape
//!   (`"\ud83c"`) is a valid string that must survive; [`JsString`] keeps text as WTF-8
//!   (UTF-8 that may also encode lone surrogates) and writes them back as `\udXXX`;
//! - every number is an IEEE double and is written in `Number#toString` form (`1e+21`, `3`
//!   for `3.0`, `0` for `-0`), via `ryu-js`;
//! - object keys are ordered as JavaScript orders own properties: keys that are array
//!   indices (`"0"`, `"17"`, up to 2^32 − 2) first in ascending numeric order, then the
//!   other keys in insertion order; a key repeated in the source keeps its first position
//!   and its last value.
//!
//! Worked example: the line `{"b":1.50,"1":"\u00e9","b":2e0,"s":"\ud83c"}` parses to an
//! object whose keys are `b` (value 2) and `1`, and [`JsValue::to_json`] writes
//! `{"1":"é","b":2,"s":"\ud83c"}` — the bytes `JSON.stringify` produces.
//!
//! Writing is `support::json`'s (the one `JSON.stringify` writer; [`JsValue`] is a
//! [`JsonTree`]). Parsing is iterative (no recursion on the input's nesting) and refuses
//! nesting deeper than [`MAX_DEPTH`], so that dropping a value never exhausts the stack.
//!
//! Invariant: no I/O; the text given to [`parse`] is already decoded (the reader decodes
//! invalid UTF-8 to U+FFFD, as Node's `readFileSync(path, "utf8")` does).

use std::collections::HashMap;
use std::fmt;

use crate::support::json::{self, JsonText, JsonTree, Text, View};

/// The deepest nesting of arrays and objects [`parse`] accepts.
pub const MAX_DEPTH: usize = 1000;

/// Why a text is not a JSON value this module can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Not JSON as `JSON.parse` defines it; `offset` is the byte where parsing stopped.
    Syntax {
        /// Byte offset of the first unexpected input.
        offset: usize,
    },
    /// Valid so far, but nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax { offset } => write!(f, "not JSON (at byte {offset})"),
            Self::TooDeep => write!(f, "nested deeper than {MAX_DEPTH} levels"),
        }
    }
}

impl std::error::Error for ParseError {}

/// A JavaScript string: UTF-16 code units stored as WTF-8.
///
/// Well-formed text is plain UTF-8; a lone surrogate is stored as its 3-byte generalized
/// UTF-8 form (`ED A0..BF xx`). A surrogate pair is always stored as the 4-byte character.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JsString(Vec<u8>);

impl JsString {
    /// Returns the string for well-formed text.
    pub fn new(text: &str) -> Self {
        Self(text.as_bytes().to_vec())
    }

    /// Returns the text when it holds no lone surrogate.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// Returns the text with every lone surrogate replaced by U+FFFD.
    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }

    /// Returns the WTF-8 bytes.
    pub fn as_wtf8(&self) -> &[u8] {
        &self.0
    }

    /// Whether the string equals `text`.
    pub fn eq_str(&self, text: &str) -> bool {
        self.0 == text.as_bytes()
    }
}

impl From<&str> for JsString {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

/// A JSON object with JavaScript's property order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JsObject {
    /// Properties in creation order (array-index keys are reordered only when written).
    entries: Vec<(JsString, JsValue)>,
}

impl JsObject {
    /// Returns an empty object.
    pub fn new() -> Self {
        Self::default()
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.entries.iter().position(|(name, _)| name.eq_str(key))
    }

    /// Returns the value of `key`.
    pub fn get(&self, key: &str) -> Option<&JsValue> {
        self.position(key).map(|idx| &self.entries[idx].1)
    }

    /// Returns the value of `key` for changing it.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut JsValue> {
        self.position(key).map(|idx| &mut self.entries[idx].1)
    }

    /// Whether the object has `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Sets `key` as `object[key] = value` does: an existing key keeps its position, a new
    /// one is added last.
    pub fn set(&mut self, key: &str, value: JsValue) {
        match self.position(key) {
            Some(idx) => self.entries[idx].1 = value,
            None => self.entries.push((JsString::new(key), value)),
        }
    }

    /// Assigns `undefined` or a value: `None` removes the key, because `JSON.stringify`
    /// omits a property whose value is `undefined` (and nothing here sets it again).
    pub fn set_or_remove(&mut self, key: &str, value: Option<JsValue>) {
        match value {
            Some(value) => self.set(key, value),
            None => {
                self.remove(key);
            }
        }
    }

    /// Removes `key` as `delete object[key]` does; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<JsValue> {
        self.position(key).map(|idx| self.entries.remove(idx).1)
    }

    /// Returns the number of properties.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the object has no properties.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Iterates over the properties in the order JavaScript enumerates them.
    pub fn iter(&self) -> impl Iterator<Item = (&JsString, &JsValue)> {
        json::js_property_order(self.entries.iter().map(|(key, value)| (key, value))).into_iter()
    }
}

impl JsonText for JsString {
    fn text(&self) -> Text<'_> {
        Text::Wtf8(&self.0)
    }
}

/// The properties of a [`JsObject`] in creation order, for the writer.
type Properties<'a> = std::iter::Map<
    std::slice::Iter<'a, (JsString, JsValue)>,
    fn(&'a (JsString, JsValue)) -> (&'a JsString, &'a JsValue),
>;

fn property((key, value): &(JsString, JsValue)) -> (&JsString, &JsValue) {
    (key, value)
}

impl JsonTree for JsValue {
    type Key = JsString;
    type Entries<'a> = Properties<'a>;

    fn view(&self) -> View<'_, Self> {
        match self {
            Self::Null => View::Null,
            Self::Bool(flag) => View::Bool(*flag),
            Self::Number(number) => View::Double(*number),
            Self::String(text) => View::String(text.text()),
            Self::Array(items) => View::Array(items),
            Self::Object(object) => View::Object(object.entries.iter().map(property as fn(_) -> _)),
        }
    }
}

/// A JSON value as JavaScript holds it.
#[derive(Clone, Debug, PartialEq)]
pub enum JsValue {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// Every JSON number is a double (`1e400` is infinity and is written as `null`).
    Number(f64),
    /// A string, lone surrogates included.
    String(JsString),
    /// An array.
    Array(Vec<JsValue>),
    /// An object.
    Object(JsObject),
}

impl JsValue {
    /// Returns a string value.
    pub fn string(text: &str) -> Self {
        Self::String(JsString::new(text))
    }

    /// Returns the object, if this is one.
    pub fn as_object(&self) -> Option<&JsObject> {
        match self {
            Self::Object(object) => Some(object),
            _ => None,
        }
    }

    /// Returns the object for changing it, if this is one.
    pub fn as_object_mut(&mut self) -> Option<&mut JsObject> {
        match self {
            Self::Object(object) => Some(object),
            _ => None,
        }
    }

    /// Returns the string, if this is one.
    pub fn as_js_string(&self) -> Option<&JsString> {
        match self {
            Self::String(text) => Some(text),
            _ => None,
        }
    }

    /// Whether JavaScript treats the value as true in a condition.
    pub fn is_truthy(&self) -> bool {
        match self {
            Self::Null => false,
            Self::Bool(value) => *value,
            Self::Number(number) => *number != 0.0 && !number.is_nan(),
            Self::String(text) => !text.0.is_empty(),
            Self::Array(_) | Self::Object(_) => true,
        }
    }

    /// Returns the value as `JSON.stringify(value)` writes it.
    pub fn to_json(&self) -> Vec<u8> {
        json::to_js_string(self).into_bytes()
    }
}

// ----- parsing ---------------------------------------------------------------------------

/// A byte cursor over JSON text, shared by [`parse`] and the validator.
pub(crate) struct Cursor<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self {
            bytes: text.as_bytes(),
            pos: 0,
        }
    }

    pub(crate) fn error(&self) -> ParseError {
        ParseError::Syntax { offset: self.pos }
    }

    /// Skips JSON whitespace (space, tab, LF, CR — nothing else, as in `JSON.parse`).
    pub(crate) fn skip_ws(&mut self) {
        while let Some(byte) = self.bytes.get(self.pos) {
            if matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    pub(crate) fn expect(&mut self, byte: u8) -> Result<(), ParseError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error())
        }
    }

    pub(crate) fn literal(&mut self, word: &[u8]) -> Result<(), ParseError> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.error())
        }
    }

    /// Reads a number (`-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?`) and returns its double.
    pub(crate) fn number(&mut self) -> Result<f64, ParseError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.error()),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !self.peek().is_some_and(|byte| byte.is_ascii_digit()) {
                return Err(self.error());
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !self.peek().is_some_and(|byte| byte.is_ascii_digit()) {
                return Err(self.error());
            }
            self.digits();
        }
        // The slice is ASCII by construction, and Rust's float parser is correctly rounded
        // (as JavaScript's is), giving infinity beyond the double range.
        let text = std::str::from_utf8(&self.bytes[start..self.pos]).map_err(|_| self.error())?;
        text.parse::<f64>().map_err(|_| self.error())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|byte| byte.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.bytes.get(at..at + 4)?;
        let mut value = 0u32;
        for digit in digits {
            value = value * 16 + char::from(*digit).to_digit(16)?;
        }
        Some(value)
    }

    /// Reads a string literal (the cursor is on the opening quote) into WTF-8 bytes.
    pub(crate) fn string(&mut self) -> Result<JsString, ParseError> {
        self.expect(b'"')?;
        let mut out: Vec<u8> = Vec::new();
        let mut start = self.pos;
        loop {
            let Some(byte) = self.peek() else {
                return Err(self.error());
            };
            match byte {
                b'"' => {
                    out.extend_from_slice(&self.bytes[start..self.pos]);
                    self.pos += 1;
                    return Ok(JsString(out));
                }
                b'\\' => {
                    out.extend_from_slice(&self.bytes[start..self.pos]);
                    self.escape(&mut out)?;
                    start = self.pos;
                }
                0x00..=0x1f => return Err(self.error()),
                _ => self.pos += 1,
            }
        }
    }

    /// Decodes one escape sequence (the cursor is on the backslash).
    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), ParseError> {
        let Some(kind) = self.bytes.get(self.pos + 1).copied() else {
            return Err(self.error());
        };
        let simple = match kind {
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            b'/' => Some(b'/'),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'u' => None,
            _ => {
                self.pos += 1;
                return Err(self.error());
            }
        };
        if let Some(byte) = simple {
            out.push(byte);
            self.pos += 2;
            return Ok(());
        }
        let Some(unit) = self.hex4(self.pos + 2) else {
            self.pos += 2;
            return Err(self.error());
        };
        self.pos += 6;
        if (0xD800..0xDC00).contains(&unit)
            && self.bytes.get(self.pos) == Some(&b'\\')
            && self.bytes.get(self.pos + 1) == Some(&b'u')
            && let Some(low) = self.hex4(self.pos + 2)
            && (0xDC00..0xE000).contains(&low)
        {
            let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
            self.pos += 6;
            push_code_point(out, code);
            return Ok(());
        }
        push_code_point(out, unit);
        Ok(())
    }
}

/// Appends a code point (surrogates included) in generalized UTF-8.
fn push_code_point(out: &mut Vec<u8>, code: u32) {
    if let Some(ch) = char::from_u32(code) {
        let mut buf = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
    } else {
        // U+D800..U+DFFF: the 3-byte form UTF-8 forbids and WTF-8 uses.
        out.push(0xE0 | ((code >> 12) as u8 & 0x0F));
        out.push(0x80 | ((code >> 6) as u8 & 0x3F));
        out.push(0x80 | (code as u8 & 0x3F));
    }
}

/// Collects an object's properties with `JSON.parse`'s duplicate rule (first position, last
/// value), indexing keys once the object grows.
#[derive(Default)]
struct ObjectBuilder {
    object: JsObject,
    index: Option<HashMap<JsString, usize>>,
}

impl ObjectBuilder {
    fn insert(&mut self, key: JsString, value: JsValue) {
        const INDEX_FROM: usize = 16;
        let entries = &mut self.object.entries;
        if self.index.is_none() && entries.len() >= INDEX_FROM {
            self.index = Some(
                entries
                    .iter()
                    .enumerate()
                    .map(|(pos, (name, _))| (name.clone(), pos))
                    .collect(),
            );
        }
        let existing = match &self.index {
            Some(index) => index.get(&key).copied(),
            None => entries.iter().position(|(name, _)| *name == key),
        };
        match existing {
            Some(pos) => entries[pos].1 = value,
            None => {
                if let Some(index) = &mut self.index {
                    index.insert(key.clone(), entries.len());
                }
                entries.push((key, value));
            }
        }
    }
}

enum Frame {
    Array(Vec<JsValue>),
    Object(ObjectBuilder, JsString),
}

/// Parses JSON text as `JSON.parse` does (whitespace around the value allowed, nothing
/// else after it).
pub fn parse(text: &str) -> Result<JsValue, ParseError> {
    let mut cursor = Cursor::new(text);
    let mut stack: Vec<Frame> = Vec::new();
    'value: loop {
        cursor.skip_ws();
        let mut value = match cursor.peek() {
            Some(b'{' | b'[') if stack.len() >= MAX_DEPTH => return Err(ParseError::TooDeep),
            Some(b'{') => {
                cursor.pos += 1;
                cursor.skip_ws();
                if cursor.peek() == Some(b'}') {
                    cursor.pos += 1;
                    JsValue::Object(JsObject::new())
                } else {
                    let key = object_key(&mut cursor)?;
                    stack.push(Frame::Object(ObjectBuilder::default(), key));
                    continue 'value;
                }
            }
            Some(b'[') => {
                cursor.pos += 1;
                cursor.skip_ws();
                if cursor.peek() == Some(b']') {
                    cursor.pos += 1;
                    JsValue::Array(Vec::new())
                } else {
                    stack.push(Frame::Array(Vec::new()));
                    continue 'value;
                }
            }
            Some(b'"') => JsValue::String(cursor.string()?),
            Some(b't') => {
                cursor.literal(b"true")?;
                JsValue::Bool(true)
            }
            Some(b'f') => {
                cursor.literal(b"false")?;
                JsValue::Bool(false)
            }
            Some(b'n') => {
                cursor.literal(b"null")?;
                JsValue::Null
            }
            Some(b'-' | b'0'..=b'9') => JsValue::Number(cursor.number()?),
            _ => return Err(cursor.error()),
        };
        // Attach the finished value to its container, closing containers as they end.
        loop {
            cursor.skip_ws();
            match stack.last_mut() {
                None => {
                    if cursor.pos != cursor.bytes.len() {
                        return Err(cursor.error());
                    }
                    return Ok(value);
                }
                Some(Frame::Array(items)) => {
                    items.push(value);
                    match cursor.peek() {
                        Some(b',') => {
                            cursor.pos += 1;
                            continue 'value;
                        }
                        Some(b']') => {
                            cursor.pos += 1;
                            let Some(Frame::Array(items)) = stack.pop() else {
                                return Err(cursor.error());
                            };
                            value = JsValue::Array(items);
                        }
                        _ => return Err(cursor.error()),
                    }
                }
                Some(Frame::Object(builder, key)) => {
                    builder.insert(std::mem::take(key), value);
                    match cursor.peek() {
                        Some(b',') => {
                            cursor.pos += 1;
                            cursor.skip_ws();
                            *key = object_key(&mut cursor)?;
                            continue 'value;
                        }
                        Some(b'}') => {
                            cursor.pos += 1;
                            let Some(Frame::Object(builder, _)) = stack.pop() else {
                                return Err(cursor.error());
                            };
                            value = JsValue::Object(builder.object);
                        }
                        _ => return Err(cursor.error()),
                    }
                }
            }
        }
    }
}

/// Reads `"key"` and the `:` after it (the cursor is on the key's quote).
fn object_key(cursor: &mut Cursor<'_>) -> Result<JsString, ParseError> {
    let key = cursor.string()?;
    cursor.skip_ws();
    cursor.expect(b':')?;
    Ok(key)
}

/// Re-serialises JSON text as `JSON.stringify(JSON.parse(text))` would.
pub fn reserialize(text: &str) -> Result<Vec<u8>, ParseError> {
    parse(text).map(|value| value.to_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(text: &str) -> String {
        String::from_utf8(reserialize(text).unwrap()).unwrap()
    }

    #[test]
    fn numbers_are_written_as_javascript_writes_them() {
        assert_eq!(
            round(
                "[1e21, 1E+21, 5e-324, 1.7976931348623157e308, 0.30000000000000004, -0, -0.0, 3.0, 12, 1e-7, 123456789012345680000, 1e400, -1e400, 0.1, 100, 1.5e300]"
            ),
            "[1e+21,1e+21,5e-324,1.7976931348623157e+308,0.30000000000000004,0,0,3,12,1e-7,123456789012345680000,null,null,0.1,100,1.5e+300]"
        );
    }

    #[test]
    fn keys_follow_javascript_property_order() {
        assert_eq!(
            round(r#"{"b":1,"2":2,"a":3,"1":4,"01":5,"4294967295":6,"4294967294":7,"b":8}"#),
            r#"{"1":4,"2":2,"4294967294":7,"b":8,"a":3,"01":5,"4294967295":6}"#
        );
    }

    #[test]
    fn strings_keep_lone_surrogates_and_escape_like_json_stringify() {
        assert_eq!(
            round(
                r#"["\ud83c", "\ud83c\udf89", "\udf89\ud83c", "\u00e9\/\"\\\b\f\n\r\t\u0001\u001f\u007f", "\u2028 ok"]"#
            ),
            "[\"\\ud83c\",\"🎉\",\"\\udf89\\ud83c\",\"é/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\u{7f}\",\"\u{2028} ok\"]"
        );
        assert_eq!(
            round(r#"{"\ud800":"\uDBFF\uDFFF"}"#),
            "{\"\\ud800\":\"\u{10FFFF}\"}"
        );
    }

    #[test]
    fn json_parse_grammar_is_enforced() {
        for bad in [
            "",
            " ",
            "{",
            "[1,]",
            "{\"a\":1,}",
            "01",
            "1.",
            ".5",
            "+1",
            "-",
            "1e",
            "tru",
            "nul",
            "\"\t\"",
            "\"\\x\"",
            "\"\\u12\"",
            "[1] x",
            "{\"a\" 1}",
            "{a:1}",
            "NaN",
            "'a'",
            "\u{a0}1",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} must be rejected");
        }
        for good in [
            " 1 ",
            "\r\n[\t]\n",
            "-0",
            "0e0",
            "\"\"",
            "{}",
            "[[],{}]",
            "1E-2",
        ] {
            assert!(parse(good).is_ok(), "{good:?} must parse");
        }
    }

    #[test]
    fn nesting_is_bounded_without_recursion() {
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(&deep).is_ok());
        let deeper = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(matches!(parse(&deeper), Err(ParseError::TooDeep)));
        let huge = "[".repeat(1_000_000);
        assert!(matches!(parse(&huge), Err(ParseError::TooDeep)));
    }

    #[test]
    fn object_edits_follow_javascript_assignment() {
        let mut value = parse(r#"{"type":"x","a":1}"#).unwrap();
        let object = value.as_object_mut().unwrap();
        object.set("type", JsValue::string("y"));
        object.set("id", JsValue::string("1"));
        object.remove("a");
        object.set("a", JsValue::Null);
        object.set_or_remove("missing", None);
        assert_eq!(value.to_json(), br#"{"type":"y","id":"1","a":null}"#);
    }

    #[test]
    fn large_objects_keep_the_duplicate_rule() {
        let mut text = String::from("{");
        for idx in 0..40 {
            text.push_str(&format!("\"k{idx}\":{idx},"));
        }
        text.push_str("\"k3\":\"last\"}");
        let value = parse(&text).unwrap();
        let object = value.as_object().unwrap();
        assert_eq!(object.len(), 40);
        assert_eq!(object.get("k3"), Some(&JsValue::string("last")));
        assert_eq!(object.iter().nth(3).unwrap().0, &JsString::new("k3"));
    }
}
