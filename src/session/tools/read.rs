//! The `read` tool (`spec/tools.md` §3): text files with offset/limit and head truncation,
//! images as attachments.
//!
//! Text is decoded as UTF-8 with replacement and passed through otherwise untouched (no binary
//! detection, BOM and CRLF kept, no line numbers). Output layouts, in order of precedence:
//!
//! * first selected line over 50 KB → `[Line S is <size>, exceeds 50.0KB limit. Use bash: sed -n 'Sp' <path> | head -c 51200]`;
//! * cut by lines → content + `\n\n[Showing lines S-E of N. Use offset=E+1 to continue.]`;
//! * cut by bytes → the same with ` (50.0KB limit)` after `of N`;
//! * the user's `limit` ended before EOF → content + `\n\n[R more lines in file. Use offset=X to continue.]`;
//! * otherwise the content exactly.
//!
//! `details` is `{truncation}` in the first three cases and absent otherwise (always absent for
//! images).
//!
//! Invariant: read-only; an abort while reading returns `Operation aborted` at once.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use nix::unistd::AccessFlags;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent::tool::{ToolContext, ToolDefinition, ToolError, ToolOutput, lenient};
use crate::model::message::{ContentBlock, ImageContent};
use crate::session::tools::builtin::{BuiltinTool, js_number, prefer_strict_json_schema};
use crate::session::tools::image::{SNIFF_BYTES, resize_for_inline, sniff_image_mime};
use crate::session::tools::workspace::{Workspace, blocking_abortable, os_error_message};
use crate::support::truncate::{
    DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, TruncatedBy, format_size, truncate_head,
};

/// Settings of the `read` tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadConfig {
    /// Setting `images.autoResize` (default true): shrink images to the inline limits.
    pub auto_resize_images: bool,
}

/// The `read` tool.
#[derive(Debug)]
pub struct ReadTool {
    workspace: Workspace,
    config: ReadConfig,
}

impl ReadTool {
    /// Returns the tool with its reference definition.
    pub fn new(workspace: Workspace, config: ReadConfig) -> Self {
        Self { workspace, config }
    }
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: "read".to_owned(),
    label: "read".to_owned(),
    description: format!(
        "Read the contents of a file. Supports text files and images (jpg, png, gif, webp, bmp). Images are sent as attachments. For text files, output is truncated to {DEFAULT_MAX_LINES} lines or {}KB (whichever is hit first). Use offset/limit for large files. When you need the full file, continue with offset until complete.",
        DEFAULT_MAX_BYTES / 1024
    ),
    parameters: json!({
        "type": "object",
        "required": ["path"],
        "properties": {
            "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
            "offset": {"type": "number", "description": "Line number to start reading from (1-indexed)"},
            "limit": {"type": "number", "description": "Maximum number of lines to read"}
        }
    }),
    prompt_snippet: Some("Read file contents".to_owned()),
    prompt_guidelines: vec!["Use read to examine files instead of cat or sed.".to_owned()],
    constrained_sampling: prefer_strict_json_schema(),
});

/// A `read` call's arguments.
#[derive(Debug, Default, Deserialize)]
pub struct ReadArgs {
    #[serde(default, deserialize_with = "lenient")]
    path: String,
    #[serde(default, deserialize_with = "lenient")]
    offset: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    limit: Option<f64>,
}

/// The parsed arguments of one call.
struct ReadRequest {
    raw_path: String,
    absolute: PathBuf,
    offset: Option<f64>,
    limit: Option<f64>,
    auto_resize: bool,
    model_accepts_images: Option<bool>,
}

impl BuiltinTool for ReadTool {
    type Args = ReadArgs;
    const MUTATES_WORKSPACE: bool = false;

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    async fn run(&self, args: ReadArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let request = ReadRequest {
            absolute: self.workspace.resolve_read_path(&args.path, &ctx.cwd),
            raw_path: args.path,
            offset: args.offset,
            limit: args.limit,
            auto_resize: self.config.auto_resize_images,
            model_accepts_images: ctx.model_accepts_images,
        };
        blocking_abortable(&ctx.cancel, move || read_file(&request)).await
    }
}

fn read_file(request: &ReadRequest) -> Result<ToolOutput, ToolError> {
    let path = request.absolute.as_path();
    nix::unistd::access(path, AccessFlags::R_OK).map_err(|errno| {
        ToolError::ForModel(os_error_message(
            &std::io::Error::from_raw_os_error(errno as i32),
            "access",
            path,
        ))
    })?;
    let mut file = std::fs::File::open(path)
        .map_err(|error| ToolError::ForModel(os_error_message(&error, "open", path)))?;
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    (&mut file)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|error| ToolError::ForModel(node_read_error(&error)))?;
    let mime = sniff_image_mime(&head);
    let mut bytes = head;
    file.read_to_end(&mut bytes)
        .map_err(|error| ToolError::ForModel(node_read_error(&error)))?;
    match mime {
        Some(mime) => Ok(image_output(&bytes, mime, request)),
        None => text_output(&bytes, request),
    }
}

/// Node's text for a failed `read` on an open handle: no path (`EISDIR: illegal operation on
/// a directory, read`).
fn node_read_error(error: &std::io::Error) -> String {
    let text = os_error_message(error, "read", Path::new(""));
    text.strip_suffix(" ''").unwrap_or(&text).to_owned()
}

fn non_vision_note(model_accepts_images: Option<bool>) -> Option<&'static str> {
    (model_accepts_images == Some(false)).then_some(
        "[Current model does not support images. The image will be omitted from this request.]",
    )
}

fn image_output(bytes: &[u8], mime: &str, request: &ReadRequest) -> ToolOutput {
    let note = non_vision_note(request.model_accepts_images);
    let with_note = |mut text: String| {
        if let Some(note) = note {
            text.push('\n');
            text.push_str(note);
        }
        text
    };
    let image_block = |data: String, mime_type: String| {
        ContentBlock::Image(ImageContent {
            data,
            mime_type,
            extra: serde_json::Map::new(),
        })
    };
    if !request.auto_resize {
        return ToolOutput {
            content: vec![
                ContentBlock::text(with_note(format!("Read image file [{mime}]"))),
                image_block(STANDARD.encode(bytes), mime.to_owned()),
            ],
            details: None,
        };
    }
    match resize_for_inline(bytes, mime) {
        Some(image) => {
            let mut text = format!("Read image file [{}]", image.mime_type);
            if let Some(dimensions) = image.dimension_note() {
                text.push('\n');
                text.push_str(&dimensions);
            }
            ToolOutput {
                content: vec![
                    ContentBlock::text(with_note(text)),
                    image_block(image.data, image.mime_type),
                ],
                details: None,
            }
        }
        None => ToolOutput::text(with_note(format!(
            "Read image file [{mime}]\n[Image omitted: could not be resized below the inline image size limit.]"
        ))),
    }
}

fn text_output(bytes: &[u8], request: &ReadRequest) -> Result<ToolOutput, ToolError> {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.split('\n').collect();
    let total = lines.len();
    // `offset ? max(0, offset - 1) : 0` on a JavaScript number; fractions are floored.
    let start = match request.offset {
        Some(offset) if offset != 0.0 && !offset.is_nan() => (offset - 1.0).max(0.0).floor(),
        _ => 0.0,
    };
    if start >= total as f64 {
        let shown = request
            .offset
            .map_or_else(|| "undefined".to_owned(), js_number);
        return Err(ToolError::ForModel(format!(
            "Offset {shown} is beyond end of file ({total} lines total)"
        )));
    }
    let start = start as usize;
    // `allLines.slice(start, min(start + limit, N))` with JavaScript's slice rules (a negative
    // end counts from the end); fractional limits are floored.
    let (selected, user_limited) = match request.limit {
        Some(limit) => {
            let limit = if limit.is_nan() { 0.0 } else { limit.floor() };
            let end = (start as f64 + limit).min(total as f64);
            let slice_end = if end < 0.0 {
                (total as f64 + end).max(0.0)
            } else {
                end
            } as usize;
            let selected = lines[start..slice_end.max(start)].join("\n");
            (selected, Some(end - start as f64))
        }
        None => (lines[start..].join("\n"), None),
    };
    let truncation = truncate_head(&selected, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
    let first_line = start + 1;
    if truncation.first_line_exceeds_limit {
        let size = format_size(lines[start].len());
        let text = format!(
            "[Line {first_line} is {size}, exceeds {} limit. Use bash: sed -n '{first_line}p' {} | head -c {DEFAULT_MAX_BYTES}]",
            format_size(DEFAULT_MAX_BYTES),
            request.raw_path
        );
        return Ok(ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: Some(json!({ "truncation": truncation.to_value() })),
        });
    }
    if truncation.truncated {
        let last_line = first_line + truncation.output_lines - 1;
        let next = last_line + 1;
        let mut text = truncation.content.clone();
        match truncation.truncated_by {
            Some(TruncatedBy::Bytes) => text.push_str(&format!(
                "\n\n[Showing lines {first_line}-{last_line} of {total} ({} limit). Use offset={next} to continue.]",
                format_size(DEFAULT_MAX_BYTES)
            )),
            Some(TruncatedBy::Lines) | None => text.push_str(&format!(
                "\n\n[Showing lines {first_line}-{last_line} of {total}. Use offset={next} to continue.]"
            )),
        }
        return Ok(ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: Some(json!({ "truncation": truncation.to_value() })),
        });
    }
    if let Some(taken) = user_limited
        && (start as f64) + taken < total as f64
    {
        let remaining = js_number(total as f64 - (start as f64 + taken));
        let next = js_number(start as f64 + taken + 1.0);
        return Ok(ToolOutput::text(format!(
            "{}\n\n[{remaining} more lines in file. Use offset={next} to continue.]",
            truncation.content
        )));
    }
    Ok(ToolOutput {
        content: vec![ContentBlock::text(truncation.content)],
        details: None::<Value>,
    })
}
