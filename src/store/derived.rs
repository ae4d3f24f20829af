//! Derived data, maintained in the append transaction and rebuildable from the entries:
//! per-entry path state, current labels, session statistics, and the irregular flag.
//!
//! Invariant: nothing here is a source of truth. [`rebuild_session`] recomputes every derived
//! row of a session from its entries alone and must give what the appends gave.

use std::collections::{HashMap, HashSet};

use crate::model::entry::{BranchSummaryEntry, CompactionEntry, Entry, EntryKind};
use crate::model::message::{AgentMessage, Usage};
use crate::store::db::Db;
use crate::store::error::StoreError;
use crate::store::search::docs::docs_for;
use crate::store::search::fts;
use crate::store::sql::{
    self, Aggregates, EntryInsert, PathState, RebuildMode, StatsDelta, UsageRow,
};

/// Inserts an entry row and its derived rows; the caller moves the leaf.
pub fn insert(db: Db<'_>, row: &EntryInsert<'_>, entry: &Entry) -> Result<(), StoreError> {
    sql::insert_entry(db, row)?;
    apply(db, row, entry)
}

/// Computes and stores the derived rows of one entry that is already in `entries`.
pub fn apply(db: Db<'_>, row: &EntryInsert<'_>, entry: &Entry) -> Result<(), StoreError> {
    apply_to(db, row, entry, Writes::LIVE)
}

/// What [`apply_to`] writes of an entry.
#[derive(Debug, Clone, Copy)]
struct Writes<'i> {
    /// Whether the entry's own rows are written: path state, context edits, search documents,
    /// usage.
    per_entry: bool,
    /// Where its search documents go: `None`, where a live write goes
    /// ([`fts::live_targets`]); a reindex step names the next index alone.
    indexes: Option<&'i [fts::Index]>,
    /// Where the session's aggregates (statistics, labels, irregular flag) are updated.
    aggregates: Aggregates,
}

impl Writes<'static> {
    /// An append: every row, the live tables.
    const LIVE: Self = Self {
        per_entry: true,
        indexes: None,
        aggregates: Aggregates::Live,
    };
}

/// [`apply`], writing what `writes` says.
fn apply_to(
    db: Db<'_>,
    row: &EntryInsert<'_>,
    entry: &Entry,
    writes: Writes<'_>,
) -> Result<(), StoreError> {
    let sid = row.sid;
    let seq = row.seq;
    let aggregates = writes.aggregates;

    // Irregular: an earlier line names this line's id as its parent (a forward reference, or
    // a repeated id whose earlier copy has children), or the line is its own parent. Then
    // "a lookup takes the latest line" gives earlier entries another parent than the one
    // resolved when they were stored, so path state is not used for this session. A repeated
    // id alone is harmless: on any path each id occurs once (a second occurrence would be a
    // cycle), so the latest line with an id is the one a path can hold.
    if let Some(id) = row.id {
        let forward = row.parent_id == Some(id) || sql::has_child_before(db, sid, id, seq)?;
        if forward {
            sql::mark_irregular(db, aggregates, sid)?;
        }
    }
    if writes.per_entry {
        apply_entry_rows(db, row, entry, writes.indexes)?;
    }
    apply_aggregates(db, row, entry, aggregates)
}

/// The rows of one entry alone: path state, context edits, search documents, usage.
fn apply_entry_rows(
    db: Db<'_>,
    row: &EntryInsert<'_>,
    entry: &Entry,
    indexes: Option<&[fts::Index]>,
) -> Result<(), StoreError> {
    let sid = row.sid;
    let seq = row.seq;

    // Path state from the parent as resolved now.
    let parent_seq = match row.parent_id {
        Some(parent_id) => sql::latest_seq_of_id_before(db, sid, parent_id, seq)?,
        None => None,
    };
    let parent_state = match parent_seq {
        Some(parent_seq) => sql::path_state(db, sid, parent_seq)?,
        None => None,
    };
    // The typed view already knows the role; only a line whose message could not be read
    // at all needs its payload parsed again.
    let is_system = match entry.message() {
        Some(AgentMessage::System(_)) => true,
        Some(AgentMessage::Unknown(value)) => {
            value.get("role").and_then(serde_json::Value::as_str) == Some("system")
        }
        Some(_) => false,
        None => row.type_name == "message" && message_role_is(row.payload, "system"),
    };
    let is_assistant = match entry.message() {
        Some(AgentMessage::Assistant(_)) => true,
        Some(AgentMessage::Unknown(value)) => {
            value.get("role").and_then(serde_json::Value::as_str) == Some("assistant")
        }
        Some(
            AgentMessage::System(_)
            | AgentMessage::User(_)
            | AgentMessage::ToolResult(_)
            | AgentMessage::BashExecution(_)
            | AgentMessage::Custom(_)
            | AgentMessage::BranchSummary(_)
            | AgentMessage::CompactionSummary(_),
        ) => false,
        None => row.type_name == "message" && message_role_is(row.payload, "assistant"),
    };
    let parent_seq = parent_state.and(parent_seq);
    let jump_seq = match (parent_seq, parent_state) {
        (Some(parent_seq), Some(parent)) => jump_for_child(db, sid, parent_seq, &parent)?,
        _ => seq,
    };
    let state = PathState {
        parent_seq,
        depth: parent_state.map_or(0, |state| state.depth + 1),
        jump_seq,
        compaction_seq: if row.type_name == "compaction" {
            Some(seq)
        } else {
            parent_state.and_then(|state| state.compaction_seq)
        },
        model_seq: if row.type_name == "model_change" || is_assistant {
            Some(seq)
        } else {
            parent_state.and_then(|state| state.model_seq)
        },
        thinking_seq: if row.type_name == "thinking_level_change" {
            Some(seq)
        } else {
            parent_state.and_then(|state| state.thinking_seq)
        },
        system_seq: if is_system {
            Some(seq)
        } else {
            parent_state.and_then(|state| state.system_seq)
        },
        flags: crate::store::context::flags_of(row.type_name, row.payload),
    };
    sql::insert_path_state(db, sid, seq, &state)?;

    // Context edits, by target.
    if let EntryKind::ContextEdit(edit) = &entry.kind {
        sql::insert_context_edit(
            db,
            sid,
            seq,
            edit.target_id.as_ref().map(|id| id.as_str()),
            matches!(edit.replacement, Some(serde_json::Value::Null)),
        )?;
    }

    // Full-text documents and usage rows.
    let ts = ts_of(row);
    let docs = docs_for(entry);
    if !docs.is_empty() {
        let indexes = match indexes {
            Some(indexes) => indexes,
            None => fts::live_targets(db, sid)?,
        };
        for doc in docs {
            fts::insert_search_doc_into(db, indexes, sid, seq, &doc, ts)?;
        }
    }
    if let Some(accounted) = &accounting(entry) {
        let (day, week) = day_and_week(ts);
        let mut usage = UsageRow {
            ts,
            day: &day,
            week: &week,
            role: accounted.role,
            provider: accounted.provider,
            model: accounted.model,
            is_message: accounted.is_message,
            tool_calls: accounted.tool_calls,
            ..UsageRow::default()
        };
        if let Some(tokens) = accounted.usage {
            usage.input = to_i64(tokens.input);
            usage.output = to_i64(tokens.output);
            usage.cache_read = to_i64(tokens.cache_read);
            usage.cache_write = to_i64(tokens.cache_write);
            usage.cost = tokens.cost.total;
        }
        sql::insert_usage(db, sid, seq, &usage)?;
    }
    Ok(())
}

fn ts_of(row: &EntryInsert<'_>) -> i64 {
    crate::support::clock::ms_from_iso(row.timestamp).unwrap_or(0)
}

/// What one entry changes of its session's aggregates: labels and statistics (the irregular
/// flag is [`apply_to`]'s).
fn apply_aggregates(
    db: Db<'_>,
    row: &EntryInsert<'_>,
    entry: &Entry,
    aggregates: Aggregates,
) -> Result<(), StoreError> {
    let sid = row.sid;
    let seq = row.seq;
    // Labels: the last label entry per target wins; absent or empty clears.
    if let EntryKind::Label {
        target_id: Some(target),
        label,
    } = &entry.kind
    {
        let set = label
            .as_deref()
            .filter(|text| !text.is_empty())
            .map(|text| (text, row.timestamp));
        sql::apply_label(db, aggregates, sid, target.as_str(), set, seq)?;
    }

    // Statistics: every `message` entry counts as a message (system messages too); tokens and
    // cost add up every entry that carries usage (1.6.0 `getSessionStats`).
    let mut delta = StatsDelta {
        seq,
        last_activity: (!row.timestamp.is_empty()).then_some(row.timestamp),
        ..StatsDelta::default()
    };
    if let Some(accounted) = &accounting(entry) {
        delta.messages = i64::from(accounted.is_message);
        if let Some(usage) = accounted.usage {
            delta.input = to_i64(usage.input);
            delta.output = to_i64(usage.output);
            delta.cache_read = to_i64(usage.cache_read);
            delta.cache_write = to_i64(usage.cache_write);
            delta.cost = usage.cost.total;
        }
    }
    let first_message;
    let trimmed_name;
    match &entry.kind {
        EntryKind::Message(AgentMessage::User(user)) => {
            first_message = user.content.joined_text();
            delta.first_message = Some(&first_message);
        }
        EntryKind::SessionInfo { name } => {
            trimmed_name = name.as_deref().map(str::trim).unwrap_or("").to_owned();
            delta.name = Some((!trimmed_name.is_empty()).then_some(trimmed_name.as_str()));
        }
        _ => {}
    }
    sql::apply_stats(db, aggregates, sid, &delta)
}

/// What an entry adds to the usage accounting, as the local statistics count it: for another
/// store of the same entries (the remote archive, `remote/`), so that both total alike.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageFacts {
    /// The message role, or the entry type of an entry that only carries usage.
    pub role: String,
    /// Whether it is a `message` entry.
    pub is_message: bool,
    /// The provider the usage is attributed to.
    pub provider: Option<String>,
    /// The model the usage is attributed to.
    pub model: Option<String>,
    /// Input tokens.
    pub input: i64,
    /// Output tokens.
    pub output: i64,
    /// Cache read tokens.
    pub cache_read: i64,
    /// Cache write tokens.
    pub cache_write: i64,
    /// `usage.cost.total`.
    pub cost: f64,
}

/// Returns what an entry adds to the usage accounting (`None`: nothing, as for a label).
pub fn usage_facts(entry: &Entry) -> Option<UsageFacts> {
    let accounted = accounting(entry)?;
    let usage = accounted.usage;
    Some(UsageFacts {
        role: accounted.role.to_owned(),
        is_message: accounted.is_message,
        provider: accounted.provider.map(str::to_owned),
        model: accounted.model.map(str::to_owned),
        input: usage.map_or(0, |tokens| to_i64(tokens.input)),
        output: usage.map_or(0, |tokens| to_i64(tokens.output)),
        cache_read: usage.map_or(0, |tokens| to_i64(tokens.cache_read)),
        cache_write: usage.map_or(0, |tokens| to_i64(tokens.cache_write)),
        cost: usage.map_or(0.0, |tokens| tokens.cost.total),
    })
}

/// What an entry contributes to the session's accounting.
struct Accounted<'e> {
    /// The message role, or the entry type for an entry that only carries usage.
    role: &'e str,
    /// Whether it is a `message` entry.
    is_message: bool,
    /// The provider and model the usage is attributed to (assistant messages and `usage`
    /// entries; tool and summary usage is not attributed).
    provider: Option<&'e str>,
    model: Option<&'e str>,
    usage: Option<&'e Usage>,
    tool_calls: i64,
}

/// The accounting of an entry: every `message` entry, and the entries that carry usage
/// (`usage`, and compaction and branch summaries with their summary's usage).
fn accounting(entry: &Entry) -> Option<Accounted<'_>> {
    let plain = |role, usage| Accounted {
        role,
        is_message: false,
        provider: None,
        model: None,
        usage,
        tool_calls: 0,
    };
    match &entry.kind {
        EntryKind::Message(message) => {
            let mut accounted = Accounted {
                is_message: true,
                ..plain(message.role(), None)
            };
            match message {
                AgentMessage::Assistant(assistant) => {
                    accounted.provider = Some(&assistant.provider);
                    accounted.model = Some(
                        assistant
                            .response_model
                            .as_deref()
                            .unwrap_or(&assistant.model),
                    );
                    accounted.usage = Some(&assistant.usage);
                    accounted.tool_calls =
                        i64::try_from(assistant.tool_calls().count()).unwrap_or(i64::MAX);
                }
                AgentMessage::ToolResult(result) => accounted.usage = result.usage.as_ref(),
                _ => {}
            }
            Some(accounted)
        }
        EntryKind::Usage(usage) => Some(Accounted {
            provider: Some(&usage.provider),
            model: Some(&usage.model),
            ..plain("usage", Some(&usage.usage))
        }),
        EntryKind::Compaction(CompactionEntry {
            usage: Some(usage), ..
        }) => Some(plain("compaction", Some(usage))),
        EntryKind::BranchSummary(BranchSummaryEntry {
            usage: Some(usage), ..
        }) => Some(plain("branch_summary", Some(usage))),
        _ => None,
    }
}

/// The jump pointer of a new child of `parent` (Myers, "An applicative random-access stack"):
/// jump to the parent's jump's jump when the two jumps span equal depths, else to the parent.
fn jump_for_child(
    db: Db<'_>,
    sid: i64,
    parent_seq: i64,
    parent: &PathState,
) -> Result<i64, StoreError> {
    let Some(jump) = sql::path_state(db, sid, parent.jump_seq)? else {
        return Ok(parent_seq);
    };
    let Some(jump_jump) = sql::path_state(db, sid, jump.jump_seq)? else {
        return Ok(parent_seq);
    };
    if parent.depth - jump.depth == jump.depth - jump_jump.depth {
        Ok(jump.jump_seq)
    } else {
        Ok(parent_seq)
    }
}

/// Returns the ancestor of `seq` at `depth` (or `None` if `depth` is deeper than `seq`),
/// in O(log depth) path-state lookups.
pub fn ancestor_at_depth(
    db: Db<'_>,
    sid: i64,
    seq: i64,
    depth: i64,
) -> Result<Option<i64>, StoreError> {
    let mut current = seq;
    let Some(mut state) = sql::path_state(db, sid, current)? else {
        return Ok(None);
    };
    if depth > state.depth || depth < 0 {
        return Ok(None);
    }
    while state.depth > depth {
        let jump = sql::path_state(db, sid, state.jump_seq)?;
        let next = match jump {
            Some(jump_state) if jump_state.depth >= depth && state.jump_seq != current => {
                state.jump_seq
            }
            _ => match state.parent_seq {
                Some(parent) => parent,
                None => return Ok(None),
            },
        };
        current = next;
        state = match sql::path_state(db, sid, current)? {
            Some(next_state) => next_state,
            None => return Ok(None),
        };
    }
    Ok(Some(current))
}

/// `YYYY-MM-DD` and ISO `YYYY-Www` (UTC) of a Unix-ms time.
pub fn day_and_week(ms: i64) -> (String, String) {
    use chrono::Datelike;
    match chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms) {
        Some(time) => {
            let week = time.iso_week();
            (
                time.format("%Y-%m-%d").to_string(),
                format!("{:04}-W{:02}", week.year(), week.week()),
            )
        }
        None => ("1970-01-01".to_owned(), "1970-W01".to_owned()),
    }
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Whether a `message` line's message has this role (for shapes the typed view could not
/// read).
fn message_role_is(payload: &[u8], role: &str) -> bool {
    crate::support::json::parse_lenient(payload)
        .ok()
        .and_then(|value| {
            value
                .get("message")
                .and_then(|message| message.get("role"))
                .and_then(serde_json::Value::as_str)
                .map(|found| found == role)
        })
        .unwrap_or(false)
}

/// Deletes a session and everything that belongs to it, its search documents included.
pub fn delete_session(db: Db<'_>, sid: i64) -> Result<(), StoreError> {
    fts::delete_search_rows(db, sid)?;
    sql::delete_session(db, sid)
}

/// Recomputes every derived row of one session from its entries, in the caller's transaction
/// (the rebuild a migration asks for, `db check`'s comparison on its scratch copy; a stepped
/// reindex takes a session over as many transactions as it needs: [`rebuild_session_step`]).
pub fn rebuild_session(db: Db<'_>, sid: i64) -> Result<(), StoreError> {
    let Some(session) = sql::session_by_sid(db, sid)? else {
        return Ok(());
    };
    // A rebuild in one transaction supersedes a stepped one part-way.
    sql::drop_session_rebuild(db, sid)?;
    sql::reset_derived(db, sid, &session.created_at)?;
    fts::delete_search_rows(db, sid)?;
    sql::set_irregular(db, sid, false)?;
    for stored in sql::all_entries(db, sid)? {
        apply_stored(db, sid, &session.id, &stored, Writes::LIVE)?;
    }
    Ok(())
}

/// How many entries a stepped rebuild reads at once.
const REBUILD_BATCH: i64 = 512;

/// One step of a session's stepped rebuild (migration 0011): from its cursor, entries in seq
/// order, [`REBUILD_BATCH`] at a time, until `deadline` passes, then the cursor recorded. Returns whether the session is
/// done: its last entry reached, the accumulated aggregates put in place of the live ones.
///
/// A rebuild of `mode` is begun when the session has none; a reindex supersedes a rebuild of
/// the aggregates alone (it computes them too) and is begun again from the first entry. In
/// [`RebuildMode::Reindex`] each entry's own rows are rewritten in place and its search
/// documents go into the next index alone. A session removed meanwhile is done.
pub fn rebuild_session_step(
    db: Db<'_>,
    sid: i64,
    mode: RebuildMode,
    deadline: std::time::Instant,
) -> Result<bool, StoreError> {
    let Some(session) = sql::session_by_sid(db, sid)? else {
        sql::drop_session_rebuild(db, sid)?;
        return Ok(true);
    };
    let mut cursor = match sql::session_rebuild(db, sid)? {
        Some(found) if found.mode == mode || found.mode == RebuildMode::Reindex => found.cursor_seq,
        _ => {
            begin_session_rebuild(db, sid, mode, &session.created_at)?;
            0
        }
    };
    let mode = sql::session_rebuild(db, sid)?.map_or(mode, |found| found.mode);
    let writes = Writes {
        per_entry: mode == RebuildMode::Reindex,
        indexes: Some(&[fts::Index::Next]),
        aggregates: Aggregates::Rebuild,
    };
    loop {
        let batch = sql::entries_from(db, sid, cursor, REBUILD_BATCH)?;
        if batch.is_empty() {
            sql::finish_session_rebuild(db, sid)?;
            return Ok(true);
        }
        for stored in &batch {
            if writes.per_entry {
                // Rows the entry no longer yields must not stay (INSERT OR REPLACE keeps the rest).
                sql::delete_entry_rows(db, sid, stored.seq, stored.seq + 1)?;
            }
            apply_stored(db, sid, &session.id, stored, writes)?;
            cursor = stored.seq + 1;
        }
        // The budget is checked per batch: a step takes at least one (so a session of up to
        // [`REBUILD_BATCH`] entries is always rebuilt in one step).
        if batch.len() < REBUILD_BATCH as usize {
            continue;
        }
        if std::time::Instant::now() >= deadline {
            sql::set_session_rebuild_cursor(db, sid, cursor)?;
            return Ok(false);
        }
    }
}

/// Starts the stepped rebuild of a session (again): the rebuild rows emptied and, for a
/// reindex, the session's documents removed from the next index.
fn begin_session_rebuild(
    db: Db<'_>,
    sid: i64,
    mode: RebuildMode,
    created_at: &str,
) -> Result<(), StoreError> {
    sql::begin_session_rebuild(db, sid, mode, created_at)?;
    if mode == RebuildMode::Reindex {
        fts::delete_search_rows_in(db, fts::Index::Next, sid)?;
    }
    Ok(())
}

/// Starts a stepped rebuild of a session's aggregates alone (after a merge's rollback), or,
/// when a reindex is part-way through the session, starts that again from its first entry
/// (entries it had taken may be gone).
pub fn begin_aggregates_rebuild(db: Db<'_>, sid: i64) -> Result<(), StoreError> {
    let Some(session) = sql::session_by_sid(db, sid)? else {
        return Ok(());
    };
    let mode = match sql::session_rebuild(db, sid)? {
        Some(found) => found.mode,
        None => RebuildMode::Aggregates,
    };
    begin_session_rebuild(db, sid, mode, &session.created_at)
}

fn parse_stored(session: &str, stored: &sql::EntryRow, db: Db<'_>) -> Result<Entry, StoreError> {
    Entry::parse(&stored.payload).ok_or_else(|| StoreError::Corrupt {
        path: db.path().to_owned(),
        message: format!(
            "session {session} entry #{} is not an entry object",
            stored.seq
        ),
    })
}

fn insert_row<'r>(sid: i64, stored: &'r sql::EntryRow) -> EntryInsert<'r> {
    EntryInsert {
        sid,
        seq: stored.seq,
        id: stored.id.as_deref(),
        parent_id: stored.parent_id.as_deref(),
        type_name: &stored.type_name,
        timestamp: &stored.timestamp,
        payload: &stored.payload,
    }
}

/// Applies a stored entry's derived rows as `writes` says.
fn apply_stored(
    db: Db<'_>,
    sid: i64,
    session: &str,
    stored: &sql::EntryRow,
    writes: Writes<'_>,
) -> Result<(), StoreError> {
    let entry = parse_stored(session, stored, db)?;
    apply_to(db, &insert_row(sid, stored), &entry, writes)
}

/// Returns the seqs on the path root → `leaf_seq` as a set (plain walk).
pub fn path_set(db: Db<'_>, sid: i64, leaf_seq: i64) -> Result<HashSet<i64>, StoreError> {
    Ok(plain_walk(db, sid, leaf_seq)?.into_iter().collect())
}

/// Walks parent ids from `leaf_seq` (a lookup takes the latest line with an id), stopping
/// at a root, an unknown parent, or an entry already visited.
pub fn plain_walk(db: Db<'_>, sid: i64, leaf_seq: i64) -> Result<Vec<i64>, StoreError> {
    let mut links = sql::all_links(db, sid)?;
    links.sort_unstable_by_key(|(seq, _, _)| *seq);
    let mut latest: HashMap<&str, usize> = HashMap::with_capacity(links.len());
    for (idx, (_, id, _)) in links.iter().enumerate() {
        if let Some(id) = id {
            latest.insert(id.as_str(), idx);
        }
    }
    let mut out = Vec::new();
    let mut visited = HashSet::new();
    let mut current = links
        .binary_search_by_key(&leaf_seq, |(seq, _, _)| *seq)
        .ok();
    while let Some(idx) = current {
        if !visited.insert(idx) {
            break;
        }
        let (seq, _, parent) = &links[idx];
        out.push(*seq);
        current = parent
            .as_deref()
            .and_then(|parent| latest.get(parent).copied());
    }
    out.reverse();
    Ok(out)
}
