//! Compaction and branch summaries inside the session (spec compaction.md §3, §8.4): the
//! automatic check after a run and before a prompt, overflow recovery (compact, then continue
//! the interrupted turn — at most once per user message), manual `/compact`, and tree
//! navigation that summarises the abandoned branch.
//!
//! Invariants: compaction only appends (a `compaction` or `branch_summary` entry); the failed
//! assistant message of an overflow stays in the store and leaves only the transcript; the
//! plan is made on the path tail from the last kept boundary (`SessionStore::
//! compaction_window`), never on the whole history.

use tokio_util::sync::CancellationToken;

use crate::ai::Model;
use crate::model::entry::EntryKind;
use crate::model::ids::EntryId;
use crate::model::message::{AgentMessage, AssistantMessage, StopReason};
use crate::session::agent_session::error::SessionError;
use crate::session::agent_session::state::AgentSession;
use crate::session::compaction::{
    AuthRecovery, BranchSummaryOptions, CompactOptions, CompactionCheck, CompactionCheckInput,
    CompactionError, CompactionReason, CompactionSettings, OVERFLOW_RECOVERY_EXHAUSTED,
    RetryObserver, Summarizer, SummaryRetry, check_compaction, collect_entries_for_branch_summary,
    compact, generate_branch_summary, navigation_target, prepare_compaction,
    prepare_manual_compaction,
};
use crate::session::events::SessionEvent;
use crate::session::extensions::event::TreePreparation;
use crate::session::persist::{Persistence, blocking};
use crate::store::{LeafSelector, RawEntry, StoredEntry};

/// What the automatic check decided after a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterRun {
    /// Nothing more to do.
    Done,
    /// Continue the agent loop (overflow recovered, or messages are queued).
    Continue,
}

/// Options of [`AgentSession::navigate_tree_with`] (the reference's `navigateTree` options).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NavigateOptions {
    /// Summarise the abandoned branch into a `branch_summary` entry at the destination.
    pub summarize: bool,
    /// Instructions for the summary.
    pub custom_instructions: Option<String>,
    /// Use the instructions instead of the default prompt.
    pub replace_instructions: bool,
    /// A label to attach (to the summary entry, or to the target without a summary).
    pub label: Option<String>,
}

/// What a navigation did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NavigateOutcome {
    /// The text of a user or custom message target, to put back in the editor.
    pub editor_text: Option<String>,
    /// The summary was aborted; nothing moved.
    pub cancelled: bool,
}

impl AgentSession {
    fn compaction_settings(&self) -> CompactionSettings {
        let mut settings =
            self.with_settings(|settings| CompactionSettings::from(&settings.compaction));
        settings.enabled = self.auto_compaction();
        settings
    }

    /// The path tail a plan needs: for a session not yet written, the path through its
    /// buffered entries (the reference plans on its in-memory entries too, so even a session
    /// with no message yet can be compacted).
    async fn compaction_tail(&self) -> Result<Vec<StoredEntry>, SessionError> {
        if let Persistence::Pending { entries, leaf, .. } = &*self.inner.persistence.lock().await {
            return Ok(pending_path(entries, leaf.as_ref()));
        }
        let session = self.session_id().await;
        let store = self.store().clone();
        Ok(blocking(move || store.compaction_window(&session)).await?)
    }

    /// After the provider refused `rejected` for a summary request: refreshes the sign-in
    /// once (as a turn does) and returns the stream options with the new token.
    fn refresh_summary_auth<'a>(
        &'a self,
        model: &'a Model,
        rejected: Option<String>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Option<crate::ai::StreamOptions>> + Send + 'a>,
    > {
        Box::pin(async move {
            let credentials = self.config().credentials.clone();
            let rejected = rejected?;
            if !credentials.may_refresh(&model.provider) {
                return None;
            }
            let provider = model.provider.clone();
            let renewed = tokio::task::spawn_blocking(move || {
                credentials
                    .refresh_rejected(&provider, &rejected)
                    .unwrap_or(false)
            })
            .await
            .unwrap_or(false);
            if !renewed {
                return None;
            }
            self.summarizer_options(model).await.ok()
        })
    }

    async fn summarizer_options(&self, model: &Model) -> Result<crate::ai::StreamOptions, String> {
        self.stream_options(model)
            .await
            .map_err(|error| error.to_string())
    }

    /// The automatic check (`_checkCompaction`): after a run with its last assistant message
    /// (`skip_aborted`), or before a prompt with the transcript's last assistant message.
    pub(crate) async fn check_compaction(
        &self,
        message: &AssistantMessage,
        skip_aborted: bool,
    ) -> AfterRun {
        let settings = self.compaction_settings();
        // Decided under the state lock (a pure computation, no await): the transcript is read
        // in place, not copied twice per prompt.
        let decision = {
            let state = self.state();
            // The transcript is the context at the leaf: when a compaction is on the path, its
            // summary message leads it and carries the entry's time. No store read per run.
            let latest = state.transcript.iter().find_map(|message| match message {
                AgentMessage::CompactionSummary(summary) => Some(summary.timestamp),
                _ => None,
            });
            check_compaction(&CompactionCheckInput {
                settings: &settings,
                message,
                skip_aborted,
                model: state.model.as_ref(),
                latest_compaction_ms: latest,
                transcript: &state.transcript,
                overflow_recovery_attempted: state.overflow_recovery_attempted,
            })
        };
        match decision {
            CompactionCheck::None => AfterRun::Done,
            CompactionCheck::OverflowRecoveryExhausted => {
                self.emit(SessionEvent::CompactionEnd {
                    reason: CompactionReason::Overflow.as_str().to_owned(),
                    result: None,
                    aborted: false,
                    will_retry: false,
                    error_message: Some(OVERFLOW_RECOVERY_EXHAUSTED.to_owned()),
                });
                AfterRun::Done
            }
            CompactionCheck::Threshold { .. } => {
                let _ = self
                    .run_compaction(CompactionReason::Threshold, false, None)
                    .await;
                if self.has_queued() {
                    AfterRun::Continue
                } else {
                    AfterRun::Done
                }
            }
            CompactionCheck::Overflow => {
                // 1.6.0: the failed attempt is omitted persistently (a `context_edit` with
                // `replacement: null` per entry of the attempt) before the recovery compaction,
                // whose plan then keeps nothing of it.
                self.state().overflow_recovery_attempted = true;
                self.omit_recovery_attempt(message).await;
                // Before a prompt the new prompt follows at once: no separate continuation.
                let will_retry = skip_aborted;
                match self
                    .run_compaction(CompactionReason::Overflow, will_retry, None)
                    .await
                {
                    Ok(Some(_)) if will_retry => {
                        {
                            let mut state = self.state();
                            if matches!(
                                state.transcript.last(),
                                Some(AgentMessage::Assistant(last)) if last.stop_reason == StopReason::Error
                            ) {
                                state.transcript.pop();
                            }
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        AfterRun::Continue
                    }
                    _ => AfterRun::Done,
                }
            }
        }
    }

    fn has_queued(&self) -> bool {
        let state = self.state();
        !state.steering.messages.is_empty() || !state.follow_up.messages.is_empty()
    }

    /// One compaction run: events, plan, the extensions' say (`session_before_compact`:
    /// cancel, or supply the summary), summary, entry, `session_compact`, transcript rebuild.
    /// Returns the result object `{summary, firstKeptEntryId, tokensBefore, details}`;
    /// `Ok(None)` when there was nothing to do or it was aborted (or cancelled by an
    /// extension); `Err` with the error (the `compaction_end` event carries it with the
    /// reason's prefix, e.g. `Compaction failed: …`).
    pub(crate) async fn run_compaction(
        &self,
        reason: CompactionReason,
        will_retry: bool,
        custom_instructions: Option<&str>,
    ) -> Result<Option<serde_json::Value>, String> {
        let reason_text = reason.as_str().to_owned();
        self.emit(SessionEvent::CompactionStart {
            reason: reason_text.clone(),
        });
        let end = |result: Option<&serde_json::Value>, aborted: bool, error: Option<String>| {
            SessionEvent::CompactionEnd {
                reason: reason_text.clone(),
                result: result.cloned(),
                aborted,
                will_retry: will_retry && result.is_some(),
                error_message: error,
            }
        };
        let manual = reason == CompactionReason::Manual;
        let Some(model) = self.model() else {
            let error = "No model selected".to_owned();
            self.emit(end(
                None,
                false,
                manual.then(|| reason.failure_message(&error)),
            ));
            return if manual { Err(error) } else { Ok(None) };
        };
        let options = match self.summarizer_options(&model).await {
            Ok(options) => options,
            Err(error) => {
                self.emit(end(
                    None,
                    false,
                    manual.then(|| reason.failure_message(&error)),
                ));
                return if manual { Err(error) } else { Ok(None) };
            }
        };
        let tail = match self.compaction_tail().await {
            Ok(tail) => tail,
            Err(error) => {
                let error = error.to_string();
                self.emit(end(None, false, Some(reason.failure_message(&error))));
                return Err(error);
            }
        };
        let settings = self.compaction_settings();
        let preparation = if manual {
            match prepare_manual_compaction(&tail, &settings) {
                Ok(preparation) => preparation,
                Err(error) => {
                    let error = error.to_string();
                    self.emit(end(None, false, Some(reason.failure_message(&error))));
                    return Err(error);
                }
            }
        } else {
            match prepare_compaction(&tail, &settings) {
                Some(preparation) => preparation,
                None => {
                    self.emit(end(None, false, None));
                    return Ok(None);
                }
            }
        };
        // An extension may cancel (as an abort would) or supply the summary.
        let supplied = match self
            .extensions_before_compact(&preparation, &tail, custom_instructions)
            .await
        {
            Ok(supplied) => supplied,
            Err(_) => {
                self.emit(end(None, true, None));
                return if manual {
                    Err("Compaction cancelled".to_owned())
                } else {
                    Ok(None)
                };
            }
        };
        if let Some(supplied) = supplied {
            let result = supplied.to_result_json();
            // 1.6.0's `appendCompaction` stores the checkpoint whoever wrote the summary.
            let mut entry = supplied.to_entry();
            entry.system_message = preparation.system_message.clone();
            self.persist(EntryKind::Compaction(entry)).await;
            if let Err(error) = self.reload_transcript().await {
                self.notice_error(format!(
                    "could not rebuild the context after compacting: {error}"
                ));
            }
            self.extensions_compacted_at_leaf(true).await;
            self.emit(end(Some(&result), false, None));
            return Ok(Some(result));
        }
        let cancel = CancellationToken::new();
        self.state().compaction_cancel = Some(cancel.clone());
        let client = self.config().client.clone();
        let clock = self.config().clock.clone();
        let observe =
            |event| self.emit(summary_retry_event(event, "compaction", Some(&reason_text)));
        let refresh = |rejected| self.refresh_summary_auth(&model, rejected);
        let summarizer = Summarizer {
            client: &client,
            model: &model,
            options,
            clock: clock.as_ref(),
            retry: self.summary_retry(),
            on_retry: RetryObserver(Some(&observe)),
            refresh_auth: AuthRecovery(Some(&refresh)),
        };
        let thinking_level = self.thinking_level();
        let outcome = compact(
            &preparation,
            &summarizer,
            &CompactOptions {
                custom_instructions,
                thinking_level,
            },
            &cancel,
        )
        .await;
        self.state().compaction_cancel = None;
        let result = match outcome {
            Ok(result) if !cancel.is_cancelled() => result,
            Ok(_) | Err(CompactionError::Cancelled) => {
                self.emit(end(None, true, None));
                return if manual {
                    Err("Compaction cancelled".to_owned())
                } else {
                    Ok(None)
                };
            }
            Err(error) => {
                let error = error.to_string();
                self.emit(end(None, false, Some(reason.failure_message(&error))));
                return Err(error);
            }
        };
        self.persist(EntryKind::Compaction(result.to_entry(false)))
            .await;
        if let Err(error) = self.reload_transcript().await {
            self.notice_error(format!(
                "could not rebuild the context after compacting: {error}"
            ));
        }
        self.extensions_compacted_at_leaf(false).await;
        // `estimatedTokensAfter`: the estimate of the rebuilt context.
        let estimated_after = self
            .state()
            .transcript
            .iter()
            .map(crate::session::compaction::estimate_tokens)
            .sum();
        let result = result.to_json(estimated_after);
        self.emit(end(Some(&result), false, None));
        Ok(Some(result))
    }

    /// Compacts now (`/compact [instructions]`, RPC `compact`): aborts a running turn first
    /// and returns `{summary, firstKeptEntryId, tokensBefore, details}`.
    pub async fn compact(
        &self,
        custom_instructions: Option<String>,
    ) -> Result<serde_json::Value, SessionError> {
        self.refuse_read_only().await?;
        self.abort();
        let _run = self.inner.run_lock.lock().await;
        match self
            .run_compaction(
                CompactionReason::Manual,
                false,
                custom_instructions.as_deref(),
            )
            .await
        {
            Ok(Some(result)) => Ok(result),
            Ok(None) => Err(SessionError::Compaction("Nothing to compact".to_owned())),
            Err(error) => Err(SessionError::Compaction(error)),
        }
    }

    /// Stops a compaction or branch summary in progress.
    pub fn abort_compaction(&self) {
        if let Some(cancel) = &self.state().compaction_cancel {
            cancel.cancel();
        }
    }

    /// Navigates the tree to `target` (the reference's `navigateTree`): optionally summarising
    /// the abandoned branch into a `branch_summary` at the destination, with an optional label.
    pub async fn navigate_tree_with(
        &self,
        target: &EntryId,
        options: NavigateOptions,
    ) -> Result<NavigateOutcome, SessionError> {
        let session = self.ensure_stored().await?;
        let store = self.store().clone();
        let (old_path, target_path) = {
            let session = session.clone();
            let target = target.clone();
            blocking(move || {
                let old = store.branch_path(&session, &LeafSelector::Current)?;
                let to = store.branch_path(&session, &LeafSelector::Entry(target))?;
                Ok((old, to))
            })
            .await?
        };
        let Some(target_entry) = target_path.last() else {
            return Err(SessionError::InvalidEntry(format!(
                "Entry {target} not found"
            )));
        };
        if old_path.last().map(|leaf| leaf.seq) == Some(target_entry.seq) {
            return Ok(NavigateOutcome::default());
        }
        let selection = collect_entries_for_branch_summary(&old_path, &target_path);
        let old_leaf = old_path.last().and_then(|leaf| leaf.entry.id.clone());
        // The extensions may cancel, supply the summary, or change instructions and label.
        let mut options = options;
        let mut supplied = None;
        let answer = self
            .extensions_before_tree(&TreePreparation {
                target_id: target,
                old_leaf_id: old_leaf.as_ref(),
                common_ancestor_id: selection.common_ancestor_id.as_ref(),
                entries_to_summarize: selection.entries,
                user_wants_summary: options.summarize,
                custom_instructions: options.custom_instructions.as_deref(),
                replace_instructions: options.replace_instructions,
                label: options.label.as_deref(),
            })
            .await;
        match answer {
            Err(SessionError::Cancelled) => {
                return Ok(NavigateOutcome {
                    editor_text: None,
                    cancelled: true,
                });
            }
            Err(error) => return Err(error),
            Ok(Some(result)) => {
                if options.summarize {
                    supplied = result.summary;
                }
                if let Some(instructions) = result.custom_instructions {
                    options.custom_instructions = Some(instructions);
                }
                if let Some(replace) = result.replace_instructions {
                    options.replace_instructions = replace;
                }
                if let Some(label) = result.label {
                    options.label = Some(label);
                }
            }
            Ok(None) => {}
        }
        let mut summary = None;
        if let Some(extension_summary) = supplied {
            summary = Some((
                extension_summary.summary,
                extension_summary.details,
                None,
                true,
            ));
        } else if options.summarize && !selection.entries.is_empty() {
            let model = self.model().ok_or(SessionError::NoModel)?;
            let stream_options = self
                .summarizer_options(&model)
                .await
                .map_err(SessionError::Compaction)?;
            let cancel = CancellationToken::new();
            self.state().compaction_cancel = Some(cancel.clone());
            let client = self.config().client.clone();
            let clock = self.config().clock.clone();
            let observe = |event| self.emit(summary_retry_event(event, "branchSummary", None));
            let refresh = |rejected| self.refresh_summary_auth(&model, rejected);
            let summarizer = Summarizer {
                client: &client,
                model: &model,
                options: stream_options,
                clock: clock.as_ref(),
                retry: self.summary_retry(),
                on_retry: RetryObserver(Some(&observe)),
                refresh_auth: AuthRecovery(Some(&refresh)),
            };
            let outcome = generate_branch_summary(
                selection.entries,
                &summarizer,
                &BranchSummaryOptions {
                    custom_instructions: options.custom_instructions.as_deref(),
                    replace_instructions: options.replace_instructions,
                    reserve_tokens: self
                        .with_settings(|settings| settings.branch_summary_reserve_tokens),
                    thinking_level: self.thinking_level(),
                },
                &cancel,
            )
            .await;
            self.state().compaction_cancel = None;
            match outcome {
                Ok(result) => {
                    summary = Some((
                        result.summary.clone(),
                        Some(result.details()),
                        result.usage.clone(),
                        false,
                    ))
                }
                Err(CompactionError::Cancelled) => {
                    return Ok(NavigateOutcome {
                        editor_text: None,
                        cancelled: true,
                    });
                }
                Err(error) => return Err(SessionError::Compaction(error.to_string())),
            }
        }
        let destination = navigation_target(&target_entry.entry);
        let store = self.store().clone();
        let target_id = target.clone();
        let label = options.label.clone().filter(|label| !label.is_empty());
        let from_extension = summary.as_ref().map(|(_, _, _, from_hook)| *from_hook);
        let summary_entry = blocking(move || match summary {
            Some((text, details, usage, from_hook)) => {
                let entry = store.branch_with_summary_usage(
                    &session,
                    destination.new_leaf.as_ref(),
                    text,
                    details,
                    usage,
                    Some(from_hook),
                )?;
                if let (Some(label), Some(id)) = (&label, &entry.entry.id) {
                    store.append_label(&session, id, Some(label))?;
                }
                Ok(crate::support::json::parse_lenient(&entry.payload).ok())
            }
            None => {
                match &destination.new_leaf {
                    Some(leaf) => store.branch(&session, leaf)?,
                    None => store.reset_leaf(&session)?,
                }
                if let Some(label) = &label {
                    store.append_label(&session, &target_id, Some(label))?;
                }
                Ok(None)
            }
        })
        .await?;
        self.reload_transcript().await?;
        self.extensions_tree_moved(old_leaf.as_ref(), summary_entry, from_extension)
            .await?;
        Ok(NavigateOutcome {
            editor_text: destination.editor_text,
            cancelled: false,
        })
    }
}

/// The root-to-leaf path through a pending session's buffered entries (append order gives
/// the `seq`; a parent that is not buffered ends the walk, as a root).
fn pending_path(entries: &[RawEntry], leaf: Option<&EntryId>) -> Vec<StoredEntry> {
    let by_id: std::collections::HashMap<&EntryId, usize> = entries
        .iter()
        .enumerate()
        .filter_map(|(index, raw)| raw.entry.id.as_ref().map(|id| (id, index)))
        .collect();
    let mut path = Vec::new();
    let mut next = leaf.and_then(|id| by_id.get(id).copied());
    while let Some(index) = next {
        if path.len() > entries.len() {
            break; // a cycle cannot come from our own appends; never loop on one
        }
        let raw = &entries[index];
        path.push(StoredEntry {
            seq: i64::try_from(index).unwrap_or(i64::MAX),
            entry: raw.entry.clone(),
            payload: raw.payload.clone(),
        });
        next = raw
            .entry
            .parent_id
            .as_ref()
            .and_then(|parent| by_id.get(parent).copied());
    }
    path.reverse();
    path
}

impl AgentSession {
    /// Returns whether automatic compaction is on.
    pub fn auto_compaction(&self) -> bool {
        self.state().auto_compaction
    }

    /// Turns automatic compaction on or off (saved to settings).
    pub fn set_auto_compaction(&self, enabled: bool) {
        self.state().auto_compaction = enabled;
        self.config().settings_sink.set_auto_compaction(enabled);
    }

    /// Returns whether a compaction or branch summary is running.
    pub fn is_compacting(&self) -> bool {
        self.state().compaction_cancel.is_some()
    }
}

/// A summary request's retry as the session reports it (1.6.0's
/// `_summarizationRetryCallbacks`).
fn summary_retry_event(event: SummaryRetry, source: &str, reason: Option<&str>) -> SessionEvent {
    match event {
        SummaryRetry::Scheduled {
            attempt,
            max_attempts,
            delay_ms,
            error_message,
        } => SessionEvent::SummarizationRetryScheduled {
            attempt,
            max_attempts,
            delay_ms,
            error_message,
        },
        SummaryRetry::AttemptStart => SessionEvent::SummarizationRetryAttemptStart {
            source: source.to_owned(),
            reason: reason.map(str::to_owned),
        },
        SummaryRetry::Finished => SessionEvent::SummarizationRetryFinished,
    }
}
