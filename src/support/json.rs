//! JSON text as the reference writes it, and a lenient reader for what it may have written.
//!
//! The reference serialises with `JSON.stringify`, and this module is the one place that writes
//! its bytes: compact ([`to_js_string`], [`write_value`]) or indented as
//! `JSON.stringify(value, null, 2)` ([`to_js_pretty`]), for any [`JsonTree`] — serde_json's
//! `Value`, and `jsonl::JsValue`, whose strings may hold lone UTF-16 surrogates. What
//! `JSON.stringify` does, and so what is written here:
//! - object keys in JavaScript's property order: keys that are array indices (`"0"`, `"17"`,
//!   no leading zero, at most 2^32 − 2) first in ascending numeric order, then the others in
//!   insertion order (`"01"`, `"-1"`, `"1.5"` and `"4294967295"` are not indices);
//! - numbers as `Number#toString` writes the double (`1e+21`, `3` for `3.0`, `0` for `-0`,
//!   integers beyond 2^53 rounded to the nearest double: `9007199254740993` is written
//!   `9007199254740992`), non-finite numbers as `null`;
//! - strings with `"`, `\` and the control characters escaped (`\b \t \n \f \r`, else
//!   `\u00XX` in lower-case hex), lone surrogates as `\udXXX`, everything else as it is
//!   (non-ASCII, U+007F, U+2028 included).
//!
//! Nesting is followed with an explicit stack, not recursion: RPC's `get_tree` nests as deep as
//! a session is long.
//!
//! [`parse_lenient`] reads payloads that `serde_json` alone rejects: lone UTF-16 surrogate
//! escapes (`\ud83c`, which JavaScript writes for a cut emoji) and invalid UTF-8 (which Node
//! decodes to U+FFFD); it is for typed *views* only — stored bytes stay as they are.
//!
//! Invariant: imports nothing from the crate; `jsonl` implements [`JsonTree`] for its values.

use serde_json::Value;

/// A JSON value the writer can walk without knowing its type.
pub trait JsonTree: Sized {
    /// The type of an object's keys.
    type Key: JsonText + ?Sized;
    /// An object's properties in insertion order.
    type Entries<'a>: Iterator<Item = (&'a Self::Key, &'a Self)> + Clone
    where
        Self: 'a;

    /// Returns what this value is.
    fn view(&self) -> View<'_, Self>;
}

/// What one [`JsonTree`] node is.
#[derive(Debug)]
pub enum View<'a, T: JsonTree + 'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number as serde_json holds it (integer or double).
    Number(&'a serde_json::Number),
    /// A double.
    Double(f64),
    /// A string.
    String(Text<'a>),
    /// An array's items.
    Array(&'a [T]),
    /// An object's properties in insertion order (the writer orders them).
    Object(T::Entries<'a>),
}

/// The text of a string or key: UTF-8, or WTF-8 (UTF-8 that may also encode lone surrogates
/// as their 3-byte form `ED A0..BF xx`).
#[derive(Clone, Copy, Debug)]
pub enum Text<'a> {
    /// Well-formed text.
    Utf8(&'a str),
    /// Text that may hold lone surrogates.
    Wtf8(&'a [u8]),
}

impl Text<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Self::Utf8(text) => text.as_bytes(),
            Self::Wtf8(bytes) => bytes,
        }
    }
}

/// A string type the writer can escape.
pub trait JsonText {
    /// Returns the text.
    fn text(&self) -> Text<'_>;
}

impl JsonText for String {
    fn text(&self) -> Text<'_> {
        Text::Utf8(self)
    }
}

impl JsonText for str {
    fn text(&self) -> Text<'_> {
        Text::Utf8(self)
    }
}

impl JsonTree for Value {
    type Key = String;
    type Entries<'a> = serde_json::map::Iter<'a>;

    fn view(&self) -> View<'_, Self> {
        match self {
            Value::Null => View::Null,
            Value::Bool(flag) => View::Bool(*flag),
            Value::Number(number) => View::Number(number),
            Value::String(text) => View::String(Text::Utf8(text)),
            Value::Array(items) => View::Array(items),
            Value::Object(map) => View::Object(map.iter()),
        }
    }
}

/// Returns the array index a property key denotes (`"0"`, `"42"`: digits, no leading zero,
/// at most 2^32 − 2), as JavaScript's property order defines it; `None` for any other key.
pub fn array_index(key: &[u8]) -> Option<u32> {
    if key.is_empty() || key.len() > 10 || !key.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if key.len() > 1 && key[0] == b'0' {
        return None;
    }
    let value = key
        .iter()
        .fold(0u64, |acc, digit| acc * 10 + u64::from(digit - b'0'));
    u32::try_from(value).ok().filter(|index| *index != u32::MAX)
}

/// Returns `entries` in JavaScript's property order: array-index keys ascending, then the
/// others in the order given.
pub fn js_property_order<'a, K: JsonText + ?Sized + 'a, V>(
    entries: impl Iterator<Item = (&'a K, V)>,
) -> Vec<(&'a K, V)> {
    let mut indexed = Vec::new();
    let mut named = Vec::new();
    for (key, value) in entries {
        match array_index(key.text().bytes()) {
            Some(index) => indexed.push((index, key, value)),
            None => named.push((key, value)),
        }
    }
    // Indices are unique keys, so the sort needs no stability.
    indexed.sort_unstable_by_key(|(index, _, _)| *index);
    indexed
        .into_iter()
        .map(|(_, key, value)| (key, value))
        .chain(named)
        .collect()
}

/// Serialises `value` exactly as JavaScript's `JSON.stringify(value)` would.
pub fn to_js_string<T: JsonTree>(value: &T) -> String {
    let mut out = String::with_capacity(128);
    write_value(&mut out, value);
    out
}

/// Serialises `value` exactly as JavaScript's `JSON.stringify(value, null, 2)` would.
pub fn to_js_pretty<T: JsonTree>(value: &T) -> String {
    let mut out = String::with_capacity(128);
    write_tree(&mut out, value, Some("  "));
    out
}

/// Appends `value` to `out` as `JSON.stringify` would write it.
pub fn write_value<T: JsonTree>(out: &mut String, value: &T) {
    write_tree(out, value, None);
}

/// An object's properties as the writer visits them.
enum Properties<'a, T: JsonTree + 'a> {
    /// No key is an array index: insertion order is JavaScript's order.
    InOrder(T::Entries<'a>),
    /// Reordered: array indices first.
    Reordered(std::vec::IntoIter<(&'a T::Key, &'a T)>),
}

impl<'a, T: JsonTree + 'a> Iterator for Properties<'a, T> {
    type Item = (&'a T::Key, &'a T);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::InOrder(entries) => entries.next(),
            Self::Reordered(entries) => entries.next(),
        }
    }
}

enum Open<'a, T: JsonTree + 'a> {
    Array(std::slice::Iter<'a, T>),
    Object(Properties<'a, T>),
}

/// Writes `value`; `gap` is `JSON.stringify`'s third argument (`None`: compact).
fn write_tree<T: JsonTree>(out: &mut String, value: &T, gap: Option<&str>) {
    let newline = |out: &mut String, depth: usize| {
        if let Some(gap) = gap {
            out.push('\n');
            for _ in 0..depth {
                out.push_str(gap);
            }
        }
    };
    // Each open container with whether its first member is still to come.
    let mut stack: Vec<(Open<'_, T>, bool)> = Vec::new();
    let mut next = Some(value);
    loop {
        if let Some(value) = next.take() {
            match value.view() {
                View::Null => out.push_str("null"),
                View::Bool(true) => out.push_str("true"),
                View::Bool(false) => out.push_str("false"),
                View::Number(number) => write_number(out, number),
                View::Double(double) => write_f64(out, double),
                View::String(text) => write_text(out, text),
                // `JSON.stringify` writes empty containers without a line break.
                View::Array([]) => out.push_str("[]"),
                View::Array(items) => {
                    out.push('[');
                    stack.push((Open::Array(items.iter()), true));
                }
                View::Object(entries) => {
                    let mut keys = entries.clone().map(|(key, _)| key).peekable();
                    if keys.peek().is_none() {
                        out.push_str("{}");
                    } else {
                        let reorder = keys.any(|key| array_index(key.text().bytes()).is_some());
                        let properties = if reorder {
                            Properties::Reordered(js_property_order(entries).into_iter())
                        } else {
                            Properties::InOrder(entries)
                        };
                        out.push('{');
                        stack.push((Open::Object(properties), true));
                    }
                }
            }
        }
        let depth = stack.len();
        let Some((open, first)) = stack.last_mut() else {
            return;
        };
        let member = match open {
            Open::Array(items) => items.next().map(|item| (None, item)),
            Open::Object(properties) => properties.next().map(|(key, item)| (Some(key), item)),
        };
        match member {
            Some((key, item)) => {
                if !*first {
                    out.push(',');
                }
                *first = false;
                newline(out, depth);
                if let Some(key) = key {
                    write_text(out, key.text());
                    out.push(':');
                    if gap.is_some() {
                        out.push(' ');
                    }
                }
                next = Some(item);
            }
            None => {
                let close = match open {
                    Open::Array(_) => ']',
                    Open::Object(_) => '}',
                };
                stack.pop();
                newline(out, depth - 1);
                out.push(close);
            }
        }
    }
}

/// Appends a number in JavaScript's `Number#toString` form: every JSON number is a double
/// there, so integers beyond 2^53 are written as the double they round to.
pub fn write_number(out: &mut String, number: &serde_json::Number) {
    const EXACT: u64 = 1 << 53;
    if let Some(int) = number.as_i64()
        && int.unsigned_abs() <= EXACT
    {
        out.push_str(&int.to_string());
    } else if let Some(uint) = number.as_u64()
        && uint <= EXACT
    {
        out.push_str(&uint.to_string());
    } else if let Some(float) = number.as_f64() {
        write_f64(out, float);
    } else {
        out.push_str("null");
    }
}

/// Appends an `f64` in JavaScript's `Number#toString` form (`null` for non-finite values,
/// as `JSON.stringify` writes them).
pub fn write_f64(out: &mut String, float: f64) {
    if float.is_finite() {
        out.push_str(ryu_js::Buffer::new().format_finite(float));
    } else {
        out.push_str("null");
    }
}

/// What `JSON.stringify` writes for each byte: 0 = the byte itself, `u` = `\u00XX`, any other
/// value = a backslash and that letter (`"`, `\\`, `b`, `t`, `n`, `f`, `r`).
const ESCAPES: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = b'u';
        byte += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `\uXXXX` for one UTF-16 code unit.
fn push_unit_escape(out: &mut String, unit: u32) {
    out.push_str("\\u");
    for shift in [12, 8, 4, 0] {
        out.push(char::from(HEX[((unit >> shift) & 0xF) as usize]));
    }
}

/// Appends a string literal escaped as `JSON.stringify` escapes it.
pub fn write_string(out: &mut String, text: &str) {
    out.reserve(text.len() + 2);
    out.push('"');
    write_escaped(out, text);
    out.push('"');
}

/// Appends the escaped characters of well-formed text (no quotes).
fn write_escaped(out: &mut String, text: &str) {
    let bytes = text.as_bytes();
    let mut start = 0;
    for (index, &byte) in bytes.iter().enumerate() {
        let escape = ESCAPES[usize::from(byte)];
        if escape == 0 {
            continue;
        }
        // Escaped bytes are ASCII, so `start..index` falls on character boundaries.
        out.push_str(&text[start..index]);
        if escape == b'u' {
            push_unit_escape(out, u32::from(byte));
        } else {
            out.push('\\');
            out.push(char::from(escape));
        }
        start = index + 1;
    }
    out.push_str(&text[start..]);
}

/// Appends a string literal of either kind of text.
fn write_text(out: &mut String, text: Text<'_>) {
    let bytes = match text {
        Text::Utf8(text) => return write_string(out, text),
        Text::Wtf8(bytes) => bytes,
    };
    out.reserve(bytes.len() + 2);
    out.push('"');
    // Between lone surrogates the bytes are UTF-8; each surrogate is written as its escape.
    let mut start = 0;
    let mut idx = 0;
    while idx < bytes.len() {
        let surrogate = bytes[idx] == 0xED && bytes.get(idx + 1).is_some_and(|next| *next >= 0xA0);
        if !surrogate {
            idx += 1;
            continue;
        }
        write_escaped(out, &String::from_utf8_lossy(&bytes[start..idx]));
        // ED (A0..BF) (80..BF) encodes U+D800..U+DFFF.
        let second = u32::from(bytes[idx + 1] & 0x3F);
        let third = u32::from(bytes.get(idx + 2).copied().unwrap_or(0x80) & 0x3F);
        push_unit_escape(out, 0xD000 | (second << 6) | third);
        idx = (idx + 3).min(bytes.len());
        start = idx;
    }
    write_escaped(out, &String::from_utf8_lossy(&bytes[start..]));
    out.push('"');
}

/// A stored JSON line (an entry's payload, valid JSON when it was stored) as JSON text for
/// output: its bytes as they are when they are UTF-8 with no surrogate escape — what the
/// reference's `JSON.stringify` or pi's writer wrote — else re-serialised as
/// [`parse_lenient`] reads it (invalid UTF-8 decoded lossily, a lone surrogate as U+FFFD);
/// `None` when it is not JSON at all.
pub fn stored_json_text(bytes: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    if let Ok(text) = std::str::from_utf8(bytes)
        && !has_surrogate_escape(bytes)
    {
        return Some(std::borrow::Cow::Borrowed(text));
    }
    parse_lenient(bytes)
        .ok()
        .map(|value| std::borrow::Cow::Owned(to_js_string(&value)))
}

/// Whether `bytes` hold `\uD800`–`\uDFFF` (either case) anywhere (an escaped backslash
/// before `ud8` counts too: the slow path is right for it as well).
fn has_surrogate_escape(bytes: &[u8]) -> bool {
    memchr::memmem::find_iter(bytes, b"\\u").any(|at| {
        matches!(bytes.get(at + 2..at + 4), Some([d, high])
            if d.eq_ignore_ascii_case(&b'd')
                && matches!(high.to_ascii_lowercase(), b'8'..=b'9' | b'a'..=b'f'))
    })
}

/// Parses JSON bytes into a `Value`, tolerating lone surrogate escapes and invalid UTF-8.
///
/// A lone surrogate escape becomes U+FFFD and invalid UTF-8 is decoded lossily, as Node
/// decodes a file; everything else must be valid JSON.
pub fn parse_lenient(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(value),
        Err(first_error) => {
            let text = String::from_utf8_lossy(bytes);
            let repaired = replace_lone_surrogates(&text);
            match serde_json::from_str(&repaired) {
                Ok(value) => Ok(value),
                Err(_) => Err(first_error),
            }
        }
    }
}

/// Parses JSON bytes into `T` with the same tolerance as [`parse_lenient`].
pub fn from_slice_lenient<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
) -> Result<T, serde_json::Error> {
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(value),
        Err(first_error) => {
            let text = String::from_utf8_lossy(bytes);
            let repaired = replace_lone_surrogates(&text);
            serde_json::from_str(&repaired).map_err(|_| first_error)
        }
    }
}

/// Rewrites every unpaired `\uD800`–`\uDFFF` escape in JSON text as `\ufffd`.
fn replace_lone_surrogates(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut idx = 0;
    let mut copied = 0;
    while idx < bytes.len() {
        if bytes[idx] != b'\\' {
            idx += 1;
            continue;
        }
        if bytes.get(idx + 1) != Some(&b'u') {
            idx += 2;
            continue;
        }
        let Some(unit) = hex4(bytes, idx + 2) else {
            idx += 2;
            continue;
        };
        if (0xD800..0xDC00).contains(&unit) {
            let low = if bytes.get(idx + 6) == Some(&b'\\') && bytes.get(idx + 7) == Some(&b'u') {
                hex4(bytes, idx + 8)
            } else {
                None
            };
            if matches!(low, Some(low) if (0xDC00..0xE000).contains(&low)) {
                idx += 12;
                continue;
            }
        } else if !(0xDC00..0xE000).contains(&unit) {
            idx += 6;
            continue;
        }
        out.push_str(&text[copied..idx]);
        out.push_str("\\ufffd");
        idx += 6;
        copied = idx;
    }
    out.push_str(&text[copied..]);
    out
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    let text = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(text, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stored_json_text_keeps_clean_bytes_and_reserialises_the_rest() {
        let clean = br#"{"a":"caf\u00e9 \u2028","b":[1,2.5]}"#;
        assert!(matches!(
            stored_json_text(clean),
            Some(std::borrow::Cow::Borrowed(text)) if text.as_bytes() == clean
        ));
        // A lone surrogate escape, either case: as parse_lenient reads it.
        for lone in [&br#"{"a":"x\ud800y"}"#[..], br#"{"a":"x\uDBFFy"}"#] {
            assert_eq!(
                stored_json_text(lone).unwrap(),
                to_js_string(&parse_lenient(lone).unwrap())
            );
        }
        // Invalid UTF-8, decoded lossily.
        let invalid = b"{\"a\":\"\xff\"}";
        assert_eq!(stored_json_text(invalid).unwrap(), "{\"a\":\"\u{fffd}\"}");
        assert_eq!(stored_json_text(b"not json\xff"), None);
        assert!(!has_surrogate_escape(br#"\u00d8 \ud7ff \\"#));
        assert!(has_surrogate_escape(br#"\udc00"#));
    }

    #[test]
    fn numbers_follow_javascript() {
        let value: Value = serde_json::from_str(
            r#"[1e21, 5e-324, 1.7976931348623157e308, 0.30000000000000004, -0.0, 3.0, 12, 1e-7, 123456789012345680000]"#,
        )
        .unwrap();
        assert_eq!(
            to_js_string(&value),
            "[1e+21,5e-324,1.7976931348623157e+308,0.30000000000000004,0,3,12,1e-7,123456789012345680000]"
        );
    }

    #[test]
    fn strings_escape_like_json_stringify() {
        let value = json!({"k": "a\"b\\c\n\t\u{1}\u{7f}é\u{2028}"});
        assert_eq!(
            to_js_string(&value),
            "{\"k\":\"a\\\"b\\\\c\\n\\t\\u0001\u{7f}é\u{2028}\"}"
        );
    }

    #[test]
    fn every_character_below_u0100_escapes_as_node_writes_it() {
        // What Node 20 prints for JSON.stringify(String.fromCharCode(c)), c < 0x100: the seven
        // short escapes, \u00xx (lower-case hex) for the other controls, the rest verbatim.
        for code in 0u32..0x100 {
            let c = char::from_u32(code).unwrap();
            let mut out = String::new();
            write_string(&mut out, &format!("a{c}b"));
            let expected = match c {
                '"' => "\\\"".to_owned(),
                '\\' => "\\\\".to_owned(),
                '\u{8}' => "\\b".to_owned(),
                '\t' => "\\t".to_owned(),
                '\n' => "\\n".to_owned(),
                '\u{c}' => "\\f".to_owned(),
                '\r' => "\\r".to_owned(),
                _ if code < 0x20 => format!("\\u{code:04x}"),
                c => c.to_string(),
            };
            assert_eq!(out, format!("\"a{expected}b\""), "U+{code:04X}");
        }
    }

    // The expected texts below are what Node 20 prints for the same input:
    // `JSON.stringify(JSON.parse(input))` and `JSON.stringify(JSON.parse(input), null, 2)`.
    const KEYS: &str = r#"{"b":1,"2":2,"a":3,"1":4,"01":5,"4294967295":6,"4294967294":7,"-1":8,"1.5":9,"9007199254740993":10,"0":11,"é":{"10":1,"9":2,"z":3}}"#;

    #[test]
    fn integer_like_keys_come_first_as_in_javascript() {
        let value: Value = serde_json::from_str(KEYS).unwrap();
        assert_eq!(
            to_js_string(&value),
            r#"{"0":11,"1":4,"2":2,"4294967294":7,"b":1,"a":3,"01":5,"4294967295":6,"-1":8,"1.5":9,"9007199254740993":10,"é":{"9":2,"10":1,"z":3}}"#
        );
        assert_eq!(array_index(b"0"), Some(0));
        assert_eq!(array_index(b"4294967294"), Some(u32::MAX - 1));
        for key in [
            "",
            "01",
            "-1",
            "+1",
            "1.5",
            "1e3",
            " 1",
            "4294967295",
            "99999999999",
        ] {
            assert_eq!(array_index(key.as_bytes()), None, "{key:?}");
        }
    }

    #[test]
    fn pretty_output_is_json_stringify_with_two_spaces() {
        let value: Value = serde_json::from_str(KEYS).unwrap();
        assert_eq!(
            to_js_pretty(&value),
            "{\n  \"0\": 11,\n  \"1\": 4,\n  \"2\": 2,\n  \"4294967294\": 7,\n  \"b\": 1,\n  \"a\": 3,\n  \"01\": 5,\n  \"4294967295\": 6,\n  \"-1\": 8,\n  \"1.5\": 9,\n  \"9007199254740993\": 10,\n  \"é\": {\n    \"9\": 2,\n    \"10\": 1,\n    \"z\": 3\n  }\n}"
        );
        assert_eq!(
            to_js_pretty(&json!({"a": [], "b": {}, "c": [{}], "d": [1, "x\u{1}"], "e": 1e21})),
            "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    {}\n  ],\n  \"d\": [\n    1,\n    \"x\\u0001\"\n  ],\n  \"e\": 1e+21\n}"
        );
        assert_eq!(
            to_js_pretty(&json!({"a": [1, {}, []], "b": "x\u{1}", "c": 1e21})),
            "{\n  \"a\": [\n    1,\n    {},\n    []\n  ],\n  \"b\": \"x\\u0001\",\n  \"c\": 1e+21\n}"
        );
        assert_eq!(to_js_pretty(&json!([])), "[]");
        assert_eq!(to_js_pretty(&json!("s")), "\"s\"");
    }

    #[test]
    fn integers_beyond_two_to_the_53_are_written_as_doubles() {
        let value: Value = serde_json::from_str(
            "[1152921504606846977, 9007199254740993, 9007199254740992, -1152921504606846977, -9007199254740993, 18446744073709551615]",
        )
        .unwrap();
        assert_eq!(
            to_js_string(&value),
            "[1152921504606847000,9007199254740992,9007199254740992,-1152921504606847000,-9007199254740992,18446744073709552000]"
        );
    }

    /// A tree whose strings are WTF-8, as `jsonl::JsValue`'s are.
    struct Wtf8(Vec<u8>);

    impl JsonText for Wtf8 {
        fn text(&self) -> Text<'_> {
            Text::Wtf8(&self.0)
        }
    }

    enum Tree {
        Text(Wtf8),
        Object(Vec<(Wtf8, Tree)>),
    }

    fn property((key, value): &(Wtf8, Tree)) -> (&Wtf8, &Tree) {
        (key, value)
    }

    impl JsonTree for Tree {
        type Key = Wtf8;
        type Entries<'a> = std::iter::Map<
            std::slice::Iter<'a, (Wtf8, Tree)>,
            fn(&'a (Wtf8, Tree)) -> (&'a Wtf8, &'a Tree),
        >;

        fn view(&self) -> View<'_, Self> {
            match self {
                Self::Text(text) => View::String(text.text()),
                Self::Object(entries) => View::Object(entries.iter().map(property as fn(_) -> _)),
            }
        }
    }

    #[test]
    fn lone_surrogates_are_written_as_escapes() {
        // "\ud83c" alone, a pair written as the character, "\udf89\ud83c" reversed.
        let tree = Tree::Object(vec![
            (
                Wtf8(b"\xed\xa0\x80".to_vec()),
                Tree::Text(Wtf8(
                    b"a\xed\xa0\xbc\"\xf0\x9f\x8e\x89\xed\xbe\x89\xed\xa0\xbc\n".to_vec(),
                )),
            ),
            (Wtf8(b"1".to_vec()), Tree::Object(Vec::new())),
        ]);
        assert_eq!(
            to_js_string(&tree),
            "{\"1\":{},\"\\ud800\":\"a\\ud83c\\\"🎉\\udf89\\ud83c\\n\"}"
        );
    }

    #[test]
    fn deep_nesting_is_written_without_recursion() {
        let nested = |depth: usize| {
            let mut value = json!(1);
            for _ in 0..depth {
                value = Value::Array(vec![value]);
            }
            value
        };
        let deep = nested(100_000);
        assert_eq!(to_js_string(&deep).len(), 200_001);
        // Dropping such a value recurses in serde_json; leak it in this test only.
        std::mem::forget(deep);
        // Indented output grows with the square of the depth, so it is checked shallower.
        let pretty = to_js_pretty(&nested(3_000));
        assert!(pretty.starts_with("[\n  [\n    ["));
        assert!(pretty.ends_with("\n  ]\n]"));
    }

    #[test]
    fn lenient_parse_accepts_lone_surrogates() {
        let value = parse_lenient(br#"{"t":"x\ud83c y \ud83c\udf89 \\ud83c"}"#).unwrap();
        assert_eq!(value["t"], "x\u{fffd} y 🎉 \\ud83c");
        assert!(parse_lenient(b"{not json").is_err());
    }
}
