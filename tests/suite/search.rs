//! `pi sessions search|stats|rename|rm` and `pi db check|backup|reindex`, over fixtures stored
//! in a real database, through the real binary.

use pi::model::message::{AgentMessage, UserContent, UserMessage};
use pi::store::{NewSession, SessionStore};
use serde_json::Value;

use crate::common::{TestEnv, fixtures, stdout_json};

fn load_all(env: &TestEnv, names: &[&str]) -> SessionStore {
    let store = env.store();
    for name in names {
        fixtures::load(&store, name);
    }
    store
}

fn search(env: &TestEnv, args: &[&str]) -> (Option<i32>, Value, String) {
    let mut cmd = env.pi();
    cmd.args(["sessions", "search"]).args(args);
    let output = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let value = if output.status.success() && args.contains(&"--json") {
        stdout_json(&output)
    } else {
        Value::Null
    };
    (output.status.code(), value, stderr)
}

fn hits(env: &TestEnv, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--all", "--json"];
    all.extend_from_slice(args);
    let (code, value, stderr) = search(env, &all);
    assert_eq!(code, Some(0), "{args:?}: {stderr}");
    value.as_array().unwrap().clone()
}

const CORPUS: &[&str] = &[
    "basic-chat",
    "tool-use",
    "unicode-escapes",
    "model-thinking-changes",
    "branches",
    "bash-execution",
    "compaction-single",
    "custom-entries",
    "labels",
];

#[test]
fn known_phrases_are_found_in_the_right_session_and_entry_with_a_snippet() {
    let env = TestEnv::new();
    drop(load_all(&env, CORPUS));
    let found = hits(&env, &["\"float accumulation\""]);
    assert_eq!(found[0]["session"], "fixture-tool-use");
    assert_eq!(found[0]["entry"], "1dfc1b5a");
    assert_eq!(found[0]["role"], "assistant");
    assert_eq!(found[0]["kind"], "thinking");
    assert!(
        found[0]["snippet"]
            .as_str()
            .unwrap()
            .contains("**float accumulation**"),
        "{found:?}"
    );
    assert_eq!(found[0]["cwd"], "/home/alice/projects/webshop");
    assert_eq!(found[0]["onActivePath"], true);
    let keys: Vec<&str> = found[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "session",
            "entry",
            "role",
            "kind",
            "snippet",
            "score",
            "cwd",
            "timestamp",
            "name",
            "onActivePath"
        ]
    );

    // An identifier, a path, an error message, a tool call, a bash command, CJK and a name.
    let cases: &[(&str, &str, &str, &str)] = &[
        ("validateCart", "fixture-basic-chat", "096937cd", "text"),
        (
            "\"src/checkout.ts\"",
            "fixture-branches",
            "666d4e9f",
            "tool_call",
        ),
        (
            "ENOENT \"no such file\"",
            "fixture-tool-use",
            "e88b59b6",
            "tool_result",
        ),
        (
            "\"git status\"",
            "fixture-bash-execution",
            "a7b60848",
            "bash",
        ),
        ("世界", "fixture-unicode-escapes", "55edc563", "text"),
        ("こんにちは", "fixture-unicode-escapes", "55edc563", "text"),
        (
            "\"Checkout overview\"",
            "fixture-basic-chat",
            "c87b883f",
            "name",
        ),
        ("Köln", "fixture-unicode-escapes", "55edc563", "text"),
        ("koln", "fixture-unicode-escapes", "55edc563", "text"),
        ("toFix*", "fixture-tool-use", "1dfc1b5a", "thinking"),
    ];
    for (query, session, entry, kind) in cases {
        let found = hits(&env, &[query]);
        assert!(
            found.iter().any(|hit| hit["session"] == *session
                && hit["entry"] == *entry
                && hit["kind"] == *kind),
            "{query}: {found:#?}"
        );
    }
    // Case and diacritics fold; the snippet marks what matched.
    let found = hits(&env, &["KOLN"]);
    assert!(
        found[0]["snippet"].as_str().unwrap().contains("**Köln**"),
        "{found:?}"
    );
}

#[test]
fn every_filter_narrows_the_hits() {
    let env = TestEnv::new();
    drop(load_all(&env, CORPUS));
    let all = hits(&env, &["tax"]);
    assert!(all.len() >= 4);
    for hit in hits(&env, &["tax", "--role", "user"]) {
        assert_eq!(hit["role"], "user");
    }
    for hit in hits(&env, &["tax", "--role", "user,assistant", "--kind", "text"]) {
        assert!(hit["role"] == "user" || hit["role"] == "assistant");
        assert_eq!(hit["kind"], "text");
    }
    // --model: the model in effect at the hit.
    let gemini = hits(&env, &["composite", "--model", "gemini"]);
    assert_eq!(gemini.len(), 1, "{gemini:#?}");
    assert_eq!(gemini[0]["entry"], "15196bdd");
    // --session and --limit.
    let only = hits(&env, &["the", "--session", "fixture-tool"]);
    assert!(!only.is_empty() && only.iter().all(|hit| hit["session"] == "fixture-tool-use"));
    assert_eq!(hits(&env, &["the", "--limit", "2"]).len(), 2);
    // --branch active keeps only hits on each session's current path.
    let everywhere = hits(&env, &["tax", "--session", "fixture-branches"]);
    let active = hits(
        &env,
        &["tax", "--session", "fixture-branches", "--branch", "active"],
    );
    assert!(active.len() < everywhere.len(), "{active:#?}");
    assert!(active.iter().all(|hit| hit["onActivePath"] == true));
    assert!(everywhere.iter().any(|hit| hit["onActivePath"] == false));
    // --since / --until against entry timestamps.
    let stamps: Vec<String> = everywhere
        .iter()
        .map(|hit| hit["timestamp"].as_str().unwrap().to_owned())
        .collect();
    let latest = stamps.iter().max().unwrap().clone();
    let since = hits(
        &env,
        &["tax", "--session", "fixture-branches", "--since", &latest],
    );
    assert!(
        since
            .iter()
            .all(|hit| hit["timestamp"].as_str().unwrap() >= latest.as_str())
    );
    let until = hits(
        &env,
        &["tax", "--session", "fixture-branches", "--until", &latest],
    );
    assert_eq!(since.len() + until.len(), everywhere.len());
    assert!(
        hits(&env, &["tax", "--since", "1d"]).is_empty(),
        "fixtures are older than a day"
    );
    // Scope: the current directory by default, or --cwd.
    let (code, value, _) = search(&env, &["tax", "--json"]);
    assert_eq!(code, Some(0));
    assert_eq!(value, Value::Array(vec![]));
    let (_, value, _) = search(
        &env,
        &["tax", "--json", "--cwd", "/home/alice/projects/webshop"],
    );
    assert!(!value.as_array().unwrap().is_empty());
}

#[test]
fn the_exact_phrase_ranks_first() {
    let env = TestEnv::new();
    let store = env.store();
    let session = store
        .create_session(&NewSession {
            cwd: "/p".into(),
            parent_session: None,
        })
        .unwrap()
        .id;
    let user = |text: &str| {
        AgentMessage::User(UserMessage {
            content: UserContent::Text(text.to_owned()),
            timestamp: 1,
            extra: serde_json::Map::new(),
        })
    };
    for text in [
        "refused: the pool lost its connection, reset, refused again, connection lost",
        "connection pool refused connection twice",
        "error: connection refused at 127.0.0.1:5432",
        "refused refused refused connection connection",
    ] {
        store.append_message(&session, user(text)).unwrap();
    }
    drop(store);
    let found = hits(&env, &["connection", "refused"]);
    assert_eq!(found.len(), 4);
    // Only one message has the words as an exact phrase; it ranks first although others
    // repeat the words more often.
    let top: String = found[0]["snippet"].as_str().unwrap().into();
    assert!(
        top.contains("127.0.0.1") && top.contains("**connection** **refused**"),
        "{found:#?}"
    );
    let scores: Vec<f64> = found
        .iter()
        .map(|hit| hit["score"].as_f64().unwrap())
        .collect();
    assert!(
        scores.windows(2).all(|pair| pair[0] >= pair[1]),
        "best first: {scores:?}"
    );
}

#[test]
fn hostile_queries_get_results_or_a_one_line_reason_and_exit_2() {
    let env = TestEnv::new();
    drop(load_all(&env, &["basic-chat", "tool-use"]));
    let big = "lorem ipsum ".repeat(900);
    let inputs: Vec<String> = [
        "\"",
        "NEAR(",
        "*",
        "-",
        "AND",
        "",
        "   ",
        "🎉",
        "'; DROP TABLE entries; --",
        "a OR",
        "NOT a",
        "(((",
        ")",
        "x AND AND y",
        "\"unclosed phrase",
        "SELECT * FROM sessions",
        "NEAR(a b)",
        "col:value",
        "^start",
        "a NOT b",
        "\"\"",
        "***",
        "x*y",
        "tool-use",
    ]
    .iter()
    .map(|text| (*text).to_owned())
    .chain([big])
    .collect();
    for input in inputs {
        let output = env
            .pi()
            .args(["sessions", "search", "--all", "--json", "--", &input])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        match output.status.code() {
            Some(0) => {
                assert!(stdout_json(&output).is_array(), "{input:?}");
            }
            Some(2) => {
                assert_eq!(stderr.lines().count(), 1, "{input:?}: {stderr}");
                assert!(
                    !stderr.to_lowercase().contains("fts5") && !stderr.contains("sqlite"),
                    "{input:?}: {stderr}"
                );
            }
            other => panic!("{input:?}: exit {other:?}: {stderr}"),
        }
    }
    let (code, _, stderr) = search(&env, &["--all", "--", "\"oops"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("quote"), "{stderr}");
    let (code, _, stderr) = search(&env, &["--all", "x", "--role", "robot"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("robot"), "{stderr}");
}

#[test]
fn human_output_shows_title_cwd_entry_and_snippet() {
    let env = TestEnv::new();
    drop(load_all(&env, &["basic-chat"]));
    let output = env
        .pi()
        .args(["sessions", "search", "--all", "checkout"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("Checkout overview"), "{text}");
    assert!(text.contains("fixture-basic-chat"));
    assert!(text.contains("/home/alice/projects/webshop"));
    assert!(
        text.contains("**checkout**") || text.contains("**Checkout**"),
        "{text}"
    );
}

#[test]
fn stats_total_usage_by_every_key() {
    let env = TestEnv::new();
    drop(load_all(
        &env,
        &["basic-chat", "model-thinking-changes", "tool-use"],
    ));
    let run = |by: &str| -> Vec<Value> {
        let output = env
            .pi()
            .args(["sessions", "stats", "--json", "--by", by])
            .output()
            .unwrap();
        assert!(output.status.success());
        stdout_json(&output).as_array().unwrap().clone()
    };
    let by_model = run("model");
    let keys: Vec<&str> = by_model
        .iter()
        .map(|row| row["key"].as_str().unwrap())
        .collect();
    assert!(
        keys.contains(&"google/gemini-2.5-pro")
            || keys.iter().any(|key| key.ends_with("/gemini-2.5-pro")),
        "{keys:?}"
    );
    let row_keys: Vec<&str> = by_model[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        row_keys,
        [
            "key",
            "sessions",
            "messages",
            "input",
            "output",
            "cacheRead",
            "cacheWrite",
            "cost"
        ]
    );
    let total_cost = |rows: &[Value]| {
        rows.iter()
            .map(|row| row["cost"].as_f64().unwrap())
            .sum::<f64>()
    };
    let by_session = run("session");
    assert_eq!(by_session.len(), 3);
    for by in ["day", "week", "provider", "cwd"] {
        let rows = run(by);
        assert!(
            (total_cost(&rows) - total_cost(&by_session)).abs() < 1e-9,
            "{by}"
        );
    }
    for row in run("day") {
        let key = row["key"].as_str().unwrap();
        assert_eq!(key.len(), 10, "{key}");
    }
    for row in run("week") {
        assert!(row["key"].as_str().unwrap().contains("-W"));
    }
    let output = env
        .pi()
        .args(["sessions", "stats", "--json", "--since", "1d"])
        .output()
        .unwrap();
    assert_eq!(stdout_json(&output), Value::Array(vec![]));
}

#[test]
fn rename_appends_a_name_and_rm_deletes_only_with_consent() {
    let env = TestEnv::new();
    drop(load_all(&env, &["basic-chat", "labels"]));
    let output = env
        .pi()
        .args(["sessions", "rename", "fixture-basic", "Renamed thing"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        hits(&env, &["\"Renamed thing\""])
            .iter()
            .any(|hit| hit["kind"] == "name")
    );
    let store = env.store();
    let session = pi::model::SessionId::new("fixture-basic-chat");
    assert_eq!(
        store.session_name(&session).unwrap().as_deref(),
        Some("Renamed thing")
    );
    drop(store);
    let output = env
        .pi()
        .args(["sessions", "rename", "fixture-basic", "  "])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    // Without --yes and without a terminal: refused.
    let output = env
        .pi()
        .args(["sessions", "rm", "fixture-labels"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let output = env
        .pi()
        .args(["sessions", "rm", "fixture-labels", "--yes"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let output = env
        .pi()
        .args(["sessions", "list", "--all", "--json"])
        .output()
        .unwrap();
    assert_eq!(stdout_json(&output).as_array().unwrap().len(), 1);
    assert!(
        hits(&env, &["label"])
            .iter()
            .all(|hit| hit["session"] != "fixture-labels")
    );
    let output = env.pi().args(["db", "check"]).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn db_check_detects_a_damaged_derived_table_and_reindex_repairs_it() {
    let env = TestEnv::new();
    drop(load_all(&env, CORPUS));
    let output = env.pi().args(["db", "check"]).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("ok:"));
    let damages = [
        "UPDATE session_stats SET messages = messages + 1 WHERE sid = 1",
        "DELETE FROM labels",
        "UPDATE entry_path SET depth = depth + 5 WHERE seq = 3",
        "DELETE FROM search_docs WHERE docid IN (SELECT docid FROM search_docs LIMIT 3)",
        "INSERT INTO search_fts (rowid, body) VALUES (999999, 'ghost text')",
        "DELETE FROM usage WHERE seq = 2",
    ];
    for damage in damages {
        let conn = rusqlite::Connection::open(env.db()).unwrap();
        conn.execute_batch(damage).unwrap();
        drop(conn);
        let output = env.pi().args(["db", "check"]).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{damage}: not detected");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("reindex"),
            "{damage}"
        );
        let output = env.pi().args(["db", "reindex"]).output().unwrap();
        assert!(output.status.success());
        let output = env.pi().args(["db", "check"]).output().unwrap();
        assert!(
            output.status.success(),
            "{damage}: {}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
    // Search still works after the repairs.
    assert!(!hits(&env, &["\"float accumulation\""]).is_empty());
}

#[test]
fn backup_of_a_database_being_written_passes_check() {
    let env = TestEnv::new();
    let store = load_all(&env, &["long-linear-chat", "basic-chat"]);
    let session = store
        .create_session(&NewSession {
            cwd: "/w".into(),
            parent_session: None,
        })
        .unwrap()
        .id;
    let writer = std::thread::spawn(move || {
        for idx in 0..300 {
            let message = AgentMessage::User(UserMessage {
                content: UserContent::Text(format!("message number {idx} while backing up")),
                timestamp: idx,
                extra: serde_json::Map::new(),
            });
            store.append_message(&session, message).unwrap();
        }
    });
    let mut backups = Vec::new();
    for idx in 0..3 {
        let dest = env.dir.path().join(format!("backup-{idx}.db"));
        let output = env
            .pi()
            .args(["db", "backup", dest.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        backups.push(dest);
    }
    writer.join().unwrap();
    for dest in &backups {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(dest).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let output = env
            .pi()
            .args(["--db", dest.to_str().unwrap(), "db", "check"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
    // An existing file is never overwritten.
    let output = env
        .pi()
        .args(["db", "backup", backups[0].to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
}
