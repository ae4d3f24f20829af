//! pi: a coding agent whose memory is an append-only entry tree in SQLite, reading and
//! writing the JSONL session files of the reference TypeScript agent without loss.
//!
//! Modules are listed in reading order, lowest layer first. `docs/ARCHITECTURE.md` has the
//! code map and the invariants of each layer; `tests/suite/architecture.rs` enforces which
//! module may import which.

/// The process-wide allocator of the `pi` binary, its tests and benches: mimalloc (see
/// `docs/BENCHMARKS.md`, "Agent turns": glibc's malloc/free and its heap trimming were about a
/// fifth of an agent turn's CPU). The `system-allocator` feature leaves the system allocator
/// in place, for `benches/sse.rs`, which counts allocations with a global allocator of its own.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod support;

pub mod model;

pub mod jsonl;

pub mod store;

pub mod remote;

pub mod ai;

pub mod agent;

pub mod session;

pub mod modes;

pub mod cli;
