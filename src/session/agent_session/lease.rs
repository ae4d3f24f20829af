//! The writer lease of the session an `AgentSession` writes (issue 10): taken when a stored
//! session is opened for writing (startup, `switch_session`, fork and clone targets) or when a
//! new session is first written, renewed by a heartbeat task, released when the session is
//! left (switch, new, fork, clone) and at `shutdown`.
//!
//! A session held by another live process is not opened for writing silently: the open
//! fails with [`SessionError::Held`] naming the holder, and the mode chooses — open it
//! [`OpenAccess::ReadOnly`], fork it into a new session, or take it over
//! ([`OpenAccess::Write`], which replaces a holder that is gone on this host or whose
//! heartbeat is stale). A lease lost to another process (its heartbeat or an append saw the
//! new holder) turns the session read-only with one notice; the entries it could not write
//! stay in memory (see `persist`).
//!
//! Invariants: at most one lease held per handle, always for the current session; a
//! `--no-session` (in-memory) store takes none; while read-only nothing is written to the
//! session (entries are kept unsaved) and prompts are refused with [`SessionError::ReadOnly`].

use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use crate::model::entry::SessionHeader;
use crate::model::ids::SessionId;
use crate::session::agent_session::config::SessionTarget;
use crate::session::agent_session::error::{HeldSession, ReadOnlyReason, SessionError};
use crate::session::agent_session::state::{AgentSession, HeldLease, LeaseState, lock};
use crate::session::events::NoticeLevel;
use crate::session::persist::{Persistence, blocking};
use crate::session::settings::LeaseSettings;
use crate::store::{Lease, LeaseAttempt, LeaseHolder, SessionStore, StoreError, spawn_heartbeat};

/// How a stored session is opened when another process may be writing it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OpenAccess {
    /// Take the lease, taking it over from a holder that is gone on this host or whose
    /// heartbeat is stale; a live, fresh holder gives [`SessionError::Held`]. (Print, JSON
    /// and RPC modes; the REPL's "take over".)
    #[default]
    Write,
    /// Like [`Self::Write`], but only a holder that is gone on this host is replaced without
    /// asking; a stale holder also gives [`SessionError::Held`], so the user chooses.
    Ask,
    /// Take no lease: history visible, prompts refused, other entries kept unsaved.
    ReadOnly,
}

/// What opening a target claimed, installed by `load`.
#[derive(Debug)]
pub(super) enum Claim {
    /// Nothing (a new session, or an in-memory store).
    Nothing,
    /// The target's lease.
    Lease(Lease),
    /// The target opened read-only.
    ReadOnly(ReadOnlyReason),
}

fn is_memory(store: &SessionStore) -> bool {
    store.display_path() == ":memory:"
}

impl AgentSession {
    fn lease_settings(&self) -> &LeaseSettings {
        &self.config().settings.lease
    }

    /// Resolves `ContinueRecent` to the latest session of the working directory (or a new
    /// one).
    pub(super) async fn resolve_target(
        &self,
        target: SessionTarget,
    ) -> Result<SessionTarget, SessionError> {
        if target != SessionTarget::ContinueRecent {
            return Ok(target);
        }
        let store = self.store().clone();
        let cwd = self.config().cwd.to_string_lossy().into_owned();
        Ok(match blocking(move || store.most_recent(&cwd)).await? {
            Some(id) => SessionTarget::Open(id),
            None => SessionTarget::New {
                parent_session: None,
            },
        })
    }

    /// Claims the lease of a resolved target (nothing for a new session or a memory store).
    pub(super) async fn claim(
        &self,
        target: &SessionTarget,
        access: OpenAccess,
    ) -> Result<Claim, SessionError> {
        let SessionTarget::Open(id) = target else {
            return Ok(Claim::Nothing);
        };
        if is_memory(self.store()) {
            return Ok(Claim::Nothing);
        }
        let store = self.store().clone();
        let session = id.clone();
        // A session pulled from a remote archive is never written here (`-c`, `--session`,
        // `-r`, `/resume` and RPC `switch_session` all come through here); read-only, asked
        // for, it may be opened.
        if access != OpenAccess::ReadOnly {
            let (store, session) = (store.clone(), session.clone());
            if let Some(origin) = blocking(move || store.sync_origin(&session)).await? {
                return Err(SessionError::Pulled {
                    session: id.clone(),
                    remote: origin.remote,
                    user: origin.user,
                    host: origin.host,
                });
            }
        }
        if access == OpenAccess::ReadOnly {
            // Nobody may hold it any more: read-only all the same, as asked.
            let holder = blocking(move || store.lease_holder(&session)).await?;
            return Ok(Claim::ReadOnly(ReadOnlyReason::Opened { holder }));
        }
        let settings = self.lease_settings().clone();
        let attempt = blocking(move || {
            let first = store.acquire_lease(&session, &settings.owner, settings.config)?;
            let LeaseAttempt::Held(holder) = &first else {
                return Ok(first);
            };
            let replace = match access {
                OpenAccess::Ask => holder.owner_alive_on_this_host == Some(false),
                OpenAccess::Write | OpenAccess::ReadOnly => holder.can_take_over_now(),
            };
            if replace {
                store.take_over_lease(&session, &settings.owner, settings.config)
            } else {
                Ok(first)
            }
        })
        .await?;
        match attempt {
            LeaseAttempt::Acquired(lease) => Ok(Claim::Lease(lease)),
            LeaseAttempt::Held(holder) => Err(SessionError::Held(Box::new(HeldSession {
                session: id.clone(),
                holder,
            }))),
        }
    }

    /// Makes `claim` the current session's lease state, starting its heartbeat.
    pub(super) fn install_claim(&self, claim: Claim) {
        let state = match claim {
            Claim::Nothing => LeaseState::Unleased,
            Claim::ReadOnly(reason) => LeaseState::ReadOnly(reason),
            Claim::Lease(lease) => LeaseState::Held(self.start_heartbeat(lease)),
        };
        let old = std::mem::replace(&mut *lock(&self.inner.lease), state);
        if let LeaseState::Held(old) = old {
            // Not expected (the caller left the old session first); never leave a task behind.
            old.stop.cancel();
        }
    }

    fn start_heartbeat(&self, lease: Lease) -> HeldLease {
        let stop = CancellationToken::new();
        let weak = self.downgrade();
        let store = self.store().clone();
        let watched = lease.clone();
        let cancelled = stop.clone();
        let task = tokio::spawn(async move {
            let mut heartbeat = spawn_heartbeat(store, watched.clone());
            tokio::select! {
                () = cancelled.cancelled() => heartbeat.stop().await,
                message = heartbeat.lost() => {
                    if let Some(session) = weak.upgrade() {
                        session.lease_lost(&watched, message);
                    }
                }
            }
        });
        HeldLease { lease, stop, task }
    }

    /// Turns the session read-only after another process took `lease` over (once; later
    /// reports of the same loss are ignored).
    pub(super) fn lease_lost(&self, lease: &Lease, message: String) {
        {
            let mut state = lock(&self.inner.lease);
            match &*state {
                LeaseState::Held(held) if held.lease == *lease => {}
                _ => return,
            }
            if let LeaseState::Held(held) = std::mem::replace(
                &mut *state,
                LeaseState::ReadOnly(ReadOnlyReason::Lost {
                    message: message.clone(),
                }),
            ) {
                held.stop.cancel();
            }
        }
        self.notice(
            NoticeLevel::Error,
            format!(
                "{message}. This session is read-only here now; entries not saved stay in memory (/session counts them, /export FILE.jsonl writes them)"
            ),
        );
    }

    /// A store error seen by an append: a lost lease turns the session read-only.
    pub(super) fn check_lease_error(&self, error: &StoreError) {
        if !matches!(error, StoreError::LeaseLost { .. }) {
            return;
        }
        let lease = match &*lock(&self.inner.lease) {
            LeaseState::Held(held) => held.lease.clone(),
            _ => return,
        };
        self.lease_lost(&lease, error.to_string());
    }

    /// Takes the lease of a session first written now (a new session's deferred creation).
    pub(super) async fn lease_new_session(&self, persistence: &Persistence) {
        if !persistence.is_stored() || is_memory(self.store()) {
            return;
        }
        if !matches!(&*lock(&self.inner.lease), LeaseState::Unleased) {
            return;
        }
        let target = SessionTarget::Open(persistence.id());
        match self.claim(&target, OpenAccess::Write).await {
            Ok(claim) => {
                if matches!(&*lock(&self.inner.lease), LeaseState::Unleased) {
                    self.install_claim(claim);
                }
            }
            Err(error) => self.notice(
                NoticeLevel::Warning,
                format!("could not take the writer lease of the new session: {error}"),
            ),
        }
    }

    /// Leaves the current session's lease: writes what is still unsaved if it can, stops the
    /// heartbeat and releases the lease (kept when `keep` is the same session, which is being
    /// opened again).
    pub(super) async fn leave_lease(&self, keep: Option<&SessionId>) {
        let state = std::mem::take(&mut *lock(&self.inner.lease));
        {
            let mut persistence = self.inner.persistence.lock().await;
            let flushed = match &state {
                // Read-only: the store would refuse them (and must not take them).
                LeaseState::ReadOnly(_) => Ok(0),
                _ => self.inner.writer.flush(&mut persistence).await,
            };
            let session = persistence.id();
            // A new session whose first write failed (a damaged database, a full disk) is
            // still pending: its header and every entry are unsaved.
            let (header, lines): (Option<Vec<u8>>, Vec<Vec<u8>>) =
                match persistence.unstored_pending() {
                    Some((header, entries)) => (
                        Some(header.to_line().into_bytes()),
                        entries.iter().map(|raw| raw.payload.clone()).collect(),
                    ),
                    None => (
                        None,
                        persistence
                            .unsaved()
                            .iter()
                            .map(|raw| raw.payload.clone())
                            .collect(),
                    ),
                };
            let count = lines.len();
            let why = match (&flushed, header.is_some()) {
                (_, true) => self
                    .inner
                    .writer
                    .materialize(&mut persistence)
                    .await
                    .err()
                    .map(|error| error.to_string()),
                (Err(error), false) => Some(error.to_string()),
                (Ok(_), false) => None,
            };
            // A last try at a pending session may have stored it after all.
            let stored_now = header.is_some() && persistence.is_stored();
            drop(persistence);
            if count > 0 && !stored_now {
                let why = why.unwrap_or_else(|| "the session is read-only here".to_owned());
                let entries = format!(
                    "{count} unsaved entr{}",
                    if count == 1 { "y" } else { "ies" }
                );
                let rescued = self.rescue(&session, header, lines).await;
                let message = match &rescued {
                    Some(Ok(path)) => format!(
                        "{entries} of the session left could not be written ({why}); saved with the session to {} — `pi import {}` adds them back once the session can be written",
                        path.display(),
                        path.display()
                    ),
                    Some(Err(error)) => format!(
                        "{entries} of the session left could not be written ({why}) nor saved to a file ({error}); they are dropped"
                    ),
                    None => format!(
                        "{entries} of the session left could not be written and are dropped ({why})"
                    ),
                };
                self.inner
                    .not_stored
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                self.notice(NoticeLevel::Error, message.clone());
                self.emit(crate::session::events::SessionEvent::SessionUnsaved {
                    session_id: session.to_string(),
                    entries: count,
                    path: match &rescued {
                        Some(Ok(path)) => Some(path.display().to_string()),
                        _ => None,
                    },
                    error: message,
                });
            }
        }
        let LeaseState::Held(held) = state else {
            return;
        };
        held.stop.cancel();
        let _ = held.task.await;
        if keep == Some(held.lease.session()) {
            return;
        }
        let store = self.store().clone();
        let lease = held.lease;
        if let Err(error) = blocking(move || store.release_lease(&lease)).await {
            self.notice(
                NoticeLevel::Warning,
                format!("could not release the writer lease: {error}"),
            );
        }
    }

    /// Saves `lines` (entries the store refused) after the stored session as one JSONL file
    /// in the rescue directory: the session's export (or, when the store cannot be read, a
    /// header of the same session), then the kept lines, so that `pi import` merges exactly
    /// the kept entries back by union. `None` without a rescue directory.
    async fn rescue(
        &self,
        session: &SessionId,
        header: Option<Vec<u8>>,
        lines: Vec<Vec<u8>>,
    ) -> Option<Result<PathBuf, String>> {
        let dir = self.lease_settings().rescue_dir.clone()?;
        let store = self.store().clone();
        let session = session.clone();
        let stamp = self.config().clock.now_ms();
        // When the store cannot even be read, a header of our own stands in for the export:
        // `pi import` merges by the session id and ignores the header's other fields.
        let fallback_header = SessionHeader::new(
            session.clone(),
            crate::support::clock::iso_from_ms(stamp),
            self.cwd().to_string_lossy().into_owned(),
            None,
        )
        .to_line();
        let result = tokio::task::spawn_blocking(move || {
            let mut file = Vec::new();
            match header {
                // A session never stored: its own header, then all its entries.
                Some(header) => {
                    file.extend_from_slice(&header);
                    file.push(b'\n');
                }
                None => {
                    if store.export_jsonl(&session, &mut file).is_err() {
                        file.clear();
                        file.extend_from_slice(fallback_header.as_bytes());
                        file.push(b'\n');
                    }
                }
            }
            for line in lines {
                file.extend_from_slice(&line);
                file.push(b'\n');
            }
            // The id comes from the session's file: made a safe name, never a path.
            let stem = crate::jsonl::writer::session_file_stem(&session);
            write_private(&dir, &format!("{stem}-{stamp}"), &file)
                .map_err(|(path, error)| format!("{}: {error}", path.display()))
        })
        .await
        .map_err(|error| error.to_string())
        .and_then(|result| result);
        Some(result)
    }

    /// Writes what is still unsaved and releases the lease (at `shutdown`).
    pub(crate) async fn release_at_exit(&self) {
        self.leave_lease(None).await;
    }

    /// Returns why the session is read-only here, if it is.
    pub fn read_only(&self) -> Option<ReadOnlyReason> {
        match &*lock(&self.inner.lease) {
            LeaseState::ReadOnly(reason) => Some(reason.clone()),
            _ => None,
        }
    }

    /// Returns whether this handle holds the current session's writer lease.
    pub fn holds_lease(&self) -> bool {
        matches!(&*lock(&self.inner.lease), LeaseState::Held(_))
    }

    /// Refuses a write that must not be kept for later (a prompt, `!cmd`, a compaction) in a
    /// read-only session.
    pub(super) async fn refuse_read_only(&self) -> Result<(), SessionError> {
        match self.read_only() {
            None => Ok(()),
            Some(reason) => Err(SessionError::ReadOnly {
                session: self.session_id().await,
                reason: Box::new(reason),
            }),
        }
    }

    /// Takes over the lease of the current (read-only) session: succeeds when nobody holds
    /// it, or its holder is gone on this host or stale; then writes the entries kept unsaved
    /// (after what the other process wrote) and reloads the transcript from the store.
    /// Returns how many kept entries were written.
    pub async fn take_over(&self) -> Result<usize, SessionError> {
        if self.read_only().is_none() {
            return Ok(0);
        }
        let id = self.session_id().await;
        let claim = self
            .claim(&SessionTarget::Open(id.clone()), OpenAccess::Write)
            .await?;
        self.install_claim(claim);
        let written = {
            let mut persistence = self.inner.persistence.lock().await;
            // Kept entries continue the branch the other writer left, in their order.
            if let Persistence::Stored { unsaved, .. } = &mut *persistence
                && let Some(first) = unsaved.first_mut()
            {
                let store = self.store().clone();
                let session = id.clone();
                let leaf = blocking(move || store.leaf(&session)).await?;
                let leaf = leaf.and_then(|stored| stored.entry.id);
                if first.entry.parent_id != leaf {
                    first.entry.parent_id = leaf;
                    first.payload = first.entry.to_line().into_bytes();
                }
            }
            self.inner.writer.flush(&mut persistence).await?
        };
        self.reload_transcript().await?;
        Ok(written)
    }

    /// Returns the lease holder of a stored session (a read), for countdowns.
    pub async fn lease_holder_of(
        &self,
        session: &SessionId,
    ) -> Result<Option<LeaseHolder>, SessionError> {
        let store = self.store().clone();
        let session = session.clone();
        Ok(blocking(move || store.lease_holder(&session)).await?)
    }
}

impl AgentSession {
    /// Whether entries of a session this handle left could not be stored (they were saved to
    /// the rescue directory, or dropped): print mode, JSON mode, RPC and the REPL exit 1.
    pub fn entries_not_stored(&self) -> bool {
        self.inner
            .not_stored
            .load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Writes `bytes` to a new file `<dir>/<stem>.jsonl` (or `<stem>-2.jsonl`, … when the name is
/// taken) readable only by this user, in `dir` (created 0700), and returns its path. The bytes
/// go to a temporary file first, synced, then linked under the final name (never replacing a
/// file) and the directory synced: the rescue file is whole or absent, never empty or cut
/// (a full disk leaves no file, and the error says so).
fn write_private(
    dir: &Path,
    stem: &str,
    bytes: &[u8],
) -> Result<PathBuf, (PathBuf, std::io::Error)> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let first = dir.join(format!("{stem}.jsonl"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|error| (dir.to_path_buf(), error))?;
    let temp = dir.join(format!(".{stem}.{}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_all()));
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temp);
        return Err((first, error));
    }
    let mut linked = Err((first.clone(), std::io::Error::other("no free name")));
    for attempt in 1..1000 {
        let path = if attempt == 1 {
            first.clone()
        } else {
            dir.join(format!("{stem}-{attempt}.jsonl"))
        };
        match std::fs::hard_link(&temp, &path) {
            Ok(()) => {
                linked = Ok(path);
                break;
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => {
                linked = Err((path, error));
                break;
            }
        }
    }
    let _ = std::fs::remove_file(&temp);
    let path = linked?;
    std::fs::File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(|error| (path.clone(), error))?;
    Ok(path)
}
