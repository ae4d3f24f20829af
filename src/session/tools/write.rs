//! The `write` tool (`spec/tools.md` §6): create or overwrite a file with exactly the given
//! text, creating missing parent directories.
//!
//! Success text: `Successfully wrote <n> bytes to <raw path>` where `n` is the content length
//! in UTF-16 units (the reference reports `String#length`, not bytes). No details.
//!
//! Invariants: holds the file's mutation lock for the whole write; checks the abort signal
//! before creating anything and never writes after reporting an abort.

use std::io::Write as _;
use std::path::PathBuf;

use serde_json::json;

use crate::agent::tool::{
    BoxFuture, Tool, ToolContext, ToolDefinition, ToolError, ToolInput, ToolOutput,
};
use crate::session::tools::mutation::lock_file;
use crate::session::tools::workspace::{Workspace, blocking, os_error_message};
use crate::session::tools::{arg_str, prefer_strict_json_schema};
use crate::support::truncate::utf16_len;

/// The `write` tool.
#[derive(Debug)]
pub struct WriteTool {
    definition: ToolDefinition,
    workspace: Workspace,
}

impl WriteTool {
    /// Returns the tool with its reference definition.
    pub fn new(workspace: Workspace) -> Self {
        Self {
            definition: definition(),
            workspace,
        }
    }
}

fn definition() -> ToolDefinition {
    ToolDefinition {
        name: "write".to_owned(),
        label: "write".to_owned(),
        description: "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. Automatically creates parent directories.".to_owned(),
        parameters: json!({
            "type": "object",
            "required": ["path", "content"],
            "properties": {
                "path": {"type": "string", "description": "Path to the file to write (relative or absolute)"},
                "content": {"type": "string", "description": "Content to write to the file"}
            }
        }),
        prompt_snippet: Some("Create or overwrite files".to_owned()),
        prompt_guidelines: vec!["Use write only for new files or complete rewrites.".to_owned()],
        constrained_sampling: prefer_strict_json_schema(),
    }
}

impl Tool for WriteTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn mutates_workspace(&self) -> bool {
        true
    }

    fn execute<'a>(
        &'a self,
        input: ToolInput,
        ctx: ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let raw_path = arg_str(&input.arguments, "path").unwrap_or_default();
            let content = arg_str(&input.arguments, "content").unwrap_or_default();
            let absolute = self.workspace.resolve(&raw_path, &ctx.cwd);
            let _guard = lock_file(&absolute).await;
            if ctx.cancel.is_cancelled() {
                return Err(ToolError::aborted());
            }
            let cancel = ctx.cancel.clone();
            let reported = format!(
                "Successfully wrote {} bytes to {raw_path}",
                utf16_len(&content)
            );
            blocking(move || {
                write_file(&absolute, &content, &cancel)?;
                Ok(ToolOutput::text(reported))
            })
            .await
        })
    }
}

fn write_file(
    absolute: &PathBuf,
    content: &str,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<(), ToolError> {
    if let Some(parent) = absolute.parent() {
        std::fs::create_dir_all(parent).map_err(|error| {
            // Node reports the first path component that could not be created.
            let failed = first_uncreatable(parent).unwrap_or_else(|| parent.to_path_buf());
            ToolError::ForModel(os_error_message(&error, "mkdir", &failed))
        })?;
    }
    if cancel.is_cancelled() {
        return Err(ToolError::aborted());
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(absolute)
        .map_err(|error| ToolError::ForModel(os_error_message(&error, "open", absolute)))?;
    file.write_all(content.as_bytes())
        .map_err(|error| ToolError::ForModel(os_error_message(&error, "write", absolute)))?;
    Ok(())
}

/// Returns the shallowest ancestor of `dir` that does not exist as a directory.
fn first_uncreatable(dir: &std::path::Path) -> Option<PathBuf> {
    dir.ancestors()
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .find(|ancestor| !ancestor.is_dir())
        .map(std::path::Path::to_path_buf)
}
