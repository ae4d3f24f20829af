//! Project trust (issue 19 item 1; 1.6.0's `docs/security.md`, "Understand project trust")
//! through the real binary and real files: a crafted session whose header names another
//! user's folder runs nothing from it until that folder is trusted (pi runs as `nobody` when
//! the test runs as root, so the folder really is someone else's); `-a`/`-na`; the user's
//! `defaultProjectTrust` counts and a project's does not; saved decisions in
//! `<agent dir>/trust.json` are read and written as 1.6.0's own `ProjectTrustStore` reads and
//! writes them; the REPL asks once at startup and `/trust` saves a decision; context files
//! load either way; protected skills do not.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::agent::models_json;
use crate::common::provider::{MockResponse, ProviderServer, sse};
use crate::common::tmux::Tmux;
use crate::common::{TEST_CLOCK_START_MS, TestEnv};
use crate::suite::interop16::node22;

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn configure(env: &TestEnv, server: &ProviderServer, settings: &Value) {
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json(&server.url(), 128_000),
    )
    .unwrap();
    std::fs::write(env.agent_dir.join("settings.json"), settings.to_string()).unwrap();
}

/// A project folder with protected resources: an extension that records who ran it in
/// `<out>/ran` (a directory anyone may write), a skill, a project `settings.json` that asks
/// for every project to be trusted (a project cannot decide that), and an `AGENTS.md`.
fn hostile_project(root: &Path, out: &Path) -> PathBuf {
    let project = root.join("project");
    std::fs::create_dir_all(project.join(".pi/extensions")).unwrap();
    std::fs::create_dir_all(project.join(".pi/skills/tidy")).unwrap();
    std::fs::create_dir_all(out).unwrap();
    set_mode(out, 0o777);
    let extension = project.join(".pi/extensions/x");
    std::fs::write(
        &extension,
        format!("#!/bin/sh\nid -u >> {}/ran\n", out.display()),
    )
    .unwrap();
    set_mode(&extension, 0o755);
    std::fs::write(
        project.join(".pi/skills/tidy/SKILL.md"),
        "---\nname: tidy\ndescription: Tidy the hostile project\n---\nTidy.\n",
    )
    .unwrap();
    std::fs::write(
        project.join(".pi/settings.json"),
        r#"{"defaultProjectTrust": "always"}"#,
    )
    .unwrap();
    std::fs::write(project.join("AGENTS.md"), "Project rules: be brief.\n").unwrap();
    project.canonicalize().unwrap()
}

/// A session file (a header and one user message) whose header names `cwd`.
fn crafted_session(path: &Path, cwd: &Path) {
    let header = json!({"type": "session", "version": 3, "id": "0c0ffee0-1111-4222-8333-444444444444",
                        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd.to_string_lossy()});
    let user = json!({"type": "message", "id": "a1", "parentId": null, "timestamp": "2026-01-01T00:00:01.000Z",
                      "message": {"role": "user", "content": "earlier", "timestamp": 1}});
    std::fs::write(path, format!("{header}\n{user}\n")).unwrap();
}

/// Runs `pi` as another user than the owner of the project: `nobody` through `setpriv` when
/// the test runs as root, this user otherwise (the project's files are then merely not theirs
/// to vouch for).
struct Victim {
    prefix: Vec<String>,
}

impl Victim {
    fn new(env: &TestEnv) -> Option<Self> {
        set_mode(env.dir.path(), 0o755);
        if !nix::unistd::geteuid().is_root() {
            return Some(Self { prefix: Vec::new() });
        }
        let nobody = nix::unistd::User::from_name("nobody").ok().flatten()?;
        let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
            .into_iter()
            .find(|path| Path::new(path).exists())?;
        for dir in [&env.agent_dir, &env.home] {
            for entry in walk(dir) {
                nix::unistd::chown(&entry, Some(nobody.uid), Some(nobody.gid)).ok()?;
            }
        }
        let victim = Self {
            prefix: vec![
                setpriv.to_owned(),
                format!("--reuid={}", nobody.uid),
                format!("--regid={}", nobody.gid),
                "--clear-groups".to_owned(),
            ],
        };
        victim
            .pi(env, &["--version"])
            .status
            .success()
            .then_some(victim)
    }

    fn pi(&self, env: &TestEnv, args: &[&str]) -> Output {
        let pi = assert_cmd::cargo::cargo_bin("pi");
        let mut command = match self.prefix.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(pi);
                command
            }
            None => Command::new(pi),
        };
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &env.home)
            .env("PI_CODING_AGENT_DIR", &env.agent_dir)
            .env("PI_TEST_CLOCK", TEST_CLOCK_START_MS.to_string())
            .env("PI_TEST_SEED", "7")
            .env("NO_COLOR", "1")
            .current_dir(&env.workspace)
            .stdin(std::process::Stdio::null())
            .args(args)
            .output()
            .unwrap()
    }
}

/// `dir` and everything under it.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut index = 0;
    while index < out.len() {
        if out[index].is_dir()
            && let Ok(entries) = std::fs::read_dir(&out[index])
        {
            out.extend(entries.filter_map(|entry| entry.ok().map(|entry| entry.path())));
        }
        index += 1;
    }
    out
}

fn ran(out: &Path) -> Option<String> {
    std::fs::read_to_string(out.join("ran")).ok()
}

/// The system prompt text of every request the provider got.
fn system_prompts(server: &ProviderServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .map(|request| {
            request.json()["messages"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// 1.6.0's own trust store (`tests/interop16/trust16.mjs`).
fn node_trust(args: &[&str]) -> String {
    node_trust_with_home(args, None)
}

fn node_trust_with_home(args: &[&str], home: Option<&Path>) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop16/trust16.mjs");
    let mut command = Command::new(node22());
    command.arg(script).args(args);
    if let Some(home) = home {
        command.env("HOME", home);
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "trust16.mjs {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Issue 19 item 1: `pi --session crafted.jsonl -p hello`, the header naming another user's
/// folder, ran that folder's `.pi/extensions/*` as the current user. Now nothing of the
/// folder's protected resources loads until it is trusted (its own settings cannot trust
/// it), pi says where the tools will run, and `-a` trusts it for one run.
#[test]
fn issue_19_a_crafted_sessions_folder_runs_nothing_until_it_is_trusted() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![
        MockResponse::sse(sse::openai_text("hello back")),
        MockResponse::sse(sse::openai_text("hello again")),
    ]);
    configure(
        &env,
        &server,
        &json!({"retry": {"baseDelayMs": 10, "provider": {"maxRetries": 0}}}),
    );
    let out = env.dir.path().join("out");
    let project = hostile_project(env.dir.path(), &out);
    let crafted = env.dir.path().join("crafted.jsonl");
    crafted_session(&crafted, &project);
    set_mode(&crafted, 0o644);
    let Some(victim) = Victim::new(&env) else {
        eprintln!("skipped: running as root without a usable `nobody` user and setpriv");
        return;
    };

    let output = victim.pi(
        &env,
        &["--session", &crafted.to_string_lossy(), "-p", "hello"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "hello back\n");
    assert_eq!(ran(&out), None, "the project's extension ran: {stderr}");
    assert!(
        stderr.contains(&format!("{} is not trusted", project.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "run in {} (the session's working directory), not in {}",
            project.display(),
            env.workspace.display()
        )),
        "{stderr}"
    );
    // Context files load as 1.6.0 loads them; the project's skill does not.
    let prompts = system_prompts(&server);
    assert!(
        prompts[0].contains("Project rules: be brief."),
        "{}",
        prompts[0]
    );
    assert!(
        !prompts[0].contains("Tidy the hostile project"),
        "{}",
        prompts[0]
    );
    assert!(!env.agent_dir.join("trust.json").exists());

    // `-a` trusts it for this run only: the extension runs (as the user running pi).
    let output = victim.pi(
        &env,
        &["-a", "--session", &crafted.to_string_lossy(), "-p", "hello"],
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let uid = ran(&out).expect("with -a the project's extension runs");
    if !victim.prefix.is_empty() {
        let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
        assert_eq!(uid.trim(), nobody.uid.to_string());
    }
    assert!(system_prompts(&server)[1].contains("Tidy the hostile project"));
    assert!(!env.agent_dir.join("trust.json").exists());
}

/// Decisions 1.6.0 saved decide for pi, closest folder first, over the user's
/// `defaultProjectTrust`; `--no-approve` wins over all of them; JSON mode skips an untrusted
/// project as print mode does.
#[test]
fn saved_decisions_of_1_6_0_and_the_users_default_decide_in_print_and_json_mode() {
    let env = TestEnv::new();
    let server = ProviderServer::start(
        (0..5)
            .map(|_| MockResponse::sse(sse::openai_text("ok")))
            .collect(),
    );
    configure(&env, &server, &json!({}));
    let out = env.dir.path().join("out");
    let project = hostile_project(env.dir.path(), &out);
    let crafted = env.dir.path().join("crafted.jsonl");
    crafted_session(&crafted, &project);
    let crafted = crafted.to_string_lossy().into_owned();
    let agent = env.agent_dir.to_string_lossy().into_owned();
    let pi = |args: &[&str]| {
        let output = env.pi().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        output
    };
    let runs = || ran(&out).map_or(0, |text| text.lines().count());

    // The parent folder trusted by 1.6.0: inherited.
    let parent = project.parent().unwrap().to_string_lossy().into_owned();
    node_trust(&["set", &agent, &parent, "true"]);
    pi(&["--session", &crafted, "-p", "hi"]);
    assert_eq!(runs(), 1);
    // The folder's own "no" is closer; the user's "always" does not override a saved "no".
    node_trust(&["set", &agent, &project.to_string_lossy(), "false"]);
    configure(&env, &server, &json!({"defaultProjectTrust": "always"}));
    pi(&["--session", &crafted, "--mode", "json", "hi"]);
    assert_eq!(runs(), 1);
    // No saved decision left: the user's "always" trusts, `-na` ignores the folder anyway.
    node_trust(&["set", &agent, &project.to_string_lossy(), "null"]);
    node_trust(&["set", &agent, &parent, "null"]);
    assert_eq!(
        std::fs::read_to_string(env.agent_dir.join("trust.json")).unwrap(),
        "{}\n"
    );
    pi(&["--session", &crafted, "--mode", "json", "hi"]);
    assert_eq!(runs(), 2);
    let output = pi(&["-na", "--session", &crafted, "-p", "hi"]);
    assert_eq!(runs(), 2, "{output:?}");
    // "never" never trusts.
    configure(&env, &server, &json!({"defaultProjectTrust": "never"}));
    pi(&["--session", &crafted, "-p", "hi"]);
    assert_eq!(runs(), 2);
}

/// The REPL asks once at startup for a folder with protected resources; "Trust" saves the
/// decision where and as 1.6.0 saves it (its own store reads it, and writes the same bytes);
/// `/trust` changes the saved decision.
#[test]
fn the_repl_asks_at_startup_and_trust_saves_what_1_6_0_reads() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("done"))]);
    configure(&env, &server, &json!({}));
    let out = env.dir.path().join("out");
    std::fs::create_dir_all(env.workspace.join(".pi/extensions")).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let extension = env.workspace.join(".pi/extensions/x");
    std::fs::write(
        &extension,
        format!("#!/bin/sh\necho ran >> {}/ran\n", out.display()),
    )
    .unwrap();
    set_mode(&extension, 0o755);
    let workspace = env.workspace.canonicalize().unwrap();
    let workspace_text = workspace.to_string_lossy().into_owned();

    let tmux = Tmux::start(&env, "trust", &[], &[]);
    let screen = tmux.wait_for("Choose 1-5:");
    assert!(screen.contains("Trust project folder?"), "{screen}");
    assert!(screen.contains(&workspace_text), "{screen}");
    assert!(screen.contains("1. Trust\n"), "{screen}");
    assert!(screen.contains("3. Trust (this session only)"), "{screen}");
    assert_eq!(ran(&out), None, "nothing runs before the answer");
    tmux.line("1");
    tmux.wait_for_prompt();
    let saved = std::fs::read_to_string(env.agent_dir.join("trust.json")).unwrap();
    let decision: Value = serde_json::from_str(&node_trust(&[
        "get",
        &env.agent_dir.to_string_lossy(),
        &workspace_text,
    ]))
    .unwrap();
    assert_eq!(
        decision,
        json!({"decision": true, "entry": {"path": workspace_text, "decision": true}})
    );
    // 1.6.0 writes the same bytes for the same decision.
    let other_agent = env.dir.path().join("agent-1.6.0");
    node_trust(&[
        "set",
        &other_agent.to_string_lossy(),
        &workspace_text,
        "true",
    ]);
    assert_eq!(
        std::fs::read_to_string(other_agent.join("trust.json")).unwrap(),
        saved
    );
    // The extension was started once trusted.
    let start = std::time::Instant::now();
    while ran(&out).is_none() && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ran(&out).is_some());

    // `/trust`: the saved decision and this session's, then the answers.
    tmux.line("/trust");
    let screen = tmux.wait_for("Choose 1-3");
    assert!(
        screen.contains(&format!("Saved decision: trusted ({workspace_text})")),
        "{screen}"
    );
    assert!(screen.contains("Current session: trusted"), "{screen}");
    tmux.line("3");
    tmux.wait_for("Saved trust decision: untrusted. Restart pi for this to take effect.");
    let decision: Value = serde_json::from_str(&node_trust(&[
        "get",
        &env.agent_dir.to_string_lossy(),
        &workspace_text,
    ]))
    .unwrap();
    assert_eq!(decision["decision"], json!(false));
    tmux.line("/quit");
    assert_eq!(tmux.wait_for_exit(), 0);

    // The next start asks nothing and says the folder is not trusted.
    let tmux = Tmux::start(&env, "trust-again", &[], &[]);
    let screen = tmux.wait_for("This project is not trusted.");
    assert!(!screen.contains("Trust project folder?"), "{screen}");
    tmux.line("/quit");
    assert_eq!(tmux.wait_for_exit(), 0);
}

/// A session of another folder imported in the REPL (`/import`) moves the runtime there: an
/// undecided folder is asked about through the REPL's dialog before anything of it loads, "this
/// session only" saves nothing, and pi says where the tools now run.
#[test]
fn the_repl_asks_before_moving_to_an_undecided_sessions_folder() {
    let env = TestEnv::new();
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("done"))]);
    configure(&env, &server, &json!({}));
    let out = env.dir.path().join("out");
    let project = hostile_project(env.dir.path(), &out);
    let crafted = env.dir.path().join("crafted.jsonl");
    crafted_session(&crafted, &project);

    let tmux = Tmux::start(&env, "trust-import", &[], &[]);
    let screen = tmux.wait_for_prompt();
    assert!(!screen.contains("Trust project folder?"), "{screen}");
    tmux.line(&format!("/import {}", crafted.display()));
    tmux.wait_for("Replace the current session with");
    tmux.line("y");
    let screen = tmux.wait_for("Choose (number; Enter to cancel):");
    assert!(screen.contains("Trust project folder?"), "{screen}");
    assert!(screen.contains(&project.display().to_string()), "{screen}");
    assert!(
        screen.contains("5 Do not trust (this session only)"),
        "{screen}"
    );
    tmux.line("5");
    // The notice and the line after it (waiting for the first alone raced the second).
    let screen = tmux.wait_for("(the session's working directory)");
    assert!(screen.contains("This project is not trusted."), "{screen}");
    assert!(
        screen.contains(&format!(
            "run in {} (the session's working directory)",
            project.display()
        )),
        "{screen}"
    );
    tmux.line("!pwd");
    tmux.wait_for_count(&project.display().to_string(), 3);
    tmux.line("/quit");
    assert_eq!(tmux.wait_for_exit(), 0);
    assert_eq!(ran(&out), None);
    assert!(!env.agent_dir.join("trust.json").exists());
}

/// RPC mode never asks: `switch_session` to an undecided folder's session skips its protected
/// resources and says so, and where the tools now run, on stderr (stdout keeps to records).
#[test]
fn rpc_switch_session_skips_an_undecided_folder_and_says_where_tools_run() {
    use std::io::Write;
    let env = TestEnv::new();
    let server = ProviderServer::start(Vec::new());
    configure(&env, &server, &json!({}));
    let out = env.dir.path().join("out");
    let project = hostile_project(env.dir.path(), &out);
    let crafted = env.dir.path().join("crafted.jsonl");
    crafted_session(&crafted, &project);
    let mut child = env
        .pi_process()
        .args(["--mode", "rpc"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"id": "1", "type": "switch_session", "sessionPath": crafted.to_string_lossy()})
    )
    .unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"id": "2", "type": "bash", "command": "pwd"})
    )
    .unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let responses: Vec<Value> = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|record| record["type"] == "response")
        .collect();
    assert_eq!(responses.len(), 2, "{stdout}\n{stderr}");
    assert_eq!(responses[0]["success"], json!(true), "{stdout}");
    assert_eq!(
        responses[1]["data"]["output"],
        json!(format!("{}\n", project.display()))
    );
    assert!(
        stderr.contains(&format!("{} is not trusted", project.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "run in {} (the session's working directory)",
            project.display()
        )),
        "{stderr}"
    );
    assert_eq!(ran(&out), None);
}

/// Which folders need a decision is 1.6.0's answer for every protected entry, a bare `.pi`,
/// an ancestor's `.agents/skills` and the user's own `~/.agents/skills`.
#[test]
fn folders_needing_a_decision_are_the_ones_1_6_0_asks_about() {
    let env = TestEnv::new();
    let root = env.dir.path().canonicalize().unwrap();
    let home = root.join("home");
    let mut cases: Vec<(PathBuf, &str)> = Vec::new();
    let bare = home.join("bare");
    std::fs::create_dir_all(bare.join(".pi")).unwrap();
    std::fs::write(bare.join("AGENTS.md"), "rules").unwrap();
    cases.push((bare, "a bare .pi and AGENTS.md"));
    for entry in pi::session::trust::PROTECTED_PROJECT_ENTRIES {
        let dir = home.join(format!("with-{entry}"));
        std::fs::create_dir_all(dir.join(".pi")).unwrap();
        std::fs::write(dir.join(".pi").join(entry), "").unwrap();
        cases.push((dir, entry));
    }
    let nested = root.join("repo/a/b");
    std::fs::create_dir_all(&nested).unwrap();
    std::fs::create_dir_all(root.join("repo/.agents/skills")).unwrap();
    cases.push((nested, "an ancestor's .agents/skills"));
    std::fs::create_dir_all(home.join(".agents/skills")).unwrap();
    cases.push((home.clone(), "the user's own ~/.agents/skills"));
    for (dir, what) in &cases {
        let reference: bool = serde_json::from_str(&node_trust_with_home(
            &["protected", &dir.to_string_lossy()],
            Some(&home),
        ))
        .unwrap();
        assert_eq!(
            pi::session::trust::has_protected_resources(dir, Some(&home)),
            reference,
            "{what}"
        );
    }
}
