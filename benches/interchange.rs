//! Benchmark of the JSONL interchange: importing a large reference session file into a fresh
//! database (entries/s, MB/s) against the reference's own `SessionManager.open` of the same
//! file in the same run, re-importing it unchanged, and exporting it (MB/s).
//!
//! ```text
//! node ../shared/tools/pi-oracle/gen-large.mjs 100000 /tmp/large.jsonl   # PI_PKG_DIR set
//! cargo bench --bench interchange -- /tmp/large.jsonl [RUNS]
//! ```
//!
//! The reference is timed by `benches/reference-open.mjs` with the pinned package of
//! `tests/interop/` (`npm ci` there first). Not run in CI. Figures go to `docs/BENCHMARKS.md`.
//!
//! The store maintains the full-text search index in the import transaction (derived rows),
//! so the import below is "with search index"; `PI_BENCH_LABEL` names the variant in the
//! output so figures of two builds can be put side by side.
//!
//! Wall-clock figures on a shared machine are noisy, so CPU seconds (user + system, every
//! thread) are printed beside them for both sides. Other knobs: `PI_BENCH_NO_REFERENCE=1`
//! skips the reference, `PI_BENCH_ONLY_IMPORT=1` runs the import alone (for profiling), and
//! `PI_BENCH_PAGE_SIZE=N` creates the databases with another SQLite page size (an
//! experiment: the store itself uses SQLite's default), `PI_BENCH_FTS_CONFIG=key=N,…` stores
//! FTS5 options (`automerge`, `hashsize`, …) in each new database before its import, and
//! `PI_BENCH_FTS_STATS=1` prints the index's options, segments and size after each import.
//! Every import also prints the bytes it moved through read and write system calls, a
//! measure of SQLite's page traffic that machine noise does not change.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi::jsonl::SessionReader;
use pi::store::{ImportMode, SessionStore, StoreConfig, StoreLocation};
use pi::support::clock::SystemClock;
use pi::support::ids::IdSource;

/// Returns this process's CPU time (user + system) in seconds, from `/proc/self/stat`
/// (`None` where that does not exist). Under a loaded machine CPU time varies less than
/// wall-clock time.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may contain spaces) start after ") ".
    let rest = stat.rsplit_once(") ")?.1;
    let fields: Vec<&str> = rest.split(' ').collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// Returns the bytes this process moved through read and write system calls (`rchar`,
/// `wchar` of `/proc/self/io`): SQLite's page reads and writes (WAL, checkpoint) are a
/// measure of work that machine noise does not change.
fn io_bytes() -> Option<(u64, u64)> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    let field = |name: &str| {
        io.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse::<u64>().ok())
    };
    Some((field("rchar:")?, field("wchar:")?))
}

/// A writer that only counts bytes.
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn open_store(path: &Path) -> SessionStore {
    // Experiment hook: a database created with another page size (`PI_BENCH_PAGE_SIZE`).
    if let Some(size) = std::env::var("PI_BENCH_PAGE_SIZE")
        .ok()
        .and_then(|size| size.parse::<u32>().ok())
        && !path.exists()
    {
        let conn = rusqlite::Connection::open(path).expect("create the database");
        conn.execute_batch(&format!("PRAGMA page_size = {size}; VACUUM;"))
            .expect("set the page size");
    }
    let store = SessionStore::open(StoreConfig {
        location: StoreLocation::File(path.to_path_buf()),
        clock: Arc::new(SystemClock),
        ids: Arc::new(IdSource::seeded(1)),
        busy_timeout: Duration::from_secs(30),
    })
    .expect("open the benchmark database");
    // Experiment hook: FTS5 options stored in the index's config before the import
    // (`PI_BENCH_FTS_CONFIG=hashsize=8388608,automerge=8`).
    if let Ok(config) = std::env::var("PI_BENCH_FTS_CONFIG") {
        let conn = rusqlite::Connection::open(path).expect("open the database");
        for option in config.split(',').filter(|option| !option.is_empty()) {
            let (key, value) = option.split_once('=').expect("KEY=VALUE");
            let value: i64 = value.parse().expect("an integer value");
            conn.execute(
                "INSERT INTO search_fts (search_fts, rank) VALUES (?1, ?2)",
                rusqlite::params![key, value],
            )
            .expect("set an FTS5 option");
        }
    }
    store
}

/// Imports one file as `pi import` does (read, parse on a second thread, store in one
/// transaction); returns (entries added, wall seconds, CPU seconds of the process).
fn import(store: &SessionStore, file: &Path) -> (u64, f64, f64) {
    let io = io_bytes();
    let cpu = cpu_seconds().unwrap_or(0.0);
    let start = Instant::now();
    let report =
        pi::cli::import::import_file(store, file, ImportMode::Merge, &mut |_| {}).expect("import");
    assert!(report.error.is_none(), "{:?}", report.error);
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds().unwrap_or(0.0) - cpu;
    if let (Some((read_before, written_before)), Some((read, written))) = (io, io_bytes()) {
        println!(
            "  one import: {wall:6.2} s, cpu {cpu:5.2} s, read {:7.1} MiB, written {:7.1} MiB",
            (read - read_before) as f64 / 1_048_576.0,
            (written - written_before) as f64 / 1_048_576.0
        );
    }
    (report.added, wall, cpu)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Times the reference: (best wall, median wall, best CPU) seconds of `SessionManager.open`.
fn reference_open(file: &Path, runs: usize) -> Option<(f64, f64, f64)> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/reference-open.mjs");
    let output = Command::new("node")
        .arg(script)
        .arg(file)
        .arg(runs.to_string())
        .output()
        .ok()?;
    if !output.status.success() {
        eprintln!(
            "reference timing failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    let mut open: Vec<f64> = value["openMs"]
        .as_array()?
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .map(|ms| ms / 1000.0)
        .collect();
    let best = open.iter().copied().fold(f64::INFINITY, f64::min);
    let best_cpu = value["openCpuMs"]
        .as_array()?
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .map(|ms| ms / 1000.0)
        .fold(f64::INFINITY, f64::min);
    Some((best, median(&mut open), best_cpu))
}

/// Times reading alone (split, classify, typed views), without a database.
fn read_only(file: &Path, mb: f64) {
    let bytes = std::fs::read(file).expect("read the session file");
    let cpu = cpu_seconds().unwrap_or(0.0);
    let start = Instant::now();
    let reader = SessionReader::new(&bytes).expect("a valid session file");
    let lines = reader.count();
    let read_s = start.elapsed().as_secs_f64();
    let read_cpu = cpu_seconds().unwrap_or(0.0) - cpu;
    drop(bytes);
    println!(
        "read only (no database): {read_s:6.2} s (cpu {read_cpu:5.2} s)  {:9.0} lines/s  {:6.1} MiB/s",
        lines as f64 / read_s,
        mb / read_s
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| arg != "--bench")
        .collect();
    let Some(file) = args
        .first()
        .cloned()
        .or_else(|| std::env::var("PI_BENCH_FILE").ok())
    else {
        eprintln!("usage: cargo bench --bench interchange -- FILE.jsonl [RUNS]");
        eprintln!("  (make FILE with ../shared/tools/pi-oracle/gen-large.mjs 100000 FILE)");
        return;
    };
    let file = PathBuf::from(file);
    let runs: usize = args.get(1).and_then(|runs| runs.parse().ok()).unwrap_or(3);
    let label = std::env::var("PI_BENCH_LABEL").unwrap_or_else(|_| "with search index".into());
    let size = std::fs::metadata(&file).expect("the session file").len();
    let mb = size as f64 / 1_048_576.0;
    println!("file: {} ({mb:.1} MiB)", file.display());

    // Reading alone (split, classify, typed views), for orientation.
    if std::env::var_os("PI_BENCH_ONLY_IMPORT").is_none() {
        read_only(&file, mb);
    }

    let mut import_times = Vec::new();
    let mut import_cpu = Vec::new();
    let mut entries = 0;
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let mut last_db = PathBuf::new();
    for run in 0..runs {
        let db = scratch.path().join(format!("import-{run}.db"));
        let store = open_store(&db);
        let (added, seconds, cpu) = import(&store, &file);
        if std::env::var_os("PI_BENCH_FTS_STATS").is_some() {
            let conn = rusqlite::Connection::open(&db).expect("open the database");
            let config: Vec<(String, String)> = conn
                .prepare("SELECT k, CAST(v AS TEXT) FROM search_fts_config")
                .and_then(|mut stmt| {
                    stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                        .collect()
                })
                .expect("read the FTS config");
            let (data_rows, data_bytes): (i64, i64) = conn
                .query_row(
                    "SELECT COUNT(DISTINCT id >> 37), SUM(LENGTH(block)) FROM search_fts_data WHERE id > 10",
                    [],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .expect("count the FTS data");
            println!(
                "fts: config {config:?}, {data_rows} segments, {:.1} MiB",
                data_bytes as f64 / 1_048_576.0
            );
        }
        entries = added;
        import_times.push(seconds);
        import_cpu.push(cpu);
        last_db = db;
    }
    let best_import = import_times.iter().copied().fold(f64::INFINITY, f64::min);
    let median_import = median(&mut import_times.clone());
    let best_import_cpu = import_cpu.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "import ({label}): best {best_import:6.2} s, median {median_import:6.2} s (cpu {best_import_cpu:5.2} s)  {:9.0} entries/s  {:6.1} MiB/s",
        entries as f64 / best_import,
        mb / best_import
    );

    if std::env::var_os("PI_BENCH_ONLY_IMPORT").is_some() {
        return;
    }
    let store = open_store(&last_db);
    let (added, reimport_s, _) = import(&store, &file);
    assert_eq!(added, 0, "re-import is unchanged");
    println!(
        "re-import (unchanged): {reimport_s:6.2} s  {:9.0} entries/s",
        entries as f64 / reimport_s
    );

    let session = store.list(&pi::store::ListScope::All).expect("list")[0]
        .id
        .clone();
    let mut export_times = Vec::new();
    let mut exported = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let mut counter = Counter(0);
        store.export_jsonl(&session, &mut counter).expect("export");
        export_times.push(start.elapsed().as_secs_f64());
        exported = counter.0;
    }
    let best_export = export_times.iter().copied().fold(f64::INFINITY, f64::min);
    let export_mb = exported as f64 / 1_048_576.0;
    println!(
        "export to memory: best {best_export:6.2} s  {:6.1} MiB/s",
        export_mb / best_export
    );
    let start = Instant::now();
    let out_file = scratch.path().join("export.jsonl");
    let mut out = io::BufWriter::new(std::fs::File::create(&out_file).expect("export file"));
    store.export_jsonl(&session, &mut out).expect("export");
    drop(out);
    let export_file_s = start.elapsed().as_secs_f64();
    println!(
        "export to a file: {export_file_s:6.2} s  {:6.1} MiB/s  (identical: {})",
        export_mb / export_file_s,
        std::fs::read(&out_file).ok() == std::fs::read(&file).ok()
    );

    if std::env::var_os("PI_BENCH_NO_REFERENCE").is_some() {
        return;
    }
    match reference_open(&file, runs) {
        Some((best, med, best_cpu)) => {
            println!(
                "reference SessionManager.open: best {best:6.2} s, median {med:6.2} s (cpu {best_cpu:5.2} s)  {:9.0} entries/s  {:6.1} MiB/s",
                entries as f64 / best,
                mb / best
            );
            println!(
                "ratio reference open / our import (>1: we are faster): wall best {:.2}x, median {:.2}x, cpu {:.2}x",
                best / best_import,
                med / median_import,
                best_cpu / best_import_cpu
            );
        }
        None => println!("reference: not measured (node or tests/interop/node_modules missing)"),
    }
}
