//! File-operation tracking for summaries (`spec/compaction.md` §6.3): which files the
//! summarised part read and modified, from `read`/`write`/`edit` tool calls and from the
//! `details` of earlier pi-generated summaries.
//!
//! Lists are sorted as JavaScript's `Array#sort` sorts strings (by UTF-16 code units); a file
//! both read and modified is listed as modified only.
//!
//! Invariant: pure functions.

use std::cmp::Ordering;
use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::model::message::{AgentMessage, ContentBlock};

/// The files touched by a summarised range (the reference's `FileOperations`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileOps {
    /// Paths of `read` calls (and earlier summaries' `readFiles`).
    pub read: HashSet<String>,
    /// Paths of `write` calls.
    pub written: HashSet<String>,
    /// Paths of `edit` calls (and earlier summaries' `modifiedFiles`).
    pub edited: HashSet<String>,
}

/// The sorted lists a summary carries in `details` and appends to its text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileLists {
    /// Files read and not modified.
    pub read_files: Vec<String>,
    /// Files written or edited.
    pub modified_files: Vec<String>,
}

/// Compares two strings by UTF-16 code units, as JavaScript does.
fn js_cmp(left: &str, right: &str) -> Ordering {
    left.encode_utf16().cmp(right.encode_utf16())
}

fn string_items(value: Option<&Value>) -> impl Iterator<Item = &str> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

impl FileOps {
    /// Adds an earlier summary's `details`: `readFiles` as read, `modifiedFiles` as edited.
    /// Anything that is not an array of strings is ignored (extension details have their own
    /// shapes).
    pub fn add_details(&mut self, details: &Value) {
        for path in string_items(details.get("readFiles")) {
            self.read.insert(path.to_owned());
        }
        for path in string_items(details.get("modifiedFiles")) {
            self.edited.insert(path.to_owned());
        }
    }

    /// Adds the file operations of an assistant message's tool calls.
    pub fn add_message(&mut self, message: &AgentMessage) {
        extract_file_ops_from_message(message, self);
    }

    /// Returns the sorted lists (`computeFileLists`).
    pub fn lists(&self) -> FileLists {
        let mut modified_files: Vec<String> = self.edited.union(&self.written).cloned().collect();
        modified_files.sort_by(|a, b| js_cmp(a, b));
        let mut read_files: Vec<String> = self
            .read
            .iter()
            .filter(|path| !self.edited.contains(*path) && !self.written.contains(*path))
            .cloned()
            .collect();
        read_files.sort_by(|a, b| js_cmp(a, b));
        FileLists {
            read_files,
            modified_files,
        }
    }
}

impl FileLists {
    /// Returns the `details` object pi writes: `{readFiles, modifiedFiles}`.
    pub fn to_details(&self) -> Value {
        let mut map = Map::new();
        map.insert("readFiles".to_owned(), Value::from(self.read_files.clone()));
        map.insert(
            "modifiedFiles".to_owned(),
            Value::from(self.modified_files.clone()),
        );
        Value::Object(map)
    }

    /// Returns the text appended to a summary (`formatFileOperations`).
    pub fn format(&self) -> String {
        format_file_operations(&self.read_files, &self.modified_files)
    }
}

fn record(ops: &mut FileOps, name: &str, path: &str) {
    if path.is_empty() {
        return;
    }
    let set = match name {
        "read" => &mut ops.read,
        "write" => &mut ops.written,
        "edit" => &mut ops.edited,
        _ => return,
    };
    // Most calls repeat a path already seen: look before allocating.
    if !set.contains(path) {
        set.insert(path.to_owned());
    }
}

/// Adds the `read`/`write`/`edit` tool calls of an assistant message, or the nested calls a
/// tool result records, whose `arguments.path` is a non-empty string
/// (`extractFileOpsFromMessage`); other messages add nothing.
pub fn extract_file_ops_from_message(message: &AgentMessage, ops: &mut FileOps) {
    match message {
        AgentMessage::Assistant(assistant) => {
            for block in &assistant.content {
                match block {
                    ContentBlock::ToolCall(call) => {
                        if let Some(path) = call.arguments.get("path").and_then(Value::as_str) {
                            record(ops, &call.name, path);
                        }
                    }
                    ContentBlock::Unknown(value) => unknown_tool_call(value, ops),
                    ContentBlock::Text(_) | ContentBlock::Thinking(_) | ContentBlock::Image(_) => {}
                }
            }
        }
        AgentMessage::Unknown(value)
            if value.get("role").and_then(Value::as_str) == Some("assistant") =>
        {
            for block in value
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                unknown_tool_call(block, ops);
            }
        }
        // Calls made from codemode scripts are recorded on the script's result (1.6.0).
        AgentMessage::ToolResult(result) => {
            for call in result
                .nested_calls
                .as_ref()
                .and_then(|nested| nested.get("calls"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let (Some(name), Some(path)) = (
                    call.get("name").and_then(Value::as_str),
                    call.get("arguments")
                        .and_then(|arguments| arguments.get("path"))
                        .and_then(Value::as_str),
                ) {
                    record(ops, name, path);
                }
            }
        }
        AgentMessage::System(_)
        | AgentMessage::User(_)
        | AgentMessage::BashExecution(_)
        | AgentMessage::Custom(_)
        | AgentMessage::BranchSummary(_)
        | AgentMessage::CompactionSummary(_)
        | AgentMessage::Unknown(_) => {}
    }
}

/// A tool-call block that did not parse into its typed shape, read as the reference reads it.
fn unknown_tool_call(block: &Value, ops: &mut FileOps) {
    if block.get("type").and_then(Value::as_str) != Some("toolCall") {
        return;
    }
    let (Some(name), Some(path)) = (
        block.get("name").and_then(Value::as_str),
        block
            .get("arguments")
            .and_then(|arguments| arguments.get("path"))
            .and_then(Value::as_str),
    ) else {
        return;
    };
    record(ops, name, path);
}

/// Returns the text appended to a summary: nothing without files, else a blank line and the
/// `<read-files>` / `<modified-files>` sections separated by a blank line.
pub fn format_file_operations(read_files: &[String], modified_files: &[String]) -> String {
    let mut sections = Vec::new();
    if !read_files.is_empty() {
        sections.push(format!(
            "<read-files>\n{}\n</read-files>",
            read_files.join("\n")
        ));
    }
    if !modified_files.is_empty() {
        sections.push(format!(
            "<modified-files>\n{}\n</modified-files>",
            modified_files.join("\n")
        ));
    }
    if sections.is_empty() {
        return String::new();
    }
    format!("\n\n{}", sections.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, arguments: Value) -> Value {
        json!({"type":"toolCall","id":"c","name":name,"arguments":arguments})
    }

    fn assistant(blocks: Vec<Value>) -> AgentMessage {
        AgentMessage::from_value(json!({"role":"assistant","content":blocks,"timestamp":1}))
    }

    #[test]
    fn the_spec_example_lists_read_and_modified_files() {
        let mut ops = FileOps::default();
        ops.add_message(&assistant(vec![
            call("read", json!({"path":"a.ts"})),
            call("edit", json!({"path":"b.ts","oldText":"x","newText":"y"})),
        ]));
        ops.add_message(&assistant(vec![
            call("write", json!({"path":"c.ts","content":""})),
            call("read", json!({"path":"b.ts"})),
        ]));
        let lists = ops.lists();
        assert_eq!(lists.read_files, vec!["a.ts"]);
        assert_eq!(lists.modified_files, vec!["b.ts", "c.ts"]);
        assert_eq!(
            lists.format(),
            "\n\n<read-files>\na.ts\n</read-files>\n\n<modified-files>\nb.ts\nc.ts\n</modified-files>"
        );
        assert_eq!(
            lists.to_details(),
            json!({"readFiles":["a.ts"],"modifiedFiles":["b.ts","c.ts"]})
        );
    }

    #[test]
    fn other_tools_empty_paths_and_other_roles_are_ignored() {
        let mut ops = FileOps::default();
        ops.add_message(&assistant(vec![
            call("bash", json!({"command":"cat x","path":"x"})),
            call("read", json!({"path":""})),
            call("read", json!({"path":5})),
            call("read", json!(null)),
            json!({"type":"text","text":"read path"}),
        ]));
        ops.add_message(&AgentMessage::from_value(
            json!({"role":"user","content":"read a.ts","timestamp":1}),
        ));
        assert_eq!(ops.lists(), FileLists::default());
        assert_eq!(ops.lists().format(), "");
    }

    #[test]
    fn earlier_details_seed_read_and_edited() {
        let mut ops = FileOps::default();
        ops.add_details(&json!({"readFiles":["z.ts","b.ts",7],"modifiedFiles":["b.ts"]}));
        ops.add_details(&json!({"reviewer":"bob"}));
        let lists = ops.lists();
        assert_eq!(lists.read_files, vec!["z.ts"]);
        assert_eq!(lists.modified_files, vec!["b.ts"]);
        assert_eq!(
            lists.format(),
            "\n\n<read-files>\nz.ts\n</read-files>\n\n<modified-files>\nb.ts\n</modified-files>"
        );
    }

    #[test]
    fn lists_sort_by_utf16_units_like_javascript() {
        let mut ops = FileOps::default();
        for path in ["\u{FF21}.ts", "😀.ts", "B.ts", "a.ts"] {
            ops.read.insert(path.to_owned());
        }
        // U+1F600 is a surrogate pair (0xD83D …), which sorts before U+FF21 in JavaScript
        // although its code point is larger.
        assert_eq!(
            ops.lists().read_files,
            vec!["B.ts", "a.ts", "😀.ts", "\u{FF21}.ts"]
        );
    }

    #[test]
    fn only_modified_files_are_formatted_alone() {
        let lists = FileLists {
            read_files: vec![],
            modified_files: vec!["m.ts".to_owned()],
        };
        assert_eq!(
            lists.format(),
            "\n\n<modified-files>\nm.ts\n</modified-files>"
        );
    }
}
