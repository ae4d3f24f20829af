//! Writing session files the reference reads (`spec/session-format.md` §2, §12;
//! `CONTRACT.md`, "Interchange").
//!
//! - Every line is written as its stored bytes followed by LF ([`write_line`]).
//! - The reference resumes at a file's last line; [`leaf_line_last`] says when the persisted
//!   leaf's line may be written last without changing what the reference rebuilds.
//! - `--branch` exports re-chain the active path as the reference's `/export` does
//!   ([`linear_branch`]), under a new session id.
//! - `--all` writes the reference's layout ([`session_dir_name`], [`session_file_name`]).
//!
//! Worked example of [`linear_branch`]: the path lines
//! `{"type":"message","id":"a","parentId":null,…}` and
//! `{"type":"label","id":"c","parentId":"b",…}` (where `b` was on another branch) become
//! `…"id":"a","parentId":null…` and `…"id":"c","parentId":"a"…`, every other byte as
//! `JSON.stringify` writes the parsed line.
//!
//! Invariant: no file-system access here; callers hand in a `Write`.

use std::io::{self, Write};

use crate::jsonl::JsonlError;
use crate::jsonl::value::{self, JsValue};
use crate::model::entry::SessionHeader;
use crate::model::ids::SessionId;

/// Writes one line: its bytes and LF.
pub fn write_line(out: &mut dyn Write, bytes: &[u8]) -> io::Result<()> {
    out.write_all(bytes)?;
    out.write_all(b"\n")
}

/// What decides whether the leaf's line can be written last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeafFacts<'a> {
    /// The leaf is the last appended entry (nothing to move).
    pub is_last_appended: bool,
    /// The leaf has a string id and no later line repeats it (the reference's id lookup
    /// finds this very line).
    pub has_own_id: bool,
    /// The leaf is a root for the reference's tree: no parent, its own id as parent, or a
    /// parent id no entry has.
    pub is_root: bool,
    /// The leaf's `type`.
    pub type_name: &'a str,
    /// Another entry with the same parent id has the same timestamp.
    pub sibling_with_same_timestamp: bool,
}

/// Whether export writes the leaf's line last (CONTRACT.md, "Leaf"): only when the leaf is
/// not already last, and moving it changes nothing else the reference derives — roots keep
/// their file order, labels and names their order, siblings their tie order.
pub fn leaf_line_last(facts: &LeafFacts<'_>) -> bool {
    !facts.is_last_appended
        && facts.has_own_id
        && !facts.is_root
        && !matches!(facts.type_name, "label" | "session_info")
        && !facts.sibling_with_same_timestamp
}

/// Returns the header line of a `--branch` export: the reference's `/export` header
/// (`type, version, id, timestamp, cwd`, no `parentSession`) with a new session id.
pub fn branch_header(id: &SessionId, timestamp: &str, cwd: &str) -> Vec<u8> {
    SessionHeader::new(id.clone(), timestamp.to_owned(), cwd.to_owned(), None)
        .to_line()
        .into_bytes()
}

/// Re-chains the entries of a path (root first) into a linear session, as the reference's
/// `exportToJsonl` does: each entry becomes `{...entry, parentId: previous id}` (the first
/// gets `null`; after an entry without an id the key is dropped, as `undefined` is).
pub fn linear_branch<'p>(
    payloads: impl IntoIterator<Item = &'p [u8]>,
) -> Result<Vec<Vec<u8>>, JsonlError> {
    let mut chain = LinearBranch::new();
    payloads
        .into_iter()
        .map(|payload| chain.next_line(payload))
        .collect()
}

/// [`linear_branch`] one entry at a time, for a path streamed from the store.
#[derive(Debug)]
pub struct LinearBranch {
    previous: Option<JsValue>,
    idx: usize,
}

impl Default for LinearBranch {
    fn default() -> Self {
        Self::new()
    }
}

impl LinearBranch {
    /// Starts a chain: the first entry gets `parentId: null`.
    pub fn new() -> Self {
        Self {
            previous: Some(JsValue::Null),
            idx: 0,
        }
    }

    /// Returns the next entry of the path re-chained to the one before it.
    pub fn next_line(&mut self, payload: &[u8]) -> Result<Vec<u8>, JsonlError> {
        let idx = self.idx;
        self.idx += 1;
        let text = String::from_utf8_lossy(payload);
        let mut entry =
            value::parse(&text).map_err(|source| JsonlError::Reserialize { idx, source })?;
        let Some(object) = entry.as_object_mut() else {
            return Err(JsonlError::NotAnObject { idx });
        };
        let id = object.get("id").cloned();
        object.set_or_remove("parentId", self.previous.take());
        self.previous = id;
        Ok(entry.to_json())
    }
}

/// Returns a header line with its `id` replaced (position kept), for a file imported as a
/// new session.
pub fn header_with_id(header_bytes: &[u8], id: &SessionId) -> Result<Vec<u8>, JsonlError> {
    let text = String::from_utf8_lossy(header_bytes);
    let mut header =
        value::parse(&text).map_err(|source| JsonlError::Reserialize { idx: 0, source })?;
    let Some(object) = header.as_object_mut() else {
        return Err(JsonlError::NotAnObject { idx: 0 });
    };
    object.set("id", JsValue::string(id.as_str()));
    Ok(header.to_json())
}

/// The longest file name (in bytes) pi makes from session data: below Linux's `NAME_MAX`
/// (255) with room for the `.<name>.<pid>.tmp` an atomic write puts beside it.
pub const MAX_NAME_BYTES: usize = 200;

/// Hex digits of the SHA-256 suffix of a name made from odd data (96 bits: two distinct
/// values never share it, however they were chosen).
const HASH_HEX_DIGITS: usize = 24;

/// Whether `ch` cannot stand in a file name pi makes: a path separator, NUL, or a control
/// character (a name that would rewrite the terminal when listed).
fn bad_in_name(ch: char) -> bool {
    matches!(ch, '/' | '\\' | '\0') || ch.is_control()
}

/// The first [`HASH_HEX_DIGITS`] hex digits of the SHA-256 of `text`.
fn hash_suffix(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    let mut out = String::with_capacity(HASH_HEX_DIGITS);
    for byte in digest.as_ref().iter().take(HASH_HEX_DIGITS / 2) {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// `text` with every character [`bad_in_name`] names (and `~`) replaced by `-`, cut to at
/// most `max` bytes on a character boundary.
fn name_part(text: &str, max: usize) -> String {
    let mut out = String::new();
    for ch in text.chars() {
        let ch = if bad_in_name(ch) || ch == '~' {
            '-'
        } else {
            ch
        };
        if out.len() + ch.len_utf8() > max {
            break;
        }
        out.push(ch);
    }
    out
}

/// Returns the reference's per-project directory name for a cwd: one leading `/` or `\`
/// removed, then every `/`, `\` and `:` replaced by `-`, wrapped in `--…--`.
///
/// When that name would hold a NUL or a control character, or be longer than
/// [`MAX_NAME_BYTES`], those characters become `-`, the name is cut, and `~` plus a hash of
/// the cwd is added (`--<cut>~<24 hex>--`). Distinct cwds may share a directory (as in the
/// reference: `/a-b` and `/a/b`); the file names inside keep their sessions apart.
pub fn session_dir_name(cwd: &str) -> String {
    let trimmed = cwd
        .strip_prefix('/')
        .or_else(|| cwd.strip_prefix('\\'))
        .unwrap_or(cwd);
    let encoded: String = trimmed
        .chars()
        .map(|ch| {
            if matches!(ch, '/' | '\\' | ':') {
                '-'
            } else {
                ch
            }
        })
        .collect();
    let plain = format!("--{encoded}--");
    if plain.len() <= MAX_NAME_BYTES && !encoded.chars().any(bad_in_name) {
        return plain;
    }
    let budget = MAX_NAME_BYTES - "----~".len() - HASH_HEX_DIGITS;
    format!("--{}~{}--", name_part(&encoded, budget), hash_suffix(cwd))
}

/// Returns the reference's file name for a session: `<timestamp>_<id>.jsonl`, the header
/// timestamp with `:` and `.` replaced by `-`.
///
/// When the timestamp or the id holds a character that cannot stand in a name (`/`, `\`,
/// NUL, a control character) or a `~`, or the name would be longer than
/// [`MAX_NAME_BYTES`], the name is `<timestamp>_<id>~<24 hex>.jsonl`: both parts with those
/// characters replaced by `-` and cut (the timestamp to 40 bytes, the id to what is left),
/// and the hex digits the SHA-256 of the exact id. So distinct ids never share a name: a name
/// without `~` is the reference's exact one (one id), a name with `~` carries its id's hash.
pub fn session_file_name(timestamp: &str, id: &SessionId) -> String {
    let stamp: String = timestamp
        .chars()
        .map(|ch| match ch {
            ':' | '.' => '-',
            other => other,
        })
        .collect();
    let id = id.as_str();
    let plain = format!("{stamp}_{id}.jsonl");
    let odd = |text: &str| text.chars().any(|ch| bad_in_name(ch) || ch == '~');
    if plain.len() <= MAX_NAME_BYTES && !odd(&stamp) && !odd(id) {
        return plain;
    }
    let stamp = name_part(&stamp, 40);
    let budget = MAX_NAME_BYTES - stamp.len() - "_~.jsonl".len() - HASH_HEX_DIGITS;
    format!(
        "{stamp}_{}~{}.jsonl",
        name_part(id, budget),
        hash_suffix(id)
    )
}

/// Returns a session id as the start of a file name pi makes (the REPL's rescue files): the
/// id itself when it makes a good name of at most 120 bytes, otherwise as
/// [`session_file_name`] shortens one (`<cut id>~<24 hex>`).
pub fn session_file_stem(id: &SessionId) -> String {
    let id = id.as_str();
    if id.len() <= 120
        && !id.chars().any(|ch| bad_in_name(ch) || ch == '~')
        && id != ".."
        && id != "."
    {
        return id.to_owned();
    }
    format!(
        "{}~{}",
        name_part(id, 120 - 1 - HASH_HEX_DIGITS),
        hash_suffix(id)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_reference_layout() {
        assert_eq!(session_dir_name("/home/u/my-app"), "--home-u-my-app--");
        assert_eq!(session_dir_name("C:\\src\\x"), "--C--src-x--");
        assert_eq!(
            session_file_name(
                "2026-05-07T09:15:02.481Z",
                &SessionId::new("0196a3c2-7d1e-7c44-9b0e-2f6a1d3c9e55")
            ),
            "2026-05-07T09-15-02-481Z_0196a3c2-7d1e-7c44-9b0e-2f6a1d3c9e55.jsonl"
        );
        // A `/` cannot stand in a name: replaced, and the id's hash added.
        let odd = session_file_name("t", &SessionId::new("../x"));
        assert!(
            odd.starts_with("t_..-x~") && odd.ends_with(".jsonl"),
            "{odd}"
        );
        assert_ne!(odd, session_file_name("t", &SessionId::new("..-x")));
    }

    #[test]
    fn odd_ids_and_cwds_make_bounded_names_that_never_collide() {
        let ids = ["a/b", "a-b", "a\\b", "a\u{0}b", "a\u{1b}b", "a~b", "..", ""];
        let long = "x".repeat(5_000);
        let mut names: Vec<String> = ids
            .iter()
            .copied()
            .chain([long.as_str(), &long[1..]])
            .map(|id| session_file_name("2026-01-01T00:00:00.000Z", &SessionId::new(id)))
            .collect();
        for name in &names {
            assert!(name.len() <= MAX_NAME_BYTES, "{name}");
            assert!(
                !name.chars().any(|ch| ch.is_control() || ch == '/'),
                "{name:?}"
            );
        }
        assert_eq!(names[1], "2026-01-01T00-00-00-000Z_a-b.jsonl");
        assert_eq!(names[6], "2026-01-01T00-00-00-000Z_...jsonl");
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "names collided");
        let dir = session_dir_name(&format!("/{}", "d/".repeat(1_000)));
        assert!(dir.len() <= MAX_NAME_BYTES && dir.starts_with("--d-d-") && dir.ends_with("--"));
        assert!(session_dir_name("/a/\u{0}").contains('~'));
        assert_eq!(session_dir_name("/home/u/~tmp"), "--home-u-~tmp--");
        assert_eq!(session_file_stem(&SessionId::new("0196a3c2")), "0196a3c2");
        assert!(session_file_stem(&SessionId::new("../../x")).starts_with("..-..-x~"));
        assert!(session_file_stem(&SessionId::new("..")).starts_with("..~"));
    }

    #[test]
    fn branches_are_rechained_like_export_to_jsonl() {
        let lines: Vec<&[u8]> = vec![
            br#"{"type":"message","id":"a","parentId":null,"n":1.0}"#,
            br#"{"type":"label","id":"c","parentId":"b","targetId":"a"}"#,
            br#"{"type":"custom","customType":"x","parentId":"c"}"#,
            br#"{"type":"custom","customType":"y","id":"e","parentId":"zz"}"#,
        ];
        let out = linear_branch(lines).unwrap();
        let out: Vec<String> = out
            .into_iter()
            .map(|line| String::from_utf8(line).unwrap())
            .collect();
        assert_eq!(
            out,
            [
                r#"{"type":"message","id":"a","parentId":null,"n":1}"#,
                r#"{"type":"label","id":"c","parentId":"a","targetId":"a"}"#,
                r#"{"type":"custom","customType":"x","parentId":"c"}"#,
                r#"{"type":"custom","customType":"y","id":"e"}"#,
            ]
        );
    }

    #[test]
    fn the_leaf_moves_only_when_nothing_else_changes() {
        let base = LeafFacts {
            is_last_appended: false,
            has_own_id: true,
            is_root: false,
            type_name: "message",
            sibling_with_same_timestamp: false,
        };
        assert!(leaf_line_last(&base));
        assert!(!leaf_line_last(&LeafFacts {
            is_last_appended: true,
            ..base
        }));
        assert!(!leaf_line_last(&LeafFacts {
            is_root: true,
            ..base
        }));
        assert!(!leaf_line_last(&LeafFacts {
            type_name: "label",
            ..base
        }));
        assert!(!leaf_line_last(&LeafFacts {
            type_name: "session_info",
            ..base
        }));
        assert!(!leaf_line_last(&LeafFacts {
            sibling_with_same_timestamp: true,
            ..base
        }));
        assert!(!leaf_line_last(&LeafFacts {
            has_own_id: false,
            ..base
        }));
    }

    #[test]
    fn a_new_header_id_keeps_its_place() {
        let out = header_with_id(
            br#"{"type":"session","version":3,"id":"old","cwd":"/w","x":1.50}"#,
            &SessionId::new("new"),
        )
        .unwrap();
        assert_eq!(
            out,
            br#"{"type":"session","version":3,"id":"new","cwd":"/w","x":1.5}"#
        );
    }
}
