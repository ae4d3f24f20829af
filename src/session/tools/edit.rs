//! The `edit` tool (`spec/tools.md` §5): exact-text replacements (`edits[]`) in one file,
//! with fuzzy matching, BOM and line-ending preservation, and a numbered diff in `details`.
//!
//! Flow: prepare arguments (a stringified `edits` array is parsed; the legacy top-level
//! `oldText`/`newText` pair is folded into `edits[]`), resolve the path, take the file's
//! mutation lock, check abort, check read+write access (`Could not edit file: <path>. Error
//! code: ENOENT.`), read and decode, strip the BOM, remember CRLF vs LF, normalise to LF,
//! apply ([`edit_diff::apply_edits`]), check abort, write back BOM + text with the original
//! line ending. Success: `Successfully replaced <n> block(s) in <path>.` with
//! `details = {diff, firstChangedLine}`.
//!
//! Invariants: holds the mutation lock from before the read until after the write; never
//! writes after reporting an abort; a failed match writes nothing.

use std::path::PathBuf;
use std::sync::LazyLock;

use nix::unistd::AccessFlags;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::agent::tool::{Lenient, ToolContext, ToolDefinition, ToolError, ToolOutput, lenient};
use crate::session::tools::builtin::{BuiltinTool, prefer_strict_json_schema};
use crate::session::tools::edit_diff::{
    Replacement, apply_edits, detect_line_ending, generate_diff, normalize_to_lf,
    restore_line_endings, strip_bom,
};
use crate::session::tools::mutation::with_file_lock;
use crate::session::tools::workspace::{Workspace, errno_code};

/// The `edit` tool.
#[derive(Debug)]
pub struct EditTool {
    workspace: Workspace,
}

impl EditTool {
    /// Returns the tool with its reference definition.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| {
    ToolDefinition {
    name: "edit".to_owned(),
    label: "edit".to_owned(),
    description: "Edit a single file using exact text replacement. Every edits[].oldText must match a unique, non-overlapping region of the original file. If two changes affect the same block or nearby lines, merge them into one edit instead of emitting overlapping edits. Do not include large unchanged regions just to connect distant changes.".to_owned(),
    // Key order as the reference's typebox schema serialises (request bytes match).
    parameters: json!({
        "type": "object",
        "required": ["path", "edits"],
        "properties": {
            "path": {"type": "string", "description": "Path to the file to edit (relative or absolute)"},
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["oldText", "newText"],
                    "properties": {
                        "oldText": {"type": "string", "description": "Exact text for one targeted replacement. It must be unique in the original file and must not overlap with any other edits[].oldText in the same call."},
                        "newText": {"type": "string", "description": "Replacement text for this targeted edit."}
                    }
                },
                "description": "One or more targeted replacements. Each edit is matched against the original file, not incrementally. Do not include overlapping or nested edits. If two changes touch the same block or nearby lines, merge them into one edit instead."
            }
        }
    }),
    prompt_snippet: Some("Make precise file edits with exact text replacement, including multiple disjoint edits in one call".to_owned()),
    prompt_guidelines: vec![
        "Use edit for targeted changes. Batch changes to one file in a single call.".to_owned(),
        "Each edits[].oldText must exactly and uniquely match the original file. Keep matches short and non-overlapping; merge nearby changes without including large unchanged regions.".to_owned(),
    ],
    constrained_sampling: prefer_strict_json_schema(),
}
});

/// An `edit` call's arguments (after [`prepare_edit_arguments`]).
#[derive(Debug, Default, Deserialize)]
pub struct EditArgs {
    #[serde(default, deserialize_with = "lenient")]
    path: String,
    #[serde(default, deserialize_with = "lenient")]
    edits: Option<Vec<Lenient<EditItem>>>,
}

/// One replacement of `edits[]`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EditItem {
    #[serde(default, deserialize_with = "lenient")]
    old_text: String,
    #[serde(default, deserialize_with = "lenient")]
    new_text: String,
}

/// The reference's `prepareArguments` for `edit` (§5.2): parse a stringified `edits` array and
/// fold a legacy top-level `oldText`/`newText` pair into `edits[]` (appended last).
pub fn prepare_edit_arguments(raw: Value) -> Value {
    let Value::Object(mut args) = raw else {
        return raw;
    };
    if let Some(Value::String(text)) = args.get("edits")
        && let Ok(parsed @ Value::Array(_)) = serde_json::from_str::<Value>(text)
    {
        args.insert("edits".to_owned(), parsed);
    }
    let (Some(Value::String(old_text)), Some(Value::String(new_text))) =
        (args.get("oldText"), args.get("newText"))
    else {
        return Value::Object(args);
    };
    let mut edit = Map::new();
    edit.insert("oldText".to_owned(), Value::String(old_text.clone()));
    edit.insert("newText".to_owned(), Value::String(new_text.clone()));
    let mut edits = match args.get("edits") {
        Some(Value::Array(existing)) => existing.clone(),
        _ => Vec::new(),
    };
    edits.push(Value::Object(edit));
    args.shift_remove("oldText");
    args.shift_remove("newText");
    // `{...rest, edits}`: an existing `edits` key keeps its place, a new one goes last.
    args.insert("edits".to_owned(), Value::Array(edits));
    Value::Object(args)
}

impl BuiltinTool for EditTool {
    type Args = EditArgs;
    const MUTATES_WORKSPACE: bool = true;

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    fn prepare_arguments(&self, raw: Value) -> Value {
        prepare_edit_arguments(raw)
    }

    async fn run(&self, args: EditArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let edits: Vec<Replacement> = match args.edits {
            Some(items) if !items.is_empty() => items
                .into_iter()
                .map(|Lenient(item)| Replacement {
                    old_text: item.old_text,
                    new_text: item.new_text,
                })
                .collect(),
            _ => {
                return Err(ToolError::ForModel(
                    "Edit tool input is invalid. edits must contain at least one replacement."
                        .to_owned(),
                ));
            }
        };
        let absolute = self.workspace.resolve(&args.path, &ctx.cwd);
        let (target, cancel) = (absolute.clone(), ctx.cancel.clone());
        with_file_lock(&absolute, &ctx.cancel, move || {
            edit_file(&target, &args.path, &edits, &cancel)
        })
        .await
    }
}

fn edit_file(
    absolute: &PathBuf,
    raw_path: &str,
    edits: &[Replacement],
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    if let Err(errno) = nix::unistd::access(absolute, AccessFlags::R_OK | AccessFlags::W_OK) {
        let code = errno_code(&std::io::Error::from_raw_os_error(errno as i32));
        return Err(ToolError::ForModel(format!(
            "Could not edit file: {raw_path}. Error code: {code}."
        )));
    }
    let bytes = std::fs::read(absolute).map_err(|error| {
        let text = crate::session::tools::workspace::os_error_message(&error, "read", absolute);
        // Node's read error on an open handle names no path.
        let text = text
            .rsplit_once(", read '")
            .map_or(text.clone(), |(head, _)| format!("{head}, read"));
        ToolError::ForModel(text)
    })?;
    if cancel.is_cancelled() {
        return Err(ToolError::aborted());
    }
    let raw = String::from_utf8_lossy(&bytes);
    let (bom, content) = strip_bom(&raw);
    let ending = detect_line_ending(content);
    let normalized = normalize_to_lf(content);
    let applied = apply_edits(&normalized, edits, raw_path).map_err(ToolError::ForModel)?;
    if cancel.is_cancelled() {
        return Err(ToolError::aborted());
    }
    let final_text = format!("{bom}{}", restore_line_endings(&applied.new, ending));
    std::fs::write(absolute, final_text.as_bytes()).map_err(|error| {
        ToolError::ForModel(crate::session::tools::workspace::os_error_message(
            &error, "open", absolute,
        ))
    })?;
    let diff = generate_diff(&applied.base, &applied.new);
    let mut details = Map::new();
    details.insert("diff".to_owned(), Value::String(diff.diff));
    if let Some(line) = diff.first_changed_line {
        details.insert("firstChangedLine".to_owned(), json!(line));
    }
    Ok(ToolOutput {
        content: vec![crate::model::message::ContentBlock::text(format!(
            "Successfully replaced {} block(s) in {raw_path}.",
            edits.len()
        ))],
        details: Some(Value::Object(details)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_pair_and_stringified_edits_are_prepared() {
        assert_eq!(
            prepare_edit_arguments(json!({"path":"a","oldText":"x","newText":"y"})),
            json!({"path":"a","edits":[{"oldText":"x","newText":"y"}]})
        );
        assert_eq!(
            prepare_edit_arguments(
                json!({"path":"a","edits":"[{\"oldText\":\"1\",\"newText\":\"2\"}]","oldText":"x","newText":"y"})
            ),
            json!({"path":"a","edits":[{"oldText":"1","newText":"2"},{"oldText":"x","newText":"y"}]})
        );
        assert_eq!(
            prepare_edit_arguments(json!({"path":"a","oldText":"x"})),
            json!({"path":"a","oldText":"x"})
        );
        assert_eq!(
            prepare_edit_arguments(json!({"path":"a","edits":"{not json"})),
            json!({"path":"a","edits":"{not json"})
        );
    }
}
