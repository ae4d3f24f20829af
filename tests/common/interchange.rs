//! Import and export through the library, and the store's views as the fixtures' JSON
//! (`*.expected.json`: context, tree, leaf, branch), shared by the interchange, interop and
//! store suites.

use std::collections::{BTreeSet, HashMap};

use pi::jsonl::{JsonlError, Migration, SessionFile, SkippedLine};
use pi::model::SessionId;
use pi::store::{ImportMode, ImportOptions, ImportReport, LeafSelector, SessionStore};
use serde_json::{Map, Value};

/// What importing some bytes gave.
pub struct Imported {
    pub report: ImportReport,
    pub skipped: Vec<SkippedLine>,
    pub migration: Migration,
    pub header_line: usize,
}

/// Reads and imports a file's bytes in one transaction.
pub fn import_bytes(
    store: &SessionStore,
    bytes: &[u8],
    mode: ImportMode,
) -> Result<Imported, JsonlError> {
    let file = SessionFile::read(bytes)?;
    let skipped: Vec<SkippedLine> = file.skipped().cloned().collect();
    let options = ImportOptions {
        source: "test.jsonl",
        mode,
    };
    let report = store
        .import_lines(
            &file.header,
            &file.header_bytes,
            file.items.clone().into_iter().map(Ok),
            &options,
        )
        .unwrap();
    Ok(Imported {
        report,
        skipped,
        migration: file.migration,
        header_line: file.header_line,
    })
}

/// Exports a session to bytes.
pub fn export(store: &SessionStore, session: &SessionId) -> Vec<u8> {
    let mut out = Vec::new();
    store.export_jsonl(session, &mut out).unwrap();
    out
}

/// The source with the BOM, CRLF `\r`s and the reported lines removed, every line ended by LF.
pub fn minus_reported(source: &[u8], reported: &BTreeSet<usize>) -> Vec<u8> {
    let body = source.strip_prefix(b"\xef\xbb\xbf").unwrap_or(source);
    let mut out = Vec::new();
    let mut lines: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
    let terminated = body.ends_with(b"\n");
    if terminated {
        lines.pop();
    }
    let count = lines.len();
    for (idx, line) in lines.into_iter().enumerate() {
        if reported.contains(&(idx + 1)) {
            continue;
        }
        let is_last_unterminated = idx + 1 == count && !terminated;
        let line = if is_last_unterminated {
            line
        } else {
            line.strip_suffix(b"\r").unwrap_or(line)
        };
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out
}

/// Our context at a leaf as a JSON value.
pub fn context_value(store: &SessionStore, session: &SessionId, leaf: &LeafSelector) -> Value {
    let context = store.context(session, leaf).unwrap();
    pi::support::json::parse_lenient(context.to_json().as_bytes()).unwrap()
}

/// Our tree flattened as the fixtures' `tree`.
pub fn tree_value(store: &SessionStore, session: &SessionId) -> Value {
    Value::Array(
        store
            .tree(session)
            .unwrap()
            .into_iter()
            .map(|node| {
                let mut map = Map::new();
                map.insert("id".into(), node.id.map_or(Value::Null, Value::from));
                map.insert(
                    "parentId".into(),
                    node.parent_id.map_or(Value::Null, Value::from),
                );
                map.insert("type".into(), Value::from(node.type_name));
                if let Some(label) = node.label {
                    map.insert("label".into(), Value::from(label));
                }
                if let Some(ts) = node.label_timestamp {
                    map.insert("labelTimestamp".into(), Value::from(ts));
                }
                Value::Object(map)
            })
            .collect(),
    )
}

/// Our leaf id (`null` before the first entry).
pub fn leaf_value(store: &SessionStore, session: &SessionId) -> Value {
    store
        .leaf(session)
        .unwrap()
        .and_then(|stored| stored.entry.id)
        .map_or(Value::Null, |id| Value::from(id.as_str()))
}

/// Our branch, leaf to root, as ids.
pub fn branch_value(store: &SessionStore, session: &SessionId) -> Value {
    branch_value_at(store, session, &LeafSelector::Current)
}

/// Our branch from `leaf` to the root, as ids (the fixtures' `branch`).
pub fn branch_value_at(store: &SessionStore, session: &SessionId, leaf: &LeafSelector) -> Value {
    Value::Array(
        store
            .branch_path(session, leaf)
            .unwrap()
            .iter()
            .rev()
            .map(|stored| {
                stored
                    .entry
                    .id
                    .as_ref()
                    .map_or(Value::Null, |id| Value::from(id.as_str()))
            })
            .collect(),
    )
}

/// Replaces every string equal to a key of `ids` by its value, recursively.
pub fn rename_ids(value: &Value, ids: &HashMap<String, String>) -> Value {
    match value {
        Value::String(text) => {
            Value::String(ids.get(text).cloned().unwrap_or_else(|| text.clone()))
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|item| rename_ids(item, ids)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.clone(), rename_ids(item, ids)))
                .collect(),
        ),
        other => other.clone(),
    }
}
