//! The statements on sessions, entries, derived rows, leases and imported files, with their
//! row mapping (the full-text index's are in `search/fts.rs`).
//!
//! Functions take a [`Db`] (a connection — a transaction derefs to one — and the path its
//! errors name) and return plain values; the callers in `store/api/` and `store/derived.rs`
//! decide what runs in which transaction.

use rusqlite::params;

use crate::store::db::Db;
use crate::store::error::{SqliteContext, StoreError};

/// Result alias for this module.
pub type Result<T> = std::result::Result<T, StoreError>;

/// A session row joined with its statistics.
#[derive(Debug, Clone)]
pub struct SessionRow {
    /// Session id.
    pub id: String,
    /// Working directory.
    pub cwd: String,
    /// Header timestamp.
    pub created_at: String,
    /// Parent session, if any.
    pub parent_session: Option<String>,
    /// Whether path state must not be trusted.
    pub irregular: bool,
    /// Entry count.
    pub entries: i64,
    /// `message` entry count.
    pub messages: i64,
    /// Input tokens.
    pub input: i64,
    /// Output tokens.
    pub output: i64,
    /// Cache read tokens.
    pub cache_read: i64,
    /// Cache write tokens.
    pub cache_write: i64,
    /// Cost in USD.
    pub cost: f64,
    /// Timestamp of the last appended entry (or the header's).
    pub last_activity: String,
    /// Session name.
    pub name: Option<String>,
    /// First user message text.
    pub first_message: Option<String>,
}

const SESSION_COLUMNS: &str = "s.sid, s.id, s.cwd, s.created_at, s.parent_session, s.irregular,
     st.entries, st.messages, st.input, st.output, st.cache_read, st.cache_write, st.cost,
     st.last_activity, st.name, st.first_message";

fn session_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok(SessionRow {
        id: row.get(1)?,
        cwd: row.get(2)?,
        created_at: row.get(3)?,
        parent_session: row.get(4)?,
        irregular: row.get::<_, i64>(5)? != 0,
        entries: row.get(6)?,
        messages: row.get(7)?,
        input: row.get(8)?,
        output: row.get(9)?,
        cache_read: row.get(10)?,
        cache_write: row.get(11)?,
        cost: row.get(12)?,
        last_activity: row.get(13)?,
        name: row.get(14)?,
        first_message: row.get(15)?,
    })
}

/// Inserts a session with its statistics row and an empty leaf; returns its `sid`.
pub fn insert_session(
    db: Db<'_>,
    id: &str,
    cwd: &str,
    created_at: &str,
    parent_session: Option<&str>,
    header: &[u8],
) -> Result<i64> {
    db.execute_uncached("INSERT INTO sessions (id, cwd, created_at, parent_session, header) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![id, cwd, created_at, parent_session, header])?;
    let sid = db.conn().last_insert_rowid();
    db.execute_uncached(
        "INSERT INTO session_stats (sid, last_activity) VALUES (?1, ?2)",
        params![sid, created_at],
    )?;
    db.execute_uncached(
        "INSERT INTO leaf (sid, seq) VALUES (?1, NULL)",
        params![sid],
    )?;
    Ok(sid)
}

/// Returns the `sid` of a session id.
pub fn sid_of(db: Db<'_>, id: &str) -> Result<Option<i64>> {
    db.row(
        "SELECT sid FROM sessions WHERE id = ?1",
        params![id],
        |row| row.get(0),
    )
}

/// Returns one session with its statistics.
pub fn session_by_sid(db: Db<'_>, sid: i64) -> Result<Option<SessionRow>> {
    let sql = format!(
        "SELECT {SESSION_COLUMNS} FROM sessions s JOIN session_stats st ON st.sid = s.sid WHERE s.sid = ?1"
    );
    db.row(&sql, params![sid], session_row)
}

/// What a search hit shows of its session, with the leaf and the leaf's depth that the
/// active-path check needs (one statement per session instead of three).
#[derive(Debug, Clone)]
pub struct HitSession {
    /// Session id.
    pub id: String,
    /// Working directory.
    pub cwd: String,
    /// Whether path state must not be trusted.
    pub irregular: bool,
    /// Entry count.
    pub entries: i64,
    /// Session name.
    pub name: Option<String>,
    /// First user message text.
    pub first_message: Option<String>,
    /// The leaf's seq (`None`: the session is empty or its leaf is before the first entry).
    pub leaf: Option<i64>,
    /// The leaf's depth on its path, when it has path state.
    pub leaf_depth: Option<i64>,
}

/// Returns a session as a search hit shows it.
pub fn hit_session(db: Db<'_>, sid: i64) -> Result<Option<HitSession>> {
    db.row(
        "SELECT s.id, s.cwd, s.irregular, st.entries, st.name, st.first_message, l.seq, p.depth
           FROM sessions s JOIN session_stats st ON st.sid = s.sid
           LEFT JOIN leaf l ON l.sid = s.sid
           LEFT JOIN entry_path p ON p.sid = s.sid AND p.seq = l.seq
          WHERE s.sid = ?1 AND substr(s.id, 1, 1) <> char(1)",
        params![sid],
        |row| {
            Ok(HitSession {
                id: row.get(0)?,
                cwd: row.get(1)?,
                irregular: row.get::<_, i64>(2)? != 0,
                entries: row.get(3)?,
                name: row.get(4)?,
                first_message: row.get(5)?,
                leaf: row.get(6)?,
                leaf_depth: row.get(7)?,
            })
        },
    )
}

/// Lists sessions, latest activity first; `cwd` limits to one working directory.
pub fn list_sessions(db: Db<'_>, cwd: Option<&str>) -> Result<Vec<SessionRow>> {
    // A staged import's session (its id a placeholder starting with U+0001, migration 0007)
    // is not listed until it is published.
    let filter = if cwd.is_some() {
        "WHERE s.cwd = ?1 AND substr(s.id, 1, 1) <> char(1)"
    } else {
        "WHERE substr(s.id, 1, 1) <> char(1)"
    };
    let sql = format!(
        "SELECT {SESSION_COLUMNS} FROM sessions s JOIN session_stats st ON st.sid = s.sid {filter}
         ORDER BY st.last_activity DESC, s.sid DESC"
    );
    match cwd {
        Some(cwd) => db.rows(&sql, params![cwd], session_row),
        None => db.rows(&sql, [], session_row),
    }
}

/// Returns the ids of sessions whose id starts with `prefix` (at most `limit`).
pub fn sessions_with_prefix(db: Db<'_>, prefix: &str, limit: i64) -> Result<Vec<String>> {
    db.rows("SELECT id FROM sessions WHERE substr(id, 1, length(?1)) = ?1 AND substr(id, 1, 1) <> char(1)
              ORDER BY id LIMIT ?2", params![prefix, limit], |row| row.get(0))
}

/// Returns the header bytes of a session.
pub fn header(db: Db<'_>, sid: i64) -> Result<Vec<u8>> {
    db.value("SELECT header FROM sessions WHERE sid = ?1", params![sid])
}

/// Where a session's aggregates — statistics, labels, the irregular flag — are written: the
/// live tables, or the rows a stepped rebuild of the session accumulates them in until its last
/// step (`session_rebuild`, `session_rebuild_labels`, migration 0011).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregates {
    /// `session_stats`, `labels`, `sessions.irregular`.
    Live,
    /// `session_rebuild`, `session_rebuild_labels`.
    Rebuild,
}

/// Marks a session irregular (path state no longer trusted).
pub fn mark_irregular(db: Db<'_>, to: Aggregates, sid: i64) -> Result<()> {
    let sql = match to {
        Aggregates::Live => "UPDATE sessions SET irregular = 1 WHERE sid = ?1 AND irregular = 0",
        Aggregates::Rebuild => {
            "UPDATE session_rebuild SET irregular = 1 WHERE sid = ?1 AND irregular = 0"
        }
    };
    db.execute(sql, params![sid])?;
    Ok(())
}

/// Sets the irregular flag to a value (used when rebuilding derived data).
pub fn set_irregular(db: Db<'_>, sid: i64, irregular: bool) -> Result<()> {
    db.execute_uncached(
        "UPDATE sessions SET irregular = ?2 WHERE sid = ?1",
        params![sid, i64::from(irregular)],
    )?;
    Ok(())
}

/// Deletes a session and everything that belongs to it but its search documents
/// ([`crate::store::derived::delete_session`] deletes both).
pub fn delete_session(db: Db<'_>, sid: i64) -> Result<()> {
    db.execute_uncached(
        "UPDATE sessions SET deleting = 1 WHERE sid = ?1",
        params![sid],
    )?;
    // The files it came from stay recorded, with no session: an unchanged file is not brought
    // back by the next automatic import (`imported_files`, migration 0005).
    db.execute_uncached(
        "UPDATE imported_files SET sid = NULL WHERE sid = ?1",
        params![sid],
    )?;
    for table in [
        "session_rebuild",
        "session_rebuild_labels",
        "merging_imports",
        "session_leases",
        "entry_path",
        "context_edits",
        "labels",
        "usage",
        "session_stats",
        "leaf",
        "quarantine",
        "entries",
    ] {
        db.execute_uncached(&format!("DELETE FROM {table} WHERE sid = ?1"), params![sid])?;
    }
    db.execute_uncached("DELETE FROM sessions WHERE sid = ?1", params![sid])?;
    Ok(())
}

/// The next append sequence of a session.
pub fn next_seq(db: Db<'_>, sid: i64) -> Result<i64> {
    db.value(
        "SELECT next_seq FROM session_stats WHERE sid = ?1",
        params![sid],
    )
}

/// The columns of a new entry row.
#[derive(Debug, Clone, Copy)]
pub struct EntryInsert<'a> {
    /// Session key.
    pub sid: i64,
    /// Append sequence.
    pub seq: i64,
    /// Entry id.
    pub id: Option<&'a str>,
    /// Parent id.
    pub parent_id: Option<&'a str>,
    /// The `type` string.
    pub type_name: &'a str,
    /// Entry timestamp.
    pub timestamp: &'a str,
    /// The line bytes.
    pub payload: &'a [u8],
}

/// Inserts an entry row.
pub fn insert_entry(db: Db<'_>, row: &EntryInsert<'_>) -> Result<()> {
    db.execute(
        "INSERT INTO entries (sid, seq, id, parent_id, type, timestamp, payload)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            row.sid,
            row.seq,
            row.id,
            row.parent_id,
            row.type_name,
            row.timestamp,
            row.payload
        ],
    )?;
    Ok(())
}

/// Returns the latest seq before `before_seq` whose id is `id`.
pub fn latest_seq_of_id_before(
    db: Db<'_>,
    sid: i64,
    id: &str,
    before_seq: i64,
) -> Result<Option<i64>> {
    db.row(
        "SELECT seq FROM entries WHERE sid = ?1 AND id = ?2 AND seq < ?3 ORDER BY seq DESC LIMIT 1",
        params![sid, id, before_seq],
        |row| row.get(0),
    )
}

/// Returns the latest seq whose id is `id`.
pub fn latest_seq_of_id(db: Db<'_>, sid: i64, id: &str) -> Result<Option<i64>> {
    latest_seq_of_id_before(db, sid, id, i64::MAX)
}

/// Whether an entry before `before_seq` names `id` as its parent.
pub fn has_child_before(db: Db<'_>, sid: i64, id: &str, before_seq: i64) -> Result<bool> {
    db.value(
        "SELECT EXISTS (SELECT 1 FROM entries WHERE sid = ?1 AND parent_id = ?2 AND seq < ?3)",
        params![sid, id, before_seq],
    )
}

/// Whether `id` is used as an entry id or a parent id in the session.
pub fn id_taken(db: Db<'_>, sid: i64, id: &str) -> Result<bool> {
    db.value(
        "SELECT EXISTS (SELECT 1 FROM entries WHERE sid = ?1 AND id = ?2)
             OR EXISTS (SELECT 1 FROM entries WHERE sid = ?1 AND parent_id = ?2)",
        params![sid, id],
    )
}

/// One stored entry row.
#[derive(Debug, Clone)]
pub struct EntryRow {
    /// Append sequence.
    pub seq: i64,
    /// Entry id.
    pub id: Option<String>,
    /// Parent id.
    pub parent_id: Option<String>,
    /// The `type` string.
    pub type_name: String,
    /// Entry timestamp.
    pub timestamp: String,
    /// The line bytes.
    pub payload: Vec<u8>,
}

pub(crate) fn entry_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<EntryRow> {
    Ok(EntryRow {
        seq: row.get(0)?,
        id: row.get(1)?,
        parent_id: row.get(2)?,
        type_name: row.get(3)?,
        timestamp: row.get(4)?,
        payload: row.get(5)?,
    })
}

/// Returns one entry by seq.
pub fn entry_by_seq(db: Db<'_>, sid: i64, seq: i64) -> Result<Option<EntryRow>> {
    db.row("SELECT seq, id, parent_id, type, timestamp, payload FROM entries WHERE sid = ?1 AND seq = ?2", params![sid, seq], entry_row)
}

/// Returns the id of one entry by seq (`None` inside when the line had no id), without reading
/// its payload: an append looks up its parent's id this way, and a large tool result would
/// otherwise be read back from its overflow pages every time.
pub fn id_by_seq(db: Db<'_>, sid: i64, seq: i64) -> Result<Option<Option<String>>> {
    db.row(
        "SELECT id FROM entries WHERE sid = ?1 AND seq = ?2",
        params![sid, seq],
        |row| row.get(0),
    )
}

/// Returns the payload of one entry by seq.
pub fn payload_by_seq(db: Db<'_>, sid: i64, seq: i64) -> Result<Option<Vec<u8>>> {
    db.row(
        "SELECT payload FROM entries WHERE sid = ?1 AND seq = ?2",
        params![sid, seq],
        |row| row.get(0),
    )
}

/// Returns the entries whose parent id is `parent_id`, in append order.
pub fn entries_with_parent(db: Db<'_>, sid: i64, parent_id: &str) -> Result<Vec<EntryRow>> {
    db.rows(
        "SELECT seq, id, parent_id, type, timestamp, payload FROM entries
             WHERE sid = ?1 AND parent_id = ?2 ORDER BY seq",
        params![sid, parent_id],
        entry_row,
    )
}

/// Returns every entry of a session in append order (payloads included).
pub fn all_entries(db: Db<'_>, sid: i64) -> Result<Vec<EntryRow>> {
    db.rows(
        "SELECT seq, id, parent_id, type, timestamp, payload FROM entries
             WHERE sid = ?1 ORDER BY seq",
        params![sid],
        entry_row,
    )
}

/// Returns at most `limit` entries of a session from `from_seq` on, in append order.
pub fn entries_from(db: Db<'_>, sid: i64, from_seq: i64, limit: i64) -> Result<Vec<EntryRow>> {
    db.rows(
        "SELECT seq, id, parent_id, type, timestamp, payload FROM entries
             WHERE sid = ?1 AND seq >= ?2 ORDER BY seq LIMIT ?3",
        params![sid, from_seq, limit],
        entry_row,
    )
}

/// The shape of an entry without its payload.
#[derive(Debug, Clone)]
pub struct EntryShape {
    /// Append sequence.
    pub seq: i64,
    /// Entry id.
    pub id: Option<String>,
    /// Parent id.
    pub parent_id: Option<String>,
    /// The `type` string.
    pub type_name: String,
    /// Entry timestamp.
    pub timestamp: String,
}

/// Returns every entry of a session without payloads, in append order.
pub fn all_shapes(db: Db<'_>, sid: i64) -> Result<Vec<EntryShape>> {
    db.rows(
        "SELECT seq, id, parent_id, type, timestamp FROM entries WHERE sid = ?1 ORDER BY seq",
        params![sid],
        |row| {
            Ok(EntryShape {
                seq: row.get(0)?,
                id: row.get(1)?,
                parent_id: row.get(2)?,
                type_name: row.get(3)?,
                timestamp: row.get(4)?,
            })
        },
    )
}

/// `(seq, id, parent_id)` of one entry.
pub type Link = (i64, Option<String>, Option<String>);

/// Returns `(seq, id, parent_id)` of every entry of a session from the covering id index,
/// without reading payload pages (the plain walk).
pub fn all_links(db: Db<'_>, sid: i64) -> Result<Vec<Link>> {
    db.rows(
        "SELECT seq, id, parent_id FROM entries INDEXED BY entries_id WHERE sid = ?1",
        params![sid],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )
}

/// Returns the leaf seq (`None`: before the first entry).
pub fn leaf(db: Db<'_>, sid: i64) -> Result<Option<i64>> {
    db.value("SELECT seq FROM leaf WHERE sid = ?1", params![sid])
}

/// Moves the leaf.
pub fn set_leaf(db: Db<'_>, sid: i64, seq: Option<i64>) -> Result<()> {
    db.execute("UPDATE leaf SET seq = ?2 WHERE sid = ?1", params![sid, seq])?;
    Ok(())
}

/// Per-entry path state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathState {
    /// Parent resolved at append time.
    pub parent_seq: Option<i64>,
    /// Depth (0 for a root).
    pub depth: i64,
    /// Skew-binary jump pointer (an ancestor; the entry itself for a root).
    pub jump_seq: i64,
    /// Last compaction on the path (inclusive).
    pub compaction_seq: Option<i64>,
    /// Last model-setting entry on the path.
    pub model_seq: Option<i64>,
    /// Last thinking-level entry on the path.
    pub thinking_seq: Option<i64>,
    /// Last system message on the path (inclusive).
    pub system_seq: Option<i64>,
    /// What the entry is, for the context rebuild (`context::FLAG_*`).
    pub flags: i64,
}

/// Returns the path state of an entry.
pub fn path_state(db: Db<'_>, sid: i64, seq: i64) -> Result<Option<PathState>> {
    db.row(
        "SELECT parent_seq, depth, jump_seq, compaction_seq, model_seq, thinking_seq, system_seq,
                flags
           FROM entry_path WHERE sid = ?1 AND seq = ?2",
        params![sid, seq],
        |row| {
            Ok(PathState {
                parent_seq: row.get(0)?,
                depth: row.get(1)?,
                jump_seq: row.get(2)?,
                compaction_seq: row.get(3)?,
                model_seq: row.get(4)?,
                thinking_seq: row.get(5)?,
                system_seq: row.get(6)?,
                flags: row.get(7)?,
            })
        },
    )
}

/// Stores the row of a `context_edit` entry.
pub fn insert_context_edit(
    db: Db<'_>,
    sid: i64,
    seq: i64,
    target_id: Option<&str>,
    omits: bool,
) -> Result<()> {
    db.execute(
        "INSERT OR REPLACE INTO context_edits (sid, seq, target_id, omits) VALUES (?1, ?2, ?3, ?4)",
        params![sid, seq, target_id, omits],
    )?;
    Ok(())
}

/// Returns the `context_edit` entries naming `target_id`, newest first: `(seq, omits)`.
pub fn context_edits_of(db: Db<'_>, sid: i64, target_id: &str) -> Result<Vec<(i64, bool)>> {
    db.rows(
        "SELECT seq, omits FROM context_edits WHERE sid = ?1 AND target_id = ?2
              ORDER BY seq DESC",
        params![sid, target_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
}

/// Stores the path state of an entry.
pub fn insert_path_state(db: Db<'_>, sid: i64, seq: i64, state: &PathState) -> Result<()> {
    db.execute(
        "INSERT OR REPLACE INTO entry_path
             (sid, seq, parent_seq, depth, jump_seq, compaction_seq, model_seq, thinking_seq,
              system_seq, flags)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            sid,
            seq,
            state.parent_seq,
            state.depth,
            state.jump_seq,
            state.compaction_seq,
            state.model_seq,
            state.thinking_seq,
            state.system_seq,
            state.flags
        ],
    )?;
    Ok(())
}

/// One row of a path walk.
#[derive(Debug, Clone)]
pub struct WalkRow {
    /// Append sequence.
    pub seq: i64,
    /// Entry id.
    pub id: Option<String>,
    /// The `type` string.
    pub type_name: String,
    /// Depth on the path.
    pub depth: i64,
    /// Payload, for the types the caller asked for.
    pub payload: Option<Vec<u8>>,
    /// The entry's `entry_path.flags`.
    pub flags: i64,
}

/// Walks the stored path state from `leaf_seq` towards the root, stopping below `min_depth`,
/// and returns the rows in path order (root side first). Payloads are read only for entries
/// whose type the context needs.
pub fn walk_path(db: Db<'_>, sid: i64, leaf_seq: i64, min_depth: i64) -> Result<Vec<WalkRow>> {
    let mut rows = db.rows(
            "WITH RECURSIVE walk(seq, parent_seq, depth, flags) AS (
                 SELECT seq, parent_seq, depth, flags FROM entry_path WHERE sid = ?1 AND seq = ?2
                 UNION ALL
                 SELECT p.seq, p.parent_seq, p.depth, p.flags
                   FROM walk w CROSS JOIN entry_path p ON p.sid = ?1 AND p.seq = w.parent_seq
                  WHERE w.depth > ?3
             )
             SELECT e.seq, e.id, e.type, walk.depth,
                    CASE WHEN e.type IN ('message', 'custom_message', 'branch_summary', 'compaction', 'context_edit')
                         THEN e.payload END, walk.flags
               FROM walk CROSS JOIN entries e ON e.sid = ?1 AND e.seq = walk.seq",
params![sid, leaf_seq, min_depth],
|row| {
            Ok(WalkRow {
                seq: row.get(0)?,
                id: row.get(1)?,
                type_name: row.get(2)?,
                depth: row.get(3)?,
                payload: row.get(4)?,
                flags: row.get(5)?,
            })
        })?;
    // Root first. Sorted here rather than by `ORDER BY`: SQLite's sorter copies every payload
    // and, past its memory budget, writes them to a temporary file (a 9 MB context spent a
    // fifth of its rebuild there).
    rows.sort_unstable_by_key(|row| row.depth);
    Ok(rows)
}

/// [`walk_path`]'s seqs alone, root side first: only `entry_path` is read.
pub fn walk_path_seqs(db: Db<'_>, sid: i64, leaf_seq: i64, min_depth: i64) -> Result<Vec<i64>> {
    let mut rows = db.rows(
        "WITH RECURSIVE walk(seq, parent_seq, depth) AS (
             SELECT seq, parent_seq, depth FROM entry_path WHERE sid = ?1 AND seq = ?2
             UNION ALL
             SELECT p.seq, p.parent_seq, p.depth
               FROM walk w CROSS JOIN entry_path p ON p.sid = ?1 AND p.seq = w.parent_seq
              WHERE w.depth > ?3
         )
         SELECT seq, depth FROM walk",
        params![sid, leaf_seq, min_depth],
        |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)),
    )?;
    rows.sort_unstable_by_key(|(_, depth)| *depth);
    Ok(rows.into_iter().map(|(seq, _)| seq).collect())
}

/// Adds one entry's contribution to the session statistics.
#[derive(Debug, Clone, Default)]
pub struct StatsDelta<'a> {
    /// Sequence just used (next_seq becomes seq + 1).
    pub seq: i64,
    /// 1 for a `message` entry.
    pub messages: i64,
    /// Token and cost increments.
    pub input: i64,
    /// Output tokens.
    pub output: i64,
    /// Cache read tokens.
    pub cache_read: i64,
    /// Cache write tokens.
    pub cache_write: i64,
    /// Cost.
    pub cost: f64,
    /// New last activity (entry timestamp), if the entry has one.
    pub last_activity: Option<&'a str>,
    /// `Some(None)` clears the name, `Some(Some(name))` sets it.
    pub name: Option<Option<&'a str>>,
    /// First user message text (kept only if none is set yet).
    pub first_message: Option<&'a str>,
}

/// Applies a statistics delta.
pub fn apply_stats(db: Db<'_>, to: Aggregates, sid: i64, delta: &StatsDelta<'_>) -> Result<()> {
    let table = match to {
        Aggregates::Live => "session_stats",
        Aggregates::Rebuild => "session_rebuild",
    };
    db.execute(
        &format!(
            "UPDATE {table} SET
             next_seq = MAX(next_seq, ?2 + 1),
             entries = entries + 1,
             messages = messages + ?3,
             input = input + ?4,
             output = output + ?5,
             cache_read = cache_read + ?6,
             cache_write = cache_write + ?7,
             cost = cost + ?8,
             last_activity = COALESCE(?9, last_activity),
             name = CASE WHEN ?10 THEN ?11 ELSE name END,
             first_message = COALESCE(first_message, ?12)
         WHERE sid = ?1"
        ),
        params![
            sid,
            delta.seq,
            delta.messages,
            delta.input,
            delta.output,
            delta.cache_read,
            delta.cache_write,
            delta.cost,
            delta.last_activity,
            delta.name.is_some(),
            delta.name.flatten(),
            delta.first_message,
        ],
    )?;
    Ok(())
}

/// Resets a session's statistics and derived rows but its search documents to the empty state
/// (before a rebuild).
pub fn reset_derived(db: Db<'_>, sid: i64, created_at: &str) -> Result<()> {
    db.execute_uncached("DELETE FROM entry_path WHERE sid = ?1", params![sid])?;
    db.execute_uncached("DELETE FROM labels WHERE sid = ?1", params![sid])?;
    db.execute_uncached("DELETE FROM context_edits WHERE sid = ?1", params![sid])?;
    db.execute_uncached("DELETE FROM usage WHERE sid = ?1", params![sid])?;
    db.execute_uncached(
        "UPDATE session_stats SET next_seq = 0, entries = 0, messages = 0, input = 0, output = 0,
             cache_read = 0, cache_write = 0, cost = 0, last_activity = ?2, name = NULL,
             first_message = NULL
         WHERE sid = ?1",
        params![sid, created_at],
    )?;
    Ok(())
}

/// Sets or clears the label of a target, keeping its place in the label order when it stays set.
pub fn apply_label(
    db: Db<'_>,
    to: Aggregates,
    sid: i64,
    target_id: &str,
    label: Option<(&str, &str)>,
    seq: i64,
) -> Result<()> {
    let table = match to {
        Aggregates::Live => "labels",
        Aggregates::Rebuild => "session_rebuild_labels",
    };
    match label {
        Some((text, timestamp)) => {
            db.execute(&format!("INSERT INTO {table} (sid, target_id, label, label_ts, order_seq) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (sid, target_id) DO UPDATE SET label = excluded.label, label_ts = excluded.label_ts"), params![sid, target_id, text, timestamp, seq])?;
        }
        None => {
            db.execute(
                &format!("DELETE FROM {table} WHERE sid = ?1 AND target_id = ?2"),
                params![sid, target_id],
            )?;
        }
    }
    Ok(())
}

// ----- stepped session rebuilds (`session_rebuild`, migration 0011) ----------------------

/// What the steps of a session's stepped rebuild write (see migration 0011).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebuildMode {
    /// Each entry's own derived rows in place, its search documents into the next index, the
    /// aggregates into the rebuild rows (a stepped reindex).
    Reindex,
    /// The aggregates alone (after a merge's rollback).
    Aggregates,
}

impl RebuildMode {
    fn as_str(self) -> &'static str {
        match self {
            Self::Reindex => "reindex",
            Self::Aggregates => "aggregates",
        }
    }
}

/// A session part-way through a stepped rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRebuild {
    /// What its steps write.
    pub mode: RebuildMode,
    /// The first entry seq not yet rebuilt.
    pub cursor_seq: i64,
}

/// The stepped rebuild of a session, if one is part-way.
pub fn session_rebuild(db: Db<'_>, sid: i64) -> Result<Option<SessionRebuild>> {
    db.row(
        "SELECT mode, cursor_seq FROM session_rebuild WHERE sid = ?1",
        params![sid],
        |row| {
            let mode: String = row.get(0)?;
            Ok(SessionRebuild {
                mode: if mode == "reindex" {
                    RebuildMode::Reindex
                } else {
                    RebuildMode::Aggregates
                },
                cursor_seq: row.get(1)?,
            })
        },
    )
}

/// The sessions part-way through a stepped rebuild of `mode`, in sid order.
pub fn session_rebuilds(db: Db<'_>, mode: RebuildMode) -> Result<Vec<i64>> {
    db.rows(
        "SELECT sid FROM session_rebuild WHERE mode = ?1 ORDER BY sid",
        params![mode.as_str()],
        |row| row.get(0),
    )
}

/// Starts (or starts again, from the first entry) the stepped rebuild of a session: its
/// rebuild rows set to an empty session's aggregates.
pub fn begin_session_rebuild(
    db: Db<'_>,
    sid: i64,
    mode: RebuildMode,
    created_at: &str,
) -> Result<()> {
    db.execute_uncached(
        "INSERT OR REPLACE INTO session_rebuild (sid, mode, cursor_seq, last_activity)
         VALUES (?1, ?2, 0, ?3)",
        params![sid, mode.as_str(), created_at],
    )?;
    db.execute_uncached(
        "DELETE FROM session_rebuild_labels WHERE sid = ?1",
        params![sid],
    )?;
    Ok(())
}

/// Moves a stepped rebuild's cursor (the first entry seq not yet rebuilt).
pub fn set_session_rebuild_cursor(db: Db<'_>, sid: i64, cursor_seq: i64) -> Result<()> {
    db.execute(
        "UPDATE session_rebuild SET cursor_seq = ?2 WHERE sid = ?1",
        params![sid, cursor_seq],
    )?;
    Ok(())
}

/// Ends a stepped rebuild: the accumulated aggregates replace the live ones, and the rebuild
/// rows go.
pub fn finish_session_rebuild(db: Db<'_>, sid: i64) -> Result<()> {
    db.execute_uncached(
        "UPDATE session_stats SET (next_seq, entries, messages, input, output, cache_read,
                 cache_write, cost, last_activity, name, first_message) =
             (SELECT next_seq, entries, messages, input, output, cache_read, cache_write, cost,
                     last_activity, name, first_message
                FROM session_rebuild WHERE sid = ?1)
          WHERE sid = ?1 AND EXISTS (SELECT 1 FROM session_rebuild WHERE sid = ?1)",
        params![sid],
    )?;
    db.execute_uncached(
        "UPDATE sessions SET irregular = (SELECT irregular FROM session_rebuild WHERE sid = ?1)
          WHERE sid = ?1 AND EXISTS (SELECT 1 FROM session_rebuild WHERE sid = ?1)",
        params![sid],
    )?;
    db.execute_uncached("DELETE FROM labels WHERE sid = ?1", params![sid])?;
    db.execute_uncached(
        "INSERT INTO labels (sid, target_id, label, label_ts, order_seq)
         SELECT sid, target_id, label, label_ts, order_seq FROM session_rebuild_labels
          WHERE sid = ?1",
        params![sid],
    )?;
    drop_session_rebuild(db, sid)
}

/// Removes a session's stepped-rebuild rows (its rebuild abandoned, or the session removed).
pub fn drop_session_rebuild(db: Db<'_>, sid: i64) -> Result<()> {
    db.execute_uncached("DELETE FROM session_rebuild WHERE sid = ?1", params![sid])?;
    db.execute_uncached(
        "DELETE FROM session_rebuild_labels WHERE sid = ?1",
        params![sid],
    )?;
    Ok(())
}

/// Deletes the per-entry derived rows (path state, usage, context edits) of the entries with
/// seq in `from..to`, their search documents aside.
pub fn delete_entry_rows(db: Db<'_>, sid: i64, from: i64, to: i64) -> Result<()> {
    for table in ["entry_path", "usage", "context_edits"] {
        db.execute(
            &format!("DELETE FROM {table} WHERE sid = ?1 AND seq >= ?2 AND seq < ?3"),
            params![sid, from, to],
        )?;
    }
    Ok(())
}

/// A current label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRow {
    /// The labelled entry id.
    pub target_id: String,
    /// The label text.
    pub label: String,
    /// The timestamp of the label entry that set it.
    pub label_ts: String,
}

/// Returns the current labels in the reference's map order.
pub fn labels(db: Db<'_>, sid: i64) -> Result<Vec<LabelRow>> {
    db.rows(
        "SELECT target_id, label, label_ts FROM labels WHERE sid = ?1 ORDER BY order_seq",
        params![sid],
        |row| {
            Ok(LabelRow {
                target_id: row.get(0)?,
                label: row.get(1)?,
                label_ts: row.get(2)?,
            })
        },
    )
}

/// Returns the current label of one entry.
pub fn label_of(db: Db<'_>, sid: i64, target_id: &str) -> Result<Option<String>> {
    db.row(
        "SELECT label FROM labels WHERE sid = ?1 AND target_id = ?2",
        params![sid, target_id],
        |row| row.get(0),
    )
}

/// Returns the sids of every session.
pub fn all_sids(db: Db<'_>) -> Result<Vec<i64>> {
    db.rows_uncached("SELECT sid FROM sessions ORDER BY sid", [], |row| {
        row.get(0)
    })
}

/// The session keys above `after`, in order (a stepped reindex's sessions still to do).
pub fn sids_after(db: Db<'_>, after: i64) -> Result<Vec<i64>> {
    db.rows(
        "SELECT sid FROM sessions WHERE sid > ?1 ORDER BY sid",
        params![after],
        |row| row.get(0),
    )
}

/// One row of the usage table.
#[derive(Debug, Clone, Default)]
pub struct UsageRow<'a> {
    /// Entry time, Unix ms.
    pub ts: i64,
    /// `YYYY-MM-DD` (UTC).
    pub day: &'a str,
    /// `YYYY-Www` (ISO week, UTC).
    pub week: &'a str,
    /// Message role.
    pub role: &'a str,
    /// Provider of an assistant message.
    pub provider: Option<&'a str>,
    /// Model of an assistant message.
    pub model: Option<&'a str>,
    /// Input tokens.
    pub input: i64,
    /// Output tokens.
    pub output: i64,
    /// Cache read tokens.
    pub cache_read: i64,
    /// Cache write tokens.
    pub cache_write: i64,
    /// Cost in USD.
    pub cost: f64,
    /// Whether the row is a `message` entry (else an entry that only carries usage).
    pub is_message: bool,
    /// Tool calls of an assistant message.
    pub tool_calls: i64,
}

/// Stores the usage row of an entry.
pub fn insert_usage(db: Db<'_>, sid: i64, seq: i64, row: &UsageRow<'_>) -> Result<()> {
    db.execute("INSERT OR REPLACE INTO usage
             (sid, seq, ts, day, week, role, provider, model, input, output, cache_read, cache_write, cost,
              is_message, tool_calls)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)", params![
        sid,
        seq,
        row.ts,
        row.day,
        row.week,
        row.role,
        row.provider,
        row.model,
        row.input,
        row.output,
        row.cache_read,
        row.cache_write,
        row.cost,
        row.is_message,
        row.tool_calls
    ])?;
    Ok(())
}

/// One row of `sessions stats`.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsRow {
    /// The group key.
    pub key: String,
    /// Distinct sessions.
    pub sessions: i64,
    /// Messages counted.
    pub messages: i64,
    /// Input tokens.
    pub input: i64,
    /// Output tokens.
    pub output: i64,
    /// Cache read tokens.
    pub cache_read: i64,
    /// Cache write tokens.
    pub cache_write: i64,
    /// Cost in USD.
    pub cost: f64,
}

/// A session's totals over all its entries (every branch, compacted history included).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SessionTotals {
    /// `message` entries of any role.
    pub messages: i64,
    /// User messages.
    pub user: i64,
    /// Assistant messages.
    pub assistant: i64,
    /// Tool results.
    pub tool_results: i64,
    /// Tool calls in assistant messages.
    pub tool_calls: i64,
    /// Input tokens.
    pub input: i64,
    /// Output tokens.
    pub output: i64,
    /// Cache read tokens.
    pub cache_read: i64,
    /// Cache write tokens.
    pub cache_write: i64,
    /// Cost in USD.
    pub cost: f64,
}

/// Returns a session's totals from its usage rows.
pub fn session_totals(db: Db<'_>, sid: i64) -> Result<SessionTotals> {
    db.one(
        "SELECT COALESCE(SUM(is_message), 0),
                COALESCE(SUM(is_message AND role = 'user'), 0),
                COALESCE(SUM(is_message AND role = 'assistant'), 0),
                COALESCE(SUM(is_message AND role = 'toolResult'), 0),
                COALESCE(SUM(tool_calls), 0),
                COALESCE(SUM(input), 0), COALESCE(SUM(output), 0),
                COALESCE(SUM(cache_read), 0), COALESCE(SUM(cache_write), 0),
                COALESCE(SUM(cost), 0.0)
           FROM usage WHERE sid = ?1",
        params![sid],
        |row| {
            Ok(SessionTotals {
                messages: row.get(0)?,
                user: row.get(1)?,
                assistant: row.get(2)?,
                tool_results: row.get(3)?,
                tool_calls: row.get(4)?,
                input: row.get(5)?,
                output: row.get(6)?,
                cache_read: row.get(7)?,
                cache_write: row.get(8)?,
                cost: row.get(9)?,
            })
        },
    )
}

/// Which usage rows a `sessions stats` counts: `[since, until)` by entry time, and one
/// directory's sessions or all of them.
#[derive(Debug, Clone, Copy)]
pub struct UsageFilter<'a> {
    /// Entry time at or after (Unix ms).
    pub since_ms: Option<i64>,
    /// Entry time before (Unix ms).
    pub until_ms: Option<i64>,
    /// Only sessions of this working directory.
    pub cwd: Option<&'a str>,
}

/// The `WHERE` of the usage queries (parameters ?1 since, ?2 until, ?3 cwd): published
/// sessions only (a staged import's placeholder id starts with U+0001).
const USAGE_WHERE: &str = "WHERE u.ts >= ?1 AND u.ts < ?2 AND (?3 IS NULL OR s.cwd = ?3)
            AND substr(s.id, 1, 1) <> char(1)";

/// Token and cost totals grouped by `key_sql` (an expression over `usage u` and `sessions s`;
/// it names every row, so the groups add up to the same totals under every key).
pub fn usage_stats(
    db: Db<'_>,
    key_sql: &str,
    filter: &UsageFilter<'_>,
    order_by_key: bool,
) -> Result<Vec<StatsRow>> {
    let order = if order_by_key {
        "ORDER BY key"
    } else {
        "ORDER BY SUM(u.cost) DESC, SUM(u.input + u.output) DESC, key"
    };
    let sql = format!(
        "SELECT {key_sql} AS key, COUNT(DISTINCT u.sid), SUM(u.is_message), SUM(u.input), SUM(u.output),
                SUM(u.cache_read), SUM(u.cache_write), SUM(u.cost)
           FROM usage u JOIN sessions s ON s.sid = u.sid
          {USAGE_WHERE} GROUP BY key {order}"
    );
    db.rows_uncached(&sql, usage_params(filter), |row| {
        Ok(StatsRow {
            key: row.get::<_, Option<String>>(0)?.unwrap_or_default(),
            sessions: row.get(1)?,
            messages: row.get(2)?,
            input: row.get(3)?,
            output: row.get(4)?,
            cache_read: row.get(5)?,
            cache_write: row.get(6)?,
            cost: row.get(7)?,
        })
    })
}

/// How many sessions the usage rows of `filter` come from (the total of `sessions stats`).
pub fn usage_sessions(db: Db<'_>, filter: &UsageFilter<'_>) -> Result<i64> {
    db.value(
        &format!(
            "SELECT COUNT(DISTINCT u.sid) FROM usage u JOIN sessions s ON s.sid = u.sid {USAGE_WHERE}"
        ),
        usage_params(filter),
    )
}

fn usage_params<'a>(filter: &UsageFilter<'a>) -> (i64, i64, Option<&'a str>) {
    (
        filter.since_ms.unwrap_or(i64::MIN),
        filter.until_ms.unwrap_or(i64::MAX),
        filter.cwd,
    )
}

/// Empties every derived table (before a full rebuild).
pub fn clear_all_derived(db: Db<'_>) -> Result<()> {
    db.batch(
        "DELETE FROM entry_path; DELETE FROM labels; DELETE FROM context_edits; DELETE FROM usage;
         DELETE FROM search_docs; DELETE FROM search_totals;
         DELETE FROM session_rebuild; DELETE FROM session_rebuild_labels;
         INSERT INTO search_fts (search_fts) VALUES ('delete-all');",
    )
}

// ----- interchange (import, merge, export; `store/interchange.rs`) ------------------------

/// Stores one input line an import could not use.
#[allow(clippy::too_many_arguments)]
pub fn insert_quarantine(
    db: Db<'_>,
    sid: i64,
    source: &str,
    line: i64,
    reason: &str,
    bytes: &[u8],
    imported_at: &str,
) -> Result<()> {
    db.execute(
        "INSERT INTO quarantine (sid, source, line, reason, bytes, imported_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![sid, source, line, reason, bytes, imported_at],
    )?;
    Ok(())
}

/// Whether the session already quarantined these bytes from this line number.
pub fn quarantine_has(db: Db<'_>, sid: i64, line: i64, bytes: &[u8]) -> Result<bool> {
    db.value(
        "SELECT EXISTS (SELECT 1 FROM quarantine WHERE sid = ?1 AND line = ?2 AND bytes = ?3)",
        params![sid, line, bytes],
    )
}

/// A quarantined input line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantineRow {
    /// The file it came from.
    pub source: String,
    /// Its 1-based line number there.
    pub line: i64,
    /// Why it was not stored as an entry.
    pub reason: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// When it was imported.
    pub imported_at: String,
}

/// Returns a session's quarantined lines in the order they were stored.
pub fn quarantine_rows(db: Db<'_>, sid: i64) -> Result<Vec<QuarantineRow>> {
    db.rows(
        "SELECT source, line, reason, bytes, imported_at FROM quarantine WHERE sid = ?1
             ORDER BY qid",
        params![sid],
        |row| {
            Ok(QuarantineRow {
                source: row.get(0)?,
                line: row.get(1)?,
                reason: row.get(2)?,
                bytes: row.get(3)?,
                imported_at: row.get(4)?,
            })
        },
    )
}

/// For the entries before `before_seq` with this id, latest first: `(seq, payload equals
/// the given bytes)`.
pub fn same_id_before(
    db: Db<'_>,
    sid: i64,
    id: &str,
    before_seq: i64,
    payload: &[u8],
) -> Result<Vec<(i64, bool)>> {
    db.rows(
        "SELECT seq, payload = ?4 FROM entries WHERE sid = ?1 AND id = ?2 AND seq < ?3
             ORDER BY seq DESC",
        params![sid, id, before_seq, payload],
        |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)? != 0)),
    )
}

/// Returns the latest entry before `before_seq` without an id whose payload is `payload`.
pub fn idless_with_payload_before(
    db: Db<'_>,
    sid: i64,
    payload: &[u8],
    before_seq: i64,
) -> Result<Option<i64>> {
    db.row(
        "SELECT seq FROM entries WHERE sid = ?1 AND id IS NULL AND seq < ?3 AND payload = ?2
         ORDER BY seq DESC LIMIT 1",
        params![sid, payload, before_seq],
        |row| row.get(0),
    )
}

/// Calls `f(seq, payload)` for every entry of a session in append order, without copying
/// the payloads.
pub fn for_each_payload(
    db: Db<'_>,
    sid: i64,
    mut f: impl FnMut(i64, &[u8]) -> Result<()>,
) -> Result<()> {
    let mut stmt = db.prepare("SELECT seq, payload FROM entries WHERE sid = ?1 ORDER BY seq")?;
    let path = db.path();
    let mut rows = stmt.query(params![sid]).at(path)?;
    while let Some(row) = rows.next().at(path)? {
        let seq: i64 = row.get(0).at(path)?;
        let payload = row.get_ref(1).at(path)?.as_blob().at_blob(path)?;
        f(seq, payload)?;
    }
    Ok(())
}

/// Calls `f(seq, payload)` for the entries of a session with `from <= seq <= to`, in append
/// order, without copying the payloads, while `f` returns `true`.
pub fn for_each_payload_between(
    db: Db<'_>,
    sid: i64,
    (from, to): (i64, i64),
    mut f: impl FnMut(i64, &[u8]) -> Result<bool>,
) -> Result<()> {
    let mut stmt = db.prepare(
        "SELECT seq, payload FROM entries WHERE sid = ?1 AND seq BETWEEN ?2 AND ?3 ORDER BY seq",
    )?;
    let path = db.path();
    let mut rows = stmt.query(params![sid, from, to]).at(path)?;
    while let Some(row) = rows.next().at(path)? {
        let seq: i64 = row.get(0).at(path)?;
        let payload = row.get_ref(1).at(path)?.as_blob().at_blob(path)?;
        if !f(seq, payload)? {
            break;
        }
    }
    Ok(())
}

trait BlobContext<T> {
    fn at_blob(self, path: &str) -> Result<T>;
}

impl<T> BlobContext<T> for std::result::Result<T, rusqlite::types::FromSqlError> {
    fn at_blob(self, path: &str) -> Result<T> {
        self.map_err(|source| StoreError::Corrupt {
            path: path.to_owned(),
            message: format!("an entry payload is not a blob: {source}"),
        })
    }
}

/// Returns `(seq, timestamp)` of the entries whose parent id is `parent_id`.
pub fn children_timestamps(db: Db<'_>, sid: i64, parent_id: &str) -> Result<Vec<(i64, String)>> {
    db.rows(
        "SELECT seq, timestamp FROM entries WHERE sid = ?1 AND parent_id = ?2",
        params![sid, parent_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
}

// ----- writer leases --------------------------------------------------------------------------

/// A writer lease row (`session_leases`); times are Unix milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    /// The holder's random token; its appends must match it.
    pub token: String,
    /// What holds it (for messages), such as `pi (interactive)`.
    pub owner: String,
    /// The holder's process id.
    pub pid: i64,
    /// The holder's process start time (clock ticks since boot), to tell a reused pid apart.
    pub pid_start: Option<i64>,
    /// The holder's host name.
    pub host: String,
    /// When the lease was taken.
    pub acquired_at: i64,
    /// The last heartbeat.
    pub heartbeat_at: i64,
    /// How old the heartbeat may get before anyone may take the lease over.
    pub stale_ms: i64,
}

/// Returns a session's lease row.
pub fn lease(db: Db<'_>, sid: i64) -> Result<Option<LeaseRow>> {
    db.row(
        "SELECT token, owner, pid, pid_start, host, acquired_at, heartbeat_at, stale_ms
           FROM session_leases WHERE sid = ?1",
        params![sid],
        |row| {
            Ok(LeaseRow {
                token: row.get(0)?,
                owner: row.get(1)?,
                pid: row.get(2)?,
                pid_start: row.get(3)?,
                host: row.get(4)?,
                acquired_at: row.get(5)?,
                heartbeat_at: row.get(6)?,
                stale_ms: row.get(7)?,
            })
        },
    )
}

/// Writes a session's lease row, replacing any other.
pub fn put_lease(db: Db<'_>, sid: i64, lease: &LeaseRow) -> Result<()> {
    db.execute(
        "INSERT OR REPLACE INTO session_leases
             (sid, token, owner, pid, pid_start, host, acquired_at, heartbeat_at, stale_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            sid,
            lease.token,
            lease.owner,
            lease.pid,
            lease.pid_start,
            lease.host,
            lease.acquired_at,
            lease.heartbeat_at,
            lease.stale_ms
        ],
    )?;
    Ok(())
}

/// Renews the heartbeat of the lease with this token; false when the session's lease has
/// another token (or none).
pub fn renew_lease(db: Db<'_>, sid: i64, token: &str, now_ms: i64) -> Result<bool> {
    let changed = db.execute(
        "UPDATE session_leases SET heartbeat_at = ?3 WHERE sid = ?1 AND token = ?2",
        params![sid, token, now_ms],
    )?;
    Ok(changed > 0)
}

/// Deletes the lease with this token; false when the session's lease has another token.
pub fn delete_lease(db: Db<'_>, sid: i64, token: &str) -> Result<bool> {
    let changed = db.execute(
        "DELETE FROM session_leases WHERE sid = ?1 AND token = ?2",
        params![sid, token],
    )?;
    Ok(changed > 0)
}

/// A merge in progress (`merging_imports`, migration 0010).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeRow {
    /// The session merged into.
    pub sid: i64,
    /// The first sequence the merge wrote.
    pub first_seq: i64,
    /// One past the last sequence its committed steps wrote.
    pub next_seq: i64,
    /// The largest quarantine key when it began.
    pub last_qid: i64,
    /// The lease it holds (empty: the merging store held the session's lease already).
    pub token: String,
    /// The merging process.
    pub pid: u32,
    /// Its start time.
    pub pid_start: Option<i64>,
    /// Its host.
    pub host: String,
}

/// Records a merge beginning at `first_seq`, by the process `me` (pid, start time, host).
pub fn insert_merge(
    db: Db<'_>,
    sid: i64,
    first_seq: i64,
    token: &str,
    me: (u32, Option<i64>, &str),
) -> Result<()> {
    db.execute_uncached(
        "INSERT INTO merging_imports
             (sid, first_seq, next_seq, last_qid, token, pid, pid_start, host, started_ms)
         VALUES (?1, ?2, ?2, (SELECT COALESCE(MAX(qid), 0) FROM quarantine), ?3, ?4, ?5, ?6,
                 CAST(strftime('%s', 'now') AS INTEGER) * 1000)",
        params![sid, first_seq, token, me.0, me.1, me.2],
    )?;
    Ok(())
}

/// Moves a merge's `next_seq` after a committed step.
pub fn move_merge(db: Db<'_>, sid: i64, next_seq: i64) -> Result<()> {
    db.execute(
        "UPDATE merging_imports SET next_seq = ?2 WHERE sid = ?1",
        params![sid, next_seq],
    )?;
    Ok(())
}

/// The first sequence of the merge recorded for `sid`, if any.
pub fn merge_first_seq(db: Db<'_>, sid: i64) -> Result<Option<i64>> {
    db.row(
        "SELECT first_seq FROM merging_imports WHERE sid = ?1",
        params![sid],
        |row| row.get(0),
    )
}

const MERGE_COLUMNS: &str =
    "SELECT sid, first_seq, next_seq, last_qid, token, pid, pid_start, host FROM merging_imports";

fn merge_from(row: &rusqlite::Row<'_>) -> rusqlite::Result<MergeRow> {
    Ok(MergeRow {
        sid: row.get(0)?,
        first_seq: row.get(1)?,
        next_seq: row.get(2)?,
        last_qid: row.get(3)?,
        token: row.get(4)?,
        pid: row.get(5)?,
        pid_start: row.get(6)?,
        host: row.get(7)?,
    })
}

/// The merge recorded for `sid`, if any.
pub fn merge_row(db: Db<'_>, sid: i64) -> Result<Option<MergeRow>> {
    db.row(
        &format!("{MERGE_COLUMNS} WHERE sid = ?1"),
        params![sid],
        merge_from,
    )
}

/// Every merge recorded.
pub fn merge_rows(db: Db<'_>) -> Result<Vec<MergeRow>> {
    db.rows_uncached(MERGE_COLUMNS, [], merge_from)
}

/// Removes the record of the merge into `sid`.
pub fn delete_merge(db: Db<'_>, sid: i64) -> Result<()> {
    db.execute("DELETE FROM merging_imports WHERE sid = ?1", params![sid])?;
    Ok(())
}

/// A row of `imported_files` (migration 0005), with its session's id and entry count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedFileRow {
    /// The file's canonical path (its bytes: file names need not be UTF-8).
    pub path: Vec<u8>,
    /// Its size when it was read.
    pub size: i64,
    /// Its modification time (ns since the epoch) when it was read.
    pub mtime_ns: i64,
    /// The byte offset after the last complete line read.
    pub offset: i64,
    /// Lines before `offset`.
    pub lines: i64,
    /// Length of the last complete line before `offset`, LF included.
    pub tail_len: i64,
    /// FNV-1a 64 of that line (stored as its two's-complement `i64`).
    pub tail_hash: i64,
    /// Whether the lines after `offset` can be read on their own.
    pub appendable: bool,
    /// The session the file went into (`None`: refused, or the session was removed).
    pub sid: Option<i64>,
    /// That session's id.
    pub session: Option<String>,
    /// That session's entry count now.
    pub entries: i64,
    /// The session's next append sequence after the import.
    pub next_seq: i64,
    /// When it was read (ISO-8601).
    pub imported_at: String,
}

const IMPORTED_FILE_COLUMNS: &str = "f.path, f.size, f.mtime_ns, f.read_to, f.lines, f.tail_len,
     f.tail_hash, f.appendable, f.sid, s.id, COALESCE(st.entries, 0), f.next_seq, f.imported_at";

const IMPORTED_FILE_FROM: &str = "imported_files f
     LEFT JOIN sessions s ON s.sid = f.sid
     LEFT JOIN session_stats st ON st.sid = f.sid";

fn imported_file_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ImportedFileRow> {
    Ok(ImportedFileRow {
        path: row.get(0)?,
        size: row.get(1)?,
        mtime_ns: row.get(2)?,
        offset: row.get(3)?,
        lines: row.get(4)?,
        tail_len: row.get(5)?,
        tail_hash: row.get(6)?,
        appendable: row.get::<_, i64>(7)? != 0,
        sid: row.get(8)?,
        session: row.get(9)?,
        entries: row.get(10)?,
        next_seq: row.get(11)?,
        imported_at: row.get(12)?,
    })
}

/// Returns the recorded file at `file` (a canonical path).
pub fn imported_file(db: Db<'_>, file: &[u8]) -> Result<Option<ImportedFileRow>> {
    let sql = format!("SELECT {IMPORTED_FILE_COLUMNS} FROM {IMPORTED_FILE_FROM} WHERE f.path = ?1");
    db.row(&sql, params![file], imported_file_row)
}

/// Returns the recorded files whose path starts with `prefix`, in path order: one range scan
/// of the primary key (from `prefix` to [`range_end`]).
pub fn imported_files_under(db: Db<'_>, prefix: &[u8]) -> Result<Vec<ImportedFileRow>> {
    let sql = format!(
        "SELECT {IMPORTED_FILE_COLUMNS} FROM {IMPORTED_FILE_FROM}
          WHERE f.path >= ?1 AND f.path < ?2 ORDER BY f.path"
    );
    let end = range_end(prefix);
    db.rows(&sql, params![prefix, end], imported_file_row)
}

/// Returns `(path, size, mtime_ns)` of the recorded files whose path starts with `prefix`:
/// the same range scan as [`imported_files_under`], on the table alone (what the check at
/// start compares; the rest of a record is read for the files that changed).
pub fn imported_stats_under(db: Db<'_>, prefix: &[u8]) -> Result<Vec<(Vec<u8>, i64, i64)>> {
    let end = range_end(prefix);
    db.rows(
        "SELECT path, size, mtime_ns FROM imported_files WHERE path >= ?1 AND path < ?2",
        params![prefix, end],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )
}

/// The first key after every key that starts with `prefix` (`prefix` with its last byte
/// raised by one; for a directory's `…/`, that is `…0`).
fn range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            break;
        }
    }
    end
}

/// The columns an import writes into `imported_files`.
#[derive(Debug, Clone, Copy)]
pub struct ImportedFileUpsert<'a> {
    /// Canonical path (bytes).
    pub path: &'a [u8],
    /// Size.
    pub size: i64,
    /// Modification time (ns).
    pub mtime_ns: i64,
    /// Offset after the last complete line read.
    pub offset: i64,
    /// Lines before `offset`.
    pub lines: i64,
    /// Length of the last complete line.
    pub tail_len: i64,
    /// Its hash.
    pub tail_hash: i64,
    /// Whether the lines after `offset` can be read on their own.
    pub appendable: bool,
    /// The session (`None`: nothing stored).
    pub sid: Option<i64>,
    /// The session's next append sequence.
    pub next_seq: i64,
    /// When.
    pub imported_at: &'a str,
}

/// Records (or replaces the record of) an imported file.
pub fn put_imported_file(db: Db<'_>, row: &ImportedFileUpsert<'_>) -> Result<()> {
    db.execute(
        "INSERT OR REPLACE INTO imported_files
             (path, size, mtime_ns, read_to, lines, tail_len, tail_hash, appendable, sid, next_seq,
              imported_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            row.path,
            row.size,
            row.mtime_ns,
            row.offset,
            row.lines,
            row.tail_len,
            row.tail_hash,
            i64::from(row.appendable),
            row.sid,
            row.next_seq,
            row.imported_at
        ],
    )?;
    Ok(())
}
