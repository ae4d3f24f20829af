//! Issue 19, item 6, for merges: a file merged into a stored session (a re-import of a changed
//! file) is compared in a read snapshot and written in bounded steps, so other writers wait for
//! a step, never for the whole merge, while a kill still leaves the file all or nothing. Through
//! the real binary and real files.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use pi::store::ListScope;
use serde_json::{Value, json};

use crate::common::agent::models_json;
use crate::common::provider::{MockResponse, ProviderServer, sse};
use crate::common::{TestEnv, bulk_session_file as session_file, stdout_json, succeeded};

/// The header and the first `entries` lines of `from`, written to `to`.
fn prefix_file(from: &Path, to: &Path, entries: usize) {
    let bytes = std::fs::read(from).unwrap();
    let mut end = 0;
    for _ in 0..=entries {
        end += bytes[end..].iter().position(|&b| b == b'\n').unwrap() + 1;
    }
    std::fs::write(to, &bytes[..end]).unwrap();
}

/// `(first_seq, next_seq)` of the merge recorded in the database, if any.
fn merge_row(db: &Path) -> Option<(i64, i64)> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()?;
    conn.query_row(
        "SELECT first_seq, next_seq FROM merging_imports",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .ok()
}

/// Waits until the merge recorded has committed at least `steps_written` entries; false when
/// the child ended first.
fn wait_for_merge(db: &Path, child: &mut Child, written: i64) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        if merge_row(db).is_some_and(|(first, next)| next - first >= written) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Starts `import`, waits until its merge has committed a step, and kills it.
fn kill_after_a_step(import: &mut std::process::Command, db: &Path) {
    let mut merge = import
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_for_merge(db, &mut merge, 1),
        "the merge ended before it wrote in steps"
    );
    merge.kill().unwrap();
    merge.wait().unwrap();
}

/// The first line of `pi import --json`'s report.
fn first_report(output: &std::process::Output) -> Value {
    let text = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

fn entries_of(env: &TestEnv, id: &str) -> i64 {
    env.store()
        .list(&ListScope::All)
        .unwrap()
        .into_iter()
        .find(|s| s.id.as_str() == id)
        .map_or(-1, |s| s.entries)
}

fn exported(env: &TestEnv, id: &str) -> Vec<u8> {
    let store = env.store();
    let session = store
        .list(&ListScope::All)
        .unwrap()
        .into_iter()
        .find(|s| s.id.as_str() == id)
        .unwrap();
    let mut out = Vec::new();
    store.export_jsonl(&session.id, &mut out).unwrap();
    out
}

fn leases_and_merges(db: &Path) -> (i64, i64) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(
        "SELECT (SELECT COUNT(*) FROM session_leases), (SELECT COUNT(*) FROM merging_imports)",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .unwrap()
}

#[test]
fn writers_wait_at_most_about_a_second_behind_a_large_merge() {
    let env = TestEnv::new();
    let other = env.dir.path().join("other.jsonl");
    session_file(&other, "renamed-meanwhile", 4, 50);
    succeeded(env.pi().args(["import", other.to_str().unwrap()]));
    let full = env.dir.path().join("full.jsonl");
    session_file(&full, "merged", 40_000, 300);
    let start = env.dir.path().join("start.jsonl");
    prefix_file(&full, &start, 2_000);
    succeeded(env.pi().args(["import", start.to_str().unwrap()]));
    let server = ProviderServer::start(vec![MockResponse::sse(sse::openai_text("Meanwhile."))]);
    std::fs::write(
        env.agent_dir.join("models.json"),
        models_json(&server.url(), 128_000),
    )
    .unwrap();

    let started = Instant::now();
    let mut merge = env
        .pi_process()
        .args(["import", "--json", full.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // One step of the write phase committed: the comparison is over, the merge is writing.
    assert!(
        wait_for_merge(&env.db(), &mut merge, 1),
        "the merge ended before it wrote in steps"
    );
    let mut waits = Vec::new();
    for round in 0..3 {
        let at = Instant::now();
        succeeded(env.pi().args([
            "sessions",
            "rename",
            "renamed-meanwhile",
            &format!("name {round}"),
        ]));
        waits.push(("rename", at.elapsed()));
    }
    let at = Instant::now();
    let output = succeeded(env.pi().args(["-p", "while merging"]));
    waits.push(("pi -p", at.elapsed()));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Meanwhile.\n");
    // The merged session itself is the merge's to write until it ends, and says so at once.
    let at = Instant::now();
    let held = env
        .pi()
        .args(["sessions", "rename", "merged", "not now"])
        .output()
        .unwrap();
    waits.push(("refused rename", at.elapsed()));
    let still_running = merge.try_wait().unwrap().is_none();
    let stderr = String::from_utf8_lossy(&held.stderr).into_owned();
    assert_eq!(held.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("pi import (merging a file)"), "{stderr}");
    let output = merge.wait_with_output().unwrap();
    let total = started.elapsed();
    eprintln!("merge of 38,000 entries: {total:?}; writers meanwhile: {waits:?}");
    assert!(output.status.success(), "{output:?}");
    assert!(
        still_running,
        "the merge ended before the writers did ({total:?})"
    );
    for (what, wait) in &waits {
        // Start-up and work included (debug build, shared machine): a rename is one write
        // transaction, `pi -p` several, each of which may wait for one step of the merge.
        let bound = if *what == "pi -p" { 4 } else { 2 };
        assert!(*wait < Duration::from_secs(bound), "{what} took {wait:?}");
    }
    let report = first_report(&output);
    assert_eq!(report["status"], "updated", "{report}");
    assert_eq!(report["entries"], 40_000);
    assert_eq!(exported(&env, "merged"), std::fs::read(&full).unwrap());
    assert_eq!(leases_and_merges(&env.db()), (0, 0));
    succeeded(env.pi().args(["db", "check"]));
}

#[test]
fn a_killed_merge_is_rolled_back_by_the_next_writer_and_the_file_merges_again() {
    let env = TestEnv::new();
    let other = env.dir.path().join("other.jsonl");
    session_file(&other, "bystander", 4, 50);
    succeeded(env.pi().args(["import", other.to_str().unwrap()]));
    let full = env.dir.path().join("full.jsonl");
    // More new lines than one step takes: written in steps however fast the machine.
    let total = pi::store::interchange::STAGE_STEP_ENTRIES + 2_000;
    session_file(&full, "merged", total, 100);
    let start = env.dir.path().join("start.jsonl");
    prefix_file(&full, &start, 1_000);
    succeeded(env.pi().args(["import", start.to_str().unwrap()]));
    let before = exported(&env, "merged");
    assert_eq!(before, std::fs::read(&start).unwrap());

    kill_after_a_step(
        env.pi_process().args(["import", full.to_str().unwrap()]),
        &env.db(),
    );
    // What the kill left: steps written, the merge recorded, its lease.
    let (first, next) = merge_row(&env.db()).expect("the kill did not land while merging");
    assert_eq!(first, 1_000);
    assert!(next > first && next < total as i64, "{first}..{next}");
    assert_eq!(leases_and_merges(&env.db()), (1, 1));

    // The next command that opens the database for writing rolls the merge back.
    succeeded(
        env.pi()
            .args(["sessions", "rename", "bystander", "after the kill"]),
    );
    assert_eq!(leases_and_merges(&env.db()), (0, 0));
    assert_eq!(entries_of(&env, "merged"), 1_000);
    assert_eq!(exported(&env, "merged"), before);
    let found = succeeded(env.pi().args([
        "sessions",
        "search",
        "--all",
        "--json",
        &(next - 1).to_string(),
    ]));
    assert_eq!(
        stdout_json(&found),
        json!([]),
        "a rolled-back line is searchable"
    );
    succeeded(env.pi().args(["db", "check"]));

    // The file merges completely on the next import.
    let report = succeeded(env.pi().args(["import", "--json", full.to_str().unwrap()]));
    let line = first_report(&report);
    assert_eq!(line["status"], "updated", "{line}");
    assert_eq!(line["entries"], total);
    assert_eq!(exported(&env, "merged"), std::fs::read(&full).unwrap());
    let found = succeeded(env.pi().args([
        "sessions",
        "search",
        "--all",
        "--json",
        &(next - 1).to_string(),
    ]));
    assert_eq!(stdout_json(&found).as_array().map(Vec::len), Some(1));
    succeeded(env.pi().args(["db", "check"]));
}

#[test]
fn a_killed_merge_is_rolled_back_by_the_next_import_of_the_same_file() {
    let env = TestEnv::new();
    let full = env.dir.path().join("full.jsonl");
    let total = pi::store::interchange::STAGE_STEP_ENTRIES + 2_000;
    session_file(&full, "merged", total, 100);
    let start = env.dir.path().join("start.jsonl");
    prefix_file(&full, &start, 500);
    succeeded(env.pi().args(["import", start.to_str().unwrap()]));
    kill_after_a_step(
        env.pi_process().args(["import", full.to_str().unwrap()]),
        &env.db(),
    );
    assert!(merge_row(&env.db()).is_some());
    // Readers see the steps written so far, never a moved leaf.
    let shown = succeeded(env.pi().args(["sessions", "show", "--json", "merged"]));
    assert_eq!(
        stdout_json(&shown).as_array().map(Vec::len),
        Some(500),
        "the branch moved before the merge ended"
    );
    let report = succeeded(env.pi().args(["import", "--json", full.to_str().unwrap()]));
    let line = first_report(&report);
    assert_eq!(
        (&line["status"], &line["added"]),
        (&json!("updated"), &json!(total - 500))
    );
    assert_eq!(exported(&env, "merged"), std::fs::read(&full).unwrap());
    assert_eq!(leases_and_merges(&env.db()), (0, 0));
}
