//! The SQLite session store: every session is an append-only tree of entries with a persisted
//! leaf pointer (`../shared/DESIGN.md`, "Storage").
//!
//! [`SessionStore`] offers what the reference `SessionManager` offers — create, open, continue,
//! append every entry type, branch, reset, branch with summary, path, tree, labels, names,
//! fork, delete — plus listing from derived statistics. Each write is one `BEGIN IMMEDIATE`
//! transaction: entry row, leaf move and derived rows, all or nothing. Every write to an
//! existing session first checks the session's writer lease in that same transaction
//! (`lease.rs`): a live writer elsewhere makes it fail with `SessionHeld`, a lease taken over
//! from this process with `LeaseLost`.
//!
//! Invariants: `store` knows nothing of agents or providers; no `rusqlite` type appears in its
//! public API (errors and `testing`'s migrations aside); entries are never updated, and deleted only with their session.
//! The methods are blocking: async callers run them in `spawn_blocking`.

pub(crate) mod api;
pub mod context;
pub(crate) mod db;
pub(crate) mod derived;
mod error;
pub mod imported;
pub mod interchange;
pub mod lease;
pub mod maintenance;
pub(crate) mod migrate;
mod open;
pub mod search;
mod spool;
pub(crate) mod sql;
pub mod sync;
pub mod testing;
pub mod tree;
pub mod types;

pub use api::SessionStore;
pub use api::leases::{Heartbeat, HeartbeatStatus, spawn_heartbeat};
pub use api::maintenance::{MERGE_STEP_PAGES, OPTIMIZE_GROWTH, ReindexProgress, StepPacing};
pub use context::SessionContext;
pub use error::LeaseHolder;
pub use error::Result;
pub use error::StoreError;
pub use imported::{FileMark, FileRecord};
pub use interchange::{
    AppendOutcome, ExportSummary, ImportConflict, ImportMode, ImportOptions, ImportReport,
    ImportStatus, QuarantinedLine,
};
pub use lease::{Lease, LeaseAttempt, LeaseConfig};
pub use open::{StoreLocation, create_private_dir};
pub use sync::{PushCandidate, SyncOrigin};
pub use tree::TreeNode;
pub use types::{
    BranchStep, LeafSelector, ListScope, NewSession, RawEntry, SessionSummary, StoreConfig,
    StoredEntry, TokenTotals,
};
