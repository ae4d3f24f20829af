//! Where the session's entries go and how they are read back: [`AgentSession::persist`]
//! appends one entry (to the store, or to the buffer of a session not written yet —
//! `session::persist`), keeping and retrying what the store refuses, with one notice when
//! entries start being kept and one when they are written; the getters read the session's
//! id, header, entries, branch and leaf from wherever they are.
//!
//! Invariant: a refused append never fails the caller; the entry is kept, in order, with the
//! id it will be stored under.

use serde_json::Value;

use crate::model::entry::EntryKind;
use crate::model::ids::{EntryId, SessionId};
use crate::session::agent_session::error::SessionError;
use crate::session::agent_session::state::AgentSession;
use crate::session::events::NoticeLevel;
use crate::session::persist::{Appended, Persistence, blocking};
use crate::store::LeafSelector;

impl AgentSession {
    /// Appends an entry, reporting (not failing) when the store refuses it: the entry is kept
    /// in memory and retried with the next append. One notice when entries start being kept
    /// (with the store's message), one when they were written later; a lost lease turns the
    /// session read-only (where entries are kept without asking the store).
    pub(super) async fn persist(&self, kind: EntryKind) -> Option<EntryId> {
        let attempt = self.read_only().is_none();
        let mut persistence = self.inner.persistence.lock().await;
        let before = persistence.unsaved().len();
        let result = self
            .inner
            .writer
            .append(&mut persistence, kind, attempt)
            .await;
        let unsaved = persistence.unsaved().len();
        match result {
            Ok((Appended::Flushed(count), id)) => {
                drop(persistence);
                self.notice(
                    NoticeLevel::Info,
                    format!("saved the {} kept in memory", entries_text(count)),
                );
                id
            }
            Ok((Appended::Saved, id)) => {
                self.lease_new_session(&persistence).await;
                id
            }
            Ok((Appended::Kept, id)) => id,
            Err(error) => {
                // The entry is kept as the last unsaved line, with the id it will be stored as.
                let kept = persistence
                    .unsaved()
                    .last()
                    .and_then(|raw| raw.entry.id.clone());
                drop(persistence);
                self.check_lease_error(&error);
                if before == 0 && self.read_only().is_none() {
                    self.notice(
                        NoticeLevel::Error,
                        format!(
                            "could not save to the session database: {error}; {} kept in memory and written with the next one",
                            entries_text(unsaved)
                        ),
                    );
                }
                kept
            }
        }
    }

    /// Writes a pending session to the store now (before operations that read the tree).
    pub(super) async fn ensure_stored(&self) -> Result<SessionId, SessionError> {
        let mut persistence = self.inner.persistence.lock().await;
        self.inner.writer.materialize(&mut persistence).await?;
        self.lease_new_session(&persistence).await;
        Ok(persistence.id())
    }

    /// Returns the session id.
    pub async fn session_id(&self) -> SessionId {
        self.inner.persistence.lock().await.id()
    }

    /// Returns the session header line (as stored, or as it will be written).
    pub async fn header_line(&self) -> Result<String, SessionError> {
        let (id, pending) = {
            let persistence = self.inner.persistence.lock().await;
            match &*persistence {
                Persistence::Pending { header, .. } => (persistence.id(), Some(header.to_line())),
                Persistence::Stored { .. } => (persistence.id(), None),
            }
        };
        if let Some(line) = pending {
            return Ok(line);
        }
        let store = self.store().clone();
        let bytes = blocking(move || store.header_bytes(&id)).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Returns whether the session exists in the store yet.
    pub async fn is_persisted(&self) -> bool {
        self.inner.persistence.lock().await.is_stored()
    }

    /// Returns the entries not yet accepted by the store (for `/export` after a failure).
    pub async fn unsaved_entries(&self) -> Vec<EntryKind> {
        self.inner.persistence.lock().await.unsaved_kinds()
    }

    /// Returns the lines a stored session could not write yet, as they will be stored (each
    /// the child of the one before, the first a child of the store's leaf); empty for a
    /// session not written yet.
    pub async fn unsaved_lines(&self) -> Vec<Vec<u8>> {
        self.inner
            .persistence
            .lock()
            .await
            .unsaved()
            .iter()
            .map(|raw| raw.payload.clone())
            .collect()
    }

    /// Returns every entry of the session in append order, as the reference's entry objects
    /// (buffered entries of a session not yet written included).
    pub async fn entries_json(&self) -> Result<Vec<Value>, SessionError> {
        let stored = {
            let persistence = self.inner.persistence.lock().await;
            match &*persistence {
                Persistence::Pending { entries, .. } => {
                    return Ok(entries
                        .iter()
                        .filter_map(|raw| crate::support::json::parse_lenient(&raw.payload).ok())
                        .collect());
                }
                Persistence::Stored { id, .. } => id.clone(),
            }
        };
        let store = self.store().clone();
        let entries = blocking(move || store.entries(&stored)).await?;
        Ok(entries
            .iter()
            .filter_map(|entry| crate::support::json::parse_lenient(&entry.payload).ok())
            .collect())
    }

    /// Returns entry `id` as the reference's entry object (`None` when it is not found or
    /// the session cannot be read).
    pub(super) async fn entry_json(&self, id: &EntryId) -> Option<Value> {
        let wanted = id.to_string();
        self.entries_json()
            .await
            .ok()?
            .into_iter()
            .rev()
            .find(|entry| entry["id"] == wanted.as_str())
    }

    /// Returns the entries of the active path, root first, as the reference's entry objects.
    pub async fn branch_json(&self) -> Result<Vec<Value>, SessionError> {
        let stored = {
            let persistence = self.inner.persistence.lock().await;
            match &*persistence {
                Persistence::Pending { entries, leaf, .. } => {
                    let mut path = Vec::new();
                    let mut current = leaf.clone();
                    while let Some(id) = current {
                        let Some(raw) = entries
                            .iter()
                            .rev()
                            .find(|raw| raw.entry.id.as_ref() == Some(&id))
                        else {
                            break;
                        };
                        if path.len() > entries.len() {
                            break;
                        }
                        path.push(raw);
                        current = raw.entry.parent_id.clone();
                    }
                    return Ok(path
                        .into_iter()
                        .rev()
                        .filter_map(|raw| crate::support::json::parse_lenient(&raw.payload).ok())
                        .collect());
                }
                Persistence::Stored { id, .. } => id.clone(),
            }
        };
        let store = self.store().clone();
        let entries = blocking(move || store.branch_path(&stored, &LeafSelector::Current)).await?;
        Ok(entries
            .iter()
            .filter_map(|entry| crate::support::json::parse_lenient(&entry.payload).ok())
            .collect())
    }

    /// Returns the leaf entry id (`None` before the first entry).
    pub async fn leaf_id(&self) -> Result<Option<EntryId>, SessionError> {
        let stored = {
            let persistence = self.inner.persistence.lock().await;
            match &*persistence {
                Persistence::Pending { leaf, .. } => return Ok(leaf.clone()),
                Persistence::Stored { id, .. } => id.clone(),
            }
        };
        let store = self.store().clone();
        let leaf = blocking(move || store.leaf(&stored)).await?;
        Ok(leaf.and_then(|stored| stored.entry.id))
    }
}

/// `1 entry`, `3 entries`.
fn entries_text(count: usize) -> String {
    format!("{count} entr{}", if count == 1 { "y" } else { "ies" })
}
