//! `pi sessions list|show`, `--db`, `--version` and exit codes, through the real binary.

use pi::model::SessionHeader;
use pi::model::SessionId;
use serde_json::Value;

use crate::common::{TestEnv, fixtures, redact, stdout_json, stdout_text};

#[test]
fn version_prints_the_crate_version() {
    let env = TestEnv::new();
    for flag in ["--version", "-v"] {
        let output = env.pi().arg(flag).output().unwrap();
        assert!(output.status.success());
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            format!("pi {}", env!("CARGO_PKG_VERSION"))
        );
    }
}

#[test]
fn show_context_and_tree_json_equal_the_reference_for_every_plain_v3_fixture() {
    let env = TestEnv::new();
    let store = env.store();
    let mut sessions = Vec::new();
    for name in fixtures::names() {
        if fixtures::is_plain_v3(&name) {
            sessions.push((name.clone(), fixtures::load(&store, &name)));
        }
    }
    drop(store);
    for (name, session) in sessions {
        let expected = fixtures::expected(&name);
        let output = env
            .pi()
            .args(["sessions", "show", session.as_str(), "--context", "--json"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(stdout_json(&output), expected["context"], "{name}: context");
        let output = env
            .pi()
            .args(["sessions", "show", session.as_str(), "--tree", "--json"])
            .output()
            .unwrap();
        assert_eq!(stdout_json(&output), expected["tree"], "{name}: tree");
        for (leaf, variant) in fixtures::leaf_variants(&name) {
            let output = env
                .pi()
                .args([
                    "sessions",
                    "show",
                    session.as_str(),
                    "--context",
                    "--json",
                    "--leaf",
                    &leaf,
                ])
                .output()
                .unwrap();
            assert_eq!(stdout_json(&output), variant["context"], "{name} at {leaf}");
        }
    }
}

fn load_with_id(env: &TestEnv, name: &str, id: &str) -> SessionId {
    let (header, _, entries) = fixtures::read_minimal(name);
    let header = SessionHeader {
        id: SessionId::new(id),
        ..header
    };
    let store = env.store();
    store
        .insert_raw_session(&header, header.to_line().as_bytes(), &entries)
        .unwrap()
        .id
}

#[test]
fn list_json_has_the_contract_shape_latest_activity_first() {
    let env = TestEnv::new();
    load_with_id(&env, "basic-chat", "aaaa-1");
    load_with_id(&env, "tool-use", "aaaa-2");
    let output = env
        .pi()
        .args(["sessions", "list", "--all", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let list = stdout_json(&output);
    let rows = list.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let keys: Vec<&str> = rows[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "session",
            "name",
            "firstMessage",
            "cwd",
            "created",
            "lastActivity",
            "messages",
            "entries",
            "tokens",
            "cost"
        ]
    );
    let activity: Vec<&str> = rows
        .iter()
        .map(|row| row["lastActivity"].as_str().unwrap())
        .collect();
    assert!(activity[0] >= activity[1]);
    let basic = rows.iter().find(|row| row["session"] == "aaaa-1").unwrap();
    let expected = fixtures::expected("basic-chat");
    assert_eq!(basic["name"], expected["sessionName"]);
    assert_eq!(basic["entries"], expected["entries"]);
    assert!(basic["tokens"]["input"].as_i64().unwrap() > 0);
    assert!(basic["cost"].as_f64().unwrap() > 0.0);
}

#[test]
fn list_shows_the_current_directorys_sessions_unless_told_another() {
    let env = TestEnv::new();
    load_with_id(&env, "basic-chat", "aaaa-1");
    load_with_id(&env, "tool-use", "aaaa-2");
    // The default scope is the current directory, which has no sessions.
    let output = env
        .pi()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    assert_eq!(stdout_json(&output), Value::Array(vec![]));
    let cwd = fixtures::read_minimal("basic-chat").0.cwd;
    assert_eq!(
        stdout_json(&crate::common::succeeded(
            env.pi().args(["sessions", "list", "--all", "--json"])
        ))
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["session"] == "aaaa-1")
        .unwrap()["cwd"],
        cwd.as_str()
    );
    let output = env
        .pi()
        .args(["sessions", "list", "--json", "--cwd", &cwd])
        .output()
        .unwrap();
    assert!(
        stdout_json(&output)
            .as_array()
            .unwrap()
            .iter()
            .any(|row| row["session"] == "aaaa-1")
    );
}

/// Two sessions whose ids share the prefix `abc-`.
fn two_sessions_sharing_a_prefix() -> TestEnv {
    let env = TestEnv::new();
    load_with_id(&env, "basic-chat", "abc-111");
    load_with_id(&env, "basic-chat", "abc-222");
    env
}

#[test]
fn a_unique_prefix_names_its_session() {
    let env = two_sessions_sharing_a_prefix();
    let output = env
        .pi()
        .args(["sessions", "show", "abc-1", "--context", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success());
}

#[test]
fn an_ambiguous_prefix_exits_2_naming_the_candidates() {
    let env = two_sessions_sharing_a_prefix();
    let output = env.pi().args(["sessions", "show", "abc"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("abc-111") && stderr.contains("abc-222"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_session_or_leaf_exits_1_and_a_missing_id_is_a_usage_error() {
    let env = two_sessions_sharing_a_prefix();
    let output = env.pi().args(["sessions", "show", "zzz"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("zzz"));
    let output = env
        .pi()
        .args(["sessions", "show", "abc-111", "--leaf", "nope", "--context"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let output = env.pi().args(["sessions", "show"]).output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(2),
        "missing argument is a usage error"
    );
}

#[test]
fn the_db_option_works_before_and_after_the_command() {
    let env = TestEnv::new();
    let other = env.dir.path().join("other.db");
    let store = crate::common::open_store(&other, 3);
    let (header, bytes, entries) = fixtures::read_minimal("labels");
    store.insert_raw_session(&header, &bytes, &entries).unwrap();
    drop(store);
    for args in [
        vec![
            "--db",
            other.to_str().unwrap(),
            "sessions",
            "list",
            "--all",
            "--json",
        ],
        vec![
            "sessions",
            "list",
            "--all",
            "--json",
            "--db",
            other.to_str().unwrap(),
        ],
    ] {
        let output = env.pi().args(&args).output().unwrap();
        assert!(output.status.success());
        assert_eq!(stdout_json(&output).as_array().unwrap().len(), 1);
    }
    assert!(
        !env.db().exists(),
        "the default database is not created when --db is given"
    );
}

#[test]
fn show_for_people_prints_the_active_branch() {
    let env = TestEnv::new();
    let session = load_with_id(&env, "branches", "br-1");
    let text = stdout_text(env.pi().args(["sessions", "show", session.as_str()]));
    let expected = fixtures::expected("branches");
    assert!(text.contains("session br-1"));
    assert!(text.contains(expected["leafId"].as_str().unwrap()));
    insta::assert_snapshot!("sessions_show_branches", text);
}

#[test]
fn show_tree_for_people_draws_every_entry_and_marks_the_leaf() {
    let env = TestEnv::new();
    let session = load_with_id(&env, "branches", "br-1");
    let tree = stdout_text(
        env.pi()
            .args(["sessions", "show", session.as_str(), "--tree"]),
    );
    assert!(tree.contains("├─ ") && tree.contains("← leaf"), "{tree}");
    for node in fixtures::expected("branches")["tree"].as_array().unwrap() {
        assert!(tree.contains(node["id"].as_str().unwrap()));
    }
    insta::assert_snapshot!("sessions_show_tree_branches", tree);
}

#[test]
fn list_for_people_shows_one_row_per_session_and_its_directory() {
    let env = TestEnv::new();
    load_with_id(&env, "basic-chat", "aaaa-1");
    load_with_id(&env, "branches", "aaaa-2");
    let text = stdout_text(env.pi().args(["sessions", "list", "--all"]));
    insta::assert_snapshot!("sessions_list_all", text);
}

#[test]
fn show_entry_gives_the_neighbourhood_on_the_path() {
    let env = TestEnv::new();
    let session = load_with_id(&env, "basic-chat", "bc-1");
    let expected = fixtures::expected("basic-chat");
    let branch: Vec<&str> = expected["branch"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|id| id.as_str().unwrap())
        .collect();
    let target = branch[branch.len() / 2];
    let output = env
        .pi()
        .args([
            "sessions",
            "show",
            session.as_str(),
            "--entry",
            target,
            "--json",
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    let value = stdout_json(&output);
    assert_eq!(value["target"]["id"], target);
    let idx = branch.iter().position(|id| *id == target).unwrap();
    assert_eq!(value["before"][0]["id"], branch[idx - 1]);
    assert_eq!(value["after"][0]["id"], branch[idx + 1]);
    assert!(value["before"].as_array().unwrap().len() <= 3);
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let env = TestEnv::new();
    let session = load_with_id(&env, "huge-tool-output", "huge-1");
    let pi = assert_cmd::cargo::cargo_bin("pi");
    // 1.4 MB of JSON into a pipe that closes after 10 bytes: pi gets EPIPE mid-write.
    let script = format!(
        "'{}' sessions show {} --context --json | head -c 10 >/dev/null; exit ${{PIPESTATUS[0]}}",
        pi.display(),
        session
    );
    let output = std::process::Command::new("bash")
        .arg("-c")
        .arg(script)
        .env("PI_CODING_AGENT_DIR", &env.agent_dir)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The `Commands:` list of a help text: each command's name.
fn listed_commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .filter(|name| name != "help")
        .collect()
}

/// Every help text, `pi --help` and each command's `--help` at every level, is the one in its
/// snapshot (`tests/suite/snapshots/`): a change to any of them is a reviewed snapshot change.
#[test]
fn every_help_text_matches_its_snapshot() {
    let env = TestEnv::new();
    let version = format!("pi {}", env!("CARGO_PKG_VERSION"));
    let mut pending: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = Vec::new();
    while let Some(path) = pending.pop() {
        let help = stdout_text(env.pi().args(&path).arg("--help"));
        for name in listed_commands(&help) {
            let mut child = path.clone();
            child.push(name);
            pending.push(child);
        }
        let name = if path.is_empty() {
            "help".to_owned()
        } else {
            format!("help_{}", path.join("_"))
        };
        insta::assert_snapshot!(name.clone(), redact(&help, &[(&version, "pi [version]")]));
        seen.push(name);
    }
    assert_eq!(
        seen.len(),
        // pi; its 8 commands; sessions' 6, db's 4, mcp's 4 and remote's 3 subcommands
        1 + 8 + 6 + 4 + 4 + 3,
        "help texts checked: {seen:?}"
    );
}

/// `pi ARGS`' stdout; it must exit 0.
fn help_stdout(env: &TestEnv, args: &[&str]) -> String {
    let output = env.pi().args(args).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{args:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn pi_help_is_the_main_help_in_clap_s_layout() {
    let env = TestEnv::new();
    let stdout = |args: &[&str]| help_stdout(&env, args);
    assert_eq!(stdout(&["help"]), stdout(&["--help"]));
    // One style for the main help and the commands': a line of what it is, then `Usage: pi`,
    // `Commands:` (where there are any) and `Options:`, options laid out as clap lays them.
    for args in [&["help"][..], &["sessions", "--help"], &["db", "--help"]] {
        let text = stdout(args);
        let usage = text.find("\nUsage: pi ").expect("a Usage line");
        let commands = text.find("\nCommands:\n").expect("a Commands section");
        let options = text.find("\nOptions:\n").expect("an Options section");
        assert!(usage < commands && commands < options, "{args:?}:\n{text}");
        assert!(text.contains("\n  -h,"), "{args:?}:\n{text}");
    }
    assert!(stdout(&["help"]).contains("\n  help      "));
}

#[test]
fn pi_help_with_command_words_is_that_commands_help() {
    let env = TestEnv::new();
    let stdout = |args: &[&str]| help_stdout(&env, args);
    assert_eq!(
        stdout(&["help", "sessions"]),
        stdout(&["sessions", "--help"])
    );
    assert_eq!(
        stdout(&["help", "sessions", "search"]),
        stdout(&["sessions", "search", "--help"])
    );
    assert_eq!(stdout(&["help", "import"]), stdout(&["import", "--help"]));
    // The global --db before the word is not taken for a command.
    assert_eq!(
        stdout(&["--db", "other.db", "help", "sessions"]),
        stdout(&["sessions", "--help"])
    );
}

/// A word of the reference pi lacks, and a word of no one: one line, exit 2, no prompt.
#[test]
fn pi_help_with_an_unknown_word_exits_2_with_one_line() {
    let env = TestEnv::new();
    for (word, says) in [("install", "packages"), ("bogus", "no command")] {
        let output = env.pi().args(["help", word]).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{word}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{word}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{word}: {stderr}");
    }
    // `pi auth` is pi's now (issue 27).
    let output = env.pi().args(["help", "auth"]).output().unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("pi auth login [PROVIDER]"));
}
