//! Streaming output bookkeeping for `bash` (`spec/tools.md` §4.3): a streaming UTF-8 decoder
//! with replacement ([`Utf8Stream`]) and the bounded-memory [`OutputAccumulator`] that keeps
//! global counters, a decoded tail for snapshots, and the raw bytes that still have to reach
//! the full-output temp file.
//!
//! The accumulator does no I/O: the caller asks [`OutputAccumulator::wants_temp_file`], opens
//! the file, and writes what [`OutputAccumulator::take_unpersisted`] hands over (raw, undecoded
//! bytes, in arrival order).
//!
//! Invariants: memory stays bounded (the tail is cut to 2 × 50 KB once it passes 4 × 50 KB;
//! unpersisted raw bytes are handed over once the thresholds are passed); counters cover the
//! whole run.

use crate::support::truncate::{TruncatedBy, Truncation, truncate_tail};

/// WHATWG `TextDecoder` in streaming mode: invalid sequences become U+FFFD (maximal subparts),
/// an incomplete sequence at a chunk end waits for the next chunk.
#[derive(Debug, Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Decodes the next chunk, keeping an incomplete trailing sequence for later.
    pub fn decode(&mut self, chunk: &[u8]) -> String {
        self.decode_inner(chunk, false)
    }

    /// Flushes: an incomplete trailing sequence becomes U+FFFD.
    pub fn finish(&mut self) -> String {
        self.decode_inner(&[], true)
    }

    fn decode_inner(&mut self, chunk: &[u8], last: bool) -> String {
        let mut buffer = std::mem::take(&mut self.pending);
        buffer.extend_from_slice(chunk);
        let mut out = String::with_capacity(buffer.len());
        let mut rest: &[u8] = &buffer;
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    break;
                }
                Err(error) => {
                    let valid = error.valid_up_to();
                    // The prefix up to `valid` was just checked to be UTF-8.
                    out.push_str(&String::from_utf8_lossy(&rest[..valid]));
                    match error.error_len() {
                        Some(len) => {
                            out.push('\u{fffd}');
                            rest = &rest[valid + len..];
                        }
                        None => {
                            if last {
                                out.push('\u{fffd}');
                            } else {
                                self.pending = rest[valid..].to_vec();
                            }
                            break;
                        }
                    }
                }
            }
        }
        out
    }
}

/// A snapshot of the output: the text to show and its truncation record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputSnapshot {
    /// The kept text (the last lines).
    pub content: String,
    /// Truncation over the whole run (`truncated`, `totalLines`, `totalBytes` are global).
    pub truncation: Truncation,
}

/// Tracks streamed output with bounded memory (the reference's `OutputAccumulator`).
#[derive(Debug)]
pub struct OutputAccumulator {
    max_lines: usize,
    max_bytes: usize,
    max_rolling_bytes: usize,
    decoder: Utf8Stream,
    unpersisted: Vec<u8>,
    tail: String,
    tail_starts_at_line_boundary: bool,
    total_raw_bytes: usize,
    total_decoded_bytes: usize,
    total_lines: usize,
    current_line_bytes: usize,
    finished: bool,
}

impl OutputAccumulator {
    /// Returns an accumulator with the given limits (the tools use 2000 lines / 50 KB).
    pub fn new(max_lines: usize, max_bytes: usize) -> Self {
        Self {
            max_lines,
            max_bytes,
            max_rolling_bytes: (max_bytes * 2).max(1),
            decoder: Utf8Stream::default(),
            unpersisted: Vec::new(),
            tail: String::new(),
            tail_starts_at_line_boundary: true,
            total_raw_bytes: 0,
            total_decoded_bytes: 0,
            total_lines: 1,
            current_line_bytes: 0,
            finished: false,
        }
    }

    /// Adds a raw chunk (ignored after [`finish`](Self::finish)).
    pub fn append(&mut self, data: &[u8]) {
        if self.finished {
            return;
        }
        self.total_raw_bytes += data.len();
        let text = self.decoder.decode(data);
        self.append_decoded(&text);
        self.unpersisted.extend_from_slice(data);
    }

    /// Flushes the decoder; later appends are ignored.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        let text = self.decoder.finish();
        self.append_decoded(&text);
    }

    /// True once the output passed a limit (raw or decoded bytes over 50 KB, or more than
    /// 2000 lines): the complete raw output must go to a temp file.
    pub fn wants_temp_file(&self) -> bool {
        self.total_raw_bytes > self.max_bytes
            || self.total_decoded_bytes > self.max_bytes
            || self.total_lines > self.max_lines
    }

    /// Hands over the raw bytes not yet given to the temp file.
    pub fn take_unpersisted(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.unpersisted)
    }

    /// Returns the byte length of the current (last) line.
    pub fn last_line_bytes(&self) -> usize {
        self.current_line_bytes
    }

    /// Returns the current snapshot (see the module docs of `bash` for its use).
    pub fn snapshot(&self) -> OutputSnapshot {
        let tail = truncate_tail(self.snapshot_text(), self.max_lines, self.max_bytes);
        let truncated =
            self.total_lines > self.max_lines || self.total_decoded_bytes > self.max_bytes;
        let truncated_by = if truncated {
            Some(
                tail.truncated_by
                    .unwrap_or(if self.total_decoded_bytes > self.max_bytes {
                        TruncatedBy::Bytes
                    } else {
                        TruncatedBy::Lines
                    }),
            )
        } else {
            None
        };
        let truncation = Truncation {
            truncated,
            truncated_by,
            total_lines: self.total_lines,
            total_bytes: self.total_decoded_bytes,
            max_lines: self.max_lines,
            max_bytes: self.max_bytes,
            ..tail
        };
        OutputSnapshot {
            content: truncation.content.clone(),
            truncation,
        }
    }

    fn append_decoded(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let bytes = text.len();
        self.total_decoded_bytes += bytes;
        self.tail.push_str(text);
        if self.tail.len() > self.max_rolling_bytes * 2 {
            self.trim_tail();
        }
        match text.rfind('\n') {
            None => self.current_line_bytes += bytes,
            Some(last) => {
                self.total_lines += text.matches('\n').count();
                self.current_line_bytes = text.len() - last - 1;
            }
        }
    }

    fn trim_tail(&mut self) {
        if self.tail.len() <= self.max_rolling_bytes {
            return;
        }
        let mut start = self.tail.len() - self.max_rolling_bytes;
        while !self.tail.is_char_boundary(start) {
            start += 1;
        }
        if start > 0 {
            self.tail_starts_at_line_boundary = self.tail.as_bytes()[start - 1] == b'\n';
        }
        self.tail = self.tail[start..].to_owned();
    }

    fn snapshot_text(&self) -> &str {
        if self.tail_starts_at_line_boundary {
            return &self.tail;
        }
        match self.tail.find('\n') {
            Some(first) => &self.tail[first + 1..],
            None => &self.tail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_decoder_joins_split_sequences_and_replaces_bad_bytes() {
        let mut decoder = Utf8Stream::default();
        let euro = "€".as_bytes();
        assert_eq!(decoder.decode(&euro[..1]), "");
        assert_eq!(decoder.decode(&euro[1..]), "€");
        assert_eq!(decoder.decode(b"a\xffb"), "a\u{fffd}b");
        assert_eq!(decoder.decode(&euro[..2]), "");
        assert_eq!(decoder.finish(), "\u{fffd}");
    }

    #[test]
    fn counters_and_snapshot_follow_the_reference() {
        let mut acc = OutputAccumulator::new(2000, 51200);
        let text: String = (1..=3000).map(|n| format!("{n}\n")).collect();
        for chunk in text.as_bytes().chunks(777) {
            acc.append(chunk);
        }
        acc.finish();
        let snap = acc.snapshot();
        assert!(snap.truncation.truncated);
        assert_eq!(snap.truncation.total_lines, 3001);
        assert_eq!(snap.truncation.output_lines, 2000);
        assert!(snap.content.starts_with("1002\n"));
        assert!(acc.wants_temp_file());
        assert_eq!(acc.take_unpersisted().len(), text.len());
    }

    #[test]
    fn a_long_single_line_keeps_its_last_bytes() {
        let mut acc = OutputAccumulator::new(2000, 51200);
        acc.append(&vec![b'x'; 70000]);
        acc.finish();
        let snap = acc.snapshot();
        assert!(snap.truncation.last_line_partial);
        assert_eq!(snap.truncation.output_bytes, 51200);
        assert_eq!(acc.last_line_bytes(), 70000);
    }
}
