//! `pi sessions search|stats|rename|rm` and `pi db check|backup|reindex`, over fixtures stored
//! in a real database, through the real binary.

use pi::model::message::{AgentMessage, UserContent, UserMessage};
use pi::store::search::{Bm25, docid, single_token};
use pi::store::{NewSession, SessionStore};
use serde_json::Value;

use crate::common::{TestEnv, fixtures, stdout_json, succeeded};

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
            "onActivePath",
            "contextEdit"
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
    let output = succeeded(env.pi().args(["sessions", "search", "--all", "checkout"]));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("Checkout overview"), "{text}");
    assert!(text.contains("fixture-basic-chat"));
    assert!(text.contains("/home/alice/projects/webshop"));
    assert!(
        text.contains("**checkout**") || text.contains("**Checkout**"),
        "{text}"
    );
}

/// The three fixtures whose usage the stats tests add up.
const STATS_FIXTURES: &[&str] = &["basic-chat", "model-thinking-changes", "tool-use"];

/// `pi sessions stats --json ARGS`: its rows.
fn stats_rows(env: &TestEnv, args: &[&str]) -> Vec<Value> {
    let output = succeeded(env.pi().args(["sessions", "stats", "--json"]).args(args));
    stdout_json(&output).as_array().unwrap().clone()
}

/// `pi sessions stats --json --all --by BY`: its rows.
fn stats_by(env: &TestEnv, by: &str) -> Vec<Value> {
    stats_rows(env, &["--all", "--by", by])
}

#[test]
fn stats_rows_have_the_contract_keys_and_name_each_model() {
    let env = TestEnv::new();
    drop(load_all(&env, STATS_FIXTURES));
    let by_model = stats_by(&env, "model");
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
    assert!(
        by_model.iter().any(|row| row["key"] == "(no model)"),
        "{by_model:?}"
    );
    for row in stats_by(&env, "day") {
        let key = row["key"].as_str().unwrap();
        assert_eq!(key.len(), 10, "{key}");
    }
    for row in stats_by(&env, "week") {
        assert!(row["key"].as_str().unwrap().contains("-W"));
    }
}

/// Every key counts the same things: the groups add up to the same totals (rows without a
/// model, such as user messages, are the model and provider keys' "(no model)").
#[test]
fn stats_groups_add_up_to_the_same_totals_under_every_key() {
    let env = TestEnv::new();
    drop(load_all(&env, STATS_FIXTURES));
    let total_cost = |rows: &[Value]| {
        rows.iter()
            .map(|row| row["cost"].as_f64().unwrap())
            .sum::<f64>()
    };
    let total = |rows: &[Value], field: &str| -> i64 {
        rows.iter().map(|row| row[field].as_i64().unwrap()).sum()
    };
    let by_session = stats_by(&env, "session");
    assert_eq!(by_session.len(), 3);
    assert!(total(&by_session, "messages") > 0);
    for by in ["day", "week", "model", "provider", "cwd"] {
        let rows = stats_by(&env, by);
        assert!(
            (total_cost(&rows) - total_cost(&by_session)).abs() < 1e-9,
            "{by}"
        );
        for field in ["messages", "input", "output", "cacheRead", "cacheWrite"] {
            assert_eq!(
                total(&rows, field),
                total(&by_session, field),
                "{by}: {field}"
            );
        }
    }
}

/// The human form is a table whose total says from how many sessions.
#[test]
fn stats_for_people_is_a_table_with_a_total_row() {
    let env = TestEnv::new();
    drop(load_all(&env, STATS_FIXTURES));
    let text = crate::common::stdout_text(
        env.pi()
            .args(["sessions", "stats", "--all", "--by", "model"]),
    );
    let total_line = text.lines().last().unwrap();
    assert!(
        total_line.starts_with("total") && total_line.split_whitespace().nth(1) == Some("3"),
        "{text}"
    );
    insta::assert_snapshot!("sessions_stats_by_model", text);
}

/// Scope and time, as `search` takes them: this directory's sessions by default (none of the
/// fixtures' here), --cwd DIR, --since, --until.
#[test]
fn stats_take_the_scope_and_the_time_range_as_search_does() {
    let env = TestEnv::new();
    drop(load_all(&env, STATS_FIXTURES));
    assert!(stats_rows(&env, &[]).is_empty());
    let output = succeeded(env.pi().args(["sessions", "stats"]));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("(try --all)"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let cwd = by_session_cwd(&env);
    let in_cwd = stats_rows(&env, &["--cwd", &cwd, "--by", "session"]);
    let listed = stdout_json(&succeeded(
        env.pi().args(["sessions", "list", "--json", "--cwd", &cwd]),
    ));
    assert!(!in_cwd.is_empty());
    assert_eq!(in_cwd.len(), listed.as_array().unwrap().len(), "{in_cwd:?}");
    assert!(stats_rows(&env, &["--cwd", "/no/such/project"]).is_empty());
    assert!(stats_rows(&env, &["--all", "--until", "2000-01-01"]).is_empty());
    assert_eq!(
        stats_rows(&env, &["--all", "--by", "session", "--until", "2100-01-01"]),
        stats_by(&env, "session")
    );
    let output = env
        .pi()
        .args(["sessions", "stats", "--all", "--json", "--since", "1d"])
        .output()
        .unwrap();
    assert_eq!(stdout_json(&output), Value::Array(vec![]));
}

/// The working directory of the first session `sessions list --all` shows.
fn by_session_cwd(env: &TestEnv) -> String {
    let output = succeeded(env.pi().args(["sessions", "list", "--all", "--json"]));
    stdout_json(&output)[0]["cwd"].as_str().unwrap().to_owned()
}

#[test]
fn rename_appends_a_name_and_rm_deletes_only_with_consent() {
    let env = TestEnv::new();
    drop(load_all(&env, &["basic-chat", "labels"]));
    succeeded(
        env.pi()
            .args(["sessions", "rename", "fixture-basic", "Renamed thing"]),
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
    succeeded(env.pi().args(["sessions", "rm", "fixture-labels", "--yes"]));
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
    succeeded(env.pi().args(["db", "check"]));
}

#[test]
fn db_check_detects_a_damaged_derived_table_and_reindex_repairs_it() {
    let env = TestEnv::new();
    drop(load_all(&env, CORPUS));
    let output = succeeded(env.pi().args(["db", "check"]));
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("ok:"));
    let damages = [
        "UPDATE session_stats SET messages = messages + 1 WHERE sid = 1",
        "DELETE FROM labels",
        "UPDATE entry_path SET depth = depth + 5 WHERE seq = 3",
        "DELETE FROM search_docs WHERE docid IN (SELECT docid FROM search_docs LIMIT 3)",
        "INSERT INTO search_fts (rowid, body) VALUES (999999, 'ghost text')",
        "DELETE FROM usage WHERE seq = 2",
        // bm25's totals of a session off by a few tokens.
        "UPDATE search_totals SET tokens = tokens + 5 WHERE sid = 1",
        // A document whose docid says it is 1,000 days older than it is.
        "UPDATE search_docs SET docid = docid - (1000 << 31)
           WHERE docid = (SELECT max(docid) FROM search_docs)",
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
        succeeded(env.pi().args(["db", "reindex"]));
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
        succeeded(env.pi().args(["db", "backup", dest.to_str().unwrap()]));
        backups.push(dest);
    }
    writer.join().unwrap();
    for dest in &backups {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(dest).unwrap().permissions().mode() & 0o777,
            0o600
        );
        succeeded(
            env.pi()
                .args(["--db", dest.to_str().unwrap(), "db", "check"]),
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

/// The tokens FTS5 indexed per document of `table` (an FTS5 table of `schema`), counted from
/// its vocabulary of instances (`fts5vocab`, FTS5's documented view of its index); a document
/// of no token is absent.
fn fts5_token_counts(
    conn: &rusqlite::Connection,
    schema: &str,
    table: &str,
) -> std::collections::HashMap<i64, u64> {
    conn.execute_batch(&format!(
        "DROP TABLE IF EXISTS temp.counted; \
         CREATE VIRTUAL TABLE temp.counted USING fts5vocab({schema}, '{table}', 'instance');"
    ))
    .unwrap();
    let mut stmt = conn
        .prepare("SELECT doc, COUNT(*) FROM temp.counted GROUP BY doc")
        .unwrap();
    stmt.query_map([], |row| Ok((row.get(0)?, row.get::<_, i64>(1)? as u64)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn docids_carry_entry_day_and_the_tokenizer_length() {
    let env = TestEnv::new();
    drop(load_all(&env, CORPUS));
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    let counts = fts5_token_counts(&conn, "main", "search_fts");
    let mut stmt = conn
        .prepare("SELECT d.docid, d.role, d.kind, d.ts FROM search_docs d")
        .unwrap();
    let rows: Vec<(i64, String, String, i64)> = stmt
        .query_map([], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(rows.len() > 50, "{} documents", rows.len());
    let mut non_ascii = 0;
    for (id, role, kind, ts) in &rows {
        assert_eq!(
            docid::day(*id),
            docid::day_of_ms(*ts),
            "{id} ({role}/{kind})"
        );
        let text: Vec<u8> = conn
            .query_row(
                "SELECT payload FROM entries e JOIN search_docs d ON e.sid = d.sid AND e.seq = d.seq
                  WHERE d.docid = ?1",
                [id],
                |row| row.get(0),
            )
            .unwrap();
        // The length FTS5 counted, against the one the docid carries (log scale, 4.4 %).
        let text = String::from_utf8_lossy(&text);
        let tokens = counts.get(id).copied().unwrap_or(0) as f64;
        let carried = docid::length(*id);
        assert!(
            (carried - tokens).abs() <= tokens * 0.045 + 0.5,
            "{id} ({role}/{kind}): FTS5 counted {tokens} tokens, the docid carries {carried}: {text}"
        );
        non_ascii += usize::from(!text.is_ascii());
    }
    // The corpus has accented, CJK and emoji text, so the tokenizer emulation is exercised.
    assert!(non_ascii > 0);
}

#[test]
fn docids_sort_by_entry_time_whatever_the_import_order() {
    let env = TestEnv::new();
    drop(load_all(&env, &["tool-use", "labels"]));
    // An old conversation imported last.
    let source = std::fs::read_to_string(fixtures::dir().join("basic-chat.jsonl")).unwrap();
    let mut lines = Vec::new();
    for (idx, line) in source.lines().enumerate() {
        let mut value: Value = serde_json::from_str(line).unwrap();
        value["timestamp"] = Value::String(format!("2001-02-03T04:05:{:02}.000Z", idx % 60));
        if value["type"] == "session" {
            value["id"] = Value::String("old-conversation".to_owned());
        }
        lines.push(value.to_string());
    }
    let file = env.agent_dir.join("old.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    succeeded(env.pi().arg("import").arg(&file));

    let conn = rusqlite::Connection::open(env.db()).unwrap();
    let bounds = |old: bool| -> (i64, i64, i64) {
        conn.query_row(
            &format!(
                "SELECT min(docid), max(docid), count(*) FROM search_docs d JOIN sessions s ON s.sid = d.sid
                  WHERE (s.id = 'old-conversation') = {old}"
            ),
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap()
    };
    let (_, old_max, old_count) = bounds(true);
    let (new_min, _, new_count) = bounds(false);
    assert!(old_count > 3 && new_count > 3);
    assert!(old_max < new_min, "{old_max} ≥ {new_min}");
    // Its documents are found, and shown with their own times.
    let found = hits(&env, &["--session", "old-conversation", "the"]);
    assert!(!found.is_empty());
    assert!(
        found
            .iter()
            .all(|hit| hit["timestamp"].as_str().unwrap().starts_with("2001-02-03"))
    );
}

#[test]
fn ranking_from_the_index_equals_fts5_bm25() {
    let env = TestEnv::new();
    let store = load_all(&env, CORPUS);
    // Documents that repeat a word a different number of times, at different lengths.
    let session = store
        .create_session(&NewSession {
            cwd: "/tmp/bm25".into(),
            parent_session: None,
        })
        .unwrap()
        .id;
    for idx in 0..40usize {
        let mut text = String::new();
        for word in 0..(3 + idx * 7 % 50) {
            text.push_str(match (word * 11 + idx) % 9 {
                0 => "gadolinium ",
                1 | 2 => "zirconia ",
                _ => "filler words here ",
            });
        }
        let message = AgentMessage::User(UserMessage {
            content: UserContent::Text(text),
            timestamp: 1_700_000_000_000,
            extra: serde_json::Map::new(),
        });
        store.append_message(&session, message).unwrap();
    }
    drop(store);
    let terms = [
        ("gadolinium", false),
        ("zirconia", false),
        ("zircon", true),
        ("the", false),
        ("function", false),
    ];
    let fts_expression = |term: &str, prefix: bool| {
        if prefix {
            format!("\"{term}\"*")
        } else {
            format!("\"{term}\"")
        }
    };
    // The store's totals are exactly the live documents and the tokens FTS5 indexed for them.
    let exact_totals = |stage: &str| -> (i64, i64) {
        let conn = rusqlite::Connection::open(env.db()).unwrap();
        let docs: i64 = conn
            .query_row("SELECT COUNT(*) FROM search_docs", [], |row| row.get(0))
            .unwrap();
        let tokens: u64 = fts5_token_counts(&conn, "main", "search_fts")
            .values()
            .sum();
        let totals = pi::store::testing::search_totals(&env.db())
            .unwrap()
            .unwrap();
        assert_eq!(totals, (docs, tokens as i64), "{stage}");
        totals
    };
    let (rows, tokens) = exact_totals("before a removal");
    let bm25 = Bm25::new(rows, tokens);
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    let mut compared = 0;
    for (term, prefix) in terms {
        let token = single_token(term).unwrap();
        let frequencies = pi::store::testing::term_frequencies(&env.db(), &token, prefix, 100_000)
            .unwrap()
            .unwrap();
        let mut stmt = conn
            .prepare("SELECT rowid, bm25(search_fts) FROM search_fts WHERE search_fts MATCH ?1")
            .unwrap();
        let expected: Vec<(i64, f64)> = stmt
            .query_map([&fts_expression(term, prefix)], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(expected.len(), frequencies.docs(), "{term}");
        for (docid, fts5) in expected {
            let ours = bm25.score(std::slice::from_ref(&frequencies), docid);
            assert!(
                (ours - fts5).abs() <= fts5.abs() * 0.045 + 1e-9,
                "{term} in {docid}: ours {ours}, FTS5 {fts5}"
            );
            compared += 1;
        }
    }
    assert!(compared > 60, "{compared} comparisons");
    drop(conn);
    // A removed session's documents leave the index (contentless-delete tombstones): the
    // vocabulary does not see them, and the totals drop them exactly — FTS5's own averages
    // keep counting them (a contentless delete does not know their lengths), which is why
    // ranking does not read them.
    let store = env.store();
    store
        .delete_session(&pi::model::SessionId::new("fixture-tool-use".to_owned()))
        .unwrap();
    drop(store);
    let (after, _) = exact_totals("after a removal");
    assert!(after < rows, "{after} documents after, {rows} before");
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    for (term, prefix) in terms {
        let token = single_token(term).unwrap();
        let frequencies = pi::store::testing::term_frequencies(&env.db(), &token, prefix, 100_000)
            .unwrap()
            .unwrap();
        let matches: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM search_fts WHERE search_fts MATCH ?1",
                [&fts_expression(term, prefix)],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(
            matches as usize,
            frequencies.docs(),
            "{term} after a removal"
        );
    }
}

#[test]
fn tokens_are_counted_as_fts5_counts_them() {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    conn.execute_batch(
        "CREATE VIRTUAL TABLE t USING fts5 (body, tokenize = 'unicode61 remove_diacritics 2')",
    )
    .unwrap();
    let texts = [
        "plain ascii words, with punctuation: src/auth.ts:42 -- done!",
        "emoji 👋🏽 👨‍👩‍👧‍👦 🇩🇪 🏳️‍🌈 ❤️ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛",
        "café naïve façade Ångström e\u{301}e\u{301} a\u{331}b a\u{332}b",
        "Привет, мир! Γειά σου κόσμε. مرحبا بالعالم שלום עולם",
        "中文 日本語 한국어 ｆｕｌｌｗｉｄｔｈ ﾊﾝｶｸ",
        "private \u{e000}\u{e001} use, unassigned \u{40000} and \u{e0041} tags",
        "zero\u{200b}width\u{200d}joiner\u{2060}word nbsp\u{a0}here",
        "numbers ½ ² ⅷ 𝟘 ١٢٣ ௰ and letters ǅ ʰ ˋ",
        "snake_case kebab-case CamelCase dotted.name x86_64 0xFF 3.14",
        "",
        "   ...   ",
    ];
    for (idx, text) in texts.iter().enumerate() {
        let indexed = pi::store::search::index_text(text);
        conn.execute(
            "INSERT INTO t (rowid, body) VALUES (?1, ?2)",
            rusqlite::params![idx as i64 + 1, indexed.as_ref()],
        )
        .unwrap();
        let counted = fts5_token_counts(&conn, "main", "t");
        assert_eq!(
            pi::store::search::token_count(&indexed) as u64,
            counted.get(&(idx as i64 + 1)).copied().unwrap_or(0),
            "{text:?}"
        );
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 64,
        rng_seed: proptest::test_runner::RngSeed::Fixed(2026),
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Random text over letters, digits, marks, symbols, emoji, CJK, private use, unassigned
    /// code points and separators: the count is FTS5's.
    #[test]
    fn random_text_is_counted_as_fts5_counts_it(
        chars in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::char::range('a', 'z'),
                proptest::char::range('0', '9'),
                proptest::char::range(' ', '/'),
                proptest::char::range('\u{300}', '\u{36f}'),
                proptest::char::range('\u{400}', '\u{4ff}'),
                proptest::char::range('\u{2000}', '\u{2bff}'),
                proptest::char::range('\u{3040}', '\u{30ff}'),
                proptest::char::range('\u{4e00}', '\u{4e2f}'),
                proptest::char::range('\u{e000}', '\u{e00f}'),
                proptest::char::range('\u{1f300}', '\u{1faff}'),
                proptest::char::range('\u{30000}', '\u{3134f}'),
                proptest::char::range('\u{e0000}', '\u{e007f}'),
            ],
            0..80,
        )
    ) {
        let text: String = chars.into_iter().collect();
        let indexed = pi::store::search::index_text(&text);
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5 (body, tokenize = 'unicode61 remove_diacritics 2')",
        )
        .unwrap();
        conn.execute("INSERT INTO t (rowid, body) VALUES (1, ?1)", [indexed.as_ref()])
            .unwrap();
        let fts5 = fts5_token_counts(&conn, "main", "t").get(&1).copied().unwrap_or(0);
        let counted = pi::store::search::token_count(&indexed);
        proptest::prop_assert_eq!(counted as u64, fts5, "{:?}", text);
        proptest::prop_assert_eq!(counted, pi::store::search::unicode61::tokens(&indexed).len());
    }
}

#[test]
fn a_directory_or_session_scope_finds_what_the_whole_index_finds_there() {
    let env = TestEnv::new();
    drop(load_all(&env, CORPUS));
    let all_hits = |args: &[&str]| -> Vec<(String, String, String, String)> {
        let mut full = vec!["--json"];
        if !args.contains(&"--cwd") {
            full.push("--all");
        }
        full.extend_from_slice(args);
        let (code, value, stderr) = search(&env, &full);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        let mut found: Vec<_> = value
            .as_array()
            .unwrap()
            .iter()
            .map(|hit| {
                (
                    hit["session"].as_str().unwrap().to_owned(),
                    hit["entry"].as_str().unwrap_or_default().to_owned(),
                    hit["kind"].as_str().unwrap().to_owned(),
                    hit["cwd"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        found.sort();
        found
    };
    let mut compared = 0;
    for query in ["the", "the file", "\"the file\"", "cart OR tax", "read*"] {
        let everywhere = all_hits(&["--limit", "1000", query]);
        let cwds: std::collections::BTreeSet<String> =
            everywhere.iter().map(|hit| hit.3.clone()).collect();
        for cwd in &cwds {
            // A directory's sessions (tested against the set of their documents)...
            let scoped = all_hits(&["--limit", "1000", "--cwd", cwd, query]);
            let expected: Vec<_> = everywhere
                .iter()
                .filter(|hit| &hit.3 == cwd)
                .cloned()
                .collect();
            assert_eq!(scoped, expected, "{query} in {cwd}");
            // ... and the same directory with a role filter (read from the document map).
            let by_role = all_hits(&[
                "--limit",
                "1000",
                "--cwd",
                cwd,
                "--role",
                "user,assistant,tool,meta",
                query,
            ]);
            assert_eq!(by_role, expected, "{query} in {cwd}, every role");
            compared += expected.len();
        }
        for session in everywhere
            .iter()
            .map(|hit| hit.0.clone())
            .collect::<std::collections::BTreeSet<_>>()
        {
            let scoped = all_hits(&["--limit", "1000", "--session", &session, query]);
            let expected: Vec<_> = everywhere
                .iter()
                .filter(|hit| hit.0 == session)
                .cloned()
                .collect();
            assert_eq!(scoped, expected, "{query} in {session}");
        }
    }
    assert!(compared > 30, "{compared}");
}

/// The number of segments of the full-text index. FTS5 has no documented view of this, so
/// this test alone reads its structure record (`%_data` row 10: a 4-byte cookie, a version-2
/// marker when present, then varints: levels, segments, …) — product code never reads FTS5's
/// shadow tables.
fn index_segments(env: &TestEnv) -> u64 {
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    let block: Vec<u8> = conn
        .query_row(
            "SELECT block FROM search_fts_data WHERE id = 10",
            [],
            |row| row.get(0),
        )
        .unwrap();
    let mut rest = &block[4..];
    if let Some(tail) = rest.strip_prefix(&[0xff, 0x00, 0x00, 0x01]) {
        rest = tail;
    }
    let mut varint = || {
        let mut value = 0u64;
        for (idx, byte) in rest.iter().enumerate() {
            value = (value << 7) | u64::from(byte & 0x7F);
            if byte & 0x80 == 0 {
                rest = &rest[idx + 1..];
                return value;
            }
        }
        panic!("a truncated structure record")
    };
    let _levels = varint();
    varint()
}

/// The given fields of each hit of each query's results (to compare results without scores).
fn fields(all: &[Vec<Value>], keys: &[&str]) -> Vec<Vec<Vec<Value>>> {
    all.iter()
        .map(|found| {
            found
                .iter()
                .map(|hit| keys.iter().map(|key| hit[*key].clone()).collect())
                .collect()
        })
        .collect()
}

#[test]
fn an_import_and_a_reindex_leave_the_index_in_one_segment_with_the_same_hits() {
    let queries: [&[&str]; 4] = [
        &["\"float accumulation\""],
        &["the"],
        &["function", "price"],
        &["cart*"],
    ];
    // Stored one session per transaction: one segment each, merged only partly.
    let env = TestEnv::new();
    let store = load_all(&env, CORPUS);
    assert!(index_segments(&env) > 1);
    let before: Vec<Vec<Value>> = queries.iter().map(|query| hits(&env, query)).collect();
    // Nothing grew since: no merge.
    let docs = store.search_index_docs().unwrap();
    assert!(docs > 0);
    assert!(!store.optimize_search_index_after_load(docs).unwrap());
    assert!(index_segments(&env) > 1);
    drop(store);
    succeeded(env.pi().args(["db", "reindex"]));
    assert_eq!(index_segments(&env), 1);
    let after: Vec<Vec<Value>> = queries.iter().map(|query| hits(&env, query)).collect();
    for (query, found) in queries.iter().zip(&before) {
        assert!(!found.is_empty(), "{query:?}");
    }
    assert_eq!(
        fields(&after, &["session", "entry", "snippet"]),
        fields(&before, &["session", "entry", "snippet"])
    );

    // `pi import` of the fixture files: the load is the whole index, so it is merged.
    let env = TestEnv::new();
    succeeded(
        env.pi().args(["import", "--json"]).args(
            CORPUS
                .iter()
                .map(|name| fixtures::dir().join(format!("{name}.jsonl"))),
        ),
    );
    assert_eq!(index_segments(&env), 1);
    let imported: Vec<Vec<Value>> = queries.iter().map(|query| hits(&env, query)).collect();
    // The same hits (the sessions keep their files' ids here, not the fixture names).
    assert_eq!(
        fields(&imported, &["entry", "snippet"]),
        fields(&before, &["entry", "snippet"])
    );
}

/// Imports one session of `count` user messages, entry `i` (id `e{i:05}`) ten minutes after
/// the one before, with the text `text(i)`.
fn import_messages(env: &TestEnv, count: usize, text: impl Fn(usize) -> String) {
    import_session(env, "big-session", "/big", count, text);
}

/// Imports one session of `count` user messages ten minutes apart from 2025-01-01.
fn import_session(
    env: &TestEnv,
    id: &str,
    cwd: &str,
    count: usize,
    text: impl Fn(usize) -> String,
) {
    let start_ms: i64 = 1_735_689_600_000; // 2025-01-01
    let iso = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string()
    };
    let mut lines = vec![
        serde_json::json!({
            "type": "session", "version": 3, "id": id,
            "timestamp": iso(start_ms), "cwd": cwd,
        })
        .to_string(),
    ];
    for idx in 0..count {
        let ms = start_ms + idx as i64 * 600_000;
        let parent = if idx == 0 {
            Value::Null
        } else {
            Value::String(format!("e{:05}", idx - 1))
        };
        lines.push(
            serde_json::json!({
                "type": "message", "id": format!("e{idx:05}"), "parentId": parent,
                "timestamp": iso(ms),
                "message": {"role": "user", "content": text(idx), "timestamp": ms},
            })
            .to_string(),
        );
    }
    let file = env.dir.path().join(format!("{id}.jsonl"));
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    succeeded(env.pi().arg("import").arg(&file));
}

#[test]
fn very_common_and_bounded_queries_both_rank_the_newest_matches_first() {
    // More documents than a very common word's bound (5,000): `alpha` and the phrase `alpha
    // bravo` are in all of them; `beta` in every fourth, `gamma` in every fourth other one.
    let env = TestEnv::new();
    let count = 5_200;
    import_messages(&env, count, |idx| {
        let extra = match idx % 4 {
            0 => " beta",
            2 => " gamma",
            _ => " delta",
        };
        format!("alpha bravo charlie u{idx}{extra}")
    });
    let ids = |found: &[Value]| -> Vec<String> {
        found
            .iter()
            .map(|hit| hit["entry"].as_str().unwrap().to_owned())
            .collect()
    };
    let newest = |keep: &dyn Fn(usize) -> bool, take: usize| -> Vec<String> {
        (0..count)
            .rev()
            .filter(|idx| keep(*idx))
            .take(take)
            .map(|idx| format!("e{idx:05}"))
            .collect()
    };
    // Very common: the newest matches' window, by recency; in the directory's sessions and
    // with a filter (where the walk stops at the hits themselves) too.
    assert_eq!(ids(&hits(&env, &["alpha"])), newest(&|_| true, 20));
    let (code, scoped, stderr) = search(&env, &["--cwd", "/big", "--json", "alpha"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(ids(scoped.as_array().unwrap()), newest(&|_| true, 20));
    assert_eq!(
        ids(&hits(
            &env,
            &["--role", "user", "--limit", "7", "\"alpha bravo\""]
        )),
        newest(&|_| true, 7)
    );
    assert_eq!(
        ids(&hits(&env, &["\"alpha bravo\""])),
        newest(&|_| true, 20)
    );
    // A very common word AND a selective one (1,300 documents: every match walked, forward):
    // equal relevance, so the newest first.
    assert_eq!(
        ids(&hits(&env, &["alpha", "beta", "--limit", "30"])),
        newest(&|idx| idx % 4 == 0, 30)
    );
    // OR of two selective words (2,600 matches, more than the candidate window of 2,000): the
    // window is the newest matches; equal relevance again.
    assert_eq!(
        ids(&hits(&env, &["beta", "OR", "gamma", "--limit", "50"])),
        newest(&|idx| idx % 2 == 0, 50)
    );
    // NOT keeps its left side's bound.
    assert_eq!(
        ids(&hits(&env, &["beta", "NOT", "gamma", "--limit", "5"])),
        newest(&|idx| idx % 4 == 0, 5)
    );
}

/// The words of the corpus below, by how many of its 12,000 messages have them: `alpha` all
/// (1–7 times: a doclist of many pages), `bravo` half (3 times), `delta` a third, `charlie`
/// one in a hundred, `golf` five; `echo foxtrot` and `foxtrot echo` one in fifty each.
fn reader_corpus(idx: usize) -> String {
    let mut words = vec!["alpha"; 1 + idx % 7];
    if idx.is_multiple_of(2) {
        words.extend(["bravo"; 3]);
    }
    if idx.is_multiple_of(3) {
        words.push("delta");
    }
    if idx.is_multiple_of(100) {
        words.push("charlie");
    }
    if idx.is_multiple_of(2500) {
        words.push("golf");
    }
    match idx % 50 {
        0 => words.extend(["echo", "foxtrot"]),
        25 => words.extend(["foxtrot", "echo"]),
        _ => {}
    }
    let unique = format!("u{idx}");
    words.push(&unique);
    words.join(" ")
}

#[test]
fn word_and_phrase_queries_answer_as_they_did_over_segments_and_tombstones() {
    // Every query, in four scopes and at two limits, over one segment, over two, and with a
    // removed session's tombstones: the hits, scores, snippets and order the search of stop 29
    // gave (it read single words joined by AND from FTS5's pages itself, and was tested equal
    // to FTS5 evaluating every query), pinned in `fixtures/search/reader-golden.json`
    // (`PI_BLESS=1` rewrites it).
    let env = TestEnv::new();
    import_session(&env, "big-session", "/big", 12_000, reader_corpus);
    let queries = [
        "charlie",
        "delta",
        "golf",
        "alpha",
        "bravo",
        "nothere",
        "u123",
        "ALPHA",
        "alpha charlie",
        "charlie alpha",
        "delta charlie",
        "alpha bravo",
        "bravo delta",
        "alpha bravo charlie",
        "golf delta",
        "delta golf bravo",
        "u123 alpha",
        "alpha nothere",
        "echo foxtrot",
        "foxtrot echo",
        "\"echo foxtrot\"",
        "alpha alpha",
        "charlie charlie",
        "charlie AND golf",
        "charlie OR golf",
        "charlie NOT golf",
        "char*",
        "delta charlie golf",
        "kilo",
        "alpha kilo",
        "kilo alpha",
        "alpha kilo alpha",
        "kilo bravo",
        "kilo charlie",
        "\"alpha kilo\"",
        "\"kilo alpha\"",
        "\"alpha alpha\"",
        "\"kilo kilo kilo\"",
        "alpha/kilo",
        "\"bravo delta\"",
        "\"alpha kilo bravo\"",
    ];
    let store = env.store();
    let big = pi::model::ids::SessionId::new("big-session".to_owned());
    let answers = |store: &SessionStore, stage: &str| -> Vec<Value> {
        let mut out = Vec::new();
        for query in queries {
            for (scope, session) in [
                (pi::store::ListScope::All, None),
                (pi::store::ListScope::Cwd("/big".to_owned()), None),
                (pi::store::ListScope::Cwd("/other".to_owned()), None),
                (pi::store::ListScope::All, Some(big.clone())),
            ] {
                for limit in [20, 3] {
                    let request = pi::store::search::SearchRequest {
                        query: pi::store::search::Query::parse(query).unwrap(),
                        scope: scope.clone(),
                        session: session.clone(),
                        roles: Vec::new(),
                        kinds: Vec::new(),
                        since_ms: None,
                        until_ms: None,
                        model: None,
                        active_only: false,
                        limit,
                        now_ms: 1_800_000_000_000,
                        highlight: ("[".to_owned(), "]".to_owned()),
                        snippet_width: 80,
                    };
                    let hits: Vec<Value> = store
                        .search(&request)
                        .unwrap()
                        .into_iter()
                        .map(|hit| {
                            serde_json::json!({
                                "session": hit.session.as_str(),
                                "seq": hit.seq,
                                "snippet": hit.snippet,
                                "score": hit.score,
                            })
                        })
                        .collect();
                    if query == "alpha charlie"
                        && session.is_none()
                        && scope == pi::store::ListScope::All
                    {
                        // The comparison is not vacuous.
                        assert_eq!(hits.len(), limit.min(120), "{stage}");
                    }
                    out.push(serde_json::json!({
                        "stage": stage,
                        "query": query,
                        "scope": format!("{scope:?} {session:?}"),
                        "limit": limit,
                        "hits": hits,
                    }));
                }
            }
        }
        out
    };
    let mut got = answers(&store, "one segment");
    assert_eq!(index_segments(&env), 1);
    import_session(&env, "other-session", "/other", 300, |idx| {
        format!("{} charlie golf echo foxtrot", reader_corpus(idx))
    });
    assert!(index_segments(&env) > 1);
    got.extend(answers(&store, "two segments"));
    succeeded(env.pi().args(["sessions", "rm", "other-session", "--yes"]));
    got.extend(answers(&store, "a removed session's tombstones"));
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/search/reader-golden.json");
    if std::env::var_os("PI_BLESS").is_some() {
        std::fs::write(&golden, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
        return;
    }
    let want: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&golden).unwrap()).unwrap();
    assert_eq!(got.len(), want.len());
    for (got, want) in got.iter().zip(&want) {
        let label = format!(
            "{}: {} in {} (limit {})",
            want["stage"], want["query"], want["scope"], want["limit"]
        );
        let strip = |hits: &Value| -> Vec<Value> {
            hits.as_array()
                .unwrap()
                .iter()
                .map(|hit| {
                    let mut hit = hit.clone();
                    hit.as_object_mut().unwrap().remove("score");
                    hit
                })
                .collect()
        };
        assert_eq!(strip(&got["hits"]), strip(&want["hits"]), "{label}");
        // After a removal bm25's totals are the live documents (`search_totals`); the search
        // of stop 29 took FTS5's, which keep counting removed ones: the same hits in the same
        // order, scores apart by up to a few percent (the removed session held 2.4 % of the
        // documents; a word in half of them has an idf that sensitive).
        let tolerance = if want["stage"] == "a removed session's tombstones" {
            0.15
        } else {
            1e-9
        };
        for (got, want) in got["hits"]
            .as_array()
            .unwrap()
            .iter()
            .zip(want["hits"].as_array().unwrap())
        {
            let (got, want) = (
                got["score"].as_f64().unwrap(),
                want["score"].as_f64().unwrap(),
            );
            assert!(
                (got - want).abs() <= want.abs() * tolerance,
                "{label}: score {got}, was {want}"
            );
        }
    }
}

/// A 1.6.0 session: a system message whose sections hold a word no conversation holds, a failed
/// attempt omitted by a `context_edit`, a tool log replaced by one, and an edit on a branch the
/// leaf left.
const EDITED_SESSION: &str = concat!(
    r#"{"type":"session","version":3,"id":"edited-1","timestamp":"2026-10-01T10:00:00.000Z","cwd":"/w"}"#,
    "\n",
    r#"{"type":"message","id":"s1","parentId":null,"timestamp":"2026-10-01T10:00:00.000Z","message":{"role":"system","content":"","sections":{"preamble":"You are zanzibarquux, a helper."},"timestamp":1,"toolsAdded":[{"name":"read","description":"Read a file","parameters":{}}]}}"#,
    "\n",
    r#"{"type":"message","id":"u1","parentId":"s1","timestamp":"2026-10-01T10:00:01.000Z","message":{"role":"user","content":"find the velociraptor","timestamp":2}}"#,
    "\n",
    r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-10-01T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"broken pterodactyl answer"}],"api":"openai-completions","provider":"p","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"error","timestamp":3,"errorMessage":"Connection closed."}}"#,
    "\n",
    r#"{"type":"context_edit","id":"e1","parentId":"a1","timestamp":"2026-10-01T10:00:03.000Z","targetId":"a1","replacement":null}"#,
    "\n",
    r#"{"type":"message","id":"a2","parentId":"e1","timestamp":"2026-10-01T10:00:04.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"x"}}],"api":"openai-completions","provider":"p","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":5}}"#,
    "\n",
    r#"{"type":"message","id":"t1","parentId":"a2","timestamp":"2026-10-01T10:00:05.000Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"a long brontosaurus log"}],"isError":false,"timestamp":6}}"#,
    "\n",
    r#"{"type":"context_edit","id":"e2","parentId":"t1","timestamp":"2026-10-01T10:00:06.000Z","targetId":"t1","replacement":{"content":"[elided]"}}"#,
    "\n",
    r#"{"type":"message","id":"a3","parentId":"e2","timestamp":"2026-10-01T10:00:07.000Z","message":{"role":"assistant","content":[{"type":"text","text":"the triceratops is found"}],"api":"openai-completions","provider":"p","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":8}}"#,
    "\n",
    r#"{"type":"context_edit","id":"e3","parentId":"t1","timestamp":"2026-10-01T10:00:08.000Z","targetId":"a3","replacement":null}"#,
    "\n",
    r#"{"type":"message","id":"u2","parentId":"a3","timestamp":"2026-10-01T10:00:09.000Z","message":{"role":"user","content":"thanks","timestamp":9}}"#,
    "\n",
);

#[test]
fn text_an_edit_removed_from_the_context_stays_searchable_and_says_so() {
    let env = TestEnv::new();
    let file = env.workspace.join("edited.jsonl");
    std::fs::write(&file, EDITED_SESSION).unwrap();
    succeeded(env.pi().arg("import").arg(&file));

    // The prompt is not conversation.
    assert!(hits(&env, &["zanzibarquux"]).is_empty());
    // The omitted attempt is history: found, and marked.
    let found = hits(&env, &["pterodactyl"]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["entry"], "a1");
    assert_eq!(found[0]["contextEdit"], "omitted");
    let found = hits(&env, &["brontosaurus"]);
    assert_eq!(found[0]["entry"], "t1");
    assert_eq!(found[0]["contextEdit"], "replaced");
    // An edit on a branch the leaf does not follow (e3 hangs off t1, the leaf is u2 after a3)
    // does not mark its target.
    let found = hits(&env, &["triceratops"]);
    assert_eq!(found[0]["entry"], "a3");
    assert_eq!(found[0]["contextEdit"], Value::Null);
    assert_eq!(found[0]["onActivePath"], true);
    // The conversation as sent is unedited where no edit applies.
    let found = hits(&env, &["velociraptor"]);
    assert_eq!(found[0]["contextEdit"], Value::Null);

    // Text output says it too.
    let out = succeeded(
        env.pi()
            .args(["sessions", "search", "--all", "pterodactyl"]),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("omitted from the context"), "{text}");
}
