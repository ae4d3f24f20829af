//! The tool abstraction the agent loop runs: a [`Tool`] has a [`ToolDefinition`] (what the
//! model sees) and an `execute` that turns validated arguments into a [`ToolOutput`] or a
//! [`ToolError`].
//!
//! The call pipeline of `spec/tools.md` §1.3, as the loop drives it:
//!
//! 1. look the name up among the *active* tools; absent → [`ToolOutput::error`] with
//!    [`tool_not_found_message`] (`Tool <name> not found`);
//! 2. [`prepare_call`]: the tool's own [`Tool::prepare_arguments`] (only `edit` has one), then
//!    TypeBox-style coercion and validation against [`ToolDefinition::parameters`]
//!    ([`arguments`]); a failure is the reference's multi-line validation text, which becomes an
//!    error result;
//! 3. [`Tool::execute`] with a [`ToolContext`] (cwd, cancellation, streamed-update callback,
//!    whether the model sees images); `Err(ToolError::ForModel(text))` becomes the error result
//!    `{content: [text], details: {}}` with `isError: true` ([`ToolOutput::error`]), `Ok` is the
//!    result as returned.
//!
//! All built-in tools run in parallel mode: the loop pre-flights calls one by one in source
//! order, executes them concurrently and persists results in source order. Tools that change
//! files serialise themselves per file (see `session::tools::mutation`); the loop needs no lock.
//!
//! Invariants: a tool never panics on model input and never prints; every failure the model
//! can act on is `ToolError::ForModel`; `ToolError::Fatal` is reserved for broken invariants
//! of this program (the loop may still report it to the model, but should log it).

pub mod arguments;

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::model::ToolCallId;
use crate::model::message::{ContentBlock, ToolDeclaration};

pub use arguments::{Lenient, lenient, prepare_call, typed_arguments, validate_arguments};

/// A boxed, sendable future: the return type of [`Tool::execute`] (object-safe without
/// `async_trait`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the model is told about a tool, plus its contributions to the system prompt.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDefinition {
    /// The name the model calls (`read`, `bash`, …).
    pub name: String,
    /// Display label (the built-ins use their name).
    pub label: String,
    /// The description sent to the model.
    pub description: String,
    /// JSON Schema of the arguments, sent to the model and used by [`validate_arguments`].
    pub parameters: Value,
    /// The one-line `- <name>: <snippet>` entry under "Available tools" in the system prompt.
    pub prompt_snippet: Option<String>,
    /// Bullets added to the system prompt's guidelines while the tool is active.
    pub prompt_guidelines: Vec<String>,
    /// 1.6.0's `constrainedSampling` (`{"type": "json_schema", "strict": "prefer"}` for the
    /// built-in read/bash/edit/write): recorded in the declaration, decides strict mode on
    /// the wire.
    pub constrained_sampling: Option<Value>,
}

impl ToolDefinition {
    /// Returns the declaration a system message records and a request carries (pi-ai's
    /// `toToolDeclaration`): `name, description, parameters`, then `constrainedSampling`
    /// when set.
    pub fn declaration(&self) -> ToolDeclaration {
        let mut extra = Map::new();
        if let Some(constrained) = &self.constrained_sampling {
            extra.insert("constrainedSampling".to_owned(), constrained.clone());
        }
        ToolDeclaration {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
            extra,
        }
    }
}

/// One tool call as the loop hands it to [`Tool::execute`]: the provider's call id and the
/// prepared, validated arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolInput {
    /// The call id the result will answer.
    pub id: ToolCallId,
    /// Arguments after [`prepare_call`] (coerced, schema-valid).
    pub arguments: Value,
}

/// Receives streamed partial results (`tool_execution_update.partialResult`); never persisted.
pub type UpdateSink = Arc<dyn Fn(ToolOutput) + Send + Sync>;

/// Per-call context from the loop.
#[derive(Clone)]
pub struct ToolContext {
    /// The session's working directory; relative paths resolve against it.
    pub cwd: PathBuf,
    /// Fires when the user aborts the run; tools stop and report `Operation aborted` (bash:
    /// kills its process tree and reports output so far).
    pub cancel: CancellationToken,
    /// Where partial results go (only `bash` sends them); `None` when nobody listens.
    pub on_update: Option<UpdateSink>,
    /// Whether the current model accepts image input: `None` when no model is selected.
    /// `read` adds a note for images when this is `Some(false)`.
    pub model_accepts_images: Option<bool>,
}

impl ToolContext {
    /// Returns a context for `cwd` with a fresh cancellation token, no update sink and no model.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        Self {
            cwd: cwd.into(),
            cancel: CancellationToken::new(),
            on_update: None,
            model_accepts_images: None,
        }
    }

    /// Sends a partial result to the update sink, if any.
    pub fn update(&self, partial: ToolOutput) {
        if let Some(sink) = &self.on_update {
            sink(partial);
        }
    }
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("cwd", &self.cwd)
            .field("cancelled", &self.cancel.is_cancelled())
            .field("on_update", &self.on_update.is_some())
            .field("model_accepts_images", &self.model_accepts_images)
            .finish()
    }
}

/// A tool result: content blocks for the model and optional `details` for the UI and the
/// session file (never sent to the model). Serialises as the reference's `{content, details?}`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ToolOutput {
    /// Text and image blocks.
    pub content: Vec<ContentBlock>,
    /// Tool-specific details; `None` leaves the key out of the persisted message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ToolOutput {
    /// Returns a result with one text block and no details.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(text)],
            details: None,
        }
    }

    /// Returns the error result the loop records for a failed call: one text block and
    /// `details: {}` (error results never carry the tool's own details).
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(message)],
            details: Some(Value::Object(Map::new())),
        }
    }

    /// Returns the text blocks joined with newlines (for tests and renderers).
    pub fn joined_text(&self) -> String {
        self.content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Why a tool call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// A failure the model should see and can act on (bad arguments, missing file, failed
    /// command, abort); becomes an `isError` result with exactly this text.
    #[error("{0}")]
    ForModel(String),
    /// A broken invariant of this program (not the model's or the user's doing).
    #[error("internal tool failure: {0}")]
    Fatal(String),
    /// A failure whose result the tool built itself and which is recorded as it is, with
    /// `isError: true` (an MCP server's `isError` result: its text, images and details).
    #[error("{}", .0.joined_text())]
    Result(Box<ToolOutput>),
}

impl ToolError {
    /// Returns the `Operation aborted` error every tool reports when cancelled.
    pub fn aborted() -> Self {
        Self::ForModel(ABORTED_MESSAGE.to_owned())
    }

    /// Returns the text recorded in the error result.
    pub fn message(&self) -> String {
        match self {
            Self::ForModel(text) => text.clone(),
            Self::Fatal(_) | Self::Result(_) => self.to_string(),
        }
    }

    /// Converts the error into the result the loop records.
    pub fn into_output(self) -> ToolOutput {
        match self {
            Self::Result(output) => *output,
            other => ToolOutput::error(other.message()),
        }
    }
}

/// The error text of a cancelled tool.
pub const ABORTED_MESSAGE: &str = "Operation aborted";

/// Returns the error text for a call to a tool that is not active: `Tool <name> not found`.
pub fn tool_not_found_message(name: &str) -> String {
    format!("Tool {name} not found")
}

/// A tool the agent can call.
pub trait Tool: Send + Sync {
    /// Returns the definition sent to the model.
    fn definition(&self) -> &ToolDefinition;

    /// Returns the tool's declaration (`toolsAdded` of a system message).
    fn declaration(&self) -> ToolDeclaration {
        self.definition().declaration()
    }

    /// Returns true when the tool may change the workspace (files, processes).
    fn mutates_workspace(&self) -> bool;

    /// Rewrites raw model arguments before validation (e.g. `edit` folds the legacy
    /// `oldText`/`newText` pair into `edits[]`). The default keeps them as they are.
    fn prepare_arguments(&self, raw: Value) -> Value {
        raw
    }

    /// Runs the call. Arguments have passed [`prepare_call`].
    fn execute<'a>(
        &'a self,
        input: ToolInput,
        ctx: ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
}

impl fmt::Debug for dyn Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tool({})", self.definition().name)
    }
}
