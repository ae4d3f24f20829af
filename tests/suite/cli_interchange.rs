//! `pi import` and `pi export --jsonl` through the real binary: JSON reports, exit codes,
//! the default sessions directory, the export targets, and `sessions show` after import.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{TestEnv, fixtures, stdout_json, succeeded};

fn fixture_path(name: &str) -> PathBuf {
    fixtures::dir().join(format!("{name}.jsonl"))
}

/// Copies fixtures into a directory (sources the tests may inspect afterwards).
fn copy_fixture(name: &str, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let target = dir.join(format!("{name}.jsonl"));
    std::fs::copy(fixture_path(name), &target).unwrap();
    target
}

fn json_lines(output: &std::process::Output) -> Vec<Value> {
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn import_json_reports_every_file_and_a_refusal_exits_1() {
    let env = TestEnv::new();
    let dir = env.dir.path().join("in");
    let damaged = copy_fixture("damaged-not-json-and-blank-lines", &dir);
    let missing = copy_fixture("damaged-missing-header", &dir);
    let before = std::fs::read(&missing).unwrap();
    let output = env
        .pi()
        .args(["import", "--json"])
        .arg(&damaged)
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let reports = json_lines(&output);
    assert_eq!(reports.len(), 2);
    let keys: Vec<&str> = reports[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "file", "session", "status", "entries", "added", "skipped", "read"
        ]
    );
    assert_eq!(reports[0]["read"], "whole");
    assert_eq!(reports[0]["file"], damaged.to_str().unwrap());
    assert_eq!(
        reports[0]["session"],
        "0196ce07-aa38-716f-98e8-4ecb64e0791c"
    );
    assert_eq!(reports[0]["status"], "imported");
    assert_eq!(reports[0]["entries"], 9);
    assert_eq!(reports[0]["added"], 9);
    assert_eq!(
        reports[0]["skipped"],
        serde_json::json!([
            {"line": 5, "reason": "not JSON"},
            {"line": 8, "reason": "blank line"},
            {"line": 10, "reason": "blank line"},
            {"line": 12, "reason": "not JSON"},
            {"line": 15, "reason": "blank line"},
            {"line": 16, "reason": "blank line"},
        ])
    );
    assert_eq!(reports[1]["status"], "refused");
    assert_eq!(reports[1]["session"], Value::Null);
    assert!(
        reports[1]["error"]
            .as_str()
            .unwrap()
            .contains("not a session header")
    );
    // The source is untouched; stderr is one line naming the outcome.
    assert_eq!(std::fs::read(&missing).unwrap(), before);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("1 of 2 files refused"), "{stderr}");
    // Importing again: unchanged, exit 0.
    let output = env
        .pi()
        .args(["import", "--json"])
        .arg(&damaged)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(json_lines(&output)[0]["status"], "unchanged");
}

#[test]
fn import_for_people_names_the_session_and_the_skipped_lines() {
    let env = TestEnv::new();
    let output = env
        .pi()
        .arg("import")
        .arg(fixture_path("damaged-torn-last-line"))
        .output()
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.starts_with("imported   0196ce07-aa38-716f-98e8-4ecb64e0791c  "),
        "{text}"
    );
    assert!(text.contains("(8 entries, 8 added)"), "{text}");
    assert!(
        text.contains("  skipped line 10: torn last line (not JSON, no final newline)"),
        "{text}"
    );
    assert!(output.stderr.is_empty(), "no progress bar off a terminal");
}

#[test]
fn import_without_paths_reads_the_reference_sessions_directory() {
    let env = TestEnv::new();
    // Default: <agent dir>/sessions, every project directory in it.
    let sessions = env.agent_dir.join("sessions");
    copy_fixture(
        "basic-chat",
        &sessions.join("--home-alice-projects-webshop--"),
    );
    copy_fixture("tool-use", &sessions.join("--home-bob-x--"));
    std::fs::write(
        sessions.join("--home-bob-x--").join("notes.txt"),
        "not a session",
    )
    .unwrap();
    let output = succeeded(env.pi().args(["import", "--json"]));
    let reports = json_lines(&output);
    assert_eq!(reports.len(), 2);
    assert!(reports.iter().all(|report| report["status"] == "imported"));
    assert!(
        reports[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("--home-alice-projects-webshop--/basic-chat.jsonl")
    );

    // The sessionDir setting (with ~) wins over the default.
    let custom = env.home.join("pi-sessions");
    copy_fixture("labels", &custom);
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"sessionDir": "~/pi-sessions"}"#,
    )
    .unwrap();
    let output = env.pi().args(["import", "--json"]).output().unwrap();
    let reports = json_lines(&output);
    assert_eq!(reports.len(), 1);
    assert!(
        reports[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("pi-sessions/labels.jsonl")
    );

    // PI_CODING_AGENT_SESSION_DIR wins over the setting.
    let from_env = env.dir.path().join("env-sessions");
    copy_fixture("images", &from_env);
    let output = env
        .pi()
        .args(["import", "--json"])
        .env("PI_CODING_AGENT_SESSION_DIR", &from_env)
        .output()
        .unwrap();
    let reports = json_lines(&output);
    assert_eq!(reports.len(), 1);
    assert!(
        reports[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("env-sessions/images.jsonl")
    );

    // A directory that does not exist: nothing to do, said on stderr.
    let output = env
        .pi()
        .args(["import"])
        .env("PI_CODING_AGENT_SESSION_DIR", env.dir.path().join("nope"))
        .output()
        .unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("no reference sessions directory"));
}

#[test]
fn a_missing_path_is_refused_and_the_others_are_imported() {
    let env = TestEnv::new();
    let output = env
        .pi()
        .args(["import", "--json", "missing.jsonl"])
        .arg(fixture_path("basic-chat"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let reports = json_lines(&output);
    assert_eq!(reports[0]["status"], "refused");
    assert!(
        reports[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("/work/missing.jsonl")
    );
    assert_eq!(reports[1]["status"], "imported");
}

#[test]
fn show_context_after_import_equals_the_reference_for_every_fixture() {
    let env = TestEnv::new();
    for name in fixtures::names() {
        let db = env.dir.path().join(format!("{name}.db"));
        let db = db.to_str().unwrap();
        let output = env
            .pi()
            .args(["--db", db, "import", "--json"])
            .arg(fixture_path(&name))
            .output()
            .unwrap();
        let report = &json_lines(&output)[0];
        let mut expected = fixtures::expected(&name);
        if expected["headerSynthesized"] == Value::Bool(true) {
            assert_eq!(output.status.code(), Some(1), "{name}");
            assert_eq!(report["status"], "refused", "{name}");
            continue;
        }
        assert!(output.status.success(), "{name}: {report}");
        if expected.get("error").is_some() {
            // The reference throws on a `null` line; we skip it (CONTRACT.md), so the
            // session is the same file without that line.
            assert_eq!(
                report["skipped"][0]["reason"],
                "JSON null, not an entry object"
            );
            expected = fixtures::expected("basic-chat");
        }
        let session = report["session"].as_str().unwrap();
        let output = env
            .pi()
            .args([
                "--db",
                db,
                "sessions",
                "show",
                session,
                "--context",
                "--json",
            ])
            .output()
            .unwrap();
        assert!(output.status.success(), "{name}");
        assert_eq!(stdout_json(&output), expected["context"], "{name}: context");
        for (leaf, variant) in fixtures::leaf_variants(&name) {
            let output = env
                .pi()
                .args([
                    "--db",
                    db,
                    "sessions",
                    "show",
                    session,
                    "--context",
                    "--json",
                ])
                .args(["--leaf", &leaf])
                .output()
                .unwrap();
            assert_eq!(stdout_json(&output), variant["context"], "{name} at {leaf}");
        }
        if !name.starts_with("legacy-v1") {
            let output = env
                .pi()
                .args(["--db", db, "sessions", "show", session, "--tree", "--json"])
                .output()
                .unwrap();
            assert_eq!(stdout_json(&output), expected["tree"], "{name}: tree");
        }
    }
}

fn import(env: &TestEnv, names: &[&str]) -> Vec<String> {
    let mut cmd = env.pi();
    cmd.args(["import", "--json", "--as-new"]);
    for name in names {
        cmd.arg(fixture_path(name));
    }
    let output = cmd.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    json_lines(&output)
        .iter()
        .map(|report| report["session"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn export_writes_stdout_a_file_or_the_reference_layout() {
    let env = TestEnv::new();
    let sessions = import(&env, &["basic-chat", "tool-use", "legacy-v2"]);
    let basic = std::fs::read(fixture_path("basic-chat")).unwrap();

    // JSONL is the default: `--jsonl` may be left out.
    let output = env
        .pi()
        .args(["export", &sessions[0][..8]])
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(
        output.stdout, basic,
        "stdout export without --jsonl is the source"
    );

    let output = env
        .pi()
        .args(["export", "--jsonl", &sessions[0][..8]])
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(output.stdout, basic, "stdout export is the source");

    let file = env.dir.path().join("out/one.jsonl");
    let output = env
        .pi()
        .args(["export", "--jsonl", &sessions[0], "-o"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert!(output.stdout.is_empty());
    assert_eq!(std::fs::read(&file).unwrap(), basic);
    let leftovers: Vec<_> = std::fs::read_dir(file.parent().unwrap()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary file left behind");

    let all = env.dir.path().join("all");
    let output = succeeded(
        env.pi()
            .args(["export", "--jsonl", "--all", "-o"])
            .arg(&all),
    );
    let written: Vec<String> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(written.len(), 3);
    let basic_target = all
        .join("--home-alice-projects-webshop--")
        .join("2025-05-14T09-02-11-000Z_0196ce07-aa38-716f-98e8-4ecb64e0791c.jsonl");
    assert!(
        written.contains(&basic_target.to_string_lossy().into_owned()),
        "{written:?}"
    );
    assert_eq!(std::fs::read(&basic_target).unwrap(), basic);
    let migrated = std::fs::read(fixtures::dir().join("legacy-v2.migrated.jsonl")).unwrap();
    let legacy_target = all
        .join("--home-alice-projects-webshop--")
        .join("2025-01-10T09-00-00-000Z_4b7e2d9c-1a3f-4c5e-b6d8-0e2f4a6c8b1d.jsonl");
    assert_eq!(
        std::fs::read(&legacy_target).unwrap(),
        migrated,
        "v2 exports as v3"
    );

    // Existing files are kept unless --force.
    std::fs::write(&basic_target, "mine").unwrap();
    let output = env
        .pi()
        .args(["export", "--jsonl", "--all", "-o"])
        .arg(&all)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(std::fs::read(&basic_target).unwrap(), b"mine");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--force"));
    let output = env
        .pi()
        .args(["export", "--jsonl", "--all", "--force", "-o"])
        .arg(&all)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(std::fs::read(&basic_target).unwrap(), basic);
}

#[test]
fn export_usage_errors_exit_2() {
    let env = TestEnv::new();
    import(&env, &["basic-chat"]);
    for args in [
        vec!["export", "--jsonl", "--all"],
        vec!["export", "--jsonl", "--force", "0196"],
        vec!["export", "--jsonl", "--all", "0196", "-o", "x"],
    ] {
        let output = env.pi().args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
    let output = env
        .pi()
        .args(["export", "--jsonl", "zzz"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    // No SESSION: the latest session of this directory; there is none here.
    let output = env.pi().args(["export", "--jsonl"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no session in"));
    let output = env
        .pi()
        .args(["export", "--jsonl"])
        .current_dir(env.workspace.parent().unwrap())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn export_without_a_session_takes_the_latest_of_this_directory() {
    let env = TestEnv::new();
    let cwd = env.workspace.to_string_lossy().into_owned();
    let header = format!(
        r#"{{"type":"session","version":3,"id":"here-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"{cwd}"}}"#
    );
    let file = env.dir.path().join("here.jsonl");
    std::fs::write(&file, format!("{header}\n")).unwrap();
    env.pi().arg("import").arg(&file).assert().success();
    let output = env.pi().args(["export", "--jsonl"]).output().unwrap();
    assert!(output.status.success());
    assert_eq!(output.stdout, format!("{header}\n").into_bytes());
}

#[test]
fn export_branch_writes_the_active_path_linearly_under_a_new_id() {
    let env = TestEnv::new();
    let sessions = import(&env, &["branches"]);
    let output = env
        .pi()
        .args(["export", "--jsonl", "--branch", &sessions[0]])
        .output()
        .unwrap();
    assert!(output.status.success());
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let header = lines[0].as_object().unwrap();
    assert_eq!(
        header.keys().map(String::as_str).collect::<Vec<_>>(),
        ["type", "version", "id", "timestamp", "cwd"]
    );
    assert_ne!(header["id"], sessions[0].as_str());
    assert_eq!(header["timestamp"], "2026-01-01T00:00:00.000Z");
    let expected = fixtures::expected("branches");
    let path: Vec<&str> = expected["branch"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|id| id.as_str().unwrap())
        .collect();
    let ids: Vec<&str> = lines[1..]
        .iter()
        .map(|line| line["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, path);
    for pair in lines[1..].windows(2) {
        assert_eq!(pair[1]["parentId"], pair[0]["id"]);
    }
    assert_eq!(lines[1]["parentId"], Value::Null);
}

#[test]
fn a_conflicting_reimport_exits_1_and_as_new_imports_a_copy() {
    let env = TestEnv::new();
    env.pi()
        .arg("import")
        .arg(fixture_path("basic-chat"))
        .assert()
        .success();
    let text = std::fs::read_to_string(fixture_path("basic-chat")).unwrap();
    let changed = env.dir.path().join("changed.jsonl");
    std::fs::write(&changed, text.replace("Yes please, briefly.", "No.")).unwrap();
    let output = env
        .pi()
        .args(["import", "--json"])
        .arg(&changed)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let report = &json_lines(&output)[0];
    assert_eq!(report["status"], "refused");
    assert_eq!(report["session"], "0196ce07-aa38-716f-98e8-4ecb64e0791c");
    assert_eq!(report["entries"], 9);
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .starts_with("line 6: entry '450d3725'")
    );
    let output = env
        .pi()
        .args(["import", "--json", "--as-new"])
        .arg(&changed)
        .output()
        .unwrap();
    assert!(output.status.success());
    let report = &json_lines(&output)[0];
    assert_eq!(report["status"], "imported");
    assert_ne!(report["session"], "0196ce07-aa38-716f-98e8-4ecb64e0791c");
    let output = env
        .pi()
        .args(["sessions", "list", "--all", "--json"])
        .output()
        .unwrap();
    assert_eq!(stdout_json(&output).as_array().unwrap().len(), 2);
}

#[test]
fn an_export_into_a_closed_pipe_ends_quietly() {
    let env = TestEnv::new();
    let sessions = import(&env, &["huge-tool-output"]);
    let pi = assert_cmd::cargo::cargo_bin("pi");
    let script = format!(
        "'{}' export --jsonl {} | head -c 10 >/dev/null; exit ${{PIPESTATUS[0]}}",
        pi.display(),
        sessions[0]
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

#[test]
fn directories_are_searched_recursively_in_path_order() {
    let env = TestEnv::new();
    let root = env.dir.path().join("tree");
    copy_fixture("tool-use", &root.join("b"));
    copy_fixture("images", &root.join("a/deeper"));
    copy_fixture("labels", &root);
    let output = env
        .pi()
        .args(["import", "--json"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(output.status.success());
    let files: Vec<String> = json_lines(&output)
        .iter()
        .map(|report| report["file"].as_str().unwrap().to_owned())
        .collect();
    let root = root.to_string_lossy();
    assert_eq!(
        files,
        [
            format!("{root}/a/deeper/images.jsonl"),
            format!("{root}/b/tool-use.jsonl"),
            format!("{root}/labels.jsonl"),
        ]
    );
}

#[test]
fn an_import_of_a_folder_without_sessions_says_so_and_names_it() {
    let env = TestEnv::new();
    let empty = env.dir.path().join("no-sessions-here");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("notes.txt"), "not a session\n").unwrap();
    let output = env.pi().arg("import").arg(&empty).output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "pi: no sessions to import: no *.jsonl files in {}",
            empty.display()
        )
    );
    assert!(output.stdout.is_empty());
}
