//! `pi db reindex` in bounded steps (`SessionStore::reindex`): the same derived rows and the
//! same search answers as a rebuild in one transaction; writers between its steps land in
//! both indexes; a kill leaves search whole and the next reindex goes on; other writers wait
//! at most about a step behind it.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi::model::SessionId;
use pi::model::message::{AgentMessage, UserContent, UserMessage};
use pi::store::search::{Query, SearchRequest};
use pi::store::{ListScope, NewSession, SessionStore, StepPacing, StoreConfig, StoreLocation};
use pi::support::clock::SteppingClock;
use pi::support::ids::IdSource;
use serde_json::Value;

use crate::common::corpus::Vocabulary;
use crate::common::search_corpus::{answers, build};
use crate::common::{TestEnv, succeeded};

/// A step per session, no pause: as many steps as there are sessions.
const EVERY_SESSION_A_STEP: StepPacing = StepPacing {
    step: Duration::ZERO,
    gap: Duration::ZERO,
};

fn open_at(db: &Path, seed: u64) -> SessionStore {
    SessionStore::open(StoreConfig {
        location: StoreLocation::File(db.to_path_buf()),
        clock: Arc::new(SteppingClock::new(1_736_000_000_000, 1)),
        ids: Arc::new(IdSource::seeded(seed)),
        busy_timeout: Duration::from_secs(30),
    })
    .unwrap()
}

fn user(text: &str) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: UserContent::Text(text.to_owned()),
        timestamp: 1_736_000_000_000,
        extra: serde_json::Map::new(),
    })
}

/// The sessions with a hit for `word`, in hit order.
fn sessions_with(store: &SessionStore, word: &str) -> Vec<String> {
    let request = SearchRequest {
        query: Query::parse(word).unwrap(),
        scope: ListScope::All,
        session: None,
        roles: Vec::new(),
        kinds: Vec::new(),
        since_ms: None,
        until_ms: None,
        model: None,
        active_only: false,
        limit: 100,
        now_ms: 1_736_000_000_000,
        highlight: ("[".to_owned(), "]".to_owned()),
        snippet_width: 40,
    };
    store
        .search(&request)
        .unwrap()
        .into_iter()
        .map(|hit| hit.session.as_str().to_owned())
        .collect()
}

/// How [`assert_same_answers`] compares scores.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scores {
    /// Every hit equal, scores included, in the same order.
    Exact,
    /// Word queries so; a phrase query's hits the same, in any order, scores not compared.
    ExactForWords,
}

/// Compares two stores' answers query by query (a difference names its query only).
fn assert_same_answers(
    got: &SessionStore,
    want: &SessionStore,
    vocab: &Vocabulary,
    scores: Scores,
) {
    let (got, want) = (answers(got, vocab), answers(want, vocab));
    let (got, want) = (got.as_array().unwrap(), want.as_array().unwrap());
    assert_eq!(got.len(), want.len());
    for (got, want) in got.iter().zip(want) {
        let label = format!("{} in {}", want["query"], want["scope"]);
        let (got, want) = (
            got["hits"].as_array().unwrap(),
            want["hits"].as_array().unwrap(),
        );
        assert_eq!(got.len(), want.len(), "{label}: number of hits");
        let phrase = label.starts_with("\"\\\"");
        if scores == Scores::ExactForWords && phrase {
            let key = |hit: &Value| format!("{}#{}", hit["session"], hit["seq"]);
            let mut got: Vec<String> = got.iter().map(key).collect();
            let mut want: Vec<String> = want.iter().map(key).collect();
            got.sort();
            want.sort();
            assert_eq!(got, want, "{label}: hits");
            continue;
        }
        for (index, (got, want)) in got.iter().zip(want).enumerate() {
            assert_eq!(got, want, "{label}: hit {index}");
        }
    }
}

fn assert_sound(store: &SessionStore) {
    let report = store.check().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn a_stepped_reindex_answers_every_query_as_a_one_transaction_rebuild_does() {
    let dir = tempfile::tempdir().unwrap();
    let (stepped, vocab) = build(&dir.path().join("stepped.db"));
    stepped.backup(&dir.path().join("whole.db")).unwrap();
    let whole = open_at(&dir.path().join("whole.db"), 1);

    let mut steps = 0;
    let done = stepped
        .reindex(EVERY_SESSION_A_STEP, &mut |_| steps += 1)
        .unwrap();
    whole.rebuild_derived().unwrap();

    assert_eq!((done.sessions, done.total, done.resumed), (40, 40, false));
    assert!(steps >= 40, "one step per session: {steps}");
    // Hits, order, snippets and scores exactly: the new index was built from nothing, as the
    // one-transaction rebuild's is, so FTS5's own totals are the same too.
    assert_same_answers(&stepped, &whole, &vocab, Scores::Exact);
    assert_sound(&stepped);
    // A second reindex finds the first one's index under the live names and swaps again.
    stepped.reindex(EVERY_SESSION_A_STEP, &mut |_| {}).unwrap();
    assert_same_answers(&stepped, &whole, &vocab, Scores::Exact);
    assert_sound(&stepped);
}

/// Runs a reindex with writes after its fifth step (one session rebuilt per step): entries
/// appended to a rebuilt session and to one not yet rebuilt, a new session, and, with
/// `remove`, two sessions removed (one rebuilt, one not). Checks what search answers during
/// and after; returns the store and a one-transaction rebuild of the same entries.
fn reindex_with_writes(dir: &Path, remove: bool) -> (SessionStore, SessionStore, Vocabulary) {
    let db = dir.join("live.db");
    let (store, vocab) = build(&db);
    let other = open_at(&db, 9);
    let sessions: Vec<SessionId> = store
        .list(&ListScope::All)
        .unwrap()
        .into_iter()
        .map(|summary| summary.id)
        .collect();
    let mut ids: Vec<String> = sessions.iter().map(|id| id.as_str().to_owned()).collect();
    ids.sort();
    // Sessions were inserted in id order: sid order is id order.
    let (first, second, late_deleted, last) = (
        SessionId::new(ids[0].as_str()),
        SessionId::new(ids[1].as_str()),
        SessionId::new(ids[38].as_str()),
        SessionId::new(ids[39].as_str()),
    );
    // Two sessions with a word of their own, removed while the reindex runs: one it has
    // rebuilt by then, one it has not.
    for doomed in [&second, &late_deleted] {
        store.append_message(doomed, user("quagga doomed")).unwrap();
    }
    assert_eq!(sessions_with(&store, "quagga").len(), 2);
    let doomed = if remove {
        Vec::new()
    } else {
        vec![second.as_str().to_owned(), late_deleted.as_str().to_owned()]
    };
    let mut created = None;
    let mut step = 0;
    let mut seen_during = Vec::new();
    store
        .reindex(EVERY_SESSION_A_STEP, &mut |_| {
            step += 1;
            if step == 5 {
                // Session 1 is rebuilt by now, the last one is not.
                other
                    .append_message(&first, user("zebracorn early"))
                    .unwrap();
                other.append_message(&last, user("zebracorn late")).unwrap();
                let new = other
                    .create_session(&NewSession {
                        cwd: "/home/dev/new".to_owned(),
                        parent_session: None,
                    })
                    .unwrap()
                    .id;
                other.append_message(&new, user("zebracorn new")).unwrap();
                if remove {
                    other.delete_session(&second).unwrap();
                    other.delete_session(&late_deleted).unwrap();
                }
                created = Some(new);
                // Search answers from the live index meanwhile, writes included.
                seen_during = sessions_with(&other, "zebracorn");
                let mut quagga = sessions_with(&other, "quagga");
                quagga.sort();
                assert_eq!(quagga, doomed, "removed sessions, during");
            }
        })
        .unwrap();
    let created = created.expect("the writes ran");
    let mut expected = vec![
        first.as_str().to_owned(),
        last.as_str().to_owned(),
        created.as_str().to_owned(),
    ];
    expected.sort();
    seen_during.sort();
    assert_eq!(seen_during, expected, "during the reindex");
    let mut after = sessions_with(&store, "zebracorn");
    after.sort();
    assert_eq!(after, expected, "after the swap");
    let mut quagga = sessions_with(&store, "quagga");
    quagga.sort();
    assert_eq!(quagga, doomed, "removed sessions left both indexes");
    assert_sound(&store);
    store.backup(&dir.join("whole.db")).unwrap();
    let whole = open_at(&dir.join("whole.db"), 1);
    whole.rebuild_derived().unwrap();
    (store, whole, vocab)
}

#[test]
fn appends_and_sessions_created_between_steps_reach_the_index_it_swaps_in() {
    let dir = tempfile::tempdir().unwrap();
    let (store, whole, vocab) = reindex_with_writes(dir.path(), false);
    // The swapped-in index equals one rebuilt in one transaction from the same entries.
    assert_same_answers(&store, &whole, &vocab, Scores::Exact);
}

#[test]
fn sessions_removed_between_steps_leave_both_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let (store, whole, vocab) = reindex_with_writes(dir.path(), true);
    // A session removed from the new index after its step leaves FTS5's own totals (which
    // phrases are ranked by) counting its rows, as any removal does outside a reindex: the
    // contentless index cannot subtract them exactly. Word queries rank by the store's own
    // totals and answer exactly; phrases find the same hits.
    assert_same_answers(&store, &whole, &vocab, Scores::ExactForWords);
}

fn reindex_cursor(db: &Path) -> Option<i64> {
    let conn = rusqlite::Connection::open(db).ok()?;
    conn.busy_timeout(Duration::from_secs(5)).ok()?;
    conn.query_row("SELECT cursor FROM search_reindex", [], |row| row.get(0))
        .ok()
}

#[test]
fn a_killed_reindex_leaves_search_whole_and_the_next_one_goes_on_from_it() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    let (store, vocab) = build(&env.db());
    let before = answers(&store, &vocab);
    drop(store);

    let mut reindex = env
        .pi_process()
        .args(["db", "reindex"])
        .env("PI_REINDEX_STEP_MS", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while reindex_cursor(&env.db()).is_none_or(|cursor| cursor < 3) {
        assert!(
            reindex.try_wait().unwrap().is_none(),
            "the reindex ended before it was killed"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no step was seen"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    reindex.kill().unwrap();
    reindex.wait().unwrap();
    let cursor = reindex_cursor(&env.db()).expect("the reindex was left part-way");
    assert!((3..40).contains(&cursor), "cursor {cursor}");

    // The live index still answers everything, and the database is sound.
    let store = open_at(&env.db(), 1);
    assert_eq!(answers(&store, &vocab), before, "search after the kill");
    assert_sound(&store);
    drop(store);
    let check = succeeded(env.pi().args(["db", "check"]));
    assert!(check.status.success());

    let output = succeeded(env.pi().args(["db", "reindex"]));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("went on from a reindex that had stopped part-way"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{} sessions", 40 - cursor)),
        "{text}"
    );
    assert_eq!(reindex_cursor(&env.db()), None, "the reindex ended");
    let store = open_at(&env.db(), 1);
    assert_eq!(answers(&store, &vocab), before, "search after the reindex");
    assert_sound(&store);
}

#[test]
fn writers_wait_at_most_about_a_step_behind_a_reindex() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    let (store, _) = build(&env.db());
    drop(store);
    // A step per session (each ends after 1 ms, at the first session boundary) and the
    // default 100 ms pause after each: the reindex outlasts the renames below.
    let mut reindex = env
        .pi_process()
        .args(["db", "reindex"])
        .env("PI_REINDEX_STEP_MS", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while reindex_cursor(&env.db()).is_none_or(|cursor| cursor < 2) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no step was seen"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut waits = Vec::new();
    for round in 0..3 {
        let at = Instant::now();
        succeeded(env.pi().args([
            "sessions",
            "rename",
            "bench-00039",
            &format!("name {round}"),
        ]));
        waits.push(at.elapsed());
    }
    let still_running = reindex.try_wait().unwrap().is_none();
    let status = reindex.wait().unwrap();
    eprintln!("renames during the reindex: {waits:?}");
    assert!(status.success());
    assert!(still_running, "the reindex ended before the renames did");
    for wait in &waits {
        // The command's own start-up and work included (debug build, shared machine).
        assert!(*wait < Duration::from_secs(2), "a rename took {wait:?}");
    }
    let store = open_at(&env.db(), 1);
    assert_eq!(
        store
            .session(&SessionId::new("bench-00039"))
            .unwrap()
            .name
            .as_deref(),
        Some("name 2")
    );
    assert_sound(&store);
}

// ----- sessions larger than a step (migration 0011) -------------------------------------------

/// Entries of the large session: several of the stepped rebuild's 512-entry batches.
const LARGE: usize = 3_000;

/// A database holding the corpus's 40 sessions and one of [`LARGE`] entries (`large-session`),
/// whose path state and usage rows are partly deleted: a reindex must write them again.
fn with_a_large_session(env: &TestEnv) -> (SessionStore, Vocabulary) {
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    let (store, vocab) = build(&env.db());
    drop(store);
    let file = env.dir.path().join("large.jsonl");
    crate::common::bulk_session_file(&file, "large-session", LARGE, 30);
    succeeded(env.pi().arg("import").arg(&file));
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    conn.execute_batch(
        "DELETE FROM entry_path WHERE sid = (SELECT sid FROM sessions WHERE id = 'large-session')
                                  AND seq % 7 = 3;
         DELETE FROM usage WHERE sid = (SELECT sid FROM sessions WHERE id = 'large-session')
                             AND seq % 5 = 1;",
    )
    .unwrap();
    drop(conn);
    (open_at(&env.db(), 1), vocab)
}

/// The large session's stepped rebuild, while one is part-way: its cursor.
fn large_session_cursor(db: &Path) -> Option<i64> {
    let conn = rusqlite::Connection::open(db).ok()?;
    conn.busy_timeout(Duration::from_secs(5)).ok()?;
    conn.query_row(
        "SELECT cursor_seq FROM session_rebuild
          WHERE sid = (SELECT sid FROM sessions WHERE id = 'large-session')",
        [],
        |row| row.get(0),
    )
    .ok()
}

#[test]
fn a_session_larger_than_a_step_is_rebuilt_over_several_steps_and_keeps_its_aggregates_meanwhile() {
    let env = TestEnv::new();
    let (store, vocab) = with_a_large_session(&env);
    let other = open_at(&env.db(), 9);
    let large = SessionId::new("large-session");
    let before = store.session(&large).unwrap();
    assert_eq!(before.entries, LARGE as i64);

    let mut steps = 0;
    let mut during = None;
    store
        .reindex(EVERY_SESSION_A_STEP, &mut |_| {
            steps += 1;
            let Some(cursor) = large_session_cursor(&env.db()) else {
                return;
            };
            if during.is_some() {
                return;
            }
            assert!((1..LARGE as i64).contains(&cursor), "cursor {cursor}");
            // Part-way: the session's aggregates are still the whole ones, not a partial sum.
            during = Some(other.session(&large).unwrap());
            // A writer of the session itself goes on; what it appends is taken by a later step.
            let first = other
                .entries(&large)
                .unwrap()
                .into_iter()
                .find_map(|stored| stored.entry.id)
                .unwrap();
            other.append_label(&large, &first, Some("pinned")).unwrap();
            other
                .append_message(&large, user("zebracorn appended"))
                .unwrap();
        })
        .unwrap();
    let during = during.expect("a step ended part-way through the large session");
    assert_eq!(during, before, "the aggregates part-way through");
    assert!(steps >= LARGE / 512 + 40, "steps: {steps}");
    assert_eq!(
        large_session_cursor(&env.db()),
        None,
        "the rebuild rows went"
    );

    let after = store.session(&large).unwrap();
    assert_eq!(after.entries, before.entries + 2);
    assert_eq!(after.messages, before.messages + 1);
    assert_eq!(sessions_with(&store, "zebracorn"), ["large-session"]);
    assert_eq!(store.labels(&large).unwrap().len(), 1);
    // Every derived row equals a rebuild from the entries (the deleted ones written again).
    assert_sound(&store);
    store.backup(&env.dir.path().join("whole.db")).unwrap();
    let whole = open_at(&env.dir.path().join("whole.db"), 1);
    whole.rebuild_derived().unwrap();
    assert_same_answers(&store, &whole, &vocab, Scores::Exact);
    assert_eq!(whole.session(&large).unwrap(), after);
}

#[test]
fn a_reindex_stopped_part_way_through_a_large_session_goes_on_from_there() {
    let env = TestEnv::new();
    let (store, vocab) = with_a_large_session(&env);
    let before = answers(&store, &vocab);
    let large = SessionId::new("large-session");
    let summary = store.session(&large).unwrap();
    // A process that dies after a step: the step is committed, nothing after it runs.
    let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        store.reindex(EVERY_SESSION_A_STEP, &mut |_| {
            if large_session_cursor(&env.db()).is_some_and(|cursor| cursor >= 1_024) {
                panic!("stopped part-way");
            }
        })
    }));
    assert!(stopped.is_err(), "the reindex ended before it was stopped");
    drop(store);
    let cursor = large_session_cursor(&env.db()).expect("left part-way");
    assert!((1_024..LARGE as i64).contains(&cursor), "cursor {cursor}");

    let store = open_at(&env.db(), 1);
    assert_eq!(answers(&store, &vocab), before, "search part-way");
    assert_eq!(
        store.session(&large).unwrap(),
        summary,
        "aggregates part-way"
    );
    let done = store.reindex(EVERY_SESSION_A_STEP, &mut |_| {}).unwrap();
    assert!(done.resumed);
    assert_eq!(large_session_cursor(&env.db()), None);
    assert_eq!(answers(&store, &vocab), before, "search after");
    assert_eq!(store.session(&large).unwrap(), summary, "aggregates after");
    assert_sound(&store);
}

#[test]
fn writers_of_a_large_session_wait_at_most_about_a_step_behind_its_reindex() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    let file = env.dir.path().join("large.jsonl");
    crate::common::bulk_session_file(&file, "large-session", 40_000, 60);
    succeeded(env.pi().arg("import").arg(&file));
    // Steps of 50 ms and the default 100 ms pause: the reindex outlasts the renames below
    // (one transaction for this session took seconds before migration 0011).
    let mut reindex = env
        .pi_process()
        .args(["db", "reindex"])
        .env("PI_REINDEX_STEP_MS", "50")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while large_session_cursor(&env.db()).is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no step was seen"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut waits = Vec::new();
    for round in 0..3 {
        let at = Instant::now();
        succeeded(env.pi().args([
            "sessions",
            "rename",
            "large-session",
            &format!("name {round}"),
        ]));
        waits.push(at.elapsed());
    }
    let still_running = large_session_cursor(&env.db()).is_some();
    let status = reindex.wait().unwrap();
    eprintln!("renames of the session during its reindex: {waits:?}");
    assert!(status.success());
    assert!(
        still_running,
        "the session's rebuild ended before the renames did"
    );
    for wait in &waits {
        // The command's own start-up and work included (debug build, shared machine).
        assert!(*wait < Duration::from_secs(2), "a rename took {wait:?}");
    }
    let store = open_at(&env.db(), 1);
    let large = SessionId::new("large-session");
    assert_eq!(
        store.session(&large).unwrap().name.as_deref(),
        Some("name 2")
    );
    assert_eq!(store.session(&large).unwrap().entries, 40_003);
    assert_sound(&store);
}
