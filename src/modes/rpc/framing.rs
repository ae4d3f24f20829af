//! Strict JSONL framing for RPC mode: records are separated by LF only. A `\r` before the LF
//! is dropped, and U+2028 / U+2029 (which Node's `readline` would treat as line breaks) stay
//! inside their record. Output records are `JSON.stringify`-exact text plus one LF.
//!
//! Invariant: splitting happens on bytes, before UTF-8 decoding, so a multi-byte character cut
//! across two reads is never split or replaced (LF cannot occur inside a UTF-8 sequence).

use serde_json::Value;

use crate::support::json::to_js_string;

/// Splits a byte stream into LF-terminated records.
#[derive(Debug, Default)]
pub struct LineSplitter {
    buffer: Vec<u8>,
}

impl LineSplitter {
    /// Returns an empty splitter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes and returns the records they complete, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut res = Vec::new();
        let mut start = 0;
        for (idx, byte) in bytes.iter().enumerate() {
            if *byte == b'\n' {
                self.buffer.extend_from_slice(&bytes[start..idx]);
                res.push(decode(&std::mem::take(&mut self.buffer)));
                start = idx + 1;
            }
        }
        self.buffer.extend_from_slice(&bytes[start..]);
        res
    }

    /// Returns the unterminated last record at the end of the stream, if any (the reference
    /// handles it like a complete one).
    pub fn finish(&mut self) -> Option<String> {
        if self.buffer.is_empty() {
            return None;
        }
        Some(decode(&std::mem::take(&mut self.buffer)))
    }
}

/// Decodes one record: invalid UTF-8 becomes U+FFFD (as Node's `StringDecoder` does), and one
/// trailing `\r` is dropped.
fn decode(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    String::from_utf8_lossy(bytes).into_owned()
}

/// Serializes one output record: `JSON.stringify(value) + "\n"`.
pub fn serialize_record(value: &Value) -> String {
    let mut line = to_js_string(value);
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_lf_only_and_keeps_unicode_separators_inside_records() {
        let mut splitter = LineSplitter::new();
        let input = "{\"a\":\"x\u{2028}y\u{2029}z\"}\n{\"b\":1}\r\npartial";
        let lines = splitter.push(input.as_bytes());
        assert_eq!(lines, vec!["{\"a\":\"x\u{2028}y\u{2029}z\"}", "{\"b\":1}"]);
        assert_eq!(splitter.finish().as_deref(), Some("partial"));
        assert_eq!(splitter.finish(), None);
    }

    #[test]
    fn a_character_cut_across_reads_is_reassembled() {
        let mut splitter = LineSplitter::new();
        let bytes = "é\u{2028}\n".as_bytes();
        let mut lines = Vec::new();
        for byte in bytes {
            lines.extend(splitter.push(std::slice::from_ref(byte)));
        }
        assert_eq!(lines, vec!["é\u{2028}"]);
    }

    #[test]
    fn only_one_trailing_carriage_return_is_dropped_and_empty_records_are_kept() {
        let mut splitter = LineSplitter::new();
        let lines = splitter.push(b"a\r\r\n\n\rb\n");
        assert_eq!(lines, vec!["a\r", "", "\rb"]);
    }

    #[test]
    fn records_are_js_json_plus_lf() {
        let value = serde_json::json!({"type": "x", "text": "a\u{2028}b", "n": 1.5});
        assert_eq!(
            serialize_record(&value),
            "{\"type\":\"x\",\"text\":\"a\u{2028}b\",\"n\":1.5}\n"
        );
    }
}
