//! Durability and concurrency (issue 10): nothing acknowledged is ever lost, and two processes
//! never corrupt a session. These tests break things on purpose — SIGKILL at seeded random
//! moments, concurrent writers and readers, a file-size limit, read-only files and
//! directories, truncated and overwritten database files, garbage in the WAL — and check
//! afterwards that `pi db check` passes, that every write a child reported (it prints a line
//! only once the store call returned) is present byte for byte, and that the tree is valid.
//!
//! The appending children are `examples/stress_writer.rs`, found next to this test binary:
//! plain `cargo test` builds it, `cargo test --test all` does not (run `cargo build --examples`
//! first then). The import and compaction kill tests kill the real `pi` binary: `pi import` on
//! a large reference-format file, and `pi -c -p` compacting against a mock provider on
//! 127.0.0.1; their kill moments are seeded and spread evenly over (and a little past) the
//! measured duration of one uninterrupted run. `a_failed_append_changes_nothing_and_the_next_append_succeeds`
//! is the store half of "the REPL keeps unsaved entries and retries them with the next
//! append"; the REPL half (kept in memory, shown, exported, written later in order) is
//! `session_lease::a_repl_keeps_entries_it_cannot_write_exports_them_and_saves_them_in_order_later`,
//! and the leases live sessions hold are tested in `session_lease` too.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pi::model::EntryId;
use pi::model::entry::{CompactionEntry, EntryKind};
use pi::model::ids::SessionId;
use pi::store::{LeafSelector, LeaseAttempt, LeaseConfig, SessionStore, StoreError};
use pi::support::clock::{iso_from_ms, ms_from_iso};
use pi::support::ids::IdSource;
use pi::support::json::to_js_string;
use serde_json::Value;

use crate::common::provider::{MockResponse, ProviderServer, RecordedRequest, Router, sse};
use crate::common::{TestEnv, fixtures, new_session, open_store, stdout_json, succeeded};

// ----- the child process ----------------------------------------------------------------------

/// The stress writer example, built next to this test binary.
fn stress_writer_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let bin = profile_dir.join("examples").join("stress_writer");
    assert!(
        bin.exists(),
        "{} is missing: `cargo test` builds examples (or run `cargo build --example stress_writer`)",
        bin.display()
    );
    bin
}

/// The `pi` binary under test.
fn pi_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("pi")
}

/// A running stress writer whose complete stdout lines are collected as they arrive.
struct Writer {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
}

impl Writer {
    fn spawn(db: &Path, args: &[&str]) -> Self {
        let mut command = Command::new(stress_writer_bin());
        command.arg("--db").arg(db).args(args);
        Self::spawn_command(command)
    }

    fn spawn_command(command: Command) -> Self {
        Self::spawn_with_stdin(command, Stdio::piped())
    }

    /// Spawns `pi` itself: its stdin is empty (a piped stdin would be read as prompt text).
    fn spawn_pi(command: Command) -> Self {
        Self::spawn_with_stdin(command, Stdio::null())
    }

    fn spawn_with_stdin(mut command: Command, stdin: Stdio) -> Self {
        let mut child = command
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the stress writer");
        let stdout = child.stdout.take().expect("piped stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            let mut stdout = std::io::BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match stdout.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    // A line cut short by a kill was never completely reported: ignore it.
                    Ok(_) if line.last() != Some(&b'\n') => break,
                    Ok(_) => {
                        line.pop();
                        sink.lock()
                            .unwrap()
                            .push(String::from_utf8_lossy(&line).into_owned());
                    }
                }
            }
        });
        Self {
            child,
            lines,
            reader: Some(reader),
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).unwrap())
    }

    /// Waits (up to a generous bound) for a line starting with `prefix`.
    fn wait_for(&self, prefix: &str) -> String {
        self.wait_for_any(&[prefix])
    }

    /// Waits (up to a generous bound) for a line starting with one of `prefixes`.
    fn wait_for_any(&self, prefixes: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(line) = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .find(|line| prefixes.iter().any(|prefix| line.starts_with(prefix)))
            {
                return line.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no {prefixes:?} line; got {:?}",
                self.lines.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// SIGKILLs the child, reaps it, and returns every complete line it printed.
    fn kill(mut self) -> Vec<String> {
        let _ = kill(self.pid(), Signal::SIGKILL);
        let _ = self.child.wait();
        self.collect()
    }

    /// Waits for the child to exit on its own.
    fn finish(mut self) -> (ExitStatus, Vec<String>) {
        drop(self.child.stdin.take());
        let status = self.child.wait().expect("wait for the stress writer");
        (status, self.collect())
    }

    fn collect(&mut self) -> Vec<String> {
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        std::mem::take(&mut *self.lines.lock().unwrap())
    }
}

impl Drop for Writer {
    /// A test that fails half-way leaves no child behind (a stopped one would never end).
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = kill(self.pid(), Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// Returns the `(id, payload)` of every `ok` line, in order.
fn acknowledged(lines: &[String]) -> Vec<(String, String)> {
    lines
        .iter()
        .filter_map(|line| {
            let mut parts = line.splitn(3, '\t');
            (parts.next() == Some("ok")).then(|| {
                (
                    parts.next().unwrap_or_default().to_owned(),
                    parts.next().unwrap_or_default().to_owned(),
                )
            })
        })
        .collect()
}

/// A seeded random source for kill moments.
struct Rng(IdSource);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(IdSource::seeded(seed))
    }

    fn below(&self, n: u64) -> u64 {
        self.0.next_u64() % n
    }

    /// The `index`-th of `count` moments spread over `window` ms: a random moment in the
    /// `index`-th of `count` equal slices, so that the kills cover the whole window evenly.
    fn spread(&self, window: u64, index: u64, count: u64) -> u64 {
        (window * index + self.below(window.max(1))) / count
    }
}

// ----- checks ---------------------------------------------------------------------------------

/// Runs `pi db check` on `db` and asserts that it passes.
fn assert_db_check(env: &TestEnv, db: &Path, context: &str) {
    let output = env
        .pi()
        .args(["--db", db.to_str().unwrap(), "db", "check"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{context}: db check failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Asserts that the session's tree is valid: every parent is an earlier entry of the session,
/// the leaf exists, the tree holds every entry once, and the fast context rebuild equals the
/// reference walk.
fn assert_tree_valid(store: &SessionStore, session: &SessionId, context: &str) {
    let entries = store.entries(session).unwrap();
    let mut seen: HashSet<String> = HashSet::new();
    for stored in &entries {
        if let Some(parent) = &stored.entry.parent_id {
            assert!(
                seen.contains(parent.as_str()),
                "{context}: entry #{} names parent {parent} that is not an earlier entry",
                stored.seq
            );
        }
        if let Some(id) = &stored.entry.id {
            assert!(seen.insert(id.to_string()), "{context}: id {id} repeated");
        }
    }
    let summary = store.session(session).unwrap();
    assert_eq!(
        summary.entries,
        entries.len() as i64,
        "{context}: statistics"
    );
    if let Some(leaf) = store.leaf(session).unwrap() {
        assert!(
            entries.iter().any(|stored| stored.seq == leaf.seq),
            "{context}: leaf"
        );
    } else {
        assert!(entries.is_empty(), "{context}: no leaf but entries");
    }
    assert_eq!(
        store.tree(session).unwrap().len(),
        entries.len(),
        "{context}: tree size"
    );
    let fast = store.context(session, &LeafSelector::Current).unwrap();
    let plain = store
        .context_by_plain_walk(session, &LeafSelector::Current)
        .unwrap();
    assert_eq!(fast.to_json(), plain.to_json(), "{context}: context");
}

/// Asserts that every acknowledged `(id, payload)` is stored in the session byte for byte.
fn assert_acknowledged_present(
    store: &SessionStore,
    session: &SessionId,
    expected: &HashMap<String, String>,
    context: &str,
) {
    let stored: HashMap<String, Vec<u8>> = store
        .entries(session)
        .unwrap()
        .into_iter()
        .filter_map(|stored| Some((stored.entry.id?.to_string(), stored.payload)))
        .collect();
    for (id, payload) in expected {
        match stored.get(id) {
            Some(bytes) => assert_eq!(
                String::from_utf8_lossy(bytes),
                payload.as_str(),
                "{context}: entry {id} changed"
            ),
            None => panic!("{context}: acknowledged entry {id} is missing"),
        }
    }
}

// ----- crash tests ----------------------------------------------------------------------------

/// Kills a writer 100 times at seeded random moments while it appends messages, labels,
/// branches, compactions, names and model/thinking changes under a lease; after every kill the
/// next writer takes the lease over at once (the pid is gone), `pi db check` passes, every
/// acknowledged entry is present with its exact bytes, and the tree and context are valid.
#[test]
fn kill_during_appends_loses_nothing_acknowledged() {
    const KILLS: u64 = 100;
    let env = TestEnv::new();
    let db = env.db();
    let session = new_session(&open_store(&db, 1), "/crash");
    let rng = Rng::new(2026);
    let mut expected: HashMap<String, String> = HashMap::new();
    let mut kills_mid_append = 0;
    let started = Instant::now();
    for round in 0..KILLS {
        let seed = (round + 1).to_string();
        let writer = Writer::spawn(
            &db,
            &[
                "--heartbeat-ms",
                "20",
                "--stale-ms",
                "60000",
                "append",
                "--session",
                session.as_str(),
                "--seed",
                &seed,
                "--mix",
                "--lease",
                "crash-test",
                "--max-payload",
                "6000",
            ],
        );
        if round % 10 == 0 {
            // Now and then while the child is still opening the database.
            std::thread::sleep(Duration::from_millis(rng.below(15)));
        } else {
            // The previous holder is gone, so the lease is taken over at once.
            let lease = writer.wait_for_any(&["lease\t", "held\t", "error\t"]);
            assert!(
                lease == "lease\ttook-over" || lease == "lease\tacquired",
                "round {round}: {lease}"
            );
            // Otherwise somewhere in the stream of appends (and heartbeats).
            writer.wait_for_any(&["ok\t", "error\t"]);
            std::thread::sleep(Duration::from_millis(rng.below(40)));
        }
        let lines = writer.kill();
        assert!(
            !lines
                .iter()
                .any(|line| line.starts_with("error") || line.starts_with("held")),
            "round {round}: {lines:?}"
        );
        let acked = acknowledged(&lines);
        if !acked.is_empty() {
            kills_mid_append += 1;
        }
        expected.extend(acked);
        let context = format!("after kill {round}");
        assert_db_check(&env, &db, &context);
        let store = open_store(&db, 1);
        assert_acknowledged_present(&store, &session, &expected, &context);
        assert_tree_valid(&store, &session, &context);
    }
    assert!(
        kills_mid_append >= KILLS * 9 / 10,
        "only {kills_mid_append} kills landed while appending"
    );
    eprintln!(
        "crash test: {KILLS} kills survived ({kills_mid_append} mid-append), {} acknowledged entries verified after every kill, {:.1} s",
        expected.len(),
        started.elapsed().as_secs_f64()
    );
}

// ----- kills of the real `pi` -----------------------------------------------------------------

/// A `pi` command on database `db` that the test may SIGKILL: the environment of
/// `TestEnv::pi()` (cleared; the temporary agent dir and home), run in the workspace.
fn pi_child(env: &TestEnv, db: &Path) -> Command {
    let mut command = Command::new(pi_bin());
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &env.home)
        .env("PI_CODING_AGENT_DIR", &env.agent_dir)
        .env("NO_COLOR", "1")
        .current_dir(&env.workspace)
        .arg("--db")
        .arg(db);
    command
}

/// The `-wal` file of a database.
fn wal_of(db: &Path) -> PathBuf {
    PathBuf::from(format!("{}-wal", db.display()))
}

/// Copies a database no process has open (and its WAL, if one was left) to a new path.
fn copy_db(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap();
    if wal_of(from).exists() {
        std::fs::copy(wal_of(from), wal_of(to)).unwrap();
    }
}

/// Removes a database and its journal files.
fn remove_db(db: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
}

/// Milliseconds elapsed since `started`, at least 1.
fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// A large session file the reference could have written: the reference-written
/// `long-linear-chat` fixture (≈600 entries of coding turns with tool calls, tool results and
/// thinking, from a model and thinking-level change) repeated as `chapters` chapters under
/// fresh seeded entry ids, each chapter later in time than the one before. Every even chapter
/// after the first continues from the last entry of the previous one; every odd chapter
/// branches off 2–12 entries before its end (the reference's `branch()`, leaving that tail as
/// an abandoned branch); each chapter labels one of its entries half-way through. Every line
/// is `JSON.stringify`'s exact text (key order kept), so the file is canonical v3: an import
/// stores its lines as they are and the export gives the file back byte for byte. Returns the
/// lines, header first.
fn large_reference_session(session: &str, chapters: usize, seed: u64) -> Vec<String> {
    let text = std::fs::read_to_string(fixtures::dir().join("long-linear-chat.jsonl")).unwrap();
    let mut lines = text.lines();
    let mut header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    header["id"] = Value::from(session);
    let chapter: Vec<Value> = lines
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let ms = |entry: &Value| ms_from_iso(entry["timestamp"].as_str().unwrap()).unwrap();
    let span = ms(chapter.last().unwrap()) - ms(&chapter[0]) + 3_600_000;
    let ids = IdSource::seeded(seed);
    let mut taken: HashSet<String> = HashSet::new();
    let mut fresh_id = || loop {
        let id = ids.hex8();
        if taken.insert(id.clone()) {
            return id;
        }
    };
    let mut out = vec![to_js_string(&header)];
    // The ids of the previous chapter's copied entries, in order (labels left out).
    let mut previous: Vec<String> = Vec::new();
    for number in 0..chapters {
        let offset = span * i64::try_from(number).unwrap();
        let mut parent: Option<String> = match previous.len() {
            0 => None,
            len if number % 2 == 1 => {
                let back = 2 + usize::try_from(ids.next_u64() % 11).unwrap();
                Some(previous[len - 1 - back].clone())
            }
            len => Some(previous[len - 1].clone()),
        };
        let mut current: Vec<String> = Vec::new();
        for (idx, original) in chapter.iter().enumerate() {
            let mut entry = original.clone();
            let id = fresh_id();
            let at = ms(original) + offset;
            entry["id"] = Value::from(id.as_str());
            entry["parentId"] = parent.as_deref().map_or(Value::Null, Value::from);
            entry["timestamp"] = Value::from(iso_from_ms(at));
            if let Some(stamp) = entry
                .get_mut("message")
                .and_then(|message| message.get_mut("timestamp"))
            {
                *stamp = Value::from(stamp.as_i64().unwrap() + offset);
            }
            out.push(to_js_string(&entry));
            current.push(id.clone());
            parent = Some(id);
            if idx == chapter.len() / 2 {
                let label = fresh_id();
                out.push(to_js_string(&serde_json::json!({
                    "type": "label",
                    "id": label,
                    "parentId": parent,
                    "timestamp": iso_from_ms(at + 1),
                    "targetId": current[idx / 2],
                    "label": format!("chapter-{number}"),
                })));
                parent = Some(label);
            }
        }
        previous = current;
    }
    out
}

/// Writes lines as a session file (LF after every line).
fn write_session_file(path: &Path, lines: &[String]) -> Vec<u8> {
    let mut bytes = lines.join("\n").into_bytes();
    bytes.push(b'\n');
    std::fs::write(path, &bytes).unwrap();
    bytes
}

/// `pi --db DB import --json FILE`, to be run as a child.
fn pi_import(env: &TestEnv, db: &Path, file: &Path) -> Writer {
    let mut command = pi_child(env, db);
    command.args(["import", "--json"]).arg(file);
    Writer::spawn_pi(command)
}

/// The `import --json` report a child printed, if it got that far.
fn import_report(lines: &[String]) -> Option<Value> {
    lines
        .iter()
        .find_map(|line| serde_json::from_str::<Value>(line).ok())
}

/// The stored entry lines of a session in append order, `None` when the session is absent.
fn stored_lines(store: &SessionStore, session: &str) -> Option<Vec<String>> {
    match store.entries(&SessionId::new(session)) {
        Ok(entries) => Some(
            entries
                .into_iter()
                .map(|stored| String::from_utf8(stored.payload).unwrap())
                .collect(),
        ),
        Err(StoreError::SessionNotFound { .. }) => None,
        Err(other) => panic!("{session}: {other}"),
    }
}

/// Asserts that `pi export --jsonl SESSION` writes exactly `expected`.
fn assert_exports(env: &TestEnv, db: &Path, session: &str, expected: &[u8], context: &str) {
    let output = env
        .pi()
        .args(["--db", db.to_str().unwrap(), "export", "--jsonl", session])
        .output()
        .unwrap();
    assert!(output.status.success(), "{context}: export: {output:?}");
    assert!(
        output.stdout == expected,
        "{context}: the export of {session} differs from its file ({} bytes, expected {})",
        output.stdout.len(),
        expected.len()
    );
}

/// The session whose file is re-imported (merged) and whose prefix is in the base database.
const MERGED_SESSION: &str = "019b7a10-5e55-7000-8000-00000000a001";
/// The session of the file imported fresh (the same lines under another header id).
const FRESH_SESSION: &str = "019b7a10-5e55-7000-8000-00000000b002";

/// Kills the real `pi import --json FILE` at seeded random moments spread over twice the
/// measured duration of an uninterrupted run, on a 3,000-entry reference-format
/// file with branches and labels: half the rounds import a new session, half re-import a file
/// whose first 40 % the database already holds (a merge that appends the rest). After every
/// kill: `pi db check` passes; the imported session is absent or holds every line of its file
/// byte for byte (and `pi export --jsonl` gives the file back); the merged session holds its
/// prefix or the whole file, nothing in between; a report of `imported`/`updated` means
/// complete; the tree is valid.
#[test]
fn kill_during_a_large_import_leaves_all_or_nothing() {
    const ROUNDS: u64 = 12;
    let env = TestEnv::new();
    let dir = env.dir.path();
    let full = large_reference_session(MERGED_SESSION, 5, 2026);
    let entries = full.len() - 1;
    let kept = entries * 2 / 5;
    let mut fresh = full.clone();
    let mut fresh_header: Value = serde_json::from_str(&fresh[0]).unwrap();
    fresh_header["id"] = Value::from(FRESH_SESSION);
    fresh[0] = to_js_string(&fresh_header);
    let full_file = dir.join("full.jsonl");
    let prefix_file = dir.join("prefix.jsonl");
    let fresh_file = dir.join("fresh.jsonl");
    let full_bytes = write_session_file(&full_file, &full);
    let prefix_bytes = write_session_file(&prefix_file, &full[..=kept]);
    let fresh_bytes = write_session_file(&fresh_file, &fresh);
    let megabytes = full_bytes.len() as f64 / 1e6;

    // The base database holds the prefix, imported by the real command.
    let base = dir.join("base.db");
    let (status, lines) = pi_import(&env, &base, &prefix_file).finish();
    assert!(status.success(), "{lines:?}");
    let report = import_report(&lines).unwrap();
    assert_eq!(report["status"], "imported", "{report}");
    assert_eq!(report["entries"], kept, "{report}");

    // Checks one database after a (killed or finished) import; returns whether the import
    // took effect.
    let check = |db: &Path, merge: bool, lines: &[String], context: &str| -> bool {
        assert_db_check(&env, db, context);
        let store = open_store(db, 1);
        let merged = stored_lines(&store, MERGED_SESSION).expect("the merged session");
        let imported = stored_lines(&store, FRESH_SESSION);
        let done = if merge {
            assert!(imported.is_none(), "{context}: a session appeared");
            merged.len() != kept
        } else {
            imported.is_some()
        };
        if merge && done {
            assert_eq!(merged.len(), entries, "{context}: a partial merge");
            assert!(merged == full[1..], "{context}: merged lines differ");
            assert_exports(&env, db, MERGED_SESSION, &full_bytes, context);
        } else {
            assert_eq!(merged.len(), kept, "{context}: the prefix changed");
            assert!(merged == full[1..=kept], "{context}: the prefix changed");
            assert_exports(&env, db, MERGED_SESSION, &prefix_bytes, context);
        }
        if let Some(stored) = &imported {
            assert_eq!(stored.len(), entries, "{context}: a partial import");
            assert!(*stored == fresh[1..], "{context}: imported lines differ");
            assert_exports(&env, db, FRESH_SESSION, &fresh_bytes, context);
            assert_tree_valid(&store, &SessionId::new(FRESH_SESSION), context);
        }
        assert_tree_valid(&store, &SessionId::new(MERGED_SESSION), context);
        if let Some(report) = import_report(lines) {
            let status = if merge { "updated" } else { "imported" };
            assert_eq!(report["status"], status, "{context}: {report}");
            assert!(done, "{context}: reported {status} but not stored");
            assert_eq!(report["entries"], entries, "{context}: {report}");
            let added = if merge { entries - kept } else { entries };
            assert_eq!(report["added"], added, "{context}: {report}");
        }
        done
    };

    // Measure one uninterrupted run of each kind to spread the kills over its duration.
    let mut durations = [0; 2];
    for (merge, duration) in [false, true].into_iter().zip(durations.iter_mut()) {
        let db = dir.join(format!("measure-{merge}.db"));
        copy_db(&base, &db);
        let started = Instant::now();
        let (status, lines) =
            pi_import(&env, &db, if merge { &full_file } else { &fresh_file }).finish();
        *duration = elapsed_ms(started);
        assert!(status.success(), "{lines:?}");
        assert!(check(
            &db,
            merge,
            &lines,
            &format!("uninterrupted, merge {merge}")
        ));
        remove_db(&db);
    }

    let rng = Rng::new(77);
    // [fresh, merge] × [complete, untouched]
    let mut outcomes = [[0; 2]; 2];
    for round in 0..ROUNDS {
        let merge = round % 2 == 1;
        let db = dir.join(format!("round-{round}.db"));
        copy_db(&base, &db);
        let duration = durations[usize::from(merge)];
        let writer = pi_import(&env, &db, if merge { &full_file } else { &fresh_file });
        // Spread over the whole run (start-up included) and as long again: a run under load
        // may take longer than the measured one.
        std::thread::sleep(Duration::from_millis(rng.spread(
            duration * 2,
            round / 2,
            ROUNDS / 2,
        )));
        let lines = writer.kill();
        let done = check(&db, merge, &lines, &format!("import round {round}"));
        outcomes[usize::from(merge)][usize::from(!done)] += 1;
        remove_db(&db);
    }
    assert!(
        outcomes.iter().all(|kind| kind[1] > 0),
        "no kill landed before an import committed: {outcomes:?}"
    );
    eprintln!(
        "import kills: {ROUNDS} kills of `pi import` on a {entries}-entry file ({megabytes:.1} MB): \
         new session over a {} ms import: {} complete, {} absent; \
         merging {} new lines over a {} ms re-import: {} all, {} none; none partial",
        durations[0],
        outcomes[0][0],
        outcomes[0][1],
        entries - kept,
        durations[1],
        outcomes[1][0],
        outcomes[1][1],
    );
}

// ----- kills during a backup ------------------------------------------------------------------

/// Files in `dir` other than the ones named in `keep`.
fn other_files(dir: &Path, keep: &[&Path]) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| !keep.iter().any(|kept| kept == path))
        .collect();
    found.sort();
    found
}

/// A `pi db backup FILE` killed at any moment leaves either no FILE or a complete backup —
/// never a partial one that `db check` would pass — and the rerun either makes the backup or
/// says in one line that FILE exists; a temporary the kill left is removed by the rerun.
#[test]
fn kill_during_a_backup_leaves_no_partial_backup() {
    const ROUNDS: u64 = 12;
    let env = TestEnv::new();
    let dir = env.dir.path();
    let file = dir.join("large.jsonl");
    write_session_file(&file, &large_reference_session(MERGED_SESSION, 5, 2027));
    let source = dir.join("source.db");
    let (status, lines) = pi_import(&env, &source, &file).finish();
    assert!(status.success(), "{lines:?}");
    let expected = open_store(&source, 1)
        .entries(&SessionId::new(MERGED_SESSION))
        .unwrap()
        .len();
    let backups = dir.join("backups");
    std::fs::create_dir(&backups).unwrap();
    let backup = |target: &Path| {
        let mut command = pi_child(&env, &source);
        command.args(["db", "backup"]).arg(target);
        Writer::spawn_pi(command)
    };
    // A finished backup holds every entry (and is the measure for the kill moments).
    let complete = |target: &Path, context: &str| {
        assert_db_check(&env, target, context);
        let store = open_store(target, 1);
        let stored = store
            .entries(&SessionId::new(MERGED_SESSION))
            .unwrap_or_else(|error| panic!("{context}: a partial backup ({error})"));
        assert_eq!(stored.len(), expected, "{context}: a partial backup");
    };
    let measured = backups.join("measured.db");
    let started = Instant::now();
    let (status, lines) = backup(&measured).finish();
    let duration = elapsed_ms(started);
    assert!(status.success(), "{lines:?}");
    complete(&measured, "uninterrupted");
    remove_db(&measured);

    let rng = Rng::new(78);
    let mut absent = 0;
    for round in 0..ROUNDS {
        let target = backups.join(format!("round-{round}.db"));
        let child = backup(&target);
        // Round 0 kills at once, so that one kill lands before the backup is complete however
        // fast this machine is; the others are spread over twice the measured backup.
        let delay = if round == 0 {
            0
        } else {
            rng.spread(duration * 2, round, ROUNDS)
        };
        std::thread::sleep(Duration::from_millis(delay));
        let printed = child.kill();
        let context = format!("backup round {round}");
        let existed = target.exists();
        if existed {
            complete(&target, &context);
        } else {
            assert!(
                printed.is_empty(),
                "{context}: reported {printed:?} but no file"
            );
            absent += 1;
        }
        // The rerun: a backup, or one line saying the file exists.
        let rerun = env
            .pi()
            .args(["--db", source.to_str().unwrap(), "db", "backup"])
            .arg(&target)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&rerun.stderr);
        if existed {
            assert_eq!(rerun.status.code(), Some(1), "{context}: {stderr}");
            assert!(
                stderr.lines().count() == 1 && stderr.contains("exists"),
                "{context}: {stderr}"
            );
        } else {
            assert!(rerun.status.success(), "{context}: {stderr}");
        }
        complete(&target, &format!("{context}, rerun"));
        let target_files: Vec<PathBuf> = ["", "-wal", "-shm"]
            .iter()
            .map(|suffix| PathBuf::from(format!("{}{suffix}", target.display())))
            .collect();
        let keep: Vec<&Path> = target_files.iter().map(PathBuf::as_path).collect();
        assert_eq!(
            other_files(&backups, &keep),
            Vec::<PathBuf>::new(),
            "{context}: files left beside the backup"
        );
        remove_db(&target);
    }
    assert!(absent > 0, "no kill landed before a backup was complete");
    eprintln!(
        "backup kills: {ROUNDS} kills of `pi db backup` over a {duration} ms backup: {absent} left no file, {} a complete backup",
        ROUNDS - absent
    );
}

// ----- kills during compaction ----------------------------------------------------------------

/// What the mock summariser answers (no file operations, so the stored summary is exactly this).
const KILL_SUMMARY: &str = "## Goal\nKill-test summary of the apples.";
/// A phrase of [`KILL_SUMMARY`] that shows the summary is in a request's context.
const KILL_SUMMARY_PHRASE: &str = "Kill-test summary of the apples";
/// The start of the summariser's system prompt.
const SUMMARIZER_MARK: &str = "You are a context summarization assistant";
/// An OpenAI context-length error.
const CONTEXT_OVERFLOW_BODY: &str = r#"{"error":{"message":"This model's maximum context length is 1000 tokens. However, your messages resulted in 1500 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;

/// The text of the last user message of a chat-completions request.
fn last_user_text(request: &RecordedRequest) -> String {
    let body = request.json();
    let Some(message) = body["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
    else {
        return String::new();
    };
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect(),
        _ => String::new(),
    }
}

/// Whether a request is the summariser's.
fn is_summarizer(request: &RecordedRequest) -> bool {
    String::from_utf8_lossy(&request.body).contains(SUMMARIZER_MARK)
}

/// The provider of the compaction kill test, answering by content: the summariser gets
/// [`KILL_SUMMARY`] (held back, then paused mid-body while `slow`); a prompt starting with
/// `THRESHOLD` gets an answer whose usage (900 tokens) crosses the threshold of the 1000-token
/// window; `OVERFLOW` gets a context-length error until the context carries the summary, then
/// `Recovered answer.` (also the request that ends with the summary: the retry after an
/// overflow, whose question is summarised); anything else `Plain answer.` (small usage).
fn compaction_router(slow: Arc<AtomicBool>) -> Router {
    Arc::new(move |request: &RecordedRequest| {
        let slow = slow.load(Ordering::SeqCst);
        if is_summarizer(request) {
            let response = MockResponse::sse(sse::openai_text(KILL_SUMMARY));
            return if slow {
                response
                    .delay_headers(Duration::from_millis(150))
                    .stall_after(60, Duration::from_millis(250))
            } else {
                response
            };
        }
        let prompt = last_user_text(request);
        // 1.6.0's overflow recovery omits the failed attempt, so the cut moves past the
        // question (a split turn): the retried request ends with the summary itself.
        let retried_after_overflow =
            prompt.starts_with("The conversation history before this point was compacted");
        let response = if retried_after_overflow {
            MockResponse::sse(sse::openai_text("Recovered answer."))
        } else if prompt.starts_with("THRESHOLD") {
            MockResponse::sse(sse::openai_text_with_usage("Threshold answer.", 850, 50))
        } else if prompt.starts_with("OVERFLOW") {
            if String::from_utf8_lossy(&request.body).contains(KILL_SUMMARY_PHRASE) {
                MockResponse::sse(sse::openai_text("Recovered answer."))
            } else {
                MockResponse::json(400, CONTEXT_OVERFLOW_BODY)
            }
        } else {
            MockResponse::sse(sse::openai_text("Plain answer."))
        };
        if slow {
            response.delay_headers(Duration::from_millis(60))
        } else {
            response
        }
    })
}

/// `pi --db DB --model mock/mock-model [-c] -p PROMPT` with its own clock start and id seed
/// (each process of a session later than the one before).
fn pi_prompt(env: &TestEnv, db: &Path, hour: i64, continue_session: bool, prompt: &str) -> Command {
    let mut command = pi_child(env, db);
    command
        .env(
            "PI_TEST_CLOCK",
            (crate::common::TEST_CLOCK_START_MS + hour * 3_600_000).to_string(),
        )
        .env("PI_TEST_SEED", (100 + hour).to_string())
        .args(["--model", "mock/mock-model"]);
    if continue_session {
        command.arg("-c");
    }
    command.args(["-p", prompt]);
    command
}

/// Runs a `pi` command to its end and asserts that it printed `answer`.
fn run_prompt(mut command: Command, answer: &str, context: &str) {
    let output = command.stdin(Stdio::null()).output().unwrap();
    assert!(
        output.status.success() && String::from_utf8_lossy(&output.stdout).trim() == answer,
        "{context}: {output:?}"
    );
}

/// A user prompt long enough (≈27 estimated tokens) that keeping the last 20 tokens cuts at it.
fn long_kill_prompt(head: &str, word: &str) -> String {
    format!("{head}: {}", format!("{word} ").repeat(15).trim_end())
}

/// The session's compaction entries, after the first `skip` entries.
fn compactions_after(
    entries: &[pi::store::StoredEntry],
    skip: usize,
) -> Vec<(EntryId, CompactionEntry)> {
    entries
        .iter()
        .skip(skip)
        .filter_map(|stored| match &stored.entry.kind {
            EntryKind::Compaction(compaction) => {
                Some((stored.entry.id.clone()?, compaction.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The ids from the leaf up to its root.
fn path_to_root(store: &SessionStore, session: &SessionId) -> Vec<EntryId> {
    let parents: HashMap<EntryId, Option<EntryId>> = store
        .entries(session)
        .unwrap()
        .into_iter()
        .filter_map(|stored| Some((stored.entry.id?, stored.entry.parent_id)))
        .collect();
    let mut path = Vec::new();
    let mut at = store.leaf(session).unwrap().and_then(|leaf| leaf.entry.id);
    while let Some(id) = at {
        at = parents.get(&id).cloned().flatten();
        path.push(id);
        assert!(path.len() <= parents.len(), "a parent cycle");
    }
    path
}

/// Where a kill landed relative to the compaction of its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum KillPhase {
    /// Before the summariser was asked (the answer may or may not have been stored).
    BeforeSummary,
    /// While the summary was awaited: no compaction entry.
    DuringSummary,
    /// After the compaction entry was committed.
    AfterAppend,
}

/// Kills the real `pi -c -p` at seeded random moments while it compacts a session against
/// the mock provider on 127.0.0.1 — half the rounds through the threshold (the answer's usage
/// crosses window − reserve), half through overflow recovery (a context-length error, compact,
/// retry) — with the summariser held back and paused mid-answer, so that kills land before,
/// while and after the summary is awaited and the compaction entry appended. Each round works
/// on a fresh copy of one database. After every kill: `pi db check` passes, the tree is valid,
/// `pi sessions show S --context --json` rebuilds the context, every entry that existed before
/// is present byte for byte, and there is no new compaction or exactly one complete one (the
/// mock's summary; its `firstKeptEntryId` on the path above it; the context starts with it).
/// Then a later `pi -c -p` on the killed session answers and continues it.
#[test]
fn kill_during_compaction_keeps_the_session_whole() {
    const ROUNDS: u64 = 30;
    let env = TestEnv::new();
    let dir = env.dir.path();
    let slow = Arc::new(AtomicBool::new(false));
    let server = ProviderServer::start_routed(compaction_router(Arc::clone(&slow)));
    std::fs::create_dir_all(&env.agent_dir).unwrap();
    std::fs::write(
        env.agent_dir.join("models.json"),
        crate::common::agent::models_json(&server.url(), 1000),
    )
    .unwrap();
    std::fs::write(
        env.agent_dir.join("settings.json"),
        r#"{"compaction":{"keepRecentTokens":20,"reserveTokens":200}}"#,
    )
    .unwrap();

    // The session every round starts from: two small exchanges.
    let template = dir.join("template.db");
    let questions = [
        "first question about apples",
        "second question about apples",
    ];
    for (hour, question) in questions.into_iter().enumerate() {
        let hour = i64::try_from(hour).unwrap();
        run_prompt(
            pi_prompt(&env, &template, hour, hour > 0, question),
            "Plain answer.",
            "template",
        );
    }
    let (session, before) = {
        let store = open_store(&template, 1);
        let listed = store.list(&pi::store::ListScope::All).unwrap();
        assert_eq!(listed.len(), 1);
        let session = listed[0].id.clone();
        let before: Vec<(Option<EntryId>, Vec<u8>)> = store
            .entries(&session)
            .unwrap()
            .into_iter()
            .map(|stored| (stored.entry.id, stored.payload))
            .collect();
        (session, before)
    };
    assert!(before.len() >= 4, "two exchanges: {}", before.len());
    let prompts = [
        long_kill_prompt("THRESHOLD question", "pears"),
        long_kill_prompt("OVERFLOW question", "plums"),
    ];
    let answers = ["Threshold answer.", "Recovered answer."];

    // Checks a database after a (killed or finished) compacting run: returns the phase the
    // run reached and whether an answer of the run (the first) is stored.
    let check = |db: &Path, summarizer_asked: bool, context: &str| -> (KillPhase, bool) {
        assert_db_check(&env, db, context);
        let store = open_store(db, 1);
        assert_tree_valid(&store, &session, context);
        let entries = store.entries(&session).unwrap();
        assert!(entries.len() >= before.len(), "{context}: entries lost");
        for (stored, (id, payload)) in entries.iter().zip(&before) {
            assert_eq!(&stored.entry.id, id, "{context}: an earlier entry moved");
            assert!(
                stored.payload == *payload,
                "{context}: an earlier entry changed"
            );
        }
        let compactions = compactions_after(&entries, before.len());
        assert!(compactions.len() <= 1, "{context}: {compactions:?}");
        let answered = entries[before.len()..].iter().any(|stored| {
            matches!(
                stored.entry.kind,
                EntryKind::Message(pi::model::message::AgentMessage::Assistant(_))
            )
        });
        let output = env
            .pi()
            .args(["--db", db.to_str().unwrap(), "sessions", "show"])
            .args([session.as_str(), "--context", "--json"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{context}: {output:?}");
        let shown = stdout_json(&output);
        // 1.6.0: the context leads with a system message (the prompt the run stored, or the
        // compaction's checkpoint); the conversation starts after it.
        assert_eq!(shown["messages"][0]["role"], "system", "{context}: {shown}");
        let first = &shown["messages"][1];
        let phase = match compactions.first() {
            Some((id, compaction)) => {
                // The overflow kind splits the question's turn: the prefix summary follows.
                assert!(
                    compaction.summary.starts_with(KILL_SUMMARY),
                    "{context}: {}",
                    compaction.summary
                );
                assert!(compaction.tokens_before > 0, "{context}");
                let path = path_to_root(&store, &session);
                let at = path.iter().position(|entry| entry == id);
                let kept = compaction
                    .first_kept_entry_id
                    .as_ref()
                    .and_then(|kept| path.iter().position(|entry| entry == kept));
                assert!(
                    matches!((at, kept), (Some(at), Some(kept)) if kept > at),
                    "{context}: compaction {id} at {at:?}, first kept at {kept:?} on {path:?}"
                );
                assert_eq!(first["role"], "compactionSummary", "{context}: {shown}");
                assert_eq!(first["summary"], compaction.summary.as_str(), "{context}");
                KillPhase::AfterAppend
            }
            None => {
                assert_eq!(first["role"], "user", "{context}: {shown}");
                assert_eq!(
                    first["content"][0]["text"], questions[0],
                    "{context}: {shown}"
                );
                if summarizer_asked {
                    KillPhase::DuringSummary
                } else {
                    KillPhase::BeforeSummary
                }
            }
        };
        (phase, answered)
    };
    // Continues a killed session: the answer comes, the leaf follows the old one, and the
    // request carries the summary whenever a compaction is on the path.
    let continue_after = |db: &Path, round: u64, context: &str| {
        let old_leaf = open_store(db, 1).leaf(&session).unwrap().unwrap();
        let requests_before = server.requests().len();
        let prompt = format!("later question of round {round}");
        run_prompt(
            pi_prompt(&env, db, 3, true, &prompt),
            "Plain answer.",
            context,
        );
        let store = open_store(db, 1);
        assert_tree_valid(&store, &session, context);
        let path = path_to_root(&store, &session);
        assert!(
            path.contains(old_leaf.entry.id.as_ref().unwrap()),
            "{context}: the later run did not continue from the leaf"
        );
        let leaf = store.leaf(&session).unwrap().unwrap();
        assert!(
            String::from_utf8_lossy(&leaf.payload).contains("Plain answer."),
            "{context}: leaf {}",
            String::from_utf8_lossy(&leaf.payload)
        );
        let entries = store.entries(&session).unwrap();
        let on_path: HashSet<&EntryId> = path.iter().collect();
        let compacted = compactions_after(&entries, before.len())
            .iter()
            .any(|(id, _)| on_path.contains(id));
        let requests = server.requests();
        let asked = requests[requests_before..]
            .iter()
            .rev()
            .find(|request| !is_summarizer(request) && last_user_text(request) == prompt)
            .expect("the later question was sent");
        assert_eq!(
            String::from_utf8_lossy(&asked.body).contains(KILL_SUMMARY_PHRASE),
            compacted,
            "{context}: the context of the later question"
        );
    };

    // One uninterrupted run of each kind: the full outcome, and its duration.
    slow.store(true, Ordering::SeqCst);
    let mut durations = [0; 2];
    for (kind, duration) in durations.iter_mut().enumerate() {
        let db = dir.join(format!("measure-{kind}.db"));
        copy_db(&template, &db);
        let requests_before = server.requests().len();
        let started = Instant::now();
        let (status, lines) =
            Writer::spawn_pi(pi_prompt(&env, &db, 2, true, &prompts[kind])).finish();
        *duration = elapsed_ms(started);
        assert!(status.success() && lines == [answers[kind]], "{lines:?}");
        let asked = server.requests()[requests_before..]
            .iter()
            .any(is_summarizer);
        let context = format!("uninterrupted {kind}");
        assert_eq!(check(&db, asked, &context), (KillPhase::AfterAppend, true));
        slow.store(false, Ordering::SeqCst);
        continue_after(&db, 0, &context);
        slow.store(true, Ordering::SeqCst);
        remove_db(&db);
    }

    let rng = Rng::new(4242);
    let started = Instant::now();
    // Per kind (threshold, overflow): kills per phase.
    let mut phases: [HashMap<KillPhase, u64>; 2] = [HashMap::new(), HashMap::new()];
    let mut answered_then_killed = 0;
    // Per kind: kills before the run's first answer was stored.
    let mut unanswered = [0; 2];
    for round in 0..ROUNDS {
        let kind = usize::try_from(round % 2).unwrap();
        let db = dir.join(format!("round-{round}.db"));
        copy_db(&template, &db);
        slow.store(true, Ordering::SeqCst);
        let requests_before = server.requests().len();
        let writer = Writer::spawn_pi(pi_prompt(&env, &db, 2, true, &prompts[kind]));
        // Spread over the whole run (start-up included) and a little past it.
        std::thread::sleep(Duration::from_millis(rng.spread(
            durations[kind] * 3 / 2,
            round / 2,
            ROUNDS / 2,
        )));
        let lines = writer.kill();
        // (A request sent just before the kill and not yet read by the server counts as not
        // sent: that only moves a kill from "while summarising" to "before".)
        let asked = server.requests()[requests_before..]
            .iter()
            .any(is_summarizer);
        let context = format!("compaction round {round}");
        let (phase, answered) = check(&db, asked, &context);
        if phase == KillPhase::BeforeSummary && !answered {
            unanswered[kind] += 1;
        }
        if lines.iter().any(|line| line == answers[kind]) {
            // The answer was printed: its run compacted.
            assert_eq!(phase, KillPhase::AfterAppend, "{context}");
            answered_then_killed += 1;
        }
        *phases[kind].entry(phase).or_default() += 1;
        slow.store(false, Ordering::SeqCst);
        continue_after(&db, round, &context);
        remove_db(&db);
    }
    for phase in [
        KillPhase::BeforeSummary,
        KillPhase::DuringSummary,
        KillPhase::AfterAppend,
    ] {
        assert!(
            phases.iter().any(|counts| counts.contains_key(&phase)),
            "no kill landed {phase:?}: {phases:?}"
        );
    }
    let describe = |kind: usize| {
        let get = |phase| phases[kind].get(&phase).copied().unwrap_or(0);
        format!(
            "{} before the summary request ({} of them before the run's first answer was stored), {} while summarising, {} after the compaction append",
            get(KillPhase::BeforeSummary),
            unanswered[kind],
            get(KillPhase::DuringSummary),
            get(KillPhase::AfterAppend)
        )
    };
    eprintln!(
        "compaction kills: {ROUNDS} kills of `pi -c -p` survived, each followed by a working `pi -c -p` ({:.1} s); \
         threshold over a {} ms run: {}; overflow over a {} ms run: {}; \
         {answered_then_killed} after the answer was printed",
        started.elapsed().as_secs_f64(),
        durations[0],
        describe(0),
        durations[1],
        describe(1),
    );
}

// ----- concurrency ----------------------------------------------------------------------------

/// What a reader loop saw: how many commands it ran, and every search hit as
/// `(session, entry, word searched)`.
type ReaderLog = (usize, Vec<(String, String, String)>);

/// Runs `pi` with `args` for a reader loop; returns the parsed JSON stdout.
fn reader_run(env: &TestEnv, args: &[&str]) -> Value {
    let output = env.pi().args(args).output().unwrap();
    assert!(
        output.status.success() && output.stderr.is_empty(),
        "reader {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout_json(&output)
}

/// Four processes append 1,000 entries each to four sessions of one database while two
/// processes run `pi sessions list` and `pi sessions search` in a loop: no error reaches
/// anyone, every entry is present, and no reader sees half a write (each listed session's
/// statistics agree with each other and never go backwards; every search hit names an entry
/// that exists and holds the searched word).
#[test]
fn four_writers_and_two_readers_share_one_database() {
    const WRITERS: usize = 4;
    const PER_WRITER: u64 = 1000;
    let env = TestEnv::new();
    let db = env.db();
    let sessions: Vec<SessionId> = {
        let store = open_store(&db, 1);
        (0..WRITERS)
            .map(|idx| new_session(&store, &format!("/conc/{idx}")))
            .collect()
    };
    let started = Instant::now();
    let writers: Vec<Writer> = sessions
        .iter()
        .enumerate()
        .map(|(idx, session)| {
            let seed = (idx + 1).to_string();
            let tag = format!("w{idx}");
            let count = PER_WRITER.to_string();
            Writer::spawn(
                &db,
                &[
                    // Generous on a loaded machine: this test is about correctness.
                    "--busy-ms",
                    "30000",
                    "append",
                    "--session",
                    session.as_str(),
                    "--count",
                    &count,
                    "--seed",
                    &seed,
                    "--lease",
                    &format!("writer {idx}"),
                    "--tag",
                    &tag,
                    "--max-payload",
                    "800",
                ],
            )
        })
        .collect();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let env = Arc::new(env);
    let readers: Vec<JoinHandle<ReaderLog>> = (0..2)
        .map(|reader| {
            let done = Arc::clone(&done);
            let env = Arc::clone(&env);
            std::thread::spawn(move || {
                let mut runs = 0;
                let mut last_seen: HashMap<String, i64> = HashMap::new();
                let mut hits = Vec::new();
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    let listed = reader_run(&env, &["sessions", "list", "--all", "--json"]);
                    for session in listed.as_array().unwrap() {
                        let id = session["session"].as_str().unwrap().to_owned();
                        let entries = session["entries"].as_i64().unwrap();
                        let assistants = entries / 2;
                        assert_eq!(session["messages"].as_i64(), Some(entries), "{session}");
                        assert_eq!(session["tokens"]["output"].as_i64(), Some(assistants));
                        assert_eq!(session["tokens"]["input"].as_i64(), Some(2 * assistants));
                        let previous = last_seen.insert(id.clone(), entries).unwrap_or(0);
                        assert!(entries >= previous, "{id}: {entries} after {previous}");
                    }
                    let word = format!("w{}", (runs + reader) % WRITERS);
                    let found = reader_run(
                        &env,
                        &[
                            "sessions", "search", "--all", "--json", "--limit", "10", &word,
                        ],
                    );
                    for hit in found.as_array().unwrap() {
                        hits.push((
                            hit["session"].as_str().unwrap().to_owned(),
                            hit["entry"].as_str().unwrap().to_owned(),
                            word.clone(),
                        ));
                    }
                    runs += 2;
                }
                (runs, hits)
            })
        })
        .collect();
    let mut expected: Vec<HashMap<String, String>> = Vec::new();
    for (idx, writer) in writers.into_iter().enumerate() {
        let (status, lines) = writer.finish();
        assert!(status.success(), "writer {idx}: {status} {lines:?}");
        let acked = acknowledged(&lines);
        assert_eq!(acked.len() as u64, PER_WRITER, "writer {idx}");
        expected.push(acked.into_iter().collect());
    }
    let elapsed = started.elapsed();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut reader_runs = 0;
    let mut hits = Vec::new();
    for reader in readers {
        let (runs, found) = reader.join().expect("a reader failed");
        reader_runs += runs;
        hits.extend(found);
    }
    assert!(reader_runs >= 4, "the readers ran {reader_runs} times");
    assert_db_check(&env, &db, "after the concurrent run");
    let store = open_store(&db, 1);
    for (idx, session) in sessions.iter().enumerate() {
        assert_acknowledged_present(&store, session, &expected[idx], &format!("writer {idx}"));
        assert_tree_valid(&store, session, &format!("writer {idx}"));
        assert_eq!(store.session(session).unwrap().entries, PER_WRITER as i64);
        assert_eq!(store.lease_holder(session).unwrap(), None, "released");
    }
    for (session, entry, word) in &hits {
        let stored = store
            .entry(
                &SessionId::new(session.as_str()),
                &pi::model::EntryId::new(entry.as_str()),
            )
            .unwrap()
            .unwrap_or_else(|| panic!("search hit {session}/{entry} names no entry"));
        assert!(
            String::from_utf8_lossy(&stored.payload).contains(&format!("{word} ")),
            "hit {entry} for {word}"
        );
    }
    let total = WRITERS as u64 * PER_WRITER;
    eprintln!(
        "concurrency: {total} entries by {WRITERS} processes in {:.2} s ({:.0} appends/s, each durable) while 2 readers ran {reader_runs} list/search commands ({} hits checked)",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64(),
        hits.len()
    );
}

// ----- leases ---------------------------------------------------------------------------------

/// A second process on a held session gets the holder (pid, host, alive) instead of writing;
/// one-shot commands refuse with exit 1 while readers go on; after SIGKILL of the holder the
/// second process takes over at once, long before the lease would be stale.
#[test]
fn a_second_writer_gets_the_holder_and_takes_over_once_the_first_is_killed() {
    let env = TestEnv::new();
    let db = env.db();
    let session = new_session(&open_store(&db, 1), "/two");
    let holder = Writer::spawn(
        &db,
        &[
            "--heartbeat-ms",
            "50",
            "--stale-ms",
            "60000",
            "hold",
            "--session",
            session.as_str(),
            "--lease",
            "first",
            "--append-every-ms",
            "20",
        ],
    );
    assert_eq!(holder.wait_for("lease\t"), "lease\tacquired");
    holder.wait_for("ok\t");

    let second_args = [
        "--stale-ms",
        "60000",
        "append",
        "--session",
        session.as_str(),
        "--count",
        "3",
        "--lease",
        "second",
    ];
    let (status, lines) = Writer::spawn(&db, &second_args).finish();
    assert_eq!(status.code(), Some(4), "{lines:?}");
    let held: Vec<&str> = lines[0].split('\t').collect();
    assert_eq!(held[0], "held");
    assert_eq!(held[1], holder.child.id().to_string(), "the holder's pid");
    assert_eq!(held[2], pi::store::lease::this_process().host);
    assert_eq!(held[3], "alive");
    assert!(held[4].parse::<u64>().unwrap() > 50_000, "{held:?}");

    // One-shot writes refuse (exit 1, one line naming the session and the holder) ...
    let output = env
        .pi()
        .args(["sessions", "rename", session.as_str(), "renamed"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("held by another writer")
            && stderr.contains(session.as_str())
            && stderr.contains(&format!("pid {}", holder.child.id()))
            && stderr.contains("pi.db")
            && stderr.trim().lines().count() == 1,
        "{stderr}"
    );
    let output = env
        .pi()
        .args(["sessions", "rm", session.as_str(), "--yes"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    // An import that would add lines to the held session refuses too; one that adds nothing
    // (the file is what the database already holds) is fine.
    let file = env.dir.path().join("held.jsonl");
    let output = env
        .pi()
        .args(["export", "--jsonl", session.as_str(), "-o"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let output = env.pi().arg("import").arg(&file).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let mut bytes = std::fs::read(&file).unwrap();
    let last_id = String::from_utf8_lossy(&bytes)
        .lines()
        .last()
        .and_then(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .and_then(|entry| entry["id"].as_str().map(str::to_owned))
        .unwrap();
    bytes.extend_from_slice(
        format!(
            "{{\"type\":\"session_info\",\"id\":\"feedf00d\",\"parentId\":\"{last_id}\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"name\":\"from a file\"}}\n"
        )
        .as_bytes(),
    );
    std::fs::write(&file, bytes).unwrap();
    let output = env.pi().arg("import").arg(&file).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("held by another writer"), "{stderr}");
    // ... while readers go on.
    let listed = reader_run(&env, &["sessions", "list", "--all", "--json"]);
    assert_eq!(listed[0]["session"], session.as_str());
    let output = env
        .pi()
        .args(["sessions", "show", session.as_str()])
        .output()
        .unwrap();
    assert!(output.status.success());

    let first_lines = holder.kill();
    let first_acked = acknowledged(&first_lines);
    assert!(!first_acked.is_empty());
    let started = Instant::now();
    let (status, lines) = Writer::spawn(&db, &second_args).finish();
    assert!(status.success(), "{lines:?}");
    assert_eq!(lines[0], "lease\ttook-over");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took over at once, not after staleness"
    );
    let store = open_store(&db, 1);
    let mut expected: HashMap<String, String> = first_acked.into_iter().collect();
    expected.extend(acknowledged(&lines));
    assert_acknowledged_present(&store, &session, &expected, "after take-over");
    assert_tree_valid(&store, &session, "after take-over");
    drop(store);
    // Released at a clean exit: one-shot writes work again.
    succeeded(
        env.pi()
            .args(["sessions", "rename", session.as_str(), "renamed"]),
    );
    assert_db_check(&env, &db, "after rename");
}

/// A holder that stops (SIGSTOP, between two transactions: a process stopped inside one
/// would hold SQLite's write lock) past its staleness is taken over; when it resumes, its next
/// append fails with a clear "lease lost" error instead of interleaving, and nothing it wrote
/// before is lost.
#[test]
fn a_stopped_holder_is_taken_over_when_stale_and_cannot_append_after() {
    let env = TestEnv::new();
    let db = env.db();
    let session = new_session(&open_store(&db, 1), "/stale");
    let holder = Writer::spawn(
        &db,
        &[
            "--heartbeat-ms",
            "30",
            "--stale-ms",
            "1500",
            "hold",
            "--session",
            session.as_str(),
            "--lease",
            "sleepy",
            "--append-every-ms",
            "10",
            "--stop-after",
            "5",
        ],
    );
    assert_eq!(holder.wait_for("lease\t"), "lease\tacquired");
    holder.wait_for("stopping");
    let stopped_at = Instant::now();
    wait_until_stopped(holder.pid());
    let taker_args = [
        "--stale-ms",
        "1500",
        "append",
        "--session",
        session.as_str(),
        "--count",
        "4",
        "--lease",
        "taker",
    ];
    // Fresh at first: the holder is alive and its heartbeat is recent. (The staleness is the
    // holder's, 1.5 s; the margin absorbs a heartbeat thread delayed by a loaded machine.)
    let (status, lines) = Writer::spawn(&db, &taker_args).finish();
    if stopped_at.elapsed() < Duration::from_millis(1000) {
        assert_eq!(status.code(), Some(4), "{lines:?}");
        assert!(lines[0].starts_with("held\t") && lines[0].contains("\talive\t"));
    }
    std::thread::sleep(Duration::from_millis(1600).saturating_sub(stopped_at.elapsed()));
    let (status, taker_lines) = Writer::spawn(&db, &taker_args).finish();
    assert!(status.success(), "{taker_lines:?}");
    assert_eq!(taker_lines[0], "lease\ttook-over");
    kill(holder.pid(), Signal::SIGCONT).unwrap();
    let error = holder.wait_for("error\t");
    assert!(
        error.starts_with("error\tlease-lost\t") && error.contains("no longer holds"),
        "{error}"
    );
    let lines = holder.kill();
    let holder_acked = acknowledged(&lines);
    assert_eq!(
        holder_acked.len(),
        5,
        "nothing appended after the stop: {lines:?}"
    );
    let store = open_store(&db, 1);
    let mut expected: HashMap<String, String> = holder_acked.into_iter().collect();
    expected.extend(acknowledged(&taker_lines));
    assert_acknowledged_present(&store, &session, &expected, "after the loss");
    assert_eq!(
        store.session(&session).unwrap().entries,
        expected.len() as i64
    );
    assert_tree_valid(&store, &session, "after the loss");
}

/// Waits until `pid` is in the stopped state (`T` in `/proc/<pid>/stat`).
fn wait_until_stopped(pid: Pid) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().next());
        if state == Some("T") {
            return;
        }
        assert!(Instant::now() < deadline, "{pid} did not stop: {stat}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// In one process, through the library: two stores on one database behave as two writers.
#[test]
fn leases_guard_every_write_of_a_session() {
    let env = TestEnv::new();
    let first = open_store(&env.db(), 1);
    let second = open_store(&env.db(), 2);
    let session = new_session(&first, "/lib");
    let other = new_session(&first, "/lib");
    let quick = LeaseConfig {
        heartbeat: Duration::from_millis(20),
        stale_after: Duration::from_millis(150),
    };
    let LeaseAttempt::Acquired(lease) = first.acquire_lease(&session, "first", quick).unwrap()
    else {
        panic!("a free session is acquired");
    };
    let user = |text: &str| {
        pi::model::message::AgentMessage::from_value(
            serde_json::json!({"role": "user", "content": text, "timestamp": 1}),
        )
    };
    first.append_message(&session, user("mine")).unwrap();
    // Asking again from the holding store gives the same lease back.
    assert_eq!(
        first.acquire_lease(&session, "first", quick).unwrap(),
        LeaseAttempt::Acquired(lease.clone())
    );
    // The second store sees the holder: this very process, alive and fresh.
    let held = match second.acquire_lease(&session, "second", quick).unwrap() {
        LeaseAttempt::Held(holder) => holder,
        LeaseAttempt::Acquired(_) => panic!("acquired a held session"),
    };
    assert_eq!(held.pid, std::process::id());
    assert_eq!(held.owner, "first");
    assert_eq!(held.owner_alive_on_this_host, Some(true));
    assert!(!held.can_take_over_now());
    assert!(matches!(
        second.take_over_lease(&session, "second", quick).unwrap(),
        LeaseAttempt::Held(_)
    ));
    // Every kind of write to the held session is refused; other sessions are free.
    let refused = |result: Result<(), StoreError>| {
        assert!(
            matches!(result, Err(StoreError::SessionHeld { .. })),
            "{result:?}"
        );
    };
    refused(second.append_message(&session, user("theirs")).map(|_| ()));
    refused(second.append_session_info(&session, "name").map(|_| ()));
    refused(second.reset_leaf(&session));
    refused(second.delete_session(&session));
    second.append_message(&other, user("elsewhere")).unwrap();
    // Reads and forks are not writes to the session.
    assert_eq!(second.entries(&session).unwrap().len(), 1);
    let leaf = second.leaf(&session).unwrap().unwrap().entry.id.unwrap();
    second.fork(&session, Some(&leaf), None).unwrap();

    // Once stale (no heartbeat), the second store takes over; the first can no longer write.
    std::thread::sleep(Duration::from_millis(200));
    let LeaseAttempt::Acquired(taken) = second.take_over_lease(&session, "second", quick).unwrap()
    else {
        panic!("a stale lease is taken over");
    };
    let lost = first.append_message(&session, user("late")).unwrap_err();
    assert!(matches!(lost, StoreError::LeaseLost { .. }), "{lost}");
    assert!(lost.to_string().contains("no longer holds"), "{lost}");
    assert!(matches!(
        first.heartbeat(&lease),
        Err(StoreError::LeaseLost { .. })
    ));
    // Releasing a lost lease leaves the new holder alone.
    first.release_lease(&lease).unwrap();
    assert_eq!(
        first
            .lease_holder(&session)
            .unwrap()
            .map(|holder| holder.owner),
        Some("second".to_owned())
    );
    second.append_message(&session, user("theirs now")).unwrap();
    second.heartbeat(&taken).unwrap();
    second.release_lease(&taken).unwrap();
    assert_eq!(first.lease_holder(&session).unwrap(), None);
    // Nobody holds it: a one-shot write goes through; deleting takes the lease row along.
    first.append_session_info(&session, "done").unwrap();
    let LeaseAttempt::Acquired(_) = first.acquire_lease(&other, "first", quick).unwrap() else {
        panic!("free");
    };
    first.delete_session(&other).unwrap();
    let report = first.check().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// The heartbeat task renews the lease on the tokio runtime, stops cleanly, and reports a
/// loss when the lease is taken from under it.
#[test]
fn the_heartbeat_task_renews_and_reports_a_loss() {
    let env = TestEnv::new();
    let store = open_store(&env.db(), 1);
    let session = new_session(&store, "/beat");
    let config = LeaseConfig {
        heartbeat: Duration::from_millis(20),
        stale_after: Duration::from_secs(60),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let LeaseAttempt::Acquired(lease) = store.acquire_lease(&session, "beat", config).unwrap()
        else {
            panic!("free");
        };
        let heartbeat = pi::store::spawn_heartbeat(store.clone(), lease.clone());
        // Renewals keep the heartbeat young.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            tokio::time::sleep(Duration::from_millis(30)).await;
            let holder = store.lease_holder(&session).unwrap().unwrap();
            if holder.heartbeat_age < Duration::from_millis(500)
                && Instant::now() > deadline - Duration::from_secs(29)
            {
                break;
            }
            assert!(Instant::now() < deadline, "the heartbeat never renewed");
        }
        assert!(matches!(
            heartbeat.status(),
            pi::store::HeartbeatStatus::Held { .. }
        ));
        heartbeat.stop().await;
        let age_after_stop = || store.lease_holder(&session).unwrap().unwrap().heartbeat_age;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(age_after_stop() >= Duration::from_millis(150), "stopped");

        // Another holder's token in the row: the next renewal reports the loss.
        let mut heartbeat = pi::store::spawn_heartbeat(store.clone(), lease.clone());
        let conn = rusqlite::Connection::open(env.db()).unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        conn.execute("UPDATE session_leases SET token = 'someone-else'", [])
            .unwrap();
        let message = tokio::time::timeout(Duration::from_secs(30), heartbeat.lost())
            .await
            .expect("the loss is reported");
        assert!(message.contains("no longer holds"), "{message}");
        assert!(matches!(
            heartbeat.status(),
            pi::store::HeartbeatStatus::Lost { .. }
        ));
        heartbeat.stop().await;
    });
}

// ----- faults ---------------------------------------------------------------------------------

/// `sh -c 'trap "" XFSZ; ulimit -S -f BLOCKS; exec PROGRAM ARGS…'`: the program gets EFBIG
/// instead of being killed when it writes past `bytes` (a soft limit: it may raise it again).
fn with_file_size_limit(bytes: u64, program: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -S -f {}; exec \"$0\" \"$@\"",
            bytes / 512
        ))
        .arg(program)
        .args(args);
    command
}

/// Disk full (a file-size limit): the append fails with one clear error naming the file and
/// changes nothing; once there is room again, the same store (same process, same connection)
/// takes the retried append and more; every acknowledged entry survives and `db check` passes.
/// The store half of "retry the unsaved entries with the next append" (the REPL half is in
/// `session_lease`).
#[test]
fn a_failed_append_changes_nothing_and_the_next_append_succeeds() {
    let env = TestEnv::new();
    let db = env.db();
    let session = new_session(&open_store(&db, 1), "/full");
    let db_text = db.to_str().unwrap().to_owned();
    // Each durable append writes about ten WAL pages (entry, indexes, derived rows).
    let mut command = with_file_size_limit(
        2 * 1024 * 1024,
        &stress_writer_bin(),
        &[
            "--db",
            &db_text,
            "append",
            "--session",
            session.as_str(),
            "--max-payload",
            "20000",
            "--after-full",
            "5",
        ],
    );
    command.env_clear();
    let (status, lines) = Writer::spawn_command(command).finish();
    assert!(status.success(), "{lines:?}");
    let failed_at = lines
        .iter()
        .position(|line| line.starts_with("error\t"))
        .expect("the limit was reached");
    let error = &lines[failed_at];
    assert!(
        error.starts_with("error\tdisk-full\t")
            && error.contains(&db_text)
            && error.contains("file-size limit")
            && error.contains("nothing from this write was saved"),
        "{error}"
    );
    assert!(failed_at > 5, "{failed_at} appends before the limit");
    assert_eq!(
        acknowledged(&lines[failed_at..]).len(),
        6,
        "the retried append and five more: {:?}",
        &lines[failed_at..]
    );
    assert_eq!(lines.last().map(String::as_str), Some("done"));
    let acked: HashMap<String, String> = acknowledged(&lines).into_iter().collect();
    assert_db_check(&env, &db, "after disk full");
    let store = open_store(&db, 1);
    assert_acknowledged_present(&store, &session, &acked, "after disk full");
    assert_eq!(store.session(&session).unwrap().entries, acked.len() as i64);
    assert_tree_valid(&store, &session, "after disk full");
    drop(store);

    // The one-shot command under a limit its write exceeds (the writer's clean exit emptied
    // the WAL): one line, exit 1, nothing written.
    let big_name = "n".repeat(120_000);
    let mut command = with_file_size_limit(
        64 * 1024,
        &pi_bin(),
        &[
            "--db",
            &db_text,
            "sessions",
            "rename",
            session.as_str(),
            &big_name,
        ],
    );
    let output = command.env_clear().output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.trim().lines().count() == 1
            && stderr.contains(&db_text)
            && stderr.contains("cannot write"),
        "{stderr}"
    );

    // With room again, the same store file takes appends at once.
    let (status, more) = Writer::spawn(
        &db,
        &["append", "--session", session.as_str(), "--count", "5"],
    )
    .finish();
    assert!(status.success(), "{more:?}");
    let store = open_store(&db, 1);
    let mut all = acked;
    all.extend(acknowledged(&more));
    assert_acknowledged_present(&store, &session, &all, "after room is back");
    assert_eq!(store.session(&session).unwrap().name, None);
    assert_db_check(&env, &db, "after room is back");
}

/// Runs `pi` so that file permissions apply: as `nobody` (through `setpriv`) when this test
/// runs as root, whom permissions do not stop, and as this user otherwise.
struct Unprivileged {
    /// The command and arguments that run a program as the unprivileged user.
    prefix: Vec<std::ffi::OsString>,
}

impl Unprivileged {
    /// Hands the test's agent dir and files to the unprivileged user and opens the temporary
    /// directory to it; `None` (the test is skipped with a note) when running as root without
    /// a `nobody` user, `setpriv`, or the right to use them.
    fn new(env: &TestEnv) -> Option<Self> {
        set_mode(env.dir.path(), 0o755);
        if !nix::unistd::geteuid().is_root() {
            return Some(Self { prefix: Vec::new() });
        }
        let nobody = nix::unistd::User::from_name("nobody").ok().flatten()?;
        let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
            .into_iter()
            .find(|path| Path::new(path).exists())?;
        let mut paths = vec![env.agent_dir.clone()];
        for entry in std::fs::read_dir(&env.agent_dir).ok()? {
            paths.push(entry.ok()?.path());
        }
        for path in paths {
            nix::unistd::chown(&path, Some(nobody.uid), Some(nobody.gid)).ok()?;
        }
        let runner = Self {
            prefix: vec![
                setpriv.into(),
                format!("--reuid={}", nobody.uid).into(),
                format!("--regid={}", nobody.gid).into(),
                "--clear-groups".into(),
            ],
        };
        runner
            .pi(env, &["--version"])
            .status
            .success()
            .then_some(runner)
    }

    fn pi(&self, env: &TestEnv, args: &[&str]) -> std::process::Output {
        let mut command = match self.prefix.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(pi_bin());
                command
            }
            None => Command::new(pi_bin()),
        };
        command
            .env_clear()
            .env("PI_CODING_AGENT_DIR", &env.agent_dir)
            .env("HOME", &env.home)
            .env("NO_COLOR", "1")
            .current_dir("/")
            .args(args)
            .output()
            .unwrap()
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A read-only database file: readers work, a write fails with one line naming the file and
/// saying what to do, and the file is not changed.
/// A new session in `cwd` of the default database, holding one user message `text`.
fn session_with_one_message(env: &TestEnv, cwd: &str, text: &str) -> SessionId {
    let store = env.store();
    let session = new_session(&store, cwd);
    store
        .append_message(
            &session,
            pi::model::message::AgentMessage::from_value(
                serde_json::json!({"role": "user", "content": text, "timestamp": 1}),
            ),
        )
        .unwrap();
    session
}

#[test]
fn a_read_only_database_reads_and_refuses_writes_clearly() {
    let env = TestEnv::new();
    let session = session_with_one_message(&env, "/ro", "keep me");
    // A session the reference wrote meanwhile: the automatic import before the listing cannot
    // store it, which is one warning, not a failure.
    let project = env.agent_dir.join("sessions").join("--ro--");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::copy(
        crate::common::fixtures::dir().join("basic-chat.jsonl"),
        project.join("basic-chat.jsonl"),
    )
    .unwrap();
    let Some(user) = Unprivileged::new(&env) else {
        eprintln!("skipped: running as root without a usable `nobody` user and setpriv");
        return;
    };
    set_mode(&env.db(), 0o400);
    let before = std::fs::read(env.db()).unwrap();
    let listed = user.pi(&env, &["sessions", "list", "--all", "--json"]);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert_eq!(stdout_json(&listed)[0]["entries"], 1);
    assert_eq!(stdout_json(&listed).as_array().unwrap().len(), 1);
    let stderr = String::from_utf8_lossy(&listed.stderr);
    assert!(
        stderr.trim().lines().count() == 1
            && stderr.contains("1 reference session file was not imported")
            && stderr.contains("not writable"),
        "{stderr}"
    );
    let renamed = user.pi(&env, &["sessions", "rename", session.as_str(), "x"]);
    assert_eq!(renamed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&renamed.stderr);
    assert!(
        stderr.trim().lines().count() == 1
            && stderr.contains("pi.db")
            && stderr.contains("not writable")
            && stderr.contains("--db"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(env.db()).unwrap(), before, "the file changed");
    set_mode(&env.db(), 0o600);
    let store = env.store();
    assert_eq!(store.entries(&session).unwrap().len(), 1);
    assert_eq!(store.session(&session).unwrap().name, None);
}

/// The database's `-wal` and `-shm` files.
fn journals_of(db: &Path) -> [PathBuf; 2] {
    ["-wal", "-shm"].map(|suffix| PathBuf::from(format!("{}{suffix}", db.display())))
}

/// Checkpoints the WAL into the database and closes it, so that no `-wal`/`-shm` is left (the
/// state after every pi process has ended cleanly).
fn close_cleanly(db: &Path) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    drop(conn);
    for journal in journals_of(db) {
        assert!(!journal.exists(), "{} left", journal.display());
    }
}

/// `chmod 400 pi.db`, every reading command, `chmod 600`: writes work again — the reads left
/// no `-wal`/`-shm` that this user cannot write (SQLite gave the ones a reader created the
/// database file's mode, 0400, and every later write failed naming only pi.db). A write that
/// fails because of a read-only `-wal` or `-shm` names that file and what to do.
#[test]
fn reading_a_read_only_database_leaves_nothing_that_breaks_later_writes() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let session = session_with_one_message(&env, "/ro", "searchable words");
    close_cleanly(&env.db());
    let Some(user) = Unprivileged::new(&env) else {
        eprintln!("skipped: running as root without a usable `nobody` user and setpriv");
        return;
    };
    set_mode(&env.db(), 0o400);
    let backup = env.agent_dir.join("copy.db");
    let exported = env.agent_dir.join("copy.jsonl");
    let reads: Vec<Vec<&str>> = vec![
        vec!["sessions", "list", "--all", "--json"],
        vec!["sessions", "show", session.as_str()],
        vec!["sessions", "show", session.as_str(), "--tree"],
        vec!["sessions", "search", "searchable", "--all"],
        vec!["sessions", "stats", "--all"],
        vec![
            "export",
            "--jsonl",
            session.as_str(),
            "-o",
            exported.to_str().unwrap(),
        ],
        vec!["db", "backup", backup.to_str().unwrap()],
    ];
    for args in &reads {
        let output = user.pi(&env, args);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // The writes a read-only database refuses, and their message.
    let renamed = user.pi(&env, &["sessions", "rename", session.as_str(), "x"]);
    assert_eq!(renamed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&renamed.stderr);
    assert!(
        stderr.lines().count() == 1 && stderr.contains("pi.db is not writable"),
        "{stderr}"
    );
    for journal in journals_of(&env.db()) {
        if let Ok(meta) = std::fs::metadata(&journal) {
            assert_eq!(
                meta.permissions().mode() & 0o600,
                0o600,
                "{} left as {:o}",
                journal.display(),
                meta.permissions().mode()
            );
        }
    }
    set_mode(&env.db(), 0o600);
    let renamed = user.pi(&env, &["sessions", "rename", session.as_str(), "after"]);
    assert!(
        renamed.status.success(),
        "a write after chmod 600: {}",
        String::from_utf8_lossy(&renamed.stderr)
    );
}

/// A read-only `-wal` (or `-shm`), as another program may leave them: a write fails with one
/// line naming it and saying what to do, and works again once it is writable.
#[test]
fn a_write_beside_a_read_only_wal_names_the_wal_and_what_to_do() {
    let env = TestEnv::new();
    let session = session_with_one_message(&env, "/ro", "searchable words");
    close_cleanly(&env.db());
    let Some(user) = Unprivileged::new(&env) else {
        eprintln!("skipped: running as root without a usable `nobody` user and setpriv");
        return;
    };
    for journal in journals_of(&env.db()) {
        std::fs::write(&journal, b"").unwrap();
        if let Some(nobody) = nix::unistd::User::from_name("nobody").ok().flatten()
            && nix::unistd::geteuid().is_root()
        {
            nix::unistd::chown(&journal, Some(nobody.uid), Some(nobody.gid)).unwrap();
        }
        set_mode(&journal, 0o400);
    }
    let renamed = user.pi(&env, &["sessions", "rename", session.as_str(), "blocked"]);
    assert_eq!(renamed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&renamed.stderr);
    let wal = journals_of(&env.db())[0].display().to_string();
    assert!(
        stderr.lines().count() == 1
            && stderr.contains(&format!("{wal} is not writable"))
            && stderr.contains("chmod"),
        "{stderr}"
    );
    for journal in journals_of(&env.db()) {
        set_mode(&journal, 0o600);
    }
    let renamed = user.pi(&env, &["sessions", "rename", session.as_str(), "last"]);
    assert!(
        renamed.status.success(),
        "{}",
        String::from_utf8_lossy(&renamed.stderr)
    );
    let listed = user.pi(&env, &["sessions", "list", "--all", "--json"]);
    assert_eq!(stdout_json(&listed)[0]["name"], "last");
}

/// A directory the user cannot write: no database can be created there, and an existing one
/// refuses writes — each with one line naming what is not writable. Reading needs the WAL's
/// `-shm` file, which SQLite cannot create there: a reader either works or says the same.
#[test]
fn an_unwritable_directory_gives_one_clear_error() {
    let env = TestEnv::new();
    let session = new_session(&env.store(), "/dir");
    let Some(user) = Unprivileged::new(&env) else {
        eprintln!("skipped: running as root without a usable `nobody` user and setpriv");
        return;
    };
    set_mode(&env.agent_dir, 0o500);
    let new_db = env.agent_dir.join("new.db");
    let created = user.pi(
        &env,
        &["--db", new_db.to_str().unwrap(), "sessions", "list"],
    );
    assert_eq!(created.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&created.stderr);
    assert!(
        stderr.trim().lines().count() == 1
            && stderr.contains("new.db")
            && stderr.contains("not writable"),
        "{stderr}"
    );
    assert!(!new_db.exists());
    for args in [
        vec!["sessions", "rename", session.as_str(), "x"],
        vec!["sessions", "list", "--all"],
    ] {
        let output = user.pi(&env, &args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let reads = args[1] == "list" && output.status.success();
        assert!(
            reads
                || (output.status.code() == Some(1)
                    && stderr.trim().lines().count() == 1
                    && stderr.contains("not writable")),
            "{args:?}: {stderr}"
        );
    }
    set_mode(&env.agent_dir, 0o700);
    let store = env.store();
    assert_eq!(store.session(&session).unwrap().name, None);
    assert!(store.check().unwrap().problems.is_empty());
}

/// Runs a command against a damaged database: it must end with 0 or 1 (never a panic or a
/// signal), and with 1 print one line naming the file.
fn run_on_damaged(env: &TestEnv, args: &[&str]) -> std::process::Output {
    let output = env.pi().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        matches!(output.status.code(), Some(0 | 1)) && !stderr.contains("panicked"),
        "{args:?}: {:?} {stderr}",
        output.status
    );
    if output.status.code() == Some(1) {
        assert!(
            stderr.contains("pi.db") && stderr.trim().lines().count() == 1,
            "{args:?}: {stderr}"
        );
    }
    output
}

/// Which entries a fresh store can still read, per session (`None` if it cannot be listed).
fn readable(env: &TestEnv) -> Option<HashMap<String, Vec<Vec<u8>>>> {
    let store = SessionStore::open(pi::store::StoreConfig {
        location: pi::store::StoreLocation::File(env.db()),
        clock: Arc::new(pi::support::clock::SystemClock),
        ids: Arc::new(IdSource::seeded(1)),
        busy_timeout: Duration::from_secs(5),
    })
    .ok()?;
    let sessions = store.list(&pi::store::ListScope::All).ok()?;
    Some(
        sessions
            .into_iter()
            .filter_map(|summary| {
                let entries = store.entries(&summary.id).ok()?;
                Some((
                    summary.id.to_string(),
                    entries.into_iter().map(|stored| stored.payload).collect(),
                ))
            })
            .collect(),
    )
}

/// A truncated or overwritten database file: every command answers 0 or 1 with one clear
/// line, reading commands leave the file byte for byte as it was, and whatever was readable
/// before a write attempt is still readable after it.
#[test]
fn a_damaged_database_file_is_reported_and_never_repaired_destructively() {
    let template = TestEnv::new();
    let sessions: Vec<SessionId> = {
        let store = template.store();
        (0..3)
            .map(|idx| {
                let session = new_session(&store, "/damaged");
                for n in 0..150 {
                    let text = format!("entry {idx}-{n} {}", "filler ".repeat(40));
                    store
                        .append_message(
                            &session,
                            pi::model::message::AgentMessage::from_value(serde_json::json!({
                                "role": "user", "content": text, "timestamp": n
                            })),
                        )
                        .unwrap();
                }
                session
            })
            .collect()
    };
    // Fold the WAL into the file so that damage to the file is damage to the data.
    {
        let conn = rusqlite::Connection::open(template.db()).unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .unwrap();
    }
    let original = std::fs::read(template.db()).unwrap();
    let page = 4096;
    let pages = original.len() / page;
    let rng = Rng::new(5);
    let damages: Vec<(String, Vec<u8>)> = vec![
        (
            "truncated to half".into(),
            original[..original.len() / 2].to_vec(),
        ),
        (
            "truncated by one page".into(),
            original[..original.len() - page].to_vec(),
        ),
        (
            "truncated mid-page".into(),
            original[..original.len() - page - 1234].to_vec(),
        ),
        ("truncated to 100 bytes".into(), original[..100].to_vec()),
        ("header overwritten".into(), {
            let mut bytes = original.clone();
            bytes[..16].copy_from_slice(b"not a database!!");
            bytes
        }),
        ("a data page overwritten".into(), {
            let mut bytes = original.clone();
            let at = (pages / 2) * page;
            for byte in &mut bytes[at..at + page] {
                *byte = u8::try_from(rng.below(256)).unwrap();
            }
            bytes
        }),
        ("the last page overwritten".into(), {
            let mut bytes = original.clone();
            let at = (pages - 1) * page;
            for byte in &mut bytes[at..at + page] {
                *byte = u8::try_from(rng.below(256)).unwrap();
            }
            bytes
        }),
    ];
    let mut failed_reads = 0;
    for (what, bytes) in damages {
        let env = TestEnv::new();
        std::fs::create_dir_all(&env.agent_dir).unwrap();
        std::fs::write(env.db(), &bytes).unwrap();
        let db_text = env.db().to_str().unwrap().to_owned();
        for args in [
            vec!["sessions", "list", "--all", "--json"],
            vec!["sessions", "show", sessions[1].as_str(), "--json"],
            vec!["sessions", "show", sessions[2].as_str(), "--tree", "--json"],
            vec!["sessions", "search", "--all", "--json", "entry"],
            vec!["db", "check"],
        ] {
            let output = run_on_damaged(&env, &args);
            failed_reads += usize::from(!output.status.success());
            assert_eq!(
                std::fs::read(env.db()).unwrap(),
                bytes,
                "{what}: `{}` changed the file",
                args.join(" ")
            );
        }
        let output = run_on_damaged(&env, &["--db", &db_text, "db", "check"]);
        if bytes == original {
            assert!(output.status.success());
        }
        let before = readable(&env);
        for session in &sessions {
            run_on_damaged(
                &env,
                &["sessions", "rename", session.as_str(), "after damage"],
            );
        }
        let after = readable(&env);
        if let Some(before) = before {
            let after =
                after.unwrap_or_else(|| panic!("{what}: readable before a write, not after"));
            for (session, entries) in before {
                let now = &after[&session];
                assert!(
                    now.len() >= entries.len() && now[..entries.len()] == entries[..],
                    "{what}: session {session} lost entries"
                );
            }
        }
    }
    assert!(failed_reads > 0, "no damage was noticed at all");
}

/// Garbage appended to the WAL of a killed writer is ignored: every acknowledged entry is
/// there. Garbage over the middle of the WAL loses the transactions from there on — SQLite's
/// recovery stops at the first bad frame — but what remains is a consistent prefix of the
/// acknowledged appends, `db check` passes, and writing goes on.
///
/// The writer makes fewer appends than fill a WAL before SQLite's automatic checkpoint (the
/// test checks that the database file did not change): garbage over frames that a checkpoint
/// has already copied into the file can leave file and WAL disagreeing, which no WAL reader
/// can undo (docs/RELIABILITY.md).
#[test]
fn garbage_in_the_wal_never_breaks_the_database() {
    let template = TestEnv::new();
    let db = template.db();
    let session = new_session(&open_store(&db, 1), "/wal");
    // Checkpoint what exists so far, so that the WAL holds only the writer's appends.
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    let writer = Writer::spawn(
        &db,
        &[
            "append",
            "--session",
            session.as_str(),
            "--count",
            "40",
            "--linger",
            "--max-payload",
            "3000",
        ],
    );
    writer.wait_for("lingering");
    let acked = acknowledged(&writer.kill());
    assert_eq!(acked.len(), 40);
    let wal = std::fs::read(db.with_extension("db-wal")).unwrap();
    let main = std::fs::read(&db).unwrap();
    assert!(main == before, "a checkpoint ran during the appends");
    assert!(
        wal.len() > 100_000,
        "the WAL holds the appends ({} bytes)",
        wal.len()
    );
    let rng = Rng::new(11);
    let noise = |len: usize| -> Vec<u8> {
        (0..len)
            .map(|_| u8::try_from(rng.below(256)).unwrap())
            .collect()
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage appended", [wal.clone(), noise(50_000)].concat()),
        ("garbage over the middle", {
            let mut bytes = wal.clone();
            let at = bytes.len() / 2;
            bytes[at..at + 8192].copy_from_slice(&noise(8192));
            bytes
        }),
        ("garbage over the header", {
            let mut bytes = wal.clone();
            bytes[..32].copy_from_slice(&noise(32));
            bytes
        }),
    ];
    for (what, wal_bytes) in cases {
        let env = TestEnv::new();
        std::fs::create_dir_all(&env.agent_dir).unwrap();
        std::fs::write(env.db(), &main).unwrap();
        std::fs::write(env.db().with_extension("db-wal"), &wal_bytes).unwrap();
        assert_db_check(&env, &env.db(), what);
        let store = env.store();
        let ids: Vec<String> = store
            .entries(&session)
            .unwrap()
            .into_iter()
            .filter_map(|stored| stored.entry.id.map(|id| id.to_string()))
            .collect();
        let expected_prefix: Vec<String> = acked
            .iter()
            .take(ids.len())
            .map(|(id, _)| id.clone())
            .collect();
        assert_eq!(
            ids, expected_prefix,
            "{what}: not a prefix of the acknowledged appends"
        );
        if what == "garbage appended" {
            assert_eq!(ids.len(), acked.len(), "{what}: acknowledged entries lost");
        }
        let prefix: HashMap<String, String> = acked.iter().take(ids.len()).cloned().collect();
        assert_acknowledged_present(&store, &session, &prefix, what);
        assert_tree_valid(&store, &session, what);
        store
            .append_session_info(&session, "still writable")
            .unwrap();
        drop(store);
        assert_db_check(&env, &env.db(), what);
    }
}

/// A session in the default database, and a connection holding its write lock.
fn a_session_behind_a_held_write_lock(env: &TestEnv) -> (SessionId, rusqlite::Connection) {
    let session = new_session(&env.store(), "/busy");
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE; UPDATE leaf SET seq = seq WHERE 0;")
        .unwrap();
    (session, conn)
}

/// A write lock held past the busy timeout: the writer gives up with one clear line after the
/// timeout, and writes again once the lock is released.
#[test]
fn a_lock_held_past_the_busy_timeout_fails_writes_clearly() {
    let env = TestEnv::new();
    let (session, conn) = a_session_behind_a_held_write_lock(&env);
    let started = Instant::now();
    let output = env
        .pi()
        .env("PI_BUSY_TIMEOUT_MS", "200")
        .args(["sessions", "rename", session.as_str(), "x"])
        .output()
        .unwrap();
    let waited = started.elapsed();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.trim().lines().count() == 1
            && stderr.contains("pi.db")
            && stderr.contains("locked by another process"),
        "{stderr}"
    );
    assert!(
        waited >= Duration::from_millis(200),
        "gave up before the timeout"
    );
    conn.execute_batch("COMMIT;").unwrap();
    succeeded(env.pi().args(["sessions", "rename", session.as_str(), "x"]));
}

/// Readers answer at once beside a held write lock, whatever the busy timeout.
#[test]
fn a_held_write_lock_never_blocks_readers() {
    let env = TestEnv::new();
    let (session, _conn) = a_session_behind_a_held_write_lock(&env);
    for args in [
        vec!["sessions", "list", "--all", "--json"],
        vec!["sessions", "search", "--all", "--json", "anything"],
        vec!["sessions", "show", session.as_str(), "--json"],
    ] {
        let output = env
            .pi()
            .env("PI_BUSY_TIMEOUT_MS", "60000")
            .args(&args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?} waited for the writer: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The agent dir is created 0700 and the database, WAL and SHM files 0600, by the CLI too.
#[test]
fn files_the_cli_creates_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let output = env.pi().args(["sessions", "list"]).output().unwrap();
    assert!(output.status.success());
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&env.agent_dir), 0o700);
    assert_eq!(mode(&env.db()), 0o600);
    // While a store is open, its WAL and SHM exist.
    let store = env.store();
    new_session(&store, "/private");
    for suffix in ["db-wal", "db-shm"] {
        let path = env.db().with_extension(suffix);
        assert_eq!(mode(&path), 0o600, "{}", path.display());
    }
}
