//! Summary generation through the real LLM client (1.6.0 `compact`, `generateSummary`,
//! `generateTurnPrefixSummary`, `generateBranchSummary`): the compaction summary (initial or
//! update prompt, custom focus), the split-turn prefix summary after it, and the branch
//! summary; each assembled exactly as the reference assembles it, with the usage of the calls.
//!
//! Each request: the summarisation system prompt, one user message
//! `<conversation>\n…\n</conversation>\n\n[<previous-summary>\n…\n</previous-summary>\n\n]<instructions>`
//! (a turn prefix: `# Conversation\n…\n\n# Instructions\n…`), no tools, the model's output
//! limit (1.6.0 #9512), no prompt caching, no session id. Reasoning: the session's thinking
//! level when the model reasons and the level is not `off` (branch summaries too). A `length`
//! stop or a tool call is a failure: partial text never becomes a checkpoint.
//!
//! Invariant: the only effects are the LLM requests and the calls of the caller's retry
//! observer ([`RetryObserver`]); nothing is stored or emitted here.

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::ai::convert::convert_to_llm;
use crate::ai::{
    AiClient, CacheRetention, LlmMessage, Model, Request, StreamOptions, ThinkingBudgets,
    ThinkingLevel,
};
use crate::model::entry::CompactionEntry;
use crate::model::ids::EntryId;
use crate::model::message::{
    AssistantMessage, ContentBlock, Cost, StopReason, SystemMessage, Usage, UsageKeyOrder,
    UserContent, UserMessage,
};
use crate::session::compaction::branch::prepare_branch_entries;
use crate::session::compaction::files::FileLists;
use crate::session::compaction::prepare::{CompactionPreparation, PathMessage};
use crate::session::compaction::prompts::{
    ADDITIONAL_FOCUS, BRANCH_SUMMARY_PREAMBLE, BRANCH_SUMMARY_PROMPT, NO_BRANCH_CONTENT_SUMMARY,
    NO_PRIOR_HISTORY, SPLIT_TURN_HEADING, SUMMARIZATION_PROMPT, SUMMARIZATION_SYSTEM_PROMPT,
    TURN_PREFIX_SUMMARIZATION_PROMPT, UPDATE_SUMMARIZATION_PROMPT,
};
use crate::session::compaction::serialize::serialize_conversation;
use crate::session::compaction::{CompactionError, PathEntry};
use crate::session::settings::RetrySettings;
use crate::support::clock::Clock;
use crate::support::json;

/// What a summary request's retries report, as 1.6.0's summarization retry callbacks do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SummaryRetry {
    /// A failed request is sent again after `delay_ms`.
    Scheduled {
        /// 1-based retry number.
        attempt: u32,
        /// `retry.maxRetries`.
        max_attempts: u32,
        /// The wait before it.
        delay_ms: u64,
        /// Why the request failed.
        error_message: String,
    },
    /// The retried request starts.
    AttemptStart,
    /// Retrying ended (an answer, a final failure, or an abort during the wait); only after
    /// a retry was scheduled.
    Finished,
}

/// The caller's observer of a summary request's retries (none: nothing is reported).
#[derive(Clone, Copy, Default)]
pub struct RetryObserver<'a>(pub Option<&'a (dyn Fn(SummaryRetry) + Send + Sync)>);

impl RetryObserver<'_> {
    fn report(&self, event: SummaryRetry) {
        if let Some(observe) = self.0 {
            observe(event);
        }
    }
}

impl std::fmt::Debug for RetryObserver<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "RetryObserver(Some)"
        } else {
            "RetryObserver(None)"
        })
    }
}

/// The caller's way to refresh a credential the provider refused (HTTP 401): given the
/// rejected key, the stream options with the new one, or `None` when nothing changed (1.6.0
/// refreshes a subscription's token once for any request, summaries included).
pub type RefreshAuth<'a> = dyn Fn(
        Option<String>,
    )
        -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<StreamOptions>> + Send + 'a>>
    + Send
    + Sync
    + 'a;

/// The caller's credential refresh for summary requests (none: a 401 is final).
#[derive(Clone, Copy, Default)]
pub struct AuthRecovery<'a>(pub Option<&'a RefreshAuth<'a>>);

impl std::fmt::Debug for AuthRecovery<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "AuthRecovery(Some)"
        } else {
            "AuthRecovery(None)"
        })
    }
}

/// The model a summary is asked of, and how to reach it.
#[derive(Debug, Clone)]
pub struct Summarizer<'a> {
    /// The LLM client.
    pub client: &'a AiClient,
    /// The session's current model.
    pub model: &'a Model,
    /// Key, headers, base URL, cache retention and transport for this model; the output
    /// limit, reasoning level, thinking budgets and session id are set per request as the
    /// reference sets them.
    pub options: StreamOptions,
    /// Stamps the request's user message.
    pub clock: &'a dyn Clock,
    /// The session's `retry.*`: a summary request that fails with a retryable error is sent
    /// again after the turn retry's backoff (1.6.0 `completeSummarization` through
    /// `retryAssistantCall`); `enabled: false` sends it once.
    pub retry: RetrySettings,
    /// Told about each retry of a summary request.
    pub on_retry: RetryObserver<'a>,
    /// Refreshes a refused subscription token; the request is then sent once more.
    pub refresh_auth: AuthRecovery<'a>,
}

/// How to summarise a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactOptions<'a> {
    /// `/compact` focus text (ignored when empty).
    pub custom_instructions: Option<&'a str>,
    /// The session's thinking level.
    pub thinking_level: ThinkingLevel,
}

/// How to summarise an abandoned branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BranchSummaryOptions<'a> {
    /// Custom instructions (ignored when empty).
    pub custom_instructions: Option<&'a str>,
    /// With custom instructions: use them instead of the default prompt.
    pub replace_instructions: bool,
    /// `branchSummary.reserveTokens`.
    pub reserve_tokens: u64,
    /// The session's thinking level (used when the model reasons).
    pub thinking_level: ThinkingLevel,
}

/// A compaction ready to append (the reference's `CompactionResult`).
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionResult {
    /// The summary text, file lists appended.
    pub summary: String,
    /// The first entry kept verbatim.
    pub first_kept_entry_id: EntryId,
    /// Estimated context tokens before compacting.
    pub tokens_before: u64,
    /// The files read and modified by everything summarised so far.
    pub details: FileLists,
    /// The usage of the summary requests (summed over a split turn's two).
    pub usage: Usage,
    /// The checkpoint of the prompt state at the cut (stored as `systemMessage`).
    pub system_message: Option<SystemMessage>,
}

impl CompactionResult {
    /// Returns the `compaction` entry to append with `SessionStore::append_compaction`
    /// (`from_hook` false for pi's own summaries, as the reference writes it).
    pub fn to_entry(&self, from_hook: bool) -> CompactionEntry {
        CompactionEntry {
            summary: self.summary.clone(),
            first_kept_entry_id: Some(self.first_kept_entry_id.clone()),
            tokens_before: self.tokens_before,
            details: Some(self.details.to_details()),
            usage: Some(self.usage.clone()),
            from_hook: Some(from_hook),
            system_message: self.system_message.clone(),
        }
    }

    /// Returns the result as `compaction_end.result` and `compact()` return it (1.6.0):
    /// `{summary, firstKeptEntryId, tokensBefore, estimatedTokensAfter, usage, details}`, with
    /// the estimate of the context rebuilt after appending.
    pub fn to_json(&self, estimated_tokens_after: u64) -> Value {
        let mut map = Map::new();
        map.insert("summary".to_owned(), Value::from(self.summary.as_str()));
        map.insert(
            "firstKeptEntryId".to_owned(),
            Value::from(self.first_kept_entry_id.as_str()),
        );
        map.insert("tokensBefore".to_owned(), Value::from(self.tokens_before));
        map.insert(
            "estimatedTokensAfter".to_owned(),
            Value::from(estimated_tokens_after),
        );
        // Numbers as JavaScript writes them (a zero cost is `0`, not `0.0`).
        let usage = serde_json::to_value(&self.usage)
            .ok()
            .and_then(|usage| json::parse_lenient(json::to_js_string(&usage).as_bytes()).ok())
            .unwrap_or(Value::Null);
        map.insert("usage".to_owned(), usage);
        map.insert("details".to_owned(), self.details.to_details());
        Value::Object(map)
    }
}

/// A branch summary ready to append with `SessionStore::branch_with_summary`.
#[derive(Debug, Clone, PartialEq)]
pub struct BranchSummaryResult {
    /// The summary text: preamble, the model's text, file lists.
    pub summary: String,
    /// The files the abandoned branch read and modified (empty without messages).
    pub files: FileLists,
    /// The usage of the summary request (`None` when no request was made).
    pub usage: Option<Usage>,
}

impl BranchSummaryResult {
    /// Returns the entry's `details`: `{readFiles, modifiedFiles}`, possibly empty lists.
    pub fn details(&self) -> Value {
        self.files.to_details()
    }
}

fn non_empty(text: Option<&str>) -> Option<&str> {
    text.filter(|text| !text.is_empty())
}

fn conversation_text(messages: &[PathMessage<'_>]) -> String {
    let llm: Vec<LlmMessage> = messages
        .iter()
        .flat_map(|message| convert_to_llm(std::slice::from_ref(message.as_ref())))
        .collect();
    serialize_conversation(&llm)
}

/// Returns the user text of a compaction summary request: the conversation, the previous
/// summary when there is one (update prompt), and the instructions with the focus appended.
pub fn compaction_prompt(
    conversation: &str,
    previous_summary: Option<&str>,
    custom_instructions: Option<&str>,
) -> String {
    let previous_summary = non_empty(previous_summary);
    let mut instructions = match previous_summary {
        Some(_) => UPDATE_SUMMARIZATION_PROMPT.to_owned(),
        None => SUMMARIZATION_PROMPT.to_owned(),
    };
    if let Some(custom) = non_empty(custom_instructions) {
        instructions.push_str(ADDITIONAL_FOCUS);
        instructions.push_str(custom);
    }
    let mut prompt = format!("<conversation>\n{conversation}\n</conversation>\n\n");
    if let Some(previous) = previous_summary {
        prompt.push_str(&format!(
            "<previous-summary>\n{previous}\n</previous-summary>\n\n"
        ));
    }
    prompt.push_str(&instructions);
    prompt
}

/// Returns the user text of a split turn's prefix summary request (1.6.0: the focus is
/// appended here too).
pub fn turn_prefix_prompt(conversation: &str, custom_instructions: Option<&str>) -> String {
    let mut prompt = format!(
        "# Conversation\n{conversation}\n\n# Instructions\n{TURN_PREFIX_SUMMARIZATION_PROMPT}"
    );
    if let Some(custom) = non_empty(custom_instructions) {
        prompt.push_str(ADDITIONAL_FOCUS);
        prompt.push_str(custom);
    }
    prompt
}

/// Returns the user text of a branch summary request: custom instructions replace the default
/// prompt when asked to, else are appended as the focus.
pub fn branch_summary_prompt(
    conversation: &str,
    custom_instructions: Option<&str>,
    replace_instructions: bool,
) -> String {
    let instructions = match non_empty(custom_instructions) {
        Some(custom) if replace_instructions => custom.to_owned(),
        Some(custom) => format!("{BRANCH_SUMMARY_PROMPT}{ADDITIONAL_FOCUS}{custom}"),
        None => BRANCH_SUMMARY_PROMPT.to_owned(),
    };
    format!("<conversation>\n{conversation}\n</conversation>\n\n{instructions}")
}

/// The text blocks of an answer joined by newlines.
fn answer_text(message: &AssistantMessage) -> String {
    message
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect::<Vec<_>>()
        .join("\n")
}

impl Summarizer<'_> {
    /// Sends one summarisation request and returns the final message.
    async fn complete(
        &self,
        prompt: String,
        thinking: ThinkingLevel,
        cancel: &CancellationToken,
    ) -> AssistantMessage {
        let request = Request {
            system_prompt: SUMMARIZATION_SYSTEM_PROMPT.to_owned(),
            messages: vec![LlmMessage::User(UserMessage {
                content: UserContent::Blocks(vec![ContentBlock::text(prompt)]),
                timestamp: self.clock.now_ms(),
                extra: Map::new(),
            })],
            tools: Vec::new(),
        };
        let mut options = self.options.clone();
        // 1.6.0: the model's output limit (#9512), no cache writes for one-off summaries, a
        // routing id of its own rather than the session's, no thinking budgets.
        options.max_tokens = None;
        options.thinking = thinking;
        options.cache_retention = CacheRetention::None;
        options.session_id = None;
        options.thinking_budgets = ThinkingBudgets::default();
        let max_attempts = if self.retry.enabled {
            self.retry.max_retries
        } else {
            0
        };
        let mut attempt = 0u32;
        let mut auth_retried = false;
        loop {
            let mut stream =
                self.client
                    .stream(self.model, request.clone(), options.clone(), cancel.clone());
            // A refused key (an expired subscription token) is refreshed once and the request
            // sent again, before anything of the answer was used.
            if let (Some(refresh), false) = (self.refresh_auth.0, auth_retried) {
                match stream.next().await {
                    Some(
                        event @ crate::ai::StreamEvent::Error {
                            error: crate::ai::AiError::Auth { .. },
                            ..
                        },
                    ) if !cancel.is_cancelled() => {
                        auth_retried = true;
                        if let Some(fresh) = refresh(options.api_key.clone()).await {
                            options.api_key = fresh.api_key;
                            options.headers = fresh.headers;
                            options.base_url = fresh.base_url;
                            continue;
                        }
                        stream.push_front(event);
                    }
                    Some(event) => stream.push_front(event),
                    None => {}
                }
            }
            let answer = stream.result().await;
            if answer.stop_reason != StopReason::Error
                || attempt >= max_attempts
                || !crate::ai::error::is_retryable_assistant_error(&answer)
            {
                if attempt > 0 {
                    self.on_retry.report(SummaryRetry::Finished);
                }
                return answer;
            }
            attempt += 1;
            let delay = self.retry.delay_ms(attempt);
            self.on_retry.report(SummaryRetry::Scheduled {
                attempt,
                max_attempts,
                delay_ms: delay,
                error_message: answer
                    .error_message
                    .clone()
                    .filter(|message| !message.is_empty())
                    .unwrap_or_else(|| "Unknown error".to_owned()),
            });
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(delay)) => {}
                // An abort during the wait: the failed answer, marked aborted.
                () = cancel.cancelled() => {
                    self.on_retry.report(SummaryRetry::Finished);
                    let mut aborted = answer;
                    aborted.stop_reason = StopReason::Aborted;
                    aborted.error_message = None;
                    return aborted;
                }
            }
            self.on_retry.report(SummaryRetry::AttemptStart);
        }
    }

    /// The reasoning level of summary requests: the session's when the model reasons.
    fn summary_thinking(&self, level: ThinkingLevel) -> ThinkingLevel {
        if self.model.reasoning && level != ThinkingLevel::Off {
            level
        } else {
            ThinkingLevel::Off
        }
    }
}

/// Turns a summarisation answer into its text and usage, or the error it stands for
/// (1.6.0 `getSummarizationFailure` and the tool-call check).
fn summary_text(
    message: &AssistantMessage,
    cancel: &CancellationToken,
    label: &'static str,
    failed: impl FnOnce(String) -> CompactionError,
) -> Result<(String, Usage), CompactionError> {
    if cancel.is_cancelled() || message.stop_reason == StopReason::Aborted {
        return Err(CompactionError::Cancelled);
    }
    if message.stop_reason == StopReason::Error {
        let reason = non_empty(message.error_message.as_deref()).unwrap_or("Unknown error");
        return Err(failed(reason.to_owned()));
    }
    if message.stop_reason == StopReason::Length {
        return Err(CompactionError::Truncated { label });
    }
    if message
        .content
        .iter()
        .any(|block| matches!(block, ContentBlock::ToolCall(_)))
    {
        return Err(CompactionError::CalledTool { label });
    }
    Ok((answer_text(message), message.usage.clone()))
}

async fn history_summary(
    prep: &CompactionPreparation<'_>,
    summarizer: &Summarizer<'_>,
    options: &CompactOptions<'_>,
    cancel: &CancellationToken,
) -> Result<(String, Usage), CompactionError> {
    let prompt = compaction_prompt(
        &conversation_text(&prep.messages_to_summarize),
        prep.previous_summary,
        options.custom_instructions,
    );
    let answer = summarizer
        .complete(
            prompt,
            summarizer.summary_thinking(options.thinking_level),
            cancel,
        )
        .await;
    summary_text(&answer, cancel, "Summarization", |message| {
        CompactionError::SummarizationFailed { message }
    })
}

async fn turn_prefix_summary(
    prep: &CompactionPreparation<'_>,
    summarizer: &Summarizer<'_>,
    options: &CompactOptions<'_>,
    cancel: &CancellationToken,
) -> Result<(String, Usage), CompactionError> {
    let prompt = turn_prefix_prompt(
        &conversation_text(&prep.turn_prefix_messages),
        options.custom_instructions,
    );
    let answer = summarizer
        .complete(
            prompt,
            summarizer.summary_thinking(options.thinking_level),
            cancel,
        )
        .await;
    summary_text(&answer, cancel, "Turn prefix summarization", |message| {
        CompactionError::TurnPrefixFailed { message }
    })
}

/// The sum of two usages (1.6.0 `combineUsage`): every count and cost added; the total is
/// provider-reported only when both are.
pub fn combine_usage(first: &Usage, second: &Usage) -> Usage {
    let optional = |left: Option<u64>, right: Option<u64>| match (left, right) {
        (None, None) => None,
        (left, right) => Some(left.unwrap_or(0) + right.unwrap_or(0)),
    };
    Usage {
        input: first.input + second.input,
        output: first.output + second.output,
        cache_read: first.cache_read + second.cache_read,
        cache_write: first.cache_write + second.cache_write,
        reasoning: optional(first.reasoning, second.reasoning),
        total_tokens: first.total_tokens + second.total_tokens,
        cost: Cost {
            input: first.cost.input + second.cost.input,
            output: first.cost.output + second.cost.output,
            cache_read: first.cost.cache_read + second.cost.cache_read,
            cache_write: first.cost.cache_write + second.cost.cache_write,
            total: first.cost.total + second.cost.total,
            total_from_provider: Some(
                first.cost.total_from_provider == Some(true)
                    && second.cost.total_from_provider == Some(true),
            ),
        },
        cache_write_1h: optional(first.cache_write_1h, second.cache_write_1h),
        key_order: UsageKeyOrder::Combined,
    }
}

/// Summarises a planned compaction (1.6.0 `compact`): for a split turn with a prefix, the
/// history (or the previous summary, else [`NO_PRIOR_HISTORY`], when there is none) and then
/// the prefix, joined under the split-turn heading, their usages summed; otherwise the history
/// alone. The file lists are appended to the text and returned as `details`.
pub async fn compact(
    prep: &CompactionPreparation<'_>,
    summarizer: &Summarizer<'_>,
    options: &CompactOptions<'_>,
    cancel: &CancellationToken,
) -> Result<CompactionResult, CompactionError> {
    let (mut summary, usage) = if prep.is_split_turn && !prep.turn_prefix_messages.is_empty() {
        let (history, history_usage) = if prep.messages_to_summarize.is_empty() {
            (
                prep.previous_summary.unwrap_or(NO_PRIOR_HISTORY).to_owned(),
                None,
            )
        } else {
            let (text, usage) = history_summary(prep, summarizer, options, cancel).await?;
            (text, Some(usage))
        };
        let (prefix, prefix_usage) = turn_prefix_summary(prep, summarizer, options, cancel).await?;
        let usage = match history_usage {
            Some(history_usage) => combine_usage(&history_usage, &prefix_usage),
            None => prefix_usage,
        };
        (format!("{history}{SPLIT_TURN_HEADING}{prefix}"), usage)
    } else {
        history_summary(prep, summarizer, options, cancel).await?
    };
    let details = prep.file_ops().lists();
    summary.push_str(&details.format());
    Ok(CompactionResult {
        summary,
        first_kept_entry_id: prep.first_kept_entry_id.clone(),
        tokens_before: prep.tokens_before,
        details,
        usage,
        system_message: prep.system_message.clone(),
    })
}

/// Summarises the entries a navigation abandons (`generateBranchSummary`): the newest messages
/// that fit `(contextWindow or 128000) − reserveTokens`, or the fixed
/// [`NO_BRANCH_CONTENT_SUMMARY`] without asking when there are none.
pub async fn generate_branch_summary<E: PathEntry>(
    entries: &[E],
    summarizer: &Summarizer<'_>,
    options: &BranchSummaryOptions<'_>,
    cancel: &CancellationToken,
) -> Result<BranchSummaryResult, CompactionError> {
    let context_window = match summarizer.model.context_window {
        0 => 128_000,
        window => window,
    };
    // A budget at or below zero means "no limit" in the reference.
    let budget = context_window.saturating_sub(options.reserve_tokens);
    let prepared = prepare_branch_entries(entries, budget);
    if prepared.messages.is_empty() {
        return Ok(BranchSummaryResult {
            summary: NO_BRANCH_CONTENT_SUMMARY.to_owned(),
            files: FileLists::default(),
            usage: None,
        });
    }
    let prompt = branch_summary_prompt(
        &conversation_text(&prepared.messages),
        options.custom_instructions,
        options.replace_instructions,
    );
    let answer = summarizer
        .complete(
            prompt,
            summarizer.summary_thinking(options.thinking_level),
            cancel,
        )
        .await;
    let (text, usage) = summary_text(&answer, cancel, "Branch summarization", |message| {
        CompactionError::BranchSummaryFailed { message }
    })?;
    let files = prepared.file_ops.lists();
    let summary = format!("{BRANCH_SUMMARY_PREAMBLE}{text}{}", files.format());
    Ok(BranchSummaryResult {
        summary,
        files,
        usage: Some(usage),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_prompts_carry_the_previous_summary_and_the_focus() {
        let initial = compaction_prompt("[User]: hi", None, None);
        assert_eq!(
            initial,
            format!("<conversation>\n[User]: hi\n</conversation>\n\n{SUMMARIZATION_PROMPT}")
        );
        let update = compaction_prompt("[User]: hi", Some("OLD"), Some("focus on X"));
        assert_eq!(
            update,
            format!(
                "<conversation>\n[User]: hi\n</conversation>\n\n<previous-summary>\nOLD\n</previous-summary>\n\n\
                 {UPDATE_SUMMARIZATION_PROMPT}\n\nAdditional focus: focus on X"
            )
        );
        // Empty texts count as absent, as JavaScript's truthiness has it.
        assert_eq!(
            compaction_prompt("c", Some(""), Some("")),
            compaction_prompt("c", None, None)
        );
    }

    #[test]
    fn branch_prompts_replace_or_extend_the_default() {
        assert_eq!(
            branch_summary_prompt("c", Some("only this"), true),
            "<conversation>\nc\n</conversation>\n\nonly this"
        );
        assert_eq!(
            branch_summary_prompt("c", Some("and this"), false),
            format!(
                "<conversation>\nc\n</conversation>\n\n{BRANCH_SUMMARY_PROMPT}\n\nAdditional focus: and this"
            )
        );
        assert_eq!(
            branch_summary_prompt("c", None, true),
            format!("<conversation>\nc\n</conversation>\n\n{BRANCH_SUMMARY_PROMPT}")
        );
        assert_eq!(
            turn_prefix_prompt("c", None),
            format!("# Conversation\nc\n\n# Instructions\n{TURN_PREFIX_SUMMARIZATION_PROMPT}")
        );
        assert_eq!(
            turn_prefix_prompt("c", Some("tests")),
            format!(
                "# Conversation\nc\n\n# Instructions\n{TURN_PREFIX_SUMMARIZATION_PROMPT}\n\nAdditional focus: tests"
            )
        );
    }

    #[test]
    fn results_become_the_reference_entry_and_event_shapes() {
        let result = CompactionResult {
            summary: "S".to_owned(),
            first_kept_entry_id: EntryId::from("abcd1234"),
            tokens_before: 42,
            details: FileLists {
                read_files: vec!["a".to_owned()],
                modified_files: vec![],
            },
            usage: Usage {
                input: 10,
                output: 2,
                total_tokens: 12,
                ..Usage::default()
            },
            system_message: None,
        };
        let entry = crate::model::Entry {
            id: Some(EntryId::from("e")),
            parent_id: None,
            timestamp: "2025-01-01T00:00:00.000Z".to_owned(),
            kind: crate::model::EntryKind::Compaction(result.to_entry(false)),
            extra: Map::new(),
        };
        assert_eq!(
            entry.to_line(),
            r#"{"type":"compaction","id":"e","parentId":null,"timestamp":"2025-01-01T00:00:00.000Z","summary":"S","firstKeptEntryId":"abcd1234","tokensBefore":42,"details":{"readFiles":["a"],"modifiedFiles":[]},"usage":{"input":10,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":12,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"fromHook":false}"#
        );
        assert_eq!(
            crate::support::json::to_js_string(&result.to_json(7)),
            r#"{"summary":"S","firstKeptEntryId":"abcd1234","tokensBefore":42,"estimatedTokensAfter":7,"usage":{"input":10,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":12,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"details":{"readFiles":["a"],"modifiedFiles":[]}}"#
        );
    }
}
