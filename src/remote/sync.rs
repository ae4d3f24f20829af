//! `pi sync`: push this store's sessions into an archive and pull the others' into it.
//!
//! - The first round trip ([`Archive::state`]) checks (or creates, or migrates) the schema
//!   and returns the archive's snapshot horizon and the sessions changed since the last
//!   pull's horizon; what to push is one query on the local store (its push marks). A sync
//!   with nothing to do costs that one round trip.
//! - Push: each local session's entries from its push mark on, in batches bounded by count
//!   and bytes; each batch is one statement on the server, stored whole or not at all, and the
//!   mark moves only once the server committed it. A batch the server holds with other bytes
//!   (same session id and seq) is a conflict: nothing of it is stored, the session's push
//!   stops there and is reported; nothing is overwritten.
//! - Pull: each changed session that is not this store's own (a local session without an
//!   origin), from the seq it was pulled to, imported by the store's union merge (all or
//!   nothing per batch) and marked with its origin first, so a pulled session never looks
//!   local. The pull horizon is recorded only after every changed session was pulled.
//!
//! A sync killed at any point leaves both sides consistent: the server has whole batches, the
//! local store whole imports; the marks only lag behind, and the next sync finds the rest
//! identical (push) or already merged (pull) and completes it.

use std::collections::HashSet;

use crate::jsonl::{FileEntry, Item};
use crate::model::entry::{Entry, EntryKind, SessionHeader};
use crate::model::ids::SessionId;
use crate::remote::archive::{Archive, BatchMeta, PushEntry, PushOutcome, PushSession};
use crate::remote::text;
use crate::remote::{RemoteError, Result};
use crate::store::derived::usage_facts;
use crate::store::{
    ImportMode, ImportOptions, ImportStatus, SessionStore, StoredEntry, SyncOrigin,
};
use crate::support::clock::ms_from_iso;

/// Who pushes: recorded with every session pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The user (setting `sync.user`, else the login name).
    pub user: String,
    /// The machine (setting `sync.host`, else the host name).
    pub host: String,
}

/// What a sync does.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Push local sessions.
    pub push: bool,
    /// Pull the others' sessions.
    pub pull: bool,
    /// Only this session.
    pub session: Option<SessionId>,
    /// Most entries in one push batch.
    pub batch_entries: usize,
    /// Most payload bytes in one push batch (a single larger entry goes alone).
    pub batch_bytes: usize,
    /// Most entries read from the server per pulled batch.
    pub pull_batch: i64,
}

impl Default for SyncOptions {
    fn default() -> Self {
        Self {
            push: true,
            pull: true,
            session: None,
            batch_entries: 2_000,
            batch_bytes: 8 * 1024 * 1024,
            pull_batch: 5_000,
        }
    }
}

/// A session whose sync stopped at a conflict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncConflict {
    /// The session.
    pub session: String,
    /// `push` or `pull`.
    pub direction: &'static str,
    /// What differs: the seqs stored with other bytes (`-1`: the header), or the entry id a
    /// pulled line conflicts with locally.
    pub detail: String,
}

/// What a sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// The remote's name.
    pub remote: String,
    /// Sessions pushed, with the entries the server did not have.
    pub pushed: Vec<(String, i64)>,
    /// Sessions pulled, with the entries added locally.
    pub pulled: Vec<(String, i64)>,
    /// Sessions stopped at a conflict.
    pub conflicts: Vec<SyncConflict>,
    /// Push batches sent.
    pub batches: u64,
}

impl SyncReport {
    /// Entries pushed in all.
    pub fn pushed_entries(&self) -> i64 {
        self.pushed.iter().map(|(_, n)| n).sum()
    }

    /// Entries pulled in all.
    pub fn pulled_entries(&self) -> i64 {
        self.pulled.iter().map(|(_, n)| n).sum()
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> crate::store::Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|error| RemoteError::Task(error.to_string()))?
        .map_err(RemoteError::from)
}

/// Runs one sync of `store` with `archive`.
pub async fn sync(
    store: &SessionStore,
    archive: &mut Archive,
    identity: &Identity,
    options: &SyncOptions,
) -> Result<SyncReport> {
    let remote = archive.remote().to_owned();
    let mut report = SyncReport {
        remote: remote.clone(),
        ..SyncReport::default()
    };
    let mark = {
        let store = store.clone();
        let remote = remote.clone();
        blocking(move || store.pull_mark(&remote)).await?
    };
    // The one round trip of an up-to-date sync (schema checked or brought up to date too).
    let state = archive.state(mark.as_deref()).await?;
    if options.push {
        push(store, archive, identity, options, &mut report).await?;
    }
    if options.pull {
        let mut seen = HashSet::new();
        for changed in &state.changed {
            if !seen.insert(changed.id.clone()) {
                continue;
            }
            if let Some(only) = &options.session
                && only.as_str() != changed.id
            {
                continue;
            }
            pull_session(store, archive, changed, options, &mut report).await?;
        }
        if options.session.is_none() {
            let store = store.clone();
            let horizon = state.horizon.clone();
            let remote = remote.clone();
            blocking(move || store.set_pull_mark(&remote, &horizon)).await?;
        }
    }
    Ok(report)
}

/// The name a batch's last `session_info` sets and its first user message.
fn batch_meta(entries: &[StoredEntry]) -> BatchMeta {
    let mut meta = BatchMeta::default();
    for stored in entries {
        if let EntryKind::SessionInfo { name } = &stored.entry.kind {
            let trimmed = name.as_deref().map(str::trim).unwrap_or("");
            meta.name = Some((!trimmed.is_empty()).then(|| trimmed.to_owned()));
        }
    }
    meta.first_message = entries.iter().find_map(|stored| {
        text::docs(&stored.entry)
            .into_iter()
            .find(|doc| doc.role == "user" && doc.kind == "text")
            .map(|doc| doc.body)
    });
    meta
}

fn push_entry(stored: StoredEntry) -> PushEntry {
    let entry: &Entry = &stored.entry;
    PushEntry {
        seq: stored.seq,
        entry_id: entry.id.as_ref().map(|id| id.as_str().to_owned()),
        parent_id: entry.parent_id.as_ref().map(|id| id.as_str().to_owned()),
        type_name: entry.kind.type_name().to_owned(),
        ts_ms: ms_from_iso(&entry.timestamp),
        usage: usage_facts(entry),
        docs: text::docs(entry),
        payload: stored.payload,
    }
}

async fn push(
    store: &SessionStore,
    archive: &mut Archive,
    identity: &Identity,
    options: &SyncOptions,
    report: &mut SyncReport,
) -> Result<()> {
    let remote = archive.remote().to_owned();
    let candidates = {
        let store = store.clone();
        let remote = remote.clone();
        let only = options.session.clone();
        blocking(move || store.push_candidates(&remote, only.as_ref())).await?
    };
    for candidate in candidates {
        let id = candidate.session.clone();
        let (summary, header) = {
            let store = store.clone();
            let id = id.clone();
            blocking(move || Ok((store.session(&id)?, store.header_bytes(&id)?))).await?
        };
        let session = PushSession {
            id: id.as_str(),
            header: &header,
            cwd: &summary.cwd,
            created_at: &summary.created,
            user: &identity.user,
            host: &identity.host,
        };
        let mut inserted_total = 0;
        let end = candidate.next_seq;
        let load = |from: i64| {
            let store = store.clone();
            let id = id.clone();
            let limit = options.batch_entries.max(1);
            let max_bytes = options.batch_bytes;
            async move {
                if from >= end {
                    return Ok(None);
                }
                blocking(move || load_batch(&store, &id, from, limit, max_bytes)).await
            }
        };
        let mut current = load(candidate.pushed_seq).await?;
        while let Some(batch) = current {
            report.batches += 1;
            // The next batch is read and converted (off this thread) while the server stores
            // this one; it is dropped unused when this one is refused.
            let (outcome, upcoming) = tokio::join!(
                archive.push_batch(&session, &batch.entries, &batch.meta),
                load(batch.next)
            );
            match outcome? {
                PushOutcome::Stored { inserted } => {
                    inserted_total += inserted;
                    let store = store.clone();
                    let remote = remote.clone();
                    let id = id.clone();
                    let next = batch.next;
                    blocking(move || store.set_push_mark(&remote, &id, next)).await?;
                }
                PushOutcome::Conflict { seqs } => {
                    report.conflicts.push(SyncConflict {
                        session: id.as_str().to_owned(),
                        direction: "push",
                        detail: describe_seqs(&seqs),
                    });
                    break;
                }
            }
            current = upcoming?;
        }
        report.pushed.push((id.as_str().to_owned(), inserted_total));
    }
    Ok(())
}

/// One push batch, ready to send.
struct Batch {
    entries: Vec<PushEntry>,
    meta: BatchMeta,
    /// One past its last seq.
    next: i64,
}

/// Reads a session's entries from `from` on (at most `limit`, and `max_bytes` of payload
/// unless one entry alone is larger) and converts them for the archive; `None` at the end.
fn load_batch(
    store: &SessionStore,
    id: &SessionId,
    from: i64,
    limit: usize,
    max_bytes: usize,
) -> crate::store::Result<Option<Batch>> {
    let mut stored = store.entries_from(id, from, limit)?;
    let mut bytes = 0;
    let mut keep = 0;
    for entry in &stored {
        bytes += entry.payload.len();
        if keep > 0 && bytes > max_bytes {
            break;
        }
        keep += 1;
    }
    stored.truncate(keep);
    let Some(last) = stored.last() else {
        return Ok(None);
    };
    let next = last.seq + 1;
    Ok(Some(Batch {
        meta: batch_meta(&stored),
        entries: stored.into_iter().map(push_entry).collect(),
        next,
    }))
}

fn describe_seqs(seqs: &[i64]) -> String {
    let mut parts = Vec::new();
    if seqs.contains(&-1) {
        parts.push("the header differs".to_owned());
    }
    let entries: Vec<String> = seqs
        .iter()
        .filter(|seq| **seq >= 0)
        .map(i64::to_string)
        .collect();
    if !entries.is_empty() {
        parts.push(format!(
            "the server holds other bytes at seq {}",
            entries.join(", ")
        ));
    }
    parts.join("; ")
}

async fn pull_session(
    store: &SessionStore,
    archive: &mut Archive,
    changed: &crate::remote::archive::ChangedSession,
    options: &SyncOptions,
    report: &mut SyncReport,
) -> Result<()> {
    let remote = archive.remote().to_owned();
    let id = SessionId::new(changed.id.clone());
    let (local, origin) = {
        let store = store.clone();
        let id = id.clone();
        blocking(move || Ok((store.has_session(&id)?, store.sync_origin(&id)?))).await?
    };
    if local && origin.is_none() {
        // This store's own session (pushed from here, or the same file imported here too).
        return Ok(());
    }
    let mut from = match (&origin, local) {
        (Some(origin), true) => origin.pulled_seq,
        _ => 0,
    };
    if changed.next_seq <= from {
        return Ok(());
    }
    let Some(header_bytes) = archive.header(&changed.id).await? else {
        return Ok(());
    };
    let Some(header) = SessionHeader::parse(&header_bytes) else {
        report.conflicts.push(SyncConflict {
            session: changed.id.clone(),
            direction: "pull",
            detail: "its header on the server is not a session header".to_owned(),
        });
        return Ok(());
    };
    let mut origin = SyncOrigin {
        remote: remote.clone(),
        user: changed.user.clone(),
        host: changed.host.clone(),
        pulled_seq: from,
    };
    {
        let store = store.clone();
        let id = id.clone();
        let origin = origin.clone();
        blocking(move || store.put_sync_origin(&id, &origin)).await?;
    }
    let mut added_total = 0;
    loop {
        let rows = archive
            .entries_from(&changed.id, from, options.pull_batch.max(1))
            .await?;
        let Some(next) = rows.last().map(|(seq, _)| seq + 1) else {
            break;
        };
        let items: Vec<Item> = rows
            .into_iter()
            .filter_map(|(seq, payload)| {
                let entry = Entry::parse(&payload)?;
                Some(Item::Entry(FileEntry {
                    line: usize::try_from(seq + 1).unwrap_or(usize::MAX),
                    payload,
                    entry,
                }))
            })
            .collect();
        let import = {
            let store = store.clone();
            let header = header.clone();
            let header_bytes = header_bytes.clone();
            let source = format!("remote {remote}");
            blocking(move || {
                let options = ImportOptions {
                    source: &source,
                    mode: ImportMode::Merge,
                };
                store.import_lines(&header, &header_bytes, items.into_iter().map(Ok), &options)
            })
            .await?
        };
        if import.status == ImportStatus::Refused {
            report.conflicts.push(SyncConflict {
                session: changed.id.clone(),
                direction: "pull",
                detail: match &import.conflict {
                    Some(conflict) => format!(
                        "entry {} is stored here with other bytes",
                        conflict.id.as_str()
                    ),
                    None => "the local session differs".to_owned(),
                },
            });
            break;
        }
        added_total += i64::try_from(import.added).unwrap_or(i64::MAX);
        from = next;
        origin.pulled_seq = from;
        let store = store.clone();
        let id = id.clone();
        let origin = origin.clone();
        blocking(move || store.put_sync_origin(&id, &origin)).await?;
        if from >= changed.next_seq {
            break;
        }
    }
    report.pulled.push((changed.id.clone(), added_total));
    Ok(())
}
