//! [`SessionError`]: what can go wrong in a session operation, with the payloads a mode
//! needs to decide what to offer — [`HeldSession`] (another process writes the session) and
//! [`ReadOnlyReason`] (why this process may not).
//!
//! Invariant: every variant displays as one line a user can act on.

use std::time::Duration;

use crate::model::ids::SessionId;
use crate::store::{LeaseHolder, StoreError};
use crate::support::term;

/// What went wrong in a session operation.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No model is selected.
    #[error(
        "No model selected. Set an API key (e.g. ANTHROPIC_API_KEY or OPENAI_API_KEY), or add a provider to models.json in the agent dir, then choose a model with --model provider/id"
    )]
    NoModel,
    /// The model's provider has no key.
    #[error(
        "No API key found for {provider}. Run `pi auth login {provider}` (or /login {provider}), set the provider's API key environment variable, or pass --api-key"
    )]
    NoApiKey {
        /// The provider.
        provider: String,
    },
    /// A prompt arrived while the agent is running and no streaming behaviour was given.
    #[error(
        "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
    )]
    Busy,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An entry does not exist or cannot be used for the operation.
    #[error("{0}")]
    InvalidEntry(String),
    /// A model was not found.
    #[error("Model not found: {0}")]
    ModelNotFound(String),
    /// A `!command` could not run.
    #[error("{0}")]
    Shell(String),
    /// A skill could not be expanded.
    #[error("{0}")]
    Expansion(String),
    /// An extension cancelled the operation (`session_before_*` returned `cancel`).
    #[error("cancelled by an extension")]
    Cancelled,
    /// An extension command was sent to a queue (`/cmd` cannot be steered or followed up).
    #[error(
        "Extension command \"/{0}\" cannot be queued. Use prompt() or execute the command when not streaming."
    )]
    CommandNotQueueable(String),
    /// A compaction or branch summary failed.
    #[error("{0}")]
    Compaction(String),
    /// Another process writes the session (its lease is held); nothing was opened or
    /// changed.
    #[error(transparent)]
    Held(Box<HeldSession>),
    /// The session was pulled from a remote archive (`pi sync`, docs/SYNC.md): another
    /// machine's or person's history, never written here; a local fork continues it.
    #[error(
        "session {} was pulled from remote {} ({}@{}) and is read-only here; continue it in a local copy with `pi --fork {}`",
        term::line(session.as_str()),
        term::line(remote),
        term::line(user),
        term::line(host),
        term::line(session.as_str())
    )]
    Pulled {
        /// The session.
        session: SessionId,
        /// The remote it came from.
        remote: String,
        /// Who pushed it.
        user: String,
        /// From which machine.
        host: String,
    },
    /// The session is read-only in this process (opened so, or its lease was taken over).
    #[error(
        "session {session} is read-only here: {}; continue in a new session (fork or clone it) or take it over",
        describe_read_only(reason)
    )]
    ReadOnly {
        /// The session.
        session: SessionId,
        /// Why.
        reason: Box<ReadOnlyReason>,
    },
}

/// Says why a session is read-only, for messages.
pub fn describe_read_only(reason: &ReadOnlyReason) -> String {
    match reason {
        ReadOnlyReason::Opened {
            holder: Some(holder),
        } => format!("another process writes it ({holder})"),
        ReadOnlyReason::Opened { holder: None } => "it was opened read-only".to_owned(),
        ReadOnlyReason::Lost { .. } => "another process took its writer lease over".to_owned(),
    }
}

/// A session another process holds, for the mode to offer its choice.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "session {session} is held by another writer ({holder}); continue it in a new session with `pi --fork {session}`, or retry once that process has ended{}",
    take_over_hint(holder)
)]
pub struct HeldSession {
    /// The session.
    pub session: SessionId,
    /// Who holds it.
    pub holder: LeaseHolder,
}

fn take_over_hint(holder: &LeaseHolder) -> String {
    if holder.can_take_over_now() {
        " (it may be taken over now)".to_owned()
    } else {
        format!(
            " (or in {} s, when it is taken over if it stopped responding)",
            seconds(holder.take_over_in())
        )
    }
}

/// Rounds a wait up to whole seconds (at least 1).
pub fn seconds(wait: Duration) -> u64 {
    wait.as_millis()
        .div_ceil(1000)
        .max(1)
        .try_into()
        .unwrap_or(u64::MAX)
}

/// Why a session is read-only in this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadOnlyReason {
    /// It was opened read-only while another process held it.
    Opened {
        /// The holder at the time (`None`: it had ended meanwhile).
        holder: Option<LeaseHolder>,
    },
    /// Another process took the lease over.
    Lost {
        /// The store's message.
        message: String,
    },
}
