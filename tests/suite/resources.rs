//! Resources against the reference, for the workspace in `fixtures/resources/tree/` (nested
//! AGENTS.md/CLAUDE.md, SYSTEM.md, APPEND_SYSTEM.md, skills valid/invalid/colliding/hidden/
//! ignored/symlinked, templates, settings entries).
//!
//! * The system prompt against 1.6.0 (`fixtures/resources/golden16/`, produced by
//!   `fixtures/resources/oracle16.mjs` running 1.6.0's `DefaultResourceLoader`,
//!   `AgentSession._rebuildSystemPrompt`, `buildSystemPromptSections`/`State`/`buildSystemPrompt`,
//!   `diffSystemPromptSections` and pi-ai's `toToolDeclaration` on the scenarios of
//!   `scenarios16.json`): the prompt options, the named sections (byte for byte, in order), the
//!   prompt state, the rendered text, the patches between scenarios and the active tools'
//!   declarations. The documentation paths are the reference's `/opt/pi-package`; pi's own are
//!   checked separately.
//! * The loaded skills and templates, their diagnostics, the input expansions and the
//!   template-argument table against 0.73.1 (`fixtures/resources/golden/`, produced by
//!   `fixtures/resources/oracle.mjs`; scenarios `scenarios.json`, `template-args.cases.json`),
//!   which pi still follows there.
//!
//! See `fixtures/resources/README.md`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pi::session::resources::system_prompt::{
    build_system_prompt, build_system_prompt_sections, build_system_prompt_state,
    diff_system_prompt_sections, render_system_prompt,
};
use pi::session::resources::templates::{parse_command_args, substitute_args};
use pi::session::resources::{
    Diagnostic, HarnessDocs, ResourceConfig, ResourceKind, Resources, ScopeSettings, Severity,
    SystemPromptOptions, ToolPromptInfo,
};
use pi::session::tools::read::ReadConfig;
use pi::session::tools::shell::ShellConfig;
use pi::session::tools::workspace::Workspace as ToolWorkspace;
use pi::session::tools::{ToolSelection, ToolSet, ToolsConfig, builtin_tools};
use pi::support::ids::IdSource;
use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};

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

    /// Applies a 1.6.0 scenario's own `mkdir` and `files` entries.
    fn apply(&self, scenario: &Value) {
        for dir in scenario["mkdir"].as_array().into_iter().flatten() {
            std::fs::create_dir_all(self.root.join(dir.as_str().unwrap())).unwrap();
        }
        for pair in scenario["files"].as_array().into_iter().flatten() {
            let path = self.root.join(pair[0].as_str().unwrap());
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, pair[1].as_str().unwrap()).unwrap();
        }
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
        config.project_trusted = options["projectTrusted"].as_bool().unwrap_or(true);
        config.user_settings = self.settings(&agent_dir.join("settings.json"));
        config.project_settings = self.settings(&cwd.join(".pi").join("settings.json"));
        config
    }
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
fn resources_match_reference_default_workspace() {
    check_scenario("default");
}

#[test]
fn resources_match_reference_with_repeated_append() {
    check_scenario("all-tools");
}

#[test]
fn resources_match_reference_with_project_system_md() {
    check_scenario("custom-system-md");
}

#[test]
fn resources_match_reference_with_cli_system_prompt() {
    check_scenario("custom-no-read");
}

#[test]
fn resources_match_reference_without_context_files() {
    check_scenario("no-read-no-context");
}

#[test]
fn no_skills_and_no_prompt_templates_keep_cli_paths_like_reference() {
    check_scenario("no-discovery");
}

#[test]
fn resources_match_reference_with_cwd_in_agent_dir() {
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
    // A regular file whose read fails (even for root): reported, the next name is tried.
    std::os::unix::fs::symlink("/proc/self/mem", config.cwd.join("AGENTS.override.md")).unwrap();
    // A directory named AGENTS.md is passed over without a word (1.6.0).
    std::fs::create_dir_all(config.cwd.join("AGENTS.md")).unwrap();
    write(&config.cwd.join("CLAUDE.md"), "\u{feff}Claude rules");
    let resources = Resources::load(config.clone());
    let root = config.agent_dir.parent().unwrap();
    let files: Vec<(&Path, &str)> = resources
        .context_files()
        .iter()
        .map(|f| (f.path.as_path(), f.content.as_str()))
        .filter(|(path, _)| path.starts_with(root))
        .collect();
    assert_eq!(
        files,
        [(config.cwd.join("CLAUDE.md").as_path(), "Claude rules")]
    );
    let diagnostics = resources.diagnostics();
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0].resource, ResourceKind::ContextFile);
    assert_eq!(diagnostics[0].severity, Severity::Warning);
    assert_eq!(diagnostics[0].path, config.cwd.join("AGENTS.override.md"));
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

// ---------------------------------------------------------------------------------------------
// The 1.6.0 system prompt (golden16/, oracle16.mjs)

/// The reference's package directory in the golden files (`PI_PACKAGE_DIR=/opt/pi-package`).
const REFERENCE_PACKAGE_DIR: &str = "/opt/pi-package";

fn strings_of(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|item| item.as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn scenario16(name: &str) -> Value {
    let scenarios = read_json(&fixtures().join("scenarios16.json"));
    scenarios
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
        .clone()
}

fn golden16(name: &str) -> Value {
    read_json(&fixtures().join("golden16").join(format!("{name}.json")))
}

/// pi's seven built-ins (never executed here) with `active` as the active list.
fn builtin_tool_set(active: &[String]) -> ToolSet {
    let temp = std::env::temp_dir();
    let config = ToolsConfig {
        workspace: ToolWorkspace::default(),
        read: ReadConfig {
            auto_resize_images: true,
        },
        shell: ShellConfig {
            shell_path: None,
            command_prefix: None,
            env: vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))],
            bin_dir: None,
            temp_dir: temp,
            ids: Arc::new(IdSource::seeded(1)),
        },
    };
    let mut set = ToolSet::new(builtin_tools(&config), Vec::new(), &ToolSelection::Default);
    set.set_active(active);
    set
}

/// The prompt contributions of the active tools, from their definitions (as the session
/// passes them).
fn prompt_infos(tools: &ToolSet) -> Vec<ToolPromptInfo> {
    tools
        .active_tools()
        .iter()
        .map(|tool| ToolPromptInfo::of_definition(tool.definition()))
        .collect()
}

/// A 1.6.0 scenario built by pi: its workspace, prompt options and tools.
struct Built16 {
    ws: Workspace,
    options: SystemPromptOptions,
    tools: ToolSet,
}

/// Loads a 1.6.0 scenario's resources and builds pi's prompt options for its tools, with what
/// the scenario's `before_agent_start` handler does applied (as the oracle does).
fn build16(name: &str, docs: &HarnessDocs) -> Built16 {
    let scenario = scenario16(name);
    let ws = Workspace::new();
    ws.apply(&scenario);
    let mut config = ws.config(&scenario);
    config.no_prompt_templates = true;
    let resources = Resources::load(config);
    let tools = builtin_tool_set(&strings_of(&scenario["tools"]));
    let cwd = ws.root.join(scenario["cwd"].as_str().unwrap());
    let mut options = resources.system_prompt_options(&prompt_infos(&tools), &cwd, docs);
    options.hidden_tools = strings_of(&scenario["hiddenTools"]);
    let extension = &scenario["extension"];
    options
        .prompt_guidelines
        .extend(strings_of(&extension["promptGuidelines"]));
    for (name, content) in extension["sections"].as_object().into_iter().flatten() {
        options
            .sections
            .push((name.clone(), content.as_str().unwrap().to_owned()));
    }
    options.force_system_prompt = extension["forceSystemPrompt"].as_str().map(str::to_owned);
    Built16 { ws, options, tools }
}

/// The options as the oracle dumps them. pi keeps snippets and guidelines of the selected
/// tools only; the reference's maps hold every registered tool's (only the selected ones are
/// ever read), so the golden maps are compared restricted to the selected tools.
fn options_json(built: &Built16) -> Value {
    let ws = &built.ws;
    let o = &built.options;
    json!({
        "customPrompt": o.custom_prompt,
        "forceSystemPrompt": o.force_system_prompt,
        "selectedTools": o.selected_tools,
        "hiddenTools": o.hidden_tools,
        "toolSnippets": o.tool_snippets,
        "toolGuidelines": o.tool_guidelines,
        "promptGuidelines": o.prompt_guidelines,
        "appendSystemPrompt": o.append_system_prompt,
        "sections": o.sections.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<Map<String, Value>>(),
        "cwd": ws.path_text(&o.cwd),
        "contextFiles": o.context_files.iter().map(|file| json!({
            "path": ws.path_text(&file.path),
            "content": file.content,
        })).collect::<Vec<_>>(),
        "skills": o.skills.iter().map(|skill| json!({
            "name": skill.name,
            "description": skill.description,
            "filePath": ws.path_text(&skill.file_path),
            "disableModelInvocation": skill.disable_model_invocation,
        })).collect::<Vec<_>>(),
    })
}

fn expected_options(golden: &Value) -> Value {
    let mut options = golden["options"].clone();
    let selected = strings_of(&options["selectedTools"]);
    for key in ["toolSnippets", "toolGuidelines"] {
        if let Some(map) = options[key].as_object_mut() {
            map.retain(|name, _| selected.contains(name));
        }
    }
    options
}

/// The sections with the temporary root written as `<ROOT>`.
fn placeholder_sections(ws: &Workspace, sections: &Map<String, Value>) -> Map<String, Value> {
    sections
        .iter()
        .map(|(name, text)| (name.clone(), json!(ws.placeholder(text.as_str().unwrap()))))
        .collect()
}

/// JSON text, keys in their order (golden values keep the file's order).
fn text(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).unwrap()
}

fn check16(name: &str) {
    let golden = golden16(name);
    let built = build16(name, &HarnessDocs::in_dir(Path::new(REFERENCE_PACKAGE_DIR)));
    let ws = &built.ws;
    assert_eq!(
        options_json(&built),
        expected_options(&golden),
        "prompt options of {name}"
    );
    match build_system_prompt_sections(&built.options) {
        Err(err) => assert_eq!(json!(err.to_string()), golden["error"], "error of {name}"),
        Ok(sections) => {
            assert!(golden["error"].is_null(), "{name} should fail");
            let sections = placeholder_sections(ws, &sections);
            assert_eq!(
                text(&sections),
                text(&golden["sections"]),
                "sections of {name}"
            );

            let state = build_system_prompt_state(&built.options).unwrap();
            let mut state_json = Map::new();
            state_json.insert("content".to_owned(), json!(state.content));
            if let Some(sections) = &state.sections {
                state_json.insert(
                    "sections".to_owned(),
                    Value::Object(placeholder_sections(ws, sections)),
                );
            }
            assert_eq!(text(&state_json), text(&golden["state"]), "state of {name}");

            let prompt = build_system_prompt(&built.options).unwrap();
            assert_eq!(
                ws.placeholder(&prompt),
                golden["systemPrompt"].as_str().unwrap(),
                "rendered prompt of {name}"
            );
            let rendered = render_system_prompt(
                &state.content,
                state.sections.as_ref().unwrap_or(&Map::new()),
            );
            assert_eq!(rendered, prompt, "render of {name}");
        }
    }
    // `toolsAdded` of the system message (and the request's tools): byte for byte.
    assert_eq!(
        serde_json::to_string(&built.tools.active_declarations()).unwrap(),
        serde_json::to_string(&golden["toolsAdded"]).unwrap(),
        "declarations of {name}"
    );
}

#[test]
fn prompt_sections_match_1_6_0_default() {
    check16("default");
}

#[test]
fn prompt_sections_match_1_6_0_all_tools_and_repeated_append() {
    check16("all-tools");
}

#[test]
fn prompt_sections_match_1_6_0_project_system_md() {
    check16("custom-system-md");
}

#[test]
fn prompt_sections_match_1_6_0_untrusted_project() {
    check16("untrusted-project");
}

#[test]
fn prompt_sections_match_1_6_0_cli_system_prompt_with_bash_reader() {
    check16("custom-no-read");
}

#[test]
fn prompt_sections_match_1_6_0_only_bash_without_context_files() {
    check16("only-bash-no-context");
}

#[test]
fn prompt_sections_match_1_6_0_no_tools() {
    check16("no-tools");
}

#[test]
fn prompt_sections_match_1_6_0_explorer_tools_only() {
    check16("explorers-only");
}

#[test]
fn prompt_sections_match_1_6_0_bash_with_grep() {
    check16("bash-and-grep");
}

#[test]
fn prompt_sections_match_1_6_0_hidden_reader() {
    check16("hidden-reader");
}

#[test]
fn prompt_sections_match_1_6_0_system_prompt_file_in_agent_dir() {
    check16("cwd-is-agent-dir");
}

#[test]
fn prompt_sections_match_1_6_0_worktree_override_and_bom() {
    check16("worktree-override-bom");
}

#[test]
fn prompt_sections_match_1_6_0_extension_sections_and_guidelines() {
    check16("extension-sections");
}

#[test]
fn prompt_sections_match_1_6_0_invalid_section_name() {
    check16("invalid-section");
}

#[test]
fn prompt_state_matches_1_6_0_forced_prompt() {
    check16("forced-prompt");
}

#[test]
fn section_patches_match_1_6_0() {
    let docs = HarnessDocs::in_dir(Path::new(REFERENCE_PACKAGE_DIR));
    let sections_of = |name: &str| {
        let built = build16(name, &docs);
        placeholder_sections(
            &built.ws,
            &build_system_prompt_sections(&built.options).unwrap(),
        )
    };
    let diffs = read_json(&fixtures().join("golden16").join("diffs.json"));
    for diff in diffs.as_array().unwrap() {
        let previous = diff["previous"].as_str().unwrap();
        let current = diff["current"].as_str().unwrap();
        let patch = diff_system_prompt_sections(&sections_of(previous), &sections_of(current));
        assert_eq!(
            text(&patch),
            text(&diff["patch"]),
            "patch {previous} -> {current}"
        );
    }
}

#[test]
fn docs_section_points_at_pi_documentation() {
    // A binary built in the checkout finds the repository's README.md, docs/ and examples/.
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = HarnessDocs::locate(None, &repo.join("target").join("debug").join("pi"));
    assert_eq!(docs, HarnessDocs::in_dir(repo));
    assert!(docs.readme.is_file() && docs.docs.is_dir() && docs.examples.is_dir());
    assert!(docs.docs.join("extensions.md").is_file());
    assert!(docs.examples.join("extensions").is_dir());
    // `$PI_PACKAGE_DIR` wins; with nothing found the executable's directory is used.
    assert_eq!(
        HarnessDocs::locate(Some(Path::new("/p/./pkg")), &repo.join("pi")),
        HarnessDocs::in_dir(Path::new("/p/pkg"))
    );
    assert_eq!(
        HarnessDocs::locate(None, Path::new("/nonexistent/bin/pi")),
        HarnessDocs::in_dir(Path::new("/nonexistent/bin"))
    );

    // By design the only difference from 1.6.0: the three paths in <docs>.
    let golden = golden16("default");
    let built = build16("default", &docs);
    let ours = placeholder_sections(
        &built.ws,
        &build_system_prompt_sections(&built.options).unwrap(),
    );
    let reference = golden["sections"].as_object().unwrap();
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        reference.keys().collect::<Vec<_>>()
    );
    for (name, text) in &ours {
        if name != "docs" {
            assert_eq!(text, &reference[name], "section {name}");
        }
    }
    let ours_docs = ours["docs"].as_str().unwrap();
    assert_ne!(ours_docs, reference["docs"].as_str().unwrap());
    for (path, reference_path) in [
        (&docs.readme, "/opt/pi-package/README.md"),
        (&docs.docs, "/opt/pi-package/docs"),
        (&docs.examples, "/opt/pi-package/examples"),
    ] {
        assert!(
            ours_docs.contains(&format!(": {} ", path.display()))
                || ours_docs.contains(&format!(": {}\n", path.display()))
        );
        assert!(!ours_docs.contains(reference_path));
    }
    let substituted = ours_docs
        .replace(
            &docs.readme.display().to_string(),
            "/opt/pi-package/README.md",
        )
        .replace(&docs.docs.display().to_string(), "/opt/pi-package/docs")
        .replace(
            &docs.examples.display().to_string(),
            "/opt/pi-package/examples",
        );
    assert_eq!(substituted, reference["docs"].as_str().unwrap());
}

#[test]
fn every_1_6_0_scenario_has_a_golden_file_and_a_test() {
    let scenarios = read_json(&fixtures().join("scenarios16.json"));
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
            "untrusted-project",
            "custom-no-read",
            "only-bash-no-context",
            "no-tools",
            "explorers-only",
            "bash-and-grep",
            "hidden-reader",
            "cwd-is-agent-dir",
            "worktree-override-bom",
            "extension-sections",
            "invalid-section",
            "forced-prompt"
        ]
    );
    for name in names {
        assert_eq!(golden16(name)["scenario"], name);
    }
}
