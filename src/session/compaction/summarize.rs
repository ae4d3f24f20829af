//! Summary generation through the real LLM client (`spec/compaction.md` §5, §6.2, §8.3):
//! the compaction summary (initial or update prompt, custom focus), the split-turn prefix
//! summary in parallel with it, and the branch summary; each assembled exactly as the
//! reference assembles it.
//!
//! Each request: the summarisation system prompt, one user message
//! `<conversation>\n…\n</conversation>\n\n[<previous-summary>\n…\n</previous-summary>\n\n]<instructions>`,
//! no tools. Budgets: `floor(0.8 × reserveTokens)` for the history, `floor(0.5 ×
//! reserveTokens)` for a turn prefix, 2048 for a branch. Reasoning: the session's thinking
//! level for compaction requests when the model reasons and the level is not `off`; none for
//! branch summaries.
//!
//! Invariant: the only effects are the LLM requests; nothing is stored or emitted here.

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::ai::convert::convert_to_llm;
use crate::ai::{
    AiClient, LlmMessage, Model, Request, StreamOptions, ThinkingBudgets, ThinkingLevel,
};
use crate::model::entry::CompactionEntry;
use crate::model::ids::EntryId;
use crate::model::message::{AssistantMessage, ContentBlock, StopReason, UserContent, UserMessage};
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
use crate::support::clock::Clock;

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
}

/// A compaction ready to append (the reference's `CompactionResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionResult {
    /// The summary text, file lists appended.
    pub summary: String,
    /// The first entry kept verbatim.
    pub first_kept_entry_id: EntryId,
    /// Estimated context tokens before compacting.
    pub tokens_before: u64,
    /// The files read and modified by everything summarised so far.
    pub details: FileLists,
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
            usage: None,
            from_hook: Some(from_hook),
            system_message: None,
        }
    }

    /// Returns the result as `compaction_end.result` and `compact()` return it:
    /// `{summary, firstKeptEntryId, tokensBefore, details}`.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("summary".to_owned(), Value::from(self.summary.as_str()));
        map.insert(
            "firstKeptEntryId".to_owned(),
            Value::from(self.first_kept_entry_id.as_str()),
        );
        map.insert("tokensBefore".to_owned(), Value::from(self.tokens_before));
        map.insert("details".to_owned(), self.details.to_details());
        Value::Object(map)
    }
}

/// A branch summary ready to append with `SessionStore::branch_with_summary`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchSummaryResult {
    /// The summary text: preamble, the model's text, file lists.
    pub summary: String,
    /// The files the abandoned branch read and modified (empty without messages).
    pub files: FileLists,
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

/// Returns the user text of a split turn's prefix summary request.
pub fn turn_prefix_prompt(conversation: &str) -> String {
    format!("<conversation>\n{conversation}\n</conversation>\n\n{TURN_PREFIX_SUMMARIZATION_PROMPT}")
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
        max_tokens: u64,
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
        options.max_tokens = Some(max_tokens);
        options.thinking = thinking;
        // The reference passes neither a session id nor thinking budgets to these calls.
        options.session_id = None;
        options.thinking_budgets = ThinkingBudgets::default();
        self.client
            .stream(self.model, request, options, cancel.clone())
            .result()
            .await
    }

    /// The reasoning level of compaction requests: the session's when the model reasons.
    fn compaction_thinking(&self, level: ThinkingLevel) -> ThinkingLevel {
        if self.model.reasoning && level != ThinkingLevel::Off {
            level
        } else {
            ThinkingLevel::Off
        }
    }
}

/// Turns a summarisation answer into its text, or the error it stands for.
fn summary_text(
    message: &AssistantMessage,
    cancel: &CancellationToken,
    failed: impl FnOnce(String) -> CompactionError,
) -> Result<String, CompactionError> {
    if cancel.is_cancelled() || message.stop_reason == StopReason::Aborted {
        return Err(CompactionError::Cancelled);
    }
    if message.stop_reason == StopReason::Error {
        let reason = non_empty(message.error_message.as_deref()).unwrap_or("Unknown error");
        return Err(failed(reason.to_owned()));
    }
    Ok(answer_text(message))
}

async fn history_summary(
    prep: &CompactionPreparation<'_>,
    summarizer: &Summarizer<'_>,
    options: &CompactOptions<'_>,
    cancel: &CancellationToken,
) -> Result<String, CompactionError> {
    let prompt = compaction_prompt(
        &conversation_text(&prep.messages_to_summarize),
        prep.previous_summary,
        options.custom_instructions,
    );
    // `Math.floor(0.8 * reserveTokens)`, computed in floating point as the reference does.
    let max_tokens = (0.8 * prep.settings.reserve_tokens as f64).floor() as u64;
    let answer = summarizer
        .complete(
            prompt,
            max_tokens,
            summarizer.compaction_thinking(options.thinking_level),
            cancel,
        )
        .await;
    summary_text(&answer, cancel, |message| {
        CompactionError::SummarizationFailed { message }
    })
}

async fn turn_prefix_summary(
    prep: &CompactionPreparation<'_>,
    summarizer: &Summarizer<'_>,
    options: &CompactOptions<'_>,
    cancel: &CancellationToken,
) -> Result<String, CompactionError> {
    let prompt = turn_prefix_prompt(&conversation_text(&prep.turn_prefix_messages));
    let max_tokens = (0.5 * prep.settings.reserve_tokens as f64).floor() as u64;
    let answer = summarizer
        .complete(
            prompt,
            max_tokens,
            summarizer.compaction_thinking(options.thinking_level),
            cancel,
        )
        .await;
    summary_text(&answer, cancel, |message| {
        CompactionError::TurnPrefixFailed { message }
    })
}

/// Summarises a planned compaction (`compact`): for a split turn with a prefix, the history
/// (or [`NO_PRIOR_HISTORY`] when there is none) and the prefix in parallel, joined under the
/// split-turn heading; otherwise the history alone (even when empty). The file lists are
/// appended to the text and returned as `details`.
pub async fn compact(
    prep: &CompactionPreparation<'_>,
    summarizer: &Summarizer<'_>,
    options: &CompactOptions<'_>,
    cancel: &CancellationToken,
) -> Result<CompactionResult, CompactionError> {
    let mut summary = if prep.is_split_turn && !prep.turn_prefix_messages.is_empty() {
        let history = async {
            if prep.messages_to_summarize.is_empty() {
                Ok(NO_PRIOR_HISTORY.to_owned())
            } else {
                history_summary(prep, summarizer, options, cancel).await
            }
        };
        let prefix = turn_prefix_summary(prep, summarizer, options, cancel);
        let (history, prefix) = futures::try_join!(history, prefix)?;
        format!("{history}{SPLIT_TURN_HEADING}{prefix}")
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
        });
    }
    let prompt = branch_summary_prompt(
        &conversation_text(&prepared.messages),
        options.custom_instructions,
        options.replace_instructions,
    );
    let answer = summarizer
        .complete(prompt, 2048, ThinkingLevel::Off, cancel)
        .await;
    if cancel.is_cancelled() || answer.stop_reason == StopReason::Aborted {
        return Err(CompactionError::Cancelled);
    }
    if answer.stop_reason == StopReason::Error {
        let message = non_empty(answer.error_message.as_deref()).unwrap_or("Summarization failed");
        return Err(CompactionError::BranchSummaryFailed {
            message: message.to_owned(),
        });
    }
    let files = prepared.file_ops.lists();
    let summary = format!(
        "{BRANCH_SUMMARY_PREAMBLE}{}{}",
        answer_text(&answer),
        files.format()
    );
    Ok(BranchSummaryResult { summary, files })
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
            turn_prefix_prompt("c"),
            format!("<conversation>\nc\n</conversation>\n\n{TURN_PREFIX_SUMMARIZATION_PROMPT}")
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
            r#"{"type":"compaction","id":"e","parentId":null,"timestamp":"2025-01-01T00:00:00.000Z","summary":"S","firstKeptEntryId":"abcd1234","tokensBefore":42,"details":{"readFiles":["a"],"modifiedFiles":[]},"fromHook":false}"#
        );
        assert_eq!(
            crate::support::json::to_js_string(&result.to_json()),
            r#"{"summary":"S","firstKeptEntryId":"abcd1234","tokensBefore":42,"details":{"readFiles":["a"],"modifiedFiles":[]}}"#
        );
    }
}
