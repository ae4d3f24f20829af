//! JSON that arrives in pieces: the reference's repair and partial-parse rules for tool-call
//! arguments and provider events (`packages/ai/utils/json-parse.js` and the `partial-json`
//! package it uses).
//!
//! - [`repair_json`] escapes raw control characters inside string literals and doubles
//!   backslashes before characters that cannot follow one.
//! - [`parse_json_with_repair`] parses, and on failure parses the repaired text.
//! - [`parse_streaming_json`] never fails: complete JSON parses (with repair); an unfinished
//!   prefix parses as far as it goes (`{"path":"sr` → `{"path":"sr"}`); anything else is `{}`.
//!
//! Invariant: these functions are pure and never panic on any input; results equal what the
//! reference computes for the same text (numbers that JavaScript reads as `Infinity`/`NaN`
//! become `null`, which is what `JSON.stringify` writes for them anyway).

use serde_json::{Map, Value};

use crate::support::json::parse_lenient;

/// Returns `text` with raw control characters inside strings escaped and invalid escapes
/// (a backslash before anything but `"\/bfnrtu`, or `\u` without four hex digits) doubled.
pub fn repair_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut in_string = false;
    let mut chars = text.char_indices().peekable();
    while let Some((idx, ch)) = chars.next() {
        if !in_string {
            out.push(ch);
            if ch == '"' {
                in_string = true;
            }
            continue;
        }
        match ch {
            '"' => {
                out.push(ch);
                in_string = false;
            }
            '\\' => {
                let Some(&(_, next)) = chars.peek() else {
                    out.push_str("\\\\");
                    continue;
                };
                if next == 'u' {
                    let digits = text.get(idx + 2..idx + 6).unwrap_or("");
                    if digits.len() == 4 && digits.bytes().all(|b| b.is_ascii_hexdigit()) {
                        out.push_str("\\u");
                        out.push_str(digits);
                        // Skip `u` and the four digits (all ASCII).
                        for _ in 0..5 {
                            chars.next();
                        }
                        continue;
                    }
                }
                if matches!(next, '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' | 'u') {
                    out.push('\\');
                    out.push(next);
                    chars.next();
                    continue;
                }
                out.push_str("\\\\");
            }
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Parses `text` as JSON; if that fails, parses the repaired text (the reference's
/// `parseJsonWithRepair`). Lone UTF-16 surrogate escapes are accepted, as `JSON.parse` does.
pub fn parse_json_with_repair(text: &str) -> Result<Value, serde_json::Error> {
    match parse_lenient(text.as_bytes()) {
        Ok(value) => Ok(value),
        Err(err) => {
            let repaired = repair_json(text);
            if repaired != text {
                parse_lenient(repaired.as_bytes())
            } else {
                Err(err)
            }
        }
    }
}

/// Parses the complete argument text of a finished tool call (1.6.0's
/// `parseToolCallArguments`): empty text is `{}`; text that is not a JSON object (after the
/// reference's repair) gives `{}` and an error naming the problem and the text the model sent.
/// The parse error's wording is serde's, not V8's.
pub fn parse_tool_call_arguments(text: &str) -> (Value, Option<String>) {
    if text.trim().is_empty() {
        return (Value::Object(Map::new()), None);
    }
    let error = match parse_json_with_repair(text) {
        Ok(value @ Value::Object(_)) => return (value, None),
        Ok(_) => "Tool arguments must be a JSON object".to_owned(),
        Err(err) => err.to_string(),
    };
    (
        Value::Object(Map::new()),
        Some(format!("{error}\n\nReceived arguments:\n{text}")),
    )
}

/// Parses tool-call arguments that may still be arriving; always returns a value (`{}` when
/// nothing usable is there), exactly as the reference's `parseStreamingJson`.
pub fn parse_streaming_json(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Map::new());
    }
    if let Ok(value) = parse_json_with_repair(text) {
        return value;
    }
    let non_null = |value: Value| match value {
        Value::Null => Value::Object(Map::new()),
        other => other,
    };
    if let Some(value) = parse_partial(text) {
        return non_null(value);
    }
    if let Some(value) = parse_partial(&repair_json(text)) {
        return non_null(value);
    }
    Value::Object(Map::new())
}

/// Parses the longest meaningful prefix of unfinished JSON (the `partial-json` package with
/// every kind allowed to be partial). `None` where that package throws.
pub fn parse_partial(text: &str) -> Option<Value> {
    if text.trim().is_empty() {
        return None;
    }
    let trimmed = trim_js(text);
    let mut parser = PartialParser {
        text: trimmed,
        bytes: trimmed.as_bytes(),
        idx: 0,
    };
    parser.parse_any().ok()
}

/// `String.prototype.trim` for the JSON whitespace the parser cares about.
fn trim_js(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
}

/// The package distinguishes "partial" from "malformed" errors; every caller here treats
/// both the same way.
struct Fail;

struct PartialParser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    idx: usize,
}

impl PartialParser<'_> {
    fn at(&self, idx: usize) -> Option<u8> {
        self.bytes.get(idx).copied()
    }

    fn rest(&self) -> &str {
        self.text.get(self.idx..).unwrap_or("")
    }

    fn skip_blank(&mut self) {
        while matches!(self.at(self.idx), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.idx += 1;
        }
    }

    /// A literal (`null`, `true`, …) present in full or as an unfinished prefix at the end.
    fn literal(&mut self, word: &str) -> bool {
        let rest = self.rest();
        if rest.starts_with(word) || (rest.len() < word.len() && word.starts_with(rest)) {
            self.idx += word.len();
            return true;
        }
        false
    }

    fn parse_any(&mut self) -> Result<Value, Fail> {
        self.skip_blank();
        let Some(byte) = self.at(self.idx) else {
            return Err(Fail);
        };
        match byte {
            b'"' => return self.parse_str().map(Value::String),
            b'{' => return Ok(self.parse_obj()),
            b'[' => return Ok(self.parse_arr()),
            _ => {}
        }
        if self.literal("null") {
            return Ok(Value::Null);
        }
        if self.literal("true") {
            return Ok(Value::Bool(true));
        }
        if self.literal("false") {
            return Ok(Value::Bool(false));
        }
        if self.literal("Infinity") {
            return Ok(Value::Null);
        }
        let rest = self.rest();
        if rest.starts_with("-Infinity")
            || (1 < rest.len() && rest.len() < 9 && "-Infinity".starts_with(rest))
        {
            self.idx += 9;
            return Ok(Value::Null);
        }
        if self.literal("NaN") {
            return Ok(Value::Null);
        }
        self.parse_num()
    }

    fn parse_str(&mut self) -> Result<String, Fail> {
        let start = self.idx;
        let mut escape = false;
        self.idx += 1;
        while let Some(byte) = self.at(self.idx) {
            if byte == b'"' && !(escape && self.at(self.idx - 1) == Some(b'\\')) {
                break;
            }
            escape = if byte == b'\\' { !escape } else { false };
            self.idx += 1;
        }
        if self.at(self.idx) == Some(b'"') {
            self.idx += 1;
            let end = self.idx - usize::from(escape);
            return json_string(self.text.get(start..end).unwrap_or(""));
        }
        // Unterminated: close it where it stops (dropping a dangling backslash).
        let end = self.idx.min(self.bytes.len()) - usize::from(escape);
        let literal = format!("{}\"", self.text.get(start..end).unwrap_or(""));
        match json_string(&literal) {
            Ok(text) => Ok(text),
            Err(Fail) => {
                let cut = self.text.rfind('\\').unwrap_or(0);
                let (from, to) = if start <= cut {
                    (start, cut)
                } else {
                    (cut, start)
                };
                json_string(&format!("{}\"", self.text.get(from..to).unwrap_or("")))
            }
        }
    }

    fn parse_obj(&mut self) -> Value {
        self.idx += 1;
        self.skip_blank();
        let mut obj = Map::new();
        while self.at(self.idx) != Some(b'}') {
            self.skip_blank();
            if self.idx >= self.bytes.len() {
                return Value::Object(obj);
            }
            let Ok(key) = self.parse_str() else {
                return Value::Object(obj);
            };
            self.skip_blank();
            self.idx += 1; // the colon
            match self.parse_any() {
                Ok(value) => {
                    obj.insert(key, value);
                }
                Err(Fail) => return Value::Object(obj),
            }
            self.skip_blank();
            if self.at(self.idx) == Some(b',') {
                self.idx += 1;
            }
        }
        self.idx += 1;
        Value::Object(obj)
    }

    fn parse_arr(&mut self) -> Value {
        self.idx += 1;
        let mut arr = Vec::new();
        while self.at(self.idx) != Some(b']') {
            let before = self.idx;
            match self.parse_any() {
                Ok(value) => arr.push(value),
                Err(Fail) => return Value::Array(arr),
            }
            // The package can loop forever on inputs that make no progress; stop instead.
            if self.idx == before {
                return Value::Array(arr);
            }
            self.skip_blank();
            if self.at(self.idx) == Some(b',') {
                self.idx += 1;
            }
        }
        self.idx += 1;
        Value::Array(arr)
    }

    fn parse_num(&mut self) -> Result<Value, Fail> {
        if self.idx == 0 {
            if self.text == "-" {
                return Err(Fail);
            }
            if let Ok(value) = json_number(self.text) {
                return Ok(value);
            }
            let cut = js_substring(self.text, 0, self.text.rfind('e'));
            return json_number(cut);
        }
        let start = self.idx;
        if self.at(self.idx) == Some(b'-') {
            self.idx += 1;
        }
        while let Some(byte) = self.at(self.idx) {
            if matches!(byte, b',' | b']' | b'}') {
                break;
            }
            self.idx += 1;
        }
        let end = self.idx.min(self.bytes.len());
        let literal = self.text.get(start..end).unwrap_or("");
        if let Ok(value) = json_number(literal) {
            return Ok(value);
        }
        if literal == "-" {
            return Err(Fail);
        }
        json_number(js_substring(self.text, start, self.text.rfind('e')))
    }
}

/// JavaScript's `substring(start, end)` where `end` may be `-1` (from `lastIndexOf`): negative
/// bounds become 0 and reversed bounds are swapped.
fn js_substring(text: &str, start: usize, end: Option<usize>) -> &str {
    let end = end.unwrap_or(0);
    let (from, to) = if start <= end {
        (start, end)
    } else {
        (end, start)
    };
    text.get(from..to).unwrap_or("")
}

fn json_string(literal: &str) -> Result<String, Fail> {
    match parse_lenient(literal.as_bytes()) {
        Ok(Value::String(text)) => Ok(text),
        _ => Err(Fail),
    }
}

/// `JSON.parse` of something expected to be a number (any JSON value is accepted, as there).
fn json_number(literal: &str) -> Result<Value, Fail> {
    parse_lenient(literal.as_bytes()).map_err(|_| Fail)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn complete_json_parses_as_is() {
        assert_eq!(
            parse_streaming_json(r#"{"path":"src","n":[1,2]}"#),
            json!({"path":"src","n":[1,2]})
        );
        assert_eq!(parse_streaming_json("  "), json!({}));
        assert_eq!(parse_streaming_json(""), json!({}));
    }

    #[test]
    fn unfinished_prefixes_parse_as_far_as_they_go() {
        assert_eq!(parse_streaming_json(r#"{"path":"sr"#), json!({"path":"sr"}));
        assert_eq!(
            parse_streaming_json(r#"{"path":"src","#),
            json!({"path":"src"})
        );
        assert_eq!(parse_streaming_json(r#"{"path":"#), json!({}));
        assert_eq!(parse_streaming_json(r#"{"a":[1,2"#), json!({"a":[1,2]}));
        assert_eq!(parse_streaming_json(r#"{"a":tr"#), json!({"a":true}));
        assert_eq!(
            parse_streaming_json(r#"{"a":{"b":nu"#),
            json!({"a":{"b":null}})
        );
        assert_eq!(parse_streaming_json(r#"{"a":"x\"#), json!({"a":"x"}));
        assert_eq!(parse_streaming_json(r#"{"a":12"#), json!({"a":12}));
        assert_eq!(parse_streaming_json(r#"{"a":1.5e"#), json!({"a":1.5}));
        assert_eq!(parse_streaming_json(r#"{"a":-"#), json!({}));
        assert_eq!(parse_streaming_json("nul"), json!({}));
        assert_eq!(parse_streaming_json("[1, 2"), json!([1, 2]));
    }

    #[test]
    fn repair_escapes_control_characters_and_bad_escapes() {
        assert_eq!(repair_json("{\"a\":\"x\ny\"}"), "{\"a\":\"x\\ny\"}");
        assert_eq!(repair_json(r#"{"a":"C:\dir"}"#), r#"{"a":"C:\\dir"}"#);
        assert_eq!(repair_json(r#"{"a":"\u00e9\q"}"#), r#"{"a":"\u00e9\\q"}"#);
        assert_eq!(
            parse_json_with_repair("{\"a\":\"tab\there\"}").unwrap(),
            json!({"a":"tab\there"})
        );
        assert!(parse_json_with_repair("{").is_err());
    }

    #[test]
    fn garbage_never_panics() {
        for text in [
            "}",
            "]",
            ":",
            ",",
            "{,",
            "[,",
            "{\"a\" 1}",
            "\"",
            "\\",
            "-",
            "{\"a\":-}",
            "[[[[",
            "é{",
            "{\"é\":\"ü",
            "1e",
            "--1",
            "{\"a\":1}}",
        ] {
            let _ = parse_streaming_json(text);
        }
    }
}
