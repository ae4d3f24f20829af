//! Where a session's entries go: the store, or — for a new session that has no assistant
//! message yet — an in-memory buffer, as the reference defers creating a session file until
//! the first assistant message (so starting pi and quitting leaves nothing behind).
//!
//! Invariants: entries reach the store in the order they were appended, each append one
//! transaction; an append the store refuses (disk full, database locked…) is kept in memory
//! and retried before the next one, so nothing acknowledged to the agent is dropped.

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
        /// Entries the store refused, to retry before the next append (oldest first).
        unsaved: Vec<EntryKind>,
    },
    /// A new session not yet written: header and entries wait for the first assistant
    /// message.
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
            Self::Stored { unsaved, .. } => unsaved.clone(),
            Self::Pending { entries, .. } => {
                entries.iter().map(|raw| raw.entry.kind.clone()).collect()
            }
        }
    }
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
    /// the entry is an assistant message. Returns the error of a refused append (the entry is
    /// then kept to be retried).
    pub async fn append(
        &self,
        persistence: &mut Persistence,
        kind: EntryKind,
    ) -> Result<(), StoreError> {
        match persistence {
            Persistence::Pending { entries, leaf, .. } => {
                let materialize = matches!(&kind, EntryKind::Message(AgentMessage::Assistant(_)));
                let taken: HashSet<String> = entries
                    .iter()
                    .filter_map(|raw| raw.entry.id.as_ref().map(ToString::to_string))
                    .collect();
                let id = EntryId::generate(&self.ids, |candidate| taken.contains(candidate));
                let entry = Entry {
                    id: Some(id.clone()),
                    parent_id: leaf.clone(),
                    timestamp: self.clock.now_iso(),
                    kind,
                    extra: serde_json::Map::new(),
                };
                entries.push(RawEntry {
                    payload: entry.to_line().into_bytes(),
                    entry,
                });
                *leaf = Some(id);
                if materialize {
                    self.materialize(persistence).await?;
                }
                Ok(())
            }
            Persistence::Stored { id, unsaved } => {
                unsaved.push(kind);
                let store = self.store.clone();
                let session = id.clone();
                let batch = std::mem::take(unsaved);
                let (result, rest) = blocking(move || {
                    let mut remaining = batch.into_iter();
                    for next in remaining.by_ref() {
                        if let Err(error) = store.append(&session, next.clone()) {
                            let mut rest = vec![next];
                            rest.extend(remaining);
                            return Ok((Err(error), rest));
                        }
                    }
                    Ok((Ok(()), Vec::new()))
                })
                .await?;
                *unsaved = rest;
                result.map(|_| ())
            }
        }
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
