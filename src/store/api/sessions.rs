//! Sessions (create, list, resolve, rename, delete) and appends.

use crate::model::ModelRef;
use crate::model::entry::{CompactionEntry, Entry, EntryKind, SessionHeader};
use crate::model::ids::{EntryId, SessionId};
use crate::model::message::{AgentMessage, UserContent};

use crate::store::api::Inner;
use crate::store::db::Db;
use crate::store::sql::{self, EntryInsert};
use crate::store::types::*;
use crate::store::{Result, SessionStore, StoreError, derived};

impl SessionStore {
    // ----- sessions -------------------------------------------------------------------------

    /// Creates an empty session (a v3 header, no entries, leaf before the first entry).
    pub fn create_session(&self, new: &NewSession) -> Result<SessionSummary> {
        let now = self.inner.clock.now_ms();
        let header = SessionHeader::new(
            SessionId::generate(&self.inner.ids, now),
            crate::support::clock::iso_from_ms(now),
            new.cwd.clone(),
            new.parent_session.clone(),
        );
        self.write(|db| {
            let sid = Self::insert_header(db, &header, header.to_line().as_bytes())?;
            Self::summary_by_sid(db, sid)
        })
    }

    /// Inserts a session row for a header; fails if the id exists.
    pub(crate) fn insert_header(
        db: Db<'_>,
        header: &SessionHeader,
        header_bytes: &[u8],
    ) -> Result<i64> {
        if sql::sid_of(db, header.id.as_str())?.is_some() {
            return Err(StoreError::SessionExists {
                id: header.id.clone(),
            });
        }
        sql::insert_session(
            db,
            header.id.as_str(),
            &header.cwd,
            &header.timestamp,
            header.parent_session.as_deref(),
            header_bytes,
        )
    }

    pub(super) fn summary_by_sid(db: Db<'_>, sid: i64) -> Result<SessionSummary> {
        sql::session_by_sid(db, sid)?
            .map(SessionSummary::from_row)
            .ok_or_else(|| StoreError::SessionNotFound {
                query: format!("#{sid}"),
            })
    }

    /// Returns a session's summary.
    pub fn session(&self, session: &SessionId) -> Result<SessionSummary> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            Self::summary_by_sid(db, sid)
        })
    }

    /// Returns the session header as stored (the line export writes first).
    pub fn header_bytes(&self, session: &SessionId) -> Result<Vec<u8>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            sql::header(db, sid)
        })
    }

    /// Resolves a full session id or a prefix matching exactly one session.
    pub fn resolve(&self, query: &str) -> Result<SessionId> {
        self.read(|db| {
            if sql::sid_of(db, query)?.is_some() {
                return Ok(SessionId::new(query));
            }
            let matches = if query.is_empty() {
                Vec::new()
            } else {
                sql::sessions_with_prefix(db, query, 50)?
            };
            match matches.len() {
                0 => Err(StoreError::SessionNotFound {
                    query: query.to_owned(),
                }),
                1 => Ok(SessionId::new(matches[0].clone())),
                _ => Err(StoreError::AmbiguousSession {
                    prefix: query.to_owned(),
                    candidates: matches.into_iter().map(SessionId::new).collect(),
                }),
            }
        })
    }

    /// Returns the session with the latest activity whose `cwd` equals `cwd`.
    pub fn most_recent(&self, cwd: &str) -> Result<Option<SessionId>> {
        self.read(|db| {
            Ok(sql::list_sessions(db, Some(cwd))?
                .into_iter()
                .next()
                .map(|row| SessionId::new(row.id)))
        })
    }

    /// Lists sessions, latest activity first.
    pub fn list(&self, scope: &ListScope) -> Result<Vec<SessionSummary>> {
        self.read(|db| {
            let cwd = match scope {
                ListScope::All => None,
                ListScope::Cwd(cwd) => Some(cwd.as_str()),
            };
            Ok(sql::list_sessions(db, cwd)?
                .into_iter()
                .map(SessionSummary::from_row)
                .collect())
        })
    }

    /// Deletes a session and all its entries (the only delete there is).
    pub fn delete_session(&self, session: &SessionId) -> Result<()> {
        self.write_session(session, derived::delete_session)
    }

    // ----- appends --------------------------------------------------------------------------

    /// Appends an entry of any kind as a child of the leaf and makes it the leaf.
    pub fn append(&self, session: &SessionId, kind: EntryKind) -> Result<StoredEntry> {
        self.write_session(session, |db, sid| {
            Self::append_in(db, sid, &self.inner, kind)
        })
    }

    pub(super) fn append_in(
        db: Db<'_>,
        sid: i64,
        inner: &Inner,
        kind: EntryKind,
    ) -> Result<StoredEntry> {
        let leaf_seq = sql::leaf(db, sid)?;
        let parent_id = match leaf_seq {
            Some(seq) => sql::id_by_seq(db, sid, seq)?.flatten(),
            None => None,
        };
        let mut lookup_error = None;
        let id = EntryId::generate(&inner.ids, |candidate| {
            match sql::id_taken(db, sid, candidate) {
                Ok(taken) => taken,
                Err(error) => {
                    lookup_error = Some(error);
                    true
                }
            }
        });
        if let Some(error) = lookup_error {
            return Err(error);
        }
        let timestamp = inner.clock.now_iso();
        let entry = Entry {
            id: Some(id),
            parent_id: parent_id.map(EntryId::new),
            kind: kind.stamped(&timestamp),
            timestamp,
            extra: serde_json::Map::new(),
        };
        let payload = entry.to_line().into_bytes();
        let seq = sql::next_seq(db, sid)?;
        let row = EntryInsert {
            sid,
            seq,
            id: entry.id.as_ref().map(EntryId::as_str),
            parent_id: entry.parent_id.as_ref().map(EntryId::as_str),
            type_name: entry.type_name(),
            timestamp: &entry.timestamp,
            payload: &payload,
        };
        derived::insert(db, &row, &entry)?;
        sql::set_leaf(db, sid, Some(seq))?;
        Ok(StoredEntry {
            seq,
            entry,
            payload,
        })
    }

    /// Appends a `message` entry.
    pub fn append_message(
        &self,
        session: &SessionId,
        message: AgentMessage,
    ) -> Result<StoredEntry> {
        self.append(session, EntryKind::Message(message))
    }

    /// Appends a `thinking_level_change` entry.
    pub fn append_thinking_level(&self, session: &SessionId, level: &str) -> Result<StoredEntry> {
        self.append(
            session,
            EntryKind::ThinkingLevelChange {
                thinking_level: level.to_owned(),
            },
        )
    }

    /// Appends a `model_change` entry.
    pub fn append_model_change(&self, session: &SessionId, model: ModelRef) -> Result<StoredEntry> {
        self.append(session, EntryKind::ModelChange(model))
    }

    /// Appends a `compaction` entry.
    pub fn append_compaction(
        &self,
        session: &SessionId,
        compaction: CompactionEntry,
    ) -> Result<StoredEntry> {
        self.append(session, EntryKind::Compaction(compaction))
    }

    /// Appends a `custom` entry (extension state, never in the context).
    pub fn append_custom(
        &self,
        session: &SessionId,
        custom_type: &str,
        data: Option<serde_json::Value>,
    ) -> Result<StoredEntry> {
        self.append(
            session,
            EntryKind::Custom {
                custom_type: custom_type.to_owned(),
                data,
            },
        )
    }

    /// Appends a `custom_message` entry (an extension message in the context).
    pub fn append_custom_message(
        &self,
        session: &SessionId,
        custom_type: &str,
        content: UserContent,
        display: bool,
        details: Option<serde_json::Value>,
    ) -> Result<StoredEntry> {
        self.append(
            session,
            EntryKind::CustomMessage {
                custom_type: custom_type.to_owned(),
                content,
                display,
                details,
            },
        )
    }

    /// Appends a `label` entry; `None` or an empty label clears. The target must exist.
    pub fn append_label(
        &self,
        session: &SessionId,
        target: &EntryId,
        label: Option<&str>,
    ) -> Result<StoredEntry> {
        self.write_session(session, |db, sid| {
            if sql::latest_seq_of_id(db, sid, target.as_str())?.is_none() {
                return Err(StoreError::EntryNotFound {
                    session: session.clone(),
                    id: target.clone(),
                });
            }
            let kind = EntryKind::Label {
                target_id: Some(target.clone()),
                label: label.map(str::to_owned),
            };
            Self::append_in(db, sid, &self.inner, kind)
        })
    }

    /// Appends a `session_info` entry (trimmed, as the reference writes it).
    pub fn append_session_info(&self, session: &SessionId, name: &str) -> Result<StoredEntry> {
        self.append(
            session,
            EntryKind::SessionInfo {
                name: Some(name.trim().to_owned()),
            },
        )
    }
}
