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
use std::sync::LazyLock;

use serde::Deserialize;
use serde_json::json;

use crate::agent::tool::{ToolContext, ToolDefinition, ToolError, ToolOutput, lenient};
use crate::session::tools::builtin::{BuiltinTool, prefer_strict_json_schema};
use crate::session::tools::mutation::with_file_lock;
use crate::session::tools::workspace::{Workspace, os_error_message};
use crate::support::truncate::utf16_len;

/// The `write` tool.
#[derive(Debug)]
pub struct WriteTool {
    workspace: Workspace,
}

impl WriteTool {
    /// Returns the tool with its reference definition.
    pub fn new(workspace: Workspace) -> Self {
        Self { workspace }
    }
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| {
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
});

/// A `write` call's arguments.
#[derive(Debug, Default, Deserialize)]
pub struct WriteArgs {
    #[serde(default, deserialize_with = "lenient")]
    path: String,
    #[serde(default, deserialize_with = "lenient")]
    content: String,
}

impl BuiltinTool for WriteTool {
    type Args = WriteArgs;
    const MUTATES_WORKSPACE: bool = true;

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    async fn run(&self, args: WriteArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let WriteArgs { path, content } = args;
        let absolute = self.workspace.resolve(&path, &ctx.cwd);
        let reported = format!("Successfully wrote {} bytes to {path}", utf16_len(&content));
        let (target, cancel) = (absolute.clone(), ctx.cancel.clone());
        with_file_lock(&absolute, &ctx.cancel, move || {
            write_file(&target, &content, &cancel)?;
            Ok(ToolOutput::text(reported))
        })
        .await
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
