//! YAML frontmatter of skill files and prompt templates, split and parsed exactly as the
//! reference's `parseFrontmatter` does.
//!
//! Format (spec/resources.md §3.3): the text, with CRLF and lone CR turned into LF, starts
//! with `---`; the YAML runs from after that first line up to the next `"\n---"` (wherever it
//! is, even inside a longer line such as `\n----`); the body is everything after that marker,
//! trimmed. Without a closing marker, or without a leading `---`, there is no frontmatter and
//! the body is the whole normalised text, untrimmed. Example:
//!
//! ```text
//! ---
//! name: pdf-tools
//! description: Extract text and tables from PDF files.
//! ---
//! # PDF tools        ← body starts here (leading/trailing whitespace trimmed)
//! ```
//!
//! The YAML is parsed with `yaml-rust2` (YAML 1.2 core schema, like the reference's `yaml`
//! package): `true`/`True`/`TRUE` are booleans, quoted scalars stay strings, duplicate keys
//! and several documents are errors.
//!
//! Invariant: pure; no file-system access.

use yaml_rust2::{Yaml, YamlLoader};

use crate::session::resources::text::{js_trim, normalize_newlines};

/// A frontmatter block that is not valid YAML.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid YAML frontmatter: {message}")]
pub struct FrontmatterError {
    /// The parser's description of the problem, with its position.
    pub message: String,
}

/// The parsed frontmatter fields; empty when there was none or it was not a mapping.
#[derive(Debug, Clone, Default)]
pub struct Frontmatter {
    fields: Option<yaml_rust2::yaml::Hash>,
}

/// A resource file split into its frontmatter and its body.
#[derive(Debug, Clone)]
pub struct ParsedDocument {
    /// The frontmatter fields.
    pub frontmatter: Frontmatter,
    /// The body: trimmed after a frontmatter block, else the whole normalised text.
    pub body: String,
}

/// Splits normalised text into the raw YAML (if any) and the body.
fn split(normalized: &str) -> (Option<&str>, &str) {
    if !normalized.starts_with("---") {
        return (None, normalized);
    }
    // The reference searches for "\n---" from index 3 and takes the YAML from index 4, i.e.
    // after the three dashes and the character that follows them.
    let Some(found) = normalized[3..].find("\n---") else {
        return (None, normalized);
    };
    let end = 3 + found;
    let start = 3 + normalized[3..].chars().next().map_or(0, char::len_utf8);
    let yaml = if start <= end {
        &normalized[start..end]
    } else {
        ""
    };
    (Some(yaml), js_trim(&normalized[end + 4..]))
}

/// Parses a resource file's text into frontmatter and body.
///
/// # Errors
/// Returns `FrontmatterError` when the frontmatter block is not valid YAML (or holds more
/// than one document).
pub fn parse_frontmatter(content: &str) -> Result<ParsedDocument, FrontmatterError> {
    let normalized = normalize_newlines(content);
    let (yaml, body) = split(&normalized);
    let body = body.to_string();
    let Some(yaml) = yaml.filter(|yaml| !yaml.is_empty()) else {
        return Ok(ParsedDocument {
            frontmatter: Frontmatter::default(),
            body,
        });
    };
    let docs = YamlLoader::load_from_str(yaml).map_err(|err| FrontmatterError {
        message: err.to_string(),
    })?;
    if docs.len() > 1 {
        return Err(FrontmatterError {
            message: "the frontmatter contains more than one YAML document".to_string(),
        });
    }
    let fields = match docs.into_iter().next() {
        Some(Yaml::Hash(hash)) => Some(hash),
        _ => None,
    };
    Ok(ParsedDocument {
        frontmatter: Frontmatter { fields },
        body,
    })
}

/// Returns the body of a resource file without its frontmatter (the reference's
/// `stripFrontmatter`).
///
/// # Errors
/// Returns `FrontmatterError` when the frontmatter block is not valid YAML.
pub fn strip_frontmatter(content: &str) -> Result<String, FrontmatterError> {
    parse_frontmatter(content).map(|doc| doc.body)
}

impl Frontmatter {
    /// Returns the raw YAML value of a field.
    pub fn get(&self, key: &str) -> Option<&Yaml> {
        self.fields.as_ref()?.get(&Yaml::String(key.to_string()))
    }

    /// Returns whether the field is present.
    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Returns the field's value when it is a string (any string, empty included).
    pub fn string(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Yaml::String(value) => Some(value),
            _ => None,
        }
    }

    /// Returns whether the field is the boolean `true` (the reference compares `=== true`).
    pub fn is_true(&self, key: &str) -> bool {
        matches!(self.get(key), Some(Yaml::Boolean(true)))
    }

    /// Returns whether JavaScript would find the field truthy (present, not `null`, `false`,
    /// `0`, `NaN` or `""`; mappings and lists are truthy).
    pub fn is_truthy(&self, key: &str) -> bool {
        match self.get(key) {
            None | Some(Yaml::Null | Yaml::BadValue | Yaml::Boolean(false)) => false,
            Some(Yaml::Hash(_) | Yaml::Array(_) | Yaml::Alias(_)) => true,
            Some(_) => self.truthy_text(key).is_some(),
        }
    }

    /// Returns the field as text when JavaScript would find it truthy: a non-empty string, a
    /// non-zero number (in JavaScript's notation) or `true`. Falsy values, and mappings and
    /// lists (which the reference would print as `[object Object]` or comma-joined), give
    /// `None`.
    pub fn truthy_text(&self, key: &str) -> Option<String> {
        match self.get(key)? {
            Yaml::String(value) if !value.is_empty() => Some(value.clone()),
            Yaml::Integer(value) if *value != 0 => Some(value.to_string()),
            Yaml::Real(text) => {
                let value = yaml_real(text)?;
                if value == 0.0 || value.is_nan() {
                    None
                } else {
                    Some(js_number_text(value))
                }
            }
            Yaml::Boolean(true) => Some("true".to_string()),
            _ => None,
        }
    }
}

/// Parses a YAML 1.2 float the way the core schema spells it.
fn yaml_real(text: &str) -> Option<f64> {
    match text {
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Some(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => Some(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => Some(f64::NAN),
        _ => text.parse().ok(),
    }
}

/// Formats a number as JavaScript's `String(number)` does.
fn js_number_text(value: f64) -> String {
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    let mut buffer = ryu_js::Buffer::new();
    buffer.format(value).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(text: &str) -> String {
        parse_frontmatter(text).unwrap().body
    }

    #[test]
    fn splits_frontmatter_and_trims_body() {
        let doc = parse_frontmatter("---\nname: a\ndescription: b c\n---\n\n  Body\n\n").unwrap();
        assert_eq!(doc.frontmatter.string("name"), Some("a"));
        assert_eq!(doc.frontmatter.string("description"), Some("b c"));
        assert_eq!(doc.body, "Body");
    }

    #[test]
    fn without_frontmatter_the_body_is_untrimmed_normalised_text() {
        assert_eq!(body("  hello\r\nworld\r"), "  hello\nworld\n");
        assert_eq!(body("---\nno closing marker\n"), "---\nno closing marker\n");
    }

    #[test]
    fn closing_marker_may_be_inside_a_longer_line() {
        let doc = parse_frontmatter("---\ndescription: x\n----tail\nrest").unwrap();
        assert_eq!(doc.frontmatter.string("description"), Some("x"));
        assert_eq!(doc.body, "-tail\nrest");
    }

    #[test]
    fn empty_frontmatter_still_strips_the_block() {
        let doc = parse_frontmatter("---\n---\nBody").unwrap();
        assert!(!doc.frontmatter.has("name"));
        assert_eq!(doc.body, "Body");
    }

    #[test]
    fn crlf_files_parse_like_lf_files() {
        let doc = parse_frontmatter("---\r\ndescription: d\r\n---\r\nBody\r\n").unwrap();
        assert_eq!(doc.frontmatter.string("description"), Some("d"));
        assert_eq!(doc.body, "Body");
    }

    #[test]
    fn yaml_types_follow_the_core_schema() {
        let doc = parse_frontmatter(
            "---\na: True\nb: 'true'\nc: 12\nd: 1.50\ne: 0\nf: >-\n  folded\n  text\ng: [x]\n---\n",
        )
        .unwrap();
        let fm = &doc.frontmatter;
        assert!(fm.is_true("a"));
        assert!(!fm.is_true("b"));
        assert_eq!(fm.truthy_text("c").as_deref(), Some("12"));
        assert_eq!(fm.truthy_text("d").as_deref(), Some("1.5"));
        assert_eq!(fm.truthy_text("e"), None);
        assert_eq!(fm.string("f"), Some("folded text"));
        assert_eq!(fm.truthy_text("g"), None);
    }

    #[test]
    fn invalid_yaml_is_an_error() {
        assert!(parse_frontmatter("---\nname: [x\n---\nbody").is_err());
        assert!(parse_frontmatter("---\na: 1\na: 2\n---\nbody").is_err());
    }

    #[test]
    fn scalar_frontmatter_has_no_fields() {
        let doc = parse_frontmatter("---\njust text\n---\nbody").unwrap();
        assert!(!doc.frontmatter.has("description"));
        assert_eq!(doc.body, "body");
    }

    #[test]
    fn bom_prevents_frontmatter_like_the_reference() {
        let doc = parse_frontmatter("\u{FEFF}---\ndescription: d\n---\nbody").unwrap();
        assert!(!doc.frontmatter.has("description"));
    }
}
