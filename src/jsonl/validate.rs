//! A JSON validator with no depth limit and no tree: decides whether `JSON.parse` would
//! accept a line, what kind of value it holds, and which string values its top-level
//! object gives to which keys.
//!
//! The reader uses it only where `serde_json` gives up on text the reference accepts
//! (nesting deeper than `serde_json`'s 128 levels, numbers beyond the double range): such a
//! line still counts as "parseable" for the header rule, and is reported precisely.
//!
//! Invariant: no recursion on the input's nesting (memory grows with depth, the stack does
//! not); no I/O.

use crate::jsonl::value::{Cursor, JsString, ParseError};

/// The kind of a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An object.
    Object,
    /// An array.
    Array,
    /// A string.
    String,
    /// A number.
    Number,
    /// `true` or `false`.
    Bool,
    /// `null`.
    Null,
}

/// What the validator learned about a valid line.
#[derive(Debug, Clone, PartialEq)]
pub struct Outline {
    /// The top-level value's kind.
    pub kind: Kind,
    /// For a top-level object: each key whose value is a string, with that string (the
    /// last occurrence wins, as in `JSON.parse`; a later non-string value removes it).
    pub strings: Vec<(JsString, JsString)>,
}

impl Outline {
    /// Returns the top-level string value of `key`.
    pub fn string(&self, key: &str) -> Option<&JsString> {
        self.strings
            .iter()
            .find(|(name, _)| name.eq_str(key))
            .map(|(_, value)| value)
    }
}

#[derive(Clone, Copy)]
enum Container {
    Array,
    Object,
}

/// Validates `text` as one JSON value and outlines it.
pub fn outline(text: &str) -> Result<Outline, ParseError> {
    let mut cursor = Cursor::new(text);
    let mut stack: Vec<Container> = Vec::new();
    let mut kind = None;
    let mut strings: Vec<(JsString, JsString)> = Vec::new();
    // The top-level key whose value is being read (only at depth 1).
    let mut top_key: Option<JsString> = None;
    'value: loop {
        cursor.skip_ws();
        let depth = stack.len();
        let this_kind = match cursor.peek() {
            Some(b'{') => {
                cursor.pos += 1;
                cursor.skip_ws();
                if cursor.peek() == Some(b'}') {
                    cursor.pos += 1;
                    Kind::Object
                } else {
                    if depth == 0 {
                        kind = Some(Kind::Object);
                    }
                    let key = cursor.string()?;
                    cursor.skip_ws();
                    cursor.expect(b':')?;
                    if depth == 0 {
                        top_key = Some(key);
                    }
                    stack.push(Container::Object);
                    continue 'value;
                }
            }
            Some(b'[') => {
                cursor.pos += 1;
                cursor.skip_ws();
                if cursor.peek() == Some(b']') {
                    cursor.pos += 1;
                    Kind::Array
                } else {
                    if depth == 0 {
                        kind = Some(Kind::Array);
                    }
                    stack.push(Container::Array);
                    continue 'value;
                }
            }
            Some(b'"') => {
                let text = cursor.string()?;
                if depth == 1
                    && let Some(key) = top_key.take()
                {
                    strings.retain(|(name, _)| *name != key);
                    strings.push((key, text));
                }
                Kind::String
            }
            Some(b't') => {
                cursor.literal(b"true")?;
                Kind::Bool
            }
            Some(b'f') => {
                cursor.literal(b"false")?;
                Kind::Bool
            }
            Some(b'n') => {
                cursor.literal(b"null")?;
                Kind::Null
            }
            Some(b'-' | b'0'..=b'9') => {
                cursor.number()?;
                Kind::Number
            }
            _ => return Err(cursor.error()),
        };
        if depth == 0 {
            kind = Some(this_kind);
        }
        if depth == 1
            && let Some(key) = top_key.take()
        {
            // A non-string value replaces an earlier string value of the same key.
            strings.retain(|(name, _)| *name != key);
        }
        loop {
            cursor.skip_ws();
            match stack.last().copied() {
                None => {
                    if cursor.pos != cursor.bytes.len() {
                        return Err(cursor.error());
                    }
                    let kind = kind.ok_or_else(|| cursor.error())?;
                    return Ok(Outline { kind, strings });
                }
                Some(container) => match (container, cursor.peek()) {
                    (_, Some(b',')) => {
                        cursor.pos += 1;
                        if let Container::Object = container {
                            cursor.skip_ws();
                            let key = cursor.string()?;
                            cursor.skip_ws();
                            cursor.expect(b':')?;
                            if stack.len() == 1 {
                                top_key = Some(key);
                            }
                        }
                        continue 'value;
                    }
                    (Container::Array, Some(b']')) | (Container::Object, Some(b'}')) => {
                        cursor.pos += 1;
                        stack.pop();
                        if stack.len() == 1 {
                            // A container value of a top-level key just ended.
                            if let Some(key) = top_key.take() {
                                strings.retain(|(name, _)| *name != key);
                            }
                        }
                    }
                    _ => return Err(cursor.error()),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outlines_top_level_strings_at_any_depth() {
        let deep = format!(
            r#"{{"type":"message","id":"a1","parentId":null,"deep":{}1{},"id":"a2"}}"#,
            "[".repeat(5000),
            "]".repeat(5000)
        );
        let outline = outline(&deep).unwrap();
        assert_eq!(outline.kind, Kind::Object);
        assert_eq!(outline.string("type"), Some(&JsString::new("message")));
        assert_eq!(outline.string("id"), Some(&JsString::new("a2")));
        assert_eq!(outline.string("parentId"), None);
        assert_eq!(outline.string("deep"), None);
    }

    #[test]
    fn replaced_string_keys_are_forgotten() {
        let outline = outline(r#"{"id":"x","id":{"id":"inner"},"k":"v"}"#).unwrap();
        assert_eq!(outline.string("id"), None);
        assert_eq!(outline.string("k"), Some(&JsString::new("v")));
    }

    #[test]
    fn kinds_and_errors() {
        assert_eq!(outline("null").unwrap().kind, Kind::Null);
        assert_eq!(outline(" [1,{}] ").unwrap().kind, Kind::Array);
        assert_eq!(outline("{}").unwrap().kind, Kind::Object);
        assert_eq!(outline("1e400").unwrap().kind, Kind::Number);
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\":1]",
            "[1}",
            "{\"a\":1} 2",
            "{\"a\"}",
        ] {
            assert!(outline(bad).is_err(), "{bad:?}");
        }
        let unclosed = "[".repeat(100_000);
        assert!(outline(&unclosed).is_err());
    }
}
