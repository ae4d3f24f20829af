//! Resource loading and prompt assembly at startup scale: how long `Resources::load` takes
//! for a workspace with many skills, templates and nested context files, how long the system
//! prompt takes to assemble, and how long input expansion takes.
//!
//! Run: `cargo bench --bench resources` (prints one line per figure; median of the runs).

use std::path::Path;
use std::time::{Duration, Instant};

use pi::session::resources::templates::{parse_command_args, substitute_args};
use pi::session::resources::{HarnessDocs, ResourceConfig, Resources, ToolPromptInfo};

const SKILLS: usize = 300;
const TEMPLATES: usize = 200;
const DEPTH: usize = 12;
const RUNS: usize = 21;

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create dir");
    }
    std::fs::write(path, text).expect("write file");
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut samples = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let start = Instant::now();
        let value = f();
        samples.push(start.elapsed());
        last = Some(value);
    }
    (median(samples), last.expect("at least one run"))
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical root");
    let agent = root.join("agent");
    let home = root.join("home");
    let mut cwd = root.join("repo");
    std::fs::create_dir_all(cwd.join(".git")).expect("git dir");
    for depth in 0..DEPTH {
        cwd = cwd.join(format!("d{depth}"));
        write(
            &cwd.join("AGENTS.md"),
            &format!(
                "# Rules at depth {depth}\n\n{}",
                "Keep it tidy. ".repeat(40)
            ),
        );
    }
    for idx in 0..SKILLS {
        let base = if idx % 3 == 0 {
            cwd.join(".pi/skills")
        } else {
            agent.join("skills/group")
        };
        write(
            &base.join(format!("skill-{idx}/SKILL.md")),
            &format!(
                "---\nname: skill-{idx}\ndescription: >-\n  Skill number {idx}, which does something\n  specific & useful.\nmetadata:\n  owner: team-{idx}\n---\n\n# Skill {idx}\n\n{}",
                "Step. ".repeat(200)
            ),
        );
    }
    for idx in 0..TEMPLATES {
        write(
            &agent.join(format!("prompts/t{idx}.md")),
            &format!(
                "---\ndescription: Template {idx}\nargument-hint: <a> <b>\n---\nDo $1 with ${{@:2}} ($ARGUMENTS)\n"
            ),
        );
    }
    write(&agent.join("skills/.gitignore"), "skip-*/\n");

    let config = ResourceConfig::new(&cwd, &agent, Some(&home));
    let (load, resources) = time(RUNS, || Resources::load(config.clone()));
    println!(
        "load: {} skills, {} templates, {} context files: {:.2} ms",
        resources.skills().len(),
        resources.templates().len(),
        resources.context_files().len(),
        load.as_secs_f64() * 1e3
    );

    let tools: Vec<ToolPromptInfo> = ["read", "bash", "edit", "write", "grep", "find", "ls"]
        .iter()
        .map(|name| ToolPromptInfo::new(name, Some("Does things"), &["Use it well."]))
        .collect();
    let docs = HarnessDocs::in_dir(Path::new("/opt/pi"));
    let (build, prompt) = time(RUNS * 10, || resources.system_prompt(&tools, &cwd, &docs));
    println!(
        "system prompt ({} KB): {:.1} µs",
        prompt.len() / 1024,
        build.as_secs_f64() * 1e6
    );

    let (template, _) = time(RUNS * 10, || {
        resources.expand_input("/t150 first \"second arg\" third")
    });
    println!(
        "template expansion (200 templates): {:.1} µs",
        template.as_secs_f64() * 1e6
    );
    let (skill, _) = time(RUNS * 10, || resources.expand_input("/skill:skill-150 go"));
    println!(
        "skill expansion (reads the file): {:.1} µs",
        skill.as_secs_f64() * 1e6
    );

    let big_template = "Use $1 and ${@:2:3} then $ARGUMENTS or $@. ".repeat(2000);
    let args = parse_command_args("a b \"c d\" e f g");
    let (subst, out) = time(RUNS, || substitute_args(&big_template, &args));
    println!(
        "substitute_args on {} KB template: {:.2} ms (output {} KB)",
        big_template.len() / 1024,
        subst.as_secs_f64() * 1e3,
        out.len() / 1024
    );
}
