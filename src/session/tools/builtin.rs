//! What every built-in tool shares, written once: the [`Tool`] implementation around a
//! [`BuiltinTool`] (typed arguments in, the tool's work, the result out), and the pieces of a
//! result the listing tools (`ls`, `find`, `grep`) build alike ([`Notices`]).
//!
//! A built-in is a [`BuiltinTool`]: its definition, whether it changes the workspace, its
//! argument struct and `run`. The blanket `impl Tool` reads the validated arguments into the
//! struct ([`crate::agent::tool::typed_arguments`]: a field of another type than declared —
//! possible only when an extension's `tool_call` hook rewrote the arguments — reads as its
//! default, as the hand-picking it replaces did), so `run` sees typed values only. Paths
//! resolve through [`crate::session::tools::workspace::Workspace`] (`resolve_dir` for the
//! directory arguments whose empty value means the working directory), file work runs through
//! `workspace::blocking_abortable`, and the file-changing tools hold the file's lock through
//! `mutation::with_file_lock`, which checks the abort signal once the lock is taken.
//!
//! Invariant: nothing here prints or reads the environment; the texts are the reference's.

use std::fmt;
use std::future::Future;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::agent::tool::{
    BoxFuture, Tool, ToolContext, ToolDefinition, ToolError, ToolInput, ToolOutput, typed_arguments,
};
use crate::model::message::ContentBlock;
use crate::support::truncate::{DEFAULT_MAX_BYTES, Truncation, format_size};

/// One built-in tool: what the model is told, and what a call does.
pub trait BuiltinTool: fmt::Debug + Send + Sync + 'static {
    /// The call's arguments (every field `#[serde(default, deserialize_with =
    /// "crate::agent::tool::lenient")]`).
    type Args: DeserializeOwned + Default + Send;

    /// Whether a call may change the workspace (files, processes).
    const MUTATES_WORKSPACE: bool;

    /// Returns the definition sent to the model.
    fn definition(&self) -> &ToolDefinition;

    /// Rewrites raw model arguments before validation (only `edit` has a rewrite).
    fn prepare_arguments(&self, raw: Value) -> Value {
        raw
    }

    /// Runs one call with its typed arguments.
    fn run(
        &self,
        args: Self::Args,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send;
}

impl<T: BuiltinTool> Tool for T {
    fn definition(&self) -> &ToolDefinition {
        BuiltinTool::definition(self)
    }

    fn mutates_workspace(&self) -> bool {
        T::MUTATES_WORKSPACE
    }

    fn prepare_arguments(&self, raw: Value) -> Value {
        BuiltinTool::prepare_arguments(self, raw)
    }

    fn execute<'a>(
        &'a self,
        input: ToolInput,
        ctx: ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let args = typed_arguments::<T::Args>(&input.arguments);
        Box::pin(self.run(args, ctx))
    }
}

/// 1.6.0's `constrainedSampling` of the built-in read, bash, edit and write.
pub(crate) fn prefer_strict_json_schema() -> Option<Value> {
    Some(serde_json::json!({"type": "json_schema", "strict": "prefer"}))
}

/// Formats a number as JavaScript's `String(n)` (`100`, `2.5`, `1e+21`).
pub(crate) fn js_number(value: f64) -> String {
    let mut out = String::new();
    crate::support::json::write_f64(&mut out, value);
    out
}

/// Returns a JSON number, integral when the value is (so `100` stays `100`, not `100.0`);
/// `null` for NaN and the infinities, as `JSON.stringify` writes them.
pub(crate) fn number_value(value: f64) -> Value {
    crate::agent::tool::arguments::number_value(value).unwrap_or(Value::Null)
}

/// The notices after a listing's text and the `details` that go with them, in the order the
/// reference adds them: `\n\n[a. b. c]`, `{<limit key>, truncation, …}`.
#[derive(Debug, Default)]
pub(crate) struct Notices {
    notices: Vec<String>,
    details: Map<String, Value>,
}

impl Notices {
    /// Returns an empty list.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds a notice and its `details` entry.
    pub(crate) fn push(&mut self, notice: String, key: &str, value: Value) {
        self.notices.push(notice);
        self.details.insert(key.to_owned(), value);
    }

    /// Adds `<limit> <what> limit reached. Use limit=<2·limit> for more<hint>` with
    /// `details[key] = limit`.
    pub(crate) fn limit_reached(&mut self, limit: f64, what: &str, hint: &str, key: &str) {
        let notice = format!(
            "{} {what} limit reached. Use limit={} for more{hint}",
            js_number(limit),
            js_number(limit * 2.0)
        );
        self.push(notice, key, number_value(limit));
    }

    /// Adds `50.0KB limit reached` with `details.truncation` when the output was cut.
    pub(crate) fn truncation(&mut self, truncation: &Truncation) {
        if truncation.truncated {
            let notice = format!("{} limit reached", format_size(DEFAULT_MAX_BYTES));
            self.push(notice, "truncation", truncation.to_value());
        }
    }

    /// Returns the result: `text`, then the notices; `details` only when there are some.
    pub(crate) fn output(self, text: &str) -> ToolOutput {
        let text = if self.notices.is_empty() {
            text.to_owned()
        } else {
            format!("{text}\n\n[{}]", self.notices.join(". "))
        };
        ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: (!self.details.is_empty()).then_some(Value::Object(self.details)),
        }
    }
}
