//! Benchmark of the incremental import and the automatic import at start (not run in CI;
//! figures go to `docs/BENCHMARKS.md`, "Automatic import"):
//!
//! 1. the start-up check over 1,000 unchanged reference session files (40 project
//!    directories of 25 files in the reference's layout): `AutoImport::run` in-process, and
//!    a whole `pi sessions list` process with the check against one with `PI_AUTO_IMPORT=0`
//!    (goal: the check under 5 ms);
//! 2. `pi import DIR` of that unchanged 1,000-session directory (goal under 100 ms);
//! 3. 10 entries appended to a large file, then imported (goal under 50 ms): each run appends
//!    10 more entries (user and assistant messages of 0.5-3 KB, chained to the file's last
//!    entry) and imports the file, in-process and as a `pi import FILE` process.
//!
//! ```text
//! node ../shared/tools/pi-oracle/gen-large.mjs 100000 /tmp/large-100k.jsonl   # PI_PKG_DIR set
//! cargo bench --bench autoimport -- [/tmp/large-100k.jsonl] [RUNS]
//! ```
//!
//! Without a large file, step 3 uses a generated 100,000-entry linear file (plainer than the
//! generator's). The machine is shared: the minimum and the median of RUNS runs (default 21)
//! are printed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi::cli::autoimport::AutoImport;
use pi::cli::config::Env;
use pi::store::{ImportMode, SessionStore, StoreConfig, StoreLocation};
use pi::support::clock::{SystemClock, iso_from_ms};
use pi::support::ids::IdSource;
use serde_json::{Value, json};

const PROJECTS: usize = 40;
const FILES_PER_PROJECT: usize = 25;
const TURNS: usize = 10;

fn pi_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pi"))
}

fn store_config(db: &Path) -> StoreConfig {
    StoreConfig {
        location: StoreLocation::File(db.to_path_buf()),
        clock: Arc::new(SystemClock),
        ids: Arc::new(IdSource::random()),
        busy_timeout: Duration::from_secs(10),
    }
}

fn message_line(id: &str, parent: Option<&str>, ms: i64, role: &str, text: &str) -> String {
    let message = if role == "user" {
        json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ms})
    } else {
        json!({
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
            "usage": {"input": 1200, "output": 80, "cacheRead": 0, "cacheWrite": 0,
                      "totalTokens": 1280,
                      "cost": {"input": 0.0036, "output": 0.0012, "cacheRead": 0,
                               "cacheWrite": 0, "total": 0.0048}},
            "stopReason": "stop", "timestamp": ms
        })
    };
    json!({"type": "message", "id": id, "parentId": parent,
           "timestamp": iso_from_ms(ms), "message": message})
    .to_string()
}

/// Writes 1,000 small sessions in the reference's layout under `<agent>/sessions`.
fn write_reference_dir(agent: &Path) -> usize {
    let base_ms: i64 = 1_767_225_600_000;
    let mut files = 0;
    for project in 0..PROJECTS {
        let dir = agent
            .join("sessions")
            .join(format!("--home-u-projects-p{project}--"));
        std::fs::create_dir_all(&dir).expect("project dir");
        for idx in 0..FILES_PER_PROJECT {
            let n = project * FILES_PER_PROJECT + idx;
            let start_ms = base_ms + n as i64 * 600_000;
            let id = format!("01970000-0000-7000-8000-{n:012x}");
            let stamp = iso_from_ms(start_ms).replace([':', '.'], "-");
            let mut lines = vec![
                json!({"type": "session", "version": 3, "id": id,
                       "timestamp": iso_from_ms(start_ms),
                       "cwd": format!("/home/u/projects/p{project}")})
                .to_string(),
            ];
            let mut parent: Option<String> = None;
            for turn in 0..TURNS * 2 {
                let entry = format!("{:08x}", n * 100 + turn);
                let role = if turn % 2 == 0 { "user" } else { "assistant" };
                let text = format!(
                    "Turn {turn} of session {n}: {}",
                    "the checkout flow retries the payment call with backoff. ".repeat(6)
                );
                lines.push(message_line(
                    &entry,
                    parent.as_deref(),
                    start_ms + turn as i64 * 1000,
                    role,
                    &text,
                ));
                parent = Some(entry);
            }
            let mut bytes = lines.join("\n").into_bytes();
            bytes.push(b'\n');
            std::fs::write(dir.join(format!("{stamp}_{id}.jsonl")), bytes).expect("write");
            files += 1;
        }
    }
    files
}

/// A 100,000-entry linear session file (when no generated large file is given).
fn write_large(path: &Path, entries: usize) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    let start_ms: i64 = 1_740_816_000_000;
    writeln!(
        out,
        "{}",
        json!({"type": "session", "version": 3, "id": "01950000-0000-7000-8000-00000000b16f",
               "timestamp": iso_from_ms(start_ms), "cwd": "/home/u/projects/large"})
    )
    .expect("write");
    let mut parent: Option<String> = None;
    for idx in 0..entries {
        let id = format!("{idx:08x}");
        let role = if idx % 2 == 0 { "user" } else { "assistant" };
        let words = "a realistic sentence about the code being changed in this turn. ";
        let text = words.repeat(8 + idx % 40);
        let line = message_line(&id, parent.as_deref(), start_ms + idx as i64, role, &text);
        writeln!(out, "{line}").expect("write");
        parent = Some(id);
    }
    out.flush().expect("flush");
}

/// The id of the last entry line of a file (the parent of what is appended).
fn last_id(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read the large file");
    text.lines()
        .rev()
        .find_map(|line| {
            let value: Value = serde_json::from_str(line).ok()?;
            Some(value["id"].as_str()?.to_owned())
        })
        .expect("an entry line")
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Returns (min, median) in milliseconds.
fn stats(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    (millis(samples[0]), millis(samples[samples.len() / 2]))
}

fn pi(root: &Path, args: &[&str], extra: &[(&str, &str)]) -> Command {
    let mut command = Command::new(pi_bin());
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root.join("home"))
        .env("PI_CODING_AGENT_DIR", root.join("agent"))
        .env("NO_COLOR", "1")
        .current_dir(root.join("work"));
    for (key, value) in extra {
        command.env(key, value);
    }
    command
}

fn time_process(mut command: Command) -> Duration {
    let start = Instant::now();
    let output = command.output().expect("run pi");
    let elapsed = start.elapsed();
    assert!(
        output.status.success(),
        "pi failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    elapsed
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| arg != "--bench")
        .collect();
    let large = args
        .first()
        .filter(|arg| !arg.is_empty())
        .map(PathBuf::from);
    let runs: usize = args.get(1).and_then(|runs| runs.parse().ok()).unwrap_or(21);
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let root = scratch.path();
    for dir in ["home", "work", "agent"] {
        std::fs::create_dir_all(root.join(dir)).expect("dirs");
    }
    let agent = root.join("agent");
    let files = write_reference_dir(&agent);
    let env = Env::from_parts(
        [(
            "PI_CODING_AGENT_DIR".to_owned(),
            agent.to_string_lossy().into_owned(),
        )]
        .into_iter()
        .collect(),
        root.join("work"),
        Some(root.join("home")),
    );
    let db = agent.join("pi.db");

    // The first automatic import (every file new), for orientation.
    let start = Instant::now();
    let output = pi(root, &["sessions", "list", "--all", "--json"], &[])
        .output()
        .expect("run pi");
    assert!(output.status.success());
    let listed: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(listed.as_array().map(Vec::len), Some(files));
    println!(
        "first automatic import of {files} files ({TURNS} turns each) by `pi sessions list`: {:.0} ms",
        millis(start.elapsed())
    );

    // 1. The start-up check, in-process: open read-only as `sessions list` does, then run.
    let auto = AutoImport::for_command(&env);
    let mut checks = Vec::new();
    let mut with_open = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let store = SessionStore::open_read_only(store_config(&db)).expect("open");
        let opened = Instant::now();
        let outcome = auto.run(&store, &|| {
            panic!("nothing changed: no writer is needed");
        });
        let done = Instant::now();
        assert_eq!(outcome.found, files);
        assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
        checks.push(done - opened);
        with_open.push(done - start);
    }
    let (min, median) = stats(&mut checks);
    println!(
        "start-up check, {files} unchanged files (AutoImport::run): min {min:.2} ms, median {median:.2} ms (goal < 5 ms)"
    );
    let (min, median) = stats(&mut with_open);
    println!("  with the read-only open of the database: min {min:.2} ms, median {median:.2} ms");
    let mut listing = Vec::new();
    let mut listing_off = Vec::new();
    for _ in 0..runs {
        listing.push(time_process(pi(
            root,
            &["sessions", "list", "--all", "--json"],
            &[],
        )));
        listing_off.push(time_process(pi(
            root,
            &["sessions", "list", "--all", "--json"],
            &[("PI_AUTO_IMPORT", "0")],
        )));
    }
    let (min_on, median_on) = stats(&mut listing);
    let (min_off, median_off) = stats(&mut listing_off);
    println!(
        "`pi sessions list --all --json` process: with the check min {min_on:.2} / median {median_on:.2} ms, PI_AUTO_IMPORT=0 min {min_off:.2} / median {median_off:.2} ms (difference of medians {:.2} ms)",
        median_on - median_off
    );

    // 2. `pi import DIR` of the unchanged directory.
    let sessions = agent.join("sessions");
    let sessions_arg = sessions.to_string_lossy().into_owned();
    let mut reimports = Vec::new();
    for _ in 0..runs {
        reimports.push(time_process(pi(root, &["import", &sessions_arg], &[])));
    }
    let (min, median) = stats(&mut reimports);
    println!(
        "`pi import DIR`, {files} unchanged sessions (a whole process): min {min:.1} ms, median {median:.1} ms (goal < 100 ms)"
    );

    // 3. 10 entries appended to a large file.
    let large = match large {
        Some(path) => path,
        None => {
            let path = root.join("large.jsonl");
            write_large(&path, 100_000);
            path
        }
    };
    let copy = root.join("large-copy.jsonl");
    std::fs::copy(&large, &copy).expect("copy the large file");
    let size_mb = std::fs::metadata(&copy).expect("stat").len() as f64 / 1_048_576.0;
    let large_db = root.join("large.db");
    let store = SessionStore::open(store_config(&large_db)).expect("open");
    let start = Instant::now();
    let report = pi::cli::import::import_file(&store, &copy, ImportMode::Merge, &mut |_| {})
        .expect("import");
    assert!(report.error.is_none(), "{:?}", report.error);
    let entries = report.entries;
    println!(
        "large file: {} ({size_mb:.1} MiB, {entries} entries), first import {:.1} s",
        large.display(),
        start.elapsed().as_secs_f64()
    );
    let mut parent = last_id(&copy);
    let mut serial = 0usize;
    let mut append_ten = |parent: &mut String| {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&copy)
            .expect("open for append");
        let mut bytes = Vec::new();
        for turn in 0..10 {
            serial += 1;
            let id = format!("b{serial:07x}");
            let role = if turn % 2 == 0 { "user" } else { "assistant" };
            let text =
                "an appended sentence of the next turn of the session. ".repeat(10 + turn * 5);
            let line = message_line(
                &id,
                Some(parent),
                1_800_000_000_000 + serial as i64,
                role,
                &text,
            );
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
            *parent = id;
        }
        file.write_all(&bytes).expect("append");
    };
    let mut in_process = Vec::new();
    for _ in 0..runs {
        append_ten(&mut parent);
        let start = Instant::now();
        let report = pi::cli::import::import_file(&store, &copy, ImportMode::Merge, &mut |_| {})
            .expect("import");
        in_process.push(start.elapsed());
        assert_eq!(report.added, 10, "{report:?}");
        assert_eq!(report.read.as_str(), "appended");
    }
    drop(store);
    let (min, median) = stats(&mut in_process);
    println!(
        "10 appended entries to the large file (import_file in-process): min {min:.2} ms, median {median:.2} ms (goal < 50 ms)"
    );
    let db_arg = large_db.to_string_lossy().into_owned();
    let copy_arg = copy.to_string_lossy().into_owned();
    let mut processes = Vec::new();
    for _ in 0..runs {
        append_ten(&mut parent);
        processes.push(time_process(pi(
            root,
            &["--db", &db_arg, "import", &copy_arg],
            &[],
        )));
    }
    let (min, median) = stats(&mut processes);
    println!(
        "10 appended entries to the large file (`pi import FILE`, a whole process): min {min:.1} ms, median {median:.1} ms"
    );
}
