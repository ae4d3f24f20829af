//! Server-sent events: bytes in, frames out (the framing both wire protocols share).
//!
//! The format (WHATWG `text/event-stream`, as the reference's Anthropic reader and the OpenAI
//! SDK's line decoder implement it):
//!
//! ```text
//! event: content_block_delta␊
//! data: {"type":"content_block_delta","index":0,␊
//! data:  "delta":{"type":"text_delta","text":"Hi"}}␊
//! ␊
//! : a comment line, ignored␊
//! data: [DONE]␊
//! ␊
//! ```
//!
//! yields two frames: `event = "content_block_delta"` with the two `data` lines joined by
//! `\n`, then `event = ""` with `data = "[DONE]"`. Lines end with LF, CR or CRLF (a CRLF split
//! across two network chunks is still one line end); a field name is everything before the
//! first `:`, and one space after the colon is dropped; a blank line dispatches the frame;
//! frames with neither an event name nor data are skipped. At end of input an unfinished last
//! line is processed and a pending frame is dispatched, as the reference does.
//!
//! Invariants: bytes may arrive split at any point, including inside a UTF-8 sequence; the
//! decoder never panics and never allocates per frame once its buffers have grown (frames
//! borrow the decoder's scratch buffers). Invalid UTF-8 is replaced by U+FFFD, as
//! `TextDecoder` does. The idle timeout lives where the bytes are read
//! (`ai::stream`), not here.

/// One dispatched event: its `event:` name (empty when absent) and its joined `data:` lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseFrame<'a> {
    /// The `event:` field, or `""`.
    pub event: &'a str,
    /// The `data:` lines joined with `\n`.
    pub data: &'a str,
}

/// An incremental SSE decoder; feed it bytes, then pull frames until it returns `None`.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Undecoded input; `pos` is where the next line starts.
    buf: Vec<u8>,
    pos: usize,
    /// The previous line ended with CR, so a LF at the start of the next input is skipped.
    skip_lf: bool,
    /// The frame being built.
    event: Vec<u8>,
    data: Vec<u8>,
    data_lines: usize,
    /// Decoded copies handed out by the last dispatch.
    out_event: String,
    out_data: String,
    /// End of input was signalled.
    eof: bool,
}

impl SseDecoder {
    /// Returns an empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends received bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 4096 && self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Signals end of input: the next calls to [`Self::next_frame`] process an unfinished last
    /// line and dispatch what is pending.
    pub fn finish(&mut self) {
        self.eof = true;
    }

    /// Returns the next complete frame, or `None` when more input is needed (or, after
    /// [`Self::finish`], when everything has been returned).
    pub fn next_frame(&mut self) -> Option<SseFrame<'_>> {
        loop {
            if self.skip_lf && self.pos < self.buf.len() {
                if self.buf[self.pos] == b'\n' {
                    self.pos += 1;
                }
                self.skip_lf = false;
            }
            let rest = &self.buf[self.pos..];
            let line_end = rest.iter().position(|&b| b == b'\n' || b == b'\r');
            let (line_start, line_len, next_pos) = match line_end {
                Some(len) => {
                    let terminator = rest[len];
                    let mut next = self.pos + len + 1;
                    if terminator == b'\r' {
                        if next < self.buf.len() {
                            if self.buf[next] == b'\n' {
                                next += 1;
                            }
                        } else {
                            self.skip_lf = true;
                        }
                    }
                    (self.pos, len, next)
                }
                None if self.eof && !rest.is_empty() => (self.pos, rest.len(), self.buf.len()),
                None if self.eof => {
                    // Input is exhausted: dispatch what is pending, once.
                    return if self.take_frame() {
                        Some(self.frame())
                    } else {
                        None
                    };
                }
                None => return None,
            };
            self.pos = next_pos;
            if line_len == 0 {
                if self.take_frame() {
                    return Some(self.frame());
                }
                continue;
            }
            self.process_line(line_start, line_len);
        }
    }

    fn process_line(&mut self, start: usize, len: usize) {
        let line = &self.buf[start..start + len];
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                let value = value.strip_prefix(b" ").unwrap_or(value);
                (&line[..colon], value)
            }
            None => (line, &line[..0]),
        };
        match field {
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            b"data" => {
                if self.data_lines > 0 {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.data_lines += 1;
            }
            _ => {}
        }
    }

    /// Moves the pending frame into the output buffers; false when there is none.
    fn take_frame(&mut self) -> bool {
        // As the reference: an empty event name with no data is no frame.
        if self.event.is_empty() && self.data_lines == 0 {
            return false;
        }
        decode_into(&self.event, &mut self.out_event);
        decode_into(&self.data, &mut self.out_data);
        self.event.clear();
        self.data.clear();
        self.data_lines = 0;
        true
    }

    fn frame(&self) -> SseFrame<'_> {
        SseFrame {
            event: &self.out_event,
            data: &self.out_data,
        }
    }
}

/// Decodes UTF-8 into a reused buffer, replacing invalid sequences with U+FFFD.
fn decode_into(bytes: &[u8], out: &mut String) {
    out.clear();
    match std::str::from_utf8(bytes) {
        Ok(text) => out.push_str(text),
        Err(_) => out.push_str(&String::from_utf8_lossy(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(chunks: &[&[u8]]) -> Vec<(String, String)> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.feed(chunk);
            while let Some(frame) = decoder.next_frame() {
                out.push((frame.event.to_owned(), frame.data.to_owned()));
            }
        }
        decoder.finish();
        while let Some(frame) = decoder.next_frame() {
            out.push((frame.event.to_owned(), frame.data.to_owned()));
        }
        out
    }

    fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn frames_with_names_comments_and_multiline_data() {
        let input = b"event: a\ndata: 1\ndata:2\n\n: comment\n\ndata: [DONE]\n\n";
        assert_eq!(frames(&[input]), owned(&[("a", "1\n2"), ("", "[DONE]")]));
    }

    #[test]
    fn every_line_ending_and_every_split_point_give_the_same_frames() {
        let body = "event: x\r\ndata: héllo\r\n\r\ndata: {\"a\":1}\r\rdata: b\n\ndata: tail";
        let expected = owned(&[("x", "héllo"), ("", "{\"a\":1}"), ("", "b"), ("", "tail")]);
        let bytes = body.as_bytes();
        for split in 0..=bytes.len() {
            let (a, b) = bytes.split_at(split);
            assert_eq!(frames(&[a, b]), expected, "split at {split}");
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(frames(&singles), expected);
    }

    #[test]
    fn end_of_input_dispatches_a_pending_frame_once() {
        assert_eq!(frames(&[b"data: x\n"]), owned(&[("", "x")]));
        assert_eq!(frames(&[b"data: x"]), owned(&[("", "x")]));
        assert_eq!(frames(&[b""]), owned(&[]));
        assert_eq!(frames(&[b"\n\n\n"]), owned(&[]));
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(frames(&[b"data: a\xffb\n\n"]), owned(&[("", "a\u{fffd}b")]));
    }

    #[test]
    fn field_without_colon_and_unknown_fields() {
        assert_eq!(
            frames(&[b"data\nid: 7\nretry: 5\nevent\n\nevent:\n\n"]),
            owned(&[("", "")])
        );
    }
}
