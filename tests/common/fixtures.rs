//! The reference fixtures (`fixtures/pi/`) and their expectations.

use std::path::PathBuf;

use pi::model::SessionHeader;
use pi::model::SessionId;
use pi::store::{RawEntry, SessionStore};
use serde_json::Value;

/// The fixtures directory.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("pi")
}

/// The 1.6.0 fixtures directory (`fixtures/pi16/`, written by 1.6.0 itself).
pub fn dir16() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("pi16")
}

/// Every fixture name (`X` of `X.jsonl`, migrated files excluded), sorted.
pub fn names() -> Vec<String> {
    names_in(&dir())
}

/// Every fixture name in `dir`, sorted.
pub fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".jsonl")?;
            (!stem.ends_with(".migrated")).then(|| stem.to_owned())
        })
        .collect();
    names.sort();
    names
}

/// Reads `X.expected.json` (lenient: the unicode fixture holds lone surrogates).
pub fn expected(name: &str) -> Value {
    expected_in(&dir(), name)
}

/// Reads `X.expected.json` of `dir`.
pub fn expected_in(dir: &std::path::Path, name: &str) -> Value {
    let bytes = std::fs::read(dir.join(format!("{name}.expected.json"))).unwrap();
    pi::support::json::parse_lenient(&bytes).unwrap()
}

/// The `X.leaf-ID.expected.json` variants: `(leaf id, expectation)`.
pub fn leaf_variants(name: &str) -> Vec<(String, Value)> {
    leaf_variants_in(&dir(), name)
}

/// The `X.leaf-ID.expected.json` variants of `dir`.
pub fn leaf_variants_in(dir: &std::path::Path, name: &str) -> Vec<(String, Value)> {
    let prefix = format!("{name}.leaf-");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let file = entry.ok()?.file_name().into_string().ok()?;
            let id = file
                .strip_prefix(&prefix)?
                .strip_suffix(".expected.json")?
                .to_owned();
            let bytes = std::fs::read(dir.join(&file)).ok()?;
            Some((id, pi::support::json::parse_lenient(&bytes).ok()?))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Whether a fixture is a v3 file the reference opens without error or repair: the ones the
/// store tests build through the minimal reader.
pub fn is_plain_v3(name: &str) -> bool {
    let expected = expected(name);
    if expected.get("error").is_some() || expected["headerSynthesized"] == Value::Bool(true) {
        return false;
    }
    let (header, _, _) = read_minimal(name);
    header.version == Some(3) && expected["fileRewritten"] != Value::Bool(true)
}

/// A minimal line reader: the first valid header, then every line that parses as an entry
/// object (blank, torn and non-JSON lines skipped). Legacy migration and quarantine belong to
/// the interchange layer; the store tests only need the v3 trees.
pub fn read_minimal(name: &str) -> (SessionHeader, Vec<u8>, Vec<RawEntry>) {
    let bytes = std::fs::read(dir().join(format!("{name}.jsonl"))).unwrap();
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
    let mut header = None;
    let mut entries = Vec::new();
    for line in bytes.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if header.is_none() {
            if let Some(parsed) = SessionHeader::parse(line) {
                header = Some((parsed, line.to_vec()));
            }
            continue;
        }
        if let Some(raw) = RawEntry::parse(line) {
            entries.push(raw);
        }
    }
    let (header, header_bytes) = header.expect("fixture has a header");
    (header, header_bytes, entries)
}

/// Builds a fixture's tree in the store through the raw-line API; returns the session id.
///
/// Several fixtures share a session id (copies of one file, damaged differently), so the
/// session is stored under the fixture's name.
pub fn load(store: &SessionStore, name: &str) -> SessionId {
    let (header, _, entries) = read_minimal(name);
    let header = SessionHeader {
        id: SessionId::new(format!("fixture-{name}")),
        ..header
    };
    store
        .insert_raw_session(&header, header.to_line().as_bytes(), &entries)
        .unwrap()
        .id
}
