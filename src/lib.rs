//! pi: a coding agent whose memory is an append-only entry tree in SQLite, reading and
//! writing the JSONL session files of the reference TypeScript agent without loss.
//!
//! Modules are listed in reading order, lowest layer first. `docs/ARCHITECTURE.md` has the
//! code map and the invariants of each layer; `tests/suite/architecture.rs` enforces which
//! module may import which.

pub mod support;

pub mod model;

pub mod jsonl;

pub mod store;

pub mod ai;

pub mod agent;

pub mod session;

pub mod modes;

pub mod cli;
