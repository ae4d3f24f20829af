//! The reference's JSONL session file format (`../shared/spec/session-format.md`): reading
//! every version, migrating v1/v2 to v3 in memory, and writing files the reference reads.
//!
//! ## The format in one example
//!
//! ```text
//! {"type":"session","version":3,"id":"0196a3c2-7d1e-7c44-9b0e-2f6a1d3c9e55","timestamp":"2026-05-07T09:15:02.481Z","cwd":"/home/u/app"}
//! {"type":"model_change","id":"168bb115","parentId":null,"timestamp":"2026-05-07T09:15:02.490Z","provider":"anthropic","modelId":"claude-sonnet-4-5"}
//! {"type":"message","id":"4f2a9c01","parentId":"168bb115","timestamp":"2026-05-07T09:15:10.002Z","message":{"role":"user","content":"hi","timestamp":1778145310001}}
//! ```
//!
//! One JSON value per LF-terminated line: the header first, then entries whose `id` /
//! `parentId` form a tree; the reference resumes at the last line. Version 1 files have no
//! ids (a linear list), version 2 files call extension messages `hookMessage`.
//!
//! ## Parts
//! - `reader.rs`: lines, the header rule, tolerance (skipped lines with numbers and reasons),
//!   lazy reading of v3 files, migration of older ones.
//! - `migrate.rs`: the v1 → v2 → v3 migration, with deterministic ids for v1 entries.
//! - `value.rs`: JSON values with JavaScript's semantics (lone surrogates, number form, key
//!   order), for lines that must be re-serialised exactly as the reference would.
//! - `validate.rs`: a depth-unlimited validator for lines the typed reader cannot hold.
//! - `writer.rs`: export helpers — line framing, the leaf-last rule, `--branch` re-chaining,
//!   the reference's directory layout.
//!
//! Invariant: `jsonl` knows nothing of SQLite, agents or providers, and does no file-system
//! I/O (callers hand in bytes and writers); source files are never modified.

pub mod migrate;
pub mod reader;
pub mod validate;
pub mod value;
pub mod writer;

pub use migrate::Migration;
pub use reader::{
    CompleteLines, FileEntry, Item, NoHeader, Repairs, SessionFile, SessionReader, SkipReason,
    SkippedLine, TailReader, is_torn,
};
pub use value::{JsObject, JsString, JsValue};

/// The longest line pi reads from a session file: 256 MiB. The reference reads a file line by
/// line into JavaScript strings, whose longest is 2^29 − 24 UTF-16 units (≈ 512 Mi
/// characters, V8 on 64 bits): it fails on a longer line. pi refuses a file at half that —
/// no session line comes near it (a long coding session's lines are kilobytes; an inlined
/// image a few megabytes), and parsing a line takes several times its size in memory. A
/// longer line refuses the file, naming it and the line, before more of it is read
/// (`support::files::read_regular`).
pub const MAX_LINE_BYTES: usize = 256 * 1024 * 1024;

/// What can go wrong reading or re-serialising session lines.
#[derive(Debug, thiserror::Error)]
pub enum JsonlError {
    /// The file has no valid header; it is refused and left as it is.
    #[error("no valid session header: {0}")]
    NoHeader(NoHeader),
    /// The header's `version` is not one pi reads (1, 2, 3); the file is refused and left as it
    /// is (`reader.rs`, "Versions").
    #[error("{}", describe_version(version, *newer, *line))]
    UnsupportedVersion {
        /// The header's 1-based line number.
        line: usize,
        /// The `version` value as JSON text (cut to 40 characters).
        version: String,
        /// Whether it is a number above 3 (a newer format) rather than no version at all.
        newer: bool,
    },
    /// A stored line could not be parsed again for re-serialisation.
    #[error("entry #{idx} cannot be re-serialised: {source}")]
    Reserialize {
        /// Position of the line among those given.
        idx: usize,
        /// Why it did not parse.
        #[source]
        source: value::ParseError,
    },
    /// A stored line is not a JSON object.
    #[error("entry #{idx} is not a JSON object")]
    NotAnObject {
        /// Position of the line among those given.
        idx: usize,
    },
}

fn describe_version(version: &str, newer: bool, line: usize) -> String {
    if newer {
        format!(
            "the session header (line {line}) has format version {version}, newer than the versions this pi reads (1, 2 and 3); upgrade pi to import it"
        )
    } else {
        format!(
            "the session header (line {line}) has version {version}, which is not a session format version (pi reads versions 1, 2 and 3)"
        )
    }
}
