//! Skills: parsing and validating a skill file, loading skill paths with the reference's
//! first-wins collision rule, and the data the system-prompt index and `/skill:` need
//! (spec/resources.md §3).
//!
//! A skill file's frontmatter gives `name` (default: the parent directory's name),
//! `description` (required: without it the skill is not loaded) and
//! `disable-model-invocation` (`true` hides the skill from the system prompt). Validation
//! problems are warnings, reported in the reference's words, and the skill still loads.
//!
//! Invariant: `parse_skill` is pure; `load_skills` reads the files it is given and the
//! directories it must scan, nothing else.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::session::resources::diagnostics::{Diagnostic, ResourceKind};
use crate::session::resources::frontmatter::parse_frontmatter;
use crate::session::resources::origin::ResourceOrigin;
use crate::session::resources::paths::canonical;
use crate::session::resources::scan::collect_skill_files;
use crate::session::resources::text::{is_blank, utf16_len};

/// The longest allowed skill name, in UTF-16 code units (Agent Skills spec).
pub const MAX_NAME_LENGTH: usize = 64;
/// The longest allowed description, in UTF-16 code units (Agent Skills spec).
pub const MAX_DESCRIPTION_LENGTH: usize = 1024;

/// A loaded skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// The skill's name (`/skill:<name>`).
    pub name: String,
    /// What the skill is for; shown in the system prompt and in completion.
    pub description: String,
    /// The skill file's absolute path.
    pub file_path: PathBuf,
    /// The directory relative references in the skill resolve against (the file's parent).
    pub base_dir: PathBuf,
    /// Where the skill was found.
    pub origin: ResourceOrigin,
    /// Hidden from the system prompt; still usable as `/skill:<name>`.
    pub disable_model_invocation: bool,
}

/// The result of parsing one skill file: the skill, unless it had to be skipped, and the
/// warnings about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillParse {
    /// The skill, or `None` when its description is missing or its frontmatter is invalid.
    pub skill: Option<Skill>,
    /// Validation warnings, in the reference's wording and order.
    pub warnings: Vec<String>,
}

/// Returns the reference's validation warnings for a skill name.
pub fn validate_name(name: &str, parent_dir_name: &str) -> Vec<String> {
    let mut res = Vec::new();
    if name != parent_dir_name {
        res.push(format!(
            "name \"{name}\" does not match parent directory \"{parent_dir_name}\""
        ));
    }
    let length = utf16_len(name);
    if length > MAX_NAME_LENGTH {
        res.push(format!(
            "name exceeds {MAX_NAME_LENGTH} characters ({length})"
        ));
    }
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        res.push(
            "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)"
                .to_string(),
        );
    }
    if name.starts_with('-') || name.ends_with('-') {
        res.push("name must not start or end with a hyphen".to_string());
    }
    if name.contains("--") {
        res.push("name must not contain consecutive hyphens".to_string());
    }
    res
}

/// Parses and validates the text of the skill file at `file_path`.
pub fn parse_skill(file_path: &Path, content: &str, origin: ResourceOrigin) -> SkillParse {
    let doc = match parse_frontmatter(content) {
        Ok(doc) => doc,
        Err(err) => {
            return SkillParse {
                skill: None,
                warnings: vec![err.to_string()],
            };
        }
    };
    let frontmatter = &doc.frontmatter;
    let base_dir = file_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let parent_dir_name = base_dir
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut warnings = Vec::new();

    // The reference calls `description.trim()`, which throws for a non-string value; the
    // skill is then skipped with that single warning.
    let description = match frontmatter.get("description") {
        None => None,
        Some(_) => match frontmatter.string("description") {
            Some(text) => Some(text.to_string()),
            None if !frontmatter.is_truthy("description") => None,
            None => {
                return SkillParse {
                    skill: None,
                    warnings: vec!["description must be a string".to_string()],
                };
            }
        },
    };
    match &description {
        None => warnings.push("description is required".to_string()),
        Some(text) if is_blank(text) => warnings.push("description is required".to_string()),
        Some(text) if utf16_len(text) > MAX_DESCRIPTION_LENGTH => warnings.push(format!(
            "description exceeds {MAX_DESCRIPTION_LENGTH} characters ({})",
            utf16_len(text)
        )),
        Some(_) => {}
    }

    // A truthy non-string name makes the reference's validation throw (`name.startsWith`):
    // the skill is skipped and its name warnings are lost.
    if frontmatter.is_truthy("name") && frontmatter.string("name").is_none() {
        warnings.push("name must be a string".to_string());
        return SkillParse {
            skill: None,
            warnings,
        };
    }
    let name = frontmatter
        .string("name")
        .filter(|name| !name.is_empty())
        .map_or_else(|| parent_dir_name.clone(), str::to_string);
    warnings.extend(validate_name(&name, &parent_dir_name));

    let skill = description
        .filter(|text| !is_blank(text))
        .map(|description| Skill {
            name,
            description,
            file_path: file_path.to_path_buf(),
            base_dir,
            origin,
            disable_model_invocation: frontmatter.is_true("disable-model-invocation"),
        });
    SkillParse { skill, warnings }
}

/// Reads and parses one skill file; problems become warnings on that file.
pub fn load_skill_file(
    file_path: &Path,
    origin: ResourceOrigin,
) -> (Option<Skill>, Vec<Diagnostic>) {
    let parsed = match std::fs::read(file_path) {
        Ok(bytes) => parse_skill(file_path, &String::from_utf8_lossy(&bytes), origin),
        Err(err) => SkillParse {
            skill: None,
            warnings: vec![err.to_string()],
        },
    };
    let diagnostics = parsed
        .warnings
        .into_iter()
        .map(|message| Diagnostic::warning(ResourceKind::Skill, file_path, message))
        .collect();
    (parsed.skill, diagnostics)
}

/// Skills keyed by name, first one wins; the same real file is taken once.
struct SkillSet {
    skills: Vec<Skill>,
    by_name: HashMap<String, usize>,
    real_paths: HashSet<PathBuf>,
    diagnostics: Vec<Diagnostic>,
    collisions: Vec<Diagnostic>,
}

impl SkillSet {
    fn add(&mut self, skills: Vec<Skill>, diagnostics: Vec<Diagnostic>) {
        self.diagnostics.extend(diagnostics);
        for skill in skills {
            let real_path = canonical(&skill.file_path);
            if self.real_paths.contains(&real_path) {
                continue;
            }
            if let Some(&winner) = self.by_name.get(&skill.name) {
                self.collisions.push(Diagnostic::collision(
                    ResourceKind::Skill,
                    &skill.name,
                    &self.skills[winner].file_path,
                    &skill.file_path,
                ));
            } else {
                self.by_name.insert(skill.name.clone(), self.skills.len());
                self.skills.push(skill);
                self.real_paths.insert(real_path);
            }
        }
    }
}

/// Loads skills from absolute paths in precedence order (the reference's `loadSkills` without
/// defaults): a directory is scanned (root `*.md` files included), a `*.md` file is loaded, a
/// missing path or another file is a warning. Returns the skills (first name wins) and the
/// diagnostics, collisions last.
pub fn load_skills(paths: &[(PathBuf, ResourceOrigin)]) -> (Vec<Skill>, Vec<Diagnostic>) {
    let mut set = SkillSet {
        skills: Vec::new(),
        by_name: HashMap::new(),
        real_paths: HashSet::new(),
        diagnostics: Vec::new(),
        collisions: Vec::new(),
    };
    for (path, origin) in paths {
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                set.diagnostics.push(Diagnostic::warning(
                    ResourceKind::Skill,
                    path,
                    "skill path does not exist",
                ));
                continue;
            }
            Err(err) => {
                set.diagnostics.push(Diagnostic::warning(
                    ResourceKind::Skill,
                    path,
                    err.to_string(),
                ));
                continue;
            }
        };
        if meta.is_dir() {
            let mut skills = Vec::new();
            let mut diagnostics = Vec::new();
            for file in collect_skill_files(path, true) {
                let (skill, file_diagnostics) = load_skill_file(&file, *origin);
                skills.extend(skill);
                diagnostics.extend(file_diagnostics);
            }
            set.add(skills, diagnostics);
        } else if meta.is_file() && path.to_string_lossy().ends_with(".md") {
            let (skill, diagnostics) = load_skill_file(path, *origin);
            match skill {
                Some(skill) => set.add(vec![skill], diagnostics),
                None => set.diagnostics.extend(diagnostics),
            }
        } else {
            set.diagnostics.push(Diagnostic::warning(
                ResourceKind::Skill,
                path,
                "skill path is not a markdown file",
            ));
        }
    }
    let mut diagnostics = set.diagnostics;
    diagnostics.extend(set.collisions);
    (set.skills, diagnostics)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(path: &str, text: &str) -> SkillParse {
        parse_skill(Path::new(path), text, ResourceOrigin::UserAuto)
    }

    #[test]
    fn valid_skill_loads_without_warnings() {
        let res = parse(
            "/a/skills/pdf-tools/SKILL.md",
            "---\nname: pdf-tools\ndescription: Extract text.\n---\nBody",
        );
        assert!(res.warnings.is_empty());
        let skill = res.skill.unwrap();
        assert_eq!(skill.name, "pdf-tools");
        assert_eq!(skill.base_dir, PathBuf::from("/a/skills/pdf-tools"));
        assert!(!skill.disable_model_invocation);
    }

    #[test]
    fn name_defaults_to_parent_directory() {
        let res = parse("/a/skills/notes.md", "---\ndescription: d\n---\n");
        assert_eq!(res.skill.unwrap().name, "skills");
        assert!(res.warnings.is_empty());
    }

    #[test]
    fn bad_names_warn_but_load() {
        let res = parse(
            "/a/skills/x/SKILL.md",
            "---\nname: -Bad--Name-\ndescription: d\n---\n",
        );
        assert_eq!(
            res.warnings,
            vec![
                "name \"-Bad--Name-\" does not match parent directory \"x\"",
                "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)",
                "name must not start or end with a hyphen",
                "name must not contain consecutive hyphens",
            ]
        );
        assert!(res.skill.is_some());
    }

    #[test]
    fn long_name_and_description_warn() {
        let name = "a".repeat(65);
        let description = "d".repeat(1025);
        let res = parse(
            &format!("/s/{name}/SKILL.md"),
            &format!("---\nname: {name}\ndescription: {description}\n---\n"),
        );
        assert_eq!(
            res.warnings,
            vec![
                "description exceeds 1024 characters (1025)".to_string(),
                "name exceeds 64 characters (65)".to_string(),
            ]
        );
        assert!(res.skill.is_some());
    }

    #[test]
    fn missing_or_blank_description_skips_the_skill() {
        for text in [
            "---\nname: x\n---\n",
            "---\nname: x\ndescription: '  '\n---\n",
            "no frontmatter",
        ] {
            let res = parse("/s/x/SKILL.md", text);
            assert!(res.skill.is_none(), "{text}");
            assert_eq!(res.warnings, vec!["description is required"], "{text}");
        }
    }

    #[test]
    fn non_string_name_skips_the_skill() {
        let res = parse("/s/x/SKILL.md", "---\nname: 12\ndescription: d\n---\n");
        assert!(res.skill.is_none());
        assert_eq!(res.warnings, vec!["name must be a string"]);
        let falsy = parse("/s/x/SKILL.md", "---\nname: 0\ndescription: d\n---\n");
        assert_eq!(falsy.skill.unwrap().name, "x");
    }

    #[test]
    fn non_string_description_skips_the_skill() {
        let res = parse("/s/x/SKILL.md", "---\ndescription: 42\n---\n");
        assert!(res.skill.is_none());
        assert_eq!(res.warnings, vec!["description must be a string"]);
    }

    #[test]
    fn invalid_yaml_skips_the_skill_with_one_warning() {
        let res = parse("/s/x/SKILL.md", "---\ndescription: [x\n---\n");
        assert!(res.skill.is_none());
        assert_eq!(res.warnings.len(), 1);
        assert!(res.warnings[0].starts_with("invalid YAML frontmatter"));
    }

    #[test]
    fn disable_model_invocation_needs_boolean_true() {
        let hidden = parse(
            "/s/x/SKILL.md",
            "---\ndescription: d\ndisable-model-invocation: true\n---\n",
        );
        assert!(hidden.skill.unwrap().disable_model_invocation);
        let quoted = parse(
            "/s/x/SKILL.md",
            "---\ndescription: d\ndisable-model-invocation: 'true'\n---\n",
        );
        assert!(!quoted.skill.unwrap().disable_model_invocation);
    }
}
