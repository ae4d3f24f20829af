//! The pure half of the `edit` tool (`spec/tools.md` §5.3–5.5): line-ending and BOM handling,
//! exact-then-fuzzy matching of several edits against one original text, and the numbered
//! diff stored in `details.diff`.
//!
//! Matching: each `oldText` is searched exactly, else in *fuzzy form* F (NFKC, trailing
//! whitespace stripped per line, typographic quotes/dashes/spaces made ASCII). If any edit
//! needs F, every edit is applied to F(original), so the whole file is written back in F form.
//! Uniqueness is always counted in F space. Edits are applied last to first; they never see
//! each other's results.
//!
//! Invariants: pure functions over strings; every index is a byte offset into the string it
//! was found in; errors carry the reference's wording.

use icu_normalizer::ComposingNormalizerBorrowed;
use similar::{Algorithm, ChangeTag, TextDiff};

/// One replacement, after line endings were normalised to LF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replacement {
    /// Text to find.
    pub old_text: String,
    /// Text to put in its place (inserted verbatim).
    pub new_text: String,
}

/// The text edits were matched against and the text after applying them (both LF, no BOM).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedEdits {
    /// The original, or its fuzzy form when any edit needed fuzzy matching.
    pub base: String,
    /// The result.
    pub new: String,
}

/// Removes one leading U+FEFF; returns `(bom, rest)`.
pub fn strip_bom(text: &str) -> (&str, &str) {
    match text.strip_prefix('\u{feff}') {
        Some(rest) => ("\u{feff}", rest),
        None => ("", text),
    }
}

/// Returns `"\r\n"` when the first `\n` of `text` is preceded by `\r`, else `"\n"`.
pub fn detect_line_ending(text: &str) -> &'static str {
    match text.find('\n') {
        Some(pos) if pos > 0 && text.as_bytes()[pos - 1] == b'\r' => "\r\n",
        _ => "\n",
    }
}

/// Turns CRLF, then lone CR, into LF.
pub fn normalize_to_lf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// Turns every LF into `ending`.
pub fn restore_line_endings(text: &str, ending: &str) -> String {
    if ending == "\r\n" {
        text.replace('\n', "\r\n")
    } else {
        text.to_owned()
    }
}

/// The fuzzy form F of `spec/tools.md` §5.4.
pub fn normalize_for_fuzzy_match(text: &str) -> String {
    let nfkc = ComposingNormalizerBorrowed::new_nfkc().normalize(text);
    let trimmed = nfkc
        .split('\n')
        .map(|line| line.trim_end_matches(crate::support::js::is_whitespace))
        .collect::<Vec<_>>()
        .join("\n");
    trimmed
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201a}' | '\u{201b}' => '\'',
            '\u{201c}' | '\u{201d}' | '\u{201e}' | '\u{201f}' => '"',
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{a0}' | '\u{2002}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}' => ' ',
            other => other,
        })
        .collect()
}

/// Where an edit's old text was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Found {
    index: usize,
    length: usize,
    fuzzy: bool,
}

/// A text and, computed on first use, its fuzzy form (normalising a large file is the
/// expensive step, and every edit needs it for the uniqueness count).
struct Haystack<'a> {
    text: &'a str,
    fuzzy: std::cell::OnceCell<String>,
}

impl<'a> Haystack<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            text,
            fuzzy: std::cell::OnceCell::new(),
        }
    }

    fn fuzzy(&self) -> &str {
        self.fuzzy
            .get_or_init(|| normalize_for_fuzzy_match(self.text))
    }

    /// Exact search first, then the fuzzy form of both.
    fn find(&self, old_text: &str) -> Option<Found> {
        if let Some(index) = self.text.find(old_text) {
            return Some(Found {
                index,
                length: old_text.len(),
                fuzzy: false,
            });
        }
        let fuzzy_old = normalize_for_fuzzy_match(old_text);
        self.fuzzy().find(&fuzzy_old).map(|index| Found {
            index,
            length: fuzzy_old.len(),
            fuzzy: true,
        })
    }

    /// Non-overlapping occurrences of F(old) in F(text), as `split(old).length - 1` counts
    /// them (for an empty F(old), one less than the UTF-16 length of F(text)).
    fn count_occurrences(&self, old_text: &str) -> usize {
        let fuzzy_old = normalize_for_fuzzy_match(old_text);
        if fuzzy_old.is_empty() {
            return crate::support::truncate::utf16_len(self.fuzzy()).saturating_sub(1);
        }
        self.fuzzy().matches(fuzzy_old.as_str()).count()
    }
}

/// Applies `edits` to LF-normalised `content` (see the module docs); `path` is the raw path
/// argument, named in errors.
pub fn apply_edits(
    content: &str,
    edits: &[Replacement],
    path: &str,
) -> Result<AppliedEdits, String> {
    let total = edits.len();
    let edits: Vec<Replacement> = edits
        .iter()
        .map(|edit| Replacement {
            old_text: normalize_to_lf(&edit.old_text),
            new_text: normalize_to_lf(&edit.new_text),
        })
        .collect();
    if let Some(idx) = edits.iter().position(|edit| edit.old_text.is_empty()) {
        return Err(if total == 1 {
            format!("oldText must not be empty in {path}.")
        } else {
            format!("edits[{idx}].oldText must not be empty in {path}.")
        });
    }
    let original = Haystack::new(content);
    let any_fuzzy = edits.iter().any(|edit| {
        original
            .find(&edit.old_text)
            .is_some_and(|found| found.fuzzy)
    });
    let base = if any_fuzzy {
        original.fuzzy().to_owned()
    } else {
        content.to_owned()
    };
    let haystack = Haystack::new(&base);
    let mut matched: Vec<(usize, Found, &str)> = Vec::with_capacity(total);
    for (idx, edit) in edits.iter().enumerate() {
        let Some(found) = haystack.find(&edit.old_text) else {
            return Err(if total == 1 {
                format!(
                    "Could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines."
                )
            } else {
                format!(
                    "Could not find edits[{idx}] in {path}. The oldText must match exactly including all whitespace and newlines."
                )
            });
        };
        let occurrences = haystack.count_occurrences(&edit.old_text);
        if occurrences > 1 {
            return Err(if total == 1 {
                format!(
                    "Found {occurrences} occurrences of the text in {path}. The text must be unique. Please provide more context to make it unique."
                )
            } else {
                format!(
                    "Found {occurrences} occurrences of edits[{idx}] in {path}. Each oldText must be unique. Please provide more context to make it unique."
                )
            });
        }
        matched.push((idx, found, edit.new_text.as_str()));
    }
    matched.sort_by_key(|(_, found, _)| found.index);
    for pair in matched.windows(2) {
        let (prev_idx, prev, _) = pair[0];
        let (cur_idx, cur, _) = pair[1];
        if prev.index + prev.length > cur.index {
            return Err(format!(
                "edits[{prev_idx}] and edits[{cur_idx}] overlap in {path}. Merge them into one edit or target disjoint regions."
            ));
        }
    }
    let mut new = base.clone();
    for (_, found, new_text) in matched.iter().rev() {
        // In fuzzy space an index found in `base` may not fall on a char boundary of the
        // original; it always does in `base` itself, which is what we edit.
        new.replace_range(found.index..found.index + found.length, new_text);
    }
    if new == base {
        return Err(if total == 1 {
            format!(
                "No changes made to {path}. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."
            )
        } else {
            format!("No changes made to {path}. The replacements produced identical content.")
        });
    }
    Ok(AppliedEdits { base, new })
}

/// The numbered diff of `details.diff` and the first changed line of the new text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditDiff {
    /// Lines `+N text`, `-N text`, ` N text` and ellipsis lines, joined with `\n`.
    pub diff: String,
    /// New-file line number where the first change starts.
    pub first_changed_line: Option<usize>,
}

/// One run of the line diff: unchanged, removed or added lines (each with its `\n`).
struct Part<'a> {
    tag: ChangeTag,
    lines: Vec<&'a str>,
}

fn parts<'a>(old: &'a str, new: &'a str) -> Vec<Part<'a>> {
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .diff_lines(old, new);
    let mut out: Vec<Part<'a>> = Vec::new();
    for op in diff.ops() {
        for change in diff.iter_changes(op) {
            let tag = change.tag();
            let value = change.value();
            match out.last_mut() {
                Some(last) if last.tag == tag => last.lines.push(value),
                _ => out.push(Part {
                    tag,
                    lines: vec![value],
                }),
            }
        }
    }
    // jsdiff reports a replacement as removed-then-added; keep that order within a change run.
    let mut idx = 0;
    while idx + 1 < out.len() {
        if out[idx].tag == ChangeTag::Insert && out[idx + 1].tag == ChangeTag::Delete {
            out.swap(idx, idx + 1);
            idx = 0;
            continue;
        }
        idx += 1;
    }
    out
}

/// Builds the reference's numbered diff with 4 lines of context (`spec/tools.md` §5.5).
pub fn generate_diff(old: &str, new: &str) -> EditDiff {
    const CONTEXT: usize = 4;
    let parts = parts(old, new);
    let width = old
        .split('\n')
        .count()
        .max(new.split('\n').count())
        .to_string()
        .len();
    let mut out: Vec<String> = Vec::new();
    let mut old_line = 1usize;
    let mut new_line = 1usize;
    let mut last_was_change = false;
    let mut first_changed_line = None;
    let ellipsis = format!(" {} ...", " ".repeat(width));
    for (idx, part) in parts.iter().enumerate() {
        // A part's text split on `\n` without the trailing empty piece.
        let raw: Vec<&str> = part
            .lines
            .iter()
            .map(|line| line.strip_suffix('\n').unwrap_or(line))
            .collect();
        match part.tag {
            ChangeTag::Insert | ChangeTag::Delete => {
                if first_changed_line.is_none() {
                    first_changed_line = Some(new_line);
                }
                for line in raw {
                    if part.tag == ChangeTag::Insert {
                        out.push(format!("+{new_line:>width$} {line}"));
                        new_line += 1;
                    } else {
                        out.push(format!("-{old_line:>width$} {line}"));
                        old_line += 1;
                    }
                }
                last_was_change = true;
            }
            ChangeTag::Equal => {
                let next_is_change = parts
                    .get(idx + 1)
                    .is_some_and(|next| next.tag != ChangeTag::Equal);
                let context = |out: &mut Vec<String>,
                               line: &str,
                               old_line: &mut usize,
                               new_line: &mut usize| {
                    out.push(format!(" {:>width$} {line}", *old_line));
                    *old_line += 1;
                    *new_line += 1;
                };
                if last_was_change && next_is_change {
                    if raw.len() <= CONTEXT * 2 {
                        for line in &raw {
                            context(&mut out, line, &mut old_line, &mut new_line);
                        }
                    } else {
                        for line in &raw[..CONTEXT] {
                            context(&mut out, line, &mut old_line, &mut new_line);
                        }
                        out.push(ellipsis.clone());
                        let skipped = raw.len() - 2 * CONTEXT;
                        old_line += skipped;
                        new_line += skipped;
                        for line in &raw[raw.len() - CONTEXT..] {
                            context(&mut out, line, &mut old_line, &mut new_line);
                        }
                    }
                } else if last_was_change {
                    let shown = raw.len().min(CONTEXT);
                    for line in &raw[..shown] {
                        context(&mut out, line, &mut old_line, &mut new_line);
                    }
                    let skipped = raw.len() - shown;
                    if skipped > 0 {
                        out.push(ellipsis.clone());
                        old_line += skipped;
                        new_line += skipped;
                    }
                } else if next_is_change {
                    let skipped = raw.len().saturating_sub(CONTEXT);
                    if skipped > 0 {
                        out.push(ellipsis.clone());
                        old_line += skipped;
                        new_line += skipped;
                    }
                    for line in &raw[skipped..] {
                        context(&mut out, line, &mut old_line, &mut new_line);
                    }
                } else {
                    old_line += raw.len();
                    new_line += raw.len();
                }
                last_was_change = false;
            }
        }
    }
    EditDiff {
        diff: out.join("\n"),
        first_changed_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(old: &str, new: &str) -> Replacement {
        Replacement {
            old_text: old.to_owned(),
            new_text: new.to_owned(),
        }
    }

    #[test]
    fn line_endings_and_bom() {
        assert_eq!(detect_line_ending("a\r\nb\n"), "\r\n");
        assert_eq!(detect_line_ending("a\nb\r\n"), "\n");
        assert_eq!(detect_line_ending("abc"), "\n");
        assert_eq!(normalize_to_lf("a\r\nb\rc"), "a\nb\nc");
        assert_eq!(strip_bom("\u{feff}x"), ("\u{feff}", "x"));
    }

    #[test]
    fn fuzzy_form_strips_trailing_space_and_typography() {
        assert_eq!(
            normalize_for_fuzzy_match("say \u{201c}hi\u{201d}   \nx\u{2014}y\u{feff}\n\u{ff21}"),
            "say \"hi\"\nx-y\nA"
        );
        assert_eq!(normalize_for_fuzzy_match("a\u{85}"), "a\u{85}");
    }

    #[test]
    fn fuzzy_edit_rewrites_the_whole_file_in_fuzzy_form() {
        let applied = apply_edits(
            "say \u{201c}hi\u{201d}   \nkeep \u{2018}x\u{2019}  \n",
            &[edit("say \"hi\"", "said \"hi\"")],
            "f",
        )
        .unwrap();
        assert_eq!(applied.new, "said \"hi\"\nkeep 'x'\n");
    }

    #[test]
    fn errors_use_single_and_multi_wording() {
        let text = "a\nb\na\n";
        assert_eq!(
            apply_edits(text, &[edit("a", "x")], "f").unwrap_err(),
            "Found 2 occurrences of the text in f. The text must be unique. Please provide more context to make it unique."
        );
        assert_eq!(
            apply_edits(text, &[edit("b", "y"), edit("zz", "x")], "f").unwrap_err(),
            "Could not find edits[1] in f. The oldText must match exactly including all whitespace and newlines."
        );
        assert_eq!(
            apply_edits(text, &[edit("a\nb", "y"), edit("b\na", "x")], "f").unwrap_err(),
            "edits[0] and edits[1] overlap in f. Merge them into one edit or target disjoint regions."
        );
        assert_eq!(
            apply_edits(text, &[edit("b", "b")], "f").unwrap_err(),
            "No changes made to f. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."
        );
        assert_eq!(
            apply_edits(text, &[edit("b", "c"), edit("", "x")], "f").unwrap_err(),
            "edits[1].oldText must not be empty in f."
        );
    }

    #[test]
    fn diff_compares_lines_with_their_newline() {
        let diff = generate_diff("a\nb", "a\nb\nc");
        assert_eq!(diff.diff, " 1 a\n-2 b\n+2 b\n+3 c");
        assert_eq!(diff.first_changed_line, Some(2));
    }

    #[test]
    fn diff_layout_matches_the_reference_example() {
        let old: String = (1..=30).map(|n| format!("{n}\n")).collect();
        let applied = apply_edits(
            &old,
            &[edit("10\n", "ten\n"), edit("25\n", "25a\n25b\n")],
            "f",
        )
        .unwrap();
        let diff = generate_diff(&applied.base, &applied.new);
        let expected = [
            "    ...", "  6 6", "  7 7", "  8 8", "  9 9", "-10 10", "+10 ten", " 11 11", " 12 12",
            " 13 13", " 14 14", "    ...", " 21 21", " 22 22", " 23 23", " 24 24", "-25 25",
            "+25 25a", "+26 25b", " 26 26", " 27 27", " 28 28", " 29 29", "    ...",
        ]
        .join("\n");
        assert_eq!(diff.diff, expected);
        assert_eq!(diff.first_changed_line, Some(10));
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(96))]

            /// A unique line replaced through `apply_edits` gives the plain splice, and the
            /// diff removes exactly that line and adds exactly the replacement lines.
            #[test]
            fn unique_line_edits_splice_and_diff_exactly(
                lines in proptest::collection::vec("[abc]{1,3}", 1..40),
                pick in any::<proptest::sample::Index>(),
                replacement in proptest::collection::vec("[xyz]{1,3}", 1..4),
            ) {
                // A header line gives every picked line a preceding newline, so `\nX\n`
                // matches exactly where a whole line equals X.
                let text: String = std::iter::once("start\n".to_owned())
                    .chain(lines.iter().map(|line| format!("{line}\n")))
                    .collect();
                let idx = pick.index(lines.len());
                prop_assume!(lines.iter().filter(|line| **line == lines[idx]).count() == 1);
                let needle = format!("\n{}\n", lines[idx]);
                let new_block: String = replacement.iter().map(|line| format!("{line}\n")).collect();
                let new_text = format!("\n{new_block}");
                let edit = Replacement { old_text: needle.clone(), new_text: new_text.clone() };
                let applied = apply_edits(&text, &[edit], "p").unwrap();
                prop_assert_eq!(&applied.new, &text.replacen(needle.as_str(), &new_text, 1));
                let diff = generate_diff(&applied.base, &applied.new);
                let removed: Vec<&str> = diff.diff.lines().filter(|l| l.starts_with('-')).collect();
                let added: Vec<&str> = diff.diff.lines().filter(|l| l.starts_with('+')).collect();
                prop_assert_eq!(removed.len(), 1);
                let removed_ok = removed[0].ends_with(&format!(" {}", lines[idx]));
                prop_assert!(removed_ok, "{}", diff.diff);
                prop_assert_eq!(added.len(), replacement.len());
                prop_assert_eq!(diff.first_changed_line, Some(idx + 2));
            }
        }
    }
}
