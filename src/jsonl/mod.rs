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

/// What can go wrong reading or re-serialising session lines.
#[derive(Debug, thiserror::Error)]
pub enum JsonlError {
    /// The file has no valid header; it is refused and left as it is.
    #[error("no valid session header: {0}")]
    NoHeader(NoHeader),
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
