//! JSON text as the reference writes it, and a lenient reader for what it may have written.
//!
//! The reference serialises with `JSON.stringify`: compact, non-ASCII left as is, numbers in
//! JavaScript's `Number#toString` form (`1e+21`, `3` for `3.0`). [`to_js_string`] produces the
//! same text from a `serde_json::Value`, so lines this project creates match the reference's
//! bytes. [`parse_lenient`] reads payloads that `serde_json` alone rejects: lone UTF-16
//! surrogate escapes (`\ud83c`, which JavaScript writes for a cut emoji) and invalid UTF-8
//! (which Node decodes to U+FFFD); it is for typed *views* only — stored bytes stay as they are.

use serde_json::Value;

/// Serialises `value` exactly as JavaScript's `JSON.stringify(value)` would.
pub fn to_js_string(value: &Value) -> String {
    let mut out = String::with_capacity(128);
    write_value(&mut out, value);
    out
}

/// Appends `value` to `out` as `JSON.stringify` would write it. Nesting is followed with an
/// explicit stack, not recursion: RPC's `get_tree` nests as deep as a session is long.
pub fn write_value(out: &mut String, value: &Value) {
    enum Open<'a> {
        Array(std::slice::Iter<'a, Value>),
        Object(serde_json::map::Iter<'a>),
    }
    let mut stack: Vec<(Open<'_>, bool)> = Vec::new();
    let mut next = Some(value);
    loop {
        if let Some(value) = next.take() {
            match value {
                Value::Null => out.push_str("null"),
                Value::Bool(true) => out.push_str("true"),
                Value::Bool(false) => out.push_str("false"),
                Value::Number(number) => write_number(out, number),
                Value::String(text) => write_string(out, text),
                Value::Array(items) => {
                    out.push('[');
                    stack.push((Open::Array(items.iter()), true));
                }
                Value::Object(map) => {
                    out.push('{');
                    stack.push((Open::Object(map.iter()), true));
                }
            }
        }
        let Some((open, first)) = stack.last_mut() else {
            return;
        };
        match open {
            Open::Array(items) => match items.next() {
                Some(item) => {
                    if !*first {
                        out.push(',');
                    }
                    *first = false;
                    next = Some(item);
                }
                None => {
                    out.push(']');
                    stack.pop();
                }
            },
            Open::Object(entries) => match entries.next() {
                Some((key, item)) => {
                    if !*first {
                        out.push(',');
                    }
                    *first = false;
                    write_string(out, key);
                    out.push(':');
                    next = Some(item);
                }
                None => {
                    out.push('}');
                    stack.pop();
                }
            },
        }
    }
}

/// Appends a number in JavaScript's `Number#toString` form.
pub fn write_number(out: &mut String, number: &serde_json::Number) {
    if let Some(int) = number.as_i64() {
        out.push_str(&int.to_string());
    } else if let Some(uint) = number.as_u64() {
        // Integers beyond 2^53 lose precision in JavaScript; print what JavaScript would.
        if uint > (1u64 << 53) {
            out.push_str(ryu_js::Buffer::new().format(uint as f64));
        } else {
            out.push_str(&uint.to_string());
        }
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

/// Appends a string literal escaped as `JSON.stringify` escapes it.
pub fn write_string(out: &mut String, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(text.len() + 2);
    out.push('"');
    let bytes = text.as_bytes();
    let mut start = 0;
    for (index, &byte) in bytes.iter().enumerate() {
        let escape = ESCAPES[usize::from(byte)];
        if escape == 0 {
            continue;
        }
        // Escaped bytes are ASCII, so `start..index` falls on character boundaries.
        out.push_str(&text[start..index]);
        out.push('\\');
        if escape == b'u' {
            out.push_str("u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        } else {
            out.push(char::from(escape));
        }
        start = index + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
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

    #[test]
    fn lenient_parse_accepts_lone_surrogates() {
        let value = parse_lenient(br#"{"t":"x\ud83c y \ud83c\udf89 \\ud83c"}"#).unwrap();
        assert_eq!(value["t"], "x\u{fffd} y 🎉 \\ud83c");
        assert!(parse_lenient(b"{not json").is_err());
    }
}
