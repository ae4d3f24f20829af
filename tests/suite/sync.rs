//! `pi remote` and `pi sync` against a real PostgreSQL server (`tests/common/postgres.rs`:
//! one throwaway cluster per test process, a database per test): two agent dirs ("two
//! people") sync through one server, remote search, list and stats, conflicts refused, killed
//! syncs and a server stopped mid-sync completed by the next sync, TLS and passwords.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::postgres::{self, Cluster};
use crate::common::{TestEnv, bulk_session_file, stdout_json, succeeded};

/// One person's agent dir, with `sync.user` and `sync.host` set.
fn person(user: &str, host: &str) -> TestEnv {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("settings.json"),
        json!({"sync": {"user": user, "host": host}}).to_string(),
    )
    .unwrap();
    env
}

/// A session file: user and assistant messages in turn, the user's saying `texts`.
fn session_file(path: &Path, id: &str, cwd: &str, texts: &[&str]) {
    let mut lines = vec![
        json!({"type": "session", "version": 3, "id": id, "timestamp": "2026-02-01T10:00:00.000Z", "cwd": cwd}),
    ];
    let mut parent = Value::Null;
    for (n, text) in texts.iter().enumerate() {
        let user_id = format!("{:08x}", 2 * n + 1);
        let reply_id = format!("{:08x}", 2 * n + 2);
        lines.push(json!({"type": "message", "id": user_id, "parentId": parent,
            "timestamp": format!("2026-02-01T10:{:02}:00.000Z", n % 60),
            "message": {"role": "user", "content": text, "timestamp": 1}}));
        lines.push(json!({"type": "message", "id": reply_id, "parentId": user_id,
            "timestamp": format!("2026-02-01T10:{:02}:30.000Z", n % 60),
            "message": {"role": "assistant", "content": [{"type": "text", "text": format!("done: {text}")}],
                "api": "openai-completions", "provider": "acme", "model": "m1",
                "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                          "cost": {"input": 0.01, "output": 0.02, "cacheRead": 0, "cacheWrite": 0, "total": 0.03}},
                "stopReason": "stop", "timestamp": 2}}));
        parent = Value::String(reply_id);
    }
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(path, text).unwrap();
}

fn import(env: &TestEnv, file: &Path) {
    succeeded(env.pi().arg("import").arg(file));
}

fn add_remote(env: &TestEnv, name: &str, url: &str) {
    succeeded(env.pi().args(["remote", "add", name, url]));
}

fn sync(env: &TestEnv, args: &[&str]) -> Output {
    env.pi()
        .arg("sync")
        .args(args)
        .output()
        .expect("run pi sync")
}

fn synced(env: &TestEnv, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    stdout_json(&succeeded(env.pi().arg("sync").args(&all)))
}

fn hex_bytes(text: &str) -> Vec<u8> {
    (0..text.len() / 2)
        .map(|idx| u8::from_str_radix(&text[2 * idx..2 * idx + 2], 16).unwrap())
        .collect()
}

/// The archive's payloads of a session, in seq order.
fn remote_payloads(cluster: &Cluster, url: &str, session: &str) -> Vec<Vec<u8>> {
    // A sync killed before its schema was created leaves no table yet.
    if cluster.psql(url, "SELECT to_regclass('pi_entries') IS NULL") == "t" {
        return Vec::new();
    }
    let out = cluster.psql(
        url,
        &format!(
            "SELECT encode(payload, 'hex') FROM pi_entries WHERE session_id = '{session}' ORDER BY seq"
        ),
    );
    out.lines()
        .filter(|line| !line.is_empty())
        .map(hex_bytes)
        .collect()
}

/// A local session's payloads, in seq order.
fn local_payloads(env: &TestEnv, session: &str) -> Vec<Vec<u8>> {
    let store = env.store();
    store
        .entries(&pi::model::SessionId::new(session.to_owned()))
        .map(|entries| entries.into_iter().map(|stored| stored.payload).collect())
        .unwrap_or_default()
}

/// Asserts two payload lists are equal, naming the first difference (never printing them).
fn assert_same(left: &[Vec<u8>], right: &[Vec<u8>], what: &str) {
    let first = left.iter().zip(right).position(|(a, b)| a != b);
    assert!(
        left.len() == right.len() && first.is_none(),
        "{what}: {} vs {} entries, first difference at {first:?}",
        left.len(),
        right.len()
    );
}

fn listed(env: &TestEnv, extra: &[&str]) -> Vec<String> {
    let output = succeeded(
        env.pi()
            .args(["sessions", "list", "--all", "--json"])
            .args(extra),
    );
    stdout_json(&output)
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["session"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn two_people_sync_through_one_server_and_search_each_other() {
    let cluster = postgres::shared();
    let url = cluster.database("two");
    let alice = person("alice", "laptop");
    let bob = person("bob", "devbox");
    let a_file = alice.dir.path().join("a.jsonl");
    session_file(
        &a_file,
        "aaaaaaaa-0000-4000-8000-000000000001",
        "/work/deploy",
        &["the flaky deploy failed again", "retry the canary"],
    );
    import(&alice, &a_file);
    let b_file = bob.dir.path().join("b.jsonl");
    session_file(
        &b_file,
        "bbbbbbbb-0000-4000-8000-000000000002",
        "/work/db",
        &["vacuum the orders table", "explain the slow query"],
    );
    import(&bob, &b_file);
    add_remote(&alice, "team", &url);
    add_remote(&bob, "team", &url);

    let first = synced(&alice, &[]);
    assert_eq!(first["pushed"]["entries"], 4, "{first}");
    assert_eq!(first["user"], "alice");
    let second = synced(&bob, &[]);
    assert_eq!(second["pushed"]["entries"], 4, "{second}");
    assert_eq!(second["pulled"]["entries"], 4, "{second}");
    let third = synced(&alice, &[]);
    assert_eq!(third["pulled"]["entries"], 4, "{third}");
    assert_eq!(third["pushed"]["entries"], 0, "{third}");
    // The documents' tsvectors pi built are what the server's own parser makes of the text.
    assert_eq!(
        cluster.psql(
            &url,
            "SELECT count(*), count(*) FILTER (WHERE tsv <> to_tsvector('simple', body)) FROM pi_docs"
        ),
        "8|0"
    );

    // Each sees the other's session locally, byte for byte as the owner stored it.
    for (env, other) in [
        (&alice, "bbbbbbbb-0000-4000-8000-000000000002"),
        (&bob, "aaaaaaaa-0000-4000-8000-000000000001"),
    ] {
        assert!(listed(env, &[]).contains(&other.to_owned()));
        assert_same(
            &local_payloads(env, other),
            &remote_payloads(cluster, &url, other),
            other,
        );
    }
    // Local search finds the other person's phrase offline; `sessions show` reads it.
    let hits = stdout_json(&succeeded(bob.pi().args([
        "sessions",
        "search",
        "--all",
        "--json",
        "\"flaky deploy\"",
    ])));
    assert_eq!(
        hits[0]["session"], "aaaaaaaa-0000-4000-8000-000000000001",
        "{hits}"
    );
    let shown = String::from_utf8(
        succeeded(
            bob.pi()
                .args(["sessions", "show", "aaaaaaaa-0000-4000-8000-000000000001"]),
        )
        .stdout,
    )
    .unwrap();
    assert!(shown.contains("retry the canary"), "{shown}");

    // Pulled sessions are read-only here: continuing one is refused, naming the fork.
    let resumed = bob
        .pi()
        .args([
            "--session",
            "aaaaaaaa-0000-4000-8000-000000000001",
            "-p",
            "go on",
        ])
        .output()
        .unwrap();
    assert_eq!(resumed.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(
        stderr.contains("pulled from remote team (alice@laptop) and is read-only here")
            && stderr.contains("pi --fork aaaaaaaa-0000-4000-8000-000000000001"),
        "{stderr}"
    );

    // Remote search finds a phrase of either, with who pushed it.
    for (phrase, session, user) in [
        (
            "\"flaky deploy\"",
            "aaaaaaaa-0000-4000-8000-000000000001",
            "alice",
        ),
        (
            "\"slow query\"",
            "bbbbbbbb-0000-4000-8000-000000000002",
            "bob",
        ),
    ] {
        let hits = stdout_json(&succeeded(alice.pi().args([
            "sessions", "search", "--remote", "team", "--role", "user", "--json", phrase,
        ])));
        let hits = hits.as_array().unwrap();
        assert!(!hits.is_empty(), "{phrase}");
        assert_eq!(hits[0]["session"], session);
        assert_eq!(hits[0]["user"], user);
        assert_eq!(hits[0]["role"], "user");
        assert!(
            hits[0]["snippet"].as_str().unwrap().contains("**"),
            "{hits:?}"
        );
        for key in [
            "entry",
            "kind",
            "score",
            "cwd",
            "timestamp",
            "name",
            "onActivePath",
        ] {
            assert!(hits[0].get(key).is_some(), "{key} missing");
        }
    }
    // Query syntax as locally: prefix, OR, NOT; and the user filter.
    let hits = stdout_json(&succeeded(bob.pi().args([
        "sessions", "search", "--remote", "team", "--json", "vacu*", "OR", "canary", "NOT", "retry",
    ])));
    let mut sessions: Vec<&str> = hits
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["session"].as_str().unwrap())
        .collect();
    sessions.dedup();
    assert_eq!(sessions, ["bbbbbbbb-0000-4000-8000-000000000002"], "{hits}");
    let hits = stdout_json(&succeeded(bob.pi().args([
        "sessions", "search", "--remote", "team", "--user", "bob", "--json", "deploy",
    ])));
    assert_eq!(hits, json!([]));

    // Listing and totals on the server.
    let remote = listed(&alice, &["--remote", "team"]);
    assert_eq!(remote.len(), 2);
    let only_bob = listed(&alice, &["--remote", "team", "--user", "bob"]);
    assert_eq!(only_bob, ["bbbbbbbb-0000-4000-8000-000000000002"]);
    let stats = stdout_json(&succeeded(alice.pi().args([
        "sessions", "stats", "--remote", "team", "--by", "user", "--json",
    ])));
    assert_eq!(
        stats,
        json!([
            {"key": "alice", "sessions": 1, "messages": 4, "input": 20, "output": 10, "cacheRead": 0, "cacheWrite": 0, "cost": 0.06},
            {"key": "bob", "sessions": 1, "messages": 4, "input": 20, "output": 10, "cacheRead": 0, "cacheWrite": 0, "cost": 0.06},
        ])
    );
    let by_model = stdout_json(&succeeded(alice.pi().args([
        "sessions", "stats", "--remote", "team", "--by", "model", "--json",
    ])));
    let keys: Vec<&str> = by_model
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["(no model)", "acme/m1"]);
    let by_day = stdout_json(&succeeded(alice.pi().args([
        "sessions", "stats", "--remote", "team", "--by", "day", "--json",
    ])));
    assert_eq!(by_day[0]["key"], "2026-02-01");

    // Up to date: nothing to push or pull, both ways.
    for env in [&alice, &bob] {
        let report = synced(env, &[]);
        assert_eq!(report["pushed"]["entries"], 0, "{report}");
        assert_eq!(report["pulled"]["entries"], 0, "{report}");
    }
    // Alice's session grows: her next sync pushes only the new entries, bob's pulls them.
    session_file(
        &a_file,
        "aaaaaaaa-0000-4000-8000-000000000001",
        "/work/deploy",
        &[
            "the flaky deploy failed again",
            "retry the canary",
            "pin the image",
        ],
    );
    import(&alice, &a_file);
    let grown = synced(&alice, &[]);
    assert_eq!(grown["pushed"]["entries"], 2, "{grown}");
    let pulled = synced(&bob, &[]);
    assert_eq!(pulled["pulled"]["entries"], 2, "{pulled}");
    assert_same(
        &local_payloads(&bob, "aaaaaaaa-0000-4000-8000-000000000001"),
        &local_payloads(&alice, "aaaaaaaa-0000-4000-8000-000000000001"),
        "grown",
    );
    // A pulled session is never pushed back under the puller's name.
    assert_eq!(
        cluster.psql(&url, "SELECT user_name FROM pi_sessions ORDER BY id"),
        "alice\nbob"
    );
}

#[test]
fn a_conflicting_payload_is_refused_and_never_overwritten() {
    let cluster = postgres::shared();
    let url = cluster.database("conflict");
    let alice = person("alice", "laptop");
    let mallory = person("mallory", "elsewhere");
    let id = "cccccccc-0000-4000-8000-000000000003";
    let file = alice.dir.path().join("c.jsonl");
    session_file(&file, id, "/w", &["the original words"]);
    import(&alice, &file);
    add_remote(&alice, "team", &url);
    synced(&alice, &[]);
    let before = remote_payloads(cluster, &url, id);

    // Same session id, same seq, other bytes.
    let other = mallory.dir.path().join("c.jsonl");
    session_file(&other, id, "/w", &["rewritten history"]);
    import(&mallory, &other);
    add_remote(&mallory, "team", &url);
    let output = sync(&mallory, &["--json", "--push"]);
    assert_eq!(output.status.code(), Some(1));
    let report = stdout_json(&output);
    assert_eq!(report["conflicts"][0]["session"], id, "{report}");
    assert_eq!(report["conflicts"][0]["direction"], "push");
    assert!(
        report["conflicts"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("seq 0"),
        "{report}"
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("conflict"));
    assert_same(&remote_payloads(cluster, &url, id), &before, id);
    let human = sync(&mallory, &["--push"]);
    assert!(
        String::from_utf8_lossy(&human.stdout).contains("nothing was overwritten"),
        "{}",
        String::from_utf8_lossy(&human.stdout)
    );
    assert_same(&remote_payloads(cluster, &url, id), &before, id);
}

/// SplitMix64, for the kill moments.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn kill_after(env: &TestEnv, args: &[&str], vars: &[(&str, &str)], delay: Duration) -> bool {
    let mut cmd = env.pi_process();
    cmd.arg("sync").args(args);
    for (key, value) in vars {
        cmd.env(key, value);
    }
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn pi sync");
    std::thread::sleep(delay);
    let finished = child.try_wait().unwrap().is_some();
    let _ = child.kill();
    let _ = child.wait();
    finished
}

#[test]
fn a_sync_killed_at_random_moments_ends_with_both_sides_equal() {
    let cluster = postgres::shared();
    let url = cluster.database("killed");
    let alice = person("alice", "laptop");
    let bob = person("bob", "devbox");
    let ids: Vec<String> = (0..3)
        .map(|n| format!("dddddddd-0000-4000-8000-00000000000{n}"))
        .collect();
    for (n, id) in ids.iter().enumerate() {
        let file = alice.dir.path().join(format!("k{n}.jsonl"));
        bulk_session_file(&file, id, 400 + 100 * n, 200);
        import(&alice, &file);
    }
    add_remote(&alice, "team", &url);
    add_remote(&bob, "team", &url);
    let small = [("PI_SYNC_BATCH_ENTRIES", "7"), ("PI_SYNC_PULL_BATCH", "9")];
    let mut seed = 0x5eed_u64;
    let mut completed = 0;
    for round in 0..20 {
        let delay = Duration::from_millis(20 + next(&mut seed) % 400);
        let (env, args): (&TestEnv, &[&str]) = if round % 2 == 0 {
            (&alice, &["--push"])
        } else {
            (&bob, &["--pull"])
        };
        if kill_after(env, args, &small, delay) {
            completed += 1;
        }
        // Whatever the moment: the archive holds a prefix of each of alice's sessions, and
        // bob a prefix of the archive's.
        for id in &ids {
            let local = local_payloads(&alice, id);
            let remote = remote_payloads(cluster, &url, id);
            assert!(remote.len() <= local.len());
            assert_same(
                &remote,
                &local[..remote.len()],
                &format!("round {round}: {id}"),
            );
            let pulled = local_payloads(&bob, id);
            assert!(pulled.len() <= remote.len(), "round {round}: {id}");
            assert_same(
                &pulled,
                &remote[..pulled.len()],
                &format!("round {round}: {id}"),
            );
        }
    }
    assert!(completed < 20, "every sync finished before its kill");
    synced(&alice, &[]);
    synced(&bob, &[]);
    for id in &ids {
        let local = local_payloads(&alice, id);
        assert_same(&remote_payloads(cluster, &url, id), &local, id);
        assert_same(&local_payloads(&bob, id), &local, id);
    }
    let counts = cluster.psql(
        &url,
        "SELECT sum(entries)::text || ' ' || (SELECT count(*) FROM pi_entries)::text FROM pi_sessions",
    );
    assert_eq!(
        counts, "1500 1500",
        "the session counters count each entry once"
    );
}

#[test]
fn a_server_stopped_mid_sync_is_reported_and_the_retry_completes() {
    let cluster = Cluster::start();
    let url = cluster.database("restart");
    let alice = person("alice", "laptop");
    let id = "eeeeeeee-0000-4000-8000-000000000005";
    let file = alice.dir.path().join("r.jsonl");
    bulk_session_file(&file, id, 3_000, 100);
    import(&alice, &file);
    add_remote(&alice, "team", &url);
    let mut cmd = alice.pi_process();
    cmd.args(["sync", "--push"])
        .env("PI_SYNC_BATCH_ENTRIES", "5")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let count = std::process::Command::new("psql")
            .arg(format!("{url}?sslmode=disable"))
            .args(["-X", "-A", "-t", "-c", "SELECT count(*) FROM pi_entries"])
            .output()
            .map(|out| {
                String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0)
            })
            .unwrap_or(0);
        if count > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the sync never stored a batch");
        std::thread::sleep(Duration::from_millis(20));
    }
    cluster.stop_server();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("run `pi sync team` again to complete it"),
        "{stderr}"
    );
    cluster.start_server();
    let report = synced(&alice, &[]);
    assert!(
        report["pushed"]["entries"].as_i64().unwrap() > 0,
        "{report}"
    );
    assert_same(
        &remote_payloads(&cluster, &url, id),
        &local_payloads(&alice, id),
        id,
    );
    cluster.stop_server();
}

#[test]
fn an_archive_from_a_newer_pi_is_refused_untouched() {
    let cluster = postgres::shared();
    let url = cluster.database("newer");
    let alice = person("alice", "laptop");
    let file = alice.dir.path().join("n.jsonl");
    session_file(
        &file,
        "ffffffff-0000-4000-8000-000000000006",
        "/w",
        &["hello"],
    );
    import(&alice, &file);
    add_remote(&alice, "team", &url);
    synced(&alice, &["--pull"]);
    assert_eq!(
        cluster.psql(
            &url,
            "SELECT version FROM pi_schema_migrations ORDER BY version"
        ),
        "1\n2"
    );
    cluster.psql(
        &url,
        "INSERT INTO pi_schema_migrations (version, name) VALUES (99, '0099_future.sql')",
    );
    let output = sync(&alice, &[]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("version 99, newer than this pi's 2"),
        "{stderr}"
    );
    assert_eq!(cluster.psql(&url, "SELECT count(*) FROM pi_entries"), "0");
    let search = alice
        .pi()
        .args(["sessions", "search", "--remote", "team", "hello"])
        .output()
        .unwrap();
    assert_eq!(search.status.code(), Some(1));
}

#[test]
fn tls_and_passwords_come_from_the_url_pgpassword_or_pgpass() {
    let cluster = postgres::shared();
    let Some(ca) = &cluster.ca else {
        // PI_TEST_PG_URL names a server this test did not configure for TLS.
        return;
    };
    let url = cluster.database("tls");
    let db = url.rsplit('/').next().unwrap().to_owned();
    let port = cluster.port;
    let alice = person("alice", "laptop");
    let file = alice.dir.path().join("t.jsonl");
    session_file(
        &file,
        "abababab-0000-4000-8000-000000000007",
        "/w",
        &["over tls"],
    );
    import(&alice, &file);
    let plain_user = format!("postgres://{}@localhost:{port}/{db}", postgres::SUPERUSER);
    // verify-full against the test CA, password from PGPASSWORD.
    let verified = format!(
        "{plain_user}?sslmode=verify-full&sslrootcert={}",
        ca.display()
    );
    add_remote(&alice, "full", &verified);
    let output = alice
        .pi()
        .args(["sync", "full", "--push", "--json"])
        .env("PGPASSWORD", postgres::PASSWORD)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout_json(&output)["pushed"]["entries"], 2);
    // The same with a CA that did not sign the server's certificate: refused.
    let stranger = alice.dir.path().join("stranger.pem");
    std::fs::write(&stranger, std::fs::read(ca).unwrap()).unwrap();
    let other_ca = Cluster::other_ca(&alice.dir.path().join("other"));
    let wrong = format!(
        "{plain_user}?sslmode=verify-full&sslrootcert={}",
        other_ca.display()
    );
    add_remote(&alice, "wrong", &wrong);
    let output = alice
        .pi()
        .args(["sync", "wrong", "--push"])
        .env("PGPASSWORD", postgres::PASSWORD)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("certificate"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // require (no verification), password from ~/.pgpass.
    use std::os::unix::fs::PermissionsExt;
    let pgpass = alice.home.join(".pgpass");
    std::fs::write(
        &pgpass,
        format!(
            "localhost:{port}:{db}:{}:{}\n",
            postgres::SUPERUSER,
            postgres::PASSWORD
        ),
    )
    .unwrap();
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
    add_remote(&alice, "req", &format!("{plain_user}?sslmode=require"));
    let report = synced(&alice, &["req"]);
    assert_eq!(report["pushed"]["entries"], 0, "{report}");
    // Without any password: refused by the server, reported.
    std::fs::remove_file(&pgpass).unwrap();
    let output = sync(&alice, &["req"]);
    assert_eq!(output.status.code(), Some(1));
    // The server saw TLS connections.
    let _ = std::fs::remove_file(&stranger);
}

#[test]
fn remotes_are_added_listed_with_passwords_hidden_and_removed() {
    let env = person("alice", "laptop");
    add_remote(
        &env,
        "team",
        "postgres://alice:s3cret@db.example:5432/team?sslmode=require",
    );
    let list = stdout_json(&succeeded(env.pi().args(["remote", "list", "--json"])));
    assert_eq!(
        list,
        json!([{"name": "team", "url": "postgres://alice:***@db.example:5432/team?sslmode=require", "passwordCommand": false}])
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(env.agent_dir.join("remotes.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let again = env
        .pi()
        .args(["remote", "add", "team", "postgres://h/db"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    let bad = env
        .pi()
        .args(["remote", "add", "x", "postgres://h/db?sslmode=sometimes"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    succeeded(env.pi().args(["remote", "rm", "team"]));
    let list = stdout_json(&succeeded(env.pi().args(["remote", "list", "--json"])));
    assert_eq!(list, json!([]));
    let none = env.pi().args(["sync"]).output().unwrap();
    assert_eq!(none.status.code(), Some(2));
}

#[test]
fn the_archive_migrations_match_their_folder() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("migrations/postgres");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".sql"))
        .collect();
    files.sort();
    let embedded: Vec<&str> = pi::remote::schema::MIGRATIONS
        .iter()
        .map(|migration| migration.name)
        .collect();
    assert_eq!(files, embedded);
    for (idx, migration) in pi::remote::schema::MIGRATIONS.iter().enumerate() {
        assert_eq!(migration.version, idx as i64 + 1);
        assert_eq!(
            std::fs::read_to_string(dir.join(migration.name)).unwrap(),
            migration.sql
        );
    }
}

/// The ```sql blocks of docs/SYNC.md, in order, with its role and database names suffixed
/// (roles are the cluster's, shared by every database) and each `'…'` password `password`.
fn docs_sql_blocks(suffix: &str, password: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/SYNC.md"))
        .expect("docs/SYNC.md");
    let names =
        regex::Regex::new(r"\b(pi_owner|pi_archive|pi_writers|pi_readers|alice|bob|auditor)\b")
            .unwrap();
    doc.split("```sql\n")
        .skip(1)
        .map(|block| {
            let sql = block.split("```").next().unwrap_or_default();
            let sql = names.replace_all(sql, |caps: &regex::Captures<'_>| {
                format!("{}_{suffix}", &caps[1])
            });
            sql.replace("'…'", &format!("'{password}'"))
        })
        .collect()
}

/// Runs a SQL script as the superuser with psql (`\c` and all), in `db` (a name or a URL).
fn psql_script(cluster: &Cluster, db: &str, sql: &str, dir: &Path) {
    let url = if db.starts_with("postgres://") {
        db.to_owned()
    } else {
        format!("{}{db}", cluster.base_url)
    };
    let file = dir.join("script.sql");
    std::fs::write(&file, sql).unwrap();
    let output = std::process::Command::new("psql")
        .arg(format!("{url}?sslmode=disable"))
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-f"])
        .arg(&file)
        .output()
        .expect("psql");
    assert!(
        output.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The URL of a role of the docs' SQL on its database.
fn role_url(cluster: &Cluster, role: &str, password: &str, db: &str) -> String {
    let after = cluster
        .base_url
        .rsplit_once('@')
        .map_or("", |(_, rest)| rest);
    format!("postgres://{role}:{password}@{after}{db}?sslmode=disable")
}

fn remote_sessions(env: &TestEnv) -> Vec<String> {
    let mut ids = listed(env, &["--remote", "team"]);
    ids.sort();
    ids
}

#[test]
fn the_docs_roles_and_row_level_security_work_as_written() {
    let cluster = postgres::shared();
    let suffix = format!("{}", std::process::id());
    let password = "docs-role-secret";
    let blocks = docs_sql_blocks(&suffix, password);
    assert_eq!(
        blocks.len(),
        3,
        "docs/SYNC.md's sql blocks: roles, grants, row-level security"
    );
    let db = format!("pi_archive_{suffix}");
    let role = |name: &str| format!("{name}_{suffix}");
    let scratch = TestEnv::new();
    std::fs::create_dir_all(&scratch.agent_dir).unwrap();

    // 1. Roles and the database, as a superuser.
    psql_script(cluster, "postgres", &blocks[0], scratch.dir.path());
    // The owner's first sync creates the tables.
    let owner = person(&role("pi_owner"), "server");
    add_remote(
        &owner,
        "team",
        &role_url(cluster, &role("pi_owner"), password, &db),
    );
    synced(&owner, &[]);
    // 2. The grants.
    psql_script(cluster, &db, &blocks[1], scratch.dir.path());

    let alice = person(&role("alice"), "laptop");
    let bob = person(&role("bob"), "devbox");
    let auditor = person(&role("auditor"), "office");
    for (env, name) in [(&alice, "alice"), (&bob, "bob"), (&auditor, "auditor")] {
        add_remote(env, "team", &role_url(cluster, &role(name), password, &db));
    }
    let a1 = "a1a1a1a1-0000-4000-8000-000000000001";
    let b1 = "b1b1b1b1-0000-4000-8000-000000000001";
    for (env, id, text) in [
        (&alice, a1, "the flaky deploy of alice"),
        (&bob, b1, "the slow query of bob"),
    ] {
        let file = env.dir.path().join(format!("{id}.jsonl"));
        session_file(&file, id, "/work", &[text]);
        import(env, &file);
        assert_eq!(synced(env, &["--push"])["pushed"]["entries"], 2);
    }
    // A reader searches everything, and cannot push.
    let hits = stdout_json(&succeeded(auditor.pi().args([
        "sessions",
        "search",
        "--remote",
        "team",
        "--json",
        "\"flaky deploy\"",
    ])));
    assert_eq!(hits[0]["session"], a1, "{hits}");
    assert_eq!(remote_sessions(&auditor), [a1, b1]);
    let c1 = "c1c1c1c1-0000-4000-8000-000000000001";
    let file = auditor.dir.path().join("c1.jsonl");
    session_file(&file, c1, "/work", &["an auditor's own session"]);
    import(&auditor, &file);
    let refused = sync(&auditor, &["--push"]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("permission denied"), "{stderr}");
    // Without row-level security a writer sees everyone's sessions.
    assert_eq!(remote_sessions(&alice), [a1, b1]);

    // 3. Row-level security by user.
    psql_script(cluster, &db, &blocks[2], scratch.dir.path());
    assert_eq!(remote_sessions(&alice), [a1]);
    assert_eq!(remote_sessions(&bob), [b1]);
    assert_eq!(remote_sessions(&auditor), [a1, b1]);
    let hits = stdout_json(&succeeded(bob.pi().args([
        "sessions",
        "search",
        "--remote",
        "team",
        "--json",
        "\"flaky deploy\"",
    ])));
    assert_eq!(hits, json!([]), "bob does not find alice's phrase");
    // A new session pushed under row-level security (its row before its entries), and a
    // grown one.
    let a2 = "a2a2a2a2-0000-4000-8000-000000000002";
    let file = alice.dir.path().join("a2.jsonl");
    session_file(&file, a2, "/work", &["a second session", "with two turns"]);
    import(&alice, &file);
    let report = synced(&alice, &["--push"]);
    assert_eq!(report["pushed"]["entries"], 4, "{report}");
    assert_eq!(remote_sessions(&alice), [a1, a2]);
    assert_eq!(
        cluster.psql(
            &db,
            &format!("SELECT entries FROM pi_sessions WHERE id = '{a2}'")
        ),
        "4"
    );
    // Pulls see only what the policies let through.
    let pulled = synced(&bob, &["--pull"]);
    assert_eq!(pulled["pulled"]["entries"], 0, "{pulled}");
    // A push under another person's name is refused by the server.
    std::fs::write(
        alice.agent_dir.join("settings.json"),
        json!({"sync": {"user": role("bob"), "host": "laptop"}}).to_string(),
    )
    .unwrap();
    let a3 = "a3a3a3a3-0000-4000-8000-000000000003";
    let file = alice.dir.path().join("a3.jsonl");
    session_file(&file, a3, "/work", &["pretending to be bob"]);
    import(&alice, &file);
    let refused = sync(&alice, &["--push", "--session", a3]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("row-level security"), "{stderr}");
    assert_eq!(
        cluster.psql(
            &db,
            &format!("SELECT count(*) FROM pi_entries WHERE session_id = '{a3}'")
        ),
        "0"
    );
}

/// Reads JSON lines from an RPC process until the response with `id`.
fn rpc_response(lines: &mut impl Iterator<Item = std::io::Result<String>>, id: &str) -> Value {
    for line in lines {
        let value: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if value["type"] == "response" && value["id"] == id {
            return value;
        }
    }
    panic!("no response {id}");
}

#[test]
fn a_pulled_session_is_refused_by_continue_resume_session_and_switch_alike() {
    use std::io::{BufRead, BufReader, Write};
    let cluster = postgres::shared();
    let url = cluster.database("pulled");
    let alice = person("alice", "laptop");
    let bob = person("bob", "devbox");
    // Alice's session has bob's working directory: it is the latest one there once pulled.
    let id = "cccccccc-0000-4000-8000-000000000003";
    let file = alice.dir.path().join("c.jsonl");
    session_file(
        &file,
        id,
        &bob.workspace.to_string_lossy(),
        &["alice wrote this"],
    );
    import(&alice, &file);
    add_remote(&alice, "team", &url);
    add_remote(&bob, "team", &url);
    synced(&alice, &["--push"]);
    assert_eq!(synced(&bob, &["--pull"])["pulled"]["entries"], 2);
    let refused = |stderr: &str| {
        stderr.contains("pulled from remote team (alice@laptop) and is read-only here")
            && stderr.contains(&format!("pi --fork {id}"))
    };
    let before = local_payloads(&bob, id);

    // -c / --continue and --session, in print mode.
    for args in [
        vec!["-c", "-p", "go on"],
        vec!["--continue", "-p", "go on"],
        vec!["--session", id, "-p", "go on"],
        vec!["--session", &id[..8], "-p", "go on"],
    ] {
        let output = bob.pi().args(&args).output().unwrap();
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(refused(&stderr), "{args:?}: {stderr}");
    }

    // RPC switch_session: an error, the current session stays.
    let mut child = bob
        .pi_process()
        .args(["--mode", "rpc"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    writeln!(
        stdin,
        "{}",
        json!({"id": "w1", "type": "switch_session", "sessionPath": id})
    )
    .unwrap();
    stdin.flush().unwrap();
    let switched = rpc_response(&mut lines, "w1");
    assert_eq!(switched["success"], false, "{switched}");
    assert!(refused(switched["error"].as_str().unwrap()), "{switched}");
    drop(stdin);
    assert!(child.wait().unwrap().success());

    // The REPL: -r, then /resume, refuse it and stay where they were.
    let tmux = crate::common::tmux::Tmux::start(&bob, "pulled", &["-r"], &[]);
    tmux.wait_for("Resume (number or id");
    tmux.line(id);
    tmux.wait_for("pulled from remote team (alice@laptop) and is read-only here");
    tmux.wait_for_prompt();
    tmux.line("/resume");
    tmux.wait_for_count("Resume (number or id", 2);
    tmux.line(id);
    let screen = tmux.wait_for_count("and is read-only here", 2);
    assert!(screen.contains(&format!("pi --fork {id}")), "{screen}");
    tmux.wait_for_prompt();
    tmux.line("/quit");
    assert_eq!(tmux.wait_for_exit(), 0);

    // Nothing was written to it; `--fork` continues it in a local copy.
    assert_same(&local_payloads(&bob, id), &before, "the pulled session");
    let forked = bob
        .pi()
        .args(["--fork", id, "-p", "go on"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&forked.stderr);
    assert!(!refused(&stderr), "{stderr}");
}

/// Waits until the archive holds every local entry of `session` (at least `least`; the REPL
/// may have appended some, such as its model), byte for byte.
fn wait_for_archived(cluster: &Cluster, url: &str, env: &TestEnv, session: &str, least: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let remote = remote_payloads(cluster, url, session);
        let local = local_payloads(env, session);
        if remote.len() >= least && remote == local {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the archive has {} of {} entries of {session}",
            remote.len(),
            local.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sync_auto_pushes_a_session_left_in_the_repl_without_waiting_and_reports_failures() {
    let cluster = postgres::shared();
    let url = cluster.database("auto");
    let alice = person("alice", "laptop");
    std::fs::write(
        alice.agent_dir.join("settings.json"),
        json!({"sync": {"user": "alice", "host": "laptop", "auto": true}}).to_string(),
    )
    .unwrap();
    add_remote(&alice, "team", &url);
    let cwd = alice.workspace.to_string_lossy().into_owned();
    let first = "dddddddd-0000-4000-8000-000000000001";
    let second = "dddddddd-0000-4000-8000-000000000002";
    for (id, text) in [(first, "the first session"), (second, "the second session")] {
        let file = alice.dir.path().join(format!("{id}.jsonl"));
        session_file(&file, id, &cwd, &[text, "and more"]);
        import(&alice, &file);
    }
    let tmux = crate::common::tmux::Tmux::start(&alice, "auto", &["--session", first], &[]);
    tmux.wait_for_prompt();
    // /new leaves the first session: pushed in the background.
    tmux.line("/new");
    tmux.wait_for("New session started");
    wait_for_archived(cluster, &url, &alice, first, 4);
    assert_same(
        &remote_payloads(cluster, &url, first),
        &local_payloads(&alice, first),
        "pushed on /new",
    );
    assert!(remote_payloads(cluster, &url, second).is_empty());
    // /resume to the second, then quit: the second is pushed after the REPL exited.
    tmux.line("/resume");
    tmux.wait_for("Resume (number or id");
    tmux.line(second);
    tmux.wait_for(&format!("session {second}"));
    tmux.wait_for_prompt();
    tmux.line("/quit");
    assert_eq!(tmux.wait_for_exit(), 0);
    wait_for_archived(cluster, &url, &alice, second, 4);

    // A remote that is down: leaving is not held up, and the failure is reported later.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let bob = person("bob", "devbox");
    std::fs::write(
        bob.agent_dir.join("settings.json"),
        json!({"sync": {"user": "bob", "host": "devbox", "auto": "down"}}).to_string(),
    )
    .unwrap();
    add_remote(
        &bob,
        "down",
        &format!("postgres://bob@127.0.0.1:{port}/x?sslmode=disable"),
    );
    let id = "eeeeeeee-0000-4000-8000-000000000001";
    let file = bob.dir.path().join("e.jsonl");
    session_file(
        &file,
        id,
        &bob.workspace.to_string_lossy(),
        &["nobody hears this"],
    );
    import(&bob, &file);
    let tmux = crate::common::tmux::Tmux::start(&bob, "down", &["--session", id], &[]);
    tmux.wait_for_prompt();
    let started = Instant::now();
    tmux.line("/new");
    tmux.wait_for("New session started");
    tmux.wait_for_prompt();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "/new waited for the push"
    );
    let failures = bob.agent_dir.join("sync-auto-failures");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !failures.exists() {
        assert!(
            Instant::now() < deadline,
            "the failed push was not recorded"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    tmux.line("/resume");
    tmux.wait_for("Resume (number or id");
    tmux.line(id);
    let screen = tmux.wait_for(&format!("the automatic push of session {id} failed"));
    assert!(screen.contains("run `pi sync` to retry"), "{screen}");
    tmux.wait_for_prompt();
    tmux.line("/quit");
    assert_eq!(tmux.wait_for_exit(), 0);
}
