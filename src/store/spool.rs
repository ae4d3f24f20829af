//! The lines a merge will write, kept between its read and its write phases.
//!
//! A merge into a stored session compares the file with the session in a read snapshot and
//! keeps the lines the session lacks here; its write steps then read them back in file order.
//! They stay in memory up to [`IN_MEMORY`] bytes and go to an unnamed temporary file beyond
//! (`tempfile::SpooledTempFile`), so a rewritten file of any size costs bounded memory.
//!
//! A record is a tag byte (0: an entry; 1 + the reason's index in [`REASONS`]: a skipped line),
//! the line number and the byte length (each a little-endian `u64`), then the bytes.

use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use tempfile::SpooledTempFile;

use crate::jsonl::reader::{FileEntry, Item, SkipReason, SkippedLine};
use crate::model::entry::Entry;
use crate::store::StoreError;

/// Bytes kept in memory before the spool moves to a temporary file.
pub const IN_MEMORY: usize = 8 * 1024 * 1024;

/// Every skip reason, in the order of their tags.
const REASONS: [SkipReason; 9] = [
    SkipReason::Blank,
    SkipReason::NotJson,
    SkipReason::Torn,
    SkipReason::Array,
    SkipReason::Scalar,
    SkipReason::Null,
    SkipReason::SecondHeader,
    SkipReason::NoType,
    SkipReason::Unsupported,
];

/// Lines written to the spool, to be read back once in the order they were pushed.
pub struct Spool {
    out: BufWriter<SpooledTempFile>,
    entries: u64,
    lines: u64,
}

impl Spool {
    /// An empty spool.
    pub fn new() -> Self {
        Self {
            out: BufWriter::new(SpooledTempFile::new(IN_MEMORY)),
            entries: 0,
            lines: 0,
        }
    }

    /// How many entry lines it holds.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Whether it holds no line at all.
    pub fn is_empty(&self) -> bool {
        self.lines == 0
    }

    /// Adds an entry line.
    pub fn push(&mut self, item: &Item) -> Result<(), StoreError> {
        match item {
            Item::Entry(line) => {
                self.record(0, line.line, &line.payload)?;
                self.entries += 1;
            }
            Item::Skipped(line) => {
                let index = REASONS
                    .iter()
                    .position(|reason| *reason == line.reason)
                    .unwrap_or(0);
                let tag = u8::try_from(index + 1).unwrap_or(1);
                self.record(tag, line.line, &line.bytes)?;
            }
        }
        self.lines += 1;
        Ok(())
    }

    fn record(&mut self, tag: u8, line: usize, bytes: &[u8]) -> Result<(), StoreError> {
        let line = u64::try_from(line).unwrap_or(u64::MAX);
        let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        let mut head = [0u8; 17];
        head[0] = tag;
        head[1..9].copy_from_slice(&line.to_le_bytes());
        head[9..17].copy_from_slice(&len.to_le_bytes());
        self.out.write_all(&head).map_err(spool_error)?;
        self.out.write_all(bytes).map_err(spool_error)
    }

    /// Reads the lines back, in the order they were pushed.
    pub fn into_items(self) -> Result<SpoolItems, StoreError> {
        let mut file = self
            .out
            .into_inner()
            .map_err(|error| spool_error(error.into_error()))?;
        file.seek(SeekFrom::Start(0)).map_err(spool_error)?;
        Ok(SpoolItems {
            input: BufReader::new(file),
            left: self.lines,
        })
    }
}

impl Default for Spool {
    fn default() -> Self {
        Self::new()
    }
}

/// The lines of a spool, read back.
pub struct SpoolItems {
    input: BufReader<SpooledTempFile>,
    left: u64,
}

impl SpoolItems {
    fn read_one(&mut self) -> Result<Item, StoreError> {
        let mut head = [0u8; 17];
        self.input.read_exact(&mut head).map_err(spool_error)?;
        let mut number = [0u8; 8];
        number.copy_from_slice(&head[1..9]);
        let line = usize::try_from(u64::from_le_bytes(number)).unwrap_or(usize::MAX);
        number.copy_from_slice(&head[9..17]);
        let len = usize::try_from(u64::from_le_bytes(number)).map_err(|_| damaged())?;
        let mut bytes = vec![0u8; len];
        self.input.read_exact(&mut bytes).map_err(spool_error)?;
        match head[0] {
            0 => {
                let entry = Entry::parse(&bytes).ok_or_else(damaged)?;
                Ok(Item::Entry(FileEntry {
                    line,
                    payload: bytes,
                    entry,
                }))
            }
            tag => {
                let reason = REASONS
                    .get(usize::from(tag) - 1)
                    .copied()
                    .ok_or_else(damaged)?;
                Ok(Item::Skipped(SkippedLine {
                    line,
                    reason,
                    bytes,
                }))
            }
        }
    }
}

impl Iterator for SpoolItems {
    type Item = Result<Item, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let item = self.read_one();
        if item.is_err() {
            self.left = 0;
        }
        Some(item)
    }
}

fn spool_error(source: std::io::Error) -> StoreError {
    StoreError::Spool { source }
}

fn damaged() -> StoreError {
    StoreError::Spool {
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "a spooled line did not read back as it was written",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(line: usize, text: &str) -> Item {
        let payload = format!(
            r#"{{"type":"message","id":"e{line}","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"{text}"}}}}"#
        )
        .into_bytes();
        let entry = Entry::parse(&payload).expect("an entry");
        Item::Entry(FileEntry {
            line,
            payload,
            entry,
        })
    }

    #[test]
    fn lines_read_back_in_order_past_the_memory_bound() -> Result<(), StoreError> {
        let mut spool = Spool::new();
        let big = "x".repeat(64 * 1024);
        let mut pushed = Vec::new();
        for line in 2..200 {
            let item = if line % 7 == 0 {
                Item::Skipped(SkippedLine {
                    line,
                    reason: REASONS[line % REASONS.len()],
                    bytes: format!("junk {line}").into_bytes(),
                })
            } else {
                entry(line, &big)
            };
            spool.push(&item)?;
            pushed.push(item);
        }
        assert!(pushed.len() * big.len() > IN_MEMORY, "never left memory");
        assert_eq!(spool.entries(), 170);
        let back: Vec<Item> = spool.into_items()?.collect::<Result<_, _>>()?;
        assert_eq!(back, pushed);
        Ok(())
    }

    #[test]
    fn an_empty_spool_reads_back_nothing() -> Result<(), StoreError> {
        let spool = Spool::new();
        assert!(spool.is_empty());
        assert_eq!(spool.into_items()?.count(), 0);
        Ok(())
    }
}
