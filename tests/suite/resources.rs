//! Resources against the reference: the assembled system prompt, the loaded skills and
//! templates, their diagnostics and the input expansions for the workspace in
//! `fixtures/resources/tree/` (nested AGENTS.md/CLAUDE.md, SYSTEM.md, APPEND_SYSTEM.md, skills
//! valid/invalid/colliding/hidden/ignored/symlinked, templates, settings entries), plus the
//! template-argument table.
//!
//! The golden files in `fixtures/resources/golden/` were produced by the reference itself:
//! `node fixtures/resources/oracle.mjs` runs pi 0.73.1's `DefaultResourceLoader`,
//! `AgentSession._rebuildSystemPrompt`, `_expandSkillCommand`, `expandPromptTemplate`,
//! `parseCommandArgs` and `substituteArgs` on the same tree and scenarios
//! (`scenarios.json`, `template-args.cases.json`); see `fixtures/resources/README.md`.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use pi::session::resources::templates::{parse_command_args, substitute_args};
use pi::session::resources::{
    Diagnostic, HarnessDocs, ResourceConfig, ResourceKind, Resources, ScopeSettings, Severity,
    ToolPromptInfo,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("resources")
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The fixture tree copied into a temporary root, with `setup.json` applied.
struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Workspace {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap().join("ws");
        copy_tree(&fixtures().join("tree"), &root);
        let setup = read_json(&fixtures().join("setup.json"));
        for dir in setup["mkdir"].as_array().unwrap() {
            std::fs::create_dir_all(root.join(dir.as_str().unwrap())).unwrap();
        }
        for pair in setup["symlink"].as_array().unwrap() {
            let link = root.join(pair[0].as_str().unwrap());
            std::os::unix::fs::symlink(pair[1].as_str().unwrap(), link).unwrap();
        }
        Self { _dir: dir, root }
    }

    fn placeholder(&self, text: &str) -> String {
        text.replace(&self.root.to_string_lossy().into_owned(), "<ROOT>")
    }

    fn path_text(&self, path: &Path) -> String {
        self.placeholder(&path.to_string_lossy())
    }

    fn settings(&self, path: &Path) -> ScopeSettings {
        match std::fs::read(path) {
            Ok(bytes) => {
                ScopeSettings::from_settings_json(&serde_json::from_slice(&bytes).unwrap())
            }
            Err(_) => ScopeSettings::default(),
        }
    }

    /// The configuration a scenario's command line and the tree's settings files give.
    fn config(&self, scenario: &Value) -> ResourceConfig {
        let cwd = self.root.join(scenario["cwd"].as_str().unwrap());
        let agent_dir = self.root.join("agent");
        let home = self.root.join("home");
        let mut config = ResourceConfig::new(&cwd, &agent_dir, Some(&home));
        let options = &scenario["options"];
        let strings = |value: &Value| -> Vec<String> {
            value
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .map(|i| i.as_str().unwrap().to_string())
                        .collect()
                })
                .unwrap_or_default()
        };
        config.system_prompt = options["systemPrompt"].as_str().map(str::to_string);
        config.append_system_prompt = options.get("appendSystemPrompt").map(&strings);
        config.no_context_files = options["noContextFiles"].as_bool().unwrap_or(false);
        config.skill_paths = strings(&options["skills"]);
        config.no_skills = options["noSkills"].as_bool().unwrap_or(false);
        config.prompt_template_paths = strings(&options["promptTemplates"]);
        config.no_prompt_templates = options["noPromptTemplates"].as_bool().unwrap_or(false);
        config.user_settings = self.settings(&agent_dir.join("settings.json"));
        config.project_settings = self.settings(&cwd.join(".pi").join("settings.json"));
        config
    }
}

fn tools_from(golden: &Value) -> Vec<ToolPromptInfo> {
    golden["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| ToolPromptInfo {
            name: tool["name"].as_str().unwrap().to_string(),
            snippet: tool["snippet"].as_str().map(str::to_string),
            guidelines: tool["guidelines"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g.as_str().unwrap().to_string())
                .collect(),
        })
        .collect()
}

fn diagnostic_json(ws: &Workspace, diagnostic: &Diagnostic) -> Value {
    let path = ws.path_text(&diagnostic.path);
    match &diagnostic.severity {
        Severity::Warning => {
            json!({"type": "warning", "message": diagnostic.message, "path": path})
        }
        Severity::Error => json!({"type": "error", "message": diagnostic.message, "path": path}),
        Severity::Collision { winner, loser, .. } => json!({
            "type": "collision",
            "message": diagnostic.message,
            "path": path,
            "winnerPath": ws.path_text(winner),
            "loserPath": ws.path_text(loser),
        }),
    }
}

/// YAML parser messages differ between the two YAML libraries; such warnings are compared
/// by type and path, with our message's prefix checked.
fn without_yaml_message(mut diagnostic: Value) -> Value {
    let message = diagnostic["message"].as_str().unwrap_or("").to_string();
    let is_yaml = message.starts_with("invalid YAML frontmatter")
        || message.contains(" at line ")
        || message.contains("Map keys must be unique");
    if is_yaml {
        diagnostic["message"] = json!("<yaml error>");
    }
    diagnostic
}

fn check_scenario(name: &str) {
    let golden = read_json(&fixtures().join("golden").join(format!("{name}.json")));
    let scenarios = read_json(&fixtures().join("scenarios.json"));
    let scenario = scenarios
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap()
        .clone();
    let ws = Workspace::new();
    let resources = Resources::load(ws.config(&scenario));
    let date = NaiveDate::parse_from_str(scenario["date"].as_str().unwrap(), "%Y-%m-%d").unwrap();
    let docs = HarnessDocs::in_dir(Path::new("/opt/pi-package"));
    let tools = tools_from(&golden);

    let prompt = ws.placeholder(&resources.system_prompt(&tools, date, &docs));
    assert_eq!(
        prompt,
        golden["systemPrompt"].as_str().unwrap(),
        "system prompt of {name}"
    );

    let context_files: Vec<String> = resources
        .context_files()
        .iter()
        .map(|file| ws.path_text(&file.path))
        .collect();
    assert_eq!(
        json!(context_files),
        golden["contextFiles"],
        "context files of {name}"
    );

    let skills: Vec<Value> = resources
        .skills()
        .iter()
        .map(|skill| {
            json!({
                "name": skill.name,
                "description": skill.description,
                "filePath": ws.path_text(&skill.file_path),
                "baseDir": ws.path_text(&skill.base_dir),
                "disableModelInvocation": skill.disable_model_invocation,
            })
        })
        .collect();
    assert_eq!(json!(skills), golden["skills"], "skills of {name}");

    let prompts: Vec<Value> = resources
        .templates()
        .iter()
        .map(|template| {
            json!({
                "name": template.name,
                "description": template.description,
                "argumentHint": template.argument_hint,
                "content": template.content,
                "filePath": ws.path_text(&template.file_path),
            })
        })
        .collect();
    assert_eq!(json!(prompts), golden["prompts"], "templates of {name}");

    let of_kind = |kind: ResourceKind| -> Vec<Value> {
        resources
            .diagnostics()
            .iter()
            .filter(|d| d.resource == kind)
            .map(|d| without_yaml_message(diagnostic_json(&ws, d)))
            .collect()
    };
    let expected_skill_diagnostics: Vec<Value> = golden["skillDiagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .cloned()
        .map(without_yaml_message)
        .collect();
    assert_eq!(
        of_kind(ResourceKind::Skill),
        expected_skill_diagnostics,
        "skill diagnostics of {name}"
    );

    // The reference drops a template whose frontmatter does not parse without a word; we
    // report it. Everything else must be what the reference reports.
    let (extra, template_diagnostics): (Vec<Value>, Vec<Value>) =
        of_kind(ResourceKind::PromptTemplate)
            .into_iter()
            .partition(|d| d["message"] == "<yaml error>");
    assert_eq!(
        template_diagnostics,
        golden["promptDiagnostics"].as_array().unwrap().clone(),
        "template diagnostics of {name}"
    );
    let discovers_user_prompts = !scenario["options"]["noPromptTemplates"]
        .as_bool()
        .unwrap_or(false);
    let expected_extra: Vec<Value> = if discovers_user_prompts {
        vec![
            json!({"type": "warning", "message": "<yaml error>", "path": "<ROOT>/agent/prompts/broken.md"}),
        ]
    } else {
        Vec::new()
    };
    assert_eq!(extra, expected_extra, "template warnings of {name}");
    assert_eq!(of_kind(ResourceKind::ContextFile), Vec::<Value>::new());
    assert_eq!(of_kind(ResourceKind::SystemPrompt), Vec::<Value>::new());

    for expansion in golden["expansions"].as_array().unwrap() {
        let input = expansion["input"].as_str().unwrap();
        let expanded = resources.expand_input(input);
        assert_eq!(
            ws.placeholder(&expanded.text),
            expansion["output"].as_str().unwrap(),
            "expansion of {input:?}"
        );
        let errors: Vec<String> = expanded
            .error
            .iter()
            .map(|e| ws.path_text(&e.path))
            .collect();
        assert_eq!(
            json!(errors),
            expansion["errors"],
            "expansion errors of {input:?}"
        );
    }
}

#[test]
fn system_prompt_and_resources_match_reference_default_workspace() {
    check_scenario("default");
}

#[test]
fn system_prompt_matches_reference_with_all_tools_and_repeated_append() {
    check_scenario("all-tools");
}

#[test]
fn system_prompt_matches_reference_with_project_system_md() {
    check_scenario("custom-system-md");
}

#[test]
fn system_prompt_matches_reference_with_cli_system_prompt_and_no_read_tool() {
    check_scenario("custom-no-read");
}

#[test]
fn system_prompt_matches_reference_without_read_tool_or_context_files() {
    check_scenario("no-read-no-context");
}

#[test]
fn no_skills_and_no_prompt_templates_keep_cli_paths_like_reference() {
    check_scenario("no-discovery");
}

#[test]
fn system_prompt_file_and_cwd_in_agent_dir_match_reference() {
    check_scenario("cwd-is-agent-dir");
}

#[test]
fn every_scenario_has_a_golden_file_and_a_test() {
    let scenarios = read_json(&fixtures().join("scenarios.json"));
    let names: Vec<&str> = scenarios
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "default",
            "all-tools",
            "custom-system-md",
            "custom-no-read",
            "no-read-no-context",
            "no-discovery",
            "cwd-is-agent-dir"
        ]
    );
    for name in names {
        assert!(
            fixtures()
                .join("golden")
                .join(format!("{name}.json"))
                .exists(),
            "{name}"
        );
    }
}

#[test]
fn template_arguments_match_reference_table() {
    let table = read_json(&fixtures().join("golden").join("template-args.json"));
    let cases = table.as_array().unwrap();
    assert!(cases.len() >= 40);
    for case in cases {
        let args = case["args"].as_str().unwrap();
        let template = case["template"].as_str().unwrap();
        let parsed = parse_command_args(args);
        assert_eq!(json!(parsed), case["parsed"], "arguments of {args:?}");
        assert_eq!(
            substitute_args(template, &parsed),
            case["output"].as_str().unwrap(),
            "{template:?} with {args:?}"
        );
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A bare workspace: `<root>/agent`, `<root>/home`, `<root>/w` with a `.git` so the
/// `.agents/skills` walk stays inside.
fn bare() -> (tempfile::TempDir, ResourceConfig) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let cwd = root.join("w");
    std::fs::create_dir_all(cwd.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("agent")).unwrap();
    std::fs::create_dir_all(root.join("home")).unwrap();
    let config = ResourceConfig::new(&cwd, &root.join("agent"), Some(&root.join("home")));
    (dir, config)
}

#[test]
fn reload_picks_up_added_and_removed_resources() {
    let (_dir, config) = bare();
    let skills_dir = config.agent_dir.join("skills");
    write(
        &skills_dir.join("first/SKILL.md"),
        "---\ndescription: First.\n---\nOne.",
    );
    let mut resources = Resources::load(config.clone());
    assert_eq!(resources.skills().len(), 1);
    assert!(resources.templates().is_empty());

    write(
        &skills_dir.join("second/SKILL.md"),
        "---\ndescription: Second.\n---\nTwo.",
    );
    std::fs::remove_dir_all(skills_dir.join("first")).unwrap();
    write(&config.cwd.join(".pi/prompts/t.md"), "Do $1");
    write(&config.cwd.join("AGENTS.md"), "Rules");
    resources.reload();
    let names: Vec<&str> = resources.skills().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["second"]);
    assert_eq!(resources.templates()[0].name, "t");
    // Only files inside the temporary root count: the walk goes on up to `/`.
    let root = config.agent_dir.parent().unwrap();
    let inside = |resources: &Resources| {
        resources
            .context_files()
            .iter()
            .filter(|f| f.path.starts_with(root))
            .count()
    };
    assert_eq!(inside(&resources), 1);
    assert_eq!(resources.expand_input("/t x").text, "Do x");
}

#[test]
fn unreadable_context_file_is_reported_and_the_next_name_is_used() {
    let (_dir, config) = bare();
    // A directory named AGENTS.md exists but cannot be read as a file.
    std::fs::create_dir_all(config.cwd.join("AGENTS.md")).unwrap();
    write(&config.cwd.join("CLAUDE.md"), "Claude rules");
    let resources = Resources::load(config.clone());
    let root = config.agent_dir.parent().unwrap();
    let files: Vec<&Path> = resources
        .context_files()
        .iter()
        .map(|f| f.path.as_path())
        .filter(|path| path.starts_with(root))
        .collect();
    assert_eq!(files, [config.cwd.join("CLAUDE.md").as_path()]);
    let diagnostics = resources.diagnostics();
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0].resource, ResourceKind::ContextFile);
    assert_eq!(diagnostics[0].severity, Severity::Warning);
    assert_eq!(diagnostics[0].path, config.cwd.join("AGENTS.md"));
}

#[test]
fn skill_file_removed_after_loading_leaves_the_input_unchanged_and_reports() {
    let (_dir, config) = bare();
    let file = config.agent_dir.join("skills/gone/SKILL.md");
    write(&file, "---\ndescription: Gone soon.\n---\nBody.");
    let resources = Resources::load(config);
    std::fs::remove_file(&file).unwrap();
    let expanded = resources.expand_input("/skill:gone now");
    assert_eq!(expanded.text, "/skill:gone now");
    let error = expanded.error.unwrap();
    assert_eq!(error.path, file);
    assert!(!error.message.is_empty());
}

#[test]
fn skill_file_is_read_at_expansion_time() {
    let (_dir, config) = bare();
    let file = config.agent_dir.join("skills/live/SKILL.md");
    write(&file, "---\ndescription: Live.\n---\nOld body.");
    let resources = Resources::load(config);
    write(&file, "---\ndescription: Live.\n---\nNew body.");
    let expanded = resources.expand_input("/skill:live");
    assert!(
        expanded.text.contains("\nNew body.\n</skill>"),
        "{}",
        expanded.text
    );
    assert_eq!(expanded.error, None);
}

#[test]
fn commands_list_templates_then_skills_with_descriptions() {
    let (_dir, config) = bare();
    write(
        &config.agent_dir.join("prompts/review.md"),
        "---\ndescription: Review code\nargument-hint: <file>\n---\nReview $1",
    );
    write(
        &config.agent_dir.join("prompts/plain.md"),
        "First line\nmore",
    );
    write(
        &config.agent_dir.join("skills/pdf/SKILL.md"),
        "---\ndescription: PDFs.\ndisable-model-invocation: true\n---\nBody",
    );
    let resources = Resources::load(config);
    let commands: Vec<(String, String, Option<String>)> = resources
        .commands()
        .into_iter()
        .map(|c| (c.name, c.description, c.argument_hint))
        .collect();
    assert_eq!(
        commands,
        [
            ("plain".to_string(), "First line".to_string(), None),
            (
                "review".to_string(),
                "Review code".to_string(),
                Some("<file>".to_string())
            ),
            ("skill:pdf".to_string(), "PDFs.".to_string(), None),
        ]
    );
}

#[test]
fn settings_entries_accept_the_legacy_skills_object() {
    let settings = json!({
        "skills": {"customDirectories": ["~/a", 3], "enableSkillCommands": false},
        "prompts": ["p", null]
    });
    let parsed = ScopeSettings::from_settings_json(&settings);
    assert_eq!(parsed.skills, ["~/a"]);
    assert_eq!(parsed.prompts, ["p"]);
    assert_eq!(
        ScopeSettings::from_settings_json(&json!({"skills": "not a list"})),
        ScopeSettings::default()
    );
}

#[test]
fn missing_cli_template_path_is_an_error_and_missing_skill_path_a_warning() {
    let (_dir, mut config) = bare();
    config.skill_paths = vec!["nope-skill".to_string()];
    config.prompt_template_paths = vec!["nope.md".to_string()];
    let resources = Resources::load(config.clone());
    let shown: Vec<String> = resources
        .diagnostics()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        shown,
        [
            format!(
                "{}: skill path does not exist",
                config.cwd.join("nope-skill").display()
            ),
            format!(
                "{}: Prompt template path does not exist",
                config.cwd.join("nope.md").display()
            ),
        ]
    );
}
