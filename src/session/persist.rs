//! Where a session's entries go: the store, or — for a new session that has no conversation
//! yet — an in-memory buffer, as the reference (1.6.0) defers creating a session file until
//! the first user or assistant message (so starting pi and quitting leaves nothing behind,
//! and a prompt whose first turn never completes is still kept).
//!
//! Invariants: entries reach the store in the order they were appended, each append one
//! transaction; an append the store refuses (disk full, database locked, a lost writer
//! lease…) is kept in memory as the exact line it will be stored as (id, parent, timestamp
//! assigned then), and every later append first writes the kept lines (in one transaction,
//! byte for byte), so nothing acknowledged to the agent is dropped and an export of the
//! branch with the kept lines equals the branch once they are saved.

use std::collections::HashSet;

use crate::model::entry::{Entry, EntryKind, SessionHeader};
use crate::model::ids::{EntryId, SessionId};
use crate::model::message::AgentMessage;
use crate::store::{RawEntry, SessionStore, StoreError};
use crate::support::clock::Clock;
use crate::support::ids::IdSource;

/// The state of a session's persistence.
#[derive(Debug)]
pub enum Persistence {
    /// The session exists in the store.
    Stored {
        /// Its id.
        id: SessionId,
        /// Entries the store refused, to retry before the next append (oldest first): each
        /// the child of the one before, the first the child of the leaf the store had when
        /// it was refused.
        unsaved: Vec<RawEntry>,
    },
    /// A new session not yet written: header and entries wait for the first user or
    /// assistant message.
    Pending {
        /// The header the session will get.
        header: SessionHeader,
        /// Buffered entries (ids, parents and timestamps already assigned).
        entries: Vec<RawEntry>,
        /// The buffered leaf (`None`: before the first entry).
        leaf: Option<EntryId>,
    },
}

impl Persistence {
    /// Returns the session id (known before the session is written).
    pub fn id(&self) -> SessionId {
        match self {
            Self::Stored { id, .. } => id.clone(),
            Self::Pending { header, .. } => header.id.clone(),
        }
    }

    /// Whether the session exists in the store.
    pub fn is_stored(&self) -> bool {
        matches!(self, Self::Stored { .. })
    }

    /// Returns the entries the store has not accepted yet (pending buffer or unsaved).
    pub fn unsaved_kinds(&self) -> Vec<EntryKind> {
        match self {
            Self::Stored { unsaved, .. } => {
                unsaved.iter().map(|raw| raw.entry.kind.clone()).collect()
            }
            Self::Pending { entries, .. } => {
                entries.iter().map(|raw| raw.entry.kind.clone()).collect()
            }
        }
    }

    /// A pending session that should have been stored — it holds a user or assistant
    /// message, whose append stores the session, so storing it failed: its header and
    /// entries. `None` otherwise.
    pub fn unstored_pending(&self) -> Option<(&SessionHeader, &[RawEntry])> {
        match self {
            Self::Pending {
                header, entries, ..
            } if entries.iter().any(|raw| {
                matches!(
                    &raw.entry.kind,
                    EntryKind::Message(AgentMessage::User(_) | AgentMessage::Assistant(_))
                )
            }) =>
            {
                Some((header, entries))
            }
            _ => None,
        }
    }

    /// Returns the lines the store refused so far (empty for a pending session, whose buffer
    /// is not a failure).
    pub fn unsaved(&self) -> &[RawEntry] {
        match self {
            Self::Stored { unsaved, .. } => unsaved,
            Self::Pending { .. } => &[],
        }
    }
}

/// What became of an append the store accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Appended {
    /// Written (or buffered in a pending session).
    Saved,
    /// Written together with this many entries refused before.
    Flushed(usize),
    /// Kept in memory without asking the store (a read-only session).
    Kept,
}

/// Runs a blocking store call off the async runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(join) => Err(StoreError::Corrupt {
            path: String::new(),
            message: format!("a store task failed: {join}"),
        }),
    }
}

/// Appends entries for a session, buffering or retrying as needed.
#[derive(Debug, Clone)]
pub struct Writer {
    /// The store.
    pub store: SessionStore,
    /// Stamps buffered entries.
    pub clock: std::sync::Arc<dyn Clock>,
    /// Draws buffered entry ids.
    pub ids: std::sync::Arc<IdSource>,
}

impl Writer {
    /// Appends one entry (child of the leaf); a pending session is written to the store when
    /// the entry is a user or assistant message. Returns the error of a refused append (the entry is
    /// then kept as a line to be retried with the next append).
    ///
    /// With `attempt == false` (a read-only session) a stored session's entry is kept without
    /// asking the store.
    pub async fn append(
        &self,
        persistence: &mut Persistence,
        kind: EntryKind,
        attempt: bool,
    ) -> Result<(Appended, Option<EntryId>), StoreError> {
        match persistence {
            Persistence::Pending { entries, leaf, .. } => {
                let materialize = matches!(
                    &kind,
                    EntryKind::Message(AgentMessage::User(_) | AgentMessage::Assistant(_))
                );
                let taken: HashSet<String> = entries
                    .iter()
                    .filter_map(|raw| raw.entry.id.as_ref().map(ToString::to_string))
                    .collect();
                let id = EntryId::generate(&self.ids, |candidate| taken.contains(candidate));
                let timestamp = self.clock.now_iso();
                let entry = Entry {
                    id: Some(id.clone()),
                    parent_id: leaf.clone(),
                    kind: kind.stamped(&timestamp),
                    timestamp,
                    extra: serde_json::Map::new(),
                };
                entries.push(RawEntry {
                    payload: entry.to_line().into_bytes(),
                    entry,
                });
                *leaf = Some(id.clone());
                if materialize {
                    self.materialize(persistence).await?;
                }
                Ok((Appended::Saved, Some(id)))
            }
            Persistence::Stored { id, unsaved } => {
                let store = self.store.clone();
                let session = id.clone();
                let mut batch = std::mem::take(unsaved);
                let (result, rest) = blocking(move || {
                    if batch.is_empty() && attempt {
                        // The usual case: one append, the store assigns id and parent.
                        return match store.append(&session, kind.clone()) {
                            Ok(stored) => Ok((Ok((Appended::Saved, stored.entry.id)), Vec::new())),
                            Err(error) => {
                                let parent = store
                                    .leaf(&session)
                                    .ok()
                                    .flatten()
                                    .and_then(|leaf| leaf.entry.id);
                                let kept = kept_line(&store, &session, &[], parent, kind);
                                Ok((Err(error), vec![kept]))
                            }
                        };
                    }
                    let parent = match batch.last() {
                        Some(last) => last.entry.id.clone(),
                        None => store
                            .leaf(&session)
                            .ok()
                            .flatten()
                            .and_then(|leaf| leaf.entry.id),
                    };
                    let kept = kept_line(&store, &session, &batch, parent, kind);
                    let kept_id = kept.entry.id.clone();
                    batch.push(kept);
                    if !attempt {
                        return Ok((Ok((Appended::Kept, kept_id)), batch));
                    }
                    match store.append_raw(&session, &batch) {
                        Ok(_) => Ok((
                            Ok((Appended::Flushed(batch.len() - 1), kept_id)),
                            Vec::new(),
                        )),
                        Err(error) => Ok((Err(error), batch)),
                    }
                })
                .await?;
                *unsaved = rest;
                result
            }
        }
    }

    /// Writes the entries a stored session kept after refused appends (one transaction);
    /// returns how many were written.
    pub async fn flush(&self, persistence: &mut Persistence) -> Result<usize, StoreError> {
        let Persistence::Stored { id, unsaved } = persistence else {
            return Ok(0);
        };
        if unsaved.is_empty() {
            return Ok(0);
        }
        let store = self.store.clone();
        let session = id.clone();
        let batch = unsaved.clone();
        let count = batch.len();
        blocking(move || store.append_raw(&session, &batch)).await?;
        unsaved.clear();
        Ok(count)
    }

    /// Writes a pending session (header and buffered entries) to the store in one
    /// transaction; nothing happens for a stored session.
    pub async fn materialize(&self, persistence: &mut Persistence) -> Result<(), StoreError> {
        let Persistence::Pending {
            header,
            entries,
            leaf,
        } = persistence
        else {
            return Ok(());
        };
        let store = self.store.clone();
        let header_copy = header.clone();
        let batch = entries.clone();
        let reset_leaf = leaf.is_none() && !entries.is_empty();
        let id = header.id.clone();
        blocking(move || {
            store.insert_raw_session(&header_copy, header_copy.to_line().as_bytes(), &batch)?;
            if reset_leaf {
                store.reset_leaf(&header_copy.id)?;
            }
            Ok(())
        })
        .await?;
        *persistence = Persistence::Stored {
            id,
            unsaved: Vec::new(),
        };
        Ok(())
    }
}

/// Builds the line a refused entry will be stored as: an id free in the session and among the
/// kept lines, `parent` as its parent, the store's clock for its timestamp — what
/// [`SessionStore::append`] would have written.
fn kept_line(
    store: &SessionStore,
    session: &SessionId,
    kept: &[RawEntry],
    parent: Option<EntryId>,
    kind: EntryKind,
) -> RawEntry {
    let id = EntryId::generate(store.ids(), |candidate| {
        kept.iter().any(|raw| {
            raw.entry
                .id
                .as_ref()
                .is_some_and(|id| id.as_str() == candidate)
        }) || store
            .entry(session, &EntryId::new(candidate))
            .ok()
            .flatten()
            .is_some()
    });
    let timestamp = store.clock().now_iso();
    let entry = Entry {
        id: Some(id),
        parent_id: parent,
        kind: kind.stamped(&timestamp),
        timestamp,
        extra: serde_json::Map::new(),
    };
    RawEntry {
        payload: entry.to_line().into_bytes(),
        entry,
    }
}
