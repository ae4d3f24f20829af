//! The reference's JSONL session file format (`../shared/spec/session-format.md`): reading
//! every version, migrating v1/v2 to v3 in memory, and writing files the reference reads.
//!
//! Invariant: `jsonl` knows nothing of SQLite, agents or providers; source files are never
//! modified.
