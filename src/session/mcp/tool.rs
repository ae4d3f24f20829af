//! MCP tools as pi tools: the reference's names (`mcp__<server>__<tool>`, sanitised, a hash
//! suffix on collisions and past 64 characters: pi-mcp `createMcpToolName`), definitions
//! (1.6.0 `createMcpToolDefinition`), and results (`convertMcpResult`: text and images pass
//! through, embedded resources become text or images, audio and other blocks a placeholder,
//! `structuredContent` as JSON when there is no content, text over 20 KB cut in the middle
//! with the full text saved to a file, `details: {server, tool, fullOutputPath?}`, and an
//! `isError` result recorded as an error result with its content kept).
//!
//! Invariant: a server's answer, whatever its shape, becomes a result or an error for the
//! model — never a panic.

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::agent::tool::{
    BoxFuture, Tool, ToolContext, ToolDefinition, ToolError, ToolInput, ToolOutput,
};
use crate::model::message::ContentBlock;
use crate::session::mcp::McpManager;

/// Provider tool names are limited to 64 characters (pi-mcp `MAX_TOOL_NAME_LENGTH`).
const MAX_TOOL_NAME_LENGTH: usize = 64;

/// Model-facing text beyond this is cut in the middle (pi-mcp `MCP_OUTPUT_MAX_BYTES`).
pub const MCP_OUTPUT_MAX_BYTES: usize = 20 * 1024;

/// The resource tools' names.
pub const READ_MCP_RESOURCE_TOOL: &str = "read_mcp_resource";

/// `mcp__<server>__<tool>` with every character but `[A-Za-z0-9_]` as `_`; when that is too
/// long or `taken`, the first 55 characters, `_` and 8 hex digits of SHA-256(`server\0tool`).
pub fn tool_name(server: &str, tool: &str, taken: impl Fn(&str) -> bool) -> String {
    let name: String = format!("mcp__{server}__{tool}")
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || ch == '_' {
                ch
            } else {
                '_'
            }
        })
        .collect();
    if name.len() <= MAX_TOOL_NAME_LENGTH && !taken(&name) {
        return name;
    }
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{server}\0{tool}").as_bytes(),
    );
    let hash: String = digest.as_ref()[..4]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let keep = MAX_TOOL_NAME_LENGTH - hash.len() - 1;
    // The name is ASCII, so any byte index is a character boundary.
    format!("{}_{hash}", &name[..name.len().min(keep)])
}

/// Names for one server's tools, in order: every tool whose plain name collides with another
/// of the list gets the hash suffix, so which one keeps the plain name does not depend on the
/// order (1.6.0 `registerTools`); `taken` names belong to other servers.
pub fn tool_names(server: &str, tools: &[String], taken: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut unique: Vec<&String> = Vec::new();
    for tool in tools {
        if !unique.contains(&tool) {
            unique.push(tool);
        }
    }
    let plain: Vec<String> = unique
        .iter()
        .map(|tool| tool_name(server, tool, |_| false))
        .collect();
    let mut assigned: Vec<String> = Vec::new();
    for tool in tools {
        let name = tool_name(server, tool, |candidate| {
            taken(candidate)
                || assigned.iter().any(|name| name == candidate)
                || plain.iter().filter(|name| *name == candidate).count() > 1
        });
        assigned.push(name);
    }
    assigned
}

/// The input schema as declared: `type: "object"` and `properties: {}` added when missing
/// (pi-mcp `normalizeMcpInputSchema`).
pub fn input_schema(schema: Option<&Value>) -> Value {
    let mut object = match schema {
        Some(Value::Object(object)) => object.clone(),
        _ => Map::new(),
    };
    if !object.contains_key("type") {
        object.insert("type".to_owned(), json!("object"));
    }
    if !object.contains_key("properties") {
        object.insert("properties".to_owned(), json!({}));
    }
    Value::Object(object)
}

/// The definition of a server tool under `name`.
pub fn definition(server: &str, name: &str, tool: &Map<String, Value>) -> ToolDefinition {
    let tool_id = tool.get("name").and_then(Value::as_str).unwrap_or_default();
    let title = tool
        .get("title")
        .and_then(Value::as_str)
        .or_else(|| tool.get("annotations")?.get("title")?.as_str());
    let description = tool
        .get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .or(title)
        .map_or_else(
            || format!("MCP tool {tool_id} from server {server}"),
            str::to_owned,
        );
    ToolDefinition {
        name: name.to_owned(),
        label: format!("{server}/{tool_id}"),
        description,
        parameters: input_schema(tool.get("inputSchema")),
        prompt_snippet: None,
        prompt_guidelines: Vec::new(),
        constrained_sampling: None,
    }
}

/// One server tool offered to the model.
pub struct McpTool {
    manager: Arc<McpManager>,
    server: String,
    tool: String,
    definition: ToolDefinition,
}

impl McpTool {
    /// A tool of `server` called `tool` on the server, `name` in pi.
    pub fn new(
        manager: Arc<McpManager>,
        server: &str,
        name: &str,
        tool: &Map<String, Value>,
    ) -> Self {
        Self {
            manager,
            server: server.to_owned(),
            tool: tool
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            definition: definition(server, name, tool),
        }
    }
}

impl Tool for McpTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn mutates_workspace(&self) -> bool {
        // Unknown: a server may do anything.
        true
    }

    fn execute<'a>(
        &'a self,
        input: ToolInput,
        ctx: ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let arguments = match input.arguments {
                Value::Object(map) => map,
                _ => Map::new(),
            };
            let call = self.manager.call_tool(&self.server, &self.tool, arguments);
            let result = tokio::select! {
                result = call => result,
                () = ctx.cancel.cancelled() => return Err(ToolError::aborted()),
            };
            let result = result.map_err(ToolError::ForModel)?;
            convert_result(
                &self.server,
                &self.tool,
                &result,
                self.manager.temp_dir(),
                self.manager.readable_resources(&self.server),
            )
        })
    }
}

fn is_text_mime(mime: Option<&str>) -> bool {
    let Some(mime) = mime else { return false };
    let kind = mime
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    kind.starts_with("text/")
        || kind == "application/json"
        || kind.ends_with("+json")
        || kind.ends_with("+xml")
}

/// JavaScript's `formatSize` of the reference's tools (`512B`, `1.5KB`, `2.0MB`).
fn format_size(bytes: f64) -> String {
    crate::support::truncate::format_size(bytes as usize)
}

fn str_of<'a>(block: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    block.get(key).and_then(Value::as_str)
}

fn save_file(dir: &std::path::Path, data: &[u8], extension: &str) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|error| error.to_string())?;
    let file = tempfile::Builder::new()
        .prefix("pi-mcp-")
        .suffix(extension)
        .tempfile_in(dir)
        .map_err(|error| error.to_string())?;
    std::fs::write(file.path(), data).map_err(|error| error.to_string())?;
    let (_, path) = file.keep().map_err(|error| error.to_string())?;
    Ok(path)
}

fn extension_of(uri: &str) -> String {
    let path =
        reqwest::Url::parse(uri).map_or_else(|_| uri.to_owned(), |url| url.path().to_owned());
    match path.rfind('.') {
        Some(at)
            if (2..=9).contains(&(path.len() - at))
                && path[at + 1..].chars().all(|ch| ch.is_ascii_alphanumeric()) =>
        {
            path[at..].to_owned()
        }
        _ => ".bin".to_owned(),
    }
}

/// The model-facing blocks of one MCP content block.
fn block_content(
    server: &str,
    block: &Value,
    temp_dir: &std::path::Path,
    readable: bool,
) -> Vec<ContentBlock> {
    let Some(block) = block.as_object() else {
        return vec![ContentBlock::text("[unsupported MCP content]")];
    };
    let kind = str_of(block, "type").unwrap_or_default();
    match kind {
        "text" => vec![ContentBlock::text(
            str_of(block, "text").unwrap_or_default(),
        )],
        "image" => vec![image(
            str_of(block, "data").unwrap_or_default(),
            str_of(block, "mimeType").unwrap_or_default(),
        )],
        "audio" => vec![ContentBlock::text(format!(
            "[audio {} omitted]",
            str_of(block, "mimeType").unwrap_or("undefined")
        ))],
        "resource_link" => {
            let uri = str_of(block, "uri").unwrap_or_default();
            let label = str_of(block, "title")
                .or_else(|| str_of(block, "name"))
                .unwrap_or_default();
            let mut details: Vec<String> = Vec::new();
            if let Some(mime) = str_of(block, "mimeType").filter(|mime| !mime.is_empty()) {
                details.push(mime.to_owned());
            }
            if let Some(size) = block.get("size").and_then(Value::as_f64) {
                details.push(format_size(size));
            }
            let details = if details.is_empty() {
                String::new()
            } else {
                format!(" ({})", details.join(", "))
            };
            let description = str_of(block, "description")
                .filter(|text| !text.is_empty())
                .map(|text| format!(": {text}"))
                .unwrap_or_default();
            let read = if readable {
                format!(". Read it with {READ_MCP_RESOURCE_TOOL} (server \"{server}\")")
            } else {
                String::new()
            };
            vec![ContentBlock::text(format!(
                "[Resource {uri} \"{label}\"{details}{description}{read}]"
            ))]
        }
        "resource" => {
            let Some(resource) = block.get("resource").and_then(Value::as_object) else {
                return vec![ContentBlock::text("[unsupported MCP content resource]")];
            };
            resource_content(resource, temp_dir)
        }
        other => vec![ContentBlock::text(format!(
            "[unsupported MCP content {other}]"
        ))],
    }
}

fn image(data: &str, mime: &str) -> ContentBlock {
    ContentBlock::Image(crate::model::message::ImageContent {
        data: data.to_owned(),
        mime_type: mime.to_owned(),
        extra: Map::new(),
    })
}

/// The model-facing blocks of a resource's contents (embedded or read).
pub fn resource_content(
    resource: &Map<String, Value>,
    temp_dir: &std::path::Path,
) -> Vec<ContentBlock> {
    if let Some(text) = str_of(resource, "text") {
        return vec![ContentBlock::text(text)];
    }
    let uri = str_of(resource, "uri").unwrap_or_default();
    let mime = str_of(resource, "mimeType");
    let blob = str_of(resource, "blob").unwrap_or_default();
    if mime.is_some_and(|mime| mime.starts_with("image/")) {
        return vec![image(blob, mime.unwrap_or_default())];
    }
    let data = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .unwrap_or_default();
    if is_text_mime(mime) {
        return vec![ContentBlock::text(String::from_utf8_lossy(&data))];
    }
    let kind = format!(
        "{}, {}",
        mime.unwrap_or("unknown type"),
        format_size(data.len() as f64)
    );
    let text = match save_file(temp_dir, &data, &extension_of(uri)) {
        Ok(path) => format!(
            "[Binary resource {uri} ({kind}) saved to {}]",
            path.display()
        ),
        Err(reason) => format!("[Binary resource {uri} ({kind}) could not be saved: {reason}]"),
    };
    vec![ContentBlock::text(text)]
}

/// Cuts text over [`MCP_OUTPUT_MAX_BYTES`] in the middle (pi-mcp `limitMcpContent`).
fn limit_content(
    content: Vec<ContentBlock>,
    temp_dir: &std::path::Path,
) -> (Vec<ContentBlock>, Option<PathBuf>) {
    let combined = content
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect::<Vec<_>>()
        .join("\n");
    if combined.len() <= MCP_OUTPUT_MAX_BYTES {
        return (content, None);
    }
    let bytes = combined.as_bytes();
    let boundary = |index: usize| index >= bytes.len() || (bytes[index] & 0xc0) != 0x80;
    let mut head_end = MCP_OUTPUT_MAX_BYTES / 2;
    while head_end > 0 && !boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = bytes.len() - (MCP_OUTPUT_MAX_BYTES - MCP_OUTPUT_MAX_BYTES / 2);
    while tail_start < bytes.len() && !boundary(tail_start) {
        tail_start += 1;
    }
    let removed = combined[head_end..tail_start].chars().count();
    let lines = combined.split('\n').count() - usize::from(combined.ends_with('\n'));
    let cut = format!(
        "{}…{removed} chars truncated…{}",
        &combined[..head_end],
        &combined[tail_start..]
    );
    let (where_, path) = match save_file(temp_dir, combined.as_bytes(), ".txt") {
        Ok(path) => (
            format!(
                "\n\n[Full output: {} (read it with offset/limit)]",
                path.display()
            ),
            Some(path),
        ),
        Err(reason) => (
            format!("\n\n[Could not save the full output: {reason}]"),
            None,
        ),
    };
    let tokens = bytes.len().div_ceil(4);
    let text = format!(
        "Warning: truncated output (original token count: {tokens})\nTotal output lines: {lines}\n\n{cut}{where_}"
    );
    let mut limited = vec![ContentBlock::text(text)];
    limited.extend(
        content
            .into_iter()
            .filter(|block| matches!(block, ContentBlock::Image(_))),
    );
    (limited, path)
}

/// Converts a `CallToolResult` (as JSON) into the result pi records.
pub fn convert_result(
    server: &str,
    tool: &str,
    result: &Map<String, Value>,
    temp_dir: &std::path::Path,
    readable: bool,
) -> Result<ToolOutput, ToolError> {
    let blocks = match result.get("content") {
        Some(Value::Array(blocks)) => blocks.as_slice(),
        _ => &[],
    };
    let mut content: Vec<ContentBlock> = if blocks.is_empty() {
        match result.get("structuredContent") {
            Some(structured) => vec![ContentBlock::text(crate::support::json::to_js_pretty(
                structured,
            ))],
            None => Vec::new(),
        }
    } else {
        blocks
            .iter()
            .flat_map(|block| block_content(server, block, temp_dir, readable))
            .collect()
    };
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    if is_error
        && content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect::<String>()
            .is_empty()
    {
        content.push(ContentBlock::text(format!(
            "MCP tool {server}/{tool} returned an error"
        )));
    }
    let (content, full_output) = limit_content(content, temp_dir);
    let mut details = Map::new();
    details.insert("server".to_owned(), json!(server));
    details.insert("tool".to_owned(), json!(tool));
    if let Some(path) = full_output {
        details.insert("fullOutputPath".to_owned(), json!(path.to_string_lossy()));
    }
    let output = ToolOutput {
        content,
        details: Some(Value::Object(details)),
    };
    if is_error {
        Err(ToolError::Result(Box::new(output)))
    } else {
        Ok(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised_and_collisions_all_hashed() {
        assert_eq!(
            tool_name("fs", "read_file", |_| false),
            "mcp__fs__read_file"
        );
        assert_eq!(
            tool_name("my-srv", "a.b c", |_| false),
            "mcp__my_srv__a_b_c"
        );
        let names = tool_names(
            "s",
            &["a-b".to_owned(), "a_b".to_owned(), "c".to_owned()],
            &|_| false,
        );
        assert_eq!(names[2], "mcp__s__c");
        assert!(names[0].starts_with("mcp__s__a_b_") && names[0].len() == "mcp__s__a_b_".len() + 8);
        assert_ne!(names[0], names[1]);
        let long = "x".repeat(80);
        let name = tool_name("s", &long, |_| false);
        assert_eq!(name.len(), 64);
        // sha256("s\0" + 80 x) — the reference's createHash("sha256").update(`${server}\0${tool}`).
        let digest = ring::digest::digest(&ring::digest::SHA256, format!("s\0{long}").as_bytes());
        assert!(name.ends_with(&format!(
            "_{:02x}{:02x}{:02x}{:02x}",
            digest.as_ref()[0],
            digest.as_ref()[1],
            digest.as_ref()[2],
            digest.as_ref()[3]
        )));
    }

    #[test]
    fn results_map_as_the_reference_maps_them() {
        let dir = tempfile::tempdir().unwrap();
        let result = json!({"content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inner"}},
            {"type": "resource_link", "uri": "test://1", "name": "one", "mimeType": "text/plain"}
        ]});
        let output =
            convert_result("s", "t", result.as_object().unwrap(), dir.path(), true).unwrap();
        assert_eq!(output.content.len(), 5);
        assert_eq!(output.content[0].as_text(), Some("hi"));
        assert!(matches!(output.content[1], ContentBlock::Image(_)));
        assert_eq!(
            output.content[2].as_text(),
            Some("[audio audio/wav omitted]")
        );
        assert_eq!(output.content[3].as_text(), Some("inner"));
        assert_eq!(
            output.content[4].as_text(),
            Some(
                "[Resource test://1 \"one\" (text/plain). Read it with read_mcp_resource (server \"s\")]"
            )
        );
        assert_eq!(output.details, Some(json!({"server": "s", "tool": "t"})));
        let error = json!({"content": [], "isError": true});
        let Err(ToolError::Result(output)) =
            convert_result("s", "t", error.as_object().unwrap(), dir.path(), false)
        else {
            panic!("an isError result is an error");
        };
        assert_eq!(output.joined_text(), "MCP tool s/t returned an error");
        let structured = json!({"content": [], "structuredContent": {"a": 1}});
        let output =
            convert_result("s", "t", structured.as_object().unwrap(), dir.path(), false).unwrap();
        assert_eq!(output.joined_text(), "{\n  \"a\": 1\n}");
    }

    #[test]
    fn long_text_is_cut_in_the_middle_and_saved() {
        let dir = tempfile::tempdir().unwrap();
        let text = "a".repeat(30_000);
        let result = json!({"content": [{"type": "text", "text": text}]});
        let output =
            convert_result("s", "t", result.as_object().unwrap(), dir.path(), false).unwrap();
        let shown = output.joined_text();
        assert!(shown.starts_with(
            "Warning: truncated output (original token count: 7500)\nTotal output lines: 1\n\n"
        ));
        assert!(shown.contains("…9520 chars truncated…"));
        let path = output.details.unwrap()["fullOutputPath"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(std::fs::read_to_string(path).unwrap().len(), 30_000);
    }
}
