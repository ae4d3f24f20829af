//! `CompactionError`: why a compaction or a branch summary did not happen, worded as the
//! reference words it (the session prefixes these texts in `compaction_end` events).
//!
//! Invariant: no variant is produced for a condition the caller can check beforehand without
//! this module (model, credentials); those are the session's errors.

/// A compaction or branch summary that did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactionError {
    /// The last entry of the path is already a compaction (manual `/compact`).
    #[error("Already compacted")]
    AlreadyCompacted,
    /// The path has nothing that could be cut (manual `/compact`; also a path whose first kept
    /// entry has no id).
    #[error("Nothing to compact (session too small)")]
    NothingToCompact,
    /// The cancellation token fired (or the provider reported the call aborted).
    #[error("Compaction cancelled")]
    Cancelled,
    /// The history summary request ended in an error.
    #[error("Summarization failed: {message}")]
    SummarizationFailed {
        /// The provider's error text (`Unknown error` when it gave none).
        message: String,
    },
    /// The split-turn prefix summary request ended in an error.
    #[error("Turn prefix summarization failed: {message}")]
    TurnPrefixFailed {
        /// The provider's error text (`Unknown error` when it gave none).
        message: String,
    },
    /// The branch summary request ended in an error.
    #[error("Branch summarization failed: {message}")]
    BranchSummaryFailed {
        /// The provider's error text (`Unknown error` when it gave none).
        message: String,
    },
    /// A summary request stopped at the output limit (`stopReason: length`): partial text
    /// never becomes a checkpoint (1.6.0 `getSummarizationFailure`).
    #[error("{label} failed: generation hit the token cap and the summary is incomplete")]
    Truncated {
        /// `Summarization`, `Turn prefix summarization` or `Branch summarization`.
        label: &'static str,
    },
    /// The summariser answered with a tool call.
    #[error("{label} attempted to call a tool")]
    CalledTool {
        /// `Summarization`, `Turn prefix summarization` or `Branch summarization`.
        label: &'static str,
    },
}
