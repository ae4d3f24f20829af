//! Moving in the tree and between sessions: `navigate_tree` (the reference's rule, without a
//! summary; with one it is `compaction.rs`'s `navigate_tree_with`), `/new`, `/resume`,
//! `/fork` (before a user message), `/clone` (the whole path) and the fork picker's list.
//! Leaving a session asks the extensions first (`session_before_switch`/`_fork`), claims the
//! target's lease, releases the current one, shuts the extensions down and loads the target.
//!
//! Invariant: a switch an extension cancels, or whose target another process writes, changes
//! nothing.

use crate::model::entry::EntryKind;
use crate::model::ids::{EntryId, SessionId};
use crate::model::message::AgentMessage;
use crate::session::agent_session::compaction::NavigateOptions;
use crate::session::agent_session::config::{OpenReport, SessionTarget};
use crate::session::agent_session::error::SessionError;
use crate::session::agent_session::lease::{Claim, OpenAccess};
use crate::session::agent_session::state::AgentSession;
use crate::session::agent_session::transcript::user_text;
use crate::session::extensions::event::{ShutdownReason, StartReason};
use crate::session::persist::blocking;

impl AgentSession {
    /// Moves the leaf to `target` following the reference's rule (a user or custom message:
    /// its parent, returning its text for the editor; anything else: the entry itself),
    /// without a summary.
    pub async fn navigate_tree(&self, target: &EntryId) -> Result<Option<String>, SessionError> {
        let outcome = self
            .navigate_tree_with(target, NavigateOptions::default())
            .await?;
        Ok(outcome.editor_text)
    }

    /// Starts a new session (`/new`, RPC `new_session`); `Err(Cancelled)` when an extension
    /// cancels it.
    pub async fn new_session(
        &self,
        parent_session: Option<String>,
    ) -> Result<OpenReport, SessionError> {
        self.allow_switch("new", None).await?;
        let previous = self.session_id().await.into_string();
        self.leave_lease(None).await;
        self.teardown(ShutdownReason::New, None).await;
        self.load(
            SessionTarget::New { parent_session },
            Claim::Nothing,
            StartReason::New,
            Some(previous),
        )
        .await
    }

    /// Switches to another stored session (`/resume`, RPC `switch_session`); `Err(Cancelled)`
    /// when an extension cancels it, `Err(Held)` when another process writes it (the current
    /// session stays).
    pub async fn switch_session(&self, id: SessionId) -> Result<OpenReport, SessionError> {
        self.switch_session_with(id, OpenAccess::Write).await
    }

    /// [`Self::switch_session`] with the given access to a session another process may hold.
    pub async fn switch_session_with(
        &self,
        id: SessionId,
        access: OpenAccess,
    ) -> Result<OpenReport, SessionError> {
        self.allow_switch("resume", Some(id.to_string())).await?;
        let previous = self.session_id().await;
        let target = SessionTarget::Open(id.clone());
        let claim = self.claim(&target, access).await?;
        self.leave_lease(Some(&id).filter(|id| **id == previous))
            .await;
        self.teardown(ShutdownReason::Resume, Some(id.to_string()))
            .await;
        self.load(
            target,
            claim,
            StartReason::Resume,
            Some(previous.into_string()),
        )
        .await
    }

    /// Forks before a user message (the path up to its parent goes to a new session; returns
    /// the message text for the editor) — the reference's `/fork`; `Err(Cancelled)` when an
    /// extension cancels it.
    pub async fn fork(&self, entry: &EntryId) -> Result<Option<String>, SessionError> {
        let session = self.ensure_stored().await?;
        let store = self.store().clone();
        let target = entry.clone();
        let found = blocking(move || store.entry(&session, &target))
            .await?
            .ok_or_else(|| SessionError::InvalidEntry("Invalid entry ID for forking".to_owned()))?;
        let EntryKind::Message(message @ AgentMessage::User(_)) = &found.entry.kind else {
            return Err(SessionError::InvalidEntry(
                "Invalid entry ID for forking".to_owned(),
            ));
        };
        self.allow_fork(entry.as_str(), "before").await?;
        let text = user_text(message);
        self.branch_into_new_session(found.entry.parent_id.clone())
            .await?;
        Ok(Some(text))
    }

    /// Copies the path root → leaf into a new session (the reference's `/clone`, a fork `at`
    /// the leaf); `Err(Cancelled)` when an extension cancels it.
    pub async fn clone_session(&self) -> Result<(), SessionError> {
        let session = self.ensure_stored().await?;
        let store = self.store().clone();
        let leaf = blocking(move || store.leaf(&session)).await?;
        let leaf_id = leaf.and_then(|stored| stored.entry.id);
        if let Some(leaf_id) = &leaf_id {
            self.allow_fork(leaf_id.as_str(), "at").await?;
        }
        self.branch_into_new_session(leaf_id).await
    }

    /// Copies the path up to `at` into a new session (fork, clone) and loads it.
    pub(super) async fn branch_into_new_session(
        &self,
        at: Option<EntryId>,
    ) -> Result<(), SessionError> {
        let session = self.ensure_stored().await?;
        let store = self.store().clone();
        let cwd = self.config().cwd.to_string_lossy().into_owned();
        let previous = session.to_string();
        let forked = blocking(move || store.fork(&session, at.as_ref(), Some(&cwd))).await?;
        let target = SessionTarget::Open(forked.id.clone());
        let claim = self.claim(&target, OpenAccess::Write).await?;
        self.leave_lease(None).await;
        self.teardown(ShutdownReason::Fork, Some(forked.id.to_string()))
            .await;
        self.load(target, claim, StartReason::Fork, Some(previous))
            .await?;
        Ok(())
    }

    /// Returns the user messages of the session with their entry ids, for `/fork` pickers
    /// (RPC `get_fork_messages`).
    pub async fn fork_messages(&self) -> Result<Vec<(EntryId, String)>, SessionError> {
        if !self.is_persisted().await {
            return Ok(Vec::new());
        }
        let session = self.session_id().await;
        let store = self.store().clone();
        let entries = blocking(move || store.entries(&session)).await?;
        Ok(entries
            .into_iter()
            .filter_map(|stored| {
                let EntryKind::Message(message @ AgentMessage::User(_)) = &stored.entry.kind else {
                    return None;
                };
                let text = user_text(message);
                (!text.is_empty()).then_some((stored.entry.id?, text))
            })
            .collect())
    }
}
