//! The v1 → v2 → v3 migration of `spec/session-format.md` §9, on JavaScript values, exactly
//! as the reference's `migrateToCurrentVersion` mutates its parsed lines — except that the
//! ids v1 migration invents are derived from the header id and the line number (so that
//! importing the same file twice gives the same ids), and that lines which are not entry
//! objects take no part in the parent chain (the reader quarantines them).
//!
//! - v1 → v2: every `type:"session"` line gets `version = 2`; every entry, in file order,
//!   gets `id` and `parentId` (the previous entry's id, `null` for the first) — set as
//!   JavaScript assignment sets them, so keys the line already had keep their position and
//!   new ones come last. A `compaction` whose `firstKeptEntryIndex` is a number gets
//!   `firstKeptEntryId` = the `id` of parsed line number `firstKeptEntryIndex` (header = 0)
//!   when that line exists and is not a header, and loses `firstKeptEntryIndex`.
//! - v2 → v3: every `type:"session"` line gets `version = 3`; a `message` entry whose
//!   `message.role` is `hookMessage` gets role `custom`.
//!
//! Which migrations run depends on the header's `version` compared as JavaScript compares
//! (`version ?? 1`, then `>= 3`, `< 2`, `< 3` with numeric coercion), see [`Migration::for_version`].
//!
//! Invariant: pure; no I/O, no randomness.

use std::collections::HashSet;

use crate::jsonl::value::{JsObject, JsValue};
use crate::support::js;

/// What opening a file of some version does to its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migration {
    /// Version 3 or later: lines are kept byte for byte.
    None,
    /// A version that compares as neither `>= 3` nor `< 3` (`NaN` after coercion, e.g. the
    /// string `"three"`): the reference migrates nothing but still rewrites every line.
    ReserializeOnly,
    /// Version 2: `hookMessage` roles renamed, every line re-serialised.
    FromV2,
    /// Version 1 (or absent): ids and parents invented, then as from version 2.
    FromV1,
}

impl Migration {
    /// Returns the migration for a header's `version` value (`None`: the key is absent).
    pub fn for_version(version: Option<&JsValue>) -> Self {
        let number = match version {
            None | Some(JsValue::Null) => 1.0,
            Some(value) => to_number(value),
        };
        if number >= 3.0 {
            Self::None
        } else if number < 2.0 {
            Self::FromV1
        } else if number < 3.0 {
            Self::FromV2
        } else {
            Self::ReserializeOnly
        }
    }

    /// Whether lines are re-serialised (every migration but `None`).
    pub fn rewrites(self) -> bool {
        !matches!(self, Self::None)
    }
}

/// JavaScript's `ToNumber` for a JSON value.
pub fn to_number(value: &JsValue) -> f64 {
    match value {
        JsValue::Null => 0.0,
        JsValue::Bool(flag) => f64::from(u8::from(*flag)),
        JsValue::Number(number) => *number,
        JsValue::String(text) => js::string_to_number(&text.to_string_lossy()),
        // ToPrimitive of an array is its `join(",")`; of a plain object "[object Object]".
        JsValue::Array(items) => match items.as_slice() {
            [] => 0.0,
            [single] => match single {
                JsValue::Null => 0.0,
                JsValue::Array(_) | JsValue::Object(_) | JsValue::String(_) => {
                    js::string_to_number(&array_to_string(single))
                }
                JsValue::Bool(_) => f64::NAN,
                JsValue::Number(number) => *number,
            },
            _ => f64::NAN,
        },
        JsValue::Object(_) => f64::NAN,
    }
}

/// `String(value)` for the values an array element can coerce through.
fn array_to_string(value: &JsValue) -> String {
    match value {
        JsValue::Null => String::new(),
        JsValue::String(text) => text.to_string_lossy(),
        JsValue::Array(items) => items
            .iter()
            .map(array_to_string)
            .collect::<Vec<_>>()
            .join(","),
        JsValue::Object(_) => "[object Object]".to_owned(),
        JsValue::Bool(flag) => flag.to_string(),
        JsValue::Number(number) => {
            String::from_utf8_lossy(&JsValue::Number(*number).to_json()).into_owned()
        }
    }
}

/// One parsed line of a file being migrated.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedLine {
    /// 1-based line number in the file.
    pub line: usize,
    /// The value; `None` for a line `JSON.parse` accepts but this project cannot hold
    /// (nested too deeply) — it still counts for `firstKeptEntryIndex`.
    pub value: Option<JsValue>,
    /// Whether the line is an entry object (it takes part in the parent chain).
    pub is_entry: bool,
}

/// Derives the id v1 migration gives the entry on `line`: 8 lowercase hex digits from the
/// header id and the line number, re-derived with a counter until it is not in `taken`.
pub fn derived_id(header_id: &str, line: usize, taken: &HashSet<String>) -> String {
    let mut attempt: u64 = 0;
    loop {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |bytes: &[u8]| {
            for byte in bytes {
                hash ^= u64::from(*byte);
                hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        feed(header_id.as_bytes());
        feed(b"\n");
        feed(line.to_string().as_bytes());
        if attempt > 0 {
            feed(b"#");
            feed(attempt.to_string().as_bytes());
        }
        // SplitMix64's finalizer spreads FNV's weak high bits.
        let mut z = hash;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let candidate = format!("{:08x}", z >> 32);
        if !taken.contains(&candidate) {
            return candidate;
        }
        attempt += 1;
    }
}

fn is_session_line(value: &JsValue) -> bool {
    value
        .as_object()
        .and_then(|object| object.get("type"))
        .and_then(JsValue::as_js_string)
        .is_some_and(|kind| kind.eq_str("session"))
}

fn type_is(object: &JsObject, kind: &str) -> bool {
    object
        .get("type")
        .and_then(JsValue::as_js_string)
        .is_some_and(|name| name.eq_str(kind))
}

/// Migrates the parsed lines of a file in place; `lines[0]` is the header.
pub fn migrate(lines: &mut [ParsedLine], header_id: &str, migration: Migration) {
    match migration {
        Migration::None | Migration::ReserializeOnly => {}
        Migration::FromV2 => v2_to_v3(lines),
        Migration::FromV1 => {
            v1_to_v2(lines, header_id);
            v2_to_v3(lines);
        }
    }
}

fn set_version(lines: &mut [ParsedLine], version: f64) {
    for parsed in lines.iter_mut() {
        if let Some(value) = &mut parsed.value
            && is_session_line(value)
            && let Some(object) = value.as_object_mut()
        {
            object.set("version", JsValue::Number(version));
        }
    }
}

fn v1_to_v2(lines: &mut [ParsedLine], header_id: &str) {
    set_version(lines, 2.0);
    let mut taken: HashSet<String> = HashSet::new();
    let mut previous: Option<String> = None;
    for idx in 0..lines.len() {
        if !lines[idx].is_entry || lines[idx].value.is_none() {
            continue;
        }
        let id = derived_id(header_id, lines[idx].line, &taken);
        taken.insert(id.clone());
        let parent = previous.replace(id.clone());
        let Some(object) = lines[idx].value.as_mut().and_then(JsValue::as_object_mut) else {
            continue;
        };
        object.set("id", JsValue::string(&id));
        object.set(
            "parentId",
            parent.map_or(JsValue::Null, |parent| JsValue::string(&parent)),
        );
        if !type_is(object, "compaction") {
            continue;
        }
        let Some(JsValue::Number(index)) = object.get("firstKeptEntryIndex").cloned() else {
            continue;
        };
        // `entries[index]`: a property lookup, so only a non-negative integer (or -0) names
        // a line.
        let target = (index.fract() == 0.0 && index >= 0.0 && index < lines.len() as f64)
            .then_some(index as usize);
        let assignment = target.and_then(|target| {
            let value = lines[target].value.as_ref()?;
            if !value.is_truthy() || is_session_line(value) {
                return None;
            }
            // `firstKeptEntryId = targetEntry.id`: the target's id as it is now (undefined
            // for a value without one).
            Some(
                value
                    .as_object()
                    .and_then(|object| object.get("id"))
                    .cloned(),
            )
        });
        let Some(object) = lines[idx].value.as_mut().and_then(JsValue::as_object_mut) else {
            continue;
        };
        if let Some(first_kept) = assignment {
            object.set_or_remove("firstKeptEntryId", first_kept);
        }
        object.remove("firstKeptEntryIndex");
    }
}

fn v2_to_v3(lines: &mut [ParsedLine]) {
    set_version(lines, 3.0);
    for parsed in lines.iter_mut() {
        if !parsed.is_entry {
            continue;
        }
        let Some(object) = parsed.value.as_mut().and_then(JsValue::as_object_mut) else {
            continue;
        };
        if !type_is(object, "message") {
            continue;
        }
        if let Some(message) = object.get_mut("message").and_then(JsValue::as_object_mut)
            && message
                .get("role")
                .and_then(JsValue::as_js_string)
                .is_some_and(|role| role.eq_str("hookMessage"))
        {
            message.set("role", JsValue::string("custom"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonl::value::parse;

    fn version(text: &str) -> Migration {
        let value = parse(text).unwrap();
        Migration::for_version(value.as_object().unwrap().get("version"))
    }

    #[test]
    fn versions_compare_as_javascript_compares() {
        assert_eq!(version(r#"{}"#), Migration::FromV1);
        assert_eq!(version(r#"{"version":null}"#), Migration::FromV1);
        assert_eq!(version(r#"{"version":1}"#), Migration::FromV1);
        assert_eq!(version(r#"{"version":0}"#), Migration::FromV1);
        assert_eq!(version(r#"{"version":true}"#), Migration::FromV1);
        assert_eq!(version(r#"{"version":2}"#), Migration::FromV2);
        assert_eq!(version(r#"{"version":2.5}"#), Migration::FromV2);
        assert_eq!(version(r#"{"version":"2"}"#), Migration::FromV2);
        assert_eq!(version(r#"{"version":[2]}"#), Migration::FromV2);
        assert_eq!(version(r#"{"version":3}"#), Migration::None);
        assert_eq!(version(r#"{"version":" 3 "}"#), Migration::None);
        assert_eq!(version(r#"{"version":"0x10"}"#), Migration::None);
        assert_eq!(version(r#"{"version":7}"#), Migration::None);
        assert_eq!(
            version(r#"{"version":"three"}"#),
            Migration::ReserializeOnly
        );
        assert_eq!(version(r#"{"version":{}}"#), Migration::ReserializeOnly);
        assert_eq!(version(r#"{"version":""}"#), Migration::FromV1);
        assert_eq!(version(r#"{"version":"1e0"}"#), Migration::FromV1);
        assert_eq!(version(r#"{"version":".5"}"#), Migration::FromV1);
        assert_eq!(version(r#"{"version":"Infinity"}"#), Migration::None);
        assert_eq!(version(r#"{"version":"2.e0"}"#), Migration::FromV2);
        assert_eq!(version(r#"{"version":"2."}"#), Migration::FromV2);
        assert_eq!(version(r#"{"version":"inf"}"#), Migration::ReserializeOnly);
        assert_eq!(version(r#"{"version":"."}"#), Migration::ReserializeOnly);
    }

    #[test]
    fn derived_ids_are_stable_hex_and_avoid_taken_ones() {
        let taken = HashSet::new();
        let id = derived_id("session-1", 2, &taken);
        assert_eq!(id.len(), 8);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(id, derived_id("session-1", 2, &taken));
        assert_ne!(id, derived_id("session-1", 3, &taken));
        assert_ne!(id, derived_id("session-2", 2, &taken));
        let taken: HashSet<String> = [id.clone()].into_iter().collect();
        let other = derived_id("session-1", 2, &taken);
        assert_ne!(other, id);
        assert_eq!(other, derived_id("session-1", 2, &taken));
    }

    fn lines(texts: &[&str]) -> Vec<ParsedLine> {
        texts
            .iter()
            .enumerate()
            .map(|(idx, text)| {
                let value = parse(text).unwrap();
                let is_entry = idx > 0
                    && value
                        .as_object()
                        .and_then(|object| object.get("type"))
                        .and_then(JsValue::as_js_string)
                        .is_some_and(|kind| !kind.eq_str("session"));
                ParsedLine {
                    line: idx + 1,
                    value: Some(value),
                    is_entry,
                }
            })
            .collect()
    }

    fn output(lines: &[ParsedLine]) -> Vec<String> {
        lines
            .iter()
            .map(|parsed| String::from_utf8(parsed.value.as_ref().unwrap().to_json()).unwrap())
            .collect()
    }

    #[test]
    fn v1_compaction_indexes_resolve_like_the_reference() {
        let mut parsed = lines(&[
            r#"{"type":"session","id":"h"}"#,
            r#"{"type":"message","message":{"role":"user"}}"#,
            r#"{"type":"compaction","firstKeptEntryIndex":1,"summary":"s"}"#,
            r#"{"type":"compaction","firstKeptEntryIndex":0}"#,
            r#"{"type":"compaction","firstKeptEntryIndex":9}"#,
            r#"{"type":"compaction","firstKeptEntryIndex":6}"#,
            r#"{"type":"message","id":"old","message":{"role":"hookMessage"}}"#,
            r#"{"type":"compaction","firstKeptEntryIndex":"1","firstKeptEntryId":"kept"}"#,
        ]);
        migrate(&mut parsed, "h", Migration::FromV1);
        let out = output(&parsed);
        let id = |line: usize| derived_id_for(&parsed, line);
        assert_eq!(out[0], r#"{"type":"session","id":"h","version":3}"#);
        assert_eq!(
            out[2],
            format!(
                r#"{{"type":"compaction","summary":"s","id":"{}","parentId":"{}","firstKeptEntryId":"{}"}}"#,
                id(3),
                id(2),
                id(2)
            )
        );
        // Index 0 is the header: nothing is set.
        assert_eq!(
            out[3],
            format!(
                r#"{{"type":"compaction","id":"{}","parentId":"{}"}}"#,
                id(4),
                id(3)
            )
        );
        // Out of range: nothing is set.
        assert!(!out[4].contains("firstKept"));
        // A later line: its id as it is now (the original "old", overwritten afterwards).
        assert!(
            out[5].ends_with(r#""firstKeptEntryId":"old"}"#),
            "{}",
            out[5]
        );
        assert!(out[6].starts_with(&format!(
            r#"{{"type":"message","id":"{}","message":{{"role":"custom"}},"parentId""#,
            id(7)
        )));
        // A non-numeric index is left alone.
        assert!(out[7].contains(r#""firstKeptEntryIndex":"1","firstKeptEntryId":"kept""#));
    }

    fn derived_id_for(lines: &[ParsedLine], line: usize) -> String {
        lines[line - 1]
            .value
            .as_ref()
            .and_then(JsValue::as_object)
            .and_then(|object| object.get("id"))
            .and_then(JsValue::as_js_string)
            .and_then(|id| id.as_str().map(str::to_owned))
            .unwrap()
    }

    #[test]
    fn v2_renames_hook_messages_only() {
        let mut parsed = lines(&[
            r#"{"type":"session","version":2,"id":"h"}"#,
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"hookMessage","x":1.0}}"#,
            r#"{"type":"custom","id":"b","parentId":"a","message":{"role":"hookMessage"}}"#,
        ]);
        migrate(&mut parsed, "h", Migration::FromV2);
        assert_eq!(
            output(&parsed),
            [
                r#"{"type":"session","version":3,"id":"h"}"#,
                r#"{"type":"message","id":"a","parentId":null,"message":{"role":"custom","x":1}}"#,
                r#"{"type":"custom","id":"b","parentId":"a","message":{"role":"hookMessage"}}"#,
            ]
        );
    }
}
