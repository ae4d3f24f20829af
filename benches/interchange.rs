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
//! "With the search index": this branch has no full-text index, so every import here is
//! without one. Once the store maintains an index in its append transaction, the import
//! below measures "with index"; `PI_BENCH_LABEL` names the variant in the output so figures
//! of two builds can be put side by side.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi::jsonl::SessionReader;
use pi::store::{ImportMode, ImportOptions, SessionStore, StoreConfig, StoreLocation};
use pi::support::clock::SystemClock;
use pi::support::ids::IdSource;

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
    SessionStore::open(StoreConfig {
        location: StoreLocation::File(path.to_path_buf()),
        clock: Arc::new(SystemClock),
        ids: Arc::new(IdSource::seeded(1)),
        busy_timeout: Duration::from_secs(30),
    })
    .expect("open the benchmark database")
}

/// Reads and imports one file; returns (entries added, seconds).
fn import(store: &SessionStore, file: &Path) -> (u64, f64) {
    let start = Instant::now();
    let bytes = std::fs::read(file).expect("read the session file");
    let reader = SessionReader::new(&bytes).expect("a valid session file");
    let header = reader.header().clone();
    let header_bytes = reader.header_bytes().to_vec();
    let source = file.to_string_lossy().into_owned();
    let options = ImportOptions {
        source: &source,
        mode: ImportMode::Merge,
    };
    let report = store
        .import_lines(&header, &header_bytes, reader, &options)
        .expect("import");
    (report.added, start.elapsed().as_secs_f64())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn reference_open(file: &Path, runs: usize) -> Option<(f64, f64)> {
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
    Some((best, median(&mut open)))
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
    let label = std::env::var("PI_BENCH_LABEL").unwrap_or_else(|_| "without search index".into());
    let size = std::fs::metadata(&file).expect("the session file").len();
    let mb = size as f64 / 1_048_576.0;
    println!("file: {} ({mb:.1} MiB)", file.display());

    // Reading alone (split, classify, typed views), for orientation.
    let bytes = std::fs::read(&file).expect("read the session file");
    let start = Instant::now();
    let reader = SessionReader::new(&bytes).expect("a valid session file");
    let lines = reader.count();
    let read_s = start.elapsed().as_secs_f64();
    drop(bytes);
    println!(
        "read only:        {read_s:7.2} s  {:9.0} lines/s  {:6.1} MiB/s",
        lines as f64 / read_s,
        mb / read_s
    );

    let mut import_times = Vec::new();
    let mut entries = 0;
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let mut last_db = PathBuf::new();
    for run in 0..runs {
        let db = scratch.path().join(format!("import-{run}.db"));
        let store = open_store(&db);
        let (added, seconds) = import(&store, &file);
        entries = added;
        import_times.push(seconds);
        last_db = db;
    }
    let best_import = import_times.iter().copied().fold(f64::INFINITY, f64::min);
    let median_import = median(&mut import_times.clone());
    println!(
        "import ({label}): best {best_import:6.2} s, median {median_import:6.2} s  {:9.0} entries/s  {:6.1} MiB/s",
        entries as f64 / best_import,
        mb / best_import
    );

    let store = open_store(&last_db);
    let (added, reimport_s) = import(&store, &file);
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

    match reference_open(&file, runs) {
        Some((best, med)) => {
            println!(
                "reference SessionManager.open: best {best:6.2} s, median {med:6.2} s  {:9.0} entries/s  {:6.1} MiB/s",
                entries as f64 / best,
                mb / best
            );
            println!(
                "ratio (reference open / our import), best: {:.2}x; median: {:.2}x  (>1: we are faster)",
                best / best_import,
                med / median_import
            );
        }
        None => println!("reference: not measured (node or tests/interop/node_modules missing)"),
    }
}
