//! The plain values of the store's API: how to open it, what listing and reading return,
//! which sessions a listing or search covers, how a new session starts.

use std::sync::Arc;
use std::time::Duration;

use crate::model::entry::Entry;
use crate::model::ids::{EntryId, SessionId};
use crate::store::open::StoreLocation;
use crate::store::sql;
use crate::support::clock::Clock;
use crate::support::ids::IdSource;

/// How to open a store.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Database file or in-memory.
    pub location: StoreLocation,
    /// Time source for entry timestamps and session creation.
    pub clock: Arc<dyn Clock>,
    /// Randomness for new ids.
    pub ids: Arc<IdSource>,
    /// How long a write waits for another process's write lock.
    pub busy_timeout: Duration,
}

/// Token totals of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenTotals {
    /// Input tokens.
    pub input: i64,
    /// Output tokens.
    pub output: i64,
    /// Cache read tokens.
    pub cache_read: i64,
    /// Cache write tokens.
    pub cache_write: i64,
}

/// A session as listed: header fields and derived statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// Session id.
    pub id: SessionId,
    /// Working directory.
    pub cwd: String,
    /// Creation time (header timestamp).
    pub created: String,
    /// The session this one was forked or cloned from.
    pub parent_session: Option<String>,
    /// Display name (the last `session_info`).
    pub name: Option<String>,
    /// Text of the first user message.
    pub first_message: Option<String>,
    /// Timestamp of the last appended entry (the header's when there is none).
    pub last_activity: String,
    /// Number of entries.
    pub entries: i64,
    /// Number of `message` entries.
    pub messages: i64,
    /// Token totals over assistant messages.
    pub tokens: TokenTotals,
    /// Summed `usage.cost.total`.
    pub cost: f64,
}

impl SessionSummary {
    pub(crate) fn from_row(row: sql::SessionRow) -> Self {
        Self {
            id: SessionId::new(row.id),
            cwd: row.cwd,
            created: row.created_at,
            parent_session: row.parent_session,
            name: row.name,
            first_message: row.first_message,
            last_activity: row.last_activity,
            entries: row.entries,
            messages: row.messages,
            tokens: TokenTotals {
                input: row.input,
                output: row.output,
                cache_read: row.cache_read,
                cache_write: row.cache_write,
            },
            cost: row.cost,
        }
    }
}

/// One step of [`SessionStore::visit_branch`](crate::store::SessionStore::visit_branch).
#[derive(Debug, Clone, Copy)]
pub enum BranchStep<'a> {
    /// The leaf the path ends at, given before the path (`None`: no entries).
    Leaf(Option<&'a StoredEntry>),
    /// The next entry of the path, root first.
    Entry(&'a StoredEntry),
}

/// An entry as stored: its append sequence, typed view and exact bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEntry {
    /// Append sequence in the session (0-based).
    pub seq: i64,
    /// The typed view.
    pub entry: Entry,
    /// The line bytes (no newline).
    pub payload: Vec<u8>,
}

/// A line read from a file: its exact bytes (no newline) and its typed view.
#[derive(Debug, Clone, PartialEq)]
pub struct RawEntry {
    /// The line bytes as stored and exported.
    pub payload: Vec<u8>,
    /// The typed view of the same line.
    pub entry: Entry,
}

impl RawEntry {
    /// Parses a line; `None` unless it is an entry object.
    pub fn parse(line: &[u8]) -> Option<Self> {
        Some(Self {
            entry: Entry::parse(line)?,
            payload: line.to_vec(),
        })
    }
}

/// Which sessions to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListScope {
    /// Every session.
    All,
    /// Sessions whose `cwd` equals this directory.
    Cwd(String),
}

/// Where to rebuild a context or a path from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeafSelector {
    /// The persisted leaf.
    Current,
    /// The latest entry with this id.
    Entry(EntryId),
}

/// A new session's header fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    /// Working directory.
    pub cwd: String,
    /// The session it was forked or cloned from.
    pub parent_session: Option<String>,
}
