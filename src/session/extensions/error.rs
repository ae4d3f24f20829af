//! How extensions fail and how their failures are reported: [`ExtensionError`] (what a hook
//! returns instead of a decision) and [`ExtensionErrorReport`] (one `extension_error` event:
//! which extension, during which event, what went wrong).
//!
//! Invariant: every error displays as one line.

use std::sync::Arc;

use crate::session::extensions::result::ResultError;

/// Why an extension hook (or the extension itself) failed. Each variant displays as one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtensionError {
    /// The handler reported an error (the reference's thrown exception).
    #[error("{0}")]
    Handler(String),
    /// The answer did not have the shape the event allows.
    #[error(transparent)]
    InvalidResult(#[from] ResultError),
    /// An in-process handler did not finish in time.
    #[error("did not answer `{event}` within {ms} ms")]
    Timeout {
        /// The event.
        event: String,
        /// The limit.
        ms: u128,
    },
    /// The extension is not running any more; why was reported once when it stopped.
    #[error("extension is not running: {0}")]
    Stopped(String),
}

impl ExtensionError {
    /// Whether the failure was already reported (when the extension stopped).
    pub fn already_reported(&self) -> bool {
        matches!(self, Self::Stopped(_))
    }
}

/// One `extension_error`: which extension, during which event, what went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtensionErrorReport {
    /// The extension's path (`extensionPath`).
    pub extension_path: String,
    /// The event (or `command`, `process`, `send_message`, …).
    pub event: String,
    /// One line.
    pub error: String,
}

/// Where extension errors go when there is no session to emit them.
pub type ErrorSink = Arc<dyn Fn(ExtensionErrorReport) + Send + Sync>;
