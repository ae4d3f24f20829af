//! Fork, and raw lines for interchange.

use std::collections::HashSet;

use crate::model::entry::{Entry, EntryKind, SessionHeader};
use crate::model::ids::{EntryId, SessionId};

use crate::store::db::Db;
use crate::store::sql::{self, EntryInsert};
use crate::store::types::*;
use crate::store::{Result, SessionStore, derived};

impl SessionStore {
    // ----- fork -----------------------------------------------------------------------------

    /// Forks the path root → `at` (the leaf when `None` is not wanted, pass the leaf id) into
    /// a new session, as the reference's `createBranchedSession`: entries copied unchanged
    /// without `label` entries, then the current labels of path entries re-created as new
    /// label entries chained at the end with their original timestamps. `at = None` creates an
    /// empty session. The new header's `parentSession` is the source session id.
    pub fn fork(
        &self,
        session: &SessionId,
        at: Option<&EntryId>,
        cwd: Option<&str>,
    ) -> Result<SessionSummary> {
        let now = self.inner.clock.now_ms();
        self.write(|db| {
            let sid = Self::sid(db, session)?;
            let source = Self::summary_by_sid(db, sid)?;
            let header = SessionHeader::new(
                SessionId::generate(&self.inner.ids, now),
                crate::support::clock::iso_from_ms(now),
                cwd.map_or_else(|| source.cwd.clone(), str::to_owned),
                Some(session.to_string()),
            );
            let new_sid = Self::insert_header(db, &header, header.to_line().as_bytes())?;
            let Some(at) = at else {
                return Self::summary_by_sid(db, new_sid);
            };
            let leaf_seq = Self::seq_of(db, sid, session, at)?;
            let seqs = Self::path_seqs(db, sid, leaf_seq)?;
            let mut copied_ids: HashSet<String> = HashSet::new();
            let mut last_id: Option<String> = None;
            let mut seq = 0;
            for source_seq in seqs {
                let Some(row) = sql::entry_by_seq(db, sid, source_seq)? else {
                    continue;
                };
                if row.type_name == "label" {
                    continue;
                }
                let stored = Self::stored(db.path(), row)?;
                let insert = EntryInsert {
                    sid: new_sid,
                    seq,
                    id: stored.entry.id.as_ref().map(EntryId::as_str),
                    parent_id: stored.entry.parent_id.as_ref().map(EntryId::as_str),
                    type_name: stored.entry.type_name(),
                    timestamp: &stored.entry.timestamp,
                    payload: &stored.payload,
                };
                derived::insert(db, &insert, &stored.entry)?;
                if let Some(id) = &stored.entry.id {
                    copied_ids.insert(id.to_string());
                }
                last_id = stored.entry.id.as_ref().map(EntryId::to_string);
                seq += 1;
            }
            for label in sql::labels(db, sid)? {
                if !copied_ids.contains(&label.target_id) {
                    continue;
                }
                let id =
                    EntryId::generate(&self.inner.ids, |candidate| copied_ids.contains(candidate));
                let entry = Entry {
                    id: Some(id.clone()),
                    parent_id: last_id.clone().map(EntryId::new),
                    timestamp: label.label_ts.clone(),
                    kind: EntryKind::Label {
                        target_id: Some(EntryId::new(label.target_id.clone())),
                        label: Some(label.label.clone()),
                    },
                    extra: serde_json::Map::new(),
                };
                let payload = entry.to_line().into_bytes();
                let insert = EntryInsert {
                    sid: new_sid,
                    seq,
                    id: Some(id.as_str()),
                    parent_id: entry.parent_id.as_ref().map(EntryId::as_str),
                    type_name: "label",
                    timestamp: &entry.timestamp,
                    payload: &payload,
                };
                derived::insert(db, &insert, &entry)?;
                copied_ids.insert(id.to_string());
                last_id = Some(id.to_string());
                seq += 1;
            }
            if seq > 0 {
                sql::set_leaf(db, new_sid, Some(seq - 1))?;
            }
            Self::summary_by_sid(db, new_sid)
        })
    }

    /// Copies a whole session (every entry, unchanged) into a new session for `cwd` whose
    /// `parentSession` is the source id — the reference's `--fork` (`forkFrom`).
    pub fn copy_session(&self, source: &SessionId, cwd: &str) -> Result<SessionSummary> {
        self.copy_session_as(source, cwd, None)
    }

    /// [`Self::copy_session`] under the id `id` when given (`--fork` with `--session-id`);
    /// fails with `SessionExists` when that id is taken.
    pub fn copy_session_as(
        &self,
        source: &SessionId,
        cwd: &str,
        id: Option<&SessionId>,
    ) -> Result<SessionSummary> {
        let now = self.inner.clock.now_ms();
        self.write(|db| {
            let sid = Self::sid(db, source)?;
            let header = SessionHeader::new(
                id.cloned()
                    .unwrap_or_else(|| SessionId::generate(&self.inner.ids, now)),
                crate::support::clock::iso_from_ms(now),
                cwd.to_owned(),
                Some(source.to_string()),
            );
            let new_sid = Self::insert_header(db, &header, header.to_line().as_bytes())?;
            let entries = sql::all_entries(db, sid)?
                .into_iter()
                .map(|row| {
                    Self::stored(db.path(), row).map(|stored| RawEntry {
                        payload: stored.payload,
                        entry: stored.entry,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Self::append_raw_in(db, new_sid, &entries)?;
            Self::summary_by_sid(db, new_sid)
        })
    }

    // ----- raw lines (interchange) ----------------------------------------------------------

    /// Stores a session from lines read elsewhere (a file), byte for byte, in one transaction:
    /// the header bytes, then every entry in order; the leaf becomes the last entry. Ids and
    /// parents are kept as they are (duplicates and orphans included).
    pub fn insert_raw_session(
        &self,
        header: &SessionHeader,
        header_bytes: &[u8],
        entries: &[RawEntry],
    ) -> Result<SessionSummary> {
        self.write(|db| {
            let sid = Self::insert_header(db, header, header_bytes)?;
            Self::append_raw_in(db, sid, entries)?;
            Self::summary_by_sid(db, sid)
        })
    }

    /// Appends lines read elsewhere to an existing session, byte for byte, in one transaction;
    /// the leaf becomes the last of them (unchanged when `entries` is empty).
    pub fn append_raw(&self, session: &SessionId, entries: &[RawEntry]) -> Result<SessionSummary> {
        self.write_session(session, |db, sid| {
            Self::append_raw_in(db, sid, entries)?;
            Self::summary_by_sid(db, sid)
        })
    }

    fn append_raw_in(db: Db<'_>, sid: i64, entries: &[RawEntry]) -> Result<()> {
        let first_seq = sql::next_seq(db, sid)?;
        let mut last = None;
        for (seq, raw) in (first_seq..).zip(entries) {
            let row = EntryInsert {
                sid,
                seq,
                id: raw.entry.id.as_ref().map(EntryId::as_str),
                parent_id: raw.entry.parent_id.as_ref().map(EntryId::as_str),
                type_name: raw.entry.type_name(),
                timestamp: &raw.entry.timestamp,
                payload: &raw.payload,
            };
            derived::insert(db, &row, &raw.entry)?;
            last = Some(seq);
        }
        if last.is_some() {
            sql::set_leaf(db, sid, last)?;
        }
        Ok(())
    }
}
