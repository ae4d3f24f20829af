//! Durable append throughput across processes (`docs/RELIABILITY.md`, `docs/BENCHMARKS.md`).
//!
//! Runs the stress writer example (`examples/stress_writer.rs`, build it first:
//! `cargo build --release --example stress_writer`) as separate processes on one database:
//! one writer alone, four writers on four sessions, and four writers while two reader loops
//! run `pi sessions list` / `pi sessions search`. Every append is its own `BEGIN IMMEDIATE`
//! transaction with `synchronous=FULL` (one fsync) and a lease check. Prints appends per
//! second and reader commands per second.
//!
//! `cargo bench --bench durability [-- [ENTRIES_PER_WRITER] [--dir DIR]]` (default 2,000 in
//! the system temp dir). `--dir /dev/shm` puts the database on tmpfs, where an fsync costs
//! nothing: the difference to a disk is the price of durability on that disk.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pi::store::{NewSession, SessionStore, StoreConfig, StoreLocation};
use pi::support::clock::SystemClock;
use pi::support::ids::IdSource;

fn stress_writer() -> PathBuf {
    let exe = std::env::current_exe().expect("bench binary path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .join("examples")
        .join("stress_writer");
    if !bin.exists() {
        eprintln!(
            "{} is missing: run `cargo build --release --example stress_writer` first",
            bin.display()
        );
        std::process::exit(2);
    }
    bin
}

fn new_sessions(db: &Path, n: usize) -> Vec<String> {
    let store = SessionStore::open(StoreConfig {
        location: StoreLocation::File(db.to_path_buf()),
        clock: Arc::new(SystemClock),
        ids: Arc::new(IdSource::seeded(1)),
        busy_timeout: Duration::from_secs(10),
    })
    .expect("open the store");
    (0..n)
        .map(|idx| {
            store
                .create_session(&NewSession {
                    cwd: format!("/bench/{idx}"),
                    parent_session: None,
                })
                .expect("create a session")
                .id
                .to_string()
        })
        .collect()
}

/// Runs `writers` stress writers of `per_writer` appends each (and `readers` reader loops);
/// returns (seconds, reader commands run).
fn run(base: &Path, writers: usize, readers: usize, per_writer: u64) -> (f64, usize) {
    let dir = tempfile::tempdir_in(base).expect("temp dir");
    let db = dir.path().join("pi.db");
    let sessions = new_sessions(&db, writers);
    let done = Arc::new(AtomicBool::new(false));
    let reader_runs = Arc::new(AtomicUsize::new(0));
    let reader_threads: Vec<_> = (0..readers)
        .map(|reader| {
            let done = Arc::clone(&done);
            let runs = Arc::clone(&reader_runs);
            let db = db.clone();
            std::thread::spawn(move || {
                let mut n = 0;
                while !done.load(Ordering::SeqCst) {
                    let args: Vec<String> = if (n + reader) % 2 == 0 {
                        vec![
                            "sessions".into(),
                            "list".into(),
                            "--all".into(),
                            "--json".into(),
                        ]
                    } else {
                        [
                            "sessions", "search", "--all", "--json", "--limit", "10", "w1",
                        ]
                        .map(str::to_owned)
                        .to_vec()
                    };
                    let status = Command::new(env!("CARGO_BIN_EXE_pi"))
                        .arg("--db")
                        .arg(&db)
                        .args(&args)
                        .stdout(Stdio::null())
                        .status()
                        .expect("run pi");
                    assert!(status.success(), "a reader failed: {args:?}");
                    n += 1;
                    runs.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let started = Instant::now();
    let children: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(idx, session)| {
            Command::new(stress_writer())
                .arg("--db")
                .arg(&db)
                .args(["append", "--session", session, "--count"])
                .arg(per_writer.to_string())
                .args([
                    "--seed",
                    &(idx + 1).to_string(),
                    "--tag",
                    &format!("w{idx}"),
                ])
                .args(["--lease", "bench", "--max-payload", "800"])
                .stdout(Stdio::null())
                .spawn()
                .expect("spawn a writer")
        })
        .collect();
    for mut child in children {
        assert!(child.wait().expect("wait").success(), "a writer failed");
    }
    let seconds = started.elapsed().as_secs_f64();
    done.store(true, Ordering::SeqCst);
    for thread in reader_threads {
        thread.join().expect("reader thread");
    }
    (seconds, reader_runs.load(Ordering::SeqCst))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let per_writer: u64 = args.iter().find_map(|arg| arg.parse().ok()).unwrap_or(2000);
    let base = args
        .iter()
        .position(|arg| arg == "--dir")
        .and_then(|idx| args.get(idx + 1))
        .map_or_else(std::env::temp_dir, PathBuf::from);
    println!(
        "durable appends in {}, {per_writer} per writer (800-byte max payload, one fsync each)",
        base.display()
    );
    for (writers, readers) in [(1, 0), (4, 0), (4, 2)] {
        let (seconds, reader_runs) = run(&base, writers, readers, per_writer);
        let total = writers as f64 * per_writer as f64;
        println!(
            "{writers} writer(s), {readers} reader loop(s): {:>7.0} appends/s ({total} in {seconds:.2} s){}",
            total / seconds,
            if readers > 0 {
                format!(", {:.1} reader commands/s", reader_runs as f64 / seconds)
            } else {
                String::new()
            }
        );
    }
}
