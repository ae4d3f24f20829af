//! The leaf, and reads: entries, paths, the model context, the tree.

use std::collections::HashMap;

use crate::model::entry::{BranchSummaryEntry, Entry, EntryKind};
use crate::model::ids::{EntryId, SessionId};
use crate::model::message::Usage;

use crate::store::context;
use crate::store::db::Db;
use crate::store::sql::{self};
use crate::store::tree::{self, TreeNode};
use crate::store::types::*;
use crate::store::{Result, SessionContext, SessionStore, StoreError, derived};

impl SessionStore {
    // ----- leaf -----------------------------------------------------------------------------

    /// Moves the leaf to an existing entry (the latest line with that id).
    pub fn branch(&self, session: &SessionId, id: &EntryId) -> Result<()> {
        self.write_session(session, |db, sid| {
            let seq = Self::seq_of(db, sid, session, id)?;
            sql::set_leaf(db, sid, Some(seq))
        })
    }

    /// Moves the leaf to before the first entry (the next append is a new root).
    pub fn reset_leaf(&self, session: &SessionId) -> Result<()> {
        self.write_session(session, |db, sid| sql::set_leaf(db, sid, None))
    }

    /// Moves the leaf to `target` (or before the first entry) and appends a `branch_summary`
    /// child there, in one transaction. `fromId` is the leaf left (1.6.0
    /// `branchWithSummary`: `this.leafId ?? "root"`).
    pub fn branch_with_summary(
        &self,
        session: &SessionId,
        target: Option<&EntryId>,
        summary: String,
        details: Option<serde_json::Value>,
        from_hook: Option<bool>,
    ) -> Result<StoredEntry> {
        self.branch_with_summary_usage(session, target, summary, details, None, from_hook)
    }

    /// As [`Self::branch_with_summary`], with the usage of the summary request.
    pub fn branch_with_summary_usage(
        &self,
        session: &SessionId,
        target: Option<&EntryId>,
        summary: String,
        details: Option<serde_json::Value>,
        usage: Option<Usage>,
        from_hook: Option<bool>,
    ) -> Result<StoredEntry> {
        self.write_session(session, |db, sid| {
            let seq = match target {
                Some(id) => Some(Self::seq_of(db, sid, session, id)?),
                None => None,
            };
            let from_id = match sql::leaf(db, sid)? {
                Some(leaf) => sql::id_by_seq(db, sid, leaf)?.flatten(),
                None => None,
            };
            sql::set_leaf(db, sid, seq)?;
            let kind = EntryKind::BranchSummary(BranchSummaryEntry {
                from_id: from_id.unwrap_or_else(|| "root".to_owned()),
                summary,
                details,
                usage,
                from_hook,
            });
            Self::append_in(db, sid, &self.inner, kind)
        })
    }

    pub(super) fn seq_of(db: Db<'_>, sid: i64, session: &SessionId, id: &EntryId) -> Result<i64> {
        sql::latest_seq_of_id(db, sid, id.as_str())?.ok_or_else(|| StoreError::EntryNotFound {
            session: session.clone(),
            id: id.clone(),
        })
    }

    /// Returns the leaf entry (`None`: before the first entry).
    pub fn leaf(&self, session: &SessionId) -> Result<Option<StoredEntry>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            match sql::leaf(db, sid)? {
                Some(seq) => Self::stored_by_seq(db, sid, seq),
                None => Ok(None),
            }
        })
    }

    // ----- reads ----------------------------------------------------------------------------

    pub(super) fn stored(path: &str, row: sql::EntryRow) -> Result<StoredEntry> {
        let entry = Entry::parse(&row.payload).ok_or_else(|| StoreError::Corrupt {
            path: path.to_owned(),
            message: format!("entry #{} is not an entry object", row.seq),
        })?;
        Ok(StoredEntry {
            seq: row.seq,
            entry,
            payload: row.payload,
        })
    }

    fn stored_by_seq(db: Db<'_>, sid: i64, seq: i64) -> Result<Option<StoredEntry>> {
        match sql::entry_by_seq(db, sid, seq)? {
            Some(row) => Self::stored(db.path(), row).map(Some),
            None => Ok(None),
        }
    }

    /// Returns the entry with this id (the latest line with it).
    pub fn entry(&self, session: &SessionId, id: &EntryId) -> Result<Option<StoredEntry>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            match sql::latest_seq_of_id(db, sid, id.as_str())? {
                Some(seq) => Self::stored_by_seq(db, sid, seq),
                None => Ok(None),
            }
        })
    }

    /// Returns the direct children of an entry, in append order (one per id, the latest line).
    pub fn children(&self, session: &SessionId, id: &EntryId) -> Result<Vec<StoredEntry>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            let mut out = Vec::new();
            for row in sql::entries_with_parent(db, sid, id.as_str())? {
                let latest = match &row.id {
                    Some(child_id) => sql::latest_seq_of_id(db, sid, child_id)?,
                    None => Some(row.seq),
                };
                if latest == Some(row.seq) {
                    out.push(Self::stored(db.path(), row)?);
                }
            }
            Ok(out)
        })
    }

    /// Returns every entry in append order.
    pub fn entries(&self, session: &SessionId) -> Result<Vec<StoredEntry>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            sql::all_entries(db, sid)?
                .into_iter()
                .map(|row| Self::stored(db.path(), row))
                .collect()
        })
    }

    fn resolve_leaf(
        db: Db<'_>,
        sid: i64,
        session: &SessionId,
        leaf: &LeafSelector,
    ) -> Result<Option<i64>> {
        match leaf {
            LeafSelector::Current => sql::leaf(db, sid),
            LeafSelector::Entry(id) => Self::seq_of(db, sid, session, id).map(Some),
        }
    }

    /// Returns the path from the root to the leaf (or to the selected entry).
    pub fn branch_path(
        &self,
        session: &SessionId,
        leaf: &LeafSelector,
    ) -> Result<Vec<StoredEntry>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            let Some(leaf_seq) = Self::resolve_leaf(db, sid, session, leaf)? else {
                return Ok(Vec::new());
            };
            let seqs = Self::path_seqs(db, sid, leaf_seq)?;
            let mut out = Vec::with_capacity(seqs.len());
            for seq in seqs {
                out.extend(Self::stored_by_seq(db, sid, seq)?);
            }
            Ok(out)
        })
    }

    /// Walks the path from the root to the leaf (or to the selected entry) one entry at a
    /// time, from one read snapshot: `visit` gets the leaf first ([`BranchStep::Leaf`], `None`
    /// when the session has no entries), then every entry of the path in path order. Memory
    /// stays bounded by the largest entry (plus one number per entry of the path), however
    /// long the branch. An error from `visit` stops the walk and is returned as it is.
    pub fn visit_branch<E: From<StoreError>>(
        &self,
        session: &SessionId,
        leaf: &LeafSelector,
        visit: &mut dyn FnMut(BranchStep<'_>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        self.read_visiting(|db, stopped| {
            let sid = Self::sid(db, session)?;
            let Some(leaf_seq) = Self::resolve_leaf(db, sid, session, leaf)? else {
                return Ok(stop_on(visit(BranchStep::Leaf(None)), stopped));
            };
            let seqs = Self::path_seqs(db, sid, leaf_seq)?;
            let mut last = match seqs.last() {
                Some(&seq) => Self::stored_by_seq(db, sid, seq)?,
                None => None,
            };
            if stop_on(visit(BranchStep::Leaf(last.as_ref())), stopped) {
                return Ok(true);
            }
            let count = seqs.len();
            for (index, seq) in seqs.into_iter().enumerate() {
                let stored = if index + 1 == count {
                    last.take()
                } else {
                    Self::stored_by_seq(db, sid, seq)?
                };
                if let Some(stored) = stored
                    && stop_on(visit(BranchStep::Entry(&stored)), stopped)
                {
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }

    /// [`Self::visit_branch`] for a caller that needs the stored bytes alone (a JSON view,
    /// an export): each entry's payload on the path, root first, none parsed.
    pub fn visit_branch_payloads<E: From<StoreError>>(
        &self,
        session: &SessionId,
        leaf: &LeafSelector,
        visit: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        self.read_visiting(|db, stopped| {
            let sid = Self::sid(db, session)?;
            let Some(leaf_seq) = Self::resolve_leaf(db, sid, session, leaf)? else {
                return Ok(false);
            };
            let seqs = Self::path_seqs(db, sid, leaf_seq)?;
            let (Some(&first), Some(&last)) = (seqs.first(), seqs.last()) else {
                return Ok(false);
            };
            // A path in append order (every regular session's) that holds a good share of the
            // rows between its ends is read in one scan, skipping the other branches' rows;
            // else entry by entry.
            let ascending = seqs.windows(2).all(|pair| pair[0] < pair[1]);
            if ascending && (seqs.len() as i64).saturating_mul(4) > last - first {
                let mut wanted = seqs.iter().copied().peekable();
                let mut stop = false;
                sql::for_each_payload_between(db, sid, (first, last), |seq, payload| {
                    if wanted.peek() != Some(&seq) {
                        return Ok(true);
                    }
                    wanted.next();
                    stop = stop_on(visit(payload), stopped);
                    Ok(!stop)
                })?;
                return Ok(stop);
            }
            for seq in seqs {
                if let Some(payload) = sql::payload_by_seq(db, sid, seq)?
                    && stop_on(visit(&payload), stopped)
                {
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }

    /// Runs a visit in one read snapshot: `walk` returns whether the visitor stopped it
    /// (its error is then in the slot it was given, and returned as it is).
    fn read_visiting<E: From<StoreError>>(
        &self,
        walk: impl FnOnce(Db<'_>, &mut Option<E>) -> Result<bool>,
    ) -> std::result::Result<(), E> {
        let mut stopped: Option<E> = None;
        let walked = self.read(|db| walk(db, &mut stopped));
        match stopped {
            Some(error) => Err(error),
            None => walked.map(|_| ()).map_err(E::from),
        }
    }

    /// Returns the seqs of the path root → `leaf_seq` (cycle-safe).
    pub(super) fn path_seqs(db: Db<'_>, sid: i64, leaf_seq: i64) -> Result<Vec<i64>> {
        let session = sql::session_by_sid(db, sid)?;
        if session.as_ref().is_some_and(|row| row.irregular) {
            return derived::plain_walk(db, sid, leaf_seq);
        }
        sql::walk_path_seqs(db, sid, leaf_seq, 0)
    }

    /// Rebuilds the reference `SessionContext` at the leaf (or the selected entry).
    ///
    /// Reads only the path from the leaf up to where the last compaction's kept range begins,
    /// and only the payloads the messages need; model and thinking level come from the
    /// per-entry path state. Sessions with repeated ids or forward parent references use the
    /// plain walk.
    pub fn context(&self, session: &SessionId, leaf: &LeafSelector) -> Result<SessionContext> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            let Some(leaf_seq) = Self::resolve_leaf(db, sid, session, leaf)? else {
                return Ok(SessionContext::empty());
            };
            let irregular = sql::session_by_sid(db, sid)?.is_some_and(|row| row.irregular);
            if irregular {
                Self::context_plain(db, sid, leaf_seq)
            } else {
                Self::context_fast(db, sid, leaf_seq)
            }
        })
    }

    /// Rebuilds the context by the reference's own walk over the whole path, ignoring the
    /// derived path state: the slow reference the fast rebuild must agree with (`db check`,
    /// tests).
    pub fn context_by_plain_walk(
        &self,
        session: &SessionId,
        leaf: &LeafSelector,
    ) -> Result<SessionContext> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            match Self::resolve_leaf(db, sid, session, leaf)? {
                Some(leaf_seq) => Self::context_plain(db, sid, leaf_seq),
                None => Ok(SessionContext::empty()),
            }
        })
    }

    /// Walks from `leaf_seq` up to where the last compaction's kept range begins (the first
    /// kept entry when it is an ancestor, else the compaction; the root without a compaction);
    /// returns the leaf's path state and the rows in path order.
    fn kept_tail(
        db: Db<'_>,
        sid: i64,
        leaf_seq: i64,
    ) -> Result<(sql::PathState, Vec<sql::WalkRow>)> {
        let bounds = Self::kept_bounds(db, sid, leaf_seq)?;
        let mut rows = sql::walk_path(db, sid, leaf_seq, bounds.min_depth)?;
        bounds.trim(&mut rows, |row| row.seq);
        Ok((bounds.state, rows))
    }

    /// [`Self::kept_tail`]'s seqs alone (no entry row is read).
    fn kept_tail_seqs(db: Db<'_>, sid: i64, leaf_seq: i64) -> Result<Vec<i64>> {
        let bounds = Self::kept_bounds(db, sid, leaf_seq)?;
        let mut seqs = sql::walk_path_seqs(db, sid, leaf_seq, bounds.min_depth)?;
        bounds.trim(&mut seqs, |seq| *seq);
        Ok(seqs)
    }

    /// Where the kept tail of the path to `leaf_seq` begins: the depth of the last
    /// compaction's first kept entry (or of the compaction), and that entry when it is an
    /// ancestor of the compaction.
    fn kept_bounds(db: Db<'_>, sid: i64, leaf_seq: i64) -> Result<KeptBounds> {
        let corrupt = |what: &str| StoreError::Corrupt {
            path: db.path().to_owned(),
            message: format!("missing path state for {what}"),
        };
        let state = sql::path_state(db, sid, leaf_seq)?.ok_or_else(|| corrupt("the leaf"))?;
        let mut min_depth = 0;
        let mut first_kept_seq = None;
        if let Some(compaction_seq) = state.compaction_seq {
            let compaction_state =
                sql::path_state(db, sid, compaction_seq)?.ok_or_else(|| corrupt("a compaction"))?;
            min_depth = compaction_state.depth;
            let payload = sql::payload_by_seq(db, sid, compaction_seq)?.unwrap_or_default();
            let first_kept = crate::support::json::parse_lenient(&payload)
                .ok()
                .and_then(|value| {
                    value
                        .get("firstKeptEntryId")
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_owned)
                });
            if let Some(first_kept) = first_kept
                && let Some(first_seq) = sql::latest_seq_of_id(db, sid, &first_kept)?
                && let Some(first_state) = sql::path_state(db, sid, first_seq)?
                && first_state.depth < compaction_state.depth
            {
                min_depth = first_state.depth;
                first_kept_seq = Some(first_seq);
            }
        }
        Ok(KeptBounds {
            state,
            min_depth,
            first_kept_seq,
        })
    }

    /// Returns the part of the path a compaction plan needs: from where the last compaction's
    /// kept range begins (or the root) to the leaf, as stored entries. Planning a compaction
    /// on this tail gives the same plan as on the whole path, and it reads only the context.
    pub fn compaction_window(&self, session: &SessionId) -> Result<Vec<StoredEntry>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            let Some(leaf_seq) = sql::leaf(db, sid)? else {
                return Ok(Vec::new());
            };
            let irregular = sql::session_by_sid(db, sid)?.is_some_and(|row| row.irregular);
            let seqs: Vec<i64> = if irregular {
                derived::plain_walk(db, sid, leaf_seq)?
            } else {
                Self::kept_tail_seqs(db, sid, leaf_seq)?
            };
            let mut out = Vec::with_capacity(seqs.len());
            for seq in seqs {
                out.extend(Self::stored_by_seq(db, sid, seq)?);
            }
            Ok(out)
        })
    }

    fn context_fast(db: Db<'_>, sid: i64, leaf_seq: i64) -> Result<SessionContext> {
        let (state, rows) = Self::kept_tail(db, sid, leaf_seq)?;
        let path_rows: Vec<context::PathRow> = rows
            .into_iter()
            .map(|row| context::PathRow {
                seq: row.seq,
                id: row.id,
                type_name: row.type_name,
                payload: row.payload,
                flags: Some(row.flags),
            })
            .collect();
        let mut settings = context::PathSettings::default();
        if let Some(model_seq) = state.model_seq
            && let Some(row) = sql::entry_by_seq(db, sid, model_seq)?
        {
            settings.model = context::model_of(&row.type_name, &row.payload);
        }
        if let Some(thinking_seq) = state.thinking_seq
            && let Some(payload) = sql::payload_by_seq(db, sid, thinking_seq)?
        {
            settings.thinking_level = context::thinking_of(&payload);
        }
        Ok(context::build(path_rows, settings))
    }

    fn context_plain(db: Db<'_>, sid: i64, leaf_seq: i64) -> Result<SessionContext> {
        let seqs = derived::plain_walk(db, sid, leaf_seq)?;
        let mut rows = Vec::with_capacity(seqs.len());
        for seq in seqs {
            let Some(row) = sql::entry_by_seq(db, sid, seq)? else {
                continue;
            };
            let wanted = context::needs_payload_for_messages(&row.type_name)
                || context::needs_payload_for_settings(&row.type_name);
            rows.push(context::PathRow {
                seq: row.seq,
                id: row.id,
                type_name: row.type_name,
                payload: wanted.then_some(row.payload),
                flags: None,
            });
        }
        let settings = context::scan_settings(&rows);
        Ok(context::build(rows, settings))
    }

    /// Returns a session's message counts and token and cost totals over all its entries (the
    /// reference's `getSessionStats`: every branch, compacted history and omitted attempts
    /// included).
    pub fn session_totals(&self, session: &SessionId) -> Result<sql::SessionTotals> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            sql::session_totals(db, sid)
        })
    }

    /// The level the latest `thinking_level_change` on the path to the current leaf records
    /// (`None`: the path has none). 1.6.0 compares it with the live level when a run starts
    /// and records the live one when they differ (`_recordThinkingLevel`).
    pub fn branch_thinking_level(&self, session: &SessionId) -> Result<Option<String>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            let Some(leaf_seq) = Self::resolve_leaf(db, sid, session, &LeafSelector::Current)?
            else {
                return Ok(None);
            };
            let irregular = sql::session_by_sid(db, sid)?.is_some_and(|row| row.irregular);
            let thinking_seq = if irregular {
                let mut found = None;
                for seq in derived::plain_walk(db, sid, leaf_seq)? {
                    if sql::entry_by_seq(db, sid, seq)?
                        .is_some_and(|row| row.type_name == "thinking_level_change")
                    {
                        found = Some(seq);
                    }
                }
                found
            } else {
                sql::path_state(db, sid, leaf_seq)?.and_then(|state| state.thinking_seq)
            };
            Ok(match thinking_seq {
                Some(seq) => sql::payload_by_seq(db, sid, seq)?
                    .and_then(|payload| context::thinking_of(&payload)),
                None => None,
            })
        })
    }

    /// Returns every system message on the branch to the leaf (or the selected entry), root
    /// first, as JSON text — those before a compaction too (1.6.0 restores the tool loadout
    /// from them). Follows the chain of `entry_path.system_seq`: the cost is the number of
    /// system messages, not the length of the branch.
    pub fn branch_system_messages(
        &self,
        session: &SessionId,
        leaf: &LeafSelector,
    ) -> Result<Vec<String>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            let Some(leaf_seq) = Self::resolve_leaf(db, sid, session, leaf)? else {
                return Ok(Vec::new());
            };
            let irregular = sql::session_by_sid(db, sid)?.is_some_and(|row| row.irregular);
            let mut seqs = Vec::new();
            if irregular {
                for seq in derived::plain_walk(db, sid, leaf_seq)? {
                    seqs.push(seq);
                }
            } else {
                let mut current =
                    sql::path_state(db, sid, leaf_seq)?.and_then(|state| state.system_seq);
                while let Some(seq) = current {
                    seqs.push(seq);
                    let state = sql::path_state(db, sid, seq)?;
                    current = match state.and_then(|state| state.parent_seq) {
                        Some(parent) => {
                            sql::path_state(db, sid, parent)?.and_then(|s| s.system_seq)
                        }
                        None => None,
                    };
                }
                seqs.reverse();
            }
            let mut out = Vec::with_capacity(seqs.len());
            for seq in seqs {
                let Some(row) = sql::entry_by_seq(db, sid, seq)? else {
                    continue;
                };
                if row.type_name != "message" {
                    continue;
                }
                let path_row = context::PathRow {
                    seq: row.seq,
                    id: row.id,
                    type_name: row.type_name,
                    payload: Some(row.payload),
                    flags: None,
                };
                if let Some(message) = context::system_message_text(&path_row) {
                    out.push(message);
                }
            }
            Ok(out)
        })
    }

    /// Returns the tree flattened in pre-order, with labels.
    pub fn tree(&self, session: &SessionId) -> Result<Vec<TreeNode>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            let shapes = sql::all_shapes(db, sid)?;
            let inputs: Vec<tree::TreeInput> = shapes
                .into_iter()
                .map(|shape| tree::TreeInput {
                    seq: shape.seq,
                    id: shape.id,
                    parent_id: shape.parent_id,
                    type_name: shape.type_name,
                    timestamp: shape.timestamp,
                })
                .collect();
            let labels: HashMap<String, (String, String)> = sql::labels(db, sid)?
                .into_iter()
                .map(|row| (row.target_id, (row.label, row.label_ts)))
                .collect();
            Ok(tree::build(&inputs, &labels))
        })
    }

    /// Returns the current labels `(target, label, label timestamp)` in the reference's order.
    pub fn labels(&self, session: &SessionId) -> Result<Vec<(EntryId, String, String)>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            Ok(sql::labels(db, sid)?
                .into_iter()
                .map(|row| (EntryId::new(row.target_id), row.label, row.label_ts))
                .collect())
        })
    }

    /// Returns the current label of an entry.
    pub fn label(&self, session: &SessionId, id: &EntryId) -> Result<Option<String>> {
        self.read(|db| {
            let sid = Self::sid(db, session)?;
            sql::label_of(db, sid, id.as_str())
        })
    }

    /// Returns the session name (the last `session_info`, trimmed; empty clears).
    pub fn session_name(&self, session: &SessionId) -> Result<Option<String>> {
        Ok(self.session(session)?.name)
    }
}

/// Where a path's kept tail begins ([`SessionStore::kept_bounds`]).
struct KeptBounds {
    /// The leaf's path state.
    state: sql::PathState,
    /// The walk stops below this depth.
    min_depth: i64,
    /// The compaction's first kept entry, when it is an ancestor of the compaction.
    first_kept_seq: Option<i64>,
}

impl KeptBounds {
    /// When the first kept entry is not the walk's first row (it is not an ancestor), only
    /// the summary and what follows the compaction count: drops the rows before it.
    fn trim<T>(&self, rows: &mut Vec<T>, seq: impl Fn(&T) -> i64) {
        if let Some(first_seq) = self.first_kept_seq
            && rows.first().map(&seq) != Some(first_seq)
            && let Some(compaction_seq) = self.state.compaction_seq
        {
            rows.retain(|row| seq(row) >= compaction_seq);
        }
    }
}

/// Keeps a visitor's error in `slot`; returns whether there was one (the walk stops).
fn stop_on<E>(outcome: std::result::Result<(), E>, slot: &mut Option<E>) -> bool {
    match outcome {
        Ok(()) => false,
        Err(error) => {
            *slot = Some(error);
            true
        }
    }
}
